/* petsc_krylov.c -- the PETSc reference for the Krylov programs of bench/dtl (cg.dtl,
 * bicgstab.dtl): unpreconditioned CG and BiCGSTAB (KSPCG, KSPBCGS, PCNONE) on the 2-D
 * 5-point Poisson matrix of an m x m grid (n = m^2 rows: 4 on the diagonal, -1 for the four
 * neighbours), a distributed MATAIJ in row blocks.
 *
 *   mpirun -np 2 ./petsc_krylov -m 1000 -its 200 -reps 3 [-ksp_types cg,bcgs]
 *          [-write_mtx A.mtx] [-write_b b.npy] [-save_x PREFIX] [-cg_ksp_... -bcgs_ksp_...]
 *
 * The row blocks follow distal's blocked partition (rank r owns rows [r s, min(n, (r+1) s)),
 * s = ceil(n / P)), so both programs split the same rows.  b(i) is a function of the global
 * row only (b_value), x starts at 0, and each solver runs exactly -its iterations (rtol =
 * atol = 0; the divergence test is off).  Every solve is timed between barriers (the
 * slowest rank's time), best and median of -reps; the communication of one solve comes from
 * PETSc's own log counters (petsclog.h: petsc_allreduce_ct, which counts every
 * MPI_Allreduce/Bcast/Alltoall on a communicator of more than one rank, and the message and
 * byte counters of its point-to-point sends), taken around KSPSolve on every rank.
 * Options of one solver go through its prefix: -cg_ksp_norm_type natural, -bcgs_ksp_....
 *
 * -write_mtx writes the same matrix as a Matrix Market file (coordinate real general, one
 * entry per line, rows in order), -write_b the right-hand side as a .npy file (float64),
 * -save_x PREFIX each solver's final x as PREFIX<type>.npy: rank 0 writes them, so that the
 * generated programs can load the identical problem and their results be compared.
 *
 * Rank 0 prints one JSON line per solver:
 *   {"program": "petsc", "ksp": "cg", "ranks": P, "m": m, "n": n, "iterations": K,
 *    "min_s": .., "median_s": .., "per_iter_s": .., "allreduce_per_iter": ..,
 *    "msgs_per_iter": .., "bytes_per_iter": .., "rnorm": .., "true_rel_residual": ..}
 * (messages and bytes: sent by the rank that sends most, per iteration). */
#define _POSIX_C_SOURCE 200809L
#include <petscksp.h>
#include "poisson.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* b(i): a fixed function of the global row, in [0.5, 1.5). */
static double b_value(PetscInt i) {
  uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return 0.5 + (double)(z >> 11) * 0x1.0p-53;
}

static int write_npy_header(FILE *f, PetscInt n) {
  char dict[128];
  int len = snprintf(dict, sizeof dict, "{'descr': '<f8', 'fortran_order': False, 'shape': (%lld,), }", (long long)n);
  int total = 10 + len + 1;
  int pad = (64 - total % 64) % 64;
  unsigned short hlen = (unsigned short)(len + pad + 1);
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fputc(hlen & 0xff, f);
  fputc(hlen >> 8, f);
  fwrite(dict, 1, (size_t)len, f);
  for (int i = 0; i < pad; i++) fputc(' ', f);
  fputc('\n', f);
  return ferror(f) ? -1 : 0;
}

static int write_mtx(const char *path, PetscInt m) {
  PetscInt n = m * m, cols[5];
  double vals[5];
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  static char buf[1 << 20];
  setvbuf(f, buf, _IOFBF, sizeof buf);
  PetscInt nnz = 5 * n - 4 * m;
  fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n%% 2-D 5-point Poisson matrix, %lld x %lld grid\n",
          (long long)m, (long long)m);
  fprintf(f, "%lld %lld %lld\n", (long long)n, (long long)n, (long long)nnz);
  for (PetscInt i = 0; i < n; i++) {
    int k = poisson_row(m, i, cols, vals);
    for (int e = 0; e < k; e++) fprintf(f, "%lld %lld %.1f\n", (long long)i + 1, (long long)cols[e] + 1, vals[e]);
  }
  return fclose(f) ? -1 : 0;
}

