/* test_frontend.c -- unit tests of the front end: lexer, parser (AST fields), semantic checks
 * (every diagnostic with its line and column), diagnostics format and printers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "frontend/fe_internal.h"
#include "frontend/frontend.h"

/* ---- harness ------------------------------------------------------------------------ */

typedef struct {
  int line, col;
  char msg[256];
} diag;

/* One compilation of a test program, with its diagnostics captured in memory. */
typedef struct {
  char *out;
  size_t outlen;
  FILE *err;
  fe_source *src;
  fe_program *prog;
  int sema_errors;
  diag d[64];
  int nd;
} run;

static void open_run(run *r, const char *text) {
  memset(r, 0, sizeof *r);
  r->err = open_memstream(&r->out, &r->outlen);
  assert_non_null(r->err);
  r->src = fe_source_from_string("t.dtl", text, strlen(text), r->err);
  assert_non_null(r->src);
}

/* Collect the "PATH:LINE:COL: error: MESSAGE" lines printed so far. */
static void read_diags(run *r) {
  fflush(r->err);
  r->nd = 0;
  for (const char *p = r->out; p && *p && r->nd < 64;) {
    const char *eol = strchr(p, '\n');
    size_t n = eol ? (size_t)(eol - p) : strlen(p);
    diag *d = &r->d[r->nd];
    int off = 0;
    size_t plen = strlen(r->src->path);
    if (!strncmp(p, r->src->path, plen) &&
        sscanf(p + plen, ":%d:%d: error: %n", &d->line, &d->col, &off) == 2 && off > 0) {
      off += (int)plen;
      snprintf(d->msg, sizeof d->msg, "%.*s", (int)(n - (size_t)off), p + off);
      r->nd++;
    }
    p += n + (eol != NULL);
  }
}

/* Parse text; run the checks too when it parses. */
static void compile(run *r, const char *text) {
  open_run(r, text);
  r->prog = fe_parse(r->src);
  if (r->prog)
    r->sema_errors = fe_check(r->prog);
  read_diags(r);
}

static void finish(run *r) {
  fe_program_free(r->prog);
  fe_source_free(r->src);
  fclose(r->err);
  free(r->out);
}

/* Print the diagnostics when an assertion is about to fail, to see what went wrong. */
static void dump(const run *r) {
  fprintf(stderr, "--- diagnostics:\n%s---\n", r->out ? r->out : "");
}

static void expect_valid(const char *text) {
  run r;
  compile(&r, text);
  if (!r.prog || r.sema_errors || r.src->nerrors)
    dump(&r);
  assert_non_null(r.prog);
  assert_int_equal(r.sema_errors, 0);
  assert_int_equal(r.src->nerrors, 0);
  finish(&r);
}

/* Compile text and expect exactly one error, at line:col, whose message contains msg. */
static void expect_error(const char *text, int line, int col, const char *msg) {
  run r;
  compile(&r, text);
  if (r.nd != 1 || r.d[0].line != line || r.d[0].col != col || !strstr(r.d[0].msg, msg))
    dump(&r);
  assert_int_equal(r.nd, 1);
  assert_int_equal(r.src->nerrors, 1);
  assert_int_equal(r.d[0].line, line);
  assert_int_equal(r.d[0].col, col);
  assert_non_null(strstr(r.d[0].msg, msg));
  finish(&r);
}

/* A program that must parse (fe_check is not run); the caller inspects r->prog and then
 * calls finish. */
static void parse_ok(run *r, const char *text) {
  open_run(r, text);
  r->prog = fe_parse(r->src);
  read_diags(r);
  if (!r->prog || r->src->nerrors)
    dump(r);
  assert_non_null(r->prog);
  assert_int_equal(r->src->nerrors, 0);
}

static char *print_rhs(const fe_program *prog, int stmt) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fe_print_expr(f, prog->stmts[stmt].rhs);
  fclose(f);
  return buf;
}

static void assert_rhs_prints(const char *rhs, const char *expected) {
  char text[512];
  snprintf(text, sizeof text,
           "tensor a; tensor b; tensor c; tensor d; tensor A(4); tensor B(4,4);\ns = %s;", rhs);
  run r;
  open_run(&r, text);
  r.prog = fe_parse(r.src);
  assert_non_null(r.prog);
  char *s = print_rhs(r.prog, 0);
  assert_string_equal(s, expected);
  free(s);
  finish(&r);
}

#define SUMMA_DECLS                                                                                \
  "param n = 64;\nmachine M = grid(gx, gy);\n"                                                     \
  "tensor A(n, n) @ M(xy -> xy);\ntensor B(n, n) @ M(xy -> xy);\n"                                 \
  "tensor C(n, n) @ M(xy -> xy);\n"

/* ---- diagnostics -------------------------------------------------------------------- */

static void test_diag_format(void **state) {
  (void)state;
  run r;
  open_run(&r, "first line\nsecond line here\n");
  fe_error(r.src, (fe_loc){2, 8}, "bad %s", "thing");
  fflush(r.err);
  assert_string_equal(r.out, "t.dtl:2:8: error: bad thing\nsecond line here\n       ^\n");
  assert_int_equal(r.src->nerrors, 1);
  finish(&r);
}

static void test_diag_tabs_in_caret(void **state) {
  (void)state;
  run r;
  open_run(&r, "\tx =\t\ty;\r\n");
  fe_error(r.src, (fe_loc){1, 7}, "here");
  fflush(r.err);
  assert_string_equal(r.out, "t.dtl:1:7: error: here\n\tx =\t\ty;\n\t   \t\t^\n");
  finish(&r);
}

static void test_diag_note_and_no_location(void **state) {
  (void)state;
  run r;
  open_run(&r, "abc\n");
  fe_note(r.src, (fe_loc){1, 2}, "see %d", 3);
  fe_error(r.src, (fe_loc){0, 0}, "global");
  fflush(r.err);
  assert_string_equal(r.out, "t.dtl:1:2: note: see 3\nabc\n ^\nt.dtl: error: global\n");
  assert_int_equal(r.src->nerrors, 1);
  finish(&r);
}

static void test_diag_max_errors(void **state) {
  (void)state;
  run r;
  open_run(&r, "x\n");
  r.src->max_errors = 2;
  for (int k = 0; k < 5; k++)
    fe_error(r.src, (fe_loc){1, 1}, "e%d", k);
  fe_note(r.src, (fe_loc){1, 1}, "hidden note");
  read_diags(&r);
  assert_int_equal(r.nd, 2);
  assert_int_equal(r.src->nerrors, 5);
  assert_non_null(strstr(r.out, "too many errors"));
  assert_null(strstr(r.out, "hidden note"));
  finish(&r);
}

static void test_source_open(void **state) {
  (void)state;
  char path[] = "/tmp/test_frontend_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *text = "param n = 3;\n";
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  fe_source *src = fe_source_open(path, stderr);
  assert_non_null(src);
  assert_string_equal(src->text, text);
  assert_int_equal(src->len, strlen(text));
  assert_string_equal(src->path, path);
  assert_ptr_equal(src->err, stderr);
  fe_source_free(src);
  unlink(path);

  /* a file larger than the first read buffer, with an error on its last line */
  char big[] = "/tmp/test_frontend_XXXXXX";
  fd = mkstemp(big);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  for (int k = 0; k < 2000; k++)
    fprintf(f, "param p%d = %d;\n", k, k + 1);
  fputs("param q = 0;\n", f);
  fclose(f);
  run r;
  memset(&r, 0, sizeof r);
  r.err = open_memstream(&r.out, &r.outlen);
  r.src = fe_source_open(big, r.err);
  unlink(big);
  assert_non_null(r.src);
  assert_true(r.src->len > 20000);
  assert_int_equal(strlen(r.src->text), r.src->len);
  r.prog = fe_parse(r.src);
  assert_non_null(r.prog);
  assert_int_equal(r.prog->nparams, 2001);
  assert_int_equal(r.prog->params[1999].value, 2000);
  assert_int_equal(fe_check(r.prog), 1);
  read_diags(&r);
  assert_int_equal(r.nd, 1);
  assert_int_equal(r.d[0].line, 2001);
  assert_int_equal(r.d[0].col, 7);
  finish(&r);

  char *buf = NULL;
  size_t len = 0;
  FILE *err = open_memstream(&buf, &len);
  assert_null(fe_source_open("/nonexistent/x.dtl", err));
  fclose(err);
  assert_string_equal(buf, "distalc: cannot read /nonexistent/x.dtl: No such file or directory\n");
  free(buf);
}

/* ---- lexer -------------------------------------------------------------------------- */

static void test_lexer_tokens(void **state) {
  (void)state;
  run r;
  open_run(&r, "param n=42; # comment\n  A(i) += 0.5 // more\n-> @ 1e-3 2. .5 xy0 0yz Grid");
  int n = 0;
  fe_token *t = fe_tokenize(r.src, &n);
  assert_non_null(t);
  assert_int_equal(n, 21);
  assert_int_equal(t[0].kind, TK_KEYWORD);
  assert_true(fe_tok_is(&t[0], "param"));
  assert_int_equal(t[1].kind, TK_IDENT);
  assert_true(fe_tok_is(&t[2], "="));
  assert_int_equal(t[3].kind, TK_INT);
  assert_int_equal(t[3].ival, 42);
  assert_int_equal(t[3].loc.col, 9);
  assert_int_equal(t[5].loc.line, 2);
  assert_int_equal(t[5].loc.col, 3);
  assert_true(fe_tok_is(&t[9], "+="));
  assert_int_equal(t[10].kind, TK_FLOAT);
  assert_true(t[10].fval == 0.5);
  assert_true(fe_tok_is(&t[11], "->"));
  assert_int_equal(t[11].loc.line, 3);
  assert_int_equal(t[11].loc.col, 1);
  assert_true(fe_tok_is(&t[12], "@"));
  assert_int_equal(t[13].kind, TK_FLOAT);
  assert_true(t[13].fval == 1e-3);
  assert_int_equal(t[14].kind, TK_FLOAT);
  assert_true(t[14].fval == 2.0);
  assert_int_equal(t[15].kind, TK_FLOAT);
  assert_true(t[15].fval == 0.5);
  assert_int_equal(t[16].kind, TK_IDENT); /* xy0 */
  assert_int_equal(t[16].len, 3);
  assert_int_equal(t[17].kind, TK_INT); /* 0yz: INT then IDENT */
  assert_int_equal(t[18].kind, TK_IDENT);
  assert_int_equal(t[18].loc.col, t[17].loc.col + 1);
  assert_int_equal(t[19].kind, TK_KEYWORD);
  assert_int_equal(t[20].kind, TK_EOF);
  free(t);
  finish(&r);
}

