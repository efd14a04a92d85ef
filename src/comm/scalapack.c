/* scalapack.c -- moving a matrix between ScaLAPACK's 2-D block-cyclic layout and a tensor
 * distribution, in one exchange computed from both layouts.
 *
 * A ScaLAPACK matrix is described by a descriptor (DTYPE = 1, CTXT, M, N, MB, NB, RSRC, CSRC,
 * LLD) on a BLACS grid of nprow x npcol processes: global row g (0-based) lives on process
 * row (g / MB + RSRC) mod nprow, at local row (g / (MB nprow)) MB + g mod MB, and columns
 * likewise; local storage is column-major with leading dimension LLD.  Nothing here calls
 * BLACS: every rank passes its grid coordinates (-1 outside the grid) and one all-gather of
 * them, with the descriptor, tells every rank the whole map from grid coordinates to ranks.
 * Both layouts are then known everywhere, so each rank computes what it sends to and
 * receives from every other rank, and one MPI_Alltoallv moves the data.  The block-cyclic
 * map is a product of a row map and a column map, and so is a block of the distribution, so
 * the piece that one rank sends another is the product of two coordinate lists. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "distal/runtime.h"

/* One tensor dimension seen through the block-cyclic map of the matrix dimension it lies
 * along: per tensor coordinate, the process coordinate that holds it and its offset in local
 * storage (local index times the stride of that matrix dimension). */
typedef struct {
  int64_t ext;
  int *owner;
  int64_t *off;
} bc_dim;

typedef struct {
  int nprow, npcol;
  int *grow, *gcol; /* per rank of ctx->cart: its grid coordinates, -1 outside the grid */
  bc_dim dim[2];
} bc_layout;

enum { INFO_ROW, INFO_COL, INFO_DTYPE, INFO_M, INFO_N, INFO_MB, INFO_NB, INFO_RSRC, INFO_CSRC,
       INFO_IA, INFO_JA, INFO_TRANS, INFO_LEN };

static void layout_free(bc_layout *L) {
  free(L->grow), free(L->gcol);
  for (int d = 0; d < 2; d++) free(L->dim[d].owner), free(L->dim[d].off);
  memset(L, 0, sizeof *L);
}

/* ScaLAPACK's NUMROC: how many of n rows (blocks of nb, the first on process src) process p
 * of np holds. */
static int64_t numroc(int64_t n, int64_t nb, int p, int src, int np) {
  int64_t dist = (np + p - src) % np, nblocks = n / nb, extra = nblocks % np;
  int64_t num = nblocks / np * nb;
  if (dist < extra) num += nb;
  else if (dist == extra) num += n % nb;
  return num;
}

static bool is_trans(char c) { return c == 'T' || c == 't' || c == 'C' || c == 'c'; }
static bool is_notrans(char c) { return c == 'N' || c == 'n'; }

/* The checks that only the calling process can make: its coordinates, its leading dimension
 * and its data pointer.  The agreed values of the others were checked by check_agreed. */
static int check_own(dtl_ctx *ctx, const char *what, const dtl_blockcyclic *bc, const int *g,
                     int nprow, int npcol, const void *a) {
  if (bc->myrow < 0) return 0;
  if (bc->myrow >= nprow || bc->mycol < 0 || bc->mycol >= npcol)
    return dtl_fail(ctx, "%s: grid coordinates (%d, %d) outside the %d x %d grid", what, bc->myrow,
                    bc->mycol, nprow, npcol);
  int64_t rows = numroc(g[INFO_M], g[INFO_MB], bc->myrow, g[INFO_RSRC], nprow);
  int64_t cols = numroc(g[INFO_N], g[INFO_NB], bc->mycol, g[INFO_CSRC], npcol);
  if (bc->desc[8] < dtl_max(1, rows))
    return dtl_fail(ctx, "%s: LLD = %d is below the %lld local rows of process (%d, %d)", what,
                    bc->desc[8], (long long)rows, bc->myrow, bc->mycol);
  if (!a && rows > 0 && cols > 0)
    return dtl_fail(ctx, "%s: process (%d, %d) holds %lld x %lld elements but passed no data", what,
                    bc->myrow, bc->mycol, (long long)rows, (long long)cols);
  return 0;
}

