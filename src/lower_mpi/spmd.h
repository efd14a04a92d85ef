/* spmd.h -- the SPMD IR: the whole program as every rank runs it, imperative and explicit
 * (DESIGN.md, "Intermediate representations", item 4).  Built by spmd_build from the lowered
 * program (lower.h: ownership, boxes, patterns), rewritten by the rewrites of rewrite.c, printed
 * by spmd_print (distalc --emit spmd) and by the C and CUDA printers of src/codegen, which read
 * nothing else.
 *
 * Ids are program-wide: variables (every statement's index variables and the local indices of
 * its distributed loops, numbered after the previous statement's), buffers (one per tensor
 * access of a statement, with its plan slots) and tensors.  Symbolic values (bounds, boxes,
 * bindings) are syms over params, grid coordinates and these variable ids. */
#ifndef DISTAL_SPMD_H
#define DISTAL_SPMD_H

#include "lower_mpi/lower.h"

/* ---- declarations: what the program is about ------------------------------------------- */
typedef struct {
  const char *name;   /* as the user wrote it */
  fe_type type;
  int order;
  const sym *ext[LW_MAX_DIMS]; /* extents: params or literals */
  bool sparse;        /* a compressed level: held as a dtl_sparse */
  bool written;       /* the left side of some statement */
  bool compressed[LW_MAX_DIMS]; /* per level */
  const lw_owner *owner;
  const char *dist_text; /* "M(i,j -> i,j)" or NULL: replicated on every rank */
  bool temp;          /* a temporary: the plan holds it; not an argument of compute */
  const int *mode;    /* a mode order (the front end stored the tensor in it): level k is the
                       * declared dimension mode[k]; NULL: row-major */
  /* balanced partitions (fe_split_of): balanced: the tensor balances itself (`balanced`);
   * split[g]: the split whose blocks its partitioned dimension on grid dim g takes, -1 none */
  bool balanced;
  int split[LW_MAX_DIMS];
} sp_tensor;

/* A balanced partition: the boundaries of the blocks of dimension tdim of the balanced
 * tensor over grid dim gdim (extent: that dimension's), chosen at run time. */
typedef struct {
  int tensor, gdim, tdim;
  const sym *extent;
} sp_split;

typedef struct {
  const char *name;
  bool has_default, is_grid; /* is_grid: a size of the machine's grid, solved from the ranks */
  int64_t value;             /* the default */
  bool is_float;             /* a double (its bits travel in the int64 slot of the params array) */
  double fvalue;             /* ... its default */
} sp_param;

typedef enum { SV_INDEX, SV_LOCAL } sp_var_kind;
typedef struct {
  const char *name;   /* the index variable's name (SV_LOCAL: of its distributed loop) */
  sp_var_kind kind;   /* an index variable, or the local index of a distributed loop */
  int func;           /* the statement function it belongs to */
  int arg;            /* its place in the function's box-function argument vector */
} sp_var;

/* A buffer: the data one statement reads or writes of one tensor, at one communicate point. */
typedef struct {
  int id, func, tensor;
  int comm;           /* its communication point in the statement (lower.h lw_comm index) */
  bool output;        /* the statement's result, else read */
  bool snapshot;      /* the output also read on the right side: read the values before */
  bool in_place;      /* ... a snapshot read in place: each iteration reads only the element it writes */
  int slot;           /* plan buffer slot (slot and slot + 1 when double-buffered) */
  int order;
  bool doubled;       /* two slots: the next step's data arrives in the other (pipeline) */
  const sym *lo[LW_MAX_DIMS], *hi[LW_MAX_DIMS]; /* the box: per dim, over program vars */
  int boxfn;          /* >= 0: the box is also a function every rank evaluates for others */
} sp_buf;

/* ---- nodes -------------------------------------------------------------------------- */
typedef enum {
  SN_SEQ,       /* kids in order */
  SN_LOOP,      /* a loop (sp_loop_kind), kids: its body */
  SN_BIND,      /* const var = value: an original index recovered from the loops (provenance) */
  SN_GUARD,     /* local: skip the iteration unless cond */
  SN_IF,        /* if (every cond) kids[0] else kids[1] (may be NULL) */
  SN_COMM,      /* a communication operation or one half of it (sp_comm_op) */
  SN_INIT,      /* a statement's setup (sp_init_kind) */
  SN_PRODUCER,  /* precompute: a loop filling a workspace */
  SN_SPPOS,     /* the position of a sparse access at one level */
  SN_ACC,       /* the innermost loop sums into a register (kids[0]), added to the output after */
  SN_KERNEL,    /* a leaf kernel call over the loops it replaces */
  SN_ASSIGN,    /* the statement's assignment */
  SN_DEVICE,    /* the local loops as one device kernel: kids run in each thread */
  SN_REGISTER,  /* a contracted temporary's element, a local variable of the iteration (tensor, type) */
  SN_WIDTH,     /* kids[0] twice: with 32-bit index arrays where every piece of width_tensors is
                 * narrow, else with the pieces' own widths (spmd_index_width) */
} sn_kind;

typedef enum {
  SL_COORD,        /* collective, one iteration per rank: var = coords[dim] */
  SL_COLL_BLOCK,   /* collective over the rank's blocks: local index lvar < count, var = value */
  SL_LOCAL_BLOCK,  /* local over the rank's block of a distributed loop: var in [lo, hi) */
  SL_LOCAL,        /* local: var in [0, hi) */
  SL_SPARSE,       /* local over the stored coordinates of a sparse access at one level */
  SL_THREAD,       /* device: a thread index (bound at the kernel's top) */
} sp_loop_kind;

typedef enum {
  SC_VIEW,          /* the buffer is the rank's own block (no communication) */
  SC_FETCH,         /* gather the box from its holders (point to point, box function) */
  SC_BCAST,         /* the box from its one holder along mask */
  SC_BCAST_BEGIN,   /* ... posted into the free one of two slots (box: at `next` or now) */
  SC_SHIFT_BEGIN,   /* send this box to the neighbour along dim, receive the next one */
  SC_WAIT,          /* the posted operation completes: the buffer is the new data */
  SC_PRODUCE,       /* the output box, zeroed, before the loops add into it */
  SC_REDUCE,        /* partial sums over mask to the roots */
  SC_BCAST_RESULT,  /* ... then from the roots to every rank along mask */
  SC_ALLREDUCE,     /* partial sums over mask, every member receiving the total */
  SC_KEEP_OWN,      /* after a reduction: the part of the box this rank owns */
  SC_ACCUMULATE,    /* partial results to their holders (point to point, box function) */
  SC_SPARSE_FETCH,  /* the stored entries of the box, from the holders */
  SC_SPARSE_BCAST,  /* ... every rank along mask needing the same box: broadcast from the holders */
  SC_SPARSE_RESET,  /* a sparse result's entries start empty for this iteration */
  SC_SPARSE_ACC,    /* a sparse result's entries go to their holders */
  SC_SPARSE_MERGE,  /* a sparse result's entries join the rank's own block */
  SC_HALO,          /* the box's entries at the stored coordinates of a sparse piece, from their owners along mask */
  SC_HALO_END,      /* a split halo exchange (halo_split) completes: the ghosts are in the buffer; its kids (the
                     * rows that read them) run where some row reads a ghost */
} sp_comm_op;

