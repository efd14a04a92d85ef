/* comm.c -- communication of distributed tensors: the plans of point-to-point fetch and
 * accumulate (without a handshake), of broadcasts of pieces over sub-communicators and of
 * reductions; the MPI transport over which the executor (exec.c) runs them, shifts included,
 * for the host functions of distal/runtime.h; the gather of drivers, and statistics.  The
 * plans and the executor are shared with the device runtime (comm_internal.h). */
#include "comm_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[DTL_NOPS] = {"exchange", "bcast",     "shift",
                                               "reduce",   "allreduce", "io", "halo"};

int dtl_format_box(char *buf, size_t len, const dtl_box *b) {
  size_t at = 0;
  if (b->nd == 0)
    return snprintf(buf, len, "(scalar)");
  for (int d = 0; d < b->nd && at < len; d++)
    at += (size_t)snprintf(buf + at, len - at, "%s[%lld,%lld)", d ? "x" : "", (long long)b->lo[d],
                           (long long)b->hi[d]);
  return (int)at;
}

static void format_coords(char *buf, size_t len, int n, const int64_t *c) {
  size_t at = (size_t)snprintf(buf, len, "(");
  for (int d = 0; d < n && at < len; d++)
    at += (size_t)snprintf(buf + at, len - at, "%s%lld", d ? "," : "", (long long)c[d]);
  if (at < len)
    snprintf(buf + at, len - at, ")");
}

bool dtl_contiguous_in(const dtl_box *box, const dtl_box *region, int64_t *off) {
  int nd = region->nd, k = nd - 1;
  while (k > 0 && region->lo[k] == box->lo[k] && region->hi[k] == box->hi[k])
    k--;
  for (int d = 0; d < k; d++)
    if (region->hi[d] - region->lo[d] != 1)
      return false;
  int64_t o = 0;
  for (int d = 0; d < nd; d++)
    o = o * (box->hi[d] - box->lo[d]) + (region->lo[d] - box->lo[d]);
  *off = o;
  return true;
}

static bool holder_canonical(const dtl_ctx *ctx, const dtl_dist *d) {
  return d->replicated_everywhere ? ctx->rank == 0 : dtl_dist_canonical(d, ctx->coords);
}

/* ---- whom a processor talks to ----------------------------------------------------------- */
static void push(dtl_piece_list *l, int peer, const dtl_box *box) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 16;
    dtl_piece *v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) {
      l->oom = true;
      return;
    }
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n].peer = peer;
  l->v[l->n++].box = *box;
}

typedef void (*visit_fn)(void *acc, int holder, const dtl_box *piece);

/* Enumerate, in a fixed order that every rank reproduces, the holders that serve the
 * processor at pc with the part of `want` they hold.  Per grid dim: PART dims range over
 * the blocks that intersect want, FIXED dims sit at their coordinate, STAR dims at pc's
 * coordinate (or at every coordinate for dims in star_all).  For dims in `align` the
 * holder must have pc's coordinate.  Holders differ in their coordinates, so each holder
 * appears at most once and every (sender, receiver) pair exchanges at most one piece. */
static void for_each_holder(const dtl_ctx *ctx, const dtl_dist *d, const int64_t *pc,
                            const dtl_box *want, unsigned star_all, unsigned align, visit_fn visit,
                            void *acc) {
  int64_t lo[DTL_MAX_DIMS], hi[DTL_MAX_DIMS], hc[DTL_MAX_DIMS];
  if (dtl_box_empty(want))
    return;
  unsigned seen = 0;
  for (int g = 0; g < ctx->ndims; g++) {
    dtl_dim_kind kind = d->replicated_everywhere ? DTL_DIM_STAR : d->kind[g];
    bool aligned = (align >> g) & 1u;
    if (kind == DTL_DIM_PART && (seen >> d->tdim[g] & 1u)) {
      /* a nested partition: try every coordinate, the blocks decide */
      lo[g] = aligned ? pc[g] : 0;
      hi[g] = aligned ? pc[g] : ctx->dims[g] - 1;
    } else if (kind == DTL_DIM_PART) {
      int t = d->tdim[g];
      seen |= 1u << t;
      int64_t n = d->extent[t], s = dtl_ceildiv(n, ctx->dims[g]);
      int64_t wl = dtl_max(want->lo[t], 0), wh = dtl_min(want->hi[t], n);
      if (wh <= wl || s == 0)
        return;
      if (d->split[g]) { /* a balanced partition: the blocks that hold wl and wh - 1 */
        lo[g] = dtl_split_owner(d->split[g], ctx->dims[g], wl);
        hi[g] = dtl_split_owner(d->split[g], ctx->dims[g], wh - 1);
      } else {
        lo[g] = wl / s;
        hi[g] = dtl_min(ctx->dims[g] - 1, (wh - 1) / s);
      }
      if (aligned) {
        if (pc[g] < lo[g] || pc[g] > hi[g])
          return;
        lo[g] = hi[g] = pc[g];
      }
    } else if (kind == DTL_DIM_FIXED) {
      if (aligned && pc[g] != d->fixed[g])
        return;
      lo[g] = hi[g] = d->fixed[g];
    } else if ((star_all >> g) & 1u) {
      lo[g] = 0;
      hi[g] = ctx->dims[g] - 1;
    } else {
      lo[g] = hi[g] = pc[g];
    }
    hc[g] = lo[g];
  }
  for (;;) {
    dtl_box block, part;
    dtl_dist_block(ctx, d, hc, &block);
    if (dtl_box_intersect(want, &block, &part))
      visit(acc, dtl_rank_of(ctx, hc), &part);
    int g = ctx->ndims - 1;
    while (g >= 0 && hc[g] == hi[g]) {
      hc[g] = lo[g];
      g--;
    }
    if (g < 0)
      return;
    hc[g]++;
  }
}