static void test_lexer_number_edges(void **state) {
  (void)state;
  run r;
  /* "2.split" is INT then "." IDENT; "1e" without digits is INT then IDENT "e". */
  open_run(&r, "2.split 1ex 2.e3 9223372036854775807");
  int n = 0;
  fe_token *t = fe_tokenize(r.src, &n);
  assert_non_null(t);
  assert_int_equal(n, 8);
  assert_int_equal(t[0].kind, TK_INT);
  assert_true(fe_tok_is(&t[1], "."));
  assert_int_equal(t[2].kind, TK_IDENT);
  assert_int_equal(t[3].kind, TK_INT);
  assert_int_equal(t[4].kind, TK_IDENT);
  assert_int_equal(t[5].kind, TK_FLOAT);
  assert_true(t[5].fval == 2000.0);
  assert_int_equal(t[6].ival, INT64_MAX);
  free(t);
  finish(&r);
}

static void test_lexer_int_overflow(void **state) {
  (void)state;
  expect_error("param n = 1;\nparam m = 9223372036854775808;\n", 2, 11, "too large");
}

static void test_lexer_float_overflow(void **state) {
  (void)state;
  expect_error("tensor s;\ns = 1e999;\n", 2, 5, "out of range");
}

/* Integer literals are exact over the whole int64 range in every context (issue 11). */
static void test_literal_values_exact(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "param p = 9007199254740993;\n"
               "machine M = grid(4611686018427387905, 9223372036854775807);\n"
               "tensor T(9007199254740993, 9223372036854775807) int64 @ M(xy -> x, 4611686018427387904);\n"
               "T(i, j) = 9007199254740993 + 9223372036854775807 - -9223372036854775808 * 0.1\n"
               "  .split(i, io, ii, 9223372036854775807).divide(j, jo, ji, 4611686018427387905);\n");
  const fe_program *prog = r.prog;
  assert_int_equal(prog->params[0].value, INT64_C(9007199254740993));
  assert_int_equal(prog->machines[0].levels[0].dims[0].value, INT64_C(4611686018427387905));
  assert_int_equal(prog->machines[0].levels[0].dims[1].value, INT64_MAX);
  assert_int_equal(prog->tensors[0].dims[0].value, INT64_C(9007199254740993));
  assert_int_equal(prog->tensors[0].dims[1].value, INT64_MAX);
  assert_int_equal(prog->tensors[0].dist.levels[0].y[1].kind, FE_Y_FIXED);
  assert_int_equal(prog->tensors[0].dist.levels[0].y[1].fixed, INT64_C(4611686018427387904));
  /* ((2^53+1 + INT64_MAX) - (INT64_MIN * 0.1)) */
  const fe_expr *e = prog->stmts[0].rhs;
  assert_int_equal(e->kind, FE_E_SUB);
  const fe_expr *a = e->a->a, *b = e->a->b, *m = e->b->a, *f = e->b->b;
  assert_int_equal(a->kind, FE_E_NUM);
  assert_true(a->is_int);
  assert_int_equal(a->ival, INT64_C(9007199254740993));
  assert_true(a->num == 9007199254740992.0); /* the nearest double */
  assert_int_equal(b->ival, INT64_MAX);
  assert_int_equal(m->kind, FE_E_NUM); /* -9223372036854775808 is one literal */
  assert_true(m->is_int);
  assert_int_equal(m->ival, INT64_MIN);
  assert_true(m->num == -9223372036854775808.0);
  assert_string_equal(m->text, "-9223372036854775808");
  assert_false(f->is_int);
  assert_true(f->num == 0.1);
  const fe_command *c = prog->stmts[0].cmds;
  assert_int_equal(c[0].args[3].ival, INT64_MAX);
  assert_int_equal(c[1].args[3].ival, INT64_C(4611686018427387905));
  char *s = print_rhs(prog, 0);
  assert_string_equal(s, "9007199254740993 + 9223372036854775807 - -9223372036854775808 * 0.1");
  free(s);
  finish(&r);
}

static void test_literal_lexer_values(void **state) {
  (void)state;
  run r;
  open_run(&r, "9223372036854775808 0.1 4.9e-324 1.7976931348623157e308 1e-300");
  int n = 0;
  fe_token *t = fe_tokenize(r.src, &n);
  assert_non_null(t);
  assert_int_equal(n, 6);
  assert_int_equal(t[0].kind, TK_INT); /* 2^63: lexed, valid only after a unary minus */
  assert_true(t[0].min64);
  assert_int_equal(t[0].ival, INT64_MIN);
  assert_true(t[1].fval == 0.1);
  assert_true(t[2].fval == 4.9e-324);
  assert_true(t[3].fval == 1.7976931348623157e308);
  assert_true(t[4].fval == 1e-300);
  free(t);
  finish(&r);
}

/* A literal that does not fit int64 (or, in a statement, the result's type) is a located
 * error in every context. */
static void test_literal_out_of_range(void **state) {
  (void)state;
  const char *decls = "tensor I(4) int64;\ntensor J(4) int32;\ntensor F(4) float;\n";
  char text[512];
  expect_error("param n = 99999999999999999999;\n", 1, 11, "too large");
  expect_error("tensor T(4, 9223372036854775808);\n", 1, 13, "too large");
  expect_error("machine M = grid(2,\n  9223372036854775808);\n", 2, 3, "too large");
  expect_error("machine M = grid(g, h);\ntensor T(4) @ M(x -> x, 9223372036854775808);\n", 2, 25, "too large");
  snprintf(text, sizeof text, "%sI(i) = 1 + 9223372036854775808;\n", decls);
  expect_error(text, 4, 12, "too large");
  snprintf(text, sizeof text, "%sI(i) = -(9223372036854775808);\n", decls);
  expect_error(text, 4, 10, "too large");
  snprintf(text, sizeof text, "%sI(i) = 1 .split(i, io, ii, 9223372036854775808);\n", decls);
  expect_error(text, 4, 28, "too large");
  snprintf(text, sizeof text, "%sI(i) = 1e19;\n", decls);
  expect_error(text, 4, 8, "does not fit int64");
  snprintf(text, sizeof text, "%sJ(i) = 7 * 2147483648;\n", decls);
  expect_error(text, 4, 12, "does not fit int32");
  snprintf(text, sizeof text, "%sJ(i) = -2147483648;\n", decls);
  expect_error(text, 4, 9, "-2147483647 - 1");
  snprintf(text, sizeof text, "%sF(i) = 3.5e38;\n", decls);
  expect_error(text, 4, 8, "range of float");
  /* the edges themselves are valid */
  snprintf(text, sizeof text,
           "%sI(i) = -9223372036854775808 + 9223372036854775807 + 9.2e18;\n"
           "J(i) = -2147483647 - 1 + 2147483647 + 2147483647.9;\nF(i) = 3.4028234e38 + 1e-46;\n",
           decls);
  expect_valid(text);
}

static void test_lexer_bad_characters_all_reported(void **state) {
  (void)state;
  run r;
  compile(&r, "param n = 4;\ntensor A(n) $;\n  x = ` \x01;\n");
  assert_null(r.prog);
  assert_int_equal(r.nd, 3);
  assert_int_equal(r.d[0].line, 2);
  assert_int_equal(r.d[0].col, 13);
  assert_string_equal(r.d[0].msg, "unexpected character '$'");
  assert_int_equal(r.d[1].line, 3);
  assert_int_equal(r.d[1].col, 7);
  assert_int_equal(r.d[2].col, 9);
  assert_string_equal(r.d[2].msg, "unexpected byte 0x01");
  finish(&r);
}

static void test_lexer_nul_byte(void **state) {
  (void)state;
  run r;
  memset(&r, 0, sizeof r);
  r.err = open_memstream(&r.out, &r.outlen);
  r.src = fe_source_from_string("t.dtl", "param n;\0x", 10, r.err);
  r.prog = fe_parse(r.src);
  assert_null(r.prog);
  read_diags(&r);
  assert_int_equal(r.nd, 1);
  assert_int_equal(r.d[0].col, 9);
  assert_string_equal(r.d[0].msg, "unexpected byte 0x00");
  finish(&r);
}

static void test_lexer_comments(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "# a comment\nparam n = 2; // another\n// param m;\n#param k;\nparam q; #x");
  assert_int_equal(r.prog->nparams, 2);
  assert_string_equal(r.prog->params[1].name, "q");
  assert_int_equal(r.prog->params[1].loc.line, 5);
  finish(&r);
}

static void test_keyword_as_name(void **state) {
  (void)state;
  expect_error("tensor float(4);", 1, 8, "expected tensor name, but 'float' is a keyword");
  expect_error("param cpu = 2;", 1, 7, "expected param name");
}

/* ---- declarations ------------------------------------------------------------------- */

static void test_parse_params(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "param n;\nparam chunk = 256;");
  assert_int_equal(r.prog->nparams, 2);
  assert_string_equal(r.prog->params[0].name, "n");
  assert_false(r.prog->params[0].has_default);
  assert_false(r.prog->params[0].implicit);
  assert_true(r.prog->params[1].has_default);
  assert_int_equal(r.prog->params[1].value, 256);
  assert_int_equal(r.prog->params[1].loc.line, 2);
  assert_int_equal(r.prog->params[1].loc.col, 7);
  assert_int_equal(fe_find_param(r.prog, "chunk"), 1);
  assert_int_equal(fe_find_param(r.prog, "nope"), -1);
  finish(&r);
}

