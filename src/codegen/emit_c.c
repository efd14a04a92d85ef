/* emit_c.c -- the C printer: spells the SPMD program (spmd.h) as readable C11 + MPI over
 * libdistal.
 *
 * Per statement, one static function: loops in the order of the concrete index notation,
 * each with a comment naming the schedule command it came from; at each communicate point
 * the operation the SPMD program names; below the deepest one, local loops over the buffers
 * (global coordinate minus the buffer's box origin) or a leaf kernel call.  The printer
 * decides nothing: every bound, binding, guard, operation and flag comes from the program. */
#include "config.h"
#include "codegen/cg_internal.h"

#include <math.h>
#include <inttypes.h>
#include <stdarg.h>
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
/* the prefix of the statement functions' names */
static const char *fnp(const cg_options *o) { return o->fn_prefix ? o->fn_prefix : o->prefix; }

static const char *prefixed(const char *prefix, const char *name) {
  size_t n = strlen(prefix) + strlen(name) + 1;
  char *r = ir_alloc(n);
  snprintf(r, n, "%s%s", prefix, name);
  return r;
}
const char *cg_param(const sp_program *sp, int i) { return prefixed("p_", sp->params[i].name); }
const char *cg_param_ctype(const sp_program *sp, int i) { return sp->params[i].is_float ? "double" : "int64_t"; }
const char *cg_var(const char *name) { return prefixed("v_", name); }
const char *cg_tensor(const sp_program *sp, int t) {
  char pre[32];
  snprintf(pre, sizeof pre, "t%d_", t);
  return prefixed(pre, sp->tensors[t].name);
}
const char *cg_vname(const sp_program *sp, int v) {
  const sp_var *x = &sp->vars[v];
  return x->kind == SV_LOCAL ? prefixed("dtl_l_", x->name) : cg_var(x->name);
}

const char *cg_ctype(fe_type t) {
  static const char *n[] = {"double", "float", "int32_t", "int64_t"};
  return n[t];
}
const char *cg_dtltype(fe_type t) {
  static const char *n[] = {"DTL_DOUBLE", "DTL_FLOAT", "DTL_INT32", "DTL_INT64"};
  return n[t];
}
const char *cg_typename(fe_type t) {
  static const char *n[] = {"double", "float", "int32", "int64"};
  return n[t];
}

/* ", const double *A" or, for a sparse tensor, ", const dtl_sparse *A" */
void cg_tensor_param(FILE *f, const sp_program *sp, int t) {
  const sp_tensor *x = &sp->tensors[t];
  if (x->sparse) fprintf(f, ", %sdtl_sparse *%s", x->written ? "" : "const ", cg_tensor(sp, t));
  else fprintf(f, ", %s%s *%s", x->written ? "" : "const ", cg_ctype(x->type), cg_tensor(sp, t));
}

/* ---- symbolic values as C ---------------------------------------------------------------- */
typedef struct {
  const sp_program *sp;
  bool in_callback; /* inside a box function: loop values come from the argument vector */
} nctx;

static void namer(FILE *f, const sym *a, void *vc) {
  const nctx *c = vc;
  switch (a->kind) {
  case SYM_PARAM: fputs(cg_param(c->sp, a->id), f); break;
  case SYM_COORD: fprintf(f, "dtl_coords[%d]", a->id); break;
  case SYM_VAR:
    if (c->in_callback) fprintf(f, "dtl_a->v[%d]", c->sp->vars[a->id].arg);
    else fputs(cg_vname(c->sp, a->id), f);
    break;
  default: break;
  }
}

void cg_sym(FILE *f, const sp_program *sp, const sym *e, bool in_callback) {
  nctx c = {sp, in_callback};
  sym_print(f, e, namer, &c);
}

/* ---- expressions ------------------------------------------------------------------------- */
static int prec_of(sp_expr_kind k) {
  return k == SE_ADD || k == SE_SUB ? 1 : k == SE_MUL || k == SE_DIV ? 2 : k == SE_CALL ? 4 : 3;
}

/* The C type of an expression in a statement of type t, as C's usual arithmetic conversions
 * give it (int32_t stands for every narrower integer): an element has its tensor's type (a
 * workspace the statement's), literals, params and calls the statement's. */
static fe_type etype(const sp_program *sp, const sp_expr *e, fe_type t) {
  switch (e->kind) {
  case SE_ACCESS: return e->work < 0 && e->tensor >= 0 ? sp->tensors[e->tensor].type : t;
  case SE_NUM:
  case SE_PARAM:
  case SE_CALL: return t;
  case SE_NEG: return etype(sp, e->a, t);
  default: {
    static const int rank[] = {[FE_INT32] = 0, [FE_INT64] = 1, [FE_FLOAT] = 2, [FE_DOUBLE] = 3};
    fe_type x = etype(sp, e->a, t), y = etype(sp, e->b, t);
    return rank[x] >= rank[y] ? x : y;
  }
  }
}

/* A function call in a statement of type t (README, "Choices"): it computes in t.  Floating
 * types call the C library's function of that type, each argument cast to t where its own
 * type differs (so that C++ overloads, under nvcc, pick the same one); integer types have abs,
 * min and max only (sema), through llabs and the runtime's dtl_min/dtl_max on int64, which
 * evaluate each argument once (a floating argument cast to int64_t first, truncating), the
 * result cast back to int32_t for int32. */
static void pexpr(FILE *f, const sp_program *sp, const sp_expr *e, fe_type t, cg_access_fn acc, void *ctx, int prec);
static void pcall(FILE *f, const sp_program *sp, const sp_expr *e, fe_type t, cg_access_fn acc, void *ctx) {
  static const char *const dbl[FE_F_COUNT] = {
      [FE_F_SQRT] = "sqrt", [FE_F_EXP] = "exp", [FE_F_LOG] = "log",   [FE_F_ABS] = "fabs",
      [FE_F_ERF] = "erf",   [FE_F_POW] = "pow", [FE_F_MIN] = "fmin", [FE_F_MAX] = "fmax"};
  static const char *const integer[FE_F_COUNT] = {[FE_F_ABS] = "llabs", [FE_F_MIN] = "dtl_min", [FE_F_MAX] = "dtl_max"};
  bool is_int = t == FE_INT32 || t == FE_INT64;
  const sp_expr *args[2] = {e->a, e->b};
  if (t == FE_INT32) fputs("(int32_t)", f);
  fprintf(f, "%s%s(", is_int ? integer[e->func] : dbl[e->func], t == FE_FLOAT ? "f" : "");
  for (int k = 0; k < 2 && args[k]; k++) {
    if (k) fputs(", ", f);
    /* integer statements compute in int64: a floating argument is converted (truncated) first */
    fe_type at = etype(sp, args[k], t);
    bool cast = is_int ? at == FE_DOUBLE || at == FE_FLOAT : at != t;
    if (cast) fprintf(f, "(%s)", is_int ? "int64_t" : cg_ctype(t));
    pexpr(f, sp, args[k], t, acc, ctx, cast ? 3 : 0);
  }
  fputc(')', f);
}

/* A literal in a statement of type t, exactly (README, "Choices"; sema checked the ranges):
 * integer types print the exact value (a floating literal truncated toward zero), double
 * the nearest double in 17 digits, float the literal rounded once to float (as C reads
 * 0.1f) in 9 digits; both read back exactly and are always floating constants (1/4 must
 * not be an integer division).  A negative value (only INT64_MIN, from the folded literal
 * -9223372036854775808) is parenthesized. */
