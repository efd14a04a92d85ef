#!/bin/sh
# Installs every Debian 12 package that distal-mpi needs to build, test and benchmark.
# Usage: scripts/install-deps.sh   (as root, or with sudo available)
#        scripts/install-deps.sh --bench   also the packages only benchmarks use (PETSc for
#                                          bench/programs.sh)
set -eu
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
PKGS="build-essential autoconf automake libtool pkg-config
  openmpi-bin libopenmpi-dev
  libopenblas-dev
  libhwloc-dev hwloc
  libcmocka-dev
  python3 python3-numpy python3-mpi4py cmake
  clang valgrind
  libscalapack-openmpi-dev gnuplot-nox
  slurmctld slurmd slurm-client munge libpmix-dev"
if [ "${1:-}" = --bench ]; then
  PKGS="$PKGS petsc-dev"
fi
if ! dpkg -s $PKGS >/dev/null 2>&1; then
  $SUDO apt-get update -q
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -q --no-install-recommends $PKGS
fi
