/*
 * cost_key.c - the key that names a schedule unit in a measured-cost file:
 * `net --profile` writes it (the emitter prints it into net.c) and the
 * cost model looks it up (passes/cost_db.c), so both sides compute it here.
 *
 * A key names what decides a unit's cost and nothing else: the operator,
 * the type and layout of every input and output, the resolved window, the
 * fused activation and the remaining attributes. Tensor and node names are
 * left out, so that identical layers share one entry. Keys are data in
 * profile files: their spelling must not change.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct KeyBuf {
  char *p;
  size_t size;
  int len; /* what the whole key needs, even beyond size */
} KeyBuf;

__attribute__((format(printf, 2, 3))) static void put(KeyBuf *k, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t used = (size_t)k->len < k->size ? (size_t)k->len : k->size;
  int n = vsnprintf(k->p ? k->p + used : NULL, k->size - used, fmt, ap);
  va_end(ap);
  if (n > 0)
    k->len += n;
}

static void put_ints(KeyBuf *k, const char *sep, int count, const int64_t *v) {
  for (int i = 0; i < count; i++)
    put(k, "%s%lld", i ? sep : "", (long long)v[i]);
}

static bool contiguous(const Tensor *t) {
  int64_t expect = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    if (t->dims[d] > 1 && t->strides[d] != expect)
      return false;
    expect *= t->dims[d];
  }
  return true;
}

/* "f32[1,64,56,56]", with the strides of a strided view: they change the
   kernel (a convolution writing into a concatenation's slice). */
static void put_tensor(KeyBuf *k, const Tensor *t) {
  if (!t) {
    put(k, "-");
    return;
  }
  put(k, "%s[", dtype_name(t->dtype));
  put_ints(k, ",", t->rank, t->dims);
  put(k, "]");
  if (!contiguous(t)) {
    put(k, "/");
    put_ints(k, ",", t->rank, t->strides);
  }
}

/* Conv, ConvTranspose, MaxPool, AveragePool (not LpPool: its key has
   always spelt the attributes). */
static bool has_window(OpKind op) { return op_info(op)->params == PARAMS_WINDOW; }

static void put_window(KeyBuf *k, const Node *n) {
  const Window *w = &n->win;
  int s = w->nspatial;
  put(k, "|k=");
  put_ints(k, "x", s, w->kernel);
  put(k, "|s=");
  put_ints(k, "x", s, w->stride);
  put(k, "|d=");
  put_ints(k, "x", s, w->dilation);
  put(k, "|p=");
  put_ints(k, ",", s, w->pad_begin);
  put(k, ",");
  put_ints(k, ",", s, w->pad_end);
  if (n->op == OP_CONV_TRANSPOSE) {
    put(k, "|op=");
    put_ints(k, "x", s, w->output_padding);
  }
  if (n->op == OP_CONV || n->op == OP_CONV_TRANSPOSE)
    put(k, "|g=%lld", (long long)(w->group > 0 ? w->group : 1));
  if (n->op == OP_MAX_POOL || n->op == OP_AVERAGE_POOL)
    put(k, "|ceil=%d|cip=%d", w->ceil_mode, w->count_include_pad);
}

/* The fused activation, as "|act=relu" or with its parameters
   "|act=clip(0,6)": the IR's name of it without underscores. */
static void put_act(KeyBuf *k, const Node *n) {
  const char *name = act_name(n->act);
  if (!name)
    return;
  put(k, "|act=");
  for (const char *c = name; *c; c++)
    if (*c != '_')
      put(k, "%c", *c);
  unsigned traits = op_info(act_op(n->act))->traits;
  if (traits & T_ACT_ALPHA)
    put(k, "(%.9g", n->act_alpha);
  if (traits & T_ACT_BETA)
    put(k, ",%.9g", n->act_beta);
  if (traits & T_ACT_ALPHA)
    put(k, ")");
}

static int by_attr_name(const void *a, const void *b) {
  return strcmp((*(const Attr *const *)a)->name, (*(const Attr *const *)b)->name);
}

static void put_attr(KeyBuf *k, const Attr *a) {
  put(k, "|%s=", a->name);
  switch (a->kind) {
  case ATTR_INT: put(k, "%lld", (long long)a->i); break;
  case ATTR_FLOAT: put(k, "%.9g", a->f); break;
  case ATTR_STRING: put(k, "%s", a->s ? a->s : ""); break;
  case ATTR_INTS: put_ints(k, ",", a->n, a->ints); break;
  case ATTR_FLOATS:
    for (int i = 0; i < a->n; i++)
      put(k, "%s%.9g", i ? "," : "", a->floats[i]);
    break;
  default: put(k, "?"); break; /* tensors, graphs: their kind is what matters */
  }
}

/* Attributes in name order; for windowed operators the resolved window
   stands for them (pads and auto_pad spell the same window). */
static void put_attrs(KeyBuf *k, const Node *n) {
  if (has_window(n->op) || n->nattrs <= 0)
    return;
  const Attr *sorted[64];
  int count = 0;
  for (int i = 0; i < n->nattrs && count < 64; i++)
    sorted[count++] = &n->attrs[i];
  qsort(sorted, (size_t)count, sizeof sorted[0], by_attr_name);
  for (int i = 0; i < count; i++)
    put_attr(k, sorted[i]);
}

int unit_cost_key(const Node *n, char *buf, size_t size) {
  KeyBuf k = {buf, buf ? size : 0, 0};
  if (k.p && k.size)
    k.p[0] = '\0';
  put(&k, "%s|", op_name(n->op));
  for (int i = 0; i < n->nin; i++) {
    if (i)
      put(&k, ",");
    put_tensor(&k, n->in[i]);
  }
  put(&k, "->");
  for (int i = 0; i < n->nout; i++) {
    if (i)
      put(&k, ",");
    put_tensor(&k, n->out[i]);
  }
  if (has_window(n->op))
    put_window(&k, n);
  put_act(&k, n);
  put_attrs(&k, n);
  return k.len;
}

