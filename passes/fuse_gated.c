/*
 * fuse_gated.c - activations that multiply x by a gate computed from x,
 * as exporters write them in two or three nodes, become one node (one pass
 * over memory instead of two or three, and no buffer for the gate):
 *
 *   Mul(x, Sigmoid(x))                  Swish (SiLU), alpha 1
 *   Mul(x, Sigmoid(Mul(x, alpha)))      Swish with that alpha
 *   Mul(x, HardSigmoid(x)), 1/6 and 1/2 HardSwish
 *   Mul(x, Tanh(Softplus(x)))           Mish
 *
 * Mul and the inner Mul may take their operands in either order. The gate
 * and every value inside it must feed only the next node of the pattern
 * and not be a graph output; x may feed anything else too. The gate's last
 * node becomes the fused node and absorbs the others. On float32 only.
 * fuse-activation, which runs next, then runs a Swish of alpha 1 or a
 * HardSwish inside the Conv or Gemm that produces x.
 */
#include <math.h>
#include <string.h>

#include "pass.h"
#include "rewrite.h"

/* The live single-output node of kind op writing t, when t feeds only `user`. */
static Node *gate_node(const Tensor *t, OpKind op, const Node *user) {
  Node *p = t ? t->producer : NULL;
  if (!p || p->dead || p->op != op || p->nout != 1 || sole_consumer(t) != user)
    return NULL;
  return p;
}

static bool close_to(float v, double want) {
  return fabs(v - want) <= 1e-6 * fabs(want);
}

/* Swish's alpha when the Sigmoid s reads x or x * alpha; absorbs the
 * scaling Mul into *scale. */
static bool swish_alpha(Node *s, const Tensor *x, float *alpha, Node **scale) {
  *scale = NULL;
  if (s->in[0] == x) {
    *alpha = 1.0f;
    return true;
  }
  Node *m = gate_node(s->in[0], OP_MUL, s);
  if (!m || m->nin != 2)
    return false;
  for (int k = 0; k < 2; k++)
    if (m->in[k] == x && scalar_constant(m->in[1 - k], alpha)) {
      *scale = m;
      return true;
    }
  return false;
}

/*
 * Matches gate(x) for the gate value `g` that `mul` multiplies x by: gives
 * the node to become the fused one (*fused, with its new kind in *op and
 * Swish's alpha) and the one other node to absorb, or NULL.
 */
static bool match_gate(Node *mul, const Tensor *g, const Tensor *x, Node **fused, OpKind *op,
                       float *alpha, Node **other) {
  *other = NULL;
  Node *n;
  if ((n = gate_node(g, OP_SIGMOID, mul)) && swish_alpha(n, x, alpha, other)) {
    *op = OP_SWISH;
  } else if ((n = gate_node(g, OP_HARD_SIGMOID, mul)) && n->in[0] == x &&
             close_to(n->p.act.alpha, 1.0 / 6) && close_to(n->p.act.beta, 0.5)) {
    *op = OP_HARD_SWISH;
  } else if ((n = gate_node(g, OP_TANH, mul)) &&
             (*other = gate_node(n->in[0], OP_SOFTPLUS, n)) && (*other)->in[0] == x) {
    *op = OP_MISH;
  } else {
    return false;
  }
  *fused = n;
  return true;
}

/* Rewrites mul = Mul(x, gate(x)) into one node; false when it is not one. */
static bool fuse_gated(Graph *g, Node *mul) {
  if (mul->dead || mul->op != OP_MUL || mul->nin != 2 || mul->nout != 1)
    return false;
  for (int k = 0; k < 2; k++) {
    Tensor *x = mul->in[1 - k], *y = mul->out[0];
    Node *fused, *other;
    OpKind op;
    float alpha = 1.0f;
    if (!x || x->dtype != DT_FLOAT || !tensor_same_shape(x, y) ||
        !match_gate(mul, mul->in[k], x, &fused, &op, &alpha, &other))
      continue;
    /* Attributes are what the IR prints and what inference reads again:
     * the gate's own (HardSigmoid's) go, Swish's alpha comes. */
    fused->op = op;
    fused->nattrs = 0;
    memset(&fused->p.act, 0, sizeof fused->p.act);
    fused->p.act.alpha = alpha;
    if (op == OP_SWISH && alpha != 1.0f)
      node_set_attr(g, fused, "alpha", ATTR_FLOAT)->f = alpha;
    set_node_input(g, fused, 0, x);
    set_node_output(fused, 0, y);
    node_absorb(g, fused, mul);
    mul->dead = true;
    if (other) {
      node_absorb(g, fused, other);
      other->dead = true;
    }
    return true;
  }
  return false;
}

bool pass_fuse_gated(Graph *g, const PassOptions *opt, PassContext *ctx) {
  (void)opt;
  (void)ctx;
  begin_rewrite(g);
  int fused = 0;
  for (int i = 0; i < g->nnodes; i++)
    fused += fuse_gated(g, g->nodes[i]);
  if (!fused)
    return true;
  return finish_rewrite(g);
}
