/*
 * constinput.c - reading the tensor that --const-input NAME=FILE binds to a
 * graph input: an ONNX TensorProto (the .pb files of the ONNX test data),
 * or a NumPy .npy array, told apart by the .npy magic bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "import.h"

/* The file of --const-input; NULL after reporting why not. */
static uint8_t *read_input_file(Importer *im, const char *what, const char *path, size_t *len) {
  ReadProblem problem;
  int os_error = 0;
  uint8_t *data = read_whole_file(path, len, &problem, &os_error);
  if (data)
    return data;
  switch (problem) {
  case READ_CANNOT_OPEN:
    ir_error(im->g, NULL, "%s: cannot open '%s': %s", what, path, strerror(os_error));
    break;
  case READ_NOT_REGULAR:
    ir_error(im->g, NULL, "%s: '%s' is not a regular file", what, path);
    break;
  case READ_EMPTY:
    ir_error(im->g, NULL, "%s: '%s' is empty", what, path);
    break;
  case READ_FAILED:
    ir_error(im->g, NULL, "%s: cannot read '%s'", what, path);
    break;
  }
  return NULL;
}

/* ------------------------------------------------------ TensorProto */

static bool load_proto(Importer *im, const char *what, const char *path, const uint8_t *data,
                       size_t len, Tensor *t) {
  Onnx__TensorProto *p = onnx__tensor_proto__unpack(NULL, len, data);
  if (!p) {
    ir_error(im->g, NULL,
             "%s: '%s' is neither a .npy file nor a valid ONNX TensorProto (corrupt or "
             "truncated protobuf)",
             what, path);
    return false;
  }
  bool ok;
  if (!p->has_data_type || p->data_type == DT_UNDEFINED) {
    /* Almost any bytes parse as some protobuf; a tensor always has a type. */
    ir_error(im->g, NULL, "%s: '%s' is not an ONNX TensorProto (it has no data type)", what,
             path);
    ok = false;
  } else {
    /* External data of a .pb file lies beside it, not beside the model. */
    Importer sub = *im;
    sub.dir = path_dir(im->g->arena, path);
    ok = tensor_from_proto(&sub, NULL, what, p, t);
  }
  onnx__tensor_proto__free_unpacked(p, NULL);
  return ok;
}

/* -------------------------------------------------------------- .npy */

/*
 * A .npy file: the magic "\x93NUMPY", a version, the length of a header,
 * the header (a Python dict literal such as
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }), then the
 * elements, packed.
 */
static const char npy_magic[6] = "\x93NUMPY";

static bool is_npy(const uint8_t *data, size_t len) {
  return len >= sizeof npy_magic && memcmp(data, npy_magic, sizeof npy_magic) == 0;
}

typedef struct NpyHeader {
  char descr[16];
  bool fortran_order;
  int rank;
  int64_t dims[IR_MAX_RANK];
  bool has_descr, has_order, has_shape;
} NpyHeader;

/* A cursor over the header text; `error` says what was wrong with it. */
typedef struct Cursor {
  const char *p, *end;
  const char *error;
} Cursor;

static void skip_space(Cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
    c->p++;
}

