/* blockcyclic.c -- PREFIX_T_import_scalapack and _export_scalapack of a generated kernel
 * (blockcyclic.dtl) against ScaLAPACK, on a BLACS grid of PR x PC processes:
 *
 *   mpirun -np P ./blockcyclic PR PC ORDER      ORDER: R, C (BLACS grid orders) or X (the
 *                                               grid's processes in reverse rank order)
 *
 * P may exceed PR x PC: the other ranks are outside the grid and take part with -1
 * coordinates.  For several block sizes and source processes, it fills block-cyclic
 * matrices with functions of their global coordinates, imports submatrices (as stored and
 * transposed) into the kernel, checks every block, runs the kernel, checks the product
 * against a serial one and against PDGEMM on the same matrices, and exports to descriptors
 * of other block sizes (transposed, with alpha and beta, and beta = 0 over NaN), checking
 * every element, outside the submatrix too.  Also: a bad descriptor fails cleanly.  Exit
 * status 1 on any mismatch. */
#include <math.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bc_kernel.h"
#include "scalapack.h"

static int m = 37, n = 53, k = 29;
static long failures;

static void fail(const char *what, int i, int j, double got, double want) {
  if (failures++ < 5) fprintf(stderr, "mismatch in %s at (%d, %d): %g, expected %g\n", what, i, j, got, want);
}

static bool same(double got, double want) {
  return isnan(want) ? isnan(got) : fabs(got - want) <= 1e-12 * (1 + fabs(want));
}

/* The serial product of the two inputs as the test builds them:
 * A(i, l) = fA(i + 2, l + 1), B(l, j) = fB(j + 1, l + 3). */
static double *serial_product(void) {
  double *r = calloc((size_t)m * n, sizeof *r);
  for (int i = 0; i < m && r; i++)
    for (int j = 0; j < n; j++)
      for (int l = 0; l < k; l++) r[i * n + j] += test_fn(1, i + 2, l + 1) * test_fn(2, j + 1, l + 3);
  return r;
}

/* Every element of this rank's kernel block of an r x c tensor equals want(i, j). */
typedef double (*want_fn)(const double *ref, int i, int j);
static double want_a(const double *ref, int i, int j) { return (void)ref, test_fn(1, i + 2, j + 1); }
static double want_b(const double *ref, int i, int j) { return (void)ref, test_fn(2, j + 1, i + 3); }
static double want_c(const double *ref, int i, int j) { return ref[i * n + j]; }

static void check_block(const char *what, int64_t (*query)(const blockcyclic_plan *, int64_t *, int64_t *),
                        const blockcyclic_plan *plan, const double *blk, const double *ref, want_fn want) {
  int64_t off[2], ext[2];
  query(plan, off, ext);
  for (int64_t i = 0; i < ext[0]; i++)
    for (int64_t j = 0; j < ext[1]; j++) {
      double w = want(ref, (int)(off[0] + i), (int)(off[1] + j)), v = blk[i * ext[1] + j];
      if (!same(v, w)) fail(what, (int)(off[0] + i), (int)(off[1] + j), v, w);
    }
}

static double *block_of(int64_t (*query)(const blockcyclic_plan *, int64_t *, int64_t *),
                        const blockcyclic_plan *plan) {
  int64_t count = query(plan, NULL, NULL);
  return calloc((size_t)(count > 0 ? count : 1), sizeof(double));
}

/* One round: inputs with block sizes (mb1, nb1) from source (r1, c1); outputs with others. */
typedef struct {
  int mb1, nb1, mb2, nb2, mb3, nb3;
} sizes;