/* The descriptor and submatrix that every grid process passed (the same on all of them). */
static int check_agreed(dtl_ctx *ctx, const char *what, const int *g, int nprow, int npcol,
                        const dtl_dist *d) {
  if (g[INFO_DTYPE] != 1)
    return dtl_fail(ctx, "%s: descriptor type %d is not 1 (dense block-cyclic)", what, g[INFO_DTYPE]);
  if (g[INFO_M] < 0 || g[INFO_N] < 0 || g[INFO_MB] < 1 || g[INFO_NB] < 1)
    return dtl_fail(ctx, "%s: descriptor M = %d, N = %d, MB = %d, NB = %d (need M, N >= 0 and MB, NB >= 1)",
                    what, g[INFO_M], g[INFO_N], g[INFO_MB], g[INFO_NB]);
  if (g[INFO_RSRC] < 0 || g[INFO_RSRC] >= nprow || g[INFO_CSRC] < 0 || g[INFO_CSRC] >= npcol)
    return dtl_fail(ctx, "%s: source process (%d, %d) outside the %d x %d grid", what, g[INFO_RSRC],
                    g[INFO_CSRC], nprow, npcol);
  int64_t rows = d->extent[g[INFO_TRANS] ? 1 : 0], cols = d->extent[g[INFO_TRANS] ? 0 : 1];
  if (g[INFO_IA] < 1 || g[INFO_JA] < 1 || g[INFO_IA] - 1 + rows > g[INFO_M] ||
      g[INFO_JA] - 1 + cols > g[INFO_N])
    return dtl_fail(ctx, "%s: the %lld x %lld submatrix at (%d, %d) does not fit the %d x %d matrix",
                    what, (long long)rows, (long long)cols, g[INFO_IA], g[INFO_JA], g[INFO_M], g[INFO_N]);
  return 0;
}

/* Every rank's grid coordinates: the grid's shape, and every grid position taken once. */
static int gather_grid(dtl_ctx *ctx, const char *what, const int *all, bc_layout *L, int *first) {
  int P = ctx->size;
  *first = -1;
  L->nprow = L->npcol = 0;
  for (int r = 0; r < P; r++) {
    L->grow[r] = all[r * INFO_LEN + INFO_ROW], L->gcol[r] = all[r * INFO_LEN + INFO_COL];
    if (L->grow[r] < 0) {
      L->grow[r] = L->gcol[r] = -1;
      continue;
    }
    if (*first < 0) *first = r;
    L->nprow = L->grow[r] + 1 > L->nprow ? L->grow[r] + 1 : L->nprow;
    L->npcol = L->gcol[r] + 1 > L->npcol ? L->gcol[r] + 1 : L->npcol;
  }
  if (*first < 0) return dtl_fail(ctx, "%s: no rank is in the BLACS grid", what);
  if ((int64_t)L->nprow * L->npcol > P)
    return dtl_fail(ctx, "%s: the BLACS grid (%d x %d) has more processes than the communicator (%d)",
                    what, L->nprow, L->npcol, P);
  char *seen = calloc((size_t)L->nprow * L->npcol, 1);
  if (!seen) return dtl_fail(ctx, "%s: out of memory", what);
  int rc = 0;
  for (int r = 0; r < P && !rc; r++) {
    if (L->grow[r] < 0) continue;
    if (L->gcol[r] < 0) rc = dtl_fail(ctx, "%s: rank %d has grid row %d but column %d", what, r, L->grow[r], L->gcol[r]);
    else if (seen[L->grow[r] * L->npcol + L->gcol[r]]++)
      rc = dtl_fail(ctx, "%s: two ranks claim grid position (%d, %d)", what, L->grow[r], L->gcol[r]);
    for (int k = INFO_DTYPE; k < INFO_LEN && !rc; k++)
      if (all[r * INFO_LEN + k] != all[*first * INFO_LEN + k])
        rc = dtl_fail(ctx, "%s: grid processes disagree on the descriptor or the submatrix", what);
  }
  for (int i = 0; i < L->nprow * L->npcol && !rc; i++)
    if (!seen[i]) rc = dtl_fail(ctx, "%s: no rank holds grid position (%d, %d)", what, i / L->npcol, i % L->npcol);
  free(seen);
  return rc;
}

