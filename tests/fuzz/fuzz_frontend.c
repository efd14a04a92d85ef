/* fuzz_frontend.c -- libFuzzer target of the front end: any bytes go through fe_parse,
 * fe_check and the printers without crashing, leaking or hanging.
 *
 * Built with -DFUZZ_REPLAY it is instead a plain program that runs the harness once on each
 * file named on its command line (a directory stands for the files in it); with no
 * arguments, on $top_srcdir/tests/fuzz/corpus and $top_srcdir/examples. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull;
  if (!devnull && !(devnull = fopen("/dev/null", "w")))
    return 0;
  fe_source *src = fe_source_from_string("fuzz.dtl", (const char *)data, size, devnull);
  if (!src)
    return 0;
  src->max_errors = size % 2 ? 0 : 5; /* exercise the "too many errors" path too */
  fe_program *prog = fe_parse(src);
  if (prog) {
    fe_check(prog);
    for (int k = 0; k < prog->ntensors; k++) {
      for (int d = 0; d < prog->tensors[k].order; d++)
        fe_print_size(devnull, prog, &prog->tensors[k].dims[d]);
      fputs(fe_type_name(prog->tensors[k].type), devnull);
    }
    for (int k = 0; k < prog->nstmts; k++)
      fe_print_expr(devnull, prog->stmts[k].rhs);
    /* the later stages: schedule rewrites, lowering, the plan and C printers */
    if (src->nerrors == 0) {
      ir_program *ir = ir_build(prog);
      if (ir && ir_schedule(ir, -1) == 0) {
        for (int k = 0; k < ir->nstmts; k++) ir_print_cin(devnull, ir, &ir->stmts[k]);
        lw_program *lp = lw_lower(ir, false);
        if (lp) {
          int64_t *params = malloc((prog->nparams + 1) * sizeof *params); /* as many as declared */
          if (!params) abort();
          for (int k = 0; k < prog->nparams; k++) params[k] = prog->params[k].has_default ? prog->params[k].value % 64 + 1 : 3;
          lw_print_plan(devnull, lp, params, 4);
          free(params);
          cg_options o = {.prefix = "fuzz", .header_name = "fuzz.h", .source_name = "fuzz.dtl", .main = true};
          sp_program *sp = spmd_build(lp);
          spmd_print(devnull, sp);
          cg_emit(devnull, devnull, devnull, sp, &o);
        }
        /* the CUDA target: host code and kernels */
        lp = lw_lower(ir, true);
        if (lp) {
          cg_options o = {.prefix = "fuzz", .header_name = "fuzz.h", .source_name = "fuzz.dtl", .main = true};
          sp_program *sp = spmd_build(lp);
          spmd_print(devnull, sp);
          cg_emit(devnull, devnull, devnull, sp, &o);
        }
      }
      ir_arena_free();
    }
    fe_program_free(prog);
  }
  fe_source_free(src);
  return 0;
}

#ifdef FUZZ_REPLAY
#define FUZZ_REPLAY_NAME "fuzz_replay"
#include "fuzz_replay.h"

int main(int argc, char **argv) {
  int count = 0, rc = 0;
  if (argc > 1) {
    for (int k = 1; k < argc; k++)
      rc |= replay(argv[k], &count);
  } else {
    const char *top = getenv("top_srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus", top ? top : ".");
    rc |= replay(path, &count);
    snprintf(path, sizeof path, "%s/examples", top ? top : ".");
    struct stat st;
    if (stat(path, &st) == 0)
      rc |= replay(path, &count);
  }
  printf("fuzz_replay: %d inputs\n", count);
  return rc;
}
#endif
