#!/usr/bin/env bash
# Communicator constructors, raw host vs mpishim, T threads constructing at once.
#
#   bench/run_ctors.sh [openmpi] [mpich]     (default: every host built)
#
# For each host and each T in BENCH_CT_THREADS, runs build/<host>/bench/ctors
# (make -C bench ctors builds it; see bench/ctors.c: each thread makes
# MPI_Comm_dup + MPI_Comm_free pairs of a parent of its own that asserts
# mpi_assert_no_any_tag; microseconds a pair, the slowest thread's median of
# 10 timed runs of its pairs) on 2 ranks:
#
#   raw         mpirun -np 2 ctors -t T             (the host alone)
#   shim        through build/mpishim, the defaults (MPISHIM_MAP=comm)
#   tag         MPISHIM_MAP=tag MPISHIM_NUM_VCIS=4: every communicator spread
#               over 4 internal duplicates, made inside its constructor
#   tagucx      the same with MPISHIM_FABRIC=ucx: spread over the UCX lane's
#               4 endpoints, no duplicate
#   baseline    BENCH_BASELINE_OF (default tagucx) with the library of
#               another build folder, BENCH_BASELINE (only then): before/after
#               a change in one run
#
# Runs alternate: each round runs every T once in each configuration, in an
# order rotated from round to round. Open MPI gets --bind-to none.
#
# Output: per host a table of the median time of each configuration and its
# ratio to raw, also in bench/results/ctors-summary.txt with a machine
# header; every run is one CSV line
#   host,T,config,run,us_per_pair
# in bench/results/ctors-<host>.csv (NaN for a failed run, whose output is
# kept in bench/results/logs/). Exits 1 if any run failed.
#
# Environment:
#   BENCH_CT_THREADS  threads T                            (default "1 4")
#   BENCH_CT_PAIRS    pairs per thread                     (default 300)
#   BENCH_CONFIGS     comma list of configurations (default raw,shim,tag,tagucx)
#   BENCH_RUNS        rounds                               (default 5)
#   BENCH_TIMEOUT     seconds before a run is killed, NaN  (default 60)
#   BENCH_RESULTS     output folder                        (default bench/results)
#   BENCH_BASELINE, BENCH_BASELINE_OF  see baseline above
# MPISHIM_* variables of the caller are removed: each configuration sets its own.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
bench_setup ctors
tmo=${BENCH_TIMEOUT:-60}
threads=${BENCH_CT_THREADS:-1 4}
pairs=${BENCH_CT_PAIRS:-300}
IFS=, read -r -a configs <<< "${BENCH_CONFIGS:-raw,shim,tag,tagucx}"
baseline=${BENCH_BASELINE:-}
baseline_of=${BENCH_BASELINE_OF:-tagucx}

bench_posint BENCH_RUNS "$runs"
bench_posint BENCH_TIMEOUT "$tmo"
bench_posint BENCH_CT_PAIRS "$pairs"
for t in $threads; do
    if ! [[ $t =~ ^[1-9][0-9]*$ ]] || [ "$t" -gt 256 ]; then die "BENCH_CT_THREADS: '$t' is not a thread count (1..256)"; fi
done
[ -n "${threads// /}" ] || die "BENCH_CT_THREADS must not be empty"
for c in "${configs[@]}"; do
    case $c in raw|shim|tag|tagucx|baseline) ;;
        *) die "unknown configuration '$c' (raw shim tag tagucx baseline)" ;;
    esac
done
case $baseline_of in shim|tag|tagucx) ;; *) die "BENCH_BASELINE_OF: '$baseline_of' is not shim, tag or tagucx" ;; esac
bench_baseline_configs
bench_hosts "$@"
bench_baseline_hosts
# shellcheck disable=SC2206  # one cell per T
cells=($threads)
bench_start

bench_configs() { echo "${configs[*]}"; }

# bench_run HOST T CONFIG ROUND CSV: one run, its CSV line; prints the time
# or "failed".
bench_run() {
    local host=$1 t=$2 cfg=$3 round=$4 csv=$5
    local prog=$build/$host/bench/ctors lib=$build/$host/libmpishim.so as=$cfg
    local -a cmd flags envs=()
    # shellcheck disable=SC2206  # word splitting of the flags is intended
    flags=($MPIRUN_FLAGS)
    [ "$host" = openmpi ] && flags+=(--bind-to none)
    if [ "$cfg" = baseline ]; then as=$baseline_of lib=$baseline/$host/libmpishim.so; fi
    case $as in
        tag) envs=(MPISHIM_MAP=tag MPISHIM_NUM_VCIS=4) ;;
        tagucx) envs=(MPISHIM_MAP=tag MPISHIM_NUM_VCIS=4 MPISHIM_FABRIC=ucx) ;;
    esac
    if [ "$as" = raw ]; then
        cmd=("$MPIRUN" "${flags[@]}" -np 2 "$prog" -t "$t" -n "$pairs")
    else
        cmd=(env "${envs[@]}" "$build/mpishim" --host "$host" --lib "$lib" "$MPIRUN" "${flags[@]}" -np 2 "$prog" -t "$t" -n "$pairs")
    fi
    local out rc line why="" want=1 log=$results/logs/ctors-$host-T$t-$cfg-run$round.log
    [ "$as" = raw ] && want=0
    out=$(timeout -k 10 "$tmo" "${cmd[@]}" 2>&1)
    rc=$?
    line=$(grep -m 1 '^ctors shim=' <<< "$out")
    val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<< " $line"; }
    if [ $rc -ne 0 ] || [ -z "$line" ] || [ "$(val shim)" != "$want" ]; then
        why=$(bench_why "$rc" "$line" "$want")
    fi
    if [ -n "$why" ]; then
        bench_fail "$log" "$host T=$t $cfg run $round" "$why" "$out" "${cmd[@]}"
        echo "$host,$t,$cfg,$round,NaN" >> "$csv"
        echo failed
        return
    fi
    echo "$host,$t,$cfg,$round,$(val us_per_pair)" >> "$csv"
    val us_per_pair
}

# bench_table HOST CSV: median time per T and configuration, and each
# configuration's ratio to raw (above 1: slower than the host).
bench_table() { bench_t_table "$2" "microseconds per MPI_Comm_dup + MPI_Comm_free, the slowest thread's median of 10 timed runs"; }

header=$(
    echo "Communicator constructors (bench/ctors.c): 2 ranks, T threads each making $pairs MPI_Comm_dup +"
    echo "MPI_Comm_free pairs of a parent of its own that asserts no_any_tag; microseconds a pair (the slowest"
    echo "thread's median of 10 timed runs of its pairs), median of $runs alternating runs per T and"
    echo "configuration; xN/raw above 1 is slower."
    bench_header full
    echo "configs: ${configs[*]}; T: $threads"
    [ -z "$baseline" ] || echo "baseline = $baseline_of with the library of $baseline"
    echo "Open MPI: --bind-to none. $cores cores: 2T busy threads above that are oversubscribed."
)
echo "$header"
echo
bench_rounds "host,T,config,run,us_per_pair" ctors- "T=" "${cells[@]}"
bench_finish "; load average at the end: $(bench_loadavg)"
