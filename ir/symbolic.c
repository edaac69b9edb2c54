/*
 * symbolic.c - what opc knows at compile time of a run-time integer value
 * computed from the dims of a bounded tensor (ir/bounds.c).
 *
 * Shape and Size of a bounded tensor run, reading its dims of the run, so
 * their outputs and the shape arithmetic on them (Gather, Unsqueeze,
 * Concat, Add, ...) are run-time values. Each element of such a small
 * integer tensor is still known symbolically: `scale * run(origin) +
 * offset`, where run(origin) is the run-time size of a bound's origin
 * (Tensor.bound_origin), or a constant when scale is 0. Tensor.sym holds
 * one SymValue per element; NULL where any element is unknown.
 *
 * The run-time kernels still compute these values on the device, for any
 * reader that needs the value itself; the symbols let a reader whose
 * output shape depends on the value be compiled: a Reshape whose target
 * shape names the run-time size of its data's origin where the data has
 * it (ir/bounds.c checks it). Only exact steps are followed: Div and Mul
 * by constants that keep the result linear, and sums of one origin.
 *
 * sym_upper_bound gives the most such a value can be (each run within its
 * bound), also through Min and ReduceMin, which the symbols do not follow:
 * a TopK's run-time K of min(1000, n) is planned at 1000, not at n's bound.
 */
#include <string.h>

#include "shapes.h"

/* Tensors of more elements are no shapes: not followed. */
enum { SYM_MAX_ELEMENTS = 64 };

static SymValue sym_const(int64_t v) { return (SymValue){.origin = NULL, .scale = 0, .offset = v}; }

/* Element i of t as a symbol: its constant value, or its symbol. */
static bool element(const Tensor *t, int64_t i, SymValue *out) {
  if (t->i64 && dtype_is_integer(t->dtype)) {
    *out = sym_const(t->i64[i]);
    return true;
  }
  if (t->sym) {
    *out = t->sym[i];
    return true;
  }
  return false;
}

/* Whether every element of t is known, constant or symbolic, and t is a
   small integer tensor. */
static bool known(const Tensor *t) {
  return t && dtype_is_integer(t->dtype) && tensor_numel(t) <= SYM_MAX_ELEMENTS &&
         (t->i64 || t->sym);
}

static SymValue *alloc_sym(Graph *g, const Tensor *t) {
  int64_t count = tensor_numel(t);
  return arena_alloc(g->arena, sizeof(SymValue) * (size_t)(count ? count : 1));
}

/* Shape of a bounded tensor: its exact dims, and run(origin) on its
   run-time axis. */
static SymValue *of_shape(Graph *g, const Node *n, const Tensor *out) {
  const Tensor *x = n->in[0];
  int start, end;
  shape_range(n, x->rank, &start, &end);
  SymValue *s = alloc_sym(g, out);
  for (int d = start; d < end; d++)
    s[d - start] = d == x->bound_axis ? (SymValue){x->bound_origin, 1, 0} : sym_const(x->dims[d]);
  return s;
}

/* Size: the product of the exact dims times run(origin). */
static SymValue *of_size(Graph *g, const Node *n, const Tensor *out) {
  const Tensor *x = n->in[0];
  int64_t scale = 1;
  for (int d = 0; d < x->rank; d++)
    if (d != x->bound_axis && __builtin_mul_overflow(scale, x->dims[d], &scale))
      return NULL;
  SymValue *s = alloc_sym(g, out);
  s[0] = (SymValue){x->bound_origin, scale, 0};
  return s;
}

/* Nodes that move elements: output element i is input element from[i]
   of input `src`. Returns the count, or -1 where this is not followed. */
static int64_t moved(const Node *n, int64_t *from, int *src) {
  const Tensor *out = n->out[0], *x = n->in[0];
  int64_t count = tensor_numel(out);
  *src = 0;
  switch (n->op) {
  case OP_IDENTITY:
  case OP_RESHAPE:
  case OP_FLATTEN:
  case OP_SQUEEZE:
  case OP_UNSQUEEZE:
  case OP_CAST:
    for (int64_t i = 0; i < count; i++)
      from[i] = i;
    return count;
  case OP_SLICE:
    if (x->rank != 1 || n->p.slice.run_time)
      return -1;
    for (int64_t i = 0; i < count; i++)
      from[i] = n->p.slice.start[0] + i * n->p.slice.step[0];
    return count;
  case OP_GATHER: {
    const Tensor *idx = n->in[1];
    if (x->rank != 1 || !idx->i64 || tensor_numel(idx) != count)
      return -1;
    for (int64_t i = 0; i < count; i++) {
      int64_t k = idx->i64[i] < 0 ? idx->i64[i] + x->dims[0] : idx->i64[i];
      if (k < 0 || k >= x->dims[0])
        return -1;
      from[i] = k;
    }
    return count;
  }
  default:
    return -1;
  }
}

