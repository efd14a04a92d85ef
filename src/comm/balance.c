/* balance.c -- balanced partitions (`balanced`, `balanced by`): a dimension split into blocks of
 * about equal stored entries instead of equal extent.  A split is the G + 1 boundaries of the G
 * blocks of a grid dim, block c being [split[c], split[c + 1]); every rank holds the same array. */
#include <stdlib.h>
#include <string.h>

#include "distal/runtime.h"

int64_t dtl_split_owner(const int64_t *split, int64_t parts, int64_t x) {
  /* the last block that starts at or before x (empty blocks before it start there too) */
  int64_t lo = 0, hi = parts; /* split[lo] <= x < split[hi] holds while searching */
  if (x < split[0]) return 0;
  if (x >= split[parts]) return parts - 1;
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if (split[mid] <= x) lo = mid;
    else hi = mid;
  }
  return lo;
}

int dtl_split_init(dtl_ctx *ctx, int g, int64_t extent, const int64_t *given, const char *name, int64_t *split) {
  const int64_t G = ctx->dims[g], s = dtl_ceildiv(extent, G);
  int bad = 0;
  for (int64_t c = 0; c <= G; c++) split[c] = given ? given[c] : dtl_min(extent, c * s);
  if (split[0] != 0 || split[G] != extent) bad = 1;
  for (int64_t c = 0; c < G && !bad; c++) bad = split[c] > split[c + 1];
  /* every rank must pass the same boundaries: their minimum and maximum agree */
  int64_t *lo = malloc(sizeof *lo * (size_t)(G + 1)), *hi = malloc(sizeof *hi * (size_t)(G + 1));
  int oom = !lo || !hi, any = 0;
  if (!oom) {
    MPI_Allreduce(split, lo, (int)(G + 1), MPI_INT64_T, MPI_MIN, ctx->comm);
    MPI_Allreduce(split, hi, (int)(G + 1), MPI_INT64_T, MPI_MAX, ctx->comm);
    for (int64_t c = 0; c <= G; c++) bad |= (lo[c] != hi[c]) << 1;
  }
  free(lo), free(hi);
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_BOR, ctx->comm);
  if (oom) return dtl_fail(ctx, "out of memory for the balanced partition of %s", name);
  if (any & 1)
    return dtl_fail(ctx, "balanced partition of %s over grid dim %d: the %lld boundaries must rise from 0 to %lld",
                    name, g, (long long)(G + 1), (long long)extent);
  if (any & 2)
    return dtl_fail(ctx, "balanced partition of %s over grid dim %d: the ranks passed different boundaries", name, g);
  return 0;
}

/* Boundaries from histograms, in memory independent of the extent: the coordinates are first
 * counted in bins of b (at most 256 G bins); the bin where block c's share (c / G of the total)
 * is reached is then counted coordinate by coordinate (at most G - 1 such bins), and block c
 * ends at the coordinate boundary nearest that share.  Blocks are therefore balanced to within
 * one coordinate's entries (a coordinate holding more than a block's share is a block alone). */
