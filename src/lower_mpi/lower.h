/* lower.h -- lowering of scheduled concrete index notation to an SPMD plan for MPI:
 * ownership maps of tensors, bounds analysis of the box each tensor needs (or produces) at
 * its communicate point, and selection of the communication pattern from the structure of
 * those boxes (DESIGN.md, "Lowering a statement to SPMD code").  The C printer
 * (src/codegen) turns the plan into code.  This header is the stage's whole interface. */
#ifndef DISTAL_LOWER_H
#define DISTAL_LOWER_H

#include "ir/ir.h"

#define LW_MAX_DIMS 8 /* tensor order and grid dims of all levels (DTL_MAX_DIMS of the runtime) */

typedef enum { OWN_PART, OWN_FIXED, OWN_STAR } lw_own_kind;

/* Ownership map of a tensor: per grid dim, which tensor dim is partitioned, or fixed, or
 * replicated.  everywhere: no distribution, every rank holds all of it. */
typedef struct {
  bool everywhere;
  lw_own_kind kind[LW_MAX_DIMS];
  int tdim[LW_MAX_DIMS];
  int64_t fixed[LW_MAX_DIMS];
  const sym *lo[LW_MAX_DIMS], *hi[LW_MAX_DIMS]; /* this rank's block, per tensor dim */
} lw_owner;

typedef enum {
  PAT_LOCAL,    /* the box lies in the rank's own block: a view, no communication */
  PAT_BCAST,    /* same box along the grid dims of mask, one owner per piece: broadcast */
  PAT_SHIFT,    /* rotate: the next box is the neighbour's current one: sendrecv */
  PAT_REDUCE,   /* output: partial results reduced over mask (mask 0: kept locally) */
  PAT_EXCHANGE  /* anything else: point-to-point from box intersections */
} lw_pattern;

typedef struct lw_comm {
  int tensor;
  bool output;   /* produced (written) box, else needed (read) box */
  int depth;     /* position of the communicate loop in the nest; -1: before all loops */
  lw_pattern pattern;
  unsigned mask;       /* BCAST / REDUCE grid dims */
  bool allreduce;      /* REDUCE: every member receives the sum */
  int64_t root[LW_MAX_DIMS]; /* REDUCE: root coordinate per mask dim */
  int shift_dim;       /* SHIFT */
  int order;
  const sym *lo[LW_MAX_DIMS], *hi[LW_MAX_DIMS]; /* the box, per tensor dim */
  const char *why;     /* a short reason, printed in the plan */
  /* A better pattern that holds when the grid params in `assume` are equal (a square
   * grid, say); the generated code tests that at run time and else uses this comm. */
  struct lw_comm *alt;
  int nassume;
  int assume[LW_MAX_DIMS];
} lw_comm;

typedef struct {
  const ir_stmt *s;
  int nloops;
  const cin_node **loops;  /* nloops of them */
  int outer;            /* loops [0, outer) run the same trip counts on every rank */
  unsigned exec_mask;   /* grid dims bound by distributed loops */
  const sym **bs;       /* per loop; distributed loops: iterations per rank */
  int lidx_var0;        /* VAR ids >= lidx_var0 are local indices of distributed loops */
  int ncomm;
  lw_comm *comm;        /* ncomm of them: the output, then each tensor read */
  int comm_cap;         /* (lower_stmt: the entries comm has room for) */
  bool lhs_on_rhs;      /* the output is also read: read a snapshot */
  const ir_expr *rhs;   /* the right side as written: precompute's workspaces expanded */
  /* precompute: where(consumer, producer) nodes; the producer (one loop over the workspace)
   * runs before loop where_depth[w] of the chain, every iteration of the enclosing loops */
  int nwhere;
  int *where_depth;
  const cin_node **where; /* nwhere of each */
  int kernel_depth;     /* position of the first substituted loop, -1 if none */
  sym_facts facts;      /* for proofs about its expressions: the grid and its loop counters' ranges */
} lw_stmt;

