/* test_lower.c -- unit tests of the MPI lowering's communication-pattern selection
 * (src/lower_mpi): the six matrix-multiply algorithms of the DISTAL paper's Figure 12
 * written in .dtl, the pattern chosen per tensor and communicate point (lw_stmt.comm[]),
 * a few layouts whose answer is known (transposes, replicated outputs, replicated grid
 * dims), the constructs the lowering rejects, and the printed plan. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontend/frontend.h"
#include "ir/ir.h"
#include "lower_mpi/lower.h"
#include "codegen/codegen.h"
#include "harness.h"


/* ---- harness ------------------------------------------------------------------------ */

typedef struct {
  char *out;
  size_t outlen;
  FILE *err;
  fe_source *src;
  fe_program *prog;
  ir_program *ir;
  lw_program *lp;
} run;

static void dump(run *r) {
  fflush(r->err);
  fprintf(stderr, "--- diagnostics:\n%s---\n", r->out ? r->out : "");
}

static bool lower_cuda; /* lower for --target cuda */

/* Parse, check, schedule: all must succeed.  Then lower; the result may be NULL. */
static lw_program *lower_run(run *r, const char *text) {
  memset(r, 0, sizeof *r);
  r->err = open_memstream(&r->out, &r->outlen);
  assert_non_null(r->err);
  unit_frontend(text, r->err, &r->out, &r->src, &r->prog);
  r->ir = ir_build(r->prog);
  assert_non_null(r->ir);
  int e = ir_schedule(r->ir, -1);
  if (e) dump(r);
  assert_int_equal(e, 0);
  r->lp = lw_lower(r->ir, lower_cuda);
  return r->lp;
}

static lw_program *lower_ok(run *r, const char *text) {
  lw_program *lp = lower_run(r, text);
  if (!lp) dump(r);
  assert_non_null(lp);
  return lp;
}

static void finish(run *r) {
  if (r->prog) fe_program_free(r->prog);
  fe_source_free(r->src);
  fclose(r->err);
  free(r->out);
  ir_arena_free();
}

/* The comm entry of a tensor (output: the written box, else the read box). */
static const lw_comm *comm_of(const run *r, int stmt, const char *tensor, bool output) {
  int t = fe_find_tensor(r->prog, tensor);
  assert_true(t >= 0);
  const lw_stmt *ls = &r->lp->stmts[stmt];
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].tensor == t && ls->comm[q].output == output) return &ls->comm[q];
  fprintf(stderr, "no %s comm for %s\n", output ? "write" : "read", tensor);
  fail();
  return NULL;
}

/* The loop variable of the communicate point, or "start". */
static const char *at_var(const run *r, int stmt, const lw_comm *c) {
  const lw_stmt *ls = &r->lp->stmts[stmt];
  if (c->depth < 0) return "start";
  assert_true(c->depth < ls->nloops);
  return ls->s->vars[ls->loops[c->depth]->var].name;
}

static int param(const run *r, const char *name) {
  int p = fe_find_param(r->prog, name);
  assert_true(p >= 0);
  return p;
}

#define W(r, t) comm_of(r, 0, t, true)
#define R(r, t) comm_of(r, 0, t, false)

static void expect_pattern(const run *r, const lw_comm *c, lw_pattern p, const char *at) {
  if (c->pattern != p)
    fprintf(stderr, "tensor %s: want %s, got %s (%s)\n", r->prog->tensors[c->tensor].name,
            lw_pattern_name(p), lw_pattern_name(c->pattern), c->why ? c->why : "");
  assert_int_equal(c->pattern, p);
  assert_string_equal(at_var(r, 0, c), at);
  assert_non_null(c->why);
}

static char *plan_text(const run *r, const int64_t *params, int64_t nranks) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  lw_print_plan(f, r->lp, params, nranks);
  fclose(f);
  return buf;
}

/* ---- the paper's Figure 12 algorithms ---------------------------------------------------- */

static const char SUMMA[] =
    "param n = 4096;\n"
    "param chunk = 256;\n"
    "machine M = grid(gx, gy);\n"
    "tensor A(n, n) @ M(xy -> xy);\n"
    "tensor B(n, n) @ M(xy -> xy);\n"
    "tensor C(n, n) @ M(xy -> xy);\n"
    "A(i, j) = B(i, k) * C(k, j)\n"
    "  .distribute({i, j}, {io, jo}, {ii, ji}, M)\n"
    "  .split(k, ko, ki, chunk)\n"
    "  .reorder({ko, ii, ji, ki})\n"
    "  .communicate(A, jo)\n"
    "  .communicate({B, C}, ko)\n"
    "  .substitute({ii, ji, ki}, gemm);\n";

/* SUMMA: A stays, B is broadcast along the grid's rows (dim 1), C along its columns (dim 0). */
static void test_summa(void **state) {
  (void)state;
  run r;
  lower_ok(&r, SUMMA);
  const lw_comm *a = W(&r, "A"), *b = R(&r, "B"), *c = R(&r, "C");
  expect_pattern(&r, a, PAT_LOCAL, "jo");
  expect_pattern(&r, b, PAT_BCAST, "ko");
  assert_int_equal(b->mask, 1u << 1);
  expect_pattern(&r, c, PAT_BCAST, "ko");
  assert_int_equal(c->mask, 1u << 0);
  assert_null(a->alt);
  assert_null(b->alt);
  assert_null(c->alt);
  const lw_stmt *ls = &r.lp->stmts[0];
  assert_int_equal(ls->ncomm, 3);
  assert_int_equal(ls->nloops, 6);
  assert_int_equal(ls->exec_mask, 3u);
  assert_int_equal(ls->outer, 3);
  assert_int_equal(ls->kernel_depth, 3);
  assert_false(ls->lhs_on_rhs);
  assert_int_equal(r.lp->ndims, 2);
  assert_true(sym_equal(r.lp->dims[1], sym_param(param(&r, "gy"))));
  /* io has gx iterations on gx ranks: one each, its value is the coordinate */
  assert_true(sym_equal(ls->bs[0], sym_const(1)));
  assert_true(sym_equal(lw_loop_value(r.lp, ls, 0), sym_coord(0)));
  assert_true(sym_equal(lw_loop_value(r.lp, ls, 2), sym_var(ls->loops[2]->var)));
  assert_int_equal(lw_loop_pos(ls, ir_var_find(ls->s, "ko")), 2);
  assert_int_equal(lw_loop_pos(ls, ir_var_find(ls->s, "k")), -1);
  /* the box of B: this rank's rows, the chunk of columns of step ko */
  const sym *n = sym_param(param(&r, "n")), *chunk = sym_param(param(&r, "chunk"));
  const sym *ko = sym_var(ir_var_find(ls->s, "ko"));
  const sym *lo = sym_mul(chunk, ko);
  assert_true(sym_equal(b->lo[1], lo));
  assert_true(sym_equal(b->hi[1], sym_min(&ls->facts, n, sym_add(lo, chunk))));
  assert_true(sym_equal(b->lo[0], r.lp->owner[b->tensor].lo[0]));
  assert_true(sym_equal(b->hi[0], r.lp->owner[b->tensor].hi[0]));
  /* the interval of k at ko (loops 0..2 fixed) is that chunk */
  const sym *klo, *khi;
  lw_interval(r.lp, ls, ir_var_find(ls->s, "k"), 2, &klo, &khi);
  assert_true(sym_equal(klo, lo));
  assert_true(sym_equal(khi, sym_min(&ls->facts, n, sym_add(lo, chunk))));
  finish(&r);
}

static const char CANNON_SQUARE[] =
    "param n = 256;\n"
    "machine M = grid(q, q);\n"
    "tensor A(n, n) @ M(xy -> xy);\n"
    "tensor B(n, n) @ M(xy -> xy);\n"
    "tensor C(n, n) @ M(xy -> xy);\n"
    "A(i, j) = B(i, k) * C(k, j)\n"
    "  .distribute({i, j}, {io, jo}, {ii, ji}, Grid(q, q))\n"
    "  .divide(k, ko, ki, q)\n"
    "  .reorder({ko, ii, ji, ki})\n"
    "  .rotate(ko, {io, jo}, kos)\n"
    "  .communicate(A, jo)\n"
    "  .communicate({B, C}, kos)\n"
    "  .substitute({ii, ji, ki}, gemm);\n";

/* Cannon on a square grid: B shifts along the rows (dim 1), C along the columns (dim 0). */
static void test_cannon_square(void **state) {
  (void)state;
  run r;
  lower_ok(&r, CANNON_SQUARE);
  const lw_comm *a = W(&r, "A"), *b = R(&r, "B"), *c = R(&r, "C");
  expect_pattern(&r, a, PAT_LOCAL, "jo");
  expect_pattern(&r, b, PAT_SHIFT, "kos");
  assert_int_equal(b->shift_dim, 1);
  expect_pattern(&r, c, PAT_SHIFT, "kos");
  assert_int_equal(c->shift_dim, 0);
  assert_null(b->alt);
  assert_null(c->alt);
  finish(&r);
}

static const char CANNON[] =
    "param n = 256;\n"
    "machine M = grid(gx, gy);\n"
    "tensor A(n, n) @ M(xy -> xy);\n"
    "tensor B(n, n) @ M(xy -> xy);\n"
    "tensor C(n, n) @ M(xy -> xy);\n"
    "A(i, j) = B(i, k) * C(k, j)\n"
    "  .distribute({i, j}, {io, jo}, {ii, ji}, Grid(gx, gy))\n"
    "  .divide(k, ko, ki, gx)\n"
    "  .reorder({ko, ii, ji, ki})\n"
    "  .rotate(ko, {io, jo}, kos)\n"
    "  .communicate(A, jo)\n"
    "  .communicate({B, C}, kos)\n"
    "  .substitute({ii, ji, ki}, gemm);\n";

/* Cannon as the paper writes it, on grid(gx, gy): k is divided by gx, so C (k along the
 * columns of the grid) shifts on any grid, and B (k along the rows) shifts only when
 * gx == gy: exchange, with a shift as the alternative tested at run time. */
static void test_cannon_rectangular(void **state) {
  (void)state;
  run r;
  lower_ok(&r, CANNON);
  const lw_comm *a = W(&r, "A"), *b = R(&r, "B"), *c = R(&r, "C");
  expect_pattern(&r, a, PAT_LOCAL, "jo");
  expect_pattern(&r, c, PAT_SHIFT, "kos");
  assert_int_equal(c->shift_dim, 0);
  assert_null(c->alt);
  expect_pattern(&r, b, PAT_EXCHANGE, "kos");
  assert_non_null(b->alt);
  assert_int_equal(b->alt->pattern, PAT_SHIFT);
  assert_int_equal(b->alt->shift_dim, 1);
  assert_int_equal(b->nassume, 2);
  assert_int_equal(b->assume[0], param(&r, "gx"));
  assert_int_equal(b->assume[1], param(&r, "gy"));
  /* the alternative keeps the box formulas */
  for (int x = 0; x < b->order; x++) {
    assert_true(sym_equal(b->alt->lo[x], b->lo[x]));
    assert_true(sym_equal(b->alt->hi[x], b->hi[x]));
  }
  int64_t params[3] = {-1, -1, -1};
  params[param(&r, "n")] = 8;
  params[param(&r, "gx")] = 2;
  params[param(&r, "gy")] = 2;
  char *plan = plan_text(&r, params, 4);
  assert_non_null(strstr(plan, "  read B at kos: exchange (point-to-point)"));
  assert_non_null(strstr(plan, "    when gx == gy at run time: shift along grid dim 1"));
  assert_non_null(strstr(plan, "  read C at kos: shift along grid dim 0 (MPI_Sendrecv)"));
  free(plan);
  finish(&r);
}

static const char PUMMA[] =
    "param n = 256;\n"
    "machine M = grid(gx, gy);\n"
    "tensor A(n, n) @ M(xy -> xy);\n"
    "tensor B(n, n) @ M(xy -> xy);\n"
    "tensor C(n, n) @ M(xy -> xy);\n"
    "A(i, j) = B(i, k) * C(k, j)\n"
    "  .distribute({i, j}, {io, jo}, {ii, ji}, Grid(gx, gy))\n"
    "  .divide(k, ko, ki, gx)\n"
    "  .reorder({ko, ii, ji, ki})\n"
    "  .rotate(ko, {io}, kos)\n"
    "  .communicate(A, jo)\n"
    "  .communicate({B, C}, kos)\n"
    "  .substitute({ii, ji, ki}, gemm);\n";

