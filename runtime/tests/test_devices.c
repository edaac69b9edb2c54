/*
 * test_devices.c - the emulated devices: their count (OPC_DEVICE_COUNT),
 * the per-thread current device, what belongs to a device and what CUDA
 * refuses across devices, peer access, and a correct two-device pipeline
 * (eager and as a captured graph). meson runs it with and without
 * OPC_CHECK=1; the checker must find nothing. check_prog's device modes
 * test what the checker must report.
 *
 * Usage: test_devices [EXPECTED_DEVICE_COUNT] (default 8)
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "../kernels/opc_kargs.h"
#include "testutil.h"

#define N 1024

static int ndev;

static void expect_err(cudaError_t got, cudaError_t want, const char *what) {
  if (got != want)
    fail("%s: %s, expected %s", what, cudaGetErrorName(got), cudaGetErrorName(want));
  cudaGetLastError();
}

static void test_count(int want) {
  expect_err(cudaGetDeviceCount(&ndev), cudaSuccess, "cudaGetDeviceCount");
  if (ndev != want)
    fail("%d devices, expected %d", ndev, want);
  expect_err(cudaSetDevice(ndev), cudaErrorInvalidDevice, "cudaSetDevice past the last");
  expect_err(cudaSetDevice(-1), cudaErrorInvalidDevice, "cudaSetDevice(-1)");
  for (int d = 0; d < ndev; d++) {
    struct cudaDeviceProp p;
    int major = 0;
    expect_err(cudaGetDeviceProperties(&p, d), cudaSuccess, "properties of every device");
    expect_err(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d), cudaSuccess,
               "attribute of every device");
    expect(major == p.major, "attribute agrees with the properties");
  }
  struct cudaDeviceProp p;
  expect_err(cudaGetDeviceProperties(&p, ndev), cudaErrorInvalidDevice, "properties past the last");
  CUdevice cu;
  expect(cuDeviceGet(&cu, ndev - 1) == CUDA_SUCCESS && cu == ndev - 1, "cuDeviceGet of the last");
  expect(cuDeviceGet(&cu, ndev) == CUDA_ERROR_INVALID_DEVICE, "cuDeviceGet past the last");
}

static void *thread_device(void *arg) {
  int *seen = arg;
  cudaGetDevice(&seen[0]);
  cudaSetDevice(ndev - 1);
  cudaGetDevice(&seen[1]);
  return NULL;
}

/* The current device is per host thread, 0 until set. */
static void test_thread_device(void) {
  int dev = -1, seen[2] = {-1, -1};
  expect_err(cudaSetDevice(1), cudaSuccess, "cudaSetDevice(1)");
  pthread_t t;
  pthread_create(&t, NULL, thread_device, seen);
  pthread_join(t, NULL);
  cudaGetDevice(&dev);
  expect(seen[0] == 0, "a new thread starts on device 0");
  expect(seen[1] == ndev - 1, "the thread set its own device");
  expect(dev == 1, "this thread's device did not change");
  cudaSetDevice(0);
}

static CUfunction copy_kernel(void) {
  CUmodule mod;
  CUfunction f = NULL;
  const char *ptx = ".version 8.0\n.target sm_90\n.address_size 64\n";
  if (cuModuleLoadData(&mod, ptx) != CUDA_SUCCESS ||
      cuModuleGetFunction(&f, mod, "opc_copy_b4") != CUDA_SUCCESS)
    fail("no opc_copy_b4 kernel");
  return f;
}

static CUresult launch_copy(CUfunction f, cudaStream_t s, float *y, const float *x) {
  struct opc_kargs a;
  memset(&a, 0, sizeof a);
  a.x[0] = x;
  a.y = y;
  a.n = N;
  a.rank = 1;
  a.dims[0] = N;
  a.xstride[0][0] = 1;
  a.ystride[0] = 1;
  a.x_extent[0] = N * sizeof(float);
  a.y_extent = N * sizeof(float);
  void *params[] = {&a};
  return cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, s, params, NULL);
}

static cudnnTensorDescriptor_t vec;

/* Streams, events and handles belong to the device current at their
 * creation; work other than copies may only be queued from it. */
