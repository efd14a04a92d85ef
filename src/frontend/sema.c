/* sema.c -- the semantic rules of LANGUAGE.md sections 3 and 4: names, sizes, distributions
 * and index variables.  Every error is reported (with the location of the offending token),
 * not just the first; schedules are left to the IR stage. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

typedef struct {
  fe_program *prog;
  fe_source *src;
} checker;

static void error(checker *c, fe_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void error(checker *c, fe_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fe_verror(c->src, loc, fmt, ap);
  va_end(ap);
}

static bool before(fe_loc a, fe_loc b) {
  return a.line < b.line || (a.line == b.line && a.col < b.col);
}

static const char *plural(int64_t n, const char *one, const char *many) {
  return n == 1 ? one : many;
}

/* What kind of declaration a name has, for messages: "param", "machine", "tensor" or NULL. */
static const char *kind_of(const fe_program *prog, const char *name) {
  if (fe_find_param(prog, name) >= 0)
    return "param";
  if (fe_find_machine(prog, name) >= 0)
    return "machine";
  if (fe_find_tensor(prog, name) >= 0)
    return "tensor";
  return NULL;
}

static bool same_size(const fe_size *a, const fe_size *b) {
  return a->is_param == b->is_param && (a->is_param ? a->param == b->param : a->value == b->value);
}

static const char *size_text(const fe_program *prog, const fe_size *s, char buf[32]) {
  if (s->is_param)
    return s->param >= 0 && s->param < prog->nparams ? prog->params[s->param].name : "?";
  snprintf(buf, 32, "%" PRId64, s->value);
  return buf;
}

static void check_positive(checker *c, const fe_size *s, const char *what) {
  if (!s->is_param && s->value <= 0)
    error(c, s->loc, "%s dimension must be positive", what);
  if (s->is_param && s->param >= 0 && s->param < c->prog->nparams && c->prog->params[s->param].is_float)
    error(c, s->loc,
          "'%s' is a floating param: it cannot be a %s dimension (floating params appear only in expressions and "
          "loop conditions)",
          c->prog->params[s->param].name, what);
}

/* ---- declarations ------------------------------------------------------------------- */

typedef struct {
  const char *name, *what;
  fe_loc loc;
  bool implicit;
} decl;

static int by_loc(const void *a, const void *b) {
  const decl *x = a, *y = b;
  return before(x->loc, y->loc) ? -1 : before(y->loc, x->loc) ? 1 : 0;
}

/* Params, machines and tensors share one namespace.  Each name declared again is reported at
 * the later declaration (in source order), with a note at the first. */
static void check_redeclarations(checker *c) {
  const fe_program *prog = c->prog;
  int n = prog->nparams + prog->nmachines + prog->ntensors, k = 0;
  if (n == 0)
    return;
  decl *d = malloc(sizeof *d * (size_t)n);
  if (!d) {
    error(c, (fe_loc){0, 0}, "out of memory");
    return;
  }
  for (int i = 0; i < prog->nparams; i++)
    d[k++] = (decl){prog->params[i].name, "param", prog->params[i].loc, prog->params[i].implicit};
  for (int i = 0; i < prog->nmachines; i++)
    d[k++] = (decl){prog->machines[i].name, "machine", prog->machines[i].loc, false};
  for (int i = 0; i < prog->ntensors; i++)
    d[k++] = (decl){prog->tensors[i].name, prog->tensors[i].is_temp ? "temporary" : "tensor", prog->tensors[i].loc, false};
  qsort(d, (size_t)n, sizeof *d, by_loc);
  for (int i = 1; i < n; i++) {
    for (int j = 0; j < i; j++) {
      if (strcmp(d[i].name, d[j].name) != 0)
        continue;
      if (d[i].implicit)
        error(c, d[i].loc,
              "redeclaration of '%s' (a name in grid(...) that is not a param "
              "declares one)",
              d[i].name);
      else
        error(c, d[i].loc, "redeclaration of '%s'", d[i].name);
      fe_note(c->src, d[j].loc, "'%s' was first declared here, as a %s%s", d[j].name, d[j].what,
              d[j].implicit ? " (by its use in grid)" : "");
      break;
    }
  }
  free(d);
}

/* Why a param may not have this name, or NULL.  A param is a field of the params struct of
 * the generated API (LANGUAGE.md section 7) under its own name, in C and in C++ (the header
 * is both), so the name must be able to be a field: not a keyword of C (C11 and C23) or C++,
 * not `defined`, and not an identifier that C reserves for the implementation (two leading
 * underscores, or one and a capital).  Macros of the same name are no obstacle: the header
 * shields the struct from them.  Every other kind of name is spelled with a prefix in
 * generated code and may be anything the language accepts. */
