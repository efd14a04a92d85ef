#!/bin/sh
# The bytes of halo exchanges (tests/e2e/halo_volume.py): an SpMV's --stats on matrices whose
# halo is known in closed form (tridiagonal, block-diagonal, 2-D Poisson) at 1 to 4 ranks.
exec "${PYTHON:-python3}" "${top_srcdir:-.}/tests/e2e/halo_volume.py" "$@"
