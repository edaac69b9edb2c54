/*
 * test_fusion.c - fold-batchnorm, fuse-bias, fuse-pad, fuse-activation and
 * fuse-residual on small hand-built graphs: where they must fire (with
 * numeric checks against naive reference maths) and where they must not.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

static PassOptions opt = {.opt_level = 1};

/* BatchNormalization as the ONNX spec defines it, in place on y[N,C,rest]. */
static void ref_bn(float *y, int64_t n, int64_t c, int64_t rest, const Node *bn) {
  float eps = node_attr_float(bn, "epsilon", 1e-5f);
  const float *scale = bn->in[1]->f32, *bias = bn->in[2]->f32;
  const float *mean = bn->in[3]->f32, *var = bn->in[4]->f32;
  for (int64_t i = 0; i < n; i++)
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t r = 0; r < rest; r++) {
        float *v = &y[(i * c + ch) * rest + r];
        *v = (*v - mean[ch]) / sqrtf(var[ch] + eps) * scale[ch] + bias[ch];
      }
}

static Node *add_bn(Graph *g, const char *name, Tensor *x, Tensor *y, int64_t c) {
  char buf[64];
  Tensor *in[5] = {x, NULL, NULL, NULL, NULL};
  const char *parts[4] = {"scale", "bias", "mean", "var"};
  for (int i = 0; i < 4; i++) {
    snprintf(buf, sizeof buf, "%s_%s", name, parts[i]);
    in[i + 1] = i == 3 ? t_const(g, buf, shape(1, (int)c), 0.2f, 2.0f)
                       : t_const(g, buf, shape(1, (int)c), -1.0f, 1.0f);
  }
  Node *bn = n_add(g, OP_BATCH_NORM, name, 5, in, 1, &y);
  node_set_attr(g, bn, "epsilon", ATTR_FLOAT)->f = 1e-3f;
  return bn;
}

static void test_bn_conv(bool with_bias) {
  Graph *g = graph_new("bn_conv");
  Tensor *x = t_input(g, "x", shape(4, 1, 4, 5, 5));
  Tensor *w = t_const(g, "w", shape(4, 6, 2, 3, 3), -1, 1);
  Tensor *b = with_bias ? t_const(g, "b", shape(1, 6), -1, 1) : NULL;
  Tensor *y = t_value(g, "y", shape(4, 1, 6, 5, 5));
  Tensor *z = t_value(g, "z", shape(4, 1, 6, 5, 5));
  n_conv(g, "conv", x, w, b, y, 1, 1, 2);
  Node *bn = add_bn(g, "bn", y, z, 6);
  graph_add_output(g, z);
  ready(g);

  float xs[100], expect[150], got[150], w_before[108];
  unsigned seed = 3;
  for (int i = 0; i < 100; i++)
    xs[i] = frand(&seed, -1, 1);
  memcpy(w_before, w->f32, sizeof w_before);
  ref_conv2d(xs, 1, 4, 5, 5, w->f32, 6, 3, b ? b->f32 : NULL, 1, 1, 2, expect, 5, 5);
  ref_bn(expect, 1, 6, 25, bn);

  CHECK(pass_fold_batchnorm(g, &opt, pass_context_new(g, &opt)));
  CHECK(count_op(g, OP_BATCH_NORM) == 0);
  Node *conv = find_node(g, "conv");
  CHECK(conv && conv->out[0] == z && has_fused(conv, "bn"));
  CHECK(conv && conv->nin >= 3 && conv->in[2] && conv->in[2]->f32);
  if (conv && conv->nin >= 3 && conv->in[2]) {
    ref_conv2d(xs, 1, 4, 5, 5, conv->in[1]->f32, 6, 3, conv->in[2]->f32, 1, 1, 2, got, 5, 5);
    CHECK(max_abs_diff(expect, got, 150) < 1e-4f);
  }
  /* The original weights may be shared: they must be left untouched. */
  CHECK(memcmp(w_before, w->f32, sizeof w_before) == 0);
  CHECK(graph_verify(g));
  graph_free(g);
}

