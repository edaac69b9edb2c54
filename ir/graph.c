/* graph.c - building and rewiring the graph. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* ------------------------------------------------------------ name map */

typedef struct NameMap {
  Tensor **slots;
  int cap, count;
} NameMap;

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static void names_put(Graph *g, Tensor *t);

static void names_grow(Graph *g) {
  NameMap *m = g->names;
  Tensor **old = m->slots;
  int oldcap = m->cap;
  m->cap = oldcap ? oldcap * 2 : 256;
  m->slots = arena_alloc(g->arena, sizeof(Tensor *) * (size_t)m->cap);
  m->count = 0;
  for (int i = 0; i < oldcap; i++)
    if (old[i])
      names_put(g, old[i]);
}

static void names_put(Graph *g, Tensor *t) {
  NameMap *m = g->names;
  if ((m->count + 1) * 2 > m->cap)
    names_grow(g);
  uint64_t i = hash_name(t->name) & (uint64_t)(m->cap - 1);
  while (m->slots[i] && strcmp(m->slots[i]->name, t->name) != 0)
    i = (i + 1) & (uint64_t)(m->cap - 1);
  if (!m->slots[i])
    m->count++;
  m->slots[i] = t;
}

Tensor *graph_find_tensor(Graph *g, const char *name) {
  NameMap *m = g->names;
  if (!m->cap || !name)
    return NULL;
  uint64_t i = hash_name(name) & (uint64_t)(m->cap - 1);
  while (m->slots[i]) {
    if (strcmp(m->slots[i]->name, name) == 0)
      return m->slots[i];
    i = (i + 1) & (uint64_t)(m->cap - 1);
  }
  return NULL;
}

/* --------------------------------------------------------------- graph */

Graph *graph_new(const char *path) {
  Arena *a = arena_new();
  Graph *g = arena_alloc(a, sizeof *g);
  g->arena = a;
  g->path = arena_strdup(a, path ? path : "<graph>");
  g->name = "main";
  g->max_memory = LIMIT_PROGRAM_BYTES;
  g->names = arena_alloc(a, sizeof(NameMap));
  return g;
}

/* A graph kept in another's arena (a Loop's body): freed with that one,
   never by graph_free. */
Graph *graph_new_in(Graph *owner, const char *name) {
  Arena *a = owner->arena;
  Graph *g = arena_alloc(a, sizeof *g);
  g->arena = a;
  g->path = owner->path;
  g->name = arena_strdup(a, name);
  g->opset = owner->opset;
  g->max_memory = owner->max_memory;
  g->max_dims = owner->max_dims;
  g->nmax_dims = owner->nmax_dims;
  g->names = arena_alloc(a, sizeof(NameMap));
  return g;
}

int64_t graph_max_dim(const Graph *g, const char *name) {
  for (int i = 0; name && i < g->nmax_dims; i++)
    if (strcmp(g->max_dims[i].name, name) == 0)
      return g->max_dims[i].bound;
  return 0;
}

void graph_free(Graph *g) {
  if (g)
    arena_free(g->arena);
}

/* Grows an arena-backed array of pointers; the old block is simply left behind. */
static void *grow(Arena *a, void *old, int count, int *cap) {
  if (count < *cap)
    return old;
  int newcap = *cap ? *cap * 2 : 64;
  void **p = arena_alloc(a, sizeof(void *) * (size_t)newcap);
  if (count)
    memcpy(p, old, sizeof(void *) * (size_t)count);
  *cap = newcap;
  return p;
}

Tensor *graph_add_tensor(Graph *g, const char *name) {
  g->tensors = grow(g->arena, g->tensors, g->ntensors, &g->cap_tensors);
  Tensor *t = arena_alloc(g->arena, sizeof *t);
  t->id = g->ntensors;
  if (name && *name) {
    t->name = arena_strdup(g->arena, name);
  } else {
    /* Generated names must not collide with the model's own. */
    int k = g->ntensors;
    do
      t->name = arena_printf(g->arena, "_t%d", k++);
    while (graph_find_tensor(g, t->name));
  }
  g->tensors[g->ntensors++] = t;
  names_put(g, t);
  return t;
}

/* Makes room for node `id` in the schedule's table; a new entry is
   unscheduled: no event recorded, everything else 0. */
