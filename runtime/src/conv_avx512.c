/*
 * conv_avx512.c - the CPU target's channels-last float kernels of
 * opc_kernels.inc along AVX-512: opc_conv_nhwc's units,
 * opc_conv_depthwise_nhwc's and opc_pool_nhwc's items and
 * opc_channel_affine_nhwc's units. The kernels say what they compute; this
 * is the same sum, with each product added by a fused multiply-add (the
 * plain body may round the product first), then the same residual and
 * activation formulas.
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
#include <stdint.h>
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
  long long xs, zs, ys; /* pixel strides */
  bool planar;          /* x in ONNX's order [N, C, H, W] */
  /* With planar x: value k of a pixel's row (channel c, filter row i,
     column j, k = c T + i KW + j) lies offsets[k] floats past its window's
     first value in x. */
  const long long *offsets;
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
  v.xs = a->xstride[0][0], v.zs = a->xstride[3][0], v.ys = a->ystride[0];
  v.planar = a->f[2] != 0.0f;
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

/* finish() for `pixels` pixels in a row from pixel p, channels from c,
   whose sums lie `pitch` vectors apart. An activation that goes through
   its formula takes all their values in one call: per pixel, the call
   cost as much as the formula (SiLU doubled a depthwise convolution's
   time). */
static inline __attribute__((always_inline)) void
finish_pixels(const Conv *v, __m512 *sums, int pitch, int pixels, int blocks, long long count,
              long long p, long long c) {
  if (v->act == OPC_ACT_NONE || v->act == OPC_ACT_RELU || v->act == OPC_ACT_CLIP) {
    for (int k = 0; k < pixels; k++)
      finish(v, sums + k * pitch, blocks, count, v->z ? v->z + (p + k) * v->zs + c : NULL,
             v->y + (p + k) * v->ys + c);
    return;
  }
  float values[TILE * GROUP] __attribute__((aligned(64)));
  for (int k = 0; k < pixels; k++)
    for (int b = 0; b < blocks; b++) {
      __m512 s = sums[k * pitch + b];
      if (v->z)
        s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(first16(count - 16 * b),
                                                   v->z + (p + k) * v->zs + c + 16 * b));
      _mm512_store_ps(values + (k * blocks + b) * 16, s);
    }
  activate(values, pixels * blocks * 16, v->act, v->p0, v->p1);
  /* Vector stores: a memcpy of a pixel's few values was a `rep movs`,
     whose start-up cost as much as the copy. */
  for (int k = 0; k < pixels; k++)
    for (int b = 0; b < blocks; b++)
      _mm512_mask_storeu_ps(v->y + (p + k) * v->ys + c + 16 * b, first16(count - 16 * b),
                            _mm512_load_ps(values + (k * blocks + b) * 16));
}

/*
 * ROWS pixels by BLOCKS blocks of 16 channels from block b0: the sums,
 * from the bias, over `taps` rows of `len` values per pixel, then
 * finished into y. rows[t * TILE + r] is pixel r's row at tap t (zeros in
 * the padding); the filter's values for (t, c) lie at (t len + c) 16 of
 * each block, whose blocks lie K 16 apart (K = C KH KW = taps len). Only
 * the first `valid` pixels are stored.
 */
static inline __attribute__((always_inline)) void
tile(const Conv *v, const float *const *rows, long long taps, long long len, int ROWS,
     int BLOCKS, bool direct, long long p0, int valid, long long b0, long long count) {
  __m512 acc[12][4];
  long long stride = v->taps * v->c * 16; /* from one block to the next */
  for (int r = 0; r < ROWS; r++)
    for (int b = 0; b < BLOCKS; b++)
      acc[r][b] = _mm512_loadu_ps(v->bias + (b0 + b) * 16);
  const float *f = v->filter + b0 * stride;
  for (long long t = 0; t < taps; t++) {
    const float *const *at = rows + t * TILE;
    const float *ft = f + t * len * 16;
    for (long long c = 0; c < len; c++) {
      __m512 w[4];
      for (int b = 0; b < BLOCKS; b++)
        w[b] = _mm512_loadu_ps(ft + b * stride + c * 16);
      long long at_c = direct ? v->offsets[c] : c;
      for (int r = 0; r < ROWS; r++) {
        __m512 xv = _mm512_set1_ps(at[r][at_c]);
        for (int b = 0; b < BLOCKS; b++)
          acc[r][b] = _mm512_fmadd_ps(xv, w[b], acc[r][b]);
      }
    }
  }
  finish_pixels(v, acc[0], 4, valid < ROWS ? valid : ROWS, BLOCKS, count, p0, b0 * 16);
}

