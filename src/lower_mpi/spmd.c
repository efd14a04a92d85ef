/* spmd.c -- building the SPMD IR of a lowered program, and printing it (--emit spmd).
 *
 * The builder walks each statement's loop chain once, outermost first, and decides what the
 * printers used to decide while they printed: loop kinds and bounds (collective loops with the
 * same trip count on every rank, local loops tightened for the inner variable of a split),
 * original index values recovered from the provenance graph (binds) and the guards that keep
 * them in range (activity conditions in the collective region, skipped iterations in local
 * loops), where each communication happens and with which operation, which local loop
 * iterates over the stored coordinates of a sparse operand, where a loop's sum goes to a
 * register, which loops become a device kernel's threads and whether its updates are atomic,
 * and the extents and operands of a leaf kernel.  Optimizations then rewrite the result
 * (rewrite.c). */
#include "lower_mpi/spmd.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- nodes ------------------------------------------------------------------------------- */
sp_node *sp_new(sn_kind k) {
  sp_node *n = ir_alloc(sizeof *n);
  n->kind = k;
  n->var = n->lvar = n->buf = n->depth_var = n->sparse = n->tensor = n->work = -1;
  n->shift_dim = -1;
  return n;
}

void sp_add(sp_node *parent, sp_node *kid) {
  sp_node **k = ir_alloc((parent->nkids + 1) * sizeof *k);
  if (parent->nkids) memcpy(k, parent->kids, parent->nkids * sizeof *k);
  k[parent->nkids++] = kid;
  parent->kids = k;
}