void cg_num(FILE *f, const sp_expr *e, fe_type t) {
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

/* a structural zero's condition (spmd.h: sp_expr.zero_if): an access's position is -1, or,
 * where the code has no positions (the serial reference), its value is 0 */
static void pzero_if(FILE *f, const sp_program *sp, const sp_expr *c, fe_type t, cg_access_fn acc, void *ctx) {
  if (c->kind == SE_ABSENT) {
    const sp_expr *a = c->a;
    if (a->sparse >= 0) {
      fprintf(f, "dtl_sp%d_p%d < 0", a->sparse, a->nidx - 1);
      return;
    }
    fputc('(', f);
    acc(f, a, ctx);
    fputs(" == 0)", f);
    return;
  }
  fputc('(', f);
  pzero_if(f, sp, c->a, t, acc, ctx);
  fputs(c->kind == SE_AND ? " && " : " || ", f);
  pzero_if(f, sp, c->b, t, acc, ctx);
  fputc(')', f);
}

static void pexpr(FILE *f, const sp_program *sp, const sp_expr *e, fe_type t, cg_access_fn acc, void *ctx, int prec) {
  if (e->zero_guard) { /* zero where a sparse operand holds no entry, whatever the others hold */
    fputs("(", f);
    pzero_if(f, sp, e->zero_if, t, acc, ctx);
    fprintf(f, " ? (%s)0 : ", cg_ctype(t));
    sp_expr tmp = *e;
    tmp.zero_guard = false;
    pexpr(f, sp, &tmp, t, acc, ctx, 3);
    fputc(')', f);
    return;
  }
  if (e->nguards) {
    /* reduction placement: this term counts once, at the first iteration of the sum */
    fputs("((", f);
    for (int g = 0; g < e->nguards; g++) fprintf(f, "%s%s == 0", g ? " && " : "", cg_vname(sp, e->guards[g]));
    fputs(") ? ", f);
    sp_expr tmp = *e;
    tmp.nguards = 0;
    pexpr(f, sp, &tmp, t, acc, ctx, 3);
    fprintf(f, " : (%s)0)", cg_ctype(t));
    return;
  }
  int my = prec_of(e->kind);
  bool paren = my < prec;
  if (paren) fputc('(', f);
  switch (e->kind) {
  case SE_ACCESS: { /* an operand of another type computes in the statement's (README, "Choices"):
                     * converted to a floating statement's type, an int32 one widened in int64 */
    fe_type at = etype(sp, e, t);
    if ((t == FE_DOUBLE || t == FE_FLOAT) ? at != t : t == FE_INT64 && at == FE_INT32) fprintf(f, "(%s)", cg_ctype(t));
    acc(f, e, ctx);
    break;
  }
  case SE_NUM: cg_num(f, e, t); break;
  case SE_NEG:
    fputs("-", f);
    pexpr(f, sp, e->a, t, acc, ctx, e->a->kind == SE_NEG && !e->a->nguards ? 4 : 3); /* never "--" */
    break;
  case SE_PARAM: /* an int64_t (a floating param: double) local of every generated function and kernel */
    if (t != (sp->params[e->param].is_float ? FE_DOUBLE : FE_INT64)) fprintf(f, "(%s)", cg_ctype(t));
    fputs(cg_param(sp, e->param), f);
    break;
  case SE_CALL: pcall(f, sp, e, t, acc, ctx); break;
  case SE_LT: case SE_LE: case SE_GT: case SE_GE: case SE_EQ: case SE_NE: case SE_AND: case SE_OR: {
    /* a loop's condition: every comparison and connective parenthesized */
    static const char *const ops[] = {[SE_LT] = " < ",   [SE_LE] = " <= ", [SE_GT] = " > ",  [SE_GE] = " >= ",
                                      [SE_EQ] = " == ",  [SE_NE] = " != ", [SE_AND] = " && ", [SE_OR] = " || "};
    fputc('(', f);
    pexpr(f, sp, e->a, t, acc, ctx, 0);
    fputs(ops[e->kind], f);
    pexpr(f, sp, e->b, t, acc, ctx, 0);
    fputc(')', f);
    break;
  }
  case SE_NOT:
    fputs("!(", f);
    pexpr(f, sp, e->a, t, acc, ctx, 0);
    fputc(')', f);
    break;
  default: {
    if (e->kind == SE_DIV && (t == FE_INT32 || t == FE_INT64)) { /* defined for every divisor (runtime.h) */
      fprintf(f, "dtl_idiv%s(", t == FE_INT32 ? "32" : "64");
      pexpr(f, sp, e->a, t, acc, ctx, 0);
      fputs(", ", f);
      pexpr(f, sp, e->b, t, acc, ctx, 0);
      fputc(')', f);
      break;
    }
    const char *op = e->kind == SE_ADD ? " + " : e->kind == SE_SUB ? " - " : e->kind == SE_MUL ? " * " : " / ";
    pexpr(f, sp, e->a, t, acc, ctx, my);
    fputs(op, f);
    pexpr(f, sp, e->b, t, acc, ctx, my + 1);
  }
  }
  if (paren) fputc(')', f);
}

void cg_print_expr(FILE *f, const sp_program *sp, const sp_expr *e, fe_type t, cg_access_fn access, void *ctx) {
  pexpr(f, sp, e, t, access, ctx, 0);
}

/* A loop's condition has C's arithmetic (README, "Programs"): an operation of integer operands
 * (integer scalars, integer params, integer literals) in int64, truncating its divisions;
 * anything with a floating operand, and every function, in double. */
static bool cond_int(const sp_program *sp, const sp_expr *e) {
  switch (e->kind) {
  case SE_ACCESS: return sp->tensors[e->tensor].type == FE_INT32 || sp->tensors[e->tensor].type == FE_INT64;
  case SE_NUM: return e->is_int;
  case SE_PARAM: return !sp->params[e->param].is_float;
  case SE_NEG: return cond_int(sp, e->a);
  case SE_ADD: case SE_SUB: case SE_MUL: case SE_DIV: return cond_int(sp, e->a) && cond_int(sp, e->b);
  default: return false;
  }
}

static void pcond_val(FILE *f, const sp_program *sp, const sp_expr *e, cg_access_fn acc, void *ctx) {
  if (cond_int(sp, e)) { /* the whole subexpression in int64 */
    fputc('(', f);
    pexpr(f, sp, e, FE_INT64, acc, ctx, 0);
    fputc(')', f);
    return;
  }
  static const char *const dbl[FE_F_COUNT] = {
      [FE_F_SQRT] = "sqrt", [FE_F_EXP] = "exp", [FE_F_LOG] = "log",   [FE_F_ABS] = "fabs",
      [FE_F_ERF] = "erf",   [FE_F_POW] = "pow", [FE_F_MIN] = "fmin", [FE_F_MAX] = "fmax"};
  switch (e->kind) {
  case SE_NEG:
    fputs("(-", f);
    pcond_val(f, sp, e->a, acc, ctx);
    fputc(')', f);
    break;
  case SE_CALL:
    fprintf(f, "%s((double)", dbl[e->func]);
    pcond_val(f, sp, e->a, acc, ctx);
    if (e->b) {
      fputs(", (double)", f);
      pcond_val(f, sp, e->b, acc, ctx);
    }
    fputc(')', f);
    break;
  case SE_ADD: case SE_SUB: case SE_MUL: case SE_DIV: {
    static const char *const ops[] = {[SE_ADD] = " + ", [SE_SUB] = " - ", [SE_MUL] = " * ", [SE_DIV] = " / "};
    fputs("((double)", f);
    pcond_val(f, sp, e->a, acc, ctx);
    fprintf(f, "%s(double)", ops[e->kind]);
    pcond_val(f, sp, e->b, acc, ctx);
    fputc(')', f);
    break;
  }
  default: /* a floating scalar, literal or param */
    fputc('(', f);
    pexpr(f, sp, e, FE_DOUBLE, acc, ctx, 0);
    fputc(')', f);
  }
}

void cg_print_cond(FILE *f, const sp_program *sp, const sp_expr *e, cg_access_fn access, void *ctx) {
  switch (e->kind) {
  case SE_LT: case SE_LE: case SE_GT: case SE_GE: case SE_EQ: case SE_NE: {
    static const char *const ops[] = {[SE_LT] = " < ", [SE_LE] = " <= ", [SE_GT] = " > ", [SE_GE] = " >= ", [SE_EQ] = " == ", [SE_NE] = " != "};
    bool both = cond_int(sp, e->a) && cond_int(sp, e->b); /* else compared as doubles */
    fputs(both ? "(" : "((double)", f);
    pcond_val(f, sp, e->a, access, ctx);
    fputs(ops[e->kind], f);
    if (!both) fputs("(double)", f);
    pcond_val(f, sp, e->b, access, ctx);
    fputc(')', f);
    break;
  }
  case SE_AND: case SE_OR:
    fputc('(', f);
    cg_print_cond(f, sp, e->a, access, ctx);
    fputs(e->kind == SE_AND ? " && " : " || ", f);
    cg_print_cond(f, sp, e->b, access, ctx);
    fputc(')', f);
    break;
  case SE_NOT:
    fputs("!(", f);
    cg_print_cond(f, sp, e->a, access, ctx);
    fputc(')', f);
    break;
  default: /* (not produced: a condition is comparisons and logic) */
    pexpr(f, sp, e, FE_DOUBLE, access, ctx, 0);
  }
}

void cg_print_flops(FILE *f, const sp_program *sp) {
  fputs("0.0", f);
  for (int i = 0; i < sp->nfuncs; i++) {
    const sp_func *fn = &sp->funcs[i];
    if (!fn->flops) continue;
    fprintf(f, " + %lld.0", (long long)fn->flops);
    for (int v = 0; v < fn->nref; v++) {
      fputs(" * (double)", f);
      sym_print(f, fn->ref_ext[v], NULL, NULL);
    }
  }
}

/* params as local constants of a generated function, from the array `from`; the boundaries of
 * the balanced partitions (SYM_SPLIT prints dtl_split[id][...]) from the plan */
static void declare_splits(FILE *f, const sp_program *sp, const char *plan, int ind) {
  if (sp->nsplits)
    fprintf(f, "%*sconst int64_t *const *dtl_split = (const int64_t *const *)%s->split;\n%*s(void)dtl_split;\n", ind, "", plan, ind,
            "");
}

static void declare_params(FILE *f, const sp_program *sp, const char *from, int ind) {
  for (int i = 0; i < sp->nparams; i++)
    if (sp->params[i].is_float) /* its bits travel in the int64 slot */
      fprintf(f, "%*sconst double %s = dtl_as_double(%s[%d]);\n%*s(void)%s;\n", ind, "", cg_param(sp, i), from, i, ind, "",
              cg_param(sp, i));
    else
      fprintf(f, "%*sconst int64_t %s = %s[%d];\n%*s(void)%s;\n", ind, "", cg_param(sp, i), from, i, ind, "", cg_param(sp, i));
}

/* ---- the statement printer --------------------------------------------------------------- */
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

void cg_line(cg_st *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(g->f, "%*s", g->ind, "");
  vfprintf(g->f, fmt, ap);
  fputc('\n', g->f);
  va_end(ap);
}
#define line cg_line

/* The runtime function for an operation: dtl_NAME on the host, dtl_cu_NAME on the device
 * (same arguments). */
static const char *rt(const cg_st *g, const char *name) {
  static char b[8][64];
  static int i;
  i = (i + 1) % 8;
  snprintf(b[i], sizeof b[i], "dtl_%s%s", g->sp->cuda ? "cu_" : "", name);
  return b[i];
}

/* a symbolic value as text (valid until the next call's third successor) */
static const char *S(const cg_st *g, const sym *e) {
  static char *b[4];
  static int i;
  i = (i + 1) % 4;
  free(b[i]);
  b[i] = NULL; /* cg_sym may leave for the recovery point (no memory) before fclose sets it */
  size_t n;
  FILE *m = open_memstream(&b[i], &n);
  cg_sym(m, g->sp, e, false);
  fclose(m);
  return b[i];
}

static const sp_buf *B(const cg_st *g, int b) { return &g->sp->bufs[b]; }
static const sp_tensor *T(const cg_st *g, int t) { return &g->sp->tensors[t]; }
static const char *tname(const cg_st *g, int t) { return cg_tensor(g->sp, t); }
static const char *vname(const cg_st *g, int v) { return cg_vname(g->sp, v); }
const char *cg_bname(const cg_st *g, int buf) {
  const sp_buf *b = B(g, buf);
  return b->snapshot ? prefixed("in_", tname(g, b->tensor)) : tname(g, b->tensor);
}

static void out_elem(FILE *m, cg_st *g, const sp_expr *lhs);

static void access_local(FILE *f, const sp_expr *e, void *vc) {
  cg_st *g = vc;
  for (int k = 0; k < g->nhoist; k++)
    if (g->hoist_e[k] == e) { /* read once before the loop (the rewrite hoist) */
      fprintf(f, "dtl_h%d", g->hoist_id[k]);
      return;
    }
  if (e->contracted) { /* a contracted temporary: the iteration's register */
    fprintf(f, "dtl_k%d", e->tensor);
    return;
  }
  if (e->work >= 0) { /* a precompute workspace */
    fprintf(f, "dtl_w_%s[%s]", g->sp->works[e->work].name, vname(g, e->vars[0]));
    return;
  }
  if (e->sparse >= 0) { /* a sparse entry: its position at the last level, -1 where none is stored */
    const char *n = tname(g, e->tensor);
    int a = e->sparse, x = e->nidx - 1;
    if (!e->maybe_absent) fprintf(f, "dtl_%s_vals[dtl_sp%d_p%d]", n, a, x);
    else fprintf(f, "(dtl_sp%d_p%d < 0 ? (%s)0 : dtl_%s_vals[dtl_sp%d_p%d])", a, x, cg_ctype(T(g, e->tensor)->type), n, a, x);
    return;
  }
  out_elem(f, g, e);
}

/* An element of a buffer (for the output, the one an assignment writes: never the snapshot). */
static void out_elem(FILE *m, cg_st *g, const sp_expr *lhs) {
  const char *n = cg_bname(g, lhs->buf);
  fprintf(m, "dtl_%s[", n);
  if (!lhs->nidx) fputc('0', m);
  for (int x = 0; x < lhs->nidx; x++) {
    if (x) fputs(" + ", m);
    fprintf(m, "(%s - dtl_%s_lo[%d])", vname(g, lhs->vars[x]), n, x);
    if (x + 1 < lhs->nidx) fprintf(m, " * dtl_%s_st[%d]", n, x);
  }
  fputc(']', m);
}

/* ---- buffers and communication ----------------------------------------------------------- */
static void set_layout(cg_st *g, const char *n, const char *box) { line(g, "dtl_layout_(&%s, dtl_%s_lo, dtl_%s_st);", box, n, n); }

/* Assign a box (per dim lo, hi) to the dtl_box named box. */
static void emit_box(cg_st *g, int order, const sym *const *lo, const sym *const *hi, const char *box, bool callback) {
  line(g, "%s%snd = %d;", box, callback ? "->" : ".", order);
  for (int x = 0; x < order; x++) {
    MBUF(b);
    FILE *m = mopen(&b);
    fprintf(m, "%s%slo[%d] = ", box, callback ? "->" : ".", x);
    cg_sym(m, g->sp, lo[x], callback);
    fprintf(m, ", %s%shi[%d] = ", box, callback ? "->" : ".", x);
    cg_sym(m, g->sp, hi[x], callback);
    fputc(';', m);
    fclose(m);
    line(g, "%s", b);
  }
}

/* The rewrite "invariant" (rewrite.c): the operation runs at its loop's first iteration only;
 * the later ones read what it left in the buffer's slot (the compute function keeps each loop's
 * iteration in dtl_plan->loop_it). */
static void once_open(cg_st *g, const sp_node *c) {
  if (!c->once_loop) return;
  line(g, "if (dtl_plan->loop_it[%d] == 0) { /* the rewrite invariant: the loop writes no part of %s, later iterations read the slot */",
       c->once_loop, T(g, B(g, c->buf)->tensor)->name);
  g->ind += 2;
}
static void once_close(cg_st *g, const sp_node *c) {
  if (!c->once_loop) return;
  g->ind -= 2;
  line(g, "}");
}

static void args_fill(cg_st *g, const sp_node *n) {
  for (int q = 0; q < n->nargs; q++) line(g, "dtl_args.v[%d] = %s;", g->sp->vars[n->arg_vars[q]].arg, vname(g, n->arg_vars[q]));
}

static void reserve(cg_st *g, const char *n, int slot, const char *vol, fe_type t) {
  line(g, "dtl_%s = dtl_reserve_(dtl_plan, %d, (size_t)%s * sizeof(%s));", n, slot, vol, cg_ctype(t));
  line(g, "if (!dtl_%s) return dtl_fail(dtl_ctx, \"out of memory for %s\");", n, n);
}

/* The pointers of a sparse piece the loops read (the rank's own, or a fetched box). */
static void sp_bind(cg_st *g, int t, const char *src) {
  const char *n = tname(g, t);
  line(g, "dtl_%s = %s;", n, src);
  line(g, "for (int dtl_x = 0; dtl_x < %d; dtl_x++) {", T(g, t)->order);
  line(g, "  dtl_%s_lo[dtl_x] = dtl_%s->box.lo[dtl_x];", n, n);
  line(g, "  dtl_%s_ext[dtl_x] = dtl_%s->box.hi[dtl_x] > dtl_%s->box.lo[dtl_x] ? dtl_%s->box.hi[dtl_x] - dtl_%s->box.lo[dtl_x] : 0;", n, n,
       n, n, n);
  line(g, "  dtl_%s_pos[dtl_x] = dtl_%s->pos[dtl_x], dtl_%s_crd[dtl_x] = dtl_%s->crd[dtl_x];", n, n, n, n);
  line(g, "  dtl_%s_pos32[dtl_x] = dtl_%s->pos32[dtl_x], dtl_%s_crd32[dtl_x] = dtl_%s->crd32[dtl_x];", n, n, n, n);
  line(g, "  dtl_%s_bd[dtl_x] = dtl_%s->banded[dtl_x];", n, n);
  line(g, "}");
  line(g, "dtl_%s_n32 = dtl_%s->narrow;", n, n);
  line(g, "dtl_%s_vals = (const %s *)dtl_%s->vals;", n, cg_ctype(T(g, t)->type), n);
}

/* The rewrite "fetch": an earlier statement's buffer holds the box (its slot is this one's). */
static void reused(cg_st *g, const sp_node *c) {
  line(g, "/* no communication: the slot holds this box of %s, fetched by statement %d and not written since */",
       T(g, B(g, c->buf)->tensor)->name, g->sp->funcs[B(g, c->reuses - 1)->func].index + 1);
}
static void sp_bind_slot(cg_st *g, int t, int slot) {
  char src[64];
  snprintf(src, sizeof src, "&dtl_plan->sp[%d]", slot);
  sp_bind(g, t, src);
}

/* The box function of an exchange: PREFIX_sS_boxQ. */
static const char *boxfn(const cg_st *g, int buf) {
  static char b[2][300];
  static int i;
  i ^= 1;
  snprintf(b[i], sizeof b[i], "%s_s%d_box%d", fnp(g->o), g->fn->index, B(g, buf)->boxfn);
  return b[i];
}

/* A buffer's variables (SI_DECLARE). */
static void declare_buf(cg_st *g, int buf) {
  const sp_buf *b = B(g, buf);
  int t = b->tensor;
  const char *n = tname(g, t), *nm = cg_bname(g, buf), *ct = cg_ctype(T(g, t)->type);
  if (T(g, t)->sparse && b->output) {
    line(g, "dtl_coo *dtl_%s_coo = &dtl_plan->co[%d]; /* the entries this rank produces */", n, b->slot);
    line(g, "dtl_%s_coo->type = %s, dtl_%s_coo->order = %d, dtl_%s_coo->n = 0;", n, cg_dtltype(T(g, t)->type), n, T(g, t)->order, n);
    line(g, "dtl_box dtl_%s_box = dtl_plan->own[%d];\n  (void)dtl_%s_box;", n, t, n);
    return;
  }
  if (T(g, t)->sparse) {
    int ord = b->order + 1;
    line(g, "const dtl_sparse *dtl_%s = NULL;", n);
    line(g, "int64_t dtl_%s_lo[%d] = {0}, dtl_%s_ext[%d] = {0};", n, ord, n, ord);
    line(g, "const int64_t *dtl_%s_pos[%d] = {0}, *dtl_%s_crd[%d] = {0};", n, ord, n, ord);
    line(g, "const int32_t *dtl_%s_pos32[%d] = {0}, *dtl_%s_crd32[%d] = {0}; /* a narrow piece's */", n, ord, n, ord);
    line(g, "bool dtl_%s_n32 = false;", n);
    /* the piece's banded levels copied out of it: a local the loops test, which no store
     * or call in them can change, so that the C compiler keeps it out of the row loop */
    line(g, "bool dtl_%s_bd[%d] = {0};", n, ord);
    line(g, "const %s *dtl_%s_vals = NULL;", ct, n);
    line(g, "(void)dtl_%s, (void)dtl_%s_lo, (void)dtl_%s_ext, (void)dtl_%s_pos, (void)dtl_%s_crd, (void)dtl_%s_vals;", n, n, n, n, n, n);
    line(g, "(void)dtl_%s_pos32, (void)dtl_%s_crd32, (void)dtl_%s_n32, (void)dtl_%s_bd;", n, n, n, n);
    return;
  }
  line(g, "%s *dtl_%s = NULL;", ct, nm);
  line(g, "int64_t dtl_%s_lo[%d] = {0}, dtl_%s_st[%d] = {0}, dtl_%s_vol = 0;", nm, b->order + 1, nm, b->order + 1, nm);
  line(g, "dtl_box dtl_%s_box = dtl_plan->own[%d];", nm, t);
  line(g, "(void)dtl_%s_lo, (void)dtl_%s_st, (void)dtl_%s_vol, (void)dtl_%s_box;", nm, nm, nm, nm);
  if (b->doubled) {
    line(g, "int dtl_%s_cur = 0;\n  (void)dtl_%s_cur;", nm, nm);
    line(g, "%s *dtl_%s_req = NULL; /* the next step's data, in flight */", g->sp->cuda ? "dtl_cu_request" : "dtl_request", nm);
    line(g, "dtl_box dtl_%s_nbox = dtl_%s_box;", nm, nm);
    line(g, "int64_t dtl_%s_nvol = 0;", nm);
    line(g, "%s *dtl_%s_nbuf = NULL;", ct, nm);
  }
}

static void emit_init(cg_st *g, const sp_node *n) {
  const sp_program *sp = g->sp;
  switch (n->init) {
  case SI_DECLARE: declare_buf(g, n->buf); return;
  case SI_SNAPSHOT: {
    const char *tn = tname(g, n->tensor), *ct = cg_ctype(T(g, n->tensor)->type);
    line(g, "/* %s */", n->comment);
    line(g, "const int64_t dtl_snap_vol = dtl_box_volume(&dtl_plan->own[%d]);", n->tensor);
    line(g, "%s *dtl_snap = dtl_reserve_(dtl_plan, %d, (size_t)(dtl_snap_vol > 0 ? dtl_snap_vol : 1) * sizeof(%s));", ct, n->slot, ct);
    line(g, "if (!dtl_snap) return dtl_fail(dtl_ctx, \"out of memory\");");
    if (sp->cuda) line(g, "if (dtl_snap_vol > 0 && dtl_cu_memcpy(dtl_ctx, dtl_snap, %s, (size_t)dtl_snap_vol * sizeof(%s))) return 1;", tn, ct);
    else line(g, "if (dtl_snap_vol > 0) memcpy(dtl_snap, %s, (size_t)dtl_snap_vol * sizeof(%s));", tn, ct);
    return;
  }
  case SI_WORKSPACE: {
    const char *wn = sp->works[n->work].name, *ct = cg_ctype(sp->works[n->work].type);
    const char *ext = S(g, n->extent);
    line(g, "/* precompute's workspace %s, one element per iteration of %s */", wn, sp->vars[n->var].name);
    line(g, "%s *dtl_w_%s = dtl_reserve_(dtl_plan, %d, (size_t)(%s > 0 ? %s : 1) * sizeof(%s));", ct, wn, n->slot, ext, ext, ct);
    line(g, "if (!dtl_w_%s) return dtl_fail(dtl_ctx, \"out of memory for workspace %s\");", wn, wn);
    return;
  }
  case SI_EMPTY: {
    const sp_tensor *x = T(g, n->tensor);
    char lv[512] = "";
    for (int d = 0; d < x->order; d++) {
      strcat(lv, d ? ", " : "");
      strcat(lv, x->compressed[d] ? "DTL_LEVEL_COMPRESSED" : "DTL_LEVEL_DENSE");
    }
    line(g, "/* '=': the output starts with no entries and gains every nonzero the loops produce */");
    line(g, "{ static const dtl_level dtl__lv[] = {%s};", lv);
    line(g, "  dtl_sparse_free(%s);", tname(g, n->tensor));
    line(g, "  if (dtl_sparse_empty(%s, %s, %d, dtl__lv, &dtl_plan->own[%d])) return dtl_fail(dtl_ctx, \"out of memory for %s\"); }",
         tname(g, n->tensor), cg_dtltype(x->type), x->order, n->tensor, x->name);
    return;
  }
  case SI_ZERO:
    line(g, "/* '=': the output starts from zero and every iteration adds to it */");
    if (sp->cuda)
      line(g, "if (dtl_cu_zero(dtl_ctx, %s, %s, dtl_box_volume(&dtl_plan->own[%d]))) return 1;", cg_dtltype(T(g, n->tensor)->type),
           tname(g, n->tensor), n->tensor);
    else
      line(g, "dtl_zero(%s, %s, dtl_box_volume(&dtl_plan->own[%d]));", cg_dtltype(T(g, n->tensor)->type), tname(g, n->tensor), n->tensor);
    return;
  }
}

/* A local view: the loops use the rank's own block directly. */
static void emit_view(cg_st *g, const sp_node *c) {
  const sp_buf *b = B(g, c->buf);
  int t = b->tensor;
  const char *n = tname(g, t);
  line(g, "/* %s %s: local, the rank's own block */", b->output ? "write" : "read", T(g, t)->name);
  if (T(g, t)->sparse) {
    if (b->output) line(g, "dtl_%s_coo->n = 0; /* this rank's block: entries added at the end */", n);
    else sp_bind(g, t, n);
    return;
  }
  if (b->snapshot && b->in_place) line(g, "dtl_in_%s = %s; /* read in place: each iteration reads only what it writes */", n, n);
  else if (b->snapshot) line(g, "dtl_in_%s = dtl_snap;", n);
  else if (b->output) line(g, "dtl_%s = %s;", n, n);
  else line(g, "dtl_%s = (%s *)%s; /* only read */", n, cg_ctype(T(g, t)->type), n);
  char bx[64];
  snprintf(bx, sizeof bx, "dtl_plan->own[%d]", t);
  set_layout(g, cg_bname(g, c->buf), bx);
}

static void emit_comm(cg_st *g, const sp_node *c) {
  const sp_buf *b = B(g, c->buf);
  int t = b->tensor;
  const char *n = tname(g, t), *nm = cg_bname(g, c->buf);
  fe_type ty = T(g, t)->type;
  const char *ct = cg_ctype(ty), *dt = cg_dtltype(ty);
  const char *localptr = b->snapshot ? "dtl_snap" : n;
  char box[300], nbox[300];
  snprintf(box, sizeof box, "dtl_%s_box", nm);
  snprintf(nbox, sizeof nbox, "dtl_%s_nbox", nm);
  if (c->op != SC_VIEW && c->op != SC_WAIT)
    line(g, "/* %s %s%s%s */", sp_comm_name(c->op), T(g, t)->name, c->comment ? ": " : "", c->comment ? c->comment : "");
  switch (c->op) {
  case SC_VIEW: emit_view(g, c); return;
  case SC_SPARSE_RESET: line(g, "dtl_%s_coo->n = 0;", n); return;
  case SC_SPARSE_BCAST: {
    if (c->reuses) {
      reused(g, c);
      sp_bind_slot(g, t, b->slot);
      return;
    }
    once_open(g, c);
    line(g, "{ dtl_box dtl__need;");
    g->ind += 2;
    emit_box(g, b->order, b->lo, b->hi, "dtl__need", false);
    line(g, "dtl_sparse_free(&dtl_plan->sp[%d]);", b->slot);
    line(g, "if (dtl_sparse_bcast(dtl_ctx, 0x%xu, &dtl_plan->dist[%d], %s, &dtl__need, &dtl_plan->sp[%d])) return 1;", c->mask, t, n,
         b->slot);
    g->ind -= 2;
    line(g, "}");
    once_close(g, c);
    sp_bind_slot(g, t, b->slot);
    return;
  }
  case SC_SPARSE_FETCH: {
    if (c->reuses) {
      reused(g, c);
      sp_bind_slot(g, t, b->slot);
      return;
    }
    once_open(g, c);
    args_fill(g, c);
    line(g, "dtl_sparse_free(&dtl_plan->sp[%d]);", b->slot);
    line(g, "if (dtl_sparse_fetch(dtl_ctx, &dtl_plan->dist[%d], %s, %s, &dtl_args, &dtl_plan->sp[%d])) return 1;", t, n, boxfn(g, c->buf),
         b->slot);
    once_close(g, c);
    sp_bind_slot(g, t, b->slot);
    return;
  }
  case SC_PRODUCE:
  case SC_BCAST:
  case SC_FETCH:
    emit_box(g, b->order, b->lo, b->hi, box, false);
    line(g, "dtl_%s_vol = dtl_box_volume(&%s);", nm, box);
    if (b->doubled) line(g, "dtl_%s_cur = 0;", nm);
    {
      char vol[300];
      snprintf(vol, sizeof vol, "dtl_%s_vol", nm);
      reserve(g, nm, b->slot, vol, ty);
    }
    set_layout(g, nm, box);
    if (c->reuses) {
      reused(g, c);
    } else if (c->op == SC_PRODUCE) {
      if (g->sp->cuda) line(g, "if (dtl_cu_zero(dtl_ctx, %s, dtl_%s, dtl_%s_vol)) return 1;", dt, nm, nm);
      else line(g, "dtl_zero(%s, dtl_%s, dtl_%s_vol);", dt, nm, nm);
    } else if (c->op == SC_BCAST) {
      once_open(g, c);
      line(g, "if (%s(dtl_ctx, 0x%xu, &dtl_plan->dist[%d], %s, %s, &dtl_plan->own[%d], &%s, dtl_%s)) return 1;", rt(g, "bcast_fetch"),
           c->mask, t, dt, localptr, t, box, nm);
      once_close(g, c);
    } else {
      once_open(g, c);
      args_fill(g, c);
      line(g, "if (%s(dtl_ctx, &dtl_plan->dist[%d], %s, %s, &dtl_plan->own[%d], %s, &dtl_args, dtl_%s)) return 1;", rt(g, "fetch"), t, dt,
           localptr, t, boxfn(g, c->buf), nm);
      once_close(g, c);
    }
    return;
  case SC_BCAST_BEGIN:
  case SC_SHIFT_BEGIN:
    emit_box(g, b->order, c->box_lo, c->box_hi, nbox, false);
    line(g, "dtl_%s_nvol = dtl_box_volume(&%s);", nm, nbox);
    line(g, "dtl_%s_nbuf = dtl_reserve_(dtl_plan, %d + %s, (size_t)dtl_%s_nvol * sizeof(%s));", nm, b->slot,
         c->other_slot ? prefixed(prefixed("(dtl_", nm), "_cur ^ 1)") : prefixed(prefixed("dtl_", nm), "_cur"), nm, ct);
    line(g, "if (!dtl_%s_nbuf) return dtl_fail(dtl_ctx, \"out of memory\");", nm);
    if (c->op == SC_BCAST_BEGIN)
      line(g, "if (%s(dtl_ctx, 0x%xu, &dtl_plan->dist[%d], %s, %s, &dtl_plan->own[%d], &%s, dtl_%s_nbuf, &dtl_%s_req)) return 1;",
           rt(g, "bcast_fetch_begin"), c->mask, t, dt, localptr, t, nbox, nm, nm);
    else
      line(g, "if (%s(dtl_ctx, %d, %s, dtl_%s, dtl_%s_vol, dtl_%s_nbuf, dtl_%s_nvol, &dtl_%s_req)) return 1;", rt(g, "shift_begin"),
           c->shift_dim, dt, nm, nm, nm, nm, nm);
    return;
  case SC_WAIT:
    line(g, "if (%s(dtl_ctx, &dtl_%s_req)) return 1;", rt(g, "wait"), nm);
    line(g, "dtl_%s = dtl_%s_nbuf, dtl_%s_box = %s, dtl_%s_vol = dtl_%s_nvol;", nm, nm, nm, nbox, nm, nm);
    line(g, "dtl_%s_cur ^= 1;", nm);
    set_layout(g, nm, box);
    return;
  case SC_REDUCE:
  case SC_BCAST_RESULT: { /* to (from) one root coordinate per grid dim of the mask */
    char roots[512] = "";
    for (int d = 0; d < g->sp->ndims; d++) {
      char one[32];
      snprintf(one, sizeof one, "%s%lld", d ? ", " : "", (long long)(c->mask >> d & 1 ? c->roots[d] : 0));
      strcat(roots, one);
    }
    line(g, "{ static const int64_t dtl__root[] = {%s};", roots);
    line(g, "  if (%s(dtl_ctx, 0x%xu, dtl__root, %s, dtl_%s, dtl_%s_vol)) return 1; }", rt(g, c->op == SC_REDUCE ? "reduce" : "bcast"), c->mask,
         dt, n, n);
    return;
  }
  case SC_ALLREDUCE:
    if (c->nmerged) { /* scalars' sums ready together: one call */
      const char *ct = cg_ctype(T(g, t)->type);
      line(g, "{ %s dtl__m[%d]; /* one allreduce for %d sums */", ct, c->nmerged + 1, c->nmerged + 1);
      line(g, "  dtl__m[0] = dtl_%s[0];", n);
      for (int q = 0; q < c->nmerged; q++) line(g, "  dtl__m[%d] = dtl_%s[0];", q + 1, cg_bname(g, c->merged[q]));
      line(g, "  if (%s(dtl_ctx, 0x%xu, NULL, %s, dtl__m, %d)) return 1;", rt(g, "reduce"), c->mask, dt, c->nmerged + 1);
      line(g, "  dtl_%s[0] = dtl__m[0];", n);
      for (int q = 0; q < c->nmerged; q++) line(g, "  dtl_%s[0] = dtl__m[%d];", cg_bname(g, c->merged[q]), q + 1);
      line(g, "}");
      return;
    }
    line(g, "if (%s(dtl_ctx, 0x%xu, NULL, %s, dtl_%s, dtl_%s_vol)) return 1;", rt(g, "reduce"), c->mask, dt, n, n);
    return;
  case SC_KEEP_OWN:
    line(g, "{ dtl_box dtl__r; /* keep the part of the box this rank owns */");
    line(g, "  if (dtl_box_intersect(&dtl_%s_box, &dtl_plan->own[%d], &dtl__r))", n, t);
    if (g->sp->cuda)
      line(g, "    if (dtl_cu_copy_box(dtl_ctx, %s, dtl_%s, &dtl_%s_box, %s, &dtl_plan->own[%d], &dtl__r, true)) return 1; }", dt, n, n, n, t);
    else line(g, "    dtl_copy_box(%s, dtl_%s, &dtl_%s_box, %s, &dtl_plan->own[%d], &dtl__r, true); }", dt, n, n, n, t);
    return;
  case SC_ACCUMULATE:
    args_fill(g, c);
    line(g, "if (%s(dtl_ctx, &dtl_plan->dist[%d], %s, %s, &dtl_plan->own[%d], 0x%xu, %s, &dtl_args, dtl_%s)) return 1;", rt(g, "accumulate"),
         t, dt, n, t, c->mask, boxfn(g, c->buf), n);
    return;
  case SC_SPARSE_ACC:
    args_fill(g, c);
    line(g, "if (dtl_sparse_accumulate(dtl_ctx, &dtl_plan->dist[%d], %s, 0x%xu, %s, &dtl_args, dtl_%s_coo)) return 1;", t, n, c->mask,
         boxfn(g, c->buf), n);
    return;
  case SC_SPARSE_MERGE:
    line(g, "if (dtl_sparse_merge(dtl_ctx, %s, dtl_%s_coo)) return 1; /* this rank's block gains its entries */", n, n);
    return;
  case SC_HALO_END:
    line(g, "if (dtl_halo_end(dtl_ctx, dtl_plan->halo[%d], dtl_%s_halo)) return 1; /* the ghosts are in the buffer */", b->slot, nm);
    line(g, "dtl_%s = dtl_%s_halo, %s = dtl_%s_hbox;", nm, nm, box, nm);
    set_layout(g, nm, box);
    line(g, "if (dtl_%s_rows) { /* the rows that read a ghost (none: nothing to run) */", nm);
    g->ind += 2;
    for (int q = 0; q < c->nkids; q++)
      if (c->kids[q]) cg_node(g, c->kids[q]);
    g->ind -= 2;
    line(g, "}");
    return;
  case SC_HALO: /* the buffer over the whole box; only the entries at the sparse piece's stored coordinates are filled */
    emit_box(g, b->order, b->lo, b->hi, box, false);
    line(g, "dtl_%s_vol = dtl_box_volume(&%s);", nm, box);
    {
      char vol[300];
      snprintf(vol, sizeof vol, "dtl_%s_vol", nm);
      reserve(g, nm, b->slot, vol, ty);
    }
    set_layout(g, nm, box);
    if (c->halo_split) {
      line(g, "if (dtl_halo_begin(dtl_ctx, %d, &dtl_plan->dist[%d], %s, %s, &dtl_plan->own[%d], %s, %d, &%s, dtl_%s, &dtl_plan->halo[%d], dtl_plan->epoch, true)) return 1;",
           __builtin_ctz(c->mask), t, dt, localptr, t, tname(g, c->halo_tensor), c->halo_level, box, nm, b->slot);
      line(g, "const uint8_t *dtl_%s_rows = dtl_halo_rows(dtl_plan->halo[%d]); /* 1: the row reads a ghost */", nm, b->slot);
      line(g, "const int64_t dtl_%s_nrows = dtl_halo_nrows(dtl_plan->halo[%d]); /* ... of so many rows */", nm, b->slot);
      line(g, "(void)dtl_%s_nrows;", nm);
      line(g, "%s *dtl_%s_halo = dtl_%s; /* the exchange's buffer; until halo.end, the rank's own block */", ct, nm, nm);
      line(g, "dtl_box dtl_%s_hbox = %s;", nm, box);
      line(g, "dtl_%s = (%s *)%s, %s = dtl_plan->own[%d];", nm, ct, localptr, box, t);
      set_layout(g, nm, box);
      return;
    }
    line(g, "if (dtl_halo_exchange(dtl_ctx, %d, &dtl_plan->dist[%d], %s, %s, &dtl_plan->own[%d], %s, %d, &%s, dtl_%s, &dtl_plan->halo[%d], dtl_plan->epoch)) return 1;",
         __builtin_ctz(c->mask), t, dt, localptr, t, tname(g, c->halo_tensor), c->halo_level, box, nm, b->slot);
    line(g, "if (dtl_halo_is_local(dtl_plan->halo[%d])) { /* every entry it reads is its own: the block in place */", b->slot);
    line(g, "  dtl_%s = (%s *)%s, %s = dtl_plan->own[%d];", nm, ct, localptr, box, t);
    line(g, "  dtl_layout_(&%s, dtl_%s_lo, dtl_%s_st);", box, nm, nm);
    line(g, "}");
    return;
  }
}

/* ---- conditions, loops, bindings ----------------------------------------------------------- */
static void conds(FILE *m, const cg_st *g, int n, const sp_cond *c) {
  for (int q = 0; q < n; q++) {
    if (q) fputs(" && ", m);
    if (c[q].op == SCMP_EQ_PARAMS) {
      for (int r = 1; r < c[q].nparams; r++)
        fprintf(m, "%s%s == %s", r > 1 ? " && " : "", cg_param(g->sp, c[q].params[0]), cg_param(g->sp, c[q].params[r]));
      continue;
    }
    cg_sym(m, g->sp, c[q].a, false);
    fputs(c[q].op == SCMP_LT ? " < " : " == ", m);
    cg_sym(m, g->sp, c[q].b, false);
  }
}

static void emit_kids(cg_st *g, const sp_node *n) {
  for (int q = 0; q < n->nkids; q++)
    if (n->kids[q]) cg_node(g, n->kids[q]);
}

static void emit_if(cg_st *g, const sp_node *n) {
  MBUF(b);
  FILE *m = mopen(&b);
  conds(m, g, n->nconds, n->conds);
  fclose(m);
  if (n->comment) line(g, "if (%s) { /* %s */", b, n->comment);
  else line(g, "if (%s) {", b);
  g->ind += 2;
  cg_node(g, n->kids[0]);
  g->ind -= 2;
  if (n->nkids > 1 && n->kids[1] && n->kids[1]->nkids) {
    line(g, "} else {");
    g->ind += 2;
    cg_node(g, n->kids[1]);
    g->ind -= 2;
  }
  line(g, "}");
}

/* ---- index arrays of sparse pieces, at the width the enclosing SN_WIDTH branch reads ---- */
typedef enum { W_EITHER, W_32, W_64 } wmode;
static wmode wmode_of(const cg_st *g) {
  if (!g->width) return W_EITHER;
  if (g->w32) return W_32;
  return g->width->nwidth == 1 ? W_64 : W_EITHER; /* several tensors: each its own width */
}

static char *rot(void) {
  static char b[8][4096];
  static int i;
  i = (i + 1) % 8;
  return b[i];
}

/* pos[x][idx] or crd[x][idx] of tensor name tn, as an int64_t expression */
static const char *sp_arr(const cg_st *g, const char *arr, const char *tn, int x, const char *idx) {
  char *b = rot();
  switch (wmode_of(g)) {
  case W_32: snprintf(b, 4096, "dtl_%s_%s32[%d][%s]", tn, arr, x, idx); break;
  case W_64: snprintf(b, 4096, "dtl_%s_%s[%d][%s]", tn, arr, x, idx); break;
  case W_EITHER:
    snprintf(b, 4096, "(dtl_%s_n32 ? (int64_t)dtl_%s_%s32[%d][%s] : dtl_%s_%s[%d][%s])", tn, tn, arr, x, idx, tn, arr, x, idx);
    break;
  }
  return b;
}

/* dtl_sp_lower or dtl_sp_find (fn) over crd[x] of tn in [lo, hi) */
static const char *sp_search(const cg_st *g, const char *fn, const char *tn, int x, const char *lo, const char *hi,
                             const char *key) {
  char *b = rot();
  switch (wmode_of(g)) {
  case W_32: snprintf(b, 4096, "dtl_sp_%s32(dtl_%s_crd32[%d], %s, %s, %s)", fn, tn, x, lo, hi, key); break;
  case W_64: snprintf(b, 4096, "dtl_sp_%s(dtl_%s_crd[%d], %s, %s, %s)", fn, tn, x, lo, hi, key); break;
  case W_EITHER:
    snprintf(b, 4096, "dtl_sp_%s_w(dtl_%s_n32, dtl_%s_crd[%d], dtl_%s_crd32[%d], %s, %s, %s)", fn, tn, tn, x, tn, x, lo, hi, key);
    break;
  }
  return b;
}

/* SN_WIDTH: the loops below once over 32-bit index arrays, once over the pieces' own */
static void emit_width(cg_st *g, const sp_node *n) {
  MBUF(b);
  FILE *m = mopen(&b);
  for (int q = 0; q < n->nwidth; q++) fprintf(m, "%sdtl_%s_n32", q ? " && " : "", tname(g, n->width_tensors[q]));
  fclose(m);
  const sp_node *saved = g->width;
  bool saved32 = g->w32;
  g->width = n;
  line(g, "if (%s) { /* 32-bit positions and coordinates */", b);
  g->ind += 2;
  g->w32 = true;
  emit_kids(g, n);
  g->ind -= 2;
  line(g, "} else {");
  g->ind += 2;
  g->w32 = false;
  emit_kids(g, n);
  g->ind -= 2;
  line(g, "}");
  g->width = saved, g->w32 = saved32;
}

/* the pass "threads" (spmd_threads): where the nest is large enough and the rank has several
 * threads, they share the loop (a copy of it under `#pragma omp parallel for`); else the loop
 * runs as the rank's own, as compiled without the pass (an OpenMP loop whose `if` is false
 * still runs outlined, which costs a register sum its speed) */
static const char *threads_cond(cg_st *g, const sp_node *n) {
  char *b = rot();
  if (n->loop == SL_SPARSE && n->level == 0) /* its stored coordinates times the piece's entries per coordinate */
    snprintf(b, 4096, "dtl_threads_share((dtl_sp%d_f0 - dtl_sp%d_s0) * dtl_max((int64_t)(%s), dtl_sparse_nvals(dtl_%s) / dtl_max(dtl_sp%d_e0, 1)))",
             n->sparse, n->sparse, S(g, n->threads_work), tname(g, n->tensor), n->sparse);
  else if (n->loop == SL_SPARSE) /* its stored coordinates times the work of each */
    snprintf(b, 4096, "dtl_threads_share((dtl_sp%d_f%d - dtl_sp%d_s%d) * (int64_t)(%s))", n->sparse,
             n->level, n->sparse, n->level, S(g, n->threads_work));
  else
    snprintf(b, 4096, "dtl_threads_share((int64_t)(%s))", S(g, n->threads_work));
  return b;
}

static void emit_loop(cg_st *g, const sp_node *n);
static void emit_jam(cg_st *g, const sp_node *n, int mode);
static void emit_strips(cg_st *g, const sp_node *n);
static void emit_strip_lanes(cg_st *g, const sp_node *n);

/* the loop twice: shared by the threads where threads_cond holds, else the rank's own */
static void emit_threads_split(cg_st *g, const sp_node *n) {
  line(g, "if (%s) { /* the rank's threads share the loop (the pass threads) */", threads_cond(g, n));
  g->ind += 2;
  g->th_mode = 1;
  emit_loop(g, n);
  g->ind -= 2;
  line(g, "} else {");
  g->ind += 2;
  g->th_mode = 2;
  emit_loop(g, n);
  g->ind -= 2;
  line(g, "}");
  g->th_mode = 0;
}

static void emit_threads(cg_st *g, const sp_node *n, int mode) {
  if (mode != 1) return;
  line(g, "#ifdef _OPENMP");
  line(g, "#pragma omp parallel for%s schedule(static)%s num_threads(dtl_loop_threads())", n->simd_sum ? " simd" : "",
       n->threads_sum ? " reduction(+: dtl__acc)" : "");
  line(g, "#endif");
}

/* The rewrite "hoist" (spmd.h: spmd_hoist): the loop's invariant operands as locals before
 * it, which access_local prints by name inside it (the table is the loop's until its end). */
static void emit_hoist(cg_st *g, const sp_node *n) {
  g->nhoist = 0;
  for (int k = 0; k < n->nhoist && k < 16; k++) {
    const sp_expr *e = n->hoist[k];
    MBUF(b);
    FILE *m = mopen(&b);
    access_local(m, e, g);
    fclose(m);
    int id = g->hoist_next++;
    line(g, "const %s dtl_h%d = %s; /* the rewrite hoist: the same in every iteration */", cg_ctype(T(g, e->tensor)->type), id, b);
    g->hoist_e[g->nhoist] = e, g->hoist_id[g->nhoist++] = id;
  }
}

/* The rewrite "prefetch" (spmd.h: spmd_prefetch): the piece's coordinates at the loop's level
 * and, at its last level, its values, DTL_PREFETCH_BYTES past the segment's end e,
 * where the piece is banded there. */
static void emit_prefetch(cg_st *g, const sp_node *n, const char *tn, const char *e) {
  int x = n->level;
  line(g, "if (dtl_%s_bd[%d]) { /* the rewrite prefetch: the entries a few segments on */", tn, x);
  switch (wmode_of(g)) {
  case W_32: line(g, "  dtl_prefetch(dtl_%s_crd32[%d], %s, sizeof (int32_t));", tn, x, e); break;
  case W_64: line(g, "  dtl_prefetch(dtl_%s_crd[%d], %s, sizeof (int64_t));", tn, x, e); break;
  case W_EITHER: break; /* one width unknown here: the values only */
  }
  if (x == T(g, n->tensor)->order - 1) line(g, "  dtl_prefetch(dtl_%s_vals, %s, sizeof *dtl_%s_vals);", tn, e, tn);
  line(g, "}");
}

/* The bytes of len elements of buffer buf, as an int64_t expression */
static const char *row_bytes(const cg_st *g, const sym *len, int buf) {
  char *b = rot();
  snprintf(b, 4096, "(int64_t)(%s) * (int64_t)sizeof *dtl_%s", S(g, len), cg_bname(g, buf));
  return b;
}

/* The rewrite "gather" (spmd.h: spmd_gather): at the top of iteration p of the loop over
 * stored coordinates, where the piece scatters at its level (the flag printed before the
 * loop), the rows its elements will read DTL_GATHER_AHEAD entries on: each element at the
 * coordinate there, its indices bound by the loops inside at 0. */
static void emit_gather(cg_st *g, const sp_node *n, const char *tn, const char *p, const char *bb) {
  int a = n->sparse, x = n->level;
  char ahead[160];
  snprintf(ahead, sizeof ahead, "%s + DTL_GATHER_AHEAD < dtl_%s->npos[%d] ? %s + DTL_GATHER_AHEAD : dtl_%s->npos[%d] - 1", p, tn,
           x, p, tn, x);
  line(g, "if (dtl_sp%d_g%d) { /* the rewrite gather: the rows read DTL_GATHER_AHEAD entries on */", a, x);
  line(g, "  const int64_t dtl_gc = %s - %s;", sp_arr(g, "crd", tn, x, ahead), bb);
  for (int u = 0; u < n->ngather; u++) {
    const sp_expr *e = n->gather[u];
    const char *b = cg_bname(g, e->buf);
    MBUF(ix);
    FILE *m = mopen(&ix);
    for (int d = 0; d < e->nidx; d++) {
      if (d) fputs(" + ", m);
      fprintf(m, "(%s - dtl_%s_lo[%d])", e->vars[d] == n->var ? "dtl_gc" : n->gather_inner[u] >> d & 1 ? "0" : vname(g, e->vars[d]), b, d);
      if (d + 1 < e->nidx) fprintf(m, " * dtl_%s_st[%d]", b, d);
    }
    fclose(m);
    line(g, "  dtl_prefetch_row(dtl_%s, %s, sizeof *dtl_%s, %s);", b, ix, b, row_bytes(g, n->gather_len[u], e->buf));
  }
  line(g, "}");
}

/* The rewrite "sums" (spmd.h: spmd_sums): where every operand the loop gathers fits
 * DTL_SUMS_BYTES at the loop's bound, its iterations four at a time, the body at position q + u
 * adding to register u; the loop that follows runs the rest from q. */
static void emit_sums(cg_st *g, const sp_node *n, const char *tn, const char *p, const char *bb, const char *e, const char *chk,
                      const char *start) {
  int a = n->sparse, x = n->level, w = n->sums;
  const char *v = vname(g, n->var);
  MBUF(fits);
  FILE *m = mopen(&fits);
  for (int u = 0; u < n->nsums_read; u++)
    fprintf(m, "%s%s <= DTL_SUMS_BYTES", u ? " && " : "", row_bytes(g, n->hi, n->sums_read[u]->buf));
  fclose(m);
  line(g, "int64_t dtl_sp%d_q%d = %s(%s <= 0 ? %s : %s);", a, x, chk, bb, start, sp_search(g, "lower", tn, x, start, e, bb));
  line(g, "/* the rewrite sums: %d registers%s */", w, n->nsums_read ? " where the gathered operands fit the cache" : "");
  if (n->nsums_read) line(g, "if (%s)", fits);
  line(g, "  for (; dtl_sp%d_q%d + %d < %s; dtl_sp%d_q%d += %d) {", a, x, w - 1, e, a, x, w);
  const char *saved = g->acc_sfx;
  static const char *const sfx[] = {"", "1", "2", "3", "4", "5", "6", "7"};
  g->ind += 4;
  for (int u = 0; u < w && u < 8; u++) {
    line(g, "{ const int64_t %s = dtl_sp%d_q%d + %d;", p, a, x, u);
    line(g, "  const int64_t %s = %s - %s;", v, sp_arr(g, "crd", tn, x, p), bb);
    g->ind += 2;
    line(g, "(void)%s;", v);
    g->acc_sfx = sfx[u];
    emit_kids(g, n);
    g->ind -= 2;
    line(g, "}");
  }
  g->acc_sfx = saved;
  g->ind -= 4;
  line(g, "  }");
}

/* A loop over the union of the stored coordinates of several sparse accesses (spmd.h,
 * sp_node.nunion), opened here and closed by emit_loop: each member's cursor q and segment
 * end e over its parent's segment (empty where the parent holds no entry), from its first
 * coordinate at or after the loop's start; each iteration takes the least coordinate among
 * the members' cursors (ending at the loop's bound or when every cursor is at its end) and
 * sets each member's position to its cursor, which it advances, where its coordinate is that
 * one, else to -1. */
static void emit_union(cg_st *g, const sp_node *n) {
  const char *v = vname(g, n->var);
  line(g, "{ /* loop %s over the union of the stored coordinates of several operands */", v);
  g->ind += 2;
  for (int u = 0; u < n->nunion; u++) {
    int a = n->union_sparse[u], x = n->union_level[u];
    const char *tn = tname(g, n->union_tensor[u]);
    char par[64], nxt[80], q[40], e[40], b[40];
    if (x == 0) snprintf(par, sizeof par, "0");
    else snprintf(par, sizeof par, "dtl_sp%d_p%d", a, x - 1);
    snprintf(nxt, sizeof nxt, "%s + 1", par);
    snprintf(q, sizeof q, "dtl_u%d_q", u), snprintf(e, sizeof e, "dtl_u%d_e", u), snprintf(b, sizeof b, "dtl_u%d_b", u);
    char chk[96] = ""; /* a parent that holds no entry: an empty segment */
    if (x > 0) snprintf(chk, sizeof chk, "%s < 0 ? 0 : ", par);
    line(g, "const int64_t %s = %s%s;", e, chk, sp_arr(g, "pos", tn, x, nxt));
    line(g, "const int64_t %s = %s - dtl_%s_lo[%d]; /* local coordinate of %s = 0 */", b, S(g, n->base), tn, x, v);
    const char *start = sp_arr(g, "pos", tn, x, par);
    line(g, "int64_t %s = %s(%s <= 0 ? %s : %s);", q, chk, b, start, sp_search(g, "lower", tn, x, start, e, b));
  }
  line(g, "for (;;) {");
  g->ind += 2;
  line(g, "int64_t dtl_uv = INT64_MAX;");
  for (int u = 0; u < n->nunion; u++) { /* each member's next coordinate (INT64_MAX: none left) */
    char q[40];
    snprintf(q, sizeof q, "dtl_u%d_q", u);
    line(g, "const int64_t dtl_u%d_c = %s < dtl_u%d_e ? %s - dtl_u%d_b : INT64_MAX;", u, q, u,
         sp_arr(g, "crd", tname(g, n->union_tensor[u]), n->union_level[u], q), u);
    line(g, "if (dtl_u%d_c < dtl_uv) dtl_uv = dtl_u%d_c;", u, u);
  }
  line(g, "if (dtl_uv == INT64_MAX || dtl_uv >= %s) break;", S(g, n->hi));
  line(g, "const int64_t %s = dtl_uv;", v);
  for (int u = 0; u < n->nunion; u++) {
    line(g, "const int64_t dtl_sp%d_p%d = dtl_u%d_c == dtl_uv ? dtl_u%d_q++ : -1;", n->union_sparse[u], n->union_level[u], u, u);
    line(g, "(void)dtl_sp%d_p%d;", n->union_sparse[u], n->union_level[u]);
  }
  g->ind -= 2;
}

static void emit_loop(cg_st *g, const sp_node *n) {
  const char *v = vname(g, n->var);
  const char *tn = n->loop == SL_SPARSE ? tname(g, n->tensor) : NULL;
  bool threads = n->threads && !g->in_kernel;
  int mode = threads ? g->th_mode : 0;
  g->th_mode = 0; /* the loops inside are not this one */
  if (threads && mode == 0 && n->loop != SL_SPARSE) {
    emit_threads_split(g, n);
    return;
  }
  if (n->jam > 1 && !g->in_kernel && (n->loop == SL_LOCAL || n->loop == SL_LOCAL_BLOCK)) {
    emit_jam(g, n, mode);
    return;
  }
  if (n->strip > 1 && !g->in_kernel && !g->strip_phase && (n->loop == SL_LOCAL || n->loop == SL_SPARSE)) {
    emit_strips(g, n);
    return;
  }
  if (g->strip_phase == 1 && n == g->strip_K) {
    emit_strip_lanes(g, n);
    return;
  }
  if (mode != 2) line(g, "/* loop %s (%s) */", g->sp->vars[n->var].name, n->comment);
  switch (n->loop) {
  case SL_COORD: line(g, "{ const int64_t %s = dtl_coords[%d];", v, n->dim); break;
  case SL_COLL_BLOCK: {
    const char *lv = vname(g, n->lvar);
    line(g, "for (int64_t %s = 0; %s < %s; %s++) { const int64_t %s = %s;", lv, lv, S(g, n->hi), lv, v, S(g, n->value));
    break;
  }
  case SL_LOCAL_BLOCK:
    emit_threads(g, n, mode);
    line(g, "for (int64_t %s = %s; %s < %s; %s++) {", v, S(g, n->lo), v, S(g, n->hi), v);
    break;
  case SL_LOCAL:
    if (n->nhoist && !g->in_kernel) emit_hoist(g, n);
    emit_threads(g, n, mode);
    if (!g->in_kernel && n->par == PAR_CPU_THREAD) line(g, "#pragma omp parallel for");
    if (!g->in_kernel && n->par == PAR_CPU_VECTOR) line(g, "#pragma omp simd");
    if (!g->in_kernel && n->simd_sum && mode != 1) { /* honoured with -fopenmp (as --exe compiles), else no warning */
      line(g, "#ifdef _OPENMP");
      line(g, "#pragma omp simd reduction(+: dtl__acc)");
      line(g, "#endif");
    }
    line(g, "for (int64_t %s = %s; %s < %s; %s++) {", v, g->strip_phase == 2 && n == g->strip_K ? "dtl_kend" : "0", v,
         S(g, n->hi), v);
    break;
  case SL_SPARSE: {
    /* only the stored coordinates of the sparse factor: the others add zero */
    int a = n->sparse, x = n->level;
    char par[64], chk[96] = "";
    char nxt[80], e[40], bb[40], p[40], s0[40], f0[40];
    snprintf(e, sizeof e, "dtl_sp%d_e%d", a, x);
    snprintf(bb, sizeof bb, "dtl_sp%d_b%d", a, x);
    snprintf(p, sizeof p, "dtl_sp%d_p%d", a, x);
    snprintf(s0, sizeof s0, "dtl_sp%d_s%d", a, x);
    snprintf(f0, sizeof f0, "dtl_sp%d_f%d", a, x);
    if (mode) { /* one version of a shared loop: its bounds are found (below) */
      emit_threads(g, n, mode);
      line(g, "for (int64_t %s = %s; %s < %s; %s++) {", p, s0, p, f0, p);
      line(g, "  const int64_t %s = %s - %s;", v, sp_arr(g, "crd", tn, x, p), bb);
      if (n->ngather && !g->in_kernel && g->strip_phase != 1) {
        g->ind += 2;
        emit_gather(g, n, tn, p, bb);
        g->ind -= 2;
      }
      break;
    }
    if (n->nunion) { /* the union of several accesses' stored coordinates */
      emit_union(g, n);
      break;
    }
    if (x == 0) snprintf(par, sizeof par, "0");
    else snprintf(par, sizeof par, "dtl_sp%d_p%d", a, x - 1);
    line(g, "{ /* loop %s over the stored coordinates of %s, level %d */", v, T(g, n->tensor)->name, x);
    g->ind += 2;
    /* a parent position that may be -1 (no stored entry) gives an empty loop */
    if (n->parent_maybe_absent) snprintf(chk, sizeof chk, "%s < 0 ? 0 : ", par);
    snprintf(nxt, sizeof nxt, "%s + 1", par);
    line(g, "const int64_t %s = %s%s;", e, chk, sp_arr(g, "pos", tn, x, nxt));
    line(g, "const int64_t %s = %s - dtl_%s_lo[%d]; /* local coordinate of %s = 0 */", bb, S(g, n->base), tn, x, v);
    if (n->prefetch && !g->in_kernel) emit_prefetch(g, n, tn, e);
    if (n->ngather && !g->in_kernel && g->strip_phase != 1) {
      MBUF(rows);
      FILE *m = mopen(&rows);
      for (int u = 0; u < n->ngather; u++)
        fprintf(m, "%s%s >= 64", u ? " || " : "", row_bytes(g, n->gather_len[u], n->gather[u]->buf));
      fclose(m);
      line(g, "const bool dtl_sp%d_g%d = !dtl_%s_bd[%d] && (%s); /* the rewrite gather */", a, x, tn, x, rows);
    }
    /* the segment's first coordinate at or after the loop's start (the whole segment when the
     * loop starts at the block's first coordinate) */
    const char *start = sp_arr(g, "pos", tn, x, par);
    if (threads) {
      /* shared by the rank's threads (the pass threads): the positions below the loop's end
       * found first, so that the loop has no break */
      char key[4200];
      line(g, "const int64_t %s = %s(%s <= 0 ? %s : %s);", s0, chk, bb, start, sp_search(g, "lower", tn, x, start, e, bb));
      if (n->within) {
        line(g, "const int64_t %s = %s;", f0, e);
      } else {
        snprintf(key, sizeof key, "%s + (%s)", bb, S(g, n->hi));
        line(g, "const int64_t %s = %s < %s ? %s : %s;", f0, s0, e, sp_search(g, "lower", tn, x, s0, e, key), s0);
      }
      emit_threads_split(g, n);
      g->ind -= 2;
      line(g, "}");
      return;
    }
    if (n->sums > 1 && !g->in_kernel) { /* the rewrite sums: the loop unrolled into its registers */
      emit_sums(g, n, tn, p, bb, e, chk, start);
      snprintf(chk, sizeof chk, "dtl_sp%d_q%d", a, x);
      if (n->unroll == 4) line(g, "DTL_UNROLL4 /* the rewrite sums: the one register's loop unrolled */");
      line(g, "for (int64_t %s = %s; %s < %s; %s++) {", p, chk, p, e, p);
    } else {
      line(g, "for (int64_t %s = %s(%s <= 0 ? %s : %s); %s < %s; %s++) {", p, chk, bb, start, sp_search(g, "lower", tn, x, start, e, bb),
           p, e, p);
    }
    line(g, "  const int64_t %s = %s - %s;", v, sp_arr(g, "crd", tn, x, p), bb);
    if (!n->within) line(g, "  if (%s >= %s) break;", v, S(g, n->hi));
    if (n->ngather && !g->in_kernel && g->strip_phase != 1) {
      g->ind += 2;
      emit_gather(g, n, tn, p, bb);
      g->ind -= 2;
    }
    break;
  }
  case SL_THREAD: break;
  }
  g->ind += 2;
  line(g, "(void)%s;", v);
  const int skip = g->skip_var;
  /* a loop on one thread over its own variable: its body may move it on */
  g->skip_var = (n->loop == SL_LOCAL || n->loop == SL_LOCAL_BLOCK) && mode != 1 && !g->in_kernel && n->par == PAR_NONE ? n->var : -1;
  emit_kids(g, n);
  g->skip_var = skip;
  g->ind -= 2;
  line(g, "}");
  if (n->nhoist) g->nhoist = 0; /* the hoisted operands were this loop's */
  if (n->loop == SL_SPARSE && !mode) {
    g->ind -= 2;
    line(g, "}");
  }
}

static void emit_bind(cg_st *g, const sp_node *n) {
  const char *v = vname(g, n->var);
  line(g, "const int64_t %s = %s; /* %s */", v, S(g, n->bind), n->comment);
  line(g, "(void)%s;", v);
}

static void emit_guard(cg_st *g, const sp_node *n) {
  if (n->halo_guard) { /* the rewrite "overlap": rows in two phases */
    /* a row with no stored entry (position -1) reads no ghost */
    const char *nm = cg_bname(g, n->halo_guard - 1);
    if (n->halo_skip && g->skip_var == n->skip_var) { /* on to the next row of this phase */
      line(g, "if ((dtl_sp%d_p%d >= 0 && dtl_%s_rows && dtl_%s_rows[dtl_sp%d_p%d]) != %d) {", n->sparse, n->level, nm, nm, n->sparse,
           n->level, n->halo_phase);
      line(g, "  if (dtl_sp%d_p%d >= 0 && dtl_%s_rows) %s += dtl_halo_skip(dtl_%s_rows, dtl_sp%d_p%d, dtl_%s_nrows, %d) - 1;", n->sparse,
           n->level, nm, vname(g, n->skip_var), nm, n->sparse, n->level, nm, n->halo_phase);
      line(g, "  continue;");
      line(g, "}");
      return;
    }
    line(g, "if ((dtl_sp%d_p%d >= 0 && dtl_%s_rows && dtl_%s_rows[dtl_sp%d_p%d]) != %d) continue;", n->sparse, n->level, nm, nm,
         n->sparse, n->level, n->halo_phase);
    return;
  }
  MBUF(b);
  FILE *m = mopen(&b);
  conds(m, g, n->nconds, n->conds);
  fclose(m);
  line(g, "if (!(%s)) continue;", b);
}

/* Positions of sparse accesses: dtl_spA_pX is the position of access A at level X, -1 when
 * the coordinates bound so far hold no stored entry (a dense level by arithmetic, a
 * compressed one by a binary search in its parent's segment). */
static void emit_sppos(cg_st *g, const sp_node *n) {
  const char *t = tname(g, n->tensor), *v = vname(g, n->var);
  int a = n->sparse, x = n->level;
  char par[64];
  if (x == 0) snprintf(par, sizeof par, "0");
  else snprintf(par, sizeof par, "dtl_sp%d_p%d", a, x - 1);
  char key[120], nxt[80];
  snprintf(key, sizeof key, "%s - dtl_%s_lo[%d]", v, t, x);
  snprintf(nxt, sizeof nxt, "%s + 1", par);
  if (n->compressed && x == 0)
    line(g, "const int64_t dtl_sp%d_p0 = %s;", a, sp_search(g, "find", t, 0, sp_arr(g, "pos", t, 0, "0"), sp_arr(g, "pos", t, 0, "1"), key));
  else if (n->compressed)
    line(g, "const int64_t dtl_sp%d_p%d = %s < 0 ? -1 : %s;", a, x, par,
         sp_search(g, "find", t, x, sp_arr(g, "pos", t, x, par), sp_arr(g, "pos", t, x, nxt), key));
  else if (x == 0) line(g, "const int64_t dtl_sp%d_p0 = %s - dtl_%s_lo[0];", a, v, t);
  else line(g, "const int64_t dtl_sp%d_p%d = %s < 0 ? -1 : %s * dtl_%s_ext[%d] + (%s - dtl_%s_lo[%d]);", a, x, par, par, t, x, v, t, x);
  line(g, "(void)dtl_sp%d_p%d;", a, x);
}

/* A sparse output gains the entry (the output's coordinates, value v) unless v is zero. */
static void sp_push(cg_st *g, const sp_expr *lhs, const char *v) {
  const char *n = tname(g, lhs->tensor);
  MBUF(b);
  FILE *m = mopen(&b);
  fprintf(m, "if (%s != 0) { const int64_t dtl__c[] = {", v);
  for (int x = 0; x < lhs->nidx; x++) fprintf(m, "%s%s", x ? ", " : "", vname(g, lhs->vars[x]));
  fprintf(m, "}; if (dtl_coo_push_%s(dtl_%s_coo, dtl__c, %s)) return dtl_fail(dtl_ctx, \"out of memory for the entries of %s\"); }",
          cg_typename(T(g, lhs->tensor)->type), n, v, T(g, lhs->tensor)->name);
  fclose(m);
  line(g, "%s", b);
}

static void emit_assign(cg_st *g, const sp_node *n) {
  MBUF(b);
  FILE *m = mopen(&b);
  if (n->to_entries) {
    fprintf(m, "{ const %s dtl__v = ", cg_ctype(n->type));
    cg_print_expr(m, g->sp, n->rhs, n->type, access_local, g);
    fclose(m);
    line(g, "%s;", b);
    sp_push(g, n->lhs, "dtl__v");
    line(g, "}");
    return;
  }
  if (n->to_acc || (g->strip_phase == 1 && n == g->strip_a)) {
    if (n->to_acc) fprintf(m, "dtl__acc%s += ", g->acc_sfx ? g->acc_sfx : "");
    else fputs("dtl__r[dtl_kc] += ", m); /* the rewrite strips: the column's register */
    cg_print_expr(m, g->sp, n->rhs, n->type, access_local, g);
    fputc(';', m);
    fclose(m);
    line(g, "%s", b);
    return;
  }
  bool dev_atomic = g->in_kernel && n->atomic;
  if (dev_atomic) fprintf(m, "dtl_atomic_add_%s(&", cg_typename(n->type));
  if (n->lhs->contracted) fprintf(m, "dtl_k%d", n->lhs->tensor);
  else out_elem(m, g, n->lhs);
  /* the strips' columns left over add to what the row was set to (the rewrite strips) */
  fputs(dev_atomic ? ", " : n->store && !(g->strip_phase == 2 && n == g->strip_a) ? " = " : " += ", m);
  cg_print_expr(m, g->sp, n->rhs, n->type, access_local, g);
  fputs(dev_atomic ? ");" : ";", m);
  fclose(m);
  if (n->atomic && !g->in_kernel) line(g, "#pragma omp atomic");
  line(g, "%s", b);
}

/* The register sum acc added to (or stored in) the SN_ACC n's output element. */
static void acc_store(cg_st *g, const sp_node *n, const char *acc) {
  if (n->to_entries) {
    sp_push(g, n->lhs, acc);
    return;
  }
  MBUF(b);
  FILE *m = mopen(&b);
  out_elem(m, g, n->lhs);
  fprintf(m, n->store ? " = %s;" : " += %s;", acc);
  fclose(m);
  if (n->atomic) line(g, "#pragma omp atomic");
  line(g, "%s", b);
}

/* The innermost loop's sum in a register, added to the output element after it. */
static void emit_acc(cg_st *g, const sp_node *n) {
  line(g, "{ /* %s */", n->comment);
  g->ind += 2;
  line(g, "%s dtl__acc = (%s)0;", cg_ctype(n->type), cg_ctype(n->type));
  const bool sums = n->sums > 1 && !g->in_kernel;
  if (sums) /* the rewrite sums: the loop's other registers */
    for (int u = 1; u < n->sums; u++) line(g, "%s dtl__acc%d = (%s)0;", cg_ctype(n->type), u, cg_ctype(n->type));
  emit_kids(g, n);
  if (sums) {
    MBUF(b);
    FILE *m = mopen(&b);
    for (int u = 1; u < n->sums; u++) fprintf(m, "%sdtl__acc%d", u > 1 ? " + " : "", u);
    fclose(m);
    line(g, "dtl__acc += %s;", b);
  }
  acc_store(g, n, "dtl__acc");
  g->ind -= 2;
  line(g, "}");
}

/* the strip's registers set from (or stored to) the output: each column's element, at K's
 * bindings and under K's guards (spmd_strips: they read only the column and what L does not move) */
static void strip_ends(cg_st *g, const sp_node *K, const char *lanes, const char *what) {
  const sp_node *heads[64];
  int nh = spmd_strip_heads(K, heads, 64);
  line(g, "for (int64_t dtl_kc = 0; dtl_kc < %s; dtl_kc++) {", lanes);
  g->ind += 2;
  line(g, "const int64_t %s = dtl_kq + dtl_kc;", vname(g, K->var));
  line(g, "(void)%s;", vname(g, K->var));
  for (int h = 0; h < nh && h < 64; h++)
    if (heads[h]->kind == SN_BIND || heads[h]->kind == SN_GUARD) cg_node(g, heads[h]);
  line(g, "%s", what);
  g->ind -= 2;
  line(g, "}");
}

static void strip_pass(cg_st *g, const sp_node *n, const sp_node *K, const sp_node *a, const char *lanes, const char *out) {
  MBUF(set);
  FILE *m = mopen(&set);
  fprintf(m, "dtl__r[dtl_kc] = %s;", a->store ? "0" : out);
  fclose(m);
  strip_ends(g, K, lanes, set);
  g->strip_K = K, g->strip_a = a, g->strip_phase = 1, g->strip_w = lanes;
  emit_loop(g, n);
  g->strip_K = g->strip_a = NULL, g->strip_phase = 0, g->strip_w = NULL;
  MBUF(put);
  m = mopen(&put);
  fprintf(m, "%s = dtl__r[dtl_kc];", out);
  fclose(m);
  strip_ends(g, K, lanes, put);
}

/* The rewrite "strips" (spmd.h: spmd_strips): the columns of L's inner loop K in strips of
 * n->strip registers, each strip summed over the whole of L; the last strip, of the columns
 * left over, with as many registers as it has columns. */
static void emit_strips(cg_st *g, const sp_node *n) {
  const sp_node *a, *K = spmd_strip_parts(n, &a);
  const int W = n->strip;
  /* a loop that gathers rows at scattered coordinates (the pass gather marked it) */
  const bool gathers = n->loop == SL_SPARSE && n->ngather;
  MBUF(o);
  FILE *m = mopen(&o);
  out_elem(m, g, a->lhs);
  fclose(m);
  line(g, "{ /* loop %s: the rewrite strips, the columns of %s summed in registers, %d at a time */", g->sp->vars[n->var].name,
       g->sp->vars[K->var].name, W);
  g->ind += 2;
  line(g, "const int64_t dtl_khi = dtl_max((int64_t)(%s), 0);", S(g, K->hi));
  if (gathers) /* rows gathered at scattered coordinates: at most two whole strips */
    line(g, "const int64_t dtl_kend = dtl_%s_bd[%d] || (dtl_khi %% %d == 0 && dtl_khi <= %d) ? dtl_khi / %d * %d : 0;",
         tname(g, n->tensor), n->level, W, 2 * W, W, W);
  else
    line(g, "const int64_t dtl_kend = dtl_khi / %d * %d;", W, W);
  line(g, "for (int64_t dtl_kq = 0; dtl_kq < dtl_kend; dtl_kq += %d) { /* a whole strip */", W);
  g->ind += 2;
  line(g, "%s dtl__r[%d];", cg_ctype(a->type), W);
  char w[16];
  snprintf(w, sizeof w, "%d", W);
  strip_pass(g, n, K, a, w, o);
  g->ind -= 2;
  line(g, "}");
  if (gathers) {
    line(g, "if (dtl_kend < dtl_khi) { /* the columns left over: the loops as without the rewrite, from kend */");
    g->ind += 2;
    if (a->store) { /* no zeroing pass ran (the rewrite store): these columns start from zero */
      line(g, "const int64_t dtl_kq = dtl_kend;");
      MBUF(z);
      m = mopen(&z);
      fprintf(m, "%s = 0;", o);
      fclose(m);
      strip_ends(g, K, "dtl_khi - dtl_kq", z);
    }
    g->strip_K = K, g->strip_a = a, g->strip_phase = 2;
    emit_loop(g, n);
    g->strip_K = g->strip_a = NULL, g->strip_phase = 0;
  } else {
    line(g, "if (dtl_kend < dtl_khi) { /* the columns left over: a strip of as many registers */");
    g->ind += 2;
    line(g, "const int64_t dtl_kq = dtl_kend;");
    line(g, "%s dtl__r[%d];", cg_ctype(a->type), W);
    strip_pass(g, n, K, a, "dtl_khi - dtl_kq", o);
  }
  g->ind -= 2;
  line(g, "}");
  g->ind -= 2;
  line(g, "}");
}

/* ... and its inner loop K as the lanes of one strip: K's operands read once, then K's body
 * once per column of the strip, adding to the column's register */
static void emit_strip_lanes(cg_st *g, const sp_node *n) {
  const char *v = vname(g, n->var);
  line(g, "/* loop %s (%s): one strip's columns */", g->sp->vars[n->var].name, n->comment);
  if (n->nhoist) emit_hoist(g, n);
  line(g, "DTL_LANES /* vectorized as a loop, not unrolled first */");
  line(g, "for (int64_t dtl_kc = 0; dtl_kc < %s; dtl_kc++) {", g->strip_w);
  g->ind += 2;
  line(g, "const int64_t %s = dtl_kq + dtl_kc;", v);
  line(g, "(void)%s;", v);
  emit_kids(g, n);
  g->ind -= 2;
  line(g, "}");
  if (n->nhoist) g->nhoist = 0;
}

/* opens the block of row c of a jammed loop: the loop's variable and its bindings */
static void jam_row(cg_st *g, const char *v, int c, const sp_node *const *binds, int nb) {
  line(g, "{ const int64_t %s = dtl_jq + %d; (void)%s;", v, c, v);
  g->ind += 2;
  for (int b = 0; b < nb; b++) cg_node(g, binds[b]);
}

/* The rewrite "jam" (spmd.h: spmd_jam): DTL_JAM rows' register sums in one pass of their
 * inner loop, each row's bindings in a block of its own; the rows left over as without it. */
static void emit_jam(cg_st *g, const sp_node *n, int mode) {
  const char *v = vname(g, n->var);
  const sp_node *binds[16];
  int nb, J = n->jam;
  const sp_node *acc = spmd_jam_parts(n, binds, &nb), *I = acc;
  do I = I->nkids == 1 ? I->kids[0] : NULL;
  while (I && I->kind == SN_SEQ);
  const char *ty = cg_ctype(acc->type), *iv = vname(g, I->var);
  if (mode != 2) line(g, "/* loop %s (%s): the rewrite jam, the sums of %d rows in one pass */", g->sp->vars[n->var].name, n->comment, J);
  line(g, "{ const int64_t dtl_jlo = %s, dtl_jhi = %s;", n->loop == SL_LOCAL_BLOCK ? S(g, n->lo) : "0", S(g, n->hi));
  g->ind += 2;
  line(g, "const int64_t dtl_jend = dtl_jlo + dtl_max(dtl_jhi - dtl_jlo, 0) / %d * %d;", J, J);
  emit_threads(g, n, mode);
  line(g, "for (int64_t dtl_jq = dtl_jlo; dtl_jq < dtl_jend; dtl_jq += %d) {", J);
  g->ind += 2;
  char list[256] = "";
  for (int c = 0; c < J && c < 16; c++) {
    line(g, "%s dtl__acc%d = (%s)0;", ty, c, ty);
    char one[24];
    snprintf(one, sizeof one, "%sdtl__acc%d", c ? ", " : "", c);
    strcat(list, one);
  }
  line(g, "/* loop %s (%s) */", g->sp->vars[I->var].name, I->comment);
  line(g, "#ifdef _OPENMP");
  line(g, "#pragma omp simd reduction(+: %s)", list);
  line(g, "#endif");
  line(g, "for (int64_t %s = 0; %s < %s; %s++) {", iv, iv, S(g, I->hi), iv);
  g->ind += 2;
  line(g, "(void)%s;", iv);
  for (int c = 0; c < J && c < 16; c++) {
    jam_row(g, v, c, binds, nb);
    char sfx[8];
    snprintf(sfx, sizeof sfx, "%d", c);
    g->acc_sfx = sfx;
    emit_kids(g, I);
    g->acc_sfx = NULL;
    g->ind -= 2;
    line(g, "}");
  }
  g->ind -= 2;
  line(g, "}");
  for (int c = 0; c < J && c < 16; c++) {
    jam_row(g, v, c, binds, nb);
    char a[24];
    snprintf(a, sizeof a, "dtl__acc%d", c);
    acc_store(g, acc, a);
    g->ind -= 2;
    line(g, "}");
  }
  g->ind -= 2;
  line(g, "}");
  line(g, "for (int64_t %s = dtl_jend; %s < dtl_jhi; %s++) { /* the rows left over */", v, v, v);
  g->ind += 2;
  line(g, "(void)%s;", v);
  emit_kids(g, n);
  g->ind -= 2;
  line(g, "}");
  g->ind -= 2;
  line(g, "}");
}

/* precompute: the workspace's loop */
static void emit_producer(cg_st *g, const sp_node *n) {
  const char *wn = g->sp->works[n->work].name, *v = vname(g, n->var);
  line(g, "/* precompute: workspace %s */", wn);
  line(g, "for (int64_t %s = 0; %s < %s; %s++)", v, v, S(g, n->hi), v);
  MBUF(b);
  FILE *m = mopen(&b);
  fprintf(m, "  dtl_w_%s[%s] = ", wn, v);
  cg_print_expr(m, g->sp, n->rhs, n->type, access_local, g);
  fputc(';', m);
  fclose(m);
  line(g, "%s", b);
}

/* ---- leaf kernels -------------------------------------------------------------------------- */
/* Offsets of a kernel operand: the element at the lower corner of the kernel's block. */
static void kernel_ptr(cg_st *g, FILE *m, const sp_node *k, const sp_expr *e) {
  const char *n = cg_bname(g, e->buf);
  fprintf(m, "&dtl_%s[", n);
  if (!e->nidx) fputc('0', m);
  for (int x = 0; x < e->nidx; x++) {
    if (x) fputs(" + ", m);
    int kk = -1;
    for (int q = 0; q < k->nk; q++)
      if (k->korig[q] == e->vars[x]) kk = q;
    fputc('(', m);
    if (kk >= 0) cg_sym(m, g->sp, k->klo[kk], false);
    else fputs(vname(g, e->vars[x]), m);
    fprintf(m, " - dtl_%s_lo[%d])", n, x);
    if (x + 1 < e->nidx) fprintf(m, " * dtl_%s_st[%d]", n, x);
  }
  fputc(']', m);
}

static void stride_of(cg_st *g, FILE *m, const sp_expr *e, int x) {
  if (x < 0 || x + 1 >= e->nidx) fputs("1", m);
  else fprintf(m, "dtl_%s_st[%d]", cg_bname(g, e->buf), x);
}

/* A leaf kernel call: its host entry point (checked where it can fail), or on the device
 * its device entry point with the context first, checked. */
static void kopen(const cg_st *g, FILE *m, const kc_info *in, bool store) {
  if (g->sp->cuda) fprintf(m, "if (%s(dtl_ctx, ", in->device);
  else fprintf(m, "%s%s(", in->host_fails ? "if (" : "", store ? in->host_store : in->host);
}
static void kclose(const cg_st *g, FILE *m, const kc_info *in, const char *cleanup) {
  const char *o = *cleanup ? "{ " : "", *c = *cleanup ? " }" : "";
  if (g->sp->cuda) fprintf(m, ")) %s%sreturn 1;%s", o, cleanup, c);
  else if (in->host_fails) fprintf(m, ")) %s%sreturn dtl_fail(dtl_ctx, \"%s\");%s", o, cleanup, in->host_fails, c);
  else fputs(");", m);
}

/* The kernel dimension that storage position x of operand e walks (-1: none). */
static int kdim_of(const sp_node *k, const sp_expr *e, int x) {
  for (int q = 0; q < k->nk; q++)
    if (k->korig[q] == e->vars[x]) return q;
  return -1;
}

/* The stride of storage position x of the scaled copy of e (dense over the kernel's block, in
 * e's storage order): the extents of the later positions that the kernel walks; at x = -1,
 * the elements of the whole block. */
static void scaled_stride(FILE *m, const sp_node *k, const sp_expr *e, int x) {
  fputc('1', m);
  for (int y = x + 1; y < e->nidx; y++)
    if (kdim_of(k, e, y) >= 0) fprintf(m, " * dtl__n%d", kdim_of(k, e, y));
}

/* The call the program describes, the arguments in the catalogue's order; operand `scaled`
 * (0: none) reads the scaled copy dtl__s, and with `out` the output is that pointer; where the
 * call fails, `cleanup` runs before the return. */
static void kernel_call(cg_st *g, const sp_node *n, int scaled, const char *out, const char *cleanup) {
  const kc_call *call = n->kcall;
  fe_type ty = n->type;
  MBUF(b);
  FILE *m = mopen(&b);
  for (int a = 0; a < call->nargs; a++)
    if (call->arg[a].kind == KC_ARG_SCALAR) {
      fprintf(m, "const %s dtl__alpha = ", cg_ctype(ty));
      cg_print_expr(m, g->sp, n->kops[call->arg[a].operand], ty, access_local, g);
      fprintf(m, ";\n%*s", g->ind, "");
    }
  kopen(g, m, call->kernel, n->store);
  for (int a = 0; a < call->nargs; a++) {
    const kc_arg *x = &call->arg[a];
    const sp_expr *e = x->operand >= 0 && x->operand < n->nkops ? n->kops[x->operand] : NULL;
    bool s = scaled && x->operand == scaled;
    if (a) fputs(", ", m);
    switch (x->kind) {
    case KC_ARG_TYPE: fputs(cg_dtltype(ty), m); break;
    case KC_ARG_FLAG: fprintf(m, "%d", x->value); break;
    case KC_ARG_EXTENT: fprintf(m, "dtl__n%d", x->value); break;
    case KC_ARG_POINTER:
      if (s) fputs("dtl__s", m);
      else if (out && x->operand == 0) fputs(out, m);
      else kernel_ptr(g, m, n, e);
      break;
    case KC_ARG_STRIDE:
      if (s) scaled_stride(m, n, e, x->pos);
      else stride_of(g, m, e, x->pos);
      break;
    case KC_ARG_SCALAR: fputs("&dtl__alpha", m); break;
    }
  }
  kclose(g, m, call->kernel, cleanup);
  fclose(m);
  line(g, "%s", b);
}

/* The offset of row (dtl__c0, dtl__c1, ...) of operand e's walked positions pos[0..np-1) (the
 * last is the row's own): in e itself, or in its scaled copy. */
static void row_offset(cg_st *g, FILE *m, const sp_node *k, const sp_expr *e, const int *pos, int np, bool copy) {
  for (int r = 0; r + 1 < np; r++) {
    fprintf(m, " + dtl__c%d * (", r);
    if (copy) scaled_stride(m, k, e, pos[r]);
    else stride_of(g, m, e, pos[r]);
    fputc(')', m);
  }
}

/* A scaled product (sp_node.kcoef): the call runs on a copy of factor q times the coefficient,
 * dense over the kernel's block (rows of its innermost walked position added by axpy into a
 * zeroed buffer, on the host or the device), then frees it. */
static void kernel_scaled_factor(cg_st *g, const sp_node *n, int q) {
  const sp_expr *e = n->kops[q];
  const bool cu = g->sp->cuda;
  const char *ct = cg_ctype(n->type), *dt = cg_dtltype(n->type);
  MBUF(size);
  FILE *m = mopen(&size);
  scaled_stride(m, n, e, -1);
  fclose(m);
  line(g, "const int64_t dtl__ns = %s;", size);
  if (cu) {
    line(g, "%s *dtl__s = dtl_cu_malloc((size_t)dtl__ns * sizeof(%s));", ct, ct);
    line(g, "if (!dtl__s) return dtl_fail(dtl_ctx, \"out of device memory for a scaled operand of %s\");", ir_kernel_name(n->kernel));
    line(g, "if (dtl_cu_zero(dtl_ctx, %s, dtl__s, dtl__ns)) { dtl_cu_free(dtl__s); return 1; }", dt);
  } else {
    line(g, "%s *dtl__s = calloc((size_t)(dtl__ns > 0 ? dtl__ns : 1), sizeof(%s));", ct, ct);
    line(g, "if (!dtl__s) return dtl_fail(dtl_ctx, \"out of memory for a scaled operand of %s\");", ir_kernel_name(n->kernel));
  }
  /* the walked positions, in storage order: loops over all but the last, a row of the last */
  int pos[KC_MAX_POS], np = 0;
  for (int x = 0; x < e->nidx && np < KC_MAX_POS; x++)
    if (kdim_of(n, e, x) >= 0) pos[np++] = x;
  int open = 0;
  for (int r = 0; r + 1 < np; r++, open++)
    line(g, "%*sfor (int64_t dtl__c%d = 0; dtl__c%d < dtl__n%d; dtl__c%d++)", 2 * r, "", r, r, kdim_of(n, e, pos[r]), r);
  MBUF(src);
  m = mopen(&src);
  kernel_ptr(g, m, n, e);
  row_offset(g, m, n, e, pos, np, false);
  fclose(m);
  MBUF(dst);
  m = mopen(&dst);
  fputs("dtl__s", m);
  row_offset(g, m, n, e, pos, np, true);
  fclose(m);
  MBUF(inc);
  m = mopen(&inc);
  stride_of(g, m, e, pos[np - 1]);
  fclose(m);
  if (cu)
    line(g, "%*sif (dtl_cu_axpy(dtl_ctx, %s, dtl__n%d, &dtl__coef, %s, %s, %s, 1)) { dtl_cu_free(dtl__s); return 1; }", 2 * open, "",
         dt, kdim_of(n, e, pos[np - 1]), src, inc, dst);
  else
    line(g, "%*sdtl_axpy(%s, dtl__n%d, &dtl__coef, %s, %s, %s, 1);", 2 * open, "", dt, kdim_of(n, e, pos[np - 1]), src, inc, dst);
  kernel_call(g, n, q, NULL, cu ? "dtl_cu_free(dtl__s); " : "free(dtl__s); ");
  line(g, "%s(dtl__s);", cu ? "dtl_cu_free" : "free");
}

/* The call the program describes (kernel catalogue order): extents of the kernel's block,
 * then its arguments.  A scaled product (sp_node.kcoef) runs on a scaled copy of its smallest
 * factor (the fewest elements in this call's block, chosen at run time), or, where the
 * output is a scalar, sums into a temporary that it adds times the coefficient. */
static void emit_kernel(cg_st *g, const sp_node *n) {
  int nk = n->nk;
  line(g, "/* substitute(%s): leaf kernel over the %d innermost loops */", ir_kernel_name(n->kernel), nk);
  line(g, "{");
  g->ind += 2;
  for (int q = 0; q < nk; q++)
    line(g, "const int64_t dtl__n%d = %s; /* extent of %s */", q, S(g, sym_sub(n->khi[q], n->klo[q])), g->sp->vars[n->korig[q]].name);
  char cond[256] = "1"; /* a storing kernel writes its block also where a summed extent is 0 */
  for (int q = 0; q < nk && !n->store; q++) {
    char one[32];
    snprintf(one, sizeof one, "%sdtl__n%d > 0", q ? " && " : "", q);
    if (!q) cond[0] = 0;
    strcat(cond, one);
  }
  line(g, "if (%s) {", cond);
  g->ind += 2;
  fe_type ty = n->type;
  const kc_call *call = n->kcall;
  if (!call) {
    line(g, "#error \"substitute(%s): the statement does not match the kernel\"", ir_kernel_name(n->kernel));
  } else if (!n->kcoef) {
    kernel_call(g, n, 0, NULL, "");
  } else {
    const char *ct = cg_ctype(ty);
    MBUF(b);
    FILE *m = mopen(&b);
    cg_print_expr(m, g->sp, n->kcoef, ty, access_local, g);
    fclose(m);
    line(g, "const %s dtl__coef = %s; /* the product's coefficient */", ct, b);
    int cand[KC_MAX_OPERANDS], nc = 0;
    for (int q = 1; q < n->nkops; q++) {
      bool walked = false;
      for (int x = 0; n->kops[q]->kind == SE_ACCESS && x < n->kops[q]->nidx; x++) walked |= kdim_of(n, n->kops[q], x) >= 0;
      if (walked) cand[nc++] = q;
    }
    bool scalar_out = true;
    for (int x = 0; x < n->kops[0]->nidx; x++) scalar_out &= kdim_of(n, n->kops[0], x) < 0;
    if (scalar_out || !nc) { /* dot, innerprod: the call's sum in a temporary */
      MBUF(o);
      m = mopen(&o);
      kernel_ptr(g, m, n, n->kops[0]);
      fclose(m);
      if (g->sp->cuda) {
        line(g, "%s *dtl__t = dtl_cu_malloc(sizeof(%s));", ct, ct);
        line(g, "if (!dtl__t) return dtl_fail(dtl_ctx, \"out of device memory for the sum of %s\");", ir_kernel_name(n->kernel));
        line(g, "if (dtl_cu_zero(dtl_ctx, %s, dtl__t, 1)) { dtl_cu_free(dtl__t); return 1; }", cg_dtltype(ty));
        kernel_call(g, n, 0, "dtl__t", "dtl_cu_free(dtl__t); ");
        line(g, "if (dtl_cu_axpy(dtl_ctx, %s, 1, &dtl__coef, dtl__t, 1, %s, 1)) { dtl_cu_free(dtl__t); return 1; }", cg_dtltype(ty), o);
        line(g, "dtl_cu_free(dtl__t);");
      } else {
        line(g, "%s dtl__t = (%s)0;", ct, ct);
        kernel_call(g, n, 0, "&dtl__t", "");
        line(g, "*(%s) %s dtl__coef * dtl__t;", o, n->store ? "=" : "+=");
      }
    } else {
      /* the factor with the fewest elements in this call */
      line(g, "int dtl__q = %d;", cand[0]);
      for (int c = 0; c < nc; c++) {
        m = mopen(&b);
        scaled_stride(m, n, n->kops[cand[c]], -1);
        fclose(m);
        if (!c) line(g, "int64_t dtl__least = %s;", b);
        else line(g, "if (%s < dtl__least) dtl__q = %d, dtl__least = %s;", b, cand[c], b);
      }
      line(g, "(void)dtl__least;");
      for (int c = 0; c < nc; c++) {
        line(g, "%sif (dtl__q == %d) {", c ? "else " : "", cand[c]);
        g->ind += 2;
        kernel_scaled_factor(g, n, cand[c]);
        g->ind -= 2;
        line(g, "}");
      }
    }
  }
  g->ind -= 2;
  line(g, "}");
  g->ind -= 2;
  line(g, "}");
}

void cg_node(cg_st *g, const sp_node *n) {
  switch (n->kind) {
  case SN_SEQ: emit_kids(g, n); return;
  case SN_LOOP: emit_loop(g, n); return;
  case SN_BIND: emit_bind(g, n); return;
  case SN_GUARD: emit_guard(g, n); return;
  case SN_IF: emit_if(g, n); return;
  case SN_COMM: emit_comm(g, n); return;
  case SN_INIT: emit_init(g, n); return;
  case SN_PRODUCER: emit_producer(g, n); return;
  case SN_SPPOS: emit_sppos(g, n); return;
  case SN_ACC: emit_acc(g, n); return;
  case SN_KERNEL: emit_kernel(g, n); return;
  case SN_ASSIGN: emit_assign(g, n); return;
  case SN_DEVICE: cg_emit_device(g, n); return;
  case SN_WIDTH: emit_width(g, n); return;
  case SN_REGISTER:
    line(g, "%s dtl_k%d = 0; /* temporary %s: its element in a register, never stored */", cg_ctype(n->type), n->tensor,
         g->sp->tensors[n->tensor].name);
    line(g, "(void)dtl_k%d;", n->tensor);
    return;
  }
}

/* ---- statement functions ------------------------------------------------------------------ */
/* Box functions: every rank evaluates the box of every other rank (no handshake). */
static void emit_box_fns(FILE *f, const sp_program *sp, const sp_func *fn, const cg_options *o) {
  for (int q = 0; q < fn->nbufs; q++) {
    const sp_buf *b = &sp->bufs[fn->bufs[q]];
    if (b->boxfn < 0) continue;
    fprintf(f, "/* box of %s %s at statement %d for the rank at dtl_coords */\n", b->output ? "produced" : "needed",
            sp->tensors[b->tensor].name, fn->index + 1);
    fprintf(f, "static void %s_s%d_box%d(const void *dtl_arg, const int64_t *dtl_coords, dtl_box *dtl_b) {\n", fnp(o), fn->index,
            b->boxfn);
    fprintf(f, "  const %s_s%d_args *dtl_a = dtl_arg;\n  (void)dtl_coords;\n", fnp(o), fn->index);
    declare_params(f, sp, "dtl_a->plan->p", 2);
    declare_splits(f, sp, "dtl_a->plan", 2);
    cg_st g = {.f = f, .sp = sp, .fn = fn, .o = o, .ind = 2, .skip_var = -1};
    emit_box(&g, b->order, b->lo, b->hi, "dtl_b", true);
    fputs("}\n\n", f);
  }
}

static void emit_stmt(FILE *f, FILE *decl, FILE *cu, const sp_program *sp, const sp_func *fn, const cg_options *o) {
  fprintf(f, "/* loop values a box function needs */\ntypedef struct {\n  const %s_plan *plan;\n  int64_t v[%d];\n} %s_s%d_args;\n\n",
          o->prefix, fn->nargs, fnp(o), fn->index);
  emit_box_fns(f, sp, fn, o);
  fprintf(f, "/* statement %d (%s:%d): %s\n", fn->index + 1, o->source_name, fn->src_line, fn->text);
  fputs(" * concrete index notation:\n", f);
  char *cin = strdup(fn->cin);
  for (char *ln = strtok(cin, "\n"); ln; ln = strtok(NULL, "\n")) {
    /* keep comment terminators out of the comment */
    for (char *x = ln; (x = strstr(x, "*/"));) x[0] = '+';
    fprintf(f, " *   %s\n", ln);
  }
  free(cin);
  fputs(" */\n", f);
  if (fn->clones) fputs("DTL_LEAF_CLONES /* the rewrite clones: also compiled for AVX2 */\n", f);
  fprintf(f, "static int %s_s%d(%s_plan *dtl_plan", fnp(o), fn->index, o->prefix);
  for (int t = 0; t < sp->ntensors; t++) cg_tensor_param(f, sp, t);
  fputs(") {\n", f);
  fprintf(f, "  dtl_ctx *dtl_ctx = dtl_plan->ctx;\n  const int64_t *dtl_coords = dtl_ctx->coords;\n  (void)dtl_coords;\n");
  for (int t = 0; t < sp->ntensors; t++) fprintf(f, "  (void)%s;\n", cg_tensor(sp, t));
  fprintf(f, "  %s_s%d_args dtl_args = {.plan = dtl_plan};\n  (void)dtl_args;\n", fnp(o), fn->index);
  declare_params(f, sp, "dtl_plan->p", 2);
  declare_splits(f, sp, "dtl_plan", 2);
  cg_st g = {.f = f, .sp = sp, .fn = fn, .o = o, .ind = 2, .cu = cu, .decl = decl, .skip_var = -1};
  cg_node(&g, fn->body);
  fputs("  return 0;\n}\n\n", f);
}
/* ---- the plan object, library API ------------------------------------------------------------- */
/* Balanced partitions: PREFIX_balance holds, per balanced tensor, the boundaries of its blocks
 * on each grid dim (NULL: equal extents), and PREFIX_plan_create_balanced takes them. */
/* plan_create: each balanced partition's boundaries, given or of equal extents */
static void emit_split_init(FILE *c, const sp_program *sp) {
  for (int id = 0; id < sp->nsplits; id++) {
    int t = sp->splits[id].tensor, g = sp->splits[id].gdim, x = sp->splits[id].tdim;
    fprintf(c, "  /* balanced partition %d: %s, dimension %d over grid dim %d */\n", id, sp->tensors[t].name, x, g);
    fprintf(c, "  dtl_plan->split[%d] = malloc(sizeof(int64_t) * (size_t)(dtl_plan->ctx->dims[%d] + 1));\n", id, g);
    fprintf(c, "  if (!dtl_plan->split[%d]) {\n    snprintf(dtl_plan->err, sizeof dtl_plan->err, \"out of memory\");\n    return 1;\n  }\n", id);
    fprintf(c, "  if (dtl_split_init(dtl_plan->ctx, %d, ", g);
    cg_sym(c, sp, sp->splits[id].extent, false);
    /* the struct read as its array of pointers (a field's name may be a macro's) */
    int k = 0;
    for (int u = 0; u < t; u++) k += sp->tensors[u].balanced;
    fprintf(c, ", dtl_bal ? ((const int64_t *const *)dtl_bal)[%d] : NULL, \"%s\", dtl_plan->split[%d])) {\n"
               "    snprintf(dtl_plan->err, sizeof dtl_plan->err, \"%%s\", dtl_ctx_error(dtl_plan->ctx));\n    return 1;\n  }\n",
            k * sp->ndims + g, sp->tensors[t].name, id);
  }
  declare_splits(c, sp, "dtl_plan", 2);
}

static void emit_balance_api(FILE *h, const sp_program *sp, const cg_options *o) {
  if (!sp->nsplits) return;
  fprintf(h, "/* Balanced partitions (`balanced`): for each such tensor T, T[g] is NULL (blocks of equal\n"
             " * extent) or the G + 1 boundaries of its blocks on grid dim g (G: that dim's size; block c is\n"
             " * [T[g][c], T[g][c + 1])), the same on every rank, e.g. from dtl_balance_split. */\n");
  for (int t = 0; t < sp->ntensors; t++)
    if (sp->tensors[t].balanced) fprintf(h, "#pragma push_macro(\"%s\")\n#undef %s\n", sp->tensors[t].name, sp->tensors[t].name);
  fputs("typedef struct {", h);
  for (int t = 0; t < sp->ntensors; t++)
    if (sp->tensors[t].balanced) fprintf(h, " const int64_t *%s[%d];", sp->tensors[t].name, sp->ndims);
  fprintf(h, " } %s_balance;\n", o->prefix);
  for (int t = sp->ntensors - 1; t >= 0; t--)
    if (sp->tensors[t].balanced) fprintf(h, "#pragma pop_macro(\"%s\")\n", sp->tensors[t].name);
  fprintf(h, "/* plan_create with these blocks (b NULL: plan_create) */\n");
  fprintf(h, "int %s_plan_create_balanced(MPI_Comm comm, const %s_params *p, const %s_balance *b, %s_plan **plan);\n", o->prefix,
          o->prefix, o->prefix, o->prefix);
}

/* Dense float and double matrices of a CPU kernel also move to and from ScaLAPACK's
 * block-cyclic layout (PREFIX_T_import_scalapack / _export_scalapack). */
static bool has_scalapack_layout(const sp_program *sp, int t) {
  const sp_tensor *x = &sp->tensors[t];
  return !sp->cuda && !x->temp && !x->sparse && x->order == 2 && (x->type == FE_DOUBLE || x->type == FE_FLOAT);
}

static void emit_scalapack_decls(FILE *h, const sp_program *sp, const cg_options *o) {
  bool any = false;
  for (int t = 0; t < sp->ntensors; t++) any |= has_scalapack_layout(sp, t);
  if (!any) return;
  fprintf(h, "/* Collective.  Move a matrix between a ScaLAPACK application's 2-D block-cyclic layout and\n"
             " * this rank's block: import sets T = op(sub(A)), sub(A) = A(ia:, ja:) (1-based) of the\n"
             " * matrix with descriptor desca whose local part (column-major) is a; op per trans ('N', 'T'\n"
             " * or 'C').  export sets sub(C) = beta * sub(C) + alpha * op(T) (as PDGEADD; beta = 0: sub(C)\n"
             " * is not read).  myrow, mycol: this process's coordinates in the BLACS grid of the\n"
             " * descriptor's context (Cblacs_gridinfo), -1 on a rank outside the grid; the grid's\n"
             " * processes are ranks of the plan's communicator, in any order. */\n");
  for (int t = 0; t < sp->ntensors; t++) {
    if (!has_scalapack_layout(sp, t)) continue;
    const char *ct = cg_ctype(sp->tensors[t].type), *n = sp->tensors[t].name;
    fprintf(h, "int %s_%s_import_scalapack(%s_plan *plan, char trans, const %s *a, int ia, int ja, const int desca[9],\n"
               "    int myrow, int mycol, %s *block);\n", o->prefix, n, o->prefix, ct, ct);
    fprintf(h, "int %s_%s_export_scalapack(%s_plan *plan, char trans, %s alpha, const %s *block, %s beta, %s *c, int ic,\n"
               "    int jc, const int descc[9], int myrow, int mycol);\n", o->prefix, n, o->prefix, ct, ct, ct, ct);
  }
}

static void emit_scalapack_defs(FILE *c, const sp_program *sp, const char *P) {
  for (int t = 0; t < sp->ntensors; t++) {
    if (!has_scalapack_layout(sp, t)) continue;
    const char *ct = cg_ctype(sp->tensors[t].type), *n = sp->tensors[t].name, *dt = cg_dtltype(sp->tensors[t].type);
    fprintf(c, "int %s_%s_import_scalapack(%s_plan *plan, char trans, const %s *a, int ia, int ja, const int desca[9],\n"
               "    int myrow, int mycol, %s *block) {\n"
               "  if (!plan || !plan->ctx) return 1;\n"
               "  const dtl_blockcyclic bc = {desca, ia, ja, trans, myrow, mycol};\n"
               "  return dtl_scalapack_import(plan->ctx, &plan->dist[%d], %s, &bc, a, block, &plan->own[%d]);\n}\n\n",
            P, n, P, ct, ct, t, dt, t);
    fprintf(c, "int %s_%s_export_scalapack(%s_plan *plan, char trans, %s alpha, const %s *block, %s beta, %s *c, int ic,\n"
               "    int jc, const int descc[9], int myrow, int mycol) {\n"
               "  if (!plan || !plan->ctx) return 1;\n"
               "  const dtl_blockcyclic bc = {descc, ic, jc, trans, myrow, mycol};\n"
               "  return dtl_scalapack_export(plan->ctx, &plan->dist[%d], %s, block, &plan->own[%d], alpha, beta, &bc, c);\n}\n\n",
            P, n, P, ct, ct, ct, ct, t, dt, t);
  }
}

static void emit_header(FILE *h, const sp_program *sp, const cg_options *o) {
  /* the guard spells the prefix as it is (upper-casing would make a.h and A.h one guard) */
  char guard[512];
  snprintf(guard, sizeof guard, "DTL_GENERATED_%s_H", o->prefix);
  fprintf(h, "/* %s.h -- generated by distalc " PACKAGE_VERSION " from %s.  Do not edit. */\n", o->prefix, o->source_name);
  fprintf(h, "#ifndef %s\n#define %s\n\n#include <mpi.h>\n#include <stdint.h>\n%s\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n", guard, guard,
          sp->any_sparse ? "#include <distal/runtime.h> /* dtl_sparse */\n" : "");
  fprintf(h, "typedef struct %s_plan %s_plan;\n", o->prefix, o->prefix);
  /* The fields are the params' own names (section 7); a macro of the same name from a header
   * included before this one must not rewrite them, so each is saved and restored around the
   * struct.  Names that cannot be fields (keywords, reserved identifiers) are rejected by sema. */
  if (sp->nparams) fputs("/* (the pragmas keep macros that share a param's name out of the struct) */\n", h);
  for (int i = 0; i < sp->nparams; i++)
    fprintf(h, "#pragma push_macro(\"%s\")\n#undef %s\n", sp->params[i].name, sp->params[i].name);
  /* A field named int64_t hides the type from the fields after it in C++ (not in C, where
   * members have a namespace of their own): C++ then reads the type from the global scope. */
  bool hides = false;
  for (int i = 0; i < sp->nparams; i++) hides = hides || !strcmp(sp->params[i].name, "int64_t");
  for (int pass = hides ? 0 : 1; pass < 2; pass++) {
    if (hides) fputs(pass ? "#else\n" : "#ifdef __cplusplus\n", h);
    fputs("typedef struct {", h);
    for (int i = 0; i < sp->nparams; i++)
      fprintf(h, " %s%s %s;", !pass && !sp->params[i].is_float ? "::" : "", cg_param_ctype(sp, i), sp->params[i].name);
    if (!sp->nparams) fputs(" int64_t unused_;", h);
    fprintf(h, " } %s_params; /* one field per param (int64_t; a floating param: double) */\n", o->prefix);
  }
  if (hides) fputs("#endif\n", h);
  for (int i = sp->nparams - 1; i >= 0; i--) fprintf(h, "#pragma pop_macro(\"%s\")\n", sp->params[i].name);
  fputs("\n", h);
  fprintf(h, "/* declared defaults; -1 where none (grid params: derived from the communicator) */\n");
  fprintf(h, "void %s_params_default(%s_params *p);\n", o->prefix, o->prefix);
  fprintf(h, "/* Collective over comm.  On failure returns nonzero and *plan still holds an object\n"
             " * for %s_error and %s_plan_destroy. */\n", o->prefix, o->prefix);
  fprintf(h, "int %s_plan_create(MPI_Comm comm, const %s_params *p, %s_plan **plan);\n", o->prefix, o->prefix, o->prefix);
  emit_balance_api(h, sp, o);
  fprintf(h, "int %s_plan_destroy(%s_plan **plan); /* collective */\n", o->prefix, o->prefix);
  if (sp->any_sparse)
    fprintf(h, "/* The stored coordinates of a sparse tensor changed while its dtl_sparse arrays stayed where they\n"
               " * were: the plan forgets what it learnt of the pieces' structure (the entries each rank's halo\n"
               " * exchanges move) and works it out again at the next compute.  A piece whose arrays, entry\n"
               " * count or box differ is noticed without this call.  Local: where any rank called it, every\n"
               " * rank works the lists out again at its next compute. */\n"
               "int %s_structure_changed(%s_plan *plan);\n", o->prefix, o->prefix);
  fprintf(h, "/* This rank's block of each tensor: global offset and extent per dim; returns its\n"
             " * element count (0: this rank holds none).  Blocks are row-major and contiguous. */\n");
  for (int t = 0; t < sp->ntensors; t++)
    if (!sp->tensors[t].temp)
      fprintf(h, "int64_t %s_%s_block(const %s_plan *plan, int64_t offset[], int64_t extent[]);\n", o->prefix,
              sp->tensors[t].name, o->prefix);
  fprintf(h, "/* Collective.  Move a tensor between the application's layout, where this rank holds\n"
             " * the box [lo, hi) (row-major; boxes of different ranks do not overlap, e.g. row\n"
             " * blocks), and this rank's block of the kernel's distribution. */\n");
  for (int t = 0; t < sp->ntensors; t++) {
    if (sp->tensors[t].temp) continue;
    if (sp->tensors[t].sparse) {
      const char *ct = cg_ctype(sp->tensors[t].type), *n = sp->tensors[t].name;
      fprintf(h, "/* Sparse %s: every rank passes any n entries (global coordinates, n x %d, and values);\n"
                 " * *block becomes this rank's piece (release it with dtl_sparse_free). */\n", n, sp->tensors[t].order);
      fprintf(h, "int %s_%s_import(%s_plan *plan, int64_t n, const int64_t *coords, const %s *vals, dtl_sparse *block);\n",
              o->prefix, n, o->prefix, ct);
      continue;
    }
    const char *ct = cg_ctype(sp->tensors[t].type), *n = sp->tensors[t].name;
    fprintf(h, "int %s_%s_import(%s_plan *plan, const int64_t lo[], const int64_t hi[], const %s *data, %s *block);\n",
            o->prefix, n, o->prefix, ct, ct);
    fprintf(h, "int %s_%s_export(%s_plan *plan, const %s *block, const int64_t lo[], const int64_t hi[], %s *data);\n",
            o->prefix, n, o->prefix, ct, ct);
  }
  emit_scalapack_decls(h, sp, o);
  if (sp->cuda)
    fprintf(h, "/* Collective.  Tensors in declaration order, as this rank's blocks in the memory of the\n"
               " * current GPU (device pointers; so are the data and blocks of import and export).\n"
               " * plan_create uses the current device (dtl_cuda_select_device picks one per rank);\n"
               " * compute returns when the results are in place. */\n");
  else
    fprintf(h, "/* Collective.  Tensors in declaration order, as this rank's blocks.%s */\n",
            sp->any_sparse ? "  A sparse tensor is\n * a dtl_sparse piece whose box is exactly this rank's block (its _block query), built\n * with dtl_sparse_from_coo; compute fails on every rank when one passes another box" : "");
  fprintf(h, "int %s_compute(%s_plan *plan", o->prefix, o->prefix);
  for (int t = 0; t < sp->ntensors; t++)
    if (!sp->tensors[t].temp) cg_tensor_param(h, sp, t);
  fputs(");\n", h);
  if (sp->nloops)
    fprintf(h, "/* The iterations of the program's top-level loops that the last compute ran, summed. */\n"
               "int64_t %s_iterations(const %s_plan *plan);\n", o->prefix, o->prefix);
  fprintf(h, "const char *%s_error(const %s_plan *plan); /* message of the last failure */\n", o->prefix, o->prefix);
  if (sp->nvariants > 0)
    fprintf(h, "/* distalc --auto: the schedules plan_create chose from the %d variants the search kept, by\n"
               " * their predicted time at the plan's params and rank count (as text), and in *predicted\n"
               " * (unless NULL) its predicted seconds per compute.  NULL without a plan. */\n"
               "const char *%s_schedule(const %s_plan *plan, double *predicted);\n", sp->nvariants, o->prefix, o->prefix);
  fputs("\n#ifdef __cplusplus\n}\n#endif\n#endif\n", h);
}

/* The grid dims of the broadcasts and reductions (NCCL communicators are made for them). */
static void collect_masks(const sp_node *n, unsigned *masks, int *nmasks) {
  if (!n) return;
  if (n->kind == SN_COMM && n->mask &&
      (n->op == SC_BCAST || n->op == SC_BCAST_BEGIN || n->op == SC_REDUCE || n->op == SC_ALLREDUCE || n->op == SC_BCAST_RESULT)) {
    bool seen = false;
    for (int k = 0; k < *nmasks; k++) seen |= masks[k] == n->mask;
    if (!seen && *nmasks < 256) masks[(*nmasks)++] = n->mask;
  }
  for (int q = 0; q < n->nkids; q++) collect_masks(n->kids[q], masks, nmasks);
}

/* Does the program exchange halos (SC_HALO: the plan caches their send and receive lists)? */
static bool halo_in(const sp_node *n) {
  if (!n) return false;
  if (n->kind == SN_COMM && n->op == SC_HALO) return true;
  for (int q = 0; q < n->nkids; q++)
    if (halo_in(n->kids[q])) return true;
  return false;
}
static bool has_halo(const sp_program *sp) {
  for (int i = 0; i < sp->nfuncs; i++)
    if (halo_in(sp->funcs[i].body)) return true;
  return false;
}

/* ---- the run-time choice among schedules (sp->variants; spmd.h) -------------------------- */
/* A C string literal's body: quotes, backslashes and line ends escaped. */
static void cstr(FILE *c, const char *s) {
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', c), fputc(*s, c);
    else if (*s == '\n') fputs("\\n", c);
    else fputc(*s, c);
  }
}