static void test_parse_machine_flat(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "param gx = 2;\nmachine M = grid(gx, gy, 4) : gpu;\nmachine N = Grid(3);");
  fe_program *p = r.prog;
  assert_int_equal(p->nmachines, 2);
  fe_machine *m = &p->machines[0];
  assert_string_equal(m->name, "M");
  assert_false(m->hierarchical);
  assert_int_equal(m->nlevels, 1);
  assert_int_equal(m->levels[0].ndims, 3);
  assert_int_equal(m->levels[0].kind, FE_GPU);
  assert_true(m->levels[0].dims[0].is_param);
  assert_int_equal(m->levels[0].dims[0].param, 0);
  assert_int_equal(m->levels[0].dims[1].param, 1);
  assert_false(m->levels[0].dims[2].is_param);
  assert_int_equal(m->levels[0].dims[2].value, 4);
  assert_int_equal(m->levels[0].dims[2].loc.col, 26);
  /* gy is declared implicitly; both are grid params */
  assert_int_equal(p->nparams, 2);
  assert_true(p->params[0].is_grid);
  assert_false(p->params[0].implicit);
  assert_true(p->params[0].has_default);
  assert_string_equal(p->params[1].name, "gy");
  assert_true(p->params[1].implicit);
  assert_true(p->params[1].is_grid);
  assert_false(p->params[1].has_default);
  assert_int_equal(p->params[1].loc.line, 2);
  assert_int_equal(p->params[1].loc.col, 22);
  assert_int_equal(p->machines[1].levels[0].kind, FE_CPU);
  assert_int_equal(fe_find_machine(p, "N"), 1);
  assert_int_equal(fe_find_machine(p, "gx"), -1);
  finish(&r);
}

static void test_parse_machine_hierarchical(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "machine M = [grid(q, q, q) : cpu, grid(4) : gpu, grid(2, 2)];");
  fe_machine *m = &r.prog->machines[0];
  assert_true(m->hierarchical);
  assert_int_equal(m->nlevels, 3);
  assert_int_equal(m->levels[0].ndims, 3);
  assert_int_equal(m->levels[0].kind, FE_CPU);
  assert_int_equal(m->levels[1].kind, FE_GPU);
  assert_int_equal(m->levels[1].dims[0].value, 4);
  assert_int_equal(m->levels[2].kind, FE_CPU);
  assert_int_equal(m->levels[1].loc.col, 35);
  /* grid(q, q, q) declares one param, used three times */
  assert_int_equal(r.prog->nparams, 1);
  for (int k = 0; k < 3; k++)
    assert_int_equal(m->levels[0].dims[k].param, 0);
  finish(&r);
}

static void test_parse_tensor_basic(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "param n = 8;\ntensor A(n, 3);\ntensor s;\ntensor t();");
  fe_program *p = r.prog;
  assert_int_equal(p->ntensors, 3);
  fe_tensor *a = &p->tensors[0];
  assert_string_equal(a->name, "A");
  assert_int_equal(a->order, 2);
  assert_true(a->dims[0].is_param);
  assert_int_equal(a->dims[0].param, 0);
  assert_int_equal(a->dims[1].value, 3);
  assert_int_equal(a->type, FE_DOUBLE);
  assert_false(a->has_format);
  assert_int_equal(a->formats[0], FE_DENSE);
  assert_int_equal(a->formats[1], FE_DENSE);
  assert_false(a->has_dist);
  assert_int_equal(a->loc.line, 2);
  assert_int_equal(a->loc.col, 8);
  assert_int_equal(p->tensors[1].order, 0);
  assert_int_equal(p->tensors[2].order, 0);
  assert_int_equal(fe_find_tensor(p, "s"), 1);
  finish(&r);
}

static void test_parse_tensor_types(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "tensor a float;\ntensor b(2) int32;\ntensor c(2) dense int64;\n"
               "tensor d(2, 2) csr float;\ntensor e(2) double;");
  assert_int_equal(r.prog->tensors[0].type, FE_FLOAT);
  assert_int_equal(r.prog->tensors[1].type, FE_INT32);
  assert_int_equal(r.prog->tensors[2].type, FE_INT64);
  assert_true(r.prog->tensors[2].has_format);
  assert_int_equal(r.prog->tensors[3].type, FE_FLOAT);
  assert_int_equal(r.prog->tensors[3].formats[1], FE_COMPRESSED);
  assert_int_equal(r.prog->tensors[4].type, FE_DOUBLE);
  finish(&r);
}

static void test_parse_formats(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "tensor a(2, 2) dense;\ntensor b(2, 2) csr;\ntensor c(2, 2, 2) csf;\n"
               "tensor d(2, 2, 2) {dense, compressed, dense};\ntensor e(2, 2) compressed;");
  fe_tensor *t = r.prog->tensors;
  assert_true(t[0].has_format);
  assert_int_equal(t[0].formats[0], FE_DENSE);
  assert_int_equal(t[0].formats[1], FE_DENSE);
  assert_int_equal(t[1].formats[0], FE_DENSE);
  assert_int_equal(t[1].formats[1], FE_COMPRESSED);
  for (int k = 0; k < 3; k++)
    assert_int_equal(t[2].formats[k], FE_COMPRESSED);
  assert_int_equal(t[3].formats[0], FE_DENSE);
  assert_int_equal(t[3].formats[1], FE_COMPRESSED);
  assert_int_equal(t[3].formats[2], FE_DENSE);
  assert_int_equal(t[4].formats[0], FE_COMPRESSED);
  assert_int_equal(t[4].formats[1], FE_COMPRESSED);
  finish(&r);
}

static void test_format_errors(void **state) {
  (void)state;
  expect_error("tensor a(2, 2, 2) csr;", 1, 19, "csr needs a tensor of order 2, but a has order 3");
  expect_error("tensor a(2, 2) {dense};", 1, 16, "format has 1 level but a has order 2");
  expect_error("tensor a(2) dense csf;", 1, 19, "format of 'a' given twice");
  expect_error("tensor a(2) float int32;", 1, 19, "type of 'a' given twice");
  expect_error("tensor a(2) {dense, sparse};", 1, 21, "expected 'dense' or 'compressed'");
}

static void test_tensor_unknown_param(void **state) {
  (void)state;
  /* parse errors that keep the syntax do not stop the parse: both are reported */
  run r;
  compile(&r, "tensor A(n, 4);\nparam m = 2;\ntensor B(4, k);\nparam n = 3;");
  assert_null(r.prog);
  assert_int_equal(r.nd, 2);
  assert_int_equal(r.d[0].line, 1);
  assert_int_equal(r.d[0].col, 10);
  assert_string_equal(r.d[0].msg, "unknown param 'n'");
  assert_int_equal(r.d[1].line, 3);
  assert_int_equal(r.d[1].col, 13);
  finish(&r);
}

static void test_dist_compact(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "machine M = grid(2, 2, 2);\ntensor A(4, 4) @ M(xy -> xy0);\n"
               "tensor B(4, 4) @ M(xz -> x0z);\ntensor C(4, 4) @ M(zy -> 0yz);\n"
               "tensor D(4, 4) @ M(xy -> xy*);\ntensor E(4) @ M(x -> **x);");
  fe_tensor *t = r.prog->tensors;
  fe_dist *d = &t[0].dist;
  assert_true(t[0].has_dist);
  assert_string_equal(d->machine_name, "M");
  assert_int_equal(d->loc.line, 2);
  assert_int_equal(d->loc.col, 18);
  assert_int_equal(d->nlevels, 1);
  fe_dist_level *lv = &d->levels[0];
  assert_int_equal(lv->nx, 2);
  assert_string_equal(lv->x[0], "x");
  assert_string_equal(lv->x[1], "y");
  assert_int_equal(lv->xloc[1].col, 21);
  assert_int_equal(lv->ny, 3);
  assert_int_equal(lv->y[0].kind, FE_Y_NAME);
  assert_string_equal(lv->y[1].name, "y");
  assert_int_equal(lv->y[2].kind, FE_Y_FIXED);
  assert_int_equal(lv->y[2].fixed, 0);
  assert_int_equal(lv->y[2].loc.col, 28);

  lv = &t[1].dist.levels[0]; /* x0z */
  assert_int_equal(lv->y[1].kind, FE_Y_FIXED);
  assert_int_equal(lv->y[2].kind, FE_Y_NAME);
  lv = &t[2].dist.levels[0]; /* 0yz: INT then IDENT */
  assert_int_equal(lv->ny, 3);
  assert_int_equal(lv->y[0].kind, FE_Y_FIXED);
  assert_string_equal(lv->y[1].name, "y");
  assert_string_equal(lv->y[2].name, "z");
  assert_int_equal(lv->y[2].loc.col, 28);
  lv = &t[3].dist.levels[0]; /* xy*: IDENT then '*' */
  assert_int_equal(lv->y[2].kind, FE_Y_STAR);
  assert_int_equal(lv->y[2].loc.col, 28);
  lv = &t[4].dist.levels[0];
  assert_int_equal(lv->y[0].kind, FE_Y_STAR);
  assert_int_equal(lv->y[1].kind, FE_Y_STAR);
  assert_int_equal(lv->y[2].kind, FE_Y_NAME);
  finish(&r);
}

static void test_dist_comma(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "machine M = grid(2, 3, 16);\n"
               "tensor T(4, 4, 4) @ M(row, col, dep -> row, *, 12);\n"
               "tensor U(4, 4) @ M(xy -> x, 1, y);\ntensor V(4) @ M(i -> 0i1);");
  fe_dist_level *lv = &r.prog->tensors[0].dist.levels[0];
  assert_int_equal(lv->nx, 3);
  assert_string_equal(lv->x[2], "dep");
  assert_int_equal(lv->xloc[2].col, 33);
  assert_int_equal(lv->ny, 3);
  assert_string_equal(lv->y[0].name, "row");
  assert_int_equal(lv->y[1].kind, FE_Y_STAR);
  assert_int_equal(lv->y[2].kind, FE_Y_FIXED);
  assert_int_equal(lv->y[2].fixed, 12);
  assert_int_equal(lv->y[2].loc.col, 48);
  lv = &r.prog->tensors[1].dist.levels[0]; /* compact X, comma Y */
  assert_int_equal(lv->nx, 2);
  assert_int_equal(lv->ny, 3);
  assert_int_equal(lv->y[1].fixed, 1);
  lv = &r.prog->tensors[2].dist.levels[0];
  assert_int_equal(lv->ny, 3);
  assert_int_equal(lv->y[2].fixed, 1);
  finish(&r);
}

