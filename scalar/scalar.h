/*
 * scalar.h - one scalar formula per elementwise operator, in float.
 *
 * The one text of each formula, for its three readers:
 *   - the compile-time evaluator (ir/fold.c, ir/fold_nn.c) includes it;
 *   - the kernels (runtime/kernels/opc_kernels.inc) name it with
 *     `#include "scalar.h"`, which kernel_types.py replaces by the formulas
 *     below, so that NVRTC (no files to include) and net.c (only the blocks
 *     a program uses) see them as helpers like the kernels' own;
 *   - the CPU runtime's epilogues (runtime/src/dnn.h) include it.
 * It is a leaf: it includes only <math.h> (which the kernels, taking the
 * formulas alone, never see), and the compiler and the runtime may both
 * include it without knowing each other.
 *
 * So each formula is plain C that is also CUDA C++: float in, float out,
 * only maths functions that both libm and CUDA have, and the qualifier
 * OPC_SCALAR, which the includer may set (prelude_cuda.h makes it
 * __device__). e^x is OPC_SCALAR_EXP: expf unless the includer chooses
 * another (the runtime's epilogues take exp_inline, which vectorises).
 *
 * Hand-vectorised versions (runtime/src/conv_tile.c, dnn.h's sigmoid16)
 * are tested against these (runtime/tests/test_formulas.c).
 */
#ifndef OPC_SCALAR_H
#define OPC_SCALAR_H

#include <math.h>

#ifndef OPC_SCALAR
#define OPC_SCALAR static inline
#endif
#ifndef OPC_SCALAR_EXP
#define OPC_SCALAR_EXP expf
#endif

/*
 * The activations a program may fold into the operator before them, one
 * row each: X(NAME, name, params). NAME gives the code OPC_ACT_NAME, name
 * the formula opc_<name>_of(x, p0 ... p[params-1]) and the float32 kernel
 * opc_<name> that applies it alone, params the number of float parameters
 * (the kernel's f[0], f[1]). Adding an activation is a row and a formula.
 */
#define OPC_ACTIVATIONS(X)        \
  X(RELU, relu, 0)                \
  X(CLIP, clip, 2)                \
  X(SIGMOID, sigmoid, 0)          \
  X(TANH, tanh, 0)                \
  X(ELU, elu, 1)                  \
  X(LEAKY_RELU, leaky_relu, 1)    \
  X(SILU, silu, 0)                \
  X(SWISH, swish, 1)              \
  X(HARD_SIGMOID, hard_sigmoid, 2) \
  X(HARD_SWISH, hard_swish, 0)    \
  X(MISH, mish, 0)

/* The activation codes; 0 is none. */
enum {
  OPC_ACT_NONE,
#define OPC_ACT_CODE(NAME, name, params) OPC_ACT_##NAME,
  OPC_ACTIVATIONS(OPC_ACT_CODE)
#undef OPC_ACT_CODE
  OPC_ACT_COUNT
};

/* Det's largest matrix side: opc_det_of eliminates in a local array of
   OPC_DET_MAX^2 doubles (written there as 1024, since the kernels see
   the formulas alone). */
enum { OPC_DET_MAX = 32 };

/* The activation functions LSTM, GRU and RNN name in their `activations`
   attribute, in the order of the ONNX specification's list: the codes
   opc_rnn_activation_of takes, numbered as its cases are. */
enum {
  OPC_RNN_RELU = 0, OPC_RNN_TANH = 1, OPC_RNN_SIGMOID = 2, OPC_RNN_AFFINE = 3,
  OPC_RNN_LEAKY_RELU = 4, OPC_RNN_THRESHOLDED_RELU = 5, OPC_RNN_SCALED_TANH = 6,
  OPC_RNN_HARD_SIGMOID = 7, OPC_RNN_ELU = 8, OPC_RNN_SOFTSIGN = 9, OPC_RNN_SOFTPLUS = 10,
  OPC_RNN_COUNT
};

/* ---------------------------------------------------------- formulas */

/* ONNX's Relu: NaN and -0 pass. */
OPC_SCALAR float opc_relu_of(float x)
{
  return x < 0.0f ? 0.0f : x;
}

/* cuDNN's clipped ReLU, and its ReLU with an infinite ceiling: NaN and -0
   become 0. */
OPC_SCALAR float opc_clipped_relu_of(float x, float ceiling)
{
  return x > 0.0f ? (x < ceiling ? x : ceiling) : 0.0f;
}

