/*
 * test_strict.c - what the CPU runtime refuses because a GPU would. Each
 * check is a small, deliberately wrong program and the error it must get,
 * mostly next to its correct counterpart, which must succeed.
 *
 *   test_strict                 every check that needs no variable set
 *   test_strict refuse-other    run with OPC_RT_REFUSE_FUSED=other
 *   test_strict refuse-all      run with OPC_RT_REFUSE_FUSED=all
 *   test_strict pageable-error  run with OPC_RT_PAGEABLE=error
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "testutil.h"

#define C 4 /* channels of the small tensors */
#define H 6
#define ELEMS (C * H * H)

static cudaStream_t cs; /* non-blocking: the captured stream */
static cudaStream_t bs; /* blocking */
static cudnnTensorDescriptor_t t4, bias4, one4;
static cudnnFilterDescriptor_t w3;
static cudnnConvolutionDescriptor_t conv3;
static cudnnActivationDescriptor_t relu, identity, sigmoid, clipped;
static float *x, *y, *w, *b;
static cudnnReduceTensorDescriptor_t sum;
static void *sum_ws;
static size_t sum_ws_size;

static void setup(void) {
  cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);
  cudaStreamCreate(&bs);
  cudnnCreateTensorDescriptor(&t4);
  cudnnCreateTensorDescriptor(&bias4);
  cudnnCreateTensorDescriptor(&one4);
  cudnnSetTensor4dDescriptor(t4, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, C, H, H);
  cudnnSetTensor4dDescriptor(bias4, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, C, 1, 1);
  cudnnSetTensor4dDescriptor(one4, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 1, 1);
  cudnnCreateFilterDescriptor(&w3);
  cudnnSetFilter4dDescriptor(w3, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, C, C, 3, 3);
  cudnnCreateConvolutionDescriptor(&conv3);
  cudnnSetConvolution2dDescriptor(conv3, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                  CUDNN_DATA_FLOAT);
  cudnnActivationDescriptor_t *acts[4] = {&relu, &identity, &sigmoid, &clipped};
  cudnnActivationMode_t modes[4] = {CUDNN_ACTIVATION_RELU, CUDNN_ACTIVATION_IDENTITY,
                                    CUDNN_ACTIVATION_SIGMOID, CUDNN_ACTIVATION_CLIPPED_RELU};
  for (int i = 0; i < 4; i++) {
    cudnnCreateActivationDescriptor(acts[i]);
    cudnnSetActivationDescriptor(*acts[i], modes[i], CUDNN_NOT_PROPAGATE_NAN, 6.0);
  }
  float *h = rnd_array(C * C * 9);
  cudaMalloc((void **)&x, ELEMS * 4);
  cudaMalloc((void **)&y, ELEMS * 4);
  cudaMalloc((void **)&w, C * C * 9 * 4);
  cudaMalloc((void **)&b, C * 4);
  cudaMemcpy(x, h, ELEMS * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(w, h, C * C * 9 * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(b, h, C * 4, cudaMemcpyHostToDevice);
  cudaMemset(y, 0, ELEMS * 4);
  cudnnCreateReduceTensorDescriptor(&sum);
  cudnnSetReduceTensorDescriptor(sum, CUDNN_REDUCE_TENSOR_ADD, CUDNN_DATA_FLOAT,
                                 CUDNN_NOT_PROPAGATE_NAN, CUDNN_REDUCE_TENSOR_NO_INDICES,
                                 CUDNN_32BIT_INDICES);
  cudnnHandle_t d;
  cudnnCreate(&d);
  cudnnGetReductionWorkspaceSize(d, sum, t4, one4, &sum_ws_size);
  cudnnDestroy(d);
  cudaMalloc(&sum_ws, sum_ws_size);
  cudaDeviceSynchronize();
  free(h);
}

/* ---- capture helpers ---- */

static void begin(enum cudaStreamCaptureMode mode) {
  expect(cudaStreamBeginCapture(cs, mode) == cudaSuccess, "begin capture");
}

/* Ends the capture on cs; it must have been invalidated. */
static void expect_invalidated(const char *what) {
  cudaGraph_t g = (cudaGraph_t)1;
  cudaError_t err = cudaStreamEndCapture(cs, &g);
  if (err != cudaErrorStreamCaptureInvalidated || g != NULL)
    fail("%s: cudaStreamEndCapture gave %s, expected cudaErrorStreamCaptureInvalidated", what,
         cudaGetErrorName(err));
  cudaGetLastError();
}

/* Ends the capture on cs; it must have succeeded. */
static void expect_captured(const char *what) {
  cudaGraph_t g = NULL;
  cudaError_t err = cudaStreamEndCapture(cs, &g);
  if (err != cudaSuccess || !g)
    fail("%s: cudaStreamEndCapture gave %s", what, cudaGetErrorName(err));
  else
    cudaGraphDestroy(g);
  cudaGetLastError();
}

static void expect_err(cudaError_t got, cudaError_t want, const char *what) {
  if (got != want)
    fail("%s: %s, expected %s", what, cudaGetErrorName(got), cudaGetErrorName(want));
}

static void expect_dnn(cudnnStatus_t got, cudnnStatus_t want, const char *what) {
  if (got != want)
    fail("%s: %s, expected %s", what, cudnnGetErrorString(got), cudnnGetErrorString(want));
}

static void expect_blas(cublasStatus_t got, cublasStatus_t want, const char *what) {
  if (got != want)
    fail("%s: %s, expected %s", what, cublasGetStatusName(got), cublasGetStatusName(want));
}

typedef void *ThreadFn(void *);

static void *run_in_thread(ThreadFn *fn, void *arg) {
  pthread_t t;
  void *ret = NULL;
  pthread_create(&t, NULL, fn, arg);
  pthread_join(t, &ret);
  return ret;
}

/* ---- rule 1: calls a capture forbids ---- */

static void test_capture_memory(void) {
  void *p = NULL;
  begin(cudaStreamCaptureModeThreadLocal);
  expect_err(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported, "cudaMalloc in capture");
  expect_invalidated("cudaMalloc in capture");

  cudaMalloc(&p, 64);
  begin(cudaStreamCaptureModeGlobal);
  expect_err(cudaFree(p), cudaErrorStreamCaptureUnsupported, "cudaFree in capture");
  expect_invalidated("cudaFree in capture");
  expect_err(cudaFree(p), cudaSuccess, "cudaFree after capture");

  void *h = NULL;
  begin(cudaStreamCaptureModeGlobal);
  expect_err(cudaMallocHost(&h, 64), cudaErrorStreamCaptureUnsupported, "cudaMallocHost");
  expect_invalidated("cudaMallocHost in capture");
  begin(cudaStreamCaptureModeGlobal);
  expect_err(cudaHostAlloc(&h, 64, cudaHostAllocDefault), cudaErrorStreamCaptureUnsupported,
             "cudaHostAlloc in capture");
  expect_invalidated("cudaHostAlloc in capture");
  cudaMallocHost(&h, 64);
  begin(cudaStreamCaptureModeGlobal);
  expect_err(cudaFreeHost(h), cudaErrorStreamCaptureUnsupported, "cudaFreeHost in capture");
  expect_invalidated("cudaFreeHost in capture");
  cudaFreeHost(h);

  float host[ELEMS];
  begin(cudaStreamCaptureModeGlobal);
  expect_err(cudaMemcpy(host, y, sizeof host, cudaMemcpyDeviceToHost),
             cudaErrorStreamCaptureUnsupported, "cudaMemcpy in capture");
  expect_invalidated("cudaMemcpy in capture");
  begin(cudaStreamCaptureModeGlobal);
  expect_err(cudaMemset(y, 0, sizeof host), cudaErrorStreamCaptureUnsupported,
             "cudaMemset in capture");
  expect_invalidated("cudaMemset in capture");
  /* The asynchronous forms on the captured stream are recorded. */
  begin(cudaStreamCaptureModeGlobal);
  expect_err(cudaMemsetAsync(y, 0, sizeof host, cs), cudaSuccess, "cudaMemsetAsync in capture");
  expect_captured("cudaMemsetAsync in capture");
}

static void test_capture_sync(void) {
  begin(cudaStreamCaptureModeGlobal);
  expect_err(cudaStreamSynchronize(cs), cudaErrorStreamCaptureUnsupported, "stream sync");
  expect_invalidated("cudaStreamSynchronize in capture");
  begin(cudaStreamCaptureModeGlobal);
  expect_err(cudaStreamQuery(cs), cudaErrorStreamCaptureUnsupported, "stream query");
  expect_invalidated("cudaStreamQuery in capture");
  begin(cudaStreamCaptureModeGlobal);
  expect_err(cudaDeviceSynchronize(), cudaErrorStreamCaptureUnsupported, "device sync");
  expect_invalidated("cudaDeviceSynchronize in capture");
  cudaEvent_t e;
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  begin(cudaStreamCaptureModeGlobal);
  cudaEventRecord(e, cs);
  expect_err(cudaEventQuery(e), cudaErrorStreamCaptureUnsupported, "query a captured event");
  expect_invalidated("cudaEventQuery of a captured event");
  begin(cudaStreamCaptureModeGlobal);
  cudaEventRecord(e, cs);
  expect_err(cudaEventSynchronize(e), cudaErrorStreamCaptureUnsupported, "sync a captured event");
  expect_invalidated("cudaEventSynchronize of a captured event");
  cudaEventDestroy(e);
}

/* What a host function tried, for test_host_function. */
typedef struct HostFnCalls {
  cudaError_t malloc_err, memset_err, stream_err;
  void *buf;
} HostFnCalls;

static void host_fn_calls_cuda(void *arg) {
  HostFnCalls *t = arg;
  void *p = NULL;
  t->malloc_err = cudaMalloc(&p, 256);
  t->memset_err = cudaMemsetAsync(t->buf, 0, 256, cs);
  cudaStream_t s = NULL;
  t->stream_err = cudaStreamCreate(&s);
}

/* A host function may make no CUDA call (CUDA's programming guide): each
 * one fails with cudaErrorNotPermitted; after it, calls work again. */
static void test_host_function(void) {
  HostFnCalls t = {0};
  expect_err(cudaMalloc(&t.buf, 256), cudaSuccess, "malloc");
  expect_err(cudaLaunchHostFunc(cs, host_fn_calls_cuda, &t), cudaSuccess, "host function");
  expect_err(cudaStreamSynchronize(cs), cudaSuccess, "sync after the host function");
  expect_err(t.malloc_err, cudaErrorNotPermitted, "cudaMalloc in a host function");
  expect_err(t.memset_err, cudaErrorNotPermitted, "cudaMemsetAsync in a host function");
  expect_err(t.stream_err, cudaErrorNotPermitted, "cudaStreamCreate in a host function");
  expect_err(cudaFree(t.buf), cudaSuccess, "free after the host function");
}

/* The legacy stream is ordered with blocking streams: it cannot be used
 * while one of them is captured, and can while only non-blocking ones are. */
static void test_capture_legacy(void) {
  expect(cudaStreamBeginCapture(bs, cudaStreamCaptureModeRelaxed) == cudaSuccess, "begin");
  expect_err(cudaMemsetAsync(y, 0, 4, 0), cudaErrorStreamCaptureImplicit,
             "legacy stream while a blocking stream is captured");
  expect_err(cudaStreamSynchronize(0), cudaErrorStreamCaptureImplicit,
             "legacy stream sync while a blocking stream is captured");
  enum cudaStreamCaptureStatus status;
  expect_err(cudaStreamIsCapturing(0, &status), cudaErrorStreamCaptureImplicit,
             "legacy stream capture status while a blocking stream is captured");
  cudaGraph_t g = (cudaGraph_t)1;
  expect_err(cudaStreamEndCapture(bs, &g), cudaErrorStreamCaptureInvalidated,
             "capture joined by the legacy stream");
  cudaGetLastError();
  begin(cudaStreamCaptureModeRelaxed);
  expect_err(cudaMemsetAsync(y, 0, 4, 0), cudaSuccess,
             "legacy stream while a non-blocking stream is captured");
  expect_captured("capture of a non-blocking stream beside the legacy stream");
  cudaDeviceSynchronize();
}

static void *malloc_and_free(void *arg) {
  (void)arg;
  void *p = NULL;
  cudaError_t err = cudaMalloc(&p, 64);
  if (err == cudaSuccess)
    cudaFree(p);
  return (void *)(intptr_t)err;
}

static void *relaxed_malloc(void *arg) {
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  void *ret = malloc_and_free(arg);
  cudaThreadExchangeStreamCaptureMode(&mode);
  return ret;
}

static void *end_capture(void *arg) {
  cudaGraph_t *g = arg;
  return (void *)(intptr_t)cudaStreamEndCapture(cs, g);
}

/* Who a capture bars depends on its mode and the calling thread's. */
static void test_capture_modes(void) {
  begin(cudaStreamCaptureModeThreadLocal);
  expect_err((cudaError_t)(intptr_t)run_in_thread(malloc_and_free, NULL), cudaSuccess,
             "another thread's cudaMalloc beside a thread-local capture");
  expect_captured("thread-local capture beside another thread's cudaMalloc");

  begin(cudaStreamCaptureModeGlobal);
  expect_err((cudaError_t)(intptr_t)run_in_thread(malloc_and_free, NULL),
             cudaErrorStreamCaptureUnsupported,
             "another thread's cudaMalloc beside a global capture");
  expect_invalidated("global capture beside another thread's cudaMalloc");

  begin(cudaStreamCaptureModeGlobal);
  expect_err((cudaError_t)(intptr_t)run_in_thread(relaxed_malloc, NULL), cudaSuccess,
             "a relaxed thread's cudaMalloc beside a global capture");
  expect_captured("global capture beside a relaxed thread's cudaMalloc");

  begin(cudaStreamCaptureModeGlobal);
  expect_err((cudaError_t)(intptr_t)relaxed_malloc(NULL), cudaSuccess,
             "cudaMalloc in a relaxed thread's own global capture");
  expect_captured("global capture beside its relaxed thread's cudaMalloc");

  begin(cudaStreamCaptureModeRelaxed);
  expect_err((cudaError_t)(intptr_t)malloc_and_free(NULL), cudaSuccess,
             "cudaMalloc in a relaxed capture");
  expect_captured("relaxed capture with a cudaMalloc");

  begin(cudaStreamCaptureModeGlobal);
  cudaGraph_t g = NULL;
  expect_err((cudaError_t)(intptr_t)run_in_thread(end_capture, &g),
             cudaErrorStreamCaptureWrongThread, "ending a global capture on another thread");
  expect_captured("global capture ended on its own thread");
}

static void test_capture_handles(void) {
  cudnnHandle_t d;
  cublasHandle_t blas;
  begin(cudaStreamCaptureModeGlobal);
  expect_dnn(cudnnCreate(&d), CUDNN_STATUS_NOT_SUPPORTED, "cudnnCreate in capture");
  expect_invalidated("cudnnCreate in capture");
  begin(cudaStreamCaptureModeGlobal);
  expect_blas(cublasCreate(&blas), CUBLAS_STATUS_NOT_SUPPORTED, "cublasCreate in capture");
  expect_invalidated("cublasCreate in capture");

  cudnnCreate(&d);
  cublasCreate(&blas);
  /* Binding an idle handle to the capturing stream is fine ... */
  begin(cudaStreamCaptureModeGlobal);
  expect_dnn(cudnnSetStream(d, cs), CUDNN_STATUS_SUCCESS, "cudnnSetStream onto a capture");
  expect_blas(cublasSetStream(blas, cs), CUBLAS_STATUS_SUCCESS, "cublasSetStream onto a capture");
  expect_captured("binding handles to a capturing stream");
  /* ... changing a handle whose stream is capturing is not. */
  begin(cudaStreamCaptureModeGlobal);
  expect_dnn(cudnnSetStream(d, NULL), CUDNN_STATUS_NOT_SUPPORTED, "cudnnSetStream off a capture");
  expect_invalidated("cudnnSetStream off a capture");
  begin(cudaStreamCaptureModeGlobal);
  expect_blas(cublasSetStream(blas, NULL), CUBLAS_STATUS_NOT_SUPPORTED,
              "cublasSetStream off a capture");
  expect_invalidated("cublasSetStream off a capture");
  void *ws;
  cudaMalloc(&ws, 1 << 16);
  begin(cudaStreamCaptureModeGlobal);
  expect_blas(cublasSetWorkspace(blas, ws, 1 << 16), CUBLAS_STATUS_NOT_SUPPORTED,
              "cublasSetWorkspace in capture");
  expect_invalidated("cublasSetWorkspace in capture");
  expect_blas(cublasSetWorkspace(blas, ws, 1 << 16), CUBLAS_STATUS_SUCCESS,
              "cublasSetWorkspace outside a capture");

  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int count = 0;
  begin(cudaStreamCaptureModeGlobal);
  expect_dnn(cudnnFindConvolutionForwardAlgorithm(d, t4, w3, conv3, t4, 8, &count, perf),
             CUDNN_STATUS_NOT_SUPPORTED, "cudnnFindConvolutionForwardAlgorithm in capture");
  expect_invalidated("cudnnFindConvolutionForwardAlgorithm in capture");
  begin(cudaStreamCaptureModeGlobal);
  expect_dnn(cudnnGetConvolutionForwardAlgorithm_v7(d, t4, w3, conv3, t4, 8, &count, perf),
             CUDNN_STATUS_SUCCESS, "heuristics in capture");
  expect_captured("heuristics in capture");
  cudnnDestroy(d);
  cublasDestroy(blas);
  cudaFree(ws);
}

/* ---- rule 2: a handle's first call of a kind must run eagerly ---- */

typedef cudnnStatus_t DnnCall(cudnnHandle_t h);

static const float one = 1, zero = 0;

static cudnnStatus_t call_conv(cudnnHandle_t h) {
  return cudnnConvolutionForward(h, &one, t4, x, w3, w, conv3,
                                 CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, t4, y);
}
static cudnnStatus_t call_fused(cudnnHandle_t h) {
  return cudnnConvolutionBiasActivationForward(h, &one, t4, x, w3, w, conv3,
                                               CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0,
                                               &zero, t4, y, bias4, b, relu, t4, y);
}
static cudnnStatus_t call_backward(cudnnHandle_t h) {
  return cudnnConvolutionBackwardData(h, &one, w3, w, t4, x, conv3,
                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, NULL, 0, &zero, t4, y);
}
static cudnnStatus_t call_add(cudnnHandle_t h) {
  return cudnnAddTensor(h, &one, bias4, b, &one, t4, y);
}
static cudnnStatus_t call_op_tensor(cudnnHandle_t h) {
  cudnnOpTensorDescriptor_t op;
  cudnnCreateOpTensorDescriptor(&op);
  cudnnSetOpTensorDescriptor(op, CUDNN_OP_TENSOR_MUL, CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN);
  cudnnStatus_t st = cudnnOpTensor(h, op, &one, t4, x, &one, t4, x, &zero, t4, y);
  cudnnDestroyOpTensorDescriptor(op);
  return st;
}
static cudnnStatus_t call_activation(cudnnHandle_t h) {
  return cudnnActivationForward(h, sigmoid, &one, t4, x, &zero, t4, y);
}
static cudnnStatus_t call_pooling(cudnnHandle_t h) {
  cudnnPoolingDescriptor_t p;
  cudnnCreatePoolingDescriptor(&p);
  cudnnSetPooling2dDescriptor(p, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 3, 3, 1, 1, 1, 1);
  cudnnStatus_t st = cudnnPoolingForward(h, p, &one, t4, x, &zero, t4, y);
  cudnnDestroyPoolingDescriptor(p);
  return st;
}
static cudnnStatus_t call_softmax(cudnnHandle_t h) {
  return cudnnSoftmaxForward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, t4, x,
                             &zero, t4, y);
}
static cudnnStatus_t call_reduction(cudnnHandle_t h) {
  return cudnnReduceTensor(h, sum, NULL, 0, sum_ws, sum_ws_size, &one, t4, x, &zero, one4, y);
}
static cudnnStatus_t call_lrn(cudnnHandle_t h) {
  cudnnLRNDescriptor_t l;
  cudnnCreateLRNDescriptor(&l);
  cudnnStatus_t st = cudnnLRNCrossChannelForward(h, l, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, t4, x,
                                                 &zero, t4, y);
  cudnnDestroyLRNDescriptor(l);
  return st;
}
static cudnnStatus_t call_batch_norm(cudnnHandle_t h) {
  return cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, t4, x,
                                                 t4, y, bias4, b, b, b, w, 1e-3);
}
static cudnnStatus_t call_transform(cudnnHandle_t h) {
  return cudnnTransformTensor(h, &one, t4, x, &zero, t4, y);
}
static cudnnStatus_t call_set(cudnnHandle_t h) {
  return cudnnSetTensor(h, t4, y, &one);
}

