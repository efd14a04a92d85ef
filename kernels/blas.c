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
#include <strings.h> /* strcasecmp */
#include <unistd.h>  /* execv */

char *openblas_get_corename(void); /* OpenBLAS's (cblas.h declares it in most releases) */

/* (runtime.h) */
void dtl_blas_core(char **argv) {
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
  if (!argv || !argv[0] || getenv("OPENBLAS_CORETYPE")) return;
  const char *core = openblas_get_corename();
  if (!core || strcasecmp(core, "Prescott") != 0) return;
  __builtin_cpu_init();
  const char *want = NULL;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    want = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    want = "Haswell";
  /* the program's own file by name, so that the process keeps its name (ps, top, perf: "exe"
   * after an exec of /proc/self/exe) */
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (!want || len <= 0 || len >= (ssize_t)sizeof self - 1) return;
  self[len] = '\0';
  if (setenv("OPENBLAS_CORETYPE", want, 1) != 0) return;
  execv(self, argv);
  unsetenv("OPENBLAS_CORETYPE"); /* the exec failed: run on as loaded */
#else
  (void)argv;
#endif
}

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

/* C (m x n) = or += A (m x k) B (k x n), doubles, neither transposed, B of at most THIN_B
 * elements, with AVX2 and FMA (below: call it where dtl_dot4_available()).  Taken for sums
 * longer than THIN_K: at 65536 rows, OpenBLAS 0.3.21's panels measured 22 to 34 GFLOP/s at
 * k = 64 to 256 and n = 16 to 64 on one core, this 44 to 51; at k = 16 to 48 they measured 46
 * to 55, this 30 to 48. */
#define THIN_B (128 * 128)
#define THIN_K 48
/* The AVX-512 tiles (dgemm_thin512) from sums of 8: at 65536 rows on one core of an Emerald
 * Rapids Xeon, n = 16 to 64, they ran 41 to 47 GFLOP/s at k = 8 and 62 to 88 at k = 16 to 64,
 * OpenBLAS's SkylakeX kernels in the panels below 32 to 41 and 37 to 79 */
#define THIN_K512 8
static void dgemm_thin(int64_t m, int64_t n, int64_t k, const double *A, int64_t lda, const double *B, int64_t ldb,
                       bool store, double *C, int64_t ldc);
static void dgemm_thin512(int64_t m, int64_t n, int64_t k, const double *A, int64_t lda, const double *B, int64_t ldb,
                          bool store, double *C, int64_t ldc);
/* The AVX-512 tiles where the CPU has them, unless DISTAL_THIN512=0 (the AVX2 tiles instead:
 * tests/runtime runs both) */
static bool thin512_available(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  const char *e = getenv("DISTAL_THIN512");
  return __builtin_cpu_supports("avx512f") && !(e && !strcmp(e, "0"));
#else
  return false;
#endif
}

/* Tall and skinny (TTM's one gemm, a 2-D schedule's local product with a short sum).  Doubles
 * without transposes go to dgemm_thin where the CPU has AVX2 and FMA, its rows shared among nt
 * threads in blocks of whole six-row tiles: measured 50 GFLOP/s at 65536 x 32 x 64 on one core
 * (0.94 of dgemm's square rate), against 39 for the panels below.  Otherwise row panels of
 * GEMM_PANEL, each a call whose panel of A stays in cache while OpenBLAS packs and multiplies
 * it (1.6x over one call at that shape); on nt > 1 threads the panels are shared among them,
 * each a call on one thread (OpenBLAS set to one thread meanwhile: its threaded call on the
 * whole shape measured 0.40 of the dgemm rate on TTM's shape on 2 threads). */
