#!/bin/sh
# The plan's bytes per rank against the executables' --stats (plan_stats.py).
set -eu
: "${top_srcdir:?}" "${DISTALC:?}"
exec "${PYTHON:-python3}" "$top_srcdir/tests/e2e/plan_stats.py"
