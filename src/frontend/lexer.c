/* lexer.c -- the tokens of LANGUAGE.md section 2. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/fe_internal.h"

static const char *const keywords[] = {
    "param", "machine", "tensor",     "grid", "Grid", "double", "float", "int32",
    "int64", "dense",   "compressed", "csr",  "csf",  "cpu",    "gpu",   "temp",
    "repeat", "until",
};

/* Two-character punctuation first, so that "+=" is not read as "+" "=". */
static const char *const puncts[] = {
    "+=", "-=", "->", "<=", ">=", "==", "!=", "&&", "||", "<", ">", "!", "(", ")", "{", "}", "[", "]", ",", ";", ":", ".", "=", "+", "-", "*", "/", "@",
};

#define COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

bool fe_tok_is(const fe_token *t, const char *s) {
  return (t->kind == TK_KEYWORD || t->kind == TK_PUNCT) && (size_t)t->len == strlen(s) &&
         memcmp(t->text, s, (size_t)t->len) == 0;
}

static bool is_ident_start(int c) { return isalpha(c) || c == '_'; }
static bool is_ident_char(int c) { return isalnum(c) || c == '_'; }

typedef struct {
  fe_source *src;
  const char *p, *end, *line_start;
  int line;
  fe_token *toks;
  int n;
  bool failed;
} lexer;

static fe_loc here(const lexer *lx, const char *at) {
  return (fe_loc){lx->line, (int)(at - lx->line_start) + 1};
}

static int at(const lexer *lx, const char *q) { return q < lx->end ? (unsigned char)*q : 0; }

/* Whether q starts the digits of an exponent: [eE] [+-]? DIGIT. */
static bool exponent_at(const lexer *lx, const char *q) {
  if (at(lx, q) != 'e' && at(lx, q) != 'E')
    return false;
  q++;
  if (at(lx, q) == '+' || at(lx, q) == '-')
    q++;
  return isdigit(at(lx, q));
}

/* A number: DIGITS ["." DIGITS*] [EXPONENT] or "." DIGITS [EXPONENT].  A letter right after
 * the digits ends the number instead of being an error, because compact distributions write
 * "0yz" (INT then IDENT); for the same reason an "e" only starts an exponent when digits
 * follow, and "2.split" is INT "2" followed by a schedule command. */
static void lex_number(lexer *lx, fe_token *t) {
  const char *q = lx->p;
  bool is_float = false;
  while (isdigit(at(lx, q)))
    q++;
  if (at(lx, q) == '.') {
    int next = at(lx, q + 1);
    if (isdigit(next) || exponent_at(lx, q + 1) || !is_ident_start(next)) {
      is_float = true;
      q++;
      while (isdigit(at(lx, q)))
        q++;
    }
  }
  if (exponent_at(lx, q)) {
    is_float = true;
    q += 2;
    while (isdigit(at(lx, q)))
      q++;
  }
  t->kind = is_float ? TK_FLOAT : TK_INT;
  t->len = (int)(q - lx->p);
  if (!is_float) {
    /* Exact in uint64_t up to 2^63: 9223372036854775808 is INT64_MIN after a unary minus
     * (the parser decides where that is allowed), and too large anywhere else. */
    const uint64_t limit = (uint64_t)INT64_MAX + 1;
    uint64_t v = 0;
    for (const char *d = lx->p; d < q; d++) {
      unsigned digit = (unsigned)(*d - '0');
      if (v > (limit - digit) / 10) {
        fe_error(lx->src, t->loc, "integer literal %.*s is too large for int64 (the largest is %lld)",
                 t->len, t->text, (long long)INT64_MAX);
        lx->failed = true;
        v = 0;
        break;
      }
      v = v * 10 + digit;
    }
    t->min64 = v == limit;
    t->ival = t->min64 ? INT64_MIN : (int64_t)v;
    t->fval = t->min64 ? 9223372036854775808.0 : (double)(int64_t)v; /* correctly rounded */
    return;
  }
  char *copy = strndup(lx->p, (size_t)t->len);
  if (!copy) {
    fe_error(lx->src, t->loc, "out of memory");
    lx->failed = true;
    return;
  }
  errno = 0;
  t->fval = strtod(copy, NULL);
  free(copy);
  if (isinf(t->fval)) {
    fe_error(lx->src, t->loc, "floating literal %.*s is out of range", t->len, t->text);
    lx->failed = true;
    return;
  }
  /* a nonzero literal below the smallest double would silently become 0 */
  bool nonzero = false;
  for (int k = 0; k < t->len && t->text[k] != 'e' && t->text[k] != 'E'; k++) nonzero |= t->text[k] >= '1' && t->text[k] <= '9';
  if (t->fval == 0 && nonzero) {
    fe_error(lx->src, t->loc, "floating literal %.*s is out of range (nonzero, it would round to 0)", t->len, t->text);
    lx->failed = true;
  }
}

