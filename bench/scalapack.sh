#!/bin/sh
# bench/scalapack.sh -- distal_pdgemm (libdistal_scalapack) against ScaLAPACK's PDGEMM on the
# same BLACS grid and block-cyclic matrices (distal_pdgemm.c): C = A B, n x n doubles, the
# stock block size 64, 2 ranks x 1 thread by default.  distal_pdgemm's time includes moving
# A and B into the generated kernel's distribution and C back.  Prints the speed ratio
# (PDGEMM time / distal_pdgemm time; above 1: distal is faster) and writes
# bench/results/scalapack.md (or --out DIR).  No timing is asserted; the two products must
# agree.
#
#   bench/scalapack.sh [-n 4096] [--nb 64] [--ranks 2] [--iters 3] [--warmup 1] [--out DIR] [--quick]
#
# libdistal_scalapack from a build tree ($DISTAL_LIBS as for bench/run.sh, whose -L folder holds
# it) or installed; ScaLAPACK through BENCH_SCALAPACK_LIBS (default -lscalapack-openmpi).
# Skipped (exit 0) when libdistal_scalapack is not there.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
n=4096 nb=64 ranks=2 iters=3 warmup=1 out="$here/results"
while [ $# -gt 0 ]; do
  case $1 in
    -n) n=$2; shift 2 ;;
    --nb) nb=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --quick) n=300 iters=1 warmup=1; shift ;;
    *) echo "scalapack.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
: "${MPICC:=mpicc}" "${MPIRUN:=mpirun}" "${BENCH_SCALAPACK_LIBS:=-lscalapack-openmpi}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
if [ -z "${DISTAL_LIBS:-}" ] && command -v pkg-config >/dev/null && pkg-config --exists distal; then
  DISTAL_CFLAGS=$(pkg-config --cflags distal) DISTAL_LIBS=$(pkg-config --libs distal)
fi
b=$out/build-scalapack
mkdir -p "$b"
# shellcheck disable=SC2086
if ! $MPICC -std=c11 -O3 "$here/distal_pdgemm.c" -I"$top/src/scalapack" ${DISTAL_CFLAGS:-} -o "$b/distal_pdgemm" \
    -ldistal_scalapack ${DISTAL_LIBS:--ldistal} $BENCH_SCALAPACK_LIBS -lopenblas -lm 2> "$b/build.log"; then
  echo "scalapack.sh: distal_pdgemm.c does not build (libdistal_scalapack not built?): skipped"
  sed 's/^/    /' "$b/build.log"
  exit 0
fi
bind=
[ "$ranks" -le "$(nproc 2>/dev/null || echo 1)" ] && bind="--bind-to core"
# shellcheck disable=SC2086
line=$("$MPIRUN" --oversubscribe $bind -np "$ranks" "$b/distal_pdgemm" -n "$n" --nb "$nb" --iters "$iters" \
  --warmup "$warmup" | grep '^{')
echo "$line"
field() { echo "$line" | sed -n "s/.*\"$1\": \([^,}]*\).*/\1/p"; }
{
  echo "# distal_pdgemm vs ScaLAPACK PDGEMM"
  echo
  echo "$ranks ranks x 1 thread, grid $(echo "$line" | sed -n 's/.*"grid": \[\([0-9]*\), \([0-9]*\)\].*/\1 x \2/p'), n = $n, nb = $nb, best of $iters (after $warmup warmup), load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)"
  echo
  echo "| | min s | median s | GFLOP/s |"
  echo "|---|---|---|---|"
  echo "| PDGEMM | $(field pdgemm_min_s) | $(field pdgemm_median_s) | $(field pdgemm_gflops) |"
  echo "| distal_pdgemm (layout moves included) | $(field distal_min_s) | $(field distal_median_s) | $(field distal_gflops) |"
  echo
  echo "speed ratio distal_pdgemm / PDGEMM: $(field speed_ratio); products differ by at most $(field max_rel_diff) (relative)"
} > "$out/scalapack.md"
echo "speed distal_pdgemm / PDGEMM: $(field speed_ratio) (n = $n, nb = $nb, $ranks ranks); $out/scalapack.md"
