/*
 * concat_in_place.c - copies that need not happen.
 *
 * Concat: when every input is written by a node of its own, each producer
 * can write straight into its slice of the Concat's output. The inputs
 * become views of that output (strided when the concat axis is not the
 * outermost non-unit one) and the Concat issues nothing. Not for inputs
 * that are graph inputs, outputs or constants, appear twice, or are views
 * already.
 *
 * Where each slice is one contiguous block, the inputs may have other
 * readers too (they read the block), and a Concat of the first k inputs
 * of this one (DenseNet's chain: cat(x0, y1), cat(x0, y1, y2), ...)
 * becomes a view of the leading blocks, so that nothing is copied at all.
 * Where slices interleave, each input must feed this Concat alone: the
 * readers would get strided views.
 *
 * Where the slices interleave (a batch of several, or a concat along an
 * inner axis), every producer must be a cuDNN call the race checker can
 * follow (exact_writer), in at most CHECKED_RUNS runs. Not along the
 * channels of channels-last data: cuDNN convolves no such slice.
 *
 * Split and Slice along the outermost non-unit axis with step 1 cut a
 * contiguous block out of a contiguous input: their outputs become views
 * of it at the block's offset.
 */
#include <string.h>

#include "pass.h"
#include "rewrite.h"

/* A runtime value with storage of its own, which a view may replace. */
static bool own_storage(const Tensor *x) {
  /* A bounded tensor's writer stores it in the run's dims, not at a
     view's strides: it keeps its own storage. */
  return x && !x->is_input && !x->is_output && !tensor_is_const(x) && !x->alias_of &&
         !x->bounded;
}

/* Is `c` a Concat of the first inputs of `concat` (and not `concat`
   itself), along the same axis, whose output can become a view? */
static bool prefix_concat(const Node *c, const Node *concat) {
  if (c == concat || c->dead || c->is_view || c->op != OP_CONCAT || c->nout != 1 ||
      c->nin > concat->nin || c->p.axis.axis != concat->p.axis.axis)
    return false;
  for (int i = 0; i < c->nin; i++)
    if (c->in[i] != concat->in[i])
      return false;
  return own_storage(c->out[0]) && c->out[0]->dtype == concat->out[0]->dtype;
}

/* May `x`'s other readers keep reading it once it is a block of the
   concat's output? Any Concat among them must be a prefix_concat. */
static bool readers_allowed(const Tensor *x, const Node *concat, bool blocks) {
  int in_concat = 0;
  for (int u = 0; u < x->nusers; u++) {
    const Node *r = x->users[u];
    if (r == concat)
      in_concat++;
    else if (!blocks || (r->op == OP_CONCAT && !prefix_concat(r, concat)))
      return false;
  }
  return in_concat == 1; /* the same tensor twice in one Concat has two slices */
}

/* Can `x` be produced directly inside the concat's output? */
static bool writes_into_slice(const Tensor *x, const Node *concat, bool blocks) {
  if (!own_storage(x) || !readers_allowed(x, concat, blocks))
    return false;
  const Node *p = x->producer;
  if (!p || p->dead || p->is_view)
    return false;
  int outputs = 0;
  for (int i = 0; i < p->nout; i++)
    outputs += p->out[i] != NULL;
  return outputs == 1;
}

/* How many separate runs one slice along axis takes in c's storage: the
   product of the dims stored outside the axis (a batch of several, the
   spatial dims of a channels-last tensor); 1 when slices are blocks. */
static int64_t slice_runs(const Tensor *c, int axis) {
  int64_t runs = 1;
  for (int d = 0; d < c->rank; d++)
    if (d != axis && c->strides[d] > c->strides[axis])
      runs *= c->dims[d];
  return runs;
}

/* The most runs per operand the CPU runtime's race checker follows one by
   one (MAX_RUNS in runtime/src/op.c); it sees more as one address range. */
enum { CHECKED_RUNS = 4096 };

