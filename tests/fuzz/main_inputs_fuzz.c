/*
 * main_inputs_fuzz.c - compiles the emitted program's input readers
 * (backend/main_inputs.c, the text that main_template.c embeds) as they
 * are, and feeds them fuzz inputs.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "main_inputs_fuzz.h"

/* Not every helper that main shares with the readers is used here. */
#pragma clang diagnostic ignored "-Wunused-function"
#include "../../backend/main_inputs.c"

enum { MAX_BYTES = 1 << 24 };

/* The expected type and shape at the start of the input; the number of
   bytes they take, or 0 when the input is too short or states a tensor
   larger than MAX_BYTES: in a program the shape comes from net.h, not
   from the file, so a huge one would test malloc, not the readers. */
static size_t read_expectation(const uint8_t *data, size_t size, Expected *x, long long *dims) {
  if (size < 2)
    return 0;
  x->type = data[0] % NUM_ELEMENT_TYPES;
  x->rank = data[1] % 9;
  size_t used = 2 + 2 * (size_t)x->rank;
  if (size < used)
    return 0;
  long long bytes = element_types[x->type].size;
  for (int i = 0; i < x->rank; i++) {
    dims[i] = data[2 + 2 * i] | data[3 + 2 * i] << 8;
    bytes *= dims[i];
    if (bytes > MAX_BYTES)
      return 0;
  }
  x->dims = dims;
  return used;
}

int fuzz_main_input(const uint8_t *data, size_t size, InputFormat format) {
  long long dims[8];
  Expected x = {.name = "x", .path = format == INPUT_NPY ? "x.npy" : "x.pb"};
  size_t used = read_expectation(data, size, &x, dims);
  if (!used)
    return 0;
  /* The buffer as main allocates it. */
  long long n = numel_of(x.rank, x.dims);
  void *out = malloc((size_t)n * (size_t)element_types[x.type].size + 1);
  if (!out)
    return 0;
  if (format == INPUT_NPY)
    parse_npy(data + used, size - used, &x, out);
  else
    parse_pb(data + used, size - used, &x, out);
  free(out);
  return 0;
}
