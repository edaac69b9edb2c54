/*
 * test_pipeline.c - run_pipeline: a bad --dump-after name is an error before
 * anything runs; dumps appear after the named pass; -O0 skips the optional
 * passes; --stats prints the before/after table; verify-each passes on a
 * small ResNet-like block run through everything.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../pass.h"

static int test_failures;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      test_failures++;                                                       \
    }                                                                        \
  } while (0)

/* x -> conv -> bn -> relu -> conv2 (+x) -> relu -> out */
static Graph *resnet_block(void) {
  Graph *g = graph_parse("input %x: f32[1,4,6,6]\n"
                         "const %w1: f32[4,4,3,3] = random\n"
                         "const %g: f32[4] = [0.5,0.75,1.0,0.6]\n"
                         "const %b: f32[4] = random\n"
                         "const %m: f32[4] = random\n"
                         "const %v: f32[4] = [0.5,0.9,0.7,1.0]\n"
                         "const %w2: f32[4,4,3,3] = random\n"
                         "%y = Conv(%x, %w1) {kernel_shape=[3,3], pads=[1,1,1,1]} name=\"conv1\"\n"
                         "%z = BatchNormalization(%y, %g, %b, %m, %v) name=\"bn1\"\n"
                         "%a = Relu(%z) name=\"relu1\"\n"
                         "%c = Conv(%a, %w2) {kernel_shape=[3,3], pads=[1,1,1,1]} name=\"conv2\"\n"
                         "%s = Add(%c, %x) name=\"add\"\n"
                         "%out = Relu(%s) name=\"relu2\"\n"
                         "output %out\n",
                         "resnet_block");
  if (!g || !graph_toposort(g) || !graph_infer_shapes(g)) {
    fprintf(stderr, "the test graph does not load\n");
    exit(1);
  }
  return g;
}

static int count_op(const Graph *g, OpKind op) {
  int c = 0;
  for (int i = 0; i < g->nnodes; i++)
    c += !g->nodes[i]->dead && g->nodes[i]->op == op;
  return c;
}

static Node *find_node(const Graph *g, const char *name) {
  for (int i = 0; i < g->nnodes; i++)
    if (!g->nodes[i]->dead && strcmp(g->nodes[i]->name, name) == 0)
      return g->nodes[i];
  return NULL;
}

static char *read_all(FILE *f) {
  fflush(f);
  long n = ftell(f);
  char *s = calloc((size_t)n + 1, 1);
  rewind(f);
  if (fread(s, 1, (size_t)n, f) != (size_t)n)
    s[0] = 0;
  return s;
}

static void test_unknown_dump_name(void) {
  Graph *g = resnet_block();
  int errors = ir_error_count();
  PassOptions opt = {.opt_level = 1, .dump_after = "fuse-everything"};
  CHECK(!run_pipeline(g, &opt, pass_context_new(g, &opt)));
  CHECK(ir_error_count() == errors + 1);
  CHECK(count_op(g, OP_BATCH_NORM) == 1); /* nothing ran */
  graph_free(g);
}

static void test_dump_after(void) {
  Graph *g = resnet_block();
  FILE *f = tmpfile();
  PassOptions opt = {.opt_level = 1, .dump_after = "fuse-activation", .dump_file = f};
  CHECK(run_pipeline(g, &opt, pass_context_new(g, &opt)));
  char *text = read_all(f);
  CHECK(strstr(text, "# after fuse-activation\n") != NULL);
  CHECK(strstr(text, "# after fold-batchnorm") == NULL);
  free(text);
  fclose(f);
  graph_free(g);
}

static void test_full(int opt_level) {
  Graph *g = resnet_block();
  PassOptions opt = {.opt_level = opt_level, .verify_each = true};
  CHECK(run_pipeline(g, &opt, pass_context_new(g, &opt)));
  CHECK(g->sched.order != NULL && g->arena_bytes > 0);
  if (opt_level > 0) {
    /* bn1 and relu1 fold into conv1; add and relu2 into conv2. */
    CHECK(g->nnodes == 2 && count_op(g, OP_CONV) == 2);
    Node *conv2 = find_node(g, "conv2");
    CHECK(conv2 && conv2->act == OPC_ACT_RELU && node_input(conv2, 3) == g->inputs[0]);
    CHECK(conv2 && conv2->out[0] == g->outputs[0]);
    CHECK(find_node(g, "conv1")->act == OPC_ACT_RELU);
  } else {
    CHECK(g->nnodes == 6 && count_op(g, OP_BATCH_NORM) == 1);
  }
  graph_free(g);
}

static void test_stats(void) {
  Graph *g = resnet_block();
  FILE *f = tmpfile();
  fflush(stdout);
  int saved = dup(1);
  dup2(fileno(f), 1);
  PassOptions opt = {.opt_level = 1, .stats = true};
  PassContext *ctx = pass_context_new(g, &opt);
  bool ok = run_pipeline(g, &opt, ctx);
  if (ok)
    pipeline_print_stats(g, ctx); /* the driver prints it after the pipeline */
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  CHECK(ok);
  fseek(f, 0, SEEK_END);
  char *text = read_all(f);
  /* Six nodes before (2 Conv, 1 BN, 1 Add, 2 Relu), two Convs after. */
  CHECK(strstr(text, "operator") != NULL);
  char name[64];
  int before, after, rows = 0;
  bool saw_units = false, saw_relu = false, saw_total = false;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    if (strncmp(line, "schedule units", 14) == 0) {
      saw_units = sscanf(line + 14, "%d %d", &before, &after) == 2 && before == 6 && after == 2;
      continue;
    }
    if (strncmp(line, "total nodes", 11) == 0) {
      saw_total = sscanf(line + 11, "%d %d", &before, &after) == 2 && before == 6 && after == 2;
      continue;
    }
    if (sscanf(line, "%63s %d %d", name, &before, &after) != 3)
      continue;
    rows++;
    if (strcmp(name, "Relu") == 0)
      saw_relu = before == 2 && after == 0;
    if (strcmp(name, "Conv") == 0)
      CHECK(before == 2 && after == 2);
  }
  CHECK(saw_units && saw_relu && saw_total);
  CHECK(rows >= 4);
  free(text);
  fclose(f);
  graph_free(g);
}

int main(void) {
  test_unknown_dump_name();
  test_dump_after();
  test_full(1);
  test_full(0);
  test_stats();
  if (test_failures) {
    fprintf(stderr, "passes-pipeline: %d check(s) failed\n", test_failures);
    return 1;
  }
  printf("passes-pipeline: ok\n");
  return 0;
}
