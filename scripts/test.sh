#!/bin/sh
# Install the dependencies, build, and run every test (make check, then make distcheck).
# This is the README's test command; .ci/run calls it.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
autoreconf -fi
rm -rf build && mkdir build && cd build
../configure
jobs=$(nproc 2>/dev/null || echo 2)
make -j"$jobs"
if ! make -j"$jobs" check; then
  for f in $(find . -name '*.log' -newer Makefile); do
    if grep -q '^FAIL\|^ERROR' "$f" 2>/dev/null; then
      echo "==== $f: its failed checks"; grep -A 12 '^FAIL\|^ERROR' "$f" | head -n 80
      echo "==== $f: its end"; tail -n 40 "$f"
    fi
  done
  exit 1
fi
head -n 12 test-suite.log
p=$(sed -n 's/^# PASS: *//p' test-suite.log)
f=$(sed -n 's/^# FAIL: *//p' test-suite.log)
e=$(sed -n 's/^# ERROR: *//p' test-suite.log)
echo "test programs: ${p:-0} passed, $((${f:-0} + ${e:-0})) failed"
