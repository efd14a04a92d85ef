/* device.c -- libdistal_cuda: the device half of the runtime (distal/cuda.h).
 *
 * Every communication function plans exactly as its host twin in comm.c, through the same
 * planning code (comm_internal.h): the same pieces, owners, roots, statistics and debug
 * checks.  Only the data moves differently: NCCL instead of MPI, device kernels
 * (device_kernels.cu) instead of dtl_copy_box for packing and unpacking.
 *
 * Ordering.  Each context owns a compute stream (kernels, cuBLAS, copies) and a
 * communication stream on which every NCCL call is issued, so that every rank issues the
 * NCCL operations of one communicator in program order, the same on every rank.  A
 * communication first makes the communication stream wait for an event recorded on the
 * compute stream (its inputs are written, and earlier kernels no longer read the buffers it
 * overwrites); a blocking-style operation then makes the compute stream wait for an event
 * recorded after it on the communication stream.  Neither step blocks the host.  Split-phase
 * operations record their own event, which dtl_cu_wait hands to the compute stream.
 * Staging buffers are stream-ordered allocations, freed on the stream that used them last,
 * right after that use: the stream order keeps them alive long enough.
 *
 * Memory functions (copies, zero, copy_box) work without dtl_cu_attach on the default
 * stream; communication and leaf kernels need the attached state. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "comm_internal.h"
#include "device.h"
#include "distal/cuda.h"

_Static_assert(DTL_CUK_MAX_DIMS == DTL_MAX_DIMS, "device.h and runtime.h disagree on dims");
_Static_assert(DTL_CUK_DOUBLE == (int)DTL_DOUBLE && DTL_CUK_FLOAT == (int)DTL_FLOAT &&
                   DTL_CUK_INT32 == (int)DTL_INT32 && DTL_CUK_INT64 == (int)DTL_INT64,
               "device.h and runtime.h disagree on type codes");

#define NMASKS (1u << DTL_MAX_DIMS)
enum { TAG_SHIFT_CHECK = 0x4456 };

/* ---- the state attached to a context ----------------------------------------------------- */
typedef struct {
  int device;
  cudaStream_t compute, comm;
  cudaEvent_t computed, communicated; /* hand-overs of blocking operations (reused) */
  cublasHandle_t blas;                /* bound to the compute stream */
  ncclComm_t grid;                    /* over ctx->cart, rank = cart rank; NULL on one rank */
  bool have[NMASKS];                  /* masks attached */
  ncclComm_t sub[NMASKS];             /* per mask: NULL when the sub-grid has one member */
  bool owns[NMASKS];                  /* sub[m] is not the grid's communicator */
} dev_state;

struct dtl_cu_request {
  cudaEvent_t done; /* recorded on the communication stream after the operation */
};

static void release(void *p);

/* ---- errors ------------------------------------------------------------------------------ */
static int cuda_fail(dtl_ctx *ctx, cudaError_t e, const char *what) {
  /* reported here, so a later kernel launch must not report it again */
  (void)cudaGetLastError();
  return dtl_fail(ctx, "%s: %s", what, cudaGetErrorString(e));
}

static int nccl_fail(dtl_ctx *ctx, ncclResult_t r, const char *what) {
  return dtl_fail(ctx, "%s: %s", what, ncclGetErrorString(r));
}

static int blas_fail(dtl_ctx *ctx, cublasStatus_t s, const char *what) {
  return dtl_fail(ctx, "%s: cuBLAS status %d", what, (int)s);
}

/* The return code of a launcher of device.h. */
static int kernel_check(dtl_ctx *ctx, int rc, const char *what) {
  if (rc == 0)
    return 0;
  if (rc == DTL_CUK_BAD_TYPE)
    return dtl_fail(ctx, "%s: unknown element type", what);
  return cuda_fail(ctx, (cudaError_t)rc, what);
}

int dtl_cu_check(dtl_ctx *ctx, int code, const char *what) {
  if (code == 0)
    return 0;
  return dtl_fail(ctx, "%s: %s", what, cudaGetErrorString((cudaError_t)code));
}

static bool known_type(dtl_type t) {
  return t == DTL_DOUBLE || t == DTL_FLOAT || t == DTL_INT32 || t == DTL_INT64;
}

static ncclDataType_t nccl_type(dtl_type t) {
  switch (t) {
  case DTL_DOUBLE:
    return ncclFloat64;
  case DTL_FLOAT:
    return ncclFloat32;
  case DTL_INT32:
    return ncclInt32;
  case DTL_INT64:
    return ncclInt64;
  }
  return ncclInt64;
}

/* The attached state, or NULL with a message. */
static dev_state *state(dtl_ctx *ctx, const char *what) {
  if (!ctx->dev || ctx->dev_free != release) {
    dtl_fail(ctx, "%s: the context has no device state (call dtl_cu_attach first)", what);
    return NULL;
  }
  return ctx->dev;
}

/* The attached state for an operation on elements of type t. */
static dev_state *typed_state(dtl_ctx *ctx, dtl_type t, const char *what) {
  dev_state *st = state(ctx, what);
  if (st && !known_type(t)) {
    dtl_fail(ctx, "%s: unknown element type %d", what, (int)t);
    return NULL;
  }
  return st;
}

/* The compute stream, or the default stream before dtl_cu_attach. */
static cudaStream_t compute_stream(const dtl_ctx *ctx) {
  return ctx->dev && ctx->dev_free == release ? ((dev_state *)ctx->dev)->compute : NULL;
}

/* ---- hand-overs between the two streams -------------------------------------------------- */
static int comm_after_compute(dtl_ctx *ctx, dev_state *st) {
  cudaError_t e = cudaEventRecord(st->computed, st->compute);
  if (e == cudaSuccess)
    e = cudaStreamWaitEvent(st->comm, st->computed, 0);
  return e == cudaSuccess ? 0 : cuda_fail(ctx, e, "ordering communication after computation");
}

static int compute_after_comm(dtl_ctx *ctx, dev_state *st) {
  cudaError_t e = cudaEventRecord(st->communicated, st->comm);
  if (e == cudaSuccess)
    e = cudaStreamWaitEvent(st->compute, st->communicated, 0);
  return e == cudaSuccess ? 0 : cuda_fail(ctx, e, "ordering computation after communication");
}

/* End of a split-phase operation queued on the communication stream: a request that
 * dtl_cu_wait turns into a wait of the compute stream.  Without memory for one, the compute
 * stream waits at once, which is correct, only less concurrent. */
static int finish_split(dtl_ctx *ctx, dev_state *st, dtl_cu_request **req) {
  struct dtl_cu_request *q = malloc(sizeof *q);
  if (q && cudaEventCreateWithFlags(&q->done, cudaEventDisableTiming) == cudaSuccess) {
    cudaError_t e = cudaEventRecord(q->done, st->comm);
    if (e == cudaSuccess) {
      *req = q;
      return 0;
    }
    cudaEventDestroy(q->done);
    free(q);
    return cuda_fail(ctx, e, "cudaEventRecord");
  }
  (void)cudaGetLastError();
  free(q);
  return compute_after_comm(ctx, st);
}

