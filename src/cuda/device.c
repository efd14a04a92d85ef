/* device.c -- libdistal_cuda: the device half of the runtime (distal/cuda.h).
 *
 * Every communication function is its host twin of comm.c run by the same executor (exec.c,
 * comm_internal.h) over another transport: the same plans, pieces, owners, roots, order of
 * additions, statistics and debug checks.  Only the data moves differently: NCCL instead of
 * MPI, device kernels (device_kernels.cu) instead of dtl_copy_box for packing and unpacking,
 * stream-ordered allocations instead of malloc.
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

/* ---- the state attached to a context ----------------------------------------------------- */
typedef struct {
  int device;
  cudaStream_t compute, comm;
  cudaEvent_t computed, communicated; /* hand-overs of blocking operations (reused) */
  cudaEvent_t entered;                /* the default stream's work before a compute call */
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

/* A copy between host and device memory that is complete when it returns, ordered after the
 * work queued so far on both streams of the context and on the default stream.  Not
 * cudaMemcpy: from pageable host memory it may return before its copy has landed, on the
 * default stream, which the non-blocking compute stream does not wait for, so that a kernel
 * queued next could read the destination before the data arrives. */
static int sync_copy(dtl_ctx *ctx, void *dst, const void *src, size_t bytes,
                     enum cudaMemcpyKind kind, const char *what) {
  cudaStream_t s = compute_stream(ctx);
  cudaError_t e = s ? cudaStreamSynchronize(((dev_state *)ctx->dev)->comm) : cudaSuccess;
  if (e == cudaSuccess)
    e = cudaStreamSynchronize(NULL); /* the application's copies and kernels before the call */
  if (e == cudaSuccess && bytes > 0)
    e = cudaMemcpyAsync(dst, src, bytes, kind, s);
  if (e == cudaSuccess)
    e = cudaStreamSynchronize(s);
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
      (e = cudaEventCreateWithFlags(&st->communicated, cudaEventDisableTiming)) != cudaSuccess ||
      (e = cudaEventCreateWithFlags(&st->entered, cudaEventDisableTiming)) != cudaSuccess)
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
  if (st->entered)
    cudaEventDestroy(st->entered);
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

int dtl_cu_after_default(dtl_ctx *ctx) {
  dev_state *st = state(ctx, "after_default");
  if (!st)
    return 1;
  cudaError_t e = cudaEventRecord(st->entered, NULL);
  if (e == cudaSuccess)
    e = cudaStreamWaitEvent(st->compute, st->entered, 0);
  return e == cudaSuccess ? 0 : cuda_fail(ctx, e, "ordering the computation after the default stream");
}

int dtl_cu_sync(dtl_ctx *ctx) {
  dev_state *st = ctx->dev && ctx->dev_free == release ? ctx->dev : NULL;
  cudaError_t e;
  if (!st)
    e = cudaDeviceSynchronize();
  else if ((e = cudaStreamSynchronize(st->compute)) == cudaSuccess)
    e = cudaStreamSynchronize(st->comm);
  return e == cudaSuccess ? 0 : cuda_fail(ctx, e, "sync");
}

/* ---- the NCCL transport (comm_internal.h) ------------------------------------------------- */
/* Communication runs on the communication stream between enter and leave; copies and staging
 * buffers before enter (a broadcast's roots copying their pieces) on the compute stream. */
static cudaStream_t stream_of(const dtl_transport *tr) {
  const dev_state *st = tr->state;
  return tr->entered ? st->comm : st->compute;
}

static ncclComm_t nccl_comm(const dtl_transport *tr, int link) {
  const dev_state *st = tr->state;
  return link == DTL_LINK_GRID ? st->grid : st->have[link] ? st->sub[link] : NULL;
}

static int nccl_link(dtl_transport *tr, int link, int asked, const char *what) {
  if (nccl_comm(tr, link))
    return 0;
  if (link == DTL_LINK_GRID)
    return dtl_fail(tr->ctx, "%s: no NCCL communicator over the grid", what);
  if (asked < 0)
    return dtl_fail(tr->ctx,
                    "%s: no NCCL communicator for grid dims 0x%x (give dtl_cu_attach the mask)",
                    what, (unsigned)link);
  return dtl_fail(tr->ctx,
                  "%s: no NCCL communicator for grid dims 0x%x (give dtl_cu_attach the mask 0x%x)",
                  what, (unsigned)link, (unsigned)asked);
}

static int failed_call(dtl_ctx *ctx, cudaError_t e, const char *what, const char *call) {
  char msg[96];
  snprintf(msg, sizeof msg, "%s: %s", what, call);
  return cuda_fail(ctx, e, msg);
}

static int nccl_failed(dtl_ctx *ctx, ncclResult_t r, const char *what, const char *call) {
  return dtl_fail(ctx, "%s: %s: %s", what, call, ncclGetErrorString(r));
}

static int nccl_alloc(dtl_transport *tr, size_t bytes, void **p, const char *what) {
  cudaError_t e = cudaMallocAsync(p, bytes, stream_of(tr));
  if (e == cudaSuccess)
    return 0;
  *p = NULL;
  return failed_call(tr->ctx, e, what, "cudaMallocAsync");
}

/* stream-ordered: the memory stays until the work queued on the stream so far is done */
static void nccl_release(dtl_transport *tr, void *p) {
  if (p)
    cudaFreeAsync(p, stream_of(tr));
}

static int nccl_copy_box(dtl_transport *tr, dtl_type t, const void *src, const dtl_box *srcbox,
                         void *dst, const dtl_box *dstbox, const dtl_box *region, bool accumulate,
                         const char *what) {
  return copy_box(tr->ctx, stream_of(tr), t, src, srcbox, dst, dstbox, region, accumulate, what);
}

static int nccl_copy(dtl_transport *tr, void *dst, const void *src, size_t bytes,
                     const char *what) {
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_of(tr));
  return e == cudaSuccess ? 0 : failed_call(tr->ctx, e, what, "cudaMemcpyAsync");
}

