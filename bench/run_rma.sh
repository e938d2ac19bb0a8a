#!/usr/bin/env bash
# RMA-MT-style one-sided benchmark: raw host vs mpishim.
#
#   bench/run_rma.sh [openmpi] [mpich]     (default: every host built)
#
# For each host and each cell (mode, op, window, T, size), runs
# build/<host>/bench/rma (make -C bench rma builds it; see bench/rma.c for
# what is measured and how: rank 0 with T threads puts or gets S bytes to
# rank 1, 16 operations per synchronization, fence | pscw | lock | lockall,
# one shared window or one per thread) in two configurations:
#
#   raw    mpirun -np 2 rma ...                         (the host alone)
#   shim   build/mpishim --host H mpirun -np 2 rma ...  (the shim preloaded)
#
# Cells.  The lists
#   BENCH_RMA_MODES    (default "lockall fence pscw lock")
#   BENCH_RMA_OPS      (default "put get")
#   BENCH_RMA_WINS     (default "shared per-thread")
#   BENCH_RMA_THREADS  (default "1 2 4 8")
#   BENCH_RMA_SIZES    (default "8 65536 1048576")
# span the full grid; BENCH_RMA_GRID=full runs all of it (192 cells, about
# 40 minutes per host here).  The default, BENCH_RMA_GRID=small, runs only
# these cells of it (44 with the default lists, 880 runs, about 16 minutes
# for both hosts on the 2-core machine: a run takes 1.1 s on average, of
# which 0.3 - 0.7 s are mpirun and shim start-up, the rest its warm-up and
# ~0.2 s measured phase; a hung run costs BENCH_TIMEOUT - 10 s):
#   (a) size 8, shared window: every mode, op and T
#   (b) size 8, per-thread windows: every mode and op, at T = 4 only
#   (c) sizes above 8 (65536, 1048576): lockall, put, shared window, T = 1 and 4
# The lists filter both grids (e.g. BENCH_RMA_MODES=fence keeps the fence
# cells only; without 4 in BENCH_RMA_THREADS the small grid has no (b)).
#
# Runs alternate: each round runs every cell once in each configuration (raw
# first in odd rounds, shim first in even ones), so slow drifts of a noisy
# machine spread over all cells.  Open MPI gets --bind-to none (its default
# binds each rank to one core, which would stack the origin's T threads on
# one core; MPICH's Hydra does not bind), both hosts run 2 ranks.
#
# Output: one table per host (median M ops/s and MB/s of each configuration,
# the ratio shim/raw, both medians over the raw median at T = 1 of the same
# mode, op, window and size, the verification failures summed over the
# runs), also written with a machine header to bench/results/rma-summary.txt;
# every run is one CSV line
#   host,mode,op,win,T,size,config,run,mops_per_s,mbytes_per_s,failures,iters,seconds
# in bench/results/rma-<host>.csv, NaN for a run that failed (exit code other
# than 0 or 3, timeout, no result line, shim active where it should not be
# or the reverse); its output is kept in bench/results/logs/.  A run with
# verification failures (exit 3) keeps its rates and counts its failures.
# Exits 1 if any run failed or any verification failed, after the tables.
#
# More environment:
#   BENCH_RUNS     rounds, i.e. runs per cell and configuration   (default 5)
#   BENCH_ARGS     more rma options for every run, e.g. "-d 0.5" (longer
#                  measured phase) or "-n 64" (default none)
#   BENCH_TIMEOUT  seconds before a run is killed and recorded NaN (default 60;
#                  the program's own watchdog, -W, reports where it hung
#                  10 s earlier)
#   BENCH_RESULTS  output folder                         (default bench/results)
# MPISHIM_* variables of the caller are removed: both configurations run
# the shim's defaults.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
bench_setup rma
tmo=${BENCH_TIMEOUT:-60}
grid=${BENCH_RMA_GRID:-small}
modes=${BENCH_RMA_MODES:-lockall fence pscw lock}
ops=${BENCH_RMA_OPS:-put get}
wins=${BENCH_RMA_WINS:-shared per-thread}
threads=${BENCH_RMA_THREADS:-1 2 4 8}
sizes=${BENCH_RMA_SIZES:-8 65536 1048576}

bench_posint BENCH_RUNS "$runs"
bench_posint BENCH_TIMEOUT "$tmo"
case $grid in small|full) ;; *) die "BENCH_RMA_GRID: '$grid' is neither small nor full" ;; esac
for v in modes ops wins threads sizes; do
    [ -n "${!v// /}" ] || die "BENCH_RMA_${v^^} is empty"
done
for m in $modes; do
    case $m in fence|pscw|lock|lockall) ;; *) die "BENCH_RMA_MODES: unknown mode '$m' (fence pscw lock lockall)" ;; esac
done
for o in $ops; do
    case $o in put|get) ;; *) die "BENCH_RMA_OPS: unknown op '$o' (put get)" ;; esac
done
for w in $wins; do
    case $w in shared|per-thread) ;; *) die "BENCH_RMA_WINS: unknown window kind '$w' (shared per-thread)" ;; esac
