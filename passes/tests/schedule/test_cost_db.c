/*
 * test_cost_db.c - the measured costs of --cost-db and the key that finds
 * them (passes/cost_db.c).
 *
 * The key follows the format documented in passes.h: operator, input and
 * output types, window, activation, attributes in name order; node and
 * tensor names play no part. The file holds times per key; equal keys
 * count their median; a unit found there costs what was measured, any
 * other what the analytic model says. Ill-formed files are errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static Tensor *tensor(Graph *g, int rank, const int64_t *dims) {
  Tensor *t = graph_add_tensor(g, NULL);
  t->dtype = DT_FLOAT;
  tensor_set_shape(t, rank, dims);
  return t;
}

/* A 3x3 convolution, pads 1, ReLU, of 8 -> cout channels on 10x10. */
static Node *conv(Graph *g, const char *name, int64_t cout, int64_t stride) {
  int64_t xd[4] = {1, 8, 10, 10}, wd[4] = {cout, 8, 3, 3}, bd[1] = {cout};
  int64_t side = (10 + 2 - 3) / stride + 1;
  int64_t yd[4] = {1, cout, side, side};
  Node *n = graph_add_node(g, OP_CONV, name, 3, 1);
  n->in[0] = tensor(g, 4, xd);
  n->in[1] = tensor(g, 4, wd);
  n->in[2] = tensor(g, 1, bd);
  n->out[0] = tensor(g, 4, yd);
  n->win = (Window){.nspatial = 2, .kernel = {3, 3}, .stride = {stride, stride},
                    .dilation = {1, 1}, .pad_begin = {1, 1}, .pad_end = {1, 1}, .group = 1};
  n->act = OPC_ACT_RELU;
  return n;
}

/* Gemm 1x16 by 16x4 (transB: w is 4x16), attributes set in the given order. */
static Node *gemm(Graph *g, const char *name, bool alpha_first, int64_t trans_b) {
  int64_t ad[2] = {1, 16}, wd[2] = {4, 16}, yd[2] = {1, 4};
  Node *n = graph_add_node(g, OP_GEMM, name, 2, 1);
  n->in[0] = tensor(g, 2, ad);
  n->in[1] = tensor(g, 2, wd);
  n->out[0] = tensor(g, 2, yd);
  if (alpha_first)
    node_set_attr(g, n, "alpha", ATTR_FLOAT)->f = 0.5f;
  node_set_attr(g, n, "transB", ATTR_INT)->i = trans_b;
  if (!alpha_first)
    node_set_attr(g, n, "alpha", ATTR_FLOAT)->f = 0.5f;
  return n;
}

static const char *key(const Node *n) {
  static char buf[8][512]; /* a few keys alive at once, as printf arguments */
  static int next;
  char *b = buf[next++ % 8];
  unit_cost_key(n, b, 512);
  return b;
}

static void test_keys(Graph *g) {
  Node *a = conv(g, "branch_a", 4, 1), *b = conv(g, "branch_b", 4, 1);
  Node *strided = conv(g, "strided", 4, 2), *wider = conv(g, "wider", 6, 1);
  CHECK(strcmp(key(a), "Conv|f32[1,8,10,10],f32[4,8,3,3],f32[4]->f32[1,4,10,10]"
                       "|k=3x3|s=1x1|d=1x1|p=1,1,1,1|g=1|act=relu") == 0,
        "key %s", key(a));
  CHECK(strcmp(key(a), key(b)) == 0, "names matter: %s / %s", key(a), key(b));
  CHECK(strcmp(key(a), key(strided)) != 0, "stride ignored");
  CHECK(strcmp(key(a), key(wider)) != 0, "channels ignored");
  Node *plain = conv(g, "plain", 4, 1);
  plain->act = OPC_ACT_NONE;
  CHECK(strcmp(key(a), key(plain)) != 0, "activation ignored");
  Node *clip = conv(g, "clip", 4, 1);
  clip->act = OPC_ACT_CLIP;
  clip->act_alpha = 0;
  clip->act_beta = 6;
  CHECK(strstr(key(clip), "|act=clip(0,6)") != NULL, "clip: %s", key(clip));

  Node *g1 = gemm(g, "g1", true, 1), *g2 = gemm(g, "g2", false, 1), *g3 = gemm(g, "g3", true, 0);
  CHECK(strcmp(key(g1), "Gemm|f32[1,16],f32[4,16]->f32[1,4]|alpha=0.5|transB=1") == 0, "key %s",
        key(g1));
  CHECK(strcmp(key(g1), key(g2)) == 0, "attribute order matters: %s / %s", key(g1), key(g2));
  CHECK(strcmp(key(g1), key(g3)) != 0, "transB ignored");

  /* snprintf's contract: the whole length back, a terminated prefix written. */
  char small[8];
  int len = unit_cost_key(a, small, sizeof small);
  CHECK(len == (int)strlen(key(a)), "length %d, key %zu", len, strlen(key(a)));
  CHECK(strncmp(small, key(a), 7) == 0 && small[7] == '\0', "prefix '%s'", small);
  CHECK(unit_cost_key(a, NULL, 0) == len, "NULL buffer");
}

