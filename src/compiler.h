/* compiler.h -- distalc as a library: a .dtl source text in, its scheduled concrete index
 * notation and lowered program out, for a caller that builds and compares many programs in
 * one process (an auto-scheduler trying schedules, say).
 *
 * A compiled unit owns everything of its program: the source, the AST and an arena with
 * every IR object built for it (ir_program, copies, lowerings), all freed by dc_unit_free;
 * units may be built, used and freed in any order.  Diagnostics go to the unit's source's
 * sink (frontend.h), by default to stderr as distalc prints them.  Every function below runs
 * the stages inside the unit's arena with a recovery point (ir_scope): when memory runs out
 * it reports "distalc: out of memory" through the sink and returns DC_NOMEM.  Between these
 * calls, reading and printing the IR (ir_print_cin, lw_print_plan) allocates nothing; to
 * call the functions of ir.h that build IR on a unit's program directly (ir_stmt_clone,
 * ir_schedule_stmt), enter its arena first with ir_scope_enter(&sc, u->arena).
 *
 *     dc_unit *u;
 *     if (dc_compile("t.dtl", text, len, &(dc_options){.sink = {collect, &log}}, &u) == DC_OK) {
 *       lw_print_plan(stdout, u->lp, params, nranks);
 *       dc_unit_free(u);
 *     }
 */
#ifndef DISTAL_COMPILER_H
#define DISTAL_COMPILER_H

#include "codegen/codegen.h"

/* What every function returns (the exit status distalc gives for each). */
enum { DC_OK = 0, DC_ERRORS = 1, DC_NOMEM = 2 };

typedef enum { DC_TARGET_AUTO, DC_TARGET_CPU, DC_TARGET_CUDA } dc_target;

typedef struct {
  fe_sink sink;       /* dc_compile: where diagnostics go ({0}: stderr) */
  int max_errors;     /* dc_compile: errors shown at most (0: no limit; distalc shows 50) */
  dc_target target;   /* AUTO: cuda for a machine with a gpu level, else cpu (as distalc) */
  bool no_lower;      /* stop after scheduling: lp stays NULL (dc_lower later) */
  size_t arena_limit; /* a test hook: the unit's IR may take this many bytes (0: no limit) */
} dc_options;

/* A candidate program for the run-time choice (distalc --auto; spmd_variants): the unit's
 * program with other schedules for the statements the search chose. */
typedef struct {
  lw_program *lp;          /* the program with these schedules, lowered */
  const double *speedup;   /* per statement: its leaf kernel's speedup in the model (1: none) */
  const double *threads;   /* per statement: the threads its loops run on in the model */
  const char *label;       /* where the search chose it */
  const char **schedule;   /* per statement: the commands chosen, as .dtl ("": its default) */
} dc_variant;

typedef struct {
  fe_source *src;   /* the text, its name, its sink and its error count */
  fe_program *ast;
  ir_program *ir;   /* the scheduled concrete index notation */
  lw_program *lp;   /* the lowered program (NULL with no_lower) */
  bool cuda;        /* the target: CUDA, else C + MPI */
  bool no_fuse;     /* dc_spmd, dc_emit: no program-level rewrites (distalc --no-fuse) */
  /* dc_spmd, dc_emit of variants[0].lp: plan_create chooses among these programs at run time
   * (nvariants > 1), by the machine model {bandwidth, latency, point_time} and the memory
   * limit (bytes of buffers per rank, 0: none) */
  int nvariants;
  dc_variant *variants;
  bool shape_free;  /* --auto chose the grid's shape and plan_create chooses it too (nvariants
                     * >= 1 then: a flat CPU machine with free grid params used once) */
  double model[7]; /* the machine model of the variants' formulas: bandwidth, latency, point_time, memory_bandwidth,
                    * node_bandwidth, node_latency (resolved: > 0) and the search's ranks per node (0: one node) */
  int64_t mem_limit;
  ir_arena *arena;  /* holds ir, lp and every copy and lowering made through the unit */
} dc_unit;

/* Parse, check, build, schedule and (unless o->no_lower) lower the text, named `path` in
 * diagnostics; o may be NULL.  On DC_OK *out is the unit, else NULL (the diagnostics went to
 * the sink and everything is freed). */
int dc_compile(const char *path, const char *text, size_t len, const dc_options *o, dc_unit **out);
/* The same for a source already opened (fe_source_open: distalc reads files); its sink and
 * max_errors apply, not o's.  The unit takes src: freed with it, or here on failure. */
int dc_compile_source(fe_source *src, const dc_options *o, dc_unit **out);
void dc_unit_free(dc_unit *u);

/* A deep copy of ir (u->ir or another program of u) in u's arena (ir_program_clone). */
int dc_clone(dc_unit *u, const ir_program *ir, ir_program **out);
/* Apply commands to statement `stmt` of ir, a program of u (a copy, to leave u->ir as it is),
 * after those it has (ir_schedule_stmt says where the commands may come from).  On errors
 * the statement keeps the commands applied before the failing one, as with ir_schedule. */
int dc_schedule(dc_unit *u, ir_program *ir, int stmt, const fe_command *cmds, int ncmds);
/* Lower ir, a program of u, for u's target; *out is the lowered program (NULL on failure). */
int dc_lower(dc_unit *u, ir_program *ir, lw_program **out);
/* Statement `only` alone (-1: all), for costing it, with the owners of lw_owners (NULL:
 * built): lw_lower_stmt. */
int dc_lower_stmt(dc_unit *u, ir_program *ir, int only, const lw_owner *owners, lw_program **out);
/* The SPMD program of lp, a lowering of u, after the rewrites (spmd_build); *out is NULL on
 * failure.  Several can be built from one lowering; each lives in u's arena. */
int dc_spmd(dc_unit *u, const lw_program *lp, sp_program **out);
/* cg_emit of the SPMD program of lp, a lowering of u; DC_ERRORS when writing failed (nothing
 * is reported then: the caller knows its files). */
int dc_emit(dc_unit *u, const lw_program *lp, FILE *h, FILE *c, FILE *cu, const cg_options *o);

#endif