static bool accept(Cursor *c, char ch) {
  skip_space(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

static bool fail_at(Cursor *c, const char *what) {
  if (!c->error)
    c->error = what;
  return false;
}

/* A quoted string without escapes: keys and descr never need them. */
static bool parse_string(Cursor *c, char *buf, size_t size) {
  skip_space(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
    return fail_at(c, "expected a quoted string");
  char quote = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != quote) {
    if (*c->p == '\\' || n + 1 >= size)
      return fail_at(c, "unexpected string");
    buf[n++] = *c->p++;
  }
  if (c->p >= c->end)
    return fail_at(c, "unterminated string");
  c->p++;
  buf[n] = '\0';
  return true;
}

static bool parse_word(Cursor *c, const char *word) {
  skip_space(c);
  size_t n = strlen(word);
  if ((size_t)(c->end - c->p) >= n && memcmp(c->p, word, n) == 0) {
    c->p += n;
    return true;
  }
  return false;
}

/* "(2, 3)", "(5,)" or "()"; old files write "2L" for a Python 2 long. */
static bool parse_shape_tuple(Cursor *c, NpyHeader *h) {
  if (!accept(c, '('))
    return fail_at(c, "shape is not a tuple");
  h->rank = 0;
  if (accept(c, ')'))
    return true;
  for (;;) {
    skip_space(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
      return fail_at(c, "shape holds something other than a number");
    int64_t d = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
      if (d > ((int64_t)1 << 40))
        return fail_at(c, "a dimension is too large");
      d = d * 10 + (*c->p++ - '0');
    }
    if (c->p < c->end && *c->p == 'L')
      c->p++;
    if (h->rank == IR_MAX_RANK)
      return fail_at(c, "rank exceeds opc's limit of 8");
    h->dims[h->rank++] = d;
    bool comma = accept(c, ',');
    if (accept(c, ')'))
      return true;
    if (!comma)
      return fail_at(c, "malformed shape tuple");
  }
}

static bool parse_header(Cursor *c, NpyHeader *h) {
  if (!accept(c, '{'))
    return fail_at(c, "the header is not a dict");
  while (!accept(c, '}')) {
    char key[32];
    if (!parse_string(c, key, sizeof key) || !accept(c, ':'))
      return fail_at(c, "malformed header entry");
    skip_space(c);
    if (strcmp(key, "descr") == 0) {
      if (c->p < c->end && *c->p == '[')
        return fail_at(c, "descr is not a simple type (structured arrays are not supported)");
      if (!parse_string(c, h->descr, sizeof h->descr))
        return false;
      h->has_descr = true;
    } else if (strcmp(key, "fortran_order") == 0) {
      if (parse_word(c, "True"))
        h->fortran_order = true;
      else if (parse_word(c, "False"))
        h->fortran_order = false;
      else
        return fail_at(c, "fortran_order is neither True nor False");
      h->has_order = true;
    } else if (strcmp(key, "shape") == 0) {
      if (!parse_shape_tuple(c, h))
        return false;
      h->has_shape = true;
    } else {
      return fail_at(c, "unknown header key");
    }
    if (!accept(c, ',')) {
      if (!accept(c, '}'))
        return fail_at(c, "malformed header dict");
      break;
    }
  }
  if (!h->has_descr || !h->has_order || !h->has_shape)
    return fail_at(c, "the header lacks descr, fortran_order or shape");
  return true;
}

static const struct {
  char kind;
  int size;
  DType dtype;
} npy_types[] = {
    {'f', 4, DT_FLOAT}, {'f', 8, DT_DOUBLE}, {'f', 2, DT_FLOAT16},
    {'i', 1, DT_INT8},  {'i', 2, DT_INT16},  {'i', 4, DT_INT32},  {'i', 8, DT_INT64},
    {'u', 1, DT_UINT8}, {'u', 2, DT_UINT16}, {'u', 4, DT_UINT32}, {'u', 8, DT_UINT64},
    {'b', 1, DT_BOOL},
};

static bool host_is_big_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 0;
}

/* descr like "<f4", "|b1", ">i8": the dtype and byte order; false if unsupported. */
static bool npy_dtype(const char *descr, DType *dt, bool *big_endian) {
  char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return false;
  char kind = descr[1];
  char *end;
  long size = kind ? strtol(descr + 2, &end, 10) : 0;
  if (!kind || end == descr + 2 || *end)
    return false;
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++) {
    if (npy_types[i].kind == kind && npy_types[i].size == size) {
      *dt = npy_types[i].dtype;
      *big_endian = order == '>' || (order == '=' && host_is_big_endian());
      return true;
    }
  }
  return false;
}

static bool load_npy(Importer *im, const char *what, const char *path, const uint8_t *data,
                     size_t len, Tensor *t) {
  /* magic(6) major(1) minor(1), then the header length: 2 bytes in
     version 1, 4 bytes in versions 2 and 3. */
  size_t lenbytes = len > 6 && data[6] == 1 ? 2 : 4;
  if (len < 8 + lenbytes || data[6] < 1 || data[6] > 3) {
    ir_error(im->g, NULL, "%s: '%s' is a truncated .npy file or one of an unknown version",
             what, path);
    return false;
  }
  size_t hlen = data[8] | (size_t)data[9] << 8;
  if (lenbytes == 4)
    hlen |= (size_t)data[10] << 16 | (size_t)data[11] << 24;
  size_t start = 8 + lenbytes;
  if (hlen > len - start) {
    ir_error(im->g, NULL, "%s: '%s' is a truncated .npy file (header cut short)", what, path);
    return false;
  }
  NpyHeader h = {0};
  Cursor c = {(const char *)data + start, (const char *)data + start + hlen, NULL};
  if (!parse_header(&c, &h)) {
    ir_error(im->g, NULL, "%s: '%s' has a malformed .npy header: %s", what, path, c.error);
    return false;
  }
  DType dt;
  bool big_endian;
  if (!npy_dtype(h.descr, &dt, &big_endian)) {
    ir_error(im->g, NULL,
             "%s: '%s' holds NumPy type '%s'; opc reads float, int, uint and bool arrays", what,
             path, h.descr);
    return false;
  }
  if (h.fortran_order) {
    ir_error(im->g, NULL,
             "%s: '%s' is in Fortran order; save it in C order (numpy.ascontiguousarray)", what,
             path);
    return false;
  }
  size_t offset = start + hlen;
  return tensor_from_bytes(im, what, dt, h.rank, h.dims, data + offset, len - offset,
                           big_endian, t);
}

