/* test_catalogue.c -- unit tests of the kernel catalogue (kernels/catalogue.h): its names
 * and forms against the schedule's matcher (every kernel substituted in a small program,
 * mismatched layouts rejected with the located message), the call it describes for the
 * layouts of each kernel against expectations written out by hand from the entry points'
 * signatures, the calls the printer spells from it, its entry points against their
 * declarations in distal/runtime.h and distal/cuda.h, and its flop counts against the
 * counts the printer derives from the statement. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontend/frontend.h"
#include "ir/ir.h"
#include "lower_mpi/lower.h"
#include "codegen/cg_internal.h"
#include "kernels/catalogue.h"
#include "harness.h"

/* ---- harness ------------------------------------------------------------------------ */

/* A program through the schedule, diagnostics into memory: the IR, the number of errors
 * and the first error's line, column and message. */
typedef struct {
  ir_program *ir;
  int errors, line, col;
  char msg[512];
  fe_program *prog;
  fe_source *src;
  FILE *err;
  char *diags;
  size_t len;
} compiled;

static void compile(compiled *c, const char *text) {
  memset(c, 0, sizeof *c);
  c->err = open_memstream(&c->diags, &c->len);
  assert_non_null(c->err);
  unit_frontend(text, c->err, &c->diags, &c->src, &c->prog);
  assert_non_null(c->ir = ir_build(c->prog));
  c->errors = ir_schedule(c->ir, -1);
  fflush(c->err);
  int off = 0;
  if (c->diags && sscanf(c->diags, "t.dtl:%d:%d: error: %n", &c->line, &c->col, &off) == 2 && off > 0)
    snprintf(c->msg, sizeof c->msg, "%.*s", (int)strcspn(c->diags + off, "\n"), c->diags + off);
}

static void release(compiled *c) {
  fe_program_free(c->prog);
  fe_source_free(c->src);
  fclose(c->err);
  free(c->diags);
  ir_arena_free();
}

/* The kernel on the statement's outermost substituted loop, KERNEL_NONE if none. */
static ir_kernel kernel_of(const compiled *c) {
  const cin_node *loops[16];
  int n = cin_loops(c->ir->stmts[0].root, loops, 16);
  for (int q = 0; q < n && q < 16; q++)
    if (loops[q]->kernel) return loops[q]->kernel;
  return KERNEL_NONE;
}

/* The forms as the schedule's messages have always quoted them (LANGUAGE.md section 5). */
static const char *const forms[KERNEL_COUNT] = {
    [KERNEL_GEMM] = "A(i,j) = B(i,k) * C(k,j) over three loops i, j, k",
    [KERNEL_GEMV] = "a(i) = B(i,j) * c(j) over two loops i, j",
    [KERNEL_DOT] = "a = b(i) * c(i) over one loop i",
    [KERNEL_AXPY] = "y(i) += a * x(i) over one loop i (a a scalar or a constant)",
    [KERNEL_TTV] = "A(i,j) = B(i,j,k) * c(k)",
    [KERNEL_TTM] = "A(i,j,l) = B(i,j,k) * C(k,l)",
    [KERNEL_MTTKRP] = "A(i,l) = B(i,j,k) * C(j,l) * D(k,l)",
    [KERNEL_INNERPROD] = "a = B(i,j,k) * C(i,j,k)"};
static const char *const names[KERNEL_COUNT] = {"", "gemm", "gemv", "dot", "axpy", "ttv", "ttm", "mttkrp", "innerprod"};

#define HDR "param ni = 3;\nparam nj = 4;\nparam nk = 5;\nparam nl = 2;\n"
#define HDR_LINES 4

/* Compile HDR + decls + stmt + "\n  .substitute(LOOPS, NAME);" and expect it accepted as
 * kernel k, or (want_error) rejected with one error at the kernel's name on the schedule's
 * line whose message is "substitute: the statement does not match NAME (FORM)". */
static void expect_substitute(const char *decls, int ndecl_lines, const char *stmt, const char *loops,
                              ir_kernel k, bool want_error) {
  char text[2048];
  snprintf(text, sizeof text, HDR "%s%s\n  .substitute(%s, %s);\n", decls, stmt, loops, names[k]);
  compiled c;
  compile(&c, text);
  if (c.errors != (want_error ? 1 : 0)) fprintf(stderr, "--- program:\n%s--- diagnostics:\n%s", text, c.diags ? c.diags : "");
  if (!want_error) {
    assert_int_equal(c.errors, 0);
    assert_int_equal(kernel_of(&c), k);
  } else {
    char want[512];
    snprintf(want, sizeof want, "substitute: the statement does not match %s (%s)", names[k], forms[k]);
    assert_int_equal(c.errors, 1);
    assert_string_equal(c.msg, want);
    assert_int_equal(c.line, HDR_LINES + ndecl_lines + 2);
    /* the column of NAME in "  .substitute(LOOPS, NAME);" */
    assert_int_equal(c.col, (int)(strlen("  .substitute(") + strlen(loops) + strlen(", ")) + 1);
  }
  release(&c);
}

/* ---- the table ---------------------------------------------------------------------------- */

