/*
 * fuse_qdq.c - QDQ models run in int8. A QDQ model (ONNX Runtime's
 * quantize_static, QuantFormat.QDQ) writes each quantized operator as a
 * float one between explicit DequantizeLinear and QuantizeLinear nodes:
 *
 *   Q(act(Conv(DQ(x), DQ(w), DQ(bias))))      Q(act(MatMul(DQ(a), DQ(b))))
 *
 * and Q(act(Gemm(DQ(a), DQ(b), DQ(c)))). Such a pattern becomes the
 * table's integer form of the float kind (ops.def's INTEGER_FORM rows:
 * QLinearConv, QLinearMatMul; a Gemm's is a 1x1 QLinearConv),
 * which reads the quantized tensors, sums in int32 and requantises with
 * the scales folded into one multiplier per output channel. The bias,
 * DQ(int32 b) with scale x_scale * w_scale, is the integer form's int32
 * bias as it stands. The activation, a Relu or a Clip, goes into the
 * requantisation's saturation: quantizing is monotonic, so
 * Q(clip(v, lo, hi)) = clamp(Q(v), Q(lo), Q(hi)). Where Q(lo) is the
 * type's least value and Q(hi) its greatest (quantize_static's uint8
 * activations after a Relu: zero point 0) the saturation already does its
 * work and the activation simply goes; otherwise the integer node keeps it
 * (Node.act) and saturates to [Q(lo), Q(hi)] (qlinear_bounds). Other
 * activations change values inside the range and stay float.
 *
 * A residual Add between them, Q(act(Add(DQ(a), DQ(b)))), becomes opc's
 * QuantizedAdd (try_fuse_add): the same float path, in one pass over the
 * bytes.
 *
 * A kind that only places values (T_MOVES_VALUES: Concat, Split, Slice,
 * Transpose, the reshapes) runs on the bytes (try_fuse_moves):
 * Q(Concat(DQ(a), DQ(b))) is Concat(Q(DQ(a)), Q(DQ(b))), and Q(DQ(a)) is
 * a itself where a has Q's scale and zero point. SqueezeNet's and
 * Inception's joins, and ShuffleNet's channel shuffles and splits, took a
 * DQ and a Q over float data around each. So does a kind that selects
 * values by order (T_SELECTS_VALUES: MaxPool), whose max commutes with
 * the non-decreasing Q(DQ(x)) of positive scales.
 *
 * The DequantizeLinear nodes stay for any other reader (eliminate-dead
 * drops those left unread). A pattern that cannot fuse stays as float
 * between its Q and DQ nodes, and --report lists it with the reason.
 *
 * Runs before fold-constants, which would turn DQ(w) into float weights.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "pass.h"
#include "rewrite.h"
#include "../scalar/scalar.h"

/* A DequantizeLinear's operands: q (the quantized tensor), its scale, its
   zero point (NULL: 0) and axis (-1: per tensor). */
typedef struct Dequant {
  Tensor *q, *scale, *zero;
  int axis;
} Dequant;

/* Why the node cannot fuse, for --report; set by the checks that fail. */
typedef struct Verdict {
  const char *why;
} Verdict;

static bool refuse(Verdict *v, const char *why) {
  v->why = why;
  return false;
}

static bool is_quant_type(DType t) {
  return t == DT_INT8 || t == DT_UINT8;
}

/* Whether t is written by a live DequantizeLinear; fills d. */
static bool dequantized(const Tensor *t, Dequant *d) {
  const Node *p = t ? t->producer : NULL;
  if (!p || p->dead || p->op != OP_DEQUANTIZE_LINEAR || t->producer_slot != 0)
    return false;
  *d = (Dequant){p->in[0], p->in[1], node_input(p, 2), p->p.quant.axis};
  return true;
}

/* Scales and zero points must be known now: they are folded into the
   multipliers at compile time. */
static bool constant_params(const Dequant *d) {
  return tensor_is_const(d->scale) && d->scale->dtype == DT_FLOAT &&
         (!d->zero || tensor_is_const(d->zero));
}

/* The activation operand of `n`: quantized per tensor to int8 or uint8. */
static bool check_activation_operand(const Dequant *d, Verdict *v) {
  if (!is_quant_type(d->q->dtype))
    return refuse(v, "its input is not dequantized from int8 or uint8");
  if (d->axis >= 0)
    return refuse(v, "its input is quantized per axis (the integer form takes one scale)");
  return constant_params(d) || refuse(v, "its input's scale or zero point is not a constant");
}