int dtl_cu_wait(dtl_ctx *ctx, dtl_cu_request **req) {
  if (!req || !*req)
    return 0;
  struct dtl_cu_request *q = *req;
  *req = NULL;
  dev_state *st = state(ctx, "wait");
  int err = 1;
  if (st) {
    cudaError_t e = cudaStreamWaitEvent(st->compute, q->done, 0);
    err = e == cudaSuccess ? 0 : cuda_fail(ctx, e, "wait: cudaStreamWaitEvent");
  }
  cudaEventDestroy(q->done); /* released by CUDA once the wait is satisfied */
  free(q);
  return err;
}

/* ---- box copies -------------------------------------------------------------------------- */
/* Queue on `stream` the copy of `region` from src (row-major over srcbox) into dst (over
 * dstbox), as dtl_copy_box.  The strides of both layouts go to the kernel with the dims that
 * are contiguous in both merged, and dims of extent 1 dropped, so that it decodes few
 * indices per element. */
static int copy_box(dtl_ctx *ctx, cudaStream_t stream, dtl_type t, const void *src,
                    const dtl_box *srcbox, void *dst, const dtl_box *dstbox,
                    const dtl_box *region, bool accumulate, const char *what) {
  const int nd = region->nd;
  const int64_t es = (int64_t)dtl_type_size(t);
  if (dtl_box_empty(region))
    return 0;
  int64_t sstride[DTL_MAX_DIMS], dstride[DTL_MAX_DIMS], ext[DTL_MAX_DIMS];
  int64_t soff, doff;
  dtl_copy_layout(srcbox, dstbox, region, sstride, dstride, ext, &soff, &doff);
  int64_t e2[DTL_MAX_DIMS], s2[DTL_MAX_DIMS], d2[DTL_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < nd; d++) {
    if (ext[d] == 1)
      continue;
    if (n > 0 && s2[n - 1] == ext[d] * sstride[d] && d2[n - 1] == ext[d] * dstride[d]) {
      /* dim d continues the previous one in both layouts */
      e2[n - 1] *= ext[d];
      s2[n - 1] = sstride[d];
      d2[n - 1] = dstride[d];
    } else {
      e2[n] = ext[d];
      s2[n] = sstride[d];
      d2[n] = dstride[d];
      n++;
    }
  }
  int rc = dtl_cuk_copy((int)t, (char *)dst + doff * es, (const char *)src + soff * es, n, e2, s2,
                        d2, accumulate, (void *)stream);
  return kernel_check(ctx, rc, what);
}

int dtl_cu_copy_box(dtl_ctx *ctx, dtl_type t, const void *src, const dtl_box *srcbox, void *dst,
                    const dtl_box *dstbox, const dtl_box *region, bool accumulate) {
  if (!known_type(t))
    return dtl_fail(ctx, "copy_box: unknown element type %d", (int)t);
  return copy_box(ctx, compute_stream(ctx), t, src, srcbox, dst, dstbox, region, accumulate,
                  "copy_box");
}

/* ---- memory ------------------------------------------------------------------------------ */
void *dtl_cu_malloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  return p;
}

void dtl_cu_free(void *p) {
  if (p)
    cudaFree(p);
}

int dtl_cu_memcpy(dtl_ctx *ctx, void *dst, const void *src, size_t bytes) {
  if (bytes == 0)
    return 0;
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute_stream(ctx));
  return e == cudaSuccess ? 0 : cuda_fail(ctx, e, "memcpy: cudaMemcpyAsync");
}

/* cudaMemcpy runs on the default stream, which does not wait for non-blocking streams: the
 * compute stream is synchronized first. */
static int sync_copy(dtl_ctx *ctx, void *dst, const void *src, size_t bytes,
                     enum cudaMemcpyKind kind, const char *what) {
  cudaStream_t s = compute_stream(ctx);
  cudaError_t e = s ? cudaStreamSynchronize(s) : cudaDeviceSynchronize();
  if (e == cudaSuccess && bytes > 0)
    e = cudaMemcpy(dst, src, bytes, kind);
  return e == cudaSuccess ? 0 : cuda_fail(ctx, e, what);
}

int dtl_cu_to_host(dtl_ctx *ctx, void *host, const void *dev, size_t bytes) {
  return sync_copy(ctx, host, dev, bytes, cudaMemcpyDeviceToHost, "copy to the host");
}

int dtl_cu_to_device(dtl_ctx *ctx, void *dev, const void *host, size_t bytes) {
  return sync_copy(ctx, dev, host, bytes, cudaMemcpyHostToDevice, "copy to the device");
}

int dtl_cu_zero(dtl_ctx *ctx, dtl_type t, void *buf, int64_t count) {
  if (!known_type(t))
    return dtl_fail(ctx, "zero: unknown element type %d", (int)t);
  if (count <= 0)
    return 0;
  /* 0 bits are 0 for all four types */
  cudaError_t e = cudaMemsetAsync(buf, 0, (size_t)count * dtl_type_size(t), compute_stream(ctx));
  return e == cudaSuccess ? 0 : cuda_fail(ctx, e, "zero: cudaMemsetAsync");
}

/* ---- attaching and releasing ------------------------------------------------------------- */
/* Collective over mpi (rank and size are this process's in it): its first rank makes the
 * unique id and broadcasts it with a flag, so that a failure there fails every rank instead
 * of leaving them in ncclCommInitRank. */
static int make_comm(dtl_ctx *ctx, MPI_Comm mpi, int rank, int size, ncclComm_t *out,
                     const char *what) {
  struct {
    int ok;
    ncclUniqueId id;
  } msg;
  *out = NULL;
  memset(&msg, 0, sizeof msg);
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&msg.id);
    msg.ok = r == ncclSuccess;
    if (!msg.ok)
      nccl_fail(ctx, r, "ncclGetUniqueId");
  }
  int rc = MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, mpi);
  if (rc != MPI_SUCCESS)
    return dtl_mpi_fail(ctx, rc, "MPI_Bcast of an NCCL unique id");
  if (!msg.ok)
    return rank == 0 ? 1 : dtl_fail(ctx, "%s: ncclGetUniqueId failed on its first rank", what);
#ifdef DISTAL_CUDA_EMULATION
  cuemu_use_comm(mpi);
#endif
  ncclResult_t r = ncclCommInitRank(out, size, msg.id, rank);
  if (r != ncclSuccess) {
    *out = NULL;
    return dtl_fail(ctx, "%s: ncclCommInitRank: %s", what, ncclGetErrorString(r));
  }
  return 0;
}

