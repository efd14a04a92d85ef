#!/bin/sh
# Runs test_cuemu, the tests of the host emulation of the CUDA runtime, NCCL and cuBLAS that
# the test suite uses to run the device path of libdistal_cuda and generated CUDA code without
# a GPU (tests/cuemu), under mpirun at 1, 2, 3 and 4 ranks, oversubscribed.  Builds nothing.
# The emulation runs every stream's work at once (stream concurrency is not tested here);
# device memory is kept apart from host memory by its table of allocations and by page
# protection: outside emulated device operations it is inaccessible, so host code that
# dereferences a device pointer dies with a message.
# Environment: top_builddir (the build tree, default .), MPIRUN (default mpirun),
# DTL_TEST_TIMEOUT (seconds per run, default 100: a wrongly completed NCCL group hangs, as it
# would on a GPU, and the limit turns that into a failure).
set -u
bin="${top_builddir:-.}/tests/cuemu/test_cuemu"
mpirun="${MPIRUN:-mpirun}"
limit="${DTL_TEST_TIMEOUT:-100}"
export OMPI_ALLOW_RUN_AS_ROOT="${OMPI_ALLOW_RUN_AS_ROOT:-1}"
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
export OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
if [ ! -x "$bin" ]; then
  echo "run.sh: $bin not found (build it with make check or set top_builddir)" >&2
  exit 99
fi
timeout=""
if command -v timeout >/dev/null 2>&1; then timeout="timeout $limit"; fi
status=0
for np in 1 2 3 4; do
  echo "== $mpirun --oversubscribe -np $np $bin"
  if ! $timeout $mpirun --oversubscribe -np "$np" "$bin"; then
    echo "FAIL: test_cuemu on $np rank(s)"
    status=1
  fi
done
exit $status
