/* cin.c -- tensor index notation with reduction placement, and the default concrete index
 * notation of each statement (paper section 5.1): one forall per index variable, in order
 * of first appearance reading the left side first, as TACO does. */
#include "ir/ir.h"

#include <string.h>

static int var_add(ir_stmt *s, const char *name, const sym *extent, bool original, fe_loc loc) {
  ir_var *v = ir_alloc((s->nvars + 1) * sizeof *v);
  if (s->nvars) memcpy(v, s->vars, s->nvars * sizeof *v);
  s->vars = v;
  ir_var *nv = &v[s->nvars];
  nv->name = ir_strdup(name), nv->original = original, nv->extent = extent;
  nv->def = -1, nv->use = -1, nv->loc = loc;
  return s->nvars++;
}

int ir_var_find(const ir_stmt *s, const char *name) {
  for (int i = 0; i < s->nvars; i++)
    if (!strcmp(s->vars[i].name, name)) return i;
  return -1;
}

static void collect_vars(ir_stmt *s, const fe_program *p, const fe_access *a) {
  const fe_tensor *t = &p->tensors[a->tensor];
  for (int k = 0; k < a->nidx && k < t->order; k++)
    if (ir_var_find(s, a->idx[k]) < 0)
      var_add(s, a->idx[k], sym_from_size(&t->dims[k]), true, a->idxloc[k]);
}

static void collect_expr_vars(ir_stmt *s, const fe_program *p, const fe_expr *e) {
  if (!e) return;
  if (e->kind == FE_E_ACCESS) collect_vars(s, p, &e->acc);
  else if (e->kind != FE_E_NUM && e->kind != FE_E_PARAM) collect_expr_vars(s, p, e->a), collect_expr_vars(s, p, e->b);
}

static ir_expr *convert(ir_stmt *s, const fe_expr *e) {
  static const ir_expr_kind kinds[] = {[FE_E_ACCESS] = IR_ACCESS, [FE_E_NUM] = IR_NUM,
                                       [FE_E_ADD] = IR_ADD,       [FE_E_SUB] = IR_SUB,
                                       [FE_E_MUL] = IR_MUL,       [FE_E_DIV] = IR_DIV,
                                       [FE_E_NEG] = IR_NEG,       [FE_E_CALL] = IR_CALL,
                                       [FE_E_PARAM] = IR_PARAM};
  ir_expr *x = ir_alloc(sizeof *x);
  x->kind = kinds[e->kind];
  x->loc = e->loc;
  switch (e->kind) {
  case FE_E_ACCESS:
    x->tensor = e->acc.tensor;
    x->nidx = e->acc.nidx;
    x->vars = ir_alloc((x->nidx + 1) * sizeof(int));
    for (int k = 0; k < x->nidx; k++) x->vars[k] = ir_var_find(s, e->acc.idx[k]);
    break;
  case FE_E_NUM:
    x->num = e->num, x->is_int = e->is_int, x->ival = e->ival;
    x->text = e->text ? ir_strdup(e->text) : NULL;
    break;
  case FE_E_NEG: x->a = convert(s, e->a); break;
  case FE_E_PARAM: x->param = e->param; break;
  case FE_E_CALL:
    x->func = e->func;
    x->a = convert(s, e->a);
    x->b = fe_func_arity(e->func) == 2 ? convert(s, e->b) : NULL;
    break;
  default: x->a = convert(s, e->a), x->b = convert(s, e->b);
  }
  return x;
}

static bool expr_uses(const ir_expr *e, int v) {
  if (!e) return false;
  if (e->kind == IR_ACCESS) {
    for (int k = 0; k < e->nidx; k++)
      if (e->vars[k] == v) return true;
    return false;
  }
  return expr_uses(e->a, v) || expr_uses(e->b, v);
}

static void add_guard(ir_expr *e, int v) {
  int *g = ir_alloc((e->nguards + 1) * sizeof *g);
  if (e->nguards) memcpy(g, e->guards, e->nguards * sizeof *g);
  g[e->nguards++] = v;
  e->guards = g;
}

/* TACO's reduction placement: the sum over a variable encloses the smallest subexpression
 * holding all its uses.  Descending from the root towards that subexpression, every
 * operand of a +/- that is left behind contributes once, at the first iteration of the
 * variable; writing it as a guard keeps the whole statement a sum over iteration points:
 *   A(i) = B(i,j)*c(j) + d(i)   ==   A(i) = sum_j (B(i,j)*c(j) + [j == 0] d(i)).
 * Where that subexpression is itself a sum or difference, each of its terms is summed on
 * its own (the sum distributes over them): a term without the variable counts once however
 * + and - associate it, as in Einstein notation,
 *   A(i) = B(i,j)*c(j) - 1 + c(j)  ==  sum_j (B(i,j)*c(j) - [j == 0] 1 + c(j)),
 * and the descent goes on in each term that holds uses (a product or a call stops it). */
