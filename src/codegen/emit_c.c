/* emit_c.c -- prints the SPMD plan as readable C11 + MPI over libdistal.
 *
 * Per statement, one static function: loops in the order of the concrete index notation,
 * each with a comment naming the schedule command it came from; at each communicate point
 * the operation the lowering chose; below the deepest one, local loops over the buffers
 * (global coordinate minus the buffer's box origin) or a leaf kernel call. */
#include "config.h"
#include "codegen/cg_internal.h"

#include <math.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---- names and types ------------------------------------------------------------------- */
/* How user names are spelled in generated C (README "Choices", naming).  Every name a user
 * writes gets a prefix by its kind, so that no name can meet a C or C++ keyword, a macro or
 * function of the C library, POSIX, MPI, OpenBLAS or CUDA headers, or a name of the runtime or
 * of the generated code itself:
 *   param NAME            p_NAME
 *   index variable NAME   v_NAME
 *   tensor NAME (the k-th declared, from 0)   tK_NAME
 * Params, tensors and index variables share one namespace (sema), and no header that generated
 * code includes declares a name that starts with p_, v_ or t<digit>.  Names that generated code
 * derives from a tensor's (its buffer dtl_tK_NAME, dtl_tK_NAME_lo, the driver's n_tK_NAME, ...)
 * carry the tensor's number first, so they are distinct for distinct tensors whatever the names
 * are (dtl_t0_A_lo is A's, dtl_t1_A_lo the buffer of a tensor named A_lo).  Generated code's own
 * names start with dtl_ (or are locals of functions that see no user name).  The one place a user
 * name is spelled as it is written is the API: the params struct's fields (LANGUAGE.md section 7),
 * shielded from macros by the header (emit_header), and PREFIX_T_block / _import / _export. */
static const char *prefixed(const char *prefix, const char *name) {
  size_t n = strlen(prefix) + strlen(name) + 1;
  char *r = ir_alloc(n);
  snprintf(r, n, "%s%s", prefix, name);
  return r;
}
const char *cg_param(const fe_program *p, int i) { return prefixed("p_", p->params[i].name); }
const char *cg_var(const char *name) { return prefixed("v_", name); }
void cg_size(FILE *f, const fe_program *p, const fe_size *z) {
  if (z->is_param) fputs(cg_param(p, z->param), f);
  else fprintf(f, "%" PRId64, z->value); /* a decimal literal takes a type wide enough */
}
const char *cg_tensor(const fe_program *p, int t) {
  char pre[32];
  snprintf(pre, sizeof pre, "t%d_", t);
  return prefixed(pre, p->tensors[t].name);
}

const char *cg_ctype(fe_type t) {
  static const char *n[] = {"double", "float", "int32_t", "int64_t"};
  return n[t];
}
const char *cg_dtltype(fe_type t) {
  static const char *n[] = {"DTL_DOUBLE", "DTL_FLOAT", "DTL_INT32", "DTL_INT64"};
  return n[t];
}

bool cg_written(const fe_program *p, int t) {
  for (int i = 0; i < p->nstmts; i++)
    if (p->stmts[i].lhs.tensor == t) return true;
  return false;
}

static const char *dtl_type_name_fe(fe_type t) {
  static const char *n[] = {"double", "float", "int32", "int64"};
  return n[t];
}

bool cg_any_sparse(const fe_program *p) {
  for (int t = 0; t < p->ntensors; t++)
    if (lw_sparse(p, t)) return true;
  return false;
}

/* ", const double *A" or, for a sparse tensor, ", const dtl_sparse *A" */
void cg_tensor_param(FILE *f, const fe_program *p, int t) {
  if (lw_sparse(p, t)) fprintf(f, ", %sdtl_sparse *%s", cg_written(p, t) ? "" : "const ", cg_tensor(p, t));
  else
    fprintf(f, ", %s%s *%s", cg_written(p, t) ? "" : "const ", cg_ctype(p->tensors[t].type), cg_tensor(p, t));
}

/* ---- expressions ----------------------------------------------------------------------- */
static int prec_of(ir_expr_kind k) {
  return k == IR_ADD || k == IR_SUB ? 1 : k == IR_MUL || k == IR_DIV ? 2 : 3;
}

/* A literal in a statement of type t, exactly (README, "Choices"; sema checked the ranges):
 * integer types print the exact value (a floating literal truncated toward zero), double
 * the nearest double in 17 digits, float the literal rounded once to float (as C reads
 * 0.1f) in 9 digits; both read back exactly and are always floating constants (1/4 must
 * not be an integer division).  A negative value (only INT64_MIN, from the folded literal
 * -9223372036854775808) is parenthesized. */
static void print_num(FILE *f, const ir_expr *e, fe_type t) {
  if (t == FE_INT32 || t == FE_INT64) {
    int64_t v = e->is_int ? e->ival : (int64_t)trunc(e->num);
    if (t == FE_INT32) fprintf(f, "(int32_t)%lld", (long long)v);
    else if (v == INT64_MIN) fputs("INT64_MIN", f);
    else fprintf(f, "INT64_C(%lld)", (long long)v);
    return;
  }
  char b[64];
  bool neg;
  if (t == FE_FLOAT) {
    float v = e->text ? fe_float_literal(e->text, e->num) : e->is_int ? (float)e->ival : (float)e->num;
    snprintf(b, sizeof b, "%.9g", (double)v);
    neg = v < 0;
  } else {
    double v = e->is_int ? (double)e->ival : e->num;
    snprintf(b, sizeof b, "%.17g", v);
    neg = v < 0;
  }
  if (!strpbrk(b, ".eEni")) strcat(b, ".0");
  fprintf(f, "%s%s%s%s", neg ? "(" : "", b, t == FE_FLOAT ? "f" : "", neg ? ")" : "");
}

static void pexpr(FILE *f, const ir_program *ir, const ir_stmt *s, const ir_expr *e, fe_type t,
                  cg_access_fn acc, void *ctx, int prec) {
  if (e->nguards) {
    /* reduction placement: this term counts once, at the first iteration of the sum */
    fputs("((", f);
    for (int g = 0; g < e->nguards; g++)
      fprintf(f, "%s%s == 0", g ? " && " : "", cg_var(s->vars[e->guards[g]].name));
    fputs(") ? ", f);
    ir_expr tmp = *e;
    tmp.nguards = 0;
    pexpr(f, ir, s, &tmp, t, acc, ctx, 3);
    fprintf(f, " : (%s)0)", cg_ctype(t));
    return;
  }
  int my = prec_of(e->kind);
  bool paren = my < prec;
  if (paren) fputc('(', f);
  switch (e->kind) {
  case IR_ACCESS: acc(f, s, e, ctx); break;
  case IR_NUM: print_num(f, e, t); break;
  case IR_NEG:
    fputs("-", f);
    pexpr(f, ir, s, e->a, t, acc, ctx, 3);
    break;
  default: {
    const char *op = e->kind == IR_ADD ? " + " : e->kind == IR_SUB ? " - "
                     : e->kind == IR_MUL ? " * " : " / ";
    pexpr(f, ir, s, e->a, t, acc, ctx, my);
    fputs(op, f);
    pexpr(f, ir, s, e->b, t, acc, ctx, my + 1);
  }
  }
  if (paren) fputc(')', f);
}

void cg_print_expr(FILE *f, const ir_program *ir, const ir_stmt *s, const ir_expr *e, fe_type t,
                   cg_access_fn access, void *ctx) {
  pexpr(f, ir, s, e, t, access, ctx, 0);
}

static int64_t count_ops(const ir_expr *e) {
  if (!e || e->kind == IR_ACCESS || e->kind == IR_NUM) return 0;
  return 1 + count_ops(e->a) + count_ops(e->b);
}

void cg_print_flops(FILE *f, const lw_program *lp) {
  fputs("0.0", f);
  for (int i = 0; i < lp->nstmts; i++) {
    const ir_stmt *s = lp->stmts[i].s;
    const cin_node *asg = cin_assign(s->root);
    int64_t ops = count_ops(lp->stmts[i].rhs) + (asg->reduces || asg->accumulate ? 1 : 0);
    if (!ops) continue;
    fprintf(f, " + %lld.0", (long long)ops);
    for (int v = 0; v < s->nvars; v++)
      if (s->vars[v].original) {
        fputs(" * (double)", f);
        sym_print(f, s->vars[v].extent, NULL, NULL);
      }
  }
}

/* ---- symbolic expressions as C ---------------------------------------------------------- */
typedef struct {
  const lw_program *lp;
  const lw_stmt *ls;
  bool in_callback; /* inside a box function: loop values come from the argument struct */
} nctx;

static void namer(FILE *f, const sym *a, void *vc) {
  nctx *c = vc;
  const fe_program *p = c->lp->ir->ast;
  switch (a->kind) {
  case SYM_PARAM: fputs(cg_param(p, a->id), f); break;
  case SYM_COORD: fprintf(f, "dtl_coords[%d]", a->id); break;
  case SYM_VAR:
    if (c->in_callback) fprintf(f, "dtl_a->v[%d]", a->id);
    else if (a->id < c->ls->s->nvars) fputs(cg_var(c->ls->s->vars[a->id].name), f);
    else fprintf(f, "dtl_l_%s", c->ls->s->vars[c->ls->loops[a->id - c->ls->lidx_var0]->var].name);
    break;
  default: break;
  }
}

static void psym(FILE *f, const sym *e, nctx *c) { sym_print(f, e, namer, c); }

/* params as local constants of a generated function, from the array `from` */
static void declare_params(FILE *f, const fe_program *p, const char *from, int ind) {
  for (int i = 0; i < p->nparams; i++)
    fprintf(f, "%*sconst int64_t %s = %s[%d];\n%*s(void)%s;\n", ind, "", cg_param(p, i), from, i, ind, "",
            cg_param(p, i));
}

/* ---- statement functions ------------------------------------------------------------------ */
typedef struct {
  FILE *f;
  const lw_program *lp;
  const lw_stmt *ls;
  const cg_options *o;
  int ind;
  bool *bound;       /* per variable of the statement (st_alloc sizes these arrays) */
  int slot0;         /* first plan buffer slot of this statement */
  int *comm_slot;    /* per comm: its buffer slot (SHIFT uses two) */
  int ncond, capcond;
  char **cond;       /* activity conditions of the collective region */
  /* CUDA target */
  FILE *cu;           /* PREFIX.cu: kernels */
  FILE *decl;         /* file-scope declarations the statement function needs */
  int kdepth;         /* the substituted kernel's depth, -1: none or not on the device */
  int nkern;          /* kernels of this statement so far */
  bool in_kernel;     /* printing a kernel body */
  bool atomic;        /* ... whose threads may update the same output element */
  bool *mapped;        /* ... whose loops are the threads (per loop) */
  /* sparse operands: the accesses of the right side to sparse tensors */
  int nsp, capsp;
  const ir_expr **sp_e;
  bool *sp_factor;     /* the whole right side is zero where this access is */
  int *sp_known;       /* levels [0, known) have a position variable in scope */
  bool (*sp_valid)[LW_MAX_DIMS]; /* ... and that position is never -1 (a stored entry) */
  bool acc_mode;       /* the innermost loop sums into dtl__acc, added to the output after it */
} st;

/* The statement's arrays, sized by the statement (they live in the IR arena). */
static void st_alloc(st *g) {
  g->bound = ir_alloc((g->ls->s->nvars + 1) * sizeof *g->bound);
  g->comm_slot = ir_alloc((g->ls->ncomm + 1) * sizeof *g->comm_slot);
  g->mapped = ir_alloc((g->ls->nloops + 1) * sizeof *g->mapped);
}

/* One more activity condition of the collective region. */
static void add_cond(st *g, const char *text) {
  if (g->ncond == g->capcond) {
    int cap = 2 * g->capcond + 8;
    char **c = ir_alloc(cap * sizeof *c);
    if (g->ncond) memcpy(c, g->cond, g->ncond * sizeof *c);
    g->cond = c, g->capcond = cap;
  }
  g->cond[g->ncond++] = ir_strdup(text);
}

/* Text printed through a stream that grows as needed: MBUF(b) declares it (freed when it
 * goes out of scope), mopen(&b) starts it anew, and after fclose b holds the text. */
static void mbuf_free(char **b) { free(*b); }
#define MBUF(b) char *b __attribute__((cleanup(mbuf_free))) = NULL
static size_t mbuf_len;
static FILE *mopen(char **b) {
  free(*b);
  *b = NULL;
  return open_memstream(b, &mbuf_len);
}

/* The runtime function for an operation: dtl_NAME on the host, dtl_cu_NAME on the device
 * (same arguments). */
static const char *rt(const st *g, const char *name) {
  static char b[8][64];
  static int i;
  i = (i + 1) % 8;
  snprintf(b[i], sizeof b[i], "dtl_%s%s", g->o->cuda ? "cu_" : "", name);
  return b[i];
}

