#!/bin/sh
# The device path end to end without a GPU: every example and end-to-end program compiled
# for --target cuda against the host emulation of CUDA, NCCL and cuBLAS (tests/cuemu; its
# kernels compiled as C), run under mpirun at 1..8 ranks and compared with the NumPy oracle
# like the CPU target; plus random programs.  This checks the generated host code, the
# kernels' index arithmetic and thread mapping, and libdistal_cuda's piece plans, packing and
# NCCL call structure; it cannot check concurrency on a real device (tests/gpu/run.sh does).
set -u
: "${top_srcdir:?}" "${top_builddir:?}"
. "$top_srcdir/tests/gpu/env.sh"
gpu_env_emulated
py=${PYTHON:-python3}
status=0
"$py" "$top_srcdir/tests/e2e/run_e2e.py" --suite all --target cuda "$@" || status=1
"$py" "$top_srcdir/tests/e2e/gen_random.py" --count 60 --seed 7000 --target cuda || status=1
exit $status