/* PUMMA: rotated by the row coordinate only, one matrix is broadcast and one shifted. */
static void test_pumma(void **state) {
  (void)state;
  run r;
  lower_ok(&r, PUMMA);
  const lw_comm *b = R(&r, "B"), *c = R(&r, "C");
  expect_pattern(&r, W(&r, "A"), PAT_LOCAL, "jo");
  int nb = (b->pattern == PAT_BCAST) + (c->pattern == PAT_BCAST);
  int ns = (b->pattern == PAT_SHIFT) + (c->pattern == PAT_SHIFT);
  assert_int_equal(nb, 1);
  assert_int_equal(ns, 1);
  /* B(i, k): the same k block for every rank of a grid row: broadcast along dim 1 */
  expect_pattern(&r, b, PAT_BCAST, "kos");
  assert_int_equal(b->mask, 1u << 1);
  /* C(k, j): k rotates with the row coordinate: shift along dim 0 */
  expect_pattern(&r, c, PAT_SHIFT, "kos");
  assert_int_equal(c->shift_dim, 0);
  finish(&r);
}

static const char JOHNSON[] =
    "param n = 256;\n"
    "machine M = grid(q, q, q);\n"
    "tensor A(n, n) @ M(xy -> xy0);\n"
    "tensor B(n, n) @ M(xz -> x0z);\n"
    "tensor C(n, n) @ M(zy -> 0yz);\n"
    "A(i, j) = B(i, k) * C(k, j)\n"
    "  .distribute({i, j, k}, {io, jo, ko}, {ii, ji, ki}, M)\n"
    "  .communicate({A, B, C}, ko)\n"
    "  .substitute({ii, ji, ki}, gemm);\n";

/* Johnson: B is broadcast from face y=0 along dim 1, C from face x=0 along dim 0, and the
 * partial products are reduced along dim 2 onto the face z=0 that holds A. */
static void test_johnson(void **state) {
  (void)state;
  run r;
  lower_ok(&r, JOHNSON);
  const lw_comm *a = W(&r, "A"), *b = R(&r, "B"), *c = R(&r, "C");
  expect_pattern(&r, b, PAT_BCAST, "ko");
  assert_int_equal(b->mask, 1u << 1);
  expect_pattern(&r, c, PAT_BCAST, "ko");
  assert_int_equal(c->mask, 1u << 0);
  expect_pattern(&r, a, PAT_REDUCE, "ko");
  assert_int_equal(a->mask, 1u << 2);
  assert_false(a->allreduce);
  assert_int_equal(a->root[2], 0);
  assert_int_equal(r.lp->stmts[0].exec_mask, 7u);
  int64_t params[2] = {-1, -1};
  params[param(&r, "n")] = 8;
  params[param(&r, "q")] = 2;
  char *plan = plan_text(&r, params, 8);
  assert_non_null(strstr(plan, "grid: 2 2 2 (8 ranks)\n"));
  assert_non_null(strstr(plan, "  write A at ko: reduce along grid dims {2} to root coord2=0"));
  assert_non_null(strstr(plan, "  read B at ko: broadcast along grid dims {1}"));
  assert_non_null(strstr(plan, "  read C at ko: broadcast along grid dims {0}"));
  /* every rank receives one tile (n/q)^2 of each and reduces one tile of A */
  assert_non_null(strstr(plan, "bytes per rank (rank 0): 128 = 1 steps, 16 elements of 8 bytes"));
  free(plan);
  finish(&r);
}

static const char SOLOMONIK[] =
    "param n = 256;\n"
    "param r = 1;\n"
    "machine M = grid(q, q, c);\n"
    "tensor A(n, n) @ M(xy -> xy0);\n"
    "tensor B(n, n) @ M(xy -> xy0);\n"
    "tensor C(n, n) @ M(xy -> xy0);\n"
    "A(i, j) = B(i, k) * C(k, j)\n"
    "  .distribute({i, j, k}, {io, jo, ko}, {ii, ji, ki}, M)\n"
    "  .divide(ki, kio, kii, r)\n"
    "  .reorder({kio, ii, ji, kii})\n"
    "  .rotate(kio, {io, jo}, kios)\n"
    "  .communicate(A, jo)\n"
    "  .communicate({B, C}, kios)\n"
    "  .substitute({ii, ji, kii}, gemm);\n";

/* Solomonik's 2.5-D algorithm: the layers' partial results are reduced along dim 2 onto
 * layer 0 that holds A; communicate(A, jo) names the task, the innermost of the directly
 * nested distributed loops io, jo, ko.  B and C live on layer 0 only, so every layer must
 * fetch its share. */
static void test_solomonik(void **state) {
  (void)state;
  run r;
  lower_ok(&r, SOLOMONIK);
  const lw_comm *a = W(&r, "A");
  expect_pattern(&r, a, PAT_REDUCE, "ko");
  assert_int_equal(a->mask, 1u << 2);
  assert_false(a->allreduce);
  assert_int_equal(a->root[2], 0);
  const lw_comm *b = R(&r, "B"), *c = R(&r, "C");
  assert_string_equal(at_var(&r, 0, b), "kios");
  assert_string_equal(at_var(&r, 0, c), "kios");
  assert_int_not_equal(b->pattern, PAT_LOCAL);
  assert_int_not_equal(c->pattern, PAT_LOCAL);
  assert_int_not_equal(b->pattern, PAT_REDUCE);
  finish(&r);
}

static const char COSMA[] =
    "param ni = 256;\n"
    "param nj = 192;\n"
    "param nk = 320;\n"
    "param steps = 2;\n"
    "machine M = grid(gx, gy, gz);\n"
    "tensor A(ni, nj) @ M(xy -> xy0);\n"
    "tensor B(ni, nk) @ M(xz -> x0z);\n"
    "tensor C(nk, nj) @ M(zy -> 0yz);\n"
    "A(i, j) = B(i, k) * C(k, j)\n"
    "  .distribute({i, j, k}, {io, jo, ko}, {ii, ji, ki}, Grid(gx, gy, gz))\n"
    "  .divide(ki, kio, kii, steps)\n"
    "  .reorder({kio, ii, ji, kii})\n"
    "  .communicate(A, ko)\n"
    "  .communicate({B, C}, kio)\n"
    "  .substitute({ii, ji, kii}, gemm);\n";

/* COSMA's distribution layer: like Johnson with the k range walked in steps. */
static void test_cosma(void **state) {
  (void)state;
  run r;
  lower_ok(&r, COSMA);
  const lw_comm *a = W(&r, "A");
  expect_pattern(&r, a, PAT_REDUCE, "ko");
  assert_int_equal(a->mask, 1u << 2);
  assert_int_equal(a->root[2], 0);
  assert_false(a->allreduce);
  const lw_comm *b = R(&r, "B"), *c = R(&r, "C");
  assert_string_equal(at_var(&r, 0, b), "kio");
  assert_string_equal(at_var(&r, 0, c), "kio");
  assert_int_not_equal(b->pattern, PAT_LOCAL);
  assert_int_not_equal(c->pattern, PAT_LOCAL);
  assert_int_not_equal(b->pattern, PAT_SHIFT);
  assert_int_not_equal(c->pattern, PAT_SHIFT);
  finish(&r);
}

/* Regression (was a bug): COSMA's B and C are exchanged point-to-point although each step's box is one
 * owner's sub-box, needed alike by every rank along one grid dim: B(i,k) @ xz -> x0z is a
 * broadcast along dim 1 from y=0, C(k,j) @ zy -> 0yz along dim 0 from x=0 (as in Johnson,
 * which is COSMA with steps = 1).  select_input takes a partitioned dim as local only when
 * the box equals the owner's block, not when it lies inside it. */
static void test_cosma_broadcasts(void **state) {
  (void)state;
  run r;
  lower_ok(&r, COSMA);
  const lw_comm *b = R(&r, "B"), *c = R(&r, "C");
  expect_pattern(&r, b, PAT_BCAST, "kio");
  assert_int_equal(b->mask, 1u << 1);
  expect_pattern(&r, c, PAT_BCAST, "kio");
  assert_int_equal(c->mask, 1u << 0);
  finish(&r);
}

/* ---- layouts with a known answer --------------------------------------------------------- */

/* A transposed read of a tiled matrix: tile (x, y) needs tile (y, x): point-to-point, and
 * a square grid does not help. */
static void test_transpose_exchange(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(gx, gy);\n"
               "tensor A(n, n) @ M(xy -> xy);\n"
               "tensor B(n, n) @ M(xy -> xy);\n"
               "A(i, j) = B(j, i).distribute({i, j}, {io, jo}, {ii, ji}, M);\n");
  expect_pattern(&r, W(&r, "A"), PAT_LOCAL, "jo");
  expect_pattern(&r, R(&r, "B"), PAT_EXCHANGE, "jo");
  assert_null(R(&r, "B")->alt);
  finish(&r);
}

/* Element-wise with identical layouts: nothing moves. */
static void test_elementwise_local(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(gx, gy);\n"
               "tensor A(n, n) @ M(xy -> xy);\n"
               "tensor B(n, n) @ M(xy -> xy);\n"
               "tensor C(n, n) @ M(xy -> xy);\n"
               "A(i, j) = B(i, j) + C(i, j).distribute({i, j}, {io, jo}, {ii, ji}, M);\n");
  expect_pattern(&r, W(&r, "A"), PAT_LOCAL, "jo");
  expect_pattern(&r, R(&r, "B"), PAT_LOCAL, "jo");
  expect_pattern(&r, R(&r, "C"), PAT_LOCAL, "jo");
  int64_t params[3] = {8, 2, 2};
  char *plan = plan_text(&r, params, 4);
  assert_non_null(strstr(plan, "statement 1: A(i,j) = B(i,j) + C(i,j)\n"));
  const char *p = plan;
  int zeros = 0;
  while ((p = strstr(p, "bytes per rank: 0\n"))) zeros++, p++;
  assert_int_equal(zeros, 3);
  free(plan);
  finish(&r);
}

/* Regression (was a bug): distribute({i, j}) without a divide assigns each rank a block of the i and j
 * iterations by the formula of the data (LANGUAGE.md section 3), so an element-wise
 * statement over identical layouts needs no communication; the lowering picks
 * point-to-point exchange (and "point-to-point accumulate" for the output) for every
 * tensor, one element per step, because the per-iteration box lies inside the rank's
 * block but is not equal to it.  Input:
 *   A(i, j) = B(i, j) + C(i, j).distribute({i, j});   all tensors @ M(xy -> xy) */
static void test_elementwise_plain_distribute_local(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(gx, gy);\n"
               "tensor A(n, n) @ M(xy -> xy);\n"
               "tensor B(n, n) @ M(xy -> xy);\n"
               "tensor C(n, n) @ M(xy -> xy);\n"
               "A(i, j) = B(i, j) + C(i, j).distribute({i, j});\n");
  expect_pattern(&r, W(&r, "A"), PAT_LOCAL, "j");
  expect_pattern(&r, R(&r, "B"), PAT_LOCAL, "j");
  expect_pattern(&r, R(&r, "C"), PAT_LOCAL, "j");
  finish(&r);
}

/* A replicated output of a distributed reduction: every rank gets the sum (allreduce). */
static void test_replicated_output_allreduce(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(g);\n"
               "tensor a(n);\n"
               "tensor B(n, n) @ M(xy -> y);\n"
               "tensor c(n) @ M(x -> x);\n"
               "a(i) = B(i, j) * c(j).distribute({j}, {jo}, {ji}, M);\n");
  const lw_comm *a = W(&r, "a");
  expect_pattern(&r, a, PAT_REDUCE, "jo");
  assert_true(a->allreduce);
  assert_int_equal(a->mask, 1u);
  expect_pattern(&r, R(&r, "B"), PAT_LOCAL, "jo");
  expect_pattern(&r, R(&r, "c"), PAT_LOCAL, "jo");
  int64_t params[2] = {8, 4};
  char *plan = plan_text(&r, params, 4);
  assert_non_null(strstr(plan, "  write a at jo: reduce (allreduce) along grid dims {0}"));
  assert_null(strstr(plan, "to root"));
  free(plan);
  finish(&r);
  /* the same for a scalar: a distributed dot product */
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(g);\n"
               "tensor s;\n"
               "tensor b(n) @ M(x -> x);\n"
               "tensor c(n) @ M(x -> x);\n"
               "s = b(i) * c(i).distribute({i}, {io}, {ii}, M);\n");
  const lw_comm *s = W(&r, "s");
  expect_pattern(&r, s, PAT_REDUCE, "io");
  assert_true(s->allreduce);
  assert_int_equal(s->order, 0);
  expect_pattern(&r, R(&r, "b"), PAT_LOCAL, "io");
  finish(&r);
}

/* Rows of B by rank (xy -> x) read by a computation distributed over columns: every rank
 * needs a piece of every rank's rows. */
static void test_row_layout_column_compute(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(g);\n"
               "tensor A(n, n) @ M(xy -> y);\n"
               "tensor B(n, n) @ M(xy -> x);\n"
               "A(i, j) = B(i, j).distribute({j}, {jo}, {ji}, M);\n");
  expect_pattern(&r, W(&r, "A"), PAT_LOCAL, "jo");
  expect_pattern(&r, R(&r, "B"), PAT_EXCHANGE, "jo");
  finish(&r);
}

