#!/bin/sh
# test_plan.sh -- the communication plan of the real distalc (--emit plan) against the
# textbook volumes of the paper's matrix-multiply algorithms: for each example and grid,
# the "bytes per rank" lines (rank 0, summed over the steps of the communicate loop) must
# give the elements rank 0 receives by the formulas below (what it needs, less what it
# holds; tests/e2e/plan_stats.sh checks the same count against the executables' --stats).
#
#   SUMMA on gx x gy:      B: n*n/gx less its own n/gx x n/gy, C: n*n/gy less n/gx x n/gy,
#                          in n/chunk steps; A stays (0)
#   Cannon on q x q:       B, C: q steps of (n/q)*(n/q), the first its own tile; A stays (0)
#   PUMMA on q x q:        B (broadcast), C (shift): the same
#   Johnson on q x q x q:  B, C: one broadcast of (n/q)^2 whose root rank 0 is (0);
#                          A: one reduction of (n/q)^2 (every member's partial sum)
#
# Environment: DISTALC (the build tree's distalc), top_srcdir (for examples/).
# DISTAL_UNIT_BUGS=1 also fails on the checks of known bugs.
set -u

: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${DISTALC:=${top_builddir:-.}/distalc}"
ex="$top_srcdir/examples"

if [ ! -x "$DISTALC" ]; then
  echo "test_plan.sh: no distalc at '$DISTALC' (set DISTALC)" >&2
  exit 99
fi

fails=0
checks=0
plan=""
label=""

fail() {
  echo "FAIL: $label: $*" >&2
  fails=$((fails + 1))
}

# run_plan EXAMPLE ARGS...: the plan of examples/EXAMPLE.dtl, kept in $plan.
run_plan() {
  file="$ex/$1.dtl"
  shift
  label="$(basename "$file") $*"
  if ! plan=$("$DISTALC" "$file" --emit plan "$@" 2>&1); then
    fail "distalc failed:"
    printf '%s\n' "$plan" >&2
    plan=""
    return 1
  fi
  return 0
}

# field KEY: "ELEMENTS STEPS ELEMSIZE BYTES PATTERN-LINE" of the comm whose plan line starts
# with KEY ("read B", "write A"); ELEMENTS 0 for "bytes per rank: 0".
field() {
  printf '%s\n' "$plan" | awk -v key="$1" '
    /^  (read|write) / {
      split($0, w, " "); cur = w[1] " " w[2]; line = $0; sub(/^  /, "", line); next
    }
    cur == key && /^    bytes per rank: 0( \(.*\))?$/ { print 0, 0, 0, 0, line; exit }
    cur == key && /^    bytes per rank \(rank 0\): / {
      # bytes per rank (rank 0): BYTES = STEPS steps, ELEMENTS elements of SIZE bytes
      print $10, $8, $13, $6, line; exit
    }'
}

# expect KEY ELEMENTS STEPS PATTERN WHY: ELEMENTS received over STEPS steps, the plan line
# containing PATTERN; WHY names the formula in the message.
expect() {
  key=$1 want=$2 wsteps=$3 pat=$4 why=$5
  checks=$((checks + 1))
  [ -n "$plan" ] || return
  f=$(field "$key")
  if [ -z "$f" ]; then
    fail "no bytes-per-rank line for '$key'"
    printf '%s\n' "$plan" >&2
    return
  fi
  set -- $f
  got=$1 steps=$2 size=$3 bytes=$4
  shift 4
  line="$*"
  case "$line" in
  *"$pat"*) ;;
  *) fail "$key: expected '$pat', plan says '$line'" ;;
  esac
  if [ "$got" != "$want" ]; then
    fail "$key: expected $want elements per rank ($why), plan says $got"
  fi
  if [ "$want" != 0 ] && [ "$steps" != "$wsteps" ]; then
    fail "$key: expected $wsteps steps, plan says $steps"
  fi
  if [ "$want" != 0 ] && [ "$bytes" != $((got * size)) ]; then
    fail "$key: $bytes bytes is not $got elements of $size bytes"
  fi
}

