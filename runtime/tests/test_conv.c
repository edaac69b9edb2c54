/*
 * test_conv.c - cuDNN convolutions of the CPU runtime against direct loops:
 * forward over padding, stride, dilation, groups, 1-D/2-D/3-D, both modes
 * and strided layouts; the fused bias/residual/activation form; the bias
 * and activation (cuDNN's or an opc kernel's) issued after a convolution;
 * and backward data against a direct transposed convolution.
 */
#include <string.h>

#include <cuda.h>
#include <cudnn.h>
#include <cuda_runtime.h>

#include "../kernels/opc_kargs.h"
#include "../../scalar/scalar.h"
#include "testutil.h"

typedef struct Case {
  int ns;                 /* spatial dims: 1..3 */
  int n, c, k, groups;
  int in[3], ks[3], pad[3], stride[3], dil[3];
  bool flip;              /* CUDNN_CONVOLUTION */
  int layout;             /* 0 packed, 1 channels last, 2 a channel slice of a wider tensor */
  float alpha, beta;
} Case;

static int rank(const Case *t) {
  return t->ns + 2;
}

static long long prod(const int *d, int n) {
  long long p = 1;
  for (int i = 0; i < n; i++)
    p *= d[i];
  return p;
}

/* Strides (elements) of `dims` for a layout; returns the buffer size. */
static long long layout_strides(int r, const int *dims, int layout, int *strides) {
  if (layout == 1) { /* N, spatial..., C */
    long long s = 1;
    strides[1] = 1;
    s = dims[1];
    for (int i = r - 1; i >= 2; i--) {
      strides[i] = (int)s;
      s *= dims[i];
    }
    strides[0] = (int)s;
    return s * dims[0];
  }
  int wide[8];
  memcpy(wide, dims, r * sizeof(int));
  if (layout == 2)
    wide[1] += 3;
  long long s = 1;
  for (int i = r - 1; i >= 0; i--) {
    strides[i] = (int)s;
    s *= wide[i];
  }
  return s;
}

/* Copies between a packed array and a strided buffer. */
static void scatter(const float *packed, float *buf, int r, const int *dims, const int *strides,
                    bool to_buf) {
  long long n = prod(dims, r), idx[8] = {0};
  for (long long i = 0; i < n; i++) {
    long long off = 0;
    for (int d = 0; d < r; d++)
      off += idx[d] * strides[d];
    if (to_buf)
      buf[off] = packed[i];
    else
      ((float *)packed)[i] = buf[off];
    for (int d = r - 1; d >= 0; d--) {
      if (++idx[d] < dims[d])
        break;
      idx[d] = 0;
    }
  }
}

static void out_dims(const Case *t, int *o) {
  for (int i = 0; i < 3; i++)
    o[i] = (t->in[i] + 2 * t->pad[i] - (t->ks[i] - 1) * t->dil[i] - 1) / t->stride[i] + 1;
}

/* Direct convolution on packed 3-D-normalised arrays. */
static void ref_conv(const Case *t, const float *x, const float *w, float *y) {
  int o[3];
  out_dims(t, o);
  int cg = t->c / t->groups, kg = t->k / t->groups;
  for (int n = 0; n < t->n; n++)
    for (int k = 0; k < t->k; k++)
      for (int od = 0; od < o[0]; od++)
        for (int oh = 0; oh < o[1]; oh++)
          for (int ow = 0; ow < o[2]; ow++) {
            double sum = 0;
            int g = k / kg;
            for (int ci = 0; ci < cg; ci++)
              for (int a = 0; a < t->ks[0]; a++)
                for (int b = 0; b < t->ks[1]; b++)
                  for (int e = 0; e < t->ks[2]; e++) {
                    int id = od * t->stride[0] - t->pad[0] + a * t->dil[0];
                    int ih = oh * t->stride[1] - t->pad[1] + b * t->dil[1];
                    int iw = ow * t->stride[2] - t->pad[2] + e * t->dil[2];
                    if (id < 0 || id >= t->in[0] || ih < 0 || ih >= t->in[1] || iw < 0 ||
                        iw >= t->in[2])
                      continue;
                    /* True convolution uses the mirrored filter. */
                    int wa = t->flip ? t->ks[0] - 1 - a : a, wb = t->flip ? t->ks[1] - 1 - b : b;
                    int we = t->flip ? t->ks[2] - 1 - e : e;
                    float wv = w[(((long long)k * cg + ci) * t->ks[0] + wa) * t->ks[1] * t->ks[2] +
                                 wb * t->ks[2] + we];
                    float xv = x[((((long long)n * t->c + g * cg + ci) * t->in[0] + id) * t->in[1] +
                                  ih) * t->in[2] + iw];
                    sum += (double)wv * xv;
                  }
            y[((((long long)n * t->k + k) * o[0] + od) * o[1] + oh) * o[2] + ow] = (float)sum;
          }
}

/* The case's real dims (rank ns + 2) from the normalised 3-D ones. */
static void real_dims(const Case *t, int first, int second, const int *sp, int *dims) {
  dims[0] = first;
  dims[1] = second;
  for (int i = 0; i < t->ns; i++)
    dims[2 + i] = sp[3 - t->ns + i];
}

static void set_conv(cudnnConvolutionDescriptor_t conv, const Case *t) {
  int pad[3], stride[3], dil[3];
  for (int i = 0; i < t->ns; i++) {
    pad[i] = t->pad[3 - t->ns + i];
    stride[i] = t->stride[3 - t->ns + i];
    dil[i] = t->dil[3 - t->ns + i];
  }
  expect(cudnnSetConvolutionNdDescriptor(conv, t->ns, pad, stride, dil,
                                         t->flip ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION,
                                         CUDNN_DATA_FLOAT) == CUDNN_STATUS_SUCCESS,
         "set conv");
  expect(cudnnSetConvolutionGroupCount(conv, t->groups) == CUDNN_STATUS_SUCCESS, "groups");
}

static void describe(const Case *t, char *buf, size_t size) {
  snprintf(buf, size,
           "%dD n%d c%d k%d g%d in %dx%dx%d ks %dx%dx%d pad %d,%d,%d stride %d,%d,%d dil %d,%d,%d "
           "%s layout %d",
           t->ns, t->n, t->c, t->k, t->groups, t->in[0], t->in[1], t->in[2], t->ks[0], t->ks[1],
           t->ks[2], t->pad[0], t->pad[1], t->pad[2], t->stride[0], t->stride[1], t->stride[2],
           t->dil[0], t->dil[1], t->dil[2], t->flip ? "conv" : "xcorr", t->layout);
}

static cudnnHandle_t dnn;

/*
 * Checks a heuristic list as cuDNN gives it for float data: usable entries
 * first, a tensor-op one leading and an FMA one among them, no workspace
 * for IMPLICIT_GEMM and some for the others. Returns how many are usable.
 */
