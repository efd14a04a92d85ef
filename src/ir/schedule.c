/* schedule.c -- the scheduling language as rewrites of concrete index notation.
 *
 * Each command is a small unit: its precondition checks, each with a message that names
 * the command, the variable and the reason (reported at the command), then its rewrite.
 * Loop transformations (divide, split, fuse, rotate, precompute) add a relation to the
 * provenance graph; distribute, communicate, parallelize and substitute annotate loops. */
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  ir_program *ir;
  ir_stmt *s;
  const fe_command *cmd;
  fe_source *src;
} sctx;

#define FAIL(loc, ...)                                                                         \
  do {                                                                                         \
    fe_error(c->src, (loc), __VA_ARGS__);                                                      \
    return false;                                                                              \
  } while (0)

static const char *cname(const sctx *c) { return c->cmd->name; }

/* ---- command text, for the s.t. clause ---------------------------------------------------- */
static void print_arg(FILE *f, const fe_program *p, const fe_arg *a) {
  switch (a->kind) {
  case FE_ARG_IDENT: fputs(a->name, f); break;
  case FE_ARG_INT: fprintf(f, "%lld", (long long)a->ival); break;
  case FE_ARG_LIST:
    fputc('{', f);
    for (int i = 0; i < a->nitems; i++) {
      if (i) fputs(", ", f);
      print_arg(f, p, &a->items[i]);
    }
    fputc('}', f);
    break;
  case FE_ARG_GRID:
    fputs("Grid(", f);
    for (int i = 0; i < a->grid.ndims; i++) {
      if (i) fputs(", ", f);
      fe_print_size(f, p, &a->grid.dims[i]);
    }
    fputc(')', f);
    break;
  case FE_ARG_LEVEL: fprintf(f, "%s[%lld]", a->name, (long long)a->ival); break;
  case FE_ARG_EXPR: fe_print_expr(f, a->expr); break;
  }
}

static void add_st(sctx *c) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return;
  fprintf(f, "%s(", c->cmd->name);
  for (int i = 0; i < c->cmd->nargs; i++) {
    if (i) fputs(", ", f);
    print_arg(f, c->ir->ast, &c->cmd->args[i]);
  }
  fputc(')', f);
  fclose(f);
  const char **st = ir_alloc((c->s->nst + 1) * sizeof *st);
  if (c->s->nst) memcpy(st, c->s->st, c->s->nst * sizeof *st);
  st[c->s->nst++] = ir_strdup(buf);
  c->s->st = st;
  free(buf);
}

/* ---- loop nest helpers --------------------------------------------------------------------- */
static cin_node **slot_of(cin_node **at, int var) {
  cin_node *n = *at;
  if (!n) return NULL;
  if (n->kind == CIN_FORALL) return n->var == var ? at : slot_of(&n->body, var);
  if (n->kind == CIN_WHERE) {
    cin_node **r = slot_of(&n->consumer, var);
    return r ? r : slot_of(&n->producer, var);
  }
  return NULL;
}

static cin_node *loop_of(ir_stmt *s, int var) {
  cin_node **sl = slot_of(&s->root, var);
  return sl ? *sl : NULL;
}

/* The loop named by argument k, which must be a current loop of the statement. */
static bool arg_loop(sctx *c, const fe_arg *a, int *var) {
  if (a->kind != FE_ARG_IDENT) FAIL(a->loc, "%s: expected an index variable", cname(c));
  int v = ir_var_find(c->s, a->name);
  if (v < 0) FAIL(a->loc, "%s: unknown index variable '%s'", cname(c), a->name);
  if (!loop_of(c->s, v)) {
    const ir_var *iv = &c->s->vars[v];
    if (iv->use >= 0)
      FAIL(a->loc, "%s: index variable '%s' was already replaced by %s", cname(c), a->name,
           c->s->rels[iv->use].text);
    FAIL(a->loc, "%s: '%s' is not a loop of this statement", cname(c), a->name);
  }
  *var = v;
  return true;
}

static bool name_taken(const sctx *c, const char *name) {
  const fe_program *p = c->ir->ast;
  return ir_var_find(c->s, name) >= 0 || fe_find_param(p, name) >= 0 ||
         fe_find_tensor(p, name) >= 0 || fe_find_machine(p, name) >= 0;
}

static bool arg_fresh(sctx *c, const fe_arg *a, const char **name) {
  if (a->kind != FE_ARG_IDENT) FAIL(a->loc, "%s: expected a new index variable name", cname(c));
  if (name_taken(c, a->name))
    FAIL(a->loc, "%s: '%s' is already used; a derived variable needs a new name", cname(c),
         a->name);
  *name = a->name;
  return true;
}

static bool arg_factor(sctx *c, const fe_arg *a, const sym **out) {
  if (a->kind == FE_ARG_INT) {
    if (a->ival <= 0) FAIL(a->loc, "%s: the factor must be positive", cname(c));
    *out = sym_const(a->ival);
    return true;
  }
  if (a->kind == FE_ARG_IDENT) {
    int p = fe_find_param(c->ir->ast, a->name);
    if (p < 0) FAIL(a->loc, "%s: '%s' is not a param", cname(c), a->name);
    if (c->ir->ast->params[p].is_float)
      FAIL(a->loc, "%s: '%s' is a floating param; a factor must be an integer (a literal or an integer param)", cname(c),
           a->name);
    *out = sym_param(p);
    return true;
  }
  FAIL(a->loc, "%s: the factor must be an integer or a param", cname(c));
}

static bool nargs(sctx *c, int lo, int hi) {
  if (c->cmd->nargs < lo || c->cmd->nargs > hi) {
    if (lo == hi) FAIL(c->cmd->loc, "%s takes %d arguments, not %d", cname(c), lo, c->cmd->nargs);
    FAIL(c->cmd->loc, "%s takes %d to %d arguments, not %d", cname(c), lo, hi, c->cmd->nargs);
  }
  return true;
}

static int new_var(ir_stmt *s, const char *name, const sym *extent, bool red, fe_loc loc) {
  ir_var *v = ir_alloc((s->nvars + 1) * sizeof *v);
  memcpy(v, s->vars, s->nvars * sizeof *v);
  s->vars = v;
  ir_var *nv = &v[s->nvars];
  nv->name = ir_strdup(name), nv->extent = extent, nv->def = s->nrels - 1, nv->use = -1;
  nv->reduction = red, nv->loc = loc;
  return s->nvars++;
}

static ir_rel *new_rel(sctx *c, ir_rel_kind k) {
  ir_stmt *s = c->s;
  ir_rel *r = ir_alloc((s->nrels + 1) * sizeof *r);
  if (s->nrels) memcpy(r, s->rels, s->nrels * sizeof *r);
  s->rels = r;
  ir_rel *nr = &r[s->nrels++];
  nr->kind = k, nr->loc = c->cmd->loc, nr->in[1] = nr->out[1] = -1, nr->text = c->cmd->name;
  return nr;
}

static bool in_kernel(const ir_stmt *s, int var) {
  for (const cin_node *n = s->root; n && n->kind == CIN_FORALL; n = n->body) {
    if (n->kernel) return true;
    if (n->var == var) return false;
  }
  return false;
}

/* Report (and return true) when a loop carries an annotation that a rewrite would lose. */
static bool annotated(sctx *c, const cin_node *n, fe_loc loc) {
  const char *v = c->s->vars[n->var].name;
  const char *why = n->distributed ? "is already distributed"
                    : n->kernel || in_kernel(c->s, n->var) ? "is substituted by a kernel"
                    : n->par ? "is already parallelized" : NULL;
  if (!why) return false;
  fe_error(c->src, loc, "%s: loop '%s' %s", cname(c), v, why);
  return true;
}

