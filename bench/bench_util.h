/* bench_util.h -- what the C reference programs of bench/ share: the comparison that sorts
 * their timings, the deterministic fill of their matrices (a function of the seed and the
 * index only, the same in every program), and the BLACS and ScaLAPACK routines that the
 * PDGEMM benchmarks call (Debian's libscalapack-openmpi has no header). */
#ifndef DISTAL_BENCH_UTIL_H
#define DISTAL_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

static inline int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static inline void fill(double *x, size_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (double)(s >> 11) / 9007199254740992.0 - 0.5;
  }
}

void Cblacs_pinfo(int *mypnum, int *nprocs);
void Cblacs_get(int icontxt, int what, int *val);
void Cblacs_gridinit(int *icontxt, const char *order, int nprow, int npcol);
void Cblacs_gridinfo(int icontxt, int *nprow, int *npcol, int *myrow, int *mycol);
void Cblacs_gridexit(int icontxt);
void Cblacs_exit(int notdone);
int numroc_(const int *n, const int *nb, const int *iproc, const int *isrcproc, const int *nprocs);
void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb, const int *irsrc,
               const int *icsrc, const int *ictxt, const int *lld, int *info);
void pdgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
             const double *alpha, const double *a, const int *ia, const int *ja, const int *desca,
             const double *b, const int *ib, const int *jb, const int *descb, const double *beta,
             double *c, const int *ic, const int *jc, const int *descc);

#endif
