/* test_compiler.c -- unit tests of distalc as a library (src/compiler.h): many programs
 * compiled, copied, rescheduled and lowered in one process, in any order, each giving what a
 * fresh distalc process prints for it (--emit plan, --emit cin, the diagnostics); copies
 * that change without touching the original; diagnostics delivered to a sink and never to
 * stderr; running out of IR memory (a limit on the unit's arena) as a clean failure.
 *
 * Environment: DISTALC (the build tree's distalc, the oracle), top_srcdir (for examples/ and
 * tests/e2e/programs/). */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "compiler.h"

/* ---- harness ------------------------------------------------------------------------ */

static char tmpdir[64];

static int setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/test_compiler.XXXXXX");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

static const char *srcdir(void) {
  const char *t = getenv("top_srcdir");
  return t ? t : "..";
}

static const char *distalc_path(void) {
  static char path[4096];
  if (!path[0]) {
    const char *d = getenv("DISTALC");
    char cwd[2048];
    if (!d) d = "./distalc";
    if (d[0] == '/') snprintf(path, sizeof path, "%s", d);
    else snprintf(path, sizeof path, "%s/%s", getcwd(cwd, sizeof cwd) ? cwd : ".", d);
    if (access(path, X_OK) != 0) {
      fprintf(stderr, "no distalc at %s (set DISTALC)\n", path);
      fail();
    }
  }
  return path;
}

/* A file's bytes, NUL-terminated; *len its length. */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  char *buf = NULL;
  size_t n = 0;
  FILE *m = open_memstream(&buf, &n);
  assert_non_null(m);
  char chunk[4096];
  for (size_t k; (k = fread(chunk, 1, sizeof chunk, f)) > 0;) fwrite(chunk, 1, k, m);
  fclose(f);
  fclose(m);
  if (len) *len = n;
  return buf;
}

static void spill(const char *path, const char *text, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

/* Run distalc on DIR/NAME with args from DIR (so that diagnostics name NAME as the library
 * is told to): its stdout, its stderr (with length) and its exit status. */
typedef struct {
  int status;
  char *out, *err;
  size_t errlen;
} run;

static run distalc(const char *dir, const char *name, const char *args) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "cd '%s' && '%s' '%s' %s 2>stderr.txt", dir, distalc_path(), name, args);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  run r = {0};
  size_t n = 0;
  FILE *m = open_memstream(&r.out, &n);
  char chunk[4096];
  for (size_t k; (k = fread(chunk, 1, sizeof chunk, p)) > 0;) fwrite(chunk, 1, k, m);
  fclose(m);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  char path[4200];
  snprintf(path, sizeof path, "%s/stderr.txt", dir);
  r.err = slurp(path, &r.errlen);
  return r;
}

static void run_free(run *r) {
  free(r->out);
  free(r->err);
}

/* A sink that keeps every diagnostic's text, in order, and the last message. */
typedef struct {
  char *text;
  size_t len;
  FILE *f;
  int nerrors, nnotes;
  fe_diag_kind last_kind;
  fe_loc first_loc;
  char first_path[256], last_message[512];
} log_t;

static void collect(void *ctx, const fe_diag *d) {
  log_t *g = ctx;
  if (!g->f) g->f = open_memstream(&g->text, &g->len);
  if (g->nerrors + g->nnotes == 0) {
    g->first_loc = d->loc;
    snprintf(g->first_path, sizeof g->first_path, "%s", d->path ? d->path : "");
  }
  fwrite(d->text, 1, d->len, g->f);
  fflush(g->f);
  if (d->kind == FE_DIAG_ERROR) g->nerrors++;
  else g->nnotes++;
  g->last_kind = d->kind;
  snprintf(g->last_message, sizeof g->last_message, "%s", d->message);
}

static void log_free(log_t *g) {
  if (g->f) fclose(g->f);
  free(g->text);
  memset(g, 0, sizeof *g);
}

static fe_sink sink_of(log_t *g) { return (fe_sink){collect, g}; }

/* stderr into a file while the library runs; how many bytes it received. */
typedef struct {
  int saved;
  char path[128];
} quiet;

static void quiet_begin(quiet *q) {
  fflush(stderr);
  snprintf(q->path, sizeof q->path, "%s/quiet.XXXXXX", tmpdir);
  int fd = mkstemp(q->path);
  assert_true(fd >= 0);
  q->saved = dup(2);
  dup2(fd, 2);
  close(fd);
}