static SymValue *of_moved(Graph *g, const Node *n, const Tensor *out) {
  int64_t from[SYM_MAX_ELEMENTS];
  int src;
  int64_t count = moved(n, from, &src);
  if (count < 0 || !known(n->in[src]))
    return NULL;
  SymValue *s = alloc_sym(g, out);
  for (int64_t i = 0; i < count; i++)
    if (!element(n->in[src], from[i], &s[i]))
      return NULL;
  return s;
}

/* Concat of 1-D (or scalar-like) parts along axis 0. */
static SymValue *of_concat(Graph *g, const Node *n, const Tensor *out) {
  if (out->rank != 1)
    return NULL;
  SymValue *s = alloc_sym(g, out);
  int64_t at = 0;
  for (int i = 0; i < n->nin; i++) {
    const Tensor *t = n->in[i];
    if (!t)
      continue;
    if (!known(t))
      return NULL;
    for (int64_t k = 0; k < tensor_numel(t); k++)
      if (!element(t, k, &s[at++]))
        return NULL;
  }
  return at == tensor_numel(out) ? s : NULL;
}

/* a op b, where the result stays linear in one origin and exact. */
static bool arith(OpKind op, SymValue a, SymValue b, SymValue *r) {
  if (op == OP_SUB) {
    if (__builtin_mul_overflow(b.scale, -1, &b.scale) ||
        __builtin_mul_overflow(b.offset, -1, &b.offset))
      return false;
    op = OP_ADD;
  }
  if (op == OP_MUL && a.scale != 0) {
    SymValue t = a;
    a = b, b = t; /* the constant first, if there is one */
  }
  switch (op) {
  case OP_ADD:
    if (a.scale && b.scale && a.origin != b.origin)
      return false; /* two origins: no one symbol */
    r->origin = a.scale ? a.origin : b.origin;
    if (__builtin_add_overflow(a.scale, b.scale, &r->scale) ||
        __builtin_add_overflow(a.offset, b.offset, &r->offset))
      return false;
    break;
  case OP_MUL:
    if (a.scale != 0)
      return false; /* run(X) * run(Y) */
    r->origin = b.origin;
    if (__builtin_mul_overflow(b.scale, a.offset, &r->scale) ||
        __builtin_mul_overflow(b.offset, a.offset, &r->offset))
      return false;
    break;
  case OP_DIV:
    if (b.scale != 0 || b.offset == 0 || a.scale % b.offset || a.offset % b.offset)
      return false; /* exact only when the divisor divides both terms */
    *r = (SymValue){a.origin, a.scale / b.offset, a.offset / b.offset};
    break;
  default:
    return false;
  }
  if (r->scale == 0)
    r->origin = NULL;
  return true;
}

/* Add, Sub, Mul, Div of operands of one value or of the output's count. */
static SymValue *of_arith(Graph *g, const Node *n, const Tensor *out) {
  const Tensor *a = n->in[0], *b = n->in[1];
  int64_t count = tensor_numel(out);
  if (!known(a) || !known(b) || (!a->sym && !b->sym))
    return NULL;
  int64_t na = tensor_numel(a), nb = tensor_numel(b);
  if ((na != 1 && na != count) || (nb != 1 && nb != count))
    return NULL;
  SymValue *s = alloc_sym(g, out);
  for (int64_t i = 0; i < count; i++) {
    SymValue x, y;
    if (!element(a, na == 1 ? 0 : i, &x) || !element(b, nb == 1 ? 0 : i, &y) ||
        !arith(n->op, x, y, &s[i]))
      return NULL;
  }
  return s;
}

/* Whether a == b in every run (*r 1) or in none (*r 0); false where that
   depends on the run. A run lies in [0, bound], so a symbol does not equal
   a constant outside the values it takes there (torch's expand_as tests
   each size against -1). */
static bool decided_equal(SymValue a, SymValue b, SymValue *r) {
  if (!a.scale && b.scale) {
    SymValue t = a;
    a = b, b = t; /* the symbol first */
  }
  *r = sym_const(0);
  if (!a.scale) { /* two constants */
    r->offset = a.offset == b.offset;
    return true;
  }
  if (b.scale)
    return a.origin == b.origin && a.scale == b.scale && (r->offset = a.offset == b.offset, true);
  int64_t at_zero = a.offset, at_bound = sym_at_bound(a);
  int64_t lo = at_zero < at_bound ? at_zero : at_bound, hi = at_zero ^ at_bound ^ lo;
  return b.offset < lo || b.offset > hi;
}

/* Equal of known operands, each element decided in every run; Where of a
   decided condition, each element the chosen operand's. */