/* The per-coordinate maps of both tensor dims.  Tensor dim t lies along matrix dim t, or
 * along the other one when the tensor is the transpose of the submatrix. */
static int build_dims(bc_layout *L, const int *g, const dtl_dist *d, int64_t lld) {
  for (int t = 0; t < 2; t++) {
    int md = g[INFO_TRANS] ? 1 - t : t;
    int64_t nb = md ? g[INFO_NB] : g[INFO_MB], src = md ? g[INFO_CSRC] : g[INFO_RSRC];
    int64_t np = md ? L->npcol : L->nprow, start = (md ? g[INFO_JA] : g[INFO_IA]) - 1;
    int64_t stride = md ? lld : 1;
    bc_dim *D = &L->dim[t];
    D->ext = d->extent[t];
    D->owner = malloc((size_t)dtl_max(1, D->ext) * sizeof *D->owner);
    D->off = malloc((size_t)dtl_max(1, D->ext) * sizeof *D->off);
    if (!D->owner || !D->off) return 1;
    for (int64_t x = 0; x < D->ext; x++) {
      int64_t gl = start + x;
      D->owner[x] = (int)((gl / nb + src) % np);
      D->off[x] = (gl / (nb * np) * nb + gl % nb) * stride;
    }
  }
  return 0;
}

/* Collective: agree on the grid and the descriptor, check them, and build the maps.  what
 * names the operation in messages.  a: the calling process's local matrix (checked). */
static int layout_create(dtl_ctx *ctx, const char *what, const dtl_dist *d, dtl_type t,
                         const dtl_blockcyclic *bc, const void *a, bc_layout *L) {
  memset(L, 0, sizeof *L);
  int bad = 0;
  if (d->order != 2) bad = dtl_fail(ctx, "%s: the tensor is not a matrix", what);
  else if (t != DTL_DOUBLE && t != DTL_FLOAT) bad = dtl_fail(ctx, "%s: only float and double matrices", what);
  else if (!is_trans(bc->trans) && !is_notrans(bc->trans))
    bad = dtl_fail(ctx, "%s: trans is '%c', not 'N', 'T' or 'C'", what, bc->trans);
  else if (bc->myrow >= 0 && !bc->desc) bad = dtl_fail(ctx, "%s: no descriptor", what);
  if (dtl_any_error(ctx, bad)) return 1;
  int mine[INFO_LEN] = {-1, -1};
  if (bc->myrow >= 0) {
    mine[INFO_ROW] = bc->myrow, mine[INFO_COL] = bc->mycol;
    for (int k = 0; k < 7; k++) mine[INFO_DTYPE + k] = bc->desc[k == 0 ? 0 : k + 1];
    mine[INFO_IA] = bc->ia, mine[INFO_JA] = bc->ja, mine[INFO_TRANS] = is_trans(bc->trans);
  }
  int *all = malloc((size_t)ctx->size * INFO_LEN * sizeof *all);
  L->grow = malloc((size_t)ctx->size * sizeof *L->grow);
  L->gcol = malloc((size_t)ctx->size * sizeof *L->gcol);
  bad = !all || !L->grow || !L->gcol;
  if (dtl_any_error(ctx, bad)) {
    free(all), layout_free(L);
    return dtl_fail(ctx, "%s: out of memory", what);
  }
  if (MPI_Allgather(mine, INFO_LEN, MPI_INT, all, INFO_LEN, MPI_INT, ctx->cart) != MPI_SUCCESS) {
    free(all), layout_free(L);
    return dtl_fail(ctx, "%s: MPI_Allgather failed", what);
  }
  int first, g[INFO_LEN];
  bad = gather_grid(ctx, what, all, L, &first);
  if (!bad) {
    memcpy(g, all + first * INFO_LEN, sizeof g);
    bad = check_agreed(ctx, what, g, L->nprow, L->npcol, d);
  }
  free(all);
  if (!bad) bad = check_own(ctx, what, bc, g, L->nprow, L->npcol, a);
  if (!bad && build_dims(L, g, d, bc->myrow >= 0 ? bc->desc[8] : 1)) bad = dtl_fail(ctx, "%s: out of memory", what);
  if (dtl_any_error(ctx, bad)) {
    layout_free(L);
    return 1;
  }
  return 0;
}

