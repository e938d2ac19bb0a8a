#!/usr/bin/env bash
# MPI-4 partitioned communication: the shim's layer vs MPICH's own vs plain
# point-to-point baselines.
#
#   bench/run_partitioned.sh [openmpi] [mpich]     (default: every host built)
#
# For each host, each mode of build/<host>/bench/partitioned (make -C bench
# partitioned builds it; see bench/partitioned.c for what is measured and how)
#
#   overhead   one partition vs a persistent MPI_Send_init/MPI_Recv_init pair
#   parts      1..64 partitions of 64K, 1M, 16M bytes vs the persistent pair
#   early      early-bird, T = 2, 4 threads readying partitions at staggered
#              times vs the threads joining and one MPI_Send
#   burst      a receiver behind its sender: 1000 channels (8, 64, 512 bytes)
#              made by the sender first, then by the receiver; per channel on
#              the receiver, vs persistent send/receive pairs made the same way
#
# runs these configurations (each measures the partitioned variant and its
# baseline in the same process, alternating; the raw one the baseline only):
#
#   shim     through build/mpishim (the shim preloaded): the shim's layer
#   native   MPICH only: the same with MPISHIM_PART=native, so the partitioned
#            calls go to MPICH's own implementation (everything else still
#            through the shim)
#   agg      mode parts only: shim with MPISHIM_PART_MIN_BYTES=$BENCH_AGG_BYTES
#            (partitions smaller than that are aggregated into one message)
#   ucx      shim with MPISHIM_FABRIC=ucx MPISHIM_NUM_VCIS=4 (builds with UCX):
#            the partitions' messages on UCX workers instead of the host
#   raw      the host alone, baselines only: MPICH without the shim; Open MPI
#            (whose binary links libmpishim.so for the partitioned symbols)
#            with MPISHIM_DISABLE=1, the shim a pure pass-through
#
# Runs alternate: each round runs every (mode, configuration) once, the
# configurations of a mode in an order rotated from round to round.
# Open MPI gets --bind-to none (its default binds each rank to one core,
# which would put all sender threads of the early mode on one core; MPICH's
# Hydra does not bind), both hosts run 2 ranks.
#
# Output: one table per mode and host (medians over the runs of each run's
# median round), also written with a machine header to
# bench/results/partitioned-summary.txt; every result line of every run is
# one CSV line (host,mode,config,kind,size,parts,threads,metric,run,usec) in
# bench/results/partitioned-<host>.csv, a failed or timed-out run one line
# with metric "failed" and NaN (its output kept in bench/results/logs/).
# Exits 1 if any run failed, after the tables.
#
# Environment:
#   BENCH_RUNS       rounds, i.e. runs per (mode, configuration)   (default 5)
#   BENCH_MODES      modes to run            (default "overhead parts early burst")
#   BENCH_ARGS       more partitioned options for every run, e.g. "-D 50" or
#                    "-R range" (default none)
#   BENCH_AGG_BYTES  MPISHIM_PART_MIN_BYTES of the agg configuration
#                    (default 8192; 0 leaves the configuration out)
#   BENCH_TIMEOUT    seconds before a run is killed and recorded NaN (default 120)
#   BENCH_RESULTS    output folder                         (default bench/results)
# MPISHIM_* variables of the caller are removed: each configuration sets its own.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
bench_setup partitioned
modes=${BENCH_MODES:-overhead parts early burst}
agg=${BENCH_AGG_BYTES:-8192}
tmo=${BENCH_TIMEOUT:-120}

# Per-mode options: the data budget per variant and cell (-b MiB) keeps the
# 16 MiB cells at 5 timed rounds (MPICH's native layer takes ~90 ms a round
# there) while the small sizes get up to 1000 (early: 200).
declare -A mode_args=([overhead]="-b 64" [parts]="-b 32" [early]="-b 64" [burst]="")

bench_posint BENCH_RUNS "$runs"
bench_posint BENCH_TIMEOUT "$tmo"
[[ $agg =~ ^[0-9]+$ ]] || die "BENCH_AGG_BYTES: '$agg' is not a number of bytes"
[ -n "${modes// /}" ] || die "BENCH_MODES is empty"
for m in $modes; do
    case $m in overhead|parts|early|burst) ;; *) die "BENCH_MODES: unknown mode '$m' (overhead parts early burst)" ;; esac