typedef enum {
  SI_DECLARE,    /* the buffer variables (a buffer's pointer, layout, box) */
  SI_SNAPSHOT,   /* copy of the output's block, read by the right side */
  SI_WORKSPACE,  /* precompute's workspace */
  SI_ZERO,       /* '=': the output block starts from zero */
  SI_EMPTY,      /* '=' on a sparse output: starts with no entries */
} sp_init_kind;

typedef enum { SCMP_LT, SCMP_EQ, SCMP_EQ_PARAMS } sp_cmp;
typedef struct {
  sp_cmp op;
  const sym *a, *b;    /* a < b, a == b; EQ_PARAMS: params[0] == params[q] for all q */
  int nparams;
  const int *params;
} sp_cond;

/* An expression of the assignment, with its accesses resolved to buffers. */
typedef enum {
  SE_ACCESS, SE_NUM, SE_ADD, SE_SUB, SE_MUL, SE_DIV, SE_NEG,
  SE_CALL, /* an element-wise function of a (and b), computed in the statement's type */
  SE_PARAM, /* a param's value, converted to the statement's type */
  /* a loop's condition (computed in double): comparisons of a and b, and logic */
  SE_LT, SE_LE, SE_GT, SE_GE, SE_EQ, SE_NE, SE_AND, SE_OR, SE_NOT,
  SE_ABSENT /* (in a zero_if condition) the sparse access a holds no entry here */
} sp_expr_kind;
typedef struct sp_expr sp_expr;
struct sp_expr {
  sp_expr_kind kind;
  /* SE_ACCESS: a buffer element (buf >= 0), a workspace element (work >= 0), or a stored entry
   * of a sparse access (sparse >= 0: the position variable of that access; maybe_absent: the
   * position may be -1, the value then 0) */
  int buf, work, sparse;
  int tensor;          /* the tensor of a buffer or sparse access */
  bool maybe_absent;
  bool contracted;     /* SE_ACCESS of a temporary held in a register of the iteration (SN_REGISTER) */
  int nidx;
  const int *vars;     /* program var ids, one per dim */
  /* SE_NUM */
  double num;
  bool is_int;
  int64_t ival;
  const char *text;
  fe_func func;        /* SE_CALL */
  int param;           /* SE_PARAM: index into the program's params */
  const sp_expr *a, *b;
  int nguards;         /* counts only where these vars are 0 (reduction placement) */
  const int *guards;
  /* Structural zeros of sparse operands (README, "Sparse tensors"): zero_if, where not NULL,
   * is a condition (SE_ABSENT leaves under SE_AND / SE_OR) where this expression is zero
   * because a sparse access holds no entry: the access itself, a product with such a factor,
   * a quotient of such a numerator, a call that keeps zero of such an operand, a sum of such
   * terms.  An access whose position is known to hold an entry has none.  zero_guard: the
   * node is printed as (zero_if ? 0 : node), whatever its other operands hold (0 * inf,
   * 0 / 0 would give NaN); set at the outermost products, quotients and calls with a
   * condition. */
  const sp_expr *zero_if;
  bool zero_guard;
};

