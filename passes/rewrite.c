/* rewrite.c - helpers shared by the rewriting passes. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "rewrite.h"

Node *sole_consumer(const Tensor *t) {
  if (!t || t->is_output || t->nusers != 1)
    return NULL;
  Node *u = t->users[0];
  return u->dead ? NULL : u;
}

bool scalar_constant(const Tensor *t, float *value) {
  if (!t || t->dtype != DT_FLOAT || !t->f32 || tensor_numel(t) != 1)
    return false;
  *value = t->f32[0];
  return true;
}

static bool is_binary_add(const Node *n) {
  return !n->dead && n->op == OP_ADD && n->nin == 2 && n->in[0] && n->in[1];
}

/* The Conv producing `y` when `add` is y's only reader and the Conv has no
   activation or residual input yet, so `add` may be folded into it. Only
   in float32: cuDNN's fused forms compute in nothing else. */
static Node *plain_conv_feeding(const Tensor *y, const Node *add) {
  Node *conv = y->producer;
  if (!conv || conv->dead || conv->op != OP_CONV || sole_consumer(y) != add)
    return NULL;
  if (y->dtype != DT_FLOAT)
    return NULL;
  if (conv->act != OPC_ACT_NONE || node_input(conv, 3))
    return NULL;
  return conv;
}

bool fold_adds_into_convs(Graph *g, AddFolder fold) {
  begin_rewrite(g);
  int folded = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *add = g->nodes[i];
    if (!is_binary_add(add))
      continue;
    for (int side = 0; side < 2; side++) {
      Tensor *y = add->in[side], *other = add->in[1 - side];
      Node *conv = plain_conv_feeding(y, add);
      /* Broadcasting y to a larger shape is more than the Conv writes. */
      if (!conv || y == other || !tensor_same_shape(y, add->out[0]))
        continue;
      if (fold(g, conv, y, add, other)) {
        folded++;
        break;
      }
    }
  }
  if (!folded)
    return true;
  return finish_rewrite(g);
}

void swallow_consumer(Graph *g, Node *into, Node *eaten) {
  set_node_output(into, 0, eaten->out[0]);
  node_absorb(g, into, eaten);
  eaten->dead = true;
}

void set_node_input(Graph *g, Node *n, int i, Tensor *t) {
  if (i >= n->nin) {
    Tensor **in = arena_alloc(g->arena, sizeof(Tensor *) * (size_t)(i + 2));
    if (n->nin)
      memcpy(in, n->in, sizeof(Tensor *) * (size_t)n->nin);
    n->in = in;
    n->nin = i + 1;
  }
  n->in[i] = t;
}

void set_node_output(Node *n, int slot, Tensor *t) {
  n->out[slot] = t;
  t->producer = n;
  t->producer_slot = slot;
}

void node_absorb(Graph *g, Node *into, const Node *from) {
  int total = into->nfused + 1 + from->nfused;
  const char **names = arena_alloc(g->arena, sizeof(char *) * (size_t)total);
  int k = 0;
  for (int i = 0; i < into->nfused; i++)
    names[k++] = into->fused[i];
  names[k++] = from->name;
  for (int i = 0; i < from->nfused; i++)
    names[k++] = from->fused[i];
  into->fused = names;
  into->nfused = k;
}

static void add_user(Graph *g, Tensor *t, Node *n) {
  if (t->nusers + 1 > t->users_cap) {
    int cap = 2 * (t->nusers + 1);
    Node **users = arena_alloc(g->arena, sizeof(Node *) * (size_t)cap);
    if (t->nusers)
      memcpy(users, t->users, sizeof(Node *) * (size_t)t->nusers);
    t->users = users;
    t->users_cap = cap;
  }
  t->users[t->nusers++] = n;
}

void replace_reads(Graph *g, Tensor *from, Tensor *to) {
  if (from == to)
    return;
  for (int u = 0; u < from->nusers; u++) {
    Node *n = from->users[u];
    if (n->dead)
      continue;
    /* A reader appears once per slot: move one slot per entry. */
    for (int j = 0; j < n->nin; j++)
      if (n->in[j] == from) {
        n->in[j] = to;
        add_user(g, to, n);
        break;
      }
  }
  from->nusers = 0;
  /* Tensors whose run-time size was from's (Tensor.bound_origin) now
     take to's, of the same value: else a reader matching its input's
     origin against its output's would find none (two equal NonZeros that
     eliminate-common merges, each with a chain of its own). */
  for (int i = 0; from->bounded && to->bounded && i < g->ntensors; i++)
    if (g->tensors[i]->bound_origin == from)
      g->tensors[i]->bound_origin = to->bound_origin;
}

