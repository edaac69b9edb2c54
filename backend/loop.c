/*
 * loop.c - a run-time Loop (OP_LOOP, frontend/loop.c) in net.c.
 *
 * The body was compiled alone (passes/compile_bodies.c): its tensors lie
 * in the region of the arena that the Loop's last output, the body's
 * memory, holds. The Loop's run function copies the initial values into
 * the body's inputs and zeroes the iteration counter (the body's input 0),
 * then either
 *   - while the schedule is being captured into a CUDA graph, adds a WHILE
 *     node to the capture: a kernel sets the handle's first value (trip
 *     count above 0 and condition true), the node follows it, and the body
 *     is captured into the node's body graph on a stream of its own; the
 *     body's last kernel, opc_loop_condition, counts the iteration and
 *     sets the handle for the next one; or
 *   - outside a capture (--no-cuda-graph, net_profile), runs the body from
 *     a C loop, reading the condition back after each iteration: a
 *     synchronisation per iteration, so slower;
 * and copies the final carried values to the Loop's outputs. The body's
 * function is the same in both: its nodes, one comment each, then the
 * copies of the carried values back to the body's inputs.
 *
 * CUDA allows only kernels, memsets, memcpys, empty, child-graph and
 * conditional nodes in a body: a body node whose code calls cuDNN or
 * cuBLAS, records or waits on an event, or synchronises is refused here,
 * naming the Loop and that node.
 */
#include <stdlib.h>
#include <string.h>

#include "emit.h"

static int64_t bytes_of(const Tensor *t) { return tensor_numel(t) * (int64_t)dtype_size(t->dtype); }

void body_begin(BodyEmitter *b) {
  b->saved = b->e.st->tensor_field;
  b->e.st->tensor_field = b->tensor_field;
}

void body_end(BodyEmitter *b) { b->e.st->tensor_field = b->saved; }

void body_emitter(Emitter *e, const Node *n, Graph *body, BodyEmitter *b) {
  Arena *a = e->g->arena;
  b->e = *e;
  b->outer = e;
  b->e.g = body;
  size_t nt = (size_t)body->ntensors + 1, nn = (size_t)body->nnodes + 1;
  b->e.tensor_cname = arena_alloc(a, sizeof(char *) * nt);
  b->e.live_cname = arena_alloc(a, sizeof(char *) * nt);
  b->e.node_cname = arena_alloc(a, sizeof(char *) * nn);
  memset(b->e.tensor_cname, 0, sizeof(char *) * nt);
  memset(b->e.live_cname, 0, sizeof(char *) * nt);
  memset(b->e.node_cname, 0, sizeof(char *) * nn);
  b->e.body_node_data = arena_alloc(a, sizeof(void *) * nn);
  memset(b->e.body_node_data, 0, sizeof(void *) * nn);
  b->tensor_field = arena_alloc(a, sizeof(char *) * nt);
  memset(b->tensor_field, 0, sizeof(char *) * nt);
  b->e.stream = emit_str(e, "c->%s_stream", node_id(e, n));
  b->e.node = NULL;
  b->e.cpu_code = false;
  b->e.kernels_only = true;
}

/* The kernels a copy of e asked for, and its failure, back into e (the
   list of kernels is the emitter's own). */
void body_take_back(Emitter *e, const Emitter *copy) {
  for (int i = 0; i < copy->nkernels; i++)
    kernel_request(e, copy->kernels[i]);
  e->failed |= copy->failed;
}

/* A body's tensors into the node's region of the arena (its last
   output's), once. */
void place_body(const Node *n, Graph *body) {
  const Tensor *memory = n->out[n->nout - 1];
  if (body->placed)
    return;
  body->placed = true;
  for (int i = 0; i < body->ntensors; i++) {
    body->tensors[i]->offset += memory->offset;
    body->tensors[i]->live_offset += memory->offset;
  }
}

/* ------------------------------------------------------ the body */

static bool refuse_body_node(Emitter *e, const Node *loop, const Node *n, const char *why) {
  ir_error(e->g, loop, "its body's node '%s' (%s) %s, which CUDA does not allow in the body of "
           "a conditional node (kernels, memsets and memcpys only); opc runs a %s at run "
           "time only on such a body", n->name, op_name(n->op), why, op_name(loop->op));
  e->failed = true;
  return false;
}