/* BN must stay when the conv output is also read elsewhere or returned. */
static void test_bn_not_folded(bool as_output) {
  Graph *g = graph_new("bn_shared");
  Tensor *x = t_input(g, "x", shape(4, 1, 2, 4, 4));
  Tensor *w = t_const(g, "w", shape(4, 3, 2, 1, 1), -1, 1);
  Tensor *y = t_value(g, "y", shape(4, 1, 3, 4, 4));
  Tensor *z = t_value(g, "z", shape(4, 1, 3, 4, 4));
  n_conv(g, "conv", x, w, NULL, y, 1, 0, 1);
  add_bn(g, "bn", y, z, 3);
  graph_add_output(g, z);
  if (as_output) {
    graph_add_output(g, y);
  } else {
    Tensor *r = t_value(g, "r", shape(4, 1, 3, 4, 4));
    n_unary(g, OP_RELU, "relu", y, r);
    graph_add_output(g, r);
  }
  ready(g);
  CHECK(pass_fold_batchnorm(g, &opt, pass_context_new(g, &opt)));
  CHECK(count_op(g, OP_BATCH_NORM) == 1);
  CHECK(find_node(g, "conv")->out[0] == y);
  graph_free(g);
}

static void test_bn_gemm(void) {
  Graph *g = graph_new("bn_gemm");
  Tensor *a = t_input(g, "a", shape(2, 2, 3));
  Tensor *bm = t_const(g, "bmat", shape(2, 4, 3), -1, 1); /* transB: [N,K] */
  Tensor *c = t_const(g, "c", shape(1, 4), -1, 1);
  Tensor *y = t_value(g, "y", shape(2, 2, 4));
  Tensor *z = t_value(g, "z", shape(2, 2, 4));
  Tensor *in[3] = {a, bm, c};
  Node *gemm = n_add(g, OP_GEMM, "gemm", 3, in, 1, &y);
  node_set_attr(g, gemm, "transB", ATTR_INT)->i = 1;
  node_set_attr(g, gemm, "alpha", ATTR_FLOAT)->f = 0.5f;
  node_set_attr(g, gemm, "beta", ATTR_FLOAT)->f = 2.0f;
  Node *bn = add_bn(g, "bn", y, z, 4);
  graph_add_output(g, z);
  ready(g);

  float as[6] = {0.5f, -1, 2, 1.5f, 0.25f, -0.75f}, expect[8], got[8];
  /* Gemm by the spec: alpha * A * B^T + beta * C. */
  for (int i = 0; i < 2; i++)
    for (int n = 0; n < 4; n++) {
      float acc = 0;
      for (int k = 0; k < 3; k++)
        acc += as[i * 3 + k] * bm->f32[n * 3 + k];
      expect[i * 4 + n] = 0.5f * acc + 2.0f * c->f32[n];
    }
  ref_bn(expect, 2, 4, 1, bn);

  CHECK(pass_fold_batchnorm(g, &opt, pass_context_new(g, &opt)));
  CHECK(count_op(g, OP_BATCH_NORM) == 0);
  gemm = find_node(g, "gemm");
  float alpha = node_attr_float(gemm, "alpha", 1), beta = node_attr_float(gemm, "beta", 1);
  bool trans_b = node_attr_int(gemm, "transB", 0);
  const float *b2 = gemm->in[1]->f32, *c2 = gemm->in[2]->f32;
  for (int i = 0; i < 2; i++)
    for (int n = 0; n < 4; n++) {
      float acc = 0;
      for (int k = 0; k < 3; k++)
        acc += as[i * 3 + k] * (trans_b ? b2[n * 3 + k] : b2[k * 4 + n]);
      got[i * 4 + n] = alpha * acc + beta * c2[n];
    }
  CHECK(max_abs_diff(expect, got, 8) < 1e-4f);
  CHECK(gemm->out[0] == z);
  graph_free(g);
}

/* y[m] = sum over c, ky, kx of x[c, iy, ix] * W[c, j, ky, kx] at
   oy = iy * stride + ky, with m = group_of(c) * (M/group) + j. */