/* a side of one entry is the one token where one entry is due (no comma to write) */
static void test_dist_single_entry(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "machine M = grid(16);\nmachine N = [grid(2, 2), grid(12)];\n"
               "tensor T(4) @ M(row -> row);\ntensor U(4, 4) @ M(ij -> 12);\n"
               "tensor V(4, 4) @ N(ij -> ij; row,col -> 10);\ntensor W(4, 4) @ N(ij -> 10; ij -> i);");
  fe_dist_level *lv = &r.prog->tensors[0].dist.levels[0];
  assert_int_equal(lv->nx, 1);
  assert_string_equal(lv->x[0], "row");
  assert_int_equal(lv->ny, 1);
  assert_string_equal(lv->y[0].name, "row");
  lv = &r.prog->tensors[1].dist.levels[0];
  assert_int_equal(lv->ny, 1);
  assert_int_equal(lv->y[0].kind, FE_Y_FIXED);
  assert_int_equal(lv->y[0].fixed, 12);
  lv = &r.prog->tensors[2].dist.levels[1];
  assert_int_equal(lv->ny, 1);
  assert_int_equal(lv->y[0].fixed, 10);
  lv = &r.prog->tensors[3].dist.levels[0]; /* level 0 has 2 dims: compact, 1 and 0 */
  assert_int_equal(lv->ny, 2);
  assert_int_equal(lv->y[0].fixed, 1);
  assert_int_equal(lv->y[1].fixed, 0);
  assert_int_equal(fe_check(r.prog), 0);
  finish(&r);
}

static void test_dist_hierarchical(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "machine M = [grid(2, 2), grid(4) : gpu];\n"
               "tensor A(8, 8) @ M(xy -> xy; zw -> z);");
  fe_dist *d = &r.prog->tensors[0].dist;
  assert_int_equal(d->nlevels, 2);
  assert_int_equal(d->levels[1].nx, 2);
  assert_string_equal(d->levels[1].x[0], "z");
  assert_int_equal(d->levels[1].ny, 1);
  assert_string_equal(d->levels[1].y[0].name, "z");
  assert_int_equal(d->levels[1].loc.col, 30);
  assert_int_equal(fe_check(r.prog), 0);
  assert_int_equal(d->machine, 0);
  assert_int_equal(d->levels[0].y[1].xindex, 1);
  assert_int_equal(d->levels[1].y[0].xindex, 0);
  finish(&r);
}

static void test_dist_syntax_errors(void **state) {
  (void)state;
  const char *m = "machine M = grid(2, 2);\n";
  char text[256];
  snprintf(text, sizeof text, "%stensor A(4, 4) @ M(xy xy);", m);
  expect_error(text, 2, 23, "distribution entries must be written together");
  snprintf(text, sizeof text, "%stensor A(4, 4) @ M(xy);", m);
  expect_error(text, 2, 22, "expected '->' in distribution");
  snprintf(text, sizeof text, "%stensor A(4, 4) @ M(x0 -> xy);", m);
  expect_error(text, 2, 21, "'0' is not a name");
  snprintf(text, sizeof text, "%stensor A(4, 4) @ M(x, 1 -> x, y);", m);
  expect_error(text, 2, 23, "expected a name on the X side");
  snprintf(text, sizeof text, "%stensor A(4, 4) @ M(xy -> x, );", m);
  expect_error(text, 2, 29, "expected a name, an integer or '*'");
  snprintf(text, sizeof text, "%stensor A(4, 4) @ M(xy -> x.5);", m);
  expect_error(text, 2, 27, "unexpected '.' in distribution");
  snprintf(text, sizeof text, "%stensor A(4, 4) @ M(xy -> xy];", m);
  expect_error(text, 2, 28, "expected ';' or ')' in distribution");
  snprintf(text, sizeof text, "%stensor A(4, 4) @ M(xy -> xy) dense;", m);
  expect_error(text, 2, 30, "expected ';' after tensor declaration");
}

/* ---- statements and expressions ----------------------------------------------------- */

static void test_parse_statement(void **state) {
  (void)state;
  run r;
  parse_ok(&r, SUMMA_DECLS "A(i, j) = B(i, k) * C(k, j);\nA(i,j) += B(i,j);");
  fe_program *p = r.prog;
  assert_int_equal(p->nstmts, 2);
  fe_stmt *s = &p->stmts[0];
  assert_false(s->accumulate);
  assert_true(p->stmts[1].accumulate);
  assert_string_equal(s->lhs.tname, "A");
  assert_true(s->lhs.parens);
  assert_int_equal(s->lhs.nidx, 2);
  assert_string_equal(s->lhs.idx[1], "j");
  assert_int_equal(s->lhs.idxloc[1].line, 6);
  assert_int_equal(s->lhs.idxloc[1].col, 6);
  assert_int_equal(s->loc.line, 6);
  assert_int_equal(s->loc.col, 1);
  assert_int_equal(s->rhs->kind, FE_E_MUL);
  assert_int_equal(s->rhs->loc.col, 19);
  assert_int_equal(s->rhs->a->kind, FE_E_ACCESS);
  assert_string_equal(s->rhs->a->acc.tname, "B");
  assert_int_equal(s->rhs->b->acc.loc.col, 21);
  assert_int_equal(s->ncmds, 0);
  assert_int_equal(s->lhs.tensor, -1); /* set by sema */
  assert_int_equal(fe_check(p), 0);
  assert_int_equal(s->lhs.tensor, 0);
  assert_int_equal(s->rhs->a->acc.tensor, 1);
  assert_int_equal(s->rhs->b->acc.tensor, 2);
  finish(&r);
}

static void test_parse_scalars(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "tensor s;\ntensor t;\ntensor b(4);\ns = t * 2;\ns() += b(i) * b(i);");
  fe_stmt *s = &r.prog->stmts[0];
  assert_false(s->lhs.parens);
  assert_int_equal(s->lhs.nidx, 0);
  assert_int_equal(s->rhs->a->kind, FE_E_ACCESS);
  assert_false(s->rhs->a->acc.parens);
  assert_string_equal(s->rhs->a->acc.tname, "t");
  assert_true(r.prog->stmts[1].lhs.parens);
  assert_int_equal(r.prog->stmts[1].lhs.nidx, 0);
  assert_int_equal(fe_check(r.prog), 0);
  finish(&r);
}

static void test_parse_numbers(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "tensor s;\ns = 42 + 0.5 + 1e-3 + 2.;");
  fe_expr *e = r.prog->stmts[0].rhs; /* ((42 + 0.5) + 1e-3) + 2. */
  assert_int_equal(e->b->kind, FE_E_NUM);
  assert_false(e->b->is_int);
  assert_string_equal(e->b->text, "2.");
  assert_true(e->b->num == 2.0);
  assert_string_equal(e->a->b->text, "1e-3");
  assert_true(e->a->b->num == 1e-3);
  assert_true(e->a->a->a->is_int);
  assert_true(e->a->a->a->num == 42.0);
  assert_string_equal(e->a->a->a->text, "42");
  assert_false(e->a->a->b->is_int);
  finish(&r);
}

static void test_precedence_and_associativity(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "tensor a; tensor b; tensor c; tensor d;\n"
               "a = b + c * d;\na = b - c - d;\na = -b * c;\na = b / (c - d);\na = - -b;");
  fe_expr *e = r.prog->stmts[0].rhs;
  assert_int_equal(e->kind, FE_E_ADD);
  assert_int_equal(e->b->kind, FE_E_MUL);
  e = r.prog->stmts[1].rhs;
  assert_int_equal(e->kind, FE_E_SUB);
  assert_int_equal(e->a->kind, FE_E_SUB);
  assert_string_equal(e->b->acc.tname, "d");
  e = r.prog->stmts[2].rhs;
  assert_int_equal(e->kind, FE_E_MUL);
  assert_int_equal(e->a->kind, FE_E_NEG);
  assert_string_equal(e->a->a->acc.tname, "b");
  assert_null(e->a->b);
  e = r.prog->stmts[3].rhs;
  assert_int_equal(e->kind, FE_E_DIV);
  assert_int_equal(e->b->kind, FE_E_SUB);
  e = r.prog->stmts[4].rhs;
  assert_int_equal(e->kind, FE_E_NEG);
  assert_int_equal(e->a->kind, FE_E_NEG);
  finish(&r);
}

static void test_print_expr(void **state) {
  (void)state;
  assert_rhs_prints("B(i,k) * B(k,j)", "B(i,k) * B(k,j)");
  assert_rhs_prints("-(a + b) / c", "-(a + b) / c");
  assert_rhs_prints("((a)) + ((b * c))", "a + b * c");
  assert_rhs_prints("(a + b) * c", "(a + b) * c");
  assert_rhs_prints("a - (b - c)", "a - (b - c)");
  assert_rhs_prints("a - b - c", "a - b - c");
  assert_rhs_prints("a / (b * c)", "a / (b * c)");
  assert_rhs_prints("-a * b", "-a * b");
  assert_rhs_prints("-(a * b)", "-(a * b)");
  assert_rhs_prints("- -a", "-(-a)");
  assert_rhs_prints("a()  +  2.50 * 1e-3", "a() + 2.50 * 1e-3");
  assert_rhs_prints("A( i ) * -3", "A(i) * -3");
}

static void test_print_helpers(void **state) {
  (void)state;
  assert_string_equal(fe_type_name(FE_DOUBLE), "double");
  assert_string_equal(fe_type_name(FE_FLOAT), "float");
  assert_string_equal(fe_type_name(FE_INT32), "int32");
  assert_string_equal(fe_type_name(FE_INT64), "int64");
  run r;
  parse_ok(&r, "param n = 3;\ntensor A(n, 17);");
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fe_print_size(f, r.prog, &r.prog->tensors[0].dims[0]);
  fputc(' ', f);
  fe_print_size(f, r.prog, &r.prog->tensors[0].dims[1]);
  fclose(f);
  assert_string_equal(buf, "n 17");
  free(buf);
  finish(&r);
}