static void gemm_rows(dtl_type t, int transa, int transb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
                      const void *B, int64_t ldb, bool store, void *C, int64_t ldc, int nt) {
  size_t es = dtl_type_size(t);
  const bool dbl = t == DTL_DOUBLE && !transa && !transb && n * k <= THIN_B && dtl_dot4_available();
  /* narrower than 16 columns each 16-wide tile would compute half padding */
  const bool wide = dbl && n >= 16 && k >= THIN_K512 && thin512_available(), thin = wide || (dbl && k > THIN_K);
  const int64_t rows = thin ? dtl_max(6, (m / nt + 5) / 6 * 6) : GEMM_PANEL, np = (m + rows - 1) / rows;
  if (nt > 1)
    openblas_set_num_threads(1);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
#endif
  for (int64_t q = 0; q < np; q++) {
    int64_t r = q * rows, h = dtl_min(rows, m - r);
    const char *a = (const char *)A + (size_t)(transa ? r : r * lda) * es;
    char *c = (char *)C + (size_t)(r * ldc) * es;
    if (wide)
      dgemm_thin512(h, n, k, (const double *)a, lda, B, ldb, store, (double *)c, ldc);
    else if (thin)
      dgemm_thin(h, n, k, (const double *)a, lda, B, ldb, store, (double *)c, ldc);
    else
      gemm(t, transa, transb, h, n, k, a, lda, B, ldb, store, c, ldc);
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
/* F applied to each of a tile's six rows and its two accumulators (tile_6x8, tile_6x16) */
#define TILE_ROWS(F)                                                                                                   \
  do {                                                                                                                 \
    F(0, c00, c01); F(1, c10, c11); F(2, c20, c21); F(3, c30, c31); F(4, c40, c41); F(5, c50, c51);                    \
  } while (0)
/* One tile of dgemm_thin: C (6 x 8 at c) = or += A (6 x k at a) B (k x 8 at b), stored with
 * non-temporal stores where `stream` (1: of 16 bytes, c aligned to them; 2: of 32).  Every
 * fourth step of the sum it prefetches npf lines, from pf + the step's quarter times npf lines:
 * the caller spreads the next tile's rows of A over its tiles' sums, so that they arrive while
 * this one computes (the hardware prefetcher alone left the product at 0.7 of the in-cache
 * rate). */
__attribute__((target("avx2,fma"), always_inline)) static inline void tile_6x8(int64_t k, const double *a, int64_t lda,
                                                                              const double *b, int64_t ldb, double *c,
                                                                              int64_t ldc, bool store, int stream,
                                                                              const char *pf, int npf) {
  /* twelve accumulators, named so that they stay in registers (TILE_ROWS) */
  __m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
          c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t p = 0; p < k; p++) {
    const __m256d b0 = _mm256_loadu_pd(b + p * ldb), b1 = _mm256_loadu_pd(b + p * ldb + 4);
    if (pf && (p & 3) == 0)
      for (int q = 0; q < npf; q++) _mm_prefetch(pf + ((p >> 2) * npf + q) * 64, _MM_HINT_T0);
#define TILE_ROW(r, x0, x1)                                                                                            \
  do {                                                                                                                 \
    __m256d x = _mm256_broadcast_sd(a + (r) * lda + p);                                                               \
    x0 = _mm256_fmadd_pd(x, b0, x0), x1 = _mm256_fmadd_pd(x, b1, x1);                                                 \
  } while (0)
    TILE_ROWS(TILE_ROW);
#undef TILE_ROW
  }
#define TILE_STORE(r, x0, x1)                                                                                          \
  do {                                                                                                                 \
    double *cr = c + (r) * ldc;                                                                                        \
    if (!store)                                                                                                        \
      x0 = _mm256_add_pd(x0, _mm256_loadu_pd(cr)), x1 = _mm256_add_pd(x1, _mm256_loadu_pd(cr + 4));                    \
    if (stream == 2)                                                                                                   \
      _mm256_stream_pd(cr, x0), _mm256_stream_pd(cr + 4, x1);                                                          \
    else if (stream == 1)                                                                                              \
      _mm_stream_pd(cr, _mm256_castpd256_pd128(x0)), _mm_stream_pd(cr + 2, _mm256_extractf128_pd(x0, 1)),              \
          _mm_stream_pd(cr + 4, _mm256_castpd256_pd128(x1)), _mm_stream_pd(cr + 6, _mm256_extractf128_pd(x1, 1));      \
    else                                                                                                               \
      _mm256_storeu_pd(cr, x0), _mm256_storeu_pd(cr + 4, x1);                                                          \
  } while (0)
  TILE_ROWS(TILE_STORE);
#undef TILE_STORE
}

/* Six-row tiles of C, each over n in tiles of eight columns (B's k x 8 piece stays in the
 * first-level cache: at most THIN_B elements in all); the last w < 8 columns from B's columns
 * copied into a k x 8 block padded with zeros, through a 6 x 8 block of the stack (masked
 * stores measured slow); the rows past the last whole tile through cblas_dgemm.  The output is
 * stored with non-temporal stores where it is larger than THIN_STREAM bytes (it does not stay
 * in cache: the stores skip reading its lines first, measured 1.15x at TTM's shape), aligned
 * for them (to 32 bytes, else 16: malloc's blocks), and of whole tiles (a line written half by
 * them and half by plain stores measured 0.5x).  The next tile's rows of A (the span from its
 * first row to the end of its last) are prefetched in equal parts over this tile's column
 * tiles. */
#define THIN_STREAM (4 << 20)
/* The body of dgemm_thin (W = 8, TILE tile_6x8) and dgemm_thin512 (16, tile_6x16): STREAM, an
 * expression of the tail's width w, says how the output is stored (0: as usual) */
#define THIN_BODY(W, TILE, STREAM)                                                                                     \
  do {                                                                                                                 \
    const int64_t nt = (n + (W)-1) / (W), steps = (k + 3) / 4, span = (5 * lda + k) * 8, full = n / (W) * (W),         \
                  w = n - full;                                                                                        \
    const int npf = (int)((span + 64 * nt * steps - 1) / (64 * nt * steps));                                           \
    const int stream = (STREAM);                                                                                       \
    double bt[THIN_B / (W) * (W) + (W)], ct[6 * (W)]; /* B's last columns, padded; a tile of them */                   \
    if (w)                                                                                                             \
      for (int64_t p = 0; p < k; p++)                                                                                  \
        for (int64_t j = 0; j < (W); j++) bt[p * (W) + j] = j < w ? B[p * ldb + full + j] : 0.0;                       \
    int64_t i = 0;                                                                                                     \
    for (; i + 6 <= m; i += 6) {                                                                                       \
      const char *next = i + 12 <= m ? (const char *)(A + (i + 6) * lda) : NULL;                                       \
      for (int64_t j = 0; j < full; j += (W))                                                                          \
        TILE(k, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc, store, stream,                                     \
             next ? next + (j / (W)) * steps * npf * 64 : NULL, npf);                                                  \
      if (w) {                                                                                                         \
        TILE(k, A + i * lda, lda, bt, (W), ct, (W), true, 0, next ? next + (full / (W)) * steps * npf * 64 : NULL,     \
             npf);                                                                                                     \
        for (int r = 0; r < 6; r++) {                                                                                  \
          double *cr = C + (i + r) * ldc + full;                                                                       \
          for (int64_t j = 0; j < w; j++) cr[j] = ct[r * (W) + j] + (store ? 0.0 : cr[j]);                             \
        }                                                                                                              \
      }                                                                                                                \
    }                                                                                                                  \
    if (stream)                                                                                                        \
      _mm_sfence();                                                                                                    \
    if (i < m)                                                                                                         \
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(m - i), (int)n, (int)k, 1.0, A + i * lda, (int)lda, \
                  B, (int)ldb, store ? 0.0 : 1.0, C + i * ldc, (int)ldc);                                              \
  } while (0)