/* The weight operand: a constant int8 or uint8 tensor, per tensor or per
   output channel (axis `channel_axis` of the weight). */
static bool check_weight_operand(const Dequant *d, int channel_axis, Verdict *v) {
  if (!is_quant_type(d->q->dtype))
    return refuse(v, "its weight is not dequantized from int8 or uint8");
  if (!tensor_is_const(d->q) || !constant_params(d))
    return refuse(v, "its weight, scale or zero point is not a constant");
  if (d->axis >= 0 && d->axis != channel_axis)
    return refuse(v, "its weight is quantized per axis, not per output channel");
  return true;
}

/* The weight's channel axis: a Conv's output channels lead its weight, a
   MatMul's B has them last (per column), and needs rank 2 or more; a
   Gemm's B has them first under transB, else last. */
static int weight_channel_axis(const Node *n) {
  const Tensor *w = n->in[1];
  if (n->op == OP_GEMM)
    return n->p.gemm.trans_b ? 0 : 1;
  return n->op == OP_CONV ? 0 : w->rank >= 2 ? w->rank - 1 : -2;
}

/* ------------------------------------------------------------- bias */

static float scale_at(const Tensor *scale, int64_t c) {
  return scale->f32[tensor_numel(scale) > 1 ? c : 0];
}

/* A Conv's or Gemm's bias: DQ of a constant int32 [M] with zero point 0
   and, channel by channel, the scale x_scale * w_scale as float32 forms
   it, so that the int32 values add to the sums unchanged. */
static bool check_bias(const Node *n, const Dequant *x, const Dequant *w, Verdict *v) {
  const Tensor *b = n->in[2];
  Dequant d;
  if (!dequantized(b, &d) || d.q->dtype != DT_INT32 || !tensor_is_const(d.q) ||
      !constant_params(&d))
    return refuse(v, "its bias is not a constant int32 tensor dequantized");
  /* one per output channel (a Gemm's C may broadcast; the integer form's
     bias may not) */
  int64_t m = b->rank == 1 && b->dims[0] == n->out[0]->dims[1] ? b->dims[0] : -1;
  for (int64_t c = 0; c < m; c++) {
    float want = scale_at(x->scale, 0) * scale_at(w->scale, c);
    if (scale_at(d.scale, c) != want)
      return refuse(v, "its bias's scale is not x_scale * w_scale");
    if (d.zero && d.zero->i64[tensor_numel(d.zero) > 1 ? c : 0] != 0)
      return refuse(v, "its bias's zero point is not 0");
  }
  return m >= 0 || refuse(v, "its bias is not 1-D, one value per output channel");
}

/* ---------------------------------------------------------- output side */

/* The output's QuantizeLinear and, between, the activation (NULL: none). */
typedef struct Tail {
  Node *act, *quant;
  Activation kind; /* the activation's, Relu or Clip */
  float lo, hi;    /* its clamp */
} Tail;

/* The sole reader of `y`, live, reading it as input 0. */
static Node *next_reader(const Tensor *y) {
  Node *r = sole_consumer(y);
  return r && !r->dead && r->in[0] == y ? r : NULL;
}

/* Relu and Clip are clamps; other activations change values inside the
   range and stay float. */
static bool clamp_of(const Node *n, Tail *t) {
  float alpha, beta;
  if (!activation_of(n, &t->kind, &alpha, &beta))
    return false;
  if (t->kind == OPC_ACT_RELU) {
    t->lo = 0;
    t->hi = INFINITY;
    return true;
  }
  if (t->kind == OPC_ACT_CLIP) {
    t->lo = alpha;
    t->hi = beta;
    return true;
  }
  return false;
}

/* Whether the quantization `q` saturates [lo, hi] to its whole range: the
   clamp then changes no quantized value. */
static bool clamp_absorbed(const Node *q, float lo, float hi) {
  float s = q->in[1]->f32[0];
  const Tensor *z = node_input(q, 2);
  float zero = z ? (float)z->i64[0] : 0.0f;
  float qlo = (float)q->p.quant.lo, qhi = (float)q->p.quant.hi;
  return opc_quantize_of(lo, s, zero, -FLT_MAX, FLT_MAX) <= qlo &&
         opc_quantize_of(hi, s, zero, -FLT_MAX, FLT_MAX) >= qhi;
}

