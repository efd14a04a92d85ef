#!/bin/sh
# The SPMD pass "threads": the loops it shares among a rank's OpenMP threads, where it must not
# apply, and the programs validated at 1..3 ranks x 2 threads (threads.py).
exec "${PYTHON:-python3}" "${top_srcdir:-.}/tests/e2e/threads.py" "$@"
