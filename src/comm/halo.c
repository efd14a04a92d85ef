/* halo.c -- the halo exchange of a vector read at the stored coordinates of a sparse piece (the
 * SPMD rewrite `halo`: the x of y = A x with A held in row blocks, each rank reading x only at
 * the columns its rows store; PETSc's VecScatter does the same).
 *
 * The vector is partitioned in blocks along one grid dim D (replicated over the others).  Every
 * rank's buffer is laid out over the vector's whole box, but only the entries at the distinct
 * coordinates the rank's piece stores at one level are filled: the rank's own entries from its
 * block, the others from their owners along D.
 *
 * Inspector (once): the distinct coordinates, grouped by owner (a balanced partition's
 * boundaries, or the blocked formula of
 * LANGUAGE.md section 3: owner = g / ceil(N / G)); the request counts go to every member of the
 * sub-communicator of D (MPI_Alltoall), then the requested coordinates (MPI_Alltoallv), so that
 * every owner knows what to send to whom.  The result is cached (struct dtl_halo) under a key:
 * the piece's coordinate and position arrays at the level (their addresses), their lengths and
 * its box, the vector's block and the buffer's box.  A piece rebuilt elsewhere in memory, or
 * with another entry count or box, is noticed; one whose arrays were rewritten in place is not
 * (dtl_halo_free, which the generated PREFIX_structure_changed calls, drops the cache).
 *
 * A rank asks an owner for the whole span of the coordinates it needs from it where they fill
 * it but for small gaps (widen): then every message can leave from the owner's block and land
 * in the buffer as it is.
 *
 * Executor (every call): the members agree whether any of them must inspect again (a one-int
 * MPI_Allreduce over D's sub-communicator, so that no rank enters the inspector's collectives
 * alone), then owners pack the requested values and one exchange moves them (MPI_Irecv and
 * MPI_Isend with only the ranks that need something or send something); receivers unpack at
 * coordinate - box.lo.  Where each peer's list is one run, the owner sends from its block and
 * the receiver receives into the buffer directly (the block is not written while the exchange
 * travels: the rows that run meanwhile only read it).  Statistics: the values, under
 * DTL_OP_HALO, a message per peer on both ends; the inspector's coordinate lists and the
 * agreement are control traffic and not counted. */
#include "comm_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct dtl_halo {
  /* the key: what the lists were computed from */
  dtl_type t;
  int level;
  const int64_t *crd, *pos; /* the piece's arrays at the level (one width NULL) */
  const int32_t *crd32, *pos32;
  uint64_t serial; /* the piece's (a rebuilt piece may reuse freed addresses) */
  int64_t npos, nparent;
  dtl_box sbox, own, box;
  /* peers along D (ranks of the sub-communicator), with at least one value each */
  int nsend, nrecv;
  int *speer, *rpeer;
  int64_t *scnt, *rcnt;
  int64_t *sidx; /* per send peer in turn: element offsets into the rank's block */
  int64_t *ridx; /* per receive peer in turn: element offsets into the buffer */
  int64_t nsidx, nridx;
  /* ... as runs of consecutive offsets where they are long (at, length; NULL: element by
   * element): sbuf and rbuf hold the runs one after another */
  int64_t *srun_at, *srun_len, nsrun;
  int64_t *rrun_at, *rrun_len, nrrun;
  int64_t nlocal; /* the rank's own entries, as runs of consecutive coordinates: block offset
                   * -> buffer offset, llen entries each */
  int64_t *lsrc, *ldst, *llen;
  int64_t epoch;  /* the caller's epoch in which the members last agreed on the lists */
  char *sbuf, *rbuf; /* packed values */
  MPI_Request *req;
  int nreq;       /* posted by dtl_halo_begin, completed by dtl_halo_end */
  /* every peer's list is one run of consecutive offsets (widen): its values are sent straight
   * from the rank's block, or received straight into the buffer, neither packed nor unpacked
   * (sbuf or rbuf unused) */
  bool sdirect, rdirect;
  bool split;     /* the lists of dtl_halo_begin's split mode (part of the key) */
  uint8_t *rows;  /* split: per parent position at the level, 1 where it stores a coordinate
                   * outside the rank's block (it reads a ghost) */
  int64_t nghost_rows; /* ... how many */
};

