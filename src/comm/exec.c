/* exec.c -- the executor of communication: fetch, accumulate, broadcast, shift and reduction,
 * each written once over a transport (comm_internal.h) that moves the bytes, MPI on host
 * memory (dtl_fetch ... of comm.c) or NCCL on device memory (dtl_cu_fetch ... of
 * libdistal_cuda).  The plans come from comm.c; the executor decides what is packed, where
 * each piece lands, the order of additions and the statistics, so that host and device
 * move the same pieces and compute the same sums.
 *
 * Order.  An operation copies what it needs out of the caller's buffers, enters the
 * transport (on the device: the communication stream waits for the computation issued so
 * far), posts, completes, unpacks and leaves (later computation waits for it).  A split-phase
 * operation on a transport that waits by blocking (MPI) stops after posting and leaves its
 * request in tr->pending; dtl_exec_wait does the rest.  On an ordered transport (NCCL on streams)
 * it finishes at once, since completing only queues work, and leaves with a hand-over. */
#include "comm_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* An operation in flight, and the state of a broadcast on its way: what completing it needs. */
struct dtl_request {
  void *rec;     /* the transport's record of the posted operations */
  void *scratch; /* packed pieces, released after completion */
  /* a broadcast: the pieces staged in scratch (at[i]) are unpacked into buf over bp.need */
  dtl_type t;
  void *buf;
  dtl_bplan bp;
  char **at;
  bool *staged;
  const char *what;
};

static int enter(dtl_transport *tr) {
  int err = tr->op->enter(tr);
  tr->entered = !err;
  return err;
}

static int leave(dtl_transport *tr, bool split) {
  tr->entered = false;
  return tr->op->leave(tr, split);
}

/* Complete q after posting (err: the first failure so far), unpack and release what it holds. */
static int finish(dtl_transport *tr, struct dtl_request *q, int err) {
  int cerr = q->rec ? tr->op->complete(tr, q->rec) : 0;
  if (!err)
    err = cerr;
  for (int i = 0; i < q->bp.roots.n && !err; i++) {
    const dtl_piece *r = &q->bp.roots.v[i];
    if (q->staged[i] && r->peer != tr->ctx->rank)
      err = tr->op->copy_box(tr, q->t, q->at[i], &r->box, q->buf, &q->bp.need, &r->box, false,
                             q->what);
  }
  tr->op->release(tr, q->scratch);
  dtl_bplan_free(&q->bp);
  free(q->at);
  free(q->staged);
  return err;
}

/* After posting: a split-phase operation on a transport that waits by blocking stays in flight
 * (without memory for its request it completes now, which is correct, only less concurrent);
 * everything else completes and leaves. */
static int posted(dtl_transport *tr, struct dtl_request *fl, bool split, int err) {
  struct dtl_request *q = !err && split && !tr->op->ordered ? malloc(sizeof *q) : NULL;
  if (q) {
    *q = *fl;
    tr->pending = q;
    return 0;
  }
  err = finish(tr, fl, err);
  return err ? err : leave(tr, split);
}

int dtl_exec_wait(dtl_transport *tr, dtl_request *q) {
  int err = q ? finish(tr, q, 0) : 0;
  free(q);
  return err;
}

/* ---- point-to-point exchange ------------------------------------------------------------- */
/* Run a plan: send pieces of src (row-major over srcbox) and receive pieces into dst (over
 * dstbox), assigning or adding.  Pieces that are contiguous on their side move in place; the
 * rest go through one packed buffer per direction.  With accumulate, contributions are added
 * in the order of the senders' ranks (the own piece at this rank's place), so sums do not
 * depend on message timing. */
