/*
 * loop.c - a Loop whose trip count or condition is run-time data, kept as
 * one OP_LOOP node that owns its body, a graph of its own (Node.body).
 *
 * import_loop (onnx.c) unrolls a Loop whose iterations are all known at
 * compile time, which is cheaper; loop_known_now says which. The body is
 * imported with im->g set to the body graph. A name the body reads from
 * the graphs around it (ONNX's outer scope) is captured: a constant is
 * copied into the body as a constant, so that the body's passes fold
 * with it; any other value becomes a body input and an input of the Loop
 * node, after the carried values (loop_capture). The backend runs the
 * body as a CUDA-graph WHILE node (backend/loop.c).
 */
#include <stdlib.h>
#include <string.h>

#include "import.h"

/* The outer values a body reads, each with the body's tensor for it. */
typedef struct LoopCapture {
  Graph *outer, *body;
  const char *name; /* the Loop node's, for tensor names */
  Tensor **from, **to;
  int n, cap;
} LoopCapture;

static bool in_graph(const Graph *g, const Tensor *t) {
  return t->id >= 0 && t->id < g->ntensors && g->tensors[t->id] == t;
}

Tensor *loop_capture_outer_find(Importer *im, const char *name) {
  return graph_find_tensor(im->capture->outer, name);
}

Graph *loop_capture_outer_graph(Importer *im) { return im->capture->outer; }

/* A constant of the body with t's type and data (the arena is shared). */
static Tensor *copy_constant(Graph *body, const char *name, const Tensor *t) {
  Tensor *c = graph_add_tensor(body, name);
  c->dtype = t->dtype;
  tensor_set_shape(c, t->rank, t->dims);
  c->f32 = t->f32;
  c->i64 = t->i64;
  return c;
}

Tensor *loop_capture(Importer *im, Tensor *t) {
  LoopCapture *c = im->capture;
  if (in_graph(c->body, t))
    return t;
  for (int i = 0; i < c->n; i++)
    if (c->from[i] == t)
      return c->to[i];
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 8;
    c->from = realloc(c->from, sizeof *c->from * (size_t)c->cap);
    c->to = realloc(c->to, sizeof *c->to * (size_t)c->cap);
  }
  /* Shapes are inferred as the importer asks (graph_evaluate); a value
     that folds to a constant comes in as one. */
  graph_evaluate(c->outer, t);
  const char *name = arena_printf(c->body->arena, "%s/outer/%s", c->name, t->name);
  Tensor *in;
  if (tensor_is_const(t)) {
    in = copy_constant(c->body, name, t);
  } else {
    in = graph_add_tensor(c->body, name);
    in->dtype = t->dtype;
    tensor_set_shape(in, t->rank, t->dims);
    graph_add_input(c->body, in);
  }
  c->from[c->n] = t;
  c->to[c->n++] = in;
  return in;
}

/* ----------------------------------------------------- which way */

static bool name_in(const char *name, const char **names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0)
      return true;
  return false;
}

/*
 * Whether the body's condition output is computed from the iteration
 * number, the incoming condition and constants only (a `for` loop's body
 * passes its condition through): the names known at compile time, in the
 * body's node order, which ONNX makes topological.
 */