int dtl_halo_is_local(const dtl_halo *cache) { return cache && cache->nrecv == 0; }

void dtl_halo_free(dtl_halo **cache) {
  if (!cache || !*cache)
    return;
  dtl_halo *h = *cache;
  free(h->speer);
  free(h->rpeer);
  free(h->scnt);
  free(h->rcnt);
  free(h->sidx);
  free(h->ridx);
  free(h->srun_at);
  free(h->srun_len);
  free(h->rrun_at);
  free(h->rrun_len);
  free(h->lsrc);
  free(h->ldst);
  free(h->llen);
  free(h->sbuf);
  free(h->rbuf);
  free(h->req);
  free(h->rows);
  free(h);
  *cache = NULL;
}

static bool same_box(const dtl_box *a, const dtl_box *b) {
  if (a->nd != b->nd)
    return false;
  for (int x = 0; x < a->nd; x++)
    if (a->lo[x] != b->lo[x] || a->hi[x] != b->hi[x])
      return false;
  return true;
}

static int64_t parent_count(const dtl_sparse *s, int level) {
  return level == 0 ? 1 : s->npos[level - 1];
}

static bool key_matches(const dtl_halo *h, dtl_type t, const dtl_sparse *s, int level, const dtl_box *own,
                        const dtl_box *box, bool split) {
  return h->split == split && h->t == t && h->level == level && h->crd == s->crd[level] && h->pos == s->pos[level] &&
         h->crd32 == s->crd32[level] && h->pos32 == s->pos32[level] && h->serial == s->serial &&
         h->npos == s->npos[level] && h->nparent == parent_count(s, level) && same_box(&h->sbox, &s->box) &&
         same_box(&h->own, own) && same_box(&h->box, box);
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Does any member of sub have err set?  (err is this rank's.) */
static int agree(dtl_ctx *ctx, MPI_Comm sub, int err, const char *what) {
  int any = 0;
  int rc = MPI_Allreduce(&err, &any, 1, MPI_INT, MPI_MAX, sub);
  if (rc != MPI_SUCCESS)
    return dtl_mpi_fail(ctx, rc, what);
  if (any && !err)
    return dtl_fail(ctx, "halo exchange: another rank failed (%s)", what);
  return any;
}

/* Element size in bytes, for the packing loops. */
static void gather_vals(size_t es, const char *src, const int64_t *idx, int64_t n, char *dst) {
  if (es == 8) {
    for (int64_t k = 0; k < n; k++)
      memcpy(dst + k * 8, src + idx[k] * 8, 8);
  } else if (es == 4) {
    for (int64_t k = 0; k < n; k++)
      memcpy(dst + k * 4, src + idx[k] * 4, 4);
  } else {
    for (int64_t k = 0; k < n; k++)
      memcpy(dst + k * (int64_t)es, src + idx[k] * (int64_t)es, es);
  }
}

static void scatter_vals(size_t es, const char *src, const int64_t *idx, int64_t n, char *dst) {
  if (es == 8) {
    for (int64_t k = 0; k < n; k++)
      memcpy(dst + idx[k] * 8, src + k * 8, 8);
  } else if (es == 4) {
    for (int64_t k = 0; k < n; k++)
      memcpy(dst + idx[k] * 4, src + k * 4, 4);
  } else {
    for (int64_t k = 0; k < n; k++)
      memcpy(dst + idx[k] * (int64_t)es, src + k * (int64_t)es, es);
  }
}

/* The offsets idx[0..n) as runs of consecutive offsets (*at, *len, *nr), where they average
 * at least RUN_MIN offsets (a copy per run then moves the values at memcpy's speed, where one
 * per value reads an offset for each: at 2 ranks on a random matrix of 10^6 rows, whose halo
 * is nearly the whole of the other block, 0.9 ms to pack 500,000 values one by one); else
 * nothing (*at NULL).  Nonzero: out of memory. */
#define RUN_MIN 8
static int make_runs(const int64_t *idx, int64_t n, int64_t **at, int64_t **len, int64_t *nr) {
  *at = *len = NULL, *nr = 0;
  int64_t runs = 0;
  for (int64_t k = 0; k < n; k++)
    runs += k == 0 || idx[k] != idx[k - 1] + 1;
  if (runs == 0 || n < RUN_MIN * runs)
    return 0;
  *at = malloc((size_t)runs * sizeof **at), *len = malloc((size_t)runs * sizeof **len);
  if (!*at || !*len) {
    free(*at), free(*len);
    *at = *len = NULL;
    return 1;
  }
  for (int64_t k = 0, r = -1; k < n; k++) {
    if (k == 0 || idx[k] != idx[k - 1] + 1)
      (*at)[++r] = idx[k], (*len)[r] = 0;
    (*len)[r]++;
  }
  *nr = runs;
  return 0;
}

/* The values at the runs of src, one after another into dst (gather) or back (scatter). */
static void gather_runs(size_t es, const char *src, const int64_t *at, const int64_t *len, int64_t nr, char *dst) {
  for (int64_t r = 0; r < nr; r++) {
    memcpy(dst, src + at[r] * (int64_t)es, (size_t)len[r] * es);
    dst += len[r] * (int64_t)es;
  }
}

static void scatter_runs(size_t es, const char *src, const int64_t *at, const int64_t *len, int64_t nr, char *dst) {
  for (int64_t r = 0; r < nr; r++) {
    memcpy(dst + at[r] * (int64_t)es, src, (size_t)len[r] * es);
    src += len[r] * (int64_t)es;
  }
}

/* Where the coordinates a rank asks of one owner fill their span but for gaps of at most
 * 1/WIDEN_GAP of their number, it asks for the whole span instead: one run, which the owner
 * sends straight from its block and the rank receives straight into its buffer (sdirect,
 * rdirect), for at most that share more bytes.  At 2 ranks on a random matrix of 10^6 rows,
 * 10 a row, a rank needs 99.3% of the other's block: packing and unpacking it took longer than
 * the 0.7% more values.  want[0..n) is sorted and distinct and owner(g) increases with g; the
 * rank's own coordinates (owner me) stay as they are.  *out (malloc'ed), *nout; nonzero: out of
 * memory. */
#define WIDEN_GAP 8
/* the member of D's sub-communicator that owns coordinate g: a balanced partition's split, or
 * the blocked formula g / ceil(N / G) */
static int64_t owner_of(const dtl_dist *d, int dim, int G, int64_t blk, int64_t g) {
  return d->split[dim] ? dtl_split_owner(d->split[dim], G, g) : g / blk;
}

static int widen(const int64_t *want, int64_t n, const dtl_dist *d, int dim, int G, int64_t blk, int me, int64_t **out,
                 int64_t *nout) {
  int64_t m = 0;
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1 && !(*out = malloc((size_t)(m > 0 ? m : 1) * sizeof **out)))
      return 1;
    m = 0;
    for (int64_t k0 = 0, k1; k0 < n; k0 = k1) {
      int64_t c = owner_of(d, dim, G, blk, want[k0]);
      for (k1 = k0 + 1; k1 < n && owner_of(d, dim, G, blk, want[k1]) == c; k1++)
        ;
      int64_t span = want[k1 - 1] - want[k0] + 1, cnt = k1 - k0;
      bool whole = c != me && (span - cnt) * WIDEN_GAP <= cnt;
      for (int64_t q = 0; q < (whole ? span : cnt); q++, m++)
        if (pass == 1)
          (*out)[m] = whole ? want[k0] + q : want[k0 + q];
    }
  }
  *nout = m;
  return 0;
}