static int run_exchange(dtl_transport *tr, dtl_type t, const dtl_xplan *pl, const void *src,
                        const dtl_box *srcbox, void *dst, const dtl_box *dstbox, bool accumulate) {
  dtl_ctx *ctx = tr->ctx;
  const dtl_transport_ops *op = tr->op;
  const char *what = accumulate ? "accumulate" : "fetch";
  const int64_t es = (int64_t)dtl_type_size(t);
  const int ns = pl->send.n, nr = pl->recv.n;
  if (ns + nr == 0) /* at most the own piece: no communication */
    return pl->self ? op->copy_box(tr, t, src, srcbox, dst, dstbox, &pl->self_box, accumulate, what)
                    : 0;
  int err = op->link(tr, DTL_LINK_GRID, -1, what);
  if (err)
    return err;
  int64_t packed_s = 0, packed_r = 0, off;
  for (int i = 0; i < ns; i++)
    if (!dtl_contiguous_in(srcbox, &pl->send.v[i].box, &off))
      packed_s += dtl_box_volume(&pl->send.v[i].box);
  for (int i = 0; i < nr; i++)
    if (accumulate || !dtl_contiguous_in(dstbox, &pl->recv.v[i].box, &off))
      packed_r += dtl_box_volume(&pl->recv.v[i].box);
  /* per piece: where it is sent from, received to, and the packed slot to unpack (or NULL) */
  const char **from = malloc((size_t)(ns + 1) * sizeof *from);
  char **to = malloc((size_t)(nr + 1) * sizeof *to);
  char **where = malloc((size_t)(nr + 1) * sizeof *where);
  char *sbuf = NULL, *rbuf = NULL;
  void *rec = NULL;
  if (!from || !to || !where) {
    err = dtl_fail(ctx, "out of memory");
    goto done;
  }
  if ((err = enter(tr)))
    goto done;
  if (packed_s && (err = op->alloc(tr, (size_t)(packed_s * es), (void **)&sbuf, what)))
    goto done;
  if (packed_r && (err = op->alloc(tr, (size_t)(packed_r * es), (void **)&rbuf, what)))
    goto done;
  char *sp = sbuf;
  for (int i = 0; i < ns && !err; i++) {
    const dtl_piece *s = &pl->send.v[i];
    if (dtl_contiguous_in(srcbox, &s->box, &off)) {
      from[i] = (const char *)src + off * es;
    } else {
      err = op->copy_box(tr, t, src, srcbox, sp, &s->box, &s->box, false, what);
      from[i] = sp;
      sp += dtl_box_volume(&s->box) * es;
    }
  }
  char *rp = rbuf;
  for (int i = 0; i < nr; i++) {
    const dtl_piece *r = &pl->recv.v[i];
    if (!accumulate && dtl_contiguous_in(dstbox, &r->box, &off)) {
      to[i] = (char *)dst + off * es;
      where[i] = NULL;
    } else {
      to[i] = where[i] = rp;
      rp += dtl_box_volume(&r->box) * es;
    }
  }
  if (err || (err = op->open(tr, ns + nr, true, &rec, what)))
    goto done;
  for (int i = 0; i < nr && !err; i++) {
    const dtl_piece *r = &pl->recv.v[i];
    int64_t vol = dtl_box_volume(&r->box);
    err = op->recv(tr, rec, DTL_TAG_EXCHANGE, t, to[i], vol, r->peer);
    dtl_count_recv(ctx, DTL_OP_EXCHANGE, vol * es, 1);
  }
  for (int i = 0; i < ns && !err; i++) {
    const dtl_piece *s = &pl->send.v[i];
    int64_t vol = dtl_box_volume(&s->box);
    err = op->send(tr, rec, DTL_TAG_EXCHANGE, t, from[i], vol, s->peer);
    dtl_count_send(ctx, DTL_OP_EXCHANGE, vol * es, 1);
  }
  int ferr = op->flush(tr, rec);
  err = err ? err : ferr;
  /* the own piece while the messages move (an accumulate adds it in order below) */
  if (!err && pl->self && !accumulate)
    err = op->copy_box(tr, t, src, srcbox, dst, dstbox, &pl->self_box, false, what);
  int cerr = op->complete(tr, rec);
  err = err ? err : cerr;
  bool self_done = !(pl->self && accumulate);
  for (int i = 0; i < nr && !err; i++) {
    const dtl_piece *r = &pl->recv.v[i];
    if (!self_done && r->peer > ctx->rank) {
      err = op->copy_box(tr, t, src, srcbox, dst, dstbox, &pl->self_box, true, what);
      self_done = true;
    }
    if (!err && where[i])
      err = op->copy_box(tr, t, where[i], &r->box, dst, dstbox, &r->box, accumulate, what);
  }
  if (!err && !self_done)
    err = op->copy_box(tr, t, src, srcbox, dst, dstbox, &pl->self_box, true, what);
done:
  op->release(tr, sbuf);
  op->release(tr, rbuf);
  free(from);
  free(to);
  free(where);
  if (!err && tr->entered)
    err = leave(tr, false);
  return err;
}

