#!/usr/bin/env bash
# The threads.c-shaped pattern (bench/threads.c), raw host vs mpishim.
#
#   bench/run_threads.sh [openmpi] [mpich]     (default: every host built)
#
# Issue 15's "never slower than raw" pattern: 2 ranks, nt = 1..T threads in
# turn, blocking and windowed nonblocking messages of 0..1024 bytes on one
# communicator with one tag. Configurations:
#   raw          mpirun -np 2 threads (no shim)
#   raw-test     the same with -w test: no thread waits inside the host (the
#                form of design rules 2 and 3), to tell the host's cost of
#                that form from the shim's own
#   default      through build/mpishim, no MPISHIM_* set
#   vci          ... MPISHIM_PROGRESS=vci
#   global-spin  ... MPISHIM_PROGRESS=global MPISHIM_WAIT=spin
#   combine      ... MPISHIM_PROGRESS=combine
#   offload      ... MPISHIM_PROGRESS=offload
#   raw+spinbar, default+spinbar
#                raw and default with -b spin: the thread barrier spins as
#                MPICH's MTest_thread_barrier does, so threads that finish
#                first keep a core busy (compared with raw+spinbar)
# Runs alternate as in the other benchmarks (lib.sh). Output: per host, the
# median seconds of each phase and in all, and each configuration's time
# relative to raw (below 1.00x: faster than raw), into
# bench/results/threads-summary.txt; every run one CSV line in
# bench/results/threads-<host>.csv.
#
# Environment: BENCH_THREADS (T, default 4), BENCH_LOOPS (loops per thread
# and size, default 1000), BENCH_RUNS (default 5), BENCH_TIMEOUT (default
# 300), BENCH_RESULTS.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
bench_setup threads
threads=${BENCH_THREADS:-4}
loops=${BENCH_LOOPS:-1000}
tmo=${BENCH_TIMEOUT:-300}
bench_posint BENCH_THREADS "$threads"
bench_posint BENCH_LOOPS "$loops"
bench_posint BENCH_RUNS "$runs"
bench_posint BENCH_TIMEOUT "$tmo"
bench_hosts "$@"
bench_start
configs=(raw raw-test default vci global-spin combine offload raw+spinbar default+spinbar)

bench_configs() { echo "${configs[*]}"; }

bench_run() {
    local host=$1 item=$2 cfg=$3 round=$4 csv=$5
    local prog=$build/$host/bench/threads
    local -a flags cmd extra=()
    read -r -a flags <<< "$MPIRUN_FLAGS"
    [ "${cfg%+spinbar}" != "$cfg" ] && extra=(-b spin)
    case ${cfg%+spinbar} in
        raw)         cmd=("$MPIRUN" "${flags[@]}" -np 2 "$prog") ;;
        raw-test)    cmd=("$MPIRUN" "${flags[@]}" -np 2 "$prog" -w test) ;;
        default)     cmd=("$build/mpishim" --host "$host" "$MPIRUN" "${flags[@]}" -np 2 "$prog") ;;
        vci)         cmd=(env MPISHIM_PROGRESS=vci "$build/mpishim" --host "$host" "$MPIRUN" "${flags[@]}" -np 2 "$prog") ;;
        global-spin) cmd=(env MPISHIM_PROGRESS=global MPISHIM_WAIT=spin
                          "$build/mpishim" --host "$host" "$MPIRUN" "${flags[@]}" -np 2 "$prog") ;;
        combine|offload) cmd=(env MPISHIM_PROGRESS=$cfg
                          "$build/mpishim" --host "$host" "$MPIRUN" "${flags[@]}" -np 2 "$prog") ;;
    esac
    cmd+=(-t "$item" -l "$loops" "${extra[@]}")
    local out rc line log=$results/logs/threads-$host-$cfg-run$round.log
    out=$(timeout -k 10 "$tmo" "${cmd[@]}" 2>&1)
    rc=$?
    line=$(grep -m 1 '^threads: ' <<< "$out")
    local want=1
    case $cfg in raw|raw-test|raw+spinbar) want=0 ;; esac
    if [ $rc -eq 0 ] && [ -n "$line" ] && grep -q " shim=$want " <<< "$line"; then
        local v
        v=$(sed -E 's/.*procnull=([0-9.]+) blocking=([0-9.]+) nonblocking=([0-9.]+) total=([0-9.]+).*/\1,\2,\3,\4/' <<< "$line")
        echo "$host,$item,$cfg,$round,$v" >> "$csv"
        echo "${v##*,}s"
        return
    fi
    bench_fail "$log" "$host $cfg run $round" "$(bench_why $rc "$line" "$want")" "$out" "${cmd[@]}"
    echo "$host,$item,$cfg,$round,NaN,NaN,NaN,NaN" >> "$csv"
    echo NaN
}

bench_table() {
    awk -F, -v cfgs="${configs[*]}" "$bench_awk"'
    NR > 1 && isnum($8) { for (k = 5; k <= 8; k++) { key = $3 SUBSEP k; v[key, ++n[key]] = $k } }
    END {
        nc = split(cfgs, C, " ")
        printf "median seconds (2 ranks, nt = 1..T threads in turn)\n%-16s %9s %9s %12s %9s %9s\n", "config", "procnull", "blocking", "nonblocking", "total", "vs raw"
        for (c = 1; c <= nc; c++) {
            raw = med((C[c] ~ /[+]spinbar$/ ? "raw+spinbar" : "raw") SUBSEP 8)
            t = med(C[c] SUBSEP 8)
            if (t == "") { printf "%-16s %9s\n", C[c], "-"; continue }
            printf "%-16s %9.3f %9.3f %12.3f %9.3f %8.2fx\n", C[c], med(C[c] SUBSEP 5), med(C[c] SUBSEP 6), med(C[c] SUBSEP 7), t, (raw > 0 ? t / raw : 0)
        }
    }' "$2"
}

header=$(
    echo "threads.c-shaped pattern (bench/threads.c): T=$threads, $loops loops x 16 messages per thread and size,"
    echo "sizes 0..1024 B, one communicator, one tag; median of $runs alternating runs; time relative to raw"
    echo "(below 1.00x the shim is faster); +spinbar rows: the spinning thread barrier (-b spin), against raw+spinbar."
    bench_header short
)
echo "$header"
echo
bench_rounds "host,T,config,run,procnull_s,blocking_s,nonblocking_s,total_s" "threads-" "T=" "$threads"
bench_finish ""
