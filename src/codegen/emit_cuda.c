/* emit_cuda.c -- the CUDA printer: a device region of the SPMD program (SN_DEVICE) as one
 * CUDA kernel in PREFIX.cu and its launch in PREFIX.c.  The host fills an argument struct with
 * everything the loop body names (params, grid coordinates, the values of enclosing loops,
 * buffers and their layouts) and launches the kernel on the compute stream; each thread
 * recovers its indices from its flat index, the slowest thread loop first, and runs the rest
 * of the nest, which the C printer spells (in kernel mode: atomic adds where the program says
 * so).  The kernel's threads, their ranges and atomics are the program's, not this file's. */
#include "config.h"
#include "codegen/cg_internal.h"

#include <stdlib.h>
#include <string.h>

#define line cg_line

void cg_emit_device(cg_st *g, const sp_node *n) {
  const sp_program *sp = g->sp;
  const sp_func *fn = g->fn;
  char kn[256];
  /* a run-time variant's kernels carry its functions' prefix (PREFIX_vN) */
  snprintf(kn, sizeof kn, "%s_%s", g->o->fn_prefix ? g->o->fn_prefix : g->o->prefix, n->kname);
  int nm = n->nmapped;
  char *td = NULL;
  size_t tl = 0;
  FILE *t = open_memstream(&td, &tl);
  fprintf(t, "/* arguments of kernel %s (statement %d) */\ntypedef struct {\n", kn, fn->index + 1);
  fprintf(t, "  int64_t dtl__total, dtl__mlo[%d], dtl__mn[%d];\n", nm + 1, nm + 1);
  fprintf(t, "  int64_t dtl_coords[%d];\n", sp->ndims);
  for (int i = 0; i < sp->nparams; i++) fprintf(t, "  %s %s;\n", cg_param_ctype(sp, i), cg_param(sp, i));
  for (int q = 0; q < n->ncaptured; q++) fprintf(t, "  int64_t %s;\n", cg_vname(sp, n->captured[q]));
  for (int q = 0; q < n->nbufs; q++) {
    const sp_buf *b = &sp->bufs[n->bufs[q]];
    const char *nmb = cg_bname(g, n->bufs[q]);
    fprintf(t, "  %s *dtl_%s;\n  int64_t dtl_%s_lo[%d], dtl_%s_st[%d];\n", cg_ctype(sp->tensors[b->tensor].type), nmb, nmb, b->order + 1, nmb,
            b->order + 1);
  }
  fprintf(t, "} %s_args;\n", kn);
  fclose(t);
  /* host: declarations before the statement function, the launch here */
  fprintf(g->decl, "%sint %s_launch(const %s_args *dtl_a, void *dtl_stream); /* in the .cu file */\n\n", td, kn, kn);
  line(g, "{ /* the local loops on the device: kernel %s, threads over %d loop%s%s */", kn, nm, nm == 1 ? "" : "s",
       n->atomic ? ", atomic updates" : "");
  g->ind += 2;
  line(g, "%s_args dtl__ka;", kn);
  line(g, "memset(&dtl__ka, 0, sizeof dtl__ka);");
  line(g, "memcpy(dtl__ka.dtl_coords, dtl_coords, sizeof dtl__ka.dtl_coords);");
  for (int i = 0; i < sp->nparams; i++) line(g, "dtl__ka.%s = %s;", cg_param(sp, i), cg_param(sp, i));
  for (int q = 0; q < n->ncaptured; q++) line(g, "dtl__ka.%s = %s;", cg_vname(sp, n->captured[q]), cg_vname(sp, n->captured[q]));
  for (int q = 0; q < n->nbufs; q++) {
    const char *nmb = cg_bname(g, n->bufs[q]);
    line(g, "dtl__ka.dtl_%s = dtl_%s;", nmb, nmb);
    line(g, "memcpy(dtl__ka.dtl_%s_lo, dtl_%s_lo, sizeof dtl__ka.dtl_%s_lo);", nmb, nmb, nmb);
    line(g, "memcpy(dtl__ka.dtl_%s_st, dtl_%s_st, sizeof dtl__ka.dtl_%s_st);", nmb, nmb, nmb);
  }
  line(g, "dtl__ka.dtl__total = 1;");
  for (int q = 0; q < nm; q++) {
    char *lo = NULL, *hi = NULL;
    size_t ll, hl;
    FILE *fl = open_memstream(&lo, &ll), *fh = open_memstream(&hi, &hl);
    cg_sym(fl, sp, n->mapped_lo[q], false);
    cg_sym(fh, sp, n->mapped_hi[q], false);
    fclose(fl);
    fclose(fh);
    line(g, "dtl__ka.dtl__mlo[%d] = %s; /* loop %s */", q, lo, sp->vars[n->mapped_vars[q]].name);
    line(g, "dtl__ka.dtl__mn[%d] = dtl_max(0, (%s) - dtl__ka.dtl__mlo[%d]);", q, hi, q);
    line(g, "dtl__ka.dtl__total *= dtl__ka.dtl__mn[%d];", q);
    free(lo);
    free(hi);
  }
  line(g, "if (dtl_cu_check(dtl_ctx, %s_launch(&dtl__ka, dtl_cu_stream(dtl_ctx)), \"kernel %s\")) return 1;", kn, kn);
  g->ind -= 2;
  line(g, "}");
  /* the kernel */
  FILE *host = g->f;
  int ind = g->ind;
  g->f = g->cu;
  g->ind = 0;
  fprintf(g->cu, "%s", td);
  free(td);
  line(g, "/* statement %d: loops", fn->index + 1);
  for (int k = 0; k < n->nloops; k++)
    line(g, " *   %s%s", sp->vars[n->loop_vars[k]].name, n->loop_thread[k] ? " (threads)" : " (inside each thread)");
  line(g, " */");
  line(g, "DTL_KERNEL_P(%s, %s_args, dtl__ka) {", kn, kn);
  g->ind = 2;
  for (int i = 0; i < sp->nparams; i++) {
    const char *pn = cg_param(sp, i);
    line(g, "const %s %s = dtl__ka.%s;", cg_param_ctype(sp, i), pn, pn);
    line(g, "(void)%s;", pn);
  }
  line(g, "const int64_t *dtl_coords = dtl__ka.dtl_coords;");
  line(g, "(void)dtl_coords;");
  for (int q = 0; q < n->ncaptured; q++) {
    const char *v = cg_vname(sp, n->captured[q]);
    line(g, "const int64_t %s = dtl__ka.%s;\n  (void)%s;", v, v, v);
  }
  for (int q = 0; q < n->nbufs; q++) {
    const sp_buf *b = &sp->bufs[n->bufs[q]];
    const char *nmb = cg_bname(g, n->bufs[q]);
    line(g, "%s *dtl_%s = dtl__ka.dtl_%s;", cg_ctype(sp->tensors[b->tensor].type), nmb, nmb);
    line(g, "const int64_t *dtl_%s_lo = dtl__ka.dtl_%s_lo, *dtl_%s_st = dtl__ka.dtl_%s_st;", nmb, nmb, nmb, nmb);
    line(g, "(void)dtl_%s, (void)dtl_%s_lo, (void)dtl_%s_st;", nmb, nmb, nmb);
  }
  line(g, "DTL_FOR_EACH(dtl__t, dtl__ka.dtl__total) {");
  g->ind = 4;
  line(g, "int64_t dtl__r = dtl__t;");
  for (int q = nm - 1; q >= 0; q--) {
    const char *vn = cg_vname(sp, n->mapped_vars[q]);
    line(g, "const int64_t %s = dtl__ka.dtl__mlo[%d] + dtl__r %% dtl__ka.dtl__mn[%d];", vn, q, q);
    line(g, "(void)%s;", vn);
    line(g, "dtl__r /= dtl__ka.dtl__mn[%d];", q);
  }
  line(g, "(void)dtl__r;");
  g->in_kernel = true;
  for (int q = 0; q < n->nkids; q++) cg_node(g, n->kids[q]);
  g->in_kernel = false;
  g->ind = 2;
  line(g, "}");
  g->ind = 0;
  line(g, "}");
  line(g, "DTL_EXTERN_C int %s_launch(const %s_args *dtl_a, void *dtl_stream) {", kn, kn);
  line(g, "  return DTL_LAUNCH(%s, dtl_a->dtl__total, dtl_stream, *dtl_a);", kn);
  line(g, "}\n");
  g->f = host;
  g->ind = ind;
}