static void sched_table_reserve(Graph *g, int id) {
  Schedule *s = &g->sched;
  if (id < s->cap_node)
    return;
  int cap = s->cap_node ? s->cap_node * 2 : 64;
  while (cap <= id)
    cap *= 2;
  NodeSchedule *t = arena_alloc(g->arena, sizeof *t * (size_t)cap);
  if (s->cap_node)
    memcpy(t, s->node, sizeof *t * (size_t)s->cap_node);
  for (int i = s->cap_node; i < cap; i++)
    t[i] = (NodeSchedule){.record_event = -1};
  s->node = t;
  s->cap_node = cap;
}

NodeSchedule *node_sched(const Graph *g, const Node *n) { return &g->sched.node[n->id]; }

void node_add_wait(Graph *g, Node *n, int event) {
  NodeSchedule *ns = node_sched(g, n);
  int *w = arena_alloc(g->arena, sizeof(int) * ((size_t)ns->nwaits + 1));
  if (ns->nwaits)
    memcpy(w, ns->waits, sizeof(int) * (size_t)ns->nwaits);
  w[ns->nwaits++] = event;
  ns->waits = w;
}

/* Numbers the nodes in their order in g->nodes, moving each one's
   schedule entry along with it. */
void graph_renumber_nodes(Graph *g) {
  Schedule *s = &g->sched;
  NodeSchedule *t = arena_alloc(g->arena, sizeof *t * (size_t)s->cap_node);
  for (int i = 0; i < s->cap_node; i++)
    t[i] = (NodeSchedule){.record_event = -1};
  for (int i = 0; i < g->nnodes; i++) {
    t[i] = s->node[g->nodes[i]->id];
    g->nodes[i]->id = i;
  }
  s->node = t;
}

Node *graph_add_node(Graph *g, OpKind op, const char *name, int nin, int nout) {
  g->nodes = grow(g->arena, g->nodes, g->nnodes, &g->cap_nodes);
  sched_table_reserve(g, g->nnodes);
  Node *n = arena_alloc(g->arena, sizeof *n);
  n->id = g->nnodes;
  n->op = op;
  n->name = name && *name ? arena_strdup(g->arena, name)
                          : arena_printf(g->arena, "%s_%d", op_name(op), g->nnodes);
  n->nin = nin;
  n->nout = nout;
  n->in = arena_alloc(g->arena, sizeof(Tensor *) * (size_t)(nin + 1));
  n->out = arena_alloc(g->arena, sizeof(Tensor *) * (size_t)(nout + 1));
  n->instance = -1;
  g->nodes[g->nnodes++] = n;
  return n;
}

static Tensor **append(Arena *a, Tensor **arr, int n, Tensor *t) {
  Tensor **p = arena_alloc(a, sizeof(Tensor *) * (size_t)(n + 1));
  if (n)
    memcpy(p, arr, sizeof(Tensor *) * (size_t)n);
  p[n] = t;
  return p;
}

void graph_add_input(Graph *g, Tensor *t) {
  t->is_input = true;
  g->inputs = append(g->arena, g->inputs, g->ninputs++, t);
}

void graph_add_output(Graph *g, Tensor *t) {
  t->is_output = true;
  g->outputs = append(g->arena, g->outputs, g->noutputs++, t);
}

void graph_rebuild_uses(Graph *g) {
  for (int i = 0; i < g->ntensors; i++) {
    Tensor *t = g->tensors[i];
    t->nusers = 0;
    t->producer = NULL;
  }
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    for (int j = 0; j < n->nin; j++)
      if (n->in[j])
        n->in[j]->nusers++;
  }
  for (int i = 0; i < g->ntensors; i++) {
    Tensor *t = g->tensors[i];
    t->users = arena_alloc(g->arena, sizeof(Node *) * (size_t)(t->nusers + 1));
    t->users_cap = t->nusers + 1;
    t->nusers = 0;
  }
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    for (int j = 0; j < n->nin; j++)
      if (n->in[j])
        n->in[j]->users[n->in[j]->nusers++] = n;
    for (int j = 0; j < n->nout; j++)
      if (n->out[j]) {
        n->out[j]->producer = n;
        n->out[j]->producer_slot = j;
      }
  }
}