/* The coordinates of [lo, hi) of tensor dim D that process coordinate p holds (into out when
 * not NULL); returns their count. */
static int64_t select_coords(const bc_dim *D, int64_t lo, int64_t hi, int p, int64_t *out) {
  int64_t n = 0;
  for (int64_t x = lo; x < hi; x++)
    if (D->owner[x] == p) {
      if (out) out[n] = x;
      n++;
    }
  return n;
}

/* A piece: the rows and columns (tensor coordinates) that one rank moves to another. */
typedef struct {
  int64_t n[2];
  int64_t *x[2];
} bc_piece;

static int64_t piece_count(const bc_layout *L, const dtl_box *box, int p0, int p1) {
  if (dtl_box_empty(box)) return 0;
  return select_coords(&L->dim[0], box->lo[0], box->hi[0], p0, NULL) *
         select_coords(&L->dim[1], box->lo[1], box->hi[1], p1, NULL);
}

/* The piece of box held by grid process (p0, p1) along the two tensor dims.  Returns nonzero
 * when out of memory. */
static int piece_make(const bc_layout *L, const dtl_box *box, int p0, int p1, bc_piece *pc) {
  pc->x[0] = pc->x[1] = NULL;
  for (int t = 0; t < 2; t++) {
    int64_t w = dtl_max(1, box->hi[t] - box->lo[t]);
    pc->x[t] = malloc((size_t)w * sizeof *pc->x[t]);
    if (!pc->x[t]) return 1;
    pc->n[t] = select_coords(&L->dim[t], box->lo[t], box->hi[t], t ? p1 : p0, pc->x[t]);
  }
  return 0;
}

static void piece_free(bc_piece *pc) { free(pc->x[0]), free(pc->x[1]); }

/* The process coordinate that tensor dim t is distributed along, for the process at grid
 * position (row, col). */
static int along(int t, int row, int col, bool trans) { return (t == 0) != trans ? row : col; }

/* Where a piece's elements are on one side of a move: element (i, j) of the piece is at
 * row[i] + col[j] of the ScaLAPACK local array (column-major), of the rank's block of the
 * distribution (row-major over own), or of a message (row-major over the piece). */
typedef enum { SIDE_MATRIX, SIDE_BLOCK, SIDE_MESSAGE } bc_side;
typedef struct {
  int64_t *row, *col;
} bc_offsets;

static int offsets_make(const bc_layout *L, const bc_piece *pc, bc_side side, const dtl_box *own,
                        bc_offsets *o) {
  o->row = malloc((size_t)dtl_max(1, pc->n[0]) * sizeof *o->row);
  o->col = malloc((size_t)dtl_max(1, pc->n[1]) * sizeof *o->col);
  if (!o->row || !o->col) return 1;
  int64_t w = own->hi[1] - own->lo[1];
  for (int64_t i = 0; i < pc->n[0]; i++) {
    int64_t x = pc->x[0][i];
    o->row[i] = side == SIDE_MATRIX ? L->dim[0].off[x] : side == SIDE_BLOCK ? (x - own->lo[0]) * w : i * pc->n[1];
  }
  for (int64_t j = 0; j < pc->n[1]; j++) {
    int64_t x = pc->x[1][j];
    o->col[j] = side == SIDE_MATRIX ? L->dim[1].off[x] : side == SIDE_BLOCK ? x - own->lo[1] : j;
  }
  return 0;
}

