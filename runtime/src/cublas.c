/*
 * cublas.c - SGEMM with cuBLAS's column-major conventions, on OpenBLAS.
 *
 * A call is split into blocks of columns (or rows, when C is tall) that the
 * thread pool computes with single-threaded library calls (blas.c); batches
 * are further parts. Small products are computed here instead.
 *
 * As for cuDNN (see dnn.h), a handle's first GEMM must run eagerly: inside
 * a capture it fails with CUBLAS_STATUS_NOT_INITIALIZED. A GEMM may use
 * the handle's workspace as scratch, so checking mode records it as
 * written.
 */
#include <stdlib.h>

#include "cublas_v2.h"
#include "rt.h"

struct cublasContext {
  cudaStream_t stream;
  int device;      /* current when it was created: NULL is its legacy stream */
  cublasMath_t math;
  void *workspace; /* cublasSetWorkspace's, or NULL */
  size_t workspace_size;
  unsigned warm;   /* 1: a GEMM has run eagerly; guarded by rt.lock */
};

/* Whether the handle's stream is capturing; if so, invalidates the capture. */
static bool capturing(cublasHandle_t h) {
  pthread_mutex_lock(&rt.lock);
  Stream *s = rt_stream_on(h->stream, h->device);
  bool yes = s->capture != NULL;
  if (yes)
    capture_invalidate_locked(s->capture);
  pthread_mutex_unlock(&rt.lock);
  return yes;
}

static cublasStatus_t status_of(cudaError_t err) {
  switch (err) {
  case cudaSuccess: return CUBLAS_STATUS_SUCCESS;
  case cudaErrorMemoryAllocation: return CUBLAS_STATUS_ALLOC_FAILED;
  case cudaErrorLaunchFailure: return CUBLAS_STATUS_EXECUTION_FAILED;
  case cudaErrorInvalidValue: return CUBLAS_STATUS_INVALID_VALUE;
  case cudaErrorStreamCaptureUnsupported:
  case cudaErrorStreamCaptureImplicit: return CUBLAS_STATUS_NOT_SUPPORTED;
  default: return CUBLAS_STATUS_EXECUTION_FAILED;
  }
}

const char *cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "success";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
  case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
  case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
  case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute (or opc-check found a race)";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
  }
  return "unknown error";
}

/* Creating a handle allocates device memory: a capture may forbid it. */
cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
  if (rt_enter())
    return CUBLAS_STATUS_EXECUTION_FAILED;
  if (!handle)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (rt_capture_forbids())
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!blas_ready())
    return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = calloc(1, sizeof **handle);
  if (!*handle)
    return CUBLAS_STATUS_ALLOC_FAILED;
  (*handle)->device = rt_device();
  return CUBLAS_STATUS_SUCCESS;
}

/* cuBLAS documents that destroying a handle synchronises the device. */
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  if (rt_enter())
    return CUBLAS_STATUS_EXECUTION_FAILED;
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  cudaError_t err = rt_device_sync();
  if (err == cudaErrorStreamCaptureUnsupported)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  free(handle);
  return status_of(err);
}

/* Refused on a handle whose stream is capturing, conservatively: setting
 * the stream also resets the workspace to cuBLAS's own pool. A stream of
 * another device than the handle's is refused with INVALID_VALUE, a strict
 * choice: cuBLAS documents only that a handle stays bound to the device
 * current at cublasCreate, and its kernels would be launched into a
 * stream of another device. */
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
  if (rt_enter())
    return CUBLAS_STATUS_EXECUTION_FAILED;
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (rt_stream_on(streamId, handle->device)->device != handle->device)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (capturing(handle))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  handle->stream = streamId;
  handle->workspace = NULL;
  handle->workspace_size = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *streamId) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!streamId)
    return CUBLAS_STATUS_INVALID_VALUE;
  *streamId = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (rt_enter())
    return CUBLAS_STATUS_EXECUTION_FAILED;
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  int base = mode & 0xf;
  if (base > CUBLAS_TF32_TENSOR_OP_MATH ||
      (mode & ~0xf & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))
    return CUBLAS_STATUS_INVALID_VALUE;
  /* The CPU always computes in full single precision. */
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!mode)
    return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->math;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace,
                                     size_t workspaceSizeInBytes) {
  if (rt_enter())
    return CUBLAS_STATUS_EXECUTION_FAILED;
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if ((!workspace && workspaceSizeInBytes) || (uintptr_t)workspace % 256)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (capturing(handle))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  handle->workspace = workspace;
  handle->workspace_size = workspaceSizeInBytes;
  return CUBLAS_STATUS_SUCCESS;
}

