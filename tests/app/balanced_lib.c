/* balanced_lib.c -- a balanced partition through the library API (balanced.py builds and runs
 * it): an application holding the entries of a skewed matrix in its own layout (row i on rank
 * i mod P) computes the boundaries of blocks of about equal entries (dtl_balance_split), passes
 * them to plan_create_balanced, imports the matrix and a vector, multiplies, exports, and
 * compares with the product computed serially on rank 0.  The vectors' blocks must be the
 * matrix's (balanced by it), and the stored entries per rank within 1.25 of their mean.
 * Boundaries that do not rise from 0 to n are refused with a message, on every rank.
 *
 *   mpirun -np P ./balanced_lib N */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spmv_bal.h"

/* row i holds max(1, n / (i + 1)^0.8 / 4) entries, at distinct columns */
static int64_t row_len(int64_t i, int64_t n) {
  int64_t k = (int64_t)((double)n / pow((double)(i + 1), 0.8) / 4.0);
  return k < 1 ? 1 : k > n ? n : k;
}
static int64_t col_of(int64_t i, int64_t q, int64_t n) { return (i * 31 + q) % n; }
static double val_of(int64_t i, int64_t j) { return (double)((i * 7 + j * 3) % 17) / 4.0 - 2.0; }
static double x_of(int64_t j) { return (double)(j % 13) / 2.0 - 3.0; }

static int fail(int rank, const char *what, const char *msg) {
  if (rank == 0) printf("balanced_lib: %s: %s\n", what, msg ? msg : "");
  MPI_Finalize();
  return 1;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int64_t n = argc > 1 ? atoll(argv[1]) : 601;
  /* this rank's entries: rows i with i mod size == rank */
  int64_t cap = 0, ne = 0;
  for (int64_t i = rank; i < n; i += size) cap += row_len(i, n);
  int64_t *coords = malloc(sizeof *coords * (size_t)(2 * cap + 2));
  double *vals = malloc(sizeof *vals * (size_t)(cap + 1));
  for (int64_t i = rank; i < n; i += size)
    for (int64_t q = 0; q < row_len(i, n); q++) {
      int64_t j = col_of(i, q, n);
      coords[2 * ne] = i, coords[2 * ne + 1] = j, vals[ne++] = val_of(i, j);
    }
  /* the boundaries: grid(p) has one dim of size P */
  int64_t *split = malloc(sizeof *split * (size_t)(size + 1));
  if (dtl_balance_split(MPI_COMM_WORLD, ne, coords, 2, n, size, split)) return fail(rank, "dtl_balance_split", "failed");
  spmv_bal_params p;
  spmv_bal_params_default(&p);
  p.n = n;
  /* bad boundaries first: refused on every rank */
  int64_t *bad = malloc(sizeof *bad * (size_t)(size + 1));
  for (int c = 0; c <= size; c++) bad[c] = c == size ? n + 1 : 0;
  spmv_bal_balance b;
  memset(&b, 0, sizeof b);
  b.A[0] = bad;
  spmv_bal_plan *plan = NULL;
  if (!spmv_bal_plan_create_balanced(MPI_COMM_WORLD, &p, &b, &plan)) return fail(rank, "bad boundaries", "accepted");
  if (!strstr(spmv_bal_error(plan), "must rise from 0 to")) return fail(rank, "bad boundaries", spmv_bal_error(plan));
  spmv_bal_plan_destroy(&plan);
  b.A[0] = split;
  if (spmv_bal_plan_create_balanced(MPI_COMM_WORLD, &p, &b, &plan)) return fail(rank, "plan_create_balanced", spmv_bal_error(plan));
  /* the vectors' blocks are the matrix's blocks of rows */
  int64_t off[2], ext[2], yoff[1], yext[1], xoff[1], xext[1];
  spmv_bal_A_block(plan, off, ext);
  spmv_bal_y_block(plan, yoff, yext);
  spmv_bal_x_block(plan, xoff, xext);
  int same = off[0] == split[rank] && ext[0] == split[rank + 1] - split[rank] && yoff[0] == off[0] && yext[0] == ext[0] &&
             xoff[0] == off[0] && xext[0] == ext[0];
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (!same) return fail(rank, "blocks", "the blocks of y, A and x are not the boundaries passed");
  dtl_sparse A;
  memset(&A, 0, sizeof A);
  if (spmv_bal_A_import(plan, ne, coords, vals, &A)) return fail(rank, "A_import", spmv_bal_error(plan));
  /* the application's vectors: equal chunks of x and y */
  int64_t chunk = (n + size - 1) / size, lo[1] = {rank * chunk < n ? rank * chunk : n};
  int64_t hi[1] = {lo[0] + chunk < n ? lo[0] + chunk : n};
  double *xa = malloc(sizeof *xa * (size_t)(chunk + 1)), *ya = malloc(sizeof *ya * (size_t)(chunk + 1));
  for (int64_t j = lo[0]; j < hi[0]; j++) xa[j - lo[0]] = x_of(j);
  double *xb = calloc((size_t)xext[0] + 1, sizeof *xb), *yb = calloc((size_t)yext[0] + 1, sizeof *yb);
  if (spmv_bal_x_import(plan, lo, hi, xa, xb)) return fail(rank, "x_import", spmv_bal_error(plan));
  if (spmv_bal_compute(plan, yb, &A, xb)) return fail(rank, "compute", spmv_bal_error(plan));
  if (spmv_bal_y_export(plan, yb, lo, hi, ya)) return fail(rank, "y_export", spmv_bal_error(plan));
  /* the load: stored entries of A on each rank */
  int64_t mine = dtl_sparse_nvals(&A), most = mine, total = mine;
  MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  double spread = total ? (double)most * size / (double)total : 1.0;
  /* y on rank 0, against the serial product */
  int *counts = malloc(sizeof *counts * (size_t)size), *displs = malloc(sizeof *displs * (size_t)size);
  for (int r = 0; r < size; r++) {
    int64_t l = r * chunk < n ? r * chunk : n, h = l + chunk < n ? l + chunk : n;
    counts[r] = (int)(h - l), displs[r] = (int)l;
  }
  double *y = rank == 0 ? malloc(sizeof *y * (size_t)(n + 1)) : NULL;
  MPI_Gatherv(ya, (int)(hi[0] - lo[0]), MPI_DOUBLE, y, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  int good = 1;
  if (rank == 0)
    for (int64_t i = 0; i < n; i++) {
      double want = 0;
      for (int64_t q = 0; q < row_len(i, n); q++) want += val_of(i, col_of(i, q, n)) * x_of(col_of(i, q, n));
      if (fabs(y[i] - want) > 1e-9 * (1 + fabs(want))) {
        printf("balanced_lib: y[%lld] = %g, the serial product %g\n", (long long)i, y[i], want);
        good = 0;
        break;
      }
    }
  MPI_Bcast(&good, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (good && size > 1 && spread > 1.25) {
    if (rank == 0) printf("balanced_lib: entries per rank max/mean %.3f\n", spread);
    good = 0;
  }
  if (rank == 0 && good) printf("balanced_lib: ok (entries per rank max/mean %.3f)\n", spread);
  dtl_sparse_free(&A);
  spmv_bal_plan_destroy(&plan);
  free(coords), free(vals), free(split), free(bad), free(xa), free(ya), free(xb), free(yb), free(counts), free(displs), free(y);
  MPI_Finalize();
  return good ? 0 : 1;
}
