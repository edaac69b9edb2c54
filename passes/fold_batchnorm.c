/*
 * fold_batchnorm.c - folds an inference BatchNormalization, or a Mul,
 * Add, Sub or Div by a constant of one value per channel (or one for all),
 * into the Conv, ConvTranspose or Gemm that produces its input:
 *
 *   bn(y) = s * (y - mean) + bias,   s = scale / sqrt(var + epsilon)
 *   y * k, y / k, y + k, y - k       s = k or 1 / k, or shift = k or -k
 *
 * is linear per channel, so W's slices of each output channel are scaled
 * by s and the producer's bias becomes s * b + shift. New weight tensors
 * are made, since the old ones may be shared. Only when the producer's
 * output feeds nothing else and is not a graph output. The constant maps
 * are PP-LCNet's learnable affine blocks (Paddle's PP-OCR models: a scalar
 * Mul and Add after every convolution), a conversion's scaling, or a bias
 * written as its own Add.
 *
 * Not under --precision bf16 into a producer that will run in bfloat16:
 * cuDNN adds a 16-bit convolution's bias in the data's type, and a folded
 * shift rounded to bfloat16's 8 bits is off by the same amount at every
 * position of its channel. Unlike the rounding of each stored value, that
 * error does not average out: on EfficientNet-B0 it alone gave 0.31
 * relative L2 on the logits, where rounding every stored value gives 0.14.
 * Left alone, the BatchNormalization keeps its float32 parameters.
 *
 * A BatchNormalization that stays gets its mean folded into its bias
 * (fold_mean), so that it is one multiply-add per element.
 */
#include <math.h>
#include <string.h>

#include "pass.h"
#include "rewrite.h"

static bool const_vector(const Tensor *t, int64_t n) {
  return t && t->f32 && tensor_numel(t) == n;
}

/* The per-channel scale s and shift (bias - mean * s) of a foldable BN. */
static bool bn_affine(Graph *g, const Node *bn, int64_t channels, float **scale, float **shift) {
  if (bn->nin < 5 || bn->p.norm.training)
    return false;
  for (int i = 1; i < bn->nout; i++)
    if (bn->out[i] && (bn->out[i]->nusers || bn->out[i]->is_output))
      return false;
  Tensor *gamma = bn->in[1], *beta = bn->in[2], *mean = bn->in[3], *var = bn->in[4];
  if (!const_vector(gamma, channels) || !const_vector(beta, channels) ||
      !const_vector(mean, channels) || !const_vector(var, channels))
    return false;
  float eps = bn->p.norm.epsilon;
  *scale = arena_alloc(g->arena, sizeof(float) * (size_t)channels);
  *shift = arena_alloc(g->arena, sizeof(float) * (size_t)channels);
  for (int64_t c = 0; c < channels; c++) {
    float s = gamma->f32[c] / sqrtf(var->f32[c] + eps);
    (*scale)[c] = s;
    (*shift)[c] = beta->f32[c] - mean->f32[c] * s;
  }
  return true;
}

/* The values of constant k per channel of y (axis 1), `channels` of them:
   k holds one value, or one per channel broadcast along every other axis. */
static bool per_channel(const Tensor *k, const Tensor *y, int64_t channels, float *values) {
  if (!k || !k->f32 || k->dtype != DT_FLOAT || k->rank > y->rank)
    return false;
  int64_t n = tensor_numel(k);
  if (n != 1) {
    int axis = 1 - (y->rank - k->rank); /* y's axis 1 in k's dims */
    if (n != channels || axis < 0 || k->dims[axis] != channels)
      return false;
  }
  for (int64_t c = 0; c < channels; c++)
    values[c] = k->f32[n == 1 ? 0 : c];
  return true;
}

/* The per-channel map s * y + shift that node n applies to its input y
   (a Mul, Add, Sub or Div by a constant), or false. */
static bool constant_affine(Graph *g, const Node *n, const Tensor *y, int64_t channels,
                            float **scale, float **shift) {
  if (n->nin != 2 || n->nout != 1 || !tensor_same_shape(n->out[0], y))
    return false;
  bool first = n->in[0] == y;
  const Tensor *k = first ? n->in[1] : n->in[0];
  if (n->in[first ? 0 : 1] != y || k == y || ((n->op == OP_SUB || n->op == OP_DIV) && !first))
    return false;
  float *v = arena_alloc(g->arena, sizeof(float) * (size_t)channels);
  if (!per_channel(k, y, channels, v))
    return false;
  *scale = arena_alloc(g->arena, sizeof(float) * (size_t)channels);
  *shift = arena_alloc(g->arena, sizeof(float) * (size_t)channels);
  for (int64_t c = 0; c < channels; c++) {
    bool scales = n->op == OP_MUL || n->op == OP_DIV;
    if (scales && (!isfinite(v[c]) || (n->op == OP_DIV && v[c] == 0.0f)))
      return false; /* an infinite scale: y * inf's NaNs and infinities are not W * inf's */
    (*scale)[c] = n->op == OP_MUL ? v[c] : n->op == OP_DIV ? 1.0f / v[c] : 1.0f;
    (*shift)[c] = n->op == OP_ADD ? v[c] : n->op == OP_SUB ? -v[c] : 0.0f;
  }
  return true;
}