/* NaN passes, as in ONNX. */
OPC_SCALAR float opc_clip_of(float x, float lo, float hi)
{
  return x < lo ? lo : (x > hi ? hi : x);
}

OPC_SCALAR float opc_leaky_relu_of(float x, float alpha)
{
  return x < 0.0f ? alpha * x : x;
}

OPC_SCALAR float opc_elu_of(float x, float alpha)
{
  return x < 0.0f ? alpha * expm1f(x) : x;
}

OPC_SCALAR float opc_selu_of(float x, float alpha, float gamma)
{
  return gamma * (x <= 0.0f ? alpha * expm1f(x) : x);
}

OPC_SCALAR float opc_celu_of(float x, float alpha)
{
  return x < 0.0f ? alpha * expm1f(x / alpha) : x;
}

OPC_SCALAR float opc_sigmoid_of(float x)
{
  return 1.0f / (1.0f + OPC_SCALAR_EXP(-x));
}

OPC_SCALAR float opc_tanh_of(float x)
{
  return tanhf(x);
}

/* x sigmoid(alpha x), as one division. */
OPC_SCALAR float opc_swish_of(float x, float alpha)
{
  return x / (1.0f + OPC_SCALAR_EXP(-alpha * x));
}

/* Swish with alpha 1 (-1 * x is exactly -x). */
OPC_SCALAR float opc_silu_of(float x)
{
  return opc_swish_of(x, 1.0f);
}

/* max(0, min(1, alpha x + beta)); NaN passes. */
OPC_SCALAR float opc_hard_sigmoid_of(float x, float alpha, float beta)
{
  float r = alpha * x + beta;
  return r < 0.0f ? 0.0f : (r > 1.0f ? 1.0f : r);
}

/* x max(0, min(1, x alpha + 1/2)), alpha the float nearest 1/6, as ONNX
   defines it (a product, not a division). */
OPC_SCALAR float opc_hard_swish_of(float x)
{
  float r = x * (1.0f / 6.0f) + 0.5f;
  r = r < 0.0f ? 0.0f : (r > 1.0f ? 1.0f : r);
  return x * r;
}

/* x tanh(softplus(x)), softplus being x itself above 20, where it is x to
   float precision and e^x heads for overflow. Both sides are computed, so
   that a loop of it has no branch around the calls and vectorises. */
OPC_SCALAR float opc_mish_of(float x)
{
  float softplus = log1pf(OPC_SCALAR_EXP(x));
  return x * tanhf(x > 20.0f ? x : softplus);
}

/* log(1 + e^x), written so that large |x| neither overflows nor cancels. */
OPC_SCALAR float opc_softplus_of(float x)
{
  return (x > 0.0f ? x : 0.0f) + log1pf(OPC_SCALAR_EXP(-fabsf(x)));
}

OPC_SCALAR float opc_softsign_of(float x)
{
  return x / (1.0f + fabsf(x));
}

/* x where x > alpha, else 0. */
OPC_SCALAR float opc_thresholded_relu_of(float x, float alpha)
{
  return x > alpha ? x : 0.0f;
}

/* QuantizeLinear's value: x / scale rounded half to even (rintf in the
   default rounding mode), plus the zero point, saturated to [lo, hi].
   NaN goes to lo and infinities saturate, as in ONNX Runtime. */
OPC_SCALAR float opc_quantize_of(float x, float scale, float zero, float lo, float hi)
{
  float q = rintf(x / scale) + zero;
  return q >= lo ? (q <= hi ? q : hi) : lo;
}

/* DequantizeLinear of an 8-bit value, (q - zero) * scale rounded to
   float32 once, as opc_dequantize_linear gives it. Taken through double,
   where the product of a 9-bit integer and a float32 is exact, so that a
   sum of two of these rounds each product first even where the compiler
   contracts float multiplies and adds into FMAs: QuantizedAdd computes
   exactly what the separate DQ, Add and Q nodes compute. */
OPC_SCALAR float opc_dequantize8_of(int q_minus_zero, float scale)
{
  return (float)((double)q_minus_zero * (double)scale);
}

/* QLinearMatMul's and QLinearConv's requantisation multiplier, formed
   in float32 as ONNX Runtime forms it: (a_scale * b_scale) / y_scale, the
   product rounded before the division (tested against it on ties and
   many scales: the other orders differ from it). */
