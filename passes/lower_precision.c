/*
 * lower_precision.c - `--precision fp16|bf16`: the tensors that cuDNN's
 * and cuBLAS's 16-bit forms compute on are stored in float16 or bfloat16,
 * and so are their weights; everything else still computes in float32.
 *
 * A node runs in 16 bits when the libraries take it that way (half_kind):
 * convolutions, Gemm, MatMul and pooling, which read and write 16-bit
 * tensors and accumulate in float32. Nodes that only move data (Concat,
 * Reshape, Transpose, Slice, ...) and the activations and arithmetic opc's
 * kernels have 16-bit instances of (which compute in float32 between a
 * 16-bit load and store), and, in float16, the means, maxima and minima
 * cuDNN reduces with float32 compute (global pools, ReduceMean, ReduceMax,
 * ReduceMin: their results lie within their inputs' range) follow their
 * inputs: 16-bit in, 16-bit out. cuDNN reduces no bfloat16 data, so in
 * bfloat16 those read a float32 copy. All others are the ones unsafe in
 * 16 bits (Softmax, sums and the other reductions, normalisations, exp and log,
 * whose sums, squares and exponentials overflow float16's range of 65504
 * or lose its 11 bits of precision) or without 16-bit code: they read a
 * float32 copy made by a Cast, and what they write is cast back where a
 * 16-bit node reads it. Graph inputs and
 * outputs keep float32, converted at the edges, so the API does not change;
 * with --io-precision fp16 they are float16 themselves, and casts to float32
 * come only where a float32 node reads one.
 *
 * Constants read by 16-bit nodes get 16-bit copies (their values rounded
 * to nearest even, as the weights file stores them); a constant also read
 * in float32 keeps its float32 original for those readers.
 */
#include <stdlib.h>
#include <string.h>

#include "pass.h"

/* What the pass made so far, by the id of the original tensor. */
typedef struct Versions {
  Tensor **half;  /* its 16-bit copy (a cast or a rounded constant), or NULL */
  Tensor **single; /* the float32 cast of a tensor made 16-bit, or NULL */
  bool *lowered;   /* made 16-bit by this pass (a model's own float16 is left alone) */
  int count;
} Versions;

/* Whether t holds a value this pass stores in 16 bits: one it retyped, or
   a cast or rounded constant it made (those come after the originals). */
static bool is_lowered(const Versions *v, const Tensor *t, DType half) {
  return t->id < v->count ? v->lowered[t->id] : t->dtype == half;
}

/* Whether the libraries run this node on 16-bit data (ops.def's half
   column). */
static bool half_kind(const Node *n) {
  const OpInfo *info = op_info(n->op);
  return info->half && info->half(n);
}

/* Kinds that run in 16 bits when their input does (ops.def's traits):
   those that move elements without computing on them, the elementwise
   ones opc's kernels compute in float32 between 16-bit loads and stores,
   and cuDNN's means, maxima and minima of float16 only. */
static bool follows_input(OpKind op, DType half) {
  unsigned traits = op_info(op)->traits;
  return (traits & T_FOLLOWS_HALF) || ((traits & T_FOLLOWS_F16) && half == DT_FLOAT16);
}

/* Input k is a value the node computes on in its data's type (not a
   shape, axes or indices, nor a parameter kept in float32): a float32 one,
   or one this pass made 16-bit. */
static bool data_input(const Versions *v, const Node *n, int k, DType half) {
  const Tensor *t = n->in[k];
  return t && !op_input_is_param(n->op, k) && !op_input_stays_float(n->op, k) &&
         (t->dtype == DT_FLOAT || is_lowered(v, t, half));
}

static bool reads_half(const Versions *v, const Node *n, DType half) {
  for (int k = 0; k < n->nin; k++)
    if (data_input(v, n, k, half) && is_lowered(v, n->in[k], half))
      return true;
  return false;
}

/* Whether every floating tensor the node touches is float32 or lowered:
   a float64 or float16 one of the model's own keeps the node as it is. */
static bool only_single_floats(const Versions *v, const Node *n, DType half) {
  for (int k = 0; k < n->nin; k++) {
    const Tensor *t = n->in[k];
    if (t && dtype_is_float(t->dtype) && t->dtype != DT_FLOAT && !is_lowered(v, t, half))
      return false;
  }
  for (int k = 0; k < n->nout; k++)
    if (n->out[k] && dtype_is_float(n->out[k]->dtype) && n->out[k]->dtype != DT_FLOAT)
      return false;
  return true;
}

static const char *suffixed(Graph *g, const char *name, DType t) {
  return arena_printf(g->arena, "%s_%s", name, dtype_name(t));
}

/* A Cast of x to type `to`, named after x. */
static Tensor *cast_node(Graph *g, Tensor *x, DType to) {
  const char *name = suffixed(g, x->name, to);
  Tensor *y = graph_add_tensor(g, name);
  y->dtype = to;
  tensor_set_shape(y, x->rank, x->dims);
  Node *n = graph_add_node(g, OP_CAST, name, 1, 1);
  node_set_attr(g, n, "to", ATTR_INT)->i = to;
  n->in[0] = x;
  n->out[0] = y;
  y->producer = n;
  return y;
}

