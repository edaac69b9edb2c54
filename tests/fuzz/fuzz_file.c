/* fuzz_file.c - the input of one run as a file, for path-taking parsers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_file.h"

static char dir[64];
static char path[128];

static void remove_dir(void) {
  remove(path);
  rmdir(dir);
}

/* A directory of its own, so that relative references in an input (an
   ONNX model's external data) find nothing but the input itself. */
static void make_dir(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/opc-fuzz-XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    perror("fuzz: mkdtemp");
    abort();
  }
  atexit(remove_dir);
}

const char *fuzz_write_file(const char *name, const uint8_t *data, size_t size) {
  if (!dir[0])
    make_dir();
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
    perror("fuzz: writing the input file");
    abort();
  }
  return path;
}