/* Skip blanks and comments; keeps the line count. */
static void skip_space(lexer *lx) {
  while (lx->p < lx->end) {
    int c = at(lx, lx->p);
    if (c == '\n') {
      lx->p++;
      lx->line++;
      lx->line_start = lx->p;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      lx->p++;
    } else if (c == '#' || (c == '/' && at(lx, lx->p + 1) == '/')) {
      while (lx->p < lx->end && *lx->p != '\n')
        lx->p++;
    } else {
      return;
    }
  }
}

static bool push(lexer *lx, fe_token t) {
  if ((lx->n & (lx->n - 1)) == 0) { /* the capacity is the next power of two */
    fe_token *bigger = realloc(lx->toks, sizeof *bigger * (size_t)(lx->n ? 2 * lx->n : 1));
    if (!bigger) {
      fe_error(lx->src, t.loc, "out of memory");
      return false;
    }
    lx->toks = bigger;
  }
  lx->toks[lx->n++] = t;
  return true;
}

fe_token *fe_tokenize(fe_source *src, int *ntokens) {
  lexer lx = {src, src->text, src->text + src->len, src->text, 1, NULL, 0, false};
  for (;;) {
    skip_space(&lx);
    fe_token t = {TK_EOF, lx.p, 0, here(&lx, lx.p), 0, 0, false};
    int c = at(&lx, lx.p);
    if (lx.p >= lx.end) {
      if (!push(&lx, t))
        lx.failed = true;
      break;
    }
    if (is_ident_start(c)) {
      const char *q = lx.p;
      while (is_ident_char(at(&lx, q)))
        q++;
      t.kind = TK_IDENT;
      if (q - lx.p > FE_MAX_IDENT) {
        fe_error(src, t.loc, "identifier longer than %d characters", FE_MAX_IDENT);
        lx.failed = true;
        lx.p = q;
        continue;
      }
      t.len = (int)(q - lx.p);
      for (int k = 0; k < COUNT(keywords); k++)
        if ((size_t)t.len == strlen(keywords[k]) && !memcmp(t.text, keywords[k], (size_t)t.len))
          t.kind = TK_KEYWORD;
    } else if (isdigit(c) || (c == '.' && isdigit(at(&lx, lx.p + 1)))) {
      lex_number(&lx, &t);
    } else {
      for (int k = 0; k < COUNT(puncts) && !t.len; k++) {
        size_t n = strlen(puncts[k]);
        if ((size_t)(lx.end - lx.p) >= n && !memcmp(lx.p, puncts[k], n)) {
          t.kind = TK_PUNCT;
          t.len = (int)n;
        }
      }
      if (!t.len) {
        if (isprint(c))
          fe_error(src, t.loc, "unexpected character '%c'", c);
        else
          fe_error(src, t.loc, "unexpected byte 0x%02x", (unsigned)c);
        lx.failed = true;
        lx.p++;
        continue;
      }
    }
    lx.p += t.len;
    if (!push(&lx, t)) {
      lx.failed = true;
      break;
    }
  }
  if (lx.failed) {
    free(lx.toks);
    return NULL;
  }
  *ntokens = lx.n;
  return lx.toks;
}
