#!/usr/bin/env bash
# mpishim stress driver (`make stress`): runs tests/stress/stress under the
# shim on every host given (default: every one built under build/), at np 2
# and 4, once per progress policy with MPISHIM_SOLO=0, once with the default
# solo fast path, and once on the raw host (MPISHIM_DISABLE=1) for reference.
#
#   tests/stress/run.sh [openmpi] [mpich]
#
# Environment:
#   STRESS_SECONDS   total seconds per host, split over its runs (default 120)
#   STRESS_THREADS   worker threads per rank (default 4)
#   STRESS_SEED      replay a seed (default: a new one per run, printed)
#   STRESS_OPS       categories (default all): shared,p2p,probe,cancel,
#                    persistent,part,coll,comm; STRESS_OPS_<host> overrides it
#                    for one host
#   STRESS_PROGRESS  progress policies to cycle (default global,vci,thread,combine,offload)
#   STRESS_NP        rank counts (default "2 4")
#   STRESS_WATCHDOG  seconds without progress before a rank reports and exits (30)
#   STRESS_GDB=1     the watchdog prints gdb backtraces of the stuck rank first
#   STRESS_ENV       extra VAR=VAL settings for every run under the shim
#                    (e.g. "MPISHIM_HOST_THREAD=serialized MPISHIM_WAIT=block"; the
#                    shm lane: "MPISHIM_FABRIC=shm MPISHIM_ASSERT=no_any_tag
#                    STRESS_NO_ANY_TAG=1", the stress program then using no
#                    wildcard tags)
#   STRESS_NUM_VCIS  VCIs per rank under the shim (default 2, as in
#                    tests/run.sh: auto gives 1 where ranks outnumber cores)
# One PASS/FAIL line per run, logs in build/stress-logs/; ends with
# "N passed, N failed, N skipped" (a failed raw-host run is shown as HOST and
# counted as skipped); exits non-zero on any failure of a shim run.
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/timed.sh
. "$top/tests/timed.sh"
build=$top/build
total=${STRESS_SECONDS:-120}
np_list=${STRESS_NP:-2 4}
watchdog=${STRESS_WATCHDOG:-30}
IFS=, read -r -a policies <<< "${STRESS_PROGRESS:-global,vci,thread,combine,offload}"
hosts=("$@")
if [ ${#hosts[@]} -eq 0 ]; then
    for h in openmpi mpich; do [ -f "$build/$h/libmpishim.so" ] && hosts+=("$h"); done
fi
[ ${#hosts[@]} -gt 0 ] || { echo "stress: nothing built under $build (run make)"; echo "0 passed, 1 failed"; exit 1; }

logdir=$build/stress-logs
rm -rf "$logdir"
mkdir -p "$logdir"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for v in $(env | sed -n 's/^\(MPISHIM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
export STRESS_WATCHDOG=$watchdog
[ -z "${STRESS_THREADS:-}" ] || export STRESS_THREADS
[ -z "${STRESS_SEED:-}" ] || export STRESS_SEED
[ -z "${STRESS_GDB:-}" ] || export STRESS_GDB

passed=0
failed=0
skipped=0

for host in "${hosts[@]}"; do
    hb=$build/$host
    if [ ! -x "$hb/tests/stress/stress" ]; then
        echo "FAIL $host: $hb/tests/stress/stress not built"
        failed=$((failed + 1))
        continue
    fi
    # shellcheck disable=SC1091
    . "$hb/host.env"
    flags=""
    [ "$HOST_FLAVOR" = openmpi ] && flags=$MPIRUN_FLAGS
    ops_var=STRESS_OPS_$host
    ops=${!ops_var:-${STRESS_OPS:-all}}
    # Under the shim: the build with partitioned calls where the host has none.
    prog_shim=$hb/tests/stress/stress
    [ -x "$hb/tests/stress/stress_part" ] && prog_shim=$hb/tests/stress/stress_part

    # The runs: "label|environment".
    runs=()
    i=0
    for np in $np_list; do
        for p in "${policies[@]}"; do
            runs+=("$np|MPISHIM_PROGRESS=$p MPISHIM_SOLO=0")
        done
        runs+=("$np|MPISHIM_PROGRESS=${policies[$((i % ${#policies[@]}))]}")
        runs+=("$np|MPISHIM_DISABLE=1")
        i=$((i + 1))
    done
    secs=$((total / ${#runs[@]}))
    [ "$secs" -ge 3 ] || secs=3

    for run in "${runs[@]}"; do
        np=${run%%|*}
        cfg=${run#*|}
        prog=$prog_shim
        case "$cfg" in
            *MPISHIM_DISABLE=1*) prog=$hb/tests/stress/stress ;;
            *) cfg="MPISHIM_NUM_VCIS=${STRESS_NUM_VCIS:-2} $cfg${STRESS_ENV:+ $STRESS_ENV}" ;;
        esac
        name="$host np$np $cfg"
        log="$logdir/$(tr ' /=' '___' <<< "$name").log"
        t0=$SECONDS
        # The program's own watchdog reports a stuck rank; this limit is for
        # a hang it cannot see (in MPI_Init or MPI_Finalize, say).
        timeout_s=$((secs + watchdog + 60))
        # shellcheck disable=SC2086
        run_timed "$log" env STRESS_OPS="$ops" $cfg \
            "$build/mpishim" --host "$host" "$MPIRUN" $flags -np "$np" "$prog" "$secs"
        rc=$?
        seed=$(sed -n 's/^stress: seed=\([0-9]*\).*/\1/p' "$log" | head -n 1)
        ok=$(grep -m1 '^OK stress:' "$log")
        if [ $rc -eq 0 ] && [ -n "$ok" ]; then
            passed=$((passed + 1))
            printf 'PASS %-52s %3ds  seed=%s %s\n' "$name" $((SECONDS - t0)) "$seed" \
                "$(sed -e 's/^OK stress: //' -e 's/ \[seed=.*//' <<< "$ok")"
        else
            # The raw host's run is a reference: a failure there is the host's
            # own (Open MPI 4.1.4 deadlocks in concurrent constructors, for
            # one), shown and counted as skipped, never as the shim's.
            verdict=FAIL
            case "$cfg" in
                *MPISHIM_DISABLE=1*) verdict=HOST; skipped=$((skipped + 1)) ;;
                *) failed=$((failed + 1)) ;;
            esac
            if [ $rc -eq 124 ]; then
                why="timed out after ${timeout_s}s (stacks at the end of the log)"
            else
                why=$(grep -m1 -E '^FAIL |watchdog' "$log" | cut -c1-400)
                [ -n "$why" ] || why="exit code $rc, no OK line"
            fi
            printf '%s %-52s %3ds  seed=%s ops=%s: %s\n' "$verdict" "$name" $((SECONDS - t0)) "$seed" "$ops" "$why"
            echo "---- last lines of $log"
            grep -E '^(FAIL|WATCHDOG)' "$log" | head -n 20 | cut -c1-300 | sed 's/^/    /'
            echo "----"
        fi
    done
done

echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
