/*
 * test_lt_epilogue.c - cublasLtMatmul on float32, float16 and bfloat16
 * matrices with float32 compute, and its epilogues (bias, ReLU, GELU and
 * their combinations), against a direct column-major loop in double:
 * transposes, leading dimensions wider than the rows, a batch sharing one
 * bias, beta blending D in place. Then the calls cuBLASLt refuses, with
 * the status the runtime gives (runtime/README.md, "Float matmul with
 * epilogues"). The inputs are multiples of 1/8, exact in all three types,
 * so that only the sums and the epilogue round.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "testutil.h"

static cublasLtHandle_t lt;

typedef struct Call {
  cudaDataType type; /* of A, B, C, D and the bias */
  int m, n, k, lda, ldb, ldd, batch;
  int32_t transa, transb, order, compute, scale, bias_type;
  uint32_t epilogue;
  float alpha, beta;
  bool no_bias, separate_c; /* a NULL bias pointer; C a copy of D, not D */
  int bias_offset;          /* bytes added to the bias pointer */
} Call;

static Call typical(cudaDataType t, int m, int n, int k, uint32_t epilogue) {
  return (Call){.type = t, .m = m, .n = n, .k = k, .lda = m, .ldb = k, .ldd = m, .batch = 1,
                .transa = CUBLAS_OP_N, .transb = CUBLAS_OP_N, .order = CUBLASLT_ORDER_COL,
                .compute = CUBLAS_COMPUTE_32F, .scale = CUDA_R_32F, .bias_type = -1,
                .epilogue = epilogue, .alpha = 1};
}

static int size_of(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

/* v exactly representable in t (a multiple of 1/8 below 16 in magnitude). */
static void store(void *p, long long i, cudaDataType t, float v) {
  uint32_t bits;
  memcpy(&bits, &v, 4);
  if (t == CUDA_R_32F) {
    ((float *)p)[i] = v;
  } else if (t == CUDA_R_16BF) {
    ((uint16_t *)p)[i] = (uint16_t)(bits >> 16);
  } else {
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
    int e = (int)((bits >> 23) & 255) - 127 + 15;
    ((uint16_t *)p)[i] = v == 0 ? sign : (uint16_t)(sign | e << 10 | (bits >> 13 & 0x3ff));
  }
}

static double load(const void *p, long long i, cudaDataType t) {
  if (t == CUDA_R_32F)
    return ((const float *)p)[i];
  uint16_t h = ((const uint16_t *)p)[i];
  if (t == CUDA_R_16BF) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
  }
  int e = h >> 10 & 31, mant = h & 0x3ff;
  double mag = e ? ldexp(1024 + mant, e - 25) : ldexp(mant, -24);
  return h & 0x8000 ? -mag : mag;
}

static double epilogue_of(uint32_t e, double x, double bias) {
  if (e & CUBLASLT_EPILOGUE_BIAS)
    x += bias;
  if (e & CUBLASLT_EPILOGUE_RELU)
    return x < 0 ? 0 : x;
  if (e & CUBLASLT_EPILOGUE_GELU) /* the tanh approximation */
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  return x;
}

static cublasLtMatrixLayout_t layout(const Call *c, int rows, int cols, int ld, long long stride) {
  cublasLtMatrixLayout_t l;
  expect(cublasLtMatrixLayoutCreate(&l, c->type, (uint64_t)rows, (uint64_t)cols, ld) == 0,
         "layout");
  cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &c->order, sizeof c->order);
  cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &c->batch,
                                   sizeof c->batch);
  int64_t s = stride;
  cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, sizeof s);
  return l;
}

static cublasLtMatmulDesc_t descriptor(const Call *c, const void *bias) {
  cublasLtMatmulDesc_t d;
  expect(cublasLtMatmulDescCreate(&d, c->compute, c->scale) == 0, "desc");
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &c->transa, sizeof c->transa);
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &c->transb, sizeof c->transb);
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &c->epilogue,
                                 sizeof c->epilogue);
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &c->bias_type,
                                 sizeof c->bias_type);
  return d;
}

/* Relative error each type's rounding of D allows, past float's sums. */
static double tolerance(cudaDataType t) {
  return t == CUDA_R_32F ? 1e-5 : t == CUDA_R_16F ? 1.0 / 1024 : 1.0 / 128;
}

