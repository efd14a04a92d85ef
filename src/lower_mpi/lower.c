/* lower.c -- ownership maps, bounds analysis and communication selection.
 *
 * Every rank runs the same loops.  Loops at or above the deepest communicate point run the
 * same trip counts on every rank (distributed loops iterate over a padded block of
 * ceil(E/G) local iterations), so that collective operations match; iterations that fall
 * outside a range produce empty boxes.  For each tensor and its communicate point the
 * bounds analysis computes the box of coordinates touched by the iterations nested there,
 * as symbolic functions of the grid coordinates and the enclosing loop counters; the
 * pattern is chosen from the structure of those boxes, and only where it is proven. */
#include "lower_mpi/lower.h"

#include "distal/grid.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>

const char *lw_pattern_name(lw_pattern p) {
  static const char *n[] = {"local", "broadcast", "shift", "reduce", "exchange"};
  return n[p];
}

int lw_loop_pos(const lw_stmt *ls, int var) {
  for (int k = 0; k < ls->nloops; k++)
    if (ls->loops[k]->var == var) return k;
  return -1;
}

int lw_gdim(const lw_program *lp, const cin_node *n) {
  return lp->level_off[n->dist_level] + n->dist_dim;
}

const sym *lw_loop_value(const lw_program *lp, const lw_stmt *ls, int k) {
  const cin_node *n = ls->loops[k];
  if (!n->distributed) return sym_var(n->var);
  int64_t one;
  const sym *c = sym_coord(lw_gdim(lp, n));
  if (sym_is_const(ls->bs[k], &one) && one == 1) return c;
  return sym_add(sym_mul(c, ls->bs[k]), sym_var(ls->lidx_var0 + k));
}

static const sym *one_more(const sym *a) { return sym_add(a, sym_const(1)); }

const sym *lw_rel_base(const ir_stmt *s, const ir_rel *R, const sym *outer) {
  const sym *E = s->vars[R->in[0]].extent;
  if (R->kind == REL_DIVIDE && R->split) return sym_split(R->split - 1, outer, E, R->factor);
  return sym_mul(outer, R->kind == REL_SPLIT ? R->factor : sym_ceildiv(E, R->factor));
}

/* (lower.h) */
const sym *lw_outer_extent(const lw_stmt *ls, int var) {
  const ir_stmt *s = ls->s;
  const ir_var *iv = &s->vars[var];
  if (iv->def < 0) return iv->extent;
  const ir_rel *R = &s->rels[iv->def];
  /* Precondition: the outer variable of a divide into blocks of ceil(E / N); rule: where
   * N > E every block holds one element and those from E on none, so min(N, E) blocks hold
   * them all (a factor far above the extent runs what the data needs, not N empty steps) */
  if (R->kind != REL_DIVIDE || R->split || R->out[0] != var) return iv->extent;
  return sym_min(&ls->facts, iv->extent, s->vars[R->in[0]].extent);
}

/* (lower.h) */
const sym *lw_trip(const lw_stmt *ls, int k) {
  const cin_node *n = ls->loops[k];
  return n->distributed ? ls->bs[k] : lw_outer_extent(ls, n->var);
}

const sym *lw_local_hi(const lw_stmt *ls, int var, const bool *bound, int *parent) {
  const ir_stmt *s = ls->s;
  const ir_var *iv = &s->vars[var];
  const sym *hi = lw_outer_extent(ls, var);
  *parent = -1;
  if (iv->def < 0) return hi;
  const ir_rel *R = &s->rels[iv->def];
  if ((R->kind != REL_DIVIDE && R->kind != REL_SPLIT) || R->out[1] != var) return hi;
  const sym *pext = s->vars[R->in[0]].extent;
  if (!bound[R->out[0]]) return sym_min(&ls->facts, hi, pext);
  /* i = io * step + ii < extent(i); a balanced block ends where the next begins */
  *parent = R->in[0];
  const sym *io = sym_var(R->out[0]);
  if (R->kind == REL_DIVIDE && R->split)
    return sym_sub(lw_rel_base(s, R, one_more(io)), lw_rel_base(s, R, io));
  return sym_min(&ls->facts, hi, sym_sub(pext, lw_rel_base(s, R, io)));
}

void lw_interval(const lw_program *lp, const lw_stmt *ls, int var, int depth, const sym **lo,
                 const sym **hi) {
  const ir_stmt *s = ls->s;
  const ir_var *v = &s->vars[var];
  int k = lw_loop_pos(ls, var);
  if (k >= 0) {
    const cin_node *n = ls->loops[k];
    if (k <= depth) {
      /* a sequential loop never leaves its range; a padded distributed one may */
      const sym *val = lw_loop_value(lp, ls, k);
      *lo = val, *hi = n->distributed ? sym_min(&ls->facts, one_more(val), v->extent) : one_more(val);
    } else if (n->distributed) {
      const sym *base = sym_mul(sym_coord(lw_gdim(lp, n)), ls->bs[k]);
      *lo = base, *hi = sym_min(&ls->facts, v->extent, sym_add(base, ls->bs[k]));
    } else {
      *lo = sym_const(0), *hi = v->extent;
    }
    return;
  }
  if (v->use < 0) { /* not a loop and never replaced: cannot happen for a valid nest */
    *lo = sym_const(0), *hi = v->extent;
    return;
  }
  const ir_rel *r = &s->rels[v->use];
  const sym *a, *b;
  switch (r->kind) {
  case REL_DIVIDE:
  case REL_SPLIT: {
    const sym *a2, *b2;
    lw_interval(lp, ls, r->out[0], depth, &a, &b);
    lw_interval(lp, ls, r->out[1], depth, &a2, &b2);
    const sym *last = lw_rel_base(s, r, sym_sub(b, sym_const(1)));
    *lo = sym_add(lw_rel_base(s, r, a), a2);
    if (r->kind == REL_DIVIDE && r->split) { /* blocks of a balanced partition: [split[a], split[b]) */
      bool whole = sym_is_const(a2, NULL) && a2->c == 0 && sym_equal(b2, s->vars[r->out[1]].extent);
      const sym *end = lw_rel_base(s, r, b);
      *hi = whole ? end : sym_min(&ls->facts, end, sym_add(last, b2));
      return;
    }
    *hi = sym_min(&ls->facts, v->extent, sym_add(last, b2));
    return;
  }
  case REL_FUSE: {
    const sym *ej = s->vars[r->in[1]].extent;
    lw_interval(lp, ls, r->out[0], depth, &a, &b);
    bool single = sym_equal(b, one_more(a)) || sym_equal(b, sym_min(&ls->facts, one_more(a), s->vars[r->out[0]].extent));
    if (var == r->in[0]) {
      *lo = sym_floordiv(a, ej);
      *hi = single ? one_more(*lo) : one_more(sym_floordiv(sym_sub(b, sym_const(1)), ej));
    } else if (single) {
      *lo = sym_mod(&ls->facts, a, ej), *hi = one_more(*lo);
    } else {
      *lo = sym_const(0), *hi = ej;
    }
    return;
  }
  case REL_ROTATE: {
    int rk = lw_loop_pos(ls, r->out[0]);
    lw_interval(lp, ls, r->out[0], depth, &a, &b);
    if (rk >= 0 && rk <= depth) {
      const sym *sum = a;
      for (int q = 0; q < r->nrot; q++) {
        const sym *l2, *h2;
        lw_interval(lp, ls, r->rot[q], depth, &l2, &h2);
        sum = sym_add(sum, l2);
      }
      *lo = sym_mod(&ls->facts, sum, v->extent), *hi = one_more(*lo);
    } else {
      *lo = sym_const(0), *hi = v->extent;
    }
    return;
  }
  case REL_PRECOMPUTE: *lo = sym_const(0), *hi = v->extent; return;
  }
}

/* ---- ownership ------------------------------------------------------------------------ */
/* Blocks of a partitioned dim: ceil(E/G) along the first grid dim that partitions it, and
 * inside each block, along the dims of inner levels, ceil(nominal/G) of the parent's
 * nominal (full) block size -- the runtime's dtl_dist_block. */
