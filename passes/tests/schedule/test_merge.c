/*
 * test_merge.c - IOS operator merge of sibling convolutions.
 *
 * Builds sibling convolutions on one input, merges them, and checks the
 * merged geometry (kernel, pads, channel offsets of the views) and, with a
 * naive reference convolution written here, that every original output is
 * reproduced exactly by its slice of the merged output.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../schedule.h"

static int failures;
#define CHECK(cond, ...)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      failures++;                                                                          \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);             \
      fprintf(stderr, __VA_ARGS__);                                                        \
      fprintf(stderr, "\n");                                                               \
    }                                                                                      \
  } while (0)

static double fixed_cost;
static double synth_cost(const Node *n) { return fixed_cost; }
static double synth_occ(const Node *n) { return 1; }

static CostModel model(double sibling_cost) {
  Device dev;
  if (!device_load("h100", &dev))
    exit(1);
  CostModel cm;
  cost_model_init(&cm, &dev);
  fixed_cost = sibling_cost;
  cm.node_cost = synth_cost;
  cm.node_occupancy = synth_occ;
  return cm;
}

static float lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static Tensor *tensor4(Graph *g, const char *name, int64_t a, int64_t b, int64_t c, int64_t d) {
  Tensor *t = graph_add_tensor(g, name);
  int64_t dims[4] = {a, b, c, d};
  t->dtype = DT_FLOAT;
  tensor_set_shape(t, 4, dims);
  return t;
}

/* A 2-D conv with kernel kh x kw, pads (top, left, bottom, right), stride 1. */
static Node *conv(Graph *g, Tensor *x, const char *name, int64_t cout, int kh, int kw, int pt,
                  int pl, int pb, int pr, uint32_t *seed) {
  int64_t cin = x->dims[1];
  Tensor *w = tensor4(g, NULL, cout, cin, kh, kw);
  w->f32 = arena_alloc(g->arena, sizeof(float) * (size_t)tensor_numel(w));
  for (int64_t i = 0; i < tensor_numel(w); i++)
    w->f32[i] = lcg(seed);
  Tensor *b = graph_add_tensor(g, NULL);
  b->dtype = DT_FLOAT;
  tensor_set_shape(b, 1, &cout);
  b->f32 = arena_alloc(g->arena, sizeof(float) * (size_t)cout);
  for (int64_t i = 0; i < cout; i++)
    b->f32[i] = lcg(seed);
  int64_t oh = x->dims[2] + pt + pb - kh + 1, ow = x->dims[3] + pl + pr - kw + 1;
  Node *n = graph_add_node(g, OP_CONV, name, 3, 1);
  n->in[0] = x;
  n->in[1] = w;
  n->in[2] = b;
  n->out[0] = tensor4(g, arena_printf(g->arena, "%s_y", name), 1, cout, oh, ow);
  n->win = (Window){.nspatial = 2, .kernel = {kh, kw}, .stride = {1, 1}, .dilation = {1, 1},
                    .pad_begin = {pt, pl}, .pad_end = {pb, pr}, .group = 1};
  n->act = OPC_ACT_RELU;
  return n;
}

/* y[o][i][j] = relu(b[o] + sum x[c][i*s - pt + a][j*s - pl + e] w[o][c][a][e]), batch 1. */
static void reference(const Tensor *x, const Tensor *w, const Tensor *b, const Window *win,
                      int64_t oh, int64_t ow, float *y) {
  int64_t cout = w->dims[0], cin = w->dims[1], kh = w->dims[2], kw = w->dims[3];
  int64_t h = x->dims[2], wd = x->dims[3];
  for (int64_t o = 0; o < cout; o++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++) {
        double acc = b ? b->f32[o] : 0;
        for (int64_t c = 0; c < cin; c++)
          for (int64_t a = 0; a < kh; a++)
            for (int64_t e = 0; e < kw; e++) {
              int64_t r = i * win->stride[0] - win->pad_begin[0] + a;
              int64_t q = j * win->stride[1] - win->pad_begin[1] + e;
              if (r >= 0 && r < h && q >= 0 && q < wd)
                acc += x->f32[(c * h + r) * wd + q] * w->f32[((o * cin + c) * kh + a) * kw + e];
            }
        y[(o * oh + i) * ow + j] = acc > 0 ? (float)acc : 0.0f;
      }
}

