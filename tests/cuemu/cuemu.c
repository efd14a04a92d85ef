/* cuemu.c -- host emulation of the CUDA runtime, NCCL and cuBLAS subsets declared by
 * cuda_runtime.h, nccl.h and cublas_v2.h in this directory.  The test suite links it in place
 * of the real libraries to run the device path of libdistal_cuda and generated CUDA code
 * without a GPU, under mpirun with several ranks, each rank owning one emulated GPU.
 *
 * Devices: CUEMU_GPUS of them per process (default 8; read at every call so that a test can
 * change it), the current one per thread.  Device memory is host memory: cudaMalloc maps
 * whole pages of its own (one page for 0 bytes), recorded in a table of live allocations.
 * The table is what makes the emulation worth more than plain malloc: freeing an unknown
 * pointer fails, and so does a copy, memset, cuBLAS call or NCCL call whose device-side range
 * does not lie inside one live allocation, which catches host code that hands host pointers
 * to device functions (and copies that run past the end of a buffer).  Fresh allocations are
 * filled with 0xff bytes (NaN as floating point, -1 as integers), since real device memory
 * is not zeroed; freed ones are unmapped.
 *
 * The other direction, host code that dereferences device memory (a crash or garbage on a
 * GPU), is caught by the pages: between device operations every live allocation is
 * PROT_NONE, and only the emulated functions that work on device memory open it, through
 * cuemu_device_enter and cuemu_device_leave (kernel launches too: see DTL_LAUNCH in
 * distal/kernel.cuh).  A host access in between faults, and the SIGSEGV handler ends the
 * process (status 3) with a line naming the address and its allocation.  CUEMU_NO_GUARD=1,
 * read at each cudaMalloc, leaves the allocations it makes accessible (to look at them in a
 * debugger).
 *
 * Streams run everything at once, in the calling thread, so events and waits are
 * bookkeeping only (the handles are still checked), with one exception that CUDA documents
 * and a GPU shows: a copy from host to device memory queued on the default stream
 * (cudaMemcpy, or cudaMemcpyAsync on stream 0) returns once its source is staged, and lands
 * later, in the order of the default stream, which streams created with
 * cudaStreamNonBlocking do not follow.  The emulation lands such copies at the latest point
 * CUDA allows: before the next work ordered after the default stream (on it or on a blocking
 * stream, an event recorded or a synchronization there, cudaDeviceSynchronize, cudaMalloc and
 * cudaFree).  Device code that reads the destination from a non-blocking stream before then
 * reads what was there before the copy, as a kernel may on a GPU.  CUEMU_EAGER_COPIES=1,
 * read at each copy, lands them at once.  NCCL communicators wrap a duplicate of
 * the MPI communicator named by cuemu_use_comm; operations are MPI nonblocking calls that the
 * outermost ncclGroupEnd completes (an operation outside a group is its own group).  cuBLAS
 * calls are validated as cuBLAS documents and run by CBLAS.
 *
 * Not emulated: concurrency between streams otherwise (a missing event or stream wait between
 * two non-blocking streams goes unnoticed),
 * the other half of the separation of device from host memory (a kernel, a plain C function
 * here, can read host memory), host accesses from one thread while another one runs a device
 * operation (the memory is open to the whole process then), several ranks sharing one
 * device, and sticky errors.
 *
 * Every failing call prints one line saying why on stderr, unless CUEMU_QUIET is set.
 * CUEMU_MPI_MAX_COUNT (default INT_MAX), read when a communicator is created, is the
 * largest count passed to one MPI call: larger transfers are split or sent as a derived
 * type, and a small value lets the tests exercise that path with small buffers. */
#ifndef _POSIX_C_SOURCE /* gethostname, getpid, clock_gettime, sigaction under strict C11 */
#define _POSIX_C_SOURCE 200809L
#endif
#ifndef _DEFAULT_SOURCE /* MAP_ANONYMOUS, which POSIX 2008 lacks */
#define _DEFAULT_SOURCE
#endif
#include "cublas_v2.h"
#include "cuda_runtime.h"
#include "nccl.h"

#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ---- diagnostics --------------------------------------------------------------------------- */
static void say(const char *fn, const char *fmt, va_list ap) {
  const char *quiet = getenv("CUEMU_QUIET");
  if (quiet && *quiet && strcmp(quiet, "0") != 0)
    return;
  int init = 0, fini = 0, rank = -1;
  MPI_Initialized(&init);
  MPI_Finalized(&fini);
  if (init && !fini)
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char msg[400];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (rank >= 0)
    fprintf(stderr, "cuemu (rank %d): %s: %s\n", rank, fn, msg);
  else
    fprintf(stderr, "cuemu: %s: %s\n", fn, msg);
}

/* ---- tables of live objects ------------------------------------------------------------------ */
/* One lock for every table: the device path may call in from more than one thread, and none
 * of these operations is frequent enough for contention to matter. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* An unordered set of live handles (streams, events, communicators, cuBLAS handles), so that
 * a destroyed or made-up handle is reported instead of dereferenced. */
typedef struct {
  void **v;
  size_t n, cap;
} handle_set;

static bool set_add(handle_set *s, void *p) {
  pthread_mutex_lock(&lock);
  bool ok = true;
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 16;
    void **v = realloc(s->v, cap * sizeof *v);
    if (v)
      s->v = v, s->cap = cap;
    else
      ok = false;
  }
  if (ok)
    s->v[s->n++] = p;
  pthread_mutex_unlock(&lock);
  return ok;
}

static bool set_has(handle_set *s, const void *p) {
  bool found = false;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < s->n && !found; i++)
    found = s->v[i] == p;
  pthread_mutex_unlock(&lock);
  return p && found;
}

static bool set_remove(handle_set *s, const void *p) {
  bool found = false;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < s->n; i++)
    if (s->v[i] == p) {
      s->v[i] = s->v[--s->n];
      found = true;
      break;
    }
  pthread_mutex_unlock(&lock);
  return p && found;
}

/* Live device allocations, sorted by address so that the allocation holding a pointer is a
 * binary search away. */
typedef struct {
  uintptr_t base;
  size_t size;  /* as requested */
  size_t pages; /* bytes mapped: size rounded up to whole pages, at least one */
  bool guarded; /* PROT_NONE outside device operations (not under CUEMU_NO_GUARD) */
} allocation;
static allocation *allocs;
static size_t nallocs, cap_allocs;

/* How many cuemu_device_enter calls are not yet left, over all threads: device memory is
 * open while it is positive.  One count for the process, since the pages are the process's:
 * a kernel of one thread must not lose its memory when another thread's copy ends.  Lock
 * held to read or change it, together with the protection of the pages. */
static int device_depth;

/* index of the last allocation with base <= p, or -1; lock held (or in the signal handler,
 * which reads the table without it) */
static ptrdiff_t alloc_at(uintptr_t p) {
  ptrdiff_t lo = 0, hi = (ptrdiff_t)nallocs - 1, found = -1;
  while (lo <= hi) {
    ptrdiff_t mid = lo + (hi - lo) / 2;
    if (allocs[mid].base <= p)
      found = mid, lo = mid + 1;
    else
      hi = mid - 1;
  }
  return found;
}

/* mprotect that cannot be allowed to fail: memory left closed would turn the next device
 * operation into a false report, memory left open would hide the host accesses looked for. */