typedef struct {
  ir_program *ir;
  bool cuda;                        /* --target cuda: every rank owns a GPU */
  int ndims;                        /* grid dims of all levels, outer first; 1 with no machine */
  int nlevels;                      /* machine levels (1: flat) */
  int level_off[LW_MAX_DIMS];       /* first grid dim of each level */
  const sym *dims[LW_MAX_DIMS];     /* grid dim sizes */
  lw_owner *owner;                  /* per tensor */
  int nstmts;
  lw_stmt *stmts;
} lw_program;

/* Lower a scheduled program; reports unsupported constructs as errors (returns NULL).
 * cuda: for the CUDA target (gpu machine levels and GPU parallel units are accepted). */
lw_program *lw_lower(ir_program *ir, bool cuda);
/* lw_lower of statement `only` alone (-1: all; the others' lw_stmt zero): what
 * lw_stmt_cost_at(lp, only, ...) needs, for the search's candidates.  The checks of the
 * machine and the tensors are lw_lower's; the other statements' are not made.  owners: the
 * tensors' owners from lw_owners of a program with the same tensors and machine (a copy of
 * ir differently scheduled: they do not depend on schedules), shared, not built again; NULL:
 * built. */
lw_program *lw_lower_stmt(ir_program *ir, bool cuda, int only, const lw_owner *owners);
/* The owners of ir's tensors, one per tensor (NULL: lw_lower's errors of the machine or the
 * tensors, reported). */
const lw_owner *lw_owners(ir_program *ir, bool cuda);
/* Print the communication plan (distalc --emit plan) for the given param values (-1:
 * unknown; grid params are then solved from nranks). */
void lw_print_plan(FILE *f, const lw_program *lp, const int64_t *params, int64_t nranks);
const char *lw_pattern_name(lw_pattern p);
/* Statement i as written (`A(i,j) = B(i,k) * C(k,j)`), as the plan names it. */
void lw_print_stmt(FILE *f, const lw_program *lp, int i);
/* The bytes of one element of a tensor of type t. */
int64_t lw_type_size(fe_type t);
/* What a rank holds of a tensor with ownership o, for a communicate point of pattern pat
 * (shift_dim: a shift's grid dim; output: a produced box; exec_mask: the grid dims the
 * statement's loops are distributed over), evaluated once for the rank at env's
 * coordinates: its block [lo, hi) (holds: false off a fixed coordinate; known: false for a
 * balanced partition, whose blocks are known only at run time), the extent of a shift's
 * grid dim, and for an accumulate by exchange where its boxes go (the runtime's holders):
 * to every copy along the '*' grid dims in exec_mask (copies: their sizes), along a
 * partitioned grid dim outside it only to the rank's own block (own_only, per tensor dim),
 * nowhere off a fixed coordinate outside it (sends). */
typedef struct {
  bool known, holds, accumulate, sends;
  int64_t lo[LW_MAX_DIMS], hi[LW_MAX_DIMS];
  bool own_only[LW_MAX_DIMS];
  int64_t copies, shift_len;
} lw_held;
void lw_held_block(const lw_program *lp, const lw_owner *o, int order, lw_pattern pat, int shift_dim, bool output, unsigned exec_mask,
                   const sym_env *env, lw_held *h);
/* Of one step's box of v elements ([lo, hi) per dim, evaluated), what the communicate point
 * of pattern pat moves to the rank of h at its step-th step: a fetch and a broadcast skip
 * the part of the box the rank holds (the runtime copies it in place); an accumulate by
 * exchange sends the box to its holders (lw_held) but the rank itself (what it receives
 * from the others' boxes: the same where the ranks are alike); a shift receives a
 * neighbour's whole box at every step after the first (an exchange aligns the first), and
 * nothing along a 1-wide grid dim; a reduction combines every member's partial box (v); a
 * block not known counts the box whole. */
int64_t lw_step_received(lw_pattern pat, const lw_held *h, int order, int64_t step, int64_t v, const int64_t *lo, const int64_t *hi);
/* o's blocks are formulas of params and coordinates only (no balanced partition) */
bool lw_owner_whole(const lw_owner *o, int order);
/* What communicate point q of statement i moves to the rank at grid coordinates 0, summed
 * over its steps: the elements of its boxes, and of them the ones it receives (a box less
 * the part the rank already holds, as the runtime copies that part in place; a shift's
 * steps after the first and a reduction's partial sums whole).  False where a formula cannot
 * be evaluated at the params (or there are too many steps). */
