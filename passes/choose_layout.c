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
 *    holding a convolution's operand goes channels-last. In the int8 and
 *    CPU forms a float Resize is one too (opc_resize takes any strides,
 *    the CPU target's opc_resize_nhwc whole runs of channels), so that an
 *    upsampling inside a chain (a detector's FPN) keeps it channels-last;
 *    one that enlarges into a tensor of ONNX's order (a segmentation
 *    head's output) keeps its input in that order too, so that the smaller
 *    tensor is the one converted;
 *  - bridges, elementwise operators, global pools and Transpose, which
 *    read and write any strides (opc's kernels and copies, cudnnOpTensor,
 *    cudnnActivationForward and cudnnReduceTensor take each operand's
 *    strides): they join nothing, so a Cast or a Relu between the two
 *    orders is where the layout changes, at no cost, and a Transpose of
 *    channels-last data into [N, H, W, C] (ConvNeXt's) is a copy in memory
 *    order;
 *  - everything else (Reshape, Flatten, Gemm, ...) reads and writes
 *    ONNX's order, as do graph inputs and outputs, constants and views.
 * Where a same-layout operator meets a tensor that must keep ONNX's order,
 * an Identity between a channels-last copy and the tensor changes the
 * layout: these are the only copies the pass adds. Tensors with C = 1 or
 * H = W = 1 are the same in both orders and are left alone. Programs on
 * several devices keep ONNX's order (place-devices' transfers make it).
 *
 * Int8: without --precision, the same grouping stores the activations of
 * integer convolutions channels-last: the QLinearConvs that take
 * cuBLASLt's int8 GEMM (qlinear_conv_takes_int8_gemm) are the same-layout nodes, as a
 * channels-last image is the GEMM's operand with no transpose (a 1x1
 * convolution's rows are its pixels, a KxK one's a gather of whole pixels)
 * and the GEMM writes channels-last sums; so are the depthwise ones whose
 * constants opc_qconv_depthwise_nhwc folds (its inner loop runs along the
 * channels), and so is a channel Concat of their bytes (fuse-qdq's, a
 * kind with T_MOVES_VALUES). OPC_INT8_GEMM=kernel (opc's kernels, to compare) keeps
 * ONNX's order. Here the elementwise bridges
 * join their operands of the output's shape too, so that the float
 * residual path between quantized convolutions (DequantizeLinear, Add,
 * Relu, QuantizeLinear) follows the convolutions' order and runs dense,
 * rather than transposing on every DQ and Q.
 */
#include <stdlib.h>
#include <string.h>

#include "pass.h"
#include "rewrite.h"

typedef struct Layouts {
  Graph *g;
  bool int8;           /* the int8 form: same-layout nodes are int8_conv's */
  bool cpu;            /* the CPU target's float form: conv_runs_channels_last's */
  bool *int8_conv;     /* by Node.id, of the nodes before the rewrite: int8_conv */
  int nnodes;
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

/* The int8 form's convolutions: the GEMM's, and the depthwise kernel's. */
static bool int8_conv(const Node *n) {
  if (qlinear_conv_depthwise_folds(n))
    return true;
  return qlinear_conv_takes_int8_gemm(n) && has_contiguous_strides(n->in[0]) &&
         has_contiguous_strides(n->in[3]) && has_contiguous_strides(n->out[0]);
}

/* Whether the graph has an int8_conv: an int8 program with none is left
   to the other forms. */
static bool has_int8_conv(const Graph *g) {
  for (int i = 0; i < g->nnodes; i++)
    if (!g->nodes[i]->dead && int8_conv(g->nodes[i]))
      return true;
  return false;
}

/* A pooling window (ops.def's window cost class, not a convolution's). */
static bool is_pool(const OpInfo *info) {
  return info->params == PARAMS_WINDOW && info->cost == COST_WINDOW;
}

/* A 16-bit node of a T_SAME_LAYOUT kind in the form cuDNN takes in either
   order (lower-precision made only such convolutions and pools 16-bit);
   in the int8 form, an int8_conv, or a float32 node of such a kind other
   than a float convolution (cuDNN pools and normalises either order, so
   a pool or DenseNet's BatchNormalization between quantized convolutions
   keeps theirs), or a join or a max of their bytes (T_MOVES_VALUES,
   T_SELECTS_VALUES). */
static bool same_layout_op(const Layouts *l, const Node *n) {
  const OpInfo *info = op_info(n->op);
  const Tensor *y = n->out[0];
  bool moves = info->traits & (T_MOVES_VALUES | T_SELECTS_VALUES);
  if (l->int8 && ((n->id < l->nnodes && l->int8_conv[n->id]) ||
                  (info->params == PARAMS_WINDOW && !is_pool(info))))
    return n->id < l->nnodes && l->int8_conv[n->id];
  if (l->cpu && info->params == PARAMS_WINDOW && !is_pool(info))
    return conv_runs_channels_last(n);
  if (!(info->traits & T_SAME_LAYOUT) || !y || y->rank != 4)
    return false;
  if (l->int8 || l->cpu ? y->dtype != DT_FLOAT && !moves : !is_half(y->dtype))
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
static Tensor **operand(const Layouts *l, Node *n, int slot) {
  if (slot >= n->nin)
    return slot - n->nin < n->nout ? &n->out[slot - n->nin] : NULL;
  if (l->int8 && n->op == OP_QLINEAR_CONV && (slot != 0 || n->in[0]->dims[1] < 4))
    return NULL; /* its data is x alone, and x keeps ONNX's order with few channels */
  if (l->cpu && n->op == OP_CONV && slot == 0 && n->in[0]->dims[1] < 4)
    return NULL; /* x with few channels (an image) is read in ONNX's order */
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
    if (n->dead || same_layout_op(l, n) || (op_info(n->op)->traits & T_ANY_LAYOUT))
      continue;
    for (int k = 0; k < n->nin; k++)
      if (n->in[k])
        l->fixed[n->in[k]->id] = true;
    for (int k = 0; k < n->nout; k++)
      if (n->out[k])
        l->fixed[n->out[k]->id] = true;
  }
  /* An enlarging Resize whose output keeps ONNX's order reads that order:
     converting its input costs less than converting its output. Reverse
     order, so that a chain of them passes the order back. */
  for (int i = g->nnodes - 1; i >= 0; i--) {
    Node *n = g->nodes[i];
    if (!n->dead && op_info(n->op)->params == PARAMS_RESIZE && same_layout_op(l, n) &&
        l->fixed[n->out[0]->id] && tensor_numel(n->out[0]) > tensor_numel(n->in[0]))
      l->fixed[n->in[0]->id] = true;
  }
  /* Operands of same-layout nodes that are not data (a Conv's filter and
     bias, BatchNormalization's parameters) stay as they are too. */
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || !same_layout_op(l, n))
      continue;
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] && !operand(l, n, k))
        l->fixed[n->in[k]->id] = true;
  }
}