/* Is each peer's part of idx (cnt[k] offsets in turn) one run of consecutive offsets? */
static bool each_one_run(const int64_t *idx, const int64_t *cnt, int npeers) {
  for (int k = 0, off = 0; k < npeers; off += (int)cnt[k++])
    for (int64_t j = 1; j < cnt[k]; j++)
      if (idx[off + j] != idx[off] + j)
        return false;
  return true;
}

/* The checks every rank can make alone; a message, or NULL. */
static const char *check_args(const dtl_ctx *ctx, int dim, const dtl_dist *d, const dtl_sparse *s, int level,
                              const dtl_box *box) {
  if (dim < 0 || dim >= ctx->ndims)
    return "the grid dim is out of range";
  if (d->order != 1 || d->replicated_everywhere || d->kind[dim] != DTL_DIM_PART || d->tdim[dim] != 0)
    return "the vector is not partitioned along the grid dim";
  for (int g = 0; g < d->ngrid; g++)
    if (g != dim && d->kind[g] != DTL_DIM_STAR)
      return "the vector is not replicated over the other grid dims";
  if (!s || level < 0 || level >= s->order || s->level[level] != DTL_LEVEL_COMPRESSED)
    return "the sparse piece has no compressed level there";
  if (box->nd != 1)
    return "the buffer's box is not a vector's";
  return NULL;
}