static SymValue *of_choice(Graph *g, const Node *n, const Tensor *out) {
  int first = n->op == OP_WHERE;
  int64_t count = tensor_numel(out);
  for (int i = 0; i < n->nin; i++) {
    int64_t k = n->in[i] ? tensor_numel(n->in[i]) : 0;
    if (!known(n->in[i]) || (k != 1 && k != count))
      return NULL;
  }
  SymValue *s = alloc_sym(g, out);
  for (int64_t i = 0; i < count; i++) {
    SymValue v[3];
    for (int k = 0; k < n->nin; k++)
      if (!element(n->in[k], tensor_numel(n->in[k]) == 1 ? 0 : i, &v[k]))
        return NULL;
    if (first) { /* Where: the condition must be a constant */
      if (v[0].scale)
        return NULL;
      s[i] = v[0].offset ? v[1] : v[2];
    } else if (!decided_equal(v[0], v[1], &s[i])) {
      return NULL;
    }
  }
  return s;
}

/* The symbols of n's one output, or NULL. An output whose every element
   is a constant keeps them too: a Reshape reads them as its shape. */
static SymValue *infer_one(Graph *g, const Node *n, const Tensor *out) {
  if (!dtype_is_integer(out->dtype) || tensor_numel(out) > SYM_MAX_ELEMENTS)
    return NULL;
  switch (n->op) {
  case OP_SHAPE:
    return n->in[0]->bounded ? of_shape(g, n, out) : NULL;
  case OP_SIZE:
    return n->in[0]->bounded ? of_size(g, n, out) : NULL;
  case OP_CONCAT:
    return of_concat(g, n, out);
  case OP_ADD:
  case OP_SUB:
  case OP_MUL:
  case OP_DIV:
    return of_arith(g, n, out);
  case OP_CAST:
    return dtype_is_integer(n->in[0]->dtype) && n->in[0]->sym ? of_moved(g, n, out) : NULL;
  case OP_EQUAL:
    return n->nin == 2 && (n->in[0]->sym || n->in[1]->sym) ? of_choice(g, n, out) : NULL;
  case OP_WHERE:
    return n->nin == 3 && (n->in[1]->sym || n->in[2]->sym) ? of_choice(g, n, out) : NULL;
  default:
    return n->in[0] && n->in[0]->sym ? of_moved(g, n, out) : NULL;
  }
}

void infer_symbols(Graph *g, Node *n) {
  for (int i = 0; i < n->nout; i++)
    if (n->out[i])
      n->out[i]->sym = NULL;
  if (n->nout != 1 || !n->out[0] || tensor_is_const(n->out[0]))
    return;
  n->out[0]->sym = infer_one(g, n, n->out[0]);
}

bool sym_is_run(SymValue s) { return s.origin && s.scale == 1 && s.offset == 0; }

int64_t sym_at_bound(SymValue s) {
  if (!s.origin)
    return s.offset;
  return s.scale * s.origin->dims[s.origin->bound_axis] + s.offset;
}

/* Element i's most at run time: run(origin) lies in [0, its bound]. */
static int64_t element_upper_bound(const Tensor *t, int64_t i) {
  SymValue s;
  if (!known(t) || !element(t, i, &s))
    return INT64_MAX;
  return s.origin && s.scale < 0 ? s.offset : sym_at_bound(s);
}

int64_t sym_upper_bound(const Tensor *t) {
  if (!t || !dtype_is_integer(t->dtype) || tensor_numel(t) != 1)
    return INT64_MAX;
  int64_t most = element_upper_bound(t, 0);
  const Node *n = t->producer;
  if (most != INT64_MAX || !n)
    return most;
  switch (n->op) {
  case OP_RESHAPE:
  case OP_SQUEEZE:
  case OP_UNSQUEEZE:
  case OP_FLATTEN:
  case OP_IDENTITY:
    return sym_upper_bound(n->in[0]);
  case OP_CAST: /* from an integer (sym_upper_bound checks) into int64: kept */
    return t->dtype == DT_INT64 ? sym_upper_bound(n->in[0]) : INT64_MAX;
  case OP_MIN: /* the least of its operands' bounds; one element each */
    for (int k = 0; k < n->nin; k++) {
      int64_t b = sym_upper_bound(n->in[k]);
      most = b < most ? b : most;
    }
    return most;
  case OP_REDUCE_MIN: /* of every element: the least of their bounds */
    if (!n->in[0] || !known(n->in[0]))
      return INT64_MAX;
    for (int64_t i = 0; i < tensor_numel(n->in[0]); i++) {
      int64_t b = element_upper_bound(n->in[0], i);
      most = b < most ? b : most;
    }
    return most;
  default:
    return INT64_MAX;
  }
}

const char *sym_str(Graph *g, SymValue s) {
  if (!s.origin)
    return arena_printf(g->arena, "%lld", (long long)s.offset);
  const char *run = arena_printf(g->arena, "the run-time size of '%s'", s.origin->name);
  if (s.scale != 1)
    run = arena_printf(g->arena, "%lld * %s", (long long)s.scale, run);
  if (s.offset)
    run = arena_printf(g->arena, "%s %+lld", run, (long long)s.offset);
  return run;
}
