#!/usr/bin/env bash
# Multirate across 2 simulated nodes over TCP: raw host vs shim vs
# MPI everywhere, on the network-namespace cluster of tools/netns-cluster.sh.
#
#   bench/run_multinode.sh [openmpi] [mpich]     (default: every host built)
#
# For each host and each T in BENCH_THREADS, build/<host>/bench/multirate
# (make -C bench multirate builds it) runs
#   raw         2 ranks, one per node, T threads each (no shim)
#   shim        the same through build/mpishim, default configuration
#   everywhere  2T ranks, T per node, one thread each (multirate -p: rank 2k
#               and 2k+1 pair up and sit on different nodes), no shim
# with the command lines of tests/multinode.sh (TCP between the nodes, see
# there). Runs alternate (each round runs every cell once, the order rotated
# from round to round); the table gives medians in M msg/s. Output: the
# table, also in bench/results/multinode-summary.txt with a header, every run
# a CSV line (host,T,config,run,mmsgs_per_s; NaN for a failed run, its output
# in bench/results/logs/) in bench/results/multinode.csv.
#
# Environment:
#   BENCH_THREADS  T values               (default "1 2 4")
#   BENCH_RUNS     runs per cell          (default 5)
#   BENCH_SECONDS  timed seconds per run  (default 1)
#   BENCH_TIMEOUT  seconds before a run is killed and recorded NaN (default 60)
#   BENCH_RESULTS  output folder          (default bench/results)
#   MSH_DELAY, MSH_LOSS, ...   link conditions (tools/netns-cluster.sh; none by default)
# Root only (network namespaces). The cluster is taken down at the end.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=$top/build
cluster=$top/tools/netns-cluster.sh
threads=${BENCH_THREADS:-1 2 4}
runs=${BENCH_RUNS:-5}
secs=${BENCH_SECONDS:-1}
tmo=${BENCH_TIMEOUT:-60}
results=${BENCH_RESULTS:-$here/results}
hosts=("$@")
if [ ${#hosts[@]} -eq 0 ]; then
    for h in openmpi mpich; do [ -x "$build/$h/bench/multirate" ] && hosts+=("$h"); done
fi
[ ${#hosts[@]} -gt 0 ] || { echo "run_multinode: no build/<host>/bench/multirate (make -C bench multirate)" >&2; exit 2; }
for v in $(env | sed -n 's/^\(MPISHIM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
# Open MPI refuses root without these (mpishim-info is a singleton too).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

why=$("$cluster" check 2>&1) || { echo "run_multinode: cannot make the cluster here: $why" >&2; exit 2; }
exec 8> /run/msh-netns-cluster.lock
flock -w 900 8
trap '"$cluster" down' EXIT
"$cluster" up 2

mkdir -p "$results/logs"
csv=$results/multinode.csv
echo "host,T,config,run,mmsgs_per_s" > "$csv"
: > "$results/multinode-finalize-hangs.csv"
configs=(raw shim everywhere)

one_run() { # host T config round
    local host=$1 t=$2 cfg=$3 round=$4 prog=$build/$1/bench/multirate out rc rate
    local -a cmd
    case $cfg in
        raw) cmd=(env MN_NP=2 "$top/tests/multinode.sh" run "$host" raw "$prog" -t "$t") ;;
        shim) cmd=(env MN_NP=2 "$top/tests/multinode.sh" run "$host" shim "$prog" -t "$t") ;;
        everywhere) cmd=(env MN_NP=$((2 * t)) "$top/tests/multinode.sh" run "$host" raw "$prog" -p) ;;
    esac
    cmd+=(-q -d "$secs")
    rc=0
    # MN_DONE: on MPICH, a run whose result line is out but which then hangs
    # in MPI_Finalize (host bug, see tests/multinode.sh) is ended after 5 s
    # and its result kept; the count of such runs is in the summary.
    out=$(MN_DONE='^multirate ' MN_FINALIZE_GRACE=5 timeout -k 10 "$tmo" "${cmd[@]}" 2>&1) || rc=$?
    if grep -q '^SKIP multinode: .*MPI_Finalize hung' <<< "$out"; then
        echo "$host,$t,$cfg,$round" >> "$results/multinode-finalize-hangs.csv"
    fi
    rate=$(sed -n 's/^multirate .*mmsgs_per_s=\([0-9.eE+-]*\).*/\1/p' <<< "$out" | head -n 1)
    if [ $rc -ne 0 ] || [ -z "$rate" ]; then
        printf '%s\n' "${cmd[*]}" "exit code $rc" "$out" > "$results/logs/multinode-$host-T$t-$cfg-run$round.log"
        echo "run_multinode: $host T=$t $cfg run $round failed (exit $rc), see $results/logs/" >&2
        rate=NaN
    fi
    echo "$host,$t,$cfg,$round,$rate" >> "$csv"
}

cells=()
for host in "${hosts[@]}"; do for t in $threads; do for c in "${configs[@]}"; do cells+=("$host $t $c"); done; done; done
for ((r = 1; r <= runs; r++)); do
    n=${#cells[@]}
    for ((i = 0; i < n; i++)); do
        # shellcheck disable=SC2086  # the cell is "host T config"
        one_run ${cells[$(((i + r * 7) % n))]} "$r"
    done
    echo "round $r of $runs done" >&2
done

version() { "$build/mpishim-info" --host "$1" 2> /dev/null | sed -n 's/^host MPI library *//p' | head -n 1; }
{
    echo "Multirate across 2 nodes over TCP (bench/run_multinode.sh), $(date -u +%Y-%m-%d)"
    echo "2 network namespaces with their own hostnames on one machine ($(nproc) cores), veth on a bridge"
    echo "median M msg/s of $runs alternating runs of ${secs}s; 8-byte messages, window 128"
    echo "raw/shim: 1 rank per node x T threads; everywhere: T ranks per node x 1 thread"
    [ -z "${MSH_DELAY:-}${MSH_LOSS:-}" ] || echo "link: delay ${MSH_DELAY:-none} jitter ${MSH_JITTER:-none} loss ${MSH_LOSS:-0}%"
    for host in "${hosts[@]}"; do echo "$host: $(version "$host")"; done
    h=$(wc -l < "$results/multinode-finalize-hangs.csv")
    [ "$h" -eq 0 ] || echo "$h runs hung in MPI_Finalize after their result (MPICH 4.0.2 over UCX/TCP, raw too): ended, result kept"
    echo
    printf '%-8s %2s %9s %9s %11s %10s %12s\n' host T raw shim everywhere shim/raw shim/rawT1
    awk -F, 'NR > 1 && $5 != "NaN" { k = $1 SUBSEP $2 SUBSEP $3; n[k]++; v[k, n[k]] = $5 + 0 }
        function median(k,   i, j, m, a, t) {
            m = n[k]; if (m == 0) return "nan"
            for (i = 1; i <= m; i++) a[i] = v[k, i]
            for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
            return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
        }
        END {
            split(hosts, H, " "); split(ts, T, " ")
            for (h = 1; h in H; h++) {
                r1 = median(H[h] SUBSEP T[1] SUBSEP "raw")
                for (i = 1; i in T; i++) {
                    r = median(H[h] SUBSEP T[i] SUBSEP "raw"); s = median(H[h] SUBSEP T[i] SUBSEP "shim")
                    e = median(H[h] SUBSEP T[i] SUBSEP "everywhere")
                    printf "%-8s %2s %9s %9s %11s %10s %12s\n", H[h], T[i],
                        r == "nan" ? "-" : sprintf("%.3f", r), s == "nan" ? "-" : sprintf("%.3f", s),
                        e == "nan" ? "-" : sprintf("%.3f", e),
                        (r == "nan" || s == "nan") ? "-" : sprintf("%.2fx", s / r),
                        (r1 == "nan" || s == "nan") ? "-" : sprintf("%.2fx", s / r1)
                }
            }
        }' hosts="${hosts[*]}" ts="$threads" "$csv"
} | tee "$results/multinode-summary.txt"
