/* blas.c -- the leaf kernels behind `substitute`: CBLAS (OpenBLAS) for double and float,
 * plain loops for the integer types.  Everything is row-major and accumulates (C += ...),
 * except the storing entry points (C = ..., named _store), which the SPMD rewrite "store"
 * calls where one call writes the whole output block. */
#include "distal/runtime.h"
#include "simd.h" /* beside this file */

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* element (i, j) of op(X) for a row-major X with leading dimension ld */
#define AT(X, tr, i, j, ld) ((tr) ? (X)[(j) * (ld) + (i)] : (X)[(i) * (ld) + (j)])

/* BLAS addressing of vector element i for any sign of inc */
static int64_t vidx(int64_t i, int64_t n, int64_t inc) {
  return inc >= 0 ? i * inc : (n - 1 - i) * -inc;
}

#define LOOP_GEMM(T)                                                                               \
  do {                                                                                             \
    const T *a = A, *b = B;                                                                        \
    T *c = C;                                                                                      \
    for (int64_t i = 0; i < m; i++)                                                                \
      for (int64_t p = 0; p < k; p++) {                                                            \
        T aip = AT(a, transa, i, p, lda);                                                          \
        if (!transb)                                                                               \
          for (int64_t j = 0; j < n; j++)                                                          \
            c[i * ldc + j] += aip * b[p * ldb + j];                                                \
        else                                                                                       \
          for (int64_t j = 0; j < n; j++)                                                          \
            c[i * ldc + j] += aip * b[j * ldb + p];                                                \
      }                                                                                            \
  } while (0)

/* CBLAS rejects (prints a message and does nothing) a leading dimension below the number
 * of stored columns, even for a matrix of one row where it is never used; such a ld is
 * raised, and layouts that CBLAS cannot describe at all go to the loops. */
static bool blas_ld(int64_t rows, int64_t cols, int64_t *ld) {
  if (rows <= 1 && *ld < cols)
    *ld = dtl_max(cols, 1);
  return *ld >= dtl_max(cols, 1) && *ld <= INT_MAX;
}

/* C (m x n, ldc) = 0 */
static void zero_rows(dtl_type t, int64_t m, int64_t n, void *C, int64_t ldc) {
  size_t es = dtl_type_size(t);
  for (int64_t i = 0; i < m; i++) memset((char *)C + (size_t)(i * ldc) * es, 0, (size_t)n * es);
}

/* row panels of a tall and skinny product (gemm) */
#define GEMM_PANEL 256
#define GEMM_SKINNY 256
#define GEMM_SHORT 128  /* ... and of a product of few rows with a long sum */
#define GEMM_NARROW 64

static void gemm(dtl_type t, int transa, int transb, int64_t m, int64_t n, int64_t k, const void *A,
                 int64_t lda, const void *B, int64_t ldb, bool store, void *C, int64_t ldc);

/* The threads that may share a product's panels: OpenBLAS's count where it is above 1 and no
 * parallel region is running (inside one, each thread makes its own calls); else 1. */
static int panel_threads(void) {
  int nt = openblas_get_num_threads();
#ifdef _OPENMP
  return nt > 1 && !omp_in_parallel() ? nt : 1;
#else
  return 1;
#endif
}

/* Tall and skinny (TTM's one gemm, a 2-D schedule's local product with a short sum): row
 * panels of GEMM_PANEL, each a call whose panel of A stays in cache while OpenBLAS packs and
 * multiplies it; measured 1.6x over one call at 65536 x 32 x 64 on one thread and never slower
 * at the shapes of bench/roofline.sh.  On nt > 1 threads the panels are shared among them,
 * each a call on one thread (OpenBLAS set to one thread meanwhile: its threaded call on the
 * whole shape measured 0.40 of the dgemm rate on TTM's shape on 2 threads). */
static void gemm_rows(dtl_type t, int transa, int transb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
                      const void *B, int64_t ldb, bool store, void *C, int64_t ldc, int nt) {
  size_t es = dtl_type_size(t);
  int64_t np = (m + GEMM_PANEL - 1) / GEMM_PANEL;
  if (nt > 1)
    openblas_set_num_threads(1);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
#endif
  for (int64_t q = 0; q < np; q++) {
    int64_t r = q * GEMM_PANEL;
    gemm(t, transa, transb, dtl_min(GEMM_PANEL, m - r), n, k, (const char *)A + (size_t)(transa ? r : r * lda) * es, lda, B,
         ldb, store, (char *)C + (size_t)(r * ldc) * es, ldc);
  }
  if (nt > 1)
    openblas_set_num_threads(nt);
}

