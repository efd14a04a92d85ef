/* test_runtime.c -- tests of libdistal, run by run.sh under mpirun at several rank counts.
 *
 * Every rank runs the same cmocka group.  A check never jumps out of a test between two
 * collective calls (that would leave the other ranks waiting): CHECK records failures,
 * and all_ok() at the end of each test agrees across ranks, so that a failure on any rank
 * fails the test on every rank, with the failing ranks' first messages shown by rank 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "distal/runtime.h"

void openblas_set_num_threads(int num_threads); /* OpenBLAS's (the runtime links it) */

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../mpi_checks.h"

static double g_start;

static int reset(void **state) {
  (void)state;
  g_fail = 0;
  g_start = MPI_Wtime();
  return 0;
}

/* DTL_TEST_TIMES=1 prints how long each test took (rank 0) */
static int report_time(void **state) {
  (void)state;
  if (g_rank == 0 && getenv("DTL_TEST_TIMES"))
    printf("  (%.2f s)\n", MPI_Wtime() - g_start);
  return 0;
}

/* ---- helpers ------------------------------------------------------------------------------ */
#include "../random_data.h"

/* iterate x over a non-empty box, row-major */
static bool box_next(const dtl_box *b, int64_t *x) {
  for (int d = b->nd - 1; d >= 0; d--) {
    if (++x[d] < b->hi[d])
      return true;
    x[d] = b->lo[d];
  }
  return false;
}

static int64_t lin_of(int nd, const int64_t *ext, const int64_t *x) {
  int64_t l = 0;
  for (int d = 0; d < nd; d++)
    l = l * ext[d] + x[d];
  return l;
}

static bool in_box(const dtl_box *b, const int64_t *x) {
  for (int d = 0; d < b->nd; d++)
    if (x[d] < b->lo[d] || x[d] >= b->hi[d])
      return false;
  return true;
}

static double index_value(dtl_type t, int64_t lin) { return t == DTL_INT32 ? lin % 1000 : lin; }

/* Count the elements of buf (over box) that differ from the index fill of the tensor. */
static int64_t index_mismatches(dtl_type t, const void *buf, const dtl_box *box,
                                const int64_t *ext) {
  int64_t bad = 0, i = 0, x[DTL_MAX_DIMS];
  if (dtl_box_empty(box))
    return 0;
  memcpy(x, box->lo, sizeof x);
  do {
    if (get_el(t, buf, i++) != index_value(t, lin_of(box->nd, ext, x)))
      bad++;
  } while (box_next(box, x));
  return bad;
}

static dtl_ctx *make_ctx(int nd, const int64_t *dims, bool debug) {
  dtl_ctx *ctx = NULL;
  char err[256];
  int rc = dtl_ctx_create(MPI_COMM_WORLD, nd, dims, debug, &ctx, err, sizeof err);
  CHECKF(rc == 0, "dtl_ctx_create: %s", err);
  return ctx;
}

/* all grids of nd dims whose product is the rank count (at most max of them) */


/* ---- types, integers, boxes ----------------------------------------------------------------- */
static void test_types(void **state) {
  (void)state;
  CHECK(dtl_type_size(DTL_DOUBLE) == 8 && dtl_type_size(DTL_FLOAT) == 4);
  CHECK(dtl_type_size(DTL_INT32) == 4 && dtl_type_size(DTL_INT64) == 8);
  CHECK(!strcmp(dtl_type_name(DTL_DOUBLE), "double") && !strcmp(dtl_type_name(DTL_INT64), "int64"));
  CHECK(!strcmp(dtl_type_name(DTL_FLOAT), "float") && !strcmp(dtl_type_name(DTL_INT32), "int32"));
  CHECK(dtl_type_mpi(DTL_DOUBLE) == MPI_DOUBLE && dtl_type_mpi(DTL_FLOAT) == MPI_FLOAT);
  CHECK(dtl_type_mpi(DTL_INT32) == MPI_INT32_T && dtl_type_mpi(DTL_INT64) == MPI_INT64_T);
  int cnt;
  MPI_Datatype dt;
  CHECK(dtl_count_type(DTL_DOUBLE, 10, &cnt, &dt) == MPI_SUCCESS && cnt == 10 && dt == MPI_DOUBLE);
  dtl_count_free(&dt);
  CHECK(dtl_count_type(DTL_FLOAT, ((int64_t)1 << 31) + 5, &cnt, &dt) == MPI_SUCCESS && cnt == 1);
  MPI_Count size = 0;
  MPI_Type_size_x(dt, &size);
  CHECK(size == (((int64_t)1 << 31) + 5) * 4);
  dtl_count_free(&dt);
  all_ok();
}

static void test_integers(void **state) {
  (void)state;
  CHECK(dtl_floordiv(7, 2) == 3 && dtl_floordiv(-7, 2) == -4 && dtl_floordiv(7, -2) == -4);
  CHECK(dtl_floordiv(-8, 2) == -4 && dtl_mod(-1, 4) == 3 && dtl_mod(5, 4) == 1);
  CHECK(dtl_mod(-8, 4) == 0 && dtl_ceildiv(5, 2) == 3 && dtl_ceildiv(4, 2) == 2);
  CHECK(dtl_ceildiv(0, 3) == 0 && dtl_ceildiv(3, 0) == 0);
  /* 5 over 4 blocks: s = 2: [0,2) [2,4) [4,5) [5,5) */
  int64_t lo[] = {0, 2, 4, 5}, hi[] = {2, 4, 5, 5};
  for (int c = 0; c < 4; c++)
    CHECK(dtl_block_lo(5, 4, c) == lo[c] && dtl_block_hi(5, 4, c) == hi[c]);
  /* 10 over 4 blocks: s = 3: the last block is short */
  CHECK(dtl_block_lo(10, 4, 3) == 9 && dtl_block_hi(10, 4, 3) == 10);
  /* 2 over 4: two empty blocks at the end */
  CHECK(dtl_block_lo(2, 4, 2) == 2 && dtl_block_hi(2, 4, 2) == 2 && dtl_block_hi(2, 4, 3) == 2);
  /* every extent and split: blocks tile [0, n) in order */
  for (int64_t n = 0; n < 30; n++)
    for (int64_t g = 1; g < 10; g++) {
      int64_t at = 0;
      for (int64_t c = 0; c < g; c++) {
        CHECK(dtl_block_lo(n, g, c) == at);
        at = dtl_max(at, dtl_block_hi(n, g, c));
      }
      CHECK(at == n);
    }
  all_ok();
}

/* dtl_halo_skip: from each position, the distance to the next one flagged so, against a scan;
 * the loop of one phase of the rewrite overlap moves by it from a row of the other phase. */
static void test_halo_skip(void **state) {
  (void)state;
  static const uint8_t rows[] = {1, 1, 0, 0, 0, 1, 0, 1, 1, 1, 0};
  const int64_t n = (int64_t)sizeof rows;
  for (int flag = 0; flag < 2; flag++)
    for (int64_t p = 0; p < n; p++) {
      int64_t want = 1;
      while (p + want < n && rows[p + want] != flag) want++;
      CHECK(dtl_halo_skip(rows, p, n, flag) == want);
    }
  CHECK(dtl_halo_skip(rows, n - 1, n, 0) == 1 && dtl_halo_nrows(NULL) == 0);
  all_ok();
}

static void test_boxes(void **state) {
  (void)state;
  dtl_box a = {2, {0, 0}, {4, 5}}, b = {2, {2, 3}, {6, 4}}, c, e = {2, {1, 1}, {1, 3}};
  dtl_box scalar = {0, {0}, {0}}, e2 = {2, {3, 0}, {0, 9}};
  CHECK(!dtl_box_empty(&a) && dtl_box_volume(&a) == 20);
  CHECK(dtl_box_empty(&e) && dtl_box_volume(&e) == 0 && dtl_box_volume(&e2) == 0);
  CHECK(!dtl_box_empty(&scalar) && dtl_box_volume(&scalar) == 1);
  CHECK(dtl_box_intersect(&a, &b, &c));
  CHECK(c.nd == 2 && c.lo[0] == 2 && c.hi[0] == 4 && c.lo[1] == 3 && c.hi[1] == 4);
  dtl_box far = {2, {5, 5}, {6, 6}};
  CHECK(!dtl_box_intersect(&a, &far, &c) && dtl_box_empty(&c));
  CHECK(dtl_box_equal(&e, &e2) && !dtl_box_equal(&a, &b) && dtl_box_equal(&a, &a));
  CHECK(dtl_box_equal(&scalar, &scalar));
  CHECK(dtl_box_contains(&a, &e) && dtl_box_contains(&a, &a) && !dtl_box_contains(&a, &b));
  dtl_box in = {2, {1, 1}, {3, 5}};
  CHECK(dtl_box_contains(&a, &in) && !dtl_box_contains(&in, &a) && !dtl_box_contains(&e, &in));
  all_ok();
}

/* copy_box against an element-by-element reference, for every type and 0 to 4 dims */
static void test_copy_box(void **state) {
  (void)state;
  uint64_t s = 77;
  for (int trial = 0; trial < 400; trial++) {
    dtl_type t = (dtl_type)(trial % 4);
    int nd = (trial / 4) % 5;
    bool acc = (trial / 20) % 2;
    dtl_box src = {.nd = nd}, dst = {.nd = nd}, reg = {.nd = nd};
    for (int d = 0; d < nd; d++) {
      /* region inside both boxes; sometimes the boxes equal the region (full runs) */
      reg.lo[d] = rnd(&s, 5) - 2;
      reg.hi[d] = reg.lo[d] + rnd(&s, 4) + (trial % 7 == 0 ? 0 : 1);
      src.lo[d] = reg.lo[d] - (rnd(&s, 3) ? 0 : rnd(&s, 3));
      src.hi[d] = reg.hi[d] + (rnd(&s, 3) ? 0 : rnd(&s, 3));
      dst.lo[d] = reg.lo[d] - (rnd(&s, 2) ? 0 : rnd(&s, 3));
      dst.hi[d] = reg.hi[d] + (rnd(&s, 2) ? 0 : rnd(&s, 3));
    }
    int64_t ns = dtl_box_volume(&src), nd_ = dtl_box_volume(&dst);
    void *a = alloc_box(t, &src), *b = alloc_box(t, &dst), *ref = alloc_box(t, &dst);
    for (int64_t i = 0; i < ns; i++)
      set_el(t, a, i, (double)(i % 97) - 40);
    for (int64_t i = 0; i < nd_; i++)
      set_el(t, b, i, (double)(i % 13)), set_el(t, ref, i, (double)(i % 13));
    if (!dtl_box_empty(&reg)) {
      int64_t x[DTL_MAX_DIMS];
      memcpy(x, reg.lo, sizeof x);
      do {
        int64_t si = 0, di = 0;
        for (int d = 0; d < nd; d++) {
          si = si * (src.hi[d] - src.lo[d]) + x[d] - src.lo[d];
          di = di * (dst.hi[d] - dst.lo[d]) + x[d] - dst.lo[d];
        }
        set_el(t, ref, di, get_el(t, a, si) + (acc ? get_el(t, ref, di) : 0));
      } while (box_next(&reg, x));
    }
    dtl_copy_box(t, a, &src, b, &dst, &reg, acc);
    int64_t bad = 0;
    for (int64_t i = 0; i < nd_; i++)
      bad += get_el(t, b, i) != get_el(t, ref, i);
    CHECKF(bad == 0, "copy_box trial %d (%s, %d dims, acc %d): %lld wrong", trial, dtl_type_name(t),
           nd, acc, (long long)bad);
    free(a), free(b), free(ref);
  }
  /* dtl_zero */
  double z[5] = {1, 2, 3, 4, 5};
  dtl_zero(DTL_DOUBLE, z, 4);
  CHECK(z[0] == 0 && z[3] == 0 && z[4] == 5);
  int32_t zi[3] = {7, 7, 7};
  dtl_zero(DTL_INT32, zi, 3);
  CHECK(zi[0] == 0 && zi[2] == 0);
  all_ok();
}

static void test_max_rel_error(void **state) {
  (void)state;
  double a[] = {1, 2, 100, 0.5}, b[] = {1, 2.5, 110, 0};
  CHECK(fabs(dtl_max_rel_error(DTL_DOUBLE, a, b, 4) - 0.5) < 1e-15); /* 0.5/max(1,0) */
  CHECK(fabs(dtl_max_rel_error(DTL_DOUBLE, a + 2, b + 2, 1) - 10.0 / 110) < 1e-15);
  CHECK(dtl_max_rel_error(DTL_DOUBLE, a, a, 4) == 0);
  float fa[] = {3, 4}, fb[] = {3, 2};
  CHECK(fabs(dtl_max_rel_error(DTL_FLOAT, fa, fb, 2) - 1.0) < 1e-7);
  int32_t ia[] = {5, -3}, ib[] = {5, 3};
  CHECK(dtl_max_rel_error(DTL_INT32, ia, ib, 2) == 2.0);
  int64_t la[] = {0, 10}, lb[] = {1, 10};
  CHECK(dtl_max_rel_error(DTL_INT64, la, lb, 2) == 1.0);
  double n[] = {NAN};
  CHECK(isinf(dtl_max_rel_error(DTL_DOUBLE, n, a, 1)));
  CHECK(dtl_max_rel_error(DTL_DOUBLE, a, b, 0) == 0);
  all_ok();
}

/* ---- the grid ------------------------------------------------------------------------------ */
static void solve_ok(int64_t nranks, int nd, const int *param, const int64_t *lit, int64_t *values,
                     int nvalues, const int64_t *expect) {
  const char *names[] = {"gx", "gy", "q", "c", "p"};
  char err[256] = "";
  int rc = dtl_solve_grid(nranks, nd, param, lit, values, names, err, sizeof err);
  CHECKF(rc == 0, "solve_grid(%lld) failed: %s", (long long)nranks, err);
  for (int i = 0; rc == 0 && i < nvalues; i++)
    CHECKF(values[i] == expect[i], "solve_grid(%lld): value %d is %lld, expected %lld",
           (long long)nranks, i, (long long)values[i], (long long)expect[i]);
}

static void solve_err(int64_t nranks, int nd, const int *param, const int64_t *lit, int64_t *values,
                      const char *expect) {
  const char *names[] = {"gx", "gy", "q", "c", "p"};
  char err[256] = "";
  int rc = dtl_solve_grid(nranks, nd, param, lit, values, names, err, sizeof err);
  CHECKF(rc != 0 && strstr(err, expect), "solve_grid(%lld): rc %d, message '%s', expected '%s'",
         (long long)nranks, rc, err, expect);
}

/* dtl_group_in_node: a group along grid dims within one block of per_node ranks (row-major) */
static void test_group_in_node(void **state) {
  (void)state;
  int64_t dims[2] = {2, 4}, at0[2] = {0, 0}, at1[2] = {1, 3}, mid[2] = {1, 1};
  /* 2 x 4 on nodes of 4: a row (dim 1) is one node, a column (dim 0) spans two */
  CHECKF(dtl_group_in_node(4, 2, dims, at0, 2u) && dtl_group_in_node(4, 2, dims, at1, 2u), "rows of 4 in a node");
  CHECKF(!dtl_group_in_node(4, 2, dims, at0, 1u) && !dtl_group_in_node(4, 2, dims, mid, 1u), "columns span nodes");
  /* mask 0: the whole grid; per_node <= 0 or the whole grid: one node */
  CHECKF(!dtl_group_in_node(4, 2, dims, at0, 0u) && dtl_group_in_node(8, 2, dims, at0, 0u) && dtl_group_in_node(0, 2, dims, at1, 3u),
         "the whole grid");
  /* nodes of 2: a row of 4 spans two; nodes of 1: any group of more than one rank spans */
  CHECKF(!dtl_group_in_node(2, 2, dims, at0, 2u) && !dtl_group_in_node(1, 2, dims, mid, 2u), "small nodes");
  int64_t one[2] = {1, 4};
  CHECKF(dtl_group_in_node(1, 2, one, at0, 1u), "a group of one rank is in its node");
  all_ok();
}

static void test_solve_grid(void **state) {
  (void)state;
  int64_t lit[4] = {-1, -1, -1, -1};
  {
    int prm[] = {0, 1};
    int64_t v[5] = {-1, -1}, e[] = {2, 2};
    solve_ok(4, 2, prm, lit, v, 2, e);
  }
  {
    int prm[] = {0, 1};
    int64_t v[5] = {-1, -1}, e[] = {7, 1};
    solve_ok(7, 2, prm, lit, v, 2, e);
  }
  {
    int prm[] = {0, 1, 3};
    int64_t v[5] = {-1, -1, 0, -1}, e[] = {3, 2, 0, 2};
    solve_ok(12, 3, prm, lit, v, 4, e); /* MPI_Dims_create: non-increasing */
  }
  {
    int prm[] = {2, 2, 2};
    int64_t v[5] = {0, 0, -1}, e[] = {0, 0, 2};
    solve_ok(8, 3, prm, lit, v, 3, e);
    v[2] = -1, e[2] = 3;
    solve_ok(27, 3, prm, lit, v, 3, e);
    v[2] = -1, e[2] = 1;
    solve_ok(1, 3, prm, lit, v, 3, e);
    v[2] = -1;
    solve_err(6, 3, prm, lit, v, "6 ranks cannot form grid(q, q, q): 6 is not a cube");
    CHECK(v[2] == -1);
    solve_err(16, 3, prm, lit, v, "16 is not a cube");
  }
  {
    int prm[] = {2, 2};
    int64_t v[5] = {0, 0, -1}, e[] = {0, 0, 3};
    solve_ok(9, 2, prm, lit, v, 3, e);
    v[2] = -1;
    solve_err(8, 2, prm, lit, v, "8 ranks cannot form grid(q, q): 8 is not a square");
  }
  {
    int prm[] = {2, 2, 3}; /* grid(q, q, c) */
    int64_t v[5] = {0, 0, -1, 2}, e[] = {0, 0, 2, 2};
    solve_ok(8, 3, prm, lit, v, 4, e);
    v[2] = -1, v[3] = -1;
    solve_ok(8, 3, prm, lit, v, 4, e); /* largest q with q^2 dividing 8 */
    int64_t e2[] = {0, 0, 4, 2};
    v[2] = -1, v[3] = -1;
    solve_ok(32, 3, prm, lit, v, 4, e2);
    int64_t e3[] = {0, 0, 1, 3};
    v[2] = -1, v[3] = -1;
    solve_ok(3, 3, prm, lit, v, 4, e3);
    v[2] = -1, v[3] = 3;
    solve_err(8, 3, prm, lit, v, "8 is not a multiple of 3");
    v[2] = -1, v[3] = 2;
    solve_err(12, 3, prm, lit, v, "6 is not a square");
  }
  {
    int prm[] = {0, -1}; /* grid(gx, 4) */
    int64_t l[] = {0, 4}, v[5] = {-1}, e[] = {2};
    solve_ok(8, 2, prm, l, v, 1, e);
    v[0] = -1;
    solve_err(6, 2, prm, l, v, "6 ranks cannot form grid(gx, 4): 6 is not a multiple of 4");
  }
  {
    int prm[] = {0, 1}; /* both known */
    int64_t v[5] = {3, 3};
    solve_err(8, 2, prm, lit, v, "8 ranks cannot form grid(gx, gy): the grid has 9 processors");
    int64_t w[5] = {2, 4}, e[] = {2, 4};
    solve_ok(8, 2, prm, lit, w, 2, e);
  }
  {
    int prm[] = {-1, -1}; /* literals only */
    int64_t l[] = {2, 3}, v[1];
    solve_err(4, 2, prm, l, v, "4 ranks cannot form grid(2, 3)");
    int64_t l0[] = {2, 0};
    solve_err(4, 2, prm, l0, v, "dimension 1 has size 0");
    int64_t l2[] = {2, 2};
    solve_ok(4, 2, prm, l2, v, 0, NULL);
  }
  {
    int prm[] = {2, -1, 2}; /* grid(q, 2, q): the literal mixes in */
    int64_t l[] = {0, 2, 0}, v[5] = {0, 0, -1}, e[] = {0, 0, 2};
    solve_ok(8, 3, prm, l, v, 3, e);
    v[2] = -1;
    solve_err(16, 3, prm, l, v, "8 is not a square");
  }
  {
    int prm[] = {2, 0, 2, 1}; /* grid(q, gx, q, gy) */
    int64_t v[5] = {-1, -1, -1}, e[] = {2, 1, 2};
    solve_ok(8, 4, prm, lit, v, 3, e);
    int64_t w[5] = {-1, -1, -1}, e2[] = {3, 2, 2};
    solve_ok(24, 4, prm, lit, w, 3, e2);
  }
  {
    int prm[] = {0}; /* names NULL */
    int64_t v[1] = {-1};
    char err[128];
    CHECK(dtl_solve_grid(5, 1, prm, lit, v, NULL, err, sizeof err) == 0 && v[0] == 5);
    int prm2[] = {0, 0};
    v[0] = -1;
    CHECK(dtl_solve_grid(5, 2, prm2, lit, v, NULL, err, sizeof err) != 0 &&
          strstr(err, "grid(p0, p0)"));
  }
#ifdef OPEN_MPI
  {
    /* params used once share the ranks as Open MPI's MPI_Dims_create shares them
     * (distal/grid.h), without calling it */
    int prm[] = {0, 1, 2, 3, 4, 5};
    char err[128];
    for (int k = 1; k <= 6; k++)
      for (int n = 1; n <= 2048; n++) {
        int dd[6] = {0};
        int64_t v[6] = {-1, -1, -1, -1, -1, -1};
        CHECK(MPI_Dims_create(n, k, dd) == MPI_SUCCESS);
        CHECKF(dtl_solve_grid(n, k, prm, lit, v, NULL, err, sizeof err) == 0, "%s", err);
        for (int i = 0; i < k; i++)
          CHECKF(v[i] == dd[i], "%d ranks over %d dims: dim %d is %lld, MPI_Dims_create gives %d", n, k,
                 i, (long long)v[i], dd[i]);
      }
  }
#endif
  all_ok();
}