void sp_logf(sp_program *sp, const char *rewrite, const char *why, const char *fmt, ...) {
  if (sp->nlog == sp->caplog) {
    int cap = 2 * sp->caplog + 8;
    sp_log *l = ir_alloc(cap * sizeof *l);
    if (sp->nlog) memcpy(l, sp->log, sp->nlog * sizeof *l);
    sp->log = l, sp->caplog = cap;
  }
  char b[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  sp->log[sp->nlog++] = (sp_log){rewrite, ir_strdup(b), why ? ir_strdup(why) : NULL};
}

const char *sp_comm_name(sp_comm_op op) {
  static const char *n[] = {"view", "fetch", "bcast", "bcast.begin", "shift.begin", "wait", "produce", "reduce",
                            "bcast.result", "allreduce", "keep.own", "accumulate", "sparse.fetch", "sparse.bcast", "sparse.reset",
                            "sparse.accumulate", "sparse.merge", "halo", "halo.end"};
  return n[op];
}

static sp_cond *one_cond(sp_cmp op, const sym *a, const sym *b) {
  sp_cond *c = ir_alloc(sizeof *c);
  c->op = op, c->a = a, c->b = b;
  return c;
}

/* ---- the builder's walk ------------------------------------------------------------------ */
typedef struct {
  sp_program *sp;
  const lw_program *lp;
  const lw_stmt *ls;
  sp_func *fn;
  int *comm_buf;     /* per comm: its buffer id */
  bool *bound;       /* per statement variable (local ids) */
  int ncond, capcond;
  sp_cond *cond;     /* activity conditions of the collective region so far */
  int kdepth;        /* the substituted kernel's depth, -1: none or not on the device */
  bool in_kernel, atomic;
  bool *mapped;      /* device kernel: loops that are threads */
  bool acc_mode;
  /* a sum over the stored coordinates of a sparse factor whose other terms count once
   * (guarded by the loop's variable): those terms are added before the loop (hoist) and the
   * assignment inside it adds the rest (strip) */
  const ir_expr *hoist, *strip;
  /* sparse accesses of the right side */
  int nsp;
  const ir_expr **sp_e;
  bool *sp_factor;
  int *sp_known;
  bool (*sp_valid)[LW_MAX_DIMS];
  int nkern;
} bst;

static const sym *R(const bst *g, const sym *e) { return sym_shift_vars(e, g->fn->var0); }
/* what proofs about the statement's expressions may use: its loop ranges and the grid */
static const sym_facts *F(const bst *g) { return &g->ls->facts; }
static int V(const bst *g, int v) { return g->fn->var0 + v; }
static const fe_program *ast(const bst *g) { return g->lp->ir->ast; }

static void add_cond(bst *g, sp_cond c) {
  if (g->ncond == g->capcond) {
    int cap = 2 * g->capcond + 8;
    sp_cond *n = ir_alloc(cap * sizeof *n);
    if (g->ncond) memcpy(n, g->cond, g->ncond * sizeof *n);
    g->cond = n, g->capcond = cap;
  }
  g->cond[g->ncond++] = c;
}

/* Compute every replaced variable whose replacing variables are all bound now (see the
 * relations in ir.h).  Guards keep a recovered index inside its range, unless `tight` names
 * the parent whose range the loop bound already enforces. */
static void bind_parents(bst *g, sp_node *seq, bool collective, int tight) {
  const ir_stmt *s = g->ls->s;
  for (bool changed = true; changed;) {
    changed = false;
    for (int r = 0; r < s->nrels; r++) {
      const ir_rel *Rl = &s->rels[r];
      if (g->bound[Rl->in[0]] || Rl->kind == REL_PRECOMPUTE) continue;
      bool ready = g->bound[Rl->out[0]] && (Rl->out[1] < 0 || g->bound[Rl->out[1]]);
      for (int q = 0; q < Rl->nrot; q++) ready &= g->bound[Rl->rot[q]];
      if (!ready) continue;
      sp_node *b = sp_new(SN_BIND);
      b->var = V(g, Rl->in[0]);
      b->comment = Rl->kind == REL_FUSE ? "fuse" : Rl->kind == REL_ROTATE ? "rotate" : Rl->text;
      switch (Rl->kind) {
      case REL_DIVIDE:
      case REL_SPLIT: {
        b->bind = R(g, sym_add(lw_rel_base(s, Rl, sym_var(Rl->out[0])), sym_var(Rl->out[1])));
        break;
      }
      case REL_FUSE: {
        const sym *e = s->vars[Rl->in[1]].extent;
        b->bind = R(g, sym_floordiv(sym_var(Rl->out[0]), e));
        sp_add(seq, b);
        b = sp_new(SN_BIND);
        b->var = V(g, Rl->in[1]);
        b->comment = "fuse";
        b->bind = R(g, sym_mod(F(g), sym_var(Rl->out[0]), e));
        break;
      }
      case REL_ROTATE: {
        const sym *sum = sym_var(Rl->out[0]);
        for (int q = 0; q < Rl->nrot; q++) sum = sym_add(sum, sym_var(Rl->rot[q]));
        b->bind = R(g, sym_mod(F(g), sum, s->vars[Rl->in[0]].extent));
        break;
      }
      default: break;
      }
      sp_add(seq, b);
      if ((Rl->kind == REL_DIVIDE || Rl->kind == REL_SPLIT) && Rl->in[0] != tight) {
        sp_cond c = {SCMP_LT, sym_var(V(g, Rl->in[0])), R(g, s->vars[Rl->in[0]].extent), 0, NULL};
        if (collective) {
          add_cond(g, c);
        } else {
          sp_node *gd = sp_new(SN_GUARD);
          gd->nconds = 1, gd->conds = ir_alloc(sizeof *gd->conds);
          gd->conds[0] = c;
          sp_add(seq, gd);
        }
      }
      g->bound[Rl->in[0]] = true;
      if (Rl->kind == REL_FUSE) g->bound[Rl->in[1]] = true;
      changed = true;
    }
  }
}

/* ---- sparse operands ---------------------------------------------------------------------- */
/* Positions of sparse accesses: each level's position is computed as soon as its index
 * variable is bound, unless a loop iterates over the level's stored coordinates. */
static void sp_advance(bst *g, sp_node *seq) {
  for (int a = 0; a < g->nsp; a++) {
    const ir_expr *e = g->sp_e[a];
    const fe_tensor *ft = &ast(g)->tensors[e->tensor];
    while (g->sp_known[a] < e->nidx && g->bound[e->vars[g->sp_known[a]]]) {
      int x = g->sp_known[a];
      sp_node *n = sp_new(SN_SPPOS);
      n->sparse = a, n->level = x, n->var = V(g, e->vars[x]);
      n->tensor = e->tensor;
      n->compressed = ft->formats[x] == FE_COMPRESSED;
      sp_add(seq, n);
      /* a dense level below a stored entry is a stored entry */
      g->sp_valid[a][x] = ft->formats[x] != FE_COMPRESSED && (x == 0 || g->sp_valid[a][x - 1]);
      g->sp_known[a]++;
    }
  }
}

static bool guarded_by(const ir_expr *e, int var) {
  if (!e) return false;
  for (int q = 0; q < e->nguards; q++)
    if (e->guards[q] == var) return true;
  return guarded_by(e->a, var) || guarded_by(e->b, var);
}

/* Can local loop k iterate over the stored coordinates of a sparse access instead of its
 * whole range?  Only when that access is a factor of the whole right side (every skipped
 * iteration would add zero), the level is compressed with its parent levels positioned, and
 * the loop's variable is the level's index variable or the inner half of a divide or split of
 * it whose outer half is bound (then index = base + loop variable). */
/* The right side as a sum of terms (through + - and unary -): terms zero wherever none of
 * the n accesses m[] holds an entry, or terms that count once, guarded by j and free of
 * sparse accesses and of j.  Then *hoist is the once-terms' sum (their guard on j dropped)
 * and *strip the rest; false otherwise, or when there is no once-term. */
static bool zero_without(const ir_expr *x, const ir_expr *const *m, int n);
static const ir_expr *keeps_zero(const ir_expr *x);
/* The rule of structural zeros, once, by operator: where sparse operands hold no entry, a
 * product is zero where either factor is, a sum or difference where both terms are, a
 * quotient where its numerator is, a negation where its operand is, a call that keeps zero
 * where that operand is; anything else is not (zero_without on the IR, zero_cond on the
 * SPMD expression). */
typedef enum { ZR_NONE, ZR_EITHER, ZR_BOTH, ZR_A, ZR_B } zero_rule;
static zero_rule zero_by(const ir_expr *x) {
  switch (x->kind) {
  case IR_MUL: return ZR_EITHER;
  case IR_ADD: case IR_SUB: return ZR_BOTH;
  case IR_DIV: case IR_NEG: return ZR_A;
  case IR_CALL: {
    const ir_expr *z = keeps_zero(x);
    return !z ? ZR_NONE : z == x->a ? ZR_A : ZR_B;
  }
  default: return ZR_NONE;
  }
}
/* two accesses of one tensor at the same index variables */
static bool same_access(const ir_expr *x, const ir_expr *e) {
  return x->kind == IR_ACCESS && e->kind == IR_ACCESS && x->tensor == e->tensor && x->nidx == e->nidx &&
         (x->vars == e->vars || !memcmp(x->vars, e->vars, (size_t)x->nidx * sizeof *x->vars));
}
static bool uses_var(const ir_expr *e, int v) {
  if (!e) return false;
  for (int x = 0; e->kind == IR_ACCESS && x < e->nidx; x++)
    if (e->vars[x] == v) return true;
  return uses_var(e->a, v) || uses_var(e->b, v);
}
static bool has_sparse(const bst *g, const ir_expr *e) {
  if (!e) return false;
  if (e->kind == IR_ACCESS && e->tensor < ast(g)->ntensors && lw_sparse(ast(g), e->tensor)) return true;
  return has_sparse(g, e->a) || has_sparse(g, e->b);
}
static ir_expr *ir_bin(ir_expr_kind k, const ir_expr *a, const ir_expr *b) {
  ir_expr *x = ir_alloc(sizeof *x);
  x->kind = k, x->a = (ir_expr *)a, x->b = (ir_expr *)b;
  return x;
}
static bool split_terms(const bst *g, const ir_expr *t, bool neg, const ir_expr *const *m, int nm, int j,
                        const ir_expr **hoist, const ir_expr **strip, int *nonce) {
  if (!t->nguards && (t->kind == IR_ADD || t->kind == IR_SUB))
    return split_terms(g, t->a, neg, m, nm, j, hoist, strip, nonce) &&
           split_terms(g, t->b, t->kind == IR_SUB ? !neg : neg, m, nm, j, hoist, strip, nonce);
  if (!t->nguards && t->kind == IR_NEG) return split_terms(g, t->a, !neg, m, nm, j, hoist, strip, nonce);
  bool once = false;
  for (int q = 0; q < t->nguards; q++) once |= t->guards[q] == j;
  const ir_expr **into = strip;
  const ir_expr *term = t;
  if (once && !has_sparse(g, t) && !uses_var(t, j)) {
    ir_expr *c = ir_alloc(sizeof *c);
    *c = *t;
    c->guards = ir_alloc((t->nguards + 1) * sizeof *c->guards), c->nguards = 0;
    for (int q = 0; q < t->nguards; q++)
      if (t->guards[q] != j) c->guards[c->nguards++] = t->guards[q];
    term = c, into = hoist, ++*nonce;
  } else if (!zero_without(t, m, nm)) {
    return false;
  }
  *into = !*into ? (neg ? ir_bin(IR_NEG, term, NULL) : term) : ir_bin(neg ? IR_SUB : IR_ADD, *into, term);
  return true;
}

/* The once-terms of a loop over the inner half of a divide or split of j, which runs once per
 * block of j (the outer half `outer` is bound above it): they count at the first block only
 * (j == 0 iff outer == 0 and inner == 0). */
static const ir_expr *first_block_only(const ir_expr *hoist, int outer) {
  ir_expr *h = ir_alloc(sizeof *h);
  *h = *hoist;
  h->guards = ir_alloc((hoist->nguards + 1) * sizeof *h->guards);
  if (hoist->nguards) memcpy(h->guards, hoist->guards, hoist->nguards * sizeof *h->guards);
  h->guards[h->nguards++] = outer;
  return h;
}

static bool sp_driver(bst *g, int k, int *acc, int *level, const sym **base) {
  const lw_stmt *ls = g->ls;
  const ir_stmt *s = ls->s;
  const cin_node *n = ls->loops[k];
  if (g->sp->cuda || g->in_kernel || n->par != PAR_NONE || n->distributed || k < ls->outer) return false;
  for (int a = 0; a < g->nsp; a++) {
    const ir_expr *e = g->sp_e[a];
    int x = g->sp_known[a];
    if (x >= e->nidx || ast(g)->tensors[e->tensor].formats[x] != FE_COMPRESSED) continue;
    int j = e->vars[x];
    const ir_expr *rhs = cin_assign(s->root)->rhs, *hoist = NULL, *strip = NULL;
    int nonce = 0;
    if (g->bound[j]) continue;
    if (!g->sp_factor[a] || guarded_by(rhs, j)) { /* terms that count once go before the loop */
      if (k != ls->nloops - 1 || !split_terms(g, rhs, false, &e, 1, j, &hoist, &strip, &nonce) || !nonce || !strip)
        continue;
    }
    if (j == n->var) {
      *base = sym_const(0);
    } else {
      const ir_var *iv = &s->vars[n->var];
      if (iv->def < 0) continue;
      const ir_rel *Rl = &s->rels[iv->def];
      if (!((Rl->kind == REL_DIVIDE || Rl->kind == REL_SPLIT) && Rl->out[1] == n->var && Rl->in[0] == j &&
            g->bound[Rl->out[0]]))
        continue;
      *base = R(g, lw_rel_base(s, Rl, sym_var(Rl->out[0])));
      if (hoist) hoist = first_block_only(hoist, Rl->out[0]);
    }
    *acc = a, *level = x;
    g->hoist = hoist, g->strip = strip;
    return true;
  }
  return false;
}

/* Can local loop k iterate over the union of the stored coordinates of several sparse
 * accesses (A(i,j) + B(i,j))?  The loop is an index variable j, or the inner half of a divide
 * or split of j whose outer half is bound (then j = *base + the loop's variable); the members
 * in[a] are the accesses whose next unpositioned level is compressed and indexed by j, at
 * least two; the right side is zero wherever none of them holds an entry, or, in the
 * innermost loop, is such terms and terms that count once (A(i,j) + B(i,j) - 1 summed over
 * j), which go before the loop (g->hoist, g->strip as for sp_driver). */
static bool sp_union(bst *g, int k, bool *in, const sym **base) {
  const lw_stmt *ls = g->ls;
  const ir_stmt *s = ls->s;
  const cin_node *n = ls->loops[k];
  if (g->sp->cuda || g->in_kernel || n->par != PAR_NONE || n->distributed || k < ls->outer) return false;
  int j = n->var;
  *base = sym_const(0);
  const ir_var *iv = &s->vars[n->var];
  if (iv->def >= 0) { /* the inner half of a divide or split of j whose outer half is bound */
    const ir_rel *Rl = &s->rels[iv->def];
    if (!((Rl->kind == REL_DIVIDE || Rl->kind == REL_SPLIT) && Rl->out[1] == n->var && g->bound[Rl->out[0]])) return false;
    j = Rl->in[0];
    *base = R(g, lw_rel_base(s, Rl, sym_var(Rl->out[0])));
  }
  const ir_expr *rhs = cin_assign(s->root)->rhs, *hoist = NULL, *strip = NULL;
  if (g->bound[j]) return false;
  int m = 0;
  const ir_expr **mem = ir_alloc((g->nsp + 1) * sizeof *mem);
  for (int a = 0; a < g->nsp; a++) {
    const ir_expr *e = g->sp_e[a];
    int x = g->sp_known[a];
    in[a] = x < e->nidx && ast(g)->tensors[e->tensor].formats[x] == FE_COMPRESSED && e->vars[x] == j;
    if (in[a]) mem[m++] = e;
  }
  if (m < 2) return false;
  if (guarded_by(rhs, j) || !zero_without(rhs, mem, m)) { /* terms that count once go before the loop */
    int nonce = 0;
    if (k != ls->nloops - 1 || !split_terms(g, rhs, false, mem, m, j, &hoist, &strip, &nonce) || !nonce || !strip)
      return false;
    if (iv->def >= 0) hoist = first_block_only(hoist, s->rels[iv->def].out[0]);
  }
  g->hoist = hoist, g->strip = strip;
  return true;
}

/* ---- expressions -------------------------------------------------------------------------- */
static int sp_index(const bst *g, const ir_expr *e) {
  /* a guarded access is printed from a copy without its guards, and accesses of one tensor at
   * the same index variables read the same entries: one sparse access each */
  for (int a = 0; a < g->nsp; a++)
    if (g->sp_e[a] == e || same_access(g->sp_e[a], e)) return a;
  return -1;
}

static const int *vmap(const bst *g, int n, const int *vars) {
  int *o = ir_alloc((n + 1) * sizeof *o);
  for (int x = 0; x < n; x++) o[x] = V(g, vars[x]);
  return o;
}

/* the buffer the loops read tensor t through (output: the one they write) */
static int buf_of(const bst *g, int t, bool output) {
  for (int q = 0; q < g->ls->ncomm; q++)
    if (g->ls->comm[q].tensor == t && g->ls->comm[q].output == output) return g->comm_buf[q];
  return -1;
}

/* ---- structural zeros (spmd.h: sp_expr.zero_if, zero_guard) -------------------------------- */
static const sp_expr *zero_join(sp_expr_kind k, const sp_expr *a, const sp_expr *b) {
  if (!a || !b) return k == SE_AND ? NULL : a ? a : b;
  sp_expr *c = ir_alloc(sizeof *c);
  c->kind = k, c->a = a, c->b = b;
  c->buf = c->work = c->sparse = c->tensor = -1;
  return c;
}

/* x's condition from its operands' (e: the expression it was built from): a sparse access
 * that may hold no entry here (a position that may be -1; without positions, as in the
 * serial reference, any sparse access), and zero_by's rule for the operators */
static void zero_cond(const bst *g, sp_expr *x, const ir_expr *e) {
  if (x->kind == SE_ACCESS) {
    if (x->sparse >= 0 ? x->maybe_absent
                       : x->tensor >= 0 && x->work < 0 && x->tensor < ast(g)->ntensors && lw_sparse(ast(g), x->tensor)) {
      sp_expr *c = ir_alloc(sizeof *c);
      c->kind = SE_ABSENT, c->a = x;
      c->buf = c->work = c->sparse = c->tensor = -1;
      x->zero_if = c;
    }
    return;
  }
  switch (zero_by(e)) {
  case ZR_EITHER: x->zero_if = zero_join(SE_OR, x->a->zero_if, x->b->zero_if); break;
  case ZR_BOTH: x->zero_if = zero_join(SE_AND, x->a->zero_if, x->b->zero_if); break;
  case ZR_A: x->zero_if = x->a->zero_if; break;
  case ZR_B: x->zero_if = x->b->zero_if; break;
  default: break;
  }
}

/* Could x be other than zero where its condition holds, computed as written (a NaN or an
 * infinity from another operand, 0 / 0)?  Where it has a quotient, a floating param, a call of
 * two operands or two accesses (a stored entry may be infinite); not where it is one access
 * with literals and integer params (0 * 2, abs(0)). */
static bool may_spoil(const bst *g, const sp_expr *x, int *nacc) {
  if (!x) return false;
  switch (x->kind) {
  case SE_ACCESS: return ++*nacc > 1;
  case SE_DIV: return true;
  case SE_PARAM: return ast(g)->params[x->param].is_float;
  case SE_CALL: if (x->b) return true; break;
  default: break;
  }
  return may_spoil(g, x->a, nacc) || may_spoil(g, x->b, nacc);
}

/* Precondition: zero_if set bottom-up.  Rule: the outermost product, quotient or call with a
 * condition that may spoil it prints it (zero_guard); its operands on the condition's path (a
 * product's both, a quotient's numerator, a negation's, the call's operand that keeps zero)
 * are zero by it already, those off it (a divisor, exp's operand, a sum's terms) decide for
 * themselves.  Integer statements need none (0 * x is 0, and so is a quotient by 0). */
static void zero_mark(const bst *g, sp_expr *x, bool covered) {
  if (!x || x->kind == SE_ACCESS) return;
  fe_type ty = ast(g)->tensors[cin_assign(g->ls->s->root)->lhs_tensor].type;
  int nacc = 0;
  if (x->zero_if && !covered && (x->kind == SE_MUL || x->kind == SE_DIV || x->kind == SE_CALL) && ty != FE_INT32 &&
      ty != FE_INT64 && may_spoil(g, x, &nacc))
    x->zero_guard = true;
  bool on = (covered || x->zero_guard) && x->zero_if;
  switch (x->kind) {
  case SE_MUL: zero_mark(g, (sp_expr *)x->a, on), zero_mark(g, (sp_expr *)x->b, on); break;
  case SE_DIV: zero_mark(g, (sp_expr *)x->a, on), zero_mark(g, (sp_expr *)x->b, false); break;
  case SE_NEG: zero_mark(g, (sp_expr *)x->a, on); break;
  case SE_CALL:
    zero_mark(g, (sp_expr *)x->a, on && x->a->zero_if == x->zero_if);
    zero_mark(g, (sp_expr *)x->b, on && x->b && x->b->zero_if == x->zero_if);
    break;
  default: zero_mark(g, (sp_expr *)x->a, false), zero_mark(g, (sp_expr *)x->b, false);
  }
}

static sp_expr *expr_node(const bst *g, const ir_expr *e);
/* An expression of the statement, with its structural zeros marked. */
static sp_expr *expr(const bst *g, const ir_expr *e) {
  sp_expr *x = expr_node(g, e);
  zero_mark(g, x, false);
  return x;
}

static sp_expr *expr_node(const bst *g, const ir_expr *e) {
  sp_expr *x = ir_alloc(sizeof *x);
  x->buf = x->work = x->sparse = x->tensor = -1;
  x->nguards = e->nguards;
  x->guards = e->nguards ? vmap(g, e->nguards, e->guards) : NULL;
  switch (e->kind) {
  case IR_ACCESS:
    x->kind = SE_ACCESS;
    x->nidx = e->nidx;
    x->vars = vmap(g, e->nidx, e->vars);
    if (e->tensor < ast(g)->ntensors) x->tensor = e->tensor;
    if (e->tensor >= ast(g)->ntensors) {
      for (int w = 0; w < g->sp->nworks; w++)
        if (g->sp->works[w].func == g->fn->index && !strcmp(g->sp->works[w].name, g->ls->s->work[e->tensor - ast(g)->ntensors].name))
          x->work = w;
      break;
    }
    x->sparse = sp_index(g, e);
    if (x->sparse >= 0) {
      x->maybe_absent = !g->sp_valid[x->sparse][e->nidx - 1];
      x->buf = buf_of(g, e->tensor, false);
      break;
    }
    x->buf = buf_of(g, e->tensor, false);
    break;
  case IR_NUM:
    x->kind = SE_NUM, x->num = e->num, x->is_int = e->is_int, x->ival = e->ival, x->text = e->text;
    break;
  case IR_NEG: x->kind = SE_NEG, x->a = expr_node(g, e->a); break;
  case IR_PARAM: x->kind = SE_PARAM, x->param = e->param; break;
  case IR_CALL:
    x->kind = SE_CALL, x->func = e->func, x->a = expr_node(g, e->a);
    if (e->b) x->b = expr_node(g, e->b);
    break;
  default:
    x->kind = e->kind == IR_ADD ? SE_ADD : e->kind == IR_SUB ? SE_SUB : e->kind == IR_MUL ? SE_MUL : SE_DIV;
    x->a = expr_node(g, e->a), x->b = expr_node(g, e->b);
  }
  zero_cond(g, x, e);
  return x;
}

static sp_expr *lhs_expr(const bst *g) {
  const cin_node *asg = cin_assign(g->ls->s->root);
  sp_expr *x = ir_alloc(sizeof *x);
  x->kind = SE_ACCESS, x->work = x->sparse = -1;
  x->tensor = asg->lhs_tensor;
  x->buf = buf_of(g, asg->lhs_tensor, true);
  x->nidx = asg->nlhs, x->vars = vmap(g, asg->nlhs, asg->lhs_vars);
  return x;
}

/* ---- communication ------------------------------------------------------------------------ */
static const int *args_of(const bst *g, int depth, int *n) {
  int *o = ir_alloc((depth + 2) * sizeof *o), m = 0;
  for (int k = 0; k <= depth; k++) {
    const cin_node *L = g->ls->loops[k];
    if (L->distributed) {
      int64_t one;
      if (!(sym_is_const(g->ls->bs[k], &one) && one == 1)) o[m++] = V(g, g->ls->lidx_var0 + k);
    } else {
      o[m++] = V(g, L->var);
    }
  }
  *n = m;
  return o;
}

static sp_node *comm_node(const bst *g, sp_comm_op op, int q, const lw_comm *c) {
  sp_node *n = sp_new(SN_COMM);
  n->op = op, n->buf = g->comm_buf[q], n->mask = c->mask;
  n->depth_var = c->depth >= 0 ? V(g, g->ls->loops[c->depth]->var) : -1;
  if (c->depth >= 0) {
    n->depth_extent = R(g, g->ls->s->vars[g->ls->loops[c->depth]->var].extent);
    n->depth_distributed = g->ls->loops[c->depth]->distributed;
  }
  if (c->pattern == PAT_SHIFT) n->shift_dim = c->shift_dim;
  n->fallback = c->alt != NULL;
  n->comment = c->why;
  return n;
}

/* what the box function of an exchange needs: the loop values at and above the point */
static void with_args(const bst *g, sp_node *n, const lw_comm *c) {
  int m;
  n->arg_vars = args_of(g, c->depth, &m);
  n->nargs = m;
}

/* Communication at the top of an iteration of the loop at c->depth (or before all loops). */
static void comm_in1(bst *g, sp_node *seq, int q, const lw_comm *c, bool alt) {
  bool sparse = lw_sparse(ast(g), c->tensor);
  if (c->pattern == PAT_LOCAL) { /* a view at statement start, unless an alternative */
    if (alt) sp_add(seq, comm_node(g, SC_VIEW, q, c));
    return;
  }
  sp_node *n;
  if (sparse && c->output) {
    n = comm_node(g, SC_SPARSE_RESET, q, c);
  } else if (sparse && c->pattern == PAT_BCAST) {
    n = comm_node(g, SC_SPARSE_BCAST, q, c);
  } else if (sparse) {
    n = comm_node(g, SC_SPARSE_FETCH, q, c);
    with_args(g, n, c);
  } else if (c->output) {
    n = comm_node(g, SC_PRODUCE, q, c);
  } else if (c->pattern == PAT_BCAST) {
    n = comm_node(g, SC_BCAST, q, c);
  } else {
    n = comm_node(g, SC_FETCH, q, c);
    with_args(g, n, c);
  }
  n->tensor = c->tensor;
  sp_add(seq, n);
}

static void comm_out1(bst *g, sp_node *seq, int q, const lw_comm *c) {
  if (!c->output || c->pattern == PAT_LOCAL) return;
  sp_node *n;
  if (lw_sparse(ast(g), c->tensor)) {
    n = comm_node(g, SC_SPARSE_ACC, q, c);
    n->mask = g->ls->exec_mask;
    with_args(g, n, c);
    sp_add(seq, n);
    return;
  }
  if (c->pattern == PAT_REDUCE) {
    if (c->mask) {
      /* partial sums to one root per piece; where the output is replicated along some of
       * these dims (*), the roots broadcast the total along them (rewritten to allreduce) */
      const lw_owner *o = &g->lp->owner[c->tensor];
      int64_t *roots = ir_alloc((g->lp->ndims + 1) * sizeof *roots);
      unsigned star = 0;
      for (int d = 0; d < g->lp->ndims; d++) {
        if (!(c->mask >> d & 1)) continue;
        if (o->kind[d] == OWN_STAR) star |= 1u << d;
        else roots[d] = c->root[d];
      }
      n = comm_node(g, SC_REDUCE, q, c);
      n->roots = roots;
      sp_add(seq, n);
      if (star) {
        n = comm_node(g, SC_BCAST_RESULT, q, c);
        n->mask = star, n->roots = roots;
        sp_add(seq, n);
      }
    }
    n = comm_node(g, SC_KEEP_OWN, q, c);
    n->tensor = c->tensor;
    sp_add(seq, n);
    return;
  }
  n = comm_node(g, SC_ACCUMULATE, q, c);
  n->mask = g->ls->exec_mask;
  with_args(g, n, c);
  sp_add(seq, n);
}

static sp_node *assume_if(const bst *g, const lw_comm *c) {
  sp_node *n = sp_new(SN_IF);
  n->nconds = 1;
  n->conds = one_cond(SCMP_EQ_PARAMS, NULL, NULL);
  n->conds[0].nparams = c->nassume;
  n->conds[0].params = c->assume;
  n->comment = "the grid allows a collective pattern";
  sp_add(n, sp_new(SN_SEQ));
  sp_add(n, sp_new(SN_SEQ));
  (void)g;
  return n;
}

static void comm_in(bst *g, sp_node *seq, int q) {
  const lw_comm *c = &g->ls->comm[q];
  if (!c->alt) {
    comm_in1(g, seq, q, c, false);
    return;
  }
  sp_node *n = assume_if(g, c);
  comm_in1(g, n->kids[0], q, c->alt, true);
  comm_in1(g, n->kids[1], q, c, false);
  sp_add(seq, n);
}

static void comm_out(bst *g, sp_node *seq, int q) {
  const lw_comm *c = &g->ls->comm[q];
  if (!c->output) return;
  if (!c->alt) {
    comm_out1(g, seq, q, c);
    return;
  }
  sp_node *n = assume_if(g, c);
  n->comment = NULL;
  comm_out1(g, n->kids[0], q, c->alt);
  comm_out1(g, n->kids[1], q, c);
  sp_add(seq, n);
}

/* ---- leaves ------------------------------------------------------------------------------- */
static void kernel_node(bst *g, sp_node *seq, int k) {
  const ir_stmt *s = g->ls->s;
  const cin_node *n = g->ls->loops[k];
  const cin_node *asg = cin_assign(s->root);
  sp_node *kn = sp_new(SN_KERNEL);
  int nk = n->nsubst;
  int *korig = ir_alloc((nk + 1) * sizeof *korig);
  const sym **klo = ir_alloc((nk + 1) * sizeof *klo), **khi = ir_alloc((nk + 1) * sizeof *khi);
  for (int q = 0; q < nk; q++) {
    int v = g->ls->loops[k + q]->var;
    while (!s->vars[v].original) v = s->rels[s->vars[v].def].in[0];
    const sym *lo, *hi;
    lw_interval(g->lp, g->ls, v, k - 1, &lo, &hi);
    korig[q] = V(g, v), klo[q] = R(g, lo), khi[q] = R(g, hi);
  }
  kn->kernel = n->kernel, kn->nk = nk, kn->korig = korig, kn->klo = klo, kn->khi = khi;
  kn->type = ast(g)->tensors[asg->lhs_tensor].type;
  /* the call: the catalogue lays out the arguments from the operands' kernel dimensions */
  int lorig[KC_MAX_POS + 1];
  for (int q = 0; q < nk && q <= KC_MAX_POS; q++) lorig[q] = korig[q] - g->fn->var0;
  const ir_expr *op[KC_MAX_OPERANDS], *coef;
  kc_access acc[KC_MAX_OPERANDS];
  int nops = ir_kernel_operands(asg, n->kernel, lorig, nk, op, acc, &coef, NULL);
  const sp_expr **kops = ir_alloc((nops + 1) * sizeof *kops);
  kops[0] = lhs_expr(g);
  for (int q = 1; q < nops; q++) kops[q] = expr(g, op[q]);
  kn->nkops = nops, kn->kops = kops;
  kn->kcoef = coef ? expr(g, coef) : NULL;
  kc_call *call = ir_alloc(sizeof *call);
  kn->kcall = kc_describe_call(n->kernel, nk, nops, acc, call) ? call : NULL;
  kn->comment = ir_kernel_name(n->kernel);
  sp_add(seq, kn);
}

static bool host_atomic(const bst *g) {
  bool atomic = false;
  for (int k = 0; k < g->ls->nloops; k++)
    atomic |= g->ls->loops[k]->par == PAR_CPU_THREAD && g->ls->loops[k]->race == RACE_ATOMICS && k >= g->ls->outer;
  return atomic;
}

/* The terms that count once (g->hoist), added before a loop over stored coordinates. */
static void hoist_node(bst *g, sp_node *seq) {
  if (!g->hoist) return;
  sp_node *h = sp_new(SN_ASSIGN);
  const cin_node *asg = cin_assign(g->ls->s->root);
  h->lhs = lhs_expr(g);
  h->rhs = expr(g, g->hoist);
  h->type = ast(g)->tensors[asg->lhs_tensor].type;
  h->tensor = asg->lhs_tensor;
  h->to_acc = g->acc_mode;
  h->to_entries = lw_sparse(ast(g), asg->lhs_tensor) && !g->acc_mode;
  h->atomic = !g->acc_mode && !h->to_entries && host_atomic(g);
  h->comment = "the terms that count once, before the loop over the stored coordinates";
  sp_add(seq, h);
}

static void assign_node(bst *g, sp_node *seq) {
  if (g->nsp) sp_advance(g, seq);
  const cin_node *asg = cin_assign(g->ls->s->root);
  sp_node *n = sp_new(SN_ASSIGN);
  n->lhs = lhs_expr(g);
  n->rhs = expr(g, g->strip ? g->strip : asg->rhs);
  n->type = ast(g)->tensors[asg->lhs_tensor].type;
  n->tensor = asg->lhs_tensor;
  n->to_acc = g->acc_mode;
  n->to_entries = lw_sparse(ast(g), asg->lhs_tensor) && !g->acc_mode;
  n->atomic = g->in_kernel ? g->atomic : !g->acc_mode && !n->to_entries && host_atomic(g);
  sp_add(seq, n);
}

static void producer_node(bst *g, sp_node *seq, const cin_node *w) {
  const ir_stmt *s = g->ls->s;
  const cin_node *pr = w->producer;
  sp_node *n = sp_new(SN_PRODUCER);
  n->var = V(g, pr->var);
  n->hi = R(g, s->vars[pr->var].extent);
  n->rhs = expr(g, pr->body->rhs);
  n->type = ast(g)->tensors[cin_assign(s->root)->lhs_tensor].type;
  for (int q = 0; q < g->sp->nworks; q++)
    if (g->sp->works[q].func == g->fn->index && !strcmp(g->sp->works[q].name, s->work[w->workspace - ast(g)->ntensors].name))
      n->work = q;
  sp_add(seq, n);
}

/* Can the innermost loop k sum into a scalar?  When it is a plain local loop and every index
 * variable of the output is bound outside it: all its iterations add to one element. */
static bool acc_loop(const bst *g, int k) {
  const lw_stmt *ls = g->ls;
  const cin_node *n = ls->loops[k];
  const cin_node *asg = cin_assign(ls->s->root);
  if (k != ls->nloops - 1 || k < ls->outer || n->distributed || n->par != PAR_NONE || g->sp->cuda || g->in_kernel ||
      k == g->kdepth)
    return false;
  for (int x = 0; x < asg->nlhs; x++)
    if (!g->bound[asg->lhs_vars[x]]) return false;
  return true;
}

static const char *loop_comment(const bst *g, int k) {
  const ir_stmt *s = g->ls->s;
  const cin_node *n = g->ls->loops[k];
  const ir_var *v = &s->vars[n->var];
  const char *from = v->def < 0 ? "index variable of the statement" : s->rels[v->def].text;
  char b[512];
  if (n->distributed) snprintf(b, sizeof b, "%s, distributed onto grid dim %d", from, lw_gdim(g->lp, n));
  else snprintf(b, sizeof b, "%s", from);
  return ir_strdup(b);
}

static void level(bst *g, sp_node *seq, int k);
static void device_node(bst *g, sp_node *seq, int k0);

static void level(bst *g, sp_node *seq, int k) {
  const lw_stmt *ls = g->ls;
  const ir_stmt *s = ls->s;
  if (k == ls->outer && ls->outer > 0 && g->ncond) {
    sp_node *n = sp_new(SN_IF);
    n->nconds = g->ncond;
    n->conds = ir_alloc(g->ncond * sizeof *n->conds);
    memcpy(n->conds, g->cond, g->ncond * sizeof *n->conds);
    n->comment = "this rank has work in this iteration";
    sp_add(n, sp_new(SN_SEQ));
    sp_add(seq, n);
    int save = g->ncond;
    g->ncond = 0;
    level(g, n->kids[0], k);
    g->ncond = save;
    return;
  }
  if (g->sp->cuda && !g->in_kernel && k == ls->outer && g->kdepth < 0) {
    device_node(g, seq, k); /* the local loops become one device kernel */
    return;
  }
  if (g->in_kernel && g->mapped[k]) { /* a thread index: bound at the kernel's top */
    level(g, seq, k + 1);
    return;
  }
  if (k == g->kdepth) {
    kernel_node(g, seq, k);
    return;
  }
  if (k == ls->nloops) {
    assign_node(g, seq);
    return;
  }
  const cin_node *n = ls->loops[k];
  bool collective = k < ls->outer;
  if (!collective && g->nsp) sp_advance(g, seq); /* positions the enclosing loops determine */
  for (int w = 0; w < ls->nwhere; w++)
    if (ls->where_depth[w] == k) producer_node(g, seq, ls->where[w]);
  size_t nb = (s->nvars + 1) * sizeof *g->bound;
  bool *saved = ir_alloc(nb);
  memcpy(saved, g->bound, nb);
  int *known_saved = ir_alloc((g->nsp + 1) * sizeof *known_saved);
  if (g->nsp) memcpy(known_saved, g->sp_known, g->nsp * sizeof *known_saved);
  bool (*valid_saved)[LW_MAX_DIMS] = ir_alloc((g->nsp + 1) * sizeof *valid_saved);
  if (g->nsp) memcpy(valid_saved, g->sp_valid, g->nsp * sizeof *valid_saved);
  sp_node *acc = NULL;
  if (acc_loop(g, k)) {
    acc = sp_new(SN_ACC);
    acc->lhs = lhs_expr(g);
    acc->type = ast(g)->tensors[cin_assign(s->root)->lhs_tensor].type;
    acc->tensor = cin_assign(s->root)->lhs_tensor;
    acc->to_entries = lw_sparse(ast(g), acc->tensor);
    acc->atomic = !acc->to_entries && host_atomic(g);
    acc->comment = "the loop's sum, added to the output element after it";
    sp_add(acc, sp_new(SN_SEQ));
    sp_add(seq, acc);
    seq = acc->kids[0];
    g->acc_mode = true;
  }
  int ncond0 = g->ncond;
  int tight = -1;
  sp_node *L = sp_new(SN_LOOP);
  L->var = V(g, n->var);
  L->comment = loop_comment(g, k);
  if (n->distributed) {
    int d = lw_gdim(g->lp, n);
    int64_t one;
    bool single = sym_is_const(ls->bs[k], &one) && one == 1;
    L->dim = d;
    if (collective && single) {
      L->loop = SL_COORD;
    } else if (collective) {
      L->loop = SL_COLL_BLOCK;
      L->lvar = V(g, ls->lidx_var0 + k);
      L->hi = R(g, ls->bs[k]);
      L->value = R(g, lw_loop_value(g->lp, ls, k));
    } else {
      const sym *base = sym_mul(sym_coord(d), ls->bs[k]);
      L->loop = SL_LOCAL_BLOCK;
      L->lo = R(g, base);
      L->hi = R(g, sym_min(F(g), s->vars[n->var].extent, sym_add(base, ls->bs[k])));
    }
    if (collective) {
      const sym *val = lw_loop_value(g->lp, ls, k);
      if (!sym_prove_le(F(g), sym_add(val, sym_const(1)), s->vars[n->var].extent))
        add_cond(g, (sp_cond){SCMP_LT, sym_var(V(g, n->var)), R(g, s->vars[n->var].extent), 0, NULL});
    }
  } else {
    const sym *hi = collective ? lw_outer_extent(ls, n->var) : lw_local_hi(ls, n->var, g->bound, &tight);
    L->loop = SL_LOCAL;
    L->hi = R(g, hi);
    L->lo = sym_const(0);
    L->par = collective || g->sp->cuda ? PAR_NONE : n->par;
    int drv_a, drv_x;
    const sym *base;
    if (g->nsp && sp_driver(g, k, &drv_a, &drv_x, &base)) {
      /* only the stored coordinates of the sparse factor: the others add zero; the terms that
       * count once are added before the loop */
      hoist_node(g, seq);
      L->loop = SL_SPARSE;
      L->sparse = drv_a, L->level = drv_x, L->base = base;
      L->tensor = g->sp_e[drv_a]->tensor;
      L->parent_maybe_absent = drv_x > 0 && !g->sp_valid[drv_a][drv_x - 1];
      int64_t b0;
      L->within = sym_is_const(base, &b0) && b0 == 0 && sym_equal(L->hi, g->sp->tensors[L->tensor].ext[drv_x]);
      g->sp_known[drv_a] = drv_x + 1;
      g->sp_valid[drv_a][drv_x] = true;
    } else if (g->nsp) {
      bool *in = ir_alloc((g->nsp + 1) * sizeof *in);
      const sym *ubase;
      if (sp_union(g, k, in, &ubase)) {
        /* the union of the members' stored coordinates: elsewhere every term adds zero but
         * those that count once, added before the loop */
        hoist_node(g, seq);
        int m = 0, *us = ir_alloc((g->nsp + 1) * sizeof *us), *ul = ir_alloc((g->nsp + 1) * sizeof *ul),
            *ut = ir_alloc((g->nsp + 1) * sizeof *ut);
        for (int a = 0; a < g->nsp; a++)
          if (in[a]) {
            int x = g->sp_known[a];
            us[m] = a, ul[m] = x, ut[m++] = g->sp_e[a]->tensor;
            g->sp_known[a] = x + 1;
            g->sp_valid[a][x] = false; /* -1 where this member holds no entry */
          }
        L->loop = SL_SPARSE;
        L->sparse = us[0], L->level = ul[0], L->tensor = ut[0], L->base = ubase;
        L->nunion = m, L->union_sparse = us, L->union_level = ul, L->union_tensor = ut;
        for (int u = 0; u < m; u++) L->parent_maybe_absent |= ul[u] > 0 && !g->sp_valid[us[u]][ul[u] - 1];
      }
    }
  }
  sp_add(seq, L);
  sp_add(L, sp_new(SN_SEQ));
  sp_node *body = L->kids[0];
  g->bound[n->var] = true;
  bind_parents(g, body, collective, tight);
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].depth == k) comm_in(g, body, q);
  level(g, body, k + 1);
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].depth == k) comm_out(g, body, q);
  if (acc) g->acc_mode = false;
  memcpy(g->bound, saved, nb);
  if (g->nsp) memcpy(g->sp_known, known_saved, g->nsp * sizeof *known_saved);
  if (g->nsp) memcpy(g->sp_valid, valid_saved, g->nsp * sizeof *valid_saved);
  g->ncond = ncond0; /* conditions of this loop go out of scope with it */
}

