/*
 * walk.c - parallel loops over strided, broadcast tensors.
 *
 * The index space is cut into equal ranges of elements, one per part; a
 * part walks its range row by row (the innermost dim), so even a tensor that
 * merged into a single row is split across the cores.
 */
#include <string.h>

#include "dnn.h"

void walk_init(Walk *w, int rank, const long long *dims, size_t elem) {
  memset(w, 0, sizeof *w);
  w->rank = rank;
  w->elem = elem;
  w->total = 1;
  for (int i = 0; i < rank; i++) {
    w->dims[i] = dims[i];
    w->total *= dims[i];
  }
}

void walk_add(Walk *w, const void *base, const long long *strides) {
  int k = w->nops++;
  w->base[k] = (char *)base;
  for (int i = 0; i < w->rank; i++)
    w->strides[k][i] = strides[i];
}

/* Puts the dims in the order of the last operand's strides (the output's,
   as the callers add it last), largest first, the same for every operand:
   rows only see elements, so any order is right, and this one lets
   channels-last operands merge as contiguous ones do. Stable: operands in
   ONNX's order keep their dims as they are. */
static void order_by_last(Walk *w) {
  const long long *key = w->strides[w->nops - 1];
  for (int i = 1; i < w->rank; i++)
    for (int j = i; j > 0 && key[j] > key[j - 1]; j--) {
      long long t = w->dims[j];
      w->dims[j] = w->dims[j - 1];
      w->dims[j - 1] = t;
      for (int k = 0; k < w->nops; k++) {
        t = w->strides[k][j];
        w->strides[k][j] = w->strides[k][j - 1];
        w->strides[k][j - 1] = t;
      }
    }
}

/* Drops dims of size 1 and merges dims contiguous for every operand, after
   order_by_last. */
static void coalesce(Walk *w) {
  if (w->nops > 0)
    order_by_last(w);
  int r = 0;
  for (int i = 0; i < w->rank; i++) {
    if (w->dims[i] == 1)
      continue;
    if (r > 0) {
      bool merge = true;
      for (int k = 0; k < w->nops; k++)
        if (w->strides[k][r - 1] != w->strides[k][i] * w->dims[i])
          merge = false;
      if (merge) {
        w->dims[r - 1] *= w->dims[i];
        for (int k = 0; k < w->nops; k++)
          w->strides[k][r - 1] = w->strides[k][i];
        continue;
      }
    }
    w->dims[r] = w->dims[i];
    for (int k = 0; k < w->nops; k++)
      w->strides[k][r] = w->strides[k][i];
    r++;
  }
  if (r == 0) {
    w->dims[0] = 1;
    for (int k = 0; k < w->nops; k++)
      w->strides[k][0] = 0;
    r = 1;
  }
  w->rank = r;
}

typedef struct WalkRun {
  const Walk *w;
  RowFn *row;
  void *ctx;
} WalkRun;

static void walk_part(void *arg, int part, int nparts) {
  const WalkRun *run = arg;
  const Walk *w = run->w;
  long long begin = w->total * part / nparts, end = w->total * (part + 1) / nparts;
  int last = w->rank - 1;
  long long idx[MAX_DIMS], rem = begin;
  for (int d = last; d >= 0; d--) {
    idx[d] = rem % w->dims[d];
    rem /= w->dims[d];
  }
  long long inner[WALK_OPS];
  for (int k = 0; k < w->nops; k++)
    inner[k] = w->strides[k][last];
  for (long long at = begin; at < end;) {
    char *p[WALK_OPS];
    for (int k = 0; k < w->nops; k++) {
      long long off = 0;
      for (int d = 0; d <= last; d++)
        off += idx[d] * w->strides[k][d];
      p[k] = w->base[k] + off * (long long)w->elem;
    }
    long long n = w->dims[last] - idx[last];
    if (n > end - at)
      n = end - at;
    run->row(run->ctx, p, inner, n);
    at += n;
    idx[last] += n;
    for (int d = last; d > 0 && idx[d] == w->dims[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
    }
  }
}

void walk_run(Walk *w, RowFn *row, void *ctx) {
  if (w->total == 0)
    return;
  coalesce(w);
  WalkRun run = {w, row, ctx};
  pool_run(walk_part, &run, pool_parts(w->total, 32768));
}

bool broadcast_strides(const Tensor *t, int rank, const long long *dims, long long *out) {
  if (t->rank != rank)
    return false;
  for (int i = 0; i < rank; i++) {
    if (t->dims[i] == dims[i])
      out[i] = t->strides[i];
    else if (t->dims[i] == 1)
      out[i] = 0;
    else
      return false;
  }
  return true;
}
