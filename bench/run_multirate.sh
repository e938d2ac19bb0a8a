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
#   thread-adaptive  ... and with MPISHIM_PROGRESS=thread (a progress thread)
#   combine-adaptive ... and with MPISHIM_PROGRESS=combine (queued posts, sync/queue.h)
#   offload-adaptive ... and MPISHIM_PROGRESS=offload (drained by a progress thread)
#   serial-adaptive  global-adaptive with MPISHIM_HOST_THREAD=serialized: the
#                    host at MPI_THREAD_SERIALIZED (its own locks off), every
#                    host call under the shim's one host lock
#   tag-adaptive     global-adaptive with MPISHIM_ASSERT=no_any_tag MPISHIM_MAP=tag:
#                    the communicator spread over one duplicate per VCI by tag
#                    (MPISHIM_NUM_VCIS auto: one per core)
#   tagT-adaptive    the same with MPISHIM_NUM_VCIS=2T: each of the 2T tags
#                    (data and ack per pair) on a duplicate of its own
#   fabric-shm       vci-adaptive with MPISHIM_FABRIC=shm MPISHIM_NUM_VCIS=T
#                      MPISHIM_ASSERT=no_any_tag (multirate names every tag):
#   fabric-tcp         every VCI its own libfabric endpoint (shm, or tcp;ofi_rxm)
#                      instead of a duplicate inside the host; with BENCH_ARGS=-c
#                      each thread pair's communicator gets a VCI of its own
#   fabtag-shm       fabric-shm with MPISHIM_ASSERT=no_any_tag MPISHIM_MAP=tag
#                      MPISHIM_NUM_VCIS=2T: the shared communicator spread by tag
#   ucx              vci-adaptive with MPISHIM_FABRIC=ucx MPISHIM_NUM_VCIS=T:
#                      every VCI its own UCX worker; no assertion needed
#   ucxtag           ucx with MPISHIM_ASSERT=no_any_tag MPISHIM_MAP=tag
#                      MPISHIM_NUM_VCIS=2T: the shared communicator spread by tag
#   ucxdef           MPISHIM_FABRIC=ucx MPISHIM_NUM_VCIS=T under the default
#                      policy (combine): what a user who only turns the lane
#                      on gets
#   everywhere       mpirun -np 2T multirate -p                 (no shim):
#                    MPI everywhere, T rank pairs of one thread each
#   ceiling-ucx      mpirun -np 2 ceiling -b ucx -t T           (no shim, no MPI
#   ceiling-shm        while timed): the same pattern on T UCX workers or
#   ceiling-tcp        libfabric endpoints (shm, tcp;ofi_rxm) per process,
#                      one per thread: what a lane on that library can reach
#                      at best (bench/ceiling.c); BENCH_ARGS apply (-c, -o
#                      change nothing there)
#   baseline         BENCH_BASELINE_OF (default combine-adaptive, the
#                    default policy) with another build's library,
#                    BENCH_BASELINE=<that checkout's build folder> (only
#                    then): before/after a change in one run, e.g.
#                    git worktree add /tmp/base <commit> && make -C /tmp/base
#                    BENCH_BASELINE=/tmp/base/build BENCH_CONFIGS=raw,global-adaptive,baseline
#                    or, for the UCX lane, BENCH_BASELINE_OF=ucx
#                    BENCH_CONFIGS=raw,ucx,baseline
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
#   BENCH_CONFIGS  comma list of configurations to run (default all)
#   BENCH_TIMEOUT  seconds before a run is killed and recorded NaN (default 120)
#   BENCH_RESULTS  output folder                     (default bench/results)
#   BENCH_BASELINE another build folder whose libmpishim.so the baseline
#                  configuration runs (default none: no baseline column)
#   BENCH_BASELINE_OF  the configuration the baseline column runs with
#                  that library (default combine-adaptive; any that runs
#                  the shim)
# MPISHIM_* variables of the caller are removed: each configuration sets its own.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
bench_setup multirate
threads=${BENCH_THREADS:-1 2 4 8}
secs=${BENCH_SECONDS:-1}
tmo=${BENCH_TIMEOUT:-120}

for t in $threads; do
    bench_posint BENCH_THREADS "$t"
