/*
 * fold_nn.c - compile-time evaluators of the network operators:
 * convolutions, normalisations, pools, Gemm and MatMul, Pad, the
 * depth/space shuffles, Resize, the losses and the recurrent networks
 * (LSTM, GRU, RNN).
 *
 * They follow the ONNX specification's reference semantics and read the
 * parameters shape inference resolved (Node.win, Node.p). Constant data
 * is canonical as in fold.c: floats in t->f32, integers and bools in
 * t->i64. Float sums accumulate in double, then round once into the
 * output; integer Gemm and MatMul are exact (modulo 2^64, which the
 * driver then narrows to the dtype's width, as a C kernel would wrap).
 *
 * node_fold has already refused outputs beyond its element limit. The
 * kinds here can also cost far more than one operation per output (a
 * Conv's reduction), so those return false, without an error, when the
 * multiply-adds would pass FOLD_MAX_WORK: the node then stays run-time
 * work, as a too-large result does.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "scalar.h"
#include "shapes.h"

/* ------------------------------------------------------------ elements */

static bool is_u64(const Tensor *t) { return t->dtype == DT_UINT64; }

static double getd(const Tensor *t, int64_t i) {
  if (t->f32)
    return t->f32[i];
  return is_u64(t) ? (double)(uint64_t)t->i64[i] : (double)t->i64[i];
}

/* Integer storage as wrapping 64-bit arithmetic wants it. */
static uint64_t getu(const Tensor *t, int64_t i) { return (uint64_t)t->i64[i]; }

/* A double into an integer, truncating as numpy's astype does; NaN and
   values beyond int64 (undefined for a C cast) go to 0 and the limits. */
static int64_t double_to_int(double v) {
  if (!(v == v))
    return 0;
  if (v >= 9.2233720368547758e18)
    return INT64_MAX;
  if (v <= -9.2233720368547758e18)
    return INT64_MIN;
  return (int64_t)v;
}

/* Writes a double into element i of either storage; u64 values past
   INT64_MAX keep their bits. */
static void putd(Tensor *t, int64_t i, double v) {
  if (t->f32)
    t->f32[i] = (float)v;
  else if (is_u64(t) && v >= 9.2233720368547758e18 && v < 1.8446744073709552e19)
    t->i64[i] = (int64_t)(uint64_t)v;
  else
    t->i64[i] = double_to_int(v);
}

static void copy_elem(Tensor *dst, int64_t di, const Tensor *src, int64_t si) {
  if (dst->f32)
    dst->f32[di] = src->f32 ? src->f32[si] : (float)getd(src, si);
  else
    dst->i64[di] = src->i64 ? src->i64[si] : double_to_int(src->f32[si]);
}

/* Whether `count` operations of `each` multiply-adds are cheap enough. */
static bool affordable(int64_t count, int64_t each) {
  return each <= 0 || count <= FOLD_MAX_WORK / each;
}

/* The activation a pass fused into a Conv, Gemm or BatchNormalization,
   by the operator's formula (scalar.h), in float as the kernels compute
   it; OPC_ACT_NONE leaves v alone. */
static double activate(const Node *n, double v) {
  if (n->act == OPC_ACT_NONE)
    return v;
  return opc_activation_of(n->act, (float)v, n->act_alpha, n->act_beta);
}

/* ------------------------------------------------------------ windows */

/*
 * A convolution's or pool's geometry, seen with three spatial dims: the
 * missing ones have size 1 and a window of 1, so one loop nest serves 1-D
 * to 3-D. From Node.win, exactly as the backend's kernels read it.
 */
typedef struct Geometry {
  int64_t in[3], out[3];
  int64_t kernel[3], stride[3], dilation[3], pad[3], pad_end[3];
} Geometry;

static Geometry geometry(const Node *n, const Tensor *x, const Tensor *y) {
  Geometry g;
  const Window *w = &n->win;
  for (int i = 0; i < 3; i++) {
    int d = i - (3 - w->nspatial); /* the spatial axis, or < 0 when missing */
    bool has = d >= 0;
    g.in[i] = has ? x->dims[2 + d] : 1;
    g.out[i] = has ? y->dims[2 + d] : 1;
    g.kernel[i] = has ? w->kernel[d] : 1;
    g.stride[i] = has ? w->stride[d] : 1;
    g.dilation[i] = has ? w->dilation[d] : 1;
    g.pad[i] = has ? w->pad_begin[d] : 0;
    g.pad_end[i] = has ? w->pad_end[d] : 0;
  }
  return g;
}

static int64_t spatial(const int64_t *v) { return v[0] * v[1] * v[2]; }

/* The input position of window tap k at output position o along axis i. */
static int64_t tap(const Geometry *g, int i, int64_t o, int64_t k) {
  return o * g->stride[i] - g->pad[i] + k * g->dilation[i];
}

/* The flat spatial offset of output position o's tap k, or -1 when the
   tap falls in the padding. o and k are (d, h, w) triples. */
static int64_t tap_offset(const Geometry *g, const int64_t *o, const int64_t *k) {
  int64_t off = 0;
  for (int i = 0; i < 3; i++) {
    int64_t p = tap(g, i, o[i], k[i]);
    if (p < 0 || p >= g->in[i])
      return -1;
    off = off * g->in[i] + p;
  }
  return off;
}

/* ----------------------------------------------------- convolutions */

/* One output of a convolution at spatial position o: the taps of Cg
   input channels from x[xbase] against the weights from w[wbase] (one
   output channel's Cg x kernel block). Taps in the padding add nothing. */
static double conv_point(const Geometry *g, const Tensor *x, int64_t xbase, const Tensor *w,
                         int64_t wbase, int64_t cg, const int64_t *o) {
  int64_t ksize = spatial(g->kernel), isize = spatial(g->in);
  double acc = 0;
  for (int64_t c = 0; c < cg; c++)
    for (int64_t k0 = 0; k0 < g->kernel[0]; k0++) {
      int64_t p0 = tap(g, 0, o[0], k0);
      if (p0 < 0 || p0 >= g->in[0])
        continue;
      for (int64_t k1 = 0; k1 < g->kernel[1]; k1++) {
        int64_t p1 = tap(g, 1, o[1], k1);
        if (p1 < 0 || p1 >= g->in[1])
          continue;
        int64_t xrow = xbase + c * isize + (p0 * g->in[1] + p1) * g->in[2];
        int64_t wrow = wbase + c * ksize + (k0 * g->kernel[1] + k1) * g->kernel[2];
        for (int64_t k2 = 0; k2 < g->kernel[2]; k2++) {
          int64_t p2 = tap(g, 2, o[2], k2);
          if (p2 >= 0 && p2 < g->in[2])
            acc += getd(x, xrow + p2) * getd(w, wrow + k2);
        }
      }
    }
  return acc;
}

/* y = act(conv(x, w) + b + z), z the residual a pass may have fused. */
bool fold_conv(Graph *gr, Node *n) {
  const Tensor *x = n->in[0], *w = n->in[1], *b = node_input(n, 2), *z = node_input(n, 3);
  Tensor *y = n->out[0];
  Geometry g = geometry(n, x, y);
  int64_t batch = x->dims[0], cin = x->dims[1], m = y->dims[1], groups = n->win.group;
  int64_t cg = cin / groups, mg = m / groups;
  int64_t isize = spatial(g.in), osize = spatial(g.out), o[3];
  if (!affordable(tensor_numel(y), cg * spatial(g.kernel)))
    return false;
  for (int64_t bi = 0; bi < batch; bi++)
    for (int64_t oc = 0; oc < m; oc++) {
      int64_t xbase = (bi * cin + oc / mg * cg) * isize, wbase = oc * cg * spatial(g.kernel);
      for (int64_t p = 0; p < osize; p++) {
        int64_t at = (bi * m + oc) * osize + p;
        unravel(p, 3, g.out, o);
        double v = conv_point(&g, x, xbase, w, wbase, cg, o);
        if (b)
          v += getd(b, oc);
        if (z)
          v += getd(z, at);
        putd(y, at, activate(n, v));
      }
    }
  return true;
}

/* Scatters each input element through the kernel: input position i, tap
   k lands on output i * stride - pad + k * dilation (taps outside the
   output are cropped away). */
static void conv_transpose_scatter(const Geometry *g, double xv, const int64_t *i,
                                   const Tensor *w, int64_t wbase, double *acc) {
  int64_t ksize = spatial(g->kernel), k[3];
  for (int64_t t = 0; t < ksize; t++) {
    unravel(t, 3, g->kernel, k);
    int64_t off = 0;
    bool inside = true;
    for (int d = 0; d < 3 && inside; d++) {
      int64_t p = i[d] * g->stride[d] - g->pad[d] + k[d] * g->dilation[d];
      inside = p >= 0 && p < g->out[d];
      off = off * g->out[d] + p;
    }
    if (inside)
      acc[off] += xv * getd(w, wbase + t);
  }
}

bool fold_conv_transpose(Graph *gr, Node *n) {
  const Tensor *x = n->in[0], *w = n->in[1], *b = node_input(n, 2);
  Tensor *y = n->out[0];
  Geometry g = geometry(n, x, y);
  int64_t batch = x->dims[0], cin = x->dims[1], m = y->dims[1], groups = n->win.group;
  int64_t cg = cin / groups, mg = m / groups, ksize = spatial(g.kernel);
  int64_t isize = spatial(g.in), osize = spatial(g.out), i[3];
  if (!affordable(tensor_numel(x), mg * ksize))
    return false;
  double *acc = calloc((size_t)osize + 1, sizeof(double));
  for (int64_t bi = 0; bi < batch; bi++)
    for (int64_t oc = 0; oc < m; oc++) {
      int64_t grp = oc / mg, mm = oc % mg;
      for (int64_t p = 0; p < osize; p++)
        acc[p] = b ? getd(b, oc) : 0;
      for (int64_t c = grp * cg; c < (grp + 1) * cg; c++)
        for (int64_t p = 0; p < isize; p++) {
          unravel(p, 3, g.in, i);
          double xv = getd(x, (bi * cin + c) * isize + p);
          conv_transpose_scatter(&g, xv, i, w, (c * mg + mm) * ksize, acc);
        }
      for (int64_t p = 0; p < osize; p++)
        putd(y, (bi * m + oc) * osize + p, activate(n, acc[p]));
    }
  free(acc);
  return true;
}

/* ---------------------------------------------------------- pools */

/* The larger of two values; a NaN wins, as in numpy's max. */
static double max_nan(double acc, double v) {
  if (acc != acc || v != v)
    return acc != acc ? acc : v;
  return v > acc ? v : acc;
}

/* AveragePool's divisor with count_include_pad: the window's taps inside
   the padded input. Taps past the end padding (ceil_mode) do not count,
   as in the reference and PyTorch. */
static int64_t padded_taps(const Geometry *g, const int64_t *o) {
  int64_t count = 1;
  for (int i = 0; i < 3; i++) {
    int64_t c = 0;
    for (int64_t k = 0; k < g->kernel[i]; k++) {
      int64_t p = tap(g, i, o[i], k);
      c += p >= -g->pad[i] && p < g->in[i] + g->pad_end[i];
    }
    count *= c;
  }
  return count;
}

/* One output of MaxPool, AveragePool or LpPool over input plane xbase:
   padding adds nothing (MaxPool's max ignores it). A NaN wins the max,
   as numpy's does. */
