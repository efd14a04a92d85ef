/* emit_driver.c -- the main() of generated executables (LANGUAGE.md section 8) and the
 * serial reference that --validate compares with: plain loops over the original index
 * variables on whole arrays gathered on rank 0, independent of the schedule and of the
 * distributed code. */
#include "codegen/cg_internal.h"

#include <string.h>

/* an element of a whole array in the reference (the output's snapshot where the right side
 * reads the output) */
static void ref_index(FILE *f, const sp_program *sp, const sp_expr *e) {
  fputc('[', f);
  if (!e->nidx) fputc('0', f);
  for (int x = 0; x < e->nidx; x++) {
    if (x) fputs(" + (", f);
    fputs(cg_vname(sp, e->vars[x]), f);
    for (int y = x + 1; y < e->nidx; y++) {
      fputs(" * ", f);
      sym_print(f, sp->tensors[e->tensor].ext[y], NULL, NULL);
    }
    if (x) fputc(')', f);
  }
  fputc(']', f);
}

typedef struct {
  const sp_program *sp;
  const sp_func *fn;
} refctx;

static void ref_access(FILE *f, const sp_expr *e, void *vc) {
  refctx *c = vc;
  bool snap = e->tensor == c->fn->lhs_tensor;
  fprintf(f, "%s%s", snap ? "r_in_" : "r_", cg_tensor(c->sp, e->tensor));
  ref_index(f, c->sp, e);
}

static void print_volume(FILE *c, const sp_program *sp, int t) {
  fputs("(int64_t)1", c);
  for (int x = 0; x < sp->tensors[t].order; x++) {
    fputs(" * ", c);
    sym_print(c, sp->tensors[t].ext[x], NULL, NULL);
  }
}

static void emit_ref_stmt(FILE *c, const sp_program *sp, const sp_func *fn, int ind0) {
  const char *out = cg_tensor(sp, fn->lhs_tensor);
  const char *ct = cg_ctype(sp->tensors[fn->lhs_tensor].type);
  fprintf(c, "%*s{ /* statement %d */\n", ind0, "", fn->index + 1);
  int ind = ind0 + 2;
  fprintf(c, "%*sconst int64_t vol = ", ind, "");
  print_volume(c, sp, fn->lhs_tensor);
  fprintf(c, ";\n%*s%s *r_in_%s = malloc((size_t)(vol > 0 ? vol : 1) * sizeof(%s));\n", ind, "", ct, out, ct);
  fprintf(c, "%*sif (!r_in_%s) return 1;\n%*smemcpy(r_in_%s, r_%s, (size_t)vol * sizeof(%s));\n", ind, "", out, ind, "", out, out, ct);
  if (!fn->accumulate) fprintf(c, "%*smemset(r_%s, 0, (size_t)vol * sizeof(%s));\n", ind, "", out, ct);
  for (int v = 0; v < fn->nref; v++) {
    const char *vn = cg_vname(sp, fn->ref_vars[v]);
    /* dtl_rev: every loop backwards (the sums in the other order, --validate's rounding probe) */
    fprintf(c, "%*sfor (int64_t %s = dtl_rev ? (", ind, "", vn);
    sym_print(c, fn->ref_ext[v], NULL, NULL);
    fprintf(c, ") - 1 : 0; dtl_rev ? %s >= 0 : %s < (", vn, vn);
    sym_print(c, fn->ref_ext[v], NULL, NULL);
    fprintf(c, "); %s += dtl_rev ? -1 : 1)\n", vn);
    ind += 2;
  }
  refctx rc = {sp, fn};
  /* the left side is written through r_, never through the snapshot */
  fprintf(c, "%*sr_%s", ind, "", out);
  ref_index(c, sp, fn->ref_lhs);
  fputs(" += ", c);
  cg_print_expr(c, sp, fn->ref_rhs, sp->tensors[fn->lhs_tensor].type, ref_access, &rc);
  fprintf(c, ";\n%*sfree(r_in_%s);\n%*s}\n", ind0 + 2, "", out, ind0, "");
}

/* a scalar of a loop's condition in the reference */
static void ref_scalar(FILE *f, const sp_expr *e, void *vc) {
  const sp_program *sp = vc;
  fprintf(f, "r_%s[0]", cg_tensor(sp, e->tensor));
}

static void emit_ref_items(FILE *c, const sp_program *sp, const sp_item *list, int n, int ind, bool top) {
  for (int k = 0; k < n; k++) {
    const sp_item *it = &list[k];
    if (it->kind == SP_CALL) {
      emit_ref_stmt(c, sp, &sp->funcs[it->func], ind);
      continue;
    }
    int L = it->number;
    fprintf(c, "%*sfor (int64_t r_it%d = 0, r_n%d = ", ind, "", L, L);
    sym_print(c, it->bound, NULL, NULL);
    fprintf(c, "; r_it%d < r_n%d; r_it%d++) { /* loop %d */\n", L, L, L, L);
    if (top) fprintf(c, "%*s++*dtl_iters;\n", ind + 2, "");
    emit_ref_items(c, sp, it->items, it->nitems, ind + 2, false);
    if (it->cond) {
      fprintf(c, "%*sif (", ind + 2, "");
      cg_print_cond(c, sp, it->cond, ref_scalar, (void *)sp);
      fputs(") break;\n", c);
    }
    fprintf(c, "%*s}\n", ind, "");
  }
}