/* ---- divide and split ---------------------------------------------------------------------- */
// forall i S  --divide(i, io, ii, N)-->  forall io forall ii S   s.t. i = io*ceil(E/N) + ii
// forall i S  --split(i, io, ii, N)-->   forall io forall ii S   s.t. i = io*N + ii
static bool cmd_divide(sctx *c, bool split) {
  int i;
  const char *on, *in;
  const sym *N;
  const fe_arg *a = c->cmd->args;
  if (!nargs(c, 4, 4) || !arg_loop(c, &a[0], &i) || !arg_fresh(c, &a[1], &on) ||
      !arg_fresh(c, &a[2], &in) || !arg_factor(c, &a[3], &N))
    return false;
  if (!strcmp(on, in)) FAIL(a[2].loc, "%s: the two new variables need different names", cname(c));
  cin_node **sl = slot_of(&c->s->root, i), *n = *sl;
  if (annotated(c, n, a[0].loc)) return false;
  const sym *E = c->s->vars[i].extent;
  bool red = c->s->vars[i].reduction;
  ir_rel *r = new_rel(c, split ? REL_SPLIT : REL_DIVIDE);
  int rel = c->s->nrels - 1;
  const sym *outer_ext = split ? sym_ceildiv(E, N) : N;
  const sym *inner_ext = split ? N : sym_ceildiv(E, N);
  int o = new_var(c->s, on, outer_ext, red, a[1].loc);
  int ii = new_var(c->s, in, inner_ext, red, a[2].loc);
  r = &c->s->rels[rel];
  r->in[0] = i, r->out[0] = o, r->out[1] = ii, r->factor = N;
  c->s->vars[i].use = rel;
  cin_node *inner = ir_alloc(sizeof *inner);
  *inner = *n;
  inner->var = ii;
  n->var = o, n->body = inner, n->ncomm = 0, n->comm = NULL;
  return true;
}

// forall i forall j S  --fuse(i, j, f)-->  forall f S   s.t. i = f / E_j, j = f mod E_j
static bool cmd_fuse(sctx *c) {
  int i, j;
  const char *fn;
  const fe_arg *a = c->cmd->args;
  if (!nargs(c, 3, 3) || !arg_loop(c, &a[0], &i) || !arg_loop(c, &a[1], &j) ||
      !arg_fresh(c, &a[2], &fn))
    return false;
  cin_node **sl = slot_of(&c->s->root, i), *n = *sl;
  if (n->body->kind != CIN_FORALL || n->body->var != j)
    FAIL(a[1].loc, "%s: loop '%s' is not directly nested inside loop '%s'", cname(c), a[1].name,
         a[0].name);
  if (annotated(c, n, a[0].loc) || annotated(c, n->body, a[1].loc)) return false;
  ir_stmt *s = c->s;
  bool red = s->vars[i].reduction || s->vars[j].reduction;
  const sym *E = sym_mul(s->vars[i].extent, s->vars[j].extent);
  new_rel(c, REL_FUSE);
  int rel = s->nrels - 1;
  int f = new_var(s, fn, E, red, a[2].loc);
  ir_rel *r = &s->rels[rel];
  r->in[0] = i, r->in[1] = j, r->out[0] = f;
  s->vars[i].use = s->vars[j].use = rel;
  cin_node *inner = n->body;
  n->var = f, n->body = inner->body;
  if (inner->ncomm) {
    int *cm = ir_alloc((n->ncomm + inner->ncomm) * sizeof *cm);
    if (n->ncomm) memcpy(cm, n->comm, n->ncomm * sizeof *cm);
    memcpy(cm + n->ncomm, inner->comm, inner->ncomm * sizeof *cm);
    n->comm = cm, n->ncomm += inner->ncomm;
  }
  return true;
}

/* ---- reorder ------------------------------------------------------------------------------- */
// forall v1 ... forall vk S  --reorder({w1..wk})-->  the listed loops take the listed order,
// at the positions the listed loops occupied; the loops must belong to one perfect nest.
static bool cmd_reorder(sctx *c) {
  const fe_arg *items = c->cmd->args;
  int n = c->cmd->nargs;
  if (n == 1 && items[0].kind == FE_ARG_LIST) n = items[0].nitems, items = items[0].items;
  if (n < 1) FAIL(c->cmd->loc, "reorder: expected a list of loops");
  int *vars = ir_alloc(n * sizeof *vars);
  for (int k = 0; k < n; k++) {
    if (!arg_loop(c, &items[k], &vars[k])) return false;
    for (int m = 0; m < k; m++)
      if (vars[m] == vars[k]) FAIL(items[k].loc, "reorder: loop '%s' is listed twice", items[k].name);
    if (in_kernel(c->s, vars[k]))
      FAIL(items[k].loc, "reorder: loop '%s' is substituted by a kernel", items[k].name);
  }
  /* the chain of foralls that holds the first listed loop */
  cin_node **sl0 = slot_of(&c->s->root, vars[0]);
  cin_node *top = *sl0;
  (void)top;
  cin_node **chain = NULL;
  int nchain = 0, *pos = ir_alloc(n * sizeof *pos);
  /* walk from the root through the perfect nest that contains vars[0] */
  cin_node *start = c->s->root;
  for (;;) {
    nchain = cin_loops(start, NULL, 0);
    chain = ir_alloc((nchain + 1) * sizeof *chain);
    nchain = 0;
    cin_node *x = start;
    while (x && x->kind == CIN_FORALL) chain[nchain++] = x, x = x->body;
    bool found = false;
    for (int k = 0; k < nchain; k++) found |= chain[k]->var == vars[0];
    if (found || !x || x->kind != CIN_WHERE) break;
    start = slot_of(&x->consumer, vars[0]) ? x->consumer : x->producer;
  }
  for (int k = 0; k < n; k++) {
    pos[k] = -1;
    for (int m = 0; m < nchain; m++)
      if (chain[m]->var == vars[k]) pos[k] = m;
    if (pos[k] < 0)
      FAIL(items[k].loc, "reorder: loop '%s' is not in the same loop nest as '%s'", items[k].name,
           items[0].name);
  }
  /* the positions, sorted, receive the listed loops in order; annotations move with loops */
  int *sorted = ir_alloc(n * sizeof *sorted);
  memcpy(sorted, pos, n * sizeof *pos);
  for (int a = 1; a < n; a++)
    for (int b = a; b > 0 && sorted[b - 1] > sorted[b]; b--) {
      int t = sorted[b];
      sorted[b] = sorted[b - 1], sorted[b - 1] = t;
    }
  cin_node *saved = ir_alloc(n * sizeof *saved);
  for (int k = 0; k < n; k++) saved[k] = *chain[pos[k]];
  for (int k = 0; k < n; k++) {
    cin_node *dst = chain[sorted[k]];
    cin_node *body = dst->body;
    *dst = saved[k];
    dst->body = body;
  }
  return true;
}

/* ---- machines ------------------------------------------------------------------------------ */
static bool same_size(const fe_size *a, const fe_size *b) {
  return a->is_param == b->is_param && (a->is_param ? a->param == b->param : a->value == b->value);
}

/* Resolve a machine argument (M, M[1], an inline Grid(...), or a tensor) to a level. */
static bool arg_machine(sctx *c, const fe_arg *a, int *level) {
  const fe_program *p = c->ir->ast;
  int m = c->ir->machine;
  if (m < 0) FAIL(a->loc, "%s: the program declares no machine", cname(c));
  const fe_machine *M = &p->machines[m];
  switch (a->kind) {
  case FE_ARG_IDENT: {
    int t = fe_find_tensor(p, a->name), mm = fe_find_machine(p, a->name);
    if (mm >= 0) {
      if (mm != m) FAIL(a->loc, "%s: machine '%s' is not the machine of this program ('%s')",
                        cname(c), a->name, M->name);
      *level = 0;
      return true;
    }
    if (t >= 0) {
      if (!p->tensors[t].has_dist)
        FAIL(a->loc, "%s: tensor '%s' has no distribution to take a grid from", cname(c), a->name);
      *level = 0;
      return true;
    }
    FAIL(a->loc, "%s: '%s' is neither a machine nor a tensor", cname(c), a->name);
  }
  case FE_ARG_LEVEL:
    if (fe_find_machine(p, a->name) != m)
      FAIL(a->loc, "%s: '%s' is not the machine of this program", cname(c), a->name);
    if (a->ival < 0 || a->ival >= M->nlevels)
      FAIL(a->loc, "%s: machine '%s' has %d level%s; there is no level %lld", cname(c), a->name,
           M->nlevels, M->nlevels == 1 ? "" : "s", (long long)a->ival);
    *level = (int)a->ival;
    return true;
  case FE_ARG_GRID:
    for (int l = 0; l < M->nlevels; l++) {
      const fe_grid *g = &M->levels[l];
      if (g->ndims != a->grid.ndims) continue;
      bool eq = true;
      for (int d = 0; d < g->ndims; d++) eq &= same_size(&g->dims[d], &a->grid.dims[d]);
      if (eq) {
        *level = l;
        return true;
      }
    }
    FAIL(a->loc, "%s: this grid matches no level of machine '%s'", cname(c), M->name);
  default: FAIL(a->loc, "%s: expected a machine, a machine level or a grid", cname(c));
  }
}

