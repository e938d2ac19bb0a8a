#!/usr/bin/env bash
# Regenerates the variable reference in docs/configuration.md and the man
# page docs/mpishim.7 from the variables table of src/core/config.c, as
# printed by `mpishim-info --doc md|man`. Only the part between the markers
# is generated; the text around it is written by hand.
#
#   tools/gendocs.sh MPISHIM_INFO          rewrite both files
#   tools/gendocs.sh MPISHIM_INFO --check  fail (and print a diff) if either differs
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
info=$1
mode=${2:-write}
status=0

# splice FILE FORMAT BEGIN END: FILE with the lines between BEGIN and END
# replaced by `mpishim-info --doc FORMAT`, on stdout.
splice() {
    local gen
    gen=$(mktemp)
    "$info" --doc "$2" > "$gen"
    # Through the environment: awk -v would read the man marker's backslash as an escape.
    B=$3 E=$4 G=$gen awk '
        $0 == ENVIRON["B"] { print; while ((getline l < ENVIRON["G"]) > 0) print l; skip = 1; next }
        $0 == ENVIRON["E"] { skip = 0 }
        !skip { print }' "$1"
    rm -f "$gen"
}

for spec in "docs/configuration.md md <!--_begin_generated_--> <!--_end_generated_-->" \
            "docs/mpishim.7 man .\\\"_begin_generated .\\\"_end_generated"; do
    read -r file fmt b e <<< "$spec"
    b=${b//_/ }
    e=${e//_/ }
    grep -qxF -- "$b" "$top/$file" && grep -qxF -- "$e" "$top/$file" ||
        { echo "gendocs: $file lacks the markers '$b' and '$e'"; exit 1; }
    out=$(mktemp)
    splice "$top/$file" "$fmt" "$b" "$e" > "$out"
    if [ "$mode" = --check ]; then
        if ! diff -u "$top/$file" "$out"; then
            echo "gendocs: $file differs from the variables table (run tools/gendocs.sh $info)"
            status=1
        fi
        rm -f "$out"
    else
        mv "$out" "$top/$file"
    fi
done
[ $status -ne 0 ] || [ "$mode" != --check ] || echo "ok gendocs: docs match the variables table"
exit $status
