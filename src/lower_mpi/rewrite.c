/* rewrite.c -- optimizations of the SPMD IR, each a rewrite with its precondition and rule
 * (STYLE.md: a table of {name, can_apply, apply, describe}).  can_apply returns NULL where
 * the rewrite applies and else the reason it does not; `not_here` marks nodes that are not
 * candidates at all (not logged).  spmd_rewrite applies the table in order, everywhere. */
#include "lower_mpi/spmd.h"

#include <string.h>

static const char not_here[] = "";

static const char *where(const sp_program *sp, const sp_func *fn, const sp_node *n) {
  static char b[256];
  if (n->kind == SN_INIT)
    snprintf(b, sizeof b, "statement %d, %s %s", fn->index + 1, n->init == SI_SNAPSHOT ? "snapshot" : "zero",
             sp->tensors[n->tensor].name);
  else
    snprintf(b, sizeof b, "statement %d, %s %s%s", fn->index + 1, sp_comm_name(n->op),
             sp->bufs[n->buf].snapshot ? "in." : "", sp->tensors[sp->bufs[n->buf].tensor].name);
  return b;
}

/* ---- halo ---------------------------------------------------------------------------------
 * A vector broadcast whole to the ranks of one grid dim, of which each rank reads only the
 * entries at the coordinates its piece of a sparse tensor stores (the columns of its rows of a
 * CSR matrix, in a sparse matrix-vector product), moves only those entries (a halo exchange,
 * as PETSc's VecScatter):
 *   bcast B(whole extent) over {D}; for j in stored coordinates of S level k { .. B(j) .. }
 *     =>  halo B(whole extent) over {D} at the stored coordinates of S level k; for j .. (same)
 * B keeps its layout over the whole extent, so the loops that read B(j) do not change, but only
 * the entries at S's stored coordinates (of the rank's own piece, at level k) are filled: the
 * rank's own from its block, the others received from their owners along D.  The runtime's
 * inspector finds those coordinates and what each owner sends once and caches it in the plan
 * (dtl_halo_exchange); the executor moves only the values, every call.
 * Precondition: a bcast or fetch (not split or pipelined, not the general way of a
 * grid-dependent choice) over exactly one grid dim D, of a read buffer B (not a snapshot) of a
 * dense tensor T of order 1, whose box is T's whole extent; T is partitioned in blocks over D
 * along its only dimension and replicated over every other grid dim; every access of B in the
 * statement is B(j) inside a loop over the stored coordinates of one sparse access at a
 * compressed level k whose variable is j itself (not the inner half of a split), and B is read
 * nowhere else (no kernel, no precompute); that access's tensor S is read as the rank's own
 * piece (a view) and no statement writes it (its structure only changes between computes, where
 * the cache notices, or where the application says so); not on the CUDA target.  Candidates are
 * the bcasts and fetches of statements that read a sparse tensor. */
static void replace(sp_node *seq, int at, sp_node **by, int nby);

typedef struct {
  int buf;
  int nloops;
  const sp_node *loops[64]; /* the loops over stored coordinates around the node visited */
  const sp_node *drv;       /* the loop of the first access */
  const char *why;          /* the first access that does not fit */
  int naccess;
} halo_st;

static void halo_expr(halo_st *h, const sp_program *sp, const sp_expr *e) {
  if (!e || h->why) return;
  if (e->kind == SE_ACCESS && e->buf == h->buf && e->sparse < 0 && e->work < 0) {
    h->naccess++;
    const sp_node *L = NULL;
    for (int q = h->nloops - 1; q >= 0 && !L && e->nidx == 1; q--)
      if (h->loops[q]->var == e->vars[0]) L = h->loops[q];
    int64_t base = -1;
    if (!L) h->why = "it is read at an index that no loop over the stored coordinates of a sparse operand runs";
    else if (!(sym_is_const(L->base, &base) && base == 0)) h->why = "its index is the inner half of a split of a sparse loop's variable";
    else if (!sp->tensors[L->tensor].compressed[L->level]) h->why = "the sparse loop is over a dense level";
    else if (h->drv && (h->drv->tensor != L->tensor || h->drv->level != L->level || h->drv->sparse != L->sparse))
      h->why = "it is read inside loops over the stored coordinates of different sparse accesses";
    else h->drv = L;
  }
  halo_expr(h, sp, e->a);
  halo_expr(h, sp, e->b);
}

static bool halo_reads(const sp_expr *e, int buf) {
  if (!e) return false;
  return (e->kind == SE_ACCESS && e->buf == buf) || halo_reads(e->a, buf) || halo_reads(e->b, buf);
}

static void halo_node(halo_st *h, const sp_program *sp, const sp_node *n) {
  if (!n || h->why) return;
  if (n->kind == SN_KERNEL)
    for (int q = 0; q < n->nkops; q++)
      if (halo_reads(n->kops[q], h->buf) || halo_reads(n->kcoef, h->buf)) h->why = "a leaf kernel reads it";
  if (n->kind == SN_PRODUCER && halo_reads(n->rhs, h->buf)) h->why = "a precompute reads it";
  if (n->kind == SN_ASSIGN || n->kind == SN_ACC) {
    if (n->lhs && n->lhs->buf == h->buf) h->why = "it is written";
    halo_expr(h, sp, n->rhs);
  }
  bool sparse_loop = n->kind == SN_LOOP && n->loop == SL_SPARSE;
  if (sparse_loop && n->nunion) {
    h->why = "a loop walks the union of several operands' stored coordinates";
    return;
  }
  if (sparse_loop) {
    if (h->nloops == (int)(sizeof h->loops / sizeof h->loops[0])) {
      h->why = "too many nested loops over stored coordinates";
      return;
    }
    h->loops[h->nloops++] = n;
  }
  for (int q = 0; q < n->nkids; q++) halo_node(h, sp, n->kids[q]);
  if (sparse_loop) h->nloops--;
}

static bool reads_sparse(const sp_program *sp, const sp_func *fn) {
  for (int q = 0; q < fn->nbufs; q++) {
    const sp_buf *b = &sp->bufs[fn->bufs[q]];
    if (!b->output && sp->tensors[b->tensor].sparse) return true;
  }
  return false;
}

static const char *halo_can(const sp_program *sp, const sp_func *fn, const sp_node *seq, int at) {
  const sp_node *n = seq->kids[at];
  if (n->kind != SN_COMM || !(n->op == SC_BCAST || n->op == SC_FETCH)) return not_here;
  if (!reads_sparse(sp, fn)) return not_here;
  const sp_buf *B = &sp->bufs[n->buf];
  const sp_tensor *T = &sp->tensors[B->tensor];
  if (sp->cuda) return "the CUDA target";
  if (n->fallback) return "the pattern depends on the grid's shape (two ways, chosen at run time)";
  if (B->output || B->snapshot) return "the buffer is the statement's output or a snapshot of it";
  if (T->sparse || T->order != 1) return "the tensor is not a dense vector (order 1)";
  if (!n->mask || (n->mask & (n->mask - 1))) return "it does not run along exactly one grid dim";
  int D = __builtin_ctz(n->mask);
  int64_t lo = -1;
  if (!(sym_is_const(B->lo[0], &lo) && lo == 0 && sym_equal(B->hi[0], T->ext[0]))) return "the box is not the tensor's whole extent";
  const lw_owner *o = T->owner;
  bool blocked = o && !o->everywhere && o->kind[D] == OWN_PART && o->tdim[D] == 0;
  for (int d = 0; d < sp->ndims && blocked; d++)
    if (d != D && o->kind[d] != OWN_STAR) blocked = false;
  if (!blocked) return "the tensor is not partitioned in blocks along that grid dim alone (replicated over the others)";
  halo_st h = {.buf = B->id};
  halo_node(&h, sp, fn->body);
  if (h.why) return h.why;
  if (!h.naccess || !h.drv) return "the statement does not read it";
  const sp_tensor *S = &sp->tensors[h.drv->tensor];
  bool view = false;
  for (int q = 0; q < fn->body->nkids; q++) {
    const sp_node *k = fn->body->kids[q];
    view |= k->kind == SN_COMM && k->op == SC_VIEW && !sp->bufs[k->buf].output && sp->bufs[k->buf].tensor == h.drv->tensor;
  }
  if (!view) return "the sparse operand is not read as the rank's own piece";
  if (S->written) return "a statement writes the sparse operand (its stored coordinates change)";
  return NULL;
}

static void halo_apply(sp_program *sp, sp_func *fn, sp_node *seq, int at) {
  const sp_node *n = seq->kids[at];
  halo_st h = {.buf = n->buf};
  halo_node(&h, sp, fn->body);
  sp_node *x = sp_new(SN_COMM);
  *x = *n;
  x->op = SC_HALO;
  x->halo_tensor = h.drv->tensor, x->halo_level = h.drv->level;
  x->comment = "only the entries at the stored coordinates of the rank's piece, from their owners";
  x->nargs = 0, x->arg_vars = NULL;
  sp_node *by[1] = {x};
  replace(seq, at, by, 1);
}

/* ---- pipeline ----------------------------------------------------------------------------
 * A broadcast, or the exchange that starts a shift, at the top of an iteration of a sequential
 * collective loop v in [0, E) goes out one iteration ahead into the second of two slots, so
 * that it travels while the current iteration computes:
 *   bcast B(box(v))              =>  if v == 0 { bcast.begin B(box(v)) }; wait B;
 *                                    if v + 1 < E { bcast.begin B(box(v + 1)) }
 *   fetch B(box(v)) [shift d]    =>  if v == 0 { fetch B(box(v)) } else { wait B };
 *                                    if v + 1 < E { shift.begin B(box(v + 1)) along d }
 * Precondition: B is read (not produced); the operation is not the general way of a
 * grid-dependent choice; it sits inside a loop, and that loop is not distributed (its
 * iterations are the same on every rank, so every member posts the same next step); for a
 * shift, the lowering proved that the next box is the neighbour's current one. */
static const char *pipeline_can(const sp_program *sp, const sp_func *fn, const sp_node *seq, int at) {
  (void)sp, (void)fn;
  const sp_node *n = seq->kids[at];
  if (n->kind != SN_COMM || !(n->op == SC_BCAST || n->op == SC_FETCH)) return not_here;
  if (n->op == SC_FETCH && n->shift_dim < 0) return not_here;
  if (n->depth_var < 0) return "before every loop: no next iteration to overlap with";
  if (n->fallback) return "the pattern depends on the grid's shape (two ways, chosen at run time)";
  if (n->depth_distributed) return "its loop is distributed: ranks run different iterations";
  return NULL;
}

static const sym *next(const sp_program *sp, const sym *e, int v) {
  return sym_subst(&sp->facts, e, SYM_VAR, v, sym_add(sym_var(v), sym_const(1)));
}

static sp_node *begin(const sp_program *sp, const sp_node *n, sp_comm_op op, bool nxt, int other) {
  sp_node *b = sp_new(SN_COMM);
  *b = *n;
  b->kids = NULL, b->nkids = 0;
  b->op = op;
  b->other_slot = other;
  const sp_buf *B = &sp->bufs[n->buf];
  const sym **lo = ir_alloc((B->order + 1) * sizeof *lo), **hi = ir_alloc((B->order + 1) * sizeof *hi);
  for (int x = 0; x < B->order; x++) lo[x] = nxt ? next(sp, B->lo[x], n->depth_var) : B->lo[x], hi[x] = nxt ? next(sp, B->hi[x], n->depth_var) : B->hi[x];
  b->box_lo = lo, b->box_hi = hi;
  b->comment = nxt ? "the next step's data, sent while this step computes" : "the first step";
  return b;
}

static sp_node *cond_if(sp_cmp op, const sym *a, const sym *b, sp_node *then, sp_node *els) {
  sp_node *n = sp_new(SN_IF);
  n->nconds = 1;
  n->conds = ir_alloc(sizeof *n->conds);
  n->conds[0] = (sp_cond){op, a, b, 0, NULL};
  sp_node *t = sp_new(SN_SEQ);
  sp_add(t, then);
  sp_add(n, t);
  if (els) {
    sp_node *e = sp_new(SN_SEQ);
    sp_add(e, els);
    sp_add(n, e);
  }
  return n;
}

static void replace(sp_node *seq, int at, sp_node **by, int nby) {
  sp_node **k = ir_alloc((seq->nkids + nby + 1) * sizeof *k);
  memcpy(k, seq->kids, at * sizeof *k);
  if (nby) memcpy(k + at, by, nby * sizeof *k);
  memcpy(k + at + nby, seq->kids + at + 1, (seq->nkids - at - 1) * sizeof *k);
  seq->kids = k;
  seq->nkids += nby - 1;
}

static void pipeline_apply(sp_program *sp, sp_func *fn, sp_node *seq, int at) {
  (void)fn;
  sp_node *n = seq->kids[at];
  int v = n->depth_var;
  const sym *first = sym_var(v), *more = sym_add(sym_var(v), sym_const(1));
  sp_node *wait = sp_new(SN_COMM);
  *wait = *n;
  wait->op = SC_WAIT;
  wait->comment = NULL;
  sp_node *by[3];
  if (n->op == SC_BCAST) {
    by[0] = cond_if(SCMP_EQ, first, sym_const(0), begin(sp, n, SC_BCAST_BEGIN, false, 0), NULL);
    by[1] = wait;
    by[2] = cond_if(SCMP_LT, more, n->depth_extent, begin(sp, n, SC_BCAST_BEGIN, true, 0), NULL);
    by[0]->comment = "the next step's broadcast is posted before this step computes";
  } else {
    sp_node *fetch = sp_new(SN_COMM);
    *fetch = *n;
    fetch->comment = "first step: align by exchange";
    by[0] = cond_if(SCMP_EQ, first, sym_const(0), fetch, wait);
    by[1] = NULL;
    by[2] = cond_if(SCMP_LT, more, n->depth_extent, begin(sp, n, SC_SHIFT_BEGIN, true, 1), NULL);
    by[1] = by[2];
    by[0]->comment = "rotate: later steps receive the neighbour's box during the step before";
  }
  replace(seq, at, by, n->op == SC_BCAST ? 3 : 2);
  sp->bufs[n->buf].doubled = true;
}