static void offsets_free(bc_offsets *o) { free(o->row), free(o->col); }

/* dst(i, j) = src(i, j) over an n0 x n1 piece, or alpha src(i, j) + beta dst(i, j) with
 * combine (beta = 0: dst is not read).  Tiles of TILE columns keep both a column-major and a
 * row-major side in cache. */
enum { TILE = 64 };
#define DTL_BC_COPY_(SUFFIX, T)                                                                   \
  static void copy_##SUFFIX(int64_t n0, int64_t n1, const T *src, const bc_offsets *s, T *dst,   \
                            const bc_offsets *d, bool combine, T alpha, T beta) {                 \
    for (int64_t jb = 0; jb < n1; jb += TILE) {                                                   \
      int64_t je = dtl_min(n1, jb + TILE);                                                        \
      for (int64_t i = 0; i < n0; i++) {                                                          \
        const T *in = src + s->row[i];                                                            \
        T *out = dst + d->row[i];                                                                 \
        if (!combine)                                                                             \
          for (int64_t j = jb; j < je; j++) out[d->col[j]] = in[s->col[j]];                       \
        else if (beta == 0)                                                                       \
          for (int64_t j = jb; j < je; j++) out[d->col[j]] = alpha * in[s->col[j]];               \
        else                                                                                      \
          for (int64_t j = jb; j < je; j++) {                                                     \
            T *e = &out[d->col[j]];                                                               \
            *e = alpha * in[s->col[j]] + beta * *e;                                               \
          }                                                                                       \
      }                                                                                           \
    }                                                                                             \
  }
DTL_BC_COPY_(d, double)
DTL_BC_COPY_(s, float)
#undef DTL_BC_COPY_

/* One import or export under way: the layouts, every rank's block (only the canonical
 * replicas' on export), and the direction. */
typedef struct {
  const bc_layout *L;
  const dtl_box *boxes;
  bool trans, to_blocks;
  dtl_type t;
  double alpha, beta;
} bc_move;

/* Move the piece that rank `sender` gives rank `receiver` from one side to the other (one of
 * them is this rank; a message side is the buffer of the message).  The grid process of the
 * pair is the sender on import and the receiver on export; the block is the other's.  The
 * matrix side on export takes alpha and beta.  Returns nonzero when out of memory. */
static int move_piece(const bc_move *mv, int sender, int receiver, bc_side from_side, const void *from,
                      bc_side to_side, void *to) {
  const bc_layout *L = mv->L;
  int gp = mv->to_blocks ? sender : receiver, bq = mv->to_blocks ? receiver : sender;
  int row = L->grow[gp], col = L->gcol[gp];
  bc_piece pc;
  bc_offsets s = {NULL, NULL}, d = {NULL, NULL};
  int err = piece_make(L, &mv->boxes[bq], along(0, row, col, mv->trans), along(1, row, col, mv->trans), &pc) ||
            offsets_make(L, &pc, from_side, &mv->boxes[bq], &s) || offsets_make(L, &pc, to_side, &mv->boxes[bq], &d);
  bool combine = to_side == SIDE_MATRIX;
  if (!err && mv->t == DTL_DOUBLE) copy_d(pc.n[0], pc.n[1], from, &s, to, &d, combine, mv->alpha, mv->beta);
  else if (!err) copy_s(pc.n[0], pc.n[1], from, &s, to, &d, combine, (float)mv->alpha, (float)mv->beta);
  piece_free(&pc), offsets_free(&s), offsets_free(&d);
  return err;
}

/* The message plan: per rank, the count and displacement (elements) of what this rank sends
 * and receives; the rank's own piece moves directly and is not counted there. */
typedef struct {
  int *scount, *sdispl, *rcount, *rdispl;
  int64_t stotal, rtotal;
  bool self; /* this rank moves a piece to itself */
} bc_plan;

