/*
 * main_inputs.c - how an emitted program reads its input files (.npy and
 * ONNX TensorProto .pb), with the small helpers that main_template.c shares.
 * embed_text.py puts these lines where main_template.c includes this file,
 * without this comment, so emitted programs carry them as text; the fuzz
 * targets (tests/fuzz) compile the file itself. Needs <errno.h>, <stdint.h>,
 * <stdio.h>, <stdlib.h> and <string.h>, which the emitted prelude includes.
 */

static long long numel_of(int rank, const long long *dims)
{
  long long n = 1;
  for (int i = 0; i < rank; i++)
    n *= dims[i];
  return n;
}

static void print_shape(FILE *f, int rank, const long long *dims)
{
  fputc('[', f);
  for (int i = 0; i < rank; i++)
    fprintf(f, "%s%lld", i ? "," : "", dims[i]);
  fputc(']', f);
}

/* splitmix64: a fixed, portable sequence for a given seed. */
static uint64_t next_random(uint64_t *state)
{
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static unsigned char *read_whole_file(const char *path, size_t *size)
{
  FILE *f = fopen(path, "rb");
  unsigned char *data = NULL;
  long len = -1;
  if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (data = malloc(len > 0 ? (size_t)len : 1)) != NULL && fread(data, 1, (size_t)len, f) == (size_t)len) {
    *size = (size_t)len;
  } else {
    fprintf(stderr, "net: cannot read %s: %s\n", path, strerror(errno));
    free(data);
    data = NULL;
  }
  if (f)
    fclose(f);
  return data;
}

/* The element types of inputs and outputs: ONNX's name and number, the
   short name of the summary line, and numpy's descr. */
static const struct {
  const char *name, *short_name, *descr;
  int onnx, size;
} element_types[] = {
    {"float32", "f32", "<f4", 1, 4}, {"float64", "f64", "<f8", 11, 8},
    {"float16", "f16", "<f2", 10, 2}, {"int64", "i64", "<i8", 7, 8},
    {"int32", "i32", "<i4", 6, 4},   {"int16", "i16", "<i2", 5, 2},
    {"int8", "i8", "|i1", 3, 1},     {"uint64", "u64", "<u8", 13, 8},
    {"uint32", "u32", "<u4", 12, 4}, {"uint16", "u16", "<u2", 4, 2},
    {"uint8", "u8", "|u1", 2, 1},    {"bool", "bool", "|b1", 9, 1},
    /* numpy has no bfloat16: its bits, as onnx's numpy_helper gives them */
    {"bfloat16", "bf16", "<u2", 16, 2},
};
enum { NUM_ELEMENT_TYPES = sizeof element_types / sizeof element_types[0] };

static int element_type(const char *name)
{
  for (int k = 0; k < NUM_ELEMENT_TYPES; k++)
    if (strcmp(element_types[k].name, name) == 0)
      return k;
  return -1;
}

/* What an input must be, for reading it and for messages. */
typedef struct {
  const char *name, *path;
  int type, rank;
  const long long *dims;
} Expected;

static int shape_mismatch(const Expected *x, int got_rank, const long long *got)
{
  fprintf(stderr, "net: input '%s' (%s): shape ", x->name, x->path);
  print_shape(stderr, got_rank, got);
  fprintf(stderr, ", expected ");
  print_shape(stderr, x->rank, x->dims);
  fputc('\n', stderr);
  return -1;
}

static int type_mismatch(const Expected *x, const char *got)
{
  fprintf(stderr, "net: input '%s' (%s): data type %s, expected %s\n", x->name, x->path, got,
          element_types[x->type].name);
  return -1;
}

static int same_shape(int rank, const long long *dims, int got_rank, const long long *got)
{
  if (rank != got_rank)
    return 0;
  for (int i = 0; i < rank; i++)
    if (dims[i] != got[i])
      return 0;
  return 1;
}

/* A .npy descr: numpy writes '|' for one-byte types, '<' or '=' also mean
   little-endian here. */
static int same_descr(const char *want, const char *got)
{
  return strcmp(want + 1, got + 1) == 0 && (got[0] == want[0] || got[0] == '<' || got[0] == '=' ||
                                            (got[0] == '|' && want[0] == '|'));
}

/* The element values are copied as they are: the host is little-endian. */
static void copy_elements(void *out, const unsigned char *data, const Expected *x)
{
  size_t bytes = (size_t)numel_of(x->rank, x->dims) * (size_t)element_types[x->type].size;
  memcpy(out, data, bytes);
  if (strcmp(element_types[x->type].name, "bool") == 0) /* any nonzero byte is true */
    for (size_t i = 0; i < bytes; i++)
      ((unsigned char *)out)[i] = ((unsigned char *)out)[i] != 0;
}

