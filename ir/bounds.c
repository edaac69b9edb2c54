/*
 * bounds.c - which nodes may read a bounded tensor (Tensor.bounded: one
 * dim is the data's, as NonZero's count or NonMaxSuppression's rows), and
 * what their outputs become.
 *
 * A reader's kernel runs over the planned storage, the bound. Elements
 * past the run's hold whatever the storage holds: they are computed on but
 * never taken as results, because every reader of a bounded tensor is one
 * of the kinds below, whose outputs are bounded in turn, or the caller,
 * who is given the run's dims. The backend writes each such output's dims
 * of the run: its bounded input's, moved to the output's bound axis.
 *
 *  - T_BOUND_ELEMENTWISE: the output has a bounded operand's shape. The
 *    other operands are bounded ones of its origin, their run-time axes
 *    aligned with its own (torchvision's boxes [N, 4] plus offsets
 *    [N, 1]), or static, of size 1 along the run-time axis (the only size
 *    a run-time one broadcasts with). A static one of more than one value
 *    and a bounded one of another shape are read at the planned strides,
 *    which the run's elements keep only in a prefix layout (every dim
 *    before the run-time one is 1: ir.h), so with such an operand the
 *    bounded ones must be in it.
 *  - T_RESHAPES: a reshape that keeps the dims other than 1, in order: the
 *    run-time axis moves with them.
 *  - T_BOUND_TRANSPOSE: a transpose that keeps the dims other than 1 in
 *    order (NonZero's [1, N] to [N, 1], as torch.where exports): the
 *    elements stay where they are.
 *  - T_BOUND_SLICES: Slice and Split along other axes, the run-time one
 *    left whole, or a Slice of the run's head (start 0, step 1: x[:k]),
 *    whose output is an origin of its own, its count the run's within k;
 *    the input in prefix layout (read at the planned strides);
 *    Concat along another axis of inputs all bounded, of one origin.
 *  - T_BOUND_GATHER: Gather of bounded data along another axis, or of
 *    bounded indices into static data; GatherND of bounded index rows
 *    (batch_dims 0) into static data; input and output in prefix layout.
 *    Indices past the run's are garbage; the kernels clamp every index to
 *    the data, so they never fault.
 *  - T_BOUND_SHAPE: Shape and Size, which run instead of folding, on the
 *    input's dims of the run; their outputs are static tensors of
 *    run-time values.
 *  - T_BOUND_COUNTS: NonZero, and TopK along the run-time axis, whose
 *    kernels read the input's dims of the run and take the run's elements
 *    alone, the input in prefix layout; their outputs are bounds of their
 *    own (TopK's K kept within the run, where ONNX would call a larger one
 *    an error).
 *    NonMaxSuppression takes boxes [1, N, 4] and scores [1, C, N] of one
 *    origin (torchvision's batched_nms over the boxes a detector kept),
 *    its kernel reading N of this run; the scores at their planned
 *    strides, whatever their layout. IfSelect (a run-time If) of a
 *    bounded branch and a static one that fits in its bound (ir/ops.c)
 *    takes the chosen branch's elements and dims of this run.
 *  - T_BOUND_REDUCE: Reduce* and ArgMax/ArgMin, the input in prefix layout
 *    (their kernels read at the planned strides). Over the run-time axis
 *    the output is static: the kernel reads the run's length and reduces
 *    the run's elements alone, an empty run giving the reduction's
 *    identity (ONNX's empty set: -inf for Max, +inf for Min, 0 for Sum,
 *    L1, L2 and SumSquare, 1 for Prod, -inf for LogSum and LogSumExp, and
 *    0 for Mean, as ONNX Runtime gives; index 0 for ArgMax/ArgMin, which
 *    ONNX Runtime refuses). Along other axes the output stays bounded,
 *    the run-time dim moved to its place.
 *
 * Anything else is refused, naming the node, the input and its producer.
 */
#include <stdio.h>
#include <string.h>

#include "shapes.h"