/* The outer variables of a compound distribute become the outermost loops, in order; the
 * other loops keep their relative order. */
static bool hoist(sctx *c, const fe_arg *ds, int nt) {
  int nc = cin_loops(c->s->root, NULL, 0), no = 0;
  cin_node **chain = ir_alloc((nc + 1) * sizeof *chain), *saved = ir_alloc((nc + 1) * sizeof *saved);
  int *order = ir_alloc((nc + nt + 1) * sizeof *order);
  nc = 0;
  for (cin_node *x = c->s->root; x && x->kind == CIN_FORALL; x = x->body) chain[nc++] = x;
  for (int k = 0; k < nt; k++) {
    int v = ir_var_find(c->s, ds[k].name), pos = -1;
    for (int m = 0; m < nc; m++)
      if (chain[m]->var == v) pos = m;
    if (pos < 0) FAIL(ds[k].loc, "distribute: loop '%s' is not in the outer loop nest", ds[k].name);
    order[no++] = pos;
  }
  for (int m = 0; m < nc; m++) {
    bool listed = false;
    for (int k = 0; k < nt; k++) listed |= order[k] == m;
    if (!listed) order[no++] = m;
  }
  for (int m = 0; m < nc; m++) saved[m] = *chain[m];
  for (int m = 0; m < nc; m++) {
    cin_node *body = chain[m]->body;
    *chain[m] = saved[order[m]];
    chain[m]->body = body;
  }
  return true;
}

static bool mark_distributed(sctx *c, int var, int level, fe_loc loc) {
  cin_node *n = loop_of(c->s, var);
  if (n->distributed) FAIL(loc, "distribute: loop '%s' is already distributed", c->s->vars[var].name);
  if (in_kernel(c->s, var))
    FAIL(loc, "distribute: loop '%s' is substituted by a kernel", c->s->vars[var].name);
  n->distributed = true, n->dist_level = level, n->dist_dim = -1, n->dist_loc = loc;
  return true;
}

static bool list_of(sctx *c, const fe_arg *a, const fe_arg **items, int *n) {
  if (a->kind == FE_ARG_LIST) *items = a->items, *n = a->nitems;
  else if (a->kind == FE_ARG_IDENT) *items = a, *n = 1;
  else FAIL(a->loc, "%s: expected a variable or a list of variables", cname(c));
  return true;
}

// forall v S  --distribute(v)-->  forall v S  s.t. distribute(v)
// compound: divide each target by the machine dim, reorder outer variables outermost,
// distribute them (paper section 3.3).
static bool cmd_distribute(sctx *c) {
  const fe_arg *a = c->cmd->args;
  if (c->cmd->nargs == 4) {
    const fe_arg *tg, *ds, *lc;
    int nt, nd, nl, level;
    if (!list_of(c, &a[0], &tg, &nt) || !list_of(c, &a[1], &ds, &nd) ||
        !list_of(c, &a[2], &lc, &nl) || !arg_machine(c, &a[3], &level))
      return false;
    if (nt != nd || nt != nl)
      FAIL(c->cmd->loc, "distribute: the three variable lists must have the same length");
    const fe_grid *g = &c->ir->ast->machines[c->ir->machine].levels[level];
    if (nt > g->ndims)
      FAIL(a[0].loc, "distribute: %d loops onto a machine level with %d dimension%s", nt, g->ndims,
           g->ndims == 1 ? "" : "s");
    for (int k = 0; k < nt; k++) {
      fe_arg dargs[4] = {tg[k], ds[k], lc[k], {0}};
      fe_size sz = g->dims[k];
      if (sz.is_param) dargs[3].kind = FE_ARG_IDENT, dargs[3].name = c->ir->ast->params[sz.param].name;
      else dargs[3].kind = FE_ARG_INT, dargs[3].ival = sz.value;
      dargs[3].loc = a[3].loc;
      fe_command sub = {.name = "distribute", .loc = c->cmd->loc, .nargs = 4, .args = dargs};
      sctx sc = *c;
      sc.cmd = &sub;
      if (!cmd_divide(&sc, false)) return false;
    }
    if (level == 0) {
      if (!hoist(c, ds, nt)) return false;
    } else {
      /* an inner level: the outer variables go above the local ones, where they are */
      fe_arg *order = ir_alloc(2 * nt * sizeof *order);
      for (int k = 0; k < nt; k++) order[k] = ds[k], order[nt + k] = lc[k];
      fe_command sub = {.name = "distribute", .loc = c->cmd->loc, .nargs = 2 * nt, .args = order};
      sctx sc = *c;
      sc.cmd = &sub;
      if (!cmd_reorder(&sc)) return false;
    }
    for (int k = 0; k < nt; k++) {
      int v = ir_var_find(c->s, ds[k].name);
      if (!mark_distributed(c, v, level, ds[k].loc)) return false;
    }
    return true;
  }
  if (!nargs(c, 1, 2)) return false;
  const fe_arg *items;
  int n, level = 0;
  if (!list_of(c, &a[0], &items, &n)) return false;
  if (c->cmd->nargs == 2 && !arg_machine(c, &a[1], &level)) return false;
  if (c->cmd->nargs == 1 && c->ir->machine < 0)
    FAIL(c->cmd->loc, "distribute: the program declares no machine");
  for (int k = 0; k < n; k++) {
    int v;
    if (!arg_loop(c, &items[k], &v) || !mark_distributed(c, v, level, items[k].loc)) return false;
  }
  return true;
}

/* ---- communicate --------------------------------------------------------------------------- */
static bool uses_tensor(const ir_expr *e, int t) {
  if (!e) return false;
  if (e->kind == IR_ACCESS) return e->tensor == t;
  return uses_tensor(e->a, t) || uses_tensor(e->b, t);
}

/* t is read by the statement: its assignment or a precompute producer */
static bool node_uses_tensor(const cin_node *n, int t) {
  if (!n) return false;
  if (n->kind == CIN_FORALL) return node_uses_tensor(n->body, t);
  if (n->kind == CIN_WHERE) return node_uses_tensor(n->consumer, t) || node_uses_tensor(n->producer, t);
  return uses_tensor(n->rhs, t);
}

// forall v S  --communicate(T, v)-->  forall v S  s.t. communicate(T, v)
static bool cmd_communicate(sctx *c) {
  const fe_arg *a = c->cmd->args, *items;
  int n, v;
  if (!nargs(c, 2, 2) || !list_of(c, &a[0], &items, &n) || !arg_loop(c, &a[1], &v)) return false;
  const cin_node *asg = cin_assign(c->s->root);
  for (int k = 0; k < n; k++) {
    int t = fe_find_tensor(c->ir->ast, items[k].name);
    if (t < 0) FAIL(items[k].loc, "communicate: unknown tensor '%s'", items[k].name);
    if (asg->lhs_tensor != t && !node_uses_tensor(c->s->root, t))
      FAIL(items[k].loc, "communicate: tensor '%s' is not used by this statement", items[k].name);
    for (int m = 0; m < c->s->nvars; m++) {
      const cin_node *ln = loop_of(c->s, m);
      for (int q = 0; ln && q < ln->ncomm; q++)
        if (ln->comm[q] == t)
          FAIL(items[k].loc, "communicate: tensor '%s' is already communicated at loop '%s'",
               items[k].name, c->s->vars[m].name);
    }
    cin_node *ln = loop_of(c->s, v);
    int *cm = ir_alloc((ln->ncomm + 1) * sizeof *cm);
    if (ln->ncomm) memcpy(cm, ln->comm, ln->ncomm * sizeof *cm);
    cm[ln->ncomm++] = t;
    ln->comm = cm;
  }
  return true;
}