static const char *param_name_problem(const char *n) {
  static const char *const keywords[] = {
      /* C11 */
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
      "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed",
      "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while",
      /* C23 */
      "alignas", "alignof", "bool", "constexpr", "false", "nullptr", "static_assert", "thread_local", "true",
      "typeof", "typeof_unqual",
      /* C++ */
      "and", "and_eq", "asm", "bitand", "bitor", "catch", "char8_t", "char16_t", "char32_t", "class", "co_await",
      "co_return", "co_yield", "compl", "concept", "const_cast", "consteval", "constinit", "decltype", "delete",
      "dynamic_cast", "explicit", "export", "friend", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "operator", "or", "or_eq", "private", "protected", "public", "reinterpret_cast", "requires", "static_cast",
      "template", "this", "throw", "try", "typeid", "typename", "using", "virtual", "wchar_t", "xor", "xor_eq"};
  for (size_t k = 0; k < sizeof keywords / sizeof *keywords; k++)
    if (!strcmp(n, keywords[k])) return "is a keyword of C or C++";
  if (!strcmp(n, "defined")) return "is an operator of the C preprocessor";
  if (n[0] == '_' && (n[1] == '_' || (n[1] >= 'A' && n[1] <= 'Z')))
    return "is reserved for the C implementation (it starts with two underscores, or one and a capital)";
  return NULL;
}

static void check_params_and_machines(checker *c) {
  for (int i = 0; i < c->prog->nparams; i++) {
    const fe_param *prm = &c->prog->params[i];
    const char *why = param_name_problem(prm->name);
    if (why)
      error(c, prm->loc,
            "param '%s' cannot have this name: '%s' %s, and a param is a field of the params struct of the generated "
            "C/C++ API under its own name; rename it",
            prm->name, prm->name, why);
    if (prm->has_default && !prm->is_float && prm->value <= 0)
      error(c, prm->loc, "param '%s' must be positive, but its default is %" PRId64, prm->name,
            prm->value);
  }
  for (int i = 0; i < c->prog->nmachines; i++) {
    int all = 0;
    for (int l = 0; l < c->prog->machines[i].nlevels; l++) {
      const fe_grid *g = &c->prog->machines[i].levels[l];
      for (int k = 0; k < g->ndims; k++)
        check_positive(c, &g->dims[k], "grid");
      all += g->ndims;
      if (all > FE_MAX_DIMS) {
        error(c, g->loc, "machine '%s' has more than %d grid dimensions in all (the limit)",
              c->prog->machines[i].name, FE_MAX_DIMS);
        break;
      }
    }
  }
}

/* The name of a machine level as schedules write it: "M" for level 0, "M[1]" below. */
static const char *level_name(const fe_machine *m, int l, char buf[80]) {
  if (l == 0)
    return m->name;
  snprintf(buf, 80, "%.60s[%d]", m->name, l);
  return buf;
}

/* One level X -> Y of t's distribution, onto level l of machine m. */
static void check_dist_level(checker *c, const fe_tensor *t, fe_dist_level *lv, const fe_machine *m,
                             int l) {
  const fe_grid *g = &m->levels[l];
  char buf[80];
  const char *mname = level_name(m, l, buf);
  if (lv->nx != t->order)
    error(c, lv->loc, "X has %d %s but %s has order %d", lv->nx, plural(lv->nx, "name", "names"),
          t->name, t->order);
  for (int k = 0; k < lv->nx; k++)
    for (int j = 0; j < k; j++)
      if (strcmp(lv->x[k], lv->x[j]) == 0) {
        error(c, lv->xloc[k], "'%s' appears twice in X", lv->x[k]);
        break;
      }
  if (lv->ny != g->ndims)
    error(c, lv->ny ? lv->y[0].loc : lv->loc, "Y has %d %s but %s has %d %s", lv->ny,
          plural(lv->ny, "entry", "entries"), mname, g->ndims,
          plural(g->ndims, "dimension", "dimensions"));
  for (int k = 0; k < lv->ny; k++) {
    fe_ydim *y = &lv->y[k];
    if (y->kind == FE_Y_FIXED && k < g->ndims && !g->dims[k].is_param && g->dims[k].value > 0 &&
        y->fixed >= g->dims[k].value)
      error(c, y->loc,
            "fixed coordinate %" PRId64 " is outside grid dimension %d of %s, which has %" PRId64
            " %s",
            y->fixed, k + 1, mname, g->dims[k].value,
            plural(g->dims[k].value, "processor", "processors"));
    if (y->kind != FE_Y_NAME)
      continue;
    y->xindex = -1;
    for (int j = 0; j < lv->nx; j++)
      if (strcmp(y->name, lv->x[j]) == 0) {
        y->xindex = j;
        break;
      }
    bool repeated = false;
    for (int j = 0; j < k && !repeated; j++)
      repeated = lv->y[j].kind == FE_Y_NAME && strcmp(lv->y[j].name, y->name) == 0;
    if (repeated)
      error(c, y->loc, "'%s' appears twice in Y", y->name);
    else if (y->xindex < 0 && lv->ny == 1 && strlen(y->name) > 1)
      /* one token on a 1-D level is one entry (parser: dist_side), never compact entries */
      error(c, y->loc, "'%s' in Y is not a name of X: %s has 1 dimension, so Y is the one entry '%s' (compactly it "
            "would be %zu entries)", y->name, mname, y->name, strlen(y->name));
    else if (y->xindex < 0)
      error(c, y->loc, "'%s' in Y is not a name of X", y->name);
  }
}

