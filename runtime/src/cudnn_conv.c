/*
 * cudnn_conv.c - convolution forward (plain and fused with bias, residual
 * and activation) and backward data (for ConvTranspose).
 *
 * Forward with a spatial filter, on a CPU with AVX-512 and a packed y, runs
 * as register tiles over a padded copy of the input ("tiles"). Otherwise
 * it is im2col + GEMM, one part per (image, group, block of output
 * channels, block of output positions): the part unfolds its block of input
 * patches into scratch, multiplies by its filters, then writes the block of
 * y through the epilogue (alpha, beta, z, bias, activation) with y's own
 * strides. Blocks are sized to stay in cache, and a 1x1 convolution on a
 * contiguous input skips the unfolding. Depthwise convolutions (one input
 * channel per group) use direct loops instead (dw_*).
 *
 * A convolution may also take over the bias addition and activation queued
 * right after it on its stream (conv_absorb, see AbsorbFn in rt.h), so that
 * y is written once instead of three times.
 *
 * Backward data is GEMM + col2im: one part per (image, group, block of
 * input channels), so no two parts add into the same bytes.
 *
 * Spatial dims are normalised to three (depth, height, width): a 1-D or
 * 2-D convolution has leading spatial dims of size 1.
 *
 * Algorithm choice follows a model of cuDNN's engines (see "engines"):
 * the heuristics list several, each with its math type and workspace, and
 * a call must name one the list has, in a math type it has, with at least
 * its workspace. All of them run the same exact float32 code.
 *
 * HALF and BFLOAT16 tensors have the same engines and workspaces: the call
 * runs the float op over float copies of its operands (conv_half, half.c).
 */
#include <stdlib.h>
#include <string.h>

#include "dnn.h"
#include "vector_math.h"

typedef struct Geom {
  int ns; /* spatial dims as given */
  int n, c, k, groups;
  int in[3], out[3], ksize[3], pad[3], stride[3], dil[3];
  bool flip;           /* CUDNN_CONVOLUTION: the filter is mirrored */
  bool gapped_nhwc;    /* NHWC filter, and x, y or z with room between pixels */
  long long xs[5], ys[5]; /* strides of x and y: n, c, d, h, w */
} Geom;

/* Fills the spatial part of a 3-entry array from an n-entry one. */
static void spatial3(int *to, const long long *from, int n, int fill) {
  for (int i = 0; i < 3; i++)
    to[i] = i < 3 - n ? fill : (int)from[i - (3 - n)];
}

static void spatial3i(int *to, const int *from, int n, int fill) {
  for (int i = 0; i < 3; i++)
    to[i] = i < 3 - n ? fill : from[i - (3 - n)];
}

static void strides5(long long *to, const Tensor *t) {
  int ns = t->rank - 2;
  to[0] = t->strides[0];
  to[1] = t->strides[1];
  for (int i = 0; i < 3; i++)
    to[2 + i] = i < 3 - ns ? 0 : t->strides[2 + i - (3 - ns)];
}

static int out_dim(int in, int pad, int k, int dil, int stride) {
  return (in + 2 * pad - ((k - 1) * dil + 1)) / stride + 1;
}

/*
 * The data types of cuDNN's "supported configurations" of
 * cudnnConvolutionForward (x and w, the descriptor's compute type, y)
 * among those this runtime computes:
 *
 *   FLOAT_CONFIG            FLOAT     FLOAT  FLOAT
 *   PSEUDO_HALF_CONFIG      HALF      FLOAT  HALF
 *   TRUE_HALF_CONFIG        HALF      HALF   HALF
 *   PSEUDO_BFLOAT16_CONFIG  BFLOAT16  FLOAT  BFLOAT16
 *
 * There is no true bfloat16 configuration. x, w and y always share their
 * type in these; every 16-bit one computes in float here (more exact than
 * TRUE_HALF's half arithmetic, which is allowed to be less). Anything else
 * is refused, as cuDNN refuses a combination outside its table:
 * NOT_SUPPORTED_DATA_TYPE.
 */
static cudnnStatus_t conv_types(const Tensor *x, cudnnFilterDescriptor_t w,
                                cudnnConvolutionDescriptor_t conv, const Tensor *y) {
  cudnnDataType_t t = x->type;
  if (w->type != t || (y && y->type != t) || !dnn_float_type(t))
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  bool ok = conv->compute == CUDNN_DATA_FLOAT ||
            (conv->compute == CUDNN_DATA_HALF && t == CUDNN_DATA_HALF);
  return ok ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
}

static bool channels_inner(const Tensor *t) {
  return t->dims[1] == 1 || t->strides[1] == 1;
}

/* Channels-last with nothing between the elements: channels, then the
   spatial dims innermost first, then the images, each stride the product
   of the extents inside it (an extent of 1 may have any stride). */
static bool packed_channels_last(const Tensor *t) {
  long long inside = t->dims[1];
  if (t->dims[1] != 1 && t->strides[1] != 1)
    return false;
  for (int i = t->rank - 1; i >= 2; i--) {
    if (t->dims[i] != 1 && t->strides[i] != inside)
      return false;
    inside *= t->dims[i];
  }
  return t->dims[0] == 1 || t->strides[0] == inside;
}

/*
 * Checks that x (input), w and conv fit together and fills g; y is the
 * output tensor to compare with, or NULL to skip that check.
 */
static cudnnStatus_t make_geom(Geom *g, const Tensor *x, cudnnFilterDescriptor_t w,
                               cudnnConvolutionDescriptor_t conv, const Tensor *y) {
  if (x->rank == 0 || w->rank == 0 || conv->nspatial == 0)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  int ns = conv->nspatial;
  if (x->rank != ns + 2 || w->rank != ns + 2)
    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  cudnnStatus_t st = conv_types(x, w, conv, y);
  if (st)
    return st;
  /* An NHWC filter goes with data whose channels are innermost, as cuDNN's
     NHWC kernels read it; this runtime computes it for 16-bit data only
     (over float copies), which is all opc emits. */
  if (w->format == CUDNN_TENSOR_NHWC &&
      (x->type == CUDNN_DATA_FLOAT || !channels_inner(x) || (y && !channels_inner(y))))
    return CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
  memset(g, 0, sizeof *g);
  g->gapped_nhwc = w->format == CUDNN_TENSOR_NHWC &&
                   (!packed_channels_last(x) || (y && !packed_channels_last(y)));
  g->ns = ns;
  g->n = (int)x->dims[0];
  g->c = (int)x->dims[1];
  g->k = (int)w->dims[0];
  g->groups = conv->groups;
  if (g->c % g->groups || g->k % g->groups || w->dims[1] * g->groups != g->c)
    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  spatial3(g->in, x->dims + 2, ns, 1);
  spatial3(g->ksize, w->dims + 2, ns, 1);
  spatial3i(g->pad, conv->pad, ns, 0);
  spatial3i(g->stride, conv->stride, ns, 1);
  spatial3i(g->dil, conv->dilation, ns, 1);
  g->flip = conv->mode == CUDNN_CONVOLUTION;
  for (int i = 0; i < 3; i++) {
    g->out[i] = out_dim(g->in[i], g->pad[i], g->ksize[i], g->dil[i], g->stride[i]);
    if (g->out[i] <= 0)
      return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  }
  strides5(g->xs, x);
  if (y) {
    if (y->rank != x->rank || y->dims[0] != g->n || y->dims[1] != g->k)
      return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
    for (int i = 0; i < ns; i++)
      if (y->dims[2 + i] != g->out[3 - ns + i])
        return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
    strides5(g->ys, y);
  }
  return CUDNN_STATUS_SUCCESS;
}

static long long out_positions(const Geom *g) {
  return (long long)g->out[0] * g->out[1] * g->out[2];
}

static long long in_positions(const Geom *g) {
  return (long long)g->in[0] * g->in[1] * g->in[2];
}

static int patch_size(const Geom *g) {
  return g->ksize[0] * g->ksize[1] * g->ksize[2];
}

/* ---- engines: what the heuristics list, and what may run ---- */

/*
 * An engine is an algorithm in a math type. The lists model cuDNN on a
 * recent GPU: for float data, tensor-op (TF32) engines first, whatever
 * the descriptor's math type, then FMA ones; Winograd only for 2-D 3x3
 * stride-1 convolutions; fewer for grouped and depthwise ones. A call
 * whose (algorithm, math type) the list lacks is refused: conservatively,
 * an engine exists only in the math types listed.
 */
typedef struct Engine {
  int algo;
  cudnnMathType_t math;
  cudnnDeterminism_t determinism;
} Engine;

#define MAX_ENGINES 8

static bool winograd_fits(const Geom *g) {
  return g->ns == 2 && g->groups == 1 && g->ksize[1] == 3 && g->ksize[2] == 3 &&
         g->stride[1] == 1 && g->stride[2] == 1 && g->dil[1] == 1 && g->dil[2] == 1;
}

static bool is_depthwise(const Geom *g) {
  return g->groups > 1 && g->c == g->groups;
}

static int fwd_engines(const Geom *g, Engine *e) {
  const cudnnMathType_t T = CUDNN_TENSOR_OP_MATH, F = CUDNN_FMA_MATH;
  const cudnnDeterminism_t D = CUDNN_DETERMINISTIC;
  int n = 0;
  /* A channel slice of channels-last data (pixels apart): cuDNN 9.19 on an
     H200 listed every algorithm NOT_SUPPORTED, for inputs and outputs. */
  if (g->gapped_nhwc)
    return 0;
  if (winograd_fits(g))
    e[n++] = (Engine){CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, T, D};
  e[n++] = (Engine){CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, T, D};
  if (!is_depthwise(g))
    e[n++] = (Engine){CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, F, D};
  e[n++] = (Engine){CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, F, D};
  if (g->groups == 1)
    e[n++] = (Engine){CUDNN_CONVOLUTION_FWD_ALGO_GEMM, F, D};
  return n;
}

static int bwd_engines(const Geom *g, Engine *e) {
  const cudnnMathType_t T = CUDNN_TENSOR_OP_MATH, F = CUDNN_FMA_MATH;
  const cudnnDeterminism_t D = CUDNN_DETERMINISTIC;
  int n = 0;
  if (winograd_fits(g))
    e[n++] = (Engine){CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, T, D};
  e[n++] = (Engine){CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, T, D};
  if (!is_depthwise(g))
    e[n++] = (Engine){CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, F, D};
  /* ALGO_0 adds with atomics on a GPU. */
  e[n++] = (Engine){CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, F, CUDNN_NON_DETERMINISTIC};
  return n;
}

static size_t round256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

/* Winograd F(4x4, 3x3): 6x6 transforms of the input and output tiles and
 * of the filters. */
static size_t winograd_bytes(const Geom *g) {
  long long tiles = (long long)((g->out[1] + 3) / 4) * ((g->out[2] + 3) / 4);
  long long floats = 36 * ((long long)g->n * g->c * tiles + (long long)g->k * g->c +
                           (long long)g->n * g->k * tiles);
  return round256((size_t)floats * sizeof(float));
}

/* One image's unfolded patches: the column buffer of GEMM and ALGO_1. */
static size_t column_bytes(const Geom *g) {
  return round256((size_t)(g->c / g->groups) * patch_size(g) * out_positions(g) * sizeof(float));
}

/* One (image, group)'s whole unfolded input, for channel blocks that share
 * it (run_conv), and the most that is shared rather than unfolded per part. */
static size_t column_bytes_whole(const Geom *g) {
  return (size_t)(g->c / g->groups) * patch_size(g) * out_positions(g) * sizeof(float);
}

#define SHARED_COLUMN_MAX ((size_t)16 << 20)

/* The precomputed input offsets of every filter tap of a group. */
static size_t offset_bytes(const Geom *g) {
  return round256((size_t)(g->c / g->groups) * patch_size(g) * 2 * sizeof(int));
}

static size_t fwd_workspace(const Geom *g, int algo) {
  switch (algo) {
  case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return offset_bytes(g);
  case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return column_bytes(g);
  case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return winograd_bytes(g);
  default: return 0;
  }
}

static size_t bwd_workspace(const Geom *g, int algo) {
  switch (algo) {
  case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return column_bytes(g);
  case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return winograd_bytes(g);
  default: return 0;
  }
}

/* Whether a descriptor's math type lets an engine of `engine` math run.
 * The default allows TF32 tensor ops on Ampere and later, and FMA. */
static bool math_admits(cudnnMathType_t desc, cudnnMathType_t engine) {
  if (desc == CUDNN_DEFAULT_MATH)
    return true;
  if (desc == CUDNN_FMA_MATH)
    return engine == CUDNN_FMA_MATH;
  return engine == CUDNN_TENSOR_OP_MATH;
}