/* The state local to this rank: device, streams, events, cuBLAS. */
static int local_setup(dtl_ctx *ctx, dev_state *st) {
  cudaError_t e;
  if ((e = cudaGetDevice(&st->device)) != cudaSuccess)
    return cuda_fail(ctx, e, "dtl_cu_attach: cudaGetDevice");
  if ((e = cudaStreamCreateWithFlags(&st->compute, cudaStreamNonBlocking)) != cudaSuccess ||
      (e = cudaStreamCreateWithFlags(&st->comm, cudaStreamNonBlocking)) != cudaSuccess)
    return cuda_fail(ctx, e, "dtl_cu_attach: cudaStreamCreateWithFlags");
  if ((e = cudaEventCreateWithFlags(&st->computed, cudaEventDisableTiming)) != cudaSuccess ||
      (e = cudaEventCreateWithFlags(&st->communicated, cudaEventDisableTiming)) != cudaSuccess)
    return cuda_fail(ctx, e, "dtl_cu_attach: cudaEventCreateWithFlags");
  cublasStatus_t s = cublasCreate(&st->blas);
  if (s != CUBLAS_STATUS_SUCCESS) {
    st->blas = NULL;
    return blas_fail(ctx, s, "dtl_cu_attach: cublasCreate");
  }
  if ((s = cublasSetStream(st->blas, st->compute)) != CUBLAS_STATUS_SUCCESS)
    return blas_fail(ctx, s, "dtl_cu_attach: cublasSetStream");
  return 0;
}

/* dtl_ctx_destroy calls this on every rank: the communicators go in the same order
 * everywhere (destroying one may wait for its other members). */
static void release(void *p) {
  dev_state *st = p;
  if (!st)
    return;
  if (st->compute)
    cudaStreamSynchronize(st->compute);
  if (st->comm)
    cudaStreamSynchronize(st->comm);
  for (unsigned m = 0; m < NMASKS; m++)
    if (st->owns[m] && st->sub[m])
      ncclCommDestroy(st->sub[m]);
  if (st->grid)
    ncclCommDestroy(st->grid);
  if (st->blas)
    cublasDestroy(st->blas);
  if (st->computed)
    cudaEventDestroy(st->computed);
  if (st->communicated)
    cudaEventDestroy(st->communicated);
  if (st->compute)
    cudaStreamDestroy(st->compute);
  if (st->comm)
    cudaStreamDestroy(st->comm);
  (void)cudaGetLastError();
  free(st);
}

/* A broadcast with mask m runs over the sub-grid of m without the tensor's STAR dims (the
 * members along those hold the data themselves), which can be any sub-mask of m: every
 * sub-mask of an attached mask gets its communicator.  Sub-grids of one member need none.
 * Every rank walks the masks in the same order, and every rank agrees on success after each
 * step, so that a failure anywhere fails every rank at the same point. */
int dtl_cu_attach(dtl_ctx *ctx, int nmasks, const unsigned *masks) {
  if (ctx->dev)
    return dtl_fail(ctx, "dtl_cu_attach: the context already has device state");
  if (nmasks < 0 || (nmasks > 0 && !masks))
    return dtl_fail(ctx, "dtl_cu_attach: no array of %d masks", nmasks);
  const unsigned full = (1u << ctx->ndims) - 1u;
  dev_state *st = calloc(1, sizeof *st);
  int err = st ? local_setup(ctx, st) : dtl_fail(ctx, "out of memory");
  if (dtl_any_error(ctx, err)) {
    release(st);
    return 1;
  }
  if (ctx->size > 1)
    err = make_comm(ctx, ctx->cart, ctx->rank, ctx->size, &st->grid,
                    "the NCCL communicator of the grid");
  if (dtl_any_error(ctx, err))
    goto fail;
  bool want[NMASKS] = {false};
  for (int i = 0; i < nmasks; i++) {
    unsigned m = masks[i] & full;
    for (unsigned s = m;; s = (s - 1) & m) {
      want[s] = true;
      if (s == 0)
        break;
    }
  }
  for (unsigned m = 0; m <= full; m++) {
    if (!want[m])
      continue;
    MPI_Comm sub = dtl_subcomm(ctx, m);
    int size = 1, rank = 0, rc = MPI_SUCCESS;
    if (sub == MPI_COMM_NULL)
      err = dtl_fail(ctx, "dtl_cu_attach: MPI_Cart_sub failed for grid dims 0x%x", m);
    else if ((rc = MPI_Comm_size(sub, &size)) != MPI_SUCCESS ||
             (rc = MPI_Comm_rank(sub, &rank)) != MPI_SUCCESS)
      err = dtl_mpi_fail(ctx, rc, "MPI_Comm_size");
    if (!err && size > 1) {
      if (m == full) {
        /* the whole grid: ranks of the full sub-grid are cart ranks (both row-major) */
        st->sub[m] = st->grid;
      } else {
        char what[96];
        snprintf(what, sizeof what, "the NCCL communicator of grid dims 0x%x", m);
        err = make_comm(ctx, sub, rank, size, &st->sub[m], what);
        st->owns[m] = st->sub[m] != NULL;
      }
    }
    st->have[m] = !err;
    if (dtl_any_error(ctx, err))
      goto fail;
  }
  ctx->dev = st;
  ctx->dev_free = release;
  return 0;
fail:
  release(st);
  return 1;
}

void *dtl_cu_stream(dtl_ctx *ctx) { return (void *)compute_stream(ctx); }

int dtl_cu_sync(dtl_ctx *ctx) {
  dev_state *st = ctx->dev && ctx->dev_free == release ? ctx->dev : NULL;
  cudaError_t e;
  if (!st)
    e = cudaDeviceSynchronize();
  else if ((e = cudaStreamSynchronize(st->compute)) == cudaSuccess)
    e = cudaStreamSynchronize(st->comm);
  return e == cudaSuccess ? 0 : cuda_fail(ctx, e, "sync");
}

/* ---- point-to-point exchange ------------------------------------------------------------- */
/* Run an exchange plan, as run_plan of comm.c: send pieces of src (row-major over srcbox),
 * receive pieces into dst (over dstbox), assigning or adding.  Pieces contiguous on their
 * side move in place; the others are packed into one staging buffer per direction.  All of
 * it is one NCCL group on the communication stream; with accumulate the contributions are
 * added in the order of the senders' ranks (the own piece at this rank's place), so sums do
 * not depend on timing. */
