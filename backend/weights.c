/*
 * weights.c - net.weights: every constant the program uses, in one file
 * that create() checks and copies to the device in one piece.
 *
 * Layout (all little-endian): a 64-byte header ("OPCW", u32 version 1,
 * u32 array count, u32 zero, u64 data bytes, zeros), the data, each array
 * in its own type (float32, int64, a float16's bits, a bool's byte, ...)
 * and starting on a 64-byte boundary, then the FNV-1a 64 hash of
 * the data bytes. The program knows each array's offset; the file only has
 * to prove it belongs to this program and arrived intact.
 *
 * emit_weights_loader() prints the code of net.c that reads this format:
 * from the file (or the linked-in copy) into pinned memory, checked, then
 * to the device.
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

/* The bits of a float16 holding `f`, which the IR has already rounded to a
   float16 value (ir/fold.c), so that dropping mantissa bits is exact. */
static uint16_t half_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  int exp = (int)((x >> 23) & 0xff) - 127;
  uint32_t mant = x & 0x7fffff;
  if (exp == 128) /* infinity or NaN */
    return sign | 0x7c00 | (mant ? 0x200 : 0);
  if (exp > 15)
    return sign | 0x7c00;
  if (exp >= -14)
    return sign | (uint16_t)((exp + 15) << 10) | (uint16_t)(mant >> 13);
  if (exp < -24)
    return sign;
  return sign | (uint16_t)((mant | 0x800000) >> (-1 - exp)); /* subnormal */
}

/* The bits of a bfloat16 holding `f`, already rounded to one by the IR:
   its top half, but a NaN whose payload sits in the low half stays NaN. */
static uint16_t bfloat16_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if (f != f)
    return (uint16_t)((x >> 16) | 0x40);
  return (uint16_t)(x >> 16);
}

/* Element i of a constant in its stored type, little-endian at p. */
static void put_element(unsigned char *p, const Weight *w, int64_t i) {
  const float *f = w->data;
  const int64_t *n = w->data;
  switch (w->dtype) {
  case DT_FLOAT: {
    uint32_t bits;
    memcpy(&bits, &f[i], 4);
    put_le(p, bits, 4);
    break;
  }
  case DT_DOUBLE: {
    double d = f[i];
    uint64_t bits;
    memcpy(&bits, &d, 8);
    put_le(p, bits, 8);
    break;
  }
  case DT_FLOAT16: put_le(p, half_bits(f[i]), 2); break;
  case DT_BFLOAT16: put_le(p, bfloat16_bits(f[i]), 2); break;
  case DT_BOOL: put_le(p, n[i] != 0, 1); break;
  default: put_le(p, (uint64_t)n[i], (int)dtype_size(w->dtype)); break;
  }
}

/* Writes one constant (and zero padding up to `padded` bytes), hashing it. */
static bool write_array(FILE *f, const Weight *w, int64_t padded, uint64_t *hash) {
  unsigned char chunk[4096];
  int64_t size = (int64_t)dtype_size(w->dtype), i = 0, written = 0;
  while (written < padded) {
    size_t used = 0;
    for (; i < w->count && used + (size_t)size <= sizeof chunk; i++, used += (size_t)size)
      put_element(chunk + used, w, i);
    if (i == w->count) /* the padding: zeros */
      for (; written + (int64_t)used < padded && used < sizeof chunk; used++)
        chunk[used] = 0;
    *hash = weights_hash(chunk, used, *hash);
    if (fwrite(chunk, 1, used, f) != used)
      return false;
    written += (int64_t)used;
  }
  return true;
}