/* Kahn's algorithm, stable with respect to the current order. */
bool graph_toposort(Graph *g) {
  graph_rebuild_uses(g);
  int n = g->nnodes;
  int *pending = calloc((size_t)n + 1, sizeof(int));
  Node **order = arena_alloc(g->arena, sizeof(Node *) * (size_t)(n + 1));
  graph_renumber_nodes(g);
  for (int i = 0; i < n; i++) {
    Node *nd = g->nodes[i];
    for (int j = 0; j < nd->nin; j++)
      if (nd->in[j] && nd->in[j]->producer)
        pending[i]++;
  }
  /* A min-heap on the original index would keep the order stable; a
     simple scan is enough for the graph sizes opc sees. */
  bool *done = calloc((size_t)n + 1, sizeof(bool));
  int count = 0, start = 0;
  while (count < n) {
    int pick = -1;
    for (int i = start; i < n; i++)
      if (!done[i] && pending[i] == 0) {
        pick = i;
        break;
      }
    if (pick < 0)
      break;
    done[pick] = true;
    order[count++] = g->nodes[pick];
    while (start < n && done[start])
      start++;
    Node *nd = g->nodes[pick];
    for (int j = 0; j < nd->nout; j++) {
      Tensor *t = nd->out[j];
      if (!t)
        continue;
      for (int u = 0; u < t->nusers; u++)
        pending[t->users[u]->id]--;
    }
  }
  if (count < n) {
    Node *stuck = NULL;
    for (int i = 0; i < n && !stuck; i++)
      if (!done[i])
        stuck = g->nodes[i];
    free(pending);
    free(done);
    ir_error(g, stuck, "the graph has a cycle through this node");
    return false;
  }
  free(pending);
  free(done);
  g->nodes = order;
  g->cap_nodes = n + 1;
  graph_renumber_nodes(g);
  return true;
}

void graph_compact(Graph *g) {
  int k = 0;
  for (int i = 0; i < g->nnodes; i++)
    if (!g->nodes[i]->dead)
      g->nodes[k++] = g->nodes[i];
  g->nnodes = k;
  graph_renumber_nodes(g);
  graph_rebuild_uses(g);
}

/* -------------------------------------------------------------- tensors */

size_t dtype_size(DType t) {
  switch (t) {
  case DT_FLOAT: case DT_INT32: case DT_UINT32: return 4;
  case DT_DOUBLE: case DT_INT64: case DT_UINT64: return 8;
  case DT_FLOAT16: case DT_BFLOAT16: case DT_INT16: case DT_UINT16: return 2;
  case DT_INT8: case DT_UINT8: case DT_BOOL: return 1;
  default: return 0;
  }
}

static const struct {
  DType t;
  const char *name;
} dtype_names[] = {
    {DT_FLOAT, "f32"},   {DT_DOUBLE, "f64"},  {DT_FLOAT16, "f16"}, {DT_BFLOAT16, "bf16"},
    {DT_INT8, "i8"},     {DT_INT16, "i16"},   {DT_INT32, "i32"},   {DT_INT64, "i64"},
    {DT_UINT8, "u8"},    {DT_UINT16, "u16"},  {DT_UINT32, "u32"},  {DT_UINT64, "u64"},
    {DT_BOOL, "bool"},   {DT_STRING, "str"},  {DT_UNDEFINED, "?"},
};

const char *dtype_name(DType t) {
  for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
    if (dtype_names[i].t == t)
      return dtype_names[i].name;
  return "?";
}

DType dtype_from_name(const char *s) {
  for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
    if (strcmp(dtype_names[i].name, s) == 0)
      return dtype_names[i].t;
  return DT_UNDEFINED;
}

/* The types a value may have at run time: those with a C storage type in
   net.c. Others (strings) exist only as constants folded at compile time. */
bool dtype_at_run_time(DType t) {
  return t == DT_FLOAT || t == DT_DOUBLE || t == DT_FLOAT16 || t == DT_BFLOAT16 ||
         t == DT_INT64 || t == DT_INT32 || t == DT_INT16 || t == DT_INT8 || t == DT_UINT64 ||
         t == DT_UINT32 || t == DT_UINT16 || t == DT_UINT8 || t == DT_BOOL;
}

/* The types a graph input or output may have: all the run-time ones. A
   bfloat16 crosses the interface as its 16 bits (numpy has no bfloat16;
   the ready-made main reads and writes them as uint16, as onnx's
   numpy_helper does). */
bool dtype_at_interface(DType t) { return dtype_at_run_time(t); }

