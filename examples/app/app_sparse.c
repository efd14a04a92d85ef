/* app_sparse.c -- an existing MPI application with a sparse matrix held in its own layout
 * (rank r holds the entries of rows r, r + P, r + 2P, ..., and every entry arrives as two
 * halves from two different ranks) that calls the sparse matrix-vector product generated
 * from spmv.dtl: _import routes the entries to the kernel's row blocks (summing the halves),
 * x goes in from the application's column blocks, y comes back into its row blocks.  Plans
 * are created and destroyed several times.  Every rank checks its part of y against the
 * product computed from the entry formula, and rank 0 prints "app_sparse: ... ok".
 *
 *   distalc spmv.dtl -o spmv
 *   mpicc app_sparse.c spmv.c -o app_sparse $(pkg-config --cflags --libs distal)
 *   mpirun -np 4 ./app_sparse 1000 800 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "spmv.h"

/* the matrix: about one entry in seven is stored */
static int stored(int64_t i, int64_t j) { return (i * 31 + j * 17 + (i * j) % 5) % 7 == 0; }
static double aval(int64_t i, int64_t j) { return (double)((i * 3 + j * 5) % 19) / 19.0 - 0.4; }
static double xval(int64_t j) { return (double)(j % 23) / 23.0 - 0.5; }

#define CHECK(call, plan)                                                                      \
  do {                                                                                        \
    if ((call) != 0) {                                                                        \
      fprintf(stderr, "app_sparse: %s failed: %s\n", #call, spmv_error(plan));                \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                           \
    }                                                                                         \
  } while (0)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int64_t n = argc > 1 ? atoll(argv[1]) : 1000, m = argc > 2 ? atoll(argv[2]) : 800;
  int rounds = argc > 3 ? atoi(argv[3]) : 3;
  /* the application's entries: its rows, each entry split in two halves, one of which
   * another rank also contributes */
  int64_t cap = 16, ne = 0;
  int64_t *coords = malloc((size_t)cap * 2 * sizeof *coords);
  double *vals = malloc((size_t)cap * sizeof *vals);
  for (int64_t i = 0; i < n; i++) {
    int mine = i % size == rank, helper = (i + 1) % size == rank;
    if (!mine && !helper) continue;
    for (int64_t j = 0; j < m; j++) {
      if (!stored(i, j)) continue;
      for (int half = 0; half < 2; half++) {
        if (!(half == 0 ? mine : helper)) continue;
        if (ne == cap) {
          cap *= 2;
          coords = realloc(coords, (size_t)cap * 2 * sizeof *coords);
          vals = realloc(vals, (size_t)cap * sizeof *vals);
          if (!coords || !vals) MPI_Abort(MPI_COMM_WORLD, 1);
        }
        coords[2 * ne] = i, coords[2 * ne + 1] = j;
        vals[ne++] = half == 0 ? 0.25 * aval(i, j) : 0.75 * aval(i, j);
      }
    }
  }
  /* x in the application's column blocks, y in its row blocks */
  int64_t x0 = m * rank / size, x1 = m * (rank + 1) / size;
  int64_t y0 = n * rank / size, y1 = n * (rank + 1) / size;
  double *xapp = malloc((size_t)(x1 - x0 + 1) * sizeof *xapp), *yapp = malloc((size_t)(y1 - y0 + 1) * sizeof *yapp);
  for (int64_t j = x0; j < x1; j++) xapp[j - x0] = xval(j);
  double worst = 0;
  for (int round = 0; round < rounds; round++) {
    spmv_params prm;
    spmv_params_default(&prm);
    prm.n = n, prm.m = m;
    spmv_plan *plan = NULL;
    CHECK(spmv_plan_create(MPI_COMM_WORLD, &prm, &plan), plan);
    int64_t off[2], ext[2];
    int64_t ny = spmv_y_block(plan, off, ext), nx = spmv_x_block(plan, off, ext);
    double *y = malloc((size_t)(ny + 1) * sizeof *y), *x = malloc((size_t)(nx + 1) * sizeof *x);
    dtl_sparse A;
    CHECK(spmv_A_import(plan, ne, coords, vals, &A), plan);
    CHECK(spmv_x_import(plan, &x0, &x1, xapp, x), plan);
    CHECK(spmv_compute(plan, y, &A, x), plan);
    for (int64_t i = y0; i < y1; i++) yapp[i - y0] = -1;
    CHECK(spmv_y_export(plan, y, &y0, &y1, yapp), plan);
    for (int64_t i = y0; i < y1; i++) {
      double want = 0;
      for (int64_t j = 0; j < m; j++)
        if (stored(i, j)) want += aval(i, j) * xval(j);
      double e = fabs(yapp[i - y0] - want) / (fabs(want) > 1 ? fabs(want) : 1);
      if (!(e <= worst)) worst = e;
    }
    dtl_sparse_free(&A);
    free(y), free(x);
    CHECK(spmv_plan_destroy(&plan), plan);
  }
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  int ok = worst < 1e-12;
  if (rank == 0)
    printf("app_sparse: %d ranks, %lld x %lld, %d rounds, max relative error %.3g: %s\n", size, (long long)n, (long long)m,
           rounds, worst, ok ? "ok" : "MISMATCH");
  free(coords), free(vals), free(xapp), free(yapp);
  MPI_Finalize();
  return ok ? 0 : 1;
}