static int run_xplan(dtl_ctx *ctx, dev_state *st, dtl_type t, const dtl_xplan *pl,
                     const void *src, const dtl_box *srcbox, void *dst, const dtl_box *dstbox,
                     bool accumulate) {
  const char *what = accumulate ? "accumulate" : "fetch";
  const int64_t es = (int64_t)dtl_type_size(t);
  const int ns = pl->send.n, nr = pl->recv.n;
  const ncclDataType_t nt = nccl_type(t);
  int64_t packed_s = 0, packed_r = 0, off;
  if (ns + nr == 0) /* at most the own piece: no communication */
    return pl->self ? copy_box(ctx, st->compute, t, src, srcbox, dst, dstbox, &pl->self_box,
                               accumulate, what)
                    : 0;
  if (!st->grid)
    return dtl_fail(ctx, "%s: no NCCL communicator over the grid", what);
  for (int i = 0; i < ns; i++)
    if (!dtl_contiguous_in(srcbox, &pl->send.v[i].box, &off))
      packed_s += dtl_box_volume(&pl->send.v[i].box);
  for (int i = 0; i < nr; i++)
    if (accumulate || !dtl_contiguous_in(dstbox, &pl->recv.v[i].box, &off))
      packed_r += dtl_box_volume(&pl->recv.v[i].box);
  /* per piece: where it is sent from, received to, and the staging slot to unpack (or NULL) */
  const char **from = malloc((size_t)(ns + 1) * sizeof *from);
  char **to = malloc((size_t)(nr + 1) * sizeof *to);
  char **where = malloc((size_t)(nr + 1) * sizeof *where);
  char *sbuf = NULL, *rbuf = NULL;
  int err = 0;
  cudaError_t e = cudaSuccess;
  if (!from || !to || !where) {
    err = dtl_fail(ctx, "out of memory");
    goto done;
  }
  if ((err = comm_after_compute(ctx, st)))
    goto done;
  if (packed_s)
    e = cudaMallocAsync((void **)&sbuf, (size_t)(packed_s * es), st->comm);
  if (e == cudaSuccess && packed_r)
    e = cudaMallocAsync((void **)&rbuf, (size_t)(packed_r * es), st->comm);
  if (e != cudaSuccess) {
    err = cuda_fail(ctx, e, accumulate ? "accumulate: cudaMallocAsync" : "fetch: cudaMallocAsync");
    goto done;
  }
  char *sp = sbuf;
  for (int i = 0; i < ns && !err; i++) {
    const dtl_piece *s = &pl->send.v[i];
    if (dtl_contiguous_in(srcbox, &s->box, &off)) {
      from[i] = (const char *)src + off * es;
    } else {
      err = copy_box(ctx, st->comm, t, src, srcbox, sp, &s->box, &s->box, false, what);
      from[i] = sp;
      sp += dtl_box_volume(&s->box) * es;
    }
  }
  char *rp = rbuf;
  for (int i = 0; i < nr; i++) {
    const dtl_piece *r = &pl->recv.v[i];
    if (!accumulate && dtl_contiguous_in(dstbox, &r->box, &off)) {
      to[i] = (char *)dst + off * es;
      where[i] = NULL;
    } else {
      to[i] = where[i] = rp;
      rp += dtl_box_volume(&r->box) * es;
    }
  }
  if (!err && pl->self && !accumulate)
    err = copy_box(ctx, st->comm, t, src, srcbox, dst, dstbox, &pl->self_box, false, what);
  if (err)
    goto done;
  ncclResult_t nr_ = ncclGroupStart();
  if (nr_ == ncclSuccess) {
    for (int i = 0; i < nr && nr_ == ncclSuccess; i++) {
      const dtl_piece *r = &pl->recv.v[i];
      int64_t vol = dtl_box_volume(&r->box);
      nr_ = ncclRecv(to[i], (size_t)vol, nt, r->peer, st->grid, st->comm);
      dtl_count_recv(ctx, DTL_OP_EXCHANGE, vol * es, 1);
    }
    for (int i = 0; i < ns && nr_ == ncclSuccess; i++) {
      const dtl_piece *s = &pl->send.v[i];
      int64_t vol = dtl_box_volume(&s->box);
      nr_ = ncclSend(from[i], (size_t)vol, nt, s->peer, st->grid, st->comm);
      dtl_count_send(ctx, DTL_OP_EXCHANGE, vol * es, 1);
    }
    ncclResult_t end = ncclGroupEnd();
    if (nr_ == ncclSuccess)
      nr_ = end;
  }
  if (nr_ != ncclSuccess) {
    err = nccl_fail(ctx, nr_, accumulate ? "accumulate: NCCL exchange" : "fetch: NCCL exchange");
    goto done;
  }
  bool self_done = !(pl->self && accumulate);
  for (int i = 0; i < nr && !err; i++) {
    const dtl_piece *r = &pl->recv.v[i];
    if (!self_done && r->peer > ctx->rank) {
      err = copy_box(ctx, st->comm, t, src, srcbox, dst, dstbox, &pl->self_box, true, what);
      self_done = true;
    }
    if (!err && where[i])
      err = copy_box(ctx, st->comm, t, where[i], &r->box, dst, dstbox, &r->box, accumulate, what);
  }
  if (!err && !self_done)
    err = copy_box(ctx, st->comm, t, src, srcbox, dst, dstbox, &pl->self_box, true, what);
done:
  if (sbuf)
    cudaFreeAsync(sbuf, st->comm);
  if (rbuf)
    cudaFreeAsync(rbuf, st->comm);
  free(from);
  free(to);
  free(where);
  if (!err)
    err = compute_after_comm(ctx, st);
  return err;
}

int dtl_cu_fetch(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const void *local,
                 const dtl_box *own, dtl_box_fn need, const void *arg, void *buf) {
  dev_state *st = typed_state(ctx, t, "fetch");
  if (!st)
    return 1;
  dtl_xplan pl;
  dtl_box mine, myneed;
  int err = dtl_xplan_build(ctx, d, own, need, arg, true, 0, &pl, &mine, &myneed);
  if (!err)
    err = run_xplan(ctx, st, t, &pl, local, &mine, buf, &myneed, false);
  dtl_xplan_free(&pl);
  return err;
}

int dtl_cu_accumulate(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, void *local,
                      const dtl_box *own, unsigned exec_mask, dtl_box_fn prod, const void *arg,
                      const void *buf) {
  dev_state *st = typed_state(ctx, t, "accumulate");
  if (!st)
    return 1;
  dtl_xplan pl;
  dtl_box mine, myprod;
  int err = dtl_xplan_build(ctx, d, own, prod, arg, false, exec_mask, &pl, &mine, &myprod);
  /* the executor's buf is the source, the holder's block the destination */
  if (!err)
    err = run_xplan(ctx, st, t, &pl, buf, &myprod, local, &mine, true);
  dtl_xplan_free(&pl);
  return err;
}

/* ---- broadcast of pieces ----------------------------------------------------------------- */
/* Issue a broadcast fetch (blocking-style when req is NULL).  The roots copy their pieces
 * out of `local` on the compute stream, in order with the computation around the call
 * (as the host copies them at once), so that only `buf` and the staging buffer are in use
 * while a split-phase broadcast is in flight.  Pieces contiguous in `need` are broadcast in
 * place in buf; the others through one staging buffer, unpacked on the communication
 * stream. */