/* ---- rotate -------------------------------------------------------------------------------- */
// forall I forall t S  --rotate(t, I, r)-->  forall I forall r S  s.t. t = (r + sum I) mod E_t
static bool cmd_rotate(sctx *c) {
  const fe_arg *a = c->cmd->args, *items;
  int t, n;
  const char *rn;
  if (!nargs(c, 3, 3) || !arg_loop(c, &a[0], &t) || !list_of(c, &a[1], &items, &n) ||
      !arg_fresh(c, &a[2], &rn))
    return false;
  ir_stmt *s = c->s;
  int *rot = ir_alloc((n + 1) * sizeof *rot);
  for (int k = 0; k < n; k++) {
    if (!arg_loop(c, &items[k], &rot[k])) return false;
    if (rot[k] == t) FAIL(items[k].loc, "rotate: loop '%s' cannot rotate by itself", items[k].name);
    /* I must enclose t */
    bool outer = false;
    for (const cin_node *x = loop_of(s, rot[k]); x && (x->kind == CIN_FORALL || x->kind == CIN_WHERE);
         x = x->kind == CIN_WHERE ? x->consumer : x->body)
      if (x->kind == CIN_FORALL && x->var == t) outer = true;
    if (!outer)
      FAIL(items[k].loc, "rotate: loop '%s' must enclose the rotated loop '%s'", items[k].name,
           a[0].name);
  }
  cin_node *ln = loop_of(s, t);
  if (ln->distributed) FAIL(a[0].loc, "rotate: loop '%s' is distributed; rotate a loop that runs in time", a[0].name);
  if (in_kernel(s, t)) FAIL(a[0].loc, "rotate: loop '%s' is substituted by a kernel", a[0].name);
  new_rel(c, REL_ROTATE);
  int rel = s->nrels - 1;
  int r = new_var(s, rn, s->vars[t].extent, s->vars[t].reduction, a[2].loc);
  ir_rel *R = &s->rels[rel];
  R->in[0] = t, R->out[0] = r, R->nrot = n, R->rot = rot;
  s->vars[t].use = rel;
  ln->var = r;
  return true;
}

/* ---- parallelize --------------------------------------------------------------------------- */
static bool cmd_parallelize(sctx *c) {
  const fe_arg *a = c->cmd->args;
  int v;
  if (!nargs(c, 2, 3) || !arg_loop(c, &a[0], &v)) return false;
  static const char *units[] = {"", "cpu_thread", "cpu_vector", "gpu_block", "gpu_warp",
                                "gpu_thread"};
  static const char *races[] = {"no_races", "atomics", "ignore_races"};
  int u = 0, r = 0;
  if (a[1].kind == FE_ARG_IDENT)
    for (int k = 1; k < 6; k++)
      if (!strcmp(a[1].name, units[k])) u = k;
  if (!u) FAIL(a[1].loc, "parallelize: unit must be cpu_thread, cpu_vector, gpu_block, gpu_warp or gpu_thread");
  if (c->cmd->nargs == 3) {
    r = -1;
    if (a[2].kind == FE_ARG_IDENT)
      for (int k = 0; k < 3; k++)
        if (!strcmp(a[2].name, races[k])) r = k;
    if (r < 0) FAIL(a[2].loc, "parallelize: race strategy must be no_races, atomics or ignore_races");
  }
  cin_node *n = loop_of(c->s, v);
  if (in_kernel(c->s, v)) FAIL(a[0].loc, "parallelize: loop '%s' is substituted by a kernel", a[0].name);
  if (n->par) FAIL(a[0].loc, "parallelize: loop '%s' is already parallelized", a[0].name);
  if (n->distributed) FAIL(a[0].loc, "parallelize: loop '%s' is distributed", a[0].name);
  if (c->s->vars[v].def >= 0 && c->s->rels[c->s->vars[v].def].kind == REL_PRECOMPUTE) /* lowering's rule, said here */
    FAIL(a[0].loc, "parallelize: loop '%s' is the workspace loop of a precompute; only the consumer's loops can be scheduled",
         a[0].name);
  if (r == RACE_NO_RACES && c->s->vars[v].reduction)
    FAIL(a[0].loc, "parallelize: loop '%s' reduces into the output, so iterations race; "
                   "use atomics or ignore_races", a[0].name);
  n->par = (ir_par_unit)u, n->race = (ir_race)r, n->par_loc = c->cmd->loc;
  return true;
}

/* ---- precompute ----------------------------------------------------------------------------- */
static bool expr_match(const ir_stmt *s, const ir_program *ir, const ir_expr *e, const fe_expr *f) {
  static const ir_expr_kind kinds[] = {[FE_E_ACCESS] = IR_ACCESS, [FE_E_NUM] = IR_NUM,
                                       [FE_E_ADD] = IR_ADD,       [FE_E_SUB] = IR_SUB,
                                       [FE_E_MUL] = IR_MUL,       [FE_E_DIV] = IR_DIV,
                                       [FE_E_NEG] = IR_NEG,       [FE_E_CALL] = IR_CALL,
                                       [FE_E_PARAM] = IR_PARAM};
  /* the command's expression is not resolved: a param there is still a bare name */
  if (e->kind == IR_PARAM)
    return (f->kind == FE_E_PARAM || (f->kind == FE_E_ACCESS && !f->acc.parens && !f->acc.nidx)) && f->acc.tname &&
           !strcmp(ir->ast->params[e->param].name, f->acc.tname);
  if (e->kind != kinds[f->kind]) return false;
  switch (e->kind) {
  case IR_CALL:
    return e->func == f->func && expr_match(s, ir, e->a, f->a) && (!e->b || (f->b && expr_match(s, ir, e->b, f->b)));
  case IR_ACCESS:
    if (e->tensor >= ir->ast->ntensors || strcmp(ir->ast->tensors[e->tensor].name, f->acc.tname) ||
        e->nidx != f->acc.nidx)
      return false;
    for (int k = 0; k < e->nidx; k++)
      if (strcmp(s->vars[e->vars[k]].name, f->acc.idx[k])) return false;
    return true;
  case IR_NUM: return e->num == f->num;
  case IR_NEG: return expr_match(s, ir, e->a, f->a);
  default: return expr_match(s, ir, e->a, f->a) && expr_match(s, ir, e->b, f->b);
  }
}

static ir_expr **find_subexpr(const ir_stmt *s, const ir_program *ir, ir_expr **at, const fe_expr *f) {
  if (!*at) return NULL;
  if (expr_match(s, ir, *at, f)) return at;
  ir_expr **r = find_subexpr(s, ir, &(*at)->a, f);
  return r ? r : find_subexpr(s, ir, &(*at)->b, f);
}

static bool expr_uses_var(const ir_expr *e, int v) {
  if (!e) return false;
  if (e->kind == IR_ACCESS) {
    for (int k = 0; k < e->nidx; k++)
      if (e->vars[k] == v) return true;
    return false;
  }
  return expr_uses_var(e->a, v) || expr_uses_var(e->b, v);
}

static bool has_guards(const ir_expr *e) {
  if (!e) return false;
  return e->nguards || has_guards(e->a) || has_guards(e->b);
}

/* An original variable that loop variable v is computed from (through divide, split, fuse)
 * and that e uses, or -1. */
static int uses_origin(const ir_stmt *s, const ir_expr *e, int v) {
  if (s->vars[v].original) return expr_uses_var(e, v) ? v : -1;
  const ir_rel *r = &s->rels[s->vars[v].def];
  int o = uses_origin(s, e, r->in[0]);
  if (o < 0 && r->kind == REL_FUSE) o = uses_origin(s, e, r->in[1]);
  return o;
}

static ir_expr *copy_renamed(const ir_expr *e, int from, int to) {
  if (!e) return NULL;
  ir_expr *q = ir_alloc(sizeof *q);
  *q = *e;
  if (q->kind == IR_ACCESS) {
    q->vars = ir_alloc((q->nidx + 1) * sizeof *q->vars);
    for (int k = 0; k < q->nidx; k++) q->vars[k] = e->vars[k] == from ? to : e->vars[k];
  }
  q->a = copy_renamed(e->a, from, to);
  q->b = copy_renamed(e->b, from, to);
  return q;
}

