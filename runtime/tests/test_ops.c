/*
 * test_ops.c - cuDNN's non-convolution operations against direct loops
 * written from the cuDNN and ONNX definitions: pooling, softmax, op tensor
 * broadcasting, add/scale/set, reductions (with indices), LRN, transform
 * (transposes and strided copies), activations and batch normalisation.
 */
#include <float.h>
#include <string.h>

#include <cudnn.h>
#include <cuda_runtime.h>

#include "testutil.h"

static cudnnHandle_t dnn;

static cudnnTensorDescriptor_t tensor(int rank, const int *dims, const int *strides) {
  cudnnTensorDescriptor_t t;
  cudnnCreateTensorDescriptor(&t);
  int packed[8], s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    packed[i] = s;
    s *= dims[i];
  }
  cudnnStatus_t st = cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, rank, dims, strides ? strides : packed);
  if (st)
    fail("cudnnSetTensorNdDescriptor: %s", cudnnGetErrorString(st));
  return t;
}

static long long count(int rank, const int *dims) {
  long long n = 1;
  for (int i = 0; i < rank; i++)
    n *= dims[i];
  return n;
}

/* Device copy of a host array. */
static float *upload(const float *h, long long n) {
  float *d;
  cudaMalloc((void **)&d, n * sizeof(float));
  cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
  return d;
}

static float *download(const float *d, long long n) {
  float *h = malloc(n * sizeof(float));
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  return h;
}

/* ---- pooling ---- */

static void test_pool_sized(int ns, cudnnPoolingMode_t mode, int win, int pad, int stride,
                            float beta, int height, int width) {
  int in[3] = {1, 1, 1}, o[3] = {1, 1, 1}, w3[3] = {1, 1, 1}, p3[3] = {0, 0, 0}, s3[3] = {1, 1, 1};
  int sizes[3] = {5, height, width};
  for (int i = 3 - ns; i < 3; i++) {
    in[i] = sizes[i];
    w3[i] = win;
    p3[i] = pad;
    s3[i] = stride;
    o[i] = (in[i] + 2 * pad - win) / stride + 1;
  }
  int N = 2, C = 3;
  int xd[5] = {N, C}, yd[5] = {N, C};
  for (int i = 0; i < ns; i++) {
    xd[2 + i] = in[3 - ns + i];
    yd[2 + i] = o[3 - ns + i];
  }
  long long xn = count(ns + 2, xd), yn = count(ns + 2, yd);
  float *x = rnd_array(xn), *y0 = rnd_array(yn), *want = malloc(yn * sizeof(float));
  /* Max pooling lets a NaN win. */
  if (mode == CUDNN_POOLING_MAX)
    x[xn / 2] = NAN;
  for (int n = 0; n < N * C; n++)
    for (int a = 0; a < o[0]; a++)
      for (int b = 0; b < o[1]; b++)
        for (int c = 0; c < o[2]; c++) {
          float mx = -FLT_MAX, sum = 0;
          int cnt = 0;
          for (int i = 0; i < w3[0]; i++)
            for (int j = 0; j < w3[1]; j++)
              for (int k = 0; k < w3[2]; k++) {
                int d = a * s3[0] - p3[0] + i, h = b * s3[1] - p3[1] + j, w = c * s3[2] - p3[2] + k;
                if (d < 0 || d >= in[0] || h < 0 || h >= in[1] || w < 0 || w >= in[2])
                  continue;
                float v = x[((long long)(n * in[0] + d) * in[1] + h) * in[2] + w];
                mx = v > mx || v != v ? v : mx;
                sum += v;
                cnt++;
              }
          float r = mode == CUDNN_POOLING_MAX ? mx
                    : mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                        ? sum / (w3[0] * w3[1] * w3[2])
                        : sum / cnt;
          long long at = ((long long)(n * o[0] + a) * o[1] + b) * o[2] + c;
          want[at] = r + beta * y0[at];
        }
  cudnnPoolingDescriptor_t pd;
  cudnnCreatePoolingDescriptor(&pd);
  int wa[3] = {win, win, win}, pa[3] = {pad, pad, pad}, sa[3] = {stride, stride, stride};
  expect(cudnnSetPoolingNdDescriptor(pd, mode, CUDNN_NOT_PROPAGATE_NAN, ns, wa, pa, sa) == 0,
         "set pooling");
  cudnnTensorDescriptor_t xt = tensor(ns + 2, xd, NULL), yt = tensor(ns + 2, yd, NULL);
  int od[5];
  expect(cudnnGetPoolingNdForwardOutputDim(pd, xt, ns + 2, od) == 0 &&
             memcmp(od, yd, (ns + 2) * sizeof(int)) == 0,
         "pooling output dims");
  float *dx = upload(x, xn), *dy = upload(y0, yn), one = 1;
  cudnnStatus_t st = cudnnPoolingForward(dnn, pd, &one, xt, dx, &beta, yt, dy);
  expect(st == CUDNN_STATUS_SUCCESS, "cudnnPoolingForward");
  float *got = download(dy, yn);
  char name[96];
  snprintf(name, sizeof name, "pool %dD %dx%d mode %d win %d pad %d stride %d beta %g", ns, height,
           width, mode, win, pad, stride, beta);
  for (long long i = 0; i < yn; i++)
    if (want[i] != want[i]) {
      if (got[i] == got[i])
        fail("%s: element %lld is %g, expected NaN", name, i, got[i]);
      want[i] = got[i] = 0;
    }
  close_arrays(name, got, want, yn, 1e-5f);
  cudaFree(dx), cudaFree(dy);
  free(x), free(y0), free(want), free(got);
  cudnnDestroyTensorDescriptor(xt);
  cudnnDestroyTensorDescriptor(yt);
  cudnnDestroyPoolingDescriptor(pd);
}

