/*
 * nodes.c - each node of the schedule into the parts of net.c (its context
 * fields, its setup and run functions, its block in enqueue(), its
 * teardown), and enqueue() and capture(), which issue them.
 */
#include <stdlib.h>
#include <string.h>

#include "emit.h"

static const char *node_comment(Emitter *e, const Node *n) {
  char *text = emit_str(e, "%s (%s)", comment_text(e, n->name), op_name(n->op));
  for (int i = 0; i < n->nfused; i++)
    text = emit_str(e, "%s%s%s", text, i ? ", " : ", fused with ", comment_text(e, n->fused[i]));
  return text;
}

/* Nodes whose code is nothing: views and constants. */
static bool issues_nothing(const Node *n) { return n->is_view || n->op == OP_CONSTANT; }

/* ------------------------------------------------------ node printing */

static void emit_waits_and_record(Emitter *e, const Node *n, bool waits) {
  NodeSchedule *ns = node_sched(e->g, n);
  const char *stream = node_stream(e, n);
  if (waits) {
    for (int i = 0; i < ns->nwaits; i++)
      emit_call(e, LIB_CUDA, n, "cudaStreamWaitEvent(%s, c->event[%d], 0)", stream, ns->waits[i]);
  } else if (ns->record_event >= 0) {
    emit_call(e, LIB_CUDA, n, "cudaEventRecord(c->event[%d], %s)", ns->record_event, stream);
  }
}

void emit_node_setup(Emitter *e, const OpEmitter *op, Node *n) {
  if (!op->setup)
    return;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) {
    e->failed = true;
    return;
  }
  e->f = f;
  e->indent = 1;
  e->fail = e->cpu_code ? emit_cpu_setup_fail(e) : "return -1";
  op->setup(e, n);
  fclose(f);
  if (len > 0) {
    const char *fn = emit_str(e, "setup_%s", node_id(e, n));
    FILE *s = e->st->sec[SEC_SETUP];
    const char *device = emit_multi_gpu(e)
        ? emit_str(e, "  if (!cuda_ok(c, cudaSetDevice(c->gpu[%d]), \"cudaSetDevice\")) {\n    return -1;\n  }\n",
                   node_sched(e->g, n)->device)
        : e->cpu_code ? "  c->cpu_node = c->node;\n" : "";
    fprintf(s, "/* %s */\nstatic int %s(%s_ctx *c)\n{\n  c->node = \"%s\";\n%s%s  return 0;\n}\n\n",
            node_comment(e, n), fn, e->prefix, emit_node_label(e, n), device, text);
    fprintf(e->st->sec[SEC_CREATE], "  if (%s(c) != 0) {\n    goto fail;\n  }\n", fn);
  }
  free(text);
}

/*
 * The node's calls on its stream, as a function of their own: enqueue()
 * issues it in the schedule, net_profile() alone, many times over. Returns
 * the function's name.
 */
/* Whether emitted code reads the context `c` (an empty output issues only a comment). */
static bool uses_context(const char *text) {
  return text && (strstr(text, "c->") || strstr(text, "(c,") || strstr(text, "(c)"));
}

/* A node that reads a bounded tensor writes its bounded outputs' dims of
   the run (ir/bounds.c's rules: the input's run-time dim, moved to the
   output's bound axis), after its work: one thread of opc_live_dims. The
   kinds that make a bound (NonZero, ..., a Concat along the run-time
   axis) write their own: the output is its own origin, or shares one
   with no input (TopK's indices its values', a Concat's another's). */
