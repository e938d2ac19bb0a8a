#!/usr/bin/env bash
# A simulated cluster on one machine, for multi-node runs of the host MPIs:
# N network namespaces msh-node0..N-1, each with one veth
# interface on a private /24 (MSH_NET, default 10.77.0: node i is
# MSH_NET.(i+1)), joined by a bridge that lives in a namespace of its own
# (msh-hub), so nothing is added to the machine's own network. Each command
# run on a node also gets its own UTS namespace with hostname = node name:
# the host MPIs decide "same node" (shared memory) by hostname, so ranks on
# different simulated nodes talk over TCP.
#
#   tools/netns-cluster.sh up N        make N nodes (removes leftovers first)
#   tools/netns-cluster.sh down        remove everything "up" made
#   tools/netns-cluster.sh shape       apply MSH_DELAY/MSH_JITTER/MSH_LOSS now
#   tools/netns-cluster.sh exec NODE CMD...   run CMD on NODE (msh-nodeI or I)
#   tools/netns-cluster.sh rsh [-opts] NODE CMD...  launch agent for the
#                                      host MPIs (ssh-style; options ignored)
#   tools/netns-cluster.sh check       why it cannot run here (exit 1), or nothing
#   tools/netns-cluster.sh pids NODE   the processes running on NODE
#   tools/netns-cluster.sh kill NODE   SIGKILL every process of NODE
#
# Link conditions, read by "up" and "shape" (applied on every node's
# interface, so a message between two nodes sees them twice):
#   MSH_DELAY   netem delay, e.g. 1ms    (default: none)
#   MSH_JITTER  netem jitter, e.g. 200us (default: none; needs MSH_DELAY)
#   MSH_LOSS    packet loss in percent of the packets a node sends, e.g. 0.5
#               (default: none). netem when the kernel has it, else an
#               iptables "statistic" rule (same effect for TCP: the segment
#               is dropped and retransmitted).
# Delay and jitter need the kernel's sch_netem; "check-delay" and
# "check-loss" say whether each can be had here.
#
# Root only. Host names resolve through /etc/netns/msh-nodeI/hosts, which
# "ip netns exec" binds over /etc/hosts inside the node.
set -euo pipefail

PREFIX=msh-node
HUB=msh-hub
NET=${MSH_NET:-10.77.0}
STATE=/run/msh-netns-cluster     # holds the node count while up
self=$(readlink -f "$0")

die() { echo "netns-cluster: $*" >&2; exit 1; }

# Why this machine cannot run the cluster, or nothing.
why_not() {
    [ "$(id -u)" = 0 ] || { echo "needs root"; return; }
    command -v ip > /dev/null || { echo "no ip command (iproute2)"; return; }
    command -v unshare > /dev/null || { echo "no unshare (util-linux)"; return; }
    local probe=msh-probe-$$
    if ! ip netns add "$probe" 2> /dev/null; then echo "ip netns add does not work here"; return; fi
    if ! ip -n "$probe" link add msh-pv0 type veth peer name msh-pv1 2> /dev/null; then
        ip netns del "$probe"; echo "no veth support"; return
    fi
    if ! ip -n "$probe" link add msh-pbr type bridge 2> /dev/null; then
        ip netns del "$probe"; echo "no bridge support"; return
    fi
    if ! ip netns exec "$probe" unshare --uts true 2> /dev/null; then
        ip netns del "$probe"; echo "no UTS namespaces (unshare --uts failed)"; return
    fi
    ip netns del "$probe"
}

# The kernel has sch_netem when a netem qdisc can be added to a throwaway
# namespace's loopback (module missing: "Specified qdisc kind is unknown").
have_netem() {
    local probe=msh-probe-$$ ok=1
    ip netns add "$probe" 2> /dev/null || return 1
    ip -n "$probe" link set lo up
    ip netns exec "$probe" tc qdisc add dev lo root netem delay 1ms 2> /dev/null || ok=0
    ip netns del "$probe"
    [ $ok = 1 ]
}

have_iptables_statistic() {
    command -v iptables > /dev/null || return 1
    local probe=msh-probe-$$ ok=1
    ip netns add "$probe" 2> /dev/null || return 1
    ip netns exec "$probe" iptables -A OUTPUT -m statistic --mode random --probability 0.5 -j DROP \
        2> /dev/null || ok=0
    ip netns del "$probe"
    [ $ok = 1 ]
}

node_name() { # msh-node3 or 3 -> msh-node3
    case "$1" in
        "$PREFIX"[0-9]*) echo "$1" ;;
        [0-9]*) echo "$PREFIX$1" ;;
        *) die "not a node: $1 (msh-nodeI or I)" ;;
    esac
}

nodes_up() { [ -f "$STATE" ] && cat "$STATE" || echo 0; }

down() {
    local ns
    # Every process still inside a node first: a namespace with processes
    # in it outlives "ip netns del" (only the name goes away).
    for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -E "^($PREFIX[0-9]+|$HUB)$" || true); do
        ip netns pids "$ns" 2> /dev/null | xargs -r kill -9 2> /dev/null || true
        ip netns del "$ns" 2> /dev/null || true
        rm -rf "/etc/netns/$ns"
    done
    rm -rf /etc/netns/"$PREFIX"[0-9]*
    rmdir /etc/netns 2> /dev/null || true
    rm -f "$STATE"
}

