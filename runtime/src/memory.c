/*
 * memory.c - "device" memory, which is host memory, and the copies and
 * fills that run on streams.
 *
 * Allocations are remembered with their size: cudaFree must know it to
 * make the checker forget the freed bytes, and cudaFreeAsync to check that
 * nothing still uses them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

#define ALIGN 256

/* ---- the allocation table: open addressing keyed by address ---- */

typedef struct Alloc {
  uintptr_t p; /* 0: empty, 1: deleted */
  size_t size;
} Alloc;

static struct {
  Alloc *slots;
  size_t cap, used; /* used counts deleted slots too */
} table;

static size_t slot_of(uintptr_t p, size_t cap) {
  return (p / ALIGN * 11400714819323198485u) & (cap - 1);
}

static bool table_grow_locked(void) {
  size_t cap = table.cap ? 2 * table.cap : 1024;
  Alloc *slots = calloc(cap, sizeof *slots);
  if (!slots)
    return false;
  size_t used = 0;
  for (size_t i = 0; i < table.cap; i++) {
    Alloc a = table.slots[i];
    if (a.p <= 1)
      continue;
    size_t j = slot_of(a.p, cap);
    while (slots[j].p)
      j = (j + 1) & (cap - 1);
    slots[j] = a;
    used++;
  }
  free(table.slots);
  table.slots = slots;
  table.cap = cap;
  table.used = used;
  return true;
}

static bool table_add_locked(void *p, size_t size) {
  if (2 * (table.used + 1) > table.cap && !table_grow_locked())
    return false;
  size_t j = slot_of((uintptr_t)p, table.cap);
  while (table.slots[j].p > 1)
    j = (j + 1) & (table.cap - 1);
  if (table.slots[j].p == 0)
    table.used++;
  table.slots[j] = (Alloc){(uintptr_t)p, size};
  return true;
}

static Alloc *table_find_locked(const void *p) {
  if (!table.cap)
    return NULL;
  size_t j = slot_of((uintptr_t)p, table.cap);
  while (table.slots[j].p) {
    if (table.slots[j].p == (uintptr_t)p)
      return &table.slots[j];
    j = (j + 1) & (table.cap - 1);
  }
  return NULL;
}

size_t mem_size_locked(const void *p) {
  Alloc *a = table_find_locked(p);
  return a ? a->size : 0;
}

static cudaError_t alloc(void **out, size_t size) {
  if (!out)
    return cudaErrorInvalidValue;
  *out = NULL;
  void *p = NULL;
  size_t rounded = (size + ALIGN - 1) / ALIGN * ALIGN;
  if (rounded == 0)
    rounded = ALIGN;
  if (posix_memalign(&p, ALIGN, rounded) != 0)
    return cudaErrorMemoryAllocation;
  pthread_mutex_lock(&rt.lock);
  bool ok = table_add_locked(p, size);
  pthread_mutex_unlock(&rt.lock);
  if (!ok) {
    free(p);
    return cudaErrorMemoryAllocation;
  }
  *out = p;
  return cudaSuccess;
}

/* Removes p from the table; false when p is not an allocation of ours. */
static bool forget_locked(void *p) {
  Alloc *a = table_find_locked(p);
  if (!a)
    return false;
  if (rt.check)
    check_forget_locked((uintptr_t)p, (uintptr_t)p + a->size);
  a->p = 1;
  return true;
}

cudaError_t cudaMalloc(void **devPtr, size_t size) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  return rt_error(alloc(devPtr, size));
}

cudaError_t cudaMallocHost(void **ptr, size_t size) {
  return cudaMalloc(ptr, size);
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags) {
  (void)flags;
  return cudaMalloc(pHost, size);
}

cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags) {
  (void)flags;
  return cudaMalloc(devPtr, size);
}