/* Few short rows and a long sum (MTTKRP's one gemm against the Khatri-Rao product): the sum in
 * panels of GEMM_PANEL, measured 2.2x over one call at 128 x 16 x 16384 on one thread.  On one
 * thread each panel adds to C (the first stores where the call stores); on nt > 1 threads each
 * thread adds its panels into a block of its own (one BLAS thread each) and the blocks are
 * summed into C.  False without memory for the blocks (the caller makes one call then). */
static bool gemm_sums(dtl_type t, int transa, int transb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
                      const void *B, int64_t ldb, bool store, void *C, int64_t ldc, int nt) {
  size_t es = dtl_type_size(t);
  char *part = nt > 1 ? calloc((size_t)nt * (size_t)(m * n), es) : NULL;
  if (nt > 1 && !part)
    return false;
  int64_t np = (k + GEMM_PANEL - 1) / GEMM_PANEL;
  if (nt > 1)
    openblas_set_num_threads(1);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
  {
#ifdef _OPENMP
    char *mine = part ? part + (size_t)omp_get_thread_num() * (size_t)(m * n) * es : NULL;
#pragma omp for schedule(static)
#else
    char *mine = part;
#endif
    for (int64_t q = 0; q < np; q++) {
      int64_t r = q * GEMM_PANEL;
      gemm(t, transa, transb, m, n, dtl_min(GEMM_PANEL, k - r), (const char *)A + (size_t)(transa ? r * lda : r) * es, lda,
           (const char *)B + (size_t)(transb ? r : r * ldb) * es, ldb, mine ? false : store && r == 0, mine ? mine : C,
           mine ? n : ldc);
    }
  }
  if (nt == 1)
    return true;
  openblas_set_num_threads(nt);
  const size_t step = (size_t)(m * n);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      size_t at = (size_t)(i * n + j);
      if (t == DTL_DOUBLE) {
        double s = store ? 0.0 : ((double *)C)[i * ldc + j];
        for (int w = 0; w < nt; w++) s += ((const double *)part)[at + (size_t)w * step];
        ((double *)C)[i * ldc + j] = s;
      } else {
        float s = store ? 0.0f : ((float *)C)[i * ldc + j];
        for (int w = 0; w < nt; w++) s += ((const float *)part)[at + (size_t)w * step];
        ((float *)C)[i * ldc + j] = s;
      }
    }
  free(part);
  return true;
}

/* C = op(A) op(B) (store) or C += op(A) op(B) */
static void gemm(dtl_type t, int transa, int transb, int64_t m, int64_t n, int64_t k, const void *A,
                 int64_t lda, const void *B, int64_t ldb, bool store, void *C, int64_t ldc) {
  if (m <= 0 || n <= 0)
    return;
  bool blas = (t == DTL_DOUBLE || t == DTL_FLOAT) && k > 0 && m <= INT_MAX && n <= INT_MAX && k <= INT_MAX;
  int64_t la = lda, lb = ldb, lc = ldc;
  blas = blas && blas_ld(transa ? k : m, transa ? m : k, &la) &&
         blas_ld(transb ? n : k, transb ? k : n, &lb) && blas_ld(m, n, &lc);
  if (store && !blas)
    zero_rows(t, m, n, C, ldc);
  if (k <= 0)
    return;
  enum CBLAS_TRANSPOSE ta = transa ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE tb = transb ? CblasTrans : CblasNoTrans;
  /* panels on one thread, or shared among OpenBLAS's threads outside a parallel region (inside
   * one, with several BLAS threads, one call) */
  const int nt = blas ? panel_threads() : 1;
  const bool panels = blas && (nt > 1 || openblas_get_num_threads() == 1);
  if (panels && m > 2 * GEMM_PANEL && n <= GEMM_SKINNY && k <= GEMM_SKINNY) {
    gemm_rows(t, transa, transb, m, n, k, A, lda, B, ldb, store, C, ldc, nt);
    return;
  }
  if (panels && k > 2 * GEMM_PANEL && m <= GEMM_SHORT && n <= GEMM_NARROW &&
      gemm_sums(t, transa, transb, m, n, k, A, lda, B, ldb, store, C, ldc, nt))
    return;
  switch (t) {
  case DTL_DOUBLE:
    if (blas)
      cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0, A, (int)la, B, (int)lb,
                  store ? 0.0 : 1.0, C, (int)lc);
    else
      LOOP_GEMM(double);
    break;
  case DTL_FLOAT:
    if (blas)
      cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0f, A, (int)la, B, (int)lb,
                  store ? 0.0f : 1.0f, C, (int)lc);
    else
      LOOP_GEMM(float);
    break;
  case DTL_INT32:
    LOOP_GEMM(int32_t);
    break;
  case DTL_INT64:
    LOOP_GEMM(int64_t);
    break;
  }
}