static double pool_point(const Node *n, const Geometry *g, const Tensor *x, int64_t xbase,
                         const int64_t *o) {
  int64_t ksize = spatial(g->kernel), k[3], count = 0;
  double acc = n->op == OP_MAX_POOL ? -INFINITY : 0;
  for (int64_t t = 0; t < ksize; t++) {
    unravel(t, 3, g->kernel, k);
    int64_t off = tap_offset(g, o, k);
    if (off < 0)
      continue;
    double v = getd(x, xbase + off);
    count++;
    if (n->op == OP_MAX_POOL)
      acc = max_nan(acc, v);
    else if (n->op == OP_LP_POOL)
      acc += pow(fabs(v), n->p.lp.p);
    else
      acc += v;
  }
  if (n->op == OP_LP_POOL)
    return pow(acc, 1.0 / n->p.lp.p);
  if (n->op == OP_AVERAGE_POOL) {
    if (n->win.count_include_pad)
      count = padded_taps(g, o);
    return count ? acc / (double)count : NAN;
  }
  return acc;
}

/* MaxPool's Indices for output o of plane pl: the window's first largest
   tap (a NaN wins and stays, as in the max), as opc_pool_index_of
   numbers it. */
static int64_t pool_argmax(const Node *n, const Geometry *g, const Tensor *x, int64_t pl,
                           const int64_t *o) {
  int64_t ksize = spatial(g->kernel), k[3], best[3] = {0, 0, 0};
  double acc = 0;
  bool found = false;
  for (int64_t t = 0; t < ksize; t++) {
    unravel(t, 3, g->kernel, k);
    int64_t off = tap_offset(g, o, k);
    if (off < 0)
      continue;
    double v = getd(x, pl * spatial(g->in) + off);
    if (found && (acc != acc || !(v > acc || v != v)))
      continue;
    found = true;
    acc = v;
    for (int d = 0; d < 3; d++)
      best[d] = tap(g, d, o[d], k[d]);
  }
  return opc_pool_index_of(pl, g->in[0], g->in[1], g->in[2], best[0], best[1], best[2],
                           n->win.column_major);
}

/* MaxPool, AveragePool and LpPool. */
bool fold_pool(Graph *gr, Node *n) {
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  Geometry g = geometry(n, x, y);
  int64_t planes = x->dims[0] * x->dims[1], isize = spatial(g.in), osize = spatial(g.out), o[3];
  if (!affordable(tensor_numel(y), spatial(g.kernel)))
    return false;
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t p = 0; p < osize; p++) {
      unravel(p, 3, g.out, o);
      putd(y, pl * osize + p, pool_point(n, &g, x, pl * isize, o));
      if (n->nout > 1 && n->out[1])
        n->out[1]->i64[pl * osize + p] = pool_argmax(n, &g, x, pl, o);
    }
  return true;
}

/* MaxUnpool: zeros, then each X at its index into the unpooled shape, in
   order (a later one wins an index two share), at the same coordinates
   of the output, which output_shape may make larger. Indices outside the
   unpooled shape leave it alone. */
bool fold_max_unpool(Graph *gr, Node *n) {
  (void)gr;
  const Tensor *x = n->in[0], *indices = n->in[1];
  Tensor *y = n->out[0];
  if (!x->f32 || !indices->i64 || !y->f32)
    return false;
  int64_t unpooled[IR_MAX_RANK], c[IR_MAX_RANK], total = 1;
  max_unpool_shape(n, unpooled);
  for (int d = 0; d < x->rank; d++)
    total *= unpooled[d];
  for (int64_t i = 0; i < tensor_numel(y); i++)
    y->f32[i] = 0.0f;
  for (int64_t i = 0; i < tensor_numel(x); i++) {
    int64_t at = indices->i64[i], off = 0;
    if (at < 0 || at >= total)
      continue;
    unravel(at, x->rank, unpooled, c);
    for (int d = 0; d < x->rank; d++)
      off = off * y->dims[d] + c[d];
    y->f32[off] = x->f32[i];
  }
  return true;
}

/* GlobalAveragePool, GlobalMaxPool and GlobalLpPool: one value per
   (image, channel) plane. */
bool fold_global_pool(Graph *gr, Node *n) {
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  int64_t planes = x->dims[0] * x->dims[1], size = dims_product(x->dims, 2, x->rank);
  for (int64_t pl = 0; pl < planes; pl++) {
    double acc = n->op == OP_GLOBAL_MAX_POOL ? -INFINITY : 0;
    for (int64_t j = 0; j < size; j++) {
      double v = getd(x, pl * size + j);
      if (n->op == OP_GLOBAL_MAX_POOL)
        acc = max_nan(acc, v);
      else if (n->op == OP_GLOBAL_LP_POOL)
        acc += pow(fabs(v), n->p.lp.p);
      else
        acc += v;
    }
    if (n->op == OP_GLOBAL_AVERAGE_POOL)
      acc /= (double)size;
    else if (n->op == OP_GLOBAL_LP_POOL)
      acc = pow(acc, 1.0 / n->p.lp.p);
    putd(y, pl, acc);
  }
  return true;
}

/* SEGate: per image, h = inner(W1 p + b1), g = gate(W2 h + b2); the gate
   itself, or the filter with input channel c times g[c]. Sums in double,
   activations in float as the kernel's. */
bool fold_se_gate(Graph *gr, Node *n) {
  (void)gr;
  const Tensor *p = n->in[0], *w = n->in[1], *f = node_input(n, 2);
  Tensor *y = n->out[0];
  int64_t images = p->dims[0], c = p->dims[1], r = n->p.se.hidden;
  int64_t w1 = 0, b1 = r * c, w2 = b1 + r, b2 = w2 + c * r;
  int64_t per_channel = f ? dims_product(f->dims, 2, f->rank) : 1;
  float *h = malloc(sizeof(float) * (size_t)r);
  if (!h)
    return false;
  for (int64_t img = 0; img < images; img++) {
    for (int64_t j = 0; j < r; j++) {
      double acc = getd(w, b1 + j);
      for (int64_t k = 0; k < c; k++)
        acc += getd(w, w1 + j * c + k) * getd(p, img * c + k);
      h[j] = opc_activation_of(n->p.se.inner, (float)acc, 0, 0);
    }
    for (int64_t ch = 0; ch < c; ch++) {
      double acc = getd(w, b2 + ch);
      for (int64_t j = 0; j < r; j++)
        acc += getd(w, w2 + ch * r + j) * h[j];
      float gate = opc_activation_of(n->act, (float)acc, n->act_alpha, n->act_beta);
      if (!f) {
        putd(y, img * c + ch, gate);
        continue;
      }
      for (int64_t o = 0; o < f->dims[0]; o++)
        for (int64_t k = 0; k < per_channel; k++) {
          int64_t at = (o * c + ch) * per_channel + k;
          putd(y, at, (float)getd(f, at) * gate);
        }
    }
  }
  free(h);
  return true;
}

/* ---------------------------------------------------- normalisation */

/* Mean and population variance of `count` elements from `base`, `step`
   apart. */
static void moments(const Tensor *x, int64_t base, int64_t count, int64_t step, double *mean,
                    double *var) {
  double s = 0, q = 0;
  for (int64_t j = 0; j < count; j++)
    s += getd(x, base + j * step);
  *mean = count ? s / (double)count : NAN;
  for (int64_t j = 0; j < count; j++) {
    double d = getd(x, base + j * step) - *mean;
    q += d * d;
  }
  *var = count ? q / (double)count : NAN;
}

/* Training mode: the statistics of each channel over the batch and the
   spatial dims; the running mean and variance (outputs 1 and 2) move
   towards them by 1 - momentum. */
static void batch_moments(const Tensor *x, int64_t ch, double *mean, double *var) {
  int64_t c = x->dims[1], inner = dims_product(x->dims, 2, x->rank), count = x->dims[0] * inner;
  double s = 0, q = 0;
  for (int64_t b = 0; b < x->dims[0]; b++)
    for (int64_t j = 0; j < inner; j++)
      s += getd(x, (b * c + ch) * inner + j);
  *mean = s / (double)count;
  for (int64_t b = 0; b < x->dims[0]; b++)
    for (int64_t j = 0; j < inner; j++) {
      double d = getd(x, (b * c + ch) * inner + j) - *mean;
      q += d * d;
    }
  *var = q / (double)count;
}

/* y = (x - mean) / sqrt(var + epsilon) * scale + bias per channel (dim 1),
   with the running statistics of inputs 3 and 4, or in training mode the
   batch's. */
bool fold_batch_norm(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  Tensor *running_mean = n->nout > 1 ? n->out[1] : NULL, *running_var = n->nout > 2 ? n->out[2] : NULL;
  int64_t c = x->dims[1], inner = dims_product(x->dims, 2, x->rank);
  double mom = n->p.norm.momentum;
  for (int64_t ch = 0; ch < c; ch++) {
    double mean = getd(n->in[3], ch), var = getd(n->in[4], ch);
    if (n->p.norm.training) {
      batch_moments(x, ch, &mean, &var);
      if (running_mean)
        putd(running_mean, ch, getd(n->in[3], ch) * mom + mean * (1 - mom));
      if (running_var)
        putd(running_var, ch, getd(n->in[4], ch) * mom + var * (1 - mom));
    }
    double scale = getd(n->in[1], ch) / sqrt(var + n->p.norm.epsilon);
    for (int64_t b = 0; b < x->dims[0]; b++)
      for (int64_t j = 0; j < inner; j++) {
        int64_t i = (b * c + ch) * inner + j;
        double v = (getd(x, i) - mean) * scale + getd(n->in[2], ch);
        putd(n->out[0], i, activate(n, v));
      }
  }
  return true;
}

/* Per (image, channel): (x - mean) / sqrt(var + epsilon) * scale + bias. */
bool fold_instance_norm(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  int64_t c = x->dims[1], planes = x->dims[0] * c, size = dims_product(x->dims, 2, x->rank);
  for (int64_t pl = 0; pl < planes; pl++) {
    double mean, var;
    moments(x, pl * size, size, 1, &mean, &var);
    double scale = getd(n->in[1], pl % c) / sqrt(var + n->p.norm.epsilon);
    for (int64_t j = 0; j < size; j++) {
      double v = (getd(x, pl * size + j) - mean) * scale + getd(n->in[2], pl % c);
      putd(n->out[0], pl * size + j, v);
    }
  }
  return true;
}

/* Normalises each row, the dims from `axis` on; scale and bias broadcast
   to the row's shape. The optional outputs are the rows' means and
   reciprocal standard deviations. */
bool fold_layer_norm(Graph *g, Node *n) {
  const Tensor *x = n->in[0], *scale = n->in[1], *bias = node_input(n, 2);
  Tensor *mean_out = n->nout > 1 ? n->out[1] : NULL, *inv_out = n->nout > 2 ? n->out[2] : NULL;
  int axis = n->p.norm.axis, rrank = x->rank - axis;
  const int64_t *rdims = x->dims + axis;
  int64_t rows = dims_product(x->dims, 0, axis), len = dims_product(x->dims, axis, x->rank);
  int64_t ss[IR_MAX_RANK], bs[IR_MAX_RANK];
  broadcast_strides(scale->rank, scale->dims, rrank, rdims, ss);
  if (bias)
    broadcast_strides(bias->rank, bias->dims, rrank, rdims, bs);
  for (int64_t r = 0; r < rows; r++) {
    double mean, var;
    moments(x, r * len, len, 1, &mean, &var);
    double inv = 1 / sqrt(var + n->p.norm.epsilon);
    for (int64_t j = 0; j < len; j++) {
      double v = (getd(x, r * len + j) - mean) * inv;
      v *= getd(scale, broadcast_offset(j, rrank, rdims, ss));
      if (bias)
        v += getd(bias, broadcast_offset(j, rrank, rdims, bs));
      putd(n->out[0], r * len + j, v);
    }
    if (mean_out)
      putd(mean_out, r, mean);
    if (inv_out)
      putd(inv_out, r, inv);
  }
  return true;
}

/* RMSNormalization: each row (the dims from `axis` on) divided by the root
   of its mean square plus epsilon, times scale broadcast to the row. */
