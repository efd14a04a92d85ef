/* sym.c -- symbolic integer expressions with a canonical form.
 *
 * Bounds, ownership blocks and message sizes are all built from these, so the same formula
 * is printed in the plan, emitted as C and compared by the pattern analysis.  Comparison is
 * structural on canonical forms: a sum is a sorted linear combination of atoms with
 * integer coefficients and a trailing constant; products of atoms are ordered. */
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

/* ---- arenas ----------------------------------------------------------------------------- */
typedef struct arena_block {
  struct arena_block *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} arena_block;

struct ir_arena {
  arena_block *blocks;
  size_t used;  /* bytes handed out */
  size_t limit; /* 0: none */
};

/* The process's default arena, the current one, and the innermost recovery point. */
static ir_arena default_arena;
static ir_arena *current = &default_arena;
static ir_scope *scope;

ir_arena *ir_arena_new(void) { return calloc(1, sizeof(ir_arena)); }

static void free_blocks(ir_arena *a) { ir_arena_release(a, (ir_mark){0}); }

void ir_arena_delete(ir_arena *a) {
  if (!a) return;
  free_blocks(a);
  if (a != &default_arena) free(a);
}

void ir_arena_set_limit(ir_arena *a, size_t bytes) { a->limit = bytes; }

ir_mark ir_arena_mark(const ir_arena *a) {
  return (ir_mark){.block = a->blocks, .block_used = a->blocks ? a->blocks->used : 0, .used = a->used};
}

void ir_arena_release(ir_arena *a, ir_mark m) {
  /* blocks are prepended: those before the marked one are newer */
  while (a->blocks && a->blocks != m.block) {
    arena_block *next = a->blocks->next;
    free(a->blocks);
    a->blocks = next;
  }
  if (a->blocks) a->blocks->used = m.block_used;
  a->used = m.used;
}
size_t ir_arena_used(const ir_arena *a) { return a->used; }

void ir_arena_free(void) { free_blocks(current); }

void ir_scope_enter(ir_scope *sc, ir_arena *a) {
  sc->arena = a ? a : &default_arena;
  sc->prev_arena = current;
  sc->prev = scope;
  current = sc->arena;
  scope = sc;
}

void ir_scope_leave(ir_scope *sc) {
  current = sc->prev_arena;
  scope = sc->prev;
}

/* No memory: back to the innermost scope's recovery point (ir.h says why a failure outside
 * every scope ends the process). */
static _Noreturn void out_of_memory(void) {
  ir_scope *sc = scope;
  if (!sc) {
    fputs("distalc: out of memory\n", stderr);
    abort();
  }
  ir_scope_leave(sc);
  longjmp(sc->oom, 1);
}

void *ir_alloc(size_t n) {
  ir_arena *a = current;
  n = (n + 15) & ~(size_t)15;
  if (a->limit && (n > a->limit || a->used > a->limit - n)) out_of_memory();
  if (!a->blocks || a->blocks->used + n > a->blocks->cap) {
    size_t cap = n > 65536 ? n : 65536;
    arena_block *b = malloc(sizeof *b + cap);
    if (!b) out_of_memory();
    b->next = a->blocks, b->used = 0, b->cap = cap;
    a->blocks = b;
  }
  void *p = a->blocks->data + a->blocks->used;
  a->blocks->used += n;
  a->used += n;
  memset(p, 0, n);
  return p;
}

void *ir_reserve(void *arr, int n, int need, int *cap, size_t size) {
  if (need <= *cap) return arr;
  int grown = 2 * need;
  void *p = ir_alloc((size_t)grown * size);
  if (n > 0) memcpy(p, arr, (size_t)n * size);
  *cap = grown;
  return p;
}

char *ir_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = ir_alloc(n);
  memcpy(p, s, n);
  return p;
}

/* ---- construction ------------------------------------------------------------------------ */
static sym *mk(sym_kind k, const sym *a, const sym *b) {
  sym *s = ir_alloc(sizeof *s);
  s->kind = k, s->a = a, s->b = b;
  return s;
}