/* Submits a GEMM on the handle's stream; see the top of the file. */
static cublasStatus_t submit(cublasHandle_t h, Op *op) {
  if (h->workspace_size)
    op_span(op, h->workspace, h->workspace_size, true);
  bool cold;
  cudaError_t err = rt_submit_for_handle(h->device, h->stream, op, &h->warm, 1, &cold);
  return cold ? CUBLAS_STATUS_NOT_INITIALIZED : status_of(rt_error(err));
}

typedef struct GemmOp {
  Op op;
  bool ta, tb;
  int m, n, k;
  float alpha, beta;
  const float *A, *B;
  float *C;
  int lda, ldb, ldc;
  long long sa, sb, sc;
  int batch;
  int splits;      /* blocks per batch entry */
  bool split_rows; /* split C's rows rather than its columns */
  int small_parts; /* > 0: small matrices, this many parts of whole batch entries */
} GemmOp;

/*
 * Small products (attention's 16 x 16 heads, for one) cost less to compute
 * than a library call costs to set up, and a batch of them less than
 * handing each to the pool. They are computed here: op(A) is first copied
 * into columns padded to whole vectors of 16 (zeros below row m), then each
 * block of 16 rows and 4 columns of C is summed in four vector registers,
 * one broadcast element of op(B) per column and step: four independent
 * chains, so the additions overlap. GCC's vector type compiles to whatever
 * each clone's instruction set has. Past these sizes oneDNN's sgemm was as
 * fast or faster on this project's AMD EPYC VM (per call, alternating,
 * 2026-11-27): at 32 x 32 x 32, or with k = 64, for instance.
 */
enum { SMALL_M = 64, SMALL_K = 32, SMALL_A = SMALL_M * SMALL_K, SMALL_MACS = 1 << 13 };

typedef float Vec16 __attribute__((vector_size(64)));

static int round16(int m) { return (m + 15) / 16 * 16; }

static bool gemm_is_small(int m, int n, int k) {
  return m <= SMALL_M && k <= SMALL_K && (long long)m * n * k <= SMALL_MACS;
}

OPC_VECTOR_CLONES static void small_gemm(const GemmOp *g, const float *A, const float *B,
                                         float *C) {
  /* Locals: a store to C could otherwise change g's floats, as far as the
   * compiler knows, and every loop would reload them. */
  const int m = g->m, n = g->n, k = g->k, lda = g->lda, ldb = g->ldb, ldc = g->ldc;
  const int mp = round16(m);
  const bool ta = g->ta, tb = g->tb;
  const float alpha = g->alpha, beta = g->beta;
  Vec16 copy[SMALL_A / 16];
  float *a = (float *)copy;
  for (int p = 0; p < k; p++)
    for (int i = 0; i < mp; i++)
      a[i + p * mp] = i >= m ? 0.0f : ta ? A[p + (long long)i * lda] : A[i + (long long)p * lda];
  for (int j0 = 0; j0 < n; j0 += 4) {
    int cols = n - j0 < 4 ? n - j0 : 4;
    /* Columns past n repeat column j0: computed, never stored. */
    int col[4];
    for (int c = 0; c < 4; c++)
      col[c] = j0 + (c < cols ? c : 0);
    for (int i0 = 0; i0 < mp; i0 += 16) {
      Vec16 acc[4] = {{0}};
      for (int p = 0; p < k; p++) {
        Vec16 av = copy[(i0 + p * mp) / 16];
        for (int c = 0; c < 4; c++)
          acc[c] += av * (tb ? B[col[c] + (long long)p * ldb] : B[p + (long long)col[c] * ldb]);
      }
      int rows = m - i0 < 16 ? m - i0 : 16;
      for (int c = 0; c < cols; c++) {
        float *cc = C + i0 + (long long)(j0 + c) * ldc;
        if (beta == 0) /* C is not read, as BLAS: NaNs in it do not leak */
          for (int i = 0; i < rows; i++)
            cc[i] = alpha * acc[c][i];
        else
          for (int i = 0; i < rows; i++)
            cc[i] = alpha * acc[c][i] + beta * cc[i];
      }
    }
  }
}

static void small_part(void *ctx, int part, int nparts) {
  const GemmOp *g = ctx;
  long long lo = (long long)g->batch * part / nparts, hi = (long long)g->batch * (part + 1) / nparts;
  for (long long b = lo; b < hi; b++)
    small_gemm(g, g->A + b * g->sa, g->B + b * g->sb, g->C + b * g->sc);
}