/* ---- device: the local loops as one kernel ------------------------------------------------ */
/* The original variables whose values determine variable v. */
static void determinants(const ir_stmt *s, int v, bool *out) {
  if (s->vars[v].def < 0) {
    out[v] = true;
    return;
  }
  const ir_rel *Rl = &s->rels[s->vars[v].def];
  determinants(s, Rl->in[0], out);
  if (Rl->kind == REL_FUSE) determinants(s, Rl->in[1], out);
  for (int q = 0; q < Rl->nrot; q++) determinants(s, Rl->rot[q], out);
}

/* Is loop k's variable a function of the output's index variables alone?  Then threads over
 * it never write the same output element. */
static bool output_parallel(const bst *g, int k) {
  const ir_stmt *s = g->ls->s;
  const cin_node *asg = cin_assign(s->root);
  bool *det = ir_alloc((s->nvars + 1) * sizeof *det);
  determinants(s, g->ls->loops[k]->var, det);
  for (int v = 0; v < s->nvars; v++) {
    if (!det[v]) continue;
    bool in_lhs = false;
    for (int x = 0; x < asg->nlhs; x++) in_lhs |= asg->lhs_vars[x] == v;
    if (!in_lhs) return false;
  }
  return true;
}

/* The loops [k0, nloops) below the last communicate point run on the device: one kernel
 * whose threads are the loops scheduled with gpu_block / gpu_warp / gpu_thread (in that
 * order, the last one varying fastest), or by default every loop whose variable determines
 * the output element written; the other loops run inside each thread.  Updates are atomic
 * where threads can meet on an output element. */
static void device_node(bst *g, sp_node *seq, int k0) {
  const lw_stmt *ls = g->ls;
  const ir_stmt *s = ls->s;
  sp_node *D = sp_new(SN_DEVICE);
  char kn[64];
  snprintf(kn, sizeof kn, "s%d_k%d", s->index, g->nkern++);
  D->kname = ir_strdup(kn);
  int nm = 0, *mk = ir_alloc((ls->nloops + 1) * sizeof *mk);
  bool explicit_units = false;
  for (int k = k0; k < ls->nloops; k++) explicit_units |= ls->loops[k]->par >= PAR_GPU_BLOCK;
  if (explicit_units) {
    static const ir_par_unit order[] = {PAR_GPU_BLOCK, PAR_GPU_WARP, PAR_GPU_THREAD};
    for (int u = 0; u < 3; u++)
      for (int k = k0; k < ls->nloops; k++)
        if (ls->loops[k]->par == order[u]) mk[nm++] = k;
  } else {
    for (int k = k0; k < ls->nloops; k++)
      if (output_parallel(g, k)) mk[nm++] = k;
    if (!nm) /* a full reduction: every loop is a thread, the updates atomic */
      for (int k = k0; k < ls->nloops; k++) mk[nm++] = k;
  }
  bool atomic = false;
  for (int q = 0; q < nm; q++) {
    const cin_node *n = ls->loops[mk[q]];
    if (n->race == RACE_ATOMICS || (!output_parallel(g, mk[q]) && n->race != RACE_IGNORE)) atomic = true;
  }
  D->atomic = atomic;
  /* what the body names: bound variables, local indices of distributed loops, buffers */
  int *cap = ir_alloc((s->nvars + ls->nloops + 1) * sizeof *cap), nc = 0;
  for (int v = 0; v < s->nvars && v < 512; v++)
    if (g->bound[v]) cap[nc++] = V(g, v);
  for (int k = 0; k < k0; k++) {
    int64_t one;
    if (ls->loops[k]->distributed && !(sym_is_const(ls->bs[k], &one) && one == 1)) cap[nc++] = V(g, ls->lidx_var0 + k);
  }
  D->ncaptured = nc, D->captured = cap;
  D->nbufs = g->fn->nbufs, D->bufs = g->fn->bufs;
  int *mv = ir_alloc((nm + 1) * sizeof *mv);
  const sym **mlo = ir_alloc((nm + 1) * sizeof *mlo), **mhi = ir_alloc((nm + 1) * sizeof *mhi);
  for (int q = 0; q < nm; q++) {
    const cin_node *n = ls->loops[mk[q]];
    mv[q] = V(g, n->var);
    if (n->distributed) {
      const sym *base = sym_mul(sym_coord(lw_gdim(g->lp, n)), ls->bs[mk[q]]);
      mlo[q] = R(g, base);
      mhi[q] = R(g, sym_min(F(g), s->vars[n->var].extent, sym_add(base, ls->bs[mk[q]])));
    } else {
      int parent;
      mlo[q] = sym_const(0);
      mhi[q] = R(g, lw_local_hi(ls, n->var, g->bound, &parent));
    }
  }
  D->nmapped = nm, D->mapped_vars = mv, D->mapped_lo = mlo, D->mapped_hi = mhi;
  int nl = ls->nloops - k0;
  int *lv = ir_alloc((nl + 1) * sizeof *lv);
  bool *lt = ir_alloc((nl + 1) * sizeof *lt);
  for (int k = k0; k < ls->nloops; k++) {
    lv[k - k0] = V(g, ls->loops[k]->var);
    for (int q = 0; q < nm; q++) lt[k - k0] |= mk[q] == k;
  }
  D->nloops = nl, D->loop_vars = lv, D->loop_thread = lt;
  D->comment = atomic ? "atomic updates" : NULL;
  sp_add(D, sp_new(SN_SEQ));
  sp_add(seq, D);
  /* the kernel's body: thread indices bound at its top, the rest of the nest inside */
  size_t nb = (s->nvars + 1) * sizeof *g->bound;
  bool *saved = ir_alloc(nb);
  memcpy(saved, g->bound, nb);
  int ncond = g->ncond;
  for (int q = 0; q < nm; q++) g->bound[ls->loops[mk[q]]->var] = true;
  memset(g->mapped, 0, (ls->nloops + 1) * sizeof *g->mapped);
  for (int q = 0; q < nm; q++) g->mapped[mk[q]] = true;
  g->in_kernel = true;
  g->atomic = atomic;
  g->ncond = 0;
  bind_parents(g, D->kids[0], false, -1);
  level(g, D->kids[0], k0);
  g->in_kernel = false;
  g->ncond = ncond;
  memcpy(g->bound, saved, nb);
}

/* ---- statements -------------------------------------------------------------------------- */
/* a literal's value (a number, or a negated one) */
static bool literal(const ir_expr *x, double *v) {
  if (!x || x->nguards) return false;
  if (x->kind == IR_NUM) return *v = x->num, true;
  if (x->kind == IR_NEG && literal(x->a, v)) return *v = -*v, true;
  return false;
}

/* The operand of call x whose zero makes the call zero, or NULL: abs, sqrt and erf of 0 are 0,
 * pow(0, c) is 0 for a literal c > 0, min(0, c) for a literal c >= 0 and max(0, c) for c <= 0
 * (either argument).  exp(0) = 1, log(0) and other exponents are not 0: skipping the entries
 * that a sparse access inside them does not store would change the result. */
static const ir_expr *keeps_zero(const ir_expr *x) {
  double c;
  switch (x->func) {
  case FE_F_ABS: case FE_F_SQRT: case FE_F_ERF: return x->a;
  case FE_F_POW: return literal(x->b, &c) && c > 0 ? x->a : NULL;
  case FE_F_MIN: return literal(x->b, &c) && c >= 0 ? x->a : literal(x->a, &c) && c >= 0 ? x->b : NULL;
  case FE_F_MAX: return literal(x->b, &c) && c <= 0 ? x->a : literal(x->a, &c) && c <= 0 ? x->b : NULL;
  default: return NULL;
  }
}

/* Is x zero wherever none of the n accesses m[] holds an entry: one of them, a sum whose
 * terms each are, a product with a factor that is, a quotient whose numerator is, a call that
 * keeps zero of an operand that is?  With one access: is it a factor of x. */
static bool zero_without(const ir_expr *x, const ir_expr *const *m, int n) {
  if (!x) return false;
  for (int a = 0; a < n; a++)
    if (x == m[a]) return true;
  if (x->nguards) return false;
  for (int a = 0; a < n; a++)
    if (same_access(x, m[a])) return true;
  switch (zero_by(x)) {
  case ZR_EITHER: return zero_without(x->a, m, n) || zero_without(x->b, m, n);
  case ZR_BOTH: return zero_without(x->a, m, n) && zero_without(x->b, m, n);
  case ZR_A: return zero_without(x->a, m, n);
  case ZR_B: return zero_without(x->b, m, n);
  default: return false;
  }
}

static void collect_sparse(bst *g, const ir_expr *rhs, const ir_expr *e, int *cap) {
  if (!e) return;
  if (e->kind == IR_ACCESS && e->tensor < ast(g)->ntensors && lw_sparse(ast(g), e->tensor) && sp_index(g, e) < 0) {
    if (g->nsp == *cap) {
      int c = 2 * *cap + 8;
      const ir_expr **ne = ir_alloc(c * sizeof *ne);
      bool *nf = ir_alloc(c * sizeof *nf), (*nv)[LW_MAX_DIMS] = ir_alloc(c * sizeof *nv);
      int *nk = ir_alloc(c * sizeof *nk);
      if (g->nsp) {
        memcpy(ne, g->sp_e, g->nsp * sizeof *ne), memcpy(nf, g->sp_factor, g->nsp * sizeof *nf);
        memcpy(nv, g->sp_valid, g->nsp * sizeof *nv), memcpy(nk, g->sp_known, g->nsp * sizeof *nk);
      }
      g->sp_e = ne, g->sp_factor = nf, g->sp_valid = nv, g->sp_known = nk, *cap = c;
    }
    g->sp_e[g->nsp] = e;
    g->sp_factor[g->nsp] = zero_without(rhs, &e, 1);
    g->sp_known[g->nsp++] = 0;
  }
  collect_sparse(g, rhs, e->a, cap);
  collect_sparse(g, rhs, e->b, cap);
}

/* arithmetic operations of an expression (for GFLOP/s); a function call counts as one */
static int64_t count_ops(const ir_expr *e) {
  if (!e || e->kind == IR_ACCESS || e->kind == IR_NUM || e->kind == IR_PARAM) return 0;
  return 1 + count_ops(e->a) + count_ops(e->b);
}

static int count_access(const ir_expr *e) {
  if (!e) return 0;
  if (e->kind == IR_ACCESS) return 1;
  return count_access(e->a) + count_access(e->b);
}

static sp_node *init_node(sp_init_kind k) {
  sp_node *n = sp_new(SN_INIT);
  n->init = k;
  return n;
}