/* ONNX's name of a type, as net.h states it: "float32", "int64", ... */
const char *dtype_onnx_name(DType t) {
  switch (t) {
  case DT_FLOAT: return "float32";
  case DT_DOUBLE: return "float64";
  case DT_FLOAT16: return "float16";
  case DT_BFLOAT16: return "bfloat16";
  case DT_INT8: return "int8";
  case DT_INT16: return "int16";
  case DT_INT32: return "int32";
  case DT_INT64: return "int64";
  case DT_UINT8: return "uint8";
  case DT_UINT16: return "uint16";
  case DT_UINT32: return "uint32";
  case DT_UINT64: return "uint64";
  case DT_BOOL: return "bool";
  case DT_STRING: return "string";
  default: return "undefined";
  }
}

bool op_input_stays_float(OpKind op, int k) {
  return (op_info(op)->traits & T_FLOAT_PARAMS) && k >= 1;
}

bool op_input_is_param(OpKind op, int k) {
  return k >= 0 && k < 32 && ((op_info(op)->param_inputs >> k) & 1);
}

bool window_is_symmetric(const Window *w) {
  if (w->nspatial < 1 || w->nspatial > 3)
    return false;
  for (int i = 0; i < w->nspatial; i++)
    if (w->pad_begin[i] != w->pad_end[i] || w->pad_begin[i] < 0)
      return false;
  return true;
}

bool pool_fits_library(const Node *n) {
  const Window *w = &n->win;
  const Tensor *x = n->in[0], *y = n->out[0];
  if (!window_is_symmetric(w) || x->rank != w->nspatial + 2 || y->rank != x->rank)
    return false;
  if (!dtype_is_float(x->dtype))
    return false; /* MaxPool on int8 and uint8: opc's kernel */
  if (n->nout > 1 && n->out[1] && (n->out[1]->nusers || n->out[1]->is_output))
    return false; /* MaxPool's Indices */
  for (int i = 0; i < w->nspatial; i++) {
    int64_t k = w->kernel[i], s = w->stride[i], p = w->pad_begin[i];
    if ((w->dilation[i] && w->dilation[i] != 1) || p >= k || s < 1)
      return false;
    /* cuDNN rounds the output size down; ceil_mode output must agree. */
    if ((x->dims[2 + i] + 2 * p - k) / s + 1 != y->dims[2 + i])
      return false;
  }
  return true;
}

bool conv_runs_half(const Node *n) {
  return window_is_symmetric(&n->win) && n->in[0]->rank == n->win.nspatial + 2;
}

bool gemm_runs_half(const Node *n) {
  (void)n;
  return true;
}

bool matmul_runs_half(const Node *n) {
  const Tensor *a = n->in[0], *b = n->in[1];
  if (a->rank < 2 || b->rank < 2)
    return false;
  if (b->rank == 2)
    return true;
  if (a->rank != b->rank)
    return false;
  for (int i = 0; i + 2 < a->rank; i++)
    if (a->dims[i] != b->dims[i])
      return false;
  return true;
}

bool dtype_is_float(DType t) {
  return t == DT_FLOAT || t == DT_DOUBLE || t == DT_FLOAT16 || t == DT_BFLOAT16;
}

bool dtype_is_integer(DType t) {
  return t == DT_INT8 || t == DT_INT16 || t == DT_INT32 || t == DT_INT64 || t == DT_UINT8 ||
         t == DT_UINT16 || t == DT_UINT32 || t == DT_UINT64 || t == DT_BOOL;
}

int64_t dims_product(const int64_t *dims, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++)
    p *= dims[i];
  return p;
}

int64_t tensor_numel(const Tensor *t) { return dims_product(t->dims, 0, t->rank); }

bool tensor_is_const(const Tensor *t) { return t->f32 || t->i64; }

void tensor_set_shape(Tensor *t, int rank, const int64_t *dims) {
  t->rank = rank;
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; i--) {
    t->dims[i] = dims[i];
    t->strides[i] = stride;
    stride *= dims[i] > 0 ? dims[i] : 1;
  }
}

void tensor_set_channels_last(Tensor *t) {
  if (t->rank < 3)
    return;
  int64_t stride = 1;
  t->strides[1] = stride;
  stride *= t->dims[1] > 0 ? t->dims[1] : 1;
  for (int i = t->rank - 1; i >= 2; i--) {
    t->strides[i] = stride;
    stride *= t->dims[i] > 0 ? t->dims[i] : 1;
  }
  t->strides[0] = stride;
}

bool tensor_is_channels_last(const Tensor *t) {
  if (t->rank < 3)
    return false;
  Tensor last = *t;
  tensor_set_channels_last(&last);
  for (int i = 0; i < t->rank; i++)
    if (t->dims[i] != 1 && t->strides[i] != last.strides[i])
      return false;
  return true;
}