static int round_trip(blockcyclic_plan *plan, const test_grid *g, const sizes *s, int src,
                      const double *ref) {
  int r1 = src % g->nprow, c1 = (src + 1) % g->npcol, r2 = (src + 1) % g->nprow, c2 = src % g->npcol;
  test_matrix GA, GB, GC, GE, GT, GA2;
  int err = test_matrix_make(&GA, g, m + 4, k + 5, s->mb1, s->nb1, r1, c1) ||
            test_matrix_make(&GB, g, n + 1, k + 3, s->nb1, s->mb1, r1, c2) ||
            test_matrix_make(&GC, g, m + 2, n + 3, s->mb2, s->nb2, r2, c2) ||
            test_matrix_make(&GE, g, m + 2, n + 3, s->mb2, s->nb2, r2, c2) ||
            test_matrix_make(&GT, g, n + 1, m + 1, s->mb3, s->nb3, r2, c1) ||
            test_matrix_make(&GA2, g, m, k, s->mb3, s->nb2, 0, 0);
  double *A = block_of(blockcyclic_A_block, plan), *B = block_of(blockcyclic_B_block, plan);
  double *C = block_of(blockcyclic_C_block, plan), *D = block_of(blockcyclic_D_block, plan);
  if (err || !A || !B || !C || !D) return 1;
  TEST_FOR_LOCAL(&GA, g, gi, gj, e, *e = test_fn(1, gi, gj);)
  TEST_FOR_LOCAL(&GB, g, gi, gj, e, *e = test_fn(2, gi, gj);)
  TEST_FOR_LOCAL(&GC, g, gi, gj, e, *e = test_fn(3, gi, gj);)
  TEST_FOR_LOCAL(&GE, g, gi, gj, e, *e = test_fn(3, gi, gj);)
  TEST_FOR_LOCAL(&GT, g, gi, gj, e, *e = NAN;)
  TEST_FOR_LOCAL(&GA2, g, gi, gj, e, *e = NAN;)
  const int my = g->myrow, mc = g->mycol;
  /* A = sub(GA) at (3, 2); B = sub(GB)^T, sub(GB) at (2, 4) */
  err |= blockcyclic_A_import_scalapack(plan, 'N', GA.a, 3, 2, GA.desc, my, mc, A);
  err |= blockcyclic_B_import_scalapack(plan, 'T', GB.a, 2, 4, GB.desc, my, mc, B);
  if (err) return 1;
  check_block("import A", blockcyclic_A_block, plan, A, ref, want_a);
  check_block("import B", blockcyclic_B_block, plan, B, ref, want_b);
  if (blockcyclic_compute(plan, A, B, C, D)) return 1;
  check_block("kernel C", blockcyclic_C_block, plan, C, ref, want_c);
  check_block("kernel D", blockcyclic_D_block, plan, D, ref, want_c);
  /* sub(GC) = sub(GA) sub(GB)^T + 0.5 sub(GC) by PDGEMM, and the same by export of C */
  if (my >= 0) {
    const double one = 1, half = 0.5;
    const int i3 = 3, i2 = 2, i4 = 4;
    pdgemm_("N", "T", &m, &n, &k, &one, GA.a, &i3, &i2, GA.desc, GB.a, &i2, &i4, GB.desc, &half, GC.a,
            &i2, &i3, GC.desc);
  }
  err |= blockcyclic_C_export_scalapack(plan, 'N', 1.0, C, 0.5, GE.a, 2, 3, GE.desc, my, mc);
  /* GT = 2 D^T at (2, 1) over NaN (beta = 0 reads nothing); GA2 = A with other blocks */
  err |= blockcyclic_D_export_scalapack(plan, 'C', 2.0, D, 0.0, GT.a, 2, 1, GT.desc, my, mc);
  err |= blockcyclic_A_export_scalapack(plan, 'N', 1.0, A, 0.0, GA2.a, 1, 1, GA2.desc, my, mc);
  if (err) return 1;
  for (int x = 0; x < GC.locr * GC.locc; x++) {
    int lr = x % GC.locr, lc = x / GC.locr;
    double v = GE.a[lr + (size_t)lc * GE.desc[8]], w = GC.a[lr + (size_t)lc * GC.desc[8]];
    if (!same(v, w)) fail("export C against PDGEMM", lr, lc, v, w);
  }
  TEST_FOR_LOCAL(&GE, g, gi, gj, e, {
    bool in = gi >= 1 && gi < 1 + m && gj >= 2 && gj < 2 + n;
    double w = in ? ref[(gi - 1) * n + gj - 2] + 0.5 * test_fn(3, gi, gj) : test_fn(3, gi, gj);
    if (!same(*e, w)) fail("export C", gi, gj, *e, w);
  })
  TEST_FOR_LOCAL(&GT, g, gi, gj, e, {
    bool in = gi >= 1 && gi < 1 + n && gj < m;
    double w = in ? 2 * ref[gj * n + gi - 1] : NAN;
    if (!same(*e, w)) fail("export D transposed", gi, gj, *e, w);
  })
  TEST_FOR_LOCAL(&GA2, g, gi, gj, e, {
    if (!same(*e, test_fn(1, gi + 2, gj + 1))) fail("export A", gi, gj, *e, test_fn(1, gi + 2, gj + 1));
  })
  test_matrix *all[] = {&GA, &GB, &GC, &GE, &GT, &GA2};
  for (int i = 0; i < 6; i++) test_matrix_free(all[i]);
  free(A), free(B), free(C), free(D);
  return 0;
}

