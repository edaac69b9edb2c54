/*
 * int8_avx512.c - int8 kernels of opc_kernels.inc along AVX-512:
 * opc_int8_conv_packed's units with VNNI, opc_qconv_depthwise_nhwc's
 * items, and opc_quantized_add's dense runs.
 * The kernels say what they compute; this is the same arithmetic, fast.
 *
 * opc_int8_conv_packed: a unit is 12 output pixels by up to 64 channels
 * (four blocks of 16). Its taps are gathered into rows of uint8 values v,
 * one row per pixel, a chunk of the sum's length at a time; then each
 * VPDPBUSD adds, for 16 channels of one pixel, four products of a row's
 * uint8 bytes by the packed filter's int8 bytes to the int32 sums. The
 * products and sums are exact integers, as in the plain body, and the
 * requantisation is opc_requantize_of's float32 steps one by one
 * (convert, multiply, round half to even, add, saturate), so the bytes
 * are the plain body's.
 */
#include <stdbool.h>
#include <string.h>

#include "opc_kargs.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

enum {
  TILE_PIXELS = 12, /* a unit's pixels: two runs of ROWS */
  ROWS = 6,         /* pixels whose sums stay in registers, 4 vectors each */
  GROUP = 64,       /* a unit's channels */
  CHUNK = 4096,     /* bytes of a row gathered at a time (a multiple of 4) */
};

/* The convolution's shape, read once from the kernel's arguments. */
typedef struct {
  const unsigned char *x; /* bytes of T */
  const signed char *packed;
  const int *corr;
  const float *mult;
  unsigned char *y;
  long long c, h, w, kh, kw, sh, sw, dh, dw, ph, pw, ow, frame, m, pixels, k, k4, groups;
  unsigned char flip, padded; /* v = x ^ flip: 0x80 makes int8 x + 128 */
  bool planar;                /* x in ONNX's order [N, C, H, W] */
  float lo, hi, zero;
} Conv;

static Conv conv_of(const struct opc_kargs *a, int x_signed) {
  Conv v = {.x = a->x[0], .packed = a->x[1], .corr = a->x[2], .mult = a->x[3], .y = a->y};
  const long long *i = a->i;
  v.c = i[0], v.h = i[1], v.w = i[2], v.kh = i[3], v.kw = i[4], v.sh = i[5], v.sw = i[6];
  v.dh = i[7], v.dw = i[8], v.ph = i[9], v.pw = i[10], v.ow = i[11], v.frame = i[12];
  v.m = i[13], v.pixels = i[15];
  v.k = v.c * v.kh * v.kw;
  v.k4 = (v.k + 3) / 4 * 4;
  v.groups = a->dims[1];
  v.flip = x_signed ? 0x80 : 0;
  v.padded = (unsigned char)i[14];
  v.lo = a->f[0], v.hi = a->f[1], v.zero = a->f[2];
  v.planar = a->f[3] != 0.0f;
  return v;
}

/* n bytes from `at` to `out`, each XORed with flip: 64 at a time, the
   rest masked (a masked load reads nothing past its bytes). */
static inline __attribute__((always_inline)) VNNI void copy_flipped(unsigned char *out,
                                                                    const unsigned char *at,
                                                                    long long n,
                                                                    unsigned char flip) {
  __m512i f = _mm512_set1_epi8((char)flip);
  long long j = 0;
  for (; j + 64 <= n; j += 64)
    _mm512_storeu_si512(out + j, _mm512_xor_si512(_mm512_loadu_si512(at + j), f));
  if (j < n) {
    __mmask64 keep = ((__mmask64)1 << (n - j)) - 1;
    _mm512_mask_storeu_epi8(out + j, keep,
                            _mm512_xor_si512(_mm512_maskz_loadu_epi8(keep, at + j), f));
  }
}

/* Bytes [k0, k1) of pixel p's row of channels-last x: each tap's C
   channels in turn, zeros past K. With dilation 1 along W the taps of a
   filter row that lie inside x are x's consecutive bytes, copied at once
   (the stem's taps hold 3 or 4 channels each); a tap outside x is the
   padding's value. */
