#!/bin/sh
# distalc --emit svg: every example at 1..8 ranks against --emit plan, the first step's
# messages of SUMMA and Cannon against the algorithms, and bad input (svg.py).
exec "${PYTHON:-python3}" "${top_srcdir:-.}/tests/e2e/svg.py" "$@"