static void test_schedule_args(void **state) {
  (void)state;
  run r;
  parse_ok(&r, SUMMA_DECLS "param chunk = 4;\n"
                           "A(i, j) = B(i, k) * C(k, j)\n"
                           "  .distribute({i, j}, {io, jo}, {ii, ji}, Grid(gx, 2))\n"
                           "  .split(k, ko, ki, chunk).communicate(A, M[1])\n"
                           "  .precompute(B(i, k) * C(k, j), j, jw, W)\n"
                           "  .nothing()\n"
                           "  .parallelize(ii, cpu_thread, 12);");
  fe_stmt *s = &r.prog->stmts[0];
  assert_int_equal(s->ncmds, 6);
  fe_command *c = &s->cmds[0];
  assert_string_equal(c->name, "distribute");
  assert_int_equal(c->loc.line, 8);
  assert_int_equal(c->loc.col, 4);
  assert_int_equal(c->nargs, 4);
  assert_int_equal(c->args[0].kind, FE_ARG_LIST);
  assert_int_equal(c->args[0].nitems, 2);
  assert_int_equal(c->args[0].items[1].kind, FE_ARG_IDENT);
  assert_string_equal(c->args[0].items[1].name, "j");
  assert_int_equal(c->args[0].items[1].loc.col, 19);
  assert_int_equal(c->args[3].kind, FE_ARG_GRID);
  assert_int_equal(c->args[3].loc.col, 43);
  assert_int_equal(c->args[3].grid.ndims, 2);
  assert_true(c->args[3].grid.dims[0].is_param);
  assert_int_equal(c->args[3].grid.dims[0].param, fe_find_param(r.prog, "gx"));
  assert_int_equal(c->args[3].grid.dims[1].value, 2);
  c = &s->cmds[1];
  assert_string_equal(c->name, "split");
  assert_int_equal(c->args[0].kind, FE_ARG_IDENT);
  assert_int_equal(c->args[3].kind, FE_ARG_IDENT);
  assert_string_equal(c->args[3].name, "chunk");
  c = &s->cmds[2];
  assert_int_equal(c->args[1].kind, FE_ARG_LEVEL);
  assert_string_equal(c->args[1].name, "M");
  assert_int_equal(c->args[1].ival, 1);
  c = &s->cmds[3];
  assert_int_equal(c->args[0].kind, FE_ARG_EXPR);
  assert_int_equal(c->args[0].expr->kind, FE_E_MUL);
  assert_int_equal(c->args[1].kind, FE_ARG_IDENT);
  assert_int_equal(s->cmds[4].nargs, 0);
  c = &s->cmds[5];
  assert_int_equal(c->args[2].kind, FE_ARG_INT);
  assert_int_equal(c->args[2].ival, 12);
  /* the schedule is not checked here; the statement is valid */
  assert_int_equal(fe_check(r.prog), 0);
  finish(&r);
}

static void test_schedule_arg_errors(void **state) {
  (void)state;
  expect_error(SUMMA_DECLS "A(i,j) = B(i,j).distribute({i}, {io}, {ii}, grid(2, w));", 6, 53,
               "unknown param 'w'");
  expect_error(SUMMA_DECLS "A(i,j) = B(i,j).communicate(A, M[x]);", 6, 34,
               "expected a machine level number");
  expect_error(SUMMA_DECLS "A(i,j) = B(i,j).reorder({i, 3});", 6, 29,
               "expected a name in the list");
  expect_error(SUMMA_DECLS "A(i,j) = B(i,j).split(i, io, ii, 4;", 6, 35,
               "expected ',' or ')' after schedule argument");
  expect_error(SUMMA_DECLS "A(i,j) = B(i,j).(i);", 6, 17, "expected a schedule command name");
  /* ".3" is a number, so this is a missing ';' */
  expect_error(SUMMA_DECLS "A(i,j) = B(i,j).3;", 6, 16, "expected ';' after statement");
  expect_error(SUMMA_DECLS "A(i,j) = B(i,j) split(i);", 6, 17, "expected ';' after statement");
  /* a function that does not exist reads as an access whose parentheses hold an expression */
  expect_error(SUMMA_DECLS "A(i,j) = foo(B(i,j));", 6, 14, "the functions are sqrt, exp, log, abs, erf, pow, min and max");
  expect_error(SUMMA_DECLS "A(i,j) = B(i+1,j);", 6, 12, "at index variables only");
  expect_error(SUMMA_DECLS "A(i,j) = B(i j);", 6, 14, "expected ',' or ')' after index variable");
}

static void test_statement_syntax_errors(void **state) {
  (void)state;
  expect_error(SUMMA_DECLS "A(i, j) B(i, j);", 6, 9, "expected '=', '+=' or '-='");
  expect_error(SUMMA_DECLS "A(i, j) = B(i, j)\nA(i, j) = C(i, j);", 7, 1,
               "expected ';' after statement");
  expect_error(SUMMA_DECLS "A(i, j) = B(i, j) * ;", 6, 21, "expected an expression");
  expect_error(SUMMA_DECLS "A(i, j) = (B(i, j) * C(i, j);", 6, 29, "expected ')'");
  expect_error(SUMMA_DECLS "A(i, 2) = B(i, j);", 6, 6, "expected an index variable");
  expect_error(SUMMA_DECLS "A(i j) = B(i, j);", 6, 5, "expected ',' or ')' after index variable");
  expect_error(SUMMA_DECLS "; A(i, j) = B(i, j);", 6, 1, "expected a declaration or statement");
  /* at the end of the file the caret goes just after the last token */
  expect_error(SUMMA_DECLS "A(i, j) = B(i, j)  ", 6, 18, "expected ';' after statement");
}

static void test_declaration_syntax_errors(void **state) {
  (void)state;
  expect_error("param n = 4\ntensor A(n);", 2, 1, "expected ';' after param declaration");
  expect_error("param n = x;", 1, 11, "expected an integer or floating default value");
  expect_error("machine M grid(2);", 1, 11, "expected '=' after machine name");
  expect_error("machine M = grid();", 1, 18, "expected grid dimension");
  expect_error("machine M = grid(2) : tpu;", 1, 23, "expected 'cpu' or 'gpu'");
  expect_error("machine M = [grid(2), grid(2);", 1, 30, "expected ',' or ']'");
  expect_error("machine M = gird(2);", 1, 13, "expected 'grid'");
  expect_error("tensor A(4, 4) @ M(xy -> xy)", 1, 29, "expected ';' after tensor declaration");
  expect_error("tensor A(4 4);", 1, 12, "expected ',' or ')' in tensor dimensions");
  expect_error("tensor A(4, 4) @ (xy -> xy);", 1, 18, "expected machine name after '@'");
}

static void test_nesting_limits(void **state) {
  (void)state;
  char text[8192];
  int n = snprintf(text, sizeof text, "tensor a;\na = ");
  for (int k = 0; k < 300; k++)
    text[n++] = '(';
  text[n] = '\0';
  expect_error(text, 2, 261, "too deeply nested");

  n = snprintf(text, sizeof text, "tensor a;\na = a");
  for (int k = 0; k < 1200; k++)
    n += snprintf(text + n, sizeof text - (size_t)n, "+a");
  text[n++] = ';';
  text[n] = '\0';
  expect_error(text, 2, 2004, "too deeply nested");
}

static void test_empty_program(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "  # nothing here\n\n");
  assert_int_equal(r.prog->nparams + r.prog->nmachines + r.prog->ntensors + r.prog->nstmts, 0);
  assert_ptr_equal(r.prog->src, r.src);
  assert_int_equal(fe_check(r.prog), 0);
  finish(&r);
}

static void test_eof_error_location(void **state) {
  (void)state;
  /* a missing token at the end of the file is reported just after the last token */
  expect_error("param n = 4;\ntensor A(n)\n\n", 2, 12, "expected ';' after tensor declaration");
  expect_error("machine M = grid(2", 1, 19, "expected ',' or ')' in grid");
  expect_error("tensor A(4) @ M(x ->", 1, 21, "expected ';' or ')' in distribution");
  /* a lone name is a statement that lacks its "=" */
  expect_error("A", 1, 2, "expected '=', '+=' or '-='");
}

static void test_dist_keyword_names(void **state) {
  (void)state;
  /* distribution names are local: keywords may be used, in either form */
  run r;
  parse_ok(&r, "machine M = grid(2, 2);\ntensor A(4, 4) @ M(dense, float -> float, *);");
  fe_dist_level *lv = &r.prog->tensors[0].dist.levels[0];
  assert_string_equal(lv->x[0], "dense");
  assert_string_equal(lv->y[0].name, "float");
  assert_int_equal(fe_check(r.prog), 0);
  assert_int_equal(lv->y[0].xindex, 1);
  finish(&r);
}

static void test_grid_params_marked(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "param n = 4;\nparam g;\ntensor A(n);\nmachine M = grid(g, 2);\n"
               "A(i) = A(i).distribute({i}, {io}, {ii}, grid(n));");
  assert_false(r.prog->params[0].is_grid); /* used in a tensor and an inline grid only */
  assert_true(r.prog->params[1].is_grid);
  assert_false(r.prog->params[1].implicit);
  assert_int_equal(r.prog->nparams, 2);
  finish(&r);
}

/* ---- semantic checks ---------------------------------------------------------------- */