static VNNI void gather_row_channels_last(const Conv *v, long long p, long long k0, long long k1,
                                          unsigned char *row) {
  long long img = p / v->frame, hw = p % v->frame;
  long long h0 = hw / v->ow * v->sh - v->ph, w0 = hw % v->ow * v->sw - v->pw;
  long long end = k1 < v->k ? k1 : v->k;
  if (k0 == 0 && end == v->k && v->dw == 1 && w0 >= 0 && w0 + v->kw <= v->w) {
    /* the whole row, each filter row's taps inside x along W: one copy
       per filter row, no division per tap */
    long long run = v->kw * v->c;
    for (long long r = 0; r < v->kh; r++) {
      long long hh = h0 + r * v->dh;
      if (hh >= 0 && hh < v->h)
        copy_flipped(row + r * run, v->x + ((img * v->h + hh) * v->w + w0) * v->c, run, v->flip);
      else
        memset(row + r * run, v->padded, (size_t)run);
    }
    if (end < k1)
      memset(row + end, 0, (size_t)(k1 - end));
    return;
  }
  long long tap = k0 / v->c;
  for (long long k = k0; k < end; tap = k / v->c) {
    long long r = tap / v->kw, q = tap % v->kw, hh = h0 + r * v->dh, ww = w0 + q * v->dw;
    bool row_inside = hh >= 0 && hh < v->h;
    /* the taps copied at once: to the filter row's end, or this one */
    long long taps = v->dw == 1 && ww >= 0 && w0 + v->kw <= v->w ? v->kw - q : 1;
    long long next = (tap + taps) * v->c < end ? (tap + taps) * v->c : end;
    if (row_inside && ww >= 0 && ww < v->w)
      copy_flipped(row + (k - k0), v->x + ((img * v->h + hh) * v->w + ww) * v->c + (k - tap * v->c),
                   next - k, v->flip);
    else
      memset(row + (k - k0), v->padded, (size_t)(next - k));
    k = next;
  }
  if (end < k1)
    memset(row + (end - k0), 0, (size_t)(k1 - end));
}

/* The same of x in ONNX's order [N, C, H, W], whose row runs over the
   channels, each over its filter rows, each over a filter row's taps (the
   packed filter's order for such x): a filter row's taps inside x are
   consecutive bytes of x's row when dilation along W is 1. One filter row
   of one channel is a segment. */
static VNNI void gather_row_planar(const Conv *v, long long p, long long k0, long long k1,
                                   unsigned char *row) {
  long long img = p / v->frame, hw = p % v->frame;
  long long h0 = hw / v->ow * v->sh - v->ph, w0 = hw % v->ow * v->sw - v->pw;
  long long end = k1 < v->k ? k1 : v->k, plane = v->h * v->w;
  bool whole = v->dw == 1 && w0 >= 0 && w0 + v->kw <= v->w; /* a segment inside x along W */
  if (whole && k0 == 0 && end == v->k && h0 >= 0 && h0 + (v->kh - 1) * v->dh < v->h &&
      v->kw <= 64) { /* the window inside x: each segment one masked copy */
    __mmask64 keep = v->kw == 64 ? ~(__mmask64)0 : ((__mmask64)1 << v->kw) - 1;
    __m512i f = _mm512_set1_epi8((char)v->flip);
    const unsigned char *at = v->x + img * v->c * plane + h0 * v->w + w0;
    unsigned char *out = row;
    for (long long c = 0; c < v->c; c++, at += plane)
      for (long long r = 0; r < v->kh; r++, out += v->kw) {
        __m512i bytes = _mm512_maskz_loadu_epi8(keep, at + r * v->dh * v->w);
        _mm512_mask_storeu_epi8(out, keep, _mm512_xor_si512(bytes, f));
      }
    if (end < k1)
      memset(row + end, 0, (size_t)(k1 - end));
    return;
  }
  long long seg = k0 / v->kw, r = seg % v->kh;
  const unsigned char *channel = v->x + (img * v->c + seg / v->kh) * plane;
  for (long long k = seg * v->kw; k < end; k += v->kw) {
    long long hh = h0 + r * v->dh;
    long long q0 = k < k0 ? k0 - k : 0, q1 = k + v->kw < end ? v->kw : end - k;
    unsigned char *out = row + (k + q0 - k0);
    if (hh < 0 || hh >= v->h) {
      memset(out, v->padded, (size_t)(q1 - q0));
    } else if (whole) {
      copy_flipped(out, channel + hh * v->w + w0 + q0, q1 - q0, v->flip);
    } else {
      for (long long q = q0; q < q1; q++) {
        long long ww = w0 + q * v->dw;
        out[q - q0] = ww >= 0 && ww < v->w ? channel[hh * v->w + ww] ^ v->flip : v->padded;
      }
    }
    if (++r == v->kh)
      r = 0, channel += plane;
  }
  if (end < k1)
    memset(row + (end - k0), 0, (size_t)(k1 - end));
}

static VNNI void gather_row(const Conv *v, long long p, long long k0, long long k1,
                            unsigned char *row) {
  (v->planar ? gather_row_planar : gather_row_channels_last)(v, p, k0, k1, row);
}

/* acc + the four products of x's uint8 and w's int8 bytes in each lane.
   GCC 12 copies the intrinsic's accumulator through a spare register and
   stores it to the stack on every step of a loop of many sums; tied to
   its register ("+v"), the sum stays there. */
static inline __attribute__((always_inline)) VNNI __m512i dpbusd(__m512i acc, __m512i x,
                                                                 __m512i w) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w));
  return acc;
}

/* Where a unit's rows of bytes lie: gathered into a buffer, or x itself
   (a 1x1 convolution of stride 1 without padding over uint8 x, whose
   pixels are its rows). */
