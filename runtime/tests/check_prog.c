/*
 * check_prog.c - small programs for the checking mode (OPC_CHECK=1), one per
 * argument; run_check.py runs them and says which must be reported.
 *
 *   race        stream 2 reads what stream 1 writes, with no event
 *   ordered     the same with the event
 *   war         stream 2 overwrites what stream 1 still reads
 *   host-sync   the host synchronises with stream 1 before stream 2 reads
 *   kernel-race the race, through custom kernels (extents of opc_kargs)
 *   graph-race  a captured graph whose side stream reads too early; the
 *               capture itself is fine, its replay must be reported
 *   graph-ok    a correct graph, replayed twice
 *   ignored     a race in a program that ignores every error and returns 0
 *   disjoint    two streams write different halves of one buffer
 *   strided-disjoint  stream 1 writes the even rows of a buffer, stream 2
 *                     the odd ones, each one strided call: fine
 *   strided-race      the same, then stream 2 writes one float inside an
 *                     even row in the middle
 *
 * Synchronous calls that return early, and frees:
 *   pageable-race   cudaMemcpy from pageable memory, then stream 2 reads
 *                   the copy: the DMA may still be in flight
 *   pageable-synced the same after cudaStreamSynchronize of the legacy stream
 *   pageable-async  cudaMemcpyAsync from pageable memory on stream 1, then
 *                   cudaStreamSynchronize(stream 1): fine
 *   pinned-copy     cudaMemcpy from cudaMallocHost memory: fully synchronous
 *   memset-race     cudaMemset of device memory, then stream 2 reads it
 *   free-in-use     cudaFree of what stream 1 still writes, no synchronisation
 *   free-graph      cudaFree of a graph's output right after cudaGraphLaunch
 *   free-synced     the same free after cudaStreamSynchronize: fine
 *   destroy-syncs   cudnnDestroy synchronises the device (documented): fine
 *   workspace-race  two streams share one reduction workspace
 *   nan-fill        fresh device memory reads as NaN (exit 0 when it does)
 *
 * Two devices (stream 3 and a handle on device 1):
 *   device-cross    device 1 writes device 0's buffer, peer access enabled
 *   peer-race       device 1 copies device 0's buffer (cudaMemcpyPeerAsync)
 *                   while stream 1 on device 0 still writes it
 *   peer-ordered    the same copy after an event, then device 1 reads its
 *                   copy: fine
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nvtx3/nvToolsExt.h>

#include "../kernels/opc_kargs.h"

#define N 4096

static cudaStream_t s1, s2;
static cudnnHandle_t d1, d2;
static cudnnTensorDescriptor_t whole, half;
static float *buf, *out;
static int errors;

static void note(cudaError_t err, const char *what) {
  if (err != cudaSuccess) {
    fprintf(stderr, "check_prog: %s: %s\n", what, cudaGetErrorString(err));
    errors++;
  }
}

static void note_dnn(cudnnStatus_t st, const char *what) {
  if (st != CUDNN_STATUS_SUCCESS) {
    fprintf(stderr, "check_prog: %s: %s\n", what, cudnnGetErrorString(st));
    errors++;
  }
}

static void produce(void) {
  float v = 3.0f;
  nvtxRangePushA("producer");
  note_dnn(cudnnSetTensor(d1, whole, buf, &v), "producer");
  nvtxRangePop();
}

static void consume(void) {
  float one = 1, zero = 0;
  nvtxRangePushA("consumer");
  note_dnn(cudnnTransformTensor(d2, &one, whole, buf, &zero, whole, out), "consumer");
  nvtxRangePop();
}

static void setup(void) {
  note(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), "stream 1");
  note(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "stream 2");
  cudnnCreate(&d1);
  cudnnCreate(&d2);
  cudnnSetStream(d1, s1);
  cudnnSetStream(d2, s2);
  int dims[3] = {1, 1, N}, strides[3] = {N, N, 1}, hdims[3] = {1, 1, N / 2};
  cudnnCreateTensorDescriptor(&whole);
  cudnnCreateTensorDescriptor(&half);
  cudnnSetTensorNdDescriptor(whole, CUDNN_DATA_FLOAT, 3, dims, strides);
  cudnnSetTensorNdDescriptor(half, CUDNN_DATA_FLOAT, 3, hdims, strides);
  note(cudaMalloc((void **)&buf, N * 4), "malloc");
  note(cudaMalloc((void **)&out, N * 4), "malloc");
  note(cudaMemset(buf, 0, N * 4), "memset");
  note(cudaMemset(out, 0, N * 4), "memset");
  /* cudaMemset of device memory may return before it is done: the
   * non-blocking streams are ordered after it only by a synchronisation. */
  note(cudaDeviceSynchronize(), "sync");
}