int dtl_exec_fetch(dtl_transport *tr, const dtl_dist *d, dtl_type t, const void *local,
                   const dtl_box *own, dtl_box_fn need, const void *arg, void *buf) {
  dtl_xplan pl;
  dtl_box mine, myneed;
  int err = dtl_xplan_build(tr->ctx, d, own, need, arg, true, 0, &pl, &mine, &myneed);
  if (!err)
    err = run_exchange(tr, t, &pl, local, &mine, buf, &myneed, false);
  dtl_xplan_free(&pl);
  return err;
}

int dtl_exec_accumulate(dtl_transport *tr, const dtl_dist *d, dtl_type t, void *local,
                        const dtl_box *own, unsigned exec_mask, dtl_box_fn prod, const void *arg,
                        const void *buf) {
  dtl_xplan pl;
  dtl_box mine, myprod;
  int err = dtl_xplan_build(tr->ctx, d, own, prod, arg, false, exec_mask, &pl, &mine, &myprod);
  /* the executor's buf is the source, the holder's block the destination */
  if (!err)
    err = run_exchange(tr, t, &pl, buf, &myprod, local, &mine, true);
  dtl_xplan_free(&pl);
  return err;
}

/* ---- broadcast of pieces ----------------------------------------------------------------- */
/* The debug checks come first, so that a wrong box moves no data.  The roots copy their
 * pieces out of `local` before anything is posted (on the device: on the compute stream, in
 * order with the computation around the call), so that only `buf` and the staging buffer are
 * in use while a split-phase broadcast is in flight.  Pieces contiguous in `need` are
 * broadcast in place in buf; the others through one staging buffer, unpacked at completion. */
int dtl_exec_bcast(dtl_transport *tr, unsigned mask, const dtl_dist *d, dtl_type t,
                   const void *local, const dtl_box *need, void *buf, bool split) {
  dtl_ctx *ctx = tr->ctx;
  const dtl_transport_ops *op = tr->op;
  const int64_t es = (int64_t)dtl_type_size(t);
  tr->pending = NULL;
  struct dtl_request fl = {.t = t, .buf = buf, .what = "bcast"}, *q = &fl;
  dtl_bplan *bp = &q->bp;
  int err = dtl_bplan_build(ctx, mask, d, need, bp), rc = MPI_SUCCESS;
  if (err || dtl_box_empty(need)) {
    dtl_bplan_free(bp);
    return err;
  }
  const int n = bp->roots.n, members = bp->members;
  int *subroot = malloc((size_t)(n + 1) * sizeof *subroot);
  q->at = malloc((size_t)(n + 1) * sizeof *q->at);
  q->staged = calloc((size_t)(n + 1), sizeof *q->staged);
  if (!subroot || !q->at || !q->staged)
    err = dtl_fail(ctx, "out of memory");
  for (int i = 0; i < n && !err && rc == MPI_SUCCESS; i++)
    rc = dtl_bplan_root(ctx, bp, i, &subroot[i]);
  for (int i = 0; i < n && !err && rc == MPI_SUCCESS && ctx->debug && members > 1; i++)
    rc = dtl_bplan_debug_piece(ctx, bp, i, subroot[i], &err);
  if (!err && rc != MPI_SUCCESS)
    err = dtl_mpi_fail(ctx, rc, "broadcast");
  err = dtl_bplan_debug_agree(ctx, bp, err);
  if (!err && members > 1)
    err = op->link(tr, (int)bp->emask, (int)(mask & ((1u << ctx->ndims) - 1u)), "bcast");
  int64_t packed = 0, off;
  for (int i = 0; i < n && members > 1; i++)
    if (!dtl_contiguous_in(need, &bp->roots.v[i].box, &off))
      packed += dtl_box_volume(&bp->roots.v[i].box);
  if (!err && packed)
    err = op->alloc(tr, (size_t)(packed * es), &q->scratch, "bcast");
  char *tp = q->scratch;
  for (int i = 0; i < n && !err; i++) {
    const dtl_piece *r = &bp->roots.v[i];
    bool root = r->peer == ctx->rank;
    if (root)
      err = op->copy_box(tr, t, local, &bp->mine, buf, need, &r->box, false, "bcast");
    if (err || members == 1)
      continue;
    q->staged[i] = !dtl_contiguous_in(need, &r->box, &off);
    if (!q->staged[i]) {
      q->at[i] = (char *)buf + off * es;
    } else {
      q->at[i] = tp;
      tp += dtl_box_volume(&r->box) * es;
      if (root)
        err = op->copy_box(tr, t, local, &bp->mine, q->at[i], &r->box, &r->box, false, "bcast");
    }
  }
  if (err || members == 1 || n == 0) {
    free(subroot);
    finish(tr, q, 1);
    return err;
  }
  if (!(err = enter(tr)))
    err = op->open(tr, n, false, &q->rec, "bcast");
  for (int i = 0; i < n && !err; i++) {
    const dtl_piece *r = &bp->roots.v[i];
    int64_t vol = dtl_box_volume(&r->box);
    if ((err = op->bcast(tr, q->rec, bp->emask, t, q->at[i], vol, subroot[i])))
      break;
    if (r->peer == ctx->rank)
      dtl_count_send(ctx, DTL_OP_BCAST, vol * es * (members - 1), members - 1);
    else
      dtl_count_recv(ctx, DTL_OP_BCAST, vol * es, 1);
  }
  free(subroot);
  if (q->rec) {
    int ferr = op->flush(tr, q->rec);
    err = err ? err : ferr;
  }
  return posted(tr, q, split, err);
}

