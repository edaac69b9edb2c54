/*
 * test_kernels.c - the custom-kernel path: NVRTC "compilation" (which
 * checks kernel names against the built-in table), module look-ups, and a
 * launch of opc_copy_b4 doing a transpose split across the thread pool,
 * and launches of the 2-D pooling kernels, whose planes run along vectors
 * on AVX-512 (pool_vec.c) and folded whole elsewhere, and of the CPU
 * target's int8 convolution, the channels-last int8 depthwise one,
 * QuantizedAdd, the one-launch Concat (opc_concat_blocks, by parts) and
 * QuantizeLinear and DequantizeLinear transposing,
 * along AVX-512 where the CPU has it (int8_avx512.c) and in their plain
 * bodies with OPC_KERNEL_ISA=avx2 (meson.build runs both).
 * test_modules.c checks the versions and images the loads depend on.
 */
#include <math.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <nvrtc.h>

#include "../kernels/opc_kargs.h"
#include "testutil.h"

static const char *good_src =
    "struct opc_kargs;\n"
    "OPC_KERNEL(opc_copy_b4)\n"
    "{\n}\n";

/* PTX that any driver of CUDA 12.0 or later loads on a 9.0 device. */
static const char *plain_ptx = ".version 8.0\n.target sm_90\n.address_size 64\n";

static const char *bad_src =
    "#define OPC_KERNEL(name) whatever\n"
    "OPC_KERNEL(opc_copy_b4) {}\n"
    "OPC_KERNEL(opc_no_such_kernel) {}\n";

static void test_nvrtc(void) {
  nvrtcProgram prog;
  expect(nvrtcCreateProgram(&prog, good_src, "k.cu", 0, NULL, NULL) == NVRTC_SUCCESS, "create");
  const char *opts[] = {"--gpu-architecture=sm_90"};
  expect(nvrtcCompileProgram(prog, 1, opts) == NVRTC_SUCCESS, "compile");
  size_t size = 0;
  expect(nvrtcGetCUBINSize(prog, &size) == NVRTC_SUCCESS && size > 0, "cubin size");
  char *cubin = malloc(size);
  expect(nvrtcGetCUBIN(prog, cubin) == NVRTC_SUCCESS, "cubin");
  CUmodule mod;
  expect(cuModuleLoadData(&mod, cubin) == CUDA_SUCCESS, "module load");
  CUfunction f;
  expect(cuModuleGetFunction(&f, mod, "opc_copy_b4") == CUDA_SUCCESS, "opc_copy_b4 found");
  expect(cuModuleGetFunction(&f, mod, "opc_no_such_kernel") == CUDA_ERROR_NOT_FOUND,
         "unknown kernel not found");
  expect(cuModuleUnload(mod) == CUDA_SUCCESS, "unload");
  free(cubin);
  nvrtcDestroyProgram(&prog);
  expect(prog == NULL, "program destroyed");

  expect(nvrtcCreateProgram(&prog, bad_src, "k.cu", 0, NULL, NULL) == NVRTC_SUCCESS, "create bad");
  expect(nvrtcCompileProgram(prog, 0, NULL) == NVRTC_ERROR_COMPILATION, "unknown kernel refused");
  nvrtcGetProgramLogSize(prog, &size);
  char *log = malloc(size);
  nvrtcGetProgramLog(prog, log);
  expect(strstr(log, "opc_no_such_kernel") != NULL, "log names the kernel");
  expect(strstr(log, "'opc_copy_b4'") == NULL, "log does not blame a built-in kernel");
  free(log);
  nvrtcDestroyProgram(&prog);
}

static void test_launch(void) {
  int rows = 300, cols = 257;
  long long n = (long long)rows * cols;
  float *x = rnd_array(n), *want = malloc(n * 4), *got = malloc(n * 4);
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++)
      want[(long long)c * rows + r] = x[(long long)r * cols + c];
  float *dx, *dy;
  cudaMalloc((void **)&dx, n * 4);
  cudaMalloc((void **)&dy, n * 4);
  cudaMemcpy(dx, x, n * 4, cudaMemcpyHostToDevice);
  CUmodule mod;
  CUfunction copy;
  cuInit(0);
  expect(cuModuleLoadData(&mod, plain_ptx) == CUDA_SUCCESS, "module of plain PTX");
  expect(cuModuleGetFunction(&copy, mod, "opc_copy_b4") == CUDA_SUCCESS, "opc_copy_b4");
  /* Iterate over y = x^T: dims (cols, rows); y packed, x read transposed. */
  struct opc_kargs a;
  memset(&a, 0, sizeof a);
  a.x[0] = dx;
  a.y = dy;
  a.n = n;
  a.rank = 2;
  a.dims[0] = cols;
  a.dims[1] = rows;
  a.xstride[0][0] = 1;
  a.xstride[0][1] = cols;
  a.ystride[0] = rows;
  a.ystride[1] = 1;
  a.x_extent[0] = n * (long long)sizeof(float);
  a.y_extent = n * (long long)sizeof(float);
  void *params[] = {&a};
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  expect(cuLaunchKernel(copy, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, s, params, NULL) ==
             CUDA_SUCCESS,
         "launch");
  memset(&a, 0, sizeof a); /* the launch copied the arguments */
  expect(cuLaunchKernel(copy, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL) == CUDA_ERROR_INVALID_VALUE,
         "launch without arguments refused");
  cudaStreamSynchronize(s);
  cudaMemcpy(got, dy, n * 4, cudaMemcpyDeviceToHost);
  close_arrays("opc_copy_b4 transpose", got, want, n, 0);
  expect(cuModuleUnload(mod) == CUDA_SUCCESS, "unload");
  cudaStreamDestroy(s);
  cudaFree(dx);
  cudaFree(dy);
  free(x), free(want), free(got);
}

/* One output of opc_max_pool or opc_average_pool, as the kernels define
 * it: windows reaching past the input see fewer values, a NaN wins a
 * maximum, and a window with no input value gives -INFINITY (maximum) or a
 * NaN (average). */
static float pool_reference(const float *x, int IH, int IW, int KH, int KW, int SH, int SW,
                            int PH, int PW, int include_pad, bool is_max, int oh, int ow) {
  float m = -INFINITY, sum = 0;
  int count = 0;
  bool nan = false;
  for (int kh = 0; kh < KH; kh++)
    for (int kw = 0; kw < KW; kw++) {
      int h = oh * SH - PH + kh, w = ow * SW - PW + kw;
      if (h < 0 || h >= IH || w < 0 || w >= IW)
        continue;
      float v = x[h * IW + w];
      nan |= v != v;
      m = v > m ? v : m;
      sum += v;
      count++;
    }
  if (is_max)
    return nan ? NAN : m;
  if (include_pad)
    count = KH * KW;
  return count ? sum / count : NAN;
}

/* A 2-D pool of C planes of IH x IW into OH x OW, launched as net.c
 * launches it: dims (N, C, OH, OW, 1), the window along the first two
 * spatial dims. OH and OW may exceed the floor formula (ceil_mode), and
 * then some windows hold no input value. */