done
[ -n "${threads// /}" ] || die "BENCH_THREADS is empty"
bench_posint BENCH_RUNS "$runs"
bench_posint BENCH_TIMEOUT "$tmo"
[[ $secs =~ ^[0-9]*\.?[0-9]+$ ]] || die "BENCH_SECONDS: '$secs' is not a number of seconds"

bench_hosts "$@"

configs=("${multirate_configs[@]}")
# Short column titles, same order.
titles=(raw g-spin g-block g-adapt v-spin v-block v-adapt t-adapt c-adapt o-adapt serial tag tagT f-shm f-tcp ft-shm ucx ucxtag ucxdef everywh
        ceil-u ceil-s ceil-t)
baseline=${BENCH_BASELINE:-}
bench_baseline_hosts
if [ -n "$baseline" ]; then
    baseline_of=${BENCH_BASELINE_OF:-combine-adaptive}
    case " ${multirate_configs[*]} " in
        *" $baseline_of "*) [ "$baseline_of" != raw ] && [ "$baseline_of" != everywhere ] &&
                                [ "${baseline_of#ceiling-}" = "$baseline_of" ] ||
                                die "BENCH_BASELINE_OF: $baseline_of runs no shim" ;;
        *) die "BENCH_BASELINE_OF: '$baseline_of' is not a configuration (${multirate_configs[*]})" ;;
    esac
    configs+=(baseline) titles+=(base)
