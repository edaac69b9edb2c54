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

bool pass_fuse_residual(Graph *g, const PassOptions *opt, PassContext *ctx) {
  begin_rewrite(g);
  int fused = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *add = g->nodes[i];
    if (!is_binary_add(add))
      continue;
    for (int side = 0; side < 2; side++) {
      Tensor *y = add->in[side], *z = add->in[1 - side];
      Node *conv = plain_conv_feeding(y, add);
      if (!conv || conv->is_view)
        continue;
      if (y == z || tensor_is_const(z) || !tensor_same_shape(y, z) ||
          !tensor_same_shape(y, add->out[0]) || z->dtype != y->dtype)
        continue;
      set_node_input(g, conv, 3, z);
      swallow_consumer(g, conv, add);
      take_activation(g, conv, add->out[0]);
      fused++;
      break;
    }
  }
  if (!fused)
    return true;
  return finish_rewrite(g);
}