/* xy -> xy* replicates the tiles along the third grid dim: computed on the first two dims,
 * every rank reads and writes its own replica. */
static void test_replicated_grid_dim_local(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(gx, gy, gz);\n"
               "tensor A(n, n) @ M(xy -> xy*);\n"
               "tensor B(n, n) @ M(xy -> xy*);\n"
               "tensor C(n, n) @ M(xy -> xy*);\n"
               "A(i, j) = B(i, j) * C(i, j).distribute({i, j}, {io, jo}, {ii, ji}, M);\n");
  expect_pattern(&r, W(&r, "A"), PAT_LOCAL, "jo");
  expect_pattern(&r, R(&r, "B"), PAT_LOCAL, "jo");
  expect_pattern(&r, R(&r, "C"), PAT_LOCAL, "jo");
  assert_int_equal(r.lp->stmts[0].exec_mask, 3u);
  assert_int_equal(r.lp->owner[fe_find_tensor(r.prog, "B")].kind[2], OWN_STAR);
  finish(&r);
}

/* Undistributed tensors are everywhere; without a machine there is one rank. */
static void test_replicated_and_no_machine(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(g);\n"
               "tensor a(n) @ M(x -> x);\n"
               "tensor B(n, n);\n"
               "tensor c(n);\n"
               "a(i) = B(i, j) * c(j).distribute({i}, {io}, {ii}, M);\n");
  expect_pattern(&r, W(&r, "a"), PAT_LOCAL, "io");
  expect_pattern(&r, R(&r, "B"), PAT_LOCAL, "io");
  assert_true(r.lp->owner[fe_find_tensor(r.prog, "B")].everywhere);
  assert_string_equal(R(&r, "B")->why, "replicated on every rank");
  finish(&r);
  lower_ok(&r, "tensor a(4);\ntensor b(4);\na(i) = b(i) * 2;\n");
  assert_int_equal(r.lp->ndims, 1);
  assert_true(sym_equal(r.lp->dims[0], sym_const(1)));
  expect_pattern(&r, W(&r, "a"), PAT_LOCAL, "start");
  expect_pattern(&r, R(&r, "b"), PAT_LOCAL, "start");
  char *plan = plan_text(&r, NULL, 1);
  assert_non_null(strstr(plan, "grid: 1 (1 ranks)\n"));
  free(plan);
  finish(&r);
}

/* Without communicate, a tensor is communicated under the innermost distributed loop;
 * without distribute, at the statement start. */
static void test_default_communicate_point(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(gx, gy);\n"
               "tensor A(n, n) @ M(xy -> xy);\n"
               "tensor B(n, n) @ M(xy -> xy);\n"
               "tensor C(n, n) @ M(xy -> xy);\n"
               "A(i, j) = B(i, k) * C(k, j).distribute({i, j}, {io, jo}, {ii, ji}, M);\n");
  /* the whole k range in one step: SUMMA with one chunk */
  expect_pattern(&r, W(&r, "A"), PAT_LOCAL, "jo");
  expect_pattern(&r, R(&r, "B"), PAT_BCAST, "jo");
  assert_int_equal(R(&r, "B")->mask, 2u);
  expect_pattern(&r, R(&r, "C"), PAT_BCAST, "jo");
  assert_int_equal(R(&r, "C")->mask, 1u);
  finish(&r);
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(g);\n"
               "tensor a(n) @ M(x -> x);\n"
               "tensor b(n) @ M(x -> x);\n"
               "a(i) = b(i);\n");
  /* no distribute: owner computes, i divided by g and its blocks distributed as a's; the
   * transfers are at the distributed loop, and there are none */
  expect_pattern(&r, W(&r, "a"), PAT_LOCAL, "i_dist");
  expect_pattern(&r, R(&r, "b"), PAT_LOCAL, "i_dist");
  finish(&r);
}

/* ---- owner computes: the loops the default distributes ----------------------------------- */

/* The distributed loops of statement stmt in nest order, as "var@griddim" words. */
static void expect_dist(const run *r, int stmt, const char *want) {
  const lw_stmt *ls = &r->lp->stmts[stmt];
  char got[256] = "";
  for (int k = 0; k < ls->nloops; k++)
    if (ls->loops[k]->distributed)
      snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s@%d", got[0] ? " " : "",
               ls->s->vars[ls->loops[k]->var].name, lw_gdim(r->lp, ls->loops[k]));
  if (strcmp(got, want)) fprintf(stderr, "statement %d: want distributed loops '%s', got '%s'\n", stmt + 1, want, got);
  assert_string_equal(got, want);
}

static void test_owner_computes(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\nparam m = 6;\nmachine M = grid(gx, gy);\n"
               "tensor A(n, m) @ M(xy -> yx);\n"   /* transposed onto the grid */
               "tensor B(n, m);\n"
               "tensor y(n);\n"
               "tensor x(m) @ M(x -> *x);\n"
               "tensor D(n, m) @ M(xy -> xy);\n"
               "tensor Z(n, m) @ M(xy -> x*);\n"
               "tensor a(n) @ M(x -> x0);\n"
               "tensor b(n) @ M(x -> *x);\n"
               "tensor s;\n"
               "tensor E(n, m) @ M(xy -> xy);\n"
               "A(i, j) = B(i, j) + 1;\n"          /* 1: the output decides; i onto dim 1 */
               "y(i) = D(i, j) * x(j);\n"          /* 2: the largest operand: D, not x */
               "Z(i, j) = D(i, j) * 2;\n"          /* 3: Z replicated along dim 1: no loop there */
               "a(i) = b(i) * 3;\n"                /* 4: a fixed along dim 1 */
               "s = b(i) * b(i);\n"                /* 5: a dot product: partial sums reduced */
               "y(i) = B(i, j) * x(j);\n"          /* 6: x the only partitioned one */
               "y(i) = D(i, j) + E(i, j);\n"       /* 7: a tie: the first */
               "B(i, j) = B(i, j) * 2;\n");        /* 8: every tensor replicated: redundant */
  expect_dist(&r, 0, "i_dist@1 j_dist@0");
  assert_int_equal(r.lp->stmts[0].exec_mask, 3u);
  assert_int_equal(comm_of(&r, 0, "A", true)->pattern, PAT_LOCAL);
  expect_dist(&r, 1, "i_dist@0 j_dist@1");
  assert_int_equal(comm_of(&r, 1, "D", false)->pattern, PAT_LOCAL);
  assert_int_equal(comm_of(&r, 1, "x", false)->pattern, PAT_LOCAL);
  expect_dist(&r, 2, "i_dist@0");
  assert_int_equal(r.lp->stmts[2].exec_mask, 1u);
  assert_int_equal(comm_of(&r, 2, "Z", true)->pattern, PAT_LOCAL);
  expect_dist(&r, 3, "i_dist@0");
  expect_dist(&r, 4, "i_dist@1");
  const lw_comm *sc = comm_of(&r, 4, "s", true);
  assert_int_equal(sc->pattern, PAT_REDUCE);
  assert_int_equal(sc->mask, 2u);
  assert_true(sc->allreduce);
  assert_int_equal(comm_of(&r, 4, "b", false)->pattern, PAT_LOCAL);
  expect_dist(&r, 5, "j_dist@1");
  expect_dist(&r, 6, "i_dist@0 j_dist@1");
  assert_int_equal(comm_of(&r, 6, "D", false)->pattern, PAT_LOCAL);
  expect_dist(&r, 7, "");
  assert_int_equal(r.lp->stmts[7].exec_mask, 0u);
  finish(&r);

  /* the largest by the params' defaults; a hierarchical machine, per level; a CSR matrix */
  lower_ok(&r, "param n = 8;\nparam m = 20;\nmachine M = [grid(2), grid(p)];\n"
               "tensor v(n) @ M(x -> x; x -> x);\n"
               "tensor w(m) @ M(x -> x; x -> *);\n"
               "tensor u(n);\n"
               "tensor A(n, n) csr @ M(ij -> i; ij -> j);\n"
               "tensor q(n);\n"
               "u(i) = v(i) * w(j);\n"
               "v(i) = u(i) + 1;\n"
               "q(i) = A(i, j) * u(j);\n");
  expect_dist(&r, 0, "j_dist@0");
  expect_dist(&r, 1, "i_dist@0 i_loc_dist@1");
  assert_int_equal(comm_of(&r, 1, "v", true)->pattern, PAT_LOCAL);
  expect_dist(&r, 2, "i_dist@0 j_dist@1");
  finish(&r);

  /* after the commands: a loop in threads or in a kernel is divided, its local part keeps
   * them; split's outer loop carries the variable; a loop under precompute's where is not
   * distributed (redundant along its dim) */
  lower_ok(&r, "param n = 8;\nmachine M = grid(gx, gy);\n"
               "tensor A(n, n) @ M(xy -> xy);\ntensor B(n, n) @ M(xy -> xy);\ntensor C(n, n) @ M(xy -> xy);\n"
               "tensor a(n) @ M(x -> x*);\ntensor b(n) @ M(x -> x*);\n"
               "A(i, j) = B(i, k) * C(k, j).parallelize(i, cpu_thread);\n"
               "A(i, j) = B(i, k) * C(k, j).substitute({i, j, k}, gemm);\n"
               "a(i) = b(i) * 2.split(i, io, ii, 3);\n"
               "a(i) = b(i) + 1.precompute(b(i) + 1, i, iw, t);\n"
               "A(i, j) = B(i, j) * a(j).reorder({j, i}).communicate(a, j);\n");
  expect_dist(&r, 0, "i_dist@0 j_dist@1");
  assert_int_equal(r.lp->stmts[0].loops[2]->par, PAR_CPU_THREAD);
  assert_string_equal(r.ir->stmts[0].vars[r.lp->stmts[0].loops[2]->var].name, "i_loc");
  expect_dist(&r, 1, "i_dist@0 j_dist@1");
  assert_int_equal(r.lp->stmts[1].kernel_depth, 2);
  expect_dist(&r, 2, "io_dist@0");
  expect_dist(&r, 3, "");
  expect_dist(&r, 4, "j_dist@1 i_dist@0");
  finish(&r);
}

/* Two statements are lowered independently; the output read on the right is noted. */
static void test_two_statements(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(g);\n"
               "tensor a(n) @ M(x -> x);\n"
               "tensor b(n) @ M(x -> x);\n"
               "tensor s;\n"
               "a(i) = a(i) + b(i).distribute({i}, {io}, {ii}, M);\n"
               "s = a(i) * b(i).distribute({i}, {io}, {ii}, M);\n");
  assert_int_equal(r.lp->nstmts, 2);
  assert_true(r.lp->stmts[0].lhs_on_rhs);
  assert_false(r.lp->stmts[1].lhs_on_rhs);
  assert_int_equal(comm_of(&r, 0, "a", true)->pattern, PAT_LOCAL);
  assert_int_equal(comm_of(&r, 0, "a", false)->pattern, PAT_LOCAL);
  assert_int_equal(comm_of(&r, 1, "s", true)->pattern, PAT_REDUCE);
  assert_true(comm_of(&r, 1, "s", true)->allreduce);
  assert_int_equal(comm_of(&r, 1, "a", false)->pattern, PAT_LOCAL);
  finish(&r);
}

/* ---- what the lowering rejects ------------------------------------------------------------ */

static void expect_lower_error(const char *text, int line, int col, const char *msg) {
  run r;
  assert_null(lower_run(&r, text));
  fflush(r.err);
  char want[64];
  snprintf(want, sizeof want, "t.dtl:%d:%d: error: ", line, col);
  if (!strstr(r.out, want) || !strstr(r.out, msg)) {
    fprintf(stderr, "--- want %s%s\n", want, msg);
    dump(&r);
  }
  assert_non_null(strstr(r.out, want));
  assert_non_null(strstr(r.out, msg));
  finish(&r);
}

