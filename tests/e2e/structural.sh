#!/bin/sh
# Structural zeros of sparse operands: results against NumPy with the operands' patterns, at
# 1 to 4 ranks, with zero divisors, infinities and NaN in the dense operands (structural.py).
set -eu
: "${top_srcdir:?}" "${DISTALC:?}"
exec "${PYTHON:-python3}" "$top_srcdir/tests/e2e/structural.py"