/* Checks D of batch entry b against the loop. */
static bool check(const Call *c, const void *A, const void *B, const void *bias, const double *C0,
                  const void *D, long long sa, long long sb, long long sd, int b) {
  for (int j = 0; j < c->n; j++)
    for (int i = 0; i < c->m; i++) {
      double sum = 0;
      for (int p = 0; p < c->k; p++) {
        long long ai = c->transa == CUBLAS_OP_N ? i + (long long)p * c->lda
                                                : p + (long long)i * c->lda;
        long long bi = c->transb == CUBLAS_OP_N ? p + (long long)j * c->ldb
                                                : j + (long long)p * c->ldb;
        sum += load(A, b * sa + ai, c->type) * load(B, b * sb + bi, c->type);
      }
      long long at = b * sd + i + (long long)j * c->ldd;
      double x = c->alpha * sum + c->beta * C0[at];
      double want = epilogue_of(c->epilogue, x, bias ? load(bias, i, c->type) : 0);
      double got = load(D, at, c->type);
      if (!(fabs(got - want) <= tolerance(c->type) * (1 + fabs(want)))) {
        fail("type %d epilogue %u %dx%dx%d batch %d: D[%d,%d] is %g, expected %g", (int)c->type,
             c->epilogue, c->m, c->n, c->k, b, i, j, got, want);
        return false;
      }
    }
  return true;
}

/* Runs the call on multiples of 1/8; checks D against the loop when
 * `verify`. Its status. */
static cublasStatus_t run(const Call *c, bool verify) {
  bool ta = c->transa != CUBLAS_OP_N, tb = c->transb != CUBLAS_OP_N;
  int arows = ta ? c->k : c->m, acols = ta ? c->m : c->k;
  int brows = tb ? c->n : c->k, bcols = tb ? c->k : c->n;
  long long sa = (long long)c->lda * acols, sb = (long long)c->ldb * bcols,
            sd = (long long)c->ldd * c->n;
  int e = size_of(c->type);
  char *A = malloc(sa * c->batch * e + 8), *B = malloc(sb * c->batch * e + 8);
  char *D = malloc(sd * c->batch * e + 8), *C = malloc(sd * c->batch * e + 8);
  char *bias = malloc((size_t)c->m * e + 8);
  double *C0 = malloc(sd * c->batch * sizeof *C0);
  for (long long i = 0; i < sa * c->batch; i++)
    store(A, i, c->type, (float)(int)(rnd() * 12) / 8);
  for (long long i = 0; i < sb * c->batch; i++)
    store(B, i, c->type, (float)(int)(rnd() * 12) / 8);
  for (long long i = 0; i < sd * c->batch; i++) {
    store(D, i, c->type, (float)(int)(rnd() * 40) / 8);
    C0[i] = load(D, i, c->type);
  }
  memcpy(C, D, sd * c->batch * e);
  for (int i = 0; i < c->m; i++)
    store(bias, i, c->type, (float)(int)(rnd() * 60) / 8);
  const void *bias_at = c->no_bias ? NULL : bias + c->bias_offset;
  cublasLtMatmulDesc_t d = descriptor(c, bias_at);
  cublasLtMatrixLayout_t la = layout(c, arows, acols, c->lda, sa);
  cublasLtMatrixLayout_t lb = layout(c, brows, bcols, c->ldb, sb);
  cublasLtMatrixLayout_t ld = layout(c, c->m, c->n, c->ldd, sd);
  cublasStatus_t st = cublasLtMatmul(lt, d, &c->alpha, A, la, B, lb, &c->beta,
                                     c->separate_c ? C : D, ld, D, ld, NULL, NULL, 0, 0);
  if (st == CUBLAS_STATUS_SUCCESS && cudaDeviceSynchronize() != cudaSuccess)
    fail("%dx%dx%d: the matmul failed when it ran", c->m, c->n, c->k);
  for (int b = 0; verify && st == 0 && b < c->batch; b++)
    if (!check(c, A, B, c->epilogue & CUBLASLT_EPILOGUE_BIAS ? bias : NULL, C0, D, sa, sb, sd, b))
      break;
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(d);
  free(A), free(B), free(C), free(D), free(bias), free(C0);
  return st;
}

static void values(void) {
  cudaDataType types[3] = {CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF};
  uint32_t epilogues[6] = {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_RELU,
                           CUBLASLT_EPILOGUE_BIAS,    CUBLASLT_EPILOGUE_RELU_BIAS,
                           CUBLASLT_EPILOGUE_GELU,    CUBLASLT_EPILOGUE_GELU_BIAS};
  for (int t = 0; t < 3; t++)
    for (int e = 0; e < 6; e++) {
      Call c = typical(types[t], 7, 5, 9, epilogues[e]);
      c.alpha = 0.25f; /* keeps the sums near GELU's bend */
      expect(run(&c, true) == 0, "a small product");
      /* Transposed operands, padded leading dimensions, a batch of 3
       * sharing the bias, and beta blending D in place. */
      c = typical(types[t], 20, 70, 33, epilogues[e]);
      c.transa = CUBLAS_OP_T, c.lda = 36, c.transb = CUBLAS_OP_T, c.ldb = 72, c.ldd = 24;
      c.batch = 3, c.alpha = 0.125f, c.beta = 0.5f;
      expect(run(&c, true) == 0, "transposed, padded, batched, beta 0.5");
    }
  /* Large enough to be split among the pool's threads, by rows. */
  Call c = typical(CUDA_R_32F, 300, 40, 200, CUBLASLT_EPILOGUE_GELU_BIAS);
  c.alpha = 0.0625f;
  expect(run(&c, true) == 0, "300 x 40 x 200");
  c = typical(CUDA_R_16F, 64, 300, 64, CUBLASLT_EPILOGUE_RELU_BIAS);
  expect(run(&c, true) == 0, "64 x 300 x 64 in float16");
}