/* ---- allreduce ---------------------------------------------------------------------------
 * Partial sums reduced over grid dims D to one root per piece, then broadcast from the roots
 * along dims S of D (where the result is replicated, *), are one allreduce over D:
 *   reduce B over D to roots; bcast.result B over S   =>   allreduce B over D
 * Precondition: the two are adjacent, on the same buffer, and S is part of D.  Members along
 * D \ S that are not roots receive the sum too; they own no part of it (their coordinate is
 * not the fixed one), so the keep-own step that follows keeps nothing there, as before. */
static const char *allreduce_can(const sp_program *sp, const sp_func *fn, const sp_node *seq, int at) {
  (void)sp, (void)fn;
  const sp_node *n = seq->kids[at];
  if (n->kind != SN_COMM || n->op != SC_REDUCE) return not_here;
  if (at + 1 >= seq->nkids || seq->kids[at + 1]->kind != SN_COMM || seq->kids[at + 1]->op != SC_BCAST_RESULT)
    return not_here; /* a reduction whose result stays with the roots */
  const sp_node *b = seq->kids[at + 1];
  if (b->buf != n->buf) return "the broadcast moves another buffer";
  if (b->mask & ~n->mask) return "the broadcast runs along dims the reduction does not";
  return NULL;
}

static void allreduce_apply(sp_program *sp, sp_func *fn, sp_node *seq, int at) {
  (void)sp, (void)fn;
  sp_node *n = sp_new(SN_COMM);
  *n = *seq->kids[at];
  n->op = SC_ALLREDUCE;
  n->roots = NULL;
  n->comment = "reduce + broadcast of the result";
  sp_node *by[1] = {n};
  /* replaces the pair */
  replace(seq, at, by, 1);
  replace(seq, at + 1, by, 0);
}

/* ---- store -------------------------------------------------------------------------------
 * An '=' statement whose iterations write every element of the rank's block exactly once needs
 * no zeroing pass; each update stores its value instead of adding it:
 *   zero T; ...; T(v) += e        =>   ...; T(v) = e
 * Precondition: T is dense and written in place, in the rank's own block (a view: every grid
 * dim is either distributed over the dim of T it partitions, or T is replicated along it and
 * every rank there runs the same iterations); the statement sums over nothing, its left side
 * has distinct index variables and it has no precompute, so each iteration writes a distinct
 * element, and as the iterations of all ranks cover T's index space and each rank writes only
 * its own block, each rank's iterations cover its block; no loop skips iterations (loops over
 * the stored coordinates of a sparse operand), and no leaf kernel or register sum writes T. */
static bool find(const sp_node *n, bool (*pred)(const sp_node *, const void *), const void *arg) {
  if (!n) return false;
  if (pred(n, arg)) return true;
  for (int q = 0; q < n->nkids; q++)
    if (find(n->kids[q], pred, arg)) return true;
  return false;
}
static bool adds_or_skips(const sp_node *n, const void *arg) {
  (void)arg;
  return (n->kind == SN_LOOP && n->loop == SL_SPARSE) || n->kind == SN_KERNEL || n->kind == SN_ACC ||
         n->kind == SN_PRODUCER || (n->kind == SN_ASSIGN && (n->to_entries || n->to_acc));
}

/* A sum into a register per element (SN_ACC, or the registers of a loop of the rewrite strips)
 * stores it the same way when the register holds the element's whole sum:
 *   zero T; for v { sum { for k ... } ; T(v) += it }   =>   for v { sum { for k ... }; T(v) = it }
 * Precondition, beside the view of T's own block: no precompute, distinct variables on the left;
 * every write of T is the result of a register sum that no loop over a summed variable (or one
 * derived from it) and no loop over stored coordinates encloses, so each element's register
 * holds all its terms; nothing else writes T (no kernel, no plain update). */
static bool reduction_var(const sp_program *sp, const sp_func *fn, int v) {
  int local = v - fn->var0;
  const lw_stmt *ls = &sp->lp->stmts[fn->index];
  if (v < 0 || sp->vars[v].kind != SV_INDEX || local < 0 || local >= ls->s->nvars) return true; /* unknown: as if summed */
  return ls->s->vars[local].reduction;
}
/* a loop of the rewrite strips (spmd.h: spmd_strips) whose registers hold sums of T's elements */
static bool strips_of(const sp_node *n, const void *arg) {
  const sp_node *a;
  return n->kind == SN_LOOP && n->strip && spmd_strip_parts(n, &a) && a->lhs && a->lhs->tensor == *(const int *)arg;
}
static const char *acc_store_walk(const sp_program *sp, const sp_func *fn, const sp_node *n, int t, bool red) {
  if (!n) return NULL;
  switch (n->kind) {
  case SN_LOOP:
    if (strips_of(n, &t)) { /* the strips' registers: the loop and the one inside are the sum's */
      if (red) return "a loop over a summed variable or over stored coordinates encloses its register sum";
      return NULL;
    }
    red = red || n->loop == SL_SPARSE || n->loop == SL_THREAD || reduction_var(sp, fn, n->var);
    break;
  case SN_ACC:
    if (n->lhs && n->lhs->tensor == t) {
      if (n->to_entries) return "its register sums become sparse entries";
      if (n->atomic) return "its register sums add atomically (threads share the element)";
      if (red) return "a loop over a summed variable or over stored coordinates encloses its register sum";
      return NULL; /* the register's own loops are the sum's */
    }
    break;
  case SN_ASSIGN:
    if (n->lhs && n->lhs->tensor == t && !n->to_acc) return "it updates the output outside a register sum";
    break;
  case SN_KERNEL: case SN_PRODUCER: case SN_DEVICE: return "a kernel or a precompute runs in it";
  default: break;
  }
  for (int q = 0; q < n->nkids; q++) {
    const char *w = acc_store_walk(sp, fn, n->kids[q], t, red);
    if (w) return w;
  }
  return NULL;
}
static bool distinct_lhs(const sp_func *fn) {
  const sp_expr *l = fn->ref_lhs;
  if (!l) return false;
  for (int a = 0; a < l->nidx; a++)
    for (int b = a + 1; b < l->nidx; b++)
      if (l->vars[a] == l->vars[b]) return false;
  return true;
}
static bool has_acc_of(const sp_node *n, const void *arg) {
  return n->kind == SN_ACC && n->lhs && n->lhs->tensor == *(const int *)arg;
}

/* A leaf kernel that writes the whole block stores it (beta = 0 in its gemm):
 *   zero T; kernel(... T)        =>   kernel_store(... T)
 * Precondition, beside the view of T's own block: the kernel is the only node that writes T,
 * no loop but the collective ones (one iteration per rank) and no branch encloses it, so it
 * runs once and its loops, the statement's own, cover the rank's block; the kernel has a
 * storing entry point (gemm, ttm, mttkrp on the host), which writes every element of its
 * block, also where a summed extent is 0. */
typedef struct {
  int tensor, kernels, others;
  bool enclosed, adds_only;
} kstore;
static void kstore_walk(const sp_node *n, kstore *k, bool enclosed) {
  if (!n) return;
  switch (n->kind) {
  case SN_KERNEL:
    if (n->nkops && n->kops[0] && n->kops[0]->tensor == k->tensor) {
      k->kernels++;
      k->enclosed |= enclosed;
      k->adds_only |= !n->kcall || !n->kcall->kernel->host_store;
    }
    return;
  case SN_ASSIGN: case SN_ACC:
    if (n->lhs && n->lhs->tensor == k->tensor) k->others++;
    break;
  case SN_PRODUCER: case SN_DEVICE: k->others++; break;
  case SN_LOOP: enclosed |= n->loop != SL_COORD; break;
  case SN_IF: enclosed = true; break;
  default: break;
  }
  for (int q = 0; q < n->nkids; q++) kstore_walk(n->kids[q], k, enclosed);
}
/* the reason a statement whose only writer of T is one kernel cannot store (NULL: it can) */
static const char *kernel_store_why(const sp_program *sp, const kstore *k) {
  if (sp->cuda) return "its kernel runs on the device, whose kernels add";
  if (k->enclosed) return "its kernel runs in a loop or a branch (each call adds a part)";
  if (k->adds_only) return "its kernel has no storing entry point";
  return NULL;
}

/* T is a view of the rank's own block in the statement */
static bool own_view(const sp_program *sp, const sp_func *fn, int t) {
  for (int q = 0; q < fn->body->nkids; q++) {
    const sp_node *k = fn->body->kids[q];
    if (k->kind == SN_COMM && k->op == SC_VIEW && sp->bufs[k->buf].output && sp->bufs[k->buf].tensor == t) return true;
  }
  return false;
}

static const char *store_can(const sp_program *sp, const sp_func *fn, const sp_node *seq, int at) {
  const sp_node *n = seq->kids[at];
  if (n->kind != SN_INIT || n->init != SI_ZERO) return not_here;
  if (sp->tensors[n->tensor].sparse) return not_here;
  const char *not_in_place = "the output is not written in place in the rank's own block";
  if (fn->distinct_writes) {
    if (!own_view(sp, fn, n->tensor)) return not_in_place;
    if (find(fn->body, adds_or_skips, NULL)) return "a kernel, a register sum or a sparse co-iteration writes the output";
    return NULL;
  }
  const lw_stmt *ls = &sp->lp->stmts[fn->index];
  kstore k = {.tensor = n->tensor};
  kstore_walk(fn->body, &k, false);
  if (!ls->nwhere && k.kernels == 1 && !k.others) { /* one kernel writes T */
    const char *why = kernel_store_why(sp, &k);
    return why ? why : own_view(sp, fn, n->tensor) ? NULL : not_in_place;
  }
  if (ls->nwhere || !distinct_lhs(fn) || !(find(fn->body, has_acc_of, &n->tensor) || find(fn->body, strips_of, &n->tensor)))
    return "the statement sums, repeats an index on its left, or precomputes";
  if (!own_view(sp, fn, n->tensor)) return not_in_place;
  return acc_store_walk(sp, fn, fn->body, n->tensor, false);
}

static void set_store(sp_node *n) {
  if (!n) return;
  if (n->kind == SN_ASSIGN && !n->to_acc) n->store = true, n->atomic = false;
  if (n->kind == SN_KERNEL) n->store = true; /* the kernel's storing entry point */
  if (n->kind == SN_ACC) { /* the register's total is stored; its own updates still add */
    n->store = true, n->atomic = false;
    return;
  }
  for (int q = 0; q < n->nkids; q++) set_store(n->kids[q]);
}

static void store_apply(sp_program *sp, sp_func *fn, sp_node *seq, int at) {
  (void)sp;
  replace(seq, at, NULL, 0);
  set_store(fn->body);
}

/* The rewrite store once more where the rewrite strips (spmd_strips, after the rewrites) made
 * the registers of a loop hold whole sums: the zeroing of a statement whose store was refused
 * is tried again, and its log entry says what holds now (applied, or the reason). */
void spmd_store_strips(sp_program *sp) {
  for (int i = 0; i < sp->nfuncs; i++) {
    sp_func *fn = &sp->funcs[i];
    if (!fn->body || fn->body->kind != SN_SEQ || fn->fused_into >= 0 || fn->removed) continue;
    for (int at = 0; at < fn->body->nkids; at++) {
      const sp_node *z = fn->body->kids[at];
      if (z->kind != SN_INIT || z->init != SI_ZERO || !find(fn->body, strips_of, &z->tensor)) continue;
      const char *why = store_can(sp, fn, fn->body, at);
      char wb[256];
      snprintf(wb, sizeof wb, "%s", where(sp, fn, z));
      for (int q = 0; q < sp->nlog; q++) /* the log says what holds now */
        if (!strcmp(sp->log[q].rewrite, "store") && sp->log[q].why && !strcmp(sp->log[q].where, wb))
          sp->log[q].why = why ? ir_strdup(why) : NULL;
      if (why) continue;
      store_apply(sp, fn, fn->body, at);
      at--; /* the zeroing is gone */
    }
  }
}

/* ---- in place ------------------------------------------------------------------------------
 * A statement that reads its own output T reads the values T had before it (a snapshot).  Where
 * each iteration reads T only at the element it writes, before writing it, the snapshot is the
 * block itself:
 *   snapshot T; view in.T; ...; T(v) = f(in.T(v))    =>    view in.T = T; ...; T(v) = f(in.T(v))
 * Precondition: T is dense; the statement writes each element once (no summed variable, distinct
 * left-side variables, no precompute); T is written in place in the rank's own block and read
 * there (views); every read of T is at exactly the left side's index variables, in their order;
 * nothing zeroes T first (the store rewrite removed the zeroing, or the statement is a +=); no
 * kernel, register sum or sparse co-iteration. */
static bool same_vars(const sp_expr *a, const sp_expr *b) {
  if (a->nidx != b->nidx) return false;
  for (int x = 0; x < a->nidx; x++)
    if (a->vars[x] != b->vars[x]) return false;
  return true;
}
/* every read of buffer buf in e is at the variables of lhs */
static bool reads_at(const sp_expr *e, int buf, const sp_expr *lhs) {
  if (!e) return true;
  if (e->kind == SE_ACCESS && e->buf == buf && !same_vars(e, lhs)) return false;
  return reads_at(e->a, buf, lhs) && reads_at(e->b, buf, lhs);
}
typedef struct {
  int tensor, buf;
} tb;
static bool zeroes(const sp_node *n, const void *arg) {
  return n->kind == SN_INIT && n->init == SI_ZERO && n->tensor == ((const tb *)arg)->tensor;
}
static bool fills_otherwise(const sp_node *n, const void *arg) {
  return n->kind == SN_COMM && n->buf == ((const tb *)arg)->buf && n->op != SC_VIEW;
}
static bool reads_elsewhere(const sp_node *n, const void *arg) {
  const tb *x = arg;
  if (n->kind != SN_ASSIGN) return false;
  return !reads_at(n->rhs, x->buf, n->lhs);
}

