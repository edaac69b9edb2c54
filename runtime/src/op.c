/*
 * op.c - operations: allocation, reference counting and the byte ranges
 * they touch, which the checking mode compares.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* Past this many contiguous runs a strided access is checked as one range
 * from its lowest to its highest byte: safe, only less precise. */
#define MAX_RUNS 4096 /* CHECKED_RUNS in passes/concat_in_place.c relies on it */

/*
 * OPC_RT_FAIL=API[:N] makes the N-th operation (default the first) that the
 * call API builds fail as if out of memory, so that tests can reach a
 * program's error paths at a chosen call, inside a capture for instance.
 */
static bool injected_failure(const char *api) {
  static int remaining = -1; /* calls of the named API left before the failing one */
  static const char *name;
  static size_t len;
  if (remaining == -1) {
    const char *env = getenv("OPC_RT_FAIL");
    remaining = 0;
    if (env && *env) {
      const char *colon = strchr(env, ':');
      name = env;
      len = colon ? (size_t)(colon - env) : strlen(env);
      remaining = colon ? atoi(colon + 1) : 1;
    }
  }
  if (!name || strlen(api) != len || strncmp(api, name, len) != 0)
    return false;
  return __atomic_sub_fetch(&remaining, 1, __ATOMIC_RELAXED) == 0;
}

void *op_new(size_t size, OpFn *run, const char *api) {
  if (injected_failure(api))
    return NULL;
  Op *op = calloc(1, size);
  if (!op)
    return NULL;
  op->run = run;
  op->refs = 1;
  op->device = -1;
  op->api = api;
  op->name = nvtx_current();
  return op;
}

void op_ref(Op *op) {
  __atomic_add_fetch(&op->refs, 1, __ATOMIC_RELAXED);
}

void op_unref(Op *op) {
  if (__atomic_sub_fetch(&op->refs, 1, __ATOMIC_ACQ_REL) > 0)
    return;
  if (op->release)
    op->release(op);
  free(op->spans);
  free(op);
}

void op_span(Op *op, const void *p, size_t bytes, bool write) {
  if (!rt.check || !p || bytes == 0)
    return;
  if (op->nspans == op->capspans) {
    int cap = op->capspans ? 2 * op->capspans : 8;
    Span *spans = realloc(op->spans, cap * sizeof *spans);
    if (!spans) {
      /* Losing a span could hide a race, so fail loudly instead. */
      fprintf(stderr, "opc-check: out of memory\n");
      check_fail();
      return;
    }
    op->spans = spans;
    op->capspans = cap;
  }
  uintptr_t lo = (uintptr_t)p;
  op->spans[op->nspans++] = (Span){lo, lo + bytes, write};
}

typedef struct Dim {
  long long size, stride; /* stride in bytes */
} Dim;

static int by_stride(const void *a, const void *b) {
  long long x = ((const Dim *)a)->stride, y = ((const Dim *)b)->stride;
  return (x > y) - (x < y);
}

void op_span_strided(Op *op, const void *p, int rank, const long long *dims,
                     const long long *strides, size_t elem, bool write) {
  if (!rt.check || !p)
    return;
  /* The set of addresses does not depend on the order of the dims, so
   * sort them by stride and merge those that continue a contiguous block. */
  Dim d[16];
  int n = 0;
  for (int i = 0; i < rank && i < 16; i++) {
    if (dims[i] == 0)
      return;
    if (dims[i] > 1)
      d[n++] = (Dim){dims[i], (strides[i] < 0 ? -strides[i] : strides[i]) * (long long)elem};
  }
  qsort(d, n, sizeof d[0], by_stride);
  long long block = elem;
  int k = 0;
  while (k < n && d[k].stride <= block) {
    block += (d[k].size - 1) * d[k].stride;
    k++;
  }
  long long runs = 1, extent = block;
  for (int i = k; i < n; i++) {
    runs *= d[i].size;
    extent += (d[i].size - 1) * d[i].stride;
    if (runs > MAX_RUNS)
      runs = MAX_RUNS + 1;
  }
  if (runs > MAX_RUNS) {
    op_span(op, p, extent, write);
    return;
  }
  long long idx[16] = {0};
  const char *base = p;
  for (long long r = 0; r < runs; r++) {
    long long off = 0;
    for (int i = k; i < n; i++)
      off += idx[i] * d[i].stride;
    op_span(op, base + off, block, write);
    for (int i = k; i < n; i++) {
      if (++idx[i] < d[i].size)
        break;
      idx[i] = 0;
    }
  }
}