typedef struct {
  int64_t received, boxes, steps;
} lw_volume;
bool lw_comm_volume(const lw_program *lp, int i, int q, const int64_t *params, lw_volume *out);
/* The same for the rank at grid coordinates coords (lp->ndims of them). */
bool lw_comm_volume_at(const lw_program *lp, int i, int q, const int64_t *params, const int64_t *coords, lw_volume *out);
/* The plan's "bytes per rank" line of communicate point q of statement i (without the
 * indent) into out; *bytes: rank 0's bytes received where known, else -1.  False where the
 * volume is not known at the params. */
bool lw_bytes_line(const lw_program *lp, int i, int q, const int64_t *params, char *out, size_t n, int64_t *bytes);
/* The cost of statement i for the rank at grid coordinates 0 (the plan's formulas evaluated
 * at the params, grid params included): bytes and messages it receives summed over its
 * communicate points and their steps, the largest buffer it holds (bytes), and its loop
 * iterations.  A sparse box counts as lw_entries of its dense volume, each 8 bytes per
 * coordinate plus the value, and the loops of a statement that reads sparse tensors as their
 * dense iterations times lw_expr_density of its right side.  False where some formula cannot
 * be evaluated (a param without value, or
 * more than `budget` steps). */
typedef struct {
  int64_t bytes, msgs, buffer, points;
  int64_t steps; /* the most steps of one communicate point (1: all data before the loops) */
  /* the time a broadcast takes in the model (lw_bcast_weight): its bytes and messages so
   * weighted; every other pattern as received */
  double wire_bytes, wire_msgs;
  /* ... the part of them among the ranks of one node (dtl_group_in_node: a broadcast's or a
   * reduction's group within one node, any other pattern where the whole grid is) */
  double node_bytes, node_msgs;
  /* the bytes its loops touch in the rank's memory: every box it reads or writes, its own
   * blocks' and the received ones, summed over their steps (each element once a step) */
  double mem_bytes;
  /* the stored entries of the sparse boxes it receives (lw_density's estimate), summed over
   * their steps: each is sorted into the rank's piece as it arrives */
  double sparse_entries;
  int64_t kernel_min;  /* the shortest trip count among a substituted kernel's loops (0: none) */
  double kernel_points; /* the iterations of one call of the kernel (the product of its loops') */
} lw_cost;
/* The share of a catalogue kernel's speedup that a call keeps whose shortest loop runs `len`
 * iterations and which runs `points` in all: len / 128 below 128 (a thin panel), times
 * cbrt(points) / 128 where that is below 1 (a small call: BLAS blocks at about 128). */
double lw_kernel_share(int64_t len, double points);
/* A kernel of the model's speedup s over generated loops, at that share: 1 + (s - 1) x share
 * (1 where s <= 1: no kernel). */
double lw_kernel_speed(double s, int64_t len, double points);
/* A broadcast among q ranks, as MPI libraries run a large one (a scatter, then an allgather):
 * 2 (q - 1) / q times its bytes through each rank's link, in ceil(log2 q) messages; q = 1
 * moves nothing.  *bytes and *msgs: the weights of one step. */
void lw_bcast_weight(int64_t q, double *bytes, double *msgs);
/* A point-to-point exchange (boxes that follow no collective pattern) counts its bytes twice:
 * a rank may have to send its block to several others, which the received bytes do not show. */
#define LW_EXCHANGE_WEIGHT 2.0
/* The grid dims a communicate point of statement i broadcasts along at params (0: it does
 * not broadcast), its alternative's where the run-time test of its assumption holds. */
unsigned lw_bcast_mask(const lw_program *lp, const lw_comm *c, const int64_t *params);
/* Whether a communicate point is a broadcast or a reduction among one rank at params (the
 * grid dims it runs along all of size 1, as on a 1 x P grid): it moves nothing, and the plan
 * and the model count no bytes and no messages for it. */