void dtl_xplan_free(dtl_xplan *pl) {
  free(pl->send.v);
  free(pl->recv.v);
  pl->send.v = pl->recv.v = NULL;
}

/* fetch: p receives from the holder */
static void visit_fetch(void *acc, int holder, const dtl_box *part) {
  dtl_xplan *pl = acc;
  if (pl->p == pl->me && holder == pl->me) {
    pl->self = true;
    pl->self_box = *part;
  } else if (pl->p == pl->me) {
    push(&pl->recv, holder, part);
  } else if (holder == pl->me) {
    push(&pl->send, pl->p, part);
  }
}

/* accumulate: the executor p sends to the holder */
static void visit_accumulate(void *acc, int holder, const dtl_box *part) {
  dtl_xplan *pl = acc;
  if (pl->p == pl->me && holder == pl->me) {
    pl->self = true;
    pl->self_box = *part;
  } else if (pl->p == pl->me) {
    push(&pl->send, holder, part);
  } else if (holder == pl->me) {
    push(&pl->recv, pl->p, part);
  }
}

/* Debug mode: an all-to-all of the boxes every rank is about to send, before any data
 * moves, so that a disagreement between sender and receiver becomes one clear error on
 * every rank instead of a hang or a truncated message. */
static int debug_check_plan(dtl_ctx *ctx, const dtl_xplan *pl, const char *what) {
  const int W = 2 + 2 * DTL_MAX_DIMS, P = ctx->size;
  int64_t *out = calloc((size_t)P * W, sizeof *out), *in = calloc((size_t)P * W, sizeof *in);
  int err = 0;
  if (!out || !in)
    err = dtl_fail(ctx, "out of memory");
  for (int i = 0; !err && i < pl->send.n; i++) {
    const dtl_piece *s = &pl->send.v[i];
    int64_t *row = out + (size_t)s->peer * W;
    row[0] = 1;
    row[1] = s->box.nd;
    for (int k = 0; k < s->box.nd; k++) {
      row[2 + k] = s->box.lo[k];
      row[2 + DTL_MAX_DIMS + k] = s->box.hi[k];
    }
  }
  int rc = err ? MPI_SUCCESS : MPI_Alltoall(out, W, MPI_INT64_T, in, W, MPI_INT64_T, ctx->cart);
  if (rc != MPI_SUCCESS)
    err = dtl_mpi_fail(ctx, rc, "MPI_Alltoall");
  for (int q = 0; !err && q < P; q++) {
    if (q == ctx->rank)
      continue;
    const int64_t *row = in + (size_t)q * W;
    const dtl_box *expect = NULL;
    for (int i = 0; i < pl->recv.n; i++)
      if (pl->recv.v[i].peer == q)
        expect = &pl->recv.v[i].box;
    dtl_box got = {.nd = (int)row[1]};
    for (int k = 0; k < got.nd && k < DTL_MAX_DIMS; k++) {
      got.lo[k] = row[2 + k];
      got.hi[k] = row[2 + DTL_MAX_DIMS + k];
    }
    bool ok = row[0] ? (expect && got.nd == expect->nd && dtl_box_equal(&got, expect)) : !expect;
    if (!ok) {
      char gs[200] = "nothing", es[200] = "nothing", mc[64], qc[64];
      if (row[0])
        dtl_format_box(gs, sizeof gs, &got);
      if (expect)
        dtl_format_box(es, sizeof es, expect);
      int64_t qcoords[DTL_MAX_DIMS];
      dtl_coords_of(ctx, q, qcoords);
      format_coords(mc, sizeof mc, ctx->ndims, ctx->coords);
      format_coords(qc, sizeof qc, ctx->ndims, qcoords);
      err = dtl_fail(ctx, "debug: %s: rank %d %s expects %s from rank %d %s, which sends %s", what,
                     ctx->rank, mc, es, q, qc, gs);
    }
  }
  free(out);
  free(in);
  return dtl_any_error(ctx, err);
}

