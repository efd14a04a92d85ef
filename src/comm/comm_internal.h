/* comm_internal.h -- the communication of distributed tensors as the host runtime (comm.c) and
 * the device runtime (libdistal_cuda, distal/cuda.h) share it: the planning (which boxes move
 * between which ranks, the roots of broadcasts and reductions, the debug checks of those boxes
 * and the statistics), and the executor (exec.c) that runs every operation over a transport,
 * MPI on host memory or NCCL on device memory, so that both move exactly the same pieces in
 * the same way.  Not installed. */
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

/* Collective.  Rank 0 finds into dst the file that path names (dtl_write_target of files.h:
 * where path is a symbolic link, the file it leads to), creates a fresh file beside it
 * (DST.tmp.XXXXXXXX, so that rank 0's final rename over dst is atomic) holding the hlen bytes
 * of hdr, and sets *created (remove the file on a later failure); every rank receives its
 * name in tmp.  Messages name path.  1 on an error (agreed). */
int dtl_tmp_begin(dtl_ctx *ctx, const char *path, const void *hdr, size_t hlen, char *tmp, size_t tmpsize, char *dst,
                  size_t dstsize, int *created);

/* Message tags on ctx->cart. */
enum {
  DTL_TAG_EXCHANGE = 0x4454,    /* fetch, accumulate and blocking shifts */
  DTL_TAG_GATHER = 0x4455,      /* dtl_gather */
  DTL_TAG_SHIFT_CHECK = 0x4456, /* debug mode: the counts of a shift */
  DTL_TAG_SHIFT = 91,           /* split-phase shifts, in flight across other operations */
  DTL_TAG_HALO = 0x4457         /* halo exchanges (halo.c), on a sub-communicator */
};

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

/* ---- transports ------------------------------------------------------------------------------
 * A transport moves bytes for the executor: MPI on host memory (comm.c) or NCCL on device
 * memory (libdistal_cuda).  Buffers are in the transport's memory, boxes and counts are host
 * data.  Every function returns 0, or nonzero with a message in the context that names
 * `what` (the operation: "fetch", "bcast", ...).  Operations are posted into a record made by
 * open and ended by complete; an NCCL record is one group when `grouped`. */
enum { DTL_LINK_GRID = -1 }; /* the communicator over ctx->cart; masks >= 0 name sub-grids */

typedef struct dtl_transport dtl_transport;
typedef struct {
  bool exact;   /* a receive must name the count sent: debug mode checks shift counts */
  bool ordered; /* work queues in order and completing never blocks: split-phase operations
                 * complete when issued, and their request only hands the result over */
  /* Is the communicator of link (DTL_LINK_GRID or a mask of grid dims) there?  asked: the
   * mask the caller gave, for the message (< 0: none). */
  int (*link)(dtl_transport *tr, int link, int asked, const char *what);
  /* scratch memory for packed pieces, released (NULL is fine) after its last use */
  int (*alloc)(dtl_transport *tr, size_t bytes, void **p, const char *what);
  void (*release)(dtl_transport *tr, void *p);
  /* dtl_copy_box (packing and unpacking pieces, the own piece) and a copy of bytes */
  int (*copy_box)(dtl_transport *tr, dtl_type t, const void *src, const dtl_box *srcbox,
                  void *dst, const dtl_box *dstbox, const dtl_box *region, bool accumulate,
                  const char *what);
  int (*copy)(dtl_transport *tr, void *dst, const void *src, size_t bytes, const char *what);
  /* enter: what follows runs after the computation issued so far; leave: the computation
   * issued later runs after it, at once or (split) through the request it leaves in
   * tr->pending */
  int (*enter)(dtl_transport *tr);
  int (*leave)(dtl_transport *tr, bool split);
  /* A record for up to n operations; send, recv and bcast post into it (count elements of
   * t; send and recv over the grid, bcast over the sub-grid of mask), flush ends the posting,
   * complete waits for them all and frees the record. */
  int (*open)(dtl_transport *tr, int n, bool grouped, void **rec, const char *what);
  int (*send)(dtl_transport *tr, void *rec, int tag, dtl_type t, const void *buf, int64_t count,
              int peer);
  int (*recv)(dtl_transport *tr, void *rec, int tag, dtl_type t, void *buf, int64_t count,
              int peer);
  int (*bcast)(dtl_transport *tr, void *rec, unsigned mask, dtl_type t, void *buf,
               int64_t count, int root);
  int (*flush)(dtl_transport *tr, void *rec);
  int (*complete)(dtl_transport *tr, void *rec);
  /* Sum count elements of buf in place over the sub-grid of mask: at the root (its rank
   * there; me is this rank's), or at every member when root < 0.  Ends before it returns,
   * in the transport's order. */
  int (*reduce)(dtl_transport *tr, unsigned mask, dtl_type t, void *buf, int64_t count,
                int root, int me);
} dtl_transport_ops;