static bool body_condition_static(Importer *im, const Onnx__GraphProto *body) {
  int cap = (int)(body->n_initializer + 2 + 4 * body->n_node) + 1, n = 0;
  const char **known = malloc(sizeof *known * (size_t)cap);
  if (!known)
    return false;
  known[n++] = proto_str(body->input[0]->name);
  known[n++] = proto_str(body->input[1]->name);
  for (size_t i = 0; i < body->n_initializer; i++)
    known[n++] = proto_str(body->initializer[i]->name);
  for (size_t i = 0; i < body->n_node; i++) {
    const Onnx__NodeProto *np = body->node[i];
    bool all = np->n_attribute == 0 || strcmp(proto_str(np->op_type), "Constant") == 0;
    for (size_t a = 0; all && a < np->n_attribute; a++)
      all = np->attribute[a]->g == NULL && np->attribute[a]->n_graphs == 0;
    for (size_t k = 0; all && k < np->n_input; k++) {
      const char *in = np->input[k];
      if (!*in || name_in(in, known, n))
        continue;
      /* an outer name: known where it is a constant now */
      Tensor *t = import_lookup(im, in);
      all = t && tensor_is_const(t);
    }
    for (size_t k = 0; all && k < np->n_output; k++) {
      if (n == cap) {
        cap *= 2;
        const char **grown = realloc(known, sizeof *known * (size_t)cap);
        if (!grown) {
          free(known);
          return false;
        }
        known = grown;
      }
      known[n++] = np->output[k];
    }
  }
  bool ok = name_in(proto_str(body->output[0]->name), known, n);
  free(known);
  return ok;
}

bool loop_known_now(Importer *im, const Onnx__NodeProto *np, const Onnx__GraphProto *body) {
  enum { MAX_UNROLLED = 1024 }; /* import_loop's MAX_ITERATIONS */
  Graph *g = im->g;
  Tensor *m = *np->input[0] ? import_lookup(im, np->input[0]) : NULL;
  Tensor *cond = *np->input[1] ? import_lookup(im, np->input[1]) : NULL;
  if ((*np->input[0] && !m) || (*np->input[1] && !cond))
    return true; /* import_loop reports the undefined name */
  int before = ir_error_count();
  bool m_known = !m || graph_evaluate(g, m);
  bool cond_known = !cond || graph_evaluate(g, cond);
  if (ir_error_count() != before) {
    im->failed = true;
    return false;
  }
  if (m_known && m && m->i64 && tensor_numel(m) == 1 && m->i64[0] > MAX_UNROLLED)
    return false; /* too many to unroll: run it */
  return m_known && cond_known && body_condition_static(im, body);
}

/* The first dim the main graph declares for `name` (an output's or a
   value_info's type), or -1. */
static int64_t declared_rows(const Importer *im, const char *name) {
  const Onnx__GraphProto *gp = im->top;
  for (int list = 0; gp && list < 2; list++) {
    Onnx__ValueInfoProto **vis = list ? gp->value_info : gp->output;
    size_t count = list ? gp->n_value_info : gp->n_output;
    for (size_t i = 0; i < count; i++) {
      const Onnx__ValueInfoProto *vi = vis[i];
      if (strcmp(proto_str(vi->name), name) != 0 || !vi->type || !vi->type->tensor_type ||
          !vi->type->tensor_type->shape || vi->type->tensor_type->shape->n_dim < 1)
        continue;
      const Onnx__TensorShapeProto__Dimension *d = vi->type->tensor_type->shape->dim[0];
      if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value > 0)
        return d->dim_value;
    }
  }
  return -1;
}

bool loop_scans_bounded(Importer *im, const Onnx__NodeProto *np, const Onnx__GraphProto *body) {
  size_t carried = np->n_input - 2;
  for (size_t k = carried; k < np->n_output; k++)
    if (!*np->output[k] || declared_rows(im, np->output[k]) < 0)
      return false;
  return !im->capture && body->n_output == np->n_output + 1;
}

/* ------------------------------------------------------ the body */

static Tensor *body_input(Graph *b, const char *name, DType dt, const Tensor *like) {
  Tensor *t = graph_add_tensor(b, name);
  t->dtype = dt;
  tensor_set_shape(t, like ? like->rank : 0, like ? like->dims : NULL);
  graph_add_input(b, t);
  return t;
}

/* The body's output i: a tensor a body node makes, and no other output
   is; an input, a constant or a repeated value gets an Identity of its
   own, so that the copies back to the carried inputs never overlap. */
