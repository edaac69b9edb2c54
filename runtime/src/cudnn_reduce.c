/*
 * cudnn_reduce.c - the cuDNN operations that combine many inputs into one
 * output: pooling, softmax, reductions and cross-channel LRN.
 */
#include <float.h>
#include <string.h>

#include "dnn.h"
#include "pool_vec.h"
#include "vector_math.h"

/* Row-major coordinates of `index` in dims[0..rank). */
static void unravel(long long index, int rank, const long long *dims, long long *idx) {
  for (int d = rank - 1; d >= 0; d--) {
    idx[d] = index % dims[d];
    index /= dims[d];
  }
}

static long long dot(int rank, const long long *idx, const long long *strides) {
  long long off = 0;
  for (int d = 0; d < rank; d++)
    off += idx[d] * strides[d];
  return off;
}

/* Every op here computes values v from an input x into y = alpha * v + beta * y. */
typedef struct XyOp {
  Op op;
  const float *x;
  float *y;
  float alpha, beta;
} XyOp;

/* Points the op at x and y. */
static void xy_set(XyOp *o, const void *alpha, const void *x, const void *beta, void *y) {
  o->x = x;
  o->y = y;
  o->alpha = *(const float *)alpha;
  o->beta = *(const float *)beta;
}

/* ... and records what it reads and writes. */
static void xy_init(XyOp *o, const void *alpha, const void *x, const Tensor *xt,
                    const void *beta, void *y, const Tensor *yt) {
  xy_set(o, alpha, x, beta, y);
  span_tensor(&o->op, x, xt, false);
  span_output(&o->op, y, yt, o->beta);
}

/* *y = alpha * v + beta * *y, except that a beta of 0 leaves the old *y out:
 * it may be garbage, even NaN. */
static void blend(const XyOp *o, float *y, float v) {
  v *= o->alpha;
  *y = o->beta != 0 ? v + o->beta * *y : v;
}

static void xy_bind(Op *inner, void *const *ptrs) {
  XyOp *o = (XyOp *)inner;
  o->x = ptrs[0];
  o->y = ptrs[1];
}

/* The op to queue for o, the first member of an op of `size` bytes built
 * over the float views of xt and yt: o's own op for float tensors, else a
 * half_op_new op running it over float copies of x (and of y when beta
 * reads it). NULL when out of memory (the op is then freed). */
static Op *xy_queued(XyOp *o, size_t size, const Tensor *xt, const Tensor *yt) {
  if (xt->type == CUDNN_DATA_FLOAT)
    return &o->op;
  HalfArg args[2] = {dnn_half_arg(o->x, xt, true, false),
                     dnn_half_arg(o->y, yt, o->beta != 0, true)};
  return half_op_new(&o->op, size, xy_bind, args, 2);
}

/* Runs fn over `items` independent items, `work` units in all: in parts of
 * at least `grain` units, at most one part per item. */
static void run_items(PartFn *fn, void *ctx, long long items, long long work, long long grain) {
  int parts = pool_parts(work, grain);
  if (parts > items)
    parts = (int)items;
  pool_run(fn, ctx, parts);
}

/* ---- pooling ---- */

typedef struct PoolOp {
  XyOp xy;
  cudnnPoolingMode_t mode;
  int planes, channels;
  int in[3], out[3], win[3], pad[3], stride[3];
  long long xs[5], ys[5]; /* n, c, d, h, w */
} PoolOp;

static bool pool_is_max(const PoolOp *p) {
  return p->mode == CUDNN_POOLING_MAX || p->mode == CUDNN_POOLING_MAX_DETERMINISTIC;
}

/* The part [lo, hi) of a window of `win` starting at `start` inside [0, n). */
static void clip_window(int start, int win, int n, int *lo, int *hi) {
  *lo = start < 0 ? 0 : start;
  *hi = start + win < n ? start + win : n;
}

/* The max of a and v, where a NaN wins: how max pooling folds. Two
 * selects, which compile to no branch even in a loop's scalar tail:
 * `v > a || v != v ? v : a` was a branch there, a coin toss the CPU
 * mispredicts, and the tails of rows 55 and 111 long took most of a pool's
 * time. */
static inline float max_nan(float a, float v) {
  float larger = a > v ? a : v; /* v when either is a NaN */
  return a != a ? a : larger;
}

/* acc[ow] = max or sum of acc[ow] and row[(ow * sw + off) * ws] for ow in
 * [lo, hi). Inlined with constant strides for the common cases, where the
 * compiler vectorises it. Max pooling lets a NaN win. */
static inline __attribute__((always_inline)) void fold_range(const float *restrict row,
                                                             float *restrict acc, int lo,
                                                             int hi, int sw, int off, long long ws,
                                                             bool is_max) {
  if (is_max) {
    for (int ow = lo; ow < hi; ow++)
      acc[ow] = max_nan(acc[ow], row[(long long)(ow * sw + off) * ws]);
  } else {
    for (int ow = lo; ow < hi; ow++)
      acc[ow] += row[(long long)(ow * sw + off) * ws];
  }
}

/*
 * Folds input row `row` into the window values acc[0..OW) of one output
 * row, one filter column kw at a time: for a fixed kw the outputs whose
 * window column falls inside the row form one range, so the inner loops
 * have no bounds checks and vectorise.
 */
static inline __attribute__((always_inline)) void pool_fold_row(const PoolOp *p,
                                                                const float *row, float *acc,
                                                                bool is_max) {
  int OW = p->out[2], IW = p->in[2], sw = p->stride[2], pw = p->pad[2];
  long long ws = p->xs[4];
  for (int kw = 0; kw < p->win[2]; kw++) {
    int off = kw - pw; /* input column of output 0 */
    int lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
    int hi = IW - off <= 0 ? 0 : (IW - off + sw - 1) / sw;
    hi = hi < OW ? hi : OW;
    if (ws == 1 && sw == 1)
      fold_range(row, acc, lo, hi, 1, off, 1, is_max);
    else if (ws == 1 && sw == 2)
      fold_range(row, acc, lo, hi, 2, off, 1, is_max);
    else
      fold_range(row, acc, lo, hi, sw, off, ws, is_max);
  }
}

/* The output of a window of `count` input values (0: wholly in the
 * padding) whose values folded to v. */
static inline __attribute__((always_inline)) float pool_value(const PoolOp *p, float v,
                                                              int count, float whole) {
  if (count == 0)
    return 0.0f;
  if (pool_is_max(p))
    return v;
  if (p->mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING)
    return v / whole;
  return v / (float)count;
}

/*
 * Writes one output row from its windows' values acc[0..OW) (overwritten):
 * the max, or the sum over the window's size or over its count of input
 * values, whose `rows` input rows (depth times height) the caller counted;
 * 0 for a window wholly in the padding. Blended into the row at y. The
 * windows whose width lies wholly inside the input, all but a few at the
 * edges, share one count, so their loops vectorise.
 */