static char *quiet_end(quiet *q, size_t *len) {
  fflush(stderr);
  dup2(q->saved, 2);
  close(q->saved);
  char *text = slurp(q->path, len);
  unlink(q->path);
  return text;
}

static void expect_bytes(const char *what, const char *want, size_t wn, const char *got, size_t gn) {
  if (wn != gn || memcmp(want, got, wn)) {
    fprintf(stderr, "--- %s: want (%zu bytes):\n%.*s--- got (%zu bytes):\n%.*s---\n", what, wn, (int)wn, want,
            gn, (int)gn, got);
    fail();
  }
}

static void expect_text(const char *what, const char *want, const char *got) {
  expect_bytes(what, want, strlen(want), got, strlen(got));
}

/* The plan of a lowered program, as distalc --emit plan prints it. */
static char *plan_of(const lw_program *lp, const int64_t *vals, int64_t ranks) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  assert_non_null(f);
  lw_print_plan(f, lp, vals, ranks);
  spmd_print_plan_notes(f, spmd_build(lp));
  fclose(f);
  return buf;
}

/* The concrete index notation of every statement, as distalc --emit cin prints it. */
static char *cin_of(const ir_program *ir) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  assert_non_null(f);
  for (int i = 0; i < ir->nstmts; i++) {
    if (ir->nstmts > 1) fprintf(f, "# statement %d\n", i + 1);
    ir_print_cin(f, ir, &ir->stmts[i]);
  }
  fclose(f);
  return buf;
}

/* Param values and a rank count for the plan: defaults, and 2 for each grid param of the
 * program's machine without one; `args` gets the distalc options that say the same. */
static int64_t plan_setup(const dc_unit *u, int64_t *vals, char *args, size_t n) {
  const fe_program *p = u->ast;
  for (int i = 0; i < p->nparams; i++) vals[i] = p->params[i].has_default ? p->params[i].value : -1;
  int64_t ranks = 1;
  char sets[2048] = "";
  if (u->ir->machine >= 0) {
    const fe_machine *M = &p->machines[u->ir->machine];
    for (int l = 0; l < M->nlevels; l++)
      for (int d = 0; d < M->levels[l].ndims; d++) {
        const fe_size *z = &M->levels[l].dims[d];
        if (z->is_param && vals[z->param] < 0) {
          vals[z->param] = 2;
          size_t k = strlen(sets);
          snprintf(sets + k, sizeof sets - k, " --set %s=2", p->params[z->param].name);
        }
        ranks *= z->is_param ? vals[z->param] : z->value;
      }
  }
  snprintf(args, n, "--emit plan --ranks %lld%s", (long long)ranks, sets);
  return ranks;
}

/* A program of the source tree, copied into the temporary directory. */
typedef struct {
  char dir[4200], name[256];
  char *text;
  size_t len;
} program;

static int by_name(const void *a, const void *b) {
  return strcmp(((const program *)a)->name, ((const program *)b)->name);
}

/* The .dtl files of examples/ and tests/e2e/programs/. */
static program *programs(int *count) {
  static const char *dirs[] = {"examples", "tests/e2e/programs"};
  program *ps = NULL;
  int n = 0;
  for (int k = 0; k < 2; k++) {
    char from[4096];
    snprintf(from, sizeof from, "%s/%s", srcdir(), dirs[k]);
    DIR *d = opendir(from);
    assert_non_null(d);
    int first = n;
    for (struct dirent *e; (e = readdir(d));) {
      size_t l = strlen(e->d_name);
      if (l < 5 || strcmp(e->d_name + l - 4, ".dtl")) continue;
      ps = realloc(ps, (n + 1) * sizeof *ps);
      program *p = &ps[n++];
      snprintf(p->dir, sizeof p->dir, "%s/%d", tmpdir, k);
      mkdir(p->dir, 0700);
      snprintf(p->name, sizeof p->name, "%s", e->d_name);
      char path[8192];
      snprintf(path, sizeof path, "%s/%s", from, e->d_name);
      p->text = slurp(path, &p->len);
      snprintf(path, sizeof path, "%s/%s", p->dir, p->name);
      spill(path, p->text, p->len);
    }
    closedir(d);
    qsort(ps + first, n - first, sizeof *ps, by_name);
  }
  assert_true(n >= 10);
  *count = n;
  return ps;
}

static void programs_free(program *ps, int n) {
  for (int i = 0; i < n; i++) free(ps[i].text);
  free(ps);
}

/* ---- (a) many programs in one process, interleaved ------------------------------------- */