static void build_owner(lw_program *lp, int t) {
  const fe_tensor *ft = &lp->ir->ast->tensors[t];
  const sym_facts grid = {.ndims = lp->ndims, .dims = lp->dims};
  lw_owner *o = &lp->owner[t];
  const sym *nominal[LW_MAX_DIMS];
  for (int x = 0; x < ft->order; x++) {
    o->lo[x] = sym_const(0), o->hi[x] = sym_from_size(&ft->dims[x]);
    nominal[x] = o->hi[x];
  }
  for (int g = 0; g < lp->ndims; g++) o->kind[g] = OWN_STAR;
  if (!ft->has_dist) {
    o->everywhere = true;
    return;
  }
  for (int l = 0; l < ft->dist.nlevels && l < lp->nlevels; l++) {
    const fe_dist_level *L = &ft->dist.levels[l];
    for (int k = 0; k < L->ny; k++) {
      int g = lp->level_off[l] + k;
      if (g >= lp->ndims) break;
      const fe_ydim *y = &L->y[k];
      if (y->kind == FE_Y_STAR) o->kind[g] = OWN_STAR;
      else if (y->kind == FE_Y_FIXED) o->kind[g] = OWN_FIXED, o->fixed[g] = y->fixed;
      else {
        int x = y->xindex;
        o->kind[g] = OWN_PART, o->tdim[g] = x;
        int id = fe_split_of(lp->ir->ast, t, g);
        if (l == 0 && id >= 0) { /* a balanced partition (single-level): [split[c], split[c + 1]) */
          o->lo[x] = sym_split(id, sym_coord(g), nominal[x], lp->dims[g]);
          o->hi[x] = sym_split(id, one_more(sym_coord(g)), nominal[x], lp->dims[g]);
          continue;
        }
        const sym *st = sym_ceildiv(nominal[x], lp->dims[g]);
        const sym *base = sym_add(o->lo[x], sym_mul(sym_coord(g), st));
        o->hi[x] = sym_min(&grid, o->hi[x], sym_add(base, st));
        o->lo[x] = base;
        nominal[x] = st;
      }
    }
  }
}

/* ---- boxes and patterns -------------------------------------------------------------------- */
static bool box_uses_coord(const lw_comm *c, int g) {
  for (int x = 0; x < c->order; x++)
    if (sym_uses(c->lo[x], SYM_COORD, g) || sym_uses(c->hi[x], SYM_COORD, g)) return true;
  return false;
}

/* The box lies in the rank's own block along tensor dim x (proven, or equal). */
static bool aligned(const sym_facts *f, const lw_comm *c, const lw_owner *o, int x) {
  if (sym_equal(c->lo[x], o->lo[x]) && sym_equal(c->hi[x], o->hi[x])) return true;
  return sym_prove_le(f, o->lo[x], c->lo[x]) && sym_prove_le(f, c->hi[x], o->hi[x]);
}

static void hull_access(const lw_program *lp, const lw_stmt *ls, lw_comm *c, const int *vars,
                        int n, bool *first) {
  for (int x = 0; x < n; x++) {
    const sym *lo, *hi;
    lw_interval(lp, ls, vars[x], c->depth, &lo, &hi);
    if (*first) c->lo[x] = lo, c->hi[x] = hi;
    else c->lo[x] = sym_min(&ls->facts, c->lo[x], lo), c->hi[x] = sym_max(&ls->facts, c->hi[x], hi);
  }
  *first = false;
}

static void box_of_reads(const lw_program *lp, const lw_stmt *ls, lw_comm *c, const ir_expr *e,
                         bool *first) {
  if (!e) return;
  if (e->kind == IR_ACCESS) {
    if (e->tensor == c->tensor) hull_access(lp, ls, c, e->vars, e->nidx, first);
    return;
  }
  box_of_reads(lp, ls, c, e->a, first);
  box_of_reads(lp, ls, c, e->b, first);
}

/* rotate: the box at the next iteration of the rotated loop r equals the box of the
 * neighbour at coordinate c+1 along g now, and coordinates of g enter only modulo the
 * grid size, so the wrap-around of the periodic grid matches the modulo of rotate. */
static bool try_shift(const lw_program *lp, const lw_stmt *ls, lw_comm *c) {
  if (c->depth < 0) return false;
  const cin_node *n = ls->loops[c->depth];
  const ir_var *rv = &ls->s->vars[n->var];
  if (n->distributed || rv->def < 0 || ls->s->rels[rv->def].kind != REL_ROTATE) return false;
  for (int g = 0; g < lp->ndims; g++) {
    if (!box_uses_coord(c, g)) continue;
    bool ok = true;
    for (int x = 0; x < c->order && ok; x++) {
      const sym *bd[2] = {c->lo[x], c->hi[x]};
      for (int q = 0; q < 2 && ok; q++) {
        const sym *next = sym_subst(&ls->facts, bd[q], SYM_VAR, n->var, one_more(sym_var(n->var)));
        const sym *nb = sym_subst(&ls->facts, bd[q], SYM_COORD, g, one_more(sym_coord(g)));
        ok = sym_equal(next, nb) && sym_coord_only_under_mod(bd[q], g, lp->dims[g]);
      }
    }
    if (ok) {
      c->pattern = PAT_SHIFT, c->shift_dim = g;
      c->why = "rotate makes the next box the neighbour's current one";
      return true;
    }
  }
  return false;
}

static void select_input(const lw_program *lp, const lw_stmt *ls, lw_comm *c) {
  const lw_owner *o = &lp->owner[c->tensor];
  c->pattern = PAT_EXCHANGE;
  c->why = "boxes follow no collective pattern";
  if (o->everywhere) {
    c->pattern = PAT_LOCAL, c->why = "replicated on every rank";
    return;
  }
  bool fail = false;
  unsigned mask = 0;
  for (int g = 0; g < lp->ndims; g++) {
    bool indep = !box_uses_coord(c, g);
    int64_t one;
    switch (o->kind[g]) {
    case OWN_PART:
      if (aligned(&ls->facts, c, o, o->tdim[g])) break;
      if (indep) mask |= 1u << g;
      else fail = true;
      break;
    case OWN_FIXED:
      if (sym_is_const(lp->dims[g], &one) && one == 1) break;
      if (indep) mask |= 1u << g;
      else fail = true;
      break;
    case OWN_STAR: break;
    }
  }
  if (!fail) {
    c->pattern = mask ? PAT_BCAST : PAT_LOCAL, c->mask = mask;
    c->why = mask ? "every rank along these dims needs the same box" : "the box is the rank's own block";
    return;
  }
  try_shift(lp, ls, c);
}

static void select_output(const lw_program *lp, const lw_stmt *ls, lw_comm *c) {
  const lw_owner *o = &lp->owner[c->tensor];
  bool local = true, reduce = true, any_star = false;
  unsigned mask = 0;
  for (int g = 0; g < lp->ndims; g++) {
    bool bound = ls->exec_mask >> g & 1;
    bool indep = !box_uses_coord(c, g);
    lw_own_kind k = o->kind[g];
    bool al = k == OWN_PART && aligned(&ls->facts, c, o, o->tdim[g]);
    if (!((bound && al) || (!bound && k == OWN_STAR))) local = false;
    if (!bound || al) continue;
    if ((k == OWN_FIXED || k == OWN_STAR) && indep) {
      mask |= 1u << g;
      if (k == OWN_STAR) any_star = true;
      else c->root[g] = o->fixed[g];
    } else {
      reduce = false;
    }
  }
  if (local) {
    c->pattern = PAT_LOCAL, c->why = "the owner computes its own block";
  } else if (reduce) {
    c->pattern = PAT_REDUCE, c->mask = mask, c->allreduce = any_star;
    c->why = mask ? "ranks along these dims produce partial sums of the same box"
                  : "each rank keeps its own part of the box it computed";
  } else {
    c->pattern = PAT_EXCHANGE, c->why = "produced boxes follow no collective pattern";
  }
}

/* ---- statements ---------------------------------------------------------------------------- */
static bool expr_reads(const ir_expr *e, int t) {
  if (!e) return false;
  if (e->kind == IR_ACCESS) return e->tensor == t;
  return expr_reads(e->a, t) || expr_reads(e->b, t);
}

static int comm_depth(const lw_stmt *ls, int t) {
  int deepest = -1;
  for (int k = 0; k < ls->nloops; k++)
    if (ls->loops[k]->distributed) deepest = k;
  for (int k = 0; k < ls->nloops; k++) {
    const cin_node *n = ls->loops[k];
    for (int q = 0; q < n->ncomm; q++)
      if (n->comm[q] == t) {
        /* a group of directly nested distributed loops means the task: the innermost */
        int d = k;
        while (ls->loops[d]->distributed && d + 1 < ls->nloops && ls->loops[d + 1]->distributed) d++;
        return d;
      }
  }
  return deepest;
}

/* Try the analysis again assuming that all grid params of the machine are equal (the
 * paper's schedules write Grid(gx, gy) for algorithms that want a square grid). */