void dtl_gemm(dtl_type t, int transa, int transb, int64_t m, int64_t n, int64_t k, const void *A,
              int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc) {
  gemm(t, transa, transb, m, n, k, A, lda, B, ldb, false, C, ldc);
}

void dtl_gemm_store(dtl_type t, int transa, int transb, int64_t m, int64_t n, int64_t k,
                    const void *A, int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc) {
  gemm(t, transa, transb, m, n, k, A, lda, B, ldb, true, C, ldc);
}

#define LOOP_GEMV(T)                                                                               \
  do {                                                                                             \
    const T *a = A, *xv = x;                                                                       \
    T *yv = y;                                                                                     \
    for (int64_t i = 0; i < m; i++) {                                                              \
      T s = 0;                                                                                     \
      for (int64_t j = 0; j < n; j++)                                                              \
        s += AT(a, trans, i, j, lda) * xv[vidx(j, n, incx)];                                       \
      yv[vidx(i, m, incy)] += s;                                                                   \
    }                                                                                              \
  } while (0)

static bool blas_inc(int64_t inc) { return inc != 0 && inc <= INT_MAX && inc >= -INT_MAX; }

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx2,fma"))) static void dot4_avx2(const double *b0, const double *b1, const double *b2,
                                                          const double *b3, const double *cv, int64_t n, double *out) {
  __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    __m256d c = _mm256_loadu_pd(cv + k);
    s0 = _mm256_fmadd_pd(_mm256_loadu_pd(b0 + k), c, s0);
    s1 = _mm256_fmadd_pd(_mm256_loadu_pd(b1 + k), c, s1);
    s2 = _mm256_fmadd_pd(_mm256_loadu_pd(b2 + k), c, s2);
    s3 = _mm256_fmadd_pd(_mm256_loadu_pd(b3 + k), c, s3);
  }
  double r[4][4];
  _mm256_storeu_pd(r[0], s0), _mm256_storeu_pd(r[1], s1), _mm256_storeu_pd(r[2], s2), _mm256_storeu_pd(r[3], s3);
  const double *bs[4] = {b0, b1, b2, b3};
  for (int q = 0; q < 4; q++) {
    double t = (r[q][0] + r[q][1]) + (r[q][2] + r[q][3]);
    for (int64_t kk = k; kk < n; kk++) t += bs[q][kk] * cv[kk];
    out[q] = t;
  }
}
#endif

bool dtl_dot4_available(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

void dtl_dot4_rows(const double *b0, const double *b1, const double *b2, const double *b3, const double *c, int64_t n,
                   double *out) {
#if defined(__x86_64__) && defined(__GNUC__)
  dot4_avx2(b0, b1, b2, b3, c, n, out);
#else
  (void)b0, (void)b1, (void)b2, (void)b3, (void)c, (void)n, (void)out;
#endif
}

/* y += A x for a row-major double A with unit strides, four rows at a time (dtl_dot4_rows):
 * measured at the read bandwidth of one core (23.4 GB/s at 4096 x 4096, against 19.8 for
 * OpenBLAS 0.3.21's dgemv and 22.8 for a plain AVX2 sum over the same matrix). */
static void dgemv_rows(int64_t m, int64_t n, const double *A, int64_t lda, const double *x, double *y) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    double o[4];
    const double *a0 = A + i * lda;
    dtl_dot4_rows(a0, a0 + lda, a0 + 2 * lda, a0 + 3 * lda, x, n, o);
    for (int q = 0; q < 4; q++) y[i + q] += o[q];
  }
  for (; i < m; i++) {
    double t = 0;
    for (int64_t j = 0; j < n; j++) t += A[i * lda + j] * x[j];
    y[i] += t;
  }
}