static void test_lower_errors(void **state) {
  (void)state;
  expect_lower_error("param n = 8;\nmachine M = grid(p);\ntensor a(n) @ M(x -> x);\ntensor b(n) @ M(x -> x);\ntensor c(n);\n"
                     "a(i) = b(i)*c(i) + c(i).precompute(b(i)*c(i), i, iw, T).communicate(c, i);\n",
                     6, 50, "precompute: the workspace would be computed above a communicate point");
  expect_lower_error("param n = 8;\nmachine M = grid(p);\ntensor a(n, n) @ M(xy -> x);\ntensor b(n, n) csr;\ntensor c(n);\n"
                     "a(i, j) = b(i, j) * c(j) .precompute(b(i, j) * c(j), j, jw, T);\n",
                     6, 57, "precompute: the expression reads a sparse tensor");
  expect_lower_error("param n = 8;\nmachine M = grid(2) : gpu;\ntensor a(n) @ M(x -> x);\ntensor b(n);\na(i) = b(i);\n",
                     2, 13, "machine 'M' has a gpu level");
  expect_lower_error("param n = 8;\nmachine M = [grid(2), grid(2) : gpu];\ntensor a(n);\ntensor b(n);\na(i) = b(i);\n",
                     2, 23, "machine 'M' has a gpu level");
  /* sparse tensors are read only, and leaf kernels take dense operands */
  expect_lower_error("param n = 8;\ntensor a(n, n) csr;\ntensor b(n, n);\na(i, j) = b(i, j) * a(i, j);\n",
                     4, 1, "statement reads the sparse tensor 'a' it writes");
  expect_lower_error("param n = 8;\ntensor a(n, n) csr;\ntensor b(n, n);\na(i, j) = b(i, j) * 2 .parallelize(i, cpu_thread);\n",
                     4, 24, "parallelize: the statement writes sparse tensor 'a'");
  expect_lower_error("param n = 8;\ntensor A(n, n);\ntensor B(n, n) csr;\ntensor C(n, n);\n"
                     "A(i, j) = B(i, k) * C(k, j).substitute({i, j, k}, gemm);\n",
                     5, 29, "substitute: the kernel reads sparse tensor 'B'");
  lower_cuda = true;
  expect_lower_error("param n = 8;\nmachine M = grid(2) : gpu;\ntensor a(n) @ M(x -> x);\n"
                     "tensor B(n, n) csr @ M(xy -> x);\na(i) = B(i, j);\n",
                     4, 8, "tensor 'B' is sparse: the CUDA target (gpu machines) supports dense tensors only");
  lower_cuda = false;
  expect_lower_error("param n = 8;\ntensor a(n);\ntensor b(n);\na(i) = b(i).parallelize(i, gpu_thread);\n",
                     4, 13, "parallelize: GPU units need a gpu machine and --target cuda"); /* the command */
  /* the kernel must lie inside every communicate point */
  expect_lower_error("param n = 8;\nmachine M = grid(gx, gy);\n"
                     "tensor A(n, n) @ M(xy -> xy);\ntensor B(n, n) @ M(xy -> xy);\ntensor C(n, n) @ M(xy -> xy);\n"
                     "A(i, j) = B(i, k) * C(k, j)\n"
                     "  .distribute({i, j}, {io, jo}, {ii, ji}, M)\n"
                     "  .split(k, ko, ki, 4)\n"
                     "  .reorder({ko, ii, ji, ki})\n"
                     "  .communicate(B, ki)\n"
                     "  .substitute({ii, ji, ki}, gemm);\n",
                     11, 4, "substitute: loop 'ii' lies above a communicate point"); /* the command, not where ii was made */
  /* threads run below every communicate point: MPI runs on the rank's own thread */
  expect_lower_error("param n = 8;\nmachine M = grid(gx, gy);\n"
                     "tensor A(n, n) @ M(xy -> xy);\ntensor B(n, n) @ M(xy -> xy);\ntensor C(n, n) @ M(xy -> xy);\n"
                     "A(i, j) = B(i, k) * C(k, j)\n"
                     "  .distribute({i, j}, {io, jo}, {ii, ji}, M)\n"
                     "  .communicate(B, ii)\n"
                     "  .parallelize(ii, cpu_thread);\n",
                     9, 4, "parallelize: loop 'ii' lies above a communicate point");
}

/* Errors of the lowering point at the command that caused them, carried on the IR (the
 * loop's annotation), never at a command found by its name or by a variable it mentions:
 * here several commands of the same kind name the same variables, the wrong one comes
 * first, and commands rename and move the loops in between. */
static void test_lower_carets(void **state) {
  (void)state;
  /* the first of two parallelize commands gives the threads around the workspace */
  expect_lower_error("param n = 8;\ntensor a(n);\ntensor B(n, n);\ntensor c(n);\n"
                     "a(i) = B(i, j) * c(j)\n"
                     "  .precompute(B(i, j) * c(j), j, jw, w)\n"
                     "  .parallelize(i, cpu_thread)\n"
                     "  .parallelize(j, cpu_vector, ignore_races);\n",
                     7, 4, "parallelize: loop 'i' encloses precompute's workspace 'w'");
  /* a sparse result: the threads of the first parallelize, after a split and a reorder
   * moved the loops and a later parallelize names the same loop's children */
  expect_lower_error("param n = 8;\ntensor a(n, n) csr;\ntensor b(n, n);\n"
                     "a(i, j) = b(i, j) * 2\n"
                     "  .parallelize(i, cpu_thread)\n"
                     "  .split(j, jo, ji, 2)\n"
                     "  .reorder({jo, i})\n"
                     "  .parallelize(ji, cpu_vector);\n",
                     5, 4, "parallelize: the statement writes sparse tensor 'a'");
  /* GPU units: the second parallelize, on a loop that rotate renamed (not where r or ii
   * was made, not the first parallelize) */
  expect_lower_error("param n = 8;\ntensor a(n);\ntensor b(n);\n"
                     "a(i) = b(i)\n"
                     "  .split(i, io, ii, 2)\n"
                     "  .parallelize(io, cpu_vector)\n"
                     "  .rotate(ii, {io}, r)\n"
                     "  .parallelize(r, gpu_thread);\n",
                     8, 4, "parallelize: GPU units need a gpu machine and --target cuda");
  expect_lower_error("param n = 8;\ntensor a(n);\ntensor b(n);\n"
                     "a(i) = b(i)\n"
                     "  .split(i, io, ii, 2)\n"
                     "  .parallelize(io, gpu_block)\n"
                     "  .parallelize(ii, cpu_vector);\n",
                     6, 4, "parallelize: GPU units need a gpu machine and --target cuda");
  /* the kernel reads a sparse tensor: the substitute command, not the split that made ki */
  expect_lower_error("param n = 8;\ntensor A(n, n);\ntensor B(n, n) csr;\ntensor C(n, n);\n"
                     "A(i, j) = B(i, k) * C(k, j)\n"
                     "  .split(k, ko, ki, 4)\n"
                     "  .reorder({ko, i, j, ki})\n"
                     "  .substitute({i, j, ki}, gemm);\n",
                     8, 4, "substitute: the kernel reads sparse tensor 'B'");
}

/* The CUDA target: the kernels file of a program (the text of PREFIX.cu) and its host C. */
static char *cuda_emit(const char *text, char **host) {
  run r;
  lower_cuda = true;
  lw_program *lp = lower_ok(&r, text);
  lower_cuda = false;
  char *h = NULL, *c = NULL, *k = NULL;
  size_t hl = 0, cl = 0, kl = 0;
  FILE *fh = open_memstream(&h, &hl), *fc = open_memstream(&c, &cl), *fk = open_memstream(&k, &kl);
  cg_options o = {.prefix = "t", .header_name = "t.h", .source_name = "t.dtl"};
  assert_int_equal(cg_emit(fh, fc, fk, spmd_build(lp), &o), 0);
  fclose(fh);
  fclose(fc);
  fclose(fk);
  free(h);
  finish(&r);
  *host = c;
  return k;
}

/* Threads are the loops whose variables determine the output element (no atomics), the
 * summed loops run inside each thread; gpu units choose the threads, and a summed loop
 * mapped to threads makes the updates atomic unless ignore_races; gpu machines lower. */
static void test_cuda_kernels(void **state) {
  (void)state;
  char *host;
#define MV "param n = 8;\nmachine M = grid(g) : gpu;\ntensor a(n) @ M(x -> x);\ntensor B(n, n) @ M(xy -> x);\n" \
           "tensor c(n) @ M(x -> *);\n"
  char *k = cuda_emit(MV "a(i) = B(i,j) * c(j).distribute({i}, {io}, {ii}, M);\n", &host);
  assert_non_null(strstr(k, "ii (threads)"));
  assert_non_null(strstr(k, "j (inside each thread)"));
  assert_null(strstr(k, "dtl_atomic_add"));
  assert_non_null(strstr(k, "DTL_KERNEL_P(t_s0_k0, t_s0_k0_args, dtl__ka)"));
  assert_non_null(strstr(host, "t_s0_k0_launch(&dtl__ka, dtl_cu_stream(dtl_ctx))"));
  assert_non_null(strstr(host, "dtl_cu_attach("));
  assert_non_null(strstr(host, "dtl_cu_sync(dtl_plan->ctx)"));
  assert_null(strstr(host, "#pragma omp"));
  free(k), free(host);
  /* explicit units: the summed loop as threads (the schedule must say atomics or ignore_races) */
  k = cuda_emit(MV "a(i) = B(i,j) * c(j).distribute({i}, {io}, {ii}, M).parallelize(j, gpu_thread, atomics);\n", &host);
  assert_non_null(strstr(k, "j (threads)"));
  assert_non_null(strstr(k, "ii (inside each thread)"));
  assert_non_null(strstr(k, "dtl_atomic_add_double("));
  free(k), free(host);
  k = cuda_emit(MV "a(i) = B(i,j) * c(j).distribute({i}, {io}, {ii}, M).parallelize(j, gpu_thread, ignore_races);\n", &host);
  assert_null(strstr(k, "dtl_atomic_add"));
  free(k), free(host);
  k = cuda_emit(MV "a(i) = B(i,j) * c(j).distribute({i}, {io}, {ii}, M).parallelize(ii, gpu_block).parallelize(j, gpu_thread, atomics);\n", &host);
  assert_non_null(strstr(k, "dtl_atomic_add_double("));
  /* block loops vary slowest: j (the thread loop) is decoded first */
  char *pj = strstr(k, "const int64_t v_j = dtl__ka.dtl__mlo[1]"), *pi = strstr(k, "const int64_t v_ii = dtl__ka.dtl__mlo[0]");
  assert_non_null(pj);
  assert_non_null(pi);
  assert_true(pj < pi);
  free(k), free(host);
  /* a full reduction: every loop is a thread, the updates atomic */
  k = cuda_emit("param n = 8;\nmachine M = grid(g);\ntensor r int64;\ntensor b(n) int64 @ M(x -> x);\n"
                "r = b(i) * b(i).distribute({i}, {io}, {ii}, M);\n", &host);
  assert_non_null(strstr(k, "ii (threads)"));
  assert_non_null(strstr(k, "dtl_atomic_add_int64("));
  free(k), free(host);
  /* substitute(gemm) calls the device kernel of libdistal_cuda */
  k = cuda_emit("param n = 8;\nmachine M = grid(gx, gy);\ntensor A(n, n) @ M(xy -> xy);\ntensor B(n, n) @ M(xy -> xy);\n"
                "tensor C(n, n) @ M(xy -> xy);\nA(i, j) = B(i, k) * C(k, j)\n"
                "  .distribute({i, j}, {io, jo}, {ii, ji}, M).split(k, ko, ki, 4).reorder({ko, ii, ji, ki})\n"
                "  .communicate(A, jo).communicate({B, C}, ko).substitute({ii, ji, ki}, gemm);\n", &host);
  assert_non_null(strstr(host, "if (dtl_cu_gemm(dtl_ctx, DTL_DOUBLE, 0, 0, "));
  assert_non_null(strstr(host, "dtl_cu_bcast_fetch_begin("));
  assert_non_null(strstr(host, "dtl_cu_request *dtl_t1_B_req"));
  assert_null(strstr(k, "DTL_KERNEL_P"));
  free(k), free(host);
#undef MV
}

/* a hierarchical machine: the inner level's dims follow level 0's, blocks nest, and a
 * second distribute onto M[1] keeps the owner's block local */
static void test_hierarchical(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 64;\nparam chunk = 8;\nmachine M = [grid(gx, gy), grid(px, py)];\n"
               "tensor A(n, n) @ M(xy -> xy; xy -> xy);\ntensor B(n, n) @ M(xy -> xy; xy -> xy);\n"
               "tensor C(n, n) @ M(xy -> xy; xy -> xy);\n"
               "A(i, j) = B(i, k) * C(k, j)\n"
               "  .distribute({i, j}, {io, jo}, {ii, ji}, M)\n"
               "  .distribute({ii, ji}, {iio, jio}, {iii, jii}, M[1])\n"
               "  .split(k, ko, ki, chunk)\n  .reorder({ko, iii, jii, ki})\n"
               "  .communicate(A, jio)\n  .communicate({B, C}, ko);\n");
  assert_int_equal(r.lp->ndims, 4);
  assert_int_equal(r.lp->nlevels, 2);
  assert_int_equal(r.lp->level_off[1], 2);
  assert_int_equal(r.lp->stmts[0].exec_mask, 0xf);
  assert_int_equal(comm_of(&r, 0, "A", true)->pattern, PAT_LOCAL);
  assert_int_equal(comm_of(&r, 0, "B", false)->pattern, PAT_BCAST);
  assert_int_equal(comm_of(&r, 0, "B", false)->mask, 0xa); /* dims 1 and 3: y of both levels */
  assert_int_equal(comm_of(&r, 0, "C", false)->mask, 0x5);
  finish(&r);
}

