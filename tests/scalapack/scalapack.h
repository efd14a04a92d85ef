/* scalapack.h -- what the ScaLAPACK tests need of BLACS and ScaLAPACK (Debian's
 * libscalapack-openmpi has no header), and helpers over the block-cyclic layout: a
 * distributed matrix of this process, filled from and checked against a function of the
 * global coordinates. */
#ifndef DISTAL_TEST_SCALAPACK_H
#define DISTAL_TEST_SCALAPACK_H

#include <math.h>
#include <stdlib.h>

void Cblacs_get(int icontxt, int what, int *val);
void Cblacs_gridinit(int *icontxt, const char *order, int nprow, int npcol);
void Cblacs_gridmap(int *icontxt, int *usermap, int ldumap, int nprow, int npcol);
void Cblacs_gridinfo(int icontxt, int *nprow, int *npcol, int *myrow, int *mycol);
void Cblacs_gridexit(int icontxt);
int numroc_(const int *n, const int *nb, const int *iproc, const int *isrcproc, const int *nprocs);
void pdgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
             const double *alpha, const double *a, const int *ia, const int *ja, const int *desca,
             const double *b, const int *ib, const int *jb, const int *descb, const double *beta,
             double *c, const int *ic, const int *jc, const int *descc);

/* The BLACS grid of this process: its context, shape and coordinates (-1 outside it). */
typedef struct {
  int ctxt, nprow, npcol, myrow, mycol;
} test_grid;

/* A block-cyclic M x N matrix: the descriptor and this process's local array (NULL outside
 * the grid or when it holds nothing), column-major with leading dimension desc[8]. */
typedef struct {
  int desc[9];
  int locr, locc;
  double *a;
} test_matrix;

static inline int test_matrix_make(test_matrix *x, const test_grid *g, int M, int N, int mb, int nb,
                                   int rsrc, int csrc) {
  x->locr = x->locc = 0;
  x->a = NULL;
  if (g->myrow >= 0) {
    x->locr = numroc_(&M, &mb, &g->myrow, &rsrc, &g->nprow);
    x->locc = numroc_(&N, &nb, &g->mycol, &csrc, &g->npcol);
  }
  int lld = x->locr > 1 ? x->locr : 1;
  int d[9] = {1, g->ctxt, M, N, mb, nb, rsrc, csrc, lld};
  for (int i = 0; i < 9; i++) x->desc[i] = d[i];
  size_t n = (size_t)lld * (size_t)(x->locc > 0 ? x->locc : 1);
  x->a = malloc(n * sizeof *x->a);
  return x->a == NULL;
}

static inline void test_matrix_free(test_matrix *x) {
  free(x->a);
  x->a = NULL;
}

/* Global (0-based) index of local index l along a dimension of block size nb, first block on
 * process src, np processes, this process at p. */
static inline int test_global(int l, int nb, int p, int src, int np) {
  return (l / nb) * nb * np + ((np + p - src) % np) * nb + l % nb;
}

/* Visit every local element: the statements run with gi, gj its global row and column
 * (0-based) and e a pointer to it. */
#define TEST_FOR_LOCAL(x, g, gi, gj, e, ...)                                                      \
  for (int lc_ = 0; lc_ < (x)->locc; lc_++)                                                       \
    for (int lr_ = 0; lr_ < (x)->locr; lr_++) {                                                   \
      int gi = test_global(lr_, (x)->desc[4], (g)->myrow, (x)->desc[6], (g)->nprow);              \
      int gj = test_global(lc_, (x)->desc[5], (g)->mycol, (x)->desc[7], (g)->npcol);              \
      double *e = &(x)->a[lr_ + (size_t)lc_ * (x)->desc[8]];                                      \
      (void)gi, (void)gj;                                                                         \
      __VA_ARGS__                                                                                 \
    }

/* Exact values (multiples of 1/8 below 8), so that products are exact in any order. */
static inline double test_fn(int seed, int i, int j) {
  return (double)((i * 31 + j * 17 + seed * 7) % 41) / 8.0 - 2.5;
}

#endif
