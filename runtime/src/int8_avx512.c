/*
 * int8_avx512.c - int8 kernels of opc_kernels.inc along AVX-512:
 * opc_int8_conv_packed's units and opc_qconv_depthwise_nhwc's items with
 * VNNI, opc_quantized_add's dense runs, channels-last byte max pools, and
 * dense lookups with VBMI.
 * The kernels say what they compute; this is the same arithmetic, fast.
 *
 * opc_int8_conv_packed: a unit is 12 output pixels by up to 64 channels
 * (four blocks of 16). Its taps are gathered into rows of uint8 values v,
 * one row per pixel, a chunk of the sum's length at a time; then each
 * VPDPBUSD adds, for 16 channels of one pixel, four products of a row's
 * uint8 bytes by the packed filter's int8 bytes to the int32 sums. The
 * products and sums are exact integers, as in the plain body, and the
 * requantisation gives opc_requantize_of's values (requantized says why
 * its order of steps does), so the bytes are the plain body's.
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
   channels; fresh: the sums start at the channels' correction (v->corr,
   the bias less x's zero point times the filter's sums; padded to 16s)
   rather than from sums, which saves the epilogue adding it. The edges'
   form: its sums live in an array, which GCC keeps in memory. */
static VNNI void dot_any(const Conv *v, Rows in, long long len, long long k0, long long first,
                         int rows, int blocks, int (*sums)[GROUP], bool fresh) {
  __m512i acc[ROWS][4];
  for (int r = 0; r < rows; r++)
    for (int b = 0; b < blocks; b++)
      acc[r][b] = _mm512_loadu_si512(fresh ? v->corr + (first + b) * 16 : sums[r] + 16 * b);
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
static inline __attribute__((always_inline)) VNNI __m512i sum_start(const Conv *v, long long block,
                                                                    const int *sums, bool fresh) {
  return _mm512_loadu_si512(fresh ? v->corr + block * 16 : sums);
}
#define DOT_ROW(r)                                                                     \
  __m512i s##r##0 = sum_start(v, first, sums[r], fresh);                               \
  __m512i s##r##1 = NB > 1 ? sum_start(v, first + 1, sums[r] + 16, fresh) : _mm512_setzero_si512(); \
  __m512i s##r##2 = NB > 2 ? sum_start(v, first + 2, sums[r] + 32, fresh) : _mm512_setzero_si512(); \
  __m512i s##r##3 = NB > 3 ? sum_start(v, first + 3, sums[r] + 48, fresh) : _mm512_setzero_si512()
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

/* opc_requantize_of on 16 int32 sums, as int32 values within the output's
   byte range: the float32 product, then rint(product) + zero saturated to
   [lo, hi], taken as rint of the product saturated to [lo - zero, hi -
   zero], plus zero as an integer. The same values: the bounds less the
   zero point are integers, which rint keeps and whose order it keeps; a
   product past them saturates either way; and max takes its second
   operand where the product is NaN, lo - zero, as the formula's test
   takes lo. */
static inline __attribute__((always_inline)) VNNI __m512i requantized(__m512i s, __m512 mult,
                                                                      float zero, float lo,
                                                                      float hi) {
  __m512 q = _mm512_mul_ps(_mm512_cvtepi32_ps(s), mult);
  q = _mm512_min_ps(_mm512_max_ps(q, _mm512_set1_ps(lo - zero)), _mm512_set1_ps(hi - zero));
  __m512i r = _mm512_cvt_roundps_epi32(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_add_epi32(r, _mm512_set1_epi32((int)zero));
}

/* Four vectors of 16 int32 values, each within a byte's range (signed or
   not), as their 64 low bytes in order. The narrowing store (vpmovdb to
   memory) is slow on AMD's cores, where it was as costly as a 1x1
   convolution's dot products: instead two packs, whose saturation cannot
   bite, keep each value's low byte, and one permutation undoes the packs'
   interleaving of 128-bit lanes (lane L holds a, b, c and d's L-th four). */
static inline __attribute__((always_inline)) VNNI __m512i bytes_of_four(__m512i a, __m512i b,
                                                                        __m512i c,
                                                                        __m512i d) {
  __m512i low = _mm512_set1_epi16(0xff);
  __m512i ab = _mm512_and_si512(_mm512_packs_epi32(a, b), low);
  __m512i cd = _mm512_and_si512(_mm512_packs_epi32(c, d), low);
  __m512i lanes = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  return _mm512_permutexvar_epi32(lanes, _mm512_packus_epi16(ab, cd));
}

/* The mask of a run's first n (at most 16) lanes. */
static inline __mmask16 first16(long long n) {
  return (__mmask16)(n >= 16 ? 0xffff : n <= 0 ? 0 : (1u << n) - 1);
}

/* One pixel's `count` channels from m0 (at most GROUP), from their sums:
   four vectors to one store. */
static inline __attribute__((always_inline)) VNNI void
requantize_pixel(const Conv *v, const int *sums, long long m0, long long count,
                 unsigned char *y) {
  for (long long b = 0; b < count; b += 64) {
    __m512i q[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                    _mm512_setzero_si512()};
    for (int j = 0; j < 4 && b + 16 * j < count; j++) {
      long long ch = b + 16 * j;
      __mmask16 keep = first16(count - ch);
      q[j] = requantized(_mm512_maskz_loadu_epi32(keep, sums + ch),
                         _mm512_maskz_loadu_ps(keep, v->mult + m0 + ch), v->zero, v->lo, v->hi);
    }
    long long n = count - b;
    __m512i bytes = bytes_of_four(q[0], q[1], q[2], q[3]);
    if (n >= 64)
      _mm512_storeu_si512(y + b, bytes);
    else
      _mm512_mask_storeu_epi8(y + b, (1ULL << n) - 1, bytes);
  }
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
    requantize_pixel(v, sums[r], m0, count, v->y + (p0 + r) * v->m + m0);
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
  /* Units run tile by tile, each tile's groups of channels in turn, so that
     a tile's gathered rows serve all its groups; but a filter larger than
     a core's L2 and than x's rows (ResNet-50's last stage: 1-2.4 MB of
     filter, 49 pixels) was then streamed from L3 once per tile. Such a
     convolution's units run group by group instead: a part streams its
     groups' filter once. The order moves work between parts only. */
  long long tiles = a->dims[0];
  bool by_group = v.m * v.k4 >= (1 << 20) && v.m > v.pixels;
  for (long long u = begin; u < end; u++) {
    long long tile = by_group ? u % tiles : u / v.groups;
    long long p0 = tile * TILE_PIXELS, m0 = (by_group ? u / tiles : u % v.groups) * GROUP;
    int rows = (int)(v.pixels - p0 < TILE_PIXELS ? v.pixels - p0 : TILE_PIXELS);
    long long count = v.m - m0 < GROUP ? v.m - m0 : GROUP;
    run_unit(&v, p0, rows, m0, count, buf, &gathered);
  }
  return 1;
}

/* ---- opc_qconv_depthwise_nhwc: a row of pixels by 64 channels an item */

enum { DW_TAPS = 64 }; /* the most taps the fast form takes (8 x 8) */

/* The kernel's arguments, read once, and an item's rows. */
typedef struct {
  const unsigned char *x;
  const signed char *filter;
  const int *bias;
  const float *mult;
  unsigned char *y;
  long long c, h, w, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow, taps, fours;
  int zx;
  bool x_signed;
  float zero, lo, hi;
} Depthwise;

/* Four vectors of 16 per-channel values in channel order (64 channels) in
   the order of the sums: vector r, lane 4 L + k holds channel 16 L + 4 r +
   k, i.e. vector r is the r-th 128-bit block of each input. */
static inline __attribute__((always_inline)) VNNI void sum_order(const __m512i in[4],
                                                                 __m512i out[4]) {
  __m512i lo01 = _mm512_shuffle_i32x4(in[0], in[1], 0x44);
  __m512i lo23 = _mm512_shuffle_i32x4(in[2], in[3], 0x44);
  __m512i hi01 = _mm512_shuffle_i32x4(in[0], in[1], 0xee);
  __m512i hi23 = _mm512_shuffle_i32x4(in[2], in[3], 0xee);
  out[0] = _mm512_shuffle_i32x4(lo01, lo23, 0x88);
  out[1] = _mm512_shuffle_i32x4(lo01, lo23, 0xdd);
  out[2] = _mm512_shuffle_i32x4(hi01, hi23, 0x88);
  out[3] = _mm512_shuffle_i32x4(hi01, hi23, 0xdd);
}

/* Four taps' 64 bytes each as VPDPBUSD takes them: vector r, lane 4 L + k,
   holds channel 16 L + 4 r + k's four taps, byte j tap j. */
static inline __attribute__((always_inline)) VNNI void four_taps(const __m512i t[4],
                                                                 __m512i out[4]) {
  __m512i lo01 = _mm512_unpacklo_epi8(t[0], t[1]), hi01 = _mm512_unpackhi_epi8(t[0], t[1]);
  __m512i lo23 = _mm512_unpacklo_epi8(t[2], t[3]), hi23 = _mm512_unpackhi_epi8(t[2], t[3]);
  out[0] = _mm512_unpacklo_epi16(lo01, lo23);
  out[1] = _mm512_unpackhi_epi16(lo01, lo23);
  out[2] = _mm512_unpacklo_epi16(hi01, hi23);
  out[3] = _mm512_unpackhi_epi16(hi01, hi23);
}

/* Vectors of int32 values, each within a byte's range, in the order of the
   sums (sum_order), as their 64 low bytes in channel order: the packs'
   interleaving of 128-bit lanes is what puts them back in order. */
static inline __attribute__((always_inline)) VNNI __m512i bytes_of_sums(const __m512i q[4]) {
  __m512i low = _mm512_set1_epi16(0xff);
  __m512i ab = _mm512_and_si512(_mm512_packs_epi32(q[0], q[1]), low);
  __m512i cd = _mm512_and_si512(_mm512_packs_epi32(q[2], q[3]), low);
  return _mm512_packus_epi16(ab, cd);
}

/* An item's constants: the rows of x its taps read (NULL in the padding),
   the filter, bias and multipliers in the order of the sums, the channel
   mask. An item of at most 32 channels (16) computes 2 pixels (4) per
   vector, each in its own 128-bit lanes, since the unpacking and packing
   never cross lanes: its filter, bias and multipliers are its lanes'
   repeated, and half the vector (three quarters) is not wasted on
   channels past C, as in MobileNets' and EfficientNet's first depthwise
   layers of 16 or 32 channels at 112 x 112. */
typedef struct {
  const unsigned char *row[DW_TAPS]; /* by tap row */
  long long tap_col[DW_TAPS];        /* a tap's column offset, in pixels */
  long long tap_at[DW_TAPS];         /* a tap's offset from the window's corner, in bytes */
  int tap_row[DW_TAPS];
  bool rows_inside; /* no tap row in the padding */
  __m512i bias[4];
  __m512 mult[4];
  __m512i fill;   /* a tap in the padding: x's zero point, as x's bytes */
  __mmask64 keep; /* a pixel's channels, of 64 / P */
  bool whole;     /* no channel of the item past C */
  const signed char *filter; /* the item's block, its lanes repeated for P > 1 */
  _Alignas(64) signed char repeated[DW_TAPS / 4 * 256];
} DepthwiseItem;

/* Lanes 0 .. 4 / P - 1 of v repeated into every P-th group of lanes. */
static inline __attribute__((always_inline)) VNNI __m512i repeat_lanes(__m512i v, int pixels) {
  return pixels == 1 ? v : pixels == 2 ? _mm512_shuffle_i32x4(v, v, 0x44)
                                       : _mm512_shuffle_i32x4(v, v, 0x00);
}

/* One tap's bytes for P pixels: pixel u's channels from at[u] (NULL: in
   the padding, the fill), in lanes u 4 / P up. */
static inline __attribute__((always_inline)) VNNI __m512i
tap_bytes(const DepthwiseItem *it, const unsigned char *const *at, int pixels) {
  if (pixels == 1)
    return !at[0]      ? it->fill
           : it->whole ? _mm512_loadu_si512(at[0])
                       : _mm512_mask_loadu_epi8(it->fill, it->keep, at[0]);
  if (pixels == 2) {
    __m256i fill = _mm512_castsi512_si256(it->fill), half[2];
    for (int u = 0; u < 2; u++)
      half[u] = !at[u]      ? fill
                : it->whole ? _mm256_loadu_si256((const __m256i *)(const void *)at[u])
                            : _mm256_mask_loadu_epi8(fill, (__mmask32)it->keep, at[u]);
    return _mm512_inserti64x4(_mm512_castsi256_si512(half[0]), half[1], 1);
  }
  __m128i fill = _mm512_castsi512_si128(it->fill), lane[4];
  for (int u = 0; u < 4; u++)
    lane[u] = !at[u]      ? fill
              : it->whole ? _mm_loadu_si128((const __m128i *)(const void *)at[u])
                          : _mm_mask_loadu_epi8(fill, (__mmask16)it->keep, at[u]);
  __m512i v = _mm512_castsi128_si512(lane[0]);
  v = _mm512_inserti32x4(v, lane[1], 1);
  v = _mm512_inserti32x4(v, lane[2], 2);
  return _mm512_inserti32x4(v, lane[3], 3);
}

/* Adds a four of taps' bytes (t, as x's) times the filter's to the sums. */
static inline __attribute__((always_inline)) VNNI void
depthwise_four(__m512i t[4], const signed char *f, bool x_signed, __m512i *sums) {
  __m512i v[4];
  if (x_signed)
    for (int j = 0; j < 4; j++)
      t[j] = _mm512_xor_si512(t[j], _mm512_set1_epi8((char)0x80));
  four_taps(t, v);
  for (int r = 0; r < 4; r++)
    sums[r] = _mm512_dpbusd_epi32(sums[r], v[r], _mm512_loadu_si512(f + 64 * r));
}

/* The sums of P pixels whose windows lie inside x, their corners at
   corner[u]: no test per tap, and with `taps` a constant (3x3, 5x5), no
   loop. */
static inline __attribute__((always_inline)) VNNI void
depthwise_inside(const DepthwiseItem *it, const unsigned char *const *corner, long long taps,
                 int pixels, bool x_signed, __m512i *sums) {
  const signed char *f = it->filter;
  for (long long g = 0; g < (taps + 3) / 4; g++, f += 256) {
    __m512i t[4];
    for (int j = 0; j < 4; j++) {
      long long tap = 4 * g + j;
      const unsigned char *at[4] = {NULL, NULL, NULL, NULL};
      for (int u = 0; u < pixels && tap < taps; u++)
        at[u] = corner[u] + it->tap_at[tap];
      t[j] = tap_bytes(it, at, pixels); /* past the taps: the fill, times filter bytes 0 */
    }
    depthwise_four(t, f, x_signed, sums);
  }
}

/* The sums of any P pixels (pixel u's window from column w0[u], none past
   the row where live[u] is false): taps in the padding read the fill. */
static inline __attribute__((always_inline)) VNNI void
depthwise_edge(const Depthwise *d, const DepthwiseItem *it, const long long *w0,
               const bool *live, int pixels, bool x_signed, __m512i *sums) {
  const signed char *f = it->filter;
  for (long long g = 0; g < d->fours; g++, f += 256) {
    __m512i t[4];
    for (int j = 0; j < 4; j++) {
      long long tap = 4 * g + j;
      const unsigned char *at[4] = {NULL, NULL, NULL, NULL};
      for (int u = 0; u < pixels && tap < d->taps; u++) {
        const unsigned char *row = it->row[it->tap_row[tap]];
        long long ww = w0[u] + it->tap_col[tap];
        if (live[u] && row && ww >= 0 && ww < d->w)
          at[u] = row + ww * d->c;
      }
      t[j] = tap_bytes(it, at, pixels);
    }
    depthwise_four(t, f, x_signed, sums);
  }
}

/* The item's constants (DepthwiseItem) for P pixels per vector. */
static inline __attribute__((always_inline)) VNNI void
depthwise_item_setup(const Depthwise *d, DepthwiseItem *it, long long n, long long oh,
                     long long c0, int pixels) {
  long long run = d->c - c0 < 64 ? d->c - c0 : 64;
  it->keep = run >= 64 ? ~0ULL : (1ULL << run) - 1;
  it->whole = run == 64 / pixels;
  it->fill = _mm512_set1_epi8((char)d->zx);
  it->filter = d->filter + c0 / 64 * d->fours * 256;
  if (pixels > 1) {
    for (long long k = 0; k < d->fours * 4; k++)
      _mm512_store_si512(it->repeated + 64 * k,
                         repeat_lanes(_mm512_loadu_si512(it->filter + 64 * k), pixels));
    it->filter = it->repeated;
  }
  long long h0 = oh * d->sh - d->ph;
  it->rows_inside = true;
  for (long long p = 0; p < d->kh; p++) {
    long long hh = h0 + p * d->dh;
    it->row[p] = hh >= 0 && hh < d->h ? d->x + ((n * d->h + hh) * d->w) * d->c + c0 : NULL;
    it->rows_inside = it->rows_inside && it->row[p];
  }
  for (long long t = 0; t < d->taps; t++) {
    it->tap_row[t] = (int)(t / d->kw);
    it->tap_col[t] = t % d->kw * d->dw;
    it->tap_at[t] = (it->tap_row[t] * d->dh * d->w + it->tap_col[t]) * d->c;
  }
  __m512i bias[4], mult[4];
  for (int v = 0; v < 4; v++) {
    __mmask16 keep = (__mmask16)(it->keep >> (16 * v));
    bias[v] = _mm512_maskz_loadu_epi32(keep, d->bias + c0 + 16 * v);
    mult[v] = _mm512_castps_si512(_mm512_maskz_loadu_ps(keep, d->mult + c0 + 16 * v));
  }
  sum_order(bias, it->bias);
  sum_order(mult, bias);
  for (int v = 0; v < 4; v++) {
    it->bias[v] = repeat_lanes(it->bias[v], pixels);
    it->mult[v] = _mm512_castsi512_ps(repeat_lanes(bias[v], pixels));
  }
}

/* One item: output row oh of image n, channels [c0, c0 + 64) clipped to C,
   P pixels per vector, with `taps` KH KW (a constant where the caller
   knows it). */
static inline __attribute__((always_inline)) VNNI void
depthwise_row(const Depthwise *d, long long n, long long oh, long long c0, long long taps,
              int pixels, bool x_signed) {
  DepthwiseItem it;
  depthwise_item_setup(d, &it, n, oh, c0, pixels);
  unsigned char *y = d->y + (n * d->oh + oh) * d->ow * d->c + c0;
  for (long long j = 0; j < d->ow; j += pixels) {
    const unsigned char *corner[4];
    long long w0[4];
    bool live[4], inside = it.rows_inside && j + pixels <= d->ow;
    for (int u = 0; u < pixels; u++) {
      w0[u] = (j + u) * d->sw - d->pw;
      live[u] = j + u < d->ow;
      inside = inside && w0[u] >= 0 && w0[u] + (d->kw - 1) * d->dw < d->w;
      corner[u] = inside ? it.row[0] + w0[u] * d->c : NULL;
    }
    __m512i sums[4] = {it.bias[0], it.bias[1], it.bias[2], it.bias[3]};
    if (inside)
      depthwise_inside(&it, corner, taps, pixels, x_signed, sums);
    else
      depthwise_edge(d, &it, w0, live, pixels, x_signed, sums);
    __m512i q[4];
    for (int r = 0; r < 4; r++)
      q[r] = requantized(sums[r], it.mult[r], d->zero, d->lo, d->hi);
    __m512i bytes = bytes_of_sums(q);
    if (pixels == 1) {
      _mm512_mask_storeu_epi8(y + j * d->c, it.keep, bytes);
    } else if (pixels == 2) {
      _mm256_mask_storeu_epi8(y + j * d->c, (__mmask32)it.keep, _mm512_castsi512_si256(bytes));
      if (live[1])
        _mm256_mask_storeu_epi8(y + (j + 1) * d->c, (__mmask32)it.keep,
                                _mm512_extracti64x4_epi64(bytes, 1));
    } else {
      _mm_mask_storeu_epi8(y + j * d->c, (__mmask16)it.keep, _mm512_castsi512_si128(bytes));
      if (live[1])
        _mm_mask_storeu_epi8(y + (j + 1) * d->c, (__mmask16)it.keep,
                             _mm512_extracti32x4_epi32(bytes, 1));
      if (live[2])
        _mm_mask_storeu_epi8(y + (j + 2) * d->c, (__mmask16)it.keep,
                             _mm512_extracti32x4_epi32(bytes, 2));
      if (live[3])
        _mm_mask_storeu_epi8(y + (j + 3) * d->c, (__mmask16)it.keep,
                             _mm512_extracti32x4_epi32(bytes, 3));
    }
  }
}

/* An item with P pixels per vector: 3x3 and 5x5 filters unrolled. */
static inline __attribute__((always_inline)) VNNI void
depthwise_item(const Depthwise *d, long long n, long long oh, long long c0, int pixels,
               bool x_signed) {
  if (d->taps == 9)
    depthwise_row(d, n, oh, c0, 9, pixels, x_signed);
  else if (d->taps == 25)
    depthwise_row(d, n, oh, c0, 25, pixels, x_signed);
  else
    depthwise_row(d, n, oh, c0, d->taps, pixels, x_signed);
}

/* Items [begin, end). */
static inline __attribute__((always_inline)) VNNI void
depthwise_rows(const Depthwise *d, const long long *dims, long long begin, long long end,
               bool x_signed) {
  for (long long r = begin; r < end; r++) {
    long long n = r / dims[2] / dims[1], oh = r / dims[2] % dims[1], c0 = r % dims[2] * 64;
    long long run = d->c - c0 < 64 ? d->c - c0 : 64;
    if (run <= 16)
      depthwise_item(d, n, oh, c0, 4, x_signed);
    else if (run <= 32)
      depthwise_item(d, n, oh, c0, 2, x_signed);
    else
      depthwise_item(d, n, oh, c0, 1, x_signed);
  }
}

static VNNI void depthwise_rows_u8(const Depthwise *d, const long long *dims, long long begin,
                                   long long end) {
  depthwise_rows(d, dims, begin, end, false);
}

static VNNI void depthwise_rows_i8(const Depthwise *d, const long long *dims, long long begin,
                                   long long end) {
  depthwise_rows(d, dims, begin, end, true);
}

int opc_qconv_depthwise_vnni(const struct opc_kargs *a, int x_signed, long long begin,
                             long long end) {
  const long long *i = a->i;
  if (!vnni_usable() || i[3] * i[4] > DW_TAPS)
    return 0;
  Depthwise d = {.x = a->x[0], .filter = a->x[1], .mult = a->x[2], .bias = a->x[3], .y = a->y,
                 .c = i[0], .h = i[1], .w = i[2], .kh = i[3], .kw = i[4], .sh = i[5], .sw = i[6],
                 .dh = i[7], .dw = i[8], .ph = i[9], .pw = i[10], .oh = a->dims[1], .ow = i[11],
                 .taps = i[3] * i[4], .fours = (i[3] * i[4] + 3) / 4, .x_signed = x_signed,
                 .zx = (int)i[12], .zero = (float)i[13], .lo = a->f[0],
                 .hi = a->f[1]};
  (x_signed ? depthwise_rows_i8 : depthwise_rows_u8)(&d, a->dims, begin, end);
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

int opc_qconv_depthwise_vnni(const struct opc_kargs *a, int x_signed, long long begin,
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