/* The tail of output y of a node. */
static bool find_tail_of(const Tensor *y, Tail *t, Verdict *v) {
  *t = (Tail){NULL, NULL, OPC_ACT_NONE, -INFINITY, INFINITY};
  Node *r = next_reader(y);
  if (r && clamp_of(r, t)) {
    t->act = r;
    r = next_reader(r->out[0]);
  }
  if (!r || r->op != OP_QUANTIZE_LINEAR)
    return refuse(v, t->act ? "its activation is not read by one QuantizeLinear alone"
                            : "its output is not read by one QuantizeLinear alone");
  const Tensor *z = node_input(r, 2);
  if (!is_quant_type(r->out[0]->dtype) || r->p.quant.axis >= 0 || !tensor_is_const(r->in[1]) ||
      r->in[1]->dtype != DT_FLOAT || (z && !tensor_is_const(z)))
    return refuse(v, "its output is not quantized per tensor to int8 or uint8 by constants");
  t->quant = r;
  return true;
}

static bool find_tail(const Node *n, Tail *t, Verdict *v) {
  return find_tail_of(n->out[0], t, v);
}

/* ------------------------------------------------------------ rewrite */

/* A zero point of `type` holding 0: what an absent one means. */
static Tensor *zero_point(Graph *g, const char *name, DType type) {
  Tensor *t = graph_add_tensor(g, name);
  t->dtype = type;
  tensor_set_shape(t, 0, NULL);
  t->i64 = arena_alloc(g->arena, sizeof(int64_t));
  return t;
}

static Tensor *zero_or_given(Graph *g, const Node *n, const char *role, Tensor *z, DType type) {
  return z ? z : zero_point(g, arena_printf(g->arena, "%s_%s_zero_point", n->name, role), type);
}

/* `n` becomes its integer form `qop`, reading the quantized operands xq
   and wq (x's and w's, or their 4-D forms for a Gemm) and writing y; the
   activation and the QuantizeLinear are gone. */
static void become_integer(Graph *g, Node *n, OpKind qop, Tensor *xq, const Dequant *x,
                           Tensor *wq, const Dequant *w, const Tail *t, Tensor *y) {
  Node *q = t->quant;
  Tensor *bias = NULL;
  Dequant b;
  if (node_input(n, 2) && dequantized(n->in[2], &b))
    bias = b.q;
  int nin = bias ? 9 : 8;
  Tensor **in = arena_alloc(g->arena, sizeof(Tensor *) * (size_t)(nin + 1));
  in[0] = xq;
  in[1] = x->scale;
  in[2] = zero_or_given(g, n, "x", x->zero, x->q->dtype);
  in[3] = wq;
  in[4] = w->scale;
  in[5] = zero_or_given(g, n, "w", w->zero, w->q->dtype);
  in[6] = q->in[1];
  in[7] = zero_or_given(g, n, "y", node_input(q, 2), q->out[0]->dtype);
  if (bias)
    in[8] = bias;
  n->op = qop;
  n->in = in;
  n->nin = nin;
  set_node_output(n, 0, y);
  /* A clamp the saturation does not already perform narrows it. */
  if (t->act && !clamp_absorbed(q, t->lo, t->hi)) {
    n->act = t->kind;
    n->act_alpha = t->kind == OPC_ACT_CLIP ? t->lo : 0;
    n->act_beta = t->kind == OPC_ACT_CLIP ? t->hi : 0;
  }
  if (t->act) {
    node_absorb(g, n, t->act);
    t->act->dead = true;
  }
  node_absorb(g, n, q);
  q->dead = true;
}

static bool rewrite(Graph *g, Node *n, OpKind qop, const Dequant *x, const Dequant *w,
                    const Tail *t) {
  become_integer(g, n, qop, x->q, x, w->q, w, t, t->quant->out[0]);
  return node_infer(g, n);
}

/* ------------------------------------------------------------- Gemm */

/* A Reshape of `from` to `dims`, writing `to` (NULL: a new tensor). */
static Node *reshape(Graph *g, const char *name, Tensor *from, Tensor *to, int rank,
                     const int64_t *dims) {
  Node *r = graph_add_node(g, OP_RESHAPE, name, 2, 1);
  Tensor *shape = graph_add_tensor(g, arena_printf(g->arena, "%s_shape", name));
  int64_t n = rank;
  shape->dtype = DT_INT64;
  tensor_set_shape(shape, 1, &n);
  shape->i64 = arena_dup(g->arena, dims, sizeof(int64_t) * (size_t)rank);
  r->in[0] = from;
  r->in[1] = shape;
  if (!to) {
    to = graph_add_tensor(g, arena_printf(g->arena, "%s_out", name));
    to->dtype = from->dtype;
    tensor_set_shape(to, rank, dims);
  }
  set_node_output(r, 0, to);
  return r;
}

