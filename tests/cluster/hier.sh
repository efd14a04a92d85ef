#!/bin/sh
# Hierarchical machines: the inner levels are the ranks of one node.  Nodes are simulated on
# one computer with DISTAL_RANKS_PER_NODE (consecutive blocks of ranks); without it the
# ranks that share memory form a node.  Each program runs at several node counts and node
# sizes against the serial reference (--validate); a machine whose inner grid does not
# match the ranks per node is a clear error.
set -u
: "${top_srcdir:?}" "${DISTALC:?}" "${MPIRUN:=mpirun}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fails=0 n=0
run() { # NAME RPN NP ARGS...: must validate
  name=$1 rpn=$2 np=$3
  shift 3
  n=$((n + 1))
  if [ "$rpn" = node ]; then
    timeout 120 "$MPIRUN" -np "$np" --oversubscribe "./$name" "$@" --validate > log.txt 2>&1
  else
    DISTAL_RANKS_PER_NODE=$rpn timeout 120 "$MPIRUN" -np "$np" --oversubscribe -x DISTAL_RANKS_PER_NODE \
      "./$name" "$@" --validate > log.txt 2>&1
  fi
  if [ $? -eq 0 ] && grep -q ' ok$' log.txt && ! grep -q MISMATCH log.txt; then
    echo "PASS $name: $np ranks, $rpn per node: $(grep "^$name:" log.txt | sed 's/ iters=.*//')"
  else
    echo "FAIL $name: $np ranks, $rpn per node"; sed 's/^/    | /' log.txt | head -12; fails=$((fails + 1))
  fi
}
"$DISTALC" "$top_srcdir/examples/hier_summa.dtl" --exe -o hier_summa || exit 1
"$DISTALC" "$top_srcdir/examples/hier_cannon.dtl" --exe -o hier_cannon || exit 1
"$DISTALC" "$top_srcdir/tests/cluster/rows.dtl" --exe -o rows || exit 1
for np in 1 2 3 4 6 8; do run hier_summa node $np -n 37 --chunk 6; done
for spec in "2 2" "2 4" "2 6" "2 8" "4 4" "4 8" "3 6" "1 4"; do
  set -- $spec
  run hier_summa "$1" "$2" -n 37 --chunk 6
  run rows "$1" "$2" -n 23 -m 19
done
for spec in "1 1" "2 2" "1 4" "2 8" "3 3"; do
  set -- $spec
  run hier_cannon "$1" "$2" -n 29
done
# an inner grid that does not match the ranks per node
n=$((n + 1))
cat > fixed.dtl <<'DTL'
param n = 8;
machine M = [grid(g), grid(2, 2)];
tensor A(n) @ M(x -> x; x -> x*);
A(i) = A(i) * 2
  .distribute(i);
DTL
"$DISTALC" fixed.dtl --exe -o fixed || exit 1
DISTAL_RANKS_PER_NODE=2 timeout 60 "$MPIRUN" -np 4 --oversubscribe -x DISTAL_RANKS_PER_NODE ./fixed > log.txt 2>&1
if [ $? -ne 0 ] && [ "$(grep -c '^\./fixed: .*need 4 ranks per node, but nodes have 2' log.txt)" = 1 ]; then
  echo "PASS mismatch: $(grep '^\./fixed:' log.txt)"
else
  echo "FAIL mismatch of inner grid and ranks per node"; sed 's/^/    | /' log.txt | head; fails=$((fails + 1))
fi
# ranks that disagree on DISTAL_RANKS_PER_NODE (set on some, or two values): one message on
# every rank's behalf, a nonzero exit, not a hang (some ranks split by shared memory while
# the others did not) or a crash in the split of the grid
for how in "unset" "values"; do
  n=$((n + 1))
  if [ $how = unset ]; then
    timeout 60 "$MPIRUN" -np 2 --oversubscribe -x DISTAL_RANKS_PER_NODE=2 ./fixed : -np 2 --oversubscribe ./fixed > log.txt 2>&1
  else
    timeout 60 "$MPIRUN" -np 2 --oversubscribe -x DISTAL_RANKS_PER_NODE=2 ./fixed : -np 2 --oversubscribe -x DISTAL_RANKS_PER_NODE=4 ./fixed > log.txt 2>&1
  fi
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(grep -c '^\./fixed: DISTAL_RANKS_PER_NODE differs between ranks' log.txt)" = 1 ]; then
    echo "PASS ranks per node differing ($how): $(grep '^\./fixed:' log.txt)"
  else
    echo "FAIL ranks per node differing ($how): rc $rc"; sed 's/^/    | /' log.txt | head; fails=$((fails + 1))
  fi
done
# hwloc binding: ranks that fit the cores get an even share of them; --verbose reports it
ncores=$(OMP_NUM_THREADS= nproc --all 2>/dev/null || echo 1)
n=$((n + 1))
np=$([ "$ncores" -ge 2 ] && echo 2 || echo 1)
timeout 60 "$MPIRUN" -np $np --oversubscribe ./hier_summa -n 16 --verbose > log.txt 2>&1
if [ "$(grep -c '^rank [0-9]* (.*): bound to cpus' log.txt)" = "$np" ]; then
  echo "PASS binding: $(grep '^rank 0 ' log.txt)"
else
  echo "FAIL binding ($np ranks, $ncores cores)"; sed 's/^/    | /' log.txt | head; fails=$((fails + 1))
fi
n=$((n + 1))
DISTAL_BIND=none timeout 60 "$MPIRUN" -np $np --oversubscribe -x DISTAL_BIND ./hier_summa -n 16 --verbose > log.txt 2>&1
if grep -q '^rank 0 (.*): not bound (DISTAL_BIND=none)' log.txt; then
  echo "PASS DISTAL_BIND=none"
else
  echo "FAIL DISTAL_BIND=none"; sed 's/^/    | /' log.txt | head; fails=$((fails + 1))
fi
echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