static void emit_reference(FILE *c, const sp_program *sp, const cg_options *o) {
  fprintf(c, "/* serial reference: the program as written (its statements and loops), on whole arrays */\n");
  fprintf(c, "static int %s_reference(const int64_t *dtl_p, int dtl_rev, int64_t *dtl_iters", o->prefix);
  for (int t = 0; t < sp->ntensors; t++) fprintf(c, ", %s *r_%s", cg_ctype(sp->tensors[t].type), cg_tensor(sp, t));
  fputs(") {\n  *dtl_iters = 0;\n  (void)dtl_rev;\n", c);
  for (int t = 0; t < sp->ntensors; t++) fprintf(c, "  (void)r_%s;\n", cg_tensor(sp, t));
  for (int i = 0; i < sp->nparams; i++)
    if (sp->params[i].is_float)
      fprintf(c, "  const double %s = dtl_as_double(dtl_p[%d]);\n  (void)%s;\n", cg_param(sp, i), i, cg_param(sp, i));
    else
      fprintf(c, "  const int64_t %s = dtl_p[%d];\n  (void)%s;\n", cg_param(sp, i), i, cg_param(sp, i));
  emit_ref_items(c, sp, sp->items, sp->nitems, 2, true);
  fputs("  return 0;\n}\n\n", c);
}

/* sym_print's default namer prints p<i> for params: define those names in the reference */
static void emit_param_aliases(FILE *c, const sp_program *sp) {
  for (int i = 0; i < sp->nparams; i++) fprintf(c, "#define dtl_p%d (dtl_p[%d])\n", i, i);
}

/* Balanced partitions: before the plan, each balanced tensor is read (or filled) into blocks of
 * equal extent (a plan without splits) and its entries give the boundaries of the real plan's
 * blocks (dtl_sparse_balance); dtl_bal holds them for plan_create_balanced. */
static void emit_balance_prepass(FILE *c, const sp_program *sp, const char *P) {
  int ns = sp->nsplits;
  if (!ns) return;
  fprintf(c, "  /* balanced partitions: the boundaries from the entries, read first into blocks of equal extent */\n");
  fprintf(c, "  %s_balance dtl_bal;\n  memset(&dtl_bal, 0, sizeof dtl_bal);\n  static int64_t *dtl_bounds[%d];\n", P, ns);
  fprintf(c, "  {\n    %s_plan *p0 = NULL;\n    int e0 = %s_plan_create(MPI_COMM_WORLD, &prm, &p0);\n", P, P);
  fprintf(c, "    if (e0) {\n      if (rank == 0) fprintf(stderr, \"%%s: %%s\\n\", argv[0], %s_error(p0));\n"
             "      %s_plan_destroy(&p0);\n      MPI_Finalize();\n      return 1;\n    }\n    dtl_ctx *c0 = p0->ctx;\n", P, P);
  int k = 0;
  for (int t = 0; t < sp->ntensors; t++) {
    if (!sp->tensors[t].balanced) continue;
    const char *n = cg_tensor(sp, t);
    fprintf(c, "    if (!e0) { /* %s */\n      dtl_sparse s0;\n      memset(&s0, 0, sizeof s0);\n      const char *path = NULL;\n"
               "      for (int k = 0; k < opt.nload; k++)\n        if (opt.load_tensor[k] == %d) path = opt.load_path[k];\n", sp->tensors[t].name, t);
    fprintf(c, "      if (path) {\n        e0 = dtl_sparse_read(c0, path, &p0->dist[%d], %s, lv_%s, &p0->own[%d], &s0);\n      } else {\n"
               "        char fe[256];\n        int e = dtl_sparse_fill(&s0, %s, opt.fill, opt.seed, %d, opt.density, %d, lv_%s, p0->dist[%d].extent, &p0->own[%d], fe, sizeof fe);\n"
               "        if (e) dtl_fail(c0, \"tensor %s: %%s\", fe);\n        e0 = dtl_any_error(c0, e);\n      }\n",
            t, cg_dtltype(sp->tensors[t].type), n, t, cg_dtltype(sp->tensors[t].type), t, sp->tensors[t].order, n, t, t, sp->tensors[t].name);
    for (int g = 0; g < sp->ndims; g++) {
      int id = g < LW_MAX_DIMS ? sp->tensors[t].split[g] : -1;
      if (id < 0) continue;
      fprintf(c, "      dtl_bounds[%d] = malloc(sizeof(int64_t) * (size_t)(c0->dims[%d] + 1));\n"
                 "      if (!e0) e0 = dtl_any_error(c0, dtl_bounds[%d] ? 0 : dtl_fail(c0, \"out of memory\"));\n"
                 "      if (!e0) e0 = dtl_sparse_balance(c0, &p0->dist[%d], &s0, &p0->own[%d], %d, dtl_bounds[%d]);\n"
                 "      ((const int64_t **)&dtl_bal)[%d] = dtl_bounds[%d];\n",
              id, g, id, t, t, g, id, k * sp->ndims + g, id);
    }
    fputs("      dtl_sparse_free(&s0);\n    }\n", c);
    k++;
  }
  fprintf(c, "    if (e0 && rank == 0) fprintf(stderr, \"%%s: %%s\\n\", argv[0], dtl_ctx_error(c0));\n"
             "    %s_plan_destroy(&p0);\n    if (e0) {\n      MPI_Finalize();\n      return 1;\n    }\n  }\n", P);
}

