#!/bin/sh
# Sparse files through a generated executable (sparse_io.py): --save T=F.mtx / F.tns at
# 1..8 ranks read back and compared with NumPy, the formats --save rejects before the run,
# every kind of malformed .mtx / .tns line failing with FILE:LINE: error: on every rank, and
# files split among 1..8 readers, which must read and fail as one reader does.
: "${top_srcdir:?}" "${DISTALC:?}" "${PYTHON:=python3}"
exec "$PYTHON" "$top_srcdir/tests/app/sparse_io.py"