static void must_protect(uintptr_t base, size_t bytes, int prot) {
  if (mprotect((void *)base, bytes, prot) != 0) {
    fprintf(stderr, "cuemu: mprotect of [%p, +%zu) failed: %s\n", (void *)base, bytes,
            strerror(errno));
    abort();
  }
}

/* Give every guarded allocation protection prot; lock held.  Allocations that follow each
 * other in memory (mmap tends to place them so) go in one call, which keeps the number of
 * system calls, and of the kernel's memory areas, low when there are many of them. */
static void protect_all(int prot) {
  for (size_t i = 0; i < nallocs;) {
    if (!allocs[i].guarded) {
      i++;
      continue;
    }
    uintptr_t base = allocs[i].base, end = base + allocs[i].pages;
    for (i++; i < nallocs && allocs[i].guarded && allocs[i].base == end; i++)
      end += allocs[i].pages;
    must_protect(base, end - base, prot);
  }
}

void cuemu_device_enter(void) {
  pthread_mutex_lock(&lock);
  if (device_depth++ == 0)
    protect_all(PROT_READ | PROT_WRITE);
  pthread_mutex_unlock(&lock);
}

void cuemu_device_leave(void) {
  pthread_mutex_lock(&lock);
  if (device_depth == 0) { /* a bug of the emulation: the memory state is unknown from here */
    fprintf(stderr, "cuemu: cuemu_device_leave without cuemu_device_enter\n");
    abort();
  }
  if (--device_depth == 0)
    protect_all(PROT_NONE);
  pthread_mutex_unlock(&lock);
}

/* Record a fresh mapping; it is closed at once unless a device operation is under way, in
 * which case the leave of that operation closes it with the others. */
static bool alloc_add(void *p, size_t size, size_t pages, bool guarded) {
  bool ok = true;
  pthread_mutex_lock(&lock);
  if (nallocs == cap_allocs) {
    size_t cap = cap_allocs ? 2 * cap_allocs : 64;
    allocation *v = realloc(allocs, cap * sizeof *v);
    if (v)
      allocs = v, cap_allocs = cap;
    else
      ok = false;
  }
  if (ok) {
    size_t at = (size_t)(alloc_at((uintptr_t)p) + 1);
    memmove(allocs + at + 1, allocs + at, (nallocs - at) * sizeof *allocs);
    allocs[at] = (allocation){(uintptr_t)p, size, pages, guarded};
    nallocs++;
    if (guarded && device_depth == 0)
      must_protect((uintptr_t)p, pages, PROT_NONE);
  }
  pthread_mutex_unlock(&lock);
  return ok;
}

/* Remove the allocation that starts at p; its mapped length goes to *pages.  False when p
 * starts no live allocation. */
static bool alloc_remove(void *p, size_t *pages) {
  bool found = false;
  pthread_mutex_lock(&lock);
  ptrdiff_t i = alloc_at((uintptr_t)p);
  if (i >= 0 && allocs[i].base == (uintptr_t)p) {
    *pages = allocs[i].pages;
    memmove(allocs + i, allocs + i + 1, (nallocs - (size_t)i - 1) * sizeof *allocs);
    nallocs--;
    found = true;
  }
  pthread_mutex_unlock(&lock);
  return found;
}

/* Whether [p, p + bytes) lies inside one live allocation (bytes > 0). */
static bool dev_range(const void *p, size_t bytes) {
  bool ok = false;
  pthread_mutex_lock(&lock);
  ptrdiff_t i = alloc_at((uintptr_t)p);
  if (i >= 0) {
    size_t off = (uintptr_t)p - allocs[i].base;
    ok = off < allocs[i].size && bytes <= allocs[i].size - off;
  }
  pthread_mutex_unlock(&lock);
  return ok;
}

/* Whether p points into a live allocation (a zero-byte one counts as 1 byte here). */
static bool is_dev(const void *p) {
  bool in = false;
  pthread_mutex_lock(&lock);
  ptrdiff_t i = alloc_at((uintptr_t)p);
  if (i >= 0)
    in = (uintptr_t)p - allocs[i].base < (allocs[i].size ? allocs[i].size : 1);
  pthread_mutex_unlock(&lock);
  return in;
}

/* ---- CUDA runtime: errors and devices ------------------------------------------------------ */
static _Thread_local cudaError_t last_error = cudaSuccess;
static _Thread_local int current_device = 0;

static cudaError_t cuda_fail(cudaError_t e, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static cudaError_t cuda_fail(cudaError_t e, const char *fn, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say(fn, fmt, ap);
  va_end(ap);
  last_error = e;
  return e;
}

/* CUEMU_GPUS, or -1 when it is not a count from 0 to 256 (PCI bus numbers are one byte). */
static int device_count(void) {
  const char *s = getenv("CUEMU_GPUS");
  if (!s || !*s)
    return 8;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  return errno || *end || v < 0 || v > 256 ? -1 : (int)v;
}

/* cudaSuccess when there is a device to work on; what the real runtime says otherwise. */
static cudaError_t need_device(const char *fn) {
  int n = device_count();
  if (n < 0)
    return cuda_fail(cudaErrorNoDevice, fn, "CUEMU_GPUS=%s is not a device count from 0 to 256",
                     getenv("CUEMU_GPUS"));
  if (n == 0)
    return cuda_fail(cudaErrorNoDevice, fn, "no device (CUEMU_GPUS=0)");
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count) {
  if (!count)
    return cuda_fail(cudaErrorInvalidValue, "cudaGetDeviceCount", "count is NULL");
  *count = 0;
  cudaError_t e = need_device("cudaGetDeviceCount");
  if (e)
    return e;
  *count = device_count();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  cudaError_t e = need_device("cudaSetDevice");
  if (e)
    return e;
  if (device < 0 || device >= device_count())
    return cuda_fail(cudaErrorInvalidDevice, "cudaSetDevice", "device %d of %d", device,
                     device_count());
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  if (!device)
    return cuda_fail(cudaErrorInvalidValue, "cudaGetDevice", "device is NULL");
  cudaError_t e = need_device("cudaGetDevice");
  if (e)
    return e;
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) {
  if (!pciBusId || len <= 0)
    return cuda_fail(cudaErrorInvalidValue, "cudaDeviceGetPCIBusId", "no room for the id");
  cudaError_t e = need_device("cudaDeviceGetPCIBusId");
  if (e)
    return e;
  if (device < 0 || device >= device_count())
    return cuda_fail(cudaErrorInvalidDevice, "cudaDeviceGetPCIBusId", "device %d of %d", device,
                     device_count());
  snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", (unsigned)device);
  return cudaSuccess;
}

static void land(void);
cudaError_t cudaDeviceSynchronize(void) {
  land();
  return need_device("cudaDeviceSynchronize");
}

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) { /* the real runtime's wording */
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorNoDevice:
    return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  }
  return "unrecognized error code";
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

/* ---- CUDA runtime: streams and events ------------------------------------------------------- */
struct CUstream_st {
  unsigned flags;
};
struct CUevent_st {
  unsigned flags;
  bool recorded;
};
static handle_set streams, events;

/* The NULL stream is the default stream and always valid. */
static bool stream_ok(cudaStream_t s) { return !s || set_has(&streams, s); }