// forall i S[e]  --precompute(e, i, iw, T)-->  where(forall i S[T(i)], forall iw T(iw) = e[i:=iw])
// Restricted to an original loop i and a subexpression e whose other variables are bound by
// loops enclosing i, so that the producer is a single loop.
static bool cmd_precompute(sctx *c) {
  const fe_arg *a = c->cmd->args;
  int i;
  const char *iwn, *tn;
  if (!nargs(c, 4, 4)) return false;
  if (a[0].kind != FE_ARG_EXPR) FAIL(a[0].loc, "precompute: expected an expression");
  if (!arg_loop(c, &a[1], &i) || !arg_fresh(c, &a[2], &iwn) || !arg_fresh(c, &a[3], &tn))
    return false;
  ir_stmt *s = c->s;
  if (!strcmp(iwn, tn)) FAIL(a[3].loc, "precompute: the workspace needs its own name");
  if (!s->vars[i].original)
    FAIL(a[1].loc, "precompute: loop '%s' is derived; precompute over an original index variable",
         a[1].name);
  cin_node **sl = slot_of(&s->root, i);
  cin_node *n = *sl;
  if (annotated(c, n, a[1].loc)) return false;
  /* the loops below i must end in the assignment */
  cin_node *x = n;
  while (x->kind == CIN_FORALL) x = x->body;
  if (x->kind != CIN_ASSIGN) FAIL(a[1].loc, "precompute: loop '%s' already holds a where", a[1].name);
  ir_expr **e = find_subexpr(s, c->ir, &x->rhs, a[0].expr);
  if (!e) FAIL(a[0].loc, "precompute: this expression is not a subexpression of the statement");
  if (has_guards(*e))
    FAIL(a[0].loc, "precompute: the expression holds a summation placed inside it (a term that counts once per "
                   "sum); precompute a product or a sum of whole terms");
  if (!expr_uses_var(*e, i))
    FAIL(a[0].loc, "precompute: the expression does not use '%s'", a[1].name);
  for (const cin_node *y = n->body; y->kind == CIN_FORALL; y = y->body) {
    int o = uses_origin(s, *e, y->var);
    if (o >= 0)
      FAIL(a[0].loc, "precompute: the expression uses '%s', a loop inside '%s'", s->vars[o].name,
           a[1].name);
  }
  /* the workspace: one dimension, extent of i, type of the output */
  int wid = c->ir->ast->ntensors + s->nwork;
  void *nw = ir_alloc((s->nwork + 1) * sizeof *s->work);
  if (s->nwork) memcpy(nw, s->work, s->nwork * sizeof *s->work);
  s->work = nw;
  s->work[s->nwork].name = ir_strdup(tn);
  s->work[s->nwork].type = c->ir->ast->tensors[x->lhs_tensor].type;
  new_rel(c, REL_PRECOMPUTE);
  int rel = s->nrels - 1;
  int iw = new_var(s, iwn, s->vars[i].extent, s->vars[i].reduction, a[2].loc);
  ir_rel *R = &s->rels[rel];
  R->in[0] = i, R->out[0] = iw;
  s->work[s->nwork].nidx = 1;
  s->work[s->nwork].vars = ir_alloc(sizeof(int));
  s->work[s->nwork].vars[0] = iw;
  s->nwork++;
  /* producer: forall iw  T(iw) = e[i := iw] */
  ir_expr *pe = copy_renamed(*e, i, iw); /* deep copy with the variable renamed */
  cin_node *pasg = ir_alloc(sizeof *pasg);
  pasg->kind = CIN_ASSIGN, pasg->lhs_tensor = wid, pasg->nlhs = 1;
  pasg->lhs_vars = ir_alloc(sizeof(int));
  pasg->lhs_vars[0] = iw;
  pasg->rhs = pe;
  cin_node *ploop = ir_alloc(sizeof *ploop);
  ploop->kind = CIN_FORALL, ploop->var = iw, ploop->body = pasg;
  /* consumer: the expression becomes T(i) */
  ir_expr *acc = ir_alloc(sizeof *acc);
  acc->kind = IR_ACCESS, acc->tensor = wid, acc->nidx = 1;
  acc->vars = ir_alloc(sizeof(int));
  acc->vars[0] = i;
  *e = acc;
  cin_node *w = ir_alloc(sizeof *w);
  w->kind = CIN_WHERE, w->consumer = n, w->producer = ploop, w->workspace = wid;
  *sl = w;
  s->has_precompute = true;
  return true;
}

/* ---- substitute ---------------------------------------------------------------------------- */
/* The original variable a substituted loop walks contiguously, or -1: the loop must be an
 * original variable or the inner child of a divide/split (its block is contiguous). */
static int contiguous_original(const ir_stmt *s, int v) {
  while (!s->vars[v].original) {
    const ir_rel *r = &s->rels[s->vars[v].def];
    if ((r->kind != REL_DIVIDE && r->kind != REL_SPLIT) || r->out[1] != v) return -1;
    v = r->in[0];
  }
  return v;
}

/* (ir.h) */
/* Is the scalar e exact in the integral type of the statement (integer numbers, integer params
 * and tensors: the coefficient times the sum is then the sum of the products)? */
static bool coef_integral(const ir_program *ir, const ir_expr *e) {
  switch (e->kind) {
  case IR_NUM: return e->is_int;
  case IR_PARAM: return !ir->ast->params[e->param].is_float;
  case IR_ACCESS: {
    fe_type t = ir_tensor_type(ir, e->tensor);
    return t == FE_INT32 || t == FE_INT64;
  }
  case IR_NEG: return coef_integral(ir, e->a);
  case IR_ADD: case IR_SUB: case IR_MUL: case IR_DIV: return coef_integral(ir, e->a) && coef_integral(ir, e->b);
  default: return false;
  }
}

ir_fit ir_kernel_fits(const ir_program *ir, const cin_node *asg, ir_kernel k, const int *orig, int n) {
  const ir_expr *e = asg->rhs;
  fe_type ot = ir_tensor_type(ir, asg->lhs_tensor);
  if (e->kind == IR_MUL && !e->nguards && e->a->kind == IR_ACCESS && e->b->kind == IR_ACCESS &&
      !e->a->nguards && !e->b->nguards &&
      (ir_tensor_type(ir, e->a->tensor) != ot || ir_tensor_type(ir, e->b->tensor) != ot))
    return IR_FITS_TYPES;
  const ir_expr *factor[KC_MAX_OPERANDS], *coef;
  kc_access ops[KC_MAX_OPERANDS];
  bool divides;
  int nops = ir_kernel_operands(asg, k, orig, n, factor, ops, &coef, &divides);
  bool same_type = true;
  for (int q = 1; q < nops; q++)
    same_type &= ops[q].number || ir_tensor_type(ir, factor[q]->tensor) == ot;
  if (nops && (ot == FE_INT32 || ot == FE_INT64)) { /* the coefficient is exact: integers, no division of the product */
    for (int q = 1; q < nops; q++)
      if (ops[q].number && !coef_integral(ir, factor[q])) return IR_FITS_COEF;
    if ((coef && !coef_integral(ir, coef)) || divides) return IR_FITS_COEF;
  }
  return nops && same_type && kc_match(k, n, nops, ops, NULL) ? IR_FITS : IR_FITS_FORM;
}

