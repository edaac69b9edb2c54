/*
 * alias_reshape.c - nodes that only reinterpret the shape (Reshape,
 * Flatten, Squeeze, Unsqueeze, and Identity-like ones left over) become
 * views: their output shares the input's storage and no code runs.
 *
 * Only a contiguous input can be reshaped in place; a strided view would
 * need a copy. A graph output viewing a graph input keeps its copy, since
 * the caller's output must be a buffer of its own.
 */
#include "pass.h"
#include "rewrite.h"

/* A kind that reshapes only (T_RESHAPES) whose other outputs, such as
   Dropout's mask, are unused. That its type stays (a Cast to its own
   type) can_alias checks. */
static bool reshapes_only(const Node *n) {
  if (!(op_info(n->op)->traits & T_RESHAPES))
    return false; /* every other kind moves or computes data */
  for (int k = 1; k < n->nout; k++)
    if (n->out[k] && (n->out[k]->nusers || n->out[k]->is_output))
      return false;
  return true;
}

static bool can_alias(const Node *n) {
  Tensor *in = node_input(n, 0), *out = n->nout ? n->out[0] : NULL;
  if (!in || !out || n->is_view || !reshapes_only(n))
    return false;
  if (tensor_is_const(in) || tensor_is_const(out) || out->alias_of)
    return false; /* constants are folded, not aliased */
  if (in->bounded || out->bounded)
    return false; /* a copy, so that a node writes the output's dims of the run */
  if (tensor_numel(in) != tensor_numel(out) || in->dtype != out->dtype)
    return false;
  if (!has_contiguous_strides(in))
    return false;
  Tensor *base = tensor_storage(in);
  if (out->is_output && (base->is_input || tensor_is_const(base)))
    return false;
  return true;
}

bool pass_alias_reshape(Graph *g, const PassOptions *opt, PassContext *ctx) {
  begin_rewrite(g);
  /* Topological order: a reshape of a reshape sees its input already a
     view and points straight at the storage. */
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || !can_alias(n))
      continue;
    Tensor *in = n->in[0], *out = n->out[0];
    Tensor *base = tensor_storage(in);
    int64_t offset = in->alias_of ? in->alias_offset : 0;
    tensor_set_shape(out, out->rank, out->dims); /* contiguous strides */
    make_view(out, base, offset, out->strides);
    n->is_view = true;
  }
  return true;
}