typedef struct sp_node sp_node;
struct sp_node {
  sn_kind kind;
  int nkids;
  sp_node **kids;
  const char *comment;  /* printed beside the node: the command or relation behind it */
  /* SN_LOOP */
  sp_loop_kind loop;
  int var, lvar;        /* lvar: SL_COLL_BLOCK's local index */
  int dim;              /* SL_COORD, SL_LOCAL_BLOCK: grid dim */
  const sym *lo, *hi, *value; /* bounds; SL_COLL_BLOCK: hi = count, value = var's value */
  ir_par_unit par;      /* SL_LOCAL: thread or vector pragma */
  bool simd_sum;        /* SL_LOCAL: the loop of a register sum, run in SIMD lanes
                         * (spmd_simd) */
  /* SL_LOCAL, SL_LOCAL_BLOCK: the rank's OpenMP threads share the iterations where there are
   * several and `threads_work` (an estimate of the nest's iterations) is large enough
   * (spmd_threads); threads_sum: they also sum the enclosing register */
  bool threads, threads_sum;
  const sym *threads_work;
  /* SL_SPARSE: over access `sparse` at `level`; base: the index value at local coordinate 0;
   * parent_maybe_absent: the parent position may be -1 (no stored entry: an empty loop) */
  int sparse, level;
  const sym *base;
  bool parent_maybe_absent;
  bool within;          /* SL_SPARSE: every stored coordinate is below hi (base 0 and hi the
                         * level's extent): no check in the loop */
  bool prefetch;        /* SL_SPARSE: fetches the piece's arrays ahead where the level is
                         * banded (spmd_prefetch) */
  /* SL_SPARSE: dense elements the loop reads or writes at its coordinate (gathered at
   * scattered addresses), fetched a few entries ahead where the level is not banded
   * (spmd_gather): gather[u], whose dims in gather_inner[u] (a bit per dim) are bound by
   * local loops inside (their first value, 0, fetched), whose row runs gather_len[u]
   * elements (NULL: one) */
  /* SL_SPARSE under an SN_ACC (and that SN_ACC): its sum kept in `sums` registers, the loop
   * unrolled by as many, where the dense elements it gathers fit the first-level cache
   * (spmd_sums; 0: one) */
  int sums;
  /* ... and its one-register loop (all of it where the gathered elements do not fit, the rest
   * after the four-register one where they do) unrolled by as many, its sum in the same order
   * (spmd_sums; 0: as written) */
  int unroll;
  int nsums_read;
  const sp_expr **sums_read; /* ... those elements (their last index is the loop's variable) */
  int ngather;
  const sp_expr **gather;
  const unsigned *gather_inner;
  const sym **gather_len;
  /* SL_SPARSE over the union of the stored coordinates of several sparse accesses (a sum of
   * sparse operands: an iteration where none holds an entry adds zero): union_sparse[u] at
   * union_level[u] of tensor union_tensor[u], u < nunion (the first is sparse, level, tensor);
   * each access's position is -1 where it holds no entry at the coordinate; base as for one
   * access.  nunion 0: over one access's entries. */
  int nunion;
  const int *union_sparse, *union_level, *union_tensor;
  int nhoist;           /* SL_LOCAL: operands read once before the loop (spmd_hoist) */
  const sp_expr **hoist;
  int jam;              /* SL_LOCAL, SL_LOCAL_BLOCK: iterations whose register sums run in one
                         * pass of their inner loop (spmd_jam; 0: one at a time) */
  int strip;            /* SL_LOCAL, SL_SPARSE: its innermost loop's columns summed in registers
                         * over it, this many at a time (spmd_strips; 0: as written) */
  /* SN_BIND: var = value */
  const sym *bind;
  /* SN_GUARD, SN_IF */
  int nconds;
  sp_cond *conds;
  /* SN_COMM */
  sp_comm_op op;
  int buf;
  unsigned mask;
  const int64_t *roots; /* SC_REDUCE: root coordinate per grid dim */
  int shift_dim;
  int depth_var;        /* the communicate loop's var (-1: before every loop) */
  const sym *depth_extent;   /* ... its extent */
  bool depth_distributed;    /* ... distributed (each rank runs its own iterations) */
  int nargs;
  const int *arg_vars;  /* SC_FETCH, SC_ACCUMULATE, SC_SPARSE_*: the loop values the box
                         * functions read (program var ids; argument var - var0) */
  const sym **box_lo, **box_hi; /* SC_BCAST_BEGIN / SC_SHIFT_BEGIN: the box posted */
  int other_slot;       /* SC_*_BEGIN: 0 posts into slot + cur, 1 into slot + (cur ^ 1) */
  bool fallback;        /* the general way of a grid-dependent choice (the other: SN_IF) */
  int from_copy;        /* SC_VIEW made by the rewrite "redistribute": 1 + the tensor the loops read
                         * before (a copy of this one, equal to it here) */
  int reuses;           /* SC_BCAST, SC_FETCH (and SC_SPARSE_FETCH, SC_SPARSE_BCAST in a loop):
                         * 1 + the buffer of an earlier statement that holds the same box of
                         * the same tensor (the rewrite "fetch"): no communication, the buffer
                         * is that one's slot; 0: communicates */
  int once_loop;        /* SC_BCAST, SC_FETCH, SC_SPARSE_FETCH, SC_SPARSE_BCAST inside a loop that
                         * writes no part of its tensor: the loop's number, and the operation
                         * runs at that loop's first iteration only, the later ones reading
                         * what it left in its buffer (the rewrite "invariant"); 0: every time */
  int nmerged;          /* SC_ALLREDUCE of a scalar: more scalars' sums, of the same type and mask, in the same call */
  const int *merged;    /* ... their buffers */
  int halo_tensor;      /* SC_HALO: the sparse tensor (read as the rank's own piece) whose stored coordinates */
  int halo_level;       /* ... at this level are the entries filled */
  bool halo_split;      /* SC_HALO: posted only, rows in two phases (the rewrite "overlap"); SC_HALO_END completes it */
  /* SN_GUARD of the rewrite "overlap": 1 + the halo buffer whose rows it tests (0: an ordinary
   * guard); the iteration runs where the row at the position of sparse access `sparse`,
   * level `level`, reads a ghost (phase 1) or only the rank's own block (phase 0) */
  int halo_guard, halo_phase;
  /* ... where the guard heads the body of the loop over the rows (var skip_var), whose value
   * moves with the row's position one for one: a row that does not run moves the loop to the
   * next row that does at once (dtl_halo_skip), where the loop runs on one thread */
  bool halo_skip;
  int skip_var;
  /* SN_INIT */
  sp_init_kind init;
  int tensor, work, slot;
  const sym *extent;    /* SI_WORKSPACE: elements */
  /* SN_SPPOS: position of access `sparse` at `level` from the bound index var */
  bool compressed;
  /* SN_KERNEL: kernel over nk loops; the extent of kernel dim q is khi[q] - klo[q], over the
   * original var korig[q]; the call's arguments, as the kernel catalogue lays them out, name
   * operands by kops index (0: the output, q: the q-th factor of the product) */
  ir_kernel kernel;
  int nk;
  const int *korig;
  const sym **klo, **khi;
  int nkops;
  const sp_expr **kops;
  const kc_call *kcall;  /* NULL: the statement does not match (a compiler error) */
  const sp_expr *kcoef; /* the product's coefficient (ir_kernel_operands; NULL: 1): the call runs
                         * on a scaled copy of its smallest factor, or, where the output is a
                         * scalar, adds the scaled sum of a call into a temporary */
  /* SN_ASSIGN, SN_ACC */
  const sp_expr *rhs, *lhs;
  fe_type type;
  bool atomic;          /* host: omp atomic; device: atomic add */
  bool to_acc;          /* SN_ASSIGN inside SN_ACC: adds to the register */
  bool to_entries;      /* a sparse output: a nonzero becomes an entry */
  bool store;           /* SN_ASSIGN: stores its value (the element is written once), else adds;
                         * SN_KERNEL: calls the kernel's storing entry point */
  /* SN_DEVICE */
  const char *kname;
  int nmapped;
  const int *mapped_vars;          /* thread vars, slowest first */
  const sym **mapped_lo, **mapped_hi;
  int ncaptured;
  const int *captured;             /* vars bound on the host that the kernel reads */
  int nbufs;
  const int *bufs;                 /* buffers the kernel reads or writes */
  const int *loop_vars;            /* every loop var of the kernel's nest, outer first */
  const bool *loop_thread;         /* ... mapped to threads */
  int nloops;
  /* SN_WIDTH: the sparse tensors whose index arrays the loops below read */
  int nwidth;
  const int *width_tensors;
};

typedef struct {
  int index;            /* statement number (0-based) */
  const char *text;     /* the statement as written */
  const char *cin;      /* its concrete index notation */
  int src_line;        /* its line in the source */
  int var0, nvars;      /* its variables: program ids [var0, var0 + nvars) */
  int nargs;            /* box-function argument vector length */
  int nbufs;
  int *bufs;            /* its buffers (program ids) */
  sp_node *body;
  int lhs_tensor;
  bool accumulate;      /* += (else =) */
  /* every iteration writes a distinct element of the output: no summed variable, distinct
   * index variables on the left, no precompute */
  bool distinct_writes;
  int64_t flops;        /* operations per iteration point (for GFLOP/s) */
  /* the statement as a serial loop nest over global arrays (the driver's reference) */
  int nref;
  const int *ref_vars;  /* original index variables, outermost first */
  const sym **ref_ext;
  const sp_expr *ref_lhs, *ref_rhs;
  int nred;
  const sym **red_ext;  /* extents of the summed index variables (a tolerance's length) */
  /* fusion: >= 0, the statement whose loop nest now runs this one's (its body is then empty and
   * compute does not call it); -1 where it runs alone */
  int fused_into;
  /* the rewrite "redistribute": the statement does nothing the program can observe (a copy
   * back into the tensor it was copied from, or a copy nobody reads any more); its body is
   * empty and compute does not call it.  NULL: it runs */
  const char *removed;
  /* the rewrite "clones" (spmd_clones): the function is compiled for the baseline and for
   * x86-64-v3 (AVX2, FMA), the loader choosing the CPU's */
  bool clones;
} sp_func;

