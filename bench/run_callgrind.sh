#!/usr/bin/env bash
# bench/run_callgrind.sh - instructions per message at T = 1:
# what the shim's own code executes per message under every progress
# policy, counted by callgrind, so the figure does not depend on this noisy
# 2-core machine.
#
#   bench/run_callgrind.sh [openmpi] [mpich]
#
# Each configuration runs bench/multirate (2 ranks, 1 thread pair, 8 B,
# window W) twice under valgrind --tool=callgrind, with N1 and N2 timed
# windows; the difference between the two runs, divided by the
# (N2 - N1) x W extra messages, is the cost of one message, sender plus
# receiver, with start-up, warm-up and finalize cancelled out. Columns:
#   shim       instructions executed in libmpishim.so itself (exclusive
#              cost of its functions) by the program's threads: the shim's
#              overhead per message, since the host's code runs as it would
#              raw (the raw row is 0 by definition);
#   progress   the same in the progress thread (PROGRESS=thread, offload):
#              polling, which depends on how valgrind schedules threads;
#   all        every instruction of both processes. Both hosts poll while a
#              rank waits for its peer, so this column moves with timing
#              (run to run by +-50% here): it is shown, not compared.
#
# Environment: CG_W (window, default 64), CG_N1 / CG_N2 (timed windows,
# default 20 / 120), CG_CONFIGS (comma list, default
# raw,global,vci,thread,combine,offload,global-nosolo,combine-nosolo: a
# -nosolo suffix adds MPISHIM_SOLO=0, i.e. the runtime path that T > 1
# takes, with the program's thread owning progress; ucx: UCX's lane,
# MPISHIM_FABRIC=ucx with MPISHIM_PROGRESS=vci and one VCI; ucxdef: the
# same lane under the default policy). Writes
# bench/results/callgrind-summary.txt and callgrind-<host>.csv.
#
# CG_CALLS (a comma list of MPI calls, e.g. MPI_Isend,MPI_Irecv,MPI_Waitall;
# default none) adds, per configuration, what runs inside each of those
# calls only (callgrind --toggle-collect, one run of N2 windows: no start-up
# or polling outside them to cancel), per message, split by library: the
# shim, the lane's library (UCX or libfabric), the host MPI, the rest (libc).
# Both ranks are summed. A wait's figure includes its polling while the
# peer is not there yet, which depends on timing: compare posts, not waits.
# With CG_CALLS set and CG_CONFIGS unset, the configurations are ucxdef.
# Written to bench/results/callgrind-calls.txt.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=$top/build
results=${BENCH_RESULTS:-$here/results}
W=${CG_W:-64}
N1=${CG_N1:-20}
N2=${CG_N2:-120}
default_configs=raw,global,vci,thread,combine,offload,global-nosolo,combine-nosolo
[ -n "${CG_CALLS:-}" ] && default_configs=ucxdef
IFS=, read -r -a configs <<< "${CG_CONFIGS:-$default_configs}"
command -v valgrind >/dev/null || { echo "run_callgrind: valgrind not found (apt-get install valgrind)" >&2; exit 2; }
hosts=("$@")
if [ ${#hosts[@]} -eq 0 ]; then
    for h in openmpi mpich; do [ -f "$build/$h/host.env" ] && hosts+=("$h"); done
fi
for h in "${hosts[@]}"; do
    [ -x "$build/$h/bench/multirate" ] || { echo "run_callgrind: no $build/$h/bench/multirate (make -C bench multirate)" >&2; exit 2; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for v in $(env | sed -n 's/^\(MPISHIM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
# The figures are differences of two runs: on a busy machine the hosts'
# polling while a rank waits differs between them, and the shim column can
# come out far off (even negative).
awk -v n="$(nproc)" '$1 > n / 2 { exit 1 }' /proc/loadavg ||
    echo "run_callgrind: load average $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores: the figures will be noisy" >&2
mkdir -p "$results"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# prefix_of HOST CONFIG: the environment of a configuration, into pre.
prefix_of() {
    local host=$1 cfg=$2
    pre=()
    case $cfg in
        raw) ;;
        ucx) pre=(env "LD_PRELOAD=$build/$host/libmpishim.so" MPISHIM_PROGRESS=vci MPISHIM_FABRIC=ucx MPISHIM_NUM_VCIS=1) ;;
        ucxdef) pre=(env "LD_PRELOAD=$build/$host/libmpishim.so" MPISHIM_FABRIC=ucx MPISHIM_NUM_VCIS=1) ;;
        *-nosolo) pre=(env "LD_PRELOAD=$build/$host/libmpishim.so" "MPISHIM_PROGRESS=${cfg%-nosolo}" MPISHIM_SOLO=0) ;;
        *) pre=(env "LD_PRELOAD=$build/$host/libmpishim.so" "MPISHIM_PROGRESS=$cfg") ;;
    esac
}

# run_cg HOST CONFIG DIR N [CALLGRIND OPTION...]: multirate (N timed
# windows) under callgrind, one file per process and thread in DIR; returns
# 1, having said why, if the run failed.
run_cg() {
    local host=$1 cfg=$2 dir=$3 n=$4
    shift 4
    mkdir -p "$dir"
    # shellcheck disable=SC1090
    . "$build/$host/host.env"
    # shellcheck disable=SC2206
    local -a flags=($MPIRUN_FLAGS)
    [ "$HOST_FLAVOR" = openmpi ] || flags=()
    prefix_of "$host" "$cfg"
    if ! timeout -k 10 900 "$MPIRUN" "${flags[@]}" -np 2 "${pre[@]}" valgrind -q --tool=callgrind \
            --separate-threads=yes "$@" --callgrind-out-file="$dir/cg.%p" \
            "$build/$host/bench/multirate" -t 1 -s 8 -w "$W" -i "$n" -q > "$dir/out" 2>&1; then
        echo "run_callgrind: $host $cfg N=$n $* failed:" >&2
        tail -5 "$dir/out" >&2
        return 1
    fi
}

