/*
 * conv_avx512.c - the CPU target's float convolutions of opc_kernels.inc
 * along AVX-512: opc_conv_nhwc's units and opc_conv_depthwise_nhwc's
 * items. The kernels say what they compute; this is the same sum, with
 * each product added by a fused multiply-add (the plain body may round
 * the product first), then the same residual and activation formulas.
 *
 * The file is built for AVX-512 (meson.build) and called only from the
 * kernels' AVX-512 instance, which the runtime runs on CPUs that have it.
 *
 * opc_conv_nhwc: a unit is 12 output pixels by up to 64 channels, four
 * blocks of 16 of the packed filter. Its sums stay in registers, 6 pixels
 * by 4 blocks (or 12 by 2, or by 1) at a time: for each tap, each
 * pixel's row of x (or zeros, for a tap in the padding) is read along C,
 * each value broadcast and multiplied by the blocks' 16 filter values of
 * that (tap, channel), which lie side by side.
 */
#include <stdbool.h>
#include <string.h>

#include "opc_kargs.h"
#include "vector_math.h"
#define OPC_SCALAR static inline __attribute__((unused))
#include "scalar.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__AVX512F__)
#include <immintrin.h>

enum {
  TILE = 12,          /* a unit's pixels */
  GROUP = 64,         /* a unit's channels */
  MAX_CHANNELS = 4096 /* C read from the zeros for a tap in the padding */
};

static const float zeros[MAX_CHANNELS] __attribute__((aligned(64)));

/* The convolution's shape, read once from the kernel's arguments. */
typedef struct {
  const float *x, *filter, *bias, *z;
  float *y;
  long long c, h, w, kh, kw, sh, sw, dh, dw, ph, pw, ow, frame, m, pixels, taps, groups;
  int act;
  float p0, p1;
} Conv;

static Conv conv_of(const struct opc_kargs *a) {
  Conv v = {.x = a->x[0], .filter = a->x[1], .bias = a->x[2], .z = a->x[3], .y = a->y};
  const long long *i = a->i;
  v.c = i[0], v.h = i[1], v.w = i[2], v.kh = i[3], v.kw = i[4], v.sh = i[5], v.sw = i[6];
  v.dh = i[7], v.dw = i[8], v.ph = i[9], v.pw = i[10], v.ow = i[11], v.frame = i[12];
  v.m = i[13], v.act = (int)i[14], v.pixels = i[15];
  v.taps = v.kh * v.kw;
  v.groups = a->dims[1];
  v.p0 = a->f[0], v.p1 = a->f[1];
  return v;
}

/* The mask of a run's first n (at most 16) lanes. */
static inline __mmask16 first16(long long n) {
  return (__mmask16)(n >= 16 ? 0xffff : n <= 0 ? 0 : (1u << n) - 1);
}

/* Activation `code` of scalar.h's list over n values in place, one loop
   per activation so that each vectorises (vector_math.h's exp). */
static void activate(float *v, int n, int code, float p0, float p1) {
  (void)p0, (void)p1;
  switch (code) {
#define ARGS0
#define ARGS1 , p0
#define ARGS2 , p0, p1
#define ACT_LOOP(NAME, name, params)                  \
  case OPC_ACT_##NAME:                                \
    for (int j = 0; j < n; j++)                       \
      v[j] = opc_##name##_of(v[j] ARGS##params);      \
    return;
    OPC_ACTIVATIONS(ACT_LOOP)
#undef ACT_LOOP
#undef ARGS0
#undef ARGS1
#undef ARGS2
  }
}

/* Adds z (when there is one) to a pixel's `count` sums from channel m0,
   applies the activation and stores them at y. Relu and Clip stay in the
   registers; the others go through their formula. */