/* NOT_SUPPORTED unless the list has an engine for algo that runs under math. */
static cudnnStatus_t engine_status(const Engine *e, int n, int algo, cudnnMathType_t math) {
  for (int i = 0; i < n; i++)
    if (e[i].algo == algo && math_admits(math, e[i].math))
      return CUDNN_STATUS_SUCCESS;
  return CUDNN_STATUS_NOT_SUPPORTED;
}

/* One result of a heuristic query or a search, for either direction. */
typedef struct Perf {
  int algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t math;
} Perf;

/*
 * The results for a problem, at most `requested`: the engines in order,
 * then, as cuDNN reports them, the algorithms with no engine for it,
 * marked NOT_SUPPORTED. A search (`timed`) gives increasing made-up times;
 * the heuristics give none (-1).
 */
static int perf_list(const Geom *g, const Engine *e, int n, int algo_count,
                     size_t (*workspace)(const Geom *, int), bool timed, int requested,
                     Perf *out) {
  int count = 0;
  for (int i = 0; i < n && count < requested; i++)
    out[count++] = (Perf){e[i].algo, CUDNN_STATUS_SUCCESS, timed ? 0.01f * (i + 1) : -1.0f,
                          workspace(g, e[i].algo), e[i].determinism, e[i].math};
  for (int algo = 0; algo < algo_count && count < requested; algo++) {
    bool listed = false;
    for (int i = 0; i < n; i++)
      listed |= e[i].algo == algo;
    if (!listed)
      out[count++] = (Perf){algo, CUDNN_STATUS_NOT_SUPPORTED, -1.0f, 0, CUDNN_DETERMINISTIC,
                            CUDNN_DEFAULT_MATH};
  }
  return count;
}

/* ---- forward ---- */

typedef struct ConvOp {
  Op op;
  Geom g;
  const float *x, *w, *z, *bias;
  float *y;
  float alpha, beta, alpha2;
  long long zs[5];
  long long bias_stride; /* between channels */
  bool fused;            /* ConvolutionBiasActivation: no beta, maybe z and bias */
  Act act;
  int blocks;            /* blocks of output positions per (image, group) */
  int mblocks;           /* blocks of output channels per (image, group) */
  bool depthwise;        /* one input channel per group: direct loops, no GEMM */
  bool direct;           /* 1x1, stride 1, no padding, contiguous input */
  bool shared_col;       /* channel blocks share one unfolded input (see run_conv) */
  bool packed_out;       /* y (and z) are packed within each channel */
  bool tiles;            /* padded planes and register tiles, no im2col (run_tiles) */
  bool chan;             /* channels along the vectors (run_chan) */
  bool chan_dw;          /* the same for a depthwise filter (run_chan_dw) */
  Tensor yt;             /* y's descriptor, to recognise ops on y that can be folded in */
} ConvOp;

_Static_assert(sizeof(ConvOp) <= OP_PLAN_BYTES, "a fused convolution must fit a plan");

/*
 * One filter tap (kd, kh, kw, already mirrored for CUDNN_CONVOLUTION) over
 * output positions [p0, p0 + cols) of channel xc: stores the input values
 * it meets into dst (0 where it meets padding), or with `accumulate` adds
 * weight times them.
 */
static void tap(const Geom *g, const float *xc, long long p0, int cols, int kd, int kh, int kw,
                float *dst, bool accumulate, float weight) {
  int OH = g->out[1], OW = g->out[2];
  int od = (int)(p0 / ((long long)OH * OW)), oh = (int)(p0 / OW % OH), ow = (int)(p0 % OW);
  int woff = kw * g->dil[2] - g->pad[2], sw = g->stride[2];
  long long ws = g->xs[4];
  for (int j = 0; j < cols;) {
    int len = OW - ow < cols - j ? OW - ow : cols - j;
    int id = od * g->stride[0] - g->pad[0] + kd * g->dil[0];
    int ih = oh * g->stride[1] - g->pad[1] + kh * g->dil[1];
    float *out = dst + j;
    if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1]) {
      if (!accumulate)
        memset(out, 0, len * sizeof(float));
    } else {
      /* Positions t in [lo, hi) of this output row read inside the input
       * row; the rest read padding. */
      const float *row = xc + id * g->xs[2] + ih * g->xs[3];
      int base = ow * sw + woff, room = g->in[2] - base;
      int lo = base >= 0 ? 0 : (-base + sw - 1) / sw;
      int hi = room <= 0 ? 0 : (room + sw - 1) / sw;
      lo = lo < len ? lo : len;
      hi = hi < len ? hi : len;
      hi = hi > lo ? hi : lo;
      if (accumulate) {
        if (sw == 1 && ws == 1) {
          const float *in = row + base;
          for (int t = lo; t < hi; t++)
            out[t] += weight * in[t];
        } else {
          for (int t = lo; t < hi; t++)
            out[t] += weight * row[(long long)(base + t * sw) * ws];
        }
      } else {
        memset(out, 0, lo * sizeof(float));
        if (sw == 1 && ws == 1) {
          memcpy(out + lo, row + base + lo, (hi - lo) * sizeof(float));
        } else {
          for (int t = lo; t < hi; t++)
            out[t] = row[(long long)(base + t * sw) * ws];
        }
        memset(out + hi, 0, (len - hi) * sizeof(float));
      }
    }
    j += len;
    ow += len;
    if (ow == OW) {
      ow = 0;
      if (++oh == OH) {
        oh = 0;
        od++;
      }
    }
  }
}

/* Unfolds input patches for output positions [p0, p0 + cols) into col,
 * one row per (channel, kd, kh, kw), each row `cols` long. */
static void im2col(const Geom *g, const float *x, int channels, long long p0, int cols,
                   float *col) {
  int KD = g->ksize[0], KH = g->ksize[1], KW = g->ksize[2];
  for (int c = 0; c < channels; c++)
    for (int kd = 0; kd < KD; kd++)
      for (int kh = 0; kh < KH; kh++)
        for (int kw = 0; kw < KW; kw++, col += cols)
          tap(g, x + c * g->xs[1], p0, cols, g->flip ? KD - 1 - kd : kd,
              g->flip ? KH - 1 - kh : kh, g->flip ? KW - 1 - kw : kw, col, false, 0);
}

/* Offsets within one channel of positions [p0, p0 + cols) for strides s. */
static void position_offsets(const Geom *g, const long long *s, long long p0, int cols,
                             long long *off) {
  int OH = g->out[1], OW = g->out[2];
  int od = (int)(p0 / ((long long)OH * OW)), oh = (int)(p0 / OW % OH), ow = (int)(p0 % OW);
  for (int j = 0; j < cols; j++) {
    off[j] = od * s[2] + oh * s[3] + ow * s[4];
    if (++ow == OW) {
      ow = 0;
      if (++oh == OH) {
        oh = 0;
        od++;
      }
    }
  }
}

/*
 * y = act(alpha v + bias + alpha2 z) over a packed row in one pass, for
 * the clamps (identity, ReLU, clipped ReLU below coef), cuDNN's Swish (of
 * beta coef) and Sigmoid, and the activations of scalar.h's list (past
 * KERNEL_ACT_BASE, parameters coef and offset), which would otherwise be a
 * second pass over the block. `mode` and whether z is NULL are constants
 * where it is inlined, so each combination is its own vectorised loop; the
 * sigmoids' are written in vectors (F16, in dnn.h).
 */
static inline __attribute__((always_inline)) void
epilogue_row(float *y, const float *v, const float *z, int cols, float alpha, float bias,
             float alpha2, int mode, float coef, float offset) {
  int j = 0;
  if (mode == CUDNN_ACTIVATION_SWISH || mode == CUDNN_ACTIVATION_SIGMOID)
    for (; j + 16 <= cols; j += 16) {
      F16 r = alpha * *(const F16 *)(v + j) + bias;
      if (z)
        r += alpha2 * *(const F16 *)(z + j);
      if (mode == CUDNN_ACTIVATION_SWISH)
        r = swish16(r, coef);
      else
        r = sigmoid16(r);
      *(F16 *)(y + j) = r;
    }
  for (; j < cols; j++) {
    float r = alpha * v[j] + bias;
    if (z)
      r += alpha2 * z[j];
    if (mode == CUDNN_ACTIVATION_RELU) {
      r = opc_clipped_relu_of(r, INFINITY);
    } else if (mode == CUDNN_ACTIVATION_CLIPPED_RELU) {
      r = opc_clipped_relu_of(r, coef);
    } else if (mode == CUDNN_ACTIVATION_SWISH) {
      r = opc_swish_of(r, coef);
    } else if (mode == CUDNN_ACTIVATION_SIGMOID) {
      r = opc_sigmoid_of(r);
    } else if (mode >= KERNEL_ACT_BASE) {
      r = opc_activation_of(mode - KERNEL_ACT_BASE, r, coef, offset);
    }
    y[j] = r;
  }
}

static inline __attribute__((always_inline)) void
epilogue_rows(float *y, const float *v, const float *z, int cols, float alpha, float bias,
              float alpha2, int mode, float coef, float offset) {
  if (z)
    epilogue_row(y, v, z, cols, alpha, bias, alpha2, mode, coef, offset);
  else
    epilogue_row(y, v, NULL, cols, alpha, bias, alpha2, mode, coef, offset);
}

/* The clamp the epilogue is (CUDNN_ACTIVATION_IDENTITY, RELU or
 * CLIPPED_RELU), or -1 when it is something else: another activation, or
 * a plain convolution that adds beta y. */
static int clamp_mode(const ConvOp *c) {
  int mode = c->fused ? (int)c->act.mode : c->beta == 0 ? CUDNN_ACTIVATION_IDENTITY : -1;
  bool clamp = mode == CUDNN_ACTIVATION_IDENTITY || mode == CUDNN_ACTIVATION_RELU ||
               mode == CUDNN_ACTIVATION_CLIPPED_RELU;
  return clamp ? mode : -1;
}

/* The epilogue the register tiles apply as they store (tile_activates:
 * see TileStore and ChanStore), or -1 when it is another activation or a
 * plain convolution that adds beta y. */
static int store_mode(const ConvOp *c) {
  int mode = clamp_mode(c);
  if (mode < 0 && c->fused)
    mode = (int)c->act.mode;
  return mode >= 0 && tile_activates(mode) ? mode : -1;
}

/*
 * Writes one channel's block of results v (in place in the scratch row):
 * y = act(alpha v + bias + alpha2 z) for the fused form, else
 * y = alpha v + beta y. Split into simple loops the compiler vectorises,
 * one pass for the activations epilogue_row knows, with a general path
 * for the others and for scattered outputs.
 */
OPC_VECTOR_CLONES static void epilogue(const ConvOp *c, float *v, int cols, float bias, float *y,
                     const long long *yoff, const float *z, const long long *zoff,
                     bool contiguous) {
  float alpha = c->alpha, alpha2 = c->alpha2, beta = c->beta;
  if (!contiguous) {
    for (int j = 0; j < cols; j++) {
      float r = alpha * v[j] + bias;
      if (z)
        r += alpha2 * z[zoff[j]];
      if (c->fused)
        r = act_apply(&c->act, r);
      else if (beta != 0)
        r += beta * y[yoff[j]];
      y[yoff[j]] = r;
    }
    return;
  }
  y += yoff[0];
  if (z)
    z += zoff[0];
  int mode = clamp_mode(c);
  if (mode < 0 && c->fused)
    mode = (int)c->act.mode;
  switch (mode) {
  case CUDNN_ACTIVATION_IDENTITY:
    epilogue_rows(y, v, z, cols, alpha, bias, alpha2, CUDNN_ACTIVATION_IDENTITY, 0, 0);
    return;
  case CUDNN_ACTIVATION_RELU:
    epilogue_rows(y, v, z, cols, alpha, bias, alpha2, CUDNN_ACTIVATION_RELU, 0, 0);
    return;
  case CUDNN_ACTIVATION_CLIPPED_RELU:
    epilogue_rows(y, v, z, cols, alpha, bias, alpha2, CUDNN_ACTIVATION_CLIPPED_RELU,
                  c->act.coef, 0);
    return;
  case CUDNN_ACTIVATION_SWISH:
    epilogue_rows(y, v, z, cols, alpha, bias, alpha2, CUDNN_ACTIVATION_SWISH,
                  c->act.swish_beta, 0);
    return;
  case CUDNN_ACTIVATION_SIGMOID:
    epilogue_rows(y, v, z, cols, alpha, bias, alpha2, CUDNN_ACTIVATION_SIGMOID, 0, 0);
    return;
    /* Each activation of scalar.h's list: a loop of its own. */
#define KERNEL_ACT_EPILOGUE(NAME, name, params)                                              \
  case KERNEL_ACT_##NAME:                                                                    \
    epilogue_rows(y, v, z, cols, alpha, bias, alpha2, KERNEL_ACT_##NAME, c->act.coef,       \
                  c->act.offset);                                                            \
    return;
    OPC_ACTIVATIONS(KERNEL_ACT_EPILOGUE)
#undef KERNEL_ACT_EPILOGUE
  }
  for (int j = 0; j < cols; j++)
    v[j] = alpha * v[j] + bias;
  if (z)
    for (int j = 0; j < cols; j++)
      v[j] += alpha2 * z[j];
  if (c->fused)
    act_row(&c->act, v, y, cols, 1.0f, 0.0f);
  else
    for (int j = 0; j < cols; j++)
      y[j] = v[j] + beta * y[j];
}