/* Whether every dim before `axis` is 1: the run's elements are then the
   first ones of the planned storage, at the planned strides. */
static bool prefix_layout(const Tensor *t, int axis) {
  for (int d = 0; d < axis; d++)
    if (t->dims[d] != 1)
      return false;
  return true;
}

static bool refuse(Graph *g, const Node *n, const Tensor *t, const char *why) {
  char bound[IR_MAX_RANK * 24 + 16];
  ir_error(g, n, "input '%s' has a size known only at run time (the output of a %s, %s); %s",
           t->name, t->producer ? op_name(t->producer->op) : "node",
           tensor_type_str(t, bound, sizeof bound), why);
  return false;
}

/* A second bounded input, t, that the rule does not take with b. */
static bool refuse_two(Graph *g, const Node *n, const Tensor *b, const Tensor *t) {
  char msg[LIMIT_NAME_BYTES + 200];
  snprintf(msg, sizeof msg, "so has input '%s', and opc reads two such tensors in one node only "
           "elementwise, where both have one shape and their sizes one origin, as Gather's data "
           "and indices, and joined by Concat",
           t->name);
  return refuse(g, n, b, msg);
}

static void set_bound(Tensor *out, const Tensor *from, int axis) {
  out->bounded = true;
  out->bound_axis = axis;
  out->bound_origin = from->bound_origin;
}

/* The bounded input of n's output shape, or NULL: the one whose run-time
   dim the output's is where bounded operands broadcast. */
static const Tensor *widest_bounded(const Node *n) {
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] && n->in[i]->bounded && n->out[0] && tensor_same_shape(n->in[i], n->out[0]))
      return n->in[i];
  return NULL;
}

/* Whether bounded t goes along with b elementwise: one origin, the
   run-time axes aligned (from the right, as broadcasting aligns dims) and
   of one bound. */
static bool same_run(const Tensor *t, const Tensor *b) {
  return t->bound_origin == b->bound_origin &&
         t->rank - t->bound_axis == b->rank - b->bound_axis &&
         t->dims[t->bound_axis] == b->dims[b->bound_axis];
}

static bool elementwise(Graph *g, Node *n, const Tensor *first) {
  const Tensor *b = widest_bounded(n);
  if (!b)
    return refuse(g, n, first, "broadcasting gives the output another shape");
  int ax = b->bound_axis, strided = 0;
  for (int i = 0; i < n->nin; i++) {
    const Tensor *t = n->in[i];
    if (t && t->bounded && !same_run(t, b))
      return refuse_two(g, n, b, t);
    if (!t || (t->bounded && tensor_same_shape(t, b)))
      continue; /* a bounded one of b's origin and shape goes along element for element */
    if (t->bounded) {
      /* broadcast along other axes: read at the planned strides, which
         its run's elements keep in a prefix layout */
      if (!prefix_layout(t, t->bound_axis))
        return refuse(g, n, t, "it is broadcast, read at the planned strides, which the run's "
                      "elements keep only when every dim before the run-time one is 1");
      strided++;
      continue;
    }
    strided += tensor_numel(t) > 1; /* one value is read at stride 0, in any layout */
    int d = ax - (b->rank - t->rank);
    if (d >= 0 && t->dims[d] != 1) {
      char msg[LIMIT_NAME_BYTES + 160];
      snprintf(msg, sizeof msg, "operand '%s' has %lld along that axis, and a run-time size "
               "broadcasts only with 1", t->name, (long long)t->dims[d]);
      return refuse(g, n, b, msg);
    }
  }
  if (strided && !prefix_layout(b, ax))
    return refuse(g, n, b, "its other operands would be read at the planned strides, which the "
                  "run's elements keep only when every dim before the run-time one is 1");
  for (int i = 0; i < n->nout; i++) {
    if (!n->out[i])
      continue;
    if (!tensor_same_shape(n->out[i], b))
      return refuse(g, n, b, "broadcasting gives the output another shape");
    set_bound(n->out[i], b, ax);
  }
  return true;
}

