/*
 * memory.c - "device" memory, which is host memory, pinned host memory, and
 * the copies and fills that run on streams.
 *
 * Every allocation (and every range the program registers with
 * cudaHostRegister) is remembered with its size and kind, in one array
 * sorted by address: cudaFree must know the size to check and forget the
 * freed bytes, and a copy must know whether its host end is pinned, since
 * CUDA treats pageable memory differently.
 *
 * The synchronous calls follow CUDA's documented behaviour ("API
 * synchronization behavior"), which the checker models: cudaMemcpy from
 * pageable memory to the device, from device to device, and cudaMemset of
 * device memory may return before the work is done, so the host learns
 * nothing from them; the other copies are fully synchronous.
 *
 * Device memory belongs to a device (Alloc.device): the checker reports
 * work on another device that touches it. Copies may join any two devices
 * (UVA): cudaMemcpyPeer*, and cudaMemcpy* between two devices' pointers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt.h"

#define ALIGN 256
/* Transparent huge pages: 2 MiB on x86-64 and most arm64 kernels. */
#define HUGE_PAGE ((size_t)2 << 20)

/* ---- the allocation table ---- */

typedef enum {
  OWN_DEVICE,  /* cudaMalloc, cudaMallocAsync */
  OWN_MANAGED, /* cudaMallocManaged: device memory the host may touch */
  OWN_PINNED,  /* cudaMallocHost, cudaHostAlloc */
  REGISTERED,  /* cudaHostRegister: the program's memory, pinned */
} AllocKind;

typedef struct Alloc {
  uintptr_t lo;
  size_t size; /* as requested; a range of 0 bytes still owns its first byte */
  AllocKind kind;
  int device;  /* OWN_DEVICE: the device it belongs to; else -1 (any) */
} Alloc;

static struct {
  Alloc *a;
  int n, cap;
} table;

static uintptr_t alloc_end(const Alloc *a) {
  return a->lo + (a->size ? a->size : 1);
}

