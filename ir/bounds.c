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
 *  - T_BOUND_ELEMENTWISE: the output is bounded where the bounded operand
 *    is (dims counted from the last). The other operands are bounded ones
 *    of its origin, on the same axis, or static,
 *    of size 1 along the run-time axis (the only size a run-time one
 *    broadcasts with). A static one of more than one value, or a bounded
 *    one of that origin broadcast along another axis (RetinaNet's boxes
 *    [N, 4] plus offsets [N, 1]), is read at the planned strides, which
 *    the run's elements keep only in a prefix layout (every dim before the
 *    run-time one is 1: ir.h), so with such an operand every bounded one,
 *    and the output, must be in it.
 *  - T_RESHAPES: a reshape that keeps the dims other than 1, in order: the
 *    run-time axis moves with them; or one that merges or splits static
 *    dims only, the run's size whole on one axis (Flatten's part that
 *    holds it, a Reshape's -1 that comes out at the bound): the run's
 *    elements are the first of the storage in any layout, so a reshape
 *    that keeps their count keeps them where they are. A Reshape whose
 *    target shape the program computes from a bounded tensor's dims
 *    (ir/symbolic.c: Tensor.sym) takes the axis where the shape names the
 *    run-time size of its data's origin, the other elements constants of
 *    the product of the data's static dims; another origin's size, a
 *    multiple of one, or two of them are refused, naming the shape input.
 *    One that merges the run-time axis with static dims after it, in
 *    prefix layout ([N, 90, 4] to [-1, 4]), makes a bound of its own, its
 *    run the input's times the dims merged (written by opc_live_dims).
 *  - T_BOUND_TRANSPOSE: a transpose that keeps the dims other than 1 in
 *    order (NonZero's [1, N] to [N, 1], as torch.where exports): the
 *    elements stay where they are.
 *  - T_BOUND_SLICES: Slice and Split along other axes, the run-time one
 *    left whole, the input in prefix layout (read at the planned strides);
 *    a Slice of the first `end` of the run-time axis (start 0, step 1),
 *    min(run, end) of them: an origin of its own;
 *    Concat along another axis of inputs all bounded, of one origin; and
 *    Concat along the run-time axis of inputs bounded along it, of any
 *    origins, and static ones, all in prefix layout: the output is a
 *    bound of its own (but for one bounded input alone, the others
 *    empty: its run, its origin), the sum of the inputs' bounds and sizes, its run
 *    the inputs' runs one after another, whose size the kernel sums on
 *    the device and writes as the output's dims of the run. Two such
 *    Concats of inputs of the same origins and static sizes, input by
 *    input, give outputs of one origin (the first's).
 *    A Slice of a static input whose starts are run-time data and whose
 *    end along one axis is not the start plus a constant (ir/ops.c
 *    slice_plan_at_run_time) makes a bound of its own along that axis,
 *    the axis's length by the step; its kernel counts the run's length
 *    from the clamped start and end and writes the run's dims. A bounded
 *    input is refused under run-time starts.
 *  - T_BOUND_GATHER: Gather of bounded data along another axis, or of
 *    bounded indices into static data; GatherND of bounded index rows
 *    (batch_dims 0) into static data; input and output in prefix layout.
 *    Indices past the run's are garbage; the kernels clamp every index to
 *    the data, so they never fault.
 *  - T_BOUND_SHAPE: Shape and Size, which run instead of folding, on the
 *    input's dims of the run; their outputs are static tensors of
 *    run-time values.
 *  - NonMaxSuppression of boxes [1, N, 4] and scores [1, C, N] of one
 *    origin (torchvision's batched_nms over the boxes a detector kept),
 *    its kernel reading N of this run; the scores at their planned
 *    strides, whatever their layout. Its output is a bound of its own.
 *  - T_BOUND_COUNTS: NonZero, and TopK along the run-time axis, whose
 *    kernels read the input's dims of the run and take the run's elements
 *    alone, the input in prefix layout; their outputs are bounds of their
 *    own (TopK's K kept within the run, where ONNX would call a larger one
 *    an error).
 *
 *    IfSelect (a run-time If) of a bounded branch and a static one that
 *    fits in its bound (ir/ops.c) takes the chosen branch's elements and
 *    dims of this run.
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
 *  - T_BOUND_FILL: ConstantOfShape and Expand to a shape the program
 *    computes from a bounded tensor's dims (ir/symbolic.c), one element
 *    the run-time size of an origin itself, the others constants: the
 *    output is bounded along that element's axis, of that origin, and its
 *    kernel fills the whole bound (the backend copies the run's dims from
 *    a bounded tensor behind the shape). Expand's data is bounded of that
 *    origin along the axis, or static of size 1 there, read at the planned
 *    strides: both in prefix layout unless the data is one value or has
 *    the output's shape. A multiple of a run, two runs, or a data size
 *    that broadcasts only at the bound are refused, naming the shape.
 *    Range from 0 by 1 to such a limit (torch.arange(n)), integers: its
 *    kernel writes the whole bound, the output bounded of the run's origin.
 *  - T_BOUND_ROIS: RoiAlign of rois [R, 4] of a run and batch_indices of
 *    that run or static; its kernel reads the rois' count in this run and
 *    writes 0 past it (their rois are garbage); the output is bounded
 *    along R, of the rois' origin.
 *  - T_BOUND_SCATTER: ScatterElements of updates and indices of one run
 *    along the axis it scatters on, its kernel reading the run's length;
 *    the data bounded along that axis (the output then of its origin) or
 *    static, every bounded operand in prefix layout. The indices must lie
 *    in the data's run, as torch's do; the kernel clamps them to the bound.
 *  - T_BOUND_ROWS: Gemm (A not transposed) and MatMul whose left operand's
 *    rows are a run's, in prefix layout, by static operands (Gemm's C of
 *    one row): the library computes every planned row, each output row
 *    from its own; the output is bounded along its rows. Softmax and
 *    LogSoftmax along an axis after the run-time one, in prefix layout:
 *    each row normalised alone, the output bounded as the input.
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

static const Tensor *another_bounded(const Node *n, const Tensor *b);

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

static bool elementwise(Graph *g, Node *n, const Tensor *b) {
  int ax = b->bound_axis, from_end = b->rank - ax, strided = 0;
  for (int i = 0; i < n->nin; i++) {
    const Tensor *t = n->in[i];
    if (!t)
      continue;
    int d = t->rank - from_end; /* the run-time axis, operands aligned at the right */
    if (t->bounded) {
      if (t->bound_origin != b->bound_origin || t->bound_axis != d ||
          t->dims[d] != b->dims[ax])
        return refuse_two(g, n, b, t);
      strided += !tensor_same_shape(t, b); /* one of its origin, broadcast along another axis */
      continue;
    }
    strided += tensor_numel(t) > 1; /* one value is read at stride 0, in any layout */
    if (d >= 0 && t->dims[d] != 1) {
      char msg[LIMIT_NAME_BYTES + 160];
      snprintf(msg, sizeof msg, "operand '%s' has %lld along that axis, and a run-time size "
               "broadcasts only with 1", t->name, (long long)t->dims[d]);
      return refuse(g, n, b, msg);
    }
  }
  for (int i = 0; strided && i < n->nin; i++)
    if (n->in[i] && n->in[i]->bounded && !prefix_layout(n->in[i], n->in[i]->bound_axis))
      return refuse(g, n, n->in[i], "its other operands would be read at the planned strides, "
                    "which the run's elements keep only when every dim before the run-time one "
                    "is 1");
  for (int i = 0; i < n->nout; i++) {
    Tensor *out = n->out[i];
    if (!out)
      continue;
    int out_axis = out->rank - from_end;
    if (out_axis < 0 || out->dims[out_axis] != b->dims[ax] ||
        (strided && !prefix_layout(out, out_axis)) || (!strided && !tensor_same_shape(out, b)))
      return refuse(g, n, b, "broadcasting gives the output another shape");
    set_bound(out, b, out_axis);
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

/* Whether the reshape keeps the dims other than 1 in order, the output's
   run-time axis then the one its k-th such dim lands on. */
static bool keeps_non_unit(const Tensor *b, const Tensor *out, int *out_axis) {
  int count = count_non_unit(b, b->rank);
  if (b->dims[b->bound_axis] == 1 || count_non_unit(out, out->rank) != count)
    return false;
  for (int j = 0; j < count; j++)
    if (out->dims[non_unit_dim(out, j)] != b->dims[non_unit_dim(b, j)])
      return false;
  *out_axis = non_unit_dim(out, count_non_unit(b, b->bound_axis));
  return true;
}

/* Where a reshape that merges or splits static dims puts the run: a
   Reshape's -1 (the run's elements over the static ones), or the part of
   a Flatten that holds the run-time axis; -1 if neither. */
static int merged_run_axis(const Node *n, const Tensor *b) {
  if (n->op == OP_FLATTEN) {
    int64_t axis = node_attr_int(n, "axis", 1);
    return b->bound_axis < (axis < 0 ? axis + b->rank : axis) ? 0 : 1;
  }
  const Tensor *shape = n->op == OP_RESHAPE && n->nin > 1 ? n->in[1] : NULL;
  for (int64_t i = 0; shape && shape->i64 && i < tensor_numel(shape); i++)
    if (shape->i64[i] == -1)
      return (int)i;
  return -1;
}

/* A reshape that merges the run-time axis with static dims after it
   (torchvision's boxes [N, 90, 4] to [-1, 4]): in prefix layout the
   run's elements stay first and in order, and the merged axis holds the
   run's size times the static dims merged, a multiple the symbols cannot
   name: the output is a bound of its own, its dims of the run the
   input's run times that multiple (backend/nodes.c). */
static bool merges_run(Graph *g, Node *n, const Tensor *b, int out_axis) {
  Tensor *out = n->out[0];
  int ax = b->bound_axis;
  if (b->dims[ax] == 0 || out->dims[out_axis] % b->dims[ax] || out->dims[out_axis] < b->dims[ax] ||
      !prefix_layout(b, ax) || !prefix_layout(out, out_axis))
    return refuse(g, n, b, "the reshape merges or splits dims, which would need the run's "
                  "size multiplied");
  set_bound(out, b, out_axis);
  out->bound_origin = out;
  return true;
}

/* The run's elements are the first of the storage, in the run's dims, in
   any layout: a reshape whose output has the run's size on one axis and
   static dims elsewhere of the same product keeps them where they are. */
static bool reshape(Graph *g, Node *n, const Tensor *b) {
  Tensor *out = n->out[0];
  int ax = b->bound_axis, out_axis;
  if (!keeps_non_unit(b, out, &out_axis)) {
    out_axis = merged_run_axis(n, b);
    if (out_axis < 0 && b->dims[ax] == 1)
      return refuse(g, n, b, "a run-time axis of bound 1 cannot be told from the dims of 1 a "
                    "reshape adds or removes");
    /* At the bound, the counts match: the output's axis holds the run's
       size itself where it holds the bound. */
    if (out_axis >= 0 && out->dims[out_axis] != b->dims[ax])
      return merges_run(g, n, b, out_axis);
    if (out_axis < 0)
      return refuse(g, n, b, "the reshape merges or splits dims, which would need the run's "
                    "size multiplied");
  }
  set_bound(out, b, out_axis);
  return true;
}

/* The position of the one element of a symbolic target shape that names a
   run-time size, or -1 (every element constant); -2 after an error, which
   says not_run where an element is a multiple or an offset of a run. */
static int symbolic_run_axis(Graph *g, Node *n, const Tensor *s, const char *not_run) {
  int at = -1;
  for (int i = 0; i < (int)tensor_numel(s); i++) {
    SymValue v = s->sym[i];
    const char *why = NULL;
    if (!v.origin)
      continue;
    if (!sym_is_run(v))
      why = not_run;
    else if (at >= 0 && s->sym[at].origin != v.origin)
      why = arena_printf(g->arena, "element %d is %s: two origins, whose sizes may differ in a "
                         "run", at, sym_str(g, s->sym[at]));
    else if (at >= 0)
      why = arena_printf(g->arena, "element %d is it too: the run's size squared", at);
    if (why) {
      ir_error(g, n, "shape input '%s' is known only at run time: its element %d is %s; %s",
               s->name, i, sym_str(g, v), why);
      return -2;
    }
    at = i;
  }
  return at;
}

/* Reshape to a target shape the program computes from a bounded tensor's
   dims (ir/symbolic.c): one element is the run-time size of the data's
   origin, the others constants whose product is that of the data's
   static dims, so that the element counts match in every run. */
static bool reshape_to_symbols(Graph *g, Node *n) {
  const Tensor *x = n->in[0], *s = n->in[1];
  Tensor *out = n->out[0];
  int at = symbolic_run_axis(g, n, s, "opc reshapes to a run-time size itself, not to a "
                             "multiple or an offset of one");
  if (at == -2)
    return false;
  if (at == -1)
    return !x->bounded || reshape(g, n, x); /* every element a constant */
  SymValue run = s->sym[at];
  if (!x->bounded || x->bound_origin != run.origin) {
    ir_error(g, n, "shape input '%s' is known only at run time: its element %d is %s, a size "
             "that data '%s' does not have (%s)", s->name, at, sym_str(g, run), x->name,
             x->bounded ? "its run-time size is another origin's" : "its shape is static");
    return false;
  }
  int64_t in_rest = 1, out_rest = 1;
  for (int d = 0; d < x->rank; d++)
    in_rest *= d == x->bound_axis ? 1 : x->dims[d];
  for (int d = 0; d < out->rank; d++) {
    bool copies_run = d != at && !s->sym[d].origin && s->sym[d].offset == 0 &&
                      !node_attr_int(n, "allowzero", 0) && d == x->bound_axis;
    if (copies_run) {
      ir_error(g, n, "shape input '%s': element %d is 0, which copies the run-time dim of data "
               "'%s', and element %d is %s too", s->name, d, x->name, at, sym_str(g, run));
      return false;
    }
    out_rest *= d == at ? 1 : out->dims[d];
  }
  if (in_rest != out_rest || out->dims[at] != x->dims[x->bound_axis]) {
    ir_error(g, n, "shape input '%s' is known only at run time: %s times %lld elements, where "
             "data '%s' has that size times %lld", s->name, sym_str(g, run),
             (long long)out_rest, x->name, (long long)in_rest);
    return false;
  }
  set_bound(out, x, at);
  return true;
}

/* The shape input of a T_BOUND_FILL node (a parameter input) that the
   program computes from a bounded tensor's dims (ir/symbolic.c), or NULL. */
static const Tensor *symbolic_size(const Node *n) {
  for (int i = 0; i < n->nin; i++)
    if (op_input_is_param(n->op, i) && n->in[i] && !tensor_is_const(n->in[i]) && n->in[i]->sym)
      return n->in[i];
  return NULL;
}

/* Expand's data where the output is bounded along out_axis: bounded of
   the shape's origin along that axis, or static of size 1 there (the
   only size a run-time one broadcasts with). Either is read at the planned
   strides, which the run's elements keep only in prefix layout, unless it
   is one value or the output is the data's own shape. */
static bool expands_into_run(Graph *g, Node *n, const Tensor *x, const Tensor *out,
                             int out_axis, SymValue run) {
  int d = x->rank - (out->rank - out_axis); /* x's axis, aligned at the right */
  if (x->bounded) {
    if (x->bound_origin != run.origin || x->bound_axis != d ||
        x->dims[d] != out->dims[out_axis])
      return refuse(g, n, x, arena_printf(g->arena, "its shape input '%s' names %s on its "
                                          "output's axis %d, which is not its own run-time "
                                          "size there", n->in[1]->name, sym_str(g, run),
                                          out_axis));
    if (!tensor_same_shape(x, out) && (!prefix_layout(x, d) || !prefix_layout(out, out_axis)))
      return refuse(g, n, x, "Expand reads and writes at the planned strides, which the "
                    "run's elements keep only when every dim before the run-time one is 1");
    return true;
  }
  if (d >= 0 && x->dims[d] != 1) {
    ir_error(g, n, "shape input '%s' is known only at run time: its element for axis %d is "
             "%s, which data '%s' of %lld there broadcasts with only where the run has that "
             "size", n->in[1]->name, out_axis, sym_str(g, run), x->name, (long long)x->dims[d]);
    return false;
  }
  if (tensor_numel(x) > 1 && !prefix_layout(out, out_axis)) {
    ir_error(g, n, "shape input '%s' is known only at run time (%s on axis %d): Expand of "
             "more than one value writes at the planned strides, which the run's elements "
             "keep only when every dim before the run-time one is 1", n->in[1]->name,
             sym_str(g, run), out_axis);
    return false;
  }
  return true;
}

/* ConstantOfShape and Expand to a shape the program computes from a
   bounded tensor's dims (ir/symbolic.c): one element the run-time size of
   an origin, the others constants. The output is bounded along that
   element's axis, of that origin; its kernel fills the whole bound, and
   the backend copies the run's size from a bounded tensor behind the
   shape (backend/nodes.c). */
static bool fills(Graph *g, Node *n, const Tensor *s) {
  int at = symbolic_run_axis(g, n, s, "opc fills a run-time size itself, not a multiple "
                             "or an offset of one");
  if (at == -2)
    return false;
  const Tensor *x = s != n->in[0] ? n->in[0] : NULL, *b = another_bounded(n, NULL);
  if (at < 0) { /* every element constant: a static output */
    if (b)
      return refuse(g, n, b, arena_printf(g->arena, "%s reads such a tensor only to a shape "
                                          "that names its run-time size", op_name(n->op)));
    return true;
  }
  SymValue run = s->sym[at];
  Tensor *out = n->out[0];
  int out_axis = out->rank - (int)tensor_numel(s) + at;
  if (n->op == OP_RANGE) { /* its count is the run only as torch.arange(run) */
    const Tensor *start = n->in[0], *delta = n->in[2];
    if (!start->i64 || !delta->i64 || start->i64[0] != 0 || delta->i64[0] != 1) {
      ir_error(g, n, "limit '%s' is known only at run time (%s): opc runs Range to it only "
               "from 0 by 1, where its count is the run's", s->name, sym_str(g, run));
      return false;
    }
    out_axis = 0;
  }
  if (b && b != x)
    return refuse(g, n, b, "it is read only as the data expanded");
  if (x && !expands_into_run(g, n, x, out, out_axis, run))
    return false;
  out->bounded = true;
  out->bound_axis = out_axis;
  out->bound_origin = run.origin;
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
  if (tensor_same_shape(out, b)) { /* b alone, the others empty: its run, its origin */
    set_bound(out, b, ax);
    return true;
  }
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
  if (n->p.axis.axis == ax)
    return refuse(g, n, b, "Concat along the run-time axis would need the runs' sizes");
  set_bound(n->out[0], b, ax);
  return true;
}

/* Slice of the first `end` of a run (torchvision's keep[:detections]):
   min(run, end) of them, a bound of its own (backend/nodes.c writes its
   dims of the run, opc_live_dims capping the input's at the bound). */
static bool first_of_run(const Node *n, const Tensor *b) {
  int ax = b->bound_axis;
  if (op_info(n->op)->params == PARAMS_SPLIT || n->p.slice.start[ax] != 0 ||
      n->p.slice.step[ax] != 1 || n->p.slice.extent[ax] <= 0 ||
      n->p.slice.extent[ax] >= b->dims[ax])
    return false;
  /* The end as given: one counted from the run's end (negative) is not
     the bound's. */
  const int64_t *ends = NULL, *axes = NULL;
  int64_t count = 0;
  if (n->nin > 2 && n->in[2] && n->in[2]->i64) {
    ends = n->in[2]->i64;
    count = tensor_numel(n->in[2]);
    axes = n->nin > 3 && n->in[3] ? n->in[3]->i64 : NULL;
    if (n->nin > 3 && n->in[3] && !axes)
      return false;
  } else {
    count = node_attr_ints(n, "ends", &ends);
    int64_t naxes = node_attr_ints(n, "axes", &axes);
    if (naxes <= 0)
      axes = NULL;
  }
  for (int64_t i = 0; ends && i < count; i++) {
    int64_t a = axes ? (axes[i] < 0 ? axes[i] + b->rank : axes[i]) : i;
    if (a == ax)
      return ends[i] >= 0;
  }
  return false;
}

/* A Slice's ends that the program computes from a run's size: each such
   element must end the run-time axis of b (NULL: a static input) at its
   own run, a whole slice; another origin's run, or one on a static axis,
   would cut to a size the data decides. */
static bool ends_follow_run(Graph *g, Node *n, const Tensor *b) {
  const Tensor *ends = op_info(n->op)->params == PARAMS_SLICE && n->nin > 2 ? n->in[2] : NULL;
  if (!ends || tensor_is_const(ends) || !ends->sym)
    return true;
  const Tensor *axes = n->nin > 3 ? n->in[3] : NULL;
  int rank = n->in[0]->rank;
  for (int i = 0; i < (int)tensor_numel(ends); i++) {
    SymValue v = ends->sym[i];
    if (!v.origin)
      continue;
    int64_t a = axes && axes->i64 ? axes->i64[i] : i;
    a = a < 0 ? a + rank : a;
    if (b && a == b->bound_axis && sym_is_run(v) && v.origin == b->bound_origin)
      continue;
    ir_error(g, n, "ends input '%s' is known only at run time: its element %d is %s, which "
             "ends %s", ends->name, i, sym_str(g, v),
             b && a == b->bound_axis ? "data's run-time axis elsewhere than at its own run"
                                     : "a static axis at a size the data decides");
    return false;
  }
  return true;
}

static bool slices(Graph *g, Node *n, const Tensor *b) {
  int ax = b->bound_axis;
  if (op_info(n->op)->params == PARAMS_SLICE && n->p.slice.run_time)
    return refuse(g, n, b, "its starts are run-time data, which opc slices only a static "
                  "input by");
  if (!ends_follow_run(g, n, b))
    return false;
  bool whole = op_info(n->op)->params == PARAMS_SPLIT
                   ? n->p.split.axis != ax
                   : n->p.slice.start[ax] == 0 && n->p.slice.step[ax] == 1 &&
                         n->p.slice.extent[ax] == b->dims[ax];
  if (first_of_run(n, b)) {
    if (!prefix_layout(b, ax))
      return refuse(g, n, b, "it reads at the planned strides, which the run's elements keep "
                    "only when every dim before the run-time one is 1");
    set_bound(n->out[0], b, ax);
    n->out[0]->bound_origin = n->out[0];
    return true;
  }
  if (!whole)
    return refuse(g, n, b, "it cuts the run-time axis other than to its first elements, which "
                  "would need the run's size");
  if (!prefix_layout(b, ax))
    return refuse(g, n, b, "it reads at the planned strides, which the run's elements keep "
                  "only when every dim before the run-time one is 1");
  for (int i = 0; i < n->nout; i++)
    if (n->out[i])
      set_bound(n->out[i], b, ax);
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

/* A node that makes a bound (NonZero, ...) is its outputs' origin. Its
   bounded outputs hold one count in every run (TopK's values and indices,
   which torchvision pairs after gathering boxes by the indices; Unique's
   values, first indices and counts), so they share the first's. */
static void set_origins(Node *n) {
  const Tensor *shared = NULL;
  for (int i = 0; i < n->nout; i++) {
    Tensor *t = n->out[i];
    if (!t || !t->bounded)
      continue;
    if (!shared)
      shared = t;
    t->bound_origin = shared;
  }
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
  set_origins(n);
  return true;
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

/* RoiAlign of rois [R, 4] of a run (a detector's proposals) and
   batch_indices [R] of that run or static: its kernel reads the rois'
   count in this run and computes their rows alone (garbage past the run
   could be any coordinates); the output is bounded along R, of the rois'
   origin. */
static bool aligns_rois(Graph *g, Node *n, const Tensor *b) {
  const Tensor *x = n->in[0], *rois = n->in[1], *batch = n->in[2];
  if (x->bounded)
    return refuse(g, n, x, "RoiAlign takes such a tensor only as its rois and batch_indices");
  if (!rois->bounded || rois->bound_axis != 0)
    return refuse(g, n, b, "RoiAlign takes batch_indices of a run only with rois of that run, "
                  "bounded along their first axis");
  if (batch->bounded && (batch->bound_origin != rois->bound_origin || batch->bound_axis != 0))
    return refuse_two(g, n, rois, batch);
  set_bound(n->out[0], rois, 0);
  return true;
}

/* ScatterElements along a run-time axis (torchvision's MultiScaleRoIAlign
   puts each level's pooled rois back in place): updates and indices of
   one run along the axis, whose kernel reads its length and scatters the
   run's rows alone (indices past it are garbage); the data bounded along
   the axis, the output then of its origin, or static. The indices must
   lie within the data's run, as torch's do: the kernel clamps them to
   its bound. */
static bool scatters(Graph *g, Node *n, const Tensor *b) {
  const Tensor *data = n->in[0], *idx = n->in[1], *upd = n->in[2];
  int axis = n->p.scatter.axis;
  if (idx->bounded != upd->bounded ||
      (upd->bounded && (idx->bound_origin != upd->bound_origin || idx->bound_axis != axis ||
                        upd->bound_axis != axis)))
    return refuse(g, n, b, "ScatterElements takes updates and indices of one run-time size, "
                  "along the axis it scatters on");
  if (data->bounded && data->bound_axis != axis)
    return refuse(g, n, data, "ScatterElements takes its data of a run-time size only along "
                  "the axis it scatters on");
  for (int i = 0; i < 3; i++)
    if (n->in[i]->bounded && !prefix_layout(n->in[i], axis))
      return refuse(g, n, n->in[i], "its kernel reads at the planned strides, which the run's "
                    "elements keep only when every dim before the run-time one is 1");
  if (data->bounded)
    set_bound(n->out[0], data, axis);
  return true;
}

/* Gemm (A not transposed) and MatMul of a left operand whose rows are a
   run's, in prefix layout, by a static right operand (and Gemm's static
   C, of one row): each output row reads its own row of A alone, so the
   output's rows of the run are those of the run's (a detector's box
   head over its proposals); the output is bounded along its rows. */
static bool multiplies_rows(Graph *g, Node *n, const Tensor *b) {
  const Tensor *a = n->in[0];
  if (op_info(n->op)->params == PARAMS_AXIS) { /* Softmax, LogSoftmax */
    if (n->p.axis.axis <= b->bound_axis || !prefix_layout(b, b->bound_axis))
      return refuse(g, n, b, "it normalises only along axes after the run-time one, the input "
                    "in prefix layout (every dim before the run-time one 1)");
    set_bound(n->out[0], b, b->bound_axis);
    return true;
  }
  int rows = a->rank - 2;
  bool gemm = op_info(n->op)->params == PARAMS_GEMM;
  if (b != a || rows < 0 || a->bound_axis != rows || (gemm && n->p.gemm.trans_a))
    return refuse(g, n, b, "it is read only as the left operand, its rows of run-time count");
  const Tensor *c = gemm && n->nin > 2 ? n->in[2] : NULL;
  if (c && c->rank == 2 && c->dims[0] != 1)
    return refuse(g, n, b, "Gemm's C has more than one row, and a run-time count broadcasts "
                  "only with 1");
  if (!gemm && n->in[1]->rank != 2)
    return refuse(g, n, b, "MatMul takes such rows only by a matrix");
  if (!prefix_layout(a, rows))
    return refuse(g, n, b, "its rows are read at the planned strides, which the run's "
                  "elements keep only when every dim before the run-time one is 1");
  set_bound(n->out[0], a, n->out[0]->rank - 2);
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
  if (n->op == OP_RESHAPE && n->nin > 1 && n->in[1] && !tensor_is_const(n->in[1]) &&
      n->in[1]->sym && !(n->in[1]->bounded))
    return reshape_to_symbols(g, n);
  unsigned traits = op_info(n->op)->traits;
  const Tensor *size = traits & T_BOUND_FILL ? symbolic_size(n) : NULL;
  if (size)
    return fills(g, n, size);
  const Tensor *b = another_bounded(n, NULL);
  if (!b) {
    set_origins(n);
    return ends_follow_run(g, n, NULL);
  }
  /* Elementwise kinds, Gather and Concat check their other bounded
     inputs themselves; the other rules take one. */
  if (traits & T_BOUND_ELEMENTWISE)
    return elementwise(g, n, b);
  if (traits & T_BOUND_GATHER)
    return gather(g, n, b);
  if ((traits & T_BOUND_SLICES) && op_info(n->op)->params == PARAMS_AXIS)
    return joins(g, n, b);
  if ((traits & T_BOUND_COUNTS) && op_info(n->op)->params == PARAMS_NMS)
    return suppresses(g, n, b);
  if (traits & T_BOUND_ROIS)
    return aligns_rois(g, n, b);
  if (traits & T_BOUND_SCATTER)
    return scatters(g, n, b);
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
  if (traits & T_BOUND_ROWS)
    return multiplies_rows(g, n, b);
  char msg[96];
  snprintf(msg, sizeof msg, "%s does not read such a tensor yet", op_name(n->op));
  return refuse(g, n, b, msg);
}