/* A producer whose writes the race checker sees element by element: a
   cuDNN call with no activation kernel after it (the tensor descriptor
   gives every stride). opc's kernels declare one address range per output
   (opc_kargs.h), so two of them filling interleaved slices would be
   reported as racing although they touch different elements. */
static bool exact_writer(const Node *p) {
  bool library = op_info(p->op)->traits & T_EXACT_WRITES;
  return library && (p->act == OPC_ACT_NONE || p->act == OPC_ACT_RELU);
}

/* Makes t a view of base at `offset` with `strides`. The views already
   made of t (a Reshape of it) now point at base: t is one block there
   whenever it had readers besides the Concat, so their offsets add. */
static void view_block(Graph *g, Tensor *t, Tensor *base, int64_t offset,
                       const int64_t *strides) {
  make_view(t, base, offset, strides);
  for (int k = 0; k < g->ntensors; k++) {
    Tensor *v = g->tensors[k];
    if (v->alias_of == t) {
      v->alias_of = base;
      v->alias_offset += offset;
    }
  }
}

static bool concat_in_place(Graph *g, Node *concat, bool cpu_target) {
  Tensor *c = concat->out[0];
  int axis = concat->p.axis.axis;
  if (axis < 0 || axis >= c->rank)
    return false;
  int64_t runs = slice_runs(c, axis);
  if (runs > CHECKED_RUNS)
    return false;
  /* A channel slice of channels-last storage has its pixels apart: cuDNN
     lists no convolution algorithm for such a tensor (seen on an H200 with
     cuDNN 9.19, for inputs and outputs alike), so that Concat stays a copy;
     the CPU target's channels-last kernels write such slices, declaring
     their pixels' runs (writes_pixel_runs). */
  bool channel_slices = runs > 1 && axis == 1 && tensor_is_channels_last(c);
  if (channel_slices && !cpu_target)
    return false;
  for (int i = 0; i < concat->nin; i++) {
    Tensor *x = concat->in[i];
    if (!writes_into_slice(x, concat, runs == 1) || x->dtype != c->dtype)
      return false;
    if (runs > 1 && !(channel_slices ? writes_pixel_runs(x->producer) : exact_writer(x->producer)))
      return false;
  }
  /* If c is itself a slice of an outer in-place Concat, the inputs go
     straight into the outer storage. */
  Tensor *base = tensor_storage(c);
  int64_t start = c->alias_of ? c->alias_offset : 0, offset = start;
  for (int i = 0; i < concat->nin; i++) {
    Tensor *x = concat->in[i];
    view_block(g, x, base, offset, c->strides);
    offset += x->dims[axis] * c->strides[axis];
  }
  concat->is_view = true;
  /* The prefix Concats among the first input's readers (every prefix
     Concat reads it) become the leading blocks. */
  Tensor *first = concat->in[0];
  for (int u = 0; u < first->nusers; u++) {
    Node *r = first->users[u];
    if (r->op == OP_CONCAT && !r->is_view && prefix_concat(r, concat)) {
      view_block(g, r->out[0], base, start, c->strides);
      r->is_view = true;
    }
  }
  return true;
}

/* True when every axis before `axis` has extent 1: a slice along `axis` is
   then one contiguous block. */
static bool outermost(const Tensor *x, int axis) {
  for (int i = 0; i < axis; i++)
    if (x->dims[i] != 1)
      return false;
  return true;
}

/* A graph output must not end up sharing a graph input's storage: the
   caller's output needs a copy of its own. Views made earlier of `y`
   (a Reshape of the slice, say) will follow y into x's storage. */
static bool would_expose_input(const Graph *g, const Tensor *y, const Tensor *base) {
  if (!base->is_input)
    return false;
  if (y->is_output)
    return true;
  for (int i = 0; i < g->ntensors; i++)
    if (g->tensors[i]->alias_of == y && g->tensors[i]->is_output)
      return true;
  return false;
}