static inline __attribute__((always_inline)) void pool_write_row(const PoolOp *p, float *acc,
                                                                 int rows, float *y) {
  int OW = p->out[2], IW = p->in[2], sw = p->stride[2], pw = p->pad[2], win = p->win[2];
  float whole = (float)(p->win[0] * p->win[1] * win);
  /* Outputs [a, b): ow sw - pw >= 0 and ow sw - pw + win <= IW. */
  int a = (pw + sw - 1) / sw;
  int b = IW - win + pw < 0 ? 0 : (IW - win + pw) / sw + 1;
  a = a < OW ? a : OW;
  b = b < a ? a : b < OW ? b : OW;
  for (int edge = 0; edge < 2; edge++)
    for (int ow = edge ? b : 0; ow < (edge ? OW : a); ow++) {
      int lo, hi;
      clip_window(ow * sw - pw, win, IW, &lo, &hi);
      acc[ow] = pool_value(p, acc[ow], hi > lo ? rows * (hi - lo) : 0, whole);
    }
  int inside = rows * win;
  if (inside == 0) {
    for (int ow = a; ow < b; ow++)
      acc[ow] = 0.0f;
  } else if (!pool_is_max(p)) {
    float d = p->mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? whole : (float)inside;
    for (int ow = a; ow < b; ow++)
      acc[ow] /= d;
  }
  if (p->ys[4] == 1 && p->xy.beta == 0) {
    float alpha = p->xy.alpha;
    for (int ow = 0; ow < OW; ow++)
      y[ow] = alpha * acc[ow];
    return;
  }
  for (int ow = 0; ow < OW; ow++)
    blend(&p->xy, y + ow * p->ys[4], acc[ow]);
}

/* One output row (od, oh) of one plane. */
OPC_VECTOR_CLONES static void pool_row(const PoolOp *p, const float *x, int od, int oh,
                                       float *acc, float *y) {
  bool is_max = pool_is_max(p);
  int dlo, dhi, hlo, hhi;
  clip_window(od * p->stride[0] - p->pad[0], p->win[0], p->in[0], &dlo, &dhi);
  clip_window(oh * p->stride[1] - p->pad[1], p->win[1], p->in[1], &hlo, &hhi);
  for (int ow = 0; ow < p->out[2]; ow++)
    acc[ow] = is_max ? -FLT_MAX : 0.0f;
  for (int d = dlo; d < dhi; d++)
    for (int h = hlo; h < hhi; h++)
      pool_fold_row(p, x + d * p->xs[2] + h * p->xs[3], acc, is_max);
  pool_write_row(p, acc, dhi > dlo && hhi > hlo ? (dhi - dlo) * (hhi - hlo) : 0, y);
}

/* Whether pool_plane or pool_plane_whole takes p: a 2-D pool over rows
 * contiguous in x and y. */
static bool pool_by_plane(const PoolOp *p) {
  return p->in[0] == 1 && p->win[0] == 1 && p->xs[4] == 1 && p->ys[4] == 1;
}

/* acc[i] = max or sum of acc[i] and src[i] for i in [0, n): a max lets a
 * NaN win. */
static inline __attribute__((always_inline)) void fold_into(float *restrict acc,
                                                            const float *restrict src,
                                                            long long n, bool is_max) {
  if (is_max)
    for (long long i = 0; i < n; i++)
      acc[i] = max_nan(acc[i], src[i]);
  else
    for (long long i = 0; i < n; i++)
      acc[i] += src[i];
}

/* acc[ow] = max or sum of row[ow sw + kw] over kw < KW, for ow < OW.
 * With a stride the row is first split by column phase into `phases`
 * (phase b holds columns b, b + sw, ...; each (n + sw - 1) / sw long), so
 * that every kw is a contiguous run: GCC leaves a strided max with a NaN
 * test scalar, but vectorises the split and the runs. */
static inline __attribute__((always_inline)) void fold_across(const float *restrict row, int n,
                                                              float *restrict phases,
                                                              float *restrict acc, int OW,
                                                              int KW, int sw, bool is_max) {
  int len = (n + sw - 1) / sw;
  if (sw == 1) {
    phases = (float *)row;
  } else if (sw == 2) {
    split_phases2(phases, phases + len, row, 0, n);
  } else {
    for (int q = 0; q < n; q++)
      phases[(long long)(q % sw) * len + q / sw] = row[q];
  }
  const float *first = phases;
  for (int ow = 0; ow < OW; ow++)
    acc[ow] = first[ow];
  for (int kw = 1; kw < KW; kw++) {
    const float *src = phases + (long long)(kw % sw) * len + kw / sw;
    if (is_max)
      for (int ow = 0; ow < OW; ow++)
        acc[ow] = max_nan(acc[ow], src[ow]);
    else
      for (int ow = 0; ow < OW; ow++)
        acc[ow] += src[ow];
  }
}

/*
 * A 2-D pool over one plane, an output row at a time: the window's input
 * rows are folded down into one row, which has -FLT_MAX (max) or 0
 * (average) in the padding either side, and that row is folded across
 * into the outputs, taking every stride-th column. Both folds are loops as
 * long as a row with no bounds checks, and the rows stay in the first
 * level cache; pool_row folds every (kh, kw) of the window across with the
 * stride instead, KH times the strided work. The same values as pool_row's:
 * -FLT_MAX is where its maxima start, a NaN wins, and an average divides
 * by the same count; only the order of the additions differs. `row` and
 * `phases` hold a padded input row each, `acc` an output row.
 */
OPC_VECTOR_CLONES static void pool_plane(const PoolOp *p, const float *x, float *y, float *row,
                                         float *phases, float *acc) {
  bool is_max = pool_is_max(p);
  float edge = is_max ? -FLT_MAX : 0.0f;
  int IH = p->in[1], IW = p->in[2], ph = p->pad[1], pw = p->pad[2];
  int KH = p->win[1], KW = p->win[2], OH = p->out[1], OW = p->out[2];
  int sh = p->stride[1], sw = p->stride[2], PW = IW + 2 * pw;
  float *v = row + pw;
  for (int q = 0; q < pw; q++)
    row[q] = v[IW + q] = edge;
  for (int oh = 0; oh < OH; oh++) {
    int hlo, hhi;
    clip_window(oh * sh - ph, KH, IH, &hlo, &hhi);
    if (hhi <= hlo) {
      for (int q = 0; q < IW; q++)
        v[q] = edge;
    } else {
      const float *top = x + hlo * p->xs[3];
      if (is_max)
        for (int q = 0; q < IW; q++)
          v[q] = max_nan(-FLT_MAX, top[q]);
      else
        memcpy(v, top, IW * sizeof(float));
      for (int h = hlo + 1; h < hhi; h++)
        fold_into(v, x + h * p->xs[3], IW, is_max);
    }
    if (sw == 1)
      fold_across(row, PW, phases, acc, OW, KW, 1, is_max);
    else if (sw == 2)
      fold_across(row, PW, phases, acc, OW, KW, 2, is_max);
    else
      fold_across(row, PW, phases, acc, OW, KW, sw, is_max);
    pool_write_row(p, acc, hhi > hlo ? hhi - hlo : 0, y + oh * p->ys[3]);
  }
}

/*
 * A 2-D pool with stride 1 over one plane, whole: the plane is copied with -FLT_MAX (max)
 * or 0 (average) around it, folded across the window's width in one long
 * loop over the whole padded plane (the last columns of each row mix with
 * the next and are never read), then down the window's height the same
 * way, at the padded width; with a stride, each output row's windows are
 * then taken from every stride-th column. A few operations per output in
 * loops as long as the plane, where pool_plane's are as short as a row
 * (7 to 35 in the usual networks), and mostly scalar tails: on GoogLeNet's
 * and Inception-V3's pools 20-50% faster than pool_plane. A stride would
 * waste all but one in stride^2 of its folds. The same values as
 * pool_row's: -FLT_MAX is where its maxima start, a NaN wins, and an
 * average divides by the same count; only the order of the additions
 * differs. `padded` and `across` hold a padded plane each, `acc` an
 * output row.
 */