static void gemm_part(void *ctx, int part, int nparts) {
  (void)nparts;
  const GemmOp *g = ctx;
  int b = part / g->splits, s = part % g->splits;
  const float *A = g->A + b * g->sa, *B = g->B + b * g->sb;
  float *C = g->C + b * g->sc;
  int m = g->m, n = g->n;
  if (g->split_rows) {
    int lo = (int)((long long)g->m * s / g->splits), hi = (int)((long long)g->m * (s + 1) / g->splits);
    m = hi - lo;
    A += g->ta ? (long long)lo * g->lda : lo; /* row lo of op(A) */
    C += lo;
  } else {
    int lo = (int)((long long)g->n * s / g->splits), hi = (int)((long long)g->n * (s + 1) / g->splits);
    n = hi - lo;
    B += g->tb ? lo : (long long)lo * g->ldb; /* column lo of op(B) */
    C += (long long)lo * g->ldc;
  }
  if (m <= 0 || n <= 0)
    return;
  if (g->k == 0) {
    /* BLAS leaves C alone when k is 0; C = beta * C is what cuBLAS computes. */
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++)
        C[(long long)j * g->ldc + i] = g->beta == 0 ? 0 : g->beta * C[(long long)j * g->ldc + i];
    return;
  }
  if (!blas_sgemm(false, g->ta, g->tb, m, n, g->k, g->alpha, A, g->lda, B, g->ldb, g->beta, C,
                  g->ldc))
    rt_fail_async(g->op.api);
}

static void run_gemm(Op *op) {
  GemmOp *g = (GemmOp *)op;
  if (g->small_parts)
    pool_run(small_part, g, g->small_parts);
  else
    pool_run(gemm_part, g, g->batch * g->splits);
}

/* Records a column-major matrix of `rows` x `cols` with leading dim ld. */
static void span_matrix(Op *op, const float *p, int rows, int cols, int ld, long long stride,
                        int batch, bool write) {
  long long dims[3] = {batch, cols, rows}, strides[3] = {stride, ld, 1};
  op_span_strided(op, p, 3, dims, strides, sizeof(float), write);
}

static cublasStatus_t gemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha,
                           const float *A, int lda, long long sa, const float *B, int ldb,
                           long long sb, const float *beta, float *C, int ldc, long long sc,
                           int batch, const char *api) {
  if (rt_enter())
    return CUBLAS_STATUS_EXECUTION_FAILED;
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T && transa != CUBLAS_OP_C) ||
      (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T && transb != CUBLAS_OP_C))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  int arows = ta ? k : m, brows = tb ? n : k;
  if (lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) || ldc < (m > 1 ? m : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0 || batch == 0)
    return CUBLAS_STATUS_SUCCESS;
  if (!C || (k > 0 && (!A || !B)))
    return CUBLAS_STATUS_INVALID_VALUE;
  GemmOp *g = op_new(sizeof *g, run_gemm, api);
  if (!g)
    return CUBLAS_STATUS_ALLOC_FAILED;
  *g = (GemmOp){
    .op = g->op, .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .alpha = *alpha, .beta = *beta,
    .A = A, .B = B, .C = C, .lda = lda, .ldb = ldb, .ldc = ldc, .sa = sa, .sb = sb, .sc = sc,
    .batch = batch,
  };
  /* Blocks of at least 64 columns (or rows) and about 2^20 multiply-adds. */
  long long flops = (long long)m * n * (k ? k : 1);
  g->split_rows = m > n;
  int edge = g->split_rows ? m : n;
  int splits = pool_parts(flops, 1 << 20);
  if (splits > edge / 64)
    splits = edge / 64;
  if (batch >= pool_threads() || splits < 1)
    splits = 1;
  g->splits = splits;
  if (k > 0 && gemm_is_small(m, n, k)) {
    int parts = pool_parts(flops * batch, 1 << 17);
    g->small_parts = parts < batch ? parts : batch;
  }
  if (k > 0) {
    span_matrix(&g->op, A, arows, ta ? m : k, lda, sa, batch, false);
    span_matrix(&g->op, B, brows, tb ? k : n, ldb, sb, batch, false);
  }
  if (g->beta != 0)
    span_matrix(&g->op, C, m, n, ldc, sc, batch, false);
  span_matrix(&g->op, C, m, n, ldc, sc, batch, true);
  return submit(handle, &g->op);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc) {
  return gemm(handle, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1,
              "cublasSgemm");
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long int strideA, const float *B, int ldb,
                                         long long int strideB, const float *beta, float *C,
                                         int ldc, long long int strideC, int batchCount) {
  return gemm(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C,
              ldc, strideC, batchCount, "cublasSgemmStridedBatched");
}