bool fold_rms_norm(Graph *g, Node *n) {
  const Tensor *x = n->in[0], *scale = n->in[1];
  int axis = n->p.norm.axis, rrank = x->rank - axis;
  const int64_t *rdims = x->dims + axis;
  int64_t rows = dims_product(x->dims, 0, axis), len = dims_product(x->dims, axis, x->rank);
  int64_t ss[IR_MAX_RANK];
  broadcast_strides(scale->rank, scale->dims, rrank, rdims, ss);
  for (int64_t r = 0; r < rows; r++) {
    double q = 0;
    for (int64_t j = 0; j < len; j++)
      q += getd(x, r * len + j) * getd(x, r * len + j);
    double inv = 1 / sqrt(q / (double)len + n->p.norm.epsilon);
    for (int64_t j = 0; j < len; j++) {
      double v = getd(x, r * len + j) * inv;
      putd(n->out[0], r * len + j, v * getd(scale, broadcast_offset(j, rrank, rdims, ss)));
    }
  }
  return true;
}

/* GroupNormalization: per image, each group of channels (with its spatial
   dims) normalised over its mean and variance, then scaled and shifted
   per channel or per group. */
bool fold_group_norm(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  int64_t c = x->dims[1], groups = n->p.group_norm.groups, per_group = c / groups;
  int64_t spatial = dims_product(x->dims, 2, x->rank), len = per_group * spatial;
  for (int64_t r = 0; r < x->dims[0] * groups; r++) {
    double mean, var;
    moments(x, r * len, len, 1, &mean, &var);
    double inv = 1 / sqrt(var + n->p.group_norm.epsilon);
    for (int64_t j = 0; j < len; j++) {
      int64_t k = n->p.group_norm.per_channel ? r % groups * per_group + j / spatial : r % groups;
      double v = (getd(x, r * len + j) - mean) * inv;
      putd(n->out[0], r * len + j, v * getd(n->in[1], k) + getd(n->in[2], k));
    }
  }
  return true;
}

/* Element (b, h, s, d) of a RotaryEmbedding or Attention input given as
   [B, H, S, D] or, in_3d, as [B, S, H D]. */
static int64_t head_offset(bool in_3d, int64_t heads, int64_t seq, int64_t dim, int64_t b,
                           int64_t h, int64_t s, int64_t d) {
  return in_3d ? ((b * seq + s) * heads + h) * dim + d : ((b * heads + h) * seq + s) * dim + d;
}

/* RotaryEmbedding: in each head, pairs (i, i + rot/2), or (2i, 2i + 1)
   when interleaved, turn by the angle whose cosine and sine the caches
   hold for the token's position; the dims past rot are copied. */
bool fold_rotary_embedding(Graph *g, Node *n) {
  const Tensor *x = n->in[0], *cosc = n->in[1], *sinc = n->in[2], *pos = node_input(n, 3);
  int64_t seq = n->p.rotary.seq, heads = n->p.rotary.heads, head = n->p.rotary.head;
  int64_t half = n->p.rotary.rot / 2;
  for (int64_t row = 0; row < n->p.rotary.batch * seq * heads; row++) {
    int64_t h = row % heads, s = row / heads % seq, b = row / (heads * seq);
    int64_t base = head_offset(n->p.rotary.in_3d, heads, seq, head, b, h, s, 0);
    int64_t at = b * seq + s;
    if (pos) {
      at = pos->i64[b * seq + s];
      if (at < 0 || at >= cosc->dims[0]) {
        ir_error(g, n, "position %lld is outside the caches' %lld positions", (long long)at,
                 (long long)cosc->dims[0]);
        return false;
      }
    }
    for (int64_t k = 0; k < half; k++) {
      int64_t i1 = n->p.rotary.interleaved ? 2 * k : k;
      int64_t i2 = n->p.rotary.interleaved ? 2 * k + 1 : k + half;
      double c = getd(cosc, at * half + k), sn = getd(sinc, at * half + k);
      double x1 = getd(x, base + i1), x2 = getd(x, base + i2);
      putd(n->out[0], base + i1, c * x1 - sn * x2);
      putd(n->out[0], base + i2, sn * x1 + c * x2);
    }
    for (int64_t j = 2 * half; j < head; j++)
      putd(n->out[0], base + j, getd(x, base + j));
  }
  return true;
}

/* Key or value j of kv head h: from the past cache for j < past, else
   from K or V. */
static double attention_kv(const Node *n, const Tensor *past, const Tensor *now, int64_t dim,
                           int64_t b, int64_t h, int64_t j, int64_t d) {
  const struct AttentionParams *a = &n->p.attention;
  if (j < a->past)
    return getd(past, ((b * a->kv_heads + h) * a->past + j) * dim + d);
  return getd(now, head_offset(a->in_3d, a->kv_heads, a->kv_seq, dim, b, h, j - a->past, d));
}

/* Attention: per query, softmax over the keys of scale q.k (capped:
   softcap tanh(. / softcap)) plus the mask (bool: false excludes the
   key; float: added); with is_causal, query i also sees keys up to
   past + i only. A query that sees no key gives zeros. present_key and
   present_value are the caches with K and V appended. */
bool fold_attention(Graph *g, Node *n) {
  const struct AttentionParams *a = &n->p.attention;
  const Tensor *q = n->in[0], *mask = node_input(n, 3);
  const Tensor *past_k = node_input(n, 4), *past_v = node_input(n, 5);
  int64_t total = a->past + a->kv_seq, group = a->q_heads / a->kv_heads;
  int64_t full[4] = {a->batch, a->q_heads, a->q_seq, total}, ms[4];
  if (mask)
    broadcast_strides(mask->rank, mask->dims, 4, full, ms);
  double *score = malloc(sizeof(double) * (size_t)(total ? total : 1));
  if (!score)
    return false;
  for (int64_t b = 0; b < a->batch; b++)
    for (int64_t h = 0; h < a->q_heads; h++)
      for (int64_t i = 0; i < a->q_seq; i++) {
        double top = -INFINITY, sum = 0;
        for (int64_t j = 0; j < total; j++) {
          double s = 0;
          for (int64_t d = 0; d < a->head; d++)
            s += getd(q, head_offset(a->in_3d, a->q_heads, a->q_seq, a->head, b, h, i, d)) *
                 attention_kv(n, past_k, n->in[1], a->head, b, h / group, j, d);
          s *= a->scale;
          if (a->softcap > 0)
            s = a->softcap * tanh(s / a->softcap);
          if (mask) {
            int64_t c[4] = {b, h, i, j}, at = 0;
            for (int k = 0; k < 4; k++)
              at += c[k] * ms[k];
            s = mask->dtype == DT_BOOL ? (getd(mask, at) != 0 ? s : -INFINITY) : s + getd(mask, at);
          }
          if (a->causal && j > a->past + i)
            s = -INFINITY;
          score[j] = s;
          top = s > top ? s : top;
        }
        for (int64_t j = 0; j < total; j++) {
          score[j] = top == -INFINITY ? 0 : exp(score[j] - top);
          sum += score[j];
        }
        for (int64_t d = 0; d < a->v_head; d++) {
          double y = 0;
          for (int64_t j = 0; sum > 0 && j < total; j++)
            y += score[j] / sum * attention_kv(n, past_v, n->in[2], a->v_head, b, h / group, j, d);
          putd(n->out[0], head_offset(a->in_3d, a->q_heads, a->q_seq, a->v_head, b, h, i, d), y);
        }
      }
  free(score);
  int64_t dims[2] = {a->head, a->v_head};
  for (int k = 1; k <= 2; k++) {
    Tensor *present = n->nout > k ? n->out[k] : NULL;
    for (int64_t e = 0; present && e < tensor_numel(present); e++) {
      int64_t d = e % dims[k - 1], j = e / dims[k - 1] % total;
      int64_t h = e / (dims[k - 1] * total) % a->kv_heads;
      int64_t b = e / (dims[k - 1] * total * a->kv_heads);
      putd(present, e, attention_kv(n, node_input(n, 3 + k), n->in[k], dims[k - 1], b, h, j, d));
    }
  }
  return true;
}

/* Across channels: x / (bias + alpha / size * sum of squares)^beta, the
   sum over channels c - (size-1)/2 .. c + size/2. */
bool fold_lrn(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  int64_t c = x->dims[1], inner = dims_product(x->dims, 2, x->rank), size = n->p.lrn.size;
  for (int64_t i = 0; i < tensor_numel(x); i++) {
    int64_t ch = i / inner % c, base = i - ch * inner;
    int64_t lo = ch - (size - 1) / 2, hi = ch + size / 2;
    double sq = 0;
    for (int64_t k = lo < 0 ? 0 : lo; k <= hi && k < c; k++) {
      double v = getd(x, base + k * inner);
      sq += v * v;
    }
    double d = n->p.lrn.bias + n->p.lrn.alpha / (double)size * sq;
    putd(n->out[0], i, getd(x, i) / pow(d, n->p.lrn.beta));
  }
  return true;
}

/* The index, among the groups of elements that MeanVarianceNormalization
   normalises together, of element i: its coordinates off the reduced
   axes. */
static int64_t group_of(const Node *n, const Tensor *x, int64_t i, int64_t *gdims) {
  int64_t c[IR_MAX_RANK];
  unravel(i, x->rank, x->dims, c);
  for (int d = 0; d < x->rank; d++) {
    gdims[d] = n->p.reduce.reduced[d] ? 1 : x->dims[d];
    if (n->p.reduce.reduced[d])
      c[d] = 0;
  }
  return ravel(x->rank, gdims, c);
}

/* (x - mean) / (sqrt(variance) + 1e-9) over the reduced axes: the spec's
   epsilon goes on the standard deviation. */
bool fold_mvn(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  int64_t total = tensor_numel(x), gdims[IR_MAX_RANK];
  group_of(n, x, 0, gdims);
  int64_t groups = dims_product(gdims, 0, x->rank);
  double *sum = calloc((size_t)(3 * groups + 1), sizeof(double));
  double *sq = sum + groups, *count = sq + groups;
  for (int64_t i = 0; i < total; i++) {
    int64_t k = group_of(n, x, i, gdims);
    sum[k] += getd(x, i);
    count[k] += 1;
  }
  for (int64_t i = 0; i < total; i++) {
    int64_t k = group_of(n, x, i, gdims);
    double d = getd(x, i) - sum[k] / count[k];
    sq[k] += d * d;
  }
  for (int64_t i = 0; i < total; i++) {
    int64_t k = group_of(n, x, i, gdims);
    double sd = sqrt(sq[k] / count[k]);
    putd(n->out[0], i, (getd(x, i) - sum[k] / count[k]) / (sd + 1e-9));
  }
  free(sum);
  return true;
}

/* x / the L1 or L2 norm along the axis; a zero norm gives 0, as the
   run-time kernel does, rather than the reference's 0 / 0. */
bool fold_lp_norm(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  int axis = n->p.lp.axis;
  int64_t outer = dims_product(x->dims, 0, axis), len = x->dims[axis];
  int64_t inner = dims_product(x->dims, axis + 1, x->rank);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t e = 0; e < inner; e++) {
      int64_t base = o * len * inner + e;
      double s = 0;
      for (int64_t j = 0; j < len; j++) {
        double v = getd(x, base + j * inner);
        s += n->p.lp.p == 1 ? fabs(v) : v * v;
      }
      double norm = n->p.lp.p == 1 ? s : sqrt(s);
      for (int64_t j = 0; j < len; j++)
        putd(n->out[0], base + j * inner, norm == 0 ? 0 : getd(x, base + j * inner) / norm);
    }
  return true;
}

/* ------------------------------------------------- Gemm and MatMul */

/* One product of an M x K matrix at a[abase] and a K x N one at b[bbase],
   read through element strides (row, column) so that a transposed
   operand needs no copy. Floats sum in double into acc[M*N]; integers
   sum exactly, wrapping at 64 bits, into iacc. */
