/*
 * verify.c - the IR verifier: run after import and, with --verify-each,
 * after every pass, so that a pass that breaks the graph is named at once.
 * It never changes the graph (the shape check works on saved copies).
 */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef enum { UNDEFINED, DEFINED_LATER, DEFINED } DefState;

/* Depth-first search for a cycle among live nodes; colour 1 = on the
   stack, 2 = finished. Returns a node on a cycle, or NULL. */
static Node *find_cycle(Graph *g, Node **producer, int *colour, Node *n) {
  colour[n->id] = 1;
  for (int i = 0; i < n->nin; i++) {
    Tensor *t = n->in[i];
    Node *p = t && t->id < g->ntensors ? producer[t->id] : NULL;
    if (!p)
      continue;
    if (colour[p->id] == 1)
      return p;
    if (colour[p->id] == 0) {
      Node *c = find_cycle(g, producer, colour, p);
      if (c)
        return c;
    }
  }
  colour[n->id] = 2;
  return NULL;
}

/* Every tensor read is defined exactly once, before its first reader, and
   not by a dead node; no cycles. */
static bool check_definitions(Graph *g) {
  bool ok = true;
  int nt = g->ntensors;
  Node **producer = calloc((size_t)nt + 1, sizeof(Node *));
  Node **dead_producer = calloc((size_t)nt + 1, sizeof(Node *));
  char *state = calloc((size_t)nt + 1, 1);
  int *colour = calloc((size_t)g->nnodes + 1, sizeof(int));

  for (int i = 0; i < nt; i++)
    if (g->tensors[i]->id != i) {
      ir_error(g, NULL, "tensor '%s' has id %d at index %d", g->tensors[i]->name,
               g->tensors[i]->id, i);
      ok = false;
    }
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    for (int j = 0; j < n->nin + n->nout; j++) {
      Tensor *t = j < n->nin ? n->in[j] : n->out[j - n->nin];
      if (t && (t->id < 0 || t->id >= nt || g->tensors[t->id] != t)) {
        ir_error(g, n, "uses tensor '%s', which is not in the graph's tensor list", t->name);
        ok = false;
      }
    }
  }
  for (int i = 0; i < g->noutputs + g->ninputs; i++) {
    Tensor *t = i < g->noutputs ? g->outputs[i] : g->inputs[i - g->noutputs];
    if (t->id < 0 || t->id >= nt || g->tensors[t->id] != t) {
      ir_error(g, NULL, "graph input or output '%s' is not in the tensor list", t->name);
      ok = false;
    }
  }
  /* Node ids index the scratch arrays; they are put back at the end. */
  int *saved_ids = calloc((size_t)g->nnodes + 1, sizeof(int));
  for (int i = 0; i < g->nnodes; i++) {
    saved_ids[i] = g->nodes[i]->id;
    g->nodes[i]->id = i;
  }
  if (!ok)
    goto done;

  /* Definitions: graph inputs, constants, node outputs. */
  for (int i = 0; i < g->ninputs; i++)
    state[g->inputs[i]->id] = DEFINED;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    for (int j = 0; j < n->nout; j++) {
      Tensor *t = n->out[j];
      if (!t)
        continue;
      for (int k = 0; k < j; k++)
        if (n->out[k] == t) {
          ir_error(g, n, "writes '%s' twice", t->name);
          ok = false;
        }
      if (n->dead) {
        dead_producer[t->id] = n;
        continue;
      }
      if (t->is_input) {
        ir_error(g, n, "writes '%s', which is a graph input", t->name);
        ok = false;
      } else if (producer[t->id]) {
        ir_error(g, n, "writes '%s', which node '%s' also writes", t->name,
                 producer[t->id]->name);
        ok = false;
      }
      producer[t->id] = n;
    }
  }
  if (!ok)
    goto done;

  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (!n->dead && colour[n->id] == 0) {
      Node *c = find_cycle(g, producer, colour, n);
      if (c) {
        ir_error(g, c, "the graph has a cycle through this node");
        ok = false;
        goto done;
      }
    }
  }

  for (int i = 0; i < nt; i++)
    if (state[i] != DEFINED && !producer[i] && tensor_is_const(g->tensors[i]))
      state[i] = DEFINED;
  for (int i = 0; i < nt; i++)
    if (producer[i])
      state[i] = DEFINED_LATER;

  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead)
      continue;
    for (int j = 0; j < n->nin; j++) {
      Tensor *t = n->in[j];
      if (!t)
        continue;
      if (state[t->id] == DEFINED)
        continue;
      if (state[t->id] == DEFINED_LATER)
        ir_error(g, n, "reads '%s' before node '%s' writes it", t->name, producer[t->id]->name);
      else if (dead_producer[t->id])
        ir_error(g, n, "reads '%s', written only by dead node '%s'", t->name,
                 dead_producer[t->id]->name);
      else
        ir_error(g, n, "reads '%s', which nothing defines", t->name);
      ok = false;
    }
    for (int j = 0; j < n->nout; j++)
      if (n->out[j])
        state[n->out[j]->id] = DEFINED;
  }
  for (int i = 0; i < g->noutputs; i++) {
    Tensor *t = g->outputs[i];
    if (state[t->id] != DEFINED) {
      ir_error(g, NULL, "graph output '%s' is not defined by any live node, input or constant",
               t->name);
      ok = false;
    }
  }