/* `@ M` with no mapping (LANGUAGE.md section 3): without --auto, the documented default:
 * at every level of M, the tensor's leading dimensions are blocked over the level's
 * dimensions in order, and it is replicated over the level's remaining dimensions. */
static bool default_mapping(checker *c, const fe_tensor *t, fe_dist *d, const fe_machine *m) {
  d->levels = calloc((size_t)m->nlevels, sizeof *d->levels);
  if (!d->levels) {
    error(c, d->loc, "out of memory");
    return false;
  }
  d->nlevels = m->nlevels;
  for (int l = 0; l < m->nlevels; l++) {
    fe_dist_level *lv = &d->levels[l];
    int ny = m->levels[l].ndims;
    lv->loc = d->loc;
    lv->nx = t->order, lv->ny = ny;
    lv->x = calloc((size_t)t->order + 1, sizeof *lv->x);
    lv->xloc = calloc((size_t)t->order + 1, sizeof *lv->xloc);
    lv->y = calloc((size_t)ny + 1, sizeof *lv->y);
    if (!lv->x || !lv->xloc || !lv->y) {
      error(c, d->loc, "out of memory");
      return false;
    }
    for (int k = 0; k < t->order; k++) {
      char b[24];
      snprintf(b, sizeof b, "d%d", k);
      lv->x[k] = strdup(b);
      lv->xloc[k] = d->loc;
      if (!lv->x[k]) return error(c, d->loc, "out of memory"), false;
    }
    for (int k = 0; k < ny; k++) {
      fe_ydim *y = &lv->y[k];
      y->loc = d->loc;
      if (k < t->order) {
        y->kind = FE_Y_NAME;
        y->name = strdup(lv->x[k]);
        if (!y->name) return error(c, d->loc, "out of memory"), false;
      } else {
        y->kind = FE_Y_STAR;
      }
    }
  }
  return true;
}

/* `balanced` / `balanced by T` (fe_split_of): a sparse tensor partitioned on a flat CPU machine
 * balances itself; a tensor balanced by T takes T's blocks on every grid dim it partitions, where
 * T partitions a dimension of the same size. */
static void check_balance(checker *c, fe_tensor *t) {
  if (!t->balanced) return;
  const fe_program *p = c->prog;
  int self = (int)(t - p->tensors);
  const fe_dist *d = &t->dist;
  if (d->machine < 0) return; /* reported */
  const fe_machine *m = &p->machines[d->machine];
  if (d->chosen) {
    error(c, t->balance_loc, "balanced: '%s' needs a written mapping (M(X -> Y)), not the layout the compiler chooses", t->name);
    return;
  }
  if (m->nlevels != 1 || d->nlevels != 1 || m->levels[0].kind != FE_CPU) {
    error(c, t->balance_loc, "balanced: '%s' needs a distribution over a flat CPU machine (one level)", t->name);
    return;
  }
  bool parts = false;
  for (int k = 0; k < d->levels[0].ny; k++) parts |= d->levels[0].y[k].kind == FE_Y_NAME;
  if (!parts) {
    error(c, t->balance_loc, "balanced: the distribution of '%s' partitions no dimension", t->name);
    return;
  }
  if (!t->balance_by) {
    if (t->is_temp) {
      error(c, t->balance_loc, "balanced: the temporary '%s' has no entries before the program runs to balance by "
                               "(write 'balanced by S' to take the blocks of a balanced tensor S)", t->name);
      return;
    }
    if (!fe_tensor_sparse(t)) {
      error(c, t->balance_loc, "balanced: '%s' is dense; only a sparse tensor balances its stored entries "
                               "(write 'balanced by S' to take the blocks of a balanced sparse tensor S)", t->name);
      return;
    }
    t->balance = self + 1;
    return;
  }
  int src = fe_find_tensor(p, t->balance_by);
  if (src < 0) {
    error(c, t->balance_by_loc, "balanced by: unknown tensor '%s'", t->balance_by);
    return;
  }
  const fe_tensor *S = &p->tensors[src];
  if (src == self || !S->balanced || S->balance_by || !fe_tensor_sparse(S)) {
    error(c, t->balance_by_loc, "balanced by: '%s' is not declared 'balanced' itself", S->name);
    return;
  }
  if (S->dist.machine != d->machine) {
    error(c, t->balance_by_loc, "balanced by: '%s' is distributed over another machine", S->name);
    return;
  }
  for (int k = 0; k < d->levels[0].ny; k++) {
    const fe_ydim *y = &d->levels[0].y[k];
    if (y->kind != FE_Y_NAME) continue;
    const fe_ydim *ys = k < S->dist.levels[0].ny ? &S->dist.levels[0].y[k] : NULL;
    if (!ys || ys->kind != FE_Y_NAME) {
      error(c, y->loc, "balanced by: '%s' partitions no dimension over grid dimension %d, which '%s' partitions", S->name, k,
            t->name);
      return;
    }
    if (y->xindex < 0 || y->xindex >= t->order || ys->xindex < 0 || ys->xindex >= S->order) return; /* reported */
    if (!same_size(&t->dims[y->xindex], &S->dims[ys->xindex])) {
      error(c, y->loc, "balanced by: dimension %d of '%s' and dimension %d of '%s', both on grid dimension %d, differ in size",
            y->xindex, t->name, ys->xindex, S->name, k);
      return;
    }
  }
  t->balance = src + 1;
}