const sym *sym_const(int64_t c) {
  sym *s = mk(SYM_CONST, NULL, NULL);
  s->c = c;
  return s;
}
static const sym *atom(sym_kind k, int id) {
  sym *s = mk(k, NULL, NULL);
  s->id = id;
  return s;
}
const sym *sym_param(int id) { return atom(SYM_PARAM, id); }
const sym *sym_coord(int d) { return atom(SYM_COORD, d); }
const sym *sym_var(int id) { return atom(SYM_VAR, id); }

const sym *sym_split(int id, const sym *a, const sym *E, const sym *G) {
  if (a->kind == SYM_CONST && a->c <= 0) return sym_const(0);
  sym *s = mk(SYM_SPLIT, a, sym_min(NULL, E, sym_mul(a, sym_ceildiv(E, G))));
  s->id = id;
  return s;
}

const sym *sym_from_size(const fe_size *s) {
  return s->is_param ? sym_param(s->param) : sym_const(s->value);
}

bool sym_is_const(const sym *a, int64_t *value) {
  if (a->kind != SYM_CONST) return false;
  if (value) *value = a->c;
  return true;
}

int sym_compare(const sym *a, const sym *b) {
  if (a == b) return 0;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  switch (a->kind) {
  case SYM_CONST: return a->c < b->c ? -1 : a->c > b->c;
  case SYM_PARAM:
  case SYM_COORD:
  case SYM_VAR: return a->id < b->id ? -1 : a->id > b->id;
  case SYM_SPLIT:
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    return sym_compare(a->a, b->a);
  default: {
    int c = sym_compare(a->a, b->a);
    return c ? c : sym_compare(a->b, b->b);
  }
  }
}

bool sym_equal(const sym *a, const sym *b) { return sym_compare(a, b) == 0; }

/* Linear forms: sum of coef * atom + constant.  A form lives only while one expression is
 * built, so its first terms are kept in the form itself, not in the arena: most forms have a
 * few terms, and the search builds millions of them. */
enum { LIN_INLINE = 16 };
typedef struct {
  int n, cap;
  int64_t *coef;
  const sym **atom;
  int64_t k;
  int64_t coef0[LIN_INLINE];
  const sym *atom0[LIN_INLINE];
} linear;

#define LINEAR(l) linear l = {.coef = l.coef0, .atom = l.atom0, .cap = LIN_INLINE}

static void lin_push(linear *l, int64_t c, const sym *a) {
  if (l->n == l->cap) {
    int cap = 2 * l->cap;
    int64_t *nc = ir_alloc(cap * sizeof *nc);
    const sym **na = ir_alloc(cap * sizeof *na);
    if (l->n) memcpy(nc, l->coef, l->n * sizeof *nc), memcpy(na, l->atom, l->n * sizeof *na);
    l->coef = nc, l->atom = na, l->cap = cap;
  }
  l->coef[l->n] = c, l->atom[l->n] = a, l->n++;
}

/* Coefficients wrap around only for absurd inputs; wrapping arithmetic keeps that defined. */
static int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

static void lin_collect(linear *l, const sym *e, int64_t c) {
  if (e->kind == SYM_CONST) l->k = wadd(l->k, wmul(c, e->c));
  else if (e->kind == SYM_ADD) lin_collect(l, e->a, c), lin_collect(l, e->b, c);
  else if (e->kind == SYM_MUL && e->a->kind == SYM_CONST) lin_collect(l, e->b, wmul(c, e->a->c));
  else lin_push(l, c, e);
}