/* ---- the printed plan ------------------------------------------------------------------------ */

static void test_plan_summa(void **state) {
  (void)state;
  run r;
  lower_ok(&r, SUMMA);
  int64_t params[4];
  params[param(&r, "n")] = 12;
  params[param(&r, "chunk")] = 4;
  params[param(&r, "gx")] = 2;
  params[param(&r, "gy")] = 3;
  char *plan = plan_text(&r, params, 6);
  static const char *const lines[] = {
      "grid: 2 3 (6 ranks)\n",
      "statement 1: A(i,j) = B(i,k) * C(k,j)\n",
      "  write A at jo: local -- the owner computes its own block\n",
      "  read B at ko: broadcast along grid dims {1} (MPI_Ibcast) -- every rank along these dims needs the same box\n",
      "  read C at ko: broadcast along grid dims {0} (MPI_Ibcast) -- every rank along these dims needs the same box\n",
      /* B: 3 steps of a 6 x 4 box = n*n/gx, the first its own (columns 0..3); C: 3 steps of
       * 4 x 4 = n*n/gy, of which rows 0..5 its own */
      "    bytes per rank (rank 0): 384 = 3 steps, 48 elements of 8 bytes received (its boxes hold 72, 24 of them its own)\n",
      "    bytes per rank (rank 0): 192 = 3 steps, 24 elements of 8 bytes received (its boxes hold 48, 24 of them its own)\n",
      "    box: [chunk * ko, dtl_min(n, chunk + chunk * ko)) x [coord1 * dtl_ceildiv(n, gy), "
      "dtl_min(n, coord1 * dtl_ceildiv(n, gy) + dtl_ceildiv(n, gy)))\n",
  };
  for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++) {
    if (!strstr(plan, lines[k])) fprintf(stderr, "--- missing: %s--- plan:\n%s", lines[k], plan);
    assert_non_null(strstr(plan, lines[k]));
  }
  free(plan);
  /* unknown params: a grid of '?', volumes not evaluated */
  int64_t unknown[4] = {-1, -1, -1, -1};
  plan = plan_text(&r, unknown, 6);
  assert_non_null(strstr(plan, "grid: ? ? (6 ranks)\n"));
  assert_non_null(strstr(plan, "bytes per rank: 8 x volume of the box per step (not evaluated)\n"));
  free(plan);
  finish(&r);
  /* the CUDA target names the NCCL operation (after finish: the IR arena is shared) */
  lower_cuda = true;
  lower_ok(&r, SUMMA);
  lower_cuda = false;
  plan = plan_text(&r, params, 6);
  assert_non_null(strstr(plan, "  read B at ko: broadcast along grid dims {1} (ncclBroadcast) -- "));
  free(plan);
  finish(&r);
}

/* float elements are 4 bytes */
/* The cost model's estimate of a sparse tensor's entries: 10 in every fiber of its innermost
 * compressed level, at most the fiber's extent; a statement's loops run the share of their
 * dense iterations its right side's sparsest factor gives, a sum its densest term's (a term
 * placed outside a summed loop adds none); lw_stmt_cost counts a sparse box and the loops so. */
static void test_sparse_density(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 1000;\nparam m = 400;\nmachine M = grid(g);\n"
               "tensor A(n, m) csr @ M(ij -> i);\ntensor B(n, m) {compressed, dense} @ M(ij -> i);\n"
               "tensor T(n, m, 5) csf @ M(ijk -> i);\ntensor x(m) @ M(j -> j);\ntensor y(n) @ M(i -> i);\n"
               "tensor u(n) @ M(i -> i);\n"
               "y(i) = A(i, j) * x(j);\n"
               "u(i) = A(i, j) * x(j) + y(i);\n"
               "y(i) = (A(i, j) + B(i, j)) * x(j);\n"
               "y(i) = exp(A(i, j)) * x(j);\n");
  int64_t params[8] = {0};
  params[param(&r, "n")] = 1000, params[param(&r, "m")] = 400, params[param(&r, "g")] = 4;
  const fe_program *p = r.prog;
  assert_true(fabs(lw_density(p, fe_find_tensor(p, "A"), params) - 10.0 / 400) < 1e-12);
  assert_true(fabs(lw_density(p, fe_find_tensor(p, "B"), params) - 10.0 / 1000) < 1e-12); /* its compressed rows */
  assert_true(lw_density(p, fe_find_tensor(p, "T"), params) == 1);                      /* fibers of 5 */
  assert_true(lw_density(p, fe_find_tensor(p, "x"), params) == 1);
  /* whole numbers of entries exactly (the product before the division), the rest rounded up */
  for (int64_t k = 1; k <= 4000; k++) {
    int64_t want = (k * 10 + 399) / 400;
    if (lw_entries(p, fe_find_tensor(p, "A"), params, k) != want) fprintf(stderr, "%lld positions of A\n", (long long)k);
    assert_int_equal(lw_entries(p, fe_find_tensor(p, "A"), params, k), want);
  }
  assert_int_equal(lw_entries(p, fe_find_tensor(p, "x"), params, 1234), 1234);
  params[param(&r, "m")] = 0; /* a param without a value counts 1024 */
  assert_true(fabs(lw_density(p, fe_find_tensor(p, "A"), params) - 10.0 / 1024) < 1e-12);
  params[param(&r, "m")] = 400;
  const double want[4] = {10.0 / 400, 10.0 / 400, 10.0 / 400, 1};
  for (int i = 0; i < 4; i++) {
    double d = lw_expr_density(p, r.lp->stmts[i].rhs, params);
    if (fabs(d - want[i]) > 1e-12) fprintf(stderr, "statement %d: density %g, want %g\n", i + 1, d, want[i]);
    assert_true(fabs(d - want[i]) < 1e-12);
  }
  /* rank 0 of 4: 250 rows of 10 entries, A's box its own (no bytes), x's whole extent */
  lw_cost c;
  assert_true(lw_stmt_cost(r.lp, 0, params, &c));
  assert_int_equal(c.points, 2500);
  assert_true(c.sparse_entries == 0);
  finish(&r);
  /* A held by columns, read by rows: rank 0 receives the entries of its rows in the other
   * ranks' columns, 10 a row in the model, each 8 bytes a coordinate and the value */
  lower_ok(&r, "param n = 1000;\nmachine M = grid(g);\ntensor A(n, n) csr @ M(ij -> j);\n"
               "tensor x(n) @ M(i -> i);\ntensor y(n) @ M(i -> i);\ny(i) = A(i, j) * x(j);\n");
  int64_t q[4] = {0};
  q[param(&r, "n")] = 1000, q[param(&r, "g")] = 4;
  assert_true(lw_stmt_cost(r.lp, 0, q, &c));
  assert_true(fabs(c.sparse_entries - 250 * 750 * 10.0 / 1000) < 1);
  assert_int_equal(c.points, 2500);
  finish(&r);
}

/* lw_stmt_cost_part: a fetch of a tensor the statement's loop does not write, with a box of
 * coordinates only, is a loop's invariant fetch; an iteration counts the rest of the
 * communication and all the loops, memory and buffers, and the fetch's bytes and messages are
 * counted once; a panel fetched at each step of k (its box over k's loop) is no invariant. */
static void test_cost_loop_parts(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 100;\nmachine M = grid(g);\ntensor A(n, n) @ M(ij -> j);\n"
               "tensor x(n) @ M(i -> i);\ntensor y(n) @ M(i -> i);\ny(i) = A(i, j) * x(j);\n"
               "y(i) = A(i, k) * x(k).distribute({i}, {io}, {ii}, M).split(k, ko, ki, 10).communicate(A, ko);\n");
  int64_t q[2] = {0};
  q[param(&r, "n")] = 100, q[param(&r, "g")] = 4;
  const fe_program *p = r.prog;
  bool unwritten[8] = {false};
  unwritten[fe_find_tensor(p, "A")] = unwritten[fe_find_tensor(p, "x")] = true;
  const int64_t zero[LW_MAX_DIMS] = {0};
  lw_cost all, it, once, plain;
  /* statement 1: A's rows of rank 0 (25 x 100, its own 25 x 25) and x whole (its own 25) */
  assert_true(lw_stmt_cost_part(r.lp, 0, q, zero, 0, unwritten, LW_PART_ALL, &all));
  assert_true(lw_stmt_cost_at(r.lp, 0, q, zero, 0, &plain));
  assert_int_equal(all.bytes, plain.bytes);
  assert_int_equal(all.bytes, (25 * 75 + 75) * 8);
  assert_true(lw_stmt_cost_part(r.lp, 0, q, zero, 0, unwritten, LW_PART_ITERATION, &it));
  assert_true(lw_stmt_cost_part(r.lp, 0, q, zero, 0, unwritten, LW_PART_ONCE, &once));
  assert_int_equal(it.bytes, 0);
  assert_int_equal(it.msgs, 0);
  assert_int_equal(once.bytes, all.bytes);
  assert_int_equal(once.msgs, all.msgs);
  assert_true(fabs(once.wire_bytes - all.wire_bytes) < 1e-9);
  assert_int_equal(it.points, all.points);
  assert_int_equal(it.buffer, all.buffer);
  assert_true(it.mem_bytes == all.mem_bytes);
  assert_int_equal(once.points, 0);
  assert_int_equal(once.buffer, 0);
  assert_true(once.mem_bytes == 0);
  /* x written in the loop: its fetch each iteration, A's once */
  unwritten[fe_find_tensor(p, "x")] = false;
  assert_true(lw_stmt_cost_part(r.lp, 0, q, zero, 0, unwritten, LW_PART_ITERATION, &it));
  assert_true(lw_stmt_cost_part(r.lp, 0, q, zero, 0, unwritten, LW_PART_ONCE, &once));
  assert_int_equal(it.bytes, 75 * 8);
  assert_int_equal(once.bytes, 25 * 75 * 8);
  assert_int_equal(it.bytes + once.bytes, all.bytes);
  /* statement 2: A's panels at each step of ko are fetched every iteration */
  unwritten[fe_find_tensor(p, "x")] = true;
  assert_true(lw_stmt_cost_part(r.lp, 1, q, zero, 0, unwritten, LW_PART_ALL, &all));
  assert_true(lw_stmt_cost_part(r.lp, 1, q, zero, 0, unwritten, LW_PART_ONCE, &once));
  assert_true(lw_stmt_cost_part(r.lp, 1, q, zero, 0, unwritten, LW_PART_ITERATION, &it));
  assert_true(all.bytes > 0);
  for (int k = 0; k < r.lp->stmts[1].ncomm; k++) {
    const lw_comm *c = &r.lp->stmts[1].comm[k];
    if (c->tensor == fe_find_tensor(p, "A")) assert_false(lw_loop_invariant(r.lp, 1, c, q, unwritten));
  }
  assert_int_equal(it.bytes + once.bytes, all.bytes);
  /* no loop: nothing is invariant */
  assert_true(lw_stmt_cost_part(r.lp, 0, q, zero, 0, NULL, LW_PART_ONCE, &once));
  assert_int_equal(once.bytes, 0);
  finish(&r);
}

static void test_plan_element_size(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(g);\n"
               "tensor a(n) float @ M(x -> x);\n"
               "tensor B(n, n) float @ M(xy -> y);\n"
               "tensor c(n) float @ M(x -> x);\n"
               "a(i) = B(i, j) * c(j).distribute({i}, {io}, {ii}, M);\n");
  int64_t params[2] = {8, 2};
  char *plan = plan_text(&r, params, 2);
  /* B: rank 0 needs rows 0..3, all 8 columns, and holds columns 0..3; c: all 8 elements, and
   * holds 4 */
  assert_non_null(strstr(plan, "bytes per rank (rank 0): 64 = 1 steps, 16 elements of 4 bytes received (its boxes hold 32, 16 of them its own)\n"));
  assert_non_null(strstr(plan, "bytes per rank (rank 0): 16 = 1 steps, 4 elements of 4 bytes received (its boxes hold 8, 4 of them its own)\n"));
  free(plan);
  finish(&r);
}

static void test_pattern_names(void **state) {
  (void)state;
  assert_string_equal(lw_pattern_name(PAT_LOCAL), "local");
  assert_string_equal(lw_pattern_name(PAT_BCAST), "broadcast");
  assert_string_equal(lw_pattern_name(PAT_SHIFT), "shift");
  assert_string_equal(lw_pattern_name(PAT_REDUCE), "reduce");
  assert_string_equal(lw_pattern_name(PAT_EXCHANGE), "exchange");
}

/* ---- the SPMD program and its rewrites ------------------------------------------------ */
/* Find the first node of a kind (and, for communication, an operation) in a tree. */
static const sp_node *find_node(const sp_node *n, sn_kind k, int op) {
  if (!n) return NULL;
  if (n->kind == k && (op < 0 || (int)n->op == op)) return n;
  for (int q = 0; q < n->nkids; q++) {
    const sp_node *f = find_node(n->kids[q], k, op);
    if (f) return f;
  }
  return NULL;
}

