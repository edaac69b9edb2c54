/*
 * ops_blas.c - Gemm and MatMul as cuBLAS calls.
 *
 * ONNX matrices are row-major and cuBLAS is column-major. A row-major M x N
 * matrix is the column-major N x M matrix of its transpose, so Y = A B is
 * printed as the column-major product Y^T = B^T A^T: the operands swap, the
 * transpose flags do not, and each leading dimension is a row stride.
 *
 * A Gemm whose C is one bias per output column (Y^T's rows), or whose
 * fused activation is ReLU, is one cublasLtMatmul with an epilogue, where
 * it took the bias spread over Y first and an activation after.
 */
#include <string.h>

#include "emit.h"

/* A matrix operand: the last two dims, with the batch folded in front. */
typedef struct Matrix {
  int64_t rows, cols;
  int64_t ld;          /* elements between rows */
  int64_t batch;       /* product of the batch dims */
  int64_t batch_stride;
} Matrix;

/* False when the rows are not unit-stride or the batch dims do not fold. */
static bool as_matrix(const Tensor *t, bool vector_is_row, Matrix *m) {
  memset(m, 0, sizeof *m);
  int r = t->rank;
  if (r == 0)
    return false;
  if (r == 1) {
    if (t->dims[0] > 1 && t->strides[0] != 1)
      return false;
    m->rows = vector_is_row ? 1 : t->dims[0];
    m->cols = vector_is_row ? t->dims[0] : 1;
    m->ld = m->cols;
    m->batch = 1;
    return true;
  }
  m->rows = t->dims[r - 2];
  m->cols = t->dims[r - 1];
  if (m->cols > 1 && t->strides[r - 1] != 1)
    return false;
  m->ld = m->rows > 1 ? t->strides[r - 2] : m->cols;
  if (m->ld < m->cols)
    return false;
  m->batch = 1;
  for (int i = 0; i < r - 2; i++)
    m->batch *= t->dims[i];
  if (m->batch > 1) {
    /* The batch dims must be one uniform stride apart. */
    int last = -1;
    for (int i = 0; i < r - 2; i++)
      if (t->dims[i] > 1)
        last = i;
    m->batch_stride = t->strides[last];
    int64_t expect = t->strides[last];
    for (int i = last; i >= 0; i--) {
      if (t->dims[i] > 1 && t->strides[i] != expect)
        return false;
      expect *= t->dims[i];
    }
  }
  return true;
}

/* --------------------------------------------------------------- Gemm */

typedef struct GemmPlan {
  bool ta, tb;
  int64_t m, n, k;
  Matrix a, b, y;
  float alpha, beta;
  const Tensor *c;
  CopyPlan copy_c;   /* C already has Y's shape */
  const char *cd, *yd;
  ActPlan act;
  const char *epilogue; /* cuBLASLt's, or NULL: cuBLAS */
  bool bias;            /* C enters through the epilogue */
  bool act_after;       /* the fused activation runs after cuBLASLt's call */
  const char *lt, *desc, *la, *lb, *ld; /* cuBLASLt's handle, descriptor, layouts */
} GemmPlan;

static bool plan_gemm(const Node *n, GemmPlan *p) {
  memset(p, 0, sizeof *p);
  const Tensor *a = n->in[0], *b = n->in[1], *y = n->out[0];
  if (a->rank != 2 || b->rank != 2 || y->rank != 2)
    return false;
  if (!as_matrix(a, true, &p->a) || !as_matrix(b, true, &p->b) || !as_matrix(y, true, &p->y))
    return false;
  p->ta = n->p.gemm.trans_a;
  p->tb = n->p.gemm.trans_b;
  p->alpha = n->p.gemm.alpha;
  p->beta = n->p.gemm.beta;
  p->m = y->dims[0];
  p->n = y->dims[1];
  p->k = p->ta ? a->dims[0] : a->dims[1];
  p->c = node_input(n, 2);
  if (p->beta == 0)
    p->c = NULL;
  if (p->c && tensor_same_shape(p->c, y)) {
    p->copy_c = plan_copy(2, y->dims, y->strides, p->c->strides);
    if (p->copy_c.kind == COPY_IMPOSSIBLE)
      return false;
    if (p->copy_c.kind == COPY_CUDNN && node_in_half(n)) /* a float32 transform */
      p->copy_c.kind = COPY_KERNEL;
  } else if (p->c) {
    int64_t dims[2] = {1, 1};
    for (int i = 0; i < p->c->rank; i++)
      dims[2 - p->c->rank + i] = p->c->dims[i];
    if (p->c->rank > 2 || (dims[0] != 1 && dims[0] != p->m) || (dims[1] != 1 && dims[1] != p->n))
      return false;
  }
  return act_supported(n);
}