static void line(st *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(st *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(g->f, "%*s", g->ind, "");
  vfprintf(g->f, fmt, ap);
  fputc('\n', g->f);
  va_end(ap);
}

static const fe_tensor *tensor(const st *g, int t) { return &g->lp->ir->ast->tensors[t]; }
static const char *tname(const st *g, int t) { return cg_tensor(g->lp->ir->ast, t); }
static const char *vname(const st *g, int v) { return cg_var(g->ls->s->vars[v].name); }

static int sp_index(const st *g, const ir_expr *e) {
  /* a guarded access is printed from a copy without its guards: same index array */
  for (int a = 0; a < g->nsp; a++)
    if (g->sp_e[a] == e || (g->sp_e[a]->tensor == e->tensor && g->sp_e[a]->vars == e->vars)) return a;
  return -1;
}

static void access_local(FILE *f, const ir_stmt *s, const ir_expr *e, void *vc) {
  st *g = vc;
  if (e->tensor >= g->lp->ir->ast->ntensors) { /* a precompute workspace */
    fprintf(f, "dtl_w_%s[%s]", s->work[e->tensor - g->lp->ir->ast->ntensors].name, cg_var(s->vars[e->vars[0]].name));
    return;
  }
  const char *n = tname(g, e->tensor);
  int a = sp_index(g, e);
  if (a >= 0) { /* a sparse entry: its position at the last level, -1 where none is stored */
    if (g->sp_valid[a][e->nidx - 1])
      fprintf(f, "dtl_%s_vals[dtl_sp%d_p%d]", n, a, e->nidx - 1);
    else
      fprintf(f, "(dtl_sp%d_p%d < 0 ? (%s)0 : dtl_%s_vals[dtl_sp%d_p%d])", a, e->nidx - 1,
              cg_ctype(tensor(g, e->tensor)->type), n, a, e->nidx - 1);
    return;
  }
  /* the output, if also read, is read from the snapshot taken at statement start */
  const cin_node *asg = cin_assign(s->root);
  bool snap = e->tensor == asg->lhs_tensor;
  fprintf(f, "dtl_%s%s[", snap ? "in_" : "", n);
  if (!e->nidx) fputc('0', f);
  for (int x = 0; x < e->nidx; x++) {
    if (x) fputs(" + ", f);
    fprintf(f, "(%s - dtl_%s%s_lo[%d])", cg_var(s->vars[e->vars[x]].name), snap ? "in_" : "", n, x);
    if (x + 1 < e->nidx) fprintf(f, " * dtl_%s%s_st[%d]", snap ? "in_" : "", n, x);
  }
  fputc(']', f);
}

/* Compute every replaced variable whose replacing variables are all bound now.  Guards
 * (a parent out of its range) become `continue` in local loops and activity conditions in
 * the collective region.  `tight` names a parent whose range the loop bound already
 * enforces. */
static void bind_parents(st *g, bool collective, int tight) {
  const ir_stmt *s = g->ls->s;
  for (bool changed = true; changed;) {
    changed = false;
    for (int r = 0; r < s->nrels; r++) {
      const ir_rel *R = &s->rels[r];
      int nin = R->kind == REL_FUSE ? 2 : 1;
      if (g->bound[R->in[0]] || R->kind == REL_PRECOMPUTE) continue;
      bool ready = g->bound[R->out[0]] && (R->out[1] < 0 || g->bound[R->out[1]]);
      for (int q = 0; q < R->nrot; q++) ready &= g->bound[R->rot[q]];
      if (!ready) continue;
      nctx nc = {g->lp, g->ls, false};
      const char *p0 = vname(g, R->in[0]);
      MBUF(buf);
      FILE *m = mopen(&buf);
      switch (R->kind) {
      case REL_DIVIDE:
      case REL_SPLIT: {
        const sym *stp = R->kind == REL_SPLIT ? R->factor : sym_ceildiv(s->vars[R->in[0]].extent, R->factor);
        fprintf(m, "const int64_t %s = %s * (", p0, vname(g, R->out[0]));
        psym(m, stp, &nc);
        fprintf(m, ") + %s; /* %s */", vname(g, R->out[1]), R->text);
        break;
      }
      case REL_FUSE:
        fprintf(m, "const int64_t %s = %s / (", p0, vname(g, R->out[0]));
        psym(m, s->vars[R->in[1]].extent, &nc);
        fprintf(m, "), %s = %s %% (", vname(g, R->in[1]), vname(g, R->out[0]));
        psym(m, s->vars[R->in[1]].extent, &nc);
        fputs("); /* fuse */", m);
        break;
      case REL_ROTATE:
        fprintf(m, "const int64_t %s = dtl_mod(%s", p0, vname(g, R->out[0]));
        for (int q = 0; q < R->nrot; q++) fprintf(m, " + %s", vname(g, R->rot[q]));
        fputs(", ", m);
        psym(m, s->vars[R->in[0]].extent, &nc);
        fputs("); /* rotate */", m);
        break;
      default: break;
      }
      fclose(m);
      line(g, "%s", buf);
      line(g, "(void)%s;", p0);
      if (R->kind == REL_FUSE) line(g, "(void)%s;", vname(g, R->in[1]));
      if (R->kind == REL_DIVIDE || R->kind == REL_SPLIT) {
        if (R->in[0] != tight) {
          MBUF(cb);
          FILE *cm = mopen(&cb);
          fprintf(cm, "%s < ", p0);
          psym(cm, s->vars[R->in[0]].extent, &nc);
          fclose(cm);
          if (collective) {
            add_cond(g, cb);
          } else {
            line(g, "if (!(%s)) continue;", cb);
          }
        }
      }
      g->bound[R->in[0]] = true;
      if (nin == 2) g->bound[R->in[1]] = true;
      changed = true;
    }
  }
}

/* ---- sparse operands ------------------------------------------------------------------------- */
/* Positions of sparse accesses: dtl_spA_pX is the position of access A at level X, -1 when
 * the coordinates bound so far hold no stored entry.  Each level's position is computed as
 * soon as its index variable is bound (a dense level by arithmetic, a compressed one by a
 * binary search in its parent's segment), unless a loop iterates over the level's stored
 * coordinates, which gives the position directly. */
static void sp_parent(char *b, size_t n, int a, int x) {
  if (x == 0) snprintf(b, n, "0");
  else snprintf(b, n, "dtl_sp%d_p%d", a, x - 1);
}

static void sp_advance(st *g) {
  const ir_stmt *s = g->ls->s;
  for (int a = 0; a < g->nsp; a++) {
    const ir_expr *e = g->sp_e[a];
    const fe_tensor *ft = tensor(g, e->tensor);
    const char *n = tname(g, e->tensor);
    while (g->sp_known[a] < e->nidx && g->bound[e->vars[g->sp_known[a]]]) {
      int x = g->sp_known[a];
      const char *v = cg_var(s->vars[e->vars[x]].name);
      char par[64];
      sp_parent(par, sizeof par, a, x);
      if (ft->formats[x] == FE_COMPRESSED && x == 0)
        line(g, "const int64_t dtl_sp%d_p0 = dtl_sp_find(dtl_%s_crd[0], dtl_%s_pos[0][0], dtl_%s_pos[0][1], %s - dtl_%s_lo[0]);", a, n,
             n, n, v, n);
      else if (ft->formats[x] == FE_COMPRESSED)
        line(g, "const int64_t dtl_sp%d_p%d = %s < 0 ? -1 : dtl_sp_find(dtl_%s_crd[%d], dtl_%s_pos[%d][%s], dtl_%s_pos[%d][%s + 1], %s - dtl_%s_lo[%d]);",
             a, x, par, n, x, n, x, par, n, x, par, v, n, x);
      else if (x == 0)
        line(g, "const int64_t dtl_sp%d_p0 = %s - dtl_%s_lo[0];", a, v, n);
      else
        line(g, "const int64_t dtl_sp%d_p%d = %s < 0 ? -1 : %s * dtl_%s_ext[%d] + (%s - dtl_%s_lo[%d]);", a, x, par, par, n, x, v,
             n, x);
      line(g, "(void)dtl_sp%d_p%d;", a, x);
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
 * iteration would add zero), the level is compressed with its parent levels positioned,
 * and the loop's variable is the level's index variable or the inner half of a divide or
 * split of it whose outer half is bound (then index = base + loop variable).  Sets *acc,
 * *level and base (a C expression). */
static bool sp_driver(st *g, int k, int *acc, int *level, char **base) {
  const lw_stmt *ls = g->ls;
  const ir_stmt *s = ls->s;
  const cin_node *n = ls->loops[k];
  if (g->o->cuda || g->in_kernel || n->par != PAR_NONE || n->distributed || k < ls->outer) return false;
  for (int a = 0; a < g->nsp; a++) {
    const ir_expr *e = g->sp_e[a];
    int x = g->sp_known[a];
    if (!g->sp_factor[a] || x >= e->nidx || tensor(g, e->tensor)->formats[x] != FE_COMPRESSED) continue;
    int j = e->vars[x];
    if (g->bound[j] || guarded_by(cin_assign(s->root)->rhs, j)) continue;
    if (j == n->var) {
      free(*base);
      *base = strdup("0");
    } else {
      const ir_var *iv = &s->vars[n->var];
      if (iv->def < 0) continue;
      const ir_rel *R = &s->rels[iv->def];
      if (!((R->kind == REL_DIVIDE || R->kind == REL_SPLIT) && R->out[1] == n->var && R->in[0] == j &&
            g->bound[R->out[0]]))
        continue;
      const sym *stp = R->kind == REL_SPLIT ? R->factor : sym_ceildiv(s->vars[R->in[0]].extent, R->factor);
      nctx nc = {g->lp, ls, false};
      FILE *m = mopen(base);
      fputc('(', m);
      psym(m, sym_mul(sym_var(R->out[0]), stp), &nc);
      fputc(')', m);
      fclose(m);
    }
    *acc = a, *level = x;
    return true;
  }
  return false;
}

/* The pointers of a sparse piece the loops read (the rank's own, or a fetched box). */
static void sp_bind(st *g, int t, const char *src) {
  const char *n = tname(g, t);
  line(g, "dtl_%s = %s;", n, src);
  line(g, "for (int dtl_x = 0; dtl_x < %d; dtl_x++) {", tensor(g, t)->order);
  line(g, "  dtl_%s_lo[dtl_x] = dtl_%s->box.lo[dtl_x];", n, n);
  line(g, "  dtl_%s_ext[dtl_x] = dtl_%s->box.hi[dtl_x] > dtl_%s->box.lo[dtl_x] ? dtl_%s->box.hi[dtl_x] - dtl_%s->box.lo[dtl_x] : 0;", n, n,
       n, n, n);
  line(g, "  dtl_%s_pos[dtl_x] = dtl_%s->pos[dtl_x], dtl_%s_crd[dtl_x] = dtl_%s->crd[dtl_x];", n, n, n, n);
  line(g, "}");
  line(g, "dtl_%s_vals = (const %s *)dtl_%s->vals;", n, cg_ctype(tensor(g, t)->type), n);
}

static void set_layout(st *g, const char *n, const char *box) {
  line(g, "dtl_layout_(&%s, dtl_%s_lo, dtl_%s_st);", box, n, n);
}

/* Assign the box syms of a comm to a dtl_box named box. */
static void emit_box(st *g, const lw_comm *c, const char *box, bool callback) {
  nctx nc = {g->lp, g->ls, callback};
  MBUF(b);
  FILE *m = mopen(&b);
  fprintf(m, "%s%snd = %d;", box, callback ? "->" : ".", c->order);
  fclose(m);
  line(g, "%s", b);
  for (int x = 0; x < c->order; x++) {
    m = mopen(&b);
    fprintf(m, "%s%slo[%d] = ", box, callback ? "->" : ".", x);
    psym(m, c->lo[x], &nc);
    fprintf(m, ", %s%shi[%d] = ", box, callback ? "->" : ".", x);
    psym(m, c->hi[x], &nc);
    fputc(';', m);
    fclose(m);
    line(g, "%s", b);
  }
}

static void args_fill(st *g, int depth) {
  for (int k = 0; k <= depth; k++) {
    const cin_node *n = g->ls->loops[k];
    if (n->distributed) {
      int64_t one;
      if (!(sym_is_const(g->ls->bs[k], &one) && one == 1))
        line(g, "dtl_args.v[%d] = dtl_l_%s;", g->ls->lidx_var0 + k, g->ls->s->vars[n->var].name);
    } else {
      line(g, "dtl_args.v[%d] = %s;", n->var, vname(g, n->var));
    }
  }
}

static const char *fnprefix(const st *g) { return g->o->prefix; }

static void reserve(st *g, const char *n, int slot, const char *vol, fe_type t) {
  line(g, "dtl_%s = dtl_reserve_(dtl_plan, %d, (size_t)%s * sizeof(%s));", n, slot, vol, cg_ctype(t));
  line(g, "if (!dtl_%s) return dtl_fail(dtl_ctx, \"out of memory for %s\");", n, n);
}

static void emit_view(st *g, const lw_comm *c);

/* Communication for the next iteration of a sequential communicate loop goes out while the
 * current one computes: broadcasts and shifts, double-buffered. */
static bool overlapped(const lw_stmt *ls, const lw_comm *c) {
  return !c->output && !c->alt && c->depth >= 0 && !ls->loops[c->depth]->distributed &&
         (c->pattern == PAT_BCAST || c->pattern == PAT_SHIFT);
}

/* The comm's box one iteration of its loop later. */
static lw_comm next_box(const lw_stmt *ls, const lw_comm *c) {
  lw_comm n = *c;
  int v = ls->loops[c->depth]->var;
  const sym *next = sym_add(sym_var(v), sym_const(1));
  for (int x = 0; x < c->order; x++)
    n.lo[x] = sym_subst(&ls->facts, c->lo[x], SYM_VAR, v, next), n.hi[x] = sym_subst(&ls->facts, c->hi[x], SYM_VAR, v, next);
  return n;
}

/* Post the broadcast of a comm's box (computed into nbox) into the free buffer slot. */
static void post_bcast(st *g, const lw_comm *c, const char *nbox, const char *nm, int slot,
                       const char *ct, const char *localptr) {
  int t = c->tensor;
  emit_box(g, c, nbox, false);
  line(g, "dtl_%s_nvol = dtl_box_volume(&%s);", nm, nbox);
  line(g, "dtl_%s_nbuf = dtl_reserve_(dtl_plan, %d + dtl_%s_cur, (size_t)dtl_%s_nvol * sizeof(%s));", nm, slot, nm, nm, ct);
  line(g, "if (!dtl_%s_nbuf) return dtl_fail(dtl_ctx, \"out of memory\");", nm);
  line(g, "if (%s(dtl_ctx, 0x%xu, &dtl_plan->dist[%d], %s, %s, &dtl_plan->own[%d], &%s, dtl_%s_nbuf, &dtl_%s_req)) return 1;",
       rt(g, "bcast_fetch_begin"), c->mask, t, cg_dtltype(tensor(g, t)->type), localptr, t, nbox, nm, nm);
}

/* Communication at the top of an iteration of the loop at c->depth. */
static void emit_comm_in1(st *g, int q, const lw_comm *c, bool alt) {
  int t = c->tensor;
  const char *n = tname(g, t);
  fe_type ty = tensor(g, t)->type;
  const char *ct = cg_ctype(ty);
  int slot = g->comm_slot[q];
  bool snap = !c->output && t == cin_assign(g->ls->s->root)->lhs_tensor;
  char nm[256];
  snprintf(nm, sizeof nm, "%s%s", snap ? "in_" : "", n);
  const char *localptr = snap ? "dtl_snap" : n;
  if (c->pattern == PAT_LOCAL) { /* set once at statement start, unless an alternative */
    if (alt) emit_view(g, c);
    return;
  }
  line(g, "/* %s %s: %s%s */", c->output ? "produce" : "fetch", tensor(g, t)->name,
       lw_pattern_name(c->pattern), c->output ? ", written back after this iteration" : "");
  if (lw_sparse(g->lp->ir->ast, t) && c->output) { /* entries, sent to the holders after the iteration */
    line(g, "dtl_%s_coo->n = 0;", n);
    return;
  }
  if (lw_sparse(g->lp->ir->ast, t)) { /* the stored entries of the box, from the holders */
    args_fill(g, c->depth);
    line(g, "dtl_sparse_free(&dtl_plan->sp[%d]);", slot);
    line(g, "if (dtl_sparse_fetch(dtl_ctx, &dtl_plan->dist[%d], %s, %s_s%d_box%d, &dtl_args, &dtl_plan->sp[%d])) return 1;", t, n,
         fnprefix(g), g->ls->s->index, q, slot);
    char src[64];
    snprintf(src, sizeof src, "&dtl_plan->sp[%d]", slot);
    sp_bind(g, t, src);
    return;
  }
  char box[300];
  snprintf(box, sizeof box, "dtl_%s_box", nm);
  if (overlapped(g->ls, c)) {
    const char *rv = vname(g, g->ls->loops[c->depth]->var);
    nctx nc = {g->lp, g->ls, false};
    char nbox[300];
    MBUF(ext);
    FILE *m = mopen(&ext);
    psym(m, g->ls->s->vars[g->ls->loops[c->depth]->var].extent, &nc);
    fclose(m);
    snprintf(nbox, sizeof nbox, "dtl_%s_nbox", nm);
    lw_comm nx = next_box(g->ls, c);
    if (c->pattern == PAT_BCAST) {
      line(g, "/* (the next step's broadcast is posted before this step computes) */");
      line(g, "if (%s == 0) {", rv);
      g->ind += 2;
      post_bcast(g, c, nbox, nm, slot, ct, localptr);
      g->ind -= 2;
      line(g, "}");
      line(g, "if (%s(dtl_ctx, &dtl_%s_req)) return 1;", rt(g, "wait"), nm);
      line(g, "dtl_%s = dtl_%s_nbuf, dtl_%s_box = %s, dtl_%s_vol = dtl_%s_nvol;", nm, nm, nm, nbox, nm, nm);
      line(g, "dtl_%s_cur ^= 1;", nm);
      set_layout(g, nm, box);
      line(g, "if (%s + 1 < %s) {", rv, ext);
      g->ind += 2;
      post_bcast(g, &nx, nbox, nm, slot, ct, localptr);
      g->ind -= 2;
      line(g, "}");
      return;
    }
    /* shift: align at the first step, then each step's data arrives during the previous */
    line(g, "if (%s == 0) { /* first step: align by exchange */", rv);
    g->ind += 2;
    emit_box(g, c, box, false);
    line(g, "dtl_%s_vol = dtl_box_volume(&%s);", nm, box);
    line(g, "dtl_%s_cur = 0;", nm);
    line(g, "dtl_%s = dtl_reserve_(dtl_plan, %d, (size_t)dtl_%s_vol * sizeof(%s));", nm, slot, nm, ct);
    line(g, "if (!dtl_%s) return dtl_fail(dtl_ctx, \"out of memory\");", nm);
    args_fill(g, c->depth);
    line(g, "if (%s(dtl_ctx, &dtl_plan->dist[%d], %s, %s, &dtl_plan->own[%d], %s_s%d_box%d, &dtl_args, dtl_%s)) return 1;",
         rt(g, "fetch"), t, cg_dtltype(ty), localptr, t, fnprefix(g), g->ls->s->index, q, nm);
    g->ind -= 2;
    line(g, "} else { /* rotate: the neighbour's box along grid dim %d, received during the last step */", c->shift_dim);
    g->ind += 2;
    line(g, "if (%s(dtl_ctx, &dtl_%s_req)) return 1;", rt(g, "wait"), nm);
    line(g, "dtl_%s = dtl_%s_nbuf, dtl_%s_box = %s, dtl_%s_vol = dtl_%s_nvol;", nm, nm, nm, nbox, nm, nm);
    line(g, "dtl_%s_cur ^= 1;", nm);
    g->ind -= 2;
    line(g, "}");
    set_layout(g, nm, box);
    line(g, "if (%s + 1 < %s) {", rv, ext);
    g->ind += 2;
    emit_box(g, &nx, nbox, false);
    line(g, "dtl_%s_nvol = dtl_box_volume(&%s);", nm, nbox);
    line(g, "dtl_%s_nbuf = dtl_reserve_(dtl_plan, %d + (dtl_%s_cur ^ 1), (size_t)dtl_%s_nvol * sizeof(%s));", nm, slot, nm, nm, ct);
    line(g, "if (!dtl_%s_nbuf) return dtl_fail(dtl_ctx, \"out of memory\");", nm);
    line(g, "if (%s(dtl_ctx, %d, %s, dtl_%s, dtl_%s_vol, dtl_%s_nbuf, dtl_%s_nvol, &dtl_%s_req)) return 1;",
         rt(g, "shift_begin"), c->shift_dim, cg_dtltype(ty), nm, nm, nm, nm, nm);
    g->ind -= 2;
    line(g, "}");
    return;
  }
  emit_box(g, c, box, false);
  line(g, "dtl_%s_vol = dtl_box_volume(&%s);", nm, box);
  char vol[300];
  snprintf(vol, sizeof vol, "dtl_%s_vol", nm);
  reserve(g, nm, slot, vol, ty);
  set_layout(g, nm, box);
  if (c->output) {
    if (g->o->cuda) line(g, "if (dtl_cu_zero(dtl_ctx, %s, dtl_%s, dtl_%s_vol)) return 1;", cg_dtltype(ty), nm, nm);
    else line(g, "dtl_zero(%s, dtl_%s, dtl_%s_vol);", cg_dtltype(ty), nm, nm);
    return;
  }
  if (c->pattern == PAT_BCAST)
    line(g, "if (%s(dtl_ctx, 0x%xu, &dtl_plan->dist[%d], %s, %s, &dtl_plan->own[%d], &%s, dtl_%s)) return 1;",
         rt(g, "bcast_fetch"), c->mask, t, cg_dtltype(ty), localptr, t, box, nm);
  else {
    args_fill(g, c->depth);
    line(g, "if (%s(dtl_ctx, &dtl_plan->dist[%d], %s, %s, &dtl_plan->own[%d], %s_s%d_box%d, &dtl_args, dtl_%s)) return 1;",
         rt(g, "fetch"), t, cg_dtltype(ty), localptr, t, fnprefix(g), g->ls->s->index, q, nm);
  }
}

/* Write-back at the end of an iteration of the loop at c->depth. */
static void emit_comm_out1(st *g, int q, const lw_comm *c) {
  if (!c->output || c->pattern == PAT_LOCAL) return;
  int t = c->tensor;
  const char *n = tname(g, t);
  fe_type ty = tensor(g, t)->type;
  line(g, "/* write back %s: %s */", tensor(g, t)->name, lw_pattern_name(c->pattern));
  if (lw_sparse(g->lp->ir->ast, t)) { /* the holders' pieces gain the entries */
    args_fill(g, c->depth);
    line(g, "if (dtl_sparse_accumulate(dtl_ctx, &dtl_plan->dist[%d], %s, 0x%xu, %s_s%d_box%d, &dtl_args, dtl_%s_coo)) return 1;", t, n,
         g->ls->exec_mask, fnprefix(g), g->ls->s->index, q, n);
    return;
  }
  if (c->pattern == PAT_REDUCE) {
    if (c->mask) {
      if (c->allreduce) {
        line(g, "if (%s(dtl_ctx, 0x%xu, NULL, %s, dtl_%s, dtl_%s_vol)) return 1;", rt(g, "reduce"), c->mask, cg_dtltype(ty), n, n);
      } else {
        char roots[256] = "";
        for (int d = 0; d < g->lp->ndims; d++) {
          char one[32];
          snprintf(one, sizeof one, "%s%lld", d ? ", " : "", (long long)(c->mask >> d & 1 ? c->root[d] : 0));
          strcat(roots, one);
        }
        line(g, "{ static const int64_t dtl__root[] = {%s};", roots);
        line(g, "  if (%s(dtl_ctx, 0x%xu, dtl__root, %s, dtl_%s, dtl_%s_vol)) return 1; }", rt(g, "reduce"), c->mask, cg_dtltype(ty), n, n);
      }
    }
    line(g, "{ dtl_box dtl__r; /* keep the part of the box this rank owns */");
    line(g, "  if (dtl_box_intersect(&dtl_%s_box, &dtl_plan->own[%d], &dtl__r))", n, t);
    if (g->o->cuda)
      line(g, "    if (dtl_cu_copy_box(dtl_ctx, %s, dtl_%s, &dtl_%s_box, %s, &dtl_plan->own[%d], &dtl__r, true)) return 1; }", cg_dtltype(ty), n, n, n, t);
    else
      line(g, "    dtl_copy_box(%s, dtl_%s, &dtl_%s_box, %s, &dtl_plan->own[%d], &dtl__r, true); }", cg_dtltype(ty), n, n, n, t);
    return;
  }
  args_fill(g, c->depth);
  line(g, "if (%s(dtl_ctx, &dtl_plan->dist[%d], %s, %s, &dtl_plan->own[%d], 0x%xu, %s_s%d_box%d, &dtl_args, dtl_%s)) return 1;",
       rt(g, "accumulate"), t, cg_dtltype(ty), n, t, g->ls->exec_mask, fnprefix(g), g->ls->s->index, q, n);
}

static void assume_cond(st *g, const lw_comm *c, char *buf, size_t n) {
  const fe_program *p = g->lp->ir->ast;
  buf[0] = 0;
  for (int q = 1; q < c->nassume; q++) {
    char one[256];
    snprintf(one, sizeof one, "%s%s == %s", q > 1 ? " && " : "", cg_param(p, c->assume[0]),
             cg_param(p, c->assume[q]));
    if (strlen(buf) + strlen(one) < n) strcat(buf, one);
  }
}

static void emit_comm_in(st *g, int q) {
  const lw_comm *c = &g->ls->comm[q];
  if (!c->alt) {
    emit_comm_in1(g, q, c, false);
    return;
  }
  char cond[1024];
  assume_cond(g, c, cond, sizeof cond);
  line(g, "if (%s) { /* the grid allows a collective pattern */", cond);
  g->ind += 2;
  emit_comm_in1(g, q, c->alt, true);
  g->ind -= 2;
  line(g, "} else {");
  g->ind += 2;
  emit_comm_in1(g, q, c, false);
  g->ind -= 2;
  line(g, "}");
}

static void emit_comm_out(st *g, int q) {
  const lw_comm *c = &g->ls->comm[q];
  if (!c->output) return;
  if (!c->alt) {
    emit_comm_out1(g, q, c);
    return;
  }
  char cond[1024];
  assume_cond(g, c, cond, sizeof cond);
  line(g, "if (%s) {", cond);
  g->ind += 2;
  emit_comm_out1(g, q, c->alt);
  g->ind -= 2;
  line(g, "} else {");
  g->ind += 2;
  emit_comm_out1(g, q, c);
  g->ind -= 2;
  line(g, "}");
}

/* Offsets of a kernel operand: the element at the lower corner of the kernel's block. */
static void kernel_ptr(st *g, FILE *m, const ir_expr *e, const int *korig, int nk, const sym **klo,
                       bool snap) {
  nctx nc = {g->lp, g->ls, false};
  const char *n = tname(g, e->tensor);
  const char *pre = snap ? "in_" : "";
  fprintf(m, "&dtl_%s%s[", pre, n);
  if (!e->nidx) fputc('0', m);
  for (int x = 0; x < e->nidx; x++) {
    if (x) fputs(" + ", m);
    int kk = -1;
    for (int q = 0; q < nk; q++)
      if (korig[q] == e->vars[x]) kk = q;
    fputc('(', m);
    if (kk >= 0) psym(m, klo[kk], &nc);
    else fputs(vname(g, e->vars[x]), m);
    fprintf(m, " - dtl_%s%s_lo[%d])", pre, n, x);
    if (x + 1 < e->nidx) fprintf(m, " * dtl_%s%s_st[%d]", pre, n, x);
  }
  fputc(']', m);
}

static int kpos(const ir_expr *e, int var) {
  for (int x = 0; x < e->nidx; x++)
    if (e->vars[x] == var) return x;
  return -1;
}

static void stride_of(st *g, FILE *m, const ir_expr *e, int x, bool snap) {
  if (x < 0 || x + 1 >= e->nidx) fputs("1", m);
  else fprintf(m, "dtl_%s%s_st[%d]", snap ? "in_" : "", tname(g, e->tensor), x);
}

static int flatten_product(const ir_expr *e, const ir_expr **out, int max) {
  if (e->kind == IR_ACCESS) {
    if (max < 1) return 0;
    out[0] = e;
    return 1;
  }
  if (e->kind != IR_MUL) return 0;
  int na = flatten_product(e->a, out, max);
  return na + flatten_product(e->b, out + na, max - na);
}

/* A leaf kernel call: dtl_NAME(...); on the host, a checked dtl_cu_NAME(dtl_ctx, ...) on the
 * device. */
static void kopen(const st *g, FILE *m, const char *name) {
  if (g->o->cuda) fprintf(m, "if (dtl_cu_%s(dtl_ctx, ", name);
  else fprintf(m, "dtl_%s(", name);
}
static void kclose(const st *g, FILE *m) { fputs(g->o->cuda ? ")) return 1;" : ");", m); }

static void emit_kernel(st *g, int k) {
  const ir_stmt *s = g->ls->s;
  const cin_node *n = g->ls->loops[k];
  const cin_node *asg = cin_assign(s->root);
  int nk = n->nsubst, korig[8];
  const sym *klo[8], *khi[8];
  nctx nc = {g->lp, g->ls, false};
  line(g, "/* substitute(%s): leaf kernel over the %d innermost loops */", ir_kernel_name(n->kernel), nk);
  line(g, "{");
  g->ind += 2;
  for (int q = 0; q < nk; q++) {
    int v = g->ls->loops[k + q]->var;
    while (!s->vars[v].original) v = s->rels[s->vars[v].def].in[0];
    korig[q] = v;
    lw_interval(g->lp, g->ls, v, k - 1, &klo[q], &khi[q]);
    MBUF(b);
    FILE *m = mopen(&b);
    fprintf(m, "const int64_t dtl__n%d = ", q);
    psym(m, sym_sub(khi[q], klo[q]), &nc);
    fprintf(m, "; /* extent of %s */", s->vars[v].name);
    fclose(m);
    line(g, "%s", b);
  }
  char cond[256] = "";
  for (int q = 0; q < nk; q++) {
    char one[32];
    snprintf(one, sizeof one, "%sdtl__n%d > 0", q ? " && " : "", q);
    strcat(cond, one);
  }
  line(g, "if (%s) {", cond);
  g->ind += 2;
  fe_type ty = tensor(g, asg->lhs_tensor)->type;
  ir_expr lhs = {.kind = IR_ACCESS, .tensor = asg->lhs_tensor, .nidx = asg->nlhs, .vars = asg->lhs_vars};
  const ir_expr *x = asg->rhs->a, *y = asg->rhs->b;
  if (!x) x = y = asg->rhs;
  bool sx = x->kind == IR_ACCESS && x->tensor == asg->lhs_tensor;
  bool sy = y->kind == IR_ACCESS && y->tensor == asg->lhs_tensor;
  MBUF(b);
  FILE *m = mopen(&b);
  /* korig index: which loop walks which variable */
  int lk0 = -1, lk1 = -1;
  for (int q = 0; q < nk; q++) {
    if (asg->nlhs > 0 && kpos(&lhs, korig[q]) >= 0) {
      if (lk0 < 0 || kpos(&lhs, korig[q]) < kpos(&lhs, korig[lk0])) lk1 = lk0, lk0 = q;
      else lk1 = q;
    }
  }
  switch (n->kernel) {
  case KERNEL_GEMM: {
    int mq = lk0, nq = lk1, kq = 3 - mq - nq;
    if (kpos(x, korig[mq]) < 0) {
      const ir_expr *t = x;
      x = y, y = t;
      bool ts = sx;
      sx = sy, sy = ts;
    }
    int tx = kpos(x, korig[mq]) > kpos(x, korig[kq]);
    int ty2 = kpos(y, korig[kq]) > kpos(y, korig[nq]);
    kopen(g, m, "gemm");
    fprintf(m, "%s, %d, %d, dtl__n%d, dtl__n%d, dtl__n%d, ", cg_dtltype(ty), tx, ty2, mq, nq, kq);
    kernel_ptr(g, m, x, korig, nk, klo, sx);
    fputs(", ", m);
    stride_of(g, m, x, tx ? kpos(x, korig[kq]) : kpos(x, korig[mq]), sx);
    fputs(", ", m);
    kernel_ptr(g, m, y, korig, nk, klo, sy);
    fputs(", ", m);
    stride_of(g, m, y, ty2 ? kpos(y, korig[nq]) : kpos(y, korig[kq]), sy);
    fputs(", ", m);
    kernel_ptr(g, m, &lhs, korig, nk, klo, false);
    fputs(", ", m);
    stride_of(g, m, &lhs, kpos(&lhs, korig[mq]), false);
    kclose(g, m);
    break;
  }
  case KERNEL_GEMV: {
    int mq = lk0, kq = 1 - mq;
    if (!(kpos(x, korig[mq]) >= 0 && x->nidx >= 1 && kpos(x, korig[kq]) >= 0)) {
      const ir_expr *t = x;
      x = y, y = t;
      bool ts = sx;
      sx = sy, sy = ts;
    }
    int tr = kpos(x, korig[mq]) > kpos(x, korig[kq]);
    kopen(g, m, "gemv");
    fprintf(m, "%s, %d, dtl__n%d, dtl__n%d, ", cg_dtltype(ty), tr, mq, kq);
    kernel_ptr(g, m, x, korig, nk, klo, sx);
    fputs(", ", m);
    stride_of(g, m, x, tr ? kpos(x, korig[kq]) : kpos(x, korig[mq]), sx);
    fputs(", ", m);
    kernel_ptr(g, m, y, korig, nk, klo, sy);
    fputs(", ", m);
    stride_of(g, m, y, kpos(y, korig[kq]), sy);
    fputs(", ", m);
    kernel_ptr(g, m, &lhs, korig, nk, klo, false);
    fputs(", ", m);
    stride_of(g, m, &lhs, kpos(&lhs, korig[mq]), false);
    kclose(g, m);
    break;
  }
  case KERNEL_DOT:
    kopen(g, m, "dot");
    fprintf(m, "%s, dtl__n0, ", cg_dtltype(ty));
    kernel_ptr(g, m, x, korig, nk, klo, sx);
    fputs(", ", m);
    stride_of(g, m, x, kpos(x, korig[0]), sx);
    fputs(", ", m);
    kernel_ptr(g, m, y, korig, nk, klo, sy);
    fputs(", ", m);
    stride_of(g, m, y, kpos(y, korig[0]), sy);
    fputs(", ", m);
    kernel_ptr(g, m, &lhs, korig, nk, klo, false);
    kclose(g, m);
    break;
  case KERNEL_AXPY: {
    const ir_expr *al = x, *xv = y;
    if (xv->kind != IR_ACCESS || kpos(xv, korig[0]) < 0) al = y, xv = x;
    bool sxv = xv->kind == IR_ACCESS && xv->tensor == asg->lhs_tensor;
    fprintf(m, "const %s dtl__alpha = ", cg_ctype(ty));
    cg_print_expr(m, g->lp->ir, s, al, ty, access_local, g);
    fprintf(m, ";\n%*s", g->ind, "");
    kopen(g, m, "axpy");
    fprintf(m, "%s, dtl__n0, &dtl__alpha, ", cg_dtltype(ty));
    kernel_ptr(g, m, xv, korig, nk, klo, sxv);
    fputs(", ", m);
    stride_of(g, m, xv, kpos(xv, korig[0]), sxv);
    fputs(", ", m);
    kernel_ptr(g, m, &lhs, korig, nk, klo, false);
    fputs(", ", m);
    stride_of(g, m, &lhs, kpos(&lhs, korig[0]), false);
    kclose(g, m);
    break;
  }
  default: {
    /* ttv, ttm, innerprod, mttkrp: operands in the kernel's order, letters i, j, k, l */
    static const char *fn[] = {[KERNEL_TTV] = "dtl_ttv", [KERNEL_TTM] = "dtl_ttm",
                               [KERNEL_INNERPROD] = "dtl_innerprod", [KERNEL_MTTKRP] = "dtl_mttkrp"};
    static const char *pats[][4] = {[KERNEL_TTV] = {"ij", "ijk", "k", NULL},
                                    [KERNEL_TTM] = {"ijl", "ijk", "kl", NULL},
                                    [KERNEL_INNERPROD] = {"", "ijk", "ijk", NULL},
                                    [KERNEL_MTTKRP] = {"il", "ijk", "jl", "kl"}};
    const ir_expr *fs[4];
    int nf = flatten_product(asg->rhs, fs, 4);
    const ir_expr *ops[4] = {&lhs};
    for (int q = 0; q < nf; q++) ops[q + 1] = fs[n->kfactor[q]];
    int nletters = n->kernel == KERNEL_TTV || n->kernel == KERNEL_INNERPROD ? 3 : 4;
    if (g->o->cuda) fprintf(m, "if (dtl_cu_%s(dtl_ctx, %s", fn[n->kernel] + 4, cg_dtltype(ty));
    else {
      if (n->kernel == KERNEL_MTTKRP) fputs("if (", m);
      fprintf(m, "%s(%s", fn[n->kernel], cg_dtltype(ty));
    }
    for (int L = 0; L < nletters; L++) fprintf(m, ", dtl__n%d", n->kletter[L]);
    /* inputs first, the output last */
    for (int q = 1; q <= nf + 1; q++) {
      int oi = q <= nf ? q : 0;
      const ir_expr *op = ops[oi];
      bool sn = oi > 0 && op->tensor == asg->lhs_tensor;
      fputs(", ", m);
      kernel_ptr(g, m, op, korig, nk, klo, sn);
      for (const char *L = pats[n->kernel][oi]; *L; L++) {
        fputs(", ", m);
        stride_of(g, m, op, kpos(op, korig[n->kletter[*L - 'i']]), sn);
      }
    }
    fputs(")", m);
    if (g->o->cuda) fputs(") return 1;", m);
    else if (n->kernel == KERNEL_MTTKRP) fputs(") return dtl_fail(dtl_ctx, \"out of memory in mttkrp\");", m);
    else fputs(";", m);
    break;
  }
  }
  fclose(m);
  line(g, "%s", b);
  g->ind -= 2;
  line(g, "}");
  g->ind -= 2;
  line(g, "}");
}

static void sp_push(st *g, const char *v);

static void emit_assign(st *g) {
  const ir_stmt *s = g->ls->s;
  if (g->nsp) sp_advance(g);
  const cin_node *asg = cin_assign(s->root);
  fe_type ty = tensor(g, asg->lhs_tensor)->type;
  ir_expr lhs = {.kind = IR_ACCESS, .tensor = asg->lhs_tensor, .nidx = asg->nlhs, .vars = asg->lhs_vars};
  MBUF(b);
  FILE *m = mopen(&b);
  /* the output is never read through the snapshot name on the left */
  const char *n = tname(g, asg->lhs_tensor);
  static const char *tsuffix[] = {"double", "float", "int32", "int64"};
  if (g->in_kernel && g->atomic) fprintf(m, "dtl_atomic_add_%s(&", tsuffix[ty]);
  fprintf(m, "dtl_%s[", n);
  if (!lhs.nidx) fputc('0', m);
  for (int x = 0; x < lhs.nidx; x++) {
    if (x) fputs(" + ", m);
    fprintf(m, "(%s - dtl_%s_lo[%d])", vname(g, lhs.vars[x]), n, x);
    if (x + 1 < lhs.nidx) fprintf(m, " * dtl_%s_st[%d]", n, x);
  }
  fputs(g->in_kernel && g->atomic ? "], " : "] += ", m);
  if (lw_sparse(g->lp->ir->ast, asg->lhs_tensor) && !g->acc_mode) { /* a nonzero becomes an entry */
    fclose(m);
    m = mopen(&b);
    fprintf(m, "{ const %s dtl__v = ", cg_ctype(ty));
    cg_print_expr(m, g->lp->ir, s, asg->rhs, ty, access_local, g);
    fclose(m);
    line(g, "%s;", b);
    sp_push(g, "dtl__v");
    line(g, "}");
    return;
  }
  if (g->acc_mode) { /* the sum of the innermost loop: a register, not the output */
    fclose(m);
    m = mopen(&b);
    fputs("dtl__acc += ", m);
  }
  cg_print_expr(m, g->lp->ir, s, asg->rhs, ty, access_local, g);
  fputs(g->in_kernel && g->atomic ? ");" : ";", m);
  fclose(m);
  if (g->acc_mode) {
    line(g, "%s", b);
    return;
  }
  if (g->in_kernel) {
    line(g, "%s", b);
    return;
  }
  bool atomic = false;
  for (int k = 0; k < g->ls->nloops; k++)
    atomic |= g->ls->loops[k]->par == PAR_CPU_THREAD && g->ls->loops[k]->race == RACE_ATOMICS && k >= g->ls->outer;
  if (atomic) line(g, "#pragma omp atomic");
  line(g, "%s", b);
}

/* precompute: the workspace's loop, before the consumer's loops, in every iteration of the
 * loops that enclose them. */
static void emit_producer(st *g, const cin_node *w) {
  const ir_stmt *s = g->ls->s;
  const cin_node *pr = w->producer;
  const char *wn = s->work[w->workspace - g->lp->ir->ast->ntensors].name;
  const char *v = vname(g, pr->var);
  nctx nc = {g->lp, g->ls, false};
  MBUF(b);
  FILE *m = mopen(&b);
  fprintf(m, "for (int64_t %s = 0; %s < ", v, v);
  psym(m, s->vars[pr->var].extent, &nc);
  fprintf(m, "; %s++)", v);
  fclose(m);
  line(g, "/* precompute: workspace %s */", wn);
  line(g, "%s", b);
  m = mopen(&b);
  fprintf(m, "  dtl_w_%s[%s] = ", wn, v);
  cg_print_expr(m, g->lp->ir, s, pr->body->rhs, tensor(g, cin_assign(s->root)->lhs_tensor)->type, access_local, g);
  fputc(';', m);
  fclose(m);
  line(g, "%s", b);
}

/* A sparse output gains the entry (the output's coordinates, value v) unless v is zero. */
static void sp_push(st *g, const char *v) {
  const cin_node *asg = cin_assign(g->ls->s->root);
  const char *n = tname(g, asg->lhs_tensor);
  static const char *tsuffix[] = {"double", "float", "int32", "int64"};
  MBUF(b);
  FILE *m = mopen(&b);
  fprintf(m, "if (%s != 0) { const int64_t dtl__c[] = {", v);
  for (int x = 0; x < asg->nlhs; x++) fprintf(m, "%s%s", x ? ", " : "", vname(g, asg->lhs_vars[x]));
  fprintf(m, "}; if (dtl_coo_push_%s(dtl_%s_coo, dtl__c, %s)) return dtl_fail(dtl_ctx, \"out of memory for the entries of %s\"); }",
          tsuffix[tensor(g, asg->lhs_tensor)->type], n, v, tensor(g, asg->lhs_tensor)->name);
  fclose(m);
  line(g, "%s", b);
}

/* After the innermost loop in acc_mode: the output element gets the loop's sum. */
static void emit_acc_update(st *g) {
  const cin_node *asg = cin_assign(g->ls->s->root);
  const char *n = tname(g, asg->lhs_tensor);
  if (lw_sparse(g->lp->ir->ast, asg->lhs_tensor)) {
    sp_push(g, "dtl__acc");
    return;
  }
  MBUF(b);
  FILE *m = mopen(&b);
  fprintf(m, "dtl_%s[", n);
  if (!asg->nlhs) fputc('0', m);
  for (int x = 0; x < asg->nlhs; x++) {
    if (x) fputs(" + ", m);
    fprintf(m, "(%s - dtl_%s_lo[%d])", vname(g, asg->lhs_vars[x]), n, x);
    if (x + 1 < asg->nlhs) fprintf(m, " * dtl_%s_st[%d]", n, x);
  }
  fputs("] += dtl__acc;", m);
  fclose(m);
  bool atomic = false;
  for (int k = 0; k < g->ls->nloops; k++)
    atomic |= g->ls->loops[k]->par == PAR_CPU_THREAD && g->ls->loops[k]->race == RACE_ATOMICS && k >= g->ls->outer;
  if (atomic) line(g, "#pragma omp atomic");
  line(g, "%s", b);
}

/* Can the innermost loop k sum into a scalar?  When it is a plain local loop and every index
 * variable of the output is bound outside it: all its iterations add to one element. */
static bool acc_loop(const st *g, int k) {
  const lw_stmt *ls = g->ls;
  const cin_node *n = ls->loops[k];
  const cin_node *asg = cin_assign(ls->s->root);
  if (k != ls->nloops - 1 || k < ls->outer || n->distributed || n->par != PAR_NONE || g->o->cuda || g->in_kernel ||
      k == g->kdepth)
    return false;
  for (int x = 0; x < asg->nlhs; x++)
    if (!g->bound[asg->lhs_vars[x]]) return false;
  return true;
}

static void loop_comment(st *g, int k) {
  const ir_stmt *s = g->ls->s;
  const cin_node *n = g->ls->loops[k];
  const ir_var *v = &s->vars[n->var];
  const char *from = v->def < 0 ? "index variable of the statement" : s->rels[v->def].text;
  char extra[128] = "";
  if (n->distributed) snprintf(extra, sizeof extra, ", distributed onto grid dim %d", lw_gdim(g->lp, n));
  line(g, "/* loop %s (%s%s) */", v->name, from, extra);
}

static void emit_gpu_leaf(st *g, int k0);

static void emit_level(st *g, int k) {
  const lw_stmt *ls = g->ls;
  const ir_stmt *s = ls->s;
  if (k == ls->outer && ls->outer > 0 && g->ncond) {
    MBUF(all);
    FILE *m = mopen(&all);
    for (int q = 0; q < g->ncond; q++) fprintf(m, "%s%s", q ? " && " : "", g->cond[q]);
    fclose(m);
    line(g, "if (%s) { /* this rank has work in this iteration */", all);
    g->ind += 2;
    int save = g->ncond;
    g->ncond = 0;
    emit_level(g, k);
    g->ncond = save;
    g->ind -= 2;
    line(g, "}");
    return;
  }
  if (g->o->cuda && !g->in_kernel && k == ls->outer && g->kdepth < 0) {
    emit_gpu_leaf(g, k); /* the local loops become one CUDA kernel */
    return;
  }
  if (g->in_kernel && g->mapped[k]) { /* a thread index: bound at the kernel's top */
    emit_level(g, k + 1);
    return;
  }
  if (k == g->kdepth) {
    emit_kernel(g, k);
    return;
  }
  if (k == ls->nloops) {
    emit_assign(g);
    return;
  }
  const cin_node *n = ls->loops[k];
  const char *v = vname(g, n->var);
  nctx nc = {g->lp, ls, false};
  bool collective = k < ls->outer;
  if (!collective && g->nsp) sp_advance(g); /* positions the enclosing loops determine */
  for (int w = 0; w < ls->nwhere; w++)
    if (ls->where_depth[w] == k) emit_producer(g, ls->where[w]);
  size_t nb = (s->nvars + 1) * sizeof *g->bound;
  bool *saved = ir_alloc(nb);
  memcpy(saved, g->bound, nb);
  int *known_saved = ir_alloc((g->nsp + 1) * sizeof *known_saved);
  if (g->nsp) memcpy(known_saved, g->sp_known, g->nsp * sizeof *known_saved);
  int drv_a = -1, drv_x = -1;
  MBUF(drv_base);
  bool (*valid_saved)[LW_MAX_DIMS] = ir_alloc((g->nsp + 1) * sizeof *valid_saved);
  if (g->nsp) memcpy(valid_saved, g->sp_valid, g->nsp * sizeof *valid_saved);
  bool acc = acc_loop(g, k);
  if (acc) {
    line(g, "{ /* the loop's sum, added to the output element after it */");
    g->ind += 2;
    line(g, "%s dtl__acc = (%s)0;", cg_ctype(tensor(g, cin_assign(s->root)->lhs_tensor)->type),
         cg_ctype(tensor(g, cin_assign(s->root)->lhs_tensor)->type));
    g->acc_mode = true;
  }
  int ncond0 = g->ncond;
  int tight = -1;
  MBUF(b);
  FILE *m;
  loop_comment(g, k);
  if (n->distributed) {
    int d = lw_gdim(g->lp, n);
    int64_t one;
    bool single = sym_is_const(ls->bs[k], &one) && one == 1;
    m = mopen(&b);
    if (collective && single) {
      fprintf(m, "{ const int64_t %s = dtl_coords[%d];", v, d);
    } else if (collective) {
      fprintf(m, "for (int64_t dtl_l_%s = 0; dtl_l_%s < ", s->vars[n->var].name, s->vars[n->var].name);
      psym(m, ls->bs[k], &nc);
      fprintf(m, "; dtl_l_%s++) { const int64_t %s = ", s->vars[n->var].name, v);
      psym(m, lw_loop_value(g->lp, ls, k), &nc);
      fputc(';', m);
    } else {
      const sym *base = sym_mul(sym_coord(d), ls->bs[k]);
      fprintf(m, "for (int64_t %s = ", v);
      psym(m, base, &nc);
      fprintf(m, "; %s < ", v);
      psym(m, sym_min(&ls->facts, s->vars[n->var].extent, sym_add(base, ls->bs[k])), &nc);
      fprintf(m, "; %s++) {", v);
    }
    fclose(m);
    line(g, "%s", b);
    if (collective) {
      const sym *val = lw_loop_value(g->lp, ls, k);
      if (!sym_prove_le(&ls->facts, sym_add(val, sym_const(1)), s->vars[n->var].extent)) {
        m = mopen(&b);
        fprintf(m, "%s < ", v);
        psym(m, s->vars[n->var].extent, &nc);
        fclose(m);
        add_cond(g, b);
      }
    }
  } else {
    const sym *hi = collective ? s->vars[n->var].extent : lw_local_hi(ls, n->var, g->bound, &tight);
    if (!collective && !g->o->cuda && n->par == PAR_CPU_THREAD) line(g, "#pragma omp parallel for");
    if (!collective && !g->o->cuda && n->par == PAR_CPU_VECTOR) line(g, "#pragma omp simd");
    if (g->nsp && sp_driver(g, k, &drv_a, &drv_x, &drv_base)) {
      /* only the stored coordinates of the sparse factor: the others add zero */
      const ir_expr *e = g->sp_e[drv_a];
      const char *tn = tname(g, e->tensor);
      char par[64];
      MBUF(hs);
      sp_parent(par, sizeof par, drv_a, drv_x);
      m = mopen(&hs);
      psym(m, hi, &nc);
      fclose(m);
      line(g, "{ /* loop %s over the stored coordinates of %s, level %d */", v, tensor(g, e->tensor)->name, drv_x);
      g->ind += 2;
      /* a parent position that may be -1 (no stored entry) gives an empty loop */
      char chk[96] = "";
      if (drv_x > 0 && !g->sp_valid[drv_a][drv_x - 1]) snprintf(chk, sizeof chk, "%s < 0 ? 0 : ", par);
      line(g, "const int64_t dtl_sp%d_e%d = %sdtl_%s_pos[%d][%s + 1];", drv_a, drv_x, chk, tn, drv_x, par);
      line(g, "const int64_t dtl_sp%d_b%d = %s - dtl_%s_lo[%d]; /* local coordinate of %s = 0 */", drv_a, drv_x, drv_base, tn, drv_x, v);
      /* the segment's first coordinate at or after the loop's start (the whole segment when the
       * loop starts at the block's first coordinate) */
      line(g, "for (int64_t dtl_sp%d_p%d = %s(dtl_sp%d_b%d <= 0 ? dtl_%s_pos[%d][%s] : dtl_sp_lower(dtl_%s_crd[%d], dtl_%s_pos[%d][%s], dtl_sp%d_e%d, dtl_sp%d_b%d)); dtl_sp%d_p%d < dtl_sp%d_e%d; dtl_sp%d_p%d++) {",
           drv_a, drv_x, chk, drv_a, drv_x, tn, drv_x, par, tn, drv_x, tn, drv_x, par, drv_a, drv_x, drv_a, drv_x, drv_a, drv_x, drv_a,
           drv_x, drv_a, drv_x);
      line(g, "  const int64_t %s = dtl_%s_crd[%d][dtl_sp%d_p%d] - dtl_sp%d_b%d;", v, tn, drv_x, drv_a, drv_x, drv_a, drv_x);
      line(g, "  if (%s >= %s) break;", v, hs);
      g->sp_known[drv_a] = drv_x + 1;
      g->sp_valid[drv_a][drv_x] = true;
    } else {
      m = mopen(&b);
      fprintf(m, "for (int64_t %s = 0; %s < ", v, v);
      psym(m, hi, &nc);
      fprintf(m, "; %s++) {", v);
      fclose(m);
      line(g, "%s", b);
    }
  }
  g->ind += 2;
  line(g, "(void)%s;", v);
  g->bound[n->var] = true;
  bind_parents(g, collective, tight);
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].depth == k) emit_comm_in(g, q);
  emit_level(g, k + 1);
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].depth == k) emit_comm_out(g, q);
  g->ind -= 2;
  line(g, "}");
  if (drv_a >= 0) {
    g->ind -= 2;
    line(g, "}");
  }
  if (acc) {
    g->acc_mode = false;
    emit_acc_update(g);
    g->ind -= 2;
    line(g, "}");
  }
  memcpy(g->bound, saved, nb);
  if (g->nsp) memcpy(g->sp_known, known_saved, g->nsp * sizeof *known_saved);
  if (g->nsp) memcpy(g->sp_valid, valid_saved, g->nsp * sizeof *valid_saved);
  g->ncond = ncond0; /* conditions of this loop go out of scope with it */
}

