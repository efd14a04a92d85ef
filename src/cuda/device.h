/* device.h -- the kernels of libdistal_cuda (device_kernels.cu) as device.c calls them.
 *
 * Plain C without CUDA types, so that it is included both by device.c (a C file that sees
 * the CUDA runtime headers) and by device_kernels.cu (nvcc, or a C compiler for the host
 * emulation).  Every launcher queues its kernel on `stream` (a cudaStream_t) and returns
 * the cudaError_t of the launch as int (0 = success), or DTL_CUK_BAD_TYPE for an element
 * type it does not know.  Pointers are device pointers unless said otherwise; strides and
 * leading dimensions are in elements; every output is accumulated into (+=) except by
 * copies without `accumulate`.  `atomic` != 0 says that distinct work items may update the
 * same output element (aliasing output strides), so they add atomically. */
#ifndef DISTAL_CUDA_DEVICE_H
#define DISTAL_CUDA_DEVICE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element type codes: the values of dtl_type (distal/runtime.h). */
enum { DTL_CUK_DOUBLE = 0, DTL_CUK_FLOAT = 1, DTL_CUK_INT32 = 2, DTL_CUK_INT64 = 3 };
#define DTL_CUK_BAD_TYPE (-1)
/* Dims of a strided copy: DTL_MAX_DIMS of distal/runtime.h. */
#define DTL_CUK_MAX_DIMS 8

/* dst[i . dstride] (+)= src[i . sstride] for every multi-index i < ext (nd dims, 0 <= nd <=
 * DTL_CUK_MAX_DIMS; nd = 0 copies one element): the copy of a box between row-major
 * blocks, packing and unpacking included. */
int dtl_cuk_copy(int type, void *dst, const void *src, int nd, const int64_t *ext,
                 const int64_t *sstride, const int64_t *dstride, int accumulate, void *stream);

/* As dtl_gemm (row-major, transa/transb 0 or 1): C (m x n, ldc) += op(A) op(B). */
int dtl_cuk_gemm(int type, int transa, int transb, int64_t m, int64_t n, int64_t k,
                 const void *A, int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc,
                 int atomic, void *stream);
/* As dtl_gemv: y (m) += op(A) x, with BLAS addressing of x and y for any sign of inc. */
int dtl_cuk_gemv(int type, int trans, int64_t m, int64_t n, const void *A, int64_t lda,
                 const void *x, int64_t incx, void *y, int64_t incy, int atomic, void *stream);
/* As dtl_axpy: y += alpha x; alpha is a host pointer to one element. */
int dtl_cuk_axpy(int type, int64_t n, const void *alpha, const void *x, int64_t incx, void *y,
                 int64_t incy, int atomic, void *stream);

/* Sums in two steps: a parts kernel writes nparts partial sums into parts (nparts
 * elements), then dtl_cuk_sum_parts adds all of them into *r. */
int dtl_cuk_dot_parts(int type, int64_t n, const void *x, int64_t incx, const void *y,
                      int64_t incy, void *parts, int64_t nparts, void *stream);
int dtl_cuk_innerprod_parts(int type, int64_t ni, int64_t nj, int64_t nk, const void *B,
                            int64_t sBi, int64_t sBj, int64_t sBk, const void *C, int64_t sCi,
                            int64_t sCj, int64_t sCk, void *parts, int64_t nparts, void *stream);
int dtl_cuk_sum_parts(int type, const void *parts, int64_t nparts, void *r, void *stream);

/* As dtl_ttv, dtl_ttm and dtl_mttkrp: one work item per output element. */
int dtl_cuk_ttv(int type, int64_t ni, int64_t nj, int64_t nk, const void *B, int64_t sBi,
                int64_t sBj, int64_t sBk, const void *c, int64_t sc, void *A, int64_t sAi,
                int64_t sAj, int atomic, void *stream);
int dtl_cuk_ttm(int type, int64_t ni, int64_t nj, int64_t nk, int64_t nl, const void *B,
                int64_t sBi, int64_t sBj, int64_t sBk, const void *C, int64_t sCk, int64_t sCl,
                void *A, int64_t sAi, int64_t sAj, int64_t sAl, int atomic, void *stream);
int dtl_cuk_mttkrp(int type, int64_t ni, int64_t nj, int64_t nk, int64_t nl, const void *B,
                   int64_t sBi, int64_t sBj, int64_t sBk, const void *C, int64_t sCj,
                   int64_t sCl, const void *D, int64_t sDk, int64_t sDl, void *A, int64_t sAi,
                   int64_t sAl, int atomic, void *stream);
/* The Khatri-Rao product K(j*nk + k, l) = C(j,l) D(k,l), row-major (nj*nk) x nl. */
int dtl_cuk_khatri_rao(int type, int64_t nj, int64_t nk, int64_t nl, const void *C,
                       int64_t sCj, int64_t sCl, const void *D, int64_t sDk, int64_t sDl, void *K,
                       void *stream);

#ifdef __cplusplus
}
#endif
#endif
