/*
 * limits.c - checking a model against the limits of ir.h. The constants
 * live in ir.h so that every stage (and the documentation) sees one set;
 * the checks live here so that every stage words its errors the same way.
 */
#include <string.h>

#include "ir.h"

/* The product of the nonzero dims, which strides multiply even when
   another dim is 0; false when a dim is negative or it overflows int64. */
static bool stride_extent(int rank, const int64_t *dims, int64_t *extent, bool *empty) {
  *extent = 1;
  *empty = false;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0)
      return false;
    if (dims[i] == 0)
      *empty = true;
    else if (__builtin_mul_overflow(*extent, dims[i], extent))
      return false;
  }
  return true;
}

bool shape_numel(int rank, const int64_t *dims, int64_t *count) {
  int64_t extent;
  bool empty;
  if (!stride_extent(rank, dims, &extent, &empty))
    return false;
  *count = empty ? 0 : extent;
  return true;
}

bool shape_fits(int rank, const int64_t *dims) {
  int64_t extent;
  bool empty;
  return stride_extent(rank, dims, &extent, &empty) && extent <= IR_MAX_ELEMENTS;
}

/* No tensor can be bigger than the program that holds it. */
static int64_t limit_tensor_bytes(const Graph *g) {
  return g->max_memory < LIMIT_TENSOR_BYTES ? g->max_memory : LIMIT_TENSOR_BYTES;
}

/* "[2147483648,2147483648]" into buf. */
static const char *dims_str(int rank, const int64_t *dims, char *buf, size_t size) {
  size_t len = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < rank && len < size; i++)
    len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (len < size)
    snprintf(buf + len, size - len, "]");
  return buf;
}

/* "output 'y'", or `what` alone when there is no name. */
static const char *tensor_label(const char *what, const char *name, char *buf, size_t size) {
  if (name)
    snprintf(buf, size, "%s '%s'", what, name);
  else
    snprintf(buf, size, "%s", what);
  return buf;
}

bool check_tensor_size(const Graph *g, const Node *n, const char *what, const char *name,
                       DType dt, int rank, const int64_t *dims) {
  int64_t count;
  char shape[IR_MAX_RANK * 24 + 4];
  /* Built only for a message: set_out calls this for every inferred output. */
  char label[LIMIT_NAME_BYTES + 64];
  if (!shape_numel(rank, dims, &count)) {
    bool empty = false;
    for (int i = 0; i < rank; i++)
      empty |= dims[i] == 0;
    ir_error(g, n, "%s of shape %s %s, over the limit of %lld elements per tensor",
             tensor_label(what, name, label, sizeof label),
             dims_str(rank, dims, shape, sizeof shape),
             empty ? "is empty but its other dimensions multiply past 2^63"
                   : "has more than 2^63 elements",
             (long long)LIMIT_TENSOR_ELEMENTS);
    return false;
  }
  if (count > LIMIT_TENSOR_ELEMENTS) {
    ir_error(g, n, "%s has %lld elements, over the limit of %lld elements per tensor",
             tensor_label(what, name, label, sizeof label), (long long)count,
             (long long)LIMIT_TENSOR_ELEMENTS);
    return false;
  }
  /* Under the element limit, bytes fit in int64 whatever the type. */
  int64_t bytes = count * (int64_t)dtype_size(dt);
  int64_t limit = limit_tensor_bytes(g);
  if (bytes > limit) {
    ir_error(g, n, "%s has %lld bytes (%lld elements of %s), over the limit of %lld bytes per "
             "tensor%s", tensor_label(what, name, label, sizeof label), (long long)bytes,
             (long long)count, dtype_name(dt), (long long)limit,
             limit < LIMIT_TENSOR_BYTES ? " (--max-memory)" : "");
    return false;
  }
  return true;
}

bool check_name_length(const Graph *g, const char *what, const char *name) {
  size_t len = strlen(name);
  if (len <= LIMIT_NAME_BYTES)
    return true;
  /* Enough of the name to find it, without flooding the terminal. */
  char start[33];
  size_t k = 0;
  for (; k < sizeof start - 1; k++)
    start[k] = name[k] >= 0x20 && name[k] < 0x7f ? name[k] : '?';
  start[k] = '\0';
  ir_error(g, NULL, "%s is %zu bytes long ('%s...'), over the limit of %d bytes per name", what,
           len, start, LIMIT_NAME_BYTES);
  return false;
}