/* One weights file: the arrays of `model` (every array when -1). */
static bool write_weights_file(Emitter *e, const char *path, int model, int count, int64_t bytes) {
  EmitState *st = e->st;
  FILE *f = fopen(path, "wb");
  if (!f) {
    opc_error("cannot write %s: %s", path, strerror(errno));
    return false;
  }
  unsigned char header[HEADER_BYTES] = {'O', 'P', 'C', 'W'};
  put_le(header + 4, WEIGHTS_VERSION, 4);
  put_le(header + 8, (uint64_t)count, 4);
  put_le(header + 16, (uint64_t)bytes, 8);
  bool ok = fwrite(header, 1, sizeof header, f) == sizeof header;
  uint64_t hash = 14695981039346656037ull;
  for (int i = 0; i < st->nweights && ok; i++) {
    const Weight *w = &st->weights[i];
    if (model >= 0 && w->model != model)
      continue;
    int64_t padded = (w->count * (int64_t)dtype_size(w->dtype) + 63) / 64 * 64;
    ok = write_array(f, w, padded, &hash);
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

bool write_weights(Emitter *e, const char *path) {
  return write_weights_file(e, path, -1, e->st->nweights, e->st->weight_bytes);
}

bool write_model_weights(Emitter *e, int model, const char *path) {
  return write_weights_file(e, path, model, e->st->model_nweights[model],
                            e->st->model_weight_bytes[model]);
}

/* --------------------------------------------------------- the loader */

/* The embedded weights: an assembler .incbin of each file, between two symbols. */
static void emit_incbin(Emitter *e, const char *label, const char *path) {
  const char *abs = absolute_path(e, path);
  emit(e, "__asm__(\".section .rodata\\n\"");
  emit(e, "        \".balign 64\\n\"");
  emit(e, "        \".globl %s_start\\n\"", label);
  emit(e, "        \"%s_start:\\n\"", label);
  emit(e, "        \".incbin \\\"%s\\\"\\n\"", emit_c_string(e, emit_c_string(e, abs)));
  emit(e, "        \".globl %s_end\\n\"", label);
  emit(e, "        \"%s_end:\\n\"", label);
  emit(e, "        \".previous\\n\");");
  emit(e, "extern const unsigned char %s_start[], %s_end[];", label, label);
}

/* A serving program's table of its models' weights files. */
static void emit_model_weights_table(Emitter *e) {
  EmitState *st = e->st;
  const ServeInfo *s = e->g->serve;
  emit(e, "enum { WEIGHTS_HEADER = 64 };");
  emit_open(e, "static const struct {");
  emit(e, "const char *file; /* as opc wrote it */");
  emit(e, "uint32_t count;   /* arrays */");
  emit(e, "uint64_t bytes;   /* data bytes */");
  emit_close(e, "} weights_info[MODEL_COUNT] = {");
  e->indent++;
  for (int m = 0; m < s->nmodels; m++)
    emit(e, "{\"%s\", %d, %lldULL},",
         emit_c_string(e, base_name(e, e->opt->model_weights_paths[m])), st->model_nweights[m],
         (long long)st->model_weight_bytes[m]);
  e->indent--;
  emit(e, "};");
  if (e->opt->embed_weights) {
    emit_blank(e);
    emit(e, "/* The weights are linked into the program, one file per model. */");
    for (int m = 0; m < s->nmodels; m++)
      emit_incbin(e, emit_str(e, "%s_weights_%d", e->prefix, m), e->opt->model_weights_paths[m]);
    emit(e, "static const unsigned char *const linked_weights[MODEL_COUNT][2] = {");
    for (int m = 0; m < s->nmodels; m++)
      emit(e, "  {%s_weights_%d_start, %s_weights_%d_end},", e->prefix, m, e->prefix, m);
    emit(e, "};");
  } else {
    const char *dir = absolute_path(e, e->opt->model_weights_paths[0]);
    const char *slash = strrchr(dir, '/');
    emit(e, "/* Where opc wrote them: what net_create() reads without a folder. */");
    emit(e, "static const char default_weights_dir[] = \"%s\";",
         emit_c_string(e, emit_str(e, "%.*s", (int)(slash ? slash - dir : 1), slash ? dir : ".")));
  }
}

void emit_weights_loader(Emitter *e) {
  EmitState *st = e->st;
  const char *p = e->prefix;
  bool serve = e->g->serve != NULL;
  int64_t bytes = st->weight_bytes;
  emit(e, "/*");
  if (serve)
    emit(e, " * Each model's weights file: a 64-byte header (\"OPCW\", then little-endian u32");
  else
    emit(e, " * %s: a 64-byte header (\"OPCW\", then little-endian u32 version 1,",
         base_name(e, e->opt->weights_path));
  bool all_float = true;
  for (int i = 0; i < st->nweights; i++)
    all_float &= st->weights[i].dtype == DT_FLOAT;
  if (serve) {
    emit(e, " * version 1, u32 array count, u64 data bytes), the data (%s, every",
         all_float ? "float32" : "each array in its own type");
    emit(e, " * array 64-byte aligned), then the FNV-1a 64 hash of the data (u64).");
  } else {
    emit(e, " * u32 array count, u64 data bytes), the data (%s, every array 64-byte",
         all_float ? "float32" : "each array in its own type");
    emit(e, " * aligned), then the FNV-1a 64 hash of the data (u64).");
  }
  emit(e, " */");
  if (serve) {
    emit_model_weights_table(e);
  } else {
    emit(e, "enum { WEIGHTS_HEADER = 64, WEIGHTS_COUNT = %d };", st->nweights);
    emit(e, "static const uint64_t weights_bytes = %lldULL;", (long long)bytes);
    if (e->opt->embed_weights) {
      emit_blank(e);
      emit(e, "/* The weights are linked into the program from %s. */",
           comment_text(e, absolute_path(e, e->opt->weights_path)));
      emit_incbin(e, emit_str(e, "%s_weights", p), e->opt->weights_path);
    } else {
      emit(e, "static const char default_weights_path[] = \"%s\";",
           emit_c_string(e, absolute_path(e, e->opt->weights_path)));
    }
  }
  /* Which file: a serving program's functions take the model. */
  const char *model_param = serve ? "int m, " : "";
  const char *count = serve ? "weights_info[m].count" : "WEIGHTS_COUNT";
  const char *nbytes = serve ? "weights_info[m].bytes" : "weights_bytes";
  const char *dst = serve ? "c->weights[m]" : "c->weights";
  emit_blank(e);
  emit(e, "static uint64_t read_u64(const unsigned char *p)");
  emit_open(e, "{");
  emit(e, "uint64_t v = 0;");
  emit(e, "for (int i = 7; i >= 0; i--)");
  emit(e, "  v = v << 8 | p[i];");
  emit(e, "return v;");
  emit_close(e, "}");
  emit_blank(e);
  emit(e, "/* Checks a weights image (in pinned memory) and copies its data to the device. */");
  emit(e, "static int upload_weights(%s_ctx *c, %sconst unsigned char *image, size_t size, const char *what)",
       p, model_param);
  emit_open(e, "{");
  emit(e, "uint64_t hash = 14695981039346656037ULL;");
  emit(e, "if (size != WEIGHTS_HEADER + %s + 8 || memcmp(image, \"OPCW\", 4) != 0 ||", nbytes);
  emit(e, "    read_u64(image + 4) != (1 | (uint64_t)%s << 32) ||", count);
  emit(e, "    read_u64(image + 16) != %s)", nbytes);
  emit_open(e, "{");
  emit(e, "snprintf(c->error, sizeof c->error, \"%%s: not the weights of this program\", what);");
  emit(e, "return -1;");
  emit_close(e, "}");
  emit(e, "for (uint64_t i = 0; i < %s; i++)", nbytes);
  emit(e, "  hash = (hash ^ image[WEIGHTS_HEADER + i]) * 1099511628211ULL;");
  emit(e, "if (hash != read_u64(image + WEIGHTS_HEADER + %s))", nbytes);
  emit_open(e, "{");
  emit(e, "snprintf(c->error, sizeof c->error, \"%%s: checksum mismatch, the file is damaged\", what);");
  emit(e, "return -1;");
  emit_close(e, "}");
  e->fail = "return -1";
  if (serve) {
    emit(e, "if (%s == 0)", nbytes);
    emit(e, "  return 0; /* a model without constants */");
  }
  emit_call(e, LIB_CUDA, NULL, "cudaMalloc((void **)&%s, %s)", dst, nbytes);
  emit(e, "/* The image is pinned memory, so this is a real asynchronous transfer; it");
  emit(e, "   finishes before returning, since the caller frees the image next. */");
  emit_call(e, LIB_CUDA, NULL,
            "cudaMemcpyAsync(%s, image + WEIGHTS_HEADER, %s, cudaMemcpyHostToDevice, c->stream[0])",
            dst, nbytes);
  emit_call(e, LIB_CUDA, NULL, "cudaStreamSynchronize(c->stream[0])");
  emit(e, "return 0;");
  emit_close(e, "}");
  emit_blank(e);
  emit(e, "/* Reads the weights file straight into pinned memory. */");
  emit(e, "static int load_weights(%s_ctx *c, %sconst char *path)", p, model_param);
  emit_open(e, "{");
  emit(e, "FILE *f = fopen(path, \"rb\");");
  emit(e, "unsigned char *image = NULL;");
  emit(e, "long size = -1;");
  emit(e, "int status = -1;");
  const char *cannot = serve ? "\"model '%s': cannot read weights file %s: %s\", model_info[m].name, path"
                             : "\"cannot read weights file %s: %s\", path";
  emit(e, "if (!f || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)");
  emit(e, "  snprintf(c->error, sizeof c->error, %s, strerror(errno));", cannot);
  emit(e, "else if (cuda_ok(c, cudaMallocHost((void **)&image, size > 0 ? (size_t)size : 1), \"cudaMallocHost\")) {");
  emit(e, "  if (fread(image, 1, (size_t)size, f) == (size_t)size)");
  emit(e, "    status = upload_weights(c, %simage, (size_t)size, path);", serve ? "m, " : "");
  emit(e, "  else");
  emit(e, "    snprintf(c->error, sizeof c->error, %s, strerror(errno));", cannot);
  emit(e, "}");
  emit(e, "cudaFreeHost(image);");
  emit(e, "if (f)");
  emit(e, "  fclose(f);");
  emit(e, "return status;");
  emit_close(e, "}");
  emit_blank(e);
  if (e->opt->embed_weights) {
    emit(e, "/* The linked-in weights, through pinned memory like a file's. */");
    emit(e, "static int upload_linked_weights(%s_ctx *c%s)", p, serve ? ", int m" : "");
    emit_open(e, "{");
    if (serve) {
      emit(e, "size_t size = (size_t)(linked_weights[m][1] - linked_weights[m][0]);");
    } else {
      emit(e, "size_t size = (size_t)(%s_weights_end - %s_weights_start);", p, p);
    }
    emit(e, "unsigned char *image = NULL;");
    emit(e, "int status = -1;");
    emit(e, "if (cuda_ok(c, cudaMallocHost((void **)&image, size > 0 ? size : 1), \"cudaMallocHost\")) {");
    if (serve) {
      emit(e, "  memcpy(image, linked_weights[m][0], size);");
      emit(e, "  status = upload_weights(c, m, image, size, \"linked-in weights\");");
    } else {
      emit(e, "  memcpy(image, %s_weights_start, size);", p);
      emit(e, "  status = upload_weights(c, image, size, \"linked-in weights\");");
    }
    emit(e, "}");
    emit(e, "cudaFreeHost(image);");
    emit(e, "return status;");
    emit_close(e, "}");
    emit_blank(e);
  }
}