/* The index of the first entry whose start lies above p. */
static int upper_bound(uintptr_t p) {
  int lo = 0, hi = table.n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (table.a[mid].lo <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The entry whose range holds p, or NULL. */
static Alloc *table_holding_locked(const void *p) {
  int i = upper_bound((uintptr_t)p) - 1;
  if (i < 0 || (uintptr_t)p >= alloc_end(&table.a[i]))
    return NULL;
  return &table.a[i];
}

/* The entry that starts at p, or NULL. */
static Alloc *table_find_locked(const void *p) {
  Alloc *a = table_holding_locked(p);
  return a && a->lo == (uintptr_t)p ? a : NULL;
}

/* Whether [lo, lo + size) overlaps an entry. */
static bool table_overlaps_locked(uintptr_t lo, size_t size) {
  int i = upper_bound(lo + size - 1) - 1;
  return i >= 0 && alloc_end(&table.a[i]) > lo;
}

static bool table_add_locked(Alloc a) {
  if (table.n == table.cap) {
    int cap = table.cap ? 2 * table.cap : 256;
    Alloc *grown = realloc(table.a, cap * sizeof *grown);
    if (!grown)
      return false;
    table.a = grown;
    table.cap = cap;
  }
  int i = upper_bound(a.lo);
  memmove(&table.a[i + 1], &table.a[i], (table.n - i) * sizeof(Alloc));
  table.a[i] = a;
  table.n++;
  return true;
}

static void table_remove_locked(Alloc *a) {
  int i = (int)(a - table.a);
  memmove(&table.a[i], &table.a[i + 1], (table.n - i - 1) * sizeof(Alloc));
  table.n--;
}

MemKind mem_kind_locked(const void *p) {
  Alloc *a = table_holding_locked(p);
  if (!a)
    return MEM_PAGEABLE;
  return a->kind == OWN_DEVICE || a->kind == OWN_MANAGED ? MEM_DEVICE : MEM_PINNED;
}

int mem_device_locked(const void *p) {
  Alloc *a = table_holding_locked(p);
  return a ? a->device : -1;
}

/* ---- allocation ---- */

/* Fresh memory holds garbage on a GPU. In checking mode it holds quiet
 * NaNs, so that reading what was never written shows in the results:
 * 0x7fc07fc0 is one as a float, and each of its halves one as an FP16 or
 * a BF16 value, so 16-bit data read too soon is all NaN as well. */
static void fill_nan(void *p, size_t size) {
  const uint32_t nan = 0x7fc07fc0u;
  unsigned char *b = p;
  size_t words = size / 4;
  for (size_t i = 0; i < words; i++)
    memcpy(b + 4 * i, &nan, 4);
  memcpy(b + 4 * words, &nan, size % 4);
}

/* Whether a potentially unsafe call must fail now, taking rt.lock. */
static cudaError_t unsafe_call(void) {
  return rt_capture_forbids() ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

/* Managed and pinned memory belong to no device: every device may use it
 * (managed memory migrates on demand). */
static cudaError_t alloc(void **out, size_t size, AllocKind kind, int device) {
  if (!out)
    return cudaErrorInvalidValue;
  *out = NULL;
  void *p = NULL;
  size_t rounded = (size + ALIGN - 1) / ALIGN * ALIGN;
  if (rounded == 0)
    rounded = ALIGN;
  if (rounded >= HUGE_PAGE) {
    /* A model's activations and weights are read once per operation each:
       on 4 KiB pages their walk misses the TLB on nearly every row. */
    if (posix_memalign(&p, HUGE_PAGE, rounded) != 0)
      return cudaErrorMemoryAllocation;
#ifdef MADV_HUGEPAGE
    madvise(p, rounded / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE);
#endif
  } else if (posix_memalign(&p, ALIGN, rounded) != 0) {
    return cudaErrorMemoryAllocation;
  }
  if (rt.check)
    fill_nan(p, rounded);
  pthread_mutex_lock(&rt.lock);
  bool ok = table_add_locked((Alloc){(uintptr_t)p, size, kind, kind == OWN_DEVICE ? device : -1});
  pthread_mutex_unlock(&rt.lock);
  if (!ok) {
    free(p);
    return cudaErrorMemoryAllocation;
  }
  *out = p;
  return cudaSuccess;
}

/* An allocation outside any stream: refused where a capture forbids it. */
static cudaError_t alloc_sync(void **out, size_t size, AllocKind kind) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if ((err = unsafe_call()))
    return rt_error(err);
  return rt_error(alloc(out, size, kind, rt_device()));
}

cudaError_t cudaMalloc(void **devPtr, size_t size) {
  return alloc_sync(devPtr, size, OWN_DEVICE);
}

cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags) {
  if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)
    return rt_error(cudaErrorInvalidValue);
  return alloc_sync(devPtr, size, OWN_MANAGED);
}

cudaError_t cudaMallocHost(void **ptr, size_t size) {
  return alloc_sync(ptr, size, OWN_PINNED);
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags) {
  if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
    return rt_error(cudaErrorInvalidValue);
  return alloc_sync(pHost, size, OWN_PINNED);
}

/* Whether memory of kind `have` may be freed as `want` (cudaFree takes
 * managed memory too). */
static bool frees_as(AllocKind have, AllocKind want) {
  return have == want || (want == OWN_DEVICE && have == OWN_MANAGED);
}

/*
 * Frees p, which must have been allocated as `kind`. CUDA does not
 * document that cudaFree waits for the device, so the checker reports
 * memory that work the host has not synchronised with may still use; the
 * runtime still waits, to keep its own workers off freed memory.
 */
static cudaError_t release(void *p, AllocKind kind, const char *api) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!p)
    return cudaSuccess;
  pthread_mutex_lock(&rt.lock);
  Alloc *a = NULL;
  if (capture_forbids_unsafe_locked())
    err = cudaErrorStreamCaptureUnsupported;
  else if (!(a = table_find_locked(p)))
    err = kind == OWN_DEVICE ? cudaErrorInvalidDevicePointer : cudaErrorInvalidValue;
  else if (!frees_as(a->kind, kind))
    err = cudaErrorInvalidValue;
  if (err) {
    pthread_mutex_unlock(&rt.lock);
    return rt_error(err);
  }
  if (rt.check)
    check_free_locked(a->lo, a->lo + a->size, api);
  rt_wait_all_locked();
  /* Waiting let other threads in: the table may have moved, or another
   * thread freed p meanwhile. */
  if (!(a = table_find_locked(p))) {
    pthread_mutex_unlock(&rt.lock);
    return rt_error(cudaErrorInvalidValue);
  }
  table_remove_locked(a);
  pthread_mutex_unlock(&rt.lock);
  free(p);
  return rt_failed() ? rt_error(cudaErrorLaunchFailure) : cudaSuccess;
}