static void check_tensor(checker *c, fe_tensor *t) {
  if (t->order > FE_MAX_DIMS) {
    error(c, t->loc, "tensor '%s' has order %d; the limit is %d", t->name, t->order, FE_MAX_DIMS);
    return;
  }
  for (int k = 0; k < t->order; k++)
    check_positive(c, &t->dims[k], "tensor");
  /* at the params' defaults, no more elements than the executables address (2^59), as the
   * executable would refuse every run with its defaults */
  int64_t n = 1;
  bool known = true, big = false;
  for (int k = 0; k < t->order && known; k++) {
    const fe_size *z = &t->dims[k];
    const fe_param *pr = z->is_param && z->param >= 0 && z->param < c->prog->nparams ? &c->prog->params[z->param] : NULL;
    int64_t e = !z->is_param ? z->value : pr && pr->has_default && pr->value > 0 ? pr->value : -1;
    if (e <= 0) known = false;
    else if (n > ((int64_t)1 << 59) / e) big = true;
    else n *= e;
  }
  if (known && (big || n > ((int64_t)1 << 59)))
    error(c, t->loc, "tensor '%s' has too many elements to address at the params' defaults (at most 2^59)", t->name);
  if (!t->has_dist)
    return;
  fe_dist *d = &t->dist;
  if (t->order == 0) {
    error(c, d->loc, "scalar '%s' cannot be distributed (scalars are replicated on every rank)",
          t->name);
    return;
  }
  d->machine = fe_find_machine(c->prog, d->machine_name);
  if (d->machine < 0) {
    const char *kind = kind_of(c->prog, d->machine_name);
    if (kind)
      error(c, d->loc, "'%s' is a %s, not a machine", d->machine_name, kind);
    else
      error(c, d->loc, "unknown machine '%s'", d->machine_name);
    return;
  }
  const fe_machine *m = &c->prog->machines[d->machine];
  if (before(d->loc, m->loc)) {
    error(c, d->loc, "machine '%s' is used before its declaration", m->name);
    fe_note(c->src, m->loc, "'%s' is declared here", m->name);
  }
  if (d->chosen && !d->nlevels && !default_mapping(c, t, d, m))
    return;
  if (d->nlevels > m->nlevels)
    error(c, d->levels[m->nlevels].loc, "the distribution has %d levels but machine %s has %d",
          d->nlevels, m->name, m->nlevels);
  for (int l = 0; l < d->nlevels && l < m->nlevels; l++)
    check_dist_level(c, t, &d->levels[l], m, l);
}

/* ---- statements --------------------------------------------------------------------- */

/* An index variable of one statement: where it first occurs and the extent it got first. */
typedef struct {
  const char *name;
  fe_loc loc;
  const fe_size *extent; /* NULL until an access with a valid tensor gives one */
  const char *tensor;
  int dim;
  bool lhs, rhs, denominator_reported;
} var;

typedef struct {
  var *v;
  int n;
  bool oom;
} vars;

static var *find_var(vars *vs, const char *name) {
  for (int k = 0; k < vs->n; k++)
    if (strcmp(vs->v[k].name, name) == 0)
      return &vs->v[k];
  return NULL;
}

static var *add_var(checker *c, vars *vs, const char *name, fe_loc loc) {
  var *v = find_var(vs, name);
  if (v || vs->oom)
    return v;
  var *bigger = realloc(vs->v, sizeof *bigger * (size_t)(vs->n + 1));
  if (!bigger) {
    error(c, loc, "out of memory");
    vs->oom = true;
    return NULL;
  }
  vs->v = bigger;
  v = &vs->v[vs->n++];
  *v = (var){.name = name, .loc = loc};
  return v;
}

