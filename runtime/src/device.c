/*
 * device.c - the emulated devices (each the host's cores), versions and
 * error names.
 *
 * OPC_DEVICE_COUNT devices are emulated (1 to 16, default 8), so that a
 * program for several GPUs runs, and is checked, on one CPU: they share
 * the cores and the memory, but streams, events, handles and allocations
 * belong to one of them (see rt.h), and peer access is tracked per pair.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ktable.h"
#include "rt.h"

/*
 * What the emulated GPU and driver are, read from the environment once.
 * The CPU claims a recent compute capability (9.0, like an H100) so that
 * code choosing features by it takes its ordinary path. The driver is older
 * than the toolkit (CUDA 12.8 against NVRTC 13.0): that is the case where
 * NVRTC's PTX is refused, so the default exercises it.
 * OPC_RT_COMPUTE_CAPABILITY=12.1 and OPC_RT_DRIVER_VERSION=13000 change them.
 */
#define DEFAULT_CC_MAJOR 9
#define DEFAULT_CC_MINOR 0
#define DEFAULT_DRIVER_VERSION 12080
#define DEFAULT_DEVICE_COUNT 8

static struct {
  int major, minor; /* compute capability */
  int driver;       /* 1000 * major + 10 * minor */
  int devices;
} emulated;

/* CUDA's current device is a property of the host thread. */
static _Thread_local int current_device;

static void read_driver_version(void) {
  emulated.driver = DEFAULT_DRIVER_VERSION;
  const char *env = getenv("OPC_RT_DRIVER_VERSION");
  if (!env || !*env)
    return;
  char *end;
  long v = strtol(env, &end, 10);
  if (*end || v < 1000 || v > 99990) {
    fprintf(stderr, "opc runtime: OPC_RT_DRIVER_VERSION=%s is not a CUDA version "
                    "such as 13000; using %d\n", env, DEFAULT_DRIVER_VERSION);
    return;
  }
  emulated.driver = (int)v;
}

static void read_compute_capability(void) {
  emulated.major = DEFAULT_CC_MAJOR;
  emulated.minor = DEFAULT_CC_MINOR;
  const char *env = getenv("OPC_RT_COMPUTE_CAPABILITY");
  if (!env || !*env)
    return;
  int major, minor;
  char extra;
  if (sscanf(env, "%d.%d%c", &major, &minor, &extra) != 2 || major < 1 || major > 99 ||
      minor < 0 || minor > 9) {
    fprintf(stderr, "opc runtime: OPC_RT_COMPUTE_CAPABILITY=%s is not a compute capability "
                    "such as 9.0; using %d.%d\n", env, DEFAULT_CC_MAJOR, DEFAULT_CC_MINOR);
    return;
  }
  emulated.major = major;
  emulated.minor = minor;
}

static void read_device_count(void) {
  emulated.devices = DEFAULT_DEVICE_COUNT;
  const char *env = getenv("OPC_DEVICE_COUNT");
  if (!env || !*env)
    return;
  char *end;
  long v = strtol(env, &end, 10);
  if (*end || v < 1 || v > MAX_DEVICES) {
    fprintf(stderr, "opc runtime: OPC_DEVICE_COUNT=%s is not a device count from 1 to %d; "
                    "using %d\n", env, MAX_DEVICES, DEFAULT_DEVICE_COUNT);
    return;
  }
  emulated.devices = (int)v;
}

static void read_environment(void) {
  read_driver_version();
  read_compute_capability();
  read_device_count();
}

static void emulate(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, read_environment);
}

int rt_device_count(void) {
  emulate();
  return emulated.devices;
}

int rt_device(void) {
  return current_device;
}

static bool valid_device(int device) {
  return device >= 0 && device < rt_device_count();
}

