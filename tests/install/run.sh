#!/bin/sh
# make install into a staged tree (DESTDIR: the files are not where the configured prefix
# says, so the CMake and Python packages must find the tree from their own location), then:
#  - examples/app built with CMake: find_package(distal) and distal_generate on summa.dtl
#    and matvec.dtl, run under mpirun at 1, 2 and 4 ranks (the application checks its results
#    and prints "app: ok");
#  - an edit of matvec.dtl regenerates that kernel, and only it, at the next build;
#  - tests/install/probe: the version check, the cuda component as this build has it, a bad
#    distal_generate call failing at configure time, a program distalc rejects failing the
#    build with distalc's message;
#  - the installed Python package, with nothing from the environment, runs SUMMA at 2 ranks.
set -eu
: "${top_srcdir:?}" "${top_builddir:?}" "${MPIRUN:=mpirun}" "${PYTHON:=python3}"
# sub-makes of their own, not of the make check that runs this test
unset MAKEFLAGS MFLAGS MAKELEVEL
unset DISTALC DISTAL_CFLAGS DISTAL_LIBS
if ! command -v cmake > /dev/null; then
  echo "FAIL: cmake not found (scripts/install-deps.sh)"
  exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
if ! make -C "$top_builddir" install DESTDIR="$dir/stage" > "$dir/install.log" 2>&1; then
  echo "FAIL make install DESTDIR=$dir/stage:"; tail -30 "$dir/install.log"; exit 1
fi
config=$(find "$dir/stage" -name distalConfig.cmake)
[ -n "$config" ] || { echo "FAIL: make install wrote no distalConfig.cmake"; exit 1; }
distal_dir=$(dirname "$config")
echo "PASS make install: ${config#"$dir/stage"}"

# ---- examples/app, from a copy so that its .dtl may be edited
mkdir -p "$dir/src/app"
cp "$top_srcdir/examples/app/CMakeLists.txt" "$top_srcdir/examples/app/app.c" "$top_srcdir/examples/app/matvec.dtl" "$dir/src/app/"
cp "$top_srcdir/examples/summa.dtl" "$dir/src/"
chmod u+w "$dir/src/app/matvec.dtl"
if cmake -S "$dir/src/app" -B "$dir/app" -Ddistal_DIR="$distal_dir" > "$dir/cmake.log" 2>&1 &&
  cmake --build "$dir/app" > "$dir/build.log" 2>&1; then
  echo "PASS examples/app configured and built with CMake"
else
  echo "FAIL examples/app with CMake:"; cat "$dir/cmake.log" "$dir/build.log" 2>/dev/null | tail -40; exit 1
fi
for np in 1 2 4; do
  if timeout 120 "$MPIRUN" -np $np --oversubscribe "$dir/app/app" 43 2 > "$dir/out.txt" 2>&1 && grep -q ': ok$' "$dir/out.txt"; then
    echo "PASS CMake-built app at $np ranks: $(cat "$dir/out.txt")"
  else
    echo "FAIL CMake-built app at $np ranks:"; cat "$dir/out.txt"; fail=1
  fi
done
gen="$dir/app/distal_generated/app"
sed 's/^param n = 512;/param n = 600;/' "$dir/src/app/matvec.dtl" > "$dir/matvec.dtl" && mv "$dir/matvec.dtl" "$dir/src/app/matvec.dtl"
cmake --build "$dir/app" > "$dir/rebuild.log" 2>&1 || { echo "FAIL rebuild:"; cat "$dir/rebuild.log"; fail=1; }
if grep -q 'distalc matvec.dtl' "$dir/rebuild.log" && ! grep -q 'distalc ../summa.dtl' "$dir/rebuild.log" &&
  grep -q '600' "$gen/matvec.c"; then
  echo "PASS an edit of matvec.dtl regenerates matvec.c, and not summa.c"
else
  echo "FAIL regeneration after an edit of matvec.dtl:"; cat "$dir/rebuild.log"; fail=1
