/*
 * net_source_check.c - compiles, with NVRTC, the kernel source that an
 * emitted net.c carries: the string literal itself, after the C compiler
 * has read its escapes. NVRTC needs no GPU.
 *
 * build: cc -DNET_C='"DIR/net.c"' -I CUDA/include net_source_check.c
 *           -L CUDA/lib64 -L CUDA/lib64/stubs -lnvrtc -lcudnn -lcublasLt -lcublas -lcudart -lcuda
 * usage: net_source_check compute_XY
 */
#define OPC_NO_MAIN
#include NET_C

int main(int argc, char **argv) {
  char arch[64];
  snprintf(arch, sizeof arch, "--gpu-architecture=%s", argc > 1 ? argv[1] : "compute_80");
  const char *options[] = {arch};
  nvrtcProgram program;
  if (nvrtcCreateProgram(&program, net_kernel_source, "net.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
    return 1;
  nvrtcResult r = nvrtcCompileProgram(program, 1, options);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  char *log = malloc(log_size + 1);
  nvrtcGetProgramLog(program, log);
  if (r != NVRTC_SUCCESS || log_size > 1)
    fprintf(stderr, "%s\n%s\n", nvrtcGetErrorString(r), log);
  free(log);
  nvrtcDestroyProgram(&program);
  return r != NVRTC_SUCCESS;
}