static void emit_live_dims(Emitter *e, Node *n) {
  for (int k = 0; k < n->nout; k++) {
    const Tensor *y = n->out[k], *from = NULL;
    /* A Slice of a run's first elements: the input's run clamped to the
       output's bound, which opc_live_dims does (ir/bounds.c). */
    bool cut = op_info(n->op)->params == PARAMS_SLICE && n->in[0]->bounded;
    if (!y || !y->bounded || (y->bound_origin == y && !cut))
      continue; /* static, or a bound of the node's own (NonZero's count) */
    for (int i = 0; i < n->nin; i++)
      if (n->in[i] && n->in[i]->bounded && (n->in[i]->bound_origin == y->bound_origin || cut))
        from = n->in[i]; /* the input whose run-time dim y's is */
    if (!from)
      continue;
    Launch L = {.kernel = "opc_live_dims", .n = 1, .nx = 1};
    L.x[0] = live_dims(e, from);
    L.x_extent[0] = from->rank;
    L.x_bytes[0] = 8;
    L.y = live_dims(e, y);
    L.y_extent = y->rank;
    L.y_bytes = 8;
    L.i[0] = from->bound_axis;
    L.i[1] = y->bound_axis;
    L.i[2] = y->rank;
    for (int d = 0; d < y->rank; d++)
      L.i[3 + d] = y->dims[d];
    group_i(&L, 0, 3, "the run-time dim of the input, of the output, the rank");
    group_i(&L, 3, y->rank, "the output's bounds");
    L.note = emit_str(e, "one thread: the dims of '%s' in this run", y->name);
    emit_launch(e, n, &L);
  }
}

static const char *emit_node_run(Emitter *e, const OpEmitter *op, Node *n) {
  const char *fn = emit_str(e, "run_%s", node_id(e, n));
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) {
    e->failed = true;
    return fn;
  }
  e->f = f;
  e->indent = 1;
  e->fail = "return -1";
  if (op->run)
    op->run(e, n);
  emit_live_dims(e, n);
  fclose(f);
  FILE *s = e->st->sec[SEC_SETUP];
  fprintf(s, "/* %s: its work, on its stream */\nstatic int %s(%s_ctx *c)\n{\n%s%s  return 0;\n}\n\n",
          node_comment(e, n), fn, e->prefix, uses_context(text) ? "" : "  (void)c;\n",
          len ? text : "");
  free(text);
  return fn;
}

/* The node's index in net.c's node table, the order of issue. */
static int issued_index(Emitter *e, Node *n) {
  EmitState *st = e->st;
  if (st->nissued == st->capissued) {
    st->capissued = st->capissued ? st->capissued * 2 : 64;
    Node **grown = arena_alloc(e->g->arena, sizeof(Node *) * (size_t)st->capissued);
    if (st->nissued)
      memcpy(grown, st->issued, sizeof(Node *) * (size_t)st->nissued);
    st->issued = grown;
  }
  st->issued[st->nissued] = n;
  return st->nissued++;
}