expect_text() {
  checks=$((checks + 1))
  [ -n "$plan" ] || return
  case "$plan" in
  *"$1"*) ;;
  *) fail "expected the plan to contain '$1'"; printf '%s\n' "$plan" >&2 ;;
  esac
}

# ---- SUMMA on gx x gy: B is broadcast along the grid rows, C along the columns
summa() { # RANKS N CHUNK GX GY
  p=$1 n=$2 c=$3 gx=$4 gy=$5
  run_plan summa --ranks "$p" --set n="$n" --set chunk="$c" --set gx="$gx" --set gy="$gy" || return
  expect_text "grid: $gx $gy ($p ranks)"
  expect "write A" 0 0 "local" "A stays"
  own=$(((n / gx) * (n / gy)))
  expect "read B" $((n * n / gx - own)) $((n / c)) "broadcast along grid dims {1}" "n*n/gx - (n/gx)(n/gy) = $n*$n/$gx - $own"
  expect "read C" $((n * n / gy - own)) $((n / c)) "broadcast along grid dims {0}" "n*n/gy - (n/gx)(n/gy) = $n*$n/$gy - $own"
}
summa 6 12 4 2 3
summa 8 16 4 4 2
summa 4 16 2 2 2
# the grid derived from the rank count
run_plan summa --ranks 4 --set n=16 --set chunk=8 && {
  expect_text "grid: 2 2 (4 ranks)"
  expect "read B" 64 2 "broadcast along grid dims {1}" "n*n/gx - (n/gx)(n/gy) = 16*16/2 - 64"
  expect "read C" 64 2 "broadcast along grid dims {0}" "n*n/gy - (n/gx)(n/gy) = 16*16/2 - 64"
}

# ---- Cannon on q x q: B and C shift, q steps of one (n/q) x (n/q) tile
cannon() { # Q N
  q=$1 n=$2
  run_plan cannon --ranks $((q * q)) --set n="$n" --set gx="$q" --set gy="$q" || return
  expect_text "grid: $q $q ($((q * q)) ranks)"
  expect "write A" 0 0 "local" "A stays"
  t=$(((n / q) * (n / q)))
  # k is divided by gx: C shifts on any grid, B when gx == gy (checked at run time)
  expect "read C" $(((q - 1) * t)) "$q" "shift along grid dim 0" "q - 1 of q steps of (n/q)^2 = $((q - 1))*$t"
  expect "read B" $(((q - 1) * t)) "$q" "exchange" "q - 1 of q steps of (n/q)^2 = $((q - 1))*$t"
  expect_text "when gx == gy at run time: shift along grid dim 1"
}
cannon 2 8
cannon 3 12
cannon 4 16

# ---- PUMMA on q x q: one operand broadcast, the other shifted, q steps of a tile
pumma() { # Q N
  q=$1 n=$2
  run_plan pumma --ranks $((q * q)) --set n="$n" --set gx="$q" --set gy="$q" || return
  t=$(((n / q) * (n / q)))
  expect "read B" $(((q - 1) * t)) "$q" "broadcast along grid dims {1}" "q - 1 of q steps of (n/q)^2"
  expect "read C" $(((q - 1) * t)) "$q" "shift along grid dim 0" "q - 1 of q steps of (n/q)^2"
}
pumma 2 8
pumma 3 9

# ---- Johnson on q x q x q: one broadcast of a tile of B and of C, one reduction into A
johnson() { # Q N
  q=$1 n=$2
  run_plan johnson --ranks $((q * q * q)) --set n="$n" || return
  expect_text "grid: $q $q $q ($((q * q * q)) ranks)"
  t=$(((n / q) * (n / q)))
  expect "read B" 0 1 "broadcast along grid dims {1}" "rank 0 is the root of its (n/q)^2"
  expect "read C" 0 1 "broadcast along grid dims {0}" "rank 0 is the root of its (n/q)^2"
  expect "write A" "$t" 1 "reduce along grid dims {2} to root coord2=0" "n^2/q^2 = $n^2/$q^2"
}
johnson 2 8
johnson 3 9
johnson 2 16

