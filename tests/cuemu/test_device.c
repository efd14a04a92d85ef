/* test_device.c -- libdistal_cuda against the host runtime: every dtl_cu_* function (fetch,
 * accumulate, broadcast and its split phase, shift, reduce, copy_box, the leaf kernels) is
 * run next to its host twin of distal/runtime.h on the same data, on 1-, 2- and 3-D grids of
 * the ranks, with debug checks on and off, and must give the same bytes, the same statistics
 * and the same debug messages.  Built against the host emulation of CUDA, NCCL and cuBLAS
 * (tests/cuemu), so it runs without a GPU; on a GPU build it is the same program. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <distal/cuda.h>

static int g_rank, g_size, g_fail;
#define CHECKF(c, ...)                                                                            \
  do {                                                                                            \
    if (!(c)) {                                                                                   \
      if (g_fail++ < 30) {                                                                        \
        fprintf(stderr, "rank %d line %d: ", g_rank, __LINE__);                                   \
        fprintf(stderr, __VA_ARGS__);                                                             \
        fprintf(stderr, "\n");                                                                    \
      }                                                                                           \
    }                                                                                             \
  } while (0)

#include "../random_data.h"

/* device buffer with a host copy */
static void *dev_of(dtl_ctx *ctx, const void *h, size_t bytes) {
  void *d = dtl_cu_malloc(bytes);
  CHECKF(d != NULL, "cu_malloc");
  if (bytes) CHECKF(dtl_cu_to_device(ctx, d, h, bytes) == 0, "to_device: %s", ctx->err);
  return d;
}
static void back(dtl_ctx *ctx, void *h, const void *d, size_t bytes) {
  CHECKF(dtl_cu_to_host(ctx, h, d, bytes) == 0, "to_host: %s", ctx->err);
}

static void save_stats(dtl_ctx *ctx, int64_t *s) {
  for (int op = 0; op < DTL_NOPS; op++) {
    s[4 * op] = ctx->bytes_sent[op], s[4 * op + 1] = ctx->bytes_recv[op];
    s[4 * op + 2] = ctx->msgs_sent[op], s[4 * op + 3] = ctx->msgs_recv[op];
  }
}
static int same_stats(dtl_ctx *ctx, const int64_t *s) {
  int64_t t[4 * DTL_NOPS];
  save_stats(ctx, t);
  return !memcmp(s, t, sizeof t);
}


static dtl_ctx *make_ctx(int nd, const int64_t *dims, bool debug, bool allmasks) {
  dtl_ctx *ctx = NULL;
  char err[256];
  if (dtl_ctx_create(MPI_COMM_WORLD, nd, dims, debug, &ctx, err, sizeof err)) {
    CHECKF(0, "ctx: %s", err);
    return NULL;
  }
  unsigned masks[1 << DTL_MAX_DIMS];
  int n = 0;
  if (allmasks)
    masks[n++] = (1u << nd) - 1u;
  int rc = dtl_cu_attach(ctx, n, masks);
  CHECKF(rc == 0, "attach: %s", ctx->err);
  return ctx;
}


static void fill(dtl_type t, void *p, int64_t n, uint64_t seed) {
  for (int64_t i = 0; i < n; i++) set_el(t, p, i, (double)(mix(seed + (uint64_t)i) % 19) - 9);
}