static void build_stmt(sp_program *sp, const lw_program *lp, int i, int *slot) {
  const lw_stmt *ls = &lp->stmts[i];
  const ir_stmt *s = ls->s;
  const fe_program *p = lp->ir->ast;
  const cin_node *asg = cin_assign(s->root);
  sp_func *fn = &sp->funcs[i];
  fn->index = s->index;
  fn->src_line = s->ast->loc.line;
  fn->lhs_tensor = asg->lhs_tensor;
  fn->var0 = sp->nvars;
  fn->nvars = ls->lidx_var0 + ls->nloops;
  fn->nargs = fn->nvars + 1;
  /* variables */
  sp_var *nv = ir_reserve(sp->vars, sp->nvars, sp->nvars + fn->nvars + 1, &sp->vars_cap, sizeof *nv);
  for (int v = 0; v < fn->nvars; v++) {
    sp_var *x = &nv[sp->nvars + v];
    x->func = i, x->arg = v;
    if (v < s->nvars) x->name = s->vars[v].name, x->kind = SV_INDEX;
    else if (v >= ls->lidx_var0) x->name = s->vars[ls->loops[v - ls->lidx_var0]->var].name, x->kind = SV_LOCAL;
    else x->name = "", x->kind = SV_INDEX;
  }
  sp->vars = nv;
  sp->nvars += fn->nvars;
  /* text: the statement and its concrete index notation */
  {
    char *b = NULL;
    size_t bl = 0;
    FILE *m = open_memstream(&b, &bl);
    fputs(p->tensors[asg->lhs_tensor].name, m);
    if (asg->nlhs) {
      fputc('(', m);
      for (int k = 0; k < asg->nlhs; k++) fprintf(m, "%s%s", k ? "," : "", s->vars[asg->lhs_vars[k]].name);
      fputc(')', m);
    }
    fputs(s->ast->subtract ? " -= " : asg->accumulate ? " += " : " = ", m);
    fe_print_expr(m, s->ast->rhs);
    fclose(m);
    fn->text = ir_strdup(b);
    free(b);
    b = NULL;
    m = open_memstream(&b, &bl);
    ir_print_cin(m, lp->ir, s);
    fclose(m);
    fn->cin = ir_strdup(b);
    free(b);
  }
  /* buffers: one per communication point, two slots each */
  bst g = {.sp = sp, .lp = lp, .ls = ls, .fn = fn, .kdepth = ls->kernel_depth};
  g.comm_buf = ir_alloc((ls->ncomm + 1) * sizeof *g.comm_buf);
  g.bound = ir_alloc((s->nvars + 1) * sizeof *g.bound);
  g.mapped = ir_alloc((ls->nloops + 1) * sizeof *g.mapped);
  sp_buf *nb = ir_reserve(sp->bufs, sp->nbufs, sp->nbufs + ls->ncomm + 1, &sp->bufs_cap, sizeof *nb);
  fn->bufs = ir_alloc((ls->ncomm + 1) * sizeof *fn->bufs);
  int nfn = 0;
  for (int q = 0; q < ls->ncomm; q++) {
    const lw_comm *c = &ls->comm[q];
    sp_buf *b = &nb[sp->nbufs];
    b->id = sp->nbufs, b->func = i, b->tensor = c->tensor, b->comm = q, b->output = c->output;
    b->snapshot = !c->output && c->tensor == asg->lhs_tensor;
    b->slot = *slot;
    *slot += 2;
    b->order = c->order;
    for (int x = 0; x < c->order; x++) b->lo[x] = sym_shift_vars(c->lo[x], fn->var0), b->hi[x] = sym_shift_vars(c->hi[x], fn->var0);
    b->boxfn = c->pattern == PAT_EXCHANGE || c->pattern == PAT_SHIFT ? q : -1;
    g.comm_buf[q] = b->id;
    fn->bufs[nfn++] = b->id;
    sp->nbufs++;
  }
  sp->bufs = nb;
  fn->nbufs = nfn;
  /* the serial reference: the statement as written (workspaces expanded), original loops */
  fn->accumulate = asg->accumulate;
  fn->distinct_writes = !asg->reduces && ls->nwhere == 0;
  for (int x = 0; x < asg->nlhs; x++)
    for (int y = 0; y < x; y++) fn->distinct_writes &= asg->lhs_vars[x] != asg->lhs_vars[y];
  fn->flops = count_ops(ls->rhs) + (asg->reduces || asg->accumulate ? 1 : 0);
  {
    int *rv = ir_alloc((s->nvars + 1) * sizeof *rv), nr = 0;
    const sym **re = ir_alloc((s->nvars + 1) * sizeof *re);
    for (int v = 0; v < s->nvars; v++)
      if (s->vars[v].original) re[nr] = R(&g, s->vars[v].extent), rv[nr++] = V(&g, v);
    fn->nref = nr, fn->ref_vars = rv, fn->ref_ext = re;
    const sym **rd = ir_alloc((s->nvars + 1) * sizeof *rd);
    for (int v = 0; v < s->nvars; v++)
      if (s->vars[v].original && s->vars[v].reduction) rd[fn->nred++] = s->vars[v].extent;
    fn->red_ext = rd;
    fn->ref_lhs = lhs_expr(&g);
    fn->ref_rhs = expr(&g, ls->rhs);
  }
  int cap = 0;
  collect_sparse(&g, asg->rhs, asg->rhs, &cap);
  /* a kernel's scalar (axpy's a, the coefficient of a scaled product) is computed on the
   * host: when it reads a tensor (device memory) the loops become a kernel of their own
   * instead */
  if (sp->cuda && g.kdepth >= 0) {
    const kc_info *in = kc_get(ls->loops[g.kdepth]->kernel);
    int tensors = 0;
    for (int q = 1; in && q < in->noperands; q++) tensors += in->op[q].role != KC_SCALAR;
    if (count_access(asg->rhs) > tensors) g.kdepth = -1;
  }
  sp_node *body = sp_new(SN_SEQ);
  fn->body = body;
  for (int q = 0; q < ls->ncomm; q++) {
    sp_node *d = init_node(SI_DECLARE);
    d->buf = g.comm_buf[q];
    sp_add(body, d);
  }
  if (ls->lhs_on_rhs) {
    sp_node *n = init_node(SI_SNAPSHOT);
    n->tensor = asg->lhs_tensor, n->slot = (*slot)++;
    n->comment = "the output is also read: read the values it had before this statement";
    sp_add(body, n);
  }
  for (int w = 0; w < ls->nwhere; w++) {
    const cin_node *pr = ls->where[w]->producer;
    void *nw = ir_alloc((sp->nworks + 1) * sizeof *sp->works);
    if (sp->nworks) memcpy(nw, sp->works, sp->nworks * sizeof *sp->works);
    sp->works = nw;
    sp->works[sp->nworks].name = s->work[ls->where[w]->workspace - p->ntensors].name;
    sp->works[sp->nworks].func = i;
    sp->works[sp->nworks].type = p->tensors[asg->lhs_tensor].type;
    sp_node *n = init_node(SI_WORKSPACE);
    n->work = sp->nworks++;
    n->var = V(&g, pr->var);
    n->extent = R(&g, s->vars[pr->var].extent);
    n->slot = (*slot)++;
    sp_add(body, n);
  }
  if (!asg->accumulate) {
    sp_node *n = init_node(lw_sparse(p, asg->lhs_tensor) ? SI_EMPTY : SI_ZERO);
    n->tensor = asg->lhs_tensor;
    sp_add(body, n);
  }
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].pattern == PAT_LOCAL) {
      sp_node *v = comm_node(&g, SC_VIEW, q, &ls->comm[q]);
      v->tensor = ls->comm[q].tensor;
      sp_add(body, v);
    }
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].depth == -1) comm_in(&g, body, q);
  level(&g, body, 0);
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].depth == -1) comm_out(&g, body, q);
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].output && ls->comm[q].pattern == PAT_LOCAL && lw_sparse(p, ls->comm[q].tensor)) {
      sp_node *m = comm_node(&g, SC_SPARSE_MERGE, q, &ls->comm[q]);
      m->tensor = ls->comm[q].tensor;
      sp_add(body, m);
    }
}

static const char *dist_text(const fe_program *p, const fe_tensor *ft) {
  if (!ft->has_dist) return NULL;
  char *b = NULL;
  size_t bl = 0;
  FILE *m = open_memstream(&b, &bl);
  const fe_dist_level *L = &ft->dist.levels[0];
  fputs(p->machines[ft->dist.machine].name, m);
  fputc('(', m);
  for (int x = 0; x < L->nx; x++) fprintf(m, "%s%s", x ? "," : "", L->x[x]);
  fputs(" -> ", m);
  for (int y = 0; y < L->ny; y++) {
    if (y) fputc(',', m);
    if (L->y[y].kind == FE_Y_STAR) fputc('*', m);
    else if (L->y[y].kind == FE_Y_FIXED) fprintf(m, "%lld", (long long)L->y[y].fixed);
    else fputs(L->y[y].name, m);
  }
  fputc(')', m);
  if (ft->balanced) fprintf(m, " balanced%s%s", ft->balance_by ? " by " : "", ft->balance_by ? ft->balance_by : "");
  fclose(m);
  const char *r = ir_strdup(b);
  free(b);
  return r;
}

/* ---- the program's control structure ------------------------------------------------------ */
/* A loop's condition as an expression of the SPMD program; reads collects the scalars. */
static sp_expr *cond_expr(const fe_expr *e, int *reads, int *nreads) {
  sp_expr *x = ir_alloc(sizeof *x);
  x->buf = x->work = x->sparse = x->tensor = -1;
  static const sp_expr_kind kinds[] = {[FE_E_ADD] = SE_ADD, [FE_E_SUB] = SE_SUB, [FE_E_MUL] = SE_MUL, [FE_E_DIV] = SE_DIV,
                                       [FE_E_NEG] = SE_NEG, [FE_E_CALL] = SE_CALL, [FE_E_PARAM] = SE_PARAM,
                                       [FE_E_LT] = SE_LT,   [FE_E_LE] = SE_LE,     [FE_E_GT] = SE_GT,
                                       [FE_E_GE] = SE_GE,   [FE_E_EQ] = SE_EQ,     [FE_E_NE] = SE_NE,
                                       [FE_E_AND] = SE_AND, [FE_E_OR] = SE_OR,     [FE_E_NOT] = SE_NOT};
  switch (e->kind) {
  case FE_E_ACCESS: {
    x->kind = SE_ACCESS, x->tensor = e->acc.tensor;
    bool seen = false;
    for (int k = 0; k < *nreads; k++) seen |= reads[k] == e->acc.tensor;
    if (!seen) reads[(*nreads)++] = e->acc.tensor;
    return x;
  }
  case FE_E_NUM:
    x->kind = SE_NUM, x->num = e->num, x->is_int = e->is_int, x->ival = e->ival, x->text = e->text;
    return x;
  default:
    x->kind = kinds[e->kind];
    x->param = e->param, x->func = e->func;
    if (e->a) x->a = cond_expr(e->a, reads, nreads);
    if (e->b) x->b = cond_expr(e->b, reads, nreads);
    return x;
  }
}

static int count_accesses(const fe_expr *e) {
  return !e ? 0 : (e->kind == FE_E_ACCESS) + count_accesses(e->a) + count_accesses(e->b);
}

static sp_item *build_items(sp_program *sp, const fe_program *p, const fe_item *list, int n, int *nout) {
  sp_item *out = ir_alloc((n + 1) * sizeof *out);
  *nout = n;
  for (int k = 0; k < n; k++) {
    const fe_item *it = &list[k];
    sp_item *x = &out[k];
    if (it->kind == FE_ITEM_STMT) {
      x->kind = SP_CALL, x->func = it->stmt;
      continue;
    }
    x->kind = SP_REPEAT;
    x->bound = sym_from_size(&it->bound);
    x->number = it->number, x->src_line = it->loc.line;
    if (it->cond) {
      int *reads = ir_alloc((count_accesses(it->cond) + 1) * sizeof *reads);
      x->cond = cond_expr(it->cond, reads, &x->nreads);
      x->reads = reads;
      char *b = NULL;
      size_t bl = 0;
      FILE *m = open_memstream(&b, &bl);
      if (m) {
        fe_print_expr(m, it->cond);
        fclose(m);
        x->cond_text = ir_strdup(b);
      }
      free(b);
    }
    x->items = build_items(sp, p, it->items, it->nitems, &x->nitems);
  }
  return out;
}

sp_program *spmd_build(const lw_program *lp) { return spmd_build_ex(lp, true); }

sp_program *spmd_build_ex(const lw_program *lp, bool fuse) {
  const fe_program *p = lp->ir->ast;
  sp_program *sp = ir_alloc(sizeof *sp);
  sp->lp = lp;
  sp->fuse = fuse;
  sp->cuda = lp->cuda;
  sp->ntensors = p->ntensors, sp->nparams = p->nparams;
  sp->params = ir_alloc((p->nparams + 1) * sizeof *sp->params);
  for (int i = 0; i < p->nparams; i++)
    sp->params[i] = (sp_param){p->params[i].name, p->params[i].has_default, p->params[i].is_grid, p->params[i].value,
                               p->params[i].is_float, p->params[i].fvalue};
  sp->ndims = lp->ndims, sp->nlevels = lp->nlevels, sp->level_off = lp->level_off, sp->dims = lp->dims;
  sp->has_machine = lp->ir->machine >= 0;
  sp->facts = (sym_facts){.ndims = lp->ndims, .dims = lp->dims};
  for (int t = 0; t < p->ntensors; t++) sp->any_sparse |= lw_sparse(p, t);
  sp->tensors = ir_alloc((p->ntensors + 1) * sizeof *sp->tensors);
  for (int t = 0; t < p->ntensors; t++) {
    const fe_tensor *ft = &p->tensors[t];
    sp_tensor *x = &sp->tensors[t];
    x->name = ft->name, x->type = ft->type, x->order = ft->order;
    for (int d = 0; d < ft->order && d < LW_MAX_DIMS; d++) x->ext[d] = sym_from_size(&ft->dims[d]);
    x->sparse = lw_sparse(p, t);
    for (int i = 0; i < lp->nstmts; i++) x->written |= cin_assign(lp->stmts[i].s->root)->lhs_tensor == t;
    for (int d = 0; d < ft->order && d < LW_MAX_DIMS; d++) x->compressed[d] = ft->formats[d] == FE_COMPRESSED;
    x->owner = &lp->owner[t];
    x->dist_text = dist_text(p, ft);
    x->temp = ft->is_temp;
    x->mode = ft->mode;
    x->balanced = ft->balance == t + 1;
    for (int g = 0; g < LW_MAX_DIMS; g++) x->split[g] = g < lp->ndims ? fe_split_of(p, t, g) : -1;
  }
  sp->nsplits = fe_nsplits(p);
  sp->splits = ir_alloc((sp->nsplits + 1) * sizeof *sp->splits);
  for (int k = 0; k < sp->nsplits; k++) {
    sp_split *x = &sp->splits[k];
    fe_split_info(p, k, &x->tensor, &x->gdim, &x->tdim);
    x->extent = sym_from_size(&p->tensors[x->tensor].dims[x->tdim]);
  }
  sp->nfuncs = lp->nstmts;
  sp->funcs = ir_alloc((lp->nstmts + 1) * sizeof *sp->funcs);
  int slot = 0;
  for (int i = 0; i < lp->nstmts; i++) build_stmt(sp, lp, i, &slot);
  sp->nslots = slot + 1;
  for (int i = 0; i < sp->nfuncs; i++) sp->funcs[i].fused_into = -1;
  sp->nloops = p->nloops;
  sp->items = build_items(sp, p, p->items, p->nitems, &sp->nitems);
  spmd_rewrite(sp);
  spmd_fuse(sp);
  spmd_simd(sp);
  spmd_threads(sp);
  spmd_prefetch(sp);
  spmd_gather(sp);
  spmd_hoist(sp);
  spmd_jam(sp);
  spmd_sums(sp);
  spmd_strips(sp);
  spmd_store_strips(sp);
  spmd_index_width(sp);
  spmd_clones(sp);
  return sp;
}

/* ---- index width (spmd.h, spmd_index_width) ----------------------------------------------- */
static bool width_local(const sp_node *n) {
  if (!n) return true;
  switch (n->kind) {
  case SN_COMM:
  case SN_INIT:
  case SN_DEVICE:
  case SN_WIDTH: return false;
  default: break;
  }
  for (int q = 0; q < n->nkids; q++)
    if (!width_local(n->kids[q])) return false;
  return true;
}

/* the sparse tensors whose index arrays the subtree reads, added to t[0..*nt) */
static void width_reads(const sp_node *n, int *t, int *nt) {
  if (!n) return;
  if ((n->kind == SN_LOOP && n->loop == SL_SPARSE) || (n->kind == SN_SPPOS && n->compressed)) {
    for (int u = 0; u < (n->nunion ? n->nunion : 1); u++) {
      int x = n->nunion ? n->union_tensor[u] : n->tensor;
      bool seen = false;
      for (int q = 0; q < *nt; q++) seen |= t[q] == x;
      if (!seen) t[(*nt)++] = x;
    }
  }
  for (int q = 0; q < n->nkids; q++) width_reads(n->kids[q], t, nt);
}

/* declares a name that later siblings read (an index variable, a position, a register) */
static bool width_declares(const sp_node *n) {
  return n && (n->kind == SN_BIND || n->kind == SN_SPPOS || n->kind == SN_REGISTER);
}

static void width_log(sp_program *sp, const sp_func *fn, const int *t, int nt, const char *why) {
  char names[256] = "";
  for (int i = 0; i < nt; i++)
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", sp->tensors[t[i]].name);
  sp_logf(sp, "width", why, "statement %d: the loops over the stored coordinates of %s", fn->index + 1, names);
}

/* Kids of a sequence (any node but SN_IF, whose kids are branches): a run of local kids from
 * the first that reads index arrays is wrapped as one, so that the names its kids declare
 * stay visible to the rest of the run. */
