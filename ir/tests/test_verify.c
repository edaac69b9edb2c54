/*
 * test_verify.c - the verifier accepts a sound graph and catches each kind
 * of breakage, with an error, without changing the graph.
 */
#include <stdlib.h>

#include "check.h"

static char *dump_to_string(Graph *g) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  graph_dump(g, f);
  fclose(f);
  return buf;
}

/* Verifies; checks that the graph is left as it was. */
static bool verifies(Graph *g) {
  char *before = dump_to_string(g);
  bool ok = graph_verify(g);
  char *after = dump_to_string(g);
  CHECK(strcmp(before, after) == 0);
  free(before);
  free(after);
  return ok;
}

/* Whether the verifier rejects this graph with at least one error. */
static bool rejected(const char *text) {
  Graph *g = parse(text);
  if (!g)
    return false;
  int before = ir_error_count();
  bool ok = verifies(g);
  graph_free(g);
  return !ok && ir_error_count() > before;
}

static const char sound[] = "graph \"t\" opset 13\n"
                            "input %x: f32[1,4,8,8]\n"
                            "const %w: f32[4,4,1,1] = random\n"
                            "const %shape: i64[2] = [1,-1]\n"
                            "%c: f32[1,4,8,8] = Conv(%x, %w)\n"
                            "%a: f32[1,2,8,8] @%c+0, %b: f32[1,2,8,8] @%c+128 = Split(%c) "
                            "{axis=1} .view\n"
                            "%r: f32[1,128] = Reshape(%b, %shape)\n"
                            "%s: f32[1,2,8,8] = Add(%a, %a)\n"
                            "output %r\noutput %s\n";

static void test_sound(void) {
  Graph *g = parse(sound);
  CHECK(g && verifies(g));
  graph_free(g);
  /* after inference too (which adds windows and folds nothing here) */
  g = parse(sound);
  CHECK(g && graph_infer_shapes(g) && verifies(g));
  graph_free(g);
}

static void test_broken(void) {
  /* a cycle */
  CHECK(rejected("input %x: f32[2]\n%b: f32[2] = Add(%x, %c)\n%c: f32[2] = Relu(%b)\n"
                 "output %c\n"));
  /* an input nothing defines */
  CHECK(rejected("input %x: f32[2]\n%y: f32[2] = Add(%x, %u)\noutput %y\n"));
  /* two nodes write one tensor */
  CHECK(rejected("input %x: f32[2]\n%y: f32[2] = Relu(%x)\n%y: f32[2] = Neg(%x)\n"
                 "output %y\n"));
  /* a node writes a graph input */
  CHECK(rejected("input %x: f32[2]\n%x: f32[2] = Relu(%x)\noutput %x\n"));
  /* read before written, no cycle (the node order is wrong) */
  CHECK(rejected("input %x: f32[2]\n%z: f32[2] = Neg(%y)\n%y: f32[2] = Relu(%x)\n"
                 "output %z\n"));
  /* a graph output nothing defines */
  CHECK(rejected("input %x: f32[2]\n%y: f32[2] = Relu(%x)\noutput %nothing\n"));
  /* declared shapes that the inputs do not give */
  CHECK(rejected("input %x: f32[2,2]\n%y: f32[1,2] = Relu(%x)\noutput %y\n"));
  CHECK(rejected("input %x: f32[2,2]\n%y: i64[2,2] = Relu(%x)\noutput %y\n"));
  CHECK(rejected("graph \"t\" opset 13\ninput %x: f32[1,1,5,5]\n"
                 "const %w: f32[2,1,3,3] = random\n"
                 "%y: f32[1,2,5,5] = Conv(%x, %w)\noutput %y\n"));
  /* wrong arity */
  CHECK(rejected("input %x: f32[2]\n%y: f32[2] = Add(%x)\noutput %y\n"));
  /* views: past the end of the storage, a view of a view, differing dtype */
  CHECK(rejected("input %x: f32[1,4,2,2]\n"
                 "%c: f32[1,4,2,2] = Relu(%x)\n"
                 "%a: f32[1,2,2,2] @%c+12, %b: f32[1,2,2,2] @%c+8 = Split(%c) {axis=1} .view\n"
                 "output %a\noutput %b\n"));
  CHECK(rejected("input %x: f32[1,4,2,2]\n"
                 "%c: f32[1,4,2,2] = Relu(%x)\n"
                 "%a: f32[1,2,2,2] @%c+0, %b: f32[1,2,2,2] @%a+4 = Split(%c) {axis=1} .view\n"
                 "output %a\noutput %b\n"));
  /* strides that step past the end: elements 0 and 4 of 4 */
  CHECK(rejected("input %x: f32[4]\n%c: f32[4] = Relu(%x)\n"
                 "%v: f32[2] @%c+0:[4], %w: f32[2] @%c+2 = Split(%c) .view\noutput %v\n"));
}

static void test_dead(void) {
  /* a live node reads what only a dead node writes */
  Graph *g = parse("input %x: f32[2]\n%y: f32[2] = Relu(%x)\n%z: f32[2] = Neg(%y)\n"
                   "output %z\n");
  CHECK(g && verifies(g));
  if (!g)
    return;
  g->nodes[0]->dead = true;
  int before = ir_error_count();
  CHECK(!verifies(g) && ir_error_count() > before);
  /* with the reader dead as well, only the graph output is missing */
  g->nodes[1]->dead = true;
  before = ir_error_count();
  CHECK(!verifies(g) && one_error(before));
  graph_free(g);
}

int main(void) {
  test_sound();
  test_broken();
  test_dead();
  return finish("test_verify");
}