typedef struct {
  const unsigned char *at;
  long long stride; /* bytes from one row to the next */
} Rows;

/* sums[r][b] += row r's bytes [0, len) by block `first` + b of the filter,
   byte k0 of the sum on, for `rows` pixels by `blocks` blocks of 16
   channels; fresh: the sums start at 0 rather than from sums. The edges'
   form: its sums live in an array, which GCC keeps in memory. */
static VNNI void dot_any(const Conv *v, Rows in, long long len, long long k0, long long first,
                         int rows, int blocks, int (*sums)[GROUP], bool fresh) {
  __m512i acc[ROWS][4];
  for (int r = 0; r < rows; r++)
    for (int b = 0; b < blocks; b++)
      acc[r][b] = fresh ? _mm512_setzero_si512() : _mm512_loadu_si512(sums[r] + 16 * b);
  const signed char *w = v->packed + first * 16 * v->k4 + k0 * 16;
  for (long long q = 0; q < len; q += 4) {
    __m512i wv[4];
    for (int b = 0; b < blocks; b++)
      wv[b] = _mm512_loadu_si512(w + b * 16 * v->k4 + q * 16);
    for (int r = 0; r < rows; r++) {
      int four;
      memcpy(&four, in.at + r * in.stride + q, 4);
      __m512i x = _mm512_set1_epi32(four);
      for (int b = 0; b < blocks; b++)
        acc[r][b] = dpbusd(acc[r][b], x, wv[b]);
    }
  }
  for (int r = 0; r < rows; r++)
    for (int b = 0; b < blocks; b++)
      _mm512_storeu_si512(sums[r] + 16 * b, acc[r][b]);
}

/* The same for 6 rows and NB blocks (1 to 4), its sums named so that
   they stay in registers: at most 24 of them, the NB weight vectors and
   the broadcast row bytes fit AVX-512's 32. */
static inline __attribute__((always_inline)) VNNI __m512i sum_start(const int *sums, bool fresh) {
  return fresh ? _mm512_setzero_si512() : _mm512_loadu_si512(sums);
}
#define DOT_ROW(r)                                                                  \
  __m512i s##r##0 = sum_start(sums[r], fresh);                                      \
  __m512i s##r##1 = NB > 1 ? sum_start(sums[r] + 16, fresh) : _mm512_setzero_si512(); \
  __m512i s##r##2 = NB > 2 ? sum_start(sums[r] + 32, fresh) : _mm512_setzero_si512(); \
  __m512i s##r##3 = NB > 3 ? sum_start(sums[r] + 48, fresh) : _mm512_setzero_si512()
#define DOT_STEP(r)                                                                 \
  do {                                                                              \
    int four;                                                                       \
    memcpy(&four, in.at + (r) * in.stride + q, 4);                                  \
    __m512i x = _mm512_set1_epi32(four);                                            \
    s##r##0 = dpbusd(s##r##0, x, w0);                                               \
    if (NB > 1)                                                                     \
      s##r##1 = dpbusd(s##r##1, x, w1);                                             \
    if (NB > 2)                                                                     \
      s##r##2 = dpbusd(s##r##2, x, w2);                                             \
    if (NB > 3)                                                                     \
      s##r##3 = dpbusd(s##r##3, x, w3);                                             \
  } while (0)
