/*
 * main_common.c - what the ready-made mains of emitted programs share
 * (main_template.c, serve_main_template.c): writing .npy files, float16
 * and bfloat16 bits, reading an element as a double, random inputs. embed_text.py puts
 * these lines where a template includes this file, without this comment.
 * Needs main_inputs.c before it. (The blank line after this comment stays.)
 */


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
  for (int i = 0; i < rank; i++)
    if (dims[i] < 0) {
      fprintf(stderr, "net: cannot write %s: dim %d is %lld\n", path, i, dims[i]);
      return -1;
    }
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "net: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  unsigned char preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff),
                                (unsigned char)(len >> 8)};
  size_t bytes = (size_t)numel_of(rank, dims) * (size_t)element_types[type].size;
  errno = 0; /* a short write need not set it */
  int ok = fwrite(preamble, 1, 10, f) == 10 && fwrite(header, 1, (size_t)len, f) == (size_t)len &&
           fwrite(data, 1, bytes, f) == bytes;
  if (fclose(f) != 0)
    ok = 0;
  if (!ok)
    fprintf(stderr, "net: cannot write %s: %s\n", path, errno ? strerror(errno) : "short write");
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

/* A bfloat16's value, from its bits: the high half of a float32's. */
static float bfloat16_value(uint16_t h)
{
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
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
  if (strcmp(name, "bfloat16") == 0) /* the high half of a float32 */
    return bfloat16_value(((const uint16_t *)data)[i]);
  if (strcmp(name, "int64") == 0)
    return (double)((const int64_t *)data)[i];
  if (strcmp(name, "int32") == 0)
    return ((const int32_t *)data)[i];
  if (strcmp(name, "int16") == 0)
    return ((const int16_t *)data)[i];
  if (strcmp(name, "int8") == 0)
    return ((const int8_t *)data)[i];
  if (strcmp(name, "uint64") == 0)
    return (double)((const uint64_t *)data)[i];
  if (strcmp(name, "uint32") == 0)
    return ((const uint32_t *)data)[i];
  if (strcmp(name, "uint16") == 0)
    return ((const uint16_t *)data)[i];
  return ((const uint8_t *)data)[i]; /* uint8, bool */
}

/* Fills an input not given: floating ones with random numbers in [-1, 1). */
static void fill_input(int type, void *data, long long n, uint64_t *state)
{
  const char *name = element_types[type].name;
  memset(data, 0, (size_t)n * (size_t)element_types[type].size);
  int bf16 = strcmp(name, "bfloat16") == 0;
  for (long long j = 0; j < n && (name[0] == 'f' || bf16); j++) {
    double r = (double)(next_random(state) >> 11) / 4503599627370496.0 - 1.0;
    if (strcmp(name, "float32") == 0)
      ((float *)data)[j] = (float)r;
    else if (strcmp(name, "float64") == 0)
      ((double *)data)[j] = r;
    else if (bf16) { /* truncated: any value in [-1, 1) will do */
      float f = (float)r;
      uint32_t x;
      memcpy(&x, &f, 4);
      ((uint16_t *)data)[j] = (uint16_t)(x >> 16);
    } else
      ((uint16_t *)data)[j] = half_bits_of((float)r);
  }
}