static void lazy_case(DnnCall *call, const char *name) {
  cudnnHandle_t h;
  cudnnCreate(&h);
  cudnnSetStream(h, cs);
  char what[96];
  snprintf(what, sizeof what, "%s: first call in a capture", name);
  begin(cudaStreamCaptureModeGlobal);
  expect_dnn(call(h), CUDNN_STATUS_NOT_INITIALIZED, what);
  expect_invalidated(what);
  snprintf(what, sizeof what, "%s: eager call", name);
  expect_dnn(call(h), CUDNN_STATUS_SUCCESS, what);
  cudaStreamSynchronize(cs);
  snprintf(what, sizeof what, "%s: captured after an eager call", name);
  begin(cudaStreamCaptureModeGlobal);
  expect_dnn(call(h), CUDNN_STATUS_SUCCESS, what);
  expect_captured(what);
  cudnnDestroy(h);
}

static void test_lazy(void) {
  struct {
    DnnCall *call;
    const char *name;
  } cases[] = {
    {call_conv, "convolution"},      {call_fused, "bias-activation"},
    {call_backward, "backward data"}, {call_add, "add tensor"},
    {call_op_tensor, "op tensor"},   {call_activation, "activation"},
    {call_pooling, "pooling"},       {call_softmax, "softmax"},
    {call_reduction, "reduction"},   {call_lrn, "LRN"},
    {call_batch_norm, "batch norm"}, {call_transform, "transform"},
    {call_set, "set tensor"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    lazy_case(cases[i].call, cases[i].name);

  /* Kinds are separate: a warm convolution does not warm an activation. */
  cudnnHandle_t h;
  cudnnCreate(&h);
  cudnnSetStream(h, cs);
  call_conv(h);
  cudaStreamSynchronize(cs);
  begin(cudaStreamCaptureModeGlobal);
  expect_dnn(call_conv(h), CUDNN_STATUS_SUCCESS, "warm convolution in a capture");
  expect_dnn(call_activation(h), CUDNN_STATUS_NOT_INITIALIZED, "cold activation in a capture");
  expect_invalidated("cold activation after a warm convolution");
  cudnnDestroy(h);

  cublasHandle_t blas;
  cublasCreate(&blas);
  cublasSetStream(blas, cs);
  begin(cudaStreamCaptureModeGlobal);
  expect_blas(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, C, C, C, &one, x, C, x, C, &zero, y, C),
              CUBLAS_STATUS_NOT_INITIALIZED, "first GEMM in a capture");
  expect_invalidated("first GEMM in a capture");
  expect_blas(cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_T, C, C, C, &one, x, C, 16,
                                        x, C, 16, &zero, y, C, 16, 2),
              CUBLAS_STATUS_SUCCESS, "eager GEMM");
  cudaStreamSynchronize(cs);
  begin(cudaStreamCaptureModeGlobal);
  expect_blas(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, C, C, C, &one, x, C, x, C, &zero, y, C),
              CUBLAS_STATUS_SUCCESS, "GEMM captured after an eager one");
  expect_captured("GEMM captured after an eager one");
  cublasDestroy(blas);
}