/* .npy, versions 1 to 3: magic, version, header length, a Python dict. */
static int parse_npy(const unsigned char *p, size_t size, const Expected *x, void *out)
{
  size_t header_len, start;
  if (size < 10 || memcmp(p, "\x93NUMPY", 6) != 0) {
    fprintf(stderr, "net: %s: not a .npy file\n", x->path);
    return -1;
  }
  if (p[6] == 1) {
    header_len = (size_t)p[8] | (size_t)p[9] << 8;
    start = 10;
  } else {
    if (size < 12) {
      fprintf(stderr, "net: %s: truncated .npy header\n", x->path);
      return -1;
    }
    header_len = (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24;
    start = 12;
  }
  if (start + header_len > size || header_len > 4096) {
    fprintf(stderr, "net: %s: truncated .npy header\n", x->path);
    return -1;
  }
  char header[4097];
  memcpy(header, p + start, header_len);
  header[header_len] = 0;
  const char *d = strstr(header, "'descr': '");
  char descr[16] = "";
  if (d) {
    d += strlen("'descr': '");
    size_t len = strcspn(d, "'");
    if (len < sizeof descr)
      memcpy(descr, d, len), descr[len] = 0;
  }
  if (!same_descr(element_types[x->type].descr, descr)) {
    for (int k = 0; k < NUM_ELEMENT_TYPES; k++)
      if (same_descr(element_types[k].descr, descr))
        return type_mismatch(x, element_types[k].name);
    char got[32];
    snprintf(got, sizeof got, "'%s'", descr);
    return type_mismatch(x, got);
  }
  if (!strstr(header, "'fortran_order': False")) {
    fprintf(stderr, "net: %s: expected data in C order\n", x->path);
    return -1;
  }
  const char *s = strstr(header, "'shape': (");
  if (!s) {
    fprintf(stderr, "net: %s: no shape in the .npy header\n", x->path);
    return -1;
  }
  s += strlen("'shape': (");
  long long got[8];
  int got_rank = 0;
  while (*s && *s != ')') {
    char *end;
    long long dim = strtoll(s, &end, 10);
    if (end == s)
      break;
    if (got_rank == 8) {
      fprintf(stderr, "net: %s: too many dimensions\n", x->path);
      return -1;
    }
    got[got_rank++] = dim;
    s = end;
    while (*s == ',' || *s == ' ')
      s++;
  }
  if (!same_shape(x->rank, x->dims, got_rank, got))
    return shape_mismatch(x, got_rank, got);
  long long n = numel_of(x->rank, x->dims);
  if (size - start - header_len < (size_t)n * (size_t)element_types[x->type].size) {
    fprintf(stderr, "net: %s: truncated data\n", x->path);
    return -1;
  }
  copy_elements(out, p + start + header_len, x);
  return 0;
}

/* A protobuf varint; 0 at the end of the buffer or on a malformed one. */
static int read_varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
  *v = 0;
  for (int shift = 0; *p < end && shift < 64; shift += 7) {
    unsigned char b = *(*p)++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80))
      return 1;
  }
  return 0;
}

/* The typed fields of a TensorProto and the element types they hold:
   float_data (4) float32, int32_data (5) int32, int16, int8, uint16,
   uint8, bool and float16's and bfloat16's bits, int64_data (7) int64, double_data (10)
   float64, uint64_data (11) uint32 and uint64. */
static int field_holds(int field, const char *type)
{
  switch (field) {
  case 4: return strcmp(type, "float32") == 0;
  case 5: return strcmp(type, "int32") == 0 || strcmp(type, "int16") == 0 ||
                 strcmp(type, "int8") == 0 || strcmp(type, "uint16") == 0 ||
                 strcmp(type, "uint8") == 0 || strcmp(type, "bool") == 0 ||
                 strcmp(type, "float16") == 0 || strcmp(type, "bfloat16") == 0;
  case 7: return strcmp(type, "int64") == 0;
  case 10: return strcmp(type, "float64") == 0;
  case 11: return strcmp(type, "uint32") == 0 || strcmp(type, "uint64") == 0;
  default: return 0;
  }
}

/* Value k of a typed field into element k: its low bytes (little-endian). */
static void store_value(void *out, const Expected *x, long long k, uint64_t v)
{
  int size = element_types[x->type].size;
  if (strcmp(element_types[x->type].name, "bool") == 0)
    v = v != 0;
  for (int b = 0; b < size; b++)
    ((unsigned char *)out)[k * size + b] = (unsigned char)(v >> (8 * b));
}

static uint64_t le_bits(const unsigned char *p, int bytes)
{
  uint64_t v = 0;
  for (int b = bytes - 1; b >= 0; b--)
    v = v << 8 | p[b];
  return v;
}