static void test_ownership(void) {
  CUfunction copy = copy_kernel();
  cudaStream_t s0, s1;
  cudaEvent_t e0, e1;
  cudnnHandle_t h0;
  cublasHandle_t b0;
  float *a0, *c0, *a1, *pinned;
  cudaSetDevice(0);
  cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking);
  cudaEventCreate(&e0);
  expect(cudnnCreate(&h0) == CUDNN_STATUS_SUCCESS, "cudnnCreate");
  expect(cublasCreate(&b0) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  cudnnSetStream(h0, s0);
  cublasSetStream(b0, s0);
  cudaMalloc((void **)&a0, N * 4);
  cudaMalloc((void **)&c0, N * 4);
  cudaMallocHost((void **)&pinned, N * 4);
  cudaMemset(a0, 0, N * 4);
  cudaDeviceSynchronize();
  float one = 1, zero = 0;
  expect(launch_copy(copy, s0, c0, a0) == CUDA_SUCCESS, "kernel on its own device");

  cudaSetDevice(1);
  cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
  cudaEventCreate(&e1);
  cudaMalloc((void **)&a1, N * 4);
  expect(launch_copy(copy, s0, c0, a0) == CUDA_ERROR_INVALID_HANDLE,
         "kernel into another device's stream refused");
  expect_err(cudaMemsetAsync(c0, 0, N * 4, s0), cudaErrorInvalidResourceHandle,
             "memset into another device's stream");
  expect_err(cudaMemcpyAsync(pinned, c0, N * 4, cudaMemcpyDeviceToHost, s0), cudaSuccess,
             "a copy may be queued on another device's stream");
  float v = 2;
  expect(cudnnSetTensor(h0, vec, c0, &v) == CUDNN_STATUS_EXECUTION_FAILED,
         "cuDNN handle of device 0 used from device 1");
  expect(cublasSgemm(b0, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, a0, 1, a0, 1, &zero, c0, 1) ==
             CUBLAS_STATUS_EXECUTION_FAILED,
         "cuBLAS handle of device 0 used from device 1");
  expect(cudnnSetStream(h0, s1) == CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH,
         "cudnnSetStream to another device's stream");
  expect(cudnnSetStream(h0, NULL) == CUDNN_STATUS_SUCCESS,
         "cudnnSetStream(NULL): the handle's device's legacy stream");
  expect(cublasSetStream(b0, s1) == CUBLAS_STATUS_INVALID_VALUE,
         "cublasSetStream to another device's stream");
  expect_err(cudaEventRecord(e0, s1), cudaErrorInvalidResourceHandle,
             "recording a device-0 event on a device-1 stream");
  expect_err(cudaEventRecord(e0, s0), cudaSuccess, "recording an event on its device's stream");
  expect_err(cudaStreamWaitEvent(s1, e0, 0), cudaSuccess, "waiting on another device's event");
  expect_err(cudaEventRecord(e1, s1), cudaSuccess, "record on device 1");
  cudaEventSynchronize(e0);
  cudaEventSynchronize(e1);
  float ms;
  expect_err(cudaEventElapsedTime(&ms, e0, e1), cudaErrorInvalidResourceHandle,
             "elapsed time between two devices' events");
  /* The legacy stream is the current device's. */
  expect(launch_copy(copy, NULL, a1, a1) == CUDA_SUCCESS, "kernel on device 1's legacy stream");
  expect_err(cudaDeviceSynchronize(), cudaSuccess, "device 1 synchronises");
  expect_err(cudaFree(a0), cudaSuccess, "cudaFree of device 0's memory from device 1");
  cudaSetDevice(0);
  cudaStreamSynchronize(s0);
  expect(cudnnDestroy(h0) == CUDNN_STATUS_SUCCESS, "cudnnDestroy");
  expect(cublasDestroy(b0) == CUBLAS_STATUS_SUCCESS, "cublasDestroy");
  cudaFree(c0);
  cudaFree(a1);
  cudaFreeHost(pinned);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(s0);
  cudaStreamDestroy(s1);
}

