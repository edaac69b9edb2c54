/* fuzz_npy.c - libFuzzer target: the emitted program's .npy reader
   (parse_npy, backend/main_inputs.c); input format in main_inputs_fuzz.h. */
#include "main_inputs_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzz_main_input(data, size, INPUT_NPY);
}
