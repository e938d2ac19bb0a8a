#!/usr/bin/env bash
# bench/run_perf.sh - where a message's time goes, sampled by perf.
#
#   bench/run_perf.sh [openmpi] [mpich]
#
# Each configuration runs bench/multirate (2 ranks, T thread pairs, 8 B,
# window 128) for a few seconds under `perf record` (cpu-clock samples, so
# it works in a VM without hardware counters) and reports:
#   - the share of the time in each library (the shim, the host, UCX, the
#     kernel: a waiting owner's yields land there);
#   - the shim's hottest functions, each with its hottest instruction and
#     that instruction's share of the function's samples.
# Time, not instructions: run_callgrind.sh counts instructions, which
# cannot show a stall. One instruction holding a third or more of a
# function's samples is worth reading with `perf annotate`: a load waiting
# for stores it cannot forward from (a wide read of fields just written one
# by one), a `rep stos` or `rep movs` start-up, an atomic on a contended
# line. (The sample lands on the instruction after the one that waits.)
#
# Environment: PERF_CONFIGS (comma list, default raw,ucxdef,combine: raw =
# the host alone; ucxdef = UCX's lane under the default policy; anything
# else = MPISHIM_PROGRESS=<it>), PERF_THREADS (T, default 1), PERF_ARGS
# (multirate options, default -c: a communicator per thread pair),
# PERF_SECONDS (default 3), PERF_TOP (functions listed, default 15).
# Writes bench/results/perf-summary.txt; the perf data stay in a temporary
# folder unless PERF_KEEP names one. Exits 1 if a run failed (its rate
# reads "failed").
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=$top/build
results=${BENCH_RESULTS:-$here/results}
IFS=, read -r -a configs <<< "${PERF_CONFIGS:-raw,ucxdef,combine}"
T=${PERF_THREADS:-1}
args=${PERF_ARGS:--c}
secs=${PERF_SECONDS:-3}
ntop=${PERF_TOP:-15}
command -v perf >/dev/null || { echo "run_perf: perf not found (apt-get install linux-perf)" >&2; exit 2; }
hosts=("$@")
if [ ${#hosts[@]} -eq 0 ]; then
    for h in openmpi mpich; do [ -f "$build/$h/host.env" ] && hosts+=("$h"); done
fi
for h in "${hosts[@]}"; do
    [ -x "$build/$h/bench/multirate" ] || { echo "run_perf: no $build/$h/bench/multirate (make -C bench multirate)" >&2; exit 2; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for v in $(env | sed -n 's/^\(MPISHIM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
mkdir -p "$results"
if [ -n "${PERF_KEEP:-}" ]; then
    work=$PERF_KEEP
    mkdir -p "$work"
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi
out=$results/perf-summary.txt
failed=0
{
    echo "# where the time goes (perf record, cpu-clock; bench/run_perf.sh)"
    echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)),"
    echo "# multirate -t $T $args, ${secs} s per run, load average $(cut -d' ' -f1 /proc/loadavg)"
} > "$out"

# top_functions DATA: the shim's hottest functions, one per line:
# "share function".
top_functions() {
    perf report -i "$1" --sort dso,sym --stdio 2>/dev/null |
        awk -v n="$ntop" '$2 == "libmpishim.so" && $3 == "[.]" { print $1, $4; if (++k == n) exit }'
}

# hottest_insn DATA FUNCTION: "share address instruction" of its hottest
# instruction, the share being of the function's own samples.
hottest_insn() {
    perf annotate -i "$1" --stdio -s "$2" 2>/dev/null |
        awk '$2 == ":" && $1 ~ /^[0-9]+\.[0-9]+$/ && $1 + 0 > best {
                 best = $1 + 0; line = $1 "% " $3; for (i = 4; i <= NF; i++) line = line " " $i }
             END { print line }'
}

for host in "${hosts[@]}"; do
    # shellcheck disable=SC1090
    . "$build/$host/host.env"
    # shellcheck disable=SC2206
    flags=($MPIRUN_FLAGS)
    [ "$HOST_FLAVOR" = openmpi ] || flags=()
    echo "" >> "$out"
    echo "$host (MPI $HOST_MPI_VERSION)" >> "$out"
    for cfg in "${configs[@]}"; do
        pre=()
        case $cfg in
            raw) ;;
            ucxdef) pre=(env "LD_PRELOAD=$build/$host/libmpishim.so" MPISHIM_FABRIC=ucx) ;;
            *) pre=(env "LD_PRELOAD=$build/$host/libmpishim.so" "MPISHIM_PROGRESS=$cfg") ;;
        esac
        data=$work/$host-$cfg.data
        # shellcheck disable=SC2086
        line=$(timeout -k 10 120 perf record -q -e cpu-clock -F 4000 -o "$data" -- \
            "$MPIRUN" "${flags[@]}" -np 2 "${pre[@]}" "$build/$host/bench/multirate" -t "$T" -q -d "$secs" $args 2>&1 |
            grep '^multirate ')
        rate=$(sed -n 's/.*mmsgs_per_s=\([0-9.]*\).*/\1/p' <<< "$line")
        [ -n "$rate" ] || failed=1
        {
            echo ""
            echo "  $cfg: ${rate:-failed} M msg/s"
            echo "    by library:"
            perf report -i "$data" --sort dso --stdio 2>/dev/null |
                awk '$1 ~ /%$/ && $1 + 0 >= 0.5 { printf "      %7s  %s\n", $1, $2 }'
        } >> "$out"
        if [ "$cfg" != raw ]; then
            echo "    the shim's hottest functions (share of all samples; hottest instruction, share of the function's):" >> "$out"
            while read -r share fn; do
                printf "      %7s  %-28s %s\n" "$share" "$fn" "$(hottest_insn "$data" "$fn")" >> "$out"
            done < <(top_functions "$data")
        fi
        echo "$host $cfg: ${rate:-failed} M msg/s"
    done
done
cat "$out"
exit "$failed"
