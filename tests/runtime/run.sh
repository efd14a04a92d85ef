#!/bin/sh
# Runs the libdistal tests (test_runtime) under mpirun at several rank counts, oversubscribed.
# Environment: top_builddir (the build tree, default .), MPIRUN (default mpirun),
# DTL_TEST_RANKS (default "1 2 3 4 6 8"), DTL_TEST_TIMEOUT (seconds per run, default 100).
set -u
bin="${top_builddir:-.}/tests/runtime/test_runtime"
mpirun="${MPIRUN:-mpirun}"
ranks="${DTL_TEST_RANKS:-1 2 3 4 6 8}"
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
for np in $ranks; do
  echo "== test_runtime on $np rank(s)"
  if ! $timeout $mpirun --oversubscribe -np "$np" "$bin"; then
    echo "FAIL: test_runtime on $np rank(s)"
    status=1
  fi
done
exit $status