bool lw_comm_alone(const lw_program *lp, const lw_comm *c, const int64_t *params);
/* The cost model's estimate of a sparse tensor's stored entries, which are known only when
 * the program reads its data: LW_SPARSE_FIBER entries in every fiber of its innermost level
 * (a CSR matrix's row, a CSF tensor's last mode), at most the fiber's extent.  lw_density is
 * that share of the tensor's dense positions (1 for a dense tensor); a param without a value
 * counts 1024, as the search's. */
#define LW_SPARSE_FIBER 10
double lw_density(const fe_program *p, int t, const int64_t *params);
/* ... and the entries of a box of `dense` positions of tensor t, rounded up (exact where they
 * are a whole number: the product taken before the division) */
int64_t lw_entries(const fe_program *p, int t, const int64_t *params, int64_t dense);
/* The share of a statement's dense iterations its loops run where e is its right side: a
 * sparse access its density, a product the least of its factors' (its loops walk the
 * sparsest), a sum the most of its terms' (a term placed outside a summed loop adds none), a
 * function or a dense access 1. */
double lw_expr_density(const fe_program *p, const ir_expr *e, const int64_t *params);
bool lw_stmt_cost(const lw_program *lp, int i, const int64_t *params, lw_cost *out);
/* The same for the rank at grid coordinates `coords`, where ranks fill nodes in blocks of
 * per_node (<= 0: one node; lw_stmt_cost's) for the node part of the wire's bytes. */
bool lw_stmt_cost_at(const lw_program *lp, int i, const int64_t *params, const int64_t *coords, int64_t per_node, lw_cost *out);
/* A fetch or broadcast of a loop's invariant tensor (LANGUAGE.md section 9: the SPMD rewrite
 * `invariant` runs it at the loop's first iteration only): communicate point c of statement i
 * reads a tensor marked in `unwritten` (the tensors no statement of the statement's innermost
 * loop writes; NULL: none), as a broadcast or a fetch at params, placed where only loops of one
 * iteration per rank run around it (distributed loops, their variables grid coordinates) and
 * its box a formula of params and those coordinates (no other loop's variable). */
bool lw_loop_invariant(const lw_program *lp, int i, const lw_comm *c, const int64_t *params, const bool *unwritten);
/* ... with the pattern `at` in effect (c itself or c->alt; lw_comm_at chooses by params) */
bool lw_loop_invariant_as(const lw_program *lp, int i, const lw_comm *c, const lw_comm *at, const bool *unwritten);
/* lw_stmt_cost_at split for a statement in a loop: LW_PART_ALL counts everything (unwritten
 * ignored); LW_PART_ITERATION what each iteration runs: its loops, the memory they touch and
 * its buffers whole, the communication but the loop's invariant fetches (lw_loop_invariant);
 * LW_PART_ONCE those fetches' bytes and messages only (no loops, memory or buffers). */
typedef enum { LW_PART_ALL, LW_PART_ITERATION, LW_PART_ONCE } lw_part;
bool lw_stmt_cost_part(const lw_program *lp, int i, const int64_t *params, const int64_t *coords, int64_t per_node,
                       const bool *unwritten, lw_part part, lw_cost *out);
/* The ranks --auto costs a candidate at (the slowest of them counts, as the largest buffers):
 * what a rank receives depends on what it holds, and a layout can favour a few ranks (a
 * transposed distribution holds rank 0's boxes, a distribution whose coordinates must agree
 * on two grid dims holds every box of the ranks where they do).  Sample k of lw_nsamples:
 * 0 is rank 0; 1 the corner off the diagonal of a square grid (coordinate g the last of its
 * dim for even g, 0 for odd g); 2 + g the last coordinate of grid dim g alone; *repeat: the
 * same rank as an earlier sample (a 1-wide dim, a 1-D grid), which need not be costed again.
 * False where a grid dim cannot be evaluated at params. */
int lw_nsamples(const lw_program *lp);
bool lw_sample(const lw_program *lp, const int64_t *params, int k, int64_t *coords, bool *repeat);
/* Is tensor t sparse (a compressed level)?  Sparse tensors are only read; each rank holds
 * its block as a dtl_sparse, and non-local boxes move as their stored entries. */
