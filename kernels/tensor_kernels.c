/* tensor_kernels.c -- leaf kernels of higher-order tensor algebra behind `substitute`:
 * TTV, TTM, inner product and MTTKRP on strided blocks, cast to BLAS calls (as CTF and
 * the DISTAL paper do on one node) where the block is contiguous enough, loops otherwise.
 * All accumulate into the output, but for the storing entry points (_store: A = ...).
 * Strides are in elements. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "distal/runtime.h"
#include "simd.h" /* beside this file */

#define AT(p, t, off) ((char *)(p) + (size_t)(off) * dtl_type_size(t))
#define CAT(p, t, off) ((const char *)(p) + (size_t)(off) * dtl_type_size(t))

/* A(i,j) += sum_k B(i,j,k) c(k): a gemv per i. */
void dtl_ttv(dtl_type t, int64_t ni, int64_t nj, int64_t nk, const void *B, int64_t sBi,
             int64_t sBj, int64_t sBk, const void *c, int64_t sc, void *A, int64_t sAi,
             int64_t sAj) {
  if (ni <= 0 || nj <= 0 || nk <= 0) return;
  if (t == DTL_DOUBLE && sBk == 1 && sc == 1 && sBi == nj * sBj && sAi == nj * sAj) {
    /* (i, j) contiguous: rows of nk, read as four concurrent streams (a quarter of the
     * rows each), which keeps more memory traffic in flight than one gemv's single stream */
    const int64_t rows = ni * nj, q = (rows + 3) / 4;
    const double *b = B, *cv = c;
    double *a = A;
    const bool v4 = dtl_dot4_available();

    /* the rank's threads share the rows (generated loops' rule: dtl_loop_threads) */
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(dtl_loop_threads()) if (dtl_threads_share(rows * nk))
#endif
    for (int64_t r = 0; r < q; r++) {
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      const double *b0 = b + r * sBj, *b1 = b + (r + q) * sBj, *b2 = b + (r + 2 * q) * sBj,
                   *b3 = b + (r + 3 * q) * sBj;
      bool h1 = r + q < rows, h2 = r + 2 * q < rows, h3 = r + 3 * q < rows;
      if (h1 && h2 && h3 && v4) { /* AVX2: the compiler leaves the plain loop's sums scalar */
        double o[4];
        dtl_dot4_rows(b0, b1, b2, b3, cv, nk, o);
        s0 = o[0], s1 = o[1], s2 = o[2], s3 = o[3];
      } else if (h1 && h2 && h3) {
        for (int64_t k = 0; k < nk; k++) {
          s0 += b0[k] * cv[k], s1 += b1[k] * cv[k];
          s2 += b2[k] * cv[k], s3 += b3[k] * cv[k];
        }
      } else {
        for (int64_t k = 0; k < nk; k++) s0 += b0[k] * cv[k];
        for (int64_t k = 0; h1 && k < nk; k++) s1 += b1[k] * cv[k];
        for (int64_t k = 0; h2 && k < nk; k++) s2 += b2[k] * cv[k];
        for (int64_t k = 0; h3 && k < nk; k++) s3 += b3[k] * cv[k];
      }
      a[r * sAj] += s0;
      if (h1) a[(r + q) * sAj] += s1;
      if (h2) a[(r + 2 * q) * sAj] += s2;
      if (h3) a[(r + 3 * q) * sAj] += s3;
    }
    return;
  }
  if (sBk == 1 && sBi == nj * sBj && sAi == nj * sAj) {
    /* (i, j) contiguous in A and B: one gemv over all rows */
    dtl_gemv(t, 0, ni * nj, nk, B, sBj, c, sc, A, sAj);
    return;
  }
  for (int64_t i = 0; i < ni; i++) {
    if (sBk == 1)
      dtl_gemv(t, 0, nj, nk, CAT(B, t, i * sBi), sBj, c, sc, AT(A, t, i * sAi), sAj);
    else if (sBj == 1)
      dtl_gemv(t, 1, nj, nk, CAT(B, t, i * sBi), sBk, c, sc, AT(A, t, i * sAi), sAj);
    else
      for (int64_t j = 0; j < nj; j++)
        dtl_dot(t, nk, CAT(B, t, i * sBi + j * sBj), sBk, c, sc, AT(A, t, i * sAi + j * sAj));
  }
}