/* A 16-bit copy of a float32 constant, its values rounded. */
static Tensor *rounded_constant(Graph *g, const Tensor *x, DType half) {
  Tensor *y = graph_add_tensor(g, suffixed(g, x->name, half));
  y->dtype = half;
  tensor_set_shape(y, x->rank, x->dims);
  int64_t count = tensor_numel(x);
  y->f32 = arena_alloc(g->arena, sizeof(float) * (size_t)(count > 0 ? count : 1));
  for (int64_t i = 0; i < count; i++)
    y->f32[i] = dtype_round(half, x->f32[i]);
  return y;
}

static Tensor *half_version(Graph *g, Versions *v, Tensor *x, DType half) {
  if (x->id < v->count && v->half[x->id])
    return v->half[x->id];
  Tensor *h = tensor_is_const(x) ? rounded_constant(g, x, half) : cast_node(g, x, half);
  if (x->id < v->count)
    v->half[x->id] = h;
  return h;
}

static Tensor *single_version(Graph *g, Versions *v, Tensor *x) {
  if (x->id < v->count && v->single[x->id])
    return v->single[x->id];
  Tensor *s = cast_node(g, x, DT_FLOAT);
  if (x->id < v->count)
    v->single[x->id] = s;
  return s;
}

/* Rewires one node: a 16-bit node reads 16-bit copies and its float32
   outputs become 16-bit; any other node reads float32 casts of the
   16-bit values it meets. */
static void lower_node(Graph *g, Versions *v, Node *n, DType half) {
  bool in_half = only_single_floats(v, n, half) &&
                 (half_kind(n) || (follows_input(n->op, half) && reads_half(v, n, half)));
  for (int k = 0; k < n->nin; k++) {
    if (!data_input(v, n, k, half))
      continue;
    Tensor *x = n->in[k];
    if (in_half && x->dtype == DT_FLOAT)
      n->in[k] = half_version(g, v, x, half);
    else if (!in_half && is_lowered(v, x, half))
      n->in[k] = single_version(g, v, x);
  }
  if (!in_half)
    return;
  for (int k = 0; k < n->nout; k++) {
    Tensor *y = n->out[k];
    if (y && y->dtype == DT_FLOAT && !tensor_is_const(y) && y->id < v->count) {
      y->dtype = half;
      v->lowered[y->id] = true;
    }
  }
}

/* --io-precision fp16: a float32 graph input is float16 from the start. */
static void lower_input(Versions *v, Tensor *t) {
  if (t->dtype == DT_FLOAT && t->id < v->count) {
    t->dtype = DT_FLOAT16;
    v->lowered[t->id] = true;
  }
}

/* A float32 graph output: float16 too with --io-precision fp16 (a cast of
   it when a float32 node wrote it), else back to float32 under its own
   name if it was made 16-bit. */
static void restore_output(Graph *g, Versions *v, int i, DType half, bool io_half) {
  Tensor *t = g->outputs[i];
  if (tensor_is_const(t))
    return;
  if (io_half && t->dtype == DT_FLOAT) {
    const char *name = t->name;
    Tensor *k = half_version(g, v, t, half);
    t->name = arena_printf(g->arena, "%s_f32", name);
    t->is_output = false;
    k->name = name;
    k->producer->name = arena_printf(g->arena, "%s_to_f16", name);
    k->is_output = true;
    g->outputs[i] = k;
    return;
  }
  if (io_half || !is_lowered(v, t, half))
    return;
  const char *name = t->name;
  Tensor *k = single_version(g, v, t);
  t->name = suffixed(g, name, half);
  t->is_output = false;
  k->name = name;
  k->producer->name = arena_printf(g->arena, "%s_to_f32", name);
  k->is_output = true;
  g->outputs[i] = k;
}

bool pass_lower_precision(Graph *g, const PassOptions *opt, PassContext *ctx) {
  (void)ctx;
  DType half = opt->half;
  if (half != DT_FLOAT16 && half != DT_BFLOAT16)
    return true;
  Versions v = {.count = g->ntensors};
  for (int i = 0; i < g->ntensors; i++)
    g->tensors[i]->id = i;
  v.half = calloc((size_t)v.count + 1, sizeof(Tensor *));
  v.single = calloc((size_t)v.count + 1, sizeof(Tensor *));
  v.lowered = calloc((size_t)v.count + 1, sizeof(bool));
  int nnodes = g->nnodes;
  for (int i = 0; opt->io_half && i < g->ninputs; i++)
    lower_input(&v, g->inputs[i]);
  for (int i = 0; i < nnodes; i++)
    if (!g->nodes[i]->dead)
      lower_node(g, &v, g->nodes[i], half);
  for (int i = 0; i < g->noutputs; i++)
    restore_output(g, &v, i, half, opt->io_half);
  free(v.half);
  free(v.single);
  free(v.lowered);
  for (int i = nnodes; i < g->nnodes; i++)
    if (!node_infer(g, g->nodes[i]))
      return false;
  graph_compact(g); /* float32 constants only 16-bit nodes read */
  return graph_toposort(g); /* the casts go before their readers */
}