OPC_VECTOR_CLONES static void pool_plane_whole(const PoolOp *p, const float *x, float *y,
                                               float *padded, float *across, float *acc) {
  bool is_max = pool_is_max(p);
  float edge = is_max ? -FLT_MAX : 0.0f;
  int IH = p->in[1], IW = p->in[2], ph = p->pad[1], pw = p->pad[2];
  int PH = IH + 2 * ph, PW = IW + 2 * pw, KH = p->win[1], KW = p->win[2];
  int OH = p->out[1], OW = p->out[2], sh = p->stride[1], sw = p->stride[2];
  for (int r = 0; r < PH; r++) {
    float *row = padded + (long long)r * PW;
    int ih = r - ph;
    if (ih < 0 || ih >= IH) {
      for (int q = 0; q < PW; q++)
        row[q] = edge;
      continue;
    }
    for (int q = 0; q < pw; q++)
      row[q] = row[pw + IW + q] = edge;
    memcpy(row + pw, x + ih * p->xs[3], IW * sizeof(float));
  }
  long long n = (long long)PH * PW - (KW - 1);
  memcpy(across, padded, n * sizeof(float));
  for (int kw = 1; kw < KW; kw++)
    fold_into(across, padded + kw, n, is_max);
  /* Down the height, into `padded` (no longer needed), at the padded width:
   * every output row at once without a stride, else row by row. */
  float *down = padded;
  long long width = (long long)(OW - 1) * sw + 1;
  long long m = sh == 1 ? (long long)(OH - 1) * PW + width : width;
  for (int oh = 0; oh < OH; oh++) {
    const float *top = across + (long long)oh * sh * PW;
    float *to = sh == 1 ? down + (long long)oh * PW : down;
    if (sh > 1 || oh == 0) {
      if (is_max)
        for (long long i = 0; i < m; i++)
          to[i] = max_nan(-FLT_MAX, top[i]);
      else
        memcpy(to, top, m * sizeof(float));
      for (int kh = 1; kh < KH; kh++)
        fold_into(to, top + (long long)kh * PW, m, is_max);
    }
    for (int ow = 0; ow < OW; ow++)
      acc[ow] = to[(long long)ow * sw];
    int hlo, hhi;
    clip_window(oh * sh - ph, KH, IH, &hlo, &hhi);
    pool_write_row(p, acc, hhi > hlo ? hhi - hlo : 0, y + oh * p->ys[3]);
  }
}

/* Whether p only samples x: 1x1 windows inside the input, every mode's
 * output the sampled value (a max of one, a sum of one over one). */
static bool pool_samples(const PoolOp *p) {
  for (int i = 0; i < 3; i++)
    if (p->win[i] != 1 || p->pad[i] != 0)
      return false;
  return true;
}

/* A plane of a pool that only samples x (pool_samples): every stride-th
 * value of every stride-th row. pool_row computes the same, but its
 * window clipping and folds made NASNet-A's 1x1 stride-2 pools about
 * twice as slow (264 planes of 28x28: 116-128 against 60-68 us, profiles
 * alternated on 2026-11-29), and pool_plane's padded copy slower still. */
static void sample_plane(const PoolOp *p, const float *x, float *y, float *acc) {
  for (int od = 0; od < p->out[0]; od++)
    for (int oh = 0; oh < p->out[1]; oh++) {
      const float *row = x + (long long)od * p->stride[0] * p->xs[2] +
                         (long long)oh * p->stride[1] * p->xs[3];
      long long step = p->stride[2] * p->xs[4];
      for (int ow = 0; ow < p->out[2]; ow++)
        acc[ow] = row[ow * step];
      pool_write_row(p, acc, 1, y + od * p->ys[2] + oh * p->ys[3]);
    }
}

/* p's planes for pool_plane_vectors (x and y set per plane). */
static PoolPlane plane_of(const PoolOp *p) {
  return (PoolPlane){
      .xrow = p->xs[3], .yrow = p->ys[3],
      .in_h = p->in[1], .in_w = p->in[2], .out_h = p->out[1], .out_w = p->out[2],
      .win_h = p->win[1], .win_w = p->win[2], .stride_h = p->stride[1], .stride_w = p->stride[2],
      .pad_h = p->pad[1], .pad_w = p->pad[2],
      .fold = pool_is_max(p) ? PLANE_MAX
              : p->mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? PLANE_AVERAGE_WHOLE
                                                                       : PLANE_AVERAGE_INSIDE,
      .lowest = -FLT_MAX, .alpha = p->xy.alpha, .beta = p->xy.beta};
}

static void vectors_part(const PoolOp *p, long long lo, long long hi) {
  PoolPlane pp = plane_of(p);
  float *across = scratch(0, (size_t)pool_across_floats(&pp) * sizeof(float));
  if (!across) {
    rt_fail_async(p->xy.op.api);
    return;
  }
  for (long long plane = lo; plane < hi; plane++) {
    long long n = plane / p->channels, c = plane % p->channels;
    pp.x = p->xy.x + n * p->xs[0] + c * p->xs[1];
    pp.y = p->xy.y + n * p->ys[0] + c * p->ys[1];
    pool_plane_vectors(&pp, across);
  }
}

static void pool_part(void *ctx, int part, int nparts) {
  const PoolOp *p = ctx;
  long long lo = (long long)p->planes * part / nparts, hi = (long long)p->planes * (part + 1) / nparts;
  PoolPlane shape = plane_of(p);
  if (!pool_samples(p) && pool_by_plane(p) && pool_vectors_fit(&shape)) {
    vectors_part(p, lo, hi);
    return;
  }
  float *acc = scratch(0, (size_t)p->out[2] * sizeof(float));
  bool samples = pool_samples(p), by_plane = !samples && pool_by_plane(p);
  bool whole = by_plane && p->stride[1] == 1 && p->stride[2] == 1;
  size_t width = (size_t)p->in[2] + 2 * p->pad[2] + p->stride[2];
  size_t bytes = (whole ? (p->in[1] + 2 * p->pad[1]) * width : width) * sizeof(float);
  float *buf1 = by_plane ? scratch(1, bytes) : NULL;
  float *buf2 = by_plane ? scratch(2, bytes) : NULL;
  if (!acc || (by_plane && (!buf1 || !buf2))) {
    rt_fail_async(p->xy.op.api);
    return;
  }
  for (long long plane = lo; plane < hi; plane++) {
    long long n = plane / p->channels, c = plane % p->channels;
    const float *x = p->xy.x + n * p->xs[0] + c * p->xs[1];
    float *y = p->xy.y + n * p->ys[0] + c * p->ys[1];
    if (samples) {
      sample_plane(p, x, y, acc);
      continue;
    }
    if (by_plane) {
      if (whole)
        pool_plane_whole(p, x, y, buf1, buf2, acc);
      else
        pool_plane(p, x, y, buf1, buf2, acc);
      continue;
    }
    for (int od = 0; od < p->out[0]; od++)
      for (int oh = 0; oh < p->out[1]; oh++)
        pool_row(p, x, od, oh, acc, y + od * p->ys[2] + oh * p->ys[3]);
  }
}

