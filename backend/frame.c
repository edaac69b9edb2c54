/*
 * frame.c - the fixed frame of net.c around the nodes' code: the context
 * struct, create(), run() and run_device(), destroy() and error(), and the
 * functions that describe the inputs and outputs.
 */
#include <string.h>

#include "emit.h"

static void emit_fault_resets(Emitter *e);

static int64_t tensor_bytes(const Tensor *t) {
  return tensor_numel(t) * (int64_t)dtype_size(t->dtype);
}

/* The staging buffer holds floats when every input and output is float32,
   bytes otherwise; its offsets count these units. */
static bool staging_in_bytes(const Graph *g) {
  for (int i = 0; i < g->ninputs; i++)
    if (g->inputs[i]->dtype != DT_FLOAT)
      return true;
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i]->dtype != DT_FLOAT)
      return true;
  return false;
}

static const char *staging_type(const Graph *g) {
  return staging_in_bytes(g) ? "unsigned char" : "float";
}

/* A tensor's size in staging units; every offset stays 8-byte aligned. */
static int64_t staging_units(const Graph *g, const Tensor *t) {
  return staging_in_bytes(g) ? (tensor_bytes(t) + 7) / 8 * 8 : tensor_numel(t);
}

/* Pinned host memory for run()'s copies: every input, then every output. */
static int64_t staging_size(const Graph *g) {
  int64_t total = 0;
  for (int i = 0; i < g->ninputs; i++)
    total += staging_units(g, g->inputs[i]);
  for (int i = 0; i < g->noutputs; i++)
    total += staging_units(g, g->outputs[i]);
  return total;
}

/* Whether net_run copies the inputs and outputs through a pinned staging
   buffer: a GPU copies pageable memory synchronously, through a buffer of
   its driver's. The CPU program's runtime copies any host memory alike,
   so it copies straight from and to the caller's buffers, a copy (of a
   600 KB image, 3-4% of MobileNetV2 int8's run) less. */
static bool staged(const Emitter *e) {
  return !e->g->serve && staging_size(e->g) > 0 && e->opt->target != TARGET_CPU;
}

/* Where input or output i starts in the staging buffer, in its units. */
static int64_t staging_offset(const Graph *g, bool in, int i) {
  int64_t offset = 0;
  for (int k = 0; k < (in ? i : g->ninputs); k++)
    offset += staging_units(g, g->inputs[k]);
  for (int k = 0; !in && k < i; k++)
    offset += staging_units(g, g->outputs[k]);
  return offset;
}

/* The byte count of a copy of t, as C: "150528 * sizeof(float)". */
static const char *copy_size(Emitter *e, const Tensor *t) {
  return emit_str(e, "%lld * sizeof(%s)", (long long)tensor_numel(t), dtype_c_type(t->dtype));
}

/* The int64s that hold the dims of this run's bounded outputs, whose size
   the data decides (Tensor.bounded), in output order. */
static int live_output_dims(const Graph *g) {
  int count = 0;
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i]->bounded)
      count += g->outputs[i]->rank;
  return count;
}

/* Copies the dims of this run's bounded outputs into c->output_dims. */
static void emit_live_copies(Emitter *e, const char *stream) {
  Graph *g = e->g;
  for (int i = 0, at = 0; i < g->noutputs; i++) {
    Tensor *t = g->outputs[i];
    if (!t->bounded)
      continue;
    const char *call = emit_str(
        e, "cudaMemcpyAsync(c->output_dims + %d, (unsigned char *)c->arena + %lld, %d * sizeof(long long), "
           "cudaMemcpyDeviceToHost, %s)",
        at, (long long)t->live_offset, t->rank, stream);
    emit(e, "if (!cuda_ok(c, %s, \"cudaMemcpyAsync of the dims of output '%s'\"))", call,
         emit_c_string(e, t->name));
    emit(e, "  return -1;");
    at += t->rank;
  }
}

/* ------------------------------------------------------------- struct */

