/*
 * fuzz_const_input.c - libFuzzer target: the bytes as the file of
 * `opc --const-input NAME=FILE` (frontend/constinput.c): a .npy array or an
 * ONNX TensorProto, told apart by the .npy magic bytes, decoded into a
 * constant tensor; then the same bytes as the file bound to a sequence
 * input (a SequenceProto) and to an optional of a tensor and of a sequence
 * (an OptionalProto), each in a graph of its own. The compiler's readers,
 * not the emitted program's.
 */
#include <stdlib.h>

#include "../../frontend/import.h"
#include "fuzz_file.h"

static void load_tensor(const char *path) {
  Graph *g = graph_new("fuzz.onnx");
  Importer im = {.g = g, .dir = "."};
  ConstInput ci = {.name = "x", .path = path};
  const_input_load(&im, &ci, graph_add_tensor(g, "x"));
  graph_free(g);
}

static void load_list(const char *path, bool optional, bool of_seq) {
  Graph *g = graph_new("fuzz.onnx");
  Importer im = {.g = g, .dir = "."};
  ConstInput ci = {.name = "x", .path = path};
  bool present;
  int n;
  Tensor **items;
  const_input_load_list(&im, &ci, optional, of_seq, &present, &n, &items);
  graph_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_write_file("x.bin", data, size);
  load_tensor(path);
  load_list(path, false, false);
  load_list(path, true, false);
  load_list(path, true, true);
  return 0;
}