static inline __attribute__((always_inline)) void finish(const Conv *v, __m512 *sums, int blocks,
                                                         long long count, const float *z,
                                                         float *y) {
  for (int b = 0; b < blocks; b++) {
    __mmask16 keep = first16(count - 16 * b);
    if (z)
      sums[b] = _mm512_add_ps(sums[b], _mm512_maskz_loadu_ps(keep, z + 16 * b));
    if (v->act == OPC_ACT_RELU)
      sums[b] = _mm512_max_ps(sums[b], _mm512_setzero_ps());
    else if (v->act == OPC_ACT_CLIP)
      sums[b] = _mm512_min_ps(_mm512_max_ps(sums[b], _mm512_set1_ps(v->p0)),
                              _mm512_set1_ps(v->p1));
    if (v->act == OPC_ACT_NONE || v->act == OPC_ACT_RELU || v->act == OPC_ACT_CLIP)
      _mm512_mask_storeu_ps(y + 16 * b, keep, sums[b]);
  }
  if (v->act == OPC_ACT_NONE || v->act == OPC_ACT_RELU || v->act == OPC_ACT_CLIP)
    return;
  float row[GROUP] __attribute__((aligned(64)));
  for (int b = 0; b < blocks; b++)
    _mm512_store_ps(row + 16 * b, sums[b]);
  int n = (int)(count < 16 * blocks ? count : 16 * blocks);
  activate(row, n, v->act, v->p0, v->p1);
  memcpy(y, row, sizeof(float) * (size_t)n);
}

/*
 * ROWS pixels by BLOCKS blocks of 16 channels from block b0: the sums,
 * from the bias, over every tap and channel, then finished into y.
 * rows[t * TILE + r] is pixel r's row of x at tap t (zeros in the
 * padding). Only the first `valid` pixels are stored.
 */
static inline __attribute__((always_inline)) void
tile(const Conv *v, const float *const *rows, int ROWS, int BLOCKS, long long p0, int valid,
     long long b0, long long count) {
  __m512 acc[12][4];
  long long stride = v->taps * v->c * 16; /* from one block to the next */
  for (int r = 0; r < ROWS; r++)
    for (int b = 0; b < BLOCKS; b++)
      acc[r][b] = _mm512_loadu_ps(v->bias + (b0 + b) * 16);
  const float *f = v->filter + b0 * stride;
  for (long long t = 0; t < v->taps; t++) {
    const float *const *at = rows + t * TILE;
    const float *ft = f + t * v->c * 16;
    for (long long c = 0; c < v->c; c++) {
      __m512 w[4];
      for (int b = 0; b < BLOCKS; b++)
        w[b] = _mm512_loadu_ps(ft + b * stride + c * 16);
      for (int r = 0; r < ROWS; r++) {
        __m512 xv = _mm512_set1_ps(at[r][c]);
        for (int b = 0; b < BLOCKS; b++)
          acc[r][b] = _mm512_fmadd_ps(xv, w[b], acc[r][b]);
      }
    }
  }
  for (int r = 0; r < valid && r < ROWS; r++) {
    long long p = p0 + r;
    finish(v, acc[r], BLOCKS, count, v->z ? v->z + p * v->m + b0 * 16 : NULL,
           v->y + p * v->m + b0 * 16);
  }
}

/* The rows of x that pixels [p0, p0 + valid) read at each tap, the last
   pixel's repeated up to TILE so that every tile computes whole. */
static void tap_rows(const Conv *v, long long p0, int valid, const float **rows) {
  for (int r = 0; r < TILE; r++) {
    long long p = p0 + (r < valid ? r : valid - 1);
    long long img = p / v->frame, hw = p % v->frame;
    long long h0 = hw / v->ow * v->sh - v->ph, w0 = hw % v->ow * v->sw - v->pw;
    const float *image = v->x + img * v->h * v->w * v->c;
    for (long long t = 0; t < v->taps; t++) {
      long long hh = h0 + t / v->kw * v->dh, ww = w0 + t % v->kw * v->dw;
      bool inside = hh >= 0 && hh < v->h && ww >= 0 && ww < v->w;
      rows[t * TILE + r] = inside ? image + (hh * v->w + ww) * v->c : zeros;
    }
  }
}

/* One unit: pixels [p0, p0 + valid) by channels [m0, m0 + count). */
static void run_unit(const Conv *v, long long p0, int valid, long long m0, long long count,
                     const float **rows) {
  tap_rows(v, p0, valid, rows);
  long long b0 = m0 / 16;
  int blocks = (int)((count + 15) / 16);
  if (blocks == 4) {
    tile(v, rows, 6, 4, p0, valid, b0, count);
    if (valid > 6)
      tile(v, rows + 6, 6, 4, p0 + 6, valid - 6, b0, count);
  } else if (blocks == 3) {
    tile(v, rows, 6, 3, p0, valid, b0, count);
    if (valid > 6)
      tile(v, rows + 6, 6, 3, p0 + 6, valid - 6, b0, count);
  } else if (blocks == 2) {
    tile(v, rows, 12, 2, p0, valid, b0, count);
  } else {
    tile(v, rows, 12, 1, p0, valid, b0, count);
  }
}

