/*
 * nvrtc_compile.c - compiles the embedded kernel source (all kernels, as
 * net.c would carry them) with NVRTC for the GPU at hand, the way net.c's
 * create() does, and prints the PTX. NVRTC needs no GPU: given an
 * architecture (e.g. compute_90) it compiles for that one instead.
 *
 * usage: nvrtc_compile [compute_XY] > kernels.ptx
 *        nvrtc_compile --each compute_XY    (every kernel alone, with what it needs)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nvrtc.h>

#include "kernel_source.h"

/* Compiles `source`; prints the log on failure, returns the PTX or NULL. */
static char *compile(const char *source, const char *arch_option, const char *what) {
  const char *options[] = {arch_option};
  nvrtcProgram program;
  if (nvrtcCreateProgram(&program, source, "kernels.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
    return NULL;
  nvrtcResult r = nvrtcCompileProgram(program, 1, options);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  char *log = malloc(log_size + 1);
  nvrtcGetProgramLog(program, log);
  if (r != NVRTC_SUCCESS || log_size > 1)
    fprintf(stderr, "%s, %s: %s\n%s\n", what, arch_option, nvrtcGetErrorString(r), log);
  free(log);
  char *ptx = NULL;
  size_t ptx_size = 0;
  if (r == NVRTC_SUCCESS && nvrtcGetPTXSize(program, &ptx_size) == NVRTC_SUCCESS) {
    ptx = malloc(ptx_size);
    nvrtcGetPTX(program, ptx);
  }
  nvrtcDestroyProgram(&program);
  return ptx;
}

/* The prelude, the struct and the blocks kernel `only` needs (all when -1). */
static char *assemble(int only) {
  size_t size = strlen(kernel_prelude_cuda) + strlen(kernel_kargs_h) + 4;
  for (int k = 0; k < kernel_nblocks; k++)
    size += strlen(kernel_blocks[k].text) + 2;
  char *source = malloc(size);
  strcpy(source, kernel_prelude_cuda);
  strcat(source, "\n");
  strcat(source, kernel_kargs_h);
  for (int k = 0; k < kernel_nblocks; k++) {
    bool wanted = only < 0 || k == only;
    for (int d = 0; only >= 0 && d < kernel_blocks[only].ndeps; d++)
      wanted = wanted || kernel_blocks[only].deps[d] == k;
    if (!wanted)
      continue;
    strcat(source, "\n");
    strcat(source, kernel_blocks[k].text);
    strcat(source, "\n");
  }
  return source;
}

int main(int argc, char **argv) {
  char arch[64];
  bool each = argc > 2 && strcmp(argv[1], "--each") == 0;
  if (each || argc > 1) {
    snprintf(arch, sizeof arch, "--gpu-architecture=%s", argv[each ? 2 : 1]);
  } else {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    snprintf(arch, sizeof arch, "--gpu-architecture=compute_%d%d", major, minor);
  }
  if (!each) {
    char *ptx = compile(assemble(-1), arch, "all kernels");
    if (!ptx)
      return 1;
    fputs(ptx, stdout);
    return 0;
  }
  int failed = 0, count = 0;
  for (int k = 0; k < kernel_nblocks; k++) {
    if (kernel_blocks[k].kind != KB_KERNEL)
      continue;
    char *source = assemble(k);
    char *ptx = compile(source, arch, kernel_blocks[k].name);
    failed += ptx == NULL;
    count++;
    free(ptx);
    free(source);
  }
  printf("%d kernels compiled alone by NVRTC, %d failed\n", count, failed);
  return failed != 0;
}