/* The distinct global coordinates of s at level inside [lo, hi), sorted (malloc'ed into *out);
 * with rows, only those of the parent positions p where rows[p] is 1. */
static int distinct_coords(const dtl_sparse *s, int level, int64_t lo, int64_t hi, const uint8_t *rows,
                           int64_t **out, int64_t *n) {
  int64_t m = parent_count(s, level) > 0 ? s->npos[level] : 0;
  *out = NULL, *n = 0;
  if (m <= 0)
    return 0;
  uint8_t *skip = NULL; /* per position: its parent's row is not wanted */
  if (rows) {
    skip = malloc((size_t)m);
    if (!skip)
      return 1;
    for (int64_t p = 0, np = parent_count(s, level); p < np; p++)
      memset(skip + dtl_sp_pos(s, level, p), !rows[p], (size_t)(dtl_sp_pos(s, level, p + 1) - dtl_sp_pos(s, level, p)));
  }
  int64_t *c = malloc((size_t)m * sizeof *c);
  if (!c) {
    free(skip);
    return 1;
  }
  int64_t k = 0, base = s->box.lo[level];
  /* a bitmap over [lo, hi) where it is not much larger than the list (one pass, no sort) */
  uint64_t *bits = hi - lo <= 64 * m + 4096 ? calloc((size_t)((hi - lo) / 64 + 1), sizeof *bits) : NULL;
  if (bits) {
    for (int64_t q = 0; q < m; q++) {
      int64_t g = dtl_sp_crd(s, level, q) + base - lo;
      if (g >= 0 && g < hi - lo && !(skip && skip[q]))
        bits[g >> 6] |= 1ull << (g & 63);
    }
    for (int64_t w = 0; w <= (hi - lo) / 64; w++)
      for (uint64_t b = bits[w]; b; b &= b - 1)
        c[k++] = lo + w * 64 + __builtin_ctzll(b);
    free(bits);
    free(skip);
    *out = c, *n = k;
    return 0;
  }
  for (int64_t q = 0; q < m; q++) {
    int64_t g = dtl_sp_crd(s, level, q) + base;
    if (g >= lo && g < hi && !(skip && skip[q]))
      c[k++] = g;
  }
  free(skip);
  qsort(c, (size_t)k, sizeof *c, cmp64);
  int64_t u = 0;
  for (int64_t q = 0; q < k; q++)
    if (u == 0 || c[q] != c[u - 1])
      c[u++] = c[q];
  *out = c, *n = u;
  return 0;
}

/* Split mode: which parent positions at level (rows) store a coordinate outside own. */
static int split_rows(const dtl_sparse *s, int level, const dtl_box *own, dtl_halo *h) {
  int64_t np = parent_count(s, level);
  h->rows = malloc((size_t)(np > 0 ? np : 1));
  if (!h->rows)
    return 1;
  const int64_t lo = own->lo[0] - s->box.lo[level], hi = own->hi[0] - s->box.lo[level];
  for (int64_t p = 0; p < np; p++) {
    int64_t a = dtl_sp_pos(s, level, p), b = dtl_sp_pos(s, level, p + 1);
    /* coordinates increase along a segment: its first and last decide */
    h->rows[p] = b > a && (dtl_sp_crd(s, level, a) < lo || dtl_sp_crd(s, level, b - 1) >= hi);
    h->nghost_rows += h->rows[p];
  }
  return 0;
}