static void try_assumption(lw_program *lp, const lw_stmt *ls, lw_comm *c) {
  int params[LW_MAX_DIMS], np = 0;
  for (int g = 0; g < lp->ndims; g++) {
    const sym *d = lp->dims[g];
    if (d->kind != SYM_PARAM) continue;
    bool seen = false;
    for (int q = 0; q < np; q++) seen |= params[q] == d->id;
    if (!seen) params[np++] = d->id;
  }
  if (np < 2) return;
  const sym *canon = sym_param(params[0]);
  lw_program alt_lp = *lp;
  lw_stmt alt_ls = *ls; /* its proofs see the grid with the params equal */
  alt_ls.facts.dims = alt_lp.dims;
  lw_owner own = lp->owner[c->tensor];
  lw_comm *alt = ir_alloc(sizeof *alt);
  *alt = *c;
  for (int q = 1; q < np; q++) {
    for (int g = 0; g < lp->ndims; g++) alt_lp.dims[g] = sym_subst(&ls->facts, alt_lp.dims[g], SYM_PARAM, params[q], canon);
  }
  for (int q = 1; q < np; q++) {
    for (int x = 0; x < alt->order; x++) {
      alt->lo[x] = sym_subst(&alt_ls.facts, alt->lo[x], SYM_PARAM, params[q], canon);
      alt->hi[x] = sym_subst(&alt_ls.facts, alt->hi[x], SYM_PARAM, params[q], canon);
      own.lo[x] = sym_subst(&alt_ls.facts, own.lo[x], SYM_PARAM, params[q], canon);
      own.hi[x] = sym_subst(&alt_ls.facts, own.hi[x], SYM_PARAM, params[q], canon);
    }
  }
  lw_owner *owners = ir_alloc((lp->ir->ast->ntensors + 1) * sizeof *owners);
  memcpy(owners, lp->owner, lp->ir->ast->ntensors * sizeof *owners);
  owners[c->tensor] = own;
  alt_lp.owner = owners;
  if (c->output) select_output(&alt_lp, &alt_ls, alt);
  else select_input(&alt_lp, &alt_ls, alt);
  if (alt->pattern == PAT_EXCHANGE) return;
  /* keep the original box formulas: with equal params they evaluate the same */
  memcpy(alt->lo, c->lo, sizeof c->lo);
  memcpy(alt->hi, c->hi, sizeof c->hi);
  c->alt = alt;
  c->nassume = np;
  memcpy(c->assume, params, np * sizeof *params);
}

static void add_comm(lw_program *lp, lw_stmt *ls, int t, bool output) {
  const cin_node *asg = cin_assign(ls->s->root);
  ls->comm = ir_reserve(ls->comm, ls->ncomm, ls->ncomm + 1, &ls->comm_cap, sizeof *ls->comm);
  lw_comm *c = &ls->comm[ls->ncomm++];
  c->tensor = t, c->output = output, c->depth = comm_depth(ls, t);
  c->order = lp->ir->ast->tensors[t].order;
  bool first = true;
  if (output) hull_access(lp, ls, c, asg->lhs_vars, asg->nlhs, &first);
  else box_of_reads(lp, ls, c, ls->rhs, &first);
  if (output) select_output(lp, ls, c);
  else select_input(lp, ls, c);
  if (c->pattern == PAT_EXCHANGE) try_assumption(lp, ls, c);
}

/* The loops of the statement in nest order, through the consumers of where nodes (arrays
 * of the statement, as long as the nest). */
static int loop_chain(const cin_node *root, lw_stmt *ls) {
  int n = 0, nw = 0;
  for (const cin_node *c = root; c && (c->kind == CIN_FORALL || c->kind == CIN_WHERE);
       c = c->kind == CIN_FORALL ? c->body : c->consumer)
    c->kind == CIN_FORALL ? n++ : nw++;
  ls->loops = ir_alloc((n + 1) * sizeof *ls->loops);
  ls->bs = ir_alloc((n + 1) * sizeof *ls->bs);
  ls->where = ir_alloc((nw + 1) * sizeof *ls->where);
  ls->where_depth = ir_alloc((nw + 1) * sizeof *ls->where_depth);
  n = 0;
  const cin_node *c = root;
  ls->nwhere = 0;
  for (;;) {
    while (c && c->kind == CIN_FORALL) {
      ls->loops[n++] = c;
      c = c->body;
    }
    if (!c || c->kind != CIN_WHERE) break;
    ls->where_depth[ls->nwhere] = n;
    ls->where[ls->nwhere++] = c;
    c = c->consumer;
  }
  return n;
}

static const cin_node *where_of(const lw_stmt *ls, int workspace) {
  for (int w = 0; w < ls->nwhere; w++)
    if (ls->where[w]->workspace == workspace) return ls->where[w];
  return NULL;
}

/* e with variable `from` renamed `to` and every workspace access replaced by what its
 * producer computes (at the access's index). */
static ir_expr *expand(const ir_program *ir, const lw_stmt *ls, const ir_expr *e, int from, int to) {
  if (!e) return NULL;
  ir_expr *x = ir_alloc(sizeof *x);
  *x = *e;
  if (e->kind == IR_ACCESS) {
    const cin_node *w = e->tensor >= ir->ast->ntensors ? where_of(ls, e->tensor) : NULL;
    if (w) {
      int at = e->vars[0] == from ? to : e->vars[0];
      const cin_node *pr = w->producer;
      ir_expr *y = expand(ir, ls, pr->body->rhs, pr->var, at);
      if (e->nguards) { /* keep the access's own placement on the expansion */
        ir_expr *z = ir_alloc(sizeof *z);
        *z = *y;
        z->nguards = e->nguards, z->guards = e->guards;
        return z;
      }
      return y;
    }
    x->vars = ir_alloc((e->nidx + 1) * sizeof *x->vars);
    for (int k = 0; k < e->nidx; k++) x->vars[k] = e->vars[k] == from ? to : e->vars[k];
    return x;
  }
  x->a = expand(ir, ls, e->a, from, to);
  x->b = expand(ir, ls, e->b, from, to);
  return x;
}

static const ir_expr *expand_rhs(const ir_program *ir, const ir_stmt *s, const lw_stmt *ls, const ir_expr *rhs) {
  (void)s;
  return ls->nwhere ? expand(ir, ls, rhs, -1, -1) : rhs;
}

static bool reads_sparse(const fe_program *p, const ir_expr *e) {
  if (!e) return false;
  if (e->kind == IR_ACCESS) return e->tensor < p->ntensors && lw_sparse(p, e->tensor);
  return reads_sparse(p, e->a) || reads_sparse(p, e->b);
}

/* What the code generator supports of precompute: on the CPU target, workspaces computed
 * by a plain loop below every communicate point and every distributed loop. */
static bool check_where(lw_program *lp, const ir_stmt *s, lw_stmt *ls) {
  fe_source *src = lp->ir->ast->src;
  for (int w = 0; w < ls->nwhere; w++) {
    const cin_node *pr = ls->where[w]->producer;
    fe_loc loc = s->vars[pr->var].loc;
    if (lp->cuda) {
      fe_error(src, loc, "precompute: not supported by the CUDA target yet");
      return false;
    }
    if (pr->kind != CIN_FORALL || !pr->body || pr->body->kind != CIN_ASSIGN || pr->distributed || pr->par != PAR_NONE ||
        pr->kernel || s->vars[pr->var].def < 0 || s->rels[s->vars[pr->var].def].kind != REL_PRECOMPUTE) {
      fe_error(src, loc, "precompute: the workspace loop '%s' was scheduled; only the consumer's loops can be",
               s->vars[pr->var].name);
      return false;
    }
    if (reads_sparse(lp->ir->ast, pr->body->rhs)) {
      fe_error(src, loc, "precompute: the expression reads a sparse tensor; precompute dense subexpressions only");
      return false;
    }
    for (int k = 0; k < ls->where_depth[w]; k++)
      if (ls->loops[k]->par == PAR_CPU_THREAD) {
        fe_error(src, ls->loops[k]->par_loc, /* the parallelize command of this loop */
                 "parallelize: loop '%s' encloses precompute's workspace '%s', which its threads would share; "
                 "parallelize a loop inside it",
                 s->vars[ls->loops[k]->var].name, s->work[ls->where[w]->workspace - lp->ir->ast->ntensors].name);
        return false;
      }
    for (int k = ls->where_depth[w]; k < ls->nloops; k++)
      if (ls->loops[k]->distributed) {
        fe_error(src, ls->loops[k]->dist_loc,
                 "distribute: loop '%s' lies inside precompute's loop; distribute the loops that enclose it",
                 s->vars[ls->loops[k]->var].name);
        return false;
      }
  }
  return true;
}

bool lw_sparse(const fe_program *p, int t) {
  if (t < 0 || t >= p->ntensors) return false; /* a precompute workspace: dense */
  return fe_tensor_sparse(&p->tensors[t]);
}

/* the extent of the fibers lw_density counts LW_SPARSE_FIBER entries in (0: the tensor is
 * counted dense) */
static int64_t fiber_extent(const fe_program *p, int t, const int64_t *params) {
  if (!lw_sparse(p, t)) return 0;
  const fe_tensor *T = &p->tensors[t];
  int k = T->order - 1; /* its innermost compressed level: the levels inside it are dense */
  while (k > 0 && T->formats[k] != FE_COMPRESSED) k--;
  const fe_size *sz = &T->dims[k];
  int64_t ext = sz->is_param ? (params && params[sz->param] > 0 ? params[sz->param] : 1024) : sz->value;
  return ext > LW_SPARSE_FIBER ? ext : 0;
}

