#!/bin/sh
# The end-to-end suites on real GPUs: every example and program for --target cuda with
# nvcc, libdistal_cuda, cuBLAS and NCCL, at rank counts up to the number of GPUs (NCCL puts
# one rank on each GPU), compared with the NumPy oracle; plus random programs.
# Skipped (exit 77, saying why) without a CUDA build or without a GPU.
set -u
: "${top_srcdir:?}" "${top_builddir:?}"
. "$top_srcdir/tests/gpu/env.sh"
if [ ! -e "$top_builddir/libdistal_cuda.la" ]; then
  echo "SKIP: no CUDA toolkit was found by configure (libdistal_cuda is not built)"
  exit 77
fi
ngpus=0
if command -v nvidia-smi > /dev/null 2>&1; then
  ngpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')
fi
if [ "$ngpus" -lt 1 ]; then
  echo "SKIP: no GPU on this machine (nvidia-smi lists none); tests/gpu/emulated.sh runs the device path on the host"
  exit 77
fi
gpu_env_real
echo "$ngpus GPU(s): runs use at most $ngpus ranks"
py=${PYTHON:-python3}
status=0
"$py" "$top_srcdir/tests/e2e/run_e2e.py" --suite all --target cuda --max-ranks "$ngpus" "$@" || status=1
"$py" "$top_srcdir/tests/e2e/gen_random.py" --count 100 --seed 7000 --target cuda --max-ranks "$ngpus" || status=1
"$py" "$top_srcdir/tests/e2e/run_e2e.py" --suite gpu --target cuda --max-ranks "$ngpus" "$@" || status=1
hier_runs "$ngpus" || status=1
exit $status
