/* device_kernels.cu -- the kernels of libdistal_cuda: strided box copies (packing and
 * unpacking of pieces, with or without accumulation) and the leaf kernels that cuBLAS does
 * not cover (integer gemm and gemv, dot, axpy, TTV, TTM, inner product, MTTKRP).
 *
 * Written once in the macros of distal/kernel.cuh, so that nvcc builds them for the GPU and
 * a C compiler builds them as loops for the host emulation of the test suite: no templates
 * and no C++; each kernel is stamped out per element type by a C macro, and a launcher per
 * kernel picks the type at run time.  The launchers (device.h) have C linkage.
 *
 * Simplicity over speed: one work item per output element, looping over the summed index
 * (the large float and double products go to cuBLAS in device.c).  Sums over whole arrays
 * (dot, inner product) run in two steps: many partial sums, each over a strided subset of
 * the elements so that neighbouring work items read neighbouring elements, then a few
 * work items add the partials atomically into the result. */
#include <cuda_runtime.h>

#include "distal/kernel.cuh"
#include "device.h"

/* Every kernel once per element type: X(suffix, C type, atomic add of kernel.cuh). */
#define EACH_TYPE(X)                                                                           \
  X(f64, double, dtl_atomic_add_double)                                                        \
  X(f32, float, dtl_atomic_add_float)                                                          \
  X(i32, int32_t, dtl_atomic_add_int32)                                                        \
  X(i64, int64_t, dtl_atomic_add_int64)

/* Launch the variant of kernel dtl_cuk_<kernel>_<suffix> for the launcher's `type`.  (The
 * kernels have external linkage under nvcc, hence the prefix.) */