/* ---- CUDA: the local loops as one kernel ------------------------------------------------- */
/* The original variables whose values determine variable v (v's value is a function of them):
 * a derived variable is determined by the variables its relation replaced, and a rotated one
 * also by the rotating variables. */
static void determinants(const ir_stmt *s, int v, bool *out) {
  if (s->vars[v].def < 0) {
    out[v] = true;
    return;
  }
  const ir_rel *R = &s->rels[s->vars[v].def];
  determinants(s, R->in[0], out);
  if (R->kind == REL_FUSE) determinants(s, R->in[1], out);
  for (int q = 0; q < R->nrot; q++) determinants(s, R->rot[q], out);
}

/* Is loop k's variable a function of the output's index variables alone?  Then two
 * iterations with different values of it write different output elements, and threads
 * over it never race. */
static bool output_parallel(const st *g, int k) {
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

/* Lower and upper bound of a local loop, as the host evaluates them before the launch: the
 * extent, tightened for the inner variable of a split (the kernel guards the rest). */
static void local_range(st *g, int k, FILE *lo, FILE *hi) {
  const lw_stmt *ls = g->ls;
  const cin_node *n = ls->loops[k];
  nctx nc = {g->lp, ls, false};
  const sym *ext = ls->s->vars[n->var].extent;
  if (n->distributed) {
    const sym *base = sym_mul(sym_coord(lw_gdim(g->lp, n)), ls->bs[k]);
    psym(lo, base, &nc);
    psym(hi, sym_min(&ls->facts, ext, sym_add(base, ls->bs[k])), &nc);
  } else {
    int parent;
    ext = lw_local_hi(ls, n->var, g->bound, &parent);
    fputs("0", lo);
    psym(hi, ext, &nc);
  }
}

/* The loops [k0, nloops) below the last communicate point run on the device: one kernel
 * whose threads are the loops scheduled with gpu_block / gpu_warp / gpu_thread (in that
 * order, the last one varying fastest), or by default every loop whose variable determines
 * the output element written, so that no two threads update the same element; the other
 * loops run inside each thread in their order.  When threads can meet on an output element
 * (a reduction loop mapped to threads, or `atomics`), updates are atomic.  The host fills an
 * argument struct with everything the loop body names (params, grid coordinates, the values
 * of enclosing loops, buffers and their layouts) and launches it on the compute stream. */
static void emit_gpu_leaf(st *g, int k0) {
  const lw_stmt *ls = g->ls;
  const ir_stmt *s = ls->s;
  const fe_program *p = g->lp->ir->ast;
  char kn[256];
  snprintf(kn, sizeof kn, "%s_s%d_k%d", g->o->prefix, s->index, g->nkern++);
  /* threads */
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
    /* a full reduction: every loop is a thread, the updates atomic */
    if (!nm)
      for (int k = k0; k < ls->nloops; k++) mk[nm++] = k;
  }
  bool atomic = false;
  for (int q = 0; q < nm; q++) {
    const cin_node *n = ls->loops[mk[q]];
    if (n->race == RACE_ATOMICS || (!output_parallel(g, mk[q]) && n->race != RACE_IGNORE)) atomic = true;
  }
  /* what the body names: bound variables, local indices of distributed loops, buffers */
  bool *bvar = ir_alloc((s->nvars + 1) * sizeof *bvar);
  for (int v = 0; v < s->nvars; v++) bvar[v] = g->bound[v];
  char *td = NULL;
  size_t tl = 0;
  FILE *t = open_memstream(&td, &tl);
  fprintf(t, "/* arguments of kernel %s (statement %d) */\ntypedef struct {\n", kn, s->index + 1);
  fprintf(t, "  int64_t dtl__total, dtl__mlo[%d], dtl__mn[%d];\n", nm + 1, nm + 1);
  fprintf(t, "  int64_t dtl_coords[%d];\n", g->lp->ndims);
  for (int i = 0; i < p->nparams; i++) fprintf(t, "  int64_t %s;\n", cg_param(p, i));
  for (int v = 0; v < s->nvars && v < 512; v++)
    if (bvar[v]) fprintf(t, "  int64_t %s;\n", vname(g, v));
  for (int k = 0; k < k0; k++) {
    const cin_node *n = ls->loops[k];
    int64_t one;
    if (n->distributed && !(sym_is_const(ls->bs[k], &one) && one == 1))
      fprintf(t, "  int64_t dtl_l_%s;\n", s->vars[n->var].name);
  }
  const cin_node *asg = cin_assign(s->root);
  for (int q = 0; q < ls->ncomm; q++) {
    const lw_comm *c = &ls->comm[q];
    bool snap = !c->output && c->tensor == asg->lhs_tensor;
    fprintf(t, "  %s *dtl_%s%s;\n  int64_t dtl_%s%s_lo[%d], dtl_%s%s_st[%d];\n", cg_ctype(p->tensors[c->tensor].type),
            snap ? "in_" : "", tname(g, c->tensor), snap ? "in_" : "", tname(g, c->tensor), c->order + 1,
            snap ? "in_" : "", tname(g, c->tensor), c->order + 1);
  }
  fprintf(t, "} %s_args;\n", kn);
  fclose(t);
  /* host: declarations before the statement function, the launch here */
  fprintf(g->decl, "%sint %s_launch(const %s_args *dtl_a, void *dtl_stream); /* in the .cu file */\n\n", td, kn, kn);
  line(g, "{ /* the local loops on the device: kernel %s, threads over %d loop%s%s */", kn, nm, nm == 1 ? "" : "s",
       atomic ? ", atomic updates" : "");
  g->ind += 2;
  line(g, "%s_args dtl__ka;", kn);
  line(g, "memset(&dtl__ka, 0, sizeof dtl__ka);");
  line(g, "memcpy(dtl__ka.dtl_coords, dtl_coords, sizeof dtl__ka.dtl_coords);");
  for (int i = 0; i < p->nparams; i++) line(g, "dtl__ka.%s = %s;", cg_param(p, i), cg_param(p, i));
  for (int v = 0; v < s->nvars && v < 512; v++)
    if (bvar[v]) line(g, "dtl__ka.%s = %s;", vname(g, v), vname(g, v));
  for (int k = 0; k < k0; k++) {
    const cin_node *n = ls->loops[k];
    int64_t one;
    if (n->distributed && !(sym_is_const(ls->bs[k], &one) && one == 1))
      line(g, "dtl__ka.dtl_l_%s = dtl_l_%s;", s->vars[n->var].name, s->vars[n->var].name);
  }
  for (int q = 0; q < ls->ncomm; q++) {
    const lw_comm *c = &ls->comm[q];
    bool snap = !c->output && c->tensor == asg->lhs_tensor;
    char nmb[256];
    snprintf(nmb, sizeof nmb, "%s%s", snap ? "in_" : "", tname(g, c->tensor));
    line(g, "dtl__ka.dtl_%s = dtl_%s;", nmb, nmb);
    line(g, "memcpy(dtl__ka.dtl_%s_lo, dtl_%s_lo, sizeof dtl__ka.dtl_%s_lo);", nmb, nmb, nmb);
    line(g, "memcpy(dtl__ka.dtl_%s_st, dtl_%s_st, sizeof dtl__ka.dtl_%s_st);", nmb, nmb, nmb);
  }
  line(g, "dtl__ka.dtl__total = 1;");
  for (int q = 0; q < nm; q++) {
    MBUF(lo);
    MBUF(hi);
    FILE *fl = mopen(&lo), *fh = mopen(&hi);
    local_range(g, mk[q], fl, fh);
    fclose(fl);
    fclose(fh);
    line(g, "dtl__ka.dtl__mlo[%d] = %s; /* loop %s */", q, lo, s->vars[ls->loops[mk[q]]->var].name);
    line(g, "dtl__ka.dtl__mn[%d] = dtl_max(0, (%s) - dtl__ka.dtl__mlo[%d]);", q, hi, q);
    line(g, "dtl__ka.dtl__total *= dtl__ka.dtl__mn[%d];", q);
  }
  line(g, "if (dtl_cu_check(dtl_ctx, %s_launch(&dtl__ka, dtl_cu_stream(dtl_ctx)), \"kernel %s\")) return 1;", kn, kn);
  g->ind -= 2;
  line(g, "}");
  /* the kernel */
  FILE *host = g->f;
  int ind = g->ind, ncond = g->ncond;
  size_t nb = (s->nvars + 1) * sizeof *g->bound;
  bool *saved = ir_alloc(nb);
  memcpy(saved, g->bound, nb);
  g->f = g->cu;
  g->ind = 0;
  fprintf(g->cu, "%s", td);
  free(td);
  line(g, "/* statement %d: loops", s->index + 1);
  for (int k = k0; k < ls->nloops; k++) {
    bool thr = false;
    for (int q = 0; q < nm; q++) thr |= mk[q] == k;
    line(g, " *   %s%s", s->vars[ls->loops[k]->var].name, thr ? " (threads)" : " (inside each thread)");
  }
  line(g, " */");
  line(g, "DTL_KERNEL_P(%s, %s_args, dtl__ka) {", kn, kn);
  g->ind = 2;
  for (int i = 0; i < p->nparams; i++) {
    const char *pn = cg_param(p, i);
    line(g, "const int64_t %s = dtl__ka.%s;", pn, pn);
    line(g, "(void)%s;", pn);
  }
  line(g, "const int64_t *dtl_coords = dtl__ka.dtl_coords;");
  line(g, "(void)dtl_coords;");
  for (int v = 0; v < s->nvars && v < 512; v++)
    if (bvar[v]) line(g, "const int64_t %s = dtl__ka.%s;\n  (void)%s;", vname(g, v), vname(g, v), vname(g, v));
  for (int k = 0; k < k0; k++) {
    const cin_node *n = ls->loops[k];
    int64_t one;
    if (n->distributed && !(sym_is_const(ls->bs[k], &one) && one == 1))
      line(g, "const int64_t dtl_l_%s = dtl__ka.dtl_l_%s;\n  (void)dtl_l_%s;", s->vars[n->var].name, s->vars[n->var].name,
           s->vars[n->var].name);
  }
  for (int q = 0; q < ls->ncomm; q++) {
    const lw_comm *c = &ls->comm[q];
    bool snap = !c->output && c->tensor == asg->lhs_tensor;
    char nmb[256];
    snprintf(nmb, sizeof nmb, "%s%s", snap ? "in_" : "", tname(g, c->tensor));
    line(g, "%s *dtl_%s = dtl__ka.dtl_%s;", cg_ctype(p->tensors[c->tensor].type), nmb, nmb);
    line(g, "const int64_t *dtl_%s_lo = dtl__ka.dtl_%s_lo, *dtl_%s_st = dtl__ka.dtl_%s_st;", nmb, nmb, nmb, nmb);
    line(g, "(void)dtl_%s, (void)dtl_%s_lo, (void)dtl_%s_st;", nmb, nmb, nmb);
  }
  line(g, "DTL_FOR_EACH(dtl__t, dtl__ka.dtl__total) {");
  g->ind = 4;
  line(g, "int64_t dtl__r = dtl__t;");
  for (int q = nm - 1; q >= 0; q--) {
    const char *vn = vname(g, ls->loops[mk[q]]->var);
    line(g, "const int64_t %s = dtl__ka.dtl__mlo[%d] + dtl__r %% dtl__ka.dtl__mn[%d];", vn, q, q);
    line(g, "(void)%s;", vn);
    line(g, "dtl__r /= dtl__ka.dtl__mn[%d];", q);
    g->bound[ls->loops[mk[q]]->var] = true;
  }
  line(g, "(void)dtl__r;");
  memset(g->mapped, 0, (ls->nloops + 1) * sizeof *g->mapped);
  for (int q = 0; q < nm; q++) g->mapped[mk[q]] = true;
  g->in_kernel = true;
  g->atomic = atomic;
  g->ncond = 0;
  bind_parents(g, false, -1);
  emit_level(g, k0);
  g->in_kernel = false;
  g->ind = 2;
  line(g, "}");
  g->ind = 0;
  line(g, "}");
  line(g, "DTL_EXTERN_C int %s_launch(const %s_args *dtl_a, void *dtl_stream) {", kn, kn);
  line(g, "  return DTL_LAUNCH(%s, dtl_a->dtl__total, dtl_stream, *dtl_a);", kn);
  line(g, "}\n");
  g->f = host;
  g->ind = ind;
  g->ncond = ncond;
  memcpy(g->bound, saved, nb);
}