static void ref_conv_transpose(const float *x, int64_t c, int64_t h, int64_t w_, const float *w,
                               int64_t mg, int64_t k, const float *b, int64_t stride,
                               int64_t group, float *y, int64_t oh, int64_t ow) {
  int64_t m = mg * group, cg = c / group;
  for (int64_t i = 0; i < m * oh * ow; i++)
    y[i] = b ? b[i / (oh * ow)] : 0;
  for (int64_t ci = 0; ci < c; ci++)
    for (int64_t j = 0; j < mg; j++)
      for (int64_t iy = 0; iy < h; iy++)
        for (int64_t ix = 0; ix < w_; ix++)
          for (int64_t ky = 0; ky < k; ky++)
            for (int64_t kx = 0; kx < k; kx++) {
              int64_t om = (ci / cg) * mg + j, oy = iy * stride + ky, ox = ix * stride + kx;
              y[(om * oh + oy) * ow + ox] +=
                  x[(ci * h + iy) * w_ + ix] * w[((ci * mg + j) * k + ky) * k + kx];
            }
}

static void test_bn_conv_transpose(void) {
  Graph *g = graph_new("bn_convT");
  Tensor *x = t_input(g, "x", shape(4, 1, 4, 3, 3));
  Tensor *w = t_const(g, "w", shape(4, 4, 3, 2, 2), -1, 1);
  Tensor *y = t_value(g, "y", shape(4, 1, 6, 6, 6));
  Tensor *z = t_value(g, "z", shape(4, 1, 6, 6, 6));
  Tensor *in[2] = {x, w};
  Node *ct = n_add(g, OP_CONV_TRANSPOSE, "convT", 2, in, 1, &y);
  node_set_attr(g, ct, "group", ATTR_INT)->i = 2;
  set_ints(g, ct, "strides", 2, (int64_t[]){2, 2});
  set_ints(g, ct, "kernel_shape", 2, (int64_t[]){2, 2});
  ct->win = (Window){.nspatial = 2, .kernel = {2, 2}, .stride = {2, 2}, .dilation = {1, 1},
                     .group = 2};
  Node *bn = add_bn(g, "bn", y, z, 6);
  graph_add_output(g, z);
  ready(g);

  float xs[36], expect[216], got[216];
  unsigned seed = 11;
  for (int i = 0; i < 36; i++)
    xs[i] = frand(&seed, -1, 1);
  ref_conv_transpose(xs, 4, 3, 3, w->f32, 3, 2, NULL, 2, 2, expect, 6, 6);
  ref_bn(expect, 1, 6, 36, bn);
  CHECK(pass_fold_batchnorm(g, &opt, pass_context_new(g, &opt)));
  CHECK(count_op(g, OP_BATCH_NORM) == 0);
  ct = find_node(g, "convT");
  CHECK(ct->nin >= 3 && ct->in[2]);
  if (ct->nin >= 3 && ct->in[2]) {
    ref_conv_transpose(xs, 4, 3, 3, ct->in[1]->f32, 3, 2, ct->in[2]->f32, 2, 2, got, 6, 6);
    CHECK(max_abs_diff(expect, got, 216) < 1e-4f);
  }
  graph_free(g);
}

/* ------------------------------------------------------------ fuse-bias */

static void test_bias(Shape kshape, bool expect_fused) {
  Graph *g = graph_new("bias");
  Tensor *x = t_input(g, "x", shape(4, 1, 2, 4, 4));
  Tensor *w = t_const(g, "w", shape(4, 4, 2, 1, 1), -1, 1);
  Tensor *b = t_const(g, "b", shape(1, 4), -1, 1);
  Tensor *k = t_const(g, "k", kshape, -1, 1);
  Tensor *y = t_value(g, "y", shape(4, 1, 4, 4, 4));
  Tensor *s = t_value(g, "s", shape(4, 1, 4, 4, 4));
  n_conv(g, "conv", x, w, b, y, 1, 0, 1);
  n_binary(g, OP_ADD, "add", k, y, s); /* constant first: either side works */
  graph_add_output(g, s);
  ready(g);
  CHECK(pass_fuse_bias(g, &opt, pass_context_new(g, &opt)));
  Node *conv = find_node(g, "conv");
  CHECK(count_op(g, OP_ADD) == (expect_fused ? 0 : 1));
  if (expect_fused) {
    CHECK(conv->out[0] == s && has_fused(conv, "add"));
    for (int c = 0; c < 4; c++)
      CHECK(fabsf(conv->in[2]->f32[c] - (b->f32[c] + k->f32[c])) < 1e-6f);
  } else {
    CHECK(conv->out[0] == y && conv->in[2] == b);
  }
  graph_free(g);
}

