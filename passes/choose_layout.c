/*
 * choose_layout.c - channels-last storage (NHWC) around 16-bit
 * convolutions: cuDNN's tensor-core convolution kernels read and write
 * NHWC with an NHWC (KRSC) filter, and given NCHW data they transpose it
 * on the way in and out of every call. Under --precision fp16|bf16
 * (--layout auto, or nhwc) the activations those convolutions touch are
 * stored channels-last, and so are their filters; everything else keeps
 * ONNX's order. The dims stay in ONNX's order: only the strides change, so
 * no shape function or operator sees a difference.
 *
 * Operators fall in three kinds:
 *  - same-layout operators (T_SAME_LAYOUT), cuDNN calls whose 4-D operands share one
 *    layout (16-bit Conv, MaxPool, AveragePool and BatchNormalization, and
 *    a channel Concat): their operands are joined into groups, and a group
 *    holding a convolution's operand goes channels-last;
 *  - bridges, elementwise operators and global pools, which read and write
 *    any strides (opc's kernels, cudnnOpTensor, cudnnActivationForward and
 *    cudnnReduceTensor take each operand's strides): they join nothing, so
 *    a Cast or a Relu between the two orders is where the layout changes,
 *    at no cost;
 *  - everything else (Reshape, Flatten, Gemm, Resize, ...) reads and writes
 *    ONNX's order, as do graph inputs and outputs, constants and views.
 * Where a same-layout operator meets a tensor that must keep ONNX's order,
 * an Identity between a channels-last copy and the tensor changes the
 * layout: these are the only copies the pass adds. Tensors with C = 1 or
 * H = W = 1 are the same in both orders and are left alone. Programs on
 * several devices keep ONNX's order (place-devices' transfers make it).
 */
#include <stdlib.h>
#include <string.h>

#include "pass.h"
#include "rewrite.h"

typedef struct Layouts {
  Graph *g;
  int *parent;         /* union-find over tensor ids: the groups */
  bool *fixed;         /* must keep ONNX's order */
  bool *wanted;        /* by group root: a convolution's operands are in it */
  Tensor **last_copy;  /* by tensor id: its channels-last copy, once made */
  int count;
} Layouts;

static bool is_half(DType t) { return t == DT_FLOAT16 || t == DT_BFLOAT16; }

/* Same in both orders: a single channel, or a single position. */
static bool order_free(const Tensor *t) {
  return t->rank == 4 && (t->dims[1] == 1 || t->dims[2] * t->dims[3] == 1);
}

/* 4-D operands of a same-layout operator whose order matters. */
static bool layout_operand(const Tensor *t) {
  return t && t->rank == 4 && !order_free(t);
}

/* Whether input k of a same-layout node is data rather than a filter, bias
   or normalisation parameter: the first, any of a variadic kind's
   (Concat), or one of the output's shape (a convolution's fused residual). */
static bool data_input(const Node *n, int k) {
  if (k == 0 || op_info(n->op)->max_inputs < 0)
    return true;
  return n->in[k] && tensor_same_shape(n->in[k], n->out[0]);
}

/* A 16-bit node of a T_SAME_LAYOUT kind in the form cuDNN takes in either
   order (lower-precision made only such convolutions and pools 16-bit). */
static bool same_layout_op(const Node *n) {
  const OpInfo *info = op_info(n->op);
  const Tensor *y = n->out[0];
  if (!(info->traits & T_SAME_LAYOUT) || !y || y->rank != 4 || !is_half(y->dtype))
    return false;
  if (info->params == PARAMS_WINDOW && n->win.nspatial != 2)
    return false;
  if (info->params == PARAMS_AXIS && n->p.axis.axis != 1)
    return false; /* a Concat along the channels */
  if (n->nout > 1 && n->out[1] && info->params == PARAMS_WINDOW)
    return false; /* MaxPool's Indices are in ONNX's order */
  for (int k = 1; k < n->nin; k++)
    if (n->in[k] && n->in[k]->rank == 4 && !data_input(n, k) && !tensor_is_const(n->in[k]))
      return false; /* a filter computed at run time cannot be reordered */
  return n->in[0]->rank == 4;
}

/* The data operands of a same-layout node, by slot: inputs then outputs
   (slot >= nin). The filter, bias and normalisation parameters are not. */