/* One run of a convolution: the op, and when its channel blocks share an
 * unfolded input, that column and the (image, group) it holds. */
typedef struct ConvRun {
  const ConvOp *c;
  float *col;
  int n, grp;
} ConvRun;

static const float *group_input(const ConvOp *c, int n, int grp) {
  return c->x + n * c->g.xs[0] + grp * (c->g.c / c->g.groups) * c->g.xs[1];
}

/* Unfolds one slice of the group's input channels into the shared column. */
static void col_part(void *ctx, int part, int nparts) {
  const ConvRun *r = ctx;
  const Geom *g = &r->c->g;
  int cg = g->c / g->groups;
  int c0 = cg * part / nparts, c1 = cg * (part + 1) / nparts;
  long long P = out_positions(g);
  im2col(g, group_input(r->c, r->n, r->grp) + c0 * g->xs[1], c1 - c0, 0, (int)P,
         r->col + (long long)c0 * patch_size(g) * P);
}

static void conv_part(void *ctx, int part, int nparts) {
  (void)nparts;
  const ConvRun *r = ctx;
  const ConvOp *c = r->c;
  const Geom *g = &c->g;
  int blk = part % c->blocks, mblk = part / c->blocks % c->mblocks;
  int grp = part / c->blocks / c->mblocks % g->groups;
  int n = part / c->blocks / c->mblocks / g->groups;
  if (r->col) {
    grp = r->grp;
    n = r->n;
  }
  long long P = out_positions(g);
  long long p0 = P * blk / c->blocks, p1 = P * (blk + 1) / c->blocks;
  int cols = (int)(p1 - p0);
  int cg = g->c / g->groups, kg = g->k / g->groups;
  int m0 = kg * mblk / c->mblocks, m1 = kg * (mblk + 1) / c->mblocks;
  if (cols <= 0 || m1 <= m0)
    return;
  int rows = cg * patch_size(g);
  const float *x = group_input(c, n, grp);
  const float *w = c->w + ((long long)grp * kg + m0) * rows;

  float *out = scratch(1, (size_t)(m1 - m0) * cols * sizeof(float));
  long long *yoff = scratch(2, (size_t)cols * sizeof(long long));
  long long *zoff = scratch(3, (size_t)cols * sizeof(long long));
  if (!out || !yoff || !zoff) {
    rt_fail_async(c->op.api);
    return;
  }
  const float *b;
  int ldb;
  if (c->direct) {
    b = x + p0;
    ldb = (int)g->xs[1];
  } else if (r->col) {
    b = r->col + p0;
    ldb = (int)P;
  } else {
    float *col = scratch(0, (size_t)rows * cols * sizeof(float));
    if (!col) {
      rt_fail_async(c->op.api);
      return;
    }
    im2col(g, x, cg, p0, cols, col);
    b = col;
    ldb = cols;
  }
  if (!blas_sgemm(true, false, false, m1 - m0, cols, rows, 1.0f, w, rows, b, ldb, 0.0f, out,
                  cols)) {
    rt_fail_async(c->op.api);
    return;
  }

  /* Outputs (and z) packed within a channel need no offset table. */
  bool contiguous = c->packed_out;
  if (contiguous) {
    yoff[0] = zoff[0] = p0;
  } else {
    position_offsets(g, g->ys, p0, cols, yoff);
    if (c->z)
      position_offsets(g, c->zs, p0, cols, zoff);
  }
  for (int kk = m0; kk < m1; kk++) {
    int ch = grp * kg + kk;
    float *y = c->y + n * g->ys[0] + ch * g->ys[1];
    const float *z = c->z ? c->z + n * c->zs[0] + ch * c->zs[1] : NULL;
    float bias = c->bias ? c->bias[ch * c->bias_stride] : 0.0f;
    epilogue(c, out + (long long)(kk - m0) * cols, cols, bias, y, yoff, z, zoff, contiguous);
  }
}

/* ---- depthwise: one input channel per group ---- */

/*
 * A group with one input channel gains nothing from a GEMM: each output is
 * a short sum. The channel is first copied into zero-padded planes split by
 * stride phase, which the tiles use too (padded element (r, q) goes to
 * phase (r % sh, q % sw) at row r / sh, column q / sw), so that every
 * filter tap reads plain contiguous rows with no bounds checks: output
 * (oh, ow) reads tap t at src[t][oh * len + ow], whatever the stride. A few
 * output rows at a time are summed over all the taps in vector registers,
 * and stored packed.
 */
typedef struct Planes {
  int rows;  /* padded rows per depth slice */
  int width; /* padded row length actually read */
  int hq;    /* rows per phase plane */
  int len;   /* elements per row of a phase plane */
  long long slice; /* floats per depth slice, all its phases */
} Planes;

static Planes planes_of(const Geom *g) {
  Planes p;
  int sh = g->stride[1], sw = g->stride[2];
  p.rows = (g->out[1] - 1) * sh + (g->ksize[1] - 1) * g->dil[1] + 1;
  p.width = (g->out[2] - 1) * sw + (g->ksize[2] - 1) * g->dil[2] + 1;
  p.hq = (p.rows + sh - 1) / sh;
  p.len = (p.width + sw - 1) / sw;
  p.slice = (long long)sh * sw * p.hq * p.len;
  return p;
}

/* What dw_rows reads and writes past the end of a plane and of a channel. */
#define DW_SLACK 16

static size_t dw_plane_floats(const Geom *g) {
  return (size_t)g->in[0] * planes_of(g).slice + DW_SLACK;
}

/* Room for one output channel. */
static size_t dw_out_floats(const Geom *g) {
  return (size_t)g->out[0] * g->out[1] * g->out[2] + DW_SLACK;
}

/* Eight floats as one value, loaded from and stored to any float's place. */
typedef float Vec8 __attribute__((vector_size(32), aligned(4), may_alias));

/* dst[0..n) = src[0..n), inline. */
static inline __attribute__((always_inline)) void copy_row(float *restrict dst,
                                                           const float *restrict src, int n) {
  int q = 0;
  for (; q + 8 <= n; q += 8)
    *(Vec8 *)(dst + q) = *(const Vec8 *)(src + q);
#pragma GCC unroll 7
  for (int k = 0; k < 7; k++)
    if (q + k < n)
      dst[q + k] = src[q + k];
}

/* Padded row src (NULL in the padding) into its row of each column phase,
 * phase b's at dst + b * phase_floats. `zeroed`: the padding is zero
 * already, so only the input's columns are written. */
static inline __attribute__((always_inline)) void fill_plane_row(const Geom *g, const Planes *p,
                                                            const float *src, float *dst,
                        long long phase_floats, bool zeroed) {
  int sw = g->stride[2], pad = g->pad[2], IW = g->in[2];
  long long ws = g->xs[4];
  /* Padded columns [lo, hi) hold input columns; the rest are zero. */
  int lo = pad < p->width ? pad : p->width;
  int hi = pad + IW < p->width ? pad + IW : p->width;
  if (!zeroed)
    for (int b = 0; b < sw; b++)
      if (!src || sw > 1)
        memset(dst + b * phase_floats, 0, p->len * sizeof(float));
  if (!src)
    return;
  if (sw == 1) {
    if (!zeroed)
      memset(dst, 0, lo * sizeof(float));
    if (ws == 1)
      memcpy(dst + lo, src, (hi - lo) * sizeof(float));
    else
      for (int q = lo; q < hi; q++)
        dst[q] = src[(q - pad) * ws];
    if (!zeroed)
      memset(dst + hi, 0, (p->len - hi) * sizeof(float));
    return;
  }
  if (sw == 2 && ws == 1) {
    split_phases2(dst, dst + phase_floats, src - pad, lo, hi);
    return;
  }
  for (int b = 0; b < sw; b++) {
    int q = lo + ((b - lo % sw) + sw) % sw; /* the first column of this phase */
    float *to = dst + b * phase_floats + q / sw;
    const float *from = src + (q - pad) * ws;
    int count = q < hi ? (hi - q + sw - 1) / sw : 0;
    for (int k = 0; k < count; k++)
      to[k] = from[(long long)k * sw * ws];
  }
}

/* Copies channel xc into buf: zero padding, split by stride phase. Rows
 * of a phase past the padded rows are read only for dropped columns; they
 * are zeroed all the same. Every channel has its input at the same places
 * and zeros at the others, so a buffer that held a channel already
 * (`zeroed`) needs only the input written again: for small planes the
 * padding is most of the work. The rows of a plain stride-1 copy are short
 * there, and copied inline (copy_row, OPC_INLINE_COPIES). */
OPC_INLINE_COPIES OPC_VECTOR_CLONES static void fill_planes(const Geom *g, const float *xc,
                                                            float *buf, bool zeroed) {
  Planes p = planes_of(g);
  int sh = g->stride[1], sw = g->stride[2], IH = g->in[1], pad = g->pad[1];
  long long phase_floats = (long long)p.hq * p.len, hs = g->xs[3];
  if (zeroed && sh == 1 && sw == 1 && g->xs[4] == 1 && g->in[0] == 1) {
    int lo = g->pad[2] < p.width ? g->pad[2] : p.width;
    int hi = g->pad[2] + g->in[2] < p.width ? g->pad[2] + g->in[2] : p.width;
    for (int ih = 0; ih < IH && ih + pad < p.rows; ih++)
      if (ih + pad >= 0)
        copy_row(buf + (long long)(ih + pad) * p.len + lo, xc + ih * hs, hi - lo);
    return;
  }
  for (int id = 0; id < g->in[0]; id++, buf += p.slice) {
    const float *slice = xc + id * g->xs[2];
    for (int a = 0; a < sh; a++) {
      float *dst = buf + (long long)a * sw * phase_floats;
      for (int i = 0, r = a; i < p.hq; i++, r += sh, dst += p.len) {
        int ih = r - pad;
        bool inside = r < p.rows && ih >= 0 && ih < IH;
        if (inside || !zeroed)
          fill_plane_row(g, &p, inside ? slice + ih * hs : NULL, dst, phase_floats, zeroed);
      }
    }
  }
}

#define DW_MAX_TAPS 512

/*
 * Output rows r0 .. r0 + R - 1, columns j0 .. j0 + 8 C - 1, of a channel:
 * out[r OW + j] = sum over taps t of w[t] buf[tap_at[t] + r len + j]. R
 * and C are constants where inlined, so the R C vectors stay in registers
 * over all the taps. On a row narrower than 8 C, the lanes past its end read on
 * into the next row, or into the slack after the planes, and are stored
 * over the start of the next output row, which is written after them, or
 * into out's slack.
 */