/* One value of a typed field: varint, or fixed 4 or 8 bytes. */
static int next_value(const unsigned char **q, const unsigned char *end, int wire, uint64_t *v)
{
  int bytes = wire == 5 ? 4 : wire == 1 ? 8 : 0;
  if (!bytes)
    return read_varint(q, end, v);
  if (end - *q < bytes)
    return 0;
  *v = le_bits(*q, bytes);
  *q += bytes;
  return 1;
}

/* The wire type of a typed field's packed values. */
static int packed_wire(int field)
{
  return field == 4 ? 5 : field == 10 ? 1 : 0;
}

/* ONNX TensorProto: dims (1), data_type (2), typed data (4, 5, 7, 10, 11), raw_data (9). */
static int parse_pb(const unsigned char *p, size_t size, const Expected *x, void *out)
{
  const unsigned char *end = p + size, *raw = NULL;
  size_t raw_len = 0;
  long long got[8], n = numel_of(x->rank, x->dims), nvalues = 0;
  int got_rank = 0, wrong_field = 0;
  uint64_t dtype = 0;
  const char *type = element_types[x->type].name;
  while (p < end) {
    uint64_t key, v;
    if (!read_varint(&p, end, &key))
      goto bad;
    int field = (int)(key >> 3), wire = (int)(key & 7);
    if (wire == 2) {
      if (!read_varint(&p, end, &v) || v > (uint64_t)(end - p))
        goto bad;
      const unsigned char *q = p;
      p += v;
      if (field == 9) {
        raw = q;
        raw_len = (size_t)v;
      } else if (field == 1 || packed_wire(field) || field == 5 || field == 7 || field == 11) {
        int value_wire = field == 1 ? 0 : packed_wire(field);
        while (q < p) {
          if (!next_value(&q, p, value_wire, &v))
            goto bad;
          if (field == 1 && got_rank == 8)
            goto bad;
          if (field == 1)
            got[got_rank++] = (long long)v;
          else if (!field_holds(field, type))
            wrong_field = 1;
          else if (nvalues < n)
            store_value(out, x, nvalues++, v);
          else
            nvalues++;
        }
      }
    } else if (wire == 0 || wire == 1 || wire == 5) {
      if (!next_value(&p, end, wire, &v))
        goto bad;
      if (field == 1 && got_rank == 8)
        goto bad;
      if (field == 1)
        got[got_rank++] = (long long)v;
      else if (field == 2)
        dtype = v;
      else if (field == 4 || field == 5 || field == 7 || field == 10 || field == 11) {
        if (!field_holds(field, type))
          wrong_field = 1;
        else if (nvalues < n)
          store_value(out, x, nvalues++, v);
        else
          nvalues++;
      }
    } else {
      goto bad;
    }
  }
  /* A bfloat16 input also takes a uint16 tensor of its bits: numpy has no
     bfloat16, so files written from numpy (ONNX's own test data) say uint16. */
  int bf16_bits = strcmp(element_types[x->type].name, "bfloat16") == 0 && dtype == 4;
  if (dtype != (uint64_t)element_types[x->type].onnx && !bf16_bits) {
    char got_type[32];
    snprintf(got_type, sizeof got_type, "ONNX type %llu", (unsigned long long)dtype);
    for (int k = 0; k < NUM_ELEMENT_TYPES; k++)
      if ((uint64_t)element_types[k].onnx == dtype)
        snprintf(got_type, sizeof got_type, "%s", element_types[k].name);
    return type_mismatch(x, got_type);
  }
  if (!same_shape(x->rank, x->dims, got_rank, got))
    return shape_mismatch(x, got_rank, got);
  if (wrong_field)
    goto bad;
  if (raw) {
    if (raw_len != (size_t)n * (size_t)element_types[x->type].size) {
      fprintf(stderr, "net: %s: raw_data holds %zu bytes, expected %lld\n", x->path, raw_len,
              n * element_types[x->type].size);
      return -1;
    }
    copy_elements(out, raw, x);
  } else if (nvalues != n) {
    fprintf(stderr, "net: %s: %lld values, expected %lld\n", x->path, nvalues, n);
    return -1;
  }
  return 0;
bad:
  fprintf(stderr, "net: %s: malformed TensorProto\n", x->path);
  return -1;
}

static int read_input(const Expected *x, void *out)
{
  size_t size = 0;
  unsigned char *data = read_whole_file(x->path, &size);
  if (!data)
    return -1;
  int status = size >= 6 && memcmp(data, "\x93NUMPY", 6) == 0 ? parse_npy(data, size, x, out)
                                                               : parse_pb(data, size, x, out);
  free(data);
  return status;
}