/* ---- fetch and accumulate ---- */
static void exchange_rounds(dtl_ctx *ctx, uint64_t *s, int rounds) {
  for (int round = 0; round < rounds; round++) {
    dtl_type t = (dtl_type)rnd(s, 4);
    int order = (int)rnd(s, 4);
    box_arg arg = {.seed = mix((*s)++), .order = order, .ndims = ctx->ndims};
    random_extents(s, order, arg.ext);
    dtl_dist d = random_dist(s, ctx, order, arg.ext, true);
    unsigned mask = (unsigned)rnd(s, 1 << ctx->ndims);
    dtl_box own, need;
    bool holder = dtl_dist_block(ctx, &d, ctx->coords, &own);
    size_t es = dtl_type_size(t);
    int64_t no = dtl_box_volume(&own);
    random_need(&arg, ctx->coords, &need);
    int64_t nn = dtl_box_volume(&need);
    void *local = alloc_box(t, &own), *hbuf = alloc_box(t, &need), *dbufh = alloc_box(t, &need);
    fill(t, local, no, 100 + (uint64_t)ctx->rank);
    fill(t, hbuf, nn, 7);
    void *dlocal = dev_of(ctx, local, (size_t)(no + 1) * es), *dbuf = dev_of(ctx, hbuf, (size_t)(nn + 1) * es);
    int64_t st[4 * DTL_NOPS];
    dtl_stats_reset(ctx);
    int rc = dtl_fetch(ctx, &d, t, holder ? local : NULL, &own, random_need, &arg, hbuf);
    CHECKF(rc == 0, "host fetch %s", ctx->err);
    save_stats(ctx, st);
    dtl_stats_reset(ctx);
    rc = dtl_cu_fetch(ctx, &d, t, holder ? dlocal : NULL, &own, random_need, &arg, dbuf);
    CHECKF(rc == 0, "cu fetch %s", ctx->err);
    CHECKF(same_stats(ctx, st), "fetch stats differ");
    back(ctx, dbufh, dbuf, (size_t)nn * es);
    CHECKF(!memcmp(dbufh, hbuf, (size_t)nn * es), "fetch data differs round %d", round);
    /* accumulate: buf (over need as prod) into local */
    void *hloc2 = alloc_box(t, &own), *dloch = alloc_box(t, &own);
    memcpy(hloc2, local, (size_t)no * es);
    fill(t, hbuf, nn, 1000 + (uint64_t)ctx->rank);
    CHECKF(dtl_cu_to_device(ctx, dbuf, hbuf, (size_t)nn * es) == 0, "to_dev");
    dtl_stats_reset(ctx);
    rc = dtl_accumulate(ctx, &d, t, holder ? hloc2 : NULL, &own, mask, random_need, &arg, hbuf);
    CHECKF(rc == 0, "host acc %s", ctx->err);
    save_stats(ctx, st);
    dtl_stats_reset(ctx);
    rc = dtl_cu_accumulate(ctx, &d, t, holder ? dlocal : NULL, &own, mask, random_need, &arg, dbuf);
    CHECKF(rc == 0, "cu acc %s", ctx->err);
    CHECKF(same_stats(ctx, st), "acc stats differ");
    back(ctx, dloch, dlocal, (size_t)no * es);
    CHECKF(!memcmp(dloch, hloc2, (size_t)no * es), "accumulate data differs round %d (%s)", round,
           dtl_type_name(t));
    dtl_cu_free(dlocal), dtl_cu_free(dbuf);
    free(local), free(hbuf), free(dbufh), free(hloc2), free(dloch);
  }
}