OPC_SCALAR float opc_requant_scale_of(float a_scale, float b_scale, float y_scale)
{
  float product = a_scale * b_scale;
  return product / y_scale;
}

/* An int32 sum requantised: float(sum) * multiplier in float32, rounded
   half to even, plus the zero point, saturated to [lo, hi]. */
OPC_SCALAR float opc_requantize_of(int sum, float multiplier, float zero, float lo, float hi)
{
  float q = rintf((float)sum * multiplier) + zero;
  return q >= lo ? (q <= hi ? q : hi) : lo;
}

/* DynamicQuantizeLinear's uint8 scale over a range [lo, hi] that holds 0
   (lo = min(0, min x), hi = max(0, max x)): 1 for an empty range, as in
   ONNX Runtime, which would otherwise divide by 0. */
OPC_SCALAR float opc_dynamic_scale_of(float lo, float hi)
{
  return hi == lo ? 1.0f : (hi - lo) / 255.0f;
}

/* Its zero point: -lo / scale saturated to [0, 255], then rounded half
   to even. */
OPC_SCALAR float opc_dynamic_zero_of(float lo, float scale)
{
  float z = 0.0f - lo / scale;
  return rintf(z < 0.0f ? 0.0f : (z > 255.0f ? 255.0f : z));
}

/* Values within [-lambd, lambd] go to 0, the others move towards 0 by bias. */
OPC_SCALAR float opc_shrink_of(float x, float lambd, float bias)
{
  return x < -lambd ? x + bias : (x > lambd ? x - bias : 0.0f);
}