/* A descriptor of type 2, and an LLD below the local rows, fail on every rank. */
static void bad_inputs(blockcyclic_plan *plan, const test_grid *g) {
  test_matrix GA;
  if (test_matrix_make(&GA, g, m, k, 4, 4, 0, 0)) return;
  double *A = block_of(blockcyclic_A_block, plan);
  GA.desc[0] = 2;
  int rc = blockcyclic_A_import_scalapack(plan, 'N', GA.a, 1, 1, GA.desc, g->myrow, g->mycol, A);
  if (!rc || !strstr(blockcyclic_error(plan), "descriptor type")) fail("bad DTYPE accepted", 0, 0, rc, 1);
  GA.desc[0] = 1;
  if (g->myrow == 0 && g->mycol == 0) GA.desc[8] = 1;
  rc = blockcyclic_A_import_scalapack(plan, 'N', GA.a, 1, 1, GA.desc, g->myrow, g->mycol, A);
  if (!rc || !strstr(blockcyclic_error(plan), "LLD")) fail("small LLD accepted", 0, 0, rc, 1);
  GA.desc[8] = GA.locr > 1 ? GA.locr : 1;
  rc = blockcyclic_A_import_scalapack(plan, 'N', GA.a, 2, 1, GA.desc, g->myrow, g->mycol, A);
  if (!rc || !strstr(blockcyclic_error(plan), "does not fit")) fail("oversized submatrix accepted", 0, 0, rc, 1);
  rc = blockcyclic_A_import_scalapack(plan, 'X', GA.a, 1, 1, GA.desc, g->myrow, g->mycol, A);
  if (!rc || !strstr(blockcyclic_error(plan), "trans")) fail("bad trans accepted", 0, 0, rc, 1);
  test_matrix_free(&GA);
  free(A);
}

static int make_grid(test_grid *g, int pr, int pc, char order, int size) {
  Cblacs_get(-1, 0, &g->ctxt);
  if (order == 'X') { /* the grid's processes in reverse rank order, column-major */
    int *map = malloc((size_t)pr * pc * sizeof *map);
    if (!map) return 1;
    for (int i = 0; i < pr * pc; i++) map[i] = size - 1 - i;
    Cblacs_gridmap(&g->ctxt, map, pr, pr, pc);
    free(map);
  } else {
    Cblacs_gridinit(&g->ctxt, order == 'C' ? "Col" : "Row", pr, pc);
  }
  g->myrow = g->mycol = -1;
  if (g->ctxt >= 0) Cblacs_gridinfo(g->ctxt, &g->nprow, &g->npcol, &g->myrow, &g->mycol);
  if (g->myrow < 0) g->myrow = g->mycol = -1;
  g->nprow = pr, g->npcol = pc;
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int pr = argc > 3 ? atoi(argv[1]) : 0, pc = argc > 3 ? atoi(argv[2]) : 0;
  if (pr < 1 || pc < 1 || pr * pc > size) {
    if (!rank) fprintf(stderr, "usage: mpirun -np P %s PR PC R|C|X (PR x PC <= P)\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  test_grid g;
  blockcyclic_params prm;
  blockcyclic_params_default(&prm);
  blockcyclic_plan *plan = NULL;
  double *ref = serial_product();
  if (make_grid(&g, pr, pc, argv[3][0], size) || !ref || blockcyclic_plan_create(MPI_COMM_WORLD, &prm, &plan)) {
    fprintf(stderr, "rank %d: set-up failed: %s\n", rank, plan ? blockcyclic_error(plan) : "");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  /* block sizes 1, 3, 32 and larger than every matrix, mixed between rows and columns */
  const sizes all[] = {{1, 1, 3, 32, 32, 3}, {3, 32, 1, 1, 64, 64}, {32, 3, 64, 64, 1, 3},
                       {64, 64, 32, 1, 3, 1}};
  int rounds = 0;
  for (int s = 0; s < 4; s++)
    for (int src = 0; src < 2; src++, rounds++)
      if (round_trip(plan, &g, &all[s], src, ref)) {
        fprintf(stderr, "rank %d: round %d failed: %s\n", rank, rounds, blockcyclic_error(plan));
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
  bad_inputs(plan, &g);
  long total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (!rank)
    printf("blockcyclic: %d ranks, grid %dx%d %c, %d rounds: %s (%ld mismatches)\n", size, pr, pc, argv[3][0],
           rounds, total ? "FAIL" : "ok", total);
  blockcyclic_plan_destroy(&plan);
  if (g.myrow >= 0) Cblacs_gridexit(g.ctxt);
  free(ref);
  MPI_Finalize();
  return total ? 1 : 0;
}