static int bcast_issue(dtl_ctx *ctx, unsigned mask, const dtl_dist *d, dtl_type t,
                       const void *local, const dtl_box *need, void *buf, dtl_cu_request **req) {
  dev_state *st = typed_state(ctx, t, "bcast");
  if (!st)
    return 1;
  const int64_t es = (int64_t)dtl_type_size(t);
  dtl_bplan bp;
  int err = dtl_bplan_build(ctx, mask, d, need, &bp), rc = MPI_SUCCESS;
  if (err || dtl_box_empty(need)) {
    dtl_bplan_free(&bp);
    return err;
  }
  const int n = bp.roots.n, members = bp.members;
  int *subroot = malloc((size_t)(n + 1) * sizeof *subroot);
  char **at = malloc((size_t)(n + 1) * sizeof *at);
  bool *staged = malloc((size_t)(n + 1) * sizeof *staged);
  char *tmp = NULL;
  ncclComm_t comm = NULL;
  if (!subroot || !at || !staged)
    err = dtl_fail(ctx, "out of memory");
  for (int i = 0; i < n && !err && rc == MPI_SUCCESS; i++)
    rc = dtl_bplan_root(ctx, &bp, i, &subroot[i]);
  /* the debug checks first, so that a wrong box moves no data */
  for (int i = 0; i < n && !err && rc == MPI_SUCCESS && ctx->debug && members > 1; i++)
    rc = dtl_bplan_debug_piece(ctx, &bp, i, subroot[i], &err);
  if (!err && rc != MPI_SUCCESS)
    err = dtl_mpi_fail(ctx, rc, "broadcast");
  err = dtl_bplan_debug_agree(ctx, &bp, err);
  if (!err && members > 1) {
    comm = st->have[bp.emask] ? st->sub[bp.emask] : NULL;
    if (!comm)
      err = dtl_fail(ctx,
                     "bcast: no NCCL communicator for grid dims 0x%x (give dtl_cu_attach the "
                     "mask 0x%x)",
                     bp.emask, mask & ((1u << ctx->ndims) - 1u));
  }
  int64_t packed = 0, off;
  for (int i = 0; i < n && members > 1; i++)
    if (!dtl_contiguous_in(need, &bp.roots.v[i].box, &off))
      packed += dtl_box_volume(&bp.roots.v[i].box);
  if (!err && packed) {
    cudaError_t e = cudaMallocAsync((void **)&tmp, (size_t)(packed * es), st->compute);
    if (e != cudaSuccess) {
      tmp = NULL;
      err = cuda_fail(ctx, e, "bcast: cudaMallocAsync");
    }
  }
  char *tp = tmp;
  for (int i = 0; i < n && !err; i++) {
    const dtl_piece *r = &bp.roots.v[i];
    bool root = r->peer == ctx->rank;
    if (root)
      err = copy_box(ctx, st->compute, t, local, &bp.mine, buf, need, &r->box, false, "bcast");
    if (err || members == 1)
      continue;
    staged[i] = !dtl_contiguous_in(need, &r->box, &off);
    if (!staged[i]) {
      at[i] = (char *)buf + off * es;
    } else {
      at[i] = tp;
      tp += dtl_box_volume(&r->box) * es;
      if (root)
        err = copy_box(ctx, st->compute, t, local, &bp.mine, at[i], &r->box, &r->box, false,
                       "bcast");
    }
  }
  if (!err && members > 1 && n > 0) {
    const ncclDataType_t nt = nccl_type(t);
    err = comm_after_compute(ctx, st);
    for (int i = 0; i < n && !err; i++) {
      const dtl_piece *r = &bp.roots.v[i];
      int64_t vol = dtl_box_volume(&r->box);
      ncclResult_t nr_ = ncclBroadcast(at[i], at[i], (size_t)vol, nt, subroot[i], comm, st->comm);
      if (nr_ != ncclSuccess) {
        err = nccl_fail(ctx, nr_, "bcast: ncclBroadcast");
        break;
      }
      if (r->peer == ctx->rank)
        dtl_count_send(ctx, DTL_OP_BCAST, vol * es * (members - 1), members - 1);
      else
        dtl_count_recv(ctx, DTL_OP_BCAST, vol * es, 1);
    }
    for (int i = 0; i < n && !err; i++) {
      const dtl_piece *r = &bp.roots.v[i];
      if (staged[i] && r->peer != ctx->rank)
        err = copy_box(ctx, st->comm, t, at[i], &r->box, buf, need, &r->box, false, "bcast");
    }
    if (tmp) {
      cudaFreeAsync(tmp, st->comm);
      tmp = NULL;
    }
    if (!err)
      err = req ? finish_split(ctx, st, req) : compute_after_comm(ctx, st);
  }
  if (tmp) /* never reached the communication stream */
    cudaFreeAsync(tmp, st->compute);
  dtl_bplan_free(&bp);
  free(subroot);
  free(at);
  free(staged);
  return err;
}

int dtl_cu_bcast_fetch(dtl_ctx *ctx, unsigned mask, const dtl_dist *d, dtl_type t,
                       const void *local, const dtl_box *own, const dtl_box *need, void *buf) {
  (void)own;
  return bcast_issue(ctx, mask, d, t, local, need, buf, NULL);
}

int dtl_cu_bcast_fetch_begin(dtl_ctx *ctx, unsigned mask, const dtl_dist *d, dtl_type t,
                             const void *local, const dtl_box *own, const dtl_box *need,
                             void *buf, dtl_cu_request **req) {
  (void)own;
  *req = NULL;
  return bcast_issue(ctx, mask, d, t, local, need, buf, req);
}

/* ---- shift ------------------------------------------------------------------------------- */
static bool overlap(const void *a, size_t na, const void *b, size_t nb) {
  uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
  return na > 0 && nb > 0 && pa < pb + nb && pb < pa + na;
}

/* Issue a shift (blocking-style when req is NULL): ncclSend to c - 1 and ncclRecv from c + 1
 * along dim, one group over the grid.  A send buffer that overlaps the receive buffer is
 * copied aside first (NCCL may receive before it has sent).  NCCL needs a receive of exactly
 * the count sent; debug mode checks that against the neighbour. */
