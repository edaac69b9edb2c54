/*
 * test_half.c - FP16 and BF16 storage in the runtime's cuDNN and cuBLAS:
 * the rounding of results (ties to even, subnormals, overflow, NaN) and
 * the decoding of every 16-bit pattern; convolutions (grouped, depthwise,
 * into a strided view of a wider tensor, fused with bias, residual and
 * ReLU), cudnnAddTensor, activations, pooling, cudnnOpTensor,
 * cudnnReduceTensor (mean, max, min; strided, blended),
 * cudnnBatchNormalizationForwardInference (FLOAT parameters; spatial and
 * per activation, 4-d and 5-d, strided, blended), cublasGemmEx and
 * cublasGemmStridedBatchedEx, each against direct loops in double on the
 * same 16-bit inputs; and the type combinations cuDNN and cuBLAS refuse.
 *
 * The expected values never come from the runtime: this file has its own
 * rounding (frexp, ldexp and nearbyint in double), encoding and decoding.
 */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "testutil.h"

/* ---- the two formats, independently of the runtime ---- */

typedef enum { F16, BF16 } Fmt;

typedef struct Format {
  const char *name;
  int mant;      /* mantissa bits */
  int bias;      /* exponent bias */
  int emin;      /* exponent of the smallest normal */
  double over;   /* the magnitude from which rounding gives infinity */
  uint16_t inf, nan;
} Format;

static Format format(Fmt f) {
  if (f == F16)
    return (Format){"fp16", 10, 15, -14, 65520.0, 0x7c00, 0x7e00};
  /* Halfway between the largest bfloat16, (2 - 2^-7) 2^127, and 2^128. */
  return (Format){"bf16", 7, 127, -126, ldexp(2.0 - 1.0 / 256, 127), 0x7f80, 0x7fc0};
}

static cudnnDataType_t dnn_type(Fmt f) {
  return f == F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
}

static cudaDataType blas_type(Fmt f) {
  return f == F16 ? CUDA_R_16F : CUDA_R_16BF;
}

/* v rounded to the format: to nearest, ties to even (the default rounding
 * mode of nearbyint), infinity from fm.over up. */
static double round_to(double v, Fmt f) {
  Format fm = format(f);
  if (isnan(v))
    return v;
  double a = fabs(v);
  if (a >= fm.over)
    return copysign(INFINITY, v);
  if (a == 0)
    return v;
  int e;
  frexp(a, &e); /* a = m 2^e, m in [0.5, 1): its leading bit is 2^(e - 1) */
  int lead = e - 1 < fm.emin ? fm.emin : e - 1;
  double ulp = ldexp(1.0, lead - fm.mant);
  return copysign(nearbyint(a / ulp) * ulp, v);
}

/* The unit in the last place at v's magnitude. */
static double ulp_of(double v, Fmt f) {
  Format fm = format(f);
  int e;
  frexp(fabs(v), &e);
  int lead = v == 0 || e - 1 < fm.emin ? fm.emin : e - 1;
  return ldexp(1.0, lead - fm.mant);
}

/* The bits of r, a value of the format (round_to's result). */
static uint16_t encode(double r, Fmt f) {
  Format fm = format(f);
  if (isnan(r))
    return fm.nan;
  uint16_t sign = signbit(r) ? 0x8000 : 0;
  double a = fabs(r);
  if (isinf(a))
    return sign | fm.inf;
  if (a < ldexp(1.0, fm.emin)) /* subnormal or zero: a multiple of the smallest */
    return sign | (uint16_t)(a / ldexp(1.0, fm.emin - fm.mant));
  int e;
  frexp(a, &e);
  int lead = e - 1;
  uint16_t m = (uint16_t)((a / ldexp(1.0, lead) - 1.0) * ldexp(1.0, fm.mant));
  return sign | (uint16_t)((lead + fm.bias) << fm.mant) | m;
}

static double decode(uint16_t b, Fmt f) {
  Format fm = format(f);
  int emax = (1 << (15 - fm.mant)) - 1;
  int e = b >> fm.mant & emax, m = b & ((1 << fm.mant) - 1);
  double sign = b & 0x8000 ? -1.0 : 1.0;
  if (e == emax)
    return m ? NAN : sign * INFINITY;
  if (e == 0)
    return sign * ldexp(m, fm.emin - fm.mant);
  return sign * ldexp(1.0 + ldexp(m, -fm.mant), e - fm.bias);
}

static bool is_nan_bits(uint16_t b, Fmt f) {
  Format fm = format(f);
  return (b & fm.inf) == fm.inf && (b & ~fm.inf & 0x7fff) != 0;
}

/* n random values of the format in about [-scale, scale): bits and values. */
static uint16_t *rnd_fmt(long long n, Fmt f, float scale, double **values) {
  uint16_t *b = malloc((n ? n : 1) * sizeof *b);
  double *v = malloc((n ? n : 1) * sizeof *v);
  for (long long i = 0; i < n; i++) {
    v[i] = round_to(scale * rnd(), f);
    b[i] = encode(v[i], f);
  }
  *values = v;
  return b;
}

/* Whether got (bits) is want rounded to the format, within one unit in the
 * last place (float accumulation may round a sum the other way than
 * double) plus a little for the float sum's own error; prints the first
 * miss. */
static bool close_fmt(const char *what, const uint16_t *got, const double *want, long long n,
                      Fmt f) {
  for (long long i = 0; i < n; i++) {
    double w = round_to(want[i], f), g = decode(got[i], f);
    double tol = 1.01 * ulp_of(w, f) + 1e-5 * (1 + fabs(w));
    if (!(fabs(g - w) <= tol)) {
      fail("%s (%s): element %lld is %.9g (0x%04x), expected %.9g", what, format(f).name, i, g,
           got[i], w);
      return false;
    }
  }
  return true;
}

/* ---- device memory ---- */

static void *upload(const void *host, size_t bytes) {
  void *d = NULL;
  cudaMalloc(&d, bytes ? bytes : 1);
  cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);
  return d;
}

static void download(void *host, const void *dev, size_t bytes) {
  cudaDeviceSynchronize();
  cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost);
}

static cudnnHandle_t dnn;
static cublasHandle_t blas;

static cudnnTensorDescriptor_t tensor(cudnnDataType_t type, int n, int c, int h, int w) {
  cudnnTensorDescriptor_t d;
  cudnnCreateTensorDescriptor(&d);
  expect(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, type, n, c, h, w) == 0, "tensor");
  return d;
}

/* ---- conversions, through cudnnOpTensor's mixed types ---- */

/* C = (1 A) * (1 B) with B all ones: C is A converted to C's type, exactly
 * the conversion under test (the product by 1 is exact, NaN, infinities
 * and -0 included). */
static void convert_by_op_tensor(cudnnDataType_t at, const void *a, size_t aelem,
                                 cudnnDataType_t ct, void *c, size_t celem, int n) {
  cudnnOpTensorDescriptor_t op;
  cudnnCreateOpTensorDescriptor(&op);
  cudnnSetOpTensorDescriptor(op, CUDNN_OP_TENSOR_MUL, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN);
  cudnnTensorDescriptor_t ad = tensor(at, 1, 1, 1, n), cd = tensor(ct, 1, 1, 1, n);
  void *ones = malloc((size_t)n * aelem);
  for (int i = 0; i < n; i++) {
    if (at == CUDNN_DATA_FLOAT)
      ((float *)ones)[i] = 1.0f;
    else
      ((uint16_t *)ones)[i] = encode(1.0, at == CUDNN_DATA_HALF ? F16 : BF16);
  }
  void *da = upload(a, (size_t)n * aelem), *db = upload(ones, (size_t)n * aelem);
  void *dc = NULL;
  cudaMalloc(&dc, (size_t)n * celem);
  float one = 1, zero = 0;
  expect(cudnnOpTensor(dnn, op, &one, ad, da, &one, ad, db, &zero, cd, dc) == 0,
         "cudnnOpTensor conversion");
  download(c, dc, (size_t)n * celem);
  cudaFree(da), cudaFree(db), cudaFree(dc);
  free(ones);
  cudnnDestroyTensorDescriptor(ad);
  cudnnDestroyTensorDescriptor(cd);
  cudnnDestroyOpTensorDescriptor(op);
}

/* Every 16-bit pattern decodes to its value exactly: multiplied by 1 in
 * float and stored again in its own type (cuDNN has no 16-bit to FLOAT
 * op tensor), it comes back with the same bits, a NaN as a NaN. Encoding
 * is checked on its own (test_encode), so a wrong value here shows. */
static void test_decode_all(Fmt f) {
  int n = 65536;
  uint16_t *bits = malloc(n * sizeof *bits), *got = malloc(n * sizeof *got);
  for (int i = 0; i < n; i++)
    bits[i] = (uint16_t)i;
  convert_by_op_tensor(dnn_type(f), bits, 2, dnn_type(f), got, 2, n);
  for (int i = 0; i < n; i++) {
    bool nan = isnan(decode(bits[i], f));
    bool ok = nan ? isnan(decode(got[i], f)) : got[i] == bits[i];
    if (!ok) {
      fail("decode %s 0x%04x: came back as 0x%04x", format(f).name, bits[i], got[i]);
      break;
    }
  }
  free(bits), free(got);
}

/* Floats round to the nearest 16-bit value, ties to even: ties, the edges
 * of the subnormals, overflow, NaN, signed zeros and random floats. */
static void test_encode(Fmt f) {
  float special[] = {
    1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f - 0x1p-12f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,
    -(1.0f + 0x1p-8f), 0x1p-25f, nextafterf(0x1p-25f, 1), 3 * 0x1p-25f, 5 * 0x1p-25f,
    0x1p-14f - 0x1p-25f, 0x1p-24f, -0x1p-24f, 65504.0f, nextafterf(65520.0f, 0), 65520.0f,
    -65520.0f, 65536.0f, 1e30f, FLT_MAX, -FLT_MAX, 3.3895313e38f, INFINITY, -INFINITY, NAN, -NAN,
    0.0f, -0.0f, 1e-30f, 1e-40f, -1e-40f, FLT_TRUE_MIN, 0x1p-126f, 0x1p-133f, 0x1p-134f,
    3 * 0x1p-134f, 0.1f, 1.0f / 3, 1234.5678f, -0.0999f,
  };
  int ns = (int)(sizeof special / sizeof special[0]), nr = 4000, n = ns + nr + 20000;
  float *in = malloc(n * sizeof *in), *common = rnd_array(nr);
  memcpy(in, special, sizeof special);
  memcpy(in + ns, common, nr * sizeof *in); /* values in [-1, 1) */
  free(common);
  for (int i = ns + nr; i < n; i++) {
    /* Random bits over every exponent, NaNs aside (they are above). */
    uint32_t u;
    do {
      rng_state = rng_state * 1664525u + 1013904223u;
      u = rng_state ^ (rng_state << 13) ^ ((uint32_t)i * 2654435761u);
    } while ((u & 0x7f800000) == 0x7f800000);
    memcpy(&in[i], &u, sizeof u);
  }
  uint16_t *got = malloc(n * sizeof *got);
  convert_by_op_tensor(CUDNN_DATA_FLOAT, in, 4, dnn_type(f), got, 2, n);
  for (int i = 0; i < n; i++) {
    double want = round_to(in[i], f);
    bool ok = isnan(want) ? is_nan_bits(got[i], f) : got[i] == encode(want, f);
    if (!ok) {
      uint32_t u;
      memcpy(&u, &in[i], sizeof u);
      fail("encode %s %.9g (0x%08x): 0x%04x, expected 0x%04x", format(f).name, in[i], u, got[i],
           encode(want, f));
      break;
    }
  }
  free(in), free(got);
}

