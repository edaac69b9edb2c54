/*
 * pin.c - shape inputs given at run time, pinned by a declared output shape.
 *
 * opc is a static compiler: Reshape's shape, Unsqueeze's axes, Split's
 * sizes and the like must be known when it runs. A model often feeds them
 * as graph inputs yet declares its outputs' static shapes. Where that
 * declared shape decides the input's value (up to the forms that make the
 * same shape: a -1 or 0 in a Reshape shape, negative or unsorted axes),
 * the node reads a constant of that value instead, and the graph input
 * stays one of the program's inputs: net_run checks, before it runs, that
 * the value given makes the shape the program was compiled for, and fails
 * naming the node, the operator and the input otherwise (RunCheck; the
 * check itself is backend/checks.c's emitted code).
 *
 * Only where the shape decides the computation: ReduceSum without
 * keepdims ([3,2,2] to [3,2] may reduce axis 1 or 2) or Resize's scales
 * (which enter the coordinates) stay compile-time inputs.
 */
#include <string.h>

#include "ir.h"

/* What pinning a node needs: the slot of its shape input, and the run-time
   check that guards it. */
typedef struct Pin {
  Graph *g;
  Node *n;
  Tensor *input;       /* the graph input it replaces */
  const Tensor *out;   /* the pinned output */
  const Tensor *data;  /* the node's data input, or NULL */
  int64_t value[IR_MAX_RANK * 2];
  int count;           /* elements of the input (its static size) */
} Pin;

static const int64_t *want_dims(const Pin *p) { return p->out->declared_dims; }
static int want_rank(const Pin *p) { return p->out->declared_rank; }

/* Reshape: the declared dims themselves, where they say it (a 0 reads as
   "copy the input's dim" unless allowzero). */
static bool derive_reshape(Pin *p, RunCheck *c) {
  int allowzero = (int)node_attr_int(p->n, "allowzero", 0);
  if (p->count != want_rank(p))
    return false;
  for (int i = 0; i < p->count; i++) {
    p->value[i] = want_dims(p)[i];
    if (p->value[i] == 0 && !allowzero)
      return false; /* a 0 would copy the input's dim: say no more than the model */
  }
  c->kind = RUN_CHECK_RESHAPE;
  c->flag = allowzero;
  return true;
}

/* Unsqueeze: the positions of the declared shape that the data's dims do
   not fill, matched from the left (any matching gives the same tensor). */
static bool derive_unsqueeze(Pin *p, RunCheck *c) {
  const Tensor *x = p->data;
  int r = want_rank(p), k = 0, j = 0;
  if (r != x->rank + p->count)
    return false;
  for (int i = 0; i < r; i++) {
    if (j < x->rank && want_dims(p)[i] == x->dims[j])
      j++;
    else if (want_dims(p)[i] == 1 && k < p->count)
      p->value[k++] = i;
    else
      return false;
  }
  c->kind = RUN_CHECK_UNSQUEEZE;
  return k == p->count && j == x->rank;
}

/* Squeeze: the data's axes of size 1 that the declared shape lacks. */
static bool derive_squeeze(Pin *p, RunCheck *c) {
  const Tensor *x = p->data;
  int k = 0, j = 0;
  if (want_rank(p) + p->count != x->rank)
    return false;
  for (int i = 0; i < x->rank; i++) {
    if (j < want_rank(p) && x->dims[i] == want_dims(p)[j])
      j++;
    else if (x->dims[i] == 1 && k < p->count)
      p->value[k++] = i;
    else
      return false;
  }
  c->kind = RUN_CHECK_SQUEEZE;
  return k == p->count && j == want_rank(p);
}

/* Expand: the declared shape's last `count` dims (broadcast with the
   data's shape, they make the declared shape when anything does). */
static bool derive_expand(Pin *p, RunCheck *c) {
  if (p->count > want_rank(p))
    return false;
  for (int i = 0; i < p->count; i++)
    p->value[i] = want_dims(p)[want_rank(p) - p->count + i];
  c->kind = RUN_CHECK_EXPAND;
  return true;
}