/* One body node: its fields and setup as any node's, its work in a run
   function of its own, called from the body's function (`calls`). */
bool emit_body_node(BodyEmitter *b, const Node *loop, Node *n, FILE *calls) {
  Emitter *be = &b->e;
  const char *comment = emit_str(be, "%s (%s)", comment_text(be, n->name), op_name(n->op));
  if (n->is_view || n->op == OP_CONSTANT) {
    fprintf(calls, "  /* %s: %s */\n", comment, n->is_view ? "a view, no work" : "a constant");
    return true;
  }
  if (!check_node_types(be, n))
    return false;
  const OpEmitter *op = node_emitter(be, n);
  if (!op) {
    ir_error(be->g, n, "no code generator for this operator");
    be->failed = true;
    return false;
  }
  be->node = n;
  if (op->fields) {
    emit_fields_header(be);
    be->f = be->st->sec[SEC_FIELDS];
    be->indent = 1;
    op->fields(be, n);
  }
  emit_node_setup(be, op, n);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) {
    be->failed = true;
    return false;
  }
  be->f = f;
  be->indent = 1;
  be->fail = "return -1";
  be->refused_in_body = NULL; /* what the node's work calls, not its setup */
  if (op->run)
    op->run(be, n);
  fclose(f);
  const char *why = be->refused_in_body;
  if (why) {
    free(text);
    return refuse_body_node(be, loop, n, why);
  }
  const char *fn = emit_str(be, "run_%s", node_id(be, n));
  fprintf(be->st->sec[SEC_SETUP],
          "/* %s, in a body of %s '%s': its work, on the body's stream */\n"
          "static int %s(%s_ctx *c)\n{\n%s  return 0;\n}\n\n",
          comment, op_name(loop->op), comment_text(be, loop->name), fn, be->prefix, text ? text : "");
  free(text);
  fprintf(calls, "  /* %s */\n  c->node = \"%s\";\n  if (%s(c) != 0)\n    return -1;\n", comment,
          emit_node_label(be, n), fn);
  if (op->teardown) {
    be->f = be->st->sec[SEC_TEARDOWN];
    be->indent = 1;
    op->teardown(be, n);
  }
  be->node = NULL;
  return true;
}

/* opc_loop_condition on `stream`: counter += step; the handle set to
   counter < trips && condition. `e` is the graph's emitter; counter and
   cond are the body's buffers, as C. */
static void emit_condition(Emitter *e, FILE *f, int indent, const char *stream,
                           const Node *loop, const char *trips, const char *counter,
                           const char *cond, int step, const char *handle) {
  Emitter w = *e;
  w.f = f;
  w.indent = indent;
  w.stream = stream;
  w.fail = "return -1";
  Launch L = {.kernel = "opc_loop_condition", .n = 1, .nx = 2, .rank = 1};
  L.dims[0] = 1;
  L.xstride[0][0] = L.xstride[1][0] = L.ystride[0] = 1;
  L.x[0] = trips;
  L.x_extent[0] = trips ? 1 : 0;
  L.x_bytes[0] = 8;
  L.x[1] = cond;
  L.x_extent[1] = 1;
  L.x_bytes[1] = 1;
  L.y = counter;
  L.y_extent = 1;
  L.y_bytes = 8;
  L.iexpr[0] = emit_str(e, "(long long)%s", handle);
  L.i[1] = step;
  group_i(&L, 0, 2, "the WHILE node's handle, the step of the iteration number");
  L.note = step ? "the next iteration's number, and whether it runs"
                : "whether the first iteration runs: trip count above 0, condition true";
  emit_launch(&w, loop, &L);
  body_take_back(e, &w);
}

/* The body's function: its nodes, the carried values back to its inputs,
   and, in a CUDA graph (handle non-zero), the condition for the next
   iteration. */
char *emit_body_calls(BodyEmitter *b, const Node *owner, Graph *body) {
  char *text = NULL;
  size_t len = 0;
  FILE *calls = open_memstream(&text, &len);
  if (!calls) {
    b->e.failed = true;
    return NULL;
  }
  bool ok = true;
  for (Node **n = body->sched.listing; ok && n && *n; n++)
    ok = emit_body_node(b, owner, *n, calls);
  fclose(calls);
  if (!ok) {
    free(text);
    return NULL;
  }
  return text;
}

