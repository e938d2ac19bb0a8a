#!/usr/bin/env bash
# mpishim test runner: unit tests, then MPI integration tests under the shim,
# for every host MPI given (default: every one built under build/).
#
#   tests/run.sh [openmpi] [mpich]
#
# Environment: TEST_VARIANT=tsan|asan runs the unit tests and the MPI programs of
# build/<host>-<variant> (make check-tsan and check-asan build them) and nothing
# else; TEST_MULTINODE
# (the multi-node cases on network namespaces: auto = when root and
# ip netns work, else one SKIP line; 0 = never; only = nothing else, for make
# check-multinode); TEST_TIMEOUT (seconds per case, default 120), TEST_FILTER
# (only cases whose name matches this grep -E pattern), TEST_THOROUGH=1 (every
# line at np 2 and 4, also under the sanitizers; see "the manifest"), TEST_PROGRESS (run every
# case under this MPISHIM_PROGRESS unless it sets its own), TEST_FABRIC (the
# same for MPISHIM_FABRIC). Each case's output
# is in build/test-logs/.
# Every case runs under a timeout, so a hang fails instead of stalling.
# Ends with the line "N passed, N failed, N skipped"; exits non-zero on any
# failure. A case whose program prints a "SKIP name: why" line is skipped.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
timeout_s=${TEST_TIMEOUT:-120}
filter=${TEST_FILTER:-}
hosts=("$@")
if [ ${#hosts[@]} -eq 0 ]; then
    for h in openmpi mpich; do [ -f "$build/$h/libmpishim.so" ] && hosts+=("$h"); done
fi
[ ${#hosts[@]} -gt 0 ] || { echo "run.sh: nothing built under $build (run make)"; echo "0 passed, 1 failed"; exit 1; }

logdir=$build/test-logs
rm -rf "$logdir"
mkdir -p "$logdir"
passed=0
failed=0
skipped=0
failed_names=()

# Open MPI refuses root without these; harmless elsewhere.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Keep the caller's MPISHIM_* settings out of the tests: each case sets its own.
for v in $(env | sed -n 's/^\(MPISHIM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset TEST_EXPECT_SHIM
# TEST_PROGRESS=combine (or any MPISHIM_PROGRESS value) runs every case under
# that progress policy, unless the case sets its own.
if [ -n "${TEST_PROGRESS:-}" ]; then export MPISHIM_PROGRESS=$TEST_PROGRESS; fi
# TEST_FABRIC=ucx (or any MPISHIM_FABRIC value) the same for the lane.
if [ -n "${TEST_FABRIC:-}" ]; then export MPISHIM_FABRIC=$TEST_FABRIC; fi
# Two VCIs per rank unless a case sets its own (TEST_NUM_VCIS another
# number, or auto): auto gives 1 where a node has no more cores than ranks,
# as on a 2-core machine, and two keep every case on the paths of several
# VCIs (split windows, communicators' homes on two VCIs).
export MPISHIM_NUM_VCIS=${TEST_NUM_VCIS:-2}

# run_timed (the per-case time limit that leaves a hung case's stacks in its
# log) and thread_stacks.
# shellcheck source=tests/timed.sh
. "$top/tests/timed.sh"

# run_case NAME CHECK CMD... : run CMD under the timeout, output to a log;
# CHECK is a shell function, with its own arguments first if quoted as one
# word ("expect_x ARG"), called with the exit code and the log path (use
# 'expect_ok' for "exit 0").
run_case() {
    local name=$1 check=$2
    shift 2
    if [ -n "$filter" ] && ! grep -qE -- "$filter" <<< "$name"; then return; fi
    local log="$logdir/$(tr ' /' '__' <<< "$name").log"
    local t0=$SECONDS rc
    run_timed "$log" "$@"
    rc=$?
    local why
    if [ $rc -eq 124 ]; then
        why="timed out after ${timeout_s}s (stacks at the end of the log)"
    else
        why=$($check "$rc" "$log")
    fi
    if [ -z "$why" ] && grep -qE '^SKIP ' "$log"; then
        skipped=$((skipped + 1))
        printf 'SKIP %-58s %3ds  %s\n' "$name" $((SECONDS - t0)) "$(grep -m1 -E '^SKIP ' "$log" | cut -d' ' -f3-)"
    elif [ -z "$why" ]; then
        passed=$((passed + 1))
        # Tests accept a few documented host bugs (testutil.h) and say so.
        local dev
        dev=$(grep -c 'KNOWN-DEVIATION' "$log")
        printf 'PASS %-58s %3ds%s\n' "$name" $((SECONDS - t0)) \
            "$([ "$dev" -gt 0 ] && echo "  (known host deviation x$dev, see log)")"
    else
        failed=$((failed + 1))
        failed_names+=("$name")
        printf 'FAIL %-58s %3ds  %s\n' "$name" $((SECONDS - t0)) "$why"
        echo "---- last lines of $log"
        tail -n 25 "$log" | sed 's/^/    /'
        echo "----"
    fi
}

expect_ok() {
    [ "$1" -eq 0 ] || { echo "exit code $1"; return; }
    # A test program prints "OK <name>" on rank 0 when it passes (or SKIP).
    grep -qE '^(OK|SKIP|ok) ' "$2" || echo "no OK line in output"
    # A configuration that asks for the fabric must get it, not the host.
    # Under TEST_FABRIC every case asks, also those whose configuration
    # rules a lane out (a serialized host): the normal runs check the lines
    # that ask themselves.
    [ -n "${TEST_FABRIC:-}" ] || ! grep -q '^mpishim: MPISHIM_FABRIC: .*the host carries' "$2" ||
        echo "the fabric did not open"
}

# A program ran (its "== rc" line says 0) and left no libfabric shm region
# ("<pid>:...") in /dev/shm ("== new:" lines name them; the host's own
# files, which its launcher may remove a moment later, are not counted).
expect_no_new_shm() {
    [ "$1" -eq 0 ] || { echo "exit code $1"; return; }
    grep -q '^== rc 0$' "$2" || { echo "the program failed"; return; }
    ! grep -q '^== new: ' "$2" || echo "left in /dev/shm: $(sed -n 's/^== new: //p' "$2" | tr '\n' ' ')"
}

# An example in examples/ ran and checked its own result: its last line
# names it and ends in "verified".
expect_example() {
    [ "$1" -eq 0 ] || { echo "exit code $1"; return; }
    grep -qE '^[a-z_]+: .*verified$' "$2" || echo "no verified result line in output"
}

# A malformed MPISHIM_NUM_VCIS must stop init with exactly one line naming it.
expect_config_error() {
    [ "$1" -ne 0 ] || { echo "exit code 0, expected a failure"; return; }
    local n
    n=$(grep -c "^mpishim: MPISHIM_NUM_VCIS='banana' is invalid; accepted values: auto or an integer 1..64$" "$2")
    [ "$n" -eq 1 ] || echo "expected exactly one error line naming MPISHIM_NUM_VCIS, found $n"
    if grep -q '^OK ' "$2"; then echo "the program ran despite the bad value"; fi
}

# fatal_call, fatal_part: the job failed, and the shim named the program's
# call (MPI_Recv, or fatal_call_name when set).
expect_fatal_call() {
    [ "$1" -ne 0 ] || { echo "exit code 0, expected the job to abort"; return; }
    local n call=${fatal_call_name:-MPI_Recv}
    n=$(grep -c "^mpishim: rank 0: error in $call: " "$2")
    [ "$n" -eq 1 ] || echo "expected one line naming $call, found $n"
    if grep -q '^NOT-ABORTED' "$2"; then echo "the fatal handler returned"; fi
}

expect_escaped_error() {
    [ "$1" -ne 0 ] || { echo "exit code 0, expected a failure"; return; }
    local n
    n=$(grep -c '^mpishim: ' "$2")
    [ "$n" -eq 1 ] || { echo "expected one mpishim: line, found $n"; return; }
    grep -qF "mpishim: MPISHIM_NUM_VCIS='banana\\nmpishim: injected' is invalid" "$2" ||
        echo "the value is not shown escaped"
}

expect_typo_warning() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    local n
    n=$(grep -c '^mpishim: unknown variable MPISHIM_NUM_VCI ignored; did you mean MPISHIM_NUM_VCIS?$' "$2")
    [ "$n" -eq 1 ] || echo "expected one typo warning line, found $n"
}

expect_verbose() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    local n
    n=$(grep -c '^mpishim [0-9.]* active: host ' "$2")
    [ "$n" -eq 1 ] || { echo "expected the configuration once (rank 0), found $n headers"; return; }
    grep -qE '^  MPISHIM_MAP +tag +\(environment\)$' "$2" || echo "MPISHIM_MAP=tag not shown as set"
}

# MPISHIM_NUM_VCIS=auto at 4 ranks on this node: no more VCIs per rank than
# the node's cores over its 4 ranks (at least 1), bound or not.
expect_auto_pool() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    local n max=$(( $(nproc) / 4 ))
    [ "$max" -ge 1 ] || max=1
    n=$(sed -n 's/^  runtime: \([0-9]*\) VCIs.*/\1/p' "$2")
    [ -n "$n" ] || { echo "no 'runtime: N VCIs' line"; return; }
    [ "$n" -le "$max" ] || echo "auto gave $n VCIs per rank to 4 ranks on $(nproc) cores (at most $max)"
}

expect_pending_reported() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    local n
    n=$(grep -cE '^  at finalize: 1 requests still pending' "$2")
    [ "$n" -eq 1 ] || echo "expected one rank to report 1 pending request, found $n (of $(grep -c 'at finalize:' "$2") reports)"
}

# idle_progress: both ranks print their OK line, and each rank's progress
# thread slept at least once while the rank had nothing in flight.
expect_idle_sleeps() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    local n
    n=$(grep -cE '^OK idle_progress rank [01]: 3 rounds$' "$2")
    [ "$n" -eq 2 ] || { echo "expected 2 OK lines, found $n"; return; }
    n=$(grep -cE '^  progress thread: slept [1-9][0-9]* times with nothing pending$' "$2")
    [ "$n" -eq 2 ] || echo "expected both ranks' progress threads to have slept, found $n (of $(grep -c 'progress thread: slept' "$2") lines)"
}