static const char *inplace_can(const sp_program *sp, const sp_func *fn, const sp_node *seq, int at) {
  const sp_node *n = seq->kids[at];
  if (n->kind != SN_INIT || n->init != SI_SNAPSHOT) return not_here;
  if (sp->tensors[n->tensor].sparse) return not_here;
  if (!fn->distinct_writes) return "the statement sums, repeats an index on its left, or precomputes";
  if (find(fn->body, adds_or_skips, NULL)) return "a kernel, a register sum or a sparse co-iteration writes the output";
  tb x = {n->tensor, -1};
  if (find(fn->body, zeroes, &x)) return "the output is zeroed before the loops read it";
  bool out_view = false;
  for (int q = 0; q < fn->nbufs; q++) {
    const sp_buf *b = &sp->bufs[fn->bufs[q]];
    if (b->tensor != n->tensor) continue;
    x.buf = b->id;
    if (find(fn->body, fills_otherwise, &x)) return "the output moves between ranks (not only the rank's own block)";
    if (b->output) {
      out_view = true;
      continue;
    }
    if (b->snapshot && find(fn->body, reads_elsewhere, &x)) return "an iteration reads the output at another element than it writes";
  }
  if (!out_view) return "the output is not written in place";
  return NULL;
}

static void inplace_apply(sp_program *sp, sp_func *fn, sp_node *seq, int at) {
  int t = seq->kids[at]->tensor;
  replace(seq, at, NULL, 0);
  for (int q = 0; q < fn->nbufs; q++)
    if (sp->bufs[fn->bufs[q]].tensor == t && sp->bufs[fn->bufs[q]].snapshot) sp->bufs[fn->bufs[q]].in_place = true;
}

static const char *overlap_can(const sp_program *sp, const sp_func *fn, const sp_node *seq, int at);
static void overlap_apply(sp_program *sp, sp_func *fn, sp_node *seq, int at);

const sp_rewrite sp_rewrites[] = {
    {"allreduce", allreduce_can, allreduce_apply, "reduce followed by a broadcast of the result becomes one allreduce"},
    {"halo", halo_can, halo_apply,
     "a vector read only at the stored coordinates of a sparse operand moves only those entries, from their owners"},
    {"pipeline", pipeline_can, pipeline_apply,
     "a broadcast or shift at the top of a sequential loop goes out one iteration ahead, double-buffered"},
    {"store", store_can, store_apply, "an '=' that writes each element of the rank's block once stores instead of zeroing and adding"},
    {"inplace", inplace_can, inplace_apply, "a statement that reads its own output only where it writes needs no snapshot"},
    {"overlap", overlap_can, overlap_apply,
     "the rows of a sparse product that read no ghost run while the halo exchange travels, reading the vector's block in place"},
};
const int sp_nrewrites = sizeof sp_rewrites / sizeof sp_rewrites[0];

static void walk(sp_program *sp, sp_func *fn, const sp_rewrite *r, sp_node *n) {
  if (!n) return;
  if (n->kind == SN_SEQ) {
    for (int at = 0; at < n->nkids; at++) {
      const char *why = r->can_apply(sp, fn, n, at);
      if (why == not_here) {
        walk(sp, fn, r, n->kids[at]);
        continue;
      }
      const char *w = where(sp, fn, n->kids[at]);
      char wb[256];
      snprintf(wb, sizeof wb, "%s", w);
      if (why) {
        sp_logf(sp, r->name, why, "%s", wb);
        continue;
      }
      int before = n->nkids;
      r->apply(sp, fn, n, at);
      sp_logf(sp, r->name, NULL, "%s", wb);
      at += n->nkids - before; /* past what the rewrite put there */
    }
    return;
  }
  for (int q = 0; q < n->nkids; q++) walk(sp, fn, r, n->kids[q]);
}

void spmd_rewrite(sp_program *sp) {
  for (int r = 0; r < sp_nrewrites; r++)
    for (int i = 0; i < sp->nfuncs; i++) walk(sp, &sp->funcs[i], &sp_rewrites[r], sp->funcs[i].body);
}

/* ---- fusion (LANGUAGE.md section 9) -------------------------------------------------------
 * Consecutive statements whose loop nests run alike, and where each reads what the other
 * writes on the same rank at the same element, run as one nest (Diffuse; Keller and
 * Chakravarty's <<f>> . <<g>> = <<f . g>>):
 *   A: views; for v in R { a(v) }     B: views; for w in R { b(w) }
 *     =>  A: views of A and B; for v in R { a(v); b(v) }      (B's call removed)
 * Precondition: both statements are a prologue of buffer declarations and views of the ranks'
 * own blocks (no communication, no zeroing, no snapshot) followed by one loop nest that holds
 * only loops, bindings, guards and assignments (no communication, kernel, register sum or
 * sparse co-iteration; no device kernel); the nests are alike: level by level the same kind
 * of loop over the same grid dim with the same bounds, the same bindings and guards (B's
 * variables renamed to A's), and at the innermost level every guard of A is one of B's (so
 * that A's skipped iterations are B's too); and every tensor that one writes and the other
 * touches is accessed everywhere at A's left-side variables, which both statements write
 * once each (no summed variable), so that iteration v of B reads or overwrites only what
 * iteration v of A wrote or read.  A statement fused into a group is compared with the
 * group's nest, so chains fuse; B's innermost assignments follow A's. */
static const char *body_ok_in(const sp_node *n, bool sum) {
  if (!n) return NULL;
  switch (n->kind) {
  case SN_SEQ: case SN_GUARD: case SN_IF: case SN_BIND: break;
  case SN_ASSIGN:
    if ((n->to_acc && !sum) || n->to_entries || n->atomic) return "its loops sum into a register, a sparse result or atomically";
    break;
  case SN_LOOP:
    if (n->loop == SL_SPARSE) return "its loops walk the stored entries of a sparse operand";
    if (n->loop == SL_THREAD) return "its loops are device threads";
    if (n->par != PAR_NONE) return "its loops run in threads";
    break;
  case SN_COMM: return "it communicates inside its loops (a reduction or a transfer per iteration)";
  case SN_KERNEL: return "a leaf kernel runs its loops";
  case SN_DEVICE: return "its loops are a device kernel";
  default: return "its loops hold more than assignments";
  }
  for (int q = 0; q < n->nkids; q++) {
    const char *w = body_ok_in(n->kids[q], sum);
    if (w) return w;
  }
  return NULL;
}
static const char *body_ok(const sp_node *n) { return body_ok_in(n, false); }

/* The statement's loop nest when it is fusable (else NULL and why). */
static sp_node *fusable(const sp_program *sp, const sp_func *fn, const char **why) {
  const sp_node *b = fn->body;
  if (sp->cuda) return *why = "the CUDA target runs each statement as its own kernel", NULL;
  if (!b || b->kind != SN_SEQ || !b->nkids) return *why = "it does nothing", NULL;
  if (!fn->distinct_writes) return *why = "it sums, repeats an index on its left, or precomputes", NULL;
  int nloops = 0, last = -1;
  for (int q = 0; q < b->nkids; q++)
    if (b->kids[q]->kind == SN_LOOP) nloops++, last = q;
  if (!nloops) return *why = "it has no loop (a statement over scalars)", NULL;
  if (nloops > 1) return *why = "it has more than one loop nest", NULL;
  if (last + 1 < b->nkids) {
    const sp_node *k = b->kids[last + 1];
    static char w[120];
    if (k->kind == SN_COMM) snprintf(w, sizeof w, "it communicates after its loops (%s)", sp_comm_name(k->op));
    else snprintf(w, sizeof w, "it does more after its loops");
    return *why = w, NULL;
  }
  for (int q = 0; q < last; q++) {
    const sp_node *k = b->kids[q];
    if (k->kind == SN_INIT && k->init == SI_DECLARE) continue;
    if (k->kind == SN_COMM && k->op == SC_VIEW) continue;
    if (k->kind == SN_INIT)
      return *why = k->init == SI_SNAPSHOT ? "it reads a snapshot of its output" : "its output starts zeroed (a sum, or a block not covered by its loops)", NULL;
    if (k->kind == SN_COMM) return *why = "it communicates before its loops", NULL;
    return *why = "it does more than run its loops", NULL;
  }
  sp_node *loop = b->kids[last];
  if (loop->loop == SL_SPARSE || loop->loop == SL_THREAD) return *why = "its outer loop walks sparse entries or threads", NULL;
  if (loop->par != PAR_NONE) return *why = "its outer loop runs in threads", NULL;
  for (int q = 0; q < loop->nkids; q++)
    if ((*why = body_ok(loop->kids[q]))) return NULL;
  return loop;
}

/* B's variables and buffers renamed to A's */
typedef struct {
  int n;
  int from[64], to[64];
  /* buffers: buf_from[k] becomes buf_to[k], k < nbuf (merge_prologue) */
  int nbuf;
  const int *buf_from, *buf_to;
} renaming;
static int rn_var(const renaming *r, int v) {
  for (int k = 0; k < r->n; k++)
    if (r->from[k] == v) return r->to[k];
  return v;
}
static bool rn_add(renaming *r, int from, int to) {
  if (from < 0 || to < 0 || from == to) return true;
  if (r->n == 64) return false;
  r->from[r->n] = from, r->to[r->n++] = to;
  return true;
}
static const sym *rn_sym(const sp_program *sp, const renaming *r, const sym *e) {
  for (int k = 0; e && k < r->n; k++) e = sym_subst(&sp->facts, e, SYM_VAR, r->from[k], sym_var(r->to[k]));
  return e;
}
static bool sym_same(const sym *a, const sym *b) { return (!a && !b) || (a && b && sym_equal(a, b)); }
static const sp_expr *rn_expr(const renaming *r, const sp_expr *e) {
  if (!e) return NULL;
  sp_expr *x = ir_alloc(sizeof *x);
  *x = *e;
  for (int k = 0; e->kind == SE_ACCESS && k < r->nbuf; k++)
    if (r->buf_from[k] == e->buf) x->buf = r->buf_to[k];
  if (e->nidx) {
    int *v = ir_alloc(e->nidx * sizeof *v);
    for (int k = 0; k < e->nidx; k++) v[k] = rn_var(r, e->vars[k]);
    x->vars = v;
  }
  if (e->nguards) {
    int *g = ir_alloc(e->nguards * sizeof *g);
    for (int k = 0; k < e->nguards; k++) g[k] = rn_var(r, e->guards[k]);
    x->guards = g;
  }
  x->a = rn_expr(r, e->a), x->b = rn_expr(r, e->b);
  return x;
}
static sp_node *rn_node(const sp_program *sp, const renaming *r, const sp_node *n) {
  sp_node *x = sp_new(n->kind);
  *x = *n;
  x->kids = NULL, x->nkids = 0;
  for (int q = 0; q < n->nkids; q++) sp_add(x, n->kids[q] ? rn_node(sp, r, n->kids[q]) : NULL);
  x->lo = rn_sym(sp, r, n->lo), x->hi = rn_sym(sp, r, n->hi), x->value = rn_sym(sp, r, n->value);
  x->bind = rn_sym(sp, r, n->bind);
  if (n->kind == SN_BIND || n->kind == SN_LOOP) x->var = rn_var(r, n->var), x->lvar = rn_var(r, n->lvar);
  if (n->nconds) {
    sp_cond *c = ir_alloc(n->nconds * sizeof *c);
    for (int k = 0; k < n->nconds; k++) c[k] = n->conds[k], c[k].a = rn_sym(sp, r, n->conds[k].a), c[k].b = rn_sym(sp, r, n->conds[k].b);
    x->conds = c;
  }
  if (n->kind == SN_ASSIGN) x->lhs = rn_expr(r, n->lhs), x->rhs = rn_expr(r, n->rhs);
  return x;
}

static bool same_conds(const sp_program *sp, const renaming *r, const sp_node *a, const sp_node *b) {
  if (a->nconds != b->nconds) return false;
  for (int k = 0; k < a->nconds; k++)
    if (a->conds[k].op != b->conds[k].op || !sym_same(a->conds[k].a, rn_sym(sp, r, b->conds[k].a)) ||
        !sym_same(a->conds[k].b, rn_sym(sp, r, b->conds[k].b)))
      return false;
  return true;
}

/* The node whose kids are a loop's body (sequences of one node are looked through) */
static sp_node *level(sp_node *n) {
  while (n->nkids == 1 && n->kids[0] && n->kids[0]->kind == SN_SEQ) n = n->kids[0];
  return n;
}
/* The single inner loop among a level's kids (NULL: the innermost level) */
static sp_node *inner_loop(const sp_node *l) {
  for (int q = 0; q < l->nkids; q++)
    if (l->kids[q]->kind == SN_LOOP) return l->kids[q];
  return NULL;
}

/* Do loops a and b run alike (kind, grid dim, threads, bounds, with b's variables renamed to
 * a's)?  NULL: yes, and r renames b's loop variables to a's; else why not. */
static const char *same_loop(const sp_program *sp, renaming *r, const sp_node *a, const sp_node *b) {
  if (a->loop != b->loop || a->dim != b->dim || a->par != b->par) return "their loops are of different kinds or distributed differently";
  rn_add(r, b->var, a->var);
  if (a->loop == SL_COLL_BLOCK) rn_add(r, b->lvar, a->lvar);
  if (!sym_same(a->lo, rn_sym(sp, r, b->lo)) || !sym_same(a->hi, rn_sym(sp, r, b->hi)) || !sym_same(a->value, rn_sym(sp, r, b->value)))
    return "their loops run over different ranges";
  return NULL;
}