static int check_fwd_list(const char *name, const cudnnConvolutionFwdAlgoPerf_t *perf,
                          int count) {
  int usable = 0, fma = 0;
  while (usable < count && perf[usable].status == CUDNN_STATUS_SUCCESS) {
    const cudnnConvolutionFwdAlgoPerf_t *p = &perf[usable++];
    fma += p->mathType == CUDNN_FMA_MATH;
    if ((p->algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM) != (p->memory == 0))
      fail("%s: algo %d needs %zu bytes of workspace", name, p->algo, p->memory);
  }
  for (int i = usable; i < count; i++)
    if (perf[i].status == CUDNN_STATUS_SUCCESS)
      fail("%s: a usable algorithm after an unusable one", name);
  if (usable < 2 || perf[0].mathType != CUDNN_TENSOR_OP_MATH || !fma)
    fail("%s: %d usable algorithms, the first in math %d, %d FMA", name, usable,
         perf[0].mathType, fma);
  return usable;
}

static void run_forward(const Case *t) {
  char name[256];
  describe(t, name, sizeof name);
  int r = rank(t), o[3], xd[8], yd[8], wd[8], xs[8], ys[8];
  out_dims(t, o);
  real_dims(t, t->n, t->c, t->in, xd);
  real_dims(t, t->n, t->k, o, yd);
  real_dims(t, t->k, t->c / t->groups, t->ks, wd);
  long long xn = prod(xd, r), yn = prod(yd, r), wn = prod(wd, r);
  long long xsize = layout_strides(r, xd, t->layout, xs);
  long long ysize = layout_strides(r, yd, t->layout == 2 ? 0 : t->layout, ys);
  float *x = rnd_array(xn), *w = rnd_array(wn), *y0 = rnd_array(yn);
  float *want = malloc(yn * sizeof(float)), *got = malloc(yn * sizeof(float));
  ref_conv(t, x, w, want);
  for (long long i = 0; i < yn; i++)
    want[i] = t->alpha * want[i] + t->beta * y0[i];

  float *dx, *dw, *dy;
  cudaMalloc((void **)&dx, xsize * sizeof(float));
  cudaMalloc((void **)&dw, wn * sizeof(float));
  cudaMalloc((void **)&dy, ysize * sizeof(float));
  float *hx = calloc(xsize, sizeof(float)), *hy = calloc(ysize, sizeof(float));
  scatter(x, hx, r, xd, xs, true);
  scatter(y0, hy, r, yd, ys, true);
  cudaMemcpy(dx, hx, xsize * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w, wn * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, hy, ysize * sizeof(float), cudaMemcpyHostToDevice);

  cudnnTensorDescriptor_t xdesc, ydesc;
  cudnnFilterDescriptor_t wdesc;
  cudnnConvolutionDescriptor_t conv;
  cudnnCreateTensorDescriptor(&xdesc);
  cudnnCreateTensorDescriptor(&ydesc);
  cudnnCreateFilterDescriptor(&wdesc);
  cudnnCreateConvolutionDescriptor(&conv);
  cudnnSetTensorNdDescriptor(xdesc, CUDNN_DATA_FLOAT, r, xd, xs);
  cudnnSetTensorNdDescriptor(ydesc, CUDNN_DATA_FLOAT, r, yd, ys);
  cudnnSetFilterNdDescriptor(wdesc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, r, wd);
  set_conv(conv, t);

  int od[8];
  if (cudnnGetConvolutionNdForwardOutputDim(conv, xdesc, wdesc, r, od) != CUDNN_STATUS_SUCCESS ||
      memcmp(od, yd, r * sizeof(int)) != 0)
    fail("%s: output dims", name);
  /* Every engine the heuristics list runs, in its own math type, with
   * exactly the workspace the list states. */
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int count = 0;
  if (cudnnGetConvolutionForwardAlgorithm_v7(dnn, xdesc, wdesc, conv, ydesc,
                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf))
    fail("%s: algorithm", name);
  int usable = check_fwd_list(name, perf, count);
  for (int i = 0; i < usable; i++) {
    cudnnSetConvolutionMathType(conv, perf[i].mathType);
    size_t ws = 1;
    cudnnGetConvolutionForwardWorkspaceSize(dnn, xdesc, wdesc, conv, ydesc, perf[i].algo, &ws);
    if (ws != perf[i].memory)
      fail("%s: algo %d workspace %zu, listed %zu", name, perf[i].algo, ws, perf[i].memory);
    void *dws = NULL;
    if (ws)
      cudaMalloc(&dws, ws);
    scatter(y0, hy, r, yd, ys, true);
    cudaMemcpy(dy, hy, ysize * sizeof(float), cudaMemcpyHostToDevice);
    cudnnStatus_t st = cudnnConvolutionForward(dnn, &t->alpha, xdesc, dx, wdesc, dw, conv,
                                               perf[i].algo, dws, ws, &t->beta, ydesc, dy);
    if (st != CUDNN_STATUS_SUCCESS)
      fail("%s: cudnnConvolutionForward algo %d math %d: %s", name, perf[i].algo,
           perf[i].mathType, cudnnGetErrorString(st));
    cudaMemcpy(hy, dy, ysize * sizeof(float), cudaMemcpyDeviceToHost);
    scatter(got, hy, r, yd, ys, false);
    if (!close_arrays(name, got, want, yn, 1e-4f))
      fprintf(stderr, "  in case: %s, algo %d math %d\n", name, perf[i].algo, perf[i].mathType);
    cudaFree(dws);
  }

  cudnnDestroyTensorDescriptor(xdesc);
  cudnnDestroyTensorDescriptor(ydesc);
  cudnnDestroyFilterDescriptor(wdesc);
  cudnnDestroyConvolutionDescriptor(conv);
  cudaFree(dx);
  cudaFree(dw);
  cudaFree(dy);
  free(x), free(w), free(y0), free(want), free(got), free(hx), free(hy);
}

static Case base_case(int ns) {
  Case t = {.ns = ns, .n = 2, .c = 4, .k = 6, .groups = 1, .alpha = 1, .beta = 0};
  for (int i = 0; i < 3; i++) {
    t.in[i] = 1;
    t.ks[i] = 1;
    t.stride[i] = 1;
    t.dil[i] = 1;
  }
  return t;
}

/* Sets the last `ns` spatial entries of a 3-entry array to v. */
static void fill3(int *a, int ns, int v) {
  for (int i = 3 - ns; i < 3; i++)
    a[i] = v;
}