/* The Gemm's weight as a 1x1 filter [M, K, 1, 1]: B itself under transB,
   else B [K, M] transposed, at compile time. */
static Tensor *filter_of(Graph *g, const Node *n, const Tensor *b) {
  bool trans = n->p.gemm.trans_b;
  int64_t k = b->dims[trans ? 1 : 0], m = b->dims[trans ? 0 : 1];
  Tensor *f = graph_add_tensor(g, arena_printf(g->arena, "%s_filter", n->name));
  f->dtype = b->dtype;
  tensor_set_shape(f, 4, (int64_t[]){m, k, 1, 1});
  f->i64 = arena_alloc(g->arena, sizeof(int64_t) * (size_t)(m * k + 1));
  for (int64_t o = 0; o < m; o++)
    for (int64_t i = 0; i < k; i++)
      f->i64[o * k + i] = b->i64[trans ? o * k + i : i * m + o];
  return f;
}

/* A Gemm y = x B (+ c), transA 0 and alpha 1 (beta is in c's scale, which
   check_bias compares), is a 1x1 convolution of x seen as [N, K, 1, 1]:
   it becomes QLinearConv between two Reshapes, which alias-reshape makes
   views, so that the bias has a place. */
static bool check_gemm(const Node *n, Verdict *v) {
  if (n->p.gemm.trans_a || n->p.gemm.alpha != 1.0f || n->p.gemm.beta != 1.0f)
    return refuse(v, "a Gemm with transA, or alpha or beta other than 1, has no integer form");
  return true;
}

static bool rewrite_gemm(Graph *g, Node *n, const Dequant *x, const Dequant *w, const Tail *t) {
  int64_t rows = x->q->dims[0], k = x->q->dims[1], m = n->out[0]->dims[1];
  Node *in = reshape(g, arena_printf(g->arena, "%s_as_image", n->name), x->q, NULL, 4,
                     (int64_t[]){rows, k, 1, 1});
  Tensor *y = t->quant->out[0];
  Tensor *y4 = graph_add_tensor(g, arena_printf(g->arena, "%s_image", n->name));
  y4->dtype = y->dtype;
  tensor_set_shape(y4, 4, (int64_t[]){rows, m, 1, 1});
  Tensor *filter = filter_of(g, n, w->q);
  become_integer(g, n, OP_QLINEAR_CONV, in->out[0], x, filter, w, t, y4);
  n->attrs = NULL;
  n->nattrs = 0;
  Attr *kernel = node_set_attr(g, n, "kernel_shape", ATTR_INTS);
  kernel->n = 2;
  kernel->ints = arena_dup(g->arena, (int64_t[]){1, 1}, sizeof(int64_t) * 2);
  Node *out = reshape(g, arena_printf(g->arena, "%s_as_matrix", n->name), y4, y, 2, y->dims);
  return node_infer(g, in) && node_infer(g, n) && node_infer(g, out);
}

/* A residual Add, Q(act(Add(DQ(a), DQ(b)))) with a and b of one shape and
   type and y of that type, becomes QuantizedAdd: one pass over the bytes
   instead of two DQs, the Add and the Q over float data. */
static bool try_fuse_add(Graph *g, Node *n, Verdict *v, bool *ok) {
  Dequant a, b;
  Tail t;
  if (!dequantized(n->in[0], &a) || !dequantized(n->in[1], &b))
    return refuse(v, "an operand is not dequantized");
  if (n->act != OPC_ACT_NONE)
    return refuse(v, "it already computes a fused activation");
  if (!check_activation_operand(&a, v) || !check_activation_operand(&b, v))
    return false;
  if (a.q->dtype != b.q->dtype || !tensor_same_shape(a.q, n->out[0]) ||
      !tensor_same_shape(b.q, n->out[0]) || a.q->bounded || b.q->bounded)
    return refuse(v, "its operands differ in type or shape (the integer form broadcasts nothing)");
  if (!find_tail(n, &t, v))
    return false;
  if (t.quant->out[0]->dtype != a.q->dtype)
    return refuse(v, "its output is quantized to another type than its operands");
  become_integer(g, n, OP_QUANTIZED_ADD, a.q, &a, b.q, &b, &t, t.quant->out[0]);
  *ok = node_infer(g, n);
  return true;
}

/* ------------------------------------------------- values moved (Concat) */

