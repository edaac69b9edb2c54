/* main_inputs_fuzz.h - the emitted program's input readers under libFuzzer. */
#ifndef OPC_MAIN_INPUTS_FUZZ_H
#define OPC_MAIN_INPUTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

typedef enum { INPUT_NPY, INPUT_PB } InputFormat;

/*
 * Runs the reader of `format` (parse_npy or parse_pb of
 * backend/main_inputs.c) on one fuzz input. The reader checks a file
 * against the type and shape that the program expects, so the input
 * states them first, then holds the file:
 *   byte 0: element type (index into element_types, modulo their number)
 *   byte 1: rank (modulo 9)
 *   then each dimension as 2 bytes, little-endian
 *   then the file's bytes.
 */
int fuzz_main_input(const uint8_t *data, size_t size, InputFormat format);

#endif