# progress_cpu: expect_progress_cpu WANT [CPU]: every rank's progress thread
# may run on exactly the CPUs WANT (a /proc list such as "1"), or with WANT =
# same on exactly its process's CPUs (not bound by the shim); with CPU, each
# rank also warned once that it could not bind to that CPU.
expect_progress_cpu() {
    local want=$1 warn=""
    shift
    if [ $# -eq 3 ]; then warn=$1; shift; fi
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    local n
    if [ "$want" = same ]; then
        n=$(grep -cE '^PROGRESS-THREAD rank [01] cpus=([0-9,-]+) process=\1$' "$2")
    else
        n=$(grep -cE "^PROGRESS-THREAD rank [01] cpus=$want process=" "$2")
    fi
    [ "$n" -eq 2 ] || { echo "expected both ranks' progress threads on CPUs '$want', got: $(grep '^PROGRESS-THREAD' "$2" | tr '\n' ';')"; return; }
    [ -z "$warn" ] && return
    n=$(grep -c "^mpishim: MPISHIM_PROGRESS_CPU: cannot bind the progress thread to CPU $warn; it runs unbound\$" "$2")
    [ "$n" -eq 2 ] || echo "expected one warning per rank about CPU $warn, found $n"
}

expect_info() {
    [ "$1" -eq 0 ] || { echo "exit code $1"; return; }
    local k
    for k in '^mpishim [0-9.]+ \(' '^host MPI library +[A-Za-z]' '^MPI standard +[0-9]\.[0-9]' \
             '^thread support ' '^cores \(hwloc\) +[0-9]+ cores' '^libfabric ' '^lane +none' \
             '^  MPISHIM_NUM_VCIS +auto'; do
        grep -qE "$k" "$2" || { echo "missing line matching: $k"; return; }
    done
}

# mpishim-info --calls: what the shim does with each MPI call. Local
# queries and constructors (a type's size, a rank) touch no message, so
# they neither drain queued posts nor wait for another thread's VCI lock;
# a call that frees what a queued post may use (a datatype) still drains.
# The partitioned calls are listed also where the host's header lacks them.
expect_calls() {
    [ "$1" -eq 0 ] || { echo "exit code $1"; return; }
    local k
    for k in 'MPI_Type_size local' 'MPI_Type_get_extent local' 'MPI_Comm_rank local' 'MPI_Comm_size local' \
             'MPI_Get_elements local' 'MPI_Get_count local' 'MPI_Pack local' 'MPI_Type_free pass' 'MPI_Buffer_detach pass' \
             'MPI_Wtime direct' 'MPI_Isend p2p' 'MPI_Waitall completion' 'MPI_Barrier collective' \
             'MPI_Put rma-data' 'MPI_File_read_all waits' 'MPI_Comm_split comm' \
             'MPI_Psend_init part' 'MPI_Parrived part'; do
        grep -qE "^${k% *} +${k#* }\$" "$2" || { echo "missing line: $k"; return; }
    done
}

# mpishim-info names the lane a run opens (here UCX's).
expect_info_ucx() {
    [ "$1" -eq 0 ] || { echo "exit code $1"; return; }
    grep -qE '^lane +ucx: ' "$2" || echo "no 'lane ucx' line"
}

expect_no_fabric_needed() {
    [ "$1" -eq 0 ] || { echo "readelf exit code $1"; return; }
    grep -qE 'NEEDED.*libhwloc' "$2" || { echo "no NEEDED entries read"; return; }
    local bad
    bad=$(grep -E 'NEEDED.*(fabric|psm|infinipath)' "$2" | sed 's/.*\[\(.*\)\]/\1/' | tr '\n' ' ')
    [ -z "$bad" ] || echo "libmpishim.so needs $bad"
}

# The log of a "== raw ... == shim ..." pair: lines of one section.
section() { awk -v s="$1" '/^== (raw|shim)$/ { on = ($2 == s); next } on' "$2"; }

# deps_clean raw and under the shim: both OK, nothing of libfabric mapped
# under the shim, the same signal handlers (by owning object) in both.
expect_same_handlers() {
    [ "$1" -eq 0 ] || { echo "exit code $1"; return; }
    local s
    for s in raw shim; do
        section $s "$2" | grep -q '^OK deps_clean' || { echo "no OK line in the $s run"; return; }
        section $s "$2" | grep -q '^== rc 0$' || { echo "the $s run failed"; return; }
    done
    local mapped
    mapped=$(section shim "$2" | sed -n 's/^mapped //p' | tr '\n' ' ')
    [ -z "$mapped" ] || { echo "under the shim the process maps $mapped"; return; }
    if [ "$(section raw "$2" | grep '^handler ' | sort)" != "$(section shim "$2" | grep '^handler ' | sort)" ]; then
        echo "signal handlers differ from raw: $(section shim "$2" | grep '^handler ' | sort | tr '\n' ';')"
    fi
}

# A job whose rank 0 was killed: it failed, and left no libfabric shm
# region in /dev/shm.
expect_killed_no_shm() {
    grep -q '^== rc [1-9]' "$2" || { echo "the job did not fail"; return; }
    ! grep -q '^== new: ' "$2" || echo "left in /dev/shm: $(sed -n 's/^== new: //p' "$2" | tr '\n' ' ')"
}

# deps_clean with a libfabric lane open (MPISHIM_FABRIC=tcp or shm): handlers as
# raw, libfabric mapped, and of PSM only the shim's stand-ins (build/<host>/
# psmstub/): the real libraries' constructors cost 0.2 s of start-up.
expect_psm_stubbed() {
    [ "$1" -eq 0 ] || { echo "exit code $1"; return; }
    section shim "$2" | grep -q '^OK deps_clean' || { echo "no OK line in the shim run"; return; }
    section shim "$2" | grep -q '^mapped libfabric' || { echo "libfabric is not mapped: the lane did not open"; return; }
    local real
    real=$(section shim "$2" | awk '$1 == "mapped" && ($2 ~ /psm|infinipath/) && $3 !~ /\/psmstub\// { print $3 }' | tr '\n' ' ')
    [ -z "$real" ] || { echo "the process maps $real"; return; }
    if [ "$(section raw "$2" | grep '^handler ' | sort)" != "$(section shim "$2" | grep '^handler ' | sort)" ]; then
        echo "signal handlers differ from raw: $(section shim "$2" | grep '^handler ' | sort | tr '\n' ';')"
    fi
}

# A job with a libfabric lane, each process traced by strace into
# $kallsyms_dir: it passed, libfabric was opened, /proc/kallsyms never
# (the verbs provider reads it at libfabric's first query: most of a
# libfabric lane's start-up; the shim hides it there on a node without an
# RDMA device).
kallsyms_dir=""
expect_no_kallsyms() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    local n
    n=$(cat "$kallsyms_dir"/open.* 2>/dev/null | grep -c 'libfabric\.so')
    [ "$n" -ge 2 ] || { echo "libfabric opened by $n processes' traces, expected 2"; return; }
    n=$(cat "$kallsyms_dir"/open.* | grep -c '/proc/kallsyms')
    [ "$n" -eq 0 ] || echo "/proc/kallsyms opened $n times"
}