/* The inspector: collective over sub (every member inspects together).  Returns nonzero on every
 * member when one fails. */
static int inspect(dtl_ctx *ctx, MPI_Comm sub, int dim, const dtl_dist *d, dtl_type t, const dtl_box *own,
                   const dtl_sparse *s, int level, const dtl_box *box, bool split, dtl_halo **cache) {
  const int G = (int)ctx->dims[dim], me = (int)ctx->coords[dim];
  const int64_t N = d->extent[0], blk = dtl_ceildiv(N, G);
  const size_t es = dtl_type_size(t);
  int err = 0, rc;
  int64_t *want = NULL, nwant = 0;
  int64_t *scount = calloc((size_t)G, sizeof *scount), *rcount = calloc((size_t)G, sizeof *rcount);
  int *sc = calloc((size_t)G, sizeof *sc), *sd = calloc((size_t)G, sizeof *sd);
  int *rcv = calloc((size_t)G, sizeof *rcv), *rd = calloc((size_t)G, sizeof *rd);
  int64_t *got = NULL;
  dtl_halo *h = calloc(1, sizeof *h);
  const char *why = check_args(ctx, dim, d, s, level, box);
  if (why)
    err = dtl_fail(ctx, "halo exchange: %s", why);
  else if (!scount || !rcount || !sc || !sd || !rcv || !rd || !h)
    err = dtl_fail(ctx, "halo exchange: out of memory");
  else if (split && split_rows(s, level, own, h))
    err = dtl_fail(ctx, "halo exchange: out of memory for the rows");
  else if (distinct_coords(s, level, dtl_max(box->lo[0], 0), dtl_min(box->hi[0], N), h->rows, &want, &nwant))
    err = dtl_fail(ctx, "halo exchange: out of memory for %lld coordinates", (long long)s->npos[level]);
  else {
    int64_t *wide = NULL, nwide = 0;
    if (widen(want, nwant, d, dim, G, blk, me, &wide, &nwide))
      err = dtl_fail(ctx, "halo exchange: out of memory for %lld coordinates", (long long)nwant);
    else
      free(want), want = wide, nwant = nwide;
  }
  /* what this rank asks of each owner (want is sorted: each owner's coordinates are a run) and
   * what it copies from its own block */
  int64_t nlocal = 0;
  for (int64_t k = 0; k < nwant && !err; k++) {
    int64_t c = owner_of(d, dim, G, blk, want[k]);
    if (c == me)
      nlocal++;
    else
      scount[c]++;
  }
  int64_t total = 0;
  for (int c = 0; c < G && !err; c++) {
    total += scount[c];
    if (scount[c] > INT_MAX || total > INT_MAX)
      err = dtl_fail(ctx, "halo exchange: more than %d coordinates to ask for", INT_MAX);
  }
  if ((err = agree(ctx, sub, err, "halo inspector, local lists")))
    goto done;
  if ((rc = MPI_Alltoall(scount, 1, MPI_INT64_T, rcount, 1, MPI_INT64_T, sub)) != MPI_SUCCESS) {
    err = dtl_mpi_fail(ctx, rc, "MPI_Alltoall (halo request counts)");
    goto done;
  }
  int64_t rtotal = 0;
  for (int c = 0; c < G; c++) {
    sc[c] = (int)scount[c], sd[c] = c ? sd[c - 1] + sc[c - 1] : 0;
    rtotal += rcount[c];
    if (rcount[c] < 0 || rtotal > INT_MAX)
      err = dtl_fail(ctx, "halo exchange: more than %d coordinates asked of this rank", INT_MAX);
    else
      rcv[c] = (int)rcount[c], rd[c] = c ? rd[c - 1] + rcv[c - 1] : 0;
  }
  int64_t *asked = malloc((size_t)(total > 0 ? total : 1) * sizeof *asked);
  got = malloc((size_t)(rtotal > 0 ? rtotal : 1) * sizeof *got);
  if (!err && (!asked || !got))
    err = dtl_fail(ctx, "halo exchange: out of memory for the coordinate lists");
  if (!err) {
    h->lsrc = malloc((size_t)(nlocal > 0 ? nlocal : 1) * sizeof *h->lsrc);
    h->ldst = malloc((size_t)(nlocal > 0 ? nlocal : 1) * sizeof *h->ldst);
    h->llen = malloc((size_t)(nlocal > 0 ? nlocal : 1) * sizeof *h->llen);
    h->ridx = malloc((size_t)(total > 0 ? total : 1) * sizeof *h->ridx);
    if (!h->lsrc || !h->ldst || !h->llen || !h->ridx)
      err = dtl_fail(ctx, "halo exchange: out of memory for the coordinate lists");
  }
  if (!err) {
    /* want is sorted and owners' blocks increase with their coordinate: asked[] is in the
     * order of the send displacements already */
    int64_t a = 0;
    for (int64_t k = 0; k < nwant; k++) {
      int64_t g = want[k];
      if (owner_of(d, dim, G, blk, g) == me) {
        /* a run of consecutive coordinates grows (want is sorted and distinct) */
        if (h->nlocal && h->lsrc[h->nlocal - 1] + h->llen[h->nlocal - 1] == g - own->lo[0])
          h->llen[h->nlocal - 1]++;
        else
          h->lsrc[h->nlocal] = g - own->lo[0], h->ldst[h->nlocal] = g - box->lo[0], h->llen[h->nlocal++] = 1;
        if (g < own->lo[0] || g >= own->hi[0])
          err = dtl_fail(ctx, "halo exchange: coordinate %lld is not in this rank's block", (long long)g);
      } else {
        asked[a] = g;
        h->ridx[a++] = g - box->lo[0];
      }
    }
    h->nridx = total;
  }
  if ((err = agree(ctx, sub, err, "halo inspector, lists"))) {
    free(asked);
    goto done;
  }
  rc = MPI_Alltoallv(asked, sc, sd, MPI_INT64_T, got, rcv, rd, MPI_INT64_T, sub);
  free(asked);
  if (rc != MPI_SUCCESS) {
    err = dtl_mpi_fail(ctx, rc, "MPI_Alltoallv (halo requests)");
    goto done;
  }
  /* what this rank sends: the requested coordinates as offsets into its block */
  h->nsidx = rtotal;
  h->sidx = malloc((size_t)(rtotal > 0 ? rtotal : 1) * sizeof *h->sidx);
  if (!h->sidx)
    err = dtl_fail(ctx, "halo exchange: out of memory for the send list");
  for (int64_t k = 0; k < rtotal && !err; k++) {
    if (got[k] < own->lo[0] || got[k] >= own->hi[0])
      err = dtl_fail(ctx, "halo exchange: coordinate %lld asked of a rank whose block is [%lld, %lld)", (long long)got[k],
                     (long long)own->lo[0], (long long)own->hi[0]);
    else
      h->sidx[k] = got[k] - own->lo[0];
  }
  if (!err && (make_runs(h->sidx, h->nsidx, &h->srun_at, &h->srun_len, &h->nsrun) ||
               make_runs(h->ridx, h->nridx, &h->rrun_at, &h->rrun_len, &h->nrrun)))
    err = dtl_fail(ctx, "halo exchange: out of memory for the runs of the lists");
  /* the peers that exchange at least one value */
  if (!err) {
    for (int c = 0; c < G; c++)
      h->nsend += rcount[c] > 0, h->nrecv += scount[c] > 0;
    h->sdirect = each_one_run(h->sidx, rcount, G), h->rdirect = each_one_run(h->ridx, scount, G);
    h->speer = malloc((size_t)(h->nsend + 1) * sizeof *h->speer);
    h->scnt = malloc((size_t)(h->nsend + 1) * sizeof *h->scnt);
    h->rpeer = malloc((size_t)(h->nrecv + 1) * sizeof *h->rpeer);
    h->rcnt = malloc((size_t)(h->nrecv + 1) * sizeof *h->rcnt);
    h->req = malloc((size_t)(h->nsend + h->nrecv + 1) * sizeof *h->req);
    h->sbuf = malloc((size_t)(rtotal > 0 && !h->sdirect ? rtotal : 1) * es);
    h->rbuf = malloc((size_t)(total > 0 && !h->rdirect ? total : 1) * es);
    if (!h->speer || !h->scnt || !h->rpeer || !h->rcnt || !h->req || !h->sbuf || !h->rbuf)
      err = dtl_fail(ctx, "halo exchange: out of memory for the message buffers");
  }
  if (!err) {
    int ns = 0, nr = 0;
    for (int c = 0; c < G; c++) {
      if (rcount[c] > 0)
        h->speer[ns] = c, h->scnt[ns++] = rcount[c];
      if (scount[c] > 0)
        h->rpeer[nr] = c, h->rcnt[nr++] = scount[c];
    }
  }
  if ((err = agree(ctx, sub, err, "halo inspector, send lists")))
    goto done;
  h->t = t, h->level = level, h->split = split;
  h->crd = s->crd[level], h->pos = s->pos[level];
  h->crd32 = s->crd32[level], h->pos32 = s->pos32[level], h->serial = s->serial;
  h->npos = s->npos[level], h->nparent = parent_count(s, level);
  h->sbox = s->box, h->own = *own, h->box = *box;
  *cache = h;
  h = NULL;
done:
  dtl_halo_free(&h);
  free(want);
  free(got);
  free(scount);
  free(rcount);
  free(sc);
  free(sd);
  free(rcv);
  free(rd);
  return err;
}