static void place_reduction(ir_expr *e, int v) {
  while (e && (e->kind == IR_ADD || e->kind == IR_SUB || e->kind == IR_MUL ||
               e->kind == IR_DIV || e->kind == IR_NEG)) {
    if (e->kind == IR_NEG) {
      e = e->a;
      continue;
    }
    bool ua = expr_uses(e->a, v), ub = expr_uses(e->b, v);
    if (ua && ub) {
      if (e->kind == IR_ADD || e->kind == IR_SUB) {
        place_reduction(e->a, v);
        place_reduction(e->b, v);
      }
      return;
    }
    ir_expr *into = ua ? e->a : e->b, *other = ua ? e->b : e->a;
    if (e->kind == IR_ADD || e->kind == IR_SUB) add_guard(other, v);
    e = into;
  }
}

fe_type ir_tensor_type(const ir_program *ir, int tensor) {
  return ir->ast->tensors[tensor].type;
}

ir_program *ir_build(fe_program *prog) {
  ir_program *ir = ir_alloc(sizeof *ir);
  ir->ast = prog;
  ir->machine = -1;
  int first = -1;
  for (int t = 0; t < prog->ntensors; t++) {
    const fe_tensor *ft = &prog->tensors[t];
    if (!ft->has_dist) continue;
    if (ir->machine < 0) ir->machine = ft->dist.machine, first = t;
    else if (ft->dist.machine != ir->machine) {
      fe_error(prog->src, ft->dist.loc,
               "tensor '%s' is distributed onto machine '%s' but '%s' uses '%s': a program "
               "runs on one machine",
               ft->name, prog->machines[ft->dist.machine].name, prog->tensors[first].name,
               prog->machines[ir->machine].name);
      return NULL;
    }
  }
  if (ir->machine < 0 && prog->nmachines > 0) ir->machine = 0;
  ir->nstmts = prog->nstmts;
  ir->stmts = ir_alloc((prog->nstmts + 1) * sizeof *ir->stmts);
  for (int i = 0; i < prog->nstmts; i++) {
    const fe_stmt *fs = &prog->stmts[i];
    ir_stmt *s = &ir->stmts[i];
    s->index = i, s->ast = fs, s->machine = ir->machine;
    collect_vars(s, prog, &fs->lhs);
    collect_expr_vars(s, prog, fs->rhs);
    cin_node *asg = ir_alloc(sizeof *asg);
    asg->kind = CIN_ASSIGN;
    asg->lhs_tensor = fs->lhs.tensor;
    asg->nlhs = fs->lhs.nidx;
    asg->lhs_vars = ir_alloc((asg->nlhs + 1) * sizeof(int));
    for (int k = 0; k < asg->nlhs; k++) asg->lhs_vars[k] = ir_var_find(s, fs->lhs.idx[k]);
    asg->accumulate = fs->accumulate;
    asg->rhs = convert(s, fs->rhs);
    if (fs->subtract) { /* -= is += -(rhs) (LANGUAGE.md section 4) */
      ir_expr *neg = ir_alloc(sizeof *neg);
      neg->kind = IR_NEG, neg->a = asg->rhs, neg->loc = fs->loc;
      asg->rhs = neg;
    }
    for (int v = 0; v < s->nvars; v++) {
      bool on_lhs = false;
      for (int k = 0; k < asg->nlhs; k++) on_lhs |= asg->lhs_vars[k] == v;
      s->vars[v].reduction = !on_lhs;
      if (!on_lhs) {
        asg->reduces = true;
        place_reduction(asg->rhs, v);
      }
    }
    cin_node *body = asg;
    for (int v = s->nvars - 1; v >= 0; v--) {
      cin_node *f = ir_alloc(sizeof *f);
      f->kind = CIN_FORALL, f->var = v, f->body = body;
      body = f;
    }
    s->root = body;
  }
  return ir;
}

int cin_loops(const cin_node *root, const cin_node **out, int max) {
  int n = 0;
  for (const cin_node *c = root; c && c->kind == CIN_FORALL; c = c->body, n++)
    if (n < max) out[n] = c;
  return n; /* all of them, also beyond max */
}