static void forward_cases(void) {
  int sizes[3][3] = {{1, 1, 11}, {1, 7, 9}, {5, 6, 4}};
  for (int ns = 1; ns <= 3; ns++) {
    for (int ks = 1; ks <= 3; ks++)
      for (int pad = 0; pad <= 2; pad++)
        for (int stride = 1; stride <= 2; stride++)
          for (int dil = 1; dil <= 2; dil++)
            for (int g = 0; g < 3; g++) {
              if (ns == 3 && (pad == 2 || dil == 2) && ks != 3)
                continue; /* keep 3-D cheap */
              Case t = base_case(ns);
              memcpy(t.in, sizes[ns - 1], sizeof t.in);
              fill3(t.ks, ns, ks);
              fill3(t.pad, ns, pad);
              fill3(t.stride, ns, stride);
              fill3(t.dil, ns, dil);
              t.groups = g == 0 ? 1 : g == 1 ? 2 : 4;
              if (g == 2) /* depthwise: one input channel per group */
                t.k = 8;
              bool fits = true;
              for (int i = 0; i < 3; i++)
                if (t.in[i] + 2 * t.pad[i] < (t.ks[i] - 1) * t.dil[i] + 1)
                  fits = false;
              if (!fits)
                continue;
              t.layout = (ks + pad + stride + g) % 3;
              t.flip = (ks + dil + g) % 4 == 0;
              if ((pad + dil) % 2) {
                t.alpha = 0.5f;
                t.beta = -1.5f;
              }
              run_forward(&t);
            }
  }
  /* Asymmetric kernels, strides and a wider image. */
  Case t = base_case(2);
  t.in[1] = 13, t.in[2] = 17, t.ks[1] = 2, t.ks[2] = 5, t.pad[1] = 1, t.pad[2] = 2;
  t.stride[1] = 3, t.stride[2] = 2, t.dil[1] = 2, t.c = 6, t.k = 9, t.groups = 3, t.layout = 1;
  run_forward(&t);
  /* One depth slice padded in depth: three output slices from one input
   * slice, two of them all padding (the tiles take 2-D work only). */
  Case slab = base_case(3);
  slab.in[1] = 6, slab.in[2] = 5, slab.ks[1] = slab.ks[2] = 3;
  slab.pad[0] = slab.pad[1] = slab.pad[2] = 1;
  run_forward(&slab);
  /* ... and a filter three deep over it: one output slice. */
  slab.ks[0] = 3;
  run_forward(&slab);
  /* Big enough to be split into many blocks across threads. */
  Case big = base_case(2);
  big.n = 1, big.c = 16, big.k = 24, big.in[1] = 40, big.in[2] = 36;
  big.ks[1] = big.ks[2] = 3, big.pad[1] = big.pad[2] = 1;
  run_forward(&big);
  big.ks[1] = big.ks[2] = 1, big.pad[1] = big.pad[2] = 0, big.layout = 2;
  run_forward(&big);
  big.layout = 0;
  run_forward(&big);
}

/*
 * The direct depthwise kernel (one input channel per group): 3x3 and other
 * kernel sizes, strides 1 to 3 (its inputs are split by stride phase),
 * dilation, padding wider than the kernel reach, channel multipliers, a
 * single-channel input with many filters, and every layout.
 */
static void depthwise_cases(void) {
  int ks_list[4] = {3, 1, 5, 2};
  for (int ki = 0; ki < 4; ki++)
    for (int stride = 1; stride <= 3; stride++)
      for (int pad = 0; pad <= 3; pad++)
        for (int dil = 1; dil <= 2; dil++)
          for (int mult = 1; mult <= 3; mult += 2) {
            int ks = ks_list[ki];
            Case t = base_case(2);
            t.n = 1 + (pad + mult) % 2;
            t.c = t.groups = 5 + stride;
            t.k = t.c * mult;
            t.in[1] = 11 + pad, t.in[2] = 13 + 2 * stride + (pad + dil) % 2;
            t.ks[1] = t.ks[2] = ks;
            t.pad[1] = t.pad[2] = pad;
            t.stride[1] = t.stride[2] = stride;
            t.dil[1] = t.dil[2] = dil;
            t.layout = (ks + pad + stride + dil) % 3;
            t.flip = (ks + dil + mult) % 3 == 0;
            if (pad == 1 && dil == 2) {
              t.alpha = 0.5f;
              t.beta = -1.5f;
            }
            run_forward(&t);
          }
  /* Asymmetric: different kernel, padding, stride and dilation per axis. */
  Case t = base_case(2);
  t.c = t.groups = 7, t.k = 14, t.in[1] = 9, t.in[2] = 23;
  t.ks[1] = 3, t.ks[2] = 4, t.pad[1] = 2, t.pad[2] = 1, t.stride[1] = 1, t.stride[2] = 2;
  t.dil[1] = 2, t.dil[2] = 3, t.layout = 1;
  run_forward(&t);
  /* 3-D depthwise and a 1-D one. */
  t = base_case(3);
  t.c = t.groups = 3, t.k = 6, t.in[0] = 5, t.in[1] = 6, t.in[2] = 7;
  fill3(t.ks, 3, 3), fill3(t.pad, 3, 1), t.stride[0] = 2, t.stride[2] = 2;
  run_forward(&t);
  t = base_case(1);
  t.c = t.groups = 4, t.k = 4, t.in[2] = 40, t.ks[2] = 7, t.pad[2] = 3, t.stride[2] = 3;
  run_forward(&t);
  /* One input channel, many filters: one group, split across threads. */
  t = base_case(2);
  t.n = 1, t.c = 1, t.k = 32, t.in[1] = 30, t.in[2] = 31, t.ks[1] = t.ks[2] = 3;
  t.pad[1] = t.pad[2] = 1, t.layout = 2;
  run_forward(&t);
  /* One block of 16 channels over many rows, split across threads by bands
   * of rows (chan_dw), 5x5 with stride 2 and padding that the last band
   * reads. */
  t = base_case(2);
  t.n = 1, t.c = t.groups = 16, t.k = 16, t.in[1] = 61, t.in[2] = 33;
  t.ks[1] = t.ks[2] = 5, t.pad[1] = t.pad[2] = 2, t.stride[1] = t.stride[2] = 2;
  run_forward(&t);
  /* A big depthwise layer, split across threads by channel ranges. */
  t = base_case(2);
  t.n = 1, t.c = t.groups = 96, t.k = 96, t.in[1] = t.in[2] = 56, t.ks[1] = t.ks[2] = 3;
  t.pad[1] = t.pad[2] = 1, t.stride[1] = t.stride[2] = 2;
  run_forward(&t);
}

/*
 * Late layers: few positions, many output channels, so the GEMM is split
 * by output channels. 1x1 (no unfolding) and 3x3, packed and strided
 * outputs, with and without groups.
 */
static void channel_split_cases(void) {
  for (int ks = 1; ks <= 3; ks += 2)
    for (int layout = 0; layout < 3; layout++)
      for (int groups = 1; groups <= 2; groups++) {
        Case t = base_case(2);
        t.n = groups, t.c = 64, t.k = 320, t.groups = groups, t.in[1] = 7, t.in[2] = 5;
        t.ks[1] = t.ks[2] = ks, t.pad[1] = t.pad[2] = ks / 2, t.layout = layout;
        if (layout == 1) {
          t.alpha = 2.0f;
          t.beta = 0.25f;
        }
        run_forward(&t);
      }
}

