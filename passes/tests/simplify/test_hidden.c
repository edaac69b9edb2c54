/*
 * test_hidden.c - what a pass does that the IR text does not show, so that
 * the .ir cases (passes/tests/cases) cannot check it:
 *   - eliminate-dead drops the tensors nothing refers to from g->tensors
 *     and renumbers the rest (the dump never lists an unread constant);
 *   - plan-memory gives a view its storage's offset (the dump prints a
 *     view's place as @%base+OFFSET, not its own offset).
 */
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

int main(void) {
  test_dead_tensors();
  test_view_offset();
  if (failures) {
    fprintf(stderr, "passes-hidden: %d check(s) failed\n", failures);
    return 1;
  }
  printf("passes-hidden: ok\n");
  return 0;
}