static int write_b(const char *path, PetscInt n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  write_npy_header(f, n);
  for (PetscInt i = 0; i < n; i++) {
    double v = b_value(i);
    fwrite(&v, sizeof v, 1, f);
  }
  return fclose(f) ? -1 : 0;
}

/* Rank 0 writes the global vector x as a .npy file. */
static PetscErrorCode save_vec(Vec x, const char *path) {
  Vec x0;
  VecScatter sc;
  PetscMPIInt rank;
  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
  PetscCall(VecScatterCreateToZero(x, &sc, &x0));
  PetscCall(VecScatterBegin(sc, x, x0, INSERT_VALUES, SCATTER_FORWARD));
  PetscCall(VecScatterEnd(sc, x, x0, INSERT_VALUES, SCATTER_FORWARD));
  if (!rank) {
    PetscInt n;
    const PetscScalar *a;
    PetscCall(VecGetSize(x0, &n));
    PetscCall(VecGetArrayRead(x0, &a));
    FILE *f = fopen(path, "wb");
    PetscCheck(f, PETSC_COMM_SELF, PETSC_ERR_FILE_OPEN, "cannot write %s", path);
    write_npy_header(f, n);
    size_t w = fwrite(a, sizeof(double), (size_t)n, f);
    PetscCheck(w == (size_t)n && !fclose(f), PETSC_COMM_SELF, PETSC_ERR_FILE_WRITE, "cannot write %s", path);
    PetscCall(VecRestoreArrayRead(x0, &a));
  }
  PetscCall(VecScatterDestroy(&sc));
  PetscCall(VecDestroy(&x0));
  PetscFunctionReturn(0);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* One counter sample of this rank: reductions, messages sent, bytes sent. */
static void counters(double c[3]) {
  c[0] = petsc_allreduce_ct;
  c[1] = petsc_send_ct + petsc_isend_ct;
  c[2] = petsc_send_len + petsc_isend_len;
}

static PetscErrorCode run_solver(const char *type, Mat A, Vec b, PetscInt m, PetscInt its, PetscInt reps,
                                 const char *save_prefix) {
  KSP ksp;
  PC pc;
  Vec x, r;
  PetscMPIInt rank, size;
  char prefix[64];
  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  PetscCall(VecDuplicate(b, &x));
  PetscCall(VecDuplicate(b, &r));
  PetscCall(KSPCreate(PETSC_COMM_WORLD, &ksp));
  snprintf(prefix, sizeof prefix, "%s_", type);
  PetscCall(KSPSetOptionsPrefix(ksp, prefix));
  PetscCall(KSPSetType(ksp, type));
  PetscCall(KSPSetOperators(ksp, A, A));
  PetscCall(KSPGetPC(ksp, &pc));
  PetscCall(PCSetType(pc, PCNONE));
  PetscCall(KSPSetTolerances(ksp, 0.0, 0.0, PETSC_MAX_REAL, its));
  PetscCall(KSPSetInitialGuessNonzero(ksp, PETSC_FALSE));
  PetscCall(KSPSetFromOptions(ksp));
  PetscCall(KSPSetUp(ksp));
  double *times = malloc((size_t)reps * sizeof *times), c0[3], c1[3], per[3], permax[3];
  PetscInt iters = 0;
  PetscReal rnorm = 0;
  for (PetscInt k = 0; k < reps; k++) {
    PetscCall(VecSet(x, 0.0));
    PetscCallMPI(MPI_Barrier(PETSC_COMM_WORLD));
    counters(c0);
    double t0 = MPI_Wtime();
    PetscCall(KSPSolve(ksp, b, x));
    double t = MPI_Wtime() - t0;
    counters(c1);
    PetscCallMPI(MPI_Allreduce(&t, &times[k], 1, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
    PetscCall(KSPGetIterationNumber(ksp, &iters));
    PetscCall(KSPGetResidualNorm(ksp, &rnorm));
  }
  for (int i = 0; i < 3; i++) per[i] = iters ? (c1[i] - c0[i]) / (double)iters : 0;
  PetscCallMPI(MPI_Allreduce(per, permax, 3, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
  /* true residual ||b - A x|| / ||b|| of the last solve */
  PetscReal rn, bn;
  PetscCall(MatMult(A, x, r));
  PetscCall(VecAYPX(r, -1.0, b));
  PetscCall(VecNorm(r, NORM_2, &rn));
  PetscCall(VecNorm(b, NORM_2, &bn));
  if (save_prefix) {
    char path[PETSC_MAX_PATH_LEN];
    snprintf(path, sizeof path, "%s%s.npy", save_prefix, type);
    PetscCall(save_vec(x, path));
  }
  double tmin = times[0];
  qsort(times, (size_t)reps, sizeof *times, cmp_double);
  tmin = times[0];
  double tmed = times[reps / 2];
  if (!rank)
    printf("{\"program\": \"petsc\", \"ksp\": \"%s\", \"ranks\": %d, \"m\": %lld, \"n\": %lld, \"iterations\": %lld, "
           "\"reps\": %lld, \"min_s\": %.9g, \"median_s\": %.9g, \"per_iter_s\": %.9g, \"allreduce_per_iter\": %.4g, "
           "\"msgs_per_iter\": %.4g, \"bytes_per_iter\": %.6g, \"rnorm\": %.9g, \"true_rel_residual\": %.9g}\n",
           type, size, (long long)m, (long long)(m * m), (long long)iters, (long long)reps, tmin, tmed,
           iters ? tmin / (double)iters : 0.0, permax[0], permax[1], permax[2], (double)rnorm, (double)(rn / bn));
  fflush(stdout);
  free(times);
  PetscCall(KSPDestroy(&ksp));
  PetscCall(VecDestroy(&x));
  PetscCall(VecDestroy(&r));
  PetscFunctionReturn(0);
}

int main(int argc, char **argv) {
  PetscInt m = 1000, its = 200, reps = 3;
  char mtx[PETSC_MAX_PATH_LEN] = "", bnpy[PETSC_MAX_PATH_LEN] = "", xpre[PETSC_MAX_PATH_LEN] = "";
  char types[256] = "cg,bcgs";
  PetscBool has_mtx, has_b, has_x, flg;
  PetscMPIInt rank, size;

  PetscCall(PetscInitialize(&argc, &argv, NULL, "PETSc CG/BiCGSTAB on the 2-D Poisson matrix\n"));
  PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-m", &m, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-its", &its, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-reps", &reps, NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-write_mtx", mtx, sizeof mtx, &has_mtx));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-write_b", bnpy, sizeof bnpy, &has_b));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-save_x", xpre, sizeof xpre, &has_x));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-ksp_types", types, sizeof types, &flg));
  PetscCheck(m >= 2 && its >= 1 && reps >= 1, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE,
             "need -m >= 2, -its >= 1, -reps >= 1");
  PetscInt n = m * m;

  if (!rank && has_mtx) PetscCheck(!write_mtx(mtx, m), PETSC_COMM_SELF, PETSC_ERR_FILE_WRITE, "cannot write %s", mtx);
  if (!rank && has_b) PetscCheck(!write_b(bnpy, n), PETSC_COMM_SELF, PETSC_ERR_FILE_WRITE, "cannot write %s", bnpy);

  PetscInt lo, hi, cols[5];
  double vals[5];
  block_rows(n, size, rank, &lo, &hi);
  Mat A;
  Vec b;
  PetscCall(MatCreateAIJ(PETSC_COMM_WORLD, hi - lo, hi - lo, n, n, 5, NULL, 4, NULL, &A));
  for (PetscInt i = lo; i < hi; i++) {
    int k = poisson_row(m, i, cols, vals);
    PetscCall(MatSetValues(A, 1, &i, k, cols, vals, INSERT_VALUES));
  }
  PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY));
  PetscCall(MatCreateVecs(A, NULL, &b));
  for (PetscInt i = lo; i < hi; i++) PetscCall(VecSetValue(b, i, b_value(i), INSERT_VALUES));
  PetscCall(VecAssemblyBegin(b));
  PetscCall(VecAssemblyEnd(b));

  for (char *save = NULL, *tok = strtok_r(types, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
    PetscCall(run_solver(tok, A, b, m, its, reps, has_x ? xpre : NULL));

  PetscCall(MatDestroy(&A));
  PetscCall(VecDestroy(&b));
  PetscCall(PetscFinalize());
  return 0;
}