/* Debug mode: the caller's idea of this rank's block must be the ownership map's. */
static int debug_check_own(dtl_ctx *ctx, const dtl_box *own, const dtl_box *mine,
                           const char *what) {
  if (!own || (own->nd == mine->nd && dtl_box_equal(own, mine)))
    return 0;
  char a[200], b[200];
  dtl_format_box(a, sizeof a, own);
  dtl_format_box(b, sizeof b, mine);
  return dtl_fail(ctx, "debug: %s: rank %d passes its block as %s but holds %s", what, ctx->rank, a,
                  b);
}

/* Evaluate box(p) for every processor p and build this rank's plan.  Every rank sees the
 * same boxes, so a malformed box fails on every rank alike. */
static int build_plan(dtl_ctx *ctx, const dtl_dist *d, dtl_box_fn boxfn, const void *arg,
                      bool fetch, unsigned exec_mask, dtl_xplan *pl, dtl_box *mybox) {
  memset(pl, 0, sizeof *pl);
  pl->me = ctx->rank;
  for (int p = 0; p < ctx->size; p++) {
    int64_t pc[DTL_MAX_DIMS];
    dtl_box b;
    memset(&b, 0, sizeof b);
    b.nd = d->order;
    dtl_coords_of(ctx, p, pc);
    boxfn(arg, pc, &b);
    if (b.nd != d->order) {
      char cs[64];
      format_coords(cs, sizeof cs, ctx->ndims, pc);
      return dtl_fail(ctx, "%s: the box of processor %s has %d dims, the tensor %d",
                      fetch ? "fetch" : "accumulate", cs, b.nd, d->order);
    }
    if (p == ctx->rank)
      *mybox = b;
    pl->p = p;
    if (fetch)
      for_each_holder(ctx, d, pc, &b, 0, 0, visit_fetch, pl);
    else
      for_each_holder(ctx, d, pc, &b, exec_mask, ~exec_mask, visit_accumulate, pl);
  }
  if (pl->send.oom || pl->recv.oom)
    return dtl_fail(ctx, "out of memory planning an exchange");
  return 0;
}

int dtl_xplan_build(dtl_ctx *ctx, const dtl_dist *d, const dtl_box *own, dtl_box_fn boxfn,
                    const void *arg, bool fetch, unsigned exec_mask, dtl_xplan *pl, dtl_box *mine,
                    dtl_box *mybox) {
  const char *what = fetch ? "fetch" : "accumulate";
  bool holder = dtl_dist_block(ctx, d, ctx->coords, mine);
  exec_mask &= (1u << ctx->ndims) - 1u;
  int err = build_plan(ctx, d, boxfn, arg, fetch, fetch ? 0 : exec_mask, pl, mybox);
  if (!err && ctx->debug) {
    err = dtl_any_error(ctx, holder && debug_check_own(ctx, own, mine, what));
    if (!err)
      err = debug_check_plan(ctx, pl, what);
  }
  return err;
}


/* ---- broadcast of pieces --------------------------------------------------------------- */
static void visit_root(void *acc, int holder, const dtl_box *part) {
  push(acc, holder, part);
}

/* Debug mode: the members must agree on `need`; compare the min and max over the
 * sub-communicator (one allreduce of (v, -v)). */
static int debug_same_need(dtl_ctx *ctx, MPI_Comm comm, const dtl_box *need) {
  const int W = 1 + 2 * DTL_MAX_DIMS;
  int64_t v[2 * W], r[2 * W];
  memset(v, 0, sizeof v);
  v[0] = need->nd;
  for (int k = 0; k < need->nd; k++) {
    v[1 + k] = need->lo[k];
    v[1 + DTL_MAX_DIMS + k] = need->hi[k];
  }
  for (int i = 0; i < W; i++)
    v[W + i] = -v[i];
  int rc = MPI_Allreduce(v, r, 2 * W, MPI_INT64_T, MPI_MAX, comm);
  if (rc != MPI_SUCCESS)
    return dtl_mpi_fail(ctx, rc, "MPI_Allreduce");
  for (int i = 0; i < W; i++)
    if (r[i] != -r[W + i]) {
      char b[200];
      dtl_format_box(b, sizeof b, need);
      return dtl_fail(ctx,
                      "debug: bcast: members of the broadcast need different boxes "
                      "(rank %d needs %s)",
                      ctx->rank, b);
    }
  return 0;
}

void dtl_bplan_free(dtl_bplan *bp) {
  free(bp->roots.v);
  bp->roots.v = NULL;
  bp->roots.n = bp->roots.cap = 0;
}

