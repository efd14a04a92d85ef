/* pdgemm.c -- the ScaLAPACK reference of the matrix-multiply benchmarks: PDGEMM,
 * C = A * B on n x n doubles in the 2-D block-cyclic layout, on a pr x pc BLACS grid
 * (MPI_Dims_create of the rank count unless --grid PRxPC), for each block size of
 * --nb (a comma-separated list), best-of-N timing.
 *
 *   mpirun -np 2 ./pdgemm -n 4096 --nb 32,64,128,256,512 --iters 5 --warmup 1
 *
 * Link: mpicc pdgemm.c -lscalapack-openmpi -lopenblas.  Rank 0 prints one JSON line per
 * block size, like the generated executables' --json summary (min_s, median_s, gflops;
 * the time of one PDGEMM is the slowest rank's). */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int n = 1024, iters = 1, warmup = 0, pr = 0, pc = 0, nnb = 0, nbs[32];
  const char *nblist = "64";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (i + 1 < argc && (!strcmp(a, "-n") || !strcmp(a, "--n"))) n = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--nb")) nblist = argv[++i];
    else if (i + 1 < argc && !strcmp(a, "--iters")) iters = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--warmup")) warmup = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--grid")) {
      if (sscanf(argv[++i], "%dx%d", &pr, &pc) != 2) pr = pc = -1;
    } else {
      if (!rank) fprintf(stderr, "usage: %s [-n N] [--nb NB[,NB...]] [--grid PRxPC] [--iters I] [--warmup W]\n", argv[0]);
      MPI_Finalize();
      return 2;
    }
  }
  for (const char *s = nblist; *s && nnb < 32;) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v <= 0) {
      nnb = -1;
      break;
    }
    nbs[nnb++] = (int)v;
    s = *end == ',' ? end + 1 : end;
  }
  if (n <= 0 || iters <= 0 || warmup < 0 || nnb <= 0 || pr < 0 || pc < 0 || (pr && pr * pc != size)) {
    if (!rank) fprintf(stderr, "pdgemm: bad arguments (the grid must have %d ranks)\n", size);
    MPI_Finalize();
    return 2;
  }
  if (!pr) {
    int dims[2] = {0, 0};
    MPI_Dims_create(size, 2, dims);
    pr = dims[0], pc = dims[1];
  }
  int me, np, ctxt, myrow, mycol, nprow, npcol;
  Cblacs_pinfo(&me, &np);
  Cblacs_get(-1, 0, &ctxt);
  Cblacs_gridinit(&ctxt, "Row", pr, pc);
  Cblacs_gridinfo(ctxt, &nprow, &npcol, &myrow, &mycol);
  const int izero = 0, ione = 1;
  const double one = 1.0, zero = 0.0;
  int status = 0;
  double *t = malloc((size_t)iters * sizeof *t), *s = malloc((size_t)iters * sizeof *s);
  for (int b = 0; b < nnb && !status; b++) {
    int nb = nbs[b];
    int mloc = numroc_(&n, &nb, &myrow, &izero, &nprow), nloc = numroc_(&n, &nb, &mycol, &izero, &npcol);
    int lld = mloc > 1 ? mloc : 1, info = 0, desc[9];
    descinit_(desc, &n, &n, &nb, &nb, &izero, &izero, &ctxt, &lld, &info);
    size_t cnt = (size_t)mloc * (size_t)nloc;
    double *A = malloc((cnt ? cnt : 1) * sizeof *A), *B = malloc((cnt ? cnt : 1) * sizeof *B);
    double *C = calloc(cnt ? cnt : 1, sizeof *C);
    int ok = info == 0 && A && B && C, all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
      if (!rank) fprintf(stderr, "pdgemm: descinit failed or out of memory (nb %d)\n", nb);
      status = 1;
    } else {
      fill(A, cnt, 1 + 2 * (uint64_t)rank);
      fill(B, cnt, 2 + 2 * (uint64_t)rank);
      for (int it = -warmup; it < iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        pdgemm_("N", "N", &n, &n, &n, &one, A, &ione, &ione, desc, B, &ione, &ione, desc, &zero, C, &ione,
                &ione, desc);
        double dt = MPI_Wtime() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (it >= 0) t[it] = dt;
      }
      double check = 0;
      for (size_t i = 0; i < cnt; i += cnt / 97 + 1) check += C[i];
      MPI_Allreduce(MPI_IN_PLACE, &check, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      if (!rank) {
        memcpy(s, t, (size_t)iters * sizeof *s);
        qsort(s, (size_t)iters, sizeof *s, cmp);
        double tmin = s[0], tmed = s[iters / 2], flops = 2.0 * (double)n * n * n;
        printf("{\"program\": \"pdgemm\", \"ranks\": %d, \"grid\": [%d, %d], \"params\": {\"n\": %d, \"nb\": %d}, "
               "\"iters\": %d, \"times_s\": [",
               size, pr, pc, n, nb, iters);
        for (int i = 0; i < iters; i++) printf("%s%.9g", i ? ", " : "", t[i]);
        printf("], \"min_s\": %.9g, \"median_s\": %.9g, \"gflops\": %.6g, \"gbytes_per_s\": %.6g, \"check\": %.6g}\n",
               tmin, tmed, flops / tmin / 1e9, 3.0 * 8.0 * n * (double)n / tmin / 1e9, check);
        fflush(stdout);
      }
    }
    free(A), free(B), free(C);
  }
  free(t), free(s);
  Cblacs_gridexit(ctxt);
  Cblacs_exit(1);
  MPI_Finalize();
  return status;
}
