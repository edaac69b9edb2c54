/*
 * fuzz_ir.c - libFuzzer target: the bytes as `.ir` text (ir/parse.c, the
 * form of the pass tests), then what a pass test does with it: order the
 * nodes, infer shapes, verify and dump.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ir/ir.h"

static FILE *sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!sink && !(sink = fopen("/dev/null", "w")))
    abort();
  /* graph_parse takes a C string: the text ends at its first NUL. */
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = 0;
  Graph *g = graph_parse(text, "fuzz.ir");
  free(text);
  if (!g)
    return 0;
  if (graph_toposort(g) && graph_infer_shapes(g) && graph_verify(g))
    graph_dump(g, sink);
  graph_free(g);
  return 0;
}