fi
# BENCH_CONFIGS: a comma list of the configurations above to run (default all).
if [ -n "${BENCH_CONFIGS:-}" ]; then
    keep_c=() keep_t=()
    for i in "${!configs[@]}"; do
        if [[ ,$BENCH_CONFIGS, == *,${configs[$i]},* ]]; then
            keep_c+=("${configs[$i]}") keep_t+=("${titles[$i]}")
        fi
    done
    [ ${#keep_c[@]} -gt 0 ] || die "BENCH_CONFIGS: none of '$BENCH_CONFIGS' is a configuration (${configs[*]})"
    configs=("${keep_c[@]}") titles=("${keep_t[@]}")
fi

bench_start

bench_configs() { echo "${configs[*]}"; }

# bench_run HOST T CONFIG ROUND CSV: one run, its CSV line; prints the rate
# (M msg/s) or NaN.
bench_run() {
    local host=$1 t=$2 cfg=$3 round=$4 csv=$5
    local prog=$build/$host/bench/multirate
    local -a cmd
    # shellcheck disable=SC2206  # word splitting of flags is intended
    local -a flags=($MPIRUN_FLAGS) more=($extra) shim=("$build/mpishim" --host "$host")
    # The baseline column: its configuration with the other build's library.
    local what=$cfg
    if [ "$cfg" = baseline ]; then
        what=$baseline_of
        shim+=(--lib "$baseline/$host/libmpishim.so")
    fi
    case $what in
        raw)
            cmd=("$MPIRUN" "${flags[@]}" -np 2 "$prog" -t "$t") ;;
        everywhere)
            cmd=("$MPIRUN" "${flags[@]}" -np $((2 * t)) "$prog" -p) ;;
        ceiling-*)
            local b=${what#ceiling-}
            [ "$b" = tcp ] && b='tcp;ofi_rxm'
            cmd=("$MPIRUN" "${flags[@]}" -np 2 "$build/$host/bench/ceiling" -b "$b" -t "$t") ;;
        global-*|vci-*|thread-*|combine-*|offload-*)
            cmd=(env "MPISHIM_PROGRESS=${what%%-*}" "MPISHIM_WAIT=${what#*-}"
                 "${shim[@]}" "$MPIRUN" "${flags[@]}" -np 2 "$prog" -t "$t") ;;
        serial-adaptive)
            cmd=(env MPISHIM_HOST_THREAD=serialized
                 "${shim[@]}" "$MPIRUN" "${flags[@]}" -np 2 "$prog" -t "$t") ;;
        fabric-shm|fabric-tcp)
            # no_any_tag: Debian's libfabric (1.17) shm carries only such
            # communicators (docs/configuration.md, MPISHIM_FABRIC)
            cmd=(env MPISHIM_PROGRESS=vci MPISHIM_WAIT=adaptive "MPISHIM_FABRIC=${what#fabric-}"
                 MPISHIM_ASSERT=no_any_tag "MPISHIM_NUM_VCIS=$t"
                 "${shim[@]}" "$MPIRUN" "${flags[@]}" -np 2 "$prog" -t "$t") ;;
        fabtag-shm)
            cmd=(env MPISHIM_PROGRESS=vci MPISHIM_WAIT=adaptive MPISHIM_FABRIC=shm
                 MPISHIM_ASSERT=no_any_tag MPISHIM_MAP=tag "MPISHIM_NUM_VCIS=$((2 * t))"
                 "${shim[@]}" "$MPIRUN" "${flags[@]}" -np 2 "$prog" -t "$t") ;;
        ucx)
            cmd=(env MPISHIM_PROGRESS=vci MPISHIM_WAIT=adaptive MPISHIM_FABRIC=ucx "MPISHIM_NUM_VCIS=$t"
                 "${shim[@]}" "$MPIRUN" "${flags[@]}" -np 2 "$prog" -t "$t") ;;
        ucxtag)
            cmd=(env MPISHIM_PROGRESS=vci MPISHIM_WAIT=adaptive MPISHIM_FABRIC=ucx
                 MPISHIM_ASSERT=no_any_tag MPISHIM_MAP=tag "MPISHIM_NUM_VCIS=$((2 * t))"
                 "${shim[@]}" "$MPIRUN" "${flags[@]}" -np 2 "$prog" -t "$t") ;;
        ucxdef)
            cmd=(env MPISHIM_FABRIC=ucx "MPISHIM_NUM_VCIS=$t"
                 "${shim[@]}" "$MPIRUN" "${flags[@]}" -np 2 "$prog" -t "$t") ;;
        tag-adaptive|tagT-adaptive)
            local nv=auto
            [ "$what" = tagT-adaptive ] && nv=$((2 * t))
            cmd=(env MPISHIM_ASSERT=no_any_tag MPISHIM_MAP=tag "MPISHIM_NUM_VCIS=$nv"
                 "${shim[@]}" "$MPIRUN" "${flags[@]}" -np 2 "$prog" -t "$t") ;;
    esac
    cmd+=(-q -d "$secs" "${more[@]}")
    local out rc log=$results/logs/$host-T$t-$cfg-run$round.log
    out=$(timeout -k 10 "$tmo" "${cmd[@]}" 2>&1)
    rc=$?
    local rate
    rate=$(sed -n 's/^multirate .*mmsgs_per_s=\([0-9.eE+-]*\).*/\1/p' <<< "$out" | head -n 1)
    if [ $rc -eq 0 ] && [ -n "$rate" ]; then
        echo "$host,$t,$cfg,$round,$rate" >> "$csv"
        echo "$rate"
        return
    fi
    local why="exit code $rc"
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && why="timed out after ${tmo}s"
    [ $rc -eq 0 ] && why="no result line"
    bench_fail "$log" "$host T=$t $cfg run $round" "$why" "$out" "${cmd[@]}"
    echo "$host,$t,$cfg,$round,NaN" >> "$csv"
    echo NaN
}

