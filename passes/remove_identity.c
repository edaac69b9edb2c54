/*
 * remove_identity.c - drops nodes that pass their input through unchanged:
 * Identity, Dropout at inference (output 0 is the input), and Cast to the
 * type the input already has. A Dropout whose mask output is used stays.
 */
#include "pass.h"
#include "rewrite.h"

static bool output_used(const Tensor *t) { return t && (t->nusers > 0 || t->is_output); }

/* The tensor `n` passes through unchanged, or NULL. */
static Tensor *passed_through(const Node *n) {
  Tensor *in = node_input(n, 0);
  if (!in || n->nout < 1 || !n->out[0])
    return NULL;
  if (n->op == OP_IDENTITY)
    return in;
  if (n->op == OP_DROPOUT) {
    for (int i = 1; i < n->nout; i++)
      if (output_used(n->out[i]))
        return NULL; /* the mask is wanted: leave it to the backend */
    return in;
  }
  if (n->op == OP_CAST)
    return n->p.cast.to == in->dtype ? in : NULL;
  return NULL; /* every other kind computes something */
}

bool pass_remove_identity(Graph *g, const PassOptions *opt, PassContext *ctx) {
  begin_rewrite(g);
  int removed = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead)
      continue;
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
      removed++;
  }
  if (!removed)
    return true;
  return finish_rewrite(g);
}
