/* distal/cuda.h -- libdistal_cuda: the device half of the runtime, for code that distalc
 * generates for `gpu` machines (distalc --target cuda).
 *
 * Tensors live in device memory: every pointer to tensor data below is a device pointer,
 * except where a function says host.  Work is ordered on two CUDA streams per plan: a
 * compute stream (kernels, cuBLAS, copies) and a communication stream on which every NCCL
 * call is issued, in the same order on every rank; events hand data between them, so no
 * function here blocks the host unless it says so.
 *
 * The functions mirror the host functions of distal/runtime.h with the same contracts (the
 * same boxes, pieces, owners, roots and statistics), named dtl_cu_* and taking the context
 * first.  They return 0 on success and nonzero on failure with a message in the context
 * (dtl_ctx_error), never abort.  This header includes no CUDA header: streams are void *,
 * so that generated host code compiles with the MPI C compiler alone. */
#ifndef DISTAL_CUDA_H
#define DISTAL_CUDA_H

#include <distal/runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- devices --------------------------------------------------------------------------- */
/* Collective over comm.  Give this rank a GPU of its node and make it the current device:
 * ranks of one physical node (MPI_COMM_TYPE_SHARED; DISTAL_RANKS_PER_NODE does not apply:
 * GPUs are physical) are matched to the node's visible GPUs, each rank taking
 * a free GPU whose PCI locality (hwloc) intersects the cores it is bound to, else any free
 * GPU, in node-local rank order.  With exactly one visible GPU (Slurm --gpus-per-task=1
 * sets CUDA_VISIBLE_DEVICES per task) that GPU is used.  More ranks on a node than GPUs is
 * an error (NCCL cannot put two ranks on one GPU), as is a node with no GPU.  verbose: rank 0
 * prints every rank's GPU (PCI bus id) to out.  Call it before allocating device memory;
 * generated executables do. */
int dtl_cuda_select_device(MPI_Comm comm, bool verbose, FILE *out, char *err, size_t errlen);

/* The matching itself (pure; used by dtl_cuda_select_device, tested on its own): nranks
 * ranks of one node in local-rank order, ngpus GPUs; near[r * ngpus + g] != 0 when GPU g
 * is close to rank r's cores.  Each rank in order takes the lowest-numbered free GPU near
 * it, else the lowest-numbered free GPU.  out[r] = GPU of rank r.  Returns nonzero when
 * nranks > ngpus or ngpus < 1. */
int dtl_gpu_assign(int nranks, int ngpus, const unsigned char *near, int *out);

/* ---- per-plan device state ---------------------------------------------------------------- */
/* Collective over ctx->cart.  Attach device state to the context, on the current device:
 * the two streams, a cuBLAS handle, and NCCL communicators built once: one over all of
 * ctx->cart (rank = cart rank; used by fetch, accumulate and shift) and one per mask in
 * masks[0..nmasks) over dtl_subcomm(ctx, mask) (rank = rank in that sub-communicator; used
 * by bcast and reduce with that mask).  Masks may repeat; 0 and the full mask are allowed.
 * dtl_ctx_destroy releases the state. */
int dtl_cu_attach(dtl_ctx *ctx, int nmasks, const unsigned *masks);
/* The compute stream (a cudaStream_t) on which generated kernels are launched. */
void *dtl_cu_stream(dtl_ctx *ctx);
/* Order the compute stream after the work queued so far on the default stream (the
 * application's cudaMemcpy and kernels that fill the blocks a compute call reads); generated
 * compute functions call it first.  Asynchronous: the host does not wait. */
int dtl_cu_after_default(dtl_ctx *ctx);
/* Block the host until all work of this context on both streams is done. */
int dtl_cu_sync(dtl_ctx *ctx);
/* Turn a CUDA error code (cudaError_t as int; 0 = success) of a kernel launch into a failure
 * with a message naming `what`; returns 0 when code is 0, else 1. */
int dtl_cu_check(dtl_ctx *ctx, int code, const char *what);

/* ---- memory ------------------------------------------------------------------------------ */
/* Device allocation (cudaMalloc; NULL on failure or for bytes == 0 ... never: bytes == 0
 * allocates 1 byte) and release (NULL is fine). */
void *dtl_cu_malloc(size_t bytes);
void dtl_cu_free(void *p);
/* Device to device copy of bytes, ordered on the compute stream. */
int dtl_cu_memcpy(dtl_ctx *ctx, void *dst, const void *src, size_t bytes);
/* Copies between host memory and device memory, complete when they return; ordered after the
 * work queued so far on both streams of the context and on the default stream. */
int dtl_cu_to_host(dtl_ctx *ctx, void *host, const void *dev, size_t bytes);
int dtl_cu_to_device(dtl_ctx *ctx, void *dev, const void *host, size_t bytes);
/* Zero count elements of buf (compute stream). */
int dtl_cu_zero(dtl_ctx *ctx, dtl_type t, void *buf, int64_t count);
/* As dtl_copy_box, on the device (compute stream). */
int dtl_cu_copy_box(dtl_ctx *ctx, dtl_type t, const void *src, const dtl_box *srcbox, void *dst,
                    const dtl_box *dstbox, const dtl_box *region, bool accumulate);