/* The position of the k-th dim other than 1 of t, or -1. */
static int non_unit_dim(const Tensor *t, int k) {
  for (int d = 0; d < t->rank; d++)
    if (t->dims[d] != 1 && k-- == 0)
      return d;
  return -1;
}

static int count_non_unit(const Tensor *t, int end) {
  int count = 0;
  for (int d = 0; d < end; d++)
    count += t->dims[d] != 1;
  return count;
}

static bool reshape(Graph *g, Node *n, const Tensor *b) {
  int ax = b->bound_axis;
  if (b->dims[ax] == 1)
    return refuse(g, n, b, "a run-time axis of bound 1 cannot be told from the dims of 1 a "
                  "reshape adds or removes");
  int k = count_non_unit(b, ax);
  for (int i = 0; i < n->nout; i++) {
    Tensor *out = n->out[i];
    if (!out)
      continue;
    bool kept = count_non_unit(out, out->rank) == count_non_unit(b, b->rank);
    for (int j = 0; kept && j < count_non_unit(b, b->rank); j++)
      kept = out->dims[non_unit_dim(out, j)] == b->dims[non_unit_dim(b, j)];
    if (!kept)
      return refuse(g, n, b, "the reshape merges or splits dims, which would need the run's "
                    "size multiplied");
    set_bound(out, b, non_unit_dim(out, k));
  }
  return true;
}

static bool transpose(Graph *g, Node *n, const Tensor *b) {
  Tensor *out = n->out[0];
  int last = -1, out_axis = -1;
  for (int i = 0; i < out->rank; i++) {
    int from = n->p.transpose.perm[i];
    if (from == b->bound_axis)
      out_axis = i;
    if (b->dims[from] == 1 && from != b->bound_axis)
      continue;
    if (from < last)
      return refuse(g, n, b, "the transpose reorders its dims, which would need the run's "
                    "strides");
    last = from;
  }
  set_bound(out, b, out_axis);
  return true;
}

/* Concat along another axis than the run-time one of inputs that all have
   one run-time size. */
static bool joins(Graph *g, Node *n, const Tensor *b) {
  int ax = b->bound_axis;
  for (int i = 0; i < n->nin; i++) {
    const Tensor *t = n->in[i];
    if (t && (!t->bounded || t->bound_origin != b->bound_origin || t->bound_axis != ax))
      return refuse(g, n, b, "Concat joins it only with tensors of the same run-time size");
    if (t && !prefix_layout(t, ax))
      return refuse(g, n, b, "Concat reads and writes at the planned strides, which the run's "
                    "elements keep only when every dim before the run-time one is 1");
  }
  if (n->p.axis.axis == ax)
    return refuse(g, n, b, "Concat along the run-time axis would need the runs' sizes");
  set_bound(n->out[0], b, ax);
  return true;
}

static bool slices(Graph *g, Node *n, const Tensor *b) {
  int ax = b->bound_axis;
  bool split = op_info(n->op)->params == PARAMS_SPLIT;
  bool whole = split ? n->p.split.axis != ax
                     : n->p.slice.start[ax] == 0 && n->p.slice.step[ax] == 1 &&
                           n->p.slice.extent[ax] == b->dims[ax];
  /* x[:k], torchvision's keep[:post_nms_top_n]: the run's first k at most */
  bool head = !split && n->p.slice.start[ax] == 0 && n->p.slice.step[ax] == 1;
  if (!whole && !head)
    return refuse(g, n, b, "it cuts the run-time axis elsewhere than its head, which would "
                  "need the run's size");
  if (!prefix_layout(b, ax))
    return refuse(g, n, b, "it reads at the planned strides, which the run's elements keep "
                  "only when every dim before the run-time one is 1");
  for (int i = 0; i < n->nout; i++)
    if (n->out[i] && tensor_numel(n->out[i]) > 0) { /* x[:0] is static, empty */
      set_bound(n->out[i], b, ax);
      if (!whole)
        n->out[i]->bound_origin = n->out[i]; /* a count of its own: the run's, within k */
    }
  return true;
}

