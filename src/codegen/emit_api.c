/* emit_api.c -- distalc --emit api: the generated library's interface (LANGUAGE.md section 7)
 * as one JSON object, for tools that bind to the library without reading its header (the
 * Python package, python/distal).  It names what the header declares and nothing else:
 * the prefix, the params with their types and defaults, the tensors of the API (temporaries
 * have none) in declaration order with type, order, extents, level formats and whether
 * compute writes them, whether PREFIX_iterations exists, and how many variants plan_create
 * chooses among (PREFIX_schedule exists where there are). */
#include "config.h"

#include "codegen/cg_internal.h"

#include <math.h>

/* a JSON string: quotes, backslashes and control characters escaped */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

/* an extent: its literal, or the name of the param it is */
static void json_extent(FILE *f, const sp_program *sp, const sym *e) {
  int64_t c;
  if (sym_is_const(e, &c)) fprintf(f, "%lld", (long long)c);
  else if (e->kind == SYM_PARAM && e->id >= 0 && e->id < sp->nparams) json_str(f, sp->params[e->id].name);
  else fputs("null", f);
}

static void json_param(FILE *f, const sp_param *p) {
  fputs("{\"name\": ", f);
  json_str(f, p->name);
  fprintf(f, ", \"type\": \"%s\", \"grid\": %s, \"default\": ", p->is_float ? "double" : "int64",
          p->is_grid ? "true" : "false");
  if (!p->has_default) fputs("null", f);
  else if (!p->is_float) fprintf(f, "%lld", (long long)p->value);
  else if (isfinite(p->fvalue)) fprintf(f, "%.17g", p->fvalue);
  else fputs("null", f);
  fputc('}', f);
}

static void json_tensor(FILE *f, const sp_program *sp, const sp_tensor *t) {
  fputs("{\"name\": ", f);
  json_str(f, t->name);
  fprintf(f, ", \"type\": \"%s\", \"order\": %d, \"extents\": [", cg_typename(t->type), t->order);
  for (int x = 0; x < t->order; x++) {
    if (x) fputs(", ", f);
    json_extent(f, sp, t->ext[x]);
  }
  fputs("], \"levels\": [", f);
  for (int x = 0; x < t->order; x++) fprintf(f, "%s\"%s\"", x ? ", " : "", t->compressed[x] ? "compressed" : "dense");
  fprintf(f, "], \"sparse\": %s, \"written\": %s, \"balanced\": %s}", t->sparse ? "true" : "false", t->written ? "true" : "false",
          t->balanced ? "true" : "false");
}

int cg_emit_api(FILE *f, const sp_program *sp, const cg_options *o) {
  fputs("{\"prefix\": ", f);
  json_str(f, o->prefix);
  fputs(", \"source\": ", f);
  json_str(f, o->source_name);
  fprintf(f, ", \"version\": \"%s\", \"target\": \"%s\",\n \"params\": [", PACKAGE_VERSION, sp->cuda ? "cuda" : "cpu");
  for (int i = 0; i < sp->nparams; i++) {
    fputs(i ? ",\n  " : "\n  ", f);
    json_param(f, &sp->params[i]);
  }
  fputs("],\n \"tensors\": [", f);
  int n = 0;
  for (int t = 0; t < sp->ntensors; t++) {
    if (sp->tensors[t].temp) continue;
    fputs(n++ ? ",\n  " : "\n  ", f);
    json_tensor(f, sp, &sp->tensors[t]);
  }
  /* grid_dims: the length of each array of PREFIX_balance (PREFIX_plan_create_balanced) */
  /* variants: how many schedules plan_create chooses among (distalc --auto; 0: no choice and no
   * PREFIX_schedule; 1: one schedule on the grid shape plan_create chooses) */
  fprintf(f, "],\n \"sparse\": %s, \"iterations\": %s, \"grid_dims\": %d, \"variants\": %d}\n", sp->any_sparse ? "true" : "false",
          sp->nloops ? "true" : "false", sp->ndims, sp->nvariants);
  return ferror(f) ? 1 : 0;
}