static inline __attribute__((always_inline)) void
dw_rows(const float *buf, const long long *tap_at, const float *w, int taps, int len, int OW,
        int r0, int j0, const int R, const int C, float *out) {
  Vec8 a[8][2] = {{{0}}};
  const float *base = buf + (long long)r0 * len + j0;
  for (int t = 0; t < taps; t++) {
    const float *s = base + tap_at[t];
    float wt = w[t];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
      for (int v = 0; v < C; v++)
        a[r][v] += wt * *(const Vec8 *)(s + r * len + 8 * v);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 2
    for (int v = 0; v < C; v++)
      *(Vec8 *)(out + (long long)(r0 + r) * OW + j0 + 8 * v) = a[r][v];
}

/* A plane of at most 8 x 8 outputs in one block of its OH rows: one
 * accumulator per row, so that the sums' chains are as many as the rows
 * (blocks of four rows would leave the FMA units waiting on two chains of
 * four, and compute the overlap twice). */
static inline __attribute__((always_inline)) void
dw_small_plane(const float *buf, const long long *tap_at, const float *w, int taps, int len,
               int OH, int OW, float *out) {
  switch (OH) {
  case 8: dw_rows(buf, tap_at, w, taps, len, OW, 0, 0, 8, 1, out); return;
  case 7: dw_rows(buf, tap_at, w, taps, len, OW, 0, 0, 7, 1, out); return;
  case 6: dw_rows(buf, tap_at, w, taps, len, OW, 0, 0, 6, 1, out); return;
  case 5: dw_rows(buf, tap_at, w, taps, len, OW, 0, 0, 5, 1, out); return;
  case 4: dw_rows(buf, tap_at, w, taps, len, OW, 0, 0, 4, 1, out); return;
  }
  for (int r = 0; r < OH; r++)
    dw_rows(buf, tap_at, w, taps, len, OW, r, 0, 1, 1, out);
}

/* Every row of a channel, in blocks of 8 C columns and of four rows; the
 * last block of each ends at the plane's edge, computing some outputs
 * twice rather than leaving one vector alone in a long chain of sums. */
static inline __attribute__((always_inline)) void
dw_plane_rows(const float *buf, const long long *tap_at, const float *w, int taps, int len,
              int OH, int OW, const int C, float *out) {
  for (int j0 = 0; j0 < OW; j0 += 8 * C) {
    int j = OW > 8 * C && j0 + 8 * C > OW ? OW - 8 * C : j0;
    if (OH < 4) {
      for (int r = 0; r < OH; r++)
        dw_rows(buf, tap_at, w, taps, len, OW, r, j, 1, C, out);
      continue;
    }
    for (int r0 = 0; r0 < OH; r0 += 4)
      dw_rows(buf, tap_at, w, taps, len, OW, r0 + 4 > OH ? OH - 4 : r0, j, 4, C, out);
  }
}

OPC_VECTOR_CLONES static void dw_plane(const float *buf, const long long *tap_at,
                                       const float *w, int taps, int len, int OH, int OW,
                                       float *out) {
  if (OW <= 8 && OH <= 8)
    dw_small_plane(buf, tap_at, w, taps, len, OH, OW, out);
  else if (OW <= 8)
    dw_plane_rows(buf, tap_at, w, taps, len, OH, OW, 1, out);
  else
    dw_plane_rows(buf, tap_at, w, taps, len, OH, OW, 2, out);
}

/* The taps of output depth slice od that meet the input: where each reads
 * in the planes, and its weight's index in a channel's filter. Every
 * channel has the same. */
typedef struct DwTaps {
  int n;
  bool in_order; /* filter[i] is i: the filter's own order */
  long long at[DW_MAX_TAPS];
  int filter[DW_MAX_TAPS];
} DwTaps;

static void dw_taps(const Geom *g, int od, DwTaps *t) {
  Planes p = planes_of(g);
  int KD = g->ksize[0], KH = g->ksize[1], KW = g->ksize[2];
  int sh = g->stride[1], sw = g->stride[2];
  long long phase_floats = (long long)p.hq * p.len;
  t->n = 0;
  for (int kd = 0; kd < KD; kd++) {
    int id = od * g->stride[0] - g->pad[0] + kd * g->dil[0];
    if (id < 0 || id >= g->in[0])
      continue; /* padding in depth adds nothing */
    for (int kh = 0; kh < KH; kh++)
      for (int kw = 0; kw < KW; kw++) {
        int dh = kh * g->dil[1], dw = kw * g->dil[2];
        t->at[t->n] = id * p.slice + ((long long)(dh % sh) * sw + dw % sw) * phase_floats +
                      (long long)(dh / sh) * p.len + dw / sw;
        int fd = g->flip ? KD - 1 - kd : kd, fh = g->flip ? KH - 1 - kh : kh;
        int fw = g->flip ? KW - 1 - kw : kw;
        t->filter[t->n++] = (fd * KH + fh) * KW + fw;
      }
  }
  t->in_order = true;
  for (int i = 0; i < t->n; i++)
    t->in_order = t->in_order && t->filter[i] == i;
}

/* One output channel's plane from the padded input buf, into out (packed;
 * room for dw_out_floats), depth slice by depth slice. `flat`: the taps of
 * a convolution with one output slice, found once for all channels. */
static void dw_channel(const Geom *g, const float *buf, const float *w, const DwTaps *flat,
                       float *out) {
  int OH = g->out[1], OW = g->out[2], len = planes_of(g).len;
  float wt[DW_MAX_TAPS];
  for (int od = 0; od < g->out[0]; od++, out += (long long)OH * OW) {
    DwTaps own;
    const DwTaps *t = flat;
    if (!t) {
      dw_taps(g, od, &own);
      t = &own;
    }
    if (t->n == 0) {
      memset(out, 0, (size_t)OH * OW * sizeof(float));
      continue;
    }
    if (!t->in_order)
      for (int i = 0; i < t->n; i++)
        wt[i] = w[t->filter[i]];
    dw_plane(buf, t->at, t->in_order ? w : wt, t->n, len, OH, OW, out);
  }
}

/*
 * A part of a depthwise convolution: a range of output channels of all
 * images, each computed as a whole plane and written through the epilogue.
 * Consecutive channels of one group share the padded input plane.
 */
static void dw_part(void *ctx, int part, int nparts) {
  const ConvOp *c = ctx;
  const Geom *g = &c->g;
  int kg = g->k / g->groups;
  long long units = (long long)g->n * g->k;
  long long u0 = units * part / nparts, u1 = units * (part + 1) / nparts;
  if (u0 >= u1)
    return;
  long long P = out_positions(g);
  float *buf = scratch(0, dw_plane_floats(g) * sizeof(float));
  float *out = scratch(1, dw_out_floats(g) * sizeof(float));
  long long *yoff = scratch(2, (size_t)P * sizeof(long long));
  long long *zoff = scratch(3, (size_t)P * sizeof(long long));
  if (!buf || !out || !yoff || !zoff) {
    rt_fail_async(c->op.api);
    return;
  }
  memset(buf + dw_plane_floats(g) - DW_SLACK, 0, DW_SLACK * sizeof(float));
  bool contiguous = c->packed_out;
  if (contiguous) {
    yoff[0] = zoff[0] = 0;
  } else {
    position_offsets(g, g->ys, 0, (int)P, yoff);
    if (c->z)
      position_offsets(g, c->zs, 0, (int)P, zoff);
  }
  DwTaps flat;
  if (g->out[0] == 1)
    dw_taps(g, 0, &flat);
  long long filled = -1; /* the (image, group) whose plane is in buf */
  for (long long u = u0; u < u1; u++) {
    int n = (int)(u / g->k), ch = (int)(u % g->k), grp = ch / kg;
    long long plane = (long long)n * g->groups + grp;
    if (plane != filled) {
      fill_planes(g, c->x + n * g->xs[0] + grp * g->xs[1], buf, filled >= 0);
      filled = plane;
    }
    dw_channel(g, buf, c->w + (long long)ch * patch_size(g), g->out[0] == 1 ? &flat : NULL, out);
    float *y = c->y + n * g->ys[0] + ch * g->ys[1];
    const float *z = c->z ? c->z + n * c->zs[0] + ch * c->zs[1] : NULL;
    float bias = c->bias ? c->bias[ch * c->bias_stride] : 0.0f;
    epilogue(c, out, (int)P, bias, y, yoff, z, zoff, contiguous);
  }
}

/* ---- tiles: spatial filters without im2col ---- */

/*
 * im2col writes every input value out once per filter tap, 9 times for a
 * 3x3 filter, and the GEMM then reads it all back. Here each input
 * channel is instead copied once into the depthwise convolutions'
 * zero-padded planes split by stride phase (fill_planes), so that each tap
 * of each input channel is one fixed offset into them. Output (oh, ow) is
 * computed at oh * len + ow: the len - Wout extra positions per output row
 * are computed and dropped, which keeps every tap a plain run. The products
 * are register tiles (conv_tile.c) that read the filters in cuDNN's own
 * layout. 2-D (and 1-D) convolutions with a filter wider than 1x1 only:
 * a 1x1 filter needs no unfolding, and there the GEMM library's packed
 * kernels are faster.
 */

/* One depth slice in and out, and a filter one deep: a 3-D convolution
 * padded in depth has output slices, or taps, that the planes do not
 * hold. */
static bool tiles_fit(const Geom *g) {
  return g->in[0] == 1 && g->out[0] == 1 && g->ksize[0] == 1 && patch_size(g) > 1 &&
         tile_available();
}

typedef struct TileRun {
  const ConvOp *c;
  Planes p;
  float *planes;       /* every input channel of image n */
  const float **rows;  /* per filter row of group 0: its tap's start in planes */
  int cols;            /* positions per tile, TILE_COLS or fewer */
  int n, pparts, mparts;
} TileRun;

/* Copies a slice of image n's input channels into their planes. */
static void planes_part(void *ctx, int part, int nparts) {
  const TileRun *t = ctx;
  const Geom *g = &t->c->g;
  int c0 = g->c * part / nparts, c1 = g->c * (part + 1) / nparts;
  for (int ch = c0; ch < c1; ch++)
    fill_planes(g, t->c->x + t->n * g->xs[0] + ch * g->xs[1], t->planes + ch * t->p.slice,
                false);
}

/* Where each filter row (input channel, kh, kw) of group 0 reads. */
static void tap_rows(const TileRun *t) {
  const Geom *g = &t->c->g;
  const Planes *p = &t->p;
  int KH = g->ksize[1], KW = g->ksize[2];
  for (int ci = 0; ci < g->c / g->groups; ci++)
    for (int kh = 0; kh < KH; kh++)
      for (int kw = 0; kw < KW; kw++) {
        int dh = (g->flip ? KH - 1 - kh : kh) * g->dil[1];
        int dw = (g->flip ? KW - 1 - kw : kw) * g->dil[2];
        long long phase = (long long)(dh % g->stride[1]) * g->stride[2] + dw % g->stride[2];
        t->rows[((long long)ci * KH + kh) * KW + kw] =
            t->planes + ci * p->slice + phase * p->hq * p->len + (long long)(dh / g->stride[1]) * p->len +
            dw / g->stride[2];
      }
}

/* Writes a tile's rows through the epilogue, output row by output row,
 * leaving out the extra positions. */
static void write_tile(const TileRun *t, int ch0, int mrows, long long q0, int ncols,
                       float *tile) {
  const ConvOp *c = t->c;
  const Geom *g = &c->g;
  int wq = t->p.len, ow = g->out[2];
  for (int m = 0; m < mrows; m++) {
    int ch = ch0 + m;
    float *y = c->y + t->n * g->ys[0] + ch * g->ys[1];
    const float *z = c->z ? c->z + t->n * c->zs[0] + ch * c->zs[1] : NULL;
    float bias = c->bias ? c->bias[ch * c->bias_stride] : 0.0f;
    for (long long h = q0 / wq; h * wq < q0 + ncols; h++) {
      long long a = h * wq > q0 ? h * wq : q0;
      long long e = h * wq + ow < q0 + ncols ? h * wq + ow : q0 + ncols;
      if (e <= a)
        continue;
      long long pos = h * ow + (a - h * wq);
      epilogue(c, tile + m * TILE_COLS + (a - q0), (int)(e - a), bias, y, &pos, z, &pos, true);
    }
  }
}

/* Where a tile that applies its epilogue itself stores (see TileStore): the
 * scalars, once per part. */
static void tile_store_init(const TileRun *t, int mode, TileStore *st) {
  const ConvOp *c = t->c;
  st->mode = mode;
  st->alpha = c->alpha;
  st->alpha2 = c->alpha2;
  st->coef = mode == CUDNN_ACTIVATION_SWISH ? c->act.swish_beta : c->act.coef;
  st->wq = t->p.len;
  st->ow = c->g.out[2];
}

/* ... and the planes of channels ch0 to ch0 + mrows - 1. */
static void tile_store_channels(const TileRun *t, int ch0, int mrows, TileStore *st) {
  const ConvOp *c = t->c;
  const Geom *g = &c->g;
  for (int m = 0; m < TILE_ROWS; m++) {
    int ch = ch0 + m;
    bool live = m < mrows;
    st->y[m] = live ? c->y + t->n * g->ys[0] + ch * g->ys[1] : NULL;
    st->z[m] = live && c->z ? c->z + t->n * c->zs[0] + ch * c->zs[1] : NULL;
    st->bias[m] = live && c->bias ? c->bias[ch * c->bias_stride] : 0.0f;
  }
}

/* One part: its range of position blocks and of channel blocks, in every
 * group; channel blocks inner, so that a block's tap rows stay in cache. */
static void tile_part(void *ctx, int part, int nparts) {
  (void)nparts;
  const TileRun *t = ctx;
  const Geom *g = &t->c->g;
  int cg = g->c / g->groups, kg = g->k / g->groups, R = cg * patch_size(g);
  long long P = (long long)g->out[1] * t->p.len;
  long long np = (P + t->cols - 1) / t->cols;
  int nm = (kg + TILE_ROWS - 1) / TILE_ROWS;
  int pi = part % t->pparts, mi = part / t->pparts;
  long long pb0 = np * pi / t->pparts, pb1 = np * (pi + 1) / t->pparts;
  int mb0 = nm * mi / t->mparts, mb1 = nm * (mi + 1) / t->mparts;
  float tile[TILE_ROWS * TILE_COLS] __attribute__((aligned(64)));
  int mode = store_mode(t->c);
  TileStore st;
  if (mode >= 0)
    tile_store_init(t, mode, &st);
  for (int grp = 0; grp < g->groups; grp++)
    for (long long pb = pb0; pb < pb1; pb++) {
      long long q0 = pb * t->cols;
      int ncols = P - q0 < t->cols ? (int)(P - q0) : t->cols;
      for (int mb = mb0; mb < mb1; mb++) {
        int m0 = mb * TILE_ROWS;
        int mrows = kg - m0 < TILE_ROWS ? kg - m0 : TILE_ROWS;
        const float *w[TILE_ROWS];
        for (int m = 0; m < TILE_ROWS; m++)
          w[m] = t->c->w + ((long long)grp * kg + m0 + (m < mrows ? m : mrows - 1)) * R;
        long long p0 = grp * cg * t->p.slice + q0;
        if (mode >= 0) {
          tile_store_channels(t, grp * kg + m0, mrows, &st);
          tile_multiply_store(w, R, t->rows, p0, q0, ncols, &st);
        } else {
          tile_multiply(w, R, t->rows, p0, ncols, tile);
          write_tile(t, grp * kg + m0, mrows, q0, ncols, tile);
        }
      }
    }
}

/* Positions per tile: as many as fit, but evened out over the tiles in
 * whole vectors, so that 63 positions make two tiles of 32, not 48 and 15. */
static int tile_cols(long long P) {
  long long tiles = (P + TILE_COLS - 1) / TILE_COLS;
  long long cols = (P + tiles - 1) / tiles;
  cols = (cols + 15) / 16 * 16;
  return (int)(cols < TILE_COLS ? cols : TILE_COLS);
}

/* Parts along the positions where they are many, else along the channels. */
static void tile_parts(const Geom *g, const Planes *p, int cols, int *pparts, int *mparts) {
  long long P = (long long)g->out[1] * p->len;
  long long np = (P + cols - 1) / cols;
  long long nm = (g->k / g->groups + TILE_ROWS - 1) / TILE_ROWS;
  long long fmas = (long long)g->k * (g->c / g->groups) * patch_size(g) * P;
  long long want = pool_parts(fmas, 1 << 18);
  if (np >= 4 * want) {
    *pparts = (int)want;
    *mparts = 1;
    return;
  }
  *mparts = (int)(nm < want ? nm : want);
  long long more = (want + *mparts - 1) / *mparts;
  *pparts = (int)(np < more ? np : more);
}

static void run_tiles(ConvOp *c) {
  const Geom *g = &c->g;
  TileRun t = {.c = c, .p = planes_of(g)};
  long long R = (long long)(g->c / g->groups) * patch_size(g);
  /* A row of slack: the dropped positions of the last rows read past the
   * last plane. */
  size_t floats = (size_t)g->c * t.p.slice + t.p.len;
  size_t plane_bytes = round256(floats * sizeof(float));
  char *buf = scratch(0, plane_bytes + R * sizeof(float *));
  if (!buf) {
    rt_fail_async(c->op.api);
    return;
  }
  t.planes = (float *)buf;
  t.rows = (const float **)(buf + plane_bytes);
  memset(t.planes + floats - t.p.len, 0, t.p.len * sizeof(float));
  tap_rows(&t);
  t.cols = tile_cols((long long)g->out[1] * t.p.len);
  tile_parts(g, &t.p, t.cols, &t.pparts, &t.mparts);
  int slices = 2 * pool_threads() < g->c ? 2 * pool_threads() : g->c;
  for (t.n = 0; t.n < g->n; t.n++) {
    pool_run(planes_part, &t, slices);
    pool_run(tile_part, &t, t.pparts * t.mparts);
  }
}

/* ---- chan: output channels along the vectors ---- */

/*
 * The tiles' vectors hold positions, which suits long rows; on the small
 * planes of a network's late layers the padded rows and the part-filled
 * vectors waste a quarter of the work or more. There the channels go along
 * the vectors (chan_multiply_store): each tile is up to CHAN_COLS positions
 * of one output row, and a row is split into tiles of even length. The
 * inputs are the tiles' padded planes, or for a plain 1x1 filter the
 * input's own channel planes.
 */

/* 1x1 filters on rows at most this long: longer ones fill the GEMM's
 * vectors well. Spatial filters ran faster than the position tiles at
 * every width measured, 7 to 112 (with padded columns, the tiles waste
 * positions besides). */
#define CHAN_MAX_WIDTH 16

static bool chan_fit(const ConvOp *c) {
  const Geom *g = &c->g;
  if (g->in[0] != 1 || g->out[0] != 1 || g->ksize[0] != 1 || !tile_available() ||
      c->depthwise || !c->packed_out || store_mode(c) < 0)
    return false;
  if (patch_size(g) == 1 && !c->direct && g->stride[1] * g->stride[2] == 1)
    return false; /* a strided input view: the planes would copy it all */
  const char *want = getenv("OPC_CONV");
  if (want && strcmp(want, "chan") == 0)
    return true;
  if (want && (strcmp(want, "gemm") == 0 || strcmp(want, "tiles") == 0))
    return false;
  /* Short filter rows leave too little work per tile to pay for packing
   * the filters and transposing the results. */
  int R = g->c / g->groups * patch_size(g);
  return R >= 128 && (patch_size(g) > 1 || g->out[2] <= CHAN_MAX_WIDTH);
}

typedef struct ChanRun {
  const ConvOp *c;
  const float **rows; /* per filter row of group 0: where it reads, for image n */
  long long group_at; /* floats from one group's reads to the next's */
  int len;            /* floats from one output row's reads to the next's */
  int seg, segs;      /* positions per tile (the last of a row may have fewer), tiles per row */
  int blocks;         /* blocks of 32 output channels per group */
  long long units;    /* (group, block, tile) triples */
  int n;
} ChanRun;

static void store_init(const ConvOp *c, ChanStore *st) {
  st->alpha = c->alpha;
  st->alpha2 = c->alpha2;
  st->mode = store_mode(c);
  st->coef = st->mode == CUDNN_ACTIVATION_SWISH ? c->act.swish_beta : c->act.coef;
}

/* ... and where channels k to k + kvalid - 1 of image n go. */
static void store_channels(const ConvOp *c, int n, int k, int kvalid, ChanStore *st) {
  const Geom *g = &c->g;
  st->y = c->y + n * g->ys[0] + k * g->ys[1];
  st->ys = g->ys[1];
  st->z = c->z ? c->z + n * c->zs[0] + k * c->zs[1] : NULL;
  st->zs = c->zs[1];
  st->kvalid = kvalid;
  for (int m = 0; m < 32; m++)
    st->bias[m] = m < kvalid && c->bias ? c->bias[(k + m) * c->bias_stride] : 0.0f;
}

/* The filter rows output row oh needs: those of the filter rows kh whose
 * input row is not padding. Filter rows run (input channel, kh, kw), so
 * they are one run of kw's per input channel. Large dilations on small
 * planes (atrous convolutions) leave out most of them. */
static void live_rows(const ConvOp *c, int oh, ChanRows *rs) {
  const Geom *g = &c->g;
  int KH = g->ksize[1], KW = g->ksize[2], cg = g->c / g->groups;
  int kh0 = KH, kh1 = 0;
  for (int kh = 0; kh < KH; kh++) {
    int h = oh * g->stride[1] + (g->flip ? KH - 1 - kh : kh) * g->dil[1] - g->pad[1];
    if (h >= 0 && h < g->in[1]) {
      kh0 = kh < kh0 ? kh : kh0;
      kh1 = kh + 1;
    }
  }
  if (kh1 <= kh0)
    kh0 = kh1 = 0;
  *rs = (ChanRows){.runs = cg, .len = (kh1 - kh0) * KW, .stride = KH * KW, .first = kh0 * KW};
  if (kh0 == 0 && kh1 == KH) /* every row: one run */
    *rs = (ChanRows){.runs = 1, .len = cg * KH * KW, .stride = 0, .first = 0};
}

/* One part: a run of (group, block, tile) units, blocks outer, so that each
 * block's filters are packed once per part. */
static void chan_part(void *ctx, int part, int nparts) {
  const ChanRun *t = ctx;
  const ConvOp *c = t->c;
  const Geom *g = &c->g;
  int kg = g->k / g->groups, R = g->c / g->groups * patch_size(g), OW = g->out[2];
  long long tiles = (long long)g->out[1] * t->segs;
  long long u = t->units * part / nparts, u1 = t->units * (part + 1) / nparts;
  float *panel = scratch(1, (size_t)R * 32 * sizeof(float));
  if (!panel) {
    rt_fail_async(c->op.api);
    return;
  }
  ChanStore st;
  store_init(c, &st);
  while (u < u1) {
    int grp = (int)(u / tiles / t->blocks), blk = (int)(u / tiles % t->blocks);
    long long ta = u % tiles, tb = tiles - ta < u1 - u ? tiles : ta + (u1 - u);
    int k0 = blk * 32, kvalid = kg - k0 < 32 ? kg - k0 : 32, nv = kvalid > 16 ? 2 : 1;
    chan_pack(c->w + ((long long)grp * kg + k0) * R, R, kvalid, nv, R, panel);
    store_channels(c, t->n, grp * kg + k0, kvalid, &st);
    for (long long tile = ta; tile < tb; tile++) {
      int oh = (int)(tile / t->segs), ow0 = (int)(tile % t->segs) * t->seg;
      int np = OW - ow0 < t->seg ? OW - ow0 : t->seg;
      ChanRows rs;
      live_rows(c, oh, &rs);
      chan_multiply_store(panel, nv, &rs, t->rows, grp * t->group_at + (long long)oh * t->len + ow0,
                          (long long)oh * OW + ow0, np, &st);
    }
    u += tb - ta;
  }
}

static void run_chan(ConvOp *c) {
  const Geom *g = &c->g;
  int cg = g->c / g->groups, R = cg * patch_size(g);
  ChanRun t = {.c = c};
  int OW = g->out[2];
  t.segs = (OW + CHAN_COLS - 1) / CHAN_COLS;
  t.seg = (OW + t.segs - 1) / t.segs;
  t.segs = (OW + t.seg - 1) / t.seg;
  t.blocks = (g->k / g->groups + 31) / 32;
  t.units = (long long)g->groups * t.blocks * g->out[1] * t.segs;
  long long fmas = (long long)g->k * R * out_positions(g);
  int parts = pool_parts(fmas, 1 << 18);
  if (parts > pool_threads())
    parts = pool_threads(); /* more parts would pack the same filters again */
  if (parts > t.units)
    parts = (int)t.units;
  TileRun planes = {.c = c, .p = planes_of(g)};
  size_t floats = c->direct ? 0 : (size_t)g->c * planes.p.slice + planes.p.len;
  size_t plane_bytes = round256(floats * sizeof(float));
  char *buf = scratch(0, plane_bytes + R * sizeof(float *));
  if (!buf) {
    rt_fail_async(c->op.api);
    return;
  }
  t.rows = (const float **)(buf + plane_bytes);
  if (c->direct) {
    t.len = g->in[2];
    t.group_at = (long long)cg * g->xs[1];
  } else {
    planes.planes = (float *)buf;
    planes.rows = t.rows;
    memset(planes.planes + floats - planes.p.len, 0, planes.p.len * sizeof(float));
    tap_rows(&planes);
    t.len = planes.p.len;
    t.group_at = (long long)cg * planes.p.slice;
  }
  int slices = 2 * pool_threads() < g->c ? 2 * pool_threads() : g->c;
  for (t.n = 0; t.n < g->n; t.n++) {
    if (c->direct)
      for (int r = 0; r < R; r++)
        t.rows[r] = c->x + t.n * g->xs[0] + r * g->xs[1];
    else {
      planes.n = t.n;
      pool_run(planes_part, &planes, slices);
    }
    pool_run(chan_part, &t, parts);
  }
}

/* ---- chan for depthwise filters ---- */

/*
 * A depthwise channel is little work for the position vectors of dw_rows:
 * a 7x7 output fills 7 of 8 lanes, and filling its padded plane costs as
 * much as the sums. Instead 16 channels go along the vectors (chan_dw_store): their input is transposed into one padded plane
 * of 16-float positions, each tap of each output is one aligned load, and
 * the results are transposed back through the epilogue.
 */
#define CHAN_DW_MAX_BYTES (4 << 20)

static bool chan_dw_fit(const ConvOp *c) {
  const Geom *g = &c->g;
  if (g->in[0] != 1 || g->out[0] != 1 || g->ksize[0] != 1 || !tile_available() ||
      !c->depthwise || g->k != g->c || !c->packed_out || store_mode(c) < 0 || g->xs[4] != 1 ||
      g->stride[2] > 2)
    return false;
  const char *want = getenv("OPC_CONV");
  if (want && strcmp(want, "chan") == 0)
    return true;
  if (want && (strcmp(want, "gemm") == 0 || strcmp(want, "tiles") == 0))
    return false;
  /* Faster at every size measured (7x7 to 112x112), but the interleaved
   * plane of a large image would no longer stay in cache. */
  Planes p = planes_of(g);
  return (long long)p.rows * p.width * 16 * sizeof(float) <= CHAN_DW_MAX_BYTES;
}

typedef struct ChanDwRun {
  const ConvOp *c;
  int rows, width;  /* the padded plane's rows and columns that the taps reach */
  long long tap_at[DW_MAX_TAPS];
  int blocks;       /* blocks of 16 channels */
  int bands;        /* bands of output rows per block: more parts than blocks */
  int seg;          /* positions per tile (the last of a row may have fewer) */
} ChanDwRun;

/* Writes the plane's rows [r0, r1) for channels 0 to kvalid - 1 of d->x:
 * the input where it lies, zeros around it. */
static void chan_dw_rows(const ChanDw *d, const Geom *g, int kvalid, int r0, int r1) {
  size_t row_bytes = (size_t)d->width * 16 * sizeof(float);
  int lo = d->pad_w < d->width ? d->pad_w : d->width;
  int hi = d->pad_w + d->in_w < d->width ? d->pad_w + d->in_w : d->width;
  for (int r = r0; r < r1; r++) {
    float *row = d->buf + (long long)r * d->width * 16;
    int h = r - d->pad_h;
    if (h < 0 || h >= g->in[1]) {
      memset(row, 0, row_bytes);
      continue;
    }
    memset(row, 0, (size_t)lo * 16 * sizeof(float));
    memset(row + (long long)hi * 16, 0, (size_t)(d->width - hi) * 16 * sizeof(float));
  }
  int h0 = r0 - d->pad_h > 0 ? r0 - d->pad_h : 0;
  int h1 = r1 - d->pad_h < g->in[1] ? r1 - d->pad_h : g->in[1];
  if (h0 < h1)
    chan_dw_fill(d, kvalid, h0, h1);
}

/* One part: a range of (image, block, band) triples. Each fills the plane
 * rows its band of output rows reads, in a plane of its own. */
static void chan_dw_part(void *ctx, int part, int nparts) {
  const ChanDwRun *t = ctx;
  const ConvOp *c = t->c;
  const Geom *g = &c->g;
  int taps = patch_size(g), OH = g->out[1], OW = g->out[2];
  long long units = (long long)g->n * t->blocks * t->bands;
  long long u0 = units * part / nparts, u1 = units * (part + 1) / nparts;
  float *buf = scratch(0, (size_t)t->rows * t->width * 16 * sizeof(float));
  float *wv = scratch(1, (size_t)taps * 16 * sizeof(float));
  if (!buf || !wv) {
    rt_fail_async(c->op.api);
    return;
  }
  ChanDw d = {.xs_c = g->xs[1], .xs_h = g->xs[3], .in_w = g->in[2], .pad_h = g->pad[1],
              .pad_w = g->pad[2], .rows = t->rows, .width = t->width, .buf = buf, .wv = wv,
              .tap_at = t->tap_at, .taps = taps, .stride_h = g->stride[1],
              .stride_w = g->stride[2], .out_w = OW};
  ChanStore st;
  store_init(c, &st);
  int reach = (g->ksize[1] - 1) * g->dil[1] + 1; /* plane rows one output row reads */
  for (long long u = u0; u < u1; u++) {
    int band = (int)(u % t->bands), blk = (int)(u / t->bands % t->blocks);
    int n = (int)(u / t->bands / t->blocks), c0 = blk * 16;
    int oh0 = OH * band / t->bands, oh1 = OH * (band + 1) / t->bands;
    int kvalid = g->c - c0 < 16 ? g->c - c0 : 16;
    d.x = c->x + n * g->xs[0] + c0 * g->xs[1];
    chan_dw_rows(&d, g, kvalid, oh0 * g->stride[1], (oh1 - 1) * g->stride[1] + reach);
    for (int tap = 0; tap < taps; tap++)
      for (int i = 0; i < 16; i++)
        wv[16 * tap + i] = i < kvalid ? c->w[(long long)(c0 + i) * taps + tap] : 0.0f;
    store_channels(c, n, c0, kvalid, &st);
    for (int oh = oh0; oh < oh1; oh++)
      for (int ow0 = 0; ow0 < OW; ow0 += t->seg) {
        int np = OW - ow0 < t->seg ? OW - ow0 : t->seg;
        chan_dw_store(&d, oh, ow0, np, &st);
      }
  }
}

static void run_chan_dw(ConvOp *c) {
  const Geom *g = &c->g;
  Planes p = planes_of(g); /* its rows and width are those the taps reach */
  ChanDwRun t = {.c = c, .blocks = (g->c + 15) / 16, .rows = p.rows, .width = p.width};
  int KH = g->ksize[1], KW = g->ksize[2];
  for (int kh = 0; kh < KH; kh++)
    for (int kw = 0; kw < KW; kw++) {
      int dh = (g->flip ? KH - 1 - kh : kh) * g->dil[1];
      int dw = (g->flip ? KW - 1 - kw : kw) * g->dil[2];
      t.tap_at[kh * KW + kw] = ((long long)dh * t.width + dw) * 16;
    }
  int OW = g->out[2];
  int segs = (OW + CHAN_DW_COLS - 1) / CHAN_DW_COLS;
  t.seg = (OW + segs - 1) / segs;
  long long blocks = (long long)g->n * t.blocks;
  int parts = pool_parts(blocks * 16 * out_positions(g) * patch_size(g), 1 << 15);
  /* Too few blocks to share out evenly: bands of rows too, each refilling
   * the few plane rows it shares with its neighbours. */
  t.bands = 1;
  if (blocks < 4LL * pool_threads() && parts > blocks) {
    long long want = (parts + blocks - 1) / blocks;
    t.bands = (int)(want < g->out[1] ? want : g->out[1]);
  }
  long long units = blocks * t.bands;
  pool_run(chan_dw_part, &t, parts < units ? parts : (int)units);
}

/*
 * Folds a per-channel bias addition onto y, then an in-place activation of
 * y, into the epilogue (AbsorbFn): y = act(alpha v + bias) in one pass,
 * with the same formulas as the separate ops (the sigmoids' e^x aside:
 * see kernel_activation). Only a plain write of y
 * (beta 0) and an epilogue without an activation yet qualify.
 */
static bool conv_absorb(const Op *cur, const Op *next, void *plan) {
  const ConvOp *c = (const ConvOp *)cur;
  if (!c->fused && c->beta != 0)
    return false;
  if (c->fused && c->act.mode != CUDNN_ACTIVATION_IDENTITY)
    return false;
  const float *bias;
  long long stride;
  Act act;
  ConvEpilogue ep;
  bool is_bias = !c->bias && !c->z && ew_is_channel_bias(next, c->y, &c->yt, &bias, &stride);
  bool is_act = !is_bias && (ew_is_activation_in_place(next, c->y, &c->yt, &act) ||
                             kernel_is_activation_in_place(next, c->y, &c->yt, &act));
  bool is_epilogue = !is_bias && !is_act && !c->bias && !c->z &&
                     kernel_is_conv_epilogue(next, c->y, &c->yt, &ep);
  if (!is_bias && !is_act && !is_epilogue)
    return false;
  ConvOp *f = plan;
  if (cur != plan)
    memcpy(f, c, sizeof *f);
  if (!f->fused) {
    f->fused = true;
    f->act.mode = CUDNN_ACTIVATION_IDENTITY;
  }
  if (is_bias) {
    f->bias = bias;
    f->bias_stride = stride;
  } else if (is_act) {
    f->act = act;
  } else { /* z at y's strides leaves the choice of path (packed_out) as it was */
    f->bias = ep.bias;
    f->bias_stride = ep.bias_stride;
    f->act = ep.act;
    if (ep.z) {
      f->z = ep.z;
      f->alpha2 = 1;
      memcpy(f->zs, f->g.ys, sizeof f->zs);
    }
  }
  return true;
}

static void run_conv(Op *op) {
  ConvOp *c = (ConvOp *)op;
  if (c->chan && store_mode(c) >= 0) { /* an absorbed activation may be one it lacks */
    run_chan(c);
    return;
  }
  if (c->tiles) {
    run_tiles(c);
    return;
  }
  if (c->chan_dw && store_mode(c) >= 0) {
    run_chan_dw(c);
    return;
  }
  if (c->depthwise) {
    long long units = (long long)c->g.n * c->g.k;
    int parts = pool_parts(units * out_positions(&c->g) * patch_size(&c->g), 1 << 15);
    pool_run(dw_part, c, parts < units ? parts : (int)units);
    return;
  }
  if (!c->shared_col) {
    ConvRun r = {c, NULL, 0, 0};
    pool_run(conv_part, &r, c->g.n * c->g.groups * c->mblocks * c->blocks);
    return;
  }
  /* Few positions and many output channels: blocks of channels would each
   * unfold the same input, so it is unfolded once, in parallel, first. The
   * caller's slot 0 holds it; the parts use slots 1-3 only. */
  const Geom *g = &c->g;
  int cg = g->c / g->groups;
  float *col = scratch(0, column_bytes_whole(g));
  if (!col) {
    rt_fail_async(op->api);
    return;
  }
  int slices = 2 * pool_threads() < cg ? 2 * pool_threads() : cg;
  for (int n = 0; n < g->n; n++)
    for (int grp = 0; grp < g->groups; grp++) {
      ConvRun r = {c, col, n, grp};
      pool_run(col_part, &r, slices);
      pool_run(conv_part, &r, c->mblocks);
    }
}

/*
 * Blocks of output positions: each about 1 MiB of scratch, and enough
 * parts overall to keep every thread busy. When the positions are too few
 * to share out well but the output channels are many (the late, small
 * layers), the channels are split instead: every part then packs only its
 * slice of the filters, rather than all of them for a sliver of positions.
 */
static void choose_blocks(const Geom *g, int *blocks_out, int *mblocks_out) {
  long long P = out_positions(g);
  int kg = g->k / g->groups;
  long long rows = (long long)(g->c / g->groups) * patch_size(g) + kg;
  long long cols = (1 << 18) / (rows + 4);
  if (cols < 32)
    cols = 32;
  long long blocks = (P + cols - 1) / cols, mblocks = 1;
  long long images = (long long)g->n * g->groups;
  long long want = 2LL * pool_threads();
  /* Below this many multiply-adds, handing parts to other threads costs
   * more than it saves. */
  long long fmas = images * kg * (rows - kg) * P;
  if (images * blocks < want && fmas >= (1 << 17)) {
    long long more = (want + images - 1) / images;
    if (kg >= P && kg / more >= 16) {
      mblocks = more;
    } else {
      long long most = (P + 15) / 16; /* keep blocks at 16 positions or more */
      blocks = more < most ? more : most;
    }
  }
  if (blocks < 1)
    blocks = 1;
  if (blocks > P)
    blocks = P;
  *blocks_out = (int)blocks;
  *mblocks_out = (int)mblocks;
}

/* Whether the output positions of one channel are contiguous with strides s. */
static bool packed_positions(const Geom *g, const long long *s) {
  return s[4] == 1 && (g->out[1] == 1 || s[3] == g->out[2]) &&
         (g->out[0] == 1 || s[2] == (long long)g->out[1] * g->out[2]);
}

static void span_filter(Op *op, const void *w, cudnnFilterDescriptor_t wd) {
  long long n = 1;
  for (int i = 0; i < wd->rank; i++)
    n *= wd->dims[i];
  op_span(op, w, n * dnn_type_size(wd->type), false);
}

/* The algorithm a call names, and the workspace it gives. */
typedef struct Algo {
  int algo;
  void *ws;
  size_t ws_size;
} Algo;

/* The float op of a convolution that passed its checks: g its geometry,
 * with x's and y's strides. Its spans are the caller's to record. */
static ConvOp *conv_op(const char *api, const Geom *g, float alpha, const void *xp,
                       const void *wp, float beta, float alpha2, const Tensor *z, const void *zp,
                       const Tensor *bias, const void *bp, const Act *act, const Tensor *y,
                       void *yp) {
  ConvOp *c = op_new(sizeof *c, run_conv, api);
  if (!c)
    return NULL;
  c->g = *g;
  c->x = xp;
  c->w = wp;
  c->y = yp;
  c->alpha = alpha;
  c->beta = beta;
  c->alpha2 = alpha2;
  c->fused = act != NULL;
  if (act)
    c->act = *act;
  if (z && zp && alpha2 != 0) {
    c->z = zp;
    strides5(c->zs, z);
  }
  if (bias && bp) {
    c->bias = bp;
    c->bias_stride = bias->strides[1];
  }
  c->op.absorb = conv_absorb;
  c->yt = *y;
  choose_blocks(g, &c->blocks, &c->mblocks);
  c->depthwise = g->c == g->groups && patch_size(g) <= DW_MAX_TAPS;
  c->direct = patch_size(g) == 1 && g->pad[0] + g->pad[1] + g->pad[2] == 0 &&
              g->stride[0] * g->stride[1] * g->stride[2] == 1 && g->xs[4] == 1 &&
              g->xs[3] == g->in[2] && (g->in[0] == 1 || g->xs[2] == (long long)g->in[1] * g->in[2]);
  c->packed_out = packed_positions(g, g->ys) && (!c->z || packed_positions(g, c->zs));
  c->tiles = !c->depthwise && c->packed_out && tiles_fit(g);
  c->chan = chan_fit(c);
  c->chan_dw = chan_dw_fit(c);
  c->shared_col = !c->tiles && !c->direct && !c->depthwise && c->mblocks > 1 &&
                  column_bytes_whole(g) <= SHARED_COLUMN_MAX;
  if (c->shared_col)
    c->blocks = 1;
  return c;
}

/* Points a run's copy of a 16-bit convolution's float op at its operands'
 * float copies, in conv_half's order. */
static void conv_bind(Op *inner, void *const *ptrs) {
  ConvOp *c = (ConvOp *)inner;
  int i = 0;
  c->x = ptrs[i++];
  c->w = ptrs[i++];
  if (c->z)
    c->z = ptrs[i++];
  if (c->bias)
    c->bias = ptrs[i++];
  c->y = ptrs[i];
}

/*
 * A convolution of 16-bit tensors (checked already): the float op over
 * packed float copies of x, w, z, bias and y (y read only when beta
 * blends it in), inside a half_op_new op, which is returned; *inner is
 * the float op, which it owns. The float op's pointers are placeholders
 * until conv_bind. It must not fold a bias or an activation queued after
 * it into its epilogue: those read and write the 16-bit y, which its
 * float copy is not (only the returned op is queued, and it has no absorb
 * function).
 */
static Op *conv_half(const char *api, float alpha, const Tensor *x, const void *xp,
                     cudnnFilterDescriptor_t wd, const void *wp,
                     cudnnConvolutionDescriptor_t conv, float beta, float alpha2,
                     const Tensor *z, const void *zp, const Tensor *bias, const void *bp,
                     const Act *act, const Tensor *y, void *yp, ConvOp **inner) {
  Tensor xf = dnn_float_view(x), yf = dnn_float_view(y), zf, bf;
  struct cudnnFilterStruct wf = *wd;
  struct cudnnConvolutionStruct cf = *conv;
  wf.type = CUDNN_DATA_FLOAT;
  wf.format = CUDNN_TENSOR_NCHW; /* the float copy is packed K, C, R, S */
  cf.compute = CUDNN_DATA_FLOAT;
  Geom g;
  if (make_geom(&g, &xf, &wf, &cf, &yf))
    return NULL; /* cannot happen: the same shapes passed */
  if (z)
    zf = dnn_float_view(z);
  if (bias)
    bf = dnn_float_view(bias);
  ConvOp *c = conv_op(api, &g, alpha, xp, wp, beta, alpha2, z ? &zf : NULL, zp,
                      bias ? &bf : NULL, bp, act, &yf, yp);
  if (!c)
    return NULL;
  c->op.absorb = NULL;
  HalfArg args[5];
  int n = 0;
  args[n++] = dnn_half_arg(xp, x, true, false);
  Tensor wt = {.type = wd->type, .rank = wd->rank};
  memcpy(wt.dims, wd->dims, sizeof wt.dims);
  packed_strides(wt.rank, wt.dims, wt.strides);
  if (wd->format == CUDNN_TENSOR_NHWC) /* K, R, S, C */
    channels_last_strides(wt.rank, wt.dims, wt.strides);
  args[n++] = dnn_half_arg(wp, &wt, true, false);
  if (c->z)
    args[n++] = dnn_half_arg(zp, z, true, false);
  if (c->bias)
    args[n++] = dnn_half_arg(bp, bias, true, false);
  args[n++] = dnn_half_arg(yp, y, !c->fused && beta != 0, true);
  *inner = c;
  return half_op_new(&c->op, sizeof *c, conv_bind, args, n);
}

static cudnnStatus_t conv_forward(cudnnHandle_t handle, const char *api, Algo algo,
                                  float alpha, const Tensor *x, const void *xp,
                                  cudnnFilterDescriptor_t wd, const void *wp,
                                  cudnnConvolutionDescriptor_t conv, float beta, float alpha2,
                                  const Tensor *z, const void *zp, const Tensor *bias,
                                  const void *bp, const Act *act, const Tensor *y, void *yp) {
  Geom g;
  cudnnStatus_t st = make_geom(&g, x, wd, conv, y);
  if (st)
    return st;
  if (wd->format == CUDNN_TENSOR_NHWC && z && !channels_inner(z)) /* z as y */
    return CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
  if (wd->format == CUDNN_TENSOR_NHWC && z && !packed_channels_last(z))
    g.gapped_nhwc = true;
  Engine engines[MAX_ENGINES];
  int n = fwd_engines(&g, engines);
  if ((st = engine_status(engines, n, algo.algo, conv->math)))
    return st;
  size_t need = fwd_workspace(&g, algo.algo);
  if ((st = dnn_workspace_ok(algo.ws, algo.ws_size, need)))
    return st;
  ConvOp *c = NULL;
  Op *op;
  if (x->type == CUDNN_DATA_FLOAT) {
    c = conv_op(api, &g, alpha, xp, wp, beta, alpha2, z, zp, bias, bp, act, y, yp);
    op = c ? &c->op : NULL;
  } else {
    op = conv_half(api, alpha, x, xp, wd, wp, conv, beta, alpha2, z, zp, bias, bp, act, y, yp,
                   &c);
  }
  if (!op)
    return CUDNN_STATUS_ALLOC_FAILED;
  span_tensor(op, xp, x, false);
  span_filter(op, wp, wd);
  if (c->z)
    span_tensor(op, zp, z, false);
  if (c->bias)
    span_tensor(op, bp, bias, false);
  /* The fused form has no beta: y is only written. */
  span_output(op, yp, y, c->fused ? 0 : beta);
  span_workspace(op, algo.ws, need);
  return dnn_submit(handle, op, act ? DNN_CONV_BIAS_ACT : DNN_CONV_FWD);
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                      const cudnnTensorDescriptor_t xDesc, const void *x,
                                      const cudnnFilterDescriptor_t wDesc, const void *w,
                                      const cudnnConvolutionDescriptor_t convDesc,
                                      cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                      size_t workSpaceSizeInBytes, const void *beta,
                                      const cudnnTensorDescriptor_t yDesc, void *y) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !alpha || !beta || !xDesc || !x || !wDesc || !w || !convDesc || !yDesc || !y)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (algo < 0 || algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
    return CUDNN_STATUS_BAD_PARAM;
  Algo a = {algo, workSpace, workSpaceSizeInBytes};
  return conv_forward(handle, "cudnnConvolutionForward", a, *(const float *)alpha, &xDesc->t, x,
                      wDesc, w, convDesc, *(const float *)beta, 0, NULL, NULL, NULL, NULL, NULL,
                      &yDesc->t, y);
}

