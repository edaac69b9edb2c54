/*
 * test_modules.c - what decides whether a GPU's driver loads opc's kernels,
 * as the runtime models it: NVRTC 13.0's architectures and outputs, the
 * driver's version and the PTX ISA it knows, the device's SM, and stream
 * capture. Run twice: with the default driver (CUDA 12.8, older than NVRTC:
 * NVRTC's PTX is refused) and with OPC_RT_DRIVER_VERSION=13000 (loaded).
 */
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <nvrtc.h>

/* testutil.h's array helpers are for the tests that compute. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "testutil.h"

static const char *src = "OPC_KERNEL(opc_copy_b4)\n{\n}\n";

static int driver;    /* the emulated driver's version, 12080 for 12.8 */
static int device_sm; /* 90 for compute capability 9.0 */

/* A program compiled with `options`; NULL (and a failure) if it did not compile. */
static nvrtcProgram compile(int n, const char *const *options) {
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, src, "k.cu", 0, NULL, NULL) != NVRTC_SUCCESS) {
    fail("nvrtcCreateProgram");
    return NULL;
  }
  nvrtcResult r = nvrtcCompileProgram(prog, n, options);
  if (r != NVRTC_SUCCESS) {
    fail("compile with %s: %s", n ? options[0] : "no options", nvrtcGetErrorString(r));
    nvrtcDestroyProgram(&prog);
    return NULL;
  }
  return prog;
}

/* The program's CUBIN (malloc'd), or NULL when it has none. */
static char *cubin_of(nvrtcProgram prog) {
  size_t size = 0;
  expect(nvrtcGetCUBINSize(prog, &size) == NVRTC_SUCCESS, "nvrtcGetCUBINSize");
  if (size == 0)
    return NULL;
  char *cubin = malloc(size);
  expect(nvrtcGetCUBIN(prog, cubin) == NVRTC_SUCCESS, "nvrtcGetCUBIN");
  return cubin;
}

static char *ptx_of(nvrtcProgram prog) {
  size_t size = 0;
  expect(nvrtcGetPTXSize(prog, &size) == NVRTC_SUCCESS && size > 1, "nvrtcGetPTXSize");
  char *ptx = calloc(1, size + 1);
  expect(nvrtcGetPTX(prog, ptx) == NVRTC_SUCCESS, "nvrtcGetPTX");
  return ptx;
}

/* cuModuleLoadData's result; the module is unloaded again. */
static CUresult load(const void *image) {
  CUmodule mod = NULL;
  CUresult r = cuModuleLoadData(&mod, image);
  if (r == CUDA_SUCCESS) {
    CUfunction f;
    expect(cuModuleGetFunction(&f, mod, "opc_copy_b4") == CUDA_SUCCESS, "opc_copy_b4 in the module");
    expect(cuModuleUnload(mod) == CUDA_SUCCESS, "cuModuleUnload");
  }
  return r;
}

static void expect_load(const void *image, CUresult want, const char *what) {
  CUresult got = load(image);
  if (got != want) {
    const char *g = NULL, *w = NULL;
    cuGetErrorName(got, &g);
    cuGetErrorName(want, &w);
    fail("%s: cuModuleLoadData gave %s, expected %s", what, g ? g : "?", w ? w : "?");
  }
}

static void test_versions(void) {
  int major = 0, minor = 0, runtime_driver = 0;
  expect(nvrtcVersion(&major, &minor) == NVRTC_SUCCESS && major == 13 && minor == 0,
         "NVRTC is 13.0");
  expect(cuDriverGetVersion(&driver) == CUDA_SUCCESS, "cuDriverGetVersion");
  expect(cudaDriverGetVersion(&runtime_driver) == cudaSuccess && runtime_driver == driver,
         "cudaDriverGetVersion agrees with cuDriverGetVersion");
  const char *env = getenv("OPC_RT_DRIVER_VERSION");
  expect(driver == (env ? atoi(env) : 12080), "the driver is 12.8 unless OPC_RT_DRIVER_VERSION says");
  int cc[2] = {0, 0};
  expect(cuDeviceGetAttribute(&cc[0], CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0) ==
                 CUDA_SUCCESS &&
             cuDeviceGetAttribute(&cc[1], CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0) ==
                 CUDA_SUCCESS,
         "cuDeviceGetAttribute");
  device_sm = cc[0] * 10 + cc[1];
  /* The checks below are for that device: run without OPC_RT_COMPUTE_CAPABILITY. */
  expect(device_sm == 90, "the device is compute capability 9.0");
}

static void test_archs(void) {
  int n = 0;
  expect(nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0, "nvrtcGetNumSupportedArchs");
  int *archs = calloc((size_t)n + 1, sizeof *archs);
  expect(nvrtcGetSupportedArchs(archs) == NVRTC_SUCCESS, "nvrtcGetSupportedArchs");
  bool has_device = false, has_70 = false;
  for (int i = 0; i < n; i++) {
    expect(i == 0 || archs[i - 1] < archs[i], "architectures ascending");
    has_device |= archs[i] == device_sm;
    has_70 |= archs[i] == 70;
  }
  expect(has_device && !has_70, "NVRTC 13.0 targets sm_90 but no longer sm_70");
  free(archs);

  const char *old[] = {"-arch=sm_70"};
  nvrtcProgram prog;
  nvrtcCreateProgram(&prog, src, "k.cu", 0, NULL, NULL);
  expect(nvrtcCompileProgram(prog, 1, old) == NVRTC_ERROR_INVALID_OPTION, "sm_70 refused");
  size_t size = 0;
  nvrtcGetProgramLogSize(prog, &size);
  char *log = calloc(1, size + 1);
  nvrtcGetProgramLog(prog, log);
  expect(strstr(log, "--gpu-architecture") != NULL, "the log names the option");
  free(log);
  nvrtcDestroyProgram(&prog);
}

