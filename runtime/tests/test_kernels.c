/*
 * test_kernels.c - the custom-kernel path: NVRTC "compilation" (which
 * checks kernel names against the built-in table), module look-ups, and a
 * launch of opc_copy_b4 doing a transpose split across the thread pool.
 * test_modules.c checks the versions and images the loads depend on.
 */
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
  cudaStreamDestroy(s);
  cudaFree(dx);
  cudaFree(dy);
  free(x), free(want), free(got);
}

int main(void) {
  test_nvrtc();
  test_launch();
  return finish("test_kernels");
}