static const char *write_file(const char *text) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/opc_cost_db_%d.json", (int)getpid());
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

static void test_lookup(Graph *g) {
  Node *a = conv(g, "a", 4, 1), *strided = conv(g, "s", 4, 2), *gm = gemm(g, "gm", true, 1);
  char text[4096];
  /* Three times for the conv (median 20), two for the Gemm (median 2.5). */
  snprintf(text, sizeof text,
           "{\"format\": \"opc-profile-1\", \"device\": \"test\", \"units\": ["
           "{\"name\": \"x\", \"key\": \"%s\", \"us\": 30},"
           "{\"name\": \"y\", \"key\": \"%s\", \"us\": 10},"
           "{\"name\": \"z\", \"key\": \"%s\", \"us\": 20},"
           "{\"name\": \"u\", \"key\": \"%s\", \"us\": 4},"
           "{\"name\": \"v\", \"key\": \"%s\", \"us\": 1}]}",
           key(a), key(a), key(a), key(gm), key(gm));
  CostDb *db = cost_db_load(g->arena, write_file(text));
  CHECK(db && cost_db_size(db) == 2, "entries %d", cost_db_size(db));

  Device dev;
  if (!device_load("h100", &dev))
    exit(1);
  CostModel analytic, measured;
  cost_model_init(&analytic, &dev);
  cost_model_init(&measured, &dev);
  measured.db = db;
  double us = 0;
  CHECK(cost_db_lookup(db, a, &us) && us == 20, "conv: %g", us);
  CHECK(cost_node_us(&measured, g, a) == 20, "conv cost %g", cost_node_us(&measured, g, a));
  CHECK(cost_node_us(&measured, g, gm) == 2.5, "gemm cost %g", cost_node_us(&measured, g, gm));
  CHECK(!cost_db_lookup(db, strided, &us), "the strided conv is not in the file");
  CHECK(cost_node_us(&measured, g, strided) == cost_node_us(&analytic, g, strided) &&
            cost_node_us(&analytic, g, strided) > 0,
        "unmatched: %g, analytic %g", cost_node_us(&measured, g, strided),
        cost_node_us(&analytic, g, strided));
  CHECK(cost_occupancy(&measured, g, a) == cost_occupancy(&analytic, g, a),
        "occupancy stays analytic");
  /* The stage model sees the measured times: two 20 us convs in one group. */
  Node *pair[2] = {a, conv(g, "a2", 4, 1)};
  int same_group[2] = {0, 0};
  CHECK(cost_stage_us(&measured, g, pair, 2, same_group, 8) == 40, "stage %g",
        cost_stage_us(&measured, g, pair, 2, same_group, 8));
}

static void expect_rejected(Graph *g, const char *what, const char *text) {
  int before = ir_error_count();
  CostDb *db = cost_db_load(g->arena, text ? write_file(text) : "/nonexistent/opc.json");
  CHECK(!db && ir_error_count() == before + 1, "%s: accepted or not reported once", what);
}

static void test_errors(Graph *g) {
  expect_rejected(g, "missing file", NULL);
  expect_rejected(g, "not JSON", "{\"format\": ");
  expect_rejected(g, "no format", "{\"units\": []}");
  expect_rejected(g, "another format", "{\"format\": \"chrome-trace\", \"units\": []}");
  expect_rejected(g, "no units", "{\"format\": \"opc-profile-1\"}");
  expect_rejected(g, "unit not an object", "{\"format\": \"opc-profile-1\", \"units\": [3]}");
  expect_rejected(g, "no key", "{\"format\": \"opc-profile-1\", \"units\": [{\"us\": 3}]}");
  expect_rejected(g, "time a string",
                  "{\"format\": \"opc-profile-1\", \"units\": [{\"key\": \"k\", \"us\": \"3\"}]}");
  expect_rejected(g, "negative time",
                  "{\"format\": \"opc-profile-1\", \"units\": [{\"key\": \"k\", \"us\": -1}]}");
  CostDb *empty = cost_db_load(g->arena, write_file("{\"format\": \"opc-profile-1\", \"units\": []}"));
  CHECK(empty && cost_db_size(empty) == 0, "an empty profile is fine");
}

int main(void) {
  Graph *g = graph_new("test");
  test_keys(g);
  test_lookup(g);
  test_errors(g);
  char path[64];
  snprintf(path, sizeof path, "/tmp/opc_cost_db_%d.json", (int)getpid());
  remove(path);
  graph_free(g);
  if (failures)
    fprintf(stderr, "%d failures\n", failures);
  else
    printf("cost db: all checks passed\n");
  return failures ? 1 : 0;
}
