#!/usr/bin/env bash
# Intel MPI Benchmarks, multithreaded flavour (IMB-MT): raw host vs mpishim
# vs mpishim disabled. An outside benchmark: its source is not part of this
# project; `make -C bench imb-mt IMB_CHECKOUT=DIR` builds it from a checkout of
# intel/mpi-benchmarks that you fetched into DIR, into
# build/<host>/bench/imb-mt (see bench/README.md).
#
#   bench/run_imb_mt.sh [openmpi] [mpich]     (default: every host built)
#
# Each run is one IMB-MT process pair, 2 ranks x T OpenMP threads
# (OMP_NUM_THREADS=T), `-thread_level multiple`, every benchmark of
# BENCH_IMB_LIST at the message sizes of BENCH_IMB_COUNT (ints), in three
# configurations:
#
#   raw       mpirun -np 2 imb-mt ...                         (the host alone)
#   shim      build/mpishim --host H mpirun -np 2 imb-mt ...  (the shim's defaults)
#   disabled  the same with MPISHIM_DISABLE=1                 (the preload alone)
#
# and, where BENCH_IMB_EXTRA names one, a fourth, `shim+VAR=VAL`, for example
# BENCH_IMB_EXTRA=MPISHIM_COLL=host.
#
# Rounds alternate the configurations (rotated order per round). Output: per
# host and T, the median t_avg (microseconds, IMB-MT's own figure: the mean
# over the threads of each thread's time per repetition) of each benchmark and
# size per configuration, the raw runs' spread (min-max), and shim/raw; into
# bench/results/imb-mt-summary.txt, every run's figures as CSV lines
#   host,T,config,run,benchmark,bytes,t_avg_us
# in bench/results/imb-mt-<host>.csv (a failed run: one line with NaN).
#
# Environment:
#   BENCH_THREADS    T values                          (default "1 2 4")
#   BENCH_RUNS       rounds                            (default 5)
#   BENCH_IMB_LIST   benchmarks (default: PingPongMT PingPingMT SendRecvMT
#                    ExchangeMT UniBandMT BiBandMT BcastMT AllReduceMT
#                    ReduceMT BarrierMT)
#   BENCH_IMB_COUNT  -count                            (default 1,1024)
#   BENCH_IMB_REPEAT -repeat at T = 1                  (default 2000)
#   BENCH_IMB_REPEAT_MT  -repeat at T > 1 (default 20: on 2 cores a T > 1
#                    repetition takes up to milliseconds, raw and shim alike)
#   -warmup is 100 at T = 1 and 10 at T > 1
#   BENCH_IMB_EXTRA  one VAR=VALUE for a fourth configuration (default none)
#   BENCH_TIMEOUT    seconds before a run is killed    (default 300)
#   BENCH_RESULTS    output folder                     (default bench/results)
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
bench_setup imb-mt
tmo=${BENCH_TIMEOUT:-300}
threads=${BENCH_THREADS:-1 2 4}
list=${BENCH_IMB_LIST:-PingPongMT PingPingMT SendRecvMT ExchangeMT UniBandMT BiBandMT BcastMT AllReduceMT ReduceMT BarrierMT}
count=${BENCH_IMB_COUNT:-1,1024}
repeat=${BENCH_IMB_REPEAT:-2000}
repeat_mt=${BENCH_IMB_REPEAT_MT:-20}
xcfg=${BENCH_IMB_EXTRA:-}

bench_posint BENCH_RUNS "$runs"
bench_posint BENCH_TIMEOUT "$tmo"
bench_posint BENCH_IMB_REPEAT "$repeat"
bench_posint BENCH_IMB_REPEAT_MT "$repeat_mt"
for t in $threads; do bench_posint BENCH_THREADS "$t"; done
[[ $count =~ ^[0-9]+(,[0-9]+)*$ ]] || die "BENCH_IMB_COUNT: '$count' is not a comma-separated list of counts"
[ -z "$xcfg" ] || [[ $xcfg =~ ^MPISHIM_[A-Z0-9_]+=[^[:space:]]+$ ]] || die "BENCH_IMB_EXTRA: '$xcfg' is not one MPISHIM_VAR=VALUE"

bench_hosts "$@"
bench_start

bench_configs() { echo "raw shim disabled${xcfg:+ shim+$xcfg}"; }