void emit_struct(Emitter *e) {
  EmitState *st = e->st;
  int ns = e->g->sched.nstreams, ne = e->g->sched.nevents;
  emit_open(e, "struct %s_ctx {", e->prefix);
  emit(e, "cudaStream_t stream[%d];", ns);
  if (ne > 0)
    emit(e, "cudaEvent_t event[%d]; /* the schedule's cross-stream dependencies */", ne);
  emit(e, "cudaEvent_t fork, join[%d]; /* order the streams after and before the caller's */", ns);
  if (!e->g->serve)
    emit(e, "cudaEvent_t done; /* the end of %s_run_device()'s work on the caller's stream */",
         e->prefix);
  if (staged(e))
    emit(e, "%s *staging; /* pinned host copies of the inputs, then the outputs, for %s_run() */",
         staging_type(e->g), e->prefix);
  if (!e->g->serve && run_check_staging_bytes(e->g) > 0)
    emit(e, "unsigned char *check_staging; /* pinned: the shape inputs %s_run_device() checks */",
         e->prefix);
  if (live_output_dims(e->g) > 0)
    emit(e, "long long output_dims[%d]; /* the dims of the last run's outputs that the data sizes */",
         live_output_dims(e->g));
  if (used(e)->cudnn)
    emit(e, "cudnnHandle_t cudnn[%d];", ns);
  if (used(e)->cublas) {
    emit(e, "cublasHandle_t cublas[%d];", ns);
    emit(e, "void *cublas_workspace[%d];", ns);
  }
  if (used(e)->workspace) {
    emit(e, "void *workspace[%d];", ns);
    emit(e, "size_t workspace_bytes[%d];", ns);
  }
  if (e->g->serve)
    emit(e, "float *weights[MODEL_COUNT]; /* each model's constants, from its weights file */");
  else if (st->nweights)
    emit(e, "float *weights; /* every constant, from %s */", base_name(e, e->opt->weights_path));
  emit(e, "float *arena; /* every activation: %lld bytes */", (long long)e->g->arena_bytes);
  if (graph_has_loop(e->g))
    emit(e, "int eager_run; /* create()'s run before the capture: Loops left out */");
  emit_device_fields(e);
  emit_cpu_fields(e);
  if (e->g->serve) {
    emit(e, "void *io[IO_COUNT]; /* every copy's inputs, then outputs (io_info) */");
    emit(e, "unsigned char active[INSTANCE_COUNT]; /* the copies enqueue() issues */");
  }
  emit_blank(e);
  emit(e, "/* Activations: the model's tensors in the arena. */");
  fputs(st->text[SEC_BUFFERS], e->f);
  if (st->len[SEC_CONSTS]) {
    emit_blank(e);
    emit(e, "/* Constants in the weights. */");
    fputs(st->text[SEC_CONSTS], e->f);
  }
  if (st->len[SEC_FIELDS]) {
    emit_blank(e);
    emit(e, "/* What each node set up in create(): descriptors, algorithms, scratch. */");
    fputs(st->text[SEC_FIELDS], e->f);
  }
  e->node = NULL;
  emit_kernel_fields(e);
  if (e->opt->cuda_graph && e->g->serve)
    emit(e, "cudaGraphExec_t graph[COMBO_COUNT]; /* per combination of copies, captured in create() */");
  else if (e->opt->cuda_graph)
    emit(e, "cudaGraphExec_t graph; /* the schedule, captured once in create() */");
  if (e->g->serve) {
    emit(e, "struct serve *serve; /* the queues and threads of net_submit() */");
    emit(e, "int device; /* the CUDA device of create(), for the threads */");
  }
  emit(e, "const char *node; /* the node whose code runs, for messages */");
  emit(e, "cudaEvent_t *trace; /* while tracing (--trace): start and end of each node */");
  emit(e, "char error[%d];", OPC_ERROR_SIZE);
  emit_close(e, "};");
}

/* ------------------------------------------------------------- create */

