/*
 * cudnn_desc.c - the cuDNN handle and descriptors. Descriptors hold plain
 * values; operations copy what they need when they are enqueued.
 */
#include <stdlib.h>
#include <string.h>

#include "dnn.h"

cudnnStatus_t dnn_status(cudaError_t err) {
  switch (err) {
  case cudaSuccess: return CUDNN_STATUS_SUCCESS;
  case cudaErrorMemoryAllocation: return CUDNN_STATUS_ALLOC_FAILED;
  case cudaErrorInvalidValue: return CUDNN_STATUS_BAD_PARAM;
  case cudaErrorNotSupported:
  case cudaErrorStreamCaptureUnsupported:
  case cudaErrorStreamCaptureImplicit: return CUDNN_STATUS_NOT_SUPPORTED;
  default: return CUDNN_STATUS_EXECUTION_FAILED;
  }
}

cudnnStatus_t dnn_enter(void) {
  return rt_enter() ? CUDNN_STATUS_EXECUTION_FAILED : CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t dnn_submit(cudnnHandle_t h, Op *op, DnnKind kind) {
  bool cold;
  cudaError_t err = rt_submit_for_handle(h->device, h->stream, op, &h->warm, 1u << kind, &cold);
  return cold ? CUDNN_STATUS_NOT_INITIALIZED : dnn_status(rt_error(err));
}

void dnn_warm(cudnnHandle_t h, DnnKind kind) {
  pthread_mutex_lock(&rt.lock);
  h->warm |= 1u << kind;
  pthread_mutex_unlock(&rt.lock);
}

bool dnn_capturing_locked(cudnnHandle_t h) {
  Stream *s = rt_stream_on(h->stream, h->device);
  if (!s->capture)
    return false;
  capture_invalidate_locked(s->capture);
  return true;
}

cudnnStatus_t dnn_workspace_ok(const void *ws, size_t size, size_t need) {
  return need && (!ws || size < need) ? CUDNN_STATUS_BAD_PARAM : CUDNN_STATUS_SUCCESS;
}

/* A GPU algorithm uses its workspace as scratch: two calls sharing one
 * without ordering race, so checking mode sees a write. */
void span_workspace(Op *op, void *ws, size_t need) {
  op_span(op, ws, need, true);
}

size_t dnn_type_size(cudnnDataType_t type) {
  switch (type) {
  case CUDNN_DATA_FLOAT: return 4;
  case CUDNN_DATA_DOUBLE: return 8;
  case CUDNN_DATA_HALF: return 2;
  case CUDNN_DATA_BFLOAT16: return 2;
  case CUDNN_DATA_INT8: return 1;
  case CUDNN_DATA_UINT8: return 1;
  case CUDNN_DATA_BOOLEAN: return 1;
  case CUDNN_DATA_INT32: return 4;
  case CUDNN_DATA_INT64: return 8;
  }
  return 0;
}

long long tensor_count(const Tensor *t) {
  long long n = 1;
  for (int i = 0; i < t->rank; i++)
    n *= t->dims[i];
  return n;
}

void span_tensor(Op *op, const void *p, const Tensor *t, bool write) {
  op_span_strided(op, p, t->rank, t->dims, t->strides, dnn_type_size(t->type), write);
}

void span_output(Op *op, const void *y, const Tensor *yt, float beta) {
  if (beta != 0)
    span_tensor(op, y, yt, false);
  span_tensor(op, y, yt, true);
}

bool same_dims(const Tensor *a, const Tensor *b) {
  if (a->rank != b->rank)
    return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i])
      return false;
  return true;
}

cudnnStatus_t check_same_float(const Tensor *xt, const Tensor *yt, int min_rank) {
  if (!xt->rank || !yt->rank)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  if (!same_dims(xt, yt) || xt->rank < min_rank)
    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  if (xt->type != CUDNN_DATA_FLOAT || yt->type != CUDNN_DATA_FLOAT)
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  return CUDNN_STATUS_SUCCESS;
}

bool dnn_float_type(cudnnDataType_t type) {
  return type == CUDNN_DATA_FLOAT || type == CUDNN_DATA_HALF || type == CUDNN_DATA_BFLOAT16;
}

cudnnStatus_t check_pair_type(const Tensor *xt, const Tensor *yt) {
  if (xt->type != yt->type)
    return CUDNN_STATUS_BAD_PARAM;
  return dnn_float_type(xt->type) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
}

