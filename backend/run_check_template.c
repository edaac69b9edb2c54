/*
 * Run-time shape checks. opc compiled some nodes for the value of a shape
 * input that their output's declared shape decides (Reshape's shape,
 * Unsqueeze's axes, Split's sizes, ...), while the caller still gives that
 * input. Before any work is queued, run() checks the value given: it must
 * make the shape this program was compiled for, as the operator reads it
 * (a -1 or 0 in a shape, negative or unsorted axes), or the run fails
 * naming the node, its operator and the input.
 */
enum run_check_kind {
  RUN_EQUAL,     /* the values must be `want` */
  RUN_RESHAPE,   /* flag: allowzero */
  RUN_SQUEEZE,
  RUN_UNSQUEEZE,
  RUN_EXPAND,
  RUN_TILE,
  RUN_REDUCE     /* keepdims=1; flag: noop_with_empty_axes */
};
enum run_check_type { RUN_I64, RUN_I32, RUN_F32, RUN_F64 };
enum { RUN_MAX = 16 }; /* values of one input, dims of one shape */

struct run_check {
  const char *node, *op, *input, *pinned_by;
  int kind, flag, type;
  int count;                  /* the input's elements */
  int data_rank;              /* the node's data input */
  long long data_dims[8];
  int nwant;                  /* what the values must make */
  long long want[RUN_MAX];
};

/* The input's values as int64; a float out of range reads as -1 << 62,
   which no check accepts. */
static void run_check_read(const struct run_check *k, const void *p, long long *v)
{
  for (int i = 0; i < k->count; i++) {
    double x = 0;
    switch (k->type) {
    case RUN_I64: v[i] = ((const long long *)p)[i]; continue;
    case RUN_I32: v[i] = ((const int *)p)[i]; continue;
    case RUN_F32: x = ((const float *)p)[i]; break;
    default: x = ((const double *)p)[i]; break;
    }
    v[i] = x > -1e15 && x < 1e15 ? (long long)x : -(1LL << 62);
  }
}

/* axis in [-rank, rank), counted from 0; -1 when out of range. */
static int run_check_axis(long long axis, int rank)
{
  if (axis < -rank || axis >= rank)
    return -1;
  return (int)(axis < 0 ? axis + rank : axis);
}

static int run_check_reshape(const struct run_check *k, const long long *v, long long *out)
{
  long long total = 1, known = 1;
  int infer = -1, zero = 0;
  for (int i = 0; i < k->data_rank; i++)
    total *= k->data_dims[i]; /* the data's size: no overflow */
  for (int i = 0; i < k->count; i++) {
    if (v[i] == -1 && infer < 0) {
      infer = i;
      continue;
    }
    if (v[i] < 0 || (v[i] == 0 && !k->flag && i >= k->data_rank))
      return -1;
    out[i] = v[i] == 0 && !k->flag ? k->data_dims[i] : v[i];
    zero |= v[i] == 0;
    if (__builtin_mul_overflow(known, out[i], &known))
      return -1;
  }
  if (infer >= 0) {
    if ((zero && k->flag) || known == 0 || total % known != 0)
      return -1;
    out[infer] = total / known;
  } else if (known != total) {
    return -1;
  }
  return k->count;
}

static int run_check_squeeze(const struct run_check *k, const long long *v, long long *out)
{
  int removed[8] = {0}, rank = 0;
  for (int i = 0; i < k->count; i++) {
    int a = run_check_axis(v[i], k->data_rank);
    if (a < 0 || removed[a] || k->data_dims[a] != 1)
      return -1;
    removed[a] = 1;
  }
  for (int i = 0; i < k->data_rank; i++)
    if (!removed[i])
      out[rank++] = k->data_dims[i];
  return rank;
}

static int run_check_unsqueeze(const struct run_check *k, const long long *v, long long *out)
{
  int added[RUN_MAX] = {0}, rank = k->data_rank + k->count, j = 0;
  if (rank > 8)
    return -1;
  for (int i = 0; i < k->count; i++) {
    int a = run_check_axis(v[i], rank);
    if (a < 0 || added[a])
      return -1;
    added[a] = 1;
  }
  for (int i = 0; i < rank; i++)
    out[i] = added[i] ? 1 : k->data_dims[j++];
  return rank;
}

