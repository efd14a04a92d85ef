/* petsc_spmv.c -- the PETSc reference of bench/sparse.sh: MatMult (MATMPIAIJ, PETSc's
 * default matrix type, its diagonal and off-diagonal blocks and VecScatter for the ghost
 * values) on the same matrix and vector as a generated SpMV, in distal's row blocks.
 *
 *   mpirun -np P ./petsc_spmv -poisson M [-write_mtx A.mtx] -iters K
 *   mpirun -np P ./petsc_spmv -random N -density D -seed S -iters K
 *
 * -poisson: the 2-D 5-point Laplacian of an M x M grid (n = M^2; -write_mtx writes it as a
 * Matrix Market file that a generated program loads).  -random: an N x N matrix and the
 * vector x of libdistal's deterministic fills (dtl_sparse_fill with tensor id 1, dtl_fill
 * with id 2, as a generated executable of examples/app/spmv.dtl with --fill random
 * --density D --seed S fills A and x), each rank filling its own rows.  With -poisson, x is
 * libdistal's fill of id 2 too.  Each MatMult is timed between barriers (the slowest rank's
 * time); the bytes and messages one MatMult sends come from PETSc's log counters on every
 * rank.  Rank 0 prints one JSON line:
 *   {"program": "petsc", "ranks": P, "n": n, "nnz": .., "min_s": .., "median_s": ..,
 *    "bytes_max": .. (bytes the rank that sends most sends per product), "msgs_max": ..,
 *    "checksum": sum of y} */
#define _POSIX_C_SOURCE 200809L
#include <distal/runtime.h>
#include <petscmat.h>
#include <stdio.h>
#include <stdlib.h>

#include "poisson.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int write_mtx(const char *path, PetscInt m) {
  PetscInt n = m * m, cols[5];
  double vals[5];
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n%lld %lld %lld\n", (long long)n, (long long)n,
          (long long)(5 * n - 4 * m));
  for (PetscInt i = 0; i < n; i++) {
    int k = poisson_row(m, i, cols, vals);
    for (int e = 0; e < k; e++) fprintf(f, "%lld %lld %.1f\n", (long long)i + 1, (long long)cols[e] + 1, vals[e]);
  }
  return fclose(f) ? -1 : 0;
}

