/* mttkrp_ref.c -- the serial reference of the MTTKRP benchmark: one process,
 * A(i,l) = sum_jk B(i,j,k) C(j,l) D(k,l) computed the standard way, by forming the
 * Khatri-Rao product K(j*p + k, l) = C(j,l) D(k,l) and one OpenBLAS dgemm
 * A = B(i, jk) K(jk, l), best-of-N timing of both steps together.
 *
 *   OPENBLAS_NUM_THREADS=2 ./mttkrp_ref -n 256 -m 256 -p 256 -r 32 --iters 5 --warmup 1
 *
 * Prints one JSON line like the generated executables' --json summary; gflops counts
 * 3 n m p r operations, the generated drivers' count for this statement, so that
 * GFLOP/s ratios are time ratios. */
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
  long n = 128, m = 128, p = 128, r = 16, iters = 1, warmup = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] == '-' && a[1] == '-' && a[2] && !a[3]) a++; /* --n == -n */
    if (i + 1 < argc && !strcmp(a, "-n")) n = atol(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "-m")) m = atol(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "-p")) p = atol(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "-r")) r = atol(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--iters")) iters = atol(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--warmup")) warmup = atol(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [-n N] [-m M] [-p P] [-r R] [--iters I] [--warmup W]\n", argv[0]);
      return 2;
    }
  }
  if (n <= 0 || m <= 0 || p <= 0 || r <= 0 || iters <= 0 || warmup < 0) {
    fprintf(stderr, "mttkrp_ref: bad arguments\n");
    return 2;
  }
  size_t nb = (size_t)n * m * p, nk = (size_t)m * p * r;
  double *B = malloc(nb * sizeof *B), *C = malloc((size_t)m * r * sizeof *C);
  double *D = malloc((size_t)p * r * sizeof *D), *K = malloc(nk * sizeof *K);
  double *A = malloc((size_t)n * r * sizeof *A), *t = malloc((size_t)iters * sizeof *t);
  if (!B || !C || !D || !K || !A || !t) {
    fprintf(stderr, "mttkrp_ref: out of memory\n");
    return 1;
  }
  fill(B, nb, 1);
  fill(C, (size_t)m * r, 2);
  fill(D, (size_t)p * r, 3);
  for (long it = -warmup; it < iters; it++) {
    double t0 = now();
    for (long j = 0; j < m; j++)
      for (long k = 0; k < p; k++) {
        double *kp = K + ((size_t)j * p + k) * r;
        const double *cp = C + (size_t)j * r, *dp = D + (size_t)k * r;
        for (long l = 0; l < r; l++) kp[l] = cp[l] * dp[l];
      }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)r, (int)(m * p), 1.0, B,
                (int)(m * p), K, (int)r, 0.0, A, (int)r);
    double dt = now() - t0;
    if (it >= 0) t[it] = dt;
  }
  double check = 0;
  for (size_t i = 0; i < (size_t)n * r; i++) check += A[i];
  double *s = malloc((size_t)iters * sizeof *s);
  memcpy(s, t, (size_t)iters * sizeof *s);
  qsort(s, (size_t)iters, sizeof *s, cmp);
  double tmin = s[0], tmed = s[iters / 2];
  double flops = 3.0 * (double)n * m * p * r;
  double bytes = 8.0 * ((double)nb + (double)m * r + (double)p * r + (double)n * r);
  printf("{\"program\": \"mttkrp_ref\", \"threads\": %d, \"params\": {\"n\": %ld, \"m\": %ld, \"p\": %ld, \"r\": %ld}, "
         "\"iters\": %ld, \"times_s\": [",
         openblas_get_num_threads(), n, m, p, r, iters);
  for (long i = 0; i < iters; i++) printf("%s%.9g", i ? ", " : "", t[i]);
  printf("], \"min_s\": %.9g, \"median_s\": %.9g, \"gflops\": %.6g, \"gbytes_per_s\": %.6g, \"check\": %.6g}\n",
         tmin, tmed, flops / tmin / 1e9, bytes / tmin / 1e9, check);
  free(B), free(C), free(D), free(K), free(A), free(t), free(s);
  return 0;
}
