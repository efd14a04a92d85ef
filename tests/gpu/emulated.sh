#!/bin/sh
# The device path end to end without a GPU: every example and end-to-end program compiled
# for --target cuda against the host emulation of CUDA, NCCL and cuBLAS (tests/cuemu; its
# kernels compiled as C), run under mpirun at 1..4 ranks (the CPU suites run 6 and 8) and compared with the oracle
# like the CPU target; plus random programs.  This checks the generated host code, the
# kernels' index arithmetic and thread mapping, and libdistal_cuda's piece plans, packing and
# NCCL call structure; it cannot check concurrency on a real device (tests/gpu/run.sh does).
set -u
: "${top_srcdir:?}" "${top_builddir:?}"
. "$top_srcdir/tests/gpu/env.sh"
gpu_env_emulated
py=${PYTHON:-python3}
status=0
# the plan names the NCCL operations of the CUDA target
for want in "ncclBroadcast" ; do
  if "${DISTALC:?}" "$top_srcdir/examples/summa.dtl" --target cuda --emit plan --ranks 4 | grep -q "$want"; then
    echo "PASS --emit plan names $want (summa)"
  else
    echo "FAIL --emit plan does not name $want (summa)"; status=1
  fi
done
if "$DISTALC" "$top_srcdir/examples/cannon.dtl" --target cuda --emit plan --ranks 4 | grep -q "ncclSend/ncclRecv"; then
  echo "PASS --emit plan names ncclSend/ncclRecv (cannon)"
else
  echo "FAIL --emit plan does not name ncclSend/ncclRecv (cannon)"; status=1
fi
if "$DISTALC" "$top_srcdir/examples/johnson.dtl" --target cuda --emit plan --ranks 8 | grep -q "ncclReduce"; then
  echo "PASS --emit plan names ncclReduce (johnson)"
else
  echo "FAIL --emit plan does not name ncclReduce (johnson)"; status=1
fi
"$py" "$top_srcdir/tests/e2e/run_e2e.py" --suite all --target cuda --max-ranks 4 "$@" || status=1
"$py" "$top_srcdir/tests/e2e/gen_random.py" --count 30 --seed 7000 --target cuda || status=1
"$py" "$top_srcdir/tests/e2e/run_e2e.py" --suite gpu --target cuda "$@" || status=1
hier_runs 8 || status=1
exit $status
