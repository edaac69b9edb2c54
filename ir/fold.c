/*
 * fold.c - evaluating nodes whose inputs are all constant.
 *
 * Constant data is f32 for floating dtypes and i64 for integer and boolean
 * ones (see ir.h), so every kernel here reads through getf/geti, whatever
 * the declared dtype, and writes the storage its output has. Integer
 * arithmetic stays in int64 so that PyTorch's INT64_MAX slice ends survive;
 * float arithmetic is done in float, as the run-time kernels do it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "scalar.h"
#include "shapes.h"

/* FOLD_MAX_ELEMENTS (ir.h): larger results stay run-time work. */

bool op_is_evaluable(OpKind op) { return op_info(op)->fold != NULL; }

/* ------------------------------------------------------------ elements */

/* u64 values are held as the int64 of the same bits. */
static bool is_u64(const Tensor *t) { return t->dtype == DT_UINT64; }

static float getf(const Tensor *t, int64_t i) {
  if (t->f32)
    return t->f32[i];
  return is_u64(t) ? (float)(uint64_t)t->i64[i] : (float)t->i64[i];
}

/* Float to integer, truncating; NaN and out-of-range values (undefined
   behaviour for a plain C cast) go to 0 and the int64 limits. */
static int64_t to_int(float v) {
  if (!(v == v))
    return 0;
  if (v >= 9.2233720e18f)
    return INT64_MAX;
  if (v <= -9.2233720e18f)
    return INT64_MIN;
  return (int64_t)v;
}

static int64_t geti(const Tensor *t, int64_t i) { return t->i64 ? t->i64[i] : to_int(t->f32[i]); }

static bool is_int(const Tensor *t) { return !dtype_is_float(t->dtype); }

static bool is_nan_at(const Tensor *t, int64_t i) { return t->f32 && t->f32[i] != t->f32[i]; }

/* Orders element i of a against element j of b, which share a dtype: -1,
   0 or 1, and 2 when a NaN leaves them unordered. */
static int compare_elems(const Tensor *a, int64_t i, const Tensor *b, int64_t j) {
  if (a->f32) {
    float x = a->f32[i], y = getf(b, j);
    if (x != x || y != y)
      return 2;
    return x < y ? -1 : x > y;
  }
  if (is_u64(a)) {
    uint64_t x = (uint64_t)a->i64[i], y = (uint64_t)b->i64[j];
    return x < y ? -1 : x > y;
  }
  int64_t x = a->i64[i], y = geti(b, j);
  return x < y ? -1 : x > y;
}

/* A total order for sorting, numpy's: NaNs after every number, equal to
   each other. */
static int order_elems(const Tensor *t, int64_t i, int64_t j) {
  bool ni = is_nan_at(t, i), nj = is_nan_at(t, j);
  if (ni || nj)
    return ni == nj ? 0 : ni ? 1 : -1;
  return compare_elems(t, i, t, j);
}

/* Gives the tensor fresh storage for its constant data. */
static void alloc_data(Graph *g, Tensor *t) {
  size_t n = (size_t)tensor_numel(t) + 1;
  t->f32 = NULL;
  t->i64 = NULL;
  if (is_int(t))
    t->i64 = arena_alloc(g->arena, n * sizeof(int64_t));
  else
    t->f32 = arena_alloc(g->arena, n * sizeof(float));
}

/* Writes an integer, 0 or 1 say, into element i of either storage. */
static void put_int(Tensor *t, int64_t i, int64_t v) {
  if (t->f32)
    t->f32[i] = (float)v;
  else
    t->i64[i] = v;
}

static void copy_elem(Tensor *dst, int64_t di, const Tensor *src, int64_t si) {
  if (dst->f32)
    dst->f32[di] = getf(src, si);
  else
    dst->i64[di] = geti(src, si);
}

void unravel(int64_t index, int rank, const int64_t *dims, int64_t *coord) {
  for (int i = rank - 1; i >= 0; i--) {
    coord[i] = dims[i] ? index % dims[i] : 0;
    index = dims[i] ? index / dims[i] : 0;
  }
}

int64_t ravel(int rank, const int64_t *dims, const int64_t *coord) {
  int64_t index = 0;
  for (int i = 0; i < rank; i++)
    index = index * dims[i] + coord[i];
  return index;
}

/* Integers narrowed to the width of their dtype, as a cast would. */
static int64_t wrap_int(int64_t v, DType t) {
  switch (t) {
  case DT_BOOL: return v != 0;
  case DT_INT8: return (int8_t)v;
  case DT_UINT8: return (uint8_t)v;
  case DT_INT16: return (int16_t)v;
  case DT_UINT16: return (uint16_t)v;
  case DT_INT32: return (int32_t)v;
  case DT_UINT32: return (uint32_t)v;
  default: return v;
  }
}

/* ------------------------------------------------------- data movement */

static void copy_data(Tensor *y, const Tensor *x) {
  for (int64_t i = 0; i < tensor_numel(y); i++)
    copy_elem(y, i, x, i);
}

/* Identity, Reshape, Flatten, Squeeze, Unsqueeze. */
bool fold_copy(Graph *g, Node *n) {
  copy_data(n->out[0], n->in[0]);
  return true;
}

bool fold_dropout(Graph *g, Node *n) {
  copy_data(n->out[0], n->in[0]);
  if (n->nout > 1 && n->out[1])
    for (int64_t i = 0; i < tensor_numel(n->out[1]); i++)
      n->out[1]->i64[i] = 1; /* inference keeps everything */
  return true;
}

bool fold_concat(Graph *g, Node *n) {
  int axis = n->p.axis.axis;
  Tensor *y = n->out[0];
  int64_t outer = dims_product(y->dims, 0, axis), inner = dims_product(y->dims, axis + 1, y->rank);
  int64_t k = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < n->nin; i++) {
      const Tensor *x = n->in[i];
      int64_t block = x->dims[axis] * inner;
      for (int64_t j = 0; j < block; j++)
        copy_elem(y, k++, x, o * block + j);
    }
  return true;
}

bool fold_split(Graph *g, Node *n) {
  int axis = n->p.split.axis;
  const int64_t *sizes = n->p.split.sizes;
  const Tensor *x = n->in[0];
  int64_t outer = dims_product(x->dims, 0, axis), inner = dims_product(x->dims, axis + 1, x->rank);
  int64_t row = x->dims[axis] * inner, begin = 0;
  for (int i = 0; i < n->nout; i++) {
    Tensor *y = n->out[i];
    int64_t block = sizes[i] * inner;
    for (int64_t o = 0; y && o < outer; o++)
      for (int64_t j = 0; j < block; j++)
        copy_elem(y, o * block + j, x, o * row + begin + j);
    begin += block;
  }
  return true;
}

bool fold_gather(Graph *g, Node *n) {
  int axis = n->p.axis.axis;
  const Tensor *x = n->in[0], *idx = n->in[1];
  Tensor *y = n->out[0];
  int64_t outer = dims_product(x->dims, 0, axis), inner = dims_product(x->dims, axis + 1, x->rank);
  int64_t dim = x->dims[axis], count = tensor_numel(idx), k = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < count; j++) {
      int64_t at = geti(idx, j);
      if (at < 0)
        at += dim;
      for (int64_t e = 0; e < inner; e++)
        copy_elem(y, k++, x, (o * dim + at) * inner + e);
    }
  return true;
}

bool fold_gather_elements(Graph *g, Node *n) {
  int axis = n->p.axis.axis;
  const Tensor *x = n->in[0], *idx = n->in[1];
  Tensor *y = n->out[0];
  int64_t c[IR_MAX_RANK], dim = x->dims[axis];
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    unravel(i, idx->rank, idx->dims, c);
    int64_t at = geti(idx, i);
    c[axis] = at < 0 ? at + dim : at;
    copy_elem(y, i, x, ravel(x->rank, x->dims, c));
  }
  return true;
}

/* ReverseSequence: along the time axis, the first lens[b] elements of each
   batch b in reverse order, the rest as they are. */
bool fold_reverse_sequence(Graph *g, Node *n) {
  (void)g;
  const Tensor *x = n->in[0], *lens = n->in[1];
  Tensor *y = n->out[0];
  int time = n->p.reverse_sequence.time_axis, batch = n->p.reverse_sequence.batch_axis;
  int64_t c[IR_MAX_RANK];
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    unravel(i, x->rank, x->dims, c);
    int64_t len = geti(lens, c[batch]);
    if (c[time] < len)
      c[time] = len - 1 - c[time];
    copy_elem(y, i, x, ravel(x->rank, x->dims, c));
  }
  return true;
}

