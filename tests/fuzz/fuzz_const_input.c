/*
 * fuzz_const_input.c - libFuzzer target: the bytes as the file of
 * `opc --const-input NAME=FILE` (frontend/constinput.c): a .npy array or an
 * ONNX TensorProto, told apart by the .npy magic bytes, decoded into a
 * constant tensor. The compiler's readers, not the emitted program's.
 */
#include <stdlib.h>

#include "../../frontend/import.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Graph *g = graph_new("fuzz.onnx");
  Importer im = {.g = g, .dir = "."};
  ConstInput ci = {.name = "x", .path = fuzz_write_file("x.bin", data, size)};
  Tensor *t = graph_add_tensor(g, "x");
  const_input_load(&im, &ci, t);
  graph_free(g);
  return 0;
}