bool lw_sparse(const fe_program *p, int t);

/* Symbolic value of loop variable at chain position k when it is fixed (at or above a
 * communicate point), and the interval of any variable given that loops [0, depth] are
 * fixed and the rest run over their ranges. */
void lw_interval(const lw_program *lp, const lw_stmt *ls, int var, int depth, const sym **lo,
                 const sym **hi);
const sym *lw_loop_value(const lw_program *lp, const lw_stmt *ls, int k);
int lw_loop_pos(const lw_stmt *ls, int var);
/* The upper bound of a local (not distributed) loop over `var`, given which variables are
 * bound where it starts: its extent, tightened for the inner variable of a split or divide,
 * which never reaches its parent's extent and, once the outer variable is bound, stops at the
 * parent's end.  *parent: the parent whose range the bound then enforces (-1: none). */
const sym *lw_local_hi(const lw_stmt *ls, int var, const bool *bound, int *parent);
/* The trip count of a loop over `var` that is not distributed: its extent, or for the outer
 * variable of a divide min(factor, extent of the divided variable) (with a factor above the
 * extent, the blocks from the extent on are empty). */
const sym *lw_outer_extent(const lw_stmt *ls, int var);
/* The trip count of loop k of the rank: a distributed loop's block, else lw_outer_extent. */
const sym *lw_trip(const lw_stmt *ls, int k);
/* The variable loop k of the rank sets, as the cost functions walk it: a distributed loop's
 * local index (ls->lidx_var0 + k), else its own variable. */
int lw_loop_slot(const lw_stmt *ls, int k);
/* The first value of the replaced variable at outer value `outer` of a divide or split:
 * outer * step, or split[outer] where the divide takes a balanced partition's blocks. */
const sym *lw_rel_base(const ir_stmt *s, const ir_rel *R, const sym *outer);
/* The grid dim a distributed loop is bound to (its level's dims are numbered after the
 * outer levels' dims). */
int lw_gdim(const lw_program *lp, const cin_node *n);

/* ---- the plan at concrete values (instance.c): what distalc --emit svg draws ---- */
typedef struct {
  int order;
  int64_t lo[LW_MAX_DIMS], hi[LW_MAX_DIMS]; /* [lo, hi) per tensor dim */
} lw_box;
typedef struct {
  int64_t from, to; /* ranks */
  lw_box box;       /* the piece, in the tensor's global coordinates */
  int64_t elements;
} lw_msg;
/* The grid dims at the params (grid params solved); false where one is unknown. */
bool lw_grid_at(const lw_program *lp, const int64_t *params, int64_t *dims);
/* Ranks and grid coordinates, row-major as MPI_Cart_create numbers them. */
int64_t lw_rank_of(int ndims, const int64_t *dims, const int64_t *coords);
void lw_coords_of(int ndims, const int64_t *dims, int64_t rank, int64_t *coords);
int64_t lw_box_volume(const lw_box *b);
/* The block of tensor t of the rank at coords: 1, or 0 where the rank holds none (a fixed
 * grid coordinate elsewhere); -1 where a formula cannot be evaluated at the params. */
int lw_block_at(const lw_program *lp, int t, const int64_t *params, const int64_t *coords, lw_box *b);
/* The box of communicate point c of statement i for the rank at coords in the first step
 * (every loop counter 0). */
bool lw_box_at(const lw_program *lp, int i, const lw_comm *c, const int64_t *params, const int64_t *coords, lw_box *b);
/* The pattern that runs at the params: c's alternative where its assumption holds there. */
const lw_comm *lw_comm_at(const lw_program *lp, const lw_comm *c, const int64_t *params);
/* The messages of the first step of c (as lw_comm_at chose it) among nranks ranks, sorted
 * by sender then receiver, *n of them (NULL when none); *ok false where the boxes cannot be
 * evaluated at the params (or memory runs out).  The caller frees the array. */
lw_msg *lw_step_messages(const lw_program *lp, int i, const lw_comm *c, const int64_t *params, const int64_t *dims,
                         int64_t nranks, int *n, bool *ok);

#endif