static void width_walk(sp_program *sp, const sp_func *fn, sp_node *n) {
  for (int q = 0; q < n->nkids; q++) {
    sp_node *k = n->kids[q];
    if (!k) continue;
    int *t = ir_alloc((sp->ntensors + 1) * sizeof *t), nt = 0;
    width_reads(k, t, &nt);
    if (!nt) continue;
    if (!width_local(k)) {
      width_walk(sp, fn, k);
      continue;
    }
    int r = q;
    if (n->kind != SN_IF)
      while (r + 1 < n->nkids && width_local(n->kids[r + 1])) r++;
    bool declares = false;
    for (int i = q; i <= r; i++) {
      declares |= width_declares(n->kids[i]);
      width_reads(n->kids[i], t, &nt);
    }
    if (declares && r + 1 < n->nkids && n->kind != SN_IF) {
      /* a later communication or setup may read what the run declares */
      width_log(sp, fn, t, nt, "the run declares names that a later communication may read: each entry's width is tested");
      q = r;
      continue;
    }
    sp_node *w = sp_new(SN_WIDTH), *body = k;
    w->nwidth = nt, w->width_tensors = t;
    if (r > q) {
      body = sp_new(SN_SEQ);
      for (int i = q; i <= r; i++) sp_add(body, n->kids[i]);
    }
    sp_add(w, body);
    n->kids[q] = w;
    memmove(n->kids + q + 1, n->kids + r + 1, (size_t)(n->nkids - r - 1) * sizeof *n->kids);
    n->nkids -= r - q;
    width_log(sp, fn, t, nt, NULL);
  }
}

void spmd_index_width(sp_program *sp) {
  for (int i = 0; i < sp->nfuncs; i++)
    if (sp->funcs[i].body) width_walk(sp, &sp->funcs[i], sp->funcs[i].body);
}

/* ---- SIMD register sums (spmd.h: spmd_simd) ------------------------------------------------ */
static bool simd_body(const sp_node *n) {
  if (!n) return true;
  switch (n->kind) {
  case SN_SEQ: break;
  case SN_BIND: return true;
  case SN_GUARD: if (n->halo_guard) return false; break;
  case SN_ASSIGN: return n->to_acc && !n->atomic;
  default: return false;
  }
  for (int q = 0; q < n->nkids; q++)
    if (!simd_body(n->kids[q])) return false;
  return true;
}

static sp_node *simd_loop(sp_node *acc) {
  sp_node *l = acc;
  do l = l->nkids == 1 ? l->kids[0] : NULL;
  while (l && l->kind == SN_SEQ);
  return l;
}

static const char *simd_why(sp_node *acc) {
  const sp_node *l = simd_loop(acc);
  if (!l || l->kind != SN_LOOP) return "the register's sum is not one loop";
  if (l->loop == SL_SPARSE) return "the loop reads at stored coordinates (a gather, as fast in one lane)";
  if (l->loop != SL_LOCAL) return "the loop is not over a local range";
  if (l->par != PAR_NONE) return "the loop runs in threads or lanes already";
  for (int q = 0; q < l->nkids; q++)
    if (!simd_body(l->kids[q])) return "its body does more than add to the register";
  return NULL;
}

static void simd_walk(sp_program *sp, const sp_func *fn, sp_node *n) {
  if (!n) return;
  if (n->kind == SN_ACC) {
    const char *why = simd_why(n);
    if (!why) simd_loop(n)->simd_sum = true;
    int t = n->lhs && n->lhs->tensor >= 0 && n->lhs->tensor < sp->ntensors ? n->lhs->tensor : -1;
    sp_logf(sp, "simd", why, "statement %d, the sum into %s", fn->index + 1, t >= 0 ? sp->tensors[t].name : "a workspace");
    return;
  }
  for (int q = 0; q < n->nkids; q++) simd_walk(sp, fn, n->kids[q]);
}

void spmd_simd(sp_program *sp) {
  for (int i = 0; i < sp->nfuncs; i++)
    if (sp->funcs[i].body) simd_walk(sp, &sp->funcs[i], sp->funcs[i].body);
}

/* ---- helpers of the leaf-loop passes (prefetch, hoist, clones, threads) -------------------- */
/* the function runs its own body (not fused into another statement's, not removed) */
static bool fn_runs(const sp_func *fn) {
  return fn->body && fn->fused_into < 0 && !fn->removed;
}

/* the variables bound in n (a loop's own and those bound inside it) move with it */
static void bound_in(const sp_node *n, bool *moving, int nvars) {
  if (!n) return;
  if ((n->kind == SN_LOOP || n->kind == SN_BIND) && n->var >= 0 && n->var < nvars) moving[n->var] = true;
  for (int q = 0; q < n->nkids; q++) bound_in(n->kids[q], moving, nvars);
}

static bool has_loop(const sp_node *n) {
  if (!n) return false;
  if (n->kind == SN_LOOP) return true;
  for (int q = 0; q < n->nkids; q++)
    if (has_loop(n->kids[q])) return true;
  return false;
}

/* a loop with no loop inside it */
static bool innermost(const sp_node *n) {
  for (int q = 0; q < n->nkids; q++)
    if (has_loop(n->kids[q])) return false;
  return true;
}

/* ---- prefetch for the leaf loops over stored coordinates (spmd.h: spmd_prefetch) ----------- */
/* the body of a leaf loop: bindings, guards, positions, sums and assignments (no loop, kernel,
 * communication or sparse result); why says what else it holds */
static bool pf_leaf(const sp_node *n, const char **why) {
  if (!n) return true;
  switch (n->kind) {
  case SN_SEQ: case SN_BIND: case SN_GUARD: case SN_SPPOS: case SN_ACC: case SN_REGISTER: break;
  case SN_ASSIGN:
    if (n->to_entries) return *why = "it appends to a sparse result", false;
    break;
  case SN_LOOP: return *why = "a loop runs inside it", false;
  default: return *why = "it does more than compute (a kernel, communication or setup)", false;
  }
  for (int q = 0; q < n->nkids; q++)
    if (!pf_leaf(n->kids[q], why)) return false;
  return true;
}

static void pf_walk(sp_program *sp, sp_node *n, int *seen, int *done, const char **why) {
  if (!n || n->kind == SN_DEVICE || n->kind == SN_KERNEL || n->kind == SN_PRODUCER) return;
  if (n->kind == SN_LOOP && n->loop == SL_SPARSE && !n->nunion) {
    ++*seen;
    const char *w = NULL;
    bool leaf = true;
    for (int q = 0; q < n->nkids && leaf; q++) leaf = pf_leaf(n->kids[q], &w);
    if (leaf) {
      n->prefetch = true, ++*done;
      return;
    }
    if (!*why) *why = w;
  }
  for (int q = 0; q < n->nkids; q++) pf_walk(sp, n->kids[q], seen, done, why);
}

void spmd_prefetch(sp_program *sp) {
  if (sp->cuda) return;
  for (int i = 0; i < sp->nfuncs; i++) {
    sp_func *fn = &sp->funcs[i];
    if (!fn_runs(fn)) continue;
    int seen = 0, done = 0;
    const char *why = NULL;
    pf_walk(sp, fn->body, &seen, &done, &why);
    if (!seen) continue; /* no loop over stored coordinates: nothing to say */
    if (done)
      sp_logf(sp, "prefetch", NULL, "statement %d: %d loop%s over stored coordinates", fn->index + 1, done, done == 1 ? "" : "s");
    else
      sp_logf(sp, "prefetch", why ? why : "no loop over stored coordinates is a leaf", "statement %d", fn->index + 1);
  }
}

/* ---- rows gathered ahead by loops over stored coordinates (spmd.h: spmd_gather) ----------- */
#define GA_MAX 8
typedef struct {
  const sp_program *sp;
  const sp_node *L;
  bool *inside;         /* vars bound inside L, its own included */
  const sp_node **local; /* per var: the local loop inside L that binds it (NULL: none) */
  const sp_expr *out[GA_MAX];
  unsigned inner[GA_MAX];
  const sym *len[GA_MAX];
  int n;
  bool single; /* an element, not a row, read or written at L's coordinate */
} ga_st;

/* L's body holds only loops, bindings, guards, positions, sums and assignments */
static bool ga_body(const sp_node *n, ga_st *s, const char **why) {
  if (!n) return true;
  switch (n->kind) {
  case SN_SEQ: case SN_BIND: case SN_GUARD: case SN_IF: case SN_SPPOS: case SN_ACC: case SN_REGISTER: case SN_ASSIGN: break;
  case SN_LOOP:
    if (n->loop != SL_LOCAL && n->loop != SL_SPARSE) return *why = "a loop of another kind runs inside it", false;
    if (n->loop == SL_LOCAL && n->var >= 0 && n->var < s->sp->nvars) s->local[n->var] = n;
    break;
  default: return *why = "it does more than compute (a kernel, communication or setup)", false;
  }
  for (int q = 0; q < n->nkids; q++)
    if (!ga_body(n->kids[q], s, why)) return false;
  return true;
}

/* no variable bound inside L in e */
static bool ga_outside(const ga_st *s, const sym *e) {
  for (int v = 0; v < s->sp->nvars; v++)
    if (s->inside[v] && sym_uses(e, SYM_VAR, v)) return false;
  return true;
}

static void ga_take(ga_st *s, const sp_expr *e) {
  const sp_program *sp = s->sp;
  if (e->contracted || e->work >= 0 || e->sparse >= 0 || e->buf < 0 || e->buf >= sp->nbufs || !e->nidx) return;
  int t = sp->bufs[e->buf].tensor;
  if (t < 0 || t >= sp->lp->ir->ast->ntensors || lw_sparse(sp->lp->ir->ast, t)) return; /* no dense rows */
  bool at = false;
  unsigned inner = 0;
  for (int x = 0; x < e->nidx; x++) {
    int v = e->vars[x];
    if (v < 0 || v >= sp->nvars) return;
    if (v == s->L->var) at = true;
    else if (s->local[v]) inner |= 1u << x;
    else if (s->inside[v]) return; /* bound inside L otherwise: its first value is not known */
  }
  if (!at) return;
  /* a row: the last index bound by a local loop inside, whose bound is known before L */
  const sym *len = inner >> (e->nidx - 1) & 1 ? s->local[e->vars[e->nidx - 1]]->hi : NULL;
  if (!len || !ga_outside(s, len)) {
    s->single = true;
    return;
  }
  for (int u = 0; u < s->n; u++)
    if (s->out[u]->buf == e->buf && !memcmp(s->out[u]->vars, e->vars, (size_t)e->nidx * sizeof *e->vars)) return;
  if (s->n == GA_MAX) return;
  s->out[s->n] = e, s->inner[s->n] = inner, s->len[s->n++] = len;
}

static void ga_expr(ga_st *s, const sp_expr *e) {
  if (!e) return;
  if (e->kind == SE_ACCESS) {
    ga_take(s, e);
    return;
  }
  ga_expr(s, e->a);
  ga_expr(s, e->b);
}

static void ga_collect(ga_st *s, const sp_node *n) {
  if (!n) return;
  if (n->kind == SN_ASSIGN) {
    ga_expr(s, n->rhs);
    if (n->lhs && !n->to_acc && !n->to_entries) ga_take(s, n->lhs);
  }
  if (n->kind == SN_ACC && n->lhs) ga_take(s, n->lhs);
  for (int q = 0; q < n->nkids; q++) ga_collect(s, n->kids[q]);
}

static int ga_walk(sp_program *sp, sp_node *n, int *seen, const char **why) {
  if (!n || n->kind == SN_DEVICE || n->kind == SN_KERNEL || n->kind == SN_PRODUCER) return 0;
  int done = 0;
  if (n->kind == SN_LOOP && n->loop == SL_SPARSE && !n->nunion) {
    ++*seen;
    ga_st s = {.sp = sp, .L = n};
    s.inside = calloc((size_t)sp->nvars + 1, sizeof *s.inside);
    s.local = calloc((size_t)sp->nvars + 1, sizeof *s.local);
    const char *w = NULL;
    bool ok = true;
    for (int q = 0; q < n->nkids && ok; q++) ok = ga_body(n->kids[q], &s, &w);
    if (ok) {
      bound_in(n, s.inside, sp->nvars);
      ga_collect(&s, n);
      if (s.n) {
        n->gather = ir_alloc((size_t)s.n * sizeof *n->gather);
        unsigned *in = ir_alloc((size_t)s.n * sizeof *in);
        const sym **len = ir_alloc((size_t)s.n * sizeof *len);
        memcpy(n->gather, s.out, (size_t)s.n * sizeof *s.out);
        memcpy(in, s.inner, (size_t)s.n * sizeof *in);
        memcpy(len, s.len, (size_t)s.n * sizeof *len);
        n->gather_inner = in, n->gather_len = len, n->ngather = s.n, done = s.n;
      } else if (!*why) {
        *why = s.single ? "it reads single elements at the loop's coordinate (no row), which the processor runs ahead to by itself"
                        : "no dense element is read or written at the loop's coordinate";
      }
    } else if (!*why) {
      *why = w;
    }
    free(s.inside), free(s.local);
  }
  for (int q = 0; q < n->nkids; q++) done += ga_walk(sp, n->kids[q], seen, why);
  return done;
}

void spmd_gather(sp_program *sp) {
  if (sp->cuda) return;
  for (int i = 0; i < sp->nfuncs; i++) {
    sp_func *fn = &sp->funcs[i];
    if (!fn_runs(fn)) continue;
    int seen = 0;
    const char *why = NULL;
    int done = ga_walk(sp, fn->body, &seen, &why);
    if (!seen) continue; /* no loop over stored coordinates: nothing to say */
    if (done)
      sp_logf(sp, "gather", NULL, "statement %d: %d row%s gathered at stored coordinates, fetched ahead where scattered",
              fn->index + 1, done, done == 1 ? "" : "s");
    else
      sp_logf(sp, "gather", why, "statement %d", fn->index + 1);
  }
}

/* ---- operands read once before the innermost loop (spmd.h: spmd_hoist) --------------------- */

/* the loop's body only binds and assigns; writes[t]: tensor t is assigned */
static bool ho_body(const sp_node *n, bool *writes, int nt) {
  if (!n) return true;
  switch (n->kind) {
  case SN_SEQ: case SN_BIND: break;
  case SN_ASSIGN:
    if (n->to_entries || n->atomic || !n->lhs) return false;
    if (n->lhs->tensor >= 0 && n->lhs->tensor < nt) writes[n->lhs->tensor] = true;
    else if (!n->to_acc) return false;
    break;
  default: return false;
  }
  for (int q = 0; q < n->nkids; q++)
    if (!ho_body(n->kids[q], writes, nt)) return false;
  return true;
}

static void ho_collect(const sp_program *sp, const sp_expr *e, const bool *moving, const bool *writes, const sp_expr **out,
                       int *n) {
  if (!e || e->nguards) return;
  if (e->kind == SE_ACCESS) {
    if (e->contracted || e->work >= 0 || (e->buf < 0 && e->sparse < 0) || e->tensor < 0 || e->tensor >= sp->ntensors ||
        writes[e->tensor])
      return;
    for (int k = 0; k < e->nidx; k++)
      if (e->vars[k] < 0 || e->vars[k] >= sp->nvars || moving[e->vars[k]]) return;
    for (int q = 0; q < *n; q++)
      if (out[q] == e) return;
    if (*n < 16) out[(*n)++] = e;
    return;
  }
  ho_collect(sp, e->a, moving, writes, out, n);
  ho_collect(sp, e->b, moving, writes, out, n);
}

static void ho_rhs(const sp_program *sp, const sp_node *n, const bool *moving, const bool *writes, const sp_expr **out,
                   int *k) {
  if (!n) return;
  if (n->kind == SN_ASSIGN) ho_collect(sp, n->rhs, moving, writes, out, k);
  for (int q = 0; q < n->nkids; q++) ho_rhs(sp, n->kids[q], moving, writes, out, k);
}

static int ho_walk(sp_program *sp, sp_node *n) {
  if (!n || n->kind == SN_KERNEL || n->kind == SN_DEVICE || n->kind == SN_PRODUCER) return 0;
  int done = 0;
  if (n->kind == SN_LOOP && n->loop == SL_LOCAL && innermost(n)) {
    bool *writes = calloc((size_t)sp->ntensors + 1, sizeof *writes);
    bool *moving = calloc((size_t)sp->nvars + 1, sizeof *moving);
    bool ok = true;
    for (int q = 0; q < n->nkids && ok; q++) ok = ho_body(n->kids[q], writes, sp->ntensors);
    if (ok) {
      bound_in(n, moving, sp->nvars);
      const sp_expr *out[16];
      int k = 0;
      ho_rhs(sp, n, moving, writes, out, &k);
      if (k) {
        n->hoist = ir_alloc((size_t)k * sizeof *n->hoist);
        memcpy(n->hoist, out, (size_t)k * sizeof *out);
        n->nhoist = k, done = k;
      }
    }
    free(writes), free(moving);
    return done;
  }
  for (int q = 0; q < n->nkids; q++) done += ho_walk(sp, n->kids[q]);
  return done;
}

void spmd_hoist(sp_program *sp) {
  if (sp->cuda) return;
  for (int i = 0; i < sp->nfuncs; i++) {
    sp_func *fn = &sp->funcs[i];
    if (!fn_runs(fn)) continue;
    int k = ho_walk(sp, fn->body);
    if (k) sp_logf(sp, "hoist", NULL, "statement %d: %d operand%s of innermost loops read once before them", fn->index + 1, k,
                   k == 1 ? "" : "s");
  }
}

/* ---- register sums of several rows at once (spmd.h: spmd_jam) ------------------------------ */
/* The nodes of L's body in order, sequences flattened (at most max in out); -1 where more. */
static int flat_body(const sp_node *L, const sp_node **out, int max) {
  const sp_node *stack[64];
  int top = 0, n = 0;
  for (int q = L->nkids - 1; q >= 0; q--)
    if (L->kids[q]) {
      if (top == 64) return -1;
      stack[top++] = L->kids[q];
    }
  while (top) {
    const sp_node *k = stack[--top];
    if (k->kind == SN_SEQ) {
      for (int q = k->nkids - 1; q >= 0; q--)
        if (k->kids[q]) {
          if (top == 64) return -1;
          stack[top++] = k->kids[q];
        }
      continue;
    }
    if (n == max) return -1;
    out[n++] = k;
  }
  return n;
}

/* The body of L as a list (sequences flattened): bindings, then the register sum; NULL where
 * it holds anything else.  *nb: the bindings. */
const sp_node *spmd_jam_parts(const sp_node *L, const sp_node **binds, int *nb) {
  const sp_node *body[17];
  int n = flat_body(L, body, 17);
  *nb = 0;
  if (n < 1 || body[n - 1]->kind != SN_ACC) return NULL;
  for (int q = 0; q + 1 < n; q++) {
    if (body[q]->kind != SN_BIND) return NULL;
    binds[(*nb)++] = body[q];
  }
  return body[n - 1];
}

/* the inner loop's body only binds and adds to the register */
static bool jam_body(const sp_node *n) {
  if (!n) return true;
  switch (n->kind) {
  case SN_SEQ: case SN_BIND: break;
  case SN_ASSIGN: if (!n->to_acc || n->atomic || n->to_entries) return false; break;
  default: return false;
  }
  for (int q = 0; q < n->nkids; q++)
    if (!jam_body(n->kids[q])) return false;
  return true;
}