#define SP_STR_(x) #x
#define SP_STR(x) SP_STR_(x)
#define SP_LOCAL_STEPS_TEXT SP_STR(SP_LOCAL_STEPS)

/* PREFIX_vN_cost: variant N's predicted seconds and buffer bytes at the plan's params, as
 * spmd_variant_cost evaluates them at compile time (for the rank at grid coordinates 0) */
/* Opens a block of a cost function: dtl_mask, the grid dims of a collective (alt where the
 * params of m's assumption are equal at run time), and dtl_q, the ranks along them */
/* a grid-dim mask of m: alt where the params of m's assumption are equal at run time, else mask */
static void emit_assumed_mask(FILE *c, const sp_program *sp, const sp_cost_comm *m, unsigned mask, unsigned alt) {
  if (m->nassume > 1 && mask != alt) {
    fputs("(", c);
    for (int q = 1; q < m->nassume; q++)
      fprintf(c, "%s%s == %s", q > 1 ? " && " : "", cg_param(sp, m->assume[0]), cg_param(sp, m->assume[q]));
    fprintf(c, ") ? %uu : %uu", alt, mask);
  } else
    fprintf(c, "%uu", mask);
}

static void emit_group_ranks(FILE *c, const sp_program *sp, const sp_cost_comm *m, unsigned mask, unsigned alt) {
  fputs("      {\n        unsigned dtl_mask = ", c);
  emit_assumed_mask(c, sp, m, mask, alt);
  fputs(";\n", c);
  fputs("        int64_t dtl_q = 1;\n", c);
  for (int g = 0; g < sp->ndims; g++) {
    fprintf(c, "        if (dtl_mask >> %d & 1) { const int64_t d = ", g);
    cg_sym(c, sp, sp->dims[g], false);
    fputs("; dtl_q *= d > 0 ? d : 1; }\n", c);
  }
}