static int nccl_enter(dtl_transport *tr) { return comm_after_compute(tr->ctx, tr->state); }

static int nccl_leave(dtl_transport *tr, bool split) {
  if (!split)
    return compute_after_comm(tr->ctx, tr->state);
  dtl_cu_request *q = NULL;
  int err = finish_split(tr->ctx, tr->state, &q);
  tr->pending = q;
  return err;
}

/* NCCL completes in stream order: a record only says whether its posts form one group. */
typedef struct {
  bool grouped;
  const char *what;
} nccl_record;

static int nccl_open(dtl_transport *tr, int n, bool grouped, void **rec, const char *what) {
  (void)n;
  nccl_record *r = malloc(sizeof *r);
  if (!r)
    return dtl_fail(tr->ctx, "%s: out of memory", what);
  r->grouped = grouped;
  r->what = what;
  ncclResult_t nr = grouped ? ncclGroupStart() : ncclSuccess;
  if (nr != ncclSuccess) {
    free(r);
    return nccl_failed(tr->ctx, nr, what, "ncclGroupStart");
  }
  *rec = r;
  return 0;
}

/* NCCL sends and receives nothing of an empty message. */
static int nccl_send(dtl_transport *tr, void *rec, int tag, dtl_type t, const void *buf,
                     int64_t count, int peer) {
  (void)tag;
  ncclResult_t r = count <= 0 ? ncclSuccess
                              : ncclSend(buf, (size_t)count, nccl_type(t), peer,
                                         nccl_comm(tr, DTL_LINK_GRID), stream_of(tr));
  return r == ncclSuccess ? 0 : nccl_failed(tr->ctx, r, ((nccl_record *)rec)->what, "ncclSend");
}

static int nccl_recv(dtl_transport *tr, void *rec, int tag, dtl_type t, void *buf, int64_t count,
                     int peer) {
  (void)tag;
  ncclResult_t r = count <= 0 ? ncclSuccess
                              : ncclRecv(buf, (size_t)count, nccl_type(t), peer,
                                         nccl_comm(tr, DTL_LINK_GRID), stream_of(tr));
  return r == ncclSuccess ? 0 : nccl_failed(tr->ctx, r, ((nccl_record *)rec)->what, "ncclRecv");
}

static int nccl_bcast(dtl_transport *tr, void *rec, unsigned mask, dtl_type t, void *buf,
                      int64_t count, int root) {
  ncclResult_t r = ncclBroadcast(buf, buf, (size_t)count, nccl_type(t), root,
                                 nccl_comm(tr, (int)mask), stream_of(tr));
  return r == ncclSuccess ? 0
                          : nccl_failed(tr->ctx, r, ((nccl_record *)rec)->what, "ncclBroadcast");
}

static int nccl_flush(dtl_transport *tr, void *rec) {
  nccl_record *r = rec;
  ncclResult_t nr = r->grouped ? ncclGroupEnd() : ncclSuccess;
  return nr == ncclSuccess ? 0 : nccl_failed(tr->ctx, nr, r->what, "ncclGroupEnd");
}

static int nccl_complete(dtl_transport *tr, void *rec) {
  (void)tr;
  free(rec);
  return 0;
}

