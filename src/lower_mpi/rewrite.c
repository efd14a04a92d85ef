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
    snprintf(b, sizeof b, "statement %d, zero %s", fn->index + 1, sp->tensors[n->tensor].name);
  else
    snprintf(b, sizeof b, "statement %d, %s %s%s", fn->index + 1, sp_comm_name(n->op),
             sp->bufs[n->buf].snapshot ? "in." : "", sp->tensors[sp->bufs[n->buf].tensor].name);
  return b;
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

static const char *store_can(const sp_program *sp, const sp_func *fn, const sp_node *seq, int at) {
  const sp_node *n = seq->kids[at];
  if (n->kind != SN_INIT || n->init != SI_ZERO) return not_here;
  if (sp->tensors[n->tensor].sparse) return not_here;
  if (!fn->distinct_writes) return "the statement sums, repeats an index on its left, or precomputes";
  bool view = false;
  for (int q = 0; q < fn->body->nkids; q++) {
    const sp_node *k = fn->body->kids[q];
    view |= k->kind == SN_COMM && k->op == SC_VIEW && sp->bufs[k->buf].output && sp->bufs[k->buf].tensor == n->tensor;
  }
  if (!view) return "the output is not written in place in the rank's own block";
  if (find(fn->body, adds_or_skips, NULL)) return "a kernel, a register sum or a sparse co-iteration writes the output";
  return NULL;
}

static void set_store(sp_node *n) {
  if (!n) return;
  if (n->kind == SN_ASSIGN) n->store = true, n->atomic = false;
  for (int q = 0; q < n->nkids; q++) set_store(n->kids[q]);
}

static void store_apply(sp_program *sp, sp_func *fn, sp_node *seq, int at) {
  (void)sp;
  replace(seq, at, NULL, 0);
  set_store(fn->body);
}

const sp_rewrite sp_rewrites[] = {
    {"allreduce", allreduce_can, allreduce_apply, "reduce followed by a broadcast of the result becomes one allreduce"},
    {"pipeline", pipeline_can, pipeline_apply,
     "a broadcast or shift at the top of a sequential loop goes out one iteration ahead, double-buffered"},
    {"store", store_can, store_apply, "an '=' that writes each element of the rank's block once stores instead of zeroing and adding"},
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
