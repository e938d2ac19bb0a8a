#!/usr/bin/env bash
# Multirate pairwise message rate, raw host vs mpishim vs MPI everywhere.
#
#   bench/run_multirate.sh [openmpi] [mpich]     (default: every host built)
#
# For each host and each T in BENCH_THREADS, runs build/<host>/bench/multirate
# (make -C bench multirate builds it) in these configurations:
#
#   raw              mpirun -np 2 multirate -t T                (no shim)
#   global-spin      the same through build/mpishim with MPISHIM_PROGRESS=global
#   global-block       and MPISHIM_WAIT=spin|block|adaptive,
#   global-adaptive
#   vci-spin         ... and with MPISHIM_PROGRESS=vci
#   vci-block
#   vci-adaptive
#   everywhere       mpirun -np 2T multirate -p                 (no shim):
#                    MPI everywhere, T rank pairs of one thread each
#
# Every configuration does the same work: T pairs of entities, each sending
# windows of 128 eight-byte messages.  On a machine with fewer cores than
# 2T busy entities (threads or ranks) both modes are oversubscribed; the
# table says so.  Runs alternate: each round runs every (T, configuration)
# once, in an order rotated from round to round, so slow drifts of a noisy
# machine spread over all cells.
#
# Output: a table per host (median M msg/s; each shim configuration's ratio
# to raw at the same T and to raw at T=1), also written with a machine
# header to bench/results/multirate-summary.txt; every run is one CSV line
# (host,T,config,run,mmsgs_per_s) in bench/results/multirate-<host>.csv,
# NaN for a run that failed or timed out (its output is kept in
# bench/results/logs/).  Exits 1 if any run failed, after the tables.
#
# Environment:
#   BENCH_THREADS  thread pairs T to measure         (default "1 2 4 8")
#   BENCH_RUNS     rounds, i.e. runs per cell        (default 5)
#   BENCH_SECONDS  timed seconds per run (multirate -d)          (default 1)
#   BENCH_ARGS     more multirate options for every run, e.g. "-c" or
#                  "-c -o" or "-s 0" (default none: 8 B, window 128, one
#                  shared communicator)
#   BENCH_TIMEOUT  seconds before a run is killed and recorded NaN (default 120)
#   BENCH_RESULTS  output folder                     (default bench/results)
# MPISHIM_* variables of the caller are removed: each configuration sets its own.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=$top/build
results=${BENCH_RESULTS:-$here/results}
threads=${BENCH_THREADS:-1 2 4 8}
runs=${BENCH_RUNS:-5}
secs=${BENCH_SECONDS:-1}
extra=${BENCH_ARGS:-}
tmo=${BENCH_TIMEOUT:-120}

die() { echo "run_multirate: $*" >&2; exit 2; }

for t in $threads; do
    [[ $t =~ ^[1-9][0-9]*$ ]] || die "BENCH_THREADS: '$t' is not a positive integer"
done
[ -n "${threads// /}" ] || die "BENCH_THREADS is empty"
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS: '$runs' is not a positive integer"
[[ $tmo =~ ^[1-9][0-9]*$ ]] || die "BENCH_TIMEOUT: '$tmo' is not a positive integer"
[[ $secs =~ ^[0-9]*\.?[0-9]+$ ]] || die "BENCH_SECONDS: '$secs' is not a number of seconds"

