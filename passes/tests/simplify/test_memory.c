/*
 * test_memory.c - plan-memory: alignment, no overlap between values alive
 * at the same time (lifetimes computed here from the schedule by hand),
 * sharing only where the schedule orders the old readers before the new
 * writer, and views keeping their storage alive.
 */
#include <stdlib.h>

#include "testlib.h"

/* Issue order with streams; no events unless added. */
static void schedule(Graph *g, Node **order, const int *streams, int n) {
  g->sched.order = order;
  g->sched.norder = n;
  g->sched.nstreams = 1;
  for (int i = 0; i < n; i++) {
    order[i]->stream = streams ? streams[i] : 0;
    order[i]->record_event = -1;
    order[i]->nwaits = 0;
    if (order[i]->stream + 1 > g->sched.nstreams)
      g->sched.nstreams = order[i]->stream + 1;
  }
}

static void wait_on(Graph *g, Node *producer, Node *consumer, int event) {
  producer->record_event = event;
  consumer->waits = arena_alloc(g->arena, sizeof(int));
  consumer->waits[0] = event;
  consumer->nwaits = 1;
  if (event + 1 > g->sched.nevents)
    g->sched.nevents = event + 1;
}

static int64_t bytes(const Tensor *t) { return tensor_numel(t) * 4; }

static bool overlap(const Tensor *a, const Tensor *b) {
  return a->offset < b->offset + bytes(b) && b->offset < a->offset + bytes(a);
}

/* Sequential order: storage s is live from its first writer's index to its
   last reader's index (readers through views included); interface tensors
   for the whole run. */
static void lifetime(Graph *g, Tensor *s, int *from, int *to) {
  *from = s->is_input ? -1 : 1 << 30;
  *to = s->is_input || s->is_output ? 1 << 30 : -1;
  for (int k = 0; k < g->noutputs; k++)
    if (tensor_storage(g->outputs[k]) == s)
      *to = 1 << 30;
  for (int i = 0; i < g->sched.norder; i++) {
    Node *n = g->sched.order[i];
    for (int j = 0; j < n->nout; j++)
      if (n->out[j] && tensor_storage(n->out[j]) == s && i < *from)
        *from = i;
    for (int j = 0; j < n->nin; j++)
      if (n->in[j] && tensor_storage(n->in[j]) == s && i > *to)
        *to = i;
  }
}

static void check_sequential_plan(Graph *g) {
  int64_t sum = 0;
  for (int i = 0; i < g->ntensors; i++) {
    Tensor *a = g->tensors[i];
    if (tensor_is_const(a) || a->alias_of)
      continue;
    CHECK(a->offset % 256 == 0);
    CHECK(a->offset + bytes(a) <= g->arena_bytes);
    sum += bytes(a);
    int af, at;
    lifetime(g, a, &af, &at);
    for (int j = i + 1; j < g->ntensors; j++) {
      Tensor *b = g->tensors[j];
      if (tensor_is_const(b) || b->alias_of)
        continue;
      int bf, bt;
      lifetime(g, b, &bf, &bt);
      bool live_together = af <= bt && bf <= at;
      if (live_together && overlap(a, b)) {
        fprintf(stderr, "  %s and %s overlap\n", a->name, b->name);
        CHECK(!"values alive together share memory");
      }
    }
  }
  (void)sum;
}

static Tensor *relu(Graph *g, Tensor *x, const char *name, Node **node) {
  Tensor *y = t_value(g, name, shape(2, 1, 64));
  *node = n_unary(g, OP_RELU, name, x, y);
  return y;
}