/* How a unit's pixels find their rows of x. */
typedef enum {
  ROWS_PIXELS, /* a 1x1 filter, stride 1, no padding: each pixel's own C values */
  ROWS_TAPS,   /* each tap's C values of the pixel it reads, or zeros */
  ROWS_GATHERED /* few channels, or x in ONNX's order: the K values copied */
} RowsKind;

enum { GATHER_MAX = 2048 }; /* the longest row copied */

static RowsKind rows_kind(const Conv *v) {
  if (v->taps * v->c <= GATHER_MAX && (v->planar || v->c < 16))
    return ROWS_GATHERED;
  bool pixels = v->taps == 1 && v->sh == 1 && v->sw == 1 && v->ph == 0 && v->pw == 0 &&
                v->frame == v->h * v->w;
  return pixels ? ROWS_PIXELS : ROWS_TAPS;
}

/* The position of pixel p's window: its image and first row and column. */
/* A pixel's place: its image, output row and column, stepped along the
   pixels without a division per pixel. */
typedef struct {
  long long img, row, col;
} Place;

static inline Place place_of(const Conv *v, long long p) {
  long long hw = p % v->frame;
  return (Place){p / v->frame, hw / v->ow, hw % v->ow};
}

static inline void next_place(const Conv *v, Place *at) {
  if (++at->col < v->ow)
    return;
  at->col = 0;
  if (++at->row * v->ow < v->frame)
    return;
  at->row = 0;
  at->img++;
}

/* The window of the pixel at `at`: its image, and first row and column. */
static inline void window_of(const Conv *v, const Place *at, const float **image, long long *h0,
                             long long *w0) {
  *image = v->x + at->img * v->h * v->w * (v->planar ? v->c : v->xs);
  *h0 = at->row * v->sh - v->ph;
  *w0 = at->col * v->sw - v->pw;
}

/* A pixel's window from x in ONNX's order, channel c's KW values of
   filter row i at row[c T + i KW]: the order the filter is packed in for
   such x. Without dilation, each (c, i) is one vector written whole, 16
   values from there: written in the order of their places, each store's
   lanes past KW are overwritten by the next one's values (the row has 16
   values of room past its end). A whole store, unlike a masked or an
   expanding one, passes its values on to the float loads that follow. */
static inline void planar_pixel(const Conv *v, const float *image, long long h0, long long w0,
                                float *row) {
  /* The shape in locals: a vector store may alias v's fields, which the
     loop would otherwise read again after each. */
  long long channels = v->c, kh = v->kh, kw = v->kw, h = v->h, w = v->w, dh = v->dh;
  long long taps = v->taps, plane = h * w;
  if (v->dw == 1 && kw <= 16) {
    long long lo = w0 < 0 ? -w0 : 0, hi = w - w0 < kw ? w - w0 : kw;
    __mmask16 cols = hi > lo ? (__mmask16)(first16(hi) & ~first16(lo)) : 0;
    for (long long c = 0; c < channels; c++)
      for (long long i = 0; i < kh; i++) {
        long long hh = h0 + i * dh;
        __mmask16 keep = hh >= 0 && hh < h ? cols : 0;
        /* Lane j reads column w0 + j: lane 0's address may lie before x
           (w0 < 0), which the mask keeps unread; it is reckoned as an
           integer, not formed as a pointer outside x. */
        uintptr_t at = keep ? (uintptr_t)(image + c * plane + hh * w + w0 + lo) -
                                  (uintptr_t)lo * sizeof(float)
                            : (uintptr_t)zeros;
        _mm512_storeu_ps(row + c * taps + i * kw, _mm512_maskz_loadu_ps(keep, (const void *)at));
      }
    return;
  }
  for (long long c = 0; c < channels; c++)
    for (long long i = 0; i < kh; i++)
      for (long long j = 0; j < kw; j++) {
        long long hh = h0 + i * dh, ww = w0 + j * v->dw;
        bool inside = hh >= 0 && hh < h && ww >= 0 && ww < w;
        row[c * taps + i * kw + j] = inside ? image[c * plane + hh * w + ww] : 0.0f;
      }
}

