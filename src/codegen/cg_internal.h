/* cg_internal.h -- shared by the C printers of src/codegen (not a public interface). */
#ifndef DISTAL_CG_INTERNAL_H
#define DISTAL_CG_INTERNAL_H

#include "codegen/codegen.h"

/* User names as C identifiers, prefixed by kind (emit_c.c says why): param i -> p_NAME,
 * index variable -> v_NAME, tensor t -> tT_NAME. */
const char *cg_param(const fe_program *p, int i);
const char *cg_var(const char *name);
const char *cg_tensor(const fe_program *p, int t);
void cg_size(FILE *f, const fe_program *p, const fe_size *z); /* an extent: p_NAME or a literal */
const char *cg_ctype(fe_type t);    /* double, float, int32_t, int64_t */
const char *cg_dtltype(fe_type t);  /* DTL_DOUBLE, ... */
bool cg_written(const fe_program *p, int t); /* the left side of some statement */
bool cg_any_sparse(const fe_program *p);
/* Print ", TYPE *NAME" of tensor t as generated functions take it (const when only read;
 * a sparse tensor is a const dtl_sparse *). */
void cg_tensor_param(FILE *f, const fe_program *p, int t);
/* Print a user expression over global coordinates; access(t, vars) prints an element. */
typedef void (*cg_access_fn)(FILE *f, const ir_stmt *s, const ir_expr *e, void *ctx);
void cg_print_expr(FILE *f, const ir_program *ir, const ir_stmt *s, const ir_expr *e,
                   fe_type t, cg_access_fn access, void *ctx);
/* Floating-point operations of one run (for GFLOP/s). */
void cg_print_flops(FILE *f, const lw_program *lp);

void cg_emit_driver(FILE *c, const lw_program *lp, const cg_options *o);

#endif
