/*
 * test_streams.c - streams as threads, events, the legacy stream's implicit
 * ordering, timing, and CUDA graph capture and replay.
 */
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
#include <cudnn.h>

#include "testutil.h"

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A slow producer: sleeps, then fills a buffer. */
typedef struct Fill {
  float *p;
  long long n;
  float value;
  int delay_ms;
} Fill;

static void slow_fill(void *arg) {
  Fill *f = arg;
  sleep_ms(f->delay_ms);
  for (long long i = 0; i < f->n; i++)
    f->p[i] = f->value;
}

static void test_producer_consumer(void) {
  long long n = 1 << 16;
  float *buf, *out, *host = malloc(n * 4);
  cudaMalloc((void **)&buf, n * 4);
  cudaMalloc((void **)&out, n * 4);
  cudaMemset(buf, 0, n * 4);
  cudaStream_t a, b;
  cudaEvent_t ready;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  Fill f = {buf, n, 42.0f, 80};
  cudaLaunchHostFunc(a, slow_fill, &f);
  cudaEventRecord(ready, a);
  cudaStreamWaitEvent(b, ready, 0);
  cudaMemcpyAsync(out, buf, n * 4, cudaMemcpyDeviceToDevice, b);
  expect(cudaStreamQuery(b) == cudaErrorNotReady, "consumer still waiting");
  expect(cudaStreamSynchronize(b) == cudaSuccess, "sync consumer");
  expect(cudaStreamQuery(b) == cudaSuccess, "consumer done");
  cudaMemcpy(host, out, n * 4, cudaMemcpyDeviceToHost);
  bool ok = true;
  for (long long i = 0; i < n; i++)
    ok &= host[i] == 42.0f;
  expect(ok, "consumer saw the producer's data");
  cudaEventDestroy(ready);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  cudaFree(buf);
  cudaFree(out);
  free(host);
}

typedef struct Sleep {
  int ms;
} Sleep;

static void sleeper(void *arg) {
  sleep_ms(((Sleep *)arg)->ms);
}

static void test_parallel_and_timing(void) {
  cudaStream_t s[3];
  for (int i = 0; i < 3; i++)
    cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking);
  Sleep nap = {100};
  double t0 = now_ms();
  for (int i = 0; i < 3; i++)
    cudaLaunchHostFunc(s[i], sleeper, &nap);
  cudaDeviceSynchronize();
  double took = now_ms() - t0;
  if (took > 250)
    fail("three 100 ms sleeps on three streams took %.0f ms: streams did not run in parallel", took);

  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  Sleep short_nap = {60};
  cudaEventRecord(start, s[0]);
  cudaLaunchHostFunc(s[0], sleeper, &short_nap);
  cudaEventRecord(stop, s[0]);
  float ms = 0;
  cudaError_t early = cudaEventElapsedTime(&ms, start, stop);
  expect(early == cudaErrorNotReady || early == cudaSuccess, "elapsed time before completion");
  expect(cudaEventSynchronize(stop) == cudaSuccess, "event sync");
  expect(cudaEventQuery(stop) == cudaSuccess, "event done");
  expect(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess, "elapsed time");
  if (ms < 55 || ms > 1000)
    fail("elapsed %.2f ms for a 60 ms sleep", ms);
  cudaEvent_t untimed;
  cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming);
  cudaEventRecord(untimed, s[0]);
  cudaEventSynchronize(untimed);
  expect(cudaEventElapsedTime(&ms, start, untimed) != cudaSuccess, "untimed event refused");
  cudaGetLastError();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaEventDestroy(untimed);
  for (int i = 0; i < 3; i++)
    cudaStreamDestroy(s[i]);
}

/* A blocking stream's work is finished before a legacy-stream copy starts. */
static void test_legacy_ordering(void) {
  long long n = 1024;
  float *buf, host[1024];
  cudaMalloc((void **)&buf, n * 4);
  cudaMemset(buf, 0, n * 4);
  cudaStream_t blocking;
  cudaStreamCreate(&blocking);
  Fill f = {buf, n, 7.0f, 60};
  cudaLaunchHostFunc(blocking, slow_fill, &f);
  cudaMemcpy(host, buf, n * 4, cudaMemcpyDeviceToHost);
  bool ok = true;
  for (long long i = 0; i < n; i++)
    ok &= host[i] == 7.0f;
  expect(ok, "legacy copy ordered after the blocking stream");
  cudaStreamDestroy(blocking);
  cudaFree(buf);
}

/* ---- graphs ---- */

typedef struct Net {
  cudnnHandle_t dnn[2];
  cudaStream_t s[2];
  cudaEvent_t fork, join;
  cudnnTensorDescriptor_t t;
  cudnnOpTensorDescriptor_t add, mul;
  float *x, *b, *c, *d;
  int n;
} Net;