// forall v1 .. forall vk S  --substitute({v1..vk}, K)-->  K(...)   when S matches K
static bool cmd_substitute(sctx *c) {
  const fe_arg *a = c->cmd->args, *items;
  int n;
  if (!nargs(c, 2, 2) || !list_of(c, &a[0], &items, &n)) return false;
  if (a[1].kind != FE_ARG_IDENT) FAIL(a[1].loc, "substitute: expected a kernel name");
  ir_kernel k = kc_lookup(a[1].name);
  if (!k) {
    char names[256];
    kc_names(names, sizeof names);
    FAIL(a[1].loc, "substitute: unknown kernel '%s' (%s)", a[1].name, names);
  }
  int vars[8], orig[8];
  if (n < 1 || n > 8) FAIL(a[0].loc, "substitute: expected 1 to 8 loops");
  for (int q = 0; q < n; q++) {
    if (!arg_loop(c, &items[q], &vars[q])) return false;
    for (int m = 0; m < q; m++)
      if (vars[m] == vars[q]) FAIL(items[q].loc, "substitute: loop '%s' is listed twice", items[q].name);
    if (in_kernel(c->s, vars[q]))
      FAIL(items[q].loc, "substitute: loop '%s' is already substituted by a kernel", items[q].name);
    if (loop_of(c->s, vars[q])->distributed)
      FAIL(items[q].loc, "substitute: loop '%s' is distributed", items[q].name);
  }
  /* the listed loops must be the innermost loops, directly nested, above the assignment */
  int nc = cin_loops(c->s->root, NULL, 0);
  const cin_node **chain = ir_alloc((nc + 1) * sizeof *chain);
  cin_loops(c->s->root, chain, nc);
  const cin_node *tail = nc ? chain[nc - 1]->body : c->s->root;
  if (tail->kind != CIN_ASSIGN) FAIL(c->cmd->loc, "substitute: the loop nest holds a where; substitute applies to a plain loop nest");
  if (nc < n) FAIL(a[0].loc, "substitute: the statement has only %d loops", nc);
  for (int q = 0; q < n; q++) {
    bool inner = false;
    for (int m = nc - n; m < nc; m++) inner |= chain[m]->var == vars[q];
    if (!inner)
      FAIL(items[q].loc, "substitute: loop '%s' is not among the %d innermost loops", items[q].name, n);
    orig[q] = contiguous_original(c->s, vars[q]);
    if (orig[q] < 0)
      FAIL(items[q].loc, "substitute: loop '%s' does not walk a contiguous range of one index "
                         "variable (only original variables and inner variables of divide/split do)",
           items[q].name);
    for (int m = 0; m < q; m++)
      if (orig[m] == orig[q])
        FAIL(items[q].loc, "substitute: loops '%s' and '%s' walk the same index variable",
             items[m].name, items[q].name);
  }
  /* the statement must have the kernel's form (the catalogue's), every tensor of one type */
  switch (ir_kernel_fits(c->ir, tail, k, orig, n)) {
  case IR_FITS: break;
  case IR_FITS_TYPES:
    FAIL(a[1].loc, "substitute: %s needs every tensor of the statement to have the same type", a[1].name);
  case IR_FITS_COEF:
    FAIL(a[1].loc, "substitute: %s on integers takes an integer coefficient and no division of the product "
                   "(the kernel multiplies the sum, not each term)", a[1].name);
  default: {
    char form[256];
    kc_form(k, form, sizeof form);
    FAIL(a[1].loc, "substitute: the statement does not match %s (%s)", a[1].name, form);
  }
  }
  cin_node *first = (cin_node *)chain[nc - n];
  first->kernel = k;
  first->nsubst = n;
  first->kernel_loc = c->cmd->loc;
  return true;
}

/* ---- owner computes ---------------------------------------------------------------------- */
/* A statement that no distribute command distributed is distributed like its data
 * (LANGUAGE.md section 5, "Defaults"): the tensor that decides is the output when it is
 * partitioned, otherwise the largest partitioned operand (most elements; ties: the first);
 * every index variable that indexes a partitioned dimension of it is distributed onto the grid
 * dim that partitions it, at each level of the tensor's distribution.  The default comes after
 * the statement's commands, which name the loops as the statement has them:
 *   - the loop that carries the variable is the variable's own, or, where divide or split
 *     replaced it, the outer loop of that (outermost) relation;
 *   - that loop is divided by the grid dim, as the compound distribute does (the blocks of
 *     section 3, so that the pieces are the data's): divide(i, i_dist, i_loc, G); i_dist is
 *     distributed onto the grid dim, i_loc keeps what the commands asked of the loop (threads,
 *     a kernel, communicate); an inner level divides i_loc again;
 *   - the distributed loops then move outermost, level by level, the others keeping their
 *     order, so that each rank's data moves once, before its block;
 *   - a variable that fuse or rotate replaced, or whose loop lies under a precompute's where,
 *     is not distributed: the statement runs redundantly along that grid dim, which is always
 *     correct (each rank keeps its own part of the result).
 * Grid dims where the tensor is replicated (*) or fixed (an integer) get no loop: the
 * computation is redundant along them. */

static bool partitioned(const fe_tensor *t) {
  if (!t->has_dist || !t->order) return false;
  for (int l = 0; l < t->dist.nlevels; l++)
    for (int k = 0; k < t->dist.levels[l].ny; k++)
      if (t->dist.levels[l].y[k].kind == FE_Y_NAME) return true;
  return false;
}

static void rhs_accesses(const fe_expr *e, const fe_access **out, int *n, int max) {
  if (!e) return;
  if (e->kind == FE_E_ACCESS) {
    if (*n < max) out[(*n)++] = &e->acc;
    return;
  }
  if (e->kind == FE_E_NUM || e->kind == FE_E_PARAM) return;
  rhs_accesses(e->a, out, n, max);
  rhs_accesses(e->b, out, n, max);
}

static const sym *elements(const fe_tensor *t) {
  const sym *e = sym_const(1);
  for (int x = 0; x < t->order; x++) e = sym_mul(e, sym_from_size(&t->dims[x]));
  return e;
}

/* Has a more elements than b?  By the params' default values where every param involved has
 * one, otherwise only where it is proven. */
static bool larger(const fe_program *p, const sym *a, const sym *b) {
  int64_t *vals = ir_alloc((p->nparams + 1) * sizeof *vals);
  bool known = true;
  for (int q = 0; q < p->nparams; q++) {
    vals[q] = p->params[q].has_default ? p->params[q].value : 0;
    if (!p->params[q].has_default && (sym_uses(a, SYM_PARAM, q) || sym_uses(b, SYM_PARAM, q))) known = false;
  }
  int64_t va, vb;
  sym_env env = {.params = vals};
  if (known && sym_eval(a, &env, &va) && sym_eval(b, &env, &vb)) return va > vb;
  return sym_prove_le(NULL, b, a) && !sym_prove_le(NULL, a, b);
}

/* The access whose tensor decides the distribution, or NULL when every tensor is replicated. */
static const fe_access *owner_access(const fe_program *p, const fe_stmt *st) {
  if (partitioned(&p->tensors[st->lhs.tensor])) return &st->lhs;
  const fe_access *acc[64];
  int n = 0;
  rhs_accesses(st->rhs, acc, &n, 64);
  const fe_access *best = NULL;
  const sym *most = NULL;
  for (int k = 0; k < n; k++) {
    const fe_tensor *t = &p->tensors[acc[k]->tensor];
    if (!partitioned(t)) continue;
    const sym *e = elements(t);
    if (!best || larger(p, e, most)) best = acc[k], most = e;
  }
  return best;
}

/* The loop that carries original variable v, or -1. */
static int carrier(ir_stmt *s, int v) {
  while (!loop_of(s, v)) {
    int u = s->vars[v].use;
    if (u < 0) return -1;
    const ir_rel *r = &s->rels[u];
    if (r->kind != REL_DIVIDE && r->kind != REL_SPLIT) return -1;
    v = r->out[0];
  }
  return v;
}

static bool in_top_chain(const ir_stmt *s, int v) {
  for (const cin_node *x = s->root; x && x->kind == CIN_FORALL; x = x->body)
    if (x->var == v) return true;
  return false;
}

static const char *fresh_name(const sctx *c, const char *base, const char *suffix) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s_%s", base, suffix);
  for (int k = 2; name_taken(c, buf); k++) snprintf(buf, sizeof buf, "%s_%s%d", base, suffix, k);
  return ir_strdup(buf);
}

/* divide(v, v_dist, v_loc, G), whatever v's loop carries (the inner loop keeps it: threads, a
 * kernel, communicate), and v_dist distributed onto grid dim `dim` of `level`; returns v_loc. */