/*
 * 3x3 stride-1 convolutions of the sizes in real networks: 16 to 32
 * channels, odd and even output sizes, padding 0 to 2, both modes, every
 * layout, a batch, alpha and beta. (They once checked a Winograd path.)
 */
static void three_by_three_cases(void) {
  int sizes[4][2] = {{14, 14}, {9, 13}, {28, 5}, {7, 30}};
  for (int s = 0; s < 4; s++)
    for (int pad = 0; pad <= 2; pad++) {
      Case t = base_case(2);
      t.n = 1 + s % 2, t.c = 16 + 8 * (s % 3), t.k = 16 + 16 * (pad % 2);
      t.in[1] = sizes[s][0], t.in[2] = sizes[s][1];
      t.ks[1] = t.ks[2] = 3, t.pad[1] = t.pad[2] = pad;
      t.layout = (s + pad) % 3;
      t.flip = (s + pad) % 2 == 1;
      if (pad == 1) {
        t.alpha = 0.75f;
        t.beta = 0.5f;
      }
      run_forward(&t);
    }
}

/*
 * The small planes where the output channels go along the vectors (chan
 * in cudnn_conv.c): channel counts that leave part-filled blocks of 32 and
 * of 16, filter rows not a multiple of 16, rows split into two tiles,
 * strides, and 1x1 filters read in place and strided.
 */
static void chan_cases(void) {
  int shapes[][6] = {/* c, k, h, w, filter, stride */
                     {33, 40, 14, 14, 3, 2}, {17, 50, 9, 15, 3, 1}, {144, 72, 7, 7, 1, 1},
                     {130, 24, 13, 13, 1, 2}, {6, 97, 16, 16, 5, 1}, {64, 16, 8, 8, 3, 1}};
  for (int i = 0; i < (int)(sizeof shapes / sizeof shapes[0]); i++) {
    Case t = base_case(2);
    t.n = 1 + i % 2, t.c = shapes[i][0], t.k = shapes[i][1];
    t.in[1] = shapes[i][2], t.in[2] = shapes[i][3];
    t.ks[1] = t.ks[2] = shapes[i][4], t.pad[1] = t.pad[2] = shapes[i][4] / 2;
    t.stride[1] = t.stride[2] = shapes[i][5];
    t.flip = i % 2 == 1;
    run_forward(&t);
  }
}

/* ---- fused bias, residual and activation ---- */

static float act_ref(cudnnActivationMode_t m, float v, float coef) {
  switch (m) {
  case CUDNN_ACTIVATION_RELU: return v > 0 ? v : 0;
  case CUDNN_ACTIVATION_CLIPPED_RELU: return v < 0 ? 0 : v > coef ? coef : v;
  case CUDNN_ACTIVATION_SIGMOID: return 1 / (1 + expf(-v));
  case CUDNN_ACTIVATION_TANH: return tanhf(v);
  default: return v;
  }
}

/* The descriptors of a 2-D convolution over packed NCHW tensors: x, y,
 * the per-channel bias b and the filter w set from their dims, the
 * convolution descriptor only created (each caller sets its own). */
typedef struct ConvDescs {
  cudnnTensorDescriptor_t x, y, b;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
} ConvDescs;

static ConvDescs conv_descs(const int *xd, const int *yd, const int *bd, const int *wd) {
  ConvDescs d;
  cudnnCreateTensorDescriptor(&d.x);
  cudnnCreateTensorDescriptor(&d.y);
  cudnnCreateTensorDescriptor(&d.b);
  cudnnCreateFilterDescriptor(&d.w);
  cudnnCreateConvolutionDescriptor(&d.conv);
  cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, xd[0], xd[1], xd[2], xd[3]);
  cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, yd[0], yd[1], yd[2], yd[3]);
  cudnnSetTensor4dDescriptor(d.b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, bd[0], bd[1], bd[2], bd[3]);
  cudnnSetFilter4dDescriptor(d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, wd[0], wd[1], wd[2], wd[3]);
  return d;
}

static void destroy_conv_descs(ConvDescs *d) {
  cudnnDestroyTensorDescriptor(d->x);
  cudnnDestroyTensorDescriptor(d->y);
  cudnnDestroyTensorDescriptor(d->b);
  cudnnDestroyFilterDescriptor(d->w);
  cudnnDestroyConvolutionDescriptor(d->conv);
}

static void run_fused(cudnnActivationMode_t mode, bool in_place, float alpha1, float alpha2,
                      int groups) {
  Case t = base_case(2);
  t.n = 2, t.c = 6, t.k = 8, t.groups = groups, t.in[1] = 9, t.in[2] = 7;
  t.ks[1] = t.ks[2] = 3, t.pad[1] = t.pad[2] = 1;
  int o[3];
  out_dims(&t, o);
  int xd[4] = {2, 6, 9, 7}, yd[4] = {2, 8, o[1], o[2]}, wd[4] = {8, 6 / groups, 3, 3};
  int bd[4] = {1, 8, 1, 1};
  long long xn = 2 * 6 * 9 * 7, yn = 2LL * 8 * o[1] * o[2], wn = 8 * (6 / groups) * 9;
  float *x = rnd_array(xn), *w = rnd_array(wn), *z = rnd_array(yn), *b = rnd_array(8);
  float *want = malloc(yn * sizeof(float)), *got = malloc(yn * sizeof(float));
  ref_conv(&t, x, w, want);
  long long plane = (long long)o[1] * o[2];
  for (long long i = 0; i < yn; i++)
    want[i] = act_ref(mode, alpha1 * want[i] + alpha2 * z[i] + b[i / plane % 8], 2.5f);

  float *dx, *dw, *dz, *db, *dy;
  cudaMalloc((void **)&dx, xn * 4);
  cudaMalloc((void **)&dw, wn * 4);
  cudaMalloc((void **)&dz, yn * 4);
  cudaMalloc((void **)&db, 8 * 4);
  cudaMalloc((void **)&dy, yn * 4);
  cudaMemcpy(dx, x, xn * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w, wn * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dz, z, yn * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b, 8 * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dy, z, yn * 4, cudaMemcpyHostToDevice); /* y starts equal to z for in-place */

  ConvDescs d = conv_descs(xd, yd, bd, wd);
  cudnnActivationDescriptor_t act;
  cudnnCreateActivationDescriptor(&act);
  cudnnSetConvolution2dDescriptor(d.conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                  CUDNN_DATA_FLOAT);
  cudnnSetConvolutionGroupCount(d.conv, groups);
  cudnnSetActivationDescriptor(act, mode, CUDNN_NOT_PROPAGATE_NAN, 2.5);
  const cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t ws = 0;
  void *dws = NULL;
  expect(cudnnGetConvolutionForwardWorkspaceSize(dnn, d.x, d.w, d.conv, d.y, algo, &ws) ==
                 CUDNN_STATUS_SUCCESS &&
             ws > 0,
         "fused: workspace size");
  cudaMalloc(&dws, ws);
  cudnnStatus_t st = cudnnConvolutionBiasActivationForward(
      dnn, &alpha1, d.x, dx, d.w, dw, d.conv, algo, dws, ws, &alpha2, d.y, in_place ? dy : dz,
      d.b, db, act, d.y, dy);
  char name[96];
  snprintf(name, sizeof name, "fused act %d in_place %d alpha %g,%g", mode, in_place, alpha1, alpha2);
  /* cuDNN fuses only ReLU and (with this algorithm) the identity. */
  if (mode == CUDNN_ACTIVATION_RELU || mode == CUDNN_ACTIVATION_IDENTITY) {
    expect(st == CUDNN_STATUS_SUCCESS, "cudnnConvolutionBiasActivationForward");
    cudaMemcpy(got, dy, yn * 4, cudaMemcpyDeviceToHost);
    close_arrays(name, got, want, yn, 1e-4f);
  } else if (st != CUDNN_STATUS_NOT_SUPPORTED) {
    fail("%s: %s, expected CUDNN_STATUS_NOT_SUPPORTED", name, cudnnGetErrorString(st));
  }
  cudaFree(dws);
  destroy_conv_descs(&d);
  cudnnDestroyActivationDescriptor(act);
  cudaFree(dx), cudaFree(dw), cudaFree(dz), cudaFree(db), cudaFree(dy);
  free(x), free(w), free(z), free(b), free(want), free(got);
}