static int64_t zero_value(const Tensor *z) {
  return z ? z->i64[0] : 0;
}

/* Whether two per-tensor quantizations, (type, scale, zero point) each,
   are one. */
static bool alike(DType ta, const Tensor *sa, const Tensor *za, DType tb, const Tensor *sb,
                  const Tensor *zb) {
  return ta == tb && sa->f32[0] == sb->f32[0] && zero_value(za) == zero_value(zb);
}

/* Whether the DequantizeLinear d and the QuantizeLinear q use one scale,
   zero point and type: then Q(DQ(x)) is x, as (x - z) s / s rounds back to
   x - z for any |x - z| < 2^24. */
static bool same_quantization(const Dequant *d, const Node *q) {
  return alike(d->q->dtype, d->scale, d->zero, q->out[0]->dtype, q->in[1], node_input(q, 2));
}

/* Whether two QuantizeLinears (per tensor) quantize alike. */
static bool same_quantizers(const Node *a, const Node *b) {
  return alike(a->out[0]->dtype, a->in[1], node_input(a, 2), b->out[0]->dtype, b->in[1],
               node_input(b, 2));
}

static bool try_fuse_lookup(Graph *g, Node *q, bool *ok);

/* x quantized as q does: x's bytes when they already are, else a new
   QuantizeLinear of DQ(x) with q's scale, zero point and attributes, as
   a QuantizedLookup of x where it can be (try_fuse_lookup). */
static Tensor *requantized(Graph *g, const Node *n, int k, const Dequant *d, Tensor *dq,
                           const Node *q) {
  if (same_quantization(d, q))
    return d->q;
  Node *r = graph_add_node(g, OP_QUANTIZE_LINEAR,
                           arena_printf(g->arena, "%s_requantize_%d", n->name, k), q->nin, 1);
  for (int j = 0; j < q->nin; j++)
    r->in[j] = q->in[j];
  r->in[0] = dq;
  r->attrs = q->attrs;
  r->nattrs = q->nattrs;
  Tensor *y = graph_add_tensor(g, arena_printf(g->arena, "%s_input_%d", n->name, k));
  set_node_output(r, 0, y);
  bool ok = node_infer(g, r);
  if (ok)
    try_fuse_lookup(g, r, &ok);
  return ok ? y : NULL;
}

/* Q(op(DQ(a), DQ(b), ...)) of a kind that only places its inputs' values
   (T_MOVES_VALUES) becomes op(a', b', ...) on the quantized bytes, where
   x' is x when DQ(x) has Q's quantization and Q(DQ(x)) otherwise:
   quantizing per tensor commutes with placing values, so the result is
   the same bytes. Parameter inputs (a Reshape's shape) stay; a kind of
   several outputs (Split) needs each read by a QuantizeLinear alone, all
   quantizing alike. A kind that selects by order (T_SELECTS_VALUES:
   MaxPool) needs positive scales, so that Q(DQ(x)) does not decrease,
   and its Indices unread: two values the requantization makes one byte
   would tie. */
static bool try_fuse_moves(Graph *g, Node *n, Verdict *v, bool *ok) {
  bool selects = op_info(n->op)->traits & T_SELECTS_VALUES;
  int outputs = selects ? 1 : n->nout;
  if (selects && n->nout > 1 && n->out[1] && (n->out[1]->nusers || n->out[1]->is_output))
    return refuse(v, "its Indices are read");
  Dequant *d = arena_alloc(g->arena, sizeof(Dequant) * (size_t)n->nin);
  Node **q = arena_alloc(g->arena, sizeof(Node *) * (size_t)n->nout);
  for (int k = 0; k < n->nin; k++) {
    if (op_input_is_param(n->op, k))
      continue;
    if (!n->in[k] || !dequantized(n->in[k], &d[k]))
      return refuse(v, "an operand is not dequantized");
    if (!check_activation_operand(&d[k], v))
      return false;
    if (n->in[k]->bounded)
      return refuse(v, "an operand's size is decided at run time");
    if (selects && !(d[k].scale->f32[0] > 0))
      return refuse(v, "an operand's scale is not positive");
  }
  for (int j = 0; j < outputs; j++) {
    Tail t;
    if (!n->out[j] || !find_tail_of(n->out[j], &t, v))
      return n->out[j] ? false : refuse(v, "an output is unused");
    if (t.act)
      return refuse(v, "an activation lies between it and its QuantizeLinear");
    q[j] = t.quant;
    if (!same_quantizers(q[j], q[0]))
      return refuse(v, "its outputs are quantized differently");
    if (selects && !(q[j]->in[1]->f32[0] > 0))
      return refuse(v, "its QuantizeLinear's scale is not positive");
  }
  for (int k = 0; k < n->nin; k++) {
    if (op_input_is_param(n->op, k))
      continue;
    Tensor *x = requantized(g, n, k, &d[k], n->in[k], q[0]);
    if (!x) {
      *ok = false;
      return true;
    }
    n->in[k] = x;
  }
  for (int j = 0; j < outputs; j++) {
    set_node_output(n, j, q[j]->out[0]);
    node_absorb(g, n, q[j]);
    q[j]->dead = true;
  }
  *ok = node_infer(g, n);
  return true;
}