static void test_ctx(void **state) {
  (void)state;
  char err[256];
  dtl_ctx *ctx = NULL;
  int64_t bad[] = {3, 2};
  int rc = dtl_ctx_create(MPI_COMM_WORLD, 2, bad, false, &ctx, err, sizeof err);
  if (g_size != 6) {
    char want[128];
    snprintf(want, sizeof want, "%d rank%s cannot form a 3x2 grid", g_size, g_size == 1 ? "" : "s");
    CHECKF(rc != 0 && ctx == NULL && !strcmp(err, want), "got '%s'", err);
  } else {
    CHECK(rc == 0 && ctx != NULL);
    dtl_ctx_destroy(&ctx);
    CHECK(ctx == NULL);
  }
  int64_t zero[] = {0};
  CHECK(dtl_ctx_create(MPI_COMM_WORLD, 1, zero, false, &ctx, err, sizeof err) != 0);
  CHECK(dtl_ctx_create(MPI_COMM_WORLD, 0, zero, false, &ctx, err, sizeof err) != 0);

  int64_t gs[16][DTL_MAX_DIMS];
  for (int nd = 1; nd <= 3; nd++) {
    int n = grids(nd, gs, 16);
    for (int i = 0; i < n; i++) {
      ctx = make_ctx(nd, gs[i], false);
      if (!ctx)
        continue;
      CHECK(ctx->size == g_size && ctx->ndims == nd);
      int ic[3];
      MPI_Cart_coords(ctx->cart, ctx->rank, nd, ic);
      for (int d = 0; d < nd; d++)
        CHECK(ic[d] == ctx->coords[d]);
      for (int r = 0; r < g_size; r++) {
        int64_t c[DTL_MAX_DIMS];
        int mr;
        dtl_coords_of(ctx, r, c);
        for (int d = 0; d < nd; d++)
          ic[d] = (int)c[d];
        MPI_Cart_rank(ctx->cart, ic, &mr);
        CHECK(mr == r && dtl_rank_of(ctx, c) == r);
        /* periodic: coordinates wrap */
        for (int d = 0; d < nd; d++)
          c[d] -= ctx->dims[d];
        CHECK(dtl_rank_of(ctx, c) == r);
      }
      for (unsigned m = 0; m < (1u << nd); m++) {
        MPI_Comm sub = dtl_subcomm(ctx, m);
        int sz = 0, expect = 1;
        for (int d = 0; d < nd; d++)
          if (m & (1u << d))
            expect *= (int)ctx->dims[d];
        CHECK(sub != MPI_COMM_NULL);
        if (sub != MPI_COMM_NULL)
          MPI_Comm_size(sub, &sz);
        CHECK(sz == expect && dtl_subcomm(ctx, m) == sub);
      }
      CHECK(strcmp(dtl_ctx_error(ctx), "") == 0);
      CHECK(dtl_fail(ctx, "x=%d", 3) == 1 && !strcmp(dtl_ctx_error(ctx), "x=3"));
      dtl_ctx_destroy(&ctx);
    }
  }
  /* a 4-dim grid (sub-communicators made eagerly) and a 5-dim one (on demand) */
  int64_t d4[] = {g_size, 1, 1, 1}, d5[] = {1, 1, g_size, 1, 1};
  ctx = make_ctx(4, d4, false);
  if (ctx) {
    int sz;
    MPI_Comm_size(dtl_subcomm(ctx, 1), &sz);
    CHECK(sz == g_size);
    dtl_ctx_destroy(&ctx);
  }
  ctx = make_ctx(5, d5, false);
  if (ctx) {
    int sz;
    MPI_Comm_size(dtl_subcomm(ctx, 4), &sz);
    CHECK(sz == g_size && ctx->coords[2] == ctx->rank);
    dtl_ctx_destroy(&ctx);
  }
  all_ok();
}

static void test_any_error(void **state) {
  (void)state;
  int64_t dims[] = {g_size};
  dtl_ctx *ctx = make_ctx(1, dims, false);
  if (!ctx) {
    all_ok();
    return;
  }
  CHECK(dtl_any_error(ctx, 0) == 0);
  int last = g_size - 1;
  if (ctx->rank == last)
    dtl_fail(ctx, "boom from rank %d", last);
  else
    dtl_fail(ctx, "local junk");
  CHECK(dtl_any_error(ctx, ctx->rank == last) == 1);
  char want[64];
  snprintf(want, sizeof want, "boom from rank %d", last);
  CHECKF(!strcmp(ctx->err, want), "message '%s'", ctx->err);
  /* several failing ranks: the lowest one's message wins */
  dtl_fail(ctx, "failure at %d", ctx->rank);
  CHECK(dtl_any_error(ctx, 1) == 1 && !strcmp(ctx->err, "failure at 0"));
  dtl_ctx_destroy(&ctx);
  all_ok();
}

/* ---- distributions ------------------------------------------------------------------------ */
static void test_dist(void **state) {
  (void)state;
  int64_t gs[16][DTL_MAX_DIMS];
  uint64_t s = 5;
  for (int nd = 1; nd <= 3; nd++) {
    int n = grids(nd, gs, 4);
    for (int i = 0; i < n; i++) {
      dtl_ctx *ctx = make_ctx(nd, gs[i], false);
      if (!ctx)
        continue;
      for (int trial = 0; trial < 20; trial++) {
        int order = (int)rnd(&s, 4);
        int64_t ext[DTL_MAX_DIMS];
        random_extents(&s, order, ext);
        dtl_dist d = random_dist(&s, ctx, order, ext, true);
        CHECKF(dtl_dist_validate(ctx, &d, "T") == 0, "%s", ctx->err);
        /* expected number of holders of each element: the replicas along STAR dims, and
         * everyone when replicated everywhere */
        int64_t replicas = 1;
        for (int g = 0; g < nd; g++)
          if (d.replicated_everywhere || d.kind[g] == DTL_DIM_STAR)
            replicas *= ctx->dims[g];
        dtl_box full = {.nd = order};
        for (int k = 0; k < order; k++)
          full.hi[k] = ext[k];
        int64_t vol = dtl_box_volume(&full);
        int *cnt = calloc((size_t)vol + 1, sizeof *cnt),
            *canon = calloc((size_t)vol + 1, sizeof *canon);
        for (int r = 0; r < g_size; r++) {
          int64_t c[DTL_MAX_DIMS], x[DTL_MAX_DIMS];
          dtl_box b;
          dtl_coords_of(ctx, r, c);
          bool h = dtl_dist_block(ctx, &d, c, &b);
          bool holds_fixed = true;
          for (int g = 0; g < nd; g++)
            if (!d.replicated_everywhere && d.kind[g] == DTL_DIM_FIXED && c[g] != d.fixed[g])
              holds_fixed = false;
          CHECK(h == holds_fixed);
          CHECK(b.nd == order && dtl_box_contains(&full, &b));
          if (!h && order > 0)
            CHECK(dtl_box_empty(&b));
          bool cn = d.replicated_everywhere ? r == 0 : dtl_dist_canonical(&d, c);
          if (!h || dtl_box_empty(&b))
            continue;
          memcpy(x, b.lo, sizeof x);
          do {
            int64_t l = lin_of(order, ext, x);
            cnt[l]++;
            canon[l] += cn;
          } while (box_next(&b, x));
        }
        for (int64_t l = 0; l < vol; l++)
          CHECKF(cnt[l] == replicas && canon[l] == 1, "element %lld: %d holders, %d canonical",
                 (long long)l, cnt[l], canon[l]);
        free(cnt), free(canon);
      }
      /* validation errors */
      dtl_dist d;
      memset(&d, 0, sizeof d);
      d.order = 2, d.ngrid = nd, d.extent[0] = d.extent[1] = 4;
      for (int g = 0; g < nd; g++)
        d.kind[g] = DTL_DIM_STAR;
      d.kind[0] = DTL_DIM_FIXED, d.fixed[0] = ctx->dims[0];
      CHECK(dtl_dist_validate(ctx, &d, "A") != 0 && strstr(ctx->err, "fixed coordinate") &&
            strstr(ctx->err, "tensor A"));
      d.fixed[0] = -1;
      CHECK(dtl_dist_validate(ctx, &d, "A") != 0);
      d.kind[0] = DTL_DIM_PART, d.tdim[0] = 2;
      CHECK(dtl_dist_validate(ctx, &d, "A") != 0);
      d.tdim[0] = 1;
      CHECK(dtl_dist_validate(ctx, &d, "A") == 0);
      if (nd > 1) {
        /* two grid dims partition one tensor dim: nested blocks (hierarchical machines);
         * along the second dim, blocks of ceil(ceil(n / G0) / G1) inside the first's */
        d.kind[1] = DTL_DIM_PART, d.tdim[1] = 1;
        CHECK(dtl_dist_validate(ctx, &d, "A") == 0);
        int64_t n = d.extent[1], s0 = dtl_ceildiv(n, ctx->dims[0]), s1 = dtl_ceildiv(s0, ctx->dims[1]);
        int64_t c[DTL_MAX_DIMS] = {0};
        int64_t covered = 0;
        for (c[0] = 0; c[0] < ctx->dims[0]; c[0]++)
          for (c[1] = 0; c[1] < ctx->dims[1]; c[1]++) {
            dtl_box b;
            CHECK(dtl_dist_block(ctx, &d, c, &b));
            int64_t lo = dtl_min(n, c[0] * s0), hi = dtl_min(n, c[0] * s0 + s0);
            CHECK(b.lo[1] == dtl_min(hi, lo + c[1] * s1) && b.hi[1] == dtl_min(hi, lo + (c[1] + 1) * s1));
            covered += b.hi[1] > b.lo[1] ? b.hi[1] - b.lo[1] : 0;
          }
        CHECK(covered == n); /* the nested blocks tile the dim */
      }
      d.ngrid = nd + 1;
      CHECK(dtl_dist_validate(ctx, &d, "A") != 0);
      d.ngrid = nd, d.extent[1] = -1;
      CHECK(dtl_dist_validate(ctx, &d, "A") != 0);
      dtl_ctx_destroy(&ctx);
    }
  }
  all_ok();
}

/* ---- fetch ---------------------------------------------------------------------------------- */
/* Random distributions and random needed boxes on 1-, 2- and 3-dim grids; the fetched data
 * is compared with the index fill, computed directly from the global coordinates. */
static void fetch_rounds(dtl_ctx *ctx, uint64_t *s, int rounds) {
  for (int round = 0; round < rounds; round++) {
    dtl_type t = (dtl_type)rnd(s, 4);
    int order = (int)rnd(s, 4);
    box_arg arg = {.seed = mix((*s)++), .order = order, .ndims = ctx->ndims};
    random_extents(s, order, arg.ext);
    dtl_dist d = random_dist(s, ctx, order, arg.ext, true);
    dtl_box own, need;
    bool holder = dtl_dist_block(ctx, &d, ctx->coords, &own);
    void *local = alloc_box(t, &own);
    if (holder)
      dtl_fill(t, DTL_FILL_INDEX, 0, 0, order, arg.ext, &own, local);
    random_need(&arg, ctx->coords, &need);
    void *buf = alloc_box(t, &need);
    int64_t nv = dtl_box_volume(&need);
    for (int64_t i = 0; i < nv; i++)
      set_el(t, buf, i, -7);
    int rc = dtl_fetch(ctx, &d, t, holder ? local : NULL, &own, random_need, &arg, buf);
    CHECKF(rc == 0, "fetch: %s", ctx->err);
    int64_t bad = index_mismatches(t, buf, &need, arg.ext);
    CHECKF(bad == 0, "fetch round %d (%s, order %d, grid %lldx..): %lld wrong", round,
           dtl_type_name(t), order, (long long)ctx->dims[0], (long long)bad);
    free(local), free(buf);
  }
}