static int count_nodes(const sp_node *n, sn_kind k, int op) {
  if (!n) return 0;
  int c = n->kind == k && (op < 0 || (int)n->op == op);
  for (int q = 0; q < n->nkids; q++) c += count_nodes(n->kids[q], k, op);
  return c;
}

static const sp_log *log_of(const sp_program *sp, const char *rewrite, int nth) {
  for (int q = 0; q < sp->nlog; q++)
    if (!strcmp(sp->log[q].rewrite, rewrite) && nth-- == 0) return &sp->log[q];
  return NULL;
}

/* The rewrite table: every entry named, with both halves and a description. */
static void test_rewrite_table(void **state) {
  (void)state;
  assert_true(sp_nrewrites >= 2);
  for (int r = 0; r < sp_nrewrites; r++) {
    assert_non_null(sp_rewrites[r].name);
    assert_non_null(sp_rewrites[r].can_apply);
    assert_non_null(sp_rewrites[r].apply);
    assert_true(sp_rewrites[r].describe && strlen(sp_rewrites[r].describe) > 10);
  }
}

/* SUMMA: both broadcasts of the sequential k loop are pipelined (begin before the loop's
 * first step, wait, begin the next step), and their buffers double. */
static void test_spmd_pipeline(void **state) {
  (void)state;
  run r;
  lower_ok(&r, SUMMA);
  sp_program *sp = spmd_build(r.lp);
  assert_int_equal(sp->nfuncs, 1);
  const sp_node *body = sp->funcs[0].body;
  assert_int_equal(count_nodes(body, SN_COMM, SC_BCAST), 0);
  assert_int_equal(count_nodes(body, SN_COMM, SC_BCAST_BEGIN), 4);
  assert_int_equal(count_nodes(body, SN_COMM, SC_WAIT), 2);
  const sp_log *l = log_of(sp, "pipeline", 0);
  assert_non_null(l);
  assert_null(l->why);
  int doubled = 0;
  for (int b = 0; b < sp->nbufs; b++) doubled += sp->bufs[b].doubled;
  assert_int_equal(doubled, 2);
  /* the next step's box is the current one at k + 1 */
  const sp_node *w = find_node(body, SN_COMM, SC_WAIT);
  assert_non_null(w);
  assert_true(w->depth_var >= 0);
  finish(&r);
}

/* Johnson: the broadcasts sit in distributed loops; the pipeline refuses, saying why. */
static void test_spmd_pipeline_refused(void **state) {
  (void)state;
  run r;
  lower_ok(&r, JOHNSON);
  sp_program *sp = spmd_build(r.lp);
  const sp_log *l = log_of(sp, "pipeline", 0);
  assert_non_null(l);
  assert_non_null(l->why);
  assert_non_null(strstr(l->why, "distributed"));
  assert_int_equal(count_nodes(sp->funcs[0].body, SN_COMM, SC_BCAST_BEGIN), 0);
  for (int b = 0; b < sp->nbufs; b++) assert_false(sp->bufs[b].doubled);
  finish(&r);
}

/* A replicated result: the reduction to roots and the broadcast of the total become one
 * allreduce; a result with one owner keeps its reduction to the root. */
static void test_spmd_allreduce(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(g);\n"
               "tensor s;\n"
               "tensor b(n) @ M(x -> x);\n"
               "tensor c(n) @ M(x -> x);\n"
               "s = b(i) * c(i).distribute({i}, {io}, {ii}, M);\n");
  sp_program *sp = spmd_build(r.lp);
  const sp_node *body = sp->funcs[0].body;
  assert_int_equal(count_nodes(body, SN_COMM, SC_ALLREDUCE), 1);
  assert_int_equal(count_nodes(body, SN_COMM, SC_REDUCE), 0);
  assert_int_equal(count_nodes(body, SN_COMM, SC_BCAST_RESULT), 0);
  assert_int_equal(find_node(body, SN_COMM, SC_ALLREDUCE)->mask, 1u);
  assert_non_null(log_of(sp, "allreduce", 0));
  assert_null(log_of(sp, "allreduce", 0)->why);
  finish(&r);
  lower_ok(&r, JOHNSON);
  sp = spmd_build(r.lp);
  body = sp->funcs[0].body;
  assert_int_equal(count_nodes(body, SN_COMM, SC_REDUCE), 1);
  assert_int_equal(count_nodes(body, SN_COMM, SC_ALLREDUCE), 0);
  assert_null(log_of(sp, "allreduce", 0));
  finish(&r);
}

/* SpMV over CSR row blocks: the broadcast of the whole vector becomes a halo exchange at the
 * stored coordinates of A's level 1; where x is read at a dense j (A not a factor of the whole
 * right side) or at the inner half of a split of j, the broadcast stays and the log says why. */
static void test_spmd_halo(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(g);\n"
               "tensor A(n, n) csr @ M(ij -> i);\n"
               "tensor x(n) @ M(i -> i);\n"
               "tensor y(n) @ M(i -> i);\n"
               "tensor b(n) @ M(i -> i);\n"
               "y(i) = A(i, j) * x(j).distribute({i}, {io}, {ii}, M);\n"
               "y(i) = b(i) - A(i, j) * x(j).distribute({i}, {io}, {ii}, M);\n"
               "y(i) = A(i, j) * x(j).distribute({i}, {io}, {ii}, M).split(j, jo, ji, 3);\n");
  sp_program *sp = spmd_build(r.lp);
  const sp_node *h = find_node(sp->funcs[0].body, SN_COMM, SC_HALO);
  assert_non_null(h);
  assert_int_equal(count_nodes(sp->funcs[0].body, SN_COMM, SC_BCAST), 0);
  assert_int_equal(h->mask, 1u);
  assert_string_equal(sp->tensors[h->halo_tensor].name, "A");
  assert_int_equal(h->halo_level, 1);
  assert_string_equal(sp->tensors[sp->bufs[h->buf].tensor].name, "x");
  const sp_log *l = log_of(sp, "halo", 0);
  assert_non_null(l);
  assert_null(l->why);
  /* b(i) - A(i, j) * x(j): b counts once, before the loop over the stored coordinates */
  assert_int_equal(count_nodes(sp->funcs[1].body, SN_COMM, SC_HALO), 1);
  assert_null(log_of(sp, "halo", 1)->why);
  assert_int_equal(count_nodes(sp->funcs[1].body, SN_LOOP, -1), 5); /* the collective loop; two nests of two loops (overlap) */
  const sp_node *sl = find_node(sp->funcs[1].body, SN_ACC, -1);
  assert_non_null(sl);
  /* a split j: not j itself */
  assert_int_equal(count_nodes(sp->funcs[2].body, SN_COMM, SC_HALO), 0);
  assert_int_equal(count_nodes(sp->funcs[2].body, SN_COMM, SC_BCAST), 1);
  assert_non_null(log_of(sp, "halo", 2)->why);
  finish(&r);
  /* a sparse operand that a statement writes: its stored coordinates change */
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(g);\n"
               "tensor A(n, n) csr @ M(ij -> i);\n"
               "tensor B(n, n) csr @ M(ij -> i);\n"
               "tensor x(n) @ M(i -> i);\n"
               "tensor y(n) @ M(i -> i);\n"
               "B(i, j) = A(i, j) * 2.distribute({i}, {io}, {ii}, M);\n"
               "y(i) = B(i, j) * x(j).distribute({i}, {io}, {ii}, M);\n");
  sp = spmd_build(r.lp);
  assert_int_equal(count_nodes(sp->funcs[1].body, SN_COMM, SC_HALO), 0);
  assert_non_null(strstr(log_of(sp, "halo", 0)->why, "writes the sparse operand"));
  finish(&r);
}

/* The rewrite overlap: after the halo exchange of an SpMV, the rows that read no ghost run
 * while it travels and the others after halo.end, each nest with its row test right after the
 * row's position (before the register sum); a scalar result (an allreduce after the nest)
 * keeps one exchange and one nest, and the log says why. */
static int count_guards(const sp_node *n, int phase) {
  if (!n) return 0;
  int c = n->kind == SN_GUARD && n->halo_guard && n->halo_phase == phase;
  for (int q = 0; q < n->nkids; q++) c += count_guards(n->kids[q], phase);
  return c;
}

static void test_spmd_overlap(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(g);\n"
               "tensor A(n, n) csr @ M(ij -> i);\n"
               "tensor x(n) @ M(i -> i);\n"
               "tensor y(n) @ M(i -> i);\n"
               "tensor s;\n"
               "y(i) = A(i, j) * x(j).distribute({i}, {io}, {ii}, M);\n"
               "s = A(i, j) * x(j).distribute({i}, {io}, {ii}, M);\n");
  sp_program *sp = spmd_build(r.lp);
  const sp_node *body = sp->funcs[0].body;
  const sp_node *h = find_node(body, SN_COMM, SC_HALO);
  assert_non_null(h);
  assert_true(h->halo_split);
  assert_int_equal(count_nodes(body, SN_COMM, SC_HALO_END), 1);
  assert_int_equal(count_guards(body, 0), 1);
  assert_int_equal(count_guards(body, 1), 1);
  assert_null(log_of(sp, "overlap", 0)->why);
  /* the guard follows the row's position and precedes the register sum */
  const sp_node *acc = find_node(body, SN_ACC, -1);
  assert_non_null(acc);
  /* a sum to a scalar: an allreduce follows the nest */
  const sp_node *h2 = find_node(sp->funcs[1].body, SN_COMM, SC_HALO);
  assert_non_null(h2);
  assert_false(h2->halo_split);
  assert_int_equal(count_nodes(sp->funcs[1].body, SN_COMM, SC_HALO_END), 0);
  assert_int_equal(count_guards(sp->funcs[1].body, 0) + count_guards(sp->funcs[1].body, 1), 0);
  assert_non_null(log_of(sp, "overlap", 1)->why);
  finish(&r);
}

/* The pass simd: a dense register sum runs in lanes; a sum over stored coordinates (a gather)
 * and an element-wise loop (no register) are left alone, each with its reason. */
static bool has_simd(const sp_node *n) {
  if (!n) return false;
  if (n->kind == SN_LOOP && n->simd_sum) return true;
  for (int q = 0; q < n->nkids; q++)
    if (has_simd(n->kids[q])) return true;
  return false;
}

static void test_spmd_simd(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(g);\n"
               "tensor A(n, n) csr @ M(ij -> i);\n"
               "tensor B(n, n) @ M(ij -> i);\n"
               "tensor x(n) @ M(i -> i);\n"
               "tensor y(n) @ M(i -> i);\n"
               "tensor c(n);\n"
               "y(i) = B(i, j) * c(j);\n"
               "y(i) = A(i, j) * x(j);\n"
               "y(i) = x(i) * 2;\n");
  sp_program *sp = spmd_build(r.lp);
  assert_true(has_simd(sp->funcs[0].body));
  const sp_node *acc = find_node(sp->funcs[0].body, SN_ACC, -1);
  assert_non_null(acc);
  assert_null(log_of(sp, "simd", 0)->why);
  assert_false(has_simd(sp->funcs[1].body));
  assert_non_null(log_of(sp, "simd", 1)->why);
  assert_false(has_simd(sp->funcs[2].body));
  finish(&r);
}

/* The rewrite strips: a loop summing into an output row (SpMM's loop over stored entries, a
 * dense product's loop over its sum) keeps the row's columns in registers, 8 doubles at a
 * time; a loop whose output element moves with it, and one whose inner loop's variable is not
 * the output's last index, keep their loops, each with its reason. */
static const sp_node *find_strip(const sp_node *n) {
  if (!n) return NULL;
  if (n->kind == SN_LOOP && n->strip) return n;
  for (int q = 0; q < n->nkids; q++) {
    const sp_node *f = find_strip(n->kids[q]);
    if (f) return f;
  }
  return NULL;
}