static const sym *lin_build(linear *l) {
  /* insertion sort by atom, merging equal atoms */
  for (int i = 1; i < l->n; i++)
    for (int j = i; j > 0 && sym_compare(l->atom[j - 1], l->atom[j]) > 0; j--) {
      int64_t tc = l->coef[j];
      const sym *ta = l->atom[j];
      l->coef[j] = l->coef[j - 1], l->atom[j] = l->atom[j - 1];
      l->coef[j - 1] = tc, l->atom[j - 1] = ta;
    }
  const sym *r = NULL;
  for (int i = 0; i < l->n;) {
    int64_t c = l->coef[i];
    int j = i + 1;
    while (j < l->n && sym_equal(l->atom[i], l->atom[j])) c = wadd(c, l->coef[j++]);
    if (c != 0) {
      const sym *t = c == 1 ? l->atom[i] : mk(SYM_MUL, sym_const(c), l->atom[i]);
      r = r ? mk(SYM_ADD, r, t) : t;
    }
    i = j;
  }
  if (!r) return sym_const(l->k);
  return l->k ? mk(SYM_ADD, r, sym_const(l->k)) : r;
}

const sym *sym_add(const sym *a, const sym *b) {
  LINEAR(l);
  lin_collect(&l, a, 1);
  lin_collect(&l, b, 1);
  return lin_build(&l);
}

const sym *sym_sub(const sym *a, const sym *b) {
  LINEAR(l);
  lin_collect(&l, a, 1);
  lin_collect(&l, b, -1);
  return lin_build(&l);
}

/* The leaves of a tree of products. */
static int count_factors(const sym *e) {
  return e->kind == SYM_MUL ? count_factors(e->a) + count_factors(e->b) : 1;
}

const sym *sym_mul(const sym *a, const sym *b) {
  if (b->kind == SYM_CONST && a->kind != SYM_CONST) {
    const sym *t = a;
    a = b, b = t;
  }
  if (a->kind == SYM_CONST) {
    int64_t prod;
    if (b->kind == SYM_CONST && !__builtin_mul_overflow(a->c, b->c, &prod)) return sym_const(prod);
    if (b->kind == SYM_CONST) return mk(SYM_MUL, a, b);
    if (a->c == 0) return sym_const(0);
    if (a->c == 1) return b;
    LINEAR(l);
    lin_collect(&l, b, a->c);
    return lin_build(&l);
  }
  /* a product of atoms: pull the constant factors out, sort the others, fold left */
  int nf = 0, nt = 2, cap = count_factors(a) + count_factors(b);
  int64_t k = 1;
  const sym **f = ir_alloc(cap * sizeof *f), **todo = ir_alloc((cap + 2) * sizeof *todo);
  todo[0] = a, todo[1] = b;
  while (nt) {
    const sym *x = todo[--nt];
    if (x->kind == SYM_MUL) {
      todo[nt++] = x->a, todo[nt++] = x->b;
    } else if (x->kind == SYM_CONST) {
      k = wmul(k, x->c);
    } else {
      f[nf++] = x;
    }
  }
  for (int i = 1; i < nf; i++)
    for (int j = i; j > 0 && sym_compare(f[j - 1], f[j]) > 0; j--) {
      const sym *t = f[j];
      f[j] = f[j - 1], f[j - 1] = t;
    }
  const sym *r = f[0];
  for (int i = 1; i < nf; i++) r = mk(SYM_MUL, r, f[i]);
  if (k == 0) return sym_const(0);
  if (k == 1) return r;
  return mk(SYM_MUL, sym_const(k), r);
}

/* Numeric lower bound of an expression from the ranges of atoms; false if unknown. */
static bool lower_bound(const sym *e, int64_t *lb);
static bool upper_is_known(const sym *e) { return e->kind == SYM_CONST; }