int dtl_balance_split(MPI_Comm comm, int64_t n, const int64_t *coords, int64_t stride, int64_t extent,
                      int64_t parts, int64_t *split) {
  if (parts < 1 || extent < 0) return 1;
  int64_t nb = dtl_min(extent, 256 * parts), b = nb > 0 ? dtl_ceildiv(extent, nb) : 1;
  nb = nb > 0 ? dtl_ceildiv(extent, b) : 0;
  int64_t *h = calloc((size_t)nb + 1, sizeof *h), *at = calloc((size_t)parts + 1, sizeof *at),
          *slot = malloc(sizeof *slot * (size_t)(nb + 1)), *fine = calloc((size_t)parts * (size_t)b + 1, sizeof *fine);
  int oom = !h || !at || !slot || !fine || n < 0 || (n > 0 && !coords), any = 0;
  for (int64_t e = 0; e < n && !oom; e++) /* every coordinate in [0, extent) */
    oom = coords[e * stride] < 0 || coords[e * stride] >= extent;
  MPI_Allreduce(&oom, &any, 1, MPI_INT, MPI_MAX, comm);
  if (any) {
    free(h), free(at), free(slot), free(fine);
    return 1;
  }
  for (int64_t e = 0; e < n; e++) {
    int64_t x = coords[e * stride];
    if (x >= 0 && x < extent) h[x / b]++;
  }
  if (nb > 0) MPI_Allreduce(MPI_IN_PLACE, h, (int)nb, MPI_INT64_T, MPI_SUM, comm);
  int64_t total = 0;
  for (int64_t k = 0; k < nb; k++) total += h[k];
  /* the bin of each boundary: the first whose running count passes c / parts of the total */
  int64_t nfine = 0, run = 0, k = 0;
  for (int64_t k2 = 0; k2 < nb; k2++) slot[k2] = -1;
  for (int64_t c = 1; c < parts && total > 0; c++) {
    while (k < nb && (run + h[k]) * parts <= c * total) run += h[k++];
    at[c] = k;
    if (k < nb && slot[k] < 0) slot[k] = nfine++;
  }
  /* those bins coordinate by coordinate */
  for (int64_t e = 0; e < n && nfine; e++) {
    int64_t x = coords[e * stride];
    if (x >= 0 && x < extent && slot[x / b] >= 0) fine[slot[x / b] * b + x % b]++;
  }
  if (nfine) MPI_Allreduce(MPI_IN_PLACE, fine, (int)(nfine * b), MPI_INT64_T, MPI_SUM, comm);
  split[0] = 0;
  run = 0, k = 0;
  for (int64_t c = 1; c < parts; c++) {
    if (!total) {
      split[c] = dtl_min(extent, c * dtl_ceildiv(extent, parts));
      continue;
    }
    while (k < at[c]) run += h[k++];
    int64_t x = dtl_min(extent, at[c] * b); /* the boundary: at the bin's start, or inside it */
    if (at[c] < nb) {
      const int64_t *f = fine + slot[at[c]] * b;
      int64_t r = run, best = x, gap = c * total - r * parts; /* (target - count before x) * parts */
      for (int64_t q = 0; q < b && at[c] * b + q < extent; q++) {
        r += f[q];
        int64_t g = r * parts - c * total;
        if ((g < 0 ? -g : g) < (gap < 0 ? -gap : gap)) best = at[c] * b + q + 1, gap = g;
        if (g >= 0) break;
      }
      x = best;
    }
    split[c] = dtl_max(x, split[c - 1]);
  }
  split[parts] = extent;
  for (int64_t c = parts - 1; c > 0; c--) split[c] = dtl_min(split[c], split[c + 1]);
  free(h), free(at), free(slot), free(fine);
  return 0;
}

int dtl_sparse_balance(dtl_ctx *ctx, const dtl_dist *d, const dtl_sparse *piece, const dtl_box *own, int g,
                       int64_t *split) {
  if (g < 0 || g >= d->ngrid || d->kind[g] != DTL_DIM_PART) return dtl_fail(ctx, "balanced partition: grid dim %d partitions nothing", g);
  int x = d->tdim[g];
  int64_t n = 0, *coords = NULL;
  void *vals = NULL;
  int err = 0;
  /* replicas hold the same entries: only the canonical one counts them */
  if (dtl_dist_canonical(d, ctx->coords) && dtl_box_volume(own) > 0 && dtl_sparse_extract(piece, own, &n, &coords, &vals))
    err = dtl_fail(ctx, "out of memory for the balanced partition");
  if (dtl_any_error(ctx, err)) {
    free(coords), free(vals);
    return 1;
  }
  err = dtl_balance_split(ctx->comm, n, coords ? coords + x : NULL, d->order, d->extent[x], ctx->dims[g], split);
  free(coords), free(vals);
  if (err) return dtl_fail(ctx, "out of memory for the balanced partition");
  return 0;
}

void dtl_entries_print(dtl_ctx *ctx, FILE *out, const char *name, int64_t n) {
  int64_t mn = n, mx = n, sum = n;
  int size = 1, rank = 0;
  MPI_Comm_size(ctx->comm, &size);
  MPI_Comm_rank(ctx->comm, &rank);
  MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_INT64_T, MPI_MIN, ctx->comm);
  MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_INT64_T, MPI_MAX, ctx->comm);
  MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_INT64_T, MPI_SUM, ctx->comm);
  double mean = (double)sum / size;
  if (rank == 0)
    fprintf(out, "entries of %s per rank: min %lld, max %lld, mean %.1f, max/mean %.3f\n", name, (long long)mn, (long long)mx,
            mean, mean > 0 ? (double)mx / mean : 1.0);
}