/* The program's control structure (LANGUAGE.md section 9): statement calls and loops. */
typedef enum { SP_CALL, SP_REPEAT } sp_item_kind;
typedef struct sp_item sp_item;
struct sp_item {
  sp_item_kind kind;
  int func;             /* SP_CALL: the statement function */
  /* SP_REPEAT: at most `bound` iterations; after each, the loop ends when cond holds (NULL:
   * no condition).  The condition reads scalar tensors (SE_ACCESS with buf -1 and no indices),
   * params and literals, and every rank takes rank 0's decision. */
  const sym *bound;
  const sp_expr *cond;
  const char *cond_text;
  int nreads;
  const int *reads;     /* the scalar tensors the condition reads, in order of first appearance */
  int number, src_line; /* the loop's number (1-based, source order) and line */
  /* fusion across the back edge (rewrite.c): the first `peel` items of the body (one statement
   * or fused group) run once before the loop, and each iteration's next run of them is fused
   * into the loop nest of the body's last statement, function `peel_into`; 0: none */
  int peel, peel_into;
  int nitems;
  sp_item *items;
};

/* One applied (or refused) rewrite, for --emit spmd. */
typedef struct {
  const char *rewrite;
  const char *where;
  const char *why;      /* NULL: applied */
} sp_log;

/* ---- the run-time choice among schedules (distalc --auto; variants.c) -------------------- */
/* What one communicate point moves to the rank at grid coordinates 0: a box per iteration of
 * the loops at and above it, summed over them (the plan's "bytes per rank"); or, where local,
 * the box of its own blocks the rank's loops touch (bytes from memory only, none where the
 * loops walk more than SP_LOCAL_STEPS boxes: lw_stmt_cost's budget). */
#define SP_LOCAL_STEPS 200000
typedef struct {
  bool local;           /* the rank's own block: no communication, no buffer */
  int nloops;           /* the loops [0, depth] of the statement */
  const int *var;       /* each loop's counter (a program variable id of the variant's program) */
  const sym **ext;      /* and its trip count */
  int order;
  const sym **lo, **hi; /* the box needed at one step (syms over those counters) */
  int64_t elem;         /* bytes per element */
  int nbuf;             /* buffers of the box's size the rank holds (2: double buffered) */
  /* a broadcast along these grid dims (0: none) weighs as lw_bcast_weight says; where the
   * params in assume are equal at run time, alt_bcast applies instead (rotate's shifts) */
  unsigned bcast, alt_bcast;
  /* a reduction along these grid dims (0: none): among one rank it moves nothing (as a
   * broadcast among one; lw_comm_alone) */
  unsigned reduce, alt_reduce;
  bool exchange, alt_exchange; /* a point-to-point exchange: LW_EXCHANGE_WEIGHT */
  /* what of a box the rank receives (lw_step_received): the pattern (alt_: under the
   * assumption), a shift's grid dim, and the ownership of the tensor (its block's formulas) */
  lw_pattern pat, alt_pat;
  int shift_dim, alt_shift_dim;
  bool output;          /* a produced box */
  unsigned exec_mask;   /* the grid dims the statement's loops are distributed over */
  const lw_owner *own;
  int nassume;
  const int *assume;
  bool once, alt_once;  /* a fetch the SPMD rewrite `invariant` runs once per entry of the
                         * statement's loop (lw_loop_invariant), not at every run (alt_: under
                         * the assumption) */
} sp_cost_comm;
typedef struct {
  int func;             /* the statement function whose variables the formulas use */
  int ntrips;
  const sym **trip;     /* the rank's loop trip counts: its iterations are their product */
  double speedup;       /* of its leaf kernel over the generated loops in the model (1: none) */
  double threads;       /* the threads its loops run on (a kernel, a parallelized loop) */
  int kdepth;           /* the first of the kernel's loops among the trips (-1: no kernel): the
                         * speedup shrinks with the shortest of them (lw_kernel_share) */
  int ncomm;
  sp_cost_comm *comm;
  /* in a `repeat` loop: its runs are entries x bound (the bounds of the loops around its
   * innermost one, and that one's, each at least 1), its once fetches entries times; NULL: 1 */
  const sym *entries, *bound;
} sp_cost_stmt;
/* Where a statement runs in the program's loops, for the run-time choice (spmd_variants):
 * entries, bound as sp_cost_stmt's; unwritten[t]: the loop writes no part of tensor t (NULL:
 * in no loop, or no fetch runs once). */
typedef struct {
  const sym *entries, *bound;
  const bool *unwritten;
} sp_stmt_runs;
/* One candidate program: the same program with other schedules for the statements --auto
 * searched, and the formulas of its predicted time (the model of autosched.h, evaluated for
 * rank 0, so that every rank makes the same choice). */
typedef struct {
  const struct sp_program *sp; /* its SPMD program (variants[0]: the program itself) */
  const char *label;    /* where the search chose it ("4 ranks, n=4096") */
  const char **schedule; /* per statement: its chosen schedule commands ("": the default) */
  int nstmts;
  sp_cost_stmt *stmts;
} sp_variant;

typedef struct sp_program {
  const lw_program *lp; /* ownership, grid: what the lowering decided */
  bool cuda;
  int ntensors, nparams;
  sp_tensor *tensors;
  sp_param *params;
  bool any_sparse;
  /* the grid: every level's dims, outer level first */
  int ndims, nlevels;
  const int *level_off;
  const sym *const *dims;
  bool has_machine;
  sym_facts facts;      /* the grid's: what rewrites may prove with (variables are program-wide) */
  int nvars;
  sp_var *vars;
  int vars_cap;         /* (spmd_build: the entries vars has room for) */
  int nbufs;
  sp_buf *bufs;
  int bufs_cap;         /* (spmd_build: the entries bufs has room for) */
  int nfuncs;
  sp_func *funcs;
  int nslots;
  int nworks;
  struct { const char *name; int func; fe_type type; } *works; /* precompute workspaces */
  int nlog, caplog;
  sp_log *log;
  int nitems;           /* the program: statement calls and loops, in order */
  sp_item *items;
  int nloops;
  bool fuse;            /* the program-level rewrites run (distalc --no-fuse turns them off) */
  int nsplits;          /* the balanced partitions */
  sp_split *splits;
  /* the run-time choice (variants.c): nvariants > 1 (or 1 with shape_free) where plan_create picks one of these
   * programs by its predicted time at the real rank count and params; the machine model and
   * the memory limit (bytes of buffers per rank, 0: none) the formulas use */
  int nvariants;
  sp_variant *variants;
  bool shape_free;      /* plan_create also chooses the grid's shape: every assignment of the
                         * free grid params used once (dtl_grid_shapes) with every variant, the
                         * pair predicted fastest (--auto; nvariants >= 1) */
  double bandwidth, latency, point_time, memory_bandwidth;
  double node_bandwidth, node_latency; /* a group within one node (dtl_group_in_node) */
  int64_t ranks_per_node;  /* the nodes the compile evaluates them for (<= 0: one node); the
                            * generated plan_create measures its own (dtl_nodes_blocked) */
  int64_t mem_limit;
} sp_program;

