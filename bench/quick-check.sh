#!/bin/sh
# bench/quick-check.sh -- the benchmark suite end to end in a few seconds, for make check:
# bench/run.sh --quick (small sizes, one iteration, a small volume study), then
# bench/sparse.sh --quick (PETSc's columns where it is installed), bench/scalapack.sh --quick
# (where libdistal_scalapack is built) and bench/roofline.sh --quick.  Asserts no
# timing: fails only if something fails to build or run.  Skips (77) without python3 or
# mpirun.  Results go to $top_builddir/bench-quick when make check runs it (the source
# tree may be read-only), else bench/results/quick; extra arguments go to run.sh.
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
command -v "$py" >/dev/null 2>&1 || { echo "quick-check: no $py: skipped"; exit 77; }
command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1 || { echo "quick-check: no mpirun: skipped"; exit 77; }
out=$here/results/quick
if [ -n "$top_builddir" ]; then
  out=$top_builddir/bench-quick
fi
"$here/run.sh" --quick --out "$out" "$@" || exit 1
sh "$here/sparse.sh" --quick --out "$out" || exit 1
sh "$here/scalapack.sh" --quick --out "$out" || exit 1
exec sh "$here/roofline.sh" --quick --out "$out"
