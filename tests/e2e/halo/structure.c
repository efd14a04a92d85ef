/* structure.c -- the halo exchange's cache through the library API of spmv.dtl: y = A x with
 * A tridiagonal; then A's stored columns rewritten in place (the same arrays) and
 * spmv_structure_changed called on rank 0 alone, which must make every rank inspect again;
 * then A rebuilt (new arrays, another structure) without the call, which the cache notices.
 * Each result is compared with a serial product of the same entries.  First, plan_create's
 * messages for n (no default) unset, 0 and negative.  Prints "structure: ok" on rank 0 when
 * every check passed. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spmv.h"

enum { N = 23 };

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}
static int cmp32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* y against the serial product of the entries of every rank's piece (gathered) */
static int check(spmv_plan *plan, const dtl_sparse *A, const double *x, const double *y, const char *what) {
  int64_t off[1], ext[1];
  spmv_y_block(plan, off, ext);
  double full_x[N];
  for (int i = 0; i < N; i++) full_x[i] = 1.0 + i * 0.5;
  int bad = 0;
  for (int64_t r = 0; r < ext[0]; r++) {
    double want = 0;
    for (int64_t q = dtl_sp_pos(A, 1, r); q < dtl_sp_pos(A, 1, r + 1); q++)
      want += ((const double *)A->vals)[q] * full_x[dtl_sp_crd(A, 1, q) + A->box.lo[1]];
    if (fabs(y[r] - want) > 1e-12 * (1 + fabs(want))) bad = 1;
  }
  (void)x;
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (any && rank == 0) printf("structure: %s: y differs from the serial product\n", what);
  return any;
}

/* A with entries (i, (i + d) mod N) for d in shifts, each rank passing its own rows */
static int build(spmv_plan *plan, const int *shifts, int nshift, dtl_sparse *A) {
  int64_t off[2], ext[2];
  spmv_A_block(plan, off, ext);
  int64_t n = ext[0] * nshift, k = 0;
  int64_t *c = malloc((size_t)(2 * n + 1) * sizeof *c);
  double *v = malloc((size_t)(n + 1) * sizeof *v);
  for (int64_t r = off[0]; r < off[0] + ext[0]; r++)
    for (int s = 0; s < nshift; s++) {
      c[2 * k] = r, c[2 * k + 1] = ((r + shifts[s]) % N + N) % N;
      v[k++] = 1.0 + r + 0.125 * s;
    }
  int rc = spmv_A_import(plan, n, c, v, A);
  free(c);
  free(v);
  return rc;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, fail = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  spmv_params p;
  spmv_params_default(&p);
  spmv_plan *plan;
  /* n has no default: -1 (params_default's none) has no value; 0 and -7 were given, and are
   * refused as such */
  static const int64_t bad[] = {-1, 0, -7};
  static const char *const why[] = {"param n has no value and no default", "param n is 0: it must be positive",
                                    "param n is -7: it must be positive"};
  for (int q = 0; q < 3; q++) {
    p.n = bad[q];
    plan = NULL;
    int rc = spmv_plan_create(MPI_COMM_WORLD, &p, &plan);
    if (!rc || !plan || strcmp(spmv_error(plan), why[q])) {
      printf("structure: n = %lld: rc %d, message '%s', expected '%s'\n", (long long)bad[q], rc,
             plan ? spmv_error(plan) : "(no plan)", why[q]);
      fail = 1;
    }
    spmv_plan_destroy(&plan);
  }
  p.n = N;
  if (spmv_plan_create(MPI_COMM_WORLD, &p, &plan)) {
    printf("structure: plan_create: %s\n", spmv_error(plan));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int64_t off[1], ext[1];
  spmv_x_block(plan, off, ext);
  double *x = malloc((size_t)(ext[0] + 1) * sizeof *x), *y = malloc((size_t)(ext[0] + 1) * sizeof *y);
  for (int64_t i = 0; i < ext[0]; i++) x[i] = 1.0 + (off[0] + i) * 0.5;
  dtl_sparse A = {0};
  static const int tri[] = {-1, 0, 1}, far[] = {0, N / 2, N - 3};
  if (build(plan, tri, 3, &A)) fail = 1;
  for (int rep = 0; rep < 2 && !fail; rep++) /* the second compute reuses the lists */
    fail |= spmv_compute(plan, &A, x, y) || check(plan, &A, x, y, "tridiagonal");
  /* the stored columns moved by N / 2, in place: the same arrays, counts and box */
  for (int64_t r = 0; r < A.npos[0] && !fail; r++) {
    int64_t lo = dtl_sp_pos(&A, 1, r), hi = dtl_sp_pos(&A, 1, r + 1);
    if (A.narrow) {
      for (int64_t q = lo; q < hi; q++) A.crd32[1][q] = (int32_t)((A.crd32[1][q] + N / 2) % N);
      qsort(A.crd32[1] + lo, (size_t)(hi - lo), sizeof *A.crd32[1], cmp32);
    } else {
      for (int64_t q = lo; q < hi; q++) A.crd[1][q] = (A.crd[1][q] + N / 2) % N;
      qsort(A.crd[1] + lo, (size_t)(hi - lo), sizeof *A.crd[1], cmp64);
    }
  }
  if (!fail && rank == 0 && spmv_structure_changed(plan)) fail = 1;
  if (!fail) fail |= spmv_compute(plan, &A, x, y) || check(plan, &A, x, y, "columns changed in place");
  /* a new piece with another structure, without the call */
  dtl_sparse_free(&A);
  if (!fail && build(plan, far, 3, &A)) fail = 1;
  if (!fail) fail |= spmv_compute(plan, &A, x, y) || check(plan, &A, x, y, "a rebuilt piece");
  int any = 0;
  MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) printf(any ? "structure: FAILED (%s)\n" : "structure: ok\n", spmv_error(plan));
  dtl_sparse_free(&A);
  free(x);
  free(y);
  spmv_plan_destroy(&plan);
  MPI_Finalize();
  return any;
}