/* Match the nests level by level, renaming B's variables to A's; *ia, *ib: the innermost loops. */
static const char *match_nests(const sp_program *sp, renaming *r, sp_node *a, sp_node *b, sp_node **ia, sp_node **ib) {
  for (;;) {
    const char *why = same_loop(sp, r, a, b);
    if (why) return why;
    a = level(a), b = level(b);
    sp_node *na = inner_loop(a), *nb = inner_loop(b);
    if (!na != !nb) return "their loop nests differ in depth";
    if (!na) {
      *ia = a, *ib = b;
      /* B's bindings that A has: one variable; every guard of A must be one of B's */
      for (int q = 0; q < b->nkids; q++) {
        const sp_node *kb = b->kids[q];
        if (kb->kind != SN_BIND) continue;
        bool found = false;
        for (int j = 0; j < a->nkids && !found; j++)
          if (a->kids[j]->kind == SN_BIND && sym_same(a->kids[j]->bind, rn_sym(sp, r, kb->bind))) found = true, rn_add(r, kb->var, a->kids[j]->var);
        if (!found) return "an index variable of the second is bound otherwise than the first's";
      }
      for (int j = 0; j < a->nkids; j++) {
        const sp_node *ka = a->kids[j];
        if (ka->kind != SN_GUARD) continue;
        bool found = false;
        for (int q = 0; q < b->nkids && !found; q++) found = b->kids[q]->kind == SN_GUARD && same_conds(sp, r, ka, b->kids[q]);
        if (!found) return "the first skips iterations that the second runs";
      }
      return NULL;
    }
    /* the kids before the inner loop: bindings and guards, alike */
    int ka = 0, kb = 0;
    for (; a->kids[ka] != na; ka++) {
      if (b->kids[kb] == nb) return "their loops bind or guard differently";
      const sp_node *x = a->kids[ka], *y = b->kids[kb++];
      if (x->kind != y->kind || (x->kind != SN_BIND && x->kind != SN_GUARD)) return "their loops bind or guard differently";
      if (x->kind == SN_BIND) {
        if (!sym_same(x->bind, rn_sym(sp, r, y->bind))) return "their loops bind different values";
        rn_add(r, y->var, x->var);
      } else if (!same_conds(sp, r, x, y)) {
        return "their loops are guarded differently";
      }
    }
    if (b->kids[kb] != nb) return "their loops bind or guard differently";
    a = na, b = nb;
  }
}

/* every access (the left sides included) of a nest */
typedef struct {
  const sp_expr **e;
  bool *write;
  int n, cap;
} acc_list;
static void acc_add(acc_list *l, const sp_expr *e, bool w) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 16;
    const sp_expr **ne = ir_alloc(cap * sizeof *ne);
    bool *nw = ir_alloc(cap * sizeof *nw);
    if (l->n) memcpy(ne, l->e, l->n * sizeof *ne), memcpy(nw, l->write, l->n * sizeof *nw);
    l->e = ne, l->write = nw, l->cap = cap;
  }
  l->e[l->n] = e, l->write[l->n++] = w;
}
static void acc_expr(acc_list *l, const sp_expr *e) {
  if (!e) return;
  if (e->kind == SE_ACCESS && e->tensor >= 0) acc_add(l, e, false);
  acc_expr(l, e->a);
  acc_expr(l, e->b);
}
static void acc_collect(acc_list *l, const sp_node *n) {
  if (!n) return;
  if (n->kind == SN_ASSIGN) {
    acc_add(l, n->lhs, true);
    acc_expr(l, n->rhs);
  }
  for (int q = 0; q < n->nkids; q++) acc_collect(l, n->kids[q]);
}
static const sp_expr *first_lhs(const sp_node *n) {
  if (!n) return NULL;
  if (n->kind == SN_ASSIGN) return n->lhs;
  for (int q = 0; q < n->nkids; q++) {
    const sp_expr *e = first_lhs(n->kids[q]);
    if (e) return e;
  }
  return NULL;
}

/* b: B's nest already renamed */
static const char *dependences_ok(const sp_program *sp, const sp_node *la, const sp_node *b) {
  acc_list x = {0};
  acc_collect(&x, la);
  int na = x.n;
  acc_collect(&x, b);
  const sp_expr *L = first_lhs(la);
  for (int i = 0; i < x.n; i++) {
    if (!x.write[i]) continue;
    int t = x.e[i]->tensor;
    bool in_a = false, in_b = false;
    for (int j = 0; j < x.n; j++)
      if (x.e[j]->tensor == t) *(j < na ? &in_a : &in_b) = true;
    if (!in_a || !in_b) continue;
    for (int j = 0; j < x.n; j++)
      if (x.e[j]->tensor == t && !(L && same_vars(x.e[j], L))) {
        static char w[200];
        snprintf(w, sizeof w, "'%s' is written by one and read or written by the other at another element", sp->tensors[t].name);
        return w;
      }
  }
  return NULL;
}

/* Can B's nest join A's (A may already hold a group)?  NULL: yes; then *r renames B to A. */
static const char *fuse_can(const sp_program *sp, const sp_func *A, const sp_func *B, renaming *r, sp_node **ia, sp_node **ib) {
  const char *why;
  static char w[300];
  sp_node *la, *lb;
  if (!(la = fusable(sp, A, &why))) return snprintf(w, sizeof w, "statement %d: %s", A->index + 1, why), w;
  if (!(lb = fusable(sp, B, &why))) return snprintf(w, sizeof w, "statement %d: %s", B->index + 1, why), w;
  if ((why = match_nests(sp, r, la, lb, ia, ib))) return why;
  return dependences_ok(sp, la, rn_node(sp, r, lb));
}

/* The prologue of `into` (its kids before its loop nest) followed by that of `from`, except the
 * declarations and views of buffers whose C name `into` already has (the same tensor's own
 * block, read or written, or the same in-place snapshot): those buffers of `from` become
 * `into`'s (r's buffer pairs: from's id, into's id).  Other setup nodes (zeroing a sum's
 * result) always join.  The array has room for the loop nest after them; *np counts them. */
static sp_node **merge_prologue(const sp_program *sp, const sp_node *into, const sp_node *from, renaming *r, int *np) {
  int *bf = ir_alloc((size_t)(from->nkids + 1) * sizeof *bf), *bt = ir_alloc((size_t)(from->nkids + 1) * sizeof *bt), nb = 0;
  int ni = into->nkids - 1;
  sp_node **pro = ir_alloc((ni + from->nkids + 1) * sizeof *pro);
  if (ni > 0) memcpy(pro, into->kids, ni * sizeof *pro);
  int n = ni;
  for (int q = 0; q + 1 < from->nkids; q++) {
    sp_node *k = from->kids[q];
    bool buffer = k->kind == SN_COMM || (k->kind == SN_INIT && k->init == SI_DECLARE);
    int same = -1;
    for (int j = 0; j < ni && same < 0 && buffer; j++) {
      const sp_node *ki = into->kids[j];
      if (ki->kind != k->kind || (k->kind == SN_INIT && ki->init != SI_DECLARE)) continue;
      const sp_buf *a = &sp->bufs[ki->buf], *b = &sp->bufs[k->buf];
      if (a->tensor == b->tensor && a->snapshot == b->snapshot) same = a->id;
    }
    if (same >= 0) bf[nb] = k->buf, bt[nb++] = same;
    else pro[n++] = k;
  }
  r->nbuf = nb, r->buf_from = bf, r->buf_to = bt, *np = n;
  return pro;
}

static void fuse_apply(sp_program *sp, sp_func *A, sp_func *B, renaming *r, sp_node *ia, sp_node *ib) {
  int np;
  sp_node *body = A->body;
  int nA = body->nkids - 1;
  sp_node **pro = merge_prologue(sp, body, B->body, r, &np);
  /* B's innermost level after A's: its bindings are A's (match_nests), its other nodes follow */
  for (int q = 0; q < ib->nkids; q++) {
    const sp_node *k = ib->kids[q];
    if (k->kind == SN_BIND) continue;
    bool dup = false; /* a guard A has already skipped on */
    for (int j = 0; j < ia->nkids && k->kind == SN_GUARD && !dup; j++) dup = ia->kids[j]->kind == SN_GUARD && same_conds(sp, r, ia->kids[j], k);
    if (!dup) sp_add(ia, rn_node(sp, r, k));
  }
  pro[np++] = body->kids[nA];
  body->kids = pro, body->nkids = np;
  B->body = sp_new(SN_SEQ);
  B->fused_into = A->index;
}

/* A sum after a group: the sum's loop runs the group's iterations too (AXPY, then a dot product
 * of its result, in one pass):
 *   A: views; for v in R { a(v) }     B: zero s; views; for w in R { produce s; sum { for ... s += b(w) }; allreduce s; keep s }
 *     =>  B: zero s; views of A and B; for w in R { produce s; sum { for ... { a(w); s += b(w) } }; allreduce s; keep s }
 * Precondition: A is fusable (above); B is one such sum: its outer collective loop holds a
 * produce, one register sum over a nest, then its reduction, and nothing else; the outer loops
 * and the nests inside the register sum are alike (A's variables renamed to B's), with the same
 * guards; A does not touch B's result (B zeroes it first); every tensor A writes and B reads is
 * accessed at A's left-side variables. */
/* the loop a register sum runs (sequences of one node looked through) */
static sp_node *acc_loop(const sp_node *acc) {
  sp_node *l = acc->nkids ? acc->kids[0] : NULL;
  while (l && l->kind == SN_SEQ && l->nkids == 1) l = l->kids[0];
  return l && l->kind == SN_LOOP ? l : NULL;
}

static sp_node *sum_shape_n(const sp_program *sp, const sp_func *B, sp_node **acc, const char **why, bool many) {
  const sp_node *b = B->body;
  if (sp->cuda) return *why = "the CUDA target runs each statement as its own kernel", NULL;
  if (!b || b->kind != SN_SEQ || !b->nkids || b->kids[b->nkids - 1]->kind != SN_LOOP) return *why = "it is not one sum", NULL;
  for (int q = 0; q + 1 < b->nkids; q++) {
    const sp_node *k = b->kids[q];
    if (!((k->kind == SN_INIT && (k->init == SI_DECLARE || k->init == SI_ZERO)) || (k->kind == SN_COMM && k->op == SC_VIEW)))
      return *why = "it communicates or prepares more than a sum", NULL;
  }
  sp_node *loop = b->kids[b->nkids - 1], *lv = level(loop);
  if (loop->par != PAR_NONE || (loop->loop != SL_COORD && loop->loop != SL_COLL_BLOCK)) return *why = "it is not one sum over a block", NULL;
  int nacc = 0;
  for (int q = 0; q < lv->nkids; q++) {
    const sp_node *k = lv->kids[q];
    if (k->kind == SN_ACC) nacc++, *acc = lv->kids[q];
    else if (!(k->kind == SN_COMM && (k->op == SC_PRODUCE || k->op == SC_ALLREDUCE || k->op == SC_REDUCE || k->op == SC_BCAST_RESULT ||
                                      k->op == SC_KEEP_OWN)))
      return *why = "its loop does more than one register sum and its reduction", NULL;
  }
  if ((many ? nacc < 1 : nacc != 1) || !acc_loop(*acc)) return *why = "it is not one register sum", NULL;
  for (int q = 0; q < lv->nkids; q++)
    if (lv->kids[q]->kind == SN_ACC && (!acc_loop(lv->kids[q]) || (*why = body_ok_in(acc_loop(lv->kids[q]), true)))) {
      if (!*why) *why = "it is not one register sum";
      return NULL;
    }
  return loop;
}
static sp_node *sum_shape(const sp_program *sp, const sp_func *B, sp_node **acc, const char **why) {
  return sum_shape_n(sp, B, acc, why, false);
}

static bool guards_equal(const sp_program *sp, const renaming *r, const sp_node *a, const sp_node *b) {
  for (int pass = 0; pass < 2; pass++) {
    const sp_node *x = pass ? b : a, *y = pass ? a : b;
    for (int j = 0; j < x->nkids; j++) {
      if (x->kids[j]->kind != SN_GUARD) continue;
      bool found = false;
      for (int q = 0; q < y->nkids && !found; q++)
        found = y->kids[q]->kind == SN_GUARD && (pass ? same_conds(sp, r, y->kids[q], x->kids[j]) : same_conds(sp, r, x->kids[j], y->kids[q]));
      if (!found) return false;
    }
  }
  return true;
}

static const char *sum_fuse_can(const sp_program *sp, const sp_func *A, const sp_func *B, renaming *r, sp_node **ia, sp_node **ib) {
  const char *why;
  static char w[300];
  sp_node *la, *lb, *acc = NULL;
  if (!(la = fusable(sp, A, &why))) return snprintf(w, sizeof w, "statement %d: %s", A->index + 1, why), w;
  if (!(lb = sum_shape(sp, B, &acc, &why))) return snprintf(w, sizeof w, "statement %d: %s", B->index + 1, why), w;
  /* the outer loops, then the nest inside the register sum (A renamed to B) */
  if ((why = same_loop(sp, r, lb, la))) return why;
  sp_node *ai = inner_loop(level(la));
  if (!ai) return "the sum's loops are deeper than the first statement's";
  for (int q = 0; q < level(la)->nkids; q++)
    if (level(la)->kids[q] != ai) return "the first statement binds or guards outside its inner loop";
  if ((why = match_nests(sp, r, acc_loop(acc), ai, ib, ia))) return why;
  if (!guards_equal(sp, r, *ib, *ia)) return "they skip different iterations";
  /* A must not touch B's result; what A writes, B reads at A's element */
  acc_list x = {0};
  acc_collect(&x, rn_node(sp, r, la));
  int na = x.n;
  acc_collect(&x, acc);
  const sp_expr *L = first_lhs(rn_node(sp, r, la));
  int out = sp->bufs[B->bufs[0]].tensor;
  for (int q = 0; q < B->nbufs; q++)
    if (sp->bufs[B->bufs[q]].output) out = sp->bufs[B->bufs[q]].tensor;
  for (int i = 0; i < na; i++) {
    if (x.e[i]->tensor == out) return "the first statement uses the sum's result";
    if (!x.write[i]) continue;
    for (int j = na; j < x.n; j++)
      if (x.e[j]->tensor == x.e[i]->tensor && !(L && same_vars(x.e[j], L))) {
        snprintf(w, sizeof w, "'%s' is written by one and read by the other at another element", sp->tensors[x.e[i]->tensor].name);
        return w;
      }
  }
  return NULL;
}

