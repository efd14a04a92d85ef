/* cublas_ref.cu -- the single-GPU reference of the GPU matrix-multiply benchmark: one
 * process, one GPU, cublasDgemm on n x n doubles (C = A * B), timed with CUDA events,
 * best-of-N.
 *
 *   ./cublas_ref -n 16384 --iters 5 --warmup 1
 *
 * Prints one JSON line in the shape of the generated executables' --json summary (min_s,
 * median_s, gflops), so that bench/gpu.sh parses both alike. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "cublas_ref: %s: %s\n", #call, cudaGetErrorString(e_));                \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)

__global__ void fill(double *x, size_t n, unsigned long long seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned long long s = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    s ^= s >> 33, s *= 0xff51afd7ed558ccdull, s ^= s >> 33;
    x[i] = (double)(s >> 11) / 9007199254740992.0 - 0.5;
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  long n = 4096, iters = 3, warmup = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-n")) n = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--iters")) iters = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--warmup")) warmup = atol(argv[i + 1]);
    else {
      fprintf(stderr, "usage: cublas_ref [-n N] [--iters K] [--warmup W]\n");
      return 2;
    }
  }
  if (n <= 0 || iters <= 0 || warmup < 0 || n > 46340) {
    fprintf(stderr, "cublas_ref: bad sizes\n");
    return 2;
  }
  size_t nn = (size_t)n * (size_t)n;
  double *A, *B, *C;
  CHECK(cudaMalloc((void **)&A, nn * sizeof(double)));
  CHECK(cudaMalloc((void **)&B, nn * sizeof(double)));
  CHECK(cudaMalloc((void **)&C, nn * sizeof(double)));
  fill<<<1024, 256>>>(A, nn, 1);
  fill<<<1024, 256>>>(B, nn, 2);
  CHECK(cudaGetLastError());
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "cublas_ref: cublasCreate failed\n");
    return 1;
  }
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  double *times = (double *)calloc((size_t)iters, sizeof(double));
  const double one = 1.0, zero = 0.0;
  for (long it = -warmup; it < iters; it++) {
    CHECK(cudaEventRecord(t0));
    if (cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)n, (int)n, &one, B, (int)n, A, (int)n, &zero, C, (int)n) !=
        CUBLAS_STATUS_SUCCESS) {
      fprintf(stderr, "cublas_ref: cublasDgemm failed\n");
      return 1;
    }
    CHECK(cudaEventRecord(t1));
    CHECK(cudaEventSynchronize(t1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, t0, t1));
    if (it >= 0) times[it] = ms * 1e-3;
  }
  qsort(times, (size_t)iters, sizeof(double), cmp);
  double flops = 2.0 * (double)n * (double)n * (double)n;
  printf("{\"program\": \"cublas_dgemm\", \"ranks\": 1, \"n\": %ld, \"min_s\": %.6g, \"median_s\": %.6g, \"gflops\": %.6g}\n",
         n, times[0], times[iters / 2], flops / times[0] * 1e-9);
  cublasDestroy(h);
  free(times);
  return 0;
}