typedef struct {
  dc_unit *u;
  log_t log;
  run want; /* distalc --emit plan */
  int64_t *vals, ranks;
} unit_case;

/* Compile program p; what distalc says decides what the library must say. */
static void compile_case(const program *p, unit_case *c) {
  memset(&c->log, 0, sizeof c->log);
  dc_options o = {.sink = sink_of(&c->log), .max_errors = 50};
  quiet q;
  quiet_begin(&q);
  int rc = dc_compile(p->name, p->text, p->len, &o, &c->u);
  size_t nerr;
  char *err = quiet_end(&q, &nerr);
  assert_int_equal(nerr, 0); /* nothing on stderr: diagnostics go to the sink */
  free(err);
  if (rc != DC_OK) {
    /* distalc rejects it too, with the same words (a cuda-only construct, say) */
    char args[64] = "--emit plan --ranks 1";
    c->want = distalc(p->dir, p->name, args);
    assert_int_equal(c->want.status, rc);
    expect_bytes(p->name, c->want.err, c->want.errlen, c->log.text ? c->log.text : "", c->log.len);
    assert_null(c->u);
    return;
  }
  assert_non_null(c->u);
  assert_non_null(c->u->lp);
  char args[4096];
  c->vals = calloc(c->u->ast->nparams + 1, sizeof *c->vals);
  c->ranks = plan_setup(c->u, c->vals, args, sizeof args);
  c->want = distalc(p->dir, p->name, args);
  if (c->want.status != 0) fprintf(stderr, "%s %s:\n%s", p->name, args, c->want.err);
  assert_int_equal(c->want.status, 0);
}

static void check_plan(const program *p, const unit_case *c, const lw_program *lp) {
  char *got = plan_of(lp, c->vals, c->ranks);
  expect_text(p->name, c->want.out, got);
  free(got);
}

static void case_free(unit_case *c) {
  dc_unit_free(c->u);
  log_free(&c->log);
  run_free(&c->want);
  free(c->vals);
  memset(c, 0, sizeof *c);
}

/* Every program of the tree compiled and alive at once; copies lowered in reverse order;
 * every other unit freed and compiled again while the rest stay; each plan, whenever it is
 * printed, the one distalc prints for that program alone. */
static void test_many_programs_interleaved(void **state) {
  (void)state;
  int n;
  program *ps = programs(&n);
  unit_case *cs = calloc(n, sizeof *cs);
  int ok = 0;
  for (int i = 0; i < n; i++) {
    compile_case(&ps[i], &cs[i]);
    ok += cs[i].u != NULL;
  }
  assert_true(ok >= n - 4);
  for (int i = n - 1; i >= 0; i--) {
    if (!cs[i].u) continue;
    ir_program *copy;
    lw_program *lp;
    assert_int_equal(dc_clone(cs[i].u, cs[i].u->ir, &copy), DC_OK);
    assert_int_equal(dc_lower(cs[i].u, copy, &lp), DC_OK);
    check_plan(&ps[i], &cs[i], lp);
    if (i + 1 < n && cs[i + 1].u) check_plan(&ps[i + 1], &cs[i + 1], cs[i + 1].u->lp);
  }
  for (int i = 0; i < n; i += 2) {
    case_free(&cs[i]);
    compile_case(&ps[i], &cs[i]);
  }
  for (int i = 0; i < n; i++)
    if (cs[i].u) check_plan(&ps[i], &cs[i], cs[i].u->lp);
  for (int i = 0; i < n; i++) case_free(&cs[i]);
  free(cs);
  programs_free(ps, n);
}

/* ---- (e) SPMD programs: several built in one process, each the one distalc prints ---------- */
static char *spmd_of(dc_unit *u, const lw_program *lp) {
  sp_program *sp;
  assert_int_equal(dc_spmd(u, lp, &sp), DC_OK);
  assert_non_null(sp);
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  assert_non_null(f);
  spmd_print(f, sp);
  fclose(f);
  return buf;
}

/* Every program of the tree compiled and alive at once; each one's SPMD program built from its
 * own lowering and from a lowering of a copy, in reverse order, with the others' built in
 * between: each text is what distalc --emit spmd prints for that program alone. */
