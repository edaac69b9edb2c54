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
 *  - T_BOUND_ELEMENTWISE: the output has the bounded operand's shape. The
 *    other operands are bounded ones of its origin, of its shape or
 *    broadcast to it along other axes (read at the planned strides, so
 *    both in prefix layout), or static,
 *    of size 1 along the run-time axis (the only size a run-time one
 *    broadcasts with). A static one of more than one value is read at the
 *    planned strides, which the run's elements keep only in a prefix
 *    layout (every dim before the run-time one is 1: ir.h), so with such
 *    an operand the bounded one must be in it.
 *  - T_RESHAPES: a reshape that keeps the dims other than 1, in order: the
 *    run-time axis moves with them.
 *  - T_BOUND_TRANSPOSE: a transpose that keeps the dims other than 1 in
 *    order (NonZero's [1, N] to [N, 1], as torch.where exports): the
 *    elements stay where they are.
 *  - T_BOUND_SLICES: Slice and Split along other axes, the run-time one
 *    left whole, or a Slice of its first elements (start 0, step 1: the
 *    output a bound of its own, the run's size clamped to the end), the
 *    input in prefix layout (read at the planned strides);
 *    Concat along another axis of inputs all bounded, of one origin; and
 *    Concat along the run-time axis of inputs bounded along it, of any
 *    origins, and static ones, all in prefix layout: the output is a
 *    bound of its own, the sum of the inputs' bounds and sizes, its run
 *    the inputs' runs one after another, whose size the kernel sums on
 *    the device and writes as the output's dims of the run. Two such
 *    Concats of inputs of the same origins and static sizes, input by
 *    input, give outputs of one origin (the first's).
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
 *    an error). NonMaxSuppression takes boxes [1, N, 4] and scores
 *    [1, 1, N] whose N is one run-time size, of one origin (torchvision's
 *    batched NMS over the joined candidates), its kernel scanning the
 *    run's boxes alone.
 *
 *  - T_BOUND_SELECT: IfSelect, an If whose condition is run-time data, of
 *    branches bounded along one axis, or static of any size along it,
 *    all in prefix layout: the output is planned for the larger, of the
 *    branches' origin where they share one, else a bound of its own
 *    whose dims in this run the kernel takes from the branch picked
 *    (torchvision's empty then branch against the kept boxes).
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

/* A bounded input of n other than b, or NULL. */
static const Tensor *another_bounded(const Node *n, const Tensor *b) {
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] && n->in[i]->bounded && n->in[i] != b)
      return n->in[i];
  return NULL;
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
           "elementwise, with their sizes one origin's and their run-time axes aligned, as "
           "Gather's data "
           "and indices, and joined by Concat (along another axis, of one origin)",
           t->name);
  return refuse(g, n, b, msg);
}

static void set_bound(Tensor *out, const Tensor *from, int axis) {
  out->bounded = true;
  out->bound_axis = axis;
  out->bound_origin = from->bound_origin;
}

/* Whether bounded t goes with b elementwise: one origin, the run-time
   axis as far from the last as b's, and of b's bound. */
static bool aligned_run(const Tensor *t, const Tensor *b) {
  return t->bound_origin == b->bound_origin && t->rank - t->bound_axis == b->rank - b->bound_axis &&
         t->dims[t->bound_axis] == b->dims[b->bound_axis];
}