hosts=("$@")
if [ ${#hosts[@]} -eq 0 ]; then
    for h in openmpi mpich; do [ -f "$build/$h/host.env" ] && hosts+=("$h"); done
fi
[ ${#hosts[@]} -gt 0 ] || die "nothing built under $build (run make at $top)"
for h in "${hosts[@]}"; do
    case $h in openmpi|mpich) ;; *) die "unknown host '$h' (openmpi or mpich)" ;; esac
    [ -f "$build/$h/libmpishim.so" ] || die "$build/$h/libmpishim.so missing: run make at $top"
    [ -x "$build/$h/bench/multirate" ] || die "$build/$h/bench/multirate missing: run make -C $here multirate"
done
[ -x "$build/mpishim" ] || die "$build/mpishim (the launcher) missing: run make at $top"
command -v timeout >/dev/null || die "timeout (coreutils) not found"

# Open MPI refuses root without these; harmless elsewhere.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for v in $(env | sed -n 's/^\(MPISHIM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

configs=(raw global-spin global-block global-adaptive vci-spin vci-block vci-adaptive everywhere)
# Short column titles, same order.
titles=(raw g-spin g-block g-adapt v-spin v-block v-adapt everywh)
cores=$(nproc)

mkdir -p "$results/logs"
summary=$results/multirate-summary.txt
failures=()
t_begin=$SECONDS

# run_one HOST T CONFIG ROUND: prints the rate (M msg/s) or NaN.
run_one() {
    local host=$1 t=$2 cfg=$3 round=$4
    local prog=$build/$host/bench/multirate
    local -a cmd
    # shellcheck disable=SC2206  # word splitting of flags is intended
    local -a flags=($MPIRUN_FLAGS) more=($extra)
    case $cfg in
        raw)
            cmd=("$MPIRUN" "${flags[@]}" -np 2 "$prog" -t "$t") ;;
        everywhere)
            cmd=("$MPIRUN" "${flags[@]}" -np $((2 * t)) "$prog" -p) ;;
        global-*|vci-*)
            cmd=(env "MPISHIM_PROGRESS=${cfg%%-*}" "MPISHIM_WAIT=${cfg#*-}"
                 "$build/mpishim" --host "$host" "$MPIRUN" "${flags[@]}" -np 2 "$prog" -t "$t") ;;
    esac
    cmd+=(-q -d "$secs" "${more[@]}")
    local out rc log=$results/logs/$host-T$t-$cfg-run$round.log
    out=$(timeout -k 10 "$tmo" "${cmd[@]}" 2>&1)
    rc=$?
    local rate
    rate=$(sed -n 's/^multirate .*mmsgs_per_s=\([0-9.eE+-]*\).*/\1/p' <<< "$out" | head -n 1)
    if [ $rc -eq 0 ] && [ -n "$rate" ]; then
        echo "$rate"
        return
    fi
    local why="exit code $rc"
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && why="timed out after ${tmo}s"
    [ $rc -eq 0 ] && why="no result line"
    { echo "# ${cmd[*]}"; echo "# $why"; echo "$out"; } > "$log"
    failures+=("$host T=$t $cfg run $round: $why (output: ${log#"$top"/})")
    echo NaN
}

# table HOST CSV: the three tables of one host, from the CSV.
table() {
    local host=$1 csv=$2
    awk -f "$here/medians.awk" "$csv" | awk -v cfgs="${configs[*]}" -v titles="${titles[*]}" \
        -v cores="$cores" -v host="$host" '
    function num(x) { return x != "nan" }
    function cell(x) { return num(x) ? sprintf(" %9.3f", x) : sprintf(" %9s", "-") }
    function ratio(a, b) { return (num(a) && num(b) && b > 0) ? sprintf("%8.2fx", a / b) : sprintf("%9s", "-") }
    BEGIN { nc = split(cfgs, C, " "); split(titles, H, " ") }
    {
        if (!($1 in hasT)) { hasT[$1] = 1; nt++; T[nt] = $1 }
        med[$1, $2] = $3; ok[$1, $2] = $4; bad[$1, $2] = $5
        if ($5 > 0) anyfail = 1
    }
    END {
        if (nt == 0) { print "  (no results)"; exit }
        t1 = ("1" in hasT) ? "1" : T[1]
        printf "median M msg/s (raw/shim: 2 ranks x T threads; everywh = MPI everywhere: 2T ranks x 1 thread)\n"
        printf "%4s", "T"; for (c = 1; c <= nc; c++) printf " %9s ", H[c]
        printf "  busy/cores\n"
        for (i = 1; i <= nt; i++) {
            t = T[i]; printf "%4s", t
            for (c = 1; c <= nc; c++) {
                s = cell(med[t, C[c]])
                if (bad[t, C[c]] > 0) s = s "*"; else s = s " "
                printf "%s", s
            }
            printf "  %d/%d%s\n", 2 * t, cores, (2 * t > cores) ? " oversubscribed" : ""
        }
        printf "\nratio to raw at the same T\n%4s", "T"
        for (c = 2; c <= nc; c++) printf " %9s ", H[c]
        printf "\n"
        for (i = 1; i <= nt; i++) {
            t = T[i]; printf "%4s", t
            for (c = 2; c <= nc; c++) printf " %s ", ratio(med[t, C[c]], med[t, "raw"])
            printf "\n"
        }
        printf "\nratio to raw at T=%s (%s M msg/s)\n%4s", t1, num(med[t1, "raw"]) ? sprintf("%.3f", med[t1, "raw"]) : "-", "T"
        for (c = 1; c <= nc; c++) printf " %9s ", H[c]
        printf "\n"
        for (i = 1; i <= nt; i++) {
            t = T[i]; printf "%4s", t
            for (c = 1; c <= nc; c++) printf " %s ", ratio(med[t, C[c]], med[t1, "raw"])
            printf "\n"
        }
        if (anyfail) printf "\n* some runs of this cell failed; the median is of the others\n"
    }'
}

