/* fe_internal.h -- what the front end's files share and nobody else sees: the token stream
 * that lexer.c produces and parser.c consumes. */
#ifndef DISTAL_FE_INTERNAL_H
#define DISTAL_FE_INTERNAL_H

#include "frontend/frontend.h"

typedef enum { TK_IDENT, TK_KEYWORD, TK_INT, TK_FLOAT, TK_PUNCT, TK_EOF } fe_token_kind;

typedef struct {
  fe_token_kind kind;
  const char *text; /* points into fe_source.text; not NUL-terminated */
  int len;
  fe_loc loc;
  int64_t ival; /* TK_INT: its exact value (INT64_MIN when min64) */
  double fval;  /* TK_INT and TK_FLOAT: the nearest double */
  bool min64;   /* TK_INT 9223372036854775808 (2^63): valid only after a unary minus */
} fe_token;

/* Split the whole source into tokens, the last one TK_EOF.  Reports every lexical error and
 * returns NULL if there was one.  The caller frees the array. */
fe_token *fe_tokenize(fe_source *src, int *ntokens);

/* Whether t is the keyword or punctuation s. */
bool fe_tok_is(const fe_token *t, const char *s);

#endif