/* e reads tensor t other than through a snapshot taken before the loops */
static bool jam_reads(const sp_program *sp, const sp_expr *e, int t) {
  if (!e) return false;
  if (e->kind == SE_ACCESS) {
    if (e->tensor == t && !(e->buf >= 0 && e->buf < sp->nbufs && sp->bufs[e->buf].snapshot)) return true;
    return false;
  }
  return jam_reads(sp, e->a, t) || jam_reads(sp, e->b, t);
}

static bool jam_reads_node(const sp_program *sp, const sp_node *n, int t) {
  if (!n) return false;
  if (n->kind == SN_ASSIGN && jam_reads(sp, n->rhs, t)) return true;
  for (int q = 0; q < n->nkids; q++)
    if (jam_reads_node(sp, n->kids[q], t)) return true;
  return false;
}

/* NULL where the rewrite applies to L, else why not */
static const char *jam_why(const sp_program *sp, const sp_node *L) {
  if (L->par != PAR_NONE) return "the loop runs in threads or lanes already";
  if (L->threads_sum) return "the loop sums an enclosing register in threads";
  const sp_node *binds[16];
  int nb;
  const sp_node *acc = spmd_jam_parts(L, binds, &nb);
  if (!acc) return "its body does more than bind index values and sum into a register";
  if (acc->to_entries || acc->atomic || !acc->lhs || acc->lhs->contracted || acc->lhs->buf < 0)
    return "the sum goes to a sparse result, a temporary or an atomic update";
  const sp_node *I = acc;
  do I = I->nkids == 1 ? I->kids[0] : NULL;
  while (I && I->kind == SN_SEQ);
  if (!I || I->kind != SN_LOOP || !I->simd_sum) return "the register's sum is not a SIMD sum";
  if (I->nhoist) return "its inner loop reads operands once before it";
  if (I->par != PAR_NONE || I->threads) return "its inner loop runs in threads or lanes";
  for (int q = 0; q < I->nkids; q++)
    if (!jam_body(I->kids[q])) return "its inner loop skips iterations or does more than add to the register";
  if (sym_uses(I->hi, SYM_VAR, L->var)) return "its inner loop's bound changes with the row";
  for (int b = 0; b < nb; b++)
    if (sym_uses(I->hi, SYM_VAR, binds[b]->var)) return "its inner loop's bound changes with the row";
  if (jam_reads_node(sp, I, acc->lhs->tensor)) return "the sum reads the tensor it writes";
  return NULL;
}

static void jam_walk(sp_program *sp, const sp_func *fn, sp_node *n) {
  if (!n || n->kind == SN_KERNEL || n->kind == SN_DEVICE || n->kind == SN_PRODUCER) return;
  if (n->kind == SN_LOOP && (n->loop == SL_LOCAL || n->loop == SL_LOCAL_BLOCK)) {
    const sp_node *binds[16];
    int nb;
    if (spmd_jam_parts(n, binds, &nb)) { /* a loop of register sums: the rewrite's candidate */
      const char *why = jam_why(sp, n);
      if (!why) n->jam = DTL_JAM;
      sp_logf(sp, "jam", why, "statement %d, loop %s", fn->index + 1, sp->vars[n->var].name);
      return;
    }
  }
  for (int q = 0; q < n->nkids; q++) jam_walk(sp, fn, n->kids[q]);
}

void spmd_jam(sp_program *sp) {
  if (sp->cuda) return;
  for (int i = 0; i < sp->nfuncs; i++)
    if (fn_runs(&sp->funcs[i])) jam_walk(sp, &sp->funcs[i], sp->funcs[i].body);
}

/* ---- partial sums of loops over stored coordinates (spmd.h: spmd_sums) ---------------------- */
#define SUMS_MAX 8
/* the dense operands of e indexed by L's variable (out, at most SUMS_MAX): false where one has
 * it other than last, or another index bound inside L */
static bool su_reads(const sp_program *sp, const sp_expr *e, const sp_node *L, const bool *inside, const sp_expr **out,
                     int *n) {
  if (!e) return true;
  if (e->kind == SE_ACCESS && !e->contracted && e->sparse < 0) {
    bool at = false;
    for (int x = 0; x < e->nidx; x++) {
      int v = e->vars[x];
      if (v < 0 || v >= sp->nvars) return false;
      if (v == L->var) {
        if (x != e->nidx - 1 || e->buf < 0) return false; /* a strided or workspace gather */
        at = true;
      } else if (inside[v]) {
        return false;
      }
    }
    if (at) {
      if (*n == SUMS_MAX) return false;
      out[(*n)++] = e;
    }
    return true;
  }
  return su_reads(sp, e->a, L, inside, out, n) && su_reads(sp, e->b, L, inside, out, n);
}

static bool su_body(const sp_program *sp, const sp_node *n, const sp_node *L, const bool *inside, const sp_expr **out,
                    int *k) {
  if (!n) return true;
  if (n->kind == SN_ASSIGN && !su_reads(sp, n->rhs, L, inside, out, k)) return false;
  for (int q = 0; q < n->nkids; q++)
    if (!su_body(sp, n->kids[q], L, inside, out, k)) return false;
  return true;
}

/* the one node of a chain of sequences (NULL: none or several) */
static sp_node *su_only(sp_node *n) {
  while (n && n->kind == SN_SEQ) {
    sp_node *one = NULL;
    for (int q = 0; q < n->nkids; q++)
      if (n->kids[q]) {
        if (one) return NULL;
        one = n->kids[q];
      }
    n = one;
  }
  return n;
}

static int su_walk(sp_program *sp, sp_node *n) {
  if (!n || n->kind == SN_KERNEL || n->kind == SN_DEVICE || n->kind == SN_PRODUCER) return 0;
  int done = 0;
  if (n->kind == SN_ACC && n->nkids == 1 && n->kids[0] && (n->type == FE_DOUBLE || n->type == FE_FLOAT) && !n->atomic &&
      !n->to_entries) {
    sp_node *L = su_only(n->kids[0]);
    if (L && L->kind == SN_LOOP && L->loop == SL_SPARSE && !L->nunion && L->within && !L->threads && !L->ngather) {
      bool ok = true;
      for (int q = 0; q < L->nkids && ok; q++) ok = jam_body(L->kids[q]);
      bool *inside = calloc((size_t)sp->nvars + 1, sizeof *inside);
      const sp_expr *out[SUMS_MAX];
      int k = 0;
      if (ok) {
        bound_in(L, inside, sp->nvars);
        ok = su_body(sp, L, L, inside, out, &k);
      }
      free(inside);
      if (ok) {
        n->sums = L->sums = 4, L->unroll = 4, L->nsums_read = k;
        L->sums_read = ir_alloc((size_t)(k + 1) * sizeof *L->sums_read);
        if (k) memcpy(L->sums_read, out, (size_t)k * sizeof *out);
        return 1;
      }
    }
  }
  for (int q = 0; q < n->nkids; q++) done += su_walk(sp, n->kids[q]);
  return done;
}

void spmd_sums(sp_program *sp) {
  if (sp->cuda) return;
  for (int i = 0; i < sp->nfuncs; i++) {
    sp_func *fn = &sp->funcs[i];
    if (!fn_runs(fn)) continue;
    int k = su_walk(sp, fn->body);
    if (k) sp_logf(sp, "sums", NULL, "statement %d: %d loop%s over stored coordinates summed in 4 registers", fn->index + 1, k,
                   k == 1 ? "" : "s");
  }
}

/* ---- register strips of an output row (spmd.h: spmd_strips) -------------------------------- */
/* The last node of a body (sequences flattened) after nodes of the kinds `ok` allows: NULL
 * where something else comes first or nothing comes last. */
static const sp_node *st_last(const sp_node *L, bool (*ok)(const sp_node *)) {
  const sp_node *body[64];
  int n = flat_body(L, body, 64);
  if (n < 1 || ok(body[n - 1])) return NULL;
  for (int q = 0; q + 1 < n; q++)
    if (!ok(body[q])) return NULL;
  return body[n - 1];
}

/* bindings, positions and ordinary guards */
static bool st_before(const sp_node *n) {
  return n->kind == SN_BIND || n->kind == SN_SPPOS || (n->kind == SN_GUARD && !n->halo_guard);
}

int spmd_strip_heads(const sp_node *K, const sp_node **out, int max) {
  const sp_node *body[64];
  int n = flat_body(K, body, 64), h = 0;
  while (h < n && st_before(body[h])) { /* up to the assignment */
    if (h < max) out[h] = body[h];
    h++;
  }
  return h;
}

const sp_node *spmd_strip_parts(const sp_node *L, const sp_node **assign) {
  const sp_node *K = st_last(L, st_before);
  *assign = NULL;
  if (!K || K->kind != SN_LOOP || K->loop != SL_LOCAL) return NULL;
  const sp_node *a = st_last(K, st_before);
  if (!a || a->kind != SN_ASSIGN) return NULL;
  *assign = a;
  return K;
}

/* e reads tensor t other than through a snapshot copied before the loops */
static bool st_reads(const sp_program *sp, const sp_expr *e, int t) {
  if (!e) return false;
  if (e->kind == SE_ACCESS) {
    if (e->contracted) return true; /* a register of the iteration: kept to the plain loop */
    if (e->tensor != t) return false;
    return !(e->buf >= 0 && e->buf < sp->nbufs && sp->bufs[e->buf].snapshot && !sp->bufs[e->buf].in_place);
  }
  return st_reads(sp, e->a, t) || st_reads(sp, e->b, t);
}

/* e reads only variables that do not move with L (moving) or are the column's (col) */
static bool st_column_sym(const sp_program *sp, const sym *e, const bool *moving, const bool *col) {
  for (int v = 0; v < sp->nvars; v++)
    if (moving[v] && !col[v] && sym_uses(e, SYM_VAR, v)) return false;
  return true;
}

/* NULL where the rewrite applies to L (whose parts K and a spmd_strip_parts found), else why not */
static const char *st_why(const sp_program *sp, const sp_node *L, const sp_node *K, const sp_node *a) {
  if (a->atomic || a->to_entries || !a->lhs || a->lhs->contracted || a->lhs->buf < 0 || a->lhs->nidx < 1)
    return "the inner loop writes a sparse result, a temporary or an atomic update";
  bool *moving = calloc((size_t)sp->nvars + 1, sizeof *moving), *col = calloc((size_t)sp->nvars + 1, sizeof *col);
  if (!moving || !col) {
    free(moving), free(col);
    return "out of memory";
  }
  bound_in(L, moving, sp->nvars);
  const char *why = NULL;
  /* the column's variables: K's own, and those K's body binds from it and from variables that
   * do not move with L; the column's index is K's variable plus such a variable */
  const sp_node *heads[64];
  int nh = spmd_strip_heads(K, heads, 64);
  col[K->var] = true;
  int last = -1;
  const sp_expr *o = a->lhs;
  const sym *expd[64] = {0}; /* a column binding's value over K's variable alone (the bindings before it substituted) */
  for (int h = 0; h < nh && !why; h++) {
    const sp_node *b = heads[h];
    if (b->kind == SN_BIND && b->var >= 0 && b->var < sp->nvars && st_column_sym(sp, b->bind, moving, col)) {
      col[b->var] = true;
      expd[h] = b->bind;
      for (int h2 = h - 1; h2 >= 0; h2--)
        if (expd[h2]) expd[h] = sym_subst(NULL, expd[h], SYM_VAR, heads[h2]->var, expd[h2]);
      if (b->var == o->vars[o->nidx - 1]) last = h;
    } else if (b->kind == SN_GUARD) {
      for (int c = 0; c < b->nconds && !why; c++)
        if (!st_column_sym(sp, b->conds[c].a, moving, col) || !st_column_sym(sp, b->conds[c].b, moving, col))
          why = "a guard of its inner loop changes with the loop";
    } else if (b->kind == SN_BIND) {
      why = "its inner loop binds a value that changes with the loop";
    }
  }
  if (!why) {
    int ov = o->vars[o->nidx - 1];
    if (ov != K->var) { /* bound in K's body: K's variable plus a value the strips do not change */
      const sym *d = last >= 0 ? sym_sub(expd[last], sym_var(K->var)) : NULL;
      bool ok = d && !sym_uses(d, SYM_VAR, K->var);
      for (int v = 0; v < sp->nvars && ok; v++)
        if (moving[v] && sym_uses(d, SYM_VAR, v)) ok = false;
      if (!ok) why = "the inner loop's variable is not the output's last index";
    }
  }
  for (int x = 0; x + 1 < o->nidx && !why; x++)
    if (o->vars[x] < 0 || o->vars[x] >= sp->nvars || moving[o->vars[x]]) why = "the output element moves with the loop (it is no sum over it)";
  for (int v = 0; v < sp->nvars && !why; v++)
    if (moving[v] && sym_uses(K->hi, SYM_VAR, v)) why = "its inner loop's bound changes with the loop";
  free(moving), free(col);
  if (why) return why;
  if (st_reads(sp, a->rhs, o->tensor)) return "the sum reads the tensor it writes";
  if (L->par != PAR_NONE || L->threads || L->threads_sum || L->jam) return "the loop runs in threads or lanes already";
  if (L->loop == SL_SPARSE && L->nunion) return "the loop runs over the union of several operands";
  if (K->par != PAR_NONE || K->threads || K->simd_sum || K->jam) return "its inner loop runs in threads or lanes";
  return NULL;
}

static int st_width(fe_type t) { return t == FE_FLOAT || t == FE_INT32 ? 16 : 8; }

static void st_walk(sp_program *sp, const sp_func *fn, sp_node *n) {
  if (!n || n->kind == SN_KERNEL || n->kind == SN_DEVICE || n->kind == SN_PRODUCER) return;
  if (n->kind == SN_LOOP && (n->loop == SL_LOCAL || n->loop == SL_SPARSE)) {
    const sp_node *a, *K = spmd_strip_parts(n, &a);
    if (K && innermost(K) && !a->to_acc && !a->store) { /* an innermost loop adding to a row: the rewrite's candidate */
      const char *why = st_why(sp, n, K, a);
      const bool gathered = !why && n->ngather;
      if (!why) n->strip = st_width(a->type);
      sp_logf(sp, "strips", why, "statement %d, loop %s: the columns of %s%s", fn->index + 1, sp->vars[n->var].name,
              sp->vars[K->var].name, gathered ? " (the whole strips gather no rows ahead)" : "");
      return;
    }
  }
  for (int q = 0; q < n->nkids; q++) st_walk(sp, fn, n->kids[q]);
}

void spmd_strips(sp_program *sp) {
  if (sp->cuda) return;
  for (int i = 0; i < sp->nfuncs; i++)
    if (fn_runs(&sp->funcs[i])) st_walk(sp, &sp->funcs[i], sp->funcs[i].body);
}

/* ---- leaf loops at the CPU's vector width (spmd.h: spmd_clones) ----------------------------- */
static bool cl_is_local(const sp_node *n) {
  return n->kind == SN_LOOP && (n->loop == SL_LOCAL || n->loop == SL_LOCAL_BLOCK || n->loop == SL_SPARSE);
}

/* the accesses of e (of the innermost loop's body) that move with the loop (index one of
 * `moving`, by var) are each still in place over some enclosing loop q (index none of the
 * variables that move with it, over[q]: read from the cache, not the memory); *streams: some
 * access moves */
static bool cl_reused(const sp_expr *e, const bool *moving, int nvars, bool **over, int nouter, bool *streams) {
  if (!e) return true;
  if (e->kind == SE_ACCESS && !e->contracted && (e->buf >= 0 || e->sparse >= 0 || e->work >= 0)) {
    bool moves = false;
    for (int k = 0; k < e->nidx; k++) moves |= e->vars[k] >= 0 && e->vars[k] < nvars && moving[e->vars[k]];
    if (moves) {
      *streams = true;
      bool kept = false;
      for (int q = 0; q < nouter && !kept; q++) {
        bool uses = false;
        for (int k = 0; k < e->nidx; k++) uses |= e->vars[k] >= 0 && e->vars[k] < nvars && over[q][e->vars[k]];
        kept = !uses;
      }
      if (!kept) return false;
    }
  }
  return cl_reused(e->a, moving, nvars, over, nouter, streams) && cl_reused(e->b, moving, nvars, over, nouter, streams);
}

/* every assignment of the innermost loop's body reads and writes what moves with the loop
 * from the cache (reused over some enclosing loop) */
static bool cl_reuse(const sp_node *n, const bool *moving, int nvars, bool **over, int nouter, bool *streams) {
  if (!n) return true;
  if (n->kind == SN_ASSIGN) {
    if (!n->to_acc && n->lhs && !cl_reused(n->lhs, moving, nvars, over, nouter, streams)) return false;
    if (!cl_reused(n->rhs, moving, nvars, over, nouter, streams)) return false;
  }
  for (int q = 0; q < n->nkids; q++)
    if (!cl_reuse(n->kids[q], moving, nvars, over, nouter, streams)) return false;
  return true;
}

/* the variables an enclosing loop n moves itself: its own and those bound in its body outside
 * the loops nested in it */
static void cl_own(const sp_node *n, bool *own, int nvars, bool top) {
  if (!n || (!top && n->kind == SN_LOOP)) return;
  if ((n->kind == SN_LOOP || n->kind == SN_BIND) && n->var >= 0 && n->var < nvars) own[n->var] = true;
  for (int q = 0; q < n->nkids; q++) cl_own(n->kids[q], own, nvars, false);
}

/* the innermost dense local loop L inside the local loops outer[0..nouter) reads and writes
 * from the cache: what moves with L (its variables and those bound inside it) is each in
 * place over some enclosing loop (indexes none of the variables that loop moves itself; a
 * loop nested between them may move it: SpMM's rows of B move with j, not with i) */
static bool cl_leaf(const sp_program *sp, const sp_node *L, const sp_node **outer, int nouter) {
  int nv = sp->nvars;
  bool *moving = calloc((size_t)nv + 1, sizeof *moving), streams = false, ok;
  bool **over = calloc((size_t)nouter + 1, sizeof *over);
  bound_in(L, moving, nv);
  for (int q = 0; q < nouter; q++) {
    over[q] = calloc((size_t)nv + 1, sizeof **over);
    cl_own(outer[q], over[q], nv, true);
  }
  ok = cl_reuse(L, moving, nv, over, nouter, &streams) && streams;
  for (int q = 0; q < nouter; q++) free(over[q]);
  free(over), free(moving);
  return ok;
}