# The first line of `mpirun --version`; Hydra's is a heading ("HYDRA build
# details:"), so there the first line that carries the version is used.
mpirun_version() {
    local out first
    out=$("$1" --version 2>&1)
    first=$(head -n 1 <<< "$out")
    case $first in
        *:) grep -m 1 -E '^[[:space:]]*Version:' <<< "$out" |
                sed -e 's/^[[:space:]]*Version:[[:space:]]*/HYDRA (MPICH) /' ;;
        *) echo "$first" ;;
    esac
}

# --- header --------------------------------------------------------------
header=$(
    echo "Multirate pairwise benchmark (bench/multirate.c): T pairs, 8-byte messages unless"
    echo "BENCH_ARGS says otherwise, window 128, ack per window; median of $runs alternating runs"
    echo "of ${secs}s each; M msg/s = millions of data messages per second, all pairs together."
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')   machine: $(uname -n), $cores cores (nproc), $(uname -sr)"
    echo "multirate options for every run: -q -d $secs${extra:+ $extra}"
    for h in "${hosts[@]}"; do
        # shellcheck disable=SC1090
        ( . "$build/$h/host.env"; printf '%-8s %s --version: %s\n' "$h" "$MPIRUN" "$(mpirun_version "$MPIRUN")" )
    done
    echo "configs: raw = host MPI alone; g-*/v-* = through mpishim with MPISHIM_PROGRESS=global/vci"
    echo "         and MPISHIM_WAIT=spin/block/adapt(ive); everywh = MPI everywhere (multirate -p,"
    echo "         2T ranks, raw host). Both modes run 2T busy entities: more than $cores oversubscribes."
)
echo "$header"
echo

# --- runs ----------------------------------------------------------------
body=""
for host in "${hosts[@]}"; do
    # shellcheck disable=SC1090
    . "$build/$host/host.env"
    [ "$HOST_FLAVOR" = openmpi ] || MPIRUN_FLAGS=""
    csv=$results/multirate-$host.csv
    rm -f "$results/logs/$host-"*.log
    echo "host,T,config,run,mmsgs_per_s" > "$csv"
    nconf=${#configs[@]}
    for round in $(seq "$runs"); do
        for t in $threads; do
            line=""
            for k in $(seq 0 $((nconf - 1))); do
                cfg=${configs[$(( (k + round - 1) % nconf ))]}
                # command substitution would lose failures+=() of run_one: use a file
                run_one "$host" "$t" "$cfg" "$round" > "$results/.rate.$$"
                rate=$(cat "$results/.rate.$$")
                echo "$host,$t,$cfg,$round,$rate" >> "$csv"
                line+=" $cfg=$rate"
            done
            printf '%s round %d/%d T=%d:%s\n' "$host" "$round" "$runs" "$t" "$line" >&2
        done
    done
    rm -f "$results/.rate.$$"
    tab=$(printf '== %s ==\n' "$host"; table "$host" "$csv")
    echo "$tab"
    echo
    body+="$tab"$'\n\n'
done

elapsed=$((SECONDS - t_begin))
{
    echo "$header"
    echo
    printf '%s' "$body"
    echo "total time of the runs: $((elapsed / 60)) min $((elapsed % 60)) s"
    if [ ${#failures[@]} -gt 0 ]; then
        echo "${#failures[@]} failed run(s):"
        printf '  %s\n' "${failures[@]}"
    fi
} > "$summary"

echo "total time of the runs: $((elapsed / 60)) min $((elapsed % 60)) s"
echo "wrote $summary and $(printf "$results/multirate-%s.csv " "${hosts[@]}")"
if [ ${#failures[@]} -gt 0 ]; then
    echo "${#failures[@]} run(s) failed (recorded as NaN):"
    printf '  %s\n' "${failures[@]}"
    exit 1
fi
exit 0