/* Names, lookup, the IR's names, the list in "unknown kernel", the forms of the messages. */
static void test_names_and_forms(void **state) {
  (void)state;
  assert_null(kc_get(KERNEL_NONE));
  assert_null(kc_get(KERNEL_COUNT));
  assert_string_equal(ir_kernel_name(KERNEL_NONE), "none");
  for (int k = KERNEL_NONE + 1; k < KERNEL_COUNT; k++) {
    const kc_info *in = kc_get((kc_kernel)k);
    assert_non_null(in);
    assert_string_equal(in->name, names[k]);
    assert_int_equal(kc_lookup(names[k]), k);
    assert_string_equal(ir_kernel_name((ir_kernel)k), names[k]);
    char form[256];
    assert_int_equal(kc_form((kc_kernel)k, form, sizeof form), (int)strlen(forms[k]));
    assert_string_equal(form, forms[k]);
    /* the operands' names are distinct, and the call names each once */
    assert_int_equal((int)strlen(in->call), in->noperands);
    for (int o = 0; o < in->noperands; o++) {
      assert_non_null(strchr(in->call, in->op[o].name));
      for (int p = 0; p < o; p++) assert_true(in->op[p].name != in->op[o].name);
    }
  }
  assert_int_equal(kc_lookup("gem"), KERNEL_NONE);
  assert_int_equal(kc_lookup(""), KERNEL_NONE);
  char list[256];
  kc_names(list, sizeof list);
  assert_string_equal(list, "gemm, gemv, dot, axpy, ttv, ttm, mttkrp, innerprod");
  /* truncation keeps snprintf's contract */
  char small[8];
  assert_int_equal(kc_names(small, sizeof small), (int)strlen(list));
  assert_string_equal(small, "gemm, g");
  assert_int_equal(kc_form(KERNEL_TTV, small, sizeof small), (int)strlen(forms[KERNEL_TTV]));
  assert_string_equal(small, "A(i,j) ");
  /* an unknown kernel: the list comes from the table */
  compiled c;
  compile(&c, HDR "tensor A(ni, nj);\ntensor B(ni, nj);\nA(i, j) = B(i, j)\n  .substitute({i, j}, gem);\n");
  assert_int_equal(c.errors, 1);
  assert_string_equal(c.msg, "substitute: unknown kernel 'gem' (gemm, gemv, dot, axpy, ttv, ttm, mttkrp, innerprod)");
  assert_int_equal(c.line, HDR_LINES + 4);
  assert_int_equal(c.col, 23);
  release(&c);
}

/* The kernel's own form, as text: declarations of its operands (extents n<letter>; an
 * operand whose letters are reversed when `reverse` has its letters and extents reversed)
 * and the statement. */
static void form_program(kc_kernel k, int reverse, char *decls, size_t nd, char *stmt, size_t ns,
                         char *loops, size_t nl) {
  const kc_info *in = kc_get(k);
  size_t d = 0, s = 0;
  decls[0] = stmt[0] = 0;
  for (int o = 0; o < in->noperands; o++) {
    const kc_operand *op = &in->op[o];
    char let[8];
    int n = (int)strlen(op->letters);
    for (int x = 0; x < n; x++) let[x] = op->letters[(reverse == o && n > 1) ? n - 1 - x : x];
    let[n] = 0;
    d += (size_t)snprintf(decls + d, nd - d, "tensor %c", op->name);
    s += (size_t)snprintf(stmt + s, ns - s, "%s%c", o == 0 ? "" : o == 1 ? (strcmp(in->assign, "=") ? " += " : " = ") : " * ",
                          op->name);
    for (int x = 0; x < n; x++) {
      d += (size_t)snprintf(decls + d, nd - d, "%sn%c", x ? ", " : "(", let[x]);
      s += (size_t)snprintf(stmt + s, ns - s, "%s%c", x ? ", " : "(", let[x]);
    }
    d += (size_t)snprintf(decls + d, nd - d, "%s;\n", n ? ")" : "");
    if (n) s += (size_t)snprintf(stmt + s, ns - s, ")");
  }
  size_t l = (size_t)snprintf(loops, nl, "{");
  for (int L = 0; L < kc_nletters(k); L++) l += (size_t)snprintf(loops + l, nl - l, "%s%c", L ? ", " : "", 'i' + L);
  snprintf(loops + l, nl - l, "}");
}

/* Every kernel's form from the table is accepted by the matcher; with the letters of one
 * factor reversed it is accepted where that factor may be transposed, rejected (located)
 * otherwise. */
static void test_matcher_accepts_the_table(void **state) {
  (void)state;
  for (int k = KERNEL_NONE + 1; k < KERNEL_COUNT; k++) {
    const kc_info *in = kc_get((kc_kernel)k);
    char decls[512], stmt[256], loops[64];
    form_program((kc_kernel)k, -1, decls, sizeof decls, stmt, sizeof stmt, loops, sizeof loops);
    expect_substitute(decls, in->noperands, stmt, loops, (ir_kernel)k, false);
    for (int o = 1; o < in->noperands; o++) {
      if (strlen(in->op[o].letters) < 2) continue;
      form_program((kc_kernel)k, o, decls, sizeof decls, stmt, sizeof stmt, loops, sizeof loops);
      expect_substitute(decls, in->noperands, stmt, loops, (ir_kernel)k, in->op[o].role != KC_TRANSPOSABLE);
    }
  }
}

