/* codegen.h -- the printers of the SPMD program (spmd.h): the library form in C (PREFIX.h,
 * PREFIX.c of LANGUAGE.md section 7), its device kernels in CUDA (PREFIX.cu) and the driver
 * main() of section 8.  They print what the program says and decide nothing.  This header is
 * the stage's whole interface. */
#ifndef DISTAL_CODEGEN_H
#define DISTAL_CODEGEN_H

#include "lower_mpi/spmd.h"

typedef struct {
  const char *prefix;      /* name prefix of the generated API */
  const char *header_name; /* how PREFIX.c includes its header ("summa.h") */
  const char *source_name; /* the .dtl file, for comments */
  bool main;               /* also emit main() */
  bool debug;              /* verify every received box at run time */
  const char *fn_prefix;   /* the statement functions' names (NULL: prefix; a run-time
                            * variant's: PREFIX_vN) */
} cg_options;

/* Write the header and the source; for the CUDA target (sp->cuda) also the kernels (cu:
 * PREFIX.cu, compiled by nvcc; may be NULL otherwise).  Returns 0 on success. */
int cg_emit(FILE *h, FILE *c, FILE *cu, const sp_program *sp, const cg_options *o);
/* The interface that cg_emit's header declares, as one JSON object (distalc --emit api:
 * prefix, params, the tensors of the API, whether PREFIX_iterations exists).  Returns 0 on
 * success. */
int cg_emit_api(FILE *f, const sp_program *sp, const cg_options *o);


#endif