/* TfIdfVectorizer: each column sums, over the n-grams counted into it,
   scalar.h's value of the n-gram's count in the row. */
bool fold_tfidf(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  int64_t rows = x->rank == 2 ? x->dims[0] : 1, len = x->dims[x->rank - 1];
  long long *row = arena_alloc(g->arena, sizeof(long long) * (size_t)(len + 1));
  long long *gram = arena_alloc(g->arena, sizeof(long long) * (size_t)(n->p.tfidf.max_gram + 1));
  for (int64_t i = 0; i < tensor_numel(y); i++)
    y->f32[i] = 0;
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t k = 0; k < len; k++)
      row[k] = x->i64[r * len + k];
    for (int64_t gi = 0; gi < n->p.tfidf.grams; gi++) {
      const int64_t *t = n->p.tfidf.table + 3 * gi;
      if (t[0] < n->p.tfidf.min_gram || t[0] > n->p.tfidf.max_gram)
        continue;
      for (int64_t j = 0; j < t[0]; j++)
        gram[j] = n->p.tfidf.pool[t[1] + j];
      long long count = opc_tfidf_count_of(row, 8, len, 1, gram, t[0], n->p.tfidf.max_skip);
      float w = n->p.tfidf.weights ? n->p.tfidf.weights[gi] : 1.0f;
      y->f32[r * n->p.tfidf.outputs + t[2]] += opc_tfidf_of(count, n->p.tfidf.mode, w);
    }
  }
  return true;
}

/* Slice, Transpose and Tile copy into each output element the input element
   at the coordinates that `to_input` maps the output element's to. */
typedef void CoordMap(const Node *n, const int64_t *yc, int64_t *xc);

static void copy_mapped(Node *n, CoordMap *to_input) {
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  int64_t yc[IR_MAX_RANK], xc[IR_MAX_RANK];
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    unravel(i, y->rank, y->dims, yc);
    to_input(n, yc, xc);
    copy_elem(y, i, x, ravel(x->rank, x->dims, xc));
  }
}

static void slice_to_input(const Node *n, const int64_t *yc, int64_t *xc) {
  const int64_t *start = n->p.slice.start, *step = n->p.slice.step;
  for (int d = 0; d < n->in[0]->rank; d++)
    xc[d] = start[d] + yc[d] * step[d];
}

static void transpose_to_input(const Node *n, const int64_t *yc, int64_t *xc) {
  for (int d = 0; d < n->out[0]->rank; d++)
    xc[n->p.transpose.perm[d]] = yc[d];
}

static void tile_to_input(const Node *n, const int64_t *yc, int64_t *xc) {
  for (int d = 0; d < n->out[0]->rank; d++)
    xc[d] = yc[d] % n->in[0]->dims[d];
}

bool fold_slice(Graph *g, Node *n) {
  copy_mapped(n, slice_to_input);
  return true;
}

bool fold_transpose(Graph *g, Node *n) {
  copy_mapped(n, transpose_to_input);
  return true;
}

bool fold_tile(Graph *g, Node *n) {
  copy_mapped(n, tile_to_input);
  return true;
}

bool fold_expand(Graph *g, Node *n) {
  Tensor *y = n->out[0];
  const Tensor *x = n->in[0];
  int64_t strides[IR_MAX_RANK];
  broadcast_strides(x->rank, x->dims, y->rank, y->dims, strides);
  for (int64_t i = 0; i < tensor_numel(y); i++)
    copy_elem(y, i, x, broadcast_offset(i, y->rank, y->dims, strides));
  return true;
}

bool fold_trilu(Graph *g, Node *n) {
  const Tensor *kt = node_input(n, 1);
  int64_t k = kt && kt->i64 ? kt->i64[0] : n->p.trilu.k;
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  bool upper = n->p.trilu.upper;
  int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    int64_t c = i % cols, r = (i / cols) % rows;
    bool keep = upper ? c - r >= k : c - r <= k;
    if (keep)
      copy_elem(y, i, x, i);
    else
      put_int(y, i, 0);
  }
  return true;
}

/* --------------------------------------------------------- generators */

bool fold_constant(Graph *g, Node *n) {
  Tensor *y = n->out[0];
  const Attr *a = NULL;
  static const char *const kinds[] = {"value", "value_float", "value_int", "value_floats",
                                      "value_ints"};
  for (int i = 0; i < 5 && !a; i++)
    a = node_attr(n, kinds[i]);
  for (int64_t i = 0; a && i < tensor_numel(y); i++) {
    switch (a->kind) {
    case ATTR_TENSOR: copy_elem(y, i, a->t, i); break;
    case ATTR_FLOAT: y->f32[i] = a->f; break;
    case ATTR_INT: y->i64[i] = a->i; break;
    case ATTR_FLOATS: y->f32[i] = a->floats[i]; break;
    case ATTR_INTS: y->i64[i] = a->ints[i]; break;
    default: return false;
    }
  }
  return a != NULL;
}

bool fold_shape(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  int start, end;
  shape_range(n, x->rank, &start, &end);
  for (int i = start; i < end; i++)
    n->out[0]->i64[i - start] = x->dims[i];
  return true;
}

/* Rounds to the nearest float16 (ties to even), as a cast to f16 and back
   would; the value stays in a float, the canonical constant storage. */
static float round_to_half(float f) {
  float a = fabsf(f);
  if (a != a || a == INFINITY)
    return f;
  if (a >= 65520.0f) /* beyond the largest half, 65504, after rounding */
    return f < 0 ? -INFINITY : INFINITY;
  if (a < 6.103515625e-05f) { /* subnormal halves are multiples of 2^-24 */
    const float quantum = 5.9604644775390625e-08f;
    return copysignf(nearbyintf(a / quantum) * quantum, f);
  }
  uint32_t u;
  memcpy(&u, &a, sizeof u);
  u += 0x0fffu + ((u >> 13) & 1); /* 23 - 10 = 13 mantissa bits go */
  u &= ~0x1fffu;
  memcpy(&a, &u, sizeof a);
  return copysignf(a, f);
}

static float round_to_bfloat16(float f) {
  if (f != f)
    return f;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1);
  u &= 0xffff0000u;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Float to u64: values from 2^63 on do not fit the int64 to_int makes. */
static int64_t to_u64(float v) {
  return v >= 9.2233720e18f && v < 1.8446744e19f ? (int64_t)(uint64_t)v : to_int(v);
}

/* Cast and CastLike. node_fold then narrows each value to the target
   dtype: integers wrap, floats round to f16 or bf16. */
bool fold_cast(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  DType to = n->p.cast.to;
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    if (y->f32)
      y->f32[i] = getf(x, i);
    else if (x->f32 && to == DT_BOOL)
      y->i64[i] = x->f32[i] != 0; /* 0.5 is true, not truncated to 0 */
    else if (x->f32 && to == DT_UINT64)
      y->i64[i] = to_u64(x->f32[i]);
    else
      y->i64[i] = geti(x, i);
  }
  return true;
}

bool fold_constant_of_shape(Graph *g, Node *n) {
  Tensor *y = n->out[0];
  const Attr *a = node_attr(n, "value");
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    if (a && a->kind == ATTR_TENSOR)
      copy_elem(y, i, a->t, 0);
    else
      put_int(y, i, 0);
  }
  return true;
}

bool fold_range(Graph *g, Node *n) {
  Tensor *y = n->out[0];
  const Tensor *start = n->in[0], *delta = n->in[2];
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    if (y->f32)
      y->f32[i] = start->f32[0] + (float)i * delta->f32[0];
    else
      y->i64[i] = start->i64[0] + i * delta->i64[0];
  }
  return true;
}

bool fold_size(Graph *g, Node *n) {
  n->out[0]->i64[0] = tensor_numel(n->in[0]);
  return true;
}

bool fold_eye_like(Graph *g, Node *n) {
  Tensor *y = n->out[0];
  int64_t k = node_attr_int(n, "k", 0), cols = y->dims[1];
  for (int64_t i = 0; i < tensor_numel(y); i++)
    put_int(y, i, i % cols - i / cols == k);
  return true;
}

/* --------------------------------------------------------------- unary */

/* Activations and unary maths map each element through a scalar function of
   the node's resolved parameters, in float. Integers go through float too,
   except for the kinds integer shape arithmetic uses, which also pass an
   exact int64 function. Each kind has its own evaluator, rather than one
   evaluator switching on the kind, so that an ops.def row cannot name an
   evaluator that lacks the kind's arithmetic. */