/* -arch=sm_90: the CUBIN loads whatever the driver; its PTX (ISA 9.0) only
   on a driver of CUDA 13.0 or later. */
static void test_device_arch(void) {
  char arch[32];
  snprintf(arch, sizeof arch, "-arch=sm_%d", device_sm);
  const char *options[] = {arch};
  nvrtcProgram prog = compile(1, options);
  if (!prog)
    return;
  char *cubin = cubin_of(prog), *ptx = ptx_of(prog);
  expect(cubin != NULL, "a CUBIN for the device's SM");
  if (cubin)
    expect_load(cubin, CUDA_SUCCESS, "CUBIN for the device's SM");
  expect(strstr(ptx, ".version 9.0") != NULL, "NVRTC 13.0 writes PTX ISA 9.0");
  expect_load(ptx, driver >= 13000 ? CUDA_SUCCESS : CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
              "PTX ISA 9.0");
  free(cubin);
  free(ptx);
  nvrtcDestroyProgram(&prog);
}

/* compute_XY (either spelling of the option) gives PTX and no CUBIN. */
static void test_virtual_arch(void) {
  char arch[32];
  snprintf(arch, sizeof arch, "compute_%d", device_sm);
  const char *options[] = {"--gpu-architecture", arch};
  nvrtcProgram prog = compile(2, options);
  if (!prog)
    return;
  char *cubin = cubin_of(prog), *ptx = ptx_of(prog);
  expect(cubin == NULL, "no CUBIN for a virtual architecture");
  expect_load(ptx, driver >= 13000 ? CUDA_SUCCESS : CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
              "PTX for compute_XY");
  free(cubin);
  free(ptx);
  nvrtcDestroyProgram(&prog);
}

/* Another SM's CUBIN does not run on this device, nor a newer SM's PTX. */
static void test_other_archs(void) {
  const char *older[] = {"-arch=sm_80"};
  nvrtcProgram prog = compile(1, older);
  if (prog) {
    char *cubin = cubin_of(prog);
    expect(cubin != NULL, "a CUBIN for sm_80");
    if (cubin)
      expect_load(cubin, CUDA_ERROR_NO_BINARY_FOR_GPU, "CUBIN for sm_80 on a 9.0 device");
    free(cubin);
    nvrtcDestroyProgram(&prog);
  }
  const char *newer[] = {"-arch=sm_100"};
  if ((prog = compile(1, newer))) {
    char *cubin = cubin_of(prog), *ptx = ptx_of(prog);
    if (cubin)
      expect_load(cubin, CUDA_ERROR_NO_BINARY_FOR_GPU, "CUBIN for sm_100 on a 9.0 device");
    if (driver >= 13000)
      expect_load(ptx, CUDA_ERROR_INVALID_PTX, "PTX for sm_100 on a 9.0 device");
    free(cubin);
    free(ptx);
    nvrtcDestroyProgram(&prog);
  }
  /* PTX of an older ISA and target: what a driver of CUDA 12.0 loads. */
  expect_load(".version 8.0\n.target sm_80\n.address_size 64\n", CUDA_SUCCESS, "PTX ISA 8.0");
}

static void test_bad_images(void) {
  CUmodule mod;
  expect(cuModuleLoadData(&mod, NULL) == CUDA_ERROR_INVALID_VALUE, "no image");
  expect_load("", CUDA_ERROR_INVALID_IMAGE, "empty image");
  expect_load("not PTX\n", CUDA_ERROR_INVALID_IMAGE, "text without .version");
  unsigned char elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  elf[18] = 62; /* x86-64, not CUDA */
  expect_load(elf, CUDA_ERROR_INVALID_IMAGE, "ELF of another machine");
  const char *name = NULL;
  expect(cuGetErrorName(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, &name) == CUDA_SUCCESS && name &&
             strcmp(name, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION") == 0,
         "CUDA_ERROR_UNSUPPORTED_PTX_VERSION has its name");
  expect(cuGetErrorString(CUDA_ERROR_NO_BINARY_FOR_GPU, &name) == CUDA_SUCCESS && name &&
             strstr(name, "no kernel image") != NULL,
         "CUDA_ERROR_NO_BINARY_FOR_GPU has its text");
}

/* A module load is no stream operation: inside a capture it fails. */
static void test_capture(void) {
  char arch[32];
  snprintf(arch, sizeof arch, "-arch=sm_%d", device_sm);
  const char *options[] = {arch};
  nvrtcProgram prog = compile(1, options);
  if (!prog)
    return;
  char *cubin = cubin_of(prog);
  nvrtcDestroyProgram(&prog);
  if (!cubin)
    return;
  cudaStream_t s;
  cudaGraph_t graph = NULL;
  expect(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
  expect(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
  expect_load(cubin, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "module load while capturing");
  cudaStreamEndCapture(s, &graph);
  if (graph)
    cudaGraphDestroy(graph);
  expect_load(cubin, CUDA_SUCCESS, "module load after the capture");
  cudaStreamDestroy(s);
  free(cubin);
}

int main(void) {
  expect(cuInit(0) == CUDA_SUCCESS, "cuInit");
  test_versions();
  test_archs();
  test_device_arch();
  test_virtual_arch();
  test_other_archs();
  test_bad_images();
  test_capture();
  return finish("test_modules");
}
