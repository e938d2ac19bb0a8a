#!/usr/bin/env bash
# make install, then use the installed copy as a user would: build an
# example against it through pkg-config (the relink route), run it with the
# installed launcher, and find the man pages. Also checks that DESTDIR stages
# every file under it.
#
#   tests/install.sh HOST     (a host built under build/HOST; prints "ok install HOST")
set -eu
host=$1
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC1090
. "$top/build/$host/host.env"
tmp=$(mktemp -d)
[ -n "${KEEP_TMP:-}" ] || trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

make -s -C "$top" install HOSTS="$host" PREFIX="$prefix" > "$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; echo "make install failed"; exit 1; }
for f in bin/mpishim bin/mpishim-info include/mpishim.h "lib/mpishim/$host/libmpishim.so" \
         "lib/pkgconfig/mpishim-$host.pc" share/man/man1/mpishim.1 share/man/man1/mpishim-info.1 \
         share/man/man7/mpishim.7; do
    [ -e "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done

make -s -C "$top" install HOSTS="$host" PREFIX=/opt/mpishim DESTDIR="$tmp/stage" > "$tmp/stage.log" 2>&1 ||
    { cat "$tmp/stage.log"; echo "make install DESTDIR=... failed"; exit 1; }
[ -e "$tmp/stage/opt/mpishim/lib/mpishim/$host/libmpishim.so" ] || { echo "DESTDIR: library not staged"; exit 1; }
grep -q '^prefix=/opt/mpishim$' "$tmp/stage/opt/mpishim/lib/pkgconfig/mpishim-$host.pc" ||
    { echo "DESTDIR: the pkg-config file does not name the final prefix"; exit 1; }

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
"$MPICC" -O2 -o "$tmp/thread_pairs" "$top/examples/thread_pairs.c" $(pkg-config --cflags --libs "mpishim-$host") -lpthread
ldd "$tmp/thread_pairs" | grep -q "$prefix/lib/mpishim/$host/libmpishim.so" ||
    { ldd "$tmp/thread_pairs"; echo "the relinked example does not load the installed library"; exit 1; }

flags=$MPIRUN_FLAGS
[ "$(id -u)" -ne 0 ] || [ "$host" != openmpi ] || flags="$flags --allow-run-as-root"
# shellcheck disable=SC2086
MPISHIM_VERBOSE=1 "$prefix/bin/mpishim" "$MPIRUN" $flags -np 2 "$tmp/thread_pairs" -t 2 -q -i 3 > "$tmp/run.log" 2>&1 ||
    { cat "$tmp/run.log"; echo "the installed launcher failed"; exit 1; }
grep -q '^msgrate T=2 ' "$tmp/run.log" || { cat "$tmp/run.log"; echo "no result line"; exit 1; }
grep -q '^mpishim .* active: ' "$tmp/run.log" || { cat "$tmp/run.log"; echo "the shim did not report itself (MPISHIM_VERBOSE=1)"; exit 1; }
echo "ok install $host"
