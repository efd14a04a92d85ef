#!/bin/sh
# Halo exchanges of an SpMV over CSR row blocks (tests/e2e/halo/spmv.dtl):
#  - halo_volume.py: --stats per rank on matrices whose halo is known in closed form
#    (tridiagonal, block-diagonal, 2-D Poisson) at 1 to 4 ranks, results against NumPy;
#  - halo/structure.c: the cache through the library API (a piece's columns changed in
#    place and spmv_structure_changed on one rank; a rebuilt piece) and plan_create's message
#    for a param without a default left unset, 0 or negative, at 1, 3 and 4 ranks.
set -eu
: "${top_srcdir:?}" "${DISTALC:?}" "${MPIRUN:=mpirun}" "${MPICC:=mpicc}"
fail=0
"${PYTHON:-python3}" "$top_srcdir/tests/e2e/halo_volume.py" || fail=1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
"$DISTALC" "$top_srcdir/tests/e2e/halo/spmv.dtl" -o spmv
# shellcheck disable=SC2086
$MPICC -std=c11 -O2 -Wall -Wextra -Werror "$top_srcdir/tests/e2e/halo/structure.c" spmv.c -I. $DISTAL_CFLAGS -o structure $DISTAL_LIBS -lm
for np in 1 3 4; do
  if timeout 120 "$MPIRUN" -np $np --oversubscribe ./structure > out.txt 2>&1 && grep -q '^structure: ok$' out.txt; then
    echo "PASS structure at $np ranks"
  else
    echo "FAIL structure at $np ranks:"; sed 's/^/    | /' out.txt; fail=1
  fi
done
exit $fail
