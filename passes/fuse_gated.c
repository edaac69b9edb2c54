/*
 * fuse_gated.c - activations that multiply x by a gate computed from x,
 * as exporters write them in two or three nodes, become one node (one pass
 * over memory instead of two or three, and no buffer for the gate):
 *
 *   Mul(x, Sigmoid(x))                  Swish (SiLU), alpha 1
 *   Mul(x, Sigmoid(Mul(x, alpha)))      Swish with that alpha
 *   Mul(x, HardSigmoid(x)), 1/6 and 1/2 HardSwish
 *   Mul(x, Tanh(Softplus(x)))           Mish
 *   Mul(x, Clip(Add(x, 3), 0, 6)) / 6   HardSwish, as TensorFlow's and
 *   Mul(x, Clip(Add(x, 3), 0, 6) / 6)   Paddle's exporters write it
 *
 * Mul and the inner Mul may take their operands in either order; dividing
 * by 6 may be a Div by 6 or a Mul by 1/6. The gate and every value inside
 * it must feed only the next node of the pattern and not be a graph
 * output; x may feed anything else too. The gate's last node becomes the
 * fused node and absorbs the others; a HardSwish divided after the
 * product becomes that division. x clip(x + 3, 0, 6) / 6 is HardSwish's
 * x max(0, min(1, x / 6 + 1/2)) but for rounding. On float32 only.
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

/* The operand that n divides by 6 (a Div by 6, or a Mul by 1/6), or NULL. */
static Tensor *sixth_of(const Node *n) {
  float v;
  if (!n || n->dead || n->nin != 2 || n->nout != 1)
    return NULL;
  if (n->op == OP_DIV && scalar_constant(n->in[1], &v) && v == 6.0f)
    return n->in[0];
  for (int k = 0; k < 2 && n->op == OP_MUL; k++)
    if (scalar_constant(n->in[k], &v) && close_to(v, 1.0 / 6))
      return n->in[1 - k];
  return NULL;
}

/* The node writing t, read only by `user`, when it divides by 6. */
static Node *sixth_node(const Tensor *t, const Node *user) {
  Node *n = gate_node(t, OP_DIV, user);
  n = n ? n : gate_node(t, OP_MUL, user);
  return n && sixth_of(n) ? n : NULL;
}

/* Whether c is clip(x + 3, 0, 6) read only by `user`: gives the Clip and
   the Add (absorbed[0], absorbed[1]). */
static bool relu6_of_x_plus_3(const Tensor *c, const Tensor *x, const Node *user,
                              Node **absorbed) {
  Activation act;
  float lo, hi, three;
  Node *clip = gate_node(c, OP_CLIP, user);
  if (!clip || !activation_of(clip, &act, &lo, &hi) || act != OPC_ACT_CLIP || lo != 0.0f ||
      hi != 6.0f)
    return false;
  Node *add = gate_node(clip->in[0], OP_ADD, clip);
  if (!add || add->nin != 2)
    return false;
  for (int k = 0; k < 2; k++)
    if (add->in[1 - k] == x && scalar_constant(add->in[k], &three) && three == 3.0f) {
      absorbed[0] = clip;
      absorbed[1] = add;
      return true;
    }
  return false;
}

enum { MAX_ABSORBED = 3 };

/*
 * Matches gate(x) for the gate value `g` that `mul` multiplies x by: gives
 * the node to become the fused one (*fused, with its new kind in *op and
 * Swish's alpha) and the other nodes to absorb (NULL past the last).
 */
static bool match_gate(Node *mul, const Tensor *g, const Tensor *x, Node **fused, OpKind *op,
                       float *alpha, Node **absorbed) {
  Node *n;
  if ((n = gate_node(g, OP_SIGMOID, mul)) && swish_alpha(n, x, alpha, &absorbed[0])) {
    *op = OP_SWISH;
  } else if ((n = gate_node(g, OP_HARD_SIGMOID, mul)) && n->in[0] == x &&
             close_to(n->p.act.alpha, 1.0 / 6) && close_to(n->p.act.beta, 0.5)) {
    *op = OP_HARD_SWISH;
  } else if ((n = gate_node(g, OP_TANH, mul)) &&
             (absorbed[0] = gate_node(n->in[0], OP_SOFTPLUS, n)) && absorbed[0]->in[0] == x) {
    *op = OP_MISH;
  } else if ((n = sixth_node(g, mul)) && relu6_of_x_plus_3(sixth_of(n), x, n, absorbed)) {
    *op = OP_HARD_SWISH;
  } else {
    return false;
  }
  *fused = n;
  return true;
}

/* Makes `fused` the node of kind op computing y from x, absorbing `mul`
   and the others. */
static void become(Graph *g, Node *fused, OpKind op, float alpha, Tensor *x, Tensor *y,
                   Node *mul, Node **absorbed) {
  /* Attributes are what the IR prints and what inference reads again:
   * the gate's own (HardSigmoid's) go, Swish's alpha comes. */
  fused->op = op;
  fused->nattrs = 0;
  memset(&fused->p.act, 0, sizeof fused->p.act);
  fused->p.act.alpha = alpha;
  if (op == OP_SWISH && alpha != 1.0f)
    node_set_attr(g, fused, "alpha", ATTR_FLOAT)->f = alpha;
  if (fused->nin > 1)
    fused->nin = 1; /* a division's divisor goes */
  set_node_input(g, fused, 0, x);
  set_node_output(fused, 0, y);
  if (mul != fused) {
    node_absorb(g, fused, mul);
    mul->dead = true;
  }
  for (int k = 0; k < MAX_ABSORBED && absorbed[k]; k++) {
    node_absorb(g, fused, absorbed[k]);
    absorbed[k]->dead = true;
  }
}

/* div = Mul(x, clip(x + 3, 0, 6)) / 6 becomes HardSwish(x) (div itself);
   false when it is not one. */
static bool fuse_divided_hard_swish(Graph *g, Node *div) {
  Tensor *product = sixth_of(div);
  Node *mul = product ? gate_node(product, OP_MUL, div) : NULL;
  if (!mul || mul->nin != 2)
    return false;
  for (int k = 0; k < 2; k++) {
    Tensor *x = mul->in[1 - k], *y = div->out[0];
    Node *absorbed[MAX_ABSORBED] = {NULL};
    if (x && x->dtype == DT_FLOAT && tensor_same_shape(x, y) &&
        relu6_of_x_plus_3(mul->in[k], x, mul, absorbed)) {
      become(g, div, OP_HARD_SWISH, 1.0f, x, y, mul, absorbed);
      return true;
    }
  }
  return false;
}

/* Rewrites mul = Mul(x, gate(x)) into one node; false when it is not one. */
static bool fuse_gated(Graph *g, Node *mul) {
  if (mul->dead || mul->nin != 2 || mul->nout != 1)
    return false;
  if (fuse_divided_hard_swish(g, mul))
    return true;
  if (mul->op != OP_MUL)
    return false;
  for (int k = 0; k < 2; k++) {
    Tensor *x = mul->in[1 - k], *y = mul->out[0];
    Node *fused, *absorbed[MAX_ABSORBED] = {NULL};
    OpKind op;
    float alpha = 1.0f;
    if (!x || x->dtype != DT_FLOAT || !tensor_same_shape(x, y) ||
        !match_gate(mul, mul->in[k], x, &fused, &op, &alpha, absorbed))
      continue;
    become(g, fused, op, alpha, x, y, mul, absorbed);
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
