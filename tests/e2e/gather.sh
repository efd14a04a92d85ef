#!/bin/sh
# The SPMD rewrite "gather": loops over stored coordinates fetch the rows they will read a few
# entries on; where it applies, and results validated with it running (gather.py).
exec "${PYTHON:-python3}" "${top_srcdir:-.}/tests/e2e/gather.py" "$@"
