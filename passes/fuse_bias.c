/*
 * fuse_bias.c - Conv followed by Add of a constant that is the same for
 * every position of a channel: the constant goes into the Conv's bias.
 *
 * Broadcasting aligns shapes on the right, so a per-channel constant for
 * an N-D output [N, C, d1..dk] has the shape [C, 1..1] (k ones) or
 * [1, C, 1..1]; a plain [C] would run along the last axis instead and is
 * not a bias (unless C is 1: a scalar).
 *
 * A product that takes a fused bias (T_FUSED_BIAS: MatMul) followed by an
 * Add of a constant with one value per column of its output, [N] or
 * [1, .., 1, N] (a linear layer as BERT and GPT-2 export it), takes the
 * constant as that input: cuBLASLt adds it in the GEMM's epilogue.
 */
#include "pass.h"
#include "rewrite.h"

/* The per-channel value of constant `t` added to output `y`, via
   value[c * step]; false if t is not constant per channel. */
static bool per_channel(const Tensor *t, const Tensor *y, int64_t *step) {
  if (!t->f32 || t->rank > y->rank || y->rank < 2)
    return false;
  int64_t channels = y->dims[1];
  int lead = y->rank - t->rank; /* t's axis i is y's axis i + lead */
  *step = 0;
  for (int i = 0; i < t->rank; i++) {
    int axis = i + lead;
    if (t->dims[i] == 1)
      continue;
    if (axis != 1 || t->dims[i] != channels)
      return false;
    *step = 1; /* every other dim is 1, so channel c sits at element c */
  }
  return true;
}

/* Adds constant `k`, when it is per channel, to the bias of `conv`. */
static bool fold_bias(Graph *g, Node *conv, Tensor *y, Node *add, Tensor *k) {
  int64_t step;
  Tensor *b = node_input(conv, 2);
  int64_t channels = y->dims[1];
  if (!per_channel(k, y, &step) || (b && (!b->f32 || tensor_numel(b) != channels)))
    return false;
  Tensor *nb = new_const_vector(
      g, arena_printf(g->arena, "%s_bias", b ? b->name : conv->name), channels, 0);
  for (int64_t c = 0; c < channels; c++)
    nb->f32[c] = (b ? b->f32[c] : 0) + k->f32[c * step];
  set_node_input(g, conv, 2, nb);
  swallow_consumer(g, conv, add);
  return true;
}

/* Whether constant t, added to y, holds one value per column of y. */
static bool per_column(const Tensor *t, const Tensor *y) {
  if (!t->f32 || t->dtype != DT_FLOAT || t->rank < 1 || t->rank > y->rank)
    return false;
  for (int i = 0; i + 1 < t->rank; i++)
    if (t->dims[i] != 1)
      return false;
  return t->dims[t->rank - 1] == y->dims[y->rank - 1];
}

/* The product writing y that can take `add`'s other operand as its fused
   bias: it has none yet, and add is y's only reader. */
static Node *product_feeding(const Tensor *y, const Node *add) {
  Node *p = y->producer;
  if (!p || p->dead || p->is_view || y->producer_slot != 0 || sole_consumer(y) != add)
    return NULL;
  const OpInfo *info = op_info(p->op);
  if (!(info->traits & T_FUSED_BIAS) || p->nin != info->max_inputs || y->dtype != DT_FLOAT)
    return NULL;
  return tensor_same_shape(y, add->out[0]) ? p : NULL;
}

static bool fold_product_bias(Graph *g, Node *add) {
  for (int side = 0; side < 2; side++) {
    Tensor *y = add->in[side], *k = add->in[1 - side];
    Node *p = product_feeding(y, add);
    if (!p || y == k || !per_column(k, y))
      continue;
    Tensor *bias = k;
    if (k->rank != 1) {
      int64_t cols = k->dims[k->rank - 1];
      bias = new_const_vector(g, arena_printf(g->arena, "%s_bias", p->name), cols, 0);
      for (int64_t c = 0; c < cols; c++)
        bias->f32[c] = k->f32[c];
    }
    set_node_input(g, p, op_info(p->op)->max_inputs, bias);
    swallow_consumer(g, p, add);
    return true;
  }
  return false;
}

static bool fold_adds_into_products(Graph *g) {
  begin_rewrite(g);
  int folded = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *add = g->nodes[i];
    if (!add->dead && add->op == OP_ADD && add->nin == 2 && add->in[0] && add->in[1])
      folded += fold_product_bias(g, add);
  }
  return !folded || finish_rewrite(g);
}

bool pass_fuse_bias(Graph *g, const PassOptions *opt, PassContext *ctx) {
  return fold_adds_into_convs(g, fold_bias) && fold_adds_into_products(g);
}