/* ------------------------------------------------------------- fuse-pad */

typedef struct PadCase {
  const char *mode;
  float value;
  int64_t pads[8];
  OpKind consumer;
  bool count_include_pad;
  bool other_reader;
  bool old_opset; /* pads and value as attributes */
  bool expect;
} PadCase;

static void test_pad(PadCase pc) {
  Graph *g = graph_new("pad");
  Tensor *x = t_input(g, "x", shape(4, 1, 2, 5, 5));
  int64_t ph = pc.pads[2] + pc.pads[6], pw = pc.pads[3] + pc.pads[7];
  Tensor *p = t_value(g, "p", shape(4, 1, 2, 5 + (int)ph, 5 + (int)pw));
  Node *pad;
  if (pc.old_opset) {
    pad = n_unary(g, OP_PAD, "pad", x, p);
    set_ints(g, pad, "pads", 8, pc.pads);
    node_set_attr(g, pad, "value", ATTR_FLOAT)->f = pc.value;
  } else {
    Tensor *tp = t_const_ints(g, "pads", shape(1, 8), pc.pads);
    Tensor *tv = t_const_values(g, "value", shape(0), &pc.value);
    Tensor *in[3] = {x, tp, tv};
    pad = n_add(g, OP_PAD, "pad", 3, in, 1, &p);
  }
  node_set_attr(g, pad, "mode", ATTR_STRING)->s = pc.mode;
  /* 3x3 window, stride 1, pads 1: output = padded size. */
  Tensor *y = t_value(g, "y", shape(4, 1, 2, 5 + (int)ph, 5 + (int)pw));
  Node *c;
  if (pc.consumer == OP_CONV) {
    c = n_conv(g, "c", p, t_const(g, "w", shape(4, 2, 2, 3, 3), -1, 1), NULL, y, 1, 1, 1);
  } else {
    c = n_unary(g, pc.consumer, "c", p, y);
    set_ints(g, c, "kernel_shape", 2, (int64_t[]){3, 3});
    set_ints(g, c, "pads", 4, (int64_t[]){1, 1, 1, 1});
    c->win = (Window){.nspatial = 2, .kernel = {3, 3}, .stride = {1, 1}, .dilation = {1, 1},
                      .pad_begin = {1, 1}, .pad_end = {1, 1}};
    if (pc.consumer == OP_AVERAGE_POOL) {
      node_set_attr(g, c, "count_include_pad", ATTR_INT)->i = pc.count_include_pad;
      c->win.count_include_pad = pc.count_include_pad;
    }
  }
  graph_add_output(g, y);
  if (pc.other_reader) {
    Tensor *r = t_value(g, "r", shape(4, 1, 2, 5 + (int)ph, 5 + (int)pw));
    n_unary(g, OP_RELU, "relu", p, r);
    graph_add_output(g, r);
  }
  ready(g);
  CHECK(pass_fuse_pad(g, &opt, pass_context_new(g, &opt)));
  c = find_node(g, "c");
  if (pc.expect) {
    CHECK(count_op(g, OP_PAD) == 0);
    CHECK(c->in[0] == x && has_fused(c, "pad"));
    const int64_t *pads;
    CHECK(node_attr_ints(c, "pads", &pads) == 4);
    /* ONNX pads order: H begin, W begin, H end, W end. */
    CHECK(pads[0] == 1 + pc.pads[2] && pads[1] == 1 + pc.pads[3]);
    CHECK(pads[2] == 1 + pc.pads[6] && pads[3] == 1 + pc.pads[7]);
    CHECK(c->win.pad_begin[0] == pads[0] && c->win.pad_begin[1] == pads[1]);
    CHECK(c->win.pad_end[0] == pads[2] && c->win.pad_end[1] == pads[3]);
    CHECK(graph_verify(g));
  } else {
    CHECK(count_op(g, OP_PAD) == 1);
    CHECK(c->in[0] == p && c->win.pad_begin[0] == 1 && c->win.pad_end[1] == 1);
  }
  graph_free(g);
}

