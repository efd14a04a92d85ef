#!/bin/sh
# PREFIX_T_import_scalapack and _export_scalapack (blockcyclic.c, over the kernel of
# blockcyclic.dtl) on BLACS grids 1x1, 1x2, 2x1, 2x2, 2x3 and 3x2, in row-major, column-major
# and reverse rank order, with ranks outside the grid at 5 and 8 ranks (oversubscribed).
set -u
: "${top_builddir:=.}" "${MPIRUN:=mpirun}"
bin="$top_builddir/tests/scalapack/blockcyclic"
[ -x "$bin" ] || { echo "blockcyclic.sh: $bin not built" >&2; exit 99; }
fail=0
for run in "1 1 1 R" "2 1 2 R" "2 2 1 C" "5 2 2 X" "6 2 3 R" "8 3 2 C"; do
  # shellcheck disable=SC2086
  set -- $run
  if timeout 120 "$MPIRUN" --oversubscribe -np "$1" "$bin" "$2" "$3" "$4" > out.$$ 2>&1 && grep -q ': ok ' out.$$; then
    echo "PASS blockcyclic at $1 ranks, grid $2x$3 $4"; sed 's/^/    /' out.$$
  else
    echo "FAIL blockcyclic at $1 ranks, grid $2x$3 $4:"; sed 's/^/    | /' out.$$; fail=1
  fi
done
rm -f out.$$
exit $fail