/* ---- bias and activation folded into a convolution at run time ---- */

typedef struct Folded {
  ConvDescs d;
  cudnnActivationDescriptor_t act;
  cudaEvent_t mark;
  float *dx, *dw, *db, *dy, *dy2;
  void *ws;
  size_t ws_size;
  float conv_beta, add_alpha;
  int variant;
} Folded;

/* Convolution, bias addition and activation, as the emitted programs issue
 * them; each variant breaks one condition of the folding. */
static void enqueue_folded(const Folded *f, cudnnHandle_t h, cudaStream_t s) {
  float one = 1, zero = 0;
  expect(cudnnConvolutionForward(h, &one, f->d.x, f->dx, f->d.w, f->dw, f->d.conv,
                                 CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, f->ws,
                                 f->ws_size, &f->conv_beta, f->d.y, f->dy) == CUDNN_STATUS_SUCCESS,
         "folded: convolution");
  if (f->variant == 4)
    cudaEventRecord(f->mark, s);
  bool act_first = f->variant == 6;
  float *act_out = f->variant == 2 ? f->dy2 : f->dy;
  for (int step = 0; step < 2; step++) {
    if ((step == 0) != act_first)
      expect(cudnnAddTensor(h, &f->add_alpha, f->d.b, f->db, &one, f->d.y, f->dy) ==
                 CUDNN_STATUS_SUCCESS,
             "folded: bias");
    else
      expect(cudnnActivationForward(h, f->act, &one, f->d.y, f->dy, &zero, f->d.y, act_out) ==
                 CUDNN_STATUS_SUCCESS,
             "folded: activation");
  }
}

/*
 * Variants: 0 all folded; 1 bias with alpha 0.5, 2 activation out of place,
 * 3 convolution blending into y (beta 0.5), 4 an event between convolution
 * and bias, 6 activation before bias: not folded (or only partly); 5 a
 * depthwise convolution, all folded. Run directly and replayed from a graph,
 * where the three are queued together; the result must be the same.
 */
