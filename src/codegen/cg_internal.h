/* cg_internal.h -- shared by the printers of src/codegen (not a public interface): the C
 * printer (emit_c.c), the CUDA printer (emit_cuda.c) and the driver printer (emit_driver.c).
 * They read the SPMD program (spmd.h) and nothing else, and decide nothing: every name, bound,
 * operation and flag they print is in it. */
#ifndef DISTAL_CG_INTERNAL_H
#define DISTAL_CG_INTERNAL_H

#include "codegen/codegen.h"

/* User names as C identifiers, prefixed by kind (emit_c.c says why): param i -> p_NAME,
 * index variable -> v_NAME, tensor t -> tT_NAME. */
const char *cg_param(const sp_program *sp, int i);
const char *cg_param_ctype(const sp_program *sp, int i); /* int64_t, or double for a floating param */
const char *cg_var(const char *name);
const char *cg_tensor(const sp_program *sp, int t);
const char *cg_ctype(fe_type t);    /* double, float, int32_t, int64_t */
const char *cg_dtltype(fe_type t);  /* DTL_DOUBLE, ... */
const char *cg_typename(fe_type t); /* double, float, int32, int64 */
/* Print ", TYPE *NAME" of tensor t as generated functions take it (const when only read;
 * a sparse tensor is a const dtl_sparse *). */
void cg_tensor_param(FILE *f, const sp_program *sp, int t);
/* A symbolic value as C: params p_NAME, coordinates dtl_coords[d], variables by name (or, in
 * a box function, from its argument vector). */
void cg_sym(FILE *f, const sp_program *sp, const sym *e, bool in_callback);
/* The C name of a program variable. */
const char *cg_vname(const sp_program *sp, int v);
/* A literal of an expression of type t, exactly. */
void cg_num(FILE *f, const sp_expr *e, fe_type t);
/* An expression; access(f, e, ctx) prints an element. */
typedef void (*cg_access_fn)(FILE *f, const sp_expr *e, void *ctx);
void cg_print_expr(FILE *f, const sp_program *sp, const sp_expr *e, fe_type t, cg_access_fn access, void *ctx);
/* A loop's condition, with C's arithmetic: integer operations in int64, the rest in double. */
void cg_print_cond(FILE *f, const sp_program *sp, const sp_expr *e, cg_access_fn access, void *ctx);
/* Floating-point operations of one run (for GFLOP/s). */
void cg_print_flops(FILE *f, const sp_program *sp);

/* The statement printer's state, shared with the CUDA printer. */
typedef struct cg_st {
  FILE *f;
  const sp_program *sp;
  const sp_func *fn;
  const cg_options *o;
  int ind;
  FILE *cu;           /* PREFIX.cu: device kernels */
  FILE *decl;         /* file-scope declarations the statement function needs */
  bool in_kernel;     /* printing a device kernel's body */
  const sp_node *width; /* the enclosing SN_WIDTH (NULL: none) */
  bool w32;           /* ... printing its 32-bit branch */
  int th_mode;        /* a loop of the pass threads: 1 printing its shared version, 2 its own (0: neither) */
  int skip_var;       /* the innermost loop being printed runs on one thread over this variable, which its
                       * body may move on (an overlap guard's skip); -1: none */
  /* the rewrite hoist: the operands of the innermost loop being printed that are read once
   * before it, as the locals dtl_hN (hoist_id[k]: N of hoist_e[k]) */
  int nhoist, hoist_next;
  const sp_expr *hoist_e[16];
  int hoist_id[16];
  const char *acc_sfx; /* the rewrite jam: the register sum being printed is dtl__acc<acc_sfx> (NULL: dtl__acc) */
  /* the rewrite strips: the stripped loop's inner loop K and its assignment a, printed as the
   * lanes of a whole strip (strip_phase 1) of strip_w (C text) registers, or over the columns
   * left over, adding to the output (2); 0: neither */
  const sp_node *strip_K, *strip_a;
  int strip_phase;
  const char *strip_w;
} cg_st;
void cg_line(cg_st *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cg_node(cg_st *g, const sp_node *n);   /* print a node (host or kernel body) */
const char *cg_bname(const cg_st *g, int buf); /* a buffer's C name: tT_NAME or in_tT_NAME */
void cg_emit_device(cg_st *g, const sp_node *n); /* SN_DEVICE (emit_cuda.c) */

void cg_emit_driver(FILE *c, const sp_program *sp, const cg_options *o);

#endif