bool tensor_has_dense_strides(const Tensor *t) {
  bool used[IR_MAX_RANK] = {false};
  int64_t expect = 1;
  for (int placed = 0; placed < t->rank; placed++) {
    int pick = -1; /* the unplaced dim whose stride is the next expected one */
    for (int i = 0; i < t->rank && pick < 0; i++)
      if (!used[i] && (t->strides[i] == expect || t->dims[i] <= 1))
        pick = i;
    if (pick < 0)
      return false;
    used[pick] = true;
    expect *= t->dims[pick] > 0 ? t->dims[pick] : 1;
  }
  return true;
}

bool tensor_same_shape(const Tensor *a, const Tensor *b) {
  if (a->rank != b->rank)
    return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i])
      return false;
  return true;
}

char *tensor_type_str(const Tensor *t, char *buf, size_t size) {
  int len = snprintf(buf, size, "%s[", dtype_name(t->dtype));
  for (int i = 0; i < t->rank && (size_t)len < size; i++)
    len += snprintf(buf + len, size - (size_t)len, "%s%s%lld", i ? "," : "",
                    t->bounded && i == t->bound_axis ? "<=" : "",
                    (long long)t->dims[i]);
  if ((size_t)len < size)
    snprintf(buf + len, size - (size_t)len, "]");
  return buf;
}

Tensor *tensor_storage(Tensor *t) { return t->alias_of ? t->alias_of : t; }

int tensor_device(const Graph *g, const Tensor *t) {
  if (tensor_is_const(t))
    return -1;
  const Tensor *s = t->alias_of ? t->alias_of : t;
  return s->producer ? node_sched(g, s->producer)->device : 0;
}

bool node_is_transfer(const Graph *g, const Node *n) {
  if (n->op != OP_IDENTITY || !n->in[0])
    return false;
  int from = tensor_device(g, n->in[0]);
  return from >= 0 && from != node_sched(g, n)->device;
}

bool node_on_cpu(const Graph *g, const Node *n) {
  return g->sched.host_device > 0 && node_sched(g, n)->device == g->sched.host_device;
}

int gpu_count(const Graph *g) {
  int n = g->sched.ndevices > 0 ? g->sched.ndevices : 1;
  return g->sched.host_device > 0 ? n - 1 : n;
}

/* ---------------------------------------------------------------- nodes */

const Attr *node_attr(const Node *n, const char *name) {
  for (int i = 0; i < n->nattrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0)
      return &n->attrs[i];
  return NULL;
}

int64_t node_attr_int(const Node *n, const char *name, int64_t dflt) {
  const Attr *a = node_attr(n, name);
  return a && a->kind == ATTR_INT ? a->i : dflt;
}

float node_attr_float(const Node *n, const char *name, float dflt) {
  const Attr *a = node_attr(n, name);
  if (a && a->kind == ATTR_FLOAT)
    return a->f;
  if (a && a->kind == ATTR_INT)
    return (float)a->i;
  return dflt;
}

const char *node_attr_string(const Node *n, const char *name, const char *dflt) {
  const Attr *a = node_attr(n, name);
  return a && a->kind == ATTR_STRING ? a->s : dflt;
}

int node_attr_ints(const Node *n, const char *name, const int64_t **out) {
  const Attr *a = node_attr(n, name);
  if (!a || a->kind != ATTR_INTS)
    return -1;
  *out = a->ints;
  return a->n;
}

Attr *node_set_attr(Graph *g, Node *n, const char *name, AttrKind kind) {
  for (int i = 0; i < n->nattrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) {
      memset(&n->attrs[i], 0, sizeof(Attr));
      n->attrs[i].name = arena_strdup(g->arena, name);
      n->attrs[i].kind = kind;
      return &n->attrs[i];
    }
  Attr *attrs = arena_alloc(g->arena, sizeof(Attr) * (size_t)(n->nattrs + 1));
  if (n->nattrs)
    memcpy(attrs, n->attrs, sizeof(Attr) * (size_t)n->nattrs);
  n->attrs = attrs;
  Attr *a = &attrs[n->nattrs++];
  a->name = arena_strdup(g->arena, name);
  a->kind = kind;
  return a;
}

