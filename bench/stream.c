/* stream.c -- STREAM-style memory bandwidth, measured on the same ranks and threads as
 * the benchmarks it is compared with: every MPI rank runs OpenMP threads over its own
 * arrays of N doubles (first-touch initialised by the threads that use them).
 *
 *   mpirun -np 2 ./stream -N 20000000 --iters 5 --warmup 1     # OMP_NUM_THREADS per rank
 *
 * Kernels, timed between barriers, the slowest rank's time:
 *   triad  a[i] = b[i] + s * c[i]     24 bytes per element (STREAM's count)
 *   dot    sum += b[i] * c[i]         16 bytes per element (read-only, like innerprod)
 * Rank 0 prints one JSON line per kernel, like the generated executables' --json
 * summary, with gbytes_per_s the aggregate over all ranks (best of N).
 *
 * The arrays lie on transparent huge pages where the kernel grants them (2 MiB aligned,
 * madvise MADV_HUGEPAGE), as libdistal's large blocks do (dtl_halloc), so that the limit is
 * measured on the memory the leaves it is compared with use; --small-pages measures
 * malloc's 4 KiB pages. */
#define _DEFAULT_SOURCE
#include <mpi.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static bool huge_pages = true;

static double *arr(long n) {
  size_t bytes = (size_t)n * sizeof(double), huge = (size_t)2 << 20;
  if (!huge_pages) return malloc(bytes);
  bytes = (bytes + huge - 1) / huge * huge;
  double *p = aligned_alloc(huge, bytes);
#ifdef MADV_HUGEPAGE
  if (p) (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void report(const char *kernel, int ranks, int threads, long N, long iters, const double *t,
                   double bytes_per_rank, double check) {
  double *s = malloc((size_t)iters * sizeof *s);
  memcpy(s, t, (size_t)iters * sizeof *s);
  qsort(s, (size_t)iters, sizeof *s, cmp);
  double tmin = s[0], tmed = s[iters / 2];
  printf("{\"program\": \"stream\", \"kernel\": \"%s\", \"ranks\": %d, \"threads\": %d, \"params\": {\"N\": %ld}, "
         "\"iters\": %ld, \"times_s\": [",
         kernel, ranks, threads, N, iters);
  for (long i = 0; i < iters; i++) printf("%s%.9g", i ? ", " : "", t[i]);
  printf("], \"min_s\": %.9g, \"median_s\": %.9g, \"gflops\": 0, \"gbytes_per_s\": %.6g, \"check\": %.6g}\n", tmin,
         tmed, bytes_per_rank * ranks / tmin / 1e9, check);
  free(s);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long N = 20000000, iters = 5, warmup = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (i + 1 < argc && (!strcmp(a, "-N") || !strcmp(a, "--N"))) N = atol(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--iters")) iters = atol(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--warmup")) warmup = atol(argv[++i]);
    else if (!strcmp(a, "--small-pages")) huge_pages = false;
    else {
      if (!rank) fprintf(stderr, "usage: %s [-N ELEMENTS_PER_RANK] [--iters I] [--warmup W] [--small-pages]\n", argv[0]);
      MPI_Finalize();
      return 2;
    }
  }
  if (N <= 0 || iters <= 0 || warmup < 0) {
    if (!rank) fprintf(stderr, "stream: bad arguments\n");
    MPI_Finalize();
    return 2;
  }
  double *a = arr(N), *b = arr(N), *c = arr(N);
  double *tt = malloc((size_t)iters * sizeof *tt), *td = malloc((size_t)iters * sizeof *td);
  int ok = a && b && c && tt && td, all;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    if (!rank) fprintf(stderr, "stream: out of memory for 3 x %ld doubles per rank\n", N);
    MPI_Finalize();
    return 1;
  }
  int threads = 1;
#pragma omp parallel
  {
#pragma omp single
    {
#ifdef _OPENMP
      threads = omp_get_num_threads();
#endif
    }
  }
#pragma omp parallel for schedule(static)
  for (long i = 0; i < N; i++) a[i] = 1.0, b[i] = 2.0 + (double)(i & 7), c[i] = 0.5;
  const double scalar = 3.0;
  double dsum = 0;
  for (long it = -warmup; it < iters; it++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++) a[i] = b[i] + scalar * c[i];
    double dt = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (it >= 0) tt[it] = dt;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    double s = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : s)
    for (long i = 0; i < N; i++) s += b[i] * c[i];
    dt = MPI_Wtime() - t0;
    dsum += s;
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (it >= 0) td[it] = dt;
  }
  double check = a[N / 2] + dsum;
  if (!rank) {
    report("triad", size, threads, N, iters, tt, 24.0 * (double)N, check);
    report("dot", size, threads, N, iters, td, 16.0 * (double)N, check);
  }
  free(a), free(b), free(c), free(tt), free(td);
  MPI_Finalize();
  return 0;
}