static bool emit_body_function(BodyEmitter *b, const Node *loop, const char *fn) {
  Emitter *be = &b->e;
  Graph *body = loop->body;
  char *text = emit_body_calls(b, loop, body);
  if (!text)
    return false;
  FILE *s = be->st->sec[SEC_SETUP];
  fprintf(s, "/*\n * One iteration of Loop '%s' on %s: the body's nodes, then its\n"
             " * outputs back to its inputs for the next iteration; inside a CUDA graph\n"
             " * (handle non-zero), the WHILE node's condition last.\n */\n",
          comment_text(be, loop->name), be->stream);
  fprintf(s, "static int %s(%s_ctx *c, cudaGraphConditionalHandle handle)\n{\n", fn, be->prefix);
  fputs(text, s);
  free(text);
  Emitter w = *be;
  w.f = s;
  w.indent = 1;
  w.fail = "return -1";
  w.node = loop;
  emit(&w, "/* The condition and the carried values back to the body's inputs. */");
  emit(&w, "c->node = \"%s\";", emit_node_label(&w, loop));
  for (int k = 0; k < body->noutputs; k++) {
    const Tensor *from = body->outputs[k], *to = body->inputs[k + 1];
    emit_call(&w, LIB_CUDA, loop, "cudaMemcpyAsync(%s, %s, %lld, cudaMemcpyDeviceToDevice, %s)",
              buf(&w, to), buf(&w, from), (long long)bytes_of(to), w.stream);
  }
  emit_open(&w, "if (handle != 0) {");
  emit_condition(b->outer, s, 2, w.stream, loop, b->trips, buf(&w, body->inputs[0]),
                 buf(&w, body->inputs[1]), 1, "handle");
  emit_close(&w, "}");
  fprintf(s, "  return 0;\n}\n\n");
  return !w.failed;
}

void emit_conditional_open(Emitter *w, Emitter *e, const Node *n, const char *fn,
                           const char *comment) {
  *w = *e;
  w->f = e->st->sec[SEC_SETUP];
  w->indent = 0;
  w->fail = "return -1";
  w->node = n;
  emit(w, "/* %s */", comment);
  emit(w, "static int %s(%s_ctx *c)", fn, e->prefix);
  emit_open(w, "{");
  emit(w, "enum cudaStreamCaptureStatus status;");
  emit(w, "cudaGraph_t graph = NULL, body = NULL;");
  emit(w, "const cudaGraphNode_t *deps = NULL;");
  emit(w, "size_t ndeps = 0;");
  emit(w, "cudaGraphConditionalHandle handle;");
  emit(w, "struct cudaGraphNodeParams conditional;");
  emit(w, "cudaGraphNode_t node;");
  emit(w, "cudaError_t status_end;");
  emit(w, "int ok;");
  emit_call(w, LIB_CUDA, n, "cudaStreamGetCaptureInfo(%s, &status, NULL, &graph, NULL, NULL, NULL)",
            node_stream(e, n));
  emit_call(w, LIB_CUDA, n, "cudaGraphConditionalHandleCreate(&handle, graph, 0, 0)");
}

void emit_conditional_close(Emitter *w, const Node *n, const char *type, int size,
                            const char *const *body_calls) {
  const char *id = node_id(w, n), *stream = node_stream(w, n);
  emit(w, "/* The node after everything before it on %s, which goes on after it. */", stream);
  emit_call(w, LIB_CUDA, n, "cudaStreamGetCaptureInfo(%s, &status, NULL, &graph, &deps, NULL, &ndeps)",
            stream);
  emit(w, "memset(&conditional, 0, sizeof conditional);");
  emit(w, "conditional.type = cudaGraphNodeTypeConditional;");
  emit(w, "conditional.conditional.handle = handle;");
  emit(w, "conditional.conditional.type = %s;", type);
  emit(w, "conditional.conditional.size = %d;", size);
  emit_call(w, LIB_CUDA, n, "cudaGraphAddNode(&node, graph, deps, NULL, ndeps, &conditional)");
  emit_call(w, LIB_CUDA, n, "cudaStreamUpdateCaptureDependencies(%s, &node, NULL, 1, "
            "cudaStreamSetCaptureDependencies)", stream);
  for (int k = 0; k < size; k++) {
    emit(w, "/* Body %d, captured into the node's body graph on a stream of its own; its", k);
    emit(w, "   capture ended even after a failure, keeping the first message. */");
    emit_call(w, LIB_CUDA, n, "cudaStreamBeginCaptureToGraph(c->%s_capture, "
              "conditional.conditional.phGraph_out[%d], NULL, NULL, 0, "
              "cudaStreamCaptureModeThreadLocal)", id, k);
    emit(w, "c->%s_stream = c->%s_capture;", id, id);
    emit(w, "ok = %s == 0;", body_calls[k]);
    emit(w, "status_end = cudaStreamEndCapture(c->%s_capture, &body);", id);
    emit(w, "c->node = \"%s\";", emit_node_label(w, n));
    emit(w, "if (!ok || !cuda_ok(c, status_end, \"cudaStreamEndCapture\"))");
    emit(w, "  return -1;");
  }
  emit(w, "return 0;");
  emit_close(w, "}");
  emit_blank(w);
}