/* C as cuBLASLt's bias: one value per column of Y, packed, of Y's type,
 * added once (beta 1). */
static bool c_is_bias(const GemmPlan *p, const Node *n) {
  const Tensor *c = p->c;
  if (!c || p->beta != 1 || c->dtype != n->out[0]->dtype || c->rank < 1 || c->rank > 2)
    return false;
  if (c->rank == 2 && c->dims[0] != 1)
    return false;
  int64_t cols = c->dims[c->rank - 1];
  return cols == p->n && (cols == 1 || c->strides[c->rank - 1] == 1);
}

/* Chooses cuBLASLt for a Gemm its epilogue saves a launch on: a bias, or
 * ReLU (with C, if not a bias, spread over Y first as for cuBLAS); another
 * fused activation runs after the call. Only where the int8 path takes
 * cuBLASLt too: one GPU, not CPU code. */
static void plan_epilogue(Emitter *e, const Node *n, GemmPlan *p) {
  if (emit_multi_gpu(e) || node_is_cpu_code(e, n))
    return;
  bool relu = n->act == OPC_ACT_RELU;
  p->bias = c_is_bias(p, n);
  p->act_after = p->bias && n->act != OPC_ACT_NONE && !relu;
  if (p->bias)
    p->epilogue = relu ? "CUBLASLT_EPILOGUE_RELU_BIAS" : "CUBLASLT_EPILOGUE_BIAS";
  else if (relu)
    p->epilogue = "CUBLASLT_EPILOGUE_RELU";
}

/*
 * One column-major product C = alpha op(A) op(B) + beta C, or a strided
 * batch of them, in cuBLAS's terms. float32 data calls cublasSgemm; 16-bit
 * data calls cublasGemmEx with float32 accumulation (CUBLAS_COMPUTE_32F,
 * whose alpha and beta are floats), where cuBLAS picks tensor-core kernels.
 */
typedef struct Product {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  const char *a, *b, *c;
  int64_t lda, ldb, ldc;
  int64_t stride_a, stride_b, stride_c, batch; /* batch 1: one product */
} Product;

static const char *transpose_name(bool t) { return t ? "CUBLAS_OP_T" : "CUBLAS_OP_N"; }

