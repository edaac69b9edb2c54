/*
 * fuse_residual.c - the residual pattern act(conv(x) + z) becomes one Conv
 * with z as its fourth input (cuDNN's fused conv-bias-activation computes
 * act(conv + bias + z)). z must be a runtime tensor of the conv output's
 * exact shape; the activation, when present, is any that fuse-activation
 * accepts. Runs after fuse-activation, which left the Conv unfused because
 * its output went to the Add.
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

/* Makes runtime tensor `z` of y's shape the residual input of `conv`. */
static bool fold_residual(Graph *g, Node *conv, Tensor *y, Node *add, Tensor *z) {
  if (conv->is_view || tensor_is_const(z) || !tensor_same_shape(y, z) || z->dtype != y->dtype)
    return false;
  set_node_input(g, conv, 3, z);
  swallow_consumer(g, conv, add);
  take_activation(g, conv, add->out[0]);
  return true;
}

bool pass_fuse_residual(Graph *g, const PassOptions *opt, PassContext *ctx) {
  return fold_adds_into_convs(g, fold_residual);
}