/* some innermost dense local loop inside other local loops reads and writes from the cache */
static bool cl_walk(const sp_program *sp, const sp_node *n, const sp_node **outer, int nouter) {
  if (!n || n->kind == SN_KERNEL || n->kind == SN_DEVICE || n->kind == SN_PRODUCER) return false;
  if (cl_is_local(n)) {
    if (innermost(n)) return n->loop == SL_LOCAL && nouter > 0 && cl_leaf(sp, n, outer, nouter);
    if (nouter < 64) outer[nouter++] = n;
  }
  for (int q = 0; q < n->nkids; q++)
    if (cl_walk(sp, n->kids[q], outer, nouter)) return true;
  return false;
}

void spmd_clones(sp_program *sp) {
  if (sp->cuda) return;
  for (int i = 0; i < sp->nfuncs; i++) {
    sp_func *fn = &sp->funcs[i];
    if (!fn_runs(fn)) continue;
    const sp_node *outer[64];
    if (cl_walk(sp, fn->body, outer, 0)) {
      fn->clones = true;
      sp_logf(sp, "clones", NULL, "statement %d: an innermost loop that reads and writes from the cache, compiled for AVX2 too", fn->index + 1);
    }
  }
}

/* ---- threads for the leaf loops (spmd.h: spmd_threads) ------------------------------------- */
typedef struct {
  const sp_program *sp;
  const sp_node *L;
  bool *inner;    /* by var: bound inside L (its counter included) */
  bool *inj;      /* by var: L's counter plus a value fixed in the iteration */
  bool *reg;      /* by tensor: a contracted temporary declared inside L */
  int nw;
  const sp_expr *w[64]; /* the elements written (buffer accesses) */
  bool sum;       /* assignments into the enclosing register */
  const char *why;
} th_st;

static void th_inner(th_st *t, const sp_node *n) {
  if (!n) return;
  if ((n->kind == SN_LOOP || n->kind == SN_BIND) && n->var >= 0 && n->var < t->sp->nvars) t->inner[n->var] = true;
  for (int q = 0; q < n->nkids; q++) th_inner(t, n->kids[q]);
}

/* s is L's counter (or a variable that is) plus terms that no variable bound inside L changes */
static bool th_shift(const th_st *t, const sym *s) {
  if (!s) return false;
  if (s->kind == SYM_VAR) return s->id >= 0 && s->id < t->sp->nvars && t->inj[s->id];
  if (s->kind != SYM_ADD) return false;
  for (int side = 0; side < 2; side++) {
    const sym *x = side ? s->b : s->a, *y = side ? s->a : s->b;
    bool fixed = true;
    for (int v = 0; v < t->sp->nvars && fixed; v++)
      if (t->inner[v] && sym_uses(y, SYM_VAR, v)) fixed = false;
    if (fixed && th_shift(t, x)) return true;
  }
  return false;
}

/* the reads of e of a written tensor (through any buffer but a snapshot taken before the loops)
 * are at its write's variables */
static bool th_reads_ok(const th_st *t, const sp_expr *e) {
  if (!e) return true;
  if (e->kind == SE_ACCESS && e->buf >= 0 && e->buf < t->sp->nbufs && !t->sp->bufs[e->buf].snapshot)
    for (int k = 0; k < t->nw; k++)
      if (t->sp->bufs[t->w[k]->buf].tensor == t->sp->bufs[e->buf].tensor &&
          (t->w[k]->nidx != e->nidx || memcmp(t->w[k]->vars, e->vars, (size_t)e->nidx * sizeof *e->vars)))
        return false;
  return th_reads_ok(t, e->a) && th_reads_ok(t, e->b);
}

static bool th_write(th_st *t, const sp_expr *lhs) {
  if (!lhs || lhs->contracted) {
    if (lhs && lhs->tensor >= 0 && lhs->tensor < t->sp->ntensors && t->reg[lhs->tensor]) return true;
    return t->why = "it writes a temporary shared by the iterations", false;
  }
  if (lhs->buf < 0) return t->why = "it writes a workspace", false;
  bool mine = false;
  for (int k = 0; k < lhs->nidx; k++) mine |= lhs->vars[k] >= 0 && lhs->vars[k] < t->sp->nvars && t->inj[lhs->vars[k]];
  if (!mine) return t->why = "iterations of the loop write the same element (the loop sums)", false;
  if (t->nw == 64) return t->why = "it writes too many elements", false;
  t->w[t->nw++] = lhs;
  return true;
}

/* the body: what may run in threads, the writes, the injective variables (pre-order);
 * own_acc: inside a register sum declared within L */
static bool th_body(th_st *t, const sp_node *n, bool own_acc) {
  if (!n) return true;
  switch (n->kind) {
  case SN_SEQ: case SN_GUARD: case SN_SPPOS: case SN_WIDTH: break;
  case SN_BIND:
    if (n->var >= 0 && n->var < t->sp->nvars) t->inj[n->var] = th_shift(t, n->bind);
    break;
  case SN_REGISTER:
    if (n->tensor >= 0 && n->tensor < t->sp->ntensors) t->reg[n->tensor] = true;
    break;
  case SN_LOOP:
    if (n->loop != SL_LOCAL && n->loop != SL_LOCAL_BLOCK && n->loop != SL_SPARSE) return t->why = "a loop inside it is collective", false;
    if (n->par != PAR_NONE) return t->why = "a loop inside it runs in lanes", false;
    break;
  case SN_ACC:
    if (n->to_entries || n->atomic) return t->why = "its sum becomes a sparse result's entries or adds atomically", false;
    if (!th_write(t, n->lhs)) return false;
    for (int q = 0; q < n->nkids; q++)
      if (!th_body(t, n->kids[q], true)) return false;
    return true;
  case SN_ASSIGN:
    if (n->to_entries || n->atomic) return t->why = "it writes a sparse result's entries or adds atomically", false;
    if (n->to_acc) t->sum |= !own_acc;
    else if (!th_write(t, n->lhs)) return false;
    break;
  case SN_COMM: return t->why = "it communicates inside its loops", false;
  case SN_KERNEL: return t->why = "a leaf kernel runs its loops (the BLAS's threads)", false;
  case SN_PRODUCER: return t->why = "it computes a precompute workspace", false;
  default: return t->why = "it holds more than loops and assignments", false;
  }
  for (int q = 0; q < n->nkids; q++)
    if (!th_body(t, n->kids[q], own_acc)) return false;
  return true;
}

static bool th_reads(const th_st *t, const sp_node *n) {
  if (!n) return true;
  if ((n->kind == SN_ASSIGN || n->kind == SN_ACC) && !th_reads_ok(t, n->rhs)) return false;
  for (int q = 0; q < n->nkids; q++)
    if (!th_reads(t, n->kids[q])) return false;
  return true;
}

/* the iterations of the nest at n, as far as its bounds are fixed in L (L's own stored
 * coordinates are counted by the printer, when the loop starts) */
static const sym *th_work(const th_st *t, const sp_node *n) {
  const sym *w = sym_const(1);
  if (!n) return w;
  for (int q = 0; q < n->nkids; q++) {
    const sym *k = th_work(t, n->kids[q]);
    int64_t a, b;
    if (sym_is_const(w, &a) && a == 1) w = k; /* the larger of the kids where both are known */
    else if (sym_is_const(w, &a) && sym_is_const(k, &b) && b > a) w = k;
  }
  if (n->kind != SN_LOOP) return w;
  if (n->loop == SL_SPARSE) return n == t->L ? w : sym_mul(sym_const(DTL_THREADS_SPARSE), w);
  const sym *trip = n->loop == SL_LOCAL_BLOCK ? sym_sub(n->hi, n->lo) : n->hi;
  for (int v = 0; v < t->sp->nvars; v++)
    if (t->inner[v] && sym_uses(trip, SYM_VAR, v)) return w;
  return sym_mul(trip, w);
}

static bool th_user_threads(const sp_node *n) {
  if (!n) return false;
  if (n->kind == SN_DEVICE || (n->kind == SN_LOOP && (n->par != PAR_NONE || n->loop == SL_THREAD))) return true;
  for (int q = 0; q < n->nkids; q++)
    if (th_user_threads(n->kids[q])) return true;
  return false;
}

/* the outermost local loops where the rule applies; acc: inside a register sum */
static void th_walk(sp_program *sp, const sp_func *fn, sp_node *n, bool acc, const char **why, bool *done) {
  if (!n) return;
  if (n->kind == SN_LOOP && (n->loop == SL_LOCAL || n->loop == SL_LOCAL_BLOCK || n->loop == SL_SPARSE)) {
    th_st t = {.sp = sp, .L = n};
    t.inner = calloc((size_t)sp->nvars + 1, sizeof *t.inner);
    t.inj = calloc((size_t)sp->nvars + 1, sizeof *t.inj);
    t.reg = calloc((size_t)sp->ntensors + 1, sizeof *t.reg);
    if (!t.inner || !t.inj || !t.reg) {
      free(t.inner), free(t.inj), free(t.reg);
      *why = "out of memory";
      return;
    }
    th_inner(&t, n);
    if (n->var >= 0 && n->var < sp->nvars) t.inj[n->var] = true;
    bool ok = n->par == PAR_NONE && !n->nunion;
    if (!ok) t.why = n->nunion ? "the loop walks the union of several operands' stored coordinates" : "the loop runs in lanes";
    for (int q = 0; ok && q < n->nkids; q++) ok = th_body(&t, n->kids[q], false);
    if (ok && t.sum && !acc) ok = false, t.why = "it adds to a register outside it";
    if (ok && !th_reads(&t, n)) ok = false, t.why = "an iteration reads an element another one writes";
    if (ok) {
      n->threads = true, n->threads_sum = t.sum;
      n->threads_work = th_work(&t, n);
      *done = true;
    } else if (!*why) {
      *why = t.why;
    }
    free(t.inner), free(t.inj), free(t.reg);
    if (ok) return;
  }
  if (n->kind == SN_DEVICE || n->kind == SN_KERNEL || n->kind == SN_PRODUCER) {
    if (!*why) *why = n->kind == SN_KERNEL ? "a leaf kernel runs its loops (the BLAS's threads)" : "its loops are a device kernel or precompute";
    return;
  }
  for (int q = 0; q < n->nkids; q++) th_walk(sp, fn, n->kids[q], acc || n->kind == SN_ACC, why, done);
}

void spmd_threads(sp_program *sp) {
  if (sp->cuda) return;
  for (int i = 0; i < sp->nfuncs; i++) {
    sp_func *fn = &sp->funcs[i];
    if (!fn_runs(fn)) continue;
    const char *why = NULL;
    bool done = false;
    if (th_user_threads(fn->body)) why = "parallelize maps its loops already";
    else th_walk(sp, fn, fn->body, false, &why, &done);
    if (!done && !why) why = "it has no local loop";
    sp_logf(sp, "threads", done ? NULL : why, "statement %d", fn->index + 1);
  }
}

/* ---- printing: distalc --emit spmd -------------------------------------------------------- */
typedef struct {
  const sp_program *sp;
  const sp_node **strip_a; /* the assignment of the strips' loop being printed (the rewrite strips) */
} pctx;

static void pnamer(FILE *f, const sym *a, void *vc) {
  const pctx *c = vc;
  switch (a->kind) {
  case SYM_PARAM: fputs(c->sp->params[a->id].name, f); break;
  case SYM_COORD: fprintf(f, "coord[%d]", a->id); break;
  case SYM_VAR:
    if (a->id < c->sp->nvars && c->sp->vars[a->id].kind == SV_LOCAL) fprintf(f, "%s.local", c->sp->vars[a->id].name);
    else if (a->id < c->sp->nvars) fputs(c->sp->vars[a->id].name, f);
    else fprintf(f, "v%d", a->id);
    break;
  default: break;
  }
}

/* a symbolic value, with the C printer's function names read as operators (ceildiv, min, ...) */
static void ps(FILE *f, const pctx *c, const sym *e) {
  char *b = NULL;
  size_t n = 0;
  FILE *m = open_memstream(&b, &n);
  sym_print(m, e, pnamer, (void *)c);
  fclose(m);
  for (const char *x = b; *x;) {
    static const char *const fns[] = {"dtl_floordiv(", "dtl_ceildiv(", "dtl_mod(", "dtl_min(", "dtl_max(", "dtl_split["};
    bool fn = false;
    for (int q = 0; q < 6 && !(x > b && (isalnum((unsigned char)x[-1]) || x[-1] == '_')); q++) fn |= !strncmp(x, fns[q], strlen(fns[q]));
    if (fn) x += 4;
    else fputc(*x++, f);
  }
  free(b);
}

static const char *vn(const pctx *c, int v) { return v >= 0 && v < c->sp->nvars ? c->sp->vars[v].name : "?"; }

static void pbuf(FILE *f, const pctx *c, int b) {
  const sp_buf *B = &c->sp->bufs[b];
  fprintf(f, "%s%s#%d", B->snapshot ? "in." : "", c->sp->tensors[B->tensor].name, b);
}

static void pbox(FILE *f, const pctx *c, int order, const sym *const *lo, const sym *const *hi) {
  fputc('[', f);
  for (int x = 0; x < order; x++) {
    if (x) fputs(", ", f);
    ps(f, c, lo[x]);
    fputs(":", f);
    ps(f, c, hi[x]);
  }
  fputc(']', f);
}

static void pzero_if(FILE *f, const pctx *c, const sp_expr *z) {
  if (z->kind == SE_ABSENT) {
    if (z->a->sparse >= 0) fprintf(f, "no entry sp%d", z->a->sparse);
    else fprintf(f, "%s(...) == 0", c->sp->tensors[z->a->tensor].name);
    return;
  }
  fputc('(', f);
  pzero_if(f, c, z->a);
  fputs(z->kind == SE_AND ? " and " : " or ", f);
  pzero_if(f, c, z->b);
  fputc(')', f);
}

static void pexpr(FILE *f, const pctx *c, const sp_expr *e) {
  if (e->zero_guard) { /* a structural zero: 0 where the sparse operand holds no entry */
    fputs("[0 where ", f);
    pzero_if(f, c, e->zero_if);
    fputs("] ", f);
  }
  if (e->nguards) {
    fputs("[", f);
    for (int q = 0; q < e->nguards; q++) fprintf(f, "%s%s == 0", q ? " && " : "", vn(c, e->guards[q]));
    fputs("] ", f);
  }
  switch (e->kind) {
  case SE_ACCESS:
    if (e->contracted) {
      fprintf(f, "%s.register", c->sp->tensors[e->tensor].name);
      break;
    }
    if (e->work >= 0) fprintf(f, "%s", c->sp->works[e->work].name);
    else pbuf(f, c, e->buf);
    if (e->sparse >= 0) fprintf(f, "{entry sp%d%s}", e->sparse, e->maybe_absent ? "?" : "");
    fputc('(', f);
    for (int x = 0; x < e->nidx; x++) fprintf(f, "%s%s", x ? "," : "", vn(c, e->vars[x]));
    fputc(')', f);
    break;
  case SE_NUM:
    if (e->text) fputs(e->text, f);
    else if (e->is_int) fprintf(f, "%lld", (long long)e->ival);
    else fprintf(f, "%.17g", e->num);
    break;
  case SE_NEG:
    fputs("-(", f);
    pexpr(f, c, e->a);
    fputc(')', f);
    break;
  case SE_PARAM:
    fputs(c->sp->params[e->param].name, f);
    break;
  case SE_CALL:
    fprintf(f, "%s(", fe_func_name(e->func));
    pexpr(f, c, e->a);
    if (e->b) {
      fputs(", ", f);
      pexpr(f, c, e->b);
    }
    fputc(')', f);
    break;
  default:
    fputc('(', f);
    pexpr(f, c, e->a);
    fputs(e->kind == SE_ADD ? " + " : e->kind == SE_SUB ? " - " : e->kind == SE_MUL ? " * " : " / ", f);
    pexpr(f, c, e->b);
    fputc(')', f);
  }
}

static void pconds(FILE *f, const pctx *c, int n, const sp_cond *cd) {
  for (int q = 0; q < n; q++) {
    if (q) fputs(" && ", f);
    if (cd[q].op == SCMP_EQ_PARAMS) {
      for (int r = 1; r < cd[q].nparams; r++)
        fprintf(f, "%s%s == %s", r > 1 ? " && " : "", c->sp->params[cd[q].params[0]].name, c->sp->params[cd[q].params[r]].name);
      continue;
    }
    ps(f, c, cd[q].a);
    fputs(cd[q].op == SCMP_LT ? " < " : " == ", f);
    ps(f, c, cd[q].b);
  }
}

static void pmask(FILE *f, unsigned mask) {
  fputs("{", f);
  bool first = true;
  for (int d = 0; d < 32; d++)
    if (mask >> d & 1) fprintf(f, "%s%d", first ? "" : ",", d), first = false;
  fputs("}", f);
}

static void pnode(FILE *f, const pctx *c, const sp_node *n, int ind);

static void pkids(FILE *f, const pctx *c, const sp_node *n, int ind) {
  for (int q = 0; q < n->nkids; q++)
    if (n->kids[q]) pnode(f, c, n->kids[q], ind);
}