/* ---- shift ------------------------------------------------------------------------------- */
static bool overlap(const void *a, size_t na, const void *b, size_t nb) {
  uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
  return na > 0 && nb > 0 && pa < pb + nb && pb < pa + na;
}

/* Send to c - 1 and receive from c + 1 along dim.  A send buffer that overlaps the receive
 * buffer is copied aside first (the receive may land before the send has read it).  On a
 * transport that needs a receive of exactly the count sent, debug mode checks that against
 * the neighbour. */
int dtl_exec_shift(dtl_transport *tr, int dim, dtl_type t, const void *sendbuf, int64_t sendcount,
                   void *recvbuf, int64_t recvcount, bool split) {
  dtl_ctx *ctx = tr->ctx;
  const dtl_transport_ops *op = tr->op;
  const int64_t es = (int64_t)dtl_type_size(t);
  tr->pending = NULL;
  if (dim < 0 || dim >= ctx->ndims)
    return dtl_fail(ctx, "shift along grid dim %d of a %d-dim grid", dim, ctx->ndims);
  if (ctx->dims[dim] == 1) {
    /* to itself: the common part (a split shift wants equal counts) */
    int64_t n = dtl_min(sendcount, recvcount);
    if (split && recvcount != sendcount)
      return dtl_fail(ctx,
                      "shift: a 1-wide grid dim sends %lld elements to itself but expects %lld",
                      (long long)sendcount, (long long)recvcount);
    if (sendbuf == recvbuf || n <= 0)
      return 0;
    return op->copy(tr, recvbuf, sendbuf, (size_t)(n * es), "shift");
  }
  int64_t c[DTL_MAX_DIMS];
  memcpy(c, ctx->coords, sizeof c);
  c[dim] = ctx->coords[dim] - 1;
  int to = dtl_rank_of(ctx, c);
  c[dim] = ctx->coords[dim] + 1;
  int from = dtl_rank_of(ctx, c);
  if (ctx->debug && op->exact) {
    int64_t theirs = -1;
    int err = 0;
    int rc = MPI_Sendrecv(&sendcount, 1, MPI_INT64_T, to, DTL_TAG_SHIFT_CHECK, &theirs, 1,
                          MPI_INT64_T, from, DTL_TAG_SHIFT_CHECK, ctx->cart, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
      err = dtl_mpi_fail(ctx, rc, "MPI_Sendrecv (shift)");
    else if (theirs != recvcount)
      err = dtl_fail(ctx,
                     "debug: shift: rank %d expects %lld elements from rank %d, which sends %lld",
                     ctx->rank, (long long)recvcount, from, (long long)theirs);
    if (dtl_any_error(ctx, err))
      return 1;
  }
  int err = op->link(tr, DTL_LINK_GRID, -1, "shift");
  if (err || (err = enter(tr)))
    return err;
  struct dtl_request fl = {.t = t, .buf = recvbuf, .what = "shift"}, *q = &fl;
  const size_t sbytes = (size_t)(dtl_max(sendcount, 0) * es);
  const size_t rbytes = (size_t)(dtl_max(recvcount, 0) * es);
  const void *sp = sendbuf;
  if (overlap(sendbuf, sbytes, recvbuf, rbytes)) {
    err = op->alloc(tr, sbytes, &q->scratch, "shift");
    if (!err)
      err = op->copy(tr, q->scratch, sendbuf, sbytes, "shift: staging the send buffer");
    sp = q->scratch;
  }
  const int tag = split ? DTL_TAG_SHIFT : DTL_TAG_EXCHANGE;
  if (!err && !(err = op->open(tr, 2, true, &q->rec, "shift"))) {
    err = op->recv(tr, q->rec, tag, t, recvbuf, recvcount, from);
    if (!err)
      err = op->send(tr, q->rec, tag, t, sp, sendcount, to);
    int ferr = op->flush(tr, q->rec);
    err = err ? err : ferr;
  }
  if (!err) {
    dtl_count_send(ctx, DTL_OP_SHIFT, sendcount * es, 1);
    dtl_count_recv(ctx, DTL_OP_SHIFT, recvcount * es, 1);
  }
  return posted(tr, q, split, err);
}

/* ---- reductions -------------------------------------------------------------------------- */
/* The sub-grid of mask for a collective on count elements: its members, this rank's and the
 * root's place in it, the mask within the grid; 1 on error, -1 when there is nothing to move
 * (one member or no elements), else 0 with the communicator checked and the transport entered. */
static int collective(dtl_transport *tr, unsigned mask, const int64_t *root_coords, int64_t count,
                      const char *what, int *members, int *me, int *root, unsigned *m) {
  MPI_Comm sub;
  if (dtl_reduce_root(tr->ctx, mask, root_coords, &sub, members, me, root))
    return 1;
  if (*members == 1 || count <= 0)
    return -1;
  *m = mask & ((1u << tr->ctx->ndims) - 1u);
  int err = tr->op->link(tr, (int)*m, -1, what);
  return err ? err : enter(tr);
}

int dtl_exec_reduce(dtl_transport *tr, unsigned mask, const int64_t *root_coords, dtl_type t,
                    void *buf, int64_t count) {
  dtl_ctx *ctx = tr->ctx;
  const int64_t es = (int64_t)dtl_type_size(t);
  int members, me, root;
  unsigned m;
  int err = collective(tr, mask, root_coords, count, "reduce", &members, &me, &root, &m);
  if (err)
    return err < 0 ? 0 : err;
  err = tr->op->reduce(tr, m, t, buf, count, root_coords ? root : -1, me);
  if (err)
    return err;
  int64_t bytes = count * es;
  if (!root_coords) {
    dtl_count_send(ctx, DTL_OP_ALLREDUCE, bytes, 1);
    dtl_count_recv(ctx, DTL_OP_ALLREDUCE, bytes, 1);
  } else if (me == root) {
    dtl_count_recv(ctx, DTL_OP_REDUCE, bytes * (members - 1), members - 1);
  } else {
    dtl_count_send(ctx, DTL_OP_REDUCE, bytes, 1);
  }
  return leave(tr, false);
}

/* ---- broadcast of a buffer from roots ------------------------------------------------------ */
int dtl_exec_bcast_buf(dtl_transport *tr, unsigned mask, const int64_t *root_coords, dtl_type t,
                       void *buf, int64_t count) {
  dtl_ctx *ctx = tr->ctx;
  const int64_t es = (int64_t)dtl_type_size(t);
  int members, me, root;
  unsigned m;
  int err = collective(tr, mask, root_coords, count, "bcast", &members, &me, &root, &m);
  if (err)
    return err < 0 ? 0 : err;
  const dtl_transport_ops *op = tr->op;
  void *rec = NULL;
  err = op->open(tr, 1, false, &rec, "bcast");
  if (!err)
    err = op->bcast(tr, rec, m, t, buf, count, root);
  if (rec) {
    int ferr = op->flush(tr, rec);
    err = err ? err : ferr;
    int cerr = op->complete(tr, rec);
    err = err ? err : cerr;
  }
  if (err)
    return err;
  if (me == root)
    dtl_count_send(ctx, DTL_OP_BCAST, count * es * (members - 1), members - 1);
  else
    dtl_count_recv(ctx, DTL_OP_BCAST, count * es, 1);
  return leave(tr, false);
}