typedef struct Operand {
  const Tensor *t;
  int64_t base, row, col;
} Operand;

static void matmul_block(Operand a, Operand b, int64_t m, int64_t k, int64_t nn, double *acc,
                         uint64_t *iacc) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < nn; j++) {
      double s = 0;
      uint64_t si = 0;
      for (int64_t p = 0; p < k; p++) {
        int64_t ai = a.base + i * a.row + p * a.col, bi = b.base + p * b.row + j * b.col;
        if (iacc)
          si += getu(a.t, ai) * getu(b.t, bi);
        else
          s += getd(a.t, ai) * getd(b.t, bi);
      }
      if (iacc)
        iacc[i * nn + j] = si;
      else
        acc[i * nn + j] = s;
    }
}

/* An exact integer product as the double that alpha and beta scale. */
static double int_as_double(const Tensor *t, uint64_t v) {
  return is_u64(t) ? (double)v : (double)(int64_t)v;
}

/* Y = alpha * A' B' + beta * C, C broadcast to [M, N]. Integer Gemm is
   exact when alpha and beta are 1; otherwise the reference computes in
   floating point and truncates, and so does this. */
bool fold_gemm(Graph *g, Node *n) {
  const Tensor *a = n->in[0], *b = n->in[1], *c = node_input(n, 2);
  Tensor *y = n->out[0];
  bool ta = n->p.gemm.trans_a, tb = n->p.gemm.trans_b, exact = y->i64 != NULL;
  int64_t m = y->dims[0], nn = y->dims[1], k = a->dims[ta ? 0 : 1];
  if (!affordable(m * nn, k))
    return false;
  Operand oa = {a, 0, ta ? 1 : k, ta ? m : 1}, ob = {b, 0, tb ? 1 : nn, tb ? k : 1};
  double *acc = calloc((size_t)(m * nn + 1), sizeof(double));
  uint64_t *iacc = exact ? calloc((size_t)(m * nn + 1), sizeof(uint64_t)) : NULL;
  matmul_block(oa, ob, m, k, nn, acc, iacc);
  int64_t cs[2] = {0, 0};
  if (c)
    broadcast_strides(c->rank, c->dims, 2, y->dims, cs);
  double alpha = n->p.gemm.alpha, beta = n->p.gemm.beta;
  for (int64_t i = 0; i < m * nn; i++) {
    int64_t ci = c ? broadcast_offset(i, 2, y->dims, cs) : 0;
    if (exact && alpha == 1 && beta == 1)
      y->i64[i] = (int64_t)(iacc[i] + (c ? getu(c, ci) : 0));
    else if (exact)
      putd(y, i, alpha * int_as_double(y, iacc[i]) + (c ? beta * getd(c, ci) : 0));
    else
      putd(y, i, activate(n, alpha * acc[i] + (c ? beta * getd(c, ci) : 0)));
  }
  free(acc);
  free(iacc);
  return true;
}

/* Numpy's matmul: a 1-D A is a row and a 1-D B a column (those dims
   leave the result again, which the output's shape already says); the
   dims before the last two broadcast. */
bool fold_matmul(Graph *g, Node *n) {
  if (n->nin > 2)
    return false; /* a fused bias (fuse-bias): only its kernels add it */
  const Tensor *a = n->in[0], *b = n->in[1];
  Tensor *y = n->out[0];
  int64_t ad[IR_MAX_RANK + 1], bd[IR_MAX_RANK + 1];
  int ar, br;
  matmul_operands(a, b, ad, &ar, bd, &br);
  int64_t m = ad[ar - 2], k = ad[ar - 1], nn = bd[br - 1];
  int64_t bdims[IR_MAX_RANK + 2], as[IR_MAX_RANK], bs[IR_MAX_RANK];
  int brank;
  broadcast_shape(ar - 2, ad, br - 2, bd, &brank, bdims);
  broadcast_strides(ar - 2, ad, brank, bdims, as);
  broadcast_strides(br - 2, bd, brank, bdims, bs);
  int64_t batches = dims_product(bdims, 0, brank);
  if (!affordable(batches * m * nn, k))
    return false;
  bool exact = y->i64 != NULL;
  double *acc = calloc((size_t)(m * nn + 1), sizeof(double));
  uint64_t *iacc = exact ? calloc((size_t)(m * nn + 1), sizeof(uint64_t)) : NULL;
  for (int64_t t = 0; t < batches; t++) {
    Operand oa = {a, broadcast_offset(t, brank, bdims, as) * m * k, k, 1};
    Operand ob = {b, broadcast_offset(t, brank, bdims, bs) * k * nn, nn, 1};
    matmul_block(oa, ob, m, k, nn, acc, iacc);
    for (int64_t i = 0; i < m * nn; i++) {
      if (exact)
        y->i64[t * m * nn + i] = (int64_t)iacc[i];
      else
        putd(y, t * m * nn + i, activate(n, acc[i]));
    }
  }
  free(acc);
  free(iacc);
  return true;
}

/* ---------------------------------------------------- integer products */

/* Element k of a zero point of one value or one per row, column or
   channel; 0 when absent. */
static int64_t zero_at(const Tensor *z, int64_t k) {
  if (!z)
    return 0;
  return z->i64[tensor_numel(z) == 1 ? 0 : k];
}

/* MatMulInteger's sums into out: MatMul's broadcasting over (A -
   a_zero_point) and (B - b_zero_point), exact in int64. False when the
   work is past the folding limit. */
static bool matmul_integer_sums(const Tensor *a, const Tensor *b, const Tensor *za,
                                const Tensor *zb, int64_t *out) {
  int64_t ad[IR_MAX_RANK + 1], bd[IR_MAX_RANK + 1];
  int ar, br;
  matmul_operands(a, b, ad, &ar, bd, &br);
  int64_t m = ad[ar - 2], k = ad[ar - 1], nn = bd[br - 1];
  int64_t bdims[IR_MAX_RANK + 2], as[IR_MAX_RANK], bs[IR_MAX_RANK];
  int brank;
  broadcast_shape(ar - 2, ad, br - 2, bd, &brank, bdims);
  broadcast_strides(ar - 2, ad, brank, bdims, as);
  broadcast_strides(br - 2, bd, brank, bdims, bs);
  int64_t batches = dims_product(bdims, 0, brank);
  if (!affordable(batches * m * nn, k))
    return false;
  for (int64_t t = 0; t < batches; t++) {
    int64_t abase = broadcast_offset(t, brank, bdims, as) * m * k;
    int64_t bbase = broadcast_offset(t, brank, bdims, bs) * k * nn;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < nn; j++) {
        int64_t sum = 0;
        for (int64_t p = 0; p < k; p++)
          sum += (a->i64[abase + i * k + p] - zero_at(za, i)) *
                 (b->i64[bbase + p * nn + j] - zero_at(zb, j));
        out[(t * m + i) * nn + j] = sum;
      }
  }
  return true;
}

/* ConvInteger's sums into out (y's shape): Conv over (x - x_zero_point)
   and (w - w_zero_point), taps in the padding adding nothing. */
static bool conv_integer_sums(const Node *n, const Tensor *x, const Tensor *w, const Tensor *zx,
                              const Tensor *zw, const Tensor *y, int64_t *out) {
  Geometry g = geometry(n, x, y);
  int64_t batch = x->dims[0], cin = x->dims[1], m = y->dims[1], groups = n->win.group;
  int64_t cg = cin / groups, mg = m / groups, ksize = spatial(g.kernel);
  int64_t isize = spatial(g.in), osize = spatial(g.out), o[3], k[3];
  if (!affordable(tensor_numel(y), cg * ksize))
    return false;
  for (int64_t bi = 0; bi < batch; bi++)
    for (int64_t oc = 0; oc < m; oc++) {
      int64_t xbase = (bi * cin + oc / mg * cg) * isize, wbase = oc * cg * ksize;
      for (int64_t p = 0; p < osize; p++) {
        unravel(p, 3, g.out, o);
        int64_t sum = 0;
        for (int64_t c = 0; c < cg; c++)
          for (int64_t t = 0; t < ksize; t++) {
            unravel(t, 3, g.kernel, k);
            int64_t at = tap_offset(&g, o, k);
            if (at >= 0)
              sum += (x->i64[xbase + c * isize + at] - zero_at(zx, 0)) *
                     (w->i64[wbase + c * ksize + t] - zero_at(zw, oc));
          }
        out[(bi * m + oc) * osize + p] = sum;
      }
    }
  return true;
}

/* The driver narrows the int64 sums to int32. */
bool fold_matmul_integer(Graph *g, Node *n) {
  return matmul_integer_sums(n->in[0], n->in[1], node_input(n, 2), node_input(n, 3),
                             n->out[0]->i64);
}

bool fold_conv_integer(Graph *g, Node *n) {
  return conv_integer_sums(n, n->in[0], n->in[1], node_input(n, 2), node_input(n, 3), n->out[0],
                           n->out[0]->i64);
}

/* QLinearMatMul and QLinearConv after their sums: each sum, wrapped to
   int32 as the kernel's is, plus the bias (QLinearConv's input 8), is
   requantised by opc_requantize_of with its channel's multiplier. Output
   element i is in channel i / inner % channels. */
void qlinear_bounds(const Node *n, float *lo, float *hi) {
  const Tensor *sy = n->in[6], *zy = n->in[7];
  *lo = n->out[0]->dtype == DT_INT8 ? -128.0f : 0.0f;
  *hi = n->out[0]->dtype == DT_INT8 ? 127.0f : 255.0f;
  if (n->act != OPC_ACT_RELU && n->act != OPC_ACT_CLIP)
    return;
  float s = (float)getd(sy, 0), z = (float)zero_at(zy, 0);
  float below = opc_quantize_of(n->act == OPC_ACT_RELU ? 0.0f : n->act_alpha, s, z, *lo, *hi);
  float above = n->act == OPC_ACT_RELU ? *hi : opc_quantize_of(n->act_beta, s, z, *lo, *hi);
  *lo = below;
  *hi = above;
}

bool qlinear_conv_depthwise_folds(const Node *n) {
  const Tensor *x = n->in[0], *w = n->in[3], *y = n->out[0], *bias = node_input(n, 8);
  if (n->op != OP_QLINEAR_CONV || n->win.nspatial != 2 || x->rank != 4 || y->rank != 4 ||
      x->dims[1] < 4 || n->win.group != x->dims[1] || y->dims[1] != x->dims[1])
    return false;
  return w->i64 && n->in[5]->i64 && n->in[2]->i64 && n->in[7]->i64 &&
         tensor_numel(n->in[2]) == 1 && tensor_numel(n->in[7]) == 1 && (!bias || bias->i64) &&
         int8_filter_fits(w, n->in[5]);
}

bool conv_runs_channels_last(const Node *n) {
  const Tensor *x = n->in[0], *w = n->in[1], *y = n->out[0], *bias = node_input(n, 2);
  if (n->op != OP_CONV || n->win.nspatial != 2 || x->rank != 4 || y->rank != 4 ||
      x->dtype != DT_FLOAT || !w->f32 || (bias && !bias->f32) || x->dims[1] > 4096)
    return false;
  bool depthwise = n->win.group == x->dims[1] && y->dims[1] == x->dims[1] && x->dims[1] > 1;
  return (n->win.group <= 1 || depthwise) && n->win.pad_begin[0] >= 0 && n->win.pad_begin[1] >= 0;
}

bool writes_pixel_runs(const Node *n) {
  const Tensor *y = n->out[0];
  if (n->op == OP_CONV)
    return conv_runs_channels_last(n);
  bool pool = n->op == OP_MAX_POOL || n->op == OP_AVERAGE_POOL;
  return pool && n->win.nspatial == 2 && (n->nout == 1 || !n->out[1]) && y->rank == 4 &&
         y->dtype == DT_FLOAT;
}