Tensor dnn_float_view(const Tensor *t) {
  Tensor f = *t;
  if (t->type != CUDNN_DATA_FLOAT) {
    f.type = CUDNN_DATA_FLOAT;
    packed_strides(t->rank, t->dims, f.strides);
  }
  return f;
}

HalfArg dnn_half_arg(const void *p, const Tensor *t, bool read, bool write) {
  HalfArg a = {.dev = (void *)p, .read = read, .write = write, .rank = t->rank};
  a.store = t->type == CUDNN_DATA_HALF       ? STORE_F16
            : t->type == CUDNN_DATA_BFLOAT16 ? STORE_BF16
                                             : STORE_F32;
  for (int i = 0; i < t->rank; i++) {
    a.dims[i] = t->dims[i];
    a.strides[i] = t->strides[i];
  }
  return a;
}

size_t cudnnGetVersion(void) {
  return CUDNN_VERSION;
}

const char *cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
  case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
  case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
  case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
  case CUDNN_STATUS_INVALID_VALUE: return "CUDNN_STATUS_INVALID_VALUE";
  case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
  case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER: return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
  case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
  case CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND: return "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND";
  case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT: return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
  case CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH";
  case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
  case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
  case CUDNN_STATUS_NOT_SUPPORTED_SHAPE: return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
  case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
  case CUDNN_STATUS_NOT_SUPPORTED_LAYOUT: return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
  case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
  case CUDNN_STATUS_ALLOC_FAILED: return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
  case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED (or opc-check found a race)";
  case CUDNN_STATUS_EXECUTION_FAILED_CUDART: return "CUDNN_STATUS_EXECUTION_FAILED_CUDART";
  }
  return "CUDNN_STATUS_UNKNOWN";
}

/* ---- handle ---- */

/* Creating a handle allocates device memory: a capture may forbid it. */
cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (rt_capture_forbids())
    return CUDNN_STATUS_NOT_SUPPORTED;
  if (!blas_ready())
    return CUDNN_STATUS_NOT_INITIALIZED;
  *handle = calloc(1, sizeof **handle);
  if (!*handle)
    return CUDNN_STATUS_ALLOC_FAILED;
  (*handle)->device = rt_device();
  return CUDNN_STATUS_SUCCESS;
}

/* cuDNN documents that destroying a handle synchronises the device. */
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  cudaError_t err = rt_device_sync();
  if (err == cudaErrorStreamCaptureUnsupported)
    return CUDNN_STATUS_NOT_SUPPORTED;
  free(handle);
  return dnn_status(err);
}

/* Moving a handle off a capturing stream is refused, conservatively:
 * cuDNN may set up per-stream resources on the switch. A stream of another
 * device than the handle's is refused: cuDNN 7 and 8 return
 * CUDNN_STATUS_MAPPING_ERROR for a "mismatch between the user stream and
 * the cuDNN handle context"; cuDNN 9 has no MAPPING_ERROR, and its code for
 * that mismatch is CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH. */
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (rt_stream_on(streamId, handle->device)->device != handle->device)
    return CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH;
  pthread_mutex_lock(&rt.lock);
  bool capturing = dnn_capturing_locked(handle);
  if (!capturing)
    handle->stream = streamId;
  pthread_mutex_unlock(&rt.lock);
  return capturing ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t *streamId) {
  if (!handle || !streamId)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  *streamId = handle->stream;
  return CUDNN_STATUS_SUCCESS;
}

/* ---- descriptor life: all are plain zeroed structs ---- */

static cudnnStatus_t create(void **out, size_t size) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!out)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  *out = calloc(1, size);
  return *out ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}

