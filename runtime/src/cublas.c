/*
 * cublas.c - SGEMM with cuBLAS's column-major conventions, on oneDNN or
 * OpenBLAS; cublasGemmEx on 16-bit matrices through float copies (half.c).
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
#include <math.h>
#include <stdlib.h>

#include "cublas_v2.h"
#include "ktable.h"
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
  const float *bias; /* cuBLASLt's epilogue (gemm_epilogue_op): one per row of C */
  LtAct act;
} GemmOp;

/* tanh-approximated GELU, the form cuBLASLt's GELU epilogues compute. */
static float gelu_tanh(float x) {
  const float sqrt_2_over_pi = 0.7978845608f;
  return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
}

/* The epilogue over rows [row0, row0 + m) of C and n columns: each row's
 * bias, then the activation (a NaN stays NaN through ReLU, as max(x, 0)
 * on the GPU). */
static void epilogue(const GemmOp *g, float *C, int row0, int m, int n) {
  for (int j = 0; j < n; j++) {
    float *c = C + (long long)j * g->ldc;
    for (int i = 0; i < m; i++) {
      float x = g->bias ? c[i] + g->bias[row0 + i] : c[i];
      if (g->act == LT_ACT_RELU)
        x = x < 0 ? 0 : x;
      else if (g->act == LT_ACT_GELU)
        x = gelu_tanh(x);
      c[i] = x;
    }
  }
}

static bool has_epilogue(const GemmOp *g) { return g->bias || g->act != LT_ACT_NONE; }

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
  for (long long b = lo; b < hi; b++) {
    small_gemm(g, g->A + b * g->sa, g->B + b * g->sb, g->C + b * g->sc);
    if (has_epilogue(g))
      epilogue(g, g->C + b * g->sc, 0, g->m, g->n);
  }
}

static void gemm_part(void *ctx, int part, int nparts) {
  (void)nparts;
  const GemmOp *g = ctx;
  int b = part / g->splits, s = part % g->splits;
  const float *A = g->A + b * g->sa, *B = g->B + b * g->sb;
  float *C = g->C + b * g->sc;
  int m = g->m, n = g->n, row0 = 0;
  if (g->split_rows) {
    int lo = (int)((long long)g->m * s / g->splits), hi = (int)((long long)g->m * (s + 1) / g->splits);
    m = hi - lo;
    row0 = lo;
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
  } else if (n == 1 && g->ta && !g->tb && kernel_isa() == KERNEL_AVX512 &&
             gemv_rows_avx512(m, g->k, g->alpha, A, g->lda, B, g->beta, C)) {
    /* One column, op(A)'s rows contiguous: a matrix-vector product, which
       reads A once (gemv_avx512.c). */
  } else if (!blas_sgemm(false, g->ta, g->tb, m, n, g->k, g->alpha, A, g->lda, B, g->ldb, g->beta,
                         C, g->ldc)) {
    rt_fail_async(g->op.api);
  }
  if (has_epilogue(g))
    epilogue(g, C, row0, m, n);
}

static void run_gemm(Op *op) {
  GemmOp *g = (GemmOp *)op;
  if (g->small_parts)
    pool_run(small_part, g, g->small_parts);
  else
    pool_run(gemm_part, g, g->batch * g->splits);
}

/* Records a column-major matrix of `rows` x `cols` with leading dim ld,
 * of elements of `elem` bytes. */
static void span_matrix(Op *op, const void *p, int rows, int cols, int ld, long long stride,
                        int batch, size_t elem, bool write) {
  long long dims[3] = {batch, cols, rows}, strides[3] = {stride, ld, 1};
  op_span_strided(op, p, 3, dims, strides, elem, write);
}

/* One call's arguments, as cuBLAS names them; lda and the rest in elements. */
typedef struct Gemm {
  cublasOperation_t transa, transb;
  int m, n, k;
  const void *alpha, *beta;
  const void *A, *B;
  void *C;
  int lda, ldb, ldc;
  long long sa, sb, sc;
  int batch;
  size_t elem_a, elem_c; /* bytes per element of A and B, and of C */
} Gemm;

