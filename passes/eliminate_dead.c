/*
 * eliminate_dead.c - removes nodes none of whose outputs reach a graph
 * output, then the tensors nothing refers to any more (unused constants,
 * outputs of removed nodes). Graph inputs stay even when unused: they are
 * part of the program's interface.
 */
#include <stdlib.h>

#include "pass.h"
#include "rewrite.h"

static void mark_needed_nodes(Graph *g, bool *needed_tensor) {
  for (int i = 0; i < g->noutputs; i++)
    needed_tensor[g->outputs[i]->id] = true;
  /* Reverse topological order: a node is needed when one of its outputs is. */
  for (int i = g->nnodes - 1; i >= 0; i--) {
    Node *n = g->nodes[i];
    if (n->dead)
      continue;
    bool needed = false;
    for (int j = 0; j < n->nout; j++)
      if (n->out[j] && needed_tensor[n->out[j]->id])
        needed = true;
    if (!needed) {
      n->dead = true;
      continue;
    }
    for (int j = 0; j < n->nin; j++)
      if (n->in[j])
        needed_tensor[n->in[j]->id] = true;
  }
}

/* Keeps tensors that a live node, the interface or a view refers to, and
   renumbers them so that ids stay indices into g->tensors. */
static void drop_unreferenced_tensors(Graph *g) {
  bool *keep = calloc((size_t)g->ntensors + 1, sizeof(bool));
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    for (int j = 0; j < n->nin; j++)
      if (n->in[j])
        keep[n->in[j]->id] = true;
    for (int j = 0; j < n->nout; j++)
      if (n->out[j])
        keep[n->out[j]->id] = true;
  }
  for (int i = 0; i < g->ninputs; i++)
    keep[g->inputs[i]->id] = true;
  for (int i = 0; i < g->noutputs; i++)
    keep[g->outputs[i]->id] = true;
  for (int i = 0; i < g->ntensors; i++)
    if (keep[i] && g->tensors[i]->alias_of)
      keep[g->tensors[i]->alias_of->id] = true;
  int k = 0;
  for (int i = 0; i < g->ntensors; i++)
    if (keep[i])
      g->tensors[k++] = g->tensors[i];
  g->ntensors = k;
  for (int i = 0; i < g->ntensors; i++)
    g->tensors[i]->id = i;
  free(keep);
}

bool pass_eliminate_dead(Graph *g, const PassOptions *opt, PassContext *ctx) {
  for (int i = 0; i < g->ntensors; i++)
    g->tensors[i]->id = i;
  bool *needed_tensor = calloc((size_t)g->ntensors + 1, sizeof(bool));
  mark_needed_nodes(g, needed_tensor);
  free(needed_tensor);
  graph_compact(g);
  drop_unreferenced_tensors(g);
  return true;
}
