/*
 * fuse_squeeze_excite.c - a squeeze-and-excitation block's gate in one
 * launch, and its channel scaling folded into the convolution after it.
 * Exporters write the block as (after fuse-activation):
 *
 *   p = GlobalAveragePool(x)
 *   h = Conv(p, W1, b1) .act=A     1x1 filters on a 1x1 image: launch cost
 *   s = Conv(h, W2, b2) .act=G     only, two cuDNN calls
 *   y = Mul(x, s)                  (or Mul(s, x))
 *
 * The two convolutions become one SEGate(p, packed) node, opc's kernel
 * opc_se_gate, with W1, b1, W2, b2 packed into one constant (a kernel
 * reads at most four inputs). Where y feeds only a Conv of one image with
 * one group, the Mul goes too: conv(x * s) is conv(x) with filter
 * W[o, c, ...] * s[c] (zero padding stays zero), so SEGate(p, packed, W)
 * writes that filter and the Conv reads x. The Mul's launch and its pass
 * over x become a read and a write of the filter; taken where the cost
 * model predicts the Mul the dearer (on an H100, every block of
 * EfficientNet-B0 and MobileNetV3: a launch outweighs even the 7x7
 * stages' filters, larger than their x).
 *
 * Under --precision fp16 or bf16 only the gate is fused (SEGate follows
 * its 16-bit input and keeps its layers in float32) and the Mul stays: the
 * projection then runs in 16 bits with its filter channels-last (K, R, S,
 * C, choose-layout), which opc_se_gate does not write.
 */
#include "pass.h"
#include "rewrite.h"

/* The live Conv writing t that only `user` reads, when it is a fully
   connected layer on a pooled vector: group 1, a 1x1 constant filter, a
   constant bias or none, no residual, a [N, K, 1, 1] output. */
static Node *dense_conv(const Tensor *t, const Node *user) {
  Node *c = t ? t->producer : NULL;
  if (!c || c->dead || c->op != OP_CONV || c->nout != 1 || sole_consumer(t) != user)
    return NULL;
  const Tensor *w = c->in[1], *b = node_input(c, 2), *x = c->in[0];
  if (!w->f32 || w->rank != 4 || w->dims[2] != 1 || w->dims[3] != 1 || (b && !b->f32) ||
      node_input(c, 3) || c->win.group != 1 || x->rank != 4 || x->dims[2] != 1 ||
      x->dims[3] != 1 || t->rank != 4 || t->dims[2] != 1 || t->dims[3] != 1 ||
      x->dtype != DT_FLOAT)
    return NULL;
  return c;
}

/* Whether the inner activation takes no parameters: SEGate keeps only
   the gate's (Node.act_alpha, act_beta). */
static bool plain_activation(Activation a) {
  return a == OPC_ACT_NONE ||
         !(op_info(act_op(a))->traits & (T_ACT_ALPHA | T_ACT_BETA));
}

/* W1, b1, W2, b2 in one constant, as opc_se_gate reads them. */
static Tensor *pack_layers(Graph *g, const Node *fc1, const Node *fc2) {
  const Tensor *w1 = fc1->in[1], *b1 = node_input(fc1, 2);
  const Tensor *w2 = fc2->in[1], *b2 = node_input(fc2, 2);
  int64_t r = w1->dims[0], c = w1->dims[1];
  Tensor *t = new_const_vector(g, arena_printf(g->arena, "%s_se", w2->name),
                               2 * r * c + r + c, 0.0f);
  float *at = t->f32;
  for (int64_t i = 0; i < r * c; i++)
    *at++ = w1->f32[i];
  for (int64_t i = 0; i < r; i++)
    *at++ = b1 ? b1->f32[i] : 0.0f;
  for (int64_t i = 0; i < c * r; i++)
    *at++ = w2->f32[i];
  for (int64_t i = 0; i < c; i++)
    *at++ = b2 ? b2->f32[i] : 0.0f;
  return t;
}

/* The Conv that reads y = mul's output alone, as its data, with one image
   and one group and a constant filter, when the cost model predicts the
   Mul dearer than reading and writing that filter once more. */