static bool can_view_input(const Graph *g, const Node *n) {
  Tensor *x = node_input(n, 0);
  if (!x || tensor_is_const(x) || !has_contiguous_strides(x) || x->bounded)
    return false; /* a bounded tensor's readers write their own run's dims */
  Tensor *base = tensor_storage(x);
  for (int i = 0; i < n->nout; i++) {
    Tensor *y = n->out[i];
    if (!y)
      continue;
    if (y->alias_of || tensor_is_const(y) || y->dtype != x->dtype || y->rank != x->rank ||
        y->bounded)
      return false;
    if (would_expose_input(g, y, base))
      return false;
  }
  return true;
}

/* Output i becomes the block of x starting at element `start[i]` along
   axis. Views already made of an output now point at x's storage: the
   block is contiguous, so their offsets simply add. */
static void view_blocks(Graph *g, Node *n, const int64_t *start, int axis) {
  Tensor *x = n->in[0];
  Tensor *base = tensor_storage(x);
  int64_t offset = x->alias_of ? x->alias_offset : 0;
  for (int i = 0; i < n->nout; i++) {
    Tensor *y = n->out[i];
    if (!y)
      continue;
    tensor_set_shape(y, y->rank, y->dims);
    make_view(y, base, offset + start[i] * x->strides[axis], y->strides);
    for (int k = 0; k < g->ntensors; k++) {
      Tensor *v = g->tensors[k];
      if (v->alias_of == y) {
        v->alias_of = base;
        v->alias_offset += y->alias_offset;
      }
    }
  }
  n->is_view = true;
}

static bool split_in_place(Graph *g, Node *n) {
  Tensor *x = node_input(n, 0);
  if (!can_view_input(g, n))
    return false;
  int axis = n->p.split.axis;
  if (axis < 0 || axis >= x->rank || !outermost(x, axis))
    return false;
  int64_t start[64];
  if (n->nout > 64)
    return false;
  int64_t at = 0;
  for (int i = 0; i < n->nout; i++) {
    if (!n->out[i])
      return false; /* outputs' sizes come from their shapes: all must be there */
    start[i] = at;
    at += n->out[i]->dims[axis];
  }
  if (at != x->dims[axis])
    return false;
  view_blocks(g, n, start, axis);
  return true;
}

static bool slice_in_place(Graph *g, Node *n) {
  Tensor *x = node_input(n, 0), *y = n->nout ? n->out[0] : NULL;
  if (!y || !can_view_input(g, n) || n->p.slice.run_time) /* a start only the device knows */
    return false;
  /* Reversals keep the extent, so every step must be 1, not only the
     step of the axis that shrinks. */
  for (int d = 0; d < x->rank; d++)
    if (n->p.slice.step[d] != 1)
      return false;
  int axis = -1;
  for (int d = 0; d < x->rank; d++)
    if (y->dims[d] != x->dims[d]) {
      if (axis >= 0)
        return false;
      axis = d;
    }
  if (axis < 0) {
    int64_t zero = 0;
    view_blocks(g, n, &zero, 0);
    return true;
  }
  if (!outermost(x, axis))
    return false;
  int64_t start = n->p.slice.start[axis]; /* clamped to [0, dim] */
  if (start < 0 || start + y->dims[axis] > x->dims[axis])
    return false;
  view_blocks(g, n, &start, axis);
  return true;
}

bool pass_concat_in_place(Graph *g, const PassOptions *opt, PassContext *ctx) {
  /* Writers of one storage must share a device; on several, a Concat's
     producers are what HIOS and HOPE spread, so the Concat copies. */
  if (opt->gpus > 1 || opt->cpu)
    return true;
  begin_rewrite(g);
  /* Outer Concats first, so that an inner one finds its output already a
     view and places its inputs directly in the outer storage. */
  for (int i = g->nnodes - 1; i >= 0; i--) {
    Node *n = g->nodes[i];
    if (!n->dead && !n->is_view && n->op == OP_CONCAT && n->nout == 1 && n->out[0])
      concat_in_place(g, n, opt->cpu_target);
  }
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || n->is_view)
      continue;
    if (n->op == OP_SPLIT)
      split_in_place(g, n);
    else if (n->op == OP_SLICE)
      slice_in_place(g, n);
  }
  return true;
}