done

bench_hosts "$@"
bench_start

# bench_configs HOST MODE: the configurations, in their table order.
bench_configs() {
    local host=$1 mode=$2 c=(shim)
    [ "$host" = mpich ] && c+=(native)
    [ "$mode" = parts ] && [ "$agg" -gt 0 ] && c+=(agg)
    [ "${HAVE_UCX:-no}" = yes ] && c+=(ucx)
    c+=(raw)
    echo "${c[*]}"
}

# bench_run HOST MODE CONFIG ROUND CSV: one run, its result lines into the CSV.
bench_run() {
    local host=$1 mode=$2 cfg=$3 round=$4 csv=$5
    local prog=$build/$host/bench/partitioned
    local -a cmd flags more margs launch
    # shellcheck disable=SC2206  # word splitting of flags is intended
    flags=($MPIRUN_FLAGS) more=($extra) margs=(${mode_args[$mode]})
    [ "$host" = openmpi ] && flags+=(--bind-to none)
    launch=("$build/mpishim" --host "$host" --lib "$build/$host/libmpishim.so")
    local want_shim=1
    case $cfg in
        shim)   cmd=("${launch[@]}" "$MPIRUN" "${flags[@]}" -np 2 "$prog") ;;
        native) cmd=(env MPISHIM_PART=native "${launch[@]}" "$MPIRUN" "${flags[@]}" -np 2 "$prog") ;;
        agg)    cmd=(env "MPISHIM_PART_MIN_BYTES=$agg" "${launch[@]}" "$MPIRUN" "${flags[@]}" -np 2 "$prog") ;;
        ucx)    cmd=(env MPISHIM_FABRIC=ucx MPISHIM_NUM_VCIS=4 "${launch[@]}" "$MPIRUN" "${flags[@]}" -np 2 "$prog") ;;
        raw)
            want_shim=0
            if [ "$host" = openmpi ]; then
                cmd=(env MPISHIM_DISABLE=1 "$MPIRUN" "${flags[@]}" -np 2 "$prog" -k base)
            else
                cmd=("$MPIRUN" "${flags[@]}" -np 2 "$prog" -k base)
            fi ;;
    esac
    cmd+=(-m "$mode" -q "${margs[@]}" "${more[@]}")
    local out rc log=$results/logs/partitioned-$host-$mode-$cfg-run$round.log
    local t0=$SECONDS
    out=$(timeout -k 10 "$tmo" "${cmd[@]}" 2>&1)
    rc=$?
    local why=""
    if [ $rc -ne 0 ]; then
        why="exit code $rc"
        { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && why="timed out after ${tmo}s"
        [ $rc -eq 1 ] && grep -q '^partitioned done errors=[1-9]' <<< "$out" && why="data check failed"
    elif ! grep -q '^partitioned done errors=0' <<< "$out"; then
        why="no final result line"
    elif ! grep -q "^partitioned info .* shim=$want_shim " <<< "$out"; then
        why=$(bench_shim_mismatch "$want_shim")
    fi
    if [ -n "$why" ]; then
        bench_fail "$log" "$host $mode $cfg run $round" "$why" "$out" "${cmd[@]}"
        echo "$host,$mode,$cfg,-,0,0,0,failed,$round,NaN" >> "$csv"
        echo "failed ($why)"
        return
    fi
    # Notes the program printed on stderr (e.g. on a partitioned status) are kept.
    if grep -q '^partitioned: ' <<< "$out"; then
        { echo "# ${cmd[*]}"; grep '^partitioned: ' <<< "$out"; } > "$log"
    fi
    awk -v host="$host" -v cfg="$cfg" -v run="$round" '
        /^partitioned mode=/ {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", host, f["mode"], cfg, f["kind"], f["size"],
                   f["parts"], f["threads"], f["metric"], run, f["median_us"]
        }' <<< "$out" >> "$csv"
    echo "ok $((SECONDS - t0))s"
}