/* Box functions: every rank evaluates the box of every other rank (no handshake). */
static void emit_box_fns(FILE *f, const lw_program *lp, const lw_stmt *ls, const cg_options *o) {
  for (int q = 0; q < ls->ncomm; q++) {
    const lw_comm *c = &ls->comm[q];
    if (c->pattern != PAT_EXCHANGE && c->pattern != PAT_SHIFT) continue; /* alt: never exchange */
    fprintf(f, "/* box of %s %s at statement %d for the rank at dtl_coords */\n",
            c->output ? "produced" : "needed", lp->ir->ast->tensors[c->tensor].name, ls->s->index + 1);
    fprintf(f, "static void %s_s%d_box%d(const void *dtl_arg, const int64_t *dtl_coords, dtl_box *dtl_b) {\n",
            o->prefix, ls->s->index, q);
    fprintf(f, "  const %s_s%d_args *dtl_a = dtl_arg;\n  (void)dtl_coords;\n", o->prefix, ls->s->index);
    declare_params(f, lp->ir->ast, "dtl_a->plan->p", 2);
    st g = {.f = f, .lp = lp, .ls = ls, .o = o, .ind = 2};
    st_alloc(&g);
    emit_box(&g, c, "dtl_b", true);
    fputs("}\n\n", f);
  }
}