/*
 * cuDNN fuses only ReLU, and the identity only with IMPLICIT_PRECOMP_GEMM.
 * OPC_RT_REFUSE_FUSED makes it refuse more, as engines that reject a shape
 * do, to test a caller's fallback: "other" every other algorithm, "all"
 * every call.
 */
static bool fused_refused(cudnnActivationMode_t mode, cudnnConvolutionFwdAlgo_t algo) {
  bool precomp = algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  if (mode != CUDNN_ACTIVATION_RELU && !(mode == CUDNN_ACTIVATION_IDENTITY && precomp))
    return true;
  return rt.refuse_fused == REFUSE_ALL || (rt.refuse_fused == REFUSE_OTHER && !precomp);
}

cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void *alpha1, const cudnnTensorDescriptor_t xDesc, const void *x,
    const cudnnFilterDescriptor_t wDesc, const void *w,
    const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo, void *workSpace,
    size_t workSpaceSizeInBytes, const void *alpha2, const cudnnTensorDescriptor_t zDesc,
    const void *z, const cudnnTensorDescriptor_t biasDesc, const void *bias,
    const cudnnActivationDescriptor_t activationDesc, const cudnnTensorDescriptor_t yDesc,
    void *y) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !alpha1 || !alpha2 || !xDesc || !x || !wDesc || !w || !convDesc || !yDesc ||
      !y || !activationDesc || !zDesc || !z || !biasDesc || !bias)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (algo < 0 || algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
    return CUDNN_STATUS_BAD_PARAM;
  if (!activationDesc->set)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  if (fused_refused(activationDesc->mode, algo))
    return CUDNN_STATUS_NOT_SUPPORTED;
  const Tensor *zt = &zDesc->t, *bt = &biasDesc->t, *yt = &yDesc->t;
  if (!same_dims(zt, yt))
    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  /* The bias is one value per output channel: 1 x K x 1 ... */
  if (bt->rank != yt->rank || bt->dims[1] != yt->dims[1] || tensor_count(bt) != yt->dims[1])
    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  /* cuDNN's table of types for this call: z and the bias have y's type
   * (FLOAT, HALF or BFLOAT16; a float bias is for the INT8 configurations
   * only), and the convolution computes in FLOAT, in DOUBLE for DOUBLE
   * data: there is no row with HALF compute, so TRUE_HALF_CONFIG is
   * refused here although cudnnConvolutionForward takes it. */
  if (zt->type != yt->type || bt->type != yt->type || convDesc->compute != CUDNN_DATA_FLOAT)
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  Act act = {.mode = activationDesc->mode, .coef = (float)activationDesc->coef,
             .swish_beta = (float)activationDesc->swish_beta};
  Algo a = {algo, workSpace, workSpaceSizeInBytes};
  return conv_forward(handle, "cudnnConvolutionBiasActivationForward", a,
                      *(const float *)alpha1, &xDesc->t, x, wDesc, w, convDesc, 0,
                      *(const float *)alpha2, zt, z, bt, bias, &act, yt, y);
}