#define DECLS                                                                                      \
  "tensor A(ni, nj);\ntensor At(nj, ni);\ntensor B(ni, nk);\ntensor Bt(nk, ni);\ntensor C(nk, nj);\n"  \
  "tensor Ct(nj, nk);\ntensor a(ni);\ntensor b(nk);\ntensor c(nj);\ntensor s;\ntensor T(ni, nj, nk);\n" \
  "tensor U(ni, nj, nk);\ntensor Tp(nj, ni, nk);\ntensor V(ni, nj);\ntensor E(nk, nl);\n"             \
  "tensor W(ni, nj, nl);\ntensor K(ni, nl);\ntensor F(nj, nl);\ntensor G(nk, nl);\ntensor x(ni);\n"   \
  "tensor y(ni);\ntensor S(ni, nk) int32;\n"
#define DECL_LINES 22

/* Statements written as a user would, in any loop order: accepted or rejected. */
static void test_matcher_layouts(void **state) {
  (void)state;
  static const struct {
    const char *stmt, *loops;
    ir_kernel k;
    bool bad;
  } cases[] = {
      {"A(i, j) = B(i, k) * C(k, j)", "{i, j, k}", KERNEL_GEMM, false},
      {"A(i, j) = Bt(k, i) * C(k, j)", "{k, i, j}", KERNEL_GEMM, false},
      {"A(i, j) = Ct(j, k) * Bt(k, i)", "{j, k, i}", KERNEL_GEMM, false},
      {"At(j, i) = B(i, k) * C(k, j)", "{i, j, k}", KERNEL_GEMM, false},
      {"A(i, j) = B(i, k) * Bt(k, i)", "{i, j, k}", KERNEL_GEMM, true},
      {"A(i, j) = B(i, k) * C(k, j)", "{j, k}", KERNEL_GEMM, true},
      {"a(i) = A(i, j) * c(j)", "{i, j}", KERNEL_GEMV, false},
      {"a(i) = c(j) * At(j, i)", "{j, i}", KERNEL_GEMV, false},
      {"a(i) = A(i, j) * a(i)", "{i, j}", KERNEL_GEMV, true},
      {"s = x(i) * y(i)", "{i}", KERNEL_DOT, false},
      {"a(i) = x(i) * y(i)", "{i}", KERNEL_DOT, true},
      {"y(i) += s * x(i)", "{i}", KERNEL_AXPY, false},
      {"y(i) += x(i) * 2.5", "{i}", KERNEL_AXPY, false},
      {"y(i) += x(i) * a(i)", "{i}", KERNEL_AXPY, true},
      {"V(i, j) = b(k) * T(i, j, k)", "{k, j, i}", KERNEL_TTV, false},
      {"V(i, j) = Tp(j, i, k) * b(k)", "{i, j, k}", KERNEL_TTV, true},
      {"W(i, j, l) = E(k, l) * T(i, j, k)", "{i, j, l, k}", KERNEL_TTM, false},
      {"W(i, j, l) = T(i, j, k) * G(k, l)", "{i, j, l, k}", KERNEL_TTM, false},
      {"W(i, j, l) = Tp(j, i, k) * E(k, l)", "{i, j, l, k}", KERNEL_TTM, true},
      {"K(i, l) = G(k, l) * T(i, j, k) * F(j, l)", "{i, l, j, k}", KERNEL_MTTKRP, false},
      {"K(i, l) = Tp(j, i, k) * F(j, l) * G(k, l)", "{i, l, j, k}", KERNEL_MTTKRP, true},
      {"K(i, l) = T(i, j, k) * F(j, l)", "{i, l, j, k}", KERNEL_MTTKRP, true},
      {"s = T(i, j, k) * U(i, j, k)", "{k, i, j}", KERNEL_INNERPROD, false},
      {"s = T(i, j, k) * Tp(j, i, k)", "{i, j, k}", KERNEL_INNERPROD, true},
      {"s = T(i, j, k) * 2", "{i, j, k}", KERNEL_INNERPROD, true},
  };
  for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++)
    expect_substitute(DECLS, DECL_LINES, cases[q].stmt, cases[q].loops, cases[q].k, cases[q].bad);
  /* a type mismatch keeps its own message */
  compiled c;
  compile(&c, HDR DECLS "A(i, j) = S(i, k) * C(k, j)\n  .substitute({i, j, k}, gemm);\n");
  assert_int_equal(c.errors, 1);
  assert_string_equal(c.msg, "substitute: gemm needs every tensor of the statement to have the same type");
  release(&c);
}

/* ir_kernel_fits (what the search asks before it builds a candidate) agrees with substitute:
 * for statements of every kernel's form and others, in every loop order (reorder) and for
 * every number of innermost loops, each kernel fits exactly where substitute accepts it. */
