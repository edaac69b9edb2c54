/*
 * weights.c - net.weights: every constant the program uses, in one file
 * that create() checks and copies to the device in one piece.
 *
 * Layout (all little-endian): a 64-byte header ("OPCW", u32 version 1,
 * u32 array count, u32 zero, u64 data bytes, zeros), the float32 data with
 * every array starting on a 64-byte boundary, then the FNV-1a 64 hash of
 * the data bytes. The program knows each array's offset; the file only has
 * to prove it belongs to this program and arrived intact.
 */
#include <errno.h>
#include <string.h>

#include "emit.h"

enum { HEADER_BYTES = 64, WEIGHTS_VERSION = 1 };

uint64_t weights_hash(const unsigned char *p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

/* Writes `count` floats (and zero padding up to `padded`), hashing them. */
static bool write_floats(FILE *f, const float *data, int64_t count, int64_t padded,
                         uint64_t *hash) {
  unsigned char chunk[4096];
  int64_t i = 0;
  while (i < padded) {
    size_t used = 0;
    for (; i < padded && used + 4 <= sizeof chunk; i++, used += 4) {
      uint32_t bits = 0;
      if (i < count)
        memcpy(&bits, &data[i], 4);
      put_le(chunk + used, bits, 4);
    }
    *hash = weights_hash(chunk, used, *hash);
    if (fwrite(chunk, 1, used, f) != used)
      return false;
  }
  return true;
}

bool write_weights(Emitter *e, const char *path) {
  EmitState *st = e->st;
  FILE *f = fopen(path, "wb");
  if (!f) {
    opc_error("cannot write %s: %s", path, strerror(errno));
    return false;
  }
  unsigned char header[HEADER_BYTES] = {'O', 'P', 'C', 'W'};
  put_le(header + 4, WEIGHTS_VERSION, 4);
  put_le(header + 8, (uint64_t)st->nweights, 4);
  put_le(header + 16, (uint64_t)st->weight_floats * 4, 8);
  bool ok = fwrite(header, 1, sizeof header, f) == sizeof header;
  uint64_t hash = 14695981039346656037ull;
  for (int i = 0; i < st->nweights && ok; i++) {
    const Weight *w = &st->weights[i];
    int64_t end = i + 1 < st->nweights ? st->weights[i + 1].offset : st->weight_floats;
    ok = write_floats(f, w->data, w->count, end - w->offset, &hash);
  }
  unsigned char trailer[8];
  put_le(trailer, hash, 8);
  ok = ok && fwrite(trailer, 1, sizeof trailer, f) == sizeof trailer;
  if (fclose(f) != 0)
    ok = false;
  if (!ok)
    opc_error("cannot write %s: %s", path, strerror(errno));
  return ok;
}