/* Whether x and y hold the channels innermost (NHWC, as opc stores the
 * data between int8 convolutions): pooled by pool_pixels, as the planes'
 * functions would read x at a stride of C. */
static bool pool_channels_last(const PoolOp *p) {
  return p->channels > 1 && p->xs[1] == 1 && p->ys[1] == 1;
}

/* The output rows (n, od, oh) [lo, hi) of a channels-last pool, a pixel at
 * a time: the window's pixels fold into acc along the channels, which
 * vectorises. The same folds, in the same order (depth, height, width),
 * as pool_row's of each channel. */
OPC_VECTOR_CLONES static void pool_pixels(const PoolOp *p, long long lo, long long hi,
                                          float *acc) {
  int C = p->channels, OW = p->out[2];
  bool is_max = pool_is_max(p);
  float whole = (float)(p->win[0] * p->win[1] * p->win[2]);
  for (long long r = lo; r < hi; r++) {
    long long n = r / ((long long)p->out[0] * p->out[1]);
    int od = (int)(r / p->out[1] % p->out[0]), oh = (int)(r % p->out[1]);
    int dlo, dhi, hlo, hhi;
    clip_window(od * p->stride[0] - p->pad[0], p->win[0], p->in[0], &dlo, &dhi);
    clip_window(oh * p->stride[1] - p->pad[1], p->win[1], p->in[1], &hlo, &hhi);
    const float *x = p->xy.x + n * p->xs[0];
    float *y = p->xy.y + n * p->ys[0] + od * p->ys[2] + oh * p->ys[3];
    for (int ow = 0; ow < OW; ow++) {
      int wlo, whi;
      clip_window(ow * p->stride[2] - p->pad[2], p->win[2], p->in[2], &wlo, &whi);
      for (int c = 0; c < C; c++)
        acc[c] = is_max ? -FLT_MAX : 0.0f;
      for (int d = dlo; d < dhi; d++)
        for (int h = hlo; h < hhi; h++)
          for (int w = wlo; w < whi; w++)
            fold_into(acc, x + d * p->xs[2] + h * p->xs[3] + w * p->xs[4], C, is_max);
      int count = dhi > dlo && hhi > hlo && whi > wlo ? (dhi - dlo) * (hhi - hlo) * (whi - wlo) : 0;
      float *out = y + ow * p->ys[4];
      for (int c = 0; c < C; c++) {
        float v = pool_value(p, acc[c], count, whole);
        if (p->xy.beta == 0)
          out[c] = p->xy.alpha * v;
        else
          blend(&p->xy, out + c, v);
      }
    }
  }
}

static void pool_pixels_part(void *ctx, int part, int nparts) {
  const PoolOp *p = ctx;
  long long rows = (long long)p->planes / p->channels * p->out[0] * p->out[1];
  float *acc = scratch(0, (size_t)p->channels * sizeof(float));
  if (!acc) {
    rt_fail_async(p->xy.op.api);
    return;
  }
  pool_pixels(p, rows * part / nparts, rows * (part + 1) / nparts, acc);
}

static void run_pool(Op *op) {
  PoolOp *p = (PoolOp *)op;
  if (pool_channels_last(p)) {
    long long rows = (long long)p->planes / p->channels * p->out[0] * p->out[1];
    long long per_row = (long long)p->channels * p->out[2] * p->win[0] * p->win[1] * p->win[2];
    run_items(pool_pixels_part, p, rows, rows * per_row, 1 << 15);
    return;
  }
  long long per_plane = (long long)p->out[0] * p->out[1] * p->out[2] * p->win[0] * p->win[1] * p->win[2];
  run_items(pool_part, p, p->planes, (long long)p->planes * per_plane, 1 << 15);
}

/* Copies n spatial values (the last n of rank) into 3 slots, padding in front. */
static void spatial_ll(long long *to, const long long *from, int n, long long fill) {
  for (int i = 0; i < 3; i++)
    to[i] = i < 3 - n ? fill : from[i - (3 - n)];
}

cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t poolingDesc,
                                  const void *alpha, const cudnnTensorDescriptor_t xDesc,
                                  const void *x, const void *beta,
                                  const cudnnTensorDescriptor_t yDesc, void *y) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !poolingDesc || !alpha || !beta || !xDesc || !x || !yDesc || !y)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  const Tensor *xt = &xDesc->t, *yt = &yDesc->t;
  int ns = poolingDesc->nspatial;
  if (!ns || !xt->rank || !yt->rank)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  if (xt->rank != ns + 2 || yt->rank != ns + 2 || xt->dims[0] != yt->dims[0] ||
      xt->dims[1] != yt->dims[1])
    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  /* cuDNN: BAD_PARAM when x's data type differs from y's. */
  cudnnStatus_t st = check_pair_type(xt, yt);
  if (st)
    return st;
  /* 16-bit tensors: the op runs over packed float copies (xy_queued). */
  Tensor xf = dnn_float_view(xt), yf = dnn_float_view(yt);
  PoolOp *p = op_new(sizeof *p, run_pool, "cudnnPoolingForward");
  if (!p)
    return CUDNN_STATUS_ALLOC_FAILED;
  p->mode = poolingDesc->mode;
  p->planes = (int)(xt->dims[0] * xt->dims[1]);
  p->channels = (int)xt->dims[1];
  long long in[3], out[3], xs[3], ys[3];
  spatial_ll(in, xt->dims + 2, ns, 1);
  spatial_ll(out, yt->dims + 2, ns, 1);
  spatial_ll(xs, xf.strides + 2, ns, 0);
  spatial_ll(ys, yf.strides + 2, ns, 0);
  p->xs[0] = xf.strides[0];
  p->xs[1] = xf.strides[1];
  p->ys[0] = yf.strides[0];
  p->ys[1] = yf.strides[1];
  for (int i = 0; i < 3; i++) {
    int j = i - (3 - ns);
    p->win[i] = j < 0 ? 1 : poolingDesc->window[j];
    p->pad[i] = j < 0 ? 0 : poolingDesc->pad[j];
    p->stride[i] = j < 0 ? 1 : poolingDesc->stride[j];
    p->in[i] = (int)in[i];
    p->out[i] = (int)out[i];
    p->xs[2 + i] = xs[i];
    p->ys[2 + i] = ys[i];
    if (p->out[i] != 1 + (p->in[i] + 2 * p->pad[i] - p->win[i]) / p->stride[i] ||
        p->pad[i] >= p->win[i]) {
      op_unref(&p->xy.op);
      return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
    }
  }
  xy_set(&p->xy, alpha, x, beta, y);
  float b = p->xy.beta;
  Op *op = xy_queued(&p->xy, sizeof *p, xt, yt);
  if (!op)
    return CUDNN_STATUS_ALLOC_FAILED;
  span_tensor(op, x, xt, false);
  span_output(op, y, yt, b);
  return dnn_submit(handle, op, DNN_POOLING);
}

/* ---- ops along the channels: softmax and LRN ---- */

/*
 * x and y seen as N x C x S (S: the spatial positions). The offsets of the
 * spatial positions are computed on every run, into a copy of the op: the
 * op stays as submitted, since a captured graph replays it.
 */