void emit_create(Emitter *e) {
  EmitState *st = e->st;
  const char *p = e->prefix;
  int ns = e->g->sched.nstreams, ne = e->g->sched.nevents;
  e->fail = "goto fail";
  emit(e, "int %s_create(%s_ctx **ctx, const char *%s)", p, p,
       e->g->serve ? "weights_dir" : "weights_path");
  emit_open(e, "{");
  emit(e, "%s_ctx *c = calloc(1, sizeof *c);", p);
  emit(e, "*ctx = c;");
  emit(e, "if (!c)");
  emit(e, "  return -1;");
  emit_device_count_check(e);
  emit(e, "for (int s = 0; s < %d; s++) {", ns);
  e->indent++;
  if (emit_multi_gpu(e))
    emit_set_device(e, "stream_device[s]");
  emit_call(e, LIB_CUDA, NULL, "cudaStreamCreateWithFlags(&c->stream[s], cudaStreamNonBlocking)");
  emit_call(e, LIB_CUDA, NULL, "cudaEventCreateWithFlags(&c->join[s], cudaEventDisableTiming)");
  if (used(e)->cudnn) {
    emit_call(e, LIB_CUDNN, NULL, "cudnnCreate(&c->cudnn[s])");
    emit_call(e, LIB_CUDNN, NULL, "cudnnSetStream(c->cudnn[s], c->stream[s])");
  }
  if (used(e)->cublas) {
    emit_call(e, LIB_CUBLAS, NULL, "cublasCreate(&c->cublas[s])");
    emit_call(e, LIB_CUBLAS, NULL, "cublasSetStream(c->cublas[s], c->stream[s])");
    emit_call(e, LIB_CUBLAS, NULL, "cublasSetMathMode(c->cublas[s], %s)",
              e->opt->tf32 ? "CUBLAS_TF32_TENSOR_OP_MATH" : "CUBLAS_DEFAULT_MATH");
    emit(e, "/* cuBLAS's own workspace, so that it allocates nothing while captured. */");
    emit_call(e, LIB_CUDA, NULL, "cudaMalloc(&c->cublas_workspace[s], cublas_workspace_bytes)");
    emit_call(e, LIB_CUBLAS, NULL,
              "cublasSetWorkspace(c->cublas[s], c->cublas_workspace[s], cublas_workspace_bytes)");
  }
  e->indent--;
  emit(e, "}");
  if (ne > 0) {
    if (emit_multi_gpu(e)) {
      emit_open(e, "for (int k = 0; k < %d; k++) {", ne);
      emit_set_device(e, "event_device[k]");
      emit_call(e, LIB_CUDA, NULL, "cudaEventCreateWithFlags(&c->event[k], cudaEventDisableTiming)");
      emit_close(e, "}");
      emit_set_device(e, "0");
    } else {
      emit(e, "for (int k = 0; k < %d; k++)", ne);
      e->indent++;
      emit_call(e, LIB_CUDA, NULL, "cudaEventCreateWithFlags(&c->event[k], cudaEventDisableTiming)");
      e->indent--;
    }
  } else if (emit_multi_gpu(e)) {
    emit_set_device(e, "0");
  }
  emit_call(e, LIB_CUDA, NULL, "cudaEventCreateWithFlags(&c->fork, cudaEventDisableTiming)");
  if (!e->g->serve)
    emit_call(e, LIB_CUDA, NULL, "cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming)");
  if (staged(e))
    emit_call(e, LIB_CUDA, NULL, "cudaMallocHost((void **)&c->staging, %lld * sizeof(%s))",
              (long long)staging_size(e->g), staging_type(e->g));
  if (!e->g->serve && run_check_staging_bytes(e->g) > 0)
    emit_call(e, LIB_CUDA, NULL, "cudaMallocHost((void **)&c->check_staging, %lld)",
              (long long)run_check_staging_bytes(e->g));
  if (e->g->serve) {
    emit_serve_weights(e);
  } else if (st->nweights) {
    if (e->opt->embed_weights) {
      emit(e, "if ((weights_path ? load_weights(c, weights_path) : upload_linked_weights(c)) != 0)");
    } else {
      emit(e, "if (load_weights(c, weights_path ? weights_path : default_weights_path) != 0)");
    }
    emit(e, "  goto fail;");
  } else {
    emit(e, "(void)weights_path; /* this model has no constants */");
  }
  emit_call(e, LIB_CUDA, NULL, "cudaMalloc((void **)&c->arena, %lld)", (long long)e->g->arena_bytes);
  emit_device_memory(e);
  emit_cpu_memory(e);
  emit_blank(e);
  emit(e, "/* Buffers: activations in the arena, constants in the weights. */");
  fputs(st->text[SEC_BIND], e->f);
  if (e->g->serve)
    emit_serve_bind_io(e);
  if (st->len[SEC_CREATE]) {
    emit_blank(e);
    emit(e, "/* Descriptors, algorithms and workspace sizes of each node. */");
    fputs(st->text[SEC_CREATE], e->f);
    emit(e, "c->node = NULL;");
  }
  if (used(e)->workspace) {
    emit(e, "for (int s = 0; s < %d; s++)", ns);
    emit(e, "  if (c->workspace_bytes[s] > 0 &&");
    if (emit_multi_gpu(e)) {
      emit(e, "      (!cuda_ok(c, cudaSetDevice(c->gpu[stream_device[s]]), \"cudaSetDevice\") ||");
      emit(e, "       !cuda_ok(c, cudaMalloc(&c->workspace[s], c->workspace_bytes[s]), \"cudaMalloc\")))");
    } else {
      emit(e, "      !cuda_ok(c, cudaMalloc(&c->workspace[s], c->workspace_bytes[s]), \"cudaMalloc\"))");
    }
    emit(e, "    goto fail;");
  }
  emit_cpu_workspace(e);
  if (e->nkernels > 0) {
    emit_blank(e);
    emit_kernel_setup(e);
  }
  if (st->len[SEC_PREPARE]) {
    emit_blank(e);
    emit(e, "/* The form of each fused convolution that cuDNN accepts. */");
    fputs(st->text[SEC_PREPARE], e->f);
    emit(e, "c->node = NULL;");
  }
  if (emit_multi_gpu(e))
    emit_set_device(e, "0");
  if (e->g->serve) {
    emit_serve_create(e);
  } else if (e->opt->cuda_graph) {
    emit_blank(e);
    emit(e, "/* One eager run first: cuDNN and cuBLAS initialise lazily on first use, which");
    emit(e, "   a capture does not allow, and a library error then names its node. */");
    if (emit_has_cpu(e)) {
      emit(e, "if (enqueue(c, c->stream[0]) != 0 ||");
      emit(e, "    !cuda_ok(c, cudaStreamSynchronize(c->stream[0]), \"cudaStreamSynchronize\"))");
      emit(e, "  goto fail;");
      emit_cpu_check(e, "goto fail");
      emit(e, "if (capture(c) != 0)");
      emit(e, "  goto fail;");
    } else {
      if (graph_has_loop(e->g)) {
        emit(e, "/* A run-time Loop's body calls no library: the eager run leaves it out, as");
        emit(e, "   its trip count and condition are no input's yet (backend/loop.c). */");
        emit(e, "c->eager_run = 1;");
      }
      emit(e, "if (enqueue(c, c->stream[0]) != 0 ||");
      emit(e, "    !cuda_ok(c, cudaStreamSynchronize(c->stream[0]), \"cudaStreamSynchronize\") ||");
      emit(e, "    capture(c) != 0)");
      emit(e, "  goto fail;");
      if (graph_has_loop(e->g))
        emit(e, "c->eager_run = 0;");
    }
    emit_fault_resets(e);
  }
  emit(e, "return 0;");
  e->indent--;
  emit(e, "fail:");
  e->indent++;
  emit(e, "return -1;");
  emit_close(e, "}");
  emit_blank(e);
}