static Tensor *body_output(Graph *b, const char *name, int i, Tensor *t) {
  bool fresh = !t->is_input && !tensor_is_const(t) && !t->is_output;
  if (!fresh) {
    Node *id = graph_add_node(b, OP_IDENTITY, arena_printf(b->arena, "%s/output_%d", name, i),
                              1, 1);
    id->in[0] = t;
    t = id->out[0] = graph_add_tensor(b, arena_printf(b->arena, "%s/output_%d", name, i));
  }
  graph_add_output(b, t);
  return t;
}

static bool refuse(Importer *im, const char *name, const char *fmt, const char *what) {
  char text[512];
  snprintf(text, sizeof text, fmt, what);
  ir_error(im->g, NULL, "node '%s' (Loop): %s", name, text);
  im->failed = true;
  return false;
}

/* Imports the body into b, with im->g and im->capture set to it; the body's
   outputs in outs. */
static bool import_body(Importer *im, LoopCapture *cap, const Onnx__GraphProto *body,
                        Tensor **in, Tensor **outs) {
  Graph *outer = im->g;
  im->g = cap->body;
  im->capture = cap;
  im->if_depth++;
  bool ok = import_subgraph(im, body, cap->name, in, outs);
  im->if_depth--;
  im->capture = NULL;
  im->g = outer;
  return ok;
}

static Tensor *ints(Graph *g, const char *name, const int64_t *v, int n) {
  int64_t len = n;
  Tensor *t = graph_add_tensor(g, name);
  t->dtype = DT_INT64;
  tensor_set_shape(t, 1, &len);
  t->i64 = arena_dup(g->arena, v, sizeof(int64_t) * (size_t)(n ? n : 1));
  return t;
}

/*
 * Scan output j as one more carried value of the body: `rows` rows of the
 * body's value v, zeros at first, row i written by a ScatterND at the
 * iteration number (the body's input 0) in every iteration. Its body input
 * goes after the carried values, before the outer values; the Loop's
 * output holds the rows of the iterations run (a bounded tensor, whose
 * count the Loop writes: backend/loop.c). Returns the zeros, the Loop's
 * input for it; NULL after an error.
 */
static Tensor *stack_scan(Importer *im, Graph *b, const char *name, int carried, int j,
                          Tensor *v, int64_t rows) {
  Graph *g = im->g;
  int64_t dims[IR_MAX_RANK];
  if (v->rank + 1 > IR_MAX_RANK || !dtype_size(v->dtype) || v->bounded) {
    refuse(im, name, "its scan output of '%s' is of a type or rank opc cannot stack", v->name);
    return NULL;
  }
  dims[0] = rows;
  for (int d = 0; d < v->rank; d++)
    dims[1 + d] = v->dims[d];
  if (!check_tensor_size(g, NULL, "scan output", v->name, v->dtype, v->rank + 1, dims)) {
    im->failed = true;
    return NULL;
  }
  const char *at = arena_printf(g->arena, "%s/scan_%d", name, j);
  Tensor *zeros = graph_add_tensor(g, arena_printf(g->arena, "%s/zeros", at));
  zeros->dtype = v->dtype;
  tensor_set_shape(zeros, v->rank + 1, dims);
  size_t count = (size_t)tensor_numel(zeros) + 1;
  if (dtype_is_float(v->dtype))
    zeros->f32 = arena_alloc(g->arena, sizeof(float) * count), memset(zeros->f32, 0, sizeof(float) * count);
  else
    zeros->i64 = arena_alloc(g->arena, sizeof(int64_t) * count), memset(zeros->i64, 0, sizeof(int64_t) * count);
  Tensor *stack = body_input(b, arena_printf(g->arena, "%s/rows", at), v->dtype, zeros);
  /* its place: after the carried values and the stacks before it */
  for (int i = b->ninputs - 1; i > 2 + carried + j; i--)
    b->inputs[i] = b->inputs[i - 1];
  b->inputs[2 + carried + j] = stack;
  int64_t one_one[2] = {1, 1}, row[IR_MAX_RANK];
  row[0] = 1;
  for (int d = 0; d < v->rank; d++)
    row[1 + d] = v->dims[d];
  Node *index = graph_add_node(b, OP_RESHAPE, arena_printf(g->arena, "%s/index", at), 2, 1);
  index->in[0] = b->inputs[0];
  index->in[1] = ints(b, arena_printf(g->arena, "%s/index_shape", at), one_one, 2);
  index->out[0] = graph_add_tensor(b, arena_printf(g->arena, "%s/index", at));
  Node *update = graph_add_node(b, OP_RESHAPE, arena_printf(g->arena, "%s/row", at), 2, 1);
  update->in[0] = v;
  update->in[1] = ints(b, arena_printf(g->arena, "%s/row_shape", at), row, v->rank + 1);
  update->out[0] = graph_add_tensor(b, arena_printf(g->arena, "%s/row", at));
  Node *put = graph_add_node(b, OP_SCATTER_ND, arena_printf(g->arena, "%s/put", at), 3, 1);
  put->in[0] = stack;
  put->in[1] = index->out[0];
  put->in[2] = update->out[0];
  put->out[0] = graph_add_tensor(b, arena_printf(g->arena, "%s/rows_out", at));
  graph_add_output(b, put->out[0]);
  return zeros;
}