static void test_fits_agrees_with_substitute(void **state) {
  (void)state;
  static const char *const stmts[] = {
      "A(i, j) = B(i, k) * C(k, j)", "A(i, j) = Bt(k, i) * C(k, j)", "a(i) = A(i, j) * c(j)", "a(i) = c(j) * At(j, i)",
      "s = x(i) * y(i)", "y(i) += s * x(i)", "y(i) += x(i) * 2.5", "V(i, j) = b(k) * T(i, j, k)",
      "W(i, j, l) = T(i, j, k) * G(k, l)", "K(i, l) = G(k, l) * T(i, j, k) * F(j, l)", "s = T(i, j, k) * U(i, j, k)",
      "A(i, j) = S(i, k) * C(k, j)", "A(i, j) = B(i, k) * Bt(k, i)", "V(i, j) = Tp(j, i, k) * b(k)", "A(i, j) = V(i, j) * At(j, i)",
      "a(i) = x(i) * y(i)", "s = T(i, j, k) * 2"};
  int agreed = 0, fitted = 0;
  for (size_t q = 0; q < sizeof stmts / sizeof stmts[0]; q++) {
    compiled base;
    char text[2048];
    snprintf(text, sizeof text, HDR DECLS "%s;\n", stmts[q]);
    compile(&base, text);
    assert_int_equal(base.errors, 0);
    const ir_stmt *st = &base.ir->stmts[0];
    const cin_node *loops[8];
    int n = cin_loops(st->root, loops, 8), perm[8], vars[8];
    assert_true(n >= 1 && n <= 4);
    for (int x = 0; x < n; x++) vars[x] = loops[x]->var;
    int64_t total = 1;
    for (int x = 0; x < n; x++) total *= n;
    for (int64_t code = 0; code < total; code++) { /* every order of the loops */
      int64_t c = code;
      bool used[8] = {false}, distinct = true;
      for (int x = 0; x < n; x++, c /= n) {
        perm[x] = (int)(c % n);
        distinct &= !used[perm[x]];
        used[perm[x]] = true;
      }
      if (!distinct) continue;
      for (int m = 1; m <= n; m++)
        for (int k = KERNEL_NONE + 1; k < KERNEL_COUNT; k++) {
          char order[64], inner[64];
          int w = snprintf(order, sizeof order, "{"), v = snprintf(inner, sizeof inner, "{");
          int orig[8];
          for (int x = 0; x < n; x++) {
            const char *name = st->vars[vars[perm[x]]].name;
            w += snprintf(order + w, sizeof order - (size_t)w, "%s%s", x ? ", " : "", name);
            if (x >= n - m) {
              v += snprintf(inner + v, sizeof inner - (size_t)v, "%s%s", x > n - m ? ", " : "", name);
              orig[x - (n - m)] = vars[perm[x]];
            }
          }
          snprintf(order + w, sizeof order - (size_t)w, "}");
          snprintf(inner + v, sizeof inner - (size_t)v, "}");
          bool fits = ir_kernel_fits(base.ir, cin_assign(st->root), (ir_kernel)k, orig, m) == IR_FITS;
          compiled c2;
          snprintf(text, sizeof text, HDR DECLS "%s\n  .reorder(%s)\n  .substitute(%s, %s);\n", stmts[q], order, inner, names[k]);
          compile(&c2, text);
          if (fits != (c2.errors == 0)) fprintf(stderr, "--- disagree (fits %d):\n%s%s", fits, text, c2.diags ? c2.diags : "");
          assert_int_equal(fits, c2.errors == 0);
          agreed++, fitted += fits;
          fclose(c2.err), free(c2.diags), fe_program_free(c2.prog), fe_source_free(c2.src);
        }
    }
    release(&base);
  }
  assert_true(agreed > 1000 && fitted > 20); /* the cases ran, and some fit */
}

/* ---- the call --------------------------------------------------------------------------- */

/* A call as text: T type, f<flag>, n<dim> extent, p<operand> pointer, s<operand>.<pos>
 * stride, a<operand> scalar address. */
static char *call_text(const kc_call *c) {
  static char buf[512];
  size_t n = 0;
  buf[0] = 0;
  for (int a = 0; a < c->nargs; a++) {
    const kc_arg *x = &c->arg[a];
    const char *sep = a ? " " : "";
    switch (x->kind) {
    case KC_ARG_TYPE: n += (size_t)snprintf(buf + n, sizeof buf - n, "%sT", sep); break;
    case KC_ARG_FLAG: n += (size_t)snprintf(buf + n, sizeof buf - n, "%sf%d", sep, x->value); break;
    case KC_ARG_EXTENT: n += (size_t)snprintf(buf + n, sizeof buf - n, "%sn%d", sep, x->value); break;
    case KC_ARG_POINTER: n += (size_t)snprintf(buf + n, sizeof buf - n, "%sp%d", sep, x->operand); break;
    case KC_ARG_STRIDE: n += (size_t)snprintf(buf + n, sizeof buf - n, "%ss%d.%d", sep, x->operand, x->pos); break;
    case KC_ARG_SCALAR: n += (size_t)snprintf(buf + n, sizeof buf - n, "%sa%d", sep, x->operand); break;
    }
  }
  return buf;
}

/* An access from its kernel dimensions per storage position ("02": positions walk kernel
 * dimensions 0 and 2; '.' a position outside the kernel); "#" a number. */