/* x/2 (1 + erf(x / sqrt(2))). */
OPC_SCALAR float opc_gelu_of(float x)
{
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

/* Gelu's tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
OPC_SCALAR float opc_gelu_tanh_of(float x)
{
  float t = tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x));
  return 0.5f * x * (1.0f + t);
}

/* Recurrent activation `code` (OPC_RNN_*, whose numbers the cases are:
   the kernels see the formulas only) with its alpha and beta, which only
   Affine (alpha x + beta), ScaledTanh (alpha tanh(beta x)) and the
   parametrised ONNX operators read. */
OPC_SCALAR float opc_rnn_activation_of(int code, float x, float alpha, float beta)
{
  switch (code) {
  case 0: return opc_relu_of(x);
  case 1: return opc_tanh_of(x);
  case 2: return opc_sigmoid_of(x);
  case 3: return alpha * x + beta; /* Affine */
  case 4: return opc_leaky_relu_of(x, alpha);
  case 5: return opc_thresholded_relu_of(x, alpha);
  case 6: return alpha * opc_tanh_of(beta * x); /* ScaledTanh */
  case 7: return opc_hard_sigmoid_of(x, alpha, beta);
  case 8: return opc_elu_of(x, alpha);
  case 9: return opc_softsign_of(x);
  case 10: return opc_softplus_of(x);
  }
  return x;
}

/* GridSample (opset 16, 20) and AffineGrid, after the ONNX reference, in
   double. A spatial axis of `size` elements spans [-1, 1] of the grid:
   with align_corners the centres of its end elements, else their outer
   edges. Modes: 0 linear, 1 nearest, 2 cubic; padding: 0 zeros, 1
   border, 2 reflection. */

/* x folded back into [lo, hi] by reflections at its ends; lo for an empty
   range (one element with align_corners), where the reference divides by
   zero. */
OPC_SCALAR double opc_grid_reflect_of(double x, double lo, double hi)
{
  double range = hi - lo;
  if (!(range > 0.0))
    return lo;
  if (x >= lo && x <= hi)
    return x;
  double past = x < lo ? lo - x : x - hi;
  double k = floor(past / range), r = past - k * range;
  int odd = fmod(k, 2.0) != 0.0;
  return (x < lo) != odd ? lo + r : hi - r;
}

/* The grid value g as a coordinate along an axis of `size`: rounded half
   to even for nearest, then, outside the axis's span, clamped (border) or
   reflected (reflection); NaN stays NaN. Cubic with border clamps only its
   taps, not the coordinate, as ONNX Runtime (and PyTorch) do; the ONNX
   reference clamps both, and differs from them there. */
OPC_SCALAR double opc_grid_coord_of(float g, long long size, int mode, int padding, int align)
{
  double n = (double)size, x;
  x = align ? ((double)g + 1.0) / 2.0 * (n - 1.0) : (((double)g + 1.0) * n - 1.0) / 2.0;
  if (mode == 1)
    x = rint(x);
  double lo = align ? 0.0 : -0.5, hi = align ? n - 1.0 : n - 0.5;
  if (x < lo || x > hi) {
    if (padding == 1 && mode != 2)
      x = x < 0.0 ? 0.0 : (x > n - 1.0 ? n - 1.0 : x);
    else if (padding == 2)
      x = opc_grid_reflect_of(x, lo, hi);
  }
  return x;
}

/* The element that tap i of an axis of `size` reads: i itself inside the
   axis, else -1 (zeros: the tap reads 0), the nearest end (border) or its
   reflection (reflection). */
OPC_SCALAR long long opc_grid_tap_of(long long i, long long size, int padding, int align)
{
  if (i >= 0 && i < size)
    return i;
  if (padding == 0)
    return -1;
  if (padding == 1)
    return i < 0 ? 0 : size - 1;
  double n = (double)size;
  long long r = (long long)opc_grid_reflect_of((double)i, align ? 0.0 : -0.5, align ? n - 1.0 : n - 0.5);
  return r < 0 ? 0 : (r >= size ? size - 1 : r);
}

/* Cubic convolution weight of tap k (0..3, at floor(x) - 1 + k) for x's
   fraction t, with the reference's a = -0.75. */
OPC_SCALAR double opc_grid_cubic_of(double t, int k)
{
  double a = -0.75, d = k == 0 ? t + 1.0 : (k == 1 ? t : (k == 2 ? 1.0 - t : 2.0 - t));
  if (k == 1 || k == 2)
    return ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0;
  return ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a;
}

/* One output of GridSample: the plane x of `rank` (2 or 3) spatial axes,
   size[d] elements apart by stride[d], sampled at the grid point g, whose
   components (x, y[, z]: the last axis first) lie gstride apart. */
OPC_SCALAR float opc_grid_sample_of(const float *x, int rank, const long long *size,
                                    const long long *stride, const float *g, long long gstride,
                                    int mode, int padding, int align)
{
  int taps = mode == 0 ? 2 : (mode == 1 ? 1 : 4);
  long long first[3];
  double w[3][4];
  for (int d = 0; d < rank; d++) {
    double c = opc_grid_coord_of(g[(rank - 1 - d) * gstride], size[d], mode, padding, align);
    if (!(c == c))
      return (float)c;
    /* Far outside, every tap reads 0 (only zeros padding gets here):
       bounded so that the conversion below is defined. */
    double far = (double)size[d] + 8.0;
    c = c < -far ? -far : (c > far ? far : c);
    double f = floor(c), t = c - f;
    first[d] = mode == 1 ? (long long)c : (long long)f - (mode == 2);
    for (int k = 0; k < taps; k++)
      w[d][k] = mode == 1 ? 1.0 : (mode == 0 ? (k ? t : 1.0 - t) : opc_grid_cubic_of(t, k));
  }
  double sum = 0.0;
  int combos = rank == 2 ? taps * taps : taps * taps * taps;
  for (int k = 0; k < combos; k++) {
    double weight = 1.0;
    long long off = 0;
    int rest = k;
    for (int d = rank - 1; d >= 0; d--) {
      long long e = opc_grid_tap_of(first[d] + rest % taps, size[d], padding, align);
      weight *= w[d][rest % taps];
      off = e < 0 || off < 0 ? -1 : off + e * stride[d];
      rest /= taps;
    }
    if (off >= 0)
      sum += weight * (double)x[off];
  }
  return (float)sum;
}

/* MaxPool's Indices: spatial position (p0, p1, p2) of sizes (s0, s1,
   s2) in plane `plane` (image * channels + channel) as an index into the
   flattened input: row-major, or column-major within the plane
   (storage_order 1). Axes a pool lacks have size 1 and position 0. */
OPC_SCALAR long long opc_pool_index_of(long long plane, long long s0, long long s1, long long s2,
                                       long long p0, long long p1, long long p2,
                                       int column_major)
{
  long long at = column_major ? p0 + s0 * (p1 + s1 * p2) : (p0 * s1 + p1) * s2 + p2;
  return plane * s0 * s1 * s2 + at;
}

/* One sample of RoiAlign at (y, x) of the plane x (height by width, rows
   hs and columns ws elements apart): bilinear between its four nearest
   elements, in float as the reference computes it; a point more than one
   element outside the plane gives 0, one less clamps to the edge. In max
   mode the largest of the four weighted elements instead of their sum
   (the reference's max, which weights before it compares). */
OPC_SCALAR float opc_roi_sample_of(const float *x, long long height, long long width,
                                   long long hs, long long ws, float y, float xx, int max_mode)
{
  if (y < -1.0f || y > (float)height || xx < -1.0f || xx > (float)width)
    return 0.0f;
  y = y <= 0.0f ? 0.0f : y;
  xx = xx <= 0.0f ? 0.0f : xx;
  long long y_low = (long long)y, x_low = (long long)xx, y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = (float)y_low;
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    xx = (float)x_low;
  } else {
    x_high = x_low + 1;
  }
  float ly = y - (float)y_low, lx = xx - (float)x_low, hy = 1.0f - ly, hx = 1.0f - lx;
  float v1 = hy * hx * x[y_low * hs + x_low * ws], v2 = hy * lx * x[y_low * hs + x_high * ws];
  float v3 = ly * hx * x[y_high * hs + x_low * ws], v4 = ly * lx * x[y_high * hs + x_high * ws];
  if (!max_mode)
    return v1 + v2 + v3 + v4;
  float m = v1 > v2 ? v1 : v2;
  m = m > v3 ? m : v3;
  return m > v4 ? m : v4;
}

