#!/bin/sh
# The run-time choice of distalc --auto (auto_runtime.py): executables compiled once choose
# among the variants the search kept by their predicted time at the real rank count and
# params, validate at 1 to 8 ranks, every variant forced with DISTAL_VARIANT validates, and
# the generated cost formulas agree with distalc --emit plan's.
exec "${PYTHON:-python3}" "${top_srcdir:-.}/tests/e2e/auto_runtime.py" "$@"
