#!/bin/sh
# The SPMD rewrites of loops over stored coordinates: "gather" (the rows read a few entries on
# fetched ahead) and "sums" (a register sum in four registers); where they apply, and results
# validated with their branches running (sparse_leaf.py).
exec "${PYTHON:-python3}" "${top_srcdir:-.}/tests/e2e/sparse_leaf.py" "$@"