/* ---- communication (NCCL on the communication stream) ------------------------------------- */
/* Same contracts as dtl_fetch, dtl_accumulate, dtl_bcast_fetch, dtl_shift and dtl_reduce:
 * fetch and accumulate as ncclSend/ncclRecv groups over the whole grid, broadcasts as one
 * ncclBroadcast per owner piece over the mask's communicator, shifts as an ncclSend/ncclRecv
 * pair, reductions as ncclReduce / ncclAllReduce.  Pieces are packed and unpacked by device
 * kernels.  Box functions and boxes are host data.  Debug mode checks boxes as the host
 * functions do. */
int dtl_cu_fetch(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const void *local,
                 const dtl_box *own, dtl_box_fn need, const void *arg, void *buf);
int dtl_cu_accumulate(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, void *local,
                      const dtl_box *own, unsigned exec_mask, dtl_box_fn prod, const void *arg,
                      const void *buf);
int dtl_cu_bcast_fetch(dtl_ctx *ctx, unsigned mask, const dtl_dist *d, dtl_type t,
                       const void *local, const dtl_box *own, const dtl_box *need, void *buf);
int dtl_cu_shift(dtl_ctx *ctx, int dim, dtl_type t, const void *sendbuf, int64_t sendcount,
                 void *recvbuf, int64_t recvcount);
int dtl_cu_reduce(dtl_ctx *ctx, unsigned mask, const int64_t *root_coords, dtl_type t,
                  void *buf, int64_t count);
int dtl_cu_bcast(dtl_ctx *ctx, unsigned mask, const int64_t *root_coords, dtl_type t, void *buf,
                 int64_t count);

/* Split-phase broadcast and shift: _begin issues the operation on the communication stream
 * (after the work already queued on the compute stream) and returns at once; dtl_cu_wait
 * makes the compute stream wait for it (it does not block the host).  As on the host,
 * started operations are completed in order, buffers stay untouched in between, and a NULL
 * request waits trivially. */
typedef struct dtl_cu_request dtl_cu_request;
int dtl_cu_bcast_fetch_begin(dtl_ctx *ctx, unsigned mask, const dtl_dist *d, dtl_type t,
                             const void *local, const dtl_box *own, const dtl_box *need,
                             void *buf, dtl_cu_request **req);
int dtl_cu_shift_begin(dtl_ctx *ctx, int dim, dtl_type t, const void *sendbuf,
                       int64_t sendcount, void *recvbuf, int64_t recvcount,
                       dtl_cu_request **req);
int dtl_cu_wait(dtl_ctx *ctx, dtl_cu_request **req);

/* ---- the application's layout (stage.c) ------------------------------------------------------ */
/* As dtl_import / dtl_export, with data (the application's box) and local (this rank's
 * block) in device memory; staged through host memory.  Collective. */
int dtl_cu_import(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const int64_t *lo, const int64_t *hi,
                  const void *data, void *local, const dtl_box *own);
int dtl_cu_export(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const void *local, const dtl_box *own,
                  const int64_t *lo, const int64_t *hi, void *data);

/* ---- leaf kernels (compute stream) ---------------------------------------------------------- */
/* Same arguments and meaning as dtl_gemm ... dtl_mttkrp (row-major, accumulating, strides in
 * elements); cuBLAS for double and float gemm and gemv, kernels of ours otherwise. */
int dtl_cu_gemm(dtl_ctx *ctx, dtl_type t, int transa, int transb, int64_t m, int64_t n,
                int64_t k, const void *A, int64_t lda, const void *B, int64_t ldb, void *C,
                int64_t ldc);
int dtl_cu_gemv(dtl_ctx *ctx, dtl_type t, int trans, int64_t m, int64_t n, const void *A,
                int64_t lda, const void *x, int64_t incx, void *y, int64_t incy);
int dtl_cu_dot(dtl_ctx *ctx, dtl_type t, int64_t n, const void *x, int64_t incx, const void *y,
               int64_t incy, void *r);
/* alpha is a host pointer to one element of type t */
int dtl_cu_axpy(dtl_ctx *ctx, dtl_type t, int64_t n, const void *alpha, const void *x,
                int64_t incx, void *y, int64_t incy);
int dtl_cu_ttv(dtl_ctx *ctx, dtl_type t, int64_t ni, int64_t nj, int64_t nk, const void *B,
               int64_t sBi, int64_t sBj, int64_t sBk, const void *c, int64_t sc, void *A,
               int64_t sAi, int64_t sAj);
int dtl_cu_ttm(dtl_ctx *ctx, dtl_type t, int64_t ni, int64_t nj, int64_t nk, int64_t nl,
               const void *B, int64_t sBi, int64_t sBj, int64_t sBk, const void *C, int64_t sCk,
               int64_t sCl, void *A, int64_t sAi, int64_t sAj, int64_t sAl);
int dtl_cu_innerprod(dtl_ctx *ctx, dtl_type t, int64_t ni, int64_t nj, int64_t nk,
                     const void *B, int64_t sBi, int64_t sBj, int64_t sBk, const void *C,
                     int64_t sCi, int64_t sCj, int64_t sCk, void *r);
int dtl_cu_mttkrp(dtl_ctx *ctx, dtl_type t, int64_t ni, int64_t nj, int64_t nk, int64_t nl,
                  const void *B, int64_t sBi, int64_t sBj, int64_t sBk, const void *C,
                  int64_t sCj, int64_t sCl, const void *D, int64_t sDk, int64_t sDl, void *A,
                  int64_t sAi, int64_t sAl);

#ifdef __cplusplus
}
#endif
#endif