/* The table of a transport whose functions are named prefix_link, prefix_alloc, ... */
#define DTL_TRANSPORT_OPS(prefix, is_exact, is_ordered)                                        \
  {                                                                                            \
    .exact = is_exact, .ordered = is_ordered, .link = prefix##_link, .alloc = prefix##_alloc,  \
    .release = prefix##_release, .copy_box = prefix##_copy_box, .copy = prefix##_copy,         \
    .enter = prefix##_enter, .leave = prefix##_leave, .open = prefix##_open,                   \
    .send = prefix##_send, .recv = prefix##_recv, .bcast = prefix##_bcast,                     \
    .flush = prefix##_flush, .complete = prefix##_complete, .reduce = prefix##_reduce          \
  }

struct dtl_transport {
  const dtl_transport_ops *op;
  dtl_ctx *ctx;
  void *state;   /* the transport's (libdistal_cuda: the device state of ctx) */
  bool entered;  /* between enter and leave */
  void *pending; /* the request of a split-phase operation, NULL when there is nothing to wait
                  * for: the operation in flight (dtl_request), or on an ordered transport the
                  * hand-over that leave made */
};

/* The host transport: MPI on ctx->cart and its sub-communicators (comm.c). */
dtl_transport dtl_mpi_transport(dtl_ctx *ctx);

/* ---- the executor (exec.c) ----------------------------------------------------------------
 * Every communication function of distal/runtime.h and distal/cuda.h, over a transport, with
 * the contracts of the former.  split: the split-phase form, whose request is left in
 * tr->pending; an operation in flight (not on an ordered transport) ends by dtl_exec_wait. */
int dtl_exec_fetch(dtl_transport *tr, const dtl_dist *d, dtl_type t, const void *local,
                   const dtl_box *own, dtl_box_fn need, const void *arg, void *buf);
int dtl_exec_accumulate(dtl_transport *tr, const dtl_dist *d, dtl_type t, void *local,
                        const dtl_box *own, unsigned exec_mask, dtl_box_fn prod, const void *arg,
                        const void *buf);
int dtl_exec_bcast(dtl_transport *tr, unsigned mask, const dtl_dist *d, dtl_type t,
                   const void *local, const dtl_box *need, void *buf, bool split);
int dtl_exec_shift(dtl_transport *tr, int dim, dtl_type t, const void *sendbuf,
                   int64_t sendcount, void *recvbuf, int64_t recvcount, bool split);
int dtl_exec_wait(dtl_transport *tr, dtl_request *q);
int dtl_exec_reduce(dtl_transport *tr, unsigned mask, const int64_t *root_coords, dtl_type t,
                    void *buf, int64_t count);
int dtl_exec_bcast_buf(dtl_transport *tr, unsigned mask, const int64_t *root_coords, dtl_type t,
                       void *buf, int64_t count);

#endif