static kc_access acc(const char *dims) {
  kc_access a = {0};
  if (!strcmp(dims, "#")) {
    a.number = true;
    return a;
  }
  a.nidx = (int)strlen(dims);
  for (int p = 0; p < a.nidx; p++) a.dim[p] = dims[p] == '.' ? -1 : dims[p] - '0';
  return a;
}

static void expect_call(kc_kernel k, int ndims, const char *const *ops, int nops, const char *want) {
  kc_access a[KC_MAX_OPERANDS];
  for (int o = 0; o < nops; o++) a[o] = acc(ops[o]);
  kc_call c;
  bool ok = kc_describe_call(k, ndims, nops, a, &c);
  if (!want) {
    assert_false(ok);
    return;
  }
  assert_true(ok);
  assert_ptr_equal(c.kernel, kc_get(k));
  if (strcmp(call_text(&c), want)) fprintf(stderr, "%s: want %s, got %s\n", names[k], want, call_text(&c));
  assert_string_equal(call_text(&c), want);
}

#define CALL(k, nd, want, ...)                                                                     \
  do {                                                                                             \
    const char *const o_[] = {__VA_ARGS__};                                                        \
    expect_call(k, nd, o_, (int)(sizeof o_ / sizeof o_[0]), want);                                 \
  } while (0)

/* dtl_gemm(t, transa, transb, m, n, k, A, lda, B, ldb, C, ldc), C (m x n) += op(A) op(B),
 * row-major: the leading dimension of a stored matrix is the stride of its first stored
 * dimension; loops numbered 0, 1, 2 in nest order. */
static void test_call_gemm(void **state) {
  (void)state;
  /* C(i,j) = A(i,k) B(k,j), loops i=0 j=1 k=2 */
  CALL(KERNEL_GEMM, 3, "T f0 f0 n0 n1 n2 p1 s1.0 p2 s2.0 p0 s0.0", "01", "02", "21");
  /* A transposed: A stored (k, i) */
  CALL(KERNEL_GEMM, 3, "T f1 f0 n0 n1 n2 p1 s1.0 p2 s2.0 p0 s0.0", "01", "20", "21");
  /* B transposed: B stored (j, k) */
  CALL(KERNEL_GEMM, 3, "T f0 f1 n0 n1 n2 p1 s1.0 p2 s2.0 p0 s0.0", "01", "02", "12");
  /* the factors in the other order: B first in the statement, both transposed */
  CALL(KERNEL_GEMM, 3, "T f1 f1 n0 n1 n2 p2 s2.0 p1 s1.0 p0 s0.0", "01", "12", "20");
  /* loops in another order (k=0 i=1 j=2): m, n, k follow the output, not the loops */
  CALL(KERNEL_GEMM, 3, "T f0 f0 n1 n2 n0 p1 s1.0 p2 s2.0 p0 s0.0", "12", "10", "02");
  /* the output transposed: C stored (j, i) is C^T = B^T A^T, so m walks j and the factors
   * trade places */
  CALL(KERNEL_GEMM, 3, "T f1 f1 n1 n0 n2 p2 s2.0 p1 s1.0 p0 s0.0", "10", "02", "21");
  /* an index outside the kernel before the matrix (a batch): the ld is the stride of the
   * first position inside it */
  CALL(KERNEL_GEMM, 3, "T f0 f0 n0 n1 n2 p1 s1.1 p2 s2.0 p0 s0.1", ".01", ".02", "21");
  /* not gemm: the second factor does not hold k and j */
  CALL(KERNEL_GEMM, 3, NULL, "01", "02", "20");
  CALL(KERNEL_GEMM, 2, NULL, "01", "0", "1");
}

/* dtl_gemv(t, trans, m, n, A, lda, x, incx, y, incy): y (m) += op(A) x; dtl_dot(t, n, x,
 * incx, y, incy, r); dtl_axpy(t, n, alpha, x, incx, y, incy). */
static void test_call_blas12(void **state) {
  (void)state;
  CALL(KERNEL_GEMV, 2, "T f0 n0 n1 p1 s1.0 p2 s2.0 p0 s0.0", "0", "01", "1");
  CALL(KERNEL_GEMV, 2, "T f1 n0 n1 p1 s1.0 p2 s2.0 p0 s0.0", "0", "10", "1");
  CALL(KERNEL_GEMV, 2, "T f0 n1 n0 p2 s2.0 p1 s1.0 p0 s0.0", "1", "0", "10");
  CALL(KERNEL_GEMV, 2, "T f0 n0 n1 p1 s1.1 p2 s2.0 p0 s0.1", ".0", ".01", "1");
  CALL(KERNEL_GEMV, 2, NULL, "0", "01", "0");
  CALL(KERNEL_DOT, 1, "T n0 p1 s1.0 p2 s2.0 p0", "", "0", "0");
  CALL(KERNEL_DOT, 1, "T n0 p1 s1.1 p2 s2.0 p0", ".", ".0", "0");
  CALL(KERNEL_DOT, 1, NULL, "0", "0", "0");
  /* the scalar is either factor, a number or an access outside the kernel */
  CALL(KERNEL_AXPY, 1, "T n0 a1 p2 s2.0 p0 s0.0", "0", "", "0");
  CALL(KERNEL_AXPY, 1, "T n0 a2 p1 s1.0 p0 s0.0", "0", "0", "#");
  CALL(KERNEL_AXPY, 1, "T n0 a2 p1 s1.1 p0 s0.0", "0", ".0", ".");
  CALL(KERNEL_AXPY, 1, NULL, "0", "0", "0");
  CALL(KERNEL_AXPY, 1, NULL, "#", "", "0");
}