static cudnnStatus_t destroy(void *p) {
  free(p);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d) {
  return create((void **)d, sizeof **d);
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
  return destroy(d);
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d) {
  return create((void **)d, sizeof **d);
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
  return destroy(d);
}
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d) {
  cudnnStatus_t st = create((void **)d, sizeof **d);
  if (st == CUDNN_STATUS_SUCCESS)
    (*d)->groups = 1;
  return st;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
  return destroy(d);
}
cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t *d) {
  cudnnStatus_t st = create((void **)d, sizeof **d);
  if (st == CUDNN_STATUS_SUCCESS)
    (*d)->swish_beta = 1.0;
  return st;
}
cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t d) {
  return destroy(d);
}
cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t *d) {
  return create((void **)d, sizeof **d);
}
cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t d) {
  return destroy(d);
}
cudnnStatus_t cudnnCreateOpTensorDescriptor(cudnnOpTensorDescriptor_t *d) {
  return create((void **)d, sizeof **d);
}
cudnnStatus_t cudnnDestroyOpTensorDescriptor(cudnnOpTensorDescriptor_t d) {
  return destroy(d);
}
cudnnStatus_t cudnnCreateReduceTensorDescriptor(cudnnReduceTensorDescriptor_t *d) {
  return create((void **)d, sizeof **d);
}
cudnnStatus_t cudnnDestroyReduceTensorDescriptor(cudnnReduceTensorDescriptor_t d) {
  return destroy(d);
}
cudnnStatus_t cudnnCreateLRNDescriptor(cudnnLRNDescriptor_t *d) {
  cudnnStatus_t st = create((void **)d, sizeof **d);
  if (st == CUDNN_STATUS_SUCCESS)
    **d = (struct cudnnLRNStruct){5, 1e-4, 0.75, 2.0}; /* cuDNN's defaults */
  return st;
}
cudnnStatus_t cudnnDestroyLRNDescriptor(cudnnLRNDescriptor_t d) {
  return destroy(d);
}

/* ---- tensors ---- */

static cudnnStatus_t set_tensor(cudnnTensorDescriptor_t d, cudnnDataType_t type, int rank,
                                const int *dims, const int *strides) {
  if (!d || !dims || !strides)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (rank < 1 || rank > MAX_DIMS)
    return CUDNN_STATUS_NOT_SUPPORTED;
  if (dnn_type_size(type) == 0)
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  for (int i = 0; i < rank; i++)
    if (dims[i] <= 0 || strides[i] <= 0)
      return CUDNN_STATUS_BAD_PARAM;
  Tensor *t = &d->t;
  t->type = type;
  t->rank = rank;
  for (int i = 0; i < rank; i++) {
    t->dims[i] = dims[i];
    t->strides[i] = strides[i];
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t d, cudnnDataType_t type,
                                           int n, int c, int h, int w, int ns, int cs, int hs,
                                           int ws) {
  int dims[4] = {n, c, h, w}, strides[4] = {ns, cs, hs, ws};
  return set_tensor(d, type, 4, dims, strides);
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
                                         cudnnDataType_t type, int n, int c, int h, int w) {
  if (format == CUDNN_TENSOR_NCHW)
    return cudnnSetTensor4dDescriptorEx(d, type, n, c, h, w, c * h * w, h * w, w, 1);
  if (format == CUDNN_TENSOR_NHWC)
    return cudnnSetTensor4dDescriptorEx(d, type, n, c, h, w, h * w * c, 1, w * c, c);
  return CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
}

cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t type,
                                         int nbDims, const int dimA[], const int strideA[]) {
  if (nbDims < 3)
    return CUDNN_STATUS_BAD_PARAM;
  return set_tensor(d, type, nbDims, dimA, strideA);
}

cudnnStatus_t cudnnSetTensorNdDescriptorEx(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
                                           cudnnDataType_t type, int nbDims, const int dimA[]) {
  if (!d || !dimA)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (nbDims < 3 || nbDims > MAX_DIMS)
    return CUDNN_STATUS_BAD_PARAM;
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
    return CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
  /* Strides follow the order of the dims in memory: N, C, spatial... or
   * N, spatial..., C. */
  int order[MAX_DIMS], strides[MAX_DIMS], n = 0;
  order[n++] = 0;
  if (format == CUDNN_TENSOR_NCHW)
    order[n++] = 1;
  for (int i = 2; i < nbDims; i++)
    order[n++] = i;
  if (format == CUDNN_TENSOR_NHWC)
    order[n++] = 1;
  long long s = 1;
  for (int i = nbDims - 1; i >= 0; i--) {
    strides[order[i]] = (int)s;
    s *= dimA[order[i]];
  }
  return set_tensor(d, type, nbDims, dimA, strides);
}

