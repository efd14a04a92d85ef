#!/bin/sh
# bench/programs.sh -- whole programs against their references, at 1 and 2 ranks:
#   chain (bench/dtl/chain.dtl) fused / STREAM triad, fused vs distalc --no-fuse;
#   Black-Scholes (dtl/blackscholes.dtl) vs the hand loop blackscholes_ref.c, vs --no-fuse;
#   CG and BiCGSTAB (dtl/cg.dtl, dtl/bicgstab.dtl) vs PETSc (petsc_krylov.c) on the same
#   Poisson matrix: time and allreduces per iteration;
#   dense Jacobi (dtl/jacobi.dtl) fused vs --no-fuse.
# Every generated result is checked against an independent computation.  No timing is
# asserted.  Writes programs.md, programs.csv and log.txt to bench/results/programs.
#
#   bench/programs.sh [--out DIR] [--ranks "1 2"] [--quick] [--rounds R] [--iters I] [--help]
#
# distalc as for bench/run.sh ($DISTALC with DISTAL_CFLAGS and DISTAL_LIBS, or distalc on
# PATH, or --distalc PATH); PETSc through pkg-config (scripts/install-deps.sh --bench) or
# PETSC_FLAGS; needs a python3 with numpy (PYTHON).
here=$(cd "$(dirname "$0")" && pwd)
: "${OMPI_ALLOW_RUN_AS_ROOT:=1}" "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:=1}"
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
for py in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import numpy' 2>/dev/null; then
    exec "$py" "$here/programs.py" "$@"
  fi
done
echo "bench/programs.sh: no python3 with numpy found (set PYTHON)" >&2
exit 1