const cin_node *cin_assign(const cin_node *root) {
  const cin_node *c = root;
  while (c && c->kind == CIN_FORALL) c = c->body;
  while (c && c->kind == CIN_WHERE) {
    c = c->consumer;
    while (c && c->kind == CIN_FORALL) c = c->body;
  }
  return c;
}

const char *ir_kernel_name(ir_kernel k) {
  const kc_info *in = kc_get(k);
  return in ? in->name : "none";
}

_Static_assert(KC_MAX_POS >= FE_MAX_DIMS, "an access of any tensor fits a kc_access");

static void kernel_access(int nidx, const int *vars, const int *orig, int n, kc_access *a) {
  *a = (kc_access){.nidx = nidx};
  for (int p = 0; p < nidx; p++) {
    a->dim[p] = -1;
    for (int q = 0; q < n; q++)
      if (vars[p] == orig[q]) a->dim[p] = q;
  }
}

/* Does e read an access that walks one of the substituted loops? */
static bool walks(const ir_expr *e, const int *orig, int n) {
  if (!e) return false;
  if (e->kind == IR_ACCESS)
    for (int p = 0; p < e->nidx; p++)
      for (int q = 0; q < n; q++)
        if (e->vars[p] == orig[q]) return true;
  return walks(e->a, orig, n) || walks(e->b, orig, n);
}

static bool guarded(const ir_expr *e) { return e && (e->nguards || guarded(e->a) || guarded(e->b)); }

/* The parts of a kernel statement's right side: its factors (accesses that walk a
 * substituted loop), the scalars it multiplies by and divides by (expressions that walk
 * none: numbers, params, accesses indexed by outer loops only), and its sign. */
typedef struct {
  const ir_expr *f[KC_MAX_OPERANDS];
  int nf;
  const ir_expr *mul[8], *div[8];
  int nmul, ndiv;
  bool neg, bad;
} kparts;

static void kernel_parts(kparts *p, const ir_expr *e, const int *orig, int n) {
  if (p->bad) return;
  if (e->nguards) {
    p->bad = true;
    return;
  }
  if (!walks(e, orig, n) && !guarded(e)) {
    if (p->nmul == 8) p->bad = true;
    else p->mul[p->nmul++] = e;
    return;
  }
  switch (e->kind) {
  case IR_ACCESS:
    if (p->nf == KC_MAX_OPERANDS - 1) p->bad = true;
    else p->f[p->nf++] = e;
    return;
  case IR_MUL:
    kernel_parts(p, e->a, orig, n);
    kernel_parts(p, e->b, orig, n);
    return;
  case IR_NEG:
    p->neg = !p->neg;
    kernel_parts(p, e->a, orig, n);
    return;
  case IR_DIV:
    if (walks(e->b, orig, n) || guarded(e->b) || p->ndiv == 8) {
      p->bad = true;
      return;
    }
    p->div[p->ndiv++] = e->b;
    kernel_parts(p, e->a, orig, n);
    return;
  default: p->bad = true; return;
  }
}

static ir_expr *kexpr(ir_expr_kind kind, ir_expr *a, const ir_expr *b, fe_loc loc) {
  ir_expr *x = ir_alloc(sizeof *x);
  x->kind = kind, x->a = a, x->b = (ir_expr *)b, x->loc = loc;
  return x;
}

static ir_expr *kone(fe_loc loc) {
  ir_expr *x = kexpr(IR_NUM, NULL, NULL, loc);
  x->is_int = true, x->ival = 1, x->num = 1, x->text = "1";
  return x;
}

int ir_kernel_operands(const cin_node *asg, ir_kernel k, const int *orig, int n, const ir_expr **factor,
                       kc_access *op, const ir_expr **coef, bool *divides) {
  kparts p = {0};
  kernel_parts(&p, asg->rhs, orig, n);
  *coef = NULL;
  if (divides) *divides = p.ndiv > 0;
  const kc_info *in = kc_get(k);
  if (p.bad || !p.nf || !in) return 0;
  /* the coefficient: the scalars' product, divided by the divisors, negated for an odd sign */
  fe_loc loc = asg->rhs->loc;
  ir_expr *c = NULL;
  for (int q = 0; q < p.nmul; q++) c = c ? kexpr(IR_MUL, c, p.mul[q], loc) : (ir_expr *)p.mul[q];
  if (!c && (p.ndiv || p.neg)) c = kone(loc);
  for (int q = 0; q < p.ndiv; q++) c = kexpr(IR_DIV, c, p.div[q], loc);
  if (p.neg) c = kexpr(IR_NEG, c, NULL, loc);
  bool scalar_operand = false; /* the form multiplies by a scalar of its own (axpy's a) */
  for (int q = 0; q < in->noperands; q++) scalar_operand |= in->op[q].role == KC_SCALAR;
  if (scalar_operand) {
    if (!c) c = kone(loc);
    if (p.nf == KC_MAX_OPERANDS - 1) return 0;
    p.f[p.nf++] = c;
    c = NULL;
  }
  factor[0] = NULL;
  kernel_access(asg->nlhs, asg->lhs_vars, orig, n, &op[0]);
  for (int q = 1; q <= p.nf; q++) {
    const ir_expr *e = factor[q] = p.f[q - 1];
    if (e->kind != IR_ACCESS || !walks(e, orig, n)) op[q] = (kc_access){.number = true};
    else kernel_access(e->nidx, e->vars, orig, n, &op[q]);
  }
  *coef = c;
  return 1 + p.nf;
}