static int owner_distribute(sctx *c, int v, int level, int dim) {
  ir_stmt *s = c->s;
  const fe_machine *M = &c->ir->ast->machines[c->ir->machine];
  const fe_size *G = &M->levels[level].dims[dim];
  const char *on = fresh_name(c, s->vars[v].name, "dist"), *in = fresh_name(c, s->vars[v].name, "loc");
  cin_node *n = loop_of(s, v);
  const sym *E = s->vars[v].extent, *N = sym_from_size(G);
  bool red = s->vars[v].reduction;
  new_rel(c, REL_DIVIDE);
  int rel = s->nrels - 1;
  int o = new_var(s, on, N, red, s->ast->loc);
  int ii = new_var(s, in, sym_ceildiv(E, N), red, s->ast->loc);
  ir_rel *r = &s->rels[rel];
  r->in[0] = v, r->out[0] = o, r->out[1] = ii, r->factor = N;
  s->vars[v].use = rel;
  cin_node *inner = ir_alloc(sizeof *inner);
  *inner = *n;
  inner->var = ii;
  n->var = o, n->body = inner, n->ncomm = 0, n->comm = NULL;
  n->par = PAR_NONE, n->race = RACE_NO_RACES, n->kernel = 0, n->nsubst = 0;
  n->distributed = true, n->dist_owner = true, n->dist_level = level, n->dist_dim = dim;
  n->dist_loc = s->ast->loc;
  /* the s.t. clause: the compound form, with the grid dim it maps onto */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (f) {
    fprintf(f, "distribute({%s}, {%s}, {%s}, ", s->vars[v].name, on, in);
    if (level) fprintf(f, "%s[%d]", M->name, level);
    else fputs(M->name, f);
    fprintf(f, " dim %d) (owner computes)", dim);
    fclose(f);
    const char **st = ir_alloc((s->nst + 1) * sizeof *st);
    if (s->nst) memcpy(st, s->st, s->nst * sizeof *st);
    st[s->nst++] = ir_strdup(buf);
    s->st = st;
  }
  free(buf);
  return ii;
}

/* The distributed loops outermost, by level, each level's in nest order. */
static void owner_hoist(ir_stmt *s) {
  int nc = cin_loops(s->root, NULL, 0), no = 0;
  cin_node **chain = ir_alloc((nc + 1) * sizeof *chain), *saved = ir_alloc((nc + 1) * sizeof *saved);
  int *order = ir_alloc((nc + 1) * sizeof *order);
  nc = 0;
  for (cin_node *x = s->root; x && x->kind == CIN_FORALL; x = x->body) chain[nc++] = x;
  for (int l = 0; l < FE_MAX_DIMS; l++)
    for (int m = 0; m < nc; m++)
      if (chain[m]->distributed && chain[m]->dist_level == l) order[no++] = m;
  for (int m = 0; m < nc; m++)
    if (!chain[m]->distributed) order[no++] = m;
  for (int m = 0; m < nc; m++) saved[m] = *chain[m];
  for (int m = 0; m < nc; m++) {
    cin_node *body = chain[m]->body;
    *chain[m] = saved[order[m]];
    chain[m]->body = body;
  }
}

static void owner_computes(sctx *c) {
  ir_stmt *s = c->s;
  const fe_program *p = c->ir->ast;
  if (s->has_distribute || c->ir->machine < 0) return;
  const fe_access *acc = owner_access(p, s->ast);
  if (!acc) return;
  const fe_tensor *t = &p->tensors[acc->tensor];
  const fe_machine *M = &p->machines[c->ir->machine];
  /* (variable, level, grid dim) in level order */
  enum { MAXD = FE_MAX_DIMS * FE_MAX_DIMS };
  int nd = 0, var[MAXD], lev[MAXD], dim[MAXD];
  for (int l = 0; l < t->dist.nlevels && l < M->nlevels; l++) {
    const fe_dist_level *L = &t->dist.levels[l];
    for (int k = 0; k < L->ny && k < M->levels[l].ndims; k++) {
      if (L->y[k].kind != FE_Y_NAME || L->y[k].xindex >= acc->nidx) continue;
      int v = ir_var_find(s, acc->idx[L->y[k].xindex]);
      bool seen = v < 0 || nd >= MAXD;
      for (int q = 0; q < nd; q++) seen |= var[q] == v && lev[q] == l; /* A(i,i): one dim per level */
      if (seen) continue;
      var[nd] = v, lev[nd] = l, dim[nd++] = k;
    }
  }
  if (!nd) return;
  s->before_owner = ir_stmt_clone(s);
  fe_command cmd = {.name = "divide", .loc = s->ast->loc};
  const fe_command *was = c->cmd;
  c->cmd = &cmd; /* the relations the default adds point at the statement */
  bool any = false;
  for (int q = 0; q < nd; q++) {
    int L = carrier(s, var[q]);
    if (L < 0 || !in_top_chain(s, L)) continue;
    int rest = owner_distribute(c, L, lev[q], dim[q]);
    any = true;
    for (int m = q + 1; m < nd; m++) /* an inner level divides what remains of the variable */
      if (var[m] == var[q]) var[m] = rest;
  }
  c->cmd = was;
  if (any) owner_hoist(s);
  else s->before_owner = NULL;
}

/* ---- default loop order -------------------------------------------------------------------- */
/* A statement written without schedule commands gets its loops in an order that follows the
 * storage of its tensors (TACO's concordant iteration), chosen before the owner-computes
 * default distributes them.  Precondition: no command (the loops are the variables' own, in
 * the order the statement names them: its left side, then its right side), a dense result
 * (a sparse one appends an entry per iteration, so its summed loops stay innermost), a CPU
 * machine.  Rule: every access asks that the variables of its dimensions nest in dimension
 * order -- a sparse operand's ask is binding (its stored coordinates are iterated only in
 * storage order), the result's weighs 4 and each dense operand's 1 -- and the loops are
 * taken outermost first, each time the one whose placement breaks the least weight of those
 * asks (ties: the earlier in the written order).  GEMM runs i, k, j (unit stride in A and C),
 * SpMM C(i,k) = A(i,j) * B(j,k) reads each row of A once, MTTKRP has l innermost.  The
 * statement is a sum over its iteration points (reductions enclose whole subexpressions,
 * place_reduction), so any order gives its value. */
enum { ORDER_HARD = 1 << 20 };

static void ask_order(const ir_stmt *s, const fe_access *a, int w, int *weight) {
  for (int d = 0; d < a->nidx; d++)
    for (int e = d + 1; e < a->nidx; e++) {
      int u = ir_var_find(s, a->idx[d]), v = ir_var_find(s, a->idx[e]);
      if (u >= 0 && v >= 0 && u != v) weight[u * s->nvars + v] += w;
    }
}

/* Returns the statement as written where the order moved (the restore point of scheduling
 * further), NULL where it did not apply or changed nothing. */
static const ir_stmt *default_order(sctx *c, int ncmds) {
  ir_stmt *s = c->s;
  const fe_program *p = c->ir->ast;
  int n = s->nvars;
  if (n < 2 || ncmds || s->ast->ncmds || fe_tensor_sparse(&p->tensors[s->ast->lhs.tensor])) return NULL;
  if (c->ir->machine >= 0) {
    const fe_machine *M = &p->machines[c->ir->machine];
    for (int l = 0; l < M->nlevels; l++)
      if (M->levels[l].kind != FE_CPU) return NULL;
  }
  cin_node **chain = ir_alloc(n * sizeof *chain);
  int nc = 0;
  for (cin_node *x = s->root; x && x->kind == CIN_FORALL; x = x->body) chain[nc++] = x;
  if (nc != n) return NULL;
  int *weight = ir_alloc((size_t)n * n * sizeof *weight); /* weight[u*n+v]: u before v */
  ask_order(s, &s->ast->lhs, 4, weight);
  const fe_access *acc[64];
  int na = 0;
  rhs_accesses(s->ast->rhs, acc, &na, 64);
  for (int k = 0; k < na; k++)
    ask_order(s, acc[k], fe_tensor_sparse(&p->tensors[acc[k]->tensor]) ? ORDER_HARD : 1, weight);
  bool *placed = ir_alloc(n * sizeof *placed);
  int *order = ir_alloc(n * sizeof *order);
  for (int k = 0; k < n; k++) {
    int best = -1;
    long best_cost = 0;
    for (int m = 0; m < nc; m++) {
      int v = chain[m]->var;
      if (placed[v]) continue;
      long cost = 0;
      for (int u = 0; u < n; u++)
        if (!placed[u] && u != v) cost += weight[u * n + v];
      if (best < 0 || cost < best_cost) best = v, best_cost = cost;
    }
    placed[best] = true, order[k] = best;
  }
  bool moved = false;
  for (int k = 0; k < n; k++) moved |= chain[k]->var != order[k];
  if (!moved) return NULL;
  const ir_stmt *written = ir_stmt_clone(s);
  for (int k = 0; k < n; k++) chain[k]->var = order[k]; /* fresh foralls: only their variables */
  return written;
}