static Tensor **operand(Node *n, int slot) {
  if (slot >= n->nin)
    return slot - n->nin < n->nout ? &n->out[slot - n->nin] : NULL;
  return n->in[slot] && data_input(n, slot) ? &n->in[slot] : NULL;
}

static int find(Layouts *l, int id) {
  while (l->parent[id] != id)
    id = l->parent[id] = l->parent[l->parent[id]];
  return id;
}

static void join(Layouts *l, const Tensor *a, const Tensor *b) {
  int ra = find(l, a->id), rb = find(l, b->id);
  if (ra != rb) {
    l->parent[ra] = rb;
    l->wanted[rb] = l->wanted[rb] || l->wanted[ra];
  }
}

/* Tensors that keep ONNX's order: those the caller or a view sees, and
   those an operator reads or writes that takes only that order. */
static void mark_fixed(Layouts *l) {
  Graph *g = l->g;
  for (int i = 0; i < g->ntensors; i++) {
    Tensor *t = g->tensors[i];
    if (t->is_input || t->is_output || tensor_is_const(t) || t->alias_of)
      l->fixed[t->id] = true;
    if (t->alias_of)
      l->fixed[t->alias_of->id] = true;
  }
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || same_layout_op(n) || (op_info(n->op)->traits & T_ANY_LAYOUT))
      continue;
    for (int k = 0; k < n->nin; k++)
      if (n->in[k])
        l->fixed[n->in[k]->id] = true;
    for (int k = 0; k < n->nout; k++)
      if (n->out[k])
        l->fixed[n->out[k]->id] = true;
  }
  /* Operands of same-layout nodes that are not data (a Conv's filter and
     bias, BatchNormalization's parameters) stay as they are too. */
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || !same_layout_op(n))
      continue;
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] && !operand(n, k))
        l->fixed[n->in[k]->id] = true;
  }
}

/* Joins the operands of each same-layout node; a convolution's group is
   wanted channels-last. */
static void group_operands(Layouts *l) {
  Graph *g = l->g;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || !same_layout_op(n))
      continue;
    const Tensor *first = NULL;
    for (int s = 0; s < n->nin + n->nout; s++) {
      Tensor **t = operand(n, s);
      if (!t || !layout_operand(*t) || l->fixed[(*t)->id])
        continue;
      if (n->op == OP_CONV)
        l->wanted[find(l, (*t)->id)] = true;
      if (first)
        join(l, first, *t);
      else
        first = *t;
    }
  }
}

static bool goes_last(Layouts *l, const Tensor *t) {
  return layout_operand(t) && !l->fixed[t->id] && l->wanted[find(l, t->id)];
}

/* Whether the node computes channels-last: a 16-bit convolution always, and
   another same-layout node when one of its operands went. */
static bool node_goes_last(Layouts *l, Node *n) {
  if (n->op == OP_CONV)
    return true;
  for (int s = 0; s < n->nin + n->nout; s++) {
    Tensor **t = operand(n, s);
    if (t && goes_last(l, *t))
      return true;
  }
  return false;
}

static Tensor *new_like(Graph *g, const Tensor *t, const char *name) {
  Tensor *c = graph_add_tensor(g, name);
  c->dtype = t->dtype;
  tensor_set_shape(c, t->rank, t->dims);
  return c;
}

static Node *layout_copy(Graph *g, Tensor *from, Tensor *to, const char *name) {
  Node *n = graph_add_node(g, OP_IDENTITY, name, 1, 1);
  n->in[0] = from;
  n->out[0] = to;
  to->producer = n;
  return n;
}

/* An output of ONNX's order written channels-last: the node writes a
   channels-last tensor that an Identity copies into the original. */
static void convert_output(Layouts *l, Node *n, int k) {
  Graph *g = l->g;
  Tensor *y = n->out[k];
  Tensor *last = new_like(g, y, arena_printf(g->arena, "%s_nhwc", y->name));
  tensor_set_channels_last(last);
  last->producer = n;
  last->producer_slot = k;
  n->out[k] = last;
  layout_copy(g, last, y, arena_printf(g->arena, "%s_to_nchw", y->name));
  l->last_copy[y->id] = last;
}