static int nccl_reduce(dtl_transport *tr, unsigned mask, dtl_type t, void *buf, int64_t count,
                       int root, int me) {
  (void)me;
  ncclComm_t comm = nccl_comm(tr, (int)mask);
  ncclDataType_t nt = nccl_type(t);
  ncclResult_t r = root >= 0
                       ? ncclReduce(buf, buf, (size_t)count, nt, ncclSum, root, comm, stream_of(tr))
                       : ncclAllReduce(buf, buf, (size_t)count, nt, ncclSum, comm, stream_of(tr));
  return r == ncclSuccess ? 0 : nccl_fail(tr->ctx, r, root >= 0 ? "ncclReduce" : "ncclAllReduce");
}

static const dtl_transport_ops nccl_ops = DTL_TRANSPORT_OPS(nccl, true, true);

/* The transport of an operation on elements of type t, or 1 with a message.  It is ordered:
 * split-phase operations complete when issued, and their request (tr->pending) is only the
 * hand-over of the communication stream to the compute stream, for dtl_cu_wait. */
static int transport(dtl_ctx *ctx, dtl_type t, const char *what, dtl_transport *tr) {
  dev_state *st = typed_state(ctx, t, what);
  *tr = (dtl_transport){.op = &nccl_ops, .ctx = ctx, .state = st};
  return st ? 0 : 1;
}

/* ---- communication ----------------------------------------------------------------------- */
int dtl_cu_fetch(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const void *local,
                 const dtl_box *own, dtl_box_fn need, const void *arg, void *buf) {
  dtl_transport tr;
  return transport(ctx, t, "fetch", &tr) ? 1
                                         : dtl_exec_fetch(&tr, d, t, local, own, need, arg, buf);
}

int dtl_cu_accumulate(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, void *local,
                      const dtl_box *own, unsigned exec_mask, dtl_box_fn prod, const void *arg,
                      const void *buf) {
  dtl_transport tr;
  if (transport(ctx, t, "accumulate", &tr))
    return 1;
  return dtl_exec_accumulate(&tr, d, t, local, own, exec_mask, prod, arg, buf);
}

int dtl_cu_bcast_fetch(dtl_ctx *ctx, unsigned mask, const dtl_dist *d, dtl_type t,
                       const void *local, const dtl_box *own, const dtl_box *need, void *buf) {
  (void)own;
  dtl_transport tr;
  return transport(ctx, t, "bcast", &tr) ? 1
                                         : dtl_exec_bcast(&tr, mask, d, t, local, need, buf, false);
}

int dtl_cu_bcast_fetch_begin(dtl_ctx *ctx, unsigned mask, const dtl_dist *d, dtl_type t,
                             const void *local, const dtl_box *own, const dtl_box *need,
                             void *buf, dtl_cu_request **req) {
  (void)own;
  dtl_transport tr;
  int err = transport(ctx, t, "bcast", &tr)
                ? 1
                : dtl_exec_bcast(&tr, mask, d, t, local, need, buf, true);
  *req = tr.pending;
  return err;
}

int dtl_cu_shift(dtl_ctx *ctx, int dim, dtl_type t, const void *sendbuf, int64_t sendcount,
                 void *recvbuf, int64_t recvcount) {
  dtl_transport tr;
  if (transport(ctx, t, "shift", &tr))
    return 1;
  return dtl_exec_shift(&tr, dim, t, sendbuf, sendcount, recvbuf, recvcount, false);
}

int dtl_cu_shift_begin(dtl_ctx *ctx, int dim, dtl_type t, const void *sendbuf,
                       int64_t sendcount, void *recvbuf, int64_t recvcount,
                       dtl_cu_request **req) {
  dtl_transport tr;
  int err = transport(ctx, t, "shift", &tr)
                ? 1
                : dtl_exec_shift(&tr, dim, t, sendbuf, sendcount, recvbuf, recvcount, true);
  *req = tr.pending;
  return err;
}

int dtl_cu_reduce(dtl_ctx *ctx, unsigned mask, const int64_t *root_coords, dtl_type t,
                  void *buf, int64_t count) {
  dtl_transport tr;
  if (transport(ctx, t, root_coords ? "reduce" : "allreduce", &tr))
    return 1;
  return dtl_exec_reduce(&tr, mask, root_coords, t, buf, count);
}

int dtl_cu_bcast(dtl_ctx *ctx, unsigned mask, const int64_t *root_coords, dtl_type t, void *buf,
                 int64_t count) {
  dtl_transport tr;
  if (transport(ctx, t, "bcast", &tr))
    return 1;
  return dtl_exec_bcast_buf(&tr, mask, root_coords, t, buf, count);
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