static void test_pool(int ns, cudnnPoolingMode_t mode, int win, int pad, int stride, float beta) {
  test_pool_sized(ns, mode, win, pad, stride, beta, 7, 8);
}

/* ---- softmax ---- */

/* rows: one value per position (H = W = 1), as attention's rows, long
 * enough to take several chunks, blended into y (alpha 0.5, beta 2). */
static void test_softmax(cudnnSoftmaxAlgorithm_t algo, cudnnSoftmaxMode_t mode, bool nhwc_out,
                         bool rows) {
  int N = rows ? 3 : 2, C = rows ? 600 : 5, H = rows ? 1 : 3, W = rows ? 1 : 4;
  int d[4] = {N, C, H, W};
  float alpha = rows ? 0.5f : 1.0f, beta = rows ? 2.0f : 0.0f;
  long long n = count(4, d);
  float *x = rnd_array(n), *y0 = rnd_array(n), *want = malloc(n * sizeof(float));
  for (long long i = 0; i < n; i++)
    x[i] *= rows ? 12 : 4; /* long rows: a few values still weigh */
  /* The groups: INSTANCE normalises over C*H*W, CHANNEL over C. */
  for (int b = 0; b < N; b++)
    for (int pos = 0; pos < (mode == CUDNN_SOFTMAX_MODE_CHANNEL ? H * W : 1); pos++) {
      int len = mode == CUDNN_SOFTMAX_MODE_CHANNEL ? C : C * H * W;
      long long at[1200];
      for (int i = 0; i < len; i++)
        at[i] = mode == CUDNN_SOFTMAX_MODE_CHANNEL ? ((long long)b * C + i) * H * W + pos
                                                   : (long long)b * C * H * W + i;
      double mx = -1e30, sum = 0;
      for (int i = 0; i < len; i++)
        mx = x[at[i]] > mx ? x[at[i]] : mx;
      for (int i = 0; i < len; i++)
        sum += exp(x[at[i]] - mx);
      for (int i = 0; i < len; i++) {
        double r = algo == CUDNN_SOFTMAX_LOG ? x[at[i]] - mx - log(sum) : exp(x[at[i]] - mx) / sum;
        want[at[i]] = (float)(alpha * r + beta * y0[at[i]]);
      }
    }
  int nhwc[4] = {H * W * C, 1, W * C, C};
  cudnnTensorDescriptor_t xt = tensor(4, d, NULL), yt = tensor(4, d, nhwc_out ? nhwc : NULL);
  float *dx = upload(x, n), *dy = upload(y0, n);
  expect(cudnnSoftmaxForward(dnn, algo, mode, &alpha, xt, dx, &beta, yt, dy) == 0, "softmax");
  float *raw = download(dy, n), *got = malloc(n * sizeof(float));
  for (int b = 0; b < N; b++)
    for (int c = 0; c < C; c++)
      for (int h = 0; h < H; h++)
        for (int w = 0; w < W; w++) {
          long long packed = ((long long)(b * C + c) * H + h) * W + w;
          got[packed] = nhwc_out ? raw[b * nhwc[0] + c + h * nhwc[2] + w * nhwc[3]] : raw[packed];
        }
  char name[64];
  snprintf(name, sizeof name, "softmax algo %d mode %d nhwc %d rows %d", algo, mode, nhwc_out,
           rows);
  close_arrays(name, got, want, n, 1e-5f);
  cudaFree(dx), cudaFree(dy);
  free(x), free(y0), free(want), free(raw), free(got);
  cudnnDestroyTensorDescriptor(xt);
  cudnnDestroyTensorDescriptor(yt);
}

/* ---- op tensor and add tensor ---- */

static float op_ref(cudnnOpTensorOp_t op, float a, float b) {
  switch (op) {
  case CUDNN_OP_TENSOR_ADD: return a + b;
  case CUDNN_OP_TENSOR_MUL: return a * b;
  case CUDNN_OP_TENSOR_MIN: return a < b ? a : b;
  case CUDNN_OP_TENSOR_MAX: return a > b ? a : b;
  case CUDNN_OP_TENSOR_SQRT: return sqrtf(a);
  default: return 1 - a;
  }
}