/* Members of the sub-communicator share their coordinates on the dims outside mask, so
 * along those dims the data must come from their own coordinate; STAR dims of the mask
 * are dropped, since every member holds that replica itself. */
int dtl_bplan_build(dtl_ctx *ctx, unsigned mask, const dtl_dist *d, const dtl_box *need,
                    dtl_bplan *bp) {
  memset(bp, 0, sizeof *bp);
  bp->group = bp->sub = MPI_COMM_NULL;
  bp->members = 1;
  bp->need = *need;
  mask &= (1u << ctx->ndims) - 1u;
  MPI_Comm group = dtl_subcomm(ctx, mask);
  if (group == MPI_COMM_NULL)
    return dtl_fail(ctx, "bcast: MPI_Cart_sub failed");
  bp->group = group;
  int err;
  if (ctx->debug && (err = debug_same_need(ctx, group, need)))
    return err;
  if (need->nd != d->order)
    return dtl_fail(ctx, "bcast: the needed box has %d dims, the tensor %d", need->nd, d->order);
  if (dtl_box_empty(need))
    return 0;
  unsigned emask = 0;
  for (int g = 0; g < ctx->ndims; g++)
    if (((mask >> g) & 1u) && !d->replicated_everywhere && d->kind[g] != DTL_DIM_STAR)
      emask |= 1u << g;
  bp->emask = emask;
  /* the roots' blocks: this rank's coordinates, with fixed dims of the mask at their
   * coordinate (this rank itself may hold nothing) */
  int64_t rc_coords[DTL_MAX_DIMS];
  for (int g = 0; g < ctx->ndims; g++)
    rc_coords[g] =
        ((emask >> g) & 1u) && d->kind[g] == DTL_DIM_FIXED ? d->fixed[g] : ctx->coords[g];
  dtl_dist_block(ctx, d, rc_coords, &bp->mine);
  /* coverage along the dims outside the broadcast */
  for (int g = 0; g < ctx->ndims && !d->replicated_everywhere; g++) {
    if ((emask >> g) & 1u)
      continue;
    /* per dim, not from `mine`: members off a FIXED coordinate of the mask hold nothing */
    int tt = d->tdim[g];
    bool ok = d->kind[g] == DTL_DIM_STAR ||
              (d->kind[g] == DTL_DIM_FIXED && ctx->coords[g] == d->fixed[g]) ||
              (d->kind[g] == DTL_DIM_PART && need->lo[tt] >= bp->mine.lo[tt] &&
               need->hi[tt] <= bp->mine.hi[tt]);
    if (!ok) {
      char b[200];
      dtl_format_box(b, sizeof b, need);
      return dtl_fail(ctx,
                      "bcast: the box %s is not held inside the broadcast group (grid dim "
                      "%d is not in the mask)",
                      b, g);
    }
  }
  for_each_holder(ctx, d, ctx->coords, need, 0, ~emask, visit_root, &bp->roots);
  if (bp->roots.oom)
    return dtl_fail(ctx, "out of memory");
  MPI_Comm sub = dtl_subcomm(ctx, emask);
  if (sub == MPI_COMM_NULL || MPI_Comm_size(sub, &bp->members) != MPI_SUCCESS)
    return dtl_fail(ctx, "bcast: MPI_Cart_sub failed");
  bp->sub = sub;
  return 0;
}

int dtl_bplan_root(const dtl_ctx *ctx, const dtl_bplan *bp, int i, int *subroot) {
  int64_t c[DTL_MAX_DIMS];
  int sc[DTL_MAX_DIMS], nsc = 0;
  *subroot = 0;
  if (bp->members == 1)
    return MPI_SUCCESS;
  dtl_coords_of(ctx, bp->roots.v[i].peer, c);
  for (int g = 0; g < ctx->ndims; g++)
    if ((bp->emask >> g) & 1u)
      sc[nsc++] = (int)c[g];
  return MPI_Cart_rank(bp->sub, sc, subroot);
}

int dtl_bplan_debug_piece(dtl_ctx *ctx, const dtl_bplan *bp, int i, int subroot, int *err) {
  const dtl_piece *r = &bp->roots.v[i];
  int64_t hb[1 + 2 * DTL_MAX_DIMS] = {0};
  dtl_box believed;
  if (r->peer == ctx->rank) {
    dtl_box_intersect(&bp->need, &bp->mine, &believed);
    hb[0] = believed.nd;
    for (int k = 0; k < believed.nd; k++) {
      hb[1 + k] = believed.lo[k];
      hb[1 + DTL_MAX_DIMS + k] = believed.hi[k];
    }
  }
  int rc = MPI_Bcast(hb, 1 + 2 * DTL_MAX_DIMS, MPI_INT64_T, subroot, bp->sub);
  if (rc != MPI_SUCCESS)
    return rc;
  believed.nd = (int)hb[0];
  for (int k = 0; k < believed.nd && k < DTL_MAX_DIMS; k++) {
    believed.lo[k] = hb[1 + k];
    believed.hi[k] = hb[1 + DTL_MAX_DIMS + k];
  }
  if (!*err && (believed.nd != r->box.nd || !dtl_box_equal(&believed, &r->box))) {
    char a[200], b[200];
    dtl_format_box(a, sizeof a, &believed);
    dtl_format_box(b, sizeof b, &r->box);
    *err = dtl_fail(ctx, "debug: bcast: rank %d expects %s from rank %d, which sends %s",
                    ctx->rank, b, r->peer, a);
  }
  return MPI_SUCCESS;
}

