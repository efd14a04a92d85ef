#!/bin/sh
# bench/run.sh -- the distal-mpi benchmark suite, one command.
#
# Builds and runs, side by side on the same ranks and threads, in one invocation:
#   (a) OpenBLAS dgemm, one process (bench/dgemm_ref.c): 1 thread, ranks x threads
#       threads, and the ceiling ranks x threads x the 1-thread rate;
#   (b) ScaLAPACK PDGEMM (bench/pdgemm.c), block sizes 32, 64 (stock) and 128, 256, 512;
#   (c) the six Figure 9 schedules of examples/ (SUMMA, Cannon, PUMMA, Johnson,
#       Solomonik 2.5D, COSMA), compiled with distalc --exe;
#   (d) TTV and inner product against a STREAM triad measured in the same run
#       (bench/stream.c, per rank under mpirun);
#   (e) TTM against the dgemm rate, MTTKRP against a serial Khatri-Rao + dgemm
#       reference (bench/mttkrp_ref.c); (d) and (e) also with the leaf kernels
#       substituted (bench/dtl/*_kernel.dtl);
# plus the distalc compile time of every example.  Best-of-N timing: every executable
# runs --iters 3 --warmup 1 (its --json summary is parsed), and the whole set is repeated
# --rounds 2 times, interleaved, keeping each measurement's best run.
# Writes results.md, results.csv, gemm.png (gnuplot) and log.txt to bench/results/ and
# prints the ratios ours / reference.  No timing is asserted: the exit status is nonzero
# only if something fails to build or run.
#
# Usage:
#   bench/run.sh                      # 2 ranks x 1 thread, n = 4096 (a few minutes)
#   bench/run.sh --ranks 4 --threads 1 -n 8192 --iters 3
#   bench/run.sh --quick              # small sizes, 1 iteration, plus a small volume study
#   bench/run.sh --volume             # also the communication-volume study (volume.md)
#   bench/run.sh --volume-only        # only that (= bench/volume.sh)
#   bench/run.sh --help               # every option (--nb, --stream-n, --out, --distalc, ...)
#
# distalc: $DISTALC if set (make check exports it, with DISTAL_CFLAGS and DISTAL_LIBS
# for the build tree), else distalc on PATH (after make install), or --distalc PATH.
# Also honoured: MPICC, MPIRUN, PYTHON, BENCH_BLAS_LIBS (default -lopenblas),
# BENCH_SCALAPACK_LIBS (default -lscalapack-openmpi).
here=$(cd "$(dirname "$0")" && pwd)
: "${OMPI_ALLOW_RUN_AS_ROOT:=1}" "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:=1}"
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1; then
  echo "bench/run.sh: $py not found (set PYTHON)" >&2
  exit 1
fi
exec "$py" "$here/bench.py" "$@"