static void plan_free(bc_plan *p) { free(p->scount), free(p->sdispl), free(p->rcount), free(p->rdispl); }

/* Counts of the piece of every pair (grid process gp, block bq) with this rank on one end,
 * and displacements; 1 when a total exceeds what one MPI_Alltoallv moves, 2 when out of
 * memory. */
static int plan_make(dtl_ctx *ctx, const bc_move *mv, bc_plan *p) {
  int P = ctx->size, me = ctx->rank;
  const bc_layout *L = mv->L;
  size_t np = P > 0 ? (size_t)P : 1;
  p->scount = calloc(np, sizeof(int)), p->sdispl = calloc(np, sizeof(int));
  p->rcount = calloc(np, sizeof(int)), p->rdispl = calloc(np, sizeof(int));
  p->stotal = p->rtotal = 0;
  if (!p->scount || !p->sdispl || !p->rcount || !p->rdispl) return 2;
  for (int q = 0; q < P; q++) {
    int64_t n[2] = {0, 0}; /* what this rank sends q, and receives from q */
    for (int dir = 0; dir < 2; dir++) {
      int sender = dir ? q : me, receiver = dir ? me : q;
      int gp = mv->to_blocks ? sender : receiver, bq = mv->to_blocks ? receiver : sender;
      if (L->grow[gp] >= 0)
        n[dir] = piece_count(L, &mv->boxes[bq], along(0, L->grow[gp], L->gcol[gp], mv->trans),
                             along(1, L->grow[gp], L->gcol[gp], mv->trans));
    }
    if (q == me) {
      p->self = n[0] > 0;
      continue;
    }
    if (p->stotal + n[0] > INT_MAX || p->rtotal + n[1] > INT_MAX) return 1;
    p->scount[q] = (int)n[0], p->sdispl[q] = (int)p->stotal, p->stotal += n[0];
    p->rcount[q] = (int)n[1], p->rdispl[q] = (int)p->rtotal, p->rtotal += n[1];
  }
  return 0;
}

static void count_stats(dtl_ctx *ctx, const bc_plan *p, size_t es) {
  for (int q = 0; q < ctx->size; q++) {
    if (p->scount[q]) ctx->bytes_sent[DTL_OP_EXCHANGE] += p->scount[q] * (int64_t)es, ctx->msgs_sent[DTL_OP_EXCHANGE]++;
    if (p->rcount[q]) ctx->bytes_recv[DTL_OP_EXCHANGE] += p->rcount[q] * (int64_t)es, ctx->msgs_recv[DTL_OP_EXCHANGE]++;
  }
}

/* Every rank's block of the distribution (empty for non-holders); canonical: only the
 * canonical replicas' (export takes each element from one holder). */
static void all_blocks(const dtl_ctx *ctx, const dtl_dist *d, bool canonical, dtl_box *boxes) {
  for (int q = 0; q < ctx->size; q++) {
    int64_t c[DTL_MAX_DIMS];
    dtl_coords_of(ctx, q, c);
    bool holds = dtl_dist_block(ctx, d, c, &boxes[q]);
    if (!holds || (canonical && !(d->replicated_everywhere ? q == 0 : dtl_dist_canonical(d, c))))
      memset(&boxes[q], 0, sizeof boxes[q]), boxes[q].nd = 2;
  }
}

/* The context's kept exchange buffer `which`, grown to len bytes (NULL when out of memory). */
static char *kept_buffer(dtl_ctx *ctx, int which, size_t len) {
  if (ctx->xbuf_len[which] < len) {
    free(ctx->xbuf[which]);
    ctx->xbuf[which] = malloc(len);
    ctx->xbuf_len[which] = ctx->xbuf[which] ? len : 0;
  }
  return ctx->xbuf[which];
}

