/* dist.c -- ownership maps: which processor holds which block of a distributed tensor. */
#include "distal/runtime.h"

/* Non-holders get an empty box (for order 0, where no box is empty, only the result
 * tells). */
bool dtl_dist_block(const dtl_ctx *ctx, const dtl_dist *d, const int64_t *coords, dtl_box *box) {
  box->nd = d->order;
  for (int t = 0; t < d->order; t++) {
    box->lo[t] = 0;
    box->hi[t] = d->extent[t];
  }
  if (d->replicated_everywhere)
    return true;
  int64_t nominal[DTL_MAX_DIMS];
  for (int t = 0; t < d->order; t++) nominal[t] = d->extent[t];
  for (int g = 0; g < d->ngrid; g++) {
    if (d->kind[g] == DTL_DIM_PART) {
      int t = d->tdim[g];
      if (d->split[g]) { /* a balanced partition (one level): its boundaries */
        box->lo[t] = d->split[g][coords[g]], box->hi[t] = d->split[g][coords[g] + 1];
        nominal[t] = box->hi[t] - box->lo[t];
        continue;
      }
      int64_t s = dtl_ceildiv(nominal[t], ctx->dims[g]), base = box->lo[t], top = box->hi[t];
      box->lo[t] = dtl_min(top, base + coords[g] * s);
      box->hi[t] = dtl_min(top, base + (coords[g] + 1) * s);
      nominal[t] = s;
    } else if (d->kind[g] == DTL_DIM_FIXED && coords[g] != d->fixed[g]) {
      for (int t = 0; t < d->order; t++)
        box->lo[t] = box->hi[t] = 0;
      return false;
    }
  }
  return true;
}

bool dtl_dist_canonical(const dtl_dist *d, const int64_t *coords) {
  for (int g = 0; g < d->ngrid; g++)
    if ((d->replicated_everywhere || d->kind[g] == DTL_DIM_STAR) && coords[g] != 0)
      return false;
  return true;
}

int dtl_dist_validate(dtl_ctx *ctx, const dtl_dist *d, const char *name) {
  if (!name)
    name = "?";
  if (d->order < 0 || d->order > DTL_MAX_DIMS)
    return dtl_fail(ctx, "tensor %s: order %d is not in 0..%d", name, d->order, DTL_MAX_DIMS);
  for (int t = 0; t < d->order; t++)
    if (d->extent[t] < 0)
      return dtl_fail(ctx, "tensor %s: dimension %d has negative extent %lld", name, t,
                      (long long)d->extent[t]);
  /* its elements, and their bytes, must be countable (int64 and size_t): a larger tensor
   * could be neither allocated nor addressed */
  int64_t elems = 1;
  for (int t = 0; t < d->order; t++) {
    if (d->extent[t] > 0 && elems > (INT64_MAX / 16) / d->extent[t]) {
      char dims[256];
      int w = 0;
      for (int x = 0; x < d->order && w < (int)sizeof dims - 24; x++)
        w += snprintf(dims + w, sizeof dims - (size_t)w, "%s%lld", x ? " x " : "", (long long)d->extent[x]);
      return dtl_fail(ctx, "tensor %s: %s elements are too many to address (at most 2^59)", name, dims);
    }
    elems *= d->extent[t];
  }
  if (d->replicated_everywhere)
    return 0;
  if (d->ngrid != ctx->ndims)
    return dtl_fail(ctx, "tensor %s: distribution has %d grid dims but the grid has %d", name,
                    d->ngrid, ctx->ndims);
  unsigned used = 0;
  for (int g = 0; g < d->ngrid; g++) {
    switch (d->kind[g]) {
    case DTL_DIM_PART:
      if (d->tdim[g] < 0 || d->tdim[g] >= d->order)
        return dtl_fail(ctx, "tensor %s: grid dim %d partitions dimension %d of an order-%d tensor",
                        name, g, d->tdim[g], d->order);
      used |= 1u << d->tdim[g]; /* several grid dims: nested (hierarchical) blocks */
      break;
    case DTL_DIM_FIXED:
      if (d->fixed[g] < 0 || d->fixed[g] >= ctx->dims[g])
        return dtl_fail(ctx, "tensor %s: fixed coordinate %lld is outside grid dim %d of size %lld",
                        name, (long long)d->fixed[g], g, (long long)ctx->dims[g]);
      break;
    case DTL_DIM_STAR:
      break;
    default:
      return dtl_fail(ctx, "tensor %s: grid dim %d has an unknown kind", name, g);
    }
  }
  return 0;
}
