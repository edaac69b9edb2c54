/*
 * if.c - a run-time If (OP_IF, frontend/loop.c) in net.c.
 *
 * Each branch was compiled alone (passes/compile_bodies.c), and both lie
 * in the same region of the arena, the If's last output, the bodies'
 * memory: they never run together. Each branch has a function of its own:
 * the outer values it reads copied into its inputs, its nodes, and its
 * outputs copied into the If's. The If's run function then either
 *   - while the schedule is being captured into a CUDA graph, adds an IF
 *     node with two bodies to the capture (CUDA 12.8+): a kernel,
 *     opc_if_condition, sets the handle from the condition (only device
 *     code may), the node follows it, and each branch is captured into
 *     one of the node's body graphs on a stream of its own: body 0 runs
 *     when the handle is non-zero, body 1 when it is zero; or
 *   - outside a capture (--no-cuda-graph, net_profile), reads the
 *     condition back to the host, a synchronisation, and calls the
 *     function of the branch it picks.
 * Either way the branch not taken does not run: what it would compute on
 * this run's data (an index out of range, say) is never seen.
 *
 * A branch node whose code calls what CUDA refuses in a body (cuDNN,
 * cuBLAS, events, synchronisation, host copies) is refused here, naming
 * the If and the node; the importer keeps such Ifs as IfSelects where it
 * can tell (ops.def's columns, op_runs_in_body).
 */
#include <stdlib.h>
#include <string.h>

#include "emit.h"

static int64_t bytes_of(const Tensor *t) { return tensor_numel(t) * (int64_t)dtype_size(t->dtype); }

/* The C of the outer buffers an If reads and writes, named with the
   graph's emitter before a body's names are in use. */
typedef struct IfBuffers {
  const char *cond;
  const char **in;  /* the node's inputs, from 1 */
  const char **out; /* the If's outputs; NULL for one nobody reads */
} IfBuffers;

/*
 * The branch's outputs that it can write straight into the If's: each
 * output k whose buffer is its own (no view of another tensor, no input
 * or constant, not output k' < k too) moves to the If's output k, which
 * the graph's plan keeps apart from everything live across the If; its
 * views follow it. The others are copied (direct[k] false). Moved once
 * (`move`: the body was just placed), before any of its buffers is named.
 */
static void write_in_place(const Node *n, Graph *body, bool *direct, bool move) {
  for (int k = 0; k < body->noutputs; k++) {
    Tensor *t = body->outputs[k];
    const Tensor *to = n->out[k];
    direct[k] = to && !to->alias_of && !t->alias_of && !t->is_input && !tensor_is_const(t) &&
                !t->bounded && t->producer;
    for (int j = 0; direct[k] && j < k; j++)
      direct[k] = body->outputs[j] != t;
    if (direct[k] && move)
      t->offset = to->offset;
  }
}

/* A branch's function: its captured outer values into its inputs, its
   nodes, its outputs into the If's (those not written there, !direct[k]).
   `in` holds the outer buffers of its inputs. */
static bool emit_branch_function(BodyEmitter *b, const Node *n, Graph *body, const char *fn,
                                 const char *which, const char **in, const char **out,
                                 const bool *direct) {
  Emitter *be = &b->e;
  char *text = emit_body_calls(b, n, body);
  if (!text)
    return false;
  FILE *s = be->st->sec[SEC_SETUP];
  fprintf(s, "/*\n * The %s branch of If '%s' on %s: the outer values it reads into its\n"
             " * inputs, its nodes, its outputs into the If's.\n */\n",
          which, comment_text(be, n->name), be->stream);
  fprintf(s, "static int %s(%s_ctx *c)\n{\n", fn, be->prefix);
  Emitter w = *be;
  w.f = s;
  w.indent = 1;
  w.fail = "return -1";
  w.node = n;
  emit(&w, "c->node = \"%s\";", emit_node_label(&w, n));
  for (int i = 0; i < body->ninputs; i++)
    emit_call(&w, LIB_CUDA, n, "cudaMemcpyAsync(%s, %s, %lld, cudaMemcpyDeviceToDevice, %s)",
              buf(&w, body->inputs[i]), in[i], (long long)bytes_of(body->inputs[i]), w.stream);
  fputs(text, s);
  free(text);
  emit(&w, "/* The branch's outputs into the If's, where it did not write them there. */");
  emit(&w, "c->node = \"%s\";", emit_node_label(&w, n));
  for (int k = 0; k < body->noutputs; k++)
    if (out[k] && !direct[k])
      emit_call(&w, LIB_CUDA, n, "cudaMemcpyAsync(%s, %s, %lld, cudaMemcpyDeviceToDevice, %s)",
                out[k], buf(&w, body->outputs[k]), (long long)bytes_of(body->outputs[k]),
                w.stream);
  fprintf(s, "  return 0;\n}\n\n");
  return !w.failed;
}

/* opc_if_condition on `stream`: the handle set from the condition. */
static void emit_condition(Emitter *e, FILE *f, const Node *n, const char *stream,
                           const char *cond) {
  Emitter w = *e;
  w.f = f;
  w.indent = 1;
  w.stream = stream;
  w.fail = "return -1";
  Launch L = {.kernel = "opc_if_condition", .n = 1, .nx = 1, .rank = 1, .y = "NULL"};
  L.dims[0] = 1;
  L.xstride[0][0] = L.ystride[0] = 1;
  L.x[0] = cond;
  L.x_extent[0] = 1;
  L.x_bytes[0] = 1;
  L.iexpr[0] = "(long long)handle";
  group_i(&L, 0, 1, "the IF node's handle");
  L.note = "which body runs: the then branch on a true condition, the else branch on false";
  emit_launch(&w, n, &L);
  body_take_back(e, &w);
}