static bool lower_bound(const sym *e, int64_t *lb) {
  int64_t x, y;
  switch (e->kind) {
  case SYM_CONST: *lb = e->c; return true;
  case SYM_PARAM: *lb = 1; return true;
  case SYM_VAR:
  case SYM_COORD:
  case SYM_SPLIT:
  case SYM_MOD: *lb = 0; return true;
  case SYM_ADD: {
    LINEAR(l);
    lin_collect(&l, e, 1);
    int64_t sum = l.k;
    for (int i = 0; i < l.n; i++) {
      if (l.coef[i] < 0) {
        if (!upper_is_known(l.atom[i])) return false;
        sum += l.coef[i] * l.atom[i]->c;
      } else {
        if (!lower_bound(l.atom[i], &x)) return false;
        sum += l.coef[i] * x;
      }
    }
    *lb = sum;
    return true;
  }
  case SYM_MUL:
    if (e->a->kind == SYM_CONST && e->a->c < 0) return false;
    if (!lower_bound(e->a, &x) || !lower_bound(e->b, &y) || x < 0 || y < 0) return false;
    *lb = x * y;
    return true;
  case SYM_FLOORDIV:
  case SYM_CEILDIV:
    if (!lower_bound(e->a, &x) || !lower_bound(e->b, &y) || x < 0 || y < 1) return false;
    *lb = 0;
    return true;
  case SYM_MIN:
    if (!lower_bound(e->a, &x) || !lower_bound(e->b, &y)) return false;
    *lb = x < y ? x : y;
    return true;
  case SYM_MAX:
    if (lower_bound(e->a, &x)) {
      if (lower_bound(e->b, &y) && y > x) x = y;
      *lb = x;
      return true;
    }
    return lower_bound(e->b, lb);
  }
  return false;
}

/* Replace coordinates and variables that appear with a negative coefficient by their upper
 * bound (dims[d] - 1, var_max[id]) where the facts know it, which can only lower the value:
 * a sound step towards a lower bound. */
static const sym *bound_coords_from_below(const sym_facts *f, const sym *e) {
  LINEAR(l);
  lin_collect(&l, e, 1);
  LINEAR(r);
  r.k = l.k;
  for (int i = 0; i < l.n; i++) {
    const sym *a = l.atom[i];
    if (f && l.coef[i] < 0 && a->kind == SYM_COORD && a->id < f->ndims && f->dims[a->id])
      lin_collect(&r, sym_sub(f->dims[a->id], sym_const(1)), l.coef[i]);
    else if (f && l.coef[i] < 0 && a->kind == SYM_VAR && a->id < f->nvars && f->var_max[a->id])
      lin_collect(&r, f->var_max[a->id], l.coef[i]);
    else lin_push(&r, l.coef[i], a);
  }
  return lin_build(&r);
}

/* d >= 0?  Atoms with known ranges are bounded; a min or max term is split: for c > 0,
 * c*min(x, y) >= 0 needs both c*x and c*y, while for c < 0 either bound suffices (and the
 * mirror for max). */
static bool prove_nonneg(const sym_facts *f, const sym *d, int depth) {
  int64_t lb;
  const sym *low = bound_coords_from_below(f, d);
  if (lower_bound(low, &lb) && lb >= 0) return true;
  if (depth > 6) return false;
  LINEAR(l);
  lin_collect(&l, d, 1);
  for (int i = 0; i < l.n; i++) {
    const sym *x = l.atom[i];
    int64_t c = l.coef[i];
    if (x->kind != SYM_MIN && x->kind != SYM_MAX) continue;
    const sym *d1 = sym_add(d, sym_mul(sym_const(c), sym_sub(x->a, x)));
    const sym *d2 = sym_add(d, sym_mul(sym_const(c), sym_sub(x->b, x)));
    bool both = (x->kind == SYM_MIN) == (c > 0);
    if (both) return prove_nonneg(f, d1, depth + 1) && prove_nonneg(f, d2, depth + 1);
    if (prove_nonneg(f, d1, depth + 1) || prove_nonneg(f, d2, depth + 1)) return true;
  }
  return false;
}

bool sym_prove_le(const sym_facts *f, const sym *a, const sym *b) { return prove_nonneg(f, sym_sub(b, a), 0); }

static bool prove_lt(const sym_facts *f, const sym *a, const sym *b) {
  return sym_prove_le(f, sym_add(a, sym_const(1)), b);
}

static bool positive(const sym *e) {
  int64_t lb;
  return lower_bound(e, &lb) && lb >= 1;
}