static void test_op_tensor(cudnnOpTensorOp_t op, const int *bdims, float beta) {
  int cd[4] = {2, 3, 4, 5};
  long long n = count(4, cd), bn = count(4, bdims);
  float *a = rnd_array(n), *b = rnd_array(bn), *c0 = rnd_array(n), *want = malloc(n * 4);
  if (op == CUDNN_OP_TENSOR_SQRT)
    for (long long i = 0; i < n; i++)
      a[i] = fabsf(a[i]);
  float alpha1 = op == CUDNN_OP_TENSOR_SQRT ? 2.0f : 2.0f, alpha2 = -0.5f;
  for (int i0 = 0; i0 < 2; i0++)
    for (int i1 = 0; i1 < 3; i1++)
      for (int i2 = 0; i2 < 4; i2++)
        for (int i3 = 0; i3 < 5; i3++) {
          long long at = ((i0 * 3 + i1) * 4 + i2) * 5 + i3;
          int j0 = bdims[0] == 1 ? 0 : i0, j1 = bdims[1] == 1 ? 0 : i1;
          int j2 = bdims[2] == 1 ? 0 : i2, j3 = bdims[3] == 1 ? 0 : i3;
          long long bt = ((j0 * bdims[1] + j1) * bdims[2] + j2) * bdims[3] + j3;
          want[at] = op_ref(op, alpha1 * a[at], alpha2 * b[bt]) + beta * c0[at];
        }
  cudnnOpTensorDescriptor_t od;
  cudnnCreateOpTensorDescriptor(&od);
  cudnnSetOpTensorDescriptor(od, op, CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN);
  cudnnTensorDescriptor_t ct = tensor(4, cd, NULL), btd = tensor(4, bdims, NULL);
  float *da = upload(a, n), *db = upload(b, bn), *dc = upload(c0, n);
  cudnnStatus_t st = cudnnOpTensor(dnn, od, &alpha1, ct, da, &alpha2, btd, db, &beta, ct, dc);
  expect(st == CUDNN_STATUS_SUCCESS, "cudnnOpTensor");
  float *got = download(dc, n);
  char name[96];
  snprintf(name, sizeof name, "op tensor %d b %dx%dx%dx%d beta %g", op, bdims[0], bdims[1],
           bdims[2], bdims[3], beta);
  close_arrays(name, got, want, n, 1e-5f);
  cudaFree(da), cudaFree(db), cudaFree(dc);
  free(a), free(b), free(c0), free(want), free(got);
  cudnnDestroyTensorDescriptor(ct);
  cudnnDestroyTensorDescriptor(btd);
  cudnnDestroyOpTensorDescriptor(od);
}

static void test_add_scale_set(void) {
  /* C lives inside a wider buffer: the gaps must stay untouched. */
  int cd[4] = {2, 3, 4, 5}, cs[4] = {3 * 4 * 8, 4 * 8, 8, 1}, ad[4] = {1, 3, 1, 1};
  long long size = 2 * cs[0], an = 3;
  float *c0 = rnd_array(size), *a = rnd_array(an), *want = malloc(size * 4);
  memcpy(want, c0, size * 4);
  float alpha = 1.5f, beta = 0.5f, scale = -2.0f, value = 7.0f;
  for (int i0 = 0; i0 < 2; i0++)
    for (int i1 = 0; i1 < 3; i1++)
      for (int i2 = 0; i2 < 4; i2++)
        for (int i3 = 0; i3 < 5; i3++) {
          long long at = i0 * cs[0] + i1 * cs[1] + i2 * cs[2] + i3;
          want[at] = scale * (alpha * a[i1] + beta * c0[at]);
        }
  cudnnTensorDescriptor_t ct = tensor(4, cd, cs), at = tensor(4, ad, NULL);
  float *dc = upload(c0, size), *da = upload(a, an);
  expect(cudnnAddTensor(dnn, &alpha, at, da, &beta, ct, dc) == 0, "cudnnAddTensor");
  expect(cudnnScaleTensor(dnn, ct, dc, &scale) == 0, "cudnnScaleTensor");
  float *got = download(dc, size);
  close_arrays("add + scale (strided)", got, want, size, 1e-5f);
  expect(cudnnSetTensor(dnn, ct, dc, &value) == 0, "cudnnSetTensor");
  free(got);
  got = download(dc, size);
  for (int i0 = 0; i0 < 2; i0++)
    for (int i1 = 0; i1 < 3; i1++)
      for (int i2 = 0; i2 < 4; i2++)
        for (int i3 = 0; i3 < 5; i3++)
          want[i0 * cs[0] + i1 * cs[1] + i2 * cs[2] + i3] = value;
  close_arrays("set (strided)", got, want, size, 0);
  cudaFree(dc), cudaFree(da);
  free(c0), free(a), free(want), free(got);
  cudnnDestroyTensorDescriptor(ct);
  cudnnDestroyTensorDescriptor(at);
}

/* ---- reductions ---- */

