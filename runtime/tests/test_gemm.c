/*
 * test_gemm.c - cublasSgemm and cublasSgemmStridedBatched against a direct
 * column-major triple loop, for every transpose combination, padded
 * leading dimensions and alpha/beta.
 */
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "testutil.h"

/* C = alpha * op(A) op(B) + beta * C, column-major, as cuBLAS defines it. */
static void ref_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc) {
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      double sum = 0;
      for (int p = 0; p < k; p++) {
        float a = ta ? A[i * lda + p] : A[p * lda + i];
        float b = tb ? B[p * ldb + j] : B[j * ldb + p];
        sum += (double)a * b;
      }
      float c = beta == 0 ? 0 : beta * C[j * ldc + i];
      C[j * ldc + i] = (float)(alpha * sum) + c;
    }
}

static cublasHandle_t blas;

static void one_case(bool ta, bool tb, int m, int n, int k, int pad, float alpha, float beta,
                     int batch) {
  int lda = (ta ? k : m) + pad, ldb = (tb ? n : k) + pad, ldc = m + pad;
  long long acols = ta ? m : k, bcols = tb ? k : n;
  long long sa = lda * acols + 3, sb = ldb * bcols + 5, sc = (long long)ldc * n + 7;
  long long an = sa * batch, bn = sb * batch, cn = sc * batch;
  float *A = rnd_array(an), *B = rnd_array(bn), *C = rnd_array(cn);
  float *want = malloc(cn * sizeof(float)), *got = malloc(cn * sizeof(float));
  memcpy(want, C, cn * sizeof(float));
  for (int b = 0; b < batch; b++)
    ref_gemm(ta, tb, m, n, k, alpha, A + b * sa, lda, B + b * sb, ldb, beta, want + b * sc, ldc);
  float *dA, *dB, *dC;
  cudaMalloc((void **)&dA, an * 4);
  cudaMalloc((void **)&dB, bn * 4);
  cudaMalloc((void **)&dC, cn * 4);
  cudaMemcpy(dA, A, an * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dB, B, bn * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dC, C, cn * 4, cudaMemcpyHostToDevice);
  cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t st;
  if (batch == 1)
    st = cublasSgemm(blas, oa, ob, m, n, k, &alpha, dA, lda, dB, ldb, &beta, dC, ldc);
  else
    st = cublasSgemmStridedBatched(blas, oa, ob, m, n, k, &alpha, dA, lda, sa, dB, ldb, sb, &beta,
                                   dC, ldc, sc, batch);
  char name[128];
  snprintf(name, sizeof name, "gemm %c%c m%d n%d k%d pad%d alpha %g beta %g batch %d", ta ? 'T' : 'N',
           tb ? 'T' : 'N', m, n, k, pad, alpha, beta, batch);
  if (st != CUBLAS_STATUS_SUCCESS)
    fail("%s: %s", name, cublasGetStatusString(st));
  cudaDeviceSynchronize(); /* the stream may be a non-blocking one */
  cudaMemcpy(got, dC, cn * 4, cudaMemcpyDeviceToHost);
  close_arrays(name, got, want, cn, 1e-4f);
  cudaFree(dA), cudaFree(dB), cudaFree(dC);
  free(A), free(B), free(C), free(want), free(got);
}

int main(void) {
  expect(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  expect(cublasSetMathMode(blas, CUBLAS_TF32_TENSOR_OP_MATH) == CUBLAS_STATUS_SUCCESS, "math mode");
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {3, 9, 1}, {33, 17, 12}, {64, 200, 48}, {300, 70, 90},
                     {5, 1, 40}, {1, 260, 30},
                     /* matrix-vector products large enough to be split between threads */
                     {1000, 1, 1280}, {1, 1000, 1280},
                     /* ... with rows past a multiple of 4 and a row's last vector partial */
                     {1003, 1, 1001}};
  for (int t = 0; t < 4; t++)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
      int m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
      bool ta = t & 1, tb = t & 2;
      cublasSetStream(blas, i % 2 ? s : NULL);
      one_case(ta, tb, m, n, k, 0, 1.0f, 0.0f, 1);
      one_case(ta, tb, m, n, k, 3, 0.75f, -0.5f, 1);
      one_case(ta, tb, m, n, k, 1, 1.0f, 1.0f, 3);
    }
  one_case(false, false, 4, 4, 0, 1, 1.0f, 2.0f, 1); /* k = 0: C = beta * C */
  one_case(true, false, 16, 24, 8, 0, 1.0f, 0.0f, 9);
  one_case(false, false, 16, 16, 16, 0, 1.0f, 0.0f, 32); /* attention heads: computed in cublas.c */
  one_case(false, true, 64, 4, 32, 2, 0.5f, 1.0f, 2);      /* the largest small product */
  /* Bad arguments are refused. */
  float one = 1, buf[64];
  expect(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, buf, 2, buf, 4, &one, buf, 4) ==
             CUBLAS_STATUS_INVALID_VALUE,
         "lda < m refused");
  expect(cublasSgemm(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, buf, 4, buf, 4, &one, buf, 4) ==
             CUBLAS_STATUS_NOT_INITIALIZED,
         "NULL handle refused");
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  cublasDestroy(blas);
  return finish("test_gemm");
}