/* Checks the arguments every GEMM shares, as cuBLAS does: INVALID_VALUE
 * for a bad operation, size, leading dimension or a NULL scalar or matrix.
 * *empty when there is nothing to compute. */
static cublasStatus_t gemm_check(const Gemm *c, bool *empty) {
  *empty = false;
  bool ta = c->transa != CUBLAS_OP_N, tb = c->transb != CUBLAS_OP_N;
  if ((c->transa != CUBLAS_OP_N && c->transa != CUBLAS_OP_T && c->transa != CUBLAS_OP_C) ||
      (c->transb != CUBLAS_OP_N && c->transb != CUBLAS_OP_T && c->transb != CUBLAS_OP_C))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (c->m < 0 || c->n < 0 || c->k < 0 || c->batch < 0 || !c->alpha || !c->beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  int arows = ta ? c->k : c->m, brows = tb ? c->n : c->k;
  if (c->lda < (arows > 1 ? arows : 1) || c->ldb < (brows > 1 ? brows : 1) ||
      c->ldc < (c->m > 1 ? c->m : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (c->m == 0 || c->n == 0 || c->batch == 0) {
    *empty = true;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (!c->C || (c->k > 0 && (!c->A || !c->B)))
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

/* The float op of a checked call, with its own scalars: how it is split
 * among the pool's threads. Its spans are the caller's to record. */
static GemmOp *gemm_op(const char *api, const Gemm *c, float alpha, float beta) {
  GemmOp *g = op_new(sizeof *g, run_gemm, api);
  if (!g)
    return NULL;
  int m = c->m, n = c->n, k = c->k, batch = c->batch;
  *g = (GemmOp){
    .op = g->op, .ta = c->transa != CUBLAS_OP_N, .tb = c->transb != CUBLAS_OP_N, .m = m, .n = n,
    .k = k, .alpha = alpha, .beta = beta, .A = c->A, .B = c->B, .C = c->C, .lda = c->lda,
    .ldb = c->ldb, .ldc = c->ldc, .sa = c->sa, .sb = c->sb, .sc = c->sc, .batch = batch,
  };
  /* Blocks of at least 64 columns (or rows) and about 2^20 multiply-adds;
   * a matrix-vector product (a classifier at batch 1), which streams its
   * matrix from memory once and is bound by bandwidth that one thread
   * does not fill, from 2^16. */
  long long flops = (long long)m * n * (k ? k : 1);
  g->split_rows = m > n;
  int edge = g->split_rows ? m : n;
  int splits = pool_parts(flops, m < 8 || n < 8 ? 1 << 16 : 1 << 20);
  if (splits > edge / 64)
    splits = edge / 64;
  if (batch >= pool_threads() || splits < 1)
    splits = 1;
  g->splits = splits;
  if (k > 0 && gemm_is_small(m, n, k)) {
    int parts = pool_parts(flops * batch, 1 << 17);
    g->small_parts = parts < batch ? parts : batch;
  }
  return g;
}

/* What the call reads and writes, for the checking mode: A and B unless k
 * is 0, C (read too when beta blends it in). */
static void gemm_spans(Op *op, const Gemm *c, bool beta_nonzero) {
  bool ta = c->transa != CUBLAS_OP_N, tb = c->transb != CUBLAS_OP_N;
  if (c->k > 0) {
    span_matrix(op, c->A, ta ? c->k : c->m, ta ? c->m : c->k, c->lda, c->sa, c->batch, c->elem_a,
                false);
    span_matrix(op, c->B, tb ? c->n : c->k, tb ? c->k : c->n, c->ldb, c->sb, c->batch, c->elem_a,
                false);
  }
  if (beta_nonzero)
    span_matrix(op, c->C, c->m, c->n, c->ldc, c->sc, c->batch, c->elem_c, false);
  span_matrix(op, c->C, c->m, c->n, c->ldc, c->sc, c->batch, c->elem_c, true);
}

/* A checked call on float matrices, scalars read already. */
static cublasStatus_t gemm_float(cublasHandle_t handle, const Gemm *c, float alpha, float beta,
                                 const char *api) {
  GemmOp *g = gemm_op(api, c, alpha, beta);
  if (!g)
    return CUBLAS_STATUS_ALLOC_FAILED;
  gemm_spans(&g->op, c, beta != 0);
  return submit(handle, &g->op);
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
  Gemm c = {.transa = transa, .transb = transb, .m = m, .n = n, .k = k, .alpha = alpha,
            .beta = beta, .A = A, .B = B, .C = C, .lda = lda, .ldb = ldb, .ldc = ldc, .sa = sa,
            .sb = sb, .sc = sc, .batch = batch, .elem_a = sizeof(float),
            .elem_c = sizeof(float)};
  bool empty;
  cublasStatus_t st = gemm_check(&c, &empty);
  if (st || empty)
    return st;
  return gemm_float(handle, &c, *alpha, *beta, api);
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

/* ---- cublasGemmEx: 16-bit matrices ---- */

/*
 * cuBLAS's table of cublasGemmEx's types (compute type; the type alpha and
 * beta point to; Atype = Btype; Ctype), the rows with real matrices:
 *
 *   COMPUTE_16F, _16F_PEDANTIC          16F  R_16F                R_16F
 *   COMPUTE_32F, _32F_PEDANTIC          32F  R_16BF, R_16F, R_32F  the same
 *                                            R_16BF, R_16F, R_8I   R_32F
 *   COMPUTE_32F_FAST_16F, _FAST_16BF,   32F  R_32F                R_32F
 *   _FAST_TF32 (and, since CUDA 12.9,
 *   _EMULATED_16BFX9)
 *   COMPUTE_64F, _64F_PEDANTIC          64F  R_64F                R_64F
 *   COMPUTE_32I, _32I_PEDANTIC          32I  R_8I                 R_32I
 *
 * (the FAST types allow float inputs to be rounded to 16 bits or TF32:
 * they take float matrices only). Every other combination of valid types
 * is CUBLAS_STATUS_NOT_SUPPORTED; a value that is not a type, compute type
 * or algorithm of the enums at all is CUBLAS_STATUS_INVALID_VALUE. The
 * runtime computes the float and 16-bit rows, in float; R_8I, R_64F and
 * R_32I matrices are refused with NOT_SUPPORTED too, as opc emits none.
 */
static bool is_data_type(cudaDataType t) {
  return (int)t >= 0 && (int)t <= 33; /* CUDA 13's cudaDataType_t: 0 to 33 */
}

static bool is_compute_type(cublasComputeType_t t) {
  return (t >= CUBLAS_COMPUTE_16F && t <= CUBLAS_COMPUTE_16F_PEDANTIC) ||
         (t >= CUBLAS_COMPUTE_32F && t <= CUBLAS_COMPUTE_32F_FAST_16BF) ||
         (t >= CUBLAS_COMPUTE_32F_FAST_TF32 && t <= CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT);
}

/* cublasGemmAlgo_t: DEFAULT (-1), ALGO0 to ALGO23, DEFAULT_TENSOR_OP (99),
 * ALGO0_TENSOR_OP to ALGO15_TENSOR_OP (100 to 115), AUTOTUNE (999). The
 * numbered algorithms select nothing on recent GPUs; all run the same
 * code here. AUTOTUNE (a benchmark cached in the handle) is refused with
 * NOT_SUPPORTED, a conservative choice. */
static cublasStatus_t algo_status(cublasGemmAlgo_t algo) {
  int a = (int)algo;
  if ((a >= -1 && a <= 23) || (a >= 99 && a <= 115))
    return CUBLAS_STATUS_SUCCESS;
  return a == 999 ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_INVALID_VALUE;
}

static bool is_16bit(cudaDataType t) {
  return t == CUDA_R_16F || t == CUDA_R_16BF;
}

/* Whether the types are a row of the table above that the runtime
 * computes; *half_scalars when alpha and beta point to __half. */
static bool ex_types_computed(cudaDataType at, cudaDataType bt, cudaDataType ct,
                              cublasComputeType_t compute, bool *half_scalars) {
  *half_scalars = false;
  if (at != bt)
    return false;
  switch (compute) {
  case CUBLAS_COMPUTE_16F:
  case CUBLAS_COMPUTE_16F_PEDANTIC:
    *half_scalars = true;
    return at == CUDA_R_16F && ct == CUDA_R_16F;
  case CUBLAS_COMPUTE_32F:
  case CUBLAS_COMPUTE_32F_PEDANTIC:
    return (at == CUDA_R_32F || is_16bit(at)) && (ct == at || ct == CUDA_R_32F);
  case CUBLAS_COMPUTE_32F_FAST_16F:
  case CUBLAS_COMPUTE_32F_FAST_16BF:
  case CUBLAS_COMPUTE_32F_FAST_TF32:
  case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
    return at == CUDA_R_32F && ct == CUDA_R_32F;
  default:
    return false;
  }
}

static Store store_of(cudaDataType t) {
  return t == CUDA_R_16F ? STORE_F16 : t == CUDA_R_16BF ? STORE_BF16 : STORE_F32;
}

/* A column-major matrix of `rows` x `cols`, batch stride s, as a HalfArg:
 * the copy is packed, and one matrix when s is 0 (shared by the batch). */
static HalfArg matrix_arg(const void *p, cudaDataType t, int rows, int cols, int ld, long long s,
                          int batch, bool read, bool write) {
  HalfArg a = {.dev = (void *)p, .store = store_of(t), .read = read, .write = write, .rank = 3};
  a.dims[0] = s ? batch : 1;
  a.dims[1] = cols;
  a.dims[2] = rows;
  a.strides[0] = s;
  a.strides[1] = ld;
  a.strides[2] = 1;
  return a;
}

/* Points a run's copy of the float op at the args' buffers: A and B unless
 * k is 0, then C. */
static void gemm_bind(Op *inner, void *const *ptrs) {
  GemmOp *g = (GemmOp *)inner;
  int i = 0;
  if (g->k > 0) {
    g->A = ptrs[i++];
    g->B = ptrs[i++];
  }
  g->C = ptrs[i];
  if (g->bias)
    g->bias = ptrs[i + 1];
}

/*
 * A checked call with 16-bit A and B: the float op over packed float
 * copies of A and B (leading dimension their rows, batch stride one
 * matrix, or 0 when the batch shares one), and of C when it is 16-bit too
 * (a float C is used where it is), inside a half_op_new op; with
 * cuBLASLt's epilogue, of the bias too. NULL when out of memory.
 */
static Op *half_gemm_op(const Gemm *c, cudaDataType ab, cudaDataType ct, float alpha, float beta,
                        const void *bias, LtAct act, const char *api) {
  bool ta = c->transa != CUBLAS_OP_N, tb = c->transb != CUBLAS_OP_N;
  int arows = ta ? c->k : c->m, acols = ta ? c->m : c->k;
  int brows = tb ? c->n : c->k, bcols = tb ? c->k : c->n;
  Gemm f = *c;
  f.lda = arows > 1 ? arows : 1;
  f.ldb = brows > 1 ? brows : 1;
  f.sa = c->sa ? (long long)arows * acols : 0;
  f.sb = c->sb ? (long long)brows * bcols : 0;
  if (ct != CUDA_R_32F) {
    f.ldc = c->m;
    f.sc = c->sc ? (long long)c->m * c->n : 0;
  }
  GemmOp *g = gemm_op(api, &f, alpha, beta);
  if (!g)
    return NULL;
  g->bias = bias; /* rebound to its float copy */
  g->act = act;
  HalfArg args[4];
  int n = 0;
  if (c->k > 0) {
    args[n++] = matrix_arg(c->A, ab, arows, acols, c->lda, c->sa, c->batch, true, false);
    args[n++] = matrix_arg(c->B, ab, brows, bcols, c->ldb, c->sb, c->batch, true, false);
  }
  args[n++] = matrix_arg(c->C, ct, c->m, c->n, c->ldc, c->sc, c->batch, beta != 0, true);
  if (bias)
    args[n++] = matrix_arg(bias, ab, c->m, 1, c->m, 0, 1, true, false);
  Op *op = half_op_new(&g->op, sizeof *g, gemm_bind, args, n);
  if (op)
    gemm_spans(op, c, beta != 0);
  return op;
}

static cublasStatus_t gemm_half(cublasHandle_t handle, const Gemm *c, cudaDataType ab,
                                cudaDataType ct, float alpha, float beta, const char *api) {
  Op *op = half_gemm_op(c, ab, ct, alpha, beta, NULL, LT_ACT_NONE, api);
  return op ? submit(handle, op) : CUBLAS_STATUS_ALLOC_FAILED;
}

static size_t elem_size(cudaDataType t) {
  return is_16bit(t) ? 2 : sizeof(float);
}

static cublasStatus_t gemm_ex(cublasHandle_t handle, const Gemm *call, cudaDataType at,
                              cudaDataType bt, cudaDataType ct, cublasComputeType_t compute,
                              cublasGemmAlgo_t algo, const char *api) {
  if (rt_enter())
    return CUBLAS_STATUS_EXECUTION_FAILED;
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!is_data_type(at) || !is_data_type(bt) || !is_data_type(ct) || !is_compute_type(compute))
    return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t st = algo_status(algo);
  if (st)
    return st;
  bool half_scalars;
  if (!ex_types_computed(at, bt, ct, compute, &half_scalars))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  Gemm c = *call;
  c.elem_a = elem_size(at);
  c.elem_c = elem_size(ct);
  bool empty;
  if ((st = gemm_check(&c, &empty)) || empty)
    return st;
  float alpha = half_scalars ? f16_to_float(*(const uint16_t *)c.alpha) : *(const float *)c.alpha;
  float beta = half_scalars ? f16_to_float(*(const uint16_t *)c.beta) : *(const float *)c.beta;
  if (at == CUDA_R_32F)
    return gemm_float(handle, &c, alpha, beta, api);
  return gemm_half(handle, &c, at, ct, alpha, beta, api);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  Gemm c = {.transa = transa, .transb = transb, .m = m, .n = n, .k = k, .alpha = alpha,
            .beta = beta, .A = A, .B = B, .C = C, .lda = lda, .ldb = ldb, .ldc = ldc, .batch = 1};
  return gemm_ex(handle, &c, Atype, Btype, Ctype, computeType, algo, "cublasGemmEx");
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType Atype, int lda, long long int strideA,
    const void *B, cudaDataType Btype, int ldb, long long int strideB, const void *beta, void *C,
    cudaDataType Ctype, int ldc, long long int strideC, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  Gemm c = {.transa = transa, .transb = transb, .m = m, .n = n, .k = k, .alpha = alpha,
            .beta = beta, .A = A, .B = B, .C = C, .lda = lda, .ldb = ldb, .ldc = ldc,
            .sa = strideA, .sb = strideB, .sc = strideC, .batch = batchCount};
  return gemm_ex(handle, &c, Atype, Btype, Ctype, computeType, algo,
                 "cublasGemmStridedBatchedEx");
}

/* ---- cuBLASLt's float matmul with an epilogue (cublaslt.c checks it) ---- */

Op *gemm_epilogue_op(const LtGemm *l, const char *api) {
  Gemm c = {.transa = l->ta ? CUBLAS_OP_T : CUBLAS_OP_N,
            .transb = l->tb ? CUBLAS_OP_T : CUBLAS_OP_N, .m = l->m, .n = l->n, .k = l->k, .A = l->A, .B = l->B, .C = l->D, .lda = l->lda,
            .ldb = l->ldb, .ldc = l->ldd, .sa = l->sa, .sb = l->sb, .sc = l->sd,
            .batch = l->batch};
  if (l->store != STORE_F32) {
    cudaDataType t = l->store == STORE_F16 ? CUDA_R_16F : CUDA_R_16BF;
    c.elem_a = c.elem_c = 2;
    Op *op = half_gemm_op(&c, t, t, l->alpha, l->beta, l->bias, l->act, api);
    if (op && l->bias)
      op_span(op, l->bias, (size_t)l->m * 2, false);
    return op;
  }
  c.elem_a = c.elem_c = sizeof(float);
  GemmOp *g = gemm_op(api, &c, l->alpha, l->beta);
  if (!g)
    return NULL;
  g->bias = l->bias;
  g->act = l->act;
  gemm_spans(&g->op, &c, l->beta != 0);
  if (l->bias)
    op_span(&g->op, l->bias, (size_t)l->m * sizeof(float), false);
  return &g->op;
}