static void sum_fuse_apply(sp_program *sp, sp_func *A, sp_func *B, renaming *r, sp_node *ia, sp_node *ib) {
  /* A's prologue joins B's, sharing the buffers B already declares */
  int np;
  sp_node *body = B->body;
  int nB = body->nkids - 1;
  sp_node **pro = merge_prologue(sp, body, A->body, r, &np);
  /* A's innermost nodes first (its bindings are B's) */
  sp_node **k = ir_alloc((ib->nkids + ia->nkids + 1) * sizeof *k);
  int nk = 0;
  for (int q = 0; q < ia->nkids; q++) {
    const sp_node *x = ia->kids[q];
    if (x->kind == SN_BIND || x->kind == SN_GUARD) continue; /* B has them (guards_equal) */
    k[nk++] = rn_node(sp, r, x);
  }
  /* B's bindings and guards before everything */
  sp_node **all = ir_alloc((ib->nkids + nk + 1) * sizeof *all);
  int na = 0;
  for (int q = 0; q < ib->nkids; q++)
    if (ib->kids[q]->kind == SN_BIND || ib->kids[q]->kind == SN_GUARD || ib->kids[q]->kind == SN_REGISTER) all[na++] = ib->kids[q];
  for (int q = 0; q < nk; q++) all[na++] = k[q];
  for (int q = 0; q < ib->nkids; q++)
    if (!(ib->kids[q]->kind == SN_BIND || ib->kids[q]->kind == SN_GUARD || ib->kids[q]->kind == SN_REGISTER)) all[na++] = ib->kids[q];
  ib->kids = all, ib->nkids = na;
  pro[np++] = body->kids[nB];
  body->kids = pro, body->nkids = np;
  A->body = sp_new(SN_SEQ);
  for (int j = 0; j < sp->nfuncs; j++)
    if (sp->funcs[j].fused_into == A->index) sp->funcs[j].fused_into = B->index;
  A->fused_into = B->index;
}

/* Two sums ready together: one allreduce (and one collective loop) for both:
 *   A: ...; for w { produce a; sum {..}; allreduce a; keep a }   B: ...; for w { produce b; sum {..}; allreduce b; keep b }
 *     =>  A: ...; for w { produce a; produce b; sum {..}; sum {..}; allreduce a with b; keep a; keep b }
 * Precondition: both are sums (sum_shape) of scalars of the same type, reduced over the same
 * grid dims with an allreduce; their outer collective loops are alike; neither touches the
 * other's result (B zeroes its result before A's loop now, and A's total is final only after
 * the common allreduce).  B's loop still runs after A's, so what B reads of A's writes, and A
 * of B's, is as the program order says. */
static sp_node *find_op(sp_node *lv, sp_comm_op op) {
  for (int q = 0; q < lv->nkids; q++)
    if (lv->kids[q]->kind == SN_COMM && lv->kids[q]->op == op) return lv->kids[q];
  return NULL;
}
static int result_of(const sp_program *sp, const sp_func *F) {
  for (int q = 0; q < F->nbufs; q++)
    if (sp->bufs[F->bufs[q]].output) return sp->bufs[F->bufs[q]].tensor;
  return -1;
}
static bool touches(const sp_node *n, int t) {
  acc_list l = {0};
  acc_collect(&l, n);
  for (int k = 0; k < l.n; k++)
    if (l.e[k]->tensor == t) return true;
  return false;
}
static const char *sums_can(const sp_program *sp, const sp_func *A, const sp_func *B, renaming *r) {
  const char *why;
  sp_node *acc, *la, *lb;
  if (!(la = sum_shape_n(sp, A, &acc, &why, true)) || !(lb = sum_shape_n(sp, B, &acc, &why, true))) return "not two sums";
  int ta = result_of(sp, A), tb = result_of(sp, B);
  if (ta < 0 || tb < 0 || sp->tensors[ta].order || sp->tensors[tb].order) return "the sums' results are not both scalars";
  if (sp->tensors[ta].type != sp->tensors[tb].type) return "the sums' results have different types";
  sp_node *aa = find_op(level(la), SC_ALLREDUCE), *ab = find_op(level(lb), SC_ALLREDUCE);
  if (!aa || !ab || aa->mask != ab->mask) return "the sums are not allreduced over the same grid dims";
  if ((why = same_loop(sp, r, la, lb))) return why;
  if (touches(la, tb) || touches(lb, ta)) return "one sum reads the other's result";
  return NULL;
}

static void sums_apply(sp_program *sp, sp_func *A, sp_func *B, renaming *r) {
  int np;
  sp_node *body = A->body;
  int nA = body->nkids - 1;
  sp_node **pro = merge_prologue(sp, body, B->body, r, &np);
  sp_node *la = level(body->kids[nA]), *lb = level(B->body->kids[B->body->nkids - 1]);
  /* produce a, produce b, sums of a, sums of b, allreduce a with b, keep a, keep b */
  sp_node **k = ir_alloc((la->nkids + lb->nkids + 1) * sizeof *k);
  int nk = 0;
  sp_node *ared = find_op(la, SC_ALLREDUCE);
  for (int phase = 0; phase < 3; phase++) {
    for (int side = 0; side < 2; side++) {
      sp_node *lv = side ? lb : la;
      for (int q = 0; q < lv->nkids; q++) {
        sp_node *x = lv->kids[q];
        int ph = x->kind == SN_COMM && x->op == SC_PRODUCE ? 0 : x->kind == SN_COMM && (x->op == SC_ALLREDUCE || x->op == SC_KEEP_OWN) ? 2 : 1;
        if (ph != phase) continue;
        if (side && x->kind == SN_COMM && x->op == SC_ALLREDUCE) { /* joins A's */
          int *m = ir_alloc((ared->nmerged + x->nmerged + 2) * sizeof *m);
          if (ared->nmerged) memcpy(m, ared->merged, ared->nmerged * sizeof *m);
          m[ared->nmerged] = x->buf;
          if (x->nmerged) memcpy(m + ared->nmerged + 1, x->merged, x->nmerged * sizeof *m);
          ared->merged = m, ared->nmerged += 1 + x->nmerged;
          continue;
        }
        k[nk++] = side ? rn_node(sp, r, x) : x;
      }
    }
  }
  la->kids = k, la->nkids = nk;
  pro[np++] = body->kids[nA];
  body->kids = pro, body->nkids = np;
  B->body = sp_new(SN_SEQ);
  for (int j = 0; j < sp->nfuncs; j++)
    if (sp->funcs[j].fused_into == B->index) sp->funcs[j].fused_into = A->index;
  B->fused_into = A->index;
}



static bool cond_reads(const sp_item *list, int n, int t);
static bool group_writes(const sp_program *sp, int f, int t);

/* ---- a redistribution followed by its inverse (Keller and Chakravarty's split . join = id) --
 * A statement that copies a tensor into another layout, S1: u(v1..vk) = v(v1..vk), makes u
 * equal to v until one of them is written again.  Until then:
 *   (inverse)  S2: v(v1..vk) = u(v1..vk)  copies back what v holds: S2 is removed;
 *   (source)   a later statement that reads u in a box that is the rank's own block of v reads
 *              v's block instead (a view, no communication);
 * and S1, when no statement reads u any more (u a temporary that no loop condition reads), is
 * removed too.
 * Precondition: S1 is `=` (not +=) of one access of v at the same variables in the same order
 * as its left side, u and v dense, of one type and the same extents, u != v; S2 (or the reader)
 * is a later call of the same list of the program (no loop boundary between) and neither u nor
 * v is written in between; a reader's buffer of u is read only (no snapshot, not
 * double-buffered), communicated by one view, broadcast or fetch, its box (with the collective
 * loops of one iteration per rank written as grid coordinates) equal to the rank's block of v,
 * v held by every rank (no fixed grid coordinate), and the reader has no other buffer of v. */
static bool pure_copy(const sp_program *sp, const sp_func *F, int *u, int *v) {
  const sp_expr *l = F->ref_lhs, *r = F->ref_rhs;
  if (F->accumulate || F->fused_into >= 0 || F->removed || !l || !r || r->kind != SE_ACCESS || r->nguards || l->nguards) return false;
  if (r->buf < -1 || r->tensor < 0 || l->tensor < 0 || l->tensor == r->tensor || l->nidx != r->nidx) return false;
  const sp_tensor *U = &sp->tensors[l->tensor], *V = &sp->tensors[r->tensor];
  if (U->sparse || V->sparse || U->type != V->type || U->order != V->order) return false;
  for (int d = 0; d < U->order; d++)
    if (l->vars[d] != r->vars[d] || !sym_equal(U->ext[d], V->ext[d])) return false;
  *u = l->tensor, *v = r->tensor;
  return true;
}
/* the single communication node of buffer b in n (NULL: none or several) */
static sp_node *only_comm(sp_node *n, int b, int *count) {
  if (!n) return NULL;
  sp_node *found = NULL;
  if (n->kind == SN_COMM && n->buf == b) found = n, ++*count;
  for (int q = 0; q < n->nkids; q++) {
    sp_node *x = only_comm(n->kids[q], b, count);
    if (x) found = x;
  }
  return *count == 1 ? found : NULL;
}
/* The communication at the top of a statement: before every loop but the collective loops of
 * one iteration per rank (var = coord[dim]); each node's box with those loops' variables
 * written as grid coordinates.  Used by the rewrites redistribute and fetch. */
typedef struct {
  sp_node *n;
  const sym *lo[LW_MAX_DIMS], *hi[LW_MAX_DIMS];
} topcomm;
typedef struct {
  int n, cap;
  topcomm *f;
} topcomms;
static void tops_in(const sp_program *sp, sp_node *seq, int nsub, const int *vars, const int *dims, topcomms *out) {
  for (int q = 0; q < seq->nkids; q++) {
    sp_node *x = seq->kids[q];
    if (x->kind == SN_LOOP && x->loop == SL_COORD && x->nkids == 1 && x->kids[0]->kind == SN_SEQ && nsub < LW_MAX_DIMS) {
      int v2[LW_MAX_DIMS], d2[LW_MAX_DIMS];
      for (int k = 0; k < nsub; k++) v2[k] = vars[k], d2[k] = dims[k];
      v2[nsub] = x->var, d2[nsub] = x->dim;
      tops_in(sp, x->kids[0], nsub + 1, v2, d2, out);
      return;
    }
    if (x->kind == SN_LOOP || x->kind == SN_GUARD || x->kind == SN_IF) return; /* the rest runs per iteration, or not everywhere */
    if (x->kind != SN_COMM) continue;
    if (out->n == out->cap) {
      int cap = out->cap ? 2 * out->cap : 16;
      topcomm *f = ir_alloc(cap * sizeof *f);
      if (out->n) memcpy(f, out->f, out->n * sizeof *f);
      out->f = f, out->cap = cap;
    }
    topcomm *t = &out->f[out->n++];
    t->n = x;
    const sp_buf *b = &sp->bufs[x->buf];
    for (int d = 0; d < b->order; d++) {
      t->lo[d] = b->lo[d], t->hi[d] = b->hi[d];
      for (int k = 0; k < nsub; k++) {
        t->lo[d] = sym_subst(&sp->facts, t->lo[d], SYM_VAR, vars[k], sym_coord(dims[k]));
        t->hi[d] = sym_subst(&sp->facts, t->hi[d], SYM_VAR, vars[k], sym_coord(dims[k]));
      }
    }
  }
}
static topcomms tops(const sp_program *sp, const sp_func *F) {
  topcomms out = {0};
  if (F->body && F->body->kind == SN_SEQ) tops_in(sp, F->body, 0, NULL, NULL, &out);
  return out;
}
static const sp_expr *retensor(const sp_expr *e, int buf, int t) {
  if (!e) return NULL;
  sp_expr *x = ir_alloc(sizeof *x);
  *x = *e;
  if (e->kind == SE_ACCESS && e->buf == buf) x->tensor = t;
  x->a = retensor(e->a, buf, t), x->b = retensor(e->b, buf, t);
  return x;
}
static void retensor_node(sp_node *n, int buf, int t) {
  if (!n) return;
  if (n->kind == SN_ASSIGN || n->kind == SN_ACC) n->rhs = retensor(n->rhs, buf, t), n->lhs = retensor(n->lhs, buf, t);
  for (int q = 0; q < n->nkids; q++) retensor_node(n->kids[q], buf, t);
}
/* can F read v's own block where it reads u?  NULL: yes, *node and *buf say where */
static const char *source_can(const sp_program *sp, const sp_func *F, int u, int v, sp_node **node, int *buf) {
  int bu = -1;
  for (int q = 0; q < F->nbufs; q++) {
    const sp_buf *b = &sp->bufs[F->bufs[q]];
    if (b->tensor == v) return "it also accesses the source";
    if (b->tensor == u) {
      if (b->output || b->snapshot || b->doubled) return "it writes the copy, or reads it double-buffered";
      if (bu >= 0) return "it reads the copy at more than one point";
      bu = F->bufs[q];
    }
  }
  if (bu < 0) return "it does not read the copy";
  int count = 0;
  sp_node *c = only_comm(F->body, bu, &count);
  if (!c || !(c->op == SC_VIEW || c->op == SC_BCAST || c->op == SC_FETCH)) return "the copy arrives by more than one operation";
  const sp_tensor *V = &sp->tensors[v];
  const lw_owner *o = V->owner;
  if (!o) return "the source has no layout";
  for (int d = 0; d < sp->ndims && !o->everywhere; d++)
    if (o->kind[d] == OWN_FIXED) return "the source is held only at a fixed grid coordinate";
  topcomms top = tops(sp, F);
  const topcomm *at = NULL;
  for (int q = 0; q < top.n && !at; q++)
    if (top.f[q].n == c) at = &top.f[q];
  if (!at) return "the copy is read inside the statement's loops";
  for (int d = 0; d < V->order; d++) {
    const sym *ol = o->everywhere ? sym_const(0) : o->lo[d], *oh = o->everywhere ? V->ext[d] : o->hi[d];
    if (!sym_equal(at->lo[d], ol) || !sym_equal(at->hi[d], oh)) return "the box it reads is not the rank's own block of the source";
  }
  *node = c, *buf = bu;
  return NULL;
}
static bool anyone_reads(const sp_program *sp, int t, int except) {
  for (int j = 0; j < sp->nfuncs; j++) {
    const sp_func *F = &sp->funcs[j];
    if (j == except || F->removed) continue;
    for (int q = 0; q < F->nbufs; q++)
      if (sp->bufs[F->bufs[q]].tensor == t && !sp->bufs[F->bufs[q]].output) return true;
  }
  return cond_reads(sp->items, sp->nitems, t);
}
static void remove_func(sp_func *F, const char *why) {
  F->removed = why;
  F->body = sp_new(SN_SEQ);
}
static void redistribute_items(sp_program *sp, sp_item *list, int n) {
  for (int k = 0; k < n; k++) {
    if (list[k].kind == SP_REPEAT) {
      redistribute_items(sp, list[k].items, list[k].nitems);
      continue;
    }
    sp_func *S1 = &sp->funcs[list[k].func];
    int u, v;
    if (!pure_copy(sp, S1, &u, &v)) continue;
    char w[160];
    bool any = false;
    for (int m = k + 1; m < n; m++) {
      if (list[m].kind == SP_REPEAT) break;
      sp_func *S2 = &sp->funcs[list[m].func];
      if (S2->removed) continue;
      int u2, v2;
      snprintf(w, sizeof w, "statement %d, the copy of %s into %s at statement %d", S2->index + 1, sp->tensors[v].name, sp->tensors[u].name,
               S1->index + 1);
      if (pure_copy(sp, S2, &u2, &v2) && u2 == v && v2 == u) { /* the inverse */
        remove_func(S2, "it copies back what the tensor already holds (the inverse of an earlier copy)");
        sp_logf(sp, "redistribute", NULL, "%s (the inverse: removed)", w);
        any = true;
        continue; /* v is not written after all */
      }
      bool reads_u = false;
      for (int q = 0; q < S2->nbufs; q++) reads_u |= sp->bufs[S2->bufs[q]].tensor == u && !sp->bufs[S2->bufs[q]].output;
      if (reads_u) {
        sp_node *c;
        int bu;
        const char *why = source_can(sp, S2, u, v, &c, &bu);
        if (!why) {
          sp->bufs[bu].tensor = v, sp->bufs[bu].boxfn = -1;
          c->op = SC_VIEW, c->reuses = 0, c->from_copy = 1 + u;
          c->comment = "the rank's own block of the source of the copy (the copy equals it)";
          retensor_node(S2->body, bu, v);
          any = true;
        }
        sp_logf(sp, "redistribute", why, "%s (read from the source)", w);
      }
      if (group_writes(sp, S2->index, u) || group_writes(sp, S2->index, v)) break;
    }
    if (any && sp->tensors[u].temp && !anyone_reads(sp, u, S1->index)) {
      remove_func(S1, "nothing reads the copy any more");
      sp_logf(sp, "redistribute", NULL, "statement %d, the copy of %s into %s (nothing reads it any more: removed)", S1->index + 1,
              sp->tensors[v].name, sp->tensors[u].name);
    }
  }
}

