#!/bin/sh
# distalc --auto and --emit schedule (auto.py): the printed schedule compiles without --auto to
# the same plan, the choice is never predicted slower than the owner-computes default, it
# respects --mem-per-rank, and bad options are rejected.  The runs of --auto programs against
# the oracle are in cases.py (auto_kernels.dtl, auto_3d.dtl).
exec "${PYTHON:-python3}" "${top_srcdir:-.}/tests/e2e/auto.py" "$@"