fi

# ---- a C++ application: the generated header brings mpi.h (with Open MPI's C++ bindings),
# and distal::distal alone links what that needs
if cmake -S "$top_srcdir/tests/install/cxx" -B "$dir/cxx" -Ddistal_DIR="$distal_dir" \
     -DSUMMA_DTL="$top_srcdir/examples/summa.dtl" > "$dir/cxx.log" 2>&1 &&
   cmake --build "$dir/cxx" >> "$dir/cxx.log" 2>&1; then
  for np in 1 3 4; do
    if timeout 120 "$MPIRUN" -np $np --oversubscribe "$dir/cxx/cxxapp" > "$dir/cxx-run.txt" 2>&1 &&
       grep -q '^PASS' "$dir/cxx-run.txt"; then
      cat "$dir/cxx-run.txt"
    else
      echo "FAIL the C++ application at $np ranks:"; cat "$dir/cxx-run.txt"; fail=1
    fi
  done
else
  echo "FAIL a C++ application with distal::distal:"; tail -30 "$dir/cxx.log"; fail=1
fi

# ---- the probe: version, components, errors
if ls "$distal_dir"/../../libdistal_cuda.so > /dev/null 2>&1; then want_cuda="found=1 target=yes"; else want_cuda="found=0 target=no"; fi
if cmake -S "$top_srcdir/tests/install/probe" -B "$dir/probe" -Ddistal_DIR="$distal_dir" > "$dir/probe.log" 2>&1 &&
  grep -q 'probe: version [0-9]' "$dir/probe.log" && grep -q 'probe: distalc ok' "$dir/probe.log" &&
  grep -q 'probe: 99.0 found=0' "$dir/probe.log" && grep -q "probe: cuda $want_cuda" "$dir/probe.log"; then
  echo "PASS find_package(distal): version, distal::distalc, the cuda component ($want_cuda)"
else
  echo "FAIL probe configuration:"; cat "$dir/probe.log"; fail=1
fi
if cmake --build "$dir/probe" > "$dir/probe-build.log" 2>&1; then
  echo "FAIL a program distalc rejects built:"; cat "$dir/probe-build.log"; fail=1
elif grep -q "broken.dtl:3:[0-9]*: error: unknown machine 'Q'" "$dir/probe-build.log"; then
  echo "PASS a program distalc rejects fails the build with distalc's message"
else
  echo "FAIL the failed build lacks distalc's message:"; cat "$dir/probe-build.log"; fail=1
fi
if cmake -S "$top_srcdir/tests/install/probe" -B "$dir/probe" -Ddistal_DIR="$distal_dir" -DPROBE_BAD_CALL=ON > "$dir/probe-bad.log" 2>&1; then
  echo "FAIL distal_generate took --exe:"; cat "$dir/probe-bad.log"; fail=1
elif grep -q 'distal_generate: unexpected arguments: --exe' "$dir/probe-bad.log"; then
  echo "PASS a bad distal_generate call fails at configure time with a message"
else
  echo "FAIL the bad distal_generate call's message:"; cat "$dir/probe-bad.log"; fail=1
fi

# ---- the installed Python package
init=$(find "$dir/stage" -path '*/distal/_config.py')
if [ -z "$init" ]; then
  echo "FAIL: make install wrote no distal/_config.py"; fail=1
elif ! PYTHONPATH=$(dirname "$(dirname "$init")") DISTAL_CACHE_DIR="$dir/pycache" timeout 300 "$MPIRUN" -np 2 --oversubscribe \
  "$PYTHON" "$top_srcdir/tests/install/installed.py" "$dir/stage" "$top_srcdir/examples/summa.dtl" > "$dir/py.txt" 2>&1 ||
  ! grep -q '^PASS' "$dir/py.txt"; then
  echo "FAIL installed python package:"; cat "$dir/py.txt"; fail=1
else
  cat "$dir/py.txt"
fi
exit $fail