/* ---------------------------------------------------------- run, destroy */

/* Copies between the caller's buffers (or the staging buffer) and the arena. */
/* The faults create()'s eager run may have recorded, from inputs no
   caller gave, zeroed (EmitState.faults). */
static void emit_fault_resets(Emitter *e) {
  EmitState *st = e->st;
  if (!st->nfaults)
    return;
  emit(e, "/* The eager run's inputs were no caller's: its faults are none. */");
  for (int i = 0; i < st->nfaults; i++)
    emit_call(e, LIB_CUDA, NULL, "cudaMemset(%s, 0, 5 * sizeof(long long))", st->faults[i]);
  emit_call(e, LIB_CUDA, NULL, "cudaDeviceSynchronize()");
}

static void emit_copies(Emitter *e, bool in, bool device, const char *stream) {
  Graph *g = e->g;
  int count = in ? g->ninputs : g->noutputs;
  const char *kind = device ? "cudaMemcpyDeviceToDevice"
                            : in ? "cudaMemcpyHostToDevice" : "cudaMemcpyDeviceToHost";
  for (int i = 0; i < count; i++) {
    Tensor *t = in ? g->inputs[i] : g->outputs[i];
    if (tensor_numel(t) == 0) /* nothing to copy */
      continue;
    const char *where = emit_str(e, "cudaMemcpyAsync of %s '%s'", in ? "input" : "output",
                                 emit_c_string(e, t->name));
    const char *host = device || !staged(e)
                           ? emit_str(e, "%s[%d]", in ? "inputs" : "outputs", i)
                           : emit_str(e, "c->staging + %lld", (long long)staging_offset(g, in, i));
    const char *call = in ? emit_str(e, "cudaMemcpyAsync(%s, %s, %s, %s, %s)", buf(e, t), host,
                                     copy_size(e, t), kind, stream)
                          : emit_str(e, "cudaMemcpyAsync(%s, %s, %s, %s, %s)", host, buf(e, t),
                                     copy_size(e, t), kind, stream);
    used(e)->lib[LIB_CUDA] = true;
    emit(e, "if (!cuda_ok(c, %s, \"%s\"))", call, where);
    emit(e, "  return -1;");
  }
}