static void test_valid_programs(void **state) {
  (void)state;
  expect_valid(SUMMA_DECLS "param chunk = 16;\n"
                           "A(i, j) = B(i, k) * C(k, j)\n"
                           "  .distribute({i, j}, {io, jo}, {ii, ji}, M)\n"
                           "  .split(k, ko, ki, chunk)\n"
                           "  .reorder({ko, ii, ji, ki})\n"
                           "  .communicate(A, jo)\n"
                           "  .communicate({B, C}, ko)\n"
                           "  .substitute({ii, ji, ki}, gemm);\n");
  expect_valid("param n = 512;\nmachine M = grid(q, q, q);\n"
               "tensor A(n, n) @ M(xy -> xy0);\ntensor B(n, n) @ M(xz -> x0z);\n"
               "tensor C(n, n) @ M(zy -> 0yz);\n"
               "A(i, j) += B(i, k) * C(k, j)\n"
               "  .distribute({i, j, k}, {io, jo, ko}, {ii, ji, ki}, Grid(q, q, q))\n"
               "  .communicate({A, B, C}, ko);\n");
  expect_valid("param n = 8192;\nmachine M = [grid(nx, ny), grid(4) : gpu];\n"
               "tensor A(n, n) float @ M(xy -> xy; zw -> z);\n"
               "tensor B(n, n) float @ M(xy -> xy; zw -> *);\n"
               "A(i, j) = B(i, j) * 2.5;\n");
  expect_valid("param n;\nmachine M = grid(2, 3, 16);\n"
               "tensor T(n, n, n) int64 {dense, dense, compressed} @ M(r, c, d -> r, c, 12);\n"
               "tensor s int32;\ns = T(i, j, k);\n");
  expect_valid("param n = 4;\ntensor A(n, n);\ntensor s;\nA(i, j) = 0;\nA(i, j) = s * 2;\n"
               "A(i, j) = -(A(i, j) + 1) / s;\ns += A(i, j) / 3;\n");
}

static void test_redeclaration(void **state) {
  (void)state;
  run r;
  compile(&r, "param n = 4;\ntensor A(n);\nmachine A = grid(2);\nparam n;\n");
  assert_non_null(r.prog);
  assert_int_equal(r.sema_errors, 2);
  assert_int_equal(r.nd, 2);
  assert_int_equal(r.d[0].line, 3);
  assert_int_equal(r.d[0].col, 9);
  assert_string_equal(r.d[0].msg, "redeclaration of 'A'");
  assert_int_equal(r.d[1].line, 4);
  assert_int_equal(r.d[1].col, 7);
  assert_string_equal(r.d[1].msg, "redeclaration of 'n'");
  assert_non_null(strstr(r.out, "t.dtl:2:8: note: 'A' was first declared here, as a tensor"));
  assert_non_null(strstr(r.out, "t.dtl:1:7: note: 'n' was first declared here, as a param"));
  finish(&r);
  /* a temporary is named as one */
  compile(&r, "param n = 4;\ntemp y(n);\ntensor y(n);\n");
  assert_int_equal(r.sema_errors, 1);
  assert_string_equal(r.d[0].msg, "redeclaration of 'y'");
  assert_non_null(strstr(r.out, "t.dtl:2:6: note: 'y' was first declared here, as a temporary"));
  finish(&r);
}

static void test_redeclaration_of_grid_param(void **state) {
  (void)state;
  expect_error("machine M = grid(gx);\nparam gx = 2;", 2, 7, "redeclaration of 'gx'");
  expect_error("tensor gx;\nmachine M = grid(gx);", 2, 18, "redeclaration of 'gx'");
}

static void test_param_default_positive(void **state) {
  (void)state;
  expect_error("param n = 0;", 1, 7, "param 'n' must be positive, but its default is 0");
  expect_error("param n = -5;", 1, 7, "its default is -5");
}

static void test_sizes_positive(void **state) {
  (void)state;
  expect_error("tensor A(4, 0);", 1, 13, "tensor dimension must be positive");
  expect_error("tensor A(-2);", 1, 10, "tensor dimension must be positive");
  expect_error("machine M = [grid(2), grid(0, 2)];", 1, 28, "grid dimension must be positive");
  expect_error("tensor A(4);\nA(i) = A(i).distribute({i}, {io}, {ii}, grid(0));", 2, 46,
               "grid dimension must be positive");
}

static void test_dist_unknown_machine(void **state) {
  (void)state;
  expect_error("tensor A(4) @ N(x -> x);", 1, 15, "unknown machine 'N'");
  expect_error("param P;\ntensor A(4) @ P(x -> x);", 2, 15, "'P' is a param, not a machine");
}

static void test_dist_machine_declared_after_use(void **state) {
  (void)state;
  run r;
  compile(&r, "tensor A(4) @ M(x -> x);\nmachine M = grid(2);");
  assert_int_equal(r.nd, 1);
  assert_int_equal(r.d[0].line, 1);
  assert_int_equal(r.d[0].col, 15);
  assert_string_equal(r.d[0].msg, "machine 'M' is used before its declaration");
  assert_non_null(strstr(r.out, "t.dtl:2:9: note: 'M' is declared here"));
  finish(&r);
}

static void test_dist_too_many_levels(void **state) {
  (void)state;
  expect_error("machine M = grid(2);\ntensor A(4) @ M(x -> x; y -> y);", 2, 25,
               "the distribution has 2 levels but machine M has 1");
}

static void test_dist_x_count(void **state) {
  (void)state;
  expect_error("machine M = grid(2, 2);\ntensor A(4, 4) @ M(xyz -> xy);", 2, 20,
               "X has 3 names but A has order 2");
  expect_error("machine M = [grid(2), grid(2)];\ntensor A(4, 4) @ M(xy -> x; z -> z);", 2, 29,
               "X has 1 name but A has order 2");
}

static void test_dist_y_count(void **state) {
  (void)state;
  expect_error("machine M = grid(2, 2);\ntensor A(4, 4) @ M(xy -> x);", 2, 26,
               "Y has 1 entry but M has 2 dimensions");
  expect_error("machine M = [grid(2), grid(2, 2)];\ntensor A(4, 4) @ M(xy -> x; zw -> z);", 2, 35,
               "Y has 1 entry but M[1] has 2 dimensions");
}

static void test_dist_repeated_names(void **state) {
  (void)state;
  expect_error("machine M = grid(2, 2);\ntensor A(4, 4) @ M(xx -> x*);", 2, 21,
               "'x' appears twice in X");
  expect_error("machine M = grid(2, 2);\ntensor A(4, 4) @ M(xy -> xx);", 2, 27,
               "'x' appears twice in Y");
  expect_error("machine M = grid(2, 2);\ntensor A(4, 4) @ M(a, b -> a, a);", 2, 31,
               "'a' appears twice in Y");
}

static void test_dist_y_not_in_x(void **state) {
  (void)state;
  expect_error("machine M = grid(2, 2);\ntensor A(4, 4) @ M(xy -> xz);", 2, 27,
               "'z' in Y is not a name of X");
  /* on a 1-D level one token is one entry: the message says so (ij as compact entries is 2) */
  expect_error("machine M = grid(2);\ntensor A(4, 4) @ M(ij -> ij);", 2, 26,
               "'ij' in Y is not a name of X: M has 1 dimension, so Y is the one entry 'ij' (compactly it would be 2 entries)");
  expect_error("machine M = [grid(2), grid(3)];\ntensor A(4, 4) @ M(ij -> i; ij -> ij);", 2, 35,
               "'ij' in Y is not a name of X: M[1] has 1 dimension, so Y is the one entry 'ij'");
}

static void test_dist_fixed_coordinate(void **state) {
  (void)state;
  expect_error("machine M = grid(2, 2);\ntensor A(4) @ M(x -> x3);", 2, 23,
               "fixed coordinate 3 is outside grid dimension 2 of M, which has 2 processors");
  expect_error("machine M = grid(1, 2);\ntensor A(4) @ M(x -> 1, x);", 2, 22,
               "fixed coordinate 1 is outside grid dimension 1 of M, which has 1 processor");
  expect_error("machine M = [grid(2), grid(4, 2)];\ntensor A(4) @ M(x -> x; y -> y, 2);", 2, 33,
               "outside grid dimension 2 of M[1]");
  /* in range, or against a param dim: fine */
  expect_valid("machine M = grid(2, 2, g);\ntensor A(4) @ M(x -> x, 1, 999);");
}

static void test_dist_scalar(void **state) {
  (void)state;
  expect_error("machine M = grid(2);\ntensor s float @ M(x -> x);", 2, 18,
               "scalar 's' cannot be distributed");
}

static void test_dist_xindex(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "machine M = grid(2, 2, 2);\ntensor A(4, 4) @ M(xy -> y*x);");
  assert_int_equal(fe_check(r.prog), 0);
  fe_dist_level *lv = &r.prog->tensors[0].dist.levels[0];
  assert_int_equal(lv->y[0].xindex, 1);
  assert_int_equal(lv->y[2].xindex, 0);
  assert_int_equal(r.prog->tensors[0].dist.machine, 0);
  finish(&r);
}

/* Element-wise functions, -= and params as values (LANGUAGE.md sections 3 and 4). */
static void test_functions_parse(void **state) {
  (void)state;
  run r;
  compile(&r, "param n = 4;\nparam k = 2;\ntensor A(n);\ntensor B(n, n);\ntensor exp(n);\n"
              "A(i) = sqrt(B(i, j)) + pow(A(i), min(k, 2)) * exp(i);\n"
              "A(i) -= max(abs(A(i)), -n) + erf(log(abs(exp(i))));\n");
  if (!r.prog || r.src->nerrors)
    dump(&r);
  assert_int_equal(r.src->nerrors, 0);
  fe_expr *e = r.prog->stmts[0].rhs;
  assert_int_equal(e->kind, FE_E_ADD);
  assert_int_equal(e->a->kind, FE_E_CALL);
  assert_int_equal(e->a->func, FE_F_SQRT);
  assert_int_equal(e->a->nargs, 1);
  assert_int_equal(e->a->a->kind, FE_E_ACCESS);
  assert_null(e->a->b);
  fe_expr *pw = e->b->a, *ex = e->b->b;
  assert_int_equal(pw->kind, FE_E_CALL);
  assert_int_equal(pw->func, FE_F_POW);
  assert_int_equal(pw->b->func, FE_F_MIN);
  assert_int_equal(pw->b->a->kind, FE_E_PARAM); /* k: a param's value */
  assert_int_equal(pw->b->a->param, 1);
  assert_int_equal(ex->kind, FE_E_ACCESS);      /* exp(i): the tensor declared before */
  assert_string_equal(ex->acc.tname, "exp");
  assert_false(r.prog->stmts[0].subtract);
  assert_true(r.prog->stmts[1].accumulate);
  assert_true(r.prog->stmts[1].subtract);
  char *text = print_rhs(r.prog, 1);
  assert_string_equal(text, "max(abs(A(i)), -n) + erf(log(abs(exp(i))))");
  free(text);
  finish(&r);
  /* a param named like a function stays a param; the function is still callable */
  expect_valid("param exp = 3;\ntensor A(4);\nA(i) = exp(A(i)) * exp;");
  expect_valid("param n = 4;\ntensor A(n) int32;\ntensor B(n) int64;\nA(i) -= abs(B(i)) + min(A(i), n) - max(n, 2);");
  expect_valid("machine M = grid(g);\ntensor A(4) @ M(i -> i);\nA(i) = A(i) * g;");
}

