#!/usr/bin/env bash
# Empty tests a second per thread, raw host vs mpishim, T threads at once.
#
#   bench/run_testrate.sh [openmpi] [mpich]     (default: every host built)
#
# For each host and each T in BENCH_TR_THREADS, runs build/<host>/bench/testrate
# (make -C bench testrate builds it; see bench/testrate.c: each thread tests
# a receive of its own that never matches, on a communicator of its own, for
# 1 s; the mean over the threads, in million tests a second) on one rank:
#
#   raw         mpirun -np 1 testrate -t T          (the host alone)
#   shim        through build/mpishim, the defaults
#   ucx         MPISHIM_FABRIC=ucx MPISHIM_NUM_VCIS=T: a UCX worker per thread
#   thread      MPISHIM_PROGRESS=thread: a progress thread, which the tests
#               leave the polling to while they run in a loop
#   offload     MPISHIM_PROGRESS=offload
#   nosolo      the defaults with MPISHIM_SOLO=0: every request the shim's,
#               the path a test takes while another thread is inside MPI
#   everywhere  mpirun -np T testrate -t 1: T single-threaded ranks
#   baseline    BENCH_BASELINE_OF (default ucx; shim, ucx, thread, offload or nosolo) with the library of another
#               build folder, BENCH_BASELINE (only then): before/after a
#               change in one run
#
# A receive whose cancel does not show in its status fails the run. Runs
# alternate: each round runs every T once in each configuration, in an order
# rotated from round to round. Open MPI gets --bind-to none.
#
# Output: per host a table of the median rate of each configuration and its
# ratio to raw, also in bench/results/testrate-summary.txt with a machine
# header; every run is one CSV line
#   host,T,config,run,mtests_per_s_per_thread
# in bench/results/testrate-<host>.csv (NaN for a failed run, whose output
# is kept in bench/results/logs/). Exits 1 if any run failed.
#
# Environment:
#   BENCH_TR_THREADS  threads T                              (default "1 2")
#   BENCH_TR_ARGS     more testrate arguments, e.g. -w (a waiting thread besides) (default none)
#   BENCH_CONFIGS     comma list of configurations (default raw,shim,ucx,everywhere)
#   BENCH_RUNS        rounds                                 (default 5)
#   BENCH_TIMEOUT     seconds before a run is killed, NaN    (default 30)
#   BENCH_RESULTS     output folder                   (default bench/results)
#   BENCH_BASELINE, BENCH_BASELINE_OF  see baseline above
# MPISHIM_* variables of the caller are removed: each configuration sets its own.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
bench_setup testrate
tmo=${BENCH_TIMEOUT:-30}
threads=${BENCH_TR_THREADS:-1 2}
# shellcheck disable=SC2206  # word splitting of the arguments is intended
targs=(${BENCH_TR_ARGS:-})
IFS=, read -r -a configs <<< "${BENCH_CONFIGS:-raw,shim,ucx,everywhere}"
baseline=${BENCH_BASELINE:-}
baseline_of=${BENCH_BASELINE_OF:-ucx}

bench_posint BENCH_RUNS "$runs"
bench_posint BENCH_TIMEOUT "$tmo"
for t in $threads; do
    if ! [[ $t =~ ^[1-9][0-9]*$ ]] || [ "$t" -gt 256 ]; then die "BENCH_TR_THREADS: '$t' is not a thread count (1..256)"; fi
done
[ -n "${threads// /}" ] || die "BENCH_TR_THREADS must not be empty"
for c in "${configs[@]}"; do
    case $c in raw|shim|ucx|thread|offload|nosolo|everywhere|baseline) ;;
        *) die "unknown configuration '$c' (raw shim ucx thread offload nosolo everywhere baseline)" ;;
    esac
done
case $baseline_of in shim|ucx|thread|offload|nosolo) ;; *) die "BENCH_BASELINE_OF: '$baseline_of' is not shim, ucx, thread, offload or nosolo" ;; esac
bench_baseline_configs
bench_hosts "$@"
bench_baseline_hosts
# shellcheck disable=SC2206  # one cell per T
cells=($threads)
bench_start