const sym *sym_floordiv(const sym *a, const sym *b) {
  int64_t x, y;
  if (sym_is_const(a, &x) && sym_is_const(b, &y) && y != 0 && !(x == INT64_MIN && y == -1)) {
    int64_t q = x / y;
    if (x % y != 0 && ((x < 0) != (y < 0))) q--;
    return sym_const(q);
  }
  if (sym_is_const(b, &y) && y == 1) return a;
  if (sym_is_const(a, &x) && x == 0) return a;
  if (sym_equal(a, b) && positive(b)) return sym_const(1);
  /* (b * q + r) / b with 0 <= r < b  ->  q + r / b: handled only for r = 0 */
  if (a->kind == SYM_MUL && positive(b)) {
    if (sym_equal(a->a, b)) return a->b;
    if (sym_equal(a->b, b)) return a->a;
  }
  return mk(SYM_FLOORDIV, a, b);
}

const sym *sym_ceildiv(const sym *a, const sym *b) {
  int64_t x, y;
  if (sym_is_const(a, &x) && sym_is_const(b, &y) && y > 0) return sym_const(x / y + (x % y > 0));
  if (sym_is_const(b, &y) && y == 1) return a;
  if (sym_is_const(a, &x) && x == 0) return a;
  if (sym_equal(a, b) && positive(b)) return sym_const(1);
  return mk(SYM_CEILDIV, a, b);
}

const sym *sym_mod(const sym_facts *f, const sym *a, const sym *b) {
  int64_t x, y;
  if (sym_is_const(a, &x) && sym_is_const(b, &y) && y != 0 && y != -1) {
    int64_t r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return sym_const(r);
  }
  if (sym_is_const(b, &y) && y == 1) return sym_const(0);
  int64_t lb;
  if (lower_bound(a, &lb) && lb >= 0 && prove_lt(f, a, b)) return a;
  return mk(SYM_MOD, a, b);
}

const sym *sym_min(const sym_facts *f, const sym *a, const sym *b) {
  if (sym_equal(a, b)) return a;
  if (sym_prove_le(f, a, b)) return a;
  if (sym_prove_le(f, b, a)) return b;
  if (sym_compare(a, b) > 0) {
    const sym *t = a;
    a = b, b = t;
  }
  return mk(SYM_MIN, a, b);
}

const sym *sym_max(const sym_facts *f, const sym *a, const sym *b) {
  if (sym_equal(a, b)) return a;
  if (sym_prove_le(f, a, b)) return b;
  if (sym_prove_le(f, b, a)) return a;
  if (sym_compare(a, b) > 0) {
    const sym *t = a;
    a = b, b = t;
  }
  return mk(SYM_MAX, a, b);
}

/* ---- queries and rewriting ----------------------------------------------------------------- */
bool sym_uses(const sym *e, sym_kind kind, int id) {
  if (!e) return false;
  if (e->kind == kind && (kind == SYM_PARAM || kind == SYM_COORD || kind == SYM_VAR))
    return e->id == id;
  if (e->kind <= SYM_VAR) return false;
  return sym_uses(e->a, kind, id) || sym_uses(e->b, kind, id);
}

bool sym_has_split(const sym *e) {
  if (!e || e->kind == SYM_SPLIT) return e != NULL;
  return e->kind > SYM_VAR && (sym_has_split(e->a) || sym_has_split(e->b));
}

static const sym *rebuild(const sym_facts *f, sym_kind k, const sym *a, const sym *b) {
  switch (k) {
  case SYM_ADD: return sym_add(a, b);
  case SYM_MUL: return sym_mul(a, b);
  case SYM_FLOORDIV: return sym_floordiv(a, b);
  case SYM_CEILDIV: return sym_ceildiv(a, b);
  case SYM_MOD: return sym_mod(f, a, b);
  case SYM_MIN: return sym_min(f, a, b);
  case SYM_MAX: return sym_max(f, a, b);
  default: return NULL;
  }
}