/* ---- deep copies ------------------------------------------------------------------------ */
static int *copy_ints(const int *a, int n) {
  if (!a) return NULL;
  int *r = ir_alloc((n + 1) * sizeof *r);
  if (n) memcpy(r, a, n * sizeof *r);
  return r;
}

static const char *copy_str(const char *s) { return s ? ir_strdup(s) : NULL; }

static ir_expr *clone_expr(const ir_expr *e) {
  if (!e) return NULL;
  ir_expr *x = ir_alloc(sizeof *x);
  *x = *e;
  x->vars = copy_ints(e->vars, e->nidx);
  x->guards = copy_ints(e->guards, e->nguards);
  x->text = copy_str(e->text);
  x->a = clone_expr(e->a);
  x->b = clone_expr(e->b);
  return x;
}

static cin_node *clone_node(const cin_node *n) {
  if (!n) return NULL;
  cin_node *c = ir_alloc(sizeof *c);
  *c = *n;
  c->body = clone_node(n->body);
  c->comm = copy_ints(n->comm, n->ncomm);
  c->lhs_vars = copy_ints(n->lhs_vars, n->nlhs);
  c->rhs = clone_expr(n->rhs);
  c->producer = clone_node(n->producer);
  c->consumer = clone_node(n->consumer);
  return c;
}

static void clone_stmt(ir_stmt *c, const ir_stmt *s) {
  *c = *s;
  c->vars = ir_alloc((s->nvars + 1) * sizeof *c->vars);
  for (int v = 0; v < s->nvars; v++) {
    c->vars[v] = s->vars[v];
    c->vars[v].name = copy_str(s->vars[v].name);
  }
  c->rels = ir_alloc((s->nrels + 1) * sizeof *c->rels);
  for (int r = 0; r < s->nrels; r++) {
    c->rels[r] = s->rels[r];
    c->rels[r].rot = copy_ints(s->rels[r].rot, s->rels[r].nrot);
    c->rels[r].text = copy_str(s->rels[r].text);
  }
  c->root = clone_node(s->root);
  const char **st = ir_alloc((s->nst + 1) * sizeof *st);
  for (int k = 0; k < s->nst; k++) st[k] = copy_str(s->st[k]);
  c->st = st;
  c->work = ir_alloc((s->nwork + 1) * sizeof *c->work);
  for (int w = 0; w < s->nwork; w++) {
    c->work[w] = s->work[w];
    c->work[w].name = copy_str(s->work[w].name);
    c->work[w].vars = copy_ints(s->work[w].vars, s->work[w].nidx);
  }
}

ir_stmt *ir_stmt_clone(const ir_stmt *s) {
  ir_stmt *c = ir_alloc(sizeof *c);
  clone_stmt(c, s);
  return c;
}

ir_program *ir_program_clone(const ir_program *ir) {
  ir_program *c = ir_alloc(sizeof *c);
  *c = *ir;
  c->stmts = ir_alloc((ir->nstmts + 1) * sizeof *c->stmts);
  for (int i = 0; i < ir->nstmts; i++) clone_stmt(&c->stmts[i], &ir->stmts[i]);
  return c;
}

/* ---- printing ------------------------------------------------------------------------------ */
static const char *tensor_name(const ir_program *ir, const ir_stmt *s, int t) {
  if (t < ir->ast->ntensors) return ir->ast->tensors[t].name;
  return s->work[t - ir->ast->ntensors].name;
}

static int prec_of(ir_expr_kind k) {
  return k == IR_ADD || k == IR_SUB ? 1 : k == IR_MUL || k == IR_DIV ? 2 : k == IR_NEG ? 3 : 4;
}

