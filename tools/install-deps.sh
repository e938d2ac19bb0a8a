#!/usr/bin/env bash
# Install what mpishim needs to build and test on Debian (both host MPIs).
# Runs apt-get update once, then apt-get install -y; uses sudo when not root.
#   --bench  also what `make bench` uses beyond the build: gnuplot-nox for the
#            plots, g++ for building the optional outside benchmark IMB-MT
set -euo pipefail
PKGS=(
    gcc make autoconf python3 binutils coreutils
    gfortran
    libopenmpi-dev openmpi-bin
    libmpich-dev mpich
    libhwloc-dev hwloc
    libfabric-dev
    libucx-dev
    iproute2 iptables util-linux   # multi-node tests: ip netns, loss rules, unshare
    gdb procps                     # the stacks of a test case that timed out (pgrep)
    strace                         # what files a lane's start-up reads
)
case ${1:-} in
    "") ;;
    --bench) PKGS+=(gnuplot-nox g++) ;;
    *) echo "install-deps: unknown option '$1' (--bench)" >&2; exit 2 ;;
esac
SUDO=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: run as root (or install sudo)" >&2; exit 1; }
    SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q "${PKGS[@]}"
