/*
 * fuzz_onnx.c - libFuzzer target: the bytes as an ONNX model file, through
 * what `opc --dump-ir` does: the importer (protobuf decoding, lowering,
 * initializers, constant folding of shape arithmetic, shape inference),
 * the IR verifier and the dump; then, for the models that get that far,
 * the default pass pipeline (simplification, fusion, memory planning,
 * scheduling), since these tiny graphs make it cheap. A bad model must be
 * reported, never crash.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../../frontend/frontend.h"
#include "../../passes/passes.h"
#include "fuzz_file.h"

static FILE *sink;

static void compile(Graph *g) {
  PassOptions opt = {.opt_level = 1, .dump_file = sink};
  PassContext *ctx = pass_context_new(g, &opt);
  run_pipeline(g, &opt, ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!sink && !(sink = fopen("/dev/null", "w")))
    abort();
  Graph *g = onnx_import(fuzz_write_file("model.onnx", data, size), NULL);
  if (!g)
    return 0;
  if (graph_verify(g)) {
    graph_dump(g, sink);
    compile(g);
  }
  graph_free(g);
  return 0;
}