static void print_e(FILE *f, const ir_program *ir, const ir_stmt *s, const ir_expr *e, int prec) {
  int my = prec_of(e->kind);
  bool paren = my < prec || e->nguards;
  if (e->nguards) {
    fputs("[", f);
    for (int g = 0; g < e->nguards; g++)
      fprintf(f, "%s%s == 0", g ? " && " : "", s->vars[e->guards[g]].name);
    fputs("] ", f);
  }
  if (paren) fputc('(', f);
  switch (e->kind) {
  case IR_ACCESS: {
    fputs(tensor_name(ir, s, e->tensor), f);
    if (e->nidx) {
      fputc('(', f);
      for (int k = 0; k < e->nidx; k++) fprintf(f, "%s%s", k ? "," : "", s->vars[e->vars[k]].name);
      fputc(')', f);
    }
    break;
  }
  case IR_NUM:
    if (e->text) fputs(e->text, f);
    else if (e->is_int) fprintf(f, "%lld", (long long)e->ival);
    else fprintf(f, "%.17g", e->num);
    break;
  case IR_NEG:
    fputc('-', f);
    print_e(f, ir, s, e->a, 3);
    break;
  case IR_PARAM:
    fputs(ir->ast->params[e->param].name, f);
    break;
  case IR_CALL:
    fprintf(f, "%s(", fe_func_name(e->func));
    print_e(f, ir, s, e->a, 0);
    if (e->b) {
      fputs(", ", f);
      print_e(f, ir, s, e->b, 0);
    }
    fputc(')', f);
    break;
  default: {
    const char *op = e->kind == IR_ADD ? " + " : e->kind == IR_SUB ? " - "
                     : e->kind == IR_MUL ? " * " : " / ";
    print_e(f, ir, s, e->a, my);
    fputs(op, f);
    print_e(f, ir, s, e->b, my + (e->kind == IR_SUB || e->kind == IR_DIV));
  }
  }
  if (paren) fputc(')', f);
}

void ir_print_expr(FILE *f, const ir_program *ir, const ir_stmt *s, const ir_expr *e) {
  print_e(f, ir, s, e, 0);
}

static void print_node(FILE *f, const ir_program *ir, const ir_stmt *s, const cin_node *n,
                       int depth) {
  for (; n; ) {
    fprintf(f, "%*s", 2 * depth, "");
    if (n->kind == CIN_FORALL) {
      fprintf(f, "forall %s", s->vars[n->var].name);
      if (n->distributed) fprintf(f, " [distributed onto %s dim %d]",
                                  n->dist_level ? "inner level" : "machine", n->dist_dim);
      if (n->ncomm) {
        fputs(" [communicate ", f);
        for (int k = 0; k < n->ncomm; k++)
          fprintf(f, "%s%s", k ? ", " : "", tensor_name(ir, s, n->comm[k]));
        fputc(']', f);
      }
      if (n->par) {
        static const char *units[] = {"", "cpu_thread", "cpu_vector", "gpu_block", "gpu_warp",
                                      "gpu_thread"};
        fprintf(f, " [parallelize %s]", units[n->par]);
      }
      if (n->kernel) fprintf(f, " [substitute %s]", ir_kernel_name(n->kernel));
      fputc('\n', f);
      n = n->body, depth++;
    } else if (n->kind == CIN_WHERE) {
      fputs("where\n", f);
      print_node(f, ir, s, n->consumer, depth + 1);
      fprintf(f, "%*swith\n", 2 * depth, "");
      print_node(f, ir, s, n->producer, depth + 1);
      return;
    } else {
      fputs(tensor_name(ir, s, n->lhs_tensor), f);
      if (n->nlhs) {
        fputc('(', f);
        for (int k = 0; k < n->nlhs; k++)
          fprintf(f, "%s%s", k ? "," : "", s->vars[n->lhs_vars[k]].name);
        fputc(')', f);
      }
      fputs(n->accumulate || n->reduces ? " += " : " = ", f);
      ir_print_expr(f, ir, s, n->rhs);
      fputc('\n', f);
      return;
    }
  }
}

void ir_print_cin(FILE *f, const ir_program *ir, const ir_stmt *s) {
  print_node(f, ir, s, s->root, 0);
  if (s->nst) {
    fputs("s.t. ", f);
    for (int r = 0; r < s->nst; r++) fprintf(f, "%s%s", r ? ", " : "", s->st[r]);
    fputc('\n', f);
  }
}
