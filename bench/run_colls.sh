#!/usr/bin/env bash
# Blocking collectives at one thread per rank: raw host vs mpishim.
#
#   bench/run_colls.sh [openmpi] [mpich]     (default: every host built)
#
# bench/colls.c (MPI_THREAD_MULTIPLE, one thread, MPI_COMM_WORLD:
# MPI_Allreduce 4 B and 4 KiB, MPI_Bcast 4 B and 4 KiB, MPI_Barrier) at np
# ranks (BENCH_NP, default 2). Configurations:
#   raw          mpirun -np N colls (no shim)
#   default      through build/mpishim, no MPISHIM_* set (MPISHIM_COLL=auto:
#                a one-thread program's blocking collectives are the host's)
#   nonblocking  ... MPISHIM_COLL=nonblocking (the nonblocking twin + a wait)
# Table: median ns per call over BENCH_RUNS alternating runs (default 5),
# and each configuration's ratio to raw. Output:
# bench/results/colls-summary.txt and colls-<host>.csv.
#
# Environment: BENCH_NP (default 2), BENCH_RUNS, BENCH_CALLS (per
# collective and run, default 20000), BENCH_TIMEOUT (default 120),
# BENCH_RESULTS.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
bench_setup colls
np=${BENCH_NP:-2}
calls=${BENCH_CALLS:-20000}
tmo=${BENCH_TIMEOUT:-120}
bench_posint BENCH_NP "$np"
bench_posint BENCH_RUNS "$runs"
bench_posint BENCH_CALLS "$calls"
bench_posint BENCH_TIMEOUT "$tmo"
configs=(raw default nonblocking)
names=(allreduce4 allreduce4k bcast4 bcast4k barrier)
bench_hosts "$@"
bench_start

bench_configs() { echo "${configs[*]}"; }

bench_run() {
    local host=$1 cfg=$3 round=$4 csv=$5
    local prog=$build/$host/bench/colls
    local -a flags cmd
    read -r -a flags <<< "$MPIRUN_FLAGS"
    case $cfg in
        raw)         cmd=("$MPIRUN" "${flags[@]}" -np "$np" "$prog" -n "$calls") ;;
        default)     cmd=("$build/mpishim" --host "$host" "$MPIRUN" "${flags[@]}" -np "$np" "$prog" -n "$calls") ;;
        nonblocking) cmd=(env MPISHIM_COLL=nonblocking
                          "$build/mpishim" --host "$host" "$MPIRUN" "${flags[@]}" -np "$np" "$prog" -n "$calls") ;;
    esac
    local out rc line log=$results/logs/colls-$host-$cfg-run$round.log
    out=$(timeout -k 10 "$tmo" "${cmd[@]}" 2>&1)
    rc=$?
    line=$(grep -m 1 '^colls: ' <<< "$out")
    local want=1
    [ "$cfg" = raw ] && want=0
    if [ $rc -eq 0 ] && [ -n "$line" ] && grep -q " shim=$want " <<< "$line"; then
        local n vals=""
        for n in "${names[@]}"; do
            vals+=,$(sed -E "s/.* $n=([0-9.]+).*/\\1/" <<< "$line")
        done
        echo "$host,$np,$cfg,$round$vals" >> "$csv"
        echo ok
        return
    fi
    bench_fail "$log" "$host $cfg run $round" "$(bench_why $rc "$line" "$want")" "$out" "${cmd[@]}"
    echo "$host,$np,$cfg,$round,NaN,NaN,NaN,NaN,NaN" >> "$csv"
    echo NaN
}

bench_table() {
    awk -F, -v cfgs="${configs[*]}" -v names="${names[*]}" "$bench_awk"'
    NR > 1 { for (k = 5; k <= 9; k++) if (isnum($k)) { key = $3 SUBSEP k; v[key, ++n[key]] = $k } }
    END {
        nc = split(cfgs, C, " "); nn = split(names, N, " ")
        printf "median ns per call (ratio to raw)\n%-12s", "config"
        for (j = 1; j <= nn; j++) printf " %18s", N[j]
        printf "\n"
        for (c = 1; c <= nc; c++) {
            printf "%-12s", C[c]
            for (j = 1; j <= nn; j++) {
                t = med(C[c] SUBSEP (j + 4)); r = med("raw" SUBSEP (j + 4))
                if (t == "") printf " %18s", "-"
                else printf " %10.1f (%4.2fx)", t, (r != "" && r > 0 ? t / r : 0)
            }
            printf "\n"
        }
    }' "$2"
}

header=$(
    echo "blocking collectives at one thread (bench/colls.c): MPI_THREAD_MULTIPLE, np $np, MPI_COMM_WORLD,"
    echo "$calls calls per collective and run, rank 0's clock; median of $runs alternating runs."
    bench_header short
)
echo "$header"
echo
bench_rounds "host,np,config,run,allreduce4_ns,allreduce4k_ns,bcast4_ns,bcast4k_ns,barrier_ns" "colls-" "np=" "$np"
bench_finish ""