typedef float UnaryFloat(const Params *p, float x);
typedef int64_t UnaryInt(int64_t x);

static bool map_unary(Node *n, UnaryFloat *f, UnaryInt *exact) {
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    if (y->i64 && x->i64 && exact)
      y->i64[i] = exact(x->i64[i]);
    else if (y->f32)
      y->f32[i] = f(&n->p, getf(x, i));
    else
      y->i64[i] = to_int(f(&n->p, getf(x, i)));
  }
  return true;
}

static float relu_float(const Params *p, float x) { return opc_relu_of(x); }
static float elu_float(const Params *p, float x) { return opc_elu_of(x, p->act.alpha); }

static float selu_float(const Params *p, float x) {
  return opc_selu_of(x, p->act.alpha, p->act.gamma);
}

static float celu_float(const Params *p, float x) { return opc_celu_of(x, p->act.alpha); }

static float softplus_float(const Params *p, float x) { return opc_softplus_of(x); }
static float softsign_float(const Params *p, float x) { return opc_softsign_of(x); }
static float erf_float(const Params *p, float x) { return erff(x); }

static float thresholded_relu_float(const Params *p, float x) {
  return opc_thresholded_relu_of(x, p->act.alpha);
}

static float shrink_float(const Params *p, float x) {
  return opc_shrink_of(x, p->act.lambd, p->act.bias);
}

static float swish_float(const Params *p, float x) { return opc_swish_of(x, p->act.alpha); }

static float gelu_float(const Params *p, float x) {
  return p->act.tanh ? opc_gelu_tanh_of(x) : opc_gelu_of(x);
}

static float exp_float(const Params *p, float x) { return expf(x); }
static float log_float(const Params *p, float x) { return logf(x); }
static float sqrt_float(const Params *p, float x) { return sqrtf(x); }
static float abs_float(const Params *p, float x) { return fabsf(x); }
static float neg_float(const Params *p, float x) { return -x; }
static float reciprocal_float(const Params *p, float x) { return 1 / x; }
static float floor_float(const Params *p, float x) { return floorf(x); }
static float ceil_float(const Params *p, float x) { return ceilf(x); }
static float round_float(const Params *p, float x) { return nearbyintf(x); } /* halves to even */
static float sign_float(const Params *p, float x) { return x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f; }
static float sin_float(const Params *p, float x) { return sinf(x); }
static float cos_float(const Params *p, float x) { return cosf(x); }
static float tan_float(const Params *p, float x) { return tanf(x); }
static float asin_float(const Params *p, float x) { return asinf(x); }
static float acos_float(const Params *p, float x) { return acosf(x); }
static float atan_float(const Params *p, float x) { return atanf(x); }
static float sinh_float(const Params *p, float x) { return sinhf(x); }
static float cosh_float(const Params *p, float x) { return coshf(x); }
static float asinh_float(const Params *p, float x) { return asinhf(x); }
static float acosh_float(const Params *p, float x) { return acoshf(x); }
static float atanh_float(const Params *p, float x) { return atanhf(x); }

static int64_t relu_int(int64_t x) { return x > 0 ? x : 0; }
static int64_t abs_int(int64_t x) { return x < 0 ? -x : x; }
static int64_t neg_int(int64_t x) { return -x; }
static int64_t sign_int(int64_t x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }
static int64_t rounded_int(int64_t x) { return x; } /* Floor, Ceil, Round */

/* An operator that computes one activation of scalar.h's list alone, the
   code its row names, with its alpha and beta as the parameters. */
bool fold_activation(Graph *g, Node *n) {
  Activation code = op_info(n->op)->act;
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    float v = opc_activation_of(code, getf(x, i), n->p.act.alpha, n->p.act.beta);
    if (y->f32)
      y->f32[i] = v;
    else
      y->i64[i] = to_int(v);
  }
  return true;
}

bool fold_relu(Graph *g, Node *n) { return map_unary(n, relu_float, relu_int); }
bool fold_elu(Graph *g, Node *n) { return map_unary(n, elu_float, NULL); }
bool fold_selu(Graph *g, Node *n) { return map_unary(n, selu_float, NULL); }
bool fold_celu(Graph *g, Node *n) { return map_unary(n, celu_float, NULL); }
bool fold_softplus(Graph *g, Node *n) { return map_unary(n, softplus_float, NULL); }
bool fold_softsign(Graph *g, Node *n) { return map_unary(n, softsign_float, NULL); }
bool fold_erf(Graph *g, Node *n) { return map_unary(n, erf_float, NULL); }
bool fold_thresholded_relu(Graph *g, Node *n) { return map_unary(n, thresholded_relu_float, NULL); }
bool fold_shrink(Graph *g, Node *n) { return map_unary(n, shrink_float, NULL); }
bool fold_swish(Graph *g, Node *n) { return map_unary(n, swish_float, NULL); }
bool fold_gelu(Graph *g, Node *n) { return map_unary(n, gelu_float, NULL); }
bool fold_exp(Graph *g, Node *n) { return map_unary(n, exp_float, NULL); }
bool fold_log(Graph *g, Node *n) { return map_unary(n, log_float, NULL); }
bool fold_sqrt(Graph *g, Node *n) { return map_unary(n, sqrt_float, NULL); }
bool fold_abs(Graph *g, Node *n) { return map_unary(n, abs_float, abs_int); }
bool fold_neg(Graph *g, Node *n) { return map_unary(n, neg_float, neg_int); }
bool fold_reciprocal(Graph *g, Node *n) { return map_unary(n, reciprocal_float, NULL); }
bool fold_floor(Graph *g, Node *n) { return map_unary(n, floor_float, rounded_int); }
bool fold_ceil(Graph *g, Node *n) { return map_unary(n, ceil_float, rounded_int); }
bool fold_round(Graph *g, Node *n) { return map_unary(n, round_float, rounded_int); }
bool fold_sign(Graph *g, Node *n) { return map_unary(n, sign_float, sign_int); }
bool fold_sin(Graph *g, Node *n) { return map_unary(n, sin_float, NULL); }
bool fold_cos(Graph *g, Node *n) { return map_unary(n, cos_float, NULL); }
bool fold_tan(Graph *g, Node *n) { return map_unary(n, tan_float, NULL); }
bool fold_asin(Graph *g, Node *n) { return map_unary(n, asin_float, NULL); }
bool fold_acos(Graph *g, Node *n) { return map_unary(n, acos_float, NULL); }
bool fold_atan(Graph *g, Node *n) { return map_unary(n, atan_float, NULL); }
bool fold_sinh(Graph *g, Node *n) { return map_unary(n, sinh_float, NULL); }
bool fold_cosh(Graph *g, Node *n) { return map_unary(n, cosh_float, NULL); }
bool fold_asinh(Graph *g, Node *n) { return map_unary(n, asinh_float, NULL); }
bool fold_acosh(Graph *g, Node *n) { return map_unary(n, acosh_float, NULL); }
bool fold_atanh(Graph *g, Node *n) { return map_unary(n, atanh_float, NULL); }

bool fold_clip(Graph *g, Node *n) {
  const Tensor *x = n->in[0], *lo = node_input(n, 1), *hi = node_input(n, 2);
  Tensor *y = n->out[0];
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    if (y->i64) {
      int64_t v = x->i64[i];
      if (lo && v < geti(lo, 0))
        v = geti(lo, 0);
      if (hi && v > geti(hi, 0))
        v = geti(hi, 0);
      y->i64[i] = v;
    } else {
      float v = x->f32[i];
      float l = lo ? getf(lo, 0) : n->p.clip.has_min ? n->p.clip.min : -INFINITY;
      float h = hi ? getf(hi, 0) : n->p.clip.has_max ? n->p.clip.max : INFINITY;
      y->f32[i] = opc_clip_of(v, l, h);
    }
  }
  return true;
}

bool fold_prelu(Graph *g, Node *n) {
  const Tensor *x = n->in[0], *slope = n->in[1];
  Tensor *y = n->out[0];
  if (!y->f32)
    return false;
  int64_t strides[IR_MAX_RANK];
  broadcast_strides(slope->rank, slope->dims, y->rank, y->dims, strides);
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    float v = getf(x, i), s = getf(slope, broadcast_offset(i, y->rank, y->dims, strides));
    y->f32[i] = v >= 0 ? v : s * v;
  }
  return true;
}

/* ---------------------------------------------------------- broadcast */