/* ------------------------------------------------------ fuse-activation */

static void test_activation(OpKind producer, OpKind act_op, bool extra_reader, bool expect,
                            Activation act, float alpha, float beta) {
  Graph *g = graph_new("act");
  Tensor *x = t_input(g, "x", shape(4, 1, 2, 3, 3));
  Tensor *y, *z;
  if (producer == OP_CONV) {
    y = t_value(g, "y", shape(4, 1, 2, 3, 3));
    z = t_value(g, "z", shape(4, 1, 2, 3, 3));
    n_conv(g, "p", x, t_const(g, "w", shape(4, 2, 2, 1, 1), -1, 1), NULL, y, 1, 0, 1);
  } else {
    Tensor *a = t_input(g, "a", shape(2, 2, 3));
    y = t_value(g, "y", shape(2, 2, 4));
    z = t_value(g, "z", shape(2, 2, 4));
    Tensor *in[2] = {a, t_const(g, "bm", shape(2, 3, 4), -1, 1)};
    n_add(g, OP_GEMM, "p", 2, in, 1, &y);
  }
  Node *a;
  if (act_op == OP_CLIP) {
    float lo = 0, hi = 6;
    Tensor *in[3] = {y, t_const_values(g, "lo", shape(0), &lo), t_const_values(g, "hi", shape(0), &hi)};
    a = n_add(g, OP_CLIP, "act", 3, in, 1, &z);
  } else {
    a = n_unary(g, act_op, "act", y, z);
    if (act_op == OP_LEAKY_RELU)
      node_set_attr(g, a, "alpha", ATTR_FLOAT)->f = 0.2f;
  }
  graph_add_output(g, z);
  if (extra_reader) {
    Tensor *r = t_value(g, "r", shape(y->rank, (int)y->dims[0], (int)y->dims[1], (int)y->dims[2], (int)y->dims[3]));
    n_unary(g, OP_SIGMOID, "other", y, r);
    graph_add_output(g, r);
  }
  ready(g);
  CHECK(pass_fuse_activation(g, &opt, pass_context_new(g, &opt)));
  Node *p = find_node(g, "p");
  if (expect) {
    CHECK(find_node(g, "act") == NULL);
    CHECK(p->out[0] == z && p->act == act && has_fused(p, "act"));
    CHECK(p->act_alpha == alpha && p->act_beta == beta);
  } else {
    CHECK(find_node(g, "act") != NULL && p->act == ACT_NONE && p->out[0] == y);
  }
  graph_free(g);
}

/* ------------------------------------------------------- fuse-residual */

