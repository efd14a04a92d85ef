#!/bin/sh
# bench/sparse.sh -- sparse matrix-vector product: the generated SpMV of
# examples/app/spmv.dtl (A in row blocks, x gathered by every rank) at 1..P ranks against
# the textbook serial CSR loop on the same matrix (spmv_ref.c, one core), with the bytes
# each rank receives against the formula 8 (m - m/P) for gathering x.  No timing is
# asserted.  Writes bench/results/sparse.md (or --out DIR).
#
#   bench/sparse.sh [-n N] [-m M] [--density D] [--ranks "1 2"] [--iters K] [--out DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
n=1000000 m=1000000 density=0.00001 ranks="1 2" iters=10 out="$here/results"
while [ $# -gt 0 ]; do
  case $1 in
    -n) n=$2; shift 2 ;;
    -m) m=$2; shift 2 ;;
    --density) density=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "sparse.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
: "${DISTALC:=distalc}" "${MPICC:=mpicc}" "${MPIRUN:=mpirun}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
if [ -z "${DISTAL_CFLAGS:-}" ] && command -v pkg-config >/dev/null && pkg-config --exists distal; then
  DISTAL_CFLAGS=$(pkg-config --cflags distal) DISTAL_LIBS=$(pkg-config --libs distal)
fi
mkdir -p "$out/build-sparse"
b=$out/build-sparse
"$DISTALC" "$top/examples/app/spmv.dtl" --exe -o "$b/spmv"
# shellcheck disable=SC2086
$MPICC -std=c11 -O3 -march=native "$here/spmv_ref.c" ${DISTAL_CFLAGS:-} -o "$b/spmv_ref" ${DISTAL_LIBS:-}
ref=$("$MPIRUN" -np 1 "$b/spmv_ref" "$n" "$m" "$density" 1 "$iters")
field() { echo "$1" | sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p"; }
nnz=$(field "$ref" nnz) rt=$(field "$ref" time) rg=$(field "$ref" gflops) rb=$(field "$ref" gbs)
{
  echo "# Sparse matrix-vector product, $n x $m, density $density ($nnz stored entries)"
  echo
  echo "$(date -u +%Y-%m-%d), $(nproc) cores; best of $iters runs; GFLOP/s = 2 nnz / time."
  echo
  echo "| program | ranks | time (s) | GFLOP/s | / serial CSR | received per rank (bytes) | formula 8 (m - m/P) |"
  echo "|---|---|---|---|---|---|---|"
  echo "| serial CSR loop (spmv_ref.c) | 1 | $rt | $rg | 1.00 | - | - |"
  for p in $ranks; do
    res=$("$MPIRUN" -np "$p" --oversubscribe "$b/spmv" -n "$n" -m "$m" --density "$density" \
      --iters "$iters" --warmup 1 --json --stats)
    t=$(echo "$res" | grep '^{' | head -n 1 | sed -n 's/.*"min_s": \([^,}]*\).*/\1/p')
    recv=$(echo "$res" | awk '$1 ~ /^[0-9]+$/ {r[$1] += $6} END {for (k in r) if (r[k] > max) max = r[k]; print max + 0}')
    g=$(awk "BEGIN {printf \"%.3g\", 2 * $nnz / $t / 1e9}")
    r=$(awk "BEGIN {printf \"%.2f\", $rt / $t}")
    f=$(awk "BEGIN {printf \"%d\", 8 * ($m - int(($m + $p - 1) / $p))}")
    echo "| generated SpMV (examples/app/spmv.dtl) | $p | $t | $g | $r | $recv | $f |"
  done
} | tee "$out/sparse.md"
