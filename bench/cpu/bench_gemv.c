/*
 * bench_gemv.c - the CPU runtime's matrix-vector product (gemv_avx512.c,
 * what a GEMM of one column runs on a CPU with AVX-512) against the GEMM
 * library's sgemm on the same product, one thread, in one run: the
 * evidence for that path. The shapes are classifiers at batch 1.
 *
 *   cc -O2 bench/cpu/bench_gemv.c -o bench_gemv -Iruntime/src -Iruntime/include \
 *      -Iruntime/kernels -Wl,--start-group build/runtime/libopcrt*.a -Wl,--end-group \
 *      -lm -lmvec -ldl -lpthread
 *   OPC_THREADS=1 ./bench_gemv
 *
 * Each product runs warm (the matrix left in the caches by the run
 * before) and cold (a 64 MiB sweep between runs evicts it, as a whole
 * network's activations and weights do between two runs of its
 * classifier); both alternately, the best of 20 runs each, twice.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rt.h"

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static void evict(float *junk, long floats) {
  for (long i = 0; i < floats; i += 16)
    junk[i] += 1.0f;
}

int main(void) {
  if (!blas_ready())
    return 1;
  const int shapes[][2] = {{1000, 1280}, {1280, 960}, {1000, 1024}, {1000, 2048}};
  long junk_floats = 16L << 20;
  float *junk = calloc((size_t)junk_floats, sizeof(float));
  printf("| m x k | matrix MiB | cache | sgemm us | gemv us | ratio | max difference |\n");
  printf("|---|---:|---|---:|---:|---:|---:|\n");
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int m = shapes[s][0], k = shapes[s][1];
    float *w = malloc(sizeof(float) * (size_t)m * (size_t)k), *x = malloc(sizeof(float) * (size_t)k);
    float *y_blas = malloc(sizeof(float) * (size_t)m), *y_gemv = malloc(sizeof(float) * (size_t)m);
    if (!junk || !w || !x || !y_blas || !y_gemv)
      return 1;
    for (long i = 0; i < (long)m * k; i++)
      w[i] = (float)(i % 97 - 48) * 0.001f;
    for (int p = 0; p < k; p++)
      x[p] = (float)(p % 13) * 0.1f;
    for (int cold = 0; cold < 2; cold++) {
      double blas_us = 1e30, gemv_us = 1e30;
      for (int run = 0; run < 40; run++) {
        if (cold)
          evict(junk, junk_floats);
        double start = now_us();
        /* column-major y = W^T-op: W's rows contiguous, as a classifier's */
        if (run % 2 == 0) {
          if (!blas_sgemm(false, true, false, m, 1, k, 1.0f, w, k, x, k, 0.0f, y_blas, m))
            return 1;
          double us = now_us() - start;
          blas_us = us < blas_us ? us : blas_us;
        } else {
          if (!gemv_rows_avx512(m, k, 1.0f, w, k, x, 0.0f, y_gemv)) {
            fprintf(stderr, "bench_gemv: the runtime was built without AVX-512\n");
            return 1;
          }
          double us = now_us() - start;
          gemv_us = us < gemv_us ? us : gemv_us;
        }
      }
      float worst = 0;
      for (int i = 0; i < m; i++) {
        float d = y_blas[i] > y_gemv[i] ? y_blas[i] - y_gemv[i] : y_gemv[i] - y_blas[i];
        worst = d > worst ? d : worst;
      }
      printf("| %d x %d | %.1f | %s | %.1f | %.1f | %.2f | %.2g |\n", m, k,
             (double)m * k * 4 / (1 << 20), cold ? "cold" : "warm", blas_us, gemv_us,
             gemv_us / blas_us, worst);
    }
    free(w), free(x), free(y_blas), free(y_gemv);
  }
  free(junk);
  return 0;
}
