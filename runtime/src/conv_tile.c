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

/* Whether the tiles' stores apply activation mode themselves
   (vector_activate); the epilogue applies the others in a second pass. */
bool tile_activates(int mode) {
  switch (mode) {
  case CUDNN_ACTIVATION_IDENTITY:
  case CUDNN_ACTIVATION_RELU:
  case CUDNN_ACTIVATION_CLIPPED_RELU:
  case KERNEL_ACT_HARD_SWISH:
  case CUDNN_ACTIVATION_SWISH:
  case CUDNN_ACTIVATION_SIGMOID:
    return true;
  }
  return false;
}

/* The activation of the tiles' epilogues (see TileStore). max and min give
 * their second operand for NaN: a NaN becomes 0, as `v > 0 ? v : 0` makes
 * it. */
TILE_TARGET static inline __attribute__((always_inline)) __m512
vector_activate(__m512 r, int mode, float coef) {
  switch (mode) {
  case CUDNN_ACTIVATION_RELU:
    return _mm512_max_ps(r, _mm512_setzero_ps());
  case CUDNN_ACTIVATION_CLIPPED_RELU:
    return _mm512_min_ps(_mm512_max_ps(r, _mm512_setzero_ps()), _mm512_set1_ps(coef));
  case KERNEL_ACT_HARD_SWISH: {
    __m512 t = _mm512_fmadd_ps(r, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
    t = _mm512_min_ps(_mm512_max_ps(t, _mm512_setzero_ps()), _mm512_set1_ps(1.0f));
    return _mm512_mul_ps(r, t);
  }
  case CUDNN_ACTIVATION_SWISH:
    return (__m512)swish16((F16)r, coef);
  case CUDNN_ACTIVATION_SIGMOID:
    return (__m512)sigmoid16((F16)r);
  }
  return r;
}

/* y = act(alpha acc + bias + alpha2 z) for one channel's vector. */
TILE_TARGET static inline __attribute__((always_inline)) void
store_vector(__m512 acc, int m, const Segment *seg, int nseg, const TileStore *st) {
  __m512 r = _mm512_fmadd_ps(acc, _mm512_set1_ps(st->alpha), _mm512_set1_ps(st->bias[m]));
  for (int i = 0; i < nseg; i++) {
    __m512 v = r;
    if (st->z[m])
      v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(seg[i].k, st->z[m] + seg[i].at),
                          _mm512_set1_ps(st->alpha2), v);
    _mm512_mask_storeu_ps(st->y[m] + seg[i].at, seg[i].k, vector_activate(v, st->mode, st->coef));
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

/* ---- chan: output channels along the vectors ---- */

/* In place: t[j] lane i becomes t[i] lane j. */
TILE_TARGET static inline __attribute__((always_inline)) void transpose16(__m512 t[16]) {
  __m512 u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) {
    u[2 * i] = _mm512_unpacklo_ps(t[2 * i], t[2 * i + 1]);
    u[2 * i + 1] = _mm512_unpackhi_ps(t[2 * i], t[2 * i + 1]);
  }
  /* t[4i + j], 128-bit lane L: rows 4i to 4i + 3 at column 4L + j. */
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    t[4 * i] = _mm512_shuffle_ps(u[4 * i], u[4 * i + 2], 0x44);
    t[4 * i + 1] = _mm512_shuffle_ps(u[4 * i], u[4 * i + 2], 0xee);
    t[4 * i + 2] = _mm512_shuffle_ps(u[4 * i + 1], u[4 * i + 3], 0x44);
    t[4 * i + 3] = _mm512_shuffle_ps(u[4 * i + 1], u[4 * i + 3], 0xee);
  }
  /* Then a 4x4 transpose of 128-bit lanes among t[j], t[4 + j], t[8 + j]
   * and t[12 + j]. */
#pragma GCC unroll 4
  for (int j = 0; j < 4; j++) {
    __m512 s0 = _mm512_shuffle_f32x4(t[j], t[4 + j], 0x44);
    __m512 s1 = _mm512_shuffle_f32x4(t[j], t[4 + j], 0xee);
    __m512 s2 = _mm512_shuffle_f32x4(t[8 + j], t[12 + j], 0x44);
    __m512 s3 = _mm512_shuffle_f32x4(t[8 + j], t[12 + j], 0xee);
    u[j] = _mm512_shuffle_f32x4(s0, s2, 0x88);
    u[4 + j] = _mm512_shuffle_f32x4(s0, s2, 0xdd);
    u[8 + j] = _mm512_shuffle_f32x4(s1, s3, 0x88);
    u[12 + j] = _mm512_shuffle_f32x4(s1, s3, 0xdd);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++)
    t[i] = u[i];
}

