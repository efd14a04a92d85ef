#!/bin/sh
# spmd_golden.sh -- `distalc --emit spmd` of every example (CPU and, for the matrix
# multiplies, the CUDA target) and of every end-to-end program, against the expected text in
# tests/e2e/spmd/.  The SPMD program is what the printers print, and the rewrites applied or
# refused are listed with it: a change in lowering or in a rewrite shows here as a diff.
#
#   tests/e2e/spmd_golden.sh            compare (make check)
#   tests/e2e/spmd_golden.sh --update   rewrite the expected files after a deliberate change
#
# Environment: DISTALC (the build tree's distalc), top_srcdir.
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${DISTALC:=${top_builddir:-.}/distalc}"
gold="$top_srcdir/tests/e2e/spmd"
update=false
[ "${1:-}" = "--update" ] && update=true
if [ ! -x "$DISTALC" ]; then
  echo "spmd_golden.sh: no distalc at '$DISTALC' (set DISTALC)" >&2
  exit 99
fi
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
check() { # NAME FILE [ARGS...]
  name=$1
  file=$2
  shift 2
  if ! (cd "$(dirname "$file")" && "$DISTALC" "$(basename "$file")" --emit spmd "$@") >"$tmp/out" 2>"$tmp/err"; then
    echo "FAIL $name: distalc failed: $(head -3 "$tmp/err")"
    fail=$((fail + 1))
    return
  fi
  if $update; then
    cp "$tmp/out" "$gold/$name.txt"
    pass=$((pass + 1))
  elif [ ! -f "$gold/$name.txt" ]; then
    echo "FAIL $name: no expected file $gold/$name.txt (run with --update)"
    fail=$((fail + 1))
  elif diff -u "$gold/$name.txt" "$tmp/out" >"$tmp/diff"; then
    pass=$((pass + 1))
  else
    echo "FAIL $name: --emit spmd differs from $gold/$name.txt:"
    head -40 "$tmp/diff"
    fail=$((fail + 1))
  fi
}
for f in "$top_srcdir"/examples/*.dtl; do
  n=$(basename "$f" .dtl)
  check "example_$n" "$f"
done
for n in summa cannon pumma johnson cosma solomonik; do
  check "example_${n}_cuda" "$top_srcdir/examples/$n.dtl" --target cuda
done
for f in "$top_srcdir"/tests/e2e/programs/*.dtl; do
  n=$(basename "$f" .dtl)
  check "program_$n" "$f"
done
echo "spmd_golden.sh: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