int dtl_bplan_debug_agree(dtl_ctx *ctx, const dtl_bplan *bp, int err) {
  if (!ctx->debug)
    return err;
  int any = 0, mine_err = err != 0;
  MPI_Allreduce(&mine_err, &any, 1, MPI_INT, MPI_MAX, bp->group);
  if (any && !err)
    err = dtl_fail(ctx, "debug: bcast: another member found a wrong box");
  return err;
}


/* ---- reductions ---------------------------------------------------------------------------- */
int dtl_reduce_root(dtl_ctx *ctx, unsigned mask, const int64_t *root_coords, MPI_Comm *psub,
                    int *members, int *me, int *root) {
  MPI_Comm sub = *psub = dtl_subcomm(ctx, mask);
  int rc;
  *root = 0;
  if (sub == MPI_COMM_NULL)
    return dtl_fail(ctx, "reduce: MPI_Cart_sub failed");
  if ((rc = MPI_Comm_size(sub, members)) != MPI_SUCCESS ||
      (rc = MPI_Comm_rank(sub, me)) != MPI_SUCCESS)
    return dtl_mpi_fail(ctx, rc, "MPI_Comm_size");
  if (root_coords && *members > 1) {
    int sc[DTL_MAX_DIMS], n = 0;
    for (int g = 0; g < ctx->ndims; g++)
      if ((mask >> g) & 1u)
        sc[n++] = (int)dtl_mod(root_coords[g], ctx->dims[g]);
    if ((rc = MPI_Cart_rank(sub, sc, root)) != MPI_SUCCESS)
      return dtl_mpi_fail(ctx, rc, "MPI_Cart_rank");
  }
  return 0;
}


/* ---- the MPI transport (comm_internal.h) -------------------------------------------------- */
/* Posted operations: nonblocking MPI requests, completed together. */
typedef struct {
  int n;
  MPI_Request *req;
  MPI_Datatype *types; /* of dtl_count_type, freed after completion */
  const char *what;
} mpi_record;

static MPI_Comm mpi_comm(dtl_ctx *ctx, int link) {
  return link == DTL_LINK_GRID ? ctx->cart : dtl_subcomm(ctx, (unsigned)link);
}

static int mpi_failed(dtl_ctx *ctx, int rc, const char *what, const char *call) {
  char msg[96];
  snprintf(msg, sizeof msg, "%s: %s", what, call);
  return dtl_mpi_fail(ctx, rc, msg);
}

static int mpi_link(dtl_transport *tr, int link, int asked, const char *what) {
  (void)asked;
  if (mpi_comm(tr->ctx, link) == MPI_COMM_NULL)
    return dtl_fail(tr->ctx, "%s: MPI_Cart_sub failed", what);
  return 0;
}

static int mpi_alloc(dtl_transport *tr, size_t bytes, void **p, const char *what) {
  *p = malloc(bytes);
  return *p ? 0 : dtl_fail(tr->ctx, "%s: out of memory for %zu bytes", what, bytes);
}

static void mpi_release(dtl_transport *tr, void *p) {
  (void)tr;
  free(p);
}

static int mpi_copy_box(dtl_transport *tr, dtl_type t, const void *src, const dtl_box *srcbox,
                        void *dst, const dtl_box *dstbox, const dtl_box *region, bool accumulate,
                        const char *what) {
  (void)tr, (void)what;
  dtl_copy_box(t, src, srcbox, dst, dstbox, region, accumulate);
  return 0;
}

static int mpi_copy(dtl_transport *tr, void *dst, const void *src, size_t bytes,
                    const char *what) {
  (void)tr, (void)what;
  memcpy(dst, src, bytes);
  return 0;
}

/* host memory is in order with the computation: nothing to hand over */
static int mpi_enter(dtl_transport *tr) {
  (void)tr;
  return 0;
}

static int mpi_leave(dtl_transport *tr, bool split) {
  (void)tr, (void)split;
  return 0;
}

