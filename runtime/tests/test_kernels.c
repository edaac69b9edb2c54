/*
 * test_kernels.c - the custom-kernel path: NVRTC "compilation" (which
 * checks kernel names against the built-in table), module look-ups, and a
 * launch of opc_copy_b4 doing a transpose split across the thread pool,
 * and launches of the 2-D pooling kernels, whose planes run along vectors
 * on AVX-512 (pool_vec.c) and folded whole elsewhere.
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

int main(void) {
  test_nvrtc();
  test_launch();
  test_pools();
  return finish("test_kernels");
}
