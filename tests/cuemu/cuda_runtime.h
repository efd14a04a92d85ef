/* cuda_runtime.h -- host emulation of the CUDA runtime, used by the test suite to run the
 * device path of libdistal_cuda and generated CUDA code without a GPU (see cuemu.c).
 *
 * Declares the subset of the CUDA runtime API that the device path calls, with the real
 * signatures and the real values of the enumerators that matter, so that the same sources
 * compile against this header and against the toolkit's.  "Device" memory is host memory,
 * pages mapped for each allocation, and every stream runs its work at once, in the calling
 * thread.
 *
 * Device and host memory are kept apart in both directions but one.  Copies whose kind names
 * a device side check that side against a table of live allocations, as do cuBLAS and NCCL
 * buffers; and device memory is PROT_NONE except during the emulated device operations
 * (between cuemu_device_enter and cuemu_device_leave), so that host code dereferencing it
 * ends the process with a message, as it would crash or read garbage on a GPU
 * (CUEMU_NO_GUARD=1 at cudaMalloc turns that off for the allocation).  Not emulated: a
 * kernel (a plain C function here) can read host memory, and concurrency between streams
 * (events and waits are bookkeeping only, so a missing event or wait goes unnoticed).
 * Plain C, usable from C11 and C++; never include it together with the real CUDA headers. */
#ifndef CUEMU_CUDA_RUNTIME_H
#define CUEMU_CUDA_RUNTIME_H

#ifdef __CUDACC__
#error "tests/cuemu/cuda_runtime.h is the host emulation; nvcc builds use the real CUDA headers"
#endif
#if defined(__CUDA_RUNTIME_H__) || defined(__CUDA_RUNTIME_API_H__) || defined(__DRIVER_TYPES_H__)
#error "the emulated cuda_runtime.h cannot be mixed with the real CUDA headers"
#endif

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
/* the real header gives some trailing arguments defaults in C++ */
#define CUEMU_DEFAULT(v) = v
#else
#define CUEMU_DEFAULT(v)
#endif

/* Values as in driver_types.h. */
enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101
};
typedef enum cudaError cudaError_t;

/* Opaque handles; the struct tags are those of the real header. */
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};

/* flags of cudaStreamCreateWithFlags and cudaEventCreateWithFlags */
#define cudaStreamNonBlocking 0x01
#define cudaEventDisableTiming 0x02

/* ---- devices: CUEMU_GPUS of them (default 8), current device per thread ---------------- */
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
/* "0000:%02x:00.0" with the device number */
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device);
cudaError_t cudaDeviceSynchronize(void);

/* ---- memory ---------------------------------------------------------------------------- */
cudaError_t cudaMalloc(void **devPtr, size_t size);
cudaError_t cudaFree(void *devPtr);
cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream);
cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream CUEMU_DEFAULT(0));
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count,
                            cudaStream_t stream CUEMU_DEFAULT(0));

/* ---- streams and events (a NULL stream is the default stream) ---------------------------- */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned int flags CUEMU_DEFAULT(0));
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream CUEMU_DEFAULT(0));
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);

/* ---- emulation only: device memory open to the host ------------------------------------- */
/* Nested over the whole process: the first enter makes every live device allocation
 * readable and writable, the last leave makes them all PROT_NONE again.  Every emulated
 * function that touches device memory brackets its accesses with them, as does a kernel
 * launch (DTL_LAUNCH of distal/kernel.cuh, which declares them too). */
void cuemu_device_enter(void);
void cuemu_device_leave(void);
/* A kernel launch on this stream: the default stream's late copies land first unless the
 * stream is non-blocking. */
void cuemu_stream_op(void *stream);

/* ---- errors ------------------------------------------------------------------------------ */
const char *cudaGetErrorString(cudaError_t error);
/* The error of the last failing runtime call of this thread, which it clears. */
cudaError_t cudaGetLastError(void);

#ifdef __cplusplus
}
#endif

#endif