double lw_density(const fe_program *p, int t, const int64_t *params) {
  int64_t ext = fiber_extent(p, t, params);
  return ext ? (double)LW_SPARSE_FIBER / (double)ext : 1;
}

int64_t lw_entries(const fe_program *p, int t, const int64_t *params, int64_t dense) {
  int64_t ext = fiber_extent(p, t, params);
  /* the product first: exact where the result is a whole number */
  return ext ? (int64_t)ceil((double)dense * LW_SPARSE_FIBER / (double)ext) : dense;
}

double lw_expr_density(const fe_program *p, const ir_expr *e, const int64_t *params) {
  if (!e) return 1;
  switch (e->kind) {
  case IR_ACCESS:
    return lw_density(p, e->tensor, params);
  case IR_MUL: {
    double a = lw_expr_density(p, e->a, params), b = lw_expr_density(p, e->b, params);
    return a < b ? a : b;
  }
  case IR_DIV: /* a zero numerator stays zero */
  case IR_NEG:
    return lw_expr_density(p, e->a, params);
  case IR_ADD:
  case IR_SUB: { /* an operand placed outside a summed loop (its guards) adds no iterations */
    double a = e->a->nguards ? 0 : lw_expr_density(p, e->a, params), b = e->b->nguards ? 0 : lw_expr_density(p, e->b, params);
    return a > b ? a : b > 0 ? b : 1;
  }
  default: /* a number, a param, a function (f(0) need not be 0) */
    return 1;
  }
}

static bool lower_stmt(lw_program *lp, ir_stmt *s, lw_stmt *ls) {
  fe_source *src = lp->ir->ast->src;
  ls->s = s;
  ls->kernel_depth = -1;
  ls->nloops = loop_chain(s->root, ls);
  ls->comm = NULL, ls->comm_cap = 0; /* the output, each tensor read (add_comm grows it) */
  ls->lidx_var0 = s->nvars;
  ls->facts = (sym_facts){.ndims = lp->ndims, .dims = lp->dims, .nvars = s->nvars + ls->nloops,
                          .var_max = ir_alloc((s->nvars + ls->nloops + 1) * sizeof *ls->facts.var_max)};
  for (int k = 0; k < ls->nloops; k++) {
    const cin_node *n = ls->loops[k];
    if (!n->distributed) ls->facts.var_max[n->var] = sym_sub(s->vars[n->var].extent, sym_const(1));
    if (n->distributed && n->dist_dim < 0) { /* numbered only outside precompute's consumers */
      fe_error(src, n->dist_loc, "distribute: loop '%s' lies inside precompute's loop; distribute the loops that enclose it",
               s->vars[n->var].name);
      return false;
    }
    if (n->distributed) {
      int gd = lw_gdim(lp, n);
      ls->exec_mask |= 1u << gd;
      ls->bs[k] = sym_ceildiv(s->vars[n->var].extent, lp->dims[gd]);
      ls->facts.var_max[ls->lidx_var0 + k] = sym_sub(ls->bs[k], sym_const(1));
    }
    if (n->kernel) ls->kernel_depth = k;
    if (n->par >= PAR_GPU_BLOCK && !lp->cuda) {
      fe_error(src, n->par_loc, "parallelize: GPU units need a gpu machine and --target cuda");
      return false;
    }
  }
  const cin_node *asg = cin_assign(s->root);
  int lhs = asg->lhs_tensor;
  const fe_program *p = lp->ir->ast;
  ls->rhs = expand_rhs(lp->ir, s, ls, asg->rhs);
  if (ls->nwhere && !check_where(lp, s, ls)) return false;
  if (lw_sparse(p, lhs)) { /* a sparse result: entries appended in order, then assembled */
    if (expr_reads(ls->rhs, lhs)) {
      fe_error(src, s->ast->loc,
               "statement reads the sparse tensor '%s' it writes; write the result to another tensor",
               p->tensors[lhs].name);
      return false;
    }
    for (int k = 0; k < ls->nloops; k++)
      if (ls->loops[k]->par != PAR_NONE || ls->loops[k]->kernel) {
        /* the command that set this loop's threads, vector lanes or kernel */
        fe_error(src, ls->loops[k]->kernel ? ls->loops[k]->kernel_loc : ls->loops[k]->par_loc,
                 "%s: the statement writes sparse tensor '%s', whose entries are appended in order by one "
                 "thread (no threads, vector lanes or kernel)",
                 ls->loops[k]->kernel ? "substitute" : "parallelize", p->tensors[lhs].name);
        return false;
      }
  }
  for (int t = 0; t < p->ntensors; t++)
    if (ls->kernel_depth >= 0 && lw_sparse(p, t) && expr_reads(ls->rhs, t)) {
      fe_error(src, ls->loops[ls->kernel_depth]->kernel_loc, /* the substitute command */
               "substitute: the kernel reads sparse tensor '%s'; leaf kernels take dense operands "
               "(leave the loops to the compiler, which iterates over the stored entries)",
               p->tensors[t].name);
      return false;
    }
  add_comm(lp, ls, lhs, true);
  if (lw_sparse(p, lhs) && ls->comm[ls->ncomm - 1].pattern != PAT_LOCAL) {
    /* the produced entries go to the holders point to point and are summed there */
    lw_comm *c = &ls->comm[ls->ncomm - 1];
    c->pattern = PAT_EXCHANGE;
    c->why = "sparse: the produced entries, point to point to the holders, summed there";
    c->alt = NULL;
    c->nassume = 0;
  }
  ls->lhs_on_rhs = expr_reads(ls->rhs, lhs);
  for (int t = 0; t < lp->ir->ast->ntensors; t++)
    if (expr_reads(ls->rhs, t)) {
      add_comm(lp, ls, t, false);
      lw_comm *c = &ls->comm[ls->ncomm - 1];
      if (lw_sparse(p, t) && c->pattern == PAT_BCAST && !c->alt && !c->nassume && !lp->cuda) {
        /* every rank along the mask needs the same box: its stored entries, broadcast */
        c->why = "sparse: every rank along these dims needs the same box: its stored entries, broadcast from the holders";
      } else if (lw_sparse(p, t) && c->pattern != PAT_LOCAL) {
        /* a sparse piece moves as its stored entries, point to point from the holders */
        c->pattern = PAT_EXCHANGE;
        c->why = "sparse: the stored entries of the box, point to point from the holders";
        c->alt = NULL;
        c->nassume = 0;
      }
    }
  ls->outer = 0;
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].depth + 1 > ls->outer) ls->outer = ls->comm[q].depth + 1;
  for (int w = 0; w < ls->nwhere; w++)
    if (ls->where_depth[w] < ls->outer) {
      const cin_node *pr = ls->where[w]->producer;
      fe_error(src, s->vars[pr->var].loc,
               "precompute: the workspace would be computed above a communicate point (loop '%s' "
               "encloses one); precompute a loop nested inside every communicate loop",
               s->vars[ls->loops[ls->where_depth[w]]->var].name);
      return false;
    }
  for (int k = 0; k < ls->outer; k++) /* MPI's calls of a communicate point run on the rank's own thread */
    if (ls->loops[k]->par == PAR_CPU_THREAD && !lp->cuda) {
      fe_error(src, ls->loops[k]->par_loc,
               "parallelize: loop '%s' lies above a communicate point (its iterations communicate); "
               "parallelize a loop nested inside every communicate loop",
               s->vars[ls->loops[k]->var].name);
      return false;
    }
  if (ls->kernel_depth >= 0 && ls->kernel_depth < ls->outer) {
    const cin_node *n = ls->loops[ls->kernel_depth];
    fe_error(src, n->kernel_loc,
             "substitute: loop '%s' lies above a communicate point; the kernel must be nested "
             "inside every communicate loop",
             s->vars[n->var].name);
    return false;
  }
  return true;
}

lw_program *lw_lower(ir_program *ir, bool cuda) { return lw_lower_stmt(ir, cuda, -1, NULL); }

/* lw_lower's program with its machine and tensors checked and its grid dims set, no owners and
 * no statements yet (NULL: errors, reported) */
