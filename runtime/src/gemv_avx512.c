/*
 * gemv_avx512.c - a float matrix-vector product along AVX-512, for the
 * GEMMs of one column (cublas.c): a classifier at batch 1, y = W x with W's
 * rows contiguous. Such a product reads its matrix once, from memory when
 * it is larger than the caches, and is bound by how many reads are in
 * flight: four rows are read side by side, each row's sum in its own
 * register. On this project's machine (AMD EPYC, one thread, the matrix
 * evicted between calls) 1000 x 1280 took 135 us against oneDNN's sgemm's
 * 200, and no longer with the matrix in the caches
 * (bench/results/gemv-2026-12-07.md, bench/cpu/bench_gemv.c).
 *
 * The file is built for AVX-512 (meson.build); cublas.c calls it only when
 * the runtime runs the AVX-512 kernels (kernel_isa()).
 */
#include <stdbool.h>

#include "rt.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__AVX512F__)
#include <immintrin.h>

/* Row i of A (lda floats apart) times x, k long, in lanes; the last
   partial vector masked. */
static __m512 row_sums(const float *row, const float *x, int k, __m512 acc) {
  int p = 0;
  for (; p + 16 <= k; p += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(row + p), _mm512_loadu_ps(x + p), acc);
  if (p < k) {
    __mmask16 keep = (__mmask16)((1u << (k - p)) - 1);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(keep, row + p), _mm512_maskz_loadu_ps(keep, x + p),
                          acc);
  }
  return acc;
}

static float finish(float sum, float alpha, float beta, const float *y) {
  /* y is not read when beta is 0, as BLAS: a NaN there does not leak */
  return beta == 0.0f ? alpha * sum : alpha * sum + beta * *y;
}

bool gemv_rows_avx512(int m, int k, float alpha, const float *a, long long lda, const float *x,
                      float beta, float *y) {
  int i = 0;
  for (; i + 4 <= m; i += 4) {
    const float *r = a + (long long)i * lda;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int p = 0;
    for (; p + 16 <= k; p += 16) {
      __m512 xv = _mm512_loadu_ps(x + p);
      s0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + p), xv, s0);
      s1 = _mm512_fmadd_ps(_mm512_loadu_ps(r + lda + p), xv, s1);
      s2 = _mm512_fmadd_ps(_mm512_loadu_ps(r + 2 * lda + p), xv, s2);
      s3 = _mm512_fmadd_ps(_mm512_loadu_ps(r + 3 * lda + p), xv, s3);
    }
    if (p < k) {
      s0 = row_sums(r + p, x + p, k - p, s0);
      s1 = row_sums(r + lda + p, x + p, k - p, s1);
      s2 = row_sums(r + 2 * lda + p, x + p, k - p, s2);
      s3 = row_sums(r + 3 * lda + p, x + p, k - p, s3);
    }
    y[i] = finish(_mm512_reduce_add_ps(s0), alpha, beta, y + i);
    y[i + 1] = finish(_mm512_reduce_add_ps(s1), alpha, beta, y + i + 1);
    y[i + 2] = finish(_mm512_reduce_add_ps(s2), alpha, beta, y + i + 2);
    y[i + 3] = finish(_mm512_reduce_add_ps(s3), alpha, beta, y + i + 3);
  }
  for (; i < m; i++) {
    __m512 s = row_sums(a + (long long)i * lda, x, k, _mm512_setzero_ps());
    y[i] = finish(_mm512_reduce_add_ps(s), alpha, beta, y + i);
  }
  return true;
}

#else
bool gemv_rows_avx512(int m, int k, float alpha, const float *a, long long lda, const float *x,
                      float beta, float *y) {
  (void)m, (void)k, (void)alpha, (void)a, (void)lda, (void)x, (void)beta, (void)y;
  return false;
}
#endif
