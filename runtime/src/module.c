/*
 * module.c - the driver API's modules and kernel launches. Kernels are not
 * loaded from the image: every kernel of opc_kernels.inc is built into the
 * runtime, and a module only finds them by name.
 */
#include <stdlib.h>
#include <string.h>

#include "ktable.h"
#include "rt.h"

struct CUmod_st {
  int unused;
};

static CUresult cu_result(cudaError_t err) {
  switch (err) {
  case cudaSuccess: return CUDA_SUCCESS;
  case cudaErrorInvalidValue: return CUDA_ERROR_INVALID_VALUE;
  case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
  case cudaErrorStreamCaptureUnsupported: return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  case cudaErrorNotSupported: return CUDA_ERROR_NOT_SUPPORTED;
  default: return CUDA_ERROR_LAUNCH_FAILED;
  }
}

CUresult cuInit(unsigned int Flags) {
  if (Flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  return cu_result(rt_enter());
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (ordinal != 0)
    return CUDA_ERROR_INVALID_VALUE;
  *device = 0;
  return cu_result(rt_enter());
}

CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  if (rt_enter())
    return CUDA_ERROR_LAUNCH_FAILED;
  if (!module)
    return CUDA_ERROR_INVALID_VALUE;
  (void)image;
  *module = calloc(1, sizeof **module);
  return *module ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                            CUjit_option *options, void **optionValues) {
  (void)numOptions;
  (void)options;
  (void)optionValues;
  return cuModuleLoadData(module, image);
}

CUresult cuModuleUnload(CUmodule hmod) {
  if (rt_enter())
    return CUDA_ERROR_LAUNCH_FAILED;
  if (!hmod)
    return CUDA_ERROR_INVALID_HANDLE;
  free(hmod);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
  if (rt_enter())
    return CUDA_ERROR_LAUNCH_FAILED;
  if (!hfunc || !name)
    return CUDA_ERROR_INVALID_VALUE;
  if (!hmod)
    return CUDA_ERROR_INVALID_HANDLE;
  const struct CUfunc_st *f = kernel_find(name, strlen(name));
  if (!f)
    return CUDA_ERROR_NOT_FOUND;
  *hfunc = (CUfunction)f;
  return CUDA_SUCCESS;
}

typedef struct KernelOp {
  Op op;
  const struct CUfunc_st *f;
  struct opc_kargs a;
} KernelOp;

static void kernel_part(void *ctx, int part, int nparts) {
  KernelOp *k = ctx;
  k->f->fn(k->a, part, nparts);
}

static void run_kernel(Op *op) {
  KernelOp *k = (KernelOp *)op;
  if (k->a.n <= 0)
    return;
  /* n counts the parallel loop's iterations, which may be whole rows:
   * the extents tell better how much memory the launch sweeps. */
  long long work = k->a.n;
  if (k->a.y_extent > work)
    work = k->a.y_extent;
  for (int i = 0; i < 4; i++)
    if (k->a.x_extent[i] > work)
      work = k->a.x_extent[i];
  int parts = pool_parts(work, 16384);
  if (parts > k->a.n)
    parts = (int)k->a.n;
  pool_run(kernel_part, k, parts);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra) {
  if (rt_enter())
    return CUDA_ERROR_LAUNCH_FAILED;
  (void)sharedMemBytes;
  if (!f)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!kernelParams || !kernelParams[0] || extra)
    return CUDA_ERROR_INVALID_VALUE;
  if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ)
    return CUDA_ERROR_INVALID_VALUE;
  KernelOp *k = op_new(sizeof *k, run_kernel, f->name);
  if (!k)
    return CUDA_ERROR_OUT_OF_MEMORY;
  k->f = f;
  memcpy(&k->a, kernelParams[0], sizeof k->a);
  for (int i = 0; i < 4; i++)
    if (k->a.x_extent[i] > 0)
      op_span(&k->op, k->a.x[i], (size_t)k->a.x_extent[i] * sizeof(float), false);
  if (k->a.y_extent > 0)
    op_span(&k->op, k->a.y, (size_t)k->a.y_extent * sizeof(float), true);
  return cu_result(rt_submit(hStream, &k->op));
}