/* The rows of x that pixels [p0, p0 + valid) read, the last pixel's
   repeated up to TILE so that every tile computes whole: rows[t TILE + r]
   for ROWS_TAPS, rows[r] (into buf, TILE rows of K) for ROWS_GATHERED.
   The rows are copied a float at a time: the products read them back at
   once, a float at a time, and a load cannot take its value from a wider
   (or masked) store still in flight, but waits for it. */
__attribute__((optimize("no-tree-vectorize"))) static void unit_rows(const Conv *v, RowsKind kind, long long p0, int valid, const float **rows,
                      float *buf) {
  Place at = place_of(v, p0);
  for (int r = 0; r < TILE; r++) {
    long long p = p0 + (r < valid ? r : valid - 1);
    if (kind == ROWS_PIXELS) {
      rows[r] = v->x + p * v->xs;
      continue;
    }
    if (r > 0 && r < valid)
      next_place(v, &at);
    const float *image;
    long long h0, w0;
    window_of(v, &at, &image, &h0, &w0);
    float *row = buf + r * v->taps * v->c;
    if (kind == ROWS_GATHERED)
      rows[r] = row;
    if (kind == ROWS_GATHERED && v->planar) {
      planar_pixel(v, image, h0, w0, row);
      continue;
    }
    for (long long i = 0; i < v->kh; i++) {
      long long hh = h0 + i * v->dh;
      for (long long j = 0; j < v->kw; j++) {
        long long ww = w0 + j * v->dw, t = i * v->kw + j;
        bool inside = hh >= 0 && hh < v->h && ww >= 0 && ww < v->w;
        if (kind == ROWS_TAPS) {
          rows[t * TILE + r] = inside ? image + (hh * v->w + ww) * v->xs : zeros;
        } else { /* fewer than 16 channels */
          const float *at = inside ? image + (hh * v->w + ww) * v->xs : zeros;
          for (long long c = 0; c < v->c; c++)
            row[t * v->c + c] = at[c];
        }
      }
    }
  }
}

/* With x in ONNX's order, the rows of pixels [p0, p0 + valid) as pointers
   to their windows in x (read through v->offsets), when every window lies
   inside x: nothing is copied. */
static bool windows_inside(const Conv *v, long long p0, int valid, const float **rows) {
  const float *origin[TILE] = {NULL};
  Place at = place_of(v, p0);
  for (int r = 0; r < valid; r++) {
    if (r > 0)
      next_place(v, &at);
    const float *image;
    long long h0, w0;
    window_of(v, &at, &image, &h0, &w0);
    if (h0 < 0 || h0 + (v->kh - 1) * v->dh >= v->h || w0 < 0 || w0 + (v->kw - 1) * v->dw >= v->w)
      return false;
    origin[r] = image + h0 * v->w + w0;
  }
  /* As unit_rows does, the last pixel's rows fill the tile. */
  for (int r = 0; r < TILE; r++)
    rows[r] = origin[r < valid ? r : valid - 1];
  return true;
}

/* The unit's tiles, ROWS pixels by BLOCKS blocks each (see tile). */
static inline __attribute__((always_inline)) void
unit_tiles(const Conv *v, const float **rows, long long taps, long long len, bool direct,
           long long p0, int valid, long long b0, long long count) {
  int blocks = (int)((count + 15) / 16);
  if (blocks == 4) {
    tile(v, rows, taps, len, 6, 4, direct, p0, valid, b0, count);
    if (valid > 6)
      tile(v, rows + 6, taps, len, 6, 4, direct, p0 + 6, valid - 6, b0, count);
  } else if (blocks == 3) {
    tile(v, rows, taps, len, 6, 3, direct, p0, valid, b0, count);
    if (valid > 6)
      tile(v, rows + 6, taps, len, 6, 3, direct, p0 + 6, valid - 6, b0, count);
  } else if (blocks == 2) {
    tile(v, rows, taps, len, 12, 2, direct, p0, valid, b0, count);
  } else {
    tile(v, rows, taps, len, 12, 1, direct, p0, valid, b0, count);
  }
}

/* One unit: pixels [p0, p0 + valid) by channels [m0, m0 + count); its
   rows are made unless `made` (the tile's previous group made them, the
   same way). A stem's windows inside x are read in place: copying them
   took longer than the products. */
