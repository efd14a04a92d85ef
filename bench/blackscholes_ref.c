/* blackscholes_ref.c -- the hand-written reference of bench/dtl/blackscholes.dtl: the same
 * Black-Scholes formulas, in the same order, as one loop over the options (every value a
 * local variable, one pass that reads S, K, T and writes C, P).  Every MPI rank prices its
 * block of the options (distal's blocked partition: [r s, min(n, (r+1) s)), s = ceil(n / P)),
 * OpenMP threads share a rank's block.  Compile it with the flags that distalc --exe gives
 * generated code (mpicc -std=c11 -O3 -fopenmp ... -lm).
 *
 *   mpirun -np 2 ./blackscholes_ref S.npy K.npy T.npy [--r 0.02] [--v 0.3] [--iters 5]
 *          [--warmup 1] [--save C.npy P.npy]
 *
 * Inputs are float64 .npy vectors of one length n.  Each timed run is timed between
 * barriers, the slowest rank's time; rank 0 prints one JSON line like the generated
 * executables' --json summary (min_s, median_s, gbytes_per_s = 40 n bytes / min_s).
 * --save gathers the prices on rank 0 and writes them as .npy files. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The data offset and length of a 1-D float64 .npy file; -1 when it is not one. */
static long npy_open(const char *path, FILE **fp, int64_t *n) {
  FILE *f = fopen(path, "rb");
  unsigned char pre[12];
  if (!f) return -1;
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) goto bad;
  long hlen, off;
  if (pre[6] == 1) {
    hlen = pre[8] | pre[9] << 8;
    off = 10;
  } else {
    if (fread(pre + 10, 1, 2, f) != 2) goto bad;
    hlen = pre[8] | pre[9] << 8 | (long)pre[10] << 16 | (long)pre[11] << 24;
    off = 12;
  }
  char *h = malloc((size_t)hlen + 1);
  if (!h || fread(h, 1, (size_t)hlen, f) != (size_t)hlen) {
    free(h);
    goto bad;
  }
  h[hlen] = 0;
  const char *shape = strstr(h, "'shape': (");
  long long len;
  int ok = strstr(h, "'<f8'") && strstr(h, "'fortran_order': False") && shape &&
           sscanf(shape, "'shape': (%lld,)", &len) == 1 && len > 0;
  free(h);
  if (!ok) goto bad;
  *fp = f;
  *n = len;
  return off + hlen;
bad:
  fclose(f);
  return -1;
}