/* Binary and variadic kinds combine their inputs left to right, each
   broadcast to the output's shape, through a scalar function in float and
   one in exact int64, which wraps around on overflow and fails only on a
   division by zero. One evaluator per kind, as for the unary kinds. */
typedef float BinaryFloat(float a, float b);
typedef bool BinaryInt(int64_t a, int64_t b, int64_t *out);

static bool map_binary(Graph *g, Node *n, BinaryFloat *f, BinaryInt *exact) {
  Tensor *y = n->out[0];
  int64_t strides[IR_MAX_RANK];
  for (int k = 0; k < n->nin; k++) {
    const Tensor *x = n->in[k];
    broadcast_strides(x->rank, x->dims, y->rank, y->dims, strides);
    for (int64_t i = 0; i < tensor_numel(y); i++) {
      int64_t at = broadcast_offset(i, y->rank, y->dims, strides);
      if (y->f32) {
        float v = getf(x, at);
        y->f32[i] = k == 0 ? v : f(y->f32[i], v);
      } else if (k == 0) {
        y->i64[i] = geti(x, at);
      } else if (x->f32) {
        /* Only Pow's exponent may have a dtype of its own (inference makes
           the others match): an integer base with a float exponent goes
           through float. */
        y->i64[i] = to_int(f((float)y->i64[i], x->f32[at]));
      } else if (!exact(y->i64[i], geti(x, at), &y->i64[i])) {
        ir_error(g, n, "integer division by zero while folding");
        return false;
      }
    }
  }
  return true;
}

static float add_float(float a, float b) { return a + b; }
static float sub_float(float a, float b) { return a - b; }
static float mul_float(float a, float b) { return a * b; }
static float div_float(float a, float b) { return a / b; }
static float max_float(float a, float b) { return a != a || b != b ? NAN : fmaxf(a, b); }
static float min_float(float a, float b) { return a != a || b != b ? NAN : fminf(a, b); }

static bool add_int(int64_t a, int64_t b, int64_t *out) {
  *out = (int64_t)((uint64_t)a + (uint64_t)b);
  return true;
}

static bool sub_int(int64_t a, int64_t b, int64_t *out) {
  *out = (int64_t)((uint64_t)a - (uint64_t)b);
  return true;
}

static bool mul_int(int64_t a, int64_t b, int64_t *out) {
  *out = (int64_t)((uint64_t)a * (uint64_t)b);
  return true;
}

static bool div_int(int64_t a, int64_t b, int64_t *out) {
  if (b == 0 || (a == INT64_MIN && b == -1))
    return false;
  *out = a / b; /* truncates toward zero, as ONNX Runtime does */
  return true;
}

/* scalar.h's formula, which the kernels share. */
static bool pow_int(int64_t base, int64_t exp, int64_t *out) {
  *out = opc_int_pow_of(base, exp);
  return true;
}

static bool max_int(int64_t a, int64_t b, int64_t *out) {
  *out = a > b ? a : b;
  return true;
}

static bool min_int(int64_t a, int64_t b, int64_t *out) {
  *out = a < b ? a : b;
  return true;
}

/* u64 values beyond INT64_MAX are held as negative int64s. */
static bool max_u64(int64_t a, int64_t b, int64_t *out) {
  *out = (uint64_t)a > (uint64_t)b ? a : b;
  return true;
}

static bool min_u64(int64_t a, int64_t b, int64_t *out) {
  *out = (uint64_t)a < (uint64_t)b ? a : b;
  return true;
}

static bool div_u64(int64_t a, int64_t b, int64_t *out) {
  if (b == 0)
    return false;
  *out = (int64_t)((uint64_t)a / (uint64_t)b);
  return true;
}

bool fold_add(Graph *g, Node *n) { return map_binary(g, n, add_float, add_int); }
bool fold_sub(Graph *g, Node *n) { return map_binary(g, n, sub_float, sub_int); }
bool fold_mul(Graph *g, Node *n) { return map_binary(g, n, mul_float, mul_int); }
bool fold_div(Graph *g, Node *n) {
  return map_binary(g, n, div_float, is_u64(n->out[0]) ? div_u64 : div_int);
}
bool fold_pow(Graph *g, Node *n) { return map_binary(g, n, powf, pow_int); }
bool fold_sum(Graph *g, Node *n) { return map_binary(g, n, add_float, add_int); }
bool fold_max(Graph *g, Node *n) {
  return map_binary(g, n, max_float, is_u64(n->out[0]) ? max_u64 : max_int);
}

bool fold_min(Graph *g, Node *n) {
  return map_binary(g, n, min_float, is_u64(n->out[0]) ? min_u64 : min_int);
}

bool fold_mean(Graph *g, Node *n) {
  if (!map_binary(g, n, add_float, add_int))
    return false;
  Tensor *y = n->out[0];
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    if (y->i64)
      y->i64[i] /= n->nin;
    else
      y->f32[i] /= (float)n->nin;
  }
  return true;
}

/* Mod: with fmod the remainder of truncated division (C's % and fmod),
   without it the floored one, whose sign is the divisor's (numpy's mod). */
static bool mod_int(DType t, bool fmod_mode, int64_t a, int64_t b, int64_t *out) {
  if (b == 0)
    return false;
  int64_t r = opc_int_rem_of(a, b, t == DT_UINT64); /* other unsigned values fit in int64 */
  if (t == DT_UINT64) {
    *out = r;
    return true;
  }
  if (!fmod_mode && r != 0 && (r < 0) != (b < 0))
    r += b;
  *out = r;
  return true;
}

static float mod_float(bool fmod_mode, float a, float b) {
  float r = fmodf(a, b);
  if (!fmod_mode && r != 0 && (r < 0) != (b < 0))
    r += b;
  else if (!fmod_mode && r == 0)
    r = copysignf(0.0f, b);
  return r;
}

bool fold_mod(Graph *g, Node *n) {
  const Tensor *a = n->in[0], *b = n->in[1];
  Tensor *y = n->out[0];
  bool fmod_mode = n->p.mod.fmod;
  int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK];
  broadcast_strides(a->rank, a->dims, y->rank, y->dims, sa);
  broadcast_strides(b->rank, b->dims, y->rank, y->dims, sb);
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    int64_t ia = broadcast_offset(i, y->rank, y->dims, sa);
    int64_t ib = broadcast_offset(i, y->rank, y->dims, sb);
    if (y->f32) {
      y->f32[i] = mod_float(fmod_mode, getf(a, ia), getf(b, ib));
    } else if (!mod_int(y->dtype, fmod_mode, geti(a, ia), geti(b, ib), &y->i64[i])) {
      ir_error(g, n, "integer modulo by zero while folding");
      return false;
    }
  }
  return true;
}

/* ---------------------------------------------------------- reductions */

/* Combines v into an accumulator that has seen `seen` values so far. */
static double reduce_float(OpKind op, double acc, double v, bool seen) {
  if (op == OP_REDUCE_SUM || op == OP_REDUCE_MEAN)
    return acc + v;
  if (!seen)
    return v;
  return op == OP_REDUCE_MAX ? (v > acc ? v : acc) : (v < acc ? v : acc);
}

/* The same in int64, exactly (sums wrap like the other integer kernels). */
static int64_t reduce_int(OpKind op, int64_t acc, int64_t v, bool seen) {
  if (op == OP_REDUCE_SUM || op == OP_REDUCE_MEAN)
    return (int64_t)((uint64_t)acc + (uint64_t)v);
  if (!seen)
    return v;
  return op == OP_REDUCE_MAX ? (v > acc ? v : acc) : (v < acc ? v : acc);
}

/* Where input element i of a reduction lands: its coordinates with the
   reduced axes set to 0, raveled in the keepdims shape kdims. */
static int64_t reduced_index(const Tensor *x, const int64_t *kdims, const bool *reduced,
                             int64_t i) {
  int64_t c[IR_MAX_RANK];
  unravel(i, x->rank, x->dims, c);
  for (int d = 0; d < x->rank; d++)
    if (reduced[d])
      c[d] = 0;
  return ravel(x->rank, kdims, c);
}