static void emit_product(Emitter *e, const Node *n, const Product *g) {
  const char *h = node_cublas(e, n), *alpha = emit_scalar(e, g->alpha), *beta = emit_scalar(e, g->beta);
  const char *ops = emit_str(e, "%s, %s, %s, %lld, %lld, %lld", h, transpose_name(g->ta), transpose_name(g->tb),
                             (long long)g->m, (long long)g->n, (long long)g->k);
  if (!node_in_half(n) && g->batch == 1) {
    emit_call(e, LIB_CUBLAS, n, "cublasSgemm(%s, %s, %s, %lld, %s, %lld, %s, %s, %lld)", ops, alpha,
              g->a, (long long)g->lda, g->b, (long long)g->ldb, beta, g->c, (long long)g->ldc);
    return;
  }
  if (!node_in_half(n)) {
    emit_call(e, LIB_CUBLAS, n,
              "cublasSgemmStridedBatched(%s, %s, %s, %lld, %lld, %s, %lld, %lld, %s, %s, %lld, %lld, %lld)",
              ops, alpha, g->a, (long long)g->lda, (long long)g->stride_a, g->b, (long long)g->ldb,
              (long long)g->stride_b, beta, g->c, (long long)g->ldc, (long long)g->stride_c,
              (long long)g->batch);
    return;
  }
  const char *type = blas_data_type(n);
  if (g->batch == 1) {
    emit_call(e, LIB_CUBLAS, n,
              "cublasGemmEx(%s, %s, %s, %s, %lld, %s, %s, %lld, %s, %s, %s, %lld, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)",
              ops, alpha, g->a, type, (long long)g->lda, g->b, type, (long long)g->ldb, beta, g->c,
              type, (long long)g->ldc);
    return;
  }
  emit_call(e, LIB_CUBLAS, n,
            "cublasGemmStridedBatchedEx(%s, %s, %s, %s, %lld, %lld, %s, %s, %lld, %lld, %s, %s, %s, %lld, %lld, %lld, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)",
            ops, alpha, g->a, type, (long long)g->lda, (long long)g->stride_a, g->b, type,
            (long long)g->ldb, (long long)g->stride_b, beta, g->c, type, (long long)g->ldc,
            (long long)g->stride_c, (long long)g->batch);
}

static bool gemm_supports(Emitter *e, const Node *n) {
  (void)e;
  GemmPlan p;
  return plan_gemm(n, &p);
}

/* ------------------------------------------------ Gemm on cuBLASLt */

static const char *lt_field(Emitter *e, const Node *n, const char *type, const char *what) {
  const char *f = emit_unique(e, emit_str(e, "%s_%s", node_id(e, n), what));
  emit_to(e, SEC_FIELDS, "%s %s;", type, f);
  return emit_str(e, "c->%s", f);
}

static const char *lt_layout(Emitter *e, const Node *n, const char *what, bool trans,
                             int64_t rows, int64_t cols, int64_t ld) {
  const char *l = lt_field(e, n, "cublasLtMatrixLayout_t", what);
  emit_call(e, LIB_CUBLAS, n, "cublasLtMatrixLayoutCreate(&%s, %s, %lld, %lld, %lld)", l,
            blas_data_type(n), (long long)(trans ? cols : rows), (long long)(trans ? rows : cols),
            (long long)ld);
  emit_to(e, SEC_TEARDOWN, "cublasLtMatrixLayoutDestroy(%s);", l);
  return l;
}

static void lt_attribute(Emitter *e, const Node *n, const char *desc, const char *attr,
                         const char *type, const char *value) {
  emit_call(e, LIB_CUBLAS, n, "cublasLtMatmulDescSetAttribute(%s, %s, &(%s){%s}, sizeof(%s))",
            desc, attr, type, value, type);
}

/* create(): the handle, the descriptor with its transposes, epilogue and
 * bias (buffers are bound before the nodes' setup), and the layouts of
 * Y^T = op(B^T) op(A^T) (the top of the file), float32 compute for every
 * type, as cublasGemmEx's; destroy() frees them. */