int dtl_halo_begin(dtl_ctx *ctx, int dim, const dtl_dist *d, dtl_type t, const void *local, const dtl_box *own,
                   const dtl_sparse *s, int level, const dtl_box *box, void *buf, dtl_halo **cache, int64_t epoch,
                   bool split) {
  if (dim < 0 || dim >= ctx->ndims)
    return dtl_fail(ctx, "halo exchange: grid dim %d is out of range", dim);
  if (split && level < 1)
    return dtl_fail(ctx, "halo exchange: split mode needs a level with parents (level %d)", level);
  MPI_Comm sub = dtl_subcomm(ctx, 1u << dim);
  if (sub == MPI_COMM_NULL)
    return dtl_fail(ctx, "halo exchange: no sub-communicator for grid dim %d", dim);
  /* inspect again where any member's piece changed (or was never seen) */
  int stale = !*cache || !s || level < 0 || level >= s->order || !key_matches(*cache, t, s, level, own, box, split);
  int rc;
  if (*cache && epoch >= 0 && (*cache)->epoch == epoch) {
    /* the members agreed in this epoch already, and a piece does not change inside one */
    if (stale)
      return dtl_fail(ctx, "halo exchange: the sparse piece changed within one compute");
  } else {
    int any = 0;
    rc = MPI_Allreduce(&stale, &any, 1, MPI_INT, MPI_MAX, sub);
    if (rc != MPI_SUCCESS)
      return dtl_mpi_fail(ctx, rc, "MPI_Allreduce (halo structure check)");
    int members = 1;
    MPI_Comm_size(sub, &members);
    if (members > 1) {
      dtl_count_send(ctx, DTL_OP_ALLREDUCE, (int64_t)sizeof stale, 1);
      dtl_count_recv(ctx, DTL_OP_ALLREDUCE, (int64_t)sizeof stale, 1);
    }
    if (any) {
      dtl_halo_free(cache);
      if (inspect(ctx, sub, dim, d, t, own, s, level, box, split, cache))
        return 1;
    }
    (*cache)->epoch = epoch;
  }
  dtl_halo *h = *cache;
  const size_t es = dtl_type_size(t);
  MPI_Datatype base = dtl_type_mpi(t);
  int err = 0, nreq = 0;
  /* receive first, then pack and send */
  int64_t off = 0;
  for (int k = 0; k < h->nrecv && !err; k++) {
    int cnt;
    MPI_Datatype dt = base;
    if ((rc = dtl_count_type(t, h->rcnt[k], &cnt, &dt)) == MPI_SUCCESS) {
      char *at = h->rdirect ? (char *)buf + h->ridx[off] * (int64_t)es : h->rbuf + off * (int64_t)es;
      rc = MPI_Irecv(at, cnt, dt, h->rpeer[k], DTL_TAG_HALO, sub, &h->req[nreq]);
      dtl_count_free(&dt);
    }
    if (rc != MPI_SUCCESS)
      err = dtl_mpi_fail(ctx, rc, "MPI_Irecv (halo)");
    else
      nreq++, dtl_count_recv(ctx, DTL_OP_HALO, h->rcnt[k] * (int64_t)es, 1);
    off += h->rcnt[k];
  }
  if (h->sdirect)
    ; /* each message is a run of the block, sent from there */
  else if (h->srun_at)
    gather_runs(es, local, h->srun_at, h->srun_len, h->nsrun, h->sbuf);
  else
    gather_vals(es, local, h->sidx, h->nsidx, h->sbuf);
  off = 0;
  for (int k = 0; k < h->nsend && !err; k++) {
    int cnt;
    MPI_Datatype dt = base;
    if ((rc = dtl_count_type(t, h->scnt[k], &cnt, &dt)) == MPI_SUCCESS) {
      const char *at = h->sdirect ? (const char *)local + h->sidx[off] * (int64_t)es : h->sbuf + off * (int64_t)es;
      rc = MPI_Isend(at, cnt, dt, h->speer[k], DTL_TAG_HALO, sub, &h->req[nreq]);
      dtl_count_free(&dt);
    }
    if (rc != MPI_SUCCESS)
      err = dtl_mpi_fail(ctx, rc, "MPI_Isend (halo)");
    else
      nreq++, dtl_count_send(ctx, DTL_OP_HALO, h->scnt[k] * (int64_t)es, 1);
    off += h->scnt[k];
  }
  /* the rank's own entries while the messages travel (none where it receives nothing: the
   * caller reads its block in place then, dtl_halo_is_local; in split mode only those that
   * rows reading a ghost read) */
  for (int64_t k = 0; k < h->nlocal && h->nrecv; k++)
    memcpy((char *)buf + h->ldst[k] * (int64_t)es, (const char *)local + h->lsrc[k] * (int64_t)es, (size_t)h->llen[k] * es);
  h->nreq = nreq;
  if (err && nreq) /* complete what was posted before failing */
    MPI_Waitall(nreq, h->req, MPI_STATUSES_IGNORE), h->nreq = 0;
  return err;
}