static void test_residual(bool same_shape, bool relu) {
  Graph *g = graph_new("residual");
  Tensor *x = t_input(g, "x", shape(4, 1, 4, 3, 3));
  Tensor *zin = same_shape ? t_input(g, "z", shape(4, 1, 4, 3, 3)) : t_input(g, "z", shape(4, 1, 4, 1, 1));
  Tensor *y = t_value(g, "y", shape(4, 1, 4, 3, 3));
  Tensor *s = t_value(g, "s", shape(4, 1, 4, 3, 3));
  Tensor *r = t_value(g, "r", shape(4, 1, 4, 3, 3));
  n_conv(g, "conv", x, t_const(g, "w", shape(4, 4, 4, 1, 1), -1, 1), t_const(g, "b", shape(1, 4), -1, 1), y, 1, 0, 1);
  n_binary(g, OP_ADD, "add", zin, y, s);
  if (relu) {
    n_unary(g, OP_RELU, "relu", s, r);
    graph_add_output(g, r);
  } else {
    graph_add_output(g, s);
  }
  ready(g);
  CHECK(pass_fuse_residual(g, &opt, pass_context_new(g, &opt)));
  Node *conv = find_node(g, "conv");
  if (same_shape) {
    CHECK(count_op(g, OP_ADD) == 0 && count_op(g, OP_RELU) == 0);
    CHECK(conv->nin == 4 && conv->in[3] == zin && conv->in[2] && conv->in[2]->f32);
    CHECK(conv->out[0] == (relu ? r : s) && conv->act == (relu ? ACT_RELU : ACT_NONE));
    CHECK(has_fused(conv, "add") && (!relu || has_fused(conv, "relu")));
    CHECK(graph_verify(g));
  } else {
    CHECK(count_op(g, OP_ADD) == 1 && conv->out[0] == y && node_input(conv, 3) == NULL);
  }
  graph_free(g);
}

int main(void) {
  test_bn_conv(true);
  test_bn_conv(false);
  test_bn_not_folded(false);
  test_bn_not_folded(true);
  test_bn_gemm();
  test_bn_conv_transpose();

  test_bias(shape(4, 1, 4, 1, 1), true);
  test_bias(shape(3, 4, 1, 1), true);
  test_bias(shape(1, 4), false); /* broadcasts along W, not along channels */
  test_bias(shape(4, 1, 4, 4, 4), false);

  test_pad((PadCase){"constant", 0, {0, 0, 1, 2, 0, 0, 2, 1}, OP_CONV, .expect = true});
  test_pad((PadCase){"constant", 0, {0, 0, 1, 2, 0, 0, 2, 1}, OP_CONV, .old_opset = true, .expect = true});
  test_pad((PadCase){"reflect", 0, {0, 0, 1, 1, 0, 0, 1, 1}, OP_CONV, .expect = false});
  test_pad((PadCase){"edge", 0, {0, 0, 1, 1, 0, 0, 1, 1}, OP_CONV, .expect = false});
  test_pad((PadCase){"constant", 1.0f, {0, 0, 1, 1, 0, 0, 1, 1}, OP_CONV, .expect = false});
  test_pad((PadCase){"constant", 0, {0, 1, 1, 1, 0, 0, 1, 1}, OP_CONV, .expect = false});
  test_pad((PadCase){"constant", 0, {0, 0, 1, 1, 0, 0, 1, 1}, OP_CONV, .other_reader = true, .expect = false});
  test_pad((PadCase){"constant", 0, {0, 0, 1, 1, 0, 0, 1, 1}, OP_MAX_POOL, .expect = false});
  test_pad((PadCase){"constant", -INFINITY, {0, 0, 1, 1, 0, 0, 1, 1}, OP_MAX_POOL, .expect = true});
  test_pad((PadCase){"constant", 0, {0, 0, 1, 1, 0, 0, 1, 1}, OP_AVERAGE_POOL, .count_include_pad = false, .expect = false});
  test_pad((PadCase){"constant", 0, {0, 0, 1, 1, 0, 0, 1, 1}, OP_AVERAGE_POOL, .count_include_pad = true, .expect = true});

  test_activation(OP_CONV, OP_RELU, false, true, ACT_RELU, 0, 0);
  test_activation(OP_CONV, OP_CLIP, false, true, ACT_CLIP, 0, 6);
  test_activation(OP_CONV, OP_LEAKY_RELU, false, true, ACT_LEAKY_RELU, 0.2f, 0);
  test_activation(OP_GEMM, OP_SIGMOID, false, true, ACT_SIGMOID, 0, 0);
  test_activation(OP_GEMM, OP_TANH, false, true, ACT_TANH, 0, 0);
  test_activation(OP_CONV, OP_RELU, true, false, ACT_NONE, 0, 0);
  test_activation(OP_CONV, OP_EXP, false, false, ACT_NONE, 0, 0);

  test_residual(true, true);
  test_residual(true, false);
  test_residual(false, true);
  return test_finish("passes-fusion");
}