cudaError_t cudaFree(void *devPtr) {
  return release(devPtr, OWN_DEVICE, "cudaFree");
}

cudaError_t cudaFreeHost(void *ptr) {
  return release(ptr, OWN_PINNED, "cudaFreeHost");
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  unsigned known = cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory |
                   cudaHostRegisterReadOnly;
  if (!ptr || size == 0 || (flags & ~known))
    return rt_error(cudaErrorInvalidValue);
  pthread_mutex_lock(&rt.lock);
  if (capture_forbids_unsafe_locked())
    err = cudaErrorStreamCaptureUnsupported;
  else if (table_overlaps_locked((uintptr_t)ptr, size))
    err = cudaErrorHostMemoryAlreadyRegistered;
  else if (!table_add_locked((Alloc){(uintptr_t)ptr, size, REGISTERED, -1}))
    err = cudaErrorMemoryAllocation;
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

cudaError_t cudaHostUnregister(void *ptr) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!ptr)
    return rt_error(cudaErrorInvalidValue);
  pthread_mutex_lock(&rt.lock);
  Alloc *a = NULL;
  if (capture_forbids_unsafe_locked())
    err = cudaErrorStreamCaptureUnsupported;
  else if (!(a = table_find_locked(ptr)) || a->kind != REGISTERED)
    err = cudaErrorHostMemoryNotRegistered;
  else
    table_remove_locked(a);
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  Stream *s = rt_stream(hStream);
  pthread_mutex_lock(&rt.lock);
  bool capturing = s->capture != NULL;
  pthread_mutex_unlock(&rt.lock);
  if (capturing)
    return rt_error(cudaErrorNotSupported);
  /* From the pool of the stream's device. */
  return rt_error(alloc(devPtr, size, OWN_DEVICE, s->device));
}

typedef struct FreeOp {
  Op op;
  void *p;
} FreeOp;

static void run_free(Op *op) {
  free(((FreeOp *)op)->p);
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!devPtr)
    return cudaSuccess;
  Stream *s = rt_stream(hStream);
  FreeOp *f = op_new(sizeof *f, run_free, "cudaFreeAsync");
  if (!f)
    return rt_error(cudaErrorMemoryAllocation);
  f->p = devPtr;
  f->op.transfer = true; /* no kernel: any device's stream may free */
  f->op.kind = OP_MEM_FREE;
  pthread_mutex_lock(&rt.lock);
  Alloc *a = NULL;
  if (s->capture)
    err = cudaErrorNotSupported;
  else if (!(a = table_find_locked(devPtr)))
    err = cudaErrorInvalidDevicePointer;
  else if (a->kind != OWN_DEVICE)
    err = cudaErrorInvalidValue;
  if (err) {
    op_unref(&f->op);
  } else {
    /* Freeing is a write: anything still using the bytes unordered races. */
    op_span(&f->op, devPtr, a->size, true);
    uintptr_t lo = a->lo, hi = a->lo + a->size;
    err = rt_submit_locked(s, &f->op);
    if (err == cudaSuccess) {
      if (rt.check)
        check_forget_locked(lo, hi);
      table_remove_locked(table_find_locked(devPtr));
    }
  }
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  if (free_bytes)
    *free_bytes = (size_t)avail * page;
  if (total)
    *total = (size_t)pages * page;
  return cudaSuccess;
}

/* ---- copies and fills ---- */

typedef struct CopyOp {
  Op op;
  char *dst;
  const char *src;
  size_t dpitch, spitch, width, height;
} CopyOp;

/* Large copies are split into row blocks or byte blocks across the pool. */
static void copy_part(void *ctx, int part, int nparts) {
  CopyOp *c = ctx;
  if (c->height == 1) {
    size_t lo = c->width * part / nparts, hi = c->width * (part + 1) / nparts;
    memmove(c->dst + lo, c->src + lo, hi - lo);
    return;
  }
  size_t lo = c->height * part / nparts, hi = c->height * (part + 1) / nparts;
  for (size_t r = lo; r < hi; r++)
    memmove(c->dst + r * c->dpitch, c->src + r * c->spitch, c->width);
}