static void run_folded(int variant) {
  Case t = base_case(2);
  t.n = 1, t.c = 6, t.k = 10, t.in[1] = 12, t.in[2] = 9;
  t.ks[1] = t.ks[2] = 3, t.pad[1] = t.pad[2] = 1;
  if (variant == 5)
    t.c = t.k = t.groups = 12;
  int o[3];
  out_dims(&t, o);
  int xd[4] = {1, t.c, 12, 9}, yd[4] = {1, t.k, o[1], o[2]}, wd[4] = {t.k, t.c / t.groups, 3, 3};
  long long xn = (long long)t.c * 12 * 9, yn = (long long)t.k * o[1] * o[2];
  long long wn = (long long)t.k * (t.c / t.groups) * 9, plane = (long long)o[1] * o[2];
  float *x = rnd_array(xn), *w = rnd_array(wn), *b = rnd_array(t.k), *y0 = rnd_array(yn);
  float *want = malloc(yn * 4), *want2 = malloc(yn * 4), *got = malloc(yn * 4);
  Folded f = {.conv_beta = variant == 3 ? 0.5f : 0, .add_alpha = variant == 1 ? 0.5f : 1,
              .variant = variant};
  const float top = 0.6f;
  ref_conv(&t, x, w, want);
  for (long long i = 0; i < yn; i++) {
    float v = want[i] + f.conv_beta * y0[i], bias = f.add_alpha * b[i / plane];
    if (variant == 6) {
      want[i] = act_ref(CUDNN_ACTIVATION_CLIPPED_RELU, v, top) + bias;
    } else if (variant == 2) {
      want[i] = v + bias;
      want2[i] = act_ref(CUDNN_ACTIVATION_CLIPPED_RELU, v + bias, top);
    } else {
      want[i] = act_ref(CUDNN_ACTIVATION_CLIPPED_RELU, v + bias, top);
    }
  }

  cudaMalloc((void **)&f.dx, xn * 4);
  cudaMalloc((void **)&f.dw, wn * 4);
  cudaMalloc((void **)&f.db, t.k * 4);
  cudaMalloc((void **)&f.dy, yn * 4);
  cudaMalloc((void **)&f.dy2, yn * 4);
  cudaMemcpy(f.dx, x, xn * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(f.dw, w, wn * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(f.db, b, t.k * 4, cudaMemcpyHostToDevice);
  int bd[4] = {1, t.k, 1, 1};
  f.d = conv_descs(xd, yd, bd, wd);
  cudnnCreateActivationDescriptor(&f.act);
  cudaEventCreate(&f.mark);
  set_conv(f.d.conv, &t);
  cudnnSetActivationDescriptor(f.act, CUDNN_ACTIVATION_CLIPPED_RELU, CUDNN_NOT_PROPAGATE_NAN, top);

  cudaStream_t s;
  cudnnHandle_t h;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudnnCreate(&h);
  cudnnSetStream(h, s);
  cudnnGetConvolutionForwardWorkspaceSize(h, f.d.x, f.d.w, f.d.conv, f.d.y,
                                          CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                          &f.ws_size);
  cudaMalloc(&f.ws, f.ws_size);
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  /* Round 0 runs directly, which also initialises the handle for the
   * capture; rounds 1 and 2 replay the graph. */
  for (int round = 0; round < 3; round++) {
    cudaMemcpy(f.dy, y0, yn * 4, cudaMemcpyHostToDevice);
    cudaMemset(f.dy2, 0, yn * 4);
    cudaDeviceSynchronize();
    if (round == 0) {
      enqueue_folded(&f, h, s);
    } else {
      if (round == 1) {
        expect(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess,
               "folded: capture");
        enqueue_folded(&f, h, s);
        expect(cudaStreamEndCapture(s, &graph) == cudaSuccess, "folded: end capture");
        expect(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "folded: instantiate");
      }
      expect(cudaGraphLaunch(exec, s) == cudaSuccess, "folded: launch");
    }
    expect(cudaStreamSynchronize(s) == cudaSuccess, "folded: synchronize");
    char name[64];
    snprintf(name, sizeof name, "folded variant %d round %d", variant, round);
    cudaMemcpy(got, f.dy, yn * 4, cudaMemcpyDeviceToHost);
    close_arrays(name, got, want, yn, 1e-4f);
    if (variant == 2) {
      cudaMemcpy(got, f.dy2, yn * 4, cudaMemcpyDeviceToHost);
      close_arrays(name, got, want2, yn, 1e-4f);
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudnnDestroy(h);
  cudaStreamDestroy(s);
  cudaFree(f.ws);
  cudaEventDestroy(f.mark);
  destroy_conv_descs(&f.d);
  cudnnDestroyActivationDescriptor(f.act);
  cudaFree(f.dx), cudaFree(f.dw), cudaFree(f.db), cudaFree(f.dy), cudaFree(f.dy2);
  free(x), free(w), free(b), free(y0), free(want), free(want2), free(got);
}

/* ---- opc's activation kernels launched after a convolution ---- */

/* What each kernel computes, written out here, with its f[0] and f[1] and
 * the activation code its launches state (scalar.h), by which the runtime
 * folds them into the convolution. */
typedef struct KernelAct {
  const char *kernel;
  float f0, f1;
  int act;
} KernelAct;

static float kernel_act_ref(const KernelAct *k, float v) {
  if (strcmp(k->kernel, "opc_silu") == 0)
    return v / (1 + expf(-v));
  if (strcmp(k->kernel, "opc_swish") == 0)
    return v / (1 + expf(-k->f0 * v));
  if (strcmp(k->kernel, "opc_mish") == 0)
    return v * tanhf(log1pf(expf(v)));
  if (strcmp(k->kernel, "opc_hard_swish") == 0)
    return v * fminf(1, fmaxf(0, v / 6 + 0.5f));
  if (strcmp(k->kernel, "opc_hard_sigmoid") == 0)
    return fminf(1, fmaxf(0, k->f0 * v + k->f1));
  if (strcmp(k->kernel, "opc_leaky_relu") == 0)
    return v < 0 ? k->f0 * v : v;
  if (strcmp(k->kernel, "opc_sigmoid") == 0)
    return 1 / (1 + expf(-v));
  if (strcmp(k->kernel, "opc_elu") == 0)
    return v < 0 ? k->f0 * (expf(v) - 1) : v;
  if (strcmp(k->kernel, "opc_relu_f32") == 0)
    return fmaxf(v, 0);
  if (strcmp(k->kernel, "opc_clip") == 0)
    return fminf(fmaxf(v, k->f0), k->f1);
  return tanhf(v); /* opc_tanh */
}

/* A launch of k over `count` packed values from x into y, as rank 1 (the
 * emitter's collapsed form) or as the given dims. */
static CUresult launch_act(CUfunction f, const KernelAct *k, const float *x, float *y,
                           long long count, int rank, const int *dims, cudaStream_t s) {
  struct opc_kargs a;
  memset(&a, 0, sizeof a);
  a.x[0] = x;
  a.y = y;
  a.n = count;
  a.rank = rank;
  long long step = 1;
  for (int i = rank - 1; i >= 0; i--) {
    a.dims[i] = rank == 1 ? count : dims[i];
    a.xstride[0][i] = a.ystride[i] = step;
    step *= a.dims[i];
  }
  a.x_extent[0] = a.y_extent = count * (long long)sizeof(float);
  a.f[0] = k->f0;
  a.f[1] = k->f1;
  a.act = k->act;
  void *params[] = {&a};
  return cuLaunchKernel(f, (unsigned)((count + 255) / 256), 1, 1, 256, 1, 1, 0, s, params, NULL);
}

/*
 * Convolution, bias, then one of opc's activation kernels, as the emitted
 * programs issue an activation cuDNN cannot fuse. Variants: 0 in place
 * over all of y as one row, 3 the same as y's four dims (both folded into
 * the convolution's epilogue); 1 out of place, 2 over only the first half
 * of y (not folded). Direct and replayed from a graph, where all three are
 * queued together: the result must be the same.
 */
static void run_kernel_folded(const KernelAct *k, int variant, int groups) {
  Case t = base_case(2);
  t.n = 1, t.c = 8, t.k = 8, t.groups = groups, t.in[1] = 11, t.in[2] = 13;
  t.ks[1] = t.ks[2] = 3, t.pad[1] = t.pad[2] = 1;
  int o[3];
  out_dims(&t, o);
  int xd[4] = {1, t.c, 11, 13}, yd[4] = {1, t.k, o[1], o[2]}, wd[4] = {t.k, t.c / groups, 3, 3};
  long long xn = (long long)t.c * 11 * 13, yn = (long long)t.k * o[1] * o[2];
  long long wn = (long long)t.k * (t.c / groups) * 9, plane = (long long)o[1] * o[2];
  long long count = variant == 2 ? yn / 2 : yn;
  float *x = rnd_array(xn), *w = rnd_array(wn), *b = rnd_array(t.k);
  float *want = malloc(yn * 4), *want2 = malloc(yn * 4), *got = malloc(yn * 4);
  for (long long i = 0; i < xn; i++)
    x[i] *= 3; /* so that y spans the kernels' bends */
  ref_conv(&t, x, w, want);
  for (long long i = 0; i < yn; i++) {
    float v = want[i] + b[i / plane];
    want[i] = v;
    want2[i] = kernel_act_ref(k, v);
  }
  if (variant != 1)
    memcpy(want, want2, count * 4);

  float *dx, *dw, *db, *dy, *dy2;
  cudaMalloc((void **)&dx, xn * 4);
  cudaMalloc((void **)&dw, wn * 4);
  cudaMalloc((void **)&db, t.k * 4);
  cudaMalloc((void **)&dy, yn * 4);
  cudaMalloc((void **)&dy2, yn * 4);
  cudaMemcpy(dx, x, xn * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w, wn * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b, t.k * 4, cudaMemcpyHostToDevice);
  int bd[4] = {1, t.k, 1, 1};
  ConvDescs d = conv_descs(xd, yd, bd, wd);
  set_conv(d.conv, &t);

  CUmodule mod;
  CUfunction f;
  cuInit(0);
  expect(cuModuleLoadData(&mod, ".version 8.0\n.target sm_90\n.address_size 64\n") ==
             CUDA_SUCCESS,
         "kernel folded: module");
  expect(cuModuleGetFunction(&f, mod, k->kernel) == CUDA_SUCCESS, "kernel folded: function");
  cudaStream_t s;
  cudnnHandle_t h;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudnnCreate(&h);
  cudnnSetStream(h, s);
  size_t ws_size = 0;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, algo, &ws_size);
  void *ws;
  cudaMalloc(&ws, ws_size);
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  for (int round = 0; round < 3; round++) {
    cudaMemset(dy2, 0, yn * 4);
    cudaDeviceSynchronize();
    if (round <= 1) {
      if (round == 1)
        expect(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess,
               "kernel folded: capture");
      float one = 1, zero = 0;
      expect(cudnnConvolutionForward(h, &one, d.x, dx, d.w, dw, d.conv, algo, ws, ws_size, &zero,
                                     d.y, dy) == CUDNN_STATUS_SUCCESS,
             "kernel folded: convolution");
      expect(cudnnAddTensor(h, &one, d.b, db, &one, d.y, dy) == CUDNN_STATUS_SUCCESS,
             "kernel folded: bias");
      expect(launch_act(f, k, dy, variant == 1 ? dy2 : dy, count, variant == 3 ? 4 : 1, yd, s) ==
                 CUDA_SUCCESS,
             "kernel folded: launch");
      if (round == 1) {
        expect(cudaStreamEndCapture(s, &graph) == cudaSuccess, "kernel folded: end capture");
        expect(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "kernel folded: instantiate");
      }
    }
    if (round >= 1)
      expect(cudaGraphLaunch(exec, s) == cudaSuccess, "kernel folded: launch graph");
    expect(cudaStreamSynchronize(s) == cudaSuccess, "kernel folded: synchronize");
    char name[96];
    snprintf(name, sizeof name, "%s folded, variant %d, groups %d, round %d", k->kernel, variant,
             groups, round);
    cudaMemcpy(got, dy, yn * 4, cudaMemcpyDeviceToHost);
    close_arrays(name, got, want, yn, 1e-4f);
    if (variant == 1) {
      cudaMemcpy(got, dy2, yn * 4, cudaMemcpyDeviceToHost);
      close_arrays(name, got, want2, yn, 1e-4f);
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudnnDestroy(h);
  cudaStreamDestroy(s);
  cuModuleUnload(mod);
  cudaFree(ws);
  destroy_conv_descs(&d);
  cudaFree(dx), cudaFree(dw), cudaFree(db), cudaFree(dy), cudaFree(dy2);
  free(x), free(w), free(b), free(want), free(want2), free(got);
}

static void kernel_folded_cases(void) {
  const KernelAct kernels[] = {
      {"opc_silu", 0, 0, OPC_ACT_SILU},
      {"opc_hard_swish", 0, 0, OPC_ACT_HARD_SWISH},
      {"opc_hard_sigmoid", 0.2f, 0.5f, OPC_ACT_HARD_SIGMOID},
      {"opc_leaky_relu", 0.1f, 0, OPC_ACT_LEAKY_RELU},
      {"opc_sigmoid", 0, 0, OPC_ACT_SIGMOID},
      {"opc_tanh", 0, 0, OPC_ACT_TANH},
      {"opc_swish", 1.7f, 0, OPC_ACT_SWISH},
      {"opc_mish", 0, 0, OPC_ACT_MISH},
      {"opc_elu", 0.6f, 0, OPC_ACT_ELU},
      {"opc_relu_f32", 0, 0, OPC_ACT_RELU},
      {"opc_clip", -0.5f, 1.5f, OPC_ACT_CLIP},
  };
  for (int i = 0; i < (int)(sizeof kernels / sizeof kernels[0]); i++)
    for (int variant = 0; variant <= 3; variant++)
      run_kernel_folded(&kernels[i], variant, 1);
  /* A depthwise convolution has its own epilogue call. */
  run_kernel_folded(&kernels[0], 0, 8);
  run_kernel_folded(&kernels[1], 0, 8);
}

/* ---- backward data ---- */

/* Direct transposed convolution: every dy value spreads through the filter. */
static void ref_backward(const Case *t, const float *dy, const float *w, float *dx) {
  int o[3];
  out_dims(t, o);
  int cg = t->c / t->groups, kg = t->k / t->groups;
  memset(dx, 0, prod((int[]){t->n, t->c, t->in[0], t->in[1], t->in[2]}, 5) * sizeof(float));
  for (int n = 0; n < t->n; n++)
    for (int k = 0; k < t->k; k++)
      for (int od = 0; od < o[0]; od++)
        for (int oh = 0; oh < o[1]; oh++)
          for (int ow = 0; ow < o[2]; ow++) {
            float v = dy[((((long long)n * t->k + k) * o[0] + od) * o[1] + oh) * o[2] + ow];
            int g = k / kg;
            for (int ci = 0; ci < cg; ci++)
              for (int a = 0; a < t->ks[0]; a++)
                for (int b = 0; b < t->ks[1]; b++)
                  for (int e = 0; e < t->ks[2]; e++) {
                    int id = od * t->stride[0] - t->pad[0] + a * t->dil[0];
                    int ih = oh * t->stride[1] - t->pad[1] + b * t->dil[1];
                    int iw = ow * t->stride[2] - t->pad[2] + e * t->dil[2];
                    if (id < 0 || id >= t->in[0] || ih < 0 || ih >= t->in[1] || iw < 0 ||
                        iw >= t->in[2])
                      continue;
                    int wa = t->flip ? t->ks[0] - 1 - a : a, wb = t->flip ? t->ks[1] - 1 - b : b;
                    int we = t->flip ? t->ks[2] - 1 - e : e;
                    float wv = w[(((long long)k * cg + ci) * t->ks[0] + wa) * t->ks[1] * t->ks[2] +
                                 wb * t->ks[2] + we];
                    dx[((((long long)n * t->c + g * cg + ci) * t->in[0] + id) * t->in[1] + ih) *
                           t->in[2] +
                       iw] += wv * v;
                  }
          }
}

static void run_backward(const Case *t) {
  char name[256];
  describe(t, name, sizeof name);
  int r = rank(t), o[3], xd[8], yd[8], wd[8], xs[8], ys[8];
  out_dims(t, o);
  real_dims(t, t->n, t->c, t->in, xd);
  real_dims(t, t->n, t->k, o, yd);
  real_dims(t, t->k, t->c / t->groups, t->ks, wd);
  long long xn = prod(xd, r), yn = prod(yd, r), wn = prod(wd, r);
  long long xsize = layout_strides(r, xd, t->layout, xs);
  long long ysize = layout_strides(r, yd, t->layout == 1 ? 1 : 0, ys);
  float *dyv = rnd_array(yn), *w = rnd_array(wn), *dx0 = rnd_array(xn);
  float *want = malloc(xn * sizeof(float)), *got = malloc(xn * sizeof(float));
  ref_backward(t, dyv, w, want);
  for (long long i = 0; i < xn; i++)
    want[i] = t->alpha * want[i] + t->beta * dx0[i];

  float *ddx, *dw, *ddy;
  cudaMalloc((void **)&ddx, xsize * 4);
  cudaMalloc((void **)&dw, wn * 4);
  cudaMalloc((void **)&ddy, ysize * 4);
  float *hx = calloc(xsize, 4), *hy = calloc(ysize, 4);
  scatter(dx0, hx, r, xd, xs, true);
  scatter(dyv, hy, r, yd, ys, true);
  cudaMemcpy(ddx, hx, xsize * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(ddy, hy, ysize * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w, wn * 4, cudaMemcpyHostToDevice);

  cudnnTensorDescriptor_t xdesc, ydesc;
  cudnnFilterDescriptor_t wdesc;
  cudnnConvolutionDescriptor_t conv;
  cudnnCreateTensorDescriptor(&xdesc);
  cudnnCreateTensorDescriptor(&ydesc);
  cudnnCreateFilterDescriptor(&wdesc);
  cudnnCreateConvolutionDescriptor(&conv);
  cudnnSetTensorNdDescriptor(xdesc, CUDNN_DATA_FLOAT, r, xd, xs);
  cudnnSetTensorNdDescriptor(ydesc, CUDNN_DATA_FLOAT, r, yd, ys);
  cudnnSetFilterNdDescriptor(wdesc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, r, wd);
  set_conv(conv, t);
  /* Every listed engine, as for the forward direction. */
  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int count = 0;
  if (cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn, wdesc, ydesc, conv, xdesc,
                                                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count,
                                                  perf) ||
      count < 2 || perf[0].mathType != CUDNN_TENSOR_OP_MATH)
    fail("%s: backward algorithms", name);
  for (int i = 0; i < count && perf[i].status == CUDNN_STATUS_SUCCESS; i++) {
    cudnnSetConvolutionMathType(conv, perf[i].mathType);
    size_t ws = 1;
    cudnnGetConvolutionBackwardDataWorkspaceSize(dnn, wdesc, ydesc, conv, xdesc, perf[i].algo,
                                                 &ws);
    if (ws != perf[i].memory || (ws == 0) != (perf[i].algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0))
      fail("%s: backward algo %d workspace %zu, listed %zu", name, perf[i].algo, ws,
           perf[i].memory);
    void *dws = NULL;
    if (ws)
      cudaMalloc(&dws, ws);
    scatter(dx0, hx, r, xd, xs, true);
    cudaMemcpy(ddx, hx, xsize * 4, cudaMemcpyHostToDevice);
    cudnnStatus_t st = cudnnConvolutionBackwardData(dnn, &t->alpha, wdesc, dw, ydesc, ddy, conv,
                                                    perf[i].algo, dws, ws, &t->beta, xdesc, ddx);
    if (st != CUDNN_STATUS_SUCCESS)
      fail("%s: cudnnConvolutionBackwardData algo %d: %s", name, perf[i].algo,
           cudnnGetErrorString(st));
    cudaMemcpy(hx, ddx, xsize * 4, cudaMemcpyDeviceToHost);
    scatter(got, hx, r, xd, xs, false);
    if (!close_arrays(name, got, want, xn, 1e-4f))
      fprintf(stderr, "  backward case: %s, algo %d\n", name, perf[i].algo);
    cudaFree(dws);
  }
  cudnnDestroyTensorDescriptor(xdesc);
  cudnnDestroyTensorDescriptor(ydesc);
  cudnnDestroyFilterDescriptor(wdesc);
  cudnnDestroyConvolutionDescriptor(conv);
  cudaFree(ddx), cudaFree(dw), cudaFree(ddy);
  free(dyv), free(w), free(dx0), free(want), free(got), free(hx), free(hy);
}

static void backward_cases(void) {
  int sizes[3][3] = {{1, 1, 10}, {1, 6, 8}, {4, 5, 3}};
  for (int ns = 1; ns <= 3; ns++)
    for (int ks = 1; ks <= 4; ks++)
      for (int stride = 1; stride <= 3; stride++)
        for (int pad = 0; pad <= 1; pad++)
          for (int dil = 1; dil <= 2; dil++) {
            Case t = base_case(ns);
            memcpy(t.in, sizes[ns - 1], sizeof t.in);
            fill3(t.ks, ns, ks);
            fill3(t.stride, ns, stride);
            fill3(t.pad, ns, pad);
            fill3(t.dil, ns, dil);
            bool fits = true;
            for (int i = 0; i < 3; i++)
              if (t.in[i] + 2 * t.pad[i] < (t.ks[i] - 1) * t.dil[i] + 1)
                fits = false;
            if (!fits || (ns == 3 && ks > 2))
              continue;
            t.groups = (ks + stride) % 2 ? 2 : 1;
            t.layout = (ks + pad) % 3;
            t.flip = ks == 3 && dil == 1;
            if (stride == 2) {
              t.alpha = 2.0f;
              t.beta = 0.5f;
            }
            run_backward(&t);
          }
}

int main(void) {
  if (cudnnCreate(&dnn) != CUDNN_STATUS_SUCCESS) {
    fprintf(stderr, "cudnnCreate failed\n");
    return 1;
  }
  expect(cudnnGetVersion() >= 90000, "cudnnGetVersion");
  forward_cases();
  depthwise_cases();
  channel_split_cases();
  three_by_three_cases();
  chan_cases();
  cudnnActivationMode_t modes[] = {CUDNN_ACTIVATION_IDENTITY, CUDNN_ACTIVATION_RELU,
                                   CUDNN_ACTIVATION_CLIPPED_RELU, CUDNN_ACTIVATION_SIGMOID,
                                   CUDNN_ACTIVATION_TANH};
  for (int i = 0; i < 5; i++) {
    run_fused(modes[i], false, 1.0f, 1.0f, 2);
    run_fused(modes[i], true, 0.5f, 2.0f, 2);
  }
  run_fused(CUDNN_ACTIVATION_RELU, false, 1.0f, 0.0f, 2);
  /* Without groups. */
  run_fused(CUDNN_ACTIVATION_RELU, true, 0.5f, 2.0f, 1);
  run_fused(CUDNN_ACTIVATION_SIGMOID, false, 1.0f, 1.0f, 1);
  for (int variant = 0; variant <= 6; variant++)
    run_folded(variant);
  kernel_folded_cases();
  backward_cases();
  /* Mismatched shapes are refused, not computed. */
  {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnCreateTensorDescriptor(&x);
    cudnnCreateTensorDescriptor(&y);
    cudnnCreateFilterDescriptor(&w);
    cudnnCreateConvolutionDescriptor(&conv);
    cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 3, 8, 8);
    cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 4, 7, 8);
    cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 3, 3, 3);
    cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    float one = 1, zero = 0, buf[512];
    expect(cudnnConvolutionForward(dnn, &one, x, buf, w, buf, conv, 0, NULL, 0, &zero, y, buf) ==
               CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
           "shape mismatch refused");
    expect(cudnnConvolutionForward(NULL, &one, x, buf, w, buf, conv, 0, NULL, 0, &zero, y, buf) ==
               CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
           "NULL handle refused");
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
  cudaDeviceSynchronize();
  cudnnDestroy(dnn);
  return finish("test_conv");
}
