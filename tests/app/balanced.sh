#!/bin/sh
# Balanced partitions (balanced.py): a power-law matrix read into blocks of about equal stored
# entries by programs at 1..8 ranks, results against NumPy and entries per rank against their
# mean, located declaration errors, and the library API (balanced_lib.c).
: "${top_srcdir:?}" "${DISTALC:?}" "${PYTHON:=python3}"
exec "$PYTHON" "$top_srcdir/tests/app/balanced.py"