void cg_emit_driver(FILE *c, const sp_program *sp, const cg_options *o) {
  const char *P = o->prefix;
  int nt = sp->ntensors, np = sp->nparams;
  fputs("\n/* ---- driver ---------------------------------------------------------------- */\n", c);
  emit_param_aliases(c, sp);
  emit_reference(c, sp, o);
  for (int i = 0; i < sp->nparams; i++) fprintf(c, "#undef dtl_p%d\n", i);
  fputs("\nint main(int argc, char **argv) {\n  dtl_blas_core(argv); /* OpenBLAS's kernels for this CPU */\n"
        "  MPI_Init(&argc, &argv);\n  int rank = 0, status = 0;\n"
        "  MPI_Comm_rank(MPI_COMM_WORLD, &rank);\n", c);
  fprintf(c, "  static const char *const pnames[] = {");
  for (int i = 0; i < np; i++) fprintf(c, "%s\"%s\"", i ? ", " : "", sp->params[i].name);
  if (!np) fputs("\"\"", c);
  fprintf(c, "};\n  static const char *const tnames[] = {");
  for (int t = 0; t < nt; t++) fprintf(c, "%s\"%s\"", t ? ", " : "", sp->tensors[t].name);
  if (!nt) fputs("\"\"", c);
  fputs("};\n  static const bool pfloat[] = {", c);
  for (int i = 0; i < np; i++) fprintf(c, "%s%s", i ? ", " : "", sp->params[i].is_float ? "true" : "false");
  if (!np) fputs("false", c);
  fputs("};\n  static const bool pgrid[] = {", c); /* --help: which params the rank count gives */
  for (int i = 0; i < np; i++) fprintf(c, "%s%s", i ? ", " : "", sp->params[i].is_grid ? "true" : "false");
  if (!np) fputs("false", c);
  fputs("};\n", c);
  fprintf(c, "  %s_params prm;\n  %s_params_default(&prm);\n", P, P);
  fprintf(c, "  int64_t values[%d] = {", np + 1);
  fputs("0", c);
  fprintf(c, "};\n  memcpy(values, &prm, sizeof prm);\n  int64_t defaults[%d];\n  memcpy(defaults, values, sizeof defaults);\n", np + 1);
  fputs("  dtl_options opt;\n  char err[512];\n", c);
  /* the orders and sparsity of the tensors: which file formats --save takes */
  fputs("  static const int torders[] = {", c);
  for (int t = 0; t < nt; t++) fprintf(c, "%s%d", t ? ", " : "", sp->tensors[t].order);
  fputs(nt ? "};\n  static const bool tsparse[] = {" : "0};\n  static const bool tsparse[] = {false", c);
  for (int t = 0; t < nt; t++) fprintf(c, "%s%s", t ? ", " : "", sp->tensors[t].sparse ? "true" : "false");
  fputs("};\n", c);
  fputs("  static const bool ttemp[] = {", c);
  for (int t = 0; t < nt; t++) fprintf(c, "%s%s", t ? ", " : "", sp->tensors[t].temp ? "true" : "false");
  if (!nt) fputs("false", c);
  fputs("};\n  (void)ttemp;\n", c);
  fprintf(c, "  if (dtl_args_agree(MPI_COMM_WORLD, argc, argv, err, sizeof err) ||\n"
             "      dtl_parse_args(argc, argv, %d, pnames, pfloat, values, %d, tnames, &opt, err, sizeof err) ||\n"
             "      dtl_check_saves(&opt, %d, tnames, torders, tsparse, err, sizeof err)) {\n"
             "    if (rank == 0) fprintf(stderr, \"%%s: %%s (try --help)\\n\", argv[0], err);\n"
             "    MPI_Finalize();\n    return 2;\n  }\n", np, nt, nt);
  /* temporaries live inside the program: nothing to load or save */
  fputs("  for (int k = 0; k < opt.nload + opt.nsave && !opt.help; k++) {\n"
        "    int t = k < opt.nload ? opt.load_tensor[k] : opt.save_tensor[k - opt.nload];\n"
        "    if (ttemp[t]) {\n"
        "      if (rank == 0) fprintf(stderr, \"%s: %s %s=...: %s is a temporary of the program; it cannot be loaded or saved (try --help)\\n\",\n"
        "                             argv[0], k < opt.nload ? \"--load\" : \"--save\", tnames[t], tnames[t]);\n"
        "      MPI_Finalize();\n      return 2;\n    }\n"
        "  }\n", c);
  /* --help lists the tensors --load, --save and --fill take: not the temporaries */
  int nh = 0;
  fputs("  if (opt.help) {\n    static const char *const hnames[] = {", c);
  for (int t = 0; t < nt; t++)
    if (!sp->tensors[t].temp) fprintf(c, "%s\"%s\"", nh++ ? ", " : "", sp->tensors[t].name);
  if (!nh) fputs("\"\"", c);
  fprintf(c, "};\n    if (rank == 0) dtl_print_usage(stdout, argv[0], %d, pnames, pfloat, pgrid, defaults, %d, hnames, %s);\n"
             "    MPI_Finalize();\n    return 0;\n  }\n", np, nh, sp->any_sparse ? "true" : "false");
  fputs("  memcpy(&prm, values, sizeof prm); /* the params struct is an array of int64_t */\n", c);
  fprintf(c, "  %s_plan *plan = NULL;\n", P);
  for (int t = 0; t < nt; t++) {
    const char *n = cg_tensor(sp, t), *ct = cg_ctype(sp->tensors[t].type);
    fprintf(c, "  %s *t_%s = NULL, *i_%s = NULL, *g_%s = NULL, *r_%s = NULL;\n", ct, n, n, n, n);
    if (sp->tensors[t].sparse) {
      const sp_tensor *ft = &sp->tensors[t];
      fprintf(c, "  dtl_sparse s_%s, si_%s; /* this rank's piece, and its initial entries */\n  memset(&s_%s, 0, sizeof s_%s);\n"
                 "  memset(&si_%s, 0, sizeof si_%s);\n  bool dn_%s = false;\n", n, n, n, n, n, n, n);
      fprintf(c, "  static const dtl_level lv_%s[%d] = {", n, ft->order);
      for (int x = 0; x < ft->order; x++)
        fprintf(c, "%s%s", x ? ", " : "", ft->compressed[x] ? "DTL_LEVEL_COMPRESSED" : "DTL_LEVEL_DENSE");
      fputs("};\n", c);
    }
    if (sp->cuda) fprintf(c, "  %s *d_%s = NULL; /* the block in GPU memory */\n", ct, n);
    fprintf(c, "  int64_t n_%s = 0, gv_%s = 1;\n", n, n);
    if (sp->tensors[t].temp) { /* the plan holds a temporary: only the reference's array is used */
      fprintf(c, "  (void)n_%s, (void)t_%s, (void)i_%s, (void)g_%s;\n", n, n, n, n);
      if (sp->tensors[t].sparse) fprintf(c, "  (void)dn_%s, (void)lv_%s;\n", n, n);
      if (sp->cuda) fprintf(c, "  (void)d_%s;\n", n);
    }
  }
  if (sp->cuda) {
    /* binding first: the GPU a rank takes is the one nearest the cores it is bound to */
    fputs("  {\n    /* ranks on an even share of the node's cores (DISTAL_BIND), then each its GPU */\n"
          "    int size = 1, e = 0;\n    MPI_Comm_size(MPI_COMM_WORLD, &size);\n"
          "    int64_t all = size;\n    dtl_ctx *bctx = NULL;\n"
          "    e = dtl_ctx_create(MPI_COMM_WORLD, 1, &all, false, &bctx, err, sizeof err);\n"
          "    if (!e) dtl_bind(bctx, opt.verbose, stdout);\n"
          "    if (bctx) dtl_ctx_destroy(&bctx);\n"
          "    if (!e) e = dtl_cuda_select_device(MPI_COMM_WORLD, opt.verbose, stdout, err, sizeof err);\n"
          "    int first = e ? rank : size;\n"
          "    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);\n"
          "    if (first < size) {\n"
          "      if (rank == first) fprintf(stderr, \"%s: %s\\n\", argv[0], err);\n"
          "      MPI_Finalize();\n      return 1;\n    }\n  }\n", c);
  }
  emit_balance_prepass(c, sp, P);
  if (sp->nsplits)
    fprintf(c, "  if (%s_plan_create_balanced(MPI_COMM_WORLD, &prm, &dtl_bal, &plan)) {\n"
               "    if (rank == 0) fprintf(stderr, \"%%s: %%s\\n\", argv[0], %s_error(plan));\n"
               "    %s_plan_destroy(&plan);\n    MPI_Finalize();\n    return 1;\n  }\n", P, P, P);
  else
  fprintf(c, "  if (%s_plan_create(MPI_COMM_WORLD, &prm, &plan)) {\n"
             "    if (rank == 0) fprintf(stderr, \"%%s: %%s\\n\", argv[0], %s_error(plan));\n"
             "    %s_plan_destroy(&plan);\n    MPI_Finalize();\n    return 1;\n  }\n", P, P, P);
  fputs("  dtl_ctx *ctx = plan->ctx;\n  plan->monitor = opt.monitor;\n", c);
  if (!sp->cuda)
    fputs("  /* ranks and their threads on an even share of the node's cores (DISTAL_BIND) */\n"
          "  dtl_bind(ctx, opt.verbose, stdout);\n", c);
  if (np) fputs("  memcpy(values, plan->p, sizeof plan->p);\n", c);
  if (sp->nvariants > 0) /* --auto: the schedule plan_create chose for this rank count and these params */
    fprintf(c, "  if ((opt.stats || opt.verbose) && rank == 0) {\n    double pred = 0;\n    const char *sched = %s_schedule(plan, &pred);\n"
               "    printf(\"schedule: %%s\\nschedule: predicted %%.3g s per compute\\nschedule: grid\", sched, pred);\n"
               "    for (int g = 0; g < ctx->ndims; g++) printf(\"%%s%%lld\", g ? \" x \" : \" \", (long long)ctx->dims[g]);\n"
               "    printf(\" (%%d ranks)\\n\", ctx->size);\n"
               "    for (int v = 0; v < %d && opt.verbose; v++)\n"
               "      printf(\"schedule: variant %%d predicted %%.9g s, buffers %%.0f bytes%%s\\n\", v, plan->predicted[v], plan->buffers[v],\n"
               "             v == plan->variant ? \" (chosen)\" : \"\");\n  }\n",
            P, sp->nvariants);
  /* tensors */
  for (int t = 0; t < nt; t++) {
    if (sp->tensors[t].temp) continue;
    const char *n = cg_tensor(sp, t), *un = sp->tensors[t].name, *ct = cg_ctype(sp->tensors[t].type);
    fprintf(c, "  n_%s = dtl_box_volume(&plan->own[%d]);\n", n, t);
    if (sp->tensors[t].sparse) {
      /* a sparse piece is dense only for --validate and --save to .npy (.mtx and .tns save the
       * stored entries: a piece far larger than memory as a dense block saves too) */
      fprintf(c, "  dn_%s = opt.validate;\n  for (int k = 0; k < opt.nsave; k++) {\n"
                 "    size_t l = strlen(opt.save_path[k]);\n"
                 "    dn_%s |= opt.save_tensor[k] == %d && l >= 4 && strcmp(opt.save_path[k] + l - 4, \".npy\") == 0;\n  }\n"
                 "  t_%s = calloc((size_t)(dn_%s && n_%s > 0 ? n_%s : 1), sizeof(%s));\n", n, n, t, n, n, n, n, ct);
      fprintf(c, "  i_%s = calloc(1, sizeof(%s));\n", n, ct);
    } else {
      fprintf(c, "  t_%s = dtl_zalloc((size_t)(n_%s > 0 ? n_%s : 1), sizeof(%s)); /* aligned to a cache line */\n", n, n, n, ct);
      fprintf(c, "  i_%s = calloc((size_t)(n_%s > 0 ? n_%s : 1), sizeof(%s));\n", n, n, n, ct);
    }
    fprintf(c, "  if (!t_%s || !i_%s) status = dtl_fail(ctx, \"out of memory for %s\");\n", n, n, un);
    if (sp->cuda) {
      fprintf(c, "  d_%s = dtl_cu_malloc((size_t)(n_%s > 0 ? n_%s : 1) * sizeof(%s));\n", n, n, n, ct);
      fprintf(c, "  if (!d_%s) status = dtl_fail(ctx, \"out of GPU memory for %s\");\n", n, un);
    }
  }
  fputs("  if (dtl_any_error(ctx, status)) goto fail;\n", c);
  fputs("  /* initial values: --load, else --fill (a function of global coordinates only) */\n", c);
  fputs("  double t_load = MPI_Wtime();\n", c);
  for (int t = 0; t < nt; t++) {
    if (sp->tensors[t].temp) continue;
    const char *n = cg_tensor(sp, t), *un = sp->tensors[t].name;
    if (sp->tensors[t].sparse) {
      fprintf(c, "  {\n    const char *path = NULL;\n    for (int k = 0; k < opt.nload; k++)\n      if (opt.load_tensor[k] == %d) path = opt.load_path[k];\n", t);
      fprintf(c, "    if (path) {\n      if (dtl_sparse_read(ctx, path, &plan->dist[%d], %s, lv_%s, &plan->own[%d], &s_%s)) goto fail;\n    } else {\n",
              t, cg_dtltype(sp->tensors[t].type), n, t, n);
      fprintf(c, "      char fe[256];\n      int e = dtl_sparse_fill(&s_%s, %s, opt.fill, opt.seed, %d, opt.density, %d, lv_%s, plan->dist[%d].extent, &plan->own[%d], fe, sizeof fe);\n"
                 "      if (e) dtl_fail(ctx, \"tensor %s: %%s\", fe);\n      if (dtl_any_error(ctx, e)) goto fail;\n    }\n",
              n, cg_dtltype(sp->tensors[t].type), t, sp->tensors[t].order, n, t, t, un);
      fprintf(c, "    if (dn_%s) dtl_sparse_densify(&s_%s, t_%s);\n", n, n, n);
      if (sp->tensors[t].written)
        fprintf(c, "    if (dtl_any_error(ctx, dtl_sparse_copy(&si_%s, &s_%s) ? dtl_fail(ctx, \"out of memory for %s\") : 0)) goto fail;\n", n, n, un);
      fputs("  }\n", c);
      continue;
    }
    fprintf(c, "  {\n    const char *path = NULL;\n    for (int k = 0; k < opt.nload; k++)\n      if (opt.load_tensor[k] == %d) path = opt.load_path[k];\n", t);
    fprintf(c, "    if (path) {\n      if (dtl_npy_read(ctx, path, &plan->dist[%d], %s, t_%s, &plan->own[%d])) goto fail;\n    } else {\n",
            t, cg_dtltype(sp->tensors[t].type), n, t);
    fprintf(c, "      dtl_fill(%s, opt.fill, opt.seed, %d, %d, plan->dist[%d].extent, &plan->own[%d], t_%s);\n    }\n",
            cg_dtltype(sp->tensors[t].type), t, sp->tensors[t].order, t, t, n);
    fprintf(c, "    memcpy(i_%s, t_%s, (size_t)(n_%s > 0 ? n_%s : 0) * sizeof *t_%s);\n  }\n", n, n, n, n, n);
  }
  fputs("  t_load = MPI_Wtime() - t_load;\n"
        "  MPI_Allreduce(&t_load, &ctx->load_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);\n", c);
  /* validation inputs */
  fputs("  /* --validate: whole initial tensors on rank 0 */\n", c);
  for (int t = 0; t < nt; t++) {
    const char *n = cg_tensor(sp, t), *ct = cg_ctype(sp->tensors[t].type);
    (void)ct;
    fprintf(c, "  for (int d = 0; d < %d; d++) gv_%s *= plan->dist[%d].extent[d];\n", sp->tensors[t].order, n, t);
  }
  fputs("  if (opt.validate) {\n", c);
  for (int t = 0; t < nt; t++) {
    const char *n = cg_tensor(sp, t), *ct = cg_ctype(sp->tensors[t].type);
    fprintf(c, "    if (rank == 0) {\n      g_%s = calloc((size_t)(gv_%s > 0 ? gv_%s : 1), sizeof(%s));\n"
               "      r_%s = calloc((size_t)(gv_%s > 0 ? gv_%s : 1), sizeof(%s));\n"
               "      if (!g_%s || !r_%s) status = 1;\n    }\n", n, n, n, ct, n, n, n, ct, n, n);
  }
  fputs("    if (dtl_any_error(ctx, status)) {\n      dtl_fail(ctx, \"out of memory for --validate\");\n      goto fail;\n    }\n", c);
  for (int t = 0; t < nt; t++) {
    if (sp->tensors[t].temp) continue;
    const char *n = cg_tensor(sp, t);
    fprintf(c, "    if (dtl_gather(ctx, &plan->dist[%d], %s, t_%s, &plan->own[%d], r_%s)) goto fail;\n", t,
            cg_dtltype(sp->tensors[t].type), n, t, n);
  }
  fputs("  }\n", c);
  /* runs */
  if (sp->cuda) {
    fputs("  /* the blocks go to the GPU once; written ones again before each run */\n", c);
    for (int t = 0; t < nt; t++)
      if (!sp->tensors[t].temp)
        fprintf(c, "  if (dtl_any_error(ctx, dtl_cu_to_device(ctx, d_%s, t_%s, (size_t)(n_%s > 0 ? n_%s : 0) * sizeof *t_%s))) goto fail;\n",
              cg_tensor(sp, t), cg_tensor(sp, t), cg_tensor(sp, t), cg_tensor(sp, t), cg_tensor(sp, t));
  }
  fputs("  double *times = calloc((size_t)opt.iters, sizeof(double));\n  if (!times) goto fail;\n", c);
  fputs("  for (int it = -opt.warmup; it < opt.iters; it++) {\n", c);
  fputs("    /* written tensors start each run from their initial values (outside the timing) */\n", c);
  for (int t = 0; t < nt; t++)
    if (sp->tensors[t].temp) {
      continue;
    } else if (sp->tensors[t].written && sp->tensors[t].sparse) {
      const char *n = cg_tensor(sp, t), *un = sp->tensors[t].name;
      fprintf(c, "    dtl_sparse_free(&s_%s);\n    if (dtl_any_error(ctx, dtl_sparse_copy(&s_%s, &si_%s) ? dtl_fail(ctx, \"out of memory for %s\") : 0)) goto fail;\n",
              n, n, n, un);
    } else if (sp->tensors[t].written) {
      if (sp->cuda)
        fprintf(c, "    if (dtl_any_error(ctx, dtl_cu_to_device(ctx, d_%s, i_%s, (size_t)(n_%s > 0 ? n_%s : 0) * sizeof *i_%s))) goto fail;\n",
                cg_tensor(sp, t), cg_tensor(sp, t), cg_tensor(sp, t), cg_tensor(sp, t), cg_tensor(sp, t));
      else
        fprintf(c, "    memcpy(t_%s, i_%s, (size_t)(n_%s > 0 ? n_%s : 0) * sizeof *t_%s);\n", cg_tensor(sp, t),
                cg_tensor(sp, t), cg_tensor(sp, t), cg_tensor(sp, t), cg_tensor(sp, t));
    }
  fputs("    for (int op = 0; op < DTL_NOPS; op++)\n"
        "      ctx->bytes_sent[op] = ctx->bytes_recv[op] = ctx->msgs_sent[op] = ctx->msgs_recv[op] = 0;\n", c);
  fputs("    MPI_Barrier(MPI_COMM_WORLD);\n    double t0 = MPI_Wtime();\n", c);
  fprintf(c, "    int rc = %s_compute(plan", P);
  for (int t = 0; t < nt; t++)
    if (!sp->tensors[t].temp) fprintf(c, ", %s_%s", sp->tensors[t].sparse ? "&s" : sp->cuda ? "d" : "t", cg_tensor(sp, t));
  fputs(");\n    double dt = MPI_Wtime() - t0;\n", c);
  fputs("    if (dtl_any_error(ctx, rc)) goto fail;\n", c);
  fputs("    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);\n"
        "    if (it >= 0) times[it] = dt;\n  }\n", c);
  fputs("  double flops = ", c);
  fputs("0.0;\n  {\n", c);
  for (int i = 0; i < np; i++)
    fprintf(c, "    const int64_t dtl_p%d = values[%d];\n    (void)dtl_p%d;\n", i, i, i);
  fputs("    flops = ", c);
  if (sp->any_sparse) fputs("0 /* not counted for sparse operands */", c);
  else if (sp->nloops) fputs("0 /* not counted for programs with loops */", c);
  else cg_print_flops(c, sp);
  fputs(";\n  }\n", c);
  fputs("  double bytes = 0;\n", c);
  for (int t = 0; t < nt; t++) {
    if (sp->tensors[t].temp) continue;
    if (sp->tensors[t].sparse) { /* the stored entries, counted once: a value and a coordinate each */
      const char *n = cg_tensor(sp, t);
      fprintf(c, "  {\n    int64_t nz = dtl_dist_canonical(&plan->dist[%d], ctx->coords) ? dtl_sparse_nvals(&s_%s) : 0;\n"
                 "    MPI_Allreduce(MPI_IN_PLACE, &nz, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);\n"
                 "    bytes += (double)nz * (double)(dtl_type_size(%s) + sizeof(int64_t));\n  }\n",
              t, n, cg_dtltype(sp->tensors[t].type));
      continue;
    }
    fprintf(c, "  bytes += (double)gv_%s * (double)dtl_type_size(%s);\n", cg_tensor(sp, t), cg_dtltype(sp->tensors[t].type));
  }
  if (sp->nloops)
    fprintf(c, "  dtl_report(ctx, stdout, \"%s\", %d, pnames, pfloat, values, times, opt.iters, flops, bytes, %s_iterations(plan), opt.json);\n",
            P, np, P);
  else
    fprintf(c, "  dtl_report(ctx, stdout, \"%s\", %d, pnames, pfloat, values, times, opt.iters, flops, bytes, -1, opt.json);\n", P, np);
  fputs("  free(times);\n  if (opt.stats) dtl_stats_print(ctx, stdout);\n", c);
  for (int t = 0; t < nt; t++) /* the load balance of each sparse tensor: stored entries per rank */
    if (sp->tensors[t].sparse && !sp->tensors[t].temp)
      fprintf(c, "  if (opt.stats) {\n    int64_t nz = dtl_dist_canonical(&plan->dist[%d], ctx->coords) ? dtl_sparse_nvals(&s_%s) : 0;\n"
                 "    dtl_entries_print(ctx, stdout, \"%s\", nz);\n  }\n", t, cg_tensor(sp, t), sp->tensors[t].name);
  for (int t = 0; t < nt; t++)
    if (!sp->tensors[t].temp && sp->tensors[t].written && sp->tensors[t].sparse)
      fprintf(c, "  if (dn_%s) dtl_sparse_densify(&s_%s, t_%s); /* the result, dense for --save and --validate */\n", cg_tensor(sp, t),
              cg_tensor(sp, t), cg_tensor(sp, t));
  if (sp->cuda) {
    fputs("  /* results back to host memory for --save and --validate */\n", c);
    for (int t = 0; t < nt; t++)
      if (!sp->tensors[t].temp && sp->tensors[t].written)
        fprintf(c, "  if (dtl_any_error(ctx, dtl_cu_to_host(ctx, t_%s, d_%s, (size_t)(n_%s > 0 ? n_%s : 0) * sizeof *t_%s))) goto fail;\n",
                cg_tensor(sp, t), cg_tensor(sp, t), cg_tensor(sp, t), cg_tensor(sp, t), cg_tensor(sp, t));
  }
  /* saves */
  fputs("  for (int k = 0; k < opt.nsave; k++) {\n    switch (opt.save_tensor[k]) {\n", c);
  for (int t = 0; t < nt; t++)
    if (sp->tensors[t].temp)
      continue;
    else if (sp->tensors[t].sparse) /* .npy, .mtx or .tns by the extension (dtl_check_saves checked it) */
      fprintf(c, "    case %d:\n      if (dtl_sparse_save(ctx, opt.save_path[k], &plan->dist[%d], %s, &s_%s, t_%s, &plan->own[%d])) goto fail;\n      break;\n",
              t, t, cg_dtltype(sp->tensors[t].type), cg_tensor(sp, t), cg_tensor(sp, t), t);
    else
      fprintf(c, "    case %d:\n      if (dtl_npy_write(ctx, opt.save_path[k], &plan->dist[%d], %s, t_%s, &plan->own[%d])) goto fail;\n      break;\n",
              t, t, cg_dtltype(sp->tensors[t].type), cg_tensor(sp, t), t);
  fputs("    default: break;\n    }\n  }\n", c);
  /* validate */
  fputs("  if (opt.validate) {\n", c);
  for (int t = 0; t < nt; t++)
    if (!sp->tensors[t].temp && sp->tensors[t].written)
      fprintf(c, "    if (dtl_gather(ctx, &plan->dist[%d], %s, t_%s, &plan->own[%d], g_%s)) goto fail;\n", t,
              cg_dtltype(sp->tensors[t].type), cg_tensor(sp, t), t, cg_tensor(sp, t));
  fputs("    int bad = 0;\n    if (rank == 0) {\n", c);
  fputs("      int64_t ref_iters = 0;\n", c);
  /* A program with loops or of several statements: the serial reference again with every loop
   * backwards, each sum in the other order.  Where the iterations or a later statement amplify
   * rounding (a solver on a matrix it does not suit: cancellation in its dot products,
   * divergence; a difference of two nearly equal results), the two references differ by as
   * much as the distributed run may differ from either, and the tolerance takes that
   * difference. */
  const bool probe = sp->nloops || sp->nfuncs > 1;
  /* what each tensor's values come from: dep[t * nt + u], u's values (its rounding) reach t */
  bool *dep = ir_alloc((size_t)nt * (size_t)nt + 1);
  for (int t = 0; t < nt; t++) dep[t * nt + t] = true;
  for (bool grew = true; grew;) {
    grew = false;
    for (int i = 0; i < sp->nfuncs; i++) {
      const sp_func *fn = &sp->funcs[i];
      int l = fn->lhs_tensor;
      if (l < 0 || l >= nt) continue;
      for (int k = 0; k < fn->nbufs; k++) {
        const sp_buf *b = &sp->bufs[fn->bufs[k]];
        if (b->output || b->tensor < 0 || b->tensor >= nt) continue;
        for (int u = 0; u < nt; u++)
          if (dep[b->tensor * nt + u] && !dep[l * nt + u]) dep[l * nt + u] = true, grew = true;
      }
    }
  }
  if (probe) {
    fputs("      int dtl_sens_ok = 1;\n", c);
    for (int t = 0; t < nt; t++) {
      const char *n = cg_tensor(sp, t), *ct = cg_ctype(sp->tensors[t].type);
      fprintf(c, "      %s *q_%s = malloc((size_t)(gv_%s > 0 ? gv_%s : 1) * sizeof(%s));\n", ct, n, n, n, ct);
      fprintf(c, "      if (!q_%s) dtl_sens_ok = 0;\n      else memcpy(q_%s, r_%s, (size_t)gv_%s * sizeof(%s));\n", n, n, n, n, ct);
    }
  }
  fprintf(c, "      if (%s_reference(plan->p, 0, &ref_iters", P);
  for (int t = 0; t < nt; t++) fprintf(c, ", r_%s", cg_tensor(sp, t));
  fputs(")) bad = 1;\n      double worst = 0;\n", c);
  if (probe) {
    fprintf(c, "      int64_t q_iters = 0;\n      if (dtl_sens_ok && %s_reference(plan->p, 1, &q_iters", P);
    for (int t = 0; t < nt; t++) fprintf(c, ", q_%s", cg_tensor(sp, t));
    fputs(")) dtl_sens_ok = 0;\n", c);
  }
  if (sp->nloops) /* rounding may make a loop stop one iteration apart: reported, and the tolerance grows with the iterations */
    fprintf(c, "      printf(\"validate iterations: %%lld (serial reference: %%lld)\\n\", (long long)%s_iterations(plan), (long long)ref_iters);\n", P);
  for (int t = 0; t < nt; t++) {
    if (sp->tensors[t].temp) continue;
    if (!sp->tensors[t].written) continue;
    const char *n = cg_tensor(sp, t), *un = sp->tensors[t].name;
    fe_type ty = sp->tensors[t].type;
    /* tolerance: rounding grows with the length of the sums, those of the statements whose
     * results this tensor's values come from included, at the precision of the coarsest of them
     * (a double computed from a float carries the float's rounding) */
    double eps = 0;
    for (int u = 0; u < nt && (ty == FE_DOUBLE || ty == FE_FLOAT); u++) {
      double eu = sp->tensors[u].type == FE_FLOAT ? 1.2e-7 : sp->tensors[u].type == FE_DOUBLE ? 2.3e-16 : 0;
      if (dep[t * nt + u] && eu > eps) eps = eu;
    }
    fprintf(c, "      {\n        double e = dtl_max_rel_error(%s, g_%s, r_%s, gv_%s);\n", cg_dtltype(ty), n, n, n);
    fprintf(c, "        double tol = %.2g * 64.0;\n", eps);
    /* scale by the largest reduction extent product */
    fputs("        double len = 1;\n", c);
    for (int i = 0; i < sp->nfuncs; i++) {
      const sp_func *fn = &sp->funcs[i];
      if (fn->lhs_tensor < 0 || fn->lhs_tensor >= nt || !dep[t * nt + fn->lhs_tensor]) continue;
      fputs("        { double l = 1", c);
      for (int v = 0; v < fn->nred; v++) {
        fputs(" * (double)", c);
        if (fn->red_ext[v]->kind == SYM_PARAM) fprintf(c, "plan->p[%d]", fn->red_ext[v]->id);
        else sym_print(c, fn->red_ext[v], NULL, NULL);
      }
      fputs("; if (l > len) len = l; }\n", c);
    }
    fputs("        tol *= len;\n", c);
    if (sp->nloops)
      fputs("        tol *= (double)(ref_iters + 1) * 1024.0; /* errors compound from one iteration to the next, and functions such as sqrt near 0 amplify them */\n", c);
    if (probe) {
      if (ty == FE_DOUBLE || ty == FE_FLOAT) {
        /* the two references' difference (the sums in either order), sixteen times over; where they
         * differ by a percent or more (chaos: a diverging solver), nothing is left to compare */
        fprintf(c, "        if (dtl_sens_ok) {\n          const double s = dtl_max_rel_error(%s, q_%s, r_%s, gv_%s);\n", cg_dtltype(ty), n, n, n);
        fprintf(c, "          if (!(16 * s <= tol)) {\n            tol = s < 0.01 ? 16 * s : INFINITY;\n"
                   "            printf(\"validate %s: the serial reference amplifies rounding (its sums in the other order move it by %%.3g): %%s\\n\",\n"
                   "                   s, s < 0.01 ? \"the tolerance grows with it\" : \"its result is rounding, not compared\");\n"
                   "          }\n        }\n", un);
      }
    }
    if (ty == FE_DOUBLE || ty == FE_FLOAT) { /* a diverged reference: its NaN and infinities match only the same */
      fprintf(c, "        {\n          int64_t nf = 0, gnf = 0;\n          for (int64_t k = 0; k < gv_%s; k++) nf += !isfinite(r_%s[k]), gnf += !isfinite(g_%s[k]);\n"
                 "          if (nf) printf(\"validate %s: %%lld values of the serial result are not finite (NaN or infinite): \"\n"
                 "                         \"they match only the same values\\n\", (long long)nf);\n",
              n, n, n, un);
      /* A loop that stopped at another iteration where the reference broke down and the run
       * did not: the method is unstable on these data (an iterative solver that sums in
       * another order converges or not), as in the chaos case above: nothing to compare. */
      if (sp->nloops)
        fprintf(c, "          const int64_t di = %s_iterations(plan) - ref_iters;\n"
                   "          if (nf && !gnf && (di > 1 || di < -1)) {\n"
                   "            printf(\"validate %s: the serial reference broke down after %%lld iterations where the run stopped after \"\n"
                   "                   \"%%lld with finite values: the method is unstable on these data, its result rounding \"\n"
                   "                   \"(--load data it converges on); not compared\\n\", (long long)ref_iters, (long long)%s_iterations(plan));\n"
                   "            tol = INFINITY, e = 0;\n          }\n",
                P, un, P);
      fputs("        }\n", c);
    }
    fprintf(c, "        printf(\"validate %s: max relative error %%.3g (tolerance %%.3g) %%s\\n\", e, tol, e <= tol ? \"ok\" : \"MISMATCH\");\n", un);
    fputs("        if (!(e <= tol)) bad = 1;\n        if (e > worst) worst = e;\n      }\n", c);
  }
  if (probe)
    for (int t = 0; t < nt; t++) fprintf(c, "      free(q_%s);\n", cg_tensor(sp, t));
  fputs("      (void)worst;\n    }\n    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);\n    if (bad) status = 1;\n  }\n", c);
  fputs("  goto done;\nfail:\n  if (rank == 0) fprintf(stderr, \"%s: %s\\n\", argv[0], dtl_ctx_error(ctx));\n  status = 1;\ndone:\n", c);
  for (int t = 0; t < nt; t++) {
    const char *n = cg_tensor(sp, t);
    fprintf(c, "  free(t_%s);\n  free(i_%s);\n  free(g_%s);\n  free(r_%s);\n", n, n, n, n);
    if (sp->tensors[t].sparse) fprintf(c, "  dtl_sparse_free(&s_%s);\n  dtl_sparse_free(&si_%s);\n", n, n);
    if (sp->cuda) fprintf(c, "  dtl_cu_free(d_%s);\n", n);
  }
  if (sp->nsplits)
    fprintf(c, "  for (int i = 0; i < %d; i++) free(dtl_bounds[i]);\n", sp->nsplits);
  fprintf(c, "  %s_plan_destroy(&plan);\n  MPI_Finalize();\n  return status;\n}\n", P);
}
