/*
 * The command line of the compiled model:
 *   ./net [--weights FILE] [--input NAME=FILE]... [--output NAME=FILE]...
 *         [--seed S] [--bench N [--warmup W]] [--trace FILE.json]
 *         [--profile FILE.json [--repeats R]] [--verbose]
 * Inputs are read from .npy (C order, little-endian) or ONNX TensorProto .pb
 * files of the input's type and shape (net.h lists them); floating inputs
 * not given are filled with random numbers in [-1, 1) drawn from --seed
 * (default 1), integer and bool ones with zeros, an index always in range.
 * --output writes an output as .npy of its type. --bench
 * times N runs after W warm-up runs; --trace writes the time of every
 * node of one run as a Chrome trace; --profile times every node alone and
 * every stage, each in a CUDA graph of R repeats, for `opc --cost-db`.
 * --verbose prints each node's stream and the form of calls create() chose
 * for it (a fused convolution that cuDNN refused runs as separate calls).
 * Without --weights the weights file is looked for beside the program.
 * Exit status: 0 done, 1 bad arguments or input files, 2 error at run time.
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
    {"int32", "i32", "<i4", 6, 4},   {"int8", "i8", "|i1", 3, 1},
    {"uint8", "u8", "|u1", 2, 1},    {"bool", "bool", "|b1", 9, 1},
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
   float_data (4) float32, int32_data (5) int32, int8, uint8, bool and
   float16's bits, int64_data (7) int64, double_data (10) float64. */
