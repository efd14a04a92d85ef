#!/bin/bash
# bench/gpu.sh -- the GPU matrix-multiply benchmark: generated SUMMA and COSMA-style
# schedules compiled with --target cuda (device tensors, cuBLAS leaves, NCCL broadcasts and
# reductions), one rank per GPU, against one cuBLAS dgemm of the same total size on one GPU.
#
#   bench/gpu.sh [-n 16384] [--build DIR]
#
# Needs a CUDA build of distal-mpi (configure found /usr/local/cuda) and at least one GPU.
# Writes bench/results/gpu.md and prints the ratios.  No timing is asserted anywhere.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
n=16384
build=${DISTAL_BUILD:-$top/build}
while [ $# -gt 0 ]; do
  case $1 in
  -n) n=$2; shift 2 ;;
  --build) build=$2; shift 2 ;;
  *) echo "usage: $0 [-n N] [--build DIR]" >&2; exit 2 ;;
  esac
done
ngpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ' || true)
if [ "${ngpus:-0}" -lt 1 ]; then
  echo "$0: no GPU on this machine" >&2
  exit 1
fi
[ -e "$build/libdistal_cuda.la" ] || { echo "$0: no libdistal_cuda in $build (configure with CUDA)" >&2; exit 1; }
cuda=${CUDA_HOME:-/usr/local/cuda}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export DISTAL_CFLAGS="-I$top/src/comm"
export DISTAL_LIBS="-L$build/.libs -Wl,-rpath,$build/.libs -ldistal -lopenblas -lm"
export DISTAL_CUDA_LIBS="-L$build/.libs -Wl,-rpath,$build/.libs -ldistal_cuda -L$cuda/lib64 -Wl,-rpath,$cuda/lib64 -lcudart -lcublas -lnccl -lhwloc -lstdc++"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cuda/bin/nvcc" -O3 -arch=native "$here/cublas_ref.cu" -o "$work/cublas_ref" -lcublas
"$build/distalc" "$top/examples/summa.dtl" --target cuda --exe -o "$work/summa"
"$build/distalc" "$top/examples/cosma.dtl" --target cuda --exe -o "$work/cosma"
gf() { sed -n 's/.*"gflops": \([0-9.e+-]*\).*/\1/p' | tail -1; }
ref=$("$work/cublas_ref" -n "$n" --iters 5 --warmup 1 | gf)
out="$here/results/gpu.md"
mkdir -p "$here/results"
{
  echo "# GPU matrix multiply, n = $n, double ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))"
  echo
  echo "| program | GPUs | GFLOP/s | / one cuBLAS dgemm |"
  echo "| --- | --- | --- | --- |"
  echo "| cuBLAS dgemm | 1 | $ref | 1.00 |"
  for p in $(seq 1 "$ngpus"); do
    for prog in summa cosma; do
      case $prog in
      summa) args="-n $n --chunk $((n / 4 > 256 ? n / 4 : 256))" ;;
      cosma) args="--ni $n --nj $n --nk $n --steps 1" ;;
      esac
      g=$(mpirun -np "$p" "$work/$prog" $args --iters 5 --warmup 1 --json | gf)
      echo "| $prog | $p | $g | $(awk -v a="$g" -v b="$ref" 'BEGIN { printf "%.2f", a / b }') |"
    done
  done
} | tee "$out"