cudnnStatus_t cudnnGetConvolutionNdForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc,
                                                    int nbDims, int out[]) {
  if (!convDesc || !inputTensorDesc || !filterDesc || !out)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  Geom g;
  cudnnStatus_t st = make_geom(&g, &inputTensorDesc->t, filterDesc, convDesc, NULL);
  if (st)
    return st;
  int ns = convDesc->nspatial;
  if (nbDims != ns + 2)
    return CUDNN_STATUS_BAD_PARAM;
  out[0] = g.n;
  out[1] = g.k;
  for (int i = 0; i < ns; i++)
    out[2 + i] = g.out[3 - ns + i];
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc,
                                                    int *n, int *c, int *h, int *w) {
  if (!n || !c || !h || !w)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  int out[4];
  cudnnStatus_t st =
      cudnnGetConvolutionNdForwardOutputDim(convDesc, inputTensorDesc, filterDesc, 4, out);
  if (st)
    return st;
  *n = out[0];
  *c = out[1];
  *h = out[2];
  *w = out[3];
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int *count) {
  if (!handle || !count)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  *count = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  return dnn_enter();
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle, int *count) {
  if (!handle || !count)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  *count = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  return dnn_enter();
}

/* Heuristics (and a search, which runs its kernels: then it is refused
 * where a capture forbids it, and initialises the handle for forward
 * convolutions). */
