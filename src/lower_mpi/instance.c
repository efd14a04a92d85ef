/* instance.c -- the plan at concrete values (distalc --emit svg): the grid's sizes, the block
 * each rank holds of each tensor, and the messages of the first step of a communicate point.
 *
 * The lowering chose each pattern from the symbolic boxes; here those boxes and the ownership
 * maps are evaluated at every rank's grid coordinates, and each pattern names its peers the
 * way the runtime's operation for it does (src/comm/exec.c, comm.c): a broadcast from the one
 * holder of each piece along the mask, a shift to the neighbour at coordinate c - 1, a
 * reduction to the root coordinates, an exchange with every holder whose block meets the box
 * (a replicated dim served at the receiver's own coordinate). */
#include "lower_mpi/lower.h"

#include <stdlib.h>
#include <string.h>

bool lw_grid_at(const lw_program *lp, const int64_t *params, int64_t *dims) {
  for (int g = 0; g < lp->ndims; g++)
    if (!sym_eval(lp->dims[g], &(sym_env){.params = params}, &dims[g]) || dims[g] <= 0) return false;
  return true;
}

int64_t lw_rank_of(int ndims, const int64_t *dims, const int64_t *coords) {
  int64_t r = 0;
  for (int g = 0; g < ndims; g++) r = r * dims[g] + coords[g];
  return r;
}

void lw_coords_of(int ndims, const int64_t *dims, int64_t rank, int64_t *coords) {
  for (int g = ndims - 1; g >= 0; g--) {
    coords[g] = rank % dims[g];
    rank /= dims[g];
  }
}

int64_t lw_box_volume(const lw_box *b) {
  int64_t v = 1;
  for (int x = 0; x < b->order; x++) v *= b->hi[x] > b->lo[x] ? b->hi[x] - b->lo[x] : 0;
  return v;
}

static bool box_meet(const lw_box *a, const lw_box *b, lw_box *out) {
  out->order = a->order;
  for (int x = 0; x < a->order; x++) {
    out->lo[x] = a->lo[x] > b->lo[x] ? a->lo[x] : b->lo[x];
    out->hi[x] = a->hi[x] < b->hi[x] ? a->hi[x] : b->hi[x];
    if (out->hi[x] <= out->lo[x]) return false;
  }
  return true;
}

int lw_block_at(const lw_program *lp, int t, const int64_t *params, const int64_t *coords, lw_box *b) {
  const lw_owner *o = &lp->owner[t];
  sym_env env = {.params = params, .coords = coords};
  b->order = lp->ir->ast->tensors[t].order;
  for (int x = 0; x < b->order; x++) {
    if (!sym_eval(o->lo[x], &env, &b->lo[x]) || !sym_eval(o->hi[x], &env, &b->hi[x])) return -1;
    if (b->lo[x] > b->hi[x]) b->lo[x] = b->hi[x];
  }
  for (int g = 0; g < lp->ndims && !o->everywhere; g++)
    if (o->kind[g] == OWN_FIXED && coords[g] != o->fixed[g]) return 0;
  return 1;
}

bool lw_box_at(const lw_program *lp, int i, const lw_comm *c, const int64_t *params, const int64_t *coords, lw_box *b) {
  const lw_stmt *ls = &lp->stmts[i];
  int nv = ls->lidx_var0 + ls->nloops;
  int64_t *vars = calloc(nv + 1, sizeof *vars); /* the first step: every loop counter 0 */
  if (!vars) return false;
  sym_env env = {.params = params, .coords = coords, .vars = vars, .nvars = nv};
  bool ok = true;
  b->order = c->order;
  for (int x = 0; x < c->order && ok; x++)
    ok = sym_eval(c->lo[x], &env, &b->lo[x]) && sym_eval(c->hi[x], &env, &b->hi[x]);
  free(vars);
  return ok;
}

const lw_comm *lw_comm_at(const lw_program *lp, const lw_comm *c, const int64_t *params) {
  if (!c->alt || c->nassume < 2) return c;
  for (int q = 1; q < c->nassume; q++)
    if (params[c->assume[q]] != params[c->assume[0]] || params[c->assume[0]] < 0) return c;
  return c->alt;
}

/* ---- the messages of one step ---- */
typedef struct {
  const lw_program *lp;
  int i;
  const lw_comm *c;
  const int64_t *params, *dims;
  int64_t nranks;
  lw_box *blocks;  /* per rank: its block of the tensor */
  bool *holds;     /* ... and whether it holds one */
  lw_msg *v;
  int n, cap;
  bool oom;
} msg_ctx;

