/* parser.c -- recursive descent parser of LANGUAGE.md sections 3-5 into the AST of
 * frontend.h.
 *
 * Error handling follows Lua's luaD_throw: a syntax error (or running out of memory) is
 * reported and then longjmp()s back to fe_parse, which frees the partial program.  That is
 * leak-free because every allocation is linked into the program the moment it is made:
 * array elements are appended zeroed before they are filled, and expressions are built in
 * place through the slot that owns them.  Errors that leave the syntax intact (an unknown
 * param, a format that does not fit the order) are reported without stopping, so several
 * show at once; fe_parse then still returns NULL. */
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/fe_internal.h"

enum {
  MAX_NESTING = 256, /* parentheses and unary minus inside one expression */
  MAX_DEPTH = 1000,  /* height of an expression tree (the free and check passes recurse) */
  MAX_LOOPS = 256,   /* loops nested in loops (the passes over a program recurse) */
};

typedef struct {
  fe_source *src;
  fe_token *tok; /* the current token; the array ends with TK_EOF */
  fe_token *first;
  fe_program *prog;
  int nesting;
  int loops; /* repeat loops open around the current item */
  bool in_cond; /* parsing a loop's condition: "(" may open a condition */
  jmp_buf fail;
} parser;

/* ---- helpers ------------------------------------------------------------------------ */

