#!/bin/sh
# bench/volume.sh -- communication volume of SUMMA, Cannon and Johnson (examples/) at 4, 8,
# 16 and 64 ranks (oversubscribed, n = 384): bytes received per rank from the generated
# programs' --stats, against the textbook volume and distalc --emit plan.  Writes
# bench/results/volume.md and volume.csv.
#
# Usage: bench/volume.sh [--volume-ranks 4,8,16,64,27] [--volume-n 384] [--out DIR]
# (the same environment as bench/run.sh: DISTALC, DISTAL_CFLAGS, DISTAL_LIBS or distalc on PATH)
exec "$(cd "$(dirname "$0")" && pwd)/run.sh" --volume-only "$@"
