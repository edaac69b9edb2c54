/*
 * join.c - the graph of a serving program: several copies of several
 * models side by side (graph_join).
 *
 * Each model has been rewritten on its own (folding, fusion, merging), so
 * its copies are identical and the scheduler sees the final units. A copy
 * gets fresh tensors and nodes; the model's constants are made once and
 * shared by its copies, so the weights are stored once per model. The
 * copies' nodes point at the model's attributes and resolved parameters,
 * which nothing changes after rewriting.
 */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* Per model tensor id: its tensor in the joint graph (for one copy). */
typedef struct TensorMap {
  Tensor **to;
  int n;
} TensorMap;

static Tensor *copy_tensor(Graph *j, const Tensor *t, const char *name) {
  Tensor *c = graph_add_tensor(j, name);
  c->dtype = t->dtype;
  c->rank = t->rank;
  memcpy(c->dims, t->dims, sizeof c->dims);
  memcpy(c->strides, t->strides, sizeof c->strides);
  c->f32 = t->f32; /* constant data: shared, never written after rewriting */
  c->i64 = t->i64;
  c->alias_offset = t->alias_offset;
  return c;
}

/* The copy of model tensor t for copy `prefix`, made on first use;
   constants come from the model's shared map. */
static Tensor *mapped(Graph *j, TensorMap *copy, TensorMap *consts, const char *model,
                      const char *prefix, Tensor *t) {
  if (!t)
    return NULL;
  if (tensor_is_const(t) && !t->alias_of) {
    if (!consts->to[t->id])
      consts->to[t->id] = copy_tensor(j, t, arena_printf(j->arena, "%s/%s", model, t->name));
    return consts->to[t->id];
  }
  if (!copy->to[t->id])
    copy->to[t->id] = copy_tensor(j, t, arena_printf(j->arena, "%s/%s", prefix, t->name));
  return copy->to[t->id];
}

static void copy_node(Graph *j, const Node *n, TensorMap *copy, TensorMap *consts,
                      const char *model, const char *prefix, int instance) {
  Node *c = graph_add_node(j, n->op, arena_printf(j->arena, "%s/%s", prefix, n->name), n->nin,
                           n->nout);
  for (int i = 0; i < n->nin; i++)
    c->in[i] = mapped(j, copy, consts, model, prefix, n->in[i]);
  for (int i = 0; i < n->nout; i++)
    c->out[i] = mapped(j, copy, consts, model, prefix, n->out[i]);
  c->attrs = n->attrs;
  c->nattrs = n->nattrs;
  c->win = n->win;
  c->p = n->p;
  c->act = n->act;
  c->act_alpha = n->act_alpha;
  c->act_beta = n->act_beta;
  c->fused = n->fused;
  c->nfused = n->nfused;
  c->is_view = n->is_view;
  c->instance = instance;
}

/* One copy of model g as `prefix` ("a.1"); its inputs and outputs are
   appended to the joint graph's lists. */
static void copy_model(Graph *j, const Graph *g, TensorMap *consts, const char *model,
                       const char *prefix, int instance) {
  TensorMap copy = {arena_alloc(j->arena, sizeof(Tensor *) * ((size_t)g->ntensors + 1)),
                    g->ntensors};
  for (int i = 0; i < g->ninputs; i++)
    graph_add_input(j, mapped(j, &copy, consts, model, prefix, g->inputs[i]));
  for (int i = 0; i < g->nnodes; i++)
    if (!g->nodes[i]->dead)
      copy_node(j, g->nodes[i], &copy, consts, model, prefix, instance);
  for (int i = 0; i < g->noutputs; i++)
    graph_add_output(j, mapped(j, &copy, consts, model, prefix, g->outputs[i]));
  /* Views: alias the copy of their storage (never a constant). */
  for (int i = 0; i < g->ntensors; i++) {
    const Tensor *t = g->tensors[i];
    if (copy.to[i] && t->alias_of)
      copy.to[i]->alias_of = mapped(j, &copy, consts, model, prefix, t->alias_of);
  }
}

/* "a.onnx, b.onnx": what messages about the whole program name. */
static const char *joint_path(Arena *a, Graph *const *models, int nmodels) {
  const char *path = models[0]->path;
  for (int m = 1; m < nmodels; m++)
    path = arena_printf(a, "%s, %s", path, models[m]->path);
  return path;
}

Graph *graph_join(Graph *const *models, const char *const *names, const int *instances,
                  int nmodels) {
  Graph *j = graph_new(NULL);
  j->path = joint_path(j->arena, models, nmodels);
  j->name = "serve";
  j->max_memory = models[0]->max_memory;
  ServeInfo *s = arena_alloc(j->arena, sizeof *s);
  s->nmodels = nmodels;
  s->models = arena_alloc(j->arena, sizeof(ServedModel) * (size_t)nmodels);
  for (int m = 0; m < nmodels; m++)
    s->ninstances += instances[m];
  s->instance_model = arena_alloc(j->arena, sizeof(int) * ((size_t)s->ninstances + 1));
  s->first_input = arena_alloc(j->arena, sizeof(int) * ((size_t)s->ninstances + 1));
  s->first_output = arena_alloc(j->arena, sizeof(int) * ((size_t)s->ninstances + 1));
  int instance = 0;
  for (int m = 0; m < nmodels; m++) {
    const Graph *g = models[m];
    if (g->opset > j->opset)
      j->opset = g->opset;
    s->models[m] = (ServedModel){arena_strdup(j->arena, names[m]), arena_strdup(j->arena, g->path),
                                 instances[m], instance, g->ninputs, g->noutputs};
    TensorMap consts = {arena_alloc(j->arena, sizeof(Tensor *) * ((size_t)g->ntensors + 1)),
                        g->ntensors};
    for (int k = 0; k < instances[m]; k++, instance++) {
      s->instance_model[instance] = m;
      s->first_input[instance] = j->ninputs;
      s->first_output[instance] = j->noutputs;
      copy_model(j, g, &consts, names[m], arena_printf(j->arena, "%s.%d", names[m], k), instance);
    }
  }
  j->serve = s;
  graph_rebuild_uses(j);
  return j;
}

const ServedModel *graph_instance_model(const Graph *g, int instance) {
  if (!g->serve || instance < 0 || instance >= g->serve->ninstances)
    return NULL;
  return &g->serve->models[g->serve->instance_model[instance]];
}
