#!/usr/bin/env bash
# Multi-node runs on the simulated cluster of tools/netns-cluster.sh (issue
# 17), for tests/run.sh and bench/run_multinode.sh. The cluster must be up.
#
#   tests/multinode.sh run HOST MODE PROGRAM [ARGS...]
#       MODE shim: through the launcher build/mpishim (unchanged), raw: the
#       host alone, notcp: the host alone with only shared-memory and self
#       transports (must fail: proves that nodes do not share memory).
#   tests/multinode.sh lost HOST
#       the lost-node case: tests/proc/multinode traffic, raw then under the
#       shim; once traffic runs, every process of the last node is killed;
#       prints "== raw"/"== shim" sections with "== rc N" and "== secs S"
#       (seconds from the kill to the job's end).
#   tests/multinode.sh line HOST      print the launch command line (docs/testing.md)
#
# Variables: MN_NODES (nodes, default 2), MN_NP (ranks, default 4; placed
# round robin over the nodes, so rank r and r^1 are on different nodes),
# MN_LOST_AFTER (seconds of traffic before the kill, default 2),
# MN_LOST_SECONDS (how long the traffic would run without the kill, 60),
# MN_FINALIZE_GRACE and MN_DONE (MPICH only, see "run" below).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
cluster=$top/tools/netns-cluster.sh
nodes=${MN_NODES:-2}
np=${MN_NP:-4}
net=${MSH_NET:-10.77.0}

die() { echo "multinode: $*" >&2; exit 2; }

[ $# -ge 2 ] || die "usage: run HOST MODE PROGRAM... | lost HOST | line HOST"
cmd=$1 host=$2
shift 2
hb=$build/$host
[ -f "$hb/host.env" ] || die "$hb/host.env missing (make)"
# shellcheck disable=SC1091
. "$hb/host.env"

# Open MPI refuses root without these; harmless elsewhere.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

mkdir -p "$build/multinode"
# One slot per node and more ranks than nodes: both hosts then place ranks
# round robin (0 on node0, 1 on node1, 2 on node0, ...), so the tests that
# pair rank r with r^1 send across nodes while a ring also has a neighbour
# on its own node.
hostfile=$build/multinode/hosts.$host
: > "$hostfile.tmp"
for ((i = 0; i < nodes; i++)); do
    if [ "$host" = openmpi ]; then echo "msh-node$i slots=1"; else echo "msh-node$i:1"; fi >> "$hostfile.tmp"
done
mv "$hostfile.tmp" "$hostfile"

# The host's command line for a job on the cluster, TCP between nodes.
# Open MPI: ob1 over btl tcp between nodes, vader inside one, self; the
# daemons' out-of-band channel and btl tcp on the cluster's /24 only. Its
# one-sided layer: osc/rdma has no RDMA over btl tcp (MPI_Win_create fails)
# and osc/pt2pt refuses MPI_THREAD_MULTIPLE, so windows go through osc/ucx,
# with UCX on TCP as well. MPICH (ch4:ucx): UCX on tcp between nodes, shared
# memory inside one, on the node's eth0.
# Extra args: "notcp" leaves out every TCP transport.
host_line() {
    local mode=${1:-} ucx_tls=tcp,self btl=tcp,self,vader
    [ "$mode" != notcp ] || { ucx_tls=self; btl=self,vader; }
    if [ "$host" = openmpi ]; then
        local line=("$MPIRUN" $MPIRUN_FLAGS --hostfile "$hostfile" --map-by node
            --mca plm_rsh_agent "$top/tools/netns-rsh"
            --mca pml ob1 --mca btl "$btl"
            --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24"
            --mca osc ucx -x UCX_TLS="$ucx_tls" -x UCX_NET_DEVICES=eth0)
        # Open MPI passes no environment to remote nodes by itself: the
        # tests' own variables (the launcher adds MPISHIM_* and LD_PRELOAD).
        local v
        for v in $(env | sed -n 's/^\(TEST_[A-Z_]*\)=.*/\1/p'); do line+=(-x "$v"); done
        printf '%s\n' "${line[@]}"
    else
        printf '%s\n' "$MPIRUN" -f "$hostfile" -launcher ssh -launcher-exec "$top/tools/netns-rsh" \
            -genv UCX_TLS "$ucx_tls" -genv UCX_NET_DEVICES eth0
    fi
}

# The job's command (launcher first for "shim"), one word a line.
job_line() {
    local mode=$1
    shift
    local hl
    mapfile -t hl < <(host_line "$mode")
    if [ "$mode" = shim ]; then
        printf '%s\n' "$build/mpishim" --host "$host" --lib "$hb/libmpishim.so" "${hl[@]}" -np "$np" "$@"
    else
        printf '%s\n' "${hl[@]}" -np "$np" "$@"
    fi
}

case $cmd in
run)
    [ $# -ge 2 ] || die "usage: run HOST shim|raw|notcp PROGRAM [ARGS]"
    mode=$1
    shift
    mapfile -t job < <(job_line "$mode" "$@")
    # mpirun runs on node 0 (its hostname is msh-node0, so it is one of the
    # hostfile's nodes and starts node 0's ranks itself).
    [ "$host" = mpich ] && [ "$mode" != notcp ] || exec "$cluster" exec 0 "${job[@]}"
    # MPICH 4.0.2 ch4:ucx over TCP hangs in MPI_Finalize in about 1 run of 3,
    # raw host too (one rank waits in PMI's barrier while a peer waits in
    # ucp_disconnect for it; MPICH removed that barrier after 4.0). A test
    # prints its OK line after its last check and a barrier of all ranks,
    # just before MPI_Finalize: when the job is still there MN_FINALIZE_GRACE
    # seconds (default 5; a finalize that ends takes under 2) after that line, it is ended and reported as a
    # SKIP naming the host bug, so the case shows but neither passes nor
    # costs the whole timeout.
    out=$(mktemp)
    "$cluster" exec 0 "${job[@]}" > "$out" 2>&1 &
    pid=$!
    # Killed from outside (a runner's timeout): take the job down too.
    trap 'for ((i = 0; i < nodes; i++)); do "$cluster" kill "$i"; done; cat "$out"; rm -f "$out"; exit 143' TERM INT
    ok_at=""
    while kill -0 "$pid" 2> /dev/null; do
        if [ -z "$ok_at" ] && grep -qE "${MN_DONE:-^OK }" "$out"; then ok_at=$SECONDS; fi
        if [ -n "$ok_at" ] && [ $((SECONDS - ok_at)) -ge "${MN_FINALIZE_GRACE:-5}" ]; then
            for ((i = 0; i < nodes; i++)); do "$cluster" kill "$i"; done
            wait "$pid" 2> /dev/null || true
            cat "$out"
            rm -f "$out"
            echo "SKIP multinode: all checks passed, then MPI_Finalize hung (MPICH 4.0.2 ch4:ucx over TCP, raw too)"
            exit 0
        fi
        sleep 0.2
    done
    rc=0
    wait "$pid" || rc=$?
    cat "$out"
    rm -f "$out"
    exit "$rc"
    ;;
line)
    job_line "${1:-shim}" PROGRAM | tr '\n' ' '
    echo
    ;;