static void test_functions_errors(void **state) {
  (void)state;
  const char *decls = "param n = 4;\ntensor D(n);\ntensor I(n) int32;\ntensor L(n) int64;\n";
  char text[512];
  snprintf(text, sizeof text, "%sI(i) = abs(I(i)) + sqrt(I(i));", decls);
  expect_error(text, 5, 20, "sqrt is not defined on integers: 'I' is int32");
  snprintf(text, sizeof text, "%sL(i) -= min(L(i), exp(D(i)));", decls);
  expect_error(text, 5, 19, "exp is not defined on integers");
  snprintf(text, sizeof text, "%sI(i) = pow(I(i), 2);", decls);
  expect_error(text, 5, 8, "allows only the functions abs, min and max");
  snprintf(text, sizeof text, "%sD(i) = pow(D(i));", decls);
  expect_error(text, 5, 8, "pow takes 2 arguments, but 1 is given");
  snprintf(text, sizeof text, "%sD(i) = log(D(i), D(i), 1);", decls);
  expect_error(text, 5, 8, "log takes 1 argument, but 3 are given");
  snprintf(text, sizeof text, "%sD(i) = 1 + erf();", decls);
  expect_error(text, 5, 12, "erf takes 1 argument, but 0 are given");
  snprintf(text, sizeof text, "%sD(i) = D(i) * sqrt;", decls);
  expect_error(text, 5, 15, "unknown tensor 'sqrt' (the function sqrt is called with arguments in parentheses)");
  expect_error("param tol = 1e-8;\ntensor D(tol);", 2, 10, "'tol' is a floating param: it cannot be a tensor dimension");
  /* a tensor named like a function is one only after its declaration: before, the name is
   * the function's (whose argument i is then no tensor either) */
  run r;
  compile(&r, "tensor D(4);\nD(i) = exp(i);\ntensor exp(4);");
  assert_int_equal(r.nd, 2);
  assert_int_equal(r.d[0].line, 2);
  assert_int_equal(r.d[0].col, 8);
  assert_non_null(strstr(r.d[0].msg, "tensor 'exp' is used before its declaration"));
  finish(&r);
  expect_error("tensor D(4);\nD(i) = D(i) * n;\nparam n = 2;", 2, 15, "param 'n' is used before its declaration");
}

static void test_unknown_tensor(void **state) {
  (void)state;
  expect_error("tensor A(4);\nA(i) = X(i);", 2, 8, "unknown tensor 'X'");
  expect_error("tensor A(4);\nY(i) = A(i);", 2, 1, "unknown tensor 'Y'");
  expect_error("param n = 2;\ntensor A(4);\nA(i) = A(i) * n();", 3, 15,
               "'n' is a param, not a tensor");
  expect_error("machine M = grid(2);\ntensor A(4);\nA(i) = M;", 3, 8,
               "'M' is a machine, not a tensor");
}

static void test_tensor_used_before_declaration(void **state) {
  (void)state;
  run r;
  compile(&r, "tensor A(4);\nA(i) = B(i);\ntensor B(4);");
  assert_int_equal(r.nd, 1);
  assert_int_equal(r.d[0].line, 2);
  assert_int_equal(r.d[0].col, 8);
  assert_string_equal(r.d[0].msg, "tensor 'B' is used before its declaration");
  assert_non_null(strstr(r.out, "t.dtl:3:8: note: 'B' is declared here"));
  finish(&r);
}

static void test_access_order(void **state) {
  (void)state;
  expect_error("tensor A(4, 4);\ntensor B(4, 4);\nA(i, j) = B(i, j, k);", 3, 11,
               "B has order 2 but is accessed with 3 indices");
  expect_error("tensor A(4, 4);\ntensor B(4, 4);\nA(i, j) = B(i, j) + B;", 3, 21,
               "B has order 2 but is accessed with 0 indices");
  expect_error("tensor s;\ntensor B(4);\ns(i) = B(i);", 3, 1,
               "s has order 0 but is accessed with 1 index");
}

static void test_lhs_repeated(void **state) {
  (void)state;
  expect_error("tensor A(4, 4);\ntensor B(4, 4);\nA(i, i) = B(i, j);", 3, 6,
               "index variable 'i' appears twice on the left side");
}

static void test_diagonal(void **state) {
  (void)state;
  expect_error("tensor a(4);\ntensor B(4, 4, 4);\na(i) = B(i, j, j);", 3, 16,
               "diagonal accesses are not supported");
  /* the same variable in two different accesses is fine */
  expect_valid("tensor a(4);\ntensor B(4, 4);\na(i) = B(i, j) * B(j, i);");
}

static void test_conflicting_extents(void **state) {
  (void)state;
  expect_error("param n = 4;\nparam m = 4;\ntensor A(n, n);\ntensor B(n, m);\nA(i, j) = B(i, j);",
               5, 16, "conflicting extents for index variable 'j': n (A, dim 2) and m (B, dim 2)");
  expect_error("tensor a(3);\ntensor B(4, 4);\na(i) = B(i, j);", 3, 10,
               "conflicting extents for index variable 'i': 3 (a, dim 1) and 4 (B, dim 1)");
  run r;
  compile(&r, "tensor a(3);\ntensor B(4, 3);\na(i) = B(j, i) * B(i, j);");
  assert_int_equal(r.nd, 2);
  assert_int_equal(r.d[0].col, 20);
  assert_string_equal(r.d[0].msg, "conflicting extents for index variable 'i': 3 (a, dim 1) "
                                  "and 4 (B, dim 1)");
  assert_int_equal(r.d[1].col, 23);
  assert_string_equal(r.d[1].msg, "conflicting extents for index variable 'j': 4 (B, dim 1) "
                                  "and 3 (B, dim 2)");
  finish(&r);
  /* a literal and a param are different sizes even when the default agrees */
  expect_error("param n = 4;\ntensor a(n);\ntensor b(4);\na(i) = b(i);", 4, 10,
               "n (a, dim 1) and 4 (b, dim 1)");
  expect_valid("param n;\ntensor A(n, 7);\ntensor B(7, n);\nA(i, j) = B(j, i);");
}

static void test_index_variable_named_like_declaration(void **state) {
  (void)state;
  expect_error("param n = 4;\ntensor A(n);\nA(n) = A(n) * 2;", 3, 3,
               "index variable 'n' has the same name as a param");
  expect_error("tensor A(4);\nA(A) = 1;", 2, 3, "index variable 'A' has the same name as a tensor");
  expect_error("machine M = grid(2);\ntensor A(4);\nA(M) = 1;", 3, 3,
               "index variable 'M' has the same name as a machine");
}

static void test_lhs_variable_missing_on_right(void **state) {
  (void)state;
  /* variables of the left side that the right side does not use just iterate */
  expect_valid("tensor A(4, 4);\ntensor b(4);\nA(i, j) = b(i);");
  expect_valid("tensor a(4);\ntensor b(4);\na(i) = b(j);");
  expect_valid("tensor A(4, 4);\ntensor s;\nA(i, j) = 0;\nA(i, j) += s * 2 - 1;");
}

static void test_summed_variable_in_denominator(void **state) {
  (void)state;
  expect_error("tensor a(4);\ntensor B(4, 4);\ntensor c(4);\na(i) = B(i, k) / c(k);", 4, 20,
               "summed variable 'k' cannot appear in a denominator");
  expect_error("tensor a(4);\ntensor c(4);\ntensor s;\ns = 1 / -(2 * c(k));", 4, 17,
               "summed variable 'k' cannot appear in a denominator");
  /* a free variable in a denominator, and a summed one in a numerator, are fine */
  expect_valid("tensor a(4);\ntensor B(4, 4);\ntensor c(4);\na(i) = B(i, k) * c(k) / c(i);");
}

static void test_check_reports_every_error(void **state) {
  (void)state;
  run r;
  compile(&r, "param n = 0;\n"                      /* 1: default */
              "machine M = grid(2, 0);\n"           /* 2: grid dim */
              "tensor A(n, 0) @ M(xy -> xz);\n"     /* 3: tensor dim, z not in X */
              "tensor A(4);\n"                      /* 4: redeclaration */
              "A(i, j) = B(i, j) + A(i, i, i);\n"); /* 5: unknown tensor, order, diagonal */
  assert_non_null(r.prog);
  assert_int_equal(r.sema_errors, 8);
  assert_int_equal(r.nd, 8);
  int lines[] = {4, 1, 2, 3, 3, 5, 5, 5};
  int cols[] = {8, 7, 21, 13, 27, 11, 21, 26};
  for (int k = 0; k < 8; k++) {
    if (r.d[k].line != lines[k] || r.d[k].col != cols[k])
      dump(&r);
    assert_int_equal(r.d[k].line, lines[k]);
    assert_int_equal(r.d[k].col, cols[k]);
  }
  finish(&r);
}

static void test_check_twice_is_stable(void **state) {
  (void)state;
  run r;
  parse_ok(&r, "tensor A(4);\nA(i) = X(i);");
  assert_int_equal(fe_check(r.prog), 1);
  assert_int_equal(fe_check(r.prog), 1);
  assert_int_equal(r.src->nerrors, 2);
  assert_int_equal(r.prog->stmts[0].rhs->acc.tensor, -1);
  assert_int_equal(r.prog->stmts[0].lhs.tensor, 0);
  finish(&r);
}