static void push(msg_ctx *m, int64_t from, int64_t to, const lw_box *box) {
  if (from == to || lw_box_volume(box) == 0 || m->oom) return;
  if (m->n == m->cap) {
    int cap = m->cap ? 2 * m->cap : 32;
    lw_msg *v = realloc(m->v, (size_t)cap * sizeof *v);
    if (!v) {
      m->oom = true;
      return;
    }
    m->v = v, m->cap = cap;
  }
  m->v[m->n++] = (lw_msg){.from = from, .to = to, .box = *box, .elements = lw_box_volume(box)};
}

/* Is the rank at hc a holder that serves the rank at pc?  Replicated dims and dims in
 * `align` (those a collective does not span) only at pc's own coordinate. */
static bool serves(const msg_ctx *m, const int64_t *hc, const int64_t *pc, unsigned align) {
  const lw_owner *o = &m->lp->owner[m->c->tensor];
  for (int g = 0; g < m->lp->ndims; g++) {
    bool star = o->everywhere || o->kind[g] == OWN_STAR;
    if ((star || (align >> g & 1)) && hc[g] != pc[g]) return false;
  }
  return true;
}

/* The holders that serve the rank at pc with parts of `want`: from them (read) or to them
 * (an output's partial results). */
static void holders(msg_ctx *m, int64_t p, const int64_t *pc, const lw_box *want, unsigned align, bool to_holders) {
  int64_t hc[LW_MAX_DIMS];
  for (int64_t h = 0; h < m->nranks; h++) {
    lw_coords_of(m->lp->ndims, m->dims, h, hc);
    lw_box part;
    if (!m->holds[h] || !serves(m, hc, pc, align) || !box_meet(want, &m->blocks[h], &part)) continue;
    if (to_holders) push(m, p, h, &part);
    else push(m, h, p, &part);
  }
}

static void rank_messages(msg_ctx *m, int64_t r, const int64_t *rc, const lw_box *box) {
  const lw_comm *c = m->c;
  int64_t oc[LW_MAX_DIMS];
  unsigned all = (1u << m->lp->ndims) - 1;
  memcpy(oc, rc, sizeof oc);
  switch (c->pattern) {
  case PAT_LOCAL:
    break;
  case PAT_BCAST:
    holders(m, r, rc, box, all & ~c->mask, false);
    break;
  case PAT_SHIFT:
    oc[c->shift_dim] = (rc[c->shift_dim] + m->dims[c->shift_dim] - 1) % m->dims[c->shift_dim];
    push(m, r, lw_rank_of(m->lp->ndims, m->dims, oc), box);
    break;
  case PAT_REDUCE:
    for (int g = 0; g < m->lp->ndims; g++)
      if (c->mask >> g & 1) oc[g] = c->root[g];
    push(m, r, lw_rank_of(m->lp->ndims, m->dims, oc), box);
    if (c->allreduce) push(m, lw_rank_of(m->lp->ndims, m->dims, oc), r, box);
    break;
  case PAT_EXCHANGE:
    holders(m, r, rc, box, 0, c->output);
    break;
  }
}

static int by_sender(const void *a, const void *b) {
  const lw_msg *x = a, *y = b;
  if (x->from != y->from) return x->from < y->from ? -1 : 1;
  return x->to < y->to ? -1 : x->to > y->to;
}

lw_msg *lw_step_messages(const lw_program *lp, int i, const lw_comm *c, const int64_t *params, const int64_t *dims,
                         int64_t nranks, int *n, bool *ok) {
  msg_ctx m = {.lp = lp, .i = i, .c = c, .params = params, .dims = dims, .nranks = nranks};
  *n = 0, *ok = true;
  m.blocks = malloc((size_t)nranks * sizeof *m.blocks);
  m.holds = malloc((size_t)nranks * sizeof *m.holds);
  int64_t rc[LW_MAX_DIMS] = {0};
  for (int64_t r = 0; r < nranks && m.blocks && m.holds && *ok; r++) {
    lw_coords_of(lp->ndims, dims, r, rc);
    int h = lw_block_at(lp, c->tensor, params, rc, &m.blocks[r]);
    m.holds[r] = h > 0, *ok = h >= 0;
  }
  for (int64_t r = 0; r < nranks && m.blocks && m.holds && *ok && !m.oom; r++) {
    lw_box box;
    lw_coords_of(lp->ndims, dims, r, rc);
    if (!(*ok = lw_box_at(lp, i, c, params, rc, &box))) break;
    if (c->order == 0) box.order = 0; /* a scalar: one element */
    rank_messages(&m, r, rc, &box);
  }
  if (!m.blocks || !m.holds || m.oom) *ok = false;
  free(m.blocks);
  free(m.holds);
  if (!*ok) {
    free(m.v);
    return NULL;
  }
  if (m.n) qsort(m.v, (size_t)m.n, sizeof *m.v, by_sender);
  *n = m.n;
  return m.v;
}
