#!/bin/sh
# Runs test_device (every function of libdistal_cuda against its host twin of libdistal,
# built on the host emulation of CUDA, NCCL and cuBLAS) under mpirun at 1, 2, 3, 4 and 8
# ranks, oversubscribed.  Builds nothing.  Environment: top_builddir, MPIRUN,
# DTL_TEST_TIMEOUT (seconds per run, default 200).
set -u
bin="${top_builddir:-.}/tests/cuemu/test_device"
mpirun="${MPIRUN:-mpirun}"
limit="${DTL_TEST_TIMEOUT:-200}"
export OMPI_ALLOW_RUN_AS_ROOT="${OMPI_ALLOW_RUN_AS_ROOT:-1}"
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
export OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 CUEMU_QUIET=1
if [ ! -x "$bin" ]; then
  echo "device.sh: $bin not found (build it with make check or set top_builddir)" >&2
  exit 99
fi
timeout=""
if command -v timeout >/dev/null 2>&1; then timeout="timeout $limit"; fi
status=0
for np in 1 2 3 4 8; do
  echo "== $mpirun --oversubscribe -np $np $bin"
  if ! $timeout $mpirun --oversubscribe -np "$np" "$bin" > out.$$ 2>&1; then
    cat out.$$
    echo "FAIL: test_device on $np rank(s)"
    status=1
  else
    tail -1 out.$$
  fi
  rm -f out.$$
done
exit $status