static void test_sema_max_errors(void **state) {
  (void)state;
  run r;
  open_run(&r, "tensor A(0, 0, 0, 0, 0);");
  r.src->max_errors = 3;
  r.prog = fe_parse(r.src);
  assert_non_null(r.prog);
  assert_int_equal(fe_check(r.prog), 5);
  read_diags(&r);
  assert_int_equal(r.nd, 3);
  finish(&r);
}

/* Every prefix of a valid program either parses or fails cleanly (run under ASan, this also
 * checks that no error path leaks). */
static void test_every_prefix(void **state) {
  (void)state;
  const char *text = SUMMA_DECLS "machine H = [grid(2, 2) : cpu, grid(4) : gpu];\n"
                                 "tensor D(n, n, n) float {dense, compressed, dense} @ "
                                 "H(xyz -> xy; a, b, c -> *);\n"
                                 "A(i, j) += -(B(i, k) * C(k, j)) / 2.5e0\n"
                                 "  .distribute({i, j}, {io, jo}, {ii, ji}, Grid(gx, gy))\n"
                                 "  .precompute(B(i, k) * C(k, j), j, jw, W).communicate(A, H[1]);";
  size_t len = strlen(text);
  int ok = 0;
  for (size_t n = 0; n <= len; n++) {
    char *out = NULL;
    size_t outlen = 0;
    FILE *err = open_memstream(&out, &outlen);
    fe_source *src = fe_source_from_string("t.dtl", text, n, err);
    fe_program *prog = fe_parse(src);
    if (prog) {
      fe_check(prog);
      ok++;
    } else {
      assert_true(src->nerrors > 0);
    }
    fe_program_free(prog);
    fe_source_free(src);
    fclose(err);
    free(out);
  }
  assert_true(ok > 5);
}

/* LANGUAGE.md sections 3 and 9: temporaries, floating params, loops and their conditions */
static void test_programs_parse(void **state) {
  (void)state;
  run r;
  compile(&r, "param n = 8;\nparam tol = -2.5e-3;\nparam maxit = 5;\nmachine M = grid(g);\ntensor b(n) @ M(i -> i);\n"
              "temp r(n) @ M(i -> i);\ntemp rr;\ntemp k int64;\n"
              "r(i) = b(i) * tol;\nk = 0;\n"
              "repeat maxit until (rr < tol * tol && !(k >= 3) || sqrt(abs(rr)) == 0) {\n"
              "  rr = r(i) * r(i);\n  repeat 2 { r(i) -= rr * r(i); }\n  k += 1;\n}\n");
  assert_int_equal(r.nd, 0);
  finish(&r);
}

static void test_programs_errors(void **state) {
  (void)state;
  const char *d = "param n = 4;\nparam tol = 1e-8;\ntensor D(n);\ntemp T(n);\ntemp s;\n";
  char text[1024];
  snprintf(text, sizeof text, "%sD(i) = T(i);", d);
  expect_error(text, 6, 8, "temporary 'T' is read before any statement writes it");
  snprintf(text, sizeof text, "%sT(i) += D(i);", d);
  expect_error(text, 6, 1, "temporary 'T' is read before any statement writes it ('+=' adds to its values)");
  snprintf(text, sizeof text, "%srepeat 3 {\n  D(i) = T(i);\n  T(i) = D(i);\n}", d);
  expect_error(text, 7, 10, "temporary 'T' is read before any statement writes it");
  snprintf(text, sizeof text, "%sT(i) = D(i);\nrepeat 3 until (s < 1) { T(i) = D(i); }", d);
  expect_error(text, 7, 17, "temporary 's' is read before any statement writes it");
  snprintf(text, sizeof text, "%srepeat tol { D(i) = D(i); }", d);
  expect_error(text, 6, 8, "the bound of a loop must be an integer, but 'tol' is a floating param");
  snprintf(text, sizeof text, "%srepeat 2.5 { D(i) = D(i); }", d);
  expect_error(text, 6, 8, "the bound of a loop must be an integer");
  snprintf(text, sizeof text, "%srepeat -1 { D(i) = D(i); }", d);
  expect_error(text, 6, 8, "the bound of a loop cannot be negative");
  snprintf(text, sizeof text, "%sD(i) = 1;\nrepeat 3 until (D < 1) { D(i) = D(i) * 2; }", d);
  expect_error(text, 7, 17, "the condition reads 'D', which is not a scalar (order 1)");
  snprintf(text, sizeof text, "%ss = 1;\nrepeat 3 until (s + 1) { s = s * 2; }", d);
  expect_error(text, 7, 19, "expected a condition");
  snprintf(text, sizeof text, "%ss = 1;\nrepeat 3 until ((s < 1) + 1 < 2) { s = s * 2; }", d);
  expect_error(text, 7, 20, "a condition cannot be a value here");
  snprintf(text, sizeof text, "%srepeat 3 { tensor X(n); }", d);
  expect_error(text, 6, 12, "declarations belong at the top level");
  snprintf(text, sizeof text, "%srepeat 3 { D(i) = D(i);", d);
  expect_error(text, 6, 24, "expected '}' to close the loop's body");
  expect_error("param tol = 1e-8;\nmachine M = grid(tol);", 2, 18, "'tol' is a floating param: it cannot be a grid dimension");
  expect_error("param tol = 1e-8;\ntensor I(4) int64;\nI(i) = I(i) + tol;", 3, 15,
               "'tol' is a floating param and 'I' is int64");
  /* an integer sum divided: the loops would truncate each term */
  expect_error("tensor A(2, 3) int32;\ntensor w(3) int32;\ntensor x(2) int32;\nx(i) = A(i, j) * w(j) / 2;", 4, 23,
               "integer division of a sum over 'j' is not supported");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_diag_format),
      cmocka_unit_test(test_diag_tabs_in_caret),
      cmocka_unit_test(test_diag_note_and_no_location),
      cmocka_unit_test(test_diag_max_errors),
      cmocka_unit_test(test_source_open),
      cmocka_unit_test(test_lexer_tokens),
      cmocka_unit_test(test_lexer_number_edges),
      cmocka_unit_test(test_lexer_int_overflow),
      cmocka_unit_test(test_lexer_float_overflow),
      cmocka_unit_test(test_literal_values_exact),
      cmocka_unit_test(test_literal_lexer_values),
      cmocka_unit_test(test_literal_out_of_range),
      cmocka_unit_test(test_lexer_bad_characters_all_reported),
      cmocka_unit_test(test_lexer_nul_byte),
      cmocka_unit_test(test_lexer_comments),
      cmocka_unit_test(test_keyword_as_name),
      cmocka_unit_test(test_parse_params),
      cmocka_unit_test(test_parse_machine_flat),
      cmocka_unit_test(test_parse_machine_hierarchical),
      cmocka_unit_test(test_parse_tensor_basic),
      cmocka_unit_test(test_parse_tensor_types),
      cmocka_unit_test(test_parse_formats),
      cmocka_unit_test(test_format_errors),
      cmocka_unit_test(test_tensor_unknown_param),
      cmocka_unit_test(test_dist_compact),
      cmocka_unit_test(test_dist_comma),
      cmocka_unit_test(test_dist_single_entry),
      cmocka_unit_test(test_dist_hierarchical),
      cmocka_unit_test(test_dist_syntax_errors),
      cmocka_unit_test(test_parse_statement),
      cmocka_unit_test(test_parse_scalars),
      cmocka_unit_test(test_parse_numbers),
      cmocka_unit_test(test_precedence_and_associativity),
      cmocka_unit_test(test_print_expr),
      cmocka_unit_test(test_print_helpers),
      cmocka_unit_test(test_schedule_args),
      cmocka_unit_test(test_schedule_arg_errors),
      cmocka_unit_test(test_statement_syntax_errors),
      cmocka_unit_test(test_declaration_syntax_errors),
      cmocka_unit_test(test_nesting_limits),
      cmocka_unit_test(test_empty_program),
      cmocka_unit_test(test_eof_error_location),
      cmocka_unit_test(test_dist_keyword_names),
      cmocka_unit_test(test_grid_params_marked),
      cmocka_unit_test(test_valid_programs),
      cmocka_unit_test(test_redeclaration),
      cmocka_unit_test(test_redeclaration_of_grid_param),
      cmocka_unit_test(test_param_default_positive),
      cmocka_unit_test(test_sizes_positive),
      cmocka_unit_test(test_dist_unknown_machine),
      cmocka_unit_test(test_dist_machine_declared_after_use),
      cmocka_unit_test(test_dist_too_many_levels),
      cmocka_unit_test(test_dist_x_count),
      cmocka_unit_test(test_dist_y_count),
      cmocka_unit_test(test_dist_repeated_names),
      cmocka_unit_test(test_dist_y_not_in_x),
      cmocka_unit_test(test_dist_fixed_coordinate),
      cmocka_unit_test(test_dist_scalar),
      cmocka_unit_test(test_dist_xindex),
      cmocka_unit_test(test_unknown_tensor),
      cmocka_unit_test(test_tensor_used_before_declaration),
      cmocka_unit_test(test_access_order),
      cmocka_unit_test(test_lhs_repeated),
      cmocka_unit_test(test_diagonal),
      cmocka_unit_test(test_conflicting_extents),
      cmocka_unit_test(test_index_variable_named_like_declaration),
      cmocka_unit_test(test_lhs_variable_missing_on_right),
      cmocka_unit_test(test_summed_variable_in_denominator),
      cmocka_unit_test(test_check_reports_every_error),
      cmocka_unit_test(test_check_twice_is_stable),
      cmocka_unit_test(test_sema_max_errors),
      cmocka_unit_test(test_every_prefix),
      cmocka_unit_test(test_functions_parse),
      cmocka_unit_test(test_functions_errors),
      cmocka_unit_test(test_programs_parse),
      cmocka_unit_test(test_programs_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
