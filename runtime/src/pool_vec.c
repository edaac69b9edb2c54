/*
 * pool_vec.c - 2-D pooling of one plane with the output columns along
 * AVX-512 vectors (see pool_part in cudnn_reduce.c).
 *
 * Each vector holds 16 outputs of one row, and each tap of the window is
 * one masked load of the input row: lanes whose column falls in the
 * padding load the fold's neutral value instead, so no padded copy of the
 * plane is made. A column stride of 2 loads 32 columns and keeps every
 * other one. The loops are a few instructions per tap and 16 outputs,
 * where the scalar paths (pool_plane, pool_plane_whole) fold whole rows
 * or planes through memory several times, which costs most on the small
 * planes of a network's last stages (7x7 to 35x35).
 *
 * The values are those of the paths they replace: maxima start where
 * the caller says (cuDNN's -FLT_MAX, the kernels' -INFINITY) and a NaN
 * wins; averages divide the same sums (summed in another order) by the
 * same counts.
 */
#include "pool_vec.h"

#include "dnn.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <float.h>
#include <immintrin.h>

#define POOL_TARGET __attribute__((target("avx512f")))

bool pool_vectors_fit(const PoolPlane *pp) {
  return (pp->stride_w == 1 || pp->stride_w == 2) && pp->out_w <= POOL_VECTOR_WIDTH &&
         pp->win_w <= POOL_VECTOR_WIN && tile_available();
}

POOL_TARGET static inline __m512i lane_index(void) {
  return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

/* The lanes whose column base + lane lies in [0, n). */
POOL_TARGET static inline __mmask16 inside(int base, int n) {
  __m512i col = _mm512_add_epi32(_mm512_set1_epi32(base), lane_index());
  return _mm512_cmpge_epi32_mask(col, _mm512_setzero_si512()) &
         _mm512_cmplt_epi32_mask(col, _mm512_set1_epi32(n));
}

#define INLINE static inline __attribute__((always_inline))

/* The fold of one more value into acc: a sum, or a maximum; `nans` says
 * whether the plane holds a NaN, which must win the maximum as with
 * max_nan of cudnn_reduce.c: VMAXPS gives v where either is a NaN, so a
 * NaN in acc is kept by hand. */
POOL_TARGET INLINE __m512 fold(__m512 acc, __m512 v, const bool is_max, const bool nans) {
  if (!is_max)
    return _mm512_add_ps(acc, v);
  __m512 larger = _mm512_max_ps(acc, v);
  return nans ? _mm512_mask_mov_ps(larger, _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q), acc)
              : larger;
}

/* Whether the plane's input holds a NaN: a pass over it costs less than
 * keeping NaNs by hand at every tap of every window. */