void import_runtime_loop(Importer *im, const Onnx__NodeProto *np, const char *name,
                         const Onnx__GraphProto *body) {
  Graph *g = im->g;
  int nin = (int)np->n_input, carried = nin - 2;
  int scans = (int)body->n_output - 1 - carried;
  if (im->capture) {
    refuse(im, name, "%s", "its trip count or condition is computed at run time inside the "
           "body of another such Loop; opc runs one level of run-time Loop");
    return;
  }
  Tensor *m = *np->input[0] ? import_lookup(im, np->input[0]) : NULL;
  Tensor *cond = *np->input[1] ? import_lookup(im, np->input[1]) : NULL;
  Tensor **outer = calloc((size_t)nin + 1, sizeof *outer);
  Tensor **in = calloc((size_t)nin + 1, sizeof *in);
  Tensor **outs = calloc(body->n_output + 1, sizeof *outs);
  LoopCapture cap = {.outer = g, .body = graph_new_in(g, name), .name = name};
  bool ok = outer && in && outs;
  for (int k = 0; ok && k < carried; k++) {
    outer[k] = import_lookup(im, np->input[2 + k]);
    if (!outer[k] || seq_of(im, outer[k]))
      ok = refuse(im, name, "its carried input '%s' is not defined, or is a sequence or "
                  "optional; opc runs a Loop at run time on tensors only", np->input[2 + k]);
    else
      graph_evaluate(g, outer[k]); /* its shape, for the body's input */
  }
  Graph *b = cap.body;
  if (ok) {
    in[0] = body_input(b, arena_printf(g->arena, "%s/iteration", name), DT_INT64, NULL);
    in[1] = body_input(b, arena_printf(g->arena, "%s/condition", name), DT_BOOL, NULL);
    for (int k = 0; k < carried; k++)
      in[2 + k] = body_input(b, arena_printf(g->arena, "%s/carried_%d", name, k),
                             outer[k]->dtype, outer[k]);
    ok = import_body(im, &cap, body, in, outs);
  }
  for (size_t i = 0; ok && i < body->n_output; i++) {
    if (!outs[i] || seq_of(im, outs[i]))
      ok = refuse(im, name, "its body output '%s' is not produced by the body, or is a "
                  "sequence or optional", proto_str(body->output[i]->name));
    else if (i < (size_t)carried + 1)
      body_output(b, name, (int)i, outs[i]);
  }
  ok = ok && graph_toposort(b) && graph_infer_shapes(b);
  Tensor **first = calloc((size_t)scans + 1, sizeof *first);
  for (int j = 0; ok && j < scans; j++)
    first[j] = stack_scan(im, b, name, carried, j, outs[1 + carried + j],
                          declared_rows(im, np->output[carried + j]));
  ok = ok && graph_toposort(b) && graph_infer_shapes(b);
  if (ok && first) {
    int loop_carried = carried + scans;
    b->loop_scans = scans;
    Node *n = graph_add_node(g, OP_LOOP, name, b->ninputs, loop_carried + 1);
    n->body = b;
    n->in[0] = m;
    n->in[1] = cond;
    for (int k = 0; k < carried; k++)
      n->in[2 + k] = outer[k];
    for (int j = 0; j < scans; j++)
      n->in[2 + carried + j] = first[j];
    for (int i = 0; i < cap.n; i++)
      if (cap.to[i]->is_input)
        for (int j = 2 + loop_carried; j < b->ninputs; j++)
          if (b->inputs[j] == cap.to[i])
            n->in[j] = cap.from[i];
    for (int k = 0; k < loop_carried; k++)
      n->out[k] = *np->output[k] ? import_lookup(im, np->output[k]) : graph_add_tensor(g, NULL);
    n->out[loop_carried] = graph_add_tensor(g, arena_printf(g->arena, "%s/body_memory", name));
  } else {
    im->failed = true;
  }
  free(first);
  free(cap.from);
  free(cap.to);
  free(outer);
  free(in);
  free(outs);
}

