/* test_cuemu.c -- tests of the host emulation of the CUDA runtime, NCCL and cuBLAS (cuemu.c),
 * which the test suite uses to run the device path of libdistal_cuda and generated CUDA code
 * without a GPU.  Run by run.sh under mpirun at 1 to 4 ranks.
 *
 * Each emulated function is checked against the semantics of the real one that the device
 * path relies on (gemm and gemv against naive loops for every transpose, collectives and
 * point-to-point groups on the world and on a split, reordered sub-communicator), and against
 * the errors it reports.  The guard that keeps host code away from device memory is checked
 * in forked children (a caught access ends the process it happens in), along with the
 * emulated functions and kernel launches that must still reach guarded memory.  The
 * emulation does not model concurrency between streams, so that is not tested here.
 *
 * As in tests/runtime, a check never jumps out of a test between collective calls: CHECK
 * records failures and all_ok() at the end of each test agrees across ranks, with the
 * failing ranks' first messages shown by rank 0. */
#ifndef _POSIX_C_SOURCE /* strict C11 builds: setenv, strdup, dup2, fork */
#define _POSIX_C_SOURCE 200809L
#endif
#ifndef _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#define _DEFAULT_SOURCE
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cublas_v2.h"
#include "cuda_runtime.h"
#include "distal/kernel.cuh"
#include "nccl.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../mpi_checks.h"

static int reset(void **state) {
  (void)state;
  g_fail = 0;
  return 0;
}

/* ---- helpers ------------------------------------------------------------------------------ */
static uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
/* uniform in [-1, 1), the same on every rank for the same seed */
static double unit(uint64_t *s) { return (double)(mix((*s)++) >> 11) * 0x1.0p-52 - 1.0; }

static double absd(double x) { return x < 0 ? -x : x; }
static bool is_nan(double x) { return x != x; }

/* An environment variable, saved to be put back by env_restore. */
typedef struct {
  const char *name;
  char *value; /* NULL when unset */
} saved_env;
static saved_env env_save(const char *name) {
  const char *v = getenv(name);
  return (saved_env){name, v ? strdup(v) : NULL};
}
static void env_restore(saved_env s) {
  if (s.value)
    setenv(s.name, s.value, 1);
  else
    unsetenv(s.name);
  free(s.value);
}

/* Device buffer of exactly `bytes` bytes holding `host` (when given). */
static void *dev_from(const void *host, size_t bytes) {
  void *d = NULL;
  CHECK(cudaMalloc(&d, bytes) == cudaSuccess && d);
  if (d && host && bytes)
    CHECK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  return d;
}
static void to_host(void *host, const void *dev, size_t bytes) {
  if (bytes)
    CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
}
static void dev_free(void *d) { CHECK(cudaFree(d) == cudaSuccess); }

/* ---- forked children: what a host access does ---------------------------------------------- */
/* How a child that ran f(arg) ended (its exit status, or minus the signal that killed it;
 * -1000 when it could not run) and what it wrote on stderr.  A caught access ends the process
 * it happens in, so it happens in a child; the child never calls MPI and leaves with _exit,
 * and the parent forks only between MPI calls, with no request of its own pending. */
typedef struct {
  int status;
  char err[512];
} child_end;

static child_end in_child(void (*f)(void *), void *arg) {
  child_end end = {-1000, ""};
  int fds[2];
  if (pipe(fds) != 0)
    return end;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    f(arg);
    _exit(0);
  }
  close(fds[1]);
  size_t got = 0;
  ssize_t k;
  char rest[256];
  while ((k = read(fds[0], got < sizeof end.err - 1 ? end.err + got : rest,
                   got < sizeof end.err - 1 ? sizeof end.err - 1 - got : sizeof rest)) > 0)
    if (got < sizeof end.err - 1)
      got += (size_t)k;
  end.err[got] = 0;
  close(fds[0]);
  int st;
  if (pid > 0 && waitpid(pid, &st, 0) == pid)
    end.status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1000;
  return end;
}

static void host_read(void *p) {
  volatile unsigned char *c = p;
  unsigned char v = *c;
  (void)v;
}
static void host_write(void *p) {
  volatile unsigned char *c = p;
  *c = 1;
}

/* That a host read and a host write at p, inside an allocation of `size` bytes, are caught
 * and reported in the guard's words (which also says that no device operation was left
 * open: the memory would be readable then). */
static void expect_guarded(void *p, size_t size, const char *where) {
  char want[160];
  snprintf(want, sizeof want,
           "cuemu: host code touched device memory at %p (allocation of %zu bytes)\n", p, size);
  for (int w = 0; w < 2; w++) {
    child_end e = in_child(w ? host_write : host_read, p);
    CHECKF(e.status == 3 && strcmp(e.err, want) == 0,
           "%s: host %s at %p: status %d, stderr \"%s\"", where, w ? "write" : "read", p, e.status,
           e.err);
  }
}
/* That every device operation so far has been left: a new allocation is closed at once then,
 * and open until the last leave otherwise. */
static void expect_all_left(const char *where) {
  void *d = dev_from(NULL, 24);
  if (d)
    expect_guarded((char *)d + 5, 24, where);
  dev_free(d);
}

/* ---- devices and errors -----------------------------------------------------------------------
 */
static void *other_thread(void *arg) {
  int *out = arg;
  /* the current device and the last error are per thread, as in the CUDA runtime */
  CHECK(cudaGetDevice(&out[0]) == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaSetDevice(1000) == cudaErrorInvalidDevice);
  out[1] = cudaGetLastError();
  return NULL;
}

static void test_devices(void **state) {
  (void)state;
  saved_env gpus = env_save("CUEMU_GPUS");
  int n = -1, d = -1;
  char id[64];

  unsetenv("CUEMU_GPUS");
  CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n == 8);
  CHECK(cudaGetDeviceCount(NULL) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  setenv("CUEMU_GPUS", "3", 1);
  CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n == 3);
  for (int dev = 0; dev < 3; dev++) {
    char want[32];
    snprintf(want, sizeof want, "0000:%02x:00.0", dev);
    CHECK(cudaSetDevice(dev) == cudaSuccess);
    CHECK(cudaGetDevice(&d) == cudaSuccess && d == dev);
    CHECK(cudaDeviceGetPCIBusId(id, (int)sizeof id, dev) == cudaSuccess);
    CHECKF(strcmp(id, want) == 0, "bus id %s, expected %s", id, want);
  }
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaSetDevice(3) == cudaErrorInvalidDevice);
  CHECK(cudaSetDevice(-1) == cudaErrorInvalidDevice);
  CHECK(cudaGetDevice(&d) == cudaSuccess && d == 2); /* a failed set changes nothing */
  CHECK(cudaGetDevice(NULL) == cudaErrorInvalidValue);
  /* the last error is the latest failure, and reading it clears it */
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaDeviceGetPCIBusId(id, (int)sizeof id, 3) == cudaErrorInvalidDevice);
  CHECK(cudaDeviceGetPCIBusId(NULL, 16, 0) == cudaErrorInvalidValue);
  CHECK(cudaDeviceGetPCIBusId(id, 0, 0) == cudaErrorInvalidValue);
  CHECK(cudaDeviceGetPCIBusId(id, 5, 1) == cudaSuccess && strcmp(id, "0000") == 0);
  setenv("CUEMU_GPUS", "12", 1);
  CHECK(cudaDeviceGetPCIBusId(id, (int)sizeof id, 11) == cudaSuccess &&
        strcmp(id, "0000:0b:00.0") == 0);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);

  /* another thread starts on device 0, and its errors stay its own */
  int seen[2] = {-1, -1};
  pthread_t th;
  CHECK(pthread_create(&th, NULL, other_thread, seen) == 0);
  pthread_join(th, NULL);
  CHECK(seen[0] == 0 && seen[1] == cudaErrorInvalidDevice);
  CHECK(cudaGetDevice(&d) == cudaSuccess && d == 2);
  CHECK(cudaGetLastError() == cudaSuccess);

  /* no device: everything that needs one says so */
  setenv("CUEMU_GPUS", "0", 1);
  void *p = &n;
  cudaStream_t s = NULL;
  cudaEvent_t ev = NULL;
  cublasHandle_t h = NULL;
  CHECK(cudaGetDeviceCount(&n) == cudaErrorNoDevice && n == 0);
  CHECK(cudaSetDevice(0) == cudaErrorNoDevice);
  CHECK(cudaMalloc(&p, 8) == cudaErrorNoDevice && p == NULL);
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaErrorNoDevice);
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaErrorNoDevice);
  CHECK(cudaDeviceSynchronize() == cudaErrorNoDevice);
  CHECK(cublasCreate(&h) == CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(cudaGetLastError() == cudaErrorNoDevice);
  setenv("CUEMU_GPUS", "lots", 1);
  CHECK(cudaGetDeviceCount(&n) == cudaErrorNoDevice && n == 0);
  setenv("CUEMU_GPUS", "-2", 1);
  CHECK(cudaGetDeviceCount(&n) == cudaErrorNoDevice);
  CHECK(cudaGetLastError() == cudaErrorNoDevice);

  env_restore(gpus);
  CHECK(cudaSetDevice(0) == cudaSuccess);
  all_ok();
}