/* A local view: the loops use the rank's own block directly. */
static void emit_view(st *g, const lw_comm *c) {
  const fe_program *p = g->lp->ir->ast;
  const cin_node *asg = cin_assign(g->ls->s->root);
  int t = c->tensor;
  const char *n = cg_tensor(p, t);
  bool snap = !c->output && t == asg->lhs_tensor;
  line(g, "/* %s %s: local, the rank's own block */", c->output ? "write" : "read", p->tensors[t].name);
  if (lw_sparse(p, t)) {
    if (c->output) line(g, "dtl_%s_coo->n = 0; /* this rank's block: entries added at the end */", n);
    else sp_bind(g, t, n);
    return;
  }
  if (snap) line(g, "dtl_in_%s = dtl_snap;", n);
  else if (c->output) line(g, "dtl_%s = %s;", n, n);
  else line(g, "dtl_%s = (%s *)%s; /* only read */", n, cg_ctype(p->tensors[t].type), n);
  char nm[256], bx[300];
  snprintf(nm, sizeof nm, "%s%s", snap ? "in_" : "", n);
  snprintf(bx, sizeof bx, "dtl_plan->own[%d]", t);
  set_layout(g, nm, bx);
}

/* Is e a factor of x: x is zero wherever e is (a product with e, e over something, -e)? */
static bool factor_of(const ir_expr *x, const ir_expr *e) {
  if (x == e) return true;
  if (x->nguards) return false;
  switch (x->kind) {
  case IR_MUL: return factor_of(x->a, e) || factor_of(x->b, e);
  case IR_DIV:
  case IR_NEG: return factor_of(x->a, e);
  default: return false;
  }
}