/* The IF node's function: the node added to the capture on n's stream,
   each branch captured into one of its body graphs: body 0 runs on a
   non-zero handle, body 1 on zero. */
static void emit_if_function(Emitter *e, const Node *n, const char *fn, const char *cond,
                             const char *then_fn, const char *else_fn) {
  Emitter w;
  emit_conditional_open(&w, e, n, fn, emit_str(e, "If '%s' as an IF node with two bodies of the "
                        "CUDA graph being captured on %s.", comment_text(e, n->name),
                        node_stream(e, n)));
  emit_condition(e, w.f, n, node_stream(e, n), cond);
  const char *calls[2] = {emit_str(e, "%s(c)", then_fn), emit_str(e, "%s(c)", else_fn)};
  emit_conditional_close(&w, n, "cudaGraphCondTypeIf", 2, calls);
}

/* Outside a capture: the condition read back to the host, which calls
   the branch's function. */
static void emit_host_function(Emitter *e, const Node *n, const char *fn, const char *cond,
                               const char *then_fn, const char *else_fn) {
  const char *id = node_id(e, n), *stream = node_stream(e, n);
  Emitter w = *e;
  w.f = e->st->sec[SEC_SETUP];
  w.indent = 0;
  w.fail = "return -1";
  w.node = n;
  emit(&w, "/* If '%s' from the host: the condition read back, a synchronisation (a CUDA",
       comment_text(e, n->name));
  emit(&w, "   graph runs it as an IF node instead), then the branch it picks. */");
  emit(&w, "static int %s(%s_ctx *c)", fn, e->prefix);
  emit_open(&w, "{");
  emit(&w, "unsigned char cond = 0;");
  if (e->opt->cuda_graph) {
    emit(&w, "if (c->eager_run)");
    emit(&w, "  return 0;");
  }
  emit_call(&w, LIB_CUDA, n, "cudaMemcpyAsync(&cond, %s, 1, cudaMemcpyDeviceToHost, %s)", cond,
            stream);
  emit_call(&w, LIB_CUDA, n, "cudaStreamSynchronize(%s)", stream);
  emit(&w, "c->%s_stream = %s;", id, stream);
  emit(&w, "return cond ? %s(c) : %s(c);", then_fn, else_fn);
  emit_close(&w, "}");
  emit_blank(&w);
}

/* ------------------------------------------------------ the node */

static void if_fields(Emitter *e, Node *n) {
  const char *id = node_id(e, n);
  emit(e, "cudaStream_t %s_stream;  /* where the branch runs now */", id);
  emit(e, "cudaStream_t %s_capture; /* the stream its branches are captured on */", id);
}

/* One branch: its function, named `fn`, from its own body emitter. */
static bool emit_branch(Emitter *e, Node *n, Graph *body, const char *fn, const char *which,
                        const char **in, const char **out) {
  BodyEmitter b;
  bool placed = body->placed;
  place_body(n, body);
  bool *direct = arena_alloc(e->g->arena, sizeof(bool) * (size_t)(body->noutputs + 1));
  memset(direct, 0, sizeof(bool) * (size_t)(body->noutputs + 1));
  write_in_place(n, body, direct, !placed);
  body_emitter(e, n, body, &b);
  body_begin(&b);
  bool ok = emit_branch_function(&b, n, body, fn, which, in, out, direct);
  body_end(&b);
  body_take_back(e, &b.e);
  return ok && !b.e.failed;
}

static void if_run(Emitter *e, Node *n) {
  const char *id = node_id(e, n), *stream = node_stream(e, n);
  int nout = n->nout - 1;
  Arena *a = e->g->arena;
  IfBuffers ob = {.cond = buf(e, n->in[0])};
  ob.in = arena_alloc(a, sizeof(char *) * (size_t)n->nin);
  ob.out = arena_alloc(a, sizeof(char *) * (size_t)(nout + 1));
  for (int i = 1; i < n->nin; i++)
    ob.in[i - 1] = buf(e, n->in[i]);
  for (int k = 0; k < nout; k++)
    ob.out[k] = n->out[k] ? buf(e, n->out[k]) : NULL;
  const char *then_fn = emit_str(e, "%s_then", id), *else_fn = emit_str(e, "%s_else", id),
             *if_fn = emit_str(e, "%s_if", id), *host_fn = emit_str(e, "%s_host", id);
  if (!emit_branch(e, n, n->body, then_fn, "then", ob.in, ob.out) ||
      !emit_branch(e, n, n->else_body, else_fn, "else", ob.in + n->body->ninputs, ob.out)) {
    e->failed = true;
    return;
  }
  emit_if_function(e, n, if_fn, ob.cond, then_fn, else_fn);
  emit_host_function(e, n, host_fn, ob.cond, then_fn, else_fn);
  emit_open(e, "{");
  emit(e, "/* An IF node while the schedule is captured, else the host's choice. */");
  emit(e, "enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;");
  emit_call(e, LIB_CUDA, n, "cudaStreamIsCapturing(%s, &status)", stream);
  emit(e, "if ((status == cudaStreamCaptureStatusActive ? %s(c) : %s(c)) != 0)", if_fn, host_fn);
  emit(e, "  return -1;");
  emit_close(e, "}");
}

const OpEmitter if_op = {.fields = if_fields, .setup = capture_stream_setup, .run = if_run,
                         .teardown = capture_stream_teardown};