static void test_fetch(void **state) {
  (void)state;
  int64_t gs[16][DTL_MAX_DIMS], moved = 0, total = 0;
  uint64_t s = 11;
  for (int nd = 1; nd <= 3; nd++) {
    int n = grids(nd, gs, nd == 3 ? 5 : 4);
    for (int i = 0; i < n; i++) {
      for (int debug = 0; debug <= 1; debug++) {
        dtl_ctx *ctx = make_ctx(nd, gs[i], debug);
        if (!ctx)
          continue;
        fetch_rounds(ctx, &s, debug ? 4 : 12);
        moved += ctx->msgs_recv[DTL_OP_EXCHANGE];
        dtl_ctx_destroy(&ctx);
      }
    }
  }
  /* not vacuous: many pieces did travel */
  MPI_Allreduce(&moved, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  CHECKF(g_size == 1 || total > 10 * g_size, "only %lld messages", (long long)total);
  all_ok();
}

/* the usual cases spelled out: row blocks, 2-D blocks, a fixed slice, replicas */
static void full_need(const void *arg, const int64_t *coords, dtl_box *box) {
  const box_arg *a = arg;
  (void)coords;
  box->nd = a->order;
  for (int k = 0; k < a->order; k++)
    box->lo[k] = 0, box->hi[k] = a->ext[k];
}

static void test_fetch_named(void **state) {
  (void)state;
  int64_t dims[2] = {1, g_size};
  for (int a = 1; a * a <= g_size; a++)
    if (g_size % a == 0)
      dims[0] = a, dims[1] = g_size / a;
  dtl_ctx *ctx = make_ctx(2, dims, false);
  if (!ctx) {
    all_ok();
    return;
  }
  /* A(i, j) @ M(xy -> xy), M(xy -> x*), M(xy -> 0y), M(x -> *x), everywhere */
  dtl_dist ds[5];
  memset(ds, 0, sizeof ds);
  for (int k = 0; k < 5; k++) {
    ds[k].order = 2, ds[k].ngrid = 2, ds[k].extent[0] = 7, ds[k].extent[1] = 5;
  }
  ds[0].kind[0] = DTL_DIM_PART, ds[0].tdim[0] = 0, ds[0].kind[1] = DTL_DIM_PART, ds[0].tdim[1] = 1;
  ds[1].kind[0] = DTL_DIM_PART, ds[1].tdim[0] = 0, ds[1].kind[1] = DTL_DIM_STAR;
  ds[2].kind[0] = DTL_DIM_FIXED, ds[2].fixed[0] = dims[0] - 1, ds[2].kind[1] = DTL_DIM_PART,
  ds[2].tdim[1] = 1;
  ds[3].kind[0] = DTL_DIM_STAR, ds[3].kind[1] = DTL_DIM_PART, ds[3].tdim[1] = 0;
  ds[4].replicated_everywhere = true;
  box_arg arg = {.order = 2, .ndims = 2, .ext = {7, 5}};
  for (int k = 0; k < 5; k++) {
    dtl_box own, need;
    bool holder = dtl_dist_block(ctx, &ds[k], ctx->coords, &own);
    double *local = alloc_box(DTL_DOUBLE, &own);
    if (holder)
      dtl_fill(DTL_DOUBLE, DTL_FILL_INDEX, 0, 0, 2, arg.ext, &own, local);
    full_need(&arg, ctx->coords, &need);
    double *buf = alloc_box(DTL_DOUBLE, &need);
    dtl_stats_reset(ctx);
    CHECKF(dtl_fetch(ctx, &ds[k], DTL_DOUBLE, local, &own, full_need, &arg, buf) == 0, "%s",
           ctx->err);
    CHECKF(index_mismatches(DTL_DOUBLE, buf, &need, arg.ext) == 0, "distribution %d", k);
    /* each rank receives exactly what it does not hold itself */
    int64_t held = holder ? dtl_box_volume(&own) : 0;
    CHECKF(ctx->bytes_recv[DTL_OP_EXCHANGE] == (35 - held) * 8, "dist %d: received %lld bytes", k,
           (long long)ctx->bytes_recv[DTL_OP_EXCHANGE]);
    int64_t sent = ctx->bytes_sent[DTL_OP_EXCHANGE], recv = ctx->bytes_recv[DTL_OP_EXCHANGE];
    int64_t tot[2], mine[2] = {sent, recv};
    MPI_Allreduce(mine, tot, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK(tot[0] == tot[1]);
    if (k == 4)
      CHECK(sent == 0 && recv == 0);
    free(local), free(buf);
  }
  dtl_ctx_destroy(&ctx);
  all_ok();
}

/* ---- accumulate ----------------------------------------------------------------------------- */
static double contribution(int p, int64_t lin) {
  return (double)(p + 1) * 1000 + (double)(lin % 997);
}

static void test_accumulate(void **state) {
  (void)state;
  int64_t gs[16][DTL_MAX_DIMS];
  uint64_t s = 23;
  for (int nd = 1; nd <= 3; nd++) {
    int n = grids(nd, gs, nd == 3 ? 5 : 4);
    for (int i = 0; i < n; i++) {
      dtl_ctx *ctx = make_ctx(nd, gs[i], i % 2 == 1);
      if (!ctx)
        continue;
      for (int round = 0; round < 10; round++) {
        dtl_type t = round % 3 == 0 ? DTL_DOUBLE : round % 3 == 1 ? DTL_INT64 : DTL_FLOAT;
        int order = (int)rnd(&s, 4);
        box_arg arg = {.seed = mix(s++), .order = order, .ndims = nd};
        random_extents(&s, order, arg.ext);
        dtl_dist d = random_dist(&s, ctx, order, arg.ext, true);
        unsigned mask = (unsigned)rnd(&s, 1 << nd);
        dtl_box own, prod;
        bool holder = dtl_dist_block(ctx, &d, ctx->coords, &own);
        void *local = alloc_box(t, &own);
        if (holder)
          dtl_fill(t, DTL_FILL_INDEX, 0, 0, order, arg.ext, &own, local);
        random_need(&arg, ctx->coords, &prod);
        void *buf = alloc_box(t, &prod);
        int64_t x[DTL_MAX_DIMS], k = 0;
        if (!dtl_box_empty(&prod)) {
          memcpy(x, prod.lo, sizeof x);
          do
            set_el(t, buf, k++, contribution(ctx->rank, lin_of(order, arg.ext, x)));
          while (box_next(&prod, x));
        }
        int rc =
            dtl_accumulate(ctx, &d, t, holder ? local : NULL, &own, mask, random_need, &arg, buf);
        CHECKF(rc == 0, "accumulate: %s", ctx->err);
        /* expected: the initial value plus the contribution of every executor p whose
         * box has the element and whose coordinates equal ours outside the mask */
        int64_t bad = 0;
        if (holder && !dtl_box_empty(&own)) {
          dtl_box pb[64];
          int64_t pc[64][DTL_MAX_DIMS];
          for (int p = 0; p < g_size; p++) {
            dtl_coords_of(ctx, p, pc[p]);
            random_need(&arg, pc[p], &pb[p]);
          }
          memcpy(x, own.lo, sizeof x);
          k = 0;
          do {
            int64_t l = lin_of(order, arg.ext, x);
            double e = index_value(t, l);
            for (int p = 0; p < g_size; p++) {
              bool aligned = true;
              for (int g = 0; g < nd; g++)
                if (!(mask & (1u << g)) && pc[p][g] != ctx->coords[g])
                  aligned = false;
              if (aligned && !dtl_box_empty(&pb[p]) && in_box(&pb[p], x))
                e += contribution(p, l);
            }
            double got = get_el(t, local, k++);
            if (t == DTL_FLOAT ? fabs(got - e) > 1e-6 * fabs(e) : got != e)
              bad++;
          } while (box_next(&own, x));
        }
        CHECKF(bad == 0, "accumulate round %d (%s, order %d, mask %u): %lld wrong", round,
               dtl_type_name(t), order, mask, (long long)bad);
        free(local), free(buf);
      }
      dtl_ctx_destroy(&ctx);
    }
  }
  all_ok();
}

/* ---- broadcast ------------------------------------------------------------------------------ */
typedef struct {
  uint64_t seed;
  unsigned mask;
} bcast_case;

/* A box that the members of the broadcast group share (it depends on the coordinates
 * outside the mask only) and that the group holds: along the dims outside the mask it
 * stays inside this rank's block.  Returns false when the group holds nothing. */
static bool group_need(const dtl_ctx *ctx, const dtl_dist *d, const bcast_case *bc, dtl_box *need) {
  int64_t key[DTL_MAX_DIMS];
  for (int g = 0; g < ctx->ndims; g++)
    key[g] = (bc->mask & (1u << g)) ? -1 : ctx->coords[g];
  hashed_box(bc->seed, coords_key(ctx->ndims, key), d->order, d->extent, need);
  for (int g = 0; g < ctx->ndims && !d->replicated_everywhere; g++) {
    if (bc->mask & (1u << g))
      continue;
    if (d->kind[g] == DTL_DIM_FIXED && ctx->coords[g] != d->fixed[g])
      return false;
    if (d->kind[g] == DTL_DIM_PART) {
      int t = d->tdim[g];
      int64_t lo = dtl_block_lo(d->extent[t], ctx->dims[g], ctx->coords[g]);
      int64_t hi = dtl_block_hi(d->extent[t], ctx->dims[g], ctx->coords[g]);
      need->lo[t] = dtl_max(need->lo[t], lo);
      need->hi[t] = dtl_max(need->lo[t], dtl_min(need->hi[t], hi));
    }
  }
  return true;
}

static void test_bcast_fetch(void **state) {
  (void)state;
  int64_t gs[16][DTL_MAX_DIMS];
  uint64_t s = 31;
  for (int nd = 1; nd <= 3; nd++) {
    int n = grids(nd, gs, nd == 3 ? 5 : 4);
    for (int i = 0; i < n; i++) {
      dtl_ctx *ctx = make_ctx(nd, gs[i], i % 2 == 0);
      if (!ctx)
        continue;
      for (int round = 0; round < 10; round++) {
        dtl_type t = (dtl_type)rnd(&s, 4);
        int order = 1 + (int)rnd(&s, 3);
        int64_t ext[DTL_MAX_DIMS];
        random_extents(&s, order, ext);
        dtl_dist d = random_dist(&s, ctx, order, ext, true);
        bcast_case bc = {mix(s++), (unsigned)rnd(&s, 1 << nd)};
        dtl_box own, need;
        bool holder = dtl_dist_block(ctx, &d, ctx->coords, &own);
        void *local = alloc_box(t, &own);
        if (holder)
          dtl_fill(t, DTL_FILL_INDEX, 0, 0, order, ext, &own, local);
        if (group_need(ctx, &d, &bc, &need)) { /* the whole group agrees */
          void *buf = alloc_box(t, &need);
          dtl_stats_reset(ctx);
          int rc = dtl_bcast_fetch(ctx, bc.mask, &d, t, local, &own, &need, buf);
          CHECKF(rc == 0, "bcast_fetch: %s", ctx->err);
          CHECKF(index_mismatches(t, buf, &need, ext) == 0, "bcast round %d mask %u", round,
                 bc.mask);
          int64_t v[2] = {ctx->bytes_sent[DTL_OP_BCAST], ctx->bytes_recv[DTL_OP_BCAST]}, tot[2];
          MPI_Allreduce(v, tot, 2, MPI_INT64_T, MPI_SUM, dtl_subcomm(ctx, bc.mask));
          CHECK(tot[0] == tot[1]);
          free(buf);
        }
        free(local);
      }
      dtl_ctx_destroy(&ctx);
    }
  }
  /* SUMMA's panel: B(i, k) @ M(xy -> xy) broadcast along y, and an error case */
  int64_t dims[2] = {1, g_size};
  for (int a = 1; a * a <= g_size; a++)
    if (g_size % a == 0)
      dims[0] = a, dims[1] = g_size / a;
  dtl_ctx *ctx = make_ctx(2, dims, false);
  if (ctx) {
    dtl_dist d;
    memset(&d, 0, sizeof d);
    d.order = 2, d.ngrid = 2, d.extent[0] = 9, d.extent[1] = 10;
    d.kind[0] = DTL_DIM_PART, d.tdim[0] = 0, d.kind[1] = DTL_DIM_PART, d.tdim[1] = 1;
    dtl_box own, need;
    dtl_dist_block(ctx, &d, ctx->coords, &own);
    double *local = alloc_box(DTL_DOUBLE, &own);
    dtl_fill(DTL_DOUBLE, DTL_FILL_INDEX, 0, 0, 2, d.extent, &own, local);
    for (int64_t ko = 0; ko < dims[1]; ko++) {
      need = own;
      need.lo[1] = dtl_block_lo(10, dims[1], ko), need.hi[1] = dtl_block_hi(10, dims[1], ko);
      double *buf = alloc_box(DTL_DOUBLE, &need);
      dtl_stats_reset(ctx);
      CHECKF(dtl_bcast_fetch(ctx, 2u, &d, DTL_DOUBLE, local, &own, &need, buf) == 0, "%s",
             ctx->err);
      CHECK(index_mismatches(DTL_DOUBLE, buf, &need, d.extent) == 0);
      int64_t bytes = dtl_box_volume(&need) * 8;
      if (dims[1] > 1 && bytes > 0) {
        if (ctx->coords[1] == ko)
          CHECK(ctx->msgs_sent[DTL_OP_BCAST] == dims[1] - 1 &&
                ctx->bytes_sent[DTL_OP_BCAST] == bytes * (dims[1] - 1));
        else
          CHECK(ctx->msgs_recv[DTL_OP_BCAST] == 1 && ctx->bytes_recv[DTL_OP_BCAST] == bytes);
      }
      free(buf);
    }
    /* a box that the row does not hold: every rank of the grid needs all of B */
    if (dims[0] > 1) {
      need.nd = 2, need.lo[0] = 0, need.hi[0] = 9, need.lo[1] = 0, need.hi[1] = 10;
      double *buf = alloc_box(DTL_DOUBLE, &need);
      CHECK(dtl_bcast_fetch(ctx, 2u, &d, DTL_DOUBLE, local, &own, &need, buf) != 0 &&
            strstr(ctx->err, "not held"));
      free(buf);
    }
    free(local);
    dtl_ctx_destroy(&ctx);
  }
  all_ok();
}

/* ---- redistribution (src/comm/redist.c) ------------------------------------------------ */
/* Every pair of a set of layouts of a 2-D tensor on every 2-D grid of the ranks: row
 * blocks, column blocks, tiles, transposed tiles, tiles on one row of the grid, rows
 * replicated along the grid's columns, and replicated everywhere. */
static dtl_dist layout(int k, const int64_t *ext) {
  dtl_dist d;
  memset(&d, 0, sizeof d);
  d.order = 2, d.ngrid = 2, d.extent[0] = ext[0], d.extent[1] = ext[1];
  static const dtl_dim_kind kind[7][2] = {
      {DTL_DIM_PART, DTL_DIM_STAR}, {DTL_DIM_STAR, DTL_DIM_PART}, {DTL_DIM_PART, DTL_DIM_PART},
      {DTL_DIM_PART, DTL_DIM_PART}, {DTL_DIM_PART, DTL_DIM_FIXED}, {DTL_DIM_STAR, DTL_DIM_PART},
      {DTL_DIM_STAR, DTL_DIM_STAR}};
  static const int tdim[7][2] = {{0, 0}, {0, 1}, {0, 1}, {1, 0}, {1, 0}, {0, 0}, {0, 0}};
  for (int g = 0; g < 2; g++) d.kind[g] = kind[k][g], d.tdim[g] = tdim[k][g];
  d.replicated_everywhere = k == 6;
  return d;
}

static void test_redistribute_pairs(void **state) {
  (void)state;
  int64_t gs[16][DTL_MAX_DIMS];
  int n = grids(2, gs, 16);
  for (int i = 0; i < n; i++) {
    dtl_ctx *ctx = make_ctx(2, gs[i], false);
    if (!ctx)
      continue;
    int64_t ext[DTL_MAX_DIMS] = {7 + g_size, 5 + 2 * g_size};
    for (int a = 0; a < 7; a++)
      for (int b = 0; b < 7; b++) {
        dtl_dist from = layout(a, ext), to = layout(b, ext);
        dtl_box fo, too;
        bool hf = dtl_dist_block(ctx, &from, ctx->coords, &fo);
        bool ht = dtl_dist_block(ctx, &to, ctx->coords, &too);
        void *x = alloc_box(DTL_DOUBLE, &fo), *y = alloc_box(DTL_DOUBLE, &too);
        if (hf)
          dtl_fill(DTL_DOUBLE, DTL_FILL_INDEX, 0, 0, 2, ext, &fo, x);
        CHECKF(dtl_redistribute(ctx, DTL_DOUBLE, &from, x, &fo, &to, y) == 0, "%s", ctx->err);
        if (ht)
          CHECKF(index_mismatches(DTL_DOUBLE, y, &too, ext) == 0,
                 "layout %d -> %d on a %lldx%lld grid", a, b, (long long)gs[i][0], (long long)gs[i][1]);
        free(x), free(y);
      }
    dtl_ctx_destroy(&ctx);
  }
  all_ok();
}


static void test_redistribute(void **state) {
  (void)state;
  int64_t gs[16][DTL_MAX_DIMS];
  uint64_t s = 61;
  for (int nd = 1; nd <= 3; nd++) {
    int n = grids(nd, gs, 3);
    for (int i = 0; i < n; i++) {
      dtl_ctx *ctx = make_ctx(nd, gs[i], i % 2 == 1);
      if (!ctx)
        continue;
      for (int round = 0; round < 6; round++) {
        dtl_type t = (dtl_type)rnd(&s, 4);
        int order = 1 + (int)rnd(&s, 3);
        int64_t ext[DTL_MAX_DIMS];
        random_extents(&s, order, ext);
        dtl_dist from = random_dist(&s, ctx, order, ext, true);
        dtl_dist to = random_dist(&s, ctx, order, ext, true);
        dtl_box fo, to_own;
        bool hf = dtl_dist_block(ctx, &from, ctx->coords, &fo);
        bool ht = dtl_dist_block(ctx, &to, ctx->coords, &to_own);
        void *a = alloc_box(t, &fo), *b = alloc_box(t, &to_own);
        if (hf)
          dtl_fill(t, DTL_FILL_INDEX, 0, 0, order, ext, &fo, a);
        CHECKF(dtl_redistribute(ctx, t, &from, a, &fo, &to, b) == 0, "%s", ctx->err);
        if (ht)
          CHECKF(index_mismatches(t, b, &to_own, ext) == 0, "redistribute round %d", round);
        /* the application's layout: row blocks over the ranks, in rank order */
        int64_t lo[DTL_MAX_DIMS] = {0}, hi[DTL_MAX_DIMS];
        memcpy(hi, ext, sizeof hi);
        lo[0] = dtl_block_lo(ext[0], g_size, ctx->rank);
        hi[0] = dtl_block_hi(ext[0], g_size, ctx->rank);
        dtl_box ub = {.nd = order};
        memcpy(ub.lo, lo, sizeof lo), memcpy(ub.hi, hi, sizeof hi);
        void *user = alloc_box(t, &ub);
        CHECKF(dtl_export(ctx, &to, t, b, &to_own, lo, hi, user) == 0, "%s", ctx->err);
        CHECKF(index_mismatches(t, user, &ub, ext) == 0, "export round %d", round);
        dtl_zero(t, b, dtl_box_volume(&to_own));
        CHECKF(dtl_import(ctx, &to, t, lo, hi, user, b, &to_own) == 0, "%s", ctx->err);
        if (ht)
          CHECKF(index_mismatches(t, b, &to_own, ext) == 0, "import round %d", round);
        free(a), free(b), free(user);
      }
      dtl_ctx_destroy(&ctx);
    }
  }
  all_ok();
}

/* ---- shift, reduce, gather -------------------------------------------------------------- */
static void test_shift(void **state) {
  (void)state;
  int64_t gs[16][DTL_MAX_DIMS];
  for (int nd = 1; nd <= 2; nd++) {
    int n = grids(nd, gs, 4);
    for (int i = 0; i < n; i++) {
      dtl_ctx *ctx = make_ctx(nd, gs[i], false);
      if (!ctx)
        continue;
      for (int dim = 0; dim < nd; dim++) {
        /* counts differ by coordinate: each rank knows its neighbour's */
        int64_t c[DTL_MAX_DIMS];
        memcpy(c, ctx->coords, sizeof c);
        c[dim] = dtl_mod(c[dim] + 1, ctx->dims[dim]);
        int from = dtl_rank_of(ctx, c);
        int64_t ns = 3 + ctx->coords[dim], nr = 3 + c[dim];
        double sb[16], rb[16];
        for (int k = 0; k < ns; k++)
          sb[k] = ctx->rank * 100 + k;
        dtl_stats_reset(ctx);
        CHECKF(dtl_shift(ctx, dim, DTL_DOUBLE, sb, ns, rb, nr) == 0, "%s", ctx->err);
        for (int k = 0; k < nr; k++)
          CHECK(rb[k] == from * 100 + k);
        if (ctx->dims[dim] > 1)
          CHECK(ctx->msgs_sent[DTL_OP_SHIFT] == 1 && ctx->bytes_recv[DTL_OP_SHIFT] == nr * 8);
        /* in place, as rotate uses it */
        int32_t ib[4];
        for (int k = 0; k < 4; k++)
          ib[k] = ctx->rank * 10 + k;
        CHECKF(dtl_shift(ctx, dim, DTL_INT32, ib, 4, ib, 4) == 0, "%s", ctx->err);
        for (int k = 0; k < 4; k++)
          CHECK(ib[k] == from * 10 + k);
      }
      CHECK(dtl_shift(ctx, nd, DTL_DOUBLE, NULL, 0, NULL, 0) != 0);
      dtl_ctx_destroy(&ctx);
    }
  }
  all_ok();
}

static void test_reduce(void **state) {
  (void)state;
  int64_t gs[16][DTL_MAX_DIMS];
  for (int nd = 1; nd <= 3; nd++) {
    int n = grids(nd, gs, 4);
    for (int i = 0; i < n; i++) {
      dtl_ctx *ctx = make_ctx(nd, gs[i], false);
      if (!ctx)
        continue;
      for (unsigned mask = 0; mask < (1u << nd); mask++) {
        for (int t = 0; t < 4; t++) {
          int64_t buf[8];
          void *b = buf;
          for (int k = 0; k < 5; k++)
            set_el((dtl_type)t, b, k, ctx->rank + k);
          /* members: the ranks that agree with us outside the mask */
          double sum[5] = {0};
          int members = 0;
          for (int r = 0; r < g_size; r++) {
            int64_t c[DTL_MAX_DIMS];
            bool same = true;
            dtl_coords_of(ctx, r, c);
            for (int g = 0; g < nd; g++)
              if (!(mask & (1u << g)) && c[g] != ctx->coords[g])
                same = false;
            if (!same)
              continue;
            members++;
            for (int k = 0; k < 5; k++)
              sum[k] += r + k;
          }
          CHECKF(dtl_reduce(ctx, mask, NULL, (dtl_type)t, b, 5) == 0, "%s", ctx->err);
          for (int k = 0; k < 5; k++)
            CHECK(get_el((dtl_type)t, b, k) == sum[k]);
          /* to a root: the last coordinate along the mask dims */
          int64_t root[DTL_MAX_DIMS];
          bool am_root = true;
          for (int g = 0; g < nd; g++) {
            root[g] = ctx->dims[g] - 1;
            if ((mask & (1u << g)) && ctx->coords[g] != root[g])
              am_root = false;
          }
          for (int k = 0; k < 5; k++)
            set_el((dtl_type)t, b, k, ctx->rank + k);
          dtl_stats_reset(ctx);
          CHECKF(dtl_reduce(ctx, mask, root, (dtl_type)t, b, 5) == 0, "%s", ctx->err);
          if (am_root) {
            for (int k = 0; k < 5; k++)
              CHECK(get_el((dtl_type)t, b, k) == sum[k]);
            CHECK(ctx->msgs_recv[DTL_OP_REDUCE] == members - 1);
          } else {
            CHECK(ctx->msgs_sent[DTL_OP_REDUCE] == 1);
          }
        }
      }
      dtl_ctx_destroy(&ctx);
    }
  }
  all_ok();
}

/* Broadcast of a buffer from a root coordinate along the mask dims: every member ends with the
 * root's values, the others' (outside the sub-grid) are untouched; reduce to the root then
 * broadcast equals allreduce. */
static void test_bcast_buffer(void **state) {
  (void)state;
  int64_t gs[16][DTL_MAX_DIMS];
  for (int nd = 1; nd <= 3; nd++) {
    int n = grids(nd, gs, 4);
    for (int i = 0; i < n; i++) {
      dtl_ctx *ctx = make_ctx(nd, gs[i], false);
      if (!ctx)
        continue;
      for (unsigned mask = 0; mask < (1u << nd); mask++) {
        for (int t = 0; t < 4; t++) {
          int64_t buf[8], buf2[8];
          void *b = buf, *b2 = buf2;
          /* the root: coordinate 1 along each mask dim where the grid has it, else 0 */
          int64_t root[DTL_MAX_DIMS], rc[DTL_MAX_DIMS];
          for (int g = 0; g < nd; g++) {
            root[g] = ctx->dims[g] > 1 ? 1 : 0;
            rc[g] = mask & (1u << g) ? root[g] : ctx->coords[g];
          }
          int root_rank = dtl_rank_of(ctx, rc);
          for (int k = 0; k < 5; k++)
            set_el((dtl_type)t, b, k, ctx->rank * 10 + k);
          dtl_stats_reset(ctx);
          CHECKF(dtl_bcast(ctx, mask, root, (dtl_type)t, b, 5) == 0, "%s", ctx->err);
          for (int k = 0; k < 5; k++)
            CHECK(get_el((dtl_type)t, b, k) == root_rank * 10 + k);
          if (root_rank != ctx->rank)
            CHECK(ctx->msgs_recv[DTL_OP_BCAST] == 1);
          /* reduce to the root + broadcast == allreduce */
          for (int k = 0; k < 5; k++)
            set_el((dtl_type)t, b, k, ctx->rank + k), set_el((dtl_type)t, b2, k, ctx->rank + k);
          CHECKF(dtl_reduce(ctx, mask, root, (dtl_type)t, b, 5) == 0, "%s", ctx->err);
          CHECKF(dtl_bcast(ctx, mask, root, (dtl_type)t, b, 5) == 0, "%s", ctx->err);
          CHECKF(dtl_reduce(ctx, mask, NULL, (dtl_type)t, b2, 5) == 0, "%s", ctx->err);
          for (int k = 0; k < 5; k++)
            CHECK(get_el((dtl_type)t, b, k) == get_el((dtl_type)t, b2, k));
        }
      }
      dtl_ctx_destroy(&ctx);
    }
  }
  all_ok();
}

static void test_gather_and_fill(void **state) {
  (void)state;
  int64_t gs[16][DTL_MAX_DIMS];
  uint64_t s = 41;
  for (int nd = 1; nd <= 3; nd++) {
    int n = grids(nd, gs, 3);
    for (int i = 0; i < n; i++) {
      dtl_ctx *ctx = make_ctx(nd, gs[i], false);
      if (!ctx)
        continue;
      for (int round = 0; round < 8; round++) {
        dtl_type t = (dtl_type)(round % 4);
        dtl_fill_kind fk = (dtl_fill_kind)((round / 4 + i) % 4);
        int order = (int)rnd(&s, 4);
        int64_t ext[DTL_MAX_DIMS];
        random_extents(&s, order, ext);
        dtl_dist d = random_dist(&s, ctx, order, ext, true);
        dtl_box own, full = {.nd = order};
        for (int k = 0; k < order; k++)
          full.hi[k] = ext[k];
        bool holder = dtl_dist_block(ctx, &d, ctx->coords, &own);
        void *local = alloc_box(t, &own);
        if (holder)
          dtl_fill(t, fk, 9, 3, order, ext, &own, local);
        void *global = ctx->rank == 0 ? alloc_box(t, &full) : NULL;
        CHECKF(dtl_gather(ctx, &d, t, local, &own, global) == 0, "%s", ctx->err);
        if (ctx->rank == 0) {
          /* the serial fill of the whole tensor: the same data for any grid */
          void *ref = alloc_box(t, &full);
          dtl_fill(t, fk, 9, 3, order, ext, &full, ref);
          int64_t vol = dtl_box_volume(&full);
          CHECKF(memcmp(ref, global, (size_t)vol * dtl_type_size(t)) == 0, "gather round %d",
                 round);
          free(ref);
        }
        free(local), free(global);
      }
      dtl_ctx_destroy(&ctx);
    }
  }
  /* fill: ranges, seeds, tensor ids, index */
  dtl_box b = {2, {0, 0}, {50, 40}};
  int64_t ext[] = {50, 40};
  double *d1 = alloc_box(DTL_DOUBLE, &b), *d2 = alloc_box(DTL_DOUBLE, &b);
  dtl_fill(DTL_DOUBLE, DTL_FILL_RANDOM, 1, 0, 2, ext, &b, d1);
  dtl_fill(DTL_DOUBLE, DTL_FILL_RANDOM, 2, 0, 2, ext, &b, d2);
  double mn = 1, mx = -1, mean = 0;
  int same = 0;
  for (int k = 0; k < 2000; k++) {
    mn = fmin(mn, d1[k]), mx = fmax(mx, d1[k]), mean += d1[k] / 2000;
    same += d1[k] == d2[k];
  }
  CHECK(mn >= -1 && mx < 1 && mn < -0.9 && mx > 0.9 && fabs(mean) < 0.1 && same < 5);
  dtl_fill(DTL_DOUBLE, DTL_FILL_RANDOM, 1, 1, 2, ext, &b, d2);
  same = 0;
  for (int k = 0; k < 2000; k++)
    same += d1[k] == d2[k];
  CHECK(same < 5);
  /* a sub-block sees the same values as the whole */
  dtl_box sb = {2, {10, 5}, {13, 9}};
  double part[12];
  dtl_fill(DTL_DOUBLE, DTL_FILL_RANDOM, 1, 0, 2, ext, &sb, part);
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 4; c++)
      CHECK(part[r * 4 + c] == d1[(10 + r) * 40 + 5 + c]);
  float *f = alloc_box(DTL_FLOAT, &b);
  dtl_fill(DTL_FLOAT, DTL_FILL_RANDOM, 1, 0, 2, ext, &b, f);
  for (int k = 0; k < 2000; k++)
    CHECK(f[k] >= -1 && f[k] < 1);
  int32_t *iv = alloc_box(DTL_INT32, &b);
  int hist[9] = {0};
  dtl_fill(DTL_INT32, DTL_FILL_RANDOM, 1, 0, 2, ext, &b, iv);
  for (int k = 0; k < 2000; k++) {
    CHECK(iv[k] >= -4 && iv[k] <= 4);
    if (iv[k] >= -4 && iv[k] <= 4)
      hist[iv[k] + 4]++;
  }
  for (int k = 0; k < 9; k++)
    CHECK(hist[k] > 100);
  dtl_fill(DTL_INT32, DTL_FILL_INDEX, 1, 0, 2, ext, &b, iv);
  CHECK(iv[0] == 0 && iv[1999] == 999 && iv[1234] == 234);
  dtl_fill(DTL_DOUBLE, DTL_FILL_INDEX, 1, 0, 2, ext, &b, d1);
  CHECK(d1[1999] == 1999);
  dtl_fill(DTL_DOUBLE, DTL_FILL_ONES, 1, 0, 2, ext, &b, d1);
  CHECK(d1[0] == 1 && d1[1999] == 1);
  dtl_fill(DTL_DOUBLE, DTL_FILL_ZEROS, 1, 0, 2, ext, &b, d1);
  CHECK(d1[0] == 0 && d1[1999] == 0);
  int64_t sc = -1;
  dtl_box scalar = {.nd = 0};
  dtl_fill(DTL_INT64, DTL_FILL_INDEX, 1, 0, 0, ext, &scalar, &sc);
  CHECK(sc == 0);
  free(d1), free(d2), free(f), free(iv);
  all_ok();
}

/* ---- .npy ------------------------------------------------------------------------------------ */
static char g_dir[256];

static void make_dir(void) {
  if (g_rank == 0) {
    snprintf(g_dir, sizeof g_dir, "/tmp/dtl-rt-XXXXXX");
    if (!mkdtemp(g_dir))
      g_dir[0] = '\0';
  }
  MPI_Bcast(g_dir, sizeof g_dir, MPI_CHAR, 0, MPI_COMM_WORLD);
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[600];
  while (d && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat st;
    if (!lstat(p, &st) && S_ISDIR(st.st_mode))
      remove_dir(p);
    else
      unlink(p);
  }
  if (d)
    closedir(d);
  rmdir(dir);
}

/* Files in the directory whose names contain `part`. */
static int count_files(const char *dir, const char *part) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int n = 0;
  while (d && (e = readdir(d)))
    if (strstr(e->d_name, part))
      n++;
  if (d)
    closedir(d);
  return n;
}

