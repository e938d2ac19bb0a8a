# The multi-node cases of tests/run.sh, sourced by it: uses its
# run_case, hosts, filter and counters. Not a program of its own.
#
# 2 nodes (tools/netns-cluster.sh) x 2 ranks each, placed round robin so that
# the paired tests (rank r with r^1) talk across nodes, 4 threads per rank
# where the program has them. Per host:
#   - the ranks see 2 distinct processor names, the shim is active in every
#     rank and an MPISHIM_* variable set for the launcher reaches the ranks
#     of the remote node;
#   - with the hosts' TCP transports left out the job fails: Open MPI with
#     btl self,vader (vader is per hostname, so not between nodes: what
#     passes below went over btl tcp); MPICH with UCX_TLS=self (UCX carries
#     all of ch4:ucx's traffic; UCX's own shared memory would reach across
#     namespaces, one kernel, so the runs use UCX_TLS=tcp,self: TCP only);
#   - per link condition (clean; loss; delay, when the kernel has netem),
#     every program of MN_PROGRAMS under the shim's defaults and under
#     MPISHIM_PROGRESS=vci with a spreading map and the assertions it needs;
#   - a lost node: every process of node 1 killed mid-traffic, raw host then
#     shim: both must end non-zero, the shim within max(2 x raw, raw + 3 s),
#     nothing left behind.
# Variables: TEST_MN_LOSS (percent, default 0.5), TEST_MN_DELAY (default 1ms),
# TEST_MN_JITTER (default 200us).

mn_cluster=$top/tools/netns-cluster.sh
mn_run=$top/tests/multinode.sh

# Programs and, for each, the spreading configuration it allows: MAP=hash
# with both no-wildcard assertions, except mt_anysource, whose receives use
# MPI_ANY_SOURCE (MAP=tag needs only no_any_tag); rma_acc also splits every
# window into 4 internal windows. mt_cross is the two-thread case of its
# case, the others run 4 threads per rank. RMA: rma_acc
# (Put, Get, Accumulate, Get_accumulate under fence and lock_all). Not run
# here: rma_atomic, whose Fetch_and_op loops under lock_all hang the raw
# hosts over UCX on TCP (Open MPI 4.1.4 osc/ucx: no progress in 60 s; MPICH
# 4.0.2: MPI_Finalize), and rma_threads, which passes on both hosts but
# takes 15-30 s per run over TCP (window creation), too long for CI.
MN_PROGRAMS="mt_order mt_cross mt_anysource mt_coll part_threads rma_acc"
MN_LANES="ucx tcp"
mn_spread() {
    local s="MPISHIM_PROGRESS=vci MPISHIM_SOLO=0"
    case $1 in
        mt_anysource) echo "$s MPISHIM_MAP=tag MPISHIM_ASSERT=no_any_tag" ;;
        rma_*) echo "$s MPISHIM_MAP=hash MPISHIM_ASSERT=no_any_tag,no_any_source MPISHIM_WIN_K=4" ;;
        *) echo "$s MPISHIM_MAP=hash MPISHIM_ASSERT=no_any_tag,no_any_source" ;;
    esac
}
mn_wanted() { # any case of this section selected by TEST_FILTER?
    [ -z "$filter" ] && return 0
    local h
    for h in "${hosts[@]}"; do grep -qE -- "$filter" <<< "$h multinode" && return 0; done
    return 1
}

mn_skip() { # name why: count a skipped case, as run_case does for SKIP lines
    if [ -z "$filter" ] || grep -qE -- "$filter" <<< "$1"; then
        skipped=$((skipped + 1))
        printf 'SKIP %-58s       %s\n' "$1" "$2"
    fi
}

expect_mn_names() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    local n
    n=$(grep -cE '^rank [0-3] node msh-node[01] shim 1 spin 21$' "$2")
    [ "$n" -eq 4 ] || echo "expected 4 ranks on msh-node0/1 with the shim active and MPISHIM_SPIN_US=21, found $n"
}

expect_mn_fails() {
    [ "$1" -ne 0 ] || { echo "exit code 0: the nodes talked without TCP (shared memory between nodes?)"; return; }
    if grep -q '^OK ' "$2"; then echo "the program passed without TCP"; fi
}

expect_mn_lost() {
    [ "$1" -eq 0 ] || { echo "exit code $1"; return; }
    local m r secs
    for m in raw shim; do
        r=$(section "$m" "$2" | sed -n 's/^== rc //p')
        secs=$(section "$m" "$2" | sed -n 's/^== secs //p')
        [ -n "$r" ] || { echo "the $m run did not finish"; return; }
        case $r in start*) echo "the $m run never got its traffic going (rc ${r#start })"; return ;; esac
        [ "$r" != 0 ] || { echo "the $m run ended with exit code 0 after losing a node"; return; }
        [ -n "$secs" ] || { echo "no time for the $m run"; return; }
        if section "$m" "$2" | grep -q '^== left behind'; then echo "the $m run left processes behind"; return; fi
    done
    local raw shim
    raw=$(section raw "$2" | sed -n 's/^== secs //p')
    shim=$(section shim "$2" | sed -n 's/^== secs //p')
    awk -v r="$raw" -v s="$shim" 'BEGIN { lim = (2 * r > r + 3) ? 2 * r : r + 3;
        if (s > lim) printf "the shim took %.1f s to end, the raw host %.1f s (limit %.1f s)\n", s, r, lim }'
}