static void run_unit(const Conv *v, RowsKind kind, long long p0, int valid, long long m0,
                     long long count, const float **rows, float *buf, bool made) {
  bool direct = v->offsets && windows_inside(v, p0, valid, rows);
  if (!made && !direct)
    unit_rows(v, kind, p0, valid, rows, buf);
  long long taps = kind == ROWS_TAPS ? v->taps : 1;
  long long len = kind == ROWS_TAPS ? v->c : v->taps * v->c;
  if (direct)
    unit_tiles(v, rows, taps, len, true, p0, valid, m0 / 16, count);
  else
    unit_tiles(v, rows, taps, len, false, p0, valid, m0 / 16, count);
}

int opc_conv_nhwc_fast(const struct opc_kargs *a, long long begin, long long end) {
  Conv v = conv_of(a);
  if (v.c > MAX_CHANNELS)
    return 0;
  RowsKind kind = rows_kind(&v);
  if (v.planar && kind != ROWS_GATHERED)
    return 0;
  const float **rows = __builtin_alloca(sizeof(float *) * (size_t)(v.taps * TILE));
  float *buf = kind == ROWS_GATHERED
                   ? __builtin_alloca(sizeof(float) * (size_t)(TILE * v.taps * v.c + 16))
                   : NULL;
  if (v.planar) {
    long long *offsets = __builtin_alloca(sizeof(long long) * (size_t)(v.taps * v.c));
    for (long long c = 0; c < v.c; c++)
      for (long long i = 0; i < v.kh; i++)
        for (long long j = 0; j < v.kw; j++)
          offsets[c * v.taps + i * v.kw + j] = c * v.h * v.w + i * v.dh * v.w + j * v.dw;
    v.offsets = offsets;
  }
  /* Units run tile by tile, each tile's groups in turn, while the filter
     is small; one larger than a core's L2 and with more channels than
     pixels (a last stage's) runs group by group, each part then streaming
     its groups' filter once. The order moves work between parts only. */
  long long tiles = a->dims[0], last = -1;
  bool by_group = v.m * v.taps * v.c * 4 >= (1 << 20) && v.m > v.pixels;
  for (long long u = begin; u < end; u++) {
    long long t = by_group ? u % tiles : u / v.groups;
    long long m0 = (by_group ? u / tiles : u % v.groups) * GROUP, p0 = t * TILE;
    int valid = (int)(v.pixels - p0 < TILE ? v.pixels - p0 : TILE);
    long long count = v.m - m0 < GROUP ? v.m - m0 : GROUP;
    run_unit(&v, kind, p0, valid, m0, count, rows, buf, t == last);
    last = t;
  }
  return 1;
}

/* ---- opc_conv_depthwise_nhwc: a row of pixels by 64 channels an item */

/*
 * One block of 16 channels (the first `count` of them stored) of an output
 * row, all its pixels: taps are rows [r0, r1) of the filter (those inside
 * x) by all KW columns. Eight pixels at a time: per filter row, the
 * columns of x they read (7 SW + (KW - 1) DW + 1, DW the dilation along
 * W) are loaded once each, as zeros past x's edges, and shared by the
 * pixels whose taps they are; the 8 sums keep the multiply-adds
 * independent. KH, KW, SW and DW are constants where it is inlined.
 * depthwise_block computes eight pixels from output column j; when
 * `inside`, every column they read lies inside x, and none is tested.
 */
