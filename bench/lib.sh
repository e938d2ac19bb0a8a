# shellcheck shell=bash disable=SC2034,SC2154
# (SC2034, SC2154: the globals below are set for and read from the scripts)
# bench/lib.sh - what run_multirate.sh, run_partitioned.sh and run_rma.sh
# share, sourced by each (not run on its own).  One copy of the host checks,
# the machine header, the loop of alternating rounds and the summary, so
# that the three scripts cannot drift apart in how they measure or report.
#
# A script sets `here` (its folder), sources this file and calls
# bench_setup NAME first; then it defines three functions that the round
# loop calls back:
#   bench_configs HOST ITEM              the configurations of one item, in
#                                        table order, on one line
#   bench_run HOST ITEM CONFIG ROUND CSV one run: its CSV line(s) into CSV,
#                                        a short status on stdout (it runs in
#                                        the script's shell, so failures+=()
#                                        is kept)
#   bench_table HOST CSV                 the table(s) of one host
# Globals it sets: top build results runs extra (bench_setup); hosts
# (bench_hosts); cores summary failures t_begin (bench_start); body
# (bench_rounds); MPIRUN, MPIRUN_FLAGS and the rest of host.env (bench_rounds,
# for the host being run).  It reads header (the script's machine header).

# bench_setup NAME: NAME is the benchmark (multirate, partitioned, rma): the
# program build/<host>/bench/NAME, the files NAME-summary.txt and
# NAME-<host>.csv, and the messages of die() (run_NAME: ...).
bench_setup() {
    bench_name=$1
    top=$(cd "$here/.." && pwd)
    build=$top/build
    results=${BENCH_RESULTS:-$here/results}
    runs=${BENCH_RUNS:-5}
    extra=${BENCH_ARGS:-}
}

die() { echo "run_$bench_name: $*" >&2; exit 2; }

# The Multirate configurations in table order: run_multirate.sh runs them,
# plot.sh draws those a CSV holds (one list, so the plot cannot miss one).
multirate_configs=(raw global-spin global-block global-adaptive vci-spin vci-block vci-adaptive thread-adaptive
                   combine-adaptive offload-adaptive serial-adaptive tag-adaptive tagT-adaptive
                   fabric-shm fabric-tcp fabtag-shm ucx ucxtag ucxdef everywhere
                   ceiling-ucx ceiling-shm ceiling-tcp)

