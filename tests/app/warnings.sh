#!/bin/sh
# Generated code is clean C: every example and every end-to-end program compiles with
# -Wall -Wextra -Werror (the programs written for --auto also with --auto); and the --debug
# build, which verifies at run time that every received box is the box needed, runs the
# Figure 9 algorithms correctly.
set -u
: "${top_srcdir:?}" "${DISTALC:?}" "${MPIRUN:=mpirun}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fails=0 n=0
for f in "$top_srcdir"/examples/*.dtl "$top_srcdir"/examples/app/*.dtl "$top_srcdir"/tests/e2e/programs/*.dtl; do
  n=$((n + 1))
  if DISTAL_EXTRA_CFLAGS="-Wall -Wextra -Werror" "$DISTALC" "$f" --exe -o prog > log.txt 2>&1; then
    echo "PASS -Wall -Wextra -Werror: $(basename "$f")"
  else
    echo "FAIL -Wall -Wextra -Werror: $f"; sed 's/^/    | /' log.txt | head -20; fails=$((fails + 1))
  fi
done
# --auto compiled once (no --ranks): the executables carry the search's variants and their cost
# functions, on the programs written for it and on a grid whose shape and layouts are free
printf 'param n = 8;\nmachine M = grid(gx, gy, gz);\ntensor a(n) @ M;\ntensor b(n) @ M;\na(i) = b(i) * 2;\n' > free3.dtl
for f in "$top_srcdir"/tests/e2e/programs/auto_*.dtl free3.dtl; do
  n=$((n + 1))
  if DISTAL_EXTRA_CFLAGS="-Wall -Wextra -Werror" "$DISTALC" "$f" --auto --exe -o prog > log.txt 2>&1; then
    echo "PASS -Wall -Wextra -Werror --auto: $(basename "$f")"
  else
    echo "FAIL -Wall -Wextra -Werror --auto: $f"; sed 's/^/    | /' log.txt | head -20; fails=$((fails + 1))
  fi
done
# The same C under clang where there is one (compiled only; -Wno-pass-failed: clang reports
# the `omp simd` loops it leaves scalar, which is not a defect of the C)
if command -v clang > /dev/null 2>&1 && echo 'int main(void) { return 0; }' > c.c &&
  OMPI_CC=clang "${MPICC:-mpicc}" -fopenmp -c c.c -o c.o > /dev/null 2>&1; then
  for f in "$top_srcdir"/examples/*.dtl "$top_srcdir"/examples/app/*.dtl "$top_srcdir"/tests/e2e/programs/*.dtl; do
    "$DISTALC" "$f" -o cprog > log.txt 2>&1 || continue # the gcc loop above reports those
    n=$((n + 1))
    # shellcheck disable=SC2086
    if OMPI_CC=clang "${MPICC:-mpicc}" -std=c11 -O1 -fopenmp -Wall -Wextra -Werror -Wno-pass-failed ${DISTAL_CFLAGS:-} -I. \
      -c cprog.c -o cprog.o > log.txt 2>&1; then
      echo "PASS clang -Wall -Wextra -Werror: $(basename "$f")"
    else
      echo "FAIL clang -Wall -Wextra -Werror: $f"; sed 's/^/    | /' log.txt | head -20; fails=$((fails + 1))
    fi
  done
else
  echo "clang with OpenMP not found: the clang check is skipped"
fi
args() {
  case $1 in
  summa) echo "-n 45 --chunk 7" ;;
  cosma) echo "--ni 45 --nj 38 --nk 29" ;;
  *) echo "-n 45" ;;
  esac
}
for ex in summa cannon pumma johnson solomonik cosma; do
  for np in 4 8; do
    [ $ex = johnson ] && [ $np = 4 ] && continue
    n=$((n + 1))
    "$DISTALC" "$top_srcdir/examples/$ex.dtl" --debug --exe -o dbg > log.txt 2>&1 &&
      timeout 120 "$MPIRUN" -np $np --oversubscribe ./dbg $(args $ex) --validate > log.txt 2>&1
    if [ $? -eq 0 ] && grep -q 'validate A: .* ok' log.txt; then
      echo "PASS --debug $ex at $np ranks"
    else
      echo "FAIL --debug $ex at $np ranks"; sed 's/^/    | /' log.txt | head -20; fails=$((fails + 1))
    fi
  done
done
# OpenMP threads inside ranks (parallelize), 1 and 2 ranks x 2 threads
"$DISTALC" "$top_srcdir/tests/app/threads.dtl" --exe -o threads > log.txt 2>&1 || { cat log.txt; exit 1; }
for np in 1 2; do
  n=$((n + 1))
  OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 timeout 120 "$MPIRUN" -np $np --oversubscribe \
    -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS ./threads --validate > log.txt 2>&1
  if [ $? -eq 0 ] && [ "$(grep -c 'validate .* ok' log.txt)" = 2 ]; then
    echo "PASS OpenMP: $np ranks x 2 threads"
  else
    echo "FAIL OpenMP: $np ranks x 2 threads"; sed 's/^/    | /' log.txt | head; fails=$((fails + 1))
  fi
done
echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
