#!/bin/sh
# grids.sh -- distalc --emit plan --ranks P plans for the grid that the executable forms at
# P ranks.  Every program in examples/ runs at 1, 2, 3, 4, 6 and 8 ranks (oversubscribed):
# the "grid:" line of its plan must equal the "grid" of the executable's --json summary, and
# where P ranks cannot form the machine both must fail with the same message.  Hierarchical
# machines run on one node (plain mpirun, distalc's default) and in simulated nodes of K
# ranks (DISTAL_RANKS_PER_NODE=K for the executable, --ranks-per-node K for distalc); a
# machine whose inner levels are literals runs in nodes of their size, which distalc assumes.
set -u
: "${top_srcdir:?}" "${DISTALC:?}" "${MPIRUN:=mpirun}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
# the grid is what is tested, not speed: build the executables without optimization
DISTAL_EXTRA_CFLAGS="${DISTAL_EXTRA_CFLAGS:-} -O0"
export DISTAL_EXTRA_CFLAGS

# sizes NAME: small values for the params of NAME.dtl (NAME=VALUE ...); a program not
# listed runs at its defaults
sizes() {
  case $1 in
  cannon | pumma | johnson | hier_cannon) echo "n=12" ;;
  summa | hier_summa) echo "n=12 chunk=4" ;;
  solomonik) echo "n=12 r=1" ;;
  cosma) echo "ni=12 nj=8 nk=16 steps=2" ;;
  ttv) echo "n=8 m=6 p=4" ;;
  innerprod) echo "n=6 m=4 p=8" ;;
  ttm) echo "n=8 m=4 p=6 q=5" ;;
  mttkrp) echo "n=8 m=6 p=4 r=5" ;;
  rows) echo "n=23 m=19" ;;
  blackscholes) echo "n=20" ;;
  jacobi | cg | bicgstab) echo "n=12 maxit=3" ;;
  esac
}

pass=0 fails=0
ok() { pass=$((pass + 1)); echo "PASS $*"; }
bad() { fails=$((fails + 1)); echo "FAIL $*"; }

# check NAME SOURCE P [PLAN_K [RUN_K]]: the plan of SOURCE for P ranks (with
# --ranks-per-node PLAN_K unless it is - or missing) against the executable ./NAME at P
# ranks (with DISTAL_RANKS_PER_NODE=RUN_K, by default PLAN_K).
check() {
  name=$1 src=$2 np=$3 pk=${4:--}
  rk=${5:-$pk}
  sets="" args="" popt=""
  for kv in $(sizes "$name"); do
    sets="$sets --set $kv"
    args="$args --${kv%%=*} ${kv#*=}"
  done
  [ "$pk" = - ] || popt="--ranks-per-node $pk"
  # shellcheck disable=SC2086
  plan=$("$DISTALC" "$src" --emit plan --ranks "$np" $popt $sets 2>&1)
  prc=$?
  if [ "$rk" = - ]; then
    # shellcheck disable=SC2086
    out=$(timeout 120 "$MPIRUN" -np "$np" --oversubscribe "./$name" $args --json 2>&1)
  else
    # shellcheck disable=SC2086
    out=$(DISTAL_RANKS_PER_NODE=$rk timeout 120 "$MPIRUN" -np "$np" --oversubscribe -x DISTAL_RANKS_PER_NODE \
      "./$name" $args --json 2>&1)
  fi
  erc=$?
  label="$name at $np ranks"
  [ "$rk" = - ] || label="$label, nodes of $rk"
  [ "$pk" = "$rk" ] || label="$label (distalc: $pk)"
  if [ $prc -eq 0 ]; then
    want=$(printf '%s\n' "$plan" | sed -n "s/^grid: \(.*\) ($np ranks)\$/\1/p")
    got=$(printf '%s\n' "$out" | sed -n 's/^{"program": .*"grid": \[\([0-9, ]*\)\].*/\1/p' | tr -d ,)
    if [ $erc -eq 0 ] && [ -n "$want" ] && [ "$want" = "$got" ]; then
      ok "$label: grid $got"
      return
    fi
  else
    want=$(printf '%s\n' "$plan" | sed -n 's/^distalc: //p')
    got=$(printf '%s\n' "$out" | sed -n "s|^\./$name: ||p")
    if [ $erc -ne 0 ] && [ -n "$want" ] && [ "$want" = "$got" ]; then
      ok "$label: both say '$got'"
      return
    fi
  fi
  bad "$label: distalc (exit $prc) and the executable (exit $erc) disagree"
  printf '%s\n' "$plan" | head -3 | sed 's/^/    distalc | /'
  printf '%s\n' "$out" | head -6 | sed "s|^|    ./$name \| |"
}

