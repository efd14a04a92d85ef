/* nccl.h -- host emulation of NCCL over MPI, used by the test suite to run the device path of
 * libdistal_cuda and generated CUDA code without a GPU (see cuemu.c).
 *
 * Declares the subset of NCCL that the device path calls, with the real signatures and the
 * real values of the result codes, data types and reduction operations.  A communicator
 * wraps a duplicate of an MPI communicator; point-to-point calls become MPI_Isend/MPI_Irecv
 * and collectives MPI nonblocking collectives, completed by the outermost ncclGroupEnd (or
 * at once outside a group), so they are done when the call returns, whatever the stream.
 *
 * Not emulated: concurrency between streams (the stream argument is only checked), and the
 * separation of device from host memory beyond the table of live cudaMalloc allocations,
 * against which every buffer is checked.  Plain C, usable from C11 and C++; never include it
 * together with the real NCCL headers. */
#ifndef CUEMU_NCCL_H
#define CUEMU_NCCL_H

#ifdef NCCL_H_
#error "the emulated nccl.h cannot be mixed with the real NCCL header"
#endif

#include <stddef.h>

#include <mpi.h>

#include "cuda_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclComm *ncclComm_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5
} ncclResult_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8
} ncclDataType_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3 } ncclRedOp_t;

/* ---- communicators ------------------------------------------------------------------------ */
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
/* Emulation only.  Names the MPI communicator whose ranks are the NCCL ranks of the
 * communicator that the next ncclCommInitRank of this thread creates; it must be called
 * right before each ncclCommInitRank (which fails with ncclInvalidUsage otherwise). */
void cuemu_use_comm(MPI_Comm comm);
/* Collective over that MPI communicator (which it duplicates): nranks and rank must be its
 * size and this process's rank, and every rank must pass the same id, fresh from
 * ncclGetUniqueId (ncclInvalidArgument on every rank otherwise). */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);

/* ---- groups and operations ------------------------------------------------------------------ */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);

const char *ncclGetErrorString(ncclResult_t result);

#ifdef __cplusplus
}
#endif

#endif