/* In the int8 and CPU forms, an elementwise bridge's operands of its
   output's shape (not broadcast), which it reads and writes in step. */
static Tensor **bridge_operand(const Layouts *l, Node *n, int slot) {
  if (!(l->int8 || l->cpu) || !(op_info(n->op)->traits & T_ANY_LAYOUT) || !n->out[0])
    return NULL;
  Tensor **t = slot < n->nin ? &n->in[slot] : slot - n->nin < n->nout ? &n->out[slot - n->nin]
                                                                       : NULL;
  return t && *t && tensor_same_shape(*t, n->out[0]) ? t : NULL;
}

/* Joins the operands of each same-layout node (and, in the int8 form,
   each bridge's); a convolution's group is wanted channels-last. */
static void group_operands(Layouts *l) {
  Graph *g = l->g;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    bool same = !n->dead && same_layout_op(l, n);
    if (n->dead || (!same && !bridge_operand(l, n, n->nin)))
      continue;
    const Tensor *first = NULL;
    for (int s = 0; s < n->nin + n->nout; s++) {
      Tensor **t = same ? operand(l, n, s) : bridge_operand(l, n, s);
      if (!t || !layout_operand(*t) || l->fixed[(*t)->id])
        continue;
      if (n->op == OP_CONV || n->op == OP_QLINEAR_CONV)
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
  if (n->op == OP_CONV || n->op == OP_QLINEAR_CONV)
    return true;
  for (int s = 0; s < n->nin + n->nout; s++) {
    Tensor **t = operand(l, n, s);
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
    shared = shared || !same_layout_op(l, u) || u->in[1] != w || u->in[0] == w;
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
    last[i] = !n->dead && same_layout_op(l, n) && node_goes_last(l, n);
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
      if (operand(l, n, k) && layout_operand(x) && x->id < l->count && l->fixed[x->id])
        convert_input(l, n, k);
    }
    if (last[i] && n->op == OP_CONV && !l->cpu) /* the CPU target packs its filters itself */
      filter_last(l, n);
  }
  free(last);
}

bool pass_choose_layout(Graph *g, const PassOptions *opt, PassContext *ctx) {
  (void)ctx;
  /* Transfers between devices (--gpus N, --devices gpu,cpu) copy whole
     buffers into ONNX's order, so programs on several keep that order. */
  if (opt->layout == LAYOUT_NCHW || opt->gpus > 1 || opt->cpu)
    return true;
  /* The int8 form: QLinearConvs on the GEMM (kernels_quantized.c keeps
     serving programs, which --target serve makes, on its kernels). */
  bool int8 = !is_half(opt->half) && int8_gemm_allowed(g) && has_int8_conv(g);
  bool cpu = !is_half(opt->half) && !int8 && opt->cpu_target;
  if (!is_half(opt->half) && !int8 && !cpu)
    return true;
  Layouts l = {.g = g, .count = g->ntensors, .int8 = int8, .cpu = cpu};
  for (int i = 0; i < g->ntensors; i++)
    g->tensors[i]->id = i;
  for (int i = 0; i < g->nnodes; i++)
    l.nnodes = g->nodes[i]->id >= l.nnodes ? g->nodes[i]->id + 1 : l.nnodes;
  l.int8_conv = calloc((size_t)l.nnodes + 1, sizeof(bool));
  for (int i = 0; i < g->nnodes && int8; i++) {
    Node *c = g->nodes[i];
    l.int8_conv[c->id] = !c->dead && int8_conv(c);
  }
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
  free(l.int8_conv);
  graph_rebuild_uses(g);
  return graph_toposort(g); /* the layout copies go before their readers */
}