/* Equal constant data: same dtype, shape and bytes. */
static bool same_tensor_value(const Tensor *a, const Tensor *b) {
  if (a == b)
    return true;
  if (!a || !b || a->dtype != b->dtype || !tensor_same_shape(a, b))
    return false;
  int64_t n = tensor_numel(a);
  if (a->f32 && b->f32)
    return memcmp(a->f32, b->f32, sizeof(float) * (size_t)n) == 0;
  if (a->i64 && b->i64)
    return memcmp(a->i64, b->i64, sizeof(int64_t) * (size_t)n) == 0;
  return false;
}

static bool same_attr(const Attr *a, const Attr *b) {
  if (a->kind != b->kind || a->n != b->n)
    return false;
  switch (a->kind) {
  case ATTR_FLOAT:
    return a->f == b->f;
  case ATTR_INT:
    return a->i == b->i;
  case ATTR_STRING:
    return strcmp(a->s, b->s) == 0;
  case ATTR_TENSOR:
    return same_tensor_value(a->t, b->t);
  case ATTR_FLOATS:
    return a->n == 0 || memcmp(a->floats, b->floats, sizeof(float) * (size_t)a->n) == 0;
  case ATTR_INTS:
    return a->n == 0 || memcmp(a->ints, b->ints, sizeof(int64_t) * (size_t)a->n) == 0;
  case ATTR_STRINGS:
    for (int i = 0; i < a->n; i++)
      if (strcmp(a->strings[i], b->strings[i]) != 0)
        return false;
    return true;
  case ATTR_TENSORS:
    for (int i = 0; i < a->n; i++)
      if (!same_tensor_value(a->tensors[i], b->tensors[i]))
        return false;
    return true;
  default:
    return false; /* subgraphs are never compared */
  }
}

bool node_same_attrs(const Node *a, const Node *b) {
  if (a->nattrs != b->nattrs)
    return false;
  for (int i = 0; i < a->nattrs; i++) {
    const Attr *other = node_attr(b, a->attrs[i].name);
    if (!other || !same_attr(&a->attrs[i], other))
      return false;
  }
  return true;
}

Tensor *node_input(const Node *n, int i) { return i >= 0 && i < n->nin ? n->in[i] : NULL; }

/* ----------------------------------------------------------- diagnostics */

static int error_count;
static int quiet; /* ir_quiet's depth */

void ir_quiet(bool on) { quiet += on ? 1 : -1; }

static void vreport(const char *kind, const Graph *g, const Node *n, const char *fmt, va_list ap) {
  if (quiet)
    return;
  fprintf(stderr, "opc: %s: ", kind);
  /* In a serving program a node's own model names the file. */
  const ServedModel *model = g && n ? graph_instance_model(g, n->instance) : NULL;
  if (g)
    fprintf(stderr, "%s: ", model ? model->path : g->path);
  if (n)
    fprintf(stderr, "node '%s' (%s): ", n->name, op_name(n->op));
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

void ir_error(const Graph *g, const Node *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport("error", g, n, fmt, ap);
  va_end(ap);
  error_count += !quiet;
}

void ir_warning(const Graph *g, const Node *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport("warning", g, n, fmt, ap);
  va_end(ap);
}

void opc_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport("error", NULL, NULL, fmt, ap);
  va_end(ap);
  error_count++;
}

int ir_error_count(void) { return error_count; }

/* A graph input whose value t depends on, found through the producers (the
   first in depth-first order), or NULL. It tells a user which input to bind
   with --const-input when a value must be known at compile time. */
static const Tensor *input_behind(const Tensor *t, bool *seen, int ntensors) {
  if (t->is_input)
    return t;
  if (t->id >= 0 && t->id < ntensors) {
    if (seen[t->id])
      return NULL;
    seen[t->id] = true;
  }
  const Node *p = t->producer;
  for (int i = 0; p && i < p->nin; i++) {
    const Tensor *found = p->in[i] ? input_behind(p->in[i], seen, ntensors) : NULL;
    if (found)
      return found;
  }
  return NULL;
}

const Tensor *graph_input_behind(const Graph *g, const Tensor *t) {
  bool *seen = calloc((size_t)g->ntensors + 1, sizeof *seen);
  if (!seen)
    return NULL;
  const Tensor *found = input_behind(t, seen, g->ntensors);
  free(seen);
  return found;
}

void graph_note(Graph *g, const char *fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  const char **grown = arena_alloc(g->arena, sizeof(char *) * (size_t)(g->nnotes + 1));
  if (g->nnotes)
    memcpy(grown, g->notes, sizeof(char *) * (size_t)g->nnotes);
  grown[g->nnotes++] = arena_strdup(g->arena, text);
  g->notes = grown;
}