static void test_reduce(cudnnReduceTensorOp_t op, const int *cdims, bool indices) {
  int ad[4] = {2, 3, 4, 5};
  long long n = count(4, ad), cn = count(4, cdims);
  float *a = rnd_array(n), *want = malloc(cn * 4);
  unsigned *want_idx = calloc(cn, sizeof(unsigned));
  for (long long o = 0; o < cn; o++) {
    int oi[4] = {(int)(o / (cdims[1] * cdims[2] * cdims[3])), (int)(o / (cdims[2] * cdims[3]) % cdims[1]),
                 (int)(o / cdims[3] % cdims[2]), (int)(o % cdims[3])};
    double acc = op == CUDNN_REDUCE_TENSOR_MUL ? 1 : op == CUDNN_REDUCE_TENSOR_MIN ? 1e30
                 : op == CUDNN_REDUCE_TENSOR_MAX ? -1e30 : 0;
    long long k = 0, best = 0, cnt = 0;
    for (int i0 = 0; i0 < 2; i0++)
      for (int i1 = 0; i1 < 3; i1++)
        for (int i2 = 0; i2 < 4; i2++)
          for (int i3 = 0; i3 < 5; i3++) {
            int ii[4] = {i0, i1, i2, i3};
            bool mine = true;
            for (int d = 0; d < 4; d++)
              if (cdims[d] != 1 && ii[d] != oi[d])
                mine = false;
            if (!mine)
              continue;
            float v = a[((i0 * 3 + i1) * 4 + i2) * 5 + i3];
            switch (op) {
            case CUDNN_REDUCE_TENSOR_ADD: case CUDNN_REDUCE_TENSOR_AVG: acc += v; break;
            case CUDNN_REDUCE_TENSOR_MUL: acc *= v; break;
            case CUDNN_REDUCE_TENSOR_MIN: if (v < acc) { acc = v; best = k; } break;
            case CUDNN_REDUCE_TENSOR_MAX: if (v > acc) { acc = v; best = k; } break;
            case CUDNN_REDUCE_TENSOR_AMAX: if (fabs(v) > acc) { acc = fabs(v); best = k; } break;
            case CUDNN_REDUCE_TENSOR_NORM1: acc += fabs(v); break;
            case CUDNN_REDUCE_TENSOR_NORM2: acc += v * v; break;
            default: break;
            }
            k++;
            cnt++;
          }
    if (op == CUDNN_REDUCE_TENSOR_AVG)
      acc /= cnt;
    if (op == CUDNN_REDUCE_TENSOR_NORM2)
      acc = sqrt(acc);
    want[o] = (float)acc;
    want_idx[o] = (unsigned)best;
  }
  cudnnReduceTensorDescriptor_t rd;
  cudnnCreateReduceTensorDescriptor(&rd);
  cudnnSetReduceTensorDescriptor(rd, op, CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN,
                                 indices ? CUDNN_REDUCE_TENSOR_FLATTENED_INDICES
                                         : CUDNN_REDUCE_TENSOR_NO_INDICES,
                                 CUDNN_32BIT_INDICES);
  cudnnTensorDescriptor_t atd = tensor(4, ad, NULL), ctd = tensor(4, cdims, NULL);
  size_t ws = 1, isize = 0;
  cudnnGetReductionWorkspaceSize(dnn, rd, atd, ctd, &ws);
  cudnnGetReductionIndicesSize(dnn, rd, atd, ctd, &isize);
  expect(!indices || isize == cn * sizeof(unsigned), "reduction indices size");
  float *da = upload(a, n), *dc, one = 1, zero = 0;
  unsigned *didx = NULL;
  cudaMalloc((void **)&dc, cn * 4);
  if (isize)
    cudaMalloc((void **)&didx, isize);
  void *dws = NULL;
  bool reduces = cn < n;
  expect(reduces == (ws > 0), "a reduction needs a workspace");
  if (ws)
    cudaMalloc(&dws, ws);
  cudnnStatus_t st =
      cudnnReduceTensor(dnn, rd, didx, isize, dws, ws, &one, atd, da, &zero, ctd, dc);
  expect(st == CUDNN_STATUS_SUCCESS, "cudnnReduceTensor");
  cudaFree(dws);
  float *got = download(dc, cn);
  char name[64];
  snprintf(name, sizeof name, "reduce %d to %dx%dx%dx%d", op, cdims[0], cdims[1], cdims[2], cdims[3]);
  close_arrays(name, got, want, cn, 1e-5f);
  if (indices) {
    unsigned *gi = malloc(isize);
    cudaMemcpy(gi, didx, isize, cudaMemcpyDeviceToHost);
    for (long long o = 0; o < cn; o++)
      if (gi[o] != want_idx[o]) {
        fail("%s: index %lld is %u, expected %u", name, o, gi[o], want_idx[o]);
        break;
      }
    free(gi);
    cudaFree(didx);
  }
  cudaFree(da), cudaFree(dc);
  free(a), free(want), free(want_idx), free(got);
  cudnnDestroyTensorDescriptor(atd);
  cudnnDestroyTensorDescriptor(ctd);
  cudnnDestroyReduceTensorDescriptor(rd);
}

/* A channels-last GlobalAveragePool (channels-last int8 models' squeezes
 * and heads): each channel's mean, summed in double pixel by pixel, must
 * be the same bits as that sum rounded to float; 70 channels, so that the
 * runtime's runs of 64 leave a short one. With beta, C's old values
 * blend in. */
