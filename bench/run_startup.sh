#!/usr/bin/env bash
# Start-up and finalize cost: raw host vs mpishim, with and without a lane.
#
#   bench/run_startup.sh [openmpi] [mpich]     (default: every host built)
#
# bench/startup.c (MPI_Init_thread(MPI_THREAD_MULTIPLE), MPI_Finalize,
# nothing between) at np ranks (BENCH_NP, default 2). Configurations:
#   raw         mpirun -np N startup (no shim)
#   default     through build/mpishim, no MPISHIM_* set
#   ucx         ... MPISHIM_FABRIC=ucx MPISHIM_NUM_VCIS=4
#   fabric-shm  ... MPISHIM_FABRIC=shm MPISHIM_NUM_VCIS=4
#   fabric-tcp  ... MPISHIM_FABRIC=tcp MPISHIM_NUM_VCIS=4
# Columns, medians of BENCH_RUNS alternating runs: wall (the whole mpirun,
# launcher included, as a user sees it), premain (process start to main:
# the loader and the libraries' constructors), init (the longest
# MPI_Init_thread), finalize (rank 0's MPI_Finalize), and wall minus raw's
# wall. A lane that cannot open falls back to the host (the run still
# counts; its lane column says "none"). Output: bench/results/startup-summary.txt
# and startup-<host>.csv.
#
# Environment: BENCH_NP (default 2), BENCH_RUNS (default 9), BENCH_TIMEOUT
# (default 60), BENCH_CONFIGS (a comma-separated subset), BENCH_RESULTS.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
BENCH_RUNS=${BENCH_RUNS:-9}
bench_setup startup
np=${BENCH_NP:-2}
tmo=${BENCH_TIMEOUT:-60}
bench_posint BENCH_NP "$np"
bench_posint BENCH_RUNS "$runs"
bench_posint BENCH_TIMEOUT "$tmo"
IFS=, read -r -a configs <<< "${BENCH_CONFIGS:-raw,default,ucx,fabric-shm,fabric-tcp}"
for c in "${configs[@]}"; do
    case $c in raw|default|ucx|fabric-shm|fabric-tcp) ;; *) die "unknown configuration '$c'" ;; esac
done
bench_hosts "$@"
bench_start

bench_configs() { echo "${configs[*]}"; }

bench_run() {
    local host=$1 cfg=$3 round=$4 csv=$5
    local prog=$build/$host/bench/startup
    local -a flags cmd
    read -r -a flags <<< "$MPIRUN_FLAGS"
    case $cfg in
        raw)     cmd=("$MPIRUN" "${flags[@]}" -np "$np" "$prog") ;;
        default) cmd=("$build/mpishim" --host "$host" "$MPIRUN" "${flags[@]}" -np "$np" "$prog") ;;
        *)       cmd=(env "MPISHIM_FABRIC=${cfg#fabric-}" MPISHIM_NUM_VCIS=4
                      "$build/mpishim" --host "$host" "$MPIRUN" "${flags[@]}" -np "$np" "$prog") ;;
    esac
    local out rc line t0 wall log=$results/logs/startup-$host-$cfg-run$round.log
    t0=$(date +%s.%N)
    out=$(timeout -k 10 "$tmo" "${cmd[@]}" 2>&1)
    rc=$?
    wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.4f", b - a }')
    line=$(grep -m 1 '^startup: ' <<< "$out")
    local want=1
    [ "$cfg" = raw ] && want=0
    if [ $rc -eq 0 ] && [ -n "$line" ] && grep -q " shim=$want " <<< "$line"; then
        local v lane
        v=$(sed -E 's/.*premain=([0-9.-]+) init=([0-9.]+) finalize=([0-9.]+).*/\1,\2,\3/' <<< "$line")
        lane=$(sed -E 's/.* lane=([^ ]+) .*/\1/' <<< "$line")
        echo "$host,$np,$cfg,$round,$lane,$wall,$v" >> "$csv"
        echo "${wall}s"
        return
    fi
    bench_fail "$log" "$host $cfg run $round" "$(bench_why $rc "$line" "$want")" "$out" "${cmd[@]}"
    echo "$host,$np,$cfg,$round,none,NaN,NaN,NaN,NaN" >> "$csv"
    echo NaN
}

bench_table() {
    awk -F, -v cfgs="${configs[*]}" "$bench_awk"'
    NR > 1 && isnum($6) { for (k = 6; k <= 9; k++) { key = $3 SUBSEP k; v[key, ++n[key]] = $k }; lane[$3] = $5 }
    END {
        nc = split(cfgs, C, " ")
        raw = med("raw" SUBSEP 6)
        printf "median seconds\n%-11s %-12s %8s %8s %8s %9s %9s\n", "config", "lane", "wall", "premain", "init", "finalize", "wall-raw"
        for (c = 1; c <= nc; c++) {
            t = med(C[c] SUBSEP 6)
            if (t == "") { printf "%-11s %-12s %8s\n", C[c], "-", "-"; continue }
            printf "%-11s %-12s %8.3f %8.3f %8.3f %9.3f %+9.3f\n", C[c], lane[C[c]], t, med(C[c] SUBSEP 7), med(C[c] SUBSEP 8), med(C[c] SUBSEP 9), (raw != "" ? t - raw : 0)
        }
    }' "$2"
}

header=$(
    echo "start-up and finalize (bench/startup.c): MPI_Init_thread(MPI_THREAD_MULTIPLE) + MPI_Finalize, np $np;"
    echo "median of $runs alternating runs; wall = the whole mpirun (through the launcher under the shim);"
    echo "premain = process start to main (1/$(getconf CLK_TCK) s ticks); init = longest MPI_Init_thread; finalize = rank 0's."
    bench_header short
)
echo "$header"
echo
bench_rounds "host,np,config,run,lane,wall_s,premain_s,init_s,finalize_s" "startup-" "np=" "$np"
bench_finish ""