static void launch_copy(CUfunction f, cudaStream_t s, float *y, const float *x, const char *name) {
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
  nvtxRangePushA(name);
  if (cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, s, params, NULL) != CUDA_SUCCESS)
    errors++;
  nvtxRangePop();
}

/* Even and odd 32-float rows of buf on two streams: 64 ranges each, which
 * interleave in the checker's shadow. */
static void strided_rows(bool poke) {
  int dims[3] = {1, N / 64, 32}, strides[3] = {N, 64, 1}, one_dim[3] = {1, 1, 1};
  cudnnTensorDescriptor_t rows, single;
  cudnnCreateTensorDescriptor(&rows);
  cudnnCreateTensorDescriptor(&single);
  cudnnSetTensorNdDescriptor(rows, CUDNN_DATA_FLOAT, 3, dims, strides);
  cudnnSetTensorNdDescriptor(single, CUDNN_DATA_FLOAT, 3, one_dim, strides);
  float a = 1, b = 2;
  nvtxRangePushA("even");
  note_dnn(cudnnSetTensor(d1, rows, buf, &a), "even");
  nvtxRangePop();
  nvtxRangePushA("odd");
  note_dnn(cudnnSetTensor(d2, rows, buf + 32, &b), "odd");
  nvtxRangePop();
  if (poke) {
    nvtxRangePushA("poke");
    note_dnn(cudnnSetTensor(d2, single, buf + 40 * 64 + 5, &b), "poke");
    nvtxRangePop();
  }
  note(cudaDeviceSynchronize(), "sync");
  cudnnDestroyTensorDescriptor(rows);
  cudnnDestroyTensorDescriptor(single);
}

/* Producer on s1, consumer on s2, forked from and joined back to s1. */
static void capture_body(cudaEvent_t fork, cudaEvent_t join, bool wait_for_producer) {
  note(cudaEventRecord(fork, s1), "record fork");
  note(cudaStreamWaitEvent(s2, fork, 0), "wait fork");
  produce();
  if (wait_for_producer) {
    cudaEvent_t done;
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    note(cudaEventRecord(done, s1), "record done");
    note(cudaStreamWaitEvent(s2, done, 0), "wait done");
    cudaEventDestroy(done);
  }
  consume();
  note(cudaEventRecord(join, s2), "record join");
  note(cudaStreamWaitEvent(s1, join, 0), "wait join");
}

