#!/bin/sh
# Every name the language accepts, as a tensor, a param and an index variable, and file stems
# equal to system header names: generated C compiles and runs, or distalc rejects the name at
# its declaration (names.py; --all for every header identifier instead of a sample).
exec "${PYTHON:-python3}" "${top_srcdir:-.}/tests/e2e/names.py" "$@"