bool fold_reduce(Graph *g, Node *n) {
  const bool *reduced = n->p.reduce.reduced;
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  if (n->p.reduce.noop) {
    copy_data(y, x);
    return true;
  }
  int64_t kdims[IR_MAX_RANK], ny = tensor_numel(y), nx = tensor_numel(x);
  for (int d = 0; d < x->rank; d++)
    kdims[d] = reduced[d] ? 1 : x->dims[d];
  int64_t count = ny ? nx / ny : 0;
  double *acc = arena_alloc(g->arena, sizeof(double) * (size_t)(ny + 1));
  bool *seen = arena_alloc(g->arena, sizeof(bool) * (size_t)(ny + 1));
  for (int64_t i = 0; i < nx; i++) {
    int64_t o = reduced_index(x, kdims, reduced, i);
    if (y->i64)
      y->i64[o] = reduce_int(n->op, y->i64[o], geti(x, i), seen[o]);
    else
      acc[o] = reduce_float(n->op, acc[o], getf(x, i), seen[o]);
    seen[o] = true;
  }
  for (int64_t o = 0; o < ny; o++) {
    bool mean = n->op == OP_REDUCE_MEAN;
    if (y->i64 && mean)
      y->i64[o] = count ? y->i64[o] / count : 0;
    else if (y->f32)
      y->f32[o] = (float)(mean ? (count ? acc[o] / (double)count : NAN) : acc[o]);
  }
  return true;
}

/* ReduceSumSquare, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum and
   ReduceLogSumExp. Floats accumulate in double; integers that stay integers
   (sum of squares, product, L1) in wrapping int64. With noop_with_empty_axes
   and no axes nothing is reduced, yet the elementwise steps still apply
   (ReduceSumSquare squares, ReduceLogSum takes the log), as the spec says. */
bool fold_reduce_more(Graph *g, Node *n) {
  const bool *reduced = n->p.reduce.reduced;
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  int64_t kdims[IR_MAX_RANK], ny = tensor_numel(y), nx = tensor_numel(x);
  for (int d = 0; d < x->rank; d++)
    kdims[d] = reduced[d] ? 1 : x->dims[d];
  OpKind op = n->op;
  bool exact = y->i64 && (op == OP_REDUCE_SUM_SQUARE || op == OP_REDUCE_PROD || op == OP_REDUCE_L1);
  double *acc = arena_alloc(g->arena, sizeof(double) * (size_t)(ny + 1));
  double *shift = arena_alloc(g->arena, sizeof(double) * (size_t)(ny + 1));
  for (int64_t o = 0; o < ny; o++) {
    acc[o] = op == OP_REDUCE_PROD ? 1 : 0;
    shift[o] = -INFINITY;
    if (exact)
      y->i64[o] = op == OP_REDUCE_PROD ? 1 : 0;
  }
  /* LogSumExp subtracts each output's largest input so that exp() stays finite. */
  for (int64_t i = 0; op == OP_REDUCE_LOG_SUM_EXP && i < nx; i++) {
    int64_t o = reduced_index(x, kdims, reduced, i);
    double v = getf(x, i);
    if (v > shift[o])
      shift[o] = v;
  }
  for (int64_t i = 0; i < nx; i++) {
    int64_t o = reduced_index(x, kdims, reduced, i);
    if (exact) {
      uint64_t v = (uint64_t)geti(x, i), a = (uint64_t)y->i64[o];
      if (op == OP_REDUCE_L1 && (int64_t)v < 0)
        v = -v;
      y->i64[o] = (int64_t)(op == OP_REDUCE_PROD ? a * v : op == OP_REDUCE_L1 ? a + v : a + v * v);
      continue;
    }
    double v = getf(x, i);
    if (op == OP_REDUCE_SUM_SQUARE || op == OP_REDUCE_L2)
      acc[o] += v * v;
    else if (op == OP_REDUCE_L1)
      acc[o] += fabs(v);
    else if (op == OP_REDUCE_PROD)
      acc[o] *= v;
    else if (op == OP_REDUCE_LOG_SUM)
      acc[o] += v;
    else /* OP_REDUCE_LOG_SUM_EXP, the last kind fold_reduce_more serves */
      acc[o] += isinf(shift[o]) ? 0 : exp(v - shift[o]);
  }
  for (int64_t o = 0; o < ny && !exact; o++) {
    double r = acc[o];
    if (op == OP_REDUCE_L2)
      r = sqrt(r);
    else if (op == OP_REDUCE_LOG_SUM)
      r = log(r);
    else if (op == OP_REDUCE_LOG_SUM_EXP)
      r = isinf(shift[o]) ? shift[o] : shift[o] + log(r);
    if (y->f32)
      y->f32[o] = (float)r;
    else
      y->i64[o] = to_int((float)r);
  }
  return true;
}

/* Softmax-like kinds see x as outer x len x inner and work on each run of
   len values, `inner` apart: the axis alone, or every dim from it on when
   the old opsets coerce x to 2-D. */
typedef void RowFn(const Node *n, int64_t base, int64_t len, int64_t inner);

/* False when y holds no floats. */
static bool map_rows(Node *n, RowFn *row) {
  int axis = n->p.axis.axis;
  bool coerce = n->p.axis.coerce2d;
  const Tensor *x = n->in[0];
  if (!n->out[0]->f32)
    return false;
  int64_t outer = dims_product(x->dims, 0, axis);
  int64_t len = coerce ? dims_product(x->dims, axis, x->rank) : x->dims[axis];
  int64_t inner = coerce ? 1 : dims_product(x->dims, axis + 1, x->rank);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t e = 0; e < inner; e++)
      row(n, o * len * inner + e, len, inner);
  return true;
}

static void softmax_row(const Node *n, int64_t base, int64_t len, int64_t inner) {
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  float max = -INFINITY;
  for (int64_t k = 0; k < len; k++)
    max = fmaxf(max, getf(x, base + k * inner));
  double sum = 0;
  for (int64_t k = 0; k < len; k++)
    sum += exp((double)getf(x, base + k * inner) - max);
  for (int64_t k = 0; k < len; k++) {
    double v = (double)getf(x, base + k * inner) - max;
    y->f32[base + k * inner] = (float)(n->op == OP_LOG_SOFTMAX ? v - log(sum) : exp(v) / sum);
  }
}

/* Hardmax: 1 at the first largest element of each row, 0 elsewhere; a NaN
   counts as the largest, as numpy's argmax has it. */
static void hardmax_row(const Node *n, int64_t base, int64_t len, int64_t inner) {
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  int64_t best = 0;
  for (int64_t k = 0; k < len; k++) {
    float v = getf(x, base + k * inner), m = getf(x, base + best * inner);
    if (m == m && (v > m || v != v))
      best = k;
    y->f32[base + k * inner] = 0;
  }
  if (len > 0)
    y->f32[base + best * inner] = 1;
}

bool fold_softmax(Graph *g, Node *n) { return map_rows(n, softmax_row); }
bool fold_hardmax(Graph *g, Node *n) { return map_rows(n, hardmax_row); }

bool fold_cumsum(Graph *g, Node *n) {
  int axis = n->p.axis.axis;
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  bool exclusive = n->p.axis.exclusive, reverse = n->p.axis.reverse;
  int64_t outer = dims_product(x->dims, 0, axis), len = x->dims[axis];
  int64_t inner = dims_product(x->dims, axis + 1, x->rank);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t e = 0; e < inner; e++) {
      double sum = 0;
      uint64_t isum = 0;
      for (int64_t j = 0; j < len; j++) {
        int64_t at = (o * len + (reverse ? len - 1 - j : j)) * inner + e;
        if (y->i64) {
          uint64_t v = (uint64_t)geti(x, at);
          if (!exclusive)
            isum += v;
          y->i64[at] = (int64_t)isum;
          if (exclusive)
            isum += v;
        } else {
          double v = getf(x, at);
          if (!exclusive)
            sum += v;
          y->f32[at] = (float)sum;
          if (exclusive)
            sum += v;
        }
      }
    }
  return true;
}

/* ------------------------------------------ comparison, logic and bits */

/* Two-input kinds whose result is an integer or bool: f maps the element
   pair each output element reads, broadcast, to the result. */
typedef int64_t PairFn(const Node *n, const Tensor *a, int64_t i, const Tensor *b, int64_t j);

static bool map_pairs(Node *n, PairFn *f) {
  const Tensor *a = n->in[0], *b = n->in[1];
  Tensor *y = n->out[0];
  int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK];
  broadcast_strides(a->rank, a->dims, y->rank, y->dims, sa);
  broadcast_strides(b->rank, b->dims, y->rank, y->dims, sb);
  for (int64_t i = 0; i < tensor_numel(y); i++)
    y->i64[i] = f(n, a, broadcast_offset(i, y->rank, y->dims, sa), b,
                  broadcast_offset(i, y->rank, y->dims, sb));
  return true;
}

/* A NaN compares false with everything, itself included. */
static int64_t equal_pair(const Node *n, const Tensor *a, int64_t i, const Tensor *b, int64_t j) {
  return compare_elems(a, i, b, j) == 0;
}

