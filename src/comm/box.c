/* box.c -- half-open boxes of global coordinates and copies between row-major blocks. */
#define _DEFAULT_SOURCE /* madvise */
#include "distal/runtime.h"
#include "comm_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

bool dtl_box_empty(const dtl_box *b) {
  for (int d = 0; d < b->nd; d++)
    if (b->hi[d] <= b->lo[d])
      return true;
  return false;
}

int64_t dtl_box_volume(const dtl_box *b) {
  int64_t v = 1;
  for (int d = 0; d < b->nd; d++) {
    if (b->hi[d] <= b->lo[d])
      return 0;
    v *= b->hi[d] - b->lo[d];
  }
  return v;
}

bool dtl_box_intersect(const dtl_box *a, const dtl_box *b, dtl_box *out) {
  dtl_box r = {.nd = a->nd};
  for (int d = 0; d < a->nd; d++) {
    r.lo[d] = dtl_max(a->lo[d], b->lo[d]);
    r.hi[d] = dtl_min(a->hi[d], b->hi[d]);
  }
  *out = r;
  return !dtl_box_empty(out);
}

bool dtl_box_equal(const dtl_box *a, const dtl_box *b) {
  bool ea = dtl_box_empty(a), eb = dtl_box_empty(b);
  if (ea || eb)
    return ea && eb;
  if (a->nd != b->nd)
    return false;
  for (int d = 0; d < a->nd; d++)
    if (a->lo[d] != b->lo[d] || a->hi[d] != b->hi[d])
      return false;
  return true;
}

bool dtl_box_contains(const dtl_box *outer, const dtl_box *inner) {
  if (dtl_box_empty(inner))
    return true;
  if (dtl_box_empty(outer) || outer->nd != inner->nd)
    return false;
  for (int d = 0; d < inner->nd; d++)
    if (inner->lo[d] < outer->lo[d] || inner->hi[d] > outer->hi[d])
      return false;
  return true;
}

void dtl_zero(dtl_type t, void *buf, int64_t count) {
  if (count > 0)
    memset(buf, 0, (size_t)count * dtl_type_size(t)); /* 0 bits are 0 for all */
}

/* dst[0..n) += src[0..n), written so that the compiler vectorizes it */
#define DEFINE_ADD(name, T)                                                                        \
  static void name(T *restrict dst, const T *restrict src, int64_t n) {                            \
    for (int64_t i = 0; i < n; i++)                                                                \
      dst[i] += src[i];                                                                            \
  }
DEFINE_ADD(add_f64, double)
DEFINE_ADD(add_f32, float)
DEFINE_ADD(add_i32, int32_t)
DEFINE_ADD(add_i64, int64_t)

static void add_run(dtl_type t, void *dst, const void *src, int64_t n) {
  switch (t) {
  case DTL_DOUBLE:
    add_f64(dst, src, n);
    break;
  case DTL_FLOAT:
    add_f32(dst, src, n);
    break;
  case DTL_INT32:
    add_i32(dst, src, n);
    break;
  case DTL_INT64:
    add_i64(dst, src, n);
    break;
  }
}

void dtl_copy_layout(const dtl_box *srcbox, const dtl_box *dstbox, const dtl_box *region,
                     int64_t *sstride, int64_t *dstride, int64_t *ext, int64_t *soff,
                     int64_t *doff) {
  int64_t ss = 1, ds = 1;
  *soff = *doff = 0;
  for (int d = region->nd - 1; d >= 0; d--) {
    sstride[d] = ss;
    dstride[d] = ds;
    ext[d] = region->hi[d] - region->lo[d];
    *soff += (region->lo[d] - srcbox->lo[d]) * ss;
    *doff += (region->lo[d] - dstbox->lo[d]) * ds;
    ss *= srcbox->hi[d] - srcbox->lo[d];
    ds *= dstbox->hi[d] - dstbox->lo[d];
  }
}

/* The copy walks the region in runs: the innermost dims that the region covers entirely in
 * both layouts merge with the next one out into one contiguous run, which is a memcpy or a
 * vectorized add; an odometer over the remaining outer dims moves both offsets. */