/* A(i,j,l) = 0 over a strided block */
static void zero3(dtl_type t, int64_t ni, int64_t nj, int64_t nl, void *A, int64_t sAi, int64_t sAj, int64_t sAl) {
  size_t es = dtl_type_size(t);
  for (int64_t i = 0; i < ni; i++)
    for (int64_t j = 0; j < nj; j++)
      for (int64_t l = 0; l < nl; l++) memset(AT(A, t, i * sAi + j * sAj + l * sAl), 0, es);
}

/* A(i,j,l) (+)= sum_k B(i,j,k) C(k,l): one gemm when (i,j) is contiguous in A and B, else a
 * gemm per i; store: A = ..., with the gemm's beta = 0 where there is one gemm. */
static void ttm(dtl_type t, int64_t ni, int64_t nj, int64_t nk, int64_t nl, const void *B, int64_t sBi,
                int64_t sBj, int64_t sBk, const void *C, int64_t sCk, int64_t sCl, bool store, void *A,
                int64_t sAi, int64_t sAj, int64_t sAl) {
  if (ni <= 0 || nj <= 0 || nl <= 0) return;
  if (sBk == 1 && sCl == 1 && sAl == 1 && sBi == nj * sBj && sAi == nj * sAj) {
    (store ? dtl_gemm_store : dtl_gemm)(t, 0, 0, ni * nj, nl, nk, B, sBj, C, sCk, A, sAj);
    return;
  }
  if (store) zero3(t, ni, nj, nl, A, sAi, sAj, sAl);
  if (nk <= 0) return;
  for (int64_t i = 0; i < ni; i++) {
    if (sBk == 1 && sCl == 1 && sAl == 1) {
      dtl_gemm(t, 0, 0, nj, nl, nk, CAT(B, t, i * sBi), sBj, C, sCk, AT(A, t, i * sAi), sAj);
    } else {
      for (int64_t j = 0; j < nj; j++)
        for (int64_t l = 0; l < nl; l++)
          dtl_dot(t, nk, CAT(B, t, i * sBi + j * sBj), sBk, CAT(C, t, l * sCl), sCk,
                  AT(A, t, i * sAi + j * sAj + l * sAl));
    }
  }
}

void dtl_ttm(dtl_type t, int64_t ni, int64_t nj, int64_t nk, int64_t nl, const void *B,
             int64_t sBi, int64_t sBj, int64_t sBk, const void *C, int64_t sCk, int64_t sCl,
             void *A, int64_t sAi, int64_t sAj, int64_t sAl) {
  ttm(t, ni, nj, nk, nl, B, sBi, sBj, sBk, C, sCk, sCl, false, A, sAi, sAj, sAl);
}

void dtl_ttm_store(dtl_type t, int64_t ni, int64_t nj, int64_t nk, int64_t nl, const void *B,
                   int64_t sBi, int64_t sBj, int64_t sBk, const void *C, int64_t sCk, int64_t sCl,
                   void *A, int64_t sAi, int64_t sAj, int64_t sAl) {
  ttm(t, ni, nj, nk, nl, B, sBi, sBj, sBk, C, sCk, sCl, true, A, sAi, sAj, sAl);
}

/* *r += sum_ijk B(i,j,k) C(i,j,k): one dot when both blocks are contiguous, else a dot per
 * row. */
void dtl_innerprod(dtl_type t, int64_t ni, int64_t nj, int64_t nk, const void *B, int64_t sBi,
                   int64_t sBj, int64_t sBk, const void *C, int64_t sCi, int64_t sCj,
                   int64_t sCk, void *r) {
  if (ni <= 0 || nj <= 0 || nk <= 0) return;
  if (sBk == 1 && sCk == 1 && sBj == nk && sCj == nk && sBi == nj * nk && sCi == nj * nk) {
    dtl_dot(t, ni * nj * nk, B, 1, C, 1, r);
    return;
  }
  for (int64_t i = 0; i < ni; i++)
    for (int64_t j = 0; j < nj; j++)
      dtl_dot(t, nk, CAT(B, t, i * sBi + j * sBj), sBk, CAT(C, t, i * sCi + j * sCj), sCk, r);
}

