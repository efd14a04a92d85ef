/* variants.c -- the run-time choice among schedules (spmd.h, "the run-time choice"): the cost
 * formulas of each candidate program, from its lowering's plan, and their evaluation at
 * compile time (--emit plan), which the generated plan_create repeats at run time. */
#include "lower_mpi/spmd.h"

#include "distal/grid.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the formulas of statement i of lp, over the program variables of function fn */
static void cost_stmt(const lw_program *lp, const sp_func *fn, int i, double speedup, double threads, const sp_stmt_runs *runs,
                      sp_cost_stmt *out) {
  const fe_program *p = lp->ir->ast;
  const lw_stmt *ls = &lp->stmts[i];
  out->func = fn->index;
  out->entries = runs ? runs->entries : NULL, out->bound = runs ? runs->bound : NULL;
  const bool *unwritten = runs ? runs->unwritten : NULL;
  out->speedup = speedup > 0 ? speedup : 1;
  out->threads = threads >= 1 ? threads : 1;
  out->kdepth = ls->kernel_depth;
  out->ntrips = ls->nloops;
  out->trip = ir_alloc((size_t)(ls->nloops + 1) * sizeof *out->trip);
  for (int k = 0; k < ls->nloops; k++) out->trip[k] = sym_shift_vars(lw_trip(ls, k), fn->var0);
  out->comm = ir_alloc((size_t)(ls->ncomm + 1) * sizeof *out->comm);
  out->ncomm = 0;
  for (int q = 0; q < ls->ncomm; q++) {
    const lw_comm *c = &ls->comm[q];
    sp_cost_comm *m = &out->comm[out->ncomm++];
    m->local = c->pattern == PAT_LOCAL;
    m->nloops = c->depth + 1;
    int *var = ir_alloc((size_t)(m->nloops + 1) * sizeof *var);
    m->ext = ir_alloc((size_t)(m->nloops + 1) * sizeof *m->ext);
    for (int k = 0; k < m->nloops; k++) {
      var[k] = fn->var0 + lw_loop_slot(ls, k); /* as lw_stmt_cost walks them */
      m->ext[k] = out->trip[k];
    }
    m->var = var;
    m->order = c->order;
    m->lo = ir_alloc((size_t)(c->order + 1) * sizeof *m->lo);
    m->hi = ir_alloc((size_t)(c->order + 1) * sizeof *m->hi);
    for (int x = 0; x < c->order; x++) m->lo[x] = sym_shift_vars(c->lo[x], fn->var0), m->hi[x] = sym_shift_vars(c->hi[x], fn->var0);
    m->elem = lw_type_size(p->tensors[c->tensor].type);
    m->nbuf = m->local ? 0 : c->pattern == PAT_BCAST || c->pattern == PAT_SHIFT ? 2 : 1;
    m->bcast = c->pattern == PAT_BCAST ? c->mask : 0;
    m->alt_bcast = m->bcast;
    m->reduce = m->alt_reduce = c->pattern == PAT_REDUCE ? c->mask : 0;
    m->exchange = m->alt_exchange = c->pattern == PAT_EXCHANGE;
    m->pat = m->alt_pat = c->pattern;
    m->shift_dim = m->alt_shift_dim = c->shift_dim;
    m->own = &lp->owner[c->tensor];
    m->output = c->output;
    m->exec_mask = ls->exec_mask;
    m->once = m->alt_once = lw_loop_invariant_as(lp, i, c, c, unwritten);
    if (c->alt && c->nassume > 1) {
      m->alt_once = lw_loop_invariant_as(lp, i, c, c->alt, unwritten);
      m->alt_pat = c->alt->pattern;
      m->alt_shift_dim = c->alt->shift_dim;
      m->alt_bcast = c->alt->pattern == PAT_BCAST ? c->alt->mask : 0;
      m->alt_reduce = c->alt->pattern == PAT_REDUCE ? c->alt->mask : 0;
      m->alt_exchange = c->alt->pattern == PAT_EXCHANGE;
      m->nassume = c->nassume;
      m->assume = c->assume;
    }
  }
}