void dtl_copy_box(dtl_type t, const void *src, const dtl_box *srcbox, void *dst,
                  const dtl_box *dstbox, const dtl_box *region, bool accumulate) {
  const int nd = region->nd;
  const size_t es = dtl_type_size(t);
  if (dtl_box_empty(region))
    return;
  if (nd == 0) {
    if (accumulate)
      add_run(t, dst, src, 1);
    else
      memcpy(dst, src, es);
    return;
  }
  int64_t sstride[DTL_MAX_DIMS], dstride[DTL_MAX_DIMS], ext[DTL_MAX_DIMS] = {0};
  int64_t soff, doff;
  dtl_copy_layout(srcbox, dstbox, region, sstride, dstride, ext, &soff, &doff);
  /* merge full inner dims: k is the outermost dim of the run */
  int k = nd - 1;
  int64_t run = ext[k];
  while (k > 0 && ext[k] == srcbox->hi[k] - srcbox->lo[k] &&
         ext[k] == dstbox->hi[k] - dstbox->lo[k]) {
    k--;
    run *= ext[k];
  }
  const char *s = (const char *)src + soff * (int64_t)es;
  char *dp = (char *)dst + doff * (int64_t)es;
  int64_t idx[DTL_MAX_DIMS] = {0};
  for (;;) {
    if (accumulate)
      add_run(t, dp, s, run);
    else
      memcpy(dp, s, (size_t)run * es);
    int d = k - 1;
    while (d >= 0) {
      s += sstride[d] * (int64_t)es;
      dp += dstride[d] * (int64_t)es;
      if (++idx[d] < ext[d])
        break;
      s -= ext[d] * sstride[d] * (int64_t)es;
      dp -= ext[d] * dstride[d] * (int64_t)es;
      idx[d] = 0;
      d--;
    }
    if (d < 0)
      return;
  }
}

#define REL_ERR_LOOP(T)                                                                            \
  do {                                                                                             \
    const T *x = a, *y = b;                                                                        \
    for (int64_t i = 0; i < count; i++) {                                                          \
      double xa = (double)x[i], yb = (double)y[i];                                                 \
      if (xa == yb || (xa != xa && yb != yb))                                                      \
        continue; /* equal, the same infinity, or NaN both */                                      \
      double e = fabs(xa - yb) / fmax(1.0, fabs(yb));                                              \
      if (e > worst || e != e)                                                                     \
        worst = e != e ? INFINITY : e;                                                             \
    }                                                                                              \
  } while (0)

/* DISTAL_HUGE_PAGES=0 in the environment: no huge pages asked for (read once) */
static bool huge_pages(void) {
  static int v = -1;
  if (v < 0) {
    const char *e = getenv("DISTAL_HUGE_PAGES");
    v = !(e && strcmp(e, "0") == 0);
  }
  return v;
}

void *dtl_halloc(size_t bytes) {
  if (bytes > SIZE_MAX - ((size_t)2 << 20)) return NULL;
  if (bytes < DTL_HUGE_MIN || !huge_pages()) {
    bytes = (bytes + 63) / 64 * 64; /* C11's aligned_alloc: a multiple of the alignment */
    return aligned_alloc(64, bytes > 0 ? bytes : 64);
  }
  const size_t huge = (size_t)2 << 20;
  bytes = (bytes + huge - 1) / huge * huge;
  void *p = aligned_alloc(huge, bytes);
#if defined(MADV_HUGEPAGE)
  if (p) (void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint: refused, the pages stay small */
#endif
  return p;
}

void *dtl_zalloc(size_t count, size_t size) {
  if (size && count > (SIZE_MAX - 64) / size) return NULL;
  size_t bytes = count * size;
  void *p = dtl_halloc(bytes);
  if (p) memset(p, 0, bytes > 0 ? bytes : 1);
  return p;
}

double dtl_max_rel_error(dtl_type t, const void *a, const void *b, int64_t count) {
  double worst = 0;
  switch (t) {
  case DTL_DOUBLE:
    REL_ERR_LOOP(double);
    break;
  case DTL_FLOAT:
    REL_ERR_LOOP(float);
    break;
  case DTL_INT32:
    REL_ERR_LOOP(int32_t);
    break;
  case DTL_INT64:
    REL_ERR_LOOP(int64_t);
    break;
  }
  return worst;
}
