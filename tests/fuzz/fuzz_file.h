/* fuzz_file.h - for fuzz targets whose parser reads a path, not bytes. */
#ifndef OPC_FUZZ_FILE_H
#define OPC_FUZZ_FILE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Writes `size` bytes to the file `name` in a directory of this process's
 * own (created on first use, removed at exit) and returns its path.
 * Aborts if it cannot: a fuzzer that cannot write its input tests nothing.
 */
const char *fuzz_write_file(const char *name, const uint8_t *data, size_t size);

#endif