static cudaError_t check_stream(const char *fn, cudaStream_t s) {
  if (!stream_ok(s))
    return cuda_fail(cudaErrorInvalidValue, fn, "stream %p is not a live stream", (void *)s);
  return cudaSuccess;
}

static cudaError_t check_event(const char *fn, cudaEvent_t ev) {
  if (!set_has(&events, ev))
    return cuda_fail(cudaErrorInvalidValue, fn, "event %p is not a live event", (void *)ev);
  return cudaSuccess;
}

/* ---- the default stream's late copies (see the top of the file) --------------------------- */
typedef struct {
  void *dst, *staged;
  size_t count;
} late_copy;
static late_copy *late;
static size_t nlate, cap_late;

/* Land every late copy, in the order they were queued. */
static void land(void) {
  pthread_mutex_lock(&lock);
  late_copy *l = late;
  size_t n = nlate;
  late = NULL;
  nlate = cap_late = 0;
  pthread_mutex_unlock(&lock);
  if (n == 0) {
    free(l);
    return;
  }
  cuemu_device_enter();
  for (size_t i = 0; i < n; i++) memmove(l[i].dst, l[i].staged, l[i].count);
  cuemu_device_leave();
  for (size_t i = 0; i < n; i++) free(l[i].staged);
  free(l);
}

/* Work queued on stream s is ordered after the default stream's unless s is non-blocking. */
static void ordered(cudaStream_t s) {
  if (!s || !(s->flags & cudaStreamNonBlocking))
    land();
}

static bool eager_copies(void) {
  const char *e = getenv("CUEMU_EAGER_COPIES");
  return e && *e && strcmp(e, "0") != 0;
}

/* Queue the copy of count bytes of host memory src to device memory dst on the default
 * stream: the source is staged now, the copy lands later.  False without host memory. */
static bool queue_late(void *dst, const void *src, size_t count) {
  void *staged = malloc(count);
  if (!staged)
    return false;
  memcpy(staged, src, count);
  pthread_mutex_lock(&lock);
  if (nlate == cap_late) {
    size_t cap = cap_late ? 2 * cap_late : 16;
    late_copy *g = realloc(late, cap * sizeof *g);
    if (!g) {
      pthread_mutex_unlock(&lock);
      free(staged);
      return false;
    }
    late = g;
    cap_late = cap;
  }
  late[nlate++] = (late_copy){dst, staged, count};
  pthread_mutex_unlock(&lock);
  return true;
}

/* A kernel launch on stream (DTL_LAUNCH in distal/kernel.cuh). */
void cuemu_stream_op(void *stream) {
  if (stream_ok((cudaStream_t)stream))
    ordered((cudaStream_t)stream);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
  const char *fn = "cudaStreamCreateWithFlags";
  if (!pStream)
    return cuda_fail(cudaErrorInvalidValue, fn, "pStream is NULL");
  if (flags & ~(unsigned)cudaStreamNonBlocking)
    return cuda_fail(cudaErrorInvalidValue, fn, "unknown flags %#x", flags);
  cudaError_t e = need_device(fn);
  if (e)
    return e;
  struct CUstream_st *s = malloc(sizeof *s);
  if (!s || !set_add(&streams, s)) {
    free(s);
    return cuda_fail(cudaErrorMemoryAllocation, fn, "out of host memory");
  }
  s->flags = flags;
  *pStream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream || !set_remove(&streams, stream))
    return cuda_fail(cudaErrorInvalidValue, "cudaStreamDestroy",
                     "stream %p is not a live stream (the default stream cannot be destroyed)",
                     (void *)stream);
  free(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  cudaError_t e = check_stream("cudaStreamSynchronize", stream);
  if (!e)
    ordered(stream);
  return e;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  const char *fn = "cudaStreamWaitEvent";
  cudaError_t e = check_stream(fn, stream);
  if (!e)
    e = check_event(fn, event);
  if (!e && flags != 0)
    e = cuda_fail(cudaErrorInvalidValue, fn, "unknown flags %#x", flags);
  if (!e)
    ordered(stream);
  return e;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  const char *fn = "cudaEventCreateWithFlags";
  /* blocking sync 0x1, disable timing 0x2, interprocess 0x4 (which needs disable timing) */
  if (!event)
    return cuda_fail(cudaErrorInvalidValue, fn, "event is NULL");
  if ((flags & ~7u) || ((flags & 4u) && !(flags & 2u)))
    return cuda_fail(cudaErrorInvalidValue, fn, "invalid flags %#x", flags);
  cudaError_t e = need_device(fn);
  if (e)
    return e;
  struct CUevent_st *ev = malloc(sizeof *ev);
  if (!ev || !set_add(&events, ev)) {
    free(ev);
    return cuda_fail(cudaErrorMemoryAllocation, fn, "out of host memory");
  }
  ev->flags = flags;
  ev->recorded = false;
  *event = ev;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  cudaError_t e = check_event("cudaEventRecord", event);
  if (!e)
    e = check_stream("cudaEventRecord", stream);
  if (!e) {
    ordered(stream);
    event->recorded = true;
  }
  return e;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!set_remove(&events, event))
    return cuda_fail(cudaErrorInvalidValue, "cudaEventDestroy", "event %p is not a live event",
                     (void *)event);
  free(event);
  return cudaSuccess;
}

/* Work is done when it is issued, so an event has always completed (a never-recorded one
 * too, as with the real runtime). */
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return check_event("cudaEventSynchronize", event);
}

/* ---- CUDA runtime: memory -----------------------------------------------------------------------
 */
/* The guard: a host access to closed device memory faults, and this handler, when the
 * address lies in the pages of a live guarded allocation, says so and ends the process with
 * status 3 (the fault would otherwise read as a plain segfault somewhere in host code; run
 * the program under a debugger to see where).  Any other fault gets the default action, a
 * plain segfault.  Only async-signal-safe calls: write, _exit, sigaction, raise. */
static char *put_str(char *at, const char *s) {
  while (*s)
    *at++ = *s++;
  return at;
}

/* v in base 10 or 16, without snprintf (not async-signal-safe) */
static char *put_num(char *at, uintptr_t v, unsigned base) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[v % base];
    v /= base;
  } while (v);
  while (n)
    *at++ = digits[--n];
  return at;
}

static void on_segv(int sig, siginfo_t *info, void *context) {
  (void)context;
  uintptr_t addr = (uintptr_t)info->si_addr;
  /* The table is read without the lock, which the faulting thread may hold.  No allocation
   * is added or removed during a host access of a single-threaded program; with threads a
   * fault during a change of the table is a risk the report takes. */
  ptrdiff_t i = info->si_code > 0 ? alloc_at(addr) : -1;
  if (i >= 0 && allocs[i].guarded && addr - allocs[i].base < allocs[i].pages) {
    char msg[160], *at = msg;
    at = put_str(at, "cuemu: host code touched device memory at 0x");
    at = put_num(at, addr, 16);
    at = put_str(at, " (allocation of ");
    at = put_num(at, allocs[i].size, 10);
    at = put_str(at, " bytes)\n");
    ssize_t ignored = write(STDERR_FILENO, msg, (size_t)(at - msg));
    (void)ignored;
    _exit(3);
  }
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGSEGV, &dfl, NULL);
  /* a fault repeats under the default action when the access runs again on return; a
   * signal sent by kill or raise (si_code <= 0) must be sent again */
  if (info->si_code <= 0)
    raise(sig);
}