bench_configs() { echo "${configs[*]}"; }

# bench_run HOST T CONFIG ROUND CSV: one run, its CSV line; prints the rate
# or "failed".
bench_run() {
    local host=$1 t=$2 cfg=$3 round=$4 csv=$5
    local prog=$build/$host/bench/testrate lib=$build/$host/libmpishim.so as=$cfg
    local -a cmd flags envs=()
    # shellcheck disable=SC2206  # word splitting of the flags is intended
    flags=($MPIRUN_FLAGS)
    [ "$host" = openmpi ] && flags+=(--bind-to none)
    if [ "$cfg" = baseline ]; then as=$baseline_of lib=$baseline/$host/libmpishim.so; fi
    case $as in
        ucx) envs=(MPISHIM_FABRIC=ucx "MPISHIM_NUM_VCIS=$t") ;;
        thread|offload) envs=("MPISHIM_PROGRESS=$as") ;;
        nosolo) envs=(MPISHIM_SOLO=0) ;;
    esac
    case $as in
        raw) cmd=("$MPIRUN" "${flags[@]}" -np 1 "$prog" -t "$t" "${targs[@]}") ;;
        everywhere) cmd=("$MPIRUN" "${flags[@]}" -np "$t" "$prog" -t 1 "${targs[@]}") ;;
        *) cmd=(env "${envs[@]}" "$build/mpishim" --host "$host" --lib "$lib" "$MPIRUN" "${flags[@]}" -np 1 "$prog" -t "$t" "${targs[@]}") ;;
    esac
    local out rc line why="" want=1 log=$results/logs/testrate-$host-T$t-$cfg-run$round.log
    case $as in raw|everywhere) want=0 ;; esac
    out=$(timeout -k 10 "$tmo" "${cmd[@]}" 2>&1)
    rc=$?
    line=$(grep -m 1 '^testrate shim=' <<< "$out")
    val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<< " $line"; }
    if [ $rc -eq 3 ]; then
        why="$(val failures) receive(s) whose cancel did not show"
    elif [ $rc -ne 0 ] || [ -z "$line" ] || [ "$(val shim)" != "$want" ]; then
        why=$(bench_why "$rc" "$line" "$want")
    fi
    if [ -n "$why" ]; then
        bench_fail "$log" "$host T=$t $cfg run $round" "$why" "$out" "${cmd[@]}"
        echo "$host,$t,$cfg,$round,NaN" >> "$csv"
        echo failed
        return
    fi
    echo "$host,$t,$cfg,$round,$(val mtests_per_s_per_thread)" >> "$csv"
    val mtests_per_s_per_thread
}

# bench_table HOST CSV: median rate per T and configuration, and each
# configuration's ratio to raw (above 1: faster than the host).
bench_table() { bench_t_table "$2" "million empty MPI_Test calls a second per thread"; }

header=$(
    echo "Empty tests (bench/testrate.c): T threads of one rank, each testing a receive of its own that never"
    echo "matches on a communicator of its own for 1 s (everywhere: T single-threaded ranks); million tests a"
    echo "second per thread, median of $runs alternating runs per T and configuration; xN/raw above 1 is faster."
    bench_header full
    echo "configs: ${configs[*]}; T: $threads${targs[*]:+; testrate ${targs[*]}}"
    [[ " ${targs[*]} " != *" -w "* ]] || echo "-w: a thread of each rank waits in MPI_Recv on thread 0's communicator beside the tests"
    [ -z "$baseline" ] || echo "baseline = $baseline_of with the library of $baseline"
    echo "Open MPI: --bind-to none. $cores cores: T busy threads above that are oversubscribed."
)
echo "$header"
echo
bench_rounds "host,T,config,run,mtests_per_s_per_thread" testrate- "T=" "${cells[@]}"
bench_finish "; load average at the end: $(bench_loadavg)"