/* Resolve a's tensor and check its use; returns the tensor when its dims can give extents. */
static const fe_tensor *check_access(checker *c, fe_access *a) {
  a->tensor = fe_find_tensor(c->prog, a->tname);
  if (a->tensor < 0) {
    const char *kind = kind_of(c->prog, a->tname);
    if (kind)
      error(c, a->loc, "'%s' is a %s, not a tensor", a->tname, kind);
    else if (fe_find_func(a->tname, strlen(a->tname)) >= 0)
      error(c, a->loc, "unknown tensor '%s' (the function %s is called with arguments in parentheses)", a->tname,
            a->tname);
    else
      error(c, a->loc, "unknown tensor '%s'", a->tname);
    return NULL;
  }
  const fe_tensor *t = &c->prog->tensors[a->tensor];
  if (before(a->loc, t->loc)) {
    error(c, a->loc, "tensor '%s' is used before its declaration", t->name);
    fe_note(c->src, t->loc, "'%s' is declared here", t->name);
  }
  if (a->nidx != t->order) {
    error(c, a->loc, "%s has order %d but is accessed with %d %s", t->name, t->order, a->nidx,
          plural(a->nidx, "index", "indices"));
    return NULL;
  }
  return t;
}

/* Record the variables of one access.  A variable gets its extent from the first dim it
 * indexes; every other dim it indexes must have the same size (same literal or same param). */
static void collect(checker *c, vars *vs, fe_access *a, bool lhs) {
  const fe_tensor *t = check_access(c, a);
  for (int k = 0; k < a->nidx; k++) {
    int seen = 0; /* earlier occurrences in this access: report the second one only */
    for (int j = 0; j < k; j++)
      seen += strcmp(a->idx[j], a->idx[k]) == 0;
    if (seen == 1) {
      if (lhs)
        error(c, a->idxloc[k], "index variable '%s' appears twice on the left side", a->idx[k]);
      else
        error(c, a->idxloc[k], "diagonal accesses are not supported: '%s' indexes %s twice",
              a->idx[k], a->tname);
    }
    var *v = add_var(c, vs, a->idx[k], a->idxloc[k]);
    if (!v)
      continue;
    v->lhs |= lhs;
    v->rhs |= !lhs;
    if (!t || (t->dims[k].is_param && t->dims[k].param < 0))
      continue;
    if (!v->extent) {
      v->extent = &t->dims[k];
      v->tensor = t->name;
      v->dim = k + 1;
    } else if (!same_size(v->extent, &t->dims[k])) {
      char b1[32], b2[32];
      error(c, a->idxloc[k],
            "conflicting extents for index variable '%s': %s (%s, dim %d) and %s (%s, dim %d)",
            v->name, size_text(c->prog, v->extent, b1), v->tensor, v->dim,
            size_text(c->prog, &t->dims[k], b2), t->name, k + 1);
    }
  }
}

/* A bare name that is a param and no tensor is the param's value (LANGUAGE.md section 3).
 * Params share one namespace with tensors, so the two cannot both exist. */
static bool resolve_param(checker *c, fe_expr *e) {
  if (e->kind != FE_E_ACCESS || e->acc.parens || e->acc.nidx || fe_find_tensor(c->prog, e->acc.tname) >= 0)
    return false;
  int k = fe_find_param(c->prog, e->acc.tname);
  if (k < 0)
    return false;
  e->kind = FE_E_PARAM;
  e->param = k;
  if (before(e->loc, c->prog->params[k].loc)) {
    error(c, e->loc, "param '%s' is used before its declaration", e->acc.tname);
    fe_note(c->src, c->prog->params[k].loc, "'%s' is declared here", e->acc.tname);
  }
  return true;
}

static void collect_rhs(checker *c, vars *vs, fe_expr *e) {
  if (!e)
    return;
  if (e->kind == FE_E_CALL) {
    /* the name is a tensor's only when that tensor is declared later (the parser read a call) */
    int t = fe_find_tensor(c->prog, fe_func_name(e->func));
    if (t >= 0) {
      error(c, e->loc, "tensor '%s' is used before its declaration (here '%s(...)' is the function)",
            c->prog->tensors[t].name, fe_func_name(e->func));
      fe_note(c->src, c->prog->tensors[t].loc, "'%s' is declared here", c->prog->tensors[t].name);
    }
  }
  if (resolve_param(c, e))
    return;
  if (e->kind == FE_E_ACCESS)
    collect(c, vs, &e->acc, false);
  collect_rhs(c, vs, e->a);
  collect_rhs(c, vs, e->b);
}

/* A summed variable inside a denominator would divide by a sum's terms one at a time, which
 * is not what the notation means; reject it. */
static void check_denominators(checker *c, vars *vs, const fe_expr *e, bool in_denominator) {
  if (!e)
    return;
  if (e->kind == FE_E_ACCESS && in_denominator) {
    for (int k = 0; k < e->acc.nidx; k++) {
      var *v = find_var(vs, e->acc.idx[k]);
      if (v && !v->lhs && !v->denominator_reported) {
        v->denominator_reported = true;
        error(c, e->acc.idxloc[k], "summed variable '%s' cannot appear in a denominator", v->name);
      }
    }
  }
  check_denominators(c, vs, e->a, in_denominator);
  check_denominators(c, vs, e->b, in_denominator || e->kind == FE_E_DIV);
}