static bool all_ones(const float *v, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (v[i] != 1.0f)
      return false;
  return true;
}

/* The per-channel map of a foldable node reading y: its scale and shift. */
static bool node_affine(Graph *g, const Node *n, const Tensor *y, int64_t channels,
                        float **scale, float **shift) {
  if (n->op == OP_BATCH_NORM)
    return bn_affine(g, n, channels, scale, shift);
  return constant_affine(g, n, y, channels, scale, shift);
}

/* What the tensors made by folding `folded` are named after it. */
static const char *suffix(const Node *folded) {
  return folded->op == OP_BATCH_NORM ? "_bn" : "_affine";
}

/* The producer's new bias: s * b + shift, with b = 0 when absent. Without
   an old bias it is named after the weights, with a suffix of its own so
   that it cannot take the new weights' name. */
static Tensor *folded_bias(Graph *g, const Node *folded, Tensor *old, const Tensor *w,
                           int64_t channels, const float *scale, const float *shift) {
  const char *name = old ? arena_printf(g->arena, "%s%s", old->name, suffix(folded))
                         : arena_printf(g->arena, "%s%s_bias", w->name, suffix(folded));
  Tensor *b = new_const_vector(g, name, channels, 0);
  for (int64_t c = 0; c < channels; c++)
    b->f32[c] = scale[c] * (old ? old->f32[c] : 0) + shift[c];
  return b;
}

static bool fold_into_conv(Graph *g, Node *conv, Node *bn) {
  Tensor *w = node_input(conv, 1), *b = node_input(conv, 2), *y = conv->out[0];
  if (!w || !w->f32 || w->rank < 3 || y->rank < 2 || node_input(conv, 3))
    return false;
  int64_t m = y->dims[1];
  if (w->dims[0] != m || (b && !const_vector(b, m)))
    return false;
  float *scale, *shift;
  if (!node_affine(g, bn, y, m, &scale, &shift))
    return false;
  if (!all_ones(scale, m)) { /* an Add or Sub leaves the filter as it is */
    Tensor *w2 = new_const_like(g, w, suffix(bn));
    int64_t slice = tensor_numel(w) / m;
    for (int64_t i = 0; i < tensor_numel(w); i++)
      w2->f32[i] = w->f32[i] * scale[i / slice];
    set_node_input(g, conv, 1, w2);
  }
  set_node_input(g, conv, 2, folded_bias(g, bn, b, w, m, scale, shift));
  return true;
}

/* ConvTranspose weights are [C_in, M/group, k...]: output channel
   (c / (C_in/group)) * (M/group) + j owns slice W[c, j]. */
static bool fold_into_conv_transpose(Graph *g, Node *conv, Node *bn) {
  Tensor *w = node_input(conv, 1), *b = node_input(conv, 2), *y = conv->out[0];
  if (!w || !w->f32 || w->rank < 3 || y->rank < 2)
    return false;
  int64_t m = y->dims[1], group = conv->win.group;
  int64_t cin = w->dims[0], mg = w->dims[1];
  if (group < 1 || cin % group || mg * group != m || (b && !const_vector(b, m)))
    return false;
  float *scale, *shift;
  if (!node_affine(g, bn, y, m, &scale, &shift))
    return false;
  Tensor *w2 = new_const_like(g, w, suffix(bn));
  int64_t k = tensor_numel(w) / (cin * mg);
  for (int64_t c = 0; c < cin; c++)
    for (int64_t j = 0; j < mg; j++) {
      int64_t out_channel = (c / (cin / group)) * mg + j;
      for (int64_t i = 0; i < k; i++) {
        int64_t at = (c * mg + j) * k + i;
        w2->f32[at] = w->f32[at] * scale[out_channel];
      }
    }
  set_node_input(g, conv, 1, w2);
  set_node_input(g, conv, 2, folded_bias(g, bn, b, w, m, scale, shift));
  return true;
}

/* Gemm: Y = alpha * A * B + beta * C, BN over Y's columns. The columns of
   B (rows when transB) are scaled; C becomes s * (beta * C - mean) + bias
   with beta = 1. Handles C absent, [N] or [1,N]. */