/* d = (2 x) * (x + x), with the two factors on two streams. */
static void enqueue(Net *net) {
  float one = 1, two = 2, zero = 0;
  cudaEventRecord(net->fork, net->s[0]);
  cudaStreamWaitEvent(net->s[1], net->fork, 0);
  cudnnAddTensor(net->dnn[1], &two, net->t, net->x, &zero, net->t, net->b);
  cudnnOpTensor(net->dnn[0], net->add, &one, net->t, net->x, &one, net->t, net->x, &zero, net->t,
                net->c);
  cudaEventRecord(net->join, net->s[1]);
  cudaStreamWaitEvent(net->s[0], net->join, 0);
  cudnnOpTensor(net->dnn[0], net->mul, &one, net->t, net->b, &one, net->t, net->c, &zero, net->t,
                net->d);
}

static void expect_d(Net *net, const float *x, const char *what) {
  float *got = malloc(net->n * 4);
  cudaMemcpy(got, net->d, net->n * 4, cudaMemcpyDeviceToHost);
  float *want = malloc(net->n * 4);
  for (int i = 0; i < net->n; i++)
    want[i] = (2 * x[i]) * (x[i] + x[i]);
  close_arrays(what, got, want, net->n, 1e-6f);
  free(got);
  free(want);
}