done:
  for (int i = 0; i < g->nnodes; i++)
    g->nodes[i]->id = saved_ids[i];
  free(saved_ids);
  free(producer);
  free(dead_producer);
  free(state);
  free(colour);
  return ok;
}

/* A view reads storage that a non-view tensor owns, within its bounds. */
static bool check_view(Graph *g, const Tensor *t) {
  const Tensor *base = t->alias_of;
  if (base->alias_of) {
    ir_error(g, NULL, "view '%s' aliases '%s', which is itself a view of '%s'", t->name,
             base->name, base->alias_of->name);
    return false;
  }
  if (base == t) {
    ir_error(g, NULL, "tensor '%s' is a view of itself", t->name);
    return false;
  }
  if (dtype_size(base->dtype) != dtype_size(t->dtype)) {
    ir_error(g, NULL, "view '%s' (%s) and its storage '%s' (%s) differ in element size",
             t->name, dtype_name(t->dtype), base->name, dtype_name(base->dtype));
    return false;
  }
  if (tensor_numel(t) == 0)
    return true;
  for (int i = 0; i < t->rank; i++)
    if (t->strides[i] < 0) {
      ir_error(g, NULL, "view '%s' has a negative stride", t->name);
      return false;
    }
  /* The offset and strides come from .ir text as they are: the last
     element is summed with overflow checks. */
  int64_t size = tensor_numel(base), last = t->alias_offset, span;
  bool fits = last >= 0 && last < size;
  for (int i = 0; i < t->rank && fits; i++)
    fits = !__builtin_mul_overflow(t->dims[i] - 1, t->strides[i], &span) &&
           !__builtin_add_overflow(last, span, &last) && last < size;
  if (!fits) {
    ir_error(g, NULL, "view '%s' at offset %lld reaches past the %lld elements of '%s'",
             t->name, (long long)t->alias_offset, (long long)size, base->name);
    return false;
  }
  return true;
}

/* Re-runs the node's shape function and compares its outputs' dtype and
   dims with what the graph holds; the node and tensors are restored. */
static bool check_shapes(Graph *g, Node *n) {
  enum { MAX_SAVED = 64 };
  Tensor saved[MAX_SAVED];
  int nsaved = n->nout < MAX_SAVED ? n->nout : MAX_SAVED;
  for (int i = 0; i < nsaved; i++)
    if (n->out[i])
      saved[i] = *n->out[i];
  Window win = n->win;
  bool ok = node_infer(g, n);
  for (int i = 0; ok && i < nsaved; i++) {
    Tensor *t = n->out[i];
    if (!t)
      continue;
    if (t->dtype != saved[i].dtype || !tensor_same_shape(t, &saved[i])) {
      char want[160], have[160];
      ir_error(g, n, "output '%s' is %s but its inputs give %s", t->name,
               tensor_type_str(&saved[i], have, sizeof have), tensor_type_str(t, want, sizeof want));
      ok = false;
    }
  }
  for (int i = 0; i < nsaved; i++)
    if (n->out[i])
      *n->out[i] = saved[i];
  n->win = win;
  return ok;
}

bool graph_verify(Graph *g) {
  if (!check_definitions(g))
    return false;
  bool ok = true;
  for (int i = 0; i < g->ntensors; i++) {
    const Tensor *t = g->tensors[i];
    if (t->alias_of && !check_view(g, t))
      ok = false;
    if (!t->alias_of && !tensor_has_dense_strides(t)) {
      ir_error(g, NULL, "tensor '%s' owns its storage but its strides skip or repeat elements",
               t->name);
      ok = false;
    }
  }
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (!n->dead && !check_shapes(g, n))
      ok = false;
  }
  return ok;
}