/* ---- convolutions ---- */

typedef struct ConvCase {
  int n, c, k, groups, hw, ks, pad, stride;
  int extra;         /* y is channels [0, k) of a tensor of k + extra channels */
  float alpha, beta; /* cudnnConvolutionForward; ignored when fused */
  bool true_half;    /* compute type HALF */
  bool fused;        /* cudnnConvolutionBiasActivationForward with ReLU */
  bool z_is_y;       /* fused: the residual is y itself */
  float alpha2;      /* fused: the residual's scale */
  bool nhwc;         /* x and y channels-last, the filter NHWC (K, R, S, C) */
} ConvCase;

/* NCHW 16-bit elements (n, c, h, w) reordered to NHWC, or back. */
static uint16_t *reorder(const uint16_t *from, int n, int c, int h, int w, bool to_nhwc) {
  uint16_t *to = malloc((size_t)n * c * h * w * 2);
  for (int a = 0; a < n; a++)
    for (int b = 0; b < c; b++)
      for (int p = 0; p < h * w; p++) {
        long long nchw = ((long long)a * c + b) * h * w + p, nhwc = ((long long)a * h * w + p) * c + b;
        if (to_nhwc)
          to[nhwc] = from[nchw];
        else
          to[nchw] = from[nhwc];
      }
  return to;
}

static int conv_out(const ConvCase *t) {
  return (t->hw + 2 * t->pad - t->ks) / t->stride + 1;
}

/* The convolution of x and w at (n, k, oh, ow), in double. */
static double ref_conv_at(const ConvCase *t, const double *x, const double *w, int n, int k,
                          int oh, int ow) {
  int cg = t->c / t->groups, kg = t->k / t->groups, g = k / kg;
  double sum = 0;
  for (int ci = 0; ci < cg; ci++)
    for (int a = 0; a < t->ks; a++)
      for (int b = 0; b < t->ks; b++) {
        int ih = oh * t->stride - t->pad + a, iw = ow * t->stride - t->pad + b;
        if (ih < 0 || ih >= t->hw || iw < 0 || iw >= t->hw)
          continue;
        double xv = x[(((long long)n * t->c + g * cg + ci) * t->hw + ih) * t->hw + iw];
        sum += w[(((long long)k * cg + ci) * t->ks + a) * t->ks + b] * xv;
      }
  return sum;
}

static void conv_case(const ConvCase *t, Fmt f, const char *label) {
  char name[160];
  snprintf(name, sizeof name, "%s %s n%d c%d k%d g%d %dx%d ks%d pad%d stride%d%s%s", label,
           format(f).name, t->n, t->c, t->k, t->groups, t->hw, t->hw, t->ks, t->pad, t->stride,
           t->true_half ? " true-half" : "", t->fused ? " fused" : "");
  cudnnDataType_t type = dnn_type(f);
  int o = conv_out(t), kw = t->k + t->extra;
  long long xn = (long long)t->n * t->c * t->hw * t->hw;
  long long wn = (long long)t->k * (t->c / t->groups) * t->ks * t->ks;
  long long yn = (long long)t->n * kw * o * o; /* the wide tensor */
  double *x, *w, *y0, *bias;
  uint16_t *hx = rnd_fmt(xn, f, 1, &x), *hw = rnd_fmt(wn, f, 1, &w);
  uint16_t *hy = rnd_fmt(yn, f, 2, &y0), *hb = rnd_fmt(t->k, f, 1, &bias);
  if (t->nhwc) { /* the same values, stored channels-last */
    uint16_t *rx = reorder(hx, t->n, t->c, t->hw, t->hw, true);
    uint16_t *rw = reorder(hw, t->k, t->c / t->groups, t->ks, t->ks, true);
    uint16_t *ry = reorder(hy, t->n, kw, o, o, true);
    free(hx), free(hw), free(hy);
    hx = rx, hw = rw, hy = ry;
  }
  void *dx = upload(hx, xn * 2), *dw = upload(hw, wn * 2), *dy = upload(hy, yn * 2);
  void *db = upload(hb, t->k * 2);

  cudnnTensorDescriptor_t xd, yd, bd;
  cudnnCreateTensorDescriptor(&xd);
  expect(cudnnSetTensor4dDescriptor(xd, t->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, type,
                                    t->n, t->c, t->hw, t->hw) == 0,
         "x");
  cudnnCreateTensorDescriptor(&yd);
  if (t->nhwc)
    expect(cudnnSetTensor4dDescriptorEx(yd, type, t->n, t->k, o, o, kw * o * o, 1, o * kw, kw) == 0,
           "y view");
  else
    expect(cudnnSetTensor4dDescriptorEx(yd, type, t->n, t->k, o, o, kw * o * o, o * o, o, 1) == 0,
           "y view");
  bd = tensor(type, 1, t->k, 1, 1);
  cudnnFilterDescriptor_t wd;
  cudnnCreateFilterDescriptor(&wd);
  expect(cudnnSetFilter4dDescriptor(wd, type, t->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                    t->k, t->c / t->groups, t->ks, t->ks) == 0,
         "16-bit filter");
  cudnnConvolutionDescriptor_t cd;
  cudnnCreateConvolutionDescriptor(&cd);
  expect(cudnnSetConvolution2dDescriptor(cd, t->pad, t->pad, t->stride, t->stride, 1, 1,
                                         CUDNN_CROSS_CORRELATION,
                                         t->true_half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT) == 0,
         "conv descriptor");
  cudnnSetConvolutionGroupCount(cd, t->groups);
  cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH);
  cudnnActivationDescriptor_t act;
  cudnnCreateActivationDescriptor(&act);
  cudnnSetActivationDescriptor(act, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0);

  /* Expected: the wide tensor, its channels past k untouched. */
  double *want = malloc(yn * sizeof *want);
  for (int n = 0; n < t->n; n++)
    for (int k = 0; k < kw; k++)
      for (int p = 0; p < o * o; p++) {
        long long at = ((long long)n * kw + k) * o * o + p;
        if (k >= t->k) {
          want[at] = y0[at];
          continue;
        }
        double v = ref_conv_at(t, x, w, n, k, p / o, p % o);
        if (t->fused) {
          v = v + t->alpha2 * y0[at] + bias[k]; /* z is y's old value (z_is_y) */
          want[at] = v > 0 ? v : 0;
        } else {
          want[at] = t->alpha * v + (t->beta != 0 ? t->beta * y0[at] : 0);
        }
      }

  /* The heuristics' engines each run, in their math type; a search too. */
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int count = 0;
  expect(cudnnGetConvolutionForwardAlgorithm_v7(dnn, xd, wd, cd, yd, 8, &count, perf) == 0 &&
             count > 0,
         "16-bit heuristics");
  int found = 0;
  cudnnConvolutionFwdAlgoPerf_t searched[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  expect(cudnnFindConvolutionForwardAlgorithm(dnn, xd, wd, cd, yd, 8, &found, searched) == 0 &&
             found > 0 && searched[0].status == CUDNN_STATUS_SUCCESS,
         "16-bit search");
  uint16_t *got = malloc(yn * 2);
  for (int i = 0; i < count && perf[i].status == CUDNN_STATUS_SUCCESS; i++) {
    if (t->fused && perf[i].algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
      continue;
    cudnnSetConvolutionMathType(cd, perf[i].mathType);
    size_t ws = 1;
    expect(cudnnGetConvolutionForwardWorkspaceSize(dnn, xd, wd, cd, yd, perf[i].algo, &ws) == 0 &&
               ws == perf[i].memory,
           "16-bit workspace size");
    void *dws = NULL;
    if (ws)
      cudaMalloc(&dws, ws);
    cudaMemcpy(dy, hy, yn * 2, cudaMemcpyHostToDevice);
    cudnnStatus_t st;
    if (t->fused)
      st = cudnnConvolutionBiasActivationForward(dnn, &t->alpha, xd, dx, wd, dw, cd, perf[i].algo,
                                                 dws, ws, &t->alpha2, yd, dy, bd, db, act, yd,
                                                 dy);
    else
      st = cudnnConvolutionForward(dnn, &t->alpha, xd, dx, wd, dw, cd, perf[i].algo, dws, ws,
                                   &t->beta, yd, dy);
    if (st != CUDNN_STATUS_SUCCESS)
      fail("%s: algo %d: %s", name, perf[i].algo, cudnnGetErrorString(st));
    download(got, dy, yn * 2);
    if (t->nhwc) {
      uint16_t *back = reorder(got, t->n, kw, o, o, false);
      memcpy(got, back, yn * 2);
      free(back);
    }
    if (!close_fmt(name, got, want, yn, f))
      fprintf(stderr, "  algo %d math %d\n", perf[i].algo, perf[i].mathType);
    cudaFree(dws);
  }
  cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH);
  free(got), free(want);
  free(x), free(w), free(y0), free(bias), free(hx), free(hw), free(hy), free(hb);
  cudaFree(dx), cudaFree(dw), cudaFree(dy), cudaFree(db);
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyTensorDescriptor(bd);
  cudnnDestroyFilterDescriptor(wd);
  cudnnDestroyConvolutionDescriptor(cd);
  cudnnDestroyActivationDescriptor(act);
}

static void test_convolutions(Fmt f) {
  ConvCase plain = {.n = 2, .c = 4, .k = 6, .groups = 1, .hw = 7, .ks = 3, .pad = 1, .stride = 1,
                    .alpha = 1, .beta = 0};
  conv_case(&plain, f, "conv");
  ConvCase grouped = plain;
  grouped.groups = 2;
  grouped.stride = 2;
  conv_case(&grouped, f, "grouped conv");
  ConvCase depthwise = plain;
  depthwise.c = depthwise.groups = 4;
  depthwise.k = 8;
  conv_case(&depthwise, f, "depthwise conv");
  /* y a channel slice of a wider tensor, its old values blended in. */
  ConvCase view = plain;
  view.extra = 3;
  view.alpha = 0.5f;
  view.beta = 0.75f;
  view.ks = 1;
  view.pad = 0;
  conv_case(&view, f, "conv into a strided view");
  ConvCase fused = plain;
  fused.fused = true;
  fused.z_is_y = true;
  fused.alpha2 = 0.5f;
  fused.extra = 2;
  conv_case(&fused, f, "conv+bias+residual+relu");
  /* choose-layout's form: NHWC filter and data, y packed (cuDNN has no
     algorithm for a channel slice of NHWC data: test_nhwc_refusals) */
  ConvCase nhwc = fused;
  nhwc.nhwc = true;
  nhwc.extra = 0;
  conv_case(&nhwc, f, "NHWC conv+bias+residual+relu");
  ConvCase nhwc_depthwise = depthwise;
  nhwc_depthwise.nhwc = true;
  conv_case(&nhwc_depthwise, f, "NHWC depthwise conv");
  if (f == F16) {
    ConvCase true_half = plain;
    true_half.true_half = true;
    conv_case(&true_half, f, "conv");
  }
}