static void test_graph(void) {
  Net net = {.n = 4096};
  int dims[3] = {1, 1, net.n}, strides[3] = {net.n, net.n, 1};
  for (int i = 0; i < 2; i++) {
    cudaStreamCreateWithFlags(&net.s[i], cudaStreamNonBlocking);
    cudnnCreate(&net.dnn[i]);
    cudnnSetStream(net.dnn[i], net.s[i]);
  }
  cudaEventCreateWithFlags(&net.fork, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&net.join, cudaEventDisableTiming);
  cudnnCreateTensorDescriptor(&net.t);
  cudnnSetTensorNdDescriptor(net.t, CUDNN_DATA_FLOAT, 3, dims, strides);
  cudnnCreateOpTensorDescriptor(&net.add);
  cudnnSetOpTensorDescriptor(net.add, CUDNN_OP_TENSOR_ADD, CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN);
  cudnnCreateOpTensorDescriptor(&net.mul);
  cudnnSetOpTensorDescriptor(net.mul, CUDNN_OP_TENSOR_MUL, CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN);
  cudaMalloc((void **)&net.x, net.n * 4);
  cudaMalloc((void **)&net.b, net.n * 4);
  cudaMalloc((void **)&net.c, net.n * 4);
  cudaMalloc((void **)&net.d, net.n * 4);
  float *x = rnd_array(net.n), *zeros = calloc(net.n, 4);

  /* Direct execution, which also initialises the handles for the
   * captures below (and both handles for the transform). */
  cudaMemcpy(net.x, x, net.n * 4, cudaMemcpyHostToDevice);
  cudaDeviceSynchronize();
  enqueue(&net);
  cudaStreamSynchronize(net.s[0]);
  expect_d(&net, x, "direct execution");
  float one = 1, zero = 0;
  for (int i = 0; i < 2; i++)
    cudnnTransformTensor(net.dnn[i], &one, net.t, net.x, &zero, net.t, net.b);
  cudaDeviceSynchronize();

  /* Capture: nothing runs until the graph is launched. */
  cudaMemcpy(net.d, zeros, net.n * 4, cudaMemcpyHostToDevice);
  expect(cudaStreamBeginCapture(net.s[0], cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
  enum cudaStreamCaptureStatus status;
  cudaStreamIsCapturing(net.s[0], &status);
  expect(status == cudaStreamCaptureStatusActive, "origin is capturing");
  enqueue(&net);
  cudaStreamIsCapturing(net.s[1], &status);
  expect(status == cudaStreamCaptureStatusActive, "side stream was pulled into the capture");
  cudaGraph_t graph;
  expect(cudaStreamEndCapture(net.s[0], &graph) == cudaSuccess, "end capture");
  cudaStreamIsCapturing(net.s[1], &status);
  expect(status == cudaStreamCaptureStatusNone, "side stream released");
  cudaGraphExec_t exec;
  expect(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
  expect(cudaGraphUpload(exec, net.s[0]) == cudaSuccess, "upload");
  cudaDeviceSynchronize();
  float *d = malloc(net.n * 4);
  cudaMemcpy(d, net.d, net.n * 4, cudaMemcpyDeviceToHost);
  expect(d[0] == 0 && d[net.n - 1] == 0, "capture did not execute");
  free(d);
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < net.n; i++)
      x[i] = rnd();
    cudaMemcpy(net.x, x, net.n * 4, cudaMemcpyHostToDevice);
    expect(cudaGraphLaunch(exec, net.s[0]) == cudaSuccess, "launch");
    cudaStreamSynchronize(net.s[0]);
    expect_d(&net, x, "graph replay");
  }
  /* Replays on another stream are ordered with that stream's work. */
  cudaStream_t other;
  cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
  Fill f = {net.x, net.n, 0.25f, 50};
  cudaLaunchHostFunc(other, slow_fill, &f);
  cudaGraphLaunch(exec, other);
  cudaStreamSynchronize(other);
  for (int i = 0; i < net.n; i++)
    x[i] = 0.25f;
  expect_d(&net, x, "graph replay ordered after prior work on its stream");
  cudaStreamDestroy(other);
  expect(cudaGraphExecDestroy(exec) == cudaSuccess, "exec destroy");
  expect(cudaGraphDestroy(graph) == cudaSuccess, "graph destroy");

  /* A forked stream that never joins back is an error. */
  cudaStreamBeginCapture(net.s[0], cudaStreamCaptureModeGlobal);
  cudaEventRecord(net.fork, net.s[0]);
  cudaStreamWaitEvent(net.s[1], net.fork, 0);
  cudnnTransformTensor(net.dnn[1], &one, net.t, net.x, &zero, net.t, net.b);
  expect(cudaStreamEndCapture(net.s[0], &graph) == cudaErrorStreamCaptureUnjoined,
         "unjoined capture refused");
  expect(graph == NULL, "no graph from a failed capture");
  cudaStreamIsCapturing(net.s[1], &status);
  expect(status == cudaStreamCaptureStatusNone, "failed capture released its streams");

  /* Synchronising a capturing stream is refused. */
  cudaStreamBeginCapture(net.s[0], cudaStreamCaptureModeGlobal);
  expect(cudaStreamSynchronize(net.s[0]) == cudaErrorStreamCaptureUnsupported,
         "sync during capture refused");
  expect(cudaStreamEndCapture(net.s[0], &graph) == cudaErrorStreamCaptureInvalidated,
         "capture invalidated");
  cudaGetLastError();

  cudaDeviceSynchronize();
  for (int i = 0; i < 2; i++) {
    cudnnDestroy(net.dnn[i]);
    cudaStreamDestroy(net.s[i]);
  }
  cudaEventDestroy(net.fork);
  cudaEventDestroy(net.join);
  cudnnDestroyTensorDescriptor(net.t);
  cudnnDestroyOpTensorDescriptor(net.add);
  cudnnDestroyOpTensorDescriptor(net.mul);
  cudaFree(net.x), cudaFree(net.b), cudaFree(net.c), cudaFree(net.d);
  free(x), free(zeros);
}

static void test_errors(void) {
  expect(cudaSetDevice(16) == cudaErrorInvalidDevice, "bad device"); /* at most 16 are emulated */
  expect(cudaGetLastError() == cudaErrorInvalidDevice, "last error");
  expect(cudaGetLastError() == cudaSuccess, "last error reset");
  expect(cudaMemcpy(NULL, NULL, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue, "NULL copy");
  expect(cudaEventRecord(NULL, NULL) == cudaErrorInvalidResourceHandle, "NULL event");
  expect(strcmp(cudaGetErrorName(cudaErrorStreamCaptureUnjoined), "cudaErrorStreamCaptureUnjoined") == 0,
         "error name");
  int dev = -1, v = 0;
  struct cudaDeviceProp prop;
  expect(cudaGetDevice(&dev) == cudaSuccess && dev == 0, "device 0");
  expect(cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.multiProcessorCount >= 1, "props");
  expect(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess &&
             v == prop.major,
         "attribute");
  cudaGetLastError();
}

/* 2-D copies, fills, stream-ordered allocation. */
static void test_memory(void) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  unsigned char *src, *dst, host[8 * 20];
  expect(cudaMallocAsync((void **)&src, 8 * 16, s) == cudaSuccess, "cudaMallocAsync");
  expect(cudaMalloc((void **)&dst, 8 * 20) == cudaSuccess, "cudaMalloc");
  for (int i = 0; i < 8 * 16; i++)
    host[i] = (unsigned char)i;
  cudaMemcpyAsync(src, host, 8 * 16, cudaMemcpyHostToDevice, s);
  cudaMemsetAsync(dst, 0xab, 8 * 20, s);
  /* 8 rows of 10 bytes, from pitch 16 to pitch 20 */
  expect(cudaMemcpy2DAsync(dst, 20, src + 3, 16, 10, 8, cudaMemcpyDeviceToDevice, s) == cudaSuccess,
         "cudaMemcpy2DAsync");
  expect(cudaFreeAsync(src, s) == cudaSuccess, "cudaFreeAsync");
  cudaStreamSynchronize(s);
  cudaMemcpy(host, dst, 8 * 20, cudaMemcpyDeviceToHost);
  bool ok = true;
  for (int r = 0; r < 8; r++)
    for (int c = 0; c < 20; c++)
      ok &= host[r * 20 + c] == (c < 10 ? (unsigned char)(r * 16 + 3 + c) : 0xab);
  expect(ok, "2-D copy over a fill");
  expect(cudaFree(dst) == cudaSuccess, "cudaFree");
  int stack;
  expect(cudaFree(&stack) == cudaErrorInvalidDevicePointer, "foreign pointer refused");
  cudaGetLastError();
  cudaStreamDestroy(s);
}

int main(void) {
  test_errors();
  test_memory();
  test_producer_consumer();
  test_parallel_and_timing();
  test_legacy_ordering();
  test_graph();
  return finish("test_streams");
}
