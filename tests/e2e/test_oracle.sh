#!/bin/sh
# The NumPy oracle of the end-to-end tests, checked against a brute-force interpreter.
exec "${PYTHON:-python3}" "${top_srcdir:-.}/tests/e2e/test_oracle.py" "$@"