static bool elementwise(Graph *g, Node *n, const Tensor *b) {
  /* The bounded operand of the output's shape, where one is: the others
     broadcast to it. */
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] && n->in[i]->bounded && n->out[0] && tensor_same_shape(n->in[i], n->out[0])) {
      b = n->in[i];
      break;
    }
  int ax = b->bound_axis, strided = 0;
  for (int i = 0; i < n->nin; i++) {
    const Tensor *t = n->in[i];
    if (t && t->bounded && !aligned_run(t, b))
      return refuse_two(g, n, b, t);
    if (!t || (t->bounded && tensor_same_shape(t, b)))
      continue; /* a bounded one of b's origin and shape goes along element for element */
    if (t->bounded) {
      /* Broadcast along other axes (torchvision's offsets[:, None] added
         to the boxes): read at the planned strides. */
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

/* Whether Concats n and m along their run-time axes join runs of one
   size input by input: bounded inputs of one origin, static ones of one
   size along the axis. Their outputs' runs are then of one size too. */
static bool same_runs(const Node *n, const Node *m) {
  if (n->nin != m->nin)
    return false;
  for (int i = 0; i < n->nin; i++) {
    const Tensor *t = n->in[i], *u = m->in[i];
    if (!t || !u || t->bounded != u->bounded)
      return false;
    if (t->bounded ? t->bound_origin != u->bound_origin
                   : t->dims[n->p.axis.axis] != u->dims[m->p.axis.axis])
      return false;
  }
  return true;
}

/* The output of an earlier Concat along the run-time axis that joins runs
   of the same sizes as n (torchvision's boxes, scores and labels, joined
   class by class), whose run-time size n's output shares; or n's own. */
static const Tensor *joined_origin(const Graph *g, const Node *n) {
  for (int k = 0; k < g->nnodes; k++) {
    const Node *m = g->nodes[k];
    if (m == n)
      break;
    const Tensor *y = m->dead || m->op != n->op || m->nout < 1 ? NULL : m->out[0];
    if (y && y->bounded && y->bound_origin == y && y->bound_axis == m->p.axis.axis &&
        same_runs(n, m))
      return y;
  }
  return n->out[0];
}

/* Concat along the run-time axis: each input bounded along it, of any
   origin, or static, whose size along it counts whole. The output's run
   is the inputs' runs one after another, its size their sum, which only
   the kernel knows: the output is a bound of its own (the sum of the
   inputs' bounds and sizes, as shape inference made it). Rows are moved
   whole, so every operand must be in prefix layout. */
static bool joins_runs(Graph *g, Node *n, const Tensor *b) {
  int ax = b->bound_axis;
  for (int i = 0; i < n->nin; i++) {
    const Tensor *t = n->in[i];
    if (t && t->bounded && t->bound_axis != ax)
      return refuse(g, n, t, "Concat joins it only along its run-time axis, or with tensors of "
                    "its own run-time size along another");
  }
  Tensor *out = n->out[0];
  if (!prefix_layout(out, ax))
    return refuse(g, n, b, "Concat along the run-time axis moves whole rows, which the runs "
                  "keep only when every dim before the run-time one is 1");
  const Tensor *twin = joined_origin(g, n);
  out->bounded = true;
  out->bound_axis = ax;
  out->bound_origin = twin; /* the output itself, or the twin's output */
  return true;
}

/* Concat along another axis than the run-time one of inputs that all have
   one run-time size; along it, joins_runs. */
static bool joins(Graph *g, Node *n, const Tensor *b) {
  int ax = b->bound_axis;
  if (n->p.axis.axis == ax)
    return joins_runs(g, n, b);
  for (int i = 0; i < n->nin; i++) {
    const Tensor *t = n->in[i];
    if (t && (!t->bounded || t->bound_origin != b->bound_origin || t->bound_axis != ax))
      return refuse(g, n, b, "Concat joins it only with tensors of the same run-time size");
    if (t && !prefix_layout(t, ax))
      return refuse(g, n, b, "Concat reads and writes at the planned strides, which the run's "
                    "elements keep only when every dim before the run-time one is 1");
  }
  set_bound(n->out[0], b, ax);
  return true;
}

static bool slices(Graph *g, Node *n, const Tensor *b) {
  int ax = b->bound_axis;
  bool split = op_info(n->op)->params == PARAMS_SPLIT;
  bool whole = split ? n->p.split.axis != ax
                     : n->p.slice.start[ax] == 0 && n->p.slice.step[ax] == 1 &&
                           n->p.slice.extent[ax] == b->dims[ax];
  /* The first rows (torchvision's keep[:detections_per_img]): the run's
     first ones, as many as the run has up to the end, a bound of its own. */
  bool first = !split && n->p.slice.start[ax] == 0 && n->p.slice.step[ax] == 1;
  if (!whole && !first)
    return refuse(g, n, b, "it cuts the run-time axis other than to its first elements, which "
                  "would need the run's size");
  if (!prefix_layout(b, ax))
    return refuse(g, n, b, "it reads at the planned strides, which the run's elements keep "
                  "only when every dim before the run-time one is 1");
  for (int i = 0; i < n->nout; i++)
    if (n->out[i])
      set_bound(n->out[i], b, ax);
  if (!whole)
    n->out[0]->bound_origin = n->out[0]; /* min(run, end) rows: its dims the run's, clamped */
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

/* IfSelect (an If whose condition is run-time data) of branches bounded
   along one axis or static: the output is bounded along it, of the
   branches' origin where both are of one, else its own, whose dims in
   this run the kernel takes from the branch picked. */
static bool selects(Graph *g, Node *n, const Tensor *b) {
  Tensor *out = n->out[0];
  const Tensor *then = n->in[1], *other = n->in[2];
  int ax = b->bound_axis;
  if (n->in[0]->bounded)
    return refuse(g, n, n->in[0], "an If's condition is one value");
  for (int i = 1; i < 3; i++) {
    const Tensor *t = n->in[i];
    if (t->bounded && t->bound_axis != ax)
      return refuse(g, n, t, "the If's other branch has a size known only at run time along "
                    "another axis");
    if (!prefix_layout(t, ax))
      return refuse(g, n, t, "the If picks a branch's rows whole, which the runs keep only when "
                    "every dim before the run-time one is 1");
  }
  bool one = then->bounded && other->bounded && then->bound_origin == other->bound_origin &&
             tensor_same_shape(then, other);
  out->bounded = true;
  out->bound_axis = ax;
  out->bound_origin = one ? then->bound_origin : out;
  return true;
}

/* A node that makes a bound (NonZero, ...) is its outputs' origin: the
   first bounded one's, where they are of one shape (TopK's values and
   indices, which a detector joins and reads together). */
static void set_origins(Node *n) {
  const Tensor *first = NULL;
  for (int i = 0; i < n->nout; i++) {
    Tensor *t = n->out[i];
    if (!t || !t->bounded)
      continue;
    bool twin = first && first->bound_axis == t->bound_axis && tensor_same_shape(first, t);
    t->bound_origin = twin ? first : t;
    if (!first)
      first = t;
  }
}

/* NonMaxSuppression of boxes [1, N, 4] and scores [1, 1, N] whose N is
   one run-time size: torchvision's batched NMS, one class of every
   candidate (the classes kept apart by offsets on the boxes). */
static bool nms_counts(Graph *g, Node *n, const Tensor *b) {
  const Tensor *boxes = n->in[0], *scores = n->in[1];
  for (int i = 2; i < n->nin; i++)
    if (n->in[i] && n->in[i]->bounded)
      return refuse(g, n, n->in[i], "NonMaxSuppression takes such tensors only as its boxes "
                    "and scores");
  if (!boxes->bounded || !scores->bounded || boxes->bound_origin != scores->bound_origin ||
      boxes->bound_axis != 1 || scores->bound_axis != 2)
    return refuse(g, n, b, "NonMaxSuppression takes boxes and scores whose box count is one "
                  "run-time size (of one origin), or neither");
  if (!prefix_layout(boxes, 1) || !prefix_layout(scores, 2))
    return refuse(g, n, b, "NonMaxSuppression reads such boxes and scores of one batch and "
                  "one class only, where every dim before the run-time one is 1");
  set_origins(n);
  return true;
}

static bool counts(Graph *g, Node *n, const Tensor *b) {
  if (op_info(n->op)->params == PARAMS_NMS)
    return nms_counts(g, n, b);
  const Tensor *other = another_bounded(n, b);
  if (other)
    return refuse_two(g, n, b, other);
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
  set_origins(n);
  return true;
}



bool infer_bounds(Graph *g, Node *n) {
  const Tensor *b = another_bounded(n, NULL);
  if (!b) {
    set_origins(n);
    return true;
  }
  /* Elementwise kinds, Gather, Concat, the counting kinds
     (NonMaxSuppression's boxes and scores) and IfSelect check their other
     bounded inputs themselves; the other rules take one. */
  unsigned traits = op_info(n->op)->traits;
  if (traits & T_BOUND_ELEMENTWISE)
    return elementwise(g, n, b);
  if (traits & T_BOUND_GATHER)
    return gather(g, n, b);
  if ((traits & T_BOUND_SLICES) && op_info(n->op)->params == PARAMS_AXIS)
    return joins(g, n, b);
  if (traits & T_BOUND_COUNTS)
    return counts(g, n, b);
  if (traits & T_BOUND_SELECT)
    return selects(g, n, b);
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
  char msg[96];
  snprintf(msg, sizeof msg, "%s does not read such a tensor yet", op_name(n->op));
  return refuse(g, n, b, msg);
}