/* The WHILE node's function: the node added to the capture on n's stream,
   its body captured into the node's body graph. */
static void emit_while_function(Emitter *e, BodyEmitter *b, const Node *loop, const char *fn,
                                const char *body_fn) {
  Emitter w;
  emit_conditional_open(&w, e, loop, fn, emit_str(e, "Loop '%s' as a WHILE node of the CUDA graph "
                        "being captured on %s.", comment_text(e, loop->name), node_stream(e, loop)));
  body_begin(b);
  const char *counter = buf(&b->e, loop->body->inputs[0]), *cond = buf(&b->e, loop->body->inputs[1]);
  body_end(b);
  emit_condition(e, w.f, 1, node_stream(e, loop), loop, b->trips, counter, cond, 0, "handle");
  const char *call = emit_str(e, "%s(c, handle)", body_fn);
  emit_conditional_close(&w, loop, "cudaGraphCondTypeWhile", 1, &call);
}

/* The host's loop, outside a capture: the condition read back after each
   iteration. */
static void emit_host_function(Emitter *e, BodyEmitter *b, const Node *loop, const char *fn,
                               const char *body_fn) {
  const char *id = node_id(e, loop), *stream = node_stream(e, loop);
  Graph *body = loop->body;
  Emitter w = *e;
  w.f = e->st->sec[SEC_SETUP];
  w.indent = 0;
  w.fail = "return -1";
  w.node = loop;
  emit(&w, "/* Loop '%s' from the host: the condition read back after every iteration, a",
       comment_text(e, loop->name));
  emit(&w, "   synchronisation each (a CUDA graph runs it as a WHILE node instead). */");
  emit(&w, "static int %s(%s_ctx *c)", fn, e->prefix);
  emit_open(&w, "{");
  emit(&w, "long long trips = 0x7fffffffffffffffLL;");
  emit(&w, "unsigned char go = 0;");
  if (e->opt->cuda_graph) {
    emit(&w, "if (c->eager_run)");
    emit(&w, "  return 0;");
  }
  body_begin(b);
  const char *counter = buf(&b->e, body->inputs[0]), *cond = buf(&b->e, body->inputs[1]);
  body_end(b);
  if (loop->in[0])
    emit_call(&w, LIB_CUDA, loop, "cudaMemcpyAsync(&trips, %s, 8, cudaMemcpyDeviceToHost, %s)",
              buf(&w, loop->in[0]), stream);
  emit_call(&w, LIB_CUDA, loop, "cudaMemcpyAsync(&go, %s, 1, cudaMemcpyDeviceToHost, %s)", cond,
            stream);
  emit_call(&w, LIB_CUDA, loop, "cudaStreamSynchronize(%s)", stream);
  emit(&w, "c->%s_stream = %s;", id, stream);
  emit(&w, "c->%s_counter = 0;", id);
  emit_open(&w, "for (long long i = 0; i < trips && go; i++) {");
  emit(&w, "c->%s_counter = i;", id);
  emit_call(&w, LIB_CUDA, loop, "cudaMemcpyAsync(%s, &c->%s_counter, 8, cudaMemcpyHostToDevice, %s)",
            counter, id, stream);
  emit(&w, "if (%s(c, 0) != 0)", body_fn);
  emit(&w, "  return -1;");
  emit(&w, "c->node = \"%s\";", emit_node_label(&w, loop));
  emit_call(&w, LIB_CUDA, loop, "cudaMemcpyAsync(&go, %s, 1, cudaMemcpyDeviceToHost, %s)", cond,
            stream);
  emit_call(&w, LIB_CUDA, loop, "cudaStreamSynchronize(%s)", stream);
  emit(&w, "c->%s_counter = i + 1;", id);
  emit_close(&w, "}");
  if (body->loop_scans > 0) {
    emit(&w, "/* The iterations run, which the scan outputs' dims are. */");
    emit_call(&w, LIB_CUDA, loop, "cudaMemcpyAsync(%s, &c->%s_counter, 8, cudaMemcpyHostToDevice, %s)",
              counter, id, stream);
    emit_call(&w, LIB_CUDA, loop, "cudaStreamSynchronize(%s)", stream);
  }
  emit(&w, "return 0;");
  emit_close(&w, "}");
  emit_blank(&w);
}