static void run_copy(Op *op) {
  CopyOp *c = (CopyOp *)op;
  long long bytes = (long long)c->width * c->height;
  int parts = pool_parts(bytes, 4 << 20);
  if (c->height > 1 && parts > (int)c->height)
    parts = (int)c->height;
  pool_run(copy_part, c, parts);
}

static bool kind_ok(enum cudaMemcpyKind kind) {
  return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault;
}

/* Where one end of a copy lies: as `kind` says, and for cudaMemcpyDefault
 * as the pointer says. A host end may be pinned or pageable. */
static MemKind end_kind_locked(const void *p, enum cudaMemcpyKind kind, bool is_dst) {
  bool host;
  switch (kind) {
  case cudaMemcpyHostToHost: host = true; break;
  case cudaMemcpyHostToDevice: host = !is_dst; break;
  case cudaMemcpyDeviceToHost: host = is_dst; break;
  case cudaMemcpyDeviceToDevice: host = false; break;
  default: return mem_kind_locked(p);
  }
  return host ? mem_kind_locked(p) : MEM_DEVICE;
}

static CopyOp *copy_op(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                       size_t height, const char *api) {
  CopyOp *c = op_new(sizeof *c, run_copy, api);
  if (!c)
    return NULL;
  c->dst = dst;
  c->src = src;
  c->dpitch = dpitch;
  c->spitch = spitch;
  c->width = width;
  c->height = height;
  /* Copies run from any device's stream, between any devices' memory. */
  c->op.transfer = true;
  long long rows = height, sstride = spitch, dstride = dpitch, w = width, one = 1;
  long long dims[2] = {rows, w}, ss[2] = {sstride, one}, ds[2] = {dstride, one};
  op_span_strided(&c->op, src, 2, dims, ss, 1, false);
  op_span_strided(&c->op, dst, 2, dims, ds, 1, true);
  return c;
}

/* rt_enter, then the checks of a copy's arguments; cudaSuccess with *empty
 * set means nothing to copy. */
static cudaError_t copy_enter(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind, bool *empty) {
  *empty = width == 0 || height == 0;
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!kind_ok(kind))
    return rt_error(cudaErrorInvalidMemcpyDirection);
  if (*empty)
    return cudaSuccess;
  if (!dst || !src || (height > 1 && (dpitch < width || spitch < width)))
    return rt_error(cudaErrorInvalidValue);
  return cudaSuccess;
}

/* OPC_RT_PAGEABLE=error: an asynchronous copy between the device and
 * pageable memory is refused, since a GPU runs it synchronously. */
static bool pageable_refused_locked(const void *dst, const void *src, enum cudaMemcpyKind kind,
                                    const char *api) {
  MemKind to = end_kind_locked(dst, kind, true), from = end_kind_locked(src, kind, false);
  bool refused = (to == MEM_DEVICE && from == MEM_PAGEABLE) ||
                 (to == MEM_PAGEABLE && from == MEM_DEVICE);
  if (refused)
    fprintf(stderr,
            "opc runtime: %s between device and pageable host memory refused "
            "(OPC_RT_PAGEABLE=error): such a copy is not asynchronous; use cudaMallocHost\n",
            api);
  return refused;
}

static cudaError_t copy_async(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream, const char *api) {
  bool empty;
  cudaError_t err = copy_enter(dst, dpitch, src, spitch, width, height, kind, &empty);
  if (err || empty)
    return err;
  if (rt.pageable_error) {
    pthread_mutex_lock(&rt.lock);
    bool refused = pageable_refused_locked(dst, src, kind, api);
    pthread_mutex_unlock(&rt.lock);
    if (refused)
      return rt_error(cudaErrorInvalidValue);
  }
  CopyOp *c = copy_op(dst, dpitch, src, spitch, width, height, api);
  if (!c)
    return rt_error(cudaErrorMemoryAllocation);
  pthread_mutex_lock(&rt.lock);
  bool pageable = end_kind_locked(dst, kind, true) == MEM_PAGEABLE ||
                  end_kind_locked(src, kind, false) == MEM_PAGEABLE;
  pthread_mutex_unlock(&rt.lock);
  c->op.kind = pageable ? OP_MEMCPY_PAGEABLE : OP_MEMCPY;
  return rt_submit(stream, &c->op);
}