shape() {
    local n i ns
    n=$(nodes_up)
    [ "$n" -gt 0 ] || die "no cluster is up"
    if [ -n "${MSH_DELAY:-}${MSH_JITTER:-}" ] && ! have_netem; then
        die "MSH_DELAY/MSH_JITTER need the kernel's netem qdisc (sch_netem), which this kernel lacks"
    fi
    local use_netem_loss=0
    if [ -n "${MSH_LOSS:-}" ]; then
        if have_netem; then use_netem_loss=1
        elif ! have_iptables_statistic; then
            die "MSH_LOSS needs netem (sch_netem) or iptables with the statistic match"
        fi
    fi
    for ((i = 0; i < n; i++)); do
        ns=$PREFIX$i
        # Start from a clean link every time: shape replaces, never adds.
        ip netns exec "$ns" tc qdisc del dev eth0 root 2> /dev/null || true
        if command -v iptables > /dev/null; then
            ip netns exec "$ns" iptables -F OUTPUT 2> /dev/null || true
        fi
        local args=()
        [ -z "${MSH_DELAY:-}" ] || args+=(delay "$MSH_DELAY" ${MSH_JITTER:+"$MSH_JITTER"})
        [ -n "${MSH_DELAY:-}" ] || [ -z "${MSH_JITTER:-}" ] || args+=(delay 0ms "$MSH_JITTER")
        [ $use_netem_loss = 0 ] || args+=(loss "${MSH_LOSS}%")
        [ ${#args[@]} -eq 0 ] || ip netns exec "$ns" tc qdisc add dev eth0 root netem "${args[@]}"
        if [ -n "${MSH_LOSS:-}" ] && [ $use_netem_loss = 0 ]; then
            local p
            p=$(awk -v l="$MSH_LOSS" 'BEGIN { printf "%.6f", l / 100 }')
            ip netns exec "$ns" iptables -A OUTPUT -o eth0 -m statistic --mode random \
                --probability "$p" -j DROP
        fi
    done
}

up() {
    local n=$1 i ns
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up N: N is 1..200"
    local why
    why=$(why_not)
    [ -z "$why" ] || die "$why"
    down
    ip netns add "$HUB"
    ip -n "$HUB" link add br0 type bridge
    ip -n "$HUB" link set br0 up
    mkdir -p /etc/netns
    for ((i = 0; i < n; i++)); do
        ns=$PREFIX$i
        ip netns add "$ns"
        # Made in the hub, one end moved into the node: names stay short
        # and nothing touches the root namespace.
        ip -n "$HUB" link add "n$i" type veth peer name eth0 netns "$ns"
        ip -n "$HUB" link set "n$i" master br0 up
        ip -n "$ns" addr add "$NET.$((i + 1))/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
    done
    for ((i = 0; i < n; i++)); do
        mkdir -p "/etc/netns/$PREFIX$i"
        {
            echo "127.0.0.1 localhost"
            for ((j = 0; j < n; j++)); do echo "$NET.$((j + 1)) $PREFIX$j"; done
        } > "/etc/netns/$PREFIX$i/hosts"
    done
    echo "$n" > "$STATE"
    shape
}

# Run a command on a node: its network namespace (ip netns exec also binds
# /etc/netns/NODE/hosts) and a new UTS namespace named after the node.
node_exec() {
    local ns
    ns=$(node_name "$1")
    shift
    [ -e "/run/netns/$ns" ] || die "node $ns is not up"
    exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$ns" "$@"
}

cmd=${1:-}
[ -n "$cmd" ] || { sed -n '2,34s/^# \{0,1\}//p' "$self"; exit 2; }
shift
case $cmd in
    up) [ $# -eq 1 ] || die "usage: up N"; up "$1" ;;
    down) down ;;
    shape) shape ;;
    check) why=$(why_not); [ -z "$why" ] || { echo "$why"; exit 1; } ;;
    check-delay) have_netem || { echo "the kernel has no netem qdisc (sch_netem): no delay or jitter"; exit 1; } ;;
    check-loss) have_netem || have_iptables_statistic ||
                    { echo "neither netem (sch_netem) nor iptables with the statistic match: no loss"; exit 1; } ;;
    exec) [ $# -ge 2 ] || die "usage: exec NODE CMD..."; node_exec "$@" ;;
    rsh)
        # Launch agents are called like ssh: [options] host command...
        # (Hydra passes -x; Open MPI passes none to an agent it does not know).
        while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
        [ $# -ge 2 ] || die "usage: rsh [-opts] NODE CMD..."
        node=$1
        shift
        # ssh hands the remote shell one command line: do the same, so that
        # quoting made for ssh (Open MPI's "orted ... -mca ... \"...\"") works.
        node_exec "$node" sh -c "$*"
        ;;
    pids) ip netns pids "$(node_name "$1")" ;;
    kill) ip netns pids "$(node_name "$1")" | xargs -r kill -9 ;;
    *) die "unknown command $cmd (up N | down | shape | exec NODE CMD... | rsh NODE CMD... | check | pids NODE | kill NODE)" ;;
esac