/* ------------------------------------------------------ the node */

bool graph_has_loop(const Graph *g) {
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->body && !g->nodes[i]->dead)
      return true;
  return false;
}

static void loop_fields(Emitter *e, Node *n) {
  const char *id = node_id(e, n);
  emit(e, "cudaStream_t %s_stream;  /* where the body runs now */", id);
  emit(e, "cudaStream_t %s_capture; /* the stream its body is captured on */", id);
  emit(e, "long long %s_counter;    /* the host's iteration number, without a CUDA graph */", id);
}

void capture_stream_setup(Emitter *e, Node *n) {
  emit_call(e, LIB_CUDA, n, "cudaStreamCreateWithFlags(&c->%s_capture, cudaStreamNonBlocking)",
            node_id(e, n));
}

void capture_stream_teardown(Emitter *e, Node *n) {
  const char *id = node_id(e, n);
  emit(e, "if (c->%s_capture)", id);
  emit(e, "  cudaStreamDestroy(c->%s_capture);", id);
}

/* A scan output's dims in this run: as many rows as iterations ran, the
   iteration number's final value (one thread of opc_live_dims). */
static void emit_scan_rows(Emitter *e, Node *n, const Tensor *y, const char *counter) {
  Launch L = {.kernel = "opc_live_dims", .n = 1, .nx = 1};
  L.x[0] = counter;
  L.x_extent[0] = 1;
  L.x_bytes[0] = 8;
  L.y = live_dims(e, y);
  L.y_extent = y->rank;
  L.y_bytes = 8;
  L.i[0] = 0;
  L.i[1] = 0;
  L.i[2] = y->rank;
  for (int d = 0; d < y->rank; d++)
    L.i[3 + d] = y->dims[d];
  group_i(&L, 0, 3, "the iterations run, the rows' axis, the rank");
  group_i(&L, 3, y->rank, "the output's bounds");
  L.note = emit_str(e, "one thread: the dims of scan output '%s' in this run", y->name);
  emit_launch(e, n, &L);
}

void emit_after_run(Emitter *e) {
  for (int i = 0; i < e->st->nafter_run; i++)
    emit(e, "%s", e->st->after_run[i]);
}

/* After the run, on the host: the iterations run must fit the rows its
   scan outputs declare (the WHILE node runs on without the host, and the
   rows past the bound have nowhere to go). net_run_device() does not wait
   for its work, so it leaves this out. */
static void check_scan_rows(Emitter *e, Node *n, const char *counter) {
  int64_t rows = -1;
  const char *scan = NULL;
  for (int k = 0; k + 1 < n->nout; k++)
    if (n->out[k] && n->out[k]->bounded && (rows < 0 || n->out[k]->dims[0] < rows)) {
      rows = n->out[k]->dims[0];
      scan = n->out[k]->name;
    }
  if (!scan)
    return;
  add_after_run(e, emit_str(
      e, "{ /* Loop '%s': its iterations within the rows of '%s' */\n"
         "  long long ran = 0;\n"
         "  if (!cuda_ok(c, cudaMemcpy(&ran, %s, 8, cudaMemcpyDeviceToHost), \"cudaMemcpy\"))\n"
         "    return -1;\n"
         "  if (ran > %lldLL) {\n"
         "    snprintf(c->error, sizeof c->error, \"node '%s' (Loop): ran %%lld iterations, more "
         "than the %lld rows its scan output '%s' declares\", ran);\n"
         "    return -1;\n"
         "  }\n"
         "}",
      comment_text(e, n->name), comment_text(e, scan), counter, (long long)rows,
      emit_c_string(e, emit_format_text(e, n->name)), (long long)rows,
      emit_c_string(e, emit_format_text(e, scan))));
}