/* Build the SPMD program of a lowered program (every statement) and apply the rewrites;
 * fuse: also the program-level ones (fusion across statements, LANGUAGE.md section 9). */
sp_program *spmd_build(const lw_program *lp);
sp_program *spmd_build_ex(const lw_program *lp, bool fuse);
/* distalc --emit plan, after the lowering's plan: what the rewrites changed in it (the halo
 * exchanges that replace broadcasts). */
void spmd_print_plan_notes(FILE *f, const sp_program *sp);
/* distalc --emit spmd: the program, one line per node, and the rewrites applied or not. */
void spmd_print(FILE *f, const sp_program *sp);

/* ---- the run-time choice (variants.c) -------------------------------------------------- */
/* The pass that decides what plan_create chooses from (distalc --auto).  Precondition: every
 * program of alts is the same source program with other schedules, lowered for a flat CPU
 * machine, with no sparse tensor (their pieces and halo caches are per slot), alts[0] == sp.
 * Rule: sp->variants[v] = the SPMD program of alts[v] with the cost formulas of each of its
 * statements (loop trip counts, and per communicate point its loops, box and element size,
 * from the lowering's plan); speedup[v][i] is statement i's leaf kernel's speedup in the
 * model and threads[v][i] the threads its loops run on there.  The printer spells a cost function per variant and the choice in plan_create:
 *   predicted seconds = sum over statements of  entries x (bound x a run + once), where
 *     a run = messages x latency + first step's bytes / bandwidth + max(other steps' bytes /
 *     bandwidth, max(iterations x point_time / speedup, bytes from memory / memory_bandwidth))
 *     counts every communicate point but the fetches the SPMD rewrite `invariant` runs once
 *     per entry of the statement's loop, and once = those fetches' messages x latency + bytes
 *     / bandwidth (runs[i]: statement i's loops, the model of autosched.h; NULL: in none)
 * where a communicate point whose group is within one node (dtl_group_in_node) takes the
 * node's latency and bandwidth; model[] is bandwidth, latency, point_time, memory_bandwidth,
 * node_bandwidth, node_latency (both > 0) and the ranks per node of the compile (0: one node)
 * (autosched.h), the least among variants whose buffers fit mem_limit (else the least
 * buffers), ties to the lower index. */
void spmd_variants(sp_program *sp, const sp_program *const *alts, int nalts, const double *const *speedup,
                   const double *const *threads, const char *const *labels, const char *const *const *schedules, const double model[7], int64_t mem_limit,
                   const sp_stmt_runs *runs);
/* The formulas of variant v evaluated at params (grid params solved): what the generated
 * plan_create computes.  False where one cannot be evaluated. */
bool spmd_variant_cost(const sp_program *sp, int v, const int64_t *params, double *seconds, double *buffer);
/* The same for ranks on nodes of per_node consecutive ranks (<= 0: one node). */
bool spmd_variant_cost_nodes(const sp_program *sp, int v, const int64_t *params, int64_t per_node, double *seconds, double *buffer);
/* The variant plan_create picks at params (-1: none can be evaluated). */
int spmd_variant_choice(const sp_program *sp, const int64_t *params);
/* Where sp->shape_free: the grid's shape plan_create chooses at `ranks` ranks (every shape of
 * dtl_grid_shapes with the variant spmd_variant_choice picks there: the solver's shape unless
 * another fits where it does not or is predicted faster than DTL_SHAPE_MARGIN of its time,
 * then the fastest, those that fit first), written into the grid params of params (the others
 * as given); given: the params before the grid was solved (-1: no value).  Returns the shape's
 * number (0: the solver's; -1: the shape is not free or nothing could be evaluated) and the
 * count of shapes in *nshapes. */
int spmd_shape_choice(const sp_program *sp, int64_t ranks, const int64_t *given, int64_t *params, int *nshapes);
/* --emit plan: each variant's predicted cost at params (grid params solved) and the one
 * plan_create would pick, at the grid shape it would choose where sp->shape_free (given: the
 * params before the solve, NULL: the solved grid). */
void spmd_print_variants(FILE *f, const sp_program *sp, const int64_t *params, int64_t ranks, const int64_t *given);
/* Each statement's schedule in variant x, one line each ("its default" where none). */
void spmd_print_variant_schedules(FILE *f, const sp_variant *x);

/* ---- rewrites (rewrite.c) ------------------------------------------------------------- */
/* A rewrite: where it can apply (NULL) or why not (a reason), how, and what it does. */
typedef struct {
  const char *name;
  const char *(*can_apply)(const sp_program *sp, const sp_func *fn, const sp_node *n, int at);
  void (*apply)(sp_program *sp, sp_func *fn, sp_node *n, int at);
  const char *describe;
} sp_rewrite;
extern const sp_rewrite sp_rewrites[];
extern const int sp_nrewrites;
/* Apply every rewrite of the table, in order, wherever it can (spmd_build does). */
void spmd_rewrite(sp_program *sp);
/* The program-level rewrites (with sp->fuse): consecutive statements whose loop nests run
 * alike run as one (spmd_build does, after spmd_rewrite). */
void spmd_fuse(sp_program *sp);

/* The index width of the loops over stored coordinates (spmd_build does, last): a sparse
 * piece holds 32-bit positions and coordinates where they fit, 64-bit otherwise (chosen at
 * run time, per piece).  Each outermost subtree that reads sparse index arrays and holds
 * only local computation (loops, bindings, guards, positions, sums, assignments, kernels;
 * no communication or setup, so the pieces it reads are bound before it) is wrapped in an
 * SN_WIDTH node:
 *   N  =>  width(T1..Tk) { N }   printed as   if (T1..Tk narrow) N[32-bit] else N[own widths]
 * so that the inner loops read one width with no test per entry. */
