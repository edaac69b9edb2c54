/*
 * fuse_gelu.c - GELU as exporters before opset 20 write it, five nodes,
 * becomes one Gelu node (one pass over memory instead of five, and four
 * buffers fewer):
 *
 *   torch's nn.GELU:       Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)
 *   Hugging Face's BERT:   Mul(Mul(x, 0.5), Add(Erf(Div(x, sqrt 2)), 1))
 *
 * Div by sqrt 2 may also be Mul by 1/sqrt 2, and every Add and Mul may
 * take its operands in either order. Each intermediate value must feed
 * only the next node of the pattern and not be a graph output. The Erf
 * node becomes the Gelu (exact, not the tanh approximation); the others
 * are absorbed into it.
 */
#include <math.h>

#include "pass.h"
#include "rewrite.h"

/* Whether t is a float32 constant holding the one value `want`. */
static bool is_scalar(const Tensor *t, double want) {
  float v;
  return scalar_constant(t, &v) && fabs(v - want) <= 1e-6 * fabs(want);
}

/* For a binary node n with one operand the constant `want`, the other. */
static Tensor *other_than_scalar(const Node *n, OpKind op, double want) {
  if (!n || n->dead || n->op != op || n->nin != 2 || n->nout != 1)
    return NULL;
  if (is_scalar(n->in[1], want))
    return n->in[0];
  if (op != OP_DIV && is_scalar(n->in[0], want))
    return n->in[1];
  return NULL;
}

/* For a binary node n with one operand `t`, the other. */
static Tensor *other_than(const Node *n, OpKind op, const Tensor *t) {
  if (!n || n->dead || n->op != op || n->nin != 2 || n->nout != 1)
    return NULL;
  if (n->in[0] == t)
    return n->in[1];
  return n->in[1] == t ? n->in[0] : NULL;
}

/* x for d = x / sqrt 2 or d = x * (1 / sqrt 2), when d feeds only `erf`. */
static Tensor *scaled_input(const Tensor *d, const Node *erf, Node **scale) {
  if (sole_consumer(d) != erf)
    return NULL;
  *scale = d->producer;
  Tensor *x = other_than_scalar(*scale, OP_DIV, M_SQRT2);
  return x ? x : other_than_scalar(*scale, OP_MUL, M_SQRT1_2);
}

/* Matches the pattern around the Erf node `erf`: fills nodes[0..4) with
 * the nodes to absorb and returns y, or NULL. */
static Tensor *match_gelu(Node *erf, Tensor **x_out, Node **nodes) {
  if (erf->op != OP_ERF || erf->nout != 1 || erf->out[0]->dtype != DT_FLOAT)
    return NULL;
  Tensor *x = scaled_input(erf->in[0], erf, &nodes[0]);
  Node *add = sole_consumer(erf->out[0]);
  if (!x || !other_than_scalar(add, OP_ADD, 1.0))
    return NULL;
  nodes[1] = add;
  Node *outer = sole_consumer(add->out[0]);
  Tensor *h = other_than(outer, OP_MUL, add->out[0]);
  if (!h)
    return NULL;
  *x_out = x;
  if (h == x) { /* torch: (x * (1 + erf)) * 0.5 */
    nodes[2] = outer;
    nodes[3] = sole_consumer(outer->out[0]);
    return other_than_scalar(nodes[3], OP_MUL, 0.5) ? nodes[3]->out[0] : NULL;
  }
  /* Hugging Face: (x * 0.5) * (1 + erf) */
  nodes[2] = h->producer;
  nodes[3] = outer;
  bool half = other_than_scalar(nodes[2], OP_MUL, 0.5) == x && sole_consumer(h) == outer;
  return half ? outer->out[0] : NULL;
}

bool pass_fuse_gelu(Graph *g, const PassOptions *opt, PassContext *ctx) {
  (void)opt;
  (void)ctx;
  begin_rewrite(g);
  int fused = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *erf = g->nodes[i], *absorbed[4];
    Tensor *x = NULL;
    Tensor *y = erf->dead ? NULL : match_gelu(erf, &x, absorbed);
    if (!y || x->dtype != DT_FLOAT || !tensor_same_shape(x, y))
      continue;
    erf->op = OP_GELU;
    erf->p.act.tanh = false;
    set_node_input(g, erf, 0, x);
    set_node_output(erf, 0, y);
    for (int k = 0; k < 4; k++) {
      node_absorb(g, erf, absorbed[k]);
      absorbed[k]->dead = true;
    }
    fused++;
  }
  if (!fused)
    return true;
  return finish_rewrite(g);
}