static void test_chain(int opt_level) {
  Graph *g = graph_new("chain");
  Tensor *x = t_input(g, "x", shape(2, 1, 64));
  Node *order[6];
  Tensor *t = x;
  const char *names[6] = {"t1", "t2", "t3", "t4", "t5", "out"};
  for (int i = 0; i < 6; i++)
    t = relu(g, t, names[i], &order[i]);
  graph_add_output(g, t);
  ready(g);
  schedule(g, order, NULL, 6);
  PassOptions opt = {.opt_level = opt_level};
  CHECK(pass_plan_memory(g, &opt, pass_context_new(g, &opt)));
  check_sequential_plan(g);
  /* 7 values of 256 bytes. x and out are pinned; of t1..t5 at most two
     are alive at once (a node's input and output), so 4 slots suffice. */
  if (opt_level == 0)
    CHECK(g->arena_bytes == 7 * 256);
  else
    CHECK(g->arena_bytes == 4 * 256);
  graph_free(g);
}

/* n1 (s0) -> t1 -> n2 (s1); n3 (s0) writes t3 while n2 may still read t1. */
static void test_streams(bool ordered) {
  Graph *g = graph_new("streams");
  Tensor *x = t_input(g, "x", shape(2, 1, 64));
  Node *n1, *n2, *n3, *n4;
  Tensor *t1 = relu(g, x, "t1", &n1);
  Tensor *t2 = relu(g, t1, "t2", &n2);
  Tensor *t3 = relu(g, x, "t3", &n3);
  Tensor *t4 = relu(g, t3, "t4", &n4);
  graph_add_output(g, t2);
  graph_add_output(g, t4);
  ready(g);
  Node *order[4] = {n1, n2, n3, n4};
  schedule(g, order, (int[]){0, 1, 0, 0}, 4);
  wait_on(g, n1, n2, 0);
  if (ordered)
    wait_on(g, n2, n3, 1);
  PassOptions opt = {.opt_level = 1};
  CHECK(pass_plan_memory(g, &opt, pass_context_new(g, &opt)));
  if (ordered)
    CHECK(t3->offset == t1->offset); /* n2 is done with t1 before n3 starts */
  else
    CHECK(!overlap(t1, t3));
  CHECK(!overlap(t2, t4) && !overlap(x, t1) && !overlap(x, t3));
  graph_free(g);
}

static Tensor *view_of(Graph *g, Tensor *base, const char *name) {
  Tensor *v = t_value(g, name, shape(2, 8, 8));
  Node *n = n_unary(g, OP_RESHAPE, name, base, v);
  n->is_view = true;
  v->alias_of = base;
  return v;
}

/* A view read late keeps its storage alive. */
static void test_view_lifetime(bool view_is_output) {
  Graph *g = graph_new("views");
  Tensor *x = t_input(g, "x", shape(2, 1, 64));
  Node *n1, *n2, *n3, *n4;
  Tensor *t1 = relu(g, x, "t1", &n1);
  Tensor *v = view_of(g, t1, "v");
  Tensor *t2 = relu(g, x, "t2", &n2);
  Tensor *t3, *out;
  if (view_is_output) {
    graph_add_output(g, v);
    t3 = relu(g, t2, "t3", &n3);
    out = relu(g, t3, "out", &n4);
  } else {
    Tensor *vin[2] = {v, t2};
    t3 = t_value(g, "t3", shape(2, 8, 8));
    n3 = n_add(g, OP_ADD, "add", 2, vin, 1, &t3);
    out = relu(g, t3, "out", &n4);
  }
  graph_add_output(g, out);
  ready(g);
  Node *order[4] = {n1, n2, n3, n4};
  schedule(g, order, NULL, 4);
  PassOptions opt = {.opt_level = 1};
  CHECK(pass_plan_memory(g, &opt, pass_context_new(g, &opt)));
  CHECK(!overlap(t1, t2) && !overlap(t1, t3));
  CHECK(v->offset == t1->offset);
  check_sequential_plan(g);
  graph_free(g);
}

int main(void) {
  test_chain(0);
  test_chain(1);
  test_streams(false);
  test_streams(true);
  test_view_lifetime(false);
  test_view_lifetime(true);
  return test_finish("passes-memory");
}