void spmd_index_width(sp_program *sp);

/* SIMD register sums (spmd_build does, before the index width).  A C compiler keeps a
 * floating-point sum in program order, so it vectorizes none of the loops that sum into a
 * register (dot products, TTV, inner products, matrix-vector rows).  Precondition: the only
 * kid of an SN_ACC is a loop over a dense local range (no threads; a loop over stored
 * coordinates gathers its operands, which lanes do not speed up), whose body only binds index values, skips
 * iterations by ordinary guards and adds to the register (no nested loop, position search,
 * call of the runtime or atomic).  Rule: the loop is marked simd_sum, printed as
 *   #pragma omp simd reduction(+: register)
 * which sums in as many partial sums as the vector has lanes: the order of summation
 * changes, as a schedule may change it (LANGUAGE.md section 9), the sum does not.
 * --emit spmd marks the loop "(simd sum)" and lists the rewrite. */
void spmd_simd(sp_program *sp);

/* Prefetch for the leaf loops over stored coordinates (spmd_build does, after the threads).
 * A loop over a sparse level's stored coordinates streams the piece's coordinates (and, at
 * the last level, its values) segment after segment, a few entries each (a stencil's five),
 * and gathers the dense operands at them.  The hardware's prefetchers lose those streams
 * among the gathers: a 2-D Poisson SpMV read 0.5 to 0.7 of the read bandwidth.  Precondition,
 * on a CPU program: an SL_SPARSE loop whose body has no loop, kernel, communication or
 * sparse result (a leaf: it visits one parent's segment, and the enclosing loops visit the
 * parents in order).  Rule: the loop is marked prefetch, printed before the loop as
 *   if (piece->banded[level]) {
 *     dtl_prefetch(crd[level], end, width);   (the line DTL_PREFETCH_BYTES past crd[end])
 *     dtl_prefetch(vals, end, size);          (at the last level)
 *   }
 * where end is the segment's end: the entries a few segments on are in the cache when the
 * loop reaches them.  The test is the piece's, made when it was built (runtime.h
 * dtl_sparse.banded): where the coordinates scatter, the gathers take the memory system's
 * outstanding requests and fetching ahead slowed a random SpMV by a tenth, so those pieces
 * run the loop as without the rewrite.  A hint: no value changes.  --emit spmd marks the loop
 * "(prefetch where banded)" and lists the rewrite per statement with sparse loops. */
void spmd_prefetch(sp_program *sp);

/* Fetch ahead the elements a loop over stored coordinates gathers (spmd_build does, after
 * the prefetch).  In C(i,k) += A(i,j) * B(j,k) with A sparse, each stored entry reads row j
 * of B, at an address only the entry's coordinate gives: where the coordinates scatter, each
 * row is a cache miss that the processor starts only when the loop reaches the entry, so the
 * loop waits on the memory's latency, not its bandwidth (a random SpMM with rows of 16
 * doubles read 5 GB/s).  Precondition, on a CPU program: an SL_SPARSE loop L over one
 * access's stored coordinates (not a union) whose body holds no kernel, communication,
 * device code or setup, and a dense element (a buffer's, not a workspace's or a register's)
 * that L's body reads or writes, indexed by L's variable, whose other indices are each
 * bound outside L or by a local loop inside it (first value 0), and whose row length (the
 * bound of the local loop over its last dim, if one) reads no variable bound inside L.
 * Rule: L is marked with those elements (at most 8), printed before the loop as
 *   const bool g = !piece->banded[level];
 * and first in each iteration p as
 *   if (g) dtl_prefetch_row(buffer, index of the element at coordinate crd[p + AHEAD] - base
 *                           and 0 for the inner loops' indices, element size, row bytes);
 * (the last entry of the level where p + AHEAD passes it; AHEAD = DTL_GATHER_AHEAD, 16
 * entries) which fetches the row's cache lines (up to DTL_GATHER_BYTES, 256) into the cache
 * ahead of their use.  A hint that never faults and changes no value.  Banded pieces (runtime.h
 * dtl_sparse.banded) read their rows nearly in order, which the hardware fetches itself:
 * they run the loop as without the rewrite.  The random SpMM above (200000 rows of 10
 * entries, B 200000 x 16) ran in 0.03 s where it took 0.09 (serial, one core); where the
 * rewrite strips (below) then applies to L, only its columns left over gather.  --emit spmd
 * marks the loop "(N rows gathered ahead where scattered)" and lists the rewrite per
 * statement. */
void spmd_gather(sp_program *sp);

/* Partial sums of a loop over stored coordinates (spmd_build does, after the jam).  A CSF
 * TTV's fiber A(i,j) = sum over stored k of B(i,j,k) * c(k) adds each product to one register:
 * every addition waits on the one before (three to four cycles), while the loads of c, in the
 * first-level cache, are ready long before; the loop ran at 0.59 of the read bandwidth on one
 * core.  Precondition, on a CPU program: an SN_ACC of a floating type whose only kid is an
 * SL_SPARSE loop L over one access (not a union) whose coordinates all lie below its bound
 * (no break), not shared by threads and not gathering rows ahead (spmd_gather), whose body
 * only binds and adds to the register (no guard, loop, atomic or sparse result), and whose
 * dense operands indexed by L's variable have it as their last index and no other index
 * bound inside L.  Rule: L and the SN_ACC are marked with sums = 4, L with those operands,
 * printed as
 *   T acc1 = 0, acc2 = 0, acc3 = 0;   (beside the SN_ACC's acc)
 *   int64_t q = first; if (bound x size of each operand <= DTL_SUMS_BYTES)
 *     for (; q + 3 < end; q += 4) { the body at q into acc, at q + 1 into acc1, ... }
 *   for (p = q; p < end; p++) the body into acc
 *   acc += (acc1 + acc2) + acc3;
 * The order of the sum changes, as a schedule may change it (LANGUAGE.md section 9), the sum
 * does not.  Where the gathered operand is larger than the first-level cache the loads wait on
 * the memory instead and the one register was measured faster (a random SpMV, x of 10^6
 * doubles: 0.018 s with one, 0.025 with four), so the test keeps the loop as it was there.
 * The CSF TTV (256^3, density 0.1, one rank) went from 1.13 to 0.93 ms.  The one-register
 * loop (L where the gathers do not fit, the iterations left over where they do) is marked
 * unroll = 4 and printed after DTL_UNROLL4, which asks the C compiler to unroll it by 4 (its
 * sum in one register, in the same order: the same result): the random SpMV of x of 10^6
 * doubles went from 0.045 to 0.0385-0.039 s on one core (the textbook loop 0.036), where the
 * loop's control then takes fewer of the processor's slots and more gathers are in flight;
 * the 2-D Poisson one (n = 10^6) stayed at 4.5 ms.  --emit spmd marks the loop "(4 partial
 * sums where its gathers fit the cache)" and "(one sum unrolled by 4)". */