/* ---- rule 3: what the fused convolution takes ---- */

static cudnnStatus_t fused(cudnnHandle_t h, cudnnActivationDescriptor_t act,
                           cudnnConvolutionFwdAlgo_t algo) {
  size_t size = 0;
  void *ws = NULL;
  cudnnGetConvolutionForwardWorkspaceSize(h, t4, w3, conv3, t4, algo, &size);
  if (size)
    cudaMalloc(&ws, size);
  cudnnStatus_t st = cudnnConvolutionBiasActivationForward(
      h, &one, t4, x, w3, w, conv3, algo, ws, size, &zero, t4, y, bias4, b, act, t4, y);
  cudaDeviceSynchronize();
  cudaFree(ws);
  return st;
}

static void test_fused(cudnnHandle_t h) {
  const cudnnConvolutionFwdAlgo_t precomp = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  const cudnnConvolutionFwdAlgo_t implicit = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  const cudnnConvolutionFwdAlgo_t gemm = CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
  expect_dnn(fused(h, sigmoid, precomp), CUDNN_STATUS_NOT_SUPPORTED, "fused sigmoid");
  expect_dnn(fused(h, clipped, precomp), CUDNN_STATUS_NOT_SUPPORTED, "fused clipped ReLU");
  expect_dnn(fused(h, identity, implicit), CUDNN_STATUS_NOT_SUPPORTED,
             "fused identity with IMPLICIT_GEMM");
  expect_dnn(fused(h, identity, precomp), CUDNN_STATUS_SUCCESS,
             "fused identity with IMPLICIT_PRECOMP_GEMM");
  /* ... which computes the convolution plus the bias. */
  float fused_y[ELEMS], plain_y[ELEMS];
  cudaMemcpy(fused_y, y, sizeof fused_y, cudaMemcpyDeviceToHost);
  call_conv(h);
  call_add(h);
  cudaMemcpy(plain_y, y, sizeof plain_y, cudaMemcpyDeviceToHost);
  close_arrays("fused identity", fused_y, plain_y, ELEMS, 1e-5f);
  expect_dnn(fused(h, relu, implicit), CUDNN_STATUS_SUCCESS, "fused ReLU with IMPLICIT_GEMM");
  expect_dnn(fused(h, relu, gemm), CUDNN_STATUS_SUCCESS, "fused ReLU with GEMM");
}