static const char *descr_of(dtl_type t) {
  return t == DTL_DOUBLE ? "<f8" : t == DTL_FLOAT ? "<f4" : t == DTL_INT32 ? "<i4" : "<i8";
}

/* Rank 0: check a written file byte by byte: NumPy 1.0 header, 64-byte alignment, data. */
static void check_npy_bytes(const char *path, dtl_type t, int order, const int64_t *ext,
                            const void *data) {
  FILE *f = fopen(path, "rb");
  CHECKF(f != NULL, "cannot open %s", path);
  if (!f)
    return;
  unsigned char pre[10];
  CHECK(fread(pre, 1, 10, f) == 10 && !memcmp(pre, "\x93NUMPY\x01\x00", 8));
  int hlen = pre[8] | pre[9] << 8;
  CHECK((10 + hlen) % 64 == 0);
  char *h = calloc((size_t)hlen + 1, 1);
  CHECK(fread(h, 1, (size_t)hlen, f) == (size_t)hlen && h[hlen - 1] == '\n');
  char shape[128] = "(";
  for (int k = 0; k < order; k++)
    snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", k ? ", " : "",
             (long long)ext[k]);
  strcat(shape, order == 1 ? ",)" : ")");
  char want[256];
  snprintf(want, sizeof want, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr_of(t),
           shape);
  CHECKF(!strncmp(h, want, strlen(want)), "header '%s'", h);
  int64_t vol = 1;
  for (int k = 0; k < order; k++)
    vol *= ext[k];
  size_t bytes = (size_t)vol * dtl_type_size(t);
  char *got = malloc(bytes + 1);
  CHECK(fread(got, 1, bytes + 1, f) == bytes); /* and nothing after */
  CHECK(memcmp(got, data, bytes) == 0);
  free(got), free(h);
  fclose(f);
}

static void test_npy_roundtrip(void **state) {
  (void)state;
  make_dir();
  int64_t gs[16][DTL_MAX_DIMS];
  uint64_t s = 53;
  int file = 0;
  for (int nd = 1; nd <= 3; nd++) { /* MPI-IO is slow when oversubscribed: one grid each */
    int n = grids(nd, gs, 16), i = n / 2;
    {
      dtl_ctx *ctx = make_ctx(nd, gs[i], false);
      if (!ctx)
        continue;
      for (int round = 0; round < 8; round++) {
        dtl_type t = (dtl_type)(round % 4);
        int order = (int)((round + i) % 4);
        int64_t ext[DTL_MAX_DIMS];
        random_extents(&s, order, ext);
        dtl_dist d1 = random_dist(&s, ctx, order, ext, true);
        dtl_dist d2 = random_dist(&s, ctx, order, ext, true);
        char path[400];
        snprintf(path, sizeof path, "%s/t%d.npy", g_dir, file++);
        dtl_box o1, o2, full = {.nd = order};
        for (int k = 0; k < order; k++)
          full.hi[k] = ext[k];
        bool h1 = dtl_dist_block(ctx, &d1, ctx->coords, &o1);
        bool h2 = dtl_dist_block(ctx, &d2, ctx->coords, &o2);
        void *a = alloc_box(t, &o1), *b = alloc_box(t, &o2), *ref = alloc_box(t, &o2);
        if (h1)
          dtl_fill(t, DTL_FILL_RANDOM, 3, round, order, ext, &o1, a);
        if (h2)
          dtl_fill(t, DTL_FILL_RANDOM, 3, round, order, ext, &o2, ref);
        CHECKF(dtl_npy_write(ctx, path, &d1, t, a, &o1) == 0, "write: %s", ctx->err);
        CHECKF(dtl_npy_read(ctx, path, &d2, t, b, &o2) == 0, "read: %s", ctx->err);
        if (h2)
          CHECKF(memcmp(b, ref, (size_t)dtl_box_volume(&o2) * dtl_type_size(t)) == 0,
                 "npy round %d (%s, order %d)", round, dtl_type_name(t), order);
        if (ctx->rank == 0) {
          void *g = alloc_box(t, &full);
          dtl_fill(t, DTL_FILL_RANDOM, 3, round, order, ext, &full, g);
          check_npy_bytes(path, t, order, ext, g);
          free(g);
        }
        free(a), free(b), free(ref);
      }
      dtl_ctx_destroy(&ctx);
    }
  }
  if (g_rank == 0)
    CHECK(count_files(g_dir, ".tmp.") == 0);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0)
    remove_dir(g_dir);
  all_ok();
}

/* Rank 0 writes a .npy file by hand. */
static void write_raw(const char *path, int version, const char *dict, const void *data,
                      size_t bytes) {
  if (g_rank != 0)
    return;
  FILE *f = fopen(path, "wb");
  if (!f)
    return;
  size_t pre = version == 1 ? 10 : 12, len = strlen(dict) + 1;
  size_t total = (pre + len + 63) / 64 * 64, hlen = total - pre;
  unsigned char p[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)version, 0};
  p[8] = (unsigned char)(hlen & 0xff), p[9] = (unsigned char)(hlen >> 8);
  p[10] = p[11] = 0;
  fwrite(p, 1, pre, f);
  fputs(dict, f);
  for (size_t k = pre + strlen(dict); k < total - 1; k++)
    fputc(' ', f);
  fputc('\n', f);
  if (bytes)
    fwrite(data, 1, bytes, f);
  fclose(f);
}

/* Every rank fails with one message, containing `want`. */
static void expect_error(dtl_ctx *ctx, int rc, const char *want) {
  char root[sizeof ctx->err];
  memcpy(root, ctx->err, sizeof root);
  MPI_Bcast(root, sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
  CHECKF(rc != 0 && strstr(ctx->err, want) && !strcmp(root, ctx->err),
         "rc %d, message '%s', expected '%s'", rc, ctx->err, want);
}

static void test_npy_formats_and_errors(void **state) {
  (void)state;
  make_dir();
  int64_t dims[] = {g_size};
  dtl_ctx *ctx = make_ctx(1, dims, false);
  if (!ctx) {
    all_ok();
    return;
  }
  dtl_dist d;
  memset(&d, 0, sizeof d);
  d.order = 2, d.ngrid = 1, d.extent[0] = 4, d.extent[1] = 4;
  d.kind[0] = DTL_DIM_PART, d.tdim[0] = 0;
  dtl_box own, full = {2, {0, 0}, {4, 4}};
  dtl_dist_block(ctx, &d, ctx->coords, &own);
  double data[16], *local = alloc_box(DTL_DOUBLE, &own);
  for (int k = 0; k < 16; k++)
    data[k] = k * 0.5;
  char p[400];
  /* versions 2.0 and 3.0, '|', '=' and double quotes, keys in another order */
  const char *dicts[] = {"{'descr': '<f8', 'fortran_order': False, 'shape': (4, 4), }",
                         "{\"shape\": (4, 4), \"descr\": \"|f8\", \"fortran_order\": False}",
                         "{'fortran_order': False, 'descr': '=f8', 'shape': (4,4)}"};
  for (int v = 1; v <= 3; v++) {
    snprintf(p, sizeof p, "%s/v%d.npy", g_dir, v);
    write_raw(p, v, dicts[v - 1], data, sizeof data);
    MPI_Barrier(MPI_COMM_WORLD);
    dtl_zero(DTL_DOUBLE, local, dtl_box_volume(&own));
    CHECKF(dtl_npy_read(ctx, p, &d, DTL_DOUBLE, local, &own) == 0, "version %d: %s", v, ctx->err);
    dtl_box region = own;
    double *expect = alloc_box(DTL_DOUBLE, &own);
    dtl_copy_box(DTL_DOUBLE, data, &full, expect, &own, &region, false);
    CHECK(memcmp(expect, local, (size_t)dtl_box_volume(&own) * 8) == 0);
    free(expect);
  }
  /* errors: each is one message on every rank */
  snprintf(p, sizeof p, "%s/missing.npy", g_dir);
  expect_error(ctx, dtl_npy_read(ctx, p, &d, DTL_DOUBLE, local, &own), "missing.npy: cannot open");
  snprintf(p, sizeof p, "%s/shape.npy", g_dir);
  write_raw(p, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 5), }", data, 16 * 8);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_error(ctx, dtl_npy_read(ctx, p, &d, DTL_DOUBLE, local, &own),
               "shape.npy: shape (4, 5) does not match tensor shape (4, 4)");
  snprintf(p, sizeof p, "%s/dtype.npy", g_dir);
  write_raw(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }", data, 16 * 4);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_error(ctx, dtl_npy_read(ctx, p, &d, DTL_DOUBLE, local, &own),
               "dtype '<f4' does not match tensor type double");
  snprintf(p, sizeof p, "%s/big.npy", g_dir);
  write_raw(p, 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (4, 4), }", data, 16 * 8);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_error(ctx, dtl_npy_read(ctx, p, &d, DTL_DOUBLE, local, &own), "dtype '>f8'");
  snprintf(p, sizeof p, "%s/short.npy", g_dir);
  write_raw(p, 1, dicts[0], data, 16 * 8 - 3);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_error(ctx, dtl_npy_read(ctx, p, &d, DTL_DOUBLE, local, &own),
               "short.npy: truncated: 125 bytes of data, expected 128");
  snprintf(p, sizeof p, "%s/long.npy", g_dir);
  write_raw(p, 1, dicts[0], data, 16 * 8);
  if (g_rank == 0) {
    FILE *f = fopen(p, "ab");
    fputs("xx", f);
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_error(ctx, dtl_npy_read(ctx, p, &d, DTL_DOUBLE, local, &own), "trailing bytes");
  snprintf(p, sizeof p, "%s/fortran.npy", g_dir);
  write_raw(p, 1, "{'descr': '<f8', 'fortran_order': True, 'shape': (4, 4), }", data, 16 * 8);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_error(ctx, dtl_npy_read(ctx, p, &d, DTL_DOUBLE, local, &own), "fortran_order");
  snprintf(p, sizeof p, "%s/magic.npy", g_dir);
  if (g_rank == 0) {
    FILE *f = fopen(p, "wb");
    fputs("PK\x03\x04 not numpy at all", f);
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_error(ctx, dtl_npy_read(ctx, p, &d, DTL_DOUBLE, local, &own), "bad magic");
  snprintf(p, sizeof p, "%s/garbled.npy", g_dir);
  write_raw(p, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 4", data, 16 * 8);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_error(ctx, dtl_npy_read(ctx, p, &d, DTL_DOUBLE, local, &own), "malformed .npy header");
  /* writes that cannot succeed leave no file behind */
  snprintf(p, sizeof p, "%s/nodir/A.npy", g_dir);
  expect_error(ctx, dtl_npy_write(ctx, p, &d, DTL_DOUBLE, local, &own),
               "nodir/A.npy: cannot create");
  snprintf(p, sizeof p, "%s/adir", g_dir);
  if (g_rank == 0) {
    mkdir(p, 0755);
    char q[500];
    snprintf(q, sizeof q, "%s/keep", p);
    fclose(fopen(q, "w"));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_error(ctx, dtl_npy_write(ctx, p, &d, DTL_DOUBLE, local, &own), "cannot rename");
  if (g_rank == 0) {
    CHECK(count_files(g_dir, ".tmp.") == 0);
    struct stat st;
    CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode));
  }
  /* an existing file is replaced whole */
  snprintf(p, sizeof p, "%s/v1.npy", g_dir);
  for (int64_t k = 0; k < dtl_box_volume(&own); k++)
    local[k] = -1;
  CHECKF(dtl_npy_write(ctx, p, &d, DTL_DOUBLE, local, &own) == 0, "%s", ctx->err);
  if (g_rank == 0) {
    double m1[16];
    for (int k = 0; k < 16; k++)
      m1[k] = -1;
    check_npy_bytes(p, DTL_DOUBLE, 2, d.extent, m1);
  }
  /* a scalar and a tensor fixed to one processor */
  dtl_dist sd;
  memset(&sd, 0, sizeof sd);
  sd.order = 0, sd.ngrid = 1, sd.kind[0] = DTL_DIM_FIXED, sd.fixed[0] = g_size - 1;
  dtl_box sown;
  bool sh = dtl_dist_block(ctx, &sd, ctx->coords, &sown);
  int64_t sv = sh ? 42 : 0, back = -1;
  snprintf(p, sizeof p, "%s/s.npy", g_dir);
  CHECKF(dtl_npy_write(ctx, p, &sd, DTL_INT64, &sv, &sown) == 0, "%s", ctx->err);
  if (g_rank == 0)
    check_npy_bytes(p, DTL_INT64, 0, NULL, &(int64_t){42});
  sd.kind[0] = DTL_DIM_STAR;
  CHECKF(dtl_npy_read(ctx, p, &sd, DTL_INT64, &back, &sown) == 0, "%s", ctx->err);
  CHECK(back == 42);
  dtl_dist sd1 = sd;
  sd1.order = 1, sd1.extent[0] = 1;
  expect_error(ctx, dtl_npy_read(ctx, p, &sd1, DTL_INT64, &back, &sown),
               "shape () does not match tensor shape (1,)");
  free(local);
  dtl_ctx_destroy(&ctx);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0)
    remove_dir(g_dir);
  all_ok();
}

