/* fuzz_pb.c - libFuzzer target: the emitted program's ONNX TensorProto
   reader (parse_pb, backend/main_inputs.c); input format in
   main_inputs_fuzz.h. */
#include "main_inputs_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzz_main_input(data, size, INPUT_PB);
}
