/*
 * test_cublaslt.c - cublasLtMatmul's int8 case (CUBLAS_COMPUTE_32I) against
 * a direct column-major loop in int64, exactly: sums past float's 2^24,
 * alpha and beta, batches; and the calls cuBLASLt's IMMA kernels refuse
 * (NN, m or k not a multiple of 4, a leading dimension or pointer not a
 * multiple of 4 bytes, COL32 order, float types) with the status the
 * documentation gives. Run with oneDNN and, under OPC_BLAS=openblas, with
 * the plain loop.
 */
#include <stdint.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "testutil.h"

static cublasLtHandle_t lt;

typedef struct Call {
  int m, n, k, lda, ldb, ldc, batch;
  int alpha, beta;
  int32_t transa, transb, order, compute, scale, pointer_mode;
  cudaDataType atype, ctype;
  int offset_a; /* bytes added to A's pointer: 1 misaligns it */
} Call;

static Call typical(int m, int n, int k) {
  return (Call){.m = m, .n = n, .k = k, .lda = k, .ldb = k, .ldc = m, .batch = 1, .alpha = 1,
                .transa = CUBLAS_OP_T, .transb = CUBLAS_OP_N, .order = CUBLASLT_ORDER_COL,
                .compute = CUBLAS_COMPUTE_32I, .scale = CUDA_R_32I,
                .pointer_mode = CUBLASLT_POINTER_MODE_HOST, .atype = CUDA_R_8I,
                .ctype = CUDA_R_32I};
}

static cublasLtMatrixLayout_t layout(cudaDataType t, int rows, int cols, int ld, const Call *c,
                                     long long stride) {
  cublasLtMatrixLayout_t l;
  expect(cublasLtMatrixLayoutCreate(&l, t, (uint64_t)rows, (uint64_t)cols, ld) == 0, "layout");
  cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &c->order, sizeof c->order);
  cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &c->batch,
                                   sizeof c->batch);
  int64_t s = stride;
  cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, sizeof s);
  return l;
}

/* Runs the call on values `fill` makes (0: random, 1: all -128, for the
 * largest sums); checks D against the loop when `check`. Its status. */
static cublasStatus_t run(const Call *c, int fill, bool check) {
  int arows = c->transa == CUBLAS_OP_T ? c->k : c->m, acols = c->transa == CUBLAS_OP_T ? c->m : c->k;
  int brows = c->transb == CUBLAS_OP_N ? c->k : c->n, bcols = c->transb == CUBLAS_OP_N ? c->n : c->k;
  long long sa = (long long)c->lda * acols, sb = (long long)c->ldb * bcols,
            sc = (long long)c->ldc * c->n;
  signed char *A = malloc(sa * c->batch + 8), *B = malloc(sb * c->batch + 4);
  int *C = malloc((sc * c->batch + 1) * sizeof(int)), *D = malloc((sc * c->batch + 1) * sizeof(int));
  for (long long i = 0; i < sa * c->batch + 8; i++)
    A[i] = fill ? -128 : (signed char)(rnd() * 128);
  for (long long i = 0; i < sb * c->batch + 4; i++)
    B[i] = fill ? -128 : (signed char)(rnd() * 128);
  for (long long i = 0; i < sc * c->batch; i++)
    C[i] = (int)(rnd() * 100000);
  cublasLtMatmulDesc_t d;
  expect(cublasLtMatmulDescCreate(&d, c->compute, c->scale) == 0, "desc");
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &c->transa, sizeof c->transa);
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &c->transb, sizeof c->transb);
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_POINTER_MODE, &c->pointer_mode,
                                 sizeof c->pointer_mode);
  cublasLtMatrixLayout_t la = layout(c->atype, arows, acols, c->lda, c, sa);
  cublasLtMatrixLayout_t lb = layout(c->atype, brows, bcols, c->ldb, c, sb);
  cublasLtMatrixLayout_t lc = layout(c->ctype, c->m, c->n, c->ldc, c, sc);
  cublasStatus_t st = cublasLtMatmul(lt, d, &c->alpha, A + c->offset_a, la, B, lb, &c->beta, C, lc,
                                     D, lc, NULL, NULL, 0, 0);
  if (st == CUBLAS_STATUS_SUCCESS && cudaDeviceSynchronize() != cudaSuccess)
    fail("%dx%dx%d: the matmul failed when it ran", c->m, c->n, c->k);
  for (int b = 0; check && st == 0 && b < c->batch; b++)
    for (int j = 0; j < c->n; j++)
      for (int i = 0; i < c->m; i++) {
        int64_t sum = 0;
        for (int p = 0; p < c->k; p++)
          sum += (int64_t)A[b * sa + p + (long long)i * c->lda] * B[b * sb + p + (long long)j * c->ldb];
        long long at = b * sc + i + (long long)j * c->ldc;
        int want = (int)(uint32_t)((uint32_t)c->alpha * (uint32_t)sum +
                                   (uint32_t)c->beta * (uint32_t)C[at]);
        if (D[at] != want) {
          fail("%dx%dx%d batch %d: D[%d,%d] is %d, expected %d", c->m, c->n, c->k, b, i, j, D[at],
               want);
          i = c->m, j = c->n, b = c->batch;
        }
      }
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(d);
  free(A), free(B), free(C), free(D);
  return st;
}