static void collect_sparse(st *g, const ir_expr *rhs, const ir_expr *e) {
  if (!e) return;
  if (e->kind == IR_ACCESS && lw_sparse(g->lp->ir->ast, e->tensor)) {
    if (g->nsp == g->capsp) {
      int cap = 2 * g->capsp + 8;
      const ir_expr **ne = ir_alloc(cap * sizeof *ne);
      bool *nf = ir_alloc(cap * sizeof *nf), (*nv)[LW_MAX_DIMS] = ir_alloc(cap * sizeof *nv);
      int *nk = ir_alloc(cap * sizeof *nk);
      if (g->nsp) {
        memcpy(ne, g->sp_e, g->nsp * sizeof *ne), memcpy(nf, g->sp_factor, g->nsp * sizeof *nf);
        memcpy(nv, g->sp_valid, g->nsp * sizeof *nv), memcpy(nk, g->sp_known, g->nsp * sizeof *nk);
      }
      g->sp_e = ne, g->sp_factor = nf, g->sp_valid = nv, g->sp_known = nk, g->capsp = cap;
    }
    g->sp_e[g->nsp] = e;
    g->sp_factor[g->nsp] = factor_of(rhs, e);
    g->sp_known[g->nsp++] = 0;
  }
  collect_sparse(g, rhs, e->a);
  collect_sparse(g, rhs, e->b);
}

static int count_access(const ir_expr *e) {
  if (!e) return 0;
  if (e->kind == IR_ACCESS) return 1;
  return count_access(e->a) + count_access(e->b);
}

static void emit_stmt(FILE *f, FILE *decl, FILE *cu, const lw_program *lp, const lw_stmt *ls, const cg_options *o,
                      int *slot) {
  const fe_program *p = lp->ir->ast;
  const ir_stmt *s = ls->s;
  const cin_node *asg = cin_assign(s->root);
  int nv = ls->lidx_var0 + ls->nloops + 1;
  fprintf(f, "/* loop values a box function needs */\ntypedef struct {\n  const %s_plan *plan;\n  int64_t v[%d];\n} %s_s%d_args;\n\n",
          o->prefix, nv, o->prefix, s->index);
  emit_box_fns(f, lp, ls, o);
  fprintf(f, "/* statement %d (%s:%d): ", s->index + 1, o->source_name, s->ast->loc.line);
  fputs(p->tensors[asg->lhs_tensor].name, f);
  if (asg->nlhs) {
    fputc('(', f);
    for (int k = 0; k < asg->nlhs; k++) fprintf(f, "%s%s", k ? "," : "", s->vars[asg->lhs_vars[k]].name);
    fputc(')', f);
  }
  fputs(asg->accumulate ? " += " : " = ", f);
  fe_print_expr(f, s->ast->rhs);
  fputs("\n * concrete index notation:\n", f);
  char *cin = NULL;
  size_t cl = 0;
  FILE *m = open_memstream(&cin, &cl);
  ir_print_cin(m, lp->ir, s);
  fclose(m);
  for (char *ln = strtok(cin, "\n"); ln; ln = strtok(NULL, "\n")) {
    /* keep comment terminators out of the comment */
    for (char *x = ln; (x = strstr(x, "*/")); ) x[0] = '+';
    fprintf(f, " *   %s\n", ln);
  }
  free(cin);
  fputs(" */\n", f);
  fprintf(f, "static int %s_s%d(%s_plan *dtl_plan", o->prefix, s->index, o->prefix);
  for (int t = 0; t < p->ntensors; t++)
    cg_tensor_param(f, p, t);
  fputs(") {\n", f);
  fprintf(f, "  dtl_ctx *dtl_ctx = dtl_plan->ctx;\n  const int64_t *dtl_coords = dtl_ctx->coords;\n  (void)dtl_coords;\n");
  for (int t = 0; t < p->ntensors; t++) fprintf(f, "  (void)%s;\n", cg_tensor(p, t));
  fprintf(f, "  %s_s%d_args dtl_args = {.plan = dtl_plan};\n  (void)dtl_args;\n", o->prefix, s->index);
  declare_params(f, p, "dtl_plan->p", 2);
  st g = {.f = f, .lp = lp, .ls = ls, .o = o, .ind = 2, .slot0 = *slot, .cu = cu, .decl = decl};
  st_alloc(&g);
  g.kdepth = ls->kernel_depth;
  collect_sparse(&g, asg->rhs, asg->rhs);
  /* axpy's scalar is computed on the host: when it reads a tensor (device memory) the loops
   * become a kernel of their own instead */
  if (o->cuda && g.kdepth >= 0 && ls->loops[g.kdepth]->kernel == KERNEL_AXPY && count_access(asg->rhs) > 1)
    g.kdepth = -1;
  /* per tensor: the buffer the loops read or write and its layout */
  for (int q = 0; q < ls->ncomm; q++) {
    const lw_comm *c = &ls->comm[q];
    int t = c->tensor;
    const char *n = cg_tensor(p, t);
    bool snap = !c->output && t == asg->lhs_tensor;
    char nm[256];
    snprintf(nm, sizeof nm, "%s%s", snap ? "in_" : "", n);
    const char *ct = cg_ctype(p->tensors[t].type);
    g.comm_slot[q] = (*slot);
    *slot += 2;
    if (lw_sparse(p, t) && c->output) {
      const fe_tensor *ft = &p->tensors[t];
      line(&g, "dtl_coo *dtl_%s_coo = &dtl_plan->co[%d]; /* the entries this rank produces */", n, g.comm_slot[q]);
      line(&g, "dtl_%s_coo->type = %s, dtl_%s_coo->order = %d, dtl_%s_coo->n = 0;", n, cg_dtltype(ft->type), n, ft->order, n);
      line(&g, "dtl_box dtl_%s_box = dtl_plan->own[%d];\n  (void)dtl_%s_box;", n, t, n);
      continue;
    }
    if (lw_sparse(p, t)) {
      int ord = c->order + 1;
      line(&g, "const dtl_sparse *dtl_%s = NULL;", n);
      line(&g, "int64_t dtl_%s_lo[%d] = {0}, dtl_%s_ext[%d] = {0};", n, ord, n, ord);
      line(&g, "const int64_t *dtl_%s_pos[%d] = {0}, *dtl_%s_crd[%d] = {0};", n, ord, n, ord);
      line(&g, "const %s *dtl_%s_vals = NULL;", ct, n);
      line(&g, "(void)dtl_%s, (void)dtl_%s_lo, (void)dtl_%s_ext, (void)dtl_%s_pos, (void)dtl_%s_crd, (void)dtl_%s_vals;", n, n, n, n, n, n);
      continue;
    }
    line(&g, "%s *dtl_%s = NULL;", ct, nm);
    line(&g, "int64_t dtl_%s_lo[%d] = {0}, dtl_%s_st[%d] = {0}, dtl_%s_vol = 0;", nm, c->order + 1, nm, c->order + 1, nm);
    line(&g, "dtl_box dtl_%s_box = dtl_plan->own[%d];", nm, t);
    line(&g, "(void)dtl_%s_lo, (void)dtl_%s_st, (void)dtl_%s_vol, (void)dtl_%s_box;", nm, nm, nm, nm);
    bool ov = overlapped(ls, c) || (c->alt && overlapped(ls, c->alt));
    if (ov) {
      line(&g, "int dtl_%s_cur = 0;\n  (void)dtl_%s_cur;", nm, nm);
      line(&g, "%s *dtl_%s_req = NULL; /* the next step's data, in flight */", o->cuda ? "dtl_cu_request" : "dtl_request", nm);
      line(&g, "dtl_box dtl_%s_nbox = dtl_%s_box;", nm, nm);
      line(&g, "int64_t dtl_%s_nvol = 0;", nm);
      line(&g, "%s *dtl_%s_nbuf = NULL;", ct, nm);
    }
  }
  if (ls->lhs_on_rhs) {
    const char *n = cg_tensor(p, asg->lhs_tensor);
    const char *ct = cg_ctype(p->tensors[asg->lhs_tensor].type);
    line(&g, "/* the output is also read: read the values it had before this statement */");
    line(&g, "const int64_t dtl_snap_vol = dtl_box_volume(&dtl_plan->own[%d]);", asg->lhs_tensor);
    line(&g, "%s *dtl_snap = dtl_reserve_(dtl_plan, %d, (size_t)(dtl_snap_vol > 0 ? dtl_snap_vol : 1) * sizeof(%s));", ct, (*slot)++, ct);
    line(&g, "if (!dtl_snap) return dtl_fail(dtl_ctx, \"out of memory\");");
    if (o->cuda)
      line(&g, "if (dtl_snap_vol > 0 && dtl_cu_memcpy(dtl_ctx, dtl_snap, %s, (size_t)dtl_snap_vol * sizeof(%s))) return 1;", n, ct);
    else
      line(&g, "if (dtl_snap_vol > 0) memcpy(dtl_snap, %s, (size_t)dtl_snap_vol * sizeof(%s));", n, ct);
  }
  for (int w = 0; w < ls->nwhere; w++) {
    const cin_node *pr = ls->where[w]->producer;
    const char *wn = s->work[ls->where[w]->workspace - p->ntensors].name;
    const char *ct = cg_ctype(p->tensors[asg->lhs_tensor].type);
    nctx nc = {lp, ls, false};
    MBUF(ext);
    FILE *em = mopen(&ext);
    psym(em, s->vars[pr->var].extent, &nc);
    fclose(em);
    line(&g, "/* precompute's workspace %s, one element per iteration of %s */", wn, s->vars[pr->var].name);
    line(&g, "%s *dtl_w_%s = dtl_reserve_(dtl_plan, %d, (size_t)(%s > 0 ? %s : 1) * sizeof(%s));", ct, wn, (*slot)++, ext, ext, ct);
    line(&g, "if (!dtl_w_%s) return dtl_fail(dtl_ctx, \"out of memory for workspace %s\");", wn, wn);
  }
  if (!asg->accumulate && lw_sparse(p, asg->lhs_tensor)) {
    const fe_tensor *ft = &p->tensors[asg->lhs_tensor];
    const char *n = cg_tensor(p, asg->lhs_tensor);
    char lv[256] = "";
    for (int x = 0; x < ft->order; x++) {
      strcat(lv, x ? ", " : "");
      strcat(lv, ft->formats[x] == FE_COMPRESSED ? "DTL_LEVEL_COMPRESSED" : "DTL_LEVEL_DENSE");
    }
    line(&g, "/* '=': the output starts with no entries and gains every nonzero the loops produce */");
    line(&g, "{ static const dtl_level dtl__lv[] = {%s};", lv);
    line(&g, "  dtl_sparse_free(%s);", n);
    line(&g, "  if (dtl_sparse_empty(%s, %s, %d, dtl__lv, &dtl_plan->own[%d])) return dtl_fail(dtl_ctx, \"out of memory for %s\"); }", n,
         cg_dtltype(ft->type), ft->order, asg->lhs_tensor, ft->name);
  } else if (!asg->accumulate) {
    line(&g, "/* '=': the output starts from zero and every iteration adds to it */");
    if (o->cuda)
      line(&g, "if (dtl_cu_zero(dtl_ctx, %s, %s, dtl_box_volume(&dtl_plan->own[%d]))) return 1;",
           cg_dtltype(p->tensors[asg->lhs_tensor].type), cg_tensor(p, asg->lhs_tensor), asg->lhs_tensor);
    else
      line(&g, "dtl_zero(%s, %s, dtl_box_volume(&dtl_plan->own[%d]));", cg_dtltype(p->tensors[asg->lhs_tensor].type),
           cg_tensor(p, asg->lhs_tensor), asg->lhs_tensor);
  }
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].pattern == PAT_LOCAL) emit_view(&g, &ls->comm[q]);
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].depth == -1) emit_comm_in(&g, q);
  emit_level(&g, 0);
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].depth == -1) emit_comm_out(&g, q);
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].output && ls->comm[q].pattern == PAT_LOCAL && lw_sparse(p, ls->comm[q].tensor))
      line(&g, "if (dtl_sparse_merge(dtl_ctx, %s, dtl_%s_coo)) return 1; /* this rank's block gains its entries */",
           cg_tensor(p, ls->comm[q].tensor), cg_tensor(p, ls->comm[q].tensor));
  fputs("  return 0;\n}\n\n", f);
}