static void test_spmd_programs_interleaved(void **state) {
  (void)state;
  int n;
  program *ps = programs(&n);
  dc_unit **us = calloc(n, sizeof *us);
  char **want = calloc(n, sizeof *want);
  int built = 0;
  for (int i = 0; i < n; i++) {
    log_t log = {0};
    dc_options o = {.sink = sink_of(&log), .max_errors = 50};
    if (dc_compile(ps[i].name, ps[i].text, ps[i].len, &o, &us[i]) != DC_OK) us[i] = NULL;
    log_free(&log);
    if (!us[i]) continue;
    run r = distalc(ps[i].dir, ps[i].name, "--emit spmd");
    assert_int_equal(r.status, 0);
    want[i] = r.out;
    free(r.err);
  }
  for (int i = n - 1; i >= 0; i--) {
    if (!us[i]) continue;
    char *a = spmd_of(us[i], us[i]->lp);
    expect_text(ps[i].name, want[i], a);
    free(a);
    ir_program *copy;
    lw_program *lp;
    assert_int_equal(dc_clone(us[i], us[i]->ir, &copy), DC_OK);
    assert_int_equal(dc_lower(us[i], copy, &lp), DC_OK);
    if (i + 1 < n && us[i + 1]) {
      char *c = spmd_of(us[i + 1], us[i + 1]->lp);
      expect_text(ps[i + 1].name, want[i + 1], c);
      free(c);
    }
    char *b = spmd_of(us[i], lp);
    expect_text(ps[i].name, want[i], b);
    free(b);
    built++;
  }
  assert_true(built >= n - 4);
  for (int i = 0; i < n; i++) {
    dc_unit_free(us[i]);
    free(want[i]);
  }
  free(us);
  free(want);
  programs_free(ps, n);
}

/* ---- (b) copies: a different schedule on a copy leaves the original alone ---------------- */

static const char SUMMA_DECLS[] =
    "param n = 64;\n"
    "param chunk = 8;\n"
    "machine M = grid(gx, gy);\n"
    "tensor A(n, n) @ M(xy -> xy);\n"
    "tensor B(n, n) @ M(xy -> xy);\n"
    "tensor C(n, n) @ M(xy -> xy);\n"
    "A(i, j) = B(i, k) * C(k, j)\n"
    "  .distribute({i, j}, {io, jo}, {ii, ji}, M)\n";
static const char SUMMA_MORE[] =
    "  .split(k, ko, ki, chunk)\n"
    "  .reorder({ko, ii, ji, ki})\n"
    "  .communicate(A, jo)\n"
    "  .communicate({B, C}, ko)\n";

static char *dtl_file(const char *name, const char *a, const char *b) {
  char *text = malloc(strlen(a) + strlen(b) + 3);
  sprintf(text, "%s%s;\n", a, b);
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  spill(path, text, strlen(text));
  return text;
}

/* A copy of statement `stmt` of u's program with more commands applied, in u's arena. */
static ir_stmt *copy_statement(dc_unit *u, int stmt, const fe_command *cmds, int n) {
  ir_scope sc;
  ir_scope_enter(&sc, u->arena);
  if (setjmp(sc.oom)) fail();
  ir_stmt *s = ir_stmt_clone(&u->ir->stmts[stmt]);
  assert_int_equal(ir_schedule_stmt(u->ir, s, cmds, n), 0);
  ir_scope_leave(&sc);
  return s;
}

/* SUMMA distributed only, copied; the copy gets SUMMA's split, reorder and communicates:
 * its concrete index notation and plan are those distalc gives the whole schedule, and the
 * original's are still those of the distribution alone. */