/* ------------------------------------------------------------ public */

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

bool const_input_load(Importer *im, const ConstInput *ci, Tensor *t) {
  const char *what = arena_printf(im->g->arena, "--const-input %s=%s", ci->name, ci->path);
  size_t len;
  uint8_t *data = read_input_file(im, what, ci->path, &len);
  if (!data)
    return false;
  bool ok;
  if (is_npy(data, len)) {
    ok = load_npy(im, what, ci->path, data, len, t);
  } else if (ends_with(ci->path, ".npy")) {
    ir_error(im->g, NULL, "%s: '%s' is not a .npy file (it lacks the NumPy magic bytes)", what,
             ci->path);
    ok = false;
  } else {
    ok = load_proto(im, what, ci->path, data, len, t);
  }
  free(data);
  return ok;
}

/* ------------------------------------------ sequences and optionals */

/* The tensors of a SequenceProto, each a constant named "<input>/<k>",
   into *items; false after reporting. */
static bool sequence_tensors(Importer *im, const char *what, const ConstInput *ci,
                             const Onnx__SequenceProto *s, int *n, Tensor ***items) {
  if (s->n_tensor_values == 0 && s->has_elem_type && s->elem_type != 1) {
    ir_error(im->g, NULL, "%s: the sequence holds sequences, maps or optionals; opc binds "
             "sequences of tensors", what);
    return false;
  }
  if (s->n_tensor_values > 4096) {
    ir_error(im->g, NULL, "%s: the sequence holds more than 4096 tensors", what);
    return false;
  }
  Importer sub = *im; /* external data of a .pb file lies beside it */
  sub.dir = path_dir(im->g->arena, ci->path);
  *n = (int)s->n_tensor_values;
  *items = arena_alloc(im->g->arena, sizeof(Tensor *) * (s->n_tensor_values + 1));
  for (size_t k = 0; k < s->n_tensor_values; k++) {
    Tensor *t = graph_add_tensor(im->g, arena_printf(im->g->arena, "%s/%zu", ci->name, k));
    if (!tensor_from_proto(&sub, NULL, what, s->tensor_values[k], t))
      return false;
    (*items)[k] = t;
  }
  return true;
}

bool const_input_load_list(Importer *im, const ConstInput *ci, bool optional, bool of_seq,
                           bool *present, int *n, Tensor ***items) {
  const char *what = arena_printf(im->g->arena, "--const-input %s=%s", ci->name, ci->path);
  size_t len;
  uint8_t *data = read_input_file(im, what, ci->path, &len);
  if (!data)
    return false;
  bool ok = false;
  *present = true;
  *n = 0;
  if (!optional) {
    Onnx__SequenceProto *s = onnx__sequence_proto__unpack(NULL, len, data);
    if (s)
      ok = sequence_tensors(im, what, ci, s, n, items);
    else
      ir_error(im->g, NULL, "%s: '%s' is not a valid ONNX SequenceProto", what, ci->path);
    onnx__sequence_proto__free_unpacked(s, NULL);
    free(data);
    return ok;
  }
  Onnx__OptionalProto *o = onnx__optional_proto__unpack(NULL, len, data);
  if (!o) {
    ir_error(im->g, NULL, "%s: '%s' is not a valid ONNX OptionalProto", what, ci->path);
  } else if ((o->tensor_value && of_seq) || (o->sequence_value && !of_seq)) {
    ir_error(im->g, NULL, "%s: the file holds %s, but input '%s' is declared an optional of %s",
             what, of_seq ? "a tensor" : "a sequence", ci->name, of_seq ? "a sequence" : "a tensor");
  } else if (o->tensor_value) {
    Importer sub = *im;
    sub.dir = path_dir(im->g->arena, ci->path);
    Tensor *t = graph_add_tensor(im->g, arena_printf(im->g->arena, "%s/0", ci->name));
    *n = 1;
    *items = arena_alloc(im->g->arena, sizeof(Tensor *) * 2);
    (*items)[0] = t;
    ok = tensor_from_proto(&sub, NULL, what, o->tensor_value, t);
  } else if (o->sequence_value) {
    ok = sequence_tensors(im, what, ci, o->sequence_value, n, items);
  } else if (!o->has_elem_type || o->elem_type == 0) {
    *present = false; /* an empty optional */
    ok = true;
  } else {
    ir_error(im->g, NULL, "%s: the optional holds a map or an optional; opc binds optionals "
             "of tensors and of sequences of tensors", what);
  }
  onnx__optional_proto__free_unpacked(o, NULL);
  free(data);
  return ok;
}