static void gemm_lt_setup(Emitter *e, const Node *n, GemmPlan *p) {
  p->lt = lt_field(e, n, "cublasLtHandle_t", "lt");
  p->desc = lt_field(e, n, "cublasLtMatmulDesc_t", "lt_desc");
  emit(e, "/* Y^T = op(B^T) op(A^T) on cuBLASLt, epilogue %s */",
       p->epilogue + strlen("CUBLASLT_EPILOGUE_"));
  emit_call(e, LIB_CUBLAS, n, "cublasLtCreate(&%s)", p->lt);
  emit_call(e, LIB_CUBLAS, n, "cublasLtMatmulDescCreate(&%s, CUBLAS_COMPUTE_32F, CUDA_R_32F)",
            p->desc);
  lt_attribute(e, n, p->desc, "CUBLASLT_MATMUL_DESC_TRANSA", "int32_t", transpose_name(p->tb));
  lt_attribute(e, n, p->desc, "CUBLASLT_MATMUL_DESC_TRANSB", "int32_t", transpose_name(p->ta));
  lt_attribute(e, n, p->desc, "CUBLASLT_MATMUL_DESC_EPILOGUE", "uint32_t", p->epilogue);
  if (p->bias)
    lt_attribute(e, n, p->desc, "CUBLASLT_MATMUL_DESC_BIAS_POINTER", "const void *",
                 buf(e, p->c));
  /* op(B^T) is N x K, op(A^T) K x M, Y^T N x M. */
  p->la = lt_layout(e, n, "lt_a", p->tb, p->n, p->k, p->b.ld);
  p->lb = lt_layout(e, n, "lt_b", p->ta, p->k, p->m, p->a.ld);
  p->ld = lt_layout(e, n, "lt_y", false, p->n, p->m, p->y.ld);
  emit_to(e, SEC_TEARDOWN, "cublasLtMatmulDescDestroy(%s);", p->desc);
  emit_to(e, SEC_TEARDOWN, "cublasLtDestroy(%s);", p->lt);
}

/* The call, with beta * C spread over Y first unless C is the bias. */
static void gemm_lt_run(Emitter *e, const Node *n, const GemmPlan *p, const char *y) {
  float beta = p->c && !p->bias ? p->beta : 0;
  emit_call(e, LIB_CUBLAS, n,
            "cublasLtMatmul(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, NULL, NULL, 0, %s)",
            p->lt, p->desc, emit_scalar(e, p->alpha), buf(e, n->in[1]), p->la, buf(e, n->in[0]),
            p->lb, emit_scalar(e, beta), y, p->ld, y, p->ld, node_stream(e, n));
}

static void gemm_setup(Emitter *e, Node *n) {
  GemmPlan *p = node_data(e, n, sizeof(GemmPlan));
  plan_gemm(n, p);
  plan_epilogue(e, n, p);
  const Tensor *y = n->out[0];
  bool broadcast_c = p->c && !p->bias && !tensor_same_shape(p->c, y);
  bool act_apart = n->act != OPC_ACT_NONE && (!p->epilogue || p->act_after);
  if (broadcast_c || act_apart)
    p->yd = emit_tensor_desc_of(e, n, "y", y, 4, true);
  if (broadcast_c)
    p->cd = emit_tensor_desc_of(e, n, "c", p->c, 4, true);
  if (p->c && !p->bias && !broadcast_c)
    copy_setup(e, n, "c", &p->copy_c);
  if (p->epilogue)
    gemm_lt_setup(e, n, p);
  if (!p->epilogue || p->act_after)
    act_setup(e, n, &p->act);
}

static void gemm_run(Emitter *e, Node *n) {
  GemmPlan *p = node_data(e, n, sizeof(GemmPlan));
  const char *y = buf(e, n->out[0]);
  float beta = 0;
  if (p->c && !p->bias) {
    /* beta * C enters through cuBLAS's own beta, after C is spread over Y. */
    if (p->cd)
      emit_call(e, LIB_CUDNN, n, "cudnnAddTensor(%s, %s, %s, %s, %s, %s, %s)", node_cudnn(e, n),
                emit_scalar(e, 1), p->cd, buf(e, p->c), emit_scalar(e, 0), p->yd, y);
    else
      copy_run(e, n, &p->copy_c, y, buf(e, p->c));
    beta = p->beta;
  }
  if (p->epilogue) {
    gemm_lt_run(e, n, p, y);
    if (p->act_after)
      act_run(e, n, &p->act, p->yd, y);
    return;
  }
  Product g = {.ta = p->tb, .tb = p->ta, .m = p->n, .n = p->m, .k = p->k, .alpha = p->alpha,
               .beta = beta, .a = buf(e, n->in[1]), .lda = p->b.ld, .b = buf(e, n->in[0]),
               .ldb = p->a.ld, .c = y, .ldc = p->y.ld, .batch = 1};
  emit_product(e, n, &g);
  act_run(e, n, &p->act, p->yd, y);
}