/* Copies between the caller's host buffers and the pinned staging buffer. */
static void emit_staging(Emitter *e, bool in) {
  Graph *g = e->g;
  int count = in ? g->ninputs : g->noutputs;
  if (!staged(e))
    return;
  for (int i = 0; i < count; i++) {
    Tensor *t = in ? g->inputs[i] : g->outputs[i];
    long long offset = (long long)staging_offset(g, in, i);
    if (tensor_numel(t) == 0)
      continue;
    if (in)
      emit(e, "memcpy(c->staging + %lld, inputs[%d], %s);", offset, i, copy_size(e, t));
    else
      emit(e, "memcpy(outputs[%d], c->staging + %lld, %s);", i, offset, copy_size(e, t));
  }
}

/* One run of the work on `stream`: the captured graph, or the calls. */
static void emit_run_work(Emitter *e, const char *stream) {
  if (e->opt->cuda_graph)
    emit(e, "if (!cuda_ok(c, cudaGraphLaunch(c->graph, %s), \"cudaGraphLaunch\"))", stream);
  else
    emit(e, "if (enqueue(c, %s) != 0)", stream);
  emit(e, "  return -1;");
}

/* net_output_shape: an output's dims in the last run, which differ from
   its declared ones (the bounds) where the data decides its size. */
void emit_output_shape(Emitter *e) {
  const char *p = e->prefix;
  Graph *g = e->g;
  emit(e, "int %s_output_shape(const %s_ctx *c, int i, long long *dims)", p, p);
  emit_open(e, "{");
  if (live_output_dims(g) == 0)
    emit(e, "(void)c;");
  for (int i = 0, at = 0; i < g->noutputs; i++) {
    Tensor *t = g->outputs[i];
    if (!t->bounded)
      continue;
    emit(e, "if (i == %d) { /* %s */", i, emit_c_string(e, t->name));
    emit(e, "  memcpy(dims, c->output_dims + %d, %d * sizeof(long long));", at, t->rank);
    emit(e, "  return %d;", t->rank);
    emit(e, "}");
    at += t->rank;
  }
  emit(e, "int rank = %s_output_rank(i);", p);
  emit(e, "if (rank > 0)");
  emit(e, "  memcpy(dims, %s_output_dims(i), (size_t)rank * sizeof(long long));", p);
  emit(e, "return rank;");
  emit_close(e, "}");
  emit_blank(e);
}