/* ------------------------------------------- a byte's function (lookup) */

enum { LOOKUP_MAX_NODES = 8, LOOKUP_MAX_LEAVES = 4 };

/* A function of one tensor's bytes x: f's float nodes, in the graph's
   order (readers after their operands), and its leaves, the
   DequantizeLinear outputs it reads: DQ(x), or DQ(L(x)) of a
   QuantizedLookup L of x (EfficientNet's SiLU, x DQ(x) Sigmoid(DQ(x)),
   with the Sigmoid's own Q and DQ: the Sigmoid is a lookup already). */
typedef struct ByteFunction {
  Tensor *x;
  Node *nodes[LOOKUP_MAX_NODES];
  int count;
  Tensor *leaves[LOOKUP_MAX_LEAVES];
  Tensor *tables[LOOKUP_MAX_LEAVES]; /* L's table, or NULL: the leaf reads x itself */
  int nleaves;
} ByteFunction;

/* A leaf t (a DequantizeLinear's output) of f, of x or of a lookup of x. */
static bool add_leaf(ByteFunction *f, Tensor *t) {
  for (int k = 0; k < f->nleaves; k++)
    if (f->leaves[k] == t)
      return true;
  Tensor *bytes = t->producer->in[0], *x = bytes, *table = NULL;
  const Node *l = bytes->producer;
  if (l && !l->dead && l->op == OP_QUANTIZED_LOOKUP)
    x = l->in[0], table = l->in[1];
  if ((f->x && f->x != x) || f->nleaves == LOOKUP_MAX_LEAVES ||
      (f->nleaves && !tensor_same_shape(f->leaves[0], t)))
    return false;
  f->x = x;
  f->leaves[f->nleaves] = t;
  f->tables[f->nleaves++] = table;
  return true;
}

/* The float nodes that compute `t` from f's leaves: into f (once each),
   every one elementwise (T_BOUND_ELEMENTWISE) with one output, float32,
   its other inputs scalar constants. False where t is not such a
   function, or takes more than LOOKUP_MAX_NODES nodes. */
static bool collect_byte_function(Tensor *t, ByteFunction *f) {
  Node *n = t->producer;
  if (!n || n->dead || t->dtype != DT_FLOAT || t->bounded)
    return false;
  if (n->op == OP_DEQUANTIZE_LINEAR)
    return add_leaf(f, t);
  for (int k = 0; k < f->count; k++)
    if (f->nodes[k] == n)
      return true;
  if (!(op_info(n->op)->traits & T_BOUND_ELEMENTWISE) || n->nout != 1 || t->is_output ||
      f->count == LOOKUP_MAX_NODES)
    return false;
  f->nodes[f->count++] = n;
  for (int k = 0; k < n->nin; k++) {
    Tensor *in = n->in[k];
    if (in && !(tensor_is_const(in) && tensor_numel(in) == 1) && !collect_byte_function(in, f))
      return false;
  }
  return true;
}

/* Whether q's input is a function of one tensor's bytes alone: f's nodes
   read only its leaves, each other's outputs and scalar constants, all of
   one shape, and only they and q read their outputs; each leaf quantized
   per tensor with constant parameters. */
static bool byte_function(Node *q, ByteFunction *f) {
  Verdict v;
  f->x = NULL, f->count = f->nleaves = 0;
  if (!collect_byte_function(q->in[0], f))
    return false;
  for (int k = 0; k < f->nleaves; k++) {
    Dequant d;
    if (!dequantized(f->leaves[k], &d) || !check_activation_operand(&d, &v))
      return false;
  }
  for (int k = 0; k < f->count; k++) {
    const Tensor *y = f->nodes[k]->out[0];
    if (!tensor_same_shape(y, f->leaves[0]))
      return false;
    for (int i = 0; i < y->nusers; i++) {
      bool ours = y->users[i] == q;
      for (int j = 0; j < f->count; j++)
        ours |= y->users[i] == f->nodes[j];
      if (!ours)
        return false;
    }
  }
  for (int k = 1; k < f->count; k++) /* insertion sort by position in the graph */
    for (int j = k; j > 0 && f->nodes[j - 1]->id > f->nodes[j]->id; j--) {
      Node *swap = f->nodes[j];
      f->nodes[j] = f->nodes[j - 1];
      f->nodes[j - 1] = swap;
    }
  return true;
}