bool int8_gemm_allowed(const Graph *g) {
  const char *choice = getenv("OPC_INT8_GEMM");
  return !g->serve && !(choice && strcmp(choice, "kernel") == 0);
}

bool int8_gemm_sizes_fit(int64_t k4, int64_t m4, int64_t n) {
  return k4 < (1 << 24) && m4 * n < 0x7fffffff && m4 * k4 < 0x7fffffff && n * k4 < 0x7fffffff;
}

bool int8_filter_fits(const Tensor *w, const Tensor *zw) {
  int64_t rows = w->dims[0], k = rows ? tensor_numel(w) / rows : 0;
  if (!w->i64 || (zw && !zw->i64) || (zw && tensor_numel(zw) != 1 && tensor_numel(zw) != rows))
    return false;
  for (int64_t r = 0; r < rows; r++) {
    int64_t z = !zw ? 0 : tensor_numel(zw) > 1 ? zw->i64[r] : zw->i64[0];
    for (int64_t q = 0; q < k; q++)
      if (w->i64[r * k + q] - z < -128 || w->i64[r * k + q] - z > 127)
        return false;
  }
  return true;
}

static int64_t round_up4(int64_t v) { return (v + 3) / 4 * 4; }

bool qlinear_conv_takes_int8_gemm(const Node *n) {
  if (n->op != OP_QLINEAR_CONV)
    return false;
  const Tensor *x = n->in[0], *w = n->in[3], *y = n->out[0];
  if (n->win.nspatial != 2 || n->win.group != 1 || x->rank != 4 || y->rank != 4 ||
      w->rank != 4 || tensor_numel(x) == 0 || tensor_numel(y) == 0 || w->dims[0] == 0 ||
      tensor_numel(n->in[2]) != 1)
    return false;
  int64_t k4 = round_up4(tensor_numel(w) / w->dims[0]);
  if (!int8_gemm_sizes_fit(k4, round_up4(y->dims[1]), y->dims[0] * y->dims[2] * y->dims[3]))
    return false;
  return int8_filter_fits(w, n->in[5]);
}

static void requantize_sums(const Node *n, const int64_t *sums, int64_t inner, int64_t channels) {
  const Tensor *sa = n->in[1], *sb = n->in[4], *sy = n->in[6], *zy = n->in[7];
  const Tensor *bias = node_input(n, 8);
  Tensor *y = n->out[0];
  float lo, hi;
  qlinear_bounds(n, &lo, &hi);
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    int64_t c = i / inner % channels;
    uint32_t v = (uint32_t)sums[i] + (bias ? (uint32_t)bias->i64[c] : 0u);
    float m = opc_requant_scale_of((float)getd(sa, 0), (float)getd(sb, tensor_numel(sb) == 1 ? 0 : c),
                                   (float)getd(sy, 0));
    y->i64[i] = (int64_t)opc_requantize_of((int32_t)v, m, (float)zero_at(zy, 0), lo, hi);
  }
}

bool fold_qlinear_matmul(Graph *g, Node *n) {
  Tensor *y = n->out[0];
  int64_t *sums = calloc((size_t)tensor_numel(y) + 1, sizeof(int64_t));
  bool done = matmul_integer_sums(n->in[0], n->in[3], n->in[2], n->in[5], sums);
  const Tensor *b = n->in[3];
  int64_t cols = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
  if (done)
    requantize_sums(n, sums, 1, cols);
  free(sums);
  return done;
}

bool fold_qlinear_conv(Graph *g, Node *n) {
  Tensor *y = n->out[0];
  int64_t *sums = calloc((size_t)tensor_numel(y) + 1, sizeof(int64_t));
  bool done = conv_integer_sums(n, n->in[0], n->in[3], n->in[2], n->in[5], y, sums);
  if (done)
    requantize_sums(n, sums, dims_product(y->dims, 2, y->rank), y->dims[1]);
  free(sums);
  return done;
}

bool fold_quantized_add(Graph *g, Node *n) {
  (void)g;
  const Tensor *a = n->in[0], *b = n->in[3], *zy = n->in[7];
  Tensor *y = n->out[0];
  float lo, hi;
  qlinear_bounds(n, &lo, &hi);
  float sa = (float)getd(n->in[1], 0), sb = (float)getd(n->in[4], 0), sy = (float)getd(n->in[6], 0);
  int za = (int)zero_at(n->in[2], 0), zb = (int)zero_at(n->in[5], 0);
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    float v = opc_dequantize8_of((int)a->i64[i] - za, sa) + opc_dequantize8_of((int)b->i64[i] - zb, sb);
    y->i64[i] = (int64_t)opc_quantize_of(v, sy, (float)zero_at(zy, 0), lo, hi);
  }
  return true;
}

bool fold_quantized_lookup(Graph *g, Node *n) {
  (void)g;
  const Tensor *x = n->in[0], *table = n->in[1];
  Tensor *y = n->out[0];
  for (int64_t i = 0; i < tensor_numel(y); i++)
    y->i64[i] = table->i64[(uint8_t)x->i64[i]];
  return true;
}

/* ---------------------------------------------------- data movement */

/* Where output coordinate o along one axis reads the input under Pad's
   mode, or -1 for the constant. A negative pad crops; the other modes
   then reflect, repeat or wrap the part of the input that is left, which
   spans [lo, lo + len). */
static int64_t pad_source(PadMode mode, int64_t o, int64_t before, int64_t lo, int64_t len) {
  int64_t r = o - before;
  if (r >= 0 && r < len)
    return lo + r;
  if (mode == PAD_CONSTANT || len == 0)
    return -1;
  if (mode == PAD_EDGE)
    return lo + (r < 0 ? 0 : len - 1);
  if (mode == PAD_WRAP)
    return lo + ((r % len) + len) % len;
  if (len == 1)
    return lo;
  int64_t period = 2 * (len - 1); /* reflect: the edge is not repeated */
  int64_t m = ((r % period) + period) % period;
  return lo + (m < len ? m : period - m);
}

bool fold_pad(Graph *g, Node *n) {
  const Tensor *x = n->in[0], *cv = node_input(n, 2);
  Tensor *y = n->out[0];
  int64_t before[IR_MAX_RANK] = {0}, lo[IR_MAX_RANK] = {0}, len[IR_MAX_RANK];
  memcpy(len, x->dims, sizeof len);
  for (int k = 0; k < n->p.pad.naxes; k++) {
    int d = n->p.pad.axes[k];
    int64_t b = n->p.pad.pads[k], e = n->p.pad.pads[n->p.pad.naxes + k];
    before[d] = b > 0 ? b : 0;
    lo[d] = b < 0 ? -b : 0;
    len[d] = x->dims[d] - lo[d] - (e < 0 ? -e : 0);
  }
  int64_t c[IR_MAX_RANK];
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    unravel(i, y->rank, y->dims, c);
    bool inside = true;
    for (int d = 0; d < y->rank && inside; d++) {
      c[d] = pad_source(n->p.pad.mode, c[d], before[d], lo[d], len[d]);
      inside = c[d] >= 0;
    }
    if (inside)
      copy_elem(y, i, x, ravel(x->rank, x->dims, c));
    else if (cv)
      copy_elem(y, i, cv, 0);
    else
      putd(y, i, n->p.pad.value);
  }
  return true;
}

/* DepthToSpace (DCR: depth is (row, column, channel); CRD: (channel, row,
   column)) and its inverse SpaceToDepth, which is always DCR. */
bool fold_depth_space(Graph *g, Node *n) {
  bool to_space = n->op == OP_DEPTH_TO_SPACE, crd = n->p.depth_space.crd;
  const Tensor *deep = to_space ? n->in[0] : n->out[0];
  const Tensor *wide = to_space ? n->out[0] : n->in[0];
  int64_t bs = n->p.depth_space.blocksize, c = wide->dims[1];
  int64_t h = deep->dims[2], w = deep->dims[3];
  for (int64_t i = 0; i < tensor_numel(wide); i++) {
    int64_t wc[4];
    unravel(i, 4, wide->dims, wc);
    int64_t bi = wc[2] % bs, bj = wc[3] % bs;
    int64_t depth = crd ? (wc[1] * bs + bi) * bs + bj : (bi * bs + bj) * c + wc[1];
    int64_t di = ((wc[0] * deep->dims[1] + depth) * h + wc[2] / bs) * w + wc[3] / bs;
    if (to_space)
      copy_elem(n->out[0], i, n->in[0], di);
    else
      copy_elem(n->out[0], di, n->in[0], i);
  }
  return true;
}

/* ---------------------------------------------------------- Resize */

/*
 * Resize and Upsample, separable as the reference and the run-time kernel
 * (runtime/kernels/opc_kernels.inc, opc_resize) are: each resized axis
 * maps an output coordinate to a source coordinate in double, takes 1
 * (nearest), 2 (linear) or 4 (cubic) neighbours clamped into the input,
 * and the taps of all axes multiply. With antialias, a downscaled axis
 * stretches the linear or cubic kernel by 1 / scale, over as many taps
 * as it then covers, and normalises the weights (the reference's
 * _linear_coeffs_antialias and _cubic_coeffs_antialias).
 */
/* The taps of one output coordinate along one axis: `count` input
   indices (clamped into the input) and weights, in arrays the axis
   allocates, `count` per output coordinate. */
typedef struct Taps {
  int64_t *idx;
  double *w;
  int count;
  bool outside; /* tf_crop_and_resize sampled beyond the input */
} Taps;

/* How the axes of a Resize or Upsample are sampled. */
typedef struct Sampling {
  int coord;  /* ResizeCoord */
  int interp; /* 0-3 the ResizeNearest modes, 4 linear, 5 cubic */
  double scale[IR_MAX_RANK];
  double roi_start[IR_MAX_RANK], roi_end[IR_MAX_RANK];
} Sampling;

/* The source coordinate of output coordinate yc along an axis of input
   size `in` and output size `out`. */
static double resize_source(const Sampling *s, int d, double yc, int64_t in, int64_t out,
                            bool *outside) {
  double scale = s->scale[d], width = scale * (double)in; /* unrounded output size */
  switch (s->coord) {
  case COORD_PYTORCH_HALF_PIXEL: return width == 1.0 ? -0.5 : (yc + 0.5) / scale - 0.5;
  case COORD_ALIGN_CORNERS: return width == 1.0 ? 0.0 : yc * (double)(in - 1) / (width - 1.0);
  case COORD_ASYMMETRIC: return yc / scale;
  case COORD_TF_HALF_PIXEL_FOR_NN: return (yc + 0.5) / scale;
  case COORD_TF_CROP_AND_RESIZE: {
    double extent = s->roi_end[d] - s->roi_start[d], x;
    if (width == 1.0)
      x = extent * (double)(in - 1) / 2.0;
    else
      x = yc * extent * (double)(in - 1) / (width - 1.0);
    x += s->roi_start[d] * (double)(in - 1);
    *outside = *outside || x < 0.0 || x > (double)(in - 1);
    return x;
  }
  case COORD_HALF_PIXEL_SYMMETRIC: {
    double center = (double)in / 2.0, offset = center * (1.0 - (double)out / width);
    return offset + (yc + 0.5) / scale - 0.5;
  }
  default: return (yc + 0.5) / scale - 0.5; /* half_pixel */
  }
}

/* Keys' cubic convolution kernel at distance d. */
static double cubic_kernel(double a, double d) {
  d = fabs(d);
  if (d <= 1)
    return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2)
    return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

/* The first tap's offset from the window's base for an interpolation of
   support 1 (linear) or 2 (cubic): antialiasing widens the window by
   1 / scale when downscaling, so that every input pixel contributes. */