void spmd_sums(sp_program *sp);

/* Operands read once before the innermost loop (spmd_build does, after the gather).  In
 * C(i,k) += A(i,j) * B(j,k) with k innermost, A's stored value is the same in every
 * iteration, but the C compiler reads it in each (the store to C might change it) and checks
 * at run time that C's row does not overlap it before it vectorizes the loop.  Precondition,
 * on a CPU program: an innermost loop over a dense local range (outside device kernels) whose
 * body only binds index values and assigns (no guard, position search, sum register or
 * communication); an operand of an assignment's right side, a buffer element or a sparse
 * tensor's stored value, indexed by none of the variables the loop binds, of a tensor that no
 * assignment in the loop writes, counted once in the sums (no reduction-placement guard).
 * Rule: the loop is marked with those operands (at most 16), printed before the loop as
 *   const T dtl_hN = operand;
 * and the operand as dtl_hN inside it.  The loop's enclosing iteration is valid where it
 * runs (its guards came before), so the read is in bounds also where the loop runs no
 * iteration, and no iteration changes the value: the loop computes what it computed.  The
 * SpMM above ran 1.1 times as fast (AVX2 copy, one rank).  --emit spmd marks the loop
 * "(N operands read once before it)" and lists the rewrite per statement. */
void spmd_hoist(sp_program *sp);

/* Register sums of several rows at once (spmd_build does, after the hoist).  A matrix-vector
 * row y(i) = A(i,j) * x(j) sums one stream of A into one register: the sum waits on its own
 * additions and the memory serves one stream, so the generated loop read 12 to 13 GB/s where
 * the BLAS's dgemv (four rows a pass) read 24 to 28 on the same core.  Precondition, on a CPU
 * program: a loop L over a local range (no `parallelize`, no threads' register sum) whose body
 * is bindings followed by one SN_ACC (a dense output element through a buffer, no sparse
 * result or atomic update), whose only kid is a SIMD sum's loop I (spmd_simd) whose body only
 * binds and adds to the register (no guard: an iteration skipped in one row is not in
 * another), with no operand read once before it (spmd_hoist), whose bound no variable L binds
 * changes, and that reads the output's tensor only through a snapshot taken before the loops
 * (so no sum reads what another row stores).  Rule: L is marked jam = DTL_JAM, printed as
 *   for (q = lo; q < lo + (hi - lo) / J * J; q += J) {
 *     acc_0 = ... = acc_{J-1} = 0
 *     #pragma omp simd reduction(+: acc_0 .. acc_{J-1})
 *     for (I's range) { for each c < J: { L's variable = q + c; L's bindings; acc_c += I's body } }
 *     for each c < J: { L's variable = q + c; L's bindings; output element of row c (=, +=) acc_c }
 *   }
 *   for (L's variable from there to hi) L's body   (the rows left over, as without the rewrite)
 * Each row's sum runs in the same order as without the rewrite (the same lanes), and the rows
 * are stored in L's order after their sums, which read none of them: the values are the
 * same.  The matrix-vector row loop ran at 22 to 24 GB/s (one rank, n = m = 4096).  --emit
 * spmd marks L "(rows jammed by J)" and lists the rewrite per statement. */
void spmd_jam(sp_program *sp);
/* the printer's view of a jammed loop: its bindings (at most 16) and its register sum */
const sp_node *spmd_jam_parts(const sp_node *L, const sp_node **binds, int *nb);
#define DTL_JAM 4 /* the rows a jammed loop sums at once */

/* Register strips of an output row (spmd_build does, after the sums).  In the SpMM
 * C(i,k) += A(i,j) * B(j,k) with k innermost, each stored entry of row i adds a row of B to
 * the row C(i,:): the loop over k loads and stores the whole row at every entry, and each load
 * waits on the store of the entry before; a dense product's loops (k over the sum, j over the
 * output's columns) do the same.  Precondition, on a CPU program: a loop L over a dense local
 * range or one access's stored coordinates (not a union; no `parallelize`, not shared by
 * threads, not jammed) whose body, sequences flattened, is bindings, positions and ordinary
 * guards followed by one loop K over a dense local range (no `parallelize`, threads, SIMD sum
 * or jam; its bound reads no variable bound inside L) whose body is bindings, positions and
 * ordinary guards followed by one assignment that adds to a buffer element (not an atomic
 * update, a sparse result or a contracted temporary), where:
 *   - K's bindings and guards read only K's variable, the values K's body bound before them
 *     from it, and variables bound outside L (the column's values);
 *   - the element's last index is K's variable, or a value K's body binds that is K's
 *     variable plus a value of variables bound outside L (so the columns are distinct
 *     elements), and its other indices are bound outside L (L sums into the row);
 *   - the right side reads the output's tensor only through a snapshot copied before the
 *     loops (not in place).
 * Rule: L is marked strip = W (the type's elements in 64 bytes: 8 doubles, 16 floats),
 * printed as
 *   kend = max(hi, 0) / W * W
 *   for (kq = 0; kq < kend; kq += W) {      (the whole strips)
 *     T r[W];  for c < W { k = kq + c; K's bindings and guards; r[c] = the element (0: below) }
 *     L { L's body to K; K's operands read once (spmd_hoist);
 *         DTL_LANES for c < W { k = kq + c; K's body, the assignment adding to r[c] } }
 *     for c < W { k = kq + c; K's bindings and guards; the element = r[c] }
 *   }
 *   if (kend < max(hi, 0)) {                 (the columns left over)
 *     where L gathers rows (spmd_gather marked it):
 *       (0: below) for k in [kend, hi) { K's bindings and guards; the element = 0 }
 *       L as without the rewrite, K from kend, the assignment adding to the element
 *     else: a strip as above from kq = kend, of max(hi, 0) - kend lanes
 *   }
 * Each element's sum starts from its value and adds the same terms in the same order: the
 * values are the same, bit for bit.  The lanes' loop has a constant bound, and DTL_LANES
 * (runtime.h) asks the C compiler to vectorize it as a loop, the registers in vectors.  The
 * whole strips do not gather rows ahead (spmd_gather): with the row in registers the
 * processor runs ahead to the next rows itself, and the hint, repeated in each strip, slowed
 * the SpMM below (0.026 s against 0.021); the columns left over run L as it was, gathering.
 * The last strip's lane count is known only at run time, so the C compiler keeps its registers
 * in memory: in a loop over dense rows that still ran the product's loops of 4 columns 1.55
 * times as fast (0.0119 -> 0.0076 s), but in one that gathers rows the SpMM of 4 and of 12
 * columns ran 1.5 times as slowly as without the rewrite, hence L as it was there.  Where L gathers rows at scattered
 * coordinates (spmd_gather marked it and the piece is not banded), each strip gathers the
 * rows again: there kend is the row's length where that is one or two whole strips, else 0
 * (all of L as without the rewrite); the SpMM of 32 columns in four strips ran 1.1 times as
 * slowly, of 16 in two 1.3 times as fast.  Where the rewrite store (rewrite.c)
 * refused the statement's zeroing before the strips, it is tried again (spmd_store_strips): the
 * registers holding each element's whole sum, they start from zero, the element is stored
 * once, and "(0: below)" zeroes the columns left over of the row where there is no zeroing
 * pass.  The SpMM of a random 200000 x 200000 matrix of 10 entries a row went from 0.023 to
 * 0.019 s with 16 columns of B, from 0.017 to 0.011 s with 8 (one core); the loops of an
 * unscheduled product of 2000 x 2000 and 2000 x 64 from 12.6 to 16.0 GFLOP/s.  --emit spmd
 * marks L "(columns of K summed in registers, W at a time, then stored|added)" and lists the
 * rewrite per candidate (an innermost local loop adding to an element, inside a local loop). */
