/* stage.c -- import and export of device blocks through host memory.
 *
 * Moving a tensor between the application's layout and a distribution is an exchange that
 * happens once, outside the computation, so it reuses the host exchange of redist.c: the
 * application's box and this rank's block are copied to host memory, exchanged, and the
 * result copied back to the device. */
#include <stdlib.h>

#include <distal/cuda.h>

static int64_t app_volume(int order, const int64_t *lo, const int64_t *hi) {
  int64_t v = 1;
  if (!lo || !hi) return 0; /* the host exchange reports it */
  for (int d = 0; d < order; d++) v *= hi[d] > lo[d] ? hi[d] - lo[d] : 0;
  return v;
}

/* Stage both sides through host memory: the side read (data for an import, local for an export)
 * is copied to the host, the host exchange runs, and the side written is copied back.  The
 * side read is only read. */
static int staged(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const int64_t *lo, const int64_t *hi,
                  void *data, void *local, const dtl_box *own, bool import) {
  size_t es = dtl_type_size(t);
  int64_t na = app_volume(d->order, lo, hi), nb = dtl_box_volume(own);
  void *hdata = malloc((size_t)(na > 0 ? na : 1) * es), *hlocal = malloc((size_t)(nb > 0 ? nb : 1) * es);
  void *in = import ? data : local, *hin = import ? hdata : hlocal;
  void *out = import ? local : data, *hout = import ? hlocal : hdata;
  int64_t nin = import ? na : nb, nout = import ? nb : na;
  int err = !hdata || !hlocal ? dtl_fail(ctx, "out of memory staging an %s", import ? "import" : "export") : 0;
  if (!err && nin > 0 && !in)
    err = dtl_fail(ctx, "rank %d: %s (%lld elements) is NULL", ctx->rank, import ? "the data of its box" : "its block", (long long)nin);
  if (!err && nin > 0) err = dtl_cu_to_host(ctx, hin, in, (size_t)nin * es);
  if (!err && nout > 0 && !out)
    err = dtl_fail(ctx, "rank %d: %s (%lld elements) is NULL", ctx->rank, import ? "its block" : "the data of its box", (long long)nout);
  /* every rank takes part in the exchange, or none does */
  if (!dtl_any_error(ctx, err)) {
    err = import ? dtl_import(ctx, d, t, lo, hi, hdata, hlocal, own) : dtl_export(ctx, d, t, hlocal, own, lo, hi, hdata);
    if (!err && nout > 0) err = dtl_cu_to_device(ctx, out, hout, (size_t)nout * es);
    err = dtl_any_error(ctx, err);
  } else {
    err = 1;
  }
  free(hdata);
  free(hlocal);
  return err;
}

int dtl_cu_import(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const int64_t *lo, const int64_t *hi,
                  const void *data, void *local, const dtl_box *own) {
  return staged(ctx, d, t, lo, hi, (void *)data, local, own, true);
}

int dtl_cu_export(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const void *local, const dtl_box *own,
                  const int64_t *lo, const int64_t *hi, void *data) {
  return staged(ctx, d, t, lo, hi, data, (void *)local, own, false);
}