/* ---- debug mode --------------------------------------------------------------------------- */
/* A callback that lies: rank 0 believes it needs everything, the others that rank 0 needs
 * only its own block.  Debug mode must turn this into an error on every rank. */
static void lying_need(const void *arg, const int64_t *coords, dtl_box *box) {
  const box_arg *a = arg;
  box->nd = 1;
  box->lo[0] = 0;
  box->hi[0] = (coords[0] == 0 && g_rank != 0) ? dtl_block_hi(a->ext[0], g_size, 0) : a->ext[0];
  if (coords[0] != 0)
    box->hi[0] = 0;
}

static void test_debug_mode(void **state) {
  (void)state;
  int64_t dims[] = {g_size};
  dtl_ctx *ctx = make_ctx(1, dims, true);
  if (!ctx) {
    all_ok();
    return;
  }
  dtl_dist d;
  memset(&d, 0, sizeof d);
  d.order = 1, d.ngrid = 1, d.extent[0] = 4 * g_size, d.kind[0] = DTL_DIM_PART, d.tdim[0] = 0;
  dtl_box own, all = {1, {0}, {4 * g_size}};
  dtl_dist_block(ctx, &d, ctx->coords, &own);
  double *local = alloc_box(DTL_DOUBLE, &own), *buf = alloc_box(DTL_DOUBLE, &all);
  dtl_fill(DTL_DOUBLE, DTL_FILL_INDEX, 0, 0, 1, d.extent, &own, local);
  box_arg arg = {.order = 1, .ndims = 1, .ext = {4 * g_size}};
  /* consistent boxes pass the checks */
  CHECKF(dtl_fetch(ctx, &d, DTL_DOUBLE, local, &own, full_need, &arg, buf) == 0, "%s", ctx->err);
  CHECK(index_mismatches(DTL_DOUBLE, buf, &all, d.extent) == 0);
  if (g_size > 1) {
    int rc = dtl_fetch(ctx, &d, DTL_DOUBLE, local, &own, lying_need, &arg, buf);
    expect_error(ctx, rc,
                 "debug: fetch: rank 0 (0) expects [4,8) from rank 1 (1), which sends nothing");
    rc = dtl_accumulate(ctx, &d, DTL_DOUBLE, local, &own, 1u, lying_need, &arg, buf);
    expect_error(ctx, rc, "debug: accumulate");
    /* broadcast members that need different boxes */
    dtl_box need = {1, {0}, {ctx->rank == 0 ? 2 : 3}};
    rc = dtl_bcast_fetch(ctx, 1u, &d, DTL_DOUBLE, local, &own, &need, buf);
    CHECKF(rc != 0 && strstr(ctx->err, "need different boxes"), "%s", ctx->err);
    /* a wrong own block */
    dtl_box wrong = own;
    wrong.hi[0] += 1;
    rc = dtl_fetch(ctx, &d, DTL_DOUBLE, local, &wrong, full_need, &arg, buf);
    expect_error(ctx, rc, "debug: fetch: rank 0 passes its block as [0,5) but holds [0,4)");
  }
  /* after all of that, the context still works */
  CHECKF(dtl_fetch(ctx, &d, DTL_DOUBLE, local, &own, full_need, &arg, buf) == 0, "%s", ctx->err);
  CHECK(index_mismatches(DTL_DOUBLE, buf, &all, d.extent) == 0);
  free(local), free(buf);
  dtl_ctx_destroy(&ctx);
  all_ok();
}

/* ---- stats ------------------------------------------------------------------------------------
 */
static void test_stats(void **state) {
  (void)state;
  int64_t dims[] = {g_size};
  dtl_ctx *ctx = make_ctx(1, dims, false);
  if (!ctx) {
    all_ok();
    return;
  }
  dtl_dist d;
  memset(&d, 0, sizeof d);
  d.order = 1, d.ngrid = 1, d.extent[0] = 3 * g_size, d.kind[0] = DTL_DIM_PART, d.tdim[0] = 0;
  dtl_box own, all = {1, {0}, {3 * g_size}};
  dtl_dist_block(ctx, &d, ctx->coords, &own);
  double *local = alloc_box(DTL_DOUBLE, &own), *buf = alloc_box(DTL_DOUBLE, &all);
  dtl_fill(DTL_DOUBLE, DTL_FILL_INDEX, 0, 0, 1, d.extent, &own, local);
  box_arg arg = {.order = 1, .ndims = 1, .ext = {3 * g_size}};
  dtl_stats_reset(ctx);
  CHECK(dtl_fetch(ctx, &d, DTL_DOUBLE, local, &own, full_need, &arg, buf) == 0);
  /* all-gather of 3 elements each: P-1 messages of 24 bytes each way */
  CHECK(ctx->msgs_sent[DTL_OP_EXCHANGE] == g_size - 1 &&
        ctx->msgs_recv[DTL_OP_EXCHANGE] == g_size - 1);
  CHECK(ctx->bytes_sent[DTL_OP_EXCHANGE] == 24 * (g_size - 1));
  CHECK(dtl_reduce(ctx, 1u, NULL, DTL_DOUBLE, buf, 2) == 0);
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  dtl_stats_print(ctx, out);
  fclose(out);
  if (g_rank == 0 && g_size > 1) {
    CHECKF(strstr(text, "bytes_sent") && strstr(text, "exchange") && strstr(text, "total") &&
               strstr(text, "allreduce"),
           "%s", text);
    char want[128];
    snprintf(want, sizeof want, "%d", 24 * g_size * (g_size - 1));
    CHECK(strstr(text, want) != NULL);
  }
  if (g_rank != 0)
    CHECK(len == 0);
  free(text);
  dtl_stats_reset(ctx);
  CHECK(ctx->bytes_sent[DTL_OP_EXCHANGE] == 0 && ctx->msgs_recv[DTL_OP_ALLREDUCE] == 0);
  free(local), free(buf);
  dtl_ctx_destroy(&ctx);
  all_ok();
}

/* ---- drivers --------------------------------------------------------------------------------- */
static const char *const pnames[] = {"n", "chunk", "gx"};
static const char *const tnames[] = {"A", "B", "C"};

static int parse(int64_t *v, dtl_options *o, char *err, ...) {
  char *argv[32];
  int argc = 0;
  va_list ap;
  va_start(ap, err);
  argv[argc++] = "prog";
  for (char *a; (a = va_arg(ap, char *));)
    argv[argc++] = a;
  va_end(ap);
  v[0] = 4096, v[1] = 256, v[2] = -1;
  err[0] = '\0';
  return dtl_parse_args(argc, argv, 3, pnames, NULL, v, 3, tnames, o, err, 256);
}

#define PARSE_ERR(want, ...)                                                                       \
  do {                                                                                             \
    int rc_ = parse(v, &o, err, __VA_ARGS__, NULL);                                                \
    CHECKF(rc_ != 0 && strstr(err, want), "expected '%s', got rc %d '%s'", want, rc_, err);        \
  } while (0)

static void test_parse_args(void **state) {
  (void)state;
  int64_t v[3];
  dtl_options o;
  char err[256];
  CHECK(parse(v, &o, err, NULL) == 0);
  CHECK(o.fill == DTL_FILL_RANDOM && o.seed == 1 && o.iters == 1 && o.warmup == 0);
  CHECK(!o.validate && !o.json && !o.stats && !o.verbose && !o.help && o.nload == 0 &&
        o.nsave == 0);
  CHECK(v[0] == 4096 && v[1] == 256 && v[2] == -1);
  CHECK(parse(v, &o, err, "-n", "5", "--chunk", "7", "--gx=3", NULL) == 0);
  CHECK(v[0] == 5 && v[1] == 7 && v[2] == 3);
  CHECK(parse(v, &o, err, "-n=6", "-gx", "2", NULL) == 0 && v[0] == 6 && v[2] == 2);
  CHECK(parse(v, &o, err, "--fill", "ones", "--seed", "42", "--iters", "3", "--warmup", "0",
              "--validate", "--json", "--stats", "--verbose", NULL) == 0);
  CHECK(o.fill == DTL_FILL_ONES && o.seed == 42 && o.iters == 3 && o.warmup == 0);
  CHECK(o.validate && o.json && o.stats && o.verbose && !o.help);
  CHECK(parse(v, &o, err, "--fill=index", "--iters=2", "--warmup=5", NULL) == 0);
  CHECK(o.fill == DTL_FILL_INDEX && o.iters == 2 && o.warmup == 5);
  CHECK(parse(v, &o, err, "--fill", "zeros", NULL) == 0 && o.fill == DTL_FILL_ZEROS);
  CHECK(parse(v, &o, err, "--fill", "random", NULL) == 0 && o.fill == DTL_FILL_RANDOM);
  CHECK(parse(v, &o, err, "--load", "A=a.npy", "--save=B=out/b.npy", "--load=C=c=d.npy", NULL) ==
        0);
  CHECK(o.nload == 2 && o.load_tensor[0] == 0 && !strcmp(o.load_path[0], "a.npy"));
  CHECK(o.load_tensor[1] == 2 && !strcmp(o.load_path[1], "c=d.npy"));
  CHECK(o.nsave == 1 && o.save_tensor[0] == 1 && !strcmp(o.save_path[0], "out/b.npy"));
  CHECK(parse(v, &o, err, "--load", "A=1.npy", "--load", "A=2.npy", NULL) == 0);
  CHECK(o.nload == 1 && !strcmp(o.load_path[0], "2.npy"));
  CHECK(parse(v, &o, err, "--help", NULL) == 0 && o.help);
  CHECK(parse(v, &o, err, "-h", NULL) == 0 && o.help);
  CHECK(parse(v, &o, err, "-n", "3", "--help", "--bogus", NULL) == 0 && o.help);
  { /* a param h takes -h; the help is then --help only */
    static const char *const hn[] = {"n", "h"};
    int64_t hv[2] = {4, 2};
    char *hargv[] = {"prog", "-h", "7", "--h=9", NULL};
    CHECK(dtl_parse_args(3, hargv, 2, hn, NULL, hv, 3, tnames, &o, err, 256) == 0 && !o.help && hv[1] == 7);
    CHECK(dtl_parse_args(4, hargv, 2, hn, NULL, hv, 3, tnames, &o, err, 256) == 0 && !o.help && hv[1] == 9);
    char *hargv2[] = {"prog", "-h", NULL};
    CHECK(dtl_parse_args(2, hargv2, 2, hn, NULL, hv, 3, tnames, &o, err, 256) != 0 && strstr(err, "'-h' needs a value"));
    char *hargv3[] = {"prog", "--help", NULL};
    CHECK(dtl_parse_args(2, hargv3, 2, hn, NULL, hv, 3, tnames, &o, err, 256) == 0 && o.help);
  }
  PARSE_ERR("unknown option '--foo'", "--foo");
  PARSE_ERR("unknown option '-x'", "-x", "1");
  PARSE_ERR("unknown option '--nn'", "--nn=4");
  PARSE_ERR("option '-n' needs a value", "-n");
  PARSE_ERR("option '--iters' needs a value", "--iters");
  PARSE_ERR("invalid value '0' for -n: expected a positive integer", "-n", "0");
  PARSE_ERR("invalid value '-3' for --chunk", "--chunk", "-3");
  PARSE_ERR("invalid value 'abc' for --n", "--n", "abc");
  PARSE_ERR("invalid value '5x' for --gx", "--gx=5x");
  PARSE_ERR("invalid value '' for --gx", "--gx=");
  PARSE_ERR("invalid value '99999999999999999999' for -n", "-n", "99999999999999999999");
  PARSE_ERR("invalid value '0' for --iters: expected an integer >= 1", "--iters", "0");
  PARSE_ERR("invalid value '-1' for --warmup: expected an integer >= 0", "--warmup", "-1");
  PARSE_ERR("invalid value 'x' for --seed", "--seed", "x");
  PARSE_ERR("invalid value 'gauss' for --fill: expected random, ones, zeros or index", "--fill",
            "gauss");
  PARSE_ERR("unknown tensor 'X' in --load X=f.npy (tensors: A, B, C)", "--load", "X=f.npy");
  PARSE_ERR("invalid value 'A' for --save: expected TENSOR=FILE", "--save", "A");
  PARSE_ERR("invalid value 'A=' for --load", "--load=A=");
  PARSE_ERR("option '--validate' takes no value", "--validate=1");
  PARSE_ERR("unexpected argument 'stray'", "stray");
  PARSE_ERR("unexpected argument '--'", "--");
  /* usage */
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  int64_t defs[] = {4096, 256, -1};
  static const bool grid[] = {false, false, true};
  dtl_print_usage(out, "./summa", 3, pnames, NULL, grid, defs, 3, tnames, false);
  fclose(out);
  CHECKF(strstr(text, "usage: mpirun -np P ./summa") && strstr(text, "-n V") &&
             strstr(text, "default 4096") && strstr(text, "-gx V") &&
             strstr(text, "no default (sizes the machine's grid: the rank count gives it)") && !strstr(text, "(required)") &&
             strstr(text, "--load T=FILE") && strstr(text, "tensors: A B C") && !strstr(text, "--density"),
         "%s", text);
  free(text);
  text = NULL; /* a program with sparse tensors lists --density */
  out = open_memstream(&text, &len);
  dtl_print_usage(out, "./spmv", 3, pnames, NULL, NULL, defs, 3, tnames, true); /* gx here sizes no grid */
  fclose(out);
  CHECKF(strstr(text, "--density F") && strstr(text, "--iters N") && strstr(text, "no default (required)") &&
             !strstr(text, "sizes the machine's grid"),
         "%s", text);
  free(text);
  all_ok();
}

static void test_report(void **state) {
  (void)state;
  int64_t dims[] = {g_size, 1};
  dtl_ctx *ctx = make_ctx(2, dims, false);
  if (!ctx) {
    all_ok();
    return;
  }
  const char *names[] = {"n", "chunk"};
  int64_t vals[] = {2048, 256};
  double times[] = {0.3, 0.1, 0.2};
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  dtl_report(ctx, out, "summa", 2, names, NULL, vals, times, 3, 2e9, 1e9, -1, false);
  fclose(out);
  if (g_rank == 0) {
    char want[256];
    snprintf(want, sizeof want,
             "summa: ranks=%d grid=%dx1 n=2048 chunk=256 iters=3 min=0.100000 s "
             "median=0.200000 s 20.00 GFLOP/s 10.00 GB/s\n",
             g_size, g_size);
    CHECKF(!strcmp(text, want), "got '%s'", text);
  } else {
    CHECK(len == 0);
  }
  free(text);
  double t4[] = {4, 1, 3, 2};
  out = open_memstream(&text, &len);
  dtl_report(ctx, out, "x", 0, NULL, NULL, NULL, t4, 4, 0, 0, -1, true);
  fclose(out);
  if (g_rank == 0) {
    char want[256];
    snprintf(want, sizeof want,
             "{\"program\": \"x\", \"ranks\": %d, \"grid\": [%d, 1], \"params\": {}, "
             "\"iters\": 4, \"times_s\": [4, 1, 3, 2], \"min_s\": 1, \"median_s\": 2.5, "
             "\"gflops\": 0, \"gbytes_per_s\": 0}\n",
             g_size, g_size);
    CHECKF(!strcmp(text, want), "got '%s'", text);
  }
  free(text);
  dtl_ctx_destroy(&ctx);
  all_ok();
}

/* ---- leaf kernels ------------------------------------------------------------------------------
 */
/* C (m x n, ldc) = or += op(A) op(B) by dtl_gemm_store or dtl_gemm, and the same in double on
 * Cd from Ad and Bd; a stored block starts as `poison` (never read) */
static void gemm_and_reference(dtl_type t, int ta, int tb, bool store, int64_t m, int64_t n, int64_t k, const void *a,
                               const double *Ad, int64_t lda, const void *b, const double *Bd, int64_t ldb, void *c,
                               double *Cd, int64_t ldc, double poison) {
  if (store) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) Cd[i * ldc + j] = 0, set_el(t, c, i * ldc + j, poison);
    dtl_gemm_store(t, ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
  } else {
    dtl_gemm(t, ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
  }
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++)
      for (int64_t p = 0; p < k; p++)
        Cd[i * ldc + j] += (ta ? Ad[p * lda + i] : Ad[i * lda + p]) * (tb ? Bd[j * ldb + p] : Bd[p * ldb + j]);
}

/* dtl_gemm and dtl_gemm_store on the shapes that run as panels (tall and skinny: row panels;
 * few short rows with a long sum: panels of the sum), on one BLAS thread and shared among 3
 * (each thread's panels on one BLAS thread, the sums' blocks added up), every transpose,
 * leading dimensions above the minimum, against a plain loop in double */
static void test_gemm_panels(void **state) {
  (void)state;
  static const int64_t shapes[][3] = {{700, 20, 30}, {1030, 3, 256}, {513, 256, 1}, {50, 10, 1300}, {128, 64, 513}, {1, 1, 2000}};
  uint64_t s = 7;
  for (int threads = 1; threads <= 3; threads += 2)
  for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++)
    for (int trial = 0; trial < 16; trial++) {
      openblas_set_num_threads(threads);
      dtl_type t = trial % 2 ? DTL_FLOAT : DTL_DOUBLE;
      int ta = (trial / 2) % 2, tb = (trial / 4) % 2, store = (trial / 8) % 2;
      int64_t m = shapes[q][0], n = shapes[q][1], k = shapes[q][2];
      int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
      int64_t na = (ta ? k : m) * lda, nb = (tb ? n : k) * ldb, nc = m * ldc;
      double *Ad = malloc((size_t)na * sizeof *Ad), *Bd = malloc((size_t)nb * sizeof *Bd), *Cd = malloc((size_t)nc * sizeof *Cd);
      size_t es = dtl_type_size(t);
      char *a = malloc((size_t)na * es), *b = malloc((size_t)nb * es), *c = malloc((size_t)nc * es);
      CHECK(Ad && Bd && Cd && a && b && c);
      for (int64_t i = 0; i < na; i++) set_el(t, a, i, Ad[i] = (double)(rnd(&s, 9) - 4) / 4);
      for (int64_t i = 0; i < nb; i++) set_el(t, b, i, Bd[i] = (double)(rnd(&s, 9) - 4) / 4);
      for (int64_t i = 0; i < nc; i++) set_el(t, c, i, Cd[i] = (double)rnd(&s, 5));
      gemm_and_reference(t, ta, tb, store, m, n, k, a, Ad, lda, b, Bd, ldb, c, Cd, ldc, NAN);
      int64_t bad = 0;
      for (int64_t i = 0; i < nc; i++)
        bad += !(fabs(get_el(t, c, i) - Cd[i]) <= (t == DTL_FLOAT ? 1e-3 : 1e-9) * (1 + fabs(Cd[i]))); /* NaN counts */
      CHECKF(bad == 0, "gemm%s %s ta=%d tb=%d %lldx%lldx%lld on %d threads: %lld wrong", store ? "_store" : "",
             dtl_type_name(t), ta, tb, (long long)m, (long long)n, (long long)k, threads, (long long)bad);
      free(Ad), free(Bd), free(Cd), free(a), free(b), free(c);
    }
  openblas_set_num_threads(1);
  all_ok();
}

