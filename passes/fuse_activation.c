/*
 * fuse_activation.c - an activation (a kind whose ops.def row names an act:
 * Relu, Clip with constant bounds, Swish of alpha 1, which is SiLU, ...)
 * applied to the output of a kind that takes one (T_FUSES_ACT: Conv, Gemm,
 * BatchNormalization) runs inside that node (node->act), saving a pass
 * over memory. Only when
 * the producer's output feeds nothing else and is not a graph output.
 * Gated activations as exporters write them, x times a gate of x, are
 * single nodes by now (fuse-gated).
 */
#include "pass.h"
#include "rewrite.h"

/* The producer (a Conv, Gemm or BatchNormalization) whose output x may take a fused
   activation, or NULL. */
static Node *fusable_producer(const Tensor *x) {
  Node *p = x->producer;
  if (!p || p->dead || !(op_info(p->op)->traits & T_FUSES_ACT) || p->is_view)
    return NULL;
  return p->act == OPC_ACT_NONE && x->producer_slot == 0 ? p : NULL;
}

bool pass_fuse_activation(Graph *g, const PassOptions *opt, PassContext *ctx) {
  begin_rewrite(g);
  int fused = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *a = g->nodes[i];
    Tensor *x = node_input(a, 0);
    Activation act;
    float alpha, beta;
    if (a->dead || !x || a->nout < 1)
      continue;
    if (!activation_of(a, &act, &alpha, &beta))
      continue;
    Node *p = fusable_producer(x);
    if (!p || sole_consumer(x) != a)
      continue;
    p->act = act;
    p->act_alpha = alpha;
    p->act_beta = beta;
    swallow_consumer(g, p, a);
    fused++;
  }
  if (!fused)
    return true;
  return finish_rewrite(g);
}