# each_count NAME SOURCE: the checks at 1 to 8 ranks, all on one node
each_count() {
  for np in 1 2 3 4 6 8; do check "$1" "$2" $np; done
}

# in_nodes NAME SOURCE "K P" ...: the checks at P ranks in nodes of K
in_nodes() {
  name=$1 src=$2
  shift 2
  for spec in "$@"; do check "$name" "$src" "${spec#* }" "${spec% *}"; done
}

# expect_err LABEL MESSAGE ARGS...: distalc ARGS fails, saying MESSAGE
expect_err() {
  label=$1 msg=$2
  shift 2
  if out=$("$DISTALC" "$@" 2>&1); then
    bad "$label: distalc succeeded"
  elif printf '%s\n' "$out" | grep -qF -- "$msg"; then
    ok "$label: $(printf '%s\n' "$out" | head -1)"
  else
    bad "$label: expected '$msg', got:"
    printf '%s\n' "$out" | sed 's/^/    | /'
  fi
}

# expect_first LABEL START ARGS...: the first line of distalc ARGS starts with START
expect_first() {
  label=$1 start=$2
  shift 2
  first=$("$DISTALC" "$@" 2>&1 | head -1)
  case "$first" in
  "$start"*) ok "$label: $first" ;;
  *) bad "$label: expected a line starting '$start', got '$first'" ;;
  esac
}

# a machine whose inner level is a literal: nodes of 3 ranks
cat > lit3.dtl <<'DTL'
param n = 30;
machine M = [grid(g), grid(3)];
tensor x(n) @ M(i -> i; i -> i);
tensor y(n) @ M(i -> i; i -> i);
y(i) = x(i) + 1
  .distribute(i);
DTL
rows="$top_srcdir/tests/cluster/rows.dtl"
hs="$top_srcdir/examples/hier_summa.dtl"
hc="$top_srcdir/examples/hier_cannon.dtl"
for src in "$top_srcdir"/examples/*.dtl "$rows" lit3.dtl; do
  name=$(basename "$src" .dtl)
  if ! "$DISTALC" "$src" --exe -o "$name" > build.txt 2>&1; then
    bad "$name: distalc --exe"
    sed 's/^/    | /' build.txt | head
  fi
done
for src in "$top_srcdir"/examples/*.dtl; do
  [ -x "./$(basename "$src" .dtl)" ] && each_count "$(basename "$src" .dtl)" "$src"
done
# hierarchical machines in nodes of K ranks: level 0 counts the nodes
in_nodes hier_summa "$hs" "2 4" "2 8" "4 8" "3 6" "1 3"
in_nodes hier_cannon "$hc" "2 8" "1 4" "4 8" "2 4"
[ -x ./rows ] && in_nodes rows "$rows" "2 4" "2 6" "3 6" "1 2"
# inner levels of literal dims: distalc assumes nodes of their size (3), as the executable
# needs them; a node size that does not fit is the same error from both
if [ -x ./lit3 ]; then
  check lit3 lit3.dtl 3 - 3
  check lit3 lit3.dtl 6 - 3
  check lit3 lit3.dtl 6 2
fi

# what distalc alone says about node sizes
expect_err "a node size that does not divide the ranks" \
  "8 ranks do not split into nodes of 3 ranks (--ranks-per-node)" "$hc" --emit plan --ranks 8 --ranks-per-node 3
expect_err "the default node size of literal inner levels" \
  "4 ranks do not split into nodes of 3 ranks, which the inner levels of the machine need" \
  lit3.dtl --emit plan --ranks 4
expect_err "--ranks-per-node 0" "--ranks-per-node needs a positive integer" "$hc" --emit plan --ranks 8 \
  --ranks-per-node 0
# without --ranks: the node size is chosen with the count and named on the first line
expect_first "hier_cannon without --ranks" "# ranks: 8 (4 nodes of 2 ranks: " "$hc" --emit plan
expect_first "hier_cannon without --ranks, nodes of 4" "# ranks: 16 (4 nodes of 4 ranks: " "$hc" --emit plan \
  --ranks-per-node 4
echo "$pass passed, $fails failed"
[ "$fails" -eq 0 ] && [ "$pass" -gt 0 ]