/* Broadcast of the data's dims with the values, aligned on the right. */
static int run_check_expand(const struct run_check *k, const long long *v, long long *out)
{
  int rank = k->data_rank > k->count ? k->data_rank : k->count;
  for (int i = 0; i < rank; i++) {
    int di = i - (rank - k->data_rank), vi = i - (rank - k->count);
    long long a = di >= 0 ? k->data_dims[di] : 1, b = vi >= 0 ? v[vi] : 1;
    if (b < 0)
      return -1;
    if (a == b || b == 1)
      out[i] = a;
    else if (a == 1)
      out[i] = b;
    else
      return -1;
  }
  return rank;
}

static int run_check_tile(const struct run_check *k, const long long *v, long long *out)
{
  if (k->count != k->data_rank)
    return -1;
  for (int i = 0; i < k->count; i++)
    if (v[i] < 0 || __builtin_mul_overflow(k->data_dims[i], v[i], &out[i]))
      return -1;
  return k->count;
}

static int run_check_reduce(const struct run_check *k, const long long *v, long long *out)
{
  for (int i = 0; i < k->data_rank; i++)
    out[i] = k->count == 0 && !k->flag ? 1 : k->data_dims[i];
  for (int i = 0; i < k->count; i++) {
    int a = run_check_axis(v[i], k->data_rank);
    if (a < 0)
      return -1;
    out[a] = 1;
  }
  return k->data_rank;
}

/* The dims the node makes of values v (the values themselves for
   RUN_EQUAL); -1 where ONNX refuses them. */
static int run_check_dims(const struct run_check *k, const long long *v, long long *out)
{
  switch (k->kind) {
  case RUN_RESHAPE: return run_check_reshape(k, v, out);
  case RUN_SQUEEZE: return run_check_squeeze(k, v, out);
  case RUN_UNSQUEEZE: return run_check_unsqueeze(k, v, out);
  case RUN_EXPAND: return run_check_expand(k, v, out);
  case RUN_TILE: return run_check_tile(k, v, out);
  case RUN_REDUCE: return run_check_reduce(k, v, out);
  default:
    memcpy(out, v, (size_t)k->count * sizeof *v);
    return k->count;
  }
}

/* "[2, 3]" into buf. */
static const char *run_check_list(const long long *v, int n, char *buf, size_t size)
{
  size_t at = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && at < size; i++)
    at += (size_t)snprintf(buf + at, size - at, "%s%lld", i ? ", " : "", v[i]);
  return buf;
}

/* 0 when the value at p passes; else 1, with the message in error. */
static int run_check_fails(const struct run_check *k, const void *p, char *error, size_t size)
{
  long long v[RUN_MAX] = {0}, dims[RUN_MAX] = {0};
  char given[RUN_MAX * 22], made[RUN_MAX * 22], want[RUN_MAX * 22];
  run_check_read(k, p, v);
  int rank = run_check_dims(k, v, dims);
  if (rank == k->nwant && memcmp(dims, k->want, (size_t)rank * sizeof *dims) == 0)
    return 0;
  run_check_list(v, k->count, given, sizeof given);
  run_check_list(k->want, k->nwant, want, sizeof want);
  if (k->kind == RUN_EQUAL)
    snprintf(error, size, "node '%s' (%s): input '%s' is [%s], but this program was compiled "
             "for [%s] (from %s)", k->node, k->op, k->input, given, want, k->pinned_by);
  else if (rank < 0)
    snprintf(error, size, "node '%s' (%s): input '%s' is [%s], which %s does not take here; "
             "this program was compiled for output shape [%s] (%s)", k->node, k->op,
             k->input, given, k->op, want, k->pinned_by);
  else
    snprintf(error, size, "node '%s' (%s): input '%s' is [%s], which makes output shape [%s], "
             "but this program was compiled for [%s] (%s)", k->node, k->op, k->input, given,
             run_check_list(dims, rank, made, sizeof made), want, k->pinned_by);
  return 1;
}
