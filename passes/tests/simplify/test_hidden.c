/*
 * test_hidden.c - what a pass does that the IR text does not show, so that
 * the .ir cases (passes/tests/cases) cannot check it:
 *   - eliminate-dead drops the tensors nothing refers to from g->tensors
 *     and renumbers the rest (the dump never lists an unread constant);
 *   - plan-memory gives a view its storage's offset (the dump prints a
 *     view's place as @%base+OFFSET, not its own offset);
 *   - fold-batchnorm on a Conv without a bias: the new weights and the new
 *     bias are both named W_bn, so the dump cannot tell them apart
 *     (fold-batchnorm-group-bias.ir covers the Conv with a bias).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../pass.h"

static int failures;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                            \
    }                                                                        \
  } while (0)

static PassOptions opt = {.opt_level = 1};

/* The graph as the runner of the .ir cases prepares it. */
static Graph *load(const char *text) {
  Graph *g = graph_parse(text, "test_hidden");
  if (!g || !graph_toposort(g) || !graph_infer_shapes(g)) {
    fprintf(stderr, "test graph does not load:\n%s", text);
    failures++;
    graph_free(g);
    return NULL;
  }
  return g;
}

static Node *find_node(Graph *g, const char *name) {
  for (int i = 0; i < g->nnodes; i++)
    if (!g->nodes[i]->dead && strcmp(g->nodes[i]->name, name) == 0)
      return g->nodes[i];
  return NULL;
}

static void test_dead_tensors(void) {
  Graph *g = load("input %x: f32[1,4]\n"
                  "input %unused_input: f32[1,4]\n"
                  "const %k: f32[1,4] = random\n"
                  "const %orphan: f32[1,4] = random\n"
                  "%y = Add(%x, %k) name=\"used\"\n"
                  "%a = Relu(%x) name=\"dead1\"\n"
                  "%b = Sigmoid(%a) name=\"dead2\"\n"
                  "%c = Mul(%b, %k) name=\"dead3\"\n"
                  "output %y\n");
  if (!g)
    return;
  CHECK(pass_eliminate_dead(g, &opt, pass_context_new(g, &opt)));
  CHECK(g->nnodes == 1 && g->nodes[0]->op == OP_ADD);
  bool orphan = false, k = false, unused = false;
  for (int i = 0; i < g->ntensors; i++) {
    CHECK(g->tensors[i]->id == i);
    orphan |= strcmp(g->tensors[i]->name, "orphan") == 0;
    k |= strcmp(g->tensors[i]->name, "k") == 0;
    unused |= strcmp(g->tensors[i]->name, "unused_input") == 0;
  }
  CHECK(!orphan && k && unused && g->ninputs == 2);
  CHECK(g->ntensors == 4); /* x, unused_input, k, y */
  CHECK(graph_verify(g));
  graph_free(g);
}

static void test_view_offset(void) {
  Graph *g = load("input %x: f32[1,64]\n"
                  "const %shape: i64[2] = [8,8]\n"
                  "%t1 = Relu(%x) name=\"t1\" .issue=0\n"
                  "%v: f32[8,8] @%t1+0 = Reshape(%t1, %shape) name=\"v\" .view\n"
                  "%t2 = Relu(%v) name=\"t2\" .issue=1\n"
                  "output %t2\n");
  if (!g)
    return;
  CHECK(pass_plan_memory(g, &opt, pass_context_new(g, &opt)));
  Tensor *t1 = graph_find_tensor(g, "t1"), *v = graph_find_tensor(g, "v");
  CHECK(t1->offset > 0 && v->offset == t1->offset);
  graph_free(g);
}

/* Conv (group 2, no bias) then BN: W'[m] = W[m]·s[m], b'[m] = bias[m] − s[m]·mean[m]. */
static void test_bn_conv_no_bias(void) {
  Graph *g = load("input %x: f32[1,4,5,5]\n"
                  "const %w: f32[6,2,3,3] = random\n"
                  "const %bn_scale: f32[6] = [1.0,-0.5,0.75,2.0,-1.0,0.25]\n"
                  "const %bn_bias: f32[6] = [0.5,0.25,-0.5,0.0,1.0,-1.0]\n"
                  "const %bn_mean: f32[6] = [0.2,-0.4,0.6,-0.8,0.0,0.5]\n"
                  "const %bn_var: f32[6] = [0.249,1.999,0.999,0.2,0.5,1.5]\n"
                  "%y = Conv(%x, %w) {kernel_shape=[3,3], pads=[1,1,1,1], group=2} name=\"conv\"\n"
                  "%z = BatchNormalization(%y, %bn_scale, %bn_bias, %bn_mean, %bn_var) "
                  "{epsilon=0.001} name=\"bn\"\n"
                  "output %z\n");
  if (!g)
    return;
  const float *w = graph_find_tensor(g, "w")->f32;
  const float *scale = graph_find_tensor(g, "bn_scale")->f32;
  const float *bias = graph_find_tensor(g, "bn_bias")->f32;
  const float *mean = graph_find_tensor(g, "bn_mean")->f32;
  const float *var = graph_find_tensor(g, "bn_var")->f32;
  CHECK(pass_fold_batchnorm(g, &opt, pass_context_new(g, &opt)));
  Node *conv = find_node(g, "conv");
  CHECK(conv && !find_node(g, "bn") && conv->out[0] == g->outputs[0]);
  if (!conv || conv->nin < 3 || !conv->in[2] || !conv->in[2]->f32) {
    CHECK(!"the Conv has a constant bias");
    graph_free(g);
    return;
  }
  const float *w2 = conv->in[1]->f32, *b2 = conv->in[2]->f32;
  CHECK(conv->in[1] != conv->in[2] && tensor_numel(conv->in[2]) == 6);
  float worst = 0;
  for (int m = 0; m < 6; m++) {
    double s = scale[m] / sqrt((double)var[m] + 1e-3);
    worst = fmaxf(worst, (float)fabs(b2[m] - (bias[m] - s * mean[m])));
    for (int i = 0; i < 18; i++)
      worst = fmaxf(worst, (float)fabs(w2[m * 18 + i] - w[m * 18 + i] * s));
  }
  CHECK(worst < 1e-5f);
  CHECK(graph_verify(g));
  graph_free(g);
}

int main(void) {
  test_dead_tensors();
  test_view_offset();
  test_bn_conv_no_bias();
  if (failures) {
    fprintf(stderr, "passes-hidden: %d check(s) failed\n", failures);
    return 1;
  }
  printf("passes-hidden: ok\n");
  return 0;
}