/* dtl_rcv += what of the box [dtl_lo, dtl_hi) (dtl_v elements) the rank receives at step
 * dtl_cnt, for pattern pat (shift_dim: a shift's) -- lw_held_block and lw_step_received,
 * spelled: dtl_h the part it holds, dtl_to what the box moves (an accumulate: to its holders) */
static void emit_received_by(FILE *c, const sp_program *vs, const sp_cost_comm *m, lw_pattern pat, int shift_dim, int in) {
  const lw_owner *o = m->own;
  bool acc = pat == PAT_EXCHANGE && m->output, own_only[LW_MAX_DIMS] = {false};
  char copies[256];
  int k = snprintf(copies, sizeof copies, "1.0");
  for (int g = 0; g < vs->ndims; g++) {
    lw_own_kind kind = o->everywhere ? OWN_STAR : o->kind[g];
    bool exec = m->exec_mask >> g & 1;
    if (acc && kind == OWN_STAR && exec && k < (int)sizeof copies - 24)
      k += snprintf(copies + k, sizeof copies - (size_t)k, " * dtl_dims[%d]", g);
    if (acc && kind == OWN_PART && !exec) own_only[o->tdim[g]] = true;
  }
  if (!lw_owner_whole(o, m->order)) {
    fprintf(c, "%*sdtl_rcv += dtl_v * (%s);\n", in, "", acc ? copies : "1.0");
    return;
  }
  if (pat == PAT_REDUCE) {
    fprintf(c, "%*sdtl_rcv += dtl_v;\n", in, "");
    return;
  }
  if (pat == PAT_SHIFT) fprintf(c, "%*sif (dtl_cnt > 0) dtl_rcv += dtl_dims[%d] == 1 ? 0 : dtl_v; else\n", in, "", shift_dim);
  fprintf(c, "%*s{\n%*sdouble dtl_h = 1, dtl_to = %s;\n", in, "", in + 2, "", acc ? copies : "dtl_v");
  /* off a fixed coordinate: holds nothing; and an accumulate sends nothing where the dim is
   * not one its loops are distributed over */
  for (int g = 0; g < vs->ndims && !o->everywhere; g++)
    if (o->kind[g] == OWN_FIXED)
      fprintf(c, "%*sif (dtl_coords[%d] != %lld) dtl_h = 0%s;\n", in + 2, "", g, (long long)o->fixed[g],
              acc && !(m->exec_mask >> g & 1) ? ", dtl_to = 0" : "");
  for (int x = 0; x < m->order; x++) {
    fprintf(c, "%*s{ const int64_t ol = ", in + 2, "");
    cg_sym(c, vs, o->lo[x], false);
    fputs(", oh = ", c);
    cg_sym(c, vs, o->hi[x], false);
    fprintf(c, ";\n%*s  const int64_t l = dtl_lo[%d] > ol ? dtl_lo[%d] : ol, u = dtl_hi[%d] < oh ? dtl_hi[%d] : oh;\n"
               "%*s  dtl_h *= u > l ? (double)(u - l) : 0;", in + 2, "", x, x, x, x, in + 2, "");
    if (acc && own_only[x]) fputs(" dtl_to *= u > l ? (double)(u - l) : 0;", c);
    else if (acc) fprintf(c, " dtl_to *= dtl_hi[%d] > dtl_lo[%d] ? (double)(dtl_hi[%d] - dtl_lo[%d]) : 0;", x, x, x, x);
    fputs(" }\n", c);
  }
  fprintf(c, "%*sdtl_rcv += dtl_to - (dtl_h < dtl_to ? dtl_h : dtl_to);\n%*s}\n", in + 2, "", in, "");
}