# crash raw and under the shim: the same exit status (139 = killed by SIGSEGV
# for a singleton), and what the launcher says about a signal in both or neither.
expect_same_crash() {
    [ "$1" -eq 0 ] || { echo "exit code $1"; return; }
    local r s
    r=$(section raw "$2" | sed -n 's/^== rc //p')
    s=$(section shim "$2" | sed -n 's/^== rc //p')
    [ -n "$r" ] && [ -n "$s" ] || { echo "a run did not finish"; return; }
    [ "$r" != 0 ] || { echo "the raw run did not crash (exit 0)"; return; }
    [ "$r" = "$s" ] || { echo "exit status $s under the shim, $r raw"; return; }
    local pat='signal 11|EXIT CODE: 11|Segmentation fault'
    local nr ns
    nr=$(section raw "$2" | grep -cE "$pat")
    ns=$(section shim "$2" | grep -cE "$pat")
    [ $((nr > 0)) -eq $((ns > 0)) ] || echo "signal 11 reported raw: $nr lines, under the shim: $ns"
}

# MPI_Send called by a binary that was not linked with the shim must bind
# to libmpishim.so when preloaded (ld.so's own account: LD_DEBUG=bindings).
bindings_dir=""
expect_bound_to_shim() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    local n
    n=$(cat "$bindings_dir"/bind.* 2>/dev/null | grep -c "/p2p_order .* to .*/libmpishim\.so \[0\]: normal symbol \`MPI_Send'")
    [ "$n" -ge 2 ] || echo "MPI_Send bound to libmpishim.so in $n processes, expected 2"
}

# MPISHIM_WATCHDOG: rank 0's report names both stalled receives (peer,
# tag, communicator), then the SIGUSR1 report, and the program still passes.
expect_watchdog() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    grep -qE '^mpishim: watchdog, rank 0: no request completed for 1 s while 2 are pending$' "$2" ||
        { echo "no stall report from rank 0"; return; }
    local t
    for t in 77 78; do
        grep -qE "^mpishim:     recv from 1 tag $t on MPI_COMM_WORLD, pending [0-9.]+ s$" "$2" ||
            { echo "the report does not name the receive with tag $t"; return; }
    done
    grep -qE '^mpishim:   progress( domain 0: (owned by thread [0-9]+|no owner)|: the progress thread); [0-9]+ threads asleep' "$2" ||
        { echo "the report does not say who owns progress"; return; }
    grep -qE '^mpishim: watchdog, rank 0: SIGUSR1$' "$2" || { echo "no report on SIGUSR1"; return; }
    grep -qE "^mpishim:     recv from 1 tag 79 on MPI_COMM_WORLD" "$2" || echo "the SIGUSR1 report misses tag 79"
}

# Awk rules shared by the checks that read the MPISHIM_STATS=1 table
# (src/intercept/init.c print_stats): r is the rank of the table being read,
# seen[r] is set, and vci_row is true on its per-VCI rows (11 columns, the
# last at_post; 12 with a lane open, the last lane), so a change of the
# table's width is made here once.
stats_rows='{ vci_row = 0 }
         /^mpishim stats, rank / { r = $4; sub(":", "", r); seen[r] = 1; invci = 1; next }
         /^ +domain / { invci = 0 }
         invci && (NF == 11 || NF == 12) && $1 ~ /^[0-9]+$/ { vci_row = 1 }'

# The Fortran tests print "FT-EXPECT rank R sends S recvs V"; the per-VCI
# table MPISHIM_STATS=1 prints at finalize must count exactly that on each
# rank: no table or zeros means the runtime never saw the Fortran calls,
# twice as many that a call was handled twice.
expect_fortran_counted() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    awk "$stats_rows"'
         /^FT-EXPECT rank / { want[$3] = $5 " " $7; next }
         vci_row { s[r] += $2; v[r] += $3 }
         END {
             n = 0
             for (r in want) {
                 n++
                 if (!(r in seen)) { print "rank " r ": no mpishim stats table (the shim never saw the program)"; exit }
                 got = (s[r] + 0) " " (v[r] + 0)
                 if (got != want[r]) { print "rank " r ": the runtime counted sends/recvs " got ", the program made " want[r]; exit }
             }
             if (n == 0) print "no FT-EXPECT line from the program"
         }' "$2"
}

# mt_at_post under MPISHIM_STATS=1: the program passed, and on every rank of
# a pair some blocking calls finished at the post (the stats table's last
# column, "at_post"), so that path was the one tested.
expect_at_post() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    awk "$stats_rows"'
         vci_row { n[r] += $11 }
         END {
             k = 0
             for (r in seen) { k++; if (n[r] + 0 == 0) { print "rank " r ": no call finished at the post"; exit } }
             if (k == 0) print "no mpishim stats table"
         }' "$2"
}

# coll_auto under MPISHIM_STATS=1 and the default MPISHIM_COLL=auto: the
# program passed, and every rank's line "blocking collectives: H the host's
# call, N the nonblocking form" says what $coll_forms asks: "alone" (every
# collective the host's call) or "switched" (both forms on every rank, also
# on those whose own threads never overlapped: the ranks agreed).
expect_coll_forms() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    awk -v want="$coll_forms" '
         /^mpishim stats, rank / { r = $4; sub(":", "", r); ranks++ }
         /^  blocking collectives: / {
             h = $3; n = $7; lines++
             if (want == "alone" && (h == 0 || n != 0)) bad = bad " rank " r ": " h " host, " n " nonblocking;"
             if (want == "switched" && (h == 0 || n == 0)) bad = bad " rank " r ": " h " host, " n " nonblocking;"
         }
         END {
             if (ranks == 0 || lines != ranks) print "no blocking-collectives line in every rank'"'"'s stats"
             else if (bad != "") print "expected " want ":" bad
         }' "$2"
}

# A lane under the default policy (combine) under MPISHIM_STATS=1: the
# program passed and both ranks progress each VCI on its own, as vci does.
expect_lane_owners() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    local n
    n=$(grep -c '^mpishim stats, rank [0-9]*: [0-9]* VCIs, progress combine (an owner per VCI: lanes),' "$2")
    [ "$n" -eq 2 ] || echo "expected both ranks' stats to say combine has an owner per VCI, got: $(grep '^mpishim stats' "$2" | tr '\n' ';')"
}

# mt_bias_sweep under MPISHIM_STATS=1: the program passed, and on rank 0
# (the even rank, whose thread 0 earns its VCI's bias and then computes) a
# VCI lock was both biased and revoked (the lock table after the domains),
# so the sweep of a quiet owner's VCI was the path tested.
expect_bias_revoked() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    awk '/^mpishim stats, rank / { r = $4; sub(":", "", r); inlock = 0; next }
         /^ +lock +biased +revoked/ { inlock = 1; next }
         inlock && NF == 3 && $1 ~ /^[0-9]+$/ { if (r == 0 && $2 > 0 && $3 > 0) ok = 1; next }
         { inlock = 0 }
         END { if (!ok) print "rank 0: no VCI lock both biased and revoked (the case was not exercised)" }' "$2"
}

