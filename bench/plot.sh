#!/usr/bin/env bash
# PNG plots of the Multirate results: message rate against T, one line per
# configuration, one plot per host.
#
#   bench/plot.sh [openmpi] [mpich]   (default: every results/multirate-<host>.csv)
#
# Reads bench/results/multirate-<host>.csv (run_multirate.sh writes it),
# writes the medians to bench/results/multirate-<host>.dat and draws
# bench/results/multirate-<host>.png with bench/plot.gnuplot.
# Needs gnuplot (Debian: apt-get install gnuplot-nox).  BENCH_RESULTS as in
# run_multirate.sh.
set -u
here=$(cd "$(dirname "$0")" && pwd)
results=${BENCH_RESULTS:-$here/results}
# Every configuration of run_multirate.sh, in its order (lib.sh); a plot
# shows those its CSV has.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
configs=("${multirate_configs[@]}")

command -v gnuplot >/dev/null || {
    echo "plot: gnuplot not found, no plots drawn (Debian: apt-get install gnuplot-nox)" >&2; exit 0; }

hosts=("$@")
if [ ${#hosts[@]} -eq 0 ]; then
    for h in openmpi mpich; do [ -f "$results/multirate-$h.csv" ] && hosts+=("$h"); done
fi
[ ${#hosts[@]} -gt 0 ] || { echo "plot: no $results/multirate-<host>.csv: run run_multirate.sh first" >&2; exit 1; }

status=0
for h in "${hosts[@]}"; do
    csv=$results/multirate-$h.csv
    dat=$results/multirate-$h.dat
    png=$results/multirate-$h.png
    [ -f "$csv" ] || { echo "plot: $csv missing" >&2; status=1; continue; }
    awk -f "$here/medians.awk" "$csv" | awk -v cfgs="${configs[*]}" '
        BEGIN { na = split(cfgs, A, " ") }
        {   if (!($1 in hasT)) { hasT[$1] = 1; nt++; T[nt] = $1 }
            seen[$2] = 1
            med[$1, $2] = ($3 == "nan") ? "NaN" : $3 }
        END {
            for (a = 1; a <= na; a++) if (A[a] in seen) C[++nc] = A[a]
            printf "T"; for (c = 1; c <= nc; c++) printf " %s", C[c]; printf "\n"
            for (i = 1; i <= nt; i++) {
                printf "%s", T[i]
                for (c = 1; c <= nc; c++) printf " %s", ((T[i], C[c]) in med) ? med[T[i], C[c]] : "NaN"
                printf "\n"
            }
        }' > "$dat"
    if [ "$(wc -l < "$dat")" -lt 2 ]; then
        echo "plot: $csv has no results" >&2; status=1; continue
    fi
    cols=$(head -n 1 "$dat" | cut -d' ' -f2-)
    if gnuplot -e "host='$h'; datafile='$dat'; outfile='$png'; cores=$(nproc); cols='$cols'; tmax=$(awk 'NR > 1 && $1 > m { m = $1 } END { print m + 0 }' "$dat")" "$here/plot.gnuplot"; then
        echo "plot: wrote $png"
    else
        echo "plot: gnuplot failed for $h" >&2; status=1
    fi
done
exit $status