static void emit_node(Emitter *e, Node *n) {
  EmitState *st = e->st;
  e->node = n;
  const char *comment = node_comment(e, n);
  if (issues_nothing(n)) {
    e->f = st->sec[SEC_ENQUEUE];
    e->indent = 1;
    e->fail = "goto fail";
    const char *what = n->is_view ? "a view, no work" : "a constant, in the weights";
    if (node_sched(e->g, n)->nwaits || node_sched(e->g, n)->record_event >= 0) {
      emit(e, "/* %s: %s */", comment, what);
      emit(e, "c->node = \"%s\";", emit_node_label(e, n));
      emit_waits_and_record(e, n, true);
      emit_waits_and_record(e, n, false);
    } else {
      emit(e, "/* %s: %s */", comment, what);
    }
    e->node = NULL;
    return;
  }
  if (!check_node_types(e, n)) {
    e->node = NULL;
    return;
  }
  const OpEmitter *op = node_emitter(e, n);
  if (!op && op_info(n->op)->eval != AT_RUN_TIME) {
    report_not_folded(e->g, n); /* it has no kernels by design: say why it is still here */
    e->failed = true;
    return;
  }
  if (!op && node_in_half(n)) {
    ir_error(e->g, n, "%s runs on %s only in its cuDNN or cuBLAS form, which cannot express "
             "this node; opc's kernels compute it in float32 (a compiler bug: "
             "lower-precision should have left it in float32)",
             op_info(n->op)->name, dtype_name(node_data_type(n)));
    e->failed = true;
    return;
  }
  if (!op) {
    ir_error(e->g, n, "no code generator for this operator");
    e->failed = true;
    return;
  }
  bool cpu = node_is_cpu_code(e, n);
  e->cpu_code = cpu;
  if (op->fields) {
    emit_fields_header(e);
    e->f = st->sec[SEC_FIELDS];
    e->indent = 1;
    op->fields(e, n);
  }
  emit_node_setup(e, op, n);

  const char *run = emit_node_run(e, op, n);
  e->cpu_code = false;
  const char *host_fn = cpu ? emit_cpu_host_function(e, n, run) : NULL;
  e->f = st->sec[SEC_ENQUEUE];
  e->indent = 1;
  e->fail = "goto fail";
  int k = issued_index(e, n);
  emit_blank(e);
  emit(e, "/* %s */", comment);
  emit_waits_and_record(e, n, true);
  if (e->g->serve && n->instance >= 0) {
    /* A copy left out of a round does no work, but its events still order the
       streams as the schedule (and the memory plan) assume. */
    emit_open(e, "if (c->active[%d]) {", n->instance);
    emit_fail_if(e, "!begin_node(c, %d, %s) || %s(c) != 0 || !end_node(c, %d, %s)", k,
                 node_stream(e, n), run, k, node_stream(e, n));
    emit_close(e, "}");
    emit_waits_and_record(e, n, false);
  } else if (host_fn) {
    emit(e, "if (!begin_node(c, %d, %s) ||", k, node_stream(e, n));
    emit(e, "    !cuda_ok(c, cudaLaunchHostFunc(%s, %s, c), \"cudaLaunchHostFunc\")) {",
         node_stream(e, n), host_fn);
    emit(e, "  %s;", emit_fail(e));
    emit(e, "}");
    emit_waits_and_record(e, n, false);
    emit_fail_if(e, "!end_node(c, %d, %s)", k, node_stream(e, n));
  } else {
    emit_fail_if(e, "!begin_node(c, %d, %s) || %s(c) != 0", k, node_stream(e, n), run);
    emit_waits_and_record(e, n, false);
    emit_fail_if(e, "!end_node(c, %d, %s)", k, node_stream(e, n));
  }

  if (op->teardown) {
    e->f = st->sec[SEC_TEARDOWN];
    e->indent = 1;
    e->cpu_code = cpu;
    op->teardown(e, n);
    e->cpu_code = false;
  }
  e->node = NULL;
}

/* Every node, in the order the schedule pass chose for listing them. */
void emit_nodes(Emitter *e) {
  for (Node **n = e->g->sched.listing; *n && !e->failed; n++)
    emit_node(e, *n);
}

/* ---------------------------------------------------- enqueue, capture */