static void expect_status(Call c, cublasStatus_t want, const char *what) {
  cublasStatus_t got = run(&c, 0, false);
  if (got != want)
    fail("%s: status %d, expected %d", what, (int)got, (int)want);
}

static void refusals(void) {
  Call c = typical(8, 8, 8);
  c.transa = CUBLAS_OP_N, c.lda = 8;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "NN");
  c = typical(6, 8, 8), c.ldc = 8;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "m = 6");
  c = typical(8, 8, 6), c.lda = c.ldb = 8;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "k = 6");
  c = typical(8, 5, 8); /* n needs no multiple of 4 */
  expect_status(c, CUBLAS_STATUS_SUCCESS, "n = 5");
  c = typical(8, 8, 8), c.ldb = 10;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "ldb = 10");
  c = typical(8, 8, 8), c.offset_a = 2;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "A 2 bytes off");
  c = typical(8, 8, 8), c.order = CUBLASLT_ORDER_COL32;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "COL32");
  c = typical(8, 8, 8), c.compute = CUBLAS_COMPUTE_32F, c.scale = CUDA_R_32F;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "32F");
  c = typical(8, 8, 8), c.ctype = CUDA_R_8I;
  expect_status(c, CUBLAS_STATUS_NOT_SUPPORTED, "C int8 with scale 32I");
  c = typical(8, 8, 8), c.lda = 4;
  expect_status(c, CUBLAS_STATUS_INVALID_VALUE, "lda < k");
  c = typical(8, 8, 8);
  expect(cublasLtMatmul(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                        NULL, NULL, 0, 0) == CUBLAS_STATUS_NOT_INITIALIZED,
         "a NULL handle: NOT_INITIALIZED");
  cublasLtMatmulDesc_t d;
  cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32I, CUDA_R_32I);
  int64_t wide = 1;
  expect(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof wide) ==
             CUBLAS_STATUS_INVALID_VALUE,
         "an attribute of the wrong size: INVALID_VALUE");
  cublasLtMatmulDescDestroy(d);
}

static void sums(void) {
  int shapes[][3] = {{4, 1, 4}, {8, 5, 12}, {64, 100, 96}, {256, 384, 64}, {36, 1000, 1024}};
  for (int s = 0; s < 5; s++) {
    Call c = typical(shapes[s][0], shapes[s][1], shapes[s][2]);
    expect(run(&c, 0, true) == 0, "random int8 sums");
  }
  /* 2048 products of -128 * -128: 2^25, past float's exact integers, odd
   * once C is added (beta 1); alpha 3 wraps nothing yet. */
  Call c = typical(16, 64, 2048);
  expect(run(&c, 1, true) == 0, "sums of 2^25");
  c.beta = 1, c.alpha = 3;
  expect(run(&c, 1, true) == 0, "alpha 3, beta 1");
  c = typical(12, 20, 40);
  c.lda = 44, c.ldb = 48, c.ldc = 16, c.batch = 3;
  expect(run(&c, 0, true) == 0, "padded, batch 3");
  c.pointer_mode = CUBLASLT_POINTER_MODE_DEVICE, c.beta = -2;
  expect(run(&c, 0, true) == 0, "device pointer mode");
}

int main(void) {
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "cublasLtCreate failed\n");
    return 1;
  }
  refusals();
  sums();
  cublasLtDestroy(lt);
  return finish("test_cublaslt");
}
