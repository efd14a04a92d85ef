/* sparse.c -- sparse tensor pieces (distal/runtime.h, "sparse tensors"): level storage built
 * from coordinates, extraction of the entries of a box, the point-to-point fetch of the
 * boxes a statement needs, deterministic fills and Matrix Market / FROSTT / .npy input. */
#include "comm_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <strings.h>
#include <unistd.h>

enum { TAG_SPARSE = 0x4460 };

void dtl_sparse_free(dtl_sparse *s) {
  if (!s)
    return;
  if (s->borrowed) {
    memset(s, 0, sizeof *s);
    return;
  }
  for (int k = 0; k < DTL_MAX_DIMS; k++) {
    free(s->pos[k]);
    free(s->crd[k]);
    free(s->pos32[k]);
    free(s->crd32[k]);
    s->pos[k] = s->crd[k] = NULL;
    s->pos32[k] = s->crd32[k] = NULL;
  }
  s->narrow = false;
  free(s->vals);
  s->vals = NULL;
}

int64_t dtl_sparse_nvals(const dtl_sparse *s) {
  return s->order ? s->npos[s->order - 1] : 1;
}

/* ---- building from coordinates -------------------------------------------------------------- */
/* 64-bit indices everywhere when DISTAL_INDEX_BITS=64 (read once). */
static bool wide_only(void) {
  static int v = -1;
  if (v < 0) {
    const char *e = getenv("DISTAL_INDEX_BITS");
    v = e && strcmp(e, "64") == 0;
  }
  return v;
}

/* A piece whose compressed levels' counts and extents fit in int32_t keeps its index arrays
 * in 32 bits (12 bytes per stored double instead of 16: what a sparse product streams).
 * Positions at a compressed level run to its count (npos), coordinates below its extent.
 * Returns nonzero when out of memory (the piece is unchanged). */
static int narrow_piece(dtl_sparse *s, const int64_t *ext) {
  if (wide_only())
    return 0;
  for (int k = 0; k < s->order; k++)
    if (s->level[k] == DTL_LEVEL_COMPRESSED && (s->npos[k] > INT32_MAX || ext[k] > INT32_MAX))
      return 0;
  int32_t *p32[DTL_MAX_DIMS] = {0}, *c32[DTL_MAX_DIMS] = {0};
  int64_t parents = 1;
  for (int k = 0; k < s->order; k++) {
    if (s->level[k] == DTL_LEVEL_COMPRESSED) {
      int64_t n = s->npos[k];
      p32[k] = dtl_halloc((size_t)(parents + 1) * sizeof *p32[k]);
      c32[k] = dtl_halloc((size_t)(n > 0 ? n : 1) * sizeof *c32[k]);
      if (!p32[k] || !c32[k]) {
        for (int j = 0; j <= k; j++)
          free(p32[j]), free(c32[j]);
        return 1;
      }
      for (int64_t p = 0; p <= parents; p++)
        p32[k][p] = (int32_t)s->pos[k][p];
      for (int64_t q = 0; q < n; q++)
        c32[k][q] = (int32_t)s->crd[k][q];
    }
    parents = s->npos[k];
  }
  for (int k = 0; k < s->order; k++) {
    free(s->pos[k]);
    free(s->crd[k]);
    s->pos[k] = s->crd[k] = NULL;
    s->pos32[k] = p32[k], s->crd32[k] = c32[k];
  }
  s->narrow = true;
  return 0;
}

/* dtl_sparse.banded (runtime.h): per compressed level, whether the stored coordinates of
 * consecutive parents run alongside one another, from a sample of parent pairs. */
static void find_banded(dtl_sparse *s) {
  int64_t parents = 1;
  for (int k = 0; k < s->order; k++) {
    s->banded[k] = false;
    if (s->level[k] == DTL_LEVEL_COMPRESSED && parents >= 2) {
      int64_t step = parents / 1024 > 1 ? parents / 1024 : 1, near = 0, all = 0;
      for (int64_t p = 1; p < parents; p += step) {
        int64_t a = dtl_sp_pos(s, k, p - 1), b = dtl_sp_pos(s, k, p), c = dtl_sp_pos(s, k, p + 1);
        int64_t m = b - a < c - b ? b - a : c - b;
        for (int64_t i = 0; i < m && i < 8; i++) {
          int64_t d = dtl_sp_crd(s, k, b + i) - dtl_sp_crd(s, k, a + i);
          all++, near += d >= -8 && d <= 8;
        }
      }
      s->banded[k] = all > 0 && 2 * near >= all;
    }
    parents = s->npos[k];
  }
}

typedef struct {
  int order;
  const int64_t *c;
} sort_ctx;
static sort_ctx g_sort; /* qsort has no argument pointer; set just before each sort */

static int cmp_entry(const void *a, const void *b) {
  const int64_t *x = g_sort.c + *(const int64_t *)a * g_sort.order;
  const int64_t *y = g_sort.c + *(const int64_t *)b * g_sort.order;
  for (int k = 0; k < g_sort.order; k++)
    if (x[k] != y[k])
      return x[k] < y[k] ? -1 : 1;
  /* equal coordinates keep their input order, so duplicates sum in a fixed order */
  int64_t ia = *(const int64_t *)a, ib = *(const int64_t *)b;
  return ia < ib ? -1 : ia > ib;
}

/* perm = 0..n-1 ordered by coordinates (row-major), equal coordinates by index: a counting
 * sort on the first coordinate, then each run sorted on the rest. */
static void sort_entries(const int64_t *coords, int order, const dtl_box *box, const int64_t *ext,
                         int64_t n, int64_t *perm) {
  g_sort.order = order;
  g_sort.c = coords;
  int64_t *start = NULL;
  if (order > 0 && ext[0] > 0 && ext[0] <= 4 * n + 1024)
    start = calloc((size_t)ext[0] + 1, sizeof *start);
  if (!start) {
    for (int64_t e = 0; e < n; e++)
      perm[e] = e;
    qsort(perm, (size_t)n, sizeof *perm, cmp_entry);
    return;
  }
  for (int64_t e = 0; e < n; e++)
    start[coords[e * order] - box->lo[0] + 1]++;
  for (int64_t r = 0; r < ext[0]; r++)
    start[r + 1] += start[r];
  for (int64_t e = 0; e < n; e++) /* increasing e: stable */
    perm[start[coords[e * order] - box->lo[0]]++] = e;
  /* start[r] is now the end of run r */
  if (order > 1)
    for (int64_t r = 0, b = 0; r < ext[0]; b = start[r], r++)
      if (start[r] - b > 1)
        qsort(perm + b, (size_t)(start[r] - b), sizeof *perm, cmp_entry);
  free(start);
}

/* Duplicate entries add up; integers wrap modulo 2^32 or 2^64 (two's complement) instead of
 * overflowing, which C leaves undefined for signed types. */
static void add_value(dtl_type t, void *vals, int64_t at, const void *src, int64_t from) {
  switch (t) {
  case DTL_DOUBLE: ((double *)vals)[at] += ((const double *)src)[from]; break;
  case DTL_FLOAT: ((float *)vals)[at] += ((const float *)src)[from]; break;
  case DTL_INT32:
    ((int32_t *)vals)[at] = (int32_t)((uint32_t)((int32_t *)vals)[at] + (uint32_t)((const int32_t *)src)[from]);
    break;
  case DTL_INT64:
    ((int64_t *)vals)[at] = (int64_t)((uint64_t)((int64_t *)vals)[at] + (uint64_t)((const int64_t *)src)[from]);
    break;
  }
}

int dtl_sparse_from_coo(dtl_sparse *s, dtl_type t, int order, const dtl_level *level,
                        const dtl_box *box, int64_t n, const int64_t *coords, const void *vals,
                        char *err, size_t errlen) {
  memset(s, 0, sizeof *s);
  s->type = t;
  s->order = order;
  s->box = *box;
  s->box.nd = order;
  if (order < 1 || order > DTL_MAX_DIMS) {
    snprintf(err, errlen, "sparse tensor of order %d (1..%d supported)", order, DTL_MAX_DIMS);
    return 1;
  }
  if (n < 0) {
    snprintf(err, errlen, "entry count %lld is negative", (long long)n);
    return 1;
  }
  int64_t ext[DTL_MAX_DIMS];
  for (int k = 0; k < order; k++) {
    s->level[k] = level[k];
    ext[k] = box->hi[k] > box->lo[k] ? box->hi[k] - box->lo[k] : 0;
  }
  for (int64_t e = 0; e < n; e++)
    for (int k = 0; k < order; k++) {
      int64_t c = coords[e * order + k];
      if (c < box->lo[k] || c >= box->hi[k]) {
        char b[200];
        dtl_format_box(b, sizeof b, box);
        snprintf(err, errlen, "entry %lld: coordinate %lld of dimension %d lies outside the block %s",
                 (long long)e, (long long)c, k, b);
        return 1;
      }
    }
  const size_t es = dtl_type_size(t);
  int64_t *perm = malloc((size_t)(n > 0 ? n : 1) * sizeof *perm);
  int64_t *uniq = malloc((size_t)(n > 0 ? n : 1) * sizeof *uniq); /* sorted entry -> unique entry */
  int64_t *par = malloc((size_t)(n > 0 ? n : 1) * sizeof *par);
  int64_t *first = NULL;
  if (!perm || !uniq || !par)
    goto oom;
  sort_entries(coords, order, box, ext, n, perm);
  /* unique coordinates: first[u] is the sorted index of unique entry u's first occurrence */
  int64_t u = 0;
  for (int64_t e = 0; e < n; e++) {
    if (e == 0 || memcmp(coords + perm[e - 1] * order, coords + perm[e] * order, (size_t)order * sizeof *coords))
      u++;
    uniq[e] = u - 1;
  }
  first = malloc((size_t)(u > 0 ? u : 1) * sizeof *first);
  if (!first)
    goto oom;
  for (int64_t e = n - 1; e >= 0; e--)
    first[uniq[e]] = e;
  /* level by level: each unique entry's position at the level */
  int64_t np = 1;
  for (int64_t e = 0; e < u; e++)
    par[e] = 0;
  for (int k = 0; k < order; k++) {
    if (level[k] == DTL_LEVEL_DENSE) {
      if (ext[k] > 0 && np > INT64_MAX / ext[k])
        goto oom;
      for (int64_t e = 0; e < u; e++)
        par[e] = par[e] * ext[k] + (coords[perm[first[e]] * order + k] - box->lo[k]);
      np *= ext[k];
    } else {
      int64_t cnt = 0;
      for (int64_t e = 0; e < u; e++)
        if (!(e > 0 && par[e] == par[e - 1] &&
              coords[perm[first[e]] * order + k] == coords[perm[first[e - 1]] * order + k]))
          cnt++;
      int64_t *pos = dtl_zalloc((size_t)np + 1, sizeof *pos);
      int64_t *crd = dtl_halloc((size_t)(cnt > 0 ? cnt : 1) * sizeof *crd);
      if (!pos || !crd) {
        free(pos);
        free(crd);
        goto oom;
      }
      int64_t q = -1, prev_par = -1;
      for (int64_t e = 0; e < u; e++) {
        int64_t c = coords[perm[first[e]] * order + k] - box->lo[k];
        if (!(q >= 0 && par[e] == prev_par && crd[q] == c)) {
          crd[++q] = c;
          pos[par[e] + 1]++;
        }
        prev_par = par[e];
        par[e] = q;
      }
      for (int64_t p = 0; p < np; p++)
        pos[p + 1] += pos[p];
      s->pos[k] = pos;
      s->crd[k] = crd;
      np = cnt;
    }
    s->npos[k] = np;
  }
  s->vals = dtl_zalloc((size_t)(np > 0 ? np : 1), es); /* large: on huge pages (dtl_halloc) */
  if (!s->vals)
    goto oom;
  /* every occurrence adds to its position, in input order within equal coordinates */
  for (int64_t e = 0; e < n; e++)
    add_value(t, s->vals, par[uniq[e]], vals, perm[e]);
  if (narrow_piece(s, ext))
    goto oom;
  find_banded(s);
  static uint64_t serials;
  s->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
  free(perm);
  free(uniq);
  free(par);
  free(first);
  return 0;
oom:
  free(perm);
  free(uniq);
  free(par);
  free(first);
  dtl_sparse_free(s);
  snprintf(err, errlen, "out of memory for a sparse block of %lld entries", (long long)n);
  return 1;
}

