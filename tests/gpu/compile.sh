#!/bin/sh
# The GPU version of every example and end-to-end program builds on a machine without a
# GPU: distalc --target cuda --exe runs nvcc on the kernels (PREFIX.cu) and links against
# libdistal_cuda, cuBLAS and NCCL; the host code compiles with -Wall -Wextra -Werror.
# Skipped (exit 77) when configure found no CUDA toolkit.
set -u
: "${top_srcdir:?}" "${top_builddir:?}" "${DISTALC:?}"
. "$top_srcdir/tests/gpu/env.sh"
if [ ! -e "$top_builddir/libdistal_cuda.la" ]; then
  echo "SKIP: no CUDA toolkit was found by configure (libdistal_cuda is not built)"
  exit 77
fi
gpu_env_real
# one architecture is enough to prove that the kernels compile and link (and is faster)
DISTAL_CUDA_ARCH=${DISTAL_CUDA_ARCH:-"-gencode arch=compute_90,code=sm_90"}
export DISTAL_CUDA_ARCH
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# (not the programs with sparse tensors or precompute: distalc rejects them for
# --target cuda, which run_e2e.py --target cuda checks)
for f in "$top_srcdir"/examples/*.dtl "$top_srcdir"/examples/app/*.dtl "$top_srcdir"/tests/e2e/programs/*.dtl; do
  sed 's/#.*//; s#//.*##' "$f" | grep -qwE 'csr|csf|compressed|precompute' || echo "$f"
done > "$dir/list"
# two at a time: nvcc is slow and CI has two cores
one() {
  f=$1 d=$2
  b=$(basename "$f" .dtl)
  if DISTAL_EXTRA_CFLAGS="-Wall -Wextra -Werror" "$DISTALC" "$f" --target cuda --exe -o "$d/$b.gpu" > "$d/$b.log" 2>&1 &&
    [ -x "$d/$b.gpu" ] && nm "$d/$b.gpu" | grep -q "dtl_cu_attach"; then
    echo "PASS --target cuda: $b"
  else
    echo "FAIL --target cuda: $f"; sed 's/^/    | /' "$d/$b.log" | head -30
  fi
}
n=0
while read -r f; do
  n=$((n + 1))
  one "$f" "$dir" > "$dir/$n.out" &
  if [ $((n % 2)) -eq 0 ]; then wait; fi
done < "$dir/list"
wait
cat "$dir"/[0-9]*.out
fails=$(cat "$dir"/[0-9]*.out | grep -c '^FAIL')
echo "$((n - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
