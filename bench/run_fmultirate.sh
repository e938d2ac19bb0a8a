#!/usr/bin/env bash
# The Multirate pattern from Fortran + OpenMP (bench/fmultirate.F90), raw
# host vs mpishim, next to the C program (bench/multirate.c) run the same
# way in the same rounds, so that the Fortran gain can be compared with C's
# on the same machine state.
#
#   bench/run_fmultirate.sh [openmpi] [mpich]     (default: every host built)
#
# 2 ranks x T threads, T in BENCH_THREADS (default 1 2 4), one shared
# communicator, windows of 128 eight-byte Isend/Irecv + Waitall, an ack per
# window. Configurations:
#   usempi-raw   mpirun -np 2 fmultirate -t T           (`use mpi`, no shim)
#   usempi-shim  the same through build/mpishim (no MPISHIM_* set: the default)
#   f08-raw      fmultirate_f08 (`use mpi_f08`), no shim
#   f08-shim     ... through build/mpishim
#   c-raw        bench/multirate -t T, no shim
#   c-shim       ... through build/mpishim
# Runs alternate as in the other benchmarks (lib.sh). Output: per host the
# median M msg/s of each and each shim/raw ratio, into
# bench/results/fmultirate-summary.txt; every run one CSV line in
# bench/results/fmultirate-<host>.csv.
#
# Environment: BENCH_THREADS (default "1 2 4"), BENCH_RUNS (default 5),
# BENCH_SECONDS (timed seconds per run, default 1), BENCH_TIMEOUT (default
# 120), BENCH_RESULTS.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
bench_setup fmultirate
threads=${BENCH_THREADS:-1 2 4}
secs=${BENCH_SECONDS:-1}
tmo=${BENCH_TIMEOUT:-120}
for t in $threads; do
    bench_posint BENCH_THREADS "$t"
done
[ -n "${threads// /}" ] || die "BENCH_THREADS is empty"
bench_posint BENCH_RUNS "$runs"
bench_posint BENCH_TIMEOUT "$tmo"
[[ $secs =~ ^[0-9]*\.?[0-9]+$ ]] || die "BENCH_SECONDS: '$secs' is not a number of seconds"
bench_hosts "$@"
for h in "${hosts[@]}"; do
    for p in fmultirate_f08 multirate; do
        [ -x "$build/$h/bench/$p" ] || die "$build/$h/bench/$p missing: run make -C $here fmultirate multirate"
    done
done
bench_start
configs=(usempi-raw usempi-shim f08-raw f08-shim c-raw c-shim)

bench_configs() { echo "${configs[*]}"; }

bench_run() {
    local host=$1 t=$2 cfg=$3 round=$4 csv=$5
    local prog pat
    # shellcheck disable=SC2206  # word splitting of flags is intended
    local -a flags=($MPIRUN_FLAGS) cmd
    case $cfg in
        usempi-*) prog=$build/$host/bench/fmultirate ;;
        f08-*)    prog=$build/$host/bench/fmultirate_f08 ;;
        c-*)      prog=$build/$host/bench/multirate ;;
    esac
    case $cfg in
        *-raw)  cmd=("$MPIRUN" "${flags[@]}" -np 2 "$prog" -t "$t" -d "$secs") ;;
        # MPISHIM_VERBOSE=1: one configuration block at init, whose
        # "runtime:" line proves the runtime engaged (checked below).
        *-shim) cmd=(env MPISHIM_VERBOSE=1 "$build/mpishim" --host "$host" "$MPIRUN" "${flags[@]}" -np 2 "$prog"
                     -t "$t" -d "$secs") ;;
    esac
    [ "${cfg%%-*}" = c ] && cmd+=(-q) && pat='^multirate .*mmsgs_per_s=\([0-9.eE+-]*\).*' ||
        pat='^fmultirate .*mmsgs_per_s=\([0-9.eE+-]*\).*'
    local out rc rate log=$results/logs/fmultirate-$host-T$t-$cfg-run$round.log
    out=$(timeout -k 10 "$tmo" "${cmd[@]}" 2>&1)
    rc=$?
    rate=$(sed -n "s/$pat/\\1/p" <<< "$out" | head -n 1)
    local engaged=yes
    case $cfg in
        *-shim) grep -qE '^  runtime: [0-9]+ VCI' <<< "$out" || engaged=no ;;
        *-raw)  ! grep -q '^mpishim' <<< "$out" || engaged=no ;;
    esac
    if [ $rc -eq 0 ] && [ -n "$rate" ] && [ $engaged = yes ]; then
        echo "$host,$t,$cfg,$round,$rate" >> "$csv"
        echo "$rate"
        return
    fi
    local why="exit code $rc"
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && why="timed out after ${tmo}s"
    [ $rc -eq 0 ] && why="no result line"
    [ $rc -eq 0 ] && [ -n "$rate" ] && why="the shim's runtime was not on (shim run) or the shim was there (raw run)"
    bench_fail "$log" "$host T=$t $cfg run $round" "$why" "$out" "${cmd[@]}"
    echo "$host,$t,$cfg,$round,NaN" >> "$csv"
    echo NaN
}

bench_table() {
    awk -f "$here/medians.awk" "$2" | awk -v cores="$cores" '
    function num(x) { return x != "nan" && x != "" }
    function cell(x) { return num(x) ? sprintf(" %8.3f", x) : sprintf(" %8s", "-") }
    function ratio(a, b) { return (num(a) && num(b) && b > 0) ? sprintf(" %7.2fx", a / b) : sprintf(" %8s", "-") }
    { if (!($1 in hasT)) { hasT[$1] = 1; T[++nt] = $1 }; med[$1, $2] = $3; if ($5 > 0) bad = 1 }
    END {
        if (nt == 0) { print "  (no results)"; exit }
        printf "median M msg/s (2 ranks x T threads); shim/raw = the shim'"'"'s rate over raw'"'"'s\n"
        printf "%3s %8s %8s %8s %8s %8s %8s | %8s %8s %8s  %s\n", "T", "mpi raw", "mpi shim", "f08 raw", "f08 shim",
               "C raw", "C shim", "mpi x", "f08 x", "C x", "busy/cores"
        for (i = 1; i <= nt; i++) {
            t = T[i]
            printf "%3s%s%s%s%s%s%s |%s%s%s  %d/%d\n", t, cell(med[t, "usempi-raw"]), cell(med[t, "usempi-shim"]),
                cell(med[t, "f08-raw"]), cell(med[t, "f08-shim"]), cell(med[t, "c-raw"]), cell(med[t, "c-shim"]),
                ratio(med[t, "usempi-shim"], med[t, "usempi-raw"]), ratio(med[t, "f08-shim"], med[t, "f08-raw"]),
                ratio(med[t, "c-shim"], med[t, "c-raw"]), 2 * t, cores
        }
        if (bad) print "(some runs failed: their cells are medians of the others)"
    }'
}

header=$(
    echo "Multirate pattern from Fortran + OpenMP (bench/fmultirate.F90: use mpi, use mpi_f08) and"
    echo "from C (bench/multirate.c) in the same rounds: 2 ranks x T threads, one shared communicator,"
    echo "windows of 128 x 8-byte Isend/Irecv + Waitall, ack per window; ${secs}s per run, median of"
    echo "$runs alternating runs. shim = through build/mpishim with no MPISHIM_* set (the default)."
    bench_header short
)
echo "$header"
echo
# shellcheck disable=SC2086  # the list of T is split into words
bench_rounds "host,T,config,run,mmsgs_per_s" "fmultirate-" "T=" $threads
bench_finish ""