#define DOT_STORE(r)                                                                \
  do {                                                                              \
    _mm512_storeu_si512(sums[r], s##r##0);                                          \
    if (NB > 1)                                                                     \
      _mm512_storeu_si512(sums[r] + 16, s##r##1);                                   \
    if (NB > 2)                                                                     \
      _mm512_storeu_si512(sums[r] + 32, s##r##2);                                   \
    if (NB > 3)                                                                     \
      _mm512_storeu_si512(sums[r] + 48, s##r##3);                                   \
  } while (0)
#define DOT_SIX(name, nb)                                                           \
  static VNNI void name(const Conv *v, Rows in, long long len, long long k0,        \
                        long long first, int (*sums)[GROUP], bool fresh) {          \
    enum { NB = nb };                                                               \
    DOT_ROW(0);                                                                     \
    DOT_ROW(1);                                                                     \
    DOT_ROW(2);                                                                     \
    DOT_ROW(3);                                                                     \
    DOT_ROW(4);                                                                     \
    DOT_ROW(5);                                                                     \
    const signed char *w = v->packed + first * 16 * v->k4 + k0 * 16;                \
    long long block = 16 * v->k4;                                                   \
    for (long long q = 0; q < len; q += 4, w += 64) {                               \
      __m512i w0 = _mm512_loadu_si512(w);                                           \
      __m512i w1 = NB > 1 ? _mm512_loadu_si512(w + block) : w0;                     \
      __m512i w2 = NB > 2 ? _mm512_loadu_si512(w + 2 * block) : w0;                 \
      __m512i w3 = NB > 3 ? _mm512_loadu_si512(w + 3 * block) : w0;                 \
      DOT_STEP(0);                                                                  \
      DOT_STEP(1);                                                                  \
      DOT_STEP(2);                                                                  \
      DOT_STEP(3);                                                                  \
      DOT_STEP(4);                                                                  \
      DOT_STEP(5);                                                                  \
    }                                                                               \
    DOT_STORE(0);                                                                   \
    DOT_STORE(1);                                                                   \
    DOT_STORE(2);                                                                   \
    DOT_STORE(3);                                                                   \
    DOT_STORE(4);                                                                   \
    DOT_STORE(5);                                                                   \
  }
DOT_SIX(dot_six_1, 1)
DOT_SIX(dot_six_2, 2)
DOT_SIX(dot_six_3, 3)
DOT_SIX(dot_six_4, 4)

typedef void DotSix(const Conv *v, Rows in, long long len, long long k0, long long first,
                    int (*sums)[GROUP], bool fresh);
static DotSix *const dot_six[5] = {NULL, dot_six_1, dot_six_2, dot_six_3, dot_six_4};

/* opc_requantize_of's float32 steps on 16 int32 sums: convert, multiply,
   round half to even, add the zero point, saturate; as bytes. */
static inline __attribute__((always_inline)) VNNI __m128i requantized(__m512i s, __m512 mult,
                                                                      float zero, float lo,
                                                                      float hi) {
  __m512 q = _mm512_mul_ps(_mm512_cvtepi32_ps(s), mult);
  q = _mm512_add_ps(_mm512_roundscale_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                    _mm512_set1_ps(zero));
  /* max takes its second operand where q is NaN: lo, as the formula's test does */
  q = _mm512_min_ps(_mm512_max_ps(q, _mm512_set1_ps(lo)), _mm512_set1_ps(hi));
  return _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q));
}

/* 16 channels of one pixel from their sums. */
static VNNI void requantize16(const Conv *v, const int *sums, long long ch, long long count,
                              unsigned char *y) {
  __mmask16 keep = (__mmask16)(count >= 16 ? 0xffff : (1u << count) - 1);
  __m512i s = _mm512_add_epi32(_mm512_loadu_si512(sums),
                               _mm512_maskz_loadu_epi32(keep, v->corr + ch));
  _mm_mask_storeu_epi8(y, keep,
                       requantized(s, _mm512_maskz_loadu_ps(keep, v->mult + ch), v->zero, v->lo,
                                   v->hi));
}

/* Whether pixel rows are x's own pixels: a 1x1 filter of stride 1 over
   channels-last uint8 x without padding, whose channels fill the sum (C a
   multiple of 4). */
static bool rows_are_pixels(const Conv *v) {
  return !v->planar && !v->flip && v->kh == 1 && v->kw == 1 && v->sh == 1 && v->sw == 1 &&
         v->ph == 0 && v->pw == 0 && v->frame == v->h * v->w && v->c == v->k4;
}

/* One unit: pixels [p0, p0 + rows) by channels [m0, m0 + count). */
static VNNI void run_unit(const Conv *v, long long p0, int rows, long long m0, long long count,
                          unsigned char *buf, long long *gathered) {
  int sums[TILE_PIXELS][GROUP];
  int blocks = (int)((count + 15) / 16);
  for (long long k0 = 0; k0 < v->k4; k0 += CHUNK) {
    long long len = v->k4 - k0 < CHUNK ? v->k4 - k0 : CHUNK;
    Rows in = {buf, CHUNK};
    if (rows_are_pixels(v)) {
      in = (Rows){v->x + p0 * v->c + k0, v->c};
    } else if (!(len == v->k4 && *gathered == p0)) {
      /* One chunk holds the whole row: the next unit of these pixels reuses it. */
      for (int r = 0; r < rows; r++)
        gather_row(v, p0 + r, k0, k0 + len, buf + r * CHUNK);
      *gathered = len == v->k4 ? p0 : -1;
    }
    for (int r0 = 0; r0 < rows; r0 += ROWS) {
      int n = rows - r0 < ROWS ? rows - r0 : ROWS;
      Rows part = {in.at + r0 * in.stride, in.stride};
      if (n == ROWS)
        dot_six[blocks](v, part, len, k0, m0 / 16, sums + r0, k0 == 0);
      else
        dot_any(v, part, len, k0, m0 / 16, n, blocks, sums + r0, k0 == 0);
    }
  }
  for (int r = 0; r < rows; r++)
    for (long long b = 0; b < count; b += 16)
      requantize16(v, sums[r] + b, m0 + b, count - b < 16 ? count - b : 16,
                   v->y + (p0 + r) * v->m + m0 + b);
}

static bool vnni_usable(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni");
}

static bool avx512bw_usable(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

int opc_int8_conv_packed_vnni(const struct opc_kargs *a, int x_signed, long long begin,
                              long long end) {
  if (!vnni_usable())
    return 0;
  Conv v = conv_of(a, x_signed);
  unsigned char buf[TILE_PIXELS * CHUNK];
  long long gathered = -1; /* the first pixel of the rows in buf, when whole */
  for (long long u = begin; u < end; u++) {
    long long p0 = u / v.groups * TILE_PIXELS, m0 = u % v.groups * GROUP;
    int rows = (int)(v.pixels - p0 < TILE_PIXELS ? v.pixels - p0 : TILE_PIXELS);
    long long count = v.m - m0 < GROUP ? v.m - m0 : GROUP;
    run_unit(&v, p0, rows, m0, count, buf, &gathered);
  }
  return 1;
}

/* ---- opc_qconv_depthwise_nhwc: 4 pixels of a row by 32 channels an item */

/* The kernel's arguments, read once. */
typedef struct {
  const unsigned char *x;
  const int *filter, *bias;
  const float *mult;
  unsigned char *y;
  long long c, h, w, kh, kw, sh, sw, dh, dw, ph, pw, ow;
  long long dims[4]; /* N, H', W' in runs of 4, C in runs of 32 */
  int zx;
  bool x_signed;
  float zero, lo, hi;
} Depthwise;

/* 16 bytes of x (count of them) widened to int32, less x's zero point. */
static inline __attribute__((always_inline)) VNNI __m512i
widen_less(const Depthwise *d, const unsigned char *at, __mmask16 keep) {
  __m128i bytes = _mm_maskz_loadu_epi8(keep, at);
  __m512i v = d->x_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
  return _mm512_sub_epi32(v, _mm512_set1_epi32(d->zx));
}

/* 16 bytes of x at `at` widened to int32 (signed or not), less zx. */
static inline __attribute__((always_inline)) VNNI __m512i widened(const unsigned char *at,
                                                                  bool x_signed, __m512i zx) {
  __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)at);
  __m512i v = x_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
  return _mm512_sub_epi32(v, zx);
}

/* An item whose 4 pixels' windows lie inside x, of 32 channels (two) or
   16: the sums of the 4 pixels by 2 vectors of channels named, so that
   they stay in registers, from `at` (x at the first pixel's first tap,
   channel c0). */
#define DW_TAP(u)                                                                    \
  do {                                                                               \
    const unsigned char *px = tap + (u) * step;                                      \
    a##u##0 = _mm512_add_epi32(a##u##0, _mm512_mullo_epi32(widened(px, x_signed, zx), w0)); \
    if (two)                                                                         \
      a##u##1 =                                                                      \
          _mm512_add_epi32(a##u##1, _mm512_mullo_epi32(widened(px + 16, x_signed, zx), w1)); \
  } while (0)
static inline __attribute__((always_inline)) VNNI void
depthwise_inside(const Depthwise *d, const unsigned char *at, const int *taps, bool x_signed,
                 bool two, __m512i *sums) {
  __m512i zx = _mm512_set1_epi32(d->zx);
  __m512i a00 = _mm512_setzero_si512(), a01 = a00, a10 = a00, a11 = a00;
  __m512i a20 = a00, a21 = a00, a30 = a00, a31 = a00;
  long long step = d->sw * d->c;
  for (long long p = 0; p < d->kh; p++)
    for (long long q = 0; q < d->kw; q++) {
      const int *w = taps + (p * d->kw + q) * d->c;
      __m512i w0 = _mm512_loadu_si512(w), w1 = two ? _mm512_loadu_si512(w + 16) : w0;
      const unsigned char *tap = at + (p * d->dh * d->w + q * d->dw) * d->c;
      DW_TAP(0);
      DW_TAP(1);
      DW_TAP(2);
      DW_TAP(3);
    }
  sums[0] = a00, sums[1] = a01, sums[2] = a10, sums[3] = a11;
  sums[4] = a20, sums[5] = a21, sums[6] = a30, sums[7] = a31;
}

typedef void DepthwiseInside(const Depthwise *d, const unsigned char *at, const int *taps,
                             __m512i *sums);
#define DEPTHWISE_INSIDE(name, x_signed, two)                                          \
  static VNNI void name(const Depthwise *d, const unsigned char *at, const int *taps, \
                        __m512i *sums) {                                               \
    depthwise_inside(d, at, taps, x_signed, two, sums);                                \
  }
DEPTHWISE_INSIDE(depthwise_inside_u8_16, false, false)
DEPTHWISE_INSIDE(depthwise_inside_u8_32, false, true)
DEPTHWISE_INSIDE(depthwise_inside_i8_16, true, false)
DEPTHWISE_INSIDE(depthwise_inside_i8_32, true, true)
/* By x's signedness and the item's vectors of channels (1 or 2). */
static DepthwiseInside *const depthwise_inside_of[2][2] = {
    {depthwise_inside_u8_16, depthwise_inside_u8_32},
    {depthwise_inside_i8_16, depthwise_inside_i8_32}};

/* Any item: taps past x's edges skipped, channels past C masked. */
static VNNI void depthwise_edge(const Depthwise *d, long long n, long long oh, long long j0,
                                int pixels, long long c0, const __mmask16 *keep,
                                __m512i *sums) {
  long long run = d->c - c0 < 32 ? d->c - c0 : 32;
  for (int k = 0; k < 8; k++)
    sums[k] = _mm512_setzero_si512();
  long long h0 = oh * d->sh - d->ph;
  for (long long p = 0; p < d->kh; p++) {
    long long hh = h0 + p * d->dh;
    if (hh < 0 || hh >= d->h)
      continue;
    const unsigned char *row = d->x + ((n * d->h + hh) * d->w) * d->c + c0;
    for (long long q = 0; q < d->kw; q++) {
      const int *taps = d->filter + (p * d->kw + q) * d->c + c0;
      __m512i w0 = _mm512_maskz_loadu_epi32(keep[0], taps);
      __m512i w1 = _mm512_maskz_loadu_epi32(keep[1], taps + 16);
      for (int u = 0; u < pixels; u++) {
        long long ww = (j0 + u) * d->sw - d->pw + q * d->dw;
        if (ww < 0 || ww >= d->w)
          continue;
        const unsigned char *at = row + ww * d->c;
        sums[2 * u] = _mm512_add_epi32(sums[2 * u],
                                       _mm512_mullo_epi32(widen_less(d, at, keep[0]), w0));
        if (run > 16)
          sums[2 * u + 1] = _mm512_add_epi32(
              sums[2 * u + 1], _mm512_mullo_epi32(widen_less(d, at + 16, keep[1]), w1));
      }
    }
  }
}

/* One item: pixels [j0, j0 + pixels) of row oh of image n, channels
   [c0, c0 + 32) clipped to C. The sums wrap as the kernel's unsigned ones. */
static VNNI void depthwise_item(const Depthwise *d, long long n, long long oh, long long j0,
                                int pixels, long long c0) {
  long long run = d->c - c0 < 32 ? d->c - c0 : 32;
  __mmask16 keep[2] = {(__mmask16)(run >= 16 ? 0xffff : (1u << run) - 1),
                       (__mmask16)(run >= 32 ? 0xffff : run > 16 ? (1u << (run - 16)) - 1 : 0)};
  __m512i sums[8];
  long long h0 = oh * d->sh - d->ph, w0 = j0 * d->sw - d->pw;
  bool inside = (run == 32 || run == 16) && pixels == 4 && h0 >= 0 &&
                h0 + (d->kh - 1) * d->dh < d->h && w0 >= 0 &&
                w0 + 3 * d->sw + (d->kw - 1) * d->dw < d->w;
  if (inside) {
    const unsigned char *at = d->x + ((n * d->h + h0) * d->w + w0) * d->c + c0;
    depthwise_inside_of[d->x_signed][run == 32](d, at, d->filter + c0, sums);
  } else {
    depthwise_edge(d, n, oh, j0, pixels, c0, keep, sums);
  }
  for (int u = 0; u < pixels; u++) {
    unsigned char *y = d->y + ((n * d->dims[1] + oh) * d->ow + j0 + u) * d->c + c0;
    for (int v = 0; v < 2 && v * 16 < run; v++) {
      __m512i s = _mm512_add_epi32(sums[2 * u + v],
                                   _mm512_maskz_loadu_epi32(keep[v], d->bias + c0 + 16 * v));
      _mm_mask_storeu_epi8(y + 16 * v, keep[v],
                           requantized(s, _mm512_maskz_loadu_ps(keep[v], d->mult + c0 + 16 * v),
                                       d->zero, d->lo, d->hi));
    }
  }
}

int opc_qconv_depthwise_avx512(const struct opc_kargs *a, int x_signed, long long begin,
                               long long end) {
  if (!avx512bw_usable())
    return 0;
  const long long *i = a->i;
  Depthwise d = {.x = a->x[0], .filter = a->x[1], .mult = a->x[2], .bias = a->x[3], .y = a->y,
                 .c = i[0], .h = i[1], .w = i[2], .kh = i[3], .kw = i[4], .sh = i[5], .sw = i[6],
                 .dh = i[7], .dw = i[8], .ph = i[9], .pw = i[10], .ow = i[11], .zx = (int)i[12],
                 .x_signed = x_signed, .zero = (float)i[13], .lo = a->f[0], .hi = a->f[1]};
  memcpy(d.dims, a->dims, sizeof d.dims);
  for (long long r = begin; r < end; r++) {
    long long cq = r % d.dims[3], rest = r / d.dims[3];
    long long wq = rest % d.dims[2], oh = rest / d.dims[2] % d.dims[1], n = rest / d.dims[2] / d.dims[1];
    long long j0 = wq * 4;
    int pixels = (int)(d.ow - j0 < 4 ? d.ow - j0 : 4);
    depthwise_item(&d, n, oh, j0, pixels, cq * 32);
  }
  return 1;
}

/* ---- opc_quantized_add: y = Q(DQ(a) + DQ(b)) over dense bytes */

/* 16 bytes dequantized: (q - zero) * scale, the float32 product rounded
   once, as opc_dequantize8_of's exact double product rounded to float32. */
static inline __attribute__((always_inline)) VNNI __m512 dequantized16(const unsigned char *at,
                                                                       bool x_signed,
                                                                       __m512i zero,
                                                                       __m512 scale,
                                                                       __mmask16 keep) {
  __m128i bytes = _mm_maskz_loadu_epi8(keep, at);
  __m512i v = x_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(v, zero)), scale);
}