void spmd_variants(sp_program *sp, const sp_program *const *alts, int nalts, const double *const *speedup,
                   const double *const *threads, const char *const *labels, const char *const *const *schedules, const double model[7], int64_t mem_limit,
                   const sp_stmt_runs *runs) {
  sp->bandwidth = model[0], sp->latency = model[1], sp->point_time = model[2], sp->memory_bandwidth = model[3];
  sp->node_bandwidth = model[4], sp->node_latency = model[5], sp->ranks_per_node = (int64_t)model[6];
  sp->mem_limit = mem_limit;
  sp->nvariants = nalts;
  sp->variants = ir_alloc((size_t)(nalts + 1) * sizeof *sp->variants);
  for (int v = 0; v < nalts; v++) {
    const sp_program *a = v ? alts[v] : sp;
    sp_variant *x = &sp->variants[v];
    x->sp = a;
    x->label = labels[v];
    x->schedule = (const char **)schedules[v];
    x->nstmts = a->lp->nstmts;
    x->stmts = ir_alloc((size_t)(x->nstmts + 1) * sizeof *x->stmts);
    for (int i = 0; i < x->nstmts; i++)
      cost_stmt(a->lp, &a->funcs[i], i, speedup[v][i], threads[v][i], runs ? &runs[i] : NULL, &x->stmts[i]);
  }
}

/* ---- evaluation (the generated cost functions do the same) ------------------------------ */
typedef struct {
  double total, recv, max;
  int64_t count;
  bool failed, alt, started;
  lw_held held; /* the rank's block of the tensor (at the first box) */
} walk_acc;

/* whether the params of m's assumption are equal (its alt_ pattern applies) */
static bool assumed(const sp_cost_comm *m, const int64_t *params) {
  bool equal = m->nassume > 1;
  for (int q = 1; q < m->nassume; q++) equal &= params[m->assume[q]] == params[m->assume[0]] && params[m->assume[0]] >= 0;
  return equal;
}

static void walk(const lw_program *lp, const sp_cost_comm *m, int k, int64_t *vars, sym_env *env, walk_acc *a) {
  if (a->failed) return;
  if (k == m->nloops) {
    if (m->local && a->count >= SP_LOCAL_STEPS) { /* too many boxes: not counted (lw_stmt_cost) */
      a->failed = true;
      return;
    }
    int64_t v = 1, lo[LW_MAX_DIMS], hi[LW_MAX_DIMS];
    for (int x = 0; x < m->order; x++) {
      if (!sym_eval(m->lo[x], env, &lo[x]) || !sym_eval(m->hi[x], env, &hi[x])) {
        a->failed = true;
        return;
      }
      v *= hi[x] > lo[x] ? hi[x] - lo[x] : 0;
    }
    if (!a->started && !m->local) {
      a->started = true, a->alt = assumed(m, env->params);
      lw_held_block(lp, m->own, m->order, a->alt ? m->alt_pat : m->pat, a->alt ? m->alt_shift_dim : m->shift_dim, m->output,
                    m->exec_mask, env, &a->held);
    }
    if (!m->local) a->recv += (double)lw_step_received(a->alt ? m->alt_pat : m->pat, &a->held, m->order, a->count, v, lo, hi);
    a->total += (double)v, a->count++;
    if (v > a->max) a->max = (double)v;
    return;
  }
  int64_t ext;
  if (!sym_eval(m->ext[k], env, &ext)) {
    a->failed = true;
    return;
  }
  for (int64_t i = 0; i < ext && !a->failed; i++) {
    vars[m->var[k]] = i;
    walk(lp, m, k + 1, vars, env, a);
  }
  vars[m->var[k]] = 0;
}

/* the broadcast weights of m at params (1, 1: not a broadcast) */
/* the ranks along the grid dims of mask at env's params */
static int64_t group_ranks(const sp_program *sp, unsigned mask, sym_env *env) {
  int64_t q = 1, d;
  for (int g = 0; g < sp->ndims; g++)
    if (mask >> g & 1) q *= sym_eval(sp->dims[g], env, &d) && d > 0 ? d : 1;
  return q;
}