cudnnStatus_t cudnnGetTensorNdDescriptor(const cudnnTensorDescriptor_t d, int nbDimsRequested,
                                         cudnnDataType_t *dataType, int *nbDims, int dimA[],
                                         int strideA[]) {
  if (!d || !dataType || !nbDims || (nbDimsRequested > 0 && (!dimA || !strideA)))
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (d->t.rank == 0)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  *dataType = d->t.type;
  *nbDims = d->t.rank;
  for (int i = 0; i < nbDimsRequested && i < d->t.rank; i++) {
    dimA[i] = (int)d->t.dims[i];
    strideA[i] = (int)d->t.strides[i];
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetTensorSizeInBytes(const cudnnTensorDescriptor_t d, size_t *size) {
  if (!d || !size)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (d->t.rank == 0)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  long long last = 0;
  for (int i = 0; i < d->t.rank; i++)
    last += (d->t.dims[i] - 1) * d->t.strides[i];
  *size = (size_t)(last + 1) * dnn_type_size(d->t.type);
  return CUDNN_STATUS_SUCCESS;
}

/* ---- filters ---- */

cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int nbDims,
                                         const int filterDimA[]) {
  if (!d || !filterDimA)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
    return CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
  if (!dnn_float_type(type))
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  if (nbDims < 3 || nbDims > 5)
    return CUDNN_STATUS_NOT_SUPPORTED;
  if (format == CUDNN_TENSOR_NHWC && nbDims != 4) /* this runtime's NHWC filters are 2-D */
    return CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
  for (int i = 0; i < nbDims; i++)
    if (filterDimA[i] <= 0)
      return CUDNN_STATUS_BAD_PARAM;
  d->type = type;
  d->rank = nbDims;
  d->format = format;
  for (int i = 0; i < nbDims; i++)
    d->dims[i] = filterDimA[i];
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w) {
  int dims[4] = {k, c, h, w};
  return cudnnSetFilterNdDescriptor(d, type, format, 4, dims);
}

/* ---- convolutions ---- */

cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t d, int arrayLength,
                                              const int padA[], const int filterStrideA[],
                                              const int dilationA[], cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType) {
  if (!d || !padA || !filterStrideA || !dilationA)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (arrayLength < 1 || arrayLength > 3)
    return CUDNN_STATUS_NOT_SUPPORTED;
  if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION)
    return CUDNN_STATUS_BAD_PARAM;
  /* FLOAT for every data type the runtime computes; HALF for HALF data
   * too (cuDNN's TRUE_HALF_CONFIG). Whether it fits the tensors' type is
   * checked by the calls that get both (make_geom in cudnn_conv.c). */
  if (computeType != CUDNN_DATA_FLOAT && computeType != CUDNN_DATA_HALF)
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  for (int i = 0; i < arrayLength; i++)
    if (padA[i] < 0 || filterStrideA[i] <= 0 || dilationA[i] <= 0)
      return CUDNN_STATUS_BAD_PARAM;
  d->nspatial = arrayLength;
  d->mode = mode;
  d->compute = computeType;
  for (int i = 0; i < arrayLength; i++) {
    d->pad[i] = padA[i];
    d->stride[i] = filterStrideA[i];
    d->dilation[i] = dilationA[i];
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType) {
  int pad[2] = {pad_h, pad_w}, stride[2] = {u, v}, dil[2] = {dilation_h, dilation_w};
  return cudnnSetConvolutionNdDescriptor(d, 2, pad, stride, dil, mode, computeType);
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groupCount) {
  if (!d)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (groupCount < 1)
    return CUDNN_STATUS_BAD_PARAM;
  d->groups = groupCount;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m) {
  if (!d)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (m < CUDNN_DEFAULT_MATH || m > CUDNN_FMA_MATH)
    return CUDNN_STATUS_BAD_PARAM;
  d->math = m; /* the CPU always computes in full single precision */
  return CUDNN_STATUS_SUCCESS;
}

/* ---- activations, pooling, op tensor, reduce, LRN ---- */

cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t d,
                                           cudnnActivationMode_t mode,
                                           cudnnNanPropagation_t reluNanOpt, double coef) {
  (void)reluNanOpt;
  if (!d)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (mode < CUDNN_ACTIVATION_SIGMOID || mode > CUDNN_ACTIVATION_SWISH)
    return CUDNN_STATUS_BAD_PARAM;
  d->set = true;
  d->mode = mode;
  d->coef = coef;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetActivationDescriptorSwishBeta(cudnnActivationDescriptor_t d,
                                                    double swish_beta) {
  if (!d)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  d->swish_beta = swish_beta;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetPoolingNdDescriptor(cudnnPoolingDescriptor_t d,
                                          const cudnnPoolingMode_t mode,
                                          const cudnnNanPropagation_t maxpoolingNanOpt,
                                          int nbDims, const int windowDimA[],
                                          const int paddingA[], const int strideA[]) {
  (void)maxpoolingNanOpt;
  if (!d || !windowDimA || !paddingA || !strideA)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (mode < CUDNN_POOLING_MAX || mode > CUDNN_POOLING_MAX_DETERMINISTIC)
    return CUDNN_STATUS_BAD_PARAM;
  if (nbDims < 1 || nbDims > 3)
    return CUDNN_STATUS_NOT_SUPPORTED;
  for (int i = 0; i < nbDims; i++)
    if (windowDimA[i] <= 0 || paddingA[i] < 0 || strideA[i] <= 0)
      return CUDNN_STATUS_BAD_PARAM;
  d->nspatial = nbDims;
  d->mode = mode;
  for (int i = 0; i < nbDims; i++) {
    d->window[i] = windowDimA[i];
    d->pad[i] = paddingA[i];
    d->stride[i] = strideA[i];
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d, cudnnPoolingMode_t mode,
                                          cudnnNanPropagation_t maxpoolingNanOpt,
                                          int windowHeight, int windowWidth, int verticalPadding,
                                          int horizontalPadding, int verticalStride,
                                          int horizontalStride) {
  int win[2] = {windowHeight, windowWidth}, pad[2] = {verticalPadding, horizontalPadding};
  int stride[2] = {verticalStride, horizontalStride};
  return cudnnSetPoolingNdDescriptor(d, mode, maxpoolingNanOpt, 2, win, pad, stride);
}

cudnnStatus_t cudnnGetPoolingNdForwardOutputDim(const cudnnPoolingDescriptor_t d,
                                                const cudnnTensorDescriptor_t x, int nbDims,
                                                int out[]) {
  if (!d || !x || !out)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (d->nspatial == 0 || x->t.rank != d->nspatial + 2 || nbDims != x->t.rank)
    return CUDNN_STATUS_BAD_PARAM;
  out[0] = (int)x->t.dims[0];
  out[1] = (int)x->t.dims[1];
  for (int i = 0; i < d->nspatial; i++)
    out[i + 2] = (int)(1 + (x->t.dims[i + 2] + 2 * d->pad[i] - d->window[i]) / d->stride[i]);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetOpTensorDescriptor(cudnnOpTensorDescriptor_t d, cudnnOpTensorOp_t op,
                                         cudnnDataType_t compType, cudnnNanPropagation_t nanOpt) {
  (void)nanOpt;
  if (!d)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (op < CUDNN_OP_TENSOR_ADD || op > CUDNN_OP_TENSOR_NOT)
    return CUDNN_STATUS_BAD_PARAM;
  if (compType != CUDNN_DATA_FLOAT)
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  d->set = true;
  d->op = op;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetReduceTensorDescriptor(cudnnReduceTensorDescriptor_t d,
                                             cudnnReduceTensorOp_t op, cudnnDataType_t compType,
                                             cudnnNanPropagation_t nanOpt,
                                             cudnnReduceTensorIndices_t indices,
                                             cudnnIndicesType_t indexType) {
  (void)nanOpt;
  if (!d)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (op < CUDNN_REDUCE_TENSOR_ADD || op > CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS)
    return CUDNN_STATUS_BAD_PARAM;
  /* FLOAT only, for 16-bit data too: cudnnReduceTensor computes HALF
   * tensors in float (and refuses BFLOAT16 ones), and no 16-bit compute
   * type is taken. */
  if (compType != CUDNN_DATA_FLOAT)
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  if (indices != CUDNN_REDUCE_TENSOR_NO_INDICES && indices != CUDNN_REDUCE_TENSOR_FLATTENED_INDICES)
    return CUDNN_STATUS_BAD_PARAM;
  if (indices && indexType != CUDNN_32BIT_INDICES)
    return CUDNN_STATUS_NOT_SUPPORTED;
  d->set = true;
  d->op = op;
  d->indices = indices;
  d->index_type = indexType;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetLRNDescriptor(cudnnLRNDescriptor_t d, unsigned lrnN, double lrnAlpha,
                                    double lrnBeta, double lrnK) {
  if (!d)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  /* cuDNN's documented limits. */
  if (lrnN < 1 || lrnN > 16 || lrnK < 1e-5 || lrnBeta < 0.01)
    return CUDNN_STATUS_BAD_PARAM;
  *d = (struct cudnnLRNStruct){lrnN, lrnAlpha, lrnBeta, lrnK};
  return CUDNN_STATUS_SUCCESS;
}