cudaError_t cudaSetDevice(int device) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!valid_device(device))
    return rt_error(cudaErrorInvalidDevice);
  /* The device's legacy stream must exist before anything names it. */
  if ((err = rt_device_ready(device)))
    return rt_error(err);
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!device)
    return rt_error(cudaErrorInvalidValue);
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!count)
    return rt_error(cudaErrorInvalidValue);
  *count = rt_device_count();
  return cudaSuccess;
}

/* Also ends the peer access the current device was given or gave. */
cudaError_t cudaDeviceReset(void) {
  cudaError_t err = cudaDeviceSynchronize();
  if (err)
    return err;
  int d = current_device;
  pthread_mutex_lock(&rt.lock);
  rt.peer[d] = 0;
  for (int i = 0; i < MAX_DEVICES; i++)
    rt.peer[i] &= ~(1u << d);
  pthread_mutex_unlock(&rt.lock);
  return cudaSuccess;
}

/* ---- peer access ---- */

/* Every pair of distinct devices can: they share the host's memory. */
cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!canAccessPeer)
    return rt_error(cudaErrorInvalidValue);
  if (!valid_device(device) || !valid_device(peerDevice))
    return rt_error(cudaErrorInvalidDevice);
  *canAccessPeer = device != peerDevice;
  return cudaSuccess;
}

/*
 * Tracked so that the error codes are CUDA's, but access is not what makes
 * work on one device legal on another's memory: the checker reports such
 * work even with peer access enabled, since opc must emit explicit copies.
 */
cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  int d = current_device;
  /* cudaDeviceCanAccessPeer says no for the device itself. */
  if (!valid_device(peerDevice) || peerDevice == d)
    return rt_error(cudaErrorInvalidDevice);
  if (flags != 0)
    return rt_error(cudaErrorInvalidValue);
  pthread_mutex_lock(&rt.lock);
  if (rt.peer[d] & (1u << peerDevice))
    err = cudaErrorPeerAccessAlreadyEnabled;
  else
    rt.peer[d] |= 1u << peerDevice;
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

cudaError_t cudaDeviceDisablePeerAccess(int peerDevice) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!valid_device(peerDevice))
    return rt_error(cudaErrorInvalidDevice);
  int d = current_device;
  pthread_mutex_lock(&rt.lock);
  if (!(rt.peer[d] & (1u << peerDevice)))
    err = cudaErrorPeerAccessNotEnabled;
  else
    rt.peer[d] &= ~(1u << peerDevice);
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