const sym *sym_subst(const sym_facts *f, const sym *e, sym_kind kind, int id, const sym *by) {
  if (e->kind == kind && e->kind != SYM_CONST && e->kind != SYM_SPLIT && e->id == id) return by;
  if (e->kind <= SYM_VAR) return e;
  if (!sym_uses(e, kind, id)) return e;
  if (e->kind == SYM_SPLIT) {
    sym *s = mk(SYM_SPLIT, sym_subst(f, e->a, kind, id, by), sym_subst(f, e->b, kind, id, by));
    s->id = e->id;
    return s->a->kind == SYM_CONST && s->a->c <= 0 ? sym_const(0) : s;
  }
  return rebuild(f, e->kind, sym_subst(f, e->a, kind, id, by), sym_subst(f, e->b, kind, id, by));
}

bool sym_coord_only_under_mod(const sym *e, int d, const sym *m) {
  if (e->kind == SYM_COORD) return e->id != d;
  if (e->kind <= SYM_VAR) return true;
  if (e->kind == SYM_MOD && sym_equal(e->b, m)) return !sym_uses(e->b, SYM_COORD, d);
  return sym_coord_only_under_mod(e->a, d, m) && sym_coord_only_under_mod(e->b, d, m);
}

static bool apply_op(sym_kind k, int64_t x, int64_t y, int64_t *out);

bool sym_eval(const sym *e, const sym_env *env, int64_t *out) {
  int64_t x, y;
  switch (e->kind) {
  case SYM_CONST: *out = e->c; return true;
  case SYM_PARAM:
    if (!env->params || env->params[e->id] < 0) return false;
    *out = env->params[e->id];
    return true;
  case SYM_COORD:
    if (!env->coords) return false;
    *out = env->coords[e->id];
    return true;
  case SYM_VAR:
    if (!env->vars || e->id >= env->nvars) return false;
    *out = env->vars[e->id];
    return true;
  case SYM_SPLIT:
    if (env->splits && env->splits[e->id]) {
      if (!sym_eval(e->a, env, &x) || x < 0) return false;
      *out = env->splits[e->id][x];
      return true;
    }
    return sym_eval(e->b, env, out);
  default: break;
  }
  if (!sym_eval(e->a, env, &x) || !sym_eval(e->b, env, &y)) return false;
  return apply_op(e->kind, x, y, out);
}

/* sym_eval's operation k on the values of its operands */
static bool apply_op(sym_kind k, int64_t x, int64_t y, int64_t *out) {
  switch (k) {
  case SYM_ADD:
    if (__builtin_add_overflow(x, y, out)) return false;
    break;
  case SYM_MUL:
    if (__builtin_mul_overflow(x, y, out)) return false;
    break;
  case SYM_FLOORDIV:
    if (y == 0 || (x == INT64_MIN && y == -1)) return false;
    *out = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
    break;
  case SYM_CEILDIV:
    if (y <= 0) return false;
    *out = x <= 0 ? -(x == INT64_MIN ? INT64_MAX / y : (-x) / y) : x / y + (x % y != 0);
    break;
  case SYM_MOD:
    if (y == 0 || y == -1) {
      if (y == 0) return false;
      *out = 0;
      break;
    }
    *out = x % y;
    if (*out != 0 && ((*out < 0) != (y < 0))) *out += y;
    break;
  case SYM_MIN: *out = x < y ? x : y; break;
  case SYM_MAX: *out = x > y ? x : y; break;
  default: return false;
  }
  return true;
}

/* ---- compiled expressions ----------------------------------------------------------------- */
/* One step of a compiled expression, in postfix order: AFF pushes coef * vars[id] + c (a
 * variable, c * v or c * v + k as sym_eval computes them: one step, not three), CONST pushes
 * c, ATOM pushes sym_eval(e) (a param, a coordinate, a split), and an operation pops its two
 * operands and pushes apply_op's result. */
enum { OP_CONST = SYM_SPLIT + 1, OP_AFF, OP_ATOM };
struct sym_op {
  int op, id;
  int64_t coef, c;
  const sym *e;
};

enum { SYM_CODE_STACK = 32 };