/* Installed at the first guarded cudaMalloc, and again at a later one that finds another
 * action in place: code that takes SIGSEGV for itself in between (cmocka does around each
 * test, and puts the handler back with signal(), without SA_SIGINFO) would otherwise turn
 * the report back into a bare segfault.  One sigaction call to look, per cudaMalloc. */
static void keep_guard(void) {
  struct sigaction sa;
  if (sigaction(SIGSEGV, NULL, &sa) == 0 && (sa.sa_flags & SA_SIGINFO) &&
      sa.sa_sigaction == on_segv)
    return;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, NULL) != 0) {
    fprintf(stderr, "cuemu: cannot install the SIGSEGV handler: %s\n", strerror(errno));
    abort();
  }
}

static bool guard_off(void) {
  const char *s = getenv("CUEMU_NO_GUARD");
  return s && *s && strcmp(s, "0") != 0;
}

cudaError_t cudaMalloc(void **devPtr, size_t size) {
  if (!devPtr)
    return cuda_fail(cudaErrorInvalidValue, "cudaMalloc", "devPtr is NULL");
  *devPtr = NULL;
  land();
  cudaError_t e = need_device("cudaMalloc");
  if (e)
    return e;
  /* pages of its own, so that protecting them affects this allocation only */
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (size > SIZE_MAX - (page - 1))
    return cuda_fail(cudaErrorMemoryAllocation, "cudaMalloc", "%zu bytes", size);
  size_t pages = size ? (size + page - 1) / page * page : page;
  void *p = mmap(NULL, pages, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return cuda_fail(cudaErrorMemoryAllocation, "cudaMalloc", "%zu bytes", size);
  bool guarded = !guard_off();
  if (guarded)
    keep_guard();
  /* filled while nobody else knows of it, so still open whatever the device depth */
  memset(p, 0xff, size);
  if (!alloc_add(p, size, pages, guarded)) {
    munmap(p, pages);
    return cuda_fail(cudaErrorMemoryAllocation, "cudaMalloc", "%zu bytes", size);
  }
  *devPtr = p;
  return cudaSuccess;
}

/* Unmapped: a use after free faults (as a plain segfault) until the address is mapped again. */
cudaError_t cudaFree(void *devPtr) {
  size_t pages;
  if (!devPtr)
    return cudaSuccess;
  land();
  if (!alloc_remove(devPtr, &pages))
    return cuda_fail(cudaErrorInvalidValue, "cudaFree",
                     "%p is not the start of a live device allocation", devPtr);
  munmap(devPtr, pages);
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream) {
  cudaError_t e = check_stream("cudaMallocAsync", hStream);
  return e ? e : cudaMalloc(devPtr, size);
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream) {
  cudaError_t e = check_stream("cudaFreeAsync", hStream);
  return e ? e : cudaFree(devPtr);
}

static const char *kind_name(int kind) {
  static const char *names[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice",
                                "Default"};
  return kind >= 0 && kind <= 4 ? names[kind] : "?";
}

/* The copy of cudaMemcpy and cudaMemcpyAsync.  The side that the kind calls device memory
 * must be inside a live allocation, and the side it calls host memory must not be device
 * memory (the real runtime does not check either; a wrong kind is undefined behaviour on a
 * GPU).  cudaMemcpyDefault and HostToHost copy anything. */
static cudaError_t copy(const char *fn, void *dst, const void *src, size_t count,
                        enum cudaMemcpyKind kind, cudaStream_t stream) {
  int k = (int)kind;
  if (k < cudaMemcpyHostToHost || k > cudaMemcpyDefault)
    return cuda_fail(cudaErrorInvalidValue, fn, "invalid cudaMemcpyKind %d", k);
  cudaError_t e = need_device(fn);
  if (e || count == 0)
    return e;
  if (!dst || !src)
    return cuda_fail(cudaErrorInvalidValue, fn, "NULL %s", dst ? "src" : "dst");
  bool dst_dev = k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice;
  bool src_dev = k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice;
  if (dst_dev && !dev_range(dst, count))
    return cuda_fail(cudaErrorInvalidValue, fn,
                     "%s: destination [%p, +%zu) is not inside a live device allocation",
                     kind_name(k), dst, count);
  if (src_dev && !dev_range(src, count))
    return cuda_fail(cudaErrorInvalidValue, fn,
                     "%s: source [%p, +%zu) is not inside a live device allocation", kind_name(k),
                     src, count);
  if (k == cudaMemcpyHostToDevice && is_dev(src))
    return cuda_fail(cudaErrorInvalidValue, fn, "HostToDevice: the source %p is device memory",
                     src);
  if (k == cudaMemcpyDeviceToHost && is_dev(dst))
    return cuda_fail(cudaErrorInvalidValue, fn, "DeviceToHost: the destination %p is device memory",
                     dst);
  if (!stream && dst_dev && !src_dev && !eager_copies() && queue_late(dst, src, count))
    return cudaSuccess;
  ordered(stream);
  cuemu_device_enter();
  memmove(dst, src, count);
  cuemu_device_leave();
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  return copy("cudaMemcpy", dst, src, count, kind, NULL);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  cudaError_t e = check_stream("cudaMemcpyAsync", stream);
  return e ? e : copy("cudaMemcpyAsync", dst, src, count, kind, stream);
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
  const char *fn = "cudaMemsetAsync";
  cudaError_t e = check_stream(fn, stream);
  if (!e)
    e = need_device(fn);
  if (e || count == 0)
    return e;
  if (!dev_range(devPtr, count))
    return cuda_fail(cudaErrorInvalidValue, fn, "[%p, +%zu) is not inside a live device allocation",
                     devPtr, count);
  ordered(stream);
  cuemu_device_enter();
  memset(devPtr, value, count);
  cuemu_device_leave();
  return cudaSuccess;
}

/* ---- NCCL
 * ----------------------------------------------------------------------------------------- */
struct ncclComm {
  MPI_Comm comm; /* a duplicate of the cuemu_use_comm communicator, errors returned */
  int rank, nranks;
  size_t max_count; /* CUEMU_MPI_MAX_COUNT when created */
};
static handle_set comms;

static ncclResult_t nccl_fail(ncclResult_t r, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ncclResult_t nccl_fail(ncclResult_t r, const char *fn, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say(fn, fmt, ap);
  va_end(ap);
  return r;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) { /* the real library's wording, less its NCCL_DEBUG advice */
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error";
  case ncclSystemError:
    return "unhandled system error";
  case ncclInternalError:
    return "internal error";
  case ncclInvalidArgument:
    return "invalid argument";
  case ncclInvalidUsage:
    return "invalid usage";
  }
  return "unknown result code";
}

/* Unique ids: a marker, so that an id that did not come from ncclGetUniqueId (say, one that
 * was never broadcast from the rank that made it) is refused, then what makes it unique. */
static const char id_magic[8] = "cuemuid";
typedef struct {
  char magic[8];
  uint64_t host, pid, serial, nanos;
} id_fields;
_Static_assert(sizeof(id_fields) <= NCCL_UNIQUE_ID_BYTES, "id fields fit in an ncclUniqueId");

/* The ids that communicators of this process were created from: real NCCL hangs when one is
 * used twice, the emulation refuses it. */
static ncclUniqueId *used_ids;
static size_t nused_ids, cap_used_ids;

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  static uint64_t serial;
  if (!uniqueId)
    return nccl_fail(ncclInvalidArgument, "ncclGetUniqueId", "uniqueId is NULL");
  char name[256] = "";
  gethostname(name, sizeof name - 1);
  id_fields f;
  memcpy(f.magic, id_magic, sizeof f.magic);
  f.host = 1469598103934665603ull; /* FNV-1a of the host name */
  for (const char *c = name; *c; c++)
    f.host = (f.host ^ (unsigned char)*c) * 1099511628211ull;
  f.pid = (uint64_t)getpid();
  pthread_mutex_lock(&lock);
  f.serial = ++serial;
  pthread_mutex_unlock(&lock);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  f.nanos = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  memset(uniqueId, 0, sizeof *uniqueId);
  memcpy(uniqueId->internal, &f, sizeof f);
  return ncclSuccess;
}