static void test_clone_reschedule(void **state) {
  (void)state;
  char *base = dtl_file("base.dtl", SUMMA_DECLS, ""), *full = dtl_file("full.dtl", SUMMA_DECLS, SUMMA_MORE);
  log_t log = {0};
  dc_options o = {.sink = sink_of(&log)};
  dc_unit *u, *v;
  assert_int_equal(dc_compile("base.dtl", base, strlen(base), &o, &u), DC_OK);
  o.no_lower = true;
  assert_int_equal(dc_compile("full.dtl", full, strlen(full), &o, &v), DC_OK);
  const fe_stmt *fs = &v->ast->stmts[0];
  assert_int_equal(fs->ncmds, 5);

  run base_cin = distalc(tmpdir, "base.dtl", "--emit cin"), full_cin = distalc(tmpdir, "full.dtl", "--emit cin");
  run base_plan = distalc(tmpdir, "base.dtl", "--emit plan --ranks 4 --set gx=2 --set gy=2");
  run full_plan = distalc(tmpdir, "full.dtl", "--emit plan --ranks 4 --set gx=2 --set gy=2");
  char *before = cin_of(u->ir);
  expect_text("base cin", base_cin.out, before);

  /* the program copied, the copy scheduled further and lowered */
  ir_program *copy;
  lw_program *lp;
  assert_int_equal(dc_clone(u, u->ir, &copy), DC_OK);
  assert_int_equal(dc_schedule(u, copy, 0, fs->cmds + 1, fs->ncmds - 1), DC_OK);
  char *after = cin_of(u->ir), *got = cin_of(copy);
  expect_text("original cin after the copy's schedule", before, after);
  expect_text("copy cin", full_cin.out, got);
  free(after);
  free(got);
  assert_int_equal(dc_lower(u, copy, &lp), DC_OK);
  int64_t vals[8] = {64, 8, 2, 2};
  assert_int_equal(u->ast->nparams, 4); /* n, chunk, gx, gy */
  got = plan_of(lp, vals, 4);
  expect_text("copy plan", full_plan.out, got);
  free(got);
  got = plan_of(u->lp, vals, 4);
  expect_text("original plan", base_plan.out, got);
  free(got);

  /* one statement copied (ir_stmt_clone) and scheduled, in the unit's arena */
  ir_stmt *s = copy_statement(u, 0, fs->cmds + 1, fs->ncmds - 1);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ir_print_cin(f, u->ir, s);
  fclose(f);
  expect_text("statement copy cin", full_cin.out, buf);
  free(buf);
  after = cin_of(u->ir);
  expect_text("original cin after the statement copy's schedule", before, after);
  free(after);

  /* a schedule that fails on a copy: reported through the sink, the original intact */
  assert_int_equal(log.nerrors, 0);
  assert_int_equal(dc_clone(u, u->ir, &copy), DC_OK);
  assert_int_equal(dc_schedule(u, copy, 0, fs->cmds, 1), DC_ERRORS); /* distribute i again */
  assert_int_equal(log.nerrors, 1);
  assert_non_null(strstr(log.last_message, "distribute"));
  after = cin_of(u->ir);
  expect_text("original cin after a failed schedule", before, after);
  free(after);

  free(before);
  run_free(&base_cin);
  run_free(&full_cin);
  run_free(&base_plan);
  run_free(&full_plan);
  dc_unit_free(u);
  dc_unit_free(v);
  log_free(&log);
  free(base);
  free(full);
}

/* The program of u with the first k commands of each statement applied (NULL when they fail
 * on their own, reported through the sink), in u's arena. */
static ir_program *partly_scheduled(dc_unit *u, int k) {
  ir_scope sc;
  ir_scope_enter(&sc, u->arena);
  if (setjmp(sc.oom)) fail();
  ir_program *part = ir_build(u->ast);
  assert_non_null(part);
  int e = ir_schedule(part, k);
  ir_scope_leave(&sc);
  return e ? NULL : part;
}

/* Copy each statement of part alone (ir_stmt_clone), apply the rest of its commands from the
 * k-th to the copy and put it in place of copy's statement. */
static void finish_statements(dc_unit *u, ir_program *part, ir_program *copy, int k) {
  ir_scope sc;
  ir_scope_enter(&sc, u->arena);
  if (setjmp(sc.oom)) fail();
  for (int s = 0; s < part->nstmts; s++) {
    ir_stmt *one = ir_stmt_clone(&part->stmts[s]);
    const fe_stmt *fs = one->ast;
    int from = k < fs->ncmds ? k : fs->ncmds;
    assert_int_equal(ir_schedule_stmt(part, one, from < fs->ncmds ? fs->cmds + from : NULL, fs->ncmds - from), 0);
    copy->stmts[s] = *one;
  }
  ir_scope_leave(&sc);
}

/* Every program of the tree, every statement: the first k commands applied (ir_schedule),
 * that program copied, the rest of each statement's commands applied to the copy, and to a
 * copy of the statement alone.  The copies end as the whole schedule does (concrete index
 * notation and plan) and the partly scheduled original stays as it was. */