void emit_run(Emitter *e) {
  const char *p = e->prefix;
  Graph *g = e->g;
  int64_t in_size = staging_offset(g, false, 0), out_size = staging_size(g) - in_size;
  emit_run_check_code(e);
  emit(e, "int %s_run(%s_ctx *c, const void *const *inputs, void *const *outputs)", p, p);
  emit_open(e, "{");
  if (in_size == 0)
    emit(e, "(void)inputs;");
  if (out_size == 0)
    emit(e, "(void)outputs;");
  e->fail = "return -1";
  if (emit_multi_gpu(e))
    emit_set_device(e, "0");
  emit_run_checks(e);
  if (staged(e))
    emit(e, "/* Through pinned memory, so that the copies are real asynchronous transfers. */");
  emit_staging(e, true);
  emit_copies(e, true, false, "c->stream[0]");
  emit_run_work(e, "c->stream[0]");
  emit_copies(e, false, false, "c->stream[0]");
  emit_live_copies(e, "c->stream[0]");
  emit(e, "if (!cuda_ok(c, cudaStreamSynchronize(c->stream[0]), \"cudaStreamSynchronize\"))");
  emit(e, "  return -1;");
  emit_cpu_check(e, "return -1");
  emit_after_run(e);
  emit_staging(e, false);
  emit(e, "return 0;");
  emit_close(e, "}");
  emit_blank(e);

  emit(e, "int %s_run_device(%s_ctx *c, const void *const *inputs, void *const *outputs, cudaStream_t stream)",
       p, p);
  emit_open(e, "{");
  if (in_size == 0)
    emit(e, "(void)inputs;");
  if (out_size == 0)
    emit(e, "(void)outputs;");
  e->fail = "return -1";
  if (emit_multi_gpu(e)) {
    emit(e, "/* `stream` is on GPU 0, with the inputs and outputs. */");
    emit_set_device(e, "0");
  }
  if (emit_has_cpu(e))
    emit(e, "/* A CPU node of an earlier run, on the caller's stream, may have failed. */");
  emit_cpu_check(e, "return -1");
  emit_run_device_checks(e);
  emit_copies(e, true, true, "stream");
  emit_run_work(e, "stream");
  emit_copies(e, false, true, "stream");
  emit_live_copies(e, "stream");
  emit(e, "/* destroy() waits for this before it frees what the work uses. */");
  emit(e, "return cuda_ok(c, cudaEventRecord(c->done, stream), \"cudaEventRecord\") ? 0 : -1;");
  emit_close(e, "}");
  emit_blank(e);
}

void emit_destroy(Emitter *e) {
  EmitState *st = e->st;
  const char *p = e->prefix;
  int ns = e->g->sched.nstreams, ne = e->g->sched.nevents;
  emit(e, "void %s_destroy(%s_ctx *c)", p, p);
  emit_open(e, "{");
  emit(e, "if (!c)");
  emit(e, "  return;");
  if (e->g->serve) {
    emit(e, "serve_stop(c); /* every submitted request finishes first */");
  } else {
    emit(e, "/* Work may still be queued: on the caller's stream by %s_run_device(), or", p);
    emit(e, "   on ours when a run failed half-way. */");
    emit(e, "if (c->done)");
    emit(e, "  cudaEventSynchronize(c->done);");
  }
  emit(e, "for (int s = 0; s < %d; s++)", ns);
  emit(e, "  if (c->stream[s])");
  emit(e, "    cudaStreamSynchronize(c->stream[s]);");
  emit(e, "/* cudnnDestroy and cublasDestroy synchronise the whole device: not while");
  emit(e, "   another context captures (see opc_capture_lock). */");
  emit(e, "pthread_mutex_lock(&opc_capture_lock);");
  if (e->opt->cuda_graph && e->g->serve) {
    emit(e, "for (int k = 0; k < COMBO_COUNT; k++)");
    emit(e, "  if (c->graph[k])");
    emit(e, "    cudaGraphExecDestroy(c->graph[k]);");
  } else if (e->opt->cuda_graph) {
    emit(e, "if (c->graph)");
    emit(e, "  cudaGraphExecDestroy(c->graph);");
  }
  if (e->nkernels > 0)
    emit_kernel_teardown(e);
  fputs(st->text[SEC_TEARDOWN], e->f);
  emit(e, "cudaFree(c->arena);");
  emit_device_teardown(e);
  emit_cpu_teardown(e);
  if (e->g->serve) {
    emit(e, "for (int m = 0; m < MODEL_COUNT; m++)");
    emit(e, "  cudaFree(c->weights[m]);");
  } else if (st->nweights) {
    emit(e, "cudaFree(c->weights);");
  }
  if (ne > 0) {
    emit(e, "for (int k = 0; k < %d; k++)", ne);
    emit(e, "  if (c->event[k])");
    emit(e, "    cudaEventDestroy(c->event[k]);");
  }
  emit(e, "if (c->fork)");
  emit(e, "  cudaEventDestroy(c->fork);");
  if (!e->g->serve) {
    emit(e, "if (c->done)");
    emit(e, "  cudaEventDestroy(c->done);");
  }
  if (staged(e))
    emit(e, "cudaFreeHost(c->staging);");
  if (!e->g->serve && run_check_staging_bytes(e->g) > 0)
    emit(e, "cudaFreeHost(c->check_staging);");
  emit_open(e, "for (int s = 0; s < %d; s++) {", ns);
  if (emit_multi_gpu(e))
    emit(e, "cudaSetDevice(c->gpu[stream_device[s]]); /* the handles' own GPU */");
  if (used(e)->workspace)
    emit(e, "cudaFree(c->workspace[s]);");
  if (used(e)->cublas) {
    emit(e, "if (c->cublas[s])");
    emit(e, "  cublasDestroy(c->cublas[s]);");
    emit(e, "cudaFree(c->cublas_workspace[s]);");
  }
  if (used(e)->cudnn) {
    emit(e, "if (c->cudnn[s])");
    emit(e, "  cudnnDestroy(c->cudnn[s]);");
  }
  emit(e, "if (c->join[s])");
  emit(e, "  cudaEventDestroy(c->join[s]);");
  emit(e, "if (c->stream[s])");
  emit(e, "  cudaStreamDestroy(c->stream[s]);");
  emit_close(e, "}");
  if (emit_multi_gpu(e))
    emit(e, "cudaSetDevice(c->gpu[0]); /* as every call of a program on several GPUs leaves it */");
  emit(e, "pthread_mutex_unlock(&opc_capture_lock);");
  emit(e, "free(c);");
  emit_close(e, "}");
  emit_blank(e);
  emit(e, "const char *%s_error(const %s_ctx *c)", p, p);
  emit_open(e, "{");
  emit(e, "if (!c)");
  emit(e, "  return \"out of memory\";");
  emit(e, "return c->error[0] ? c->error : \"no error\";");
  emit_close(e, "}");
  emit_blank(e);
}

