/*
 * fold_constants.c - evaluates at compile time every node whose inputs are
 * all constant. The node disappears; its outputs become constant tensors
 * (a graph output that becomes constant stays an output: the program
 * returns the stored value). Nodes whose outputs shape inference already
 * made constant (Shape of a runtime tensor) go too, and a node's outputs
 * that inference made constant while others are left (Dropout's mask) are
 * taken off it.
 *
 * Required even at -O0: the backend computes in float32 only and has no
 * code for shape arithmetic (Shape, Gather on int64, ...).
 */
#include "pass.h"
#include "rewrite.h"

static bool inputs_constant(const Node *n) {
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] && !tensor_is_const(n->in[i]))
      return false;
  return true;
}

static bool outputs_constant(const Node *n) {
  for (int i = 0; i < n->nout; i++)
    if (n->out[i] && !tensor_is_const(n->out[i]))
      return false;
  return true;
}

/* Outputs that shape inference filled while others stay to be computed
   (Dropout's mask, all true) become plain constants: the node no longer
   writes them, so the backend sees only the work left. */
static void detach_constant_outputs(Node *n) {
  for (int i = 0; i < n->nout; i++) {
    Tensor *t = n->out[i];
    if (t && tensor_is_const(t)) {
      t->producer = NULL;
      n->out[i] = NULL;
    }
  }
}

bool pass_fold_constants(Graph *g, const PassOptions *opt, PassContext *ctx) {
  begin_rewrite(g);
  int folded = 0;
  /* In topological order, so a folded node makes its readers foldable. */
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead)
      continue;
    /* Shape inference already filled some outputs (Shape of a runtime
       tensor with a static shape): the node has nothing left to do. */
    if (n->nout > 0 && outputs_constant(n)) {
      n->dead = true;
      folded++;
      continue;
    }
    detach_constant_outputs(n);
    if (!inputs_constant(n))
      continue;
    /* node_fold returns false, without an error, for kinds it cannot
       evaluate; those stay runtime nodes. */
    if (!node_fold(g, n) || !outputs_constant(n))
      continue;
    n->dead = true;
    folded++;
  }
  if (!folded)
    return true;
  return finish_rewrite(g);
}