/* dtl_params_agree (every generated plan_create calls it first): the same params on every rank
 * pass; one rank's different value fails on every rank (no rank left alone in a collective),
 * naming the param and both values */
static void test_params_agree(void **state) {
  (void)state;
  static const char *const names[] = {"n", "chunk", "gx"};
  int64_t v[3] = {12, 4, -1};
  char err[256] = "";
  CHECKF(dtl_params_agree(MPI_COMM_WORLD, 3, v, NULL, names, err, sizeof err) == 0, "equal params: %s", err);
  if (g_rank == g_size - 1) v[1] = 5;
  int rc = dtl_params_agree(MPI_COMM_WORLD, 3, v, NULL, names, err, sizeof err);
  if (g_size == 1)
    CHECKF(rc == 0, "one rank agrees with itself: %s", err);
  else
    CHECKF(rc == 1 && strstr(err, "chunk is 4 on some and 5 on others"), "rc %d, %s", rc, err);
  /* a floating param: compared as a number (-0.0 is 0.0), named as one */
  static const char *const fnames[] = {"alpha"};
  static const bool isf[] = {true};
  double a = g_rank % 2 ? -0.0 : 0.0;
  int64_t fv[1];
  memcpy(fv, &a, sizeof a);
  CHECKF(dtl_params_agree(MPI_COMM_WORLD, 1, fv, isf, fnames, err, sizeof err) == 0, "-0.0 and 0.0: %s", err);
  a = g_rank == g_size - 1 ? 0.5 : 0.25;
  memcpy(fv, &a, sizeof a);
  rc = dtl_params_agree(MPI_COMM_WORLD, 1, fv, isf, fnames, err, sizeof err);
  if (g_size > 1)
    CHECKF(rc == 1 && strstr(err, "alpha is 0.25 on some and 0.5 on others"), "rc %d, %s", rc, err);
  all_ok();
}

/* dtl_gemm and dtl_gemm_store on the shapes that run as six-row tiles in kernels/blas.c (double,
 * no transpose, a sum longer than 48, or of 8 or more for the AVX-512 tiles, and a small B):
 * every remainder of six rows and of eight and sixteen columns, leading dimensions equal to and
 * above the minimum, outputs large, aligned and of whole tiles (non-temporal stores) or not,
 * one BLAS thread and three, the AVX2 tiles and the AVX-512 ones, against a plain loop; the
 * elements beside the output block (its leading dimension's gap) must stay as they were */
static void test_gemm_thin(void **state) {
  (void)state;
  static const int64_t shapes[][3] = {{600, 8, 49},  {601, 13, 64},  {602, 32, 64},  {603, 64, 100},  {604, 5, 130},
                                      {605, 1, 256}, {1000, 37, 64}, {20000, 32, 64}, {20003, 64, 49}, {607, 16, 50},
                                      {608, 17, 64}, {609, 24, 70},  {610, 48, 64},   {20005, 16, 64}, {611, 16, 8},
                                      {612, 20, 30}, {613, 33, 7},   {20007, 32, 16}};
  uint64_t s = 13;
  for (int wide = 0; wide < 2; wide++) /* the AVX2 tiles, then the AVX-512 ones where the CPU has them */
  for (int threads = 1; threads <= 3; threads += 2)
    for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++)
      for (int trial = 0; trial < 4; trial++) {
        setenv("DISTAL_THIN512", wide ? "1" : "0", 1);
        openblas_set_num_threads(threads);
        bool store = trial % 2, pad = trial / 2;
        int64_t m = shapes[q][0], n = shapes[q][1], k = shapes[q][2];
        int64_t lda = k + 3 * pad, ldb = n + pad, ldc = n + 2 * pad;
        size_t nc = (size_t)(m * ldc);
        double *A = malloc((size_t)(m * lda) * sizeof *A), *B = malloc((size_t)(k * ldb) * sizeof *B);
        double *C = aligned_alloc(64, (nc * sizeof *C + 63) / 64 * 64), *R = malloc(nc * sizeof *R);
        CHECK(A && B && C && R);
        for (int64_t i = 0; i < m * lda; i++) A[i] = (double)(rnd(&s, 9) - 4) / 4;
        for (int64_t i = 0; i < k * ldb; i++) B[i] = (double)(rnd(&s, 9) - 4) / 4;
        for (size_t i = 0; i < nc; i++) C[i] = R[i] = (double)rnd(&s, 5);
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < n; j++) {
            double t = store ? 0.0 : R[i * ldc + j];
            for (int64_t p = 0; p < k; p++) t += A[i * lda + p] * B[p * ldb + j];
            R[i * ldc + j] = t;
          }
        (store ? dtl_gemm_store : dtl_gemm)(DTL_DOUBLE, 0, 0, m, n, k, A, lda, B, ldb, C, ldc);
        int64_t bad = 0;
        for (size_t i = 0; i < nc; i++) bad += !(fabs(C[i] - R[i]) <= 1e-12 * (1 + fabs(R[i])));
        CHECKF(bad == 0, "gemm%s %lldx%lldx%lld lda %lld ldc %lld on %d threads%s: %lld wrong", store ? "_store" : "",
               (long long)m, (long long)n, (long long)k, (long long)lda, (long long)ldc, threads,
               wide ? " (AVX-512 tiles where the CPU has them)" : " (AVX2 tiles)", (long long)bad);
        free(A), free(B), free(C), free(R);
      }
  openblas_set_num_threads(1);
  unsetenv("DISTAL_THIN512");
  all_ok();
}

/* dtl_gemv on shapes of every remainder of four rows and four columns and long rows, leading
 * dimensions above the minimum, unit and other strides, and dtl_ttv's contiguous path, against
 * plain loops */
static void test_gemv_rows(void **state) {
  (void)state;
  static const int64_t ms[] = {1, 3, 4, 5, 37, 130}, ns[] = {1, 3, 4, 7, 17, 1029};
  uint64_t s = 11;
  for (size_t a = 0; a < sizeof ms / sizeof *ms; a++)
    for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
      for (int inc = 1; inc <= 2; inc++) {
        int64_t m = ms[a], n = ns[b], lda = n + 3;
        double *A = malloc((size_t)(m * lda) * sizeof *A), *x = malloc((size_t)(n * inc) * sizeof *x);
        double *y = malloc((size_t)(m * inc) * sizeof *y), *r = malloc((size_t)(m * inc) * sizeof *r);
        CHECK(A && x && y && r);
        for (int64_t i = 0; i < m * lda; i++) A[i] = (double)(rnd(&s, 9) - 4) / 4;
        for (int64_t i = 0; i < n * inc; i++) x[i] = (double)(rnd(&s, 9) - 4) / 8;
        for (int64_t i = 0; i < m * inc; i++) y[i] = r[i] = (double)rnd(&s, 5);
        dtl_gemv(DTL_DOUBLE, 0, m, n, A, lda, x, inc, y, inc);
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < n; j++) r[i * inc] += A[i * lda + j] * x[j * inc];
        int64_t bad = 0;
        for (int64_t i = 0; i < m * inc; i++) bad += !(fabs(y[i] - r[i]) <= 1e-12 * (1 + fabs(r[i])));
        CHECKF(bad == 0, "gemv %lldx%lld inc %d: %lld wrong", (long long)m, (long long)n, inc, (long long)bad);
        free(A), free(x), free(y), free(r);
      }
  /* ttv with (i, j) contiguous: four streams of rows (AVX2 where the CPU has it) */
  static const int64_t nks[] = {1, 3, 4, 64, 67};
  for (size_t q = 0; q < sizeof nks / sizeof *nks; q++) {
    int64_t ni = 7, nj = 9, nk = nks[q];
    double *B = malloc((size_t)(ni * nj * nk) * sizeof *B), *c = malloc((size_t)nk * sizeof *c);
    double *A = malloc((size_t)(ni * nj) * sizeof *A), *r = malloc((size_t)(ni * nj) * sizeof *r);
    CHECK(B && c && A && r);
    for (int64_t i = 0; i < ni * nj * nk; i++) B[i] = (double)(rnd(&s, 9) - 4) / 4;
    for (int64_t k = 0; k < nk; k++) c[k] = (double)(rnd(&s, 9) - 4) / 8;
    for (int64_t i = 0; i < ni * nj; i++) A[i] = r[i] = (double)rnd(&s, 5);
    dtl_ttv(DTL_DOUBLE, ni, nj, nk, B, nj * nk, nk, 1, c, 1, A, nj, 1);
    for (int64_t i = 0; i < ni * nj; i++)
      for (int64_t k = 0; k < nk; k++) r[i] += B[i * nk + k] * c[k];
    int64_t bad = 0;
    for (int64_t i = 0; i < ni * nj; i++) bad += !(fabs(A[i] - r[i]) <= 1e-12 * (1 + fabs(r[i])));
    CHECKF(bad == 0, "ttv 7x9x%lld: %lld wrong", (long long)nk, (long long)bad);
    free(B), free(c), free(A), free(r);
  }
  all_ok();
}

static void test_kernels(void **state) {
  (void)state;
  uint64_t s = 99;
  for (int trial = 0; trial < 64; trial++) {
    dtl_type t = (dtl_type)(trial % 4);
    int ta = (trial / 4) % 2, tb = (trial / 8) % 2;
    int64_t m = 1 + rnd(&s, 9), n = 1 + rnd(&s, 9), k = 1 + rnd(&s, 9);
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    int64_t lda = ac + rnd(&s, 3), ldb = bc + rnd(&s, 3), ldc = n + rnd(&s, 3);
    int64_t A[200], B[200], C[200];
    double Ad[200], Bd[200], Cd[200];
    void *a = A, *b = B, *c = C;
    for (int i = 0; i < 200; i++) {
      Ad[i] = (double)(rnd(&s, 9) - 4), Bd[i] = (double)(rnd(&s, 9) - 4),
      Cd[i] = (double)(rnd(&s, 5));
      set_el(t, a, i, Ad[i]), set_el(t, b, i, Bd[i]), set_el(t, c, i, Cd[i]);
    }
    (void)ar, (void)br;
    /* trials 32 on: dtl_gemm_store, C = op(A) op(B), C's old values (NaN) never read */
    gemm_and_reference(t, ta, tb, trial >= 32, m, n, k, a, Ad, lda, b, Bd, ldb, c, Cd, ldc, t < DTL_INT32 ? NAN : 7);
    int64_t bad = 0;
    for (int i = 0; i < 200; i++)
      bad += !(fabs(get_el(t, c, i) - Cd[i]) <= 1e-4); /* a NaN left behind counts */
    CHECKF(bad == 0, "gemm %s ta=%d tb=%d %lldx%lldx%lld: %lld wrong", dtl_type_name(t), ta, tb,
           (long long)m, (long long)n, (long long)k, (long long)bad);
    /* gemv: y(m) += op(A) x with strides */
    int64_t incx = 1 + rnd(&s, 2), incy = 1 + rnd(&s, 2);
    for (int i = 0; i < 200; i++)
      set_el(t, c, i, Cd[i] = (double)rnd(&s, 5));
    dtl_gemv(t, ta, m, k, a, lda, b, incx, c, incy);
    for (int64_t i = 0; i < m; i++)
      for (int64_t p = 0; p < k; p++)
        Cd[i * incy] += (ta ? Ad[p * lda + i] : Ad[i * lda + p]) * Bd[p * incx];
    bad = 0;
    for (int i = 0; i < 200; i++)
      bad += fabs(get_el(t, c, i) - Cd[i]) > 1e-4;
    CHECKF(bad == 0, "gemv %s trans=%d: %lld wrong", dtl_type_name(t), ta, (long long)bad);
    /* dot and axpy */
    int64_t r[1] = {0};
    set_el(t, r, 0, 2);
    double rd = 2;
    dtl_dot(t, n, a, incx, b, incy, r);
    for (int64_t i = 0; i < n; i++)
      rd += Ad[i * incx] * Bd[i * incy];
    CHECKF(fabs(get_el(t, r, 0) - rd) < 1e-4, "dot %s", dtl_type_name(t));
    int64_t al[1];
    set_el(t, al, 0, 3);
    dtl_axpy(t, n, al, a, incx, c, incy);
    for (int64_t i = 0; i < n; i++)
      Cd[i * incy] += 3 * Ad[i * incx];
    bad = 0;
    for (int i = 0; i < 200; i++)
      bad += fabs(get_el(t, c, i) - Cd[i]) > 1e-4;
    CHECKF(bad == 0, "axpy %s: %lld wrong", dtl_type_name(t), (long long)bad);
  }
  /* a larger double gemm against the loop, with a transposed B */
  enum { M = 37, N = 29, K = 41 };
  static double A[M * K], B[N * K], C[M * N], R[M * N];
  for (int i = 0; i < M * K; i++)
    A[i] = sin(i);
  for (int i = 0; i < N * K; i++)
    B[i] = cos(i);
  for (int i = 0; i < M * N; i++)
    C[i] = R[i] = 1;
  dtl_gemm(DTL_DOUBLE, 0, 1, M, N, K, A, K, B, K, C, N);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      for (int p = 0; p < K; p++)
        R[i * N + j] += A[i * K + p] * B[j * K + p];
  CHECK(dtl_max_rel_error(DTL_DOUBLE, C, R, M * N) < 1e-12);
  all_ok();
}

/* A dense block of nd dims stored in a random order of its dims with some padding: the
 * strides, and the number of elements to allocate. */
static int64_t random_layout(uint64_t *s, int nd, const int64_t *n, int64_t *stride) {
  int perm[DTL_MAX_DIMS];
  for (int d = 0; d < nd; d++)
    perm[d] = d;
  if (rnd(s, 3))
    for (int d = nd - 1; d > 0; d--) {
      int j = (int)rnd(s, d + 1), x = perm[d];
      perm[d] = perm[j], perm[j] = x;
    }
  int64_t st = 1;
  for (int q = nd - 1; q >= 0; q--) {
    stride[perm[q]] = st;
    st = st * n[perm[q]] + (rnd(s, 3) == 0 ? rnd(s, 3) : 0);
  }
  return st;
}

static void *random_values(uint64_t *s, dtl_type t, int64_t count, double *copy) {
  void *p = calloc((size_t)count + 1, dtl_type_size(t));
  for (int64_t i = 0; i < count; i++)
    set_el(t, p, i, copy[i] = (double)(rnd(s, 7) - 3));
  return p;
}

/* ttv, ttm, innerprod and mttkrp on blocks of every layout against loops over the
 * definitions (kernels/tensor_kernels.c) */
static void test_tensor_kernels(void **state) {
  (void)state;
  uint64_t s = 123;
  for (int trial = 0; trial < 160; trial++) {
    dtl_type t = (dtl_type)(trial % 4);
    int64_t ni = 1 + rnd(&s, 4), nj = 1 + rnd(&s, 4), nk = 1 + rnd(&s, 5), nl = 1 + rnd(&s, 4);
    int64_t sb[3], sc[3], sa[3], sd[3], n3[3] = {ni, nj, nk};
    int64_t nb = random_layout(&s, 3, n3, sb);
    double *Bd = malloc(sizeof(double) * (size_t)(nb + 1)), *Cd, *Ad, *Dd;
    void *B = random_values(&s, t, nb, Bd), *C, *A, *D;
    int64_t bad = 0, na, nc, ndd;
    const char *what = "";
    switch ((trial / 4) % 4) {
    case 0: { /* ttv: A(i,j) += B(i,j,k) c(k) */
      what = "ttv";
      int64_t n2[2] = {ni, nj};
      nc = 1 + (nk - 1) * (sc[0] = 1 + rnd(&s, 2));
      na = random_layout(&s, 2, n2, sa);
      Cd = malloc(sizeof(double) * (size_t)(nc + 1)),
      Ad = malloc(sizeof(double) * (size_t)(na + 1));
      C = random_values(&s, t, nc, Cd), A = random_values(&s, t, na, Ad);
      dtl_ttv(t, ni, nj, nk, B, sb[0], sb[1], sb[2], C, sc[0], A, sa[0], sa[1]);
      for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++)
          for (int64_t k = 0; k < nk; k++)
            Ad[i * sa[0] + j * sa[1]] += Bd[i * sb[0] + j * sb[1] + k * sb[2]] * Cd[k * sc[0]];
      D = NULL, Dd = NULL;
      break;
    }
    case 1: { /* ttm: A(i,j,l) += B(i,j,k) C(k,l) */
      what = "ttm";
      int64_t n2[2] = {nk, nl}, na3[3] = {ni, nj, nl};
      nc = random_layout(&s, 2, n2, sc);
      na = random_layout(&s, 3, na3, sa);
      Cd = malloc(sizeof(double) * (size_t)(nc + 1)),
      Ad = malloc(sizeof(double) * (size_t)(na + 1));
      C = random_values(&s, t, nc, Cd), A = random_values(&s, t, na, Ad);
      if (trial >= 80) { /* dtl_ttm_store: A = ..., its old values (NaN) never read */
        for (int64_t i = 0; i < ni; i++)
          for (int64_t j = 0; j < nj; j++)
            for (int64_t l = 0; l < nl; l++) {
              int64_t x = i * sa[0] + j * sa[1] + l * sa[2];
              Ad[x] = 0, set_el(t, A, x, t < DTL_INT32 ? NAN : 7);
            }
        dtl_ttm_store(t, ni, nj, nk, nl, B, sb[0], sb[1], sb[2], C, sc[0], sc[1], A, sa[0], sa[1], sa[2]);
      } else {
        dtl_ttm(t, ni, nj, nk, nl, B, sb[0], sb[1], sb[2], C, sc[0], sc[1], A, sa[0], sa[1], sa[2]);
      }
      for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++)
          for (int64_t l = 0; l < nl; l++)
            for (int64_t k = 0; k < nk; k++)
              Ad[i * sa[0] + j * sa[1] + l * sa[2]] +=
                  Bd[i * sb[0] + j * sb[1] + k * sb[2]] * Cd[k * sc[0] + l * sc[1]];
      D = NULL, Dd = NULL;
      break;
    }
    case 2: { /* innerprod: r += B(i,j,k) C(i,j,k) */
      what = "innerprod";
      nc = random_layout(&s, 3, n3, sc);
      na = 1;
      Cd = malloc(sizeof(double) * (size_t)(nc + 1)), Ad = malloc(sizeof(double) * 2);
      C = random_values(&s, t, nc, Cd), A = random_values(&s, t, na, Ad);
      dtl_innerprod(t, ni, nj, nk, B, sb[0], sb[1], sb[2], C, sc[0], sc[1], sc[2], A);
      for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++)
          for (int64_t k = 0; k < nk; k++)
            Ad[0] += Bd[i * sb[0] + j * sb[1] + k * sb[2]] * Cd[i * sc[0] + j * sc[1] + k * sc[2]];
      D = NULL, Dd = NULL;
      break;
    }
    default: { /* mttkrp: A(i,l) += B(i,j,k) C(j,l) D(k,l) */
      what = "mttkrp";
      int64_t ncl[2] = {nj, nl}, ndl[2] = {nk, nl}, nal[2] = {ni, nl};
      nc = random_layout(&s, 2, ncl, sc);
      ndd = random_layout(&s, 2, ndl, sd);
      na = random_layout(&s, 2, nal, sa);
      Cd = malloc(sizeof(double) * (size_t)(nc + 1)),
      Dd = malloc(sizeof(double) * (size_t)(ndd + 1));
      Ad = malloc(sizeof(double) * (size_t)(na + 1));
      C = random_values(&s, t, nc, Cd), D = random_values(&s, t, ndd, Dd);
      A = random_values(&s, t, na, Ad);
      if (trial >= 80) { /* dtl_mttkrp_store */
        for (int64_t i = 0; i < ni; i++)
          for (int64_t l = 0; l < nl; l++)
            Ad[i * sa[0] + l * sa[1]] = 0, set_el(t, A, i * sa[0] + l * sa[1], t < DTL_INT32 ? NAN : 7);
        CHECK(dtl_mttkrp_store(t, ni, nj, nk, nl, B, sb[0], sb[1], sb[2], C, sc[0], sc[1], D, sd[0], sd[1],
                               A, sa[0], sa[1]) == 0);
      } else {
        CHECK(dtl_mttkrp(t, ni, nj, nk, nl, B, sb[0], sb[1], sb[2], C, sc[0], sc[1], D, sd[0], sd[1],
                         A, sa[0], sa[1]) == 0);
      }
      for (int64_t i = 0; i < ni; i++)
        for (int64_t l = 0; l < nl; l++)
          for (int64_t j = 0; j < nj; j++)
            for (int64_t k = 0; k < nk; k++)
              Ad[i * sa[0] + l * sa[1]] += Bd[i * sb[0] + j * sb[1] + k * sb[2]] *
                                           Cd[j * sc[0] + l * sc[1]] * Dd[k * sd[0] + l * sd[1]];
      break;
    }
    }
    for (int64_t i = 0; i < na; i++)
      bad += !(fabs(get_el(t, A, i) - Ad[i]) <= 1e-3); /* a NaN left behind counts */
    CHECKF(bad == 0, "%s %s %lldx%lldx%lldx%lld: %lld wrong", what, dtl_type_name(t), (long long)ni,
           (long long)nj, (long long)nk, (long long)nl, (long long)bad);
    free(B), free(Bd), free(C), free(Cd), free(A), free(Ad), free(D), free(Dd);
  }
  all_ok();
}

