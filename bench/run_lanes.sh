#!/usr/bin/env bash
# The lanes' tables in one run, for a machine with real cores (at least 2T
# for the T measured), most important part first; each part's tables go to
# a file of their own as soon as it ends, so a run cut short keeps the parts
# it finished.
#
#   bench/run_lanes.sh [openmpi] [mpich]      (default: every host built)
#
# Parts (LANES_PARTS, in this order by default):
#   c        lanes-c.txt: Multirate -c (a communicator per thread pair), T in
#            LANES_THREADS_C: raw, the default without a lane, the UCX lane
#            (its own policy and the default one), libfabric's shm lane, MPI
#            everywhere, and the ceiling of each library (bench/ceiling.c)
#   shared   lanes-shared.txt: one shared communicator, T in LANES_THREADS:
#            raw, the default, the UCX lane under the default policy, the
#            same spread by tag (no_any_tag hint), MPI everywhere
#   testrate testrate.txt: empty tests a second per thread, T in
#            LANES_THREADS: raw, shim, ucx, thread, nosolo, everywhere
#   testrate-w  testrate-w.txt: the same beside a thread asleep in a wait (-w),
#            Open MPI only
#   startup  startup.txt: MPI_Init_thread and finalize, raw vs shim vs lanes
#
# Each part is run_multirate.sh, run_testrate.sh or run_startup.sh with
# fixed configurations (their headers say what every column is), its
# summaries and CSVs in a folder of its own under LANES_OUT.
#
# Environment:
#   LANES_OUT        output folder        (default bench/results/lanes-<UTC date>)
#   LANES_PARTS      comma list           (default c,shared,testrate,testrate-w,startup)
#   LANES_THREADS_C  T of the c part      (default "1 4 8")
#   LANES_THREADS    T of the others      (default "1 2 4 8")
#   BENCH_RUNS       alternating rounds   (default 5)
#   LANES_STARTUP_RUNS  rounds of the startup part (default 5)
#   BENCH_SECONDS    seconds a Multirate or testrate run (default 0.5)
# Estimated with the defaults on a 16-core machine, both hosts (runs times
# their length plus a start-up each; not yet run there): c 4.5 minutes,
# shared 3.5, testrate 2.5, testrate-w 1, startup 0.5. A call limited to 10
# minutes takes LANES_PARTS=c,shared, a second one the rest.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${LANES_OUT:-$here/results/lanes-$(date -u +%Y%m%d-%H%M)}
IFS=, read -r -a parts <<< "${LANES_PARTS:-c,shared,testrate,testrate-w,startup}"
tc=${LANES_THREADS_C:-1 4 8}
ts=${LANES_THREADS:-1 2 4 8}
runs=${BENCH_RUNS:-5}
secs=${BENCH_SECONDS:-0.5}
mkdir -p "$out" || exit 2
rc=0

# part NAME FILE COMMAND...: runs it with its results in $out/NAME, its
# output (the tables) in $out/FILE.
part() {
    local name=$1 file=$2 t0=$SECONDS
    shift 2
    mkdir -p "$out/$name"
    echo "run_lanes: $name ..." >&2
    env BENCH_RESULTS="$out/$name" "$@" > "$out/$file" 2>&1 || rc=1
    echo "run_lanes: $name done in $((SECONDS - t0)) s: $out/$file" >&2
}

for p in "${parts[@]}"; do
    case $p in
    c)
        part c lanes-c.txt BENCH_ARGS=-c BENCH_THREADS="$tc" BENCH_RUNS="$runs" BENCH_SECONDS="$secs" \
            BENCH_CONFIGS=raw,combine-adaptive,ucx,ucxdef,fabric-shm,everywhere,ceiling-ucx,ceiling-shm \
            "$here/run_multirate.sh" "$@" ;;
    shared)
        part shared lanes-shared.txt BENCH_THREADS="$ts" BENCH_RUNS="$runs" BENCH_SECONDS="$secs" \
            BENCH_CONFIGS=raw,combine-adaptive,ucxdef,ucxtag,everywhere \
            "$here/run_multirate.sh" "$@" ;;
    testrate)
        part testrate testrate.txt BENCH_TR_THREADS="$ts" BENCH_RUNS="$runs" BENCH_TR_ARGS="-d $secs" \
            BENCH_CONFIGS=raw,shim,ucx,thread,nosolo,everywhere \
            "$here/run_testrate.sh" "$@" ;;
    testrate-w)
        # Open MPI only: MPICH 4.0.2 never wakes a thread blocked in a
        # receive from its own rank (bench/testrate.c), raw too.
        if [ $# -eq 0 ] || printf '%s\n' "$@" | grep -qx openmpi; then
            part testrate-w testrate-w.txt BENCH_TR_THREADS="$ts" BENCH_RUNS="$runs" BENCH_TR_ARGS="-w -d $secs" \
                BENCH_CONFIGS=raw,shim,ucx,thread,nosolo \
                "$here/run_testrate.sh" openmpi
        fi ;;
    startup)
        part startup startup.txt BENCH_RUNS="${LANES_STARTUP_RUNS:-5}" "$here/run_startup.sh" "$@" ;;
    *)
        echo "run_lanes: unknown part '$p' (c, shared, testrate, testrate-w, startup)" >&2
        exit 2 ;;
    esac
done
exit "$rc"