/* dtl_ttv(t, ni, nj, nk, B, sBi, sBj, sBk, c, sc, A, sAi, sAj) and the others: extents by
 * letter, then each operand with a stride per letter, the output last. */
static void test_call_tensor(void **state) {
  (void)state;
  CALL(KERNEL_TTV, 3, "T n0 n1 n2 p1 s1.0 s1.1 s1.2 p2 s2.0 p0 s0.0 s0.1", "01", "012", "2");
  /* loops listed k, j, i (kernel dimension 0 walks k) and the factors swapped */
  CALL(KERNEL_TTV, 3, "T n2 n1 n0 p2 s2.0 s2.1 s2.2 p1 s1.0 p0 s0.0 s0.1", "21", "0", "210");
  CALL(KERNEL_TTV, 3, NULL, "01", "102", "2");
  /* dtl_ttm(t, ni, nj, nk, nl, B, sBi, sBj, sBk, C, sCk, sCl, A, sAi, sAj, sAl) over loops
   * i j l k */
  CALL(KERNEL_TTM, 4, "T n0 n1 n3 n2 p1 s1.0 s1.1 s1.2 p2 s2.0 s2.1 p0 s0.0 s0.1 s0.2", "012", "013", "32");
  CALL(KERNEL_TTM, 4, "T n0 n1 n3 n2 p2 s2.0 s2.1 s2.2 p1 s1.0 s1.1 p0 s0.0 s0.1 s0.2", "012", "32", "013");
  /* dtl_mttkrp(t, ni, nj, nk, nl, B, sBi, sBj, sBk, C, sCj, sCl, D, sDk, sDl, A, sAi, sAl):
   * the factors D, B, C in the statement; loops i l j k */
  CALL(KERNEL_MTTKRP, 4, "T n0 n2 n3 n1 p2 s2.0 s2.1 s2.2 p3 s3.0 s3.1 p1 s1.0 s1.1 p0 s0.0 s0.1", "01", "31", "023",
       "21");
  /* B(i,k,j) C(j,l) D(k,l) is the form with j and k renamed; B(k,i,j) is not */
  CALL(KERNEL_MTTKRP, 4, "T n0 n3 n2 n1 p2 s2.0 s2.1 s2.2 p1 s1.0 s1.1 p3 s3.0 s3.1 p0 s0.0 s0.1", "01", "31", "032",
       "21");
  CALL(KERNEL_MTTKRP, 4, NULL, "01", "31", "302", "21");
  /* dtl_innerprod(t, ni, nj, nk, B, sBi, sBj, sBk, C, sCi, sCj, sCk, r): an outer index
   * before C's block */
  CALL(KERNEL_INNERPROD, 3, "T n0 n1 n2 p1 s1.0 s1.1 s1.2 p2 s2.1 s2.2 s2.3 p0", "", "012", ".012");
  CALL(KERNEL_INNERPROD, 3, NULL, "", "012", "102");
}

/* ---- the printer ---------------------------------------------------------------------- */

/* A program that must compile: lowered for the host or the device. */
static lw_program *lowered(compiled *c, const char *text, bool cuda) {
  compile(c, text);
  if (c->errors) fprintf(stderr, "--- diagnostics:\n%s", c->diags);
  assert_int_equal(c->errors, 0);
  lw_program *lp = lw_lower(c->ir, cuda);
  assert_non_null(lp);
  return lp;
}

static char *emit(const char *text, bool cuda) {
  compiled r;
  lw_program *lp = lowered(&r, text, cuda);
  char *h = NULL, *c = NULL, *k = NULL;
  size_t hl = 0, cl = 0, kl = 0;
  FILE *fh = open_memstream(&h, &hl), *fc = open_memstream(&c, &cl), *fk = open_memstream(&k, &kl);
  cg_options o = {.prefix = "t", .header_name = "t.h", .source_name = "t.dtl"};
  assert_int_equal(cg_emit(fh, fc, cuda ? fk : NULL, spmd_build(lp), &o), 0);
  fclose(fh), fclose(fc), fclose(fk);
  free(h), free(k);
  release(&r);
  return c;
}

static void expect_in(const char *text, const char *want) {
  if (!strstr(text, want)) fprintf(stderr, "--- want:\n%s\n--- in:\n%s\n", want, text);
  assert_non_null(strstr(text, want));
}

/* The printer spells the described call: entry point, arguments, strides of snapshots and
 * checks on the host and the device. */