__attribute__((target("avx2,fma"))) static void dgemm_thin(int64_t m, int64_t n, int64_t k, const double *A, int64_t lda,
                                                           const double *B, int64_t ldb, bool store, double *C,
                                                           int64_t ldc) {
  THIN_BODY(8, tile_6x8,
            !store || w || (size_t)(m * n) * 8 <= THIN_STREAM || ldc % 2 || (uintptr_t)C % 16 ? 0
            : ldc % 4 || (uintptr_t)C % 32                                                   ? 1
                                                                                               : 2);
}

/* tile_6x8 with AVX-512: C (6 x 16 at c), two 8-wide accumulators a row; stream: non-temporal
 * stores of 64 bytes (c aligned to them) */
__attribute__((target("avx512f"), always_inline)) static inline void tile_6x16(int64_t k, const double *a, int64_t lda,
                                                                              const double *b, int64_t ldb, double *c,
                                                                              int64_t ldc, bool store, int stream,
                                                                              const char *pf, int npf) {
  __m512d c00 = _mm512_setzero_pd(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
          c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t p = 0; p < k; p++) {
    const __m512d b0 = _mm512_loadu_pd(b + p * ldb), b1 = _mm512_loadu_pd(b + p * ldb + 8);
    if (pf && (p & 3) == 0)
      for (int q = 0; q < npf; q++) _mm_prefetch(pf + ((p >> 2) * npf + q) * 64, _MM_HINT_T0);
#define TILE_ROW(r, x0, x1)                                                                                            \
  do {                                                                                                                 \
    __m512d x = _mm512_set1_pd(a[(r) * lda + p]);                                                                     \
    x0 = _mm512_fmadd_pd(x, b0, x0), x1 = _mm512_fmadd_pd(x, b1, x1);                                                 \
  } while (0)
    TILE_ROWS(TILE_ROW);
#undef TILE_ROW
  }
#define TILE_STORE(r, x0, x1)                                                                                          \
  do {                                                                                                                 \
    double *cr = c + (r) * ldc;                                                                                        \
    if (!store)                                                                                                        \
      x0 = _mm512_add_pd(x0, _mm512_loadu_pd(cr)), x1 = _mm512_add_pd(x1, _mm512_loadu_pd(cr + 8));                    \
    if (stream)                                                                                                        \
      _mm512_stream_pd(cr, x0), _mm512_stream_pd(cr + 8, x1);                                                          \
    else                                                                                                               \
      _mm512_storeu_pd(cr, x0), _mm512_storeu_pd(cr + 8, x1);                                                          \
  } while (0)
  TILE_ROWS(TILE_STORE);
#undef TILE_STORE
}