/* OPC_RT_REFUSE_FUSED: engines that refuse a shape, to test fallbacks. */
static void test_refuse_fused(cudnnHandle_t h, bool all) {
  const cudnnConvolutionFwdAlgo_t precomp = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  const cudnnConvolutionFwdAlgo_t implicit = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  expect_dnn(fused(h, relu, implicit), CUDNN_STATUS_NOT_SUPPORTED, "refused: ReLU, IMPLICIT_GEMM");
  expect_dnn(fused(h, relu, precomp), all ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_SUCCESS,
             "refused: ReLU, IMPLICIT_PRECOMP_GEMM");
  expect_dnn(fused(h, identity, precomp), all ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_SUCCESS,
             "refused: identity, IMPLICIT_PRECOMP_GEMM");
  /* The unfused calls are not affected. */
  expect_dnn(call_conv(h), CUDNN_STATUS_SUCCESS, "refused: plain convolution");
  cudaDeviceSynchronize();
}

/* ---- rule 4: algorithms, math types, workspaces ---- */

typedef struct Listed {
  cudnnConvolutionFwdAlgo_t algo;
  cudnnMathType_t math;
} Listed;

static void expect_list(const cudnnConvolutionFwdAlgoPerf_t *perf, int count, const Listed *want,
                        int n, const char *what) {
  for (int i = 0; i < n; i++) {
    if (i >= count || perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].algo != want[i].algo ||
        perf[i].mathType != want[i].math) {
      fail("%s: entry %d is not algo %d math %d", what, i, want[i].algo, want[i].math);
      return;
    }
    bool none = perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    if (none != (perf[i].memory == 0))
      fail("%s: algo %d has %zu bytes of workspace", what, perf[i].algo, perf[i].memory);
  }
  for (int i = n; i < count; i++)
    if (perf[i].status != CUDNN_STATUS_NOT_SUPPORTED)
      fail("%s: entry %d, beyond the engines, is usable", what, i);
}