typedef struct Channels {
  long long n, c, s;
  long long xn, xc, yn, yc; /* strides of the n and c dims */
  Tensor xsp, ysp;          /* the spatial dims alone */
  const long long *xoff, *yoff; /* set per run */
} Channels;

static void spatial_part(Tensor *sp, const Tensor *t) {
  sp->type = t->type;
  sp->rank = t->rank - 2;
  for (int i = 2; i < t->rank; i++) {
    sp->dims[i - 2] = t->dims[i];
    sp->strides[i - 2] = t->strides[i];
  }
}

static void channels_of(Channels *ch, const Tensor *xt, const Tensor *yt) {
  ch->n = xt->dims[0];
  ch->c = xt->dims[1];
  ch->s = tensor_count(xt) / (ch->n * ch->c);
  ch->xn = xt->strides[0];
  ch->xc = xt->strides[1];
  ch->yn = yt->strides[0];
  ch->yc = yt->strides[1];
  spatial_part(&ch->xsp, xt);
  spatial_part(&ch->ysp, yt);
}

static void spatial_offsets(const Tensor *sp, long long *off, long long count) {
  long long idx[MAX_DIMS] = {0};
  for (long long i = 0; i < count; i++) {
    off[i] = dot(sp->rank, idx, sp->strides);
    for (int d = sp->rank - 1; d >= 0; d--) {
      if (++idx[d] < sp->dims[d])
        break;
      idx[d] = 0;
    }
  }
}

/* Sets the offsets for one run, in scratch slots `slot` and `slot + 1`;
 * false when out of memory, which fails the run of `api`. */
static bool channels_start(Channels *ch, int slot, const char *api) {
  long long *xoff = scratch(slot, ch->s * sizeof(long long));
  long long *yoff = scratch(slot + 1, ch->s * sizeof(long long));
  if (!xoff || !yoff) {
    rt_fail_async(api);
    return false;
  }
  spatial_offsets(&ch->xsp, xoff, ch->s);
  spatial_offsets(&ch->ysp, yoff, ch->s);
  ch->xoff = xoff;
  ch->yoff = yoff;
  return true;
}

/* The sum of n contiguous values in double, in eight independent partial
 * sums, so that the loop vectorises without reordering any one sum; inlined
 * to take the instruction set of the caller's clone. */
static inline __attribute__((always_inline)) double sum_row(const float *x, long long n) {
  double part[8] = {0};
  long long i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++)
      part[k] += x[i + k];
  double sum = 0;
  for (; i < n; i++)
    sum += x[i];
  for (int k = 0; k < 8; k++)
    sum += part[k];
  return sum;
}

/* ---- softmax ---- */

/* INSTANCE normalises each image over C x S, CHANNEL each (image, position) over C. */
typedef struct SoftmaxOp {
  XyOp xy;
  Channels ch;
  cudnnSoftmaxAlgorithm_t algo;
  cudnnSoftmaxMode_t mode;
} SoftmaxOp;

/* Normalises `count` values at x[xo(i)] into y[yo(i)]; the offset of item
 * i is (i / s) * cstride + off[i % s]. */
static void softmax_group(const SoftmaxOp *o, const float *x, float *y, long long count,
                          long long s, long long xc, long long yc) {
  const long long *xoff = o->ch.xoff, *yoff = o->ch.yoff;
  float mx = -INFINITY;
  for (long long i = 0; i < count; i++) {
    float v = x[(i / s) * xc + xoff[i % s]];
    if (v > mx)
      mx = v;
  }
  if (o->algo == CUDNN_SOFTMAX_FAST)
    mx = 0; /* cuDNN's fast mode skips the max; exp may overflow, as there */
  double sum = 0;
  for (long long i = 0; i < count; i++)
    sum += expf(x[(i / s) * xc + xoff[i % s]] - mx);
  float logsum = (float)log(sum);
  for (long long i = 0; i < count; i++) {
    float v = x[(i / s) * xc + xoff[i % s]] - mx;
    float r = o->algo == CUDNN_SOFTMAX_LOG ? v - logsum : expf(v - logsum);
    blend(&o->xy, &y[(i / s) * yc + yoff[i % s]], r);
  }
}

/* softmax_group over `count` contiguous values: the same steps, with no
 * index division per value, and each step a loop that vectorises: the
 * exponentials by libmvec (whose last bit may differ from the scalar
 * expf's), the maximum and the sum in independent lanes (one running total
 * would be a chain the compiler may not reorder). Rows are often short
 * (attention over 16 or 49 keys); one of up to 256 values keeps its
 * exponentials for the second pass instead of computing them again. */
OPC_VECTOR_CLONES static void softmax_row(const SoftmaxOp *o, const float *x, float *y,
                                          long long count) {
  float lane[16];
  for (int k = 0; k < 16; k++)
    lane[k] = -INFINITY;
  long long i = 0;
  for (; i + 16 <= count; i += 16)
    for (int k = 0; k < 16; k++)
      lane[k] = x[i + k] > lane[k] ? x[i + k] : lane[k];
  for (; i < count; i++)
    lane[0] = x[i] > lane[0] ? x[i] : lane[0];
  float mx = -INFINITY;
  for (int k = 0; k < 16; k++)
    mx = lane[k] > mx ? lane[k] : mx;
  if (o->algo == CUDNN_SOFTMAX_FAST)
    mx = 0; /* cuDNN's fast mode skips the max; exp may overflow, as there */
  float e[256];
  double sum = 0;
  for (long long i0 = 0; i0 < count; i0 += 256) {
    int n = count - i0 < 256 ? (int)(count - i0) : 256;
    for (int k = 0; k < n; k++)
      e[k] = expf(x[i0 + k] - mx);
    sum += sum_row(e, n);
  }
  float logsum = (float)log(sum), scale = (float)(1.0 / sum);
  float alpha = o->xy.alpha, beta = o->xy.beta;
  for (long long i0 = 0; i0 < count; i0 += 256) {
    int n = count - i0 < 256 ? (int)(count - i0) : 256;
    if (o->algo == CUDNN_SOFTMAX_LOG) {
      for (int k = 0; k < n; k++)
        e[k] = (x[i0 + k] - mx) - logsum;
    } else {
      if (count > 256)
        for (int k = 0; k < n; k++)
          e[k] = expf(x[i0 + k] - mx);
      for (int k = 0; k < n; k++)
        e[k] *= scale;
    }
    float *yr = y + i0;
    if (beta != 0)
      for (int k = 0; k < n; k++)
        yr[k] = e[k] * alpha + beta * yr[k];
    else
      for (int k = 0; k < n; k++)
        yr[k] = e[k] * alpha;
  }
}

static long long softmax_groups(const SoftmaxOp *o) {
  return o->mode == CUDNN_SOFTMAX_MODE_INSTANCE ? o->ch.n : o->ch.n * o->ch.s;
}

