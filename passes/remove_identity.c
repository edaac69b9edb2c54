/*
 * remove_identity.c - drops nodes that pass their input through unchanged:
 * those of a kind that only reshapes (T_RESHAPES: Identity, Dropout at
 * inference, a Cast, Reshape, ...) whose output has the input's type and
 * shape. A Dropout whose mask output is used stays.
 *
 * First every CastLike becomes the Cast it stands for: its second input is
 * read only for its type, which inference resolved, so the node stops
 * reading it and eliminate-dead drops its producer when nothing else
 * reads it. Such a Cast to the same type then goes like any other.
 */
#include "pass.h"
#include "rewrite.h"

static bool output_used(const Tensor *t) { return t && (t->nusers > 0 || t->is_output); }

/* The tensor `n` passes through unchanged, or NULL. */
static Tensor *passed_through(const Node *n) {
  Tensor *in = node_input(n, 0);
  if (!in || n->nout < 1 || !n->out[0])
    return NULL;
  const Tensor *out = n->out[0];
  if (!(op_info(n->op)->traits & T_RESHAPES))
    return NULL; /* every other kind computes something */
  if (out->dtype != in->dtype || !tensor_same_shape(in, out))
    return NULL;
  for (int i = 1; i < n->nout; i++)
    if (output_used(n->out[i]))
      return NULL; /* Dropout's mask is wanted: leave it to the backend */
  return in;
}

/* CastLike(x, like) as Cast(x) {to = like's type}. */
static bool cast_like_to_cast(Graph *g, Node *n) {
  if (n->op != OP_CAST_LIKE || n->nin != 2)
    return false;
  node_set_attr(g, n, "to", ATTR_INT)->i = n->p.cast.to;
  n->op = OP_CAST;
  n->in[1] = NULL;
  n->nin = 1;
  return true;
}

bool pass_remove_identity(Graph *g, const PassOptions *opt, PassContext *ctx) {
  begin_rewrite(g);
  int changed = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead)
      continue;
    if (cast_like_to_cast(g, n))
      changed++;
    Tensor *in = passed_through(n);
    if (!in)
      continue;
    Tensor *out = n->out[0];
    /* Dropout with training_mode on a runtime input is not the identity. */
    if (n->op == OP_DROPOUT && node_input(n, 2)) {
      Tensor *mode = node_input(n, 2);
      if (!mode->i64 || mode->i64[0] != 0)
        continue;
    }
    if (bypass_node(g, n, in, out))
      changed++;
  }
  if (!changed)
    return true;
  return finish_rewrite(g);
}