/* ---- walking the stored entries ------------------------------------------------------------- */
typedef struct {
  const dtl_sparse *s;
  const dtl_box *region; /* global coordinates */
  int64_t c[DTL_MAX_DIMS];
  void (*visit)(void *acc, const int64_t *coords, const char *val);
  void *acc;
} walk_ctx;

static bool is_zero(dtl_type t, const char *v) {
  switch (t) {
  case DTL_DOUBLE: return *(const double *)v == 0;
  case DTL_FLOAT: return *(const float *)v == 0;
  case DTL_INT32: return *(const int32_t *)v == 0;
  case DTL_INT64: return *(const int64_t *)v == 0;
  }
  return false;
}

static void walk(walk_ctx *w, int k, int64_t p) {
  const dtl_sparse *s = w->s;
  int64_t lo = dtl_max(w->region->lo[k], s->box.lo[k]) - s->box.lo[k];
  int64_t hi = dtl_min(w->region->hi[k], s->box.hi[k]) - s->box.lo[k];
  if (lo >= hi)
    return;
  if (s->level[k] == DTL_LEVEL_DENSE) {
    int64_t ext = s->box.hi[k] - s->box.lo[k];
    for (int64_t c = lo; c < hi; c++) {
      w->c[k] = c + s->box.lo[k];
      int64_t q = p * ext + c;
      if (k + 1 < s->order)
        walk(w, k + 1, q);
      else {
        const char *v = (const char *)s->vals + q * (int64_t)dtl_type_size(s->type);
        if (!is_zero(s->type, v))
          w->visit(w->acc, w->c, v);
      }
    }
    return;
  }
  int64_t end = dtl_sp_pos(s, k, p + 1);
  int64_t q = dtl_sp_lower_w(s->narrow, s->crd[k], s->crd32[k], dtl_sp_pos(s, k, p), end, lo);
  for (; q < end && dtl_sp_crd(s, k, q) < hi; q++) {
    w->c[k] = dtl_sp_crd(s, k, q) + s->box.lo[k];
    if (k + 1 < s->order)
      walk(w, k + 1, q);
    else {
      const char *v = (const char *)s->vals + q * (int64_t)dtl_type_size(s->type);
      if (!is_zero(s->type, v))
        w->visit(w->acc, w->c, v);
    }
  }
}

static void sparse_walk(const dtl_sparse *s, const dtl_box *region,
                        void (*visit)(void *, const int64_t *, const char *), void *acc) {
  if (s->order == 0 || dtl_box_empty(&s->box) || dtl_box_empty(region))
    return;
  walk_ctx w = {.s = s, .region = region, .visit = visit, .acc = acc};
  walk(&w, 0, 0);
}

typedef struct {
  int order;
  size_t es;
  int64_t n, cap;
  int64_t *c;
  char *v;
  bool oom;
} coo;

static void coo_push(void *acc, const int64_t *coords, const char *val) {
  coo *a = acc;
  if (a->oom)
    return;
  if (a->n == a->cap) {
    int64_t cap = a->cap ? 2 * a->cap : 64;
    int64_t *c = realloc(a->c, (size_t)cap * (size_t)a->order * sizeof *c);
    if (c)
      a->c = c;
    char *v = c ? realloc(a->v, (size_t)cap * a->es) : NULL;
    if (!c || !v) {
      a->oom = true;
      return;
    }
    a->v = v;
    a->cap = cap;
  }
  memcpy(a->c + a->n * a->order, coords, (size_t)a->order * sizeof *coords);
  memcpy(a->v + a->n * (int64_t)a->es, val, a->es);
  a->n++;
}

int dtl_sparse_extract(const dtl_sparse *s, const dtl_box *region, int64_t *n, int64_t **coords,
                       void **vals) {
  coo a = {.order = s->order, .es = dtl_type_size(s->type)};
  sparse_walk(s, region, coo_push, &a);
  if (a.oom) {
    free(a.c);
    free(a.v);
    *n = 0, *coords = NULL, *vals = NULL;
    return 1;
  }
  *n = a.n, *coords = a.c, *vals = a.v;
  return 0;
}

typedef struct {
  const dtl_box *box;
  size_t es;
  char *dense;
} dense_acc;

static void dense_put(void *acc, const int64_t *coords, const char *val) {
  dense_acc *a = acc;
  int64_t lin = 0;
  for (int k = 0; k < a->box->nd; k++)
    lin = lin * (a->box->hi[k] - a->box->lo[k]) + (coords[k] - a->box->lo[k]);
  memcpy(a->dense + lin * (int64_t)a->es, val, a->es);
}

void dtl_sparse_densify(const dtl_sparse *s, void *dense) {
  int64_t vol = dtl_box_volume(&s->box);
  if (!dense || vol <= 0)
    return;
  dtl_zero(s->type, dense, vol);
  dense_acc a = {&s->box, dtl_type_size(s->type), dense};
  sparse_walk(s, &s->box, dense_put, &a);
}

int dtl_sparse_from_dense(dtl_sparse *s, dtl_type t, int order, const dtl_level *level,
                          const dtl_box *box, const void *dense, char *err, size_t errlen) {
  coo a = {.order = order, .es = dtl_type_size(t)};
  /* a dense piece read as one all-dense level structure, then walked for its nonzeros */
  dtl_sparse d = {.type = t, .order = order, .box = *box, .vals = (void *)dense};
  d.box.nd = order;
  for (int k = 0; k < order; k++)
    d.level[k] = DTL_LEVEL_DENSE;
  sparse_walk(&d, box, coo_push, &a);
  int rc;
  if (a.oom) {
    snprintf(err, errlen, "out of memory for a sparse block");
    memset(s, 0, sizeof *s);
    rc = 1;
  } else {
    rc = dtl_sparse_from_coo(s, t, order, level, box, a.n, a.c, a.v, err, errlen);
  }
  free(a.c);
  free(a.v);
  return rc;
}

/* ---- moving entries ------------------------------------------------------------------------- */
/* The entries of send piece i (scnt[i], coordinates sc[i], values sv[i]) go to its peer and
 * those of every receive piece come in, each piece as a count (tag0), its coordinates
 * (tag0 + 1) and values (tag0 + 2); every planned piece is a message, an empty one too.
 * On return the received pieces' entries are concatenated after the n0 entries of
 * (c0, v0) in *c and *v (malloc'ed), *n entries in all.  Counts as exchange statistics. */
static int move_entries(dtl_ctx *ctx, const dtl_xplan *pl, dtl_type t, int order, const int64_t *scnt,
                        int64_t *const *sc, void *const *sv, int64_t n0, const int64_t *c0, const void *v0,
                        int tag0, const char *what, int64_t *n, int64_t **c, void **v) {
  const int ns = pl->send.n, nr = pl->recv.n;
  const size_t es = dtl_type_size(t);
  const int64_t eb = (int64_t)(order * sizeof(int64_t) + es); /* bytes per entry */
  int64_t *rcnt = calloc((size_t)nr + 1, sizeof *rcnt);
  MPI_Request *req = malloc((size_t)(2 * ns + 2 * nr + 2) * sizeof *req);
  MPI_Datatype *types = malloc((size_t)(2 * ns + 2 * nr + 2) * sizeof *types);
  int64_t *ac = NULL;
  char *av = NULL;
  int err = 0, nreq = 0, ntypes = 0, rc = MPI_SUCCESS;
  *n = 0, *c = NULL, *v = NULL;
  if (!rcnt || !req || !types)
    err = dtl_fail(ctx, "out of memory for a %s", what);
  for (int i = 0; i < nr && !err && rc == MPI_SUCCESS; i++)
    if ((rc = MPI_Irecv(&rcnt[i], 1, MPI_INT64_T, pl->recv.v[i].peer, tag0, ctx->cart, &req[nreq])) == MPI_SUCCESS)
      nreq++;
  for (int i = 0; i < ns && !err && rc == MPI_SUCCESS; i++)
    if ((rc = MPI_Isend((void *)&scnt[i], 1, MPI_INT64_T, pl->send.v[i].peer, tag0, ctx->cart, &req[nreq])) ==
        MPI_SUCCESS)
      nreq++;
  int wrc = MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
  if (!err && (rc != MPI_SUCCESS || wrc != MPI_SUCCESS))
    err = dtl_mpi_fail(ctx, rc != MPI_SUCCESS ? rc : wrc, what);
  int64_t total = n0;
  for (int i = 0; i < nr && !err; i++)
    total += rcnt[i];
  if (!err) {
    ac = malloc((size_t)(total > 0 ? total : 1) * (size_t)(order > 0 ? order : 1) * sizeof *ac);
    av = malloc((size_t)(total > 0 ? total : 1) * es);
    if (!ac || !av)
      err = dtl_fail(ctx, "out of memory for a %s of %lld entries", what, (long long)total);
  }
  if (!err) {
    if (n0) {
      memcpy(ac, c0, (size_t)(n0 * order) * sizeof *ac);
      memcpy(av, v0, (size_t)n0 * es);
    }
    nreq = 0;
    int64_t at = n0;
    for (int i = 0; i < nr && rc == MPI_SUCCESS; at += rcnt[i], i++) {
      if (!rcnt[i])
        continue;
      int cnt;
      rc = dtl_count_type(DTL_INT64, rcnt[i] * order, &cnt, &types[ntypes]);
      if (rc == MPI_SUCCESS && (rc = MPI_Irecv(ac + at * order, cnt, types[ntypes++], pl->recv.v[i].peer, tag0 + 1,
                                               ctx->cart, &req[nreq])) == MPI_SUCCESS)
        nreq++;
      if (rc == MPI_SUCCESS)
        rc = dtl_count_type(t, rcnt[i], &cnt, &types[ntypes]);
      if (rc == MPI_SUCCESS && (rc = MPI_Irecv(av + at * (int64_t)es, cnt, types[ntypes++], pl->recv.v[i].peer,
                                               tag0 + 2, ctx->cart, &req[nreq])) == MPI_SUCCESS)
        nreq++;
      dtl_count_recv(ctx, DTL_OP_EXCHANGE, rcnt[i] * eb, 1);
    }
    for (int i = 0; i < ns && rc == MPI_SUCCESS; i++) {
      if (!scnt[i])
        continue;
      int cnt;
      rc = dtl_count_type(DTL_INT64, scnt[i] * order, &cnt, &types[ntypes]);
      if (rc == MPI_SUCCESS && (rc = MPI_Isend(sc[i], cnt, types[ntypes++], pl->send.v[i].peer, tag0 + 1, ctx->cart,
                                               &req[nreq])) == MPI_SUCCESS)
        nreq++;
      if (rc == MPI_SUCCESS)
        rc = dtl_count_type(t, scnt[i], &cnt, &types[ntypes]);
      if (rc == MPI_SUCCESS && (rc = MPI_Isend(sv[i], cnt, types[ntypes++], pl->send.v[i].peer, tag0 + 2, ctx->cart,
                                               &req[nreq])) == MPI_SUCCESS)
        nreq++;
      dtl_count_send(ctx, DTL_OP_EXCHANGE, scnt[i] * eb, 1);
    }
    wrc = MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    for (int i = 0; i < ntypes; i++)
      dtl_count_free(&types[i]);
    if (rc != MPI_SUCCESS || wrc != MPI_SUCCESS)
      err = dtl_mpi_fail(ctx, rc != MPI_SUCCESS ? rc : wrc, what);
  }
  free(rcnt), free(req), free(types);
  if (err) {
    free(ac), free(av);
    return err;
  }
  *n = total, *c = ac, *v = av;
  return 0;
}

