#!/bin/sh
# The programs of tests/e2e/programs/, compiled with distalc and run under mpirun,
# compared with the NumPy oracle; plus runs that must fail cleanly and --fill checks.
exec "${PYTHON:-python3}" "${top_srcdir:-.}/tests/e2e/run_e2e.py" --suite programs "$@"
