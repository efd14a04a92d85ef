/* compiler.c -- distalc as a library (compiler.h): the stages of a unit run inside its arena
 * with a recovery point, so that running out of memory is a reported failure, not an exit. */
#include "compiler.h"
#include "autosched.h"

#include <stdlib.h>
#include <string.h>

static int out_of_memory(dc_unit *u) {
  fe_tool_error_src(u->src, "out of memory");
  return DC_NOMEM;
}

void dc_unit_free(dc_unit *u) {
  if (!u) return;
  if (u->ast) fe_program_free(u->ast);
  fe_source_free(u->src);
  ir_arena_delete(u->arena);
  free(u);
}

/* As distalc chooses without --target: a machine with a gpu level keeps its tensors in GPU
 * memory. */
static bool wants_cuda(const dc_unit *u, dc_target t) {
  if (t != DC_TARGET_AUTO) return t == DC_TARGET_CUDA;
  if (u->ir->machine < 0) return false;
  const fe_machine *M = &u->ast->machines[u->ir->machine];
  for (int l = 0; l < M->nlevels; l++)
    if (M->levels[l].kind == FE_GPU) return true;
  return false;
}

/* The stages after the front end, in the unit's arena. */
static int build(dc_unit *u, dc_target target, bool no_lower) {
  ir_scope sc;
  ir_scope_enter(&sc, u->arena);
  if (setjmp(sc.oom)) return out_of_memory(u);
  int rc = DC_ERRORS;
  u->ir = ir_build(u->ast);
  if (u->ir && ir_schedule(u->ir, -1) == 0) {
    u->cuda = wants_cuda(u, target);
    if (no_lower || (u->lp = lw_lower(u->ir, u->cuda))) rc = DC_OK;
  }
  ir_scope_leave(&sc);
  return rc;
}

int dc_compile_source(fe_source *src, const dc_options *o, dc_unit **out) {
  *out = NULL;
  dc_unit *u = calloc(1, sizeof *u);
  ir_arena *arena = u ? ir_arena_new() : NULL;
  if (!arena) {
    fe_tool_error_src(src, "out of memory");
    free(u);
    fe_source_free(src);
    return DC_NOMEM;
  }
  u->src = src, u->arena = arena;
  if (o && o->arena_limit) ir_arena_set_limit(arena, o->arena_limit);
  int rc = DC_ERRORS;
  u->ast = fe_parse(src);
  if (u->ast && fe_check(u->ast) == 0) rc = build(u, o ? o->target : DC_TARGET_AUTO, o && o->no_lower);
  if (rc != DC_OK) {
    dc_unit_free(u);
    return rc;
  }
  *out = u;
  return DC_OK;
}

int dc_compile(const char *path, const char *text, size_t len, const dc_options *o, dc_unit **out) {
  *out = NULL;
  fe_source *src = fe_source_from_string(path, text, len, NULL);
  if (!src) {
    fe_tool_error(o ? &o->sink : NULL, NULL, path, "out of memory");
    return DC_NOMEM;
  }
  if (o) src->sink = o->sink, src->max_errors = o->max_errors;
  return dc_compile_source(src, o, out);
}

int dc_clone(dc_unit *u, const ir_program *ir, ir_program **out) {
  *out = NULL;
  ir_scope sc;
  ir_scope_enter(&sc, u->arena);
  if (setjmp(sc.oom)) return out_of_memory(u);
  *out = ir_program_clone(ir);
  ir_scope_leave(&sc);
  return DC_OK;
}

int dc_schedule(dc_unit *u, ir_program *ir, int stmt, const fe_command *cmds, int ncmds) {
  ir_scope sc;
  ir_scope_enter(&sc, u->arena);
  if (setjmp(sc.oom)) return out_of_memory(u);
  int errors = ir_schedule_stmt(ir, &ir->stmts[stmt], cmds, ncmds);
  ir_scope_leave(&sc);
  return errors ? DC_ERRORS : DC_OK;
}

int dc_lower(dc_unit *u, ir_program *ir, lw_program **out) { return dc_lower_stmt(u, ir, -1, NULL, out); }

int dc_lower_stmt(dc_unit *u, ir_program *ir, int only, const lw_owner *owners, lw_program **out) {
  *out = NULL;
  ir_scope sc;
  ir_scope_enter(&sc, u->arena);
  if (setjmp(sc.oom)) return out_of_memory(u);
  *out = lw_lower_stmt(ir, u->cuda, only, owners);
  ir_scope_leave(&sc);
  return *out ? DC_OK : DC_ERRORS;
}

/* the SPMD program of lp, with the unit's run-time variants where lp is the first (in the
 * unit's arena, inside a scope) */
static sp_program *build_sp(dc_unit *u, const lw_program *lp) {
  sp_program *sp = spmd_build_ex(lp, !u->no_fuse);
  if (u->nvariants < (u->shape_free ? 1 : 2) || lp != u->variants[0].lp || sp->any_sparse) return sp;
  sp->shape_free = u->shape_free;
  int n = u->nvariants;
  const sp_program **alts = ir_alloc((size_t)n * sizeof *alts);
  const double **speed = ir_alloc((size_t)n * sizeof *speed), **thr = ir_alloc((size_t)n * sizeof *thr);
  const char **labels = ir_alloc((size_t)n * sizeof *labels);
  const char *const **sched = ir_alloc((size_t)n * sizeof *sched);
  for (int v = 0; v < n; v++) {
    alts[v] = v ? spmd_build_ex(u->variants[v].lp, !u->no_fuse) : sp;
    speed[v] = u->variants[v].speedup, thr[v] = u->variants[v].threads, labels[v] = u->variants[v].label;
    sched[v] = (const char *const *)u->variants[v].schedule;
  }
  spmd_variants(sp, alts, n, speed, thr, labels, sched, u->model, u->mem_limit, dc_stmt_runs(u));
  return sp;
}

int dc_spmd(dc_unit *u, const lw_program *lp, sp_program **out) {
  *out = NULL;
  ir_scope sc;
  ir_scope_enter(&sc, u->arena);
  if (setjmp(sc.oom)) return out_of_memory(u);
  *out = build_sp(u, lp);
  ir_scope_leave(&sc);
  return DC_OK;
}

int dc_emit(dc_unit *u, const lw_program *lp, FILE *h, FILE *c, FILE *cu, const cg_options *o) {
  ir_scope sc;
  ir_scope_enter(&sc, u->arena);
  if (setjmp(sc.oom)) return out_of_memory(u);
  int bad = cg_emit(h, c, cu, build_sp(u, lp), o);
  ir_scope_leave(&sc);
  return bad ? DC_ERRORS : DC_OK;
}