done
for t in $threads; do
    if ! [[ $t =~ ^[1-9][0-9]*$ ]] || [ "$t" -gt 256 ]; then
        die "BENCH_RMA_THREADS: '$t' is not a thread count (1..256)"
    fi
done
for s in $sizes; do
    if ! [[ $s =~ ^[0-9]+$ ]] || [ "$s" -lt 8 ] || [ "$s" -gt 1048576 ]; then
        die "BENCH_RMA_SIZES: '$s' is not a size in bytes (8..1048576)"
    fi
done

bench_hosts "$@"

# The cells, in table order: "mode op win T size".
in_small() { # mode op win T size
    local mode=$1 op=$2 win=$3 t=$4 size=$5
    if [ "$size" -eq 8 ]; then
        [ "$win" = shared ] || [ "$t" -eq 4 ]
    else
        [ "$mode" = lockall ] && [ "$op" = put ] && [ "$win" = shared ] && { [ "$t" -eq 1 ] || [ "$t" -eq 4 ]; }
    fi
}
cells=()
for mode in $modes; do for op in $ops; do for win in $wins; do for size in $sizes; do for t in $threads; do
    if [ "$grid" = full ] || in_small "$mode" "$op" "$win" "$t" "$size"; then
        cells+=("$mode $op $win $t $size")
    fi
done; done; done; done; done
[ ${#cells[@]} -gt 0 ] || die "no cell left: the lists and BENCH_RMA_GRID=$grid have nothing in common"

wd=$((tmo > 20 ? tmo - 10 : tmo))
vfail_total=0
bench_start

bench_configs() { echo "raw shim"; }

# bench_run HOST CELL CONFIG ROUND CSV: one run, its CSV line; prints a short
# status (the M ops/s, or why it failed).
bench_run() {
    local host=$1 cell=$2 cfg=$3 round=$4 csv=$5
    local mode op win t size
    read -r mode op win t size <<< "$cell"
    local prog=$build/$host/bench/rma
    local -a cmd flags more
    # shellcheck disable=SC2206  # word splitting of flags is intended
    flags=($MPIRUN_FLAGS) more=($extra)
    [ "$host" = openmpi ] && flags+=(--bind-to none)
    local want_shim=0
    case $cfg in
        raw)  cmd=("$MPIRUN" "${flags[@]}" -np 2 "$prog") ;;
        shim) want_shim=1
              cmd=("$build/mpishim" --host "$host" --lib "$build/$host/libmpishim.so" "$MPIRUN" "${flags[@]}" -np 2 "$prog") ;;
    esac
    cmd+=(-m "$mode" -o "$op" -t "$t" -s "$size" -q -W "$wd")
    [ "$win" = per-thread ] && cmd+=(-w)
    cmd+=("${more[@]}")
    local out rc log=$results/logs/rma-$host-$mode-$op-$win-T$t-$size-$cfg-run$round.log
    out=$(timeout -k 10 "$tmo" "${cmd[@]}" 2>&1)
    rc=$?
    local line why="" f=""
    line=$(grep -m 1 '^rma host=' <<< "$out")
    # key=value of the result line
    val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<< " $line"; }
    if [ -n "$line" ]; then f=$(val failures); fi
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        why="timed out after ${tmo}s"
    elif [ $rc -eq 4 ] || grep -q 'watchdog: no end' <<< "$out"; then
        why="hung: the program's watchdog (-W) ended it (where each thread was: see the log)"
    elif [ $rc -ne 0 ] && [ $rc -ne 3 ]; then
        why="exit code $rc"
    elif [ -z "$line" ]; then
        why="no result line"
    elif [ "$(val shim)" != "$want_shim" ]; then
        why=$(bench_shim_mismatch "$want_shim")
    elif [ $rc -eq 3 ] && [ "${f:-0}" = 0 ]; then
        why="exit code 3 without failures in the result line"
    fi
    if [ -n "$why" ]; then
        bench_fail "$log" "$host $cell $cfg run $round" "$why" "$out" "${cmd[@]}"
        echo "$host,$mode,$op,$win,$t,$size,$cfg,$round,NaN,NaN,${f:-NaN},NaN,NaN" >> "$csv"
        echo "failed"
        return
    fi
    if [ "$f" != 0 ] || grep -q '^rma: ' <<< "$out"; then
        # verification failures (exit 3) or notes of the program: keep them
        { echo "# ${cmd[*]}"; echo "$out"; } > "$log"
    fi
    if [ "$f" != 0 ]; then
        failures+=("$host $cell $cfg run $round: $f verification failure(s) (output: ${log#"$top"/})")
        vfail_total=$((vfail_total + f))
    fi
    echo "$host,$mode,$op,$win,$t,$size,$cfg,$round,$(val mops_per_s),$(val mbytes_per_s),$f,$(val iters),$(val seconds)" >> "$csv"
    echo "$(val mops_per_s)$([ "$f" != 0 ] && echo "(${f} fail)")"
}