/* ---- sparse pieces ---------------------------------------------------------------------------- */
/* The global sparse tensor of the sparse tests: about a third of the elements are stored,
 * with the index value (never zero: 1 + the linear index). */
static double sp_value(dtl_type t, uint64_t seed, int nd, const int64_t *ext, const int64_t *x) {
  int64_t lin = lin_of(nd, ext, x);
  if (mix(seed ^ (uint64_t)lin) % 3)
    return 0;
  return 1 + index_value(t, lin);
}

/* The entries of the global tensor inside box, as coordinates and values. */
static int64_t sp_entries(dtl_type t, uint64_t seed, int nd, const int64_t *ext, const dtl_box *box,
                          int64_t **coords, void **vals) {
  int64_t vol = dtl_box_volume(box), n = 0, x[DTL_MAX_DIMS];
  *coords = malloc((size_t)(vol + 1) * (size_t)(nd + 1) * sizeof **coords);
  *vals = alloc_box(t, box);
  if (vol > 0 && nd > 0) {
    memcpy(x, box->lo, sizeof x);
    do {
      double v = sp_value(t, seed, nd, ext, x);
      if (v != 0) {
        memcpy(*coords + n * nd, x, (size_t)nd * sizeof *x);
        set_el(t, *vals, n++, v);
      }
    } while (box_next(box, x));
  }
  return n;
}

/* Count the elements of a densified piece over box that differ from the global tensor. */
static int64_t sp_mismatches(dtl_type t, uint64_t seed, const void *dense, const dtl_box *box,
                             const int64_t *ext) {
  int64_t bad = 0, i = 0, x[DTL_MAX_DIMS];
  if (dtl_box_empty(box))
    return 0;
  memcpy(x, box->lo, sizeof x);
  do {
    if (get_el(t, dense, i++) != sp_value(t, seed, box->nd, ext, x))
      bad++;
  } while (box_next(box, x));
  return bad;
}

static void random_levels(uint64_t *s, int order, dtl_level *lv) {
  for (int k = 0; k < order; k++)
    lv[k] = rnd(s, 3) ? DTL_LEVEL_COMPRESSED : DTL_LEVEL_DENSE;
}

/* The level structure is well formed: segments increase, coordinates sorted and in range. */
static bool sp_well_formed(const dtl_sparse *sp) {
  int64_t np = 1;
  for (int k = 0; k < sp->order; k++) {
    int64_t ext = sp->box.hi[k] > sp->box.lo[k] ? sp->box.hi[k] - sp->box.lo[k] : 0;
    if (sp->level[k] == DTL_LEVEL_DENSE) {
      np *= ext;
    } else {
      if ((sp->narrow ? (void *)sp->pos[k] : (void *)sp->pos32[k]) != NULL)
        return false; /* one width only */
      if (dtl_sp_pos(sp, k, 0) != 0)
        return false;
      for (int64_t p = 0; p < np; p++) {
        if (dtl_sp_pos(sp, k, p + 1) < dtl_sp_pos(sp, k, p))
          return false;
        for (int64_t q = dtl_sp_pos(sp, k, p); q < dtl_sp_pos(sp, k, p + 1); q++)
          if (dtl_sp_crd(sp, k, q) < 0 || dtl_sp_crd(sp, k, q) >= ext ||
              (q > dtl_sp_pos(sp, k, p) && dtl_sp_crd(sp, k, q) <= dtl_sp_crd(sp, k, q - 1)))
            return false;
      }
      np = dtl_sp_pos(sp, k, np);
    }
    if (sp->npos[k] != np)
      return false;
  }
  return true;
}

static void test_sparse_build(void **state) {
  (void)state;
  uint64_t s = 71;
  for (int round = 0; round < 200; round++) {
    dtl_type t = (dtl_type)rnd(&s, 4);
    int order = 1 + (int)rnd(&s, 4);
    int64_t ext[DTL_MAX_DIMS];
    dtl_level lv[DTL_MAX_DIMS];
    random_extents(&s, order, ext);
    random_levels(&s, order, lv);
    dtl_box box;
    hashed_box(mix(s++), 5, order, ext, &box);
    uint64_t seed = mix(s++);
    int64_t *c = NULL;
    void *v = NULL;
    int64_t n = sp_entries(t, seed, order, ext, &box, &c, &v);
    /* every entry twice, halves of its value, in reverse order: duplicates sum */
    int64_t *c2 = malloc((size_t)(2 * n + 1) * (size_t)order * sizeof *c2);
    void *v2 = calloc((size_t)(2 * n + 1), dtl_type_size(t));
    for (int64_t e = 0; e < n; e++) {
      double x = get_el(t, v, e), h = (t == DTL_INT32 || t == DTL_INT64) ? (double)((int64_t)x / 2) : x / 2;
      memcpy(c2 + (n - 1 - e) * order, c + e * order, (size_t)order * sizeof *c);
      memcpy(c2 + (n + e) * order, c + e * order, (size_t)order * sizeof *c);
      set_el(t, v2, n - 1 - e, h);
      set_el(t, v2, n + e, x - h);
    }
    dtl_sparse sp;
    char err[256];
    int rc = dtl_sparse_from_coo(&sp, t, order, lv, &box, 2 * n, c2, v2, err, sizeof err);
    CHECKF(rc == 0, "from_coo: %s", err);
    CHECK(sp_well_formed(&sp));
    void *dense = alloc_box(t, &box);
    dtl_sparse_densify(&sp, dense);
    CHECKF(sp_mismatches(t, seed, dense, &box, ext) == 0, "round %d: densify", round);
    /* extract a random region: exactly the stored nonzeros inside it, in order */
    dtl_box region;
    hashed_box(mix(s++), 9, order, ext, &region);
    int64_t m = 0, *rc_ = NULL;
    void *rv = NULL;
    CHECK(dtl_sparse_extract(&sp, &region, &m, &rc_, &rv) == 0);
    dtl_box both;
    int64_t want = 0;
    if (dtl_box_intersect(&box, &region, &both)) {
      int64_t *wc = NULL;
      void *wv = NULL;
      want = sp_entries(t, seed, order, ext, &both, &wc, &wv);
      CHECKF(m == want, "round %d: extract gave %lld entries, want %lld", round, (long long)m, (long long)want);
      for (int64_t e = 0; e < m && e < want; e++) {
        CHECK(!memcmp(rc_ + e * order, wc + e * order, (size_t)order * sizeof *wc));
        CHECK(get_el(t, rv, e) == get_el(t, wv, e));
      }
      free(wc), free(wv);
    } else {
      CHECK(m == 0);
    }
    /* and from the dense block again */
    dtl_sparse sd;
    CHECK(dtl_sparse_from_dense(&sd, t, order, lv, &box, dense, err, sizeof err) == 0);
    CHECK(dtl_sparse_nvals(&sd) == dtl_sparse_nvals(&sp));
    void *dense2 = alloc_box(t, &box);
    dtl_sparse_densify(&sd, dense2);
    CHECK(!memcmp(dense, dense2, (size_t)dtl_box_volume(&box) * dtl_type_size(t)));
    /* an entry outside the box is an error with a message */
    if (!dtl_box_empty(&box) && n > 0) {
      c[0] = box.hi[0];
      dtl_sparse bad;
      CHECK(dtl_sparse_from_coo(&bad, t, order, lv, &box, n, c, v, err, sizeof err) != 0);
      CHECK(strstr(err, "outside the block") != NULL);
    }
    dtl_sparse_free(&sp), dtl_sparse_free(&sd);
    free(c), free(v), free(c2), free(v2), free(dense), free(dense2), free(rc_), free(rv);
  }
  all_ok();
}

/* dtl_sparse.banded: the 5-point stencil of a g x g grid and a band are banded at the compressed
 * level, a matrix of random columns is not, nor is a level with one parent (DCSR's outer level)
 * or a dense level; a CSC piece (columns outer) of the stencil is banded too. */
static void test_sparse_banded(void **state) {
  (void)state;
  const int64_t g = 40, n = g * g;
  int64_t *c = malloc((size_t)(5 * n) * 2 * sizeof *c);
  double *v = malloc((size_t)(5 * n) * sizeof *v);
  dtl_box box = {2, {0, 0}, {n, n}};
  for (int kind = 0; kind < 3; kind++) {
    int64_t m = 0;
    uint64_t s = 7;
    for (int64_t r = 0; r < n; r++) {
      int64_t gi = r / g, gj = r % g;
      int64_t cols[5], k = 0;
      if (kind == 0) { /* stencil */
        if (gi > 0) cols[k++] = r - g;
        if (gj > 0) cols[k++] = r - 1;
        cols[k++] = r;
        if (gj < g - 1) cols[k++] = r + 1;
        if (gi < g - 1) cols[k++] = r + g;
      } else if (kind == 1) { /* a band of width 3 */
        for (int64_t d = -1; d <= 1; d++)
          if (r + d >= 0 && r + d < n) cols[k++] = r + d;
      } else { /* random distinct columns */
        for (int64_t q = 0; q < 4; q++) {
          s = mix(s);
          cols[k++] = (int64_t)(s % (uint64_t)(n / 4)) * 4 + q;
        }
      }
      for (int64_t q = 0; q < k; q++) c[2 * m] = r, c[2 * m + 1] = cols[q], v[m++] = 1;
    }
    dtl_level csr[2] = {DTL_LEVEL_DENSE, DTL_LEVEL_COMPRESSED}, dcsr[2] = {DTL_LEVEL_COMPRESSED, DTL_LEVEL_COMPRESSED};
    dtl_sparse sp;
    char err[256];
    CHECKF(dtl_sparse_from_coo(&sp, DTL_DOUBLE, 2, csr, &box, m, c, v, err, sizeof err) == 0, "%s", err);
    CHECKF(sp.banded[1] == (kind < 2), "kind %d: banded %d", kind, (int)sp.banded[1]);
    CHECK(!sp.banded[0]);
    dtl_sparse_free(&sp);
    CHECKF(dtl_sparse_from_coo(&sp, DTL_DOUBLE, 2, dcsr, &box, m, c, v, err, sizeof err) == 0, "%s", err);
    CHECK(!sp.banded[0] && sp.banded[1] == (kind < 2));
    dtl_sparse_free(&sp);
    if (kind == 0) { /* the transpose's rows: the same stencil */
      for (int64_t e = 0; e < m; e++) {
        int64_t x = c[2 * e];
        c[2 * e] = c[2 * e + 1], c[2 * e + 1] = x;
      }
      CHECKF(dtl_sparse_from_coo(&sp, DTL_DOUBLE, 2, csr, &box, m, c, v, err, sizeof err) == 0, "%s", err);
      CHECK(sp.banded[1]);
      dtl_sparse_free(&sp);
    }
  }
  free(c);
  free(v);
}