/* op(A) is m x n: A is stored m x n, or n x m when trans */
void dtl_gemv(dtl_type t, int trans, int64_t m, int64_t n, const void *A, int64_t lda,
              const void *x, int64_t incx, void *y, int64_t incy) {
  if (m <= 0 || n <= 0)
    return;
  int64_t rows = trans ? n : m, cols = trans ? m : n, la = lda;
  bool blas = (t == DTL_DOUBLE || t == DTL_FLOAT) && m <= INT_MAX && n <= INT_MAX &&
              blas_ld(rows, cols, &la) && blas_inc(incx) && blas_inc(incy);
  enum CBLAS_TRANSPOSE ta = trans ? CblasTrans : CblasNoTrans;
  /* one thread (or each thread of a parallel region), no transpose, unit strides: the rows four
   * at a time (dgemv_rows) */
  if (t == DTL_DOUBLE && !trans && incx == 1 && incy == 1 && lda >= n && panel_threads() == 1 &&
      dtl_dot4_available()) {
    dgemv_rows(m, n, A, lda, x, y);
    return;
  }
  switch (t) {
  case DTL_DOUBLE:
    if (blas)
      cblas_dgemv(CblasRowMajor, ta, (int)rows, (int)cols, 1.0, A, (int)la, x, (int)incx, 1.0, y,
                  (int)incy);
    else
      LOOP_GEMV(double);
    break;
  case DTL_FLOAT:
    if (blas)
      cblas_sgemv(CblasRowMajor, ta, (int)rows, (int)cols, 1.0f, A, (int)la, x, (int)incx, 1.0f, y,
                  (int)incy);
    else
      LOOP_GEMV(float);
    break;
  case DTL_INT32:
    LOOP_GEMV(int32_t);
    break;
  case DTL_INT64:
    LOOP_GEMV(int64_t);
    break;
  }
}

#define LOOP_DOT(T)                                                                                \
  do {                                                                                             \
    const T *xv = x, *yv = y;                                                                      \
    T s = 0;                                                                                       \
    for (int64_t i = 0; i < n; i++)                                                                \
      s += xv[vidx(i, n, incx)] * yv[vidx(i, n, incy)];                                            \
    *(T *)r += s;                                                                                  \
  } while (0)

void dtl_dot(dtl_type t, int64_t n, const void *x, int64_t incx, const void *y, int64_t incy,
             void *r) {
  if (n <= 0)
    return;
  bool blas = n <= INT_MAX && blas_inc(incx) && blas_inc(incy);
  switch (t) {
  case DTL_DOUBLE:
    if (blas)
      *(double *)r += cblas_ddot((int)n, x, (int)incx, y, (int)incy);
    else
      LOOP_DOT(double);
    break;
  case DTL_FLOAT:
    if (blas)
      *(float *)r += cblas_sdot((int)n, x, (int)incx, y, (int)incy);
    else
      LOOP_DOT(float);
    break;
  case DTL_INT32:
    LOOP_DOT(int32_t);
    break;
  case DTL_INT64:
    LOOP_DOT(int64_t);
    break;
  }
}

#define LOOP_AXPY(T)                                                                               \
  do {                                                                                             \
    const T *xv = x, al = *(const T *)alpha;                                                       \
    T *yv = y;                                                                                     \
    for (int64_t i = 0; i < n; i++)                                                                \
      yv[vidx(i, n, incy)] += al * xv[vidx(i, n, incx)];                                           \
  } while (0)

void dtl_axpy(dtl_type t, int64_t n, const void *alpha, const void *x, int64_t incx, void *y,
              int64_t incy) {
  if (n <= 0)
    return;
  bool blas = n <= INT_MAX && blas_inc(incx) && blas_inc(incy);
  switch (t) {
  case DTL_DOUBLE:
    if (blas)
      cblas_daxpy((int)n, *(const double *)alpha, x, (int)incx, y, (int)incy);
    else
      LOOP_AXPY(double);
    break;
  case DTL_FLOAT:
    if (blas)
      cblas_saxpy((int)n, *(const float *)alpha, x, (int)incx, y, (int)incy);
    else
      LOOP_AXPY(float);
    break;
  case DTL_INT32:
    LOOP_AXPY(int32_t);
    break;
  case DTL_INT64:
    LOOP_AXPY(int64_t);
    break;
  }
}
