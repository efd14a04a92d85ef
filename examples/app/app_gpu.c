/* app_gpu.c -- an MPI application on GPUs that keeps its matrices in GPU memory as row
 * blocks (rank r owns rows [r*n/P, (r+1)*n/P)) and calls the SUMMA kernel that distalc
 * generates for the CUDA target (examples/summa.dtl --target cuda): every pointer it hands
 * the kernel is a device pointer.  It picks its GPU with dtl_cuda_select_device before
 * allocating, moves its rows in with _import and the product out with _export (device to
 * device), creates and destroys the plan several times, and checks its rows itself.
 *
 *   distalc ../summa.dtl --target cuda -o summa
 *   nvcc -O3 -Xcompiler -fPIC $(pkg-config --cflags distal-cuda) -c summa.cu -o summa_cu.o
 *   mpicc app_gpu.c summa.c summa_cu.o -I. -o app_gpu $(pkg-config --cflags --libs distal-cuda)
 *   mpirun -np 4 ./app_gpu 300 */
#include <cuda_runtime.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include <distal/cuda.h>

#include "summa.h"

static double bval(int64_t i, int64_t j) { return (double)((i * 7 + j * 3) % 11) / 11.0 - 0.5; }
static double cval(int64_t i, int64_t j) { return (double)((i * 5 + j * 2) % 13) / 13.0 - 0.5; }

static void die(const char *what, const char *why) {
  fprintf(stderr, "app_gpu: %s failed: %s\n", what, why);
  MPI_Abort(MPI_COMM_WORLD, 1);
}
#define CUDA(call)                                                                            \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) die(#call, cudaGetErrorString(e_));                                \
  } while (0)
#define DISTAL(call, plan)                                                                    \
  do {                                                                                        \
    if ((call) != 0) die(#call, summa_error(plan));                                           \
  } while (0)

static double *device_alloc(int64_t count) {
  void *p = NULL;
  CUDA(cudaMalloc(&p, (size_t)(count > 0 ? count : 1) * sizeof(double)));
  return p;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int64_t n = argc > 1 ? atoll(argv[1]) : 300;
  int rounds = argc > 2 ? atoi(argv[2]) : 3;
  char err[512];
  if (dtl_cuda_select_device(MPI_COMM_WORLD, false, stdout, err, sizeof err)) die("dtl_cuda_select_device", err);
  /* the application's own layout: row blocks, built on the host and kept on the GPU */
  int64_t r0 = n * rank / size, r1 = n * (rank + 1) / size, nr = r1 - r0;
  double *h = malloc((size_t)(nr * n + 1) * sizeof(double));
  double *Brows = device_alloc(nr * n), *Crows = device_alloc(nr * n), *Arows = device_alloc(nr * n);
  for (int64_t i = r0; i < r1; i++)
    for (int64_t j = 0; j < n; j++) h[(i - r0) * n + j] = bval(i, j);
  CUDA(cudaMemcpy(Brows, h, (size_t)(nr * n) * sizeof(double), cudaMemcpyHostToDevice));
  for (int64_t i = r0; i < r1; i++)
    for (int64_t j = 0; j < n; j++) h[(i - r0) * n + j] = cval(i, j);
  CUDA(cudaMemcpy(Crows, h, (size_t)(nr * n) * sizeof(double), cudaMemcpyHostToDevice));
  int64_t lo[2] = {r0, 0}, hi[2] = {r1, n};
  double worst = 0;
  for (int round = 0; round < rounds; round++) {
    summa_params sp;
    summa_params_default(&sp);
    sp.n = n;
    sp.chunk = 32 + 16 * round;
    summa_plan *sum;
    DISTAL(summa_plan_create(MPI_COMM_WORLD, &sp, &sum), sum);
    int64_t na = summa_A_block(sum, NULL, NULL), nb = summa_B_block(sum, NULL, NULL), nc = summa_C_block(sum, NULL, NULL);
    double *A = device_alloc(na), *B = device_alloc(nb), *C = device_alloc(nc);
    DISTAL(summa_B_import(sum, lo, hi, Brows, B), sum);
    DISTAL(summa_C_import(sum, lo, hi, Crows, C), sum);
    DISTAL(summa_compute(sum, A, B, C), sum);
    DISTAL(summa_A_export(sum, A, lo, hi, Arows), sum);
    DISTAL(summa_plan_destroy(&sum), sum);
    CUDA(cudaFree(A));
    CUDA(cudaFree(B));
    CUDA(cudaFree(C));
    /* the application's own check of its rows */
    CUDA(cudaMemcpy(h, Arows, (size_t)(nr * n) * sizeof(double), cudaMemcpyDeviceToHost));
    for (int64_t i = r0; i < r1; i++)
      for (int64_t j = 0; j < n; j++) {
        double a = 0;
        for (int64_t k = 0; k < n; k++) a += bval(i, k) * cval(k, j);
        double e = fabs(a - h[(i - r0) * n + j]) / fmax(1.0, fabs(a));
        if (e > worst) worst = e;
      }
  }
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  int ok = worst < 1e-10;
  if (rank == 0)
    printf("app_gpu: %d ranks, n = %lld, %d rounds, max relative error %.3g: %s\n", size, (long long)n, rounds, worst,
           ok ? "ok" : "MISMATCH");
  CUDA(cudaFree(Brows));
  CUDA(cudaFree(Crows));
  CUDA(cudaFree(Arows));
  free(h);
  MPI_Finalize();
  return ok ? 0 : 1;
}