static void emit_received(FILE *c, const sp_program *sp, const sp_program *vs, const sp_cost_comm *m, int in) {
  if (m->nassume > 1 && (m->pat != m->alt_pat || m->shift_dim != m->alt_shift_dim)) {
    fprintf(c, "%*sif (", in, "");
    for (int q = 1; q < m->nassume; q++)
      fprintf(c, "%s%s == %s", q > 1 ? " && " : "", cg_param(sp, m->assume[0]), cg_param(sp, m->assume[q]));
    fprintf(c, ") {\n");
    emit_received_by(c, vs, m, m->alt_pat, m->alt_shift_dim, in + 2);
    fprintf(c, "%*s} else {\n", in, "");
    emit_received_by(c, vs, m, m->pat, m->shift_dim, in + 2);
    fprintf(c, "%*s}\n", in, "");
  } else
    emit_received_by(c, vs, m, m->pat, m->shift_dim, in);
}

static void emit_variant_cost(FILE *c, const sp_program *sp, int v, const char *P) {
  const sp_variant *x = &sp->variants[v];
  const sp_program *vs = x->sp;
  fprintf(c, "/* variant %d (%s): its predicted seconds and buffer bytes per rank */\n", v, x->label);
  fprintf(c, "static void %s_v%d_cost(const int64_t *dtl_p, const int64_t *dtl_coords, int64_t dtl_rpn, double *dtl_sec, double *dtl_buf) {\n", P, v);
  declare_params(c, sp, "dtl_p", 2);
  /* the grid's dims: which groups are within one node of dtl_rpn ranks (dtl_group_in_node) */
  int nd = sp->ndims > 0 ? sp->ndims : 1;
  fprintf(c, "  (void)dtl_coords, (void)dtl_rpn;\n  double dtl_s = 0, dtl_b = 0;\n  int64_t dtl_dims[%d] = {1};\n"
             "  (void)dtl_dims; /* read only by a collective's node test */\n", nd);
  for (int g = 0; g < sp->ndims; g++) {
    fputs("  { const int64_t d = ", c);
    cg_sym(c, sp, sp->dims[g], false);
    fprintf(c, "; dtl_dims[%d] = d > 0 ? d : 1; }\n", g);
  }
  for (int i = 0; i < x->nstmts; i++) {
    const sp_cost_stmt *st = &x->stmts[i];
    const sp_func *fn = &vs->funcs[st->func];
    fprintf(c, "  { /* statement %d */\n", i + 1);
    for (int q = 0; q < fn->nvars; q++)
      fprintf(c, "    int64_t %s = 0;\n    (void)%s;\n", cg_vname(vs, fn->var0 + q), cg_vname(vs, fn->var0 + q));
    fputs("    double dtl_pts = 1, dtl_bytes = 0, dtl_msgs = 0, dtl_steps = 1, dtl_kpts = 0, dtl_mem = 0, dtl_nbytes = 0, dtl_nmsgs = 0;\n"
          "    double dtl_obytes = 0, dtl_omsgs = 0, dtl_onbytes = 0, dtl_onmsgs = 0; /* the fetches run once per entry of the loop */\n"
          "    int64_t dtl_kmin = 0;\n    (void)dtl_kmin, (void)dtl_kpts;\n", c);
    for (int k = 0; k < st->ntrips; k++) {
      fputs("    { const int64_t t = ", c);
      cg_sym(c, vs, st->trip[k], false);
      fputs("; dtl_pts *= t > 0 ? (double)t : 0;", c);
      if (st->kdepth >= 0 && k >= st->kdepth)
        fputs(" if (dtl_kmin == 0 || t < dtl_kmin) dtl_kmin = t > 0 ? t : 1; dtl_kpts = (dtl_kpts > 0 ? dtl_kpts : 1) * (double)(t > 0 ? t : 0);", c);
      fputs(" }\n", c);
    }
    for (int q = 0; q < st->ncomm; q++) {
      const sp_cost_comm *m = &st->comm[q];
      fputs("    {\n      double dtl_tot = 0, dtl_most = 0, dtl_cnt = 0, dtl_rcv = 0;\n      (void)dtl_rcv;\n", c);
      int in = 6;
      for (int k = 0; k < m->nloops; k++, in += 2) {
        const char *vn = cg_vname(vs, m->var[k]);
        fprintf(c, "%*sfor (%s = 0; %s < ", in, "", vn, vn);
        cg_sym(c, vs, m->ext[k], false);
        /* the rank's own block: at most SP_LOCAL_STEPS boxes (more: none counted) */
        fprintf(c, "%s; %s++) {\n", m->local ? " && dtl_cnt <= " SP_LOCAL_STEPS_TEXT : "", vn);
      }
      fprintf(c, "%*sdouble dtl_v = 1;\n%*sint64_t dtl_lo[%d], dtl_hi[%d];\n%*s(void)dtl_lo, (void)dtl_hi;\n", in, "", in, "",
              m->order > 0 ? m->order : 1, m->order > 0 ? m->order : 1, in, "");
      for (int d = 0; d < m->order; d++) {
        fprintf(c, "%*sdtl_lo[%d] = ", in, "", d);
        cg_sym(c, vs, m->lo[d], false);
        fprintf(c, ", dtl_hi[%d] = ", d);
        cg_sym(c, vs, m->hi[d], false);
        fprintf(c, ";\n%*sdtl_v *= dtl_hi[%d] > dtl_lo[%d] ? (double)(dtl_hi[%d] - dtl_lo[%d]) : 0;\n", in, "", d, d, d, d);
      }
      if (!m->local) emit_received(c, sp, vs, m, in);
      fprintf(c, "%*sdtl_tot += dtl_v, dtl_cnt++;\n%*sif (dtl_v > dtl_most) dtl_most = dtl_v;\n", in, "", in, "");
      for (int k = m->nloops - 1; k >= 0; k--) {
        in -= 2;
        fprintf(c, "%*s}\n", in, "");
        fprintf(c, "%*s%s = 0;\n", in, "", cg_vname(vs, m->var[k]));
      }
      if (m->local) { /* bytes from memory only */
        fputs("      if (dtl_cnt <= " SP_LOCAL_STEPS_TEXT ") dtl_mem += dtl_tot * ", c);
        fprintf(c, "%lld;\n      (void)dtl_most;\n    }\n", (long long)m->elem);
        continue;
      }
      /* a broadcast: 2 (q - 1) / q of its bytes, ceil(log2 q) messages a step (lw_bcast_weight) */
      fputs("      double dtl_wb = 1, dtl_wm = 1;\n", c);
      if (m->exchange || m->alt_exchange) { /* a point-to-point exchange: LW_EXCHANGE_WEIGHT */
        fputs("      if (", c);
        if (m->nassume > 1 && m->exchange != m->alt_exchange) {
          fputs(m->alt_exchange ? "(" : "!(", c);
          for (int q = 1; q < m->nassume; q++)
            fprintf(c, "%s%s == %s", q > 1 ? " && " : "", cg_param(sp, m->assume[0]), cg_param(sp, m->assume[q]));
          fputs(")", c);
        } else
          fputs("1", c);
        fprintf(c, ") dtl_wb = %.17g;\n", LW_EXCHANGE_WEIGHT);
      }
      if (m->bcast || m->alt_bcast) {
        emit_group_ranks(c, sp, m, m->bcast, m->alt_bcast);
        fputs("        if (dtl_mask) {\n          int lg = 0;\n          while (dtl_q > 1 && ((int64_t)1 << lg) < dtl_q) lg++;\n"
              "          dtl_wb = dtl_q > 1 ? 2.0 * (double)(dtl_q - 1) / (double)dtl_q : 0, dtl_wm = lg;\n        }\n      }\n", c);
      }
      if (m->reduce || m->alt_reduce) { /* a reduction among one rank moves nothing */
        emit_group_ranks(c, sp, m, m->reduce, m->alt_reduce);
        fputs("        if (dtl_mask && dtl_q == 1) dtl_wb = dtl_wm = 0;\n      }\n", c);
      }
      /* its group (a broadcast's, else a reduction's grid dims; 0: any rank) within one node? */
      unsigned grp = m->bcast ? m->bcast : m->reduce, alt_grp = m->alt_bcast ? m->alt_bcast : m->alt_reduce;
      fputs("      const unsigned dtl_grp = ", c);
      emit_assumed_mask(c, sp, m, grp, alt_grp);
      fputs(";\n      const unsigned dtl_once = ", c); /* run once per entry of the loop (the rewrite invariant) */
      emit_assumed_mask(c, sp, m, m->once, m->alt_once);
      fprintf(c, ";\n      const int dtl_node = dtl_group_in_node(dtl_rpn, %d, dtl_dims, dtl_coords, dtl_grp);\n"
                 "      if (dtl_once && dtl_node) dtl_onbytes += dtl_wb * dtl_rcv * %lld, dtl_onmsgs += dtl_wm * dtl_cnt;\n"
                 "      else if (dtl_once) dtl_obytes += dtl_wb * dtl_rcv * %lld, dtl_omsgs += dtl_wm * dtl_cnt;\n"
                 "      else if (dtl_node) dtl_nbytes += dtl_wb * dtl_rcv * %lld, dtl_nmsgs += dtl_wm * dtl_cnt;\n"
                 "      else dtl_bytes += dtl_wb * dtl_rcv * %lld, dtl_msgs += dtl_wm * dtl_cnt;\n"
                 "      dtl_mem += dtl_tot * %lld;\n"
                 "      if (!dtl_once && dtl_cnt > dtl_steps) dtl_steps = dtl_cnt;\n      dtl_b += dtl_most * %lld * %d;\n    }\n",
              sp->ndims, (long long)m->elem, (long long)m->elem, (long long)m->elem, (long long)m->elem, (long long)m->elem,
              (long long)m->elem, m->nbuf);
    }
    /* a kernel's speedup shrinks with its shortest loop below 128 (lw_kernel_share) */
    fprintf(c, "    const double dtl_edge = dtl_kpts > 0 ? cbrt(dtl_kpts) / 128.0 : 1.0;\n"
               "    const double dtl_speed = %.17g > 1 ? 1 + (%.17g - 1) * (dtl_kmin <= 0 || dtl_kmin >= 128 ? 1.0 : (double)dtl_kmin / 128.0)"
               " * (dtl_edge < 1 ? dtl_edge : 1.0) : 1;\n", st->speedup, st->speedup);
    fprintf(c, "    const double dtl_comm = dtl_bytes / %.17g + dtl_nbytes / %.17g, dtl_work = fmax(dtl_pts * %.17g / dtl_speed / %.17g, dtl_mem / %.17g);\n",
            sp->bandwidth, sp->node_bandwidth, sp->point_time, st->threads, sp->memory_bandwidth);
    fprintf(c, "    const double dtl_run = dtl_msgs * %.17g + dtl_nmsgs * %.17g + dtl_comm / dtl_steps + fmax(dtl_comm * (dtl_steps - 1) / dtl_steps, dtl_work);\n",
            sp->latency, sp->node_latency);
    fprintf(c, "    const double dtl_one = dtl_omsgs * %.17g + dtl_onmsgs * %.17g + dtl_obytes / %.17g + dtl_onbytes / %.17g;\n",
            sp->latency, sp->node_latency, sp->bandwidth, sp->node_bandwidth);
    /* its runs: entries x bound of its loops (1 where in none), the once fetches entries times */
    fputs("    int64_t dtl_entries = ", c);
    if (st->entries) cg_sym(c, vs, st->entries, false);
    else fputs("1", c);
    fputs(", dtl_bound = ", c);
    if (st->bound) cg_sym(c, vs, st->bound, false);
    else fputs("1", c);
    fputs(";\n    if (dtl_entries < 1) dtl_entries = 1;\n    if (dtl_bound < 1) dtl_bound = 1;\n"
          "    dtl_s += (double)dtl_entries * ((double)dtl_bound * dtl_run + dtl_one);\n  }\n", c);
  }
  fputs("  *dtl_sec = dtl_s, *dtl_buf = dtl_b;\n}\n\n", c);
}