TILE_TARGET void chan_pack(const float *w, long long ldw, int kvalid, int nv, int R,
                           float *panel) {
  for (int v = 0; v < nv; v++)
    for (int r0 = 0; r0 < R; r0 += 16) {
      int n = R - r0 < 16 ? R - r0 : 16;
      __mmask16 k = lanes(n);
      __m512 t[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; i++)
        t[i] = 16 * v + i < kvalid ? _mm512_maskz_loadu_ps(k, w + (16LL * v + i) * ldw + r0)
                                   : _mm512_setzero_ps();
      transpose16(t);
      for (int i = 0; i < n; i++)
        _mm512_storeu_ps(panel + (long long)(r0 + i) * 16 * nv + 16 * v, t[i]);
    }
}

/* Channels ch0 to ch0 + 15 at NP positions (acc[j]: position j's 16
 * channels) through st's epilogue to y[ch][at + j]. */
TILE_TARGET static inline __attribute__((always_inline)) void
chan_store(const __m512 *acc, const int NP, int ch0, long long at, const ChanStore *st) {
  __mmask16 k = lanes(NP);
  __m512 alpha = _mm512_set1_ps(st->alpha), alpha2 = _mm512_set1_ps(st->alpha2);
  __m512 bias = _mm512_loadu_ps(st->bias + ch0);
  __m512 t[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; j++)
    t[j] = j < NP ? _mm512_fmadd_ps(acc[j], alpha, bias) : _mm512_setzero_ps();
  transpose16(t);
  int m1 = st->kvalid - ch0 < 16 ? st->kvalid - ch0 : 16;
  for (int m = 0; m < m1; m++) {
    long long ch = ch0 + m;
    __m512 r = t[m];
    if (st->z)
      r = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, st->z + ch * st->zs + at), alpha2, r);
    _mm512_mask_storeu_ps(st->y + ch * st->ys + at, k, vector_activate(r, st->mode, st->coef));
  }
}

/* NV vectors of 16 channels by NP positions; the loops unroll fully so
 * that GCC keeps the accumulators in registers. */
TILE_TARGET static inline __attribute__((always_inline)) void
chan_body(const int NV, const int NP, const float *panel, const ChanRows *rs,
          const float *const *rows, long long q, long long at, const ChanStore *st) {
  __m512 acc[2][CHAN_COLS];
#pragma GCC unroll 2
  for (int v = 0; v < NV; v++)
#pragma GCC unroll 12
    for (int j = 0; j < NP; j++)
      acc[v][j] = _mm512_setzero_ps();
  for (int i = 0; i < rs->runs; i++)
    for (int r = rs->first + i * rs->stride, r1 = r + rs->len; r < r1; r++) {
      const float *b = rows[r] + q;
      __m512 w0 = _mm512_loadu_ps(panel + (long long)r * 16 * NV);
      __m512 w1 = NV > 1 ? _mm512_loadu_ps(panel + (long long)r * 16 * NV + 16) : w0;
#pragma GCC unroll 12
      for (int j = 0; j < NP; j++) {
        __m512 s = _mm512_set1_ps(b[j]);
        acc[0][j] = _mm512_fmadd_ps(w0, s, acc[0][j]);
        if (NV > 1)
          acc[1][j] = _mm512_fmadd_ps(w1, s, acc[1][j]);
      }
    }
#pragma GCC unroll 2
  for (int v = 0; v < NV; v++)
    chan_store(acc[v], NP, 16 * v, at, st);
}

#define CHAN_CASE(NP)                                                                         \
  case NP:                                                                                    \
    if (nv > 1)                                                                               \
      chan_body(2, NP, panel, rs, rows, q, at, st);                                           \
    else                                                                                      \
      chan_body(1, NP, panel, rs, rows, q, at, st);                                           \
    return;

