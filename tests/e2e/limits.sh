#!/bin/sh
# No fixed limits in distalc: programs of hundreds of tensors, statements, schedule
# commands and params, 20+ nested loops, compiled, run at 1-4 ranks, validated and
# compared with the NumPy oracle; inputs beyond the documented limits are located errors
# (tests/e2e/limits.py).
exec "${PYTHON:-python3}" "${top_srcdir:-.}/tests/e2e/limits.py" "$@"
