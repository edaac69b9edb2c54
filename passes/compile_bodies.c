/*
 * compile_bodies.c - a run-time Loop's body (Node.body, frontend/loop.c),
 * and a run-time If's two (Node.body, Node.else_body), each through the
 * pass pipeline on its own, before the graph around it is:
 * simplified and fused like any graph, scheduled on one stream in order
 * (a CUDA conditional node's body holds no events), and planned in an
 * arena of its own. The Loop's last output, the body's memory, is then
 * sized to that arena (an If's to the larger of its two, which never run
 * together), so that the graph's memory plan gives the body a region that
 * overlaps nothing live across the node; the backend places the body's
 * tensors there (backend/loop.c, backend/if.c).
 */
#include <stdlib.h>
#include <string.h>

#include "pass.h"

/* The body's options: the graph's, but one stream, in order, on the GPU,
   and no reports of their own. */
static PassOptions body_options(const PassOptions *opt) {
  PassOptions o = *opt;
  o.dump_after = NULL;
  o.stats = false;
  o.report = false;
  o.emit_schedule = NULL;
  o.emit_dot = NULL;
  o.scheduler = "sequential";
  o.streams = 1;
  o.gpus = 0;
  o.cpu = false;
  return o;
}

/* A tensor whose size the data decides needs its dims read back or
   written beside it; a body's copies back do neither. */
static bool body_static(Graph *g, const Node *n, const Graph *b) {
  for (int i = 0; i < b->ntensors; i++)
    if (b->tensors[i]->bounded) {
      ir_error(g, n, "its body's tensor '%s' has a size known only at run time; opc runs a "
               "%s at run time only on a body of static shapes", b->tensors[i]->name,
               op_name(n->op));
      return false;
    }
  return true;
}

static bool compile_body(Graph *g, Node *n, Graph *b, const PassOptions *opt) {
  PassOptions o = body_options(opt);
  PassContext *body_ctx = pass_context_new(b, &o);
  return run_pipeline(b, &o, body_ctx) && body_static(g, n, b);
}

/* ------------------------------------- an If that runs both branches */

/* Body tensor t's copy in g, made once (map, by the body's ids); the
   body's inputs map to the node's. */
static Tensor *moved(Graph *g, const Graph *b, Tensor **map, Tensor *t) {
  if (!t || t->id < 0 || t->id >= b->ntensors || b->tensors[t->id] != t)
    return t;
  if (map[t->id])
    return map[t->id];
  Tensor *c = graph_add_tensor(g, graph_find_tensor(g, t->name) ? NULL : t->name);
  int id = c->id;
  const char *name = c->name;
  *c = *t;
  c->id = id;
  c->name = name;
  c->producer = NULL;
  c->users = NULL;
  c->nusers = c->users_cap = 0;
  c->is_input = c->is_output = false;
  return map[t->id] = c;
}

/* Body b's nodes into g, its inputs read from n's inputs from `at`; its
   outputs' copies in outs. */
static void move_body(Graph *g, const Node *n, const Graph *b, int at, Tensor **outs) {
  Tensor **map = calloc((size_t)b->ntensors + 1, sizeof *map);
  for (int j = 0; j < b->ninputs; j++)
    map[b->inputs[j]->id] = n->in[at + j];
  for (int i = 0; i < b->nnodes; i++) {
    const Node *bn = b->nodes[i];
    if (bn->dead)
      continue;
    Node *c = graph_add_node(g, bn->op, bn->name, bn->nin, bn->nout);
    int id = c->id;
    Tensor **in = c->in, **out = c->out;
    *c = *bn;
    c->id = id;
    c->in = in;
    c->out = out;
    for (int k = 0; k < bn->nin; k++)
      c->in[k] = moved(g, b, map, bn->in[k]);
    for (int k = 0; k < bn->nout; k++)
      if ((c->out[k] = moved(g, b, map, bn->out[k]))) {
        c->out[k]->producer = c;
        c->out[k]->producer_slot = k;
      }
  }
  for (int k = 0; k < b->noutputs; k++)
    outs[k] = moved(g, b, map, b->outputs[k]);
  free(map);
}