/* The metadata functions for the inputs or the outputs. */
void emit_metadata(Emitter *e, bool inputs) {
  const char *p = e->prefix;
  const char *what = inputs ? "input" : "output";
  int count = inputs ? e->g->ninputs : e->g->noutputs;
  Tensor **list = inputs ? e->g->inputs : e->g->outputs;
  if (count > 0) {
    emit_open(e, "static const struct {");
    emit(e, "const char *name;");
    emit(e, "const char *type; /* ONNX's name of the element type */");
    emit(e, "int element_size; /* in bytes */");
    emit(e, "int rank;");
    emit(e, "long long dims[8];");
    emit_close(e, "} %s_info[%d] = {", what, count);
    e->indent++;
    for (int i = 0; i < count; i++) {
      Tensor *t = list[i];
      char dims[256] = "";
      for (int d = 0; d < t->rank; d++)
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", d ? ", " : "",
                 (long long)t->dims[d]);
      emit(e, "{\"%s\", \"%s\", %d, %d, {%s}},", emit_c_string(e, t->name),
           dtype_onnx_name(t->dtype), (int)dtype_size(t->dtype), t->rank, dims);
    }
    e->indent--;
    emit(e, "};");
    emit_blank(e);
  }
  emit(e, "int %s_num_%ss(void) { return %d; }", p, what, count);
  if (count > 0) {
    emit(e, "const char *%s_%s_name(int i) { return i >= 0 && i < %d ? %s_info[i].name : NULL; }", p,
         what, count, what);
    emit(e, "const char *%s_%s_type(int i) { return i >= 0 && i < %d ? %s_info[i].type : NULL; }", p,
         what, count, what);
    emit(e, "int %s_%s_element_size(int i) { return i >= 0 && i < %d ? %s_info[i].element_size : -1; }",
         p, what, count, what);
    emit(e, "int %s_%s_rank(int i) { return i >= 0 && i < %d ? %s_info[i].rank : -1; }", p, what,
         count, what);
    emit(e, "const long long *%s_%s_dims(int i) { return i >= 0 && i < %d ? %s_info[i].dims : NULL; }",
         p, what, count, what);
  } else {
    emit(e, "const char *%s_%s_name(int i) { (void)i; return NULL; }", p, what);
    emit(e, "const char *%s_%s_type(int i) { (void)i; return NULL; }", p, what);
    emit(e, "int %s_%s_element_size(int i) { (void)i; return -1; }", p, what);
    emit(e, "int %s_%s_rank(int i) { (void)i; return -1; }", p, what);
    emit(e, "const long long *%s_%s_dims(int i) { (void)i; return NULL; }", p, what);
  }
  emit_blank(e);
}