void emit_enqueue(Emitter *e) {
  EmitState *st = e->st;
  const char *p = e->prefix;
  emit(e, "/*");
  emit(e, " * Issues the whole schedule. Every stream starts after the work already on");
  emit(e, " * `origin`, and `origin` goes on after the last node of every stream.");
  emit(e, " */");
  emit(e, "static int enqueue(%s_ctx *c, cudaStream_t origin)", p);
  emit_open(e, "{");
  e->fail = "goto fail";
  emit_call(e, LIB_CUDA, NULL, "cudaEventRecord(c->fork, origin)");
  emit(e, "for (int s = 0; s < %d; s++)", e->g->sched.nstreams);
  e->indent++;
  emit(e, "if (c->stream[s] != origin &&");
  emit(e, "    !cuda_ok(c, cudaStreamWaitEvent(c->stream[s], c->fork, 0), \"cudaStreamWaitEvent\"))");
  emit(e, "  goto fail;");
  e->indent--;
  fputs(st->text[SEC_ENQUEUE], e->f);
  emit_blank(e);
  if (emit_multi_gpu(e)) {
    emit(e, "/* Back to GPU 0, where `origin` and the caller's copies are. */");
    emit_set_device(e, "0");
  }
  emit(e, "for (int s = 0; s < %d; s++)", e->g->sched.nstreams);
  e->indent++;
  emit(e, "if (c->stream[s] != origin &&");
  emit(e, "    (!cuda_ok(c, cudaEventRecord(c->join[s], c->stream[s]), \"cudaEventRecord\") ||");
  emit(e, "     !cuda_ok(c, cudaStreamWaitEvent(origin, c->join[s], 0), \"cudaStreamWaitEvent\")))");
  emit(e, "  return -1;");
  e->indent--;
  emit(e, "return 0;");
  e->indent--;
  emit(e, "fail:");
  e->indent++;
  emit(e, "if (c->node) { /* inside a node: close its range */");
  emit(e, "  nvtxRangePop();");
  emit(e, "  c->node = NULL;");
  emit(e, "}");
  emit(e, "/* Join the streams all the same, unchecked, so that a capture ends cleanly");
  emit(e, "   and the error kept is the first one. */");
  emit(e, "for (int s = 0; s < %d; s++)", e->g->sched.nstreams);
  emit(e, "  if (c->stream[s] != origin && cudaEventRecord(c->join[s], c->stream[s]) == cudaSuccess)");
  emit(e, "    cudaStreamWaitEvent(origin, c->join[s], 0);");
  emit(e, "return -1;");
  emit_close(e, "}");
  emit_blank(e);
}

/* capture(c`params`): `prelude`, then the schedule captured into `target`. */
void emit_capture_into(Emitter *e, const char *what, const char *params, const char *prelude,
                       const char *target) {
  emit(e, "/* Captures %s. */", what);
  emit(e, "static int capture(%s_ctx *c%s)", e->prefix, params);
  emit_open(e, "{");
  emit(e, "cudaGraph_t graph = NULL;");
  emit(e, "cudaError_t status;");
  emit(e, "int ok;");
  e->fail = "return -1";
  if (prelude[0])
    emit(e, "%s", prelude);
  used(e)->lib[LIB_CUDA] = true;
  emit(e, "pthread_mutex_lock(&opc_capture_lock);");
  emit(e, "status = cudaStreamBeginCapture(c->stream[0], cudaStreamCaptureModeThreadLocal);");
  emit(e, "if (!cuda_ok(c, status, \"cudaStreamBeginCapture\")) {");
  emit(e, "  pthread_mutex_unlock(&opc_capture_lock);");
  emit(e, "  return -1;");
  emit(e, "}");
  emit(e, "ok = enqueue(c, c->stream[0]) == 0;");
  emit(e, "/* End the capture even after a failure, so that the stream is usable, but");
  emit(e, "   keep the node's own message: the capture fails because of it. */");
  emit(e, "status = cudaStreamEndCapture(c->stream[0], &graph);");
  emit(e, "pthread_mutex_unlock(&opc_capture_lock);");
  emit(e, "if (ok)");
  emit(e, "  ok = cuda_ok(c, status, \"cudaStreamEndCapture\");");
  emit(e, "if (ok)");
  emit(e, "  ok = cuda_ok(c, cudaGraphInstantiate(%s, graph, 0ULL), \"cudaGraphInstantiate\");", target);
  emit(e, "if (graph)");
  emit(e, "  cudaGraphDestroy(graph);");
  emit(e, "return ok ? 0 : -1;");
  emit_close(e, "}");
  emit_blank(e);
}

void emit_capture(Emitter *e) {
  emit_capture_into(e, "the schedule into a CUDA graph once; every run replays it", "", "",
                    "&c->graph");
}
