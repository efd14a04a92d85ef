#!/bin/sh
# bench/auto.sh -- distalc --auto against the hand-written schedules of examples/ (auto.py):
# time at 2 ranks and communication volume at 4 to 64 ranks.  No timing is asserted.
#   bench/auto.sh [--ranks P] [--rounds R] [--iters I] [--out DIR] [--quick]
here=$(cd "$(dirname "$0")" && pwd)
for py in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null 2>&1; then exec "$py" "$here/auto.py" "$@"; fi
done
echo "bench/auto.sh: no python3 found (set PYTHON)" >&2
exit 1