static void softmax_part(void *ctx, int part, int nparts) {
  const SoftmaxOp *o = ctx;
  const Channels *ch = &o->ch;
  long long groups = softmax_groups(o);
  long long lo = groups * part / nparts, hi = groups * (part + 1) / nparts;
  for (long long g = lo; g < hi; g++) {
    if (o->mode == CUDNN_SOFTMAX_MODE_INSTANCE) {
      softmax_group(o, o->xy.x + g * ch->xn, o->xy.y + g * ch->yn, ch->c * ch->s, ch->s, ch->xc,
                    ch->yc);
    } else {
      long long n = g / ch->s, sp = g % ch->s;
      /* One position: offsets[sp] shifted to index 0, stride c apart. */
      const float *x = o->xy.x + n * ch->xn + ch->xoff[sp];
      float *y = o->xy.y + n * ch->yn + ch->yoff[sp];
      if (ch->xc == 1 && ch->yc == 1) {
        softmax_row(o, x, y, ch->c);
        continue;
      }
      SoftmaxOp one = *o;
      static const long long zero = 0;
      one.ch.xoff = &zero;
      one.ch.yoff = &zero;
      softmax_group(&one, x, y, ch->c, 1, ch->xc, ch->yc);
    }
  }
}

static void run_softmax(Op *op) {
  SoftmaxOp run = *(SoftmaxOp *)op;
  if (!channels_start(&run.ch, 0, op->api))
    return;
  run_items(softmax_part, &run, softmax_groups(&run), run.ch.n * run.ch.c * run.ch.s, 1 << 14);
}

cudnnStatus_t cudnnSoftmaxForward(cudnnHandle_t handle, cudnnSoftmaxAlgorithm_t algo,
                                  cudnnSoftmaxMode_t mode, const void *alpha,
                                  const cudnnTensorDescriptor_t xDesc, const void *x,
                                  const void *beta, const cudnnTensorDescriptor_t yDesc, void *y) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !alpha || !beta || !xDesc || !x || !yDesc || !y)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (algo < CUDNN_SOFTMAX_FAST || algo > CUDNN_SOFTMAX_LOG ||
      (mode != CUDNN_SOFTMAX_MODE_INSTANCE && mode != CUDNN_SOFTMAX_MODE_CHANNEL))
    return CUDNN_STATUS_BAD_PARAM;
  const Tensor *xt = &xDesc->t, *yt = &yDesc->t;
  cudnnStatus_t st = check_same_float(xt, yt, 3);
  if (st)
    return st;
  SoftmaxOp *o = op_new(sizeof *o, run_softmax, "cudnnSoftmaxForward");
  if (!o)
    return CUDNN_STATUS_ALLOC_FAILED;
  o->algo = algo;
  o->mode = mode;
  channels_of(&o->ch, xt, yt);
  xy_init(&o->xy, alpha, x, xt, beta, y, yt);
  return dnn_submit(handle, &o->xy.op, DNN_SOFTMAX);
}

/* ---- reductions ---- */

/*
 * Each output element reduces the sub-tensor of A over the dims where C has
 * 1. Kept and reduced dims are separated into two index spaces; a part
 * handles a range of output elements.
 */
typedef struct ReduceOp {
  XyOp xy; /* x: A, y: C */
  cudnnReduceTensorOp_t kind;
  bool want_indices;
  int krank, rrank;                     /* kept and reduced dims */
  long long kdims[MAX_DIMS], kas[MAX_DIMS], kcs[MAX_DIMS]; /* A's and C's strides */
  long long rdims[MAX_DIMS], ras[MAX_DIMS];
  long long outputs, reduced;
  unsigned *indices;
} ReduceOp;


/* Inlined into reduce_part's clones, so that sum_row takes their vectors. */
static inline __attribute__((always_inline)) float reduce_one(const ReduceOp *r, const float *a,
                                                              unsigned *index) {
  long long idx[MAX_DIMS] = {0};
  double acc;
  switch (r->kind) {
  case CUDNN_REDUCE_TENSOR_MUL:
  case CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS: acc = 1; break;
  case CUDNN_REDUCE_TENSOR_MIN: acc = INFINITY; break;
  case CUDNN_REDUCE_TENSOR_MAX: acc = -INFINITY; break;
  default: acc = 0; break;
  }
  long long best = 0;
  int last = r->rrank - 1;
  bool contiguous_sum = r->ras[last] == 1 &&
                        (r->kind == CUDNN_REDUCE_TENSOR_ADD || r->kind == CUDNN_REDUCE_TENSOR_AVG);
  for (long long t = 0; t < r->reduced;) {
    const float *row = a + (last > 0 ? dot(last, idx, r->ras) : 0);
    long long len = r->rdims[last], step = r->ras[last];
    if (contiguous_sum) {
      acc += sum_row(row, len);
      t += len;
    } else {
      for (long long i = 0; i < len; i++, t++) {
        float v = row[i * step];
        switch (r->kind) {
        case CUDNN_REDUCE_TENSOR_ADD:
        case CUDNN_REDUCE_TENSOR_AVG: acc += v; break;
        case CUDNN_REDUCE_TENSOR_MUL: acc *= v; break;
        case CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS: if (v != 0) acc *= v; break;
        case CUDNN_REDUCE_TENSOR_MIN: if (v < acc) { acc = v; best = t; } break;
        case CUDNN_REDUCE_TENSOR_MAX: if (v > acc) { acc = v; best = t; } break;
        case CUDNN_REDUCE_TENSOR_AMAX: if (fabsf(v) > acc) { acc = fabsf(v); best = t; } break;
        case CUDNN_REDUCE_TENSOR_NORM1: acc += fabsf(v); break;
        case CUDNN_REDUCE_TENSOR_NORM2: acc += (double)v * v; break;
        }
      }
    }
    for (int d = last - 1; d >= 0; d--) {
      if (++idx[d] < r->rdims[d])
        break;
      idx[d] = 0;
    }
  }
  if (r->kind == CUDNN_REDUCE_TENSOR_AVG)
    acc /= (double)r->reduced;
  else if (r->kind == CUDNN_REDUCE_TENSOR_NORM2)
    acc = sqrt(acc);
  if (index)
    *index = (unsigned)best;
  return (float)acc;
}

OPC_VECTOR_CLONES static void reduce_part(void *ctx, int part, int nparts) {
  const ReduceOp *r = ctx;
  long long lo = r->outputs * part / nparts, hi = r->outputs * (part + 1) / nparts;
  long long idx[MAX_DIMS];
  for (long long o = lo; o < hi; o++) {
    unravel(o, r->krank, r->kdims, idx);
    const float *a = r->xy.x + dot(r->krank, idx, r->kas);
    float *c = r->xy.y + dot(r->krank, idx, r->kcs);
    unsigned index;
    blend(&r->xy, c, reduce_one(r, a, &index));
    if (r->want_indices)
      r->indices[o] = index;
  }
}

/* Channels a lanes item of a sum whose outputs lie side by side in A. */
enum { LANES = 64 };

/* Whether r sums (or averages) over dims apart from outputs that sit next
   to each other in A, the last kept dim of stride 1 (a channels-last
   GlobalAveragePool, where each output otherwise walks every pixel at a
   stride): then a run of outputs is summed a pixel at a time. */
static bool sums_lanes(const ReduceOp *r) {
  if ((r->kind != CUDNN_REDUCE_TENSOR_ADD && r->kind != CUDNN_REDUCE_TENSOR_AVG) ||
      r->want_indices || r->krank < 1 || r->kas[r->krank - 1] != 1)
    return false;
  for (int d = 0; d < r->rrank; d++)
    if (r->ras[d] < r->kdims[r->krank - 1])
      return false;
  return true;
}