static cudnnStatus_t fwd_algos(cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
                               const cudnnFilterDescriptor_t w,
                               const cudnnConvolutionDescriptor_t conv,
                               const cudnnTensorDescriptor_t y, int requested, int *returned,
                               cudnnConvolutionFwdAlgoPerf_t *perf, bool search) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !x || !w || !conv || !y || !returned || !perf)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (requested < 1)
    return CUDNN_STATUS_BAD_PARAM;
  Geom g;
  cudnnStatus_t st = make_geom(&g, &x->t, w, conv, &y->t);
  if (st)
    return st;
  if (search) {
    pthread_mutex_lock(&rt.lock);
    bool refused = dnn_capturing_locked(handle) || capture_forbids_unsafe_locked();
    pthread_mutex_unlock(&rt.lock);
    if (refused)
      return CUDNN_STATUS_NOT_SUPPORTED;
    dnn_warm(handle, DNN_CONV_FWD);
  }
  Engine engines[MAX_ENGINES];
  Perf list[MAX_ENGINES + CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int n = fwd_engines(&g, engines);
  if (requested > CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
    requested = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  *returned = perf_list(&g, engines, n, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, fwd_workspace, search,
                        requested, list);
  for (int i = 0; i < *returned; i++)
    perf[i] = (cudnnConvolutionFwdAlgoPerf_t){
      .algo = (cudnnConvolutionFwdAlgo_t)list[i].algo, .status = list[i].status,
      .time = list[i].time, .memory = list[i].memory, .determinism = list[i].determinism,
      .mathType = list[i].math};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t *perfResults) {
  return fwd_algos(handle, srcDesc, filterDesc, convDesc, destDesc, requestedAlgoCount,
                   returnedAlgoCount, perfResults, false);
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnFilterDescriptor_t wDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t yDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t *perfResults) {
  return fwd_algos(handle, xDesc, wDesc, convDesc, yDesc, requestedAlgoCount, returnedAlgoCount,
                   perfResults, true);
}

/* Backward data computes float tensors only: cuDNN takes 16-bit ones too,
 * but opc emits none (its ConvTranspose stays float), so the runtime
 * refuses them rather than compute them untested. */
static cudnnStatus_t bwd_types(const Tensor *dx) {
  return dx->type == CUDNN_DATA_FLOAT ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
}

/* The workspace of algo for a problem, which must have an engine for it
 * in the descriptor's math type. x and y are the convolution's input and
 * output, whichever way the algorithm runs. */
static cudnnStatus_t workspace_size(cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
                                    const cudnnFilterDescriptor_t w,
                                    const cudnnConvolutionDescriptor_t conv,
                                    const cudnnTensorDescriptor_t y, int algo, bool forward,
                                    size_t *size) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !x || !w || !conv || !y || !size)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  int count = forward ? CUDNN_CONVOLUTION_FWD_ALGO_COUNT : CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  if (algo < 0 || algo >= count)
    return CUDNN_STATUS_BAD_PARAM;
  Geom g;
  cudnnStatus_t st = make_geom(&g, &x->t, w, conv, &y->t);
  if (st)
    return st;
  if (!forward && (st = bwd_types(&x->t)))
    return st;
  Engine engines[MAX_ENGINES];
  int n = forward ? fwd_engines(&g, engines) : bwd_engines(&g, engines);
  if ((st = engine_status(engines, n, algo, conv->math)))
    return st;
  *size = forward ? fwd_workspace(&g, algo) : bwd_workspace(&g, algo);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnFilterDescriptor_t wDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t yDesc, cudnnConvolutionFwdAlgo_t algo, size_t *sizeInBytes) {
  return workspace_size(handle, xDesc, wDesc, convDesc, yDesc, algo, true, sizeInBytes);
}