/* Tile: each declared dim over the data's (1 where the data's is 0). */
static bool derive_tile(Pin *p, RunCheck *c) {
  const Tensor *x = p->data;
  if (p->count != x->rank || want_rank(p) != x->rank)
    return false;
  for (int i = 0; i < x->rank; i++) {
    if (x->dims[i] == 0)
      p->value[i] = 1;
    else if (want_dims(p)[i] % x->dims[i] == 0)
      p->value[i] = want_dims(p)[i] / x->dims[i];
    else
      return false;
  }
  c->kind = RUN_CHECK_TILE;
  return true;
}

/* A reduction with keepdims=1: the axes whose declared dim is 1 and the
   data's is not, then axes of size 1 to fill the input's length (reducing
   one changes nothing). Without keepdims the declared shape does not say
   which of two equal dims went. */
static bool derive_reduce(Pin *p, RunCheck *c) {
  const Tensor *x = p->data;
  bool picked[IR_MAX_RANK] = {false};
  int k = 0;
  if (node_attr_int(p->n, "keepdims", 1) != 1 || want_rank(p) != x->rank)
    return false;
  c->kind = RUN_CHECK_REDUCE;
  c->flag = (int)node_attr_int(p->n, "noop_with_empty_axes", 0);
  if (p->count == 0)
    return true; /* no axes: all or none, which the shape function says */
  for (int i = 0; i < x->rank; i++) {
    if (want_dims(p)[i] == x->dims[i])
      continue;
    if (want_dims(p)[i] != 1 || k == p->count)
      return false;
    picked[i] = true;
    p->value[k++] = i;
  }
  for (int i = 0; i < x->rank && k < p->count; i++)
    if (!picked[i] && x->dims[i] == 1)
      p->value[k++] = i;
  return k == p->count;
}

/* The output dims the value must equal (Split's sizes, OneHot's depth, a
   window's size, ConstantOfShape's and MaxUnpool's shape, Resize's sizes). */
static bool derive_equal(Pin *p, RunCheck *c) {
  (void)p;
  c->kind = RUN_CHECK_EQUAL;
  return true;
}

static bool derive_split(Pin *p, RunCheck *c) {
  const Tensor *x = p->data;
  int axis = (int)node_attr_int(p->n, "axis", 0);
  if (axis < -x->rank || axis >= x->rank || p->count != p->n->nout ||
      p->count > IR_MAX_RANK * 2)
    return false;
  if (axis < 0)
    axis += x->rank;
  for (int i = 0; i < p->n->nout; i++) {
    const Tensor *o = p->n->out[i];
    if (!o || !o->declared || o->declared_rank != x->rank)
      return false;
    p->value[i] = o->declared_dims[axis];
  }
  return derive_equal(p, c);
}

static bool derive_one_hot(Pin *p, RunCheck *c) {
  int r = want_rank(p);
  int64_t axis = node_attr_int(p->n, "axis", -1);
  if (p->count != 1 || axis < -r || axis >= r || want_dims(p)[axis < 0 ? axis + r : axis] == 0)
    return false;
  p->value[0] = want_dims(p)[axis < 0 ? axis + r : axis];
  return derive_equal(p, c);
}

static bool derive_same(Pin *p, RunCheck *c) {
  if (p->count != want_rank(p))
    return false;
  for (int i = 0; i < p->count; i++)
    p->value[i] = want_dims(p)[i];
  return derive_equal(p, c);
}

static bool derive_window(Pin *p, RunCheck *c) {
  if (p->count != 1 || want_rank(p) != 1)
    return false;
  p->value[0] = want_dims(p)[0];
  return derive_equal(p, c);
}

/* Resize's sizes (opset 11 on), where they are the output's dims: every
   axis, stretched. Its scales enter the coordinates, so they are not
   pinned. */
static bool derive_resize(Pin *p, RunCheck *c) {
  const int64_t *axes;
  if (node_attr_ints(p->n, "axes", &axes) > 0 ||
      strcmp(node_attr_string(p->n, "keep_aspect_ratio_policy", "stretch"), "stretch") != 0)
    return false;
  return derive_same(p, c);
}

typedef bool (*Derive)(Pin *p, RunCheck *c);

/* The slot of n's shape input and how its value follows from the output's
   declared shape (ops.def's PIN rows); NULL for other kinds. */
static Derive derivation(const Node *n, int *slot) {
  switch (n->op) {
#define OP(...)
#define PIN(kind, input, derive)                                                                   \
  case OP_##kind:                                                                                  \
    *slot = input;                                                                                 \
    return derive;
#include "ops.def"
#undef PIN
#undef OP
  default:
    *slot = 1;
    return NULL;
  }
}