#define LAUNCH_TYPED(kernel, total, stream, args)                                              \
  switch (type) {                                                                              \
  case DTL_CUK_DOUBLE:                                                                         \
    return DTL_LAUNCH(dtl_cuk_##kernel##_f64, total, stream, args);                            \
  case DTL_CUK_FLOAT:                                                                          \
    return DTL_LAUNCH(dtl_cuk_##kernel##_f32, total, stream, args);                            \
  case DTL_CUK_INT32:                                                                          \
    return DTL_LAUNCH(dtl_cuk_##kernel##_i32, total, stream, args);                            \
  case DTL_CUK_INT64:                                                                          \
    return DTL_LAUNCH(dtl_cuk_##kernel##_i64, total, stream, args);                            \
  }                                                                                            \
  return DTL_CUK_BAD_TYPE

/* Output update: atomic where work items may share an output element. */
#define UPDATE(ADD, p, v, atomic)                                                              \
  do {                                                                                         \
    if (atomic)                                                                                \
      ADD((p), (v));                                                                           \
    else                                                                                       \
      *(p) += (v);                                                                             \
  } while (0)

/* BLAS addressing of vector element i for any sign of inc (as kernels/blas.c). */
DTL_HD int64_t cuk_vidx(int64_t i, int64_t n, int64_t inc) {
  return inc >= 0 ? i * inc : (n - 1 - i) * -inc;
}

/* ---- strided copy ------------------------------------------------------------------------ */
typedef struct {
  void *dst;
  const void *src;
  int nd, accumulate;
  int64_t total;
  int64_t ext[DTL_CUK_MAX_DIMS], sstride[DTL_CUK_MAX_DIMS], dstride[DTL_CUK_MAX_DIMS];
} copy_args;

/* The loops over dims have a constant trip count so that they unroll and the argument
 * arrays are read with constant indices; copies of fewer than 2^32 elements (all but the
 * largest) decode their indices with 32-bit divisions, which are much cheaper than 64-bit
 * ones on the device. */
#define DEFINE_COPY(sfx, T, ADD)                                                              \
  DTL_KERNEL(dtl_cuk_copy_##sfx, copy_args) {                                                 \
    T *dst = (T *)a.dst;                                                                      \
    const T *src = (const T *)a.src;                                                          \
    const int narrow = a.total <= (int64_t)UINT32_MAX;                                        \
    DTL_FOR_EACH(t, a.total) {                                                                \
      int64_t so = 0, dof = 0;                                                                \
      if (narrow) {                                                                           \
        uint32_t rest = (uint32_t)t;                                                          \
        for (int d = DTL_CUK_MAX_DIMS - 1; d >= 0; d--)                                       \
          if (d < a.nd) {                                                                     \
            uint32_t e = (uint32_t)a.ext[d], i = rest % e;                                    \
            rest /= e;                                                                        \
            so += (int64_t)i * a.sstride[d];                                                  \
            dof += (int64_t)i * a.dstride[d];                                                 \
          }                                                                                   \
      } else {                                                                                \
        int64_t rest = t;                                                                     \
        for (int d = DTL_CUK_MAX_DIMS - 1; d >= 0; d--)                                       \
          if (d < a.nd) {                                                                     \
            int64_t i = rest % a.ext[d];                                                      \
            rest /= a.ext[d];                                                                 \
            so += i * a.sstride[d];                                                           \
            dof += i * a.dstride[d];                                                          \
          }                                                                                   \
      }                                                                                       \
      if (a.accumulate)                                                                       \
        dst[dof] += src[so];                                                                  \
      else                                                                                    \
        dst[dof] = src[so];                                                                   \
    }                                                                                         \
  }
EACH_TYPE(DEFINE_COPY)

DTL_EXTERN_C int dtl_cuk_copy(int type, void *dst, const void *src, int nd, const int64_t *ext,
                              const int64_t *sstride, const int64_t *dstride, int accumulate,
                              void *stream) {
  copy_args a;
  a.dst = dst;
  a.src = src;
  a.nd = nd;
  a.accumulate = accumulate;
  a.total = 1;
  for (int d = 0; d < DTL_CUK_MAX_DIMS; d++) {
    a.ext[d] = d < nd ? ext[d] : 1;
    a.sstride[d] = d < nd ? sstride[d] : 0;
    a.dstride[d] = d < nd ? dstride[d] : 0;
    a.total *= a.ext[d];
  }
  int64_t total = a.total;
  LAUNCH_TYPED(copy, total, stream, a);
}

/* ---- gemm, gemv, axpy -------------------------------------------------------------------- */
typedef struct {
  const void *A, *B;
  void *C;
  int64_t m, n, k, lda, ldb, ldc;
  int transa, transb, atomic;
} gemm_args;

#define DEFINE_GEMM(sfx, T, ADD)                                                               \
  DTL_KERNEL(dtl_cuk_gemm_##sfx, gemm_args) {                                                  \
    const T *A = (const T *)a.A, *B = (const T *)a.B;                                          \
    T *C = (T *)a.C;                                                                           \
    DTL_FOR_EACH(t, a.m * a.n) {                                                               \
      int64_t i = t / a.n, j = t % a.n;                                                        \
      T s = 0;                                                                                 \
      for (int64_t p = 0; p < a.k; p++)                                                        \
        s += (a.transa ? A[p * a.lda + i] : A[i * a.lda + p]) *                                \
             (a.transb ? B[j * a.ldb + p] : B[p * a.ldb + j]);                                 \
      UPDATE(ADD, &C[i * a.ldc + j], s, a.atomic);                                             \
    }                                                                                          \
  }
EACH_TYPE(DEFINE_GEMM)

DTL_EXTERN_C int dtl_cuk_gemm(int type, int transa, int transb, int64_t m, int64_t n, int64_t k,
                              const void *A, int64_t lda, const void *B, int64_t ldb, void *C,
                              int64_t ldc, int atomic, void *stream) {
  gemm_args a;
  a.A = A, a.B = B, a.C = C;
  a.m = m, a.n = n, a.k = k, a.lda = lda, a.ldb = ldb, a.ldc = ldc;
  a.transa = transa != 0, a.transb = transb != 0, a.atomic = atomic;
  int64_t total = m > 0 && n > 0 && k > 0 ? m * n : 0;
  LAUNCH_TYPED(gemm, total, stream, a);
}

typedef struct {
  const void *A, *x;
  void *y;
  int64_t m, n, lda, incx, incy;
  int trans, atomic;
} gemv_args;

#define DEFINE_GEMV(sfx, T, ADD)                                                               \
  DTL_KERNEL(dtl_cuk_gemv_##sfx, gemv_args) {                                                  \
    const T *A = (const T *)a.A, *x = (const T *)a.x;                                          \
    T *y = (T *)a.y;                                                                           \
    DTL_FOR_EACH(i, a.m) {                                                                     \
      T s = 0;                                                                                 \
      for (int64_t j = 0; j < a.n; j++)                                                        \
        s += (a.trans ? A[j * a.lda + i] : A[i * a.lda + j]) * x[cuk_vidx(j, a.n, a.incx)];    \
      UPDATE(ADD, &y[cuk_vidx(i, a.m, a.incy)], s, a.atomic);                                  \
    }                                                                                          \
  }
EACH_TYPE(DEFINE_GEMV)

DTL_EXTERN_C int dtl_cuk_gemv(int type, int trans, int64_t m, int64_t n, const void *A,
                              int64_t lda, const void *x, int64_t incx, void *y, int64_t incy,
                              int atomic, void *stream) {
  gemv_args a;
  a.A = A, a.x = x, a.y = y;
  a.m = m, a.n = n, a.lda = lda, a.incx = incx, a.incy = incy;
  a.trans = trans != 0, a.atomic = atomic;
  int64_t total = m > 0 && n > 0 ? m : 0;
  LAUNCH_TYPED(gemv, total, stream, a);
}

typedef struct {
  const void *x;
  void *y;
  int64_t n, incx, incy;
  int atomic;
  union {
    double f64;
    float f32;
    int32_t i32;
    int64_t i64;
  } alpha;
} axpy_args;

#define DEFINE_AXPY(sfx, T, ADD)                                                               \
  DTL_KERNEL(dtl_cuk_axpy_##sfx, axpy_args) {                                                  \
    const T *x = (const T *)a.x;                                                               \
    T *y = (T *)a.y;                                                                           \
    DTL_FOR_EACH(i, a.n) {                                                                     \
      T v = a.alpha.sfx * x[cuk_vidx(i, a.n, a.incx)];                                         \
      UPDATE(ADD, &y[cuk_vidx(i, a.n, a.incy)], v, a.atomic);                                  \
    }                                                                                          \
  }
EACH_TYPE(DEFINE_AXPY)

DTL_EXTERN_C int dtl_cuk_axpy(int type, int64_t n, const void *alpha, const void *x,
                              int64_t incx, void *y, int64_t incy, int atomic, void *stream) {
  axpy_args a;
  a.x = x, a.y = y, a.n = n, a.incx = incx, a.incy = incy, a.atomic = atomic;
  a.alpha.i64 = 0;
  switch (type) {
  case DTL_CUK_DOUBLE:
    a.alpha.f64 = *(const double *)alpha;
    break;
  case DTL_CUK_FLOAT:
    a.alpha.f32 = *(const float *)alpha;
    break;
  case DTL_CUK_INT32:
    a.alpha.i32 = *(const int32_t *)alpha;
    break;
  case DTL_CUK_INT64:
    a.alpha.i64 = *(const int64_t *)alpha;
    break;
  default:
    return DTL_CUK_BAD_TYPE;
  }
  int64_t total = n > 0 ? n : 0;
  LAUNCH_TYPED(axpy, total, stream, a);
}

/* ---- sums: dot and inner product --------------------------------------------------------- */
typedef struct {
  const void *x, *y;
  void *parts;
  int64_t n, incx, incy, nparts;
} dot_args;

#define DEFINE_DOT(sfx, T, ADD)                                                                \
  DTL_KERNEL(dtl_cuk_dot_##sfx, dot_args) {                                                    \
    const T *x = (const T *)a.x, *y = (const T *)a.y;                                          \
    T *parts = (T *)a.parts;                                                                   \
    DTL_FOR_EACH(p, a.nparts) {                                                                \
      T s = 0;                                                                                 \
      for (int64_t i = p; i < a.n; i += a.nparts)                                              \
        s += x[cuk_vidx(i, a.n, a.incx)] * y[cuk_vidx(i, a.n, a.incy)];                        \
      parts[p] = s;                                                                            \
    }                                                                                          \
  }
EACH_TYPE(DEFINE_DOT)

DTL_EXTERN_C int dtl_cuk_dot_parts(int type, int64_t n, const void *x, int64_t incx,
                                   const void *y, int64_t incy, void *parts, int64_t nparts,
                                   void *stream) {
  dot_args a;
  a.x = x, a.y = y, a.parts = parts;
  a.n = n, a.incx = incx, a.incy = incy, a.nparts = nparts;
  int64_t total = nparts > 0 ? nparts : 0;
  LAUNCH_TYPED(dot, total, stream, a);
}

typedef struct {
  const void *B, *C;
  void *parts;
  int64_t ni, nj, nk, sBi, sBj, sBk, sCi, sCj, sCk, nparts;
} innerprod_args;

#define DEFINE_INNERPROD(sfx, T, ADD)                                                          \
  DTL_KERNEL(dtl_cuk_innerprod_##sfx, innerprod_args) {                                        \
    const T *B = (const T *)a.B, *C = (const T *)a.C;                                          \
    T *parts = (T *)a.parts;                                                                   \
    const int64_t total = a.ni * a.nj * a.nk;                                                  \
    DTL_FOR_EACH(p, a.nparts) {                                                                \
      T s = 0;                                                                                 \
      for (int64_t e = p; e < total; e += a.nparts) {                                          \
        int64_t k = e % a.nk, r = e / a.nk, j = r % a.nj, i = r / a.nj;                        \
        s += B[i * a.sBi + j * a.sBj + k * a.sBk] * C[i * a.sCi + j * a.sCj + k * a.sCk];      \
      }                                                                                        \
      parts[p] = s;                                                                            \
    }                                                                                          \
  }
EACH_TYPE(DEFINE_INNERPROD)

DTL_EXTERN_C int dtl_cuk_innerprod_parts(int type, int64_t ni, int64_t nj, int64_t nk,
                                         const void *B, int64_t sBi, int64_t sBj, int64_t sBk,
                                         const void *C, int64_t sCi, int64_t sCj, int64_t sCk,
                                         void *parts, int64_t nparts, void *stream) {
  innerprod_args a;
  a.B = B, a.C = C, a.parts = parts;
  a.ni = ni, a.nj = nj, a.nk = nk;
  a.sBi = sBi, a.sBj = sBj, a.sBk = sBk, a.sCi = sCi, a.sCj = sCj, a.sCk = sCk;
  a.nparts = nparts;
  int64_t total = ni > 0 && nj > 0 && nk > 0 && nparts > 0 ? nparts : 0;
  LAUNCH_TYPED(innerprod, total, stream, a);
}

typedef struct {
  const void *parts;
  void *r;
  int64_t nparts, nsums;
} sum_args;

#define DEFINE_SUM(sfx, T, ADD)                                                                \
  DTL_KERNEL(dtl_cuk_sum_##sfx, sum_args) {                                                    \
    const T *parts = (const T *)a.parts;                                                       \
    DTL_FOR_EACH(q, a.nsums) {                                                                 \
      T s = 0;                                                                                 \
      for (int64_t p = q; p < a.nparts; p += a.nsums)                                          \
        s += parts[p];                                                                         \
      ADD((T *)a.r, s);                                                                        \
    }                                                                                          \
  }
EACH_TYPE(DEFINE_SUM)

/* Few enough atomic adds into the one result that they do not queue up. */
#define MAX_SUMS 1024

DTL_EXTERN_C int dtl_cuk_sum_parts(int type, const void *parts, int64_t nparts, void *r,
                                   void *stream) {
  sum_args a;
  a.parts = parts, a.r = r, a.nparts = nparts;
  a.nsums = nparts < MAX_SUMS ? nparts : MAX_SUMS;
  int64_t total = a.nsums > 0 ? a.nsums : 0;
  LAUNCH_TYPED(sum, total, stream, a);
}

/* ---- tensor kernels ---------------------------------------------------------------------- */
typedef struct {
  const void *B, *c;
  void *A;
  int64_t ni, nj, nk, sBi, sBj, sBk, sc, sAi, sAj;
  int atomic;
} ttv_args;

#define DEFINE_TTV(sfx, T, ADD)                                                                \
  DTL_KERNEL(dtl_cuk_ttv_##sfx, ttv_args) {                                                    \
    const T *B = (const T *)a.B, *c = (const T *)a.c;                                          \
    T *A = (T *)a.A;                                                                           \
    DTL_FOR_EACH(t, a.ni * a.nj) {                                                             \
      int64_t i = t / a.nj, j = t % a.nj;                                                      \
      const T *b = B + i * a.sBi + j * a.sBj;                                                  \
      T s = 0;                                                                                 \
      for (int64_t k = 0; k < a.nk; k++)                                                       \
        s += b[k * a.sBk] * c[k * a.sc];                                                       \
      UPDATE(ADD, &A[i * a.sAi + j * a.sAj], s, a.atomic);                                     \
    }                                                                                          \
  }
EACH_TYPE(DEFINE_TTV)

DTL_EXTERN_C int dtl_cuk_ttv(int type, int64_t ni, int64_t nj, int64_t nk, const void *B,
                             int64_t sBi, int64_t sBj, int64_t sBk, const void *c, int64_t sc,
                             void *A, int64_t sAi, int64_t sAj, int atomic, void *stream) {
  ttv_args a;
  a.B = B, a.c = c, a.A = A;
  a.ni = ni, a.nj = nj, a.nk = nk, a.sBi = sBi, a.sBj = sBj, a.sBk = sBk, a.sc = sc;
  a.sAi = sAi, a.sAj = sAj, a.atomic = atomic;
  int64_t total = ni > 0 && nj > 0 && nk > 0 ? ni * nj : 0;
  LAUNCH_TYPED(ttv, total, stream, a);
}

typedef struct {
  const void *B, *C;
  void *A;
  int64_t ni, nj, nk, nl, sBi, sBj, sBk, sCk, sCl, sAi, sAj, sAl;
  int atomic;
} ttm_args;

#define DEFINE_TTM(sfx, T, ADD)                                                                \
  DTL_KERNEL(dtl_cuk_ttm_##sfx, ttm_args) {                                                    \
    const T *B = (const T *)a.B, *C = (const T *)a.C;                                          \
    T *A = (T *)a.A;                                                                           \
    DTL_FOR_EACH(t, a.ni * a.nj * a.nl) {                                                      \
      int64_t l = t % a.nl, r = t / a.nl, j = r % a.nj, i = r / a.nj;                          \
      const T *b = B + i * a.sBi + j * a.sBj, *cl = C + l * a.sCl;                             \
      T s = 0;                                                                                 \
      for (int64_t k = 0; k < a.nk; k++)                                                       \
        s += b[k * a.sBk] * cl[k * a.sCk];                                                     \
      UPDATE(ADD, &A[i * a.sAi + j * a.sAj + l * a.sAl], s, a.atomic);                         \
    }                                                                                          \
  }
EACH_TYPE(DEFINE_TTM)

DTL_EXTERN_C int dtl_cuk_ttm(int type, int64_t ni, int64_t nj, int64_t nk, int64_t nl,
                             const void *B, int64_t sBi, int64_t sBj, int64_t sBk, const void *C,
                             int64_t sCk, int64_t sCl, void *A, int64_t sAi, int64_t sAj,
                             int64_t sAl, int atomic, void *stream) {
  ttm_args a;
  a.B = B, a.C = C, a.A = A;
  a.ni = ni, a.nj = nj, a.nk = nk, a.nl = nl;
  a.sBi = sBi, a.sBj = sBj, a.sBk = sBk, a.sCk = sCk, a.sCl = sCl;
  a.sAi = sAi, a.sAj = sAj, a.sAl = sAl, a.atomic = atomic;
  int64_t total = ni > 0 && nj > 0 && nk > 0 && nl > 0 ? ni * nj * nl : 0;
  LAUNCH_TYPED(ttm, total, stream, a);
}

typedef struct {
  const void *B, *C, *D;
  void *A;
  int64_t ni, nj, nk, nl, sBi, sBj, sBk, sCj, sCl, sDk, sDl, sAi, sAl;
  int atomic;
} mttkrp_args;

/* B (C D), the association of kernels/tensor_kernels.c (which forms C D first). */
#define DEFINE_MTTKRP(sfx, T, ADD)                                                             \
  DTL_KERNEL(dtl_cuk_mttkrp_##sfx, mttkrp_args) {                                              \
    const T *B = (const T *)a.B, *C = (const T *)a.C, *D = (const T *)a.D;                     \
    T *A = (T *)a.A;                                                                           \
    DTL_FOR_EACH(t, a.ni * a.nl) {                                                             \
      int64_t l = t % a.nl, i = t / a.nl;                                                      \
      T s = 0;                                                                                 \
      for (int64_t j = 0; j < a.nj; j++) {                                                     \
        const T *b = B + i * a.sBi + j * a.sBj;                                                \
        T c = C[j * a.sCj + l * a.sCl];                                                        \
        for (int64_t k = 0; k < a.nk; k++)                                                     \
          s += b[k * a.sBk] * (c * D[k * a.sDk + l * a.sDl]);                                  \
      }                                                                                        \
      UPDATE(ADD, &A[i * a.sAi + l * a.sAl], s, a.atomic);                                     \
    }                                                                                          \
  }
EACH_TYPE(DEFINE_MTTKRP)

DTL_EXTERN_C int dtl_cuk_mttkrp(int type, int64_t ni, int64_t nj, int64_t nk, int64_t nl,
                                const void *B, int64_t sBi, int64_t sBj, int64_t sBk,
                                const void *C, int64_t sCj, int64_t sCl, const void *D,
                                int64_t sDk, int64_t sDl, void *A, int64_t sAi, int64_t sAl,
                                int atomic, void *stream) {
  mttkrp_args a;
  a.B = B, a.C = C, a.D = D, a.A = A;
  a.ni = ni, a.nj = nj, a.nk = nk, a.nl = nl;
  a.sBi = sBi, a.sBj = sBj, a.sBk = sBk, a.sCj = sCj, a.sCl = sCl, a.sDk = sDk, a.sDl = sDl;
  a.sAi = sAi, a.sAl = sAl, a.atomic = atomic;
  int64_t total = ni > 0 && nj > 0 && nk > 0 && nl > 0 ? ni * nl : 0;
  LAUNCH_TYPED(mttkrp, total, stream, a);
}

typedef struct {
  const void *C, *D;
  void *K;
  int64_t nj, nk, nl, sCj, sCl, sDk, sDl;
} khatri_rao_args;

#define DEFINE_KHATRI_RAO(sfx, T, ADD)                                                         \
  DTL_KERNEL(dtl_cuk_khatri_rao_##sfx, khatri_rao_args) {                                      \
    const T *C = (const T *)a.C, *D = (const T *)a.D;                                          \
    T *K = (T *)a.K;                                                                           \
    DTL_FOR_EACH(t, a.nj * a.nk * a.nl) {                                                      \
      int64_t l = t % a.nl, r = t / a.nl, k = r % a.nk, j = r / a.nk;                          \
      K[t] = C[j * a.sCj + l * a.sCl] * D[k * a.sDk + l * a.sDl];                              \
    }                                                                                          \
  }
EACH_TYPE(DEFINE_KHATRI_RAO)

DTL_EXTERN_C int dtl_cuk_khatri_rao(int type, int64_t nj, int64_t nk, int64_t nl, const void *C,
                                    int64_t sCj, int64_t sCl, const void *D, int64_t sDk,
                                    int64_t sDl, void *K, void *stream) {
  khatri_rao_args a;
  a.C = C, a.D = D, a.K = K;
  a.nj = nj, a.nk = nk, a.nl = nl, a.sCj = sCj, a.sCl = sCl, a.sDk = sDk, a.sDl = sDl;
  int64_t total = nj > 0 && nk > 0 && nl > 0 ? nj * nk * nl : 0;
  LAUNCH_TYPED(khatri_rao, total, stream, a);
}
