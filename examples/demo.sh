#!/usr/bin/env bash
# The main demo: examples/thread_pairs (2 ranks, T thread pairs each sending
# windows of small messages) run on the raw host MPI and under mpishim, side
# by side, for every host built. Runs alternate raw/shim and the table shows
# the median of DEMO_RUNS (default 3) runs of each.
#
#   examples/demo.sh [openmpi] [mpich]      (make demo runs it)
#
# Environment: DEMO_THREADS (default "1 4"), DEMO_RUNS (default 3).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
threads=${DEMO_THREADS:-1 4}
runs=${DEMO_RUNS:-3}
hosts=("$@")
if [ ${#hosts[@]} -eq 0 ]; then
    for h in openmpi mpich; do [ -f "$build/$h/libmpishim.so" ] && hosts+=("$h"); done
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

cores=$(nproc)
echo "thread_pairs demo: 2 ranks, T thread pairs per rank, 8-byte messages, window 128"
echo "machine: $cores cores; 2 ranks x T threads > $cores cores means oversubscribed"
echo "each figure is the median of $runs runs (raw and shim runs alternate)"
echo
printf '%-8s %3s %16s %16s %10s\n' host T "raw (M msg/s)" "shim (M msg/s)" "shim/raw"

median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

rate() { # prints M msg/s of one run, or "nan" if the run failed
    local out
    out=$("$@" 2>/dev/null) || { echo nan; return; }
    sed -n 's/.*mmsgs_per_s=\([0-9.]*\).*/\1/p' <<< "$out" | head -n 1
}

status=0
for host in "${hosts[@]}"; do
    # shellcheck disable=SC1091
    . "$build/$host/host.env"
    flags=""
    [ "$HOST_FLAVOR" = openmpi ] && flags=$MPIRUN_FLAGS
    prog=$build/$host/examples/thread_pairs
    for t in $threads; do
        raw=() shim=()
        for _ in $(seq "$runs"); do
            raw+=("$(rate "$MPIRUN" $flags -np 2 "$prog" -t "$t" -q)")
            shim+=("$(rate "$build/mpishim" --host "$host" "$MPIRUN" $flags -np 2 "$prog" -t "$t" -q)")
        done
        r=$(printf '%s\n' "${raw[@]}" | median)
        s=$(printf '%s\n' "${shim[@]}" | median)
        case "${raw[*]} ${shim[*]}" in
            *nan*) status=1; echo "demo: a $host run with T=$t failed; rerun it by hand to see why" >&2 ;;
        esac
        printf "%-8s %3s %16.3f %16.3f %10s\n" "$host" "$t" "$r" "$s" \
            "$(awk -v r="$r" -v s="$s" 'BEGIN { if (r > 0) printf "%.2fx", s / r; else print "-" }')"
    done
done
exit $status