static inline __attribute__((always_inline)) VNNI void
quantized_add_run(const struct opc_kargs *a, bool x_signed, long long begin, long long end) {
  const unsigned char *xa = a->x[0], *xb = a->x[1];
  unsigned char *y = a->y;
  __m512i za = _mm512_set1_epi32((int)a->i[0]), zb = _mm512_set1_epi32((int)a->i[1]);
  __m512 sa = _mm512_set1_ps(a->f[2]), sb = _mm512_set1_ps(a->f[3]), sy = _mm512_set1_ps(a->f[4]);
  __m512 zy = _mm512_set1_ps((float)a->i[2]), lo = _mm512_set1_ps(a->f[0]);
  __m512 hi = _mm512_set1_ps(a->f[1]);
  for (long long i = begin; i < end; i += 16) {
    __mmask16 keep = (__mmask16)(end - i >= 16 ? 0xffff : (1u << (end - i)) - 1);
    __m512 v = _mm512_add_ps(dequantized16(xa + i, x_signed, za, sa, keep),
                             dequantized16(xb + i, x_signed, zb, sb, keep));
    /* opc_quantize_of: rint(v / scale) + zero, saturated (lo where NaN) */
    __m512 q = _mm512_roundscale_ps(_mm512_div_ps(v, sy),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(q, zy), lo), hi);
    _mm_mask_storeu_epi8(y + i, keep, _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q)));
  }
}