static bool fold_into_gemm(Graph *g, Node *gemm, Node *bn) {
  Tensor *bm = node_input(gemm, 1), *c = node_input(gemm, 2), *y = gemm->out[0];
  if (!bm || !bm->f32 || bm->rank != 2 || y->rank != 2 || gemm->act != OPC_ACT_NONE)
    return false;
  int64_t n = y->dims[1];
  bool trans_b = gemm->p.gemm.trans_b;
  if (bm->dims[trans_b ? 0 : 1] != n)
    return false;
  if (c && !(c->f32 && tensor_numel(c) == n && c->dims[c->rank - 1] == n))
    return false;
  float *scale, *shift;
  if (!node_affine(g, bn, y, n, &scale, &shift))
    return false;
  Tensor *b2 = new_const_like(g, bm, suffix(bn));
  int64_t rows = bm->dims[0], cols = bm->dims[1];
  for (int64_t r = 0; r < rows; r++)
    for (int64_t col = 0; col < cols; col++)
      b2->f32[r * cols + col] = bm->f32[r * cols + col] * scale[trans_b ? r : col];
  float beta = gemm->p.gemm.beta;
  Tensor *c2 = c ? new_const_like(g, c, suffix(bn))
                 : new_const_vector(g, arena_printf(g->arena, "%s%s_bias", bm->name, suffix(bn)), n, 0);
  for (int64_t i = 0; i < n; i++)
    c2->f32[i] = scale[i] * (c ? beta * c->f32[i] : 0) + shift[i];
  set_node_input(g, gemm, 1, b2);
  set_node_input(g, gemm, 2, c2);
  node_set_attr(g, gemm, "beta", ATTR_FLOAT)->f = 1.0f;
  gemm->p.gemm.beta = 1.0f;
  return true;
}

/* A BatchNormalization left standing, its parameters constant: the mean
   goes into the bias (bias - mean * s), the mean becomes zeros. The node
   then computes s * y + shift, which opc's kernel does in one pass over
   memory, an activation fused into it (a pre-activation BN -> Relu, as in
   DenseNet), where it would otherwise subtract the mean in a pass of its
   own. cuDNN computes the same from the new parameters. */
static bool fold_mean(Graph *g, Node *bn) {
  Tensor *x = node_input(bn, 0), *mean = node_input(bn, 3);
  /* In training mode y takes the batch's mean; input 3 feeds only the
     running mean. */
  if (!x || x->rank < 2 || !mean || !mean->f32 || bn->p.norm.training)
    return false;
  int64_t channels = x->dims[1];
  bool zero = true;
  for (int64_t c = 0; c < tensor_numel(mean) && zero; c++)
    zero = mean->f32[c] == 0.0f;
  float *scale, *shift;
  if (zero || !bn_affine(g, bn, channels, &scale, &shift))
    return false;
  Tensor *bias = new_const_like(g, node_input(bn, 2), "_shift");
  memcpy(bias->f32, shift, sizeof(float) * (size_t)channels);
  set_node_input(g, bn, 2, bias);
  set_node_input(g, bn, 3, new_const_vector(g, arena_printf(g->arena, "%s_zero", mean->name),
                                            channels, 0));
  return true;
}

/* The input that node n maps per channel, if it is a kind that folds: a
   BatchNormalization's x, or the operand of a Mul, Add, Sub or Div that
   a constant does not hold (any one, for Mul and Add). */
static Tensor *folded_input(const Node *n) {
  if (n->dead || n->nin < 1)
    return NULL;
  if (n->op == OP_BATCH_NORM)
    return n->in[0];
  if ((n->op != OP_MUL && n->op != OP_ADD && n->op != OP_SUB && n->op != OP_DIV) || n->nin != 2)
    return NULL;
  bool second = n->op != OP_SUB && n->op != OP_DIV && tensor_is_const(n->in[0]);
  return n->in[second ? 1 : 0];
}

bool pass_fold_batchnorm(Graph *g, const PassOptions *opt, PassContext *ctx) {
  begin_rewrite(g);
  int folded = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *bn = g->nodes[i];
    Tensor *x = folded_input(bn);
    if (!x || !x->producer || sole_consumer(x) != bn)
      continue;
    Node *p = x->producer;
    if (p->dead || p->is_view || p->act != OPC_ACT_NONE || p->nout != 1 || x->producer_slot != 0)
      continue;
    if (opt->half == DT_BFLOAT16 && op_info(p->op)->half && op_info(p->op)->half(p))
      continue;
    bool done = false;
    if (p->op == OP_CONV)
      done = fold_into_conv(g, p, bn);
    else if (p->op == OP_CONV_TRANSPOSE)
      done = fold_into_conv_transpose(g, p, bn);
    else if (p->op == OP_GEMM)
      done = fold_into_gemm(g, p, bn);
    if (!done)
      continue;
    swallow_consumer(g, p, bn);
    folded++;
  }
  for (int i = 0; i < g->nnodes; i++)
    if (!g->nodes[i]->dead && g->nodes[i]->op == OP_BATCH_NORM)
      folded += fold_mean(g, g->nodes[i]);
  if (!folded)
    return true;
  return finish_rewrite(g);
}
