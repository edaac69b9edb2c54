/*
 * bench_gemm.c - oneDNN's sgemm against OpenBLAS's on the GEMM shapes of
 * opc's CPU convolutions, one thread, in one run: the evidence for the
 * runtime's choice of GEMM library (runtime/src/blas.c).
 *
 *   cc -O2 bench/cpu/bench_gemm.c -o bench_gemm -lopenblas -l:libdnnl.so.2
 *   OPENBLAS_CORETYPE=Cooperlake OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 ./bench_gemm
 *
 * Set OPENBLAS_CORETYPE to the kernels opc's runtime would choose on the
 * machine (`net --bench` names them when OPC_BLAS=openblas). Each shape is
 * C[M][N] = A[M][K] B[K][N], row-major, as a convolution's filters times
 * its unfolded input; both libraries run it once untimed first (oneDNN
 * generates its kernels on first use), then alternately in rounds, and the
 * best round of each is reported.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* oneDNN's C API (dnnl.h), declared here so that only the library is needed. */
int dnnl_sgemm(char transa, char transb, long long M, long long N, long long K, float alpha,
               const float *A, long long lda, const float *B, long long ldb, float beta, float *C,
               long long ldc);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct Shape {
  int m, n, k;
  const char *where; /* a layer with this GEMM (per part of the runtime's split) */
} Shape;

static const Shape shapes[] = {
    {64, 3136, 64, "ResNet-50 layer1 1x1, 56x56"},
    {256, 3136, 64, "ResNet-50 layer1 1x1 expand"},
    {64, 452, 576, "ResNet-50 layer1 3x3, one block of positions"},
    {64, 3136, 576, "ResNet-50 layer1 3x3, whole"},
    {256, 196, 1024, "ResNet-50 layer3 1x1"},
    {64, 196, 2304, "ResNet-50 layer3 3x3, a quarter of the channels"},
    {128, 196, 2304, "ResNet-50 layer3 3x3, half of the channels"},
    {128, 49, 4608, "ResNet-50 layer4 3x3, a quarter of the channels"},
    {512, 49, 4608, "ResNet-50 layer4 3x3, whole"},
};

static void openblas(const Shape *s, const float *a, const float *b, float *c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->m, s->n, s->k, 1.0f, a, s->k, b,
              s->n, 0.0f, c, s->n);
}

static void onednn(const Shape *s, const float *a, const float *b, float *c) {
  dnnl_sgemm('N', 'N', s->m, s->n, s->k, 1.0f, a, s->k, b, s->n, 0.0f, c, s->n);
}

/* Seconds per call, over enough calls for about 0.2 s. */
static double time_calls(void (*gemm)(const Shape *, const float *, const float *, float *),
                         const Shape *s, const float *a, const float *b, float *c) {
  int calls = (int)(0.2 * 50e9 / (2.0 * s->m * s->n * s->k)) + 1;
  double t0 = now();
  for (int i = 0; i < calls; i++)
    gemm(s, a, b, c);
  return (now() - t0) / calls;
}

int main(void) {
  printf("| M | N | K | layer | OpenBLAS GFLOP/s | oneDNN GFLOP/s | oneDNN/OpenBLAS |\n");
  printf("|---:|---:|---:|---|---:|---:|---:|\n");
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const Shape *s = &shapes[i];
    float *a = malloc(sizeof(float) * s->m * s->k), *b = malloc(sizeof(float) * s->k * s->n);
    float *c = malloc(sizeof(float) * s->m * s->n);
    if (!a || !b || !c) {
      fprintf(stderr, "bench_gemm: out of memory\n");
      return 1;
    }
    for (long j = 0; j < (long)s->m * s->k; j++)
      a[j] = (float)(j % 7) * 0.1f;
    for (long j = 0; j < (long)s->k * s->n; j++)
      b[j] = (float)(j % 5) * 0.1f;
    openblas(s, a, b, c);
    onednn(s, a, b, c);
    double best_openblas = 1e30, best_onednn = 1e30;
    for (int round = 0; round < 5; round++) {
      double t = time_calls(openblas, s, a, b, c);
      best_openblas = t < best_openblas ? t : best_openblas;
      t = time_calls(onednn, s, a, b, c);
      best_onednn = t < best_onednn ? t : best_onednn;
    }
    double flop = 2.0 * s->m * s->n * s->k;
    printf("| %d | %d | %d | %s | %.1f | %.1f | %.2f |\n", s->m, s->n, s->k, s->where,
           flop / best_openblas / 1e9, flop / best_onednn / 1e9, best_openblas / best_onednn);
    free(a);
    free(b);
    free(c);
  }
  return 0;
}