/* ---- the plan object, library API ------------------------------------------------------------- */
static void emit_header(FILE *h, const lw_program *lp, const cg_options *o) {
  const fe_program *p = lp->ir->ast;
  /* the guard spells the prefix as it is (upper-casing would make a.h and A.h one guard) */
  char guard[512];
  snprintf(guard, sizeof guard, "DTL_GENERATED_%s_H", o->prefix);
  fprintf(h, "/* %s.h -- generated by distalc " PACKAGE_VERSION " from %s.  Do not edit. */\n", o->prefix, o->source_name);
  fprintf(h, "#ifndef %s\n#define %s\n\n#include <mpi.h>\n#include <stdint.h>\n%s\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n", guard, guard,
          cg_any_sparse(p) ? "#include <distal/runtime.h> /* dtl_sparse */\n" : "");
  fprintf(h, "typedef struct %s_plan %s_plan;\n", o->prefix, o->prefix);
  /* The fields are the params' own names (section 7); a macro of the same name from a header
   * included before this one must not rewrite them, so each is saved and restored around the
   * struct.  Names that cannot be fields (keywords, reserved identifiers) are rejected by sema. */
  if (p->nparams) fputs("/* (the pragmas keep macros that share a param's name out of the struct) */\n", h);
  for (int i = 0; i < p->nparams; i++)
    fprintf(h, "#pragma push_macro(\"%s\")\n#undef %s\n", p->params[i].name, p->params[i].name);
  fputs("typedef struct {", h);
  for (int i = 0; i < p->nparams; i++) fprintf(h, "%s%s", i ? ", " : " int64_t ", p->params[i].name);
  if (!p->nparams) fputs(" int64_t unused_", h);
  fprintf(h, "; } %s_params; /* one field per param */\n", o->prefix);
  for (int i = p->nparams - 1; i >= 0; i--) fprintf(h, "#pragma pop_macro(\"%s\")\n", p->params[i].name);
  fputs("\n", h);
  fprintf(h, "/* declared defaults; -1 where none (grid params: derived from the communicator) */\n");
  fprintf(h, "void %s_params_default(%s_params *p);\n", o->prefix, o->prefix);
  fprintf(h, "/* Collective over comm.  On failure returns nonzero and *plan still holds an object\n"
             " * for %s_error and %s_plan_destroy. */\n", o->prefix, o->prefix);
  fprintf(h, "int %s_plan_create(MPI_Comm comm, const %s_params *p, %s_plan **plan);\n", o->prefix, o->prefix, o->prefix);
  fprintf(h, "int %s_plan_destroy(%s_plan **plan); /* collective */\n", o->prefix, o->prefix);
  fprintf(h, "/* This rank's block of each tensor: global offset and extent per dim; returns its\n"
             " * element count (0: this rank holds none).  Blocks are row-major and contiguous. */\n");
  for (int t = 0; t < p->ntensors; t++)
    fprintf(h, "int64_t %s_%s_block(const %s_plan *plan, int64_t offset[], int64_t extent[]);\n", o->prefix,
            p->tensors[t].name, o->prefix);
  fprintf(h, "/* Collective.  Move a tensor between the application's layout, where this rank holds\n"
             " * the box [lo, hi) (row-major; boxes of different ranks do not overlap, e.g. row\n"
             " * blocks), and this rank's block of the kernel's distribution. */\n");
  for (int t = 0; t < p->ntensors; t++) {
    if (lw_sparse(p, t)) {
      const char *ct = cg_ctype(p->tensors[t].type), *n = p->tensors[t].name;
      fprintf(h, "/* Sparse %s: every rank passes any n entries (global coordinates, n x %d, and values);\n"
                 " * *block becomes this rank's piece (release it with dtl_sparse_free). */\n", n, p->tensors[t].order);
      fprintf(h, "int %s_%s_import(%s_plan *plan, int64_t n, const int64_t *coords, const %s *vals, dtl_sparse *block);\n",
              o->prefix, n, o->prefix, ct);
      continue;
    }
    const char *ct = cg_ctype(p->tensors[t].type), *n = p->tensors[t].name;
    fprintf(h, "int %s_%s_import(%s_plan *plan, const int64_t lo[], const int64_t hi[], const %s *data, %s *block);\n",
            o->prefix, n, o->prefix, ct, ct);
    fprintf(h, "int %s_%s_export(%s_plan *plan, const %s *block, const int64_t lo[], const int64_t hi[], %s *data);\n",
            o->prefix, n, o->prefix, ct, ct);
  }
  if (o->cuda)
    fprintf(h, "/* Collective.  Tensors in declaration order, as this rank's blocks in the memory of the\n"
               " * current GPU (device pointers; so are the data and blocks of import and export).\n"
               " * plan_create uses the current device (dtl_cuda_select_device picks one per rank);\n"
               " * compute returns when the results are in place. */\n");
  else
    fprintf(h, "/* Collective.  Tensors in declaration order, as this rank's blocks.%s */\n",
            cg_any_sparse(p) ? "  A sparse tensor is\n * a dtl_sparse piece whose box is exactly this rank's block (its _block query), built\n * with dtl_sparse_from_coo; compute fails on every rank when one passes another box" : "");
  fprintf(h, "int %s_compute(%s_plan *plan", o->prefix, o->prefix);
  for (int t = 0; t < p->ntensors; t++)
    cg_tensor_param(h, p, t);
  fputs(");\n", h);
  fprintf(h, "const char *%s_error(const %s_plan *plan); /* message of the last failure */\n", o->prefix, o->prefix);
  fputs("\n#ifdef __cplusplus\n}\n#endif\n#endif\n", h);
}

static int count_slots(const lw_program *lp) {
  int n = 0;
  for (int i = 0; i < lp->nstmts; i++) {
    for (int q = 0; q < lp->stmts[i].ncomm; q++) n += 2;
    n += lp->stmts[i].lhs_on_rhs;
    n += lp->stmts[i].nwhere;
  }
  return n + 1;
}