static void write_npy(const char *path, const double *a, int64_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "blackscholes_ref: cannot write %s\n", path);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  char dict[128];
  int len = snprintf(dict, sizeof dict, "{'descr': '<f8', 'fortran_order': False, 'shape': (%lld,), }", (long long)n);
  int pad = (64 - (10 + len + 1) % 64) % 64, hlen = len + pad + 1;
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fputc(hlen & 0xff, f);
  fputc(hlen >> 8, f);
  fwrite(dict, 1, (size_t)len, f);
  for (int i = 0; i < pad; i++) fputc(' ', f);
  fputc('\n', f);
  if (fwrite(a, sizeof *a, (size_t)n, f) != (size_t)n || fclose(f)) {
    fprintf(stderr, "blackscholes_ref: cannot write %s\n", path);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void price(int64_t m, const double *restrict S, const double *restrict K, const double *restrict T,
                  double *restrict C, double *restrict P, double r, double v) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; i++) {
    double s = S[i], k = K[i], t = T[i];
    double sq = v * sqrt(t);
    double d1 = (log(s / k) + (r + 0.5 * v * v) * t) / sq;
    double d2 = d1 - sq;
    double nd1 = 0.5 + 0.5 * erf(0.7071067811865476 * d1);
    double nd2 = 0.5 + 0.5 * erf(0.7071067811865476 * d2);
    double disc = k * exp(-r * t);
    C[i] = s * nd1 - disc * nd2;
    P[i] = disc * (1.0 - nd2) - s * (1.0 - nd1);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *in[3] = {0}, *save[2] = {0};
  double r = 0.02, v = 0.3;
  long iters = 5, warmup = 1;
  int nin = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (i + 1 < argc && !strcmp(a, "--r")) r = atof(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--v")) v = atof(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--iters")) iters = atol(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--warmup")) warmup = atol(argv[++i]);
    else if (i + 2 < argc && !strcmp(a, "--save")) save[0] = argv[i + 1], save[1] = argv[i + 2], i += 2;
    else if (a[0] != '-' && nin < 3) in[nin++] = a;
    else bad = 1;
  }
  if (bad || nin != 3 || iters <= 0 || warmup < 0) {
    if (!rank)
      fprintf(stderr, "usage: %s S.npy K.npy T.npy [--r R] [--v V] [--iters I] [--warmup W] [--save C.npy P.npy]\n",
              argv[0]);
    MPI_Finalize();
    return 2;
  }
  int64_t n = -1, lo, hi;
  double *buf[5];
  FILE *f[3];
  long off[3];
  int ok = 1, all;
  for (int k = 0; k < 3; k++) {
    int64_t len;
    off[k] = npy_open(in[k], &f[k], &len);
    if (off[k] < 0 || (n >= 0 && len != n)) {
      if (!rank) fprintf(stderr, "blackscholes_ref: %s is not a float64 vector of the same length\n", in[k]);
      ok = 0;
      break;
    }
    n = len;
  }
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    MPI_Finalize();
    return 1;
  }
  int64_t s = (n + size - 1) / size;
  lo = rank * s < n ? rank * s : n;
  hi = (rank + 1) * s < n ? (rank + 1) * s : n;
  int64_t m = hi - lo;
  for (int k = 0; k < 5; k++) buf[k] = malloc((size_t)(m > 0 ? m : 1) * sizeof(double));
  /* first touch by the threads that use the block */
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; i++)
    for (int k = 0; k < 5; k++) buf[k][i] = 0;
  for (int k = 0; k < 3; k++) {
    if (fseek(f[k], off[k] + lo * 8, SEEK_SET) || fread(buf[k], sizeof(double), (size_t)m, f[k]) != (size_t)m) ok = 0;
    fclose(f[k]);
  }
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    if (!rank) fprintf(stderr, "blackscholes_ref: cannot read the inputs\n");
    MPI_Finalize();
    return 1;
  }
  double *times = malloc((size_t)iters * sizeof *times);
  for (long it = -warmup; it < iters; it++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    price(m, buf[0], buf[1], buf[2], buf[3], buf[4], r, v);
    double t = MPI_Wtime() - t0, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (it >= 0) times[it] = tmax;
  }
  double local = 0, check;
  for (int64_t i = 0; i < m; i++) local += buf[3][i] + buf[4][i];
  MPI_Reduce(&local, &check, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (save[0]) {
    int *cnt = malloc((size_t)size * sizeof *cnt), *dsp = malloc((size_t)size * sizeof *dsp);
    for (int q = 0; q < size; q++) {
      int64_t a = q * s < n ? q * s : n, b = (q + 1) * s < n ? (q + 1) * s : n;
      cnt[q] = (int)(b - a), dsp[q] = (int)a;
    }
    double *g = rank ? NULL : malloc((size_t)n * sizeof *g);
    for (int k = 0; k < 2; k++) {
      MPI_Gatherv(buf[3 + k], (int)m, MPI_DOUBLE, g, cnt, dsp, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      if (!rank) write_npy(save[k], g, n);
    }
    free(g);
    free(cnt);
    free(dsp);
  }
  if (!rank) {
    double *sorted = malloc((size_t)iters * sizeof *sorted);
    memcpy(sorted, times, (size_t)iters * sizeof *sorted);
    qsort(sorted, (size_t)iters, sizeof *sorted, cmp);
    printf("{\"program\": \"blackscholes_ref\", \"ranks\": %d, \"params\": {\"n\": %lld}, \"iters\": %ld, \"times_s\": [",
           size, (long long)n, iters);
    for (long i = 0; i < iters; i++) printf("%s%.9g", i ? ", " : "", times[i]);
    printf("], \"min_s\": %.9g, \"median_s\": %.9g, \"gbytes_per_s\": %.6g, \"check\": %.12g}\n", sorted[0],
           sorted[iters / 2], 40.0 * (double)n / sorted[0] / 1e9, check);
    free(sorted);
  }
  for (int k = 0; k < 5; k++) free(buf[k]);
  free(times);
  MPI_Finalize();
  return 0;
}