/* An input of ONNX's order read channels-last: one Identity per tensor,
   shared by its readers (or the channels-last original of a converted
   output). */
static void convert_input(Layouts *l, Node *n, int k) {
  Graph *g = l->g;
  Tensor *x = n->in[k];
  if (!l->last_copy[x->id]) {
    Tensor *last = new_like(g, x, arena_printf(g->arena, "%s_nhwc", x->name));
    tensor_set_channels_last(last);
    layout_copy(g, x, last, arena_printf(g->arena, "%s_to_nhwc", x->name));
    l->last_copy[x->id] = last;
  }
  n->in[k] = l->last_copy[x->id];
}

/* A channels-last convolution's filter: KRSC, the constant itself when
   only such convolutions read it, else a copy (the values stay in ONNX's
   order in the IR; the weights file stores them by the strides). */
static void filter_last(Layouts *l, Node *n) {
  Graph *g = l->g;
  Tensor *w = n->in[1];
  if (order_free(w) || !has_contiguous_strides(w))
    return;
  bool shared = false;
  for (int i = 0; i < w->nusers; i++) {
    Node *u = w->users[i];
    shared = shared || !same_layout_op(u) || u->in[1] != w || u->in[0] == w;
  }
  if (!shared) {
    tensor_set_channels_last(w);
    return;
  }
  if (!l->last_copy[w->id]) {
    Tensor *c = new_like(g, w, arena_printf(g->arena, "%s_krsc", w->name));
    c->f32 = w->f32;
    tensor_set_channels_last(c);
    l->last_copy[w->id] = c;
  }
  n->in[1] = l->last_copy[w->id];
}

static void rewrite(Layouts *l) {
  Graph *g = l->g;
  int nnodes = g->nnodes;
  /* Whether each same-layout node goes channels-last, before any rewrite. */
  bool *last = calloc((size_t)nnodes + 1, sizeof(bool));
  for (int i = 0; i < nnodes; i++) {
    Node *n = g->nodes[i];
    last[i] = !n->dead && same_layout_op(n) && node_goes_last(l, n);
  }
  for (int i = 0; i < l->count; i++)
    if (goes_last(l, g->tensors[i]))
      tensor_set_channels_last(g->tensors[i]);
  /* Outputs first, so that readers of a converted output take the
     channels-last original rather than a second copy. */
  for (int i = 0; i < nnodes; i++)
    for (int k = 0; last[i] && k < g->nodes[i]->nout; k++) {
      Tensor *y = g->nodes[i]->out[k];
      if (layout_operand(y) && y->id < l->count && l->fixed[y->id])
        convert_output(l, g->nodes[i], k);
    }
  for (int i = 0; i < nnodes; i++) {
    Node *n = g->nodes[i];
    for (int k = 0; last[i] && k < n->nin; k++) {
      Tensor *x = n->in[k];
      if (operand(n, k) && layout_operand(x) && x->id < l->count && l->fixed[x->id])
        convert_input(l, n, k);
    }
    if (last[i] && n->op == OP_CONV)
      filter_last(l, n);
  }
  free(last);
}

bool pass_choose_layout(Graph *g, const PassOptions *opt, PassContext *ctx) {
  (void)ctx;
  /* Transfers between devices (--gpus N, --devices gpu,cpu) copy whole
     buffers into ONNX's order, so programs on several keep that order. */
  if (!is_half(opt->half) || opt->layout == LAYOUT_NCHW || opt->gpus > 1 || opt->cpu)
    return true;
  Layouts l = {.g = g, .count = g->ntensors};
  for (int i = 0; i < g->ntensors; i++)
    g->tensors[i]->id = i;
  size_t n = (size_t)l.count + 1;
  l.parent = malloc(n * sizeof(int));
  l.fixed = calloc(n, sizeof(bool));
  l.wanted = calloc(n, sizeof(bool));
  l.last_copy = calloc(n, sizeof(Tensor *));
  for (int i = 0; i < l.count; i++)
    l.parent[i] = i;
  graph_rebuild_uses(g);
  mark_fixed(&l);
  group_operands(&l);
  rewrite(&l);
  free(l.parent);
  free(l.fixed);
  free(l.wanted);
  free(l.last_copy);
  graph_rebuild_uses(g);
  return graph_toposort(g); /* the layout copies go before their readers */
}