/* ---- element-wise, pooling ---- */

static void test_add_tensor(Fmt f) {
  cudnnDataType_t type = dnn_type(f);
  int n = 2, c = 6, hw = 5;
  long long yn = (long long)n * c * hw * hw;
  double *b, *y0, *a;
  uint16_t *hb = rnd_fmt(c, f, 1, &b), *hy = rnd_fmt(yn, f, 4, &y0), *ha = rnd_fmt(yn, f, 1, &a);
  void *db = upload(hb, c * 2), *dy = upload(hy, yn * 2), *da = upload(ha, yn * 2);
  cudnnTensorDescriptor_t bd = tensor(type, 1, c, 1, 1), yd = tensor(type, n, c, hw, hw);
  double *want = malloc(yn * sizeof *want);
  uint16_t *got = malloc(yn * 2);
  /* A bias broadcast over every dim but the channels, added in place. */
  float one = 1;
  expect(cudnnAddTensor(dnn, &one, bd, db, &one, yd, dy) == 0, "16-bit bias");
  for (long long i = 0; i < yn; i++)
    want[i] = round_to(y0[i] + b[i / (hw * hw) % c], f);
  download(got, dy, yn * 2);
  close_fmt("cudnnAddTensor bias", got, want, yn, f);
  /* Then y = 0.5 a - 2 y, a of y's shape. */
  float half = 0.5f, minus2 = -2;
  expect(cudnnAddTensor(dnn, &half, yd, da, &minus2, yd, dy) == 0, "16-bit add");
  for (long long i = 0; i < yn; i++)
    want[i] = 0.5 * a[i] - 2 * want[i];
  download(got, dy, yn * 2);
  close_fmt("cudnnAddTensor blend", got, want, yn, f);
  free(b), free(y0), free(a), free(hb), free(hy), free(ha), free(want), free(got);
  cudaFree(db), cudaFree(dy), cudaFree(da);
  cudnnDestroyTensorDescriptor(bd);
  cudnnDestroyTensorDescriptor(yd);
}

static double ref_act(cudnnActivationMode_t mode, double v) {
  switch (mode) {
  case CUDNN_ACTIVATION_RELU: return v > 0 ? v : 0;
  case CUDNN_ACTIVATION_SIGMOID: return 1 / (1 + exp(-v));
  case CUDNN_ACTIVATION_TANH: return tanh(v);
  default: return v;
  }
}

static void test_activations(Fmt f) {
  cudnnDataType_t type = dnn_type(f);
  long long n = 3 * 5 * 7 * 4;
  cudnnTensorDescriptor_t d = tensor(type, 3, 5, 7, 4);
  cudnnActivationMode_t modes[] = {CUDNN_ACTIVATION_RELU, CUDNN_ACTIVATION_SIGMOID,
                                   CUDNN_ACTIVATION_TANH};
  for (int m = 0; m < 3; m++) {
    double *x, *y0;
    uint16_t *hx = rnd_fmt(n, f, 4, &x), *hy = rnd_fmt(n, f, 1, &y0);
    void *dx = upload(hx, n * 2), *dy = upload(hy, n * 2);
    cudnnActivationDescriptor_t act;
    cudnnCreateActivationDescriptor(&act);
    cudnnSetActivationDescriptor(act, modes[m], CUDNN_PROPAGATE_NAN, 0);
    double *want = malloc(n * sizeof *want);
    uint16_t *got = malloc(n * 2);
    /* Out of place, y = act(x) + 0.5 y; then in place on x, x = 2 act(x). */
    float one = 1, half = 0.5f, two = 2, zero = 0;
    expect(cudnnActivationForward(dnn, act, &one, d, dx, &half, d, dy) == 0, "16-bit activation");
    for (long long i = 0; i < n; i++)
      want[i] = ref_act(modes[m], x[i]) + 0.5 * y0[i];
    download(got, dy, n * 2);
    close_fmt("cudnnActivationForward", got, want, n, f);
    expect(cudnnActivationForward(dnn, act, &two, d, dx, &zero, d, dx) == 0,
           "16-bit activation in place");
    for (long long i = 0; i < n; i++)
      want[i] = 2 * ref_act(modes[m], x[i]);
    download(got, dx, n * 2);
    close_fmt("cudnnActivationForward in place", got, want, n, f);
    cudnnDestroyActivationDescriptor(act);
    free(x), free(y0), free(hx), free(hy), free(want), free(got);
    cudaFree(dx), cudaFree(dy);
  }
  cudnnDestroyTensorDescriptor(d);
}

static void pool_case(Fmt f, cudnnPoolingMode_t mode, int win, int pad, int stride) {
  cudnnDataType_t type = dnn_type(f);
  int n = 2, c = 3, hw = 9, o = (hw + 2 * pad - win) / stride + 1;
  long long xn = (long long)n * c * hw * hw, yn = (long long)n * c * o * o;
  double *x, *y0;
  uint16_t *hx = rnd_fmt(xn, f, 4, &x), *hy = rnd_fmt(yn, f, 1, &y0);
  void *dx = upload(hx, xn * 2), *dy = upload(hy, yn * 2);
  cudnnTensorDescriptor_t xd = tensor(type, n, c, hw, hw), yd = tensor(type, n, c, o, o);
  cudnnPoolingDescriptor_t pd;
  cudnnCreatePoolingDescriptor(&pd);
  cudnnSetPooling2dDescriptor(pd, mode, CUDNN_PROPAGATE_NAN, win, win, pad, pad, stride, stride);
  float one = 1, zero = 0;
  expect(cudnnPoolingForward(dnn, pd, &one, xd, dx, &zero, yd, dy) == 0, "16-bit pooling");
  double *want = malloc(yn * sizeof *want);
  for (int p = 0; p < n * c; p++)
    for (int oh = 0; oh < o; oh++)
      for (int ow = 0; ow < o; ow++) {
        double best = -INFINITY, sum = 0;
        int count = 0;
        for (int a = 0; a < win; a++)
          for (int b = 0; b < win; b++) {
            int ih = oh * stride - pad + a, iw = ow * stride - pad + b;
            if (ih < 0 || ih >= hw || iw < 0 || iw >= hw)
              continue;
            double v = x[((long long)p * hw + ih) * hw + iw];
            best = v > best ? v : best;
            sum += v;
            count++;
          }
        double v = mode == CUDNN_POOLING_MAX                         ? best
                   : mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? sum / (win * win)
                                                                         : sum / count;
        want[((long long)p * o + oh) * o + ow] = v;
      }
  uint16_t *got = malloc(yn * 2);
  download(got, dy, yn * 2);
  char name[64];
  snprintf(name, sizeof name, "cudnnPoolingForward mode %d", mode);
  close_fmt(name, got, want, yn, f);
  cudnnDestroyPoolingDescriptor(pd);
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  free(x), free(y0), free(hx), free(hy), free(want), free(got);
  cudaFree(dx), cudaFree(dy);
}

/* C = op(alpha1 A, alpha2 B) + beta C, B a per-channel tensor, all of one
 * 16-bit type. */
static void op_tensor_case(Fmt f, cudnnOpTensorOp_t opkind) {
  cudnnDataType_t type = dnn_type(f);
  int n = 2, c = 6, hw = 5;
  long long an = (long long)n * c * hw * hw;
  double *a, *b, *c0;
  uint16_t *ha = rnd_fmt(an, f, 2, &a), *hb = rnd_fmt(c, f, 2, &b), *hc = rnd_fmt(an, f, 1, &c0);
  void *da = upload(ha, an * 2), *db = upload(hb, c * 2), *dc = upload(hc, an * 2);
  cudnnTensorDescriptor_t ad = tensor(type, n, c, hw, hw), bd = tensor(type, 1, c, 1, 1);
  cudnnTensorDescriptor_t cd = tensor(type, n, c, hw, hw);
  cudnnOpTensorDescriptor_t od;
  cudnnCreateOpTensorDescriptor(&od);
  cudnnSetOpTensorDescriptor(od, opkind, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN);
  float alpha1 = 1, alpha2 = 0.5f, beta = 0.25f;
  expect(cudnnOpTensor(dnn, od, &alpha1, ad, da, &alpha2, bd, db, &beta, cd, dc) == 0,
         "16-bit op tensor");
  double *want = malloc(an * sizeof *want);
  for (long long i = 0; i < an; i++) {
    double u = a[i], v = 0.5 * b[i / (hw * hw) % c];
    want[i] = (opkind == CUDNN_OP_TENSOR_ADD ? u + v : u > v ? u : v) + 0.25 * c0[i];
  }
  const char *name = opkind == CUDNN_OP_TENSOR_ADD ? "cudnnOpTensor add" : "cudnnOpTensor max";
  uint16_t *got = malloc(an * 2);
  download(got, dc, an * 2);
  close_fmt(name, got, want, an, f);
  free(got);
  cudnnDestroyOpTensorDescriptor(od);
  cudnnDestroyTensorDescriptor(ad);
  cudnnDestroyTensorDescriptor(bd);
  cudnnDestroyTensorDescriptor(cd);
  free(a), free(b), free(c0), free(ha), free(hb), free(hc), free(want);
  cudaFree(da), cudaFree(db), cudaFree(dc);
}

/* ---- reductions ---- */

typedef struct ReduceCase {
  const char *label;
  cudnnReduceTensorOp_t op;
  int a[4];          /* A's dims, NCHW */
  bool keep[4];      /* the dims C keeps; the others it reduces to 1 */
  int step, pad;     /* A a view: elements `step` apart along W, rows `pad` longer */
  int extra;         /* C channels [0, c) of a tensor of c + extra channels */
  float alpha, beta;
} ReduceCase;

/* cudnnReduceTensor with float compute, against loops in double on the
 * same 16-bit inputs. The gaps of a strided A hold values that would show
 * if read (NaN for a mean, 1000 for a max, -1000 for a min); C's channels
 * past its own must come back bit for bit. */