static VNNI void quantized_add_u8(const struct opc_kargs *a, long long begin, long long end) {
  quantized_add_run(a, false, begin, end);
}

static VNNI void quantized_add_i8(const struct opc_kargs *a, long long begin, long long end) {
  quantized_add_run(a, true, begin, end);
}

int opc_quantized_add_avx512(const struct opc_kargs *a, int x_signed, long long begin,
                             long long end) {
  bool dense = a->rank == 1 && a->xstride[0][0] == 1 && a->xstride[1][0] == 1 &&
               a->ystride[0] == 1;
  if (!dense || !avx512bw_usable())
    return 0;
  (x_signed ? quantized_add_i8 : quantized_add_u8)(a, begin, end);
  return 1;
}

/* ---- opc_max_pool_i8/u8 over channels-last bytes */

/* The taps [*lo, *hi) of a window of k taps (stride, pad, dilation) at
   output o that fall inside [0, in): opc_pool_taps of opc_kernels.inc. */
static void window_taps(long long o, long long stride, long long pad, long long dil, long long k,
                        long long in, long long *lo, long long *hi) {
  long long start = o * stride - pad;
  long long first = start >= 0 ? 0 : (-start + dil - 1) / dil;
  long long past = start >= in ? 0 : (in - start + dil - 1) / dil;
  *lo = first;
  *hi = past < k ? past : k;
}