static void test_peer(void) {
  int can = -1;
  cudaSetDevice(0);
  expect_err(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess, "cudaDeviceCanAccessPeer");
  expect(can == 1, "device 0 can access device 1");
  expect_err(cudaDeviceCanAccessPeer(&can, 1, 1), cudaSuccess, "cudaDeviceCanAccessPeer itself");
  expect(can == 0, "a device is not its own peer");
  expect_err(cudaDeviceCanAccessPeer(&can, 0, ndev), cudaErrorInvalidDevice, "peer out of range");
  expect_err(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess, "enable 0 -> 1");
  expect_err(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled, "enable twice");
  expect_err(cudaDeviceEnablePeerAccess(0, 0), cudaErrorInvalidDevice, "enable itself");
  expect_err(cudaDeviceEnablePeerAccess(ndev, 0), cudaErrorInvalidDevice, "enable out of range");
  expect_err(cudaDeviceEnablePeerAccess(1, 1), cudaErrorInvalidValue, "flags must be 0");
  cudaSetDevice(1);
  expect_err(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled,
             "access is one-way: 1 -> 0 was never enabled");
  cudaSetDevice(0);
  expect_err(cudaDeviceDisablePeerAccess(1), cudaSuccess, "disable 0 -> 1");
  expect_err(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled, "disable twice");
  expect_err(cudaDeviceDisablePeerAccess(ndev), cudaErrorInvalidDevice, "disable out of range");

  /* cudaMemcpyPeer's pointers must belong to the devices it names. */
  float *a0, *a1, *pinned;
  cudaMalloc((void **)&a0, N * 4);
  cudaSetDevice(1);
  cudaMalloc((void **)&a1, N * 4);
  cudaSetDevice(0);
  cudaMallocHost((void **)&pinned, N * 4);
  expect_err(cudaMemcpyPeerAsync(a1, 0, a0, 0, N * 4, NULL), cudaErrorInvalidValue,
             "dst is not dstDevice's");
  expect_err(cudaMemcpyPeerAsync(a1, 1, a0, 1, N * 4, NULL), cudaErrorInvalidValue,
             "src is not srcDevice's");
  expect_err(cudaMemcpyPeerAsync(a1, 1, pinned, 0, N * 4, NULL), cudaErrorInvalidValue,
             "pinned memory is no device's");
  expect_err(cudaMemcpyPeerAsync(a1, 1, a0, 0, N * 4 + 4, NULL), cudaErrorInvalidValue,
             "count past the allocation");
  expect_err(cudaMemcpyPeerAsync(a1, ndev, a0, 0, N * 4, NULL), cudaErrorInvalidDevice,
             "dstDevice out of range");
  expect_err(cudaMemcpyPeer(a1, 1, a0, 0, N * 4), cudaSuccess, "cudaMemcpyPeer");
  cudaDeviceSynchronize();
  cudaFree(a0);
  cudaFree(a1);
  cudaFreeHost(pinned);
}

typedef struct Pipe {
  cudaStream_t s0, s1;
  cudnnHandle_t h0, h1;
  cudaEvent_t done0, done1;
  float *x0, *x1, *pinned;
  enum cudaMemcpyKind kind; /* of the copy on device 1's stream */
} Pipe;

/* Device 0 doubles x0; the copy to device 1 waits for it; device 1
 * triples its copy: 6x. Every step on its own device's stream. */
static void pipeline(Pipe *p, bool copy_on_source) {
  float two = 2, three = 3;
  cudaSetDevice(0);
  expect(cudnnScaleTensor(p->h0, vec, p->x0, &two) == CUDNN_STATUS_SUCCESS, "scale on device 0");
  cudaEventRecord(p->done0, p->s0);
  if (copy_on_source) {
    /* The copy is queued on device 0 (behind the scale), then device 1
     * waits for it. */
    expect_err(cudaMemcpyPeerAsync(p->x1, 1, p->x0, 0, N * 4, p->s0), cudaSuccess,
               "peer copy on the source's stream");
    cudaEventRecord(p->done0, p->s0);
    cudaSetDevice(1);
    cudaStreamWaitEvent(p->s1, p->done0, 0);
  } else {
    cudaSetDevice(1);
    cudaStreamWaitEvent(p->s1, p->done0, 0);
    expect_err(cudaMemcpyAsync(p->x1, p->x0, N * 4, p->kind, p->s1), cudaSuccess,
               "cudaMemcpyAsync between two devices");
  }
  expect(cudnnScaleTensor(p->h1, vec, p->x1, &three) == CUDNN_STATUS_SUCCESS, "scale on device 1");
  expect_err(cudaMemcpyAsync(p->pinned, p->x1, N * 4, cudaMemcpyDeviceToHost, p->s1), cudaSuccess,
             "copy back");
  cudaEventRecord(p->done1, p->s1);
  cudaSetDevice(0);
}