/* One output of RoiAlign: bin (ph, pw) of out_h by out_w over the box
   (x1, y1, x2, y2), its coordinates bstride apart, of the plane x
   (height by width, rows hs and columns ws apart). The box is scaled by
   `scale` and, with half_pixel, shifted by half an element; without it
   (output_half_pixel, opset 10) it is at least 1 by 1. Each bin averages
   (or, max_mode, takes the largest of) a grid of `sampling` by `sampling`
   samples, or ceil(bin size) along each axis when sampling is 0. A box of
   NaN or infinite coordinates gives NaN. */
OPC_SCALAR float opc_roi_align_of(const float *x, long long height, long long width,
                                  long long hs, long long ws, const float *box, long long bstride,
                                  long long ph, long long pw, long long out_h, long long out_w,
                                  float scale, long long sampling, int half_pixel, int max_mode)
{
  float offset = half_pixel ? 0.5f : 0.0f;
  float x1 = box[0] * scale - offset, y1 = box[bstride] * scale - offset;
  float roi_w = box[2 * bstride] * scale - offset - x1;
  float roi_h = box[3 * bstride] * scale - offset - y1;
  if (!half_pixel) {
    roi_w = roi_w > 1.0f ? roi_w : 1.0f;
    roi_h = roi_h > 1.0f ? roi_h : 1.0f;
  }
  float bin_h = roi_h / (float)out_h, bin_w = roi_w / (float)out_w;
  float grid_hf = sampling > 0 ? (float)sampling : ceilf(bin_h);
  float grid_wf = sampling > 0 ? (float)sampling : ceilf(bin_w);
  if (!(x1 - x1 == 0.0f && y1 - y1 == 0.0f && grid_hf - grid_hf == 0.0f &&
        grid_wf - grid_wf == 0.0f))
    return NAN; /* a NaN or infinite box: no grid to sample */
  long long grid_h = (long long)grid_hf, grid_w = (long long)grid_wf;
  long long count = grid_h * grid_w > 1 ? grid_h * grid_w : 1;
  float acc = 0.0f;
  int first = 1;
  for (long long iy = 0; iy < grid_h; iy++) {
    float y = y1 + (float)ph * bin_h + ((float)iy + 0.5f) * bin_h / (float)grid_h;
    for (long long ix = 0; ix < grid_w; ix++) {
      float xx = x1 + (float)pw * bin_w + ((float)ix + 0.5f) * bin_w / (float)grid_w;
      float v = opc_roi_sample_of(x, height, width, hs, ws, y, xx, max_mode);
      if (!max_mode)
        acc += v;
      else if (first || v > acc)
        acc = v;
      first = 0;
    }
  }
  return max_mode ? acc : acc / (float)count;
}

/* The determinant of the m x m matrix x (m at most OPC_DET_MAX), rows
   rs and columns cs elements apart: LU elimination with partial pivoting,
   in double; the product of the pivots, negated per row swap. A zero
   pivot column gives 0, or NaN where what is left holds NaN. */