static _Thread_local MPI_Comm next_comm;
static _Thread_local bool next_comm_set;

void cuemu_use_comm(MPI_Comm comm) {
  next_comm = comm;
  next_comm_set = true;
}

static bool id_used(const ncclUniqueId *id) {
  bool used = false;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < nused_ids && !used; i++)
    used = memcmp(&used_ids[i], id, sizeof *id) == 0;
  pthread_mutex_unlock(&lock);
  return used;
}

static bool id_remember(const ncclUniqueId *id) {
  bool ok = true;
  pthread_mutex_lock(&lock);
  if (nused_ids == cap_used_ids) {
    size_t cap = cap_used_ids ? 2 * cap_used_ids : 16;
    ncclUniqueId *v = realloc(used_ids, cap * sizeof *v);
    if (v)
      used_ids = v, cap_used_ids = cap;
    else
      ok = false;
  }
  if (ok)
    used_ids[nused_ids++] = *id;
  pthread_mutex_unlock(&lock);
  return ok;
}

static size_t max_count_env(void) {
  const char *s = getenv("CUEMU_MPI_MAX_COUNT");
  char *end;
  long long v = s && *s ? strtoll(s, &end, 10) : 0;
  return s && *s && !*end && v > 0 && v <= INT_MAX ? (size_t)v : (size_t)INT_MAX;
}

/* Collective over the cuemu_use_comm communicator.  The checks are agreed on by all its
 * ranks, so that a bad argument on one rank fails the call everywhere instead of leaving
 * the others with a communicator that can never work. */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  const char *fn = "ncclCommInitRank";
  if (!comm)
    return nccl_fail(ncclInvalidArgument, fn, "comm is NULL");
  *comm = NULL;
  if (!next_comm_set)
    return nccl_fail(ncclInvalidUsage, fn, "cuemu_use_comm was not called first");
  next_comm_set = false;
  if (next_comm == MPI_COMM_NULL)
    return nccl_fail(ncclInvalidUsage, fn, "cuemu_use_comm was given MPI_COMM_NULL");
  MPI_Comm dup;
  if (MPI_Comm_dup(next_comm, &dup) != MPI_SUCCESS)
    return nccl_fail(ncclSystemError, fn, "MPI_Comm_dup failed");
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int size, me;
  MPI_Comm_size(dup, &size);
  MPI_Comm_rank(dup, &me);

  int code = ncclSuccess;
  ncclUniqueId root_id = commId;
  MPI_Bcast(&root_id, (int)sizeof root_id, MPI_BYTE, 0, dup);
  if (nranks != size || rank != me)
    code = nccl_fail(ncclInvalidArgument, fn,
                     "nranks %d, rank %d, but the MPI communicator has rank %d of %d", nranks, rank,
                     me, size);
  else if (memcmp(commId.internal, id_magic, sizeof id_magic) != 0)
    code = nccl_fail(ncclInvalidArgument, fn, "the id does not come from ncclGetUniqueId");
  else if (memcmp(&root_id, &commId, sizeof commId) != 0)
    code = nccl_fail(ncclInvalidArgument, fn, "the id differs from the id of rank 0");
  else if (id_used(&commId))
    code = nccl_fail(ncclInvalidUsage, fn, "the id was already used for a communicator");
  int worst = code;
  MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, dup);

  struct ncclComm *c = NULL;
  if (worst == ncclSuccess) {
    c = malloc(sizeof *c);
    if (!c || !id_remember(&commId) || !set_add(&comms, c)) {
      free(c);
      c = NULL;
      code = nccl_fail(ncclSystemError, fn, "out of host memory");
    }
    MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, dup);
    if (c && worst != ncclSuccess) {
      set_remove(&comms, c);
      free(c);
      c = NULL;
    }
  }
  if (!c) {
    if (code == ncclSuccess)
      nccl_fail((ncclResult_t)worst, fn, "failed on another rank");
    MPI_Comm_free(&dup);
    return (ncclResult_t)worst;
  }
  c->comm = dup;
  c->rank = me;
  c->nranks = size;
  c->max_count = max_count_env();
  *comm = c;
  return ncclSuccess;
}

/* ---- NCCL groups
 * ---------------------------------------------------------------------------------- */
/* One posted MPI request of the current group. */
typedef struct {
  MPI_Request req;
  MPI_Datatype type; /* of a receive, for the byte count; derived ones are freed at the end */
  bool derived, recv;
  size_t expect; /* bytes a receive must get: NCCL sends and receives pair up exactly */
  int peer;
  ncclComm_t comm;
} pending;

/* Groups are per thread, as in NCCL. */
static _Thread_local int group_depth;
static _Thread_local ncclResult_t group_error;
static _Thread_local pending *pend;
static _Thread_local size_t npend, cap_pend;
/* Whether this thread's group holds device memory open (one cuemu_device_enter): from the
 * first access of an operation of the group, before its MPI request is posted, until every
 * request has been waited for at the end of the group.  MPI may read and write the buffers
 * of a pending request in any MPI call of any later host code (or a peer may, through
 * single-copy shared memory), so the memory cannot close while one is pending. */
static _Thread_local bool group_holds;

/* Open device memory for the current group, before it is first touched. */
static void hold_for_group(void) {
  if (!group_holds) {
    cuemu_device_enter();
    group_holds = true;
  }
}

/* Room for n more requests. */
static bool reserve_pending(size_t n) {
  if (npend + n <= cap_pend)
    return true;
  size_t cap = cap_pend ? cap_pend : 32;
  while (cap < npend + n)
    cap *= 2;
  pending *v = realloc(pend, cap * sizeof *v);
  if (!v)
    return false;
  pend = v, cap_pend = cap;
  return true;
}

ncclResult_t ncclGroupStart(void) {
  group_depth++;
  return ncclSuccess;
}

/* Wait for every request of the group; the first failure of the group (of a call inside it
 * or of a request) is the result. */