/* Runs the forward convolution with conv3's math set to `math`. */
static cudnnStatus_t run_algo(cudnnHandle_t h, cudnnConvolutionDescriptor_t conv,
                              cudnnFilterDescriptor_t fd, cudnnConvolutionFwdAlgo_t algo,
                              cudnnMathType_t math, size_t ws_size) {
  cudnnSetConvolutionMathType(conv, math);
  void *ws = NULL;
  if (ws_size)
    cudaMalloc(&ws, ws_size);
  cudnnStatus_t st = cudnnConvolutionForward(h, &one, t4, x, fd, w, conv, algo, ws, ws_size, &zero,
                                             t4, y);
  cudaDeviceSynchronize();
  cudaFree(ws);
  cudnnSetConvolutionMathType(conv, CUDNN_DEFAULT_MATH);
  return st;
}

static void test_forward_algos(cudnnHandle_t h) {
  const cudnnMathType_t T = CUDNN_TENSOR_OP_MATH, F = CUDNN_FMA_MATH;
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int count = 0;
  /* The descriptor asks for FMA: the list still has tensor-op engines. */
  cudnnSetConvolutionMathType(conv3, F);
  expect_dnn(cudnnGetConvolutionForwardAlgorithm_v7(h, t4, w3, conv3, t4, 8, &count, perf),
             CUDNN_STATUS_SUCCESS, "heuristics");
  cudnnSetConvolutionMathType(conv3, CUDNN_DEFAULT_MATH);
  Listed want3x3[] = {{CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, T},
                      {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, T},
                      {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, F},
                      {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, F},
                      {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, F}};
  expect_list(perf, count, want3x3, 5, "3x3 heuristics");
  expect_dnn(cudnnFindConvolutionForwardAlgorithm(h, t4, w3, conv3, t4, 8, &count, perf),
             CUDNN_STATUS_SUCCESS, "search");
  expect_list(perf, count, want3x3, 5, "3x3 search");

  /* Each listed engine's workspace is what the size query says, exactly. */
  for (int i = 0; i < 5; i++) {
    size_t size = 1;
    cudnnSetConvolutionMathType(conv3, perf[i].mathType);
    cudnnGetConvolutionForwardWorkspaceSize(h, t4, w3, conv3, t4, perf[i].algo, &size);
    if (size != perf[i].memory)
      fail("algo %d: workspace size %zu, listed %zu", perf[i].algo, size, perf[i].memory);
    if (size) {
      expect_dnn(run_algo(h, conv3, w3, perf[i].algo, perf[i].mathType, size - 1),
                 CUDNN_STATUS_BAD_PARAM, "a workspace one byte short");
      cudnnSetConvolutionMathType(conv3, perf[i].mathType);
      expect_dnn(cudnnConvolutionForward(h, &one, t4, x, w3, w, conv3, perf[i].algo, NULL, size,
                                         &zero, t4, y),
                 CUDNN_STATUS_BAD_PARAM, "no workspace");
    }
    expect_dnn(run_algo(h, conv3, w3, perf[i].algo, perf[i].mathType, size),
               CUDNN_STATUS_SUCCESS, "a listed engine");
  }
  /* Engines exist only in the listed math types. */
  expect_dnn(run_algo(h, conv3, w3, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, F, 1 << 20),
             CUDNN_STATUS_NOT_SUPPORTED, "Winograd in FMA math");
  expect_dnn(run_algo(h, conv3, w3, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, T, 0),
             CUDNN_STATUS_NOT_SUPPORTED, "IMPLICIT_GEMM in tensor-op math");
  expect_dnn(run_algo(h, conv3, w3, CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_DEFAULT_MATH, 1 << 24),
             CUDNN_STATUS_NOT_SUPPORTED, "an unlisted algorithm");
  size_t size = 0;
  expect_dnn(cudnnGetConvolutionForwardWorkspaceSize(h, t4, w3, conv3, t4,
                                                     CUDNN_CONVOLUTION_FWD_ALGO_FFT, &size),
             CUDNN_STATUS_NOT_SUPPORTED, "workspace of an unlisted algorithm");

  /* Depthwise: fewer engines; no IMPLICIT_PRECOMP_GEMM in FMA math. */
  cudnnFilterDescriptor_t dw;
  cudnnConvolutionDescriptor_t dconv;
  cudnnCreateFilterDescriptor(&dw);
  cudnnSetFilter4dDescriptor(dw, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, C, 1, 3, 3);
  cudnnCreateConvolutionDescriptor(&dconv);
  cudnnSetConvolution2dDescriptor(dconv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                  CUDNN_DATA_FLOAT);
  cudnnSetConvolutionGroupCount(dconv, C);
  expect_dnn(cudnnGetConvolutionForwardAlgorithm_v7(h, t4, dw, dconv, t4, 8, &count, perf),
             CUDNN_STATUS_SUCCESS, "depthwise heuristics");
  Listed want_dw[] = {{CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, T},
                      {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, F}};
  expect_list(perf, count, want_dw, 2, "depthwise heuristics");
  expect_dnn(run_algo(h, dconv, dw, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, F, 1 << 20),
             CUDNN_STATUS_NOT_SUPPORTED, "depthwise IMPLICIT_PRECOMP_GEMM in FMA math");
  cudnnDestroyFilterDescriptor(dw);
  cudnnDestroyConvolutionDescriptor(dconv);

  /* 1x1: no Winograd. */
  cudnnFilterDescriptor_t pw;
  cudnnConvolutionDescriptor_t pconv;
  cudnnCreateFilterDescriptor(&pw);
  cudnnSetFilter4dDescriptor(pw, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, C, C, 1, 1);
  cudnnCreateConvolutionDescriptor(&pconv);
  cudnnSetConvolution2dDescriptor(pconv, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                  CUDNN_DATA_FLOAT);
  expect_dnn(cudnnGetConvolutionForwardAlgorithm_v7(h, t4, pw, pconv, t4, 8, &count, perf),
             CUDNN_STATUS_SUCCESS, "1x1 heuristics");
  expect_list(perf, count, want3x3 + 1, 4, "1x1 heuristics");
  cudnnDestroyFilterDescriptor(pw);
  cudnnDestroyConvolutionDescriptor(pconv);
}

