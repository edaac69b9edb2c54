/*
 * compile_bodies.c - a run-time Loop's body (Node.body, frontend/loop.c)
 * through the pass pipeline on its own, before the graph around it is:
 * simplified and fused like any graph, scheduled on one stream in order
 * (a CUDA conditional node's body holds no events), and planned in an
 * arena of its own. The Loop's last output, the body's memory, is then
 * sized to that arena, so that the graph's memory plan gives the body a
 * region that overlaps nothing live across the Loop; the backend places
 * the body's tensors there (backend/loop.c).
 */
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
static bool body_static(Graph *g, const Node *loop) {
  const Graph *b = loop->body;
  for (int i = 0; i < b->ntensors; i++)
    if (b->tensors[i]->bounded) {
      ir_error(g, loop, "its body's tensor '%s' has a size known only at run time; opc runs a "
               "Loop at run time only on a body of static shapes", b->tensors[i]->name);
      return false;
    }
  return true;
}

bool pass_compile_bodies(Graph *g, const PassOptions *opt, PassContext *ctx) {
  (void)ctx;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || !n->body)
      continue;
    if (opt->gpus > 1 || opt->cpu) {
      ir_error(g, n, "a Loop whose trip count or condition is run-time data runs on one GPU: "
               "compile it without %s", opt->cpu ? "--devices gpu,cpu" : "--gpus");
      return false;
    }
    PassOptions o = body_options(opt);
    PassContext *body_ctx = pass_context_new(n->body, &o);
    if (!run_pipeline(n->body, &o, body_ctx) || !body_static(g, n) || !node_infer(g, n))
      return false;
  }
  return true;
}
