#!/bin/sh
# The Python package (python/distal) from the source tree, against the build tree's distalc
# and runtime (DISTALC, DISTAL_CFLAGS, DISTAL_LIBS): check.py under mpirun at 1, 2, 3 and 4
# ranks; the first run builds its five kernels into a cache that the others find.  Before
# that, api.py: distalc --emit api agrees with the header distalc writes for every example
# and end-to-end program.
set -eu
: "${top_srcdir:?}" "${DISTALC:?}" "${MPIRUN:=mpirun}" "${PYTHON:=python3}"
if ! "$PYTHON" -c 'import numpy, mpi4py' 2>/dev/null; then
  echo "FAIL: $PYTHON cannot import numpy and mpi4py (python3-numpy, python3-mpi4py: scripts/install-deps.sh)"
  exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/api" "$dir/work"
fail=0
# shellcheck disable=SC2046
"$PYTHON" "$top_srcdir/tests/python/api.py" "$DISTALC" "$dir/api" "$top_srcdir"/examples/*.dtl \
  "$top_srcdir"/examples/app/*.dtl "$top_srcdir"/tests/e2e/*/*.dtl || fail=1
PYTHONPATH="$top_srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
DISTAL_CACHE_DIR="$dir/cache"
PYTHONDONTWRITEBYTECODE=1 # no __pycache__ in the source tree
export PYTHONPATH DISTAL_CACHE_DIR PYTHONDONTWRITEBYTECODE
for np in 1 2 3 4; do
  if timeout 300 "$MPIRUN" -np $np --oversubscribe "$PYTHON" "$top_srcdir/tests/python/check.py" "$top_srcdir" \
    "$dir/work" > "$dir/out.txt" 2>&1 && grep -q '^PASS' "$dir/out.txt"; then
    cat "$dir/out.txt"
  else
    echo "FAIL python package at $np ranks:"; cat "$dir/out.txt"; fail=1
  fi
done
# one build per kernel, however many runs
n=$(find "$dir/cache" -name api.json | wc -l)
if [ "$n" -ne 7 ]; then echo "FAIL: the cache holds $n kernels, not 7"; fail=1; fi
exit $fail