/* ---- backward data ---- */

typedef struct BwdOp {
  Op op;
  Geom g;          /* x = dx (the forward input), y = dy */
  const float *w, *dy;
  float *dx;
  float alpha, beta;
  int blocks;      /* blocks of channels per (image, group) */
  bool dy_packed;  /* dy's positions are contiguous within a channel */
} BwdOp;

/* Adds col rows (channel, kd, kh, kw) x positions into `channels` packed
 * channels of the input. */
static void col2im(const Geom *g, const float *col, int channels, float *dst) {
  int KD = g->ksize[0], KH = g->ksize[1], KW = g->ksize[2];
  int OD = g->out[0], OH = g->out[1], OW = g->out[2];
  int ID = g->in[0], IH = g->in[1], IW = g->in[2];
  long long P = out_positions(g);
  for (int c = 0; c < channels; c++) {
    float *plane = dst + c * in_positions(g);
    for (int kd = 0; kd < KD; kd++)
      for (int kh = 0; kh < KH; kh++)
        for (int kw = 0; kw < KW; kw++, col += P) {
          int ed = g->flip ? KD - 1 - kd : kd, eh = g->flip ? KH - 1 - kh : kh;
          int ew = g->flip ? KW - 1 - kw : kw;
          const float *src = col;
          for (int od = 0; od < OD; od++) {
            int id = od * g->stride[0] - g->pad[0] + ed * g->dil[0];
            for (int oh = 0; oh < OH; oh++, src += OW) {
              int ih = oh * g->stride[1] - g->pad[1] + eh * g->dil[1];
              if (id < 0 || id >= ID || ih < 0 || ih >= IH)
                continue;
              float *row = plane + ((long long)id * IH + ih) * IW;
              for (int ow = 0; ow < OW; ow++) {
                int iw = ow * g->stride[2] - g->pad[2] + ew * g->dil[2];
                if (iw >= 0 && iw < IW)
                  row[iw] += src[ow];
              }
            }
          }
        }
  }
}

static void bwd_part(void *ctx, int part, int nparts) {
  (void)nparts;
  const BwdOp *b = ctx;
  const Geom *g = &b->g;
  int blk = part % b->blocks, grp = part / b->blocks % g->groups;
  int n = part / b->blocks / g->groups;
  int cg = g->c / g->groups, kg = g->k / g->groups, kk = patch_size(g);
  int c0 = cg * blk / b->blocks, c1 = cg * (blk + 1) / b->blocks;
  if (c1 <= c0)
    return;
  long long P = out_positions(g), IP = in_positions(g);

  /* dY of this image and group, as a row-major kg x P matrix. */
  const float *dy = b->dy + n * g->ys[0] + (long long)grp * kg * g->ys[1];
  int lddy = (int)g->ys[1];
  if (!b->dy_packed) {
    float *packed = scratch(2, (size_t)kg * P * sizeof(float));
    long long *off = scratch(3, (size_t)P * sizeof(long long));
    if (!packed || !off) {
      rt_fail_async(b->op.api);
      return;
    }
    position_offsets(g, g->ys, 0, (int)P, off);
    for (int k = 0; k < kg; k++)
      for (long long p = 0; p < P; p++)
        packed[k * P + p] = dy[k * g->ys[1] + off[p]];
    dy = packed;
    lddy = (int)P;
  }
  int rows = (c1 - c0) * kk;
  float *col = scratch(0, (size_t)rows * P * sizeof(float));
  float *acc = scratch(1, (size_t)(c1 - c0) * IP * sizeof(float));
  if (!col || !acc) {
    rt_fail_async(b->op.api);
    return;
  }
  /* col = W_g^T (rows of channels c0..c1) x dY */
  const float *w = b->w + (long long)grp * kg * cg * kk + (long long)c0 * kk;
  if (!blas_sgemm(true, true, false, rows, (int)P, kg, 1.0f, w, cg * kk, dy, lddy, 0.0f, col,
                  (int)P)) {
    rt_fail_async(b->op.api);
    return;
  }
  memset(acc, 0, (size_t)(c1 - c0) * IP * sizeof(float));
  col2im(g, col, c1 - c0, acc);

  int ID = g->in[0], IH = g->in[1], IW = g->in[2];
  for (int c = c0; c < c1; c++) {
    float *dx = b->dx + n * g->xs[0] + (long long)(grp * cg + c) * g->xs[1];
    const float *src = acc + (c - c0) * IP;
    for (int id = 0; id < ID; id++)
      for (int ih = 0; ih < IH; ih++)
        for (int iw = 0; iw < IW; iw++) {
          float *d = dx + id * g->xs[2] + ih * g->xs[3] + iw * g->xs[4];
          float v = b->alpha * *src++;
          *d = b->beta != 0 ? v + b->beta * *d : v;
        }
  }
}

static void run_bwd(Op *op) {
  BwdOp *b = (BwdOp *)op;
  pool_run(bwd_part, b, b->g.n * b->g.groups * b->blocks);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void *w,
                                           const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                           size_t workSpaceSizeInBytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxDesc, void *dx) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !alpha || !beta || !wDesc || !w || !dyDesc || !dy || !convDesc || !dxDesc || !dx)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (algo < 0 || algo >= CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT)
    return CUDNN_STATUS_BAD_PARAM;
  Geom g;
  cudnnStatus_t st = make_geom(&g, &dxDesc->t, wDesc, convDesc, &dyDesc->t);
  if (st || (st = bwd_types(&dxDesc->t)))
    return st;
  Engine engines[MAX_ENGINES];
  int n = bwd_engines(&g, engines);
  if ((st = engine_status(engines, n, algo, convDesc->math)))
    return st;
  size_t need = bwd_workspace(&g, algo);
  if ((st = dnn_workspace_ok(workSpace, workSpaceSizeInBytes, need)))
    return st;
  BwdOp *b = op_new(sizeof *b, run_bwd, "cudnnConvolutionBackwardData");
  if (!b)
    return CUDNN_STATUS_ALLOC_FAILED;
  b->g = g;
  b->w = w;
  b->dy = dy;
  b->dx = dx;
  b->alpha = *(const float *)alpha;
  b->beta = *(const float *)beta;
  b->dy_packed = g.ys[4] == 1 && g.ys[3] == g.out[2] &&
                 (g.out[0] == 1 || g.ys[2] == (long long)g.out[1] * g.out[2]);
  /* Channel blocks of about 4 MiB of columns, and enough parts to share. */
  int cg = g.c / g.groups;
  long long per_channel = (long long)patch_size(&g) * out_positions(&g) + in_positions(&g);
  long long fit = (1 << 20) / (per_channel ? per_channel : 1);
  int blocks = (int)((cg + (fit > 0 ? fit : 1) - 1) / (fit > 0 ? fit : 1));
  long long want = 2LL * pool_threads(), images = (long long)g.n * g.groups;
  if (images * blocks < want)
    blocks = (int)((want + images - 1) / images);
  if (blocks > cg)
    blocks = cg;
  b->blocks = blocks < 1 ? 1 : blocks;
  span_tensor(&b->op, dy, &dyDesc->t, false);
  span_filter(&b->op, w, wDesc);
  span_output(&b->op, dx, &dxDesc->t, b->beta);
  span_workspace(&b->op, workSpace, need);
  return dnn_submit(handle, &b->op, DNN_CONV_BWD_DATA);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t *perf) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !filterDesc || !diffDesc || !convDesc || !gradDesc || !returnedAlgoCount ||
      !perf)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (requestedAlgoCount < 1)
    return CUDNN_STATUS_BAD_PARAM;
  Geom g;
  cudnnStatus_t st = make_geom(&g, &gradDesc->t, filterDesc, convDesc, &diffDesc->t);
  if (st || (st = bwd_types(&gradDesc->t)))
    return st;
  Engine engines[MAX_ENGINES];
  Perf list[MAX_ENGINES + CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int n = bwd_engines(&g, engines), requested = requestedAlgoCount;
  if (requested > CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT)
    requested = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  *returnedAlgoCount = perf_list(&g, engines, n, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                 bwd_workspace, false, requested, list);
  for (int i = 0; i < *returnedAlgoCount; i++)
    perf[i] = (cudnnConvolutionBwdDataAlgoPerf_t){
      .algo = (cudnnConvolutionBwdDataAlgo_t)list[i].algo, .status = list[i].status,
      .time = list[i].time, .memory = list[i].memory, .determinism = list[i].determinism,
      .mathType = list[i].math};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t dxDesc, cudnnConvolutionBwdDataAlgo_t algo,
    size_t *sizeInBytes) {
  return workspace_size(handle, dxDesc, wDesc, convDesc, dyDesc, algo, false, sizeInBytes);
}