# A program whose every communicator a lane carries, under MPISHIM_STATS=1:
# on every rank the table has the lane's column (the 12th) and it counts
# each send and receive the runtime counted (sends + recvs), no more, no
# fewer.
expect_lane_counted() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    awk "$stats_rows"'
         vci_row && NF != 12 { print "rank " r ": no lane column in the stats table"; exit }
         vci_row { n[r] += $2 + $3; l[r] += $12 }
         END {
             k = 0
             for (r in seen) {
                 k++
                 if (n[r] + 0 == 0 || l[r] + 0 != n[r] + 0) {
                     print "rank " r ": the lane carried " (l[r] + 0) " of " (n[r] + 0) " sends and receives"; exit
                 }
             }
             if (k == 0) print "no mpishim stats table"
         }' "$2"
}

# MPISHIM_VERBOSE=1 prints the configuration once (rank 0) with "runtime:
# off" when the program asked for less than MPI_THREAD_MULTIPLE; no stats
# table follows then. No line at all means the shim never saw the init.
expect_runtime_off() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    local n
    n=$(grep -c '^  runtime: off (the program did not ask for MPI_THREAD_MULTIPLE)' "$2")
    [ "$n" -eq 1 ] || { echo "expected one 'runtime: off' line (the shim saw the init), found $n"; return; }
    if grep -q '^mpishim stats, rank' "$2"; then echo "a stats table: the runtime was on"; fi
}

# MPISHIM_DISABLE on some ranks: rank 0 says every rank passes through.
expect_disabled_somewhere() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    grep -q '^mpishim: MPISHIM_DISABLE is set on a rank: every rank passes its calls through' "$2" ||
        echo "rank 0 did not say that a rank is disabled"
}

# One rank could not reserve its request arena: it says so, the program
# passes with the runtime off.
expect_arena_refused() {
    [ -z "$(expect_ok "$@")" ] || { expect_ok "$@"; return; }
    grep -q '^mpishim: cannot reserve the request arena' "$2" || echo "no rank reported the arena refused (limit too high?)"
}

expect_tsan_report() {
    [ "$1" -ne 0 ] || { echo "exit code 0: ThreadSanitizer missed the deliberate race"; return; }
    grep -q '^WARNING: ThreadSanitizer: data race' "$2" || { echo "no data race reported"; return; }
    grep -qE '^ +#0 worker .*tsan_canary\.c:' "$2" || echo "the report does not point at tsan_canary.c"
}

# A script for run_case: PROG at np 2 raw, then under the launcher, each
# section headed "== raw" / "== shim" and ended by "== rc N" (section()
# reads them). Arguments: PROG LAUNCHER HOST LIB MPIRUN [FLAGS...].
raw_then_shim_np2='echo "== raw"; "${@:5}" -np 2 "$1"; echo "== rc $?"; echo "== shim";
                   "$2" --host "$3" --lib "$4" "${@:5}" -np 2 "$1"; echo "== rc $?"'

mpirun_flags() { # host-specific flags to run as root, oversubscribed
    if [ "$HOST_FLAVOR" = openmpi ]; then echo "$MPIRUN_FLAGS"; else echo ""; fi
}

variant=${TEST_VARIANT:-}
# What keeps CI within its hour (see "per host"): the manifest's extra
# configurations run at np 2, and under a sanitizer a single-threaded
# program ("threads any") runs its base line at np 2 only, and under TSan,
# which has nothing to look at with one thread, neither on the solo path
# nor as the single-threaded program. And with both hosts, a sanitizer
# runs each program on one of them: the manifest's programs alternate
# between the hosts, the other way round for TSan than for ASan, so that
# each program meets both sanitizers and each host both. TEST_THOROUGH=1
# runs every line at np 2 and 4, on both hosts, everywhere.
thorough=${TEST_THOROUGH:-0}
cfg_nps=2
[ "$thorough" = 0 ] || cfg_nps="2 4"
split_hosts=0
[ -z "$variant" ] || [ "$thorough" != 0 ] || [ ${#hosts[@]} -ne 2 ] || split_hosts=1
multinode=${TEST_MULTINODE:-auto}
case $multinode in auto|0|only) ;; *) echo "run.sh: TEST_MULTINODE=$multinode: auto, 0 or only"; echo "0 passed, 1 failed"; exit 1 ;; esac
# ---------------------------------------------------------------- the manifest
# tests/mpi/testlist says how each MPI test runs (its header has the keys).
declare -A t_threads t_env t_notsan t_timeout t_index
default_timeout=$timeout_s
n_programs=0
manifest=$top/tests/mpi/testlist
manifest_errors=()
while read -r tname key value; do
    case $tname in ''|'#'*) continue ;; esac
    [ -f "$top/tests/mpi/$tname.c" ] || { manifest_errors+=("$tname: no tests/mpi/$tname.c"); continue; }
    case $key in
        threads) t_index[$tname]=$n_programs
                 n_programs=$((n_programs + 1))
                 case $value in multiple|any) t_threads[$tname]=$value ;;
                     *) manifest_errors+=("$tname: threads '$value' (multiple or any)") ;; esac ;;
        env) t_env[$tname]+="$value"$'\n' ;;
        link) [ "$value" = shim ] || manifest_errors+=("$tname: link '$value' (shim)") ;;
        no-tsan) t_notsan[$tname]=$value ;;
        no-tsan\[*\]) h=${key#no-tsan[}; t_notsan[$tname@${h%]}]=$value ;;
        timeout) [[ $value =~ ^[0-9]+$ ]] && t_timeout[$tname]=$value ||
                     manifest_errors+=("$tname: timeout '$value' (seconds)") ;;
        *) manifest_errors+=("$tname: unknown key '$key'") ;;
    esac