/* ------------------------------------------------------------ If */

/* Branch gp as the body of cap, its outputs the body's; false after an
   error. An If's branches take no inputs: what they read is captured. */
static bool branch_body(Importer *im, LoopCapture *cap, const Onnx__GraphProto *gp,
                        size_t nout) {
  Tensor **outs = calloc(gp->n_output + 1, sizeof *outs);
  bool ok = outs && gp->n_input == 0 && gp->n_output == nout &&
            import_body(im, cap, gp, NULL, outs);
  for (size_t i = 0; ok && i < nout; i++) {
    ok = outs[i] && !seq_of(im, outs[i]);
    if (ok)
      body_output(cap->body, cap->name, (int)i, outs[i]);
  }
  free(outs);
  return ok && graph_toposort(cap->body) && graph_infer_shapes(cap->body);
}

/* Why a body cannot run in a CUDA-graph conditional node, or NULL. */
static const char *body_refusal(Graph *g, const Graph *b, const char *which) {
  for (int i = 0; i < b->ntensors; i++)
    if (b->tensors[i]->bounded)
      return arena_printf(g->arena, "its %s branch's tensor '%s' has a size known only at run "
                          "time", which, b->tensors[i]->name);
  for (int i = 0; i < b->nnodes; i++) {
    const Node *n = b->nodes[i];
    if (!n->dead && !op_runs_in_body(n->op))
      return arena_printf(g->arena, "its %s branch's node '%s' (%s) %s", which, n->name,
                          op_name(n->op), n->body ? "is a run-time Loop, which opc does not nest "
                          "in a conditional node" : "runs with cuDNN or cuBLAS, which a "
                          "conditional node's body cannot call");
  }
  return NULL;
}

/* Why the two bodies' outputs cannot be one IF node's, or NULL: each
   pair must agree in dtype and static shape. */
static const char *outputs_refusal(Graph *g, const Graph *t, const Graph *e) {
  for (int k = 0; k < t->noutputs; k++) {
    const Tensor *a = t->outputs[k], *b = e->outputs[k];
    char ta[IR_MAX_RANK * 24 + 16], tb[IR_MAX_RANK * 24 + 16];
    if (a->bounded || b->bounded || a->dtype != b->dtype || !tensor_same_shape(a, b))
      return arena_printf(g->arena, "its output %d is %s%s in the then branch but %s%s in the "
                          "else branch; an IF node needs both of one dtype and static shape", k,
                          tensor_type_str(a, ta, sizeof ta), a->bounded ? " (bounded)" : "",
                          tensor_type_str(b, tb, sizeof tb), b->bounded ? " (bounded)" : "");
  }
  return NULL;
}

