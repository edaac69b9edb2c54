/*
 * test_conditional.c - CUDA graph conditional nodes (WHILE, IF with one
 * and two bodies), built as a compiler builds them: inside a stream
 * capture, with cudaStreamGetCaptureInfo, cudaGraphAddNode,
 * cudaStreamUpdateCaptureDependencies and a body captured with
 * cudaStreamBeginCaptureToGraph; the condition set on the device by
 * opc_loop_condition. Then what CUDA refuses, with CUDA's error codes.
 *
 * With an argument it runs one case whose error is sticky (a device-side
 * fault), in its own process: "host-set" calls cudaGraphSetConditional
 * from host code, "foreign-handle" runs a kernel that sets a handle of
 * another graph. Both must make the next synchronisation fail.
 * "driver-12.4" checks which nodes an older driver takes.
 */
#include <string.h>

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvrtc.h>

#include "../kernels/opc_kargs.h"
#include "testutil.h"

static CUmodule module;
static CUfunction add_i64, loop_condition;

/* Loads the two kernels as an emitted program does: NVRTC, then the driver. */
static void load_kernels(void) {
  static const char *src = "OPC_KERNEL(opc_add_i64)\n{\n}\nOPC_KERNEL(opc_loop_condition)\n{\n}\n";
  nvrtcProgram prog;
  const char *opts[] = {"-arch=sm_90"};
  size_t size = 0;
  expect(nvrtcCreateProgram(&prog, src, "net.cu", 0, NULL, NULL) == NVRTC_SUCCESS, "nvrtc create");
  expect(nvrtcCompileProgram(prog, 1, opts) == NVRTC_SUCCESS, "nvrtc compile");
  expect(nvrtcGetCUBINSize(prog, &size) == NVRTC_SUCCESS && size > 0, "cubin size");
  char *cubin = malloc(size);
  expect(nvrtcGetCUBIN(prog, cubin) == NVRTC_SUCCESS, "cubin");
  cuInit(0);
  expect(cuModuleLoadData(&module, cubin) == CUDA_SUCCESS, "module load");
  expect(cuModuleGetFunction(&add_i64, module, "opc_add_i64") == CUDA_SUCCESS, "opc_add_i64");
  expect(cuModuleGetFunction(&loop_condition, module, "opc_loop_condition") == CUDA_SUCCESS,
         "opc_loop_condition");
  free(cubin);
  nvrtcDestroyProgram(&prog);
}

static void launch(CUfunction f, struct opc_kargs *a, cudaStream_t s) {
  void *params[] = {a};
  expect(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL) == CUDA_SUCCESS, "launch");
}

/* *acc += *x (int64), one element. */
static void add(long long *acc, const long long *x, cudaStream_t s) {
  struct opc_kargs a;
  memset(&a, 0, sizeof a);
  a.x[0] = acc;
  a.x[1] = x;
  a.y = acc;
  a.n = 1;
  a.rank = 1;
  a.dims[0] = 1;
  a.xstride[0][0] = a.xstride[1][0] = a.ystride[0] = 1;
  a.x_extent[0] = a.x_extent[1] = a.y_extent = 8;
  launch(add_i64, &a, s);
}

/* opc_loop_condition: counter += step; handle = counter < *trips && *cond
 * (either left out when NULL). */
static void condition(cudaGraphConditionalHandle h, long long *counter, const long long *trips,
                      const unsigned char *cond, long long step, cudaStream_t s) {
  struct opc_kargs a;
  memset(&a, 0, sizeof a);
  a.x[0] = trips;
  a.x[1] = cond;
  a.x_extent[0] = trips ? 8 : 0;
  a.x_extent[1] = cond ? 1 : 0;
  a.y = counter;
  a.y_extent = 8;
  a.n = 1;
  a.rank = 1;
  a.dims[0] = 1;
  a.i[0] = (long long)h;
  a.i[1] = step;
  launch(loop_condition, &a, s);
}

static long long *dev_i64(long long v) {
  long long *p;
  cudaMalloc((void **)&p, 8);
  cudaMemcpy(p, &v, 8, cudaMemcpyHostToDevice);
  cudaDeviceSynchronize(); /* the copy may still be in flight for other streams */
  return p;
}

