/* pdgemm_app.c -- a ScaLAPACK application that knows nothing of distal: it calls pdgemm_ as
 * ScaLAPACK documents it, on a BLACS grid of the ranks (MPI_Dims_create, or PR x PC in
 * order R, C or X = reverse rank order), for transposition cases, alpha and beta (beta = 0
 * over a C full of NaN), submatrices, uneven sizes and block sizes, twice each.
 *
 *   mpirun -np P ./pdgemm_app [PR PC R|C|X]
 *
 * Every element of every C (outside the submatrix too) is checked against a serial
 * product; rank 0 prints per case the largest error and a digest of all of C's bits, so that
 * runs linked with different pdgemm_ implementations can be compared exactly (the inputs are
 * multiples of 1/8, so the products are exact in any order).  Exit status 1 on a mismatch. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scalapack.h"

typedef struct {
  char ta, tb;
  int m, n, k;
  double alpha, beta;
  int ia, ja, ib, jb, ic, jc;
  int mba, nba, mbb, nbb, mbc, nbc;
} gemm_case;

static const gemm_case cases[] = {
    {'N', 'N', 37, 53, 29, 1.0, 0.0, 1, 1, 1, 1, 1, 1, 8, 8, 8, 8, 8, 8},
    {'T', 'N', 45, 31, 60, 1.5, -0.75, 3, 2, 2, 5, 4, 1, 3, 5, 7, 2, 4, 4},
    {'N', 'T', 64, 40, 33, -1.0, 1.0, 2, 2, 1, 3, 1, 2, 32, 32, 1, 1, 16, 3},
    {'T', 'T', 50, 50, 50, 0.5, 0.0, 1, 4, 3, 1, 2, 2, 64, 64, 64, 64, 64, 64},
    {'C', 'N', 17, 9, 1, 2.0, 0.25, 2, 1, 1, 1, 1, 1, 2, 3, 1, 4, 5, 1},
    {'N', 'C', 33, 21, 70, 1.0, 0.5, 1, 2, 2, 1, 3, 3, 5, 6, 7, 5, 3, 2},
    {'N', 'N', 20, 30, 10, 0.0, -2.0, 1, 1, 1, 1, 2, 1, 4, 4, 4, 4, 6, 7},
};

static int trans(char t) { return t != 'N'; }

static uint64_t mix(uint64_t h) {
  h ^= h >> 33, h *= 0xff51afd7ed558ccdULL, h ^= h >> 33, h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

/* op(sub(A))(i, l) and op(sub(B))(l, j) from the fill functions */
static double op_a(const gemm_case *c, int i, int l) {
  return trans(c->ta) ? test_fn(1, c->ia - 1 + l, c->ja - 1 + i) : test_fn(1, c->ia - 1 + i, c->ja - 1 + l);
}
static double op_b(const gemm_case *c, int l, int j) {
  return trans(c->tb) ? test_fn(2, c->ib - 1 + j, c->jb - 1 + l) : test_fn(2, c->ib - 1 + l, c->jb - 1 + j);
}

/* C's element (gi, gj) after the call: NaN where beta = 0 made C all NaN and the element is
 * outside sub(C). */
static double expected(const gemm_case *c, int gi, int gj) {
  double old = c->beta == 0 ? NAN : test_fn(3, gi, gj);
  int i = gi - (c->ic - 1), j = gj - (c->jc - 1);
  if (i < 0 || i >= c->m || j < 0 || j >= c->n) return old;
  double s = 0;
  for (int l = 0; l < c->k; l++) s += op_a(c, i, l) * op_b(c, l, j);
  return c->alpha * s + (c->beta == 0 ? 0 : c->beta * old);
}

