/* print.c -- printing AST pieces as the user would write them (--emit cin, tests). */
#include <inttypes.h>
#include <stdlib.h>

#include "frontend/frontend.h"

const char *fe_type_name(fe_type t) {
  switch (t) {
  case FE_FLOAT:
    return "float";
  case FE_INT32:
    return "int32";
  case FE_INT64:
    return "int64";
  case FE_DOUBLE:
    break;
  }
  return "double";
}

void fe_print_size(FILE *f, const fe_program *prog, const fe_size *s) {
  if (!s->is_param)
    fprintf(f, "%" PRId64, s->value);
  else if (prog && s->param >= 0 && s->param < prog->nparams)
    fputs(prog->params[s->param].name, f);
  else
    fputs("?", f);
}

/* Binding strength: in conditions || binds loosest, then &&, !, the comparisons; then sums,
 * products, unary minus, and atoms. */
static int precedence(const fe_expr *e) {
  switch (e->kind) {
  case FE_E_OR:
    return -3;
  case FE_E_AND:
    return -2;
  case FE_E_NOT:
    return -1;
  case FE_E_LT:
  case FE_E_LE:
  case FE_E_GT:
  case FE_E_GE:
  case FE_E_EQ:
  case FE_E_NE:
    return 0;
  case FE_E_ADD:
  case FE_E_SUB:
    return 1;
  case FE_E_MUL:
  case FE_E_DIV:
    return 2;
  case FE_E_NEG:
    return 3;
  case FE_E_ACCESS:
  case FE_E_NUM:
  case FE_E_CALL:
  case FE_E_PARAM:
    break;
  }
  return 4;
}

static void print_operand(FILE *f, const fe_expr *e, bool parens) {
  if (parens)
    fputc('(', f);
  fe_print_expr(f, e);
  if (parens)
    fputc(')', f);
}

/* Operators are left-associative, so a right operand of equal precedence keeps its
 * parentheses ("a - (b - c)"); the printed text parses back to the same tree. */
void fe_print_expr(FILE *f, const fe_expr *e) {
  if (!e)
    return;
  switch (e->kind) {
  case FE_E_ACCESS:
    fputs(e->acc.tname ? e->acc.tname : "?", f);
    if (e->acc.parens || e->acc.nidx > 0) {
      fputc('(', f);
      for (int k = 0; k < e->acc.nidx; k++)
        fprintf(f, "%s%s", k ? "," : "", e->acc.idx[k]);
      fputc(')', f);
    }
    return;
  case FE_E_NUM:
    if (e->text)
      fputs(e->text, f);
    else if (e->is_int)
      fprintf(f, "%" PRId64, e->ival);
    else
      fprintf(f, "%.17g", e->num);
    return;
  case FE_E_NEG:
    fputc('-', f);
    print_operand(f, e->a, precedence(e->a) <= precedence(e));
    return;
  case FE_E_PARAM:
    fputs(e->acc.tname ? e->acc.tname : "?", f);
    return;
  case FE_E_CALL:
    fprintf(f, "%s(", fe_func_name(e->func));
    fe_print_expr(f, e->a);
    if (e->b) {
      fputs(", ", f);
      fe_print_expr(f, e->b);
    }
    fputc(')', f);
    return;
  case FE_E_NOT:
    fputc('!', f);
    print_operand(f, e->a, precedence(e->a) < precedence(e));
    return;
  case FE_E_ADD:
  case FE_E_SUB:
  case FE_E_MUL:
  case FE_E_DIV:
  case FE_E_LT:
  case FE_E_LE:
  case FE_E_GT:
  case FE_E_GE:
  case FE_E_EQ:
  case FE_E_NE:
  case FE_E_AND:
  case FE_E_OR:
    break;
  }
  static const char *const ops[] = {[FE_E_ADD] = "+", [FE_E_SUB] = "-", [FE_E_MUL] = "*", [FE_E_DIV] = "/",
                                    [FE_E_LT] = "<",  [FE_E_LE] = "<=", [FE_E_GT] = ">",  [FE_E_GE] = ">=",
                                    [FE_E_EQ] = "==", [FE_E_NE] = "!=", [FE_E_AND] = "&&", [FE_E_OR] = "||"};
  /* comparisons do not chain: an operand that is one keeps its parentheses */
  bool cmp = precedence(e) == 0;
  print_operand(f, e->a, cmp ? precedence(e->a) <= 0 : precedence(e->a) < precedence(e));
  fprintf(f, " %s ", ops[e->kind]);
  print_operand(f, e->b, precedence(e->b) <= precedence(e));
}

float fe_float_literal(const char *text, double num) {
  if (!text)
    return (float)num;
  return strtof(text, NULL); /* correctly rounded (glibc), +-HUGE_VALF on overflow */
}
