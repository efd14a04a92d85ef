#!/bin/sh
# Integer overflow wraps in generated code, in statements and loop conditions (wrap.py).
set -eu
: "${top_srcdir:?}" "${DISTALC:?}"
exec "${PYTHON:-python3}" "$top_srcdir/tests/e2e/wrap.py"
