#!/bin/sh
# bench/sparse.sh -- sparse matrix-vector product: the generated SpMV of examples/app/spmv.dtl
# (A in CSR row blocks, x read through the halo exchange) against PETSc's MatMult
# (petsc_spmv.c: MATMPIAIJ on the same rows, matrix and vector) and, on one rank, against the
# textbook serial CSR loop (spmv_ref.c), on two matrices: the 2-D 5-point Poisson matrix of an
# M x M grid (read by both from the same .mtx file) and a random N x N matrix with about
# density x N entries per row (libdistal's deterministic fill, which both build).  Runs are
# interleaved over --rounds rounds and the best of each is kept; bytes per product come from
# --stats (ours) and PETSc's log counters.  Also: the time to load the Poisson .mtx file at
# each rank count (load_s of the generated executable's --json).  Every result is checked by
# the sums of y: ours and PETSc's against the serial loop's (random), PETSc's against ours
# (Poisson); our y is read with a python3 that has numpy (skipped without one).  Then the load
# balance on power-law matrices, with and without `balanced` (balance.py).
# No timing is asserted.  Writes bench/results/sparse.md (or --out DIR).
#
#   bench/sparse.sh [--poisson M] [-n N] [--density D] [--ranks "1 2"] [--iters K]
#                   [--rounds R] [--out DIR] [--quick]
#
# distalc as for bench/run.sh ($DISTALC with DISTAL_CFLAGS and DISTAL_LIBS, or distalc on PATH);
# PETSc through pkg-config (scripts/install-deps.sh --bench) or PETSC_FLAGS: without it, the
# PETSc columns are skipped.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
pm=1000 n=1000000 density=0.00001 ranks="1 2" iters=20 rounds=3 out="$here/results" quick=
while [ $# -gt 0 ]; do
  case $1 in
    --poisson) pm=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    --density) density=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --quick) pm=60 n=5000 density=0.002 iters=3 rounds=1 quick=--quick; shift ;;
    *) echo "sparse.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
: "${DISTALC:=distalc}" "${MPICC:=mpicc}" "${MPIRUN:=mpirun}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
if [ -z "${DISTAL_CFLAGS:-}" ] && command -v pkg-config >/dev/null && pkg-config --exists distal; then
  DISTAL_CFLAGS=$(pkg-config --cflags distal) DISTAL_LIBS=$(pkg-config --libs distal)
fi
if [ -z "${PETSC_FLAGS:-}" ] && command -v pkg-config >/dev/null && pkg-config --exists PETSc; then
  PETSC_FLAGS=$(pkg-config --cflags --libs PETSc)
fi
b=$out/build-sparse
mkdir -p "$b"
"$DISTALC" "$top/examples/app/spmv.dtl" --exe -o "$b/spmv"
# shellcheck disable=SC2086
$MPICC -std=c11 -O3 -march=native "$here/spmv_ref.c" ${DISTAL_CFLAGS:-} -o "$b/spmv_ref" ${DISTAL_LIBS:-}
petsc=
if [ -n "${PETSC_FLAGS:-}" ]; then
  # shellcheck disable=SC2086
  $MPICC -std=c11 -O3 "$here/petsc_spmv.c" -I"$here" ${DISTAL_CFLAGS:-} $PETSC_FLAGS -o "$b/petsc_spmv" ${DISTAL_LIBS:-} &&
    petsc=$b/petsc_spmv
fi
field() { echo "$1" | grep '^{' | head -n 1 | sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p"; }
min() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || (b != "" && b + 0 < a + 0)) print b; else print a }'; }
rm -f "$b/poisson.mtx"
pn=$((pm * pm))
if [ -n "$petsc" ]; then
  "$MPIRUN" -np 1 "$petsc" -poisson "$pm" -write_mtx "$b/poisson.mtx" -iters 1 >/dev/null
else
  # without PETSc, the same matrix from awk
  awk -v m="$pm" 'BEGIN { n = m * m; print "%%MatrixMarket matrix coordinate real general"; print n, n, 5 * n - 4 * m
    for (i = 0; i < n; i++) { gi = int(i / m); gj = i % m
      if (gi > 0) print i + 1, i - m + 1, "-1.0"; if (gj > 0) print i + 1, i, "-1.0"; print i + 1, i + 1, "4.0"
      if (gj < m - 1) print i + 1, i + 2, "-1.0"; if (gi < m - 1) print i + 1, i + m + 1, "-1.0" } }' > "$b/poisson.mtx"
