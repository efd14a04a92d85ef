/* redist.c -- moving a tensor between layouts: between two distributions of the same
 * shape, and between a distribution and a layout the application describes by the box
 * each rank holds (row blocks, say).  One exchange computed from the two ownership maps,
 * no gather to one rank: every rank evaluates every other rank's boxes. */
#include <stdlib.h>
#include <string.h>

#include "distal/runtime.h"

typedef struct {
  const dtl_ctx *ctx;
  const dtl_dist *dist;
} dist_arg;

static void dist_block_fn(const void *arg, const int64_t *coords, dtl_box *box) {
  const dist_arg *a = arg;
  dtl_dist_block(a->ctx, a->dist, coords, box);
}

int dtl_redistribute(dtl_ctx *ctx, dtl_type t, const dtl_dist *from, const void *from_local,
                     const dtl_box *from_own, const dtl_dist *to, void *to_local) {
  if (from->order != to->order) return dtl_fail(ctx, "redistribute: the orders differ");
  for (int d = 0; d < from->order; d++)
    if (from->extent[d] != to->extent[d]) return dtl_fail(ctx, "redistribute: the shapes differ");
  dist_arg a = {ctx, to};
  return dtl_fetch(ctx, from, t, from_local, from_own, dist_block_fn, &a, to_local);
}

/* Everybody's user box, indexed by rank of ctx->cart. */
static int gather_boxes(dtl_ctx *ctx, int order, const int64_t *lo, const int64_t *hi, dtl_box **out) {
  int64_t mine[2 * DTL_MAX_DIMS] = {0};
  for (int d = 0; d < order; d++) mine[d] = lo[d], mine[DTL_MAX_DIMS + d] = hi[d];
  int64_t *all = malloc((size_t)ctx->size * 2 * DTL_MAX_DIMS * sizeof *all);
  dtl_box *boxes = calloc((size_t)ctx->size, sizeof *boxes);
  int err = !all || !boxes;
  if (dtl_any_error(ctx, err)) {
    free(all), free(boxes);
    return dtl_fail(ctx, "out of memory");
  }
  if (MPI_Allgather(mine, 2 * DTL_MAX_DIMS, MPI_INT64_T, all, 2 * DTL_MAX_DIMS, MPI_INT64_T, ctx->cart) != MPI_SUCCESS) {
    free(all), free(boxes);
    return dtl_fail(ctx, "MPI_Allgather failed");
  }
  for (int r = 0; r < ctx->size; r++) {
    boxes[r].nd = order;
    for (int d = 0; d < order; d++)
      boxes[r].lo[d] = all[r * 2 * DTL_MAX_DIMS + d], boxes[r].hi[d] = all[r * 2 * DTL_MAX_DIMS + DTL_MAX_DIMS + d];
  }
  free(all);
  *out = boxes;
  return 0;
}

typedef struct {
  const dtl_ctx *ctx;
  const dtl_box *boxes;
} user_arg;

static void user_box_fn(const void *arg, const int64_t *coords, dtl_box *box) {
  const user_arg *a = arg;
  *box = a->boxes[dtl_rank_of(a->ctx, coords)];
}

/* The application's box [lo, hi) of rank's data and its block (collective: every rank fails
 * with the first failing rank's message).  NULL lo or hi, a box outside the tensor or
 * reversed, NULL data for a box that holds elements, a NULL block where the rank holds one. */
static int check_user_box(dtl_ctx *ctx, const dtl_dist *d, const int64_t *lo, const int64_t *hi, const void *data,
                          const void *block, const dtl_box *own) {
  int bad = 0;
  int64_t vol = 1;
  if (!lo || !hi) bad = dtl_fail(ctx, "rank %d: the box's lo or hi is NULL", ctx->rank);
  for (int k = 0; k < d->order && !bad; k++) {
    if (lo[k] < 0 || hi[k] > d->extent[k])
      bad = dtl_fail(ctx, "rank %d: its box lies outside the tensor in dim %d ([%lld, %lld) of extent %lld)", ctx->rank, k,
                     (long long)lo[k], (long long)hi[k], (long long)d->extent[k]);
    else if (hi[k] < lo[k])
      bad = dtl_fail(ctx, "rank %d: its box ends before it starts in dim %d (lo %lld, hi %lld)", ctx->rank, k, (long long)lo[k],
                     (long long)hi[k]);
    else
      vol *= hi[k] - lo[k];
  }
  if (!bad && vol > 0 && !data)
    bad = dtl_fail(ctx, "rank %d: the data of its box (%lld elements) is NULL", ctx->rank, (long long)vol);
  dtl_box held;
  if (!bad && !block && dtl_dist_block(ctx, d, ctx->coords, &held) && dtl_box_volume(own) > 0)
    bad = dtl_fail(ctx, "rank %d: its block (%lld elements) is NULL", ctx->rank, (long long)dtl_box_volume(own));
  return dtl_any_error(ctx, bad);
}