static _Noreturn void fail(parser *p, fe_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static _Noreturn void fail(parser *p, fe_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fe_verror(p->src, loc, fmt, ap);
  va_end(ap);
  longjmp(p->fail, 1);
}

/* Where a token is missing: at the offending token, or just after the last token when the
 * file ended early, so the caret points where the missing text belongs. */
static fe_loc error_loc(const parser *p) {
  if (p->tok->kind != TK_EOF || p->tok == p->first)
    return p->tok->loc;
  const fe_token *prev = p->tok - 1;
  return (fe_loc){prev->loc.line, prev->loc.col + prev->len};
}

static _Noreturn void fail_here(parser *p, const char *msg) { fail(p, error_loc(p), "%s", msg); }

/* Resize arr, which holds n elements, so that it can hold n + 1.  The capacity is implicit:
 * the array is reallocated whenever n is a power of two. */
static void *grow(parser *p, void *arr, int n, size_t size) {
  if (n & (n - 1))
    return arr;
  void *bigger = realloc(arr, size * (size_t)(n ? 2 * n : 1));
  if (!bigger)
    fail(p, p->tok->loc, "out of memory");
  return bigger;
}

/* Append a zeroed element to the array arr of count n and return a pointer to it. */
#define PUSH(p, arr, n)                                                                            \
  ((arr) = grow((p), (arr), (n), sizeof *(arr)), memset(&(arr)[(n)], 0, sizeof *(arr)),            \
   &(arr)[(n)++])

static void *zalloc(parser *p, size_t size) {
  void *q = calloc(1, size);
  if (!q)
    fail(p, p->tok->loc, "out of memory");
  return q;
}

static char *text_of(parser *p, const fe_token *t) {
  char *s = strndup(t->text, (size_t)t->len);
  if (!s)
    fail(p, t->loc, "out of memory");
  return s;
}

static bool is(const parser *p, const char *s) { return fe_tok_is(p->tok, s); }

static fe_token *next(parser *p) {
  fe_token *t = p->tok;
  if (t->kind != TK_EOF)
    p->tok++;
  return t;
}

static bool consume(parser *p, const char *s) {
  if (!is(p, s))
    return false;
  next(p);
  return true;
}

static fe_token *expect(parser *p, const char *s, const char *msg) {
  if (!is(p, s))
    fail_here(p, msg);
  return next(p);
}

static fe_token *expect_ident(parser *p, const char *msg) {
  if (p->tok->kind == TK_KEYWORD)
    fail(p, p->tok->loc, "%s, but '%.*s' is a keyword", msg, p->tok->len, p->tok->text);
  if (p->tok->kind != TK_IDENT)
    fail_here(p, msg);
  return next(p);
}

static bool tok_eq(const fe_token *t, const char *s) {
  return (size_t)t->len == strlen(s) && !memcmp(t->text, s, (size_t)t->len);
}

/* The value of the integer literal t, negated when neg (written after a unary minus).
 * 9223372036854775808 fits int64 only negated, as INT64_MIN. */
static int64_t int_value(parser *p, const fe_token *t, bool neg) {
  if (t->min64 && !neg)
    fail(p, t->loc, "integer literal %.*s is too large for int64 (the largest is %lld)", t->len, t->text,
         (long long)INT64_MAX);
  return t->min64 ? INT64_MIN : neg ? -t->ival : t->ival;
}

static int find_param_tok(const parser *p, const fe_token *t) {
  for (int k = 0; k < p->prog->nparams; k++)
    if (tok_eq(t, p->prog->params[k].name))
      return k;
  return -1;
}

/* ---- declarations ------------------------------------------------------------------- */

// param = "param" IDENT ("=" "-"? (INT | FLOAT))? ";"
static void param_decl(parser *p) {
  next(p);
  fe_token *name = expect_ident(p, "expected param name");
  fe_param *prm = PUSH(p, p->prog->params, p->prog->nparams);
  prm->name = text_of(p, name);
  prm->loc = name->loc;
  if (consume(p, "=")) {
    bool neg = consume(p, "-");
    if (p->tok->kind == TK_FLOAT) { /* a floating param (a double) */
      prm->has_default = prm->is_float = true;
      prm->fvalue = neg ? -p->tok->fval : p->tok->fval;
      fe_token *v = next(p);
      char *t = text_of(p, v);
      prm->ftext = zalloc(p, strlen(t) + 2);
      snprintf(prm->ftext, strlen(t) + 2, "%s%s", neg ? "-" : "", t);
      free(t);
    } else {
      if (p->tok->kind != TK_INT)
        fail_here(p, "expected an integer or floating default value for param");
      prm->has_default = true;
      prm->value = int_value(p, next(p), neg);
    }
  }
  expect(p, ";", "expected ';' after param declaration");
}

// size = "-"? INT | IDENT
// In a machine declaration an IDENT that is not a param yet declares one (implicit, no
// default) and every param used is marked as a grid param; elsewhere it must be a param.
static void size(parser *p, fe_size *s, bool in_machine, const char *what) {
  s->loc = p->tok->loc;
  bool neg = consume(p, "-");
  if (p->tok->kind == TK_INT) {
    s->value = int_value(p, next(p), neg);
    return;
  }
  if (neg || p->tok->kind != TK_IDENT)
    fail(p, error_loc(p), "expected %s (an integer or a param)", what);
  fe_token *name = next(p);
  s->is_param = true;
  s->param = find_param_tok(p, name);
  if (s->param < 0 && in_machine) {
    fe_param *prm = PUSH(p, p->prog->params, p->prog->nparams);
    prm->name = text_of(p, name);
    prm->implicit = true;
    prm->loc = name->loc;
    s->param = p->prog->nparams - 1;
  } else if (s->param < 0) {
    fe_error(p->src, name->loc, "unknown param '%.*s'", name->len, name->text);
  }
  if (s->param >= 0 && in_machine)
    p->prog->params[s->param].is_grid = true;
}

// grid = ("grid" | "Grid") "(" size ("," size)* ")" (":" ("cpu" | "gpu"))?
static void grid(parser *p, fe_grid *g, bool in_machine) {
  g->loc = p->tok->loc;
  if (!is(p, "grid") && !is(p, "Grid"))
    fail_here(p, "expected 'grid'");
  next(p);
  expect(p, "(", "expected '(' after 'grid'");
  do {
    fe_size *s = PUSH(p, g->dims, g->ndims);
    size(p, s, in_machine, "grid dimension");
  } while (consume(p, ","));
  expect(p, ")", "expected ',' or ')' in grid");
  if (consume(p, ":")) {
    if (consume(p, "gpu"))
      g->kind = FE_GPU;
    else if (!consume(p, "cpu"))
      fail_here(p, "expected 'cpu' or 'gpu' after ':'");
  }
}

// machine = "machine" IDENT "=" (grid | "[" grid ("," grid)* "]") ";"
static void machine_decl(parser *p) {
  next(p);
  fe_token *name = expect_ident(p, "expected machine name");
  fe_machine *m = PUSH(p, p->prog->machines, p->prog->nmachines);
  m->name = text_of(p, name);
  m->loc = name->loc;
  expect(p, "=", "expected '=' after machine name");
  if (consume(p, "[")) {
    m->hierarchical = true;
    do
      grid(p, PUSH(p, m->levels, m->nlevels), true);
    while (consume(p, ","));
    expect(p, "]", "expected ',' or ']' after machine level");
  } else {
    grid(p, PUSH(p, m->levels, m->nlevels), true);
  }
  expect(p, ";", "expected ';' after machine declaration");
}

/* Tokens that may make up one side of a distribution. */
static bool dist_token(const fe_token *t) {
  return t->kind == TK_IDENT || t->kind == TK_KEYWORD || t->kind == TK_INT || t->kind == TK_FLOAT ||
         fe_tok_is(t, "*");
}

static bool is_word(const fe_token *t) { return t->kind == TK_IDENT || t->kind == TK_KEYWORD; }

static void add_x(parser *p, fe_dist_level *lv, const char *s, int len, fe_loc loc) {
  lv->x = grow(p, lv->x, lv->nx, sizeof *lv->x);
  lv->xloc = grow(p, lv->xloc, lv->nx, sizeof *lv->xloc);
  lv->x[lv->nx] = NULL;
  lv->xloc[lv->nx] = loc;
  lv->nx++;
  lv->x[lv->nx - 1] = strndup(s, (size_t)len);
  if (!lv->x[lv->nx - 1])
    fail(p, loc, "out of memory");
}

static fe_ydim *add_y(parser *p, fe_dist_level *lv, fe_ydim_kind kind, fe_loc loc) {
  fe_ydim *y = PUSH(p, lv->y, lv->ny);
  y->kind = kind;
  y->xindex = -1;
  y->loc = loc;
  return y;
}

// dside = compact | entry ("," entry)*
// compact = adjacent tokens whose text, character by character, gives the entries:
//           a letter or '_' is a name, a digit a fixed coordinate, '*' replication.
// entry   = IDENT | INT | "*"     (only names on the X side)
// The side is in comma form when a ',' occurs before its terminator ("->" for X, ";" or ")"
// for Y).  Keywords are allowed as names: distribution names are local to the distribution.
// A side of one entry has no comma to write: where the side must have one entry (want: the
// tensor's order for X, the machine level's dims for Y; -1 where unknown) and is one token
// of several characters, that token is the entry (`row -> row`, `ij -> 12` on a 1-D level).
static void dist_side(parser *p, fe_dist_level *lv, bool is_x, int want) {
  const char *end_msg =
      is_x ? "expected '->' in distribution" : "expected ';' or ')' in distribution";
  bool commas = false;
  int ntok = 0;
  for (fe_token *t = p->tok; dist_token(t) || fe_tok_is(t, ","); t++)
    commas |= fe_tok_is(t, ","), ntok++;
  fe_token *one = p->tok;
  if (!commas && want == 1 && ntok == 1 && one->len > 1 && (is_word(one) || (!is_x && one->kind == TK_INT))) {
    next(p);
    if (is_x)
      add_x(p, lv, one->text, one->len, one->loc);
    else if (one->kind == TK_INT)
      add_y(p, lv, FE_Y_FIXED, one->loc)->fixed = int_value(p, one, false);
    else
      add_y(p, lv, FE_Y_NAME, one->loc)->name = text_of(p, one);
    if (is_x ? !is(p, "->") : !is(p, ";") && !is(p, ")"))
      fail_here(p, end_msg);
    return;
  }

  if (commas) {
    do {
      fe_token *t = p->tok;
      if (is_x && !is_word(t))
        fail_here(p, "expected a name on the X side of the distribution");
      if (!is_word(t) && t->kind != TK_INT && !fe_tok_is(t, "*"))
        fail_here(p, "expected a name, an integer or '*' on the Y side of the distribution");
      next(p);
      if (is_x)
        add_x(p, lv, t->text, t->len, t->loc);
      else if (t->kind == TK_INT)
        add_y(p, lv, FE_Y_FIXED, t->loc)->fixed = int_value(p, t, false);
      else if (fe_tok_is(t, "*"))
        add_y(p, lv, FE_Y_STAR, t->loc);
      else
        add_y(p, lv, FE_Y_NAME, t->loc)->name = text_of(p, t);
    } while (consume(p, ","));
    if (is_x ? !is(p, "->") : !is(p, ";") && !is(p, ")"))
      fail_here(p, end_msg);
    return;
  }

  for (const fe_token *prev = NULL; dist_token(p->tok); prev = next(p)) {
    fe_token *t = p->tok;
    if (prev && t->text != prev->text + prev->len)
      fail(p, t->loc,
           "distribution entries must be written together (as in 'xy0') or separated "
           "by commas");
    for (int k = 0; k < t->len; k++) {
      char c = t->text[k];
      fe_loc loc = {t->loc.line, t->loc.col + k};
      bool name = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
      if (is_x && !name)
        fail(p, loc, "'%c' is not a name: the X side of a distribution names tensor dimensions", c);
      if (is_x)
        add_x(p, lv, &t->text[k], 1, loc);
      else if (name)
        add_y(p, lv, FE_Y_NAME, loc)->name = strndup(&t->text[k], 1);
      else if (c >= '0' && c <= '9')
        add_y(p, lv, FE_Y_FIXED, loc)->fixed = c - '0';
      else if (c == '*')
        add_y(p, lv, FE_Y_STAR, loc);
      else
        fail(p, loc, "unexpected '%c' in distribution", c);
      if (!is_x && name && !lv->y[lv->ny - 1].name)
        fail(p, loc, "out of memory");
    }
  }
  if (is_x ? !is(p, "->") : !is(p, ";") && !is(p, ")"))
    fail_here(p, end_msg);
}

// dist = IDENT "(" dlevel (";" dlevel)* ")"
// dlevel = dside "->" dside
static void dist(parser *p, fe_dist *d, int order) {
  fe_token *name = expect_ident(p, "expected machine name after '@'");
  d->machine_name = text_of(p, name);
  int mi = fe_find_machine(p->prog, d->machine_name); /* declared before (sema says so where not) */
  const fe_machine *m = mi >= 0 ? &p->prog->machines[mi] : NULL;
  d->machine = -1;
  d->loc = name->loc;
  if (!is(p, "(")) { /* `@ M`: the compiler chooses (sema writes the default mapping) */
    d->chosen = true;
    return;
  }
  expect(p, "(", "expected '(' after machine name in distribution");
  do {
    fe_dist_level *lv = PUSH(p, d->levels, d->nlevels);
    lv->loc = p->tok->loc;
    dist_side(p, lv, true, order);
    expect(p, "->", "expected '->' in distribution");
    dist_side(p, lv, false, m && d->nlevels <= m->nlevels ? m->levels[d->nlevels - 1].ndims : -1);
  } while (consume(p, ";"));
  expect(p, ")", "expected ')' after distribution");
}

/* Set every level of t's format to f. */
static void set_formats(fe_tensor *t, fe_level_format f) {
  for (int k = 0; k < t->order; k++)
    t->formats[k] = f;
}

/* `csc` and `order` are not keywords: they are read only where a format may stand. */
static bool is_word_text(const parser *p, const char *s) {
  return p->tok->kind == TK_IDENT && (size_t)p->tok->len == strlen(s) && !memcmp(p->tok->text, s, strlen(s));
}

// mode = "order" "(" INT ("," INT)* ")": level k stores dimension INT_k (0-based), a permutation
static void mode_order(parser *p, fe_tensor *t) {
  fe_token *start = next(p); /* order */
  expect(p, "(", "expected '(' after 'order'");
  int n = 0;
  bool seen[64] = {false};
  if (t->order > 0)
    t->mode = zalloc(p, sizeof *t->mode * (size_t)t->order);
  t->mode_loc = start->loc;
  do {
    if (p->tok->kind != TK_INT)
      fail(p, p->tok->loc, "expected a dimension number (0 to %d) in the mode order", t->order - 1);
    fe_token *d = next(p);
    int64_t v = int_value(p, d, false);
    if (v < 0 || v >= t->order)
      fe_error(p->src, d->loc, "mode order: dimension %lld does not exist (%s has dimensions 0 to %d)", (long long)v, t->name,
               t->order - 1);
    else if (seen[v])
      fe_error(p->src, d->loc, "mode order: dimension %lld is given twice", (long long)v);
    else if (n < t->order) {
      seen[v] = true;
      t->mode[n] = (int)v;
    }
    n++;
  } while (consume(p, ","));
  expect(p, ")", "expected ',' or ')' in the mode order");
  if (n != t->order)
    fe_error(p->src, start->loc, "mode order has %d dimension%s but %s has order %d", n, n == 1 ? "" : "s", t->name,
             t->order);
}

// format = ("dense" | "compressed" | "csr" | "csc" | "csf" | "{" lvlfmt ("," lvlfmt)* "}") mode?
// lvlfmt = "dense" | "compressed"
static void format(parser *p, fe_tensor *t) {
  fe_token *start = p->tok;
  if (t->has_format)
    fail(p, start->loc, "format of '%s' given twice", t->name);
  t->has_format = true;
  if (consume(p, "dense") || consume(p, "csf")) {
    set_formats(t, fe_tok_is(start, "dense") ? FE_DENSE : FE_COMPRESSED);
  } else if (consume(p, "compressed")) {
    set_formats(t, FE_COMPRESSED);
  } else if (consume(p, "csr")) {
    if (t->order != 2)
      fe_error(p->src, start->loc, "csr needs a tensor of order 2, but %s has order %d", t->name,
               t->order);
    else
      t->formats[1] = FE_COMPRESSED;
  } else if (is_word_text(p, "csc")) {
    next(p);
    if (t->order != 2)
      fe_error(p->src, start->loc, "csc needs a tensor of order 2, but %s has order %d", t->name, t->order);
    else {
      t->formats[1] = FE_COMPRESSED;
      t->mode = zalloc(p, 2 * sizeof *t->mode);
      t->mode[0] = 1, t->mode[1] = 0;
      t->mode_loc = start->loc;
    }
  } else {
    expect(p, "{", "expected a format");
    int n = 0;
    do {
      fe_level_format f = FE_DENSE;
      if (!consume(p, "dense")) {
        expect(p, "compressed", "expected 'dense' or 'compressed'");
        f = FE_COMPRESSED;
      }
      if (n < t->order)
        t->formats[n] = f;
      n++;
    } while (consume(p, ","));
    expect(p, "}", "expected ',' or '}' in format");
    if (n != t->order)
      fe_error(p->src, start->loc, "format has %d level%s but %s has order %d", n,
               n == 1 ? "" : "s", t->name, t->order);
  }
  if (is_word_text(p, "order")) {
    if (t->mode)
      fail(p, p->tok->loc, "csc has its mode order already");
    mode_order(p, t);
  }
}

static bool is_type(const parser *p) {
  return is(p, "double") || is(p, "float") || is(p, "int32") || is(p, "int64");
}

static bool is_format(const parser *p) {
  return is(p, "dense") || is(p, "compressed") || is(p, "csr") || is(p, "csf") || is(p, "{") || is_word_text(p, "csc");
}

// tensor = ("tensor" | "temp") IDENT ("(" (size ("," size)*)? ")")? (type | format)* ("@" dist)? ";"
// type = "double" | "float" | "int32" | "int64"
static void tensor_decl(parser *p) {
  bool temp = fe_tok_is(next(p), "temp");
  fe_token *name = expect_ident(p, temp ? "expected temporary name" : "expected tensor name");
  fe_tensor *t = PUSH(p, p->prog->tensors, p->prog->ntensors);
  t->is_temp = temp;
  t->name = text_of(p, name);
  t->loc = name->loc;
  t->dist.machine = -1;
  if (consume(p, "(") && !consume(p, ")")) {
    do
      size(p, PUSH(p, t->dims, t->order), false, "tensor dimension");
    while (consume(p, ","));
    expect(p, ")", "expected ',' or ')' in tensor dimensions");
  }
  if (t->order > 0)
    t->formats = zalloc(p, sizeof *t->formats * (size_t)t->order);
  bool has_type = false;
  while (is_type(p) || is_format(p)) {
    if (is_format(p)) {
      format(p, t);
      continue;
    }
    if (has_type)
      fail(p, p->tok->loc, "type of '%s' given twice", t->name);
    has_type = true;
    fe_token *ty = next(p);
    t->type = fe_tok_is(ty, "float")   ? FE_FLOAT
              : fe_tok_is(ty, "int32") ? FE_INT32
              : fe_tok_is(ty, "int64") ? FE_INT64
                                       : FE_DOUBLE;
  }
  if (consume(p, "@")) {
    t->has_dist = true;
    dist(p, &t->dist, t->order);
    if (is_word_text(p, "balanced")) { /* not a keyword: read only after a distribution */
      t->balanced = true;
      t->balance_loc = next(p)->loc;
      if (is_word_text(p, "by")) {
        next(p);
        fe_token *src = expect_ident(p, "expected the name of a balanced tensor after 'balanced by'");
        t->balance_by = text_of(p, src);
        t->balance_by_loc = src->loc;
      }
    }
  }
  expect(p, ";", temp ? "expected ';' after temporary declaration" : "expected ';' after tensor declaration");
}

/* ---- statements and expressions ----------------------------------------------------- */

// access = IDENT ("(" (IDENT ("," IDENT)*)? ")")?
static void access(parser *p, fe_access *a, const char *msg) {
  fe_token *name = expect_ident(p, msg);
  a->tname = text_of(p, name);
  a->tensor = -1;
  a->loc = name->loc;
  if (!consume(p, "("))
    return;
  a->parens = true;
  if (consume(p, ")"))
    return;
  do {
    /* an expression in the parentheses: a call of a function that does not exist */
    const fe_token *q = p->tok + (p->tok->kind == TK_IDENT);
    if (p->tok->kind != TK_KEYWORD && p->tok->kind != TK_EOF && q->kind != TK_EOF &&
        (p->tok->kind != TK_IDENT || fe_tok_is(q, "(") || fe_tok_is(q, "+") || fe_tok_is(q, "-") ||
         fe_tok_is(q, "*") || fe_tok_is(q, "/")) &&
        fe_find_func(a->tname, strlen(a->tname)) < 0)
      fail(p, p->tok->loc,
           "expected an index variable: %s(...) reads a tensor, at index variables only (no expressions); the "
           "functions are sqrt, exp, log, abs, erf, pow, min and max",
           a->tname);
    fe_token *v = expect_ident(p, "expected an index variable");
    a->idx = grow(p, a->idx, a->nidx, sizeof *a->idx);
    a->idxloc = grow(p, a->idxloc, a->nidx, sizeof *a->idxloc);
    a->idx[a->nidx] = NULL;
    a->idxloc[a->nidx] = v->loc;
    a->idx[a->nidx++] = text_of(p, v);
  } while (consume(p, ","));
  expect(p, ")", "expected ',' or ')' after index variable");
}

static int expr(parser *p, fe_expr **slot);
static void free_expr(fe_expr *e);

static fe_expr *new_expr(parser *p, fe_expr **slot, fe_expr_kind kind, fe_loc loc) {
  fe_expr *e = zalloc(p, sizeof *e);
  e->kind = kind;
  e->loc = loc;
  e->a = *slot; /* a binary node adopts what the slot held as its left operand */
  *slot = e;
  return e;
}

static int check_depth(parser *p, int depth, fe_loc loc) {
  if (depth > MAX_DEPTH)
    fail(p, loc, "expression is too deeply nested (more than %d levels: a sum or product of more than %d terms "
                 "counts one level a term)", MAX_DEPTH, MAX_DEPTH);
  return depth;
}

static int max(int a, int b) { return a > b ? a : b; }

/* Whether a tensor named like t is declared before it: then NAME(...) is an access even
 * where NAME is also a function (function names are not reserved, LANGUAGE.md section 2). */
static bool declared_tensor(const parser *p, const fe_token *t) {
  for (int k = 0; k < p->prog->ntensors; k++)
    if (tok_eq(t, p->prog->tensors[k].name))
      return true;
  return false;
}

// call = FUNC "(" (expr ("," expr)*)? ")"
// The first two arguments go to a and b; a wrong count is reported at the name (the syntax
// stays intact, so other errors still show), an argument beyond the second replacing the
// second so that nothing is parsed outside the tree.
static int call(parser *p, fe_expr **slot, fe_func f) {
  fe_token *name = next(p);
  fe_expr *e = new_expr(p, slot, FE_E_CALL, name->loc);
  e->a = NULL;
  e->func = f;
  next(p); /* "(" */
  int h = 0;
  if (!is(p, ")")) {
    do {
      fe_expr **arg = &e->a;
      if (e->nargs >= 1) {
        arg = &e->b;
        free_expr(e->b);
        e->b = NULL;
      }
      h = max(h, expr(p, arg));
      e->nargs++;
    } while (consume(p, ","));
  }
  expect(p, ")", "expected ',' or ')' after a function argument");
  int want = fe_func_arity(f);
  if (e->nargs != want)
    fe_error(p->src, name->loc, "%s takes %d argument%s, but %d %s given", fe_func_name(f), want,
             want == 1 ? "" : "s", e->nargs, e->nargs == 1 ? "is" : "are");
  return check_depth(p, h + 1, name->loc);
}

// primary = "(" expr ")" | INT | FLOAT | call | access
// Each expression function builds its tree in *slot and returns the tree's height.
static int cond_or(parser *p, fe_expr **slot);
static int primary(parser *p, fe_expr **slot) {
  if (consume(p, "(")) {
    int h = p->in_cond ? cond_or(p, slot) : expr(p, slot);
    expect(p, ")", "expected ')'");
    return h;
  }
  fe_token *t = p->tok;
  if (t->kind == TK_INT || t->kind == TK_FLOAT) {
    fe_expr *e = new_expr(p, slot, FE_E_NUM, t->loc);
    e->num = t->fval;
    e->is_int = t->kind == TK_INT;
    e->ival = e->is_int ? int_value(p, t, false) : 0;
    e->text = text_of(p, next(p));
    return 1;
  }
  if (t->kind != TK_IDENT && t->kind != TK_KEYWORD)
    fail_here(p, "expected an expression");
  int f = t->kind == TK_IDENT && fe_tok_is(&t[1], "(") ? fe_find_func(t->text, (size_t)t->len) : -1;
  if (f >= 0 && !declared_tensor(p, t))
    return call(p, slot, (fe_func)f);
  fe_expr *e = new_expr(p, slot, FE_E_ACCESS, t->loc);
  access(p, &e->acc, "expected an expression");
  return 1;
}

// unary = "-" unary | primary
static int unary(parser *p, fe_expr **slot) {
  if (++p->nesting > MAX_NESTING)
    fail(p, p->tok->loc, "expression is too deeply nested (more than %d levels)", MAX_NESTING);
  int h;
  if (is(p, "-") && p->tok[1].kind == TK_INT && p->tok[1].min64) {
    /* -9223372036854775808: one literal, INT64_MIN (its magnitude alone does not fit) */
    fe_expr *e = new_expr(p, slot, FE_E_NUM, next(p)->loc);
    e->num = -9223372036854775808.0;
    e->is_int = true;
    e->ival = INT64_MIN;
    next(p);
    e->text = strdup("-9223372036854775808");
    if (!e->text)
      fail(p, e->loc, "out of memory");
    h = 1;
  } else if (is(p, "-")) {
    fe_expr *e = new_expr(p, slot, FE_E_NEG, next(p)->loc);
    h = check_depth(p, unary(p, &e->a) + 1, e->loc);
  } else {
    h = primary(p, slot);
  }
  p->nesting--;
  return h;
}

// mul = unary (("*" | "/") unary)*
static int mul(parser *p, fe_expr **slot) {
  int h = unary(p, slot);
  while (is(p, "*") || is(p, "/")) {
    fe_token *op = next(p);
    fe_expr *e = new_expr(p, slot, fe_tok_is(op, "*") ? FE_E_MUL : FE_E_DIV, op->loc);
    h = check_depth(p, max(h, unary(p, &e->b)) + 1, op->loc);
  }
  return h;
}

// expr = mul (("+" | "-") mul)*
static int expr(parser *p, fe_expr **slot) {
  int h = mul(p, slot);
  while (is(p, "+") || is(p, "-")) {
    fe_token *op = next(p);
    fe_expr *e = new_expr(p, slot, fe_tok_is(op, "+") ? FE_E_ADD : FE_E_SUB, op->loc);
    h = check_depth(p, max(h, mul(p, &e->b)) + 1, op->loc);
  }
  return h;
}

// A loop's condition (LANGUAGE.md section 9); sema checks which operands are conditions and
// which are values.
// cmp = expr (("<" | "<=" | ">" | ">=" | "==" | "!=") expr)?
static int cond_cmp(parser *p, fe_expr **slot) {
  int h = expr(p, slot);
  static const char *const ops[] = {"<", "<=", ">", ">=", "==", "!="};
  static const fe_expr_kind kinds[] = {FE_E_LT, FE_E_LE, FE_E_GT, FE_E_GE, FE_E_EQ, FE_E_NE};
  for (int k = 0; k < 6; k++)
    if (is(p, ops[k])) {
      fe_expr *e = new_expr(p, slot, kinds[k], next(p)->loc);
      h = check_depth(p, max(h, expr(p, &e->b)) + 1, e->loc);
      break;
    }
  return h;
}

// not = "!" not | cmp
static int cond_not(parser *p, fe_expr **slot) {
  if (++p->nesting > MAX_NESTING)
    fail(p, p->tok->loc, "condition is too deeply nested (more than %d levels)", MAX_NESTING);
  int h;
  if (is(p, "!")) {
    fe_expr *e = new_expr(p, slot, FE_E_NOT, next(p)->loc);
    h = check_depth(p, cond_not(p, &e->a) + 1, e->loc);
  } else {
    h = cond_cmp(p, slot);
  }
  p->nesting--;
  return h;
}

// and = not ("&&" not)*
static int cond_and(parser *p, fe_expr **slot) {
  int h = cond_not(p, slot);
  while (is(p, "&&")) {
    fe_expr *e = new_expr(p, slot, FE_E_AND, next(p)->loc);
    h = check_depth(p, max(h, cond_not(p, &e->b)) + 1, e->loc);
  }
  return h;
}

// or = and ("||" and)*
static int cond_or(parser *p, fe_expr **slot) {
  int h = cond_and(p, slot);
  while (is(p, "||")) {
    fe_expr *e = new_expr(p, slot, FE_E_OR, next(p)->loc);
    h = check_depth(p, max(h, cond_and(p, &e->b)) + 1, e->loc);
  }
  return h;
}

// arg = "{" IDENT ("," IDENT)* "}" | grid | IDENT "[" INT "]" | INT | IDENT
//     | expr                          (the first argument of precompute)
static void arg(parser *p, fe_arg *a, bool is_expr) {
  fe_token *t = p->tok;
  a->loc = t->loc;
  if (is_expr) {
    a->kind = FE_ARG_EXPR;
    expr(p, &a->expr);
  } else if (consume(p, "{")) {
    a->kind = FE_ARG_LIST;
    do {
      fe_token *item = expect_ident(p, "expected a name in the list");
      fe_arg *it = PUSH(p, a->items, a->nitems);
      it->kind = FE_ARG_IDENT;
      it->loc = item->loc;
      it->name = text_of(p, item);
    } while (consume(p, ","));
    expect(p, "}", "expected ',' or '}' in the list");
  } else if (is(p, "grid") || is(p, "Grid")) {
    a->kind = FE_ARG_GRID;
    grid(p, &a->grid, false);
  } else if (t->kind == TK_INT) {
    a->kind = FE_ARG_INT;
    a->ival = int_value(p, next(p), false);
  } else {
    a->kind = FE_ARG_IDENT;
    a->name = text_of(p, expect_ident(p, "expected a schedule argument"));
    if (consume(p, "[")) {
      a->kind = FE_ARG_LEVEL;
      if (p->tok->kind != TK_INT)
        fail_here(p, "expected a machine level number");
      a->ival = int_value(p, next(p), false);
      expect(p, "]", "expected ']' after machine level");
    }
  }
}

// command = "." IDENT "(" (arg ("," arg)*)? ")"
static void command(parser *p, fe_command *c) {
  next(p);
  fe_token *name = expect_ident(p, "expected a schedule command name after '.'");
  c->name = text_of(p, name);
  c->loc = name->loc;
  expect(p, "(", "expected '(' after schedule command name");
  if (consume(p, ")"))
    return;
  do {
    bool is_expr = c->nargs == 0 && strcmp(c->name, "precompute") == 0;
    arg(p, PUSH(p, c->args, c->nargs), is_expr);
  } while (consume(p, ","));
  expect(p, ")", "expected ',' or ')' after schedule argument");
}

// stmt = access ("=" | "+=" | "-=") expr command* ";"
static void stmt(parser *p) {
  fe_stmt *s = PUSH(p, p->prog->stmts, p->prog->nstmts);
  s->loc = p->tok->loc;
  access(p, &s->lhs, "expected a declaration or statement");
  if (consume(p, "+="))
    s->accumulate = true;
  else if (consume(p, "-="))
    s->accumulate = s->subtract = true;
  else
    expect(p, "=", "expected '=', '+=' or '-=' after the left side of the statement");
  expr(p, &s->rhs);
  while (is(p, "."))
    command(p, PUSH(p, s->cmds, s->ncmds));
  expect(p, ";", "expected ';' after statement");
}

static void items(parser *p, fe_item **list, int *n, bool in_loop);

// loop = "repeat" ("-"? INT | FLOAT | IDENT) ("until" "(" or ")")? "{" item* "}"
static void loop(parser *p, fe_item *it) {
  it->kind = FE_ITEM_LOOP;
  it->loc = next(p)->loc;
  it->number = ++p->prog->nloops;
  it->bound.loc = p->tok->loc;
  if (p->tok->kind == TK_FLOAT)
    fail_here(p, "the bound of a loop must be an integer (a literal or an integer param)");
  if (p->tok->kind == TK_IDENT && declared_tensor(p, p->tok))
    fail(p, p->tok->loc, "the bound of a loop must be an integer literal or param, but '%.*s' is a tensor", p->tok->len,
         p->tok->text);
  size(p, &it->bound, false, "a loop bound");
  if (consume(p, "until")) {
    expect(p, "(", "expected '(' after 'until'");
    p->in_cond = true;
    cond_or(p, &it->cond);
    p->in_cond = false;
    expect(p, ")", "expected ')' after the loop's condition");
  }
  expect(p, "{", "expected '{' to open the loop's body");
  if (++p->loops > MAX_LOOPS)
    fail(p, it->loc, "loops are nested too deeply (more than %d levels)", MAX_LOOPS);
  items(p, &it->items, &it->nitems, true);
  p->loops--;
  expect(p, "}", "expected '}' to close the loop's body");
}

// item = param | machine | tensor | temp | loop | stmt   (declarations only at the top level)
static void items(parser *p, fe_item **list, int *n, bool in_loop) {
  while (p->tok->kind != TK_EOF && !(in_loop && is(p, "}"))) {
    if (is(p, "param") || is(p, "machine") || is(p, "tensor") || is(p, "temp")) {
      if (in_loop)
        fail(p, p->tok->loc, "declarations belong at the top level of the program, not inside a loop");
      if (is(p, "param"))
        param_decl(p);
      else if (is(p, "machine"))
        machine_decl(p);
      else
        tensor_decl(p);
    } else if (is(p, "repeat")) {
      loop(p, PUSH(p, *list, *n));
    } else {
      fe_item *it = PUSH(p, *list, *n);
      it->kind = FE_ITEM_STMT;
      it->stmt = p->prog->nstmts;
      it->loc = p->tok->loc;
      stmt(p);
    }
  }
}

// program = item* EOF
static void program(parser *p) { items(p, &p->prog->items, &p->prog->nitems, false); }

/* ---- mode orders: tensors in storage order ------------------------------------------ */
/* t(i0, ..., ir-1) with mode m becomes t(i_m[0], ..., i_m[r-1]): its dims, the names of its
 * distribution's X sides and every access's indices, so that the compiler sees a row-major
 * tensor whose level k is dimension k.  Accesses with the wrong number of indices are left
 * for sema to report. */
static bool permute_strings(char **x, fe_loc *loc, int n, const int *m) {
  char *xs[64];
  fe_loc ls[64];
  if (n > 64) return false;
  for (int k = 0; k < n; k++) xs[k] = x[m[k]], ls[k] = loc ? loc[m[k]] : (fe_loc){0, 0};
  for (int k = 0; k < n; k++) {
    x[k] = xs[k];
    if (loc) loc[k] = ls[k];
  }
  return true;
}

static void mode_access(fe_access *a, const fe_tensor *t) {
  if (a->tname && !strcmp(a->tname, t->name) && a->nidx == t->order) permute_strings(a->idx, a->idxloc, a->nidx, t->mode);
}

static void mode_expr(fe_expr *e, const fe_tensor *t) {
  if (!e) return;
  if (e->kind == FE_E_ACCESS) mode_access(&e->acc, t);
  mode_expr(e->a, t);
  mode_expr(e->b, t);
}

static void apply_modes(fe_program *prog) {
  for (int q = 0; q < prog->ntensors; q++) {
    fe_tensor *t = &prog->tensors[q];
    if (!t->mode || t->order < 2) continue;
    bool sparse = false, identity = true;
    for (int k = 0; k < t->order; k++) sparse |= t->formats[k] == FE_COMPRESSED, identity &= t->mode[k] == k;
    if (!sparse) {
      fe_error(prog->src, t->mode_loc, "a mode order needs a sparse format (a compressed level); %s is dense", t->name);
      continue;
    }
    if (identity) { /* row-major after all */
      free(t->mode);
      t->mode = NULL;
      continue;
    }
    fe_size d[64];
    if (t->order > 64) continue;
    for (int k = 0; k < t->order; k++) d[k] = t->dims[t->mode[k]];
    memcpy(t->dims, d, (size_t)t->order * sizeof *d);
    for (int l = 0; t->has_dist && l < t->dist.nlevels; l++)
      if (t->dist.levels[l].nx == t->order) permute_strings(t->dist.levels[l].x, t->dist.levels[l].xloc, t->order, t->mode);
    for (int s = 0; s < prog->nstmts; s++) {
      fe_stmt *st = &prog->stmts[s];
      mode_access(&st->lhs, t);
      mode_expr(st->rhs, t);
      for (int c = 0; c < st->ncmds; c++)
        for (int a = 0; a < st->cmds[c].nargs; a++)
          if (st->cmds[c].args[a].kind == FE_ARG_EXPR) mode_expr(st->cmds[c].args[a].expr, t);
    }
  }
}

fe_program *fe_parse(fe_source *src) {
  int ntokens, nerrors = src->nerrors;
  fe_token *toks = fe_tokenize(src, &ntokens);
  if (!toks)
    return NULL;
  fe_program *prog = calloc(1, sizeof *prog);
  if (!prog) {
    fe_error(src, (fe_loc){0, 0}, "out of memory");
    free(toks);
    return NULL;
  }
  prog->src = src;
  /* Only the fields below the setjmp change afterwards, so the others stay valid after a
   * longjmp. */
  parser p = {.src = src, .tok = toks, .first = toks, .prog = prog};
  if (setjmp(p.fail) == 0)
    program(&p);
  free(toks);
  if (src->nerrors == nerrors)
    apply_modes(prog);
  if (src->nerrors != nerrors) {
    fe_program_free(prog);
    return NULL;
  }
  return prog;
}

/* ---- freeing and look-ups ----------------------------------------------------------- */

static void free_access(fe_access *a) {
  free(a->tname);
  for (int k = 0; k < a->nidx; k++)
    free(a->idx[k]);
  free(a->idx);
  free(a->idxloc);
}

static void free_expr(fe_expr *e) {
  if (!e)
    return;
  free_access(&e->acc);
  free(e->text);
  free_expr(e->a);
  free_expr(e->b);
  free(e);
}

static void free_arg(fe_arg *a) {
  free(a->name);
  for (int k = 0; k < a->nitems; k++)
    free_arg(&a->items[k]);
  free(a->items);
  free(a->grid.dims);
  free_expr(a->expr);
}

static void free_dist(fe_dist *d) {
  free(d->machine_name);
  for (int l = 0; l < d->nlevels; l++) {
    fe_dist_level *lv = &d->levels[l];
    for (int k = 0; k < lv->nx; k++)
      free(lv->x[k]);
    for (int k = 0; k < lv->ny; k++)
      free(lv->y[k].name);
    free(lv->x);
    free(lv->xloc);
    free(lv->y);
  }
  free(d->levels);
}

static void free_items(fe_item *list, int n) {
  for (int k = 0; k < n; k++) {
    free_expr(list[k].cond);
    free_items(list[k].items, list[k].nitems);
  }
  free(list);
}

void fe_program_free(fe_program *prog) {
  if (!prog)
    return;
  free_items(prog->items, prog->nitems);
  for (int k = 0; k < prog->nparams; k++)
    free(prog->params[k].name), free(prog->params[k].ftext);
  for (int k = 0; k < prog->nmachines; k++) {
    fe_machine *m = &prog->machines[k];
    for (int l = 0; l < m->nlevels; l++)
      free(m->levels[l].dims);
    free(m->name);
    free(m->levels);
  }
  for (int k = 0; k < prog->ntensors; k++) {
    fe_tensor *t = &prog->tensors[k];
    free(t->name);
    free((char *)t->balance_by);
    free(t->dims);
    free(t->formats);
    free(t->mode);
    free_dist(&t->dist);
  }
  for (int k = 0; k < prog->nstmts; k++) {
    fe_stmt *s = &prog->stmts[k];
    free_access(&s->lhs);
    free_expr(s->rhs);
    for (int c = 0; c < s->ncmds; c++) {
      for (int a = 0; a < s->cmds[c].nargs; a++)
        free_arg(&s->cmds[c].args[a]);
      free(s->cmds[c].name);
      free(s->cmds[c].args);
    }
    free(s->cmds);
  }
  free(prog->params);
  free(prog->machines);
  free(prog->tensors);
  free(prog->stmts);
  free(prog);
}

static const struct {
  const char *name;
  int arity;
  bool integer;
} funcs[FE_F_COUNT] = {
    [FE_F_SQRT] = {"sqrt", 1, false}, [FE_F_EXP] = {"exp", 1, false}, [FE_F_LOG] = {"log", 1, false},
    [FE_F_ABS] = {"abs", 1, true},    [FE_F_ERF] = {"erf", 1, false}, [FE_F_POW] = {"pow", 2, false},
    [FE_F_MIN] = {"min", 2, true},    [FE_F_MAX] = {"max", 2, true},
};

int fe_find_func(const char *name, size_t len) {
  for (int k = 0; k < FE_F_COUNT; k++)
    if (strlen(funcs[k].name) == len && !memcmp(funcs[k].name, name, len))
      return k;
  return -1;
}

const char *fe_func_name(fe_func f) { return f >= 0 && f < FE_F_COUNT ? funcs[f].name : "?"; }
int fe_func_arity(fe_func f) { return f >= 0 && f < FE_F_COUNT ? funcs[f].arity : 0; }
bool fe_func_integer(fe_func f) { return f >= 0 && f < FE_F_COUNT && funcs[f].integer; }

int fe_find_param(const fe_program *prog, const char *name) {
  for (int k = 0; k < prog->nparams; k++)
    if (strcmp(prog->params[k].name, name) == 0)
      return k;
  return -1;
}

int fe_find_machine(const fe_program *prog, const char *name) {
  for (int k = 0; k < prog->nmachines; k++)
    if (strcmp(prog->machines[k].name, name) == 0)
      return k;
  return -1;
}

bool fe_tensor_sparse(const fe_tensor *t) {
  for (int x = 0; t->formats && x < t->order; x++)
    if (t->formats[x] == FE_COMPRESSED) return true;
  return false;
}

static int split_dim(const fe_tensor *t, int g) { /* the tensor dim t partitions over grid dim g, or -1 */
  if (!t->has_dist || t->dist.nlevels < 1 || g >= t->dist.levels[0].ny) return -1;
  const fe_ydim *y = &t->dist.levels[0].y[g];
  return y->kind == FE_Y_NAME ? y->xindex : -1;
}

int fe_nsplits(const fe_program *prog) {
  int n = 0;
  for (int t = 0; t < prog->ntensors; t++)
    for (int g = 0; prog->tensors[t].balance == t + 1 && g < FE_MAX_DIMS; g++) n += split_dim(&prog->tensors[t], g) >= 0;
  return n;
}

int fe_split_of(const fe_program *prog, int t, int g) {
  if (t < 0 || t >= prog->ntensors) return -1;
  int src = prog->tensors[t].balance - 1;
  if (src < 0 || split_dim(&prog->tensors[t], g) < 0 || split_dim(&prog->tensors[src], g) < 0) return -1;
  int id = 0;
  for (int u = 0; u < prog->ntensors; u++)
    for (int h = 0; prog->tensors[u].balance == u + 1 && h < FE_MAX_DIMS; h++) {
      if (split_dim(&prog->tensors[u], h) < 0) continue;
      if (u == src && h == g) return id;
      id++;
    }
  return -1;
}

void fe_split_info(const fe_program *prog, int id, int *tensor, int *gdim, int *tdim) {
  *tensor = *gdim = *tdim = -1;
  for (int u = 0; u < prog->ntensors; u++)
    for (int h = 0; prog->tensors[u].balance == u + 1 && h < FE_MAX_DIMS; h++) {
      int x = split_dim(&prog->tensors[u], h);
      if (x >= 0 && id-- == 0) {
        *tensor = u, *gdim = h, *tdim = x;
        return;
      }
    }
}

int fe_find_tensor(const fe_program *prog, const char *name) {
  for (int k = 0; k < prog->ntensors; k++)
    if (strcmp(prog->tensors[k].name, name) == 0)
      return k;
  return -1;
}