/* v, coef * v, or coef * v + k in canonical form: true with the variable, coef and k */
static bool affine_var(const sym *e, int *id, int64_t *coef, int64_t *k) {
  *k = 0, *coef = 1;
  if (e->kind == SYM_ADD && e->b->kind == SYM_CONST) *k = e->b->c, e = e->a;
  if (e->kind == SYM_MUL && e->a->kind == SYM_CONST && e->b->kind == SYM_VAR) *coef = e->a->c, e = e->b;
  if (e->kind != SYM_VAR) return false;
  *id = e->id;
  return true;
}

/* the steps of e appended at ops[*n] (ops NULL: counted); the stack depth it needs */
static int emit_ops(const sym *e, struct sym_op *ops, int *n) {
  struct sym_op o = {.op = e->kind, .e = e};
  int depth = 1;
  if (e->kind == SYM_CONST) o.op = OP_CONST, o.c = e->c;
  else if (affine_var(e, &o.id, &o.coef, &o.c)) o.op = OP_AFF;
  else if (e->kind <= SYM_VAR || e->kind == SYM_SPLIT) o.op = OP_ATOM;
  else {
    int da = emit_ops(e->a, ops, n), db = emit_ops(e->b, ops, n);
    depth = da > db + 1 ? da : db + 1;
  }
  if (ops) ops[*n] = o;
  ++*n;
  return depth;
}

/* (ir.h) */
sym_code sym_compile(const sym *e) {
  int n = 0;
  int depth = emit_ops(e, NULL, &n);
  struct sym_op *ops = ir_alloc((size_t)(depth <= SYM_CODE_STACK ? n : 1) * sizeof *ops);
  if (depth > SYM_CODE_STACK) { /* too deep for the stack: evaluated as the expression */
    ops[0] = (struct sym_op){.op = OP_ATOM, .e = e};
    return (sym_code){1, ops};
  }
  n = 0;
  emit_ops(e, ops, &n);
  return (sym_code){n, ops};
}

/* (ir.h) */
bool sym_run(const sym_code *code, const sym_env *env, int64_t *out) {
  int64_t st[SYM_CODE_STACK];
  int top = 0;
  for (int q = 0; q < code->n; q++) {
    const struct sym_op *o = &code->ops[q];
    int64_t v;
    switch (o->op) {
    case OP_CONST: v = o->c; break;
    case OP_AFF:
      if (!env->vars || o->id >= env->nvars || __builtin_mul_overflow(o->coef, env->vars[o->id], &v) ||
          __builtin_add_overflow(v, o->c, &v))
        return false;
      break;
    case OP_ATOM:
      if (!sym_eval(o->e, env, &v)) return false;
      break;
    default:
      top -= 2;
      if (!apply_op((sym_kind)o->op, st[top], st[top + 1], &v)) return false;
    }
    st[top++] = v;
  }
  *out = st[0];
  return true;
}

/* (ir.h) */
const sym *sym_fold(const sym *e, const sym_env *env) {
  int64_t v;
  switch (e->kind) {
  case SYM_CONST: return e;
  case SYM_VAR: return e;
  case SYM_PARAM:
  case SYM_COORD: return sym_eval(e, env, &v) ? sym_const(v) : e;
  case SYM_SPLIT:
    /* without the run time's boundaries a split evaluates as its block (b) */
    if (!(env->splits && env->splits[e->id])) return sym_fold(e->b, env);
    return e;
  default: break;
  }
  const sym *a = sym_fold(e->a, env), *b = sym_fold(e->b, env);
  sym *r = mk(e->kind, a, b);
  *r = *e, r->a = a, r->b = b;
  /* both sides constant: the node's value where sym_eval gives one (an overflow or a
   * division by zero stays a node, so that evaluating it still fails) */
  if (a->kind == SYM_CONST && b->kind == SYM_CONST && sym_eval(r, env, &v)) return sym_const(v);
  return r;
}

/* ---- printing as C ----------------------------------------------------------------------- */
static void default_namer(FILE *f, const sym *a, void *ctx) {
  (void)ctx;
  fprintf(f, "dtl_%c%d", a->kind == SYM_PARAM ? 'p' : a->kind == SYM_COORD ? 'c' : 'v', a->id);
}