/* GatherND of bounded index rows into static data: the output's leading
   dims are the rows'. */
static bool gather_nd(Graph *g, Node *n, const Tensor *b) {
  const Tensor *idx = n->in[1];
  if (b != idx && idx->bounded)
    return refuse_two(g, n, b, idx);
  if (b != idx || n->p.gather_nd.batch_dims != 0 || b->bound_axis >= idx->rank - 1)
    return refuse(g, n, b, "GatherND takes only its index rows of run-time count, with "
                  "batch_dims 0");
  if (!prefix_layout(b, b->bound_axis))
    return refuse(g, n, b, "it reads at the planned strides, which the run's elements keep "
                  "only when every dim before the run-time one is 1");
  set_bound(n->out[0], b, b->bound_axis);
  return true;
}

static bool gather(Graph *g, Node *n, const Tensor *b) {
  if (op_info(n->op)->params == PARAMS_GATHER_ND)
    return gather_nd(g, n, b);
  const Tensor *data = n->in[0], *idx = n->in[1];
  Tensor *out = n->out[0];
  int axis = n->p.axis.axis, out_axis;
  const Tensor *from = b;
  if (data->bounded && idx->bounded) {
    /* Rows picked from the run by indices of the run's own making (a
       mask's NonZero): taken as within it, as a boolean index in torch
       makes them. An index past the run reads a row of the storage. */
    if (data->bound_axis != axis)
      return refuse(g, n, idx, "so has the data along another axis than the gathered one");
    if (!prefix_layout(data, axis) || !prefix_layout(idx, idx->bound_axis))
      return refuse(g, n, data, "Gather reads at the planned strides, which the run's "
                    "elements keep only when every dim before the run-time one is 1");
    from = idx;
    out_axis = axis + idx->bound_axis;
  } else if (b == data) {
    if (b->bound_axis == axis)
      return refuse(g, n, b, "Gather along the run-time axis needs the indices checked against "
                    "the run's size, which no kernel does yet");
    out_axis = b->bound_axis < axis ? b->bound_axis : b->bound_axis - 1 + idx->rank;
  } else {
    out_axis = axis + b->bound_axis;
  }
  if (!prefix_layout(b, b->bound_axis) || !prefix_layout(out, out_axis))
    return refuse(g, n, b, "Gather reads and writes at the planned strides, which the run's "
                  "elements keep only when every dim before the run-time one is 1");
  set_bound(out, from, out_axis);
  return true;
}

static bool counts(Graph *g, Node *n, const Tensor *b) {
  if (!prefix_layout(b, b->bound_axis))
    return refuse(g, n, b, "it reads at the planned strides, which the run's elements keep "
                  "only when every dim before the run-time one is 1");
  if (op_info(n->op)->params == PARAMS_TOPK) {
    if (n->p.topk.axis != b->bound_axis || b != n->in[0])
      return refuse(g, n, b, "TopK takes such a tensor only as its input, along its run-time "
                    "axis");
    for (int i = 0; i < n->nout; i++)
      if (n->out[i] && tensor_numel(n->out[i]) > 0)
        set_bound(n->out[i], n->out[i], b->bound_axis);
  }
  for (int i = 0; i < n->nout; i++)
    if (n->out[i] && n->out[i]->bounded)
      n->out[i]->bound_origin = n->out[i];
  return true;
}

/* Reduce* and ArgMax/ArgMin: the output keeps the run-time axis unless
   it is reduced (ir.h's T_BOUND_REDUCE). */