# bench_posint VARIABLE VALUE: dies unless VALUE is a positive integer.
bench_posint() {
    [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1: '$2' is not a positive integer"
}

# bench_hosts HOST...: the hosts to run (default: every host built) into
# hosts, each checked for the library and the program; then the environment
# every run shares.
bench_hosts() {
    local h v
    hosts=("$@")
    if [ ${#hosts[@]} -eq 0 ]; then
        for h in openmpi mpich; do [ -f "$build/$h/host.env" ] && hosts+=("$h"); done
    fi
    [ ${#hosts[@]} -gt 0 ] || die "nothing built under $build (run make at $top)"
    for h in "${hosts[@]}"; do
        case $h in openmpi|mpich) ;; *) die "unknown host '$h' (openmpi or mpich)" ;; esac
        [ -f "$build/$h/libmpishim.so" ] || die "$build/$h/libmpishim.so missing: run make at $top"
        [ -x "$build/$h/bench/$bench_name" ] || die "$build/$h/bench/$bench_name missing: run make -C $here $bench_name"
    done
    [ -x "$build/mpishim" ] || die "$build/mpishim (the launcher) missing: run make at $top"
    command -v timeout >/dev/null || die "timeout (coreutils) not found"

    # Open MPI refuses root without these; harmless elsewhere.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # MPISHIM_* variables of the caller are removed: each configuration sets its own.
    for v in $(env | sed -n 's/^\(MPISHIM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
}

# bench_start: the results folder, and the clock of the runs starts.
bench_start() {
    cores=$(nproc)
    mkdir -p "$results/logs"
    summary=$results/$bench_name-summary.txt
    failures=()
    t_begin=$SECONDS
}

# --- header --------------------------------------------------------------

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

libinfo() {
    local f=$1
    printf '%s (%s, md5 %s)' "${f#"$top"/}" "$(date -u -r "$f" '+%Y-%m-%d %H:%M UTC')" "$(md5sum < "$f" | cut -c1-12)"
}

bench_loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

bench_machine_line() {
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')   machine: $(uname -n), $cores cores (nproc), $(uname -sr)"
}

bench_load_line() {
    echo "load average at the start: $(bench_loadavg) (other work on the machine adds noise)"
}

bench_source_line() {
    echo "source: $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$top" diff --quiet HEAD -- src include 2>/dev/null || echo ' + uncommitted changes in src/ or include/')"
}

# bench_host_lines short|full: per host its mpirun and version; full adds
# the MPI version and the library (path, date, md5).
bench_host_lines() {
    local h
    for h in "${hosts[@]}"; do
        if [ "$1" = full ]; then
            # shellcheck disable=SC1090
            ( . "$build/$h/host.env"; printf '%-8s %s --version: %s; MPI %s\n' "$h" "$MPIRUN" "$(mpirun_version "$MPIRUN")" "$HOST_MPI_VERSION"
              printf '         %s\n' "$(libinfo "$build/$h/libmpishim.so")" )
        else
            # shellcheck disable=SC1090
            ( . "$build/$h/host.env"; printf '%-8s %s --version: %s\n' "$h" "$MPIRUN" "$(mpirun_version "$MPIRUN")" )
        fi
    done
}

# bench_header short|full: the lines every result file starts with (machine,
# load, source, hosts; see bench_host_lines for short and full).
bench_header() {
    bench_machine_line
    bench_load_line
    bench_source_line
    bench_host_lines "$1"
}

# --- tables --------------------------------------------------------------

# awk functions the tables of run_partitioned.sh and run_rma.sh share, put
# in front of their awk programs: isnum(x), hsize(bytes) ("64K", "1M"), and
# med(key), the median of the program's values v[key, 1..n[key]] ("" when
# there are none).
bench_awk='
    function isnum(x) { return x ~ /^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/ }
    function hsize(s) {
        if (s >= 1048576 && s % 1048576 == 0) return (s / 1048576) "M"
        if (s >= 1024 && s % 1024 == 0) return (s / 1024) "K"
        return s
    }
    function med(key,    m, a, b, x, t) {
        m = n[key] + 0
        if (m == 0) return ""
        for (a = 1; a <= m; a++) t[a] = v[key, a]
        for (a = 2; a <= m; a++) { x = t[a]; for (b = a - 1; b >= 1 && t[b] > x; b--) t[b + 1] = t[b]; t[b + 1] = x }
        return (m % 2) ? t[(m + 1) / 2] : (t[m / 2] + t[m / 2 + 1]) / 2
    }
'

# --- runs ----------------------------------------------------------------

# bench_fail LOG WHAT WHY OUTPUT CMD...: a failed run: its command, WHY and
# its OUTPUT into LOG, "WHAT: WHY (output: LOG)" into failures.
bench_fail() {
    local log=$1 what=$2 why=$3 out=$4
    shift 4
    { echo "# $*"; echo "# $why"; echo "$out"; } > "$log"
    failures+=("$what: $why (output: ${log#"$top"/})")
}

# bench_shim_mismatch WANT: why a run failed whose program saw the shim
# active (1) or not (0) against WANT.
bench_shim_mismatch() {
    echo "shim expected $([ "$1" = 1 ] && echo active || echo inactive), the program saw otherwise"
}

# bench_why RC LINE WANT: why a run that printed LINE (maybe empty) and
# exited RC under the time limit tmo failed: its exit code, the time-out,
# no result line, or the shim not in the state WANT (1 active, 0 not).
bench_why() {
    case $1 in
        0) if [ -n "$2" ]; then bench_shim_mismatch "$3"; else echo "no result line"; fi ;;
        124|137) echo "timed out after ${tmo}s" ;;
        *) echo "exit code $1" ;;
    esac
}

# bench_t_table CSV WHAT: for CSV lines host,T,config,run,value, a row per T
# of the caller's cells and a column per configuration of its configs: the
# median value (* where some runs failed), then each configuration's ratio
# to raw; WHAT says what the values are (run_testrate.sh, run_ctors.sh).
bench_t_table() {
    local csv=$1 what=$2
    awk -F, -v cfgs="${configs[*]}" -v order="${cells[*]}" -v what="$what" "$bench_awk"'
    $1 == "host" { next }
    { key = $2 SUBSEP $3; if (isnum($5)) { n[key]++; v[key, n[key]] = $5 + 0 } else bad[key]++ }
    END {
        nc = split(cfgs, C, " "); nr = split(order, R, " ")
        for (j = 1; j <= nc; j++) W[j] = length(C[j]) > 8 ? length(C[j]) : 8
        printf "%3s |", "T"
        for (j = 1; j <= nc; j++) printf " %*s", W[j] + 1, C[j]
        printf " |"
        for (j = 1; j <= nc; j++) if (C[j] != "raw") printf " %*s", W[j] + 4, C[j] "/raw"
        printf "\n"
        for (i = 1; i <= nr; i++) {
            printf "%3s |", R[i]
            r = med(R[i] SUBSEP "raw")
            for (j = 1; j <= nc; j++) {
                m = med(R[i] SUBSEP C[j])
                printf " %*s%s", W[j], m == "" ? "-" : sprintf("%.2f", m), bad[R[i] SUBSEP C[j]] ? "*" : " "
            }
            printf " |"
            for (j = 1; j <= nc; j++) if (C[j] != "raw") {
                m = med(R[i] SUBSEP C[j])
                printf " %*s", W[j] + 4, (m == "" || r == "" || r <= 0) ? "-" : sprintf("%.2fx", m / r)
            }
            printf "\n"
        }
        printf "%s, median of the runs (* some runs failed: the median is of the others)\n", what
    }' "$csv" | sed -e 's/ *$//'
}