/* Tensors read in place of others by the copies evaluated_copy makes. */
typedef struct Substitutes {
  Tensor *from[LOOKUP_MAX_NODES + LOOKUP_MAX_LEAVES + 1], *to[LOOKUP_MAX_NODES + LOOKUP_MAX_LEAVES + 1];
  int count;
} Substitutes;

static void substitute(Substitutes *s, Tensor *from, Tensor *to) {
  s->from[s->count] = from, s->to[s->count++] = to;
}

/* A copy of `n` reading its inputs with the substitutes, evaluated by the
   evaluator's formulas (node_fold) and dropped: its output, a constant,
   or NULL where it cannot fold. */
static Tensor *evaluated_copy(Graph *g, const Node *n, const Substitutes *s, const char *what) {
  Node *c = graph_add_node(g, n->op, arena_printf(g->arena, "%s_%s", n->name, what), n->nin, 1);
  for (int k = 0; k < n->nin; k++) {
    c->in[k] = n->in[k];
    for (int j = 0; j < s->count; j++)
      if (n->in[k] && n->in[k] == s->from[j])
        c->in[k] = s->to[j];
  }
  c->attrs = n->attrs, c->nattrs = n->nattrs;
  c->win = n->win, c->p = n->p;
  c->act = n->act, c->act_alpha = n->act_alpha, c->act_beta = n->act_beta;
  set_node_output(c, 0, graph_add_tensor(g, c->name));
  bool folded = node_fold(g, c) && tensor_is_const(c->out[0]);
  c->dead = true;
  return folded ? c->out[0] : NULL;
}

/* The table of Q(f(x)): f's leaves, nodes and q evaluated on x's 256
   values (value k the one whose byte is k), or NULL. */
static Tensor *byte_table(Graph *g, Node *q, const ByteFunction *f) {
  Tensor *bytes = graph_add_tensor(g, arena_printf(g->arena, "%s_bytes", q->name));
  bytes->dtype = f->x->dtype;
  tensor_set_shape(bytes, 1, (int64_t[]){256});
  bytes->i64 = arena_alloc(g->arena, sizeof(int64_t) * 256);
  for (int b = 0; b < 256; b++)
    bytes->i64[b] = f->x->dtype == DT_INT8 ? (int8_t)b : b;
  Substitutes s = {.count = 0};
  for (int k = 0; k < f->nleaves; k++) {
    const Node *dq = f->leaves[k]->producer;
    Substitutes read = {.count = 0};
    substitute(&read, dq->in[0], f->tables[k] ? f->tables[k] : bytes);
    Tensor *values = evaluated_copy(g, dq, &read, "values");
    if (!values)
      return NULL;
    substitute(&s, f->leaves[k], values);
  }
  for (int k = 0; k < f->count; k++) {
    Tensor *y = evaluated_copy(g, f->nodes[k], &s, "values");
    if (!y)
      return NULL;
    substitute(&s, f->nodes[k]->out[0], y);
  }
  return evaluated_copy(g, q, &s, "table");
}

/* Q(f(DQ(x))) of a function of x's bytes alone (byte_function) becomes
   QuantizedLookup(x, table): the table is Q, f and the DQs evaluated at
   compile time, by the evaluator's formulas, on x's 256 values.
   EfficientNet's SiLU (a Sigmoid, then a Mul of it and x, between DQs
   and Qs) and a requantization, Q(DQ(x)) of another scale, become one
   pass over bytes. */