static int run_graph(bool correct, bool free_early) {
  cudaEvent_t fork, join;
  cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  /* A correct eager run first: the handles' first calls may not be captured. */
  capture_body(fork, join, true);
  note(cudaStreamSynchronize(s1), "sync");
  note(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), "begin capture");
  capture_body(fork, join, correct);
  note(cudaStreamEndCapture(s1, &graph), "end capture");
  note(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  /* Capturing executes and checks nothing: no error may have been seen yet. */
  if (errors)
    return 1;
  fprintf(stderr, "check_prog: captured\n");
  if (free_early) {
    /* What a net_destroy that does not wait for the caller's stream does. */
    note(cudaGraphLaunch(exec, s1), "launch");
    note(cudaFree(out), "free");
    return errors ? 1 : 0;
  }
  for (int i = 0; i < 2; i++) {
    note(cudaGraphLaunch(exec, s1), "launch");
    note(cudaStreamSynchronize(s1), "sync");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return errors ? 1 : 0;
}

/* Copies pageable memory into buf; then stream 2 reads it. */
static void pageable_copy(bool sync_legacy) {
  float *host = malloc(N * 4);
  for (int i = 0; i < N; i++)
    host[i] = (float)i;
  note(cudaMemcpy(buf, host, N * 4, cudaMemcpyHostToDevice), "copy");
  if (sync_legacy)
    note(cudaStreamSynchronize(0), "sync legacy");
  consume();
  free(host);
}

static void pageable_async(void) {
  float *host = malloc(N * 4);
  for (int i = 0; i < N; i++)
    host[i] = (float)i;
  note(cudaMemcpyAsync(buf, host, N * 4, cudaMemcpyHostToDevice, s1), "copy");
  note(cudaStreamSynchronize(s1), "sync");
  consume();
  free(host);
}

static void pinned_copy(void) {
  float *host;
  note(cudaMallocHost((void **)&host, N * 4), "cudaMallocHost");
  for (int i = 0; i < N; i++)
    host[i] = (float)i;
  note(cudaMemcpy(buf, host, N * 4, cudaMemcpyHostToDevice), "copy");
  consume();
  note(cudaStreamSynchronize(s2), "sync");
  note(cudaFreeHost(host), "cudaFreeHost");
}

/* Reduces the whole buffer on each stream, into one shared workspace. */
static void workspace_race(void) {
  cudnnReduceTensorDescriptor_t rd;
  cudnnTensorDescriptor_t one_t;
  int dims[3] = {1, 1, 1}, strides[3] = {1, 1, 1};
  cudnnCreateReduceTensorDescriptor(&rd);
  cudnnSetReduceTensorDescriptor(rd, CUDNN_REDUCE_TENSOR_ADD, CUDNN_DATA_FLOAT,
                                 CUDNN_NOT_PROPAGATE_NAN, CUDNN_REDUCE_TENSOR_NO_INDICES,
                                 CUDNN_32BIT_INDICES);
  cudnnCreateTensorDescriptor(&one_t);
  cudnnSetTensorNdDescriptor(one_t, CUDNN_DATA_FLOAT, 3, dims, strides);
  size_t size = 0;
  note_dnn(cudnnGetReductionWorkspaceSize(d1, rd, whole, one_t, &size), "workspace size");
  void *ws;
  note(cudaMalloc(&ws, size), "malloc");
  float one = 1, zero = 0;
  nvtxRangePushA("reduce_a");
  note_dnn(cudnnReduceTensor(d1, rd, NULL, 0, ws, size, &one, whole, buf, &zero, one_t, out),
           "reduce_a");
  nvtxRangePop();
  nvtxRangePushA("reduce_b");
  note_dnn(cudnnReduceTensor(d2, rd, NULL, 0, ws, size, &one, whole, buf, &zero, one_t, out + 1),
           "reduce_b");
  nvtxRangePop();
}

static bool reads_nan(void) {
  float *fresh;
  uint32_t *host = malloc(N * 4);
  note(cudaMalloc((void **)&fresh, N * 4), "malloc");
  note(cudaMemcpy(host, fresh, N * 4, cudaMemcpyDeviceToHost), "copy");
  bool nan = true;
  for (int i = 0; i < N; i++)
    nan &= host[i] == 0x7fc07fc0u;
  free(host);
  note(cudaFree(fresh), "free");
  return nan;
}

/* Device 1's stream (stream 3), handle and buffer. */
static cudaStream_t s3;
static cudnnHandle_t d3;
static float *buf1, *out1;

static void setup_device1(void) {
  note(cudaSetDevice(1), "device 1");
  note(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking), "stream 3");
  note_dnn(cudnnCreate(&d3), "handle on device 1");
  note_dnn(cudnnSetStream(d3, s3), "cudnnSetStream");
  note(cudaMalloc((void **)&buf1, N * 4), "malloc");
  note(cudaMalloc((void **)&out1, N * 4), "malloc");
}

static void run_device_mode(const char *mode, cudaEvent_t ev) {
  setup_device1();
  if (strcmp(mode, "device-cross") == 0) {
    /* Peer access makes it legal CUDA, but opc must copy explicitly. */
    note(cudaDeviceEnablePeerAccess(0, 0), "peer access");
    float v = 1;
    nvtxRangePushA("cross");
    note_dnn(cudnnSetTensor(d3, whole, buf, &v), "cross");
    nvtxRangePop();
    return;
  }
  note(cudaSetDevice(0), "device 0");
  produce();
  if (strcmp(mode, "peer-ordered") == 0)
    note(cudaEventRecord(ev, s1), "record");
  note(cudaSetDevice(1), "device 1");
  if (strcmp(mode, "peer-ordered") == 0)
    note(cudaStreamWaitEvent(s3, ev, 0), "wait on device 0's event");
  nvtxRangePushA("peer_copy");
  note(cudaMemcpyPeerAsync(buf1, 1, buf, 0, N * 4, s3), "peer copy");
  nvtxRangePop();
  float one = 1, zero = 0;
  nvtxRangePushA("device1_consumer");
  note_dnn(cudnnTransformTensor(d3, &one, whole, buf1, &zero, whole, out1), "device 1 consumer");
  nvtxRangePop();
  note(cudaStreamSynchronize(s3), "sync");
}

