/* cublas_v2.h -- host emulation of cuBLAS over CBLAS, used by the test suite to run the device
 * path of libdistal_cuda and generated CUDA code without a GPU (see cuemu.c).
 *
 * Declares the subset of cuBLAS (v2 API) that the device path calls, with the real signatures
 * and status and operation values.  Matrices are column-major as in cuBLAS; alpha and beta
 * are host pointers (the default pointer mode), every other pointer is device memory.
 * Arguments are validated as cuBLAS documents, and the work is done at once by CBLAS.
 *
 * Not emulated: concurrency between streams (the handle's stream is only checked), and the
 * separation of device from host memory beyond the table of live cudaMalloc allocations,
 * against which the matrices and vectors are checked.  Plain C, usable from C11 and C++;
 * never include it together with the real cuBLAS headers. */
#ifndef CUEMU_CUBLAS_V2_H
#define CUEMU_CUBLAS_V2_H

#if defined(CUBLAS_V2_H_) || defined(CUBLAS_API_H_) || defined(CUBLAS_H_)
#error "the emulated cublas_v2.h cannot be mixed with the real cuBLAS headers"
#endif

#include "cuda_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cublasContext *cublasHandle_t;

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t streamId);

/* C = alpha op(A) op(B) + beta C; C is m x n, op(A) m x k, op(B) k x n (C not read when
 * beta is 0). */
cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const double *alpha,
                           const double *A, int lda, const double *B, int ldb, const double *beta,
                           double *C, int ldc);
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha,
                           const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc);
/* y = alpha op(A) x + beta y; A is m x n. */
cublasStatus_t cublasDgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n,
                           const double *alpha, const double *A, int lda, const double *x, int incx,
                           const double *beta, double *y, int incy);
cublasStatus_t cublasSgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n,
                           const float *alpha, const float *A, int lda, const float *x, int incx,
                           const float *beta, float *y, int incy);

#ifdef __cplusplus
}
#endif

#endif