static void test_clone_every_prefix(void **state) {
  (void)state;
  int n, tried = 0;
  program *ps = programs(&n);
  for (int i = 0; i < n; i++) {
    log_t log = {0};
    dc_unit *u;
    if (dc_compile(ps[i].name, ps[i].text, ps[i].len, &(dc_options){.sink = sink_of(&log)}, &u) != DC_OK) {
      log_free(&log);
      continue;
    }
    char *whole = cin_of(u->ir);
    int64_t *vals = calloc(u->ast->nparams + 1, sizeof *vals);
    char args[4096];
    int64_t ranks = plan_setup(u, vals, args, sizeof args);
    char *plan = plan_of(u->lp, vals, ranks);
    int most = 0;
    for (int k = 0; k < u->ast->nstmts; k++)
      if (u->ast->stmts[k].ncmds > most) most = u->ast->stmts[k].ncmds;
    for (int k = 0; k <= most; k++) {
      ir_program *part = partly_scheduled(u, k);
      if (!part) continue; /* a prefix may be invalid on its own (a precondition met later) */
      char *before = cin_of(part);
      ir_program *copy;
      assert_int_equal(dc_clone(u, part, &copy), DC_OK);
      for (int s = 0; s < copy->nstmts; s++) {
        const fe_stmt *fs = copy->stmts[s].ast;
        int from = k < fs->ncmds ? k : fs->ncmds;
        assert_int_equal(dc_schedule(u, copy, s, from < fs->ncmds ? fs->cmds + from : NULL, fs->ncmds - from), DC_OK);
      }
      char *got = cin_of(copy), *still = cin_of(part);
      expect_text(ps[i].name, whole, got);
      expect_text(ps[i].name, before, still);
      lw_program *lp;
      assert_int_equal(dc_lower(u, copy, &lp), DC_OK);
      char *p2 = plan_of(lp, vals, ranks);
      expect_text(ps[i].name, plan, p2);
      /* statement by statement, with ir_stmt_clone */
      finish_statements(u, part, copy, k);
      free(got);
      got = cin_of(copy);
      expect_text(ps[i].name, whole, got);
      free(still);
      still = cin_of(part);
      expect_text(ps[i].name, before, still);
      free(before);
      free(got);
      free(still);
      free(p2);
      tried++;
    }
    free(whole);
    free(plan);
    free(vals);
    dc_unit_free(u);
    log_free(&log);
  }
  assert_true(tried >= 2 * n);
  programs_free(ps, n);
}

/* ---- (c) diagnostics to a sink ------------------------------------------------------------ */

static const char *const BAD[][2] = {
    {"syntax.dtl", "param n = 8;\ntensor A(n) ;\nA(i) = = 1;\n"},
    {"names.dtl", "param n = 8;\ntensor A(n);\nA(i) = B(i);\n"},
    {"schedule.dtl", "param n = 8;\nmachine M = grid(g);\ntensor A(n) @ M(x -> x);\ntensor B(n);\n"
                     "A(i) = B(i)\n  .split(j, jo, ji, 2);\n"},
    {"lower.dtl", "param n = 8;\nmachine M = grid(g);\ntensor A(n) @ M(x -> x);\ntensor B(n);\n"
                  "A(i) = B(i)\n\t.parallelize(i, gpu_thread);\n"},
    {"machines.dtl", "param n = 8;\nmachine M = grid(g);\nmachine N = grid(h);\n"
                     "tensor A(n) @ M(x -> x);\ntensor B(n) @ N(x -> x);\nA(i) = B(i);\n"},
    {"nul.dtl", "param n = 8;\r\ntensor A(n);\r\nA(i) = 1 \0 ;\r\n"},
};
static const size_t BAD_LEN[] = {0, 0, 0, 0, 0, sizeof "param n = 8;\r\ntensor A(n);\r\nA(i) = 1 \0 ;\r\n" - 1};

/* One bad program: the sink receives exactly what distalc prints to stderr, and the
 * library prints nothing itself. */
static void check_bad(const char *name, const char *text, size_t len, int max_errors) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  spill(path, text, len);
  run want = distalc(tmpdir, name, "--check");
  assert_int_equal(want.status, 1);
  assert_true(want.errlen > 0);
  log_t log = {0};
  dc_unit *u = (dc_unit *)1;
  quiet q;
  quiet_begin(&q);
  int rc = dc_compile(name, text, len, &(dc_options){.sink = sink_of(&log), .max_errors = max_errors}, &u);
  size_t nerr;
  char *err = quiet_end(&q, &nerr);
  assert_int_equal(rc, DC_ERRORS);
  assert_null(u);
  assert_int_equal(nerr, 0);
  free(err);
  expect_bytes(name, want.err, want.errlen, log.text, log.len);
  assert_true(log.nerrors >= 1);
  assert_string_equal(log.first_path, name);
  /* the default sink: stderr, the same bytes */
  quiet_begin(&q);
  rc = dc_compile(name, text, len, &(dc_options){.max_errors = max_errors}, &u);
  err = quiet_end(&q, &nerr);
  assert_int_equal(rc, DC_ERRORS);
  expect_bytes(name, want.err, want.errlen, err, nerr);
  free(err);
  run_free(&want);
  log_free(&log);
}

