/* comm_internal.h -- the planning half of comm.c: which boxes move between which ranks, the
 * roots of broadcasts and reductions, the debug checks of those boxes and the statistics.
 * The host functions of comm.c and the device functions of libdistal_cuda (distal/cuda.h)
 * both plan through these, so that they move exactly the same pieces.  Not installed. */
#ifndef DISTAL_COMM_INTERNAL_H
#define DISTAL_COMM_INTERNAL_H

#include "distal/runtime.h"

/* ---- statistics --------------------------------------------------------------------------- */
static inline void dtl_count_send(dtl_ctx *ctx, dtl_op op, int64_t bytes, int64_t msgs) {
  ctx->bytes_sent[op] += bytes;
  ctx->msgs_sent[op] += msgs;
}
static inline void dtl_count_recv(dtl_ctx *ctx, dtl_op op, int64_t bytes, int64_t msgs) {
  ctx->bytes_recv[op] += bytes;
  ctx->msgs_recv[op] += msgs;
}

/* "[0,4)x[2,3)", or "(scalar)"; returns the length written. */
int dtl_format_box(char *buf, size_t len, const dtl_box *b);
/* The layout of a box copy (dtl_copy_box and its device twin): per dim, the strides of the
 * source and destination layouts (row-major over srcbox and dstbox) and the region's
 * extent, and the offsets of the region's first element in each. */
void dtl_copy_layout(const dtl_box *srcbox, const dtl_box *dstbox, const dtl_box *region,
                     int64_t *sstride, int64_t *dstride, int64_t *ext, int64_t *soff,
                     int64_t *doff);

/* Is `region` one contiguous run inside a row-major block over `box`?  Then *off is its
 * element offset, and it can be sent or received in place without packing. */
bool dtl_contiguous_in(const dtl_box *box, const dtl_box *region, int64_t *off);

/* ---- pieces --------------------------------------------------------------------------------- */
typedef struct {
  int peer;    /* rank in ctx->cart */
  dtl_box box; /* the elements that move */
} dtl_piece;

typedef struct {
  dtl_piece *v;
  int n, cap;
  bool oom;
} dtl_piece_list;

/* ---- point-to-point exchange (dtl_fetch, dtl_accumulate) ------------------------------------ */
typedef struct {
  int me, p;           /* this rank; the processor whose box is being enumerated */
  dtl_piece_list send; /* pieces this rank sends, peer = receiver, in receiver order */
  dtl_piece_list recv; /* pieces this rank receives, peer = sender, in sender order */
  bool self;           /* this rank sends a piece to itself */
  dtl_box self_box;
} dtl_xplan;

/* Plan this rank's part of a fetch (fetch: box = need, data from holders) or an
 * accumulate (box = prod, data to holders; exec_mask as dtl_accumulate) and, in debug mode,
 * check `own` and the boxes against the other ranks (collective then).  *mine: this
 * rank's block (source of a fetch, destination of an accumulate); *mybox: this rank's
 * box(p).  The plan must be released with dtl_xplan_free, also after a failure. */
int dtl_xplan_build(dtl_ctx *ctx, const dtl_dist *d, const dtl_box *own, dtl_box_fn boxfn,
                    const void *arg, bool fetch, unsigned exec_mask, dtl_xplan *pl, dtl_box *mine,
                    dtl_box *mybox);
void dtl_xplan_free(dtl_xplan *pl);

/* ---- broadcast of pieces (dtl_bcast_fetch) ------------------------------------------------- */
typedef struct {
  dtl_box need;         /* what every member needs */
  MPI_Comm group;       /* the members: dtl_subcomm(ctx, mask) */
  unsigned emask;       /* mask without the STAR dims: the dims along which data moves */
  MPI_Comm sub;         /* dtl_subcomm(ctx, emask): every piece is one broadcast over it */
  int members;          /* size of sub */
  dtl_box mine;         /* the roots' block at this rank's place */
  dtl_piece_list roots; /* one piece per root, peer = the root's rank in cart */
} dtl_bplan;

/* Plan a broadcast fetch with the checks of dtl_bcast_fetch (in debug mode the members'
 * agreement on `need`, collective over the group).  An empty `need` plans no piece.
 * Release with dtl_bplan_free, also after a failure. */
int dtl_bplan_build(dtl_ctx *ctx, unsigned mask, const dtl_dist *d, const dtl_box *need,
                    dtl_bplan *bp);
void dtl_bplan_free(dtl_bplan *bp);
/* The rank in bp->sub of the root of piece i (an MPI error code). */
int dtl_bplan_root(const dtl_ctx *ctx, const dtl_bplan *bp, int i, int *subroot);
/* Debug mode, collective over bp->sub, once per piece in order: the root tells which box
 * it sends and the members compare it with piece i.  A mismatch sets *err (with a message)
 * when it is still 0.  Returns an MPI error code. */
int dtl_bplan_debug_piece(dtl_ctx *ctx, const dtl_bplan *bp, int i, int subroot, int *err);
/* Debug mode, collective over the group: every member fails when one found a wrong box.
 * Returns err, or 1 with a message when another member failed. */
int dtl_bplan_debug_agree(dtl_ctx *ctx, const dtl_bplan *bp, int err);

/* ---- reduction (dtl_reduce) ----------------------------------------------------------------- */
/* The sub-communicator of mask, its size, this rank's rank in it and the root's (0 for an
 * allreduce, root_coords == NULL, or a single member), as dtl_reduce uses them. */
int dtl_reduce_root(dtl_ctx *ctx, unsigned mask, const int64_t *root_coords, MPI_Comm *sub,
                    int *members, int *me, int *root);

#endif