TILE_TARGET void chan_multiply_store(const float *panel, int nv, const ChanRows *rs,
                                     const float *const *rows, long long q, long long at, int np,
                                     const ChanStore *st) {
  switch (np) {
    CHAN_CASE(1) CHAN_CASE(2) CHAN_CASE(3) CHAN_CASE(4) CHAN_CASE(5) CHAN_CASE(6)
    CHAN_CASE(7) CHAN_CASE(8) CHAN_CASE(9) CHAN_CASE(10) CHAN_CASE(11) CHAN_CASE(12)
  }
}

/* ---- chan for depthwise filters ---- */

/* Input rows [h0, h1) of the 16 channels from d->x on into d->buf's
 * channel-interleaved padded plane (16 floats per position). */
TILE_TARGET void chan_dw_fill(const ChanDw *d, int kvalid, int h0, int h1) {
  for (int h = h0; h < h1; h++) {
    int row = h + d->pad_h;
    if (row < 0 || row >= d->rows)
      continue;
    for (int w0 = 0; w0 < d->in_w; w0 += 16) {
      int n = d->in_w - w0 < 16 ? d->in_w - w0 : 16;
      __mmask16 k = lanes(n);
      __m512 t[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; i++)
        t[i] = i < kvalid ? _mm512_maskz_loadu_ps(k, d->x + i * d->xs_c + (long long)h * d->xs_h + w0)
                          : _mm512_setzero_ps();
      transpose16(t);
      for (int j = 0; j < n; j++) {
        int col = w0 + j + d->pad_w;
        if (col < d->width)
          _mm512_store_ps(d->buf + ((long long)row * d->width + col) * 16, t[j]);
      }
    }
  }
}

/* NP positions of output row oh from ow0 on, stride SW across. */
TILE_TARGET static inline __attribute__((always_inline)) void
chan_dw_body(const int NP, const int SW, const ChanDw *d, int oh, int ow0, const ChanStore *st) {
  __m512 acc[CHAN_DW_COLS];
#pragma GCC unroll 14
  for (int j = 0; j < NP; j++)
    acc[j] = _mm512_setzero_ps();
  const float *base = d->buf + ((long long)oh * d->stride_h * d->width + (long long)ow0 * SW) * 16;
  for (int t = 0; t < d->taps; t++) {
    __m512 w = _mm512_load_ps(d->wv + 16 * t);
    const float *b = base + d->tap_at[t];
#pragma GCC unroll 14
    for (int j = 0; j < NP; j++)
      acc[j] = _mm512_fmadd_ps(_mm512_load_ps(b + 16 * SW * j), w, acc[j]);
  }
  chan_store(acc, NP, 0, (long long)oh * d->out_w + ow0, st);
}

#define CHAN_DW_CASE(NP)                                                                      \
  case NP:                                                                                    \
    if (d->stride_w == 1)                                                                     \
      chan_dw_body(NP, 1, d, oh, ow0, st);                                                    \
    else                                                                                      \
      chan_dw_body(NP, 2, d, oh, ow0, st);                                                    \
    return;

TILE_TARGET void chan_dw_store(const ChanDw *d, int oh, int ow0, int np, const ChanStore *st) {
  switch (np) {
    CHAN_DW_CASE(1) CHAN_DW_CASE(2) CHAN_DW_CASE(3) CHAN_DW_CASE(4) CHAN_DW_CASE(5)
    CHAN_DW_CASE(6) CHAN_DW_CASE(7) CHAN_DW_CASE(8) CHAN_DW_CASE(9) CHAN_DW_CASE(10)
    CHAN_DW_CASE(11) CHAN_DW_CASE(12) CHAN_DW_CASE(13) CHAN_DW_CASE(14)
  }
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

bool tile_activates(int mode) {
  (void)mode;
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

void chan_pack(const float *w, long long ldw, int kvalid, int nv, int R, float *panel) {
  (void)w, (void)ldw, (void)kvalid, (void)nv, (void)R, (void)panel;
}

void chan_multiply_store(const float *panel, int nv, const ChanRows *rs,
                         const float *const *rows, long long q, long long at, int np,
                         const ChanStore *st) {
  (void)panel, (void)nv, (void)rs, (void)rows, (void)q, (void)at, (void)np, (void)st;
}

void chan_dw_fill(const ChanDw *d, int kvalid, int h0, int h1) {
  (void)d, (void)kvalid, (void)h0, (void)h1;
}

void chan_dw_store(const ChanDw *d, int oh, int ow0, int np, const ChanStore *st) {
  (void)d, (void)oh, (void)ow0, (void)np, (void)st;
}

#endif