static void print_prec(FILE *f, const sym *e, sym_namer nm, void *ctx, int prec);

static void print_term(FILE *f, const sym *t, bool first, sym_namer nm, void *ctx) {
  int64_t c = 1;
  const sym *a = t;
  if (t->kind == SYM_MUL && t->a->kind == SYM_CONST) c = t->a->c, a = t->b;
  if (t->kind == SYM_CONST) {
    c = t->c;
    if (first) fprintf(f, "%lld", (long long)c);
    else fprintf(f, c < 0 ? " - %lld" : " + %lld", (long long)(c < 0 ? -c : c));
    return;
  }
  if (!first) fputs(c < 0 ? " - " : " + ", f);
  else if (c < 0) fputs("-", f);
  int64_t m = c < 0 ? -c : c;
  if (m != 1) fprintf(f, "%lld * ", (long long)m);
  print_prec(f, a, nm, ctx, 2);
}

static void print_sum(FILE *f, const sym *e, bool *first, sym_namer nm, void *ctx) {
  if (e->kind == SYM_ADD) {
    print_sum(f, e->a, first, nm, ctx);
    print_sum(f, e->b, first, nm, ctx);
  } else {
    print_term(f, e, *first, nm, ctx);
    *first = false;
  }
}

/* prec: 0 = any context, 1 = operand of +, 2 = operand of * */
static void print_prec(FILE *f, const sym *e, sym_namer nm, void *ctx, int prec) {
  static const char *fn[] = {[SYM_FLOORDIV] = "dtl_floordiv", [SYM_CEILDIV] = "dtl_ceildiv",
                             [SYM_MOD] = "dtl_mod", [SYM_MIN] = "dtl_min", [SYM_MAX] = "dtl_max"};
  switch (e->kind) {
  case SYM_CONST: fprintf(f, e->c < 0 && prec ? "(%lld)" : "%lld", (long long)e->c); return;
  case SYM_PARAM:
  case SYM_COORD:
  case SYM_VAR: nm(f, e, ctx); return;
  case SYM_SPLIT:
    fprintf(f, "dtl_split[%d][", e->id);
    print_prec(f, e->a, nm, ctx, 0);
    fputc(']', f);
    return;
  case SYM_ADD: {
    bool first = true;
    if (prec >= 2) fputc('(', f);
    print_sum(f, e, &first, nm, ctx);
    if (prec >= 2) fputc(')', f);
    return;
  }
  case SYM_MUL:
    if (e->a->kind == SYM_CONST && e->a->c < 0) {
      bool first = true;
      fputc('(', f);
      print_term(f, e, first, nm, ctx);
      fputc(')', f);
      return;
    }
    print_prec(f, e->a, nm, ctx, 2);
    fputs(" * ", f);
    print_prec(f, e->b, nm, ctx, 2);
    return;
  default:
    fprintf(f, "%s(", fn[e->kind]);
    print_prec(f, e->a, nm, ctx, 0);
    fputs(", ", f);
    print_prec(f, e->b, nm, ctx, 0);
    fputc(')', f);
  }
}

void sym_print(FILE *f, const sym *e, sym_namer namer, void *ctx) {
  print_prec(f, e, namer ? namer : default_namer, ctx, 0);
}

/* The same expression with every variable id moved by off, rebuilt as it is (no simplification:
 * the ranges known for the old ids say nothing of the new ones). */
const sym *sym_shift_vars(const sym *e, int off) {
  if (!e || !off) return e;
  switch (e->kind) {
  case SYM_CONST:
  case SYM_PARAM:
  case SYM_COORD: return e;
  case SYM_VAR: return atom(SYM_VAR, e->id + off);
  case SYM_SPLIT: {
    sym *s = mk(SYM_SPLIT, sym_shift_vars(e->a, off), sym_shift_vars(e->b, off));
    s->id = e->id;
    return s;
  }
  default: return mk(e->kind, sym_shift_vars(e->a, off), sym_shift_vars(e->b, off));
  }
}