static int mpi_open(dtl_transport *tr, int n, bool grouped, void **rec, const char *what) {
  (void)grouped;
  mpi_record *r = calloc(1, sizeof *r);
  if (r) {
    r->req = malloc((size_t)(n + 1) * sizeof *r->req);
    r->types = malloc((size_t)(n + 1) * sizeof *r->types);
    r->what = what;
  }
  if (!r || !r->req || !r->types) {
    if (r)
      free(r->req), free(r->types);
    free(r);
    return dtl_fail(tr->ctx, "%s: out of memory", what);
  }
  *rec = r;
  return 0;
}

/* Post one operation of count elements; kind: 's'end, 'r'eceive or 'b'roadcast. */
static int mpi_post(dtl_transport *tr, mpi_record *r, char kind, int tag, dtl_type t, void *buf,
                    int64_t count, int peer, MPI_Comm comm) {
  int cnt, rc = dtl_count_type(t, count, &cnt, &r->types[r->n]);
  const char *call = kind == 's' ? "MPI_Isend" : kind == 'r' ? "MPI_Irecv" : "MPI_Ibcast";
  if (rc == MPI_SUCCESS) {
    if (kind == 's')
      rc = MPI_Isend(buf, cnt, r->types[r->n], peer, tag, comm, &r->req[r->n]);
    else if (kind == 'r')
      rc = MPI_Irecv(buf, cnt, r->types[r->n], peer, tag, comm, &r->req[r->n]);
    else
      rc = MPI_Ibcast(buf, cnt, r->types[r->n], peer, comm, &r->req[r->n]);
    if (rc != MPI_SUCCESS)
      dtl_count_free(&r->types[r->n]);
  }
  if (rc != MPI_SUCCESS)
    return mpi_failed(tr->ctx, rc, r->what, call);
  r->n++;
  return 0;
}

static int mpi_send(dtl_transport *tr, void *rec, int tag, dtl_type t, const void *buf,
                    int64_t count, int peer) {
  return mpi_post(tr, rec, 's', tag, t, (void *)buf, count, peer, tr->ctx->cart);
}

static int mpi_recv(dtl_transport *tr, void *rec, int tag, dtl_type t, void *buf, int64_t count,
                    int peer) {
  return mpi_post(tr, rec, 'r', tag, t, buf, count, peer, tr->ctx->cart);
}

static int mpi_bcast(dtl_transport *tr, void *rec, unsigned mask, dtl_type t, void *buf,
                     int64_t count, int root) {
  return mpi_post(tr, rec, 'b', 0, t, buf, count, root, mpi_comm(tr->ctx, (int)mask));
}

static int mpi_flush(dtl_transport *tr, void *rec) {
  (void)tr, (void)rec;
  return 0;
}

static int mpi_complete(dtl_transport *tr, void *rec) {
  mpi_record *r = rec;
  int rc = MPI_Waitall(r->n, r->req, MPI_STATUSES_IGNORE);
  for (int i = 0; i < r->n; i++)
    dtl_count_free(&r->types[i]);
  int err = rc == MPI_SUCCESS ? 0 : mpi_failed(tr->ctx, rc, r->what, "MPI_Waitall");
  free(r->req);
  free(r->types);
  free(r);
  return err;
}

/* Reductions need predefined types: large counts go in chunks. */
static int mpi_reduce(dtl_transport *tr, unsigned mask, dtl_type t, void *buf, int64_t count,
                      int root, int me) {
  const int64_t chunk = (int64_t)1 << 30, es = (int64_t)dtl_type_size(t);
  MPI_Comm sub = mpi_comm(tr->ctx, (int)mask);
  for (int64_t at = 0; at < count; at += chunk) {
    int n = (int)dtl_min(chunk, count - at), rc;
    char *p = (char *)buf + at * es;
    if (root < 0)
      rc = MPI_Allreduce(MPI_IN_PLACE, p, n, dtl_type_mpi(t), MPI_SUM, sub);
    else if (me == root)
      rc = MPI_Reduce(MPI_IN_PLACE, p, n, dtl_type_mpi(t), MPI_SUM, root, sub);
    else
      rc = MPI_Reduce(p, NULL, n, dtl_type_mpi(t), MPI_SUM, root, sub);
    if (rc != MPI_SUCCESS)
      return dtl_mpi_fail(tr->ctx, rc, root >= 0 ? "MPI_Reduce" : "MPI_Allreduce");
  }
  return 0;
}

static const dtl_transport_ops mpi_ops = DTL_TRANSPORT_OPS(mpi, false, false);

dtl_transport dtl_mpi_transport(dtl_ctx *ctx) {
  return (dtl_transport){.op = &mpi_ops, .ctx = ctx};
}

/* ---- the host's communication functions (distal/runtime.h) -------------------------------- */
int dtl_fetch(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const void *local, const dtl_box *own,
              dtl_box_fn need, const void *arg, void *buf) {
  dtl_transport tr = dtl_mpi_transport(ctx);
  return dtl_exec_fetch(&tr, d, t, local, own, need, arg, buf);
}