/* When the host learns that a synchronous call's work is done. */
typedef enum {
  LEARN_AFTER,  /* it returns when the work is done */
  LEARN_BEFORE, /* it waits for the legacy stream, then returns early */
  LEARN_NEVER,  /* it returns early without waiting */
} Learn;

/*
 * Runs op on the legacy stream for a synchronous call, if no capture
 * forbids it, and waits for it. What the checker lets the host learn
 * follows `learn`, not the wait: the wait only makes results visible
 * sooner than CUDA promises. rt.lock held.
 */
static cudaError_t run_sync_locked(Op *op, Learn learn) {
  Stream *legacy = rt_stream(NULL);
  if (capture_forbids_unsafe_locked()) {
    op_unref(op);
    return cudaErrorStreamCaptureUnsupported;
  }
  if (rt.check && learn == LEARN_BEFORE)
    check_host_sync_locked(legacy->clock);
  cudaError_t err = rt_submit_locked(legacy, op);
  if (err)
    return err;
  rt_wait_fence_locked(rt_last_fence_locked(legacy));
  if (rt.check && learn == LEARN_AFTER)
    check_host_sync_locked(legacy->clock);
  return rt_wait_result();
}

static cudaError_t copy_sync(void *dst, size_t dpitch, const void *src, size_t spitch,
                             size_t width, size_t height, enum cudaMemcpyKind kind,
                             const char *api) {
  bool empty;
  cudaError_t err = copy_enter(dst, dpitch, src, spitch, width, height, kind, &empty);
  if (err || empty)
    return err;
  CopyOp *c = copy_op(dst, dpitch, src, spitch, width, height, api);
  if (!c)
    return rt_error(cudaErrorMemoryAllocation);
  pthread_mutex_lock(&rt.lock);
  MemKind to = end_kind_locked(dst, kind, true), from = end_kind_locked(src, kind, false);
  Learn learn = LEARN_AFTER;
  if (to == MEM_DEVICE && from == MEM_PAGEABLE) {
    learn = LEARN_BEFORE;
    c->op.unsynced = "a pageable cudaMemcpy";
  } else if (to == MEM_DEVICE && from == MEM_DEVICE) {
    learn = LEARN_NEVER;
    c->op.unsynced = "a device-to-device cudaMemcpy";
  }
  err = run_sync_locked(&c->op, learn);
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return copy_async(dst, count, src, count, count, 1, kind, stream, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  return copy_sync(dst, count, src, count, count, 1, kind, "cudaMemcpy");
}

/* ---- copies between devices ---- */

/* Whether [p, p + count) lies in memory that `device` allocated. rt.lock held. */
static bool owned_by_locked(const void *p, size_t count, int device) {
  const Alloc *a = table_holding_locked(p);
  return a && a->device == device && (uintptr_t)p + count <= a->lo + a->size;
}

/* rt_enter, then the checks of a peer copy's arguments. */
static cudaError_t peer_enter(void *dst, int dstDevice, const void *src, int srcDevice,
                              size_t count) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  int n = rt_device_count();
  if (dstDevice < 0 || dstDevice >= n || srcDevice < 0 || srcDevice >= n)
    return rt_error(cudaErrorInvalidDevice);
  if (count == 0)
    return cudaSuccess;
  if (!dst || !src)
    return rt_error(cudaErrorInvalidValue);
  pthread_mutex_lock(&rt.lock);
  bool ok = owned_by_locked(dst, count, dstDevice) && owned_by_locked(src, count, srcDevice);
  pthread_mutex_unlock(&rt.lock);
  return ok ? cudaSuccess : rt_error(cudaErrorInvalidValue);
}

/*
 * CUDA refuses a peer copy on a capturing stream and invalidates the
 * capture: cudaErrorStreamCaptureUnsupported from CUDA 13's driver on an
 * H200 (2026-12-04), with both devices the same. A cudaMemcpyAsync between
 * two devices' pointers is what a graph can hold.
 */
cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
                                size_t count, cudaStream_t stream) {
  cudaError_t err = peer_enter(dst, dstDevice, src, srcDevice, count);
  if (err)
    return err;
  pthread_mutex_lock(&rt.lock);
  Stream *s = rt_stream(stream);
  bool capturing = s->capture != NULL;
  if (capturing)
    capture_invalidate_locked(s->capture);
  pthread_mutex_unlock(&rt.lock);
  if (capturing)
    return rt_error(cudaErrorStreamCaptureUnsupported);
  if (count == 0)
    return cudaSuccess;
  CopyOp *c = copy_op(dst, count, src, count, count, 1, "cudaMemcpyPeerAsync");
  if (!c)
    return rt_error(cudaErrorMemoryAllocation);
  return rt_submit(stream, &c->op);
}

/*
 * CUDA: asynchronous with respect to the host, but serialised with all
 * pending and future work of the current device, srcDevice and dstDevice.
 * It runs on the current device's legacy stream after everything queued
 * so far on those devices; later work is ordered after it only as after
 * any legacy-stream work (blocking streams of the current device, or a
 * synchronisation), which is stricter than CUDA.
 */
cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice,
                           size_t count) {
  cudaError_t err = peer_enter(dst, dstDevice, src, srcDevice, count);
  if (err || count == 0)
    return err;
  CopyOp *c = copy_op(dst, count, src, count, count, 1, "cudaMemcpyPeer");
  if (!c)
    return rt_error(cudaErrorMemoryAllocation);
  c->op.unsynced = "a cudaMemcpyPeer";
  pthread_mutex_lock(&rt.lock);
  Stream *legacy = rt_stream(NULL);
  if (capture_forbids_unsafe_locked()) {
    op_unref(&c->op);
    err = cudaErrorStreamCaptureUnsupported;
  } else if (capture_blocks_legacy_locked(legacy->device, true)) {
    op_unref(&c->op);
    err = cudaErrorStreamCaptureImplicit;
  } else {
    if (rt.check)
      check_enter_locked(legacy);
    rt_order_after_devices_locked(legacy, 1u << rt_device() | 1u << srcDevice | 1u << dstDevice);
    err = rt_submit_locked(legacy, &c->op);
  }
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream) {
  return copy_async(dst, dpitch, src, spitch, width, height, kind, stream, "cudaMemcpy2DAsync");
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height, enum cudaMemcpyKind kind) {
  return copy_sync(dst, dpitch, src, spitch, width, height, kind, "cudaMemcpy2D");
}

typedef struct FillOp {
  Op op;
  char *dst;
  int value;
  size_t count;
} FillOp;

static void run_fill(Op *op) {
  FillOp *f = (FillOp *)op;
  memset(f->dst, f->value, f->count);
}

static FillOp *fill_op(void *dst, int value, size_t count, const char *api) {
  FillOp *f = op_new(sizeof *f, run_fill, api);
  if (!f)
    return NULL;
  f->dst = dst;
  f->value = value;
  f->count = count;
  f->op.kind = OP_MEMSET;
  op_span(&f->op, dst, count, true);
  return f;
}

/* rt_enter, the checks of a memset, and its op; cudaSuccess with *out NULL
 * means nothing to fill. */
static cudaError_t fill_start(void *dst, int value, size_t count, const char *api, FillOp **out) {
  *out = NULL;
  cudaError_t err = rt_enter();
  if (err || count == 0)
    return err;
  if (!dst)
    return rt_error(cudaErrorInvalidValue);
  *out = fill_op(dst, value, count, api);
  return *out ? cudaSuccess : rt_error(cudaErrorMemoryAllocation);
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
  FillOp *f;
  cudaError_t err = fill_start(devPtr, value, count, "cudaMemsetAsync", &f);
  if (err || !f)
    return err;
  return rt_submit(stream, &f->op);
}

/* Synchronous for pinned and managed memory; on device memory it may
 * return before the fill is done. */
cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
  FillOp *f;
  cudaError_t err = fill_start(devPtr, value, count, "cudaMemset", &f);
  if (err || !f)
    return err;
  pthread_mutex_lock(&rt.lock);
  Learn learn = LEARN_AFTER;
  const Alloc *a = table_holding_locked(devPtr);
  if (a && a->kind == OWN_DEVICE) {
    learn = LEARN_NEVER;
    f->op.unsynced = "a cudaMemset";
  }
  err = run_sync_locked(&f->op, learn);
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}