static inline __attribute__((always_inline)) void
depthwise_block(const Conv *v, const float *image, long long h0, long long r0, long long r1,
                long long c, long long count, long long p_row, long long j, bool inside, int KH,
                int KW, int SW, int DW) {
  enum { COLS = 7 * 2 + 7 }; /* the most columns: SW 2, KW 7 (or SW 1, KW 5, DW 2) */
  long long c16 = (v->c + 15) / 16 * 16, xs = v->xs, width = v->w;
  __mmask16 keep = first16(count);
  __m512 acc[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; k++)
    acc[k] = _mm512_loadu_ps(v->bias + c);
  long long first = j * SW - v->pw; /* the first column read */
  /* The rows of x that the next output row adds, for the columns this
     block reads: fetched ahead, since x has just been written by another
     layer and is rarely still in this core's caches. */
  for (long long q = 0; q < v->sh && q < KH; q++) {
    long long hh = h0 + v->sh + (KH - 1 - q) * v->dh;
    if (hh < 0 || hh >= v->h)
      continue;
    const char *ahead = (const char *)(image + hh * width * xs + c);
    for (long long i = first < 0 ? 0 : first; i < first + 8 * SW && i < width; i++)
      _mm_prefetch(ahead + i * xs * (long long)sizeof(float), _MM_HINT_T0);
  }
#pragma GCC unroll 7
  for (int r = 0; r < KH; r++) {
    if (r < r0 || r >= r1)
      continue;
    const float *line = image + (h0 + r * v->dh) * width * xs + c;
    __m512 col[COLS], w[7];
#pragma GCC unroll 7
    for (int q = 0; q < KW; q++)
      w[q] = _mm512_loadu_ps(v->filter + (r * KW + q) * c16 + c);
#pragma GCC unroll 21
    for (int i = 0; i < 7 * SW + (KW - 1) * DW + 1; i++) {
      long long ww = first + i;
      bool in = inside || (ww >= 0 && ww < width);
      col[i] = _mm512_maskz_loadu_ps(in ? keep : 0, line + (in ? ww : 0) * xs);
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
#pragma GCC unroll 7
      for (int q = 0; q < KW; q++)
        acc[k] = _mm512_fmadd_ps(col[k * SW + q * DW], w[q], acc[k]);
  }
  /* A constant count lets acc stay in registers. */
  if (v->ow - j >= 8)
    finish_pixels(v, acc, 1, 8, 1, count, p_row + j, c);
  else
    finish_pixels(v, acc, 1, (int)(v->ow - j), 1, count, p_row + j, c);
}

static inline __attribute__((always_inline)) void
depthwise_row(const Conv *v, const float *image, long long h0, long long r0, long long r1,
              long long c, long long count, long long p_row, int KH, int KW, int SW, int DW) {
  for (long long j = 0; j < v->ow; j += 8) {
    long long first = j * SW - v->pw;
    if (first >= 0 && first + 7 * SW + (KW - 1) * DW + 1 <= v->w)
      depthwise_block(v, image, h0, r0, r1, c, count, p_row, j, true, KH, KW, SW, DW);
    else
      depthwise_block(v, image, h0, r0, r1, c, count, p_row, j, false, KH, KW, SW, DW);
  }
}

/* Any pixel of the block, any window: each tap tested. */
static void depthwise_edge(const Conv *v, const float *image, long long h0, long long j,
                           long long c, long long count, long long p) {
  long long c16 = (v->c + 15) / 16 * 16;
  __mmask16 keep = first16(count);
  __m512 acc = _mm512_loadu_ps(v->bias + c);
  for (long long r = 0; r < v->kh; r++) {
    long long hh = h0 + r * v->dh;
    for (long long q = 0; q < v->kw; q++) {
      long long ww = j * v->sw - v->pw + q * v->dw;
      if (hh < 0 || hh >= v->h || ww < 0 || ww >= v->w)
        continue;
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(keep, image + (hh * v->w + ww) * v->xs + c),
                            _mm512_loadu_ps(v->filter + (r * v->kw + q) * c16 + c), acc);
    }
  }
  finish(v, &acc, 1, count, v->z ? v->z + p * v->zs + c : NULL, v->y + p * v->ys + c);
}