static size_t total_memory(void) {
  return (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!prop)
    return rt_error(cudaErrorInvalidValue);
  if (!valid_device(device))
    return rt_error(cudaErrorInvalidDevice);
  memset(prop, 0, sizeof *prop);
  snprintf(prop->name, sizeof prop->name, "opc CPU runtime (%d threads; %s kernels; %s)",
           pool_threads(), kernel_isa_name(kernel_isa()), blas_description());
  prop->totalGlobalMem = total_memory();
  prop->sharedMemPerBlock = 48 << 10;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->totalConstMem = 64 << 10;
  emulate();
  prop->major = emulated.major;
  prop->minor = emulated.minor;
  prop->multiProcessorCount = pool_threads();
  prop->integrated = 1;
  prop->concurrentKernels = 1;
  prop->l2CacheSize = 1 << 20;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->sharedMemPerMultiprocessor = 228 << 10;
  prop->sharedMemPerBlockOptin = 227 << 10;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!value)
    return rt_error(cudaErrorInvalidValue);
  if (!valid_device(device))
    return rt_error(cudaErrorInvalidDevice);
  struct cudaDeviceProp p;
  cudaGetDeviceProperties(&p, device);
  switch (attr) {
  case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
  case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
  case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
  case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
  case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
  case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
  case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
  case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
  case cudaDevAttrTotalConstantMemory: *value = (int)p.totalConstMem; break;
  case cudaDevAttrWarpSize: *value = p.warpSize; break;
  case cudaDevAttrMaxRegistersPerBlock: *value = p.regsPerBlock; break;
  case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
  case cudaDevAttrIntegrated: *value = p.integrated; break;
  case cudaDevAttrConcurrentKernels: *value = p.concurrentKernels; break;
  case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
  case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
  case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
  case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
  case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = (int)p.sharedMemPerMultiprocessor; break;
  case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
  default: return rt_error(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *driverVersion) {
  if (!driverVersion)
    return rt_error(cudaErrorInvalidValue);
  emulate();
  *driverVersion = emulated.driver;
  return cudaSuccess;
}

CUresult cuDriverGetVersion(int *driverVersion) {
  if (!driverVersion)
    return CUDA_ERROR_INVALID_VALUE;
  emulate();
  *driverVersion = emulated.driver;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  if (rt_enter())
    return CUDA_ERROR_LAUNCH_FAILED;
  if (!pi)
    return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  emulate();
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = pool_threads(); break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = emulated.major; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = emulated.minor; break;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion) {
  if (!runtimeVersion)
    return rt_error(cudaErrorInvalidValue);
  *runtimeVersion = CUDART_VERSION;
  return cudaSuccess;
}

/* ---- error names ---- */

typedef struct ErrorName {
  int code;
  const char *name, *text;
} ErrorName;

static const ErrorName cuda_errors[] = {
  {cudaSuccess, "cudaSuccess", "no error"},
  {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
  {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
  {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
  {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
  {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
  {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
  {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
  {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
  {cudaErrorInvalidKernelImage, "cudaErrorInvalidKernelImage", "device kernel image is invalid"},
  {cudaErrorNoKernelImageForDevice, "cudaErrorNoKernelImageForDevice", "no kernel image is available for execution on the device"},
  {cudaErrorInvalidPtx, "cudaErrorInvalidPtx", "a PTX JIT compilation failed"},
  {cudaErrorUnsupportedPtxVersion, "cudaErrorUnsupportedPtxVersion", "the provided PTX was compiled with an unsupported toolchain."},
  {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
  {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
  {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
  {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
  {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped"},
  {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region"},
  {cudaErrorPeerAccessAlreadyEnabled, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
  {cudaErrorPeerAccessNotEnabled, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled"},
  {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure (opc-check found a race, or an operation failed)"},
  {cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted"},
  {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
  {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
  {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
  {cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"},
  {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"},
  {cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"},
  {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream"},
  {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream"},
  {cudaErrorCapturedEvent, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream"},
  {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread"},
  {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

static const ErrorName *find_error(int code) {
  for (size_t i = 0; i < sizeof cuda_errors / sizeof cuda_errors[0]; i++)
    if (cuda_errors[i].code == code)
      return &cuda_errors[i];
  return NULL;
}

const char *cudaGetErrorString(cudaError_t error) {
  const ErrorName *e = find_error(error);
  return e ? e->text : "unrecognized error code";
}

const char *cudaGetErrorName(cudaError_t error) {
  const ErrorName *e = find_error(error);
  return e ? e->name : "cudaErrorUnknown";
}

/* The driver API's codes are the runtime's for every code used here. */
CUresult cuGetErrorString(CUresult error, const char **pStr) {
  if (!pStr)
    return CUDA_ERROR_INVALID_VALUE;
  const ErrorName *e = find_error((int)error);
  *pStr = e ? e->text : NULL;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static const struct {
  CUresult code;
  const char *name;
} cu_names[] = {
  {CUDA_SUCCESS, "CUDA_SUCCESS"},
  {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
  {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
  {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
  {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
  {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"},
  {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
  {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
  {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX"},
  {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
  {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
  {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
  {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"},
  {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
  {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
  {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN"},
};

CUresult cuGetErrorName(CUresult error, const char **pStr) {
  if (!pStr)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof cu_names / sizeof cu_names[0]; i++) {
    if (cu_names[i].code == error) {
      *pStr = cu_names[i].name;
      return CUDA_SUCCESS;
    }
  }
  *pStr = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}