static void test_printer_spells_the_call(void **state) {
  (void)state;
  /* one call writes the whole of A: its storing entry point (the rewrite store) */
  char *c = emit(HDR DECLS "A(i, j) = Bt(k, i) * C(k, j)\n  .substitute({i, j, k}, gemm);\n", false);
  expect_in(c, "dtl_gemm_store(DTL_DOUBLE, 1, 0, dtl__n0, dtl__n1, dtl__n2, &dtl_t3_Bt[(0 - dtl_t3_Bt_lo[0]) * "
               "dtl_t3_Bt_st[0] + (0 - dtl_t3_Bt_lo[1])], dtl_t3_Bt_st[0], &dtl_t4_C[(0 - dtl_t4_C_lo[0]) * "
               "dtl_t4_C_st[0] + (0 - dtl_t4_C_lo[1])], dtl_t4_C_st[0], &dtl_t0_A[(0 - dtl_t0_A_lo[0]) * "
               "dtl_t0_A_st[0] + (0 - dtl_t0_A_lo[1])], dtl_t0_A_st[0]);");
  free(c);
  c = emit(HDR DECLS "y(i) += x(i) * 2.5\n  .substitute({i}, axpy);\n", false);
  expect_in(c, "const double dtl__alpha = 2.5;");
  expect_in(c, "dtl_axpy(DTL_DOUBLE, dtl__n0, &dtl__alpha, &dtl_t19_x[(0 - dtl_t19_x_lo[0])], 1, "
               "&dtl_t20_y[(0 - dtl_t20_y_lo[0])], 1);");
  free(c);
  /* loops listed against the nest: the extents still follow the letters */
  c = emit(HDR DECLS "K(i, l) = G(k, l) * T(i, j, k) * F(j, l)\n  .reorder({j, k, l})\n"
                     "  .substitute({l, k, j, i}, mttkrp);\n",
           false);
  expect_in(c, "if (dtl_mttkrp_store(DTL_DOUBLE, dtl__n0, dtl__n1, dtl__n2, dtl__n3, &dtl_t10_T[");
  expect_in(c, "], dtl_t16_K_st[0], 1)) return dtl_fail(dtl_ctx, \"out of memory in mttkrp\");");
  free(c);
  /* += adds: the accumulating entry point */
  c = emit(HDR DECLS "A(i, j) += Bt(k, i) * C(k, j)\n  .substitute({i, j, k}, gemm);\n", false);
  expect_in(c, "dtl_gemm(DTL_DOUBLE, 1, 0, dtl__n0, dtl__n1, dtl__n2, ");
  free(c);
  /* the output read as an input comes from its snapshot */
  c = emit(HDR DECLS "y(i) += s * y(i)\n  .substitute({i}, axpy);\n", false);
  expect_in(c, "const double dtl__alpha = ");
  expect_in(c, "dtl_axpy(DTL_DOUBLE, dtl__n0, &dtl__alpha, &dtl_in_t20_y[(0 - dtl_in_t20_y_lo[0])], 1, "
               "&dtl_t20_y[(0 - dtl_t20_y_lo[0])], 1);");
  free(c);
}

/* The device: the device entry point, the context first, checked. */
static void test_printer_device(void **state) {
  (void)state;
  char *c = emit(HDR "machine M = grid(g) : gpu;\n" DECLS
                     "V(i, j) = b(k) * T(i, j, k)\n  .substitute({k, j, i}, ttv);\n",
                 true);
  expect_in(c, "if (dtl_cu_ttv(dtl_ctx, DTL_DOUBLE, dtl__n0, dtl__n1, dtl__n2, &dtl_t10_T[");
  expect_in(c, "], 1)) return 1;");
  free(c);
}

/* ---- entry points --------------------------------------------------------------------- */

static char *slurp(const char *rel) {
  const char *top = getenv("top_srcdir");
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", top && *top ? top : ".", rel);
  FILE *f = fopen(path, "r");
  if (!f) fprintf(stderr, "cannot read %s (set top_srcdir)\n", path);
  assert_non_null(f);
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  int ch;
  while ((ch = fgetc(f)) != EOF) fputc(ch, m);
  fclose(f);
  fclose(m);
  return buf;
}

/* The declaration "RET NAME(...)" in a header, as one letter per parameter: X the context,
 * T dtl_type, F int, I int64_t, c const void *, v void *. */
static void declared(const char *header, const char *ret, const char *name, char *sig, size_t n) {
  char want[128];
  snprintf(want, sizeof want, "\n%s %s(", ret, name);
  const char *p = strstr(header, want);
  if (!p) fprintf(stderr, "no declaration '%s %s(' \n", ret, name);
  assert_non_null(p);
  p += strlen(want);
  const char *end = strchr(p, ')');
  assert_non_null(end);
  size_t k = 0;
  while (p < end) {
    while (*p == ' ' || *p == '\n') p++;
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *e = comma ? comma : end;
    char param[128];
    snprintf(param, sizeof param, "%.*s", (int)(e - p), p);
    char c = '?';
    if (!strncmp(param, "dtl_ctx *", 9)) c = 'X';
    else if (!strncmp(param, "dtl_type ", 9)) c = 'T';
    else if (!strncmp(param, "int64_t ", 8)) c = 'I';
    else if (!strncmp(param, "int ", 4)) c = 'F';
    else if (!strncmp(param, "const void *", 12)) c = 'c';
    else if (!strncmp(param, "void *", 6)) c = 'v';
    if (k + 1 < n) sig[k++] = c;
    p = e + 1;
  }
  sig[k] = 0;
}