int opc_conv_nhwc_fast(const struct opc_kargs *a, long long begin, long long end) {
  Conv v = conv_of(a);
  if (v.c > MAX_CHANNELS)
    return 0;
  const float **rows = __builtin_alloca(sizeof(float *) * (size_t)(v.taps * TILE));
  /* Units run tile by tile, each tile's groups in turn, while the filter
     is small; one larger than a core's L2 and with more channels than
     pixels (a last stage's) runs group by group, each part then streaming
     its groups' filter once. The order moves work between parts only. */
  long long tiles = a->dims[0];
  bool by_group = v.m * v.taps * v.c * 4 >= (1 << 20) && v.m > v.pixels;
  for (long long u = begin; u < end; u++) {
    long long t = by_group ? u % tiles : u / v.groups;
    long long m0 = (by_group ? u / tiles : u % v.groups) * GROUP, p0 = t * TILE;
    int valid = (int)(v.pixels - p0 < TILE ? v.pixels - p0 : TILE);
    run_unit(&v, p0, valid, m0, v.m - m0 < GROUP ? v.m - m0 : GROUP, (const float **)rows);
  }
  return 1;
}

/* ---- opc_conv_depthwise_nhwc: a row of pixels by 64 channels an item */

/* One output pixel's `blocks` vectors of channels from c0 (the first
   `count`), over the taps whose rows lie inside x (at[t] null for the
   others). Lanes past C are not read: the last pixel's would leave x. */
static inline __attribute__((always_inline)) void
depthwise_pixel(const Conv *v, const float *const *at, long long c16, long long c0,
                long long count, int blocks, __m512 *acc) {
  for (int b = 0; b < blocks; b++) {
    __mmask16 keep = first16(count - 16 * b);
    acc[b] = _mm512_loadu_ps(v->bias + c0 + 16 * b);
    for (long long t = 0; t < v->taps; t++)
      if (at[t])
        acc[b] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(keep, at[t] + c0 + 16 * b),
                                 _mm512_loadu_ps(v->filter + t * c16 + c0 + 16 * b), acc[b]);
  }
}

int opc_conv_depthwise_nhwc_fast(const struct opc_kargs *a, long long begin, long long end) {
  Conv v = conv_of(a);
  long long c16 = (v.c + 15) / 16 * 16, oh = a->dims[1], groups = a->dims[2];
  const float **at = __builtin_alloca(sizeof(float *) * (size_t)v.taps);
  for (long long item = begin; item < end; item++) {
    long long img = item / (oh * groups), row = item / groups % oh;
    long long c0 = item % groups * GROUP, count = v.c - c0 < GROUP ? v.c - c0 : GROUP;
    int blocks = (int)((count + 15) / 16);
    long long h0 = row * v.sh - v.ph;
    const float *image = v.x + img * v.h * v.w * v.c;
    for (long long j = 0; j < v.ow; j++) {
      long long w0 = j * v.sw - v.pw, p = (img * oh + row) * v.ow + j;
      for (long long t = 0; t < v.taps; t++) {
        long long hh = h0 + t / v.kw * v.dh, ww = w0 + t % v.kw * v.dw;
        bool inside = hh >= 0 && hh < v.h && ww >= 0 && ww < v.w;
        at[t] = inside ? image + (hh * v.w + ww) * v.c : NULL;
      }
      __m512 acc[4];
      if (blocks == 4)
        depthwise_pixel(&v, at, c16, c0, count, 4, acc);
      else
        depthwise_pixel(&v, at, c16, c0, count, blocks, acc);
      finish(&v, acc, blocks, count, v.z ? v.z + p * v.c + c0 : NULL, v.y + p * v.c + c0);
    }
  }
  return 1;
}

#else
int opc_conv_nhwc_fast(const struct opc_kargs *a, long long begin, long long end) {
  (void)a, (void)begin, (void)end;
  return 0;
}

int opc_conv_depthwise_nhwc_fast(const struct opc_kargs *a, long long begin, long long end) {
  (void)a, (void)begin, (void)end;
  return 0;
}
#endif
