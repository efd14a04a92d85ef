#!/bin/sh
# The example application (examples/app): an MPI program holding row blocks that calls two
# generated kernels through their library API.  Built with the build tree's distalc and
# libdistal, run at several rank counts; then built with AddressSanitizer and UBSan (the
# runtime compiled in) with plans created and destroyed repeatedly: any sanitizer error,
# and any leak whose stack reaches our code, fails the test.
set -eu
: "${top_srcdir:?}" "${DISTALC:?}" "${MPIRUN:=mpirun}" "${MPICC:=mpicc}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
"$DISTALC" "$top_srcdir/examples/summa.dtl" -o summa
"$DISTALC" "$top_srcdir/examples/app/matvec.dtl" -o matvec
# shellcheck disable=SC2086
$MPICC -std=c11 -O2 -Wall -Wextra -Werror "$top_srcdir/examples/app/app.c" summa.c matvec.c -I. \
  $DISTAL_CFLAGS -o app $DISTAL_LIBS
fail=0
for np in 1 2 3 4 6; do
  if timeout 120 "$MPIRUN" -np $np --oversubscribe ./app 61 2 > out.txt 2>&1 && grep -q ': ok$' out.txt; then
    echo "PASS app at $np ranks: $(cat out.txt)"
  else
    echo "FAIL app at $np ranks:"; cat out.txt; fail=1
  fi
done
# sanitizers, with the runtime compiled into the program
. "$top_srcdir/tests/app/sanitize.sh"
san_build app_san "$top_srcdir/examples/app/app.c" summa.c matvec.c
san_run 3 san.txt ./app_san 37 5
if ! grep -q ': ok$' san.txt; then
  echo "FAIL app under sanitizers:"; tail -40 san.txt; fail=1
else
  san_verdict san.txt 'summa\.c\|matvec\.c\|app\.c' \
    "app under AddressSanitizer and UBSan, plans created and destroyed 5 times, no leak in our code" || fail=1
fi
# every leaf kernel on scaled products (the scaled copies of a factor, the sums of a scalar
# result in a temporary) as a generated executable under the same sanitizers, validated
"$DISTALC" "$top_srcdir/tests/e2e/programs/kernels_scaled.dtl" --main -o scaled
san_build scaled_san -fwrapv scaled.c
san_run 3 san2.txt ./scaled_san -n 7 -m 5 -p 4 -r 3 --validate
if [ "$(grep -c '^validate .* ok$' san2.txt)" -ne 11 ]; then
  echo "FAIL scaled kernels under sanitizers:"; tail -40 san2.txt; fail=1
else
  san_verdict san2.txt 'scaled\.c' \
    "the scaled leaf kernels under AddressSanitizer and UBSan at 3 ranks, 11 results validated, no leak in our code" || fail=1
fi
exit $fail