static void test_reduce_channels_last(float beta) {
  enum { N = 2, C = 70, H = 5, W = 6 };
  int ad[4] = {N, C, H, W}, as[4] = {H * W * C, 1, W * C, C}, cd[4] = {N, C, 1, 1};
  long long n = (long long)N * C * H * W;
  float *a = rnd_array(n), *old = rnd_array(N * C), *want = malloc(sizeof(float) * N * C);
  for (int i = 0; i < N; i++)
    for (int c = 0; c < C; c++) {
      double sum = 0;
      for (int p = 0; p < H * W; p++)
        sum += a[(long long)i * as[0] + p * C + c];
      float v = (float)(sum / (H * W));
      want[i * C + c] = beta != 0 ? v + beta * old[i * C + c] : v;
    }
  cudnnReduceTensorDescriptor_t rd;
  cudnnCreateReduceTensorDescriptor(&rd);
  cudnnSetReduceTensorDescriptor(rd, CUDNN_REDUCE_TENSOR_AVG, CUDNN_DATA_FLOAT,
                                 CUDNN_NOT_PROPAGATE_NAN, CUDNN_REDUCE_TENSOR_NO_INDICES,
                                 CUDNN_32BIT_INDICES);
  cudnnTensorDescriptor_t atd = tensor(4, ad, as), ctd = tensor(4, cd, NULL);
  size_t ws = 0;
  cudnnGetReductionWorkspaceSize(dnn, rd, atd, ctd, &ws);
  float *da = upload(a, n), *dc = upload(old, N * C), one = 1;
  void *dws = NULL;
  cudaMalloc(&dws, ws);
  expect(cudnnReduceTensor(dnn, rd, NULL, 0, dws, ws, &one, atd, da, &beta, ctd, dc) ==
             CUDNN_STATUS_SUCCESS,
         "cudnnReduceTensor of channels-last A");
  float *got = download(dc, N * C);
  for (int o = 0; o < N * C; o++)
    if (got[o] != want[o]) {
      fail("channels-last mean (beta %g): image %d channel %d is %.9g, expected %.9g", beta,
           o / C, o % C, got[o], want[o]);
      break;
    }
  cudaFree(dws), cudaFree(da), cudaFree(dc);
  free(a), free(old), free(want), free(got);
  cudnnDestroyTensorDescriptor(atd);
  cudnnDestroyTensorDescriptor(ctd);
  cudnnDestroyReduceTensorDescriptor(rd);
}

/* ---- LRN, from the ONNX operator's definition ---- */

static void test_lrn(int size, float alpha, float beta, float bias) {
  int d[4] = {2, 7, 3, 4}, C = 7, HW = 12;
  long long n = count(4, d);
  float *x = rnd_array(n), *want = malloc(n * 4);
  for (int b = 0; b < 2; b++)
    for (int c = 0; c < C; c++)
      for (int p = 0; p < HW; p++) {
        int lo = c - (size - 1) / 2, hi = c + (size - 1 + 1) / 2; /* floor and ceil of (size-1)/2 */
        if (lo < 0)
          lo = 0;
        if (hi > C - 1)
          hi = C - 1;
        double sq = 0;
        for (int j = lo; j <= hi; j++) {
          float v = x[(b * C + j) * HW + p];
          sq += v * v;
        }
        want[(b * C + c) * HW + p] = (float)(x[(b * C + c) * HW + p] / pow(bias + alpha / size * sq, beta));
      }
  cudnnLRNDescriptor_t ld;
  cudnnCreateLRNDescriptor(&ld);
  expect(cudnnSetLRNDescriptor(ld, size, alpha, beta, bias) == 0, "set LRN");
  cudnnTensorDescriptor_t t = tensor(4, d, NULL);
  float *dx = upload(x, n), *dy, one = 1, zero = 0;
  cudaMalloc((void **)&dy, n * 4);
  expect(cudnnLRNCrossChannelForward(dnn, ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, t, dx, &zero, t,
                                     dy) == 0,
         "cudnnLRNCrossChannelForward");
  float *got = download(dy, n);
  char name[64];
  snprintf(name, sizeof name, "lrn size %d", size);
  close_arrays(name, got, want, n, 1e-5f);
  cudaFree(dx), cudaFree(dy);
  free(x), free(want), free(got);
  cudnnDestroyTensorDescriptor(t);
  cudnnDestroyLRNDescriptor(ld);
}

/* ---- transform ---- */

static void test_nd_ex(void) {
  cudnnTensorDescriptor_t t;
  cudnnCreateTensorDescriptor(&t);
  int dims[5] = {2, 3, 4, 5, 6}, got[5], strides[5], nb;
  cudnnDataType_t type;
  expect(cudnnSetTensorNdDescriptorEx(t, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 5, dims) == 0, "NdEx");
  cudnnGetTensorNdDescriptor(t, 5, &type, &nb, got, strides);
  /* channels last: N, D, H, W, C in memory */
  int want[5] = {360, 1, 90, 18, 3};
  expect(nb == 5 && memcmp(strides, want, sizeof want) == 0 && memcmp(got, dims, sizeof dims) == 0,
         "NHWC strides of a 5-D tensor");
  int count = 0;
  expect(cudnnGetConvolutionForwardAlgorithmMaxCount(dnn, &count) == 0 && count >= 1, "max count");
  cudnnDestroyTensorDescriptor(t);
}

