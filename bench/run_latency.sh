#!/usr/bin/env bash
# Ping-pong latency, raw host vs mpishim and its lanes.
#
#   bench/run_latency.sh [openmpi] [mpich]     (default: every host built)
#
# For each host, each T in BENCH_LAT_THREADS and each size in
# BENCH_LAT_SIZES, runs build/<host>/bench/latency (make -C bench latency
# builds it; see bench/latency.c: T thread pairs bounce a message with
# MPI_Send and MPI_Recv, each pair on a communicator of its own; half a
# round trip in microseconds with the pairs going at once, median
# repetition) in these configurations:
#
#   raw       mpirun -np 2 latency          (the host alone)
#   shim      through build/mpishim, the defaults
#   ucx       MPISHIM_FABRIC=ucx MPISHIM_NUM_VCIS=T: a UCX worker per pair
#   shm       MPISHIM_FABRIC=shm MPISHIM_NUM_VCIS=T MPISHIM_ASSERT=no_any_tag:
#             a libfabric shared-memory endpoint per pair
#   tcp       MPISHIM_FABRIC=tcp, likewise (tcp;ofi_rxm: for nodes apart; on
#             one node it goes through the loopback interface)
#   ceiling-ucx, ceiling-shm, ceiling-tcp
#             mpirun -np 2 ceiling -b ucx|shm|'tcp;ofi_rxm' -t T -w 1 -p: the
#             same ping-pong on T UCX workers or libfabric endpoints per
#             process, no MPI while timed (bench/ceiling.c): what a lane on
#             that library could reach at best. Its receives are posted
#             before the message comes; latency.c's MPI_Recv often comes
#             after it.
#   baseline  BENCH_BASELINE_OF (default shim) with the library of another
#             build folder, BENCH_BASELINE (only then): before/after a
#             change in one run
#
# Every message is checked (length, source, tag, first and last byte); a
# run with a mismatch counts as failed. Runs alternate: each round runs
# every cell once in each configuration, in an order rotated from round to
# round. Open MPI gets --bind-to none (the threads of a rank would share
# its one core otherwise).
#
# Output: per host a table of the median half round trip of each
# configuration and its ratio to raw, also in bench/results/latency-summary.txt
# with a machine header; every run is one CSV line
#   host,T,size,config,run,half_rtt_us
# in bench/results/latency-<host>.csv (NaN for a failed run, whose output is
# kept in bench/results/logs/). Exits 1 if any run failed.
#
# Environment:
#   BENCH_LAT_THREADS  thread pairs T                       (default "1 2")
#   BENCH_LAT_SIZES    message sizes in bytes               (default "8 4096")
#   BENCH_CONFIGS      comma list of configurations (default raw,shim,ucx,shm)
#   BENCH_RUNS         rounds                               (default 5)
#   BENCH_ARGS         more latency options (not the ceilings'), e.g. "-n 50000",
#                      or "-p": a blocking MPI_Probe before each receive (default none)
#   BENCH_TIMEOUT      seconds before a run is killed, NaN  (default 30;
#                      Open MPI 4.1 raw with 2 pairs on 2 cores sometimes hangs)
#   BENCH_RESULTS      output folder                 (default bench/results)
#   BENCH_BASELINE, BENCH_BASELINE_OF  see baseline above
# MPISHIM_* variables of the caller are removed: each configuration sets its own.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
bench_setup latency
tmo=${BENCH_TIMEOUT:-30}
threads=${BENCH_LAT_THREADS:-1 2}
sizes=${BENCH_LAT_SIZES:-8 4096}
IFS=, read -r -a configs <<< "${BENCH_CONFIGS:-raw,shim,ucx,shm}"
baseline=${BENCH_BASELINE:-}
baseline_of=${BENCH_BASELINE_OF:-shim}