static ncclResult_t complete_group(void) {
  const char *fn = "ncclGroupEnd";
  ncclResult_t r = group_error;
  group_error = ncclSuccess;
  for (size_t i = 0; i < npend; i++) {
    pending *p = &pend[i];
    MPI_Status st;
    int rc = MPI_Wait(&p->req, &st);
    ncclResult_t e = ncclSuccess;
    if (rc != MPI_SUCCESS) {
      int cls = 0, len = 0;
      char what[MPI_MAX_ERROR_STRING];
      MPI_Error_class(rc, &cls);
      MPI_Error_string(rc, what, &len);
      e = nccl_fail(cls == MPI_ERR_TRUNCATE ? ncclInvalidUsage : ncclSystemError, fn,
                    "%s with peer %d failed: %s", p->recv ? "receive" : "operation", p->peer, what);
    } else if (p->recv) {
      MPI_Count got = 0;
      MPI_Get_elements_x(&st, p->type, &got);
      if (got < 0 || (size_t)got != p->expect)
        e = nccl_fail(ncclInvalidUsage, fn,
                      "received %lld bytes from peer %d, the ncclRecv expected %zu", (long long)got,
                      p->peer, p->expect);
    }
    if (p->derived)
      MPI_Type_free(&p->type);
    if (!r)
      r = e;
  }
  npend = 0;
  if (group_holds) { /* nothing is pending any more */
    group_holds = false;
    cuemu_device_leave();
  }
  return r;
}

ncclResult_t ncclGroupEnd(void) {
  if (group_depth == 0)
    return nccl_fail(ncclInvalidUsage, "ncclGroupEnd", "no ncclGroupStart to end");
  if (--group_depth > 0)
    return ncclSuccess;
  return complete_group();
}

/* The end of every operation: inside a group a failure is kept for ncclGroupEnd (as NCCL
 * does); outside a group the operation is its own group and completes now. */
static ncclResult_t finish(ncclResult_t r) {
  if (group_depth > 0) {
    if (r && !group_error)
      group_error = r;
    return r;
  }
  ncclResult_t w = complete_group();
  return r ? r : w;
}

static ncclResult_t check_comm(const char *fn, ncclComm_t comm, cudaStream_t stream) {
  if (!set_has(&comms, comm))
    return nccl_fail(ncclInvalidArgument, fn, "comm %p is not a live communicator", (void *)comm);
  if (!stream_ok(stream)) /* NCCL reports the failing CUDA call */
    return nccl_fail(ncclUnhandledCudaError, fn, "stream %p is not a live stream", (void *)stream);
  ordered(stream);
  return ncclSuccess;
}

/* Size of an element, 0 for an unknown type; its MPI type for reductions (MPI has no half). */
static size_t type_size(ncclDataType_t t) {
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
  case ncclInt64:
  case ncclUint64:
  case ncclFloat64:
    return 8;
  }
  return 0;
}

static MPI_Datatype type_mpi(ncclDataType_t t) {
  switch (t) {
  case ncclInt8:
    return MPI_INT8_T;
  case ncclUint8:
    return MPI_UINT8_T;
  case ncclInt32:
    return MPI_INT32_T;
  case ncclUint32:
    return MPI_UINT32_T;
  case ncclInt64:
    return MPI_INT64_T;
  case ncclUint64:
    return MPI_UINT64_T;
  case ncclFloat32:
    return MPI_FLOAT;
  case ncclFloat64:
    return MPI_DOUBLE;
  case ncclFloat16:
    break;
  }
  return MPI_DATATYPE_NULL;
}

static MPI_Op op_mpi(ncclRedOp_t op) {
  switch (op) {
  case ncclSum:
    return MPI_SUM;
  case ncclProd:
    return MPI_PROD;
  case ncclMax:
    return MPI_MAX;
  case ncclMin:
    return MPI_MIN;
  }
  return MPI_OP_NULL;
}

/* count elements of t in bytes, checking the type and the product */
static ncclResult_t byte_count(const char *fn, ncclDataType_t t, size_t count, size_t *bytes) {
  size_t size = type_size(t);
  if (!size)
    return nccl_fail(ncclInvalidArgument, fn, "unknown data type %d", (int)t);
  if (count > SIZE_MAX / size)
    return nccl_fail(ncclInvalidArgument, fn, "count %zu overflows", count);
  *bytes = count * size;
  return ncclSuccess;
}

static ncclResult_t check_buffer(const char *fn, const char *what, const void *p, size_t bytes) {
  if (bytes && !dev_range(p, bytes))
    return nccl_fail(ncclInvalidArgument, fn,
                     "%s [%p, +%zu) is not inside a live device allocation", what, p, bytes);
  return ncclSuccess;
}

/* One message of `bytes` bytes, as count elements of *type: plain bytes when they fit one MPI
 * count, else a derived type (blocks of max bytes and the rest), so that the message has the
 * same type signature whatever its size and a send pairs with its receive. */
static ncclResult_t message_type(size_t bytes, size_t max, MPI_Datatype *type, int *count,
                                 bool *derived) {
  *derived = false;
  if (bytes <= max) {
    *type = MPI_BYTE, *count = (int)bytes;
    return ncclSuccess;
  }
  size_t blocks = bytes / max, rest = bytes % max;
  if (blocks > INT_MAX)
    return ncclInvalidArgument;
  MPI_Datatype block;
  if (MPI_Type_contiguous((int)max, MPI_BYTE, &block) != MPI_SUCCESS)
    return ncclSystemError;
  int rc;
  if (!rest) {
    rc = MPI_Type_contiguous((int)blocks, block, type);
  } else {
    int lens[2] = {(int)blocks, (int)rest};
    MPI_Aint disp[2] = {0, (MPI_Aint)(blocks * max)};
    MPI_Datatype types[2] = {block, MPI_BYTE};
    rc = MPI_Type_create_struct(2, lens, disp, types, type);
  }
  MPI_Type_free(&block);
  if (rc != MPI_SUCCESS || MPI_Type_commit(type) != MPI_SUCCESS)
    return ncclSystemError;
  *count = 1, *derived = true;
  return ncclSuccess;
}

static ncclResult_t p2p(const char *fn, bool recv, void *buf, size_t count, ncclDataType_t t,
                        int peer, ncclComm_t comm, cudaStream_t stream) {
  size_t bytes = 0;
  ncclResult_t r = check_comm(fn, comm, stream);
  if (!r)
    r = byte_count(fn, t, count, &bytes);
  if (r)
    return r;
  if (peer < 0 || peer >= comm->nranks)
    return nccl_fail(ncclInvalidArgument, fn, "peer %d of %d", peer, comm->nranks);
  if ((r = check_buffer(fn, recv ? "recvbuff" : "sendbuff", buf, bytes)))
    return r;
  if (!reserve_pending(1))
    return nccl_fail(ncclSystemError, fn, "out of host memory");
  pending *p = &pend[npend];
  int n;
  if ((r = message_type(bytes, comm->max_count, &p->type, &n, &p->derived)))
    return nccl_fail(r, fn, "cannot describe %zu bytes to MPI", bytes);
  hold_for_group();
  int rc = recv ? MPI_Irecv(buf, n, p->type, peer, 0, comm->comm, &p->req)
                : MPI_Isend(buf, n, p->type, peer, 0, comm->comm, &p->req);
  if (rc != MPI_SUCCESS) {
    if (p->derived)
      MPI_Type_free(&p->type);
    return nccl_fail(ncclSystemError, fn, "MPI_I%s failed", recv ? "recv" : "send");
  }
  p->recv = recv, p->expect = bytes, p->peer = peer, p->comm = comm;
  npend++;
  return ncclSuccess;
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return finish(p2p("ncclSend", false, (void *)sendbuff, count, datatype, peer, comm, stream));
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return finish(p2p("ncclRecv", true, recvbuff, count, datatype, peer, comm, stream));
}

