/*
 * conv_tile.c - the register tile of the convolutions that need no im2col
 * (see "tiles" in cudnn_conv.c).
 *
 * One call computes TILE_ROWS output channels over up to TILE_COLS output
 * positions: out[m][j] = sum over r of w[m][r] * rows[r][p0 + j]. Each
 * row r is one filter tap of one input channel, read in place from a padded
 * copy of the input, so the rows are pointers, not an unfolded matrix. The
 * 24 accumulators stay in AVX-512 registers over the whole sum; the filter
 * values are broadcast straight from the filter rows as cuDNN lays them
 * out, so nothing is packed per call.
 *
 * Built for AVX-512 with a target attribute and used only where cpuid and
 * OPC_KERNEL_ISA allow it (tile_available); elsewhere the convolutions keep
 * im2col and the GEMM, as they do with OPC_CONV=gemm (to compare the two).
 */
#include "dnn.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ktable.h"

#define TILE_TARGET __attribute__((target("avx512f,fma")))

/* The lanes of a vector that hold positions: the first n of 16. */
static inline __mmask16 lanes(int n) {
  return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* The part of a vector of positions that lands in one output row: its
 * lanes, and y's index for lane 0 there. */
typedef struct Segment {
  long long at;
  __mmask16 k;
} Segment;

/* Splits the `valid` positions from plane position qa on by output row:
 * row h holds positions [h wq, h wq + ow) at y index q - h (wq - ow). */
static inline int segments(long long qa, int valid, int wq, int ow, Segment *seg) {
  int n = 0;
  for (long long h = qa / wq; h * wq < qa + valid; h++) {
    long long s = h * wq > qa ? h * wq : qa;
    long long e = h * wq + ow < qa + valid ? h * wq + ow : qa + valid;
    if (e <= s)
      continue;
    seg[n].at = qa - h * (wq - ow);
    seg[n++].k = (__mmask16)(lanes((int)(e - qa)) & ~lanes((int)(s - qa)));
  }
  return n;
}

/* y = clamp(alpha acc + bias + alpha2 z) for one channel's vector. */
TILE_TARGET static inline __attribute__((always_inline)) void
store_vector(__m512 acc, int m, const Segment *seg, int nseg, const TileStore *st) {
  __m512 r = _mm512_fmadd_ps(acc, _mm512_set1_ps(st->alpha), _mm512_set1_ps(st->bias[m]));
  for (int i = 0; i < nseg; i++) {
    __m512 v = r;
    if (st->z[m])
      v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(seg[i].k, st->z[m] + seg[i].at),
                          _mm512_set1_ps(st->alpha2), v);
    /* max and min give their second operand for NaN: a NaN becomes 0, as
     * `v > 0 ? v : 0` makes it. */
    if (st->mode == CUDNN_ACTIVATION_RELU)
      v = _mm512_max_ps(v, _mm512_setzero_ps());
    else if (st->mode == CUDNN_ACTIVATION_CLIPPED_RELU)
      v = _mm512_min_ps(_mm512_max_ps(v, _mm512_setzero_ps()), _mm512_set1_ps(st->top));
    _mm512_mask_storeu_ps(st->y[m] + seg[i].at, seg[i].k, v);
  }
}

/* V vectors of 16 positions; the loops unroll fully so that GCC keeps the
 * accumulators in registers. The results go to out, or with st straight
 * to y through the clamp epilogue. */
TILE_TARGET static inline __attribute__((always_inline)) void
tile_body(const int V, const float *const *w, int R, const float *const *rows, long long p0,
          int ncols, float *out, const TileStore *st, long long q0) {
  __mmask16 k0 = lanes(ncols), k1 = lanes(ncols - 16), k2 = lanes(ncols - 32);
  __m512 acc[TILE_ROWS][3];
#pragma GCC unroll 8
  for (int m = 0; m < TILE_ROWS; m++)
#pragma GCC unroll 3
    for (int v = 0; v < 3; v++)
      acc[m][v] = _mm512_setzero_ps();
  const float *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
  const float *w4 = w[4], *w5 = w[5], *w6 = w[6], *w7 = w[7];
  for (int r = 0; r < R; r++) {
    const float *b = rows[r] + p0;
    __m512 b0 = _mm512_maskz_loadu_ps(k0, b);
    __m512 b1 = V > 1 ? _mm512_maskz_loadu_ps(k1, b + 16) : b0;
    __m512 b2 = V > 2 ? _mm512_maskz_loadu_ps(k2, b + 32) : b0;
    const float s[TILE_ROWS] = {w0[r], w1[r], w2[r], w3[r], w4[r], w5[r], w6[r], w7[r]};
#pragma GCC unroll 8
    for (int m = 0; m < TILE_ROWS; m++) {
      __m512 sv = _mm512_set1_ps(s[m]);
      acc[m][0] = _mm512_fmadd_ps(sv, b0, acc[m][0]);
      if (V > 1)
        acc[m][1] = _mm512_fmadd_ps(sv, b1, acc[m][1]);
      if (V > 2)
        acc[m][2] = _mm512_fmadd_ps(sv, b2, acc[m][2]);
    }
  }
  if (!st) {
#pragma GCC unroll 8
    for (int m = 0; m < TILE_ROWS; m++)
#pragma GCC unroll 3
      for (int v = 0; v < V; v++)
        _mm512_storeu_ps(out + m * TILE_COLS + 16 * v, acc[m][v]);
    return;
  }
  Segment seg[17];
#pragma GCC unroll 3
  for (int v = 0; v < V; v++) {
    int nseg = segments(q0 + 16 * v, ncols - 16 * v < 16 ? ncols - 16 * v : 16, st->wq, st->ow,
                        seg);
#pragma GCC unroll 8
    for (int m = 0; m < TILE_ROWS; m++)
      if (st->y[m])
        store_vector(acc[m][v], m, seg, nseg, st);
  }
}

TILE_TARGET static void tile_avx512(const float *const *w, int R, const float *const *rows,
                                    long long p0, int ncols, float *out, const TileStore *st,
                                    long long q0) {
  if (ncols > 32)
    tile_body(3, w, R, rows, p0, ncols, out, st, q0);
  else if (ncols > 16)
    tile_body(2, w, R, rows, p0, ncols, out, st, q0);
  else
    tile_body(1, w, R, rows, p0, ncols, out, st, q0);
}

static bool tiles_chosen;

static void choose_tiles(void) {
  const char *want = getenv("OPC_CONV");
  tiles_chosen = kernel_isa() == KERNEL_AVX512 && !(want && strcmp(want, "gemm") == 0);
}

bool tile_available(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, choose_tiles);
  return tiles_chosen;
}

void tile_multiply(const float *const *w, int R, const float *const *rows, long long p0,
                   int ncols, float *out) {
  tile_avx512(w, R, rows, p0, ncols, out, NULL, 0);
}

void tile_multiply_store(const float *const *w, int R, const float *const *rows, long long p0,
                         long long q0, int ncols, const TileStore *st) {
  tile_avx512(w, R, rows, p0, ncols, NULL, st, q0);
}

#else

bool tile_available(void) {
  return false;
}

void tile_multiply(const float *const *w, int R, const float *const *rows, long long p0,
                   int ncols, float *out) {
  (void)w, (void)R, (void)rows, (void)p0, (void)ncols, (void)out;
}

void tile_multiply_store(const float *const *w, int R, const float *const *rows, long long p0,
                         long long q0, int ncols, const TileStore *st) {
  (void)w, (void)R, (void)rows, (void)p0, (void)q0, (void)ncols, (void)st;
}

#endif