static int64_t first_tap(const Node *n, const Sampling *s, int d) {
  if (s->interp < 4)
    return 0; /* nearest: two taps, one of weight 1 */
  double support = s->interp == 5 ? 2.0 : 1.0, scale = 1.0;
  if (n->p.resize.antialias && s->scale[d] < 1.0)
    scale = s->scale[d];
  return (int64_t)floor(-support / scale) + 1;
}

/* Taps per output coordinate along axis d. */
static int tap_count(const Node *n, const Sampling *s, int d) {
  return (int)(2 - 2 * first_tap(n, s, d));
}

/* The weight of the tap at offset i from the base, at fraction r of the
   way from the base to the next pixel. */
static double tap_weight(const Node *n, const Sampling *s, int d, int64_t i, double r) {
  double scale = n->p.resize.antialias && s->scale[d] < 1.0 ? s->scale[d] : 1.0;
  double dist = ((double)i - r) * scale;
  if (s->interp == 5)
    return cubic_kernel(n->p.resize.cubic_a, dist);
  double w = 1 - fabs(dist);
  return w < 0 ? 0 : w;
}

/* The taps at source coordinate x along axis d. The window's base is the
   pixel at or left of x, and an exact source position counts as the end
   of the step from the pixel before (fraction 1), so that nearest and
   linear pick it alone. */
static void resize_taps(const Node *n, const Sampling *s, int d, double x, int64_t in, Taps *t) {
  double p = floor(x);
  bool exact = x == p, upper;
  double r = exact ? 1.0 : x - p;
  int64_t base = (int64_t)p - (exact ? 1 : 0), first = first_tap(n, s, d);
  t->count = tap_count(n, s, d);
  if (s->interp >= 4) {
    double total = 0;
    for (int k = 0; k < t->count; k++)
      total += t->w[k] = tap_weight(n, s, d, first + k, r);
    /* Keys' and the linear weights sum to 1; a widened window's do not. */
    if (n->p.resize.antialias && total != 0)
      for (int k = 0; k < t->count; k++)
        t->w[k] /= total;
  } else {
    /* Does the nearest neighbour lie at the upper index? */
    if (exact || s->interp == NEAREST_CEIL)
      upper = true;
    else if (s->interp == NEAREST_FLOOR)
      upper = false;
    else if (s->interp == NEAREST_ROUND_PREFER_CEIL)
      upper = r >= 0.5;
    else
      upper = r > 0.5;
    t->w[0] = upper ? 0.0 : 1.0;
    t->w[1] = upper ? 1.0 : 0.0;
  }
  bool exclude = n->p.resize.exclude_outside;
  double total = 0.0;
  for (int k = 0; k < t->count; k++) {
    int64_t i = base + first + k;
    if (exclude && (i < 0 || i >= in))
      t->w[k] = 0.0;
    total += t->w[k];
    t->idx[k] = i < 0 ? 0 : i >= in ? in - 1 : i;
  }
  if (exclude && total != 0.0)
    for (int k = 0; k < t->count; k++)
      t->w[k] /= total;
}

/* The scales given as floats: Upsample's input or attribute, Resize's
   scales. */
static const float *given_scales(const Node *n, const Tensor *st, int *count) {
  if (st && tensor_numel(st) > 0) {
    *count = (int)tensor_numel(st);
    return st->f32;
  }
  *count = n->p.resize.nscales;
  return n->p.resize.scales;
}

/* Resize-11 and later: the scale of each axis from scales, or from sizes
   under the aspect-ratio policy (one scale for every axis, the smallest
   for not_larger, the largest for not_smaller). */
static void resize_scales(const Node *n, Sampling *s) {
  const Tensor *x = n->in[0], *st = node_input(n, 2), *zt = node_input(n, 3);
  const int *axes = n->p.resize.axes;
  int naxes = n->p.resize.naxes, count;
  const float *sc = given_scales(n, st, &count);
  if (sc) {
    for (int k = 0; k < naxes; k++)
      s->scale[axes[k]] = sc[k];
    return;
  }
  double pick = 0;
  for (int k = 0; k < naxes; k++) {
    double r = (double)zt->i64[k] / (double)x->dims[axes[k]];
    s->scale[axes[k]] = r;
    bool better = n->p.resize.policy == ASPECT_NOT_SMALLER ? r > pick : r < pick;
    if (k == 0 || better)
      pick = r;
  }
  if (n->p.resize.policy != ASPECT_STRETCH)
    for (int k = 0; k < naxes; k++)
      s->scale[axes[k]] = pick;
}

/* Fills the sampling of a Resize or Upsample; reports and returns false
   for what opc does not evaluate. */
static bool resize_sampling(Graph *g, Node *n, Sampling *s) {
  int rank = n->in[0]->rank, mode = n->p.resize.mode;
  for (int d = 0; d < rank; d++) {
    s->scale[d] = 1.0;
    s->roi_start[d] = 0.0;
    s->roi_end[d] = 1.0;
  }
  if (n->op == OP_UPSAMPLE || (g->opset > 0 && g->opset < 11)) {
    /* Upsample and Resize-10: asymmetric coordinates, nearest rounds down. */
    if (mode != RESIZE_NEAREST && mode != RESIZE_LINEAR && mode != RESIZE_BILINEAR) {
      ir_error(g, n, "mode is not nearest or linear");
      return false;
    }
    s->coord = COORD_ASYMMETRIC;
    s->interp = mode == RESIZE_NEAREST ? NEAREST_FLOOR : 4;
    int count;
    const float *sc = given_scales(n, node_input(n, 1), &count);
    for (int d = 0; d < rank && d < count; d++)
      s->scale[d] = sc[d];
    return true;
  }
  if (mode < 0 || mode == RESIZE_BILINEAR || n->p.resize.coord < 0 || n->p.resize.nearest < 0) {
    ir_error(g, n, "unknown mode, coordinate_transformation_mode or nearest_mode");
    return false;
  }
  s->coord = n->p.resize.coord;
  s->interp = mode == RESIZE_NEAREST ? n->p.resize.nearest : mode == RESIZE_LINEAR ? 4 : 5;
  resize_scales(n, s);
  const Tensor *roi = node_input(n, 1);
  int naxes = n->p.resize.naxes;
  if (s->coord == COORD_TF_CROP_AND_RESIZE) {
    if (!roi || tensor_numel(roi) != 2 * naxes) {
      ir_error(g, n, "tf_crop_and_resize needs a roi of %d values", 2 * naxes);
      return false;
    }
    for (int k = 0; k < naxes; k++) {
      s->roi_start[n->p.resize.axes[k]] = getd(roi, k);
      s->roi_end[n->p.resize.axes[k]] = getd(roi, naxes + k);
    }
  }
  return true;
}

/* Whether axis d maps each output coordinate to the same input one. */
static bool resize_identity(const Sampling *s, const Tensor *x, const Tensor *y, int d) {
  if (x->dims[d] == 1 && y->dims[d] == 1)
    return true;
  /* tf_half_pixel_for_nn shifts by half a pixel: identity only when
     rounding down. */
  if (s->coord == COORD_TF_HALF_PIXEL_FOR_NN && s->interp != NEAREST_ROUND_PREFER_FLOOR &&
      s->interp != NEAREST_FLOOR)
    return false;
  return s->scale[d] == 1.0 && x->dims[d] == y->dims[d] && s->roi_start[d] == 0.0 &&
         s->roi_end[d] == 1.0;
}

/* The weighted sum of the input at the taps of every resized axis:
   taps[k][c[k]] for resized axis k, one combination at a time. */
static double resize_point(const Tensor *x, const int *axes, int naxes, Taps *const *taps,
                           const int64_t *yc) {
  int64_t xc[IR_MAX_RANK];
  memcpy(xc, yc, sizeof xc);
  int64_t total = 1;
  for (int k = 0; k < naxes; k++)
    total *= taps[k][yc[axes[k]]].count;
  double sum = 0;
  for (int64_t t = 0; t < total; t++) {
    double weight = 1.0;
    int64_t rest = t;
    for (int k = naxes - 1; k >= 0; k--) {
      const Taps *tp = &taps[k][yc[axes[k]]];
      int64_t j = rest % tp->count;
      rest /= tp->count;
      weight *= tp->w[j];
      xc[axes[k]] = tp->idx[j];
    }
    if (weight != 0.0)
      sum += weight * getd(x, ravel(x->rank, x->dims, xc));
  }
  return sum;
}

/* Resize and Upsample. */
bool fold_resize(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  Sampling s;
  if (!resize_sampling(g, n, &s))
    return false;
  int64_t per_output = 1; /* taps, an antialiased window's included */
  for (int d = 0; d < x->rank; d++)
    if (!resize_identity(&s, x, y, d))
      per_output *= tap_count(n, &s, d);
  if (!affordable(tensor_numel(y), per_output))
    return false;
  /* The taps of every output coordinate of every resized axis. */
  int axes[IR_MAX_RANK], naxes = 0;
  Taps *taps[IR_MAX_RANK];
  for (int d = 0; d < x->rank; d++) {
    if (resize_identity(&s, x, y, d))
      continue;
    int64_t out = y->dims[d], per = tap_count(n, &s, d);
    Taps *t = calloc((size_t)out + 1, sizeof(Taps));
    t[0].idx = calloc((size_t)(out * per + 1), sizeof(int64_t));
    t[0].w = calloc((size_t)(out * per + 1), sizeof(double));
    for (int64_t c = 0; c < out; c++) {
      bool outside = false;
      double src = resize_source(&s, d, (double)c, x->dims[d], out, &outside);
      t[c].idx = t[0].idx + c * per;
      t[c].w = t[0].w + c * per;
      resize_taps(n, &s, d, src, x->dims[d], &t[c]);
      t[c].outside = outside;
    }
    axes[naxes] = d;
    taps[naxes++] = t;
  }
  int64_t yc[IR_MAX_RANK] = {0};
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    unravel(i, y->rank, y->dims, yc);
    bool outside = false;
    for (int k = 0; k < naxes; k++)
      outside = outside || taps[k][yc[axes[k]]].outside;
    if (outside)
      putd(y, i, n->p.resize.extrapolation);
    else
      putd(y, i, resize_point(x, axes, naxes, taps, yc));
  }
  for (int k = 0; k < naxes; k++) {
    free(taps[k][0].idx);
    free(taps[k][0].w);
    free(taps[k]);
  }
  return true;
}

/* ------------------------------------------------------ determinants */

/* Det: scalar.h's opc_det_of on each matrix, as the kernel computes it. */
bool fold_det(Graph *g, Node *n) {
  (void)g;
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  long long m = x->dims[x->rank - 1];
  if (!x->f32 || !y->f32 || !affordable(tensor_numel(y), m * m * m))
    return false;
  for (int64_t i = 0; i < tensor_numel(y); i++)
    y->f32[i] = opc_det_of(x->f32 + i * m * m, m, m, 1);
  return true;
}

/* ------------------------------------------------------ grid sampling */

/* GridSample: each output element is scalar.h's opc_grid_sample_of over
   its (n, c) plane, as the kernel computes it. Float data only (integer
   inputs stay run-time work, which the backend refuses by type). */
bool fold_grid_sample(Graph *g, Node *n) {
  (void)g;
  const Tensor *x = n->in[0], *grid = n->in[1];
  Tensor *y = n->out[0];
  int r = n->p.grid.spatial, mode = n->p.grid.mode;
  if (!x->f32 || !y->f32 || !grid->f32)
    return false;
  int64_t taps = mode == 0 ? 2 : (mode == 1 ? 1 : 4);
  if (!affordable(tensor_numel(y), r == 2 ? taps * taps : taps * taps * taps))
    return false;
  long long size[3], stride[3];
  for (int d = 0; d < r; d++) {
    size[d] = x->dims[2 + d];
    stride[d] = dims_product(x->dims, 3 + d, x->rank);
  }
  int64_t plane = dims_product(x->dims, 2, x->rank), points = dims_product(grid->dims, 1, r + 1);
  int64_t yc[IR_MAX_RANK];
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    unravel(i, y->rank, y->dims, yc);
    int64_t point = i % points; /* the output's spatial offset is the grid point's */
    const float *xp = x->f32 + (yc[0] * x->dims[1] + yc[1]) * plane;
    const float *gp = grid->f32 + (yc[0] * points + point) * r;
    y->f32[i] = opc_grid_sample_of(xp, r, size, stride, gp, 1, mode, n->p.grid.padding,
                                   n->p.grid.align_corners);
  }
  return true;
}