static void test_transform(void) {
  int d[4] = {2, 3, 4, 5};
  long long n = count(4, d);
  float *x = rnd_array(n), *want = malloc(n * 4);
  /* NCHW -> NHWC: y[b][h][w][c] = x[b][c][h][w] */
  for (int b = 0; b < 2; b++)
    for (int c = 0; c < 3; c++)
      for (int h = 0; h < 4; h++)
        for (int w = 0; w < 5; w++)
          want[((b * 4 + h) * 5 + w) * 3 + c] = x[((b * 3 + c) * 4 + h) * 5 + w];
  int nhwc[4] = {60, 1, 15, 3};
  cudnnTensorDescriptor_t xt = tensor(4, d, NULL), yt = tensor(4, d, nhwc);
  float *dx = upload(x, n), *dy, one = 1, zero = 0, half = 0.5f;
  cudaMalloc((void **)&dy, n * 4);
  expect(cudnnTransformTensor(dnn, &one, xt, dx, &zero, yt, dy) == 0, "transform");
  float *got = download(dy, n);
  close_arrays("transform NCHW->NHWC", got, want, n, 0);
  /* and back, blended: x2 = 0.5 * nhwc + 0.5 * x2 */
  float *x2 = rnd_array(n), *dx2 = upload(x2, n);
  expect(cudnnTransformTensor(dnn, &half, yt, dy, &half, xt, dx2) == 0, "transform back");
  free(got);
  got = download(dx2, n);
  for (long long i = 0; i < n; i++)
    want[i] = 0.5f * x[i] + 0.5f * x2[i];
  close_arrays("transform NHWC->NCHW blended", got, want, n, 1e-6f);
  /* 64-bit integers are moved bit for bit, but not scaled. */
  long long ints[60], back[60];
  for (int i = 0; i < 60; i++)
    ints[i] = 0x100000000LL * i + i;
  cudnnTensorDescriptor_t it, jt;
  cudnnCreateTensorDescriptor(&it);
  cudnnCreateTensorDescriptor(&jt);
  int packed[4] = {60, 20, 5, 1};
  cudnnSetTensorNdDescriptor(it, CUDNN_DATA_INT64, 4, (int[]){1, 3, 4, 5}, packed);
  cudnnSetTensorNdDescriptor(jt, CUDNN_DATA_INT64, 4, (int[]){1, 3, 4, 5}, (int[]){60, 1, 15, 3});
  long long *di, *dj;
  cudaMalloc((void **)&di, sizeof ints);
  cudaMalloc((void **)&dj, sizeof ints);
  cudaMemcpy(di, ints, sizeof ints, cudaMemcpyHostToDevice);
  expect(cudnnTransformTensor(dnn, &one, it, di, &zero, jt, dj) == 0, "int64 transform");
  expect(cudnnTransformTensor(dnn, &half, it, di, &zero, jt, dj) == CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
         "scaled int64 transform refused");
  cudaMemcpy(back, dj, sizeof back, cudaMemcpyDeviceToHost);
  for (int c = 0; c < 3; c++)
    for (int h = 0; h < 4; h++)
      for (int w = 0; w < 5; w++)
        if (back[(h * 5 + w) * 3 + c] != ints[(c * 4 + h) * 5 + w])
          fail("int64 transform at %d,%d,%d", c, h, w);
  cudaFree(di), cudaFree(dj), cudaFree(dx), cudaFree(dy), cudaFree(dx2);
  free(x), free(x2), free(want), free(got);
  cudnnDestroyTensorDescriptor(xt);
  cudnnDestroyTensorDescriptor(yt);
  cudnnDestroyTensorDescriptor(it);
  cudnnDestroyTensorDescriptor(jt);
}

/* ---- activations ---- */

static float act_ref(cudnnActivationMode_t m, float v, double coef) {
  switch (m) {
  case CUDNN_ACTIVATION_SIGMOID: return 1 / (1 + expf(-v));
  case CUDNN_ACTIVATION_RELU: return v > 0 ? v : 0;
  case CUDNN_ACTIVATION_TANH: return tanhf(v);
  case CUDNN_ACTIVATION_CLIPPED_RELU: return v < 0 ? 0 : v > coef ? (float)coef : v;
  case CUDNN_ACTIVATION_ELU: return v > 0 ? v : (float)(coef * (exp(v) - 1));
  case CUDNN_ACTIVATION_SWISH: return v / (1 + expf(-v));
  default: return v;
  }
}