static bool reduces(Graph *g, Node *n, const Tensor *b) {
  if (b != n->in[0])
    return refuse(g, n, b, "it is read only as the data reduced");
  if (!prefix_layout(b, b->bound_axis))
    return refuse(g, n, b, "its kernels read at the planned strides, which the run's elements "
                  "keep only when every dim before the run-time one is 1");
  bool reduced[IR_MAX_RANK] = {false}, keep;
  if (op_info(n->op)->params == PARAMS_ARG) {
    reduced[n->p.arg.axis] = true;
    keep = n->p.arg.keepdims;
  } else {
    memcpy(reduced, n->p.reduce.reduced, sizeof reduced);
    keep = n->p.reduce.keepdims; /* noop_with_empty_axes: nothing reduced */
  }
  int ax = b->bound_axis;
  if (reduced[ax])
    return true; /* a static output: the kernel reduces the run alone */
  int out_axis = ax;
  for (int d = 0; d < ax && !keep; d++)
    out_axis -= reduced[d];
  set_bound(n->out[0], b, out_axis);
  return true;
}

/* A node that makes a bound (NonZero, ...) is its outputs' origin. */
static void set_origins(Node *n) {
  for (int i = 0; i < n->nout; i++)
    if (n->out[i] && n->out[i]->bounded)
      n->out[i]->bound_origin = n->out[i];
}

/* NonMaxSuppression of boxes [1, N, 4] and scores [1, C, N] of one run
   (torchvision's batched_nms over the boxes a model kept): its kernel
   reads the boxes' count in this run and takes those alone, the scores
   at their planned strides; its output is a bound of its own. */
static bool suppresses(Graph *g, Node *n, const Tensor *b) {
  const Tensor *boxes = n->in[0], *scores = n->in[1];
  for (int k = 2; k < n->nin; k++)
    if (n->in[k] && n->in[k]->bounded)
      return refuse(g, n, n->in[k], "NonMaxSuppression takes such a tensor only as its boxes "
                    "and scores");
  if (!boxes->bounded || !scores->bounded || boxes->bound_axis != 1 || scores->bound_axis != 2 ||
      boxes->bound_origin != scores->bound_origin)
    return refuse(g, n, b, "NonMaxSuppression takes boxes and scores of one run-time count "
                  "only, along their boxes' axis");
  if (!prefix_layout(boxes, 1))
    return refuse(g, n, boxes, "its kernel reads the boxes at the planned strides, which the "
                  "run's elements keep only when every dim before the run-time one is 1");
  set_origins(n);
  return true;
}

/* A bounded input of n other than b, or NULL. */
static const Tensor *another_bounded(const Node *n, const Tensor *b) {
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] && n->in[i]->bounded && n->in[i] != b)
      return n->in[i];
  return NULL;
}

bool infer_bounds(Graph *g, Node *n) {
  const Tensor *b = another_bounded(n, NULL);
  if (!b) {
    set_origins(n);
    return true;
  }
  /* Elementwise kinds, Gather and Concat check their other bounded
     inputs themselves; the other rules take one. */
  unsigned traits = op_info(n->op)->traits;
  if (traits & T_BOUND_ELEMENTWISE)
    return elementwise(g, n, b);
  if (traits & T_BOUND_GATHER)
    return gather(g, n, b);
  if ((traits & T_BOUND_SLICES) && op_info(n->op)->params == PARAMS_AXIS)
    return joins(g, n, b);
  if ((traits & T_BOUND_COUNTS) && op_info(n->op)->params == PARAMS_NMS)
    return suppresses(g, n, b);
  const Tensor *other = another_bounded(n, b);
  if (other)
    return refuse_two(g, n, b, other);
  if (traits & T_RESHAPES)
    return reshape(g, n, b);
  if (traits & T_BOUND_TRANSPOSE)
    return transpose(g, n, b);
  if (traits & T_BOUND_SLICES)
    return slices(g, n, b);
  if (traits & T_BOUND_SHAPE)
    return true;
  if (traits & T_BOUND_COUNTS)
    return counts(g, n, b);
  if (traits & T_BOUND_REDUCE)
    return reduces(g, n, b);
  char msg[96];
  snprintf(msg, sizeof msg, "%s does not read such a tensor yet", op_name(n->op));
  return refuse(g, n, b, msg);
}