static void expect_values(const Pipe *p, const float *x, const char *what) {
  float *want = malloc(N * 4);
  for (int i = 0; i < N; i++)
    want[i] = 6 * x[i];
  close_arrays(what, p->pinned, want, N, 0);
  free(want);
}

static void reload(Pipe *p, const float *x) {
  cudaSetDevice(0);
  expect_err(cudaMemcpy(p->x0, x, N * 4, cudaMemcpyHostToDevice), cudaSuccess, "upload");
  cudaDeviceSynchronize();
}

static void test_pipeline(void) {
  Pipe p;
  float *x = rnd_array(N);
  cudaSetDevice(0);
  cudaStreamCreateWithFlags(&p.s0, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&p.done0, cudaEventDisableTiming);
  cudnnCreate(&p.h0);
  cudnnSetStream(p.h0, p.s0);
  cudaMalloc((void **)&p.x0, N * 4);
  cudaMallocHost((void **)&p.pinned, N * 4);
  cudaSetDevice(1);
  cudaStreamCreateWithFlags(&p.s1, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&p.done1, cudaEventDisableTiming);
  cudnnCreate(&p.h1);
  cudnnSetStream(p.h1, p.s1);
  cudaMalloc((void **)&p.x1, N * 4);
  /* Peer access changes nothing here; a program may enable it. */
  cudaDeviceEnablePeerAccess(0, 0);
  p.kind = cudaMemcpyDefault;

  for (int copy_on_source = 0; copy_on_source < 2; copy_on_source++) {
    reload(&p, x);
    pipeline(&p, copy_on_source);
    expect_err(cudaEventSynchronize(p.done1), cudaSuccess, "pipeline");
    expect_values(&p, x, copy_on_source ? "pipeline, copy on device 0" : "pipeline, copy on 1");
  }

  /* The same as one graph captured from device 0's stream: device 1's
   * stream joins it through the event, and rejoins through done1. The
   * copy is the one opc emits for a transfer. */
  reload(&p, x);
  p.kind = cudaMemcpyDeviceToDevice;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  expect_err(cudaStreamBeginCapture(p.s0, cudaStreamCaptureModeGlobal), cudaSuccess, "capture");
  pipeline(&p, false);
  cudaStreamWaitEvent(p.s0, p.done1, 0);
  expect_err(cudaStreamEndCapture(p.s0, &graph), cudaSuccess, "capture spanning two devices");
  expect_err(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess, "instantiate");
  for (int i = 0; i < 2; i++) {
    reload(&p, x);
    expect_err(cudaGraphLaunch(exec, p.s0), cudaSuccess, "launch");
    expect_err(cudaStreamSynchronize(p.s0), cudaSuccess, "graph");
    expect_values(&p, x, "two-device graph");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  /* CUDA refuses a peer copy in a capture (CUDA 13 on an H200), and the
   * capture is lost. */
  expect_err(cudaStreamBeginCapture(p.s0, cudaStreamCaptureModeGlobal), cudaSuccess, "capture");
  expect_err(cudaMemcpyPeerAsync(p.x1, 1, p.x0, 0, N * 4, p.s0), cudaErrorStreamCaptureUnsupported,
             "cudaMemcpyPeerAsync in a capture");
  expect_err(cudaStreamEndCapture(p.s0, &graph), cudaErrorStreamCaptureInvalidated,
             "the capture after a peer copy");

  cudaSetDevice(1);
  cudaDeviceSynchronize();
  cudnnDestroy(p.h1);
  cudaFree(p.x1);
  cudaStreamDestroy(p.s1);
  cudaEventDestroy(p.done1);
  cudaSetDevice(0);
  cudaDeviceSynchronize();
  cudnnDestroy(p.h0);
  cudaFree(p.x0);
  cudaFreeHost(p.pinned);
  cudaStreamDestroy(p.s0);
  cudaEventDestroy(p.done0);
  free(x);
}

int main(int argc, char **argv) {
  int want = argc > 1 ? atoi(argv[1]) : 8;
  int dims[3] = {1, 1, N}, strides[3] = {N, N, 1};
  cudnnCreateTensorDescriptor(&vec);
  cudnnSetTensorNdDescriptor(vec, CUDNN_DATA_FLOAT, 3, dims, strides);
  test_count(want);
  if (ndev >= 2) {
    test_thread_device();
    test_ownership();
    test_peer();
    test_pipeline();
  }
  expect_err(cudaDeviceSynchronize(), cudaSuccess, "no error left");
  return finish("test_devices");
}