int opc_conv_depthwise_nhwc_fast(const struct opc_kargs *a, long long begin, long long end) {
  Conv v = conv_of(a);
  long long oh = a->dims[1], groups = a->dims[2];
  for (long long item = begin; item < end; item++) {
    long long img = item / (oh * groups), row = item / groups % oh;
    long long c0 = item % groups * GROUP, left = v.c - c0 < GROUP ? v.c - c0 : GROUP;
    long long h0 = row * v.sh - v.ph, p_row = (img * oh + row) * v.ow;
    const float *image = v.x + img * v.h * v.w * v.xs;
    /* The filter rows whose taps lie inside x. */
    long long r0 = h0 >= 0 ? 0 : (-h0 + v.dh - 1) / v.dh, r1 = v.kh;
    while (r1 > r0 && h0 + (r1 - 1) * v.dh >= v.h)
      r1--;
    for (long long c = c0; c < c0 + left; c += 16) {
      long long count = c0 + left - c < 16 ? c0 + left - c : 16;
      /* The filters of MobileNets, EfficientNets and PP-LCNet (3x3, 5x5),
         ConvNeXt (7x7), and the dilated last stages of DeepLab's and
         LRASPP's backbones (3x3 and 5x5, dilation 2). */
      bool plain = v.dw == 1 && (v.sw == 1 || v.sw == 2);
      bool dilated = v.dw == 2 && v.sw == 1;
      if (plain && v.kh == 3 && v.kw == 3 && v.sw == 1)
        depthwise_row(&v, image, h0, r0, r1, c, count, p_row, 3, 3, 1, 1);
      else if (plain && v.kh == 3 && v.kw == 3)
        depthwise_row(&v, image, h0, r0, r1, c, count, p_row, 3, 3, 2, 1);
      else if (plain && v.kh == 5 && v.kw == 5 && v.sw == 1)
        depthwise_row(&v, image, h0, r0, r1, c, count, p_row, 5, 5, 1, 1);
      else if (plain && v.kh == 5 && v.kw == 5)
        depthwise_row(&v, image, h0, r0, r1, c, count, p_row, 5, 5, 2, 1);
      else if (plain && v.kh == 7 && v.kw == 7 && v.sw == 1)
        depthwise_row(&v, image, h0, r0, r1, c, count, p_row, 7, 7, 1, 1);
      else if (plain && v.kh == 7 && v.kw == 7)
        depthwise_row(&v, image, h0, r0, r1, c, count, p_row, 7, 7, 2, 1);
      else if (dilated && v.kh == 3 && v.kw == 3)
        depthwise_row(&v, image, h0, r0, r1, c, count, p_row, 3, 3, 1, 2);
      else if (dilated && v.kh == 5 && v.kw == 5)
        depthwise_row(&v, image, h0, r0, r1, c, count, p_row, 5, 5, 1, 2);
      else
        for (long long j = 0; j < v.ow; j++)
          depthwise_edge(&v, image, h0, j, c, count, p_row + j);
    }
  }
  return 1;
}

/* ---- opc_pool_nhwc: a row of pixels by 64 channels an item */

/* The taps [lo, hi) of output position o along one axis that lie inside
   an input of `in` (opc_pool_taps). */
static inline void taps_inside(long long o, long long stride, long long pad, long long dil,
                               long long k, long long in, long long *lo, long long *hi) {
  long long start = o * stride - pad;
  long long first = start >= 0 ? 0 : -start, past = start >= in ? 0 : in - start;
  first = (first + dil - 1) / dil;
  past = (past + dil - 1) / dil;
  *lo = first;
  *hi = past < k ? past : k;
}

/* One output pixel of a row, BLOCKS vectors of 16 channels from `image`
   (its channel c0; `keep` the last block's lanes), its taps rows [hlo,
   hhi) by columns [wlo, whi) of the window at row h0, column w0. A
   constant BLOCKS keeps the sums and the NaN masks in registers. */
static inline __attribute__((always_inline)) void
pool_pixel(const Conv *v, const float *image, long long h0, long long w0, long long hlo,
           long long hhi, long long wlo, long long whi, bool max, bool include_pad,
           __mmask16 keep, float *y, int BLOCKS) {
  __m512 acc[4];
  __mmask16 nan[4] = {0, 0, 0, 0};
  for (int b = 0; b < BLOCKS; b++)
    acc[b] = max ? _mm512_set1_ps(-__builtin_inff()) : _mm512_setzero_ps();
  for (long long r = hlo; r < hhi; r++) {
    const float *line = image + (h0 + r * v->dh) * v->w * v->xs;
    for (long long q = wlo; q < whi; q++) {
      const float *at = line + (w0 + q * v->dw) * v->xs;
      for (int b = 0; b < BLOCKS; b++) {
        __m512 x = _mm512_maskz_loadu_ps(b == BLOCKS - 1 ? keep : 0xffff, at + 16 * b);
        if (max) {
          nan[b] |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
          acc[b] = _mm512_max_ps(x, acc[b]);
        } else {
          acc[b] = _mm512_add_ps(acc[b], x);
        }
      }
    }
  }
  long long taps = (hhi > hlo ? hhi - hlo : 0) * (whi > wlo ? whi - wlo : 0);
  float count = (float)(include_pad ? v->kh * v->kw : taps);
  for (int b = 0; b < BLOCKS; b++) {
    __m512 out = acc[b];
    if (max)
      out = _mm512_mask_mov_ps(out, nan[b], _mm512_set1_ps(__builtin_nanf("")));
    else
      out = count != 0.0f ? _mm512_div_ps(out, _mm512_set1_ps(count))
                          : _mm512_set1_ps(__builtin_nanf(""));
    _mm512_mask_storeu_ps(y + 16 * b, b == BLOCKS - 1 ? keep : 0xffff, out);
  }
}

