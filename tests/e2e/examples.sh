#!/bin/sh
# Every program in examples/, compiled with distalc and run under mpirun at several rank
# counts and sizes, compared with the NumPy oracle.  Fails (does not skip) without distalc.
exec "${PYTHON:-python3}" "${top_srcdir:-.}/tests/e2e/run_e2e.py" --suite examples "$@"