fi
ours_args() { # matrix
  if [ "$1" = poisson ]; then echo "-n $pn -m $pn --load A=$b/poisson.mtx"; else echo "-n $n -m $n --density $density"; fi
}
fail=0
ref=$("$MPIRUN" -np 1 "$b/spmv_ref" "$n" "$n" "$density" 1 "$iters")
nnz=$(field "$ref" nnz) rt=$(field "$ref" time) rsum=$(field "$ref" checksum)
PY=${PYTHON:-python3}
"$PY" -c 'import numpy' 2>/dev/null || PY=
# close(a, b, scale): |a - b| <= 1e-9 (scale + 1)
close() { awk -v a="$1" -v b="$2" -v s="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-9 * (s + 1)) }'; }
# correctness, once per matrix and rank count: the sum of our y against the serial loop's
# (random) or PETSc's (Poisson), relative to the sum of |y|
for mat in poisson random; do
  for p in $ranks; do
    rm -f "$b/y.npy"
    # shellcheck disable=SC2046
    if ! "$MPIRUN" -np "$p" --oversubscribe "$b/spmv" $(ours_args $mat) --save "y=$b/y.npy" > "$b/check.txt" 2>&1; then
      echo "sparse.sh: the generated SpMV fails on $mat at $p ranks:" >&2
      cat "$b/check.txt" >&2
      fail=1
      continue
    fi
    [ -n "$PY" ] || continue
    sums=$("$PY" -c 'import sys, numpy; y = numpy.load(sys.argv[1]); print(repr(float(y.sum())), repr(float(abs(y).sum())))' "$b/y.npy")
    eval "y_s_${mat}_$p='$sums'"
    if [ "$mat" = random ] && ! close "${sums% *}" "$rsum" "${sums#* }"; then
      echo "sparse.sh: our y sums to ${sums% *}, the serial loop's to $rsum (random, $p ranks)" >&2
      fail=1
    fi
  done
done
# the timed runs, interleaved: best of the rounds
for r in $(seq 1 "$rounds"); do
  for mat in poisson random; do
    for p in $ranks; do
      # shellcheck disable=SC2046
      res=$("$MPIRUN" -np "$p" --oversubscribe "$b/spmv" $(ours_args $mat) --iters "$iters" --warmup 1 --json --stats)
      t=$(field "$res" min_s) l=$(field "$res" load_s)
      recv=$(echo "$res" | awk '$1 ~ /^[0-9]+$/ && $3 == "halo" {if ($4 > max) max = $4} END {print max + 0}')
      eval "o_t_${mat}_$p=\$(min \"\${o_t_${mat}_$p:-}\" \"$t\") o_b_${mat}_$p=$recv"
      [ "$mat" = poisson ] && eval "o_l_$p=\$(min \"\${o_l_$p:-}\" \"$l\")"
      if [ -n "$petsc" ]; then
        if [ "$mat" = poisson ]; then pa="-poisson $pm"; else pa="-random $n -density $density -seed 1"; fi
        # shellcheck disable=SC2086
        res=$("$MPIRUN" -np "$p" --oversubscribe "$petsc" $pa -iters "$iters")
        t=$(field "$res" min_s)
        eval "p_t_${mat}_$p=\$(min \"\${p_t_${mat}_$p:-}\" \"$t\") p_b_${mat}_$p=$(field "$res" bytes_max) p_s_${mat}_$p=$(field "$res" checksum)"
      fi
    done
  done
done
if [ -n "$petsc" ]; then
  for p in $ranks; do
    eval "s=\$p_s_random_$p ps=\$p_s_poisson_$p ys=\${y_s_poisson_$p:-} yr=\${y_s_random_$p:-}"
    if [ -n "$yr" ] && ! close "$s" "$rsum" "${yr#* }"; then
      echo "sparse.sh: PETSc's y sums to $s, the serial loop's to $rsum (random, $p ranks)" >&2
      fail=1
    fi
    if [ -n "$ys" ] && ! close "$ps" "${ys% *}" "${ys#* }"; then
      echo "sparse.sh: PETSc's y sums to $ps, ours to ${ys% *} (poisson, $p ranks)" >&2
      fail=1
    fi
  done
fi
{
  echo "# Sparse matrix-vector product: generated (examples/app/spmv.dtl) vs PETSc MatMult"
  echo
  echo "$(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores, one thread per rank; best of $rounds interleaved rounds of $iters products."
  echo "Poisson: the 5-point matrix of a $pm x $pm grid (n = $pn). Random: n = $n, density $density ($nnz entries)."
  echo "Speed ratio = PETSc time / our time (above 1: ours is faster). Bytes: the most any rank receives (ours, --stats)"
  echo "or sends (PETSc's counters) per product."
  echo
  echo "| matrix | ranks | ours (s) | PETSc (s) | speed ours / PETSc | bytes ours | bytes PETSc |"
  echo "|---|---|---|---|---|---|---|"
  for mat in poisson random; do
    for p in $ranks; do
      eval "ot=\$o_t_${mat}_$p ob=\$o_b_${mat}_$p pt=\${p_t_${mat}_$p:-} pb=\${p_b_${mat}_$p:-}"
      if [ -n "$pt" ]; then ratio=$(awk "BEGIN {printf \"%.2f\", $pt / $ot}"); else ratio=-; pt=-; pb=-; fi
      echo "| $mat | $p | $ot | $pt | $ratio | $ob | $pb |"
    done
  done
  echo
  eval "o1=\${o_t_random_1:-}"
  if [ -n "$o1" ]; then
    echo "Random matrix on one rank against the textbook serial CSR loop with int indices (spmv_ref.c): $rt s,"
    echo "speed ours / serial loop $(awk "BEGIN {printf \"%.2f\", $rt / $o1}")."
    echo
  fi
  echo "| loading poisson.mtx ($((5 * pn - 4 * pm)) entries) | seconds | / 1 rank |"
  echo "|---|---|---|"
  eval "l1=\${o_l_$(echo "$ranks" | awk '{print $1}'):-}"
  for p in $ranks; do
    eval "l=\$o_l_$p"
    echo "| $p ranks | $l | $(awk "BEGIN {printf \"%.2f\", $l / $l1}") |"
  done
} | tee "$out/sparse.md"
# the load balance on power-law matrices, appended to sparse.md (balance.py)
branks="1 2 4 8 16"
[ -z "$quick" ] || branks="2 4"
"${PYTHON:-python3}" "$here/balance.py" --out "$out" --ranks "$branks" $quick || fail=1
exit $fail