static int64_t greater_pair(const Node *n, const Tensor *a, int64_t i, const Tensor *b,
                            int64_t j) {
  return compare_elems(a, i, b, j) == 1;
}

static int64_t less_pair(const Node *n, const Tensor *a, int64_t i, const Tensor *b, int64_t j) {
  return compare_elems(a, i, b, j) == -1;
}

static int64_t greater_or_equal_pair(const Node *n, const Tensor *a, int64_t i, const Tensor *b,
                                     int64_t j) {
  int c = compare_elems(a, i, b, j);
  return c == 0 || c == 1;
}

static int64_t less_or_equal_pair(const Node *n, const Tensor *a, int64_t i, const Tensor *b,
                                  int64_t j) {
  int c = compare_elems(a, i, b, j);
  return c == 0 || c == -1;
}

static int64_t and_pair(const Node *n, const Tensor *a, int64_t i, const Tensor *b, int64_t j) {
  return a->i64[i] && b->i64[j];
}

static int64_t or_pair(const Node *n, const Tensor *a, int64_t i, const Tensor *b, int64_t j) {
  return a->i64[i] || b->i64[j];
}

static int64_t xor_pair(const Node *n, const Tensor *a, int64_t i, const Tensor *b, int64_t j) {
  return !a->i64[i] != !b->i64[j];
}

/* The bitwise kinds work on the int64 of the same value; node_fold then
   narrows the result to the dtype's width. */
static int64_t bitwise_and_pair(const Node *n, const Tensor *a, int64_t i, const Tensor *b,
                                int64_t j) {
  return a->i64[i] & b->i64[j];
}

static int64_t bitwise_or_pair(const Node *n, const Tensor *a, int64_t i, const Tensor *b,
                               int64_t j) {
  return a->i64[i] | b->i64[j];
}

static int64_t bitwise_xor_pair(const Node *n, const Tensor *a, int64_t i, const Tensor *b,
                                int64_t j) {
  return a->i64[i] ^ b->i64[j];
}

/* Unsigned only; shifting by the width or more leaves 0, as numpy does. */
static int64_t bit_shift_pair(const Node *n, const Tensor *a, int64_t i, const Tensor *b,
                              int64_t j) {
  uint64_t v = (uint64_t)a->i64[i], by = (uint64_t)b->i64[j];
  if (by >= 8 * dtype_size(a->dtype))
    return 0;
  return (int64_t)(n->p.bit_shift.left ? v << by : v >> by);
}

bool fold_equal(Graph *g, Node *n) { return map_pairs(n, equal_pair); }
bool fold_greater(Graph *g, Node *n) { return map_pairs(n, greater_pair); }
bool fold_less(Graph *g, Node *n) { return map_pairs(n, less_pair); }
bool fold_greater_or_equal(Graph *g, Node *n) { return map_pairs(n, greater_or_equal_pair); }
bool fold_less_or_equal(Graph *g, Node *n) { return map_pairs(n, less_or_equal_pair); }
bool fold_and(Graph *g, Node *n) { return map_pairs(n, and_pair); }
bool fold_or(Graph *g, Node *n) { return map_pairs(n, or_pair); }
bool fold_xor(Graph *g, Node *n) { return map_pairs(n, xor_pair); }
bool fold_bitwise_and(Graph *g, Node *n) { return map_pairs(n, bitwise_and_pair); }
bool fold_bitwise_or(Graph *g, Node *n) { return map_pairs(n, bitwise_or_pair); }
bool fold_bitwise_xor(Graph *g, Node *n) { return map_pairs(n, bitwise_xor_pair); }
bool fold_bit_shift(Graph *g, Node *n) { return map_pairs(n, bit_shift_pair); }

bool fold_not(Graph *g, Node *n) {
  for (int64_t i = 0; i < tensor_numel(n->out[0]); i++)
    n->out[0]->i64[i] = !n->in[0]->i64[i];
  return true;
}

bool fold_bitwise_not(Graph *g, Node *n) {
  for (int64_t i = 0; i < tensor_numel(n->out[0]); i++)
    n->out[0]->i64[i] = ~n->in[0]->i64[i];
  return true;
}

bool fold_is_nan(Graph *g, Node *n) {
  for (int64_t i = 0; i < tensor_numel(n->out[0]); i++)
    n->out[0]->i64[i] = is_nan_at(n->in[0], i);
  return true;
}

bool fold_is_inf(Graph *g, Node *n) {
  for (int64_t i = 0; i < tensor_numel(n->out[0]); i++) {
    float v = n->in[0]->f32[i];
    n->out[0]->i64[i] = (v == INFINITY && n->p.is_inf.positive) ||
                        (v == -INFINITY && n->p.is_inf.negative);
  }
  return true;
}

/* ------------------------------------------------------- quantization */

/* The element of a quantization parameter (scale, zero point) that
   element i of x uses: the only one, or the one along the node's axis. */
static int64_t quant_index(const Node *n, const Tensor *x, int64_t i) {
  int axis = n->p.quant.axis;
  if (axis < 0)
    return 0;
  return i / dims_product(x->dims, axis + 1, x->rank) % x->dims[axis];
}

bool fold_quantize(Graph *g, Node *n) {
  const Tensor *x = n->in[0], *scale = n->in[1], *zero = node_input(n, 2);
  Tensor *y = n->out[0];
  float lo = (float)n->p.quant.lo, hi = (float)n->p.quant.hi;
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    int64_t k = quant_index(n, x, i);
    float q = opc_quantize_of(getf(x, i), getf(scale, k), zero ? getf(zero, k) : 0.0f, lo, hi);
    y->i64[i] = (int64_t)q;
  }
  return true;
}

/* (x - zero) in integers, then times the scale in float, as ONNX Runtime
   computes it; rounded to the output's type. */
bool fold_dequantize(Graph *g, Node *n) {
  const Tensor *x = n->in[0], *scale = n->in[1], *zero = node_input(n, 2);
  Tensor *y = n->out[0];
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    int64_t k = quant_index(n, x, i);
    float v = (float)(geti(x, i) - (zero ? geti(zero, k) : 0)) * getf(scale, k);
    y->f32[i] = dtype_round(y->dtype, v);
  }
  return true;
}

/* The range of x that holds 0, NaN left out (ONNX Runtime's comparisons
   skip it); then QuantizeLinear by the scale and zero point of it. */
bool fold_dynamic_quantize(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  int64_t count = tensor_numel(x);
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < count; i++) {
    lo = x->f32[i] < lo ? x->f32[i] : lo;
    hi = x->f32[i] > hi ? x->f32[i] : hi;
  }
  float scale = opc_dynamic_scale_of(lo, hi), zero = opc_dynamic_zero_of(lo, scale);
  for (int64_t i = 0; i < count; i++)
    n->out[0]->i64[i] = (int64_t)opc_quantize_of(x->f32[i], scale, zero, 0.0f, 255.0f);
  n->out[1]->f32[0] = scale;
  n->out[2]->i64[0] = (int64_t)zero;
  return true;
}

bool fold_where(Graph *g, Node *n) {
  Tensor *y = n->out[0];
  int64_t strides[3][IR_MAX_RANK];
  for (int k = 0; k < 3; k++)
    broadcast_strides(n->in[k]->rank, n->in[k]->dims, y->rank, y->dims, strides[k]);
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    bool pick_x = n->in[0]->i64[broadcast_offset(i, y->rank, y->dims, strides[0])] != 0;
    int k = pick_x ? 1 : 2;
    copy_elem(y, i, n->in[k], broadcast_offset(i, y->rank, y->dims, strides[k]));
  }
  return true;
}

/* ------------------------------------------------ scatter and gather */

/* An index that may count from the end, made non-negative. Shape
   inference has checked the range. */
static int64_t from_end(int64_t index, int64_t dim) { return index < 0 ? index + dim : index; }

/* Combines update element ui into output element yi under the reduction,
   as the reference does it with numpy (a NaN wins max and min). */
