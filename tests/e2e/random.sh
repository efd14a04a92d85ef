#!/bin/sh
# 200 random valid programs (tests/e2e/gen_random.py), half of them of several statements
# with temporaries and loops, each compiled as is and with --no-fuse, run and compared with
# the NumPy oracle.  A failure prints its seed: gen_random.py --seed S --count 1.
exec "${PYTHON:-python3}" "${top_srcdir:-.}/tests/e2e/gen_random.py" "$@"