static void reduce_case(const ReduceCase *t, Fmt f) {
  cudnnDataType_t type = dnn_type(f);
  const int *a = t->a;
  int cd[4];
  for (int i = 0; i < 4; i++)
    cd[i] = t->keep[i] ? a[i] : 1;
  long long as[4], cs[4];
  as[3] = t->step;
  as[2] = (long long)a[3] * t->step + t->pad;
  as[1] = a[2] * as[2];
  as[0] = a[1] * as[1];
  int cw = cd[1] + t->extra;
  cs[3] = 1;
  cs[2] = cd[3];
  cs[1] = (long long)cd[2] * cd[3];
  cs[0] = cw * cs[1];
  long long an = a[0] * as[0], cn = cd[0] * cs[0];
  long long count = (long long)a[0] * a[1] * a[2] * a[3];
  long long outs = (long long)cd[0] * cd[1] * cd[2] * cd[3];

  double *x, *c0;
  uint16_t *hx = rnd_fmt(count, f, 4, &x), *hc = rnd_fmt(cn, f, 1, &c0);
  double gap = t->op == CUDNN_REDUCE_TENSOR_MAX ? 1000 : t->op == CUDNN_REDUCE_TENSOR_MIN ? -1000
                                                                                           : NAN;
  uint16_t *ha = malloc(an * 2);
  for (long long i = 0; i < an; i++)
    ha[i] = encode(round_to(gap, f), f);
  /* The reduction in double, into per-output accumulators. */
  double *sum = calloc(outs, sizeof *sum), *lo = malloc(outs * sizeof *lo);
  double *hi = malloc(outs * sizeof *hi);
  for (long long o = 0; o < outs; o++)
    lo[o] = INFINITY, hi[o] = -INFINITY;
  long long i = 0;
  for (int n = 0; n < a[0]; n++)
    for (int c = 0; c < a[1]; c++)
      for (int h = 0; h < a[2]; h++)
        for (int w = 0; w < a[3]; w++, i++) {
          ha[n * as[0] + c * as[1] + h * as[2] + w * as[3]] = hx[i];
          int k[4] = {n, c, h, w};
          long long o = 0;
          for (int d = 0; d < 4; d++)
            o = o * cd[d] + (t->keep[d] ? k[d] : 0);
          sum[o] += x[i];
          lo[o] = x[i] < lo[o] ? x[i] : lo[o];
          hi[o] = x[i] > hi[o] ? x[i] : hi[o];
        }
  double *want = malloc(outs * sizeof *want);
  long long *at = malloc(outs * sizeof *at); /* each output's place in C's buffer */
  long long o = 0;
  for (int n = 0; n < cd[0]; n++)
    for (int c = 0; c < cd[1]; c++)
      for (int h = 0; h < cd[2]; h++)
        for (int w = 0; w < cd[3]; w++, o++) {
          at[o] = n * cs[0] + c * cs[1] + h * cs[2] + w * cs[3];
          double v = t->op == CUDNN_REDUCE_TENSOR_MAX   ? hi[o]
                     : t->op == CUDNN_REDUCE_TENSOR_MIN ? lo[o]
                                                        : sum[o] * outs / count;
          want[o] = t->alpha * v + (t->beta != 0 ? t->beta * c0[at[o]] : 0);
        }

  cudnnTensorDescriptor_t ad, cdd, af, cf;
  cudnnCreateTensorDescriptor(&ad);
  cudnnCreateTensorDescriptor(&cdd);
  cudnnCreateTensorDescriptor(&af);
  cudnnCreateTensorDescriptor(&cf);
  expect(cudnnSetTensor4dDescriptorEx(ad, type, a[0], a[1], a[2], a[3], (int)as[0], (int)as[1],
                                      (int)as[2], (int)as[3]) == 0,
         "16-bit A");
  expect(cudnnSetTensor4dDescriptorEx(cdd, type, cd[0], cd[1], cd[2], cd[3], (int)cs[0],
                                      (int)cs[1], (int)cs[2], (int)cs[3]) == 0,
         "16-bit C");
  cudnnSetTensor4dDescriptorEx(af, CUDNN_DATA_FLOAT, a[0], a[1], a[2], a[3], (int)as[0],
                               (int)as[1], (int)as[2], (int)as[3]);
  cudnnSetTensor4dDescriptorEx(cf, CUDNN_DATA_FLOAT, cd[0], cd[1], cd[2], cd[3], (int)cs[0],
                               (int)cs[1], (int)cs[2], (int)cs[3]);
  cudnnReduceTensorDescriptor_t rd;
  cudnnCreateReduceTensorDescriptor(&rd);
  expect(cudnnSetReduceTensorDescriptor(rd, t->op, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN,
                                        CUDNN_REDUCE_TENSOR_NO_INDICES, CUDNN_32BIT_INDICES) == 0,
         "reduce descriptor");
  /* The size queries take 16-bit descriptors, and size as for float. */
  size_t ws = 1, wsf = 2, isize = 1;
  expect(cudnnGetReductionWorkspaceSize(dnn, rd, ad, cdd, &ws) == 0, "16-bit workspace size");
  expect(cudnnGetReductionWorkspaceSize(dnn, rd, af, cf, &wsf) == 0 && ws == wsf && ws > 0,
         "16-bit workspace size is float's");
  expect(cudnnGetReductionIndicesSize(dnn, rd, ad, cdd, &isize) == 0 && isize == 0,
         "16-bit indices size");
  void *da = upload(ha, an * 2), *dc = upload(hc, cn * 2), *dws = NULL;
  cudaMalloc(&dws, ws);
  char name[128];
  snprintf(name, sizeof name, "cudnnReduceTensor %s", t->label);
  cudnnStatus_t st = cudnnReduceTensor(dnn, rd, NULL, 0, dws, ws, &t->alpha, ad, da, &t->beta,
                                       cdd, dc);
  if (st != CUDNN_STATUS_SUCCESS)
    fail("%s (%s): %s", name, format(f).name, cudnnGetErrorString(st));
  uint16_t *got = malloc(cn * 2), *own = malloc(outs * 2);
  download(got, dc, cn * 2);
  for (o = 0; o < outs; o++)
    own[o] = got[at[o]];
  close_fmt(name, own, want, outs, f);
  for (long long j = 0; j < cn; j++)
    if (j / cs[1] % cw >= cd[1] && got[j] != hc[j]) {
      fail("%s (%s): element %lld past C's channels changed", name, format(f).name, j);
      break;
    }
  cudnnDestroyReduceTensorDescriptor(rd);
  cudnnDestroyTensorDescriptor(ad);
  cudnnDestroyTensorDescriptor(cdd);
  cudnnDestroyTensorDescriptor(af);
  cudnnDestroyTensorDescriptor(cf);
  free(x), free(c0), free(hx), free(hc), free(ha), free(sum), free(lo), free(hi), free(want);
  free(at), free(got), free(own);
  cudaFree(da), cudaFree(dc), cudaFree(dws);
}