/* The first summed variable that e uses, or NULL. */
static const var *summed_in(vars *vs, const fe_expr *e) {
  if (!e)
    return NULL;
  for (int k = 0; e->kind == FE_E_ACCESS && k < e->acc.nidx; k++) {
    const var *v = find_var(vs, e->acc.idx[k]);
    if (v && !v->lhs)
      return v;
  }
  const var *v = summed_in(vs, e->a);
  return v ? v : summed_in(vs, e->b);
}

/* In an integer statement, a sum divided by something is the sum's quotient (LANGUAGE.md
 * section 4: the reduction encloses the smallest subexpression that holds the summed
 * variable), but the generated loops would divide each term and truncate it; until they
 * divide after summing, such a division is a located error. */
static void check_integer_division(checker *c, vars *vs, const fe_expr *e, const fe_tensor *lhs) {
  if (!e || !(lhs->type == FE_INT32 || lhs->type == FE_INT64))
    return;
  if (e->kind == FE_E_DIV) {
    const var *v = summed_in(vs, e->a);
    if (v) {
      error(c, e->loc,
            "integer division of a sum over '%s' is not supported ('%s' is %s): write the sum into a temporary first, "
            "then divide it in a second statement",
            v->name, lhs->name, fe_type_name(lhs->type));
      return;
    }
  }
  check_integer_division(c, vs, e->a, lhs);
  check_integer_division(c, vs, e->b, lhs);
}

/* Literals take the type of the statement's result (LANGUAGE.md section 4; README,
 * "Choices"): integer literals are exact int64 values and must fit an int32 result; a
 * floating literal in an integer statement truncates toward zero and must fit; a float
 * statement rounds a literal once to float (as C reads 0.1f), which must not overflow. */
/* The value of an expression of literals only, as an integer division by it would see it (a
 * floating literal truncated toward zero): +, -, *, unary minus, integer division (toward
 * zero) and abs, min, max of literals; false where e holds anything else (a param, an access,
 * another function, a division by 0) or overflows. */
static bool literal_int(const fe_expr *e, int64_t *v) {
  int64_t a, b;
  if (!e) return false;
  switch (e->kind) {
  case FE_E_NUM:
    if (e->is_int) return *v = e->ival, true;
    if (!(fabs(e->num) < 9.2e18)) return false;
    return *v = (int64_t)trunc(e->num), true;
  case FE_E_NEG: return literal_int(e->a, &a) && a != INT64_MIN && (*v = -a, true);
  case FE_E_ADD: return literal_int(e->a, &a) && literal_int(e->b, &b) && !__builtin_add_overflow(a, b, v);
  case FE_E_SUB: return literal_int(e->a, &a) && literal_int(e->b, &b) && !__builtin_sub_overflow(a, b, v);
  case FE_E_MUL: return literal_int(e->a, &a) && literal_int(e->b, &b) && !__builtin_mul_overflow(a, b, v);
  case FE_E_DIV: /* C's, toward zero (the most negative value by -1 wraps, as dtl_idiv64 does) */
    if (!literal_int(e->a, &a) || !literal_int(e->b, &b) || b == 0) return false;
    return *v = b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b, true;
  case FE_E_CALL:
    if (e->func == FE_F_ABS && e->nargs == 1 && literal_int(e->a, &a)) return *v = a < 0 ? (int64_t)(0 - (uint64_t)a) : a, true;
    if ((e->func == FE_F_MIN || e->func == FE_F_MAX) && e->nargs == 2 && literal_int(e->a, &a) && literal_int(e->b, &b))
      return *v = (e->func == FE_F_MIN) == (a < b) ? a : b, true;
    return false;
  default: return false;
  }
}