static void expect_status(Call c, cublasStatus_t want, const char *what) {
  cublasStatus_t got = run(&c, false);
  if (got != want)
    fail("%s: status %d, expected %d", what, (int)got, (int)want);
}

static void refusals(void) {
  Call c = typical(CUDA_R_32F, 8, 8, 8, CUBLASLT_EPILOGUE_BIAS);
  c.no_bias = true;
  expect_status(c, CUBLAS_STATUS_INVALID_VALUE, "a bias epilogue without a bias");
  c = typical(CUDA_R_32F, 8, 8, 8, CUBLASLT_EPILOGUE_RELU);
  c.no_bias = true;
  expect_status(c, CUBLAS_STATUS_SUCCESS, "ReLU needs no bias");
  c = typical(CUDA_R_16F, 8, 8, 8, CUBLASLT_EPILOGUE_BIAS);
  c.bias_type = CUDA_R_32F;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "a float32 bias of float16 D");
  c.bias_type = CUDA_R_16F;
  expect_status(c, CUBLAS_STATUS_SUCCESS, "a float16 bias named");
  c = typical(CUDA_R_32F, 8, 8, 8, CUBLASLT_EPILOGUE_BIAS);
  c.bias_offset = 2;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "a bias 2 bytes off");
  c = typical(CUDA_R_32F, 8, 8, 8, 130); /* RELU_AUX: needs an aux output */
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "RELU_AUX");
  c = typical(CUDA_R_32F, 8, 8, 8, CUBLASLT_EPILOGUE_DEFAULT);
  c.scale = CUDA_R_16F;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "scale type 16F");
  c = typical(CUDA_R_16BF, 8, 8, 8, CUBLASLT_EPILOGUE_DEFAULT);
  c.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "FAST_TF32 on bfloat16");
  c = typical(CUDA_R_32F, 8, 8, 8, CUBLASLT_EPILOGUE_DEFAULT);
  c.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  expect_status(c, CUBLAS_STATUS_SUCCESS, "FAST_TF32 on float32");
  c.compute = CUBLAS_COMPUTE_16F;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "compute 16F on float32");
  c = typical(CUDA_R_32F, 8, 8, 8, CUBLASLT_EPILOGUE_DEFAULT);
  c.order = CUBLASLT_ORDER_ROW;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "row-major order");
  c = typical(CUDA_R_32F, 8, 8, 8, CUBLASLT_EPILOGUE_BIAS);
  c.beta = 1, c.separate_c = true;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "beta 1 with C apart from D");
  c.beta = 0;
  expect_status(c, CUBLAS_STATUS_SUCCESS, "beta 0 with C apart from D");
  c = typical(CUDA_R_32F, 8, 8, 8, CUBLASLT_EPILOGUE_DEFAULT);
  c.lda = 4;
  expect_status(c, CUBLAS_STATUS_INVALID_VALUE, "lda < m");
  c = typical(CUDA_R_32F, 8, 8, 8, CUBLASLT_EPILOGUE_DEFAULT);
  c.transa = 7;
  expect_status(c, CUBLAS_STATUS_INVALID_VALUE, "an operation that is none");
  /* An int8 matmul keeps its own rules: no epilogue. */
  cublasLtMatmulDesc_t d;
  cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32I, CUDA_R_32I);
  uint32_t relu = CUBLASLT_EPILOGUE_RELU;
  int32_t t = CUBLAS_OP_T;
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, sizeof relu);
  cublasLtMatrixLayout_t a, dl;
  cublasLtMatrixLayoutCreate(&a, CUDA_R_8I, 8, 8, 8);
  cublasLtMatrixLayoutCreate(&dl, CUDA_R_32I, 8, 8, 8);
  static int32_t out[64];
  static signed char bytes[64];
  int one = 1, zero = 0;
  expect(cublasLtMatmul(lt, d, &one, bytes, a, bytes, a, &zero, out, dl, out, dl, NULL, NULL, 0,
                        0) == CUBLAS_STATUS_NOT_SUPPORTED,
         "an int8 matmul with ReLU: NOT_SUPPORTED");
  void *p = NULL;
  expect(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p, 4) ==
             CUBLAS_STATUS_INVALID_VALUE,
         "a bias pointer of 4 bytes: INVALID_VALUE");
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatrixLayoutDestroy(dl);
  cublasLtMatmulDescDestroy(d);
}

int main(void) {
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "cublasLtCreate failed\n");
    return 1;
  }
  values();
  refusals();
  cublasLtDestroy(lt);
  return finish("test_lt_epilogue");
}