/* Add a posted collective request to the group. */
static ncclResult_t post(const char *fn, int rc, MPI_Request req, ncclComm_t comm, int peer) {
  if (rc != MPI_SUCCESS)
    return nccl_fail(ncclSystemError, fn, "the MPI call failed");
  pend[npend++] = (pending){.req = req, .type = MPI_BYTE, .peer = peer, .comm = comm};
  return ncclSuccess;
}

/* A collective of count elements is issued in pieces of at most comm->max_count elements
 * (every rank passes the same count, so the pieces agree). */
static size_t npieces(size_t count, size_t max) { return count / max + (count % max != 0); }

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  const char *fn = "ncclBroadcast";
  size_t bytes = 0;
  ncclResult_t r = check_comm(fn, comm, stream);
  if (!r)
    r = byte_count(fn, datatype, count, &bytes);
  if (!r && (root < 0 || root >= comm->nranks))
    r = nccl_fail(ncclInvalidArgument, fn, "root %d of %d", root, comm->nranks);
  if (!r && comm->rank == root)
    r = check_buffer(fn, "sendbuff", sendbuff, bytes);
  if (!r)
    r = check_buffer(fn, "recvbuff", recvbuff, bytes);
  if (r || bytes == 0)
    return finish(r);
  size_t n = npieces(bytes, comm->max_count);
  if (!reserve_pending(n))
    return finish(nccl_fail(ncclSystemError, fn, "out of host memory"));
  hold_for_group();
  /* the root's sendbuff is only read by the root; out of place, it lands in recvbuff first */
  if (comm->rank == root && sendbuff != recvbuff)
    memmove(recvbuff, sendbuff, bytes);
  for (size_t i = 0; i < n && !r; i++) {
    size_t off = i * comm->max_count, len = min_size(bytes - off, comm->max_count);
    MPI_Request req;
    int rc = MPI_Ibcast((char *)recvbuff + off, (int)len, MPI_BYTE, root, comm->comm, &req);
    r = post(fn, rc, req, comm, root);
  }
  return finish(r);
}

/* ncclReduce (into root) and ncclAllReduce (all). */
static ncclResult_t reduce(const char *fn, bool all, const void *sendbuff, void *recvbuff,
                           size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  size_t bytes = 0;
  MPI_Datatype type = type_mpi(datatype);
  MPI_Op mop = op_mpi(op);
  ncclResult_t r = check_comm(fn, comm, stream);
  if (!r)
    r = byte_count(fn, datatype, count, &bytes);
  if (!r && type == MPI_DATATYPE_NULL)
    r = nccl_fail(ncclInvalidArgument, fn, "no reduction of data type %d", (int)datatype);
  if (!r && mop == MPI_OP_NULL)
    r = nccl_fail(ncclInvalidArgument, fn, "unknown reduction %d", (int)op);
  if (!r && !all && (root < 0 || root >= comm->nranks))
    r = nccl_fail(ncclInvalidArgument, fn, "root %d of %d", root, comm->nranks);
  /* recvbuff is only written on the ranks that get the result */
  bool gets = !r && (all || comm->rank == root);
  if (!r)
    r = check_buffer(fn, "sendbuff", sendbuff, bytes);
  if (!r && gets)
    r = check_buffer(fn, "recvbuff", recvbuff, bytes);
  if (r || count == 0)
    return finish(r);
  size_t n = npieces(count, comm->max_count), size = type_size(datatype);
  if (!reserve_pending(n))
    return finish(nccl_fail(ncclSystemError, fn, "out of host memory"));
  bool in_place = gets && sendbuff == recvbuff;
  hold_for_group();
  for (size_t i = 0; i < n && !r; i++) {
    size_t off = i * comm->max_count, len = min_size(count - off, comm->max_count);
    const void *sb = in_place ? MPI_IN_PLACE : (const char *)sendbuff + off * size;
    void *rb = gets ? (char *)recvbuff + off * size : NULL;
    MPI_Request req;
    int rc = all ? MPI_Iallreduce(sb, rb, (int)len, type, mop, comm->comm, &req)
                 : MPI_Ireduce(sb, rb, (int)len, type, mop, root, comm->comm, &req);
    r = post(fn, rc, req, comm, all ? -1 : root);
  }
  return finish(r);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return reduce("ncclReduce", false, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return reduce("ncclAllReduce", true, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  const char *fn = "ncclCommDestroy";
  if (!comm)
    return ncclSuccess;
  if (!set_has(&comms, comm))
    return nccl_fail(ncclInvalidArgument, fn, "comm %p is not a live communicator", (void *)comm);
  for (size_t i = 0; i < npend; i++)
    if (pend[i].comm == comm)
      return nccl_fail(ncclInvalidUsage, fn, "the communicator has operations in an open group");
  set_remove(&comms, comm);
  MPI_Comm_free(&comm->comm);
  free(comm);
  return ncclSuccess;
}

/* ---- cuBLAS
 * ---------------------------------------------------------------------------------------- */
struct cublasContext {
  cudaStream_t stream;
};
static handle_set blas_handles;

static cublasStatus_t blas_fail(cublasStatus_t s, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static cublasStatus_t blas_fail(cublasStatus_t s, const char *fn, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say(fn, fmt, ap);
  va_end(ap);
  return s;
}

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  const char *fn = "cublasCreate";
  if (!handle)
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "handle is NULL");
  if (device_count() <= 0) /* what cuBLAS says when the CUDA runtime finds no device */
    return blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, fn, "no device");
  struct cublasContext *h = malloc(sizeof *h);
  if (!h || !set_add(&blas_handles, h)) {
    free(h);
    return blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, fn, "out of host memory");
  }
  h->stream = NULL;
  *handle = h;
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t check_handle(const char *fn, cublasHandle_t handle) {
  if (!set_has(&blas_handles, handle))
    return blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, fn, "handle %p is not a live cuBLAS handle",
                     (void *)handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  cublasStatus_t s = check_handle("cublasDestroy", handle);
  if (s)
    return s;
  set_remove(&blas_handles, handle);
  free(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t streamId) {
  cublasStatus_t s = check_handle("cublasSetStream", handle);
  if (s)
    return s;
  if (!stream_ok(streamId))
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetStream",
                     "stream %p is not a live stream", (void *)streamId);
  handle->stream = streamId;
  return CUBLAS_STATUS_SUCCESS;
}

static bool op_ok(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

/* For real types the conjugate transpose is the transpose. */
static enum CBLAS_TRANSPOSE op_cblas(cublasOperation_t op) {
  return op == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
}

static int max1(int a) { return a > 1 ? a : 1; }

/* Bytes spanned by a column-major rows x cols matrix with leading dimension ld, and by a
 * vector of len elements with stride inc (either sign: BLAS walks a negative stride from
 * the far end of the same span). */
static size_t matrix_bytes(int rows, int cols, int ld, size_t el) {
  return rows <= 0 || cols <= 0 ? 0 : ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * el;
}
static size_t stride(int inc) { return inc < 0 ? (size_t)0 - (size_t)inc : (size_t)inc; }
static size_t vector_bytes(int len, int inc, size_t el) {
  return len <= 0 ? 0 : ((size_t)(len - 1) * stride(inc) + 1) * el;
}

/* Matrices and vectors are device memory. */
static cublasStatus_t check_operand(const char *fn, const char *what, const void *p, size_t bytes) {
  if (bytes && !dev_range(p, bytes))
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, fn,
                     "%s [%p, +%zu) is not inside a live device allocation", what, p, bytes);
  return CUBLAS_STATUS_SUCCESS;
}