/* Pack every message; 1 when out of memory. */
static int pack_all(dtl_ctx *ctx, const bc_move *mv, const bc_plan *p, const void *src, char *sbuf, size_t es) {
  bc_side from = mv->to_blocks ? SIDE_MATRIX : SIDE_BLOCK;
  for (int q = 0; q < ctx->size; q++)
    if (p->scount[q] && move_piece(mv, ctx->rank, q, from, src, SIDE_MESSAGE, sbuf + (size_t)p->sdispl[q] * es))
      return 1;
  return 0;
}

/* The exchange of one import or export, after the layouts are agreed: pack, start one
 * MPI_Ialltoallv, move the rank's own piece meanwhile, then unpack. */
static int bc_exchange(dtl_ctx *ctx, const char *what, const dtl_dist *d, bc_move *mv, const void *src, void *dst) {
  dtl_box *boxes = calloc((size_t)ctx->size, sizeof *boxes);
  bc_plan p = {0};
  size_t es = dtl_type_size(mv->t);
  char *sbuf = NULL, *rbuf = NULL;
  int err = boxes ? 0 : 2;
  if (!err) {
    all_blocks(ctx, d, !mv->to_blocks, boxes);
    mv->boxes = boxes;
    err = plan_make(ctx, mv, &p);
  }
  if (!err) {
    sbuf = kept_buffer(ctx, 0, (size_t)dtl_max(1, p.stotal) * es);
    rbuf = kept_buffer(ctx, 1, (size_t)dtl_max(1, p.rtotal) * es);
    err = !sbuf || !rbuf || pack_all(ctx, mv, &p, src, sbuf, es) ? 2 : 0;
  }
  if (err == 1) dtl_fail(ctx, "%s: more than 2^31 elements to move on one rank", what);
  else if (err) dtl_fail(ctx, "%s: out of memory", what);
  if (dtl_any_error(ctx, err)) {
    free(boxes), plan_free(&p);
    return 1;
  }
  MPI_Request req;
  int rc = MPI_Ialltoallv(sbuf, p.scount, p.sdispl, dtl_type_mpi(mv->t), rbuf, p.rcount, p.rdispl,
                          dtl_type_mpi(mv->t), ctx->cart, &req);
  bc_side from = mv->to_blocks ? SIDE_MATRIX : SIDE_BLOCK, to = mv->to_blocks ? SIDE_BLOCK : SIDE_MATRIX;
  if (p.self) err = move_piece(mv, ctx->rank, ctx->rank, from, src, to, dst);
  if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
  if (rc == MPI_SUCCESS) count_stats(ctx, &p, es);
  for (int q = 0; q < ctx->size && rc == MPI_SUCCESS && !err; q++)
    if (p.rcount[q]) err = move_piece(mv, q, ctx->rank, SIDE_MESSAGE, rbuf + (size_t)p.rdispl[q] * es, to, dst);
  free(boxes), plan_free(&p);
  if (rc != MPI_SUCCESS) return dtl_mpi_fail(ctx, rc, "MPI_Ialltoallv");
  if (err) dtl_fail(ctx, "%s: out of memory", what);
  return dtl_any_error(ctx, err);
}

int dtl_scalapack_import(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const dtl_blockcyclic *bc,
                         const void *a, void *local, const dtl_box *own) {
  const char *what = "import_scalapack";
  bc_layout L;
  if (layout_create(ctx, what, d, t, bc, a, &L)) return 1;
  (void)own; /* this rank's block is computed from the distribution, as every other rank's */
  bc_move mv = {&L, NULL, is_trans(bc->trans), true, t, 1, 0};
  int rc = bc_exchange(ctx, what, d, &mv, a, local);
  layout_free(&L);
  return rc;
}

int dtl_scalapack_export(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const void *local,
                         const dtl_box *own, double alpha, double beta, const dtl_blockcyclic *bc,
                         void *a) {
  const char *what = "export_scalapack";
  bc_layout L;
  if (layout_create(ctx, what, d, t, bc, a, &L)) return 1;
  (void)own;
  bc_move mv = {&L, NULL, is_trans(bc->trans), false, t, alpha, beta};
  int rc = bc_exchange(ctx, what, d, &mv, local, a);
  layout_free(&L);
  return rc;
}
