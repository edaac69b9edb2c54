/*
 * The command line of the compiled model:
 *   ./net [--weights FILE] [--input NAME=FILE]... [--output NAME=FILE]...
 *         [--seed S] [--bench N [--warmup W]] [--trace FILE.json]
 *         [--profile FILE.json [--repeats R]] [--verbose]
 * Inputs are read from .npy (float32 '<f4', C order) or ONNX TensorProto .pb
 * files; inputs not given are filled with random numbers in [-1, 1) drawn
 * from --seed (default 1). --output writes an output as .npy. --bench
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

static int shape_mismatch(const char *path, int rank, const long long *dims, int got_rank,
                          const long long *got)
{
  fprintf(stderr, "net: %s: shape ", path);
  print_shape(stderr, got_rank, got);
  fprintf(stderr, " does not match the input's ");
  print_shape(stderr, rank, dims);
  fputc('\n', stderr);
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

static float float_le(const unsigned char *p)
{
  uint32_t bits = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  float v;
  memcpy(&v, &bits, 4);
  return v;
}

/* .npy, versions 1 to 3: magic, version, header length, a Python dict. */
static int parse_npy(const unsigned char *p, size_t size, const char *path, int rank,
                     const long long *dims, float *out)
{
  size_t header_len, start;
  if (size < 10 || memcmp(p, "\x93NUMPY", 6) != 0) {
    fprintf(stderr, "net: %s: not a .npy file\n", path);
    return -1;
  }
  if (p[6] == 1) {
    header_len = (size_t)p[8] | (size_t)p[9] << 8;
    start = 10;
  } else {
    if (size < 12) {
      fprintf(stderr, "net: %s: truncated .npy header\n", path);
      return -1;
    }
    header_len = (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24;
    start = 12;
  }
  if (start + header_len > size || header_len > 4096) {
    fprintf(stderr, "net: %s: truncated .npy header\n", path);
    return -1;
  }
  char header[4097];
  memcpy(header, p + start, header_len);
  header[header_len] = 0;
  if (!strstr(header, "'descr': '<f4'") || !strstr(header, "'fortran_order': False")) {
    fprintf(stderr, "net: %s: expected float32 ('<f4') data in C order\n", path);
    return -1;
  }
  const char *s = strstr(header, "'shape': (");
  if (!s) {
    fprintf(stderr, "net: %s: no shape in the .npy header\n", path);
    return -1;
  }
  s += strlen("'shape': (");
  long long got[8];
  int got_rank = 0;
  while (*s && *s != ')') {
    char *end;
    long long d = strtoll(s, &end, 10);
    if (end == s)
      break;
    if (got_rank == 8) {
      fprintf(stderr, "net: %s: too many dimensions\n", path);
      return -1;
    }
    got[got_rank++] = d;
    s = end;
    while (*s == ',' || *s == ' ')
      s++;
  }
  if (!same_shape(rank, dims, got_rank, got))
    return shape_mismatch(path, rank, dims, got_rank, got);
  long long n = numel_of(rank, dims);
  if (size - start - header_len < (size_t)n * 4) {
    fprintf(stderr, "net: %s: truncated data\n", path);
    return -1;
  }
  for (long long i = 0; i < n; i++)
    out[i] = float_le(p + start + header_len + 4 * i);
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

/* ONNX TensorProto: dims (1), data_type (2), float_data (4), raw_data (9). */
static int parse_pb(const unsigned char *p, size_t size, const char *path, int rank,
                    const long long *dims, float *out)
{
  const unsigned char *end = p + size, *raw = NULL;
  size_t raw_len = 0;
  long long got[8], n = numel_of(rank, dims), nfloats = 0;
  int got_rank = 0;
  uint64_t dtype = 0;
  while (p < end) {
    uint64_t key, v;
    if (!read_varint(&p, end, &key))
      goto bad;
    int field = (int)(key >> 3), wire = (int)(key & 7);
    if (wire == 0) {
      if (!read_varint(&p, end, &v))
        goto bad;
      if (field == 1 && got_rank < 8)
        got[got_rank++] = (long long)v;
      else if (field == 1)
        goto bad;
      if (field == 2)
        dtype = v;
    } else if (wire == 2) {
      if (!read_varint(&p, end, &v) || v > (uint64_t)(end - p))
        goto bad;
      const unsigned char *body = p;
      p += v;
      if (field == 1) {
        const unsigned char *q = body;
        while (q < p) {
          uint64_t d;
          if (got_rank == 8 || !read_varint(&q, p, &d))
            goto bad;
          got[got_rank++] = (long long)d;
        }
      } else if (field == 4) {
        for (uint64_t i = 0; i + 4 <= v; i += 4)
          if (nfloats < n)
            out[nfloats++] = float_le(body + i);
      } else if (field == 9) {
        raw = body;
        raw_len = (size_t)v;
      }
    } else if (wire == 5) {
      if (end - p < 4)
        goto bad;
      if (field == 4 && nfloats < n)
        out[nfloats++] = float_le(p);
      p += 4;
    } else if (wire == 1) {
      if (end - p < 8)
        goto bad;
      p += 8;
    } else {
      goto bad;
    }
  }
  if (dtype != 1) {
    fprintf(stderr, "net: %s: tensor data type %llu is not float\n", path, (unsigned long long)dtype);
    return -1;
  }
  if (!same_shape(rank, dims, got_rank, got))
    return shape_mismatch(path, rank, dims, got_rank, got);
  if (raw) {
    if (raw_len != (size_t)n * 4) {
      fprintf(stderr, "net: %s: raw_data holds %zu bytes, expected %lld\n", path, raw_len, n * 4);
      return -1;
    }
    for (long long i = 0; i < n; i++)
      out[i] = float_le(raw + 4 * i);
  } else if (nfloats != n) {
    fprintf(stderr, "net: %s: %lld values, expected %lld\n", path, nfloats, n);
    return -1;
  }
  return 0;
bad:
  fprintf(stderr, "net: %s: malformed TensorProto\n", path);
  return -1;
}

static int read_input(const char *path, int rank, const long long *dims, float *out)
{
  size_t size = 0;
  unsigned char *data = read_whole_file(path, &size);
  if (!data)
    return -1;
  int status = size >= 6 && memcmp(data, "\x93NUMPY", 6) == 0
                   ? parse_npy(data, size, path, rank, dims, out)
                   : parse_pb(data, size, path, rank, dims, out);
  free(data);
  return status;
}

static int write_npy(const char *path, int rank, const long long *dims, const float *data)
{
  char header[256];
  int len = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
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
  long long n = numel_of(rank, dims);
  int ok = fwrite(preamble, 1, 10, f) == 10 && fwrite(header, 1, (size_t)len, f) == (size_t)len &&
           fwrite(data, sizeof(float), (size_t)n, f) == (size_t)n;
  if (fclose(f) != 0)
    ok = 0;
  if (!ok)
    fprintf(stderr, "net: cannot write %s: %s\n", path, strerror(errno));
  return ok ? 0 : -1;
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

static int bench(net_ctx *c, const float *const *inputs, float *const *outputs, int runs, int warmup)
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

  float *in[64] = {0}, *out[64] = {0};
  uint64_t state = seed;
  for (int i = 0; i < nin; i++) {
    long long n = numel_of(net_input_rank(i), net_input_dims(i));
    if (!(in[i] = malloc((size_t)n * sizeof(float) + 1)))
      return 2;
    if (input_file[i]) {
      if (read_input(input_file[i], net_input_rank(i), net_input_dims(i), in[i]) != 0)
        return 1;
    } else {
      for (long long j = 0; j < n; j++)
        in[i][j] = (float)((double)(next_random(&state) >> 11) / 4503599627370496.0 - 1.0);
    }
  }
  for (int i = 0; i < nout; i++)
    if (!(out[i] = malloc((size_t)numel_of(net_output_rank(i), net_output_dims(i)) * sizeof(float) + 1)))
      return 2;

  char *beside = weights ? NULL : weights_beside(argv[0]);
  net_ctx *c = NULL;
  if (net_create(&c, weights ? weights : beside) != 0)
    goto done;
  if (verbose)
    describe(c);
  if (net_run(c, (const float *const *)in, out) != 0)
    goto done;
  if (runs > 0 && bench(c, (const float *const *)in, out, runs, warmup) != 0)
    goto done;
  if (trace && trace_run(c, trace) != 0)
    goto done;
  if (profile && net_profile(c, profile, repeats) != 0)
    goto done;
  status = 0;
  for (int i = 0; i < nout; i++) {
    if (output_file[i]) {
      if (write_npy(output_file[i], net_output_rank(i), net_output_dims(i), out[i]) != 0)
        status = 1;
    } else if (runs == 0) {
      long long n = numel_of(net_output_rank(i), net_output_dims(i));
      double sum = 0;
      for (long long j = 0; j < n; j++)
        sum += out[i][j];
      printf("%s: f32", net_output_name(i));
      print_shape(stdout, net_output_rank(i), net_output_dims(i));
      printf(" mean=%.6g first=%.6g\n", n ? sum / n : 0.0, n ? out[i][0] : 0.0);
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