static int field_holds(int field, const char *type)
{
  switch (field) {
  case 4: return strcmp(type, "float32") == 0;
  case 5: return strcmp(type, "int32") == 0 || strcmp(type, "int8") == 0 ||
                 strcmp(type, "uint8") == 0 || strcmp(type, "bool") == 0 ||
                 strcmp(type, "float16") == 0;
  case 7: return strcmp(type, "int64") == 0;
  case 10: return strcmp(type, "float64") == 0;
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

/* ONNX TensorProto: dims (1), data_type (2), typed data (4, 5, 7, 10), raw_data (9). */
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
      } else if (field == 1 || packed_wire(field) || field == 5 || field == 7) {
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
      else if (field == 4 || field == 5 || field == 7 || field == 10) {
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
  if (dtype != (uint64_t)element_types[x->type].onnx) {
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

static int write_npy(const char *path, int type, int rank, const long long *dims, const void *data)
{
  char header[256];
  int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     element_types[type].descr);
  for (int i = 0; i < rank; i++)
    len += snprintf(header + len, sizeof header - (size_t)len, "%lld%s", dims[i],
                    rank == 1 ? "," : i + 1 < rank ? ", " : "");
  len += snprintf(header + len, sizeof header - (size_t)len, "), }");
  /* Pad with spaces so that the data starts on a 64-byte boundary. */
  while ((10 + len + 1) % 64 != 0)
    header[len++] = ' ';
  header[len++] = '\n';
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "net: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  unsigned char preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff),
                                (unsigned char)(len >> 8)};
  size_t bytes = (size_t)numel_of(rank, dims) * (size_t)element_types[type].size;
  int ok = fwrite(preamble, 1, 10, f) == 10 && fwrite(header, 1, (size_t)len, f) == (size_t)len &&
           fwrite(data, 1, bytes, f) == bytes;
  if (fclose(f) != 0)
    ok = 0;
  if (!ok)
    fprintf(stderr, "net: cannot write %s: %s\n", path, strerror(errno));
  return ok ? 0 : -1;
}

/* A float16's value, from its bits. */
static float half_value(uint16_t h)
{
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v = exp == 0 ? ldexpf((float)mant, -24)
            : exp == 31 ? (mant ? NAN : INFINITY)
                        : ldexpf((float)(mant | 0x400), exp - 25);
  return h & 0x8000 ? -v : v;
}

/* The bits of the float16 nearest below |f| in magnitude, for random
   inputs in [-1, 1): values under the smallest normal become zero. */
static uint16_t half_bits_of(float f)
{
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  int exp = (int)((x >> 23) & 0xff) - 127;
  if (exp < -14)
    return sign;
  return sign | (uint16_t)((exp + 15) << 10) | (uint16_t)((x & 0x7fffff) >> 13);
}

/* Element i of a buffer of the given type, as a double. */
static double element_value(int type, const void *data, long long i)
{
  const char *name = element_types[type].name;
  if (strcmp(name, "float32") == 0)
    return ((const float *)data)[i];
  if (strcmp(name, "float64") == 0)
    return ((const double *)data)[i];
  if (strcmp(name, "float16") == 0)
    return half_value(((const uint16_t *)data)[i]);
  if (strcmp(name, "int64") == 0)
    return (double)((const int64_t *)data)[i];
  if (strcmp(name, "int32") == 0)
    return ((const int32_t *)data)[i];
  if (strcmp(name, "int8") == 0)
    return ((const int8_t *)data)[i];
  return ((const uint8_t *)data)[i]; /* uint8, bool */
}

/* Fills an input not given: floating ones with random numbers in [-1, 1). */
static void fill_input(int type, void *data, long long n, uint64_t *state)
{
  const char *name = element_types[type].name;
  memset(data, 0, (size_t)n * (size_t)element_types[type].size);
  for (long long j = 0; j < n && name[0] == 'f'; j++) {
    double r = (double)(next_random(state) >> 11) / 4503599627370496.0 - 1.0;
    if (strcmp(name, "float32") == 0)
      ((float *)data)[j] = (float)r;
    else if (strcmp(name, "float64") == 0)
      ((double *)data)[j] = r;
    else
      ((uint16_t *)data)[j] = half_bits_of((float)r);
  }
}

static int usage(void)
{
  fprintf(stderr, "usage: net [--weights FILE] [--input NAME=FILE]... [--output NAME=FILE]...\n"
                  "           [--seed S] [--bench N [--warmup W]] [--trace FILE.json]\n"
                  "           [--profile FILE.json [--repeats R]] [--verbose]\n");
  return 1;
}

/* Index of the input or output called `name` (the part of NAME=FILE before '='). */
static int find_io(const char *arg, int output, const char **file)
{
  const char *eq = strchr(arg, '=');
  if (!eq)
    return -1;
  *file = eq + 1;
  int count = output ? net_num_outputs() : net_num_inputs();
  for (int i = 0; i < count; i++) {
    const char *name = output ? net_output_name(i) : net_input_name(i);
    if (strlen(name) == (size_t)(eq - arg) && strncmp(name, arg, (size_t)(eq - arg)) == 0)
      return i;
  }
  return -1;
}

static int compare_floats(const void *a, const void *b)
{
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted times. */
static float percentile(const float *sorted, int n, double p)
{
  int k = (int)ceil(p * n) - 1;
  return sorted[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static int bench(net_ctx *c, const void *const *inputs, void *const *outputs, int runs, int warmup)
{
  cudaEvent_t start = NULL, stop = NULL;
  float *times = calloc((size_t)runs, sizeof(float));
  int status = -1;
  cudaError_t err = cudaSuccess;
  if (!times || (err = cudaEventCreateWithFlags(&start, cudaEventDefault)) != cudaSuccess ||
      (err = cudaEventCreateWithFlags(&stop, cudaEventDefault)) != cudaSuccess)
    goto done;
  for (int i = 0; i < warmup; i++)
    if (net_run(c, inputs, outputs) != 0)
      goto done;
  for (int i = 0; i < runs; i++) {
    if ((err = cudaEventRecord(start, c->stream[0])) != cudaSuccess || net_run(c, inputs, outputs) != 0 ||
        (err = cudaEventRecord(stop, c->stream[0])) != cudaSuccess ||
        (err = cudaEventSynchronize(stop)) != cudaSuccess ||
        (err = cudaEventElapsedTime(&times[i], start, stop)) != cudaSuccess)
      goto done;
  }
  double sum = 0;
  for (int i = 0; i < runs; i++)
    sum += times[i];
  qsort(times, (size_t)runs, sizeof(float), compare_floats);
  printf("latency_ms mean=%.4f p50=%.4f p90=%.4f p99=%.4f min=%.4f runs=%d\n", sum / runs,
         percentile(times, runs, 0.50), percentile(times, runs, 0.90), percentile(times, runs, 0.99),
         times[0], runs);
  status = 0;
done:
  if (err != cudaSuccess)
    snprintf(c->error, sizeof c->error, "benchmark: %s", cudaGetErrorString(err));
  if (start)
    cudaEventDestroy(start);
  if (stop)
    cudaEventDestroy(stop);
  free(times);
  return status;
}

/* The weights file beside the program, if there is one. */
static char *weights_beside(const char *argv0)
{
  if (!weights_file_name[0])
    return NULL;
  const char *slash = strrchr(argv0, '/');
  size_t dir = slash ? (size_t)(slash - argv0 + 1) : 0;
  char *path = malloc(dir + strlen(weights_file_name) + 1);
  if (!path)
    return NULL;
  memcpy(path, argv0, dir);
  strcpy(path + dir, weights_file_name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    free(path);
    return NULL;
  }
  fclose(f);
  return path;
}

int main(int argc, char **argv)
{
  int nin = net_num_inputs(), nout = net_num_outputs();
  const char *input_file[64] = {0}, *output_file[64] = {0}, *weights = NULL, *trace = NULL,
             *profile = NULL;
  unsigned long long seed = 1;
  int runs = 0, warmup = 0, repeats = 0, verbose = 0, status = 2;
  if (nin > 64 || nout > 64) {
    fprintf(stderr, "net: too many inputs or outputs for the command line\n");
    return 1;
  }
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL, *file = NULL;
    char *end = NULL;
    int k;
    if (strcmp(arg, "--verbose") == 0) {
      verbose = 1;
      continue;
    }
    if (!value)
      return usage();
    i++;
    if (strcmp(arg, "--weights") == 0) {
      weights = value;
    } else if (strcmp(arg, "--trace") == 0) {
      trace = value;
    } else if (strcmp(arg, "--profile") == 0) {
      profile = value;
    } else if (strcmp(arg, "--input") == 0 || strcmp(arg, "--output") == 0) {
      int output = arg[2] == 'o';
      if ((k = find_io(value, output, &file)) < 0) {
        fprintf(stderr, "net: %s %s: no %s of that name\n", arg, value, output ? "output" : "input");
        return 1;
      }
      if (output)
        output_file[k] = file;
      else
        input_file[k] = file;
    } else if (strcmp(arg, "--seed") == 0) {
      seed = strtoull(value, &end, 0);
      if (*end)
        return usage();
    } else if (strcmp(arg, "--bench") == 0 || strcmp(arg, "--warmup") == 0 ||
               strcmp(arg, "--repeats") == 0) {
      long v = strtol(value, &end, 10);
      if (*end || v < 0 || v > 1000000)
        return usage();
      if (arg[2] == 'b')
        runs = (int)v;
      else if (arg[2] == 'w')
        warmup = (int)v;
      else
        repeats = (int)v;
    } else {
      return usage();
    }
  }

  void *in[64] = {0}, *out[64] = {0};
  int in_type[64], out_type[64];
  uint64_t state = seed;
  for (int i = 0; i < nin; i++)
    if ((in_type[i] = element_type(net_input_type(i))) < 0) {
      fprintf(stderr, "net: input '%s' has type %s, which this main cannot read\n",
              net_input_name(i), net_input_type(i));
      return 1;
    }
  for (int i = 0; i < nout; i++)
    if ((out_type[i] = element_type(net_output_type(i))) < 0) {
      fprintf(stderr, "net: output '%s' has type %s, which this main cannot write\n",
              net_output_name(i), net_output_type(i));
      return 1;
    }
  for (int i = 0; i < nin; i++) {
    long long n = numel_of(net_input_rank(i), net_input_dims(i));
    if (!(in[i] = malloc((size_t)n * (size_t)net_input_element_size(i) + 1)))
      return 2;
    Expected x = {net_input_name(i), input_file[i], in_type[i], net_input_rank(i),
                  net_input_dims(i)};
    if (input_file[i]) {
      if (read_input(&x, in[i]) != 0)
        return 1;
    } else {
      fill_input(in_type[i], in[i], n, &state);
    }
  }
  for (int i = 0; i < nout; i++) {
    long long n = numel_of(net_output_rank(i), net_output_dims(i));
    size_t bytes = (size_t)n * (size_t)net_output_element_size(i);
    if (!(out[i] = malloc(bytes + 1)))
      return 2;
  }

  char *beside = weights ? NULL : weights_beside(argv[0]);
  net_ctx *c = NULL;
  if (net_create(&c, weights ? weights : beside) != 0)
    goto done;
  if (verbose)
    describe(c);
  if (net_run(c, (const void *const *)in, out) != 0)
    goto done;
  if (runs > 0 && bench(c, (const void *const *)in, out, runs, warmup) != 0)
    goto done;
  if (trace && trace_run(c, trace) != 0)
    goto done;
  if (profile && net_profile(c, profile, repeats) != 0)
    goto done;
  status = 0;
  for (int i = 0; i < nout; i++) {
    if (output_file[i]) {
      if (write_npy(output_file[i], out_type[i], net_output_rank(i), net_output_dims(i),
                    out[i]) != 0)
        status = 1;
    } else if (runs == 0) {
      long long n = numel_of(net_output_rank(i), net_output_dims(i));
      double sum = 0;
      for (long long j = 0; j < n; j++)
        sum += element_value(out_type[i], out[i], j);
      printf("%s: %s", net_output_name(i), element_types[out_type[i]].short_name);
      print_shape(stdout, net_output_rank(i), net_output_dims(i));
      double first = n ? element_value(out_type[i], out[i], 0) : 0.0;
      printf(" mean=%.6g first=%.6g\n", n ? sum / n : 0.0, first);
    }
  }
done:
  if (status == 2)
    fprintf(stderr, "net: error: %s\n", net_error(c));
  net_destroy(c);
  free(beside);
  for (int i = 0; i < nin; i++)
    free(in[i]);
  for (int i = 0; i < nout; i++)
    free(out[i]);
  return status;
}