static Node *scalable_conv(Graph *g, Node *mul, const Tensor *x, PassContext *ctx) {
  if (ctx->opt->half || ctx->opt->cpu_target)
    return NULL;
  const Tensor *y = mul->out[0];
  Node *c = sole_consumer(y);
  if (!c || c->op != OP_CONV || c->in[0] != y || node_input(c, 3) == y || c->win.group != 1 ||
      !c->in[1]->f32 || x->dims[0] != 1)
    return NULL;
  const CostModel *cm = pass_cost_model(ctx);
  if (!cm)
    return NULL;
  double bandwidth = cm->dev.mem_bandwidth_gbs * cm->dev.memory_efficiency * 1e3; /* bytes/us */
  double filter_us = 2.0 * 4 * (double)tensor_numel(c->in[1]) / bandwidth;
  return filter_us < cost_node_us(cm, g, mul) ? c : NULL;
}

/* fc2 becomes SEGate(p, packed[, filter]) and absorbs fc1. */
static void make_gate(Graph *g, Node *fc1, Node *fc2, Tensor *p) {
  Tensor *packed = pack_layers(g, fc1, fc2);
  fc2->op = OP_SE_GATE;
  fc2->nattrs = 0;
  fc2->win = (Window){0};
  fc2->p.se.hidden = fc1->out[0]->dims[1];
  fc2->p.se.inner = fc1->act;
  node_set_attr(g, fc2, "hidden", ATTR_INT)->i = fc2->p.se.hidden;
  if (fc1->act != OPC_ACT_NONE)
    node_set_attr(g, fc2, "inner", ATTR_STRING)->s = act_name(fc1->act);
  set_node_input(g, fc2, 0, p);
  set_node_input(g, fc2, 1, packed);
  fc2->nin = 2;
  node_absorb(g, fc2, fc1);
  fc1->dead = true;
}

/* The scaling Mul goes into conv's filter: the gate node writes it. */
static void scale_filter(Graph *g, Node *gate, Node *mul, Node *conv, Tensor *x) {
  Tensor *w = conv->in[1];
  Tensor *scaled = graph_add_tensor(g, arena_printf(g->arena, "%s_gated", w->name));
  scaled->dtype = DT_FLOAT;
  tensor_set_shape(scaled, w->rank, w->dims);
  set_node_input(g, gate, 2, w);
  set_node_output(gate, 0, scaled);
  set_node_input(g, conv, 0, x);
  set_node_input(g, conv, 1, scaled);
  node_absorb(g, gate, mul);
  mul->dead = true;
}

/* Rewrites the block whose scaling is `mul`; false when it is not one. */
static bool fuse_block(Graph *g, Node *mul, PassContext *ctx) {
  if (mul->dead || mul->op != OP_MUL || mul->nin != 2 || mul->nout != 1)
    return false;
  for (int k = 0; k < 2; k++) {
    Tensor *x = mul->in[1 - k], *s = mul->in[k];
    Node *fc2 = dense_conv(s, mul);
    Node *fc1 = fc2 ? dense_conv(fc2->in[0], fc2) : NULL;
    Node *pool = fc1 ? fc1->in[0]->producer : NULL;
    if (!pool || pool->dead || pool->op != OP_GLOBAL_AVERAGE_POOL || pool->in[0] != x ||
        !tensor_same_shape(x, mul->out[0]) || !plain_activation(fc1->act) ||
        s->dims[0] != x->dims[0] || s->dims[1] != x->dims[1] || fc1->out[0]->dims[1] > 1024)
      continue;
    Tensor *p = fc1->in[0];
    Node *conv = scalable_conv(g, mul, x, ctx);
    make_gate(g, fc1, fc2, p);
    if (conv)
      scale_filter(g, fc2, mul, conv, x);
    return true;
  }
  return false;
}

bool pass_fuse_squeeze_excite(Graph *g, const PassOptions *opt, PassContext *ctx) {
  (void)opt;
  begin_rewrite(g);
  int fused = 0;
  for (int i = 0; i < g->nnodes; i++)
    fused += fuse_block(g, g->nodes[i], ctx);
  if (!fused)
    return true;
  return finish_rewrite(g);
}