# bench_run HOST T CONFIG ROUND CSV: one IMB-MT run, its lines into CSV.
bench_run() {
    local host=$1 t=$2 cfg=$3 round=$4 csv=$5
    local prog=$build/$host/bench/imb-mt
    local -a flags launch env_args
    # shellcheck disable=SC2206  # word splitting of flags is intended
    flags=($MPIRUN_FLAGS)
    [ "$host" = openmpi ] && flags+=(--bind-to none)
    launch=("$build/mpishim" --host "$host" --lib "$build/$host/libmpishim.so")
    env_args=(OMP_NUM_THREADS="$t")
    case $cfg in
        raw)      launch=() ;;
        disabled) env_args+=(MPISHIM_DISABLE=1) ;;
        shim+*)   env_args+=("${cfg#shim+}") ;;
    esac
    # The launcher forwards MPISHIM_*; OMP_NUM_THREADS goes to the ranks by
    # each host's own flag.
    if [ "$host" = openmpi ]; then flags+=(-x OMP_NUM_THREADS); else flags+=(-genv OMP_NUM_THREADS "$t"); fi
    local -a cmd=(env "${env_args[@]}" "${launch[@]}" "$MPIRUN" "${flags[@]}" -np 2 "$prog" -thread_level multiple
                  -count "$count")
    if [ "$t" -eq 1 ]; then cmd+=(-repeat "$repeat" -warmup 100); else cmd+=(-repeat "$repeat_mt" -warmup 10); fi
    # shellcheck disable=SC2206  # one word per benchmark
    cmd+=($list)
    local out rc log=$results/logs/imb-mt-$host-T$t-$cfg-run$round.log
    out=$(timeout -k 10 "$tmo" "${cmd[@]}" 2>&1)
    rc=$?
    local lines
    # "# Benchmarking NAME", a heading that names the columns ("#bytes" may
    # be missing: BarrierMT, recorded as 0 bytes; "t_avg[usec]" is the 3rd
    # or the 5th), then the rows
    lines=$(awk -v pre="$host,$t,$cfg,$round" '
        /^# Benchmarking / { b = $3; tc = 0; next }
        b != "" && /repetitions/ && /t_avg/ {
            bc = 0
            for (i = 1; i <= NF; i++) { if ($i == "#bytes") bc = i; if ($i ~ /^t_avg/) tc = i }
            next
        }
        b != "" && tc && $1 ~ /^[0-9]+$/ && NF >= tc { print pre "," b "," (bc ? $bc : 0) "," $tc }' <<< "$out")
    if [ $rc -ne 0 ] || [ -z "$lines" ]; then
        bench_fail "$log" "$host T=$t $cfg run $round" "$([ $rc -eq 124 ] && echo "timed out after ${tmo}s" || echo "exit code $rc")" \
            "$out" "${cmd[@]}"
        echo "$host,$t,$cfg,$round,NaN,NaN,NaN" >> "$csv"
        echo failed
        return
    fi
    echo "$lines" >> "$csv"
    echo ok
}

# bench_table HOST CSV: per T, one row per benchmark and size (t_avg: for
# UniBandMT and BiBandMT too, the time per message of a window).
bench_table() {
    local cfgs
    cfgs=$(bench_configs "$1")
    awk -F, -v cfgs="$cfgs" -v list="$list" "$bench_awk"'
    function us(x) { return x == "" ? "-" : (x < 100 ? sprintf("%.2f", x) : sprintf("%.0f", x)) }
    $1 == "host" { next }
    isnum($7) {
        key = $2 SUBSEP $5 SUBSEP $6 SUBSEP $3; n[key]++; v[key, n[key]] = $7 + 0
        if ($3 == "raw") {
            k2 = $2 SUBSEP $5 SUBSEP $6
            if (!(k2 in lo) || $7 + 0 < lo[k2]) lo[k2] = $7 + 0
            if (!(k2 in hi) || $7 + 0 > hi[k2]) hi[k2] = $7 + 0
        }
        if (!(($2 SUBSEP $6) in seen)) { seen[$2 SUBSEP $6] = 1; sizes[$2] = sizes[$2] " " $6 }
        ts[$2] = 1
    }
    END {
        nc = split(cfgs, C, " "); nb = split(list, B, " ")
        for (t in ts) tl[++nt] = t + 0
        for (i = 2; i <= nt; i++) { x = tl[i]; for (j = i - 1; j >= 1 && tl[j] > x; j--) tl[j + 1] = tl[j]; tl[j + 1] = x }
        for (ti = 1; ti <= nt; ti++) {
            t = tl[ti]
            printf "T = %d threads per rank; t_avg in us (median)\n", t
            printf "%-12s %7s | %9s %15s", "benchmark", "bytes", "raw", "raw min-max"
            for (c = 2; c <= nc; c++) printf " | %9s %7s", C[c], "/raw"
            printf "\n"
            ns = split(sizes[t], S, " ")
            for (b = 1; b <= nb; b++) for (s = 1; s <= ns; s++) {
                r = med(t SUBSEP B[b] SUBSEP S[s] SUBSEP "raw")
                if (r == "" && n[t SUBSEP B[b] SUBSEP S[s] SUBSEP C[2]] == 0) continue
                k2 = t SUBSEP B[b] SUBSEP S[s]
                printf "%-12s %7s | %9s %15s", B[b], S[s], us(r), (k2 in lo) ? us(lo[k2]) "-" us(hi[k2]) : "-"
                for (c = 2; c <= nc; c++) {
                    m = med(t SUBSEP B[b] SUBSEP S[s] SUBSEP C[c])
                    printf " | %9s %7s", us(m), (m == "" || r == "" || r <= 0) ? "-" : sprintf("%.2fx", m / r)
                }
                printf "\n"
            }
            printf "\n"
        }
    }' "$2" | sed -e 's/ *$//'
}

header=$(
    echo "IMB-MT (Intel MPI Benchmarks, multithreaded flavour; built outside the project), 2 ranks x T"
    echo "OpenMP threads, -thread_level multiple -count $count -repeat $repeat -warmup 100 (T > 1: -repeat $repeat_mt -warmup 10); median over"
    echo "$runs alternating runs of IMB-MT's t_avg (us; lower is better)."
    bench_header full
    echo "configs: raw = host alone; shim = through build/mpishim (defaults); disabled = the same with"
    echo "         MPISHIM_DISABLE=1${xcfg:+; shim+$xcfg = the shim with $xcfg}. Open MPI: --bind-to none."
    echo "         /raw: the configuration's median over raw's; raw min-max: the spread of the raw runs."
)
echo "$header"
echo

# shellcheck disable=SC2086  # one argument per T
bench_rounds "host,T,config,run,benchmark,bytes,t_avg_us" imb-mt- "T=" $threads
bench_finish "; load average at the end: $(bench_loadavg)"