static void scatter_into(Tensor *y, int64_t yi, const Tensor *upd, int64_t ui,
                         ScatterReduction r) {
  if (r == SCATTER_NONE) {
    copy_elem(y, yi, upd, ui);
  } else if (y->f32) {
    float a = y->f32[yi], b = getf(upd, ui);
    y->f32[yi] = r == SCATTER_ADD ? a + b : r == SCATTER_MUL ? a * b
               : r == SCATTER_MAX ? max_float(a, b) : min_float(a, b);
  } else if (r == SCATTER_ADD || r == SCATTER_MUL) {
    uint64_t a = (uint64_t)y->i64[yi], b = (uint64_t)upd->i64[ui];
    y->i64[yi] = (int64_t)(r == SCATTER_ADD ? a + b : a * b);
  } else {
    int c = compare_elems(upd, ui, y, yi);
    if ((r == SCATTER_MAX && c == 1) || (r == SCATTER_MIN && c == -1))
      y->i64[yi] = upd->i64[ui];
  }
}

/* The element offset of the slice that one index tuple of `k` values
   (ScatterND, GatherND) addresses in dims[first..first+k) of x. */
static int64_t tuple_offset(const Tensor *idx, int64_t tuple, int64_t k, const Tensor *x,
                            int first) {
  int64_t at = 0;
  for (int64_t j = 0; j < k; j++) {
    int64_t dim = x->dims[first + j];
    at = at * dim + from_end(idx->i64[tuple * k + j], dim);
  }
  return at * dims_product(x->dims, first + (int)k, x->rank);
}

bool fold_scatter_nd(Graph *g, Node *n) {
  const Tensor *x = n->in[0], *idx = n->in[1], *upd = n->in[2];
  Tensor *y = n->out[0];
  copy_data(y, x);
  int64_t k = idx->dims[idx->rank - 1];
  int64_t tuples = dims_product(idx->dims, 0, idx->rank - 1), slice = dims_product(x->dims, (int)k, x->rank);
  for (int64_t t = 0; t < tuples; t++) {
    int64_t at = tuple_offset(idx, t, k, x, 0);
    for (int64_t e = 0; e < slice; e++)
      scatter_into(y, at + e, upd, t * slice + e, n->p.scatter.reduction);
  }
  return true;
}

bool fold_scatter_elements(Graph *g, Node *n) {
  const Tensor *x = n->in[0], *idx = n->in[1], *upd = n->in[2];
  Tensor *y = n->out[0];
  int axis = n->p.scatter.axis;
  int64_t c[IR_MAX_RANK];
  copy_data(y, x);
  for (int64_t i = 0; i < tensor_numel(idx); i++) {
    unravel(i, idx->rank, idx->dims, c);
    c[axis] = from_end(idx->i64[i], x->dims[axis]);
    scatter_into(y, ravel(x->rank, x->dims, c), upd, i, n->p.scatter.reduction);
  }
  return true;
}

/* Per batch (the first batch_dims dims, shared by data and indices), each
   index tuple picks a slice of that batch's data. */
bool fold_gather_nd(Graph *g, Node *n) {
  const Tensor *x = n->in[0], *idx = n->in[1];
  Tensor *y = n->out[0];
  int b = n->p.gather_nd.batch_dims;
  int64_t k = idx->dims[idx->rank - 1];
  int64_t batches = dims_product(idx->dims, 0, b), tuples = dims_product(idx->dims, b, idx->rank - 1);
  int64_t slice = dims_product(x->dims, b + (int)k, x->rank), batch_size = dims_product(x->dims, b, x->rank);
  for (int64_t bi = 0; bi < batches; bi++)
    for (int64_t t = 0; t < tuples; t++) {
      int64_t tuple = bi * tuples + t;
      int64_t from = bi * batch_size + tuple_offset(idx, tuple, k, x, b);
      for (int64_t e = 0; e < slice; e++)
        copy_elem(y, tuple * slice + e, x, from + e);
    }
  return true;
}

/* OneHot follows the spec: an index outside [-depth, depth) gives a row of
   off values (the reference implementation's numpy mod would wrap it).
   Float indices are truncated, as ONNX Runtime does. */
bool fold_one_hot(Graph *g, Node *n) {
  const Tensor *idx = n->in[0], *values = n->in[2];
  Tensor *y = n->out[0];
  int axis = n->p.one_hot.axis;
  int64_t depth = n->p.one_hot.depth;
  int64_t inner = dims_product(idx->dims, axis, idx->rank), outer = dims_product(idx->dims, 0, axis);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t d = 0; d < depth; d++)
      for (int64_t e = 0; e < inner; e++) {
        int64_t v = geti(idx, o * inner + e);
        bool on = v == d || v + depth == d;
        copy_elem(y, (o * depth + d) * inner + e, values, on ? 1 : 0);
      }
  return true;
}

/* ---------------------------------------------- sorting and selection */

/* Orders item a before item b (< 0), after (> 0) or as equal (0). */
typedef int ItemOrder(const void *ctx, int64_t a, int64_t b);

/* Sorts items stably, bottom-up merge sort: equal items keep their order,
   which TopK's and Unique's ties need. */
static void stable_sort(int64_t *items, int64_t count, ItemOrder *order, const void *ctx) {
  int64_t *tmp = malloc(sizeof(int64_t) * (size_t)(count + 1));
  for (int64_t width = 1; width < count; width *= 2) {
    for (int64_t lo = 0; lo < count; lo += 2 * width) {
      int64_t mid = lo + width < count ? lo + width : count;
      int64_t hi = lo + 2 * width < count ? lo + 2 * width : count;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi)
        tmp[k++] = order(ctx, items[j], items[i]) < 0 ? items[j++] : items[i++];
      while (i < mid)
        tmp[k++] = items[i++];
      while (j < hi)
        tmp[k++] = items[j++];
    }
    memcpy(items, tmp, sizeof(int64_t) * (size_t)count);
  }
  free(tmp);
}

/* Whether element `cand` beats the best so far, `best`, for ArgMax or
   ArgMin: the first extreme value (the last with select_last_index). A NaN
   compares with nothing (compare_elems says 2), as in ONNX Runtime's loop:
   it wins only as the first element, and then keeps its place. */
static bool arg_beats(const Node *n, const Tensor *x, int64_t cand, int64_t best) {
  bool last = n->p.arg.select_last;
  int c = compare_elems(x, cand, x, best);
  return c == (n->op == OP_ARG_MAX ? 1 : -1) || (c == 0 && last);
}

bool fold_arg(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  int axis = n->p.arg.axis;
  int64_t outer = dims_product(x->dims, 0, axis), len = x->dims[axis];
  int64_t inner = dims_product(x->dims, axis + 1, x->rank);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t e = 0; e < inner; e++) {
      int64_t base = o * len * inner + e, best = 0;
      for (int64_t k = 1; k < len; k++)
        if (arg_beats(n, x, base + k * inner, base + best * inner))
          best = k;
      n->out[0]->i64[o * inner + e] = best;
    }
  return true;
}

/* One row of TopK: elements base + k * inner. */
typedef struct TopRow {
  const Tensor *x;
  int64_t base, inner;
  bool largest;
} TopRow;

/* Largest (or smallest) first, ties in index order; NaNs last either way,
   where numpy's sort of the reference puts them. */
static int topk_order(const void *ctx, int64_t a, int64_t b) {
  const TopRow *r = ctx;
  int64_t i = r->base + a * r->inner, j = r->base + b * r->inner;
  int c = order_elems(r->x, i, j);
  return r->largest && !is_nan_at(r->x, i) && !is_nan_at(r->x, j) ? -c : c;
}

/* The result is sorted whatever `sorted` says: the spec leaves the order
   of an unsorted result open. */
bool fold_topk(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  Tensor *values = n->out[0], *indices = n->nout > 1 ? n->out[1] : NULL;
  int axis = n->p.topk.axis;
  int64_t outer = dims_product(x->dims, 0, axis), len = x->dims[axis], k = n->p.topk.k;
  int64_t inner = dims_product(x->dims, axis + 1, x->rank);
  int64_t *order = malloc(sizeof(int64_t) * (size_t)(len + 1));
  for (int64_t o = 0; o < outer; o++)
    for (int64_t e = 0; e < inner; e++) {
      TopRow row = {x, o * len * inner + e, inner, n->p.topk.largest};
      for (int64_t j = 0; j < len; j++)
        order[j] = j;
      stable_sort(order, len, topk_order, &row);
      for (int64_t j = 0; j < k; j++) {
        int64_t at = (o * k + j) * inner + e;
        if (values)
          copy_elem(values, at, x, row.base + order[j] * inner);
        if (indices)
          indices->i64[at] = order[j];
      }
    }
  free(order);
  return true;
}

int64_t count_non_zero(const Tensor *x) {
  int64_t count = 0;
  for (int64_t i = 0; i < tensor_numel(x); i++)
    count += x->f32 ? x->f32[i] != 0 : x->i64[i] != 0;
  return count;
}