void add_after_run(Emitter *e, const char *code) {
  EmitState *st = e->st;
  const char **grown = arena_alloc(e->g->arena, sizeof(char *) * (size_t)(st->nafter_run + 1));
  if (st->nafter_run)
    memcpy(grown, st->after_run, sizeof(char *) * (size_t)st->nafter_run);
  grown[st->nafter_run++] = code;
  st->after_run = grown;
}

static void loop_run(Emitter *e, Node *n) {
  Graph *body = n->body;
  const char *id = node_id(e, n), *stream = node_stream(e, n);
  place_body(n, body);
  BodyEmitter b;
  const char *trips = n->in[0] ? buf(e, n->in[0]) : NULL; /* named before the body's */
  body_emitter(e, n, body, &b);
  b.trips = trips;
  const char *body_fn = emit_str(e, "%s_body", id), *while_fn = emit_str(e, "%s_while", id),
             *host_fn = emit_str(e, "%s_host", id);
  body_begin(&b);
  bool ok = emit_body_function(&b, n, body_fn);
  body_end(&b);
  body_take_back(e, &b.e);
  if (!ok || b.e.failed) {
    e->failed = true;
    return;
  }
  emit_while_function(e, &b, n, while_fn, body_fn);
  emit_host_function(e, &b, n, host_fn, body_fn);
  emit(e, "/* The initial values into the body's inputs, its iteration number 0. */");
  body_begin(&b);
  const char **inputs = arena_alloc(e->g->arena, sizeof(char *) * (size_t)(body->ninputs + 1));
  for (int i = 0; i < body->ninputs; i++)
    inputs[i] = buf(&b.e, body->inputs[i]);
  body_end(&b);
  emit_call(e, LIB_CUDA, n, "cudaMemsetAsync(%s, 0, 8, %s)", inputs[0], stream);
  if (n->in[1])
    emit_call(e, LIB_CUDA, n, "cudaMemcpyAsync(%s, %s, 1, cudaMemcpyDeviceToDevice, %s)",
              inputs[1], buf(e, n->in[1]), stream);
  else
    emit_call(e, LIB_CUDA, n, "cudaMemsetAsync(%s, 1, 1, %s)", inputs[1], stream);
  for (int i = 2; i < body->ninputs; i++)
    emit_call(e, LIB_CUDA, n, "cudaMemcpyAsync(%s, %s, %lld, cudaMemcpyDeviceToDevice, %s)",
              inputs[i], buf(e, n->in[i]), (long long)bytes_of(n->in[i]), stream);
  emit_open(e, "{");
  emit(e, "/* A WHILE node while the schedule is captured, else the host's loop. */");
  emit(e, "enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;");
  emit_call(e, LIB_CUDA, n, "cudaStreamIsCapturing(%s, &status)", stream);
  emit(e, "if ((status == cudaStreamCaptureStatusActive ? %s(c) : %s(c)) != 0)", while_fn, host_fn);
  emit(e, "  return -1;");
  emit_close(e, "}");
  emit(e, "/* The final carried values, in the body's inputs, to the Loop's outputs. */");
  for (int k = 0; k + 1 < n->nout; k++)
    if (n->out[k])
      emit_call(e, LIB_CUDA, n, "cudaMemcpyAsync(%s, %s, %lld, cudaMemcpyDeviceToDevice, %s)",
                buf(e, n->out[k]), inputs[2 + k], (long long)bytes_of(n->out[k]), stream);
  for (int k = 0; k + 1 < n->nout; k++)
    if (n->out[k] && n->out[k]->bounded)
      emit_scan_rows(e, n, n->out[k], inputs[0]);
  check_scan_rows(e, n, inputs[0]);
}

const OpEmitter loop_op = {.fields = loop_fields, .setup = capture_stream_setup, .run = loop_run,
                           .teardown = capture_stream_teardown};
