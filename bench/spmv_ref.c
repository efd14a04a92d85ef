/* spmv_ref.c -- the serial reference of bench/sparse.sh: the same sparse matrix and vector
 * as a generated executable of examples/app/spmv.dtl with --fill random --density D
 * --seed S (libdistal's fills, tensor ids 1 and 2), copied into plain CSR arrays of int
 * row pointers and column indices (as PETSc and most codes store them), and y = A x timed as
 * the textbook CSR loop on one core.
 *
 *   spmv_ref N M DENSITY SEED ITERS    prints: nnz, best time, GFLOP/s (2 nnz / t), GB/s */
#include <distal/runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (argc != 6) {
    fprintf(stderr, "usage: %s N M DENSITY SEED ITERS\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  int64_t n = atoll(argv[1]), m = atoll(argv[2]);
  double density = atof(argv[3]);
  uint64_t seed = strtoull(argv[4], NULL, 10);
  int iters = atoi(argv[5]);
  int64_t ext[2] = {n, m}, xext[1] = {m};
  dtl_box all = {.nd = 2, .lo = {0, 0}, .hi = {n, m}}, xbox = {.nd = 1, .lo = {0}, .hi = {m}};
  dtl_level lv[2] = {DTL_LEVEL_DENSE, DTL_LEVEL_COMPRESSED};
  dtl_sparse A;
  char err[256];
  if (dtl_sparse_fill(&A, DTL_DOUBLE, DTL_FILL_RANDOM, seed, 1, density, 2, lv, ext, &all, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", argv[0], err);
    MPI_Finalize();
    return 1;
  }
  double *x = malloc((size_t)m * sizeof *x), *y = malloc((size_t)n * sizeof *y);
  if (!x || !y) return 1;
  dtl_fill(DTL_DOUBLE, DTL_FILL_RANDOM, seed, 2, 1, xext, &xbox, x);
  /* plain CSR, int indices */
  int64_t nnz = dtl_sp_pos(&A, 1, n);
  int *rowptr = malloc((size_t)(n + 1) * sizeof *rowptr), *col = malloc((size_t)(nnz + 1) * sizeof *col);
  if (!rowptr || !col || nnz > 2147483647) return 1;
  for (int64_t i = 0; i <= n; i++) rowptr[i] = (int)dtl_sp_pos(&A, 1, i);
  for (int64_t q = 0; q < nnz; q++) col[q] = (int)dtl_sp_crd(&A, 1, q);
  const double *val = A.vals;
  double best = 1e30, sum = 0;
  for (int it = 0; it < iters; it++) {
    double t0 = MPI_Wtime();
    for (int64_t i = 0; i < n; i++) {
      double acc = 0;
      for (int q = rowptr[i]; q < rowptr[i + 1]; q++) acc += val[q] * x[col[q]];
      y[i] = acc;
    }
    double dt = MPI_Wtime() - t0;
    if (dt < best) best = dt;
  }
  for (int64_t i = 0; i < n; i++) sum += y[i];
  double bytes = (double)nnz * 12 + (double)(n + 1) * 4 + (double)n * 8 + (double)m * 8;
  printf("{\"nnz\": %lld, \"time\": %.6g, \"gflops\": %.4g, \"gbs\": %.4g, \"checksum\": %.17g}\n", (long long)nnz, best,
         2.0 * (double)nnz / best / 1e9, bytes / best / 1e9, sum);
  dtl_sparse_free(&A);
  free(x), free(y), free(rowptr), free(col);
  MPI_Finalize();
  return 0;
}