/* NonZero: the coordinates of every non-zero element, row-major, one row
   per dim. */
bool fold_non_zero(Graph *g, Node *n) {
  const Tensor *x = n->in[0];
  Tensor *y = n->out[0];
  int64_t count = y->dims[1], c[IR_MAX_RANK] = {0}, j = 0;
  for (int64_t i = 0; i < tensor_numel(x); i++) {
    if (x->f32 ? x->f32[i] == 0 : x->i64[i] == 0)
      continue;
    unravel(i, x->rank, x->dims, c);
    for (int64_t d = 0; d < y->dims[0]; d++)
      y->i64[d * count + j] = c[d];
    j++;
  }
  return true;
}

bool fold_compress(Graph *g, Node *n) {
  (void)g;
  const Tensor *x = n->in[0], *cond = n->in[1];
  Tensor *y = n->out[0];
  int axis = n->p.compress.axis;
  int64_t along = axis >= 0 ? x->dims[axis] : tensor_numel(x);
  int64_t outer = axis >= 0 ? dims_product(x->dims, 0, axis) : 1;
  int64_t inner = axis >= 0 ? dims_product(x->dims, axis + 1, x->rank) : 1, k = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < cond->dims[0]; j++) {
      if (!cond->i64[j])
        continue;
      for (int64_t i = 0; i < inner; i++) {
        int64_t from = (o * along + j) * inner + i;
        if (y->f32)
          y->f32[k++] = x->f32[from];
        else
          y->i64[k++] = x->i64[from];
      }
    }
  return true;
}

/* Unique's items: the elements of the flattened input, or with an axis the
   slices along it, compared element by element (numpy's unique moves the
   axis first and compares the rows). */
typedef struct Items {
  const Tensor *x;
  int64_t count;        /* items */
  int64_t outer, inner; /* an item is `outer` runs of `inner` elements */
} Items;

static Items unique_items(const Node *n) {
  const Tensor *x = n->in[0];
  int axis = n->p.unique.axis;
  if (!n->p.unique.has_axis)
    return (Items){x, tensor_numel(x), 1, 1};
  return (Items){x, x->dims[axis], dims_product(x->dims, 0, axis), dims_product(x->dims, axis + 1, x->rank)};
}

/* Element p of item k. */
static int64_t item_elem(const Items *it, int64_t k, int64_t p) {
  int64_t o = p / it->inner, e = p % it->inner;
  return (o * it->count + k) * it->inner + e;
}

static int item_order(const void *ctx, int64_t a, int64_t b) {
  const Items *it = ctx;
  for (int64_t p = 0; p < it->outer * it->inner; p++) {
    int c = order_elems(it->x, item_elem(it, a, p), item_elem(it, b, p));
    if (c)
      return c;
  }
  return 0;
}

/* Sorts the items (stably: the first of equal items is their first
   occurrence) and numbers the groups of equal items: group[k] for the
   k-th sorted item. Returns the number of groups; the caller frees. */
static int64_t group_items(const Items *it, int64_t **sorted, int64_t **group) {
  int64_t *s = malloc(sizeof(int64_t) * (size_t)(it->count + 1));
  int64_t *grp = malloc(sizeof(int64_t) * (size_t)(it->count + 1));
  for (int64_t k = 0; k < it->count; k++)
    s[k] = k;
  stable_sort(s, it->count, item_order, it);
  int64_t groups = 0;
  for (int64_t k = 0; k < it->count; k++) {
    if (k == 0 || item_order(it, s[k - 1], s[k]) != 0)
      groups++;
    grp[k] = groups - 1;
  }
  *sorted = s;
  *group = grp;
  return groups;
}

int64_t count_unique(const Node *n) {
  Items it = unique_items(n);
  int64_t *sorted, *group;
  int64_t count = group_items(&it, &sorted, &group);
  free(sorted);
  free(group);
  return count;
}

static int first_order(const void *ctx, int64_t a, int64_t b) {
  const int64_t *first = ctx;
  return first[a] < first[b] ? -1 : first[a] > first[b];
}

/* first[u]: the first occurrence of group u. Its place in the output is u
   when sorted, else its rank among the first occurrences. */
static void unique_places(const Node *n, const int64_t *first, int64_t groups, int64_t *place) {
  for (int64_t u = 0; u < groups; u++)
    place[u] = u;
  if (n->p.unique.sorted)
    return;
  int64_t *order = malloc(sizeof(int64_t) * (size_t)(groups + 1));
  for (int64_t u = 0; u < groups; u++)
    order[u] = u;
  stable_sort(order, groups, first_order, first);
  for (int64_t j = 0; j < groups; j++)
    place[order[j]] = j;
  free(order);
}

bool fold_unique(Graph *g, Node *n) {
  Items it = unique_items(n);
  int64_t *sorted, *group;
  int64_t groups = group_items(&it, &sorted, &group);
  int64_t *first = arena_alloc(g->arena, sizeof(int64_t) * (size_t)(2 * groups + 1));
  int64_t *place = first + groups;
  for (int64_t k = it.count - 1; k >= 0; k--)
    first[group[k]] = sorted[k]; /* the stable sort put first occurrences first */
  unique_places(n, first, groups, place);
  Tensor *y = n->out[0];
  Tensor *indices = n->nout > 1 ? n->out[1] : NULL, *inverse = n->nout > 2 ? n->out[2] : NULL;
  Tensor *counts = n->nout > 3 ? n->out[3] : NULL;
  Items out = {y, groups, it.outer, it.inner};
  for (int64_t u = 0; u < groups; u++) {
    for (int64_t p = 0; p < it.outer * it.inner; p++)
      copy_elem(y, item_elem(&out, place[u], p), it.x, item_elem(&it, first[u], p));
    if (indices)
      indices->i64[place[u]] = first[u];
    if (counts)
      counts->i64[place[u]] = 0;
  }
  for (int64_t k = 0; k < it.count; k++) {
    if (inverse)
      inverse->i64[sorted[k]] = place[group[k]];
    if (counts)
      counts->i64[place[group[k]]]++;
  }
  free(sorted);
  free(group);
  return true;
}

float dtype_round(DType t, float f) {
  return t == DT_FLOAT16 ? round_to_half(f) : t == DT_BFLOAT16 ? round_to_bfloat16(f) : f;
}

/* -------------------------------------------------------------- driver */

/* The evaluators compute in int64 and float; each result then keeps what
   its dtype holds: integers wrap to their width (u8 200 + 100 is 44),
   floats round to f16 or bf16. */
static void fit_to_dtype(Tensor *t) {
  for (int64_t i = 0; i < tensor_numel(t); i++) {
    if (t->i64)
      t->i64[i] = wrap_int(t->i64[i], t->dtype);
    else if (t->dtype == DT_FLOAT16)
      t->f32[i] = round_to_half(t->f32[i]);
    else if (t->dtype == DT_BFLOAT16)
      t->f32[i] = round_to_bfloat16(t->f32[i]);
  }
}

bool node_fold(Graph *g, Node *n) {
  if (!op_is_evaluable(n->op))
    return false;
  bool needs_inputs = op_info(n->op)->eval != FROM_SHAPES;
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] && (needs_inputs ? !tensor_is_const(n->in[i]) : n->in[i]->bounded))
      return false; /* a bounded input's shape is the run's: Shape then runs */
  /* The kernels below trust the output shapes; a pass may have changed
     the inputs since they were inferred. */
  if (!node_infer(g, n))
    return false;
  for (int i = 0; i < n->nout; i++) {
    Tensor *t = n->out[i];
    if (t && (tensor_numel(t) > FOLD_MAX_ELEMENTS || dtype_size(t->dtype) == 0))
      return false;
  }
  /* Writing into fresh storage keeps earlier readers of old data intact;
     on failure the outputs go back to being run-time values. */
  for (int i = 0; i < n->nout; i++)
    if (n->out[i])
      alloc_data(g, n->out[i]);
  if (op_info(n->op)->fold(g, n)) {
    for (int i = 0; i < n->nout; i++)
      if (n->out[i])
        fit_to_dtype(n->out[i]);
    return true;
  }
  for (int i = 0; i < n->nout; i++)
    if (n->out[i])
      n->out[i]->f32 = NULL, n->out[i]->i64 = NULL;
  return false;
}

/* A run-time Loop never folds: one whose iterations are known at compile
   time was unrolled by the importer, and the rest depend on data. */
bool fold_loop(Graph *g, Node *n) {
  (void)g;
  (void)n;
  return false;
}
