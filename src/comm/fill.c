/* fill.c -- initial data that depends only on the global coordinates, so that every rank
 * count and every distribution sees the same tensors. */
#include "distal/runtime.h"

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* One element from its global linear index; `key` mixes seed and tensor id. */
static void fill_one(dtl_type t, dtl_fill_kind kind, uint64_t key, int64_t lin, char *out) {
  double v = 0;
  int64_t iv = 0;
  switch (kind) {
  case DTL_FILL_RANDOM: {
    uint64_t h = splitmix64(key ^ (uint64_t)lin);
    v = (double)(h >> 11) * 0x1.0p-53 * 2.0 - 1.0;
    if (t == DTL_FLOAT)
      v = (double)(h >> 40) * 0x1.0p-24 * 2.0 - 1.0;
    iv = (int64_t)(h % 9) - 4;
    break;
  }
  case DTL_FILL_ONES:
    v = 1, iv = 1;
    break;
  case DTL_FILL_ZEROS:
    v = 0, iv = 0;
    break;
  case DTL_FILL_INDEX:
    v = (double)lin, iv = t == DTL_INT32 ? lin % 1000 : lin;
    break;
  }
  switch (t) {
  case DTL_DOUBLE:
    *(double *)out = v;
    break;
  case DTL_FLOAT:
    *(float *)out = (float)v;
    break;
  case DTL_INT32:
    *(int32_t *)out = (int32_t)iv;
    break;
  case DTL_INT64:
    *(int64_t *)out = iv;
    break;
  }
}

void dtl_fill(dtl_type t, dtl_fill_kind kind, uint64_t seed, int tensor_id, int order,
              const int64_t *extent, const dtl_box *own, void *local) {
  const size_t es = dtl_type_size(t);
  uint64_t key = splitmix64(splitmix64(seed) ^ (uint64_t)(int64_t)tensor_id);
  if (!local || dtl_box_empty(own))
    return;
  if (order == 0) {
    fill_one(t, kind, key, 0, local);
    return;
  }
  /* walk the block row by row; the linear index runs on along each row */
  int64_t idx[DTL_MAX_DIMS];
  for (int k = 0; k < order; k++)
    idx[k] = own->lo[k];
  int64_t row = own->hi[order - 1] - own->lo[order - 1];
  char *out = local;
  for (;;) {
    int64_t lin = 0;
    for (int k = 0; k < order; k++)
      lin = lin * extent[k] + idx[k];
    for (int64_t j = 0; j < row; j++, out += es)
      fill_one(t, kind, key, lin + j, out);
    int k = order - 2;
    while (k >= 0 && ++idx[k] == own->hi[k])
      idx[k] = own->lo[k], k--;
    if (k < 0)
      return;
  }
}