static void test_reductions(Fmt f) {
  const cudnnReduceTensorOp_t AVG = CUDNN_REDUCE_TENSOR_AVG, MAX = CUDNN_REDUCE_TENSOR_MAX,
                              MIN = CUDNN_REDUCE_TENSOR_MIN;
  const ReduceCase cases[] = {
    {"GlobalAveragePool", AVG, {2, 5, 7, 7}, {1, 1, 0, 0}, 1, 0, 0, 1, 0},
    {"GlobalAveragePool 32x32", AVG, {2, 16, 32, 32}, {1, 1, 0, 0}, 1, 0, 0, 1, 0},
    {"ReduceMean last axis", AVG, {2, 3, 4, 9}, {1, 1, 1, 0}, 1, 0, 0, 1, 0},
    {"ReduceMean everything", AVG, {3, 4, 5, 6}, {0, 0, 0, 0}, 1, 0, 0, 1, 0},
    {"GlobalMaxPool", MAX, {2, 4, 6, 5}, {1, 1, 0, 0}, 1, 0, 0, 1, 0},
    {"ReduceMax last axis", MAX, {2, 3, 5, 8}, {1, 1, 1, 0}, 1, 0, 0, 1, 0},
    {"ReduceMin channels", MIN, {2, 6, 3, 4}, {1, 0, 1, 1}, 1, 0, 0, 1, 0},
    {"mean of a strided A into a view, beta", AVG, {2, 5, 6, 7}, {1, 1, 0, 0}, 2, 3, 2, 0.5f,
     -0.75f},
    {"max of a strided A, beta", MAX, {2, 3, 5, 8}, {1, 1, 1, 0}, 3, 1, 1, 1, 0.5f},
    {"min of a strided A over a plane, beta", MIN, {3, 4, 4, 5}, {1, 1, 0, 0}, 2, 5, 0, 2, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    reduce_case(&cases[i], f);
}

/* ---- batch normalisation (inference) ---- */

typedef struct BnCase {
  const char *label;
  cudnnBatchNormMode_t mode;
  int rank;
  int d[5];          /* x's and y's dims */
  int xstep, xpad;   /* x a view: elements `xstep` apart along the last dim, rows `xpad` longer */
  int yextra;        /* y channels [0, c) of a tensor of c + yextra channels */
  float alpha, beta;
} BnCase;

/* Packed strides of dims, with the last dim `step` apart and each row
 * `pad` longer, and dim 1 widened to `c1`; returns the elements spanned. */
static long long view_strides(int rank, const int *d, int step, int pad, int c1, int *s) {
  long long st = (long long)d[rank - 1] * step + pad;
  s[rank - 1] = step;
  for (int i = rank - 2; i >= 0; i--) {
    s[i] = (int)st;
    st *= i == 1 ? c1 : d[i];
  }
  return st;
}

/* cudnnBatchNormalizationForwardInference on 16-bit x and y with FLOAT
 * parameters, against y = alpha (g (x - m) / sqrt(v + eps) + b) + beta y0
 * in double on the same 16-bit x and y0. The gaps of a strided x hold NaN,
 * which would show if read; y's channels past its own must come back bit
 * for bit. */
static void bn_case(const BnCase *t, Fmt f) {
  cudnnDataType_t type = dnn_type(f);
  int r = t->rank, c = t->d[1], pd[5], xs[5], ys[5], ps[5];
  bool spatial = t->mode != CUDNN_BATCHNORM_PER_ACTIVATION;
  long long count = 1, pn = 1;
  for (int i = 0; i < r; i++) {
    pd[i] = i == 1 ? c : i == 0 || spatial ? 1 : t->d[i];
    count *= t->d[i];
    pn *= pd[i];
  }
  long long xn = view_strides(r, t->d, t->xstep, t->xpad, c, xs);
  long long yn = view_strides(r, t->d, 1, 0, c + t->yextra, ys);
  view_strides(r, pd, 1, 0, c, ps);
  double *xv, *y0;
  uint16_t *hx = rnd_fmt(count, f, 4, &xv), *hy = rnd_fmt(yn, f, 2, &y0);
  uint16_t *hxa = malloc(xn * 2);
  for (long long i = 0; i < xn; i++)
    hxa[i] = format(f).nan;
  float *g = malloc(pn * 4), *b = malloc(pn * 4), *m = malloc(pn * 4), *v = malloc(pn * 4);
  for (long long i = 0; i < pn; i++) {
    g[i] = 2 * rnd(), b[i] = rnd(), m[i] = rnd();
    v[i] = fabsf(rnd()) + 0.1f;
  }
  double eps = 1e-3;
  double *want = malloc(count * sizeof *want);
  long long *at = malloc(count * sizeof *at); /* each element's place in y's buffer */
  int idx[5] = {0};
  for (long long i = 0; i < count; i++) {
    long long xo = 0, yo = 0, po = 0;
    for (int k = 0; k < r; k++) {
      xo += (long long)idx[k] * xs[k];
      yo += (long long)idx[k] * ys[k];
      po += (long long)(pd[k] == 1 ? 0 : idx[k]) * ps[k];
    }
    hxa[xo] = hx[i];
    at[i] = yo;
    double bn = g[po] * (xv[i] - m[po]) / sqrt((double)v[po] + eps) + b[po];
    want[i] = t->alpha * bn + (t->beta != 0 ? t->beta * y0[yo] : 0);
    for (int k = r - 1; k >= 0 && ++idx[k] == t->d[k]; k--)
      idx[k] = 0;
  }
  cudnnTensorDescriptor_t xd, yd, pdd;
  cudnnCreateTensorDescriptor(&xd);
  cudnnCreateTensorDescriptor(&yd);
  cudnnCreateTensorDescriptor(&pdd);
  expect(cudnnSetTensorNdDescriptor(xd, type, r, t->d, xs) == 0, "16-bit bn x");
  expect(cudnnSetTensorNdDescriptor(yd, type, r, t->d, ys) == 0, "16-bit bn y");
  /* The parameters' descriptor as cuDNN derives it for 16-bit data: FLOAT. */
  expect(cudnnSetTensorNdDescriptor(pdd, CUDNN_DATA_FLOAT, r, pd, ps) == 0, "bn params");
  void *dx = upload(hxa, xn * 2), *dy = upload(hy, yn * 2);
  void *dg = upload(g, pn * 4), *db = upload(b, pn * 4), *dm = upload(m, pn * 4);
  void *dv = upload(v, pn * 4);
  char name[160];
  snprintf(name, sizeof name, "cudnnBatchNormalizationForwardInference %s", t->label);
  cudnnStatus_t st = cudnnBatchNormalizationForwardInference(
      dnn, t->mode, &t->alpha, &t->beta, xd, dx, yd, dy, pdd, dg, db, dm, dv, eps);
  if (st != CUDNN_STATUS_SUCCESS)
    fail("%s (%s): %s", name, format(f).name, cudnnGetErrorString(st));
  uint16_t *got = malloc(yn * 2), *own = malloc(count * 2);
  download(got, dy, yn * 2);
  for (long long i = 0; i < count; i++)
    own[i] = got[at[i]];
  close_fmt(name, own, want, count, f);
  for (long long j = 0; j < yn; j++)
    if (j / ys[1] % (c + t->yextra) >= c && got[j] != hy[j]) {
      fail("%s (%s): element %lld past y's channels changed", name, format(f).name, j);
      break;
    }
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyTensorDescriptor(pdd);
  free(xv), free(y0), free(hx), free(hy), free(hxa), free(g), free(b), free(m), free(v);
  free(want), free(at), free(got), free(own);
  cudaFree(dx), cudaFree(dy), cudaFree(dg), cudaFree(db), cudaFree(dm), cudaFree(dv);
}

static void test_batch_norms(Fmt f) {
  const cudnnBatchNormMode_t SP = CUDNN_BATCHNORM_SPATIAL, PA = CUDNN_BATCHNORM_PER_ACTIVATION;
  const BnCase cases[] = {
    {"spatial 4d", SP, 4, {2, 5, 6, 7}, 1, 0, 0, 1, 0},
    {"spatial 5d", SP, 5, {2, 3, 4, 5, 6}, 1, 0, 0, 1, 0},
    {"spatial persistent 4d", CUDNN_BATCHNORM_SPATIAL_PERSISTENT, 4, {3, 4, 5, 5}, 1, 0, 0, 1, 0},
    {"per activation 4d", PA, 4, {3, 4, 3, 5}, 1, 0, 0, 1, 0},
    {"spatial 4d, alpha, beta", SP, 4, {2, 6, 5, 4}, 1, 0, 0, 0.5f, -0.75f},
    {"spatial 4d, strided x into a view of y, beta", SP, 4, {2, 5, 4, 6}, 2, 3, 2, 1.5f, 0.5f},
    {"spatial 5d, strided x into a view of y, beta", SP, 5, {2, 3, 3, 4, 5}, 3, 1, 1, 1, 1},
    {"per activation 5d, strided x, beta", PA, 5, {2, 3, 2, 3, 4}, 2, 2, 0, 1, -1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    bn_case(&cases[i], f);
}

/* ---- cuBLAS ---- */

typedef struct GemmCase {
  bool ta, tb;
  int m, n, k, pad, batch;
  float alpha, beta;
  bool float_c;      /* Ctype CUDA_R_32F */
  bool compute16;    /* CUBLAS_COMPUTE_16F, __half scalars */
  bool shared_a;     /* strideA 0: every batch entry uses one A */
} GemmCase;

static void gemm_case(const GemmCase *t, Fmt f) {
  char name[160];
  snprintf(name, sizeof name, "%s %s %c%c m%d n%d k%d pad%d batch%d alpha %g beta %g%s%s%s",
           t->batch > 1 ? "cublasGemmStridedBatchedEx" : "cublasGemmEx", format(f).name,
           t->ta ? 'T' : 'N', t->tb ? 'T' : 'N', t->m, t->n, t->k, t->pad, t->batch, t->alpha,
           t->beta, t->float_c ? " C float" : "", t->compute16 ? " compute 16F" : "",
           t->shared_a ? " shared A" : "");
  int arows = t->ta ? t->k : t->m, acols = t->ta ? t->m : t->k;
  int brows = t->tb ? t->n : t->k, bcols = t->tb ? t->k : t->n;
  int lda = arows + t->pad, ldb = brows + t->pad, ldc = t->m + t->pad;
  long long sa = t->shared_a ? 0 : (long long)lda * acols + 3, sb = (long long)ldb * bcols + 5;
  long long sc = (long long)ldc * t->n + 7;
  long long an = (t->shared_a ? 1 : t->batch) * (sa ? sa : (long long)lda * acols);
  long long bn = t->batch * sb, cn = t->batch * sc;
  double *a, *b, *c0;
  uint16_t *ha = rnd_fmt(an, f, 1, &a), *hb = rnd_fmt(bn, f, 1, &b), *hc = rnd_fmt(cn, f, 1, &c0);
  float *fc = malloc(cn * sizeof *fc);
  for (long long i = 0; i < cn; i++)
    fc[i] = (float)c0[i];
  void *da = upload(ha, an * 2), *db = upload(hb, bn * 2);
  void *dc = t->float_c ? upload(fc, cn * 4) : upload(hc, cn * 2);
  /* Expected: C's gaps keep their old values. */
  double *want = malloc(cn * sizeof *want);
  memcpy(want, c0, cn * sizeof *want);
  for (int e = 0; e < t->batch; e++)
    for (int j = 0; j < t->n; j++)
      for (int i = 0; i < t->m; i++) {
        double sum = 0;
        for (int p = 0; p < t->k; p++) {
          double av = t->ta ? a[e * sa + i * lda + p] : a[e * sa + p * lda + i];
          double bv = t->tb ? b[e * sb + p * ldb + j] : b[e * sb + j * ldb + p];
          sum += av * bv;
        }
        double *cv = &want[e * sc + (long long)j * ldc + i];
        *cv = t->alpha * sum + (t->beta != 0 ? t->beta * *cv : 0);
      }
  cudaDataType type = blas_type(f), ctype = t->float_c ? CUDA_R_32F : type;
  cublasComputeType_t compute = t->compute16 ? CUBLAS_COMPUTE_16F : CUBLAS_COMPUTE_32F;
  uint16_t alpha16 = encode(t->alpha, F16), beta16 = encode(t->beta, F16);
  const void *alpha = t->compute16 ? (const void *)&alpha16 : (const void *)&t->alpha;
  const void *beta = t->compute16 ? (const void *)&beta16 : (const void *)&t->beta;
  cublasOperation_t oa = t->ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = t->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t st;
  if (t->batch == 1)
    st = cublasGemmEx(blas, oa, ob, t->m, t->n, t->k, alpha, da, type, lda, db, type, ldb, beta,
                      dc, ctype, ldc, compute, CUBLAS_GEMM_DEFAULT);
  else
    st = cublasGemmStridedBatchedEx(blas, oa, ob, t->m, t->n, t->k, alpha, da, type, lda, sa, db,
                                    type, ldb, sb, beta, dc, ctype, ldc, sc, t->batch, compute,
                                    CUBLAS_GEMM_DEFAULT_TENSOR_OP);
  if (st != CUBLAS_STATUS_SUCCESS)
    fail("%s: %s", name, cublasGetStatusString(st));
  if (t->float_c) {
    float *got = malloc(cn * sizeof *got), *wantf = malloc(cn * sizeof *wantf);
    download(got, dc, cn * 4);
    for (long long i = 0; i < cn; i++)
      wantf[i] = (float)want[i];
    close_arrays(name, got, wantf, cn, 1e-5f);
    free(got), free(wantf);
  } else {
    uint16_t *got = malloc(cn * 2);
    download(got, dc, cn * 2);
    close_fmt(name, got, want, cn, f);
    free(got);
  }
  free(a), free(b), free(c0), free(ha), free(hb), free(hc), free(fc), free(want);
  cudaFree(da), cudaFree(db), cudaFree(dc);
}

static void test_gemms(Fmt f) {
  int shapes[][3] = {{7, 5, 9}, {33, 17, 12}, {70, 90, 40}};
  for (int t = 0; t < 4; t++)
    for (int s = 0; s < 3; s++) {
      GemmCase g = {.ta = t & 1, .tb = t & 2, .m = shapes[s][0], .n = shapes[s][1],
                    .k = shapes[s][2], .pad = s, .batch = 1, .alpha = 1, .beta = 0};
      gemm_case(&g, f);
      g.alpha = 0.75f;
      g.beta = -0.5f;
      g.batch = 3;
      gemm_case(&g, f);
    }
  GemmCase mixed = {.m = 9, .n = 11, .k = 13, .pad = 1, .batch = 1, .alpha = 0.5f, .beta = 1,
                    .float_c = true};
  gemm_case(&mixed, f);
  GemmCase shared = {.tb = true, .m = 16, .n = 8, .k = 12, .batch = 4, .alpha = 1, .beta = 0,
                     .shared_a = true};
  gemm_case(&shared, f);
  GemmCase empty_k = {.m = 4, .n = 3, .k = 0, .pad = 2, .batch = 2, .alpha = 1, .beta = 0.5f};
  gemm_case(&empty_k, f);
  if (f == F16) {
    GemmCase h = {.ta = true, .m = 10, .n = 6, .k = 8, .batch = 1, .alpha = 0.5f, .beta = 2,
                  .compute16 = true};
    gemm_case(&h, f);
  }
}

/* ---- what cuDNN and cuBLAS refuse ---- */

static void expect_dnn(cudnnStatus_t got, cudnnStatus_t want, const char *what) {
  if (got != want)
    fail("%s: %s, expected %s", what, cudnnGetErrorString(got), cudnnGetErrorString(want));
}

static void expect_blas(cublasStatus_t got, cublasStatus_t want, const char *what) {
  if (got != want)
    fail("%s: %s, expected %s", what, cublasGetStatusName(got), cublasGetStatusName(want));
}

/* An NHWC filter goes with 16-bit data whose channels are innermost; a
   float one, NCHW data, or a filter that is not 4-D is refused. */
static void test_nhwc_refusals(void) {
  const cudnnStatus_t LAYOUT = CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
  void *buf = NULL, *ws = NULL;
  cudaMalloc(&buf, 1 << 16);
  cudaMemset(buf, 0, 1 << 16);
  cudaMalloc(&ws, 1 << 20);
  float one = 1, zero = 0;
  cudnnTensorDescriptor_t nchw = tensor(CUDNN_DATA_HALF, 1, 4, 5, 5), nhwc, f32;
  cudnnCreateTensorDescriptor(&nhwc);
  cudnnSetTensor4dDescriptor(nhwc, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, 1, 4, 5, 5);
  cudnnCreateTensorDescriptor(&f32);
  cudnnSetTensor4dDescriptor(f32, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 1, 4, 5, 5);
  cudnnFilterDescriptor_t wh, wf, w5;
  cudnnCreateFilterDescriptor(&wh);
  cudnnCreateFilterDescriptor(&wf);
  cudnnCreateFilterDescriptor(&w5);
  cudnnSetFilter4dDescriptor(wh, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, 4, 4, 3, 3);
  cudnnSetFilter4dDescriptor(wf, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, 4, 4, 3, 3);
  expect_dnn(cudnnSetFilterNdDescriptor(w5, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, 5,
                                        (const int[]){4, 4, 3, 3, 3}),
             LAYOUT, "5-D NHWC filter");
  cudnnConvolutionDescriptor_t cd;
  cudnnCreateConvolutionDescriptor(&cd);
  cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  expect_dnn(cudnnConvolutionForward(dnn, &one, nhwc, buf, wh, buf, cd, algo, ws, 1 << 20, &zero,
                                     nhwc, buf),
             CUDNN_STATUS_SUCCESS, "NHWC filter, NHWC data");
  expect_dnn(cudnnConvolutionForward(dnn, &one, nchw, buf, wh, buf, cd, algo, ws, 1 << 20, &zero,
                                     nhwc, buf),
             LAYOUT, "NHWC filter, NCHW x");
  expect_dnn(cudnnConvolutionForward(dnn, &one, nhwc, buf, wh, buf, cd, algo, ws, 1 << 20, &zero,
                                     nchw, buf),
             LAYOUT, "NHWC filter, NCHW y");
  expect_dnn(cudnnConvolutionForward(dnn, &one, f32, buf, wf, buf, cd, algo, ws, 1 << 20, &zero,
                                     f32, buf),
             LAYOUT, "NHWC filter, float data");
  /* Channels 0-3 of an 8-channel NHWC tensor, as a channel Concat's slice:
     its pixels are 8 apart, and cuDNN lists no algorithm for it, as input
     or output (all NOT_SUPPORTED, cuDNN 9.19 on an H200). */
  cudnnTensorDescriptor_t gapped;
  cudnnCreateTensorDescriptor(&gapped);
  cudnnSetTensorNdDescriptor(gapped, CUDNN_DATA_HALF, 4, (const int[]){1, 4, 5, 5},
                             (const int[]){200, 1, 40, 8});
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  int count = 0, usable = 0;
  cudnnTensorDescriptor_t xs[3] = {nhwc, gapped, nhwc}, ys[3] = {nhwc, nhwc, gapped};
  for (int k = 0; k < 3; k++) {
    expect_dnn(cudnnGetConvolutionForwardAlgorithm_v7(dnn, xs[k], wh, cd, ys[k], 8, &count, perf),
               CUDNN_STATUS_SUCCESS, "heuristics, NHWC");
    usable = 0;
    for (int i = 0; i < count; i++)
      usable += perf[i].status == CUDNN_STATUS_SUCCESS;
    if ((usable > 0) != (k == 0))
      fail("heuristics, %s: %d usable algorithms", k == 0 ? "packed NHWC" : "gapped NHWC", usable);
  }
  expect_dnn(cudnnConvolutionForward(dnn, &one, gapped, buf, wh, buf, cd, algo, ws, 1 << 20, &zero,
                                     nhwc, buf),
             CUDNN_STATUS_NOT_SUPPORTED, "NHWC filter, x a channel slice");
  expect_dnn(cudnnConvolutionForward(dnn, &one, nhwc, buf, wh, buf, cd, algo, ws, 1 << 20, &zero,
                                     gapped, buf),
             CUDNN_STATUS_NOT_SUPPORTED, "NHWC filter, y a channel slice");
  cudnnDestroyTensorDescriptor(gapped);
  cudnnTensorDescriptor_t bias = tensor(CUDNN_DATA_HALF, 1, 4, 1, 1);
  cudnnActivationDescriptor_t relu;
  cudnnCreateActivationDescriptor(&relu);
  cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0);
  cudnnConvolutionFwdAlgo_t precomp = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  expect_dnn(cudnnConvolutionBiasActivationForward(dnn, &one, nhwc, buf, wh, buf, cd, precomp, ws,
                                                   1 << 20, &one, nchw, buf, bias, buf, relu,
                                                   nhwc, buf),
             LAYOUT, "NHWC filter, NCHW residual");
  cudaDeviceSynchronize();
  cudnnDestroyTensorDescriptor(bias);
  cudnnDestroyActivationDescriptor(relu);
  cudnnDestroyTensorDescriptor(nchw);
  cudnnDestroyTensorDescriptor(nhwc);
  cudnnDestroyTensorDescriptor(f32);
  cudnnDestroyFilterDescriptor(wh);
  cudnnDestroyFilterDescriptor(wf);
  cudnnDestroyFilterDescriptor(w5);
  cudnnDestroyConvolutionDescriptor(cd);
  cudaFree(buf), cudaFree(ws);
}

static void test_dnn_refusals(void) {
  const cudnnStatus_t TYPE = CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, BAD = CUDNN_STATUS_BAD_PARAM;
  void *buf = NULL, *ws = NULL;
  cudaMalloc(&buf, 1 << 16);
  cudaMemset(buf, 0, 1 << 16);
  cudaMalloc(&ws, 1 << 20);
  float one = 1, zero = 0;
  cudnnTensorDescriptor_t xh = tensor(CUDNN_DATA_HALF, 1, 4, 5, 5);
  cudnnTensorDescriptor_t yh = tensor(CUDNN_DATA_HALF, 1, 4, 5, 5);
  cudnnTensorDescriptor_t xb = tensor(CUDNN_DATA_BFLOAT16, 1, 4, 5, 5);
  cudnnTensorDescriptor_t yb = tensor(CUDNN_DATA_BFLOAT16, 1, 4, 5, 5);
  cudnnTensorDescriptor_t yf = tensor(CUDNN_DATA_FLOAT, 1, 4, 5, 5);
  cudnnTensorDescriptor_t bh = tensor(CUDNN_DATA_HALF, 1, 4, 1, 1);
  cudnnTensorDescriptor_t bf = tensor(CUDNN_DATA_FLOAT, 1, 4, 1, 1);
  cudnnTensorDescriptor_t i8 = tensor(CUDNN_DATA_INT8, 1, 4, 5, 5);
  cudnnFilterDescriptor_t wh, wb, wf;
  cudnnCreateFilterDescriptor(&wh);
  cudnnCreateFilterDescriptor(&wb);
  cudnnCreateFilterDescriptor(&wf);
  cudnnSetFilter4dDescriptor(wh, CUDNN_DATA_HALF, CUDNN_TENSOR_NCHW, 4, 4, 3, 3);
  cudnnSetFilter4dDescriptor(wb, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NCHW, 4, 4, 3, 3);
  cudnnSetFilter4dDescriptor(wf, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 4, 3, 3);
  cudnnFilterDescriptor_t w8;
  cudnnCreateFilterDescriptor(&w8);
  expect_dnn(cudnnSetFilter4dDescriptor(w8, CUDNN_DATA_INT32, CUDNN_TENSOR_NCHW, 4, 4, 3, 3), TYPE,
             "INT32 filter");
  cudnnConvolutionDescriptor_t cfl, chalf, cbf;
  cudnnCreateConvolutionDescriptor(&cfl);
  cudnnCreateConvolutionDescriptor(&chalf);
  cudnnCreateConvolutionDescriptor(&cbf);
  cudnnSetConvolution2dDescriptor(cfl, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                  CUDNN_DATA_FLOAT);
  cudnnSetConvolution2dDescriptor(chalf, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                  CUDNN_DATA_HALF);
  expect_dnn(cudnnSetConvolution2dDescriptor(cbf, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                             CUDNN_DATA_BFLOAT16),
             TYPE, "BFLOAT16 compute type");
  const cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  const cudnnConvolutionFwdAlgo_t precomp = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  /* The convolution's types: x, w and y of one type; HALF compute for HALF
   * data only. */
  expect_dnn(cudnnConvolutionForward(dnn, &one, xh, buf, wh, buf, cfl, algo, ws, 1 << 20, &zero,
                                     yh, buf),
             CUDNN_STATUS_SUCCESS, "PSEUDO_HALF convolution");
  expect_dnn(cudnnConvolutionForward(dnn, &one, xh, buf, wh, buf, chalf, algo, ws, 1 << 20, &zero,
                                     yh, buf),
             CUDNN_STATUS_SUCCESS, "TRUE_HALF convolution");
  expect_dnn(cudnnConvolutionForward(dnn, &one, xh, buf, wf, buf, cfl, algo, ws, 1 << 20, &zero,
                                     yh, buf),
             TYPE, "half x with a float filter");
  expect_dnn(cudnnConvolutionForward(dnn, &one, xh, buf, wb, buf, cfl, algo, ws, 1 << 20, &zero,
                                     yh, buf),
             TYPE, "half x with a bfloat16 filter");
  expect_dnn(cudnnConvolutionForward(dnn, &one, xh, buf, wh, buf, cfl, algo, ws, 1 << 20, &zero,
                                     yb, buf),
             TYPE, "half x into bfloat16 y");
  expect_dnn(cudnnConvolutionForward(dnn, &one, xh, buf, wh, buf, cfl, algo, ws, 1 << 20, &zero,
                                     yf, buf),
             TYPE, "half x into float y");
  expect_dnn(cudnnConvolutionForward(dnn, &one, xb, buf, wb, buf, chalf, algo, ws, 1 << 20, &zero,
                                     yb, buf),
             TYPE, "bfloat16 data with HALF compute");
  expect_dnn(cudnnConvolutionForward(dnn, &one, yf, buf, wf, buf, chalf, algo, ws, 1 << 20, &zero,
                                     yf, buf),
             TYPE, "float data with HALF compute");
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  int count;
  expect_dnn(cudnnGetConvolutionForwardAlgorithm_v7(dnn, xh, wf, cfl, yh, 8, &count, perf), TYPE,
             "heuristics for half x and a float filter");
  size_t size;
  expect_dnn(cudnnGetConvolutionForwardWorkspaceSize(dnn, xb, wb, chalf, yb, algo, &size), TYPE,
             "workspace for bfloat16 data with HALF compute");
  /* The fused form: z and the bias of y's type, FLOAT compute. */
  cudnnActivationDescriptor_t relu;
  cudnnCreateActivationDescriptor(&relu);
  cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0);
  expect_dnn(cudnnConvolutionBiasActivationForward(dnn, &one, xh, buf, wh, buf, cfl, precomp, ws,
                                                   1 << 20, &zero, yh, buf, bh, buf, relu, yh,
                                                   buf),
             CUDNN_STATUS_SUCCESS, "fused half convolution");
  expect_dnn(cudnnConvolutionBiasActivationForward(dnn, &one, xh, buf, wh, buf, cfl, precomp, ws,
                                                   1 << 20, &zero, yh, buf, bf, buf, relu, yh,
                                                   buf),
             TYPE, "fused half convolution with a float bias");
  expect_dnn(cudnnConvolutionBiasActivationForward(dnn, &one, xh, buf, wh, buf, cfl, precomp, ws,
                                                   1 << 20, &zero, yf, buf, bh, buf, relu, yh,
                                                   buf),
             TYPE, "fused half convolution with a float z");
  expect_dnn(cudnnConvolutionBiasActivationForward(dnn, &one, xh, buf, wh, buf, chalf, precomp, ws,
                                                   1 << 20, &zero, yh, buf, bh, buf, relu, yh,
                                                   buf),
             TYPE, "fused half convolution with HALF compute");
  /* Backward data stays float. */
  expect_dnn(cudnnConvolutionBackwardData(dnn, &one, wh, buf, yh, buf, cfl,
                                          CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, ws, 1 << 20, &zero,
                                          xh, buf),
             TYPE, "half backward data");
  /* Element-wise and pooling: one type for input and output. */
  expect_dnn(cudnnAddTensor(dnn, &one, bf, buf, &one, yh, buf), BAD, "float bias onto half");
  expect_dnn(cudnnAddTensor(dnn, &one, yh, buf, &one, yb, buf), BAD, "half onto bfloat16");
  expect_dnn(cudnnAddTensor(dnn, &one, i8, buf, &one, i8, buf), TYPE, "INT8 add");
  expect_dnn(cudnnActivationForward(dnn, relu, &one, xh, buf, &zero, yf, buf), BAD,
             "half activation into float");
  expect_dnn(cudnnActivationForward(dnn, relu, &one, i8, buf, &zero, i8, buf), TYPE,
             "INT8 activation");
  cudnnPoolingDescriptor_t pool;
  cudnnCreatePoolingDescriptor(&pool);
  cudnnSetPooling2dDescriptor(pool, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, 1, 1, 0, 0, 1, 1);
  expect_dnn(cudnnPoolingForward(dnn, pool, &one, xb, buf, &zero, yh, buf), BAD,
             "bfloat16 pooling into half");
  cudnnOpTensorDescriptor_t add;
  cudnnCreateOpTensorDescriptor(&add);
  cudnnSetOpTensorDescriptor(add, CUDNN_OP_TENSOR_ADD, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN);
  expect_dnn(cudnnOpTensor(dnn, add, &one, xh, buf, &one, xb, buf, &zero, yh, buf), TYPE,
             "op tensor on half and bfloat16");
  expect_dnn(cudnnOpTensor(dnn, add, &one, xh, buf, &one, yh, buf, &zero, yb, buf), TYPE,
             "op tensor from half into bfloat16");
  expect_dnn(cudnnOpTensor(dnn, add, &one, xb, buf, &one, yb, buf, &zero, yh, buf), TYPE,
             "op tensor from bfloat16 into half");
  expect_dnn(cudnnOpTensor(dnn, add, &one, yf, buf, &one, yh, buf, &zero, yh, buf), TYPE,
             "op tensor on float and half");
  expect_dnn(cudnnOpTensor(dnn, add, &one, xh, buf, &one, yh, buf, &zero, yf, buf), TYPE,
             "op tensor from half into float");
  expect_dnn(cudnnOpTensor(dnn, add, &one, yf, buf, &one, yf, buf, &zero, yb, buf),
             CUDNN_STATUS_SUCCESS, "op tensor from float into bfloat16");
  /* Not computed for 16-bit data by this runtime. */
  expect_dnn(cudnnSoftmaxForward(dnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, xh,
                                 buf, &zero, yh, buf),
             TYPE, "half softmax");
  cudaDeviceSynchronize();
  cudnnDestroyOpTensorDescriptor(add);
  cudnnDestroyPoolingDescriptor(pool);
  cudnnDestroyActivationDescriptor(relu);
  cudnnDestroyConvolutionDescriptor(cfl);
  cudnnDestroyConvolutionDescriptor(chalf);
  cudnnDestroyConvolutionDescriptor(cbf);
  cudnnDestroyFilterDescriptor(wh);
  cudnnDestroyFilterDescriptor(wb);
  cudnnDestroyFilterDescriptor(wf);
  cudnnDestroyFilterDescriptor(w8);
  cudnnTensorDescriptor_t all[] = {xh, yh, xb, yb, yf, bh, bf, i8};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    cudnnDestroyTensorDescriptor(all[i]);
  cudaFree(buf);
  cudaFree(ws);
}

/* cudnnReduceTensor: A and C of one 16-bit type with FLOAT compute, no
 * indices; the size queries take any of them. */
static void test_reduce_refusals(void) {
  const cudnnStatus_t OK = CUDNN_STATUS_SUCCESS, TYPE = CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  void *buf = NULL, *ws = NULL, *idx = NULL;
  cudaMalloc(&buf, 1 << 16);
  cudaMemset(buf, 0, 1 << 16);
  cudaMalloc(&ws, 1 << 20);
  cudaMalloc(&idx, 1 << 10);
  float one = 1, zero = 0;
  cudnnTensorDescriptor_t ah = tensor(CUDNN_DATA_HALF, 2, 4, 5, 5);
  cudnnTensorDescriptor_t ch = tensor(CUDNN_DATA_HALF, 2, 4, 1, 1);
  cudnnTensorDescriptor_t ab = tensor(CUDNN_DATA_BFLOAT16, 2, 4, 5, 5);
  cudnnTensorDescriptor_t cb = tensor(CUDNN_DATA_BFLOAT16, 2, 4, 1, 1);
  cudnnTensorDescriptor_t af = tensor(CUDNN_DATA_FLOAT, 2, 4, 5, 5);
  cudnnTensorDescriptor_t cf = tensor(CUDNN_DATA_FLOAT, 2, 4, 1, 1);
  cudnnReduceTensorDescriptor_t avg, max_idx, half_comp;
  cudnnCreateReduceTensorDescriptor(&avg);
  cudnnCreateReduceTensorDescriptor(&max_idx);
  cudnnCreateReduceTensorDescriptor(&half_comp);
  expect_dnn(cudnnSetReduceTensorDescriptor(avg, CUDNN_REDUCE_TENSOR_AVG, CUDNN_DATA_FLOAT,
                                            CUDNN_PROPAGATE_NAN, CUDNN_REDUCE_TENSOR_NO_INDICES,
                                            CUDNN_32BIT_INDICES),
             OK, "AVG with FLOAT compute");
  expect_dnn(cudnnSetReduceTensorDescriptor(max_idx, CUDNN_REDUCE_TENSOR_MAX, CUDNN_DATA_FLOAT,
                                            CUDNN_PROPAGATE_NAN,
                                            CUDNN_REDUCE_TENSOR_FLATTENED_INDICES,
                                            CUDNN_32BIT_INDICES),
             OK, "MAX with indices");
  /* No 16-bit compute type, whatever the data. */
  expect_dnn(cudnnSetReduceTensorDescriptor(half_comp, CUDNN_REDUCE_TENSOR_AVG, CUDNN_DATA_HALF,
                                            CUDNN_PROPAGATE_NAN, CUDNN_REDUCE_TENSOR_NO_INDICES,
                                            CUDNN_32BIT_INDICES),
             TYPE, "reduction with HALF compute");
  expect_dnn(cudnnSetReduceTensorDescriptor(half_comp, CUDNN_REDUCE_TENSOR_MAX,
                                            CUDNN_DATA_BFLOAT16, CUDNN_PROPAGATE_NAN,
                                            CUDNN_REDUCE_TENSOR_NO_INDICES, CUDNN_32BIT_INDICES),
             TYPE, "reduction with BFLOAT16 compute");
  size_t size = 1, fsize = 2;
  expect_dnn(cudnnGetReductionWorkspaceSize(dnn, avg, ah, ch, &size), OK,
             "half reduction workspace size");
  expect_dnn(cudnnGetReductionWorkspaceSize(dnn, avg, af, cf, &fsize), OK,
             "float reduction workspace size");
  expect(size == fsize, "a half reduction's workspace is a float one's");
  expect_dnn(cudnnGetReductionWorkspaceSize(dnn, avg, ab, cb, &size), OK,
             "bfloat16 reduction workspace size");
  expect(size == fsize, "a bfloat16 reduction's workspace is a float one's");
  expect_dnn(cudnnGetReductionIndicesSize(dnn, avg, ab, cb, &size), OK,
             "bfloat16 reduction indices size");
  expect(size == 0, "no indices without FLATTENED_INDICES");
  expect_dnn(cudnnGetReductionIndicesSize(dnn, max_idx, ah, ch, &size), OK,
             "half reduction indices size");
  expect(size == 8 * sizeof(unsigned), "indices size of 16-bit descriptors");
  size_t n = 1 << 20;
  expect_dnn(cudnnReduceTensor(dnn, avg, NULL, 0, ws, n, &one, ah, buf, &zero, ch, buf), OK,
             "half AVG");
  expect_dnn(cudnnReduceTensor(dnn, avg, NULL, 0, ws, n, &one, ab, buf, &zero, cb, buf),
             CUDNN_STATUS_NOT_SUPPORTED, "bfloat16 AVG (as cuDNN 9.19 answered on an H200)");
  expect_dnn(cudnnReduceTensor(dnn, max_idx, idx, 1 << 10, ws, n, &one, af, buf, &zero, cf, buf),
             OK, "float MAX with indices");
  /* A and C of one type. */
  expect_dnn(cudnnReduceTensor(dnn, avg, NULL, 0, ws, n, &one, ah, buf, &zero, cb, buf), TYPE,
             "half A, bfloat16 C");
  expect_dnn(cudnnReduceTensor(dnn, avg, NULL, 0, ws, n, &one, ab, buf, &zero, ch, buf), TYPE,
             "bfloat16 A, half C");
  expect_dnn(cudnnReduceTensor(dnn, avg, NULL, 0, ws, n, &one, ah, buf, &zero, cf, buf), TYPE,
             "half A, float C");
  expect_dnn(cudnnReduceTensor(dnn, avg, NULL, 0, ws, n, &one, af, buf, &zero, cb, buf), TYPE,
             "float A, bfloat16 C");
  /* Indices with float data only. */
  expect_dnn(cudnnReduceTensor(dnn, max_idx, idx, 1 << 10, ws, n, &one, ah, buf, &zero, ch, buf),
             TYPE, "half MAX with indices");
  expect_dnn(cudnnReduceTensor(dnn, max_idx, idx, 1 << 10, ws, n, &one, ab, buf, &zero, cb, buf),
             TYPE, "bfloat16 MAX with indices");
  /* Shapes and workspaces first checked as for float. */
  expect_dnn(cudnnReduceTensor(dnn, avg, NULL, 0, ws, n, &one, ch, buf, &zero, ah, buf),
             CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "half C larger than A");
  expect_dnn(cudnnReduceTensor(dnn, avg, NULL, 0, ws, 0, &one, ah, buf, &zero, ch, buf),
             CUDNN_STATUS_BAD_PARAM, "half reduction without its workspace");
  cudaDeviceSynchronize();
  cudnnDestroyReduceTensorDescriptor(avg);
  cudnnDestroyReduceTensorDescriptor(max_idx);
  cudnnDestroyReduceTensorDescriptor(half_comp);
  cudnnTensorDescriptor_t all[] = {ah, ch, ab, cb, af, cf};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    cudnnDestroyTensorDescriptor(all[i]);
  cudaFree(buf), cudaFree(ws), cudaFree(idx);
}

/* cublasGemmEx of 4 x 4 matrices in buf with these types. */
/* cudnnBatchNormalizationForwardInference: x and y of one type, FLOAT,
 * HALF or BFLOAT16, with FLOAT parameters. */
static void test_bn_refusals(void) {
  const cudnnStatus_t OK = CUDNN_STATUS_SUCCESS, TYPE = CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
                      BAD = CUDNN_STATUS_BAD_PARAM;
  void *buf = NULL;
  cudaMalloc(&buf, 1 << 16);
  cudaMemset(buf, 0, 1 << 16);
  float one = 1, zero = 0;
  cudnnTensorDescriptor_t th = tensor(CUDNN_DATA_HALF, 2, 4, 5, 5);
  cudnnTensorDescriptor_t tb = tensor(CUDNN_DATA_BFLOAT16, 2, 4, 5, 5);
  cudnnTensorDescriptor_t tf = tensor(CUDNN_DATA_FLOAT, 2, 4, 5, 5);
  cudnnTensorDescriptor_t t8 = tensor(CUDNN_DATA_INT8, 2, 4, 5, 5);
  cudnnTensorDescriptor_t ph = tensor(CUDNN_DATA_HALF, 1, 4, 1, 1);
  cudnnTensorDescriptor_t pb = tensor(CUDNN_DATA_BFLOAT16, 1, 4, 1, 1);
  cudnnTensorDescriptor_t pf = tensor(CUDNN_DATA_FLOAT, 1, 4, 1, 1);
  /* Zeroed operands: only the statuses matter here. */
  struct {
    cudnnTensorDescriptor_t x, y, p;
    cudnnStatus_t want;
    const char *what;
  } cases[] = {
    {th, th, pf, OK, "bn HALF data, FLOAT parameters"},
    {tb, tb, pf, OK, "bn BFLOAT16 data, FLOAT parameters"},
    {tf, tf, pf, OK, "bn FLOAT data, FLOAT parameters"},
    {th, th, ph, TYPE, "bn HALF data, HALF parameters"},
    {tb, tb, pb, TYPE, "bn BFLOAT16 data, BFLOAT16 parameters"},
    {th, th, pb, TYPE, "bn HALF data, BFLOAT16 parameters"},
    {tb, tb, ph, TYPE, "bn BFLOAT16 data, HALF parameters"},
    {tf, tf, ph, TYPE, "bn FLOAT data, HALF parameters"},
    {tf, tf, pb, TYPE, "bn FLOAT data, BFLOAT16 parameters"},
    {th, tb, pf, BAD, "bn HALF x, BFLOAT16 y"},
    {tb, th, pf, BAD, "bn BFLOAT16 x, HALF y"},
    {th, tf, pf, BAD, "bn HALF x, FLOAT y"},
    {tf, th, pf, BAD, "bn FLOAT x, HALF y"},
    {tf, tb, pf, BAD, "bn FLOAT x, BFLOAT16 y"},
    {t8, t8, pf, TYPE, "bn INT8 data"},
  };
  char *p = buf;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_dnn(cudnnBatchNormalizationForwardInference(dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero,
                                                       cases[i].x, p, cases[i].y, p + 16384,
                                                       cases[i].p, p + 32768, p + 32768,
                                                       p + 32768, p + 32768, 1e-5),
               cases[i].want, cases[i].what);
  cudaDeviceSynchronize();
  cudnnDestroyTensorDescriptor(th);
  cudnnDestroyTensorDescriptor(tb);
  cudnnDestroyTensorDescriptor(tf);
  cudnnDestroyTensorDescriptor(t8);
  cudnnDestroyTensorDescriptor(ph);
  cudnnDestroyTensorDescriptor(pb);
  cudnnDestroyTensorDescriptor(pf);
  cudaFree(buf);
}

static cublasStatus_t gemm_ex(void *buf, cudaDataType at, cudaDataType bt, cudaDataType ct,
                              cublasComputeType_t compute, cublasGemmAlgo_t algo,
                              const float *alpha, int lda) {
  float zero = 0;
  return cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, alpha, buf, at, lda, buf, bt, 4,
                      &zero, buf, ct, 4, compute, algo);
}

static void test_blas_refusals(void) {
  const cublasStatus_t OK = CUBLAS_STATUS_SUCCESS, NS = CUBLAS_STATUS_NOT_SUPPORTED;
  const cublasStatus_t IV = CUBLAS_STATUS_INVALID_VALUE;
  void *b = NULL;
  cudaMalloc(&b, 1 << 12);
  cudaMemset(b, 0, 1 << 12);
  float one = 1, zero = 0;
  const cudaDataType H = CUDA_R_16F, B = CUDA_R_16BF, F = CUDA_R_32F, D64 = CUDA_R_64F;
  const cublasComputeType_t C32 = CUBLAS_COMPUTE_32F;
  const cublasGemmAlgo_t D = CUBLAS_GEMM_DEFAULT, T = CUBLAS_GEMM_DEFAULT_TENSOR_OP;
  expect_blas(gemm_ex(b, H, H, H, C32, D, &one, 4), OK, "half GemmEx");
  expect_blas(gemm_ex(b, B, B, F, C32, T, &one, 4), OK, "bfloat16 into float");
  expect_blas(gemm_ex(b, F, F, F, CUBLAS_COMPUTE_32F_FAST_TF32, D, &one, 4), OK,
              "float GemmEx, FAST_TF32");
  expect_blas(gemm_ex(b, F, F, F, CUBLAS_COMPUTE_32F_FAST_16F, T, &one, 4), OK,
              "float GemmEx, FAST_16F");
  expect_blas(gemm_ex(b, H, B, H, C32, D, &one, 4), NS, "A half, B bfloat16");
  expect_blas(gemm_ex(b, H, H, B, C32, D, &one, 4), NS, "half into bfloat16");
  expect_blas(gemm_ex(b, F, F, H, C32, D, &one, 4), NS, "float into half");
  expect_blas(gemm_ex(b, H, H, H, CUBLAS_COMPUTE_32F_FAST_16F, D, &one, 4), NS,
              "half matrices with FAST_16F");
  expect_blas(gemm_ex(b, B, B, B, CUBLAS_COMPUTE_32F_FAST_16BF, D, &one, 4), NS,
              "bfloat16 matrices with FAST_16BF");
  expect_blas(gemm_ex(b, B, B, B, CUBLAS_COMPUTE_16F, D, &one, 4), NS, "bfloat16, COMPUTE_16F");
  expect_blas(gemm_ex(b, F, F, F, CUBLAS_COMPUTE_16F, D, &one, 4), NS, "float, COMPUTE_16F");
  expect_blas(gemm_ex(b, H, H, H, CUBLAS_COMPUTE_64F, D, &one, 4), NS, "half, COMPUTE_64F");
  expect_blas(gemm_ex(b, D64, D64, D64, CUBLAS_COMPUTE_64F, D, &one, 4), NS,
              "double (not computed here)");
  expect_blas(gemm_ex(b, H, H, H, (cublasComputeType_t)66, D, &one, 4), IV, "no such compute");
  expect_blas(gemm_ex(b, (cudaDataType)99, H, H, C32, D, &one, 4), IV, "no such data type");
  expect_blas(gemm_ex(b, H, H, H, C32, (cublasGemmAlgo_t)50, &one, 4), IV, "no such algorithm");
  expect_blas(gemm_ex(b, H, H, H, C32, D, NULL, 4), IV, "NULL alpha");
  expect_blas(gemm_ex(b, H, H, H, C32, D, &one, 2), IV, "lda < m");
  const cublasOperation_t N = CUBLAS_OP_N;
  expect_blas(cublasGemmEx(NULL, N, N, 4, 4, 4, &one, b, H, 4, b, H, 4, &zero, b, H, 4, C32, D),
              CUBLAS_STATUS_NOT_INITIALIZED, "NULL handle");
  expect_blas(cublasGemmStridedBatchedEx(blas, N, N, 4, 4, 4, &one, b, H, 4, 16, b, B, 4, 16,
                                         &zero, b, H, 4, 16, 2, C32, D),
              NS, "batched: A half, B bfloat16");
  expect_blas(cublasGemmStridedBatchedEx(blas, N, N, 4, 4, 4, &one, b, H, 4, 16, b, H, 4, 16,
                                         &zero, b, H, 4, 16, -1, C32, D),
              IV, "batched: negative batch");
  cudaDeviceSynchronize();
  cudaFree(b);
}

int main(void) {
  expect(cudnnCreate(&dnn) == CUDNN_STATUS_SUCCESS, "cudnnCreate");
  expect(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  Fmt fmts[] = {F16, BF16};
  for (int i = 0; i < 2; i++) {
    Fmt f = fmts[i];
    test_decode_all(f);
    test_encode(f);
    test_convolutions(f);
    test_add_tensor(f);
    test_activations(f);
    pool_case(f, CUDNN_POOLING_MAX, 3, 1, 2);
    pool_case(f, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, 3, 1, 1);
    pool_case(f, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, 2, 1, 2);
    op_tensor_case(f, CUDNN_OP_TENSOR_ADD);
    op_tensor_case(f, CUDNN_OP_TENSOR_MAX);
    if (f == F16) /* cuDNN reduces no bfloat16 data: test_reduce_refusals */
      test_reductions(f);
    test_batch_norms(f);
    test_gemms(f);
  }
  test_dnn_refusals();
  test_nhwc_refusals();
  test_reduce_refusals();
  test_bn_refusals();
  test_blas_refusals();
  cublasDestroy(blas);
  cudnnDestroy(dnn);
  return finish("test_half");
}
