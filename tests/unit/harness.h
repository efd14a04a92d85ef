/* harness.h -- shared by the unit tests of the stages after the front end: run a program
 * text through the front end, diagnostics into a memory stream, and require it valid. */
#ifndef DISTAL_TEST_HARNESS_H
#define DISTAL_TEST_HARNESS_H

#include "frontend/frontend.h"

/* Parse and check `text` as t.dtl with diagnostics going to err (an open_memstream whose
 * buffer is *out); on any error print the diagnostics and fail the test. */
static void unit_frontend(const char *text, FILE *err, char **out, fe_source **src,
                          fe_program **prog) {
  *src = fe_source_from_string("t.dtl", text, strlen(text), err);
  assert_non_null(*src);
  *prog = fe_parse(*src);
  int e = *prog ? fe_check(*prog) : 1;
  if (e) {
    fflush(err);
    fprintf(stderr, "--- diagnostics:\n%s---\n", *out ? *out : "");
  }
  assert_non_null(*prog);
  assert_int_equal(e, 0);
}

#endif