int main(int argc, char **argv) {
  PetscInt m = 0, n = 0, iters = 10, seed = 1;
  PetscReal density = 1e-5;
  char mtx[PETSC_MAX_PATH_LEN] = "";
  PetscBool has_mtx, poisson, random;
  PetscMPIInt rank, size;
  PetscCall(PetscInitialize(&argc, &argv, NULL, "PETSc MatMult on distal's row blocks\n"));
  PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-poisson", &m, &poisson));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-random", &n, &random));
  PetscCall(PetscOptionsGetReal(NULL, NULL, "-density", &density, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-seed", &seed, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-iters", &iters, NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-write_mtx", mtx, sizeof mtx, &has_mtx));
  PetscCheck(poisson != random && iters >= 1, PETSC_COMM_WORLD, PETSC_ERR_ARG_WRONG,
             "give one of -poisson M or -random N, and -iters >= 1");
  if (poisson) n = m * m;
  if (poisson && has_mtx && !rank) PetscCheck(!write_mtx(mtx, m), PETSC_COMM_SELF, PETSC_ERR_FILE_WRITE, "cannot write %s", mtx);

  PetscInt lo, hi;
  block_rows(n, size, rank, &lo, &hi);
  PetscInt nl = hi - lo, *rowptr, *cols;
  double *vals;
  if (poisson) {
    PetscCall(PetscMalloc3(nl + 1, &rowptr, 5 * nl + 1, &cols, 5 * nl + 1, &vals));
    rowptr[0] = 0;
    for (PetscInt i = lo; i < hi; i++) rowptr[i - lo + 1] = rowptr[i - lo] + poisson_row(m, i, cols + rowptr[i - lo], vals + rowptr[i - lo]);
  } else {
    /* this rank's rows of libdistal's fill: the generated program's A */
    int64_t ext[2] = {n, n};
    dtl_box own = {.nd = 2, .lo = {lo, 0}, .hi = {hi, n}};
    dtl_level lv[2] = {DTL_LEVEL_DENSE, DTL_LEVEL_COMPRESSED};
    dtl_sparse s;
    char err[256];
    PetscCheck(!dtl_sparse_fill(&s, DTL_DOUBLE, DTL_FILL_RANDOM, (uint64_t)seed, 1, density, 2, lv, ext, &own, err, sizeof err),
               PETSC_COMM_SELF, PETSC_ERR_MEM, "%s", err);
    int64_t nnz = nl > 0 ? dtl_sp_pos(&s, 1, nl) : 0;
    PetscCall(PetscMalloc3(nl + 1, &rowptr, nnz + 1, &cols, nnz + 1, &vals));
    for (PetscInt r = 0; r <= nl; r++) rowptr[r] = nl > 0 ? (PetscInt)dtl_sp_pos(&s, 1, r) : 0;
    for (int64_t q = 0; q < nnz; q++) cols[q] = (PetscInt)dtl_sp_crd(&s, 1, q), vals[q] = ((double *)s.vals)[q];
    dtl_sparse_free(&s);
  }
  Mat A;
  Vec x, y;
  PetscCall(MatCreateMPIAIJWithArrays(PETSC_COMM_WORLD, nl, nl, n, n, rowptr, cols, vals, &A));
  PetscCall(PetscFree3(rowptr, cols, vals));
  PetscCall(MatCreateVecs(A, &x, &y));
  {
    int64_t ext[1] = {n};
    dtl_box own = {.nd = 1, .lo = {lo}, .hi = {hi}};
    PetscScalar *a;
    PetscCall(VecGetArray(x, &a));
    dtl_fill(DTL_DOUBLE, DTL_FILL_RANDOM, (uint64_t)seed, 2, 1, ext, &own, a);
    PetscCall(VecRestoreArray(x, &a));
  }
  MatInfo info;
  PetscCall(MatGetInfo(A, MAT_GLOBAL_SUM, &info));
  PetscCall(MatMult(A, x, y)); /* warm-up: the scatter is set up at assembly, first touch here */
  double *times = malloc((size_t)iters * sizeof *times), c[2], cmax[2];
  double b0 = petsc_send_len + petsc_isend_len, m0 = petsc_send_ct + petsc_isend_ct;
  for (PetscInt k = 0; k < iters; k++) {
    PetscCallMPI(MPI_Barrier(PETSC_COMM_WORLD));
    double t0 = MPI_Wtime();
    PetscCall(MatMult(A, x, y));
    double t = MPI_Wtime() - t0;
    PetscCallMPI(MPI_Allreduce(&t, &times[k], 1, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
  }
  c[0] = (petsc_send_len + petsc_isend_len - b0) / (double)iters;
  c[1] = (petsc_send_ct + petsc_isend_ct - m0) / (double)iters;
  PetscCallMPI(MPI_Allreduce(c, cmax, 2, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
  PetscScalar sum;
  PetscCall(VecSum(y, &sum));
  qsort(times, (size_t)iters, sizeof *times, cmp_double);
  if (!rank)
    printf("{\"program\": \"petsc\", \"ranks\": %d, \"n\": %lld, \"nnz\": %.0f, \"min_s\": %.9g, \"median_s\": %.9g, "
           "\"bytes_max\": %.0f, \"msgs_max\": %.4g, \"checksum\": %.17g}\n",
           size, (long long)n, info.nz_used, times[0], times[iters / 2], cmax[0], cmax[1], (double)sum);
  free(times);
  PetscCall(MatDestroy(&A));
  PetscCall(VecDestroy(&x));
  PetscCall(VecDestroy(&y));
  PetscCall(PetscFinalize());
  return 0;
}