/* ---- fetch ------------------------------------------------------------------------------------ */
int dtl_sparse_fetch(dtl_ctx *ctx, const dtl_dist *d, const dtl_sparse *own, dtl_box_fn need,
                     const void *arg, dtl_sparse *out) {
  dtl_xplan pl;
  dtl_box mine, myneed;
  memset(out, 0, sizeof *out);
  int err = dtl_xplan_build(ctx, d, &own->box, need, arg, true, 0, &pl, &mine, &myneed);
  const int ns = pl.send.n, nr = pl.recv.n;
  bool whole_own = !err && nr == 0 && (pl.self ? dtl_box_equal(&pl.self_box, &myneed) : dtl_box_empty(&myneed)) &&
                   dtl_box_equal(&own->box, &myneed) && !dtl_box_empty(&myneed);
  int64_t *scnt = calloc((size_t)ns + 1, sizeof *scnt), **sc = calloc((size_t)ns + 1, sizeof *sc);
  void **sv = calloc((size_t)ns + 1, sizeof *sv);
  int64_t self_n = 0, *self_c = NULL, n = 0, *c = NULL;
  void *self_v = NULL, *v = NULL;
  if (!err && (!scnt || !sc || !sv))
    err = dtl_fail(ctx, "out of memory for a sparse fetch");
  /* what this rank sends: the stored entries of each piece */
  for (int i = 0; i < ns && !err; i++)
    if (dtl_sparse_extract(own, &pl.send.v[i].box, &scnt[i], &sc[i], &sv[i]))
      err = dtl_fail(ctx, "out of memory for a sparse fetch");
  if (!err && pl.self && !whole_own && dtl_sparse_extract(own, &pl.self_box, &self_n, &self_c, &self_v))
    err = dtl_fail(ctx, "out of memory for a sparse fetch");
  if (!err)
    err = move_entries(ctx, &pl, own->type, own->order, scnt, sc, sv, self_n, self_c, self_v, TAG_SPARSE,
                       "sparse fetch", &n, &c, &v);
  /* the needed box from all pieces (this rank's own piece as it is when that is the box) */
  if (!err && whole_own) {
    *out = *own;
    out->borrowed = true;
  } else if (!err) {
    char msg[256];
    if (dtl_sparse_from_coo(out, own->type, own->order, own->level, &myneed, n, c, v, msg, sizeof msg))
      err = dtl_fail(ctx, "sparse fetch: %s", msg);
  }
  for (int i = 0; i < ns && sc; i++)
    free(sc[i]), free(sv[i]);
  free(scnt), free(sc), free(sv), free(self_c), free(self_v), free(c), free(v);
  dtl_xplan_free(&pl);
  return err;
}

/* ---- broadcast ------------------------------------------------------------------------------- */
/* Every member of the group (grid dims in mask) needs the same box: each holder's stored
 * entries in it go to every member in one broadcast per piece over the sub-communicator
 * (as dtl_bcast_fetch moves dense pieces): the counts first, then the coordinates and
 * values.  Counted as DTL_OP_BCAST. */
int dtl_sparse_bcast(dtl_ctx *ctx, unsigned mask, const dtl_dist *d, const dtl_sparse *own, const dtl_box *need,
                     dtl_sparse *out) {
  memset(out, 0, sizeof *out);
  dtl_bplan bp;
  int err = dtl_bplan_build(ctx, mask, d, need, &bp), rc = MPI_SUCCESS;
  const int order = d->order, n = err ? 0 : bp.roots.n;
  const size_t es = dtl_type_size(own->type);
  int64_t *cnt = calloc((size_t)n + 1, sizeof *cnt), **rcoord = calloc((size_t)n + 1, sizeof *rcoord);
  void **rval = calloc((size_t)n + 1, sizeof *rval);
  int *subroot = calloc((size_t)n + 1, sizeof *subroot);
  int64_t total = 0, *c = NULL;
  char *v = NULL;
  if (!err && (!cnt || !rcoord || !rval || !subroot))
    err = dtl_fail(ctx, "out of memory for a sparse broadcast");
  /* the counts: a root that cannot extract its entries sends -1 */
  for (int i = 0; i < n && !err && rc == MPI_SUCCESS; i++) {
    const dtl_piece *r = &bp.roots.v[i];
    if (r->peer == ctx->rank && dtl_sparse_extract(own, &r->box, &cnt[i], &rcoord[i], &rval[i]))
      cnt[i] = -1;
    if (bp.members > 1 && (rc = dtl_bplan_root(ctx, &bp, i, &subroot[i])) == MPI_SUCCESS)
      rc = MPI_Bcast(&cnt[i], 1, MPI_INT64_T, subroot[i], bp.sub);
    if (cnt[i] < 0 || cnt[i] > INT64_MAX / 2 - total)
      err = dtl_fail(ctx, "out of memory for a sparse broadcast");
    else
      total += cnt[i];
  }
  if (!err && rc != MPI_SUCCESS)
    err = dtl_mpi_fail(ctx, rc, "MPI_Bcast (sparse broadcast counts)");
  if (!err) {
    c = malloc((size_t)(total > 0 ? total : 1) * (size_t)(order > 0 ? order : 1) * sizeof *c);
    v = malloc((size_t)(total > 0 ? total : 1) * es);
  }
  int bad = err || !c || !v;
  if (n > 0 && bp.members > 1 && MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, bp.sub) != MPI_SUCCESS)
    bad = 1;
  if (bad && !err)
    err = dtl_fail(ctx, "out of memory for a sparse broadcast");
  /* the entries, piece by piece, into their place */
  int64_t at = 0;
  for (int i = 0; i < n && !err; i++) {
    const dtl_piece *r = &bp.roots.v[i];
    int64_t *pc = c + at * order;
    char *pv = v + at * (int64_t)es;
    if (r->peer == ctx->rank && cnt[i] > 0) {
      memcpy(pc, rcoord[i], (size_t)(cnt[i] * order) * sizeof *pc);
      memcpy(pv, rval[i], (size_t)cnt[i] * es);
    }
    if (bp.members > 1 && cnt[i] > 0) {
      int k1, k2;
      MPI_Datatype t1 = MPI_INT64_T, t2 = dtl_type_mpi(own->type);
      rc = dtl_count_type(DTL_INT64, cnt[i] * order, &k1, &t1);
      if (rc == MPI_SUCCESS)
        rc = MPI_Bcast(pc, k1, t1, subroot[i], bp.sub);
      dtl_count_free(&t1);
      if (rc == MPI_SUCCESS && (rc = dtl_count_type(own->type, cnt[i], &k2, &t2)) == MPI_SUCCESS)
        rc = MPI_Bcast(pv, k2, t2, subroot[i], bp.sub);
      dtl_count_free(&t2);
      if (rc != MPI_SUCCESS) {
        err = dtl_mpi_fail(ctx, rc, "MPI_Bcast (sparse broadcast)");
        break;
      }
      int64_t bytes = cnt[i] * (order * 8 + (int64_t)es);
      if (r->peer == ctx->rank)
        dtl_count_send(ctx, DTL_OP_BCAST, bytes * (bp.members - 1), bp.members - 1);
      else
        dtl_count_recv(ctx, DTL_OP_BCAST, bytes, 1);
    }
    at += cnt[i];
  }
  if (!err) {
    char msg[256];
    dtl_box box = *need;
    box.nd = order;
    if (dtl_sparse_from_coo(out, own->type, order, own->level, &box, total, c, v, msg, sizeof msg))
      err = dtl_fail(ctx, "sparse broadcast: %s", msg);
  }
  for (int i = 0; i < n && rcoord; i++)
    free(rcoord[i]), free(rval[i]);
  free(cnt), free(rcoord), free(rval), free(subroot), free(c), free(v);
  dtl_bplan_free(&bp);
  return dtl_any_error(ctx, err);
}

/* ---- fill ------------------------------------------------------------------------------------ */
static uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

int dtl_sparse_fill(dtl_sparse *s, dtl_type t, dtl_fill_kind kind, uint64_t seed, int tensor_id,
                    double density, int order, const dtl_level *level, const int64_t *extent,
                    const dtl_box *own, char *err, size_t errlen) {
  coo a = {.order = order, .es = dtl_type_size(t)};
  dtl_box box = *own;
  box.nd = order;
  if (kind != DTL_FILL_ZEROS && !dtl_box_empty(&box) && order > 0 && density > 0) {
    /* Row by row (a row: all coordinates but the last): the row's candidates are
     * round(density * extent) hashed columns, the same on every rank; a rank keeps those in
     * its block.  Values are those of dtl_fill at the same coordinates. */
    uint64_t key = mix(mix(seed ^ 0x5350415253ull) ^ (uint64_t)(int64_t)tensor_id);
    int64_t last = extent[order - 1];
    double want = density * (double)last;
    int64_t idx[DTL_MAX_DIMS];
    for (int k = 0; k < order; k++)
      idx[k] = box.lo[k];
    for (;;) {
      int64_t row = 0;
      for (int k = 0; k + 1 < order; k++)
        row = row * extent[k] + idx[k];
      uint64_t rk = mix(key ^ mix((uint64_t)row));
      int64_t cand = (int64_t)want;
      if ((double)(rk >> 11) * 0x1.0p-53 < want - (double)cand)
        cand++;
      if (density >= 1)
        cand = last;
      for (int64_t x = 0; x < cand; x++) {
        int64_t col = density >= 1 ? x : (int64_t)(mix(rk + (uint64_t)x + 1) % (uint64_t)last);
        if (col < box.lo[order - 1] || col >= box.hi[order - 1])
          continue;
        idx[order - 1] = col;
        char v[8];
        dtl_box one = {.nd = order};
        for (int k = 0; k < order; k++)
          one.lo[k] = idx[k], one.hi[k] = idx[k] + 1;
        dtl_fill(t, kind, seed, tensor_id, order, extent, &one, v);
        coo_push(&a, idx, v);
      }
      int k = order - 2;
      while (k >= 0 && ++idx[k] == box.hi[k])
        idx[k] = box.lo[k], k--;
      if (k < 0)
        break;
    }
  }
  if (a.oom) {
    free(a.c);
    free(a.v);
    memset(s, 0, sizeof *s);
    snprintf(err, errlen, "out of memory for a sparse fill");
    return 1;
  }
  /* a column drawn twice in a row is one entry: keep the first draw only */
  int64_t w = 0;
  if (a.n) {
    g_sort.order = order;
    g_sort.c = a.c;
    int64_t *perm = malloc((size_t)a.n * sizeof *perm);
    int64_t *c2 = malloc((size_t)a.n * (size_t)order * sizeof *c2);
    char *v2 = malloc((size_t)a.n * a.es);
    if (!perm || !c2 || !v2) {
      free(perm), free(c2), free(v2), free(a.c), free(a.v);
      snprintf(err, errlen, "out of memory for a sparse fill");
      memset(s, 0, sizeof *s);
      return 1;
    }
    for (int64_t e = 0; e < a.n; e++)
      perm[e] = e;
    qsort(perm, (size_t)a.n, sizeof *perm, cmp_entry);
    for (int64_t e = 0; e < a.n; e++) {
      const int64_t *c = a.c + perm[e] * order;
      if (w && !memcmp(c2 + (w - 1) * order, c, (size_t)order * sizeof *c))
        continue;
      memcpy(c2 + w * order, c, (size_t)order * sizeof *c);
      memcpy(v2 + w * (int64_t)a.es, a.v + perm[e] * (int64_t)a.es, a.es);
      w++;
    }
    free(perm), free(a.c), free(a.v);
    a.c = c2, a.v = v2;
  }
  int rc = dtl_sparse_from_coo(s, t, order, level, &box, w, a.c, a.v, err, errlen);
  free(a.c);
  free(a.v);
  return rc;
}