static void test_other_workspaces(cudnnHandle_t h) {
  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int count = 0;
  expect_dnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w3, t4, conv3, t4, 6, &count, perf),
             CUDNN_STATUS_SUCCESS, "backward heuristics");
  if (count < 4 || perf[0].algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED ||
      perf[0].mathType != CUDNN_TENSOR_OP_MATH || perf[3].algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 ||
      perf[3].mathType != CUDNN_FMA_MATH || perf[3].memory != 0)
    fail("backward heuristics: unexpected list");
  size_t size = 0;
  cudnnGetConvolutionBackwardDataWorkspaceSize(h, w3, t4, conv3, t4,
                                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, &size);
  void *ws;
  cudaMalloc(&ws, size);
  expect(size > 0, "backward ALGO_1 needs a workspace");
  expect_dnn(cudnnConvolutionBackwardData(h, &one, w3, w, t4, x, conv3,
                                          CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, ws, size - 1, &zero,
                                          t4, y),
             CUDNN_STATUS_BAD_PARAM, "backward data, workspace short");
  expect_dnn(cudnnConvolutionBackwardData(h, &one, w3, w, t4, x, conv3,
                                          CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, ws, size, &zero, t4,
                                          y),
             CUDNN_STATUS_SUCCESS, "backward data");
  cudaDeviceSynchronize();
  cudaFree(ws);

  expect(sum_ws_size > 0, "a reduction needs a workspace");
  expect_dnn(cudnnReduceTensor(h, sum, NULL, 0, NULL, 0, &one, t4, x, &zero, one4, y),
             CUDNN_STATUS_BAD_PARAM, "reduction without a workspace");
  expect_dnn(cudnnReduceTensor(h, sum, NULL, 0, sum_ws, sum_ws_size - 1, &one, t4, x, &zero,
                               one4, y),
             CUDNN_STATUS_BAD_PARAM, "reduction, workspace short");
  expect_dnn(call_reduction(h), CUDNN_STATUS_SUCCESS, "reduction");
  cudaDeviceSynchronize();

  cublasHandle_t blas;
  cublasCreate(&blas);
  cudaMalloc(&ws, 4096);
  expect_blas(cublasSetWorkspace(blas, (char *)ws + 16, 1024), CUBLAS_STATUS_INVALID_VALUE,
              "misaligned cuBLAS workspace");
  expect_blas(cublasSetWorkspace(blas, ws, 4096), CUBLAS_STATUS_SUCCESS, "cuBLAS workspace");
  cublasDestroy(blas);
  cudaFree(ws);
}