static void test_diagnostics_to_sink(void **state) {
  (void)state;
  for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++)
    check_bad(BAD[k][0], BAD[k][1], BAD_LEN[k] ? BAD_LEN[k] : strlen(BAD[k][1]), 50);

  /* located: the first error of each stage names its line and column */
  static const struct {
    int k, line, col;
    const char *needle;
  } where[] = {{0, 3, 8, "expected"}, {1, 3, 8, "B"}, {3, 6, 3, "parallelize"}, {2, 6, 10, "split"}};
  for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
    log_t log = {0};
    dc_unit *u;
    const char *text = BAD[where[w].k][1];
    assert_int_equal(dc_compile(BAD[where[w].k][0], text, strlen(text), &(dc_options){.sink = sink_of(&log)}, &u),
                     DC_ERRORS);
    if (log.first_loc.line != where[w].line || log.first_loc.col != where[w].col || !strstr(log.text, where[w].needle))
      fprintf(stderr, "%s: at %d:%d\n%s", BAD[where[w].k][0], log.first_loc.line, log.first_loc.col, log.text);
    assert_int_equal(log.first_loc.line, where[w].line);
    assert_int_equal(log.first_loc.col, where[w].col);
    assert_non_null(strstr(log.text, where[w].needle));
    log_free(&log);
  }

  /* past max_errors: counted, not shown, and one note says so (distalc shows 50) */
  char *many = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&many, &len);
  fputs("param n = 4;\n", f);
  for (int t = 0; t < 60; t++) fprintf(f, "tensor T%d(m%d);\n", t, t);
  fclose(f);
  check_bad("many.dtl", many, len, 50);
  log_t log = {0};
  dc_unit *u;
  assert_int_equal(dc_compile("many.dtl", many, len, &(dc_options){.sink = sink_of(&log), .max_errors = 3}, &u),
                   DC_ERRORS);
  assert_int_equal(log.nerrors, 3);
  assert_int_equal(log.nnotes, 1);
  assert_int_equal(log.last_kind, FE_DIAG_NOTE);
  assert_string_equal(log.last_message, "too many errors; the rest are not shown");
  log_free(&log);
  free(many);

  /* a file that cannot be read */
  run want = distalc(tmpdir, "missing.dtl", "--check");
  assert_int_equal(want.status, 1);
  char path[4400];
  snprintf(path, sizeof path, "%s/missing.dtl", tmpdir);
  quiet q;
  quiet_begin(&q);
  {
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(tmpdir), 0);
    fe_sink s = sink_of(&log);
    assert_null(fe_source_open_sink("missing.dtl", &s));
    assert_int_equal(chdir(cwd), 0);
  }
  size_t nerr;
  char *err = quiet_end(&q, &nerr);
  assert_int_equal(nerr, 0);
  free(err);
  expect_bytes("missing.dtl", want.err, want.errlen, log.text, log.len);
  assert_string_equal(log.first_path, "missing.dtl");
  assert_int_equal(log.first_loc.line, 0);
  log_free(&log);
  run_free(&want);
}

/* ---- (d) out of memory ---------------------------------------------------------------- */

static const char OOM_PROGRAM[] =
    "param n = 64;\n"
    "param chunk = 8;\n"
    "machine M = grid(gx, gy);\n"
    "tensor A(n, n) @ M(xy -> xy);\n"
    "tensor B(n, n) @ M(xy -> xy);\n"
    "tensor C(n, n) @ M(xy -> xy);\n"
    "tensor y(n) @ M(x -> x0);\n"
    "tensor c(n);\n"
    "A(i, j) = B(i, k) * C(k, j)\n"
    "  .distribute({i, j}, {io, jo}, {ii, ji}, Grid(gx, gy))\n"
    "  .divide(k, ko, ki, gx)\n"
    "  .reorder({ko, ii, ji, ki})\n"
    "  .rotate(ko, {io, jo}, kos)\n"
    "  .communicate(A, jo)\n"
    "  .communicate({B, C}, kos);\n"
    "y(i) = B(i, j) * c(j)\n"
    "  .distribute({i}, {io}, {ii}, M)\n"
    "  .precompute(c(j), j, jw, w)\n"
    "  .split(j, jo, ji, chunk);\n";