/* ---- mode orders (dtl_dist.mode) ------------------------------------------------------------------ */
/* d as files name the dimensions: extents in the declared order, no mode order. */
static dtl_dist declared_dist(const dtl_dist *d) {
  dtl_dist x = *d;
  if (d->moded)
    for (int k = 0; k < d->order; k++)
      x.extent[d->mode[k]] = d->extent[k];
  x.moded = false;
  return x;
}

/* d in the declared order of dimensions, every field (the partitioned dims too): a .npy
 * file holds the declared tensor, and its blocks are the storage order's, permuted */
static dtl_dist declared_layout(const dtl_dist *d) {
  dtl_dist x = declared_dist(d);
  for (int g = 0; g < d->ngrid; g++)
    if (d->moded && d->kind[g] == DTL_DIM_PART) x.tdim[g] = d->mode[d->tdim[g]];
  return x;
}

/* A block's dense values (box own, row-major in storage order) and the same block in the
 * declared order (its dims permuted by d->mode, row-major): to_declared copies src, in storage
 * order, into dst in the declared order; else back. */
static void permute_block(const dtl_dist *d, const dtl_box *own, size_t es, const char *src, char *dst, bool to_declared) {
  const int n = d->order;
  int64_t ext[DTL_MAX_DIMS], dext[DTL_MAX_DIMS], dst_stride[DTL_MAX_DIMS], idx[DTL_MAX_DIMS] = {0}, vol = 1;
  for (int k = 0; k < n; k++) {
    ext[k] = own->hi[k] > own->lo[k] ? own->hi[k] - own->lo[k] : 0;
    dext[d->mode[k]] = ext[k];
    vol *= ext[k];
  }
  int64_t st = 1;
  for (int q = n - 1; q >= 0; q--) dst_stride[q] = st, st *= dext[q];
  for (int64_t e = 0; e < vol; e++) {
    int64_t off = 0;
    for (int k = 0; k < n; k++) off += idx[k] * dst_stride[d->mode[k]];
    if (to_declared) memcpy(dst + off * (int64_t)es, src + e * (int64_t)es, es);
    else memcpy(dst + e * (int64_t)es, src + off * (int64_t)es, es);
    for (int k = n - 1; k >= 0; k--) {
      if (++idx[k] < ext[k]) break;
      idx[k] = 0;
    }
  }
}

static dtl_box declared_box(const dtl_dist *d, const dtl_box *own) {
  dtl_box b = *own;
  b.nd = d->order;
  for (int k = 0; k < d->order; k++) b.lo[d->mode[k]] = own->lo[k], b.hi[d->mode[k]] = own->hi[k];
  return b;
}

/* n entries' coordinates from storage order to the declared order (in place) */
static void to_declared(const dtl_dist *d, int64_t n, int64_t *c) {
  int64_t x[DTL_MAX_DIMS];
  for (int64_t e = 0; d->moded && e < n; e++) {
    for (int k = 0; k < d->order; k++)
      x[d->mode[k]] = c[e * d->order + k];
    memcpy(c + e * d->order, x, (size_t)d->order * sizeof *x);
  }
}

/* ---- reading .mtx, .tns and .npy --------------------------------------------------------------- */
static bool ends_with(const char *s, const char *suf) {
  size_t n = strlen(s), m = strlen(suf);
  return n >= m && !strcmp(s + n - m, suf);
}

/* A text file read line by line; every error is "PATH:LINE: error: MESSAGE". */
enum { MAX_FIELDS = DTL_MAX_DIMS + 2 };
typedef struct {
  const char *path;
  char *line;
  size_t cap;
  FILE *f;
  int64_t lineno;
  char *err;
  size_t errlen;
  int nf;                   /* the fields of the current line */
  char *field[MAX_FIELDS + 1]; /* (one more than MAX_FIELDS: a line with too many) */
} reader;

static int rd_fail(reader *r, int64_t line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rd_fail(reader *r, int64_t line, const char *fmt, ...) {
  int at = snprintf(r->err, r->errlen, "%s:%lld: error: ", r->path, (long long)(line > 0 ? line : 1));
  if (at >= 0 && (size_t)at < r->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + at, r->errlen - (size_t)at, fmt, ap);
    va_end(ap);
  }
  return 1;
}

/* One raw line (no skipping); 0 at the end of the file, -1 after an error (in r->err). */
static int raw_line(reader *r) {
  errno = 0;
  ssize_t len = getline(&r->line, &r->cap, r->f);
  if (len < 0) {
    if (ferror(r->f))
      return -(rd_fail(r, r->lineno + 1, "cannot read: %s", strerror(errno ? errno : EIO)));
    return 0;
  }
  r->lineno++;
  if ((size_t)len != strlen(r->line))
    return -(rd_fail(r, r->lineno, "a NUL byte in the line"));
  return 1;
}

/* Split the current line at white space (at most MAX_FIELDS + 1 fields kept: enough to know
 * there are too many). */
static void split(reader *r) {
  r->nf = 0;
  char *p = r->line;
  for (;;) {
    while (*p && isspace((unsigned char)*p))
      p++;
    if (!*p)
      return;
    char *start = p;
    while (*p && !isspace((unsigned char)*p))
      p++;
    if (r->nf <= MAX_FIELDS)
      r->field[r->nf] = start;
    r->nf++;
    if (*p)
      *p++ = '\0';
  }
}

/* The next line that is neither blank nor a comment (% or #), split into fields: 1, 0 at
 * the end of the file, -1 after an error. */
static int next_line(reader *r) {
  for (;;) {
    int rc = raw_line(r);
    if (rc <= 0)
      return rc;
    split(r);
    if (r->nf > 0 && r->field[0][0] != '%' && r->field[0][0] != '#')
      return 1;
  }
}

/* A plain decimal integer, the whole token, in int64 range. */
static bool parse_i64(const char *tok, long long *out) {
  const char *d = tok + (*tok == '-' || *tok == '+');
  if (!isdigit((unsigned char)*d))
    return false;
  char *end;
  errno = 0;
  long long v = strtoll(tok, &end, 10);
  if (errno || *end)
    return false;
  *out = v;
  return true;
}

/* Coordinate k (1-based in the file) of a tensor of extent ext: 0-based in *c. */
static int parse_coord(reader *r, const char *tok, const char *what, int k, int64_t ext, int64_t *c) {
  long long v;
  char name[48];
  if (k >= 0)
    snprintf(name, sizeof name, "%s %d", what, k + 1);
  else
    snprintf(name, sizeof name, "%s", what);
  if (!parse_i64(tok, &v))
    return rd_fail(r, r->lineno, "%s: '%.40s' is not an integer", name, tok);
  if (v < 1 || v > ext)
    return rd_fail(r, r->lineno, "%s: %lld is out of range 1..%lld", name, v, (long long)ext);
  *c = (int64_t)v - 1;
  return 0;
}

/* A value of type t into out: integers exactly (integer: the file says the value is an
 * integer), floating values with strtod; the whole token. */
static int parse_value(reader *r, dtl_type t, const char *tok, bool integer, char *out) {
  bool ints = t == DTL_INT32 || t == DTL_INT64;
  if (integer || ints) {
    long long v;
    if (!parse_i64(tok, &v))
      return rd_fail(r, r->lineno, "value '%.40s' is not an integer%s", tok,
                     ints ? "" : " (the header says 'integer')");
    switch (t) {
    case DTL_INT32:
      if (v < INT32_MIN || v > INT32_MAX)
        return rd_fail(r, r->lineno, "value %lld is out of range for int32", v);
      *(int32_t *)(void *)out = (int32_t)v;
      break;
    case DTL_INT64: *(int64_t *)(void *)out = v; break;
    case DTL_DOUBLE: *(double *)(void *)out = (double)v; break;
    case DTL_FLOAT: *(float *)(void *)out = (float)v; break;
    }
    return 0;
  }
  char *end;
  errno = 0;
  double v = strtod(tok, &end);
  if (end == tok || *end || strpbrk(tok, "xXpP")) /* decimal only: strtod would take C's hexadecimal floats */
    return rd_fail(r, r->lineno, "value '%.40s' is not a number", tok);
  if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL))
    return rd_fail(r, r->lineno, "value '%.40s' is out of range for %s", tok, dtl_type_name(t));
  if (t == DTL_FLOAT) {
    float f = (float)v;
    if (isinf(f) && !isinf(v))
      return rd_fail(r, r->lineno, "value '%.40s' is out of range for float", tok);
    *(float *)(void *)out = f;
  } else {
    *(double *)(void *)out = v;
  }
  return 0;
}

static void set_one(dtl_type t, char *out) {
  switch (t) {
  case DTL_DOUBLE: *(double *)(void *)out = 1; break;
  case DTL_FLOAT: *(float *)(void *)out = 1; break;
  case DTL_INT32: *(int32_t *)(void *)out = 1; break;
  case DTL_INT64: *(int64_t *)(void *)out = 1; break;
  }
}

static void negate(dtl_type t, char *v) {
  switch (t) {
  case DTL_DOUBLE: *(double *)(void *)v = -*(double *)(void *)v; break;
  case DTL_FLOAT: *(float *)(void *)v = -*(float *)(void *)v; break;
  case DTL_INT32: *(int32_t *)(void *)v = (int32_t)(0u - (uint32_t) * (int32_t *)(void *)v); break;
  case DTL_INT64: *(int64_t *)(void *)v = (int64_t)(0u - (uint64_t) * (int64_t *)(void *)v); break;
  }
}

static void lower_word(char *s) {
  for (; *s; s++)
    *s = (char)tolower((unsigned char)*s);
}

/* What the header of a text file says (Matrix Market: banner and size line; FROSTT: nothing)
 * and where its entries begin. */
typedef struct {
  bool pattern, integer, symmetric, skew;
  char sym[64];
  long long dim[3];     /* Matrix Market: rows, columns, entries */
  int64_t size_line;    /* ... the size line's number */
  int64_t data_start;   /* the byte offset of the first line after the header */
  int64_t lines_before; /* the lines before it */
} text_header;

