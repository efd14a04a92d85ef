/* dgemm_ref.c -- the serial reference of the matrix-multiply benchmarks: one process,
 * OpenBLAS cblas_dgemm on n x n doubles, C = A * B, best-of-N timing.
 *
 *   OPENBLAS_NUM_THREADS=2 ./dgemm_ref -n 4096 --iters 5 --warmup 1
 *
 * Prints one JSON line in the shape of the generated executables' --json summary
 * (min_s, median_s, gflops), so that bench/bench.py parses both alike. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

int openblas_get_num_threads(void);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  long n = 1024, iters = 1, warmup = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (i + 1 < argc && (!strcmp(a, "-n") || !strcmp(a, "--n"))) n = atol(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--iters")) iters = atol(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--warmup")) warmup = atol(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [-n N] [--iters I] [--warmup W]\n", argv[0]);
      return 2;
    }
  }
  if (n <= 0 || iters <= 0 || warmup < 0) {
    fprintf(stderr, "dgemm_ref: bad arguments\n");
    return 2;
  }
  size_t nn = (size_t)n * (size_t)n;
  double *A = malloc(nn * sizeof *A), *B = malloc(nn * sizeof *B), *C = malloc(nn * sizeof *C);
  double *t = malloc((size_t)iters * sizeof *t);
  if (!A || !B || !C || !t) {
    fprintf(stderr, "dgemm_ref: out of memory\n");
    return 1;
  }
  fill(A, nn, 1);
  fill(B, nn, 2);
  memset(C, 0, nn * sizeof *C);
  for (long it = -warmup; it < iters; it++) {
    double t0 = now();
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, A, (int)n, B,
                (int)n, 0.0, C, (int)n);
    double dt = now() - t0;
    if (it >= 0) t[it] = dt;
  }
  double check = 0;
  for (size_t i = 0; i < nn; i += nn / 97 + 1) check += C[i];
  double *s = malloc((size_t)iters * sizeof *s);
  memcpy(s, t, (size_t)iters * sizeof *s);
  qsort(s, (size_t)iters, sizeof *s, cmp);
  double tmin = s[0], tmed = s[iters / 2];
  double flops = 2.0 * (double)n * (double)n * (double)n;
  printf("{\"program\": \"dgemm_ref\", \"threads\": %d, \"params\": {\"n\": %ld}, \"iters\": %ld, \"times_s\": [",
         openblas_get_num_threads(), n, iters);
  for (long i = 0; i < iters; i++) printf("%s%.9g", i ? ", " : "", t[i]);
  printf("], \"min_s\": %.9g, \"median_s\": %.9g, \"gflops\": %.6g, \"gbytes_per_s\": %.6g, \"check\": %.6g}\n",
         tmin, tmed, flops / tmin / 1e9, 3.0 * (double)nn * 8.0 / tmin / 1e9, check);
  free(A), free(B), free(C), free(t), free(s);
  return 0;
}