static void expect_nomem(int rc, log_t *log, const char *what) {
  if (rc != DC_NOMEM) fprintf(stderr, "%s: %d\n", what, rc);
  assert_int_equal(rc, DC_NOMEM);
  assert_int_equal(log->last_kind, FE_DIAG_ERROR);
  assert_string_equal(log->last_message, "out of memory");
  assert_true(log->len >= strlen("distalc: out of memory\n"));
  assert_memory_equal(log->text + log->len - strlen("distalc: out of memory\n"), "distalc: out of memory\n",
                      strlen("distalc: out of memory\n"));
}

/* The unit's arena limited to ever more bytes: each compilation either fails, reporting
 * "out of memory" through the sink (nothing on stderr, nothing kept), or gives the plan it
 * gives without a limit.  Then the same for copying, lowering and printing C on a unit that
 * runs out after compiling: it stays usable once the limit is lifted. */
static void test_out_of_memory(void **state) {
  (void)state;
  size_t len = strlen(OOM_PROGRAM);
  log_t log = {0};
  dc_unit *u;
  assert_int_equal(dc_compile("oom.dtl", OOM_PROGRAM, len, &(dc_options){.sink = sink_of(&log)}, &u), DC_OK);
  int64_t vals[8] = {64, 8, 2, 2};
  char *want = plan_of(u->lp, vals, 4);
  size_t used = ir_arena_used(u->arena);
  assert_true(used > 0);
  dc_unit_free(u);
  log_free(&log);

  int failed = 0, passed = 0;
  size_t step = used / 300 + 16;
  for (size_t limit = 16; limit < used + 2 * step; limit += step) {
    quiet q;
    quiet_begin(&q);
    int rc = dc_compile("oom.dtl", OOM_PROGRAM, len, &(dc_options){.sink = sink_of(&log), .arena_limit = limit}, &u);
    size_t nerr;
    char *err = quiet_end(&q, &nerr);
    assert_int_equal(nerr, 0);
    free(err);
    if (rc == DC_OK) {
      char *got = plan_of(u->lp, vals, 4);
      expect_text("plan under a limit", want, got);
      free(got);
      dc_unit_free(u);
      assert_int_equal(log.nerrors, 0);
      passed++;
    } else {
      expect_nomem(rc, &log, "compile");
      assert_null(u);
      assert_int_equal(log.nerrors, 1);
      failed++;
    }
    log_free(&log);
  }
  assert_true(failed >= 100);
  assert_true(passed >= 1);

  /* after compiling: the copy, the lowering and the C printer run out */
  int where[3] = {0};
  assert_int_equal(dc_compile("oom.dtl", OOM_PROGRAM, len, &(dc_options){.sink = sink_of(&log), .no_lower = true}, &u),
                   DC_OK);
  for (size_t extra = 0; extra < 200000; extra += 512) {
    size_t at = ir_arena_used(u->arena);
    ir_arena_set_limit(u->arena, at + extra);
    ir_program *copy;
    lw_program *lp = NULL;
    int rc = dc_clone(u, u->ir, &copy), stage = 0;
    if (rc == DC_OK) rc = dc_lower(u, copy, &lp), stage = 1;
    char *h = NULL, *c = NULL, *cu = NULL;
    size_t hl, cl, cul;
    FILE *fh = open_memstream(&h, &hl), *fc = open_memstream(&c, &cl), *fcu = open_memstream(&cu, &cul);
    cg_options o = {.prefix = "oom", .header_name = "oom.h", .source_name = "oom.dtl", .main = true};
    if (rc == DC_OK) rc = dc_emit(u, lp, fh, fc, fcu, &o), stage = 2;
    fclose(fh);
    fclose(fc);
    fclose(fcu);
    free(h);
    free(c);
    free(cu);
    if (rc == DC_OK) break;
    expect_nomem(rc, &log, "after compiling");
    where[stage]++;
    /* the unit is still whole: without the limit the original lowers to the same plan */
    ir_arena_set_limit(u->arena, 0);
    assert_int_equal(dc_lower(u, u->ir, &lp), DC_OK);
    char *got = plan_of(lp, vals, 4);
    expect_text("plan after running out", want, got);
    free(got);
  }
  assert_true(where[0] >= 1 && where[1] >= 1 && where[2] >= 1);
  dc_unit_free(u);
  log_free(&log);
  free(want);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_many_programs_interleaved),
      cmocka_unit_test(test_spmd_programs_interleaved),
      cmocka_unit_test(test_clone_reschedule),
      cmocka_unit_test(test_clone_every_prefix),
      cmocka_unit_test(test_diagnostics_to_sink),
      cmocka_unit_test(test_out_of_memory),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
