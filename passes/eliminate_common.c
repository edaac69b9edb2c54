/*
 * eliminate_common.c - common subexpression elimination: two live nodes of
 * the same kind reading the same tensors (pointer-equal) with equal
 * attributes compute the same values, so the later one is dropped and its
 * readers use the earlier one's outputs. Candidates for a node are only the
 * other readers of its first input, which keeps this cheap.
 */
#include <string.h>

#include "pass.h"
#include "rewrite.h"

static bool same_computation(const Node *a, const Node *b) {
  if (a->op != b->op || a->nin != b->nin || a->nout != b->nout || a->is_view || b->is_view)
    return false;
  if (a->body || b->body) /* two Loops on the same inputs run different bodies */
    return false;
  if (a->act != b->act || a->act_alpha != b->act_alpha || a->act_beta != b->act_beta)
    return false;
  for (int i = 0; i < a->nin; i++)
    if (a->in[i] != b->in[i])
      return false;
  for (int i = 0; i < a->nout; i++)
    if ((a->out[i] == NULL) != (b->out[i] == NULL))
      return false;
  return node_same_attrs(a, b);
}

/* The later node's outputs must be replaceable: not graph outputs. */
static bool outputs_replaceable(const Node *n) {
  for (int i = 0; i < n->nout; i++)
    if (n->out[i] && n->out[i]->is_output)
      return false;
  return true;
}

/* One sweep; use lists go stale as readers move, so the caller repeats. */
static int eliminate_once(Graph *g) {
  int removed = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || n->nin == 0 || !n->in[0] || !outputs_replaceable(n))
      continue;
    Tensor *first = n->in[0];
    for (int u = 0; u < first->nusers; u++) {
      Node *m = first->users[u];
      /* m comes earlier in topological order, so its outputs are ready. */
      if (m == n || m->dead || m->id >= n->id || !same_computation(m, n))
        continue;
      for (int j = 0; j < n->nout; j++)
        if (n->out[j])
          replace_reads(g, n->out[j], m->out[j]);
      n->dead = true;
      removed++;
      break;
    }
  }
  return removed;
}

bool pass_eliminate_common(Graph *g, const PassOptions *opt, PassContext *ctx) {
  begin_rewrite(g);
  /* Each sweep exposes the next layer of duplicates (readers of merged
     nodes now share inputs); chains are short in practice. */
  for (int sweep = 0; sweep < 64; sweep++) {
    if (!eliminate_once(g))
      break;
    if (!finish_rewrite(g))
      return false;
  }
  return true;
}