/* ---- rule 6: pinned host memory ---- */

static void test_pinned(void) {
  void *p = NULL, *d = NULL;
  expect_err(cudaMallocHost(&p, 100), cudaSuccess, "cudaMallocHost");
  expect_err(cudaFree(p), cudaErrorInvalidValue, "cudaFree of pinned memory");
  expect_err(cudaFreeHost(p), cudaSuccess, "cudaFreeHost");
  expect_err(cudaHostAlloc(&p, 100, cudaHostAllocPortable | cudaHostAllocMapped), cudaSuccess,
             "cudaHostAlloc");
  expect_err(cudaFreeHost(p), cudaSuccess, "cudaFreeHost of cudaHostAlloc memory");
  expect_err(cudaHostAlloc(&p, 100, 0x100), cudaErrorInvalidValue, "cudaHostAlloc, bad flags");
  cudaMalloc(&d, 100);
  expect_err(cudaFreeHost(d), cudaErrorInvalidValue, "cudaFreeHost of device memory");
  cudaFree(d);
  char *mine = malloc(1000);
  expect_err(cudaHostRegister(mine, 1000, cudaHostRegisterDefault), cudaSuccess,
             "cudaHostRegister");
  expect_err(cudaHostRegister(mine + 500, 100, cudaHostRegisterDefault),
             cudaErrorHostMemoryAlreadyRegistered, "cudaHostRegister twice");
  expect_err(cudaFree(mine), cudaErrorInvalidValue, "cudaFree of registered memory");
  expect_err(cudaHostUnregister(mine + 500), cudaErrorHostMemoryNotRegistered,
             "cudaHostUnregister inside a range");
  expect_err(cudaHostUnregister(mine), cudaSuccess, "cudaHostUnregister");
  expect_err(cudaHostUnregister(mine), cudaErrorHostMemoryNotRegistered,
             "cudaHostUnregister twice");
  free(mine);
  cudaGetLastError();
}