const OpEmitter blas_gemm = {
    .setup = gemm_setup, .run = gemm_run, .supports = gemm_supports, .half = true};

/* ------------------------------------------------------------- MatMul */

static bool plan_matmul(const Node *n, Matrix *a, Matrix *b, Matrix *y) {
  const Tensor *ta = n->in[0], *tb = n->in[1], *ty = n->out[0];
  if (!as_matrix(ta, true, a) || !as_matrix(tb, false, b))
    return false;
  /* Y's matrix is M x N whatever the vector cases dropped from its shape. */
  if (ty->rank >= 2 && ta->rank >= 2 && tb->rank >= 2) {
    if (!as_matrix(ty, true, y))
      return false;
  } else {
    if (!buffer_is_contiguous(ty))
      return false;
    memset(y, 0, sizeof *y);
    y->rows = a->rows;
    y->cols = b->cols;
    y->ld = y->cols;
    y->batch = 1;
    for (int i = 0; i < ty->rank; i++)
      y->batch *= ty->dims[i];
    y->batch /= y->rows * y->cols > 0 ? y->rows * y->cols : 1;
    y->batch_stride = y->rows * y->cols;
  }
  if (a->cols != b->rows || y->rows != a->rows || y->cols != b->cols)
    return false;
  /* One strided-batched call: each operand batched like Y, or not at all. */
  return (a->batch == y->batch || a->batch == 1) && (b->batch == y->batch || b->batch == 1);
}

/* The product of a planned MatMul, in cuBLAS's terms (the top of the file). */
static Product matmul_product(Emitter *e, const Node *n, const Matrix *a, const Matrix *b,
                              const Matrix *y) {
  /* A batch of A against one B is a single taller product. */
  bool fold = y->batch > 1 && b->batch == 1 && a->batch == y->batch &&
              a->batch_stride == a->rows * a->ld && y->batch_stride == y->rows * y->ld &&
              a->ld == a->cols && y->ld == y->cols;
  Product g = {.m = y->cols, .n = y->rows, .k = a->cols, .alpha = 1, .beta = 0,
               .a = buf(e, n->in[1]), .lda = b->ld, .b = buf(e, n->in[0]), .ldb = a->ld,
               .c = buf(e, n->out[0]), .ldc = y->ld, .batch = 1};
  if (y->batch == 1 || fold) {
    g.n = y->rows * y->batch;
  } else {
    g.stride_a = b->batch > 1 ? b->batch_stride : 0;
    g.stride_b = a->batch > 1 ? a->batch_stride : 0;
    g.stride_c = y->batch_stride;
    g.batch = y->batch;
  }
  return g;
}

/*
 * A MatMul with a fused bias (fuse-bias: one value per column of Y, so per
 * row of Y^T) is one cublasLtMatmul with the BIAS epilogue; where cuBLASLt
 * is not taken (several GPUs, CPU code), the product then cudnnAddTensor.
 */
typedef struct MatmulPlan {
  Product g;
  const Tensor *bias;
  bool lt;
  const char *handle, *desc, *la, *lb, *ly; /* cuBLASLt's */
  const char *bd, *yd;                      /* cudnnAddTensor's */
} MatmulPlan;

static bool lt_taken(Emitter *e, const Node *n) {
  return !emit_multi_gpu(e) && !node_is_cpu_code(e, n);
}

/* A layout of the batch: `batch` matrices `stride` elements apart (0: one
   shared). */
static const char *lt_batched(Emitter *e, const Node *n, const char *what, int64_t rows,
                              int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  const char *l = lt_layout(e, n, what, false, rows, cols, ld);
  if (batch > 1) {
    emit_call(e, LIB_CUBLAS, n,
              "cublasLtMatrixLayoutSetAttribute(%s, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, "
              "&(int32_t){%lld}, sizeof(int32_t))",
              l, (long long)batch);
    emit_call(e, LIB_CUBLAS, n,
              "cublasLtMatrixLayoutSetAttribute(%s, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, "
              "&(int64_t){%lld}, sizeof(int64_t))",
              l, (long long)stride);
  }
  return l;
}

