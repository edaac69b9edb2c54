/*
 * cuda.h - opc's CPU implementation of the CUDA driver API subset used to
 * load and launch opc's own kernels. A "module" is a view of the runtime's
 * built-in table of kernels compiled as C; functions are found by name.
 */
#ifndef OPC_CUDA_H
#define OPC_CUDA_H

#include <stddef.h>

#define CUDA_VERSION 13000

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError_enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  CUDA_ERROR_UNKNOWN = 999
} CUresult;

typedef int CUdevice;
typedef enum CUdevice_attribute_enum {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
} CUdevice_attribute;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;
typedef struct CUstream_st *CUstream;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

/* Options of cuModuleLoadDataEx; all are accepted and ignored on the CPU. */
typedef enum CUjit_option_enum {
  CU_JIT_MAX_REGISTERS = 0,
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_OPTIMIZATION_LEVEL = 7,
  CU_JIT_LOG_VERBOSE = 12
} CUjit_option;

CUresult cuGetErrorString(CUresult error, const char **pStr);
CUresult cuGetErrorName(CUresult error, const char **pStr);
CUresult cuInit(unsigned int Flags);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev);
/* The emulated driver's version: 12080 (CUDA 12.8, older than NVRTC 13.0)
   unless the environment variable OPC_RT_DRIVER_VERSION says otherwise.
   The device's compute capability is 9.0 unless OPC_RT_COMPUTE_CAPABILITY
   says otherwise ("12.2"). */
CUresult cuDriverGetVersion(int *driverVersion);

/*
 * image: PTX text or a CUBIN (an ELF image), as NVRTC makes them. PTX whose
 * .version is newer than the driver's PTX ISA fails with
 * CUDA_ERROR_UNSUPPORTED_PTX_VERSION; a CUBIN for another SM than the
 * device's with CUDA_ERROR_NO_BINARY_FOR_GPU; any load while a stream
 * capture is under way with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED. The
 * kernels themselves come from the runtime's built-in table.
 */
CUresult cuModuleLoadData(CUmodule *module, const void *image);
CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                            CUjit_option *options, void **optionValues);
CUresult cuModuleUnload(CUmodule hmod);
/* CUDA_ERROR_NOT_FOUND when no built-in kernel has this name. */
CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);

/*
 * kernelParams[0] must point to a struct opc_kargs, which is copied. The
 * grid and block sizes are ignored: the kernel runs in parts across the
 * runtime's thread pool.
 */
CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra);

#ifdef __cplusplus
}
#endif

#endif
