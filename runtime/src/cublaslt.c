/*
 * cublaslt.c - cuBLASLt's matmul on the CPU, in two cases: the int8 one
 * (IMMA), and float matrices with cuBLASLt's epilogues (at the bottom).
 *
 * The int8 case: A and B CUDA_R_8I, C and D CUDA_R_32I, CUBLAS_COMPUTE_32I,
 * int32 alpha and beta.
 *
 * The call is checked as the cuBLASLt documentation states for IMMA kernels
 * with the regular (column-major) ordering, so that a program the runtime
 * accepts is one real cuBLASLt accepts: A transposed and B not ("TN"), m
 * and k multiples of 4, leading dimensions multiples of 4 and every matrix
 * pointer 4-byte aligned; anything else is CUBLAS_STATUS_NOT_SUPPORTED.
 * The IMMA-specific orders (COL32 and the tiled ones of Turing and Ampere)
 * and other types are not computed here: NOT_SUPPORTED too. Shapes that
 * disagree, or NULL arguments, are CUBLAS_STATUS_INVALID_VALUE.
 *
 * The sums are computed by oneDNN's dnnl_gemm_s8s8s32 where it is loaded
 * (blas.c), on blocks of D's columns that the pool runs, else by the plain
 * loop below. Both are exact: int32 sums of int8 products, wrapping as
 * int32 arithmetic does.
 */
#include <stdlib.h>
#include <string.h>

#include "cublasLt.h"
#include "rt.h"

struct cublasLtContext {
  int device; /* current when it was created */
};

struct cublasLtMatmulDescOpaque_t {
  int32_t compute, scale, pointer_mode, transa, transb, transc;
  uint32_t epilogue;
  const void *bias;
  int32_t bias_type; /* -1: D's */
};

struct cublasLtMatrixLayoutOpaque_t {
  uint32_t type;
  int32_t order, batch;
  uint64_t rows, cols;
  int64_t ld, stride;
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  if (rt_enter())
    return CUBLAS_STATUS_EXECUTION_FAILED;
  if (!handle)
    return CUBLAS_STATUS_INVALID_VALUE;
  *handle = calloc(1, sizeof **handle);
  if (!*handle)
    return CUBLAS_STATUS_ALLOC_FAILED;
  (*handle)->device = rt_device();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  free(handle);
  return CUBLAS_STATUS_SUCCESS;
}

static bool is_compute_type(cublasComputeType_t t) {
  return (t >= CUBLAS_COMPUTE_16F && t <= CUBLAS_COMPUTE_32F_FAST_TF32 && t != 66 && t != 67 &&
          t != 76) || t == CUBLAS_COMPUTE_32F_EMULATED_16BFX9 ||
         t == CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (!desc || !is_compute_type(compute))
    return CUBLAS_STATUS_INVALID_VALUE;
  *desc = malloc(sizeof **desc);
  if (!*desc)
    return CUBLAS_STATUS_ALLOC_FAILED;
  **desc = (struct cublasLtMatmulDescOpaque_t){
    .compute = compute, .scale = scale, .pointer_mode = CUBLASLT_POINTER_MODE_HOST,
    .transa = CUBLAS_OP_N, .transb = CUBLAS_OP_N, .transc = CUBLAS_OP_N,
    .epilogue = CUBLASLT_EPILOGUE_DEFAULT, .bias_type = -1,
  };
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  free(desc);
  return CUBLAS_STATUS_SUCCESS;
}

/* Copies an attribute's value of `size` bytes into *field, checking the
 * buffer's size as cuBLASLt does. */