# bench_table HOST CSV: the tables of one host, from its CSV.
bench_table() {
    local host=$1 csv=$2
    awk -F, -v host="$host" -v modes="$modes" -v cfgs_overhead="$(bench_configs "$host" overhead)" \
        -v cfgs_parts="$(bench_configs "$host" parts)" -v cfgs_early="$(bench_configs "$host" early)" \
        -v cfgs_burst="$(bench_configs "$host" burst)" \
        -v runs="$runs" -v agg="$agg" -v dargs="$extra" "$bench_awk"'
    function us(x) { return x == "" ? "-" : (x < 10 ? sprintf("%.2f", x) : (x < 1000 ? sprintf("%.1f", x) : sprintf("%.0f", x))) }
    function pct(a, b) { return (a == "" || b == "" || b <= 0) ? "-" : sprintf("%+.0f%%", (a - b) / b * 100) }
    function ratio(a, b,    r) {
        if (a == "" || b == "" || b <= 0) return "-"
        r = a / b
        return sprintf(r < 10 ? "%.2fx" : (r < 100 ? "%.1fx" : "%.0fx"), r)
    }
    function K(mode, cfg, kind, size, parts, threads, metric) {
        return mode SUBSEP cfg SUBSEP kind SUBSEP size SUBSEP parts SUBSEP threads SUBSEP metric
    }
    function addval(list, x,    i, k) {   # distinct numeric values, in order seen
        k = split(list, L, " "); for (i = 1; i <= k; i++) if (L[i] == x) return list
        return list == "" ? x : list " " x
    }
    function sortnum(list,    k, a, b, x) {
        k = split(list, S, " ")
        for (a = 2; a <= k; a++) { x = S[a]; for (b = a - 1; b >= 1 && S[b] + 0 > x + 0; b--) S[b + 1] = S[b]; S[b + 1] = x }
        list = ""; for (a = 1; a <= k; a++) list = list (a > 1 ? " " : "") S[a]
        return list
    }
    function failnote(mode, cfgs,    c, nc, C, s) {
        nc = split(cfgs, C, " "); s = ""
        for (c = 1; c <= nc; c++) if (failed[mode, C[c]] > 0)
            s = s sprintf("  %s: %d of %d runs failed (the medians are of the others)\n", C[c], failed[mode, C[c]], runs)
        return s
    }
    $1 == "host" { next }
    NF >= 10 {
        if ($8 == "failed") { failed[$2, $3]++; next }
        if (!isnum($10)) next
        key = K($2, $3, $4, $5, $6, $7, $8)
        n[key]++; v[key, n[key]] = $10 + 0
        if ($4 != "-") { sizes[$2] = addval(sizes[$2], $5); threads[$2] = addval(threads[$2], $7) }
        if ($4 == "part") partsl[$2] = addval(partsl[$2], $6)
        seen[$2] = 1
    }
    function rtt_line(mode, cfgs,    nc, C, c, s) {
        nc = split(cfgs, C, " "); s = "zero-byte round trip rtt0 (median):"
        for (c = 1; c <= nc; c++) s = s sprintf(" %s %s us", C[c], us(med(K(mode, C[c], "-", 0, 0, 0, "rtt0"))))
        return s "\n"
    }
    # One row per size: per configuration the persistent pair and the partitioned kind (with
    # ovh, their difference too), the raw pair, and the shim against raw (rpart: the partitioned
    # kind of the shim, else its pair). bparts: the parts field of the lines of the pair.
    function t_size_rows(mode, cfgs, metric, bparts, ovh, rpart,    nc, C, c, ns, Z, i, z, b, p, line, hdr, raw) {
        nc = split(cfgs, C, " "); ns = split(sortnum(sizes[mode]), Z, " ")
        hdr = sprintf("%6s", "size")
        for (c = 1; c <= nc; c++) {
            if (C[c] == "raw") hdr = hdr sprintf(" | %-9s", "raw pers")
            else hdr = hdr sprintf(" | %-6s %8s %8s", C[c], "pers", "part") (ovh ? sprintf(" %7s", "ovh") : "")
        }
        print hdr (rpart ? " | shim part/raw pers" : " | pers shim/raw")
        for (i = 1; i <= ns; i++) {
            z = Z[i]; line = sprintf("%6s", hsize(z))
            for (c = 1; c <= nc; c++) {
                b = med(K(mode, C[c], "base", z, bparts, 1, metric))
                if (C[c] == "raw") { line = line sprintf(" | %9s", us(b)); raw = b; continue }
                p = med(K(mode, C[c], "part", z, 1, 1, metric))
                line = line sprintf(" | %6s %8s %8s", "", us(b), us(p)) (ovh ? sprintf(" %7s", pct(p, b)) : "")
            }
            print line sprintf(" | %s", ratio(rpart ? med(K(mode, "shim", "part", z, 1, 1, metric)) : med(K(mode, "shim", "base", z, bparts, 1, metric)), raw))
        }
    }
    function t_overhead() {
        printf "(a) overhead of one partition: MPI_Psend_init/MPI_Precv_init with 1 partition + Pready(0)\n"
        printf "    vs a persistent MPI_Send_init/MPI_Recv_init pair; us per round (one-way data + 0-byte ack)\n"
        printf "    ovh = (part - persistent) / persistent, same configuration\n"
        t_size_rows("overhead", cfgs_overhead, "round", 0, 1, 0)
        printf "%s", rtt_line("overhead", cfgs_overhead)
        printf "%s", failnote("overhead", cfgs_overhead)
    }
    function t_parts(    nc, C, c, ns, Z, np, P, i, j, z, b, p, line, hdr, title) {
        nc = split(cfgs_parts, C, " "); ns = split(sortnum(sizes["parts"]), Z, " ")
        np = split(sortnum(partsl["parts"]), P, " ")
        printf "(b) partition counts: one thread readies every partition (MPI_Pready each); us per round\n"
        printf "    (one-way data + 0-byte ack); (x) = ratio to the persistent send of the whole buffer\n"
        printf "    (pers) in the same configuration\n"
        hdr = sprintf("%5s %5s", "total", "parts")
        for (c = 1; c <= nc; c++) {
            title = C[c]; if (title == "agg") title = "agg" hsize(agg)
            hdr = hdr sprintf(" | %-17s", title)
        }
        print hdr
        for (i = 1; i <= ns; i++) {
            z = Z[i]; line = sprintf("%5s %5s", hsize(z), "pers")
            for (c = 1; c <= nc; c++) line = line sprintf(" | %7s%-10s", us(med(K("parts", C[c], "base", z, 0, 1, "round"))), "")
            print line
            for (j = 1; j <= np; j++) {
                line = sprintf("%5s %5s", "", P[j])
                for (c = 1; c <= nc; c++) {
                    if (C[c] == "raw") { line = line sprintf(" | %-17s", ""); continue }
                    b = med(K("parts", C[c], "base", z, 0, 1, "round"))
                    p = med(K("parts", C[c], "part", z, P[j], 1, "round"))
                    line = line sprintf(" | %-17s", sprintf("%7s (%s)", us(p), ratio(p, b)))
                }
                print line
            }
        }
        printf "%s", rtt_line("parts", cfgs_parts)
        printf "%s", failnote("parts", cfgs_parts)
    }
    function t_early(    nc, C, c, ns, Z, nt, T, i, j, z, t, pc, pa, bc, ba, line, hdr, sp, s, pp) {
        nc = split(cfgs_early, C, " "); ns = split(sortnum(sizes["early"]), Z, " ")
        nt = split(sortnum(threads["early"]), T, " ")
        printf "(c) early-bird: T sender threads each compute (i+1)*D us (D = %s), then ready their\n", dval
        printf "    partition (part), vs the threads joining and one MPI_Send of the buffer (single);\n"
        printf "    us from the last thread'"'"'s end of compute to the receiver'"'"'s MPI_Wait return:\n"
        printf "    clock method [ack method in brackets]; ratio = part / single (clock)\n"
        hdr = sprintf("%5s %2s", "size", "T")
        for (c = 1; c <= nc; c++) {
            if (C[c] == "raw") hdr = hdr sprintf(" | %-17s", "raw: single")
            else hdr = hdr sprintf(" | %-17s %-17s %-7s", C[c] ": part", "single", "ratio")
        }
        print hdr
        for (i = 1; i <= ns; i++) for (j = 1; j <= nt; j++) {
            z = Z[i]; t = T[j]
            line = sprintf("%5s %2s", hsize(z), t)
            for (c = 1; c <= nc; c++) {
                bc = med(K("early", C[c], "base", z, 0, t, "clock")); ba = med(K("early", C[c], "base", z, 0, t, "ack"))
                if (C[c] == "raw") { line = line sprintf(" | %-17s", sprintf("%s [%s]", us(bc), us(ba))); continue }
                pp = t * ppt
                pc = med(K("early", C[c], "part", z, pp, t, "clock")); pa = med(K("early", C[c], "part", z, pp, t, "ack"))
                line = line sprintf(" | %-17s %-17s %-7s", sprintf("%s [%s]", us(pc), us(pa)), sprintf("%s [%s]", us(bc), us(ba)), ratio(pc, bc))
            }
            print line
        }
        # How late the last thread really readied (nominal T*D): oversubscription shows here.
        s = "span, last end of compute after the common start (median, part/single; nominal T*D):"
        print s
        for (j = 1; j <= nt; j++) {
            t = T[j]; line = sprintf("  T=%s:", t)
            for (c = 1; c <= nc; c++) {
                if (C[c] == "raw") sp = us(med(K("early", C[c], "base", Z[1], 0, t, "span")))
                else sp = us(med(K("early", C[c], "part", Z[1], t * ppt, t, "span"))) "/" us(med(K("early", C[c], "base", Z[1], 0, t, "span")))
                line = line sprintf(" %s %s us", C[c], sp)
            }
            print line sprintf(" (size %s)", hsize(Z[1]))
        }
        printf "%s", rtt_line("early", cfgs_early)
        printf "%s", failnote("early", cfgs_early)
    }
    function t_burst() {
        printf "(d) a receiver behind its sender: the sender makes 1000 channels one after another\n"
        printf "    (init, Start, Pready, Wait, free), then the receiver its 1000 (init, Start, Wait,\n"
        printf "    free); us per channel on the receiver; pers = the same with MPI_Send_init/MPI_Recv_init\n"
        t_size_rows("burst", cfgs_burst, "chan", 1, 0, 1)
        printf "%s", failnote("burst", cfgs_burst)
    }
    END {
        dval = "100"
        if (match(dargs, /-D *[0-9.]+/)) { dval = substr(dargs, RSTART, RLENGTH); sub(/-D */, "", dval) }
        ppt = 1
        if (match(dargs, /-n *[0-9]+/)) { ppt = substr(dargs, RSTART, RLENGTH); sub(/-n */, "", ppt); ppt += 0 }
        nm = split(modes, M, " ")
        for (k = 1; k <= nm; k++) {
            if (!(M[k] in seen)) { printf "(%s: no results)\n%s\n", M[k], failnote(M[k], M[k] == "overhead" ? cfgs_overhead : (M[k] == "parts" ? cfgs_parts : (M[k] == "burst" ? cfgs_burst : cfgs_early))); continue }
            if (M[k] == "overhead") t_overhead()
            else if (M[k] == "parts") t_parts()
            else if (M[k] == "burst") t_burst()
            else t_early()
            if (k < nm) print ""
        }
    }' "$csv" | sed -e 's/ *$//'
}

# --- header --------------------------------------------------------------
header=$(
    echo "Partitioned communication benchmark (bench/partitioned.c), 2 ranks: rank 0 sends, rank 1 receives;"
    echo "median over $runs alternating runs of each run's median round (mean and min are in the program output)."
    bench_header full
    for m in $modes; do
        echo "options $m: -m $m -q ${mode_args[$m]}${extra:+ $extra}"
    done
    echo "configs: shim = through build/mpishim (the shim's partitioned layer); native = the same with"
    echo "         MPISHIM_PART=native (MPICH's partitioned calls); agg = shim with MPISHIM_PART_MIN_BYTES=$agg;"
    echo "         raw = host alone, baselines only (Open MPI: MPISHIM_DISABLE=1). Open MPI: --bind-to none."
    echo "         MPI_THREAD_MULTIPLE in every run; early mode: T sender threads + the receiver busy on"
    echo "         $cores cores (T+1 > $cores oversubscribes)."
)
echo "$header"
echo

# --- runs ----------------------------------------------------------------
# shellcheck disable=SC2086  # the list of modes is split into words
bench_rounds "host,mode,config,kind,size,parts,threads,metric,run,usec" partitioned- "" $modes
bench_finish "; load average at the end: $(bench_loadavg)"