static void pnode(FILE *f, const pctx *c, const sp_node *n, int ind) {
  static const char *ik[] = {"declare", "snapshot", "workspace", "zero", "empty"};
  static const char *pk[] = {"", " (threads)", " (vector)", " (gpu block)", " (gpu warp)", " (gpu thread)"};
  if (n->kind == SN_SEQ) {
    pkids(f, c, n, ind);
    return;
  }
  fprintf(f, "%*s", ind, "");
  switch (n->kind) {
  case SN_LOOP:
    switch (n->loop) {
    case SL_COORD: fprintf(f, "collective %s = coord[%d]", vn(c, n->var), n->dim); break;
    case SL_COLL_BLOCK:
      fprintf(f, "collective for %s.local in [0, ", vn(c, n->var));
      ps(f, c, n->hi);
      fprintf(f, "): %s = ", vn(c, n->var));
      ps(f, c, n->value);
      break;
    case SL_LOCAL_BLOCK:
      fprintf(f, "for %s in [", vn(c, n->var));
      ps(f, c, n->lo);
      fputs(", ", f);
      ps(f, c, n->hi);
      fputs(") (this rank's block)", f);
      break;
    case SL_SPARSE:
      if (n->nunion) {
        fprintf(f, "for %s in the union of the stored coordinates of", vn(c, n->var));
        for (int u = 0; u < n->nunion; u++) fprintf(f, "%s sp%d level %d", u ? "," : "", n->union_sparse[u], n->union_level[u]);
        fputs(", below ", f);
        ps(f, c, n->hi);
        break;
      }
      fprintf(f, "for %s in stored coordinates of sp%d level %d, below ", vn(c, n->var), n->sparse, n->level);
      ps(f, c, n->hi);
      if (n->within) fputs(" (all are)", f);
      break;
    default:
      fprintf(f, "for %s in [0, ", vn(c, n->var));
      ps(f, c, n->hi);
      fprintf(f, ")%s", pk[n->par]);
    }
    if (n->simd_sum) fputs(" (simd sum)", f);
    if (n->prefetch) fputs(" (prefetch where banded)", f);
    if (n->ngather) fprintf(f, " (%d row%s gathered ahead where scattered)", n->ngather, n->ngather == 1 ? "" : "s");
    if (n->sums) fprintf(f, " (%d partial sums where its gathers fit the cache)", n->sums);
    if (n->unroll) fprintf(f, " (one sum unrolled by %d)", n->unroll);
    if (n->nhoist) fprintf(f, " (%d operand%s read once before it)", n->nhoist, n->nhoist == 1 ? "" : "s");
    if (n->jam) fprintf(f, " (rows jammed by %d)", n->jam);
    if (n->strip) {
      const sp_node *a, *K = spmd_strip_parts(n, &a);
      fprintf(f, " (columns of %s summed in registers, %d at a time, then %s)", K ? vn(c, K->var) : "?", n->strip,
              a && a->store ? "stored" : "added");
      if (c->strip_a) *c->strip_a = a;
    }
    if (n->threads) fputs(n->threads_sum ? " (rank's threads, summing the register)" : " (rank's threads)", f);
    fprintf(f, "   # %s\n", n->comment);
    pkids(f, c, n, ind + 2);
    return;
  case SN_BIND:
    fprintf(f, "%s = ", vn(c, n->var));
    ps(f, c, n->bind);
    fprintf(f, "   # %s\n", n->comment);
    return;
  case SN_GUARD:
    if (n->halo_guard) {
      fprintf(f, "skip unless the row at position sp%d level %d %s%s   # overlap\n", n->sparse, n->level,
              n->halo_phase ? "reads a ghost: after the exchange, from its buffer" : "reads only this rank's block: during the exchange, in place",
              n->halo_skip ? " (the loop moves to the next such row at once)" : "");
      return;
    }
    fputs("skip unless ", f);
    pconds(f, c, n->nconds, n->conds);
    fputc('\n', f);
    return;
  case SN_IF:
    fputs("if ", f);
    pconds(f, c, n->nconds, n->conds);
    fprintf(f, n->comment ? "   # %s\n" : "\n", n->comment);
    pnode(f, c, n->kids[0], ind + 2);
    if (n->nkids > 1 && n->kids[1] && n->kids[1]->nkids) {
      fprintf(f, "%*selse\n", ind, "");
      pnode(f, c, n->kids[1], ind + 2);
    }
    return;
  case SN_COMM:
    fprintf(f, "%s ", sp_comm_name(n->op));
    pbuf(f, c, n->buf);
    if (n->op == SC_BCAST || n->op == SC_SPARSE_BCAST || n->op == SC_BCAST_BEGIN || n->op == SC_REDUCE || n->op == SC_BCAST_RESULT ||
        n->op == SC_ALLREDUCE || n->op == SC_HALO) {
      fputs(" over grid dims ", f);
      pmask(f, n->mask);
    }
    for (int q = 0; q < n->nmerged; q++) {
      fputs(q ? ", " : " with ", f);
      pbuf(f, c, n->merged[q]);
    }
    if (n->op == SC_SHIFT_BEGIN) fprintf(f, " along grid dim %d", n->shift_dim);
    if (n->op == SC_BCAST_BEGIN || n->op == SC_SHIFT_BEGIN) {
      fputs(" box ", f);
      pbox(f, c, c->sp->bufs[n->buf].order, n->box_lo, n->box_hi);
      fputs(n->other_slot ? " into the other slot" : " into the free slot", f);
    } else if (n->op != SC_WAIT && n->op != SC_HALO_END && n->op != SC_VIEW && n->op != SC_SPARSE_MERGE && n->op != SC_SPARSE_RESET) {
      fputs(" box ", f);
      const sp_buf *B = &c->sp->bufs[n->buf];
      pbox(f, c, B->order, B->lo, B->hi);
    }
    if (n->reuses) {
      fputs(" (no communication: as ", f);
      pbuf(f, c, n->reuses - 1);
      fputs(" fetched it, in its slot)", f);
    } else if (n->op == SC_FETCH || n->op == SC_ACCUMULATE || n->op == SC_SPARSE_FETCH || n->op == SC_SPARSE_ACC)
      fputs(" (point to point: every rank evaluates the others' boxes)", f);
    if (n->once_loop) fprintf(f, " (at loop %d's first iteration only: the loop writes no part of the tensor)", n->once_loop);
    if (n->op == SC_HALO)
      fprintf(f, " (inspector: the stored coordinates of %s at level %d%s)", c->sp->tensors[n->halo_tensor].name, n->halo_level,
              n->halo_split ? "; posted, completed by halo.end" : "");
    fprintf(f, n->comment ? "   # %s\n" : "\n", n->comment);
    pkids(f, c, n, ind + 2); /* halo.end: the rows that read a ghost, where there are some */
    return;
  case SN_INIT:
    fprintf(f, "%s", ik[n->init]);
    if (n->init == SI_DECLARE) {
      fputc(' ', f);
      pbuf(f, c, n->buf);
      if (c->sp->bufs[n->buf].doubled) fputs(" (double-buffered)", f);
      fprintf(f, " slot %d", c->sp->bufs[n->buf].slot);
    } else if (n->init == SI_WORKSPACE) {
      fprintf(f, " %s[", c->sp->works[n->work].name);
      ps(f, c, n->extent);
      fprintf(f, "] slot %d", n->slot);
    } else {
      fprintf(f, " %s", c->sp->tensors[n->tensor].name);
      if (n->init == SI_SNAPSHOT) fprintf(f, " slot %d", n->slot);
    }
    fputc('\n', f);
    return;
  case SN_PRODUCER:
    fprintf(f, "for %s in [0, ", vn(c, n->var));
    ps(f, c, n->hi);
    fprintf(f, "): %s(%s) = ", c->sp->works[n->work].name, vn(c, n->var));
    pexpr(f, c, n->rhs);
    fputs("   # precompute\n", f);
    return;
  case SN_SPPOS:
    fprintf(f, "position sp%d level %d of %s at %s (%s)\n", n->sparse, n->level, c->sp->tensors[n->tensor].name,
            vn(c, n->var), n->compressed ? "search" : "dense");
    return;
  case SN_ACC:
    fprintf(f, "sum into a register, then ");
    pexpr(f, c, n->lhs);
    fprintf(f, " %s it%s%s\n", n->store ? "=" : "+=", n->atomic ? " (atomic)" : "", n->to_entries ? " (as an entry)" : "");
    pkids(f, c, n, ind + 2);
    return;
  case SN_KERNEL:
    fprintf(f, "kernel %s(", ir_kernel_name(n->kernel));
    for (int q = 0; q < n->nk; q++) {
      fprintf(f, "%s%s: ", q ? ", " : "", vn(c, n->korig[q]));
      ps(f, c, n->klo[q]);
      fputs(":", f);
      ps(f, c, n->khi[q]);
    }
    fputs(")  ", f);
    pexpr(f, c, n->kops[0]);
    fputs(n->store ? " = " : " += ", f);
    if (n->kcoef) { /* the coefficient: scales the smallest factor, or the sum of a scalar output */
      fputc('(', f);
      pexpr(f, c, n->kcoef);
      fputs(") * ", f);
    }
    for (int q = 1; q < n->nkops; q++) {
      if (q > 1) fputs(" * ", f);
      pexpr(f, c, n->kops[q]);
    }
    if (n->kcall) fprintf(f, "  -> %s", c->sp->cuda ? n->kcall->kernel->device : n->store ? n->kcall->kernel->host_store : n->kcall->kernel->host);
    fputc('\n', f);
    return;
  case SN_ASSIGN:
    if (n->to_acc) fputs("register += ", f);
    else {
      pexpr(f, c, n->lhs);
      bool in_strip = c->strip_a && *c->strip_a == n; /* the strips' register sums it, then stores or adds it */
      fputs(n->to_entries ? " gains entry " : n->atomic ? " +=(atomic) " : n->store && !in_strip ? " = " : " += ", f);
    }
    pexpr(f, c, n->rhs);
    fputc('\n', f);
    return;
  case SN_REGISTER:
    fprintf(f, "register %s.register (%s): the temporary's element, never stored\n", c->sp->tensors[n->tensor].name,
            fe_type_name(n->type));
    return;
  case SN_WIDTH:
    fputs("index width: 32-bit where the pieces of", f);
    for (int q = 0; q < n->nwidth; q++) fprintf(f, "%s %s", q ? "," : "", c->sp->tensors[n->width_tensors[q]].name);
    fputs(" are narrow, else their own\n", f);
    pkids(f, c, n, ind + 2);
    return;
  case SN_DEVICE:
    fprintf(f, "device kernel %s: threads over", n->kname);
    for (int q = 0; q < n->nmapped; q++) fprintf(f, " %s", vn(c, n->mapped_vars[q]));
    fprintf(f, n->atomic ? ", atomic updates\n" : "\n");
    pkids(f, c, n, ind + 2);
    return;
  default: fputc('\n', f); return;
  }
}

static void pitems(FILE *f, const pctx *c, const sp_item *list, int n, int ind) {
  for (int k = 0; k < n; k++) {
    const sp_item *it = &list[k];
    if (it->kind == SP_CALL) {
      fprintf(f, "%*sstatement %d\n", ind, "", it->func + 1);
      continue;
    }
    if (it->peel) {
      fprintf(f, "%*s# the first iteration's run of the loop's first statements (fused across the back edge)\n", ind, "");
      pitems(f, c, it->items, it->peel, ind);
    }
    fprintf(f, "%*sloop %d (line %d): at most ", ind, "", it->number, it->src_line);
    ps(f, c, it->bound);
    fputs(" iterations", f);
    if (it->cond) fprintf(f, ", until %s (rank 0 decides, broadcast)", it->cond_text ? it->cond_text : "?");
    fputc('\n', f);
    for (int q = 0; q < it->peel; q++)
      fprintf(f, "%*s# statement %d: inside statement %d, for the next iteration\n", ind + 2, "", it->items[q].func + 1, it->peel_into + 1);
    pitems(f, c, it->items + it->peel, it->nitems - it->peel, ind + 2);
  }
}

void spmd_print(FILE *f, const sp_program *sp) {
  const sp_node *strip_a = NULL;
  pctx c = {sp, &strip_a};
  fprintf(f, "# SPMD program: every rank runs it on its own blocks (%s target)\n", sp->cuda ? "cuda" : "cpu");
  const lw_program *lp = sp->lp;
  fputs("grid:", f);
  for (int d = 0; d < lp->ndims; d++) {
    fputs(d ? " x " : " ", f);
    ps(f, &c, lp->dims[d]);
  }
  fputc('\n', f);
  for (int t = 0; t < sp->ntensors; t++) {
    const sp_tensor *x = &sp->tensors[t];
    fprintf(f, "%s %s: %s%s\n", x->temp ? "temp" : "tensor", x->name, x->dist_text ? x->dist_text : "replicated on every rank",
            x->sparse ? ", sparse" : "");
  }
  if (sp->nloops) {
    fputs("program:\n", f);
    pitems(f, &c, sp->items, sp->nitems, 2);
  }
  for (int i = 0; i < sp->nfuncs; i++) {
    const sp_func *fn = &sp->funcs[i];
    fprintf(f, "\nstatement %d (line %d): %s\n", fn->index + 1, fn->src_line, fn->text);
    if (fn->removed) {
      fprintf(f, "  removed: %s\n", fn->removed);
      continue;
    }
    if (fn->fused_into >= 0) {
      fprintf(f, "  fused: runs inside the loop nest of statement %d\n", fn->fused_into + 1);
      continue;
    }
    bool group = false;
    for (int j = 0; j < sp->nfuncs; j++) group |= sp->funcs[j].fused_into == i;
    if (group) {
      fputs("  fused group: statements", f);
      fprintf(f, " %d", fn->index + 1);
      for (int j = 0; j < sp->nfuncs; j++)
        if (sp->funcs[j].fused_into == i) fprintf(f, ", %d", j + 1);
      fputs(" in one loop nest\n", f);
    }
    pnode(f, &c, fn->body, 2);
  }
  fputs("\nrewrites:\n", f);
  int applied = 0;
  for (int q = 0; q < sp->nlog; q++) applied += !sp->log[q].why;
  if (!applied) fputs("  (none applied)\n", f);
  for (int q = 0; q < sp->nlog; q++) {
    if (sp->log[q].why) fprintf(f, "  %s not applied at %s: %s\n", sp->log[q].rewrite, sp->log[q].where, sp->log[q].why);
    else fprintf(f, "  %s at %s\n", sp->log[q].rewrite, sp->log[q].where);
  }
  if (sp->nvariants < 1) return;
  /* the run-time choice (variants.c): the other programs, each as above */
  fprintf(f, "\nrun-time choice: plan_create runs the cost formulas of %d variant%s%s (the machine model: %.6g bytes/s, %.6g s per "
             "message, %.6g s per iteration%s) and compute runs the one predicted fastest; the program above is variant 0\n",
          sp->nvariants, sp->nvariants == 1 ? "" : "s", sp->shape_free ? " on every shape of the grid's free params" : "", sp->bandwidth,
          sp->latency, sp->point_time, sp->mem_limit > 0 ? "; buffers within the memory limit" : "");
  for (int v = 0; v < sp->nvariants; v++) {
    const sp_variant *x = &sp->variants[v];
    fprintf(f, "  variant %d: the search's choice at %s\n", v, x->label);
    spmd_print_variant_schedules(f, x);
  }
  for (int v = 1; v < sp->nvariants; v++) {
    fprintf(f, "\n==== variant %d ====\n", v);
    spmd_print(f, sp->variants[v].sp);
  }
}

/* ---- --emit plan: what the SPMD rewrites changed in the plan (the halo exchanges that replace broadcasts, the
 * fetches merged into an earlier one's) ---- */
static void halo_walk(FILE *f, const sp_program *sp, const sp_func *fn, const sp_node *n, bool *head) {
  if (!n) return;
  if (n->kind == SN_COMM && n->op == SC_HALO) {
    const sp_tensor *T = &sp->tensors[sp->bufs[n->buf].tensor], *S = &sp->tensors[n->halo_tensor];
    if (!*head) fputs("halo exchanges (the SPMD rewrite halo; each replaces the broadcast of that read above):\n", f);
    *head = true;
    fprintf(f, "  statement %d, read %s: only its entries at the stored coordinates of the rank's piece of %s at level %d, "
               "from their owners along grid dim %d (MPI_Isend/MPI_Irecv; an inspector finds them once, the plan caches them)\n",
            fn->index + 1, T->name, S->name, n->halo_level, __builtin_ctz(n->mask));
    fprintf(f, "    bytes per rank: %d per ghost entry (a distinct stored coordinate outside the rank's block of %s), known once %s is loaded\n",
            T->type == FE_FLOAT || T->type == FE_INT32 ? 4 : 8, T->name, S->name);
  }
  for (int q = 0; q < n->nkids; q++) halo_walk(f, sp, fn, n->kids[q], head);
}

static void reuse_walk(FILE *f, const sp_program *sp, const sp_func *fn, const sp_node *n, bool *head) {
  if (!n) return;
  if (n->kind == SN_COMM && n->reuses) {
    const sp_buf *b = &sp->bufs[n->buf], *from = &sp->bufs[n->reuses - 1];
    if (!*head) fputs("merged fetches (the SPMD rewrite fetch; each moves nothing):\n", f);
    *head = true;
    fprintf(f, "  statement %d, read %s: the box statement %d fetched, in its buffer (no write of %s in between): 0 bytes\n",
            fn->index + 1, sp->tensors[b->tensor].name, sp->funcs[from->func].index + 1, sp->tensors[b->tensor].name);
  }
  for (int q = 0; q < n->nkids; q++) reuse_walk(f, sp, fn, n->kids[q], head);
}
static void once_walk(FILE *f, const sp_program *sp, const sp_func *fn, const sp_node *n, bool *head) {
  if (!n) return;
  if (n->kind == SN_COMM && n->once_loop) {
    const sp_buf *b = &sp->bufs[n->buf];
    if (!*head) fputs("fetches once per loop (the SPMD rewrite invariant; the bytes above at the loop's first iteration, 0 at the others):\n", f);
    *head = true;
    fprintf(f, "  statement %d, read %s: loop %d writes no part of %s\n", fn->index + 1, sp->tensors[b->tensor].name, n->once_loop,
            sp->tensors[b->tensor].name);
  }
  for (int q = 0; q < n->nkids; q++) once_walk(f, sp, fn, n->kids[q], head);
}
static void copy_walk(FILE *f, const sp_program *sp, const sp_func *fn, const sp_node *n, bool *head) {
  if (!n) return;
  if (n->kind == SN_COMM && n->from_copy) {
    if (!*head) fputs("reads of a copy from its source (the SPMD rewrite redistribute; each moves nothing):\n", f);
    *head = true;
    fprintf(f, "  statement %d, read %s: the rank's own block of %s, which %s copies: 0 bytes\n", fn->index + 1,
            sp->tensors[n->from_copy - 1].name, sp->tensors[sp->bufs[n->buf].tensor].name, sp->tensors[n->from_copy - 1].name);
  }
  for (int q = 0; q < n->nkids; q++) copy_walk(f, sp, fn, n->kids[q], head);
}
void spmd_print_plan_notes(FILE *f, const sp_program *sp) {
  bool head = false;
  for (int i = 0; i < sp->nfuncs; i++) halo_walk(f, sp, &sp->funcs[i], sp->funcs[i].body, &head);
  head = false;
  for (int i = 0; i < sp->nfuncs; i++) reuse_walk(f, sp, &sp->funcs[i], sp->funcs[i].body, &head);
  head = false;
  for (int i = 0; i < sp->nfuncs; i++) once_walk(f, sp, &sp->funcs[i], sp->funcs[i].body, &head);
  head = false;
  for (int i = 0; i < sp->nfuncs; i++) {
    if (!sp->funcs[i].removed) continue;
    if (!head) fputs("statements removed (the SPMD rewrite redistribute; each moves nothing):\n", f);
    head = true;
    fprintf(f, "  statement %d: %s\n", i + 1, sp->funcs[i].removed);
  }
  head = false;
  for (int i = 0; i < sp->nfuncs; i++) copy_walk(f, sp, &sp->funcs[i], sp->funcs[i].body, &head);
}

