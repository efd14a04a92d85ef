/* diag.c -- source files and diagnostics: "PATH:LINE:COL: error: MESSAGE", the source line
 * and a caret under the column. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

static fe_source *source_new(const char *path, FILE *err) {
  fe_source *src = calloc(1, sizeof *src);
  char *p = strdup(path ? path : "<string>");
  if (!src || !p) {
    free(src);
    free(p);
    return NULL;
  }
  src->path = p;
  src->err = err ? err : stderr;
  return src;
}

fe_source *fe_source_open(const char *path, FILE *err) {
  FILE *out = err ? err : stderr;
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(out, "distalc: cannot read %s: %s\n", path, strerror(errno));
    return NULL;
  }
  /* Read in chunks rather than trusting fseek/ftell, so pipes and /dev/stdin work too. */
  size_t len = 0, cap = 4096;
  char *text = malloc(cap);
  int saved = 0;
  while (text) {
    len += fread(text + len, 1, cap - len - 1, f);
    if (ferror(f)) {
      saved = errno ? errno : EIO;
      break;
    }
    if (feof(f))
      break;
    if (len + 1 == cap) {
      char *bigger = realloc(text, cap *= 2);
      if (!bigger)
        free(text);
      text = bigger;
    }
  }
  fclose(f);
  if (!text || saved) {
    fprintf(out, "distalc: cannot read %s: %s\n", path, strerror(text ? saved : ENOMEM));
    free(text);
    return NULL;
  }
  text[len] = '\0';
  fe_source *src = source_new(path, err);
  if (!src) {
    fprintf(out, "distalc: cannot read %s: %s\n", path, strerror(ENOMEM));
    free(text);
    return NULL;
  }
  src->text = text;
  src->len = len;
  return src;
}

fe_source *fe_source_from_string(const char *path, const char *text, size_t len, FILE *err) {
  fe_source *src = source_new(path, err);
  if (!src)
    return NULL;
  src->text = malloc(len + 1);
  if (!src->text) {
    fe_source_free(src);
    return NULL;
  }
  if (len)
    memcpy(src->text, text, len);
  src->text[len] = '\0';
  src->len = len;
  return src;
}

void fe_source_free(fe_source *src) {
  if (!src)
    return;
  free((char *)src->path);
  free(src->text);
  free(src);
}

/* Print one diagnostic.  The source line is printed as it is (up to its newline, without a
 * trailing '\r'), and the caret line copies its tabs so that the caret lines up in any
 * terminal whatever its tab width. */
static void report(fe_source *src, fe_loc loc, const char *kind, const char *fmt, va_list ap) {
  FILE *f = src->err ? src->err : stderr;
  if (loc.line <= 0) {
    fprintf(f, "%s: %s: ", src->path, kind);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    return;
  }
  fprintf(f, "%s:%d:%d: %s: ", src->path, loc.line, loc.col, kind);
  vfprintf(f, fmt, ap);
  fputc('\n', f);

  const char *p = src->text, *end = src->text + src->len;
  for (int line = 1; line < loc.line && p < end; p++)
    if (*p == '\n')
      line++;
  const char *eol = p;
  while (eol < end && *eol != '\n')
    eol++;
  size_t n = (size_t)(eol - p);
  if (n && p[n - 1] == '\r')
    n--;
  fwrite(p, 1, n, f);
  fputc('\n', f);
  for (int c = 1; c < loc.col; c++)
    fputc((size_t)(c - 1) < n && p[c - 1] == '\t' ? '\t' : ' ', f);
  fputs("^\n", f);
}

/* Errors past max_errors are counted but not shown; one note says so. */
static bool shown(const fe_source *src) {
  return src->max_errors <= 0 || src->nerrors <= src->max_errors;
}

void fe_verror(fe_source *src, fe_loc loc, const char *fmt, va_list ap) {
  src->nerrors++;
  if (shown(src)) {
    report(src, loc, "error", fmt, ap);
  } else if (src->nerrors == src->max_errors + 1) {
    FILE *f = src->err ? src->err : stderr;
    fprintf(f, "%s: note: too many errors; the rest are not shown\n", src->path);
  }
}

void fe_error(fe_source *src, fe_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fe_verror(src, loc, fmt, ap);
  va_end(ap);
}

void fe_note(fe_source *src, fe_loc loc, const char *fmt, ...) {
  if (!shown(src))
    return;
  va_list ap;
  va_start(ap, fmt);
  report(src, loc, "note", fmt, ap);
  va_end(ap);
}