/* Builds siblings, remembers their reference outputs, merges, compares. */
static void check_merge(const char *what, int nsib, const int (*spec)[7], int64_t expect_k[2],
                        int64_t expect_pad[4]) {
  uint32_t seed = 12345;
  Graph *g = graph_new(what);
  g->opset = 13;
  Tensor *x = tensor4(g, "x", 1, 5, 7, 6);
  x->f32 = arena_alloc(g->arena, sizeof(float) * (size_t)tensor_numel(x));
  for (int64_t i = 0; i < tensor_numel(x); i++)
    x->f32[i] = lcg(&seed);
  graph_add_input(g, x);
  Node *sib[8];
  float *expect[8];
  Tensor *outs[8];
  for (int i = 0; i < nsib; i++) {
    const int *s = spec[i];
    char name[16];
    snprintf(name, sizeof name, "c%d", i);
    sib[i] = conv(g, x, name, s[0], s[1], s[2], s[3], s[4], s[5], s[6], &seed);
    Tensor *y = sib[i]->out[0];
    outs[i] = y;
    expect[i] = malloc(sizeof(float) * (size_t)tensor_numel(y));
    reference(x, sib[i]->in[1], sib[i]->in[2], &sib[i]->win, y->dims[2], y->dims[3], expect[i]);
    /* a consumer, so the outputs are not graph outputs */
    Node *r = graph_add_node(g, OP_RELU, NULL, 1, 1);
    r->in[0] = y;
    r->out[0] = tensor4(g, NULL, 1, y->dims[1], y->dims[2], y->dims[3]);
    graph_add_output(g, r->out[0]);
  }
  graph_rebuild_uses(g);
  CostModel cm = model(1000); /* siblings expensive: merging pays */
  int merged = 0;
  CHECK(merge_convs_with(g, &cm, 8, &merged), "%s: merge failed", what);
  CHECK(merged == 1, "%s: %d merges", what, merged);
  Node *m = NULL;
  int convs = 0;
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->op == OP_CONV) {
      m = g->nodes[i];
      convs++;
    }
  CHECK(convs == 1 && m, "%s: %d convolutions left", what, convs);
  if (!m || convs != 1)
    return;
  CHECK(m->win.kernel[0] == expect_k[0] && m->win.kernel[1] == expect_k[1],
        "%s: kernel %lldx%lld", what, (long long)m->win.kernel[0], (long long)m->win.kernel[1]);
  CHECK(m->win.pad_begin[0] == expect_pad[0] && m->win.pad_begin[1] == expect_pad[1] &&
            m->win.pad_end[0] == expect_pad[2] && m->win.pad_end[1] == expect_pad[3],
        "%s: pads %lld,%lld,%lld,%lld", what, (long long)m->win.pad_begin[0],
        (long long)m->win.pad_begin[1], (long long)m->win.pad_end[0],
        (long long)m->win.pad_end[1]);
  Tensor *y = m->out[0];
  int64_t oh = y->dims[2], ow = y->dims[3];
  float *got = malloc(sizeof(float) * (size_t)tensor_numel(y));
  reference(x, m->in[1], m->in[2], &m->win, oh, ow, got);
  int64_t offset = 0;
  for (int i = 0; i < nsib; i++) {
    Tensor *yi = outs[i];
    CHECK(yi->alias_of == y && yi->alias_offset == offset, "%s: output %d is at %lld", what, i,
          (long long)yi->alias_offset);
    CHECK(yi->dims[2] == oh && yi->dims[3] == ow, "%s: output %d dims changed", what, i);
    double err = 0;
    for (int64_t k = 0; k < tensor_numel(yi); k++)
      err = fmax(err, fabs(got[offset + k] - expect[i][k]));
    CHECK(err < 1e-5, "%s: output %d differs by %g", what, i, err);
    offset += tensor_numel(yi);
    free(expect[i]);
  }
  CHECK(y->dims[1] * oh * ow == offset, "%s: merged output has %lld elements", what,
        (long long)(y->dims[1] * oh * ow));
  free(got);
  graph_free(g);
}