# count HOST CONFIG N: runs one measurement; prints "shim progress all"
# (instructions summed over both ranks).
count() {
    local host=$1 cfg=$2 n=$3 dir=$work/$1-$2-$3
    run_cg "$host" "$cfg" "$dir" "$n" || { echo "NaN NaN NaN"; return; }
    local f shim=0 prg=0 all=0 mine tot
    for f in "$dir"/cg.*; do
        read -r mine tot < <(awk -f "$here/callgrind-objects.awk" "$f" |
            awk '$2 ~ /libmpishim\.so$/ { m += $1 } { t += $1 } END { printf "%d %d\n", m, t }')
        all=$((all + tot))
        if grep -q 'progress_main' "$f"; then
            prg=$((prg + mine))
        else
            shim=$((shim + mine))
        fi
    done
    echo "$shim $prg $all"
}

per_msg() { # per_msg A1 A2: (A2 - A1) / messages, or NaN
    awk -v a="$1" -v b="$2" -v m="$(((N2 - N1) * W))" \
        'BEGIN { if (a == "NaN" || b == "NaN") print "NaN"; else printf "%.0f", (b - a) / m }'
}

# per_call HOST CONFIG CALL: one run counting inside CALL only; prints
# "shim lane host other" instructions per message (both ranks summed: the
# call runs on one side, or on both, as the program makes it).
per_call() {
    local host=$1 cfg=$2 call=$3 dir=$work/calls-$1-$2-$3
    # Raw, the call is the host's, which callgrind may name by its PMPI_
    # alias (one address, one name: the two patterns cannot both toggle).
    local toggles=(--toggle-collect="$call")
    [ "$cfg" = raw ] && toggles+=(--toggle-collect="P$call")
    run_cg "$host" "$cfg" "$dir" "$N2" "${toggles[@]}" || { echo "NaN NaN NaN NaN"; return; }
    # multirate runs 10 untimed windows before the N2 timed ones.
    cat "$dir"/cg.* | awk -f "$here/callgrind-objects.awk" | awk -v m="$(((N2 + 10) * W))" '
        $2 ~ /libmpishim\.so$/ { s += $1; next }
        $2 ~ /lib(ucp|uct|ucs|ucm|fabric)\.so/ { l += $1; next }
        $2 ~ /lib(mpi|mpich|open-pal|open-rte)[^\/]*\.so/ || $2 ~ /\/openmpi\/lib\// || $2 ~ /mca_/ { h += $1; next }
        { o += $1 }
        END { printf "%.0f %.0f %.0f %.0f\n", s / m, l / m, h / m, o / m }'
}

if [ -n "${CG_CALLS:-}" ]; then
    IFS=, read -r -a calls <<< "$CG_CALLS"
    out=$results/callgrind-calls.txt
    {
        echo "# instructions per 8-byte message inside each call only, T = 1 (callgrind --toggle-collect; bench/run_callgrind.sh, CG_CALLS)"
        echo "# $(date -u +%Y-%m-%dT%H:%MZ), window $W, $((N2 + 10)) windows; lane = UCX or libfabric; host = the host MPI's libraries"
    } > "$out"
    for host in "${hosts[@]}"; do
        # shellcheck disable=SC1090
        . "$build/$host/host.env"
        printf "\n%s (MPI %s)\n  %-10s %-12s %8s %8s %8s %8s\n" "$host" "$HOST_MPI_VERSION" config call shim lane host other >> "$out"
        for cfg in "${configs[@]}"; do
            for call in "${calls[@]}"; do
                read -r cs cl ch co <<< "$(per_call "$host" "$cfg" "$call")"
                printf "  %-10s %-12s %8s %8s %8s %8s\n" "$cfg" "$call" "$cs" "$cl" "$ch" "$co" >> "$out"
            done
        done
    done
    cat "$out"
    exit 0
fi
{
    echo "# instructions per 8-byte message at T = 1, sender + receiver (callgrind; bench/run_callgrind.sh)"
    echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, window $W, (N2 - N1) = $((N2 - N1)) windows, load average $(cut -d' ' -f1 /proc/loadavg)"
    echo "# shim: libmpishim.so's own code in the program's threads; progress: in the progress thread;"
    echo "# all: every instruction of both ranks (includes the host's polling while waiting: timing-dependent)"
} > "$results/callgrind-summary.txt"
for host in "${hosts[@]}"; do
    csv=$results/callgrind-$host.csv
    echo "host,config,shim_instr_per_msg,progress_thread_instr_per_msg,all_instr_per_msg" > "$csv"
    # shellcheck disable=SC1090
    . "$build/$host/host.env"
    {
        echo ""
        echo "$host (MPI $HOST_MPI_VERSION)"
        printf "  %-15s %8s %9s %9s\n" config shim progress all
    } >> "$results/callgrind-summary.txt"
    for cfg in "${configs[@]}"; do
        read -r s1 p1 a1 <<< "$(count "$host" "$cfg" "$N1")"
        read -r s2 p2 a2 <<< "$(count "$host" "$cfg" "$N2")"
        shim=$(per_msg "$s1" "$s2") prg=$(per_msg "$p1" "$p2") all=$(per_msg "$a1" "$a2")
        echo "$host,$cfg,$shim,$prg,$all" >> "$csv"
        printf "  %-15s %8s %9s %9s\n" "$cfg" "$shim" "$prg" "$all" >> "$results/callgrind-summary.txt"
        echo "$host $cfg: shim $shim instr/msg, progress thread $prg, all $all"
    done
done
cat "$results/callgrind-summary.txt"