static void test_spmd_strips(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "param q = 5;\n"
               "machine M = grid(g);\n"
               "tensor A(n, n) csr @ M(ij -> i);\n"
               "tensor B(n, q) @ M(ik -> i);\n"
               "tensor C(n, q) @ M(ik -> i);\n"
               "tensor D(n, n) @ M(ij -> i);\n"
               "tensor F(q, n) @ M(ki -> i);\n"
               "tensor H(n, q);\n"
               "C(i, k) = A(i, j) * H(j, k);\n"
               "C(i, k) = D(i, j) * H(j, k);\n"
               "F(k, i) = D(i, j) * B(j, k)\n"
               "  .distribute({i}, {io}, {ii}, M)\n"
               "  .reorder({ii, j, k});\n"
               "H(j, k) = A(i, j) * B(i, k)\n"
               "  .distribute({i}, {io}, {ii}, M)\n"
               "  .reorder({ii, j, k});\n");
  sp_program *sp = spmd_build(r.lp);
  for (int f = 0; f < 2; f++) { /* the sparse and the dense product: the loop over j */
    const sp_node *L = find_strip(sp->funcs[f].body);
    assert_non_null(L);
    assert_int_equal(L->strip, 8);
    assert_string_equal(sp->vars[L->var].name, "j");
    const sp_node *a, *K = spmd_strip_parts(L, &a);
    assert_non_null(K);
    assert_string_equal(sp->vars[K->var].name, "k");
    assert_non_null(a);
    assert_int_equal(a->kind, SN_ASSIGN);
    const sp_log *l = log_of(sp, "strips", f);
    assert_non_null(l);
    assert_null(l->why);
  }
  /* F(k, i): the inner loop's variable k is not the output's last index ... */
  assert_null(find_strip(sp->funcs[2].body));
  assert_non_null(log_of(sp, "strips", 2));
  assert_non_null(strstr(log_of(sp, "strips", 2)->why, "last index"));
  /* ... H(j, k): the output's row moves with the loop over j */
  assert_null(find_strip(sp->funcs[3].body));
  assert_non_null(log_of(sp, "strips", 3));
  assert_non_null(strstr(log_of(sp, "strips", 3)->why, "moves with the loop"));
  finish(&r);
}

/* The rewrite store on a leaf kernel: one call per rank writing the whole block stores it
 * (no zeroing pass); a kernel inside a loop over a summed variable adds, after a zeroing. */
static int count_zero(const sp_node *n) {
  if (!n) return 0;
  int c = n->kind == SN_INIT && n->init == SI_ZERO;
  for (int q = 0; q < n->nkids; q++) c += count_zero(n->kids[q]);
  return c;
}

static void test_spmd_kernel_store(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(g);\n"
               "tensor A(n, n) @ M(ij -> i);\n"
               "tensor B(n, n) @ M(ij -> i);\n"
               "tensor C(n, n);\n"
               "A(i, j) = B(i, k) * C(k, j).distribute({i}, {io}, {ii}, M).substitute({ii, k, j}, gemm);\n"
               "A(i, j) = B(i, k) * C(k, j).distribute({i}, {io}, {ii}, M).split(k, ko, ki, 4)"
               ".reorder({ko, ii}).substitute({ii, ki, j}, gemm);\n");
  sp_program *sp = spmd_build(r.lp);
  const sp_node *k0 = find_node(sp->funcs[0].body, SN_KERNEL, -1);
  assert_non_null(k0);
  assert_true(k0->store);
  assert_int_equal(count_zero(sp->funcs[0].body), 0);
  assert_null(log_of(sp, "store", 0)->why);
  const sp_node *k1 = find_node(sp->funcs[1].body, SN_KERNEL, -1);
  assert_non_null(k1);
  assert_false(k1->store);
  assert_int_equal(count_zero(sp->funcs[1].body), 1);
  assert_non_null(log_of(sp, "store", 1)->why);
  finish(&r);
}

/* Balanced partitions: the blocks of A's rows are split[0][c] .. split[0][c + 1], the statement's
 * divide takes them (owner computes and distribute alike), so A and y are the rank's own blocks
 * and x still moves by the halo exchange; a divide by another factor keeps section 3's blocks. */
static void test_balanced_blocks(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 8;\n"
               "machine M = grid(g);\n"
               "tensor y(n) @ M(i -> i) balanced by A;\n"
               "tensor A(n, n) csr @ M(ij -> i) balanced;\n"
               "tensor x(n) @ M(j -> j) balanced by A;\n"
               "y(i) = A(i, j) * x(j);\n"
               "y(i) = A(i, j) * x(j).distribute({i}, {io}, {ii}, M);\n"
               "y(i) = A(i, j) * x(j).split(i, io, ii, 3).distribute({io});\n");
  const lw_owner *o = &r.lp->owner[1];
  assert_int_equal(o->lo[0]->kind, SYM_SPLIT);
  assert_int_equal(o->hi[0]->kind, SYM_SPLIT);
  assert_int_equal(o->lo[0]->id, 0);
  sp_program *sp = spmd_build(r.lp);
  for (int f = 0; f < 2; f++) {
    assert_int_equal(count_nodes(sp->funcs[f].body, SN_COMM, SC_VIEW), 2);
    assert_non_null(find_node(sp->funcs[f].body, SN_COMM, SC_HALO));
  }
  assert_true(count_nodes(sp->funcs[2].body, SN_COMM, SC_VIEW) < 2); /* blocks of 3: A's rows move */
  finish(&r);
}

/* Ids are program-wide: two statements' variables and buffers do not share ids, and every
 * variable a node names belongs to that node's statement. */
static bool vars_in(const sp_program *sp, const sp_node *n, int func) {
  if (!n) return true;
  if (n->var >= 0 && sp->vars[n->var].func != func) return false;
  for (int q = 0; q < n->nkids; q++)
    if (!vars_in(sp, n->kids[q], func)) return false;
  return true;
}

static void test_spmd_program_ids(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 6;\n"
               "machine M = grid(g);\n"
               "tensor a(n) @ M(x -> x);\n"
               "tensor b(n) @ M(x -> x);\n"
               "tensor c(n) @ M(x -> x);\n"
               "a(i) = b(i) * c(i).distribute({i}, {io}, {ii}, M);\n"
               "b(i) = a(i) + c(i).distribute({i}, {io}, {ii}, M);\n");
  sp_program *sp = spmd_build(r.lp);
  assert_int_equal(sp->nfuncs, 2);
  assert_true(sp->funcs[1].var0 >= sp->funcs[0].var0 + sp->funcs[0].nvars);
  for (int i = 0; i < 2; i++) {
    assert_true(vars_in(sp, sp->funcs[i].body, i));
    for (int q = 0; q < sp->funcs[i].nbufs; q++) assert_int_equal(sp->bufs[sp->funcs[i].bufs[q]].func, i);
  }
  /* buffer slots do not overlap */
  for (int x = 0; x < sp->nbufs; x++)
    for (int y = x + 1; y < sp->nbufs; y++) assert_true(sp->bufs[x].slot != sp->bufs[y].slot);
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  spmd_print(m, sp);
  fclose(m);
  assert_non_null(strstr(text, "statement 2 (line 7): b(i) = a(i) + c(i)"));
  assert_non_null(strstr(text, "collective io = coord[0]"));
  free(text);
  finish(&r);
}

/* store: an '=' that writes each element of the rank's block once loses its zeroing pass (2:
 * the element's whole sum is in a register, stored once); a sum whose summed loop encloses
 * the element's update (4) or an output held elsewhere (3) keep it.  (A repeated left index,
 * also refused, is an error of the language.) */
static void test_spmd_store(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 7;\n"
               "machine M = grid(g);\n"
               "tensor a(n) @ M(x -> x);\n"
               "tensor b(n) @ M(x -> x);\n"
               "tensor A(n, n) @ M(xy -> x);\n"
               "tensor B(n, n) @ M(xy -> y);\n"
               "a(i) = b(i) * 2.distribute({i}, {io}, {ii}, M);\n"
               "a(i) = A(i, j) * b(j).distribute({i}, {io}, {ii}, M);\n"
               "B(i, j) = A(i, j).distribute({i}, {io}, {ii}, M);\n"
               "a(i) = A(i, j) * b(j).distribute({i}, {io}, {ii}, M).reorder({j, ii});\n");
  sp_program *sp = spmd_build(r.lp);
  assert_int_equal(sp->nfuncs, 4);
  /* 1, 2: stored once, no zeroing */
  for (int i = 0; i < 2; i++)
    for (int q = 0; q < sp->funcs[i].body->nkids; q++) {
      const sp_node *k = sp->funcs[i].body->kids[q];
      assert_false(k->kind == SN_INIT && k->init == SI_ZERO);
    }
  assert_true(find_node(sp->funcs[0].body, SN_ASSIGN, -1)->store);
  const sp_node *acc = find_node(sp->funcs[1].body, SN_ACC, -1);
  assert_non_null(acc);
  assert_true(acc->store);
  assert_false(find_node(acc, SN_ASSIGN, -1)->store); /* the register's own updates still add */
  /* 3, 4 keep their zeroing pass and add, each saying why */
  for (int i = 2; i < 4; i++) {
    bool zero = false;
    for (int q = 0; q < sp->funcs[i].body->nkids; q++) {
      const sp_node *k = sp->funcs[i].body->kids[q];
      zero |= k->kind == SN_INIT && k->init == SI_ZERO;
    }
    assert_true(zero);
    const sp_node *a = find_node(sp->funcs[i].body, SN_ASSIGN, -1);
    if (a) assert_false(a->store);
  }
  const sp_log *l0 = log_of(sp, "store", 0), *l1 = log_of(sp, "store", 1), *l2 = log_of(sp, "store", 2),
               *l3 = log_of(sp, "store", 3);
  assert_null(l0->why);
  assert_null(l1->why);
  assert_non_null(strstr(l2->why, "own block"));
  assert_non_null(strstr(l3->why, "sums"));
  finish(&r);
}

/* fusion, sums joined to a group, merged allreduces, registers and in-place reads; and the
 * rules that keep pairs apart, each logged with its reason; spmd_build_ex(lp, false) (distalc
 * --no-fuse) leaves every statement alone. */
static void test_spmd_fusion(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 9;\n"
               "machine M = grid(g);\n"
               "tensor a(n) @ M(i -> i);\n"
               "tensor b(n) @ M(i -> i);\n"
               "tensor c(n) @ M(i -> i);\n"
               "tensor s;\ntensor u;\n"
               "temp t(n) @ M(i -> i);\n"
               "t(i) = a(i) * 2 + b(i);\n"        /* 1 */
               "b(i) = t(i) * t(i) + b(i);\n"     /* 2: fused into 1, reads b in place */
               "s = b(i) * a(i);\n"               /* 3: a sum that takes 1, 2 into its loop */
               "u = a(i) * a(i);\n"               /* 4: one allreduce with 3 */
               "c(i) = s * a(i);\n"               /* 5: after the allreduce: alone */
               "a(i) = c(i) + 1;\n");              /* 6: alike, fused with 5 */
  sp_program *sp = spmd_build(r.lp);
  assert_int_equal(sp->nfuncs, 6);
  assert_int_equal(sp->funcs[0].fused_into, 2);
  assert_int_equal(sp->funcs[1].fused_into, 2);
  assert_int_equal(sp->funcs[2].fused_into, -1);
  assert_int_equal(sp->funcs[3].fused_into, 2);
  assert_int_equal(sp->funcs[4].fused_into, -1);
  assert_int_equal(sp->funcs[5].fused_into, 4);
  /* one allreduce for s and u; t is a register */
  const sp_node *ar = find_node(sp->funcs[2].body, SN_COMM, SC_ALLREDUCE);
  assert_non_null(ar);
  assert_int_equal(ar->nmerged, 1);
  assert_int_equal(count_nodes(sp->funcs[2].body, SN_COMM, SC_ALLREDUCE), 1);
  assert_non_null(find_node(sp->funcs[2].body, SN_REGISTER, -1));
  assert_null(find_node(sp->funcs[1].body, SN_INIT, -1)); /* emptied */
  bool inplace = false, refused = false;
  for (int q = 0; q < sp->nlog; q++) {
    inplace |= !strcmp(sp->log[q].rewrite, "inplace") && !sp->log[q].why;
    if (!strcmp(sp->log[q].rewrite, "fuse") && sp->log[q].why && strstr(sp->log[q].where, "statements 3 and 5"))
      refused = strstr(sp->log[q].why, "statement 3") != NULL;
  }
  assert_true(inplace);
  assert_true(refused);
  /* --no-fuse */
  sp_program *nf = spmd_build_ex(r.lp, false);
  for (int i = 0; i < nf->nfuncs; i++) assert_int_equal(nf->funcs[i].fused_into, -1);
  assert_null(find_node(nf->funcs[0].body, SN_REGISTER, -1));
  finish(&r);
}

/* merged fetches: the same box of the same tensor, fetched by a later statement with no write
 * of the tensor in between, is read from the earlier statement's buffer (same slot, no
 * communication); a write in between keeps the fetch; so does a loop that writes the tensor,
 * where a loop that does not reads the buffer of a statement before it (the rewrite "fetch"
 * across the loop's entry); a loop's fetch of a tensor it does not write runs at its first
 * iteration only (the rewrite "invariant"); --no-fuse keeps every fetch. */
