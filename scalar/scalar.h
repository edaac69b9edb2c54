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

OPC_SCALAR int opc_nms_suppresses_of(float a0, float a1, float a2, float a3, float b0, float b1,
                                     float b2, float b3, int center, float threshold)
{
  float ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;
  if (center) {
    ax0 = a0 - a2 / 2, ax1 = a0 + a2 / 2, ay0 = a1 - a3 / 2, ay1 = a1 + a3 / 2;
    bx0 = b0 - b2 / 2, bx1 = b0 + b2 / 2, by0 = b1 - b3 / 2, by1 = b1 + b3 / 2;
  } else {
    ax0 = opc_nms_lo_of(a1, a3), ax1 = opc_nms_hi_of(a1, a3);
    ay0 = opc_nms_lo_of(a0, a2), ay1 = opc_nms_hi_of(a0, a2);
    bx0 = opc_nms_lo_of(b1, b3), bx1 = opc_nms_hi_of(b1, b3);
    by0 = opc_nms_lo_of(b0, b2), by1 = opc_nms_hi_of(b0, b2);
  }
  float ix0 = opc_nms_hi_of(ax0, bx0), ix1 = opc_nms_lo_of(ax1, bx1);
  float iy0 = opc_nms_hi_of(ay0, by0), iy1 = opc_nms_lo_of(ay1, by1);
  if (ix1 <= ix0 || iy1 <= iy0)
    return 0;
  float inter = (ix1 - ix0) * (iy1 - iy0);
  float area_a = (ax1 - ax0) * (ay1 - ay0), area_b = (bx1 - bx0) * (by1 - by0);
  float uni = area_a + area_b - inter;
  if (inter <= 0.0f || area_a <= 0.0f || area_b <= 0.0f || uni <= 0.0f)
    return 0;
  return inter / uni > threshold;
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