int dtl_export(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const void *local, const dtl_box *own,
               const int64_t *lo, const int64_t *hi, void *data) {
  dtl_box *boxes;
  if (check_user_box(ctx, d, lo, hi, data, local, own) || gather_boxes(ctx, d->order, lo, hi, &boxes)) return 1;
  user_arg a = {ctx, boxes};
  int rc = dtl_fetch(ctx, d, t, local, own, user_box_fn, &a, data);
  free(boxes);
  return rc;
}

/* Import is the exchange in the other direction: rank p sends the part of its user box
 * that each holder q of the distribution owns.  User boxes must not overlap; elements of a
 * block that no user box covers are zero. */
int dtl_import(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const int64_t *lo, const int64_t *hi,
               const void *data, void *local, const dtl_box *own) {
  dtl_box *boxes;
  if (check_user_box(ctx, d, lo, hi, data, local, own) || gather_boxes(ctx, d->order, lo, hi, &boxes)) return 1;
  const size_t es = dtl_type_size(t);
  const int P = ctx->size;
  dtl_box held;
  bool i_hold = dtl_dist_block(ctx, d, ctx->coords, &held);
  if (i_hold) dtl_zero(t, local, dtl_box_volume(own));
  dtl_box mine = boxes[ctx->rank];
  int64_t *scount = calloc((size_t)P, sizeof *scount), *rcount = calloc((size_t)P, sizeof *rcount);
  dtl_box *qblock = calloc((size_t)P, sizeof *qblock);
  int err = !scount || !rcount || !qblock;
  for (int q = 0; q < P && !err; q++) {
    int64_t c[DTL_MAX_DIMS];
    dtl_coords_of(ctx, q, c);
    dtl_box piece;
    bool holds = dtl_dist_block(ctx, d, c, &qblock[q]);
    if (holds && dtl_box_intersect(&mine, &qblock[q], &piece)) scount[q] = dtl_box_volume(&piece);
    if (i_hold && dtl_box_intersect(&boxes[q], own, &piece)) rcount[q] = dtl_box_volume(&piece);
  }
  char **sbuf = calloc((size_t)P, sizeof *sbuf), **rbuf = calloc((size_t)P, sizeof *rbuf);
  MPI_Request *req = calloc(2 * (size_t)P, sizeof *req);
  err |= !sbuf || !rbuf || !req;
  int nreq = 0;
  for (int q = 0; q < P && !err; q++) {
    dtl_box piece;
    if (q == ctx->rank) continue;
    if (rcount[q] > 0) {
      rbuf[q] = malloc((size_t)rcount[q] * es);
      if (!rbuf[q]) err = 1;
      else MPI_Irecv(rbuf[q], (int)rcount[q], dtl_type_mpi(t), q, 77, ctx->cart, &req[nreq++]);
    }
    if (scount[q] > 0 && !err && dtl_box_intersect(&mine, &qblock[q], &piece)) {
      sbuf[q] = malloc((size_t)scount[q] * es);
      if (!sbuf[q]) err = 1;
      else {
        dtl_copy_box(t, data, &mine, sbuf[q], &piece, &piece, false);
        MPI_Isend(sbuf[q], (int)scount[q], dtl_type_mpi(t), q, 77, ctx->cart, &req[nreq++]);
        ctx->bytes_sent[DTL_OP_EXCHANGE] += scount[q] * (int64_t)es, ctx->msgs_sent[DTL_OP_EXCHANGE]++;
      }
    }
  }
  if (!err) {
    dtl_box piece;
    if (i_hold && dtl_box_intersect(&mine, own, &piece)) dtl_copy_box(t, data, &mine, local, own, &piece, false);
    MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    for (int q = 0; q < P; q++)
      if (q != ctx->rank && rcount[q] > 0 && dtl_box_intersect(&boxes[q], own, &piece)) {
        dtl_copy_box(t, rbuf[q], &piece, local, own, &piece, false);
        ctx->bytes_recv[DTL_OP_EXCHANGE] += rcount[q] * (int64_t)es, ctx->msgs_recv[DTL_OP_EXCHANGE]++;
      }
  }
  for (int q = 0; q < P && sbuf && rbuf; q++) free(sbuf[q]), free(rbuf[q]);
  free(sbuf), free(rbuf), free(req), free(scount), free(rcount), free(qblock), free(boxes);
  if (dtl_any_error(ctx, err)) return dtl_fail(ctx, "import: out of memory");
  return 0;
}