/* The constant that stands for the input: its type and shape, the value. */
static Tensor *pinned_constant(Pin *p) {
  Graph *g = p->g;
  Tensor *t = graph_add_tensor(g, arena_printf(g->arena, "%s.pinned", p->input->name));
  t->dtype = p->input->dtype;
  tensor_set_shape(t, p->input->rank, p->input->dims);
  size_t count = (size_t)(p->count ? p->count : 1);
  if (dtype_is_float(t->dtype)) {
    t->f32 = arena_alloc(g->arena, sizeof(float) * count);
    for (int i = 0; i < p->count; i++)
      t->f32[i] = (float)p->value[i];
  } else {
    t->i64 = arena_alloc(g->arena, sizeof(int64_t) * count);
    memcpy(t->i64, p->value, sizeof(int64_t) * (size_t)p->count);
  }
  return t;
}

static void add_check(Graph *g, const RunCheck *c) {
  if (g->nchecks == g->cap_checks) {
    int cap = g->cap_checks ? g->cap_checks * 2 : 4;
    RunCheck *grown = arena_alloc(g->arena, sizeof *grown * (size_t)cap);
    if (g->nchecks)
      memcpy(grown, g->checks, sizeof *grown * (size_t)g->nchecks);
    g->checks = grown;
    g->cap_checks = cap;
  }
  g->checks[g->nchecks++] = *c;
}

/* The types that net.c's check reads (run_check_template.c). */
static bool checked_type(DType t) {
  return t == DT_INT64 || t == DT_INT32 || t == DT_FLOAT || t == DT_DOUBLE;
}

bool pin_shape_input(Graph *g, Node *n) {
  int slot;
  Derive derive = derivation(n, &slot);
  Tensor *t = derive ? node_input(n, slot) : NULL;
  const Tensor *out = n->nout > 0 ? n->out[0] : NULL;
  /* A graph input read as it comes: one computed from it is another matter. */
  if (!t || !t->is_input || tensor_is_const(t) || !out || !out->declared || t->rank > 1 ||
      tensor_numel(t) > IR_MAX_RANK * 2 || !checked_type(t->dtype))
    return true;
  Pin p = {.g = g, .n = n, .input = t, .out = out, .count = (int)tensor_numel(t)};
  p.data = slot == 1 ? node_input(n, 0) : NULL;
  if (p.data && tensor_numel(p.data) < 0)
    return true;
  RunCheck c = {.node = n, .node_name = n->name, .op = n->op, .input = t};
  if (!derive(&p, &c))
    return true; /* not decided: the shape function reports the input as before */
  if (p.data) {
    c.data_rank = p.data->rank;
    memcpy(c.data_dims, p.data->dims, sizeof c.data_dims);
  }
  /* EQUAL compares the values, the others the dims they make. */
  const int64_t *want = c.kind == RUN_CHECK_EQUAL ? p.value : want_dims(&p);
  c.nwant = c.kind == RUN_CHECK_EQUAL ? p.count : want_rank(&p);
  c.want = arena_alloc(g->arena, sizeof(int64_t) * (size_t)(c.nwant ? c.nwant : 1));
  memcpy(c.want, want, sizeof(int64_t) * (size_t)c.nwant);
  c.pinned_by = arena_printf(g->arena, "the declared shape of %s '%s'",
                             out->is_output ? "output" : "value", out->name);
  n->in[slot] = pinned_constant(&p);
  add_check(g, &c);
  graph_rebuild_uses(g);
  return true;
}

bool check_pinned_output(Graph *g, Node *n) {
  for (int i = 0; i < g->nchecks; i++) {
    if (g->checks[i].node != n)
      continue;
    for (int j = 0; j < n->nout; j++) {
      const Tensor *o = n->out[j];
      if (!o || !o->declared)
        continue;
      if (o->rank != o->declared_rank ||
          memcmp(o->dims, o->declared_dims, sizeof(int64_t) * (size_t)o->rank) != 0) {
        ir_error(g, n, "input '%s' is not a compile-time constant, and the value opc derived "
                 "from %s does not make that shape (bind it with --const-input)",
                 g->checks[i].input->name, g->checks[i].pinned_by);
        return false;
      }
    }
  }
  return true;
}