static void test_activation(cudnnActivationMode_t mode, float alpha, float beta) {
  int d[4] = {3, 4, 5, 6};
  long long n = count(4, d);
  float *x = rnd_array(n), *y0 = rnd_array(n), *want = malloc(n * 4);
  for (long long i = 0; i < n; i++) {
    x[i] *= 3;
    want[i] = alpha * act_ref(mode, x[i], 0.7) + beta * y0[i];
  }
  cudnnActivationDescriptor_t ad;
  cudnnCreateActivationDescriptor(&ad);
  cudnnSetActivationDescriptor(ad, mode, CUDNN_NOT_PROPAGATE_NAN, 0.7);
  cudnnTensorDescriptor_t t = tensor(4, d, NULL);
  float *dx = upload(x, n), *dy = upload(y0, n);
  expect(cudnnActivationForward(dnn, ad, &alpha, t, dx, &beta, t, dy) == 0, "activation");
  float *got = download(dy, n);
  char name[64];
  snprintf(name, sizeof name, "activation %d", mode);
  close_arrays(name, got, want, n, 1e-5f);
  /* In place. */
  expect(cudnnActivationForward(dnn, ad, &alpha, t, dx, &beta, t, dx) == 0, "activation in place");
  free(got);
  got = download(dx, n);
  for (long long i = 0; i < n; i++)
    want[i] = alpha * act_ref(mode, x[i], 0.7) + beta * x[i];
  close_arrays("activation in place", got, want, n, 1e-5f);
  cudaFree(dx), cudaFree(dy);
  free(x), free(y0), free(want), free(got);
  cudnnDestroyTensorDescriptor(t);
  cudnnDestroyActivationDescriptor(ad);
}

/*
 * The sigmoids over the whole float range: where e^x overflows and
 * underflows, infinities, NaN, and a sweep in between, to 4 ulp of cuDNN's
 * formulas evaluated in float around a correctly rounded e^x.
 */
static void test_sigmoid_range(cudnnActivationMode_t mode) {
  static const float edges[] = {-200.0f, -104.5f, -90.0f, -88.72f, -87.0f, -50.0f, -20.0f,
                                -1e-3f, -1e-30f, 0.0f, 1e-30f, 1e-3f, 20.0f, 50.0f, 87.0f,
                                88.72f, 90.0f, 104.5f, 200.0f};
  int ne = (int)(sizeof edges / sizeof edges[0]);
  int d[4] = {1, 1, 1, ne + 3 + 1001};
  long long n = d[3];
  float *x = malloc(n * 4);
  for (int i = 0; i < ne; i++)
    x[i] = edges[i];
  x[ne] = INFINITY, x[ne + 1] = -INFINITY, x[ne + 2] = NAN;
  for (int i = 0; i <= 1000; i++)
    x[ne + 3 + i] = -110.0f + 0.22f * (float)i;
  cudnnActivationDescriptor_t ad;
  cudnnCreateActivationDescriptor(&ad);
  cudnnSetActivationDescriptor(ad, mode, CUDNN_PROPAGATE_NAN, 0);
  cudnnTensorDescriptor_t t = tensor(4, d, NULL);
  float *dx = upload(x, n), *dy = upload(x, n), one = 1, zero = 0;
  expect(cudnnActivationForward(dnn, ad, &one, t, dx, &zero, t, dy) == 0, "sigmoid range");
  float *got = download(dy, n);
  int bad = 0;
  for (long long i = 0; i < n; i++) {
    /* The float formula with e^-x correctly rounded: e^-x overflows to
     * inf, and the result to 0, where the float formula's does. */
    float e = (float)exp(-(double)x[i]);
    float w = mode == CUDNN_ACTIVATION_SWISH ? x[i] / (1.0f + e) : 1.0f / (1.0f + e);
    bool ok = isnan(w) ? isnan(got[i])
                       : fabsf(got[i] - w) <= 4 * 1.2e-7f * fabsf(w) + 1e-44f || got[i] == w;
    if (!ok && bad++ < 3)
      printf("  mode %d x %g: got %.9g, want %.9g\n", mode, x[i], got[i], w);
  }
  char name[64];
  snprintf(name, sizeof name, "activation %d over the float range", mode);
  expect(bad == 0, name);
  cudaFree(dx), cudaFree(dy);
  free(x), free(got);
  cudnnDestroyTensorDescriptor(t);
  cudnnDestroyActivationDescriptor(ad);
}

/* ---- batch normalisation ---- */

static void test_batchnorm(cudnnBatchNormMode_t mode) {
  int d[4] = {2, 3, 4, 5};
  int pd[4] = {1, 3, mode == CUDNN_BATCHNORM_SPATIAL ? 1 : 4, mode == CUDNN_BATCHNORM_SPATIAL ? 1 : 5};
  long long n = count(4, d), pn = count(4, pd);
  float *x = rnd_array(n), *g = rnd_array(pn), *b = rnd_array(pn), *m = rnd_array(pn);
  float *v = rnd_array(pn), *want = malloc(n * 4);
  for (long long i = 0; i < pn; i++)
    v[i] = fabsf(v[i]) + 0.1f;
  double eps = 1e-3;
  for (long long i = 0; i < n; i++) {
    long long c = i / 20 % 3, hw = i % 20;
    long long p = mode == CUDNN_BATCHNORM_SPATIAL ? c : c * 20 + hw;
    want[i] = (float)(g[p] * (x[i] - m[p]) / sqrt(v[p] + eps) + b[p]);
  }
  cudnnTensorDescriptor_t t = tensor(4, d, NULL), pt = tensor(4, pd, NULL);
  float *dx = upload(x, n), *dg = upload(g, pn), *db = upload(b, pn), *dm = upload(m, pn);
  float *dv = upload(v, pn), *dy, one = 1, zero = 0;
  cudaMalloc((void **)&dy, n * 4);
  expect(cudnnBatchNormalizationForwardInference(dnn, mode, &one, &zero, t, dx, t, dy, pt, dg, db,
                                                 dm, dv, eps) == 0,
         "batchnorm");
  float *got = download(dy, n);
  close_arrays(mode == CUDNN_BATCHNORM_SPATIAL ? "batchnorm spatial" : "batchnorm per activation",
               got, want, n, 1e-4f);
  cudaFree(dx), cudaFree(dg), cudaFree(db), cudaFree(dm), cudaFree(dv), cudaFree(dy);
  free(x), free(g), free(b), free(m), free(v), free(want), free(got);
  cudnnDestroyTensorDescriptor(t);
  cudnnDestroyTensorDescriptor(pt);
}