/* Run one case; returns the mismatches; *err: largest error, *digest: of C's bits. */
static long run_case(const test_grid *g, int id, const gemm_case *c, double *err, uint64_t *digest) {
  int ar = trans(c->ta) ? c->k : c->m, ac = trans(c->ta) ? c->m : c->k;
  int br = trans(c->tb) ? c->n : c->k, bc = trans(c->tb) ? c->k : c->n;
  test_matrix A, B, C;
  if (test_matrix_make(&A, g, c->ia - 1 + ar + 2, c->ja - 1 + ac + 1, c->mba, c->nba, 0, g->npcol - 1) ||
      test_matrix_make(&B, g, c->ib - 1 + br + 1, c->jb - 1 + bc + 3, c->mbb, c->nbb, g->nprow - 1, 0) ||
      test_matrix_make(&C, g, c->ic - 1 + c->m + 3, c->jc - 1 + c->n + 2, c->mbc, c->nbc, g->nprow / 2, g->npcol / 2)) {
    fprintf(stderr, "out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  TEST_FOR_LOCAL(&A, g, gi, gj, e, *e = test_fn(1, gi, gj);)
  TEST_FOR_LOCAL(&B, g, gi, gj, e, *e = test_fn(2, gi, gj);)
  TEST_FOR_LOCAL(&C, g, gi, gj, e, *e = c->beta == 0 ? NAN : test_fn(3, gi, gj);)
  char ta[2] = {c->ta, 0}, tb[2] = {c->tb, 0};
  pdgemm_(ta, tb, &c->m, &c->n, &c->k, &c->alpha, A.a, &c->ia, &c->ja, A.desc, B.a, &c->ib, &c->jb, B.desc,
          &c->beta, C.a, &c->ic, &c->jc, C.desc);
  long bad = 0;
  *err = 0, *digest = 0;
  TEST_FOR_LOCAL(&C, g, gi, gj, e, {
    double w = expected(c, gi, gj), d = isnan(w) ? (isnan(*e) ? 0 : INFINITY) : fabs(*e - w) / (1 + fabs(w));
    if (!(d <= 1e-12) && bad++ < 5)
      fprintf(stderr, "case %d: C(%d, %d) = %g, expected %g\n", id, gi + 1, gj + 1, *e, w);
    *err = d > *err || isnan(d) ? d : *err;
    uint64_t bits;
    memcpy(&bits, e, sizeof bits);
    *digest ^= mix(mix(((uint64_t)id << 48) ^ ((uint64_t)gi << 24) ^ (uint64_t)gj) ^ bits);
  })
  test_matrix_free(&A), test_matrix_free(&B), test_matrix_free(&C);
  return bad;
}

static void make_grid(test_grid *g, int argc, char **argv, int size) {
  int dims[2] = {0, 0};
  char order = 'R';
  if (argc > 3) dims[0] = atoi(argv[1]), dims[1] = atoi(argv[2]), order = argv[3][0];
  else MPI_Dims_create(size, 2, dims);
  Cblacs_get(-1, 0, &g->ctxt);
  if (order == 'X') {
    int map[64];
    for (int i = 0; i < dims[0] * dims[1] && i < 64; i++) map[i] = size - 1 - i;
    Cblacs_gridmap(&g->ctxt, map, dims[0], dims[0], dims[1]);
  } else {
    Cblacs_gridinit(&g->ctxt, order == 'C' ? "Col" : "Row", dims[0], dims[1]);
  }
  g->myrow = g->mycol = -1;
  if (g->ctxt >= 0) Cblacs_gridinfo(g->ctxt, &g->nprow, &g->npcol, &g->myrow, &g->mycol);
  if (g->myrow < 0) g->myrow = g->mycol = -1;
  g->nprow = dims[0], g->npcol = dims[1];
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  test_grid g;
  make_grid(&g, argc, argv, size);
  if (g.nprow < 1 || g.npcol < 1 || g.nprow * g.npcol > size || g.nprow * g.npcol > 64) {
    if (!rank) fprintf(stderr, "usage: mpirun -np P %s [PR PC R|C|X] (PR x PC <= P)\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  long bad = 0;
  const int ncases = (int)(sizeof cases / sizeof cases[0]);
  for (int pass = 0; pass < 2; pass++)
    for (int id = 0; id < ncases; id++) {
      double err = 0, maxerr;
      uint64_t digest = 0, all;
      if (g.myrow >= 0) bad += run_case(&g, id, &cases[id], &err, &digest);
      MPI_Reduce(&err, &maxerr, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      MPI_Reduce(&digest, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
      const gemm_case *c = &cases[id];
      if (!rank)
        printf("case %d pass %d: %c%c %dx%dx%d alpha %g beta %g: max error %.3g digest %016llx\n", id, pass, c->ta,
               c->tb, c->m, c->n, c->k, c->alpha, c->beta, maxerr, (unsigned long long)all);
    }
  long total = 0;
  MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (!rank) printf("%d ranks, grid %dx%d: %s (%ld mismatches)\n", size, g.nprow, g.npcol, total ? "FAIL" : "ok", total);
  if (g.myrow >= 0) Cblacs_gridexit(g.ctxt);
  MPI_Finalize();
  return total ? 1 : 0;
}