/* Item i of sums_lanes: the outputs [c0, c0 + LANES) of the last kept dim
   at the i / blocks-th place of the others. Each output's sum is taken in
   double in the order of reduce_one's strided walk, so the values are the
   same bits. */
OPC_VECTOR_CLONES static void lanes_part(void *ctx, int part, int nparts) {
  const ReduceOp *r = ctx;
  int last = r->krank - 1;
  long long width = r->kdims[last], blocks = (width + LANES - 1) / LANES;
  long long items = r->outputs / width * blocks;
  long long lo = items * part / nparts, hi = items * (part + 1) / nparts;
  long long idx[MAX_DIMS], at[MAX_DIMS];
  for (long long i = lo; i < hi; i++) {
    long long c0 = i % blocks * LANES, n = width - c0 < LANES ? width - c0 : LANES;
    unravel(i / blocks, last, r->kdims, idx);
    const float *a = r->xy.x + dot(last, idx, r->kas) + c0;
    float *c = r->xy.y + dot(last, idx, r->kcs) + c0 * r->kcs[last];
    double acc[LANES] = {0};
    for (int d = 0; d < r->rrank; d++)
      at[d] = 0;
    for (long long t = 0; t < r->reduced; t++) {
      const float *row = a + dot(r->rrank, at, r->ras);
      for (long long j = 0; j < n; j++)
        acc[j] += row[j];
      for (int d = r->rrank - 1; d >= 0; d--) {
        if (++at[d] < r->rdims[d])
          break;
        at[d] = 0;
      }
    }
    for (long long j = 0; j < n; j++) {
      double v = r->kind == CUDNN_REDUCE_TENSOR_AVG ? acc[j] / (double)r->reduced : acc[j];
      blend(&r->xy, c + j * r->kcs[last], (float)v);
    }
  }
}

static void run_reduce(Op *op) {
  ReduceOp *r = (ReduceOp *)op;
  if (sums_lanes(r)) {
    long long width = r->kdims[r->krank - 1];
    long long items = r->outputs / width * ((width + LANES - 1) / LANES);
    run_items(lanes_part, r, items, r->outputs * r->reduced, 1 << 15);
    return;
  }
  run_items(reduce_part, r, r->outputs, r->outputs * r->reduced, 1 << 15);
}

/*
 * The data types cudnnReduceTensor takes: A and C both FLOAT or both HALF,
 * HALF computed in float (the descriptor's compute type, which
 * cudnnSetReduceTensorDescriptor only sets to FLOAT). Flattened indices
 * only for FLOAT data. Anything else is NOT_SUPPORTED_DATA_TYPE (HALF with
 * BFLOAT16, FLOAT with either, other types), except BFLOAT16 with
 * BFLOAT16, which cuDNN refuses as plain NOT_SUPPORTED.
 */
static cudnnStatus_t reduce_types(const Tensor *a, const Tensor *c,
                                  cudnnReduceTensorDescriptor_t d) {
  if (a->type != c->type || !dnn_float_type(a->type))
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  if (a->type != CUDNN_DATA_FLOAT && d->indices != CUDNN_REDUCE_TENSOR_NO_INDICES)
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  /* What cuDNN 9.19 answered on an H200 for bfloat16 data. */
  if (a->type == CUDNN_DATA_BFLOAT16)
    return CUDNN_STATUS_NOT_SUPPORTED;
  return CUDNN_STATUS_SUCCESS;
}

static bool reduces_to(const Tensor *a, const Tensor *c) {
  if (a->rank != c->rank)
    return false;
  for (int i = 0; i < a->rank; i++)
    if (c->dims[i] != a->dims[i] && c->dims[i] != 1)
      return false;
  return true;
}

static bool reduce_indexed(cudnnReduceTensorDescriptor_t d) {
  return d->indices == CUDNN_REDUCE_TENSOR_FLATTENED_INDICES &&
         (d->op == CUDNN_REDUCE_TENSOR_MIN || d->op == CUDNN_REDUCE_TENSOR_MAX ||
          d->op == CUDNN_REDUCE_TENSOR_AMAX);
}

/*
 * The workspace a GPU reduction needs: one partial result per output and
 * block of 1024 reduced elements, as a two-pass reduction keeps: float
 * partials for 16-bit data too, which computes in float. None when nothing
 * is reduced. The CPU does not use it, but a caller that gives
 * less is refused, as cuDNN would.
 */
static size_t reduce_workspace(const Tensor *a, const Tensor *c) {
  long long outputs = tensor_count(c), reduced = tensor_count(a) / (outputs ? outputs : 1);
  if (reduced <= 1)
    return 0;
  size_t bytes = (size_t)outputs * ((reduced + 1023) / 1024) * sizeof(float);
  return (bytes + 255) / 256 * 256;
}