int dtl_accumulate(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, void *local, const dtl_box *own,
                   unsigned exec_mask, dtl_box_fn prod, const void *arg, const void *buf) {
  dtl_transport tr = dtl_mpi_transport(ctx);
  return dtl_exec_accumulate(&tr, d, t, local, own, exec_mask, prod, arg, buf);
}

int dtl_bcast_fetch(dtl_ctx *ctx, unsigned mask, const dtl_dist *d, dtl_type t, const void *local,
                    const dtl_box *own, const dtl_box *need, void *buf) {
  (void)own;
  dtl_transport tr = dtl_mpi_transport(ctx);
  return dtl_exec_bcast(&tr, mask, d, t, local, need, buf, false);
}

int dtl_bcast_fetch_begin(dtl_ctx *ctx, unsigned mask, const dtl_dist *d, dtl_type t,
                          const void *local, const dtl_box *own, const dtl_box *need, void *buf,
                          dtl_request **out) {
  (void)own;
  dtl_transport tr = dtl_mpi_transport(ctx);
  int err = dtl_exec_bcast(&tr, mask, d, t, local, need, buf, true);
  *out = tr.pending;
  return err;
}

int dtl_shift(dtl_ctx *ctx, int dim, dtl_type t, const void *sendbuf, int64_t sendcount,
              void *recvbuf, int64_t recvcount) {
  dtl_transport tr = dtl_mpi_transport(ctx);
  return dtl_exec_shift(&tr, dim, t, sendbuf, sendcount, recvbuf, recvcount, false);
}

int dtl_shift_begin(dtl_ctx *ctx, int dim, dtl_type t, const void *sendbuf, int64_t sendcount,
                    void *recvbuf, int64_t recvcount, dtl_request **out) {
  dtl_transport tr = dtl_mpi_transport(ctx);
  int err = dtl_exec_shift(&tr, dim, t, sendbuf, sendcount, recvbuf, recvcount, true);
  *out = tr.pending;
  return err;
}

int dtl_wait(dtl_ctx *ctx, dtl_request **req) {
  if (!req || !*req)
    return 0;
  dtl_request *q = *req;
  *req = NULL;
  dtl_transport tr = dtl_mpi_transport(ctx);
  return dtl_exec_wait(&tr, q);
}

int dtl_reduce(dtl_ctx *ctx, unsigned mask, const int64_t *root_coords, dtl_type t, void *buf,
               int64_t count) {
  dtl_transport tr = dtl_mpi_transport(ctx);
  return dtl_exec_reduce(&tr, mask, root_coords, t, buf, count);
}

int dtl_bcast(dtl_ctx *ctx, unsigned mask, const int64_t *root_coords, dtl_type t, void *buf,
              int64_t count) {
  dtl_transport tr = dtl_mpi_transport(ctx);
  return dtl_exec_bcast_buf(&tr, mask, root_coords, t, buf, count);
}