/* the grid dims' sizes at env's params */
static void grid_dims(const sp_program *sp, sym_env *env, int64_t *dims) {
  for (int g = 0; g < sp->ndims; g++)
    if (!sym_eval(sp->dims[g], &(sym_env){.params = env->params}, &dims[g]) || dims[g] < 1) dims[g] = 1;
}

/* the broadcast weights of m at params (1, 1: not a broadcast); *group: the mask of its group
 * (a broadcast's or reduction's grid dims, 0: any rank) */
static void weights(const sp_program *sp, const sp_cost_comm *m, sym_env *env, double *wb, double *wm, unsigned *group) {
  bool equal = assumed(m, env->params);
  unsigned mask = equal ? m->alt_bcast : m->bcast, red = equal ? m->alt_reduce : m->reduce;
  *group = mask ? mask : red;
  *wb = *wm = 1;
  if (equal ? m->alt_exchange : m->exchange) *wb = LW_EXCHANGE_WEIGHT;
  if (red && group_ranks(sp, red, env) == 1) *wb = *wm = 0; /* a reduction among one rank moves nothing */
  if (mask) lw_bcast_weight(group_ranks(sp, mask, env), wb, wm);
}

/* the cost at one rank's coordinates */
static bool cost_at(const sp_program *sp, int v, const int64_t *params, const int64_t *coords, int64_t per_node, double *seconds,
                    double *buffer);

bool spmd_variant_cost(const sp_program *sp, int v, const int64_t *params, double *seconds, double *buffer) {
  return spmd_variant_cost_nodes(sp, v, params, sp->ranks_per_node, seconds, buffer);
}

bool spmd_variant_cost_nodes(const sp_program *sp, int v, const int64_t *params, int64_t per_node, double *seconds, double *buffer) {
  /* the ranks of lw_sample: the slowest; the largest buffers */
  *seconds = *buffer = 0;
  for (int k = 0; k < lw_nsamples(sp->lp); k++) {
    int64_t coords[LW_MAX_DIMS] = {0};
    double s, b;
    bool repeat;
    if (!lw_sample(sp->lp, params, k, coords, &repeat)) return false;
    if (repeat) continue;
    if (!cost_at(sp, v, params, coords, per_node, &s, &b)) return false;
    if (k == 0 || s > *seconds) *seconds = s;
    if (k == 0 || b > *buffer) *buffer = b;
  }
  return true;
}