static cublasStatus_t set_field(void *field, size_t size, const void *buf, size_t given) {
  if (!buf || given != size)
    return CUBLAS_STATUS_INVALID_VALUE;
  memcpy(field, buf, size);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t size) {
  if (!desc)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return set_field(&desc->compute, 4, buf, size);
  case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return set_field(&desc->scale, 4, buf, size);
  case CUBLASLT_MATMUL_DESC_POINTER_MODE: return set_field(&desc->pointer_mode, 4, buf, size);
  case CUBLASLT_MATMUL_DESC_TRANSA: return set_field(&desc->transa, 4, buf, size);
  case CUBLASLT_MATMUL_DESC_TRANSB: return set_field(&desc->transb, 4, buf, size);
  case CUBLASLT_MATMUL_DESC_TRANSC: return set_field(&desc->transc, 4, buf, size);
  case CUBLASLT_MATMUL_DESC_EPILOGUE: return set_field(&desc->epilogue, 4, buf, size);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return set_field(&desc->bias, sizeof desc->bias, buf, size);
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return set_field(&desc->bias_type, 4, buf, size);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (!layout)
    return CUBLAS_STATUS_INVALID_VALUE;
  *layout = malloc(sizeof **layout);
  if (!*layout)
    return CUBLAS_STATUS_ALLOC_FAILED;
  **layout = (struct cublasLtMatrixLayoutOpaque_t){
    .type = (uint32_t)type, .order = CUBLASLT_ORDER_COL, .batch = 1, .rows = rows, .cols = cols,
    .ld = ld,
  };
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  free(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t size) {
  if (!layout)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
  case CUBLASLT_MATRIX_LAYOUT_TYPE: return set_field(&layout->type, 4, buf, size);
  case CUBLASLT_MATRIX_LAYOUT_ORDER: return set_field(&layout->order, 4, buf, size);
  case CUBLASLT_MATRIX_LAYOUT_ROWS: return set_field(&layout->rows, 8, buf, size);
  case CUBLASLT_MATRIX_LAYOUT_COLS: return set_field(&layout->cols, 8, buf, size);
  case CUBLASLT_MATRIX_LAYOUT_LD: return set_field(&layout->ld, 8, buf, size);
  case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return set_field(&layout->batch, 4, buf, size);
  case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
    return set_field(&layout->stride, 8, buf, size);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

/* ------------------------------------------------------- the int8 matmul */

typedef struct LtOp {
  Op op;
  int m, n, k, batch, parts;
  const signed char *A, *B; /* A is k x m (transposed), B k x n */
  const int *C;
  int *D;
  long long lda, ldb, ldc, ldd, sa, sb, sc, sd;
  const int *alpha_at, *beta_at; /* device pointer mode: read when it runs */
  int alpha, beta;
} LtOp;

/* D's columns [lo, hi) of one batch entry by the plain loop: each sum is a
 * dot product of contiguous columns of A and B. */
static void plain_columns(const LtOp *g, const signed char *A, const signed char *B, int *D,
                          int lo, int hi) {
  for (int j = lo; j < hi; j++)
    for (int i = 0; i < g->m; i++) {
      const signed char *a = A + (long long)i * g->lda, *b = B + (long long)j * g->ldb;
      int sum = 0;
      for (int p = 0; p < g->k; p++)
        sum += a[p] * b[p]; /* |product| <= 2^14: 2^17 of them to overflow */
      D[i + (long long)j * g->ldd] = sum;
    }
}

/* D = alpha * D + beta * C over columns [lo, hi), wrapping as int32 does. */
static void scale_columns(const LtOp *g, const int *C, int *D, int lo, int hi) {
  for (int j = lo; j < hi; j++)
    for (int i = 0; i < g->m; i++) {
      unsigned v = (unsigned)g->alpha * (unsigned)D[i + (long long)j * g->ldd];
      if (g->beta)
        v += (unsigned)g->beta * (unsigned)C[i + (long long)j * g->ldc];
      D[i + (long long)j * g->ldd] = (int)v;
    }
}

static void lt_part(void *ctx, int part, int nparts) {
  (void)nparts;
  const LtOp *g = ctx;
  int b = part / g->parts, s = part % g->parts;
  int lo = (int)((long long)g->n * s / g->parts), hi = (int)((long long)g->n * (s + 1) / g->parts);
  if (lo >= hi)
    return;
  const signed char *A = g->A + b * g->sa, *B = g->B + b * g->sb + (long long)lo * g->ldb;
  const int *C = g->C + b * g->sc;
  int *D = g->D + b * g->sd;
  /* oneDNN reads C through D when they are one array: only with beta 0. */
  if (blas_has_gemm_s8() && g->beta == 0 && g->k > 0) {
    if (!blas_gemm_s8(true, false, g->m, hi - lo, g->k, A, (int)g->lda, B, (int)g->ldb,
                      D + (long long)lo * g->ldd, (int)g->ldd))
      rt_fail_async(g->op.api);
  } else {
    plain_columns(g, A, g->B + b * g->sb, D, lo, hi);
  }
  if (g->alpha != 1 || g->beta != 0)
    scale_columns(g, C, D, lo, hi);
}

static void run_lt(Op *op) {
  LtOp *g = (LtOp *)op;
  if (g->alpha_at) {
    g->alpha = *g->alpha_at;
    g->beta = *g->beta_at;
  }
  pool_run(lt_part, g, g->batch * g->parts);
}

static bool aligned4(const void *p) { return ((uintptr_t)p & 3) == 0; }

/* A layout's shape as op() reads it: rows x cols, or cols x rows when
 * transposed. */
static void op_shape(cublasLtMatrixLayout_t l, int32_t trans, uint64_t *rows, uint64_t *cols) {
  *rows = trans == CUBLAS_OP_N ? l->rows : l->cols;
  *cols = trans == CUBLAS_OP_N ? l->cols : l->rows;
}

/* INVALID_VALUE when the shapes of op(A), op(B), C and D disagree, a
 * leading dimension is shorter than a column, or batches differ. */
static cublasStatus_t check_shapes(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                   cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                   cublasLtMatrixLayout_t dd) {
  uint64_t m, k, k2, n;
  op_shape(a, d->transa, &m, &k);
  op_shape(b, d->transb, &k2, &n);
  if (k != k2 || c->rows != m || c->cols != n || dd->rows != m || dd->cols != n)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return CUBLAS_STATUS_INVALID_VALUE;
  cublasLtMatrixLayout_t all[4] = {a, b, c, dd};
  for (int i = 0; i < 4; i++)
    if (all[i]->ld < (int64_t)(all[i]->rows > 1 ? all[i]->rows : 1) || all[i]->batch < 1 ||
        all[i]->batch != dd->batch)
      return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

static bool is_integer(cublasLtMatmulDesc_t d) {
  return d->compute == CUBLAS_COMPUTE_32I || d->compute == CUBLAS_COMPUTE_32I_PEDANTIC;
}

/* NOT_SUPPORTED for what cuBLASLt's IMMA kernels with the regular order
 * do not take (the top of the file); the types come first. */
static cublasStatus_t check_imma(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                 cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                 cublasLtMatrixLayout_t dd, const void *const ptrs[4]) {
  if (!is_integer(d) || d->scale != CUDA_R_32I || a->type != CUDA_R_8I || b->type != CUDA_R_8I ||
      c->type != CUDA_R_32I || dd->type != CUDA_R_32I)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d->pointer_mode != CUBLASLT_POINTER_MODE_HOST &&
      d->pointer_mode != CUBLASLT_POINTER_MODE_DEVICE)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d->epilogue != CUBLASLT_EPILOGUE_DEFAULT || d->transc != CUBLAS_OP_N)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d->transa != CUBLAS_OP_T || d->transb != CUBLAS_OP_N)
    return CUBLAS_STATUS_NOT_SUPPORTED; /* "TN" only */
  cublasLtMatrixLayout_t all[4] = {a, b, c, dd};
  for (int i = 0; i < 4; i++)
    if (all[i]->order != CUBLASLT_ORDER_COL || all[i]->ld % 4 || !aligned4(ptrs[i]))
      return CUBLAS_STATUS_NOT_SUPPORTED;
  if (c->rows % 4 || a->rows % 4) /* m, and k (A's rows: it is transposed) */
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

static void span_layout(Op *op, const void *p, cublasLtMatrixLayout_t l, size_t elem, bool write) {
  long long dims[3] = {l->batch, (long long)l->cols, (long long)l->rows};
  long long strides[3] = {l->stride, l->ld, 1};
  op_span_strided(op, p, 3, dims, strides, elem, write);
}

static LtOp *lt_op(cublasLtMatmulDesc_t d, const void *A, cublasLtMatrixLayout_t a, const void *B,
                   cublasLtMatrixLayout_t b, const void *C, cublasLtMatrixLayout_t c, void *D,
                   cublasLtMatrixLayout_t dd) {
  LtOp *g = op_new(sizeof *g, run_lt, "cublasLtMatmul");
  if (!g)
    return NULL;
  *g = (LtOp){
    .op = g->op, .m = (int)c->rows, .n = (int)c->cols, .k = (int)a->rows, .batch = dd->batch,
    .A = A, .B = B, .C = C, .D = D, .lda = a->ld, .ldb = b->ld, .ldc = c->ld, .ldd = dd->ld,
    .sa = a->stride, .sb = b->stride, .sc = c->stride, .sd = dd->stride,
  };
  /* Blocks of at least 16 columns and about 2^20 multiply-adds each. */
  long long work = (long long)g->m * g->n * (g->k ? g->k : 1);
  int parts = pool_parts(work, 1 << 20);
  if (parts > g->n / 16)
    parts = g->n / 16;
  g->parts = parts < 1 || g->batch >= pool_threads() ? 1 : parts;
  return g;
}

/* ---------------------------------------------------- the float matmul */

/*
 * Float32, float16 and bfloat16 matrices, computed in float32 by the
 * runtime's float GEMM (the one cublasSgemm and cublasGemmEx run), then the
 * epilogue: D = act(alpha op(A) op(B) + beta C + bias), bias one element
 * per row of D (the same for every column and batch entry), act ReLU or
 * GELU, which cuBLASLt computes in its tanh approximation.
 *
 * Refused as the documentation's table of supported types refuses:
 * compute type 32F (or 32F_PEDANTIC; the FAST ones with float32 matrices
 * only) with a float32 scale type, else NOT_SUPPORTED; the runtime
 * computes the rows of the table whose four matrices share one type, and
 * refuses the mixed rows with NOT_SUPPORTED too. The bias is D's type
 * (BIAS_DATA_TYPE unset, -1, or D's type; another is NOT_SUPPORTED), and
 * a bias epilogue without a bias pointer is INVALID_VALUE. Other
 * epilogues (the AUX and gradient ones), other orders than column-major,
 * TRANSC, device pointer mode and pointers not aligned to their element
 * are NOT_SUPPORTED. C is read only when beta is not 0, and then must be
 * D itself with D's layout (NOT_SUPPORTED otherwise: a restriction of the
 * runtime's, not cuBLASLt's; opc emits no other).
 */
static int elem_bytes(uint32_t type) {
  return type == CUDA_R_32F ? 4 : type == CUDA_R_16F || type == CUDA_R_16BF ? 2 : 0;
}

static bool float_compute(cublasLtMatmulDesc_t d, uint32_t type) {
  switch (d->compute) {
  case CUBLAS_COMPUTE_32F:
  case CUBLAS_COMPUTE_32F_PEDANTIC: return true;
  case CUBLAS_COMPUTE_32F_FAST_16F:
  case CUBLAS_COMPUTE_32F_FAST_16BF:
  case CUBLAS_COMPUTE_32F_FAST_TF32: return type == CUDA_R_32F;
  default: return false;
  }
}

static bool has_bias(uint32_t epilogue) { return epilogue & CUBLASLT_EPILOGUE_BIAS; }

static bool known_epilogue(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_DEFAULT || e == CUBLASLT_EPILOGUE_RELU ||
         e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS;
}

static bool aligned(const void *p, int bytes) { return ((uintptr_t)p & (bytes - 1)) == 0; }

static bool same_layout(cublasLtMatrixLayout_t x, cublasLtMatrixLayout_t y) {
  return x->ld == y->ld && (x->batch == 1 || x->stride == y->stride);
}

static cublasStatus_t check_float(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                  cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                  cublasLtMatrixLayout_t dd, const void *const ptrs[4],
                                  float beta) {
  uint32_t t = dd->type;
  int size = elem_bytes(t);
  if (!size || a->type != t || b->type != t || c->type != t || d->scale != CUDA_R_32F ||
      !float_compute(d, t))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d->pointer_mode != CUBLASLT_POINTER_MODE_HOST || d->transc != CUBLAS_OP_N ||
      !known_epilogue(d->epilogue))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (has_bias(d->epilogue) && !d->bias)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (has_bias(d->epilogue) &&
      ((d->bias_type != -1 && (uint32_t)d->bias_type != t) || !aligned(d->bias, size)))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  cublasLtMatrixLayout_t all[4] = {a, b, c, dd};
  for (int i = 0; i < 4; i++)
    if (all[i]->order != CUBLASLT_ORDER_COL || !aligned(ptrs[i], size))
      return CUBLAS_STATUS_NOT_SUPPORTED;
  if (beta != 0 && (ptrs[2] != ptrs[3] || !same_layout(c, dd)))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

static bool is_trans(int32_t op) { return op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

static bool fits_int(const cublasLtMatrixLayout_t *all, int n) {
  for (int i = 0; i < n; i++)
    if (all[i]->ld > INT32_MAX)
      return false;
  return true;
}

static cublasStatus_t float_matmul(cublasLtMatmulDesc_t d, const void *alpha,
                                   const void *const ptrs[4], cublasLtMatrixLayout_t a,
                                   cublasLtMatrixLayout_t b, float beta,
                                   cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd,
                                   cudaStream_t stream) {
  int32_t ops[2] = {d->transa, d->transb};
  for (int i = 0; i < 2; i++)
    if (ops[i] != CUBLAS_OP_N && !is_trans(ops[i]))
      return CUBLAS_STATUS_INVALID_VALUE;
  cublasLtMatrixLayout_t all[4] = {a, b, c, dd};
  if (!fits_int(all, 4))
    return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t st = check_float(d, a, b, c, dd, ptrs, beta);
  if (st != CUBLAS_STATUS_SUCCESS)
    return st;
  if (!blas_ready()) /* the float GEMM's library, as cublasCreate loads it */
    return CUBLAS_STATUS_NOT_INITIALIZED;
  uint64_t m, k, n, k2;
  op_shape(a, d->transa, &m, &k);
  op_shape(b, d->transb, &k2, &n);
  if (m == 0 || n == 0)
    return CUBLAS_STATUS_SUCCESS;
  if (!ptrs[3] || (k && (!ptrs[0] || !ptrs[1])))
    return CUBLAS_STATUS_INVALID_VALUE;
  uint32_t e = d->epilogue;
  LtGemm g = {
    .ta = is_trans(d->transa), .tb = is_trans(d->transb), .m = (int)m, .n = (int)n, .k = (int)k,
    .batch = dd->batch, .A = ptrs[0], .B = ptrs[1], .D = (void *)ptrs[3],
    .bias = has_bias(e) ? d->bias : NULL, .lda = (int)a->ld, .ldb = (int)b->ld,
    .ldd = (int)dd->ld, .sa = a->stride, .sb = b->stride, .sd = dd->stride,
    .store = dd->type == CUDA_R_32F ? STORE_F32 : dd->type == CUDA_R_16F ? STORE_F16 : STORE_BF16,
    .alpha = *(const float *)alpha, .beta = beta,
    .act = e & CUBLASLT_EPILOGUE_RELU ? LT_ACT_RELU
           : e & CUBLASLT_EPILOGUE_GELU ? LT_ACT_GELU : LT_ACT_NONE,
  };
  Op *op = gemm_epilogue_op(&g, "cublasLtMatmul");
  if (!op)
    return CUBLAS_STATUS_ALLOC_FAILED;
  cudaError_t err = rt_error(rt_submit(stream, op));
  return err == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

/* ------------------------------------------------------------ the call */

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t a,
                              const void *B, cublasLtMatrixLayout_t b, const void *beta,
                              const void *C, cublasLtMatrixLayout_t c, void *D,
                              cublasLtMatrixLayout_t dd, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspace_bytes, cudaStream_t stream) {
  (void)algo;
  if (rt_enter())
    return CUBLAS_STATUS_EXECUTION_FAILED;
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!desc || !a || !b || !c || !dd || !alpha || !beta || (workspace_bytes && !workspace))
    return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t st = check_shapes(desc, a, b, c, dd);
  if (st != CUBLAS_STATUS_SUCCESS)
    return st;
  const void *ptrs[4] = {A, B, C, D};
  if (!is_integer(desc))
    return float_matmul(desc, alpha, ptrs, a, b, *(const float *)beta, c, dd, stream);
  if ((st = check_imma(desc, a, b, c, dd, ptrs)) != CUBLAS_STATUS_SUCCESS)
    return st;
  if (c->rows == 0 || c->cols == 0)
    return CUBLAS_STATUS_SUCCESS;
  if (!D || (!C && (desc->pointer_mode != CUBLASLT_POINTER_MODE_HOST || *(const int *)beta)) ||
      (a->rows && (!A || !B)))
    return CUBLAS_STATUS_INVALID_VALUE;
  LtOp *g = lt_op(desc, A, a, B, b, C, c, D, dd);
  if (!g)
    return CUBLAS_STATUS_ALLOC_FAILED;
  if (desc->pointer_mode == CUBLASLT_POINTER_MODE_DEVICE) {
    g->alpha_at = alpha;
    g->beta_at = beta;
  } else {
    g->alpha = *(const int *)alpha;
    g->beta = *(const int *)beta;
  }
  if (g->k > 0) {
    span_layout(&g->op, A, a, 1, false);
    span_layout(&g->op, B, b, 1, false);
  }
  if (desc->pointer_mode == CUBLASLT_POINTER_MODE_DEVICE || g->beta != 0)
    span_layout(&g->op, C, c, 4, false);
  span_layout(&g->op, D, dd, 4, true);
  cudaError_t err = rt_error(rt_submit(stream, &g->op));
  return err == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