static void test_pool_kernel(CUmodule mod, bool is_max, int include_pad, int C, int IH, int IW,
                             int OH, int OW, int K, int S, int P) {
  long long xn = (long long)C * IH * IW, yn = (long long)C * OH * OW;
  float *x = rnd_array(xn), *want = malloc(yn * 4), *got = malloc(yn * 4);
  x[xn / 3] = NAN;
  x[xn / 2] = INFINITY;
  x[xn / 2 + 1] = -INFINITY;
  for (int c = 0; c < C; c++)
    for (int oh = 0; oh < OH; oh++)
      for (int ow = 0; ow < OW; ow++)
        want[((long long)c * OH + oh) * OW + ow] =
            pool_reference(x + (long long)c * IH * IW, IH, IW, K, K, S, S, P, P, include_pad,
                           is_max, oh, ow);
  float *dx, *dy;
  cudaMalloc((void **)&dx, xn * 4);
  cudaMalloc((void **)&dy, yn * 4);
  cudaMemcpy(dx, x, xn * 4, cudaMemcpyHostToDevice);
  CUfunction f;
  expect(cuModuleGetFunction(&f, mod, is_max ? "opc_max_pool" : "opc_average_pool") ==
             CUDA_SUCCESS,
         "pooling kernel");
  struct opc_kargs a;
  memset(&a, 0, sizeof a);
  a.x[0] = dx;
  a.y = dy;
  a.n = yn;
  a.rank = 5;
  long long dims[5] = {1, C, OH, OW, 1}, xs[5] = {xn, IH * IW, IW, 1, 1};
  long long ys[5] = {yn, OH * OW, OW, 1, 1};
  memcpy(a.dims, dims, sizeof dims);
  memcpy(a.xstride[0], xs, sizeof xs);
  memcpy(a.ystride, ys, sizeof ys);
  long long args[16] = {K, K, 1, S, S, 1, 1, 1, 1, P, P, 0, IH, IW, 1, include_pad};
  memcpy(a.i, args, sizeof args);
  a.x_extent[0] = xn * 4;
  a.y_extent = yn * 4;
  void *params[] = {&a};
  expect(cuLaunchKernel(f, (unsigned)((yn + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, params,
                        NULL) == CUDA_SUCCESS,
         "pooling launch");
  cudaMemcpy(got, dy, yn * 4, cudaMemcpyDeviceToHost);
  char name[128];
  snprintf(name, sizeof name, "%s pool %d planes %dx%d -> %dx%d window %d stride %d pad %d",
           is_max ? "max" : include_pad ? "average (padding counted)" : "average", C, IH, IW,
           OH, OW, K, S, P);
  for (long long i = 0; i < yn; i++)
    if (want[i] != want[i] || isinf(want[i])) {
      if (memcmp(&got[i], &want[i], 4) != 0 && !(got[i] != got[i] && want[i] != want[i]))
        fail("%s: element %lld is %g, expected %g", name, i, got[i], want[i]);
      want[i] = got[i] = 0;
    }
  close_arrays(name, got, want, yn, 1e-5f);
  cudaFree(dx);
  cudaFree(dy);
  free(x), free(want), free(got);
}

static void test_pools(void) {
  CUmodule mod;
  expect(cuModuleLoadData(&mod, plain_ptx) == CUDA_SUCCESS, "module for the pools");
  for (int m = 0; m < 3; m++) {
    bool is_max = m == 0;
    int include_pad = m == 2;
    test_pool_kernel(mod, is_max, include_pad, 5, 28, 28, 28, 28, 3, 1, 1);
    test_pool_kernel(mod, is_max, include_pad, 3, 35, 37, 35, 37, 3, 1, 1);
    test_pool_kernel(mod, is_max, include_pad, 4, 7, 7, 7, 7, 3, 1, 1);
    /* ceil_mode: the last window reaches past the input. */
    test_pool_kernel(mod, is_max, include_pad, 3, 56, 56, 28, 28, 3, 2, 0);
    test_pool_kernel(mod, is_max, include_pad, 2, 13, 13, 6, 6, 3, 2, 0);
    test_pool_kernel(mod, is_max, include_pad, 2, 40, 71, 20, 36, 2, 2, 0);
    /* Outputs wider than one vector, odd widths, stride 2 with padding. */
    test_pool_kernel(mod, is_max, include_pad, 2, 35, 73, 18, 37, 3, 2, 1);
    test_pool_kernel(mod, is_max, include_pad, 2, 9, 9, 9, 9, 5, 1, 2);
    if (!include_pad) /* windows wholly past the input */
      test_pool_kernel(mod, is_max, include_pad, 2, 6, 6, 5, 5, 2, 2, 0);
  }
  expect(cuModuleUnload(mod) == CUDA_SUCCESS, "unload the pools' module");
}

/* opc_max_pool_i8/u8: N images of C channels of IH x IW bytes, 2-D window
 * K, stride S, padding P, into OH x OW (OH, OW may exceed the floor
 * formula: then some windows hold no input value and give the type's
 * lowest), stored channels-last (the CPU form takes a pixel's channels at
 * once) or in ONNX's order; y compared exactly with the maxima computed
 * here. A changed input byte at a maximum must change y. */
static void test_byte_pool(CUmodule mod, bool x_signed, bool channels_last, int N, int C, int IH,
                           int IW, int OH, int OW, int K, int S, int P) {
  long long xn = (long long)N * C * IH * IW, yn = (long long)N * C * OH * OW;
  unsigned char *x = malloc(xn), *want = malloc(yn), *got = malloc(yn);
  int lowest = x_signed ? -128 : 0;
  /* strides of [N, C, H, W] in either layout */
  long long xs[5] = {(long long)C * IH * IW, channels_last ? 1 : IH * IW,
                     channels_last ? (long long)IW * C : IW, channels_last ? C : 1, 1};
  long long ys[5] = {(long long)C * OH * OW, channels_last ? 1 : OH * OW,
                     channels_last ? (long long)OW * C : OW, channels_last ? C : 1, 1};
  for (long long i = 0; i < xn; i++)
    x[i] = (unsigned char)((i * 37 + (i / 7) * 11) % 256 ^ (rng_state = rng_state * 1103515245u + 12345u) >> 24);
  long long at_max = -1;
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++) {
          int m = lowest;
          for (int kh = 0; kh < K; kh++)
            for (int kw = 0; kw < K; kw++) {
              int h = oh * S - P + kh, w = ow * S - P + kw;
              if (h < 0 || h >= IH || w < 0 || w >= IW)
                continue;
              long long i = n * xs[0] + c * xs[1] + h * xs[2] + w * xs[3];
              int v = x_signed ? (signed char)x[i] : x[i];
              if (v > m)
                m = v, at_max = i;
            }
          want[n * ys[0] + c * ys[1] + oh * ys[2] + ow * ys[3]] = (unsigned char)m;
        }
  void *dx, *dy;
  cudaMalloc(&dx, xn);
  cudaMalloc(&dy, yn);
  CUfunction f;
  expect(cuModuleGetFunction(&f, mod, x_signed ? "opc_max_pool_i8" : "opc_max_pool_u8") ==
             CUDA_SUCCESS,
         "opc_max_pool of bytes");
  struct opc_kargs a;
  memset(&a, 0, sizeof a);
  a.x[0] = dx, a.y = dy, a.n = yn, a.rank = 5;
  long long dims[5] = {N, C, OH, OW, 1};
  memcpy(a.dims, dims, sizeof dims);
  memcpy(a.xstride[0], xs, sizeof xs);
  memcpy(a.ystride, ys, sizeof ys);
  long long args[15] = {K, K, 1, S, S, 1, 1, 1, 1, P, P, 0, IH, IW, 1};
  memcpy(a.i, args, sizeof args);
  a.x_extent[0] = xn, a.y_extent = yn;
  char name[160];
  snprintf(name, sizeof name, "%s max pool %s %dx%d %dx%d -> %dx%d window %d stride %d pad %d",
           x_signed ? "int8" : "uint8", channels_last ? "channels-last" : "NCHW", N, C, IH, IW,
           OH, OW, K, S, P);
  void *params[] = {&a};
  for (int control = 0; control < 2; control++) {
    cudaMemcpy(dx, x, xn, cudaMemcpyHostToDevice);
    expect(cuLaunchKernel(f, (unsigned)((yn + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, params,
                          NULL) == CUDA_SUCCESS,
           "byte pool launch");
    cudaMemcpy(got, dy, yn, cudaMemcpyDeviceToHost);
    long long differ = 0, first = -1;
    for (long long i = 0; i < yn; i++)
      if (got[i] != want[i])
        first = first < 0 ? i : first, differ++;
    if (!control && differ)
      fail("%s: %lld of %lld differ; first %lld is %d, expected %d", name, differ, yn, first,
           got[first], want[first]);
    if (control && !differ)
      fail("%s: a maximum lowered left y as it was", name);
    x[at_max] = (unsigned char)lowest; /* the control: the last window's maximum lowered */
  }
  cudaFree(dx), cudaFree(dy);
  free(x), free(want), free(got);
}

static void test_byte_pools(void) {
  CUmodule mod;
  expect(cuModuleLoadData(&mod, plain_ptx) == CUDA_SUCCESS, "module for the byte pools");
  for (int s = 0; s < 2; s++)
    for (int last = 0; last < 2; last++) {
      test_byte_pool(mod, s, last, 1, 64, 112, 112, 56, 56, 3, 2, 1); /* ResNet's stem pool */
      test_byte_pool(mod, s, last, 2, 70, 13, 15, 7, 8, 3, 2, 0);     /* ceil_mode, 64 + 6 */
      test_byte_pool(mod, s, last, 1, 5, 9, 9, 9, 9, 3, 1, 1);
    }
  expect(cuModuleUnload(mod) == CUDA_SUCCESS, "unload the byte pools' module");
}

/* opc_quantized_lookup_i8/u8: y = table[x's byte], dense (its AVX-512
 * VBMI form where the CPU has it; 1000 bytes: a partial last vector) and
 * transposed (x read at strides, the plain loop); every byte value occurs.
 * A changed table entry must change y. */
static void test_lookup_case(CUmodule mod, bool x_signed, bool transposed) {
  enum { R = 40, C = 25, N = R * C };
  unsigned char x[N], table[256], want[N], got[N];
  for (int i = 0; i < N; i++)
    x[i] = (unsigned char)(i * 7 + i / 3);
  for (int b = 0; b < 256; b++)
    table[b] = (unsigned char)((b * 13 + 5) ^ (b >> 3));
  void *dx, *dt, *dy;
  cudaMalloc(&dx, N), cudaMalloc(&dt, 256), cudaMalloc(&dy, N);
  cudaMemcpy(dx, x, N, cudaMemcpyHostToDevice);
  CUfunction f;
  expect(cuModuleGetFunction(&f, mod, x_signed ? "opc_quantized_lookup_i8"
                                               : "opc_quantized_lookup_u8") == CUDA_SUCCESS,
         "opc_quantized_lookup");
  struct opc_kargs a;
  memset(&a, 0, sizeof a);
  a.x[0] = dx, a.x[1] = dt, a.y = dy, a.n = N;
  a.x_extent[0] = N, a.x_extent[1] = 256, a.y_extent = N;
  if (transposed) { /* y [R, C] of x stored [C, R] */
    a.rank = 2, a.dims[0] = R, a.dims[1] = C;
    a.xstride[0][0] = 1, a.xstride[0][1] = R, a.ystride[0] = C, a.ystride[1] = 1;
    for (int r = 0; r < R; r++)
      for (int c = 0; c < C; c++)
        want[r * C + c] = table[x[c * R + r]];
  } else {
    a.rank = 1, a.dims[0] = N, a.xstride[0][0] = 1, a.ystride[0] = 1;
    for (int i = 0; i < N; i++)
      want[i] = table[x[i]];
  }
  char name[96];
  snprintf(name, sizeof name, "opc_quantized_lookup %s %s", x_signed ? "int8" : "uint8",
           transposed ? "transposed" : "dense");
  void *params[] = {&a};
  for (int control = 0; control < 2; control++) {
    cudaMemcpy(dt, table, 256, cudaMemcpyHostToDevice);
    expect(cuLaunchKernel(f, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL) ==
               CUDA_SUCCESS,
           "lookup launch");
    cudaMemcpy(got, dy, N, cudaMemcpyDeviceToHost);
    int differ = 0;
    for (int i = 0; i < N; i++)
      differ += got[i] != want[i];
    if (!control && differ)
      fail("%s: %d of %d bytes differ", name, differ, N);
    if (control && !differ)
      fail("%s: a changed table entry left y as it was", name);
    table[x[N - 1]] ^= 0x81; /* the control: the entry of the last byte changed */
  }
  cudaFree(dx), cudaFree(dt), cudaFree(dy);
}

static void test_lookups(void) {
  CUmodule mod;
  expect(cuModuleLoadData(&mod, plain_ptx) == CUDA_SUCCESS, "module for the lookups");
  for (int s = 0; s < 2; s++)
    for (int t = 0; t < 2; t++)
      test_lookup_case(mod, s, t);
  expect(cuModuleUnload(mod) == CUDA_SUCCESS, "unload the lookups' module");
}

/* ---- opc_int8_conv_packed: the CPU target's int8 convolution */

typedef struct {
  int n, c, h, w, m, k, stride, dilation, pad; /* square filter, symmetric padding */
  bool x_signed;
  bool planar; /* x in ONNX's order [N, C, H, W] rather than channels-last */
} QConvCase;

static int out_size(const QConvCase *q, int in) {
  return (in + 2 * q->pad - q->dilation * (q->k - 1) - 1) / q->stride + 1;
}

/* opc_requantize_of (scalar/scalar.h), restated. */
static unsigned char requantize_byte(int s, float mult, float zero, float lo, float hi) {
  float q = rintf((float)s * mult) + zero;
  q = q >= lo ? (q <= hi ? q : hi) : lo;
  return (unsigned char)(int)q;
}

/* The convolution as ONNX's QLinearConv defines its integer sums, from
   the filter in its own order (not the packed one): sum over the taps
   inside x of (x - za)(w'), plus the bias; the padding adds nothing. */
static int qconv_sum(const QConvCase *q, const int *x, int za, const int *w, int bias, int img,
                     int oh, int ow, int m) {
  int s = bias;
  for (int r = 0; r < q->k; r++)
    for (int t = 0; t < q->k; t++) {
      int hh = oh * q->stride - q->pad + r * q->dilation;
      int ww = ow * q->stride - q->pad + t * q->dilation;
      if (hh < 0 || hh >= q->h || ww < 0 || ww >= q->w)
        continue;
      for (int c = 0; c < q->c; c++)
        s += (x[((img * q->h + hh) * q->w + ww) * q->c + c] - za) *
             w[((m * q->k + r) * q->k + t) * q->c + c];
    }
  return s;
}

/* Launches the kernel on packed filter and correction, as the backend
   emits it (the contract in opc_kernels.inc); y's bytes into got. */
static void launch_qconv(CUmodule mod, const QConvCase *q, const unsigned char *xb,
                         const signed char *packed, const int *corr, const float *mult,
                         int za, float zero, float lo, float hi, unsigned char *got) {
  int oh = out_size(q, q->h), ow = out_size(q, q->w);
  long long xn = (long long)q->n * q->h * q->w * q->c, pixels = (long long)q->n * oh * ow;
  long long k4 = ((long long)q->k * q->k * q->c + 3) / 4 * 4, m16 = (q->m + 15) / 16 * 16;
  void *dx, *dw, *dc, *dm, *dy;
  cudaMalloc(&dx, xn);
  cudaMalloc(&dw, m16 * k4);
  cudaMalloc(&dc, m16 * 4);
  cudaMalloc(&dm, q->m * 4);
  cudaMalloc(&dy, pixels * q->m);
  cudaMemcpy(dx, xb, xn, cudaMemcpyHostToDevice);
  cudaMemcpy(dw, packed, m16 * k4, cudaMemcpyHostToDevice);
  cudaMemcpy(dc, corr, m16 * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dm, mult, q->m * 4, cudaMemcpyHostToDevice);
  CUfunction f;
  expect(cuModuleGetFunction(&f, mod, q->x_signed ? "opc_int8_conv_packed_i8"
                                                  : "opc_int8_conv_packed_u8") == CUDA_SUCCESS,
         "opc_int8_conv_packed");
  struct opc_kargs a;
  memset(&a, 0, sizeof a);
  a.x[0] = dx, a.x[1] = dw, a.x[2] = dc, a.x[3] = dm, a.y = dy;
  a.rank = 2;
  a.dims[0] = (pixels + 11) / 12;
  a.dims[1] = (q->m + 63) / 64;
  a.n = a.dims[0] * a.dims[1];
  a.x_extent[0] = xn, a.x_extent[1] = m16 * k4, a.x_extent[2] = m16 * 4, a.x_extent[3] = q->m * 4;
  a.y_extent = pixels * q->m;
  int add = q->x_signed ? 128 : 0;
  long long args[16] = {q->c,          q->h,       q->w,      q->k,      q->k,
                        q->stride,     q->stride,  q->dilation, q->dilation, q->pad,
                        q->pad,        ow,         (long long)oh * ow, q->m, za + add,
                        pixels};
  memcpy(a.i, args, sizeof args);
  a.f[0] = lo, a.f[1] = hi, a.f[2] = zero, a.f[3] = q->planar;
  void *params[] = {&a};
  expect(cuLaunchKernel(f, (unsigned)((a.n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, params,
                        NULL) == CUDA_SUCCESS,
         "opc_int8_conv_packed launch");
  cudaMemcpy(got, dy, pixels * q->m, cudaMemcpyDeviceToHost);
  cudaFree(dx), cudaFree(dw), cudaFree(dc), cudaFree(dm), cudaFree(dy);
}

/* x of photograph-like runs (smooth ramps plus a little noise, so the sums
   move with x), a filter of small signed values and a bias; the
   multipliers are set from the sums so that y spans its range. */
static void test_qconv_case(CUmodule mod, const QConvCase *q) {
  int oh = out_size(q, q->h), ow = out_size(q, q->w);
  long long xn = (long long)q->n * q->h * q->w * q->c, pixels = (long long)q->n * oh * ow;
  long long kk = (long long)q->k * q->k * q->c, k4 = (kk + 3) / 4 * 4;
  long long m16 = (q->m + 15) / 16 * 16;
  int lo_x = q->x_signed ? -128 : 0, za = q->x_signed ? -3 : 121, zy = q->x_signed ? 5 : 118;
  int *x = malloc(xn * sizeof(int)), *w = malloc(q->m * kk * sizeof(int)), *bias = malloc(q->m * 4);
  unsigned char *xb = malloc(xn);
  for (long long i = 0; i < xn; i++) {
    long long pix = i / q->c, ch = i % q->c;
    int v = (int)((pix * 7 + ch * 13) % 251) + (int)(rng_state = rng_state * 1103515245u + 12345u) % 5;
    x[i] = lo_x + (v < 0 ? 0 : v > 255 ? 255 : v);
    xb[i] = (unsigned char)x[i];
  }
  if (q->planar) /* the same x, stored [N, C, H, W] */
    for (long long i = 0; i < xn; i++) {
      long long pix = i / q->c, ch = i % q->c, img = pix / ((long long)q->h * q->w);
      xb[(img * q->c + ch) * q->h * q->w + pix % ((long long)q->h * q->w)] = (unsigned char)x[i];
    }
  for (long long i = 0; i < q->m * kk; i++)
    w[i] = (int)((rng_state = rng_state * 1103515245u + 12345u) >> 16) % 255 - 127;
  for (int m = 0; m < q->m; m++)
    bias[m] = (m * 977) % 4001 - 2000;
  /* The filter packed and the correction, as the contract says. */
  signed char *packed = calloc(m16 * k4, 1);
  int *corr = calloc(m16, sizeof(int));
  for (int m = 0; m < q->m; m++) {
    unsigned colsum = 0;
    for (long long k = 0; k < kk; k++) { /* w's k: tap (r K + t) C + c */
      long long tap = k / q->c, c = k % q->c;
      long long at = q->planar ? c * q->k * q->k + tap : k; /* x [N, C, H, W]: (c K + r) K + t */
      packed[((m / 16 * (k4 / 4) + at / 4) * 16 + m % 16) * 4 + at % 4] = (signed char)w[m * kk + k];
      colsum += (unsigned)w[m * kk + k];
    }
    corr[m] = (int)((unsigned)bias[m] - (unsigned)(za + (q->x_signed ? 128 : 0)) * colsum);
  }
  int *sums = malloc(pixels * q->m * sizeof(int));
  int largest = 1;
  for (long long p = 0; p < pixels; p++)
    for (int m = 0; m < q->m; m++) {
      int img = (int)(p / (oh * ow)), hw = (int)(p % (oh * ow));
      int s = qconv_sum(q, x, za, w, bias[m], img, hw / ow, hw % ow, m);
      sums[p * q->m + m] = s;
      largest = abs(s) > largest ? abs(s) : largest;
    }
  float *mult = malloc(q->m * 4);
  for (int m = 0; m < q->m; m++)
    mult[m] = (200.0f + (float)(m % 7) * 10.0f) / (float)largest;
  float lo = q->x_signed ? -128.0f : 0.0f, hi = lo + 255.0f;
  unsigned char *want = malloc(pixels * q->m), *got = malloc(pixels * q->m);
  int seen[256] = {0}, distinct = 0;
  for (long long i = 0; i < pixels * q->m; i++) {
    want[i] = requantize_byte(sums[i], mult[i % q->m], (float)zy, lo, hi);
    distinct += !seen[want[i]]++;
  }
  char name[160];
  snprintf(name, sizeof name, "opc_int8_conv_packed %s%s n%d c%d %dx%d m%d k%d s%d d%d p%d",
           q->x_signed ? "int8" : "uint8", q->planar ? " NCHW" : "", q->n, q->c, q->h, q->w, q->m, q->k, q->stride,
           q->dilation, q->pad);
  if (distinct < 64)
    fail("%s: y takes %d values only: the case cannot tell a wrong sum", name, distinct);
  launch_qconv(mod, q, xb, packed, corr, mult, za, (float)zy, lo, hi, got);
  for (long long i = 0; i < pixels * q->m; i++)
    if (got[i] != want[i]) {
      fail("%s: pixel %lld channel %lld is %d, expected %d", name, i / q->m, i % q->m, got[i],
           want[i]);
      break;
    }
  /* Negative control: a filter byte of the last channel changed must change y. */
  packed[(((q->m - 1) / 16 * (k4 / 4)) * 16 + (q->m - 1) % 16) * 4] ^= 0x40;
  launch_qconv(mod, q, xb, packed, corr, mult, za, (float)zy, lo, hi, got);
  bool moved = false;
  for (long long i = 0; i < pixels * q->m; i++)
    moved |= got[i] != want[i];
  if (!moved)
    fail("%s: a changed filter byte left y as it was", name);
  free(x), free(w), free(bias), free(xb), free(packed), free(corr), free(sums), free(mult);
  free(want), free(got);
}

static void test_qconv(void) {
  CUmodule mod;
  expect(cuModuleLoadData(&mod, plain_ptx) == CUDA_SUCCESS, "module for opc_int8_conv_packed");
  const QConvCase cases[] = {
      {1, 64, 14, 14, 64, 1, 1, 1, 0, false, false},   /* whole units: 64 channels, 12-pixel tiles */
      {1, 64, 14, 14, 64, 1, 1, 1, 0, true, false},
      {2, 3, 19, 17, 70, 3, 2, 1, 1, false, false},    /* the stem's few channels, a partial group */
      {1, 32, 9, 11, 130, 3, 1, 2, 2, true, false},    /* dilated, 130 channels: 2 groups and 2 */
      {1, 600, 5, 5, 33, 3, 1, 1, 1, false, false},    /* K 5400: rows gathered in chunks */
      {1, 5, 7, 7, 17, 5, 3, 1, 2, true, false},       /* K 125, not a multiple of 4 */
      {2, 3, 23, 21, 32, 7, 2, 1, 3, false, true},     /* a stem: x [N, C, H, W] */
      {1, 8, 9, 9, 20, 1, 1, 1, 0, true, true},        /* 1x1 of x [N, C, H, W] */
      {1, 3, 30, 30, 64, 3, 2, 1, 1, true, true},      /* MobileNet's stem, int8 x */
      {1, 3, 9, 40, 16, 3, 1, 2, 2, false, true},      /* dilated along W: tap by tap */
      {1, 700, 6, 5, 20, 3, 1, 1, 1, false, true},     /* K 6300 [N, C, H, W]: chunks cut rows */
      {1, 256, 5, 5, 520, 3, 1, 1, 1, false, false},   /* a 1.2 MB filter: units group by group */
      {2, 2048, 3, 3, 512, 1, 1, 1, 0, true, false},   /* 1 MB, 1x1, two images: the same */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    test_qconv_case(mod, &cases[i]);
  expect(cuModuleUnload(mod) == CUDA_SUCCESS, "unload opc_int8_conv_packed's module");
}

/* ---- opc_conv_nhwc and opc_conv_depthwise_nhwc: the CPU target's float
   convolutions, channels-last, with their bias, residual and activation */

typedef struct {
  int n, c, h, w, m, k, stride, dilation, pad; /* square filter, symmetric padding */
  bool depthwise;                              /* m = c, one channel per group */
  bool residual;
  int act; /* scalar.h's code: 0 none, 1 relu, 2 clip, 7 silu, 10 hard_swish */
  bool planar; /* x in ONNX's order [N, C, H, W] (opc_conv_nhwc's f[2]) */
} FConvCase;

static int fconv_out(const FConvCase *q, int in) {
  return (in + 2 * q->pad - q->dilation * (q->k - 1) - 1) / q->stride + 1;
}

/* The activations the cases take, restated from scalar.h's formulas. */
static double fconv_act(int act, double v) {
  switch (act) {
  case 1: return v > 0 ? v : 0;
  case 2: return v < -1.5 ? -1.5 : v > 2.0 ? 2.0 : v;
  case 7: return v / (1.0 + exp(-v));
  case 10: { double r = v / 6.0 + 0.5; return v * (r < 0 ? 0 : r > 1 ? 1 : r); }
  }
  return v;
}

/* Launches the kernel as the backend emits it (the contracts in
   opc_kernels.inc) on a packed filter; y into got. */
static void launch_fconv(CUmodule mod, const FConvCase *q, const float *x, const float *packed,
                         long long packed_n, const float *bias, const float *z, float *got) {
  int oh = fconv_out(q, q->h), ow = fconv_out(q, q->w);
  long long xn = (long long)q->n * q->h * q->w * q->c, pixels = (long long)q->n * oh * ow;
  long long m16 = (q->m + 15) / 16 * 16, yn = pixels * q->m;
  void *dx, *dw, *db, *dz = NULL, *dy;
  cudaMalloc(&dx, xn * 4);
  cudaMalloc(&dw, packed_n * 4);
  cudaMalloc(&db, m16 * 4);
  cudaMalloc(&dy, yn * 4);
  cudaMemcpy(dx, x, xn * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dw, packed, packed_n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, bias, m16 * 4, cudaMemcpyHostToDevice);
  if (q->residual) {
    cudaMalloc(&dz, yn * 4);
    cudaMemcpy(dz, z, yn * 4, cudaMemcpyHostToDevice);
  }
  const char *kernel = q->depthwise ? "opc_conv_depthwise_nhwc" : "opc_conv_nhwc";
  CUfunction f;
  expect(cuModuleGetFunction(&f, mod, kernel) == CUDA_SUCCESS, kernel);
  struct opc_kargs a;
  memset(&a, 0, sizeof a);
  a.x[0] = dx, a.x[1] = dw, a.x[2] = db, a.x[3] = dz, a.y = dy;
  if (q->depthwise) {
    a.rank = 3;
    a.dims[0] = q->n, a.dims[1] = oh, a.dims[2] = (q->c + 63) / 64;
    a.n = a.dims[0] * a.dims[1] * a.dims[2];
  } else {
    a.rank = 2;
    a.dims[0] = (pixels + 11) / 12, a.dims[1] = (q->m + 63) / 64;
    a.n = a.dims[0] * a.dims[1];
  }
  a.x_extent[0] = xn * 4, a.x_extent[1] = packed_n * 4, a.x_extent[2] = m16 * 4;
  a.x_extent[3] = q->residual ? yn * 4 : 0;
  a.y_extent = yn * 4;
  a.xstride[0][0] = q->planar ? 1 : q->c, a.xstride[3][0] = q->m, a.ystride[0] = q->m;
  a.f[2] = q->planar;
  long long args[16] = {q->c,      q->h,      q->w,        q->k,        q->k, q->stride,
                        q->stride, q->dilation, q->dilation, q->pad,     q->pad, ow,
                        (long long)oh * ow, q->m, q->act,    pixels};
  memcpy(a.i, args, sizeof args);
  a.f[0] = -1.5f, a.f[1] = 2.0f; /* Clip's bounds */
  a.f[2] = q->planar;
  void *params[] = {&a};
  expect(cuLaunchKernel(f, (unsigned)((a.n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, params,
                        NULL) == CUDA_SUCCESS,
         kernel);
  cudaMemcpy(got, dy, yn * 4, cudaMemcpyDeviceToHost);
  cudaFree(dx), cudaFree(dw), cudaFree(db), cudaFree(dy);
  if (dz)
    cudaFree(dz);
}

/* x photograph-like (smooth ramps plus a little noise), a filter of
   zero-mean values scaled by 1/sqrt(taps), so that y is of x's size and
   moves with it; each value checked against a double sum from the filter
   in ONNX's order, within 1e-5 of the sum of the products' magnitudes. */
static void test_fconv_case(CUmodule mod, const FConvCase *q) {
  int oh = fconv_out(q, q->h), ow = fconv_out(q, q->w);
  long long xn = (long long)q->n * q->h * q->w * q->c, pixels = (long long)q->n * oh * ow;
  long long cin = q->depthwise ? 1 : q->c, taps = (long long)q->k * q->k;
  long long m16 = (q->m + 15) / 16 * 16, yn = pixels * q->m;
  long long packed_n = q->depthwise ? taps * m16 : m16 * taps * q->c;
  float *x = malloc(xn * 4), *w = malloc(q->m * cin * taps * 4), *bias = calloc(m16, 4);
  float *z = malloc(yn * 4), *packed = calloc(packed_n, 4), *got = malloc(yn * 4), *xplanar = NULL;
  double *want = malloc(yn * 8), *scale = malloc(yn * 8);
  for (long long i = 0; i < xn; i++) {
    long long pix = i / q->c, ch = i % q->c;
    x[i] = (float)((pix * 7 + ch * 13) % 101) / 50.0f - 1.0f +
           (float)((rng_state = rng_state * 1103515245u + 12345u) >> 24) / 2560.0f;
  }
  float gain = 1.0f / sqrtf((float)(cin * taps));
  for (long long i = 0; i < q->m * cin * taps; i++)
    w[i] = gain * ((float)((rng_state = rng_state * 1103515245u + 12345u) >> 16 & 0xffff) / 32768.0f - 1.0f);
  for (int m = 0; m < q->m; m++)
    bias[m] = (float)((m * 37) % 19) / 19.0f - 0.5f;
  for (long long i = 0; i < yn; i++)
    z[i] = (float)(i % 29) / 29.0f - 0.4f;
  if (q->planar) { /* the same x, stored [N, C, H, W] for the kernel */
    float *nchw = malloc(xn * 4);
    for (long long i = 0; i < xn; i++) {
      long long pix = i / q->c, ch = i % q->c, img = pix / ((long long)q->h * q->w);
      nchw[(img * q->c + ch) * q->h * q->w + pix % ((long long)q->h * q->w)] = x[i];
    }
    xplanar = nchw;
  }
  /* w [M, Cin, K, K] packed as the contracts say. */
  for (int m = 0; m < q->m; m++)
    for (long long c = 0; c < cin; c++)
      for (long long t = 0; t < taps; t++) {
        float v = w[(m * cin + c) * taps + t];
        if (q->depthwise)
          packed[t * m16 + m] = v;
        else
          packed[(m / 16 * taps * q->c + (q->planar ? c * taps + t : t * q->c + c)) * 16 + m % 16] = v;
      }
  for (long long p = 0; p < pixels; p++) {
    int img = (int)(p / (oh * ow)), hw = (int)(p % (oh * ow));
    for (int m = 0; m < q->m; m++) {
      double s = bias[m], mag = fabs(bias[m]);
      for (long long t = 0; t < taps; t++) {
        int hh = hw / ow * q->stride - q->pad + (int)(t / q->k) * q->dilation;
        int ww = hw % ow * q->stride - q->pad + (int)(t % q->k) * q->dilation;
        if (hh < 0 || hh >= q->h || ww < 0 || ww >= q->w)
          continue;
        for (long long c = 0; c < cin; c++) {
          long long ch = q->depthwise ? m : c;
          double prod = (double)x[((img * q->h + hh) * q->w + ww) * q->c + ch] *
                        w[(m * cin + c) * taps + t];
          s += prod, mag += fabs(prod);
        }
      }
      if (q->residual)
        s += z[p * q->m + m], mag += fabs(z[p * q->m + m]);
      want[p * q->m + m] = fconv_act(q->act, s);
      scale[p * q->m + m] = mag;
    }
  }
  char name[160];
  snprintf(name, sizeof name, "%s n%d c%d %dx%d m%d k%d s%d d%d p%d%s act %d",
           q->depthwise ? "opc_conv_depthwise_nhwc" : "opc_conv_nhwc", q->n, q->c, q->h, q->w,
           q->m, q->k, q->stride, q->dilation, q->pad, q->residual ? " +z" : "", q->act);
  launch_fconv(mod, q, xplanar ? xplanar : x, packed, packed_n, bias, z, got);
  double spread = 0;
  for (long long i = 0; i < yn; i++)
    spread += fabs(want[i] - want[0]);
  for (long long i = 0; i < yn; i++) {
    if (!(fabs(got[i] - want[i]) <= 1e-5 * scale[i] + 1e-6)) {
      fail("%s: pixel %lld channel %lld is %.7g, expected %.7g", name, i / q->m, i % q->m,
           got[i], want[i]);
      break;
    }
  }
  if (spread < 0.1 * (double)yn)
    fail("%s: y hardly varies: the case cannot tell a wrong sum", name);
  /* Negative control: the last channel's first tap changed must move y. */
  long long last = q->m - 1;
  packed[q->depthwise ? last : (last / 16 * taps * q->c) * 16 + last % 16] += 0.5f;
  launch_fconv(mod, q, xplanar ? xplanar : x, packed, packed_n, bias, z, got);
  bool moved = false;
  for (long long i = 0; i < yn; i++)
    moved |= fabs(got[i] - want[i]) > 1e-5 * scale[i] + 1e-6;
  if (!moved)
    fail("%s: a changed filter value left y as it was", name);
  free(x), free(w), free(bias), free(z), free(packed), free(got), free(want), free(scale);
  free(xplanar);
}

static void test_fconv(void) {
  CUmodule mod;
  expect(cuModuleLoadData(&mod, plain_ptx) == CUDA_SUCCESS, "module for opc_conv_nhwc");
  const FConvCase cases[] = {
      {1, 64, 14, 14, 64, 1, 1, 1, 0, false, false, 0, false},   /* whole units: 64 channels, 12 pixels */
      {1, 64, 14, 14, 64, 1, 1, 1, 0, false, true, 1, false},    /* with a residual and relu */
      {2, 3, 19, 17, 70, 7, 2, 1, 3, false, false, 1, false},    /* a stem: 3 channels, partial blocks */
      {1, 32, 9, 11, 130, 3, 1, 2, 2, false, true, 2, false},    /* dilated, 130 channels, clip */
      {1, 40, 7, 7, 24, 1, 1, 1, 0, false, false, 7, false},     /* 2 blocks of 12 pixels, silu */
      {1, 24, 8, 8, 40, 3, 2, 1, 1, false, false, 10, false},    /* 3 blocks, hard swish */
      {1, 16, 5, 5, 8, 3, 1, 1, 1, false, false, 0, false},      /* one partial block */
      {1, 256, 5, 5, 520, 3, 1, 1, 1, false, false, 1, false},   /* a 4.8 MB filter: group by group */
      {1, 144, 14, 14, 144, 3, 1, 1, 1, true, false, 1, false},  /* depthwise, 3x3, 144 channels */
      {2, 24, 9, 13, 24, 3, 2, 1, 1, true, true, 2, false},      /* strided, two images, residual */
      {1, 40, 11, 11, 40, 5, 1, 1, 2, true, false, 7, false},    /* 5x5, silu */
      {1, 72, 10, 10, 72, 3, 1, 2, 2, true, false, 0, false},    /* dilated */
      {1, 40, 13, 19, 40, 5, 2, 1, 2, true, true, 10, false},   /* 5x5, stride 2: rows of 8 and 2 */
      {1, 16, 3, 3, 16, 5, 1, 1, 2, true, false, 10, false},     /* every window past the edges */
      {1, 32, 6, 40, 32, 3, 1, 1, 1, true, false, 1, false},     /* wide rows: blocks inside x */
      {1, 24, 7, 61, 24, 5, 2, 1, 2, true, true, 7, false},      /* the same, 5x5, stride 2 */
      {1, 48, 9, 30, 48, 7, 1, 1, 3, true, false, 0, false},     /* 7x7 (ConvNeXt's), wide rows */
      {1, 24, 11, 37, 24, 7, 2, 1, 3, true, true, 1, false},     /* 7x7, stride 2 */
      {1, 40, 12, 33, 40, 5, 1, 2, 4, true, false, 7, false},    /* 5x5, dilation 2 (LRASPP's) */
      {1, 40, 12, 29, 40, 3, 1, 2, 2, true, true, 2, false},     /* 3x3, dilation 2, wide rows */
      {1, 3, 30, 30, 32, 3, 2, 1, 1, false, false, 2, true},  /* MobileNet's stem, x [N, C, H, W] */
      {2, 3, 23, 21, 64, 7, 2, 1, 3, false, false, 1, true},  /* ResNet's, two images */
      {1, 3, 9, 40, 16, 3, 1, 2, 2, false, false, 0, true},   /* dilated along W: tap by tap */
      {1, 2, 5, 5, 20, 1, 1, 1, 0, false, true, 7, true},     /* 1x1 of x [N, C, H, W] */
      {1, 5, 12, 12, 40, 3, 1, 1, 1, false, false, 1, false},        /* 5 channels-last: gathered */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    test_fconv_case(mod, &cases[i]);
  expect(cuModuleUnload(mod) == CUDA_SUCCESS, "unload opc_conv_nhwc's module");
}

/* ---- opc_pool_nhwc and opc_channel_affine_nhwc: the CPU target's
   channels-last pools and BatchNormalization */

typedef struct {
  int n, c, h, w, k, stride, pad;
  bool max, include_pad;
} PoolCase;

static void launch_pool_nhwc(CUmodule mod, const PoolCase *q, const float *x, float *got, int oh,
                             int ow) {
  long long xn = (long long)q->n * q->h * q->w * q->c, yn = (long long)q->n * oh * ow * q->c;
  void *dx, *dy;
  cudaMalloc(&dx, xn * 4);
  cudaMalloc(&dy, yn * 4);
  cudaMemcpy(dx, x, xn * 4, cudaMemcpyHostToDevice);
  CUfunction f;
  expect(cuModuleGetFunction(&f, mod, "opc_pool_nhwc") == CUDA_SUCCESS, "opc_pool_nhwc");
  struct opc_kargs a;
  memset(&a, 0, sizeof a);
  a.x[0] = dx, a.y = dy, a.rank = 3;
  a.dims[0] = q->n, a.dims[1] = oh, a.dims[2] = (q->c + 63) / 64;
  a.n = a.dims[0] * a.dims[1] * a.dims[2];
  a.x_extent[0] = xn * 4, a.y_extent = yn * 4;
  a.xstride[0][0] = q->c, a.ystride[0] = q->c;
  long long args[14] = {q->c, q->h, q->w, q->k, q->k, q->stride, q->stride, 1, 1, q->pad, q->pad,
                        ow, q->max, q->include_pad};
  memcpy(a.i, args, sizeof args);
  void *params[] = {&a};
  expect(cuLaunchKernel(f, (unsigned)a.n, 1, 1, 1, 1, 1, 0, NULL, params, NULL) == CUDA_SUCCESS,
         "opc_pool_nhwc launch");
  cudaMemcpy(got, dy, yn * 4, cudaMemcpyDeviceToHost);
  cudaFree(dx), cudaFree(dy);
}

/* Each output against a double max or mean over its window's taps inside
   x; a NaN in x must win its windows' maxima. */
static void test_pool_nhwc_case(CUmodule mod, const PoolCase *q) {
  int oh = (q->h + 2 * q->pad - q->k) / q->stride + 1, ow = (q->w + 2 * q->pad - q->k) / q->stride + 1;
  long long xn = (long long)q->n * q->h * q->w * q->c, yn = (long long)q->n * oh * ow * q->c;
  float *x = malloc(xn * 4), *got = malloc(yn * 4);
  double *want = malloc(yn * 8);
  for (long long i = 0; i < xn; i++)
    x[i] = (float)((i / q->c * 7 + i % q->c * 13) % 101) / 50.0f - 1.0f +
           (float)((rng_state = rng_state * 1103515245u + 12345u) >> 24) / 256.0f;
  if (q->max)
    x[xn / 2] = NAN;
  char name[120];
  snprintf(name, sizeof name, "opc_pool_nhwc %s n%d c%d %dx%d k%d s%d p%d%s",
           q->max ? "max" : "average", q->n, q->c, q->h, q->w, q->k, q->stride, q->pad,
           q->include_pad ? " count_include_pad" : "");
  for (long long i = 0; i < yn; i++) {
    long long ch = i % q->c, pix = i / q->c, img = pix / (oh * ow);
    int r = (int)(pix % (oh * ow) / ow), j = (int)(pix % ow), taps = 0;
    double m = q->max ? -INFINITY : 0;
    bool nan = false;
    for (int a = 0; a < q->k; a++)
      for (int b = 0; b < q->k; b++) {
        int hh = r * q->stride - q->pad + a, ww = j * q->stride - q->pad + b;
        if (hh < 0 || hh >= q->h || ww < 0 || ww >= q->w)
          continue;
        double v = x[((img * q->h + hh) * q->w + ww) * q->c + ch];
        nan |= v != v;
        m = q->max ? (v > m ? v : m) : m + v;
        taps++;
      }
    want[i] = nan ? NAN : q->max ? m : m / (q->include_pad ? q->k * q->k : taps);
  }
  /* The second pass is a negative control: x's first value grown by 1000
     must leave y off the first pass's values somewhere. */
  for (int pass = 0; pass < 2; pass++) {
    launch_pool_nhwc(mod, q, x, got, oh, ow);
    long long off = -1;
    for (long long i = 0; i < yn && off < 0; i++)
      if (isnan(want[i]) ? !isnan(got[i]) : !(fabs(got[i] - want[i]) <= 1e-6 * (1 + fabs(want[i]))))
        off = i;
    if (pass == 0 && off >= 0)
      fail("%s: pixel %lld channel %lld is %.7g, expected %.7g", name, off / q->c, off % q->c,
           got[off], want[off]);
    if (pass == 1 && off < 0)
      fail("%s: a changed x left y as it was", name);
    x[0] += 1000.0f;
  }
  free(x), free(got), free(want);
}

/* y = act(x a + b) per channel, against double arithmetic: with
   `gate`, a is a squeeze-and-excitation gate of each of two images and
   there is no b. */
static void test_affine_nhwc(CUmodule mod, int pixels, int c, int act, bool gate) {
  int images = gate ? 2 : 1;
  long long n = (long long)pixels * c, c16 = (c + 15) / 16 * 16, mul_n = gate ? images * c : c16;
  float *x = malloc(n * 4), *got = malloc(n * 4), *mul = calloc(mul_n, 4), *add = calloc(c16, 4);
  for (long long i = 0; i < n; i++)
    x[i] = (float)((i * 37) % 97) / 48.0f - 1.0f;
  for (long long k = 0; k < (gate ? mul_n : c); k++)
    mul[k] = 0.5f + (float)(k % 7) / 7.0f;
  for (int ch = 0; ch < c && !gate; ch++)
    add[ch] = (float)(ch % 5) / 5.0f - 0.4f;
  void *dx, *dm, *db, *dy;
  cudaMalloc(&dx, n * 4), cudaMalloc(&dy, n * 4), cudaMalloc(&dm, mul_n * 4), cudaMalloc(&db, c16 * 4);
  cudaMemcpy(dm, mul, mul_n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, add, c16 * 4, cudaMemcpyHostToDevice);
  CUfunction f;
  expect(cuModuleGetFunction(&f, mod, "opc_channel_affine_nhwc") == CUDA_SUCCESS,
         "opc_channel_affine_nhwc");
  char name[80];
  snprintf(name, sizeof name, "opc_channel_affine_nhwc p%d c%d act %d%s", pixels, c, act,
           gate ? " gate" : "");
  for (int pass = 0; pass < 2; pass++) {
    cudaMemcpy(dx, x, n * 4, cudaMemcpyHostToDevice);
    struct opc_kargs a;
    memset(&a, 0, sizeof a);
    a.x[0] = dx, a.x[1] = dm, a.x[2] = gate ? NULL : db, a.y = dy, a.rank = 1;
    a.dims[0] = (pixels + 15) / 16, a.n = a.dims[0];
    a.x_extent[0] = n * 4, a.x_extent[1] = mul_n * 4, a.x_extent[2] = gate ? 0 : c16 * 4;
    a.y_extent = n * 4;
    a.xstride[0][0] = c, a.ystride[0] = c;
    a.i[0] = c, a.i[1] = pixels, a.i[2] = act, a.f[0] = -1.5f, a.f[1] = 2.0f;
    a.i[3] = gate ? c : 0, a.i[4] = pixels / images;
    void *params[] = {&a};
    expect(cuLaunchKernel(f, (unsigned)a.n, 1, 1, 1, 1, 1, 0, NULL, params, NULL) == CUDA_SUCCESS,
           name);
    cudaMemcpy(got, dy, n * 4, cudaMemcpyDeviceToHost);
    long long off = -1;
    for (long long i = 0; i < n && off < 0; i++) {
      long long img = i / c / (pixels / images), ch = i % c;
      double xv = (double)x[i] - (pass == 1 && i == n - 1 ? 1.0 : 0.0);
      double want = fconv_act(act, xv * mul[gate ? img * c + ch : ch] + add[ch]);
      if (!(fabs(got[i] - want) <= 1e-6 * (1 + fabs(want))))
        off = i;
    }
    if (pass == 0 && off >= 0)
      fail("%s: element %lld is %.7g", name, off, got[off]);
    if (pass == 1 && off < 0)
      fail("%s: a changed last x left y as it was", name);
    x[n - 1] += 1.0f; /* the negative control's change */
  }
  cudaFree(dx), cudaFree(dy), cudaFree(dm), cudaFree(db);
  free(x), free(got), free(mul), free(add);
}

static void test_nhwc_pools(void) {
  CUmodule mod;
  expect(cuModuleLoadData(&mod, plain_ptx) == CUDA_SUCCESS, "module for opc_pool_nhwc");
  const PoolCase cases[] = {
      {1, 64, 12, 12, 3, 2, 1, true, false},    /* ResNet's max pool */
      {1, 40, 9, 9, 3, 1, 1, true, false},      /* GoogLeNet's, a partial block */
      {2, 130, 7, 8, 3, 1, 1, false, false},    /* Inception's average, 3 groups */
      {1, 24, 7, 7, 3, 1, 1, false, true},      /* count_include_pad */
      {1, 16, 8, 8, 2, 2, 0, false, false},     /* DenseNet's transition */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    test_pool_nhwc_case(mod, &cases[i]);
  test_affine_nhwc(mod, 37, 40, 1, false);
  test_affine_nhwc(mod, 20, 130, 2, false);
  test_affine_nhwc(mod, 5, 16, 0, false);
  test_affine_nhwc(mod, 26, 40, 0, true);
  test_affine_nhwc(mod, 18, 72, 7, true);
  expect(cuModuleUnload(mod) == CUDA_SUCCESS, "unload opc_pool_nhwc's module");
}

/* ---- opc_qconv_depthwise_nhwc: a channels-last depthwise QLinearConv */

/* The contract's byte of the packed filter holding tap t of channel ch:
   blocks of 64 channels, fours of taps, a channel's four taps one int32
   lane, lane 4 l + k of vector j being channel 16 l + 4 j + k. */
static long long depthwise_byte(int ch, long long t, long long fours) {
  int in_block = ch % 64, l = in_block / 16, j = in_block % 16 / 4, k = in_block % 4;
  return ((ch / 64 * fours + t / 4) * 4 + j) * 64 + 4 * (4 * l + k) + t % 4;
}

/* A depthwise convolution of C channels of H x W, square filter k, as the
   backend launches it (depthwise_launch): the filter less its zero point
   packed as int8, the bias less x's zero point (as an unsigned byte) times
   the filter's sum, y's bytes compared with ONNX's sums requantised. A
   changed filter value must change y. */
static void test_depthwise_case(CUmodule mod, bool x_signed, int c, int h, int w, int k,
                                int stride, int pad, int dil) {
  int span = (k - 1) * dil + 1;
  int oh = (h + 2 * pad - span) / stride + 1, ow = (w + 2 * pad - span) / stride + 1;
  long long xn = (long long)h * w * c, yn = (long long)oh * ow * c, taps = (long long)k * k;
  int lo_x = x_signed ? -128 : 0, zx = x_signed ? 7 : 131, zy = x_signed ? -9 : 120;
  unsigned char *xb = malloc(xn), *want = malloc(yn), *got = malloc(yn);
  long long fours = (taps + 3) / 4, packed_bytes = (c + 63) / 64 * fours * 256;
  int *x = malloc(xn * sizeof(int)), *filter = malloc(taps * c * sizeof(int));
  signed char *packed = malloc(packed_bytes);
  int *corrected = malloc(c * sizeof(int));
  int *bias = malloc(c * sizeof(int)), *sums = malloc(yn * sizeof(int));
  float *mult = malloc(c * sizeof(float));
  for (long long i = 0; i < xn; i++) {
    x[i] = lo_x + (int)((i / c * 5 + i % c * 29 + (i / c) / w * 3) % 256);
    xb[i] = (unsigned char)x[i];
  }
  for (long long i = 0; i < taps * c; i++)
    filter[i] = (int)((rng_state = rng_state * 1103515245u + 12345u) >> 16) % 255 - 127;
  int largest = 1;
  for (int ch = 0; ch < c; ch++)
    bias[ch] = ch * 37 % 301 - 150;
  for (long long p = 0; p < (long long)oh * ow; p++)
    for (int ch = 0; ch < c; ch++) {
      int sum = bias[ch];
      for (int r = 0; r < k; r++)
        for (int q = 0; q < k; q++) {
          int hh = (int)(p / ow) * stride - pad + r * dil;
          int ww = (int)(p % ow) * stride - pad + q * dil;
          if (hh >= 0 && hh < h && ww >= 0 && ww < w)
            sum += (x[((long long)hh * w + ww) * c + ch] - zx) * filter[(r * k + q) * c + ch];
        }
      sums[p * c + ch] = sum;
      largest = abs(sum) > largest ? abs(sum) : largest;
    }
  for (int ch = 0; ch < c; ch++)
    mult[ch] = (180.0f + (float)(ch % 5) * 15.0f) / (float)largest;
  float lo = (float)lo_x, hi = lo + 255.0f;
  for (long long i = 0; i < yn; i++)
    want[i] = requantize_byte(sums[i], mult[i % c], (float)zy, lo, hi);
  void *dx, *df, *dm, *db, *dy;
  cudaMalloc(&dx, xn), cudaMalloc(&df, packed_bytes), cudaMalloc(&dm, c * 4);
  cudaMalloc(&db, c * 4), cudaMalloc(&dy, yn);
  cudaMemcpy(dx, xb, xn, cudaMemcpyHostToDevice);
  cudaMemcpy(dm, mult, c * 4, cudaMemcpyHostToDevice);
  CUfunction f;
  expect(cuModuleGetFunction(&f, mod, x_signed ? "opc_qconv_depthwise_nhwc_i8"
                                               : "opc_qconv_depthwise_nhwc_u8") == CUDA_SUCCESS,
         "opc_qconv_depthwise_nhwc");
  char name[128];
  snprintf(name, sizeof name, "opc_qconv_depthwise_nhwc %s c%d %dx%d k%d s%d p%d d%d",
           x_signed ? "int8" : "uint8", c, h, w, k, stride, pad, dil);
  for (int round = 0; round < 2; round++) {
    if (round == 1) /* the negative control */
      /* the centre tap of the last channel, which every output pixel's
         window holds inside x here; kept within int8 */
      filter[(taps / 2) * c + c - 1] += filter[(taps / 2) * c + c - 1] > 0 ? -60 : 60;
    memset(packed, 0, packed_bytes);
    for (int ch = 0; ch < c; ch++) {
      int total = 0;
      for (long long t = 0; t < taps; t++) {
        packed[depthwise_byte(ch, t, fours)] = (signed char)filter[t * c + ch];
        total += filter[t * c + ch];
      }
      corrected[ch] = bias[ch] - (zx + (x_signed ? 128 : 0)) * total;
    }
    cudaMemcpy(df, packed, packed_bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(db, corrected, c * 4, cudaMemcpyHostToDevice);
    struct opc_kargs a;
    memset(&a, 0, sizeof a);
    a.x[0] = dx, a.x[1] = df, a.x[2] = dm, a.x[3] = db, a.y = dy;
    a.rank = 3;
    long long dims[3] = {1, oh, (c + 63) / 64};
    memcpy(a.dims, dims, sizeof dims);
    a.n = dims[1] * dims[2];
    a.x_extent[0] = xn, a.x_extent[1] = packed_bytes, a.x_extent[2] = a.x_extent[3] = c * 4;
    a.y_extent = yn;
    long long args[14] = {c, h, w, k, k, stride, stride, dil, dil, pad, pad, ow, zx, zy};
    memcpy(a.i, args, sizeof args);
    a.f[0] = lo, a.f[1] = hi;
    void *params[] = {&a};
    expect(cuLaunchKernel(f, (unsigned)((a.n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, params,
                          NULL) == CUDA_SUCCESS,
           "opc_qconv_depthwise_nhwc launch");
    cudaMemcpy(got, dy, yn, cudaMemcpyDeviceToHost);
    long long differ = 0;
    for (long long i = 0; i < yn; i++)
      differ += got[i] != want[i];
    if (round == 0 && differ)
      fail("%s: %lld of %lld bytes differ", name, differ, yn);
    if (round == 1 && !differ)
      fail("%s: a changed filter value left y as it was", name);
  }
  cudaFree(dx), cudaFree(df), cudaFree(dm), cudaFree(db), cudaFree(dy);
  free(xb), free(want), free(got), free(x), free(filter), free(bias), free(sums), free(mult);
  free(packed), free(corrected);
}

static void test_depthwise(void) {
  CUmodule mod;
  expect(cuModuleLoadData(&mod, plain_ptx) == CUDA_SUCCESS, "module for the depthwise kernel");
  test_depthwise_case(mod, false, 64, 14, 14, 3, 1, 1, 1);  /* whole blocks of 64 */
  test_depthwise_case(mod, true, 96, 15, 13, 3, 2, 1, 1);   /* stride 2, a block and a half */
  test_depthwise_case(mod, false, 21, 9, 10, 5, 1, 2, 1);   /* 5x5: 25 taps, 21 channels */
  test_depthwise_case(mod, true, 40, 7, 7, 3, 1, 0, 1);     /* no padding */
  test_depthwise_case(mod, false, 130, 7, 7, 3, 1, 1, 1);   /* three blocks, the last of 2 */
  test_depthwise_case(mod, true, 32, 3, 3, 7, 1, 3, 1);     /* every window past x's edges */
  test_depthwise_case(mod, false, 70, 12, 11, 3, 1, 2, 2);  /* dilation 2 */
  test_depthwise_case(mod, true, 16, 20, 21, 3, 1, 1, 1);   /* 16 channels: 4 pixels a vector */
  test_depthwise_case(mod, false, 32, 16, 19, 5, 2, 2, 1);  /* 32: 2 pixels a vector */
  expect(cuModuleUnload(mod) == CUDA_SUCCESS, "unload the depthwise kernel's module");
}

/* ---- opc_quantized_add: every pair of bytes */

/* opc_quantize_of(opc_dequantize8_of(a) + opc_dequantize8_of(b)), restated. */
static unsigned char quantized_add_byte(int a, int b, int za, int zb, int zy, float sa, float sb,
                                        float sy, float lo, float hi) {
  float v = (float)((double)(a - za) * (double)sa) + (float)((double)(b - zb) * (double)sb);
  float q = rintf(v / sy) + (float)zy;
  q = q >= lo ? (q <= hi ? q : hi) : lo;
  return (unsigned char)(int)q;
}

/* All 65,536 pairs (a, b) as one dense launch, against the formula. */
static void test_quantized_add_case(CUmodule mod, bool x_signed, int za, int zb, int zy,
                                    float sa, float sb, float sy) {
  long long n = 65536;
  unsigned char *xa = malloc(n), *xb = malloc(n), *want = malloc(n), *got = malloc(n);
  float lo = x_signed ? -128.0f : 0.0f, hi = lo + 255.0f;
  int base = x_signed ? -128 : 0;
  int seen[256] = {0}, distinct = 0;
  for (long long i = 0; i < n; i++) {
    xa[i] = (unsigned char)(i / 256), xb[i] = (unsigned char)(i % 256);
    int a = base + (int)((xa[i] + (x_signed ? 128 : 0)) % 256);
    int b = base + (int)((xb[i] + (x_signed ? 128 : 0)) % 256);
    xa[i] = (unsigned char)a, xb[i] = (unsigned char)b;
    want[i] = quantized_add_byte(a, b, za, zb, zy, sa, sb, sy, lo, hi);
    distinct += !seen[want[i]]++;
  }
  void *da, *db, *dy;
  cudaMalloc(&da, n), cudaMalloc(&db, n), cudaMalloc(&dy, n);
  cudaMemcpy(da, xa, n, cudaMemcpyHostToDevice);
  cudaMemcpy(db, xb, n, cudaMemcpyHostToDevice);
  CUfunction f;
  expect(cuModuleGetFunction(&f, mod, x_signed ? "opc_quantized_add_i8" : "opc_quantized_add_u8") ==
             CUDA_SUCCESS,
         "opc_quantized_add");
  struct opc_kargs k;
  memset(&k, 0, sizeof k);
  k.x[0] = da, k.x[1] = db, k.y = dy;
  k.n = n - 3; /* a tail shorter than a vector */
  k.rank = 1;
  k.dims[0] = k.n;
  k.xstride[0][0] = k.xstride[1][0] = k.ystride[0] = 1;
  k.x_extent[0] = k.x_extent[1] = k.y_extent = n;
  k.i[0] = za, k.i[1] = zb, k.i[2] = zy;
  k.f[0] = lo, k.f[1] = hi, k.f[2] = sa, k.f[3] = sb, k.f[4] = sy;
  void *params[] = {&k};
  expect(cuLaunchKernel(f, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, params, NULL) ==
             CUDA_SUCCESS,
         "opc_quantized_add launch");
  cudaMemcpy(got, dy, n, cudaMemcpyDeviceToHost);
  char name[96];
  snprintf(name, sizeof name, "opc_quantized_add %s scales %g %g %g", x_signed ? "int8" : "uint8",
           sa, sb, sy);
  if (distinct < 100)
    fail("%s: y takes %d values only", name, distinct);
  for (long long i = 0; i < n - 3; i++)
    if (got[i] != want[i]) {
      fail("%s: a %d, b %d gives %d, expected %d", name, (int)(signed char)xa[i],
           (int)(signed char)xb[i], got[i], want[i]);
      break;
    }
  cudaFree(da), cudaFree(db), cudaFree(dy);
  free(xa), free(xb), free(want), free(got);
}

/* Scales and zero points (sa, za, sb, zb, sy), y's zero point 0: those of
   backend/tests/kernels/test_qdq_models.py, int8 ResNet-50's layer4 Add
   and four where an FMA of a product with the sum, and the scales divided
   out first, each move an element of the 65,536. */
static const float pair_adds[5][5] = {{0.013031501f, 83, 0.04818953f, 106, 0.029227758f},
                                      {0.053825304f, 46, 0.045335084f, 124, 0.030395936f},
                                      {0.059955962f, 215, 0.057449833f, 78, 0.043374844f},
                                      {0.05644017f, 63, 0.054606944f, 172, 0.045747064f},
                                      {0.025121395f, 22, 0.008213235f, 11, 0.04200053f}};

static void test_quantized_add(void) {
  CUmodule mod;
  expect(cuModuleLoadData(&mod, plain_ptx) == CUDA_SUCCESS, "module for opc_quantized_add");
  for (int k = 0; k < 5; k++) {
    const float *p = pair_adds[k];
    test_quantized_add_case(mod, false, (int)p[1], (int)p[3], 0, p[0], p[2], p[4]);
  }
  test_quantized_add_case(mod, true, 3, -7, 2, 0.0091f, 0.0137f, 0.0159f);
  /* y's scale twice x's: an odd sum of x's is a tie of the quotient, which
     a product by the reciprocal misses (the fast form divides there) */
  test_quantized_add_case(mod, false, 128, 128, 128, 0.1f, 0.1f, 0.2f);
  test_quantized_add_case(mod, true, 0, 0, 0, 0.3f, 0.3f, 0.6f);
  expect(cuModuleUnload(mod) == CUDA_SUCCESS, "unload opc_quantized_add's module");
}

/* ---- opc_concat_blocks: a part at a time, from the middle of a block */

/* Three inputs of 5, 17 and 3 bytes a row, 4,001 rows, into y of 25-byte
   rows, but for the last 2 bytes: the launch's parts begin and end inside
   blocks. y's bytes past n must stay as they were: a part copies up to its
   end, not its block's. */
static void test_concat_blocks(void) {
  enum { INPUTS = 3, ROWS = 4001, ROW = 25, GUARD = 64 };
  static const long long width[INPUTS] = {5, 17, 3};
  long long n = (long long)ROWS * ROW - 2, table[3 * INPUTS], at = 0, offset = 0;
  unsigned char *x = malloc((size_t)n + 2), *got = malloc((size_t)n + GUARD);
  for (int k = 0; k < INPUTS; k++) {
    table[3 * k] = offset, table[3 * k + 1] = at, table[3 * k + 2] = width[k];
    for (long long i = 0; i < ROWS * width[k]; i++)
      x[offset + i] = (unsigned char)(k * 71 + i * 13 + i / 251);
    at += width[k], offset += ROWS * width[k];
  }
  void *dx, *dt, *dy;
  cudaMalloc(&dx, (size_t)n + 2), cudaMalloc(&dt, sizeof table), cudaMalloc(&dy, (size_t)n + GUARD);
  cudaMemcpy(dx, x, (size_t)n + 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dt, table, sizeof table, cudaMemcpyHostToDevice);
  cudaMemset(dy, 0xee, (size_t)n + GUARD);
  CUmodule mod;
  CUfunction f;
  expect(cuModuleLoadData(&mod, plain_ptx) == CUDA_SUCCESS, "module for opc_concat_blocks");
  expect(cuModuleGetFunction(&f, mod, "opc_concat_blocks_b1") == CUDA_SUCCESS,
         "opc_concat_blocks_b1");
  struct opc_kargs k;
  memset(&k, 0, sizeof k);
  k.x[0] = dx, k.x[2] = dt, k.y = dy;
  k.x_extent[0] = n + 2, k.x_extent[2] = (long long)sizeof table, k.y_extent = n;
  k.n = n, k.rank = 1, k.dims[0] = n;
  k.i[0] = INPUTS, k.i[1] = ROW;
  void *params[] = {&k};
  expect(cuLaunchKernel(f, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, params, NULL) ==
             CUDA_SUCCESS,
         "opc_concat_blocks launch");
  cudaMemcpy(got, dy, (size_t)n + GUARD, cudaMemcpyDeviceToHost);
  for (long long i = 0; i < n + GUARD; i++) {
    long long r = i / ROW, c = i % ROW, in = 0;
    while (in + 1 < INPUTS && table[3 * (in + 1) + 1] <= c)
      in++;
    unsigned char want = i < n ? x[table[3 * in] + r * width[in] + c - table[3 * in + 1]] : 0xee;
    if (got[i] != want) {
      fail("opc_concat_blocks: byte %lld (row %lld, column %lld) is %d, expected %d", i, r, c,
           got[i], want);
      break;
    }
  }
  expect(cuModuleUnload(mod) == CUDA_SUCCESS, "unload opc_concat_blocks's module");
  cudaFree(dx), cudaFree(dt), cudaFree(dy);
  free(x), free(got);
}

/* ---- QuantizeLinear and DequantizeLinear transposing, a row at a time */

/* x channels-last [37 channels, 1001 pixels] to y in ONNX's order, as
   between a channels-last join and a Split in ONNX's order: every byte
   dequantized, and quantized back from the floats, exactly; the launch's
   parts begin inside rows. */
static void test_quantize_transposed(void) {
  enum { C = 37, P = 1001 };
  long long n = (long long)C * P;
  unsigned char *x = malloc((size_t)n), *back = malloc((size_t)n);
  float *f = malloc(sizeof(float) * (size_t)n);
  for (long long i = 0; i < n; i++)
    x[i] = (unsigned char)(i * 7 + i / 97);
  void *dx, *df, *dq;
  cudaMalloc(&dx, (size_t)n), cudaMalloc(&df, sizeof(float) * (size_t)n), cudaMalloc(&dq, (size_t)n);
  cudaMemcpy(dx, x, (size_t)n, cudaMemcpyHostToDevice);
  CUmodule mod;
  CUfunction dequantize, quantize;
  expect(cuModuleLoadData(&mod, plain_ptx) == CUDA_SUCCESS, "module for the quantization kernels");
  expect(cuModuleGetFunction(&dequantize, mod, "opc_dequantize_linear_u8") == CUDA_SUCCESS &&
             cuModuleGetFunction(&quantize, mod, "opc_quantize_linear_u8") == CUDA_SUCCESS,
         "opc_dequantize_linear_u8, opc_quantize_linear_u8");
  const float scale = 0.0368929915f;
  const int zero = 11;
  struct opc_kargs k;
  memset(&k, 0, sizeof k);
  k.n = n, k.rank = 2, k.dims[0] = C, k.dims[1] = P;
  k.xstride[0][0] = 1, k.xstride[0][1] = C; /* x channels-last */
  k.ystride[0] = P, k.ystride[1] = 1;      /* y in ONNX's order */
  k.x[0] = dx, k.x_extent[0] = n, k.y = df, k.y_extent = 4 * n;
  k.f[2] = scale, k.i[0] = 2, k.i[1] = zero;
  void *params[] = {&k};
  unsigned grid = (unsigned)((n + 255) / 256);
  expect(cuLaunchKernel(dequantize, grid, 1, 1, 256, 1, 1, 0, NULL, params, NULL) == CUDA_SUCCESS,
         "opc_dequantize_linear_u8 launch");
  k.xstride[0][0] = P, k.xstride[0][1] = 1; /* and back: floats in ONNX's order */
  k.ystride[0] = 1, k.ystride[1] = C;       /* to bytes channels-last */
  k.x[0] = df, k.x_extent[0] = 4 * n, k.y = dq, k.y_extent = n;
  k.f[0] = 0, k.f[1] = 255;
  expect(cuLaunchKernel(quantize, grid, 1, 1, 256, 1, 1, 0, NULL, params, NULL) == CUDA_SUCCESS,
         "opc_quantize_linear_u8 launch");
  cudaMemcpy(f, df, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost);
  cudaMemcpy(back, dq, (size_t)n, cudaMemcpyDeviceToHost);
  for (long long c = 0; c < C; c++)
    for (long long p = 0; p < P; p++) {
      int v = x[p * C + c];
      float want = (float)(v - zero) * scale;
      if (f[c * P + p] != want || back[p * C + c] != v) {
        fail("transposed DequantizeLinear/QuantizeLinear: channel %lld pixel %lld: %g and %d, "
             "expected %g and %d", c, p, f[c * P + p], back[p * C + c], want, v);
        c = C;
        break;
      }
    }
  expect(cuModuleUnload(mod) == CUDA_SUCCESS, "unload the quantization kernels' module");
  cudaFree(dx), cudaFree(df), cudaFree(dq);
  free(x), free(back), free(f);
}

int main(void) {
  test_nvrtc();
  test_launch();
  test_pools();
  test_byte_pools();
  test_lookups();
  test_qconv();
  test_fconv();
  test_nhwc_pools();
  test_depthwise();
  test_quantized_add();
  test_concat_blocks();
  test_quantize_transposed();
  return finish("test_kernels");
}