bench_posint BENCH_RUNS "$runs"
bench_posint BENCH_TIMEOUT "$tmo"
for t in $threads; do
    if ! [[ $t =~ ^[1-9][0-9]*$ ]] || [ "$t" -gt 64 ]; then die "BENCH_LAT_THREADS: '$t' is not a thread count (1..64)"; fi
done
for s in $sizes; do
    if ! [[ $s =~ ^[0-9]+$ ]] || [ "$s" -gt 16777216 ]; then die "BENCH_LAT_SIZES: '$s' is not a size in bytes (0..16777216)"; fi
done
if [ -z "${threads// /}" ] || [ -z "${sizes// /}" ]; then die "BENCH_LAT_THREADS and BENCH_LAT_SIZES must not be empty"; fi
for c in "${configs[@]}"; do
    case $c in raw|shim|ucx|shm|tcp|ceiling-ucx|ceiling-shm|ceiling-tcp|baseline) ;;
        *) die "unknown configuration '$c' (raw shim ucx shm tcp ceiling-ucx ceiling-shm ceiling-tcp baseline)" ;;
    esac
done
case $baseline_of in shim|ucx|shm|tcp) ;; *) die "BENCH_BASELINE_OF: '$baseline_of' is not shim, ucx, shm or tcp" ;; esac
bench_baseline_configs
bench_hosts "$@"
bench_baseline_hosts
cells=()
for s in $sizes; do for t in $threads; do cells+=("$t $s"); done; done
bench_start

bench_configs() { echo "${configs[*]}"; }

# bench_run HOST CELL CONFIG ROUND CSV: one run, its CSV line; prints the
# half round trip or "failed".
bench_run() {
    local host=$1 t=${2% *} size=${2#* } cfg=$3 round=$4 csv=$5
    local prog=$build/$host/bench/latency lib=$build/$host/libmpishim.so as=$cfg
    local -a cmd flags more envs=()
    # shellcheck disable=SC2206  # word splitting of the flags is intended
    flags=($MPIRUN_FLAGS) more=($extra)
    [ "$host" = openmpi ] && flags+=(--bind-to none)
    if [ "$cfg" = baseline ]; then as=$baseline_of lib=$baseline/$host/libmpishim.so; fi
    local ceil=${as#ceiling-} # the ceiling's library, or empty
    [ "$ceil" != "$as" ] || ceil=
    case $as in
        ucx) envs=(MPISHIM_FABRIC=ucx "MPISHIM_NUM_VCIS=$t") ;;
        shm|tcp) envs=("MPISHIM_FABRIC=$as" "MPISHIM_NUM_VCIS=$t" MPISHIM_ASSERT=no_any_tag) ;;
    esac
    if [ "$as" = raw ]; then
        cmd=("$MPIRUN" "${flags[@]}" -np 2 "$prog")
    elif [ -n "$ceil" ]; then
        [ "$ceil" = tcp ] && ceil='tcp;ofi_rxm'
        cmd=("$MPIRUN" "${flags[@]}" -np 2 "$build/$host/bench/ceiling" -b "$ceil" -w 1 -p -q -d 1)
    else
        cmd=(env "${envs[@]}" "$build/mpishim" --host "$host" --lib "$lib" "$MPIRUN" "${flags[@]}" -np 2 "$prog")
    fi
    cmd+=(-t "$t" -s "$size")
    [ -n "$ceil" ] || cmd+=("${more[@]}")
    local out rc line why="" want=1 log=$results/logs/latency-$host-T$t-$size-$cfg-run$round.log
    [ "$as" = raw ] && want=0
    out=$(timeout -k 10 "$tmo" "${cmd[@]}" 2>&1)
    rc=$?
    line=$(grep -m 1 '^latency shim=' <<< "$out")
    val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<< " $line"; }
    if [ -n "$ceil" ]; then
        # No shim, and its own result line: a mismatch or a missing figure fails.
        line=$(grep -m 1 '^multirate mode=ceiling-' <<< "$out")
        if [ $rc -ne 0 ] || [ -z "$(val half_rtt_us)" ]; then
            why="exit $rc${line:+, $line}"
        elif [ "$(val mismatches)" != 0 ]; then
            why="$(val mismatches) message(s) not as sent"
        fi
    elif [ $rc -eq 3 ]; then
        why="$(val failures) message(s) not as sent"
    elif [ $rc -ne 0 ] || [ -z "$line" ] || [ "$(val shim)" != "$want" ]; then
        why=$(bench_why "$rc" "$line" "$want")
    fi
    if [ -n "$why" ]; then
        bench_fail "$log" "$host T=$t size=$size $cfg run $round" "$why" "$out" "${cmd[@]}"
        echo "$host,$t,$size,$cfg,$round,NaN" >> "$csv"
        echo failed
        return
    fi
    echo "$host,$t,$size,$cfg,$round,$(val half_rtt_us)" >> "$csv"
    val half_rtt_us
}