/* ---- fusion across a loop's back edge ------------------------------------------------------
 * The first statement (or fused group) B of a loop body runs, for the next iteration, inside
 * the loop nest of the last one, A (Diffuse fuses the AXPY of one iteration with the dot
 * product of the next):
 *   repeat { B; S...; A }   =>   B; repeat { S...; A+B' }          (B': the next iteration's B)
 * A+B' is A and B fused by one of the rules above (fuse, a sum after a group, two sums), built
 * from a copy of B, which keeps its own function for the run before the loop.
 * Precondition: B is not A; the loop's bound is not a literal below 1 (a param is at least 1);
 * the fused nest runs B once more after the last iteration, so that extra run must be invisible: every
 * statement of B writes a temporary that no statement outside the loop body accesses and that
 * no loop condition reads (the condition is evaluated after A+B'), and divides no integers
 * (that run must not trap: its divisor may be 0 after the last iteration); and A and B fuse. */
static bool uses_tensor(const sp_node *n, const void *arg);
static int head_of(const sp_program *sp, int f) { return sp->funcs[f].fused_into >= 0 ? sp->funcs[f].fused_into : f; }
static void funcs_in(const sp_item *list, int n, bool *in) {
  for (int k = 0; k < n; k++) {
    if (list[k].kind == SP_CALL) in[list[k].func] = true;
    else funcs_in(list[k].items, list[k].nitems, in);
  }
}
static bool cond_reads(const sp_item *list, int n, int t) {
  for (int k = 0; k < n; k++) {
    if (list[k].kind != SP_REPEAT) continue;
    for (int q = 0; q < list[k].nreads; q++)
      if (list[k].reads[q] == t) return true;
    if (cond_reads(list[k].items, list[k].nitems, t)) return true;
  }
  return false;
}
/* an integer division in e: it traps where the divisor is 0 */
static bool int_div(const sp_expr *e) {
  return e && (e->kind == SE_DIV || int_div(e->a) || int_div(e->b));
}
static const char *backedge_pre(const sp_program *sp, const sp_item *loop, int *peel, int *ha, int *hb) {
  const sp_item *body = loop->items;
  int n = loop->nitems;
  if (n < 2 || body[0].kind != SP_CALL || body[n - 1].kind != SP_CALL) return "the body does not begin and end with a statement";
  if (sp->funcs[body[0].func].removed || sp->funcs[body[n - 1].func].removed) return "its first or last statement was removed";
  *hb = head_of(sp, body[0].func), *ha = head_of(sp, body[n - 1].func);
  if (*ha == *hb) return "the body is one statement or one fused group";
  int64_t bound;
  if (sym_is_const(loop->bound, &bound) && bound < 1) return "the loop runs no iteration";
  int k = 0;
  while (k < n && body[k].kind == SP_CALL && head_of(sp, body[k].func) == *hb) k++;
  for (int j = k; j < n; j++)
    if (body[j].kind == SP_CALL && head_of(sp, body[j].func) == *hb) return "the first group is not at the start of the body";
  *peel = k;
  bool *in = ir_alloc((sp->nfuncs + 1) * sizeof *in);
  funcs_in(body, n, in);
  static char w[200];
  for (int f = 0; f < sp->nfuncs; f++) {
    if (head_of(sp, f) != *hb) continue;
    int t = sp->funcs[f].lhs_tensor;
    if (!sp->tensors[t].temp) {
      snprintf(w, sizeof w, "statement %d writes %s, which is not a temporary (the first statement runs once more after the last iteration)", f + 1, sp->tensors[t].name);
      return w;
    }
    fe_type ty = sp->tensors[t].type;
    if ((ty == FE_INT32 || ty == FE_INT64) && int_div(sp->funcs[f].ref_rhs)) {
      snprintf(w, sizeof w, "statement %d divides integers (its run after the last iteration could divide by zero)", f + 1);
      return w;
    }
    if (cond_reads(sp->items, sp->nitems, t)) {
      snprintf(w, sizeof w, "a loop condition reads %s, which statement %d writes", sp->tensors[t].name, f + 1);
      return w;
    }
    for (int j = 0; j < sp->nfuncs; j++)
      if (!in[j] && sp->funcs[j].fused_into < 0 && find(sp->funcs[j].body, uses_tensor, &t)) {
        snprintf(w, sizeof w, "statement %d, outside the loop, uses %s, which statement %d writes", j + 1, sp->tensors[t].name, f + 1);
        return w;
      }
  }
  return NULL;
}
static void backedge_fuse(sp_program *sp, sp_item *loop) {
  int peel = 0, ha = -1, hb = -1;
  char w[96];
  snprintf(w, sizeof w, "the back edge of loop %d", loop->number);
  const char *why = backedge_pre(sp, loop, &peel, &ha, &hb);
  if (why) {
    sp_logf(sp, "fuse", why, "%s", w);
    return;
  }
  snprintf(w, sizeof w, "the back edge of loop %d: statements %d and %d", loop->number, ha + 1, hb + 1);
  sp_func *A = &sp->funcs[ha], *B = &sp->funcs[hb];
  int *fa = ir_alloc((sp->nfuncs + 1) * sizeof *fa);
  for (int f = 0; f < sp->nfuncs; f++) fa[f] = sp->funcs[f].fused_into;
  sp_node *orig = B->body;
  renaming none = {0};
  B->body = rn_node(sp, &none, orig); /* the copy that joins A; B keeps its own */
  renaming r = {0}, r2 = {0}, r3 = {0};
  sp_node *ia, *ib, *acc0;
  const char *w0, *how;
  if (!(why = fuse_can(sp, A, B, &r, &ia, &ib))) {
    fuse_apply(sp, A, B, &r, ia, ib);
    how = "";
  } else if (sum_shape_n(sp, A, &acc0, &w0, true) && !sums_can(sp, A, B, &r3)) {
    sums_apply(sp, A, B, &r3);
    how = ", two sums, one allreduce";
  } else if (!(w0 = sum_fuse_can(sp, A, B, &r2, &ia, &ib))) {
    sum_fuse_apply(sp, A, B, &r2, ia, ib); /* the fused nest is B's copy: it becomes A's */
    A->body = B->body;
    how = ", the sum's loop runs the first's iterations";
  } else {
    if (sum_shape(sp, B, &acc0, &how)) why = w0; /* B is a sum: why the update did not join it */
    B->body = orig;
    sp_logf(sp, "fuse", why, "%s", w);
    return;
  }
  B->body = orig;
  for (int f = 0; f < sp->nfuncs; f++) sp->funcs[f].fused_into = fa[f]; /* the groups stay as they were */
  loop->peel = peel, loop->peel_into = ha;
  sp_logf(sp, "fuse", NULL, "%s (statement %d also runs once before the loop%s)", w, hb + 1, how);
}

/* The statements one fused loop nest runs at most: checking a statement against a group costs
 * the group's size, so that unbounded groups would cost the square of a long program's
 * statements (1600 statements: 12 s), for loop bodies no compiler keeps in registers. */
#define FUSE_MAX_GROUP 64
#define STR_(x) #x
#define XSTR(x) STR_(x)

static void fuse_items(sp_program *sp, sp_item *list, int n) {
  int head = -1, group = 0;
  for (int k = 0; k < n; k++) {
    sp_item *it = &list[k];
    if (it->kind == SP_REPEAT) {
      fuse_items(sp, it->items, it->nitems);
      backedge_fuse(sp, it);
      head = -1;
      continue;
    }
    sp_func *B = &sp->funcs[it->func];
    if (B->removed) continue; /* it does nothing: its neighbours meet */
    if (head < 0) {
      head = it->func, group = 1;
      continue;
    }
    sp_func *A = &sp->funcs[head];
    char w[64];
    snprintf(w, sizeof w, "statements %d and %d", A->index + 1, B->index + 1);
    if (group >= FUSE_MAX_GROUP) {
      sp_logf(sp, "fuse", "the first's loop nest runs " XSTR(FUSE_MAX_GROUP) " statements already", "%s", w);
      head = it->func, group = 1;
      continue;
    }
    renaming r = {0};
    sp_node *ia, *ib;
    const char *why = fuse_can(sp, A, B, &r, &ia, &ib);
    if (why) {
      renaming r3 = {0};
      sp_node *acc0;
      const char *w0;
      if (sum_shape_n(sp, A, &acc0, &w0, true) && !sums_can(sp, A, B, &r3)) {
        sums_apply(sp, A, B, &r3);
        sp_logf(sp, "fuse", NULL, "%s (two sums, one allreduce)", w);
        group++;
        continue; /* A stays the head: more sums may join */
      }
      renaming r2 = {0};
      const char *why2 = sum_fuse_can(sp, A, B, &r2, &ia, &ib);
      if (!why2) { /* the group runs inside B's sum; B, which communicates after, ends it */
        sum_fuse_apply(sp, A, B, &r2, ia, ib);
        sp_logf(sp, "fuse", NULL, "%s (the sum's loop runs the first's iterations)", w);
        head = it->func, group++; /* more sums may join B's allreduce */
        continue;
      }
      sp_node *acc;
      const char *w3;
      sp_logf(sp, "fuse", sum_shape(sp, B, &acc, &w3) ? why2 : why, "%s", w);
      head = it->func, group = 1;
      continue;
    }
    fuse_apply(sp, A, B, &r, ia, ib);
    group++;
    sp_logf(sp, "fuse", NULL, "%s", w);
  }
}

/* ---- contraction -------------------------------------------------------------------------
 * A temporary used only inside one fused loop nest, where each iteration first stores its
 * element and then reads or updates only that element, is a register of the iteration:
 *   T(v) = e; ... T(v) ...        =>    register T; T = e; ... T ...   (T never stored)
 * Precondition: T is a dense temporary of order >= 1; no statement outside the group's nest
 * accesses it (nor any buffer of another statement); in the nest every access of T is at the
 * variables of its first access, and that first access (in the order the nest runs) is an
 * assignment that stores. */
