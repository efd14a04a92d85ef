/* distal_pdgemm.c -- distal_pdgemm (libdistal_scalapack) against ScaLAPACK's PDGEMM on the
 * same matrices: C = A B on n x n doubles in the 2-D block-cyclic layout (block size nb) of a
 * BLACS grid from MPI_Dims_create, the two interleaved, best-of-N timing of the slowest rank.
 * distal_pdgemm's time includes its layout moves (the imports of A and B and the export of C);
 * its plan is made in the warmup runs.
 *
 *   mpirun -np 2 ./distal_pdgemm -n 4096 --nb 64 --iters 3 --warmup 1
 *
 * Rank 0 prints one JSON line: min and median seconds of both, their GFLOP/s, the speed
 * ratio PDGEMM time / distal_pdgemm time, and the largest relative difference of the two
 * products (nonzero exit above 1e-10). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distal/runtime.h" /* dtl_blas_core */
#include "distal/scalapack.h"

#include "bench_util.h"

typedef void (*gemm_fn)(const char *, const char *, const int *, const int *, const int *, const double *,
                        const double *, const int *, const int *, const int *, const double *, const int *,
                        const int *, const int *, const double *, double *, const int *, const int *,
                        const int *);

/* One timed C = A B: the slowest rank's seconds. */
static double timed(gemm_fn f, int n, const double *A, const double *B, double *C, const int *desc) {
  const double one = 1, zero = 0;
  const int i1 = 1;
  MPI_Barrier(MPI_COMM_WORLD);
  double t = MPI_Wtime();
  f("N", "N", &n, &n, &n, &one, A, &i1, &i1, desc, B, &i1, &i1, desc, &zero, C, &i1, &i1, desc);
  t = MPI_Wtime() - t;
  double worst;
  MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

int main(int argc, char **argv) {
  dtl_blas_core(argv); /* OpenBLAS's kernels for this CPU, for both products (README) */
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int n = 1024, nb = 64, iters = 3, warmup = 1;
  for (int i = 1; i < argc; i++) {
    if (i + 1 < argc && !strcmp(argv[i], "-n")) n = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--nb")) nb = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--iters")) iters = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--warmup")) warmup = atoi(argv[++i]);
    else n = -1;
  }
  if (n <= 0 || nb <= 0 || iters <= 0 || iters > 100 || warmup < 0) {
    if (!rank) fprintf(stderr, "usage: %s [-n N] [--nb NB] [--iters I (<= 100)] [--warmup W]\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  int dims[2] = {0, 0}, ctxt, nprow, npcol, myrow, mycol, zero = 0;
  MPI_Dims_create(size, 2, dims);
  Cblacs_get(-1, 0, &ctxt);
  Cblacs_gridinit(&ctxt, "Row", dims[0], dims[1]);
  Cblacs_gridinfo(ctxt, &nprow, &npcol, &myrow, &mycol);
  int locr = numroc_(&n, &nb, &myrow, &zero, &nprow), locc = numroc_(&n, &nb, &mycol, &zero, &npcol);
  int lld = locr > 1 ? locr : 1;
  int desc[9] = {1, ctxt, n, n, nb, nb, 0, 0, lld};
  size_t local = (size_t)lld * (size_t)(locc > 0 ? locc : 1);
  double *A = malloc(local * sizeof *A), *B = malloc(local * sizeof *B);
  double *C1 = calloc(local, sizeof *C1), *C2 = calloc(local, sizeof *C2);
  if (!A || !B || !C1 || !C2) {
    fprintf(stderr, "out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  fill(A, local, 1 + (uint64_t)rank), fill(B, local, 1001 + (uint64_t)rank);
  double tp[100], td[100];
  for (int w = 0; w < warmup; w++) timed(pdgemm_, n, A, B, C1, desc), timed(distal_pdgemm, n, A, B, C2, desc);
  for (int it = 0; it < iters; it++) {
    tp[it] = timed(pdgemm_, n, A, B, C1, desc);
    td[it] = timed(distal_pdgemm, n, A, B, C2, desc);
  }
  double diff = 0, maxdiff;
  for (int j = 0; j < locc; j++)
    for (int i = 0; i < locr; i++) {
      double a = C1[i + (size_t)j * lld], b = C2[i + (size_t)j * lld], d = fabs(a - b) / (1 + fabs(a));
      if (!(d <= diff)) diff = d;
    }
  MPI_Reduce(&diff, &maxdiff, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  qsort(tp, (size_t)iters, sizeof *tp, cmp), qsort(td, (size_t)iters, sizeof *td, cmp);
  double flops = 2.0 * n * (double)n * n;
  if (!rank)
    printf("{\"program\": \"distal_pdgemm\", \"ranks\": %d, \"grid\": [%d, %d], \"n\": %d, \"nb\": %d, \"iters\": %d, "
           "\"pdgemm_min_s\": %.6f, \"pdgemm_median_s\": %.6f, \"distal_min_s\": %.6f, \"distal_median_s\": %.6f, "
           "\"pdgemm_gflops\": %.2f, \"distal_gflops\": %.2f, \"speed_ratio\": %.3f, \"max_rel_diff\": %.3g}\n",
           size, nprow, npcol, n, nb, iters, tp[0], tp[iters / 2], td[0], td[iters / 2], flops / tp[0] * 1e-9,
           flops / td[0] * 1e-9, tp[0] / td[0], maxdiff);
  int bad = !rank && !(maxdiff <= 1e-10);
  if (bad) fprintf(stderr, "distal_pdgemm: the products differ by %g\n", maxdiff);
  MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
  distal_pdgemm_free();
  Cblacs_gridexit(ctxt);
  free(A), free(B), free(C1), free(C2);
  MPI_Finalize();
  return bad;
}