static void test_geometry(void) {
  /* cout, kh, kw, pad top, left, bottom, right */
  const int one_by_three[][7] = {{4, 1, 3, 0, 1, 0, 1}, {3, 3, 1, 1, 0, 1, 0}};
  check_merge("1x3+3x1", 2, one_by_three, (int64_t[]){3, 3}, (int64_t[]){1, 1, 1, 1});
  const int one_and_three[][7] = {{2, 1, 1, 0, 0, 0, 0}, {6, 3, 3, 1, 1, 1, 1}};
  check_merge("1x1+3x3", 2, one_and_three, (int64_t[]){3, 3}, (int64_t[]){1, 1, 1, 1});
  const int three_ones[][7] = {{2, 1, 1, 0, 0, 0, 0}, {3, 1, 1, 0, 0, 0, 0}, {5, 1, 1, 0, 0, 0, 0}};
  check_merge("1x1 x3", 3, three_ones, (int64_t[]){1, 1}, (int64_t[]){0, 0, 0, 0});
}

/* Siblings that must not merge: pads that do not line up, a graph output,
   and a merge the cost model says does not pay. */
static void test_refusals(void) {
  uint32_t seed = 7;
  for (int which = 0; which < 3; which++) {
    Graph *g = graph_new("refuse");
    Tensor *x = tensor4(g, "x", 1, 4, 6, 6);
    graph_add_input(g, x);
    Node *a = conv(g, x, "a", 2, 1, 1, 0, 0, 0, 0, &seed), *b;
    if (which == 0) /* same 6x6 output, but a centred 1x1 needs pads (1,1,1,1) */
      b = conv(g, x, "b", 2, 3, 3, 2, 1, 0, 1, &seed);
    else
      b = conv(g, x, "b", 2, 1, 1, 0, 0, 0, 0, &seed);
    Node *sib[2] = {a, b};
    for (int i = 0; i < 2; i++) {
      if (which == 2) { /* graph outputs must keep their own buffers */
        graph_add_output(g, sib[i]->out[0]);
        continue;
      }
      Node *r = graph_add_node(g, OP_RELU, NULL, 1, 1);
      r->in[0] = sib[i]->out[0];
      r->out[0] = tensor4(g, NULL, 1, 2, 6, 6);
      graph_add_output(g, r->out[0]);
    }
    graph_rebuild_uses(g);
    CostModel cm = model(which == 1 ? 0.01 : 1000); /* 1: the merge does not pay */
    int merged = -1;
    CHECK(merge_convs_with(g, &cm, 8, &merged) && merged == 0, "case %d merged %d", which,
          merged);
    graph_free(g);
  }
  /* the control: the same pair with consumers and a paying merge does merge */
  Graph *g = graph_new("control");
  Tensor *x = tensor4(g, "x", 1, 4, 6, 6);
  graph_add_input(g, x);
  Node *sib[2] = {conv(g, x, "a", 2, 1, 1, 0, 0, 0, 0, &seed),
                  conv(g, x, "b", 2, 1, 1, 0, 0, 0, 0, &seed)};
  for (int i = 0; i < 2; i++) {
    Node *r = graph_add_node(g, OP_RELU, NULL, 1, 1);
    r->in[0] = sib[i]->out[0];
    r->out[0] = tensor4(g, NULL, 1, 2, 6, 6);
    graph_add_output(g, r->out[0]);
  }
  graph_rebuild_uses(g);
  CostModel cm = model(1000);
  int merged = -1;
  CHECK(merge_convs_with(g, &cm, 8, &merged) && merged == 1, "control merged %d", merged);
  graph_free(g);
}

int main(void) {
  test_geometry();
  test_refusals();
  if (failures)
    fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