static void test_spmd_fetch_merge(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 9;\n"
               "param m = 5;\n"
               "machine M = grid(g);\n"
               "tensor A(n, m) @ M(ij -> i);\n"
               "tensor x(m) @ M(j -> j);\n"
               "tensor w(m) @ M(j -> j);\n"
               "tensor y(n) @ M(i -> i);\n"
               "tensor z(n) @ M(i -> i);\n"
               "y(i) = A(i, j) * x(j);\n"        /* 1: broadcasts x */
               "z(i) = A(i, j) * x(j) + y(i);\n" /* 2: x from 1's buffer */
               "x(j) = x(j) * 2;\n"              /* 3: writes x */
               "z(i) += A(i, j) * x(j);\n"       /* 4: x again: refused */
               "repeat 2 { y(i) += A(i, j) * x(j); }\n" /* 5: a loop that writes no x: from 4's buffer */
               "repeat 2 { z(i) += A(i, j) * x(j); x(j) = x(j) * 0.5; }\n" /* 6, 7: the loop writes x: fetched every time */
               "repeat 2 { y(i) += A(i, j) * w(j); }\n"); /* 8: w at the loop's first iteration only */
  sp_program *sp = spmd_build(r.lp);
  const sp_node *b1 = find_node(sp->funcs[0].body, SN_COMM, SC_BCAST), *b2 = find_node(sp->funcs[1].body, SN_COMM, SC_BCAST),
                *b4 = find_node(sp->funcs[3].body, SN_COMM, SC_BCAST), *b5 = find_node(sp->funcs[4].body, SN_COMM, SC_BCAST),
                *b6 = find_node(sp->funcs[5].body, SN_COMM, SC_BCAST), *b8 = find_node(sp->funcs[7].body, SN_COMM, SC_BCAST);
  assert_non_null(b1), assert_non_null(b2), assert_non_null(b4), assert_non_null(b5), assert_non_null(b6), assert_non_null(b8);
  assert_int_equal(b1->reuses, 0);
  assert_int_equal(b2->reuses, 1 + b1->buf);
  assert_int_equal(sp->bufs[b2->buf].slot, sp->bufs[b1->buf].slot);
  assert_int_equal(b4->reuses, 0);
  assert_int_equal(b5->reuses, 1 + b4->buf);
  assert_int_equal(sp->bufs[b5->buf].slot, sp->bufs[b4->buf].slot);
  assert_int_equal(b5->once_loop, 0);
  assert_int_equal(b6->reuses, 0);
  assert_int_equal(b6->once_loop, 0);
  assert_int_equal(b8->reuses, 0);
  assert_int_equal(b8->once_loop, 3);
  const sp_log *l0 = log_of(sp, "fetch", 0), *l1 = log_of(sp, "fetch", 1), *l2 = log_of(sp, "fetch", 2);
  assert_non_null(l0), assert_non_null(l1), assert_non_null(l2);
  assert_null(l0->why);
  assert_non_null(strstr(l0->where, "statement 2"));
  assert_non_null(strstr(l1->why, "writes the tensor"));
  assert_null(l2->why);
  assert_non_null(strstr(l2->where, "statement 4 fetched it before the loop"));
  bool refused = false;
  for (int k = 0; k < sp->nlog; k++)
    refused |= !strcmp(sp->log[k].rewrite, "invariant") && strstr(sp->log[k].where, "loop 2, statement 6") && sp->log[k].why &&
               strstr(sp->log[k].why, "writes the tensor");
  assert_true(refused);
  sp_program *nf = spmd_build_ex(r.lp, false);
  for (int i = 0; i < nf->nfuncs; i++) {
    const sp_node *b = find_node(nf->funcs[i].body, SN_COMM, SC_BCAST);
    if (b) assert_int_equal(b->reuses, 0), assert_int_equal(b->once_loop, 0);
  }
  finish(&r);
}

/* a chain of merged fetches across a loop's entry: statement 3 reads statement 2's buffer
 * (the rewrite "fetch" in the loop), whose fetch then reads statement 1's (across the entry):
 * all three share statement 1's slot, which only statement 1 fills. */
static void test_spmd_fetch_chain(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 10;\nparam it = 3;\nmachine M = grid(g);\n"
               "tensor c(n) @ M(a -> 0);\ntensor x(n) @ M(a -> a);\ntensor y(n) @ M(a -> a);\ntensor z(n) @ M(a -> *);\n"
               "x(i) = x(i) + c(i);\n"
               "repeat it {\n"
               "  y(i) = y(i) * 0.5 + c(i) + x(i);\n"
               "  z(i) = c(i) * 2 + y(i).distribute({i}, {io}, {ii}, M).communicate(z, io);\n"
               "}\n");
  sp_program *sp = spmd_build(r.lp);
  const sp_node *f[3];
  for (int i = 0; i < 3; i++) {
    f[i] = find_node(sp->funcs[i].body, SN_COMM, SC_FETCH);
    assert_non_null(f[i]);
    assert_int_equal(sp->bufs[f[i]->buf].tensor, fe_find_tensor(r.prog, "c"));
  }
  assert_int_equal(f[0]->reuses, 0);
  assert_int_equal(f[1]->reuses, 1 + f[0]->buf);
  assert_int_equal(f[2]->reuses, 1 + f[0]->buf);
  assert_int_equal(f[1]->once_loop, 0);
  assert_int_equal(sp->bufs[f[1]->buf].slot, sp->bufs[f[0]->buf].slot);
  assert_int_equal(sp->bufs[f[2]->buf].slot, sp->bufs[f[0]->buf].slot);
  finish(&r);
}

/* does an assignment under n store into tensor t? */
static bool assigns_to(const sp_node *n, int t) {
  if (!n) return false;
  if (n->kind == SN_ASSIGN && n->lhs && n->lhs->tensor == t) return true;
  for (int q = 0; q < n->nkids; q++)
    if (assigns_to(n->kids[q], t)) return true;
  return false;
}

/* fusion across a loop's back edge: the first statement of the body (a temporary's update)
 * runs once before the loop and, for each next iteration, inside the last statement's nest;
 * refused where the first statement writes a tensor of the caller, and under --no-fuse. */
static void test_spmd_backedge(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 9;\n"
               "machine M = grid(g);\n"
               "tensor R(n, n) @ M(ij -> i);\n"
               "tensor x(n) @ M(i -> i);\n"
               "temp w(n) @ M(i -> i);\n"
               "temp q(n) @ M(i -> i);\n"
               "temp v(n) @ M(i -> i);\n"
               "repeat 3 {\n"
               "  w(i) = x(i) * 0.5 + 1;\n"          /* 1: B */
               "  q(i) = R(i, j) * w(j);\n"          /* 2 */
               "  x(i) = x(i) * 0.75 + q(i);\n"      /* 3: A, runs 1 for the next iteration */
               "}\n"
               "repeat 2 {\n"
               "  x(i) = x(i) * 0.5 + 1;\n"          /* 4: writes x: refused */
               "  q(i) = R(i, j) * x(j);\n"
               "  v(i) = q(i) * 2;\n"
               "}\n");
  sp_program *sp = spmd_build(r.lp);
  assert_int_equal(sp->nitems, 2);
  assert_int_equal(sp->items[0].peel, 1);
  assert_int_equal(sp->items[0].peel_into, 2);
  assert_int_equal(sp->items[1].peel, 0);
  assert_int_equal(sp->funcs[0].fused_into, -1); /* B keeps its function for the first run */
  /* A's nest stores x, then w for the next iteration */
  int tw = -1;
  for (int t = 0; t < sp->ntensors; t++)
    if (!strcmp(sp->tensors[t].name, "w")) tw = t;
  assert_true(tw >= 0);
  assert_true(assigns_to(sp->funcs[2].body, tw));
  assert_int_equal(count_nodes(sp->funcs[2].body, SN_ASSIGN, -1), 2);
  const sp_log *l0 = NULL, *l1 = NULL;
  for (int q = 0; q < sp->nlog; q++)
    if (!strcmp(sp->log[q].rewrite, "fuse") && strstr(sp->log[q].where, "back edge")) *(l0 ? &l1 : &l0) = &sp->log[q];
  assert_non_null(l0), assert_non_null(l1);
  assert_null(l0->why);
  assert_non_null(strstr(l1->why, "not a temporary"));
  sp_program *nf = spmd_build_ex(r.lp, false);
  assert_int_equal(nf->items[0].peel, 0);
  assert_int_equal(count_nodes(nf->funcs[2].body, SN_ASSIGN, -1), 1);
  finish(&r);
}

/* a redistribution followed by its inverse: the copy back is removed, a read of the copy in
 * the source's own block reads the source, and the copy, read by nobody then, is removed;
 * --no-fuse keeps every statement. */
static void test_spmd_redistribute(void **state) {
  (void)state;
  run r;
  lower_ok(&r, "param n = 9;\n"
               "machine M = grid(gx, gy);\n"
               "tensor A(n, n) @ M(ij -> ij);\n"
               "tensor x(n) @ M(j -> j*);\n"
               "tensor y(n) @ M(i -> i*);\n"
               "tensor b(n) @ M(i -> i*);\n"
               "temp xc(n) @ M(j -> *j);\n"
               "temp yr(n);\n"
               "xc(j) = x(j);\n"               /* 1: kept (2 reads xc in its column block) */
               "b(i) = A(i, j) * xc(j);\n"     /* 2 */
               "x(j) = xc(j);\n"               /* 3: the inverse: removed */
               "yr(i) = y(i);\n"               /* 4: removed once 5 reads y */
               "b(i) += yr(i) * 2;\n");        /* 5: reads y's own block */
  sp_program *sp = spmd_build(r.lp);
  assert_null(sp->funcs[0].removed);
  assert_non_null(sp->funcs[2].removed);
  assert_non_null(strstr(sp->funcs[2].removed, "inverse"));
  assert_non_null(sp->funcs[3].removed);
  assert_null(sp->funcs[4].removed);
  int ty = -1, tyr = -1;
  for (int t = 0; t < sp->ntensors; t++) {
    if (!strcmp(sp->tensors[t].name, "y")) ty = t;
    if (!strcmp(sp->tensors[t].name, "yr")) tyr = t;
  }
  bool reads_y = false, reads_yr = false;
  for (int q = 0; q < sp->funcs[4].nbufs; q++) {
    reads_y |= sp->bufs[sp->funcs[4].bufs[q]].tensor == ty;
    reads_yr |= sp->bufs[sp->funcs[4].bufs[q]].tensor == tyr;
  }
  assert_true(reads_y);
  assert_false(reads_yr);
  assert_null(find_node(sp->funcs[4].body, SN_COMM, SC_FETCH));
  assert_null(find_node(sp->funcs[4].body, SN_COMM, SC_BCAST));
  sp_program *nf = spmd_build_ex(r.lp, false);
  for (int i = 0; i < nf->nfuncs; i++) assert_null(nf->funcs[i].removed);
  finish(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_summa),
      cmocka_unit_test(test_spmd_fusion),
      cmocka_unit_test(test_rewrite_table),
      cmocka_unit_test(test_spmd_pipeline),
      cmocka_unit_test(test_spmd_pipeline_refused),
      cmocka_unit_test(test_spmd_allreduce),
      cmocka_unit_test(test_spmd_halo),
      cmocka_unit_test(test_spmd_overlap),
      cmocka_unit_test(test_spmd_simd),
      cmocka_unit_test(test_spmd_strips),
      cmocka_unit_test(test_spmd_kernel_store),
      cmocka_unit_test(test_balanced_blocks),
      cmocka_unit_test(test_spmd_program_ids),
      cmocka_unit_test(test_spmd_store),
      cmocka_unit_test(test_spmd_fetch_merge),
      cmocka_unit_test(test_spmd_fetch_chain),
      cmocka_unit_test(test_spmd_backedge),
      cmocka_unit_test(test_spmd_redistribute),
      cmocka_unit_test(test_cannon_square),
      cmocka_unit_test(test_cannon_rectangular),
      cmocka_unit_test(test_pumma),
      cmocka_unit_test(test_johnson),
      cmocka_unit_test(test_solomonik),
      cmocka_unit_test(test_cosma),
      cmocka_unit_test(test_cosma_broadcasts),
      cmocka_unit_test(test_transpose_exchange),
      cmocka_unit_test(test_elementwise_local),
      cmocka_unit_test(test_elementwise_plain_distribute_local),
      cmocka_unit_test(test_replicated_output_allreduce),
      cmocka_unit_test(test_row_layout_column_compute),
      cmocka_unit_test(test_replicated_grid_dim_local),
      cmocka_unit_test(test_replicated_and_no_machine),
      cmocka_unit_test(test_default_communicate_point),
      cmocka_unit_test(test_owner_computes),
      cmocka_unit_test(test_two_statements),
      cmocka_unit_test(test_lower_errors),
      cmocka_unit_test(test_lower_carets),
    cmocka_unit_test(test_hierarchical),
      cmocka_unit_test(test_cuda_kernels),
      cmocka_unit_test(test_plan_summa),
      cmocka_unit_test(test_plan_element_size),
      cmocka_unit_test(test_sparse_density),
      cmocka_unit_test(test_cost_loop_parts),
      cmocka_unit_test(test_pattern_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