static lw_program *lower_header(ir_program *ir, bool cuda) {
  fe_program *p = ir->ast;
  fe_source *src = p->src;
  lw_program *lp = ir_alloc(sizeof *lp);
  lp->ir = ir;
  lp->cuda = cuda;
  if (ir->machine >= 0) {
    const fe_machine *M = &p->machines[ir->machine];
    lp->nlevels = M->nlevels;
    for (int l = 0; l < M->nlevels; l++) {
      const fe_grid *G = &M->levels[l];
      if (G->kind == FE_GPU && !cuda) {
        fe_error(src, G->loc, "machine '%s' has a gpu level; the cpu target cannot place tensors "
                              "in GPU memory (use --target cuda, the default for gpu machines)", M->name);
        return NULL;
      }
      if (lp->ndims + G->ndims > LW_MAX_DIMS || l >= LW_MAX_DIMS) {
        fe_error(src, M->loc, "machine '%s' has more than %d dimensions in all", M->name, LW_MAX_DIMS);
        return NULL;
      }
      lp->level_off[l] = lp->ndims;
      for (int d = 0; d < G->ndims; d++) lp->dims[lp->ndims++] = sym_from_size(&G->dims[d]);
    }
  } else {
    lp->ndims = 1, lp->nlevels = 1;
    lp->dims[0] = sym_const(1);
  }
  for (int t = 0; t < p->ntensors; t++) {
    const fe_tensor *ft = &p->tensors[t];
    if (ft->order > LW_MAX_DIMS) {
      fe_error(src, ft->loc, "tensor '%s' has more than %d dimensions", ft->name, LW_MAX_DIMS);
      return NULL;
    }
    if (lw_sparse(p, t) && cuda) {
      fe_error(src, ft->loc, "tensor '%s' is sparse: the CUDA target (gpu machines) supports dense tensors only", ft->name);
      return NULL;
    }

  }
  return lp;
}

const lw_owner *lw_owners(ir_program *ir, bool cuda) {
  lw_program *lp = lower_header(ir, cuda);
  if (!lp) return NULL;
  lp->owner = ir_alloc((ir->ast->ntensors + 1) * sizeof *lp->owner);
  for (int t = 0; t < ir->ast->ntensors; t++) build_owner(lp, t);
  return lp->owner;
}

lw_program *lw_lower_stmt(ir_program *ir, bool cuda, int only, const lw_owner *owners) {
  lw_program *lp = lower_header(ir, cuda);
  if (!lp) return NULL;
  if (owners) lp->owner = (lw_owner *)owners; /* read only from here on */
  else {
    lp->owner = ir_alloc((ir->ast->ntensors + 1) * sizeof *lp->owner);
    for (int t = 0; t < ir->ast->ntensors; t++) build_owner(lp, t);
  }
  lp->nstmts = ir->nstmts;
  lp->stmts = ir_alloc((ir->nstmts + 1) * sizeof *lp->stmts);
  for (int i = 0; i < ir->nstmts; i++)
    if ((only < 0 || i == only) && !lower_stmt(lp, &ir->stmts[i], &lp->stmts[i])) return NULL;
  return lp;
}

/* ---- the plan, printed ------------------------------------------------------------------- */
typedef struct {
  const lw_program *lp;
  const lw_stmt *ls;
} namer_ctx;

static void plan_namer(FILE *f, const sym *a, void *vctx) {
  namer_ctx *c = vctx;
  if (a->kind == SYM_PARAM) fputs(c->lp->ir->ast->params[a->id].name, f);
  else if (a->kind == SYM_COORD) fprintf(f, "coord%d", a->id);
  else if (a->id < c->ls->s->nvars) fputs(c->ls->s->vars[a->id].name, f);
  else fprintf(f, "%s_local", c->ls->s->vars[c->ls->loops[a->id - c->ls->lidx_var0]->var].name);
}

static int64_t type_size(fe_type t) { return t == FE_FLOAT || t == FE_INT32 ? 4 : 8; }

/* Over the iterations of loops [0, depth], for the rank at coords: the box volumes summed
 * (total, count steps), their largest (max), and what of them the rank receives (recv: a
 * box less the part of it the rank holds, lw_step_received), at most `budget` steps; failed
 * where a formula cannot be evaluated. */
typedef struct {
  int64_t total, recv, count, max, budget;
  bool failed;
  const sym *const *trip; /* the loops' trip counts so folded (NULL: lw_trip's) */
  const lw_comm *at; /* the pattern lw_comm_at chose (NULL: not yet) */
  lw_held held;      /* the rank's block of the tensor, once at is known */
  /* hoisted (hoist_bounds): bound b (lo[0..order), then hi, folded at the rank) is evaluated
   * where the deepest loop whose variable it uses (dep[b], -1: none) takes a value, into val[b]
   * (bad: it failed, an error only where a step is reached); else each step evaluates c's */
  bool hoisted;
  int dep[2 * LW_MAX_DIMS];
  sym_code code[2 * LW_MAX_DIMS]; /* the bounds compiled */
  int64_t val[2 * LW_MAX_DIMS];
  bool bad[2 * LW_MAX_DIMS];
} vol_acc;

bool lw_owner_whole(const lw_owner *o, int order) {
  for (int x = 0; x < order && !o->everywhere; x++)
    if (sym_has_split(o->lo[x]) || sym_has_split(o->hi[x])) return false;
  return true;
}

void lw_held_block(const lw_program *lp, const lw_owner *o, int order, lw_pattern pat, int shift_dim, bool output, unsigned exec_mask,
                   const sym_env *env, lw_held *h) {
  *h = (lw_held){.known = lw_owner_whole(o, order), .holds = true, .copies = 1, .shift_len = 0, .sends = true,
                 .accumulate = output && pat == PAT_EXCHANGE};
  sym_env grid = {.params = env->params};
  for (int g = 0; g < lp->ndims; g++) {
    int64_t d;
    bool dk = sym_eval(lp->dims[g], &grid, &d), exec = exec_mask >> g & 1;
    lw_own_kind kind = o->everywhere ? OWN_STAR : o->kind[g];
    if (kind == OWN_FIXED && env->coords[g] != o->fixed[g]) h->holds = false, h->sends &= exec;
    /* an accumulate goes to the holders along the grid dims its loops are distributed over,
     * and along the others to the holder at the rank's own coordinate (the runtime's
     * for_each_holder with exec_mask): every copy of a '*' dim of the first kind, the part of
     * the box in its own block along a partitioned dim of the second */
    if (h->accumulate && kind == OWN_STAR && exec && dk && d > 1) h->copies *= d;
    if (h->accumulate && kind == OWN_PART && !exec) h->own_only[o->tdim[g]] = true;
    if (pat == PAT_SHIFT && g == shift_dim) h->shift_len = dk ? d : 0;
  }
  for (int x = 0; x < order && h->known; x++)
    h->known = sym_eval(o->lo[x], env, &h->lo[x]) && sym_eval(o->hi[x], env, &h->hi[x]);
}

int64_t lw_step_received(lw_pattern pat, const lw_held *h, int order, int64_t step, int64_t v, const int64_t *lo, const int64_t *hi) {
  if (h->accumulate && !h->known) return v * h->copies;
  if (pat == PAT_REDUCE || !h->known) return v;
  if (pat == PAT_SHIFT && step > 0) return h->shift_len == 1 ? 0 : v;
  int64_t held = h->holds ? 1 : 0, to = h->accumulate ? (h->sends ? h->copies : 0) : v;
  for (int x = 0; x < order; x++) {
    int64_t l = lo[x] > h->lo[x] ? lo[x] : h->lo[x], u = hi[x] < h->hi[x] ? hi[x] : h->hi[x], in = u > l ? u - l : 0;
    held *= in;
    if (h->accumulate) to *= h->own_only[x] ? in : hi[x] > lo[x] ? hi[x] - lo[x] : 0;
  }
  return to - (held < to ? held : to);
}

int lw_loop_slot(const lw_stmt *ls, int k) { return ls->loops[k]->distributed ? ls->lidx_var0 + k : ls->loops[k]->var; }

/* The steps of communicate point c over the iterations of loops [k, depth] (the last loop's
 * trip count added at once, not iterated; trip: the loops' trip counts, folded), counted
 * until they pass `budget`: sum_volume, which evaluates every step's box, then runs only
 * where it can finish.  -1 where a trip count cannot be evaluated. */
static int64_t count_steps(const lw_stmt *ls, const lw_comm *c, int k, int64_t *vars, sym_env *env, int64_t budget,
                           const sym *const *trip) {
  if (k > c->depth) return 1;
  int64_t ext, steps = 0;
  int slot = lw_loop_slot(ls, k);
  if (!sym_eval(trip[k], env, &ext)) return -1;
  if (k == c->depth) return ext > 0 ? ext : 0;
  for (int64_t i = 0; i < ext && steps <= budget; i++) {
    vars[slot] = i;
    int64_t s = count_steps(ls, c, k + 1, vars, env, budget - steps, trip);
    if (s < 0) return -1;
    steps += s;
  }
  return steps;
}

/* vol_acc's hoisted bounds that loop `level` (-1: none) is the deepest to change */
static void eval_bounds(const lw_comm *c, vol_acc *a, int level, const sym_env *env) {
  for (int b = 0; b < 2 * c->order; b++)
    if (a->dep[b] == level) a->bad[b] = !sym_run(&a->code[b], env, &a->val[b]);
}