done < "$manifest"
for src in "$top"/tests/mpi/*.c; do
    tname=$(basename "$src" .c)
    [ -n "${t_threads[$tname]:-}" ] || manifest_errors+=("$tname: no 'threads' line")
done
if [ ${#manifest_errors[@]} -gt 0 ]; then
    printf 'tests/mpi/testlist: %s\n' "${manifest_errors[@]}"
    run_case "tests/mpi/testlist is well formed" expect_ok false
fi

# The runner's own time limit: a hang must leave its stacks and end in a
# timeout (once, not per host or variant).
[ "$multinode" = only ] || [ -n "${TEST_VARIANT:-}" ] ||
    run_case "runner: a hung case ends in a timeout with its stacks" expect_ok bash "$top/tests/timed.sh" selftest

# ---------------------------------------------------------------- unit tests
# For every host: each build compiles them against its own mpi.h (handle
# types, MPI_ANY_SOURCE and friends differ between hosts). Under a sanitizer
# too: they drive the locks, sync objects and queues with many threads, and
# a report fails the case (the variant's exit code).
[ "$multinode" = only ] ||
for host in "${hosts[@]}"; do
    n=0
    for u in "$build/$host${variant:+-$variant}"/tests/unit/test_*; do
        [ -x "$u" ] || continue
        n=$((n + 1))
        run_case "$host${variant:+ $variant} unit $(basename "$u")" expect_ok "$u"
    done
    # A build without its unit tests must not pass silently.
    [ $n -gt 0 ] || run_case "$host${variant:+ $variant} unit tests built" expect_ok false
    [ -z "$variant" ] || continue
    # The generated variable reference (docs/configuration.md, docs/mpishim.7).
    run_case "$host docs match the variables table" expect_ok "$top/tools/gendocs.sh" "$build/$host/mpishim-info" --check
    run_case "$host mpishim-info --calls: local queries drain nothing" expect_calls "$build/$host/mpishim-info" --calls
    # make install, then an example built through pkg-config and run by the installed launcher.
    run_case "$host install: pkg-config, launcher, man pages" expect_ok "$top/tests/install.sh" "$host"
done

# ---------------------------------------------------------------- per host
for host in "${hosts[@]}"; do
    [ "$multinode" != only ] || break
    hb=$build/$host${variant:+-$variant}
    if [ ! -f "$hb/host.env" ]; then
        run_case "$host build" expect_ok false
        continue
    fi
    # shellcheck disable=SC1091
    . "$hb/host.env"
    lib=$hb/libmpishim.so
    launch=("$build/mpishim" --host "$host" --lib "$lib" "$MPIRUN" $(mpirun_flags))

    for t in "$hb"/tests/mpi/*; do
        [ -f "$t" ] && [ -x "$t" ] || continue
        name=$(basename "$t")
        if [ -z "${t_threads[$name]:-}" ]; then
            run_case "$host $name is listed in tests/mpi/testlist" expect_ok false
            continue
        fi
        if [ "$split_hosts" = 1 ]; then
            k=$(( ${t_index[$name]} + $([ "$variant" = tsan ] && echo 1 || echo 0) ))
            [ "${hosts[$((k % 2))]}" = "$host" ] || continue
        fi
        why_not=${t_notsan[$name@$host]:-${t_notsan[$name]:-}}
        if [ "$variant" = tsan ] && [ -n "$why_not" ]; then
            if [ -z "$filter" ] || grep -qE -- "$filter" <<< "$host $name"; then
                skipped=$((skipped + 1))
                printf 'SKIP %-58s       %s\n' "$host $name (tsan)" "$why_not"
            fi
            continue
        fi
        timeout_s=${t_timeout[$name]:-$default_timeout}
        # With MPI_THREAD_MULTIPLE the runtime handles every call; with a
        # lower level the shim forwards; DISABLE makes it a pure pass-through.
        # MPISHIM_SOLO=0: a program whose threads never overlap would
        # otherwise run on the solo fast path and never exercise the runtime.
        one_thread=0
        [ "${t_threads[$name]}" != any ] || [ "$thorough" != 0 ] || [ -z "$variant" ] || one_thread=1
        for np in 2 4; do
            [ "$np" = 2 ] || [ "$one_thread" = 0 ] || continue
            run_case "$host $name np$np shim" expect_ok \
                env TEST_EXPECT_SHIM=active TEST_THREAD_LEVEL=multiple TEST_EXPECT_RUNTIME=1 MPISHIM_SOLO=0 \
                "${launch[@]}" -np $np "$t"
        done
        [ "$one_thread" = 1 ] && [ "$variant" = tsan ] ||
            run_case "$host $name np2 shim, solo fast path" expect_ok \
                env TEST_EXPECT_SHIM=active TEST_THREAD_LEVEL=multiple TEST_EXPECT_RUNTIME=1 \
                "${launch[@]}" -np 2 "$t"
        if [ "${t_threads[$name]}" = any ] && { [ "$one_thread" = 0 ] || [ "$variant" != tsan ]; }; then
            # (No lane: one needs MPI_THREAD_MULTIPLE, and programs that
            # test one ask for it when MPISHIM_FABRIC is set; TEST_FABRIC.)
            run_case "$host $name np2 shim, single-threaded program" expect_ok \
                env -u MPISHIM_FABRIC TEST_EXPECT_SHIM=active TEST_THREAD_LEVEL=single TEST_EXPECT_RUNTIME=0 \
                "${launch[@]}" -np 2 "$t"
        fi
        # Disabled, the shim forwards every call untouched: nothing for a
        # sanitizer to check in it, so the variants leave this line out.
        [ -n "$variant" ] ||
            run_case "$host $name np2 MPISHIM_DISABLE=1" expect_ok \
                env TEST_EXPECT_SHIM=disabled TEST_EXPECT_RUNTIME=0 MPISHIM_DISABLE=1 "${launch[@]}" -np 2 "$t"
        # The extra configurations the manifest lists for this test (np 2;
        # the base line above runs np 4).
        while read -r cfg; do
            [ -n "$cfg" ] || continue
            for np in $cfg_nps; do
                run_case "$host $name np$np $cfg" expect_ok \
                    env TEST_EXPECT_SHIM=active TEST_THREAD_LEVEL=multiple TEST_EXPECT_RUNTIME=1 MPISHIM_SOLO=0 $cfg \
                    "${launch[@]}" -np $np "$t"
            done
        done <<< "${t_env[$name]:-}"
        timeout_s=$default_timeout
    done

    # The TSan settings of check-tsan must not hide races in instrumented
    # code: a program with a deliberate race must be reported.
    [ "$variant" != tsan ] ||
        run_case "$host tsan_canary np2: a deliberate race is reported" expect_tsan_report \
            env MPISHIM_SOLO=0 "${launch[@]}" -np 2 "$hb/tests/proc/tsan_canary"
    [ -z "$variant" ] || continue
    order=$hb/tests/mpi/p2p_order
    # The other two ways in: plain LD_PRELOAD on mpirun, and relinking.
    run_case "$host p2p_order np2 LD_PRELOAD" expect_ok \
        env TEST_EXPECT_SHIM=active LD_PRELOAD="$lib" "$MPIRUN" $(mpirun_flags) -np 2 "$order"
    run_case "$host p2p_order np2 relinked -lmpishim" expect_ok \
        env TEST_EXPECT_SHIM=active "$MPIRUN" $(mpirun_flags) -np 2 "$hb/tests/mpi/relinked/p2p_order"
    # Without the shim the same test must see no shim (checks the check).
    run_case "$host p2p_order np2 raw host" expect_ok \
        env TEST_EXPECT_SHIM=absent "$MPIRUN" $(mpirun_flags) -np 2 "$order"
    # The launcher finds the host from the binary when --host is not given.
    run_case "$host p2p_order np2 launcher autodetect" expect_ok \
        env TEST_EXPECT_SHIM=active "$build/mpishim" "$MPIRUN" $(mpirun_flags) -np 2 "$order"
    # A program that names no MPI library itself (it reaches MPI through
    # one of its own): the launcher asks the loader, where for the others
    # the sonames the program names suffice; both print this host's library.
    run_case "$host launcher: the host of programs linked with MPI and through a library" expect_ok \
        bash -c 'for p in "$2" "$3"; do got=$("$1" --print-lib "$p") || exit 1
                     [ "$got" = "$4" ] || { echo "$p: $got, not $4"; exit 1; }; done; echo "OK launcher host"' \
        _ "$build/mpishim" "$order" "$hb/tests/mpi/indirect/p2p_order" "$lib"
    run_case "$host p2p_order np2 through a library of its own, launcher autodetect" expect_ok \
        env TEST_EXPECT_SHIM=active "$build/mpishim" "$MPIRUN" $(mpirun_flags) -np 2 "$hb/tests/mpi/indirect/p2p_order"
    # An MPMD command line (A : B): the ranks of every app context get the
    # library (Open MPI's -x reaches only the context it is given in).
    run_case "$host p2p_order MPMD 1 : 1 launcher" expect_ok \
        env TEST_EXPECT_SHIM=active "$build/mpishim" "$MPIRUN" $(mpirun_flags) -np 1 "$order" : -np 1 "$order"

    bindings_dir=$logdir/bindings-$host
    mkdir -p "$bindings_dir"
    run_case "$host MPI_Send binds to libmpishim.so" expect_bound_to_shim \
        env LD_DEBUG=bindings LD_DEBUG_OUTPUT="$bindings_dir/bind" LD_PRELOAD="$lib" \
        "$MPIRUN" $(mpirun_flags) -np 2 "$order"

    run_case "$host MPISHIM_NUM_VCIS=banana stops init" expect_config_error \
        env MPISHIM_NUM_VCIS=banana "${launch[@]}" -np 2 "$order"
    # A newline in a value is printed escaped, on the error's own line.
    run_case "$host a newline in a value cannot inject a line" expect_escaped_error \
        env MPISHIM_NUM_VCIS=$'banana\nmpishim: injected' "${launch[@]}" -np 2 "$order"
    run_case "$host MPISHIM_NUM_VCI typo warns once" expect_typo_warning \
        env MPISHIM_NUM_VCI=2 "${launch[@]}" -np 2 "$order"
    run_case "$host MPISHIM_VERBOSE=1 prints config once" expect_verbose \
        env MPISHIM_VERBOSE=1 MPISHIM_MAP=tag "${launch[@]}" -np 2 "$order"
    run_case "$host MPISHIM_NUM_VCIS=auto shares the node's cores among its ranks" expect_auto_pool \
        env -u MPISHIM_NUM_VCIS TEST_THREAD_LEVEL=multiple MPISHIM_VERBOSE=1 "${launch[@]}" -np 4 "$order"
    run_case "$host MPISHIM_WATCHDOG=1 reports a stalled wait" expect_watchdog \
        env MPISHIM_WATCHDOG=1 MPISHIM_SOLO=0 "${launch[@]}" -np 2 "$hb/tests/mpi/mt_watchdog"
    # The policy is pinned: under combine and offload (TEST_PROGRESS) blocking
    # calls queue and never finish at the post, by design; so is the host
    # (TEST_FABRIC), whose calls these are.
    run_case "$host mt_at_post np2 STATS: blocking calls finished at the post" expect_at_post \
        env -u MPISHIM_FABRIC MPISHIM_STATS=1 MPISHIM_SOLO=0 MPISHIM_PROGRESS=global "${launch[@]}" -np 2 \
        "$hb/tests/mpi/mt_at_post"
    run_case "$host p2p_order np2 STATS, ucx lane, default policy: an owner per VCI" expect_lane_owners \
        env -u MPISHIM_PROGRESS TEST_THREAD_LEVEL=multiple MPISHIM_STATS=1 MPISHIM_SOLO=0 MPISHIM_FABRIC=ucx \
        MPISHIM_NUM_VCIS=4 "${launch[@]}" -np 2 "$order"
    run_case "$host mt_bias_sweep np2 STATS, ucx lane: a quiet owner's bias revoked by a sweep" expect_bias_revoked \
        env MPISHIM_STATS=1 MPISHIM_SOLO=0 MPISHIM_PROGRESS=vci MPISHIM_FABRIC=ucx MPISHIM_NUM_VCIS=4 \
        "${launch[@]}" -np 2 "$hb/tests/mpi/mt_bias_sweep"
    # MPISHIM_COLL=auto: a one-thread program's blocking collectives are the
    # host's calls; once one rank has had two threads in MPI at once, every
    # rank takes the nonblocking form (run as the default user runs: solo
    # path on, default policy).
    for m in alone switched; do
        coll_forms=$m run_case "$host coll_auto np2 STATS: blocking collectives $m" expect_coll_forms \
            env -u MPISHIM_PROGRESS -u MPISHIM_SOLO -u MPISHIM_FABRIC MPISHIM_STATS=1 "${launch[@]}" -np 2 \
            "$hb/tests/mpi/coll_auto" "$([ $m = alone ] && echo alone)"
    done
    # Ranks that ask for different thread levels (even ranks
    # MPI_THREAD_MULTIPLE, odd ones single): the runtime must be off on
    # every rank, since a rank that forwards never receives what one with
    # the runtime sends on a VCI's duplicate; partitioned calls are then
    # the host's own where it has them.
    for t in p2p_order comm_churn part_host_calls; do
        run_case "$host $t np4 mixed thread levels: the runtime off on every rank" expect_ok \
            env TEST_EXPECT_SHIM=active TEST_THREAD_LEVEL=mixed TEST_EXPECT_RUNTIME=0 \
            "${launch[@]}" -np 4 "$hb/tests/mpi/$t"
    done
    # MPISHIM_DISABLE on one rank only (an MPMD command line): every rank
    # passes its calls through, since the others would otherwise make
    # collectives it does not (the runtime's, the window fix's; both
    # hosts hung); rank 0 says so.
    for t in p2p_order:multiple rma_alloc:single; do
        run_case "$host ${t%%:*} np2 MPISHIM_DISABLE on rank 1 only (${t#*:}): pass-through everywhere" \
            expect_disabled_somewhere env TEST_EXPECT_SHIM=disabled TEST_THREAD_LEVEL=${t#*:} \
            "$MPIRUN" $(mpirun_flags) -np 1 env LD_PRELOAD="$lib" "$hb/tests/mpi/${t%%:*}" : \
            -np 1 env LD_PRELOAD="$lib" MPISHIM_DISABLE=1 "$hb/tests/mpi/${t%%:*}"
    done
    # One rank that cannot reserve the shim's request arena (its address
    # space limited; the others not) while all ask for MULTIPLE: the
    # runtime stays off on every rank, and the program runs as raw does
    # (it hung on both hosts when that rank alone forwarded). The limit is
    # the lowest, in steps of 100 MB, under which the raw program passes,
    # plus 50 MB for the shim's own start; the arena needs 512 MiB more.
    run_case "$host p2p_order np2 one rank without room for the arena: the runtime off on every rank" \
        expect_arena_refused env TEST_THREAD_LEVEL=multiple bash -c '
        p=$1 lib=$2; shift 2
        for v in $(seq 300000 100000 3000000); do
            timeout 30 "$@" -np 1 bash -c "ulimit -v $v; exec \"\$0\"" "$p" : -np 1 "$p" > /dev/null 2>&1 && break
        done
        echo "== limit $v KiB"
        export TEST_EXPECT_SHIM=active TEST_EXPECT_RUNTIME=0
        "$@" -np 1 bash -c "ulimit -v $((v + 50000)); LD_PRELOAD=\"\$1\" exec \"\$0\"" "$p" "$lib" : \
            -np 1 env LD_PRELOAD="$lib" "$p"' _ "$order" "$lib" "$MPIRUN" $(mpirun_flags)
    # The solo path with sends and receives of different tags on different
    # routes: MPI_Sendrecv then posts both and waits for each.
    run_case "$host p2p_waitall_error np2 solo, MAP=tag" expect_ok \
        env TEST_EXPECT_SHIM=active TEST_THREAD_LEVEL=multiple TEST_EXPECT_RUNTIME=1 MPISHIM_MAP=tag \
        MPISHIM_ASSERT=no_any_tag "${launch[@]}" -np 2 "$hb/tests/mpi/p2p_waitall_error"
    run_case "$host a fatal error the shim raises names the program's call" expect_fatal_call \
        env MPISHIM_ASSERT=no_any_tag "${launch[@]}" -np 2 "$hb/tests/proc/fatal_call"
    for m in pready:MPI_Pready list:MPI_Pready_list cancel:MPI_Cancel free:MPI_Request_free \
             start:MPI_Start startall:MPI_Startall; do
        fatal_call_name=${m#*:} run_case "$host a fatal error in ${m#*:} names it" expect_fatal_call \
            "${launch[@]}" -np 2 "$hb/tests/proc/fatal_part" "${m%%:*}"
    done
    # A receive left pending at finalize on the solo path is reported.
    run_case "$host MPISHIM_STATS=1 reports a pending solo-path request" expect_pending_reported \
        env MPISHIM_STATS=1 "${launch[@]}" -np 2 "$hb/tests/proc/pending_irecv"
    for p in thread offload; do
        run_case "$host PROGRESS=$p: the progress thread sleeps when idle, posts wake it" expect_idle_sleeps \
            env MPISHIM_PROGRESS=$p MPISHIM_STATS=1 "${launch[@]}" -np 2 "$hb/tests/proc/idle_progress"
    done
    # MPISHIM_PROGRESS_CPU: a CPU the user names; one the kernel refuses
    # leaves the thread on the process's CPUs (a warning, no failure).
    run_case "$host MPISHIM_PROGRESS_CPU=1 binds the progress thread" "expect_progress_cpu 1" \
        env MPISHIM_PROGRESS=offload MPISHIM_PROGRESS_CPU=1 "${launch[@]}" -np 2 "$hb/tests/proc/progress_cpu"
    run_case "$host MPISHIM_PROGRESS_CPU=60000 warns, thread unbound" "expect_progress_cpu same 60000" \
        env MPISHIM_PROGRESS=thread MPISHIM_PROGRESS_CPU=60000 "${launch[@]}" -np 2 "$hb/tests/proc/progress_cpu"
    run_case "$host mpishim-info" expect_info env -u MPISHIM_NUM_VCIS -u MPISHIM_FABRIC "$build/mpishim-info" --host "$host"
    [ "${HAVE_UCX:-no}" != yes ] ||
        run_case "$host mpishim-info, ucx lane" expect_info_ucx env MPISHIM_FABRIC=ucx "$build/mpishim-info" --host "$host"

    # The examples people copy: raw and under the shim, results checked.
    for ex in halo_omp part_pipeline rma_threads; do
        run_case "$host example $ex np2 raw host" expect_example \
            env OMP_NUM_THREADS=4 "$MPIRUN" $(mpirun_flags) -np 2 "$hb/examples/$ex"
        for np in 2 4; do
            run_case "$host example $ex np$np shim" expect_example \
                env OMP_NUM_THREADS=4 "${launch[@]}" -np $np "$hb/examples/$ex"
        done
    done

    # Start-up and crash behaviour must be the raw host's: the
    # library links nothing beyond hwloc, the host MPI and libc, loads no
    # libfabric (whose PSM dependencies cost start-up time and install signal
    # handlers), and a rank that segfaults dies by SIGSEGV.
    run_case "$host libmpishim.so needs no libfabric" expect_no_fabric_needed readelf -d "$lib"
    proc=$hb/tests/proc
    run_case "$host deps_clean np2: nothing loaded, handlers as raw" expect_same_handlers \
        env -u MPISHIM_FABRIC bash -c "$raw_then_shim_np2" \
        _ "$proc/deps_clean" "$build/mpishim" "$host" "$lib" "$MPIRUN" $(mpirun_flags)
    run_case "$host crash singleton dies by SIGSEGV as raw" expect_same_crash \
        bash -c 'echo "== raw"; "$1"; echo "== rc $?"; echo "== shim";
                 "$2" --host "$3" --lib "$4" "$1"; echo "== rc $?"' _ "$proc/crash" "$build/mpishim" "$host" "$lib"
    run_case "$host crash np2 under mpirun reported as raw" expect_same_crash \
        bash -c "$raw_then_shim_np2" \
        _ "$proc/crash" "$build/mpishim" "$host" "$lib" "$MPIRUN" $(mpirun_flags)

    # The same with the UCX lane open: UCX must not add its own handlers
    # where the host has not loaded it (Open MPI), and keep the host's.
    if [ "${HAVE_UCX:-no}" = yes ]; then
        run_case "$host deps_clean np2 ucx lane: handlers as raw" expect_same_handlers \
            env MPISHIM_FABRIC=ucx bash -c "$raw_then_shim_np2" \
            _ "$proc/deps_clean" "$build/mpishim" "$host" "$lib" "$MPIRUN" $(mpirun_flags)
        run_case "$host crash np2 ucx lane reported as raw" expect_same_crash \
            env MPISHIM_FABRIC=ucx bash -c "$raw_then_shim_np2" \
            _ "$proc/crash" "$build/mpishim" "$host" "$lib" "$MPIRUN" $(mpirun_flags)
    fi

    # The lanes this machine can open, for the cases below.
    lanes="$([ "${HAVE_UCX:-no}" != yes ] || echo ucx) $([ "${HAVE_LIBFABRIC:-no}" != yes ] || echo tcp)"

    # MPISHIM_STATS shows what each lane carried: p2p_order's messages are
    # all on MPI_COMM_WORLD, which the lane carries.
    for lane in $lanes; do
        run_case "$host p2p_order np2 STATS: the $lane lane carried every message" expect_lane_counted \
            env MPISHIM_FABRIC=$lane MPISHIM_NUM_VCIS=4 MPISHIM_STATS=1 MPISHIM_SOLO=0 TEST_THREAD_LEVEL=multiple \
            "${launch[@]}" -np 2 "$hb/tests/mpi/p2p_order"
    done

    # A rank that dies while its peer waits in MPI_Recv on a lane: the job
    # ends as raw (the launcher's status and message), nothing hangs.
    for lane in $lanes; do
        run_case "$host crash np2 while the peer waits on the $lane lane reported as raw" expect_same_crash \
            env MPISHIM_FABRIC=$lane bash -c 'echo "== raw"; "${@:5}" -np 2 "$1" recv; echo "== rc $?"; echo "== shim";
                     "$2" --host "$3" --lib "$4" "${@:5}" -np 2 "$1" recv; echo "== rc $?"' \
            _ "$proc/crash" "$build/mpishim" "$host" "$lib" "$MPIRUN" $(mpirun_flags)
    done

    # The fabric's shm endpoints live in /dev/shm files that only closing
    # them removes: a run must leave none behind (they would pile up, and
    # a later process with the same pid could not open its endpoint).
    if [ "${HAVE_LIBFABRIC:-no}" = yes ]; then
        run_case "$host fabric shm leaves nothing in /dev/shm" expect_no_new_shm \
            bash -c 'ls /dev/shm > "$1.before"; MPISHIM_FABRIC=shm MPISHIM_ASSERT=no_any_tag MPISHIM_NUM_VCIS=4 "${@:2}";
                     echo "== rc $?"; ls /dev/shm | grep -vxF -f "$1.before" | grep -E "^[0-9]+:" | sed "s/^/== new: /"; rm -f "$1.before"' \
            _ "$logdir/shm-$host" "${launch[@]}" -np 2 "$hb/tests/mpi/mt_basic"
        # The shm provider installs handlers for SIGINT, SIGTERM, SIGBUS
        # and SIGSEGV that remove its files: the shim removes them itself
        # once every process has mapped them, and keeps the host's
        # handlers; a rank killed by SIGKILL then leaves nothing either.
        # (Before libfabric 1.20 only: later ones map a peer's file at its
        # first message, and the files and handlers stay.)
        fi_ver=$(pkg-config --modversion libfabric 2>/dev/null || echo 0)
        if [ "$(printf '%s\n1.20\n' "$fi_ver" | sort -V | head -n 1)" = 1.20 ]; then
            for n in "deps_clean np2 shm lane: handlers as raw" "fabric shm: a rank killed by SIGKILL leaves nothing in /dev/shm"; do
                if [ -z "$filter" ] || grep -qE -- "$filter" <<< "$host $n"; then
                    skipped=$((skipped + 1))
                    printf 'SKIP %-58s       %s\n' "$host $n" "libfabric $fi_ver keeps its shm files and handlers"
                fi
            done
        else
            run_case "$host deps_clean np2 shm lane: handlers as raw" expect_psm_stubbed \
                env MPISHIM_FABRIC=shm bash -c "$raw_then_shim_np2" \
                _ "$proc/deps_clean" "$build/mpishim" "$host" "$lib" "$MPIRUN" $(mpirun_flags)
            run_case "$host fabric shm: a rank killed by SIGKILL leaves nothing in /dev/shm" expect_killed_no_shm \
                bash -c 'ls /dev/shm > "$1.before"; MPISHIM_FABRIC=shm MPISHIM_NUM_VCIS=4 "${@:2}";
                         echo "== rc $?"; ls /dev/shm | grep -vxF -f "$1.before" | grep -E "^[0-9]+:" | sed "s/^/== new: /"; rm -f "$1.before"' \
                _ "$logdir/shmkill-$host" "${launch[@]}" -np 2 "$proc/crash" kill
        fi
        n="fabric tcp: libfabric's first query reads no /proc/kallsyms"
        if [ -n "$filter" ] && ! grep -qE -- "$filter" <<< "$host $n"; then
            :
        elif ! command -v strace > /dev/null || [ -n "$(ls /sys/class/infiniband 2> /dev/null)" ]; then
            skipped=$((skipped + 1))
            printf 'SKIP %-58s       %s\n' "$host $n" "$(command -v strace > /dev/null && echo "this node has an RDMA device" || echo "no strace")"
        else
            kallsyms_dir=$logdir/kallsyms-$host
            rm -rf "$kallsyms_dir"
            mkdir -p "$kallsyms_dir"
            run_case "$host $n" expect_no_kallsyms \
                env MPISHIM_FABRIC=tcp MPISHIM_NUM_VCIS=2 "${launch[@]}" -np 2 \
                strace -ff -qq -e trace=open,openat -o "$kallsyms_dir/open" "$proc/deps_clean"
        fi
        n="deps_clean np2 tcp lane: PSM stand-ins"
        if ls /dev | grep -qE '^(hfi1|ipath)'; then
            if [ -z "$filter" ] || grep -qE -- "$filter" <<< "$host $n"; then
                skipped=$((skipped + 1))
                printf 'SKIP %-58s       %s\n' "$host $n" "this node has a PSM adapter"
            fi
        else
            run_case "$host deps_clean np2 tcp lane: PSM stand-ins, handlers as raw" expect_psm_stubbed \
                env MPISHIM_FABRIC=tcp bash -c "$raw_then_shim_np2" \
                _ "$proc/deps_clean" "$build/mpishim" "$host" "$lib" "$MPIRUN" $(mpirun_flags)
        fi
        # tcp;ofi_rxm's own receive depth would give every VCI some 70 MB:
        # the shim sets a smaller one while libfabric reads it, and the
        # user's own value wins.
        run_case "$host fabric tcp: 4 VCIs in under 150 MB, nothing left in the environment" expect_ok \
            env MPISHIM_FABRIC=tcp MPISHIM_NUM_VCIS=4 "${launch[@]}" -np 2 "$proc/lane_footprint" 150
        run_case "$host fabric tcp: the user's FI_OFI_RXM_MSG_RX_SIZE is kept" expect_ok \
            env MPISHIM_FABRIC=tcp MPISHIM_NUM_VCIS=4 FI_OFI_RXM_MSG_RX_SIZE=64 "${launch[@]}" -np 2 \
            "$proc/lane_footprint" 150 64
    fi

    # Fortran: mpif.h and `use mpi` programs with OpenMP threads,
    # raw, under the launcher and under LD_PRELOAD; with MPISHIM_STATS=1 the
    # runtime must have counted every send and receive exactly once.
    if [ "${HAVE_FORTRAN:-no}" = yes ]; then
        for t in "$hb"/tests/fortran/ft_threads_* "$hb"/tests/fortran/ft_calls_*; do
            [ -x "$t" ] || continue
            name=$(basename "$t")
            run_case "$host fortran $name np2 raw host" expect_ok "$MPIRUN" $(mpirun_flags) -np 2 "$t"
            # The STATS lines below run np 2 under the shim too.
            [ "$thorough" = 0 ] || for np in 2 4; do
                run_case "$host fortran $name np$np shim" expect_ok \
                    env MPISHIM_SOLO=0 "${launch[@]}" -np $np "$t"
            done
            run_case "$host fortran $name np2 shim, solo fast path" expect_ok "${launch[@]}" -np 2 "$t"
            # On the lane, matched-probe messages are the shim's handles,
            # which the Fortran conversions must carry both ways.
            [ "${HAVE_UCX:-no}" != yes ] ||
                run_case "$host fortran $name np2 shim MPISHIM_FABRIC=ucx" expect_ok \
                    env MPISHIM_FABRIC=ucx MPISHIM_NUM_VCIS=4 "${launch[@]}" -np 2 "$t"
            run_case "$host fortran $name np2 shim MPISHIM_HOST_THREAD=serialized" expect_ok \
                env MPISHIM_SOLO=0 MPISHIM_HOST_THREAD=serialized "${launch[@]}" -np 2 "$t"
            run_case "$host fortran $name np2 shim STATS: runtime counted it" expect_fortran_counted \
                env MPISHIM_STATS=1 MPISHIM_SOLO=0 "${launch[@]}" -np 2 "$t"
            run_case "$host fortran $name np2 LD_PRELOAD STATS: runtime counted it" expect_fortran_counted \
                env MPISHIM_STATS=1 MPISHIM_SOLO=0 LD_PRELOAD="$lib" "$MPIRUN" $(mpirun_flags) -np 2 "$t"
        done
        # Partitioned from Fortran with OpenMP threads calling MPI_Pready:
        # on Open MPI 4.1 (no partitioned calls of its own) through the
        # shim's mpishim_f.h and Fortran entries (the program links with
        # -lmpishim, so there is no raw run); on MPICH through the host's
        # interface, raw too, and with the host's layer (MPISHIM_PART=native).
        for t in "$hb"/tests/fortran/ft_part_*; do
            [ -x "$t" ] || continue
            name=$(basename "$t")
            if [ "${HOST_HAS_PARTITIONED:-no}" = yes ]; then
                run_case "$host fortran $name np2 raw host" expect_ok "$MPIRUN" $(mpirun_flags) -np 2 "$t"
                run_case "$host fortran $name np2 shim MPISHIM_PART=native" expect_ok \
                    env MPISHIM_SOLO=0 MPISHIM_PART=native "${launch[@]}" -np 2 "$t"
            fi
            for np in $cfg_nps; do
                run_case "$host fortran $name np$np shim" expect_ok \
                    env MPISHIM_SOLO=0 "${launch[@]}" -np $np "$t"
            done
            run_case "$host fortran $name np2 shim, solo fast path" expect_ok "${launch[@]}" -np 2 "$t"
            run_case "$host fortran $name np2 shim MPISHIM_HOST_THREAD=serialized" expect_ok \
                env MPISHIM_SOLO=0 MPISHIM_HOST_THREAD=serialized "${launch[@]}" -np 2 "$t"
            run_case "$host fortran $name np2 LD_PRELOAD" expect_ok \
                env MPISHIM_SOLO=0 LD_PRELOAD="$lib" "$MPIRUN" $(mpirun_flags) -np 2 "$t"
        done
        # Plain MPI_INIT: the shim sees it (on Open MPI only through its
        # Fortran wrappers) and keeps the runtime off, as for C.
        for t in "$hb"/tests/fortran/ft_level_*; do
            [ -x "$t" ] || continue
            run_case "$host fortran $(basename "$t") np2 shim: MPI_INIT keeps the runtime off" expect_runtime_off \
                env MPISHIM_VERBOSE=1 MPISHIM_STATS=1 MPISHIM_SOLO=0 "${launch[@]}" -np 2 "$t"
        done
    else
        if [ -z "$filter" ] || grep -qE -- "$filter" <<< "$host fortran"; then
            skipped=$((skipped + 1))
            printf 'SKIP %-58s       %s\n' "$host fortran" "not built (configure: no gfortran or no host Fortran wrapper)"
        fi
    fi
done

# A build for one host preloaded into a program of the other must stop with
# one clear line, not crash on misread handles.
expect_host_mismatch() {
    [ "$1" -ne 0 ] || { echo "exit code 0, expected a failure"; return; }
    local n
    n=$(grep -c '^mpishim: this libmpishim.so was built for mpich, but the process loaded two MPI libraries' "$2")
    [ "$n" -eq 1 ] || echo "expected one line explaining the mismatch, found $n"
}
if [ -z "$variant" ] && [ "$multinode" != only ] && [ -f "$build/mpich/libmpishim.so" ] && [ -f "$build/openmpi/host.env" ]; then
    . "$build/openmpi/host.env"
    run_case "mpich build preloaded into an Open MPI program" expect_host_mismatch \
        env LD_PRELOAD="$build/mpich/libmpishim.so" "$MPIRUN" $MPIRUN_FLAGS -np 2 "$build/openmpi/tests/mpi/p2p_order"
fi

# ---------------------------------------------------------------- multi-node
# Issue 17: 2 simulated nodes (network namespaces with their own hostnames,
# tools/netns-cluster.sh) x 2 ranks, over TCP, through the launcher
# unchanged (tests/multinode.sh builds the command lines).
[ -n "$variant" ] || [ "$multinode" = 0 ] || . "$top/tests/multinode-cases.sh"

echo
if [ $failed -gt 0 ]; then
    echo "failed cases (logs in $logdir):"
    printf '  %s\n' "${failed_names[@]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