/* plan_create's choice: the least predicted time among the variants whose buffers fit the
 * memory limit (else the least buffers), ties to the lower index; the same on every rank */
/* PREFIX_choose: the variant plan_create runs at params dtl_p (grid params solved), by the
 * variants' cost formulas at the ranks of lw_sample, the slowest
 * and the larger buffers: the one predicted fastest whose buffers fit the memory limit, else
 * the least buffers (predictions within a millionth are ties, kept by the lower index whatever
 * the rounding); dtl_forced >= 0: that one.  Its seconds and whether it fits in *dtl_sec,
 * *dtl_fit; every variant's in dtl_pred, dtl_buf unless NULL. */
static void emit_variant_chooser(FILE *c, const sp_program *sp, const char *P) {
  int n = sp->nvariants, nd = sp->ndims > 0 ? sp->ndims : 1;
  fprintf(c, "static int %s_choose(const int64_t *dtl_p, int64_t dtl_rpn, int dtl_forced, double *dtl_pred, double *dtl_buf, double *dtl_sec, int *dtl_fit) {\n"
             "  static void (*const dtl_cost[%d])(const int64_t *, const int64_t *, int64_t, double *, double *) = {", P, n);
  for (int v = 0; v < n; v++) fprintf(c, "%s%s_v%d_cost", v ? ", " : "", P, v);
  /* each grid dim's last coordinate, for the samples of lw_sample */
  fprintf(c, "};\n  int64_t dtl_last[%d] = {0};\n", nd);
  for (int g = 0; g < sp->ndims; g++) {
    int64_t lit;
    if (sp->dims[g]->kind == SYM_PARAM) fprintf(c, "  dtl_last[%d] = dtl_p[%d] > 0 ? dtl_p[%d] - 1 : 0;\n", g, sp->dims[g]->id, sp->dims[g]->id);
    else fprintf(c, "  dtl_last[%d] = %lld;\n", g, (long long)(sym_is_const(sp->dims[g], &lit) && lit > 0 ? lit - 1 : 0));
  }
  fprintf(c, "  int dtl_best = -1, dtl_least = 0, dtl_f[%d];\n  double dtl_bs = 0, dtl_lb = 0, dtl_s[%d];\n"
             "  for (int v = 0; v < %d; v++) {\n    double s = 0, b = 0;\n"
             "    for (int k = 0; k < %d; k++) { /* rank 0, the corner, each dim's last coordinate alone */\n"
             "      int64_t dtl_at[%d];\n      double s1, b1;\n"
             "      for (int g = 0; g < %d; g++) dtl_at[g] = (k == 1 ? g %% 2 == 0 : k - 2 == g) ? dtl_last[g] : 0;\n"
             "      dtl_cost[v](dtl_p, dtl_at, dtl_rpn, &s1, &b1);\n      if (k == 0 || s1 > s) s = s1;\n      if (k == 0 || b1 > b) b = b1;\n    }\n"
             "    if (dtl_pred) dtl_pred[v] = s, dtl_buf[v] = b;\n", n, n, n, sp->ndims + 2, nd, sp->ndims);
  if (sp->mem_limit > 0) fprintf(c, "    dtl_f[v] = b <= %lld.0;\n", (long long)sp->mem_limit);
  else fputs("    dtl_f[v] = 1;\n", c);
  fputs("    dtl_s[v] = s;\n    if (dtl_f[v] && (dtl_best < 0 || s < dtl_bs * (1 - 1e-6))) dtl_best = v, dtl_bs = s;\n"
        "    if (v == 0 || b < dtl_lb) dtl_least = v, dtl_lb = b;\n  }\n"
        "  const int v = dtl_forced >= 0 ? dtl_forced : dtl_best >= 0 ? dtl_best : dtl_least;\n"
        "  *dtl_sec = dtl_s[v], *dtl_fit = dtl_f[v];\n  return v;\n}\n\n", c);
}