/* Precondition: lo, hi are c's box bounds folded at the rank (sym_fold) and vars holds 0 for
 * every variable no loop of [0, c->depth] sets (as sum_volume reads them).  Rule: a bound is
 * evaluated once per value of the deepest of those loops whose variable it uses, not at every
 * step below it: the same value at each step, and a failure reported only where a step is
 * reached, as there. */
static void hoist_bounds(const lw_stmt *ls, const lw_comm *c, const sym *const *lo, const sym *const *hi, vol_acc *a,
                         const sym_env *env) {
  for (int b = 0; b < 2 * c->order; b++) {
    const sym *e = b < c->order ? lo[b] : hi[b - c->order];
    a->code[b] = sym_compile(e);
    a->dep[b] = -1;
    for (int k = 0; k <= c->depth && k < ls->nloops; k++)
      if (sym_uses(e, SYM_VAR, lw_loop_slot(ls, k))) a->dep[b] = k;
  }
  a->hoisted = true;
  eval_bounds(c, a, -1, env);
}

static void sum_volume(const lw_program *lp, const lw_stmt *ls, const lw_comm *c, int k, int64_t *vars, sym_env *env,
                       vol_acc *a) {
  if (k > c->depth) {
    if (--a->budget < 0) return;
    int64_t v = 1, lo[LW_MAX_DIMS], hi[LW_MAX_DIMS];
    for (int x = 0; x < c->order; x++) {
      if (a->hoisted ? a->bad[x] || a->bad[c->order + x] : !sym_eval(c->lo[x], env, &lo[x]) || !sym_eval(c->hi[x], env, &hi[x])) {
        a->failed = true;
        return;
      }
      if (a->hoisted) lo[x] = a->val[x], hi[x] = a->val[c->order + x];
      v *= hi[x] > lo[x] ? hi[x] - lo[x] : 0;
    }
    if (!a->at) {
      a->at = lw_comm_at(lp, c, env->params);
      lw_held_block(lp, &lp->owner[c->tensor], c->order, a->at->pattern, a->at->shift_dim, c->output, ls->exec_mask, env, &a->held);
    }
    a->recv += lw_step_received(a->at->pattern, &a->held, c->order, a->count, v, lo, hi);
    a->total += v, a->count++;
    if (v > a->max) a->max = v;
    return;
  }
  int64_t ext;
  int slot = lw_loop_slot(ls, k);
  if (!sym_eval(a->trip ? a->trip[k] : lw_trip(ls, k), env, &ext)) {
    a->failed = true;
    return;
  }
  for (int64_t i = 0; i < ext && a->budget >= 0; i++) {
    vars[slot] = i;
    if (a->hoisted) eval_bounds(c, a, k, env);
    sum_volume(lp, ls, c, k + 1, vars, env, a);
  }
}

double lw_kernel_share(int64_t len, double points) {
  double thin = len <= 0 || len >= 128 ? 1.0 : (double)len / 128.0, edge = points > 0 ? cbrt(points) / 128.0 : 1.0;
  return thin * (edge < 1 ? edge : 1.0);
}

double lw_kernel_speed(double s, int64_t len, double points) { return s > 1 ? 1 + (s - 1) * lw_kernel_share(len, points) : 1; }

void lw_bcast_weight(int64_t q, double *bytes, double *msgs) {
  int lg = 0;
  while (q > 1 && ((int64_t)1 << lg) < q) lg++;
  *bytes = q > 1 ? 2.0 * (double)(q - 1) / (double)q : 0;
  *msgs = lg;
}

unsigned lw_bcast_mask(const lw_program *lp, const lw_comm *c, const int64_t *params) {
  c = lw_comm_at(lp, c, params);
  return c->pattern == PAT_BCAST ? c->mask : 0;
}

bool lw_comm_alone(const lw_program *lp, const lw_comm *c, const int64_t *params) {
  c = lw_comm_at(lp, c, params);
  if ((c->pattern != PAT_BCAST && c->pattern != PAT_REDUCE) || !c->mask) return false;
  for (int g = 0; g < lp->ndims; g++) {
    int64_t d;
    if (c->mask >> g & 1 && (!sym_eval(lp->dims[g], &(sym_env){.params = params}, &d) || d != 1)) return false;
  }
  return true;
}

/* whether communicate point c's group (a broadcast's or reduction's, else the grid) is within
 * one node of per_node ranks, for the rank at env's coordinates */
static bool in_node(const lw_program *lp, const lw_comm *c, sym_env *env, int64_t per_node) {
  int64_t dims[LW_MAX_DIMS];
  for (int g = 0; g < lp->ndims; g++)
    if (!sym_eval(lp->dims[g], &(sym_env){.params = env->params}, &dims[g])) return false;
  unsigned mask = c->pattern == PAT_BCAST || c->pattern == PAT_REDUCE ? c->mask : 0;
  return dtl_group_in_node(per_node, lp->ndims, dims, env->coords, mask);
}

bool lw_stmt_cost(const lw_program *lp, int i, const int64_t *params, lw_cost *out) {
  int64_t zero[LW_MAX_DIMS] = {0};
  return lw_stmt_cost_at(lp, i, params, zero, 0, out);
}

int lw_nsamples(const lw_program *lp) { return lp->ndims + 2; }

static bool sample_at(const lw_program *lp, const int64_t *params, int k, int64_t *coords) {
  for (int g = 0; g < lp->ndims; g++) {
    int64_t d;
    if (!sym_eval(lp->dims[g], &(sym_env){.params = params}, &d)) return false;
    bool last = k == 1 ? g % 2 == 0 : k - 2 == g;
    coords[g] = last && d > 0 ? d - 1 : 0;
  }
  return true;
}

bool lw_sample(const lw_program *lp, const int64_t *params, int k, int64_t *coords, bool *repeat) {
  if (!sample_at(lp, params, k, coords)) return false;
  *repeat = false;
  for (int j = 0; j < k && !*repeat; j++) {
    int64_t other[LW_MAX_DIMS];
    *repeat = sample_at(lp, params, j, other) && !memcmp(other, coords, sizeof *coords * (size_t)lp->ndims);
  }
  return true;
}

bool lw_stmt_cost_at(const lw_program *lp, int i, const int64_t *params, const int64_t *coords, int64_t per_node, lw_cost *out) {
  return lw_stmt_cost_part(lp, i, params, coords, per_node, NULL, LW_PART_ALL, out);
}

bool lw_loop_invariant(const lw_program *lp, int i, const lw_comm *c, const int64_t *params, const bool *unwritten) {
  return lw_loop_invariant_as(lp, i, c, lw_comm_at(lp, c, params), unwritten);
}

bool lw_loop_invariant_as(const lw_program *lp, int i, const lw_comm *c, const lw_comm *a, const bool *unwritten) {
  if (!unwritten || c->tensor < 0 || c->tensor >= lp->ir->ast->ntensors || !unwritten[c->tensor] || c->output ||
      (a->pattern != PAT_BCAST && a->pattern != PAT_EXCHANGE))
    return false;
  const lw_stmt *ls = &lp->stmts[i];
  /* the loops around it run one iteration per rank, their variables its grid coordinates (the
   * generated code's collective loops; its box there is one of params and coordinates) */
  const int around = c->depth < ls->nloops ? c->depth + 1 : ls->nloops;
  for (int k = 0; k < around; k++) {
    int64_t one;
    if (!ls->loops[k]->distributed || k >= ls->outer || !sym_is_const(ls->bs[k], &one) || one != 1) return false;
  }
  for (int v = 0; v < ls->lidx_var0 + ls->nloops; v++) {
    bool coord = false;
    for (int k = 0; k < around && !coord; k++) coord = ls->loops[k]->var == v;
    for (int d = 0; d < a->order && !coord; d++)
      if (sym_uses(a->lo[d], SYM_VAR, v) || sym_uses(a->hi[d], SYM_VAR, v)) return false;
  }
  return true;
}