static void check_literals(checker *c, const fe_expr *e, const fe_tensor *lhs) {
  if (!e)
    return;
  if (e->kind == FE_E_PARAM && (lhs->type == FE_INT32 || lhs->type == FE_INT64) && e->param >= 0 &&
      c->prog->params[e->param].is_float)
    error(c, e->loc, "'%s' is a floating param and '%s' is %s: an integer statement takes only integer params",
          c->prog->params[e->param].name, lhs->name, fe_type_name(lhs->type));
  if (e->kind == FE_E_CALL && (lhs->type == FE_INT32 || lhs->type == FE_INT64) && !fe_func_integer(e->func))
    error(c, e->loc,
          "%s is not defined on integers: '%s' is %s, and an integer statement allows only the functions abs, min "
          "and max",
          fe_func_name(e->func), lhs->name, fe_type_name(lhs->type));
  if (e->kind == FE_E_DIV && (lhs->type == FE_INT32 || lhs->type == FE_INT64)) {
    /* an integer division by a literal 0 (a floating literal truncates to the statement's type),
     * or by literals that make 0 (2 - 2) */
    const fe_expr *d = e->b;
    while (d && d->kind == FE_E_NEG) d = d->a;
    int64_t z;
    if (d && d->kind == FE_E_NUM && (d->is_int ? d->ival == 0 : trunc(d->num) == 0))
      error(c, d->loc, "division by zero%s%s%s in an integer statement ('%s' is %s)", d->is_int ? "" : ": the literal ",
            d->is_int ? "" : d->text ? d->text : "?", d->is_int ? "" : " truncates to 0", lhs->name, fe_type_name(lhs->type));
    else if (literal_int(e->b, &z) && z == 0)
      error(c, e->b->loc, "division by zero: these literals make 0, in an integer statement ('%s' is %s)", lhs->name,
            fe_type_name(lhs->type));
  }
  if (e->kind != FE_E_NUM) {
    check_literals(c, e->a, lhs);
    check_literals(c, e->b, lhs);
    return;
  }
  const char *text = e->text ? e->text : "?";
  switch (lhs->type) {
  case FE_INT32:
    if (e->is_int ? e->ival < INT32_MIN || e->ival > INT32_MAX
                  : !(trunc(e->num) >= INT32_MIN && trunc(e->num) <= INT32_MAX))
      error(c, e->loc, "literal %s does not fit int32, the type of '%s' (from %d to %d%s)", text,
            lhs->name, INT32_MIN, INT32_MAX,
            e->is_int && e->ival == -(int64_t)INT32_MIN ? "; write -2147483647 - 1 for the least" : "");
    break;
  case FE_INT64:
    if (!e->is_int && !(trunc(e->num) >= -9223372036854775808.0 && trunc(e->num) < 9223372036854775808.0))
      error(c, e->loc, "literal %s does not fit int64, the type of '%s'", text, lhs->name);
    break;
  case FE_FLOAT:
    if (isinf(fe_float_literal(e->text, e->num)))
      error(c, e->loc, "literal %s is out of the range of float, the type of '%s'", text, lhs->name);
    break;
  case FE_DOUBLE:
    break;
  }
}

static void check_stmt(checker *c, fe_stmt *s) {
  vars vs = {NULL, 0, false};
  collect(c, &vs, &s->lhs, true);
  collect_rhs(c, &vs, s->rhs);
  /* A variable of the left side that the right side does not use just iterates: every
   * element along it receives the same value (the paper's a(i) = b(j)). */
  for (int k = 0; k < vs.n; k++) {
    const var *v = &vs.v[k];
    const char *kind = kind_of(c->prog, v->name);
    if (kind)
      error(c, v->loc, "index variable '%s' has the same name as a %s", v->name, kind);
  }
  check_denominators(c, &vs, s->rhs, false);
  if (s->lhs.tensor >= 0 && s->lhs.tensor < c->prog->ntensors)
    check_integer_division(c, &vs, s->rhs, &c->prog->tensors[s->lhs.tensor]);
  free(vs.v);
  if (s->lhs.tensor >= 0 && s->lhs.tensor < c->prog->ntensors)
    check_literals(c, s->rhs, &c->prog->tensors[s->lhs.tensor]);

  for (int k = 0; k < s->ncmds; k++)
    for (int a = 0; a < s->cmds[k].nargs; a++) {
      const fe_arg *arg = &s->cmds[k].args[a];
      for (int d = 0; arg->kind == FE_ARG_GRID && d < arg->grid.ndims; d++)
        check_positive(c, &arg->grid.dims[d], "grid");
    }
}

/* ---- the program: loops, conditions, temporaries (LANGUAGE.md sections 3 and 9) ------- */

/* A temporary's reads must follow a write in program order (the first iteration of a loop
 * runs its body in source order, so the order of the text is the order of execution).
 * written[t] is set by each statement that writes t. */
static void check_temp_reads(checker *c, const fe_expr *e, const bool *written) {
  if (!e)
    return;
  if (e->kind == FE_E_ACCESS && e->acc.tensor >= 0 && e->acc.tensor < c->prog->ntensors) {
    const fe_tensor *t = &c->prog->tensors[e->acc.tensor];
    if (t->is_temp && !written[e->acc.tensor]) {
      error(c, e->loc, "temporary '%s' is read before any statement writes it", t->name);
      fe_note(c->src, t->loc, "'%s' is declared here", t->name);
    }
  }
  check_temp_reads(c, e->a, written);
  check_temp_reads(c, e->b, written);
}

static bool is_condition(const fe_expr *e) { return e->kind >= FE_E_LT && e->kind <= FE_E_NOT; }

/* whether a condition's value computes in int64 (README, "Programs": all its operands integers) */
static bool cond_integer(const checker *c, const fe_expr *e) {
  if (!e) return false;
  switch (e->kind) {
  case FE_E_NUM: return e->is_int;
  case FE_E_PARAM: return e->param >= 0 && !c->prog->params[e->param].is_float;
  case FE_E_ACCESS: {
    int k = fe_find_tensor(c->prog, e->acc.tname);
    return k >= 0 && (c->prog->tensors[k].type == FE_INT32 || c->prog->tensors[k].type == FE_INT64);
  }
  case FE_E_NEG: return cond_integer(c, e->a);
  case FE_E_ADD: case FE_E_SUB: case FE_E_MUL: case FE_E_DIV: return cond_integer(c, e->a) && cond_integer(c, e->b);
  default: return false;
  }
}