static bool cost_at(const sp_program *sp, int v, const int64_t *params, const int64_t *coords, int64_t per_node, double *seconds,
                    double *buffer) {
  const sp_variant *x = &sp->variants[v];
  int nv = x->sp->nvars;
  int64_t *vars = calloc((size_t)nv + 1, sizeof *vars);
  if (!vars) return false;
  sym_env env = {.params = params, .coords = coords, .vars = vars, .nvars = nv};
  double sec = 0, buf = 0;
  bool ok = true;
  int64_t dims[LW_MAX_DIMS];
  grid_dims(sp, &env, dims);
  for (int i = 0; i < x->nstmts && ok; i++) {
    const sp_cost_stmt *st = &x->stmts[i];
    double points = 1, bytes = 0, msgs = 0, steps = 1, nbytes = 0, nmsgs = 0; /* n: within one node */
    double obytes = 0, omsgs = 0, onbytes = 0, onmsgs = 0; /* ... of the fetches run once per entry of the loop */
    int64_t kmin = 0;
    double kpts = 0;
    for (int k = 0; k < st->ntrips && ok; k++) {
      int64_t t;
      ok = sym_eval(st->trip[k], &env, &t);
      points *= t > 0 ? (double)t : 0;
      if (ok && st->kdepth >= 0 && k >= st->kdepth) {
        if (kmin == 0 || t < kmin) kmin = t > 0 ? t : 1;
        kpts = (kpts > 0 ? kpts : 1) * (double)(t > 0 ? t : 0);
      }
    }
    double mem = 0;
    for (int q = 0; q < st->ncomm && ok; q++) {
      const sp_cost_comm *m = &st->comm[q];
      walk_acc a = {0};
      walk(x->sp->lp, m, 0, vars, &env, &a);
      if (m->local) {
        mem += a.failed ? 0 : a.total * (double)m->elem;
        continue;
      }
      ok = !a.failed;
      mem += a.total * (double)m->elem;
      double wb, wm;
      unsigned group;
      weights(sp, m, &env, &wb, &wm, &group);
      const bool once = assumed(m, params) ? m->alt_once : m->once;
      const bool node = dtl_group_in_node(per_node, sp->ndims, dims, coords, group);
      if (once && node)
        onbytes += wb * a.recv * (double)m->elem, onmsgs += wm * (double)a.count;
      else if (once)
        obytes += wb * a.recv * (double)m->elem, omsgs += wm * (double)a.count;
      else if (node)
        nbytes += wb * a.recv * (double)m->elem, nmsgs += wm * (double)a.count;
      else
        bytes += wb * a.recv * (double)m->elem, msgs += wm * (double)a.count;
      if (!once && (double)a.count > steps) steps = (double)a.count;
      buf += a.max * (double)m->elem * m->nbuf;
    }
    double speed = lw_kernel_speed(st->speedup, kmin, kpts);
    double comm = bytes / sp->bandwidth + nbytes / sp->node_bandwidth, work = fmax(points * sp->point_time / speed / st->threads, mem / sp->memory_bandwidth);
    double run = msgs * sp->latency + nmsgs * sp->node_latency + comm / steps + fmax(comm * (steps - 1) / steps, work);
    double once = omsgs * sp->latency + onmsgs * sp->node_latency + obytes / sp->bandwidth + onbytes / sp->node_bandwidth;
    int64_t entries = 1, bound = 1; /* its loops (1 where in none) */
    if (st->entries && !(sym_eval(st->entries, &env, &entries) && entries >= 1)) entries = 1;
    if (st->bound && !(sym_eval(st->bound, &env, &bound) && bound >= 1)) bound = 1;
    sec += (double)entries * ((double)bound * run + once);
  }
  free(vars);
  *seconds = sec, *buffer = buf;
  return ok;
}

int spmd_variant_choice(const sp_program *sp, const int64_t *params) {
  int best = -1, least = -1;
  double bs = 0, lb = 0;
  for (int v = 0; v < sp->nvariants; v++) {
    double s, b;
    if (!spmd_variant_cost(sp, v, params, &s, &b)) return -1;
    bool fits = sp->mem_limit <= 0 || b <= (double)sp->mem_limit;
    if (fits && (best < 0 || s < bs * (1 - 1e-6))) best = v, bs = s; /* within a millionth: a tie, the lower index */
    if (least < 0 || b < lb) least = v, lb = b;
  }
  return best >= 0 ? best : least;
}

/* whether every fixed coordinate of a tensor lies inside its grid dim at params (as plan_create) */
static bool fixed_fit(const sp_program *sp, const int64_t *params) {
  for (int t = 0; t < sp->ntensors; t++) {
    const lw_owner *ow = sp->tensors[t].owner;
    for (int g = 0; ow && !ow->everywhere && g < sp->ndims; g++)
      if (ow->kind[g] == OWN_FIXED && sp->dims[g]->kind == SYM_PARAM && params[sp->dims[g]->id] <= ow->fixed[g]) return false;
  }
  return true;
}

