/*
 * half.c - FP16 and BF16 storage: the conversions to and from float, and
 * the op that runs a float operation over float copies of 16-bit operands.
 *
 * Every cuDNN and cuBLAS routine of the runtime is a float routine with its
 * own fast paths (register tiles, packed GEMMs, vectorised rows). Rather
 * than a second copy of each for 16-bit data, a 16-bit call builds the
 * float op over packed float copies of its operands, and each run fills
 * the copies, runs that op and rounds its results back (half_op_new). The
 * float paths stay untouched, and the arithmetic is float, as in cuDNN's
 * and cuBLAS's configurations with float compute (PSEUDO_HALF_CONFIG,
 * CUBLAS_COMPUTE_32F).
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* ---- conversions ---- */

static inline uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits. */
static inline float f16_decode(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t e = h >> 10 & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) /* infinity, or NaN with its payload */
    return float_of(sign | 0x7f800000 | m << 13);
  if (e != 0) /* normal: rebias the exponent from 15 to 127 */
    return float_of(sign | (e + 112) << 23 | m << 13);
  /* Zero or subnormal, m * 2^-24: exact in float. */
  float v = (float)m * 0x1p-24f;
  return sign ? -v : v;
}

/* Shifts m right by `shift` (1 to 31) rounding to nearest, ties to even. */
static inline uint32_t shift_round_even(uint32_t m, int shift) {
  uint32_t kept = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1)))
    kept++;
  return kept;
}

static inline uint16_t f16_encode(float f) {
  uint32_t x = bits_of(f);
  uint16_t sign = (uint16_t)(x >> 16 & 0x8000);
  uint32_t ax = x & 0x7fffffff;
  if (ax > 0x7f800000) /* NaN: stays a NaN, quiet, with the top of its payload */
    return sign | 0x7e00 | (uint16_t)(ax >> 13 & 0x1ff);
  /* 65520 (0x477ff000) lies halfway between the largest half, 65504, and
   * 65536; a tie goes to the even one, 65536, which overflows. */
  if (ax >= 0x477ff000)
    return sign | 0x7c00;
  if (ax >= 0x38800000) /* 2^-14 and up: normal; a carry may bump the exponent */
    return sign | (uint16_t)shift_round_even(ax - 0x38000000, 13);
  /* Subnormal, a multiple of 2^-24. 2^-25 and below (0x33000000) round to
   * zero, 2^-25 itself being a tie with the even 0. */
  if (ax <= 0x33000000)
    return sign;
  uint32_t m = (ax & 0x7fffff) | 0x800000; /* value m * 2^(e - 150) */
  int e = (int)(ax >> 23);
  return sign | (uint16_t)shift_round_even(m, 126 - e);
}

static inline float bf16_decode(uint16_t h) {
  return float_of((uint32_t)h << 16);
}

static inline uint16_t bf16_encode(float f) {
  uint32_t x = bits_of(f);
  if ((x & 0x7fffffff) > 0x7f800000) /* NaN: keep it one, quiet */
    return (uint16_t)(x >> 16 | 0x0040);
  /* Adding just under half the dropped unit, plus the kept part's lowest
   * bit, carries exactly when the rest is over half, or half and odd. A
   * carry out of the largest finite values gives infinity, as it should. */
  return (uint16_t)((x + 0x7fff + (x >> 16 & 1)) >> 16);
}

float f16_to_float(uint16_t h) {
  return f16_decode(h);
}

uint16_t float_to_f16(float f) {
  return f16_encode(f);
}

float bf16_to_float(uint16_t h) {
  return bf16_decode(h);
}

uint16_t float_to_bf16(float f) {
  return bf16_encode(f);
}

/* ---- converting an operand ---- */

long long packed_strides(int rank, const long long *dims, long long *strides) {
  long long n = 1;
  for (int i = rank - 1; i >= 0; i--) {
    strides[i] = n;
    n *= dims[i];
  }
  return n;
}

long long channels_last_strides(int rank, const long long *dims, long long *strides) {
  long long n = dims[1];
  strides[1] = 1;
  for (int i = rank - 1; i >= 2; i--) {
    strides[i] = n;
    n *= dims[i];
  }
  strides[0] = n;
  return n * dims[0];
}

static long long arg_count(const HalfArg *a) {
  long long n = 1;
  for (int i = 0; i < a->rank; i++)
    n *= a->dims[i];
  return n;
}

/* Drops dims of 1 and merges dims contiguous in device memory (the copy is
 * packed, so they are contiguous there too): fewer, longer rows. */
static void coalesce_arg(HalfArg *a) {
  int r = 0;
  for (int i = 0; i < a->rank; i++) {
    if (a->dims[i] == 1)
      continue;
    if (r > 0 && a->strides[r - 1] == a->strides[i] * a->dims[i]) {
      a->dims[r - 1] *= a->dims[i];
      a->strides[r - 1] = a->strides[i];
      continue;
    }
    a->dims[r] = a->dims[i];
    a->strides[r] = a->strides[i];
    r++;
  }
  if (r == 0) {
    a->dims[0] = 1;
    a->strides[0] = 1;
    r = 1;
  }
  a->rank = r;
}