static int shift_issue(dtl_ctx *ctx, int dim, dtl_type t, const void *sendbuf, int64_t sendcount,
                       void *recvbuf, int64_t recvcount, dtl_cu_request **req) {
  dev_state *st = typed_state(ctx, t, "shift");
  if (!st)
    return 1;
  const int64_t es = (int64_t)dtl_type_size(t);
  if (dim < 0 || dim >= ctx->ndims)
    return dtl_fail(ctx, "shift along grid dim %d of a %d-dim grid", dim, ctx->ndims);
  if (ctx->dims[dim] == 1) {
    /* to itself: as dtl_shift (the common part) and dtl_shift_begin (equal counts) */
    int64_t n = dtl_min(sendcount, recvcount);
    if (req && recvcount != sendcount)
      return dtl_fail(ctx,
                      "shift: a 1-wide grid dim sends %lld elements to itself but expects %lld",
                      (long long)sendcount, (long long)recvcount);
    if (sendbuf == recvbuf || n <= 0)
      return 0;
    cudaError_t e = cudaMemcpyAsync(recvbuf, sendbuf, (size_t)(n * es), cudaMemcpyDeviceToDevice,
                                    st->compute);
    return e == cudaSuccess ? 0 : cuda_fail(ctx, e, "shift: cudaMemcpyAsync");
  }
  int64_t c[DTL_MAX_DIMS];
  memcpy(c, ctx->coords, sizeof c);
  c[dim] = ctx->coords[dim] - 1;
  int to = dtl_rank_of(ctx, c);
  c[dim] = ctx->coords[dim] + 1;
  int from = dtl_rank_of(ctx, c);
  if (ctx->debug) {
    int64_t theirs = -1;
    int err = 0;
    int rc = MPI_Sendrecv(&sendcount, 1, MPI_INT64_T, to, TAG_SHIFT_CHECK, &theirs, 1,
                          MPI_INT64_T, from, TAG_SHIFT_CHECK, ctx->cart, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
      err = dtl_mpi_fail(ctx, rc, "MPI_Sendrecv (shift)");
    else if (theirs != recvcount)
      err = dtl_fail(ctx,
                     "debug: shift: rank %d expects %lld elements from rank %d, which sends %lld",
                     ctx->rank, (long long)recvcount, from, (long long)theirs);
    if (dtl_any_error(ctx, err))
      return 1;
  }
  if (!st->grid)
    return dtl_fail(ctx, "shift: no NCCL communicator over the grid");
  int err = comm_after_compute(ctx, st);
  if (err)
    return err;
  const size_t sbytes = (size_t)(dtl_max(sendcount, 0) * es);
  const size_t rbytes = (size_t)(dtl_max(recvcount, 0) * es);
  const void *sp = sendbuf;
  char *stage = NULL;
  if (overlap(sendbuf, sbytes, recvbuf, rbytes)) {
    cudaError_t e = cudaMallocAsync((void **)&stage, sbytes, st->comm);
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(stage, sendbuf, sbytes, cudaMemcpyDeviceToDevice, st->comm);
    if (e != cudaSuccess) {
      if (stage)
        cudaFreeAsync(stage, st->comm);
      return cuda_fail(ctx, e, "shift: staging the send buffer");
    }
    sp = stage;
  }
  const ncclDataType_t nt = nccl_type(t);
  ncclResult_t r = ncclGroupStart();
  if (r == ncclSuccess) {
    if (recvcount > 0)
      r = ncclRecv(recvbuf, (size_t)recvcount, nt, from, st->grid, st->comm);
    if (r == ncclSuccess && sendcount > 0)
      r = ncclSend(sp, (size_t)sendcount, nt, to, st->grid, st->comm);
    ncclResult_t end = ncclGroupEnd();
    if (r == ncclSuccess)
      r = end;
  }
  if (stage)
    cudaFreeAsync(stage, st->comm);
  if (r != ncclSuccess)
    return nccl_fail(ctx, r, "shift: NCCL send and receive");
  dtl_count_send(ctx, DTL_OP_SHIFT, sendcount * es, 1);
  dtl_count_recv(ctx, DTL_OP_SHIFT, recvcount * es, 1);
  return req ? finish_split(ctx, st, req) : compute_after_comm(ctx, st);
}

int dtl_cu_shift(dtl_ctx *ctx, int dim, dtl_type t, const void *sendbuf, int64_t sendcount,
                 void *recvbuf, int64_t recvcount) {
  return shift_issue(ctx, dim, t, sendbuf, sendcount, recvbuf, recvcount, NULL);
}

int dtl_cu_shift_begin(dtl_ctx *ctx, int dim, dtl_type t, const void *sendbuf,
                       int64_t sendcount, void *recvbuf, int64_t recvcount,
                       dtl_cu_request **req) {
  *req = NULL;
  return shift_issue(ctx, dim, t, sendbuf, sendcount, recvbuf, recvcount, req);
}

/* ---- reductions -------------------------------------------------------------------------- */
int dtl_cu_reduce(dtl_ctx *ctx, unsigned mask, const int64_t *root_coords, dtl_type t,
                  void *buf, int64_t count) {
  dev_state *st = typed_state(ctx, t, root_coords ? "reduce" : "allreduce");
  if (!st)
    return 1;
  const int64_t es = (int64_t)dtl_type_size(t);
  MPI_Comm sub;
  int members, me, root;
  if (dtl_reduce_root(ctx, mask, root_coords, &sub, &members, &me, &root))
    return 1;
  if (members == 1 || count <= 0)
    return 0;
  unsigned m = mask & ((1u << ctx->ndims) - 1u);
  ncclComm_t comm = st->have[m] ? st->sub[m] : NULL;
  if (!comm)
    return dtl_fail(ctx, "reduce: no NCCL communicator for grid dims 0x%x (give dtl_cu_attach "
                    "the mask)", m);
  int err = comm_after_compute(ctx, st);
  if (err)
    return err;
  const ncclDataType_t nt = nccl_type(t);
  ncclResult_t r =
      root_coords ? ncclReduce(buf, buf, (size_t)count, nt, ncclSum, root, comm, st->comm)
                  : ncclAllReduce(buf, buf, (size_t)count, nt, ncclSum, comm, st->comm);
  if (r != ncclSuccess)
    return nccl_fail(ctx, r, root_coords ? "ncclReduce" : "ncclAllReduce");
  int64_t bytes = count * es;
  if (!root_coords) {
    dtl_count_send(ctx, DTL_OP_ALLREDUCE, bytes, 1);
    dtl_count_recv(ctx, DTL_OP_ALLREDUCE, bytes, 1);
  } else if (me == root) {
    dtl_count_recv(ctx, DTL_OP_REDUCE, bytes * (members - 1), members - 1);
  } else {
    dtl_count_send(ctx, DTL_OP_REDUCE, bytes, 1);
  }
  return compute_after_comm(ctx, st);
}

/* ---- leaf kernels ------------------------------------------------------------------------ */
/* Do distinct indices below ext reach distinct elements through these strides?  A sufficient
 * test: sorted by |stride|, each stride exceeds the farthest reach of the smaller ones.  When
 * it fails, work items of one kernel may update one element and must add atomically. */
static bool injective(int nd, const int64_t *ext, const int64_t *stride) {
  int64_t s[DTL_MAX_DIMS], e[DTL_MAX_DIMS], reach = 0;
  int n = 0;
  for (int d = 0; d < nd; d++)
    if (ext[d] > 1) {
      int64_t v = stride[d] < 0 ? -stride[d] : stride[d];
      int i = n++;
      for (; i > 0 && s[i - 1] > v; i--) {
        s[i] = s[i - 1];
        e[i] = e[i - 1];
      }
      s[i] = v;
      e[i] = ext[d];
    }
  for (int i = 0; i < n; i++) {
    if (s[i] <= reach)
      return false;
    reach += s[i] * (e[i] - 1);
  }
  return true;
}

/* As kernels/blas.c: a leading dimension below the stored columns is raised for a matrix of
 * one row (never used there); layouts that BLAS cannot describe go to our kernels. */
static bool blas_ld(int64_t rows, int64_t cols, int64_t *ld) {
  if (rows <= 1 && *ld < cols)
    *ld = dtl_max(cols, 1);
  return *ld >= dtl_max(cols, 1) && *ld <= INT_MAX;
}

static bool blas_inc(int64_t inc) { return inc > 0 && inc <= INT_MAX; }

/* Row-major C (m x n) += op(A) op(B) is column-major C^T += op(B)^T op(A)^T: cuBLAS gets the
 * operands swapped, each with its own transposition, and the same leading dimensions. */
static int gemm(dtl_ctx *ctx, dev_state *st, dtl_type t, int transa, int transb, int64_t m,
                int64_t n, int64_t k, const void *A, int64_t lda, const void *B, int64_t ldb,
                void *C, int64_t ldc) {
  if (m <= 0 || n <= 0 || k <= 0)
    return 0;
  int64_t la = lda, lb = ldb, lc = ldc;
  bool blas = (t == DTL_DOUBLE || t == DTL_FLOAT) && m <= INT_MAX && n <= INT_MAX &&
              k <= INT_MAX && blas_ld(transa ? k : m, transa ? m : k, &la) &&
              blas_ld(transb ? n : k, transb ? k : n, &lb) && blas_ld(m, n, &lc);
  if (blas) {
    cublasOperation_t ta = transa ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t s;
    if (t == DTL_DOUBLE) {
      const double one = 1.0;
      s = cublasDgemm(st->blas, tb, ta, (int)n, (int)m, (int)k, &one, B, (int)lb, A, (int)la,
                      &one, C, (int)lc);
    } else {
      const float one = 1.0f;
      s = cublasSgemm(st->blas, tb, ta, (int)n, (int)m, (int)k, &one, B, (int)lb, A, (int)la,
                      &one, C, (int)lc);
    }
    return s == CUBLAS_STATUS_SUCCESS ? 0 : blas_fail(ctx, s, "gemm");
  }
  const int64_t ext[2] = {m, n}, str[2] = {ldc, 1};
  int rc = dtl_cuk_gemm((int)t, transa, transb, m, n, k, A, lda, B, ldb, C, ldc,
                        !injective(2, ext, str), (void *)st->compute);
  return kernel_check(ctx, rc, "gemm kernel");
}

/* Row-major A (rows x cols) is column-major A^T: y = A x is A^T transposed times x. */
static int gemv(dtl_ctx *ctx, dev_state *st, dtl_type t, int trans, int64_t m, int64_t n,
                const void *A, int64_t lda, const void *x, int64_t incx, void *y, int64_t incy) {
  if (m <= 0 || n <= 0)
    return 0;
  int64_t rows = trans ? n : m, cols = trans ? m : n, la = lda;
  bool blas = (t == DTL_DOUBLE || t == DTL_FLOAT) && m <= INT_MAX && n <= INT_MAX &&
              blas_ld(rows, cols, &la) && blas_inc(incx) && blas_inc(incy);
  if (blas) {
    cublasOperation_t op = trans ? CUBLAS_OP_N : CUBLAS_OP_T;
    cublasStatus_t s;
    if (t == DTL_DOUBLE) {
      const double one = 1.0;
      s = cublasDgemv(st->blas, op, (int)cols, (int)rows, &one, A, (int)la, x, (int)incx, &one,
                      y, (int)incy);
    } else {
      const float one = 1.0f;
      s = cublasSgemv(st->blas, op, (int)cols, (int)rows, &one, A, (int)la, x, (int)incx, &one,
                      y, (int)incy);
    }
    return s == CUBLAS_STATUS_SUCCESS ? 0 : blas_fail(ctx, s, "gemv");
  }
  int rc = dtl_cuk_gemv((int)t, trans, m, n, A, lda, x, incx, y, incy, m > 1 && incy == 0,
                        (void *)st->compute);
  return kernel_check(ctx, rc, "gemv kernel");
}

/* Partial sums: enough work items to keep the device busy, each over a strided subset. */
#define MAX_PARTS ((int64_t)1 << 18)

/* *r += the sum of `work` products: dot (B == NULL) or inner product. */
static int sum_into(dtl_ctx *ctx, dev_state *st, dtl_type t, int64_t work, int64_t n,
                    const void *x, int64_t incx, const void *y, int64_t incy, int64_t ni,
                    int64_t nj, int64_t nk, const void *B, int64_t sBi, int64_t sBj, int64_t sBk,
                    const void *C, int64_t sCi, int64_t sCj, int64_t sCk, void *r,
                    const char *what) {
  const int64_t nparts = dtl_min(work, MAX_PARTS);
  void *parts = NULL;
  cudaError_t e = cudaMallocAsync(&parts, (size_t)nparts * dtl_type_size(t), st->compute);
  if (e != cudaSuccess)
    return cuda_fail(ctx, e, what);
  void *s = (void *)st->compute;
  int rc = B ? dtl_cuk_innerprod_parts((int)t, ni, nj, nk, B, sBi, sBj, sBk, C, sCi, sCj, sCk,
                                       parts, nparts, s)
             : dtl_cuk_dot_parts((int)t, n, x, incx, y, incy, parts, nparts, s);
  if (rc == 0)
    rc = dtl_cuk_sum_parts((int)t, parts, nparts, r, s);
  cudaFreeAsync(parts, st->compute);
  return kernel_check(ctx, rc, what);
}

int dtl_cu_gemm(dtl_ctx *ctx, dtl_type t, int transa, int transb, int64_t m, int64_t n,
                int64_t k, const void *A, int64_t lda, const void *B, int64_t ldb, void *C,
                int64_t ldc) {
  dev_state *st = typed_state(ctx, t, "gemm");
  return st ? gemm(ctx, st, t, transa, transb, m, n, k, A, lda, B, ldb, C, ldc) : 1;
}

int dtl_cu_gemv(dtl_ctx *ctx, dtl_type t, int trans, int64_t m, int64_t n, const void *A,
                int64_t lda, const void *x, int64_t incx, void *y, int64_t incy) {
  dev_state *st = typed_state(ctx, t, "gemv");
  return st ? gemv(ctx, st, t, trans, m, n, A, lda, x, incx, y, incy) : 1;
}

int dtl_cu_dot(dtl_ctx *ctx, dtl_type t, int64_t n, const void *x, int64_t incx, const void *y,
               int64_t incy, void *r) {
  dev_state *st = typed_state(ctx, t, "dot");
  if (!st)
    return 1;
  if (n <= 0)
    return 0;
  return sum_into(ctx, st, t, n, n, x, incx, y, incy, 0, 0, 0, NULL, 0, 0, 0, NULL, 0, 0, 0, r,
                  "dot");
}

int dtl_cu_axpy(dtl_ctx *ctx, dtl_type t, int64_t n, const void *alpha, const void *x,
                int64_t incx, void *y, int64_t incy) {
  dev_state *st = typed_state(ctx, t, "axpy");
  if (!st)
    return 1;
  if (n <= 0)
    return 0;
  int rc = dtl_cuk_axpy((int)t, n, alpha, x, incx, y, incy, n > 1 && incy == 0,
                        (void *)st->compute);
  return kernel_check(ctx, rc, "axpy kernel");
}

/* A(i,j) += sum_k B(i,j,k) c(k): one gemv when (i,j) is contiguous in A and B (as the
 * host), else a work item per (i,j). */
int dtl_cu_ttv(dtl_ctx *ctx, dtl_type t, int64_t ni, int64_t nj, int64_t nk, const void *B,
               int64_t sBi, int64_t sBj, int64_t sBk, const void *c, int64_t sc, void *A,
               int64_t sAi, int64_t sAj) {
  dev_state *st = typed_state(ctx, t, "ttv");
  if (!st)
    return 1;
  if (ni <= 0 || nj <= 0 || nk <= 0)
    return 0;
  if (sBk == 1 && sBi == nj * sBj && sAi == nj * sAj)
    return gemv(ctx, st, t, 0, ni * nj, nk, B, sBj, c, sc, A, sAj);
  const int64_t ext[2] = {ni, nj}, str[2] = {sAi, sAj};
  int rc = dtl_cuk_ttv((int)t, ni, nj, nk, B, sBi, sBj, sBk, c, sc, A, sAi, sAj,
                       !injective(2, ext, str), (void *)st->compute);
  return kernel_check(ctx, rc, "ttv kernel");
}

/* A(i,j,l) += sum_k B(i,j,k) C(k,l): one gemm when (i,j) is contiguous in A and B and the
 * rows are unit-stride (as the host), else a work item per (i,j,l). */
int dtl_cu_ttm(dtl_ctx *ctx, dtl_type t, int64_t ni, int64_t nj, int64_t nk, int64_t nl,
               const void *B, int64_t sBi, int64_t sBj, int64_t sBk, const void *C, int64_t sCk,
               int64_t sCl, void *A, int64_t sAi, int64_t sAj, int64_t sAl) {
  dev_state *st = typed_state(ctx, t, "ttm");
  if (!st)
    return 1;
  if (ni <= 0 || nj <= 0 || nk <= 0 || nl <= 0)
    return 0;
  if (sBk == 1 && sCl == 1 && sAl == 1 && sBi == nj * sBj && sAi == nj * sAj)
    return gemm(ctx, st, t, 0, 0, ni * nj, nl, nk, B, sBj, C, sCk, A, sAj);
  const int64_t ext[3] = {ni, nj, nl}, str[3] = {sAi, sAj, sAl};
  int rc = dtl_cuk_ttm((int)t, ni, nj, nk, nl, B, sBi, sBj, sBk, C, sCk, sCl, A, sAi, sAj, sAl,
                       !injective(3, ext, str), (void *)st->compute);
  return kernel_check(ctx, rc, "ttm kernel");
}

/* *r += sum_ijk B(i,j,k) C(i,j,k): one dot when both blocks are contiguous (as the host). */
int dtl_cu_innerprod(dtl_ctx *ctx, dtl_type t, int64_t ni, int64_t nj, int64_t nk,
                     const void *B, int64_t sBi, int64_t sBj, int64_t sBk, const void *C,
                     int64_t sCi, int64_t sCj, int64_t sCk, void *r) {
  dev_state *st = typed_state(ctx, t, "innerprod");
  if (!st)
    return 1;
  if (ni <= 0 || nj <= 0 || nk <= 0)
    return 0;
  int64_t n = ni * nj * nk;
  if (sBk == 1 && sCk == 1 && sBj == nk && sCj == nk && sBi == nj * nk && sCi == nj * nk)
    return sum_into(ctx, st, t, n, n, B, 1, C, 1, 0, 0, 0, NULL, 0, 0, 0, NULL, 0, 0, 0, r,
                    "innerprod");
  return sum_into(ctx, st, t, n, 0, NULL, 0, NULL, 0, ni, nj, nk, B, sBi, sBj, sBk, C, sCi, sCj,
                  sCk, r, "innerprod");
}

/* A(i,l) += sum_jk B(i,j,k) C(j,l) D(k,l).  For float and double with B's (j,k) block
 * contiguous, as the host: the Khatri-Rao product K(j*nk + k, l) = C(j,l) D(k,l), then one
 * gemm B(i, jk) K(jk, l) by cuBLAS.  Otherwise (or without memory for K) a work item per
 * (i,l) that sums over (j,k). */
int dtl_cu_mttkrp(dtl_ctx *ctx, dtl_type t, int64_t ni, int64_t nj, int64_t nk, int64_t nl,
                  const void *B, int64_t sBi, int64_t sBj, int64_t sBk, const void *C,
                  int64_t sCj, int64_t sCl, const void *D, int64_t sDk, int64_t sDl, void *A,
                  int64_t sAi, int64_t sAl) {
  dev_state *st = typed_state(ctx, t, "mttkrp");
  if (!st)
    return 1;
  if (ni <= 0 || nj <= 0 || nk <= 0 || nl <= 0)
    return 0;
  void *s = (void *)st->compute;
  if ((t == DTL_DOUBLE || t == DTL_FLOAT) && sBk == 1 && sBj == nk && sAl == 1) {
    void *K = NULL;
    size_t bytes = (size_t)nj * (size_t)nk * (size_t)nl * dtl_type_size(t);
    if (cudaMallocAsync(&K, bytes, st->compute) == cudaSuccess) {
      int err = kernel_check(ctx, dtl_cuk_khatri_rao((int)t, nj, nk, nl, C, sCj, sCl, D, sDk, sDl,
                                                     K, s),
                             "mttkrp: Khatri-Rao kernel");
      if (!err)
        err = gemm(ctx, st, t, 0, 0, ni, nl, nj * nk, B, sBi, K, nl, A, sAi);
      cudaFreeAsync(K, st->compute);
      return err;
    }
    (void)cudaGetLastError(); /* out of memory: the kernel below needs none */
  }
  const int64_t ext[2] = {ni, nl}, str[2] = {sAi, sAl};
  int rc = dtl_cuk_mttkrp((int)t, ni, nj, nk, nl, B, sBi, sBj, sBk, C, sCj, sCl, D, sDk, sDl, A,
                          sAi, sAl, !injective(2, ext, str), s);
  return kernel_check(ctx, rc, "mttkrp kernel");
}