int spmd_shape_choice(const sp_program *sp, int64_t ranks, const int64_t *given, int64_t *params, int *nshapes) {
  *nshapes = 0;
  if (!sp->shape_free || sp->nvariants < 1 || sp->nlevels != 1 || sp->ndims > DTL_MAX_DIMS) return -1;
  int param[DTL_MAX_DIMS], nv = sp->nparams + 1;
  int64_t lit[DTL_MAX_DIMS];
  for (int d = 0; d < sp->ndims; d++) {
    int64_t l = 0;
    param[d] = sp->dims[d]->kind == SYM_PARAM ? sp->dims[d]->id : -1;
    lit[d] = param[d] < 0 && sym_is_const(sp->dims[d], &l) ? l : 0;
  }
  enum { SHAPES = 1024 }; /* as plan_create */
  int64_t *sh = malloc(sizeof *sh * (size_t)nv * SHAPES), *q = malloc(sizeof *q * (size_t)nv);
  int n = sh && q ? dtl_grid_shapes(ranks, sp->ndims, param, lit, given, nv, sh, SHAPES) : 0, at = -1;
  bool afit = false, f0 = false, have0 = false;
  double as = 0, s0 = 0;
  for (int k = 0; k < n; k++) {
    memcpy(q, params, sizeof *q * (size_t)nv);
    for (int i = 0; i < sp->nparams; i++)
      if (sp->params[i].is_grid) q[i] = sh[(size_t)k * (size_t)nv + (size_t)i];
    if (!fixed_fit(sp, q)) { /* never chosen */
      if (k == 0) s0 = INFINITY, f0 = false, have0 = true, at = 0;
      continue;
    }
    int v = spmd_variant_choice(sp, q);
    double s, b;
    if (v < 0 || !spmd_variant_cost(sp, v, q, &s, &b)) continue;
    bool fit = sp->mem_limit <= 0 || b <= (double)sp->mem_limit;
    if (k == 0) s0 = s, f0 = fit, have0 = true, at = 0;
    else if (at <= 0 || (fit && (!afit || s < as * (1 - 1e-6)))) at = k, as = s, afit = fit;
  }
  /* as plan_create: the solver's shape unless another fits where it does not, or is clearly faster */
  if (at > 0 && have0 && !(afit && !f0) && !(afit == f0 && as < s0 * DTL_SHAPE_MARGIN)) at = 0;
  for (int i = 0; i < sp->nparams && at >= 0; i++)
    if (sp->params[i].is_grid) params[i] = sh[(size_t)at * (size_t)nv + (size_t)i];
  *nshapes = n;
  free(sh);
  free(q);
  return at;
}

void spmd_print_variants(FILE *f, const sp_program *sp, const int64_t *solved, int64_t ranks, const int64_t *given) {
  if (sp->nvariants < 1) return;
  int64_t *params = malloc(sizeof *params * (size_t)(sp->nparams + 1));
  if (!params) return;
  memcpy(params, solved, sizeof *params * (size_t)(sp->nparams + 1));
  int nshapes = 0, shape = given ? spmd_shape_choice(sp, ranks, given, params, &nshapes) : -1;
  int pick = spmd_variant_choice(sp, params);
  fprintf(f, "run-time choice (plan_create; these params and rank count): %d variant%s kept by the search\n", sp->nvariants,
          sp->nvariants == 1 ? "" : "s");
  if (shape >= 0) {
    fprintf(f, "  the grid's shape: grid(");
    for (int d = 0; d < sp->ndims; d++) {
      int64_t l = 0;
      if (sp->dims[d]->kind == SYM_PARAM) fprintf(f, "%s%s = %lld", d ? ", " : "", sp->params[sp->dims[d]->id].name, (long long)params[sp->dims[d]->id]);
      else fprintf(f, "%s%lld", d ? ", " : "", (long long)(sym_is_const(sp->dims[d], &l) ? l : 0));
    }
    fprintf(f, "), of %d shapes%s\n", nshapes, shape == 0 ? " (the solver's)" : "");
  }
  for (int v = 0; v < sp->nvariants; v++) {
    const sp_variant *x = &sp->variants[v];
    double s, b;
    bool ok = spmd_variant_cost(sp, v, params, &s, &b);
    fprintf(f, "  %s variant %d (the search's choice at %s): ", v == pick ? "chosen" : "      ", v, x->label);
    if (ok) fprintf(f, "predicted %.9g s, buffers %.0f bytes%s\n", s, b, sp->mem_limit > 0 && b > (double)sp->mem_limit ? " (over the memory limit)" : "");
    else fputs("not evaluated (give every param a value with --set)\n", f);
    spmd_print_variant_schedules(f, x);
  }
  free(params);
}

void spmd_print_variant_schedules(FILE *f, const sp_variant *x) {
  for (int i = 0; i < x->nstmts; i++) {
    fprintf(f, "    statement %d: ", i + 1);
    for (const char *t = x->schedule[i] && *x->schedule[i] ? x->schedule[i] : "its default"; *t; t++)
      if (*t != '\n') fputc(*t, f);
    fputc('\n', f);
  }
}