OPC_SCALAR float opc_det_of(const float *x, long long m, long long rs, long long cs)
{
  double a[1024];
  for (long long i = 0; i < m; i++)
    for (long long j = 0; j < m; j++)
      a[i * m + j] = (double)x[i * rs + j * cs];
  double det = 1.0;
  for (long long k = 0; k < m; k++) {
    long long p = k;
    for (long long i = k + 1; i < m; i++)
      if (fabs(a[i * m + k]) > fabs(a[p * m + k]))
        p = i;
    if (a[p * m + k] == 0.0) {
      for (long long i = k; i < m * m; i++)
        if (!(a[i] == a[i]))
          return (float)a[i];
      return 0.0f;
    }
    if (p != k) {
      for (long long j = 0; j < m; j++) {
        double t = a[k * m + j];
        a[k * m + j] = a[p * m + j];
        a[p * m + j] = t;
      }
      det = -det;
    }
    double pivot = a[k * m + k];
    det *= pivot;
    for (long long i = k + 1; i < m; i++) {
      double f = a[i * m + k] / pivot;
      for (long long j = k + 1; j < m; j++)
        a[i * m + j] -= f * a[k * m + j];
    }
  }
  return (float)det;
}

/* AffineGrid's normalised coordinate of element i of an axis of `size`;
   -1 for a lone element with align_corners. */
OPC_SCALAR double opc_affine_grid_base_of(long long i, long long size, int align)
{
  if (align)
    return size > 1 ? -1.0 + 2.0 * (double)i / (double)(size - 1) : -1.0;
  return -1.0 + (2.0 * (double)i + 1.0) / (double)size;
}

/* NonMaxSuppression's test of a candidate box a against a selected box b,
   as ONNX Runtime makes it: whether their intersection over union exceeds
   the threshold. center 0: a box is two opposite corners [y1, x1, y2, x2],
   either diagonal; 1: [x_center, y_center, width, height]. Boxes that do
   not overlap, or have no area, never suppress. */
OPC_SCALAR float opc_nms_lo_of(float p, float q)
{
  return p < q ? p : q;
}

OPC_SCALAR float opc_nms_hi_of(float p, float q)
{
  return p < q ? q : p;
}

/* Edge `which` of box a: 0 and 1 its low and high x, 2 and 3 its low and
   high y. The kernel keeps a kept box's edges and area, as computed here,
   rather than its four numbers (opc_nms). */
OPC_SCALAR float opc_nms_edge_of(float a0, float a1, float a2, float a3, int center, int which)
{
  if (center)
    return which == 0 ? a0 - a2 / 2 : which == 1 ? a0 + a2 / 2 : which == 2 ? a1 - a3 / 2 : a1 + a3 / 2;
  return which == 0 ? opc_nms_lo_of(a1, a3)
         : which == 1 ? opc_nms_hi_of(a1, a3)
         : which == 2 ? opc_nms_lo_of(a0, a2)
                      : opc_nms_hi_of(a0, a2);
}

OPC_SCALAR float opc_nms_area_of(float x0, float x1, float y0, float y1)
{
  return (x1 - x0) * (y1 - y0);
}

/* The test of a against b from their edges and areas. */
OPC_SCALAR int opc_nms_overlaps_of(float ax0, float ax1, float ay0, float ay1, float area_a,
                                   float bx0, float bx1, float by0, float by1, float area_b,
                                   float threshold)
{
  float ix0 = opc_nms_hi_of(ax0, bx0), ix1 = opc_nms_lo_of(ax1, bx1);
  float iy0 = opc_nms_hi_of(ay0, by0), iy1 = opc_nms_lo_of(ay1, by1);
  if (ix1 <= ix0 || iy1 <= iy0)
    return 0;
  float inter = (ix1 - ix0) * (iy1 - iy0);
  float uni = area_a + area_b - inter;
  if (inter <= 0.0f || area_a <= 0.0f || area_b <= 0.0f || uni <= 0.0f)
    return 0;
  return inter / uni > threshold;
}

OPC_SCALAR int opc_nms_suppresses_of(float a0, float a1, float a2, float a3, float b0, float b1,
                                     float b2, float b3, int center, float threshold)
{
  float ax0 = opc_nms_edge_of(a0, a1, a2, a3, center, 0), ax1 = opc_nms_edge_of(a0, a1, a2, a3, center, 1);
  float ay0 = opc_nms_edge_of(a0, a1, a2, a3, center, 2), ay1 = opc_nms_edge_of(a0, a1, a2, a3, center, 3);
  float bx0 = opc_nms_edge_of(b0, b1, b2, b3, center, 0), bx1 = opc_nms_edge_of(b0, b1, b2, b3, center, 1);
  float by0 = opc_nms_edge_of(b0, b1, b2, b3, center, 2), by1 = opc_nms_edge_of(b0, b1, b2, b3, center, 3);
  return opc_nms_overlaps_of(ax0, ax1, ay0, ay1, opc_nms_area_of(ax0, ax1, ay0, ay1), bx0, bx1,
                             by0, by1, opc_nms_area_of(bx0, bx1, by0, by1), threshold);
}