/* The part [begin, end) of outputs numbered pixel by pixel, the channels
   innermost, as opc_max_pool_bytes numbers them: each pixel's channels
   64 at a time, one masked load and one max per tap. */
static inline __attribute__((always_inline)) VNNI void
max_pool_bytes(const struct opc_kargs *a, bool x_signed, long long begin, long long end) {
  const long long *dims = a->dims, *xs = a->xstride[0];
  long long c = dims[1], hw = dims[3] * dims[4], plane = dims[2] * hw;
  long long pixel = begin / c, c0 = begin % c, p = pixel % plane;
  long long o[5] = {pixel / plane, 0, p / hw, p / dims[4] % dims[3], p % dims[4]};
  __m512i lowest = _mm512_set1_epi8(x_signed ? (char)-128 : 0);
  for (long long i = begin; i < end; c0 = 0) {
    long long c1 = c0 + (end - i) < c ? c0 + (end - i) : c;
    long long lo[3], hi[3], y = o[0] * a->ystride[0], x = o[0] * xs[0];
    for (int d = 0; d < 3; d++) {
      window_taps(o[2 + d], a->i[3 + d], a->i[9 + d], a->i[6 + d], a->i[d], a->i[12 + d], &lo[d],
                  &hi[d]);
      y += o[2 + d] * a->ystride[2 + d];
      x += (o[2 + d] * a->i[3 + d] - a->i[9 + d]) * xs[2 + d];
    }
    for (long long cb = c0; cb < c1; cb += 64) {
      long long len = c1 - cb < 64 ? c1 - cb : 64;
      __mmask64 keep = len == 64 ? ~(__mmask64)0 : ((__mmask64)1 << len) - 1;
      __m512i m = lowest;
      for (long long k0 = lo[0]; k0 < hi[0]; k0++)
        for (long long k1 = lo[1]; k1 < hi[1]; k1++)
          for (long long k2 = lo[2]; k2 < hi[2]; k2++) {
            const unsigned char *at = (const unsigned char *)a->x[0] + x + cb +
                                      k0 * a->i[6] * xs[2] + k1 * a->i[7] * xs[3] +
                                      k2 * a->i[8] * xs[4];
            __m512i v = _mm512_maskz_loadu_epi8(keep, at);
            m = x_signed ? _mm512_max_epi8(m, v) : _mm512_max_epu8(m, v);
          }
      _mm512_mask_storeu_epi8((unsigned char *)a->y + y + cb, keep, m);
    }
    i += c1 - c0;
    if (++o[4] == dims[4]) { /* the next pixel: along W, H, D, then the image */
      o[4] = 0;
      if (++o[3] == dims[3]) {
        o[3] = 0;
        if (++o[2] == dims[2])
          o[2] = 0, o[0]++;
      }
    }
  }
}