static void test_sparse_fetch(void **state) {
  (void)state;
  int64_t gs[16][DTL_MAX_DIMS], moved = 0, total = 0;
  uint64_t s = 91;
  for (int nd = 1; nd <= 3; nd++) {
    int ng = grids(nd, gs, nd == 3 ? 5 : 4);
    for (int i = 0; i < ng; i++)
      for (int debug = 0; debug <= 1; debug++) {
        dtl_ctx *ctx = make_ctx(nd, gs[i], debug);
        if (!ctx)
          continue;
        for (int round = 0; round < (debug ? 3 : 10); round++) {
          dtl_type t = (dtl_type)rnd(&s, 4);
          int order = 1 + (int)rnd(&s, 3);
          box_arg arg = {.seed = mix(s++), .order = order, .ndims = nd};
          random_extents(&s, order, arg.ext);
          dtl_level lv[DTL_MAX_DIMS];
          random_levels(&s, order, lv);
          dtl_dist d = random_dist(&s, ctx, order, arg.ext, true);
          uint64_t seed = mix(s++);
          dtl_box own, need;
          bool holder = dtl_dist_block(ctx, &d, ctx->coords, &own);
          own.nd = order;
          if (!holder)
            for (int k = 0; k < order; k++)
              own.lo[k] = own.hi[k] = 0;
          int64_t *c = NULL;
          void *v = NULL;
          int64_t n = holder ? sp_entries(t, seed, order, arg.ext, &own, &c, &v) : 0;
          dtl_sparse mine, got;
          char err[256];
          CHECKF(dtl_sparse_from_coo(&mine, t, order, lv, &own, n, c, v, err, sizeof err) == 0, "%s", err);
          int rc = dtl_sparse_fetch(ctx, &d, &mine, random_need, &arg, &got);
          CHECKF(rc == 0, "sparse fetch: %s", ctx->err);
          random_need(&arg, ctx->coords, &need);
          CHECK(dtl_box_equal(&got.box, &need));
          CHECK(sp_well_formed(&got));
          for (int k = 0; k < order; k++)
            CHECK(got.level[k] == lv[k]);
          void *dense = alloc_box(t, &need);
          dtl_sparse_densify(&got, dense);
          int64_t bad = sp_mismatches(t, seed, dense, &need, arg.ext);
          CHECKF(bad == 0, "sparse fetch round %d (order %d, grid %d dims): %lld wrong", round, order, nd, (long long)bad);
          dtl_sparse_free(&mine), dtl_sparse_free(&got);
          free(c), free(v), free(dense);
        }
        moved += ctx->msgs_recv[DTL_OP_EXCHANGE];
        dtl_ctx_destroy(&ctx);
      }
  }
  MPI_Allreduce(&moved, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  CHECKF(g_size == 1 || total > 5 * g_size, "only %lld messages", (long long)total);
  all_ok();
}

/* Import: every entry of the global tensor is given by one rank (chosen by hash), some as
 * two halves from two ranks; each block (replicas too) must come out whole. */
static void test_sparse_import(void **state) {
  (void)state;
  int64_t gs[16][DTL_MAX_DIMS];
  uint64_t s = 131;
  for (int nd = 1; nd <= 3; nd++) {
    int ng = grids(nd, gs, 3);
    for (int i = 0; i < ng; i++) {
      dtl_ctx *ctx = make_ctx(nd, gs[i], false);
      if (!ctx)
        continue;
      for (int round = 0; round < 6; round++) {
        dtl_type t = rnd(&s, 2) ? DTL_DOUBLE : DTL_INT64; /* halves sum exactly */
        int order = 1 + (int)rnd(&s, 3);
        int64_t ext[DTL_MAX_DIMS];
        random_extents(&s, order, ext);
        dtl_level lv[DTL_MAX_DIMS];
        random_levels(&s, order, lv);
        dtl_dist d = random_dist(&s, ctx, order, ext, true);
        uint64_t seed = mix(s++);
        dtl_box all = {.nd = order}, own;
        for (int k = 0; k < order; k++)
          all.hi[k] = ext[k];
        bool holder = dtl_dist_block(ctx, &d, ctx->coords, &own);
        own.nd = order;
        if (!holder)
          for (int k = 0; k < order; k++)
            own.lo[k] = own.hi[k] = 0;
        int64_t *c = NULL;
        void *v = NULL;
        int64_t n = sp_entries(t, seed, order, ext, &all, &c, &v), mine = 0;
        int64_t *mc = malloc((size_t)(2 * n + 1) * (size_t)order * sizeof *mc);
        void *mv = calloc((size_t)(2 * n + 1), dtl_type_size(t));
        for (int64_t e = 0; e < n; e++) {
          int who = (int)(mix(seed + (uint64_t)e) % (uint64_t)g_size), other = (who + 1) % g_size;
          bool split = e % 3 == 0;
          double x = get_el(t, v, e), h = t == DTL_INT64 ? (double)((int64_t)x / 2) : x / 2;
          if (who == g_rank) {
            memcpy(mc + mine * order, c + e * order, (size_t)order * sizeof *c);
            set_el(t, mv, mine++, split ? h : x);
          }
          if (split && other == g_rank) {
            memcpy(mc + mine * order, c + e * order, (size_t)order * sizeof *c);
            set_el(t, mv, mine++, x - h);
          }
        }
        dtl_sparse got;
        int rc = dtl_sparse_import(ctx, &d, t, lv, &own, mine, mc, mv, &got);
        CHECKF(rc == 0, "import: %s", ctx->err);
        if (!rc) {
          CHECK(sp_well_formed(&got));
          void *dense = alloc_box(t, &own);
          dtl_sparse_densify(&got, dense);
          int64_t bad = sp_mismatches(t, seed, dense, &own, ext);
          CHECKF(bad == 0, "import round %d (order %d, grid %d dims): %lld wrong", round, order, nd, (long long)bad);
          free(dense);
          dtl_sparse_free(&got);
        }
        free(c), free(v), free(mc), free(mv);
      }
      /* an entry outside the tensor fails on every rank */
      int64_t ext[2] = {3, 4}, bad_c[2] = {g_rank == 0 ? 3 : 0, 0};
      double one = 1;
      dtl_dist d = random_dist(&s, ctx, 2, ext, false);
      dtl_box own;
      dtl_dist_block(ctx, &d, ctx->coords, &own);
      own.nd = 2;
      dtl_level lv[2] = {DTL_LEVEL_DENSE, DTL_LEVEL_COMPRESSED};
      dtl_sparse got;
      int rc = dtl_sparse_import(ctx, &d, DTL_DOUBLE, lv, &own, 1, bad_c, &one, &got);
      CHECKF(rc != 0 && strstr(ctx->err, "outside [0, 3)"), "import of a bad entry: rc %d, '%s'", rc, ctx->err);
      dtl_ctx_destroy(&ctx);
    }
  }
  all_ok();
}

/* Sparse results: dtl_sparse_accumulate of random entries equals dtl_accumulate of the same
 * entries as dense boxes (same distributions, boxes and executing masks). */
static void test_sparse_accumulate(void **state) {
  (void)state;
  int64_t gs[16][DTL_MAX_DIMS];
  uint64_t s = 151;
  for (int nd = 1; nd <= 3; nd++) {
    int ng = grids(nd, gs, nd == 3 ? 4 : 3);
    for (int i = 0; i < ng; i++) {
      dtl_ctx *ctx = make_ctx(nd, gs[i], i % 2 == 1);
      if (!ctx)
        continue;
      for (int round = 0; round < 8; round++) {
        dtl_type t = round % 2 ? DTL_INT64 : DTL_DOUBLE;
        int order = 1 + (int)rnd(&s, 3);
        box_arg arg = {.seed = mix(s++), .order = order, .ndims = nd};
        random_extents(&s, order, arg.ext);
        dtl_level lv[DTL_MAX_DIMS];
        random_levels(&s, order, lv);
        dtl_dist d = random_dist(&s, ctx, order, arg.ext, true);
        unsigned mask = (unsigned)rnd(&s, 1 << nd);
        uint64_t seed = mix(s++);
        dtl_box own, prod;
        bool holder = dtl_dist_block(ctx, &d, ctx->coords, &own);
        own.nd = order;
        if (!holder)
          for (int k = 0; k < order; k++)
            own.lo[k] = own.hi[k] = 0;
        /* initial piece: the global sparse tensor's entries in the block */
        int64_t *c = NULL;
        void *v = NULL;
        int64_t n = holder ? sp_entries(t, seed, order, arg.ext, &own, &c, &v) : 0;
        dtl_sparse sp;
        char err[256];
        CHECK(dtl_sparse_from_coo(&sp, t, order, lv, &own, n, c, v, err, sizeof err) == 0);
        void *dense = alloc_box(t, &own);
        dtl_sparse_densify(&sp, dense);
        /* produced: this rank's entries of another sparse tensor inside its box */
        random_need(&arg, ctx->coords, &prod);
        int64_t *pc = NULL;
        void *pv = NULL;
        int64_t pn = sp_entries(t, seed ^ (uint64_t)(ctx->rank + 1) * 0x9E37ull, order, arg.ext, &prod, &pc, &pv);
        dtl_coo q = {.type = t, .order = order};
        for (int64_t e = 0; e < pn; e++) {
          int pushed = t == DTL_DOUBLE ? dtl_coo_push_double(&q, pc + e * order, get_el(t, pv, e))
                                       : dtl_coo_push_int64(&q, pc + e * order, (int64_t)get_el(t, pv, e));
          CHECK(pushed == 0);
        }
        void *pbuf = alloc_box(t, &prod);
        dtl_sparse tmp;
        CHECK(dtl_sparse_from_coo(&tmp, t, order, lv, &prod, pn, pc, pv, err, sizeof err) == 0);
        dtl_sparse_densify(&tmp, pbuf);
        dtl_sparse_free(&tmp);
        int rc = dtl_accumulate(ctx, &d, t, holder ? dense : NULL, &own, mask, random_need, &arg, pbuf);
        CHECKF(rc == 0, "accumulate: %s", ctx->err);
        rc = dtl_sparse_accumulate(ctx, &d, &sp, mask, random_need, &arg, &q);
        CHECKF(rc == 0, "sparse accumulate: %s", ctx->err);
        CHECK(sp_well_formed(&sp));
        void *got = alloc_box(t, &own);
        dtl_sparse_densify(&sp, got);
        int64_t vol = dtl_box_volume(&own), bad = 0;
        for (int64_t e = 0; e < vol && holder; e++)
          if (get_el(t, got, e) != get_el(t, dense, e))
            bad++;
        CHECKF(bad == 0, "sparse accumulate round %d (order %d, mask %u, grid %d dims): %lld differ from dense", round, order,
               mask, nd, (long long)bad);
        dtl_sparse_free(&sp);
        dtl_coo_free(&q);
        free(c), free(v), free(pc), free(pv), free(dense), free(pbuf), free(got);
      }
      dtl_ctx_destroy(&ctx);
    }
  }
  all_ok();
}

/* Fills depend on global coordinates only; .mtx and .tns files are read into every block. */
static void test_sparse_fill_and_read(void **state) {
  (void)state;
  int64_t gs[16][DTL_MAX_DIMS];
  uint64_t s = 113;
  make_dir();
  CHECK(g_dir[0] != '\0');
  for (int nd = 1; nd <= 2; nd++) {
    int ng = grids(nd, gs, 3);
    for (int i = 0; i < ng; i++) {
      dtl_ctx *ctx = make_ctx(nd, gs[i], false);
      if (!ctx)
        continue;
      for (int round = 0; round < 8; round++) {
        dtl_type t = (dtl_type)rnd(&s, 4);
        int order = 1 + (int)rnd(&s, 3);
        int64_t ext[DTL_MAX_DIMS];
        for (int k = 0; k < order; k++)
          ext[k] = 1 + rnd(&s, 9);
        dtl_level lv[DTL_MAX_DIMS];
        random_levels(&s, order, lv);
        dtl_dist d = random_dist(&s, ctx, order, ext, false);
        dtl_box own, all = {.nd = order};
        for (int k = 0; k < order; k++)
          all.hi[k] = ext[k];
        bool holder = dtl_dist_block(ctx, &d, ctx->coords, &own);
        own.nd = order;
        double density = round % 3 == 0 ? 1.0 : 0.3;
        dtl_sparse f, whole;
        char err[256];
        dtl_fill_kind kind = round % 4 == 3 ? DTL_FILL_ONES : DTL_FILL_RANDOM;
        CHECK(dtl_sparse_fill(&f, t, kind, 5, 2, density, order, lv, ext, &own, err, sizeof err) == 0);
        CHECK(dtl_sparse_fill(&whole, t, kind, 5, 2, density, order, lv, ext, &all, err, sizeof err) == 0);
        /* this block of the whole tensor equals the block filled on its own */
        if (holder && !dtl_box_empty(&own)) {
          int64_t n1 = 0, n2 = 0, *c1 = NULL, *c2 = NULL;
          void *v1 = NULL, *v2 = NULL;
          CHECK(dtl_sparse_extract(&f, &own, &n1, &c1, &v1) == 0);
          CHECK(dtl_sparse_extract(&whole, &own, &n2, &c2, &v2) == 0);
          CHECKF(n1 == n2, "fill: block has %lld entries, the whole tensor %lld there", (long long)n1, (long long)n2);
          for (int64_t e = 0; e < n1 && e < n2; e++) {
            CHECK(!memcmp(c1 + e * order, c2 + e * order, (size_t)order * sizeof *c1));
            CHECK(get_el(t, v1, e) == get_el(t, v2, e));
          }
          free(c1), free(c2), free(v1), free(v2);
        }
        if (density == 1.0 && order >= 1) /* every element of every row */
          CHECK(dtl_sparse_nvals(&whole) == dtl_box_volume(&all) || lv[order - 1] == DTL_LEVEL_DENSE);
        /* write the whole tensor as .tns (and .mtx for matrices) on rank 0, read it back */
        char tns[400], mtx[400];
        snprintf(tns, sizeof tns, "%s/t%d.tns", g_dir, round);
        snprintf(mtx, sizeof mtx, "%s/t%d.mtx", g_dir, round);
        int64_t n = 0, *c = NULL;
        void *v = NULL;
        CHECK(dtl_sparse_extract(&whole, &all, &n, &c, &v) == 0);
        if (g_rank == 0) {
          FILE *ft = fopen(tns, "w"), *fm = order == 2 ? fopen(mtx, "w") : NULL;
          CHECK(ft != NULL);
          if (fm)
            fprintf(fm, "%%%%MatrixMarket matrix coordinate %s general\n%% a comment\n%lld %lld %lld\n",
                    t == DTL_INT32 || t == DTL_INT64 ? "integer" : "real", (long long)ext[0], (long long)ext[1], (long long)n);
          fprintf(ft, "# a comment\n");
          for (int64_t e = 0; e < n && ft; e++) {
            for (int k = 0; k < order; k++)
              fprintf(ft, "%lld ", (long long)c[e * order + k] + 1);
            fprintf(ft, "%.17g\n", get_el(t, v, e));
            if (fm)
              fprintf(fm, "%lld %lld %.17g\n", (long long)c[e * 2] + 1, (long long)c[e * 2 + 1] + 1, get_el(t, v, e));
          }
          if (ft)
            fclose(ft);
          if (fm)
            fclose(fm);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        for (int file = 0; file < (order == 2 ? 2 : 1); file++) {
          dtl_sparse r;
          int rc = dtl_sparse_read(ctx, file ? mtx : tns, &d, t, lv, &own, &r);
          CHECKF(rc == 0, "read %s: %s", file ? mtx : tns, ctx->err);
          if (rc)
            continue;
          int64_t n1 = 0, n2 = 0, *c1 = NULL, *c2 = NULL;
          void *v1 = NULL, *v2 = NULL;
          CHECK(dtl_sparse_extract(&r, &own, &n1, &c1, &v1) == 0);
          CHECK(dtl_sparse_extract(&whole, &own, &n2, &c2, &v2) == 0);
          CHECKF(n1 == (holder ? n2 : 0), "read %s: %lld entries, want %lld", file ? mtx : tns, (long long)n1, (long long)n2);
          for (int64_t e = 0; e < n1 && e < n2; e++)
            CHECK(get_el(t, v1, e) == get_el(t, v2, e));
          free(c1), free(c2), free(v1), free(v2);
          dtl_sparse_free(&r);
        }
        dtl_sparse_free(&f), dtl_sparse_free(&whole);
        free(c), free(v);
      }
      /* bad files: every rank fails with the same message, FILE:LINE: error: MESSAGE, and
       * nothing is loaded (a 2 x 2 double matrix, or int64 for the files named i*) */
#define MM "%%MatrixMarket matrix coordinate real general\n"
      static const struct {
        const char *name, *text;
        int line;
        const char *want;
      } bad[] = {
          {"array.mtx", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", 1, "only 'matrix coordinate'"},
          {"few.mtx", MM "2 2 2\n1 1 1.5\n", 2, "announces 2 entries, the file has 1"},
          {"many.mtx", MM "2 2 1\n1 1 1.5\n% c\n2 2 1\n", 5, "more entries than the 1"},
          {"range.mtx", MM "2 2 1\n3 1 1.5\n", 3, "row: 3 is out of range 1..2"},
          {"zero.mtx", MM "2 2 1\n1 0 1.5\n", 3, "column: 0 is out of range 1..2"},
          {"float.mtx", MM "2 2 1\n1.5 1 1.5\n", 3, "'1.5' is not an integer"},
          {"exp.mtx", MM "2 2 1\n1e0 1 1.5\n", 3, "'1e0' is not an integer"},
          {"hex.mtx", MM "2 2 1\n1 0x1 1.5\n", 3, "'0x1' is not an integer"},
          {"signs.mtx", MM "2 2 1\n+-1 1 1.5\n", 3, "'+-1' is not an integer"},
          {"trail.mtx", MM "2 2 1\n12abc 1 1.5\n", 3, "'12abc' is not an integer"},
          {"huge.mtx", MM "2 2 1\n99999999999999999999 1 1.5\n", 3, "is not an integer"},
          {"fewf.mtx", MM "2 2 1\n1 1\n", 3, "too few fields"},
          {"extra.mtx", MM "2 2 1\n1 1 1.5 2\n", 3, "too many fields"},
          {"value.mtx", MM "2 2 1\n1 1 1.5.2\n", 3, "value '1.5.2' is not a number"},
          {"overflow.mtx", MM "2 2 1\n1 1 1e999\n", 3, "out of range for double"},
          {"pattern.mtx", "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 1\n", 3, "too many fields"},
          {"integer.mtx", "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.0\n", 3, "not an integer"},
          {"sym.mtx", "%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1.0\n", 3, "above the diagonal"},
          {"skew.mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n1 1 1.0\n", 3, "on the diagonal"},
          {"nosize.mtx", MM "%\n", 2, "before its size line"},
          {"sizef.mtx", MM "2 2\n", 2, "size line has 2 fields"},
          {"sizeneg.mtx", MM "2 2 -1\n", 2, "not a nonnegative integer"},
          {"shape.mtx", MM "3 2 1\n1 1 1.5\n", 2, "the matrix is 3 x 2"},
          {"banner.mtx", "%%MatrixMarket matrix coordinate real\n2 2 0\n", 1, "banner has 4 fields"},
          {"empty.mtx", "", 1, "empty file"},
          {"nul.mtx", MM "2 2 1\n", 3, "NUL byte"}, /* line 3 is written below: "1 1\0 1.5" */
          {"hermitian.mtx", "%%MatrixMarket matrix coordinate real hermitian\n2 2 0\n", 1, "symmetry 'hermitian'"},
          {"ireal.mtx", MM "2 2 1\n1 1 1\n", 1, "integer expected"},
          {"i64.mtx", "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 9223372036854775808\n", 3,
           "not an integer"},
          {"coord.tns", "1 1 1.0\n1 x 2.0\n", 2, "coordinate 2: 'x' is not an integer"},
          {"order.tns", "# c\n1 1\n", 2, "an entry of order 1"},
          {"fields.tns", "1 1 1.0\n\n2 2 1.0 3\n", 3, "too many fields: 4, expected 3"},
          {"fewf.tns", "1 1 1.0\n2 2\n", 2, "too few fields: 2, expected 3"},
          {"value.tns", "1 1 1.0\n2 2 0x\n", 2, "value '0x' is not a number"},
          {"range.tns", "1 3 1.0\n", 1, "coordinate 2: 3 is out of range 1..2"},
      };
#undef MM
      const int nbad = (int)(sizeof bad / sizeof bad[0]);
      for (int b = 0; b < nbad; b++) {
        char path[400];
        snprintf(path, sizeof path, "%s/%s", g_dir, bad[b].name);
        if (g_rank == 0) {
          FILE *f = fopen(path, "w");
          if (f) {
            fputs(bad[b].text, f);
            if (!strcmp(bad[b].name, "nul.mtx"))
              fwrite("1 1\0 1.5\n", 1, 9, f);
            fclose(f);
          }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        int64_t ext[2] = {2, 2};
        dtl_dist d = random_dist(&s, ctx, 2, ext, false);
        dtl_box own;
        dtl_dist_block(ctx, &d, ctx->coords, &own);
        own.nd = 2;
        dtl_level lv[2] = {DTL_LEVEL_DENSE, DTL_LEVEL_COMPRESSED};
        dtl_sparse r;
        memset(&r, 0x5a, sizeof r);
        bool ints = bad[b].name[0] == 'i';
        int rc = dtl_sparse_read(ctx, path, &d, ints ? DTL_INT64 : DTL_DOUBLE, lv, &own, &r);
        char where[450];
        snprintf(where, sizeof where, "%s:%d: error: ", path, bad[b].line);
        CHECKF(rc != 0 && strstr(ctx->err, where) && strstr(ctx->err, bad[b].want), "%s: rc %d, message '%s'",
               bad[b].name, rc, ctx->err);
        CHECKF(rc == 0 || (r.vals == NULL && r.pos[1] == NULL && r.crd[1] == NULL && r.pos32[1] == NULL && r.crd32[1] == NULL), "%s: a partial tensor", bad[b].name);
      }
      dtl_ctx_destroy(&ctx);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0)
    remove_dir(g_dir);
  all_ok();
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  /* rank 0 speaks for everyone: all_ok() brings the other ranks' failures to it */
  if (g_rank != 0) {
    if (!freopen("/dev/null", "w", stdout))
      return 1;
    if (!freopen("/dev/null", "w", stderr))
      return 1;
  } else { /* one stream, in order */
    setvbuf(stdout, NULL, _IONBF, 0);
    dup2(STDOUT_FILENO, STDERR_FILENO);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_types, reset, report_time),
      cmocka_unit_test_setup_teardown(test_integers, reset, report_time),
      cmocka_unit_test_setup_teardown(test_halo_skip, reset, report_time),
      cmocka_unit_test_setup_teardown(test_boxes, reset, report_time),
      cmocka_unit_test_setup_teardown(test_copy_box, reset, report_time),
      cmocka_unit_test_setup_teardown(test_max_rel_error, reset, report_time),
      cmocka_unit_test_setup_teardown(test_solve_grid, reset, report_time),
      cmocka_unit_test_setup_teardown(test_group_in_node, reset, report_time),
      cmocka_unit_test_setup_teardown(test_ctx, reset, report_time),
      cmocka_unit_test_setup_teardown(test_any_error, reset, report_time),
      cmocka_unit_test_setup_teardown(test_dist, reset, report_time),
      cmocka_unit_test_setup_teardown(test_fetch, reset, report_time),
      cmocka_unit_test_setup_teardown(test_fetch_named, reset, report_time),
      cmocka_unit_test_setup_teardown(test_accumulate, reset, report_time),
      cmocka_unit_test_setup_teardown(test_bcast_fetch, reset, report_time),
      cmocka_unit_test_setup_teardown(test_redistribute, reset, report_time),
      cmocka_unit_test_setup_teardown(test_redistribute_pairs, reset, report_time),
      cmocka_unit_test_setup_teardown(test_shift, reset, report_time),
      cmocka_unit_test_setup_teardown(test_reduce, reset, report_time),
      cmocka_unit_test_setup_teardown(test_bcast_buffer, reset, report_time),
      cmocka_unit_test_setup_teardown(test_gather_and_fill, reset, report_time),
      cmocka_unit_test_setup_teardown(test_npy_roundtrip, reset, report_time),
      cmocka_unit_test_setup_teardown(test_npy_formats_and_errors, reset, report_time),
      cmocka_unit_test_setup_teardown(test_debug_mode, reset, report_time),
      cmocka_unit_test_setup_teardown(test_stats, reset, report_time),
      cmocka_unit_test_setup_teardown(test_parse_args, reset, report_time),
      cmocka_unit_test_setup_teardown(test_report, reset, report_time),
      cmocka_unit_test_setup_teardown(test_kernels, reset, report_time),
      cmocka_unit_test_setup_teardown(test_gemm_panels, reset, report_time),
      cmocka_unit_test_setup_teardown(test_gemm_thin, reset, report_time),
      cmocka_unit_test_setup_teardown(test_params_agree, reset, report_time),
      cmocka_unit_test_setup_teardown(test_gemv_rows, reset, report_time),
      cmocka_unit_test_setup_teardown(test_tensor_kernels, reset, report_time),
      cmocka_unit_test_setup_teardown(test_sparse_build, reset, report_time),
      cmocka_unit_test_setup_teardown(test_sparse_banded, reset, report_time),
      cmocka_unit_test_setup_teardown(test_sparse_fetch, reset, report_time),
      cmocka_unit_test_setup_teardown(test_sparse_import, reset, report_time),
      cmocka_unit_test_setup_teardown(test_sparse_accumulate, reset, report_time),
      cmocka_unit_test_setup_teardown(test_sparse_fill_and_read, reset, report_time),
  };
  char name[64];
  snprintf(name, sizeof name, "runtime at %d rank%s", g_size, g_size == 1 ? "" : "s");
  int failed = _cmocka_run_group_tests(name, tests, sizeof tests / sizeof tests[0], NULL, NULL);
  MPI_Finalize();
  return failed ? 1 : 0;
}
