/*
 * kernel_runner.c - runs one of opc's kernels, compiled as C, on the data
 * described on stdin, and prints the output buffer. The python tests build
 * the arguments and compare with independent references (numpy, onnx).
 *
 * Input: whitespace-separated records, in any order, `end` last:
 *   kernel NAME          n N            rank R       dims D0 .. D(R-1)
 *   ystride S0 ..        xstride K S0 .. (R values)
 *   f COUNT V..          i COUNT V..
 *   x K COUNT V..        the data of x[K]; x_extent[K] = COUNT
 *   xi K COUNT V..       the same, as int32 values (indices)
 *   xoffset K OFF        x[K] points OFF elements into its data
 *   y COUNT V..          the initial output buffer; y_extent = COUNT
 *   alias K              x[K] is the output buffer (an in-place launch)
 *   parts P              run the loop as P parts (default 3)
 *   end
 * Output: the output buffer, one value per line (%.9g).
 *
 * Built with -DOPC_RUNNER_CUDA it runs the kernel on a GPU instead: argv[1]
 * is a PTX file of the kernels (from NVRTC or nvcc), launched as net.c
 * launches them (256 threads a block, at most 65535 blocks; with a second
 * argument "tiny", one block of 32 threads, which exercises the loops).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opc_kargs.h"
#ifdef OPC_RUNNER_CUDA
#include <cuda.h>
#include <cuda_runtime.h>
#else
#include "prelude_cpu.h"
/* Typed kernels are written once for every element type: a NaN test
   (v != v) or a sign test is constant for some of those types. */
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wtautological-compare"
#include "opc_kernels_expanded.inc"
#include "kernel_table.h"
#endif

static int fail(const char *msg, const char *what) {
  fprintf(stderr, "kernel_runner: %s%s\n", msg, what ? what : "");
  return 1;
}

static float *read_floats(long long count) {
  float *v = calloc((size_t)(count > 0 ? count : 1), sizeof(float));
  for (long long k = 0; v && k < count; k++) {
    char word[64];
    if (scanf("%63s", word) != 1) {
      free(v);
      return NULL;
    }
    v[k] = strtof(word, NULL); /* reads nan and inf too */
  }
  return v;
}

/* int32 values in a buffer of the float buffers' element size. */
static float *read_int32s(long long count) {
  float *v = calloc((size_t)(count > 0 ? count : 1), sizeof(float));
  for (long long k = 0; v && k < count; k++) {
    int x;
    if (scanf("%d", &x) != 1) {
      free(v);
      return NULL;
    }
    memcpy(&v[k], &x, sizeof x);
  }
  return v;
}

#ifdef OPC_RUNNER_CUDA
static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = calloc((size_t)size + 1, 1);
  if (text && fread(text, 1, (size_t)size, f) != (size_t)size) {
    free(text);
    text = NULL;
  }
  fclose(f);
  return text;
}