void spmd_strips(sp_program *sp);
/* ... after which the rewrite store (rewrite.c) is tried again on the statements whose zeroing
 * it refused: where the strips' registers hold each element's whole sum, the registers start
 * from zero, the element is stored once, and the zeroing pass is gone (spmd_build does). */
void spmd_store_strips(sp_program *sp);
/* the printer's view of a stripped loop L: its inner loop K and K's assignment; and the nodes
 * of K's body before the assignment (at most max in out; returns their count) */
const sp_node *spmd_strip_parts(const sp_node *L, const sp_node **assign);
int spmd_strip_heads(const sp_node *K, const sp_node **out, int max);

/* Leaf loops at the CPU's vector width (spmd_build does, last).  The generated C is compiled
 * for the baseline of its target (x86-64: SSE2, two doubles a vector), which runs on any CPU
 * of it; a loop nest that reuses what it reads does more arithmetic per byte than the memory
 * bounds, and runs faster on wider vectors: the SpMM C(i,k) = A(i,j) * B(j,k) ran 1.4 times as
 * fast with AVX2.  Precondition, on a CPU program: the statement's function (or the fused
 * group's) has an innermost loop over a dense local range, inside other local loops (ranges,
 * blocks or stored coordinates), outside leaf kernels (the BLAS picks its own code), in whose
 * body every element that moves with the loop stays in place over some enclosing loop (is
 * indexed by none of the variables that loop binds itself, outside the loops nested in it: it
 * comes from the cache, not the memory: SpMM's C(i,k) over j and B(j,k) over i, a dense
 * product's output over its sum and its right operand over its rows), and some element moves.
 * A nest that streams an operand from the memory (gemv's rows, TTV, element-wise statements)
 * runs no faster on wider vectors and keeps one copy.  Rule: the function is
 * marked clones, printed with DTL_LEAF_CLONES (runtime.h): where the C compiler is GCC 12 or
 * later on x86-64 Linux, __attribute__((target_clones("default", "arch=x86-64-v3"))), two
 * copies of the function, the loader choosing the one the CPU runs (an ifunc); elsewhere,
 * or compiled with -DDTL_NO_CLONES, nothing.  The copies compute the same sums (-std=c11
 * contracts no multiply-add); a SIMD sum's lanes differ in number, as any schedule's order
 * of summation may (LANGUAGE.md section 9).  Loops that a rank's threads share run in an
 * outlined function, compiled for the baseline.  --emit spmd lists the rewrite. */
void spmd_clones(sp_program *sp);

/* Threads for the leaf loops (spmd_build does, after the SIMD sums).  A rank that runs several
 * OpenMP threads (OMP_NUM_THREADS set, LANGUAGE.md section 6's parallelize without the
 * command) shares each statement's outermost local loop nest among them.  Precondition, on a
 * CPU program whose statement has no loop that `parallelize` or a device already maps: the
 * loop L (over a local range, the rank's block of a distributed loop, or the stored
 * coordinates of a sparse level: distinct positions, distinct coordinates) holds only loops
 * (local, over stored coordinates), bindings, guards, sparse positions, register sums and
 * assignments (no communication, setup, kernel call, precompute, sparse result or atomic
 * update); every element it writes is indexed by a variable that is L's counter plus a value
 * fixed in the iteration (so that distinct iterations write distinct elements), and every read
 * of a written tensor (but from a snapshot taken before the loops) is at the write's variables
 * (what iteration v writes, only iteration v reads); assignments into an enclosing register
 * make L that register's sum.  Rule: L is marked threads (threads_sum: with the register's
 * reduction), printed as
 *   if (dtl_threads_share(work)) {
 *     #pragma omp parallel for [simd] schedule(static) [reduction(+: register)] num_threads(dtl_loop_threads())
 *     L
 *   } else
 *     L   (as without the pass: an outlined loop would cost a register sum its speed)
 * where work is L's trip count times its inner loops' (those with bounds fixed in L; a loop
 * over stored coordinates counts DTL_THREADS_SPARSE inside L; as L, its number of positions
 * times, at level 0, the piece's entries per coordinate; the printer finds L's last position
 * below its end first so that the loop has no break), evaluated when the loop starts: the
 * rank's own loop below DTL_THREADS_WORK, or where OMP_NUM_THREADS is unset (dtl_loop_threads
 * returns 1: ranks are usually one per core) or the C compiler has no OpenMP.  A sum changes
 * its order (LANGUAGE.md section 9), its value does not.  --emit spmd marks the loop
 * "(rank's threads)" and lists the rewrite "threads" per statement. */
void spmd_threads(sp_program *sp);
#define DTL_THREADS_SPARSE 8 /* the stored coordinates a loop over them is assumed to visit */

/* distalc --emit svg (plan_svg.c): the plan at nranks ranks and these param values (grid params solved)
 * drawn as a standalone SVG 1.1 document, one panel per statement of lp (the grid, each
 * tensor's blocks, each communicate point's bytes and the messages of its first step); sp,
 * where not NULL, adds what the SPMD rewrites changed.  Returns 0 on success. */
int lw_print_svg(FILE *f, const lw_program *lp, const sp_program *sp, const int64_t *params, int64_t nranks,
                 const char *source_name);

/* helpers shared by spmd.c and rewrite.c */
sp_node *sp_new(sn_kind k);
void sp_add(sp_node *parent, sp_node *kid);
void sp_logf(sp_program *sp, const char *rewrite, const char *why, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *sp_comm_name(sp_comm_op op);

#endif