/* ---- broadcast ---- */
static bool group_need(const dtl_ctx *ctx, const dtl_dist *d, uint64_t seed, unsigned mask,
                       dtl_box *need) {
  int64_t key[DTL_MAX_DIMS];
  for (int g = 0; g < ctx->ndims; g++) key[g] = (mask & (1u << g)) ? -1 : ctx->coords[g];
  hashed_box(seed, coords_key(ctx->ndims, key), d->order, d->extent, need);
  for (int g = 0; g < ctx->ndims && !d->replicated_everywhere; g++) {
    if (mask & (1u << g)) continue;
    if (d->kind[g] == DTL_DIM_FIXED && ctx->coords[g] != d->fixed[g]) return false;
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

static void bcast_rounds(dtl_ctx *ctx, uint64_t *s, int rounds) {
  for (int round = 0; round < rounds; round++) {
    dtl_type t = (dtl_type)rnd(s, 4);
    int order = 1 + (int)rnd(s, 3);
    int64_t ext[DTL_MAX_DIMS];
    random_extents(s, order, ext);
    dtl_dist d = random_dist(s, ctx, order, ext, true);
    uint64_t seed = mix((*s)++);
    unsigned mask = (unsigned)rnd(s, 1 << ctx->ndims);
    int split = (int)rnd(s, 2);
    dtl_box own, need;
    bool holder = dtl_dist_block(ctx, &d, ctx->coords, &own);
    size_t es = dtl_type_size(t);
    int64_t no = dtl_box_volume(&own);
    void *local = alloc_box(t, &own);
    /* replicas must agree: fill from global coordinates (index fill) */
    if (holder) dtl_fill(t, DTL_FILL_INDEX, 0, 0, order, ext, &own, local);
    void *dlocal = dev_of(ctx, local, (size_t)(no + 1) * es);
    if (group_need(ctx, &d, seed, mask, &need)) {
      int64_t nn = dtl_box_volume(&need);
      void *hbuf = alloc_box(t, &need), *got = alloc_box(t, &need);
      fill(t, hbuf, nn, 5);
      void *dbuf = dev_of(ctx, hbuf, (size_t)(nn + 1) * es);
      int64_t st[4 * DTL_NOPS];
      dtl_stats_reset(ctx);
      int rc = dtl_bcast_fetch(ctx, mask, &d, t, local, &own, &need, hbuf);
      CHECKF(rc == 0, "host bcast %s", ctx->err);
      save_stats(ctx, st);
      dtl_stats_reset(ctx);
      if (split) {
        dtl_cu_request *q = NULL;
        rc = dtl_cu_bcast_fetch_begin(ctx, mask, &d, t, dlocal, &own, &need, dbuf, &q);
        CHECKF(rc == 0, "cu bcast begin %s", ctx->err);
        /* the local block may be overwritten right after begin */
        if (no > 0) dtl_cu_zero(ctx, t, dlocal, no);
        rc = dtl_cu_wait(ctx, &q);
        CHECKF(rc == 0 && q == NULL, "cu wait %s", ctx->err);
      } else {
        rc = dtl_cu_bcast_fetch(ctx, mask, &d, t, dlocal, &own, &need, dbuf);
        CHECKF(rc == 0, "cu bcast %s", ctx->err);
      }
      CHECKF(same_stats(ctx, st), "bcast stats differ");
      back(ctx, got, dbuf, (size_t)nn * es);
      CHECKF(!memcmp(got, hbuf, (size_t)nn * es), "bcast data differs round %d mask %u", round, mask);
      dtl_cu_free(dbuf);
      free(hbuf), free(got);
    }
    dtl_cu_free(dlocal);
    free(local);
  }
}

/* ---- shift ---- */
static void shift_tests(dtl_ctx *ctx) {
  for (int dim = 0; dim < ctx->ndims; dim++) {
    for (int split = 0; split < 2; split++) {
      int64_t c[DTL_MAX_DIMS];
      memcpy(c, ctx->coords, sizeof c);
      c[dim] = dtl_mod(c[dim] + 1, ctx->dims[dim]);
      int64_t ns = 3 + ctx->coords[dim], nr = 3 + c[dim];
      if (split && ctx->dims[dim] == 1) nr = ns;
      double sb[16], rb[16], got[16];
      for (int k = 0; k < 16; k++) sb[k] = ctx->rank * 100 + k, rb[k] = -1;
      void *dsb = dev_of(ctx, sb, sizeof sb), *drb = dev_of(ctx, rb, sizeof rb);
      int64_t st[4 * DTL_NOPS];
      dtl_stats_reset(ctx);
      CHECKF(dtl_shift(ctx, dim, DTL_DOUBLE, sb, ns, rb, nr) == 0, "%s", ctx->err);
      save_stats(ctx, st);
      dtl_stats_reset(ctx);
      if (split) {
        dtl_cu_request *q;
        CHECKF(dtl_cu_shift_begin(ctx, dim, DTL_DOUBLE, dsb, ns, drb, nr, &q) == 0, "%s", ctx->err);
        CHECKF(dtl_cu_wait(ctx, &q) == 0, "%s", ctx->err);
      } else {
        CHECKF(dtl_cu_shift(ctx, dim, DTL_DOUBLE, dsb, ns, drb, nr) == 0, "%s", ctx->err);
      }
      CHECKF(same_stats(ctx, st), "shift stats");
      back(ctx, got, drb, sizeof got);
      CHECKF(!memcmp(got, rb, sizeof got), "shift data dim %d split %d", dim, split);
      /* in place */
      int32_t ib[4], jb[4];
      for (int k = 0; k < 4; k++) ib[k] = ctx->rank * 10 + k;
      void *dib = dev_of(ctx, ib, sizeof ib);
      CHECKF(dtl_shift(ctx, dim, DTL_INT32, ib, 4, ib, 4) == 0, "%s", ctx->err);
      if (split) {
        dtl_cu_request *q;
        CHECKF(dtl_cu_shift_begin(ctx, dim, DTL_INT32, dib, 4, dib, 4, &q) == 0, "%s", ctx->err);
        CHECKF(dtl_cu_wait(ctx, &q) == 0, "%s", ctx->err);
      } else {
        CHECKF(dtl_cu_shift(ctx, dim, DTL_INT32, dib, 4, dib, 4) == 0, "%s", ctx->err);
      }
      back(ctx, jb, dib, sizeof jb);
      CHECKF(!memcmp(ib, jb, sizeof ib), "in-place shift dim %d", dim);
      dtl_cu_free(dsb), dtl_cu_free(drb), dtl_cu_free(dib);
    }
  }
  CHECKF(dtl_cu_shift(ctx, ctx->ndims, DTL_DOUBLE, NULL, 0, NULL, 0) != 0, "bad dim");
}

/* ---- reduce ---- */
static void reduce_tests(dtl_ctx *ctx, uint64_t *s) {
  for (unsigned mask = 0; mask < (1u << ctx->ndims); mask++)
    for (int t = 0; t < 4; t++)
      for (int all = 0; all < 2; all++) {
        int64_t hb[8], gb[8];
        for (int k = 0; k < 7; k++) set_el((dtl_type)t, hb, k, ctx->rank + k);
        void *db = dev_of(ctx, hb, sizeof hb);
        int64_t root[DTL_MAX_DIMS];
        for (int g = 0; g < ctx->ndims; g++) root[g] = rnd(s, 2 * ctx->dims[g]) - 1;
        int64_t st[4 * DTL_NOPS];
        dtl_stats_reset(ctx);
        CHECKF(dtl_reduce(ctx, mask, all ? NULL : root, (dtl_type)t, hb, 7) == 0, "%s", ctx->err);
        save_stats(ctx, st);
        dtl_stats_reset(ctx);
        CHECKF(dtl_cu_reduce(ctx, mask, all ? NULL : root, (dtl_type)t, db, 7) == 0, "%s", ctx->err);
        CHECKF(same_stats(ctx, st), "reduce stats");
        back(ctx, gb, db, sizeof gb);
        CHECKF(!memcmp(gb, hb, 7 * dtl_type_size((dtl_type)t)), "reduce mask %u t %d all %d", mask,
               t, all);
        dtl_cu_free(db);
      }
}

/* ---- kernels (rank-local) ---- */
static double tol(dtl_type t) { return t == DTL_FLOAT ? 1e-4 : t == DTL_DOUBLE ? 1e-10 : 0; }
static int64_t diffs(dtl_type t, const void *a, const void *b, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = get_el(t, a, i), y = get_el(t, b, i);
    if (fabs(x - y) > tol(t) * fmax(1, fabs(y))) bad++;
  }
  return bad;
}

#define N 4096
static void kernel_tests(dtl_ctx *ctx) {
  uint64_t s = 4242;
  static char A[N * 8], B[N * 8], C[N * 8], D[N * 8], R[N * 8];
  for (int trial = 0; trial < 400; trial++) {
    dtl_type t = (dtl_type)(trial % 4);
    size_t es = dtl_type_size(t);
    fill(t, A, N, (uint64_t)trial * 4 + 1), fill(t, B, N, (uint64_t)trial * 4 + 2);
    fill(t, C, N, (uint64_t)trial * 4 + 3), fill(t, D, N, (uint64_t)trial * 4 + 4);
    void *dA = dev_of(ctx, A, N * es), *dB = dev_of(ctx, B, N * es), *dC = dev_of(ctx, C, N * es);
    void *dD = dev_of(ctx, D, N * es);
    int kind = (trial / 4) % 8;
    char what[128];
    if (kind == 0) {
      int ta = (int)rnd(&s, 2), tb = (int)rnd(&s, 2);
      int64_t m = rnd(&s, 12), n = rnd(&s, 12), k = rnd(&s, 12);
      if (trial % 16 == 0) m = 1, n = 1 + rnd(&s, 4);
      int64_t ac = ta ? m : k, bc = tb ? k : n;
      int64_t lda = ac + rnd(&s, 3), ldb = bc + rnd(&s, 3), ldc = n + rnd(&s, 3);
      if (m == 1 && rnd(&s, 2)) ldc = 0;             /* unused ld of one row */
      if (trial % 24 == 8 && m > 1) ldc = n > 1 ? n - 1 : 0; /* aliased rows: atomics */
      if (trial % 24 == 9) lda = 0, m = ta ? m : 1, k = ta ? 1 : k; /* one-row A */
      snprintf(what, sizeof what, "gemm %s %d%d m%lld n%lld k%lld ld %lld %lld %lld", dtl_type_name(t), ta, tb,
               (long long)m, (long long)n, (long long)k, (long long)lda, (long long)ldb, (long long)ldc);
      dtl_gemm(t, ta, tb, m, n, k, A, lda, B, ldb, C, ldc);
      CHECKF(dtl_cu_gemm(ctx, t, ta, tb, m, n, k, dA, lda, dB, ldb, dC, ldc) == 0, "%s: %s", what, ctx->err);
    } else if (kind == 1) {
      int tr = (int)rnd(&s, 2);
      int64_t m = rnd(&s, 12), n = rnd(&s, 12), lda = (tr ? m : n) + rnd(&s, 3);
      int64_t incx = rnd(&s, 5) - 2, incy = rnd(&s, 5) - 2;
      if (incx == 0) incx = 1;
      snprintf(what, sizeof what, "gemv %s tr%d m%lld n%lld incx %lld incy %lld", dtl_type_name(t), tr,
               (long long)m, (long long)n, (long long)incx, (long long)incy);
      dtl_gemv(t, tr, m, n, A, lda, B, incx, C, incy);
      CHECKF(dtl_cu_gemv(ctx, t, tr, m, n, dA, lda, dB, incx, dC, incy) == 0, "%s: %s", what, ctx->err);
    } else if (kind == 2) {
      int64_t n = rnd(&s, 1000), incx = rnd(&s, 3) + 1, incy = rnd(&s, 5) - 2;
      if (trial % 3 == 0) n = rnd(&s, 3);
      snprintf(what, sizeof what, "dot %s n%lld", dtl_type_name(t), (long long)n);
      dtl_dot(t, n, A, incx, B, incy, C);
      CHECKF(dtl_cu_dot(ctx, t, n, dA, incx, dB, incy, dC) == 0, "%s: %s", what, ctx->err);
    } else if (kind == 3) {
      int64_t n = rnd(&s, 1000), incx = rnd(&s, 3) + 1, incy = rnd(&s, 5) - 2;
      char al[8];
      set_el(t, al, 0, 3);
      snprintf(what, sizeof what, "axpy %s n%lld incy %lld", dtl_type_name(t), (long long)n, (long long)incy);
      if (incy == 0) n = dtl_min(n, 20);
      dtl_axpy(t, n, al, A, incx, C, incy);
      CHECKF(dtl_cu_axpy(ctx, t, n, al, dA, incx, dC, incy) == 0, "%s: %s", what, ctx->err);
    } else if (kind == 4 || kind == 5 || kind == 6 || kind == 7) {
      int64_t ni = 1 + rnd(&s, 5), nj = 1 + rnd(&s, 5), nk = 1 + rnd(&s, 5), nl = 1 + rnd(&s, 5);
      if (rnd(&s, 10) == 0) nk = 0;
      /* B(i,j,k) contiguous in some order, or padded */
      int perm = (int)rnd(&s, 3);
      int64_t pad = rnd(&s, 2);
      int64_t sBi, sBj, sBk;
      if (perm == 0) sBk = 1, sBj = nk + pad, sBi = nj * (nk + pad);
      else if (perm == 1) sBj = 1, sBk = nj + pad, sBi = nk * (nj + pad);
      else sBi = 1, sBj = ni + pad, sBk = nj * (ni + pad);
      if (kind == 4) {
        int64_t sc = 1 + rnd(&s, 2), sAj = 1 + rnd(&s, 2) * 0, sAi = nj * sAj + rnd(&s, 2);
        if (rnd(&s, 8) == 0) sAi = 0; /* aliasing */
        snprintf(what, sizeof what, "ttv %s", dtl_type_name(t));
        dtl_ttv(t, ni, nj, nk, B, sBi, sBj, sBk, D, sc, C, sAi, sAj);
        CHECKF(dtl_cu_ttv(ctx, t, ni, nj, nk, dB, sBi, sBj, sBk, dD, sc, dC, sAi, sAj) == 0, "%s", ctx->err);
      } else if (kind == 5) {
        int64_t sCk = nl + rnd(&s, 2), sCl = 1, sAl = 1, sAj = nl + rnd(&s, 2), sAi = nj * sAj;
        if (rnd(&s, 3) == 0) sCl = nk + 1, sCk = 1;
        snprintf(what, sizeof what, "ttm %s", dtl_type_name(t));
        dtl_ttm(t, ni, nj, nk, nl, B, sBi, sBj, sBk, D, sCk, sCl, C, sAi, sAj, sAl);
        CHECKF(dtl_cu_ttm(ctx, t, ni, nj, nk, nl, dB, sBi, sBj, sBk, dD, sCk, sCl, dC, sAi, sAj, sAl) == 0, "%s",
               ctx->err);
      } else if (kind == 6) {
        snprintf(what, sizeof what, "innerprod %s", dtl_type_name(t));
        dtl_innerprod(t, ni, nj, nk, B, sBi, sBj, sBk, D, sBi, sBj, sBk, C);
        CHECKF(dtl_cu_innerprod(ctx, t, ni, nj, nk, dB, sBi, sBj, sBk, dD, sBi, sBj, sBk, dC) == 0, "%s",
               ctx->err);
      } else {
        int64_t sCj = nl, sCl = 1, sDk = 1, sDl = nk + 1, sAl = 1, sAi = nl + rnd(&s, 2);
        if (rnd(&s, 4) == 0) sAl = ni + 1, sAi = 1;
        snprintf(what, sizeof what, "mttkrp %s perm %d", dtl_type_name(t), perm);
        CHECKF(dtl_mttkrp(t, ni, nj, nk, nl, B, sBi, sBj, sBk, A, sCj, sCl, D, sDk, sDl, C, sAi, sAl) == 0, "host");
        CHECKF(dtl_cu_mttkrp(ctx, t, ni, nj, nk, nl, dB, sBi, sBj, sBk, dA, sCj, sCl, dD, sDk, sDl, dC, sAi,
                             sAl) == 0,
               "%s", ctx->err);
      }
    }
    back(ctx, R, dC, N * es);
    int64_t bad = diffs(t, R, C, N);
    CHECKF(bad == 0, "trial %d %s: %lld differ", trial, what, (long long)bad);
    dtl_cu_free(dA), dtl_cu_free(dB), dtl_cu_free(dC), dtl_cu_free(dD);
  }
  /* copy_box */
  for (int trial = 0; trial < 300; trial++) {
    dtl_type t = (dtl_type)(trial % 4);
    int nd = (trial / 4) % 5;
    bool acc = (trial / 20) % 2;
    size_t es = dtl_type_size(t);
    dtl_box src = {.nd = nd}, dst = {.nd = nd}, reg = {.nd = nd};
    for (int d = 0; d < nd; d++) {
      reg.lo[d] = rnd(&s, 5) - 2;
      reg.hi[d] = reg.lo[d] + rnd(&s, 4) + (trial % 7 == 0 ? 0 : 1);
      src.lo[d] = reg.lo[d] - (rnd(&s, 3) ? 0 : rnd(&s, 3));
      src.hi[d] = reg.hi[d] + (rnd(&s, 3) ? 0 : rnd(&s, 3));
      dst.lo[d] = reg.lo[d] - (rnd(&s, 2) ? 0 : rnd(&s, 3));
      dst.hi[d] = reg.hi[d] + (rnd(&s, 2) ? 0 : rnd(&s, 3));
    }
    int64_t ns = dtl_box_volume(&src), ndd = dtl_box_volume(&dst);
    fill(t, A, ns, (uint64_t)trial), fill(t, C, ndd, (uint64_t)trial + 99);
    void *dA = dev_of(ctx, A, (size_t)(ns + 1) * es), *dC = dev_of(ctx, C, (size_t)(ndd + 1) * es);
    dtl_copy_box(t, A, &src, C, &dst, &reg, acc);
    CHECKF(dtl_cu_copy_box(ctx, t, dA, &src, dC, &dst, &reg, acc) == 0, "%s", ctx->err);
    back(ctx, R, dC, (size_t)ndd * es);
    CHECKF(!memcmp(R, C, (size_t)ndd * es), "copy_box trial %d", trial);
    dtl_cu_free(dA), dtl_cu_free(dC);
  }
}

static void lying_need(const void *arg, const int64_t *coords, dtl_box *box) {
  const box_arg *a = arg;
  box->nd = 1;
  box->lo[0] = 0;
  box->hi[0] = (coords[0] == 0 && g_rank != 0) ? dtl_block_hi(a->ext[0], g_size, 0) : a->ext[0];
  if (coords[0] != 0) box->hi[0] = 0;
}
static void full_need(const void *arg, const int64_t *coords, dtl_box *box) {
  const box_arg *a = arg;
  (void)coords;
  box->nd = a->order;
  for (int k = 0; k < a->order; k++) box->lo[k] = 0, box->hi[k] = a->ext[k];
}

static void debug_tests(void) {
  int64_t dims[] = {g_size};
  dtl_ctx *ctx = make_ctx(1, dims, true, true);
  dtl_dist d;
  memset(&d, 0, sizeof d);
  d.order = 1, d.ngrid = 1, d.extent[0] = 4 * g_size, d.kind[0] = DTL_DIM_PART, d.tdim[0] = 0;
  dtl_box own, all = {1, {0}, {4 * g_size}};
  dtl_dist_block(ctx, &d, ctx->coords, &own);
  double *local = calloc(64, 8), *buf = calloc(64, 8);
  dtl_fill(DTL_DOUBLE, DTL_FILL_INDEX, 0, 0, 1, d.extent, &own, local);
  void *dl = dev_of(ctx, local, 64 * 8), *db = dev_of(ctx, buf, 64 * 8);
  box_arg arg = {.order = 1, .ndims = 1, .ext = {4 * g_size}};
  char herr[512];
  int rc, hrc;
#define BOTH(hcall, dcall)                                                                          \
  hrc = (hcall);                                                                                  \
  snprintf(herr, sizeof herr, "%s", ctx->err);                                                    \
  ctx->err[0] = 0;                                                                                \
  rc = (dcall);                                                                                   \
  CHECKF((rc != 0) == (hrc != 0) && (!rc || !strcmp(herr, ctx->err)), "host %d '%s' dev %d '%s'", \
         hrc, herr, rc, ctx->err);                                                                \
  if (g_rank == 0) printf("debug: host %d dev %d: %s\n", hrc, rc, ctx->err);
  BOTH(dtl_fetch(ctx, &d, DTL_DOUBLE, local, &own, full_need, &arg, buf),
       dtl_cu_fetch(ctx, &d, DTL_DOUBLE, dl, &own, full_need, &arg, db));
  if (g_size > 1) {
    BOTH(dtl_fetch(ctx, &d, DTL_DOUBLE, local, &own, lying_need, &arg, buf),
         dtl_cu_fetch(ctx, &d, DTL_DOUBLE, dl, &own, lying_need, &arg, db));
    BOTH(dtl_accumulate(ctx, &d, DTL_DOUBLE, local, &own, 1u, lying_need, &arg, buf),
         dtl_cu_accumulate(ctx, &d, DTL_DOUBLE, dl, &own, 1u, lying_need, &arg, db));
    dtl_box need = {1, {0}, {ctx->rank == 0 ? 2 : 3}};
    BOTH(dtl_bcast_fetch(ctx, 1u, &d, DTL_DOUBLE, local, &own, &need, buf),
         dtl_cu_bcast_fetch(ctx, 1u, &d, DTL_DOUBLE, dl, &own, &need, db));
    dtl_box wrong = own;
    wrong.hi[0] += 1;
    BOTH(dtl_fetch(ctx, &d, DTL_DOUBLE, local, &wrong, full_need, &arg, buf),
         dtl_cu_fetch(ctx, &d, DTL_DOUBLE, dl, &wrong, full_need, &arg, db));
    /* shift counts that disagree: device debug mode only */
    rc = dtl_cu_shift(ctx, 0, DTL_DOUBLE, dl, 2, db, 3);
    CHECKF(rc != 0 && strstr(ctx->err, "debug: shift"), "shift mismatch: %d %s", rc, ctx->err);
    if (g_rank == 0) printf("debug: %s\n", ctx->err);
  }
  BOTH(dtl_fetch(ctx, &d, DTL_DOUBLE, local, &own, full_need, &arg, buf),
       dtl_cu_fetch(ctx, &d, DTL_DOUBLE, dl, &own, full_need, &arg, db));
  double got[64];
  back(ctx, got, db, 64 * 8);
  CHECKF(!memcmp(got, buf, 8 * (size_t)(4 * g_size)), "debug ctx fetch after errors");
  (void)all;
  dtl_cu_free(dl), dtl_cu_free(db);
  free(local), free(buf);
  dtl_ctx_destroy(&ctx);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  char err[512];
  if (dtl_cuda_select_device(MPI_COMM_WORLD, true, stdout, err, sizeof err)) {
    fprintf(stderr, "select: %s\n", err);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int64_t gs[16][DTL_MAX_DIMS];
  uint64_t s = 11;
  for (int nd = 1; nd <= 3; nd++) {
    int n = grids(nd, gs, nd == 3 ? 5 : 4);
    for (int i = 0; i < n; i++)
      for (int debug = 0; debug <= 1; debug++) {
        dtl_ctx *ctx = make_ctx(nd, gs[i], debug, true);
        if (!ctx) continue;
        exchange_rounds(ctx, &s, debug ? 4 : 12);
        bcast_rounds(ctx, &s, debug ? 6 : 16);
        shift_tests(ctx);
        reduce_tests(ctx, &s);
        if (nd == 1 && i == 0 && !debug) kernel_tests(ctx);
        dtl_ctx_destroy(&ctx);
      }
  }
  debug_tests();
  /* a context without masks: broadcasts and reductions over several ranks fail cleanly */
  if (g_size > 1) {
    int64_t dims[1] = {g_size};
    dtl_ctx *ctx = make_ctx(1, dims, false, false);
    double x[2] = {1, 2};
    void *dx = dev_of(ctx, x, sizeof x);
    int rc = dtl_cu_reduce(ctx, 1, NULL, DTL_DOUBLE, dx, 2);
    CHECKF(rc != 0 && strstr(ctx->err, "no NCCL communicator"), "reduce without mask: %d %s", rc, ctx->err);
    if (g_rank == 0) printf("message: %s\n", ctx->err);
    dtl_dist d;
    memset(&d, 0, sizeof d);
    d.order = 1, d.ngrid = 1, d.extent[0] = 8, d.kind[0] = DTL_DIM_PART, d.tdim[0] = 0;
    dtl_box own, need = {1, {0}, {8}};
    dtl_dist_block(ctx, &d, ctx->coords, &own);
    void *dl = dtl_cu_malloc(64), *db = dtl_cu_malloc(64);
    rc = dtl_cu_bcast_fetch(ctx, 1, &d, DTL_DOUBLE, dl, &own, &need, db);
    CHECKF(rc != 0 && strstr(ctx->err, "no NCCL communicator"), "bcast without mask: %d %s", rc, ctx->err);
    if (g_rank == 0) printf("message: %s\n", ctx->err);
    dtl_cu_free(dx), dtl_cu_free(dl), dtl_cu_free(db);
    dtl_ctx_destroy(&ctx);
    /* not attached at all */
    dtl_ctx_create(MPI_COMM_WORLD, 1, dims, false, &ctx, err, sizeof err);
    rc = dtl_cu_reduce(ctx, 1, NULL, DTL_DOUBLE, NULL, 2);
    CHECKF(rc != 0, "unattached");
    if (g_rank == 0) printf("message: %s\n", ctx->err);
    dtl_ctx_destroy(&ctx);
  }
  int total = 0;
  MPI_Allreduce(&g_fail, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("%s: %d failures on %d ranks\n", total ? "FAIL" : "PASS", total, g_size);
  MPI_Finalize();
  return total != 0;
}
