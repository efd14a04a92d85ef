#!/bin/sh
# bench/roofline.sh -- every leaf against the STREAM bandwidths and the dgemm rate of the same
# run, at 1 x 1, 2 x 1 and 1 x 2 ranks x threads (roofline.py).  No timing is asserted.
#   bench/roofline.sh [--iters I] [--out DIR] [--quick]
here=$(cd "$(dirname "$0")" && pwd)
for py in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null 2>&1; then exec "$py" "$here/roofline.py" "$@"; fi
done
echo "bench/roofline.sh: no python3 found (set PYTHON)" >&2
exit 1