# grid(q, q, c): the repeated param takes the largest value whose square divides the ranks
if run_plan solomonik --ranks 8; then
  checks=$((checks + 1))
  case "$plan" in
  *"grid: 2 2 2 (8 ranks)"*) ;;
  *)
    fail "expected 'grid: 2 2 2 (8 ranks)' for grid(q, q, c)"
    printf '%s\n' "$plan" | head -1 >&2
    ;;
  esac
fi

# ---- --emit plan without --ranks: the smallest rank count the machine admits with every
# grid param distalc derives at least 2, named on the plan's first line
# no_ranks LABEL FILE RANKS GRID: the plan of FILE without --ranks is for RANKS ranks
no_ranks() {
  label="$1 without --ranks"
  checks=$((checks + 1))
  if ! plan=$("$DISTALC" "$2" --emit plan 2>&1); then
    fail "distalc failed:"
    printf '%s\n' "$plan" >&2
    return
  fi
  first=$(printf '%s\n' "$plan" | head -1)
  case "$first" in
  "# ranks: $3 ("*) ;;
  *) fail "expected a first line '# ranks: $3 (...)', got '$first'" ;;
  esac
  expect_text "grid: $4 ($3 ranks)"
}
no_ranks johnson.dtl "$ex/johnson.dtl" 8 "2 2 2"        # grid(q, q, q): a cube, not 4
no_ranks solomonik.dtl "$ex/solomonik.dtl" 8 "2 2 2"    # grid(q, q, c)
no_ranks summa.dtl "$ex/summa.dtl" 4 "2 2"              # grid(gx, gy): 4 as before
no_ranks hier_cannon.dtl "$ex/hier_cannon.dtl" 8 "2 2 2" # [grid(q, q), grid(p)]
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
machine_prog() { # FILE MACHINE MAPPING
  printf 'param n = 8;\nmachine M = %s;\ntensor A(n, n) @ M(%s);\ntensor B(n, n) @ M(%s);\nA(i, j) = B(i, j) + 1;\n' \
    "$2" "$3" "$3" > "$1"
}
machine_prog "$tmp/literal.dtl" "grid(2, 3)" "xy -> xy"
no_ranks "grid(2, 3)" "$tmp/literal.dtl" 6 "2 3"
machine_prog "$tmp/hier_literal.dtl" "[grid(3), grid(2)]" "xy -> x; xy -> y"
no_ranks "[grid(3), grid(2)]" "$tmp/hier_literal.dtl" 6 "3 2"
machine_prog "$tmp/hier_mixed.dtl" "[grid(g), grid(3)]" "xy -> x; xy -> y"
no_ranks "[grid(g), grid(3)]" "$tmp/hier_mixed.dtl" 6 "2 3"
machine_prog "$tmp/one_dim.dtl" "grid(5, g)" "xy -> xy"
no_ranks "grid(5, g)" "$tmp/one_dim.dtl" 10 "5 2"
# a repeated param takes every factor first, so no count gives r >= 2: the smallest at all
machine_prog "$tmp/two_roots.dtl" "grid(q, q, r, r)" "xy -> xy**"
no_ranks "grid(q, q, r, r)" "$tmp/two_roots.dtl" 1 "1 1 1 1"
# with --ranks: that count, and no such line
if run_plan johnson --ranks 27; then
  checks=$((checks + 1))
  case "$plan" in
  "# ranks"*) fail "a '# ranks' line although --ranks was given" ;;
  esac
  expect_text "grid: 3 3 3 (27 ranks)"
fi

if [ "$fails" -ne 0 ]; then
  echo "test_plan.sh: $fails of $checks checks failed" >&2
  exit 1
fi
echo "test_plan.sh: all $checks checks passed"
exit 0
