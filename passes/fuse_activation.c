/*
 * fuse_activation.c - an activation (Relu, Clip with constant bounds,
 * Sigmoid, Tanh, LeakyRelu, HardSigmoid, HardSwish) applied to the output
 * of a Conv or Gemm runs inside that node (node->act), saving a pass over
 * memory. Only when the producer's output feeds nothing else and is not a
 * graph output.
 *
 * SiLU, x * sigmoid(x), reaches opc as exporters write it: a Sigmoid of x
 * and a Mul of x by that. When x comes from a Conv or Gemm and feeds only
 * those two, both become the producer's activation (ACT_SILU): one pass
 * over memory instead of two, and no buffer for the sigmoid.
 */
#include "pass.h"
#include "rewrite.h"

/* The Mul that completes x * sigmoid(x) for the Sigmoid node `s`, or NULL. */
static Node *silu_mul(const Node *s) {
  Tensor *x = node_input(s, 0), *sx = s->nout == 1 ? s->out[0] : NULL;
  if (s->op != OP_SIGMOID || !x || !sx || x->dtype != DT_FLOAT || x->is_output || x->nusers != 2)
    return NULL;
  Node *m = sole_consumer(sx);
  if (!m || m->op != OP_MUL || m->nin != 2 || m->nout != 1)
    return NULL;
  bool operands = (m->in[0] == x && m->in[1] == sx) || (m->in[0] == sx && m->in[1] == x);
  bool readers = (x->users[0] == s && x->users[1] == m) || (x->users[0] == m && x->users[1] == s);
  return operands && readers ? m : NULL;
}

/* The Conv or Gemm whose output x may take a fused activation, or NULL. */
static Node *fusable_producer(const Tensor *x) {
  Node *p = x->producer;
  if (!p || p->dead || (p->op != OP_CONV && p->op != OP_GEMM) || p->is_view)
    return NULL;
  return p->act == ACT_NONE && x->producer_slot == 0 ? p : NULL;
}

static bool fuse_silu(Graph *g, Node *s) {
  Node *m = silu_mul(s);
  Node *p = m ? fusable_producer(node_input(s, 0)) : NULL;
  if (!p)
    return false;
  p->act = ACT_SILU;
  node_absorb(g, p, s);
  s->dead = true;
  swallow_consumer(g, p, m);
  return true;
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
    if (fuse_silu(g, a)) {
      fused++;
      continue;
    }
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