/* Copies the buffers to the GPU, launches, copies y back. */
static int run_on_gpu(const char *ptx_path, bool tiny, const char *kernel, struct opc_kargs *a,
                      float **xdata, const long long *xoffset, const int *alias, float *ydata) {
  char *ptx = read_file(ptx_path);
  CUmodule module;
  CUfunction fn;
  if (!ptx)
    return fail("cannot read ", ptx_path);
  cudaFree(0); /* makes the primary context current for the driver API */
  if (cuModuleLoadData(&module, ptx) != CUDA_SUCCESS)
    return fail("cuModuleLoadData failed", NULL);
  if (cuModuleGetFunction(&fn, module, kernel) != CUDA_SUCCESS)
    return fail("no such kernel: ", kernel);
  float *dy = NULL, *dx[4] = {0};
  cudaMalloc((void **)&dy, sizeof(float) * (size_t)(a->y_extent + 1));
  cudaMemcpy(dy, ydata, sizeof(float) * (size_t)a->y_extent, cudaMemcpyHostToDevice);
  for (int k = 0; k < 4; k++) {
    if (alias[k]) {
      a->x[k] = dy;
    } else if (xdata[k]) {
      cudaMalloc((void **)&dx[k], sizeof(float) * (size_t)(a->x_extent[k] + 1));
      cudaMemcpy(dx[k], xdata[k], sizeof(float) * (size_t)a->x_extent[k], cudaMemcpyHostToDevice);
      a->x[k] = dx[k] + xoffset[k];
    }
  }
  a->y = dy;
  long long blocks = (a->n + 255) / 256;
  unsigned grid = tiny ? 1 : (unsigned)(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
  void *params[] = {a};
  CUresult r = cuLaunchKernel(fn, grid, 1, 1, tiny ? 32 : 256, 1, 1, 0, NULL, params, NULL);
  if (r != CUDA_SUCCESS || cudaDeviceSynchronize() != cudaSuccess)
    return fail("launch failed", NULL);
  cudaMemcpy(ydata, dy, sizeof(float) * (size_t)a->y_extent, cudaMemcpyDeviceToHost);
  for (int k = 0; k < 4; k++)
    cudaFree(dx[k]);
  cudaFree(dy);
  cuModuleUnload(module);
  free(ptx);
  return 0;
}
#endif

int main(int argc, char **argv) {
  struct opc_kargs a;
  memset(&a, 0, sizeof a);
  float *xdata[4] = {0}, *ydata = NULL;
  long long xoffset[4] = {0};
  int alias[4] = {0}, parts = 3;
  char word[64], kernel[64] = "";
#ifndef OPC_RUNNER_CUDA
  void (*fn)(const struct opc_kargs, int, int) = NULL;
#endif
  while (scanf("%63s", word) == 1 && strcmp(word, "end") != 0) {
    if (strcmp(word, "kernel") == 0) {
      if (scanf("%63s", kernel) != 1)
        return fail("missing kernel name", NULL);
    } else if (strcmp(word, "n") == 0) {
      if (scanf("%lld", &a.n) != 1)
        return fail("bad n", NULL);
    } else if (strcmp(word, "rank") == 0) {
      if (scanf("%d", &a.rank) != 1 || a.rank < 0 || a.rank > 8)
        return fail("bad rank", NULL);
    } else if (strcmp(word, "dims") == 0 || strcmp(word, "ystride") == 0) {
      long long *v = word[0] == 'd' ? a.dims : a.ystride;
      for (int d = 0; d < a.rank; d++)
        if (scanf("%lld", &v[d]) != 1)
          return fail("bad ", word);
    } else if (strcmp(word, "xstride") == 0) {
      int k;
      if (scanf("%d", &k) != 1 || k < 0 || k > 3)
        return fail("bad xstride", NULL);
      for (int d = 0; d < a.rank; d++)
        if (scanf("%lld", &a.xstride[k][d]) != 1)
          return fail("bad xstride", NULL);
    } else if (strcmp(word, "f") == 0 || strcmp(word, "i") == 0) {
      int count;
      bool is_f = word[0] == 'f';
      if (scanf("%d", &count) != 1 || count < 0 || count > (is_f ? 8 : 16))
        return fail("bad count for ", word);
      for (int k = 0; k < count; k++) {
        if (is_f ? scanf("%63s", word) != 1 : scanf("%lld", &a.i[k]) != 1)
          return fail("bad scalar", NULL);
        if (is_f)
          a.f[k] = strtof(word, NULL);
      }
    } else if (strcmp(word, "x") == 0 || strcmp(word, "xi") == 0) {
      int k;
      long long count;
      bool ints = word[1] == 'i';
      if (scanf("%d %lld", &k, &count) != 2 || k < 0 || k > 3 ||
          !(xdata[k] = ints ? read_int32s(count) : read_floats(count)))
        return fail("bad x", NULL);
      a.x_extent[k] = count;
    } else if (strcmp(word, "xoffset") == 0) {
      int k;
      if (scanf("%d", &k) != 1 || k < 0 || k > 3 || scanf("%lld", &xoffset[k]) != 1)
        return fail("bad xoffset", NULL);
    } else if (strcmp(word, "y") == 0) {
      if (scanf("%lld", &a.y_extent) != 1 || !(ydata = read_floats(a.y_extent)))
        return fail("bad y", NULL);
    } else if (strcmp(word, "alias") == 0) {
      int k;
      if (scanf("%d", &k) != 1 || k < 0 || k > 3)
        return fail("bad alias", NULL);
      alias[k] = 1;
    } else if (strcmp(word, "parts") == 0) {
      if (scanf("%d", &parts) != 1 || parts < 1)
        return fail("bad parts", NULL);
    } else {
      return fail("unknown record: ", word);
    }
  }
  if (!kernel[0] || !ydata)
    return fail("need a kernel and an output buffer", NULL);
#ifdef OPC_RUNNER_CUDA
  if (argc < 2)
    return fail("usage: kernel_runner_cuda KERNELS.ptx [tiny] < launch", NULL);
  if (run_on_gpu(argv[1], argc > 2 && strcmp(argv[2], "tiny") == 0, kernel, &a, xdata, xoffset,
                 alias, ydata) != 0)
    return 1;
  (void)parts;
#else
  (void)argc, (void)argv;
  for (size_t k = 0; k < sizeof kernel_table / sizeof kernel_table[0]; k++)
    if (strcmp(kernel_table[k].name, kernel) == 0)
      fn = kernel_table[k].fn;
  if (!fn)
    return fail("no such kernel: ", kernel);
  a.y = ydata;
  for (int k = 0; k < 4; k++) {
    if (alias[k]) {
      a.x[k] = ydata;
      a.x_extent[k] = a.y_extent;
    } else if (xdata[k]) {
      a.x[k] = xdata[k] + xoffset[k];
    }
  }
  /* The parts run one after another here; the runtime runs them at once,
     which is only correct because no iteration touches another's output. */
  for (int p = 0; p < parts; p++)
    fn(a, p, parts);
#endif
  for (long long k = 0; k < a.y_extent; k++)
    printf("%.9g\n", (double)ydata[k]);
  for (int k = 0; k < 4; k++)
    free(xdata[k]);
  free(ydata);
  return 0;
}