/* Matrix Market: the banner, comments and the size line. */
static int mtx_header(reader *r, dtl_type t, int order, const int64_t *extent, text_header *h) {
  int rc = raw_line(r);
  if (rc < 0)
    return 1;
  if (rc == 0)
    return rd_fail(r, 1, "empty file: expected the banner '%%%%MatrixMarket matrix coordinate FIELD SYMMETRY'");
  split(r);
  if (r->nf == 0 || strcasecmp(r->field[0], "%%MatrixMarket"))
    return rd_fail(r, 1, "not a Matrix Market file (the first line is not a '%%%%MatrixMarket' banner)");
  if (r->nf != 5)
    return rd_fail(r, 1, "the banner has %d fields, expected 5: '%%%%MatrixMarket matrix coordinate FIELD SYMMETRY'", r->nf);
  char obj[64], fmt[64], field[64], sym[64];
  snprintf(obj, sizeof obj, "%s", r->field[1]);
  snprintf(fmt, sizeof fmt, "%s", r->field[2]);
  snprintf(field, sizeof field, "%s", r->field[3]);
  snprintf(sym, sizeof sym, "%s", r->field[4]);
  lower_word(obj), lower_word(fmt), lower_word(field), lower_word(sym);
  if (strcmp(obj, "matrix"))
    return rd_fail(r, 1, "object '%s' is not supported: only 'matrix coordinate' Matrix Market files are read", obj);
  if (!strcmp(fmt, "array"))
    return rd_fail(r, 1, "'matrix array' (dense) Matrix Market files are not read: only 'matrix coordinate' "
                         "(load a dense matrix from a .npy file)");
  if (strcmp(fmt, "coordinate"))
    return rd_fail(r, 1, "format '%s': only 'matrix coordinate' Matrix Market files are read", fmt);
  bool pattern = !strcmp(field, "pattern"), integer = !strcmp(field, "integer");
  if (!strcmp(field, "complex"))
    return rd_fail(r, 1, "complex matrices are not supported");
  if (!pattern && !integer && strcmp(field, "real") && strcmp(field, "double"))
    return rd_fail(r, 1, "unknown field '%s' (real, double, integer or pattern)", field);
  if ((t == DTL_INT32 || t == DTL_INT64) && !pattern && !integer)
    return rd_fail(r, 1, "field '%s' does not fit the tensor's type %s (integer expected)", field, dtl_type_name(t));
  bool symmetric = !strcmp(sym, "symmetric"), skew = !strcmp(sym, "skew-symmetric");
  if (skew && pattern)
    return rd_fail(r, 1, "a skew-symmetric pattern matrix has no values to negate");
  if (!symmetric && !skew && strcmp(sym, "general"))
    return rd_fail(r, 1, "symmetry '%s' is not supported (general, symmetric, skew-symmetric)", sym);
  symmetric |= skew;
  if (order != 2)
    return rd_fail(r, 1, "a Matrix Market file holds a matrix, the tensor has order %d", order);
  /* the size line */
  rc = next_line(r);
  if (rc < 0)
    return 1;
  if (rc == 0)
    return rd_fail(r, r->lineno, "the file ends before its size line 'rows columns entries'");
  const int64_t size_line = r->lineno;
  if (r->nf != 3)
    return rd_fail(r, size_line, "the size line has %d field%s, expected 3: 'rows columns entries'", r->nf,
                   r->nf == 1 ? "" : "s");
  long long dim[3];
  static const char *const dim_name[3] = {"rows", "columns", "entries"};
  for (int k = 0; k < 3; k++)
    if (!parse_i64(r->field[k], &dim[k]) || dim[k] < 0)
      return rd_fail(r, size_line, "size line: %s '%.40s' is not a nonnegative integer", dim_name[k], r->field[k]);
  if (dim[0] != extent[0] || dim[1] != extent[1])
    return rd_fail(r, size_line, "the matrix is %lld x %lld, the tensor %lld x %lld", dim[0], dim[1],
                   (long long)extent[0], (long long)extent[1]);
  if (symmetric && dim[0] != dim[1])
    return rd_fail(r, size_line, "a %s matrix must be square, this one is %lld x %lld", sym, dim[0], dim[1]);
  h->pattern = pattern, h->integer = integer, h->symmetric = symmetric, h->skew = skew;
  snprintf(h->sym, sizeof h->sym, "%s", sym);
  memcpy(h->dim, dim, sizeof dim);
  h->size_line = size_line;
  return 0;
}

/* One entry line of a Matrix Market file (the index-th entry of the file, 0-based). */
static int mtx_entry(reader *r, dtl_type t, const int64_t *extent, const text_header *h, int64_t index,
                     const dtl_box *box, coo *a) {
  if (index == h->dim[2])
    return rd_fail(r, r->lineno, "more entries than the %lld the size line (line %lld) announces", h->dim[2],
                   (long long)h->size_line);
  const int want = h->pattern ? 2 : 3;
  if (r->nf != want)
    return rd_fail(r, r->lineno, "%s fields: %d, expected %d (%s)", r->nf < want ? "too few" : "too many", r->nf, want,
                   h->pattern ? "row column: a pattern file has no values" : "row column value");
  int64_t c[2];
  for (int k = 0; k < 2; k++)
    if (parse_coord(r, r->field[k], k ? "column" : "row", -1, extent[k], &c[k]))
      return 1;
  char v[8];
  if (h->pattern)
    set_one(t, v);
  else if (parse_value(r, t, r->field[2], h->integer, v))
    return 1;
  if (h->symmetric && (h->skew ? c[0] <= c[1] : c[0] < c[1]))
    return rd_fail(r, r->lineno, "entry (%lld, %lld) %s the diagonal: a %s file stores the %slower triangle only",
                   (long long)c[0] + 1, (long long)c[1] + 1, c[0] == c[1] ? "on" : "above", h->sym,
                   h->skew ? "strictly " : "");
  for (int mirror = 0; mirror < (h->symmetric && c[0] != c[1] ? 2 : 1); mirror++) {
    int64_t cc[2] = {mirror ? c[1] : c[0], mirror ? c[0] : c[1]};
    if (mirror && h->skew)
      negate(t, v);
    if (cc[0] >= box->lo[0] && cc[0] < box->hi[0] && cc[1] >= box->lo[1] && cc[1] < box->hi[1])
      coo_push(a, cc, v);
  }
  return 0;
}

/* One entry line of a FROSTT file; first: the line of the file's first entry (whose field
 * count says the file's order). */
static int tns_entry(reader *r, dtl_type t, int order, const int64_t *extent, int64_t first, const dtl_box *box, coo *a) {
  if (r->lineno == first && r->nf != order + 1)
    return rd_fail(r, r->lineno, "an entry of order %d (%d field%s: coordinates then a value), the tensor has order %d",
                   r->nf - 1, r->nf, r->nf == 1 ? "" : "s", order);
  if (r->nf != order + 1)
    return rd_fail(r, r->lineno, "%s fields: %d, expected %d (%d coordinates then a value, as on line %lld)",
                   r->nf < order + 1 ? "too few" : "too many", r->nf, order + 1, order, (long long)first);
  int64_t c[DTL_MAX_DIMS];
  for (int k = 0; k < order; k++)
    if (parse_coord(r, r->field[k], "coordinate", k, extent[k], &c[k]))
      return 1;
  char v[8];
  if (parse_value(r, t, r->field[order], false, v))
    return 1;
  bool in = true;
  for (int k = 0; k < order; k++)
    in &= c[k] >= box->lo[k] && c[k] < box->hi[k];
  if (in)
    coo_push(a, c, v);
  return 0;
}

/* ---- reading .mtx and .tns in parallel (MPI-IO) ----------------------------------------------
 * Rank 0 reads the header (Matrix Market: banner and size line) and broadcasts it with the
 * byte offset where the entries begin.  The rest of the file is split into P byte ranges; each
 * rank owns the lines that begin in its range (found by reading a little past each range's
 * start to the next line break), reads them with MPI_File_read_at, numbers them from the
 * counts of the ranks before it (MPI_Exscan of line and entry counts), parses them with the
 * same strict rules as one reader would, and routes its entries to the ranks whose blocks hold
 * them (dtl_sparse_import: one all-to-all; duplicates summed).  The first error in the file's
 * order wins: a rank's lines all come before the next rank's, and the ranks agree on the
 * lowest failing rank.  Memory per rank: its share of the bytes and of the entries. */
enum { SCAN_BLOCK = 1 << 16, READ_MAX = 1 << 30 };

static int read_at(MPI_File fh, int64_t off, char *buf, int64_t n, int64_t *got) {
  *got = 0;
  while (*got < n) {
    int want = (int)(n - *got > READ_MAX ? READ_MAX : n - *got), cnt = 0;
    MPI_Status st;
    int rc = MPI_File_read_at(fh, (MPI_Offset)(off + *got), buf + *got, want, MPI_BYTE, &st);
    if (rc != MPI_SUCCESS)
      return rc;
    MPI_Get_count(&st, MPI_BYTE, &cnt);
    if (cnt <= 0)
      break;
    *got += cnt;
  }
  return MPI_SUCCESS;
}

/* The first line start at or after pos (pos itself if pos == from or a line break precedes
 * it), in [from, size]. */
static int line_start(MPI_File fh, int64_t from, int64_t pos, int64_t size, int64_t *out) {
  if (pos <= from) {
    *out = from;
    return MPI_SUCCESS;
  }
  char buf[SCAN_BLOCK];
  for (int64_t at = pos - 1; at < size; at += SCAN_BLOCK) {
    int64_t got;
    int rc = read_at(fh, at, buf, SCAN_BLOCK < size - at ? SCAN_BLOCK : size - at, &got);
    if (rc != MPI_SUCCESS)
      return rc;
    char *nl = memchr(buf, '\n', (size_t)got);
    if (nl) {
      *out = at + (nl - buf) + 1;
      return MPI_SUCCESS;
    }
    if (got == 0)
      break;
  }
  *out = size;
  return MPI_SUCCESS;
}

/* Entry lines (neither blank nor comments) of a text, and the offset of the first one (-1). */
static int64_t count_entries(const char *p, int64_t n, int64_t *first_off) {
  int64_t count = 0;
  *first_off = -1;
  for (int64_t i = 0; i < n;) {
    const char *nl = memchr(p + i, '\n', (size_t)(n - i));
    int64_t end = nl ? nl - p : n, j = i;
    while (j < end && isspace((unsigned char)p[j]))
      j++;
    if (j < end && p[j] != '%' && p[j] != '#') {
      if (*first_off < 0)
        *first_off = i;
      count++;
    }
    i = end + 1;
  }
  return count;
}

static int64_t count_lines(const char *p, int64_t n) {
  int64_t count = 0;
  for (const char *q = p; (q = memchr(q, '\n', (size_t)(n - (q - p)))); q++)
    count++;
  return count + (n > 0 && p[n - 1] != '\n');
}