/* Integer Pow: base to the power exp exactly, by squaring, wrapping
   around on overflow as the other integer kernels do. A negative exponent
   gives the real result truncated toward zero: 1 and -1 keep their
   magnitude, any other base gives 0 (ONNX Runtime's 1 / 0 included). */
OPC_SCALAR long long opc_int_pow_of(long long base, long long exp)
{
  if (exp < 0)
    return base == 1 ? 1 : base == -1 ? (exp % 2 ? -1 : 1) : 0;
  unsigned long long r = 1, b = (unsigned long long)base;
  for (unsigned long long e = (unsigned long long)exp; e; e >>= 1) {
    if (e & 1)
      r *= b;
    b *= b;
  }
  return (long long)r;
}

/* The remainder of integer u by v as C's % gives it (truncated toward
   zero), exact on every ONNX integer type: unsigned ones, uint64's bits
   among them, in unsigned long long, signed ones in long long. By zero
   (ONNX leaves it undefined) and the one overflow (the least long long by
   -1) it is 0, never a fault. */
OPC_SCALAR long long opc_int_rem_of(long long u, long long v, int is_unsigned)
{
  if (v == 0)
    return 0;
  if (is_unsigned)
    return (long long)((unsigned long long)u % (unsigned long long)v);
  return v == -1 ? 0 : u % v;
}

/* The angle of term (k, t) of a DFT of length len, 2 pi (k t mod len) /
   len: reduced in integers first, so that it stays exact however long the
   transform (k t < 2^63 for any length opc can hold). */
OPC_SCALAR double opc_dft_angle_of(long long k, long long t, long long len)
{
  return 6.283185307179586 * (double)((k * t) % len) / (double)len;
}

/* The twiddle of term (k, t) of a DFT of length len: (*c, *s) = cos and
   sin of its angle, the sine negated for the forward transform (mode 0:
   e^-i angle; the inverse modes 1 and 2: e^+i angle). */
OPC_SCALAR void opc_dft_twiddle_of(int mode, long long k, long long t, long long len, double *c,
                                   double *s)
{
  double angle = opc_dft_angle_of(k, t, len);
  *c = cos(angle);
  *s = mode ? sin(angle) : -sin(angle);
}

/* Adds term (k, t) of a DFT of length len to the sum (*re, *im), then
   moves the twiddle (*c, *s), term t's (opc_dft_twiddle_of), to term
   t + 1's: exactly every 32 terms, by a rotation by (step_c, step_s),
   term (k, 1)'s twiddle, between. So a sum costs a few multiplications a
   term, not a cosine and a sine (5 times faster on a 400-point STFT), and
   its error stays that of a few dozen double roundings. The sum starts at
   t = 0 (twiddle 1). Output index k, input value v (v_re + i v_im) at
   index t along the axis. mode 0 forward, 1 inverse, 2 inverse of a
   one-sided spectrum (IRFFT): input bin t also stands for its conjugate
   mirror len - t, so it counts twice unless it is its own mirror (0,
   len / 2), and only the real part is kept. The inverse modes' 1 / len
   is the caller's, once per sum. */
OPC_SCALAR void opc_dft_add_of(int mode, long long k, long long t, long long len, double v_re,
                               double v_im, double step_c, double step_s, double *c, double *s,
                               double *re, double *im)
{
  if (mode == 2) { /* a bin that is its own mirror is real: its v_im is dropped */
    *re += t == 0 || 2 * t == len ? v_re * *c : 2.0 * (v_re * *c - v_im * *s);
  } else {
    *re += v_re * *c - v_im * *s;
    *im += v_re * *s + v_im * *c;
  }
  if ((t + 1) % 32 == 0) {
    opc_dft_twiddle_of(mode, k, t + 1, len, c, s);
  } else {
    double next_c = *c * step_c - *s * step_s;
    *s = *c * step_s + *s * step_c;
    *c = next_c;
  }
}