static void test_error_strings(void **state) {
  (void)state;
  CHECK(strcmp(cudaGetErrorString(cudaSuccess), "no error") == 0);
  CHECK(strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0);
  CHECK(strcmp(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory") == 0);
  CHECK(strcmp(cudaGetErrorString(cudaErrorNoDevice), "no CUDA-capable device is detected") == 0);
  CHECK(strcmp(cudaGetErrorString(cudaErrorInvalidDevice), "invalid device ordinal") == 0);
  CHECK(strcmp(cudaGetErrorString((cudaError_t)9999), "unrecognized error code") == 0);
  const ncclResult_t results[] = {ncclSuccess,       ncclUnhandledCudaError, ncclSystemError,
                                  ncclInternalError, ncclInvalidArgument,    ncclInvalidUsage,
                                  (ncclResult_t)1234};
  const int nres = (int)(sizeof results / sizeof results[0]);
  for (int i = 0; i < nres; i++) {
    const char *si = ncclGetErrorString(results[i]);
    CHECK(si && *si);
    for (int j = 0; j < i; j++)
      CHECKF(strcmp(si, ncclGetErrorString(results[j])) != 0, "results %d and %d read the same",
             (int)results[i], (int)results[j]);
  }
  CHECK(strcmp(ncclGetErrorString(ncclSuccess), "no error") == 0);
  /* the values the device path and the real headers agree on */
  CHECK(cudaMemcpyHostToHost == 0 && cudaMemcpyHostToDevice == 1 && cudaMemcpyDeviceToHost == 2 &&
        cudaMemcpyDeviceToDevice == 3 && cudaMemcpyDefault == 4);
  CHECK(ncclChar == 0 && ncclUint8 == 1 && ncclInt == 2 && ncclUint32 == 3 && ncclInt64 == 4 &&
        ncclUint64 == 5 && ncclHalf == 6 && ncclFloat == 7 && ncclDouble == 8);
  CHECK(CUBLAS_STATUS_INVALID_VALUE == 7 && CUBLAS_OP_C == 2 && sizeof(ncclUniqueId) == 128);
  all_ok();
}

/* ---- memory ------------------------------------------------------------------------------------
 */
static void test_memory(void **state) {
  (void)state;
  unsigned char host[64], back[64];
  for (int i = 0; i < 64; i++)
    host[i] = (unsigned char)(i * 7 + 1);
  unsigned char *d = NULL, *d2 = NULL;
  CHECK(cudaMalloc((void **)&d, 64) == cudaSuccess && d);
  CHECK(cudaMalloc((void **)&d2, 64) == cudaSuccess && d2);
  if (!d || !d2) {
    all_ok();
    return;
  }
  /* fresh device memory is not zero */
  memset(back, 0, sizeof back);
  CHECK(cudaMemcpy(back, d, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int i = 0; i < 64; i++)
    CHECK(back[i] == 0xff);

  CHECK(cudaMemcpy(d, host, 64, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(d2, d, 64, cudaMemcpyDeviceToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(back, d2, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(memcmp(back, host, 64) == 0);
  /* inside the allocation at any offset, not past its end */
  CHECK(cudaMemcpy(d + 10, host, 16, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(back, d + 56, 8, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back[0] == host[56]);
  CHECK(cudaMemcpy(d + 60, host, 8, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(back, d + 1, 64, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(d2 + 32, d, 64, cudaMemcpyDeviceToDevice) == cudaErrorInvalidValue);
  /* a host pointer where the kind says device, and the other way round */
  CHECK(cudaMemcpy(back, host, 8, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(back, host, 8, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(d, host, 8, cudaMemcpyDeviceToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(back, d, 8, cudaMemcpyDeviceToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(d, d2, 8, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(d, d2, 8, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaSuccess);
  /* HostToHost and Default copy anything */
  CHECK(cudaMemcpy(back, host, 64, cudaMemcpyHostToHost) == cudaSuccess);
  CHECK(cudaMemcpy(d2, host, 8, cudaMemcpyDefault) == cudaSuccess);
  CHECK(cudaMemcpy(back, d2, 8, cudaMemcpyDefault) == cudaSuccess);
  CHECK(cudaMemcpy(d, d2, 8, cudaMemcpyDefault) == cudaSuccess);
  /* nothing to copy is never an error; bad arguments are */
  CHECK(cudaMemcpy(back, host, 0, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(NULL, host, 4, cudaMemcpyHostToHost) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(d, NULL, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(d, host, 4, (enum cudaMemcpyKind)7) == cudaErrorInvalidValue);

  /* memset writes the low byte of value, on device memory only */
  CHECK(cudaMemcpy(d, host, 64, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemsetAsync(d + 8, 0x15a, 16, NULL) == cudaSuccess);
  CHECK(cudaMemcpy(back, d, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int i = 0; i < 64; i++)
    CHECK(back[i] == (i >= 8 && i < 24 ? 0x5a : host[i]));
  CHECK(cudaMemsetAsync(host, 0, 8, NULL) == cudaErrorInvalidValue);
  CHECK(cudaMemsetAsync(d + 32, 0, 33, NULL) == cudaErrorInvalidValue);
  CHECK(cudaMemsetAsync(host, 0, 0, NULL) == cudaSuccess);

  /* zero bytes allocate a distinct pointer that holds no byte */
  void *z = NULL, *z2 = NULL;
  CHECK(cudaMalloc(&z, 0) == cudaSuccess && z);
  CHECK(cudaMalloc(&z2, 0) == cudaSuccess && z2 && z2 != z);
  CHECK(cudaMemcpy(z, host, 1, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(z, host, 0, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaFree(z) == cudaSuccess && cudaFree(z2) == cudaSuccess);

  /* freeing: NULL is fine, anything but the start of a live allocation is not */
  CHECK(cudaFree(NULL) == cudaSuccess);
  CHECK(cudaFree(host) == cudaErrorInvalidValue);
  CHECK(cudaFree(d + 1) == cudaErrorInvalidValue);
  CHECK(cudaFree(d) == cudaSuccess);
  CHECK(cudaFree(d) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(back, d2, 8, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(cudaFree(d2) == cudaSuccess);

#ifndef __SANITIZE_ADDRESS__ /* whose malloc aborts on such a size unless told otherwise */
  void *big = &big;
  CHECK(cudaMalloc(&big, SIZE_MAX) == cudaErrorMemoryAllocation && big == NULL);
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
#endif
  CHECK(cudaMalloc(NULL, 8) == cudaErrorInvalidValue);

  /* stream-ordered variants: same rules, on a live stream (or the default one) */
  cudaStream_t s = NULL;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  void *a = NULL;
  CHECK(cudaMallocAsync(&a, 32, s) == cudaSuccess && a);
  CHECK(cudaMemcpyAsync(a, host, 32, cudaMemcpyHostToDevice, s) == cudaSuccess);
  /* streams run at once: the data is there before any synchronization */
  CHECK(cudaMemcpyAsync(back, a, 32, cudaMemcpyDeviceToHost, NULL) == cudaSuccess);
  CHECK(memcmp(back, host, 32) == 0);
  CHECK(cudaMemsetAsync(a, 0, 32, s) == cudaSuccess);
  CHECK(cudaMemcpyAsync(back, host, 32, cudaMemcpyHostToDevice, s) == cudaErrorInvalidValue);
  CHECK(cudaMemcpyAsync(a, host, 64, cudaMemcpyHostToDevice, s) == cudaErrorInvalidValue);
  CHECK(cudaFreeAsync(a, s) == cudaSuccess);
  CHECK(cudaFreeAsync(a, s) == cudaErrorInvalidValue);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  CHECK(cudaMallocAsync(&a, 32, s) == cudaErrorInvalidValue);
  CHECK(cudaMemcpyAsync(back, host, 8, cudaMemcpyHostToHost, s) == cudaErrorInvalidValue);
  CHECK(cudaMemsetAsync(host, 0, 0, s) == cudaErrorInvalidValue);
  CHECK(cudaMallocAsync(&a, 16, NULL) == cudaSuccess);
  CHECK(cudaFreeAsync(a, NULL) == cudaSuccess);

  /* many live allocations, freed in a scrambled order: the table finds each one */
  enum { NB = 300 };
  unsigned char *blk[NB];
  size_t len[NB];
  uint64_t seed = 99;
  for (int i = 0; i < NB; i++) {
    len[i] = 1 + mix(seed++) % 200;
    blk[i] = dev_from(NULL, len[i]);
  }
  for (int i = 0; i < NB; i++) {
    if (!blk[i])
      continue;
    CHECK(cudaMemsetAsync(blk[i], i & 0xff, len[i], NULL) == cudaSuccess);
    CHECK(cudaMemcpy(back, blk[i] + len[i] - 1, 1, cudaMemcpyDeviceToHost) == cudaSuccess &&
          back[0] == (i & 0xff));
    CHECK(cudaMemcpy(back, blk[i] + len[i] - 1, 2, cudaMemcpyDeviceToHost) ==
          cudaErrorInvalidValue);
  }
  for (int i = 0; i < NB; i++) {
    int j = (int)(mix(seed++) % (uint64_t)(NB - i)) + i, k;
    unsigned char *t = blk[i];
    size_t tl = len[i];
    blk[i] = blk[j], len[i] = len[j], blk[j] = t, len[j] = tl;
    CHECK(cudaFree(blk[i] + 1) == cudaErrorInvalidValue);
    CHECK(cudaFree(blk[i]) == cudaSuccess);
    CHECK(cudaFree(blk[i]) == cudaErrorInvalidValue);
    for (k = i + 1; k < NB && k < i + 4; k++) /* the others are still whole */
      CHECK(cudaMemsetAsync(blk[k], 1, len[k], NULL) == cudaSuccess);
  }
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  expect_all_left("after the memory tests");
  all_ok();
}

/* ---- the default stream's late copies ------------------------------------------------------
 * A cudaMemcpy from host memory lands in the order of the default stream, which a
 * non-blocking stream does not follow: work queued there before a synchronization with the
 * default stream reads what was there before. */
static void expect_d(cudaStream_t s, const double *d, double first, double last, const char *when) {
  double back[4] = {-1, -1, -1, -1};
  CHECK(cudaMemcpyAsync(back, d, sizeof back, cudaMemcpyDeviceToHost, s) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  CHECKF(back[0] == first && back[3] == last, "%s: read %g .. %g, expected %g .. %g", when,
         back[0], back[3], first, last);
}

static void test_late_copies(void **state) {
  (void)state;
  setenv("CUEMU_EAGER_COPIES", "0", 1);
  cudaStream_t nb = NULL, bl = NULL;
  cudaEvent_t ev = NULL;
  CHECK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaStreamCreateWithFlags(&bl, 0) == cudaSuccess);
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess);
  double a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, *d = NULL, *e = NULL;
  CHECK(cudaMalloc((void **)&d, sizeof a) == cudaSuccess);
  CHECK(cudaMalloc((void **)&e, sizeof a) == cudaSuccess);
  CHECK(cudaMemsetAsync(d, 0, sizeof a, nb) == cudaSuccess);

  CHECK(cudaMemcpy(d, a, sizeof a, cudaMemcpyHostToDevice) == cudaSuccess);
  a[0] = 100; /* the source was staged by the call */
  CHECK(cudaMemcpyAsync(e, d, sizeof a, cudaMemcpyDeviceToDevice, nb) == cudaSuccess);
  expect_d(nb, e, 0, 0, "a non-blocking stream before the copy landed");
  CHECK(cudaStreamSynchronize(NULL) == cudaSuccess);
  expect_d(nb, d, 1, 4, "after cudaStreamSynchronize(0)");

  CHECK(cudaMemcpy(d, b, sizeof b, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemsetAsync(e, 0, sizeof b, bl) == cudaSuccess);
  expect_d(nb, d, 5, 8, "after work on a blocking stream");

  CHECK(cudaMemcpyAsync(d, a, sizeof a, cudaMemcpyHostToDevice, NULL) == cudaSuccess);
  expect_d(nb, d, 5, 8, "cudaMemcpyAsync on stream 0, before");
  CHECK(cudaEventRecord(ev, NULL) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(nb, ev, 0) == cudaSuccess);
  expect_d(nb, d, 100, 4, "after an event recorded on stream 0");

  CHECK(cudaMemcpy(d, b, sizeof b, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  expect_d(nb, d, 5, 8, "after cudaDeviceSynchronize");

  CHECK(cudaMemcpy(d, a, sizeof a, cudaMemcpyHostToDevice) == cudaSuccess);
  double back[4] = {0};
  CHECK(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back[0] == 100 && back[3] == 4); /* the default stream is in order */

  CHECK(cudaMemcpy(d, b, sizeof b, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaFree(e) == cudaSuccess); /* cudaFree synchronizes */
  expect_d(nb, d, 5, 8, "after cudaFree");

  setenv("CUEMU_EAGER_COPIES", "1", 1);
  CHECK(cudaMemcpy(d, a, sizeof a, cudaMemcpyHostToDevice) == cudaSuccess);
  expect_d(nb, d, 100, 4, "CUEMU_EAGER_COPIES=1");
  CHECK(cudaFree(d) == cudaSuccess);
  CHECK(cudaEventDestroy(ev) == cudaSuccess);
  CHECK(cudaStreamDestroy(nb) == cudaSuccess && cudaStreamDestroy(bl) == cudaSuccess);
  all_ok();
}

/* ---- streams and events ------------------------------------------------------------------------
 */
static void test_streams_events(void **state) {
  (void)state;
  cudaStream_t s1 = NULL, s2 = NULL, bad = (cudaStream_t)&s1;
  cudaEvent_t e1 = NULL, e2 = NULL, fake = (cudaEvent_t)&e1;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess && s1);
  CHECK(cudaStreamCreateWithFlags(&s2, 0) == cudaSuccess && s2 && s2 != s1);
  CHECK(cudaStreamCreateWithFlags(&s2, 0x4) == cudaErrorInvalidValue);
  CHECK(cudaStreamCreateWithFlags(NULL, 0) == cudaErrorInvalidValue);
  CHECK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming) == cudaSuccess && e1);
  CHECK(cudaEventCreateWithFlags(&e2, 0) == cudaSuccess && e2 && e2 != e1);
  cudaEvent_t e3 = NULL;
  CHECK(cudaEventCreateWithFlags(&e3, 0x4) == cudaErrorInvalidValue); /* interprocess needs 0x2 */
  CHECK(cudaEventCreateWithFlags(&e3, 0x10) == cudaErrorInvalidValue);
  CHECK(cudaEventCreateWithFlags(NULL, 0) == cudaErrorInvalidValue);
  CHECK(cudaEventCreateWithFlags(&e3, 0x6) == cudaSuccess && cudaEventDestroy(e3) == cudaSuccess);

  /* a never-recorded event is complete */
  CHECK(cudaEventSynchronize(e2) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(s1, e2, 0) == cudaSuccess);
  CHECK(cudaEventRecord(e1, s1) == cudaSuccess);
  CHECK(cudaEventRecord(e1, NULL) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(s2, e1, 0) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(NULL, e1, 0) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(s2, e1, 0x8) == cudaErrorInvalidValue);
  CHECK(cudaEventSynchronize(e1) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s1) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s2) == cudaSuccess);
  CHECK(cudaStreamSynchronize(NULL) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);

  /* handles that are not live */
  CHECK(cudaStreamSynchronize(bad) == cudaErrorInvalidValue);
  CHECK(cudaEventRecord(fake, s1) == cudaErrorInvalidValue);
  CHECK(cudaEventRecord(e1, bad) == cudaErrorInvalidValue);
  CHECK(cudaStreamWaitEvent(s1, fake, 0) == cudaErrorInvalidValue);
  CHECK(cudaStreamWaitEvent(bad, e1, 0) == cudaErrorInvalidValue);
  CHECK(cudaStreamWaitEvent(s1, NULL, 0) == cudaErrorInvalidValue);
  CHECK(cudaEventSynchronize(NULL) == cudaErrorInvalidValue);
  CHECK(cudaStreamDestroy(NULL) == cudaErrorInvalidValue);
  CHECK(cudaStreamDestroy(s1) == cudaSuccess);
  CHECK(cudaStreamDestroy(s1) == cudaErrorInvalidValue);
  CHECK(cudaStreamSynchronize(s1) == cudaErrorInvalidValue);
  CHECK(cudaEventRecord(e1, s1) == cudaErrorInvalidValue);
  CHECK(cudaEventDestroy(e1) == cudaSuccess);
  CHECK(cudaEventDestroy(e1) == cudaErrorInvalidValue);
  CHECK(cudaEventRecord(e1, s2) == cudaErrorInvalidValue);
  CHECK(cudaEventSynchronize(e1) == cudaErrorInvalidValue);
  CHECK(cudaEventDestroy(e2) == cudaSuccess && cudaStreamDestroy(s2) == cudaSuccess);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  all_ok();
}

/* ---- cuBLAS -----------------------------------------------------------------------------------
 */
static const cublasOperation_t ops[] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};

/* Bytes spanned by a column-major matrix / a strided vector: what the buffers are cut to, so
 * that the emulation's range checks are exercised at their exact limit. */
static size_t span(int rows, int cols, int ld, size_t el) {
  return rows <= 0 || cols <= 0 ? 0 : ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * el;
}
static size_t vspan(int len, int inc, size_t el) { return span(1, len, inc < 0 ? -inc : inc, el); }

/* Host data in doubles, converted to the element type on the way to the device. */
static void *dev_matrix(const double *h, size_t n, bool single, size_t bytes) {
  void *tmp = malloc(n * (single ? sizeof(float) : sizeof(double)) + 1);
  for (size_t i = 0; i < n; i++)
    if (single)
      ((float *)tmp)[i] = (float)h[i];
    else
      ((double *)tmp)[i] = h[i];
  void *d = dev_from(tmp, bytes);
  free(tmp);
  return d;
}
static void host_matrix(double *h, const void *d, size_t n, bool single) {
  size_t el = single ? sizeof(float) : sizeof(double);
  void *tmp = malloc(n * el + 1);
  to_host(tmp, d, n * el);
  for (size_t i = 0; i < n; i++)
    h[i] = single ? (double)((float *)tmp)[i] : ((double *)tmp)[i];
  free(tmp);
}
/* what the device holds after rounding to the element type */
static double rounded(double v, bool single) { return single ? (double)(float)v : v; }

static double nan_value(void) {
  double z = 0;
  return z / z;
}

static void gemm_case(cublasHandle_t h, bool single, cublasOperation_t ta, cublasOperation_t tb,
                      int m, int n, int k, double alpha, double beta, int pad, uint64_t *seed) {
  size_t el = single ? sizeof(float) : sizeof(double);
  int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
  int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
  int lda = (ar > 1 ? ar : 1) + pad, ldb = (br > 1 ? br : 1) + pad, ldc = (m > 1 ? m : 1) + pad;
  size_t na = span(ar, ac, lda, 1), nb = span(br, bc, ldb, 1), nc = span(m, n, ldc, 1);
  double *A = calloc(na + 1, sizeof *A), *B = calloc(nb + 1, sizeof *B);
  double *C = calloc(nc + 1, sizeof *C), *out = calloc(nc + 1, sizeof *out);
  for (size_t i = 0; i < na; i++)
    A[i] = rounded(unit(seed), single);
  for (size_t i = 0; i < nb; i++)
    B[i] = rounded(unit(seed), single);
  for (size_t i = 0; i < nc; i++) /* beta = 0: C is not read, even NaN */
    C[i] = beta == 0 ? nan_value() : rounded(unit(seed), single);
  void *dA = dev_matrix(A, na, single, na * el), *dB = dev_matrix(B, nb, single, nb * el);
  void *dC = dev_matrix(C, nc, single, nc * el);
  cublasStatus_t st;
  if (single) {
    float fa = (float)alpha, fb = (float)beta;
    st = cublasSgemm(h, ta, tb, m, n, k, &fa, dA, lda, dB, ldb, &fb, dC, ldc);
  } else {
    st = cublasDgemm(h, ta, tb, m, n, k, &alpha, dA, lda, dB, ldb, &beta, dC, ldc);
  }
  CHECKF(st == CUBLAS_STATUS_SUCCESS, "%cgemm %d%d m %d n %d k %d: status %d", single ? 'S' : 'D',
         (int)ta, (int)tb, m, n, k, (int)st);
  host_matrix(out, dC, nc, single);
  double tol = (single ? 1e-5 : 1e-13) * (k + 2) * (absd(alpha) + absd(beta) + 1);
  int bad = 0;
  for (int j = 0; j < n; j++)
    for (int i = 0; i < ldc && (size_t)j * (size_t)ldc + (size_t)i < nc; i++) {
      size_t at = (size_t)j * (size_t)ldc + (size_t)i;
      if (i >= m) { /* padding rows are not touched */
        bad += !(is_nan(C[at]) ? is_nan(out[at]) : out[at] == C[at]);
        continue;
      }
      double s = 0;
      for (int p = 0; p < k; p++) {
        double a = ta == CUBLAS_OP_N ? A[i + (size_t)p * lda] : A[p + (size_t)i * lda];
        double b = tb == CUBLAS_OP_N ? B[p + (size_t)j * ldb] : B[j + (size_t)p * ldb];
        s += a * b;
      }
      double want = alpha * s + (beta == 0 ? 0 : beta * C[at]);
      bad += !(absd(out[at] - want) <= tol);
    }
  CHECKF(bad == 0, "%cgemm ta %d tb %d m %d n %d k %d alpha %g beta %g pad %d: %d wrong",
         single ? 'S' : 'D', (int)ta, (int)tb, m, n, k, alpha, beta, pad, bad);
  dev_free(dA), dev_free(dB), dev_free(dC);
  free(A), free(B), free(C), free(out);
}

static void test_gemm(void **state) {
  (void)state;
  cublasHandle_t h = NULL;
  cudaStream_t s = NULL;
  CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS && h);
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS);
  static const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {16, 9, 11}, {3, 8, 1},
                                  {4, 5, 0}, {0, 3, 2}, {3, 0, 2},   {33, 17, 40}};
  static const double scal[][2] = {{1, 0}, {0.5, 2}, {-1.5, 1}, {0, 0.5}, {0, 0}};
  uint64_t seed = 1;
  for (int single = 0; single < 2; single++)
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
          for (size_t sc = 0; sc < sizeof scal / sizeof scal[0]; sc++)
            gemm_case(h, single, ops[a], ops[b], shapes[sh][0], shapes[sh][1], shapes[sh][2],
                      scal[sc][0], scal[sc][1], (int)(sh + sc) % 3, &seed);

  /* argument checks, in cuBLAS's terms */
  double one = 1, zero = 0, host[64] = {0};
  double *A = dev_from(NULL, 64 * sizeof(double)), *B = dev_from(NULL, 64 * sizeof(double));
  double *C = dev_from(NULL, 64 * sizeof(double)), *dalpha = dev_from(&one, sizeof one);
  const cublasStatus_t inval = CUBLAS_STATUS_INVALID_VALUE;
  cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  CHECK(cublasDgemm(h, N, N, 4, 4, 4, &one, A, 4, B, 4, &zero, C, 4) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasDgemm(h, N, N, -1, 4, 4, &one, A, 4, B, 4, &zero, C, 4) == inval);
  CHECK(cublasDgemm(h, N, N, 4, -1, 4, &one, A, 4, B, 4, &zero, C, 4) == inval);
  CHECK(cublasDgemm(h, N, N, 4, 4, -1, &one, A, 4, B, 4, &zero, C, 4) == inval);
  CHECK(cublasDgemm(h, (cublasOperation_t)3, N, 4, 4, 4, &one, A, 4, B, 4, &zero, C, 4) == inval);
  CHECK(cublasDgemm(h, N, (cublasOperation_t)-1, 4, 4, 4, &one, A, 4, B, 4, &zero, C, 4) == inval);
  CHECK(cublasDgemm(h, N, N, 4, 4, 2, &one, A, 3, B, 2, &zero, C, 4) == inval); /* lda < m */
  CHECK(cublasDgemm(h, T, N, 4, 4, 2, &one, A, 2, B, 2, &zero, C, 4) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasDgemm(h, T, N, 4, 4, 3, &one, A, 2, B, 3, &zero, C, 4) == inval); /* lda < k */
  CHECK(cublasDgemm(h, N, N, 4, 4, 3, &one, A, 4, B, 2, &zero, C, 4) == inval); /* ldb < k */
  CHECK(cublasDgemm(h, N, T, 4, 5, 3, &one, A, 4, B, 4, &zero, C, 4) == inval); /* ldb < n */
  CHECK(cublasDgemm(h, N, N, 4, 4, 4, &one, A, 4, B, 4, &zero, C, 3) == inval); /* ldc < m */
  CHECK(cublasDgemm(h, N, N, 0, 4, 4, &one, A, 1, B, 4, &zero, C, 0) == inval); /* ldc < 1 */
  CHECK(cublasDgemm(h, N, N, 4, 4, 4, NULL, A, 4, B, 4, &zero, C, 4) == inval);
  CHECK(cublasDgemm(h, N, N, 4, 4, 4, &one, A, 4, B, 4, NULL, C, 4) == inval);
  CHECK(cublasDgemm(h, N, N, 4, 4, 4, dalpha, A, 4, B, 4, &zero, C, 4) == inval);
  /* host operands, and operands larger than their allocation */
  CHECK(cublasDgemm(h, N, N, 4, 4, 4, &one, host, 4, B, 4, &zero, C, 4) == inval);
  CHECK(cublasDgemm(h, N, N, 4, 4, 4, &one, A, 4, host, 4, &zero, C, 4) == inval);
  CHECK(cublasDgemm(h, N, N, 4, 4, 4, &one, A, 4, B, 4, &zero, host, 4) == inval);
  CHECK(cublasDgemm(h, N, N, 8, 8, 8, &one, A, 8, B, 8, &zero, C, 9) == inval);
  CHECK(cublasDgemm(h, N, N, 8, 8, 8, &one, A, 8, B, 8, &zero, C, 8) == CUBLAS_STATUS_SUCCESS);
  /* empty products touch nothing; k = 0 only scales C */
  CHECK(cublasDgemm(h, N, N, 0, 4, 4, &one, NULL, 1, NULL, 4, &zero, NULL, 1) ==
        CUBLAS_STATUS_SUCCESS);
  CHECK(cublasDgemm(h, N, N, 4, 0, 4, &one, NULL, 4, NULL, 4, &zero, NULL, 4) ==
        CUBLAS_STATUS_SUCCESS);
  CHECK(cublasDgemm(h, N, N, 4, 4, 0, &one, NULL, 4, NULL, 1, &zero, C, 4) ==
        CUBLAS_STATUS_SUCCESS);
  float fone = 1, fzero = 0;
  CHECK(cublasSgemm(h, N, N, 4, 4, 4, &fone, (float *)A, 3, (float *)B, 4, &fzero, (float *)C, 4) ==
        inval);
  CHECK(cublasSgemm(h, N, N, 4, 4, 4, &fone, (float *)host, 4, (float *)B, 4, &fzero, (float *)C,
                    4) == inval);

  /* handles and streams */
  CHECK(cublasDgemm(NULL, N, N, 4, 4, 4, &one, A, 4, B, 4, &zero, C, 4) ==
        CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(cublasSetStream(h, (cudaStream_t)&s) == inval);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  CHECK(cublasDgemm(h, N, N, 4, 4, 4, &one, A, 4, B, 4, &zero, C, 4) == inval);
  CHECK(cublasSetStream(h, NULL) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasDgemm(h, N, N, 4, 4, 4, &one, A, 4, B, 4, &zero, C, 4) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasCreate(NULL) == inval);
  CHECK(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasDestroy(h) == CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(cublasSetStream(h, NULL) == CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(cublasDgemm(h, N, N, 4, 4, 4, &one, A, 4, B, 4, &zero, C, 4) ==
        CUBLAS_STATUS_NOT_INITIALIZED);
  dev_free(A), dev_free(B), dev_free(C), dev_free(dalpha);
  expect_all_left("after gemm");
  all_ok();
}

/* element e of a vector of len elements with stride inc, the BLAS way */
static size_t vat(int e, int len, int inc) {
  return inc > 0 ? (size_t)e * (size_t)inc : (size_t)(len - 1 - e) * (size_t)-inc;
}

static void gemv_case(cublasHandle_t h, bool single, cublasOperation_t tr, int m, int n,
                      double alpha, double beta, int incx, int incy, int pad, uint64_t *seed) {
  size_t el = single ? sizeof(float) : sizeof(double);
  int lda = (m > 1 ? m : 1) + pad;
  int xl = tr == CUBLAS_OP_N ? n : m, yl = tr == CUBLAS_OP_N ? m : n;
  size_t na = span(m, n, lda, 1), nx = vspan(xl, incx, 1), ny = vspan(yl, incy, 1);
  double *A = calloc(na + 1, sizeof *A), *x = calloc(nx + 1, sizeof *x);
  double *y = calloc(ny + 1, sizeof *y), *out = calloc(ny + 1, sizeof *out);
  for (size_t i = 0; i < na; i++)
    A[i] = rounded(unit(seed), single);
  for (size_t i = 0; i < nx; i++)
    x[i] = rounded(unit(seed), single);
  for (size_t i = 0; i < ny; i++)
    y[i] = beta == 0 ? nan_value() : rounded(unit(seed), single);
  void *dA = dev_matrix(A, na, single, na * el), *dx = dev_matrix(x, nx, single, nx * el);
  void *dy = dev_matrix(y, ny, single, ny * el);
  cublasStatus_t st;
  if (single) {
    float fa = (float)alpha, fb = (float)beta;
    st = cublasSgemv(h, tr, m, n, &fa, dA, lda, dx, incx, &fb, dy, incy);
  } else {
    st = cublasDgemv(h, tr, m, n, &alpha, dA, lda, dx, incx, &beta, dy, incy);
  }
  CHECKF(st == CUBLAS_STATUS_SUCCESS, "gemv status %d", (int)st);
  host_matrix(out, dy, ny, single);
  /* untouched unless the product has both dimensions (BLAS returns at once otherwise) */
  double *want = calloc(ny + 1, sizeof *want);
  memcpy(want, y, ny * sizeof *y);
  if (m > 0 && n > 0)
    for (int i = 0; i < yl; i++) {
      double s = 0;
      for (int p = 0; p < xl; p++) {
        double a = tr == CUBLAS_OP_N ? A[i + (size_t)p * lda] : A[p + (size_t)i * lda];
        s += a * x[vat(p, xl, incx)];
      }
      size_t at = vat(i, yl, incy);
      want[at] = alpha * s + (beta == 0 ? 0 : beta * y[at]);
    }
  double tol = (single ? 1e-5 : 1e-13) * (xl + 2) * (absd(alpha) + absd(beta) + 1);
  int bad = 0;
  for (size_t i = 0; i < ny; i++)
    bad += is_nan(want[i]) ? !is_nan(out[i]) : !(absd(out[i] - want[i]) <= tol);
  CHECKF(bad == 0, "%cgemv tr %d m %d n %d alpha %g beta %g incx %d incy %d: %d wrong",
         single ? 'S' : 'D', (int)tr, m, n, alpha, beta, incx, incy, bad);
  dev_free(dA), dev_free(dx), dev_free(dy);
  free(A), free(x), free(y), free(out), free(want);
}

static void test_gemv(void **state) {
  (void)state;
  cublasHandle_t h = NULL;
  CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
  static const int shapes[][2] = {{1, 1}, {5, 7}, {9, 4}, {20, 33}, {0, 3}, {3, 0}};
  static const double scal[][2] = {{1, 0}, {0.5, 2}, {-1.5, 1}, {0, 0.5}};
  static const int incs[] = {1, 2, -1, -3};
  uint64_t seed = 2;
  for (int single = 0; single < 2; single++)
    for (int t = 0; t < 3; t++)
      for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (size_t sc = 0; sc < sizeof scal / sizeof scal[0]; sc++)
          for (int ix = 0; ix < 4; ix++)
            for (int iy = 0; iy < 4; iy++)
              gemv_case(h, single, ops[t], shapes[sh][0], shapes[sh][1], scal[sc][0], scal[sc][1],
                        incs[ix], incs[iy], (int)(sc + (size_t)ix) % 2, &seed);

  double one = 1, zero = 0, host[16] = {0};
  double *A = dev_from(NULL, 16 * sizeof(double)), *x = dev_from(NULL, 4 * sizeof(double));
  double *y = dev_from(NULL, 4 * sizeof(double));
  const cublasStatus_t inval = CUBLAS_STATUS_INVALID_VALUE, ok = CUBLAS_STATUS_SUCCESS;
  cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  CHECK(cublasDgemv(h, N, 4, 4, &one, A, 4, x, 1, &zero, y, 1) == ok);
  CHECK(cublasDgemv(h, N, -1, 4, &one, A, 4, x, 1, &zero, y, 1) == inval);
  CHECK(cublasDgemv(h, N, 4, -1, &one, A, 4, x, 1, &zero, y, 1) == inval);
  CHECK(cublasDgemv(h, (cublasOperation_t)5, 4, 4, &one, A, 4, x, 1, &zero, y, 1) == inval);
  CHECK(cublasDgemv(h, N, 4, 4, &one, A, 3, x, 1, &zero, y, 1) == inval);
  CHECK(cublasDgemv(h, T, 4, 4, &one, A, 3, x, 1, &zero, y, 1) == inval);
  CHECK(cublasDgemv(h, N, 0, 4, &one, A, 0, x, 1, &zero, y, 1) == inval);
  CHECK(cublasDgemv(h, N, 4, 4, &one, A, 4, x, 0, &zero, y, 1) == inval);
  CHECK(cublasDgemv(h, N, 4, 4, &one, A, 4, x, 1, &zero, y, 0) == inval);
  CHECK(cublasDgemv(h, N, 4, 4, NULL, A, 4, x, 1, &zero, y, 1) == inval);
  CHECK(cublasDgemv(h, N, 4, 4, &one, A, 4, x, 1, NULL, y, 1) == inval);
  CHECK(cublasDgemv(h, N, 4, 4, &one, host, 4, x, 1, &zero, y, 1) == inval);
  CHECK(cublasDgemv(h, N, 4, 4, &one, A, 4, host, 1, &zero, y, 1) == inval);
  CHECK(cublasDgemv(h, N, 4, 4, &one, A, 4, x, 1, &zero, host, 1) == inval);
  CHECK(cublasDgemv(h, N, 4, 4, &one, A, 4, x, -2, &zero, y, 1) == inval); /* x too short */
  CHECK(cublasDgemv(h, T, 2, 4, &one, A, 4, x, 2, &zero, y, 1) == ok);
  CHECK(cublasDgemv(h, T, 2, 4, &one, A, 4, x, 4, &zero, y, 1) == inval);
  CHECK(cublasDgemv(h, N, 4, 4, &one, A, 5, x, 1, &zero, y, 1) == inval); /* A too short */
  CHECK(cublasDgemv(h, N, 0, 4, &one, NULL, 1, NULL, 1, &zero, NULL, 1) == ok);
  float fone = 1, fzero = 0;
  CHECK(cublasSgemv(h, N, 4, 4, &fone, (float *)A, 4, (float *)x, 1, &fzero, (float *)y, 1) == ok);
  CHECK(cublasSgemv(h, N, 4, 4, &fone, (float *)A, 4, (float *)x, 0, &fzero, (float *)y, 1) ==
        inval);
  CHECK(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasDgemv(h, N, 4, 4, &one, A, 4, x, 1, &zero, y, 1) == CUBLAS_STATUS_NOT_INITIALIZED);
  dev_free(A), dev_free(x), dev_free(y);
  expect_all_left("after gemv");
  all_ok();
}

/* ---- NCCL -------------------------------------------------------------------------------------
 */
/* A communicator over mc, the way the device runtime makes them: an id from rank 0, then
 * cuemu_use_comm right before ncclCommInitRank. */
static ncclComm_t make_comm(MPI_Comm mc) {
  int r, n;
  MPI_Comm_rank(mc, &r);
  MPI_Comm_size(mc, &n);
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (r == 0)
    CHECK(ncclGetUniqueId(&id) == ncclSuccess);
  MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mc);
  ncclComm_t c = NULL;
  cuemu_use_comm(mc);
  CHECK(ncclCommInitRank(&c, n, id, r) == ncclSuccess && c);
  return c;
}

static void test_nccl_init(void **state) {
  (void)state;
  ncclUniqueId id, id2, zero;
  memset(&id, 0, sizeof id);
  memset(&zero, 0, sizeof zero);
  CHECK(ncclGetUniqueId(&id) == ncclSuccess);
  CHECK(ncclGetUniqueId(&id2) == ncclSuccess && memcmp(&id, &id2, sizeof id) != 0);
  CHECK(ncclGetUniqueId(NULL) == ncclInvalidArgument);
  MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t c = NULL;

  /* each ncclCommInitRank needs its own cuemu_use_comm first (a local failure) */
  CHECK(ncclCommInitRank(&c, g_size, id, g_rank) == ncclInvalidUsage && c == NULL);
  cuemu_use_comm(MPI_COMM_NULL);
  CHECK(ncclCommInitRank(&c, g_size, id, g_rank) == ncclInvalidUsage);
  cuemu_use_comm(MPI_COMM_WORLD);
  CHECK(ncclCommInitRank(NULL, g_size, id, g_rank) == ncclInvalidArgument);
  /* ... and it was not consumed by a call that failed before using it */
  CHECK(ncclCommInitRank(&c, g_size, id, g_rank) == ncclSuccess && c);
  CHECK(ncclCommDestroy(c) == ncclSuccess);
  c = NULL;

  /* bad arguments anywhere fail the call on every rank */
  cuemu_use_comm(MPI_COMM_WORLD);
  CHECK(ncclCommInitRank(&c, g_size, id, g_rank) == ncclInvalidUsage && c == NULL); /* reused */
  CHECK(ncclGetUniqueId(&id) == ncclSuccess);
  MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  cuemu_use_comm(MPI_COMM_WORLD);
  CHECK(ncclCommInitRank(&c, g_size + 1, id, g_rank) == ncclInvalidArgument && c == NULL);
  cuemu_use_comm(MPI_COMM_WORLD);
  CHECK(ncclCommInitRank(&c, g_size, id, g_rank == g_size - 1 ? 0 : g_rank) ==
        (g_size == 1 ? ncclSuccess : ncclInvalidArgument));
  if (g_size == 1) { /* nothing was wrong: start over with a fresh id */
    CHECK(ncclCommDestroy(c) == ncclSuccess);
    c = NULL;
    CHECK(ncclGetUniqueId(&id) == ncclSuccess);
  }
  cuemu_use_comm(MPI_COMM_WORLD);
  CHECK(ncclCommInitRank(&c, g_size, zero, g_rank) == ncclInvalidArgument);
  /* every rank must pass the id of rank 0 */
  ncclUniqueId mine = id;
  if (g_rank > 0)
    CHECK(ncclGetUniqueId(&mine) == ncclSuccess);
  cuemu_use_comm(MPI_COMM_WORLD);
  CHECK(ncclCommInitRank(&c, g_size, mine, g_rank) ==
        (g_size == 1 ? ncclSuccess : ncclInvalidArgument));
  if (g_size > 1) {
    cuemu_use_comm(MPI_COMM_WORLD);
    CHECK(ncclCommInitRank(&c, g_size, id, g_rank) == ncclSuccess);
  }

  /* a communicator over a sub-communicator, ranked by it */
  MPI_Comm sub;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_size - g_rank, &sub);
  ncclComm_t cs = make_comm(sub);

  CHECK(ncclCommDestroy(cs) == ncclSuccess);
  CHECK(ncclCommDestroy(c) == ncclSuccess);
  CHECK(ncclCommDestroy(c) == ncclInvalidArgument);
  CHECK(ncclCommDestroy(NULL) == ncclSuccess);
  int v = 0, *d = dev_from(&v, sizeof v);
  CHECK(ncclAllReduce(d, d, 1, ncclInt32, ncclSum, c, NULL) == ncclInvalidArgument);
  CHECK(ncclSend(d, 1, ncclInt32, 0, c, NULL) == ncclInvalidArgument);
  dev_free(d);
  MPI_Comm_free(&sub);
  all_ok();
}

/* Typed elements as doubles (float16 as its raw 16 bits, which only moves). */
static const ncclDataType_t all_types[] = {ncclInt8,    ncclUint8,   ncclInt32,
                                           ncclUint32,  ncclInt64,   ncclUint64,
                                           ncclFloat16, ncclFloat32, ncclFloat64};
static size_t tsize(ncclDataType_t t) {
  switch (t) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  default:
    return 8;
  }
}
static double get_el(ncclDataType_t t, const void *p, size_t i) {
  switch (t) {
  case ncclInt8:
    return ((const int8_t *)p)[i];
  case ncclUint8:
    return ((const uint8_t *)p)[i];
  case ncclFloat16:
    return ((const uint16_t *)p)[i];
  case ncclInt32:
    return ((const int32_t *)p)[i];
  case ncclUint32:
    return ((const uint32_t *)p)[i];
  case ncclFloat32:
    return ((const float *)p)[i];
  case ncclInt64:
    return (double)((const int64_t *)p)[i];
  case ncclUint64:
    return (double)((const uint64_t *)p)[i];
  case ncclFloat64:
    return ((const double *)p)[i];
  }
  return 0;
}
static void set_el(ncclDataType_t t, void *p, size_t i, double v) {
  switch (t) {
  case ncclInt8:
    ((int8_t *)p)[i] = (int8_t)v;
    break;
  case ncclUint8:
    ((uint8_t *)p)[i] = (uint8_t)v;
    break;
  case ncclFloat16:
    ((uint16_t *)p)[i] = (uint16_t)v;
    break;
  case ncclInt32:
    ((int32_t *)p)[i] = (int32_t)v;
    break;
  case ncclUint32:
    ((uint32_t *)p)[i] = (uint32_t)v;
    break;
  case ncclFloat32:
    ((float *)p)[i] = (float)v;
    break;
  case ncclInt64:
    ((int64_t *)p)[i] = (int64_t)v;
    break;
  case ncclUint64:
    ((uint64_t *)p)[i] = (uint64_t)v;
    break;
  case ncclFloat64:
    ((double *)p)[i] = v;
    break;
  }
}

/* what rank q contributes at element i (small, so every type and every product is exact) */
static double contrib(ncclRedOp_t op, int q, size_t i) {
  return op == ncclProd ? 1 + (double)((q + (int)i) % 2) : 1 + (double)((q * 7 + (int)i * 3) % 5);
}
static double combine(ncclRedOp_t op, double a, double b) {
  switch (op) {
  case ncclSum:
    return a + b;
  case ncclProd:
    return a * b;
  case ncclMax:
    return a > b ? a : b;
  case ncclMin:
    return a < b ? a : b;
  }
  return 0;
}

/* Host buffer of count elements of t filled by f(i); a device copy of it in *dev. */
static void *filled(ncclDataType_t t, size_t count, double (*f)(size_t, const void *),
                    const void *arg, void **dev) {
  void *h = malloc(count * tsize(t) + 1);
  for (size_t i = 0; i < count; i++)
    set_el(t, h, i, f(i, arg));
  *dev = dev_from(h, count * tsize(t));
  return h;
}

typedef struct {
  int a, b;
  ncclRedOp_t op;
} pattern_arg;
static double pat_bcast(size_t i, const void *arg) { /* data of root a; 7 bits for int8 */
  const pattern_arg *p = arg;
  return (double)((p->a * 31 + (int)i * 5 + p->b) % 100);
}
static double pat_poison(size_t i, const void *arg) {
  (void)i, (void)arg;
  return 101;
}
static double pat_contrib(size_t i, const void *arg) {
  const pattern_arg *p = arg;
  return contrib(p->op, p->a, i);
}

/* Broadcast, reduce and all-reduce on a communicator: every root, type, operation, in place
 * and out of place, alone and inside one group. */
static void collectives_on(MPI_Comm mc, ncclComm_t c, cudaStream_t s, const char *where) {
  int r, n;
  MPI_Comm_rank(mc, &r);
  MPI_Comm_size(mc, &n);
  static const size_t counts[] = {0, 1, 37};
  static const ncclRedOp_t rops[] = {ncclSum, ncclProd, ncclMax, ncclMin};
  for (size_t ti = 0; ti < sizeof all_types / sizeof all_types[0]; ti++) {
    ncclDataType_t t = all_types[ti];
    for (size_t ci = 0; ci < 3; ci++) {
      size_t count = counts[ci], bytes = count * tsize(t);
      void *back = malloc(bytes + 1);
      /* broadcast, in place and out of place (non-roots pass no sendbuff) */
      for (int root = 0; root < n; root++)
        for (int inplace = 0; inplace < 2; inplace++) {
          pattern_arg pa = {root, (int)ti, ncclSum};
          void *dsend = NULL, *drecv = NULL;
          void *hs = filled(t, count, r == root ? pat_bcast : pat_poison, &pa, &dsend);
          void *hr = filled(t, count, pat_poison, NULL, &drecv);
          const void *sb = inplace ? drecv : r == root ? dsend : NULL;
          if (inplace)
            CHECK(cudaMemcpy(drecv, dsend, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess);
          CHECKF(ncclBroadcast(sb, drecv, count, t, root, c, s) == ncclSuccess,
                 "%s: broadcast type %d count %zu root %d", where, (int)t, count, root);
          to_host(back, drecv, bytes);
          int bad = 0;
          for (size_t i = 0; i < count; i++)
            bad += get_el(t, back, i) != pat_bcast(i, &pa);
          CHECKF(bad == 0, "%s: broadcast type %d count %zu root %d in place %d: %d wrong", where,
                 (int)t, count, root, inplace, bad);
          dev_free(dsend), dev_free(drecv), free(hs), free(hr);
        }
      if (t == ncclFloat16) { /* no reductions of half precision */
        free(back);
        continue;
      }
      for (int oi = 0; oi < 4; oi++) {
        ncclRedOp_t op = rops[oi];
        pattern_arg pa = {r, 0, op};
        for (int root = -1; root < n; root++) /* -1: all-reduce */
          for (int inplace = 0; inplace < 2; inplace++) {
            void *dsend = NULL, *drecv = NULL;
            void *hs = filled(t, count, pat_contrib, &pa, &dsend);
            void *hr = filled(t, count, pat_poison, NULL, &drecv);
            bool gets = root < 0 || root == r;
            void *rb = inplace ? dsend : gets ? drecv : NULL;
            ncclResult_t res = root < 0 ? ncclAllReduce(dsend, rb, count, t, op, c, s)
                                        : ncclReduce(dsend, rb, count, t, op, root, c, s);
            CHECKF(res == ncclSuccess, "%s: reduce type %d op %d root %d: %d", where, (int)t,
                   (int)op, root, (int)res);
            to_host(back, inplace ? dsend : drecv, bytes);
            int bad = 0;
            for (size_t i = 0; i < count; i++) {
              double want = contrib(op, 0, i);
              for (int q = 1; q < n; q++)
                want = combine(op, want, contrib(op, q, i));
              /* ranks that get no result keep their buffers */
              if (!gets)
                want = inplace ? contrib(op, r, i) : 101;
              bad += get_el(t, back, i) != want;
            }
            CHECKF(bad == 0, "%s: reduce type %d op %d count %zu root %d in place %d: %d wrong",
                   where, (int)t, (int)op, count, root, inplace, bad);
            dev_free(dsend), dev_free(drecv), free(hs), free(hr);
          }
      }
      free(back);
    }
  }

  /* several collectives in one (nested) group: complete when it ends */
  enum { CNT = 11 };
  double *bufs[4], host[CNT];
  for (int b = 0; b < 4; b++) {
    for (int i = 0; i < CNT; i++)
      host[i] = r * 100 + b * 10 + i;
    bufs[b] = dev_from(host, sizeof host);
  }
  CHECK(ncclGroupStart() == ncclSuccess);
  CHECK(ncclBroadcast(bufs[0], bufs[0], CNT, ncclDouble, 0, c, s) == ncclSuccess);
  CHECK(ncclGroupStart() == ncclSuccess);
  CHECK(ncclBroadcast(bufs[1], bufs[1], CNT, ncclDouble, n - 1, c, s) == ncclSuccess);
  CHECK(ncclAllReduce(bufs[2], bufs[2], CNT, ncclDouble, ncclSum, c, s) == ncclSuccess);
  CHECK(ncclGroupEnd() == ncclSuccess);
  CHECK(ncclReduce(bufs[3], bufs[3], CNT, ncclDouble, ncclMax, n / 2, c, s) == ncclSuccess);
  CHECK(ncclGroupEnd() == ncclSuccess);
  for (int b = 0; b < 4; b++) {
    to_host(host, bufs[b], sizeof host);
    for (int i = 0; i < CNT; i++) {
      double want = b == 0       ? 0 * 100 + i
                    : b == 1     ? (n - 1) * 100 + 10 + i
                    : b == 2     ? 100.0 * n * (n - 1) / 2 + n * (20 + i)
                    : r == n / 2 ? (n - 1) * 100 + 30 + i
                                 : r * 100 + 30 + i;
      CHECKF(host[i] == want, "%s: group buffer %d element %d: %g, expected %g", where, b, i,
             host[i], want);
    }
    dev_free(bufs[b]);
  }
}

/* Sends and receives on a communicator: all pairs (self included) with two messages per pair
 * that must match in order, in nested groups; a ring outside groups; size mismatches. */
static double pat_p2p(size_t i, const void *arg) {
  const pattern_arg *p = arg; /* a sends to b, message i0 = op */
  return (double)((p->a * 13 + p->b * 7 + (int)p->op * 3 + (int)i) % 120);
}

static void p2p_on(MPI_Comm mc, ncclComm_t c, cudaStream_t s, const char *where) {
  int r, n;
  MPI_Comm_rank(mc, &r);
  MPI_Comm_size(mc, &n);
  const ncclDataType_t t = ncclInt32;
  /* message m from a to b has 3 + 5a + 2b + 7m elements */
#define P2P_LEN(a, b, m) ((size_t)(3 + 5 * (a) + 2 * (b) + 7 * (m)))
  void **sendd = calloc((size_t)(2 * n), sizeof *sendd),
       **recvd = calloc((size_t)(2 * n), sizeof *recvd);
  void **hosts = calloc((size_t)(4 * n), sizeof *hosts);
  for (int q = 0; q < n; q++)
    for (int m = 0; m < 2; m++) {
      pattern_arg to = {r, q, (ncclRedOp_t)m};
      hosts[4 * q + m] = filled(t, P2P_LEN(r, q, m), pat_p2p, &to, &sendd[2 * q + m]);
      hosts[4 * q + 2 + m] = filled(t, P2P_LEN(q, r, m), pat_poison, NULL, &recvd[2 * q + m]);
    }
  /* the receives in an inner group, the sends after it: only the outer end may wait, or
   * every rank would wait for sends that nobody has issued (a hang, as with NCCL) */
  CHECK(ncclGroupStart() == ncclSuccess);
  CHECK(ncclGroupStart() == ncclSuccess);
  for (int q = 0; q < n; q++)
    for (int m = 0; m < 2; m++)
      CHECK(ncclRecv(recvd[2 * q + m], P2P_LEN(q, r, m), t, q, c, s) == ncclSuccess);
  CHECK(ncclGroupEnd() == ncclSuccess);
  for (int k = 0; k < n; k++) {
    int q = (r + k) % n;
    for (int m = 0; m < 2; m++)
      CHECK(ncclSend(sendd[2 * q + m], P2P_LEN(r, q, m), t, q, c, s) == ncclSuccess);
  }
  CHECK(ncclGroupEnd() == ncclSuccess);
  for (int q = 0; q < n; q++)
    for (int m = 0; m < 2; m++) {
      size_t len = P2P_LEN(q, r, m);
      int *got = malloc(len * sizeof *got);
      to_host(got, recvd[2 * q + m], len * sizeof *got);
      pattern_arg from = {q, r, (ncclRedOp_t)m};
      int bad = 0;
      for (size_t i = 0; i < len; i++)
        bad += got[i] != pat_p2p(i, &from);
      CHECKF(bad == 0, "%s: message %d from %d: %d wrong", where, m, q, bad);
      free(got);
    }
  for (int i = 0; i < 2 * n; i++)
    dev_free(sendd[i]), dev_free(recvd[i]);
  for (int i = 0; i < 4 * n; i++)
    free(hosts[i]);
  free(sendd), free(recvd), free(hosts);
#undef P2P_LEN

  /* a ring shift outside groups, each call its own group: even ranks send first */
  if (n > 1) {
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    int64_t out[5], in[5];
    for (int i = 0; i < 5; i++)
      out[i] = 1000 * r + i, in[i] = -1;
    void *dout = dev_from(out, sizeof out), *din = dev_from(in, sizeof in);
    for (int phase = 0; phase < 2; phase++)
      if ((phase == 0) == (r % 2 == 0))
        CHECK(ncclSend(dout, 5, ncclInt64, next, c, s) == ncclSuccess);
      else
        CHECK(ncclRecv(din, 5, ncclInt64, prev, c, s) == ncclSuccess);
    to_host(in, din, sizeof in);
    for (int i = 0; i < 5; i++)
      CHECK(in[i] == 1000 * prev + i);
    dev_free(dout), dev_free(din);
  }

  /* a receive that gets fewer bytes than it asked for is an error, on every rank here */
  float fsend[9] = {0}, frecv[9];
  void *ds = dev_from(fsend, sizeof fsend), *dr = dev_from(frecv, sizeof frecv);
  CHECK(ncclGroupStart() == ncclSuccess);
  CHECK(ncclSend(ds, 8, ncclFloat, (r + 1) % n, c, s) == ncclSuccess);
  CHECK(ncclRecv(dr, 9, ncclFloat, (r + n - 1) % n, c, s) == ncclSuccess);
  CHECKF(ncclGroupEnd() == ncclInvalidUsage, "%s: short receive not reported", where);
  /* and so is a message longer than its receive */
  CHECK(ncclGroupStart() == ncclSuccess);
  CHECK(ncclSend(ds, 9, ncclFloat, (r + 1) % n, c, s) == ncclSuccess);
  CHECK(ncclRecv(dr, 8, ncclFloat, (r + n - 1) % n, c, s) == ncclSuccess);
  CHECKF(ncclGroupEnd() == ncclInvalidUsage, "%s: truncated receive not reported", where);
  /* half precision moves (it only lacks reductions) */
  CHECK(ncclGroupStart() == ncclSuccess);
  CHECK(ncclSend(ds, 18, ncclHalf, r, c, s) == ncclSuccess);
  CHECK(ncclRecv(dr, 18, ncclFloat16, r, c, s) == ncclSuccess);
  CHECK(ncclGroupEnd() == ncclSuccess);
  dev_free(ds), dev_free(dr);
}

static void test_nccl_collectives(void **state) {
  (void)state;
  saved_env max = env_save("CUEMU_MPI_MAX_COUNT");
  cudaStream_t s = NULL;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  MPI_Comm sub;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_size - g_rank, &sub);
  for (int small = 0; small < 2; small++) {
    /* a small MPI count limit splits every transfer above into pieces */
    if (small)
      setenv("CUEMU_MPI_MAX_COUNT", "3", 1);
    ncclComm_t cw = make_comm(MPI_COMM_WORLD), cs = make_comm(sub);
    collectives_on(MPI_COMM_WORLD, cw, small ? s : NULL, small ? "world, pieces" : "world");
    collectives_on(sub, cs, s, small ? "sub, pieces" : "sub");
    CHECK(ncclCommDestroy(cw) == ncclSuccess && ncclCommDestroy(cs) == ncclSuccess);
    env_restore(max);
    max = env_save("CUEMU_MPI_MAX_COUNT");
  }
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  MPI_Comm_free(&sub);
  env_restore(max);
  expect_all_left("after the collectives");
  all_ok();
}

static void test_nccl_p2p(void **state) {
  (void)state;
  saved_env max = env_save("CUEMU_MPI_MAX_COUNT");
  cudaStream_t s = NULL;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  MPI_Comm sub;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_size - g_rank, &sub);
  for (int small = 0; small < 2; small++) {
    /* 7 bytes per MPI count: messages become one derived-type element each (with and without
     * a remainder), and must still pair up and be measured exactly */
    if (small)
      setenv("CUEMU_MPI_MAX_COUNT", "7", 1);
    ncclComm_t cw = make_comm(MPI_COMM_WORLD), cs = make_comm(sub);
    p2p_on(MPI_COMM_WORLD, cw, s, small ? "world, pieces" : "world");
    p2p_on(sub, cs, NULL, small ? "sub, pieces" : "sub");
    CHECK(ncclCommDestroy(cw) == ncclSuccess && ncclCommDestroy(cs) == ncclSuccess);
    env_restore(max);
    max = env_save("CUEMU_MPI_MAX_COUNT");
  }
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  MPI_Comm_free(&sub);
  env_restore(max);
  expect_all_left("after sends and receives");
  all_ok();
}

/* Calls that are refused before anything is posted: the same on every rank. */
static void test_nccl_errors(void **state) {
  (void)state;
  ncclComm_t c = make_comm(MPI_COMM_WORLD);
  double h[8] = {0};
  double *d = dev_from(h, sizeof h);
  cudaStream_t bad = (cudaStream_t)h;
  const ncclResult_t inval = ncclInvalidArgument;
  CHECK(ncclSend(d, 1, ncclDouble, g_size, c, NULL) == inval);
  CHECK(ncclRecv(d, 1, ncclDouble, -1, c, NULL) == inval);
  CHECK(ncclSend(d, 1, (ncclDataType_t)42, 0, c, NULL) == inval);
  CHECK(ncclSend(h, 1, ncclDouble, 0, c, NULL) == inval); /* host memory */
  CHECK(ncclRecv(d, 9, ncclDouble, 0, c, NULL) == inval); /* past the allocation */
  CHECK(ncclSend(d, SIZE_MAX / 2, ncclDouble, 0, c, NULL) == inval);
  CHECK(ncclSend(d, 1, ncclDouble, 0, NULL, NULL) == inval);
  CHECK(ncclSend(d, 1, ncclDouble, 0, (ncclComm_t)h, NULL) == inval);
  CHECK(ncclSend(d, 1, ncclDouble, 0, c, bad) == ncclUnhandledCudaError);
  CHECK(ncclBroadcast(d, d, 1, ncclDouble, g_size, c, NULL) == inval);
  CHECK(ncclBroadcast(d, d, 1, ncclDouble, 0, c, bad) == ncclUnhandledCudaError);
  CHECK(ncclReduce(d, d, 1, ncclHalf, ncclSum, 0, c, NULL) == inval);
  CHECK(ncclReduce(d, d, 1, ncclDouble, (ncclRedOp_t)9, 0, c, NULL) == inval);
  CHECK(ncclReduce(d, d, 1, ncclDouble, ncclSum, -1, c, NULL) == inval);
  CHECK(ncclReduce(h, d, 1, ncclDouble, ncclSum, 0, c, NULL) == inval);
  CHECK(ncclAllReduce(d, h, 1, ncclDouble, ncclSum, c, NULL) == inval);
  CHECK(ncclAllReduce(d, d, 1, ncclHalf, ncclSum, c, NULL) == inval);
  /* nothing to move: any buffer will do */
  CHECK(ncclAllReduce(NULL, NULL, 0, ncclDouble, ncclSum, c, NULL) == ncclSuccess);
  CHECK(ncclBroadcast(NULL, NULL, 0, ncclDouble, 0, c, NULL) == ncclSuccess);

  /* groups: an end without a start; a failure inside a group is also the group's result */
  CHECK(ncclGroupEnd() == ncclInvalidUsage);
  CHECK(ncclGroupStart() == ncclSuccess);
  CHECK(ncclSend(h, 1, ncclDouble, 0, c, NULL) == inval);
  CHECK(ncclGroupEnd() == inval);
  CHECK(ncclGroupStart() == ncclSuccess && ncclGroupEnd() == ncclSuccess);
  /* a communicator with work in an open group cannot go */
  CHECK(ncclGroupStart() == ncclSuccess);
  CHECK(ncclRecv(d + 4, 4, ncclDouble, g_rank, c, NULL) == ncclSuccess);
  CHECK(ncclCommDestroy(c) == ncclInvalidUsage);
  CHECK(ncclSend(d, 4, ncclDouble, g_rank, c, NULL) == ncclSuccess);
  CHECK(ncclGroupEnd() == ncclSuccess);
  CHECK(ncclCommDestroy(c) == ncclSuccess);
  dev_free(d);
  expect_all_left("after the NCCL errors");
  all_ok();
}

/* ---- the guard -------------------------------------------------------------------------------
 */
typedef struct {
  double *x;
  const double *y;
  int64_t n;
} guard_axpy_args;
DTL_KERNEL(guard_axpy, guard_axpy_args) {
  DTL_FOR_EACH(t, a.n) { a.x[t] += 2 * a.y[t]; }
}

/* a page of this process that no device allocation owns, closed */
static void touch_own_closed_page(void *arg) {
  (void)arg;
  void *p = mmap(NULL, 1, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p != MAP_FAILED)
    host_read(p);
}
static void send_segv(void *arg) {
  (void)arg;
  raise(SIGSEGV);
}
/* a launch whose argument struct lies in device memory: the host reads it, as on a GPU */
static void launch_from_device_args(void *arg) {
  const guard_axpy_args *da = arg;
  int rc = DTL_LAUNCH(guard_axpy, 1, NULL, *da);
  (void)rc;
}

/* Host code that dereferences device memory is stopped with a message; the emulated
 * functions, kernel launches and NCCL groups still reach it. */
static void test_guard(void **state) {
  (void)state;
  saved_env noguard = env_save("CUEMU_NO_GUARD");
  unsetenv("CUEMU_NO_GUARD");
  unsigned char host[64], back[64];
  for (int i = 0; i < 64; i++)
    host[i] = (unsigned char)(3 * i + 1);

  /* anywhere in the allocation's pages, the slack after its last byte included */
  unsigned char *d = dev_from(host, 64), *z = dev_from(NULL, 0), *a = NULL;
  CHECK(cudaMallocAsync((void **)&a, 100, NULL) == cudaSuccess && a);
  if (!d || !z || !a) {
    all_ok();
    return;
  }
  expect_guarded(d, 64, "start");
  expect_guarded(d + 63, 64, "last byte");
  expect_guarded(d + 64, 64, "past the end, same page");
  expect_guarded(z, 0, "zero bytes");
  expect_guarded(a + 50, 100, "cudaMallocAsync");

  /* faults elsewhere stay plain segfaults, and so does a SIGSEGV that is sent */
  child_end e = in_child(touch_own_closed_page, NULL);
  CHECKF(e.status == -SIGSEGV && !strstr(e.err, "cuemu:"), "own page: status %d, \"%s\"",
         e.status, e.err);
  e = in_child(send_segv, NULL);
  CHECKF(e.status == -SIGSEGV && !strstr(e.err, "cuemu:"), "raise: status %d, \"%s\"", e.status,
         e.err);

  /* the emulated functions still work on it, and leave it closed */
  CHECK(cudaMemsetAsync(d + 8, 0x21, 8, NULL) == cudaSuccess);
  CHECK(cudaMemcpy(a, d, 64, cudaMemcpyDeviceToDevice) == cudaSuccess);
  CHECK(cudaMemcpyAsync(a + 64, host, 36, cudaMemcpyDefault, NULL) == cudaSuccess);
  CHECK(cudaMemcpy(back, a, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int i = 0; i < 64; i++)
    CHECK(back[i] == (i >= 8 && i < 16 ? 0x21 : host[i]));
  expect_guarded(d + 9, 64, "after copies");
  expect_guarded(a + 99, 100, "after copies");

  /* enter and leave nest: open until the last leave, allocations made meanwhile too */
  cuemu_device_enter();
  d[0] = 200;
  cuemu_device_enter();
  unsigned char *b = dev_from(NULL, 16);
  cuemu_device_leave();
  d[1] = 201;
  if (b)
    b[0] = 202, b[15] = 203; /* still the fill elsewhere */
  cuemu_device_leave();
  expect_guarded(d + 1, 64, "after nested enters");
  if (b) {
    expect_guarded(b, 16, "allocated while open");
    CHECK(cudaMemcpy(back, b, 16, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(back[0] == 202 && back[1] == 0xff && back[15] == 203);
  }
  CHECK(cudaMemcpy(back, d, 2, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back[0] == 200 && back[1] == 201);
  dev_free(b);

  /* kernels run on open memory, their arguments are evaluated before it opens */
  enum { N = 700 }; /* across a page boundary */
  double hx[N], hy[N];
  for (int i = 0; i < N; i++)
    hx[i] = i, hy[i] = 0.5 * i;
  double *dx = dev_from(hx, sizeof hx), *dy = dev_from(hy, sizeof hy);
  guard_axpy_args args = {dx, dy, N};
  int rc = DTL_LAUNCH(guard_axpy, args.n, NULL, args);
  CHECK(rc == 0);
  rc = DTL_LAUNCH(guard_axpy, 0, NULL, args); /* nothing to do: not called */
  CHECK(rc == 0);
  to_host(hx, dx, sizeof hx);
  for (int i = 0; i < N; i++)
    CHECKF(hx[i] == 2.0 * i, "kernel: x[%d] = %g", i, hx[i]);
  expect_guarded((char *)(dx + N - 1), sizeof hx, "after a kernel");
  guard_axpy_args *dargs = dev_from(&args, sizeof args);
  if (dargs) { /* the struct may be read from any of its bytes first */
    char tail[64];
    snprintf(tail, sizeof tail, " (allocation of %zu bytes)\n", sizeof args);
    e = in_child(launch_from_device_args, dargs);
    CHECKF(e.status == 3 && strstr(e.err, "cuemu: host code touched device memory at 0x") &&
               strstr(e.err, tail),
           "launch with device arguments: status %d, \"%s\"", e.status, e.err);
  }
  dev_free(dargs);

  /* cuBLAS */
  cublasHandle_t h = NULL;
  CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
  double one = 1, zero = 0;
  CHECK(cublasDgemv(h, CUBLAS_OP_T, 7, 1, &one, dy, 7, dy, 1, &zero, dx, 1) ==
        CUBLAS_STATUS_SUCCESS); /* x[0] = sum of (0.5 i)^2 for i < 7 */
  to_host(hx, dx, sizeof(double));
  CHECKF(hx[0] == 22.75, "gemv on guarded memory: %g", hx[0]);
  CHECK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, dy, 2, dy, 2, &zero, dx, 2) ==
        CUBLAS_STATUS_SUCCESS);
  to_host(hx, dx, 4 * sizeof(double));
  CHECKF(hx[0] == 0.5 && hx[1] == 0.75 && hx[2] == 1.5 && hx[3] == 2.75,
         "gemm on guarded memory: %g %g %g %g", hx[0], hx[1], hx[2], hx[3]);
  CHECK(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
  expect_guarded(dx, sizeof hx, "after cuBLAS");

  /* NCCL: a ring shift in one group (pending until it ends), then collectives alone */
  ncclComm_t c = make_comm(MPI_COMM_WORLD);
  int64_t out[3] = {g_rank, 10 + g_rank, 20 + g_rank}, in[3];
  int64_t *dout = dev_from(out, sizeof out), *din = dev_from(NULL, sizeof in);
  CHECK(ncclGroupStart() == ncclSuccess);
  CHECK(ncclRecv(din, 3, ncclInt64, (g_rank + g_size - 1) % g_size, c, NULL) == ncclSuccess);
  CHECK(ncclSend(dout, 3, ncclInt64, (g_rank + 1) % g_size, c, NULL) == ncclSuccess);
  CHECK(ncclGroupEnd() == ncclSuccess);
  to_host(in, din, sizeof in);
  int prev = (g_rank + g_size - 1) % g_size;
  CHECK(in[0] == prev && in[1] == 10 + prev && in[2] == 20 + prev);
  CHECK(ncclAllReduce(dout, din, 3, ncclInt64, ncclSum, c, NULL) == ncclSuccess);
  CHECK(ncclBroadcast(dout, din + 1, 2, ncclInt64, g_size - 1, c, NULL) == ncclSuccess);
  CHECK(ncclReduce(dout, dout, 1, ncclInt64, ncclMax, 0, c, NULL) == ncclSuccess);
  to_host(in, din, sizeof in);
  to_host(out, dout, sizeof out);
  CHECK(in[0] == (int64_t)g_size * (g_size - 1) / 2 && in[1] == g_size - 1 &&
        in[2] == 10 + g_size - 1);
  CHECK(out[0] == (g_rank == 0 ? g_size - 1 : g_rank));
  CHECK(ncclCommDestroy(c) == ncclSuccess);
  expect_guarded(din + 2, sizeof in, "after NCCL");
  expect_guarded(dout, sizeof out, "after NCCL");
  dev_free(dx), dev_free(dy), dev_free(din), dev_free(dout);

  /* CUEMU_NO_GUARD=1 at cudaMalloc: that allocation stays open, the others are still closed */
  setenv("CUEMU_NO_GUARD", "1", 1);
  unsigned char *u = dev_from(host, 64);
  unsetenv("CUEMU_NO_GUARD");
  if (u) {
    CHECK(u[5] == host[5]);
    u[6] = 99;
    CHECK(cudaMemcpy(d, u, 64, cudaMemcpyDeviceToDevice) == cudaSuccess);
    CHECK(u[6] == 99); /* still open after a device operation left */
    child_end ue = in_child(host_write, u + 63);
    CHECKF(ue.status == 0 && ue.err[0] == 0, "CUEMU_NO_GUARD: status %d, \"%s\"", ue.status,
           ue.err);
  }
  expect_guarded(d + 6, 64, "next to an unguarded allocation");
  dev_free(u), dev_free(d), dev_free(z), dev_free(a);
  env_restore(noguard);
  expect_all_left("after the guard tests");
  all_ok();
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  /* the tests provoke failures on purpose: keep the emulation's explanations out of the log */
  setenv("CUEMU_QUIET", "1", 1);
  /* the other tests queue work on non-blocking streams right after a cudaMemcpy, which a GPU
   * may run before the copy lands: copies land at once but in test_late_copies */
  setenv("CUEMU_EAGER_COPIES", "1", 1);
  /* rank 0 speaks for everyone: all_ok() brings the other ranks' failures to it */
  if (g_rank != 0) {
    if (!freopen("/dev/null", "w", stdout))
      return 1;
    if (!freopen("/dev/null", "w", stderr))
      return 1;
  } else { /* one stream, in order */
    setvbuf(stdout, NULL, _IONBF, 0);
    dup2(STDOUT_FILENO, STDERR_FILENO);
  }
  /* each rank owns a device, as the device runtime arranges */
  int ngpus = 0;
  if (cudaGetDeviceCount(&ngpus) != cudaSuccess || ngpus < 1 ||
      cudaSetDevice(g_rank % ngpus) != cudaSuccess) {
    fprintf(stderr, "test_cuemu: no emulated device (CUEMU_GPUS=%s)\n", getenv("CUEMU_GPUS"));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_devices, reset, NULL),
      cmocka_unit_test_setup_teardown(test_error_strings, reset, NULL),
      cmocka_unit_test_setup_teardown(test_memory, reset, NULL),
      cmocka_unit_test_setup_teardown(test_streams_events, reset, NULL),
      cmocka_unit_test_setup_teardown(test_late_copies, reset, NULL),
      cmocka_unit_test_setup_teardown(test_gemm, reset, NULL),
      cmocka_unit_test_setup_teardown(test_gemv, reset, NULL),
      cmocka_unit_test_setup_teardown(test_nccl_init, reset, NULL),
      cmocka_unit_test_setup_teardown(test_nccl_collectives, reset, NULL),
      cmocka_unit_test_setup_teardown(test_nccl_p2p, reset, NULL),
      cmocka_unit_test_setup_teardown(test_nccl_errors, reset, NULL),
      cmocka_unit_test_setup_teardown(test_guard, reset, NULL),
  };
  char name[64];
  snprintf(name, sizeof name, "cuemu at %d rank%s", g_size, g_size == 1 ? "" : "s");
  int failed = _cmocka_run_group_tests(name, tests, sizeof tests / sizeof tests[0], NULL, NULL);
  MPI_Finalize();
  return failed ? 1 : 0;
}