/* DISTAL_VARIANT=N runs variant N whatever the prediction (to measure or test each one):
 * parsed first in plan_create, into dtl_force (-1: none) */
static void emit_variant_force(FILE *c, const sp_program *sp) {
  int n = sp->nvariants > 0 ? sp->nvariants : 1; /* without variants: its one schedule, 0 */
  fprintf(c, "  int dtl_force = -1;\n  {\n    const char *dtl_fv = getenv(\"DISTAL_VARIANT\");\n    if (dtl_fv && *dtl_fv) {\n"
             "      char *end = NULL;\n      long f = strtol(dtl_fv, &end, 10);\n      if (*end || f < 0 || f >= %d) {\n"
             "        snprintf(dtl_plan->err, sizeof dtl_plan->err, \"DISTAL_VARIANT=%%s: not a variant of this program (0 to %d)\", dtl_fv);\n"
             "        return 1;\n      }\n      dtl_force = (int)f;\n    }\n  }\n  (void)dtl_force;\n", n, n - 1);
}

/* plan_create where the grid's shape is free (sp->shape_free), after the solver filled values
 * from dtl_given: every shape of dtl_grid_shapes, each with the variant PREFIX_choose picks
 * there; the solver's shape (0) unless another fits where it does not or, fitting alike, is
 * predicted faster than DTL_SHAPE_MARGIN of its time (then the fastest, preferring those
 * that fit) */
static void emit_shape_choice(FILE *c, const sp_program *sp, const char *P, int nd) {
  int nv = sp->nparams + 1;
  fprintf(c, "    { /* the grid's shape: every shape of the free grid params, each with the variant chosen there; the solver's unless another is clearly faster */\n"
             "      enum { DTL_SHAPES = 1024 };\n      int64_t *dtl_sh = malloc(sizeof *dtl_sh * DTL_SHAPES * %d);\n"
             "      if (!dtl_sh) {\n        snprintf(dtl_plan->err, sizeof dtl_plan->err, \"out of memory\");\n        return 1;\n      }\n"
             "      int dtl_n = dtl_grid_shapes(dtl_size, %d, param, lit, dtl_given, %d, dtl_sh, DTL_SHAPES), dtl_at = 0, dtl_afit = 0;\n"
             "      double dtl_as = 0, dtl_s0 = 0;\n      int dtl_f0 = 0;\n      for (int k = 0; k < dtl_n; k++) {\n        int64_t dtl_q[%d];\n        double s;\n        int fit;\n"
             "        memcpy(dtl_q, dtl_prm, sizeof dtl_prm);\n", nv, nd, nv, nv);
  for (int i = 0; i < sp->nparams; i++)
    if (sp->params[i].is_grid) fprintf(c, "        dtl_q[%d] = dtl_sh[(size_t)k * %d + %d];\n", i, nv, i);
  /* a shape whose dim is too small for a tensor's fixed coordinate is never chosen */
  bool any_fixed = false;
  for (int t = 0; t < sp->ntensors; t++) {
    const lw_owner *ow = sp->tensors[t].owner;
    for (int g = 0; ow && !ow->everywhere && g < sp->ndims; g++)
      if (ow->kind[g] == OWN_FIXED && sp->dims[g]->kind == SYM_PARAM) {
        fprintf(c, "%s dtl_q[%d] <= %lld", any_fixed ? " ||" : "        if (", sp->dims[g]->id, (long long)ow->fixed[g]);
        any_fixed = true;
      }
  }
  if (any_fixed) fputs(") {\n          if (k == 0) dtl_s0 = INFINITY, dtl_f0 = 0;\n          continue;\n        }\n", c);
  fprintf(c, "        (void)%s_choose(dtl_q, dtl_rpn, dtl_force, NULL, NULL, &s, &fit);\n"
             "        if (k == 0) dtl_s0 = s, dtl_f0 = fit;\n"
             "        else if (dtl_at == 0 || (fit && (!dtl_afit || s < dtl_as * (1 - 1e-6)))) dtl_at = k, dtl_as = s, dtl_afit = fit;\n      }\n"
             "      /* the solver's shape unless another fits where it does not, or is predicted clearly faster */\n"
             "      if (dtl_at > 0 && !(dtl_afit && !dtl_f0) && !(dtl_afit == dtl_f0 && dtl_as < dtl_s0 * DTL_SHAPE_MARGIN)) dtl_at = 0;\n", P);
  for (int i = 0; i < sp->nparams; i++)
    if (sp->params[i].is_grid) fprintf(c, "      if (dtl_n > 0) values[%d] = dtl_sh[(size_t)dtl_at * %d + %d];\n", i, nv, i);
  fputs("      free(dtl_sh);\n    }\n", c);
}

/* plan_create, once the plan holds the params: the variant compute runs */
static void emit_variant_choice(FILE *c, const char *P) {
  fprintf(c, "  { /* the schedule: of the variants --auto kept, the one predicted fastest at these params and this rank count */\n"
             "    double dtl_sec;\n    int dtl_fit;\n"
             "    dtl_plan->variant = %s_choose(dtl_plan->p, dtl_rpn, dtl_force, dtl_plan->predicted, dtl_plan->buffers, &dtl_sec, &dtl_fit);\n  }\n", P);
}

/* PREFIX_schedule: the chosen variant, as text */
static void emit_variant_query(FILE *c, const sp_program *sp, const char *P) {
  fprintf(c, "const char *%s_schedule(const %s_plan *plan, double *predicted) {\n"
             "  static const char *const dtl_text[%d] = {\n", P, P, sp->nvariants);
  for (int v = 0; v < sp->nvariants; v++) {
    const sp_variant *x = &sp->variants[v];
    fprintf(c, "    \"variant %d (chosen by the search at ", v);
    cstr(c, x->label);
    fputc(')', c);
    for (int i = 0; i < x->nstmts; i++) {
      fprintf(c, "\\nstatement %d: ", i + 1);
      cstr(c, x->schedule[i] && *x->schedule[i] ? x->schedule[i] : "its default");
    }
    fprintf(c, "\"%s\n", v + 1 < sp->nvariants ? "," : "");
  }
  fputs("  };\n  if (!plan || !plan->ctx) return NULL;\n  if (predicted) *predicted = plan->predicted[plan->variant];\n"
        "  return dtl_text[plan->variant];\n}\n\n", c);
}