if [ "$(id -u)" != 0 ]; then
    mn_skip "multinode" "needs root (network namespaces)"
elif ! mn_why=$("$mn_cluster" check 2>&1); then
    mn_skip "multinode" "$mn_why"
elif mn_wanted; then
    # One cluster at a time on this machine (another checkout's run waits).
    exec 8> /run/msh-netns-cluster.lock
    flock -w 900 8 || echo "run.sh: waited 900 s for /run/msh-netns-cluster.lock; going on"
    # Taken down however this script ends.
    trap '"$mn_cluster" down; trap - EXIT' EXIT
    trap 'exit 130' INT TERM
    if ! mn_out=$("$mn_cluster" up 2 2>&1); then
        run_case "multinode cluster up: $mn_out" expect_ok false
    else
        conds=(clean)
        if mn_why=$("$mn_cluster" check-loss 2>&1); then conds+=(loss); else
            for host in "${hosts[@]}"; do mn_skip "$host multinode loss" "$mn_why"; done
        fi
        if mn_why=$("$mn_cluster" check-delay 2>&1); then conds+=(delay); else
            for host in "${hosts[@]}"; do mn_skip "$host multinode delay" "$mn_why"; done
        fi
        for cond in "${conds[@]}"; do
            case $cond in
                clean) MSH_LOSS= MSH_DELAY= MSH_JITTER= "$mn_cluster" shape ;;
                loss) MSH_LOSS=${TEST_MN_LOSS:-0.5} MSH_DELAY= MSH_JITTER= "$mn_cluster" shape ;;
                delay) MSH_LOSS= MSH_DELAY=${TEST_MN_DELAY:-1ms} MSH_JITTER=${TEST_MN_JITTER:-200us} "$mn_cluster" shape ;;
            esac
            for host in "${hosts[@]}"; do
                hb=$build/$host
                [ -f "$hb/host.env" ] || continue
                if [ "$cond" = clean ]; then
                    run_case "$host multinode: 2 nodes seen, MPISHIM_* reaches remote ranks" expect_mn_names \
                        env MPISHIM_SPIN_US=21 "$mn_run" run "$host" shim "$hb/tests/proc/multinode" names 2
                    run_case "$host multinode: without TCP the nodes cannot talk" expect_mn_fails \
                        "$mn_run" run "$host" notcp "$hb/tests/proc/multinode" traffic 1
                fi
                for p in $MN_PROGRAMS; do
                    [ -x "$hb/tests/mpi/$p" ] || { run_case "$host multinode $p built" expect_ok false; continue; }
                    run_case "$host multinode $cond $p default" expect_ok \
                        env TEST_EXPECT_SHIM=active TEST_THREAD_LEVEL=multiple TEST_EXPECT_RUNTIME=1 \
                        "$mn_run" run "$host" shim "$hb/tests/mpi/$p"
                    run_case "$host multinode $cond $p $(mn_spread "$p")" expect_ok \
                        env TEST_EXPECT_SHIM=active TEST_THREAD_LEVEL=multiple TEST_EXPECT_RUNTIME=1 $(mn_spread "$p") \
                        "$mn_run" run "$host" shim "$hb/tests/mpi/$p"
                    # The lanes between nodes: UCX over TCP, libfabric's tcp;ofi_rxm.
                    [ "$cond" = clean ] || continue
                    for lane in $MN_LANES; do
                        case $lane in
                            ucx) grep -qx "HAVE_UCX='yes'" "$hb/host.env" || continue ;;
                            *) grep -qx "HAVE_LIBFABRIC='yes'" "$hb/host.env" || continue ;;
                        esac
                        run_case "$host multinode $cond $p MPISHIM_FABRIC=$lane" expect_ok \
                            env TEST_EXPECT_SHIM=active TEST_THREAD_LEVEL=multiple TEST_EXPECT_RUNTIME=1 MPISHIM_SOLO=0 \
                            "MPISHIM_FABRIC=$lane" MPISHIM_NUM_VCIS=4 "$mn_run" run "$host" shim "$hb/tests/mpi/$p"
                    done
                done
                if [ "$cond" = clean ]; then
                    run_case "$host multinode lost node ends the job as raw" expect_mn_lost "$mn_run" lost "$host"
                    ! grep -qx "HAVE_UCX='yes'" "$hb/host.env" ||
                        run_case "$host multinode lost node ends the job as raw, MPISHIM_FABRIC=ucx" expect_mn_lost \
                            env MPISHIM_FABRIC=ucx MPISHIM_NUM_VCIS=4 "$mn_run" lost "$host"
                fi
            done
        done
    fi
    "$mn_cluster" down
    trap - EXIT INT TERM
    exec 8>&-
fi