/* The argument checks both size queries make. */
static cudnnStatus_t check_size_query(cudnnHandle_t handle, cudnnReduceTensorDescriptor_t d,
                                      cudnnTensorDescriptor_t aDesc, cudnnTensorDescriptor_t cDesc,
                                      const size_t *sizeInBytes) {
  if (!handle || !d || !aDesc || !cDesc || !sizeInBytes)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (!reduces_to(&aDesc->t, &cDesc->t))
    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetReductionWorkspaceSize(cudnnHandle_t handle,
                                             const cudnnReduceTensorDescriptor_t reduceTensorDesc,
                                             const cudnnTensorDescriptor_t aDesc,
                                             const cudnnTensorDescriptor_t cDesc,
                                             size_t *sizeInBytes) {
  cudnnStatus_t st = check_size_query(handle, reduceTensorDesc, aDesc, cDesc, sizeInBytes);
  if (st)
    return st;
  *sizeInBytes = reduce_workspace(&aDesc->t, &cDesc->t);
  return dnn_enter();
}

cudnnStatus_t cudnnGetReductionIndicesSize(cudnnHandle_t handle,
                                           const cudnnReduceTensorDescriptor_t reduceTensorDesc,
                                           const cudnnTensorDescriptor_t aDesc,
                                           const cudnnTensorDescriptor_t cDesc,
                                           size_t *sizeInBytes) {
  cudnnStatus_t st = check_size_query(handle, reduceTensorDesc, aDesc, cDesc, sizeInBytes);
  if (st)
    return st;
  *sizeInBytes = reduce_indexed(reduceTensorDesc) ? tensor_count(&cDesc->t) * sizeof(unsigned) : 0;
  return dnn_enter();
}

cudnnStatus_t cudnnReduceTensor(cudnnHandle_t handle,
                                const cudnnReduceTensorDescriptor_t reduceTensorDesc,
                                void *indices, size_t indicesSizeInBytes, void *workspace,
                                size_t workspaceSizeInBytes, const void *alpha,
                                const cudnnTensorDescriptor_t aDesc, const void *A,
                                const void *beta, const cudnnTensorDescriptor_t cDesc, void *C) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !reduceTensorDesc || !alpha || !beta || !aDesc || !A || !cDesc || !C)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  const Tensor *at = &aDesc->t, *ct = &cDesc->t;
  if (!reduceTensorDesc->set || !at->rank || !ct->rank)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  if (!reduces_to(at, ct))
    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  cudnnStatus_t st = reduce_types(at, ct, reduceTensorDesc);
  if (st)
    return st;
  /* 16-bit tensors: the op runs over packed float copies (xy_queued). */
  Tensor af = dnn_float_view(at), cf = dnn_float_view(ct);
  bool want = reduce_indexed(reduceTensorDesc);
  size_t need = want ? tensor_count(ct) * sizeof(unsigned) : 0;
  if (want && (!indices || indicesSizeInBytes < need))
    return CUDNN_STATUS_BAD_PARAM;
  size_t ws_need = reduce_workspace(at, ct);
  if (dnn_workspace_ok(workspace, workspaceSizeInBytes, ws_need))
    return CUDNN_STATUS_BAD_PARAM;
  ReduceOp *r = op_new(sizeof *r, run_reduce, "cudnnReduceTensor");
  if (!r)
    return CUDNN_STATUS_ALLOC_FAILED;
  r->kind = reduceTensorDesc->op;
  r->want_indices = want;
  r->outputs = r->reduced = 1;
  for (int i = 0; i < at->rank; i++) {
    if (ct->dims[i] == at->dims[i] && at->dims[i] != 1) {
      r->kdims[r->krank] = at->dims[i];
      r->kas[r->krank] = af.strides[i];
      r->kcs[r->krank++] = cf.strides[i];
      r->outputs *= at->dims[i];
    } else if (at->dims[i] != 1) {
      r->rdims[r->rrank] = at->dims[i];
      r->ras[r->rrank++] = af.strides[i];
      r->reduced *= at->dims[i];
    }
  }
  /* Reduced dims contiguous in A are one longer row (a plane of 7 x 7 is
   * one row of 49, not 7 of 7); flattened indices count the same. */
  int rows = 0;
  for (int i = 0; i < r->rrank; i++) {
    if (rows > 0 && r->ras[rows - 1] == r->ras[i] * r->rdims[i]) {
      r->rdims[rows - 1] *= r->rdims[i];
      r->ras[rows - 1] = r->ras[i];
    } else {
      r->rdims[rows] = r->rdims[i];
      r->ras[rows++] = r->ras[i];
    }
  }
  r->rrank = rows;
  if (r->rrank == 0) { /* nothing to reduce: a single element per output */
    r->rdims[0] = 1;
    r->ras[0] = 0;
    r->rrank = 1;
  }
  r->indices = want ? indices : NULL;
  xy_set(&r->xy, alpha, A, beta, C);
  float b = r->xy.beta;
  Op *op = xy_queued(&r->xy, sizeof *r, at, ct); /* never with indices: reduce_types */
  if (!op)
    return CUDNN_STATUS_ALLOC_FAILED;
  span_tensor(op, A, at, false);
  span_output(op, C, ct, b);
  if (want)
    op_span(op, indices, need, true);
  span_workspace(op, workspace, ws_need);
  return dnn_submit(handle, op, DNN_REDUCTION);
}

/* ---- LRN across channels ---- */

/*
 * y = x / (k + alpha / n * sum of x^2 over the channels
 *          [c - floor((n - 1) / 2), c + ceil((n - 1) / 2)])^beta
 * which is also ONNX's LRN with size = n and bias = k.
 */
typedef struct LrnOp {
  XyOp xy;
  Channels ch;
  struct cudnnLRNStruct p;
} LrnOp;

/* Positions per item: the squares of a block of positions in every
 * channel stay in cache while the window slides over the channels, and the
 * loops along the block vectorise (powf included, by libmvec). */
enum { LRN_BLOCK = 64 };

OPC_VECTOR_CLONES static void lrn_part(void *ctx, int part, int nparts) {
  const LrnOp *o = ctx;
  const Channels *ch = &o->ch;
  long long blocks = (ch->s + LRN_BLOCK - 1) / LRN_BLOCK, total = ch->n * blocks;
  long long lo = total * part / nparts, hi = total * (part + 1) / nparts;
  int before = (int)((o->p.n - 1) / 2), after = (int)(o->p.n / 2);
  float scale = (float)(o->p.alpha / o->p.n), k = (float)o->p.k, beta = (float)o->p.beta;
  float *sq = scratch(0, (ch->c + 1) * LRN_BLOCK * sizeof(float));
  if (!sq) {
    rt_fail_async(o->xy.op.api);
    return;
  }
  float *v = sq + ch->c * LRN_BLOCK;
  for (long long g = lo; g < hi; g++) {
    long long n = g / blocks, s0 = g % blocks * LRN_BLOCK;
    int len = (int)(ch->s - s0 < LRN_BLOCK ? ch->s - s0 : LRN_BLOCK);
    const float *x = o->xy.x + n * ch->xn;
    float *y = o->xy.y + n * ch->yn;
    const long long *xoff = ch->xoff + s0, *yoff = ch->yoff + s0;
    for (long long c = 0; c < ch->c; c++)
      for (int j = 0; j < len; j++) {
        float e = x[c * ch->xc + xoff[j]];
        sq[c * LRN_BLOCK + j] = e * e;
      }
    for (long long c = 0; c < ch->c; c++) {
      long long c0 = c - before < 0 ? 0 : c - before;
      long long c1 = c + after >= ch->c ? ch->c - 1 : c + after;
      for (int j = 0; j < len; j++)
        v[j] = 0;
      for (long long w = c0; w <= c1; w++)
        for (int j = 0; j < len; j++)
          v[j] += sq[w * LRN_BLOCK + j];
      for (int j = 0; j < len; j++)
        v[j] = powf(k + scale * v[j], beta);
      for (int j = 0; j < len; j++)
        blend(&o->xy, &y[c * ch->yc + yoff[j]], x[c * ch->xc + xoff[j]] / v[j]);
    }
  }
}

static void run_lrn(Op *op) {
  LrnOp run = *(LrnOp *)op;
  /* Slot 0 is each part's own scratch (lrn_part). */
  if (!channels_start(&run.ch, 1, op->api))
    return;
  long long items = run.ch.n * ((run.ch.s + LRN_BLOCK - 1) / LRN_BLOCK);
  run_items(lrn_part, &run, items, run.ch.n * run.ch.s * run.ch.c * run.p.n, 1 << 15);
}

cudnnStatus_t cudnnLRNCrossChannelForward(cudnnHandle_t handle, cudnnLRNDescriptor_t normDesc,
                                          cudnnLRNMode_t lrnMode, const void *alpha,
                                          const cudnnTensorDescriptor_t xDesc, const void *x,
                                          const void *beta, const cudnnTensorDescriptor_t yDesc,
                                          void *y) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !normDesc || !alpha || !beta || !xDesc || !x || !yDesc || !y)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (lrnMode != CUDNN_LRN_CROSS_CHANNEL_DIM1)
    return CUDNN_STATUS_BAD_PARAM;
  const Tensor *xt = &xDesc->t, *yt = &yDesc->t;
  cudnnStatus_t st = check_same_float(xt, yt, 3);
  if (st)
    return st;
  LrnOp *o = op_new(sizeof *o, run_lrn, "cudnnLRNCrossChannelForward");
  if (!o)
    return CUDNN_STATUS_ALLOC_FAILED;
  o->p = *normDesc;
  channels_of(&o->ch, xt, yt);
  xy_init(&o->xy, alpha, x, xt, beta, y, yt);
  return dnn_submit(handle, &o->xy.op, DNN_LRN);
}