/* A(i,l) += sum_jk B(i,j,k) C(j,l) D(k,l): the Khatri-Rao product K(j*nk + k, l) =
 * C(j,l) D(k,l) is formed once, then A = B(i, jk) K(jk, l) is one gemm when B's (j,k)
 * block is contiguous, and a gemm per j otherwise. */
static int mttkrp(dtl_type t, int64_t ni, int64_t nj, int64_t nk, int64_t nl, const void *B, int64_t sBi,
                  int64_t sBj, int64_t sBk, const void *C, int64_t sCj, int64_t sCl, const void *D, int64_t sDk,
                  int64_t sDl, bool store, void *A, int64_t sAi, int64_t sAl) {
  if (ni <= 0 || nl <= 0) return 0;
  bool one_gemm = sBk == 1 && sBj == nk && sAl == 1;
  if (store && (!one_gemm || nj <= 0 || nk <= 0)) zero3(t, ni, 1, nl, A, sAi, 0, sAl);
  if (nj <= 0 || nk <= 0) return 0;
  size_t es = dtl_type_size(t);
  char *K = malloc((size_t)nj * (size_t)nk * (size_t)nl * es);
  if (!K) return 1;
  /* K(j*nk + k, l) = C(j, l) D(k, l), one typed loop nest per element type */
#define KR(T)                                                                                  \
  for (int64_t j = 0; j < nj; j++)                                                             \
    for (int64_t k = 0; k < nk; k++) {                                                         \
      T *kp = (T *)K + (size_t)(j * nk + k) * (size_t)nl;                                      \
      const T *cp = (const T *)C + j * sCj, *dp = (const T *)D + k * sDk;                      \
      for (int64_t l = 0; l < nl; l++) kp[l] = cp[l * sCl] * dp[l * sDl];                      \
    }
  switch (t) {
  case DTL_DOUBLE: KR(double) break;
  case DTL_FLOAT: KR(float) break;
  case DTL_INT32: KR(int32_t) break;
  default: KR(int64_t) break;
  }
#undef KR
  if (one_gemm) {
    (store ? dtl_gemm_store : dtl_gemm)(t, 0, 0, ni, nl, nj * nk, B, sBi, K, nl, A, sAi);
  } else if (sBk == 1 && sAl == 1) {
    for (int64_t j = 0; j < nj; j++)
      dtl_gemm(t, 0, 0, ni, nl, nk, CAT(B, t, j * sBj), sBi, K + (size_t)(j * nk) * (size_t)nl * es, nl, A, sAi);
  } else {
    for (int64_t i = 0; i < ni; i++)
      for (int64_t j = 0; j < nj; j++)
        for (int64_t k = 0; k < nk; k++) {
          dtl_axpy(t, nl, CAT(B, t, i * sBi + j * sBj + k * sBk),
                   K + (size_t)(j * nk + k) * (size_t)nl * es, 1, AT(A, t, i * sAi), sAl);
        }
  }
  free(K);
  return 0;
}

int dtl_mttkrp(dtl_type t, int64_t ni, int64_t nj, int64_t nk, int64_t nl, const void *B,
               int64_t sBi, int64_t sBj, int64_t sBk, const void *C, int64_t sCj, int64_t sCl,
               const void *D, int64_t sDk, int64_t sDl, void *A, int64_t sAi, int64_t sAl) {
  return mttkrp(t, ni, nj, nk, nl, B, sBi, sBj, sBk, C, sCj, sCl, D, sDk, sDl, false, A, sAi, sAl);
}

int dtl_mttkrp_store(dtl_type t, int64_t ni, int64_t nj, int64_t nk, int64_t nl, const void *B,
                     int64_t sBi, int64_t sBj, int64_t sBk, const void *C, int64_t sCj, int64_t sCl,
                     const void *D, int64_t sDk, int64_t sDl, void *A, int64_t sAi, int64_t sAl) {
  return mttkrp(t, ni, nj, nk, nl, B, sBi, sBj, sBk, C, sCj, sCl, D, sDk, sDl, true, A, sAi, sAl);
}
