#!/bin/sh
# PREFIX_iterations through the library API (LANGUAGE.md section 7): the C program
# tests/e2e/iterations/iterations.c calls the library that distalc generates from
# tests/e2e/iterations/loops.dtl with several params and inputs, and compares the iteration
# count of each compute, and the results, with a serial C version of the same loops.
# Built with the build tree's distalc and libdistal, run at 1, 3 and 4 ranks.
set -eu
: "${top_srcdir:?}" "${DISTALC:?}" "${MPIRUN:=mpirun}" "${MPICC:=mpicc}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
src="$top_srcdir/tests/e2e/iterations"
"$DISTALC" "$src/loops.dtl" -o loops
# shellcheck disable=SC2086
$MPICC -std=c11 -O2 -Wall -Wextra -Werror "$src/iterations.c" loops.c -I. $DISTAL_CFLAGS -o iterations $DISTAL_LIBS
fail=0
for np in 1 3 4; do
  if timeout 120 "$MPIRUN" -np $np --oversubscribe ./iterations > out.txt 2>&1 && grep -q '^iterations: ok$' out.txt; then
    echo "PASS iterations at $np ranks"; sed 's/^/    /' out.txt
  else
    echo "FAIL iterations at $np ranks:"; sed 's/^/    | /' out.txt; fail=1
  fi
done
exit $fail
