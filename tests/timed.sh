#!/usr/bin/env bash
# Time limits for the test runners (tests/run.sh and tests/stress/run.sh
# source this file): run_timed runs a command in a session of its own and,
# past timeout_s seconds, writes the stacks of its programs to its log before
# killing it. A hang in CI happens once in hundreds of runs and seldom again
# by hand: what the log keeps of it is all there is.
#
#   bash tests/timed.sh selftest   checks the watchdog on a program that hangs
#                                  (exit 0 when it behaves, 1 with the reason)

# thread_stacks PID...: one line per thread of each process, its frames'
# functions innermost first (gdb, when installed).
thread_stacks() {
    command -v gdb > /dev/null || { echo "(no gdb: no stacks)"; return; }
    local p
    for p in "$@"; do
        local cmd
        cmd=$({ tr '\0' ' ' < /proc/"$p"/cmdline; } 2>/dev/null) || continue # gone meanwhile
        echo "== stacks of $p (${cmd:0:100})"
        timeout 60 gdb -p "$p" -batch -nx -ex 'thread apply all bt' < /dev/null 2>/dev/null | awk '
            /^Thread / { if (line != "") print line; line = "  thread " $2 ":"; next }
            /^#[0-9]/ { f = ($3 == "in") ? $4 : $2; line = line " " f }
            END { if (line != "") print line }'
    done
}

# run_timed LOG CMD...: CMD in a session of its own, output to LOG; past
# timeout_s, the stacks of the session's programs (not the launchers) go to
# the end of LOG, the session gets TERM, KILL 10 s later, and the status is
# 124.
run_timed() {
    local log=$1
    shift
    setsid "$@" < /dev/null > "$log" 2>&1 &
    local pid=$!
    ( # the watchdog: exits 1 when it fired
        fired=0
        trap 'kill $s 2>/dev/null; exit $fired' TERM
        sleep "$timeout_s" & s=$!
        wait $s
        kill -0 "$pid" 2>/dev/null || exit 0
        fired=1
        mapfile -t procs < <(pgrep -s "$pid" | while read -r q; do
            case $(cat /proc/"$q"/comm 2>/dev/null) in
            mpirun* | mpiexec* | orterun | orted | prted | prterun | hydra_* | timeout | env | bash | sh | sleep | setsid | mpishim | "") ;;
            *) echo "$q" ;;
            esac
        done)
        thread_stacks "${procs[@]}" >> "$log" 2>&1
        pkill -TERM -s "$pid"
        kill -TERM -- -"$pid" 2>/dev/null # its process group, should pkill be missing
        sleep 10 & s=$!
        wait $s
        pkill -KILL -s "$pid"
        kill -KILL -- -"$pid" 2>/dev/null
        exit 1
    ) &
    local wd=$! rc
    wait "$pid" 2>/dev/null # no "Killed" notice
    rc=$?
    kill "$wd" 2>/dev/null
    wait "$wd" 2>/dev/null && return "$rc"
    [ $? -ne 1 ] || return 124
    return "$rc"
}

# The self-test: a program that ignores TERM and hangs under a launcher-like
# shell must end in 124 within the limit plus the grace, leave its stacks in
# the log (with gdb) and leave nothing of its session behind; a program that
# ends in time keeps its own status, and so does one that fails.
timed_selftest() {
    local dir rc t0 why=""
    dir=$(mktemp -d) || return 1
    timeout_s=2
    t0=$SECONDS
    # shellcheck disable=SC2016 # perl, not the shell, expands $SIG
    run_timed "$dir/hang.log" bash -c 'echo start; exec perl -e "\$SIG{TERM} = q(IGNORE); sleep 1 while 1"'
    rc=$?
    [ $rc -eq 124 ] || why="a hung program gave status $rc, not 124"
    [ -n "$why" ] || [ $((SECONDS - t0)) -le 40 ] || why="a hung program took $((SECONDS - t0)) s to end (limit 2 s + 10 s grace)"
    if [ -z "$why" ] && pgrep -f 'SIG\{TERM\} = q\(IGNORE\)' > /dev/null; then
        why="the hung program outlived its KILL"
    fi
    [ -n "$why" ] || grep -q '^start$' "$dir/hang.log" || why="the log lost the program's output"
    if [ -z "$why" ] && command -v gdb > /dev/null; then
        grep -q '^== stacks of .*perl' "$dir/hang.log" && grep -qE '^  thread [0-9]+: ' "$dir/hang.log" ||
            why="no stack lines in the log: $(tail -n 3 "$dir/hang.log" | tr '\n' '|')"
    fi
    if [ -z "$why" ]; then
        timeout_s=30
        run_timed "$dir/ok.log" bash -c 'exit 3'
        rc=$?
        [ $rc -eq 3 ] || why="a program that exits 3 in time gave status $rc"
        run_timed "$dir/ok.log" true
        rc=$?
        [ $rc -eq 0 ] || why="true gave status $rc"
    fi
    rm -rf "$dir"
    if [ -n "$why" ]; then
        echo "FAIL timed.sh watchdog: $why"
        return 1
    fi
    echo "OK timed.sh watchdog: a hung program ends in 124 with its stacks, others keep their status"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    case ${1:-} in
    selftest) timed_selftest ;;
    *) echo "usage: bash tests/timed.sh selftest (the functions are for sourcing)" >&2; exit 2 ;;
    esac
fi