bool lw_stmt_cost_part(const lw_program *lp, int i, const int64_t *params, const int64_t *coords, int64_t per_node,
                       const bool *unwritten, lw_part part, lw_cost *out) {
  const fe_program *p = lp->ir->ast;
  const lw_stmt *ls = &lp->stmts[i];
  *out = (lw_cost){0};
  int nv = ls->lidx_var0 + ls->nloops;
  int64_t *vars = calloc(nv + 1, sizeof *vars);
  if (!vars) return false;
  sym_env env = {.params = params, .coords = coords, .vars = vars, .nvars = nv};
  bool ok = true;
  /* iterations of this rank: the product of its loops' trip counts */
  int64_t pts = 1;
  for (int k = 0; k < ls->nloops && ok; k++) {
    int64_t ext;
    ok = sym_eval(lw_trip(ls, k), &env, &ext);
    if (ok && ext > 0 && pts > INT64_MAX / ext) pts = INT64_MAX;
    else if (ok) pts *= ext > 0 ? ext : 0;
    if (ok && ls->kernel_depth >= 0 && k >= ls->kernel_depth) {
      if (out->kernel_min == 0 || ext < out->kernel_min) out->kernel_min = ext > 0 ? ext : 1;
      out->kernel_points = (out->kernel_points > 0 ? out->kernel_points : 1) * (double)(ext > 0 ? ext : 0);
    }
  }
  /* the loops over a sparse tensor's levels run its stored entries */
  double dens = lw_expr_density(p, ls->rhs, params);
  out->points = part == LW_PART_ONCE ? 0 : dens < 1 ? (int64_t)ceil((double)pts * dens) : pts;
  if (part == LW_PART_ONCE) out->kernel_min = 0, out->kernel_points = 0;
  /* the loops' trip counts with this rank's params and coordinates folded in: the steps of a
   * communicate point evaluate them once per iteration of the loops outside */
  const sym **trip = ir_alloc((size_t)(ls->nloops + 1) * sizeof *trip);
  for (int k = 0; k < ls->nloops; k++) trip[k] = sym_fold(lw_trip(ls, k), &env);
  for (int q = 0; q < ls->ncomm && ok; q++) {
    const lw_comm *c = &ls->comm[q];
    const bool once = part != LW_PART_ALL && lw_loop_invariant(lp, i, c, params, unwritten);
    if (part == LW_PART_ONCE && !once) continue;
    int64_t es = type_size(p->tensors[c->tensor].type);
    if (lw_sparse(p, c->tensor)) es += 8 * c->order;
    const bool scaled = lw_density(p, c->tensor, params) < 1; /* a sparse box: its entries */
    vol_acc a = {.budget = 200000, .trip = trip};
    memset(vars, 0, (size_t)(nv + 1) * sizeof *vars);
    int64_t steps = count_steps(ls, c, 0, vars, &env, a.budget, trip);
    if (steps < 0 || steps > a.budget) a.failed = steps < 0, a.budget = -1; /* as sum_volume would end */
    else {
      /* every step evaluates the box: its bounds with this rank's params and coordinates
       * folded in first (the same values, a fraction of the work) */
      const sym *flo[LW_MAX_DIMS], *fhi[LW_MAX_DIMS];
      if (steps > 1 && c->order <= LW_MAX_DIMS) {
        for (int x = 0; x < c->order; x++) flo[x] = sym_fold(c->lo[x], &env), fhi[x] = sym_fold(c->hi[x], &env);
        hoist_bounds(ls, c, flo, fhi, &a, &env);
      }
      sum_volume(lp, ls, c, 0, vars, &env, &a);
    }
    if (scaled) /* a sparse box's entries (a message per step stays one) */
      a.total = lw_entries(p, c->tensor, params, a.total), a.recv = lw_entries(p, c->tensor, params, a.recv),
      a.max = lw_entries(p, c->tensor, params, a.max);
    if (c->pattern == PAT_LOCAL) { /* memory traffic only (none counted where its steps are too many) */
      if (part != LW_PART_ONCE && a.budget >= 0 && !a.failed) out->mem_bytes += (double)(a.total * es);
      continue;
    }
    if (a.budget < 0 || a.failed) ok = false;
    const int64_t held = a.max * es * (c->pattern == PAT_BCAST || c->pattern == PAT_SHIFT ? 2 : 1); /* double buffers */
    if (part != LW_PART_ONCE) out->mem_bytes += (double)(a.total * es), out->buffer += held;
    if (part != LW_PART_ONCE && once) continue; /* its loops read the buffer; it arrived before */
    if (scaled && !lw_comm_alone(lp, c, params)) out->sparse_entries += (double)a.recv;
    bool alone = lw_comm_alone(lp, c, params); /* its buffer, no bytes */
    out->bytes += alone ? 0 : a.recv * es;
    out->msgs += alone ? 0 : a.count;
    double wb = 1, wm = 1;
    unsigned bm = lw_bcast_mask(lp, c, params);
    if (lw_comm_at(lp, c, params)->pattern == PAT_EXCHANGE) wb = LW_EXCHANGE_WEIGHT;
    if (bm) {
      int64_t q = 1, d;
      for (int g = 0; g < lp->ndims; g++)
        if (bm >> g & 1) q *= sym_eval(lp->dims[g], &env, &d) && d > 0 ? d : 1;
      lw_bcast_weight(q, &wb, &wm);
    }
    if (alone) wb = wm = 0;
    out->wire_bytes += wb * (double)(a.recv * es);
    out->wire_msgs += wm * (double)a.count;
    if (in_node(lp, lw_comm_at(lp, c, params), &env, per_node)) {
      out->node_bytes += wb * (double)(a.recv * es);
      out->node_msgs += wm * (double)a.count;
    }
    if (a.count > out->steps) out->steps = a.count;
  }
  free(vars);
  return ok;
}

bool lw_comm_volume(const lw_program *lp, int i, int q, const int64_t *params, lw_volume *out) {
  const int64_t zero[LW_MAX_DIMS] = {0};
  return lw_comm_volume_at(lp, i, q, params, zero, out);
}

bool lw_comm_volume_at(const lw_program *lp, int i, int q, const int64_t *params, const int64_t *coords, lw_volume *out) {
  const lw_stmt *ls = &lp->stmts[i];
  int nv = ls->lidx_var0 + ls->nloops;
  int64_t *vars = calloc(nv + 1, sizeof *vars);
  vol_acc a = {.budget = vars ? 2000000 : -1};
  sym_env env = {.params = params, .coords = coords, .vars = vars, .nvars = nv};
  if (vars) sum_volume(lp, ls, &ls->comm[q], 0, vars, &env, &a);
  free(vars);
  *out = (lw_volume){.received = a.recv, .boxes = a.total, .steps = a.count};
  return a.budget >= 0 && !a.failed && a.count > 0;
}

bool lw_bytes_line(const lw_program *lp, int i, int q, const int64_t *params, char *out, size_t n, int64_t *bytes) {
  const lw_comm *c = &lp->stmts[i].comm[q];
  const fe_program *p = lp->ir->ast;
  int64_t es = type_size(p->tensors[c->tensor].type);
  lw_volume v;
  *bytes = -1;
  if (c->pattern == PAT_LOCAL) {
    *bytes = 0, snprintf(out, n, "bytes per rank: 0");
    return true;
  }
  if (lw_comm_alone(lp, c, params)) {
    *bytes = 0, snprintf(out, n, "bytes per rank: 0 (one rank along these grid dims)");
    return true;
  }
  bool known = lw_comm_volume(lp, i, q, params, &v);
  if (lw_sparse(p, c->tensor)) {
    /* what moves are the stored entries: order coordinates (int64) and a value each */
    int k = snprintf(out, n, "bytes per rank: %lld per stored entry in the box (%d coordinates and the value)",
                     (long long)(8 * c->order + es), c->order);
    if (known && k >= 0 && (size_t)k < n)
      snprintf(out + k, n - k, "; the boxes hold %lld elements over %lld steps, %lld of them not held (rank 0)", (long long)v.boxes,
               (long long)v.steps, (long long)v.received);
    return known;
  }
  if (!known) {
    snprintf(out, n, "bytes per rank: %lld x volume of the box per step (not evaluated)", (long long)es);
    return false;
  }
  *bytes = v.received * es;
  int k = snprintf(out, n, "bytes per rank (rank 0): %lld = %lld steps, %lld elements of %lld bytes", (long long)(v.received * es),
                   (long long)v.steps, (long long)v.received, (long long)es);
  if (k < 0 || (size_t)k >= n) return true;
  const lw_comm *at = lw_comm_at(lp, c, params);
  if (at->pattern == PAT_REDUCE)
    snprintf(out + k, n - k, " (its partial sums of the boxes, reduced)");
  else if (at->pattern == PAT_EXCHANGE && c->output)
    snprintf(out + k, n - k, " sent (its boxes hold %lld, sent to every copy of each piece but its own)", (long long)v.boxes);
  else
    snprintf(out + k, n - k, " received (its boxes hold %lld, %lld of them its own)", (long long)v.boxes, (long long)(v.boxes - v.received));
  return true;
}

int64_t lw_type_size(fe_type t) { return type_size(t); }

void lw_print_stmt(FILE *f, const lw_program *lp, int i) {
  const lw_stmt *ls = &lp->stmts[i];
  const cin_node *asg = cin_assign(ls->s->root);
  fputs(lp->ir->ast->tensors[asg->lhs_tensor].name, f);
  if (asg->nlhs) {
    fputc('(', f);
    for (int k = 0; k < asg->nlhs; k++) fprintf(f, "%s%s", k ? "," : "", ls->s->vars[asg->lhs_vars[k]].name);
    fputc(')', f);
  }
  fputs(ls->s->ast->subtract ? " -= " : asg->accumulate ? " += " : " = ", f);
  fe_print_expr(f, ls->s->ast->rhs);
}

