#!/bin/sh
# The sparse example application (examples/app/app_sparse.c): entries held in the
# application's own layout go into a generated sparse matrix-vector product through
# spmv_A_import.  Built with the build tree's distalc and libdistal and run at several rank
# counts; then built with AddressSanitizer and UBSan (the runtime compiled in, so the sparse
# runtime runs under them too) with plans created and destroyed repeatedly: any sanitizer
# error, and any leak whose stack reaches our code, fails the test.
set -eu
: "${top_srcdir:?}" "${DISTALC:?}" "${MPIRUN:=mpirun}" "${MPICC:=mpicc}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
"$DISTALC" "$top_srcdir/examples/app/spmv.dtl" -o spmv
# shellcheck disable=SC2086
$MPICC -std=c11 -O2 -Wall -Wextra -Werror "$top_srcdir/examples/app/app_sparse.c" spmv.c -I. \
  $DISTAL_CFLAGS -o app_sparse $DISTAL_LIBS
fail=0
for np in 1 2 3 4 6 8; do
  if timeout 120 "$MPIRUN" -np $np --oversubscribe ./app_sparse 97 61 2 > out.txt 2>&1 && grep -q ': ok$' out.txt; then
    echo "PASS app_sparse at $np ranks: $(cat out.txt)"
  else
    echo "FAIL app_sparse at $np ranks:"; cat out.txt; fail=1
  fi
done
. "$top_srcdir/tests/app/sanitize.sh"
san_build app_san "$top_srcdir/examples/app/app_sparse.c" spmv.c
san_run 3 san.txt ./app_san 43 29 3
if ! grep -q ': ok$' san.txt; then
  echo "FAIL app_sparse under sanitizers:"; tail -40 san.txt; fail=1
else
  san_verdict san.txt 'spmv\.c\|app_sparse\.c' \
    "app_sparse under AddressSanitizer and UBSan, plans created and destroyed 3 times, no leak in our code" || fail=1
fi
# a generated executable with sparse operands and a sparse result (fills, .mtx/.tns input,
# fetches of stored entries, entries accumulated at their holders, --validate and --save)
# under the same sanitizers
cat > prog.dtl <<'DTL'
param n = 9;
param m = 7;
machine M = grid(gx, gy);
tensor C(n, m) @ M(xy -> xy);
tensor A(n, m) csr @ M(xy -> yx);
tensor T(n, m, 3) csf @ M(xyz -> x*);
tensor v(3) {compressed};
tensor S(n, m) {compressed, compressed} @ M(xy -> yx);
C(i, j) = A(i, j) * 2 + T(i, j, k) * v(k)
  .distribute({i, j}, {io, jo}, {ii, ji}, M);
S(i, j) += A(i, j) * C(i, j) - T(i, j, k)
  .distribute({i, j}, {io, jo}, {ii, ji}, M);
DTL
"$DISTALC" prog.dtl --main -o prog
san_build prog_san prog.c
printf '%%%%MatrixMarket matrix coordinate integer general\n9 7 3\n1 1 4\n9 7 -2\n5 3 1\n' > A.mtx
printf '# i j k value\n1 1 1 0.5\n9 7 3 -1.5\n4 2 2 2.25\n4 2 3 1\n' > T.tns
for args in "--validate" "--validate --density 1 --fill index" "--load A=A.mtx --load T=T.tns --validate --save C=C.npy --save A=A.npy --save S=S.npy --iters 2"; do
  # shellcheck disable=SC2086
  san_run 4 prog.txt ./prog_san $args
  if ! grep -q 'validate C: .* ok$' prog.txt || ! grep -q 'validate S: .* ok$' prog.txt; then
    echo "FAIL generated sparse program ($args) under sanitizers:"; tail -40 prog.txt; fail=1
  else
    san_verdict prog.txt 'prog\.c' "generated sparse program ($args) under AddressSanitizer and UBSan at 4 ranks" || fail=1
  fi
done
exit $fail
