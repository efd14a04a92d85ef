#!/bin/sh
# The generated leaf loops of unscheduled statements are vectorized: GCC's vectorization report
# on the generated C, every innermost loop of the statements' functions (vectorize.py).
if ! "${MPICC:-mpicc}" --version 2>/dev/null | grep -qi "gcc\|free software"; then
  echo "vectorize.sh: the C compiler is not GCC (its vectorization report is what is read)"; exit 77
fi
exec "${PYTHON:-python3}" "${top_srcdir:-.}/tests/e2e/vectorize.py" "$@"