# bench_table HOST CSV: the three tables of one host, from the CSV.
bench_table() {
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
        # Each lane against the ceiling of its library (bench/ceiling.c) at the
        # same T, where both were run.
        nl = 0
        for (c = 2; c <= nc; c++) {
            lib = C[c] ~ /^ucx/ ? "ceiling-ucx" : C[c] ~ /^(fabric|fabtag)-shm$/ ? "ceiling-shm" : C[c] == "fabric-tcp" ? "ceiling-tcp" : ""
            if (lib == "") continue
            for (k = 1; k <= nc; k++) if (C[k] == lib) { nl++; LC[nl] = c; LK[nl] = k }
        }
        if (nl > 0) {
            printf "\nlanes against the ceiling of their library at the same T\n%4s", "T"
            for (a = 1; a <= nl; a++) printf " %9s ", H[LC[a]] "/" substr(H[LK[a]], 6)
            printf "\n"
            for (i = 1; i <= nt; i++) {
                t = T[i]; printf "%4s", t
                for (a = 1; a <= nl; a++) printf " %s ", ratio(med[t, C[LC[a]]], med[t, C[LK[a]]])
                printf "\n"
            }
        }
        # The default policy is chosen from these numbers: rank the
        # configurations a user gets without hints (every shim one but the
        # hinted tag, tagT, fabtag and ucxtag) by the geometric mean over T
        # of their ratio to raw at the same T, the cells of every T counted,
        # so that no T is given up for another.
        nr = 0
        for (c = 2; c <= nc; c++) {
            if (C[c] == "everywhere" || C[c] ~ /^(tag|fabtag|ucxtag|ceiling)/) continue
            lg = 0; k = 0
            for (i = 1; i <= nt; i++) {
                t = T[i]
                if (!num(med[t, C[c]]) || !num(med[t, "raw"]) || med[t, C[c]] <= 0 || med[t, "raw"] <= 0) { k = -1; break }
                w = med[t, C[c]] / med[t, "raw"]
                lg += log(w); k++
                if (k == 1 || w < lo) lo = w
            }
            if (k <= 0) continue
            nr++; RN[nr] = H[c]; RG[nr] = exp(lg / k); RMIN[nr] = lo
        }
        if (nr > 0) {
            for (a = 2; a <= nr; a++)
                for (b = a; b > 1 && RG[b] > RG[b - 1]; b--) {
                    x = RG[b]; RG[b] = RG[b - 1]; RG[b - 1] = x
                    x = RN[b]; RN[b] = RN[b - 1]; RN[b - 1] = x
                    x = RMIN[b]; RMIN[b] = RMIN[b - 1]; RMIN[b - 1] = x
                }
            printf "\npolicies without hints, by geometric mean over T of the ratio to raw at the same T\n"
            printf "%10s %9s %9s\n", "config", "geomean", "lowest"
            for (a = 1; a <= nr; a++) printf "%10s %8.2fx %8.2fx\n", RN[a], RG[a], RMIN[a]
        }
        if (anyfail) printf "\n* some runs of this cell failed; the median is of the others\n"
    }'
}

# --- header --------------------------------------------------------------
header=$(
    echo "Multirate pairwise benchmark (bench/multirate.c): T pairs, 8-byte messages unless"
    echo "BENCH_ARGS says otherwise, window 128, ack per window; median of $runs alternating runs"
    echo "of ${secs}s each; M msg/s = millions of data messages per second, all pairs together."
    bench_header short
    echo "multirate options for every run: -q -d $secs${extra:+ $extra}"
    echo "configs: raw = host MPI alone; g-*/v-*/t-*/c-*/o-* = through mpishim with MPISHIM_PROGRESS="
    echo "         global/vci/thread/combine/offload and MPISHIM_WAIT=spin/block/adapt(ive); serial ="
    echo "         g-adapt with MPISHIM_HOST_THREAD=serialized; tag/tagT = g-adapt with"
    echo "         MPISHIM_ASSERT=no_any_tag MPISHIM_MAP=tag (VCIs auto / 2T); f-shm/f-tcp = v-adapt with"
    echo "         MPISHIM_FABRIC=shm/tcp, no_any_tag and T VCIs; ft-shm = f-shm with MPISHIM_MAP=tag and 2T VCIs;"
    echo "         ucx = v-adapt with MPISHIM_FABRIC=ucx and T VCIs; ucxtag = ucx with no_any_tag, MPISHIM_MAP=tag, 2T VCIs;"
    echo "         ucxdef = MPISHIM_FABRIC=ucx and T VCIs under the default policy (combine, an owner per VCI);"
    echo "         ceil-u/ceil-s/ceil-t = the lanes' ceiling (bench/ceiling.c, no shim, no MPI while timed):"
    echo "         T threads per process, each on its own UCX worker / libfabric shm / tcp;ofi_rxm endpoint;"
    echo "         everywh = MPI everywhere"
    echo "         (multirate -p, 2T ranks, raw host). Both modes run 2T busy entities: more than $cores"
    echo "         oversubscribes."
    [ -z "$baseline" ] || echo "         base = $baseline_of with the library of $baseline"
)
echo "$header"
echo

# --- runs ----------------------------------------------------------------
# shellcheck disable=SC2086  # the list of T is split into words
bench_rounds "host,T,config,run,mmsgs_per_s" "" "T=" $threads
bench_finish ""