/* ---- driver ---------------------------------------------------------------------------------- */
static bool apply(sctx *c) {
  const char *n = c->cmd->name;
  if (!strcmp(n, "divide")) return cmd_divide(c, false);
  if (!strcmp(n, "split")) return cmd_divide(c, true);
  if (!strcmp(n, "fuse") || !strcmp(n, "collapse")) return cmd_fuse(c);
  if (!strcmp(n, "reorder")) return cmd_reorder(c);
  if (!strcmp(n, "distribute")) return cmd_distribute(c);
  if (!strcmp(n, "communicate")) return cmd_communicate(c);
  if (!strcmp(n, "rotate")) return cmd_rotate(c);
  if (!strcmp(n, "parallelize")) return cmd_parallelize(c);
  if (!strcmp(n, "precompute")) return cmd_precompute(c);
  if (!strcmp(n, "substitute")) return cmd_substitute(c);
  fe_error(c->src, c->cmd->loc,
           "unknown schedule command '%s' (divide, split, fuse, collapse, reorder, parallelize, "
           "precompute, distribute, communicate, rotate, substitute)",
           n);
  return false;
}

/* After all commands: number the distributed loops of each level in nest order (the k-th
 * maps onto grid dim k) and check what a later command may have broken. */
static bool finish(sctx *c) {
  ir_stmt *s = c->s;
  const fe_program *p = c->ir->ast;
  int count[FE_MAX_DIMS] = {0}; /* per machine level: a level has a grid dim at least */
  int nc = cin_loops(s->root, NULL, 0);
  s->ndist = 0; /* counted anew: a statement may be scheduled further (ir_schedule_stmt) */
  cin_node **chain = ir_alloc((nc + 1) * sizeof *chain);
  nc = 0;
  for (cin_node *x = s->root; x && x->kind == CIN_FORALL; x = x->body) chain[nc++] = x;
  for (int k = 0; k < nc; k++) {
    cin_node *x = chain[k];
    if (!x->distributed) continue;
    int l = x->dist_level < FE_MAX_DIMS ? x->dist_level : FE_MAX_DIMS - 1;
    const fe_grid *g = &p->machines[c->ir->machine].levels[x->dist_level];
    if (x->dist_owner) { /* the grid dim of the data, given */
      s->ndist++;
      continue;
    }
    x->dist_dim = count[l]++;
    if (x->dist_dim >= g->ndims)
      FAIL(x->dist_loc, "distribute: loop '%s' is the %d%s distributed loop but the machine "
                                "level has %d dimension%s",
           s->vars[x->var].name, x->dist_dim + 1, x->dist_dim == 0 ? "st" : x->dist_dim == 1 ? "nd" : x->dist_dim == 2 ? "rd" : "th",
           g->ndims, g->ndims == 1 ? "" : "s");
    s->ndist++;
  }
  /* distributed loops hidden below a where are not supported */
  for (int r = 0; r < s->nrels; r++) {
    const ir_rel *R = &s->rels[r];
    if (R->kind != REL_ROTATE) continue;
    int pr = -1;
    for (int k = 0; k < nc; k++)
      if (chain[k]->var == R->out[0]) pr = k;
    for (int q = 0; q < R->nrot; q++) {
      int pq = -1;
      for (int k = 0; k < nc; k++)
        if (chain[k]->var == R->rot[q]) pq = k;
      if (pr >= 0 && pq > pr)
        FAIL(R->loc, "rotate: after a later reorder, loop '%s' no longer encloses '%s'",
             s->vars[R->rot[q]].name, s->vars[R->out[0]].name);
    }
  }
  return true;
}

/* ---- balanced partitions -------------------------------------------------------------------
 * A divide whose outer loop is distributed onto grid dim g of a flat machine by the size of
 * that dim (distribute's and the owner-computes default's) takes the blocks of a balanced
 * partition where its variable indexes a dimension that the statement's result (else its first
 * operand that does) partitions over g with those blocks (`balanced`, `balanced by`): then the
 * loop's blocks are the data's.  Its inner variable then ranges up to the whole extent (a block
 * may hold more than E/G coordinates); the lowering bounds each block by split[io + 1]. */
static int access_split(const ir_program *ir, const fe_access *a, const char *var, int g) {
  const fe_tensor *t = &ir->ast->tensors[a->tensor];
  if (!t->balance || !t->has_dist || t->dist.nlevels < 1 || g >= t->dist.levels[0].ny) return -1;
  const fe_ydim *y = &t->dist.levels[0].y[g];
  if (y->kind != FE_Y_NAME || y->xindex >= a->nidx || strcmp(a->idx[y->xindex], var)) return -1;
  return fe_split_of(ir->ast, a->tensor, g);
}

static void balance_divides(sctx *c) {
  ir_stmt *s = c->s;
  const fe_program *p = c->ir->ast;
  if (!fe_nsplits(p) || c->ir->machine < 0 || p->machines[c->ir->machine].nlevels != 1) return;
  const fe_grid *G = &p->machines[c->ir->machine].levels[0];
  const fe_access *acc[64];
  int na = 0;
  rhs_accesses(s->ast->rhs, acc, &na, 64);
  for (int r = 0; r < s->nrels; r++) {
    ir_rel *R = &s->rels[r];
    int v = R->in[0];
    const cin_node *n = R->kind == REL_DIVIDE ? loop_of(s, R->out[0]) : NULL;
    if (!n || !n->distributed || n->dist_level != 0 || n->dist_dim < 0 || n->dist_dim >= G->ndims || !s->vars[v].original)
      continue;
    int g = n->dist_dim;
    if (!sym_equal(R->factor, sym_from_size(&G->dims[g]))) continue;
    int id = access_split(c->ir, &s->ast->lhs, s->vars[v].name, g);
    for (int k = 0; k < na && id < 0; k++) id = access_split(c->ir, acc[k], s->vars[v].name, g);
    if (id < 0) continue;
    R->split = id + 1;
    s->vars[R->out[1]].extent = s->vars[v].extent;
  }
}

/* Apply commands in order until one fails, then the owner-computes default where no
 * distribute was applied, then number the distributed loops. */
static void schedule_stmt(ir_program *ir, ir_stmt *s, const fe_command *cmds, int n) {
  if (s->before_owner) *s = *ir_stmt_clone(s->before_owner); /* the default is applied anew */
  sctx c = {.ir = ir, .s = s, .src = ir->ast->src};
  /* the default order is the default's too: scheduling further starts from the written one */
  const ir_stmt *written = default_order(&c, n);
  bool ok = true;
  for (int k = 0; k < n && ok; k++) {
    c.cmd = &cmds[k];
    ok = apply(&c);
    if (ok) add_st(&c);
    if (ok && !strcmp(cmds[k].name, "distribute")) s->has_distribute = true;
  }
  /* the commands' own checks first, on the loops they made; then the default's loops counted */
  if (ok && finish(&c)) {
    owner_computes(&c);
    if (finish(&c)) balance_divides(&c);
  }
  if (written) s->before_owner = written;
}

int ir_schedule(ir_program *ir, int stop_after) {
  int before = ir->ast->src->nerrors;
  for (int i = 0; i < ir->nstmts; i++) {
    ir_stmt *s = &ir->stmts[i];
    int n = s->ast->ncmds;
    if (stop_after >= 0 && stop_after < n) n = stop_after;
    schedule_stmt(ir, s, s->ast->cmds, n);
  }
  return ir->ast->src->nerrors - before;
}

int ir_schedule_stmt(ir_program *ir, ir_stmt *s, const fe_command *cmds, int ncmds) {
  int before = ir->ast->src->nerrors;
  schedule_stmt(ir, s, cmds, ncmds);
  return ir->ast->src->nerrors - before;
}