static void emit_plan(FILE *c, const lw_program *lp, const cg_options *o) {
  const fe_program *p = lp->ir->ast;
  const char *P = o->prefix;
  int nslots = count_slots(lp);
  int np1 = p->nparams ? p->nparams : 1;
  /* Generated code reads and writes the params struct as an array of its int64_t fields, in
   * declaration order, so that it never spells a field's name (which may be a macro's). */
  fprintf(c, "_Static_assert(sizeof(%s_params) == %d * sizeof(int64_t), \"the params struct is an array of int64_t\");\n\n", P, np1);
  fprintf(c, "struct %s_plan {\n  dtl_ctx *ctx;\n  int64_t p[%d]; /* the params, in declaration order */\n  dtl_dist dist[%d];\n  dtl_box own[%d];\n"
             "  void *buf[%d];   /* communication buffers, reused across calls */\n  size_t cap[%d];\n  char err[512];\n",
          P, np1, p->ntensors + 1, p->ntensors + 1, nslots, nslots);
  if (cg_any_sparse(p))
    fprintf(c, "  dtl_sparse sp[%d]; /* fetched sparse boxes, by buffer slot */\n  dtl_coo co[%d]; /* entries of sparse results */\n", nslots,
            nslots);
  fputs("};\n\n", c);
  if (o->cuda)
    fprintf(c, "/* device buffers; a buffer that grows is freed once the device is done with it */\n"
               "static inline void *dtl_reserve_(%s_plan *plan, int slot, size_t bytes) {\n"
               "  if (bytes == 0) bytes = 1;\n"
               "  if (plan->cap[slot] < bytes) {\n"
               "    if (plan->buf[slot] && dtl_cu_sync(plan->ctx)) return NULL;\n"
               "    dtl_cu_free(plan->buf[slot]);\n"
               "    plan->buf[slot] = dtl_cu_malloc(bytes);\n"
               "    plan->cap[slot] = plan->buf[slot] ? bytes : 0;\n  }\n  return plan->buf[slot];\n}\n\n", P);
  else
    fprintf(c, "static inline void *dtl_reserve_(%s_plan *plan, int slot, size_t bytes) {\n"
               "  if (bytes == 0) bytes = 1;\n"
               "  if (plan->cap[slot] < bytes) {\n"
               "    void *b = realloc(plan->buf[slot], bytes);\n"
               "    if (!b) return NULL;\n"
               "    plan->buf[slot] = b, plan->cap[slot] = bytes;\n  }\n  return plan->buf[slot];\n}\n\n", P);
  fputs("/* row-major layout of a buffer over a box: origin and strides */\n"
        "static inline void dtl_layout_(const dtl_box *b, int64_t *lo, int64_t *st) {\n"
        "  int64_t s = 1;\n"
        "  for (int d = b->nd - 1; d >= 0; d--) {\n"
        "    lo[d] = b->lo[d];\n    st[d] = s;\n    s *= b->hi[d] > b->lo[d] ? b->hi[d] - b->lo[d] : 0;\n  }\n}\n\n", c);
  /* params */
  fprintf(c, "void %s_params_default(%s_params *p) {\n  static const int64_t dtl_d[%d] = {", P, P, np1);
  for (int i = 0; i < p->nparams; i++)
    fprintf(c, "%s%lld", i ? ", " : "", (long long)(p->params[i].has_default ? p->params[i].value : -1));
  if (!p->nparams) fputs("0", c);
  fputs("};\n  memcpy(p, dtl_d, sizeof dtl_d);\n}\n\n", c);
  /* plan_create */
  fprintf(c, "int %s_plan_create(MPI_Comm dtl_comm, const %s_params *dtl_params, %s_plan **dtl_out) {\n", P, P, P);
  fprintf(c, "  %s_plan *dtl_plan = calloc(1, sizeof *dtl_plan);\n  *dtl_out = dtl_plan;\n  if (!dtl_plan) return 1;\n", P);
  fprintf(c, "  %s_params dtl_given;\n  if (dtl_params) dtl_given = *dtl_params;\n  else %s_params_default(&dtl_given);\n"
             "  int64_t dtl_prm[%d];\n  memcpy(dtl_prm, &dtl_given, sizeof dtl_prm);\n", P, P, np1);
  fputs("  int dtl_size;\n  if (MPI_Comm_size(dtl_comm, &dtl_size) != MPI_SUCCESS) {\n    snprintf(dtl_plan->err, sizeof dtl_plan->err, \"invalid communicator\");\n    return 1;\n  }\n", c);
  const fe_machine *M = lp->ir->machine >= 0 ? &p->machines[lp->ir->machine] : NULL;
  for (int i = 0; i < p->nparams; i++) {
    if (p->params[i].is_grid) continue;
    fprintf(c, "  if (dtl_prm[%d] <= 0) {\n    snprintf(dtl_plan->err, sizeof dtl_plan->err, \"param %s %s\");\n    return 1;\n  }\n",
            i, p->params[i].name,
            p->params[i].has_default ? "must be positive" : "has no value and no default");
  }
  /* grid params: solved from the communicator size */
  fputs("  {\n", c);
  if (M) {
    /* every level's dims, outer first; a hierarchical machine solves its inner levels
     * from the ranks per node and level 0 from the node count */
    int nd = 0, n0 = M->levels[0].ndims;
    const fe_size *all[LW_MAX_DIMS];
    for (int l = 0; l < M->nlevels; l++)
      for (int d = 0; d < M->levels[l].ndims && nd < LW_MAX_DIMS; d++) all[nd++] = &M->levels[l].dims[d];
    fprintf(c, "    int param[%d] = {", nd);
    for (int d = 0; d < nd; d++) fprintf(c, "%s%d", d ? ", " : "", all[d]->is_param ? all[d]->param : -1);
    fprintf(c, "};\n    int64_t lit[%d] = {", nd);
    for (int d = 0; d < nd; d++) fprintf(c, "%s%lld", d ? ", " : "", (long long)(all[d]->is_param ? 0 : all[d]->value));
    fprintf(c, "};\n    int64_t values[%d] = {", p->nparams + 1);
    for (int i = 0; i < p->nparams; i++) fprintf(c, "%sdtl_prm[%d]", i ? ", " : "", i);
    if (!p->nparams) fputs("0", c);
    fprintf(c, "};\n    static const char *const names[%d] = {", p->nparams + 1);
    for (int i = 0; i < p->nparams; i++) fprintf(c, "%s\"%s\"", i ? ", " : "", p->params[i].name);
    if (!p->nparams) fputs("\"\"", c);
    fputs("};\n", c);
    fprintf(c, "    for (int i = 0; i < %d; i++)\n      if (param[i] >= 0 && values[param[i]] <= 0) values[param[i]] = -1;\n", nd);
    if (M->nlevels == 1) {
      fprintf(c, "    if (dtl_solve_grid(dtl_size, %d, param, lit, values, names, dtl_plan->err, sizeof dtl_plan->err)) return 1;\n", nd);
    } else {
      fputs("    int dtl_node, dtl_nnodes, dtl_local, dtl_per_node;\n"
            "    if (dtl_node_of(dtl_comm, &dtl_node, &dtl_nnodes, &dtl_local, &dtl_per_node, dtl_plan->err, sizeof dtl_plan->err)) return 1;\n", c);
      bool lit_inner = true;
      int64_t inner = 1;
      for (int d = n0; d < nd; d++) lit_inner &= !all[d]->is_param, inner *= all[d]->is_param ? 1 : all[d]->value;
      if (lit_inner)
        fprintf(c, "    if (dtl_per_node != %lld) {\n"
                   "      snprintf(dtl_plan->err, sizeof dtl_plan->err, \"the inner levels of the machine need %lld ranks per node, but nodes have %%d\", dtl_per_node);\n"
                   "      return 1;\n    }\n", (long long)inner, (long long)inner);
      fprintf(c, "    if (dtl_solve_grid(dtl_per_node, %d, param + %d, lit + %d, values, names, dtl_plan->err, sizeof dtl_plan->err)) {\n"
                 "      char dtl_m[512];\n      snprintf(dtl_m, sizeof dtl_m, \"%%s\", dtl_plan->err);\n"
                 "      snprintf(dtl_plan->err, sizeof dtl_plan->err, \"the ranks of one node do not fit the inner levels: %%.400s\", dtl_m);\n"
                 "      return 1;\n    }\n",
              nd - n0, n0, n0);
      fprintf(c, "    if (dtl_solve_grid(dtl_nnodes, %d, param, lit, values, names, dtl_plan->err, sizeof dtl_plan->err)) {\n"
                 "      char dtl_m[512];\n      snprintf(dtl_m, sizeof dtl_m, \"%%s\", dtl_plan->err);\n"
                 "      snprintf(dtl_plan->err, sizeof dtl_plan->err, \"the nodes do not fit level 0 (counting nodes, not ranks): %%.400s\", dtl_m);\n"
                 "      return 1;\n    }\n", n0);
    }
    for (int i = 0; i < p->nparams; i++)
      if (p->params[i].is_grid) fprintf(c, "    dtl_prm[%d] = values[%d];\n", i, i);
    fprintf(c, "    int64_t dims[%d] = {", nd);
    for (int d = 0; d < nd; d++) {
      fputs(d ? ", " : "", c);
      if (all[d]->is_param) fprintf(c, "dtl_prm[%d]", all[d]->param);
      else fprintf(c, "%lld", (long long)all[d]->value);
    }
    fputs("};\n", c);
    fprintf(c, "    if (dtl_ctx_create_hier(dtl_comm, %d, dims, %d, %s, &dtl_plan->ctx, dtl_plan->err, sizeof dtl_plan->err)) return 1;\n",
            nd, nd - n0, o->debug ? "true" : "false");
  } else {
    fputs("    int64_t dims[1] = {dtl_size};\n", c);
    fprintf(c, "    if (dtl_ctx_create(dtl_comm, 1, dims, %s, &dtl_plan->ctx, dtl_plan->err, sizeof dtl_plan->err)) return 1;\n",
            o->debug ? "true" : "false");
  }
  fputs("  }\n  memcpy(dtl_plan->p, dtl_prm, sizeof dtl_prm);\n", c);
  declare_params(c, p, "dtl_prm", 2);
  for (int t = 0; t < p->ntensors; t++) {
    const fe_tensor *ft = &p->tensors[t];
    const lw_owner *ow = &lp->owner[t];
    fprintf(c, "  /* %s: ", ft->name);
    if (!ft->has_dist) fputs("replicated on every rank */\n", c);
    else {
      const fe_dist_level *L = &ft->dist.levels[0];
      fputs(p->machines[ft->dist.machine].name, c);
      fputc('(', c);
      for (int x = 0; x < L->nx; x++) fprintf(c, "%s%s", x ? "," : "", L->x[x]);
      fputs(" -> ", c);
      for (int y = 0; y < L->ny; y++) {
        if (y) fputc(',', c);
        if (L->y[y].kind == FE_Y_STAR) fputc('*', c);
        else if (L->y[y].kind == FE_Y_FIXED) fprintf(c, "%lld", (long long)L->y[y].fixed);
        else fputs(L->y[y].name, c);
      }
      fputs(") */\n", c);
    }
    fprintf(c, "  dtl_plan->dist[%d] = (dtl_dist){.order = %d, .ngrid = %d, .replicated_everywhere = %s};\n", t,
            ft->order, lp->ndims, ow->everywhere ? "true" : "false");
    for (int x = 0; x < ft->order; x++) {
      fprintf(c, "  dtl_plan->dist[%d].extent[%d] = ", t, x);
      cg_size(c, p, &ft->dims[x]);
      fputs(";\n", c);
    }
    for (int g2 = 0; g2 < lp->ndims && !ow->everywhere; g2++) {
      static const char *k[] = {"DTL_DIM_PART", "DTL_DIM_FIXED", "DTL_DIM_STAR"};
      fprintf(c, "  dtl_plan->dist[%d].kind[%d] = %s, dtl_plan->dist[%d].tdim[%d] = %d, dtl_plan->dist[%d].fixed[%d] = %lld;\n", t, g2,
              k[ow->kind[g2]], t, g2, ow->kind[g2] == OWN_PART ? ow->tdim[g2] : 0, t, g2, (long long)ow->fixed[g2]);
    }
    fprintf(c, "  if (dtl_dist_validate(dtl_plan->ctx, &dtl_plan->dist[%d], \"%s\")) {\n"
               "    snprintf(dtl_plan->err, sizeof dtl_plan->err, \"%%s\", dtl_ctx_error(dtl_plan->ctx));\n    return 1;\n  }\n", t, ft->name);
    fprintf(c, "  dtl_dist_block(dtl_plan->ctx, &dtl_plan->dist[%d], dtl_plan->ctx->coords, &dtl_plan->own[%d]);\n", t, t);
  }
  if (o->cuda) {
    /* NCCL communicators for the sub-communicators that broadcasts and reductions use */
    unsigned masks[256];
    int nmasks = 0;
    for (int i = 0; i < lp->nstmts; i++)
      for (int q = 0; q < lp->stmts[i].ncomm; q++)
        for (const lw_comm *cm = &lp->stmts[i].comm[q]; cm; cm = cm->alt)
          if ((cm->pattern == PAT_BCAST || cm->pattern == PAT_REDUCE) && cm->mask) {
            bool seen = false;
            for (int k = 0; k < nmasks; k++) seen |= masks[k] == cm->mask;
            if (!seen && nmasks < 256) masks[nmasks++] = cm->mask;
          }
    fputs("  /* device state on the current GPU: streams, cuBLAS, NCCL communicators */\n", c);
    fprintf(c, "  static const unsigned dtl_masks[%d] = {", nmasks + 1);
    for (int k = 0; k < nmasks; k++) fprintf(c, "%s0x%xu", k ? ", " : "", masks[k]);
    if (!nmasks) fputs("0", c);
    fputs("};\n", c);
    fprintf(c, "  if (dtl_cu_attach(dtl_plan->ctx, %d, dtl_masks)) {\n"
               "    snprintf(dtl_plan->err, sizeof dtl_plan->err, \"%%s\", dtl_ctx_error(dtl_plan->ctx));\n    return 1;\n  }\n", nmasks);
  }
  fputs("  return 0;\n}\n\n", c);
  if (o->cuda)
    fprintf(c, "int %s_plan_destroy(%s_plan **plan) {\n  if (!plan || !*plan) return 0;\n"
               "  if ((*plan)->ctx && (*plan)->ctx->dev) dtl_cu_sync((*plan)->ctx);\n"
               "  for (int i = 0; i < %d; i++) dtl_cu_free((*plan)->buf[i]);\n"
               "  if ((*plan)->ctx) dtl_ctx_destroy(&(*plan)->ctx);\n  free(*plan);\n  *plan = NULL;\n  return 0;\n}\n\n",
            P, P, nslots);
  else
  fprintf(c, "int %s_plan_destroy(%s_plan **plan) {\n  if (!plan || !*plan) return 0;\n"
             "  for (int i = 0; i < %d; i++) free((*plan)->buf[i]);\n%s"
             "  if ((*plan)->ctx) dtl_ctx_destroy(&(*plan)->ctx);\n  free(*plan);\n  *plan = NULL;\n  return 0;\n}\n\n",
          P, P, nslots, cg_any_sparse(p) ? "  for (int i = 0; i < (int)(sizeof (*plan)->sp / sizeof (*plan)->sp[0]); i++) dtl_sparse_free(&(*plan)->sp[i]), dtl_coo_free(&(*plan)->co[i]);\n" : "");
  for (int t = 0; t < p->ntensors; t++) {
    fprintf(c, "int64_t %s_%s_block(const %s_plan *plan, int64_t offset[], int64_t extent[]) {\n", P, p->tensors[t].name, P);
    fprintf(c, "  if (!plan || !plan->ctx) return 0;\n  const dtl_box *b = &plan->own[%d];\n"
               "  for (int d = 0; d < b->nd; d++) {\n"
               "    if (offset) offset[d] = b->lo[d];\n"
               "    if (extent) extent[d] = b->hi[d] > b->lo[d] ? b->hi[d] - b->lo[d] : 0;\n  }\n"
               "  return dtl_box_volume(b);\n}\n\n", t);
  }
  for (int t = 0; t < p->ntensors; t++) {
    if (lw_sparse(p, t)) {
      const fe_tensor *ft = &p->tensors[t];
      fprintf(c, "int %s_%s_import(%s_plan *plan, int64_t n, const int64_t *coords, const %s *vals, dtl_sparse *block) {\n"
                 "  if (!plan || !plan->ctx || !block) return 1;\n  static const dtl_level lv[%d] = {", P, ft->name, P,
              cg_ctype(ft->type), ft->order);
      for (int x = 0; x < ft->order; x++)
        fprintf(c, "%s%s", x ? ", " : "", ft->formats[x] == FE_COMPRESSED ? "DTL_LEVEL_COMPRESSED" : "DTL_LEVEL_DENSE");
      fprintf(c, "};\n  return dtl_sparse_import(plan->ctx, &plan->dist[%d], %s, lv, &plan->own[%d], n, coords, vals, block);\n}\n\n", t,
              cg_dtltype(ft->type), t);
      continue;
    }
    const char *ct = cg_ctype(p->tensors[t].type), *n = p->tensors[t].name, *dt = cg_dtltype(p->tensors[t].type);
    fprintf(c, "int %s_%s_import(%s_plan *plan, const int64_t lo[], const int64_t hi[], const %s *data, %s *block) {\n"
               "  if (!plan || !plan->ctx) return 1;\n"
               "  return %s(plan->ctx, &plan->dist[%d], %s, lo, hi, data, block, &plan->own[%d]);\n}\n\n",
            P, n, P, ct, ct, o->cuda ? "dtl_cu_import" : "dtl_import", t, dt, t);
    fprintf(c, "int %s_%s_export(%s_plan *plan, const %s *block, const int64_t lo[], const int64_t hi[], %s *data) {\n"
               "  if (!plan || !plan->ctx) return 1;\n"
               "  return %s(plan->ctx, &plan->dist[%d], %s, block, &plan->own[%d], lo, hi, data);\n}\n\n",
            P, n, P, ct, ct, o->cuda ? "dtl_cu_export" : "dtl_export", t, dt, t);
  }
  fprintf(c, "const char *%s_error(const %s_plan *plan) {\n  if (!plan) return \"out of memory\";\n"
             "  if (plan->err[0]) return plan->err;\n  return plan->ctx ? dtl_ctx_error(plan->ctx) : \"no error\";\n}\n\n", P, P);
}

int cg_emit(FILE *h, FILE *c, FILE *cu, const lw_program *lp, const cg_options *o) {
  const fe_program *p = lp->ir->ast;
  FILE *nul = NULL;
  if (!cu) cu = nul = fopen("/dev/null", "w");
  if (!cu) return 1;
  emit_header(h, lp, o);
  fprintf(c, "/* %s.c -- generated by distalc " PACKAGE_VERSION " from %s.  Do not edit.\n", o->prefix, o->source_name);
  if (o->cuda)
    fprintf(c, " * SPMD C over MPI, NCCL and libdistal_cuda: every rank runs this code on its own blocks,\n"
               " * which live in the memory of its GPU; the local loops are kernels in %s.cu. */\n", o->prefix);
  else
    fputs(" * SPMD C over MPI and libdistal: every rank runs this code on its own blocks. */\n", c);
  fputs("#include <stdbool.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <distal/runtime.h>\n", c);
  if (o->cuda) fputs("#include <distal/cuda.h>\n", c);
  fprintf(c, "#include \"%s\"\n\n", o->header_name);
  if (o->cuda)
    fprintf(cu, "/* %s.cu -- generated by distalc " PACKAGE_VERSION " from %s.  Do not edit.\n"
                " * The CUDA kernels of %s.c: the local loops of each statement, one thread per\n"
                " * iteration of the loops mapped to threads. */\n"
                "#include <cuda_runtime.h>\n#include <stdint.h>\n#include <distal/kernel.cuh>\n\n",
            o->prefix, o->source_name, o->prefix);
  emit_plan(c, lp, o);
  int slot = 0;
  for (int i = 0; i < lp->nstmts; i++) {
    /* the statement function goes after the declarations its kernels need */
    char *body = NULL, *decl = NULL;
    size_t bl = 0, dl = 0;
    FILE *fb = open_memstream(&body, &bl), *fd = open_memstream(&decl, &dl);
    if (!fb || !fd) return 1;
    emit_stmt(fb, fd, cu, lp, &lp->stmts[i], o, &slot);
    fclose(fb);
    fclose(fd);
    fputs(decl, c);
    fputs(body, c);
    free(body);
    free(decl);
  }
  fprintf(c, "int %s_compute(%s_plan *dtl_plan", o->prefix, o->prefix);
  for (int t = 0; t < p->ntensors; t++)
    cg_tensor_param(c, p, t);
  fputs(") {\n  if (!dtl_plan || !dtl_plan->ctx) return 1;\n  dtl_plan->err[0] = 0;\n", c);
  if (cg_any_sparse(p)) {
    /* every sparse piece must be this rank's block, in the declared formats (collective) */
    fputs("  {\n    int dtl_bad = 0;\n", c);
    for (int t = 0; t < p->ntensors; t++) {
      if (!lw_sparse(p, t)) continue;
      const fe_tensor *ft = &p->tensors[t];
      const char *n = cg_tensor(p, t);
      if (cg_written(p, t)) { /* a result may start as a zeroed dtl_sparse: no entries */
        fprintf(c, "    if (%s && %s->order == 0 && !%s->vals) {\n      static const dtl_level lv[] = {", n, n, n);
        for (int x = 0; x < ft->order; x++)
          fprintf(c, "%s%s", x ? ", " : "", ft->formats[x] == FE_COMPRESSED ? "DTL_LEVEL_COMPRESSED" : "DTL_LEVEL_DENSE");
        fprintf(c, "};\n      if (dtl_sparse_empty(%s, %s, %d, lv, &dtl_plan->own[%d])) dtl_bad = dtl_fail(dtl_plan->ctx, \"out of memory\");\n    }\n",
                n, cg_dtltype(ft->type), ft->order, t);
      }
      fprintf(c, "    if (!dtl_bad && (!%s || %s->order != %d || %s->type != %s || !dtl_box_equal(&%s->box, &dtl_plan->own[%d])", n, n,
              ft->order, n, cg_dtltype(ft->type), n, t);
      for (int x = 0; x < ft->order; x++)
        fprintf(c, " || %s->level[%d] != %s", n, x, ft->formats[x] == FE_COMPRESSED ? "DTL_LEVEL_COMPRESSED" : "DTL_LEVEL_DENSE");
      fprintf(c, "))\n      dtl_bad = dtl_fail(dtl_plan->ctx, \"tensor %s: the sparse piece is not this rank's block of type %s in the "
                 "declared level formats (build it with dtl_sparse_from_coo over the box of %s_%s_block)\");\n",
              ft->name, dtl_type_name_fe(ft->type), o->prefix, ft->name);
    }
    fputs("    if (dtl_any_error(dtl_plan->ctx, dtl_bad)) return 1;\n  }\n", c);
  }
  for (int i = 0; i < lp->nstmts; i++) {
    fprintf(c, "  if (%s_s%d(dtl_plan", o->prefix, i);
    for (int t = 0; t < p->ntensors; t++) fprintf(c, ", %s", cg_tensor(p, t));
    fputs(")) return 1;\n", c);
  }
  if (o->cuda) fputs("  /* the blocks are final when compute returns */\n  if (dtl_cu_sync(dtl_plan->ctx)) return 1;\n", c);
  fputs("  return 0;\n}\n", c);
  if (o->main) cg_emit_driver(c, lp, o);
  int bad = ferror(c) || ferror(h) || ferror(cu);
  if (nul) fclose(nul);
  return bad;
}
