/*
 * fuse_residual.c - the residual pattern act(conv(x) + z) becomes one Conv
 * with z as its fourth input (cuDNN's fused conv-bias-activation computes
 * act(conv + bias + z)). z must be a runtime tensor of the conv output's
 * exact shape; the activation, when present, is any that fuse-activation
 * accepts. Runs after fuse-activation, which left the Conv unfused because
 * its output went to the Add. A bias of z's own Conv moves into the
 * fused Conv's (take_projection_bias).
 */
#include "pass.h"
#include "rewrite.h"

/* Fuses the activation reading `y` into `conv`, if there is one. */
static void take_activation(Graph *g, Node *conv, Tensor *y) {
  Node *a = sole_consumer(y);
  Activation act;
  float alpha, beta;
  if (!a || a->dead || a->nout < 1 || a->in[0] != y || !activation_of(a, &act, &alpha, &beta))
    return;
  conv->act = act;
  conv->act_alpha = alpha;
  conv->act_beta = beta;
  swallow_consumer(g, conv, a);
}

/* When z is written by a Conv with a bias and nothing after it (ResNet's
   projection shortcut) and `add` was its only reader, the bias moves into
   conv's own, which adds z anyway: the projection becomes a bare
   convolution, one cuDNN call where it took a second to add its bias. */
static void take_projection_bias(Graph *g, Node *conv, const Node *add, Tensor *z) {
  Node *p = z->producer;
  Tensor *pb = p ? node_input(p, 2) : NULL, *b = node_input(conv, 2);
  int64_t channels = z->dims[1];
  if (!pb || p->dead || p->op != OP_CONV || p->nin != 3 || p->act != OPC_ACT_NONE ||
      sole_consumer(z) != add || !pb->f32 || tensor_numel(pb) != channels ||
      (b && (!b->f32 || tensor_numel(b) != channels)))
    return;
  Tensor *nb = new_const_vector(
      g, arena_printf(g->arena, "%s_bias", b ? b->name : conv->name), channels, 0);
  for (int64_t c = 0; c < channels; c++)
    nb->f32[c] = (b ? b->f32[c] : 0) + pb->f32[c];
  set_node_input(g, conv, 2, nb);
  p->nin = 2;
}

/* Makes runtime tensor `z` of y's shape the residual input of `conv`. */
static bool fold_residual(Graph *g, Node *conv, Tensor *y, Node *add, Tensor *z) {
  if (conv->is_view || tensor_is_const(z) || !tensor_same_shape(y, z) || z->dtype != y->dtype)
    return false;
  set_node_input(g, conv, 3, z);
  take_projection_bias(g, conv, add, z);
  swallow_consumer(g, conv, add);
  take_activation(g, conv, add->out[0]);
  return true;
}

bool pass_fuse_residual(Graph *g, const PassOptions *opt, PassContext *ctx) {
  return fold_adds_into_convs(g, fold_residual);
}