static void matmul_lt_setup(Emitter *e, const Node *n, MatmulPlan *p) {
  const Product *g = &p->g;
  p->handle = lt_field(e, n, "cublasLtHandle_t", "lt");
  p->desc = lt_field(e, n, "cublasLtMatmulDesc_t", "lt_desc");
  emit(e, "/* Y^T = B^T A^T + bias on cuBLASLt, the bias in its epilogue */");
  emit_call(e, LIB_CUBLAS, n, "cublasLtCreate(&%s)", p->handle);
  emit_call(e, LIB_CUBLAS, n, "cublasLtMatmulDescCreate(&%s, CUBLAS_COMPUTE_32F, CUDA_R_32F)",
            p->desc);
  lt_attribute(e, n, p->desc, "CUBLASLT_MATMUL_DESC_EPILOGUE", "uint32_t",
               "CUBLASLT_EPILOGUE_BIAS");
  lt_attribute(e, n, p->desc, "CUBLASLT_MATMUL_DESC_BIAS_POINTER", "const void *",
               buf(e, p->bias));
  p->la = lt_batched(e, n, "lt_a", g->m, g->k, g->lda, g->batch, g->stride_a);
  p->lb = lt_batched(e, n, "lt_b", g->k, g->n, g->ldb, g->batch, g->stride_b);
  p->ly = lt_batched(e, n, "lt_y", g->m, g->n, g->ldc, g->batch, g->stride_c);
  emit_to(e, SEC_TEARDOWN, "cublasLtMatmulDescDestroy(%s);", p->desc);
  emit_to(e, SEC_TEARDOWN, "cublasLtDestroy(%s);", p->handle);
}

static void matmul_setup(Emitter *e, Node *n) {
  MatmulPlan *p = node_data(e, n, sizeof(MatmulPlan));
  Matrix a, b, y;
  plan_matmul(n, &a, &b, &y);
  p->g = matmul_product(e, n, &a, &b, &y);
  p->bias = node_input(n, 2);
  if (!p->bias)
    return;
  p->lt = lt_taken(e, n);
  if (p->lt) {
    matmul_lt_setup(e, n, p);
    return;
  }
  p->bd = emit_tensor_desc_of(e, n, "bias", p->bias, 4, true);
  p->yd = emit_tensor_desc_of(e, n, "y", n->out[0], 4, true);
}

static bool matmul_supports(Emitter *e, const Node *n) {
  Matrix a, b, y;
  if (!plan_matmul(n, &a, &b, &y))
    return false;
  /* cudnnAddTensor takes the bias over Y up to rank 4 only. */
  return !node_input(n, 2) || lt_taken(e, n) || n->out[0]->rank <= 4;
}

static void matmul_run(Emitter *e, Node *n) {
  MatmulPlan *p = node_data(e, n, sizeof(MatmulPlan));
  const Product *g = &p->g;
  if (p->lt) {
    emit_call(e, LIB_CUBLAS, n,
              "cublasLtMatmul(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, NULL, NULL, 0, %s)",
              p->handle, p->desc, emit_scalar(e, 1), g->a, p->la, g->b, p->lb, emit_scalar(e, 0),
              g->c, p->ly, g->c, p->ly, node_stream(e, n));
    return;
  }
  emit_product(e, n, g);
  if (p->bias)
    emit_call(e, LIB_CUDNN, n, "cudnnAddTensor(%s, %s, %s, %s, %s, %s, %s)", node_cudnn(e, n),
              emit_scalar(e, 1), p->bd, buf(e, p->bias), emit_scalar(e, 1), p->yd, g->c);
}

const OpEmitter blas_matmul = {
    .setup = matmul_setup, .run = matmul_run, .supports = matmul_supports, .half = true};