POOL_TARGET static bool plane_has_nan(const PoolPlane *pp) {
  __mmask16 nan = 0;
  for (int h = 0; h < pp->in_h; h++) {
    const float *row = pp->x + h * pp->xrow;
    for (int c = 0; c < pp->in_w; c += 16) {
      __m512 v = _mm512_maskz_loadu_ps(inside(c, pp->in_w), row + c);
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
  }
  return nan != 0;
}

/* Floats from one row of `across` to the next. */
static inline long long across_row(const PoolPlane *pp) {
  return (pp->out_w + 15) / 16 * 16;
}

long long pool_across_floats(const PoolPlane *pp) {
  return pp->in_h * across_row(pp);
}

/*
 * Across: row h of `across` (across_row floats apart) is input row h
 * folded over each window's width, for every input row. The 16 outputs
 * from column ow0 read, for tap kw, columns (ow0 + lane) * stride - pad_w
 * + kw: one load with stride 1; with stride 2, 32 columns of which the
 * even ones are kept. Lanes in the padding load the fold's neutral value
 * (`edge`), through masks that are the same for every row; the vectors
 * with no column in the padding load without them.
 */
POOL_TARGET INLINE void fold_across(const PoolPlane *pp, float *across, const bool is_max,
                                    const bool nans, const int sw) {
  __m512 edge = _mm512_set1_ps(is_max ? pp->lowest : 0.0f);
  __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  int kws = pp->win_w;
  for (int ow0 = 0; ow0 < pp->out_w; ow0 += 16) {
    __mmask16 lo_in[POOL_VECTOR_WIN], hi_in[POOL_VECTOR_WIN];
    int first = ow0 * sw - pp->pad_w;
    bool whole = first >= 0 && first + 16 * sw - 1 + kws - 1 < pp->in_w;
    for (int kw = 0; kw < kws; kw++) {
      lo_in[kw] = inside(first + kw, pp->in_w);
      hi_in[kw] = inside(first + kw + 16, pp->in_w);
    }
    float *to = across + ow0;
    for (int h = 0; h < pp->in_h; h++, to += across_row(pp)) {
      const float *row = pp->x + h * pp->xrow + first;
      __m512 acc = edge;
      for (int kw = 0; kw < kws; kw++) {
        __m512 v = whole ? _mm512_loadu_ps(row + kw)
                         : _mm512_mask_loadu_ps(edge, lo_in[kw], row + kw);
        if (sw == 2) {
          __m512 next = whole ? _mm512_loadu_ps(row + kw + 16)
                              : _mm512_mask_loadu_ps(edge, hi_in[kw], row + kw + 16);
          v = _mm512_permutex2var_ps(v, even, next);
        }
        acc = fold(acc, v, is_max, nans);
      }
      _mm512_storeu_ps(to, acc);
    }
  }
}

/* How many columns of each window, from output column ow0 on, lie inside
 * the input, as floats. */
POOL_TARGET static inline __m512 columns_inside(const PoolPlane *pp, int ow0) {
  __m512i start = _mm512_sub_epi32(
      _mm512_mullo_epi32(_mm512_add_epi32(_mm512_set1_epi32(ow0), lane_index()),
                         _mm512_set1_epi32(pp->stride_w)),
      _mm512_set1_epi32(pp->pad_w));
  __m512i lo = _mm512_max_epi32(start, _mm512_setzero_si512());
  __m512i hi = _mm512_min_epi32(_mm512_add_epi32(start, _mm512_set1_epi32(pp->win_w)),
                                _mm512_set1_epi32(pp->in_w));
  return _mm512_cvtepi32_ps(_mm512_max_epi32(_mm512_sub_epi32(hi, lo), _mm512_setzero_si512()));
}

/*
 * Down: each output row folds its window's rows of `across`, then divides
 * an average (by the window's size, or by its count of input values:
 * rows times columns inside) and blends in alpha and beta.
 */
POOL_TARGET INLINE void fold_down(const PoolPlane *pp, const float *across, const bool is_max,
                                  const bool nans) {
  __m512 edge = _mm512_set1_ps(is_max ? pp->lowest : 0.0f);
  __m512 alpha = _mm512_set1_ps(pp->alpha), beta = _mm512_set1_ps(pp->beta);
  __m512 whole = _mm512_set1_ps((float)(pp->win_h * pp->win_w));
  __m512 columns[POOL_VECTOR_WIDTH / 16];
  for (int ow0 = 0; ow0 < pp->out_w; ow0 += 16)
    columns[ow0 / 16] = columns_inside(pp, ow0);
  for (int oh = 0; oh < pp->out_h; oh++) {
    int top = oh * pp->stride_h - pp->pad_h;
    int h0 = top < 0 ? 0 : top, h1 = top + pp->win_h < pp->in_h ? top + pp->win_h : pp->in_h;
    __m512 rows = _mm512_set1_ps((float)(h1 > h0 ? h1 - h0 : 0));
    float *y = pp->y + oh * pp->yrow;
    for (int ow0 = 0; ow0 < pp->out_w; ow0 += 16) {
      const float *from = across + (long long)h0 * across_row(pp) + ow0;
      __m512 acc = edge;
      for (int h = h0; h < h1; h++, from += across_row(pp))
        acc = fold(acc, _mm512_loadu_ps(from), is_max, nans);
      if (pp->fold == PLANE_AVERAGE_WHOLE)
        acc = _mm512_div_ps(acc, whole);
      else if (pp->fold == PLANE_AVERAGE_INSIDE)
        acc = _mm512_div_ps(acc, _mm512_mul_ps(rows, columns[ow0 / 16]));
      if (pp->alpha != 1)
        acc = _mm512_mul_ps(acc, alpha);
      __mmask16 out = inside(ow0, pp->out_w);
      if (pp->beta != 0)
        acc = _mm512_add_ps(acc, _mm512_mul_ps(beta, _mm512_maskz_loadu_ps(out, y + ow0)));
      _mm512_mask_storeu_ps(y + ow0, out, acc);
    }
  }
}

POOL_TARGET void pool_plane_vectors(const PoolPlane *pp, float *across) {
  if (pp->fold != PLANE_MAX) {
    if (pp->stride_w == 1)
      fold_across(pp, across, false, false, 1);
    else
      fold_across(pp, across, false, false, 2);
    fold_down(pp, across, false, false);
  } else if (plane_has_nan(pp)) {
    fold_across(pp, across, true, true, pp->stride_w);
    fold_down(pp, across, true, true);
  } else {
    if (pp->stride_w == 1)
      fold_across(pp, across, true, false, 1);
    else
      fold_across(pp, across, true, false, 2);
    fold_down(pp, across, true, false);
  }
}

#else

bool pool_vectors_fit(const PoolPlane *pp) {
  (void)pp;
  return false;
}

long long pool_across_floats(const PoolPlane *pp) {
  (void)pp;
  return 0;
}

void pool_plane_vectors(const PoolPlane *pp, float *across) {
  (void)pp, (void)across;
}

#endif