int main(void) {
  expect(cudnnCreate(&dnn) == CUDNN_STATUS_SUCCESS, "cudnnCreate");
  cudnnPoolingMode_t pmodes[3] = {CUDNN_POOLING_MAX, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                                  CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING};
  for (int ns = 1; ns <= 3; ns++)
    for (int m = 0; m < 3; m++) {
      test_pool(ns, pmodes[m], 3, 1, 2, 0);
      test_pool(ns, pmodes[m], 2, 0, 2, 0);
      test_pool(ns, pmodes[m], 3, 2, 1, 0.5f);
      test_pool(ns, pmodes[m], 3, 1, 1, 0); /* NASNet's cells' pools, by whole planes */
      test_pool(ns, pmodes[m], 4, 1, 3, 0); /* windows wider than the stride, clipped at both ends */
      /* 1x1 windows, which only sample x (NASNet's stride-2 paths), with and without beta */
      test_pool(ns, pmodes[m], 1, 0, 2, 0);
      test_pool(ns, pmodes[m], 1, 0, 3, 0.5f);
      /* Rows long enough for whole vectors and their tails, odd and even. */
      test_pool_sized(ns, pmodes[m], 3, 0, 2, 0, 37, 111);
      test_pool_sized(ns, pmodes[m], 3, 1, 2, 0, 36, 70);
      test_pool_sized(ns, pmodes[m], 5, 2, 1, 0, 19, 53);
    }
  for (int algo = CUDNN_SOFTMAX_FAST; algo <= CUDNN_SOFTMAX_LOG; algo++) {
    test_softmax(algo, CUDNN_SOFTMAX_MODE_INSTANCE, false, false);
    test_softmax(algo, CUDNN_SOFTMAX_MODE_CHANNEL, false, false);
    test_softmax(algo, CUDNN_SOFTMAX_MODE_CHANNEL, true, false);
    test_softmax(algo, CUDNN_SOFTMAX_MODE_CHANNEL, false, true);
    test_softmax(algo, CUDNN_SOFTMAX_MODE_INSTANCE, false, true);
  }
  int bshapes[5][4] = {{2, 3, 4, 5}, {1, 3, 1, 1}, {2, 1, 4, 1}, {1, 1, 1, 1}, {1, 3, 4, 5}};
  for (int op = CUDNN_OP_TENSOR_ADD; op <= CUDNN_OP_TENSOR_MAX; op++)
    for (int s = 0; s < 5; s++)
      test_op_tensor(op, bshapes[s], s % 2 ? 1.0f : 0.0f);
  test_op_tensor(CUDNN_OP_TENSOR_SQRT, bshapes[0], 0.5f);
  test_add_scale_set();
  /* {2, 3, 1, 1}: a global pool, whose two reduced dims are one row; {2, 1, 1, 5}: two
   * reduced dims that are one strided run. */
  int cshapes[6][4] = {{2, 1, 4, 1}, {1, 1, 1, 1}, {2, 3, 1, 5}, {2, 3, 4, 5}, {2, 3, 1, 1},
                       {2, 1, 1, 5}};
  for (int op = CUDNN_REDUCE_TENSOR_ADD; op <= CUDNN_REDUCE_TENSOR_NORM2; op++)
    for (int s = 0; s < 6; s++)
      test_reduce(op, cshapes[s], op == CUDNN_REDUCE_TENSOR_MAX || op == CUDNN_REDUCE_TENSOR_MIN);
  test_reduce_channels_last(0);
  test_reduce_channels_last(-0.75f);
  test_lrn(5, 1e-4f * 500, 0.75f, 2.0f);
  test_lrn(4, 0.3f, 0.5f, 1.0f);
  test_lrn(1, 0.1f, 1.0f, 1.0f);
  test_transform();
  test_nd_ex();
  for (int m = CUDNN_ACTIVATION_SIGMOID; m <= CUDNN_ACTIVATION_SWISH; m++) {
    test_activation(m, 1, 0);
    test_activation(m, 0.5f, 2.0f);
  }
  test_sigmoid_range(CUDNN_ACTIVATION_SIGMOID);
  test_sigmoid_range(CUDNN_ACTIVATION_SWISH);
  test_batchnorm(CUDNN_BATCHNORM_SPATIAL);
  test_batchnorm(CUDNN_BATCHNORM_PER_ACTIVATION);
  cudaDeviceSynchronize();
  cudnnDestroy(dnn);
  return finish("test_ops");
}