static bool try_fuse_lookup(Graph *g, Node *q, bool *ok) {
  ByteFunction f;
  if (q->op != OP_QUANTIZE_LINEAR || !is_quant_type(q->out[0]->dtype) ||
      !tensor_is_const(q->in[1]) || tensor_numel(q->in[1]) != 1 ||
      (node_input(q, 2) && !tensor_is_const(q->in[2])) || !byte_function(q, &f))
    return false;
  Tensor *table = byte_table(g, q, &f);
  if (!table)
    return false;
  Node *root = f.count ? f.nodes[f.count - 1] : q;
  Tensor **in = arena_alloc(g->arena, sizeof(Tensor *) * 3);
  in[0] = f.x, in[1] = table;
  root->op = OP_QUANTIZED_LOOKUP;
  root->in = in, root->nin = 2;
  root->attrs = NULL, root->nattrs = 0;
  root->act = OPC_ACT_NONE;
  if (root != q) {
    set_node_output(root, 0, q->out[0]);
    for (int k = 0; k < f.count - 1; k++) {
      node_absorb(g, root, f.nodes[k]);
      f.nodes[k]->dead = true;
    }
    node_absorb(g, root, q);
    q->dead = true;
  }
  *ok = node_infer(g, root);
  return true;
}

/* Fuses `n` when it is the float kind of a QDQ pattern; false with
   v->why when it is not. */
static bool try_fuse(Graph *g, Node *n, OpKind qop, Verdict *v, bool *ok) {
  Dequant x, w;
  Tail t;
  if (!dequantized(n->in[0], &x) || !dequantized(n->in[1], &w))
    return refuse(v, "an operand is not dequantized");
  if (n->act != OPC_ACT_NONE || node_input(n, 3))
    return refuse(v, "it already computes a fused activation or residual");
  if (!check_activation_operand(&x, v) || !check_weight_operand(&w, weight_channel_axis(n), v))
    return false;
  if (n->op == OP_CONV && x.q->rank > 4) /* what opc_conv_integer computes */
    return refuse(v, "the integer convolution is 1-D and 2-D only");
  if (n->op == OP_GEMM && !check_gemm(n, v))
    return false;
  if (node_input(n, 2) && !check_bias(n, &x, &w, v))
    return false;
  if (!find_tail(n, &t, v))
    return false;
  *ok = n->op == OP_GEMM ? rewrite_gemm(g, n, &x, &w, &t) : rewrite(g, n, qop, &x, &w, &t);
  return true;
}

/* Whether `n` computes in float on a dequantized input: part of a QDQ
   pattern, fused or reported. */
static bool reads_dequantized(const Node *n) {
  Dequant d;
  if (n->nout < 1 || !n->out[0] || n->out[0]->dtype != DT_FLOAT)
    return false;
  for (int i = 0; i < n->nin; i++)
    if (dequantized(n->in[i], &d) && !tensor_is_const(d.q))
      return true;
  return false;
}

/* One --report line; the list doubles as it fills (arena memory is kept
   until the compile ends, so it must not grow by one). */
static void note_float(Graph *g, PassContext *ctx, const Node *n, const char *why) {
  int count = ctx->nqdq_notes;
  if (count == 0 || (count & (count - 1)) == 0) { /* full at 0, 1, 2, 4, ... */
    const char **notes = arena_alloc(g->arena, sizeof(char *) * (size_t)(2 * count + 1));
    if (count)
      memcpy(notes, ctx->qdq_notes, sizeof(char *) * (size_t)count);
    ctx->qdq_notes = notes;
  }
  ctx->qdq_notes[ctx->nqdq_notes++] =
      arena_printf(g->arena, "node '%s' (%s) stays float between Q/DQ: %s", n->name,
                   op_name(n->op), why);
}

bool pass_fuse_qdq(Graph *g, const PassOptions *opt, PassContext *ctx) {
  begin_rewrite(g);
  int fused = 0;
  for (int i = 0; i < g->nnodes; i++) { /* first the functions of a byte: f is all float */
    Node *n = g->nodes[i];
    bool ok = true;
    if (!n->dead && try_fuse_lookup(g, n, &ok)) {
      if (!ok)
        return false;
      fused++;
    }
  }
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || !reads_dequantized(n))
      continue;
    OpKind qop = op_integer_form(n->op);
    Verdict v = {"opc's table has no integer form of the operator"};
    bool ok = true;
    bool elementwise = qop == OP_QUANTIZED_ADD;
    bool moves = op_info(n->op)->traits & (T_MOVES_VALUES | T_SELECTS_VALUES);
    if (moves ? try_fuse_moves(g, n, &v, &ok)
              : qop != OP_INVALID &&
                    (elementwise ? try_fuse_add(g, n, &v, &ok) : try_fuse(g, n, qop, &v, &ok))) {
      if (!ok)
        return false;
      fused++;
      continue;
    }
    note_float(g, ctx, n, v.why);
  }
  return !fused || finish_rewrite(g);
}