typedef struct {
  int tensor;
  const sp_expr *first;  /* the first access */
  bool first_store, other_vars;
} cstate;
static void c_expr(cstate *c, const sp_expr *e) {
  if (!e) return;
  if (e->kind == SE_ACCESS && e->tensor == c->tensor) {
    if (!c->first) c->first = e, c->first_store = false;
    else if (!same_vars(e, c->first)) c->other_vars = true;
  }
  c_expr(c, e->a), c_expr(c, e->b);
}
static void c_node(cstate *c, const sp_node *n) {
  if (!n) return;
  if (n->kind == SN_ASSIGN) {
    c_expr(c, n->rhs); /* the right side is read before the left is written */
    if (n->lhs->tensor == c->tensor) {
      if (!c->first) c->first = n->lhs, c->first_store = n->store;
      else if (!same_vars(n->lhs, c->first)) c->other_vars = true;
    }
  }
  for (int q = 0; q < n->nkids; q++) c_node(c, n->kids[q]);
}
static const sp_expr *c_mark(int t, const sp_expr *e) {
  if (!e) return NULL;
  sp_expr *x = ir_alloc(sizeof *x);
  *x = *e;
  if (e->kind == SE_ACCESS && e->tensor == t) x->contracted = true;
  x->a = c_mark(t, e->a), x->b = c_mark(t, e->b);
  return x;
}
static void c_apply(int t, sp_node *n) {
  if (!n) return;
  if (n->kind == SN_ASSIGN) {
    n->rhs = c_mark(t, n->rhs);
    if (n->lhs->tensor == t) n->lhs = c_mark(t, n->lhs);
  }
  for (int q = 0; q < n->nkids; q++) c_apply(t, n->kids[q]);
}
static bool uses_tensor(const sp_node *n, const void *arg) {
  int t = *(const int *)arg;
  if (n->kind == SN_ASSIGN) {
    acc_list l = {0};
    acc_add(&l, n->lhs, true);
    acc_expr(&l, n->rhs);
    for (int k = 0; k < l.n; k++)
      if (l.e[k]->tensor == t) return true;
  }
  return (n->kind == SN_INIT && n->tensor == t && n->init != SI_DECLARE);
}

static void contract(sp_program *sp) {
  for (int i = 0; i < sp->nfuncs; i++) {
    sp_func *A = &sp->funcs[i];
    bool group = false;
    for (int j = 0; j < sp->nfuncs; j++) group |= sp->funcs[j].fused_into == i;
    if (!group || A->fused_into >= 0) continue;
    sp_node *nest = A->body->kids[A->body->nkids - 1], *in = level(nest), *nx;
    while ((nx = inner_loop(in))) in = level(nx);
    for (int t = 0; t < sp->ntensors; t++) {
      const sp_tensor *T = &sp->tensors[t];
      cstate c = {t, NULL, false, false};
      c_node(&c, nest);
      if (!c.first) continue; /* not used here */
      char w[96];
      snprintf(w, sizeof w, "statement %d, %s %s", A->index + 1, T->temp ? "temp" : "tensor", T->name);
      if (!T->temp) continue; /* only temporaries can disappear */
      const char *why = NULL;
      if (T->sparse || T->order == 0) why = "a sparse or scalar temporary";
      else if (c.other_vars) why = "it is accessed at more than one element per iteration";
      else if (!c.first_store) why = "an iteration reads it before storing it";
      for (int j = 0; j < sp->nfuncs && !why; j++) {
        const sp_func *F = &sp->funcs[j];
        if (j == i || F->fused_into >= 0) continue;
        if (find(F->body, uses_tensor, &t)) why = "another statement, outside this loop nest, uses it";
      }
      if (why) {
        sp_logf(sp, "contract", why, "%s", w);
        continue;
      }
      c_apply(t, nest);
      /* its buffers are not needed any more: their declarations and views go */
      sp_node *body = A->body;
      int nk = 0;
      for (int q = 0; q < body->nkids; q++) {
        sp_node *x = body->kids[q];
        bool of_t = x != nest && ((x->kind == SN_INIT && x->init == SI_DECLARE) || (x->kind == SN_COMM && x->op == SC_VIEW)) &&
                    x->buf >= 0 && sp->bufs[x->buf].tensor == t;
        if (!of_t) body->kids[nk++] = x;
      }
      body->nkids = nk;
      sp_node *r = sp_new(SN_REGISTER);
      r->tensor = t, r->type = T->type;
      sp_node **k = ir_alloc((in->nkids + 2) * sizeof *k);
      k[0] = r;
      if (in->nkids) memcpy(k + 1, in->kids, in->nkids * sizeof *k);
      in->kids = k, in->nkids++;
      sp_logf(sp, "contract", NULL, "%s", w);
    }
  }
}

/* ---- merged fetches (LANGUAGE.md section 9: "the same box of the same tensor is fetched once")
 * A later statement that fetches the same box of the same tensor, while nothing has written the
 * tensor since an earlier statement fetched it, finds the data in the earlier one's buffer:
 *   S1: bcast|fetch T box X into a (slot s) ... S2: bcast|fetch T box X into b
 *     =>  S2: b is slot s over box X, no communication
 * Precondition: both operations are whole broadcasts or point-to-point fetches of a dense tensor
 * at the top of their statement's body, before every loop but collective loops of one
 * iteration per rank (var = coord[dim]), neither double-buffered nor of a snapshot or output;
 * the boxes, with those loops' variables written as grid coordinates, are equal dim by dim as
 * symbolic expressions and use no other variable (a function of params and coordinates); the two statements are calls of the same list of the program (no
 * loop boundary between them, so S1's fetch ran in the same pass); neither S1's group nor any
 * statement between the two writes T (S2's group writes only after its top-level fetches); no
 * other buffer uses slot s (slots are per buffer, so S1's data stays there until S1 runs
 * again). */
static bool group_writes(const sp_program *sp, int f, int t) {
  for (int j = 0; j < sp->nfuncs; j++)
    if ((j == f || sp->funcs[j].fused_into == f) && sp->funcs[j].lhs_tensor == t) return true;
  return false;
}
static bool fetch_kind(const sp_program *sp, const sp_node *n) {
  if (n->kind != SN_COMM || (n->op != SC_BCAST && n->op != SC_FETCH)) return false;
  const sp_buf *b = &sp->bufs[n->buf];
  return !b->doubled && !b->snapshot && !b->output && !sp->tensors[b->tensor].sparse;
}
static bool same_box(const sp_program *sp, const topcomm *a, const topcomm *b) {
  const sp_buf *x = &sp->bufs[a->n->buf], *y = &sp->bufs[b->n->buf];
  if (x->tensor != y->tensor || x->order != y->order) return false;
  for (int d = 0; d < x->order; d++)
    if (!sym_equal(a->lo[d], b->lo[d]) || !sym_equal(a->hi[d], b->hi[d])) return false;
  for (int d = 0; d < x->order; d++) /* a box over the loops' variables is not the same box */
    for (int v = 0; v < sp->nvars; v++)
      if (sym_uses(a->lo[d], SYM_VAR, v) || sym_uses(a->hi[d], SYM_VAR, v)) return false;
  return true;
}
static void merge_fetches(sp_program *sp, sp_item *list, int nitems) {
  for (int k = 0; k < nitems; k++) {
    if (list[k].kind == SP_REPEAT) {
      merge_fetches(sp, list[k].items, list[k].nitems);
      continue;
    }
    sp_func *F2 = &sp->funcs[list[k].func];
    if (F2->fused_into >= 0) continue;
    topcomms t2 = tops(sp, F2);
    for (int q = 0; q < t2.n; q++) {
      sp_node *n2 = t2.f[q].n;
      if (!fetch_kind(sp, n2)) continue;
      sp_buf *b2 = &sp->bufs[n2->buf];
      char w[160];
      snprintf(w, sizeof w, "statement %d, %s %s", F2->index + 1, sp_comm_name(n2->op), sp->tensors[b2->tensor].name);
      const char *block = NULL, *why = NULL;
      bool found = false;
      for (int m = k - 1; m >= 0 && !found; m--) {
        if (list[m].kind == SP_REPEAT) {
          if (!block) block = "a loop runs between the two fetches";
          continue;
        }
        const sp_func *F1 = &sp->funcs[list[m].func];
        if (F1->fused_into >= 0) continue;
        if (!block && group_writes(sp, F1->index, b2->tensor)) block = "a statement between the two fetches writes the tensor";
        topcomms t1 = tops(sp, F1);
        const sp_node *n1 = NULL, *other = NULL;
        for (int r = 0; r < t1.n && !n1; r++) {
          if (!fetch_kind(sp, t1.f[r].n) || sp->bufs[t1.f[r].n->buf].tensor != b2->tensor) continue;
          if (same_box(sp, &t1.f[r], &t2.f[q])) n1 = t1.f[r].n;
          else other = t1.f[r].n;
        }
        if (!n1 && !other) continue;
        found = true;
        snprintf(w + strlen(w), sizeof w - strlen(w), " (statement %d fetched it)", F1->index + 1);
        if (block) {
          why = block;
        } else if (!n1) {
          why = "the earlier fetch is of another box, or of a box that depends on its loops";
        } else {
          b2->slot = sp->bufs[n1->buf].slot; /* n1 itself may reuse an earlier one: the same slot */
          b2->boxfn = -1;                      /* nobody evaluates its box for others */
          n2->reuses = 1 + (n1->reuses ? n1->reuses - 1 : n1->buf);
          n2->comment = "the box an earlier statement fetched: nothing wrote the tensor since";
        }
      }
      if (found) sp_logf(sp, "fetch", why, "%s", w);
    }
  }
}

/* ---- invariant fetches (the rewrite "invariant") -------------------------------------------
 * Inside a loop, a fetch of a tensor that no statement of the loop writes brings the same data at
 * every iteration: the loop's first iteration fetches it, the later ones read what it left in
 * its buffer (an iterative method's matrix held in another layout than its product needs moves
 * once per loop, not once per iteration):
 *   repeat { ... S: bcast|fetch T box X into b ... }
 *     =>  repeat { ... S: [first iteration] bcast|fetch T box X into b ... }
 * Precondition: the operation is a whole broadcast or point-to-point fetch (of a dense box, or
 * of the stored entries of a sparse one) at the top of its statement's body, before every loop
 * but collective loops of one iteration per rank, and it communicates (it reuses no earlier
 * statement's buffer, the rewrite "fetch"); its buffer is neither double-buffered nor a snapshot
 * or an output; its box, with those loops' variables written as grid coordinates, uses no other
 * variable (a function of params and coordinates, the same at every iteration); its statement
 * (or fused group) is a call of the loop's own list that runs once per iteration (not one that
 * fusion across the back edge runs before the loop or inside another statement); no statement
 * of the loop, in its nested loops too, writes T.  The buffer's slot is its own (or shared with
 * later fetches of the same box that reuse it), so the data stays there until the statement
 * runs again; every rank runs every iteration, so the members of a collective skip it together.
 * A loop entered again (nested in another) fetches at its first iteration again. */
static bool list_writes(const sp_program *sp, const sp_item *list, int n, int t) {
  for (int k = 0; k < n; k++) {
    if (list[k].kind == SP_REPEAT) {
      if (list_writes(sp, list[k].items, list[k].nitems, t)) return true;
      continue;
    }
    const sp_func *F = &sp->funcs[list[k].func];
    if (F->lhs_tensor == t || group_writes(sp, F->fused_into >= 0 ? F->fused_into : F->index, t)) return true;
  }
  return false;
}
static bool invariant_kind(const sp_program *sp, const sp_node *n) {
  if (fetch_kind(sp, n)) return true;
  if (n->kind != SN_COMM || (n->op != SC_SPARSE_FETCH && n->op != SC_SPARSE_BCAST)) return false;
  const sp_buf *b = &sp->bufs[n->buf];
  return !b->doubled && !b->snapshot && !b->output;
}
/* fn on each broadcast or fetch (invariant_kind) at the top of a statement (group) that a loop's
 * list calls once per iteration, the loop list[k] */
typedef void (*loop_fetch_fn)(sp_program *sp, sp_item *list, int k, const sp_func *F, topcomm *c);
static void each_loop_fetch(sp_program *sp, sp_item *list, int nitems, loop_fetch_fn fn) {
  for (int k = 0; k < nitems; k++) {
    sp_item *L = &list[k];
    if (L->kind != SP_REPEAT) continue;
    each_loop_fetch(sp, L->items, L->nitems, fn);
    for (int q = L->peel; q < L->nitems; q++) {
      if (L->items[q].kind != SP_CALL) continue;
      const sp_func *F = &sp->funcs[L->items[q].func];
      if (F->fused_into >= 0 || F->removed || (L->peel && F->index == L->peel_into)) continue;
      topcomms top = tops(sp, F);
      for (int r = 0; r < top.n; r++)
        if (invariant_kind(sp, top.f[r].n) && !top.f[r].n->reuses) fn(sp, list, k, F, &top.f[r]);
    }
  }
}
static void invariant_one(sp_program *sp, sp_item *list, int k, const sp_func *F, topcomm *c) {
  const sp_item *L = &list[k];
  sp_node *n = c->n;
  const sp_buf *b = &sp->bufs[n->buf];
  const char *why = NULL;
  for (int d = 0; d < b->order && !why; d++)
    for (int v = 0; v < sp->nvars && !why; v++)
      if (sym_uses(c->lo[d], SYM_VAR, v) || sym_uses(c->hi[d], SYM_VAR, v)) why = "its box depends on the statement's loops";
  if (!why && list_writes(sp, L->items, L->nitems, b->tensor)) why = "a statement of the loop writes the tensor";
  if (!why) n->once_loop = L->number;
  sp_logf(sp, "invariant", why, "loop %d, statement %d, %s %s", L->number, F->index + 1, sp_comm_name(n->op), sp->tensors[b->tensor].name);
}

/* ... and a loop's invariant fetch of the box a statement before the loop fetched, with no write
 * of the tensor between that statement and the loop, reads that statement's buffer (the rewrite
 * "fetch" across the loop's entry; no communication at all):
 *   S1: bcast|fetch T box X into a (slot s); ...; repeat { ... S2: [first iteration] bcast|fetch T box X into b ... }
 *     =>  repeat { ... S2: b is slot s over box X, no communication ... }
 * Precondition: S2's operation is invariant in its loop L (above: L writes no part of T); S1 is
 * a call of the list that holds L, before L, whose top operation (as for "fetch": a whole
 * broadcast or fetch, here also of the stored entries of a sparse tensor, neither
 * double-buffered nor of a snapshot or output) brings the same box, as symbolic expressions
 * of params and grid coordinates; S1's group does not write T, and neither does any statement
 * or loop between S1 and L.  S1's slot is its buffer's, so its data stays there until S1 runs
 * again, which is after L.  The fetches that reuse S2's buffer (later statements of L, the
 * rewrite "fetch") read S1's slot too. */