/* The modes about synchronous calls and frees; false for an unknown one. */
static bool run_memory_mode(const char *mode) {
  if (strcmp(mode, "pageable-race") == 0 || strcmp(mode, "pageable-synced") == 0) {
    pageable_copy(strcmp(mode, "pageable-synced") == 0);
  } else if (strcmp(mode, "pageable-async") == 0) {
    pageable_async();
  } else if (strcmp(mode, "pinned-copy") == 0) {
    pinned_copy();
  } else if (strcmp(mode, "memset-race") == 0) {
    note(cudaMemset(buf, 0, N * 4), "memset");
    consume();
  } else if (strcmp(mode, "free-in-use") == 0 || strcmp(mode, "free-synced") == 0) {
    produce();
    if (strcmp(mode, "free-synced") == 0)
      note(cudaStreamSynchronize(s1), "sync");
    note(cudaFree(buf), "free");
  } else if (strcmp(mode, "destroy-syncs") == 0) {
    produce();
    note_dnn(cudnnDestroy(d1), "destroy");
    note(cudaFree(buf), "free");
  } else if (strcmp(mode, "workspace-race") == 0) {
    workspace_race();
  } else if (strcmp(mode, "nan-fill") == 0) {
    if (!reads_nan()) {
      fprintf(stderr, "check_prog: fresh memory does not read as NaN\n");
      errors++;
    }
  } else {
    return false;
  }
  return true;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: check_prog MODE\n");
    return 2;
  }
  const char *mode = argv[1];
  setup();
  cudaEvent_t ev;
  cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (strcmp(mode, "race") == 0 || strcmp(mode, "ordered") == 0) {
    produce();
    if (strcmp(mode, "ordered") == 0) {
      note(cudaEventRecord(ev, s1), "record");
      note(cudaStreamWaitEvent(s2, ev, 0), "wait");
    }
    consume();
  } else if (strcmp(mode, "war") == 0) {
    cudaDeviceSynchronize();
    consume(); /* s2 reads buf ... */
    produce(); /* ... while s1 overwrites it */
  } else if (strcmp(mode, "host-sync") == 0) {
    produce();
    note(cudaStreamSynchronize(s1), "sync");
    consume();
  } else if (strcmp(mode, "kernel-race") == 0) {
    CUmodule mod;
    CUfunction copy;
    const char *ptx = ".version 8.0\n.target sm_90\n.address_size 64\n";
    if (cuModuleLoadData(&mod, ptx) != CUDA_SUCCESS ||
        cuModuleGetFunction(&copy, mod, "opc_copy_b4") != CUDA_SUCCESS) {
      fprintf(stderr, "check_prog: no opc_copy_b4 kernel\n");
      return 1;
    }
    launch_copy(copy, s1, buf, out, "kernel_producer");
    launch_copy(copy, s2, out + 0, buf, "kernel_consumer");
  } else if (strcmp(mode, "graph-race") == 0 || strcmp(mode, "graph-ok") == 0 ||
             strcmp(mode, "free-graph") == 0) {
    int rc = run_graph(strcmp(mode, "graph-race") != 0, strcmp(mode, "free-graph") == 0);
    cudaDeviceSynchronize();
    return rc || errors;
  } else if (strcmp(mode, "ignored") == 0) {
    produce();
    consume();
    cudaDeviceSynchronize();
    return 0; /* the runtime must still make the process fail */
  } else if (strcmp(mode, "disjoint") == 0) {
    float a = 1, b = 2;
    nvtxRangePushA("left");
    note_dnn(cudnnSetTensor(d1, half, buf, &a), "left");
    nvtxRangePop();
    nvtxRangePushA("right");
    note_dnn(cudnnSetTensor(d2, half, buf + N / 2, &b), "right");
    nvtxRangePop();
  } else if (strncmp(mode, "strided-", 8) == 0) {
    strided_rows(strcmp(mode, "strided-race") == 0);
  } else if (strncmp(mode, "device-", 7) == 0 || strncmp(mode, "peer-", 5) == 0) {
    run_device_mode(mode, ev);
    note(cudaDeviceSynchronize(), "sync device 1");
    note(cudaSetDevice(0), "device 0");
  } else if (!run_memory_mode(mode)) {
    fprintf(stderr, "check_prog: unknown mode %s\n", mode);
    return 2;
  }
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    fprintf(stderr, "check_prog: %s\n", cudaGetErrorString(err));
    return 1;
  }
  return errors ? 1 : 0;
}