# bench_table HOST CSV: median half round trip per cell and configuration,
# and each configuration's ratio to raw (below 1: faster than the host).
bench_table() {
    local host=$1 csv=$2
    awk -F, -v cfgs="${configs[*]}" -v order="$(printf '%s;' "${cells[@]}")" "$bench_awk"'
    $1 == "host" { next }
    { key = $2 SUBSEP $3 SUBSEP $4; if (isnum($6)) { n[key]++; v[key, n[key]] = $6 + 0 } else bad[key]++ }
    END {
        nc = split(cfgs, C, " "); nr = split(order, R, ";")
        # Columns as wide as their names (the ceilings are longer).
        for (j = 1; j <= nc; j++) { W[j] = length(C[j]) > 8 ? length(C[j]) : 8; Q[j] = length(C[j]) + 4 > 9 ? length(C[j]) + 4 : 9 }
        printf "%3s %6s |", "T", "size"
        for (j = 1; j <= nc; j++) printf " %*s", W[j] + 1, C[j]
        printf " |"
        for (j = 1; j <= nc; j++) if (C[j] != "raw") printf " %*s", Q[j], C[j] "/raw"
        printf "\n"
        for (i = 1; i <= nr; i++) {
            if (R[i] == "") continue
            split(R[i], c, " ")
            printf "%3s %6s |", c[1], hsize(c[2])
            r = med(c[1] SUBSEP c[2] SUBSEP "raw")
            for (j = 1; j <= nc; j++) {
                m = med(c[1] SUBSEP c[2] SUBSEP C[j])
                printf " %*s%s", W[j], m == "" ? "-" : sprintf("%.3f", m), bad[c[1] SUBSEP c[2] SUBSEP C[j]] ? "*" : " "
            }
            printf " |"
            for (j = 1; j <= nc; j++) if (C[j] != "raw") {
                m = med(c[1] SUBSEP c[2] SUBSEP C[j])
                printf " %*s", Q[j], (m == "" || r == "" || r <= 0) ? "-" : sprintf("%.2fx", m / r)
            }
            printf "\n"
        }
        printf "half round trip in us, median of the runs (* some runs failed: the median is of the others)\n"
    }' "$csv" | sed -e 's/ *$//'
}

header=$(
    echo "Ping-pong latency (bench/latency.c), 2 ranks, T thread pairs each on a communicator of its own;"
    echo "half a round trip in microseconds with the T pairs going at once (a repetition ends with the last"
    echo "pair; median repetition of each run), median of $runs alternating runs per cell and configuration;"
    echo "xN/raw below 1 is faster than the host alone."
    bench_header full
    echo "configs: ${configs[*]}; T: $threads; sizes: $sizes${extra:+; latency options: $extra}"
    [ -z "$baseline" ] || echo "baseline = $baseline_of with the library of $baseline"
    echo "Open MPI: --bind-to none. $cores cores: 2 x T busy threads above that are oversubscribed."
)
echo "$header"
echo
bench_rounds "host,T,size,config,run,half_rtt_us" latency- "T,size " "${cells[@]}"
bench_finish "; load average at the end: $(bench_loadavg)"