bool bypass_node(Graph *g, Node *n, Tensor *in, Tensor *out) {
  if (!out->is_output) {
    n->dead = true;
    replace_reads(g, out, in);
    return true;
  }
  /* `out` names a graph output: keep that tensor, drop `in` instead. */
  Node *p = in->producer;
  if (!p || p->dead || in->is_input || in->is_output || tensor_is_const(in) || in->alias_of)
    return false;
  n->dead = true;
  set_node_output(p, in->producer_slot, out);
  replace_reads(g, in, out);
  return true;
}

Tensor *new_const_like(Graph *g, const Tensor *like, const char *suffix) {
  Tensor *t = graph_add_tensor(g, arena_printf(g->arena, "%s%s", like->name, suffix));
  t->dtype = DT_FLOAT;
  tensor_set_shape(t, like->rank, like->dims);
  t->f32 = arena_alloc(g->arena, sizeof(float) * (size_t)(tensor_numel(t) + 1));
  return t;
}

Tensor *new_const_vector(Graph *g, const char *name, int64_t n, float fill) {
  Tensor *t = graph_add_tensor(g, name);
  t->dtype = DT_FLOAT;
  tensor_set_shape(t, 1, &n);
  t->f32 = arena_alloc(g->arena, sizeof(float) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++)
    t->f32[i] = fill;
  return t;
}

bool has_contiguous_strides(const Tensor *t) {
  int64_t stride = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    if (t->dims[i] != 1 && t->strides[i] != stride)
      return false;
    stride *= t->dims[i];
  }
  return true;
}

void make_view(Tensor *t, Tensor *base, int64_t offset, const int64_t *strides) {
  t->alias_of = base;
  t->alias_offset = offset;
  for (int i = 0; i < t->rank; i++)
    t->strides[i] = strides[i];
}

void begin_rewrite(Graph *g) {
  graph_renumber_nodes(g);
  for (int i = 0; i < g->ntensors; i++)
    g->tensors[i]->id = i;
  graph_rebuild_uses(g);
}

bool finish_rewrite(Graph *g) {
  graph_compact(g);
  return graph_toposort(g);
}

/* A scalar constant input as a float; false when absent or not constant. */
static bool const_scalar(const Tensor *t, float *value) {
  if (!t || tensor_numel(t) != 1)
    return false;
  if (t->f32)
    *value = t->f32[0];
  else if (t->i64)
    *value = (float)t->i64[0];
  else
    return false;
  return true;
}

static bool clip_bounds(const Node *n, float *lo, float *hi) {
  *lo = -INFINITY;
  *hi = INFINITY;
  if (n->p.clip.has_min || n->p.clip.has_max) { /* opset < 11 */
    *lo = n->p.clip.has_min ? n->p.clip.min : -FLT_MAX;
    *hi = n->p.clip.has_max ? n->p.clip.max : FLT_MAX;
    return true;
  }
  Tensor *tmin = node_input(n, 1), *tmax = node_input(n, 2);
  if (tmin && !const_scalar(tmin, lo))
    return false;
  if (tmax && !const_scalar(tmax, hi))
    return false;
  /* The emitted code prints the bounds as literals: keep them finite. */
  *lo = fmaxf(*lo, -FLT_MAX);
  *hi = fminf(*hi, FLT_MAX);
  return true;
}

bool activation_of(const Node *n, Activation *act, float *alpha, float *beta) {
  *alpha = 0;
  *beta = 0;
  /* A fused activation runs in cuDNN or in opc's float32 kernels: an
     activation on another type (an integer Relu) stays a node of its own. */
  if (n->nout < 1 || !n->out[0] || n->out[0]->dtype != DT_FLOAT)
    return false;
  const OpInfo *info = op_info(n->op);
  *act = info->act;
  if (*act == OPC_ACT_NONE)
    return false; /* not a fusable activation */
  if (n->op == OP_SWISH) /* SiLU is Swish of alpha 1 */
    return n->p.act.alpha == 1.0f;
  if (n->op == OP_CLIP) {
    float lo, hi;
    if (!clip_bounds(n, &lo, &hi))
      return false;
    if (lo == 0 && hi >= FLT_MAX) { /* a Relu spelt as Clip */
      *act = OPC_ACT_RELU;
      return true;
    }
    *alpha = lo;
    *beta = hi;
    return true;
  }
  if (info->traits & T_ACT_ALPHA)
    *alpha = n->p.act.alpha;
  if (info->traits & T_ACT_BETA)
    *beta = n->p.act.beta;
  return true;
}