/* RoiAlign by the kernels' formula (scalar.h), in float as they compute. */
bool fold_roi_align(Graph *g, Node *n) {
  (void)g;
  const Tensor *x = n->in[0], *rois = n->in[1], *batch = n->in[2];
  Tensor *y = n->out[0];
  const int64_t grid = n->p.roi_align.sampling ? n->p.roi_align.sampling : 8;
  if (!x->f32 || !rois->f32 || !batch->i64 || !y->f32 || !affordable(tensor_numel(y), grid * grid))
    return false;
  int64_t c = x->dims[1], h = x->dims[2], w = x->dims[3], yc[4];
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    unravel(i, 4, y->dims, yc);
    const float *plane = x->f32 + (batch->i64[yc[0]] * c + yc[1]) * h * w;
    y->f32[i] = opc_roi_align_of(plane, h, w, w, 1, rois->f32 + yc[0] * 4, 1, yc[2], yc[3],
                                 y->dims[2], y->dims[3], n->p.roi_align.scale,
                                 n->p.roi_align.sampling, n->p.roi_align.half_pixel,
                                 n->p.roi_align.max_mode);
  }
  return true;
}

/* AffineGrid: component k of each point is theta's row k applied to the
   point's normalised coordinates (x, y[, z]) and 1, summed in double. */
bool fold_affine_grid(Graph *g, Node *n) {
  (void)g;
  const Tensor *theta = n->in[0];
  Tensor *y = n->out[0];
  int r = n->p.grid.spatial;
  if (!theta->f32 || !y->f32)
    return false;
  int64_t yc[IR_MAX_RANK];
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    unravel(i, y->rank, y->dims, yc);
    const float *row = theta->f32 + (yc[0] * r + yc[r + 1]) * (r + 1);
    double v = row[r];
    for (int j = 0; j < r; j++)
      v += row[j] * opc_affine_grid_base_of(yc[r - j], y->dims[r - j], n->p.grid.align_corners);
    y->f32[i] = (float)v;
  }
  return true;
}

/* ---------------------------------------------------------- losses */

/* NegativeLogLikelihoodLoss over log-probabilities lp (N, C, d1..dk),
   read through getd or, for SoftmaxCrossEntropyLoss, from a double array
   of them: each label's loss is -lp[n, label, d] * weight[label], 0 where
   ignored; the mean divides by the total weight of the labels counted. */
static void nll(const Node *n, const Tensor *x, const double *lp, Tensor *y) {
  const Tensor *labels = n->in[1], *weight = node_input(n, 2);
  int64_t c = x->dims[1], inner = dims_product(x->dims, 2, x->rank), count = tensor_numel(labels);
  double sum = 0, total = 0;
  for (int64_t i = 0; i < count; i++) {
    int64_t t = labels->i64[i];
    double loss = 0;
    if (!(n->p.loss.has_ignore && t == n->p.loss.ignore)) {
      int64_t at = (i / inner * c + t) * inner + i % inner;
      double w = weight ? getd(weight, t) : 1.0;
      loss = -(lp ? lp[at] : getd(x, at)) * w;
      total += w;
    }
    sum += loss;
    if (n->p.loss.reduction == LOSS_NONE)
      putd(y, i, loss);
  }
  if (n->p.loss.reduction == LOSS_SUM)
    putd(y, 0, sum);
  else if (n->p.loss.reduction == LOSS_MEAN)
    putd(y, 0, sum / total); /* 0 / 0 is NaN, as in the reference */
}

bool fold_nll_loss(Graph *g, Node *n) {
  nll(n, n->in[0], NULL, n->out[0]);
  return true;
}

/* The log-softmax of the scores along the classes (dim 1), then the
   NLL loss; the second output, when wanted, is the log-softmax. */
bool fold_sce_loss(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  Tensor *log_prob = n->nout > 1 ? n->out[1] : NULL;
  int64_t c = x->dims[1], inner = dims_product(x->dims, 2, x->rank), outer = x->dims[0];
  double *lp = malloc(sizeof(double) * (size_t)(tensor_numel(x) + 1));
  for (int64_t o = 0; o < outer; o++)
    for (int64_t e = 0; e < inner; e++) {
      int64_t base = o * c * inner + e;
      double m = -INFINITY, s = 0;
      for (int64_t k = 0; k < c; k++)
        m = fmax(m, getd(x, base + k * inner));
      for (int64_t k = 0; k < c; k++)
        s += exp(getd(x, base + k * inner) - m);
      for (int64_t k = 0; k < c; k++)
        lp[base + k * inner] = getd(x, base + k * inner) - m - log(s);
    }
  nll(n, x, lp, n->out[0]);
  for (int64_t i = 0; log_prob && i < tensor_numel(x); i++)
    putd(log_prob, i, lp[i]);
  free(lp);
  return true;
}

/* ------------------------------------------------------- recurrent */

/* LSTM, GRU and RNN, step by step as the ONNX specification's equations
   go, each batch entry and direction alone. The state is kept in double;
   the activations are the kernels' float formulas (scalar.h). */

/* Where X[t, b, k], Y[t, d, b, j] and a state [d, b, j] live under the
   node's layout. */
static int64_t rnn_x_at(const Node *n, int64_t t, int64_t b) {
  int64_t seq = n->p.rnn.seq, batch = n->p.rnn.batch;
  return (n->p.rnn.batch_major ? b * seq + t : t * batch + b) * n->p.rnn.input;
}

static int64_t rnn_y_at(const Node *n, int64_t t, int64_t d, int64_t b) {
  int64_t seq = n->p.rnn.seq, batch = n->p.rnn.batch, dirs = n->p.rnn.ndirections;
  int64_t i = n->p.rnn.batch_major ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b;
  return i * n->p.rnn.hidden;
}

static int64_t rnn_state_at(const Node *n, int64_t d, int64_t b) {
  int64_t batch = n->p.rnn.batch, dirs = n->p.rnn.ndirections;
  return (n->p.rnn.batch_major ? b * dirs + d : d * batch + b) * n->p.rnn.hidden;
}

/* One direction's view of the inputs: its blocks of W, R, B and P. */
typedef struct RnnCell {
  const Node *n;
  int d;          /* the direction's index */
  int64_t w, r, b, p; /* offsets of its W, R, B and P */
  double *gates;  /* gates * hidden pre-activations */
  double *h, *c;  /* the state, hidden each */
} RnnCell;

/* Activation k of the cell's direction. clip bounds the gates' inputs;
   LSTM's h(Ct) reads the cell state unclipped (as ONNX Runtime does:
   the state is no activation's input). */
static double rnn_act(const RnnCell *cell, int k, double v) {
  const Node *n = cell->n;
  float clip = n->p.rnn.clip;
  if (clip > 0 && !(n->op == OP_LSTM && k == 2))
    v = v < -clip ? -clip : v > clip ? clip : v;
  int d = cell->d;
  return opc_rnn_activation_of(n->p.rnn.act[d][k], (float)v, n->p.rnn.alpha[d][k],
                               n->p.rnn.beta[d][k]);
}

/* Row `row` of W times X[t, b], plus its two biases: the input's part of
   a gate. */
static double rnn_input_part(const RnnCell *cell, int64_t row, int64_t xat) {
  const Node *n = cell->n;
  const Tensor *x = n->in[0], *w = n->in[1], *bias = node_input(n, 3);
  int64_t input = n->p.rnn.input, rows = n->p.rnn.gates * n->p.rnn.hidden;
  double s = bias ? getd(bias, cell->b + row) + getd(bias, cell->b + rows + row) : 0;
  for (int64_t k = 0; k < input; k++)
    s += getd(x, xat + k) * getd(w, cell->w + row * input + k);
  return s;
}

/* Row `row` of R times the vector v (hidden long). */
static double rnn_recurrent_part(const RnnCell *cell, int64_t row, const double *v) {
  const Tensor *r = cell->n->in[2];
  int64_t hidden = cell->n->p.rnn.hidden;
  double s = 0;
  for (int64_t j = 0; j < hidden; j++)
    s += v[j] * getd(r, cell->r + row * hidden + j);
  return s;
}

/* The peephole weight of gate k (0 i, 1 o, 2 f) for unit j, 0 without P. */
static double rnn_peephole(const RnnCell *cell, int k, int64_t j) {
  const Tensor *p = node_input(cell->n, 7);
  return p ? getd(p, cell->p + k * cell->n->p.rnn.hidden + j) : 0;
}

/* LSTM: gates i o f c; Ct = f Ct-1 + i c, Ht = o h(Ct), the peepholes
   adding P (.) Ct-1 to i and f and P (.) Ct to o. */
static void lstm_step(RnnCell *cell, int64_t xat) {
  int64_t hidden = cell->n->p.rnn.hidden;
  double *a = cell->gates;
  for (int64_t row = 0; row < 4 * hidden; row++)
    a[row] = rnn_input_part(cell, row, xat) + rnn_recurrent_part(cell, row, cell->h);
  for (int64_t j = 0; j < hidden; j++) {
    double c_prev = cell->c[j];
    double i = rnn_act(cell, 0, a[j] + rnn_peephole(cell, 0, j) * c_prev);
    double f = cell->n->p.rnn.input_forget
                   ? 1 - i
                   : rnn_act(cell, 0, a[2 * hidden + j] + rnn_peephole(cell, 2, j) * c_prev);
    double g = rnn_act(cell, 1, a[3 * hidden + j]);
    double c = f * c_prev + i * g;
    double o = rnn_act(cell, 0, a[hidden + j] + rnn_peephole(cell, 1, j) * c);
    cell->c[j] = c;
    cell->h[j] = o * rnn_act(cell, 2, c);
  }
}

/* GRU: gates z r h; Ht = (1 - z) h + z Ht-1, where h reads (r (.) Ht-1)
   R, or with linear_before_reset r (.) (Ht-1 R + Rb). */
static void gru_step(RnnCell *cell, int64_t xat) {
  const Node *n = cell->n;
  const Tensor *bias = node_input(n, 3);
  int64_t hidden = n->p.rnn.hidden;
  double *a = cell->gates, *reset = cell->gates + 3 * hidden;
  for (int64_t row = 0; row < 3 * hidden; row++)
    a[row] = rnn_input_part(cell, row, xat);
  for (int64_t row = 0; row < 2 * hidden; row++)
    a[row] += rnn_recurrent_part(cell, row, cell->h);
  for (int64_t j = 0; j < hidden; j++)
    reset[j] = rnn_act(cell, 0, a[hidden + j]) * (n->p.rnn.linear_before_reset ? 1 : cell->h[j]);
  double *next = reset + hidden;
  for (int64_t j = 0; j < hidden; j++) {
    int64_t row = 2 * hidden + j;
    double z = rnn_act(cell, 0, a[j]), pre = a[row];
    if (n->p.rnn.linear_before_reset) {
      /* a[row] holds Rbh already; r multiplies it with Ht-1 Rh */
      double rb = bias ? getd(bias, cell->b + 3 * hidden + row) : 0;
      pre += reset[j] * (rnn_recurrent_part(cell, row, cell->h) + rb) - rb;
    } else {
      pre += rnn_recurrent_part(cell, row, reset);
    }
    next[j] = (1 - z) * rnn_act(cell, 1, pre) + z * cell->h[j];
  }
  memcpy(cell->h, next, sizeof(double) * (size_t)hidden);
}