int dtl_halo_end(dtl_ctx *ctx, dtl_halo *cache, void *buf) {
  if (!cache)
    return dtl_fail(ctx, "halo exchange: no exchange was begun");
  int rc, err = 0, nreq = cache->nreq;
  cache->nreq = 0;
  if (nreq && (rc = MPI_Waitall(nreq, cache->req, MPI_STATUSES_IGNORE)) != MPI_SUCCESS)
    err = dtl_mpi_fail(ctx, rc, "MPI_Waitall (halo)");
  if (err || cache->rdirect)
    ; /* received in place */
  else if (cache->rrun_at)
    scatter_runs(dtl_type_size(cache->t), cache->rbuf, cache->rrun_at, cache->rrun_len, cache->nrrun, buf);
  else
    scatter_vals(dtl_type_size(cache->t), cache->rbuf, cache->ridx, cache->nridx, buf);
  return err;
}

const uint8_t *dtl_halo_rows(const dtl_halo *cache) { return cache && cache->nghost_rows ? cache->rows : NULL; }

int64_t dtl_halo_nrows(const dtl_halo *cache) { return cache && cache->rows ? cache->nparent : 0; }

int64_t dtl_halo_skip(const uint8_t *rows, int64_t p, int64_t n, int flag) {
  if (p + 1 >= n)
    return 1;
  const uint8_t *q = memchr(rows + p + 1, flag, (size_t)(n - p - 1));
  return q ? q - (rows + p) : n - p;
}

int dtl_halo_exchange(dtl_ctx *ctx, int dim, const dtl_dist *d, dtl_type t, const void *local,
                      const dtl_box *own, const dtl_sparse *s, int level, const dtl_box *box, void *buf,
                      dtl_halo **cache, int64_t epoch) {
  if (dtl_halo_begin(ctx, dim, d, t, local, own, s, level, box, buf, cache, epoch, false))
    return 1;
  return dtl_halo_end(ctx, *cache, buf);
}