typedef struct Convert {
  const HalfArg *a;
  float *copy;
  bool to_float; /* fill the copy, or write it back */
  long long row, rows; /* the innermost dim's length, and how many rows */
} Convert;

/* One row: n values at d (stride s) to or from the packed m. A loop per
 * direction and format, so each is a plain loop. */
static void convert_row(const Convert *c, uint16_t *d, long long s, float *m, long long n) {
  bool bf16 = c->a->store == STORE_BF16;
  if (c->to_float && bf16)
    for (long long j = 0; j < n; j++)
      m[j] = bf16_decode(d[j * s]);
  else if (c->to_float)
    for (long long j = 0; j < n; j++)
      m[j] = f16_decode(d[j * s]);
  else if (bf16)
    for (long long j = 0; j < n; j++)
      d[j * s] = bf16_encode(m[j]);
  else
    for (long long j = 0; j < n; j++)
      d[j * s] = f16_encode(m[j]);
}

static void convert_part(void *ctx, int part, int nparts) {
  const Convert *c = ctx;
  const HalfArg *a = c->a;
  long long r0 = c->rows * part / nparts, r1 = c->rows * (part + 1) / nparts;
  int outer = a->rank - 1; /* dims [0, outer) index the rows */
  long long idx[HALF_MAX_DIMS], rem = r0;
  for (int d = outer - 1; d >= 0; d--) {
    idx[d] = rem % a->dims[d];
    rem /= a->dims[d];
  }
  for (long long r = r0; r < r1; r++) {
    long long off = 0;
    for (int d = 0; d < outer; d++)
      off += idx[d] * a->strides[d];
    convert_row(c, (uint16_t *)a->dev + off, a->strides[outer], c->copy + r * c->row, c->row);
    for (int d = outer - 1; d >= 0 && ++idx[d] == a->dims[d]; d--)
      idx[d] = 0;
  }
}

static void convert(const HalfArg *a, float *copy, bool to_float) {
  long long n = arg_count(a);
  Convert c = {a, copy, to_float, a->dims[a->rank - 1], 0};
  c.rows = n / c.row;
  int parts = pool_parts(n, 1 << 16);
  pool_run(convert_part, &c, parts < c.rows ? parts : (int)c.rows);
}

/* ---- the op ---- */

typedef struct HalfOp {
  Op op;
  Op *inner;
  size_t inner_size;
  HalfBindFn *bind;
  HalfArg args[HALF_MAX_ARGS];
  int nargs;
} HalfOp;

static void half_release(Op *op) {
  op_unref(((HalfOp *)op)->inner);
}

static float *alloc_floats(long long n) {
  void *p = NULL;
  size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
  return posix_memalign(&p, 64, bytes) == 0 ? p : NULL;
}

/* The inner op runs as a copy bound to this run's buffers: the op itself
 * stays as built, for the next run (a graph replays it). */
static void run_half(Op *op) {
  const HalfOp *h = (const HalfOp *)op;
  void *ptrs[HALF_MAX_ARGS];
  float *copies[HALF_MAX_ARGS] = {0};
  bool ok = true;
  for (int i = 0; i < h->nargs; i++) {
    const HalfArg *a = &h->args[i];
    if (a->store == STORE_F32) {
      ptrs[i] = a->dev;
      continue;
    }
    copies[i] = alloc_floats(arg_count(a));
    ptrs[i] = copies[i];
    ok = ok && copies[i];
  }
  if (ok) {
    for (int i = 0; i < h->nargs; i++)
      if (copies[i] && h->args[i].read)
        convert(&h->args[i], copies[i], true);
    _Alignas(max_align_t) char plan[OP_PLAN_BYTES];
    memcpy(plan, h->inner, h->inner_size);
    Op *inner = (Op *)plan;
    h->bind(inner, ptrs);
    inner->run(inner);
    for (int i = 0; i < h->nargs; i++)
      if (copies[i] && h->args[i].write)
        convert(&h->args[i], copies[i], false);
  } else {
    rt_fail_async(op->api);
  }
  for (int i = 0; i < h->nargs; i++)
    free(copies[i]);
}

Op *half_op_new(Op *inner, size_t inner_size, HalfBindFn *bind, const HalfArg *args, int nargs) {
  if (!inner)
    return NULL;
  if (inner_size > OP_PLAN_BYTES || nargs > HALF_MAX_ARGS) {
    op_unref(inner);
    return NULL;
  }
  /* Not op_new(..., inner->api): OPC_RT_FAIL counts the ops each API call
   * builds, and this call's was counted with inner already. */
  HalfOp *h = op_new(sizeof *h, run_half, "half_op_new");
  if (!h) {
    op_unref(inner);
    return NULL;
  }
  h->op.api = inner->api;
  h->op.release = half_release;
  h->inner = inner;
  h->inner_size = inner_size;
  h->bind = bind;
  h->nargs = nargs;
  for (int i = 0; i < nargs; i++) {
    h->args[i] = args[i];
    coalesce_arg(&h->args[i]);
  }
  return &h->op;
}