static VNNI void max_pool_u8(const struct opc_kargs *a, long long begin, long long end) {
  max_pool_bytes(a, false, begin, end);
}

static VNNI void max_pool_i8(const struct opc_kargs *a, long long begin, long long end) {
  max_pool_bytes(a, true, begin, end);
}

int opc_max_pool_bytes_avx512(const struct opc_kargs *a, int x_signed, long long begin,
                              long long end) {
  if (!avx512bw_usable())
    return 0;
  (x_signed ? max_pool_i8 : max_pool_u8)(a, begin, end);
  return 1;
}

/* ---- opc_quantized_lookup: y = table[x] over dense bytes */

#define VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi")))

static bool vbmi_usable(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vbmi");
}

/* 64 bytes at a time: two VPERMI2B look up the index's low 7 bits in the
   table's halves, its top bit picks between them. */
static VBMI void lookup_bytes(const unsigned char *x, const unsigned char *table,
                              unsigned char *y, long long begin, long long end) {
  __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  for (long long i = begin; i < end; i += 64) {
    __mmask64 keep = end - i >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (end - i)) - 1;
    __m512i index = _mm512_maskz_loadu_epi8(keep, x + i);
    __m512i low = _mm512_permutex2var_epi8(t0, index, t1);
    __m512i high = _mm512_permutex2var_epi8(t2, index, t3);
    __m512i v = _mm512_mask_blend_epi8(_mm512_movepi8_mask(index), low, high);
    _mm512_mask_storeu_epi8(y + i, keep, v);
  }
}

/* A dense launch in one run; rows of consecutive bytes (rank 2, x and y
   each at its own row stride: a channels-last tensor's split half) a
   row's part at a time. */
int opc_lookup_bytes_vbmi(const struct opc_kargs *a, long long begin, long long end) {
  bool dense = a->rank == 1 && a->xstride[0][0] == 1 && a->ystride[0] == 1;
  bool rows = a->rank == 2 && a->xstride[0][1] == 1 && a->ystride[1] == 1;
  if (!(dense || rows) || !vbmi_usable())
    return 0;
  if (dense) {
    lookup_bytes(a->x[0], a->x[1], a->y, begin, end);
    return 1;
  }
  long long cols = a->dims[1];
  for (long long i = begin; i < end;) {
    long long r = i / cols, c = i % cols, n = end - i < cols - c ? end - i : cols - c;
    lookup_bytes((const unsigned char *)a->x[0] + r * a->xstride[0][0],
                 a->x[1], (unsigned char *)a->y + r * a->ystride[0], c, c + n);
    i += n;
  }
  return 1;
}

#else
int opc_lookup_bytes_vbmi(const struct opc_kargs *a, long long begin, long long end) {
  (void)a, (void)begin, (void)end;
  return 0;
}

int opc_max_pool_bytes_avx512(const struct opc_kargs *a, int x_signed, long long begin,
                              long long end) {
  (void)a, (void)x_signed, (void)begin, (void)end;
  return 0;
}

int opc_int8_conv_packed_vnni(const struct opc_kargs *a, int x_signed, long long begin,
                              long long end) {
  (void)a, (void)x_signed, (void)begin, (void)end;
  return 0;
}

int opc_qconv_depthwise_avx512(const struct opc_kargs *a, int x_signed, long long begin,
                               long long end) {
  (void)a, (void)x_signed, (void)begin, (void)end;
  return 0;
}

int opc_quantized_add_avx512(const struct opc_kargs *a, int x_signed, long long begin,
                             long long end) {
  (void)a, (void)x_signed, (void)begin, (void)end;
  return 0;
}
#endif