/* ---- gather for validation --------------------------------------------------------------- */
int dtl_gather(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const void *local, const dtl_box *own,
               void *global) {
  const size_t es = dtl_type_size(t);
  dtl_box full = {.nd = d->order}, mine;
  for (int k = 0; k < d->order; k++)
    full.hi[k] = d->extent[k];
  bool holder = dtl_dist_block(ctx, d, ctx->coords, &mine);
  int err = 0, rc = MPI_SUCCESS;
  (void)own;
  if (ctx->rank != 0) {
    int64_t vol = dtl_box_volume(&mine);
    if (holder && holder_canonical(ctx, d) && vol > 0) {
      MPI_Datatype dt;
      int cnt;
      rc = dtl_count_type(t, vol, &cnt, &dt);
      if (rc == MPI_SUCCESS)
        rc = MPI_Send(local, cnt, dt, 0, DTL_TAG_GATHER, ctx->cart);
      dtl_count_free(&dt);
      dtl_count_send(ctx, DTL_OP_IO, vol * (int64_t)es, 1);
    }
    if (rc != MPI_SUCCESS)
      err = dtl_mpi_fail(ctx, rc, "MPI_Send (gather)");
    return dtl_any_error(ctx, err);
  }
  /* rank 0: one receive per canonical holder into a packed buffer, then copy */
  int P = ctx->size, nreq = 0;
  int64_t total = 0, *offs = calloc((size_t)P, sizeof *offs);
  dtl_box *boxes = calloc((size_t)P, sizeof *boxes);
  bool *from = calloc((size_t)P, sizeof *from);
  MPI_Request *req = calloc((size_t)P, sizeof *req);
  MPI_Datatype *types = calloc((size_t)P, sizeof *types);
  char *tmp = NULL;
  if (!offs || !boxes || !from || !req || !types) {
    err = dtl_fail(ctx, "out of memory");
    goto done;
  }
  if (holder && holder_canonical(ctx, d))
    dtl_copy_box(t, local, &mine, global, &full, &mine, false);
  for (int q = 1; q < P && !d->replicated_everywhere; q++) {
    int64_t qc[DTL_MAX_DIMS];
    dtl_coords_of(ctx, q, qc);
    if (dtl_dist_block(ctx, d, qc, &boxes[q]) && dtl_dist_canonical(d, qc) &&
        dtl_box_volume(&boxes[q]) > 0) {
      from[q] = true;
      offs[q] = total;
      total += dtl_box_volume(&boxes[q]);
    }
  }
  if (total && !(tmp = malloc((size_t)total * es))) {
    err = dtl_fail(ctx, "out of memory gathering %lld elements", (long long)total);
    goto done;
  }
  for (int q = 1; q < P && rc == MPI_SUCCESS; q++) {
    if (!from[q])
      continue;
    int cnt;
    int64_t vol = dtl_box_volume(&boxes[q]);
    rc = dtl_count_type(t, vol, &cnt, &types[nreq]);
    if (rc == MPI_SUCCESS)
      rc = MPI_Irecv(tmp + offs[q] * (int64_t)es, cnt, types[nreq], q, DTL_TAG_GATHER, ctx->cart,
                     &req[nreq]);
    if (rc == MPI_SUCCESS)
      nreq++;
    dtl_count_recv(ctx, DTL_OP_IO, vol * (int64_t)es, 1);
  }
  int wrc = MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
  for (int i = 0; i < nreq; i++)
    dtl_count_free(&types[i]);
  if (rc != MPI_SUCCESS || wrc != MPI_SUCCESS) {
    err = dtl_mpi_fail(ctx, rc != MPI_SUCCESS ? rc : wrc, "gather");
    goto done;
  }
  for (int q = 1; q < P; q++)
    if (from[q])
      dtl_copy_box(t, tmp + offs[q] * (int64_t)es, &boxes[q], global, &full, &boxes[q], false);
done:
  free(offs);
  free(boxes);
  free(from);
  free(req);
  free(types);
  free(tmp);
  return dtl_any_error(ctx, err);
}

/* ---- statistics ------------------------------------------------------------------------ */
void dtl_stats_print(dtl_ctx *ctx, FILE *out) {
  const int W = 4 * DTL_NOPS;
  int64_t mine[4 * DTL_NOPS], *all = NULL;
  for (int op = 0; op < DTL_NOPS; op++) {
    mine[4 * op] = ctx->bytes_sent[op];
    mine[4 * op + 1] = ctx->msgs_sent[op];
    mine[4 * op + 2] = ctx->bytes_recv[op];
    mine[4 * op + 3] = ctx->msgs_recv[op];
  }
  if (ctx->rank == 0)
    all = calloc((size_t)ctx->size * W, sizeof *all);
  int ok = ctx->rank != 0 || all != NULL;
  MPI_Bcast(&ok, 1, MPI_INT, 0, ctx->cart);
  if (!ok)
    return;
  MPI_Gather(mine, W, MPI_INT64_T, all, W, MPI_INT64_T, 0, ctx->cart);
  if (ctx->rank != 0)
    return;
  int64_t total[4 * DTL_NOPS] = {0};
  fprintf(out, "%-6s %-14s %-9s %14s %10s %14s %10s\n", "rank", "coords", "op", "bytes_sent",
          "msgs_sent", "bytes_recv", "msgs_recv");
  for (int r = 0; r < ctx->size; r++) {
    int64_t c[DTL_MAX_DIMS];
    char cs[64];
    dtl_coords_of(ctx, r, c);
    format_coords(cs, sizeof cs, ctx->ndims, c);
    for (int op = 0; op < DTL_NOPS; op++) {
      const int64_t *v = all + (size_t)r * W + 4 * op;
      for (int k = 0; k < 4; k++)
        total[4 * op + k] += v[k];
      if (v[0] || v[1] || v[2] || v[3])
        fprintf(out, "%-6d %-14s %-9s %14" PRId64 " %10" PRId64 " %14" PRId64 " %10" PRId64 "\n", r,
                cs, op_names[op], v[0], v[1], v[2], v[3]);
    }
  }
  for (int op = 0; op < DTL_NOPS; op++) {
    const int64_t *v = total + 4 * op;
    if (v[0] || v[1] || v[2] || v[3])
      fprintf(out, "%-6s %-14s %-9s %14" PRId64 " %10" PRId64 " %14" PRId64 " %10" PRId64 "\n",
              "total", "", op_names[op], v[0], v[1], v[2], v[3]);
  }
  free(all);
}