/* ---- rule 7: OPC_RT_PAGEABLE=error ---- */

/* Runs an asynchronous copy with stderr captured; gives the lines printed. */
static cudaError_t copy_counting(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                 int *lines) {
  fflush(stderr);
  FILE *log = tmpfile();
  int saved = dup(2);
  dup2(fileno(log), 2);
  cudaError_t err = cudaMemcpyAsync(dst, src, n, kind, cs);
  cudaStreamSynchronize(cs);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(log);
  *lines = 0;
  for (int c; (c = fgetc(log)) != EOF;)
    *lines += c == '\n';
  fclose(log);
  cudaGetLastError();
  return err;
}

static void test_pageable(bool refused) {
  cudaError_t want = refused ? cudaErrorInvalidValue : cudaSuccess;
  int want_lines = refused ? 1 : 0, lines;
  float *pageable = malloc(ELEMS * 4), *pinned, *registered = malloc(ELEMS * 4);
  cudaMallocHost((void **)&pinned, ELEMS * 4);
  cudaHostRegister(registered, ELEMS * 4, cudaHostRegisterDefault);
  expect_err(copy_counting(x, pageable, ELEMS * 4, cudaMemcpyHostToDevice, &lines), want,
             "asynchronous copy from pageable memory");
  expect(lines == want_lines, "one line says why a pageable copy is refused");
  expect_err(copy_counting(pageable, x, ELEMS * 4, cudaMemcpyDeviceToHost, &lines), want,
             "asynchronous copy to pageable memory");
  expect_err(copy_counting(x, pageable, ELEMS * 4, cudaMemcpyDefault, &lines), want,
             "asynchronous copy from pageable memory, kind inferred");
  expect_err(copy_counting(x, pinned, ELEMS * 4, cudaMemcpyHostToDevice, &lines), cudaSuccess,
             "asynchronous copy from pinned memory");
  expect_err(copy_counting(registered + 4, x, 64, cudaMemcpyDeviceToHost, &lines), cudaSuccess,
             "asynchronous copy into registered memory");
  expect_err(copy_counting(y, x, ELEMS * 4, cudaMemcpyDeviceToDevice, &lines), cudaSuccess,
             "asynchronous device copy");
  expect_err(cudaMemcpy(pageable, x, ELEMS * 4, cudaMemcpyDeviceToHost), cudaSuccess,
             "synchronous copy to pageable memory");
  cudaHostUnregister(registered);
  cudaFreeHost(pinned);
  free(pageable);
  free(registered);
}

static bool env_is(const char *name, const char *value) {
  const char *v = getenv(name);
  if (v && strcmp(v, value) == 0)
    return true;
  fail("this mode must run with %s=%s", name, value);
  return false;
}

int main(int argc, char **argv) {
  setup();
  cudnnHandle_t h;
  cudnnCreate(&h);
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "refuse-other") == 0) {
    if (env_is("OPC_RT_REFUSE_FUSED", "other"))
      test_refuse_fused(h, false);
  } else if (strcmp(mode, "refuse-all") == 0) {
    if (env_is("OPC_RT_REFUSE_FUSED", "all"))
      test_refuse_fused(h, true);
  } else if (strcmp(mode, "pageable-error") == 0) {
    if (env_is("OPC_RT_PAGEABLE", "error"))
      test_pageable(true);
  } else if (!*mode) {
    test_capture_memory();
    test_capture_sync();
    test_capture_legacy();
    test_capture_modes();
    test_capture_handles();
    test_lazy();
    test_fused(h);
    test_forward_algos(h);
    test_other_workspaces(h);
    test_pinned();
    test_pageable(false);
    test_host_function();
  } else {
    fail("unknown mode %s", mode);
  }
  cudnnDestroy(h);
  return finish(*mode ? mode : "test_strict");
}
