/*
 * tensor.c - decoding ONNX TensorProto data into the IR's canonical form:
 * every floating dtype into Tensor.f32, every integer and bool into
 * Tensor.i64. The data may sit in raw_data (little-endian bytes), in one of
 * the typed repeated fields, or in an external file beside the model.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "import.h"

float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13); /* inf or nan */
  } else if (exp != 0) {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign; /* signed zero */
  } else {
    /* Subnormal half: shift the mantissa up until it is normal. */
    int e = 127 - 15 + 1;
    while (!(mant & 0x400)) {
      mant <<= 1;
      e--;
    }
    bits = sign | ((uint32_t)e << 23) | ((mant & 0x3ff) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

float bfloat16_to_float(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static bool dtype_supported(DType t) { return dtype_is_float(t) || dtype_is_integer(t); }

static const char *proto_dtype_name(int32_t t) {
  switch (t) {
  case DT_STRING: return "string";
  case 14: return "complex64";
  case 15: return "complex128";
  case 17: case 18: case 19: case 20: return "float8";
  case 21: return "uint4";
  case 22: return "int4";
  default: return dtype_name((DType)t);
  }
}

/* --------------------------------------------------------- raw bytes */

/* Reads an unsigned little-endian integer of `size` bytes, whatever the host. */
static uint64_t load_le(const uint8_t *p, size_t size) {
  uint64_t v = 0;
  for (size_t i = size; i-- > 0;)
    v = v << 8 | p[i];
  return v;
}

static float float_from_bits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static double double_from_bits(uint64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

/* One element of raw data as a float, for floating dtypes. */
static float raw_float(DType dt, uint64_t v) {
  switch (dt) {
  case DT_FLOAT: return float_from_bits((uint32_t)v);
  case DT_DOUBLE: return (float)double_from_bits(v);
  case DT_FLOAT16: return half_to_float((uint16_t)v);
  default: return bfloat16_to_float((uint16_t)v);
  }
}

/* One element of raw data as an int64, sign-extended for signed dtypes. */
static int64_t raw_int(DType dt, uint64_t v) {
  switch (dt) {
  case DT_INT8: return (int8_t)v;
  case DT_INT16: return (int16_t)v;
  case DT_INT32: return (int32_t)v;
  case DT_BOOL: return v != 0;
  default: return (int64_t)v; /* int64, and unsigned values */
  }
}

static void decode_raw(const uint8_t *data, Tensor *t, int64_t count) {
  size_t size = dtype_size(t->dtype);
  for (int64_t i = 0; i < count; i++) {
    uint64_t v = load_le(data + (size_t)i * size, size);
    if (t->f32)
      t->f32[i] = raw_float(t->dtype, v);
    else
      t->i64[i] = raw_int(t->dtype, v);
  }
}

/* ---------------------------------------------------- typed fields */

static const char *typed_field(DType dt) {
  switch (dt) {
  case DT_FLOAT: return "float_data";
  case DT_DOUBLE: return "double_data";
  case DT_INT64: return "int64_data";
  case DT_UINT32: case DT_UINT64: return "uint64_data";
  default: return "int32_data";
  }
}

/* How many values the typed field that holds this dtype carries. */
static size_t typed_count(const Onnx__TensorProto *p, DType dt) {
  switch (dt) {
  case DT_FLOAT: return p->n_float_data;
  case DT_DOUBLE: return p->n_double_data;
  case DT_INT64: return p->n_int64_data;
  case DT_UINT32: case DT_UINT64: return p->n_uint64_data;
  default: return p->n_int32_data; /* the small ints, bool, float16, bfloat16 */
  }
}

static void decode_typed(const Onnx__TensorProto *p, Tensor *t, int64_t count) {
  for (int64_t i = 0; i < count; i++) {
    switch (t->dtype) {
    case DT_FLOAT: t->f32[i] = p->float_data[i]; break;
    case DT_DOUBLE: t->f32[i] = (float)p->double_data[i]; break;
    case DT_FLOAT16: t->f32[i] = half_to_float((uint16_t)p->int32_data[i]); break;
    case DT_BFLOAT16: t->f32[i] = bfloat16_to_float((uint16_t)p->int32_data[i]); break;
    case DT_INT64: t->i64[i] = p->int64_data[i]; break;
    case DT_UINT32: case DT_UINT64: t->i64[i] = (int64_t)p->uint64_data[i]; break;
    /* int32_data holds the smaller types widened; cast back to honour their range. */
    case DT_INT8: t->i64[i] = (int8_t)p->int32_data[i]; break;
    case DT_UINT8: t->i64[i] = (uint8_t)p->int32_data[i]; break;
    case DT_INT16: t->i64[i] = (int16_t)p->int32_data[i]; break;
    case DT_UINT16: t->i64[i] = (uint16_t)p->int32_data[i]; break;
    case DT_BOOL: t->i64[i] = p->int32_data[i] != 0; break;
    default: t->i64[i] = p->int32_data[i]; break;
    }
  }
}

/* ------------------------------------------------------ external data */

typedef struct External {
  const char *location;
  int64_t offset;
  int64_t length; /* -1: up to the size the shape needs */
} External;

static bool parse_int_value(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < 0)
    return false;
  *out = v;
  return true;
}

static bool external_entries(Importer *im, const Node *n, const char *what,
                             const Onnx__TensorProto *p, External *ext) {
  ext->location = NULL;
  ext->offset = 0;
  ext->length = -1;
  for (size_t i = 0; i < p->n_external_data; i++) {
    const char *key = proto_str(p->external_data[i]->key);
    const char *value = proto_str(p->external_data[i]->value);
    bool ok = true;
    if (strcmp(key, "location") == 0)
      ext->location = value;
    else if (strcmp(key, "offset") == 0)
      ok = parse_int_value(value, &ext->offset);
    else if (strcmp(key, "length") == 0)
      ok = parse_int_value(value, &ext->length);
    if (!ok) {
      ir_error(im->g, n, "%s: external data has a bad %s '%s'", what, key, value);
      return false;
    }
  }
  if (!ext->location || !*ext->location) {
    ir_error(im->g, n, "%s: external data has no location", what);
    return false;
  }
  return true;
}

/* The location must stay inside the model's directory: no absolute paths, no "..". */
static bool location_is_safe(const char *loc) {
  if (loc[0] == '/')
    return false;
  for (const char *p = loc; *p;) {
    size_t len = strcspn(p, "/");
    if (len == 2 && p[0] == '.' && p[1] == '.')
      return false;
    p += len;
    if (*p == '/')
      p++;
  }
  return true;
}

/* Reads `size` bytes of external data into a malloc'ed buffer; NULL after an error. */
static uint8_t *read_external(Importer *im, const Node *n, const char *what,
                              const Onnx__TensorProto *p, size_t size) {
  External ext;
  if (!external_entries(im, n, what, p, &ext))
    return NULL;
  if (!location_is_safe(ext.location)) {
    ir_error(im->g, n, "%s: external data location '%s' leaves the model's directory", what,
             ext.location);
    return NULL;
  }
  if (ext.length >= 0 && (uint64_t)ext.length != size) {
    ir_error(im->g, n, "%s: external data length is %lld bytes but the shape needs %zu", what,
             (long long)ext.length, size);
    return NULL;
  }
  char *file = arena_printf(im->g->arena, "%s/%s", im->dir, ext.location);
  FILE *f = fopen(file, "rb");
  if (!f) {
    ir_error(im->g, n, "%s: cannot open external data file '%s': %s", what, file,
             strerror(errno));
    return NULL;
  }
  /* Check the file is long enough before allocating: the size comes from
     the model's shape, which a corrupt file can make anything. */
  struct stat st;
  int64_t avail = fstat(fileno(f), &st) == 0 ? (int64_t)st.st_size - ext.offset : 0;
  if (avail < 0 || (uint64_t)avail < size) {
    ir_error(im->g, n,
             "%s: external data file '%s' is too short: needs %zu bytes at offset %lld, "
             "has %lld",
             what, file, size, (long long)ext.offset, (long long)(avail > 0 ? avail : 0));
    fclose(f);
    return NULL;
  }
  uint8_t *data = malloc(size ? size : 1);
  size_t got = 0;
  if (data && fseeko(f, (off_t)ext.offset, SEEK_SET) == 0)
    got = fread(data, 1, size, f);
  fclose(f);
  if (got != size) {
    ir_error(im->g, n, "%s: cannot read %zu bytes from external data file '%s'", what, size,
             file);
    free(data);
    return NULL;
  }
  return data;
}

/* ------------------------------------------------------------ tensor */

static bool tensor_shape(Importer *im, const Node *n, const char *what, size_t rank,
                         const int64_t *dims, Tensor *t, int64_t *numel) {
  if (rank > IR_MAX_RANK) {
    ir_error(im->g, n, "%s: rank %zu exceeds opc's limit of %d", what, rank, IR_MAX_RANK);
    return false;
  }
  for (size_t i = 0; i < rank; i++)
    if (dims[i] < 0) {
      ir_error(im->g, n, "%s: bad dimension %lld", what, (long long)dims[i]);
      return false;
    }
  /* Under the tensor limits, byte sizes cannot overflow below. */
  if (!check_tensor_size(im->g, n, what, NULL, t->dtype, (int)rank, dims))
    return false;
  /* Strides count a zero dimension as 1: an empty tensor's other
     dimensions must fit them too. */
  if (!shape_fits((int)rank, dims)) {
    ir_error(im->g, n, "%s: dimensions multiply to more than 2^59", what);
    return false;
  }
  tensor_set_shape(t, (int)rank, dims);
  *numel = tensor_numel(t);
  return true;
}

static void shape_str(const Tensor *t, char *buf, size_t size) {
  int len = snprintf(buf, size, "[");
  for (int i = 0; i < t->rank && (size_t)len < size; i++)
    len += snprintf(buf + len, size - (size_t)len, "%s%lld", i ? "," : "", (long long)t->dims[i]);
  if ((size_t)len < size)
    snprintf(buf + len, size - (size_t)len, "]");
}

static void length_error(Importer *im, const Node *n, const char *what, const Tensor *t,
                         const char *form, uint64_t got, uint64_t need, const char *unit) {
  char shape[128];
  shape_str(t, shape, sizeof shape);
  ir_error(im->g, n, "%s: %s holds %llu %s but shape %s needs %llu", what, form,
           (unsigned long long)got, unit, shape, (unsigned long long)need);
}

/* Points t->f32 or t->i64 at fresh storage; at least one element, so that
   an empty constant still reads as constant. */
static void alloc_data(Importer *im, Tensor *t, int64_t numel) {
  size_t count = (size_t)(numel > 0 ? numel : 1);
  if (dtype_is_float(t->dtype))
    t->f32 = arena_alloc(im->g->arena, count * sizeof(float));
  else
    t->i64 = arena_alloc(im->g->arena, count * sizeof(int64_t));
}

bool tensor_from_proto(Importer *im, const Node *n, const char *what,
                       const Onnx__TensorProto *p, Tensor *t) {
  DType dt = (DType)p->data_type;
  if (!dtype_supported(dt)) {
    ir_error(im->g, n, "%s: unsupported data type %s", what, proto_dtype_name(p->data_type));
    return false;
  }
  t->dtype = dt;
  int64_t numel;
  if (!tensor_shape(im, n, what, p->n_dims, p->dims, t, &numel))
    return false;
  if (p->segment) {
    ir_error(im->g, n, "%s: segmented tensors are not supported", what);
    return false;
  }

  /* Sizes are checked before anything is allocated: a corrupt shape must
     not turn into a huge allocation. */
  size_t bytes = (size_t)numel * dtype_size(dt);
  if (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    uint8_t *data = read_external(im, n, what, p, bytes);
    if (!data)
      return false;
    alloc_data(im, t, numel);
    decode_raw(data, t, numel);
    free(data);
  } else if (p->has_raw_data) {
    if (p->raw_data.len != bytes) {
      length_error(im, n, what, t, "raw_data", p->raw_data.len, bytes, "bytes");
      return false;
    }
    alloc_data(im, t, numel);
    decode_raw(p->raw_data.data, t, numel);
  } else {
    size_t count = typed_count(p, dt);
    if (count != (size_t)numel) {
      length_error(im, n, what, t, typed_field(dt), count, (uint64_t)numel, "values");
      return false;
    }
    alloc_data(im, t, numel);
    decode_typed(p, t, numel);
  }
  return true;
}

bool tensor_from_bytes(Importer *im, const char *what, DType dt, int rank, const int64_t *dims,
                       const uint8_t *data, size_t len, bool big_endian, Tensor *t) {
  if (!dtype_supported(dt)) {
    ir_error(im->g, NULL, "%s: unsupported data type %s", what, proto_dtype_name(dt));
    return false;
  }
  t->dtype = dt;
  int64_t numel;
  if (!tensor_shape(im, NULL, what, (size_t)rank, dims, t, &numel))
    return false;
  size_t size = dtype_size(dt);
  size_t bytes = (size_t)numel * size;
  if (len != bytes) {
    length_error(im, NULL, what, t, "the data", len, bytes, "bytes");
    return false;
  }
  alloc_data(im, t, numel);
  if (!big_endian || size == 1) {
    decode_raw(data, t, numel);
    return true;
  }
  /* Reverse each element's bytes into a copy; decode_raw reads little-endian. */
  uint8_t *swapped = malloc(bytes ? bytes : 1);
  if (!swapped) {
    ir_error(im->g, NULL, "%s: out of memory", what);
    return false;
  }
  for (size_t i = 0; i < bytes; i += size)
    for (size_t k = 0; k < size; k++)
      swapped[i + k] = data[i + size - 1 - k];
  decode_raw(swapped, t, numel);
  free(swapped);
  return true;
}