# bench_table HOST CSV: the table of one host, from its CSV, rows in cell order.
bench_table() {
    local host=$1 csv=$2
    local order
    order=$(printf '%s\n' "${cells[@]}" | tr ' ' ',' | paste -sd ';')
    awk -F, -v order="$order" -v cores="$cores" -v runs="$runs" "$bench_awk"'
    function rate(x) { return x == "" ? "-" : (x < 10 ? sprintf("%.3f", x) : (x < 1000 ? sprintf("%.2f", x) : sprintf("%.0f", x))) }
    function mb(x) { return x == "" ? "-" : (x < 100 ? sprintf("%.2f", x) : sprintf("%.0f", x)) }
    function ratio(a, b,    q) {
        if (a == "" || b == "" || b <= 0) return "-"
        q = a / b
        return sprintf(q < 0.1 ? "%.3fx" : (q < 100 ? "%.2fx" : "%.0fx"), q)
    }
    $1 == "host" { next }
    NF >= 11 {
        key = $2 SUBSEP $3 SUBSEP $4 SUBSEP $5 SUBSEP $6 SUBSEP $7
        if (isnum($9)) { n[key]++; v[key, n[key]] = $9 + 0 } else bad[key]++
        if (isnum($11)) vf[key] += $11
    }
    END {
        nr = split(order, R, ";")
        printf "%-7s %-3s %-10s %3s %5s | %10s %10s %8s | %9s %9s | %9s %9s | %9s | %s\n", "mode", "op", "window",
               "T", "size", "raw Mop/s", "shim Mop/s", "shim/raw", "raw MB/s", "shim MB/s", "raw/T1", "shim/T1",
               "fail r/s", "busy/cores"
        for (i = 1; i <= nr; i++) {
            split(R[i], c, ",")
            mode = c[1]; op = c[2]; win = c[3]; t = c[4]; size = c[5]
            kr = mode SUBSEP op SUBSEP win SUBSEP t SUBSEP size SUBSEP "raw"
            ks = mode SUBSEP op SUBSEP win SUBSEP t SUBSEP size SUBSEP "shim"
            r = med(kr); s = med(ks)
            # the base: raw at T=1, same mode, op, window, size; a per-thread
            # cell without its T=1 uses the shared window (the same at T=1)
            b = med(mode SUBSEP op SUBSEP win SUBSEP 1 SUBSEP size SUBSEP "raw")
            if (b == "" && win == "per-thread") { b = med(mode SUBSEP op SUBSEP "shared" SUBSEP 1 SUBSEP size SUBSEP "raw"); if (b != "") fb = 1 }
            mark = (bad[kr] + bad[ks] > 0) ? "*" : ""
            if (mark != "") anybad = 1
            busy = t + ((mode == "fence" || mode == "pscw") && win == "per-thread" ? t : 1)
            printf "%-7s %-3s %-10s %3s %5s | %10s %10s %8s | %9s %9s | %9s %9s | %9s | %d/%d%s\n", mode, op, win, t,
                   hsize(size), rate(r), rate(s), ratio(s, r) mark, mb(r == "" ? "" : r * size),
                   mb(s == "" ? "" : s * size), ratio(r, b), ratio(s, b), (vf[kr] + 0) "/" (vf[ks] + 0), busy, cores,
                   (busy > cores ? " over" : "")
        }
        if (anybad) printf "* some runs of this cell failed (NaN); the medians are of the others\n"
        if (fb) printf "raw/T1, shim/T1 of a per-thread cell without its own T=1 cell: over the shared window raw T=1\n"
    }' "$csv" | sed -e 's/ *$//'
}

# --- header --------------------------------------------------------------
header=$(
    echo "RMA-MT-style one-sided benchmark (bench/rma.c), 2 ranks: rank 0 the origin with T threads,"
    echo "rank 1 the target; 16 put/get per synchronization; median over $runs alternating runs (raw and"
    echo "shim) of each run's rate: M ops/s = millions of put/get per second, all threads together;"
    echo "MB/s = M ops/s x size (10^6 bytes). Measured phase calibrated to ~0.2 s after warm-up phases."
    bench_header full
    echo "grid: $grid (${#cells[@]} cells); modes: $modes; ops: $ops; windows: $wins; T: $threads; sizes: $sizes"
    echo "rma options for every run: -q -W $wd${extra:+ $extra} (and -m -o -t -s [-w] of the cell)"
    echo "configs: raw = host alone; shim = through build/mpishim (defaults). Open MPI: --bind-to none."
    echo "         busy/cores: busy threads (origin T + target 1, or T with per-thread fence/pscw)"
    echo "         vs $cores cores; 'over' = oversubscribed. fail r/s: verification failures, summed over"
    echo "         the runs (raw/shim). raw/T1, shim/T1: median over the raw median at T=1."
)
echo "$header"
echo

# --- runs ----------------------------------------------------------------
bench_rounds "host,mode,op,win,T,size,config,run,mops_per_s,mbytes_per_s,failures,iters,seconds" rma- "" "${cells[@]}"
bench_finish "; load average at the end: $(bench_loadavg)" \
    "failed run(s) or run(s) with verification failures ($vfail_total failures in all)" \
    " or had verification failures ($vfail_total in all)"
