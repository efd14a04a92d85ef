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
# run-time variants on the CUDA target: every variant that plan_create may choose, forced with
# DISTAL_VARIANT, validated at 1 to 4 ranks (the GPU rank's model, and a CPU model that keeps
# other variants)
vdir=$(mktemp -d)
printf 'bandwidth 5e9\nlatency 2e-6\npoint_time 4e-10\n' > "$vdir/cpu.model"
for spec in "auto_runtime.dtl -n 37 -m 29 -k 11" "auto_kernels.dtl -n 23 -m 17 -p 9" "auto_shape.dtl -m 13 -n 70"; do
  set -- $spec
  prog=$1; shift
  for model in gpu cpu; do
    margs=""; [ $model = cpu ] && margs="--model $vdir/cpu.model"
    if ! "$DISTALC" "$top_srcdir/tests/e2e/programs/$prog" --auto --target cuda $margs --exe -o "$vdir/v" > "$vdir/log" 2>&1; then
      echo "FAIL $prog (cuda, $model model): does not build with run-time variants"; sed 's/^/    | /' "$vdir/log" | head -12
      status=1; continue
    fi
    nv=$("$DISTALC" "$top_srcdir/tests/e2e/programs/$prog" --auto --target cuda $margs --emit plan | sed -n 's/.*: \([0-9]*\) variants\{0,1\} kept by the search.*/\1/p')
    if [ -z "$nv" ] || [ "$nv" -lt 1 ]; then
      echo "FAIL $prog (cuda, $model model): --emit plan lists no run-time variants"; status=1; continue
    fi
    bad=0
    v=0
    while [ $v -lt "$nv" ]; do
      for np in 1 2 3 4; do
        DISTAL_VARIANT=$v timeout 120 "${MPIRUN:-mpirun}" -np $np --oversubscribe -x DISTAL_VARIANT "$vdir/v" "$@" --validate > "$vdir/log" 2>&1
        rc=$?
        if [ $rc -ne 0 ] || ! grep -q '^validate .* ok$' "$vdir/log" || grep '^validate' "$vdir/log" | grep -qv ' ok$'; then
          echo "FAIL $prog (cuda, $model model): variant $v at $np ranks"; sed 's/^/    | /' "$vdir/log" | tail -6
          bad=1
        fi
      done
      v=$((v + 1))
    done
    if [ $bad = 0 ]; then
      echo "PASS $prog (cuda, $model model): $nv run-time variants, each validated at 1 to 4 ranks"
    else
      status=1
    fi
  done
done
rm -rf "$vdir"
exit $status