/* An output row's pixels, BLOCKS vectors of channels from c0. */
static inline __attribute__((always_inline)) void
pool_row(const Conv *v, long long img, long long row, long long oh, long long c0, long long left,
         bool max, bool include_pad, int BLOCKS) {
  long long hlo, hhi;
  taps_inside(row, v->sh, v->ph, v->dh, v->kh, v->h, &hlo, &hhi);
  __mmask16 keep = first16(left - 16 * (BLOCKS - 1));
  const float *image = v->x + img * v->h * v->w * v->xs + c0;
  for (long long j = 0; j < v->ow; j++) {
    long long wlo, whi, p = (img * oh + row) * v->ow + j;
    taps_inside(j, v->sw, v->pw, v->dw, v->kw, v->w, &wlo, &whi);
    pool_pixel(v, image, row * v->sh - v->ph, j * v->sw - v->pw, hlo, hhi, wlo, whi, max,
               include_pad, keep, v->y + p * v->ys + c0, BLOCKS);
  }
}

int opc_pool_nhwc_fast(const struct opc_kargs *a, long long begin, long long end) {
  Conv v = conv_of(a);
  long long oh = a->dims[1], groups = a->dims[2];
  bool max = a->i[12] != 0, include_pad = a->i[13] != 0;
  for (long long item = begin; item < end; item++) {
    long long img = item / (oh * groups), row = item / groups % oh;
    long long c0 = item % groups * GROUP, left = v.c - c0 < GROUP ? v.c - c0 : GROUP;
    switch ((left + 15) / 16) {
    case 4:
      pool_row(&v, img, row, oh, c0, left, max, include_pad, 4);
      break;
    case 3:
      pool_row(&v, img, row, oh, c0, left, max, include_pad, 3);
      break;
    case 2:
      pool_row(&v, img, row, oh, c0, left, max, include_pad, 2);
      break;
    default:
      pool_row(&v, img, row, oh, c0, left, max, include_pad, 1);
    }
  }
  return 1;
}

/* ---- opc_channel_affine_nhwc: 16 pixels a unit */

int opc_channel_affine_nhwc_fast(const struct opc_kargs *a, long long begin, long long end) {
  const float *x = a->x[0], *mul = a->x[1], *add = a->x[2];
  float *y = a->y;
  long long c = a->i[0], pixels = a->i[1], xs = a->xstride[0][0], ys = a->ystride[0];
  Conv v = {.act = (int)a->i[2], .p0 = a->f[0], .p1 = a->f[1]};
  long long stop = end * 16 < pixels ? end * 16 : pixels;
  for (long long p = begin * 16; p < stop; p++) {
    const float *m = mul + p / a->i[4] * a->i[3];
    for (long long c0 = 0; c0 < c; c0 += GROUP) {
      long long left = c - c0 < GROUP ? c - c0 : GROUP;
      int blocks = (int)((left + 15) / 16);
      __m512 acc[4];
      for (int b = 0; b < blocks; b++) {
        __mmask16 keep = first16(left - 16 * b);
        __m512 in = _mm512_maskz_loadu_ps(keep, x + p * xs + c0 + 16 * b);
        __m512 shift = add ? _mm512_maskz_loadu_ps(keep, add + c0 + 16 * b) : _mm512_setzero_ps();
        acc[b] = _mm512_fmadd_ps(in, _mm512_maskz_loadu_ps(keep, m + c0 + 16 * b), shift);
      }
      finish(&v, acc, blocks, left, NULL, y + p * ys + c0);
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

int opc_pool_nhwc_fast(const struct opc_kargs *a, long long begin, long long end) {
  (void)a, (void)begin, (void)end;
  return 0;
}

int opc_channel_affine_nhwc_fast(const struct opc_kargs *a, long long begin, long long end) {
  (void)a, (void)begin, (void)end;
  return 0;
}
#endif