static void repoint_reuses(sp_node *n, int from, int to) {
  if (!n) return;
  if (n->kind == SN_COMM && n->reuses == from) n->reuses = to;
  for (int q = 0; q < n->nkids; q++) repoint_reuses(n->kids[q], from, to);
}
static void invariant_merge(sp_program *sp, sp_item *list, int k, const sp_func *F2, topcomm *c2) {
  sp_node *n2 = c2->n;
  sp_buf *b2 = &sp->bufs[n2->buf];
  if (n2->once_loop != list[k].number) return;
  for (int m = k - 1; m >= 0; m--) {
    if (list[m].kind == SP_REPEAT) {
      if (list_writes(sp, list[m].items, list[m].nitems, b2->tensor)) return; /* a loop between writes T */
      continue;
    }
    const sp_func *F1 = &sp->funcs[list[m].func];
    if (F1->fused_into >= 0 || F1->removed) continue;
    if (group_writes(sp, F1->index, b2->tensor)) return;
    topcomms t1 = tops(sp, F1);
    for (int u = 0; u < t1.n; u++) {
      const sp_node *n1 = t1.f[u].n;
      if (!invariant_kind(sp, n1) || sp->bufs[n1->buf].tensor != b2->tensor || !same_box(sp, &t1.f[u], c2)) continue;
      /* the later fetches of the loop that reuse S2's buffer (the rewrite "fetch") share its
       * slot, which S2 no longer fills: they read S1's too */
      const int from = b2->slot, to = sp->bufs[n1->buf].slot, src = 1 + (n1->reuses ? n1->reuses - 1 : n1->buf);
      for (int x = 0; x < sp->nbufs; x++)
        if (sp->bufs[x].slot == from) sp->bufs[x].slot = to;
      for (int f = 0; f < sp->nfuncs; f++) repoint_reuses(sp->funcs[f].body, 1 + n2->buf, src);
      b2->boxfn = -1;
      n2->reuses = src;
      n2->once_loop = 0;
      n2->comment = "the box a statement before the loop fetched: neither the loop nor a statement since writes the tensor";
      sp_logf(sp, "fetch", NULL, "loop %d, statement %d, %s %s (statement %d fetched it before the loop)", list[k].number, F2->index + 1,
              sp_comm_name(n2->op), sp->tensors[b2->tensor].name, F1->index + 1);
      return;
    }
  }
}

void spmd_fuse(sp_program *sp) {
  if (!sp->fuse) return;
  redistribute_items(sp, sp->items, sp->nitems);
  fuse_items(sp, sp->items, sp->nitems);
  contract(sp);
  merge_fetches(sp, sp->items, sp->nitems);
  each_loop_fetch(sp, sp->items, sp->nitems, invariant_one);
  each_loop_fetch(sp, sp->items, sp->nitems, invariant_merge);
}

/* ---- overlap -------------------------------------------------------------------------------
 * The rows of a sparse product that read only the rank's own block of the exchanged vector run
 * while the halo exchange travels, reading that block in place (its entries are not copied into
 * the exchange's buffer); the rows that read a ghost run after it, from the buffer:
 *   halo x; N        =>  halo x (posted; x reads the rank's own block); N[rows reading no ghost];
 *                        halo.end x (x reads the buffer) { N[rows reading a ghost] }
 * (halo.end runs its nest only where some row reads a ghost)
 * where N[R] is the nest with a test at the top of each row's iteration (the inspector marks
 * the rows, dtl_halo_rows); where the test heads the body of the loop over the rows and that
 * loop's variable moves the row's position one for one, a row that does not run moves the
 * loop on to the next that does (the rows of one phase are found a run at a time:
 * dtl_halo_skip; in a banded matrix the ghost rows are the block's first and last few).  Precondition: the exchange is the halo rewrite's, of level 1 of a
 * sparse matrix (order 2), and is followed in its sequence by exactly one nest N, the last node,
 * that holds only local computation (loops, bindings, guards, positions, register sums,
 * assignments); in N, the node X0 that binds the position of the matrix's access at level 0
 * (the row) comes before every assignment (each is after X0 in X0's sequence, or inside X0 when
 * it is the loop over the rows), so a skipped row does nothing; every assignment writes the
 * output at exactly the row's index variable (distinct rows write distinct elements) and no
 * expression reads the output (rows do not see each other's results); the output is dense.
 * Each row runs in exactly one of the two nests, whole and in its order: the results are those
 * of the single nest. */
static bool overlap_local(const sp_node *n) {
  if (!n) return true;
  switch (n->kind) {
  case SN_SEQ: case SN_LOOP: case SN_BIND: case SN_GUARD: case SN_SPPOS: case SN_ACC: case SN_ASSIGN: case SN_REGISTER: break;
  default: return false;
  }
  for (int q = 0; q < n->nkids; q++)
    if (!overlap_local(n->kids[q])) return false;
  return true;
}

/* the node binding the position of sparse access a at level 0: its parent and index */
static bool overlap_row(sp_node *n, int a, sp_node **parent, int *at) {
  for (int q = 0; n && q < n->nkids; q++) {
    sp_node *k = n->kids[q];
    if (!k) continue;
    if (k->sparse == a && k->level == 0 && ((k->kind == SN_SPPOS) || (k->kind == SN_LOOP && k->loop == SL_SPARSE))) {
      *parent = n, *at = q;
      return true;
    }
    if (overlap_row(k, a, parent, at)) return true;
  }
  return false;
}

static int overlap_writes(const sp_node *n) {
  if (!n) return 0;
  int w = n->kind == SN_ASSIGN || n->kind == SN_ACC;
  for (int q = 0; q < n->nkids; q++) w += overlap_writes(n->kids[q]);
  return w;
}

static bool overlap_reads_tensor(const sp_expr *e, int t) {
  return e && ((e->kind == SE_ACCESS && e->tensor == t && e->sparse < 0) || overlap_reads_tensor(e->a, t) ||
               overlap_reads_tensor(e->b, t));
}

/* the row variable of sparse access a (its index at level 0), from any expression reading it */
static int overlap_row_var(const sp_expr *e, int a) {
  if (!e) return -1;
  if (e->kind == SE_ACCESS && e->sparse == a && e->nidx == 2) return e->vars[0];
  int v = overlap_row_var(e->a, a);
  return v >= 0 ? v : overlap_row_var(e->b, a);
}

typedef struct {
  int a, out, row;
  const char *why;
} overlap_st;

static void overlap_check(overlap_st *o, const sp_node *n) {
  if (!n || o->why) return;
  if (n->kind == SN_ASSIGN || n->kind == SN_ACC) {
    if (o->row < 0) o->row = overlap_row_var(n->rhs, o->a);
    if (overlap_reads_tensor(n->rhs, o->out)) o->why = "the nest reads its output";
    else if (n->to_entries) o->why = "the output is sparse";
    else if (!n->to_acc && n->lhs && (n->lhs->nidx != 1 || n->lhs->tensor != o->out))
      o->why = "the output is not indexed by the row alone";
  }
  for (int q = 0; q < n->nkids; q++) overlap_check(o, n->kids[q]);
}

static void overlap_vars(overlap_st *o, const sp_node *n) {
  if (!n || o->why) return;
  if ((n->kind == SN_ASSIGN || n->kind == SN_ACC) && !n->to_acc && n->lhs && n->lhs->vars[0] != o->row)
    o->why = "the output is not indexed by the row's index variable";
  for (int q = 0; q < n->nkids; q++) overlap_vars(o, n->kids[q]);
}

static const char *overlap_can(const sp_program *sp, const sp_func *fn, const sp_node *seq, int at) {
  const sp_node *n = seq->kids[at];
  if (n->kind != SN_COMM || n->op != SC_HALO || n->halo_split) return not_here;
  if (sp->tensors[n->halo_tensor].order != 2 || n->halo_level != 1) return "the exchange is not at level 1 of a sparse matrix";
  if (at != seq->nkids - 2) return "the exchange is not followed by exactly one nest";
  sp_node *N = seq->kids[at + 1];
  if (!overlap_local(N)) return "the nest after the exchange does more than local computation";
  halo_st h = {.buf = n->buf};
  halo_node(&h, sp, N);
  if (h.why || !h.drv) return "the nest after the exchange does not read it";
  overlap_st o = {.a = h.drv->sparse, .out = fn->lhs_tensor, .row = -1};
  if (sp->tensors[o.out].sparse) return "the output is sparse";
  overlap_check(&o, N);
  if (!o.why && o.row < 0) o.why = "no assignment reads the matrix";
  overlap_vars(&o, N);
  if (o.why) return o.why;
  sp_node *P = NULL;
  int x0 = -1;
  if (!overlap_row((sp_node *)N, o.a, &P, &x0)) return "no node of the nest binds the row's position";
  int after = P->kids[x0]->kind == SN_LOOP ? overlap_writes(P->kids[x0]) : 0;
  if (P->kind == SN_IF) return "the row's position is bound in a branch";
  for (int q = x0 + 1; q < P->nkids; q++) after += overlap_writes(P->kids[q]);
  if (after != overlap_writes(N)) return "the nest writes before the row's position is bound";
  return NULL;
}

/* The loop whose body is P (P itself, or its one kid), NULL if none in n. */
static sp_node *overlap_loop(sp_node *n, const sp_node *P) {
  if (!n) return NULL;
  if (n == P && n->kind == SN_LOOP) return n;
  if (n->kind == SN_LOOP && n->nkids == 1 && n->kids[0] == P) return n;
  for (int q = 0; q < n->nkids; q++) {
    sp_node *L = overlap_loop(n->kids[q], P);
    if (L) return L;
  }
  return NULL;
}

/* Does loop L's variable move the position bound by the dense SN_SPPOS node P->kids[x0]
 * (level 0) one for one, P being L's body: the position's variable, written in L's variable
 * by the bindings in P before it (the last first: i = ii + c, ii = 7 a + b under split), is
 * L's variable plus a value that does not depend on it? */
static bool overlap_unit(const sp_node *L, const sp_node *P, int x0) {
  const sp_node *X = P->kids[x0];
  if (X->kind != SN_SPPOS || X->compressed || X->level != 0) return false;
  const sym *e = sym_var(X->var);
  for (int q = x0 - 1; q >= 0; q--) {
    const sp_node *b = P->kids[q];
    if (b && b->kind == SN_BIND && sym_uses(e, SYM_VAR, b->var)) e = sym_subst(NULL, e, SYM_VAR, b->var, b->bind);
  }
  return sym_uses(e, SYM_VAR, L->var) && !sym_uses(sym_sub(e, sym_var(L->var)), SYM_VAR, L->var);
}

/* a guard of phase `phase` at the top of the row of a copy of the nest */
static sp_node *overlap_phase(const sp_program *sp, const sp_node *N, const sp_node *halo, int a, int phase) {
  renaming none = {0};
  sp_node *c = phase ? (sp_node *)N : rn_node(sp, &none, N), *P = NULL;
  int x0 = -1;
  overlap_row(c, a, &P, &x0);
  sp_node *g = sp_new(SN_GUARD);
  g->halo_guard = 1 + halo->buf, g->halo_phase = phase, g->sparse = a, g->level = 0;
  g->comment = "overlap";
  if (P->kids[x0]->kind == SN_LOOP) {
    sp_node *L = P->kids[x0];
    sp_node **k = ir_alloc((L->nkids + 1) * sizeof *k);
    k[0] = g;
    if (L->nkids) memcpy(k + 1, L->kids, L->nkids * sizeof *k);
    L->kids = k, L->nkids++;
  } else {
    /* the loop over the rows may jump over a run of rows that do not run in this phase */
    const sp_node *L = overlap_loop(c, P);
    if (L && (L->loop == SL_LOCAL || L->loop == SL_LOCAL_BLOCK) && overlap_unit(L, P, x0))
      g->halo_skip = true, g->skip_var = L->var;
    sp_node **k = ir_alloc((P->nkids + 1) * sizeof *k);
    memcpy(k, P->kids, (x0 + 1) * sizeof *k);
    k[x0 + 1] = g;
    memcpy(k + x0 + 2, P->kids + x0 + 1, (P->nkids - x0 - 1) * sizeof *k);
    P->kids = k, P->nkids++;
  }
  return c;
}

static void overlap_apply(sp_program *sp, sp_func *fn, sp_node *seq, int at) {
  (void)fn;
  const sp_node *n = seq->kids[at];
  sp_node *N = seq->kids[at + 1];
  halo_st h = {.buf = n->buf};
  halo_node(&h, sp, N);
  sp_node *begin = sp_new(SN_COMM);
  *begin = *n;
  begin->halo_split = true;
  begin->comment = "posted; until halo.end the vector is read as the rank's own block";
  sp_node *end = sp_new(SN_COMM);
  *end = *n;
  end->op = SC_HALO_END, end->halo_split = true;
  end->comment = "the ghosts are in the buffer: the rows that read them";
  sp_node *own = overlap_phase(sp, N, n, h.drv->sparse, 0), *ghost = overlap_phase(sp, N, n, h.drv->sparse, 1);
  sp_add(end, ghost); /* run only where some row reads a ghost */
  sp_node *by[3] = {begin, own, end};
  /* replace the exchange and the nest */
  sp_node **k = ir_alloc((seq->nkids + 2) * sizeof *k);
  memcpy(k, seq->kids, at * sizeof *k);
  memcpy(k + at, by, sizeof by);
  seq->kids = k, seq->nkids = at + 3;
}