/* RNN: Ht = f(Xt W + Ht-1 R + Wb + Rb). */
static void rnn_step(RnnCell *cell, int64_t xat) {
  int64_t hidden = cell->n->p.rnn.hidden;
  double *a = cell->gates;
  for (int64_t row = 0; row < hidden; row++)
    a[row] = rnn_input_part(cell, row, xat) + rnn_recurrent_part(cell, row, cell->h);
  for (int64_t j = 0; j < hidden; j++)
    cell->h[j] = rnn_act(cell, 0, a[j]);
}

/* Runs one direction over batch entry b: from the initial state (zero
   when absent), over its first sequence_lens[b] steps, forwards or
   backwards; Y past the length stays zero, Y_h and Y_c get the state
   after the last step run. */
static void rnn_sequence(RnnCell *cell, int64_t b) {
  const Node *n = cell->n;
  int64_t hidden = n->p.rnn.hidden, len = n->p.rnn.seq, at = rnn_state_at(n, cell->d, b);
  const Tensor *lens = node_input(n, 4), *h0 = node_input(n, 5), *c0 = node_input(n, 6);
  if (lens)
    len = lens->i64[b];
  for (int64_t j = 0; j < hidden; j++) {
    cell->h[j] = h0 ? getd(h0, at + j) : 0;
    cell->c[j] = c0 ? getd(c0, at + j) : 0;
  }
  bool reverse = n->p.rnn.direction == RNN_REVERSE ||
                 (n->p.rnn.direction == RNN_BIDIRECTIONAL && cell->d == 1);
  for (int64_t s = 0; s < len; s++) {
    int64_t t = reverse ? len - 1 - s : s;
    int64_t xat = rnn_x_at(n, t, b);
    if (n->op == OP_LSTM)
      lstm_step(cell, xat);
    else if (n->op == OP_GRU)
      gru_step(cell, xat);
    else
      rnn_step(cell, xat);
    for (int64_t j = 0; n->nout > 0 && n->out[0] && j < hidden; j++)
      putd(n->out[0], rnn_y_at(n, t, cell->d, b) + j, cell->h[j]);
  }
  /* An empty sequence leaves Y_h and Y_c zero, as ONNX Runtime gives
     them (the spec does not say). */
  for (int64_t j = 0; len > 0 && j < hidden; j++) {
    if (n->nout > 1 && n->out[1])
      putd(n->out[1], at + j, cell->h[j]);
    if (n->nout > 2 && n->out[2])
      putd(n->out[2], at + j, cell->c[j]);
  }
}

bool fold_recurrent(Graph *g, Node *n) {
  int64_t dirs = n->p.rnn.ndirections, gates = n->p.rnn.gates, hidden = n->p.rnn.hidden;
  int64_t input = n->p.rnn.input;
  if (!affordable(n->p.rnn.seq * n->p.rnn.batch * dirs, gates * hidden * (input + hidden)))
    return false;
  /* Y past a sequence's length is zero: node_fold's storage starts so */
  double *work = malloc(sizeof(double) * (size_t)(gates * hidden + 4 * hidden + 1));
  RnnCell cell = {.n = n, .gates = work, .h = work + gates * hidden + 2 * hidden};
  cell.c = cell.h + hidden;
  for (int d = 0; d < dirs; d++) {
    cell.d = d;
    cell.w = d * gates * hidden * input;
    cell.r = d * gates * hidden * hidden;
    cell.b = d * 2 * gates * hidden;
    cell.p = d * 3 * hidden;
    for (int64_t b = 0; b < n->p.rnn.batch; b++)
      rnn_sequence(&cell, b);
  }
  free(work);
  return true;
}

/* ------------------------------------------------------ NonMaxSuppression */

/* Whether box j of batch b (the candidate) is suppressed by box k. */
static bool nms_suppresses(const Node *n, int64_t b, int64_t j, int64_t k) {
  const float *boxes = n->in[0]->f32 + b * n->in[0]->dims[1] * 4;
  const float *c = boxes + 4 * j, *s = boxes + 4 * k;
  return opc_nms_suppresses_of(c[0], c[1], c[2], c[3], s[0], s[1], s[2], s[3], n->p.nms.center,
                               n->p.nms.iou_threshold);
}

/* The class's candidate after the one scoring `last` at index `at` (none:
   at < 0), in order of score, the lower index first on ties, or -1. NaN
   scores are never candidates; with a score threshold, only the scores
   above it are. */
static int64_t nms_next(const Node *n, const float *scores, int64_t count, float last, int64_t at) {
  int64_t best = -1;
  for (int64_t j = 0; j < count; j++) {
    float s = scores[j];
    if (s != s || (n->p.nms.has_score_threshold && !(s > n->p.nms.score_threshold)))
      continue;
    if (at >= 0 && !(s < last || (s == last && j > at)))
      continue;
    if (best < 0 || s > scores[best] || (s == scores[best] && j < best))
      best = j;
  }
  return best;
}

/* As ONNX Runtime selects: per batch and class, each candidate in order is
   kept unless a box kept before it suppresses it, up to per_class boxes.
   The kernel (opc_nms) follows the same order. `rows` has room for
   per_class rows per batch and class. */
int64_t nms_select(const Node *n, int64_t *rows) {
  const Tensor *scores = n->in[1];
  int64_t batches = scores->dims[0], classes = scores->dims[1], count = scores->dims[2];
  int64_t total = 0;
  for (int64_t b = 0; b < batches; b++)
    for (int64_t c = 0; c < classes; c++) {
      const float *s = scores->f32 + (b * classes + c) * count;
      int64_t first = total, at = -1;
      while (total - first < n->p.nms.per_class) {
        if ((at = nms_next(n, s, count, at >= 0 ? s[at] : 0.0f, at)) < 0)
          break;
        bool kept = true;
        for (int64_t k = first; k < total && kept; k++)
          kept = !nms_suppresses(n, b, at, rows[3 * k + 2]);
        if (!kept)
          continue;
        rows[3 * total] = b;
        rows[3 * total + 1] = c;
        rows[3 * total + 2] = at;
        total++;
      }
    }
  return total;
}

bool fold_nms(Graph *g, Node *n) {
  (void)g;
  Tensor *y = n->out[0];
  int64_t *rows = malloc(sizeof(int64_t) * 3 * (size_t)(n->p.nms.per_class * n->in[1]->dims[0] *
                                                         n->in[1]->dims[1]) + 1);
  if (!rows)
    return false;
  int64_t count = nms_select(n, rows);
  memcpy(y->i64, rows, sizeof(int64_t) * 3 * (size_t)count);
  free(rows);
  return count == y->dims[0];
}

/* ------------------------------------------------------ the audio front end */

/* DFT, as the kernel computes it (opc_dft): each output value a direct sum
   over the axis in double, the terms scalar.h's. Constants are contiguous:
   x is [outer, n_in, mid, comps], y [outer, outs, mid, ycomps]. */
bool fold_dft(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  if (n->p.dft.axis_at_run_time || !affordable(tensor_numel(y), n->p.dft.used))
    return false;
  int axis = n->p.dft.axis, last = x->rank - 1;
  int mode = !n->p.dft.inverse ? 0 : n->p.dft.onesided ? 2 : 1;
  int64_t comps = x->dims[last], ycomps = y->dims[last], outs = y->dims[axis], mid = 1;
  for (int d = axis + 1; d < last; d++)
    mid *= x->dims[d];
  int64_t step = mid * comps, len = n->p.dft.length;
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    int64_t part = i % ycomps, m = i / ycomps % mid, k = i / (ycomps * mid) % outs;
    int64_t base = i / (ycomps * mid * outs) * x->dims[axis] * step + m * comps;
    double re = 0, im = 0, c, s, step_c, step_s;
    opc_dft_twiddle_of(mode, k, 0, len, &c, &s);
    opc_dft_twiddle_of(mode, k, 1, len, &step_c, &step_s);
    for (int64_t t = 0; t < n->p.dft.used; t++) {
      int64_t at = base + t * step;
      opc_dft_add_of(mode, k, t, len, getd(x, at), comps == 2 ? getd(x, at + 1) : 0, step_c,
                     step_s, &c, &s, &re, &im);
    }
    double v = part ? im : re;
    putd(y, i, mode ? v / (double)len : v);
  }
  return true;
}

/* STFT: frame f of batch b starts at sample f * frame_step; each frame,
   times the window, transformed as DFT's forward mode (opc_stft). */
bool fold_stft(Graph *g, Node *n) {
  const Tensor *x = n->in[0], *w = n->p.dft.has_window ? n->in[2] : NULL;
  Tensor *y = n->out[0];
  int64_t len = n->p.dft.length, comps = x->dims[2], frames = y->dims[1], bins = y->dims[2];
  if (!affordable(tensor_numel(y), len))
    return false;
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    int64_t part = i % 2, k = i / 2 % bins, f = i / (2 * bins) % frames, b = i / (2 * bins * frames);
    int64_t base = (b * x->dims[1] + f * n->p.dft.step) * comps;
    double re = 0, im = 0, c, s, step_c, step_s;
    opc_dft_twiddle_of(0, k, 0, len, &c, &s);
    opc_dft_twiddle_of(0, k, 1, len, &step_c, &step_s);
    for (int64_t t = 0; t < len; t++) {
      double weight = w ? getd(w, t) : 1.0, vr = getd(x, base + t * comps);
      double vi = comps == 2 ? getd(x, base + t * comps + 1) : 0;
      opc_dft_add_of(0, k, t, len, vr * weight, vi * weight, step_c, step_s, &c, &s, &re, &im);
    }
    putd(y, i, part ? im : re);
  }
  return true;
}

/* HannWindow, HammingWindow, BlackmanWindow: scalar.h's cosine window of
   period size (periodic) or size - 1 (symmetric), rounded into the
   output's type. */
bool fold_window(Graph *g, Node *n) {
  Tensor *y = n->out[0];
  double a0 = 0.42, a1 = 0.5, a2 = 0.08; /* Blackman */
  if (n->op == OP_HANN_WINDOW)
    a0 = 0.5, a2 = 0;
  else if (n->op == OP_HAMMING_WINDOW)
    a0 = 25.0 / 46.0, a1 = 21.0 / 46.0, a2 = 0;
  int64_t size = y->dims[0], period = node_attr_int(n, "periodic", 1) ? size : size - 1;
  for (int64_t t = 0; t < size; t++)
    putd(y, t, opc_cosine_window_of(t, period, a0, a1, a2));
  return true;
}

/* MelWeightMatrix: band m a triangle over the DFT bins from edge m to edge
   m + 2, peaking at 1 on edge m + 1 (scalar.h's opc_mel_bin_of; shape
   inference checked that every edge is a bin). A band whose rising side
   is empty is 1 at its peak. */
bool fold_mel_weight_matrix(Graph *g, Node *n) {
  Tensor *y = n->out[0];
  int64_t num = y->dims[1], length = n->in[1]->i64[0], rate = n->in[2]->i64[0];
  float lo = n->in[3]->f32[0], hi = n->in[4]->f32[0];
  for (int64_t i = 0; i < tensor_numel(y); i++)
    putd(y, i, 0);
  for (int64_t m = 0; m < num; m++) {
    int64_t left = opc_mel_bin_of(m, num, length, rate, lo, hi);
    int64_t center = opc_mel_bin_of(m + 1, num, length, rate, lo, hi);
    int64_t right = opc_mel_bin_of(m + 2, num, length, rate, lo, hi);
    if (center == left)
      putd(y, center * num + m, 1);
    for (int64_t j = left; j <= center && center > left; j++)
      putd(y, j * num + m, (double)(j - left) / (double)(center - left));
    for (int64_t j = center; j < right; j++)
      putd(y, j * num + m, (double)(right - j) / (double)(right - center));
  }
  return true;
}
