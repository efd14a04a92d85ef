/* random_data.h -- deterministic random test data for the runtime tests that run under
 * mpirun (tests/runtime/test_runtime.c, tests/cuemu/test_device.c): a hash (mix) and a
 * stream (rnd) that give every rank the same values, typed element access, the grids of
 * nd dims for the rank count, random distributions and extents, and boxes that depend only
 * on a seed and a rank's grid coordinates (random_need, a dtl_box_fn).  Include after
 * distal/runtime.h, with `static int g_size` (the rank count) declared. */
#ifndef DISTAL_TESTS_RANDOM_DATA_H
#define DISTAL_TESTS_RANDOM_DATA_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
/* same stream on every rank: plans must be identical everywhere */
static int64_t rnd(uint64_t *s, int64_t n) {
  return n <= 0 ? 0 : (int64_t)(mix((*s)++) % (uint64_t)n);
}

static double get_el(dtl_type t, const void *p, int64_t i) {
  switch (t) {
  case DTL_DOUBLE:
    return ((const double *)p)[i];
  case DTL_FLOAT:
    return ((const float *)p)[i];
  case DTL_INT32:
    return ((const int32_t *)p)[i];
  case DTL_INT64:
    return (double)((const int64_t *)p)[i];
  }
  return 0;
}

static void set_el(dtl_type t, void *p, int64_t i, double v) {
  switch (t) {
  case DTL_DOUBLE:
    ((double *)p)[i] = v;
    break;
  case DTL_FLOAT:
    ((float *)p)[i] = (float)v;
    break;
  case DTL_INT32:
    ((int32_t *)p)[i] = (int32_t)v;
    break;
  case DTL_INT64:
    ((int64_t *)p)[i] = (int64_t)v;
    break;
  }
}

static void *alloc_box(dtl_type t, const dtl_box *b) {
  return calloc((size_t)dtl_box_volume(b) + 1, dtl_type_size(t));
}

static int grids(int nd, int64_t out[][DTL_MAX_DIMS], int max) {
  int n = 0;
  int64_t d[3];
  for (d[0] = 1; d[0] <= g_size; d[0]++)
    for (d[1] = 1; d[1] <= (nd > 1 ? g_size : 1); d[1]++)
      for (d[2] = 1; d[2] <= (nd > 2 ? g_size : 1); d[2]++)
        if (d[0] * d[1] * d[2] == g_size && n < max) {
          for (int k = 0; k < nd; k++)
            out[n][k] = d[k];
          n++;
        }
  return n;
}

static dtl_dist random_dist(uint64_t *s, const dtl_ctx *ctx, int order, const int64_t *ext,
                            bool allow_fixed) {
  dtl_dist d;
  memset(&d, 0, sizeof d);
  d.order = order;
  d.ngrid = ctx->ndims;
  for (int k = 0; k < order; k++)
    d.extent[k] = ext[k];
  if (rnd(s, 10) == 0) {
    d.replicated_everywhere = true;
    return d;
  }
  unsigned used = 0;
  for (int g = 0; g < ctx->ndims; g++) {
    int64_t r = rnd(s, allow_fixed ? 7 : 6); /* PART 3/7, STAR 3/7, FIXED 1/7 */
    int free_dims[DTL_MAX_DIMS], nf = 0;
    for (int k = 0; k < order; k++)
      if (!(used & (1u << k)))
        free_dims[nf++] = k;
    if (r <= 2 && nf > 0) {
      d.kind[g] = DTL_DIM_PART;
      d.tdim[g] = free_dims[rnd(s, nf)];
      used |= 1u << d.tdim[g];
    } else if (r == 6) {
      d.kind[g] = DTL_DIM_FIXED;
      d.fixed[g] = rnd(s, ctx->dims[g]);
    } else {
      d.kind[g] = DTL_DIM_STAR;
    }
  }
  return d;
}

static void random_extents(uint64_t *s, int order, int64_t *ext) {
  for (int k = 0; k < order; k++)
    ext[k] = rnd(s, 12) == 0 ? 0 : 1 + rnd(s, 9);
}

/* a box of the tensor that depends only on (seed, key): sometimes empty, sometimes all */
static void hashed_box(uint64_t seed, uint64_t key, int order, const int64_t *ext, dtl_box *b) {
  uint64_t h = mix(seed ^ mix(key));
  int mode = (int)(h % 8); /* 0: empty, 1 and 2: everything, else random */
  b->nd = order;
  for (int k = 0; k < order; k++) {
    uint64_t a = mix(h + 2 * (uint64_t)k + 1), c = mix(h + 2 * (uint64_t)k + 2);
    int64_t n = ext[k];
    bool all = mode == 1 || mode == 2 || n == 0;
    b->lo[k] = all ? 0 : (int64_t)(a % (uint64_t)n);
    b->hi[k] = all ? n : b->lo[k] + 1 + (int64_t)(c % (uint64_t)(n - b->lo[k]));
    if (mode == 0 && k == 0)
      b->hi[k] = b->lo[k];
  }
}

typedef struct {
  uint64_t seed;
  int order, ndims;
  int64_t ext[DTL_MAX_DIMS];
} box_arg;

static uint64_t coords_key(int nd, const int64_t *c) {
  uint64_t k = 0x1234;
  for (int g = 0; g < nd; g++)
    k = mix(k ^ (uint64_t)c[g]);
  return k;
}

static void random_need(const void *arg, const int64_t *coords, dtl_box *box) {
  const box_arg *a = arg;
  hashed_box(a->seed, coords_key(a->ndims, coords), a->order, a->ext, box);
}

#endif