/* The If's line for --report, which the importer wrote, now says why both
   branches run. */
static void replace_note(Graph *g, const char *name, const char *why) {
  const char *prefix = arena_printf(g->arena, "If '%s': ", name);
  const char *text = arena_printf(g->arena, "%sboth branches run (IfSelect): %s", prefix, why);
  for (int i = 0; i < g->nnotes; i++)
    if (strncmp(g->notes[i], prefix, strlen(prefix)) == 0) {
      g->notes[i] = text;
      return;
    }
  graph_note(g, "%s", text);
}

/*
 * The If's branches as the importer makes an If that does not qualify for
 * an IF node (frontend/onnx.c's select_branches): both bodies' nodes in
 * g, each output an IfSelect of theirs by the condition as one value.
 * For a program with no conditional nodes (--gpus, --devices gpu,cpu).
 */
static bool run_both_branches(Graph *g, Node *n, const char *why) {
  int nout = n->nout - 1;
  Tensor **then_outs = calloc(2 * (size_t)nout + 2, sizeof *then_outs);
  Tensor **else_outs = then_outs + nout + 1;
  move_body(g, n, n->body, 1, then_outs);
  move_body(g, n, n->else_body, 1 + n->body->ninputs, else_outs);
  int64_t none = 0;
  Tensor *shape = graph_add_tensor(g, NULL);
  shape->dtype = DT_INT64;
  tensor_set_shape(shape, 1, &none);
  shape->i64 = arena_dup(g->arena, &none, sizeof none);
  Node *r = graph_add_node(g, OP_RESHAPE, arena_printf(g->arena, "%s/condition", n->name), 2, 1);
  r->in[0] = n->in[0];
  r->in[1] = shape;
  r->out[0] = graph_add_tensor(g, NULL);
  r->out[0]->producer = r;
  bool ok = node_infer(g, r);
  for (int k = 0; ok && k < nout; k++) {
    if (!n->out[k])
      continue;
    Node *sel = graph_add_node(g, OP_IF_SELECT, arena_printf(g->arena, "%s/output_%d", n->name, k),
                               3, 1);
    sel->in[0] = r->out[0];
    sel->in[1] = then_outs[k];
    sel->in[2] = else_outs[k];
    sel->out[0] = n->out[k];
    n->out[k]->producer = sel;
    n->out[k]->producer_slot = 0;
    ok = node_infer(g, sel);
  }
  free(then_outs);
  replace_note(g, n->name, why);
  n->dead = true;
  n->body = n->else_body = NULL;
  return ok;
}

bool pass_if_both_branches(Graph *g, const char *why) {
  bool any = false;
  for (int i = 0, count = g->nnodes; i < count; i++) {
    Node *n = g->nodes[i];
    if (n->dead || n->op != OP_IF || !n->body)
      continue;
    if (!run_both_branches(g, n, why))
      return false;
    any = true;
  }
  if (!any)
    return true;
  graph_compact(g);
  return graph_toposort(g);
}

bool pass_compile_bodies(Graph *g, const PassOptions *opt, PassContext *ctx) {
  (void)ctx;
  if ((opt->gpus > 1 || opt->cpu) &&
      !pass_if_both_branches(g, opt->cpu ? "--devices gpu,cpu runs no conditional nodes"
                                         : "--gpus runs no conditional nodes"))
    return false;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || !n->body)
      continue;
    if (opt->gpus > 1 || opt->cpu) {
      ir_error(g, n, "a %s whose condition is run-time data runs on one GPU: compile it "
               "without %s", op_name(n->op), opt->cpu ? "--devices gpu,cpu" : "--gpus");
      return false;
    }
    if (!compile_body(g, n, n->body, opt) ||
        (n->else_body && !compile_body(g, n, n->else_body, opt)) || !node_infer(g, n))
      return false;
  }
  return true;
}