static void emit_plan(FILE *c, const sp_program *sp, const cg_options *o) {
  const char *P = o->prefix;
  bool halo = has_halo(sp);
  int nslots = sp->nslots;
  for (int v = 1; v < sp->nvariants; v++)
    if (sp->variants[v].sp->nslots > nslots) nslots = sp->variants[v].sp->nslots; /* one variant runs at a time */
  int np1 = sp->nparams ? sp->nparams : 1;
  /* Generated code reads and writes the params struct as an array of its int64_t fields, in
   * declaration order, so that it never spells a field's name (which may be a macro's). */
  fprintf(c, "_Static_assert(sizeof(%s_params) == %d * sizeof(int64_t), \"the params struct is an array of int64_t\");\n\n", P, np1);
  if (sp->nsplits) {
    int nb = 0;
    for (int t = 0; t < sp->ntensors; t++) nb += sp->tensors[t].balanced;
    fprintf(c, "_Static_assert(sizeof(%s_balance) == %d * sizeof(const int64_t *), \"the balance struct is an array of pointers\");\n\n", P,
            nb * sp->ndims);
  }
  fprintf(c, "struct %s_plan {\n  dtl_ctx *ctx;\n  int64_t p[%d]; /* the params, in declaration order */\n  dtl_dist dist[%d];\n  dtl_box own[%d];\n"
             "  void *buf[%d];   /* communication buffers, reused across calls */\n  size_t cap[%d];\n  char err[512];\n",
          P, np1, sp->ntensors + 1, sp->ntensors + 1, nslots, nslots);
  if (sp->any_sparse)
    fprintf(c, "  dtl_sparse sp[%d]; /* fetched sparse boxes, by buffer slot */\n  dtl_coo co[%d]; /* entries of sparse results */\n", nslots,
            nslots);
  fprintf(c, "  void *tmp[%d]; /* temporaries: this rank's block, by tensor */\n", sp->ntensors + 1);
  if (sp->nsplits) fprintf(c, "  int64_t *split[%d]; /* balanced partitions: boundaries, by split id */\n", sp->nsplits);
  if (sp->any_sparse) fprintf(c, "  dtl_sparse tsp[%d]; /* sparse temporaries */\n", sp->ntensors + 1);
  if (halo)
    fprintf(c, "  dtl_halo *halo[%d]; /* halo exchanges: what the inspector found, by buffer slot */\n"
               "  int64_t epoch; /* compute calls so far: the members of a halo exchange agree once per call */\n", nslots);
  if (sp->nloops) fprintf(c, "  int64_t loop_it[%d]; /* by loop number: the iteration the loop runs (counted from 0 at each entry) */\n", sp->nloops + 1);
  fputs("  int64_t iters; /* iterations of the top-level loops in the last compute */\n"
        "  bool monitor; /* rank 0 prints each iteration (the executable's --monitor) */\n", c);
  if (sp->nvariants > 0)
    fprintf(c, "  int variant; /* the schedule compute runs: chosen in plan_create */\n  double predicted[%d], buffers[%d]; /* each variant's predicted seconds and buffer bytes */\n",
            sp->nvariants, sp->nvariants);
  fputs("};\n\n", c);
  for (int v = 0; v < sp->nvariants; v++) emit_variant_cost(c, sp, v, P);
  if (sp->nvariants > 0) emit_variant_chooser(c, sp, P);
  if (sp->cuda)
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
  for (int i = 0; i < sp->nparams; i++)
    fprintf(c, "%s%lld", i ? ", " : "", (long long)(sp->params[i].has_default ? sp->params[i].value : -1));
  if (!sp->nparams) fputs("0", c);
  fputs("};\n  memcpy(p, dtl_d, sizeof dtl_d);\n", c);
  for (int i = 0; i < sp->nparams; i++)
    if (sp->params[i].is_float) /* a double field: its bits */
      fprintf(c, "  {\n    const double d = %.17g;\n    memcpy((char *)p + %d * sizeof(int64_t), &d, sizeof d);\n  }\n", sp->params[i].fvalue, i);
  fputs("}\n\n", c);
  /* plan_create */
  if (sp->nsplits) {
    fprintf(c, "int %s_plan_create(MPI_Comm dtl_comm, const %s_params *dtl_params, %s_plan **dtl_out) {\n"
               "  return %s_plan_create_balanced(dtl_comm, dtl_params, NULL, dtl_out);\n}\n\n", P, P, P, P);
    fprintf(c, "int %s_plan_create_balanced(MPI_Comm dtl_comm, const %s_params *dtl_params, const %s_balance *dtl_bal, %s_plan **dtl_out) {\n",
            P, P, P, P);
  } else {
    fprintf(c, "int %s_plan_create(MPI_Comm dtl_comm, const %s_params *dtl_params, %s_plan **dtl_out) {\n", P, P, P);
  }
  fprintf(c, "  if (!dtl_out) return 1; /* nowhere to put the plan (every rank alike: no collective yet) */\n"
             "  %s_plan *dtl_plan = calloc(1, sizeof *dtl_plan);\n  *dtl_out = dtl_plan;\n  if (!dtl_plan) return 1;\n", P);
  fprintf(c, "  %s_params dtl_given;\n  if (dtl_params) dtl_given = *dtl_params;\n  else %s_params_default(&dtl_given);\n"
             "  int64_t dtl_prm[%d];\n  memcpy(dtl_prm, &dtl_given, sizeof dtl_prm);\n", P, P, np1);
  fputs("  int dtl_size, dtl_inter = 0;\n  if (dtl_comm == MPI_COMM_NULL || MPI_Comm_size(dtl_comm, &dtl_size) != MPI_SUCCESS) {\n"
        "    snprintf(dtl_plan->err, sizeof dtl_plan->err, \"invalid communicator\");\n    return 1;\n  }\n"
        "  if (MPI_Comm_test_inter(dtl_comm, &dtl_inter) != MPI_SUCCESS || dtl_inter) { /* its grid needs one group of ranks */\n"
        "    snprintf(dtl_plan->err, sizeof dtl_plan->err, \"an intercommunicator: a plan needs an intracommunicator\");\n    return 1;\n  }\n", c);
  if (sp->nparams > 0) { /* every rank the same params, else every rank the same error (no rank alone in a collective) */
    fputs("  {\n    static const char *const dtl_names[] = {", c);
    for (int i = 0; i < sp->nparams; i++) fprintf(c, "%s\"%s\"", i ? ", " : "", sp->params[i].name);
    fputs("};\n    static const bool dtl_float[] = {", c);
    for (int i = 0; i < sp->nparams; i++) fprintf(c, "%s%s", i ? ", " : "", sp->params[i].is_float ? "true" : "false");
    fprintf(c, "};\n    if (dtl_params_agree(dtl_comm, %d, dtl_prm, dtl_float, dtl_names, dtl_plan->err, sizeof dtl_plan->err)) return 1;\n  }\n",
            sp->nparams);
  }
  for (int i = 0; i < sp->nparams; i++) {
    if (sp->params[i].is_grid) /* -1: derived from the communicator (the header says so); 0 or below: a mistake */
      fprintf(c, "  if (dtl_prm[%d] == 0 || dtl_prm[%d] < -1) {\n    snprintf(dtl_plan->err, sizeof dtl_plan->err, "
                 "\"grid param %s is %%lld: give a positive value, or -1 to derive it from the communicator\", (long long)dtl_prm[%d]);\n"
                 "    return 1;\n  }\n",
              i, i, sp->params[i].name, i);
    if (sp->params[i].is_grid || sp->params[i].is_float) continue;
    /* -1 is params_default's "none" where the param has no default; any other value 0 or below was given */
    if (sp->params[i].has_default)
      fprintf(c, "  if (dtl_prm[%d] <= 0) {\n    snprintf(dtl_plan->err, sizeof dtl_plan->err, \"param %s must be positive\");\n"
                 "    return 1;\n  }\n",
              i, sp->params[i].name);
    else
      fprintf(c, "  if (dtl_prm[%d] == -1) {\n    snprintf(dtl_plan->err, sizeof dtl_plan->err, \"param %s has no value and no default\");\n"
                 "    return 1;\n  }\n  if (dtl_prm[%d] <= 0) {\n    snprintf(dtl_plan->err, sizeof dtl_plan->err, "
                 "\"param %s is %%lld: it must be positive\", (long long)dtl_prm[%d]);\n    return 1;\n  }\n",
              i, sp->params[i].name, i, sp->params[i].name, i);
  }
  emit_variant_force(c, sp); /* DISTAL_VARIANT: out of range is an error, with variants or without */
  if (sp->nvariants > 0) /* how the ranks fill nodes: which collectives the model takes at the node's rates */
    fprintf(c, "  const int64_t dtl_rpn = dtl_nodes_blocked(dtl_comm, %s);\n", sp->nlevels > 1 ? "true" : "false");
  /* grid params: solved from the communicator size */
  fputs("  {\n", c);
  if (sp->has_machine) {
    /* every level's dims, outer first; a hierarchical machine solves its inner levels
     * from the ranks per node and level 0 from the node count */
    int nd = sp->ndims, n0 = sp->nlevels > 1 ? sp->level_off[1] : nd;
    int64_t lit;
    fprintf(c, "    int param[%d] = {", nd);
    for (int d = 0; d < nd; d++) fprintf(c, "%s%d", d ? ", " : "", sp->dims[d]->kind == SYM_PARAM ? sp->dims[d]->id : -1);
    fprintf(c, "};\n    int64_t lit[%d] = {", nd);
    for (int d = 0; d < nd; d++) fprintf(c, "%s%lld", d ? ", " : "", (long long)(sym_is_const(sp->dims[d], &lit) ? lit : 0));
    fprintf(c, "};\n    int64_t values[%d] = {", sp->nparams + 1);
    for (int i = 0; i < sp->nparams; i++) fprintf(c, "%sdtl_prm[%d]", i ? ", " : "", i);
    if (!sp->nparams) fputs("0", c);
    fprintf(c, "};\n    static const char *const names[%d] = {", sp->nparams + 1);
    for (int i = 0; i < sp->nparams; i++) fprintf(c, "%s\"%s\"", i ? ", " : "", sp->params[i].name);
    if (!sp->nparams) fputs("\"\"", c);
    fputs("};\n", c);
    fprintf(c, "    for (int i = 0; i < %d; i++)\n      if (param[i] >= 0 && values[param[i]] <= 0) values[param[i]] = -1;\n", nd);
    /* one solver for distalc and the executable (distal/grid.h): a hierarchical machine its
     * inner levels over the ranks of a node, level 0 over the nodes */
    if (sp->nlevels == 1) {
      if (sp->shape_free) fprintf(c, "    int64_t dtl_given[%d];\n    memcpy(dtl_given, values, sizeof dtl_given);\n", sp->nparams + 1);
      fprintf(c, "    if (dtl_solve_machine(dtl_size, dtl_size, %d, 0, param, lit, values, names, dtl_plan->err, sizeof dtl_plan->err)) return 1;\n", nd);
      if (sp->shape_free) emit_shape_choice(c, sp, P, nd);
    } else {
      fputs("    int dtl_node, dtl_nnodes, dtl_local, dtl_per_node;\n"
            "    if (dtl_node_of(dtl_comm, &dtl_node, &dtl_nnodes, &dtl_local, &dtl_per_node, dtl_plan->err, sizeof dtl_plan->err)) return 1;\n", c);
      fprintf(c, "    if (dtl_solve_machine((int64_t)dtl_nnodes * dtl_per_node, dtl_per_node, %d, %d, param, lit, values, names, dtl_plan->err, sizeof dtl_plan->err)) return 1;\n",
              nd, nd - n0);
    }
    for (int i = 0; i < sp->nparams; i++)
      if (sp->params[i].is_grid) fprintf(c, "    dtl_prm[%d] = values[%d];\n", i, i);
    fprintf(c, "    int64_t dims[%d] = {", nd);
    for (int d = 0; d < nd; d++) {
      fputs(d ? ", " : "", c);
      if (sp->dims[d]->kind == SYM_PARAM) fprintf(c, "dtl_prm[%d]", sp->dims[d]->id);
      else fprintf(c, "%lld", (long long)(sym_is_const(sp->dims[d], &lit) ? lit : 0));
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
  declare_params(c, sp, "dtl_prm", 2);
  emit_split_init(c, sp);
  for (int t = 0; t < sp->ntensors; t++) {
    const sp_tensor *ft = &sp->tensors[t];
    const lw_owner *ow = ft->owner;
    fprintf(c, "  /* %s: %s */\n", ft->name, ft->dist_text ? ft->dist_text : "replicated on every rank");
    fprintf(c, "  dtl_plan->dist[%d] = (dtl_dist){.order = %d, .ngrid = %d, .replicated_everywhere = %s};\n", t,
            ft->order, sp->ndims, ow->everywhere ? "true" : "false");
    for (int x = 0; x < ft->order; x++) {
      fprintf(c, "  dtl_plan->dist[%d].extent[%d] = ", t, x);
      cg_sym(c, sp, ft->ext[x], false);
      fputs(";\n", c);
    }
    if (ft->mode) { /* files and imports name the declared order */
      fprintf(c, "  dtl_plan->dist[%d].moded = true;\n", t);
      for (int x = 0; x < ft->order; x++) fprintf(c, "  dtl_plan->dist[%d].mode[%d] = %d;\n", t, x, ft->mode[x]);
    }
    for (int g2 = 0; g2 < sp->ndims && !ow->everywhere; g2++) {
      static const char *k[] = {"DTL_DIM_PART", "DTL_DIM_FIXED", "DTL_DIM_STAR"};
      fprintf(c, "  dtl_plan->dist[%d].kind[%d] = %s, dtl_plan->dist[%d].tdim[%d] = %d, dtl_plan->dist[%d].fixed[%d] = %lld;\n", t, g2,
              k[ow->kind[g2]], t, g2, ow->kind[g2] == OWN_PART ? ow->tdim[g2] : 0, t, g2, (long long)ow->fixed[g2]);
    }
    for (int g2 = 0; g2 < sp->ndims && !ow->everywhere; g2++) {
      int id = g2 < LW_MAX_DIMS ? sp->tensors[t].split[g2] : -1;
      if (id >= 0) fprintf(c, "  dtl_plan->dist[%d].split[%d] = dtl_plan->split[%d]; /* balanced */\n", t, g2, id);
    }
    fprintf(c, "  if (dtl_dist_validate(dtl_plan->ctx, &dtl_plan->dist[%d], \"%s\")) {\n"
               "    snprintf(dtl_plan->err, sizeof dtl_plan->err, \"%%s\", dtl_ctx_error(dtl_plan->ctx));\n    return 1;\n  }\n", t, ft->name);
    fprintf(c, "  dtl_dist_block(dtl_plan->ctx, &dtl_plan->dist[%d], dtl_plan->ctx->coords, &dtl_plan->own[%d]);\n", t, t);
    if (ft->temp && !ft->sparse) { /* the plan holds a temporary's block (a sparse one starts with no entries) */
      const char *ct = cg_ctype(ft->type);
      fprintf(c, "  {\n    int64_t vol = dtl_box_volume(&dtl_plan->own[%d]);\n    size_t bytes = (size_t)(vol > 0 ? vol : 1) * sizeof(%s);\n", t, ct);
      if (sp->cuda)
        fprintf(c, "    dtl_plan->tmp[%d] = dtl_cu_malloc(bytes);\n", t);
      else
        fprintf(c, "    dtl_plan->tmp[%d] = dtl_zalloc(1, bytes);\n", t);
      fprintf(c, "    if (!dtl_plan->tmp[%d]) {\n      snprintf(dtl_plan->err, sizeof dtl_plan->err, \"out of memory for temporary %s\");\n"
                 "      return 1;\n    }\n  }\n", t, ft->name);
    }
  }
  if (sp->cuda) {
    /* NCCL communicators for the sub-communicators that broadcasts and reductions use */
    unsigned masks[256];
    int nmasks = 0;
    for (int i = 0; i < sp->nfuncs; i++) collect_masks(sp->funcs[i].body, masks, &nmasks);
    for (int v = 1; v < sp->nvariants; v++) /* and every run-time variant's */
      for (int i = 0; i < sp->variants[v].sp->nfuncs; i++) collect_masks(sp->variants[v].sp->funcs[i].body, masks, &nmasks);
    fputs("  /* device state on the current GPU: streams, cuBLAS, NCCL communicators */\n", c);
    fprintf(c, "  static const unsigned dtl_masks[%d] = {", nmasks + 1);
    for (int k = 0; k < nmasks; k++) fprintf(c, "%s0x%xu", k ? ", " : "", masks[k]);
    if (!nmasks) fputs("0", c);
    fputs("};\n", c);
    fprintf(c, "  if (dtl_cu_attach(dtl_plan->ctx, %d, dtl_masks)) {\n"
               "    snprintf(dtl_plan->err, sizeof dtl_plan->err, \"%%s\", dtl_ctx_error(dtl_plan->ctx));\n    return 1;\n  }\n", nmasks);
  }
  if (sp->nvariants > 0) emit_variant_choice(c, P);
  fputs("  return 0;\n}\n\n", c);
  if (sp->nvariants > 0) emit_variant_query(c, sp, P);
  if (sp->cuda)
    fprintf(c, "int %s_plan_destroy(%s_plan **plan) {\n  if (!plan || !*plan) return 0;\n"
               "  (void)dtl_reserve_; /* used by the statements that communicate: no warning where none does */\n"
               "  if ((*plan)->ctx && (*plan)->ctx->dev) dtl_cu_sync((*plan)->ctx);\n"
               "  for (int i = 0; i < %d; i++) dtl_cu_free((*plan)->buf[i]);\n"
               "  for (int i = 0; i < %d; i++) dtl_cu_free((*plan)->tmp[i]);\n"
               "  if ((*plan)->ctx) dtl_ctx_destroy(&(*plan)->ctx);\n  free(*plan);\n  *plan = NULL;\n  return 0;\n}\n\n",
            P, P, nslots, sp->ntensors + 1);
  else
  fprintf(c, "int %s_plan_destroy(%s_plan **plan) {\n  if (!plan || !*plan) return 0;\n%s"
             "  (void)dtl_reserve_; /* used by the statements that communicate: no warning where none does */\n"
             "  for (int i = 0; i < %d; i++) free((*plan)->buf[i]);\n"
             "  for (int i = 0; i < %d; i++) free((*plan)->tmp[i]);\n%s%s%s"
             "  if ((*plan)->ctx) dtl_ctx_destroy(&(*plan)->ctx);\n  free(*plan);\n  *plan = NULL;\n  return 0;\n}\n\n",
          P, P, sp->nsplits ? "  for (int i = 0; i < (int)(sizeof (*plan)->split / sizeof (*plan)->split[0]); i++) free((*plan)->split[i]);\n" : "",
          nslots, sp->ntensors + 1, sp->any_sparse ? "  for (int i = 0; i < (int)(sizeof (*plan)->sp / sizeof (*plan)->sp[0]); i++) dtl_sparse_free(&(*plan)->sp[i]), dtl_coo_free(&(*plan)->co[i]);\n" : "",
          sp->any_sparse ? "  for (int i = 0; i < (int)(sizeof (*plan)->tsp / sizeof (*plan)->tsp[0]); i++) dtl_sparse_free(&(*plan)->tsp[i]);\n" : "",
          halo ? "  for (int i = 0; i < (int)(sizeof (*plan)->halo / sizeof (*plan)->halo[0]); i++) dtl_halo_free(&(*plan)->halo[i]);\n" : "");
  if (sp->any_sparse) {
    /* the halo exchanges' lists follow the sparse pieces' structure: forget them */
    fprintf(c, "int %s_structure_changed(%s_plan *plan) {\n  if (!plan) return 1;\n", P, P);
    if (halo) fputs("  for (int i = 0; i < (int)(sizeof plan->halo / sizeof plan->halo[0]); i++) dtl_halo_free(&plan->halo[i]);\n", c);
    fputs("  return 0;\n}\n\n", c);
  }
  for (int t = 0; t < sp->ntensors; t++) {
    if (sp->tensors[t].temp) continue;
    fprintf(c, "int64_t %s_%s_block(const %s_plan *plan, int64_t offset[], int64_t extent[]) {\n", P, sp->tensors[t].name, P);
    fprintf(c, "  if (!plan || !plan->ctx) { /* no plan: no block */\n"
               "    for (int d = 0; d < %d; d++) {\n      if (offset) offset[d] = 0;\n      if (extent) extent[d] = 0;\n    }\n"
               "    return 0;\n  }\n  const dtl_box *b = &plan->own[%d];\n"
               "  for (int d = 0; d < b->nd; d++) {\n"
               "    if (offset) offset[d] = b->lo[d];\n"
               "    if (extent) extent[d] = b->hi[d] > b->lo[d] ? b->hi[d] - b->lo[d] : 0;\n  }\n"
               "  return dtl_box_volume(b);\n}\n\n", sp->tensors[t].order, t);
  }
  for (int t = 0; t < sp->ntensors; t++) {
    if (sp->tensors[t].temp) continue;
    if (sp->tensors[t].sparse) {
      const sp_tensor *ft = &sp->tensors[t];
      fprintf(c, "int %s_%s_import(%s_plan *plan, int64_t n, const int64_t *coords, const %s *vals, dtl_sparse *block) {\n"
                 "  if (!plan || !plan->ctx || !block) return 1;\n  static const dtl_level lv[%d] = {", P, ft->name, P,
              cg_ctype(ft->type), ft->order);
      for (int x = 0; x < ft->order; x++)
        fprintf(c, "%s%s", x ? ", " : "", ft->compressed[x] ? "DTL_LEVEL_COMPRESSED" : "DTL_LEVEL_DENSE");
      fprintf(c, "};\n  return dtl_sparse_import(plan->ctx, &plan->dist[%d], %s, lv, &plan->own[%d], n, coords, vals, block);\n}\n\n", t,
              cg_dtltype(ft->type), t);
      continue;
    }
    const char *ct = cg_ctype(sp->tensors[t].type), *n = sp->tensors[t].name, *dt = cg_dtltype(sp->tensors[t].type);
    fprintf(c, "int %s_%s_import(%s_plan *plan, const int64_t lo[], const int64_t hi[], const %s *data, %s *block) {\n"
               "  if (!plan || !plan->ctx) return 1;\n"
               "  return %s(plan->ctx, &plan->dist[%d], %s, lo, hi, data, block, &plan->own[%d]);\n}\n\n",
            P, n, P, ct, ct, sp->cuda ? "dtl_cu_import" : "dtl_import", t, dt, t);
    fprintf(c, "int %s_%s_export(%s_plan *plan, const %s *block, const int64_t lo[], const int64_t hi[], %s *data) {\n"
               "  if (!plan || !plan->ctx) return 1;\n"
               "  return %s(plan->ctx, &plan->dist[%d], %s, block, &plan->own[%d], lo, hi, data);\n}\n\n",
            P, n, P, ct, ct, sp->cuda ? "dtl_cu_export" : "dtl_export", t, dt, t);
  }
  emit_scalapack_defs(c, sp, P);
  fprintf(c, "const char *%s_error(const %s_plan *plan) {\n  if (!plan) return \"no plan (plan_create could not allocate one, or none was made)\";\n"
             "  if (plan->err[0]) return plan->err;\n  return plan->ctx ? dtl_ctx_error(plan->ctx) : \"no error\";\n}\n\n", P, P);
}

/* ---- the program: statement calls and loops ----------------------------------------------- */
/* a scalar of a loop's condition: its value on this rank, as a double (read before the test) */
static void cond_access(FILE *f, const sp_expr *e, void *vc) {
  (void)vc;
  fprintf(f, "dtl_c%d", e->tensor);
}

static void emit_items(FILE *c, const sp_program *sp, const cg_options *o, const sp_item *list, int n, int ind, bool top) {
  for (int k = 0; k < n; k++) {
    const sp_item *it = &list[k];
    if (it->kind == SP_CALL && sp->funcs[it->func].removed) {
      fprintf(c, "%*s/* statement %d removed: %s */\n", ind, "", it->func + 1, sp->funcs[it->func].removed);
      continue;
    }
    if (it->kind == SP_CALL && sp->funcs[it->func].fused_into >= 0) {
      fprintf(c, "%*s/* statement %d runs inside statement %d (fused) */\n", ind, "", it->func + 1, sp->funcs[it->func].fused_into + 1);
      continue;
    }
    if (it->kind == SP_CALL) {
      fprintf(c, "%*sif (%s_s%d(dtl_plan", ind, "", fnp(o), sp->funcs[it->func].index);
      for (int t = 0; t < sp->ntensors; t++) fprintf(c, ", %s", cg_tensor(sp, t));
      fputs(")) return 1;\n", c);
      continue;
    }
    int L = it->number;
    if (it->peel) { /* fused across the back edge: the first statements' first run */
      const sp_func *first = &sp->funcs[it->items[0].func];
      fprintf(c, "%*s/* loop %d: its first iteration's statement %d, before the loop; each next one runs inside statement %d */\n", ind, "", L,
              (first->fused_into >= 0 ? first->fused_into : first->index) + 1, it->peel_into + 1);
      emit_items(c, sp, o, it->items, it->peel, ind, false);
    }
    fprintf(c, "%*s/* loop %d (line %d)%s%s */\n", ind, "", L, it->src_line, it->cond_text ? ": until " : "",
            it->cond_text ? it->cond_text : "");
    fprintf(c, "%*sfor (int64_t dtl_it%d = 0, dtl_n%d = ", ind, "", L, L);
    cg_sym(c, sp, it->bound, false);
    fprintf(c, "; dtl_it%d < dtl_n%d; dtl_it%d++) {\n", L, L, L);
    if (top) fprintf(c, "%*sdtl_plan->iters++;\n", ind + 2, "");
    fprintf(c, "%*sdtl_plan->loop_it[%d] = dtl_it%d;\n", ind + 2, "", L, L);
    for (int q = 0; q < it->peel; q++)
      fprintf(c, "%*s/* statement %d runs inside statement %d, for the next iteration (fused across the back edge) */\n", ind + 2, "",
              it->items[q].func + 1, it->peel_into + 1);
    emit_items(c, sp, o, it->items + it->peel, it->nitems - it->peel, ind + 2, false);
    int in = ind + 2;
    /* the condition's scalars on this rank: integers as int64, floating ones as doubles */
    for (int r = 0; r < it->nreads; r++) {
      int t = it->reads[r];
      const char *ct = cg_ctype(sp->tensors[t].type);
      fe_type ty = sp->tensors[t].type;
      const char *vt = ty == FE_INT32 || ty == FE_INT64 ? "int64_t" : "double";
      if (sp->cuda) {
        fprintf(c, "%*s%s dtl_h%d;\n%*sif (dtl_cu_to_host(dtl_plan->ctx, &dtl_h%d, %s, sizeof dtl_h%d)) return 1;\n", in, "", ct, t, in, "",
                t, cg_tensor(sp, t), t);
        fprintf(c, "%*sconst %s dtl_c%d = (%s)dtl_h%d;\n", in, "", vt, t, vt, t);
      } else {
        fprintf(c, "%*sconst %s dtl_c%d = (%s)%s[0];\n", in, "", vt, t, vt, cg_tensor(sp, t));
      }
    }
    if (it->cond) {
      fprintf(c, "%*s/* every rank takes rank 0's decision (replicated values may differ in the last bit) */\n", in, "");
      fprintf(c, "%*sint dtl_stop%d = ", in, "", L);
      cg_print_cond(c, sp, it->cond, cond_access, NULL);
      fprintf(c, ";\n%*sif (dtl_agree(dtl_plan->ctx, &dtl_stop%d)) return 1;\n", in, "", L);
    }
    fprintf(c, "%*sif (dtl_plan->monitor && dtl_is_root(dtl_plan->ctx)) {\n", in, "");
    fprintf(c, "%*sprintf(\"monitor: loop %d iteration %%lld%s", in + 2, "", L, it->nreads ? ":" : "");
    /* an integer scalar as an integer, a floating one in %e */
    for (int r = 0; r < it->nreads; r++) {
      fe_type ty = sp->tensors[it->reads[r]].type;
      fprintf(c, " %s=%s", sp->tensors[it->reads[r]].name, ty == FE_INT32 || ty == FE_INT64 ? "%lld" : "%.6e");
    }
    fprintf(c, "\\n\", (long long)(dtl_it%d + 1)", L);
    for (int r = 0; r < it->nreads; r++) {
      fe_type ty = sp->tensors[it->reads[r]].type;
      fprintf(c, ", (%s)dtl_c%d", ty == FE_INT32 || ty == FE_INT64 ? "long long" : "double", it->reads[r]);
    }
    fprintf(c, ");\n%*sfflush(stdout);\n%*s}\n", in + 2, "", in, "");
    if (it->cond) fprintf(c, "%*sif (dtl_stop%d) break;\n", in, "", L);
    fprintf(c, "%*s}\n", ind, "");
  }
}

/* the statement functions of sp, each after the declarations its kernels need */
static int emit_funcs(FILE *c, FILE *cu, const sp_program *sp, const cg_options *o) {
  for (int i = 0; i < sp->nfuncs; i++) {
    if (sp->funcs[i].fused_into >= 0 || sp->funcs[i].removed) continue; /* it runs inside another statement's function, or not at all */
    char *body = NULL, *decl = NULL;
    size_t bl = 0, dl = 0;
    FILE *fb = open_memstream(&body, &bl), *fd = open_memstream(&decl, &dl);
    if (!fb || !fd) return 1;
    emit_stmt(fb, fd, cu, sp, &sp->funcs[i], o);
    fclose(fb);
    fclose(fd);
    fputs(decl, c);
    fputs(body, c);
    free(body);
    free(decl);
  }
  return 0;
}

int cg_emit(FILE *h, FILE *c, FILE *cu, const sp_program *sp, const cg_options *o) {
  FILE *nul = NULL;
  if (!cu) cu = nul = fopen("/dev/null", "w");
  if (!cu) return 1;
  emit_header(h, sp, o);
  fprintf(c, "/* %s.c -- generated by distalc " PACKAGE_VERSION " from %s.  Do not edit.\n", o->prefix, o->source_name);
  if (sp->cuda)
    fprintf(c, " * SPMD C over MPI, NCCL and libdistal_cuda: every rank runs this code on its own blocks,\n"
               " * which live in the memory of its GPU; the local loops are kernels in %s.cu. */\n", o->prefix);
  else
    fputs(" * SPMD C over MPI and libdistal: every rank runs this code on its own blocks. */\n", c);
  fputs("#include <math.h>\n#include <stdbool.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
        "#include <distal/runtime.h>\n", c);
  if (sp->cuda) fputs("#include <distal/cuda.h>\n", c);
  fprintf(c, "#include \"%s\"\n\n", o->header_name);
  if (sp->cuda)
    fprintf(cu, "/* %s.cu -- generated by distalc " PACKAGE_VERSION " from %s.  Do not edit.\n"
                " * The CUDA kernels of %s.c: the local loops of each statement, one thread per\n"
                " * iteration of the loops mapped to threads. */\n"
                "#include <cuda_runtime.h>\n#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n"
                "#include <distal/kernel.cuh>\n\n",
            o->prefix, o->source_name, o->prefix);
  emit_plan(c, sp, o);
  if (emit_funcs(c, cu, sp, o)) return 1;
  /* the run-time choice: each other variant's statement functions, named PREFIX_vN_sK */
  cg_options *vo = calloc((size_t)sp->nvariants + 1, sizeof *vo);
  char (*vn)[600] = calloc((size_t)sp->nvariants + 1, sizeof *vn);
  if (!vo || !vn) return free(vo), free(vn), 1;
  for (int v = 1; v < sp->nvariants; v++) {
    vo[v] = *o;
    snprintf(vn[v], sizeof vn[v], "%s_v%d", o->prefix, v);
    vo[v].fn_prefix = vn[v];
    fprintf(c, "/* ---- variant %d of the schedules (%s) ---- */\n\n", v, sp->variants[v].label);
    if (emit_funcs(c, cu, sp->variants[v].sp, &vo[v])) return free(vo), free(vn), 1;
  }
  fprintf(c, "int %s_compute(%s_plan *dtl_plan", o->prefix, o->prefix);
  for (int t = 0; t < sp->ntensors; t++)
    if (!sp->tensors[t].temp) cg_tensor_param(c, sp, t);
  fputs(") {\n  if (!dtl_plan || !dtl_plan->ctx) return 1;\n  dtl_plan->err[0] = 0;\n  dtl_plan->iters = 0;\n", c);
  if (sp->cuda)
    fputs("  /* the blocks may come from the application's copies on the default stream */\n"
          "  if (dtl_cu_after_default(dtl_plan->ctx)) return 1;\n", c);
  if (has_halo(sp)) fputs("  dtl_plan->epoch++; /* the sparse pieces may have changed since the last call */\n", c);
  for (int t = 0; t < sp->ntensors; t++) {
    const sp_tensor *x = &sp->tensors[t];
    if (!x->temp) continue;
    if (x->sparse) fprintf(c, "  dtl_sparse *%s = &dtl_plan->tsp[%d]; /* temporary */\n", cg_tensor(sp, t), t);
    else fprintf(c, "  %s *%s = dtl_plan->tmp[%d]; /* temporary */\n", cg_ctype(x->type), cg_tensor(sp, t), t);
  }
  if (sp->nloops) declare_params(c, sp, "dtl_plan->p", 2), declare_splits(c, sp, "dtl_plan", 2);
  if (sp->any_sparse) {
    /* every sparse piece must be this rank's block, in the declared formats (collective) */
    fputs("  {\n    int dtl_bad = 0;\n", c);
    for (int t = 0; t < sp->ntensors; t++) {
      if (!sp->tensors[t].sparse || (sp->tensors[t].temp && !sp->tensors[t].written)) continue; /* (an unused temporary) */
      const sp_tensor *ft = &sp->tensors[t];
      const char *n = cg_tensor(sp, t);
      if (ft->written) { /* a result may start as a zeroed dtl_sparse: no entries */
        fprintf(c, "    if (%s && %s->order == 0 && !%s->vals) {\n      static const dtl_level lv[] = {", n, n, n);
        for (int x = 0; x < ft->order; x++)
          fprintf(c, "%s%s", x ? ", " : "", ft->compressed[x] ? "DTL_LEVEL_COMPRESSED" : "DTL_LEVEL_DENSE");
        fprintf(c, "};\n      if (dtl_sparse_empty(%s, %s, %d, lv, &dtl_plan->own[%d])) dtl_bad = dtl_fail(dtl_plan->ctx, \"out of memory\");\n    }\n",
                n, cg_dtltype(ft->type), ft->order, t);
      }
      fprintf(c, "    if (!dtl_bad && (!%s || %s->order != %d || %s->type != %s || !dtl_box_equal(&%s->box, &dtl_plan->own[%d])", n, n,
              ft->order, n, cg_dtltype(ft->type), n, t);
      for (int x = 0; x < ft->order; x++)
        fprintf(c, " || %s->level[%d] != %s", n, x, ft->compressed[x] ? "DTL_LEVEL_COMPRESSED" : "DTL_LEVEL_DENSE");
      fprintf(c, "))\n      dtl_bad = dtl_fail(dtl_plan->ctx, \"tensor %s: the sparse piece is not this rank's block of type %s in the "
                 "declared level formats (build it with dtl_sparse_from_coo over the box of %s_%s_block)\");\n",
              ft->name, cg_typename(ft->type), o->prefix, ft->name);
    }
    fputs("    if (dtl_any_error(dtl_plan->ctx, dtl_bad)) return 1;\n  }\n", c);
  }
  if (sp->nvariants > 1) {
    for (int v = 1; v < sp->nvariants; v++) {
      fprintf(c, "  %sif (dtl_plan->variant == %d) {\n", v > 1 ? "} else " : "", v);
      emit_items(c, sp->variants[v].sp, &vo[v], sp->variants[v].sp->items, sp->variants[v].sp->nitems, 4, true);
    }
    fputs("  } else {\n", c);
    emit_items(c, sp, o, sp->items, sp->nitems, 4, true);
    fputs("  }\n", c);
  } else
    emit_items(c, sp, o, sp->items, sp->nitems, 2, true);
  free(vo);
  free(vn);
  if (sp->cuda) fputs("  /* the blocks are final when compute returns */\n  if (dtl_cu_sync(dtl_plan->ctx)) return 1;\n", c);
  fputs("  return 0;\n}\n", c);
  if (sp->nloops)
    fprintf(c, "\nint64_t %s_iterations(const %s_plan *plan) { return plan ? plan->iters : 0; }\n", o->prefix, o->prefix);
  if (o->main) cg_emit_driver(c, sp, o);
  int bad = ferror(c) || ferror(h) || ferror(cu);
  if (nul) fclose(nul);
  return bad;
}
