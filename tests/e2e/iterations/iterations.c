/* iterations.c -- PREFIX_iterations through the library API: runs loops.dtl (generated as
 * the library "loops") with several params and inputs, and compares loops_iterations, x
 * and s with what a serial C version of the same loops gives.  The inputs are multiples of
 * 1/4, so that every value and every sum of squares is exact in double and the loop
 * decisions cannot depend on the order of a sum.  Prints "iterations: ok" on success.
 *
 *   distalc loops.dtl -o loops
 *   mpicc iterations.c loops.c -o iterations $(pkg-config --cflags --libs distal)
 *   mpirun -np 3 ./iterations */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loops.h"

static int rank, failures;

static void fail(const char *what, const loops_plan *plan) {
  if (rank == 0)
    fprintf(stderr, "iterations: %s failed: %s\n", what, plan ? loops_error(plan) : "(no plan)");
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static double x0(int64_t i, int variant) { return (double)((i * (variant + 3)) % 7 + 1) * 0.25; }

/* One compute on plan with the inputs of variant and s0; checks the iteration count, x and s
 * against the serial loops. */
static void check(loops_plan *plan, const loops_params *p, int variant, double s0, const char *label) {
  int64_t off[1], ext[1];
  int64_t nb = loops_x_block(plan, off, ext);
  double *x = malloc((size_t)(nb + 1) * sizeof(double));
  for (int64_t k = 0; k < nb; k++)
    x[k] = x0(off[0] + k, variant);
  double s = s0;
  if (loops_compute(plan, x, &s) != 0)
    fail("loops_compute", plan);
  /* the serial loops */
  double *xs = malloc((size_t)p->n * sizeof(double));
  for (int64_t i = 0; i < p->n; i++)
    xs[i] = x0(i, variant);
  int64_t want = 0;
  for (int64_t it = 0; it < p->maxit; it++) {
    double nx = 0;
    for (int64_t i = 0; i < p->n; i++)
      xs[i] /= 2, nx += xs[i] * xs[i];
    want++;
    if (nx < p->tol)
      break;
  }
  double ss = s0;
  for (int64_t r = 0; r < p->reps; r++) {
    want++;
    for (int it = 0; it < 3; it++) {
      ss *= 2;
      if (ss > p->limit)
        break;
    }
  }
  int64_t got = loops_iterations(plan);
  int ok = got == want && s == ss;
  for (int64_t k = 0; k < nb; k++)
    ok = ok && x[k] == xs[off[0] + k];
  int all;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0)
    printf("%s %s: loops_iterations %lld, expected %lld; s %g, expected %g\n", all ? "PASS" : "FAIL", label,
           (long long)got, (long long)want, s, ss);
  if (!all)
    failures++;
  free(x), free(xs);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  loops_params p;
  loops_params_default(&p);
  loops_plan *plan;
  if (loops_plan_create(MPI_COMM_WORLD, &p, &plan) != 0)
    fail("loops_plan_create", plan);
  check(plan, &p, 0, 1.5, "defaults");
  /* the count is that of the last compute, not a running total */
  check(plan, &p, 1, -3.25, "second compute, other inputs");
  check(plan, &p, 2, 40, "third compute");
  loops_plan_destroy(&plan);
  /* maxit ends the first loop; a smaller tolerance; more outer iterations */
  p.n = 13, p.maxit = 4, p.reps = 5, p.tol = 1e-9, p.limit = 7.5;
  if (loops_plan_create(MPI_COMM_WORLD, &p, &plan) != 0)
    fail("loops_plan_create", plan);
  check(plan, &p, 3, 0.75, "maxit 4");
  loops_plan_destroy(&plan);
  p.maxit = 200, p.tol = 1e-12;
  if (loops_plan_create(MPI_COMM_WORLD, &p, &plan) != 0)
    fail("loops_plan_create", plan);
  check(plan, &p, 4, 2, "tol 1e-12");
  loops_plan_destroy(&plan);
  /* no communicator: an error, not an abort; the failed plan holds no block */
  int null_ok = loops_plan_create(MPI_COMM_NULL, &p, &plan) != 0 && plan &&
                strstr(loops_error(plan), "invalid communicator");
  int64_t off[1] = {7}, ext[1] = {7};
  null_ok = null_ok && loops_x_block(plan, off, ext) == 0 && off[0] == 0 && ext[0] == 0;
  null_ok = null_ok && loops_plan_destroy(&plan) == 0 && !plan;
  if (rank == 0)
    printf("%s plan_create on MPI_COMM_NULL\n", null_ok ? "PASS" : "FAIL");
  failures += !null_ok;
  /* misuse: an error on every rank, never a crash or a rank left waiting */
  int misuse_ok = loops_plan_create(MPI_COMM_WORLD, &p, NULL) != 0;
  /* a grid param is positive, or -1 (derived): 0 and other negatives are mistakes */
  for (int64_t g = 0; g >= -3; g -= 3) {
    loops_params q = p;
    q.g = g;
    misuse_ok = misuse_ok && loops_plan_create(MPI_COMM_WORLD, &q, &plan) != 0 && strstr(loops_error(plan), "grid param g is");
    loops_plan_destroy(&plan);
  }
  if (loops_plan_create(MPI_COMM_WORLD, &p, &plan) != 0)
    fail("loops_plan_create", plan);
  int64_t nb = loops_x_block(plan, off, ext);
  double *blk = calloc((size_t)nb + 1, sizeof(double)), *mine = calloc((size_t)p.n + 1, sizeof(double));
  int64_t lo[1] = {0}, hi[1] = {rank == 0 ? p.n : 0}, rev[1] = {rank == 0 ? 3 : 0}, rlo[1] = {rank == 0 ? 5 : 0};
  misuse_ok = misuse_ok && loops_x_import(plan, NULL, hi, mine, blk) != 0 && strstr(loops_error(plan), "lo or hi is NULL");
  misuse_ok = misuse_ok && loops_x_import(plan, rlo, rev, mine, blk) != 0 && strstr(loops_error(plan), "ends before it starts");
  misuse_ok = misuse_ok && loops_x_import(plan, lo, hi, rank == 0 ? NULL : mine, blk) != 0 &&
              strstr(loops_error(plan), "is NULL");
  misuse_ok = misuse_ok && loops_x_export(plan, NULL, lo, hi, mine) != 0 && strstr(loops_error(plan), "block");
  misuse_ok = misuse_ok && loops_x_import(plan, lo, hi, mine, blk) == 0 && loops_x_export(plan, blk, lo, hi, mine) == 0;
  int all_ok = 0;
  MPI_Allreduce(&misuse_ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0)
    printf("%s misuse of plan_create, import and export: nonzero returns with messages\n", all_ok ? "PASS" : "FAIL");
  failures += !all_ok;
  free(blk), free(mine);
  loops_plan_destroy(&plan);
  if (rank == 0)
    printf("iterations: %s\n", failures ? "FAILED" : "ok");
  MPI_Finalize();
  return failures ? 1 : 0;
}
