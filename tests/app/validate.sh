#!/bin/sh
# --validate of programs with loops on data that makes them amplify rounding: CG and BiCGSTAB
# on the default --fill random (a matrix neither symmetric positive definite nor diagonally
# dominant).  The serial reference runs twice, its sums in either order; where the two differ,
# the tolerance grows with their difference, and where they differ by a percent or more the
# result is rounding and is not compared.  Either way the run passes at every rank count, and
# says so (and where the reference breaks down and the run does not, says that); on inputs the solvers suit, the tolerance stays that of the iterations (the e2e
# suites' CG and BiCGSTAB runs).
set -eu
: "${top_srcdir:?}" "${DISTALC:?}" "${MPIRUN:=mpirun}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
"$DISTALC" "$top_srcdir/examples/cg.dtl" --exe -o cg
"$DISTALC" "$top_srcdir/examples/bicgstab.dtl" --exe -o bicgstab
fail=0
check() { # name np args...: exit 0, a validate line for x that is ok, and the reason where it grew
  name=$1 np=$2; shift 2
  if timeout 300 "$MPIRUN" -np "$np" --oversubscribe "./$name" "$@" --validate > out.txt 2>&1 &&
     grep -q '^validate x: max relative error .* ok$' out.txt; then
    echo "PASS $name $* at $np ranks: $(grep '^validate x' out.txt | tr '\n' ' ')"
  else
    echo "FAIL $name $* at $np ranks:"; sed 's/^/    | /' out.txt; fail=1
  fi
}
for np in 1 3 4; do
  check cg $np -n 200
  check cg $np -n 23
  check bicgstab $np -n 23 -maxit 5
done
# BiCGSTAB at n = 37 on the default fill: the serial reference breaks down (NaN after maxit
# iterations) in both orders of its sums, where the run's own order converges; that is
# said, and not compared (a loop that stops elsewhere with finite values); where the run
# breaks down too, their NaN agree
for np in 1 2 3; do
  check bicgstab $np -n 37
  its=$(sed -n 's/^validate iterations: \([0-9]*\) (serial reference: \([0-9]*\))$/\1 \2/p' out.txt)
  set -- $its
  if grep -q 'values of the serial result are not finite' out.txt && [ $# -eq 2 ] &&
     [ $(( $1 > $2 + 1 || $2 > $1 + 1 )) -eq 1 ] && ! grep -q 'the serial reference broke down after' out.txt; then
    echo "FAIL bicgstab -n 37 at $np ranks: a reference that broke down is not explained"; fail=1
  fi
done
# the reason is printed where the tolerance grew
if timeout 120 "$MPIRUN" -np 3 --oversubscribe ./cg -n 200 --validate 2>&1 | grep -q 'the serial reference amplifies rounding'; then
  echo "PASS cg -n 200: the reference's sensitivity is reported"
else
  echo "FAIL cg -n 200: no report of the reference's sensitivity"; fail=1
fi
exit $fail