/* alpha and beta are host memory (the default pointer mode, the only one emulated: a device
 * scalar there would be read by the host), and the handle's stream must still be alive. */
static cublasStatus_t check_scalars_stream(const char *fn, cublasHandle_t handle, const void *alpha,
                                           const void *beta) {
  if (!alpha || !beta)
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "%s is NULL", alpha ? "beta" : "alpha");
  if (is_dev(alpha) || is_dev(beta))
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, fn,
                     "%s is device memory, but the pointer mode is host",
                     is_dev(alpha) ? "alpha" : "beta");
  if (!stream_ok(handle->stream))
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "the handle's stream %p was destroyed",
                     (void *)handle->stream);
  ordered(handle->stream);
  return CUBLAS_STATUS_SUCCESS;
}

/* The checks of cublas?gemm, in the order cuBLAS documents them, then the operands. */
static cublasStatus_t check_gemm(const char *fn, cublasHandle_t handle, cublasOperation_t transa,
                                 cublasOperation_t transb, int m, int n, int k, const void *alpha,
                                 const void *A, int lda, const void *B, int ldb, const void *beta,
                                 const void *C, int ldc, size_t el) {
  cublasStatus_t s = check_handle(fn, handle);
  if (s)
    return s;
  int arows = transa == CUBLAS_OP_N ? m : k, acols = transa == CUBLAS_OP_N ? k : m;
  int brows = transb == CUBLAS_OP_N ? k : n, bcols = transb == CUBLAS_OP_N ? n : k;
  if (m < 0 || n < 0 || k < 0)
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "m %d, n %d, k %d", m, n, k);
  if (!op_ok(transa) || !op_ok(transb))
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "transa %d, transb %d", (int)transa,
                     (int)transb);
  if (lda < max1(arows))
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "lda %d < max(1, %d)", lda, arows);
  if (ldb < max1(brows))
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "ldb %d < max(1, %d)", ldb, brows);
  if (ldc < max1(m))
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "ldc %d < max(1, %d)", ldc, m);
  if ((s = check_scalars_stream(fn, handle, alpha, beta)))
    return s;
  if (m == 0 || n == 0) /* nothing is touched */
    return CUBLAS_STATUS_SUCCESS;
  if (k > 0 && ((s = check_operand(fn, "A", A, matrix_bytes(arows, acols, lda, el))) ||
                (s = check_operand(fn, "B", B, matrix_bytes(brows, bcols, ldb, el)))))
    return s;
  return check_operand(fn, "C", C, matrix_bytes(m, n, ldc, el));
}

/* The checks of cublas?gemv. */
static cublasStatus_t check_gemv(const char *fn, cublasHandle_t handle, cublasOperation_t trans,
                                 int m, int n, const void *alpha, const void *A, int lda,
                                 const void *x, int incx, const void *beta, const void *y, int incy,
                                 size_t el) {
  cublasStatus_t s = check_handle(fn, handle);
  if (s)
    return s;
  if (m < 0 || n < 0)
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "m %d, n %d", m, n);
  if (incx == 0 || incy == 0)
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "incx %d, incy %d", incx, incy);
  if (!op_ok(trans))
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "trans %d", (int)trans);
  if (lda < max1(m))
    return blas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "lda %d < max(1, %d)", lda, m);
  if ((s = check_scalars_stream(fn, handle, alpha, beta)))
    return s;
  if (m == 0 || n == 0) /* BLAS returns at once: y is not even scaled */
    return CUBLAS_STATUS_SUCCESS;
  int xlen = trans == CUBLAS_OP_N ? n : m, ylen = trans == CUBLAS_OP_N ? m : n;
  if ((s = check_operand(fn, "A", A, matrix_bytes(m, n, lda, el))) ||
      (s = check_operand(fn, "x", x, vector_bytes(xlen, incx, el))))
    return s;
  return check_operand(fn, "y", y, vector_bytes(ylen, incy, el));
}

/* cuBLAS does not read C (y) when beta is 0, so NaN there must not survive; some OpenBLAS
 * versions propagate it through their scaling by 0, hence the explicit zeroing first. */
static void zero_d(double *C, int m, int n, size_t ldc) {
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++)
      C[(size_t)j * ldc + (size_t)i] = 0;
}
static void zero_s(float *C, int m, int n, size_t ldc) {
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++)
      C[(size_t)j * ldc + (size_t)i] = 0;
}

cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const double *alpha,
                           const double *A, int lda, const double *B, int ldb, const double *beta,
                           double *C, int ldc) {
  cublasStatus_t s = check_gemm("cublasDgemm", handle, transa, transb, m, n, k, alpha, A, lda, B,
                                ldb, beta, C, ldc, sizeof *C);
  if (s || m == 0 || n == 0)
    return s;
  cuemu_device_enter();
  if (*beta == 0)
    zero_d(C, m, n, (size_t)ldc);
  cblas_dgemm(CblasColMajor, op_cblas(transa), op_cblas(transb), m, n, k, *alpha, A, lda, B, ldb,
              *beta, C, ldc);
  cuemu_device_leave();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha,
                           const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
  cublasStatus_t s = check_gemm("cublasSgemm", handle, transa, transb, m, n, k, alpha, A, lda, B,
                                ldb, beta, C, ldc, sizeof *C);
  if (s || m == 0 || n == 0)
    return s;
  cuemu_device_enter();
  if (*beta == 0)
    zero_s(C, m, n, (size_t)ldc);
  cblas_sgemm(CblasColMajor, op_cblas(transa), op_cblas(transb), m, n, k, *alpha, A, lda, B, ldb,
              *beta, C, ldc);
  cuemu_device_leave();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n,
                           const double *alpha, const double *A, int lda, const double *x, int incx,
                           const double *beta, double *y, int incy) {
  cublasStatus_t s = check_gemv("cublasDgemv", handle, trans, m, n, alpha, A, lda, x, incx, beta, y,
                                incy, sizeof *y);
  if (s || m == 0 || n == 0)
    return s;
  cuemu_device_enter();
  if (*beta == 0)
    zero_d(y, 1, trans == CUBLAS_OP_N ? m : n, stride(incy)); /* y as a 1 x len matrix */
  cblas_dgemv(CblasColMajor, op_cblas(trans), m, n, *alpha, A, lda, x, incx, *beta, y, incy);
  cuemu_device_leave();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n,
                           const float *alpha, const float *A, int lda, const float *x, int incx,
                           const float *beta, float *y, int incy) {
  cublasStatus_t s = check_gemv("cublasSgemv", handle, trans, m, n, alpha, A, lda, x, incx, beta, y,
                                incy, sizeof *y);
  if (s || m == 0 || n == 0)
    return s;
  cuemu_device_enter();
  if (*beta == 0)
    zero_s(y, 1, trans == CUBLAS_OP_N ? m : n, stride(incy)); /* y as a 1 x len matrix */
  cblas_sgemv(CblasColMajor, op_cblas(trans), m, n, *alpha, A, lda, x, incx, *beta, y, incy);
  cuemu_device_leave();
  return CUBLAS_STATUS_SUCCESS;
}