#undef TILE_ROWS

/* dgemm_thin with AVX-512 (where the CPU has it): tiles of 6 x 16, B's k x 16 pieces, the
 * last w < 16 columns padded as there; the output streamed where C and its rows are aligned to
 * 64 bytes (else stored as usual).  At 65536 rows on one core of an Emerald Rapids Xeon it ran
 * 45 to 79 GFLOP/s at n = 16 to 128 and k = 64 to 256, where the AVX2 tiles ran 32 to 43 and one
 * call of OpenBLAS 0.3.21's SkylakeX kernels 13 to 42 (its square dgemm: 59). */
__attribute__((target("avx512f"))) static void dgemm_thin512(int64_t m, int64_t n, int64_t k, const double *A,
                                                             int64_t lda, const double *B, int64_t ldb, bool store,
                                                             double *C, int64_t ldc) {
  THIN_BODY(16, tile_6x16, store && !w && (size_t)(m * n) * 8 > THIN_STREAM && ldc % 8 == 0 && (uintptr_t)C % 64 == 0);
}
#undef THIN_BODY
#else
static void dgemm_thin512(int64_t m, int64_t n, int64_t k, const double *A, int64_t lda, const double *B, int64_t ldb,
                          bool store, double *C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, A, (int)lda, B, (int)ldb,
              store ? 0.0 : 1.0, C, (int)ldc);
}
static void dgemm_thin(int64_t m, int64_t n, int64_t k, const double *A, int64_t lda, const double *B, int64_t ldb,
                       bool store, double *C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, A, (int)lda, B, (int)ldb,
              store ? 0.0 : 1.0, C, (int)ldc);
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