/* A loop's condition: comparisons of scalar values combined with && || !.  want_cond: e must
 * be a condition (else a value). */
static void check_cond(checker *c, fe_expr *e, bool want_cond, const bool *written) {
  if (!e)
    return;
  if (want_cond && !is_condition(e)) {
    error(c, e->loc, "expected a condition (a comparison such as 'r < tol'), but this is a value");
    return;
  }
  if (!want_cond && is_condition(e)) {
    error(c, e->loc, "a condition cannot be a value here (compare values, combine conditions with && || !)");
    return;
  }
  switch (e->kind) {
  case FE_E_AND:
  case FE_E_OR:
    check_cond(c, e->a, true, written);
    check_cond(c, e->b, true, written);
    return;
  case FE_E_NOT:
    check_cond(c, e->a, true, written);
    return;
  case FE_E_LT: case FE_E_LE: case FE_E_GT: case FE_E_GE: case FE_E_EQ: case FE_E_NE:
    check_cond(c, e->a, false, written);
    check_cond(c, e->b, false, written);
    return;
  case FE_E_ACCESS: {
    if (resolve_param(c, e))
      return;
    int k = fe_find_tensor(c->prog, e->acc.tname);
    if (k >= 0 && c->prog->tensors[k].order != 0) {
      error(c, e->loc, "the condition reads '%s', which is not a scalar (order %d): conditions compare scalar values",
            e->acc.tname, c->prog->tensors[k].order);
      return;
    }
    if (!check_access(c, &e->acc))
      return;
    check_temp_reads(c, e, written);
    return;
  }
  default:
    check_cond(c, e->a, false, written);
    check_cond(c, e->b, false, written);
    int64_t z;
    if (e->kind == FE_E_DIV && cond_integer(c, e) && literal_int(e->b, &z) && z == 0) /* it would trap */
      error(c, e->b->loc, "division by zero in a loop's condition (its operands are integers: an int64 division)");
  }
}

static void check_items(checker *c, fe_item *list, int n, bool *written) {
  for (int k = 0; k < n; k++) {
    fe_item *it = &list[k];
    if (it->kind == FE_ITEM_STMT) {
      fe_stmt *s = &c->prog->stmts[it->stmt];
      check_temp_reads(c, s->rhs, written);
      if (s->lhs.tensor >= 0 && s->lhs.tensor < c->prog->ntensors) {
        const fe_tensor *t = &c->prog->tensors[s->lhs.tensor];
        if (s->accumulate && t->is_temp && !written[s->lhs.tensor]) {
          error(c, s->lhs.loc, "temporary '%s' is read before any statement writes it ('%s' adds to its values)",
                t->name, s->subtract ? "-=" : "+=");
          fe_note(c->src, t->loc, "'%s' is declared here", t->name);
        }
        written[s->lhs.tensor] = true;
      }
      continue;
    }
    const fe_size *b = &it->bound;
    if (b->is_param && b->param >= 0 && c->prog->params[b->param].is_float)
      error(c, b->loc, "the bound of a loop must be an integer, but '%s' is a floating param",
            c->prog->params[b->param].name);
    else if (!b->is_param && b->value < 0)
      error(c, b->loc, "the bound of a loop cannot be negative");
    if (!b->is_param && b->value == 0) {
      /* a loop that never runs writes nothing: what it writes stays unwritten after it */
      bool *w = malloc(sizeof *w * ((size_t)c->prog->ntensors + 1));
      if (w) memcpy(w, written, sizeof *w * ((size_t)c->prog->ntensors + 1));
      check_items(c, it->items, it->nitems, w ? w : written);
      check_cond(c, it->cond, true, w ? w : written);
      free(w);
      continue;
    }
    check_items(c, it->items, it->nitems, written);
    check_cond(c, it->cond, true, written);
  }
}

int fe_check(fe_program *prog) {
  checker c = {prog, prog->src};
  int before_errors = c.src->nerrors;
  check_redeclarations(&c);
  check_params_and_machines(&c);
  for (int k = 0; k < prog->ntensors; k++)
    check_tensor(&c, &prog->tensors[k]);
  for (int k = 0; k < prog->ntensors; k++) /* after every distribution is resolved */
    check_balance(&c, &prog->tensors[k]);
  for (int k = 0; k < prog->nstmts; k++)
    check_stmt(&c, &prog->stmts[k]);
  bool *written = calloc((size_t)prog->ntensors + 1, sizeof *written);
  if (!written) {
    error(&c, (fe_loc){0, 0}, "out of memory");
  } else {
    check_items(&c, prog->items, prog->nitems, written);
    free(written);
  }
  return c.src->nerrors - before_errors;
}
