#!/usr/bin/env bash
# bench/run_callgrind.sh - instructions per message at T = 1 (issue 15):
# the raw host and the shim under every progress policy, counted by
# callgrind, so the figure does not depend on this noisy 2-core machine.
#
#   bench/run_callgrind.sh [openmpi] [mpich]
#
# Each configuration runs bench/multirate (2 ranks, 1 thread pair, 8 B,
# window W) twice under valgrind --tool=callgrind, with N1 and N2 timed
# windows; the difference of the instructions both ranks executed, divided
# by the (N2 - N1) x W extra messages, is the cost of one message, sender
# plus receiver, with start-up, warm-up and finalize cancelled out. It is
# split into the program's threads and the shim's progress thread (the
# thread running progress_main; PROGRESS=thread and offload), whose count
# is polling, so it depends on how valgrind schedules threads: read it as
# "busy", not as a cost per message.
#
# Environment: CG_W (window, default 64), CG_N1 / CG_N2 (timed windows,
# default 20 / 120), CG_CONFIGS (comma list, default
# raw,global,vci,thread,combine,offload). Writes
# bench/results/callgrind-summary.txt and callgrind-<host>.csv.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=$top/build
results=${BENCH_RESULTS:-$here/results}
W=${CG_W:-64}
N1=${CG_N1:-20}
N2=${CG_N2:-120}
IFS=, read -r -a configs <<< "${CG_CONFIGS:-raw,global,vci,thread,combine,offload}"
command -v valgrind >/dev/null || { echo "run_callgrind: valgrind not found (apt-get install valgrind)" >&2; exit 2; }
hosts=("$@")
if [ ${#hosts[@]} -eq 0 ]; then
    for h in openmpi mpich; do [ -f "$build/$h/host.env" ] && hosts+=("$h"); done
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for v in $(env | sed -n 's/^\(MPISHIM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
mkdir -p "$results"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# count HOST CONFIG N: runs one measurement; prints "program progress"
# (instructions summed over both ranks' threads).
count() {
    local host=$1 cfg=$2 n=$3 dir=$work/$1-$2-$3
    mkdir -p "$dir"
    # shellcheck disable=SC1090
    . "$build/$host/host.env"
    # shellcheck disable=SC2206
    local -a flags=($MPIRUN_FLAGS) pre=()
    [ "$HOST_FLAVOR" = openmpi ] || flags=()
    [ "$cfg" = raw ] || pre=(env "LD_PRELOAD=$build/$host/libmpishim.so" "MPISHIM_PROGRESS=$cfg")
    if ! timeout -k 10 900 "$MPIRUN" "${flags[@]}" -np 2 "${pre[@]}" valgrind -q --tool=callgrind \
            --separate-threads=yes --callgrind-out-file="$dir/cg.%p" \
            "$build/$host/bench/multirate" -t 1 -s 8 -w "$W" -i "$n" -q > "$dir/out" 2>&1; then
        echo "run_callgrind: $host $cfg N=$n failed:" >&2
        tail -5 "$dir/out" >&2
        echo "NaN NaN"
        return
    fi
    local f prog=0 prg=0 ir
    for f in "$dir"/cg.*; do
        ir=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$f" | head -n 1)
        [ -n "$ir" ] || ir=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$f" | head -n 1)
        if grep -q 'progress_main' "$f"; then
            prg=$((prg + ir))
        else
            prog=$((prog + ir))
        fi
    done
    echo "$prog $prg"
}

{
    echo "# instructions per 8-byte message at T = 1, sender + receiver (callgrind; bench/run_callgrind.sh)"
    echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, window $W, (N2 - N1) = $((N2 - N1)) windows"
} > "$results/callgrind-summary.txt"
for host in "${hosts[@]}"; do
    csv=$results/callgrind-$host.csv
    echo "host,config,program_instr_per_msg,progress_thread_instr_per_msg" > "$csv"
    # shellcheck disable=SC1090
    . "$build/$host/host.env"
    echo "" >> "$results/callgrind-summary.txt"
    echo "$host ($("$MPIRUN" --version 2>&1 | grep -m1 -iE 'version|open mpi' | tr -s ' '))" >> "$results/callgrind-summary.txt"
    printf "  %-8s %12s %12s %14s\n" config program "shim-raw" "progress thr" >> "$results/callgrind-summary.txt"
    raw=""
    for cfg in "${configs[@]}"; do
        read -r a1 p1 <<< "$(count "$host" "$cfg" "$N1")"
        read -r a2 p2 <<< "$(count "$host" "$cfg" "$N2")"
        msgs=$(((N2 - N1) * W))
        per=$(awk -v a="$a1" -v b="$a2" -v m="$msgs" 'BEGIN { if (a == "NaN" || b == "NaN") print "NaN"; else printf "%.0f", (b - a) / m }')
        pth=$(awk -v a="$p1" -v b="$p2" -v m="$msgs" 'BEGIN { if (a == "NaN" || b == "NaN") print "NaN"; else printf "%.0f", (b - a) / m }')
        [ "$cfg" = raw ] && raw=$per
        diff=$(awk -v p="$per" -v r="$raw" 'BEGIN { if (p == "NaN" || r == "" || r == "NaN") print "-"; else printf "%+.0f", p - r }')
        [ "$cfg" = raw ] && diff="-"
        echo "$host,$cfg,$per,$pth" >> "$csv"
        printf "  %-8s %12s %12s %14s\n" "$cfg" "$per" "$diff" "$pth" >> "$results/callgrind-summary.txt"
        echo "$host $cfg: $per instr/msg (progress thread $pth)"
    done
done
cat "$results/callgrind-summary.txt"