/* The bytes the rank at coords receives by the plan's dense communicate points, as their
 * "bytes per rank" lines count them (a box less what the rank holds, a shift's steps after
 * the first, an allreduce's partial sums), leaving out a reduction to a root (its members
 * send, the root receives all their sums) and an accumulate by exchange (what a rank sends);
 * a budget of box evaluations shared by all ranks; NULL, else why not (a sparse point's bytes
 * are its stored entries', known once it is loaded; a volume not known or too many steps). */
static const char *rank_received(const lw_program *lp, const int64_t *params, const int64_t *coords, int64_t *budget, int64_t *out) {
  const fe_program *p = lp->ir->ast;
  *out = 0;
  for (int i = 0; i < lp->nstmts; i++)
    for (int q = 0; q < lp->stmts[i].ncomm; q++) {
      const lw_comm *c = &lp->stmts[i].comm[q];
      if (c->pattern == PAT_LOCAL || lw_comm_alone(lp, c, params)) continue;
      if (lw_sparse(p, c->tensor)) return "a sparse tensor moves its stored entries, known once it is loaded";
      const lw_comm *at = lw_comm_at(lp, c, params);
      if ((at->pattern == PAT_REDUCE && !at->allreduce) || (at->pattern == PAT_EXCHANGE && c->output)) continue;
      lw_volume v;
      if (!lw_comm_volume_at(lp, i, q, params, coords, &v)) return "a volume not known at these params, or too many steps";
      *budget -= v.steps;
      if (*budget < 0) return "too many steps over all ranks";
      *out += v.received * type_size(p->tensors[c->tensor].type);
    }
  return NULL;
}

/* The plan's last line: the most bytes any rank receives (rank_received), at which grid
 * coordinates, against rank 0's; where every grid dim is known and the ranks' steps are not
 * too many to evaluate. */
static void print_busiest(FILE *f, const lw_program *lp, const int64_t *params) {
  int64_t dims[LW_MAX_DIMS], ranks = 1;
  for (int g = 0; g < lp->ndims; g++) {
    if (!sym_eval(lp->dims[g], &(sym_env){.params = params}, &dims[g]) || dims[g] < 1) return;
    ranks *= dims[g];
    if (ranks > 4096) return;
  }
  int64_t coords[LW_MAX_DIMS] = {0}, best[LW_MAX_DIMS] = {0}, most = -1, first = 0, budget = 4000000;
  for (int64_t r = 0; r < ranks; r++) {
    int64_t rest = r, got;
    for (int g = lp->ndims - 1; g >= 0; g--) coords[g] = rest % dims[g], rest /= dims[g];
    const char *why = rank_received(lp, params, coords, &budget, &got);
    if (why) {
      fprintf(f, "the most any rank receives: not evaluated (%s)\n", why);
      return;
    }
    if (r == 0) first = got;
    if (got > most) most = got, memcpy(best, coords, sizeof best);
  }
  fprintf(f, "the most any rank receives: %lld bytes, at grid coordinates (", (long long)most);
  for (int g = 0; g < lp->ndims; g++) fprintf(f, "%s%lld", g ? ", " : "", (long long)best[g]);
  fprintf(f, "); rank 0: %lld (the dense points, a reduction to a root and an accumulate by exchange left out)\n", (long long)first);
}

void lw_print_plan(FILE *f, const lw_program *lp, const int64_t *params, int64_t nranks) {
  const fe_program *p = lp->ir->ast;
  fprintf(f, "grid:");
  for (int g = 0; g < lp->ndims; g++) {
    int64_t v;
    fputc(' ', f);
    if (sym_eval(lp->dims[g], &(sym_env){.params = params}, &v)) fprintf(f, "%lld", (long long)v);
    else fputs("?", f);
  }
  fprintf(f, " (%lld ranks)\n", (long long)nranks);
  for (int i = 0; i < lp->nstmts; i++) {
    const lw_stmt *ls = &lp->stmts[i];
    namer_ctx nc = {lp, ls};
    fprintf(f, "statement %d: ", i + 1);
    lw_print_stmt(f, lp, i);
    fputc('\n', f);
    for (int q = 0; q < ls->ncomm; q++) {
      const lw_comm *c = &ls->comm[q];
      const fe_tensor *t = &p->tensors[c->tensor];
      fprintf(f, "  %s %s at %s: %s", c->output ? "write" : "read", t->name,
              c->depth < 0 ? "statement start" : ls->s->vars[ls->loops[c->depth]->var].name,
              lw_pattern_name(c->pattern));
      if (c->pattern == PAT_BCAST || (c->pattern == PAT_REDUCE && c->mask)) {
        fputs(c->pattern == PAT_REDUCE && c->allreduce ? " (allreduce)" : "", f);
        fputs(" along grid dims {", f);
        for (int g = 0, first = 1; g < lp->ndims; g++)
          if (c->mask >> g & 1) fprintf(f, "%s%d", first ? "" : ", ", g), first = 0;
        fputc('}', f);
        if (c->pattern == PAT_REDUCE && !c->allreduce) {
          fputs(" to root", f);
          for (int g = 0; g < lp->ndims; g++)
            if (c->mask >> g & 1) fprintf(f, " coord%d=%lld", g, (long long)c->root[g]);
        }
      }
      if (c->pattern == PAT_BCAST)
        fputs(lw_sparse(p, c->tensor) ? " (MPI_Bcast of the stored entries)" : lp->cuda ? " (ncclBroadcast)" : " (MPI_Ibcast)", f);
      if (c->pattern == PAT_REDUCE && c->mask)
        fputs(lp->cuda ? (c->allreduce ? " (ncclAllReduce)" : " (ncclReduce)") : (c->allreduce ? " (MPI_Allreduce)" : " (MPI_Reduce)"), f);
      if (c->pattern == PAT_SHIFT)
        fprintf(f, " along grid dim %d (%s), aligned once by exchange", c->shift_dim, lp->cuda ? "ncclSend/ncclRecv" : "MPI_Sendrecv");
      if (c->pattern == PAT_EXCHANGE)
        fprintf(f, " (point-to-point%s%s)", c->output ? " accumulate" : "", lp->cuda ? ", ncclSend/ncclRecv" : "");
      fprintf(f, " -- %s\n", c->why);
      if (c->alt) {
        fputs("    when ", f);
        for (int q = 1; q < c->nassume; q++)
          fprintf(f, "%s%s == %s", q > 1 ? " and " : "", p->params[c->assume[0]].name, p->params[c->assume[q]].name);
        fprintf(f, " at run time: %s", lw_pattern_name(c->alt->pattern));
        if (c->alt->pattern == PAT_SHIFT) fprintf(f, " along grid dim %d", c->alt->shift_dim);
        if (c->alt->pattern == PAT_BCAST || c->alt->pattern == PAT_REDUCE) fprintf(f, " over grid dims mask 0x%x", c->alt->mask);
        fprintf(f, " -- %s\n", c->alt->why);
      }
      fputs("    box:", f);
      for (int x = 0; x < c->order; x++) {
        fputs(x ? " x [" : " [", f);
        sym_print(f, c->lo[x], plan_namer, &nc);
        fputs(", ", f);
        sym_print(f, c->hi[x], plan_namer, &nc);
        fputc(')', f);
      }
      if (!c->order) fputs(" scalar", f);
      fputc('\n', f);
      char line[320];
      int64_t bytes;
      lw_bytes_line(lp, i, q, params, line, sizeof line, &bytes);
      fprintf(f, "    %s\n", line);
    }
  }
  /* what rank 0 holds before any statement runs: the data a plan's bytes come on top of */
  int64_t coords[LW_MAX_DIMS] = {0};
  sym_env env = {.params = params, .coords = coords};
  fputs("held by rank 0 (elements of its own blocks):", f);
  for (int t = 0; t < p->ntensors; t++) {
    const lw_owner *o = &lp->owner[t];
    int64_t v = 1, lo, hi;
    bool known = true;
    for (int x = 0; x < p->tensors[t].order && known; x++) {
      if (o->everywhere) {
        known = sym_eval(sym_from_size(&p->tensors[t].dims[x]), &env, &hi);
        v *= known && hi > 0 ? hi : 0;
        continue;
      }
      known = sym_eval(o->lo[x], &env, &lo) && sym_eval(o->hi[x], &env, &hi);
      v *= known && hi > lo ? hi - lo : 0;
    }
    if (known && lw_density(p, t, params) < 1)
      fprintf(f, " %s %lld (the model's %lld stored)", p->tensors[t].name, (long long)v, (long long)lw_entries(p, t, params, v));
    else if (known) fprintf(f, " %s %lld", p->tensors[t].name, (long long)v);
    else fprintf(f, " %s ?", p->tensors[t].name);
  }
  fputc('\n', f);
  print_busiest(f, lp, params);
}