/* Why a body's captured outer values cannot be copied into it, or NULL:
   one of run-time size would need its dims too. */
static const char *captures_refusal(Graph *g, const LoopCapture *cap, const char *which) {
  for (int i = 0; i < cap->n; i++)
    if (cap->from[i]->bounded)
      return arena_printf(g->arena, "its %s branch reads '%s', whose size is known only at "
                          "run time", which, cap->from[i]->name);
  return NULL;
}

/* The node's inputs for a body's captured outer values, from `at`. */
static void capture_inputs(Node *n, int at, const LoopCapture *cap) {
  const Graph *b = cap->body;
  for (int j = 0; j < b->ninputs; j++)
    for (int i = 0; i < cap->n; i++)
      if (cap->to[i] == b->inputs[j])
        n->in[at + j] = cap->from[i];
}

/*
 * An If whose condition is run-time data as one OP_IF node owning both
 * branches, each a body graph whose outer reads are captured as the
 * Loop's are: the backend runs it as a CUDA-graph IF node with two bodies
 * (backend/if.c), so only the branch taken runs. True when the node was
 * made; false, nothing reported and *why set, when the If does not
 * qualify (then select_branches imports it as IfSelects): an If inside a
 * run-time body, outputs that differ in dtype or shape or are bounded, or
 * a branch node that only cuDNN or cuBLAS run.
 */
bool import_runtime_if(Importer *im, const Onnx__NodeProto *np, const char *name, Tensor *cond,
                       const Onnx__GraphProto *then_gp, const Onnx__GraphProto *else_gp,
                       const char **why) {
  Graph *g = im->g;
  size_t nout = np->n_output;
  if (im->capture) {
    *why = "it lies in the body of a run-time Loop or If, and opc nests no conditional nodes";
    return false;
  }
  LoopCapture then_cap = {.outer = g, .body = graph_new_in(g, arena_printf(g->arena, "%s/then", name)),
                          .name = arena_printf(g->arena, "%s/then", name)};
  LoopCapture else_cap = {.outer = g, .body = graph_new_in(g, arena_printf(g->arena, "%s/else", name)),
                          .name = arena_printf(g->arena, "%s/else", name)};
  ir_quiet(true);
  bool ok = branch_body(im, &then_cap, then_gp, nout) && branch_body(im, &else_cap, else_gp, nout);
  ir_quiet(false);
  *why = NULL;
  if (!ok) {
    im->failed = false; /* select_branches reports what is wrong, if anything */
    *why = "its branches did not import as bodies of their own (a sequence output, or a node "
           "that needs a value at compile time)";
  }
  if (!*why)
    *why = outputs_refusal(g, then_cap.body, else_cap.body);
  if (!*why && cond->bounded)
    *why = "its condition's size is known only at run time";
  if (!*why)
    *why = captures_refusal(g, &then_cap, "then");
  if (!*why)
    *why = captures_refusal(g, &else_cap, "else");
  if (!*why)
    *why = body_refusal(g, then_cap.body, "then");
  if (!*why)
    *why = body_refusal(g, else_cap.body, "else");
  if (!*why) {
    Graph *t = then_cap.body, *e = else_cap.body;
    Node *n = graph_add_node(g, OP_IF, name, 1 + t->ninputs + e->ninputs, (int)nout + 1);
    n->body = t;
    n->else_body = e;
    n->in[0] = cond;
    capture_inputs(n, 1, &then_cap);
    capture_inputs(n, 1 + t->ninputs, &else_cap);
    for (size_t k = 0; k < nout; k++)
      n->out[k] = *np->output[k] ? import_lookup(im, np->output[k]) : graph_add_tensor(g, NULL);
    n->out[nout] = graph_add_tensor(g, arena_printf(g->arena, "%s/body_memory", name));
  }
  free(then_cap.from);
  free(then_cap.to);
  free(else_cap.from);
  free(else_cap.to);
  return !*why;
}