lost)
    victim=msh-node$((nodes - 1))
    after=${MN_LOST_AFTER:-2}
    prog=$hb/tests/proc/multinode
    for mode in raw shim; do
        echo "== $mode"
        log=$build/multinode/lost-$host-$mode.log
        mapfile -t job < <(job_line "$mode" "$prog" traffic "${MN_LOST_SECONDS:-60}")
        # What is measured is the end after the kill, not the start: a job
        # that does not get going (seen on raw Open MPI too, about 1 start in
        # 10 in this loop) is stopped, shown, and started once more.
        started=0
        for attempt in 1 2; do
            env MPISHIM_SOLO=0 "$cluster" exec 0 "${job[@]}" > "$log" 2>&1 &
            pid=$!
            # Wait for the traffic (rank 0 says "running" after the first
            # round with every rank), then let it run a little.
            for ((i = 0; i < 300; i++)); do
                grep -q '^running$' "$log" && break
                kill -0 "$pid" 2> /dev/null || break
                sleep 0.1
            done
            if grep -q '^running$' "$log"; then started=1; break; fi
            # Never got going: say how it ended (or that it hangs) and stop it.
            kill -0 "$pid" 2> /dev/null && { echo "attempt $attempt: no traffic after 30 s: stopping the job"; kill "$pid"; }
            rc=0
            wait "$pid" || rc=$?
            for ((i = 0; i < nodes; i++)); do "$cluster" kill "$i"; done
            sed "s/^/  attempt $attempt | /" "$log"
            echo "attempt $attempt did not start (exit $rc)"
        done
        [ $started = 1 ] || { echo "== rc start $rc"; continue; }
        sleep "$after"
        t0=$(date +%s.%N)
        echo "killing every process of $victim: $("$cluster" pids "$victim" | wc -l) processes"
        "$cluster" kill "$victim"
        rc=0
        wait "$pid" || rc=$?
        t1=$(date +%s.%N)
        sed 's/^/  | /' "$log" | tail -n 15
        # Nothing of the job may be left on the surviving nodes: processes
        # still exiting when the launcher returns get 5 s to go (a loaded
        # machine once saw MPICH's raw run's ranks a moment after).
        left=""
        for ((t = 0; t < 50; t++)); do
            left=""
            for ((i = 0; i < nodes; i++)); do
                left+=$("$cluster" pids "$i" | tr '\n' ' ')
            done
            [ -n "${left// /}" ] || break
            sleep 0.1
        done
        [ -z "$left" ] || { echo "== left behind: $left"; for p in $left; do kill -9 "$p" 2> /dev/null || true; done; }
        echo "== rc $rc"
        echo "== secs $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')"
    done
    ;;
*) die "unknown command $cmd" ;;
esac