static long long read_i64(const long long *p) {
  long long v = -1;
  cudaMemcpy(&v, p, 8, cudaMemcpyDeviceToHost);
  return v;
}

/* The capture's graph, as a compiler gets it to make a handle. */
static cudaGraph_t capture_graph(cudaStream_t s) {
  enum cudaStreamCaptureStatus status;
  cudaGraph_t g = NULL;
  expect(cudaStreamGetCaptureInfo(s, &status, NULL, &g, NULL, NULL, NULL) == cudaSuccess &&
             status == cudaStreamCaptureStatusActive && g,
         "capture info: graph");
  return g;
}

/* A conditional node after everything s did (and `also`, unless NULL,
 * whose dependencies join s's), s continuing after it; its bodies in
 * bodies[]. */
static cudaError_t add_conditional_after(cudaStream_t s, cudaStream_t also,
                                         cudaGraphConditionalHandle h,
                                         enum cudaGraphConditionalNodeType type, unsigned size,
                                         cudaGraph_t *bodies) {
  enum cudaStreamCaptureStatus status;
  cudaGraph_t g;
  const cudaGraphNode_t *deps;
  size_t ndeps, nall = 0;
  cudaGraphNode_t all[64];
  for (int k = 0; k < 2; k++) {
    if (k == 1 && !also)
      break;
    expect(cudaStreamGetCaptureInfo(k ? also : s, &status, NULL, &g, &deps, NULL, &ndeps) ==
               cudaSuccess,
           "capture info: dependencies");
    for (size_t i = 0; i < ndeps && nall < 64; i++) {
      size_t j = 0;
      while (j < nall && all[j] != deps[i])
        j++;
      if (j == nall)
        all[nall++] = deps[i];
    }
  }
  struct cudaGraphNodeParams p;
  memset(&p, 0, sizeof p);
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = h;
  p.conditional.type = type;
  p.conditional.size = size;
  cudaGraphNode_t node;
  cudaError_t err = cudaGraphAddNode(&node, g, all, NULL, nall, &p);
  if (err)
    return err;
  for (unsigned i = 0; i < size; i++)
    bodies[i] = p.conditional.phGraph_out[i];
  expect(cudaStreamUpdateCaptureDependencies(s, &node, NULL, 1,
                                             cudaStreamSetCaptureDependencies) == cudaSuccess,
         "update capture dependencies");
  return cudaSuccess;
}

static cudaError_t add_conditional(cudaStream_t s, cudaGraphConditionalHandle h,
                                   enum cudaGraphConditionalNodeType type, unsigned size,
                                   cudaGraph_t *bodies) {
  return add_conditional_after(s, NULL, h, type, size, bodies);
}

static void begin_body(cudaStream_t b, cudaGraph_t body) {
  expect(cudaStreamBeginCaptureToGraph(b, body, NULL, NULL, 0, cudaStreamCaptureModeGlobal) ==
             cudaSuccess,
         "capture to the body");
}

static void end_body(cudaStream_t b) {
  expect(cudaStreamEndCapture(b, NULL) == cudaSuccess, "body captured");
}

/*
 * A Loop: acc += x in the body while counter < M, M read from device
 * memory at each launch. A side stream writes x (2) before the loop: the
 * node depends on it through cudaGraphAddNode's dependencies only (the
 * checker run sees a race if the node is not ordered after it), and a
 * copy of acc after the node checks that it ends before its dependents.
 */