static int read_text_parallel(dtl_ctx *ctx, const char *path, const dtl_dist *d, dtl_type t, coo *a) {
  const int order = d->order, P = ctx->size, me = ctx->rank;
  const bool mtx = ends_with(path, ".mtx");
  char err[400] = "";
  MPI_File fh;
  int rc = MPI_File_open(ctx->comm, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
  if (rc != MPI_SUCCESS) {
    /* say why from the file system where it can */
    FILE *f = fopen(path, "r");
    int e = f ? 0 : errno;
    if (f)
      fclose(f);
    dtl_any_error(ctx, dtl_fail(ctx, "%s: cannot open: %s", path, e ? strerror(e) : "MPI_File_open failed"));
    return 1;
  }
  MPI_Offset fsize = 0;
  int bad = 0;
  if ((rc = MPI_File_get_size(fh, &fsize)) != MPI_SUCCESS)
    bad = dtl_mpi_fail(ctx, rc, "MPI_File_get_size");
  /* the head of the file, on rank 0: a .mtx file's header; a .tns file must not be a Matrix
   * Market file (its size line would read as an entry) */
  text_header h = {0};
  if (!bad && me == 0) {
    FILE *f = fopen(path, "r");
    char first[16] = "";
    if (!f) {
      bad = dtl_fail(ctx, "%s: cannot open: %s", path, strerror(errno));
    } else if (mtx) {
      reader r = {.path = path, .f = f, .err = err, .errlen = sizeof err};
      if (mtx_header(&r, t, order, d->extent, &h))
        bad = dtl_fail(ctx, "%s", err);
      h.data_start = (int64_t)ftello(f), h.lines_before = r.lineno;
      free(r.line);
    } else if (fgets(first, sizeof first, f) && !strncasecmp(first, "%%MatrixMarket", 14)) {
      bad = dtl_fail(ctx, "%s:1: error: a Matrix Market file (its banner on line 1), not FROSTT's .tns: name it .mtx", path);
    }
    if (f) fclose(f);
  }
  if (dtl_any_error(ctx, bad)) {
    MPI_File_close(&fh);
    return 1;
  }
  if (mtx && P > 1 && (rc = MPI_Bcast(&h, (int)sizeof h, MPI_BYTE, 0, ctx->comm)) != MPI_SUCCESS)
    bad = dtl_mpi_fail(ctx, rc, "MPI_Bcast (file header)");
  /* this rank's lines: those that begin in its share of the bytes after the header */
  const int64_t from = h.data_start, size = (int64_t)fsize, span = size - from > 0 ? size - from : 0;
  int64_t lo = 0, hi = 0;
  if (!bad) {
    int64_t b0 = from + (int64_t)((__int128)span * me / P), b1 = from + (int64_t)((__int128)span * (me + 1) / P);
    if ((rc = line_start(fh, from, b0, size, &lo)) != MPI_SUCCESS ||
        (rc = me + 1 == P ? (hi = size, MPI_SUCCESS) : line_start(fh, from, b1, size, &hi)) != MPI_SUCCESS)
      bad = dtl_mpi_fail(ctx, rc, "MPI_File_read_at");
    if (hi < lo)
      hi = lo;
  }
  char *text = NULL;
  int64_t n = hi - lo, got = 0;
  if (!bad && !(text = malloc((size_t)(n > 0 ? n : 1))))
    bad = dtl_fail(ctx, "out of memory reading %s (%lld bytes of it on this rank)", path, (long long)n);
  if (!bad && n > 0 && ((rc = read_at(fh, lo, text, n, &got)) != MPI_SUCCESS || got != n))
    bad = rc != MPI_SUCCESS ? dtl_mpi_fail(ctx, rc, "MPI_File_read_at")
                            : dtl_fail(ctx, "%s: cannot read: the file ended early", path);
  MPI_File_close(&fh);
  if (dtl_any_error(ctx, bad)) {
    free(text);
    return 1;
  }
  /* line numbers, entry numbers and the file's first entry line from the ranks before */
  int64_t first_off, mine[2] = {count_lines(text, n), count_entries(text, n, &first_off)}, before[2] = {0, 0}, total[2];
  if (P > 1) {
    MPI_Exscan(mine, before, 2, MPI_INT64_T, MPI_SUM, ctx->comm);
    if (me == 0)
      before[0] = before[1] = 0;
  }
  MPI_Allreduce(mine, total, 2, MPI_INT64_T, MPI_SUM, ctx->comm);
  const int64_t line0 = h.lines_before + before[0]; /* the line before this rank's first */
  int64_t my_first = first_off < 0 ? INT64_MAX : line0 + 1 + count_lines(text, first_off), first = my_first;
  MPI_Allreduce(&my_first, &first, 1, MPI_INT64_T, MPI_MIN, ctx->comm);
  /* parse this rank's lines */
  dtl_box all = {.nd = order};
  for (int k = 0; k < order; k++)
    all.lo[k] = 0, all.hi[k] = d->extent[k];
  if (n > 0) {
    FILE *f = fmemopen(text, (size_t)n, "r");
    if (!f) {
      bad = dtl_fail(ctx, "%s: cannot read its text in memory: %s", path, strerror(errno));
    } else {
      reader r = {.path = path, .f = f, .err = err, .errlen = sizeof err, .lineno = line0};
      int64_t index = before[1];
      while (!bad && (rc = next_line(&r)) > 0) {
        if (mtx ? mtx_entry(&r, t, d->extent, &h, index, &all, a) : tns_entry(&r, t, order, d->extent, first, &all, a))
          bad = dtl_fail(ctx, "%s", err);
        index++;
      }
      if (!bad && rc < 0)
        bad = dtl_fail(ctx, "%s", err);
      if (!bad && a->oom)
        bad = dtl_fail(ctx, "%s: out of memory for its entries", path);
      free(r.line);
      fclose(f);
    }
  }
  free(text);
  if (dtl_any_error(ctx, bad))
    return 1;
  if (mtx && total[1] != h.dim[2]) {
    bad = me == 0 ? dtl_fail(ctx, "%s:%lld: error: the size line announces %lld entries, the file has %lld", path,
                             (long long)h.size_line, h.dim[2], (long long)total[1])
                  : 0;
    dtl_any_error(ctx, bad);
    return 1;
  }
  return 0;
}

int dtl_sparse_read(dtl_ctx *ctx, const char *path, const dtl_dist *d, dtl_type t,
                    const dtl_level *level, const dtl_box *own, dtl_sparse *out) {
  char err[400] = "";
  int rc = 0;
  dtl_box box = *own;
  box.nd = d->order;
  memset(out, 0, sizeof *out);
  if (ends_with(path, ".npy")) {
    /* the declared tensor; a mode order's block read in the declared order, then permuted */
    int64_t vol = dtl_box_volume(&box);
    const size_t es = dtl_type_size(t), bytes = (size_t)(vol > 0 ? vol : 1) * es;
    void *dense = calloc(1, bytes), *file = d->moded ? calloc(1, bytes) : dense;
    rc = dense && file ? 0 : dtl_fail(ctx, "out of memory reading %s", path);
    if (!dtl_any_error(ctx, rc)) {
      const dtl_dist x = declared_layout(d);
      const dtl_box fb = d->moded ? declared_box(d, &box) : box;
      rc = dtl_npy_read(ctx, path, d->moded ? &x : d, t, file, &fb);
    }
    if (rc) {
      if (file != dense) free(file);
      free(dense);
      return 1;
    }
    if (d->moded) permute_block(d, &box, es, file, dense, false);
    if (file != dense) free(file);
    rc = dtl_sparse_from_dense(out, t, d->order, level, &box, dense, err, sizeof err);
    free(dense);
  } else if (ends_with(path, ".mtx") || ends_with(path, ".tns")) {
    /* every rank reads its share of the file, and the entries go to their holders */
    coo a = {.order = d->order, .es = dtl_type_size(t)};
    const dtl_dist decl = declared_dist(d); /* the file names the declared dimensions */
    rc = read_text_parallel(ctx, path, &decl, t, &a);
    if (!rc)
      rc = dtl_sparse_import(ctx, d, t, level, own, a.n, a.c, a.v, out);
    free(a.c);
    free(a.v);
    return rc;
  } else {
    snprintf(err, sizeof err, "%s: a sparse tensor is read from .mtx (Matrix Market), .tns (FROSTT) or .npy", path);
    rc = 1;
  }
  if (rc)
    dtl_fail(ctx, "%s", err);
  if (dtl_any_error(ctx, rc)) {
    dtl_sparse_free(out);
    return 1;
  }
  return 0;
}

/* ---- saving: .npy (dense), .mtx and .tns (the stored entries) ------------------------------------ */
static void print_value(FILE *f, dtl_type t, const char *v) {
  switch (t) {
  case DTL_DOUBLE: fprintf(f, "%.17g", *(const double *)(const void *)v); break;
  case DTL_FLOAT: fprintf(f, "%.9g", (double)*(const float *)(const void *)v); break;
  case DTL_INT32: fprintf(f, "%d", (int)*(const int32_t *)(const void *)v); break;
  case DTL_INT64: fprintf(f, "%lld", (long long)*(const int64_t *)(const void *)v); break;
  }
}

int dtl_sparse_save(dtl_ctx *ctx, const char *path, const dtl_dist *d, dtl_type t, const dtl_sparse *s,
                    const void *dense_local, const dtl_box *own) {
  if (ends_with(path, ".npy") && d->moded) { /* the declared tensor: the block permuted */
    dtl_box box = *own;
    box.nd = d->order;
    const int64_t vol = dtl_box_volume(&box);
    const size_t es = dtl_type_size(t);
    char *file = malloc((size_t)(vol > 0 ? vol : 1) * es);
    int rc = file ? 0 : dtl_fail(ctx, "out of memory saving %s", path);
    if (dtl_any_error(ctx, rc)) {
      free(file);
      return 1;
    }
    permute_block(d, &box, es, dense_local, file, true);
    const dtl_dist x = declared_layout(d);
    const dtl_box fb = declared_box(d, &box);
    rc = dtl_npy_write(ctx, path, &x, t, file, &fb);
    free(file);
    return rc;
  }
  if (ends_with(path, ".npy"))
    return dtl_npy_write(ctx, path, d, t, dense_local, own);
  const bool mtx = ends_with(path, ".mtx"), tns = ends_with(path, ".tns");
  const dtl_dist decl = declared_dist(d); /* the file's order of dimensions */
  const int order = d->order;
  int err = 0;
  if (!mtx && !tns)
    err = dtl_fail(ctx, "%s: a sparse tensor is saved as .npy, .mtx (Matrix Market) or .tns (FROSTT)", path);
  else if (mtx && order != 2)
    err = dtl_fail(ctx, "%s: a Matrix Market file holds a matrix, the tensor has order %d", path, order);
  else if (order < 1)
    err = dtl_fail(ctx, "%s: a .tns file holds a tensor of order 1 or more", path);
  if (dtl_any_error(ctx, err))
    return 1;
  /* this rank's share: the nonzero stored entries of its block, one replica of each block */
  dtl_box mine;
  bool holder = dtl_dist_block(ctx, d, ctx->coords, &mine);
  mine.nd = order;
  bool writer = holder && (d->replicated_everywhere ? ctx->rank == 0 : dtl_dist_canonical(d, ctx->coords));
  int64_t n = 0, *c = NULL;
  void *v = NULL;
  if (writer && s && s->order == order && dtl_sparse_extract(s, &mine, &n, &c, &v))
    err = dtl_fail(ctx, "%s: out of memory", path);
  to_declared(d, n, c);
  if (!err && n > INT_MAX / order)
    err = dtl_fail(ctx, "%s: %lld entries on one rank, more than MPI counts hold", path, (long long)n);
  if (dtl_any_error(ctx, err)) {
    free(c), free(v);
    return 1;
  }
  /* to the writer of their rows: rank p of the grid formats the entries whose first
   * coordinate x has floor(x P / E0) = p, so the ranks' texts in rank order are sorted */
  const int P = ctx->size;
  int me = 0;
  MPI_Comm_rank(ctx->cart, &me);
  const size_t es = dtl_type_size(t);
  const int64_t E0 = decl.extent[0] > 0 ? decl.extent[0] : 1;
  int *scnt = calloc((size_t)P, sizeof *scnt), *sdsp = calloc((size_t)P, sizeof *sdsp);
  int *rcnt = calloc((size_t)P, sizeof *rcnt), *rdsp = calloc((size_t)P, sizeof *rdsp);
  int *sc2 = calloc((size_t)P, sizeof *sc2), *sd2 = calloc((size_t)P, sizeof *sd2);
  int *rc2 = calloc((size_t)P, sizeof *rc2), *rd2 = calloc((size_t)P, sizeof *rd2);
  int64_t *sendc = malloc((size_t)(n > 0 ? n : 1) * (size_t)order * sizeof *sendc);
  char *sendv = malloc((size_t)(n > 0 ? n : 1) * es);
  int64_t *recvc = NULL, nrecv = 0, *perm = NULL;
  char *recvv = NULL, *text = NULL, tmp[4096] = "";
  size_t tlen = 0;
  int created = 0, rc;
  if (!scnt || !sdsp || !rcnt || !rdsp || !sc2 || !sd2 || !rc2 || !rd2 || !sendc || !sendv)
    err = dtl_fail(ctx, "%s: out of memory", path);
#define DEST(x) ((int)(((__int128)(x) * P) / E0))
  for (int64_t e = 0; e < n && !err; e++)
    scnt[DEST(c[e * order])]++;
  for (int q = 1; q < P && !err; q++)
    sdsp[q] = sdsp[q - 1] + scnt[q - 1];
  if (!err) {
    int *at = calloc((size_t)P, sizeof *at);
    if (!at) {
      err = dtl_fail(ctx, "%s: out of memory", path);
    } else {
      for (int64_t e = 0; e < n; e++) {
        int q = DEST(c[e * order]);
        int64_t k = sdsp[q] + at[q]++;
        memcpy(sendc + k * order, c + e * order, (size_t)order * sizeof *sendc);
        memcpy(sendv + k * (int64_t)es, (char *)v + e * (int64_t)es, es);
      }
      free(at);
    }
  }
#undef DEST
  if (dtl_any_error(ctx, err))
    goto done;
  if ((rc = MPI_Alltoall(scnt, 1, MPI_INT, rcnt, 1, MPI_INT, ctx->cart)) != MPI_SUCCESS)
    err = dtl_mpi_fail(ctx, rc, "MPI_Alltoall");
  for (int q = 0; q < P && !err; q++) {
    if (nrecv + rcnt[q] > INT_MAX / order) {
      err = dtl_fail(ctx, "%s: more than %d entries to write on one rank", path, INT_MAX / order);
      break;
    }
    rdsp[q] = (int)nrecv, nrecv += rcnt[q];
    sc2[q] = scnt[q] * order, sd2[q] = sdsp[q] * order, rc2[q] = rcnt[q] * order, rd2[q] = rdsp[q] * order;
  }
  if (!err && (!(recvc = malloc((size_t)(nrecv > 0 ? nrecv : 1) * (size_t)order * sizeof *recvc)) ||
               !(recvv = malloc((size_t)(nrecv > 0 ? nrecv : 1) * es)) ||
               !(perm = malloc((size_t)(nrecv > 0 ? nrecv : 1) * sizeof *perm))))
    err = dtl_fail(ctx, "%s: out of memory", path);
  if (dtl_any_error(ctx, err))
    goto done;
  rc = MPI_Alltoallv(sendc, sc2, sd2, MPI_INT64_T, recvc, rc2, rd2, MPI_INT64_T, ctx->cart);
  if (rc == MPI_SUCCESS)
    rc = MPI_Alltoallv(sendv, scnt, sdsp, dtl_type_mpi(t), recvv, rcnt, rdsp, dtl_type_mpi(t), ctx->cart);
  if (rc != MPI_SUCCESS)
    err = dtl_mpi_fail(ctx, rc, "MPI_Alltoallv");
  /* this rank's text: its entries sorted, one line each */
  if (!err) {
    for (int64_t e = 0; e < nrecv; e++)
      perm[e] = e;
    g_sort.order = order, g_sort.c = recvc;
    qsort(perm, (size_t)nrecv, sizeof *perm, cmp_entry);
    FILE *m = open_memstream(&text, &tlen);
    if (!m) {
      err = dtl_fail(ctx, "%s: out of memory", path);
    } else {
      for (int64_t e = 0; e < nrecv; e++) {
        const int64_t *x = recvc + perm[e] * order;
        for (int k = 0; k < order; k++)
          fprintf(m, "%lld ", (long long)x[k] + 1);
        print_value(m, t, recvv + perm[e] * (int64_t)es);
        fputc('\n', m);
      }
      if (fclose(m) != 0)
        err = dtl_fail(ctx, "%s: out of memory", path);
    }
  }
  int64_t counts[2] = {nrecv, (int64_t)tlen}, total[2] = {0, 0}, before[2] = {0, 0};
  if (dtl_any_error(ctx, err))
    goto done;
  if ((rc = MPI_Allreduce(counts, total, 2, MPI_INT64_T, MPI_SUM, ctx->cart)) != MPI_SUCCESS ||
      (rc = MPI_Exscan(counts, before, 2, MPI_INT64_T, MPI_SUM, ctx->cart)) != MPI_SUCCESS)
    err = dtl_mpi_fail(ctx, rc, "MPI_Allreduce");
  if (dtl_any_error(ctx, err))
    goto done;
  if (me == 0)
    before[0] = before[1] = 0;
  /* rank 0 creates the file under a fresh name with the header */
  char hdr[256] = "";
  if (mtx)
    snprintf(hdr, sizeof hdr, "%%%%MatrixMarket matrix coordinate %s general\n%lld %lld %lld\n",
             t == DTL_INT32 || t == DTL_INT64 ? "integer" : "real", (long long)decl.extent[0], (long long)decl.extent[1],
             (long long)total[0]);
  const int64_t hlen = (int64_t)strlen(hdr);
  char dst[4096]; /* the file path names (through its links) */
  if (dtl_tmp_begin(ctx, path, hdr, (size_t)hlen, tmp, sizeof tmp, dst, sizeof dst, &created)) {
    err = 1;
    goto done;
  }
  /* every rank writes its lines at its offset */
  MPI_File fh;
  rc = MPI_File_open(ctx->cart, tmp, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
  if (dtl_any_error(ctx, rc != MPI_SUCCESS ? dtl_mpi_fail(ctx, rc, "MPI_File_open") : 0)) {
    err = 1;
    goto done;
  }
  for (int64_t off = 0; off < (int64_t)tlen && !err;) {
    int cnt = (int)((int64_t)tlen - off > READ_MAX ? READ_MAX : (int64_t)tlen - off);
    rc = MPI_File_write_at(fh, (MPI_Offset)(hlen + before[1] + off), text + off, cnt, MPI_BYTE, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
      err = dtl_mpi_fail(ctx, rc, "MPI_File_write_at");
    off += cnt;
  }
  rc = MPI_File_close(&fh);
  if (rc != MPI_SUCCESS && !err)
    err = dtl_mpi_fail(ctx, rc, "MPI_File_close");
  if (dtl_any_error(ctx, err))
    goto done;
  if (me == 0 && rename(tmp, dst) != 0)
    err = dtl_fail(ctx, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
  if (!dtl_any_error(ctx, err))
    created = 0;
  else
    err = 1;
done:
  if (created)
    unlink(tmp);
  free(c), free(v), free(scnt), free(sdsp), free(rcnt), free(rdsp), free(sc2), free(sd2), free(rc2), free(rd2);
  free(sendc), free(sendv), free(recvc), free(recvv), free(perm), free(text);
  return err ? 1 : 0;
}

/* ---- import: entries held anywhere to the blocks that hold them --------------------------------- */
typedef struct {
  const int64_t *c;
  int order;
} imp_sort;
static imp_sort g_imp;

static int cmp_dim0(const void *a, const void *b) {
  int64_t x = g_imp.c[*(const int64_t *)a * g_imp.order], y = g_imp.c[*(const int64_t *)b * g_imp.order];
  return x < y ? -1 : x > y;
}

int dtl_sparse_import(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const dtl_level *level,
                      const dtl_box *own, int64_t n, const int64_t *coords, const void *vals,
                      dtl_sparse *out) {
  const int order = d->order, P = ctx->size;
  const size_t es = dtl_type_size(t);
  memset(out, 0, sizeof *out);
  int err = 0;
  /* every entry must lie in the tensor (declared order) */
  const dtl_dist decl = declared_dist(d);
  if (n < 0) err = dtl_fail(ctx, "import: entry count %lld is negative", (long long)n);
  for (int64_t e = 0; e < n && !err; e++)
    for (int k = 0; k < order && !err; k++)
      if (coords[e * order + k] < 0 || coords[e * order + k] >= decl.extent[k])
        err = dtl_fail(ctx, "import: entry %lld has coordinate %lld in dimension %d, outside [0, %lld)", (long long)e,
                       (long long)coords[e * order + k], k, (long long)decl.extent[k]);
  /* a mode order: the coordinates in storage order */
  int64_t *stored = NULL;
  if (!err && d->moded && n > 0) {
    stored = malloc((size_t)n * (size_t)order * sizeof *stored);
    if (!stored)
      err = dtl_fail(ctx, "import: out of memory");
    for (int64_t e = 0; stored && e < n; e++)
      for (int k = 0; k < order; k++)
        stored[e * order + k] = coords[e * order + d->mode[k]];
    coords = stored;
  }
  if (dtl_any_error(ctx, err)) {
    free(stored);
    return 1;
  }
  /* entries sorted by their first coordinate: a block's entries are a run of that order,
   * filtered along the other dimensions */
  int64_t *perm = malloc((size_t)(n > 0 ? n : 1) * sizeof *perm);
  int *scnt = calloc((size_t)P, sizeof *scnt), *rcnt = calloc((size_t)P, sizeof *rcnt);
  int *sdsp = calloc((size_t)P + 1, sizeof *sdsp), *rdsp = calloc((size_t)P + 1, sizeof *rdsp);
  dtl_box *blocks = malloc((size_t)P * sizeof *blocks);
  bool *holds = malloc((size_t)P * sizeof *holds);
  int64_t *dest = NULL, ndest = 0, capdest = 0; /* (rank, entry) pairs, by rank */
  int64_t *sc = NULL, *rc_ = NULL;
  char *sv = NULL, *rv = NULL;
  if (!perm || !scnt || !rcnt || !sdsp || !rdsp || !blocks || !holds)
    err = dtl_fail(ctx, "import: out of memory");
  for (int64_t e = 0; e < n && !err; e++)
    perm[e] = e;
  if (!err && n > 0 && order > 0) {
    g_imp.c = coords, g_imp.order = order;
    qsort(perm, (size_t)n, sizeof *perm, cmp_dim0);
  }
  for (int r = 0; r < P && !err; r++) {
    int64_t cr[DTL_MAX_DIMS];
    dtl_coords_of(ctx, r, cr);
    holds[r] = dtl_dist_block(ctx, d, cr, &blocks[r]) && !dtl_box_empty(&blocks[r]);
    if (!holds[r])
      continue;
    int64_t lo = 0, hi = n;
    if (order > 0) { /* the run of entries whose first coordinate lies in the block */
      int64_t a = 0, b = n;
      while (a < b) {
        int64_t m = a + (b - a) / 2;
        if (coords[perm[m] * order] < blocks[r].lo[0]) a = m + 1;
        else b = m;
      }
      lo = a, b = n;
      while (a < b) {
        int64_t m = a + (b - a) / 2;
        if (coords[perm[m] * order] < blocks[r].hi[0]) a = m + 1;
        else b = m;
      }
      hi = a;
    }
    for (int64_t x = lo; x < hi && !err; x++) {
      const int64_t *c = coords + perm[x] * order;
      bool in = true;
      for (int k = 1; k < order && in; k++)
        in = c[k] >= blocks[r].lo[k] && c[k] < blocks[r].hi[k];
      if (!in)
        continue;
      if (ndest == capdest) {
        capdest = capdest ? 2 * capdest : 1024;
        int64_t *nd = realloc(dest, (size_t)capdest * 2 * sizeof *nd);
        if (!nd) {
          err = dtl_fail(ctx, "import: out of memory");
          break;
        }
        dest = nd;
      }
      dest[2 * ndest] = r, dest[2 * ndest + 1] = perm[x];
      ndest++;
      if (scnt[r] == INT32_MAX)
        err = dtl_fail(ctx, "import: more than %d entries for one rank in one call", INT32_MAX);
      scnt[r]++;
    }
  }
  if (!err) {
    for (int r = 0; r < P; r++)
      sdsp[r + 1] = sdsp[r] + scnt[r];
    sc = malloc((size_t)(ndest + 1) * (size_t)(order + 1) * sizeof *sc);
    sv = malloc((size_t)(ndest + 1) * es);
    if (!sc || !sv)
      err = dtl_fail(ctx, "import: out of memory");
  }
  if (!err) { /* dest is in rank order already: ranks were visited in order */
    for (int64_t x = 0; x < ndest; x++) {
      memcpy(sc + x * order, coords + dest[2 * x + 1] * order, (size_t)order * sizeof *sc);
      memcpy(sv + x * (int64_t)es, (const char *)vals + dest[2 * x + 1] * (int64_t)es, es);
    }
  }
  if (dtl_any_error(ctx, err))
    goto done;
  int rc = MPI_Alltoall(scnt, 1, MPI_INT, rcnt, 1, MPI_INT, ctx->cart);
  int64_t total = 0;
  for (int r = 0; r < P; r++) {
    rdsp[r + 1] = rdsp[r] + rcnt[r];
    total += rcnt[r];
  }
  if (rc == MPI_SUCCESS && total > INT32_MAX / (order > 0 ? order : 1))
    err = dtl_fail(ctx, "import: more than %d entries arrive at one rank in one call", INT32_MAX / (order > 0 ? order : 1));
  if (rc == MPI_SUCCESS && !err) {
    rc_ = malloc((size_t)(total + 1) * (size_t)(order + 1) * sizeof *rc_);
    rv = malloc((size_t)(total + 1) * es);
    if (!rc_ || !rv)
      err = dtl_fail(ctx, "import: out of memory");
  }
  if (rc != MPI_SUCCESS)
    err = dtl_mpi_fail(ctx, rc, "MPI_Alltoall");
  if (dtl_any_error(ctx, err))
    goto done;
  /* coordinates (order per entry) and values, as two all-to-alls */
  {
    int *sc2 = malloc((size_t)P * sizeof *sc2), *sd2 = malloc((size_t)P * sizeof *sd2);
    int *rc2 = malloc((size_t)P * sizeof *rc2), *rd2 = malloc((size_t)P * sizeof *rd2);
    if (!sc2 || !sd2 || !rc2 || !rd2)
      err = dtl_fail(ctx, "import: out of memory");
    if (!dtl_any_error(ctx, err)) {
      for (int r = 0; r < P; r++)
        sc2[r] = scnt[r] * order, sd2[r] = sdsp[r] * order, rc2[r] = rcnt[r] * order, rd2[r] = rdsp[r] * order;
      rc = MPI_Alltoallv(sc, sc2, sd2, MPI_INT64_T, rc_, rc2, rd2, MPI_INT64_T, ctx->cart);
      if (rc == MPI_SUCCESS)
        rc = MPI_Alltoallv(sv, scnt, sdsp, dtl_type_mpi(t), rv, rcnt, rdsp, dtl_type_mpi(t), ctx->cart);
      if (rc != MPI_SUCCESS)
        err = dtl_mpi_fail(ctx, rc, "MPI_Alltoallv");
      for (int r = 0; r < P; r++)
        if (r != ctx->rank) {
          if (scnt[r])
            dtl_count_send(ctx, DTL_OP_EXCHANGE, scnt[r] * (int64_t)(order * sizeof(int64_t) + es), 1);
          if (rcnt[r])
            dtl_count_recv(ctx, DTL_OP_EXCHANGE, rcnt[r] * (int64_t)(order * sizeof(int64_t) + es), 1);
        }
    }
    free(sc2), free(sd2), free(rc2), free(rd2);
    if (!err) {
      char msg[256];
      dtl_box box = *own;
      box.nd = order;
      if (dtl_sparse_from_coo(out, t, order, level, &box, total, rc_, rv, msg, sizeof msg))
        err = dtl_fail(ctx, "import: %s", msg);
    }
    err = dtl_any_error(ctx, err);
  }
done:
  free(perm), free(scnt), free(rcnt), free(sdsp), free(rdsp), free(blocks), free(holds), free(dest);
  free(sc), free(sv), free(rc_), free(rv), free(stored);
  if (err)
    dtl_sparse_free(out);
  return err ? 1 : 0;
}

/* ---- sparse outputs -------------------------------------------------------------------------- */
int dtl_coo_grow_(dtl_coo *q) {
  int64_t cap = q->cap ? 2 * q->cap : 1024;
  size_t es = dtl_type_size(q->type);
  int64_t *c = realloc(q->c, (size_t)cap * (size_t)(q->order > 0 ? q->order : 1) * sizeof *c);
  if (!c)
    return 1;
  q->c = c;
  char *v = realloc(q->v, (size_t)cap * es);
  if (!v)
    return 1;
  q->v = v;
  q->cap = cap;
  return 0;
}

void dtl_coo_free(dtl_coo *q) {
  free(q->c);
  free(q->v);
  q->c = NULL, q->v = NULL;
  q->n = q->cap = 0;
}

int dtl_sparse_empty(dtl_sparse *s, dtl_type t, int order, const dtl_level *level, const dtl_box *box) {
  char err[64];
  return dtl_sparse_from_coo(s, t, order, level, box, 0, NULL, NULL, err, sizeof err);
}

int dtl_sparse_copy(dtl_sparse *dst, const dtl_sparse *src) {
  int64_t n = 0, *c = NULL;
  void *v = NULL;
  char err[256];
  memset(dst, 0, sizeof *dst);
  if (dtl_sparse_extract(src, &src->box, &n, &c, &v))
    return 1;
  int rc = dtl_sparse_from_coo(dst, src->type, src->order, src->level, &src->box, n, c, v, err, sizeof err);
  free(c);
  free(v);
  return rc;
}

/* s := s + the entries of add (their coordinates in s->box, or dropped when outside, if
 * clip), rebuilt in place. */
static int merge_into(dtl_sparse *s, int64_t na, const int64_t *ac, const void *av, char *err, size_t errlen) {
  int64_t n = 0, *c = NULL;
  void *v = NULL;
  if (dtl_sparse_extract(s, &s->box, &n, &c, &v)) {
    snprintf(err, errlen, "out of memory");
    return 1;
  }
  const int order = s->order;
  const size_t es = dtl_type_size(s->type);
  int64_t *mc = realloc(c, (size_t)(n + na + 1) * (size_t)order * sizeof *mc);
  char *mv = mc ? realloc(v, (size_t)(n + na + 1) * es) : NULL;
  if (!mc || !mv) {
    free(mc ? mc : c);
    free(mv ? mv : v);
    snprintf(err, errlen, "out of memory");
    return 1;
  }
  if (na) {
    memcpy(mc + n * order, ac, (size_t)(na * order) * sizeof *mc);
    memcpy(mv + n * (int64_t)es, av, (size_t)na * es);
  }
  dtl_sparse out;
  int rc = dtl_sparse_from_coo(&out, s->type, order, s->level, &s->box, n + na, mc, mv, err, errlen);
  free(mc);
  free(mv);
  if (rc)
    return rc;
  dtl_sparse_free(s);
  *s = out;
  return 0;
}

int dtl_sparse_merge(dtl_ctx *ctx, dtl_sparse *s, const dtl_coo *add) {
  char err[256];
  if (merge_into(s, add->n, add->c, add->v, err, sizeof err))
    return dtl_fail(ctx, "sparse result: %s", err);
  return 0;
}

/* the entries of q inside box */
static int coo_in_box(const dtl_coo *q, const dtl_box *box, coo *out) {
  size_t es = dtl_type_size(q->type);
  out->order = q->order, out->es = es;
  for (int64_t e = 0; e < q->n; e++) {
    const int64_t *c = q->c + e * q->order;
    bool in = true;
    for (int k = 0; k < q->order && in; k++)
      in = c[k] >= box->lo[k] && c[k] < box->hi[k];
    if (in)
      coo_push(out, c, (const char *)q->v + e * (int64_t)es);
  }
  return out->oom;
}

int dtl_sparse_accumulate(dtl_ctx *ctx, const dtl_dist *d, dtl_sparse *own, unsigned exec_mask,
                          dtl_box_fn prod, const void *arg, const dtl_coo *produced) {
  dtl_xplan pl;
  dtl_box mine, myprod;
  const int order = own->order;
  const size_t es = dtl_type_size(own->type);
  int err = dtl_xplan_build(ctx, d, &own->box, prod, arg, false, exec_mask, &pl, &mine, &myprod);
  const int ns = pl.send.n;
  coo *snd = calloc((size_t)ns + 1, sizeof *snd);
  int64_t *scnt = calloc((size_t)ns + 1, sizeof *scnt), **sc = calloc((size_t)ns + 1, sizeof *sc);
  void **sv = calloc((size_t)ns + 1, sizeof *sv);
  coo self = {.order = order, .es = es};
  int64_t n = 0, *c = NULL;
  void *v = NULL;
  if (!err && (!snd || !scnt || !sc || !sv))
    err = dtl_fail(ctx, "out of memory for a sparse accumulate");
  /* what this rank sends: its entries inside each piece */
  for (int i = 0; i < ns && !err; i++) {
    if (coo_in_box(produced, &pl.send.v[i].box, &snd[i]))
      err = dtl_fail(ctx, "out of memory for a sparse accumulate");
    scnt[i] = snd[i].n, sc[i] = snd[i].c, sv[i] = snd[i].v;
  }
  if (!err && pl.self && coo_in_box(produced, &pl.self_box, &self))
    err = dtl_fail(ctx, "out of memory for a sparse accumulate");
  if (!err)
    err = move_entries(ctx, &pl, own->type, order, scnt, sc, sv, self.n, self.c, self.v, TAG_SPARSE + 3,
                       "sparse accumulate", &n, &c, &v);
  /* the holder's piece gains every contribution to its block */
  if (!err && n > 0) {
    char msg[256];
    if (merge_into(own, n, c, v, msg, sizeof msg))
      err = dtl_fail(ctx, "sparse accumulate: %s", msg);
  }
  for (int i = 0; i < ns && snd; i++)
    free(snd[i].c), free(snd[i].v);
  free(snd), free(scnt), free(sc), free(sv), free(self.c), free(self.v), free(c), free(v);
  dtl_xplan_free(&pl);
  return err;
}