/* Element t of a generalised cosine window of length period (the window's
   size when periodic, one less when symmetric): a0 - a1 cos(2 pi t /
   period) + a2 cos(4 pi t / period). Hann is (1/2, 1/2, 0), Hamming
   (25/46, 21/46, 0), Blackman (0.42, 0.5, 0.08). */
OPC_SCALAR double opc_cosine_window_of(long long t, long long period, double a0, double a1,
                                       double a2)
{
  double x = 6.283185307179586 * (double)t / (double)period;
  return a0 - a1 * cos(x) + a2 * cos(2.0 * x);
}

/* The DFT bin of point i of MelWeightMatrix's num + 2 points, equally
   spaced in mel, mel(f) = 2595 log10(1 + f / 700), from lo_hz on in steps
   of (mel(hi_hz) - mel(lo_hz)) / (num + 2): floor((dft_length + 1) f /
   rate). The edges' mels in float, the rest in double, as the ONNX
   reference computes them (a bin is a floor, so the rounding shows). A
   bin that is not a number or beyond 2^62 is -1: none. */
OPC_SCALAR long long opc_mel_bin_of(long long i, long long num, long long dft_length,
                                    long long rate, float lo_hz, float hi_hz)
{
  const float ln10 = 2.302585092994046f;
  float lo_mel = 2595.0f * log1pf(lo_hz / 700.0f) / ln10;
  float hi_mel = 2595.0f * log1pf(hi_hz / 700.0f) / ln10;
  float step = (hi_mel - lo_mel) / (float)(num + 2);
  double mel = (double)i * (double)step + (double)lo_mel;
  double hz = 700.0 * expm1(mel / 2595.0 * 2.302585092994046);
  double bin = floor(((double)dft_length + 1.0) * hz / (double)rate);
  return bin > -4.6e18 && bin < 4.6e18 ? (long long)bin : -1;
}

/* TfIdfVectorizer: element k of a row of integers, x[k * stride], an int
   when bytes is 4, else a long long. */
OPC_SCALAR long long opc_tfidf_item_of(const void *x, int bytes, long long k, long long stride)
{
  return bytes == 4 ? (long long)((const int *)x)[k * stride] : ((const long long *)x)[k * stride];
}

/* TfIdfVectorizer: how often the n-gram gram[0..len) occurs in the row of
   `count` integers at x (opc_tfidf_item_of), its items s + 1 apart for
   each skip s from 0 to max_skip; a unigram is counted once. */
OPC_SCALAR long long opc_tfidf_count_of(const void *x, int bytes, long long count, long long stride,
                                        const long long *gram, long long len, long long max_skip)
{
  long long found = 0, skips = len == 1 ? 0 : max_skip;
  for (long long s = 0; s <= skips; s++)
    for (long long start = 0; start + (len - 1) * (s + 1) < count; start++) {
      long long j = 0;
      while (j < len && opc_tfidf_item_of(x, bytes, start + j * (s + 1), stride) == gram[j])
        j++;
      found += j == len;
    }
  return found;
}

/* TfIdfVectorizer's value of an n-gram found `count` times, of weight w:
   mode 0 (TF) the count, 1 (IDF) w where it is found, 2 (TFIDF) count w. */
OPC_SCALAR float opc_tfidf_of(long long count, int mode, float w)
{
  return mode == 0 ? (float)count : mode == 1 ? (count > 0 ? w : 0.0f) : (float)count * w;
}

/* ------------------------------------- the activations by their codes */
/* (The kernels take the formulas above, up to this divider: kernel_types.py.) */

/* The activation of code OPC_ACT_*, its parameters p0 and p1 (those it
   takes); x itself for OPC_ACT_NONE and codes outside the list. */
OPC_SCALAR float opc_activation_of(int code, float x, float p0, float p1)
{
#define OPC_ACT_ARGS0 x
#define OPC_ACT_ARGS1 x, p0
#define OPC_ACT_ARGS2 x, p0, p1
#define OPC_ACT_CASE(NAME, name, params) \
  case OPC_ACT_##NAME: return opc_##name##_of(OPC_ACT_ARGS##params);
  switch (code) {
    OPC_ACTIVATIONS(OPC_ACT_CASE)
  }
#undef OPC_ACT_CASE
#undef OPC_ACT_ARGS0
#undef OPC_ACT_ARGS1
#undef OPC_ACT_ARGS2
  (void)p0, (void)p1;
  return x;
}

#endif /* OPC_SCALAR_H */