static void test_while(cudaStream_t s, cudaStream_t side, cudaStream_t b) {
  long long *trips = dev_i64(0), *counter = dev_i64(7), *acc = dev_i64(7), *x = dev_i64(0);
  long long *two = dev_i64(2), *after = dev_i64(-1);
  cudaEvent_t fork;
  cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
  expect(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
  cudaGraphConditionalHandle h;
  expect(cudaGraphConditionalHandleCreate(&h, capture_graph(s), 0, 0) == cudaSuccess, "handle");
  cudaMemsetAsync(counter, 0, 8, s);
  cudaMemsetAsync(acc, 0, 8, s);
  cudaEventRecord(fork, s);
  cudaStreamWaitEvent(side, fork, 0);
  cudaMemcpyAsync(x, two, 8, cudaMemcpyDeviceToDevice, side);
  condition(h, counter, trips, NULL, 0, s);
  cudaGraph_t body;
  expect(add_conditional_after(s, side, h, cudaGraphCondTypeWhile, 1, &body) == cudaSuccess,
         "WHILE node");
  begin_body(b, body);
  add(acc, x, b);
  condition(h, counter, trips, NULL, 1, b);
  end_body(b);
  cudaMemcpyAsync(after, acc, 8, cudaMemcpyDeviceToDevice, s);
  cudaGraph_t g;
  expect(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
  cudaGraphExec_t x_exec;
  expect(cudaGraphInstantiate(&x_exec, g, 0) == cudaSuccess, "instantiate WHILE");
  cudaGraphExec_t second;
  expect(cudaGraphInstantiate(&second, g, 0) == cudaErrorInvalidValue,
         "a second executable graph of a graph with conditional nodes refused");
  const long long runs[] = {0, 1, 5, 3};
  for (int i = 0; i < 4; i++) {
    long long n = runs[i];
    cudaMemcpyAsync(trips, &n, 8, cudaMemcpyHostToDevice, s);
    expect(cudaGraphLaunch(x_exec, s) == cudaSuccess, "launch WHILE");
    expect(cudaStreamSynchronize(s) == cudaSuccess, "WHILE ran");
    if (read_i64(counter) != n || read_i64(acc) != 2 * n || read_i64(after) != 2 * n)
      fail("WHILE with M = %lld: counter %lld, acc %lld, after %lld; expected %lld, %lld, %lld",
           n, read_i64(counter), read_i64(acc), read_i64(after), n, 2 * n, 2 * n);
  }
  cudaGraphExecDestroy(x_exec);
  cudaGraphDestroy(g);
  cudaEventDestroy(fork);
  cudaFree(trips), cudaFree(counter), cudaFree(acc), cudaFree(x), cudaFree(two), cudaFree(after);
}

/* IF on a flag in device memory, with one body (acc += 1) or two (the
 * second: acc += 1 twice). */
static void test_if(cudaStream_t s, cudaStream_t b, unsigned size) {
  long long *one = dev_i64(1), *counter = dev_i64(0), *acc = dev_i64(7);
  unsigned char *flag;
  cudaMalloc((void **)&flag, 1);
  expect(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
  cudaGraphConditionalHandle h;
  expect(cudaGraphConditionalHandleCreate(&h, capture_graph(s), 0, 0) == cudaSuccess, "handle");
  cudaMemsetAsync(counter, 0, 8, s);
  cudaMemsetAsync(acc, 0, 8, s);
  condition(h, counter, one, flag, 0, s);
  cudaGraph_t bodies[2];
  expect(add_conditional(s, h, cudaGraphCondTypeIf, size, bodies) == cudaSuccess, "IF node");
  begin_body(b, bodies[0]);
  add(acc, one, b);
  end_body(b);
  if (size == 2) {
    begin_body(b, bodies[1]);
    add(acc, one, b);
    add(acc, one, b);
    end_body(b);
  }
  cudaGraph_t g;
  expect(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
  cudaGraphExec_t x;
  expect(cudaGraphInstantiate(&x, g, 0) == cudaSuccess, "instantiate IF");
  for (unsigned char f = 0; f < 2; f++) {
    cudaMemcpyAsync(flag, &f, 1, cudaMemcpyHostToDevice, s);
    cudaGraphLaunch(x, s);
    cudaStreamSynchronize(s);
    long long want = f ? 1 : size == 2 ? 2 : 0;
    if (read_i64(acc) != want)
      fail("IF with %u bodies, condition %d: acc %lld, expected %lld", size, f, read_i64(acc),
           want);
  }
  cudaGraphExecDestroy(x);
  cudaGraphDestroy(g);
  cudaFree(one), cudaFree(counter), cudaFree(acc), cudaFree(flag);
}

/* A handle made with cudaGraphCondAssignDefault starts every launch at
 * its default (1): the body runs until the counter reaches 3 each time,
 * although the last launch left the handle 0. */
static void test_default(cudaStream_t s, cudaStream_t b) {
  long long *three = dev_i64(3), *counter = dev_i64(0), *acc = dev_i64(0), *one = dev_i64(1);
  expect(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
  cudaGraphConditionalHandle h;
  expect(cudaGraphConditionalHandleCreate(&h, capture_graph(s), 1, cudaGraphCondAssignDefault) ==
             cudaSuccess,
         "handle with a default");
  cudaMemsetAsync(counter, 0, 8, s);
  cudaGraph_t body;
  expect(add_conditional(s, h, cudaGraphCondTypeWhile, 1, &body) == cudaSuccess, "WHILE node");
  begin_body(b, body);
  add(acc, one, b);
  condition(h, counter, three, NULL, 1, b);
  end_body(b);
  cudaGraph_t g;
  expect(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
  cudaGraphExec_t x;
  expect(cudaGraphInstantiate(&x, g, 0) == cudaSuccess, "instantiate");
  /* The second launch, on another stream, is ordered after the first, as
   * cudaGraphLaunch orders launches of one executable graph (the checker
   * run sees a race on acc if it is not). */
  cudaGraphLaunch(x, s);
  cudaGraphLaunch(x, b);
  cudaStreamSynchronize(b);
  cudaStreamSynchronize(s);
  if (read_i64(acc) != 6)
    fail("default value, two launches: acc %lld, expected 6", read_i64(acc));
  cudaGraphLaunch(x, s);
  cudaStreamSynchronize(s);
  if (read_i64(acc) != 9)
    fail("default value, third launch: acc %lld, expected 9", read_i64(acc));
  /* Destroyed while its launch may still run: CUDA lets the launch finish. */
  cudaGraphLaunch(x, s);
  expect(cudaGraphExecDestroy(x) == cudaSuccess, "destroy a launched executable graph");
  cudaGraphDestroy(g);
  cudaStreamSynchronize(s);
  if (read_i64(acc) != 12)
    fail("default value, launch then destroy: acc %lld, expected 12", read_i64(acc));
  cudaFree(three), cudaFree(counter), cudaFree(acc), cudaFree(one);
}

static void host_fn(void *data) {
  (void)data;
}

/* A graph with one WHILE node whose body `fill` fills; what instantiating it returns. */
static cudaError_t instantiate_body(cudaStream_t s, cudaStream_t b,
                                    void (*fill)(cudaGraph_t body, cudaStream_t b)) {
  expect(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
  cudaGraphConditionalHandle h;
  cudaGraphConditionalHandleCreate(&h, capture_graph(s), 0, 0);
  cudaGraph_t body;
  expect(add_conditional(s, h, cudaGraphCondTypeWhile, 1, &body) == cudaSuccess, "WHILE node");
  fill(body, b);
  cudaGraph_t g;
  expect(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
  cudaGraphExec_t x = NULL;
  cudaError_t err = cudaGraphInstantiate(&x, g, 0);
  if (x)
    cudaGraphExecDestroy(x);
  cudaGraphDestroy(g);
  return err;
}

static cudaEvent_t body_event;
static long long *body_dev;
static long long body_host;

static void fill_event_record(cudaGraph_t body, cudaStream_t b) {
  (void)b;
  struct cudaGraphNodeParams p;
  memset(&p, 0, sizeof p);
  p.type = cudaGraphNodeTypeEventRecord;
  p.eventRecord.event = body_event;
  cudaGraphNode_t node;
  expect(cudaGraphAddNode(&node, body, NULL, NULL, 0, &p) == cudaSuccess, "event record node");
}

static void fill_host_fn(cudaGraph_t body, cudaStream_t b) {
  begin_body(b, body);
  cudaLaunchHostFunc(b, host_fn, NULL);
  end_body(b);
}

static void fill_pageable_copy(cudaGraph_t body, cudaStream_t b) {
  begin_body(b, body);
  cudaMemcpyAsync(body_dev, &body_host, 8, cudaMemcpyHostToDevice, b);
  end_body(b);
}

static cublasHandle_t blas;
static float *gemm_dev;

/* A cuBLAS call on the handle's stream: on a GPU, kernels and maybe
 * other nodes; this runtime cannot tell which, so it refuses it in a body. */
static void gemm(void) {
  const float one = 1, zero = 0;
  cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, gemm_dev, 1, gemm_dev, 1, &zero,
              gemm_dev + 1, 1);
}

static void fill_library_call(cudaGraph_t body, cudaStream_t b) {
  begin_body(b, body);
  gemm();
  end_body(b);
}

static void fill_kernel(cudaGraph_t body, cudaStream_t b) {
  begin_body(b, body);
  add(body_dev, body_dev, b);
  end_body(b);
}

/* What CUDA refuses: bodies holding other nodes than kernels, memsets,
 * memcpys (of device or pinned memory), empty and conditional nodes; a
 * handle used in another graph, or left unused; malformed parameters. */
static void test_refusals(cudaStream_t s, cudaStream_t b) {
  cudaEventCreate(&body_event);
  body_dev = dev_i64(0);
  expect(instantiate_body(s, b, fill_kernel) == cudaSuccess, "a kernel in a body is fine");
  expect(instantiate_body(s, b, fill_event_record) == cudaErrorInvalidValue,
         "an event record node in a body refused");
  expect(instantiate_body(s, b, fill_host_fn) == cudaErrorInvalidValue,
         "a host function in a body refused");
  expect(instantiate_body(s, b, fill_pageable_copy) == cudaErrorInvalidValue,
         "a copy from pageable memory in a body refused");
  /* Warmed eagerly first: a handle's first call may not be captured. */
  expect(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  cudaMalloc((void **)&gemm_dev, 8);
  cudaMemset(gemm_dev, 0, 8);
  cudaDeviceSynchronize();
  cublasSetStream(blas, b); /* not while b captures: that is refused */
  gemm();
  cudaStreamSynchronize(b);
  expect(instantiate_body(s, b, fill_library_call) == cudaErrorInvalidValue,
         "a cuBLAS call in a body refused");
  cublasDestroy(blas);
  cudaFree(gemm_dev);

  /* A handle made for graph A, used in graph B; A's handle then belongs
   * to no node, which fails A's instantiation. */
  expect(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "capture A");
  cudaGraphConditionalHandle ha;
  cudaGraphConditionalHandleCreate(&ha, capture_graph(s), 0, 0);
  cudaMemsetAsync(body_dev, 0, 8, s);
  cudaGraph_t a;
  expect(cudaStreamEndCapture(s, &a) == cudaSuccess, "end A");
  cudaGraphExec_t x = NULL;
  expect(cudaGraphInstantiate(&x, a, 0) == cudaErrorInvalidValue, "an unused handle refused");
  expect(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "capture B");
  cudaGraph_t bodies[2];
  expect(add_conditional(s, ha, cudaGraphCondTypeIf, 1, bodies) == cudaErrorInvalidValue,
         "a handle of another graph refused");
  cudaGraphConditionalHandle hb;
  cudaGraphConditionalHandleCreate(&hb, capture_graph(s), 0, 0);
  expect(add_conditional(s, hb, cudaGraphCondTypeSwitch, 1, bodies) == cudaErrorNotSupported,
         "SWITCH not supported");
  expect(add_conditional(s, hb, cudaGraphCondTypeWhile, 2, bodies) == cudaErrorInvalidValue,
         "WHILE with two bodies refused");
  expect(add_conditional(s, hb, cudaGraphCondTypeIf, 3, bodies) == cudaErrorInvalidValue,
         "IF with three bodies refused");
  expect(add_conditional(s, hb, cudaGraphCondTypeIf, 1, bodies) == cudaSuccess, "IF node");
  /* A handle made for a body may not be used above it. */
  cudaGraphConditionalHandle inner;
  cudaGraphConditionalHandleCreate(&inner, bodies[0], 0, 0);
  expect(add_conditional(s, inner, cudaGraphCondTypeIf, 1, bodies) == cudaErrorInvalidValue,
         "a body's handle refused in its parent");
  cudaGraph_t g;
  expect(cudaStreamEndCapture(s, &g) == cudaSuccess, "end B");
  expect(cudaGraphDestroy(bodies[0]) == cudaErrorInvalidValue, "a body is its node's");
  cudaGraphDestroy(g);
  cudaGraphDestroy(a);
  cudaEventDestroy(body_event);
  cudaFree(body_dev);
}

#ifdef OPC_CPU_RUNTIME
/* Device code: kernels call it; a host program cannot, on a GPU. */
void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);
#endif

/* Under a CUDA 12.4 driver (OPC_RT_DRIVER_VERSION=12040): WHILE and IF
 * with one body, but no IF with two, which came with 12.8. */
static int driver_12_4(cudaStream_t s) {
  expect(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "capture");
  cudaGraphConditionalHandle h;
  cudaGraphConditionalHandleCreate(&h, capture_graph(s), 0, 0);
  cudaGraph_t bodies[2], g;
  expect(add_conditional(s, h, cudaGraphCondTypeIf, 2, bodies) == cudaErrorNotSupported,
         "IF with two bodies needs a 12.8 driver");
  expect(add_conditional(s, h, cudaGraphCondTypeIf, 1, bodies) == cudaSuccess, "IF node");
  expect(add_conditional(s, h, cudaGraphCondTypeWhile, 1, bodies) == cudaSuccess, "WHILE node");
  expect(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
  cudaGraphDestroy(g);
  cuModuleUnload(module);
  return finish("driver-12.4");
}

/* The sticky cases: each must fail the next synchronisation. */
static int sticky(const char *mode, cudaStream_t s) {
  long long *counter = dev_i64(0);
  if (strcmp(mode, "host-set") == 0) {
#ifdef OPC_CPU_RUNTIME
    cudaGraphSetConditional(0x0c0d000000000001ull, 1);
#endif
  } else {
    /* A graph whose conditional node uses ha; a kernel of another graph sets ha. */
    expect(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "capture");
    cudaGraphConditionalHandle ha;
    cudaGraphConditionalHandleCreate(&ha, capture_graph(s), 0, 0);
    cudaGraph_t bodies[1], a, other;
    add_conditional(s, ha, cudaGraphCondTypeIf, 1, bodies);
    cudaStreamEndCapture(s, &a);
    cudaGraphExec_t xa, xo;
    expect(cudaGraphInstantiate(&xa, a, 0) == cudaSuccess, "instantiate A");
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    condition(ha, counter, NULL, NULL, 0, s);
    cudaStreamEndCapture(s, &other);
    expect(cudaGraphInstantiate(&xo, other, 0) == cudaSuccess, "instantiate the other");
    cudaGraphLaunch(xo, s);
    cudaStreamSynchronize(s);
    cudaGraphExecDestroy(xa);
    cudaGraphExecDestroy(xo);
    cudaGraphDestroy(a);
    cudaGraphDestroy(other);
  }
  expect(cudaDeviceSynchronize() == cudaErrorLaunchFailure, "the fault is reported");
  expect(cudaStreamSynchronize(s) == cudaErrorLaunchFailure, "and sticks");
  cudaFree(counter);
  cuModuleUnload(module);
  return finish(mode);
}

int main(int argc, char **argv) {
  load_kernels();
  cudaStream_t s, side, b;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  if (argc > 1 && strcmp(argv[1], "driver-12.4") == 0)
    return driver_12_4(s);
  if (argc > 1)
    return sticky(argv[1], s);
  test_while(s, side, b);
  test_if(s, b, 1);
  test_if(s, b, 2);
  test_default(s, b);
  test_refusals(s, b);
  expect(cudaDeviceSynchronize() == cudaSuccess, "no error left");
  cudaStreamDestroy(s);
  cudaStreamDestroy(side);
  cudaStreamDestroy(b);
  cuModuleUnload(module);
  return finish("test_conditional");
}