/* Frees after the whole device is idle, as CUDA's cudaFree does. */
static cudaError_t free_sync(void *p) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!p)
    return cudaSuccess;
  pthread_mutex_lock(&rt.lock);
  if (rt.ncaptures > 0) {
    pthread_mutex_unlock(&rt.lock);
    return rt_error(cudaErrorStreamCaptureUnsupported);
  }
  rt_sync_all_locked();
  bool ours = forget_locked(p);
  pthread_mutex_unlock(&rt.lock);
  if (!ours)
    return rt_error(cudaErrorInvalidDevicePointer);
  free(p);
  return cudaSuccess;
}

cudaError_t cudaFree(void *devPtr) {
  return free_sync(devPtr);
}

cudaError_t cudaFreeHost(void *ptr) {
  return free_sync(ptr);
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
  return rt_error(alloc(devPtr, size));
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
  pthread_mutex_lock(&rt.lock);
  if (s->capture) {
    err = cudaErrorNotSupported;
    op_unref(&f->op);
  } else {
    Alloc *a = table_find_locked(devPtr);
    if (!a) {
      err = cudaErrorInvalidDevicePointer;
      op_unref(&f->op);
    } else {
      /* Freeing is a write: anything still using the bytes unordered races. */
      op_span(&f->op, devPtr, a->size, true);
      err = rt_submit_locked(s, &f->op);
      if (err == cudaSuccess)
        forget_locked(devPtr);
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
  long long rows = height, sstride = spitch, dstride = dpitch, w = width, one = 1;
  long long dims[2] = {rows, w}, ss[2] = {sstride, one}, ds[2] = {dstride, one};
  op_span_strided(&c->op, src, 2, dims, ss, 1, false);
  op_span_strided(&c->op, dst, 2, dims, ds, 1, true);
  return c;
}

static cudaError_t copy_async(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream, const char *api) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!kind_ok(kind))
    return rt_error(cudaErrorInvalidMemcpyDirection);
  if (width == 0 || height == 0)
    return cudaSuccess;
  if (!dst || !src || (height > 1 && (dpitch < width || spitch < width)))
    return rt_error(cudaErrorInvalidValue);
  CopyOp *c = copy_op(dst, dpitch, src, spitch, width, height, api);
  if (!c)
    return rt_error(cudaErrorMemoryAllocation);
  return rt_submit(stream, &c->op);
}

/* Submits on the legacy stream and waits: the host sees the result. */
static cudaError_t finish_sync(cudaError_t err) {
  if (err)
    return err;
  pthread_mutex_lock(&rt.lock);
  rt_wait_fence_locked(rt_last_fence_locked(rt.legacy));
  if (rt.check)
    check_host_sync_locked(rt.legacy->clock);
  pthread_mutex_unlock(&rt.lock);
  if (rt_failed())
    return rt_error(cudaErrorLaunchFailure);
  return rt_error(rt_async_error());
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return copy_async(dst, count, src, count, count, 1, kind, stream, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  return finish_sync(copy_async(dst, count, src, count, count, 1, kind, NULL, "cudaMemcpy"));
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream) {
  return copy_async(dst, dpitch, src, spitch, width, height, kind, stream, "cudaMemcpy2DAsync");
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height, enum cudaMemcpyKind kind) {
  return finish_sync(
      copy_async(dst, dpitch, src, spitch, width, height, kind, NULL, "cudaMemcpy2D"));
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

static cudaError_t fill(void *dst, int value, size_t count, cudaStream_t stream) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (count == 0)
    return cudaSuccess;
  if (!dst)
    return rt_error(cudaErrorInvalidValue);
  FillOp *f = op_new(sizeof *f, run_fill, "cudaMemsetAsync");
  if (!f)
    return rt_error(cudaErrorMemoryAllocation);
  f->dst = dst;
  f->value = value;
  f->count = count;
  op_span(&f->op, dst, count, true);
  return rt_submit(stream, &f->op);
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
  return fill(devPtr, value, count, stream);
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
  return finish_sync(fill(devPtr, value, count, NULL));
}
