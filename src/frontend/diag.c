/* diag.c -- source files and diagnostics: "PATH:LINE:COL: error: MESSAGE", the source line
 * and a caret under the column, written to a stream or handed to a sink. */
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

/* ---- delivery ------------------------------------------------------------------------- */

/* Hand a diagnostic whose text `compose` writes to the sink: with no sink function, straight
 * to the stream (so that it prints as it always has, even with no memory to spare); else
 * into memory first, with the message formatted alone too. */
typedef void (*composer)(FILE *f, const void *what, const char *fmt, va_list ap);

static void deliver(const fe_sink *sink, FILE *err, fe_diag d, composer compose, const void *what,
                    const char *fmt, va_list ap) {
  if (!sink || !sink->fn) {
    compose(err ? err : stderr, what, fmt, ap);
    return;
  }
  va_list aq;
  va_copy(aq, ap);
  int n = vsnprintf(NULL, 0, fmt, aq);
  va_end(aq);
  char *msg = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (msg) {
    va_copy(aq, ap);
    vsnprintf(msg, (size_t)n + 1, fmt, aq);
    va_end(aq);
  }
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (f) {
    va_copy(aq, ap);
    compose(f, what, fmt, aq);
    va_end(aq);
    if (fclose(f) != 0) {
      free(text);
      text = NULL;
    }
  }
  d.message = msg ? msg : "(out of memory while reporting a diagnostic)";
  d.text = text ? text : d.message;
  d.len = text ? len : strlen(d.message);
  sink->fn(sink->ctx, &d);
  free(msg);
  free(text);
}

static void compose_tool(FILE *f, const void *what, const char *fmt, va_list ap) {
  (void)what;
  fputs("distalc: ", f);
  vfprintf(f, fmt, ap);
  fputc('\n', f);
}

void fe_tool_error(const fe_sink *sink, FILE *err, const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  deliver(sink, err, (fe_diag){.kind = FE_DIAG_ERROR, .path = path}, compose_tool, NULL, fmt, ap);
  va_end(ap);
}

void fe_tool_error_src(fe_source *src, const char *fmt, ...) {
  src->nerrors++;
  va_list ap;
  va_start(ap, fmt);
  deliver(&src->sink, src->err, (fe_diag){.kind = FE_DIAG_ERROR, .path = src->path}, compose_tool, NULL, fmt, ap);
  va_end(ap);
}

/* ---- sources -------------------------------------------------------------------------- */

static fe_source *open_file(const char *path, FILE *err, const fe_sink *sink) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fe_tool_error(sink, err, path, "cannot read %s: %s", path, strerror(errno));
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
    fe_tool_error(sink, err, path, "cannot read %s: %s", path, strerror(text ? saved : ENOMEM));
    free(text);
    return NULL;
  }
  text[len] = '\0';
  fe_source *src = source_new(path, err);
  if (!src) {
    fe_tool_error(sink, err, path, "cannot read %s: %s", path, strerror(ENOMEM));
    free(text);
    return NULL;
  }
  src->text = text;
  src->len = len;
  if (sink)
    src->sink = *sink;
  return src;
}

fe_source *fe_source_open(const char *path, FILE *err) { return open_file(path, err, NULL); }

fe_source *fe_source_open_sink(const char *path, const fe_sink *sink) { return open_file(path, NULL, sink); }

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

/* One diagnostic in a source.  The source line is printed as it is (up to its newline,
 * without a trailing '\r'), and the caret line copies its tabs so that the caret lines up in
 * any terminal whatever its tab width. */
typedef struct {
  const fe_source *src;
  fe_loc loc;
  const char *kind;
} located;

static void compose_located(FILE *f, const void *what, const char *fmt, va_list ap) {
  const located *w = what;
  const fe_source *src = w->src;
  fe_loc loc = w->loc;
  if (loc.line <= 0) {
    fprintf(f, "%s: %s: ", src->path, w->kind);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    return;
  }
  fprintf(f, "%s:%d:%d: %s: ", src->path, loc.line, loc.col, w->kind);
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

static void report(fe_source *src, fe_loc loc, fe_diag_kind kind, const char *fmt, va_list ap) {
  located w = {src, loc, kind == FE_DIAG_ERROR ? "error" : "note"};
  fe_diag d = {.kind = kind, .path = src->path, .loc = loc.line > 0 ? loc : (fe_loc){0, 0}};
  deliver(&src->sink, src->err, d, compose_located, &w, fmt, ap);
}

static void reportf(fe_source *src, fe_loc loc, fe_diag_kind kind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report(src, loc, kind, fmt, ap);
  va_end(ap);
}

/* Errors past max_errors are counted but not shown; one note says so. */
static bool shown(const fe_source *src) {
  return src->max_errors <= 0 || src->nerrors <= src->max_errors;
}

void fe_verror(fe_source *src, fe_loc loc, const char *fmt, va_list ap) {
  src->nerrors++;
  if (shown(src))
    report(src, loc, FE_DIAG_ERROR, fmt, ap);
  else if (src->nerrors == src->max_errors + 1)
    reportf(src, (fe_loc){0, 0}, FE_DIAG_NOTE, "too many errors; the rest are not shown");
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
  report(src, loc, FE_DIAG_NOTE, fmt, ap);
  va_end(ap);
}