/* Every entry point named by the catalogue is declared, with the arguments that the
 * catalogue's call for the kernel's own form passes, in that order. */
static void test_entry_points_declared(void **state) {
  (void)state;
  char *rt = slurp("src/comm/distal/runtime.h"), *cu = slurp("src/comm/distal/cuda.h");
  for (int k = KERNEL_NONE + 1; k < KERNEL_COUNT; k++) {
    const kc_info *in = kc_get((kc_kernel)k);
    /* the form itself: letter L is kernel dimension L, positions in the form's order */
    kc_access a[KC_MAX_OPERANDS];
    for (int o = 0; o < in->noperands; o++) {
      a[o] = (kc_access){.nidx = (int)strlen(in->op[o].letters)};
      for (int p = 0; p < a[o].nidx; p++) a[o].dim[p] = in->op[o].letters[p] - 'i';
    }
    kc_call call;
    assert_true(kc_describe_call((kc_kernel)k, kc_nletters((kc_kernel)k), in->noperands, a, &call));
    char want[64];
    int n = 0;
    for (int q = 0; q < call.nargs; q++) {
      const kc_arg *x = &call.arg[q];
      want[n++] = x->kind == KC_ARG_TYPE ? 'T' : x->kind == KC_ARG_FLAG ? 'F' :
                  x->kind == KC_ARG_EXTENT || x->kind == KC_ARG_STRIDE ? 'I' :
                  x->kind == KC_ARG_POINTER && x->operand == 0 ? 'v' : 'c';
    }
    want[n] = 0;
    char got[64], wantx[72];
    declared(rt, in->host_fails ? "int" : "void", in->host, got, sizeof got);
    assert_string_equal(got, want);
    if (in->host_store) { /* the storing entry point takes the same arguments */
      declared(rt, in->host_fails ? "int" : "void", in->host_store, got, sizeof got);
      assert_string_equal(got, want);
    }
    declared(cu, "int", in->device, got, sizeof got);
    snprintf(wantx, sizeof wantx, "X%s", want);
    assert_string_equal(got, wantx);
  }
  free(rt);
  free(cu);
}

/* ---- flops ------------------------------------------------------------------------------ */

/* Per point: gemm 2 m n k and the like; mttkrp multiplies twice and adds.  The printer's
 * count of the same statement (cg_print_flops) gives the same factor. */
static void test_flops(void **state) {
  (void)state;
  const int64_t e[4] = {3, 4, 5, 2};
  const double want[KERNEL_COUNT] = {
      [KERNEL_GEMM] = 2.0 * 3 * 4 * 5, [KERNEL_GEMV] = 2.0 * 3 * 4,     [KERNEL_DOT] = 2.0 * 3,
      [KERNEL_AXPY] = 2.0 * 3,         [KERNEL_TTV] = 2.0 * 3 * 4 * 5,  [KERNEL_TTM] = 2.0 * 3 * 4 * 5 * 2,
      [KERNEL_MTTKRP] = 3.0 * 3 * 4 * 5 * 2, [KERNEL_INNERPROD] = 2.0 * 3 * 4 * 5};
  assert_true(kc_flops(KERNEL_NONE, e) == 0);
  for (int k = KERNEL_NONE + 1; k < KERNEL_COUNT; k++) {
    double got = kc_flops((kc_kernel)k, e);
    if (got != want[k]) fprintf(stderr, "%s: %g flops, want %g\n", names[k], got, want[k]);
    assert_true(got == want[k]);
    char decls[512], stmt[256], loops[64], text[1024];
    form_program((kc_kernel)k, -1, decls, sizeof decls, stmt, sizeof stmt, loops, sizeof loops);
    snprintf(text, sizeof text, HDR "%s%s\n  .substitute(%s, %s);\n", decls, stmt, loops, names[k]);
    compiled c;
    lw_program *lp = lowered(&c, text, false);
    char *f = NULL;
    size_t fl = 0;
    FILE *m = open_memstream(&f, &fl);
    cg_print_flops(m, spmd_build(lp));
    fclose(m);
    double per_point = 0;
    int letters = 0;
    assert_int_equal(sscanf(f, "0.0 + %lf", &per_point), 1);
    for (const char *x = f; (x = strstr(x, "(double)")); x++) letters++;
    assert_true(per_point == kc_get((kc_kernel)k)->flops);
    assert_int_equal(letters, kc_nletters((kc_kernel)k));
    free(f);
    release(&c);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_and_forms),
      cmocka_unit_test(test_matcher_accepts_the_table),
      cmocka_unit_test(test_matcher_layouts),
      cmocka_unit_test(test_fits_agrees_with_substitute),
      cmocka_unit_test(test_call_gemm),
      cmocka_unit_test(test_call_blas12),
      cmocka_unit_test(test_call_tensor),
      cmocka_unit_test(test_printer_spells_the_call),
      cmocka_unit_test(test_printer_device),
      cmocka_unit_test(test_entry_points_declared),
      cmocka_unit_test(test_flops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