# bench_rounds CSVHEAD LOGPREFIX LABELPREFIX ITEM...: per host, the CSV
# $results/NAME-<host>.csv (first line CSVHEAD; the host's old logs
# $results/logs/LOGPREFIX<host>-*.log removed), then BENCH_RUNS rounds, each
# running every ITEM once in every configuration, in an order rotated from
# round to round so that slow drifts of a noisy machine spread over all
# cells, one progress line per round and item on stderr (LABELPREFIX ITEM);
# then the host's table, printed and added to body.
bench_rounds() {
    local csvhead=$1 logprefix=$2 label=$3
    shift 3
    local host csv round item k nconf cfg line tab status=$results/.$bench_name.$$
    local -a cfgs
    body=""
    for host in "${hosts[@]}"; do
        # shellcheck disable=SC1090
        . "$build/$host/host.env"
        [ "$HOST_FLAVOR" = openmpi ] || MPIRUN_FLAGS=""
        csv=$results/$bench_name-$host.csv
        rm -f "$results/logs/$logprefix$host-"*.log
        echo "$csvhead" > "$csv"
        for round in $(seq "$runs"); do
            for item in "$@"; do
                read -r -a cfgs <<< "$(bench_configs "$host" "$item")"
                nconf=${#cfgs[@]}
                line=""
                for k in $(seq 0 $((nconf - 1))); do
                    cfg=${cfgs[$(( (k + round - 1) % nconf ))]}
                    # command substitution would lose failures+=() of bench_run: use a file
                    bench_run "$host" "$item" "$cfg" "$round" "$csv" > "$status"
                    line+=" $cfg=$(cat "$status")"
                done
                printf '%s round %d/%d %s:%s\n' "$host" "$round" "$runs" "$label$item" "$line" >&2
            done
        done
        rm -f "$status"
        tab=$(printf '== %s ==\n' "$host"; bench_table "$host" "$csv")
        echo "$tab"
        echo
        body+="$tab"$'\n\n'
    done
}

# --- baseline ------------------------------------------------------------

# With BENCH_BASELINE set (the script's $baseline: another build folder), the
# configuration "baseline" runs that folder's library: bench_baseline_configs
# adds it to configs unless listed, and without BENCH_BASELINE refuses it;
# bench_baseline_hosts (after bench_hosts) checks the folder has every host's
# library.
bench_baseline_configs() {
    local c
    if [ -n "$baseline" ]; then
        [[ " ${configs[*]} " == *" baseline "* ]] || configs+=(baseline)
    else
        for c in "${configs[@]}"; do [ "$c" != baseline ] || die "the baseline configuration needs BENCH_BASELINE"; done
    fi
}

bench_baseline_hosts() {
    local h
    [ -n "$baseline" ] || return 0
    for h in "${hosts[@]}"; do
        [ -f "$baseline/$h/libmpishim.so" ] || die "BENCH_BASELINE: $baseline/$h/libmpishim.so missing"
    done
}

# --- end -----------------------------------------------------------------

# bench_finish TOTAL_NOTE [SUMMARY_FAILED [STDOUT_FAILED]]: the summary file
# (header, tables, total time followed by TOTAL_NOTE, the failures under
# "N SUMMARY_FAILED:", default "N failed run(s):"), the same on stdout in
# short (the failures under "N run(s) failed (recorded as NaN)STDOUT_FAILED:"),
# then exits: 1 if any run failed, else 0.
bench_finish() {
    local note=$1 sfail=${2:-failed run(s)} ofail=${3:-}
    local elapsed=$((SECONDS - t_begin))
    {
        echo "$header"
        echo
        printf '%s' "$body"
        echo "total time of the runs: $((elapsed / 60)) min $((elapsed % 60)) s$note"
        if [ ${#failures[@]} -gt 0 ]; then
            echo "${#failures[@]} $sfail:"
            printf '  %s\n' "${failures[@]}"
        fi
    } > "$summary"

    echo "total time of the runs: $((elapsed / 60)) min $((elapsed % 60)) s"
    # shellcheck disable=SC2059  # the file names are the format
    echo "wrote $summary and $(printf "$results/$bench_name-%s.csv " "${hosts[@]}")"
    if [ ${#failures[@]} -gt 0 ]; then
        echo "${#failures[@]} run(s) failed (recorded as NaN)$ofail:"
        printf '  %s\n' "${failures[@]}"
        exit 1
    fi
    exit 0
}
