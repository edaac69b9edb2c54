/*
 * program.c - emit_program(): prints every node into the parts of net.c,
 * then joins them with the fixed frame (context struct, create, enqueue,
 * run, destroy, main) into net.c, and writes net.h and net.weights.
 *
 * Everything is written to "<name>.tmp" files first and renamed at the end,
 * so that a failure leaves no partial output behind.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emit_internal.h"
#include "main_template.h"
#include "profile_template.h"

/* ------------------------------------------------------------ helpers */

static const char *base_name(Emitter *e, const char *path) {
  const char *slash = strrchr(path, '/');
  return arena_strdup(e->g->arena, slash ? slash + 1 : path);
}

static const char *node_comment(Emitter *e, const Node *n) {
  char *text = emit_str(e, "%s (%s)", comment_text(e, n->name), op_name(n->op));
  for (int i = 0; i < n->nfused; i++)
    text = emit_str(e, "%s%s%s", text, i ? ", " : ", fused with ", comment_text(e, n->fused[i]));
  return text;
}

static int nstreams(const Graph *g) {
  return g->sched.order && g->sched.nstreams > 0 ? g->sched.nstreams : 1;
}

static int nevents(const Graph *g) { return g->sched.order ? g->sched.nevents : 0; }

/* The nodes in issue order. */
static Node **issue_order(Graph *g, int *count) {
  if (g->sched.order) {
    *count = g->sched.norder;
    return g->sched.order;
  }
  *count = g->nnodes;
  return g->nodes;
}

/* Nodes whose code is nothing: views and constants. */
static bool issues_nothing(const Node *n) { return n->is_view || n->op == OP_CONSTANT; }

/* Pinned host memory for run()'s copies: every input, then every output. */
static int64_t staging_floats(const Graph *g) {
  int64_t total = 0;
  for (int i = 0; i < g->ninputs; i++)
    total += tensor_numel(g->inputs[i]);
  for (int i = 0; i < g->noutputs; i++)
    total += tensor_numel(g->outputs[i]);
  return total;
}

/* Where input or output i starts in the staging buffer, in floats. */
static int64_t staging_offset(const Graph *g, bool in, int i) {
  int64_t offset = 0;
  for (int k = 0; k < (in ? i : g->ninputs); k++)
    offset += tensor_numel(g->inputs[k]);
  for (int k = 0; !in && k < i; k++)
    offset += tensor_numel(g->outputs[k]);
  return offset;
}


/* -------------------------------------------------------- memory plan */

/* Until the memory planner has run, every storage tensor gets its own slot. */
static void plan_memory_simply(Graph *g) {
  int64_t top = 0;
  for (int i = 0; i < g->ntensors; i++) {
    Tensor *t = g->tensors[i];
    if (t->alias_of || tensor_is_const(t))
      continue;
    t->offset = top;
    int64_t bytes = tensor_numel(t) * 4;
    top += (bytes + 255) / 256 * 256;
  }
  g->arena_bytes = top > 0 ? top : 256;
}

static bool check_graph(Emitter *e) {
  Graph *g = e->g;
  bool ok = true;
  for (int i = 0; i < g->ninputs; i++)
    if (g->inputs[i]->dtype != DT_FLOAT) {
      ir_error(g, NULL, "input '%s' is %s; opc programs take float32 inputs only",
               g->inputs[i]->name, dtype_name(g->inputs[i]->dtype));
      ok = false;
    }
  for (int i = 0; i < g->noutputs; i++) {
    Tensor *t = g->outputs[i];
    if (t->dtype != DT_FLOAT) {
      ir_error(g, NULL, "output '%s' is %s; opc programs return float32 outputs only", t->name,
               dtype_name(t->dtype));
      ok = false;
    }
    int64_t expect = 1;
    /* An empty output has no element to place: any strides will do. */
    for (int d = t->rank - 1; d >= 0 && tensor_numel(t) > 0; d--) {
      if (t->dims[d] > 1 && t->strides[d] != expect) {
        ir_error(g, t->producer, "output '%s' is a strided view; it must be contiguous", t->name);
        ok = false;
        break;
      }
      expect *= t->dims[d];
    }
  }
  for (int i = 0; i < g->ntensors; i++)
    if (g->tensors[i]->id != i) {
      ir_error(g, NULL, "internal error: tensor '%s' has id %d at index %d", g->tensors[i]->name,
               g->tensors[i]->id, i);
      return false;
    }
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->id != i) {
      ir_error(g, g->nodes[i], "internal error: node id %d at index %d", g->nodes[i]->id, i);
      return false;
    }
  return ok;
}

/* ------------------------------------------------------ node printing */

static void emit_waits_and_record(Emitter *e, const Node *n, bool waits) {
  const char *stream = node_stream(e, n);
  if (waits) {
    for (int i = 0; i < n->nwaits; i++)
      emit_call(e, LIB_CUDA, n, "cudaStreamWaitEvent(%s, c->event[%d], 0)", stream, n->waits[i]);
  } else if (n->record_event >= 0) {
    emit_call(e, LIB_CUDA, n, "cudaEventRecord(c->event[%d], %s)", n->record_event, stream);
  }
}

static void emit_node_setup(Emitter *e, const OpEmitter *op, Node *n) {
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
  e->fail = "return -1";
  op->setup(e, n);
  fclose(f);
  if (len > 0) {
    const char *fn = emit_str(e, "setup_%s", node_id(e, n));
    FILE *s = e->st->sec[SEC_SETUP];
    fprintf(s, "/* %s */\nstatic int %s(%s_ctx *c)\n{\n  c->node = \"%s\";\n%s  return 0;\n}\n\n",
            node_comment(e, n), fn, e->prefix, emit_node_label(e, n), text);
    fprintf(e->st->sec[SEC_CREATE], "  if (%s(c) != 0)\n    goto fail;\n", fn);
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
    if (n->nwaits || n->record_event >= 0) {
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
  const OpEmitter *op = node_emitter(e, n);
  if (!op) {
    ir_error(e->g, n, "no code generator for this operator");
    e->failed = true;
    return;
  }
  if (op->fields) {
    emit_fields_header(e);
    e->f = st->sec[SEC_FIELDS];
    e->indent = 1;
    op->fields(e, n);
  }
  emit_node_setup(e, op, n);

  const char *run = emit_node_run(e, op, n);
  e->f = st->sec[SEC_ENQUEUE];
  e->indent = 1;
  e->fail = "goto fail";
  int k = issued_index(e, n);
  emit_blank(e);
  emit(e, "/* %s */", comment);
  emit_waits_and_record(e, n, true);
  emit(e, "if (!begin_node(c, %d, %s) || %s(c) != 0)", k, node_stream(e, n), run);
  emit(e, "  %s;", emit_fail(e));
  emit_waits_and_record(e, n, false);
  emit(e, "if (!end_node(c, %d, %s))", k, node_stream(e, n));
  emit(e, "  %s;", emit_fail(e));

  if (op->teardown) {
    e->f = st->sec[SEC_TEARDOWN];
    e->indent = 1;
    op->teardown(e, n);
  }
  e->node = NULL;
}

static bool inputs_ready(const Node *n, const bool *done) {
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] && n->in[i]->producer && !done[n->in[i]->producer->id])
      return false;
  return true;
}

/* Views and constants are not in the schedule's order: their comments go
   where their inputs become available. */
static void emit_ready_views(Emitter *e, bool *done) {
  Graph *g = e->g;
  bool progress = true;
  while (progress) {
    progress = false;
    for (int i = 0; i < g->nnodes; i++) {
      Node *n = g->nodes[i];
      if (done[i] || n->dead || !issues_nothing(n) || !inputs_ready(n, done))
        continue;
      emit_node(e, n);
      done[i] = true;
      progress = true;
    }
  }
}

static void emit_nodes(Emitter *e) {
  Graph *g = e->g;
  int count;
  Node **order = issue_order(g, &count);
  bool *done = calloc((size_t)g->nnodes + 1, sizeof(bool));
  if (!done) {
    e->failed = true;
    return;
  }
  emit_ready_views(e, done);
  for (int i = 0; i < count && !e->failed; i++) {
    Node *n = order[i];
    if (n->dead || (n->id >= 0 && n->id < g->nnodes && done[n->id]))
      continue;
    emit_node(e, n);
    if (n->id >= 0 && n->id < g->nnodes)
      done[n->id] = true;
    emit_ready_views(e, done);
  }
  free(done);
}

/* -------------------------------------------------------- file frame */

/* Prints a fixed text, replacing "net_" at the start of an identifier
   by the prefix (the templates are written for the default prefix). */
static void put_template(FILE *f, const char *prefix, const char *const *lines) {
  for (int i = 0; lines[i]; i++) {
    const char *s = lines[i];
    while (*s) {
      const char *hit = strstr(s, "net_");
      if (!hit) {
        fputs(s, f);
        break;
      }
      bool word_start = hit == lines[i] || !((hit[-1] >= 'a' && hit[-1] <= 'z') ||
                                             (hit[-1] >= 'A' && hit[-1] <= 'Z') ||
                                             (hit[-1] >= '0' && hit[-1] <= '9') || hit[-1] == '_');
      fwrite(s, 1, (size_t)(hit - s), f);
      fputs(word_start ? prefix : "net", f);
      fputc('_', f);
      s = hit + 4;
    }
    fputc('\n', f);
  }
}

static void emit_file_comment(Emitter *e, const char *what) {
  emit(e, "/*");
  emit(e, " * %s - generated by opc %s from %s; do not edit.", what, OPC_VERSION,
       comment_text(e, e->g->path));
  if (what == e->opt->c_path || strcmp(what, base_name(e, e->opt->c_path)) == 0) {
    int count;
    issue_order(e->g, &count);
    emit(e, " *");
    emit(e, " * %d operations on %d stream%s (%s schedule), %d cross-stream event%s;", count,
         nstreams(e->g), nstreams(e->g) == 1 ? "" : "s",
         e->g->sched.scheduler ? e->g->sched.scheduler : "sequential", nevents(e->g),
         nevents(e->g) == 1 ? "" : "s");
    emit(e, " * %lld bytes of activations, %lld bytes of weights in %s.",
         (long long)e->g->arena_bytes, (long long)e->st->weight_floats * 4,
         e->opt->embed_weights ? "the program" : base_name(e, e->opt->weights_path));
    emit(e, " * Build: cc -O2 %s -I<CUDA>/include -lcudnn -lcublas -lcudart -lcuda -lnvrtc -lm,",
         base_name(e, e->opt->c_path));
    emit(e, " * or with `opc --cflags/--libs --target cpu` for opc's CPU runtime.");
    emit(e, " * -DOPC_NO_MAIN leaves out main() to link the model into another program.");
  } else {
    emit(e, " * The interface of the compiled model; see %s for the program.",
         comment_text(e, base_name(e, e->opt->c_path)));
  }
  emit(e, " */");
}

static const char *absolute_path(Emitter *e, const char *path) {
  if (path[0] == '/')
    return path;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd))
    return path;
  return emit_str(e, "%s/%s", cwd, path);
}

static void emit_includes(Emitter *e) {
  emit(e, "#include <errno.h>");
  emit(e, "#include <math.h>");
  emit(e, "#include <stdint.h>");
  emit(e, "#include <stdio.h>");
  emit(e, "#include <stdlib.h>");
  emit(e, "#include <string.h>");
  emit_blank(e);
  emit(e, "#include <cuda.h>");
  emit(e, "#include <cuda_runtime.h>");
  emit(e, "#include <cudnn.h>");
  emit(e, "#include <cublas_v2.h>");
  emit(e, "#include <nvrtc.h>");
  emit(e, "#include <nvtx3/nvToolsExt.h>");
  emit_blank(e);
  emit(e, "#include \"%s\"", base_name(e, e->opt->h_path));
}

static void emit_struct(Emitter *e) {
  EmitState *st = e->st;
  int ns = nstreams(e->g), ne = nevents(e->g);
  emit_open(e, "struct %s_ctx {", e->prefix);
  emit(e, "cudaStream_t stream[%d];", ns);
  if (ne > 0)
    emit(e, "cudaEvent_t event[%d]; /* the schedule's cross-stream dependencies */", ne);
  emit(e, "cudaEvent_t fork, join[%d]; /* order the streams after and before the caller's */", ns);
  emit(e, "cudaEvent_t done; /* the end of %s_run_device()'s work on the caller's stream */", e->prefix);
  if (staging_floats(e->g) > 0)
    emit(e, "float *staging; /* pinned host copies of the inputs, then the outputs, for %s_run() */",
         e->prefix);
  if (st->uses_cudnn)
    emit(e, "cudnnHandle_t cudnn[%d];", ns);
  if (st->uses_cublas) {
    emit(e, "cublasHandle_t cublas[%d];", ns);
    emit(e, "void *cublas_workspace[%d];", ns);
  }
  if (st->uses_workspace) {
    emit(e, "void *workspace[%d];", ns);
    emit(e, "size_t workspace_bytes[%d];", ns);
  }
  if (st->nweights)
    emit(e, "float *weights; /* every constant, from %s */", base_name(e, e->opt->weights_path));
  emit(e, "float *arena; /* every activation: %lld bytes */", (long long)e->g->arena_bytes);
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
  if (e->opt->cuda_graph)
    emit(e, "cudaGraphExec_t graph; /* the schedule, captured once in create() */");
  emit(e, "const char *node; /* the node whose code runs, for messages */");
  emit(e, "cudaEvent_t *trace; /* while tracing (--trace): start and end of each node */");
  emit(e, "char error[%d];", OPC_ERROR_SIZE);
  emit_close(e, "};");
}

static const char *const lib_status_type[LIB_COUNT] = {
    [LIB_CUDA] = "cudaError_t", [LIB_CUDNN] = "cudnnStatus_t", [LIB_CUBLAS] = "cublasStatus_t",
    [LIB_DRIVER] = "CUresult", [LIB_NVRTC] = "nvrtcResult",
};
static const char *const lib_success[LIB_COUNT] = {
    [LIB_CUDA] = "cudaSuccess", [LIB_CUDNN] = "CUDNN_STATUS_SUCCESS",
    [LIB_CUBLAS] = "CUBLAS_STATUS_SUCCESS", [LIB_DRIVER] = "CUDA_SUCCESS",
    [LIB_NVRTC] = "NVRTC_SUCCESS",
};
static const char *const lib_message[LIB_COUNT] = {
    [LIB_CUDA] = "cudaGetErrorString(status)", [LIB_CUDNN] = "cudnnGetErrorString(status)",
    [LIB_CUBLAS] = "cublasGetStatusString(status)", [LIB_DRIVER] = "message",
    [LIB_NVRTC] = "nvrtcGetErrorString(status)",
};
static const char *const lib_helper[LIB_COUNT] = {
    [LIB_CUDA] = "cuda_ok", [LIB_CUDNN] = "cudnn_ok", [LIB_CUBLAS] = "cublas_ok",
    [LIB_DRIVER] = "cu_ok", [LIB_NVRTC] = "nvrtc_ok",
};

/*
 * pick_conv_algo / pick_deconv_algo: the first algorithm of cuDNN's
 * heuristics that fits the workspace limit, and its workspace raising the
 * stream's.
 */
static void emit_pick_algo(Emitter *e, const char *name, const char *dir, const char *perf,
                           const char *args, const char *params) {
  emit(e, "/* The first algorithm of cuDNN's heuristics that fits the workspace limit;");
  emit(e, "   raises *workspace to what it needs. */");
  emit(e, "static int pick_%s_algo(%s_ctx *c, cudnnHandle_t h,", name, e->prefix);
  emit(e, "                          %s,", params);
  emit(e, "                          cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y,");
  emit(e, "                          cudnnConvolution%sAlgo_t *algo, size_t *workspace)", perf);
  emit_open(e, "{");
  emit(e, "cudnnConvolution%sAlgoPerf_t perf[8];", perf);
  emit(e, "int count = 0;");
  emit(e, "size_t bytes = 0;");
  if (strcmp(name, "conv") == 0) {
    emit(e, "/* OPC_CONV_SEARCH=1 in the environment times every algorithm instead. */");
    emit(e, "const char *search = getenv(\"OPC_CONV_SEARCH\");");
    emit(e, "if (search && strcmp(search, \"1\") == 0) {");
    emit(e, "  if (!cudnn_ok(c, cudnnFindConvolutionForwardAlgorithm(h, %s, 8, &count, perf),", args);
    emit(e, "                \"cudnnFindConvolutionForwardAlgorithm\"))");
    emit(e, "    return 0;");
    emit(e, "} else if (!cudnn_ok(c, cudnnGetConvolutionForwardAlgorithm_v7(h, %s, 8, &count, perf),", args);
    emit(e, "                       \"cudnnGetConvolutionForwardAlgorithm_v7\")) {");
    emit(e, "  return 0;");
    emit(e, "}");
  } else {
    emit(e, "if (!cudnn_ok(c, cudnnGetConvolution%sAlgorithm_v7(h, %s, 8, &count, perf),", dir, args);
    emit(e, "              \"cudnnGetConvolution%sAlgorithm_v7\"))", dir);
    emit(e, "  return 0;");
  }
  emit_open(e, "for (int i = 0; i < count; i++) {");
  emit(e, "if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > workspace_limit)");
  emit(e, "  continue;");
  if (!e->opt->tf32) {
    emit(e, "if (perf[i].mathType != CUDNN_FMA_MATH) /* strict float32: no TF32 tensor cores */");
    emit(e, "  continue;");
  }
  emit(e, "*algo = perf[i].algo;");
  emit(e, "/* The algorithm runs in the math type it was listed with. */");
  emit(e, "if (!cudnn_ok(c, cudnnSetConvolutionMathType(conv, perf[i].mathType), \"cudnnSetConvolutionMathType\"))");
  emit(e, "  return 0;");
  emit(e, "if (!cudnn_ok(c, cudnnGetConvolution%sWorkspaceSize(h, %s, *algo, &bytes),", dir, args);
  emit(e, "              \"cudnnGetConvolution%sWorkspaceSize\"))", dir);
  emit(e, "  return 0;");
  emit(e, "if (bytes > *workspace)");
  emit(e, "  *workspace = bytes;");
  emit(e, "return 1;");
  emit_close(e, "}");
  emit(e, "report(c, \"pick_%s_algo\", \"no algorithm fits in the workspace limit\");", name);
  emit(e, "return 0;");
  emit_close(e, "}");
  emit_blank(e);
}

/*
 * A convolution with fused bias and relu runs as one cuDNN call only where
 * cuDNN accepts it: create() tries the forms in order (choose_form).
 */
static void emit_form_helpers(Emitter *e) {
  const char *p = e->prefix;
  emit(e, "/* How a convolution with fused bias and relu runs, chosen in create(). */");
  emit(e, "enum { FORM_FUSED, FORM_FUSED_PRECOMP, FORM_SEPARATE };");
  emit(e, "static const char *const form_name[] = {");
  emit(e, "  \"fused, its own algorithm\",");
  emit(e, "  \"fused, IMPLICIT_PRECOMP_GEMM\",");
  emit(e, "  \"separate convolution, bias and activation\",");
  emit(e, "};");
  emit_blank(e);
  emit(e, "/* Raises *workspace to what the fused call's fallback algorithm needs, where");
  emit(e, "   cuDNN offers it for this problem. */");
  emit(e, "static int precomp_workspace(%s_ctx *c, cudnnHandle_t h, cudnnTensorDescriptor_t x,", p);
  emit(e, "                             cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,");
  emit(e, "                             cudnnTensorDescriptor_t y, size_t *workspace)");
  emit_open(e, "{");
  emit(e, "size_t bytes = 0;");
  emit(e, "cudnnStatus_t status = cudnnGetConvolutionForwardWorkspaceSize(");
  emit(e, "    h, x, w, conv, y, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, &bytes);");
  emit(e, "if (status == CUDNN_STATUS_NOT_SUPPORTED)");
  emit(e, "  return 1;");
  emit(e, "if (!cudnn_ok(c, status, \"cudnnGetConvolutionForwardWorkspaceSize\"))");
  emit(e, "  return 0;");
  emit(e, "if (bytes > *workspace)");
  emit(e, "  *workspace = bytes;");
  emit(e, "return 1;");
  emit_close(e, "}");
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * The first form cuDNN accepts, tried for real on the node's stream: the");
  emit(e, " * fused call with the chosen algorithm, the fused call with");
  emit(e, " * IMPLICIT_PRECOMP_GEMM, else separate calls. cuDNN answers NOT_SUPPORTED");
  emit(e, " * for some algorithms, shapes and layouts of the fused call.");
  emit(e, " */");
  emit(e, "static int choose_form(%s_ctx *c, cudnnStatus_t (*fused)(%s_ctx *, cudnnConvolutionFwdAlgo_t),", p, p);
  emit(e, "                       cudnnConvolutionFwdAlgo_t algo, cudaStream_t stream, int *form)");
  emit_open(e, "{");
  emit(e, "cudnnStatus_t status = fused(c, algo);");
  emit(e, "*form = FORM_FUSED;");
  emit(e, "if (status == CUDNN_STATUS_NOT_SUPPORTED && algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) {");
  emit(e, "  status = fused(c, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);");
  emit(e, "  *form = FORM_FUSED_PRECOMP;");
  emit(e, "}");
  emit(e, "if (status == CUDNN_STATUS_NOT_SUPPORTED)");
  emit(e, "  *form = FORM_SEPARATE;");
  emit(e, "else if (!cudnn_ok(c, status, \"cudnnConvolutionBiasActivationForward\"))");
  emit(e, "  return 0;");
  emit(e, "/* A try wrote the node's output: finish it before another stream's try. */");
  emit(e, "return cuda_ok(c, cudaStreamSynchronize(stream), \"cudaStreamSynchronize\");");
  emit_close(e, "}");
  emit_blank(e);
}

static void emit_check_helpers(Emitter *e) {
  emit(e, "/* Keeps \"node 'NAME' (Op): CALL: MESSAGE\" for %s_error(). */", e->prefix);
  emit(e, "static void report(%s_ctx *c, const char *call, const char *message)", e->prefix);
  emit_open(e, "{");
  emit(e, "if (c->node)");
  emit(e, "  snprintf(c->error, sizeof c->error, \"%%s: %%s: %%s\", c->node, call, message);");
  emit(e, "else");
  emit(e, "  snprintf(c->error, sizeof c->error, \"%%s: %%s\", call, message);");
  emit_close(e, "}");
  emit_blank(e);
  emit(e, "/* Each library's checking helper: reports a failure and returns 0. */");
  for (int lib = 0; lib < LIB_COUNT; lib++) {
    if (!e->st->lib_used[lib])
      continue;
    emit(e, "static int %s(%s_ctx *c, %s status, const char *call)", lib_helper[lib], e->prefix,
         lib_status_type[lib]);
    emit_open(e, "{");
    if (lib == LIB_DRIVER)
      emit(e, "const char *message = \"unknown driver error\";");
    emit(e, "if (status == %s)", lib_success[lib]);
    emit(e, "  return 1;");
    if (lib == LIB_DRIVER)
      emit(e, "cuGetErrorString(status, &message);");
    emit(e, "report(c, call, %s);", lib_message[lib]);
    emit(e, "return 0;");
    emit_close(e, "}");
    emit_blank(e);
  }
  if (e->st->uses_make_tensor) {
    emit(e, "/* A float tensor descriptor with explicit dims and strides (4 to 8 dims). */");
    emit(e, "static int make_tensor(%s_ctx *c, cudnnTensorDescriptor_t *desc, int rank, const int *dims,",
         e->prefix);
    emit(e, "                       const int *strides)");
    emit_open(e, "{");
    emit(e, "return cudnn_ok(c, cudnnCreateTensorDescriptor(desc), \"cudnnCreateTensorDescriptor\") &&");
    emit(e, "       cudnn_ok(c, cudnnSetTensorNdDescriptor(*desc, CUDNN_DATA_FLOAT, rank, dims, strides),");
    emit(e, "                \"cudnnSetTensorNdDescriptor\");");
    emit_close(e, "}");
    emit_blank(e);
  }
  if (e->st->uses_cublas) {
    emit(e, "/* cuBLAS's workspace per stream (its recommendation for Hopper). */");
    emit(e, "static const size_t cublas_workspace_bytes = (size_t)32 << 20;");
    emit_blank(e);
  }
  if (e->st->uses_pick_conv_algo || e->st->uses_pick_deconv_algo) {
    emit(e, "/* The most workspace a convolution may ask for. */");
    emit(e, "static const size_t workspace_limit = (size_t)256 << 20;");
    emit_blank(e);
  }
  if (e->st->uses_conv_forms)
    emit_form_helpers(e);
  if (e->st->uses_pick_conv_algo)
    emit_pick_algo(e, "conv", "Forward", "Fwd", "x, w, conv, y", "cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w");
  if (e->st->uses_pick_deconv_algo)
    emit_pick_algo(e, "deconv", "BackwardData", "BwdData", "w, x, conv, y",
                   "cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t x");
}

/* ------------------------------------------------------------- weights */

static void emit_weights_loader(Emitter *e) {
  EmitState *st = e->st;
  const char *p = e->prefix;
  int64_t bytes = st->weight_floats * 4;
  emit(e, "/*");
  emit(e, " * %s: a 64-byte header (\"OPCW\", then little-endian u32 version 1,",
       base_name(e, e->opt->weights_path));
  emit(e, " * u32 array count, u64 data bytes), the data (float32, every array 64-byte");
  emit(e, " * aligned), then the FNV-1a 64 hash of the data (u64).");
  emit(e, " */");
  emit(e, "enum { WEIGHTS_HEADER = 64, WEIGHTS_COUNT = %d };", st->nweights);
  emit(e, "static const uint64_t weights_bytes = %lldULL;", (long long)bytes);
  if (e->opt->embed_weights) {
    const char *abs = absolute_path(e, e->opt->weights_path);
    emit_blank(e);
    emit(e, "/* The weights are linked into the program from %s. */", comment_text(e, abs));
    emit(e, "__asm__(\".section .rodata\\n\"");
    emit(e, "        \".balign 64\\n\"");
    emit(e, "        \".globl %s_weights_start\\n\"", p);
    emit(e, "        \"%s_weights_start:\\n\"", p);
    emit(e, "        \".incbin \\\"%s\\\"\\n\"", emit_c_string(e, emit_c_string(e, abs)));
    emit(e, "        \".globl %s_weights_end\\n\"", p);
    emit(e, "        \"%s_weights_end:\\n\"", p);
    emit(e, "        \".previous\\n\");");
    emit(e, "extern const unsigned char %s_weights_start[], %s_weights_end[];", p, p);
  } else {
    emit(e, "static const char default_weights_path[] = \"%s\";",
         emit_c_string(e, absolute_path(e, e->opt->weights_path)));
  }
  emit_blank(e);
  emit(e, "static uint64_t read_u64(const unsigned char *p)");
  emit_open(e, "{");
  emit(e, "uint64_t v = 0;");
  emit(e, "for (int i = 7; i >= 0; i--)");
  emit(e, "  v = v << 8 | p[i];");
  emit(e, "return v;");
  emit_close(e, "}");
  emit_blank(e);
  emit(e, "/* Checks a weights image (in pinned memory) and copies its data to the device. */");
  emit(e, "static int upload_weights(%s_ctx *c, const unsigned char *image, size_t size, const char *what)", p);
  emit_open(e, "{");
  emit(e, "uint64_t hash = 14695981039346656037ULL;");
  emit(e, "if (size != WEIGHTS_HEADER + weights_bytes + 8 || memcmp(image, \"OPCW\", 4) != 0 ||");
  emit(e, "    read_u64(image + 4) != (1 | (uint64_t)WEIGHTS_COUNT << 32) ||");
  emit(e, "    read_u64(image + 16) != weights_bytes)");
  emit_open(e, "{");
  emit(e, "snprintf(c->error, sizeof c->error, \"%%s: not the weights of this program\", what);");
  emit(e, "return -1;");
  emit_close(e, "}");
  emit(e, "for (uint64_t i = 0; i < weights_bytes; i++)");
  emit(e, "  hash = (hash ^ image[WEIGHTS_HEADER + i]) * 1099511628211ULL;");
  emit(e, "if (hash != read_u64(image + WEIGHTS_HEADER + weights_bytes))");
  emit_open(e, "{");
  emit(e, "snprintf(c->error, sizeof c->error, \"%%s: checksum mismatch, the file is damaged\", what);");
  emit(e, "return -1;");
  emit_close(e, "}");
  e->fail = "return -1";
  emit_call(e, LIB_CUDA, NULL, "cudaMalloc((void **)&c->weights, weights_bytes)");
  emit(e, "/* The image is pinned memory, so this is a real asynchronous transfer; it");
  emit(e, "   finishes before returning, since the caller frees the image next. */");
  emit_call(e, LIB_CUDA, NULL,
            "cudaMemcpyAsync(c->weights, image + WEIGHTS_HEADER, weights_bytes, cudaMemcpyHostToDevice, c->stream[0])");
  emit_call(e, LIB_CUDA, NULL, "cudaStreamSynchronize(c->stream[0])");
  emit(e, "return 0;");
  emit_close(e, "}");
  emit_blank(e);
  emit(e, "/* Reads the weights file straight into pinned memory. */");
  emit(e, "static int load_weights(%s_ctx *c, const char *path)", p);
  emit_open(e, "{");
  emit(e, "FILE *f = fopen(path, \"rb\");");
  emit(e, "unsigned char *image = NULL;");
  emit(e, "long size = -1;");
  emit(e, "int status = -1;");
  emit(e, "if (!f || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)");
  emit(e, "  snprintf(c->error, sizeof c->error, \"cannot read weights file %%s: %%s\", path, strerror(errno));");
  emit(e, "else if (cuda_ok(c, cudaMallocHost((void **)&image, size > 0 ? (size_t)size : 1), \"cudaMallocHost\")) {");
  emit(e, "  if (fread(image, 1, (size_t)size, f) == (size_t)size)");
  emit(e, "    status = upload_weights(c, image, (size_t)size, path);");
  emit(e, "  else");
  emit(e, "    snprintf(c->error, sizeof c->error, \"cannot read weights file %%s: %%s\", path, strerror(errno));");
  emit(e, "}");
  emit(e, "cudaFreeHost(image);");
  emit(e, "if (f)");
  emit(e, "  fclose(f);");
  emit(e, "return status;");
  emit_close(e, "}");
  emit_blank(e);
  if (e->opt->embed_weights) {
    emit(e, "/* The linked-in weights, through pinned memory like a file's. */");
    emit(e, "static int upload_linked_weights(%s_ctx *c)", p);
    emit_open(e, "{");
    emit(e, "size_t size = (size_t)(%s_weights_end - %s_weights_start);", p, p);
    emit(e, "unsigned char *image = NULL;");
    emit(e, "int status = -1;");
    emit(e, "if (cuda_ok(c, cudaMallocHost((void **)&image, size > 0 ? size : 1), \"cudaMallocHost\")) {");
    emit(e, "  memcpy(image, %s_weights_start, size);", p);
    emit(e, "  status = upload_weights(c, image, size, \"linked-in weights\");");
    emit(e, "}");
    emit(e, "cudaFreeHost(image);");
    emit(e, "return status;");
    emit_close(e, "}");
    emit_blank(e);
  }
}

/* ------------------------------------------------------------ profile */

/* main's --trace: one run with every node timestamped, as a Chrome trace. */
static void emit_trace_run(Emitter *e) {
  const char *p = e->prefix;
  emit(e, "/*");
  emit(e, " * --trace: one run issued directly (not from the CUDA graph) with every node");
  emit(e, " * timestamped on its stream, written as a Chrome trace (chrome://tracing,");
  emit(e, " * ui.perfetto.dev): one row per stream, microseconds from the start.");
  emit(e, " */");
  emit(e, "static int trace_run(%s_ctx *c, const char *path)", p);
  emit_open(e, "{");
  if (e->st->nissued == 0) {
    emit(e, "FILE *f = fopen(path, \"w\");");
    emit(e, "if (!f || fputs(\"{\\\"traceEvents\\\": []}\\n\", f) < 0 || fclose(f) != 0) {");
    emit(e, "  snprintf(c->error, sizeof c->error, \"cannot write %%s: %%s\", path, strerror(errno));");
    emit(e, "  return -1;");
    emit(e, "}");
    emit(e, "return 0;");
    emit_close(e, "}");
    emit_blank(e);
    return;
  }
  emit(e, "cudaEvent_t events[2 * NODE_COUNT + 1]; /* start and end of each node, then the origin */");
  emit(e, "cudaEvent_t origin;");
  emit(e, "int created = 0, status = -1;");
  emit(e, "FILE *f = NULL;");
  emit(e, "for (; created < 2 * NODE_COUNT + 1; created++)");
  emit(e, "  if (!cuda_ok(c, cudaEventCreateWithFlags(&events[created], cudaEventDefault),");
  emit(e, "               \"cudaEventCreateWithFlags\"))");
  emit(e, "    goto done;");
  emit(e, "origin = events[2 * NODE_COUNT];");
  emit(e, "c->trace = events;");
  emit(e, "if (!cuda_ok(c, cudaEventRecord(origin, c->stream[0]), \"cudaEventRecord\") ||");
  emit(e, "    enqueue(c, c->stream[0]) != 0 ||");
  emit(e, "    !cuda_ok(c, cudaStreamSynchronize(c->stream[0]), \"cudaStreamSynchronize\"))");
  emit(e, "  goto done;");
  emit(e, "if (!(f = fopen(path, \"w\"))) {");
  emit(e, "  snprintf(c->error, sizeof c->error, \"cannot write %%s: %%s\", path, strerror(errno));");
  emit(e, "  goto done;");
  emit(e, "}");
  emit(e, "fputs(\"{\\\"traceEvents\\\": [\\n\", f);");
  emit_open(e, "for (int k = 0; k < NODE_COUNT; k++) {");
  emit(e, "float start, end;");
  emit(e, "if (!cuda_ok(c, cudaEventElapsedTime(&start, origin, events[2 * k]), \"cudaEventElapsedTime\") ||");
  emit(e, "    !cuda_ok(c, cudaEventElapsedTime(&end, origin, events[2 * k + 1]), \"cudaEventElapsedTime\"))");
  emit(e, "  goto done;");
  emit(e, "fputs(\"  {\\\"name\\\": \\\"\", f);");
  emit(e, "for (const char *s = node_info[k].name; *s; s++)");
  emit(e, "  fprintf(f, *s == '\"' || *s == '\\\\' ? \"\\\\%%c\" : (unsigned char)*s < 32 ? \"?\" : \"%%c\", *s);");
  emit(e, "fprintf(f, \"\\\", \\\"cat\\\": \\\"%%s\\\", \\\"ph\\\": \\\"X\\\", \\\"pid\\\": 0, \\\"tid\\\": %%d, \\\"ts\\\": %%.3f, \\\"dur\\\": %%.3f}%%s\\n\",");
  emit(e, "        node_info[k].op, node_info[k].stream, start * 1000.0, (end - start) * 1000.0,");
  emit(e, "        k + 1 < NODE_COUNT ? \",\" : \"\");");
  emit_close(e, "}");
  emit(e, "status = fputs(\"]}\\n\", f) < 0 ? -1 : 0;");
  e->indent--;
  emit(e, "done:");
  e->indent++;
  emit(e, "c->trace = NULL;");
  emit(e, "if (f && fclose(f) != 0 && status == 0) {");
  emit(e, "  snprintf(c->error, sizeof c->error, \"cannot write %%s: %%s\", path, strerror(errno));");
  emit(e, "  status = -1;");
  emit(e, "}");
  emit(e, "for (int i = 0; i < created; i++)");
  emit(e, "  cudaEventDestroy(events[i]);");
  emit(e, "return status;");
  emit_close(e, "}");
  emit_blank(e);
}

/* main's --verbose: each issued node's stream, and the form create() chose. */
static void emit_describe(Emitter *e) {
  emit(e, "/* --verbose: each node's stream, and the form of calls create() chose for it. */");
  emit(e, "static void describe(const %s_ctx *c)", e->prefix);
  emit_open(e, "{");
  if (e->st->nissued == 0) {
    emit(e, "(void)c; /* this model issues no work */");
    emit_close(e, "}");
    emit_blank(e);
    return;
  }
  emit_open(e, "for (int k = 0; k < NODE_COUNT; k++) {");
  emit(e, "const char *form = node_form(c, k);");
  emit(e, "fprintf(stderr, \"net: %%s: stream %%d%%s%%s\\n\", node_info[k].label, node_info[k].stream,");
  emit(e, "        form ? \", \" : \"\", form ? form : \"\");");
  emit_close(e, "}");
  emit_close(e, "}");
  emit_blank(e);
}

/* ------------------------------------------------------------ enqueue */

/* Numbers as the rows of an array initialiser. */
static void emit_int_rows(Emitter *e, const int *v, int count) {
  e->indent++;
  for (int i = 0; i < count; i += 16) {
    char line[256] = "";
    for (int j = i; j < count && j < i + 16; j++)
      snprintf(line + strlen(line), sizeof line - strlen(line), "%d,%s", v[j], j + 1 < i + 16 ? " " : "");
    emit(e, "%s", line);
  }
  e->indent--;
}

/* The issued nodes' index by node id, -1 for the others. */
static int *issued_by_id(Emitter *e) {
  EmitState *st = e->st;
  int *k = arena_alloc(e->g->arena, sizeof(int) * ((size_t)e->g->nnodes + 1));
  for (int i = 0; i < e->g->nnodes; i++)
    k[i] = -1;
  for (int i = 0; i < st->nissued; i++)
    if (st->issued[i]->id >= 0 && st->issued[i]->id < e->g->nnodes)
      k[st->issued[i]->id] = i;
  return k;
}

/* The stage of an issued node; without a schedule everything is stage 0. */
static int node_stage(const Graph *g, const Node *n) {
  return g->sched.nstages > 0 && n->stage >= 0 && n->stage < g->sched.nstages ? n->stage : 0;
}

/* The node that records event `ev`, or NULL. */
static const Node *event_recorder(const Graph *g, int ev) {
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->record_event == ev && !g->nodes[i]->dead)
      return g->nodes[i];
  return NULL;
}

/* The profile's key of a unit (passes/cost_db.c), as a C string body. */
static const char *unit_key(Emitter *e, const Node *n) {
  int len = unit_cost_key(n, NULL, 0);
  char *key = arena_alloc(e->g->arena, (size_t)len + 1);
  unit_cost_key(n, key, (size_t)len + 1);
  return emit_c_string(e, key);
}

/*
 * The stages for net_profile(): each stage's issued nodes in issue order,
 * and of each node's waits those on events recorded inside its own stage
 * (a stage timed alone starts after everything before it anyway).
 */
static void emit_stage_tables(Emitter *e, const int *index_of) {
  EmitState *st = e->st;
  Graph *g = e->g;
  int nstages = g->sched.nstages > 0 ? g->sched.nstages : 1;
  emit(e, "enum { STAGE_COUNT = %d, STREAM_COUNT = %d };", nstages, nstreams(g));
  emit_open(e, "static const struct {");
  emit(e, "int first, count; /* in stage_node[] */");
  emit(e, "double predicted_us;");
  emit_close(e, "} stage_info[STAGE_COUNT] = {");
  e->indent++;
  int first = 0;
  for (int s = 0; s < nstages; s++) {
    int count = 0;
    if (g->sched.nstages > 0) {
      const Stage *stage = &g->sched.stages[s];
      for (int i = 0; i < stage->nnodes; i++)
        count += stage->nodes[i]->id >= 0 && index_of[stage->nodes[i]->id] >= 0;
    } else {
      count = st->nissued;
    }
    emit(e, "{%d, %d, %.4f},", first, count, g->sched.nstages > 0 ? g->sched.stages[s].predicted_us : 0.0);
    first += count;
  }
  e->indent--;
  emit(e, "};");
  emit(e, "/* The nodes of each stage, in issue order. */");
  int *nodes = arena_alloc(g->arena, sizeof(int) * ((size_t)st->nissued + 1));
  int count = 0;
  if (g->sched.nstages > 0) {
    for (int s = 0; s < nstages; s++) {
      const Stage *stage = &g->sched.stages[s];
      for (int i = 0; i < stage->nnodes; i++) {
        int k = stage->nodes[i]->id >= 0 ? index_of[stage->nodes[i]->id] : -1;
        if (k >= 0 && count < st->nissued)
          nodes[count++] = k;
      }
    }
  } else {
    for (int k = 0; k < st->nissued; k++)
      nodes[count++] = k;
  }
  emit(e, "static const int stage_node[%d] = {", count > 0 ? count : 1);
  emit_int_rows(e, nodes, count > 0 ? count : 1);
  emit(e, "};");
}

/* The event of the schedule numbered k, for net_profile(). */
static void emit_schedule_event(Emitter *e) {
  emit(e, "static cudaEvent_t schedule_event(%s_ctx *c, int k)", e->prefix);
  emit_open(e, "{");
  if (nevents(e->g) > 0) {
    emit(e, "return c->event[k];");
  } else {
    emit(e, "(void)c;");
    emit(e, "(void)k;");
    emit(e, "return NULL; /* this schedule has no events */");
  }
  emit_close(e, "}");
  emit_blank(e);
}

/* node_form(): the form of calls create() chose for node k, or NULL. */
static void emit_node_form(Emitter *e) {
  EmitState *st = e->st;
  emit(e, "/* The form of calls create() chose for node k (--verbose, profiles), or NULL. */");
  emit(e, "static const char *node_form(const %s_ctx *c, int k)", e->prefix);
  emit_open(e, "{");
  if (st->nformed == 0) {
    emit(e, "(void)c;");
    emit(e, "(void)k;");
    emit(e, "return NULL;");
    emit_close(e, "}");
    emit_blank(e);
    return;
  }
  emit_open(e, "switch (k) {");
  for (int k = 0; k < st->nissued; k++)
    for (int i = 0; i < st->nformed; i++)
      if (st->formed[i] == st->issued[k])
        emit(e, "case %d: return form_name[%s];", k, st->form_field[i]);
  emit(e, "default: return NULL;");
  emit_close(e, "}");
  emit_close(e, "}");
  emit_blank(e);
}

/* The table of issued nodes and the two helpers that bracket each one. */
static void emit_node_table(Emitter *e) {
  EmitState *st = e->st;
  Graph *g = e->g;
  const char *p = e->prefix;
  emit(e, "/* The issued nodes, in order: for NVTX ranges, messages and profiles. */");
  emit(e, "enum { NODE_COUNT = %d };", st->nissued);
  if (st->nissued == 0) {
    emit_blank(e);
    return;
  }
  int *index_of = issued_by_id(e);
  /* Each node's waits inside its stage, flattened. */
  int *first_wait = arena_alloc(g->arena, sizeof(int) * (size_t)st->nissued);
  int *nwaits = arena_alloc(g->arena, sizeof(int) * (size_t)st->nissued);
  int total_waits = 0;
  for (int k = 0; k < st->nissued; k++)
    total_waits += st->issued[k]->nwaits;
  int *waits = arena_alloc(g->arena, sizeof(int) * ((size_t)total_waits + 1));
  total_waits = 0;
  for (int k = 0; k < st->nissued; k++) {
    const Node *n = st->issued[k];
    first_wait[k] = total_waits;
    for (int w = 0; w < n->nwaits; w++) {
      const Node *r = event_recorder(g, n->waits[w]);
      int rk = r && r->id >= 0 ? index_of[r->id] : -1;
      if (rk < 0 || node_stage(g, r) != node_stage(g, n))
        continue;
      nwaits[k]++;
      waits[total_waits++] = n->waits[w];
    }
  }
  emit_open(e, "static const struct {");
  emit(e, "const char *name, *op;");
  emit(e, "const char *label; /* for messages */");
  emit(e, "int stream;");
  emit(e, "int stage, record;       /* record: the event recorded after it, or -1 */");
  emit(e, "int first_wait, nwaits;  /* its waits inside its stage, in stage_wait[] */");
  emit(e, "double predicted_us;     /* the cost model's latency alone */");
  emit(e, "const char *key;         /* names it in a profile (opc --cost-db) */");
  emit_close(e, "} node_info[NODE_COUNT] = {");
  e->indent++;
  for (int k = 0; k < st->nissued; k++) {
    const Node *n = st->issued[k];
    emit(e, "{\"%s\", \"%s\", \"%s\", %d, %d, %d, %d, %d, %.4f,", emit_c_string(e, n->name),
         op_name(n->op), emit_node_label(e, n),
         n->stream >= 0 && n->stream < nstreams(g) ? n->stream : 0, node_stage(g, n),
         n->record_event >= 0 && n->record_event < nevents(g) ? n->record_event : -1,
         first_wait[k], nwaits[k], n->cost_us);
    emit(e, " \"%s\"},", unit_key(e, n));
  }
  e->indent--;
  emit(e, "};");
  emit(e, "/* What each node's issue waits on inside its stage. */");
  emit(e, "static const int stage_wait[%d] = {", total_waits > 0 ? total_waits : 1);
  emit_int_rows(e, waits, total_waits > 0 ? total_waits : 1);
  emit(e, "};");
  emit_stage_tables(e, index_of);
  emit(e, "/* Each node's work, for net_profile(). */");
  emit(e, "static int (*const node_run[NODE_COUNT])(%s_ctx *c) = {", p);
  e->indent++;
  for (int k = 0; k < st->nissued; k++)
    emit(e, "run_%s,", node_id(e, st->issued[k]));
  e->indent--;
  emit(e, "};");
  emit_blank(e);
  emit(e, "/* Node k starts on `stream`: it names messages and an NVTX range, and is");
  emit(e, "   timestamped while tracing. */");
  emit(e, "static int begin_node(%s_ctx *c, int k, cudaStream_t stream)", p);
  emit_open(e, "{");
  emit(e, "c->node = node_info[k].label;");
  emit(e, "nvtxRangePushA(node_info[k].name);");
  emit(e, "return !c->trace || cuda_ok(c, cudaEventRecord(c->trace[2 * k], stream), \"cudaEventRecord\");");
  emit_close(e, "}");
  emit_blank(e);
  emit_node_form(e);
  emit(e, "static int end_node(%s_ctx *c, int k, cudaStream_t stream)", p);
  emit_open(e, "{");
  emit(e, "if (c->trace && !cuda_ok(c, cudaEventRecord(c->trace[2 * k + 1], stream), \"cudaEventRecord\"))");
  emit(e, "  return 0;");
  emit(e, "nvtxRangePop();");
  emit(e, "c->node = NULL;");
  emit(e, "return 1;");
  emit_close(e, "}");
  emit_blank(e);
}

/* net_profile(): the schedule's facts, then the fixed code of profile_template.c. */
static void emit_profile(Emitter *e) {
  const char *p = e->prefix;
  Graph *g = e->g;
  e->st->lib_used[LIB_CUDA] = true;
  if (e->st->nissued == 0) {
    emit(e, "/* net_profile(): this model issues no work; the profile is empty. */");
    emit(e, "int %s_profile(%s_ctx *c, const char *path, int repeats)", p, p);
    emit_open(e, "{");
    emit(e, "FILE *f = fopen(path, \"w\");");
    emit(e, "int ok = f && fputs(\"{\\\"format\\\": \\\"opc-profile-1\\\", \\\"units\\\": [], "
            "\\\"stages\\\": []}\\n\", f) >= 0;");
    emit(e, "(void)repeats;");
    emit(e, "if (f && fclose(f) != 0)");
    emit(e, "  ok = 0;");
    emit(e, "if (!ok)");
    emit(e, "  snprintf(c->error, sizeof c->error, \"cannot write %%s: %%s\", path, strerror(errno));");
    emit(e, "return ok ? 0 : -1;");
    emit_close(e, "}");
    emit_blank(e);
    return;
  }
  emit_schedule_event(e);
  emit_open(e, "static const struct {");
  emit(e, "const char *model, *scheduler;");
  emit(e, "int tf32;");
  emit(e, "double predicted_us;");
  emit_close(e, "} schedule_info = {\"%s\", \"%s\", %d, %.4f};",
              emit_c_string(e, g->path ? g->path : ""),
              g->sched.scheduler ? g->sched.scheduler : "sequential", e->opt->tf32 ? 1 : 0,
              g->sched.predicted_us);
  emit_blank(e);
  put_template(e->f, p, profile_template);
  emit_blank(e);
}

static void emit_enqueue(Emitter *e) {
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
  emit(e, "for (int s = 0; s < %d; s++)", nstreams(e->g));
  e->indent++;
  emit(e, "if (c->stream[s] != origin &&");
  emit(e, "    !cuda_ok(c, cudaStreamWaitEvent(c->stream[s], c->fork, 0), \"cudaStreamWaitEvent\"))");
  emit(e, "  goto fail;");
  e->indent--;
  fputs(st->text[SEC_ENQUEUE], e->f);
  emit_blank(e);
  emit(e, "for (int s = 0; s < %d; s++)", nstreams(e->g));
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
  emit(e, "for (int s = 0; s < %d; s++)", nstreams(e->g));
  emit(e, "  if (c->stream[s] != origin && cudaEventRecord(c->join[s], c->stream[s]) == cudaSuccess)");
  emit(e, "    cudaStreamWaitEvent(origin, c->join[s], 0);");
  emit(e, "return -1;");
  emit_close(e, "}");
  emit_blank(e);
}

static void emit_capture(Emitter *e) {
  emit(e, "/* Captures the schedule into a CUDA graph once; every run replays it. */");
  emit(e, "static int capture(%s_ctx *c)", e->prefix);
  emit_open(e, "{");
  emit(e, "cudaGraph_t graph = NULL;");
  emit(e, "cudaError_t status;");
  emit(e, "int ok;");
  e->fail = "return -1";
  emit_call(e, LIB_CUDA, NULL,
            "cudaStreamBeginCapture(c->stream[0], cudaStreamCaptureModeThreadLocal)");
  emit(e, "ok = enqueue(c, c->stream[0]) == 0;");
  emit(e, "/* End the capture even after a failure, so that the stream is usable, but");
  emit(e, "   keep the node's own message: the capture fails because of it. */");
  emit(e, "status = cudaStreamEndCapture(c->stream[0], &graph);");
  emit(e, "if (ok)");
  emit(e, "  ok = cuda_ok(c, status, \"cudaStreamEndCapture\");");
  emit(e, "if (ok)");
  emit(e, "  ok = cuda_ok(c, cudaGraphInstantiate(&c->graph, graph, 0ULL), \"cudaGraphInstantiate\");");
  emit(e, "if (graph)");
  emit(e, "  cudaGraphDestroy(graph);");
  emit(e, "return ok ? 0 : -1;");
  emit_close(e, "}");
  emit_blank(e);
}

/* ------------------------------------------------------------- create */

static void emit_create(Emitter *e) {
  EmitState *st = e->st;
  const char *p = e->prefix;
  int ns = nstreams(e->g), ne = nevents(e->g);
  e->fail = "goto fail";
  emit(e, "int %s_create(%s_ctx **ctx, const char *weights_path)", p, p);
  emit_open(e, "{");
  emit(e, "%s_ctx *c = calloc(1, sizeof *c);", p);
  emit(e, "*ctx = c;");
  emit(e, "if (!c)");
  emit(e, "  return -1;");
  emit(e, "for (int s = 0; s < %d; s++) {", ns);
  e->indent++;
  emit_call(e, LIB_CUDA, NULL, "cudaStreamCreateWithFlags(&c->stream[s], cudaStreamNonBlocking)");
  emit_call(e, LIB_CUDA, NULL, "cudaEventCreateWithFlags(&c->join[s], cudaEventDisableTiming)");
  if (st->uses_cudnn) {
    emit_call(e, LIB_CUDNN, NULL, "cudnnCreate(&c->cudnn[s])");
    emit_call(e, LIB_CUDNN, NULL, "cudnnSetStream(c->cudnn[s], c->stream[s])");
  }
  if (st->uses_cublas) {
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
    emit(e, "for (int k = 0; k < %d; k++)", ne);
    e->indent++;
    emit_call(e, LIB_CUDA, NULL, "cudaEventCreateWithFlags(&c->event[k], cudaEventDisableTiming)");
    e->indent--;
  }
  emit_call(e, LIB_CUDA, NULL, "cudaEventCreateWithFlags(&c->fork, cudaEventDisableTiming)");
  emit_call(e, LIB_CUDA, NULL, "cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming)");
  if (staging_floats(e->g) > 0)
    emit_call(e, LIB_CUDA, NULL, "cudaMallocHost((void **)&c->staging, %lld * sizeof(float))",
              (long long)staging_floats(e->g));
  if (st->nweights) {
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
  emit_blank(e);
  emit(e, "/* Buffers: activations in the arena, constants in the weights. */");
  fputs(st->text[SEC_BIND], e->f);
  if (st->len[SEC_CREATE]) {
    emit_blank(e);
    emit(e, "/* Descriptors, algorithms and workspace sizes of each node. */");
    fputs(st->text[SEC_CREATE], e->f);
    emit(e, "c->node = NULL;");
  }
  if (st->uses_workspace) {
    emit(e, "for (int s = 0; s < %d; s++)", ns);
    emit(e, "  if (c->workspace_bytes[s] > 0 &&");
    emit(e, "      !cuda_ok(c, cudaMalloc(&c->workspace[s], c->workspace_bytes[s]), \"cudaMalloc\"))");
    emit(e, "    goto fail;");
  }
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
  if (e->opt->cuda_graph) {
    emit_blank(e);
    emit(e, "/* One eager run first: cuDNN and cuBLAS initialise lazily on first use, which");
    emit(e, "   a capture does not allow, and a library error then names its node. */");
    emit(e, "if (enqueue(c, c->stream[0]) != 0 ||");
    emit(e, "    !cuda_ok(c, cudaStreamSynchronize(c->stream[0]), \"cudaStreamSynchronize\") ||");
    emit(e, "    capture(c) != 0)");
    emit(e, "  goto fail;");
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
    const char *host = device ? emit_str(e, "%s[%d]", in ? "inputs" : "outputs", i)
                              : emit_str(e, "c->staging + %lld", (long long)staging_offset(g, in, i));
    const char *call = in ? emit_str(e, "cudaMemcpyAsync(%s, %s, %lld * sizeof(float), %s, %s)",
                                     buf(e, t), host, (long long)tensor_numel(t), kind, stream)
                          : emit_str(e, "cudaMemcpyAsync(%s, %s, %lld * sizeof(float), %s, %s)",
                                     host, buf(e, t), (long long)tensor_numel(t), kind, stream);
    e->st->lib_used[LIB_CUDA] = true;
    emit(e, "if (!cuda_ok(c, %s, \"%s\"))", call, where);
    emit(e, "  return -1;");
  }
}

/* Copies between the caller's host buffers and the pinned staging buffer. */
static void emit_staging(Emitter *e, bool in) {
  Graph *g = e->g;
  int count = in ? g->ninputs : g->noutputs;
  for (int i = 0; i < count; i++) {
    Tensor *t = in ? g->inputs[i] : g->outputs[i];
    long long offset = (long long)staging_offset(g, in, i), n = (long long)tensor_numel(t);
    if (n == 0)
      continue;
    if (in)
      emit(e, "memcpy(c->staging + %lld, inputs[%d], %lld * sizeof(float));", offset, i, n);
    else
      emit(e, "memcpy(outputs[%d], c->staging + %lld, %lld * sizeof(float));", i, offset, n);
  }
}

static void emit_run(Emitter *e) {
  const char *p = e->prefix;
  Graph *g = e->g;
  int64_t in_floats = staging_offset(g, false, 0), out_floats = staging_floats(g) - in_floats;
  emit(e, "int %s_run(%s_ctx *c, const float *const *inputs, float *const *outputs)", p, p);
  emit_open(e, "{");
  if (in_floats == 0)
    emit(e, "(void)inputs;");
  if (out_floats == 0)
    emit(e, "(void)outputs;");
  if (in_floats + out_floats > 0)
    emit(e, "/* Through pinned memory, so that the copies are real asynchronous transfers. */");
  emit_staging(e, true);
  emit_copies(e, true, false, "c->stream[0]");
  if (e->opt->cuda_graph) {
    emit(e, "if (!cuda_ok(c, cudaGraphLaunch(c->graph, c->stream[0]), \"cudaGraphLaunch\"))");
    emit(e, "  return -1;");
  } else {
    emit(e, "if (enqueue(c, c->stream[0]) != 0)");
    emit(e, "  return -1;");
  }
  emit_copies(e, false, false, "c->stream[0]");
  emit(e, "if (!cuda_ok(c, cudaStreamSynchronize(c->stream[0]), \"cudaStreamSynchronize\"))");
  emit(e, "  return -1;");
  emit_staging(e, false);
  emit(e, "return 0;");
  emit_close(e, "}");
  emit_blank(e);

  emit(e, "int %s_run_device(%s_ctx *c, const float *const *inputs, float *const *outputs, cudaStream_t stream)",
       p, p);
  emit_open(e, "{");
  if (in_floats == 0)
    emit(e, "(void)inputs;");
  if (out_floats == 0)
    emit(e, "(void)outputs;");
  emit_copies(e, true, true, "stream");
  if (e->opt->cuda_graph) {
    emit(e, "if (!cuda_ok(c, cudaGraphLaunch(c->graph, stream), \"cudaGraphLaunch\"))");
    emit(e, "  return -1;");
  } else {
    emit(e, "if (enqueue(c, stream) != 0)");
    emit(e, "  return -1;");
  }
  emit_copies(e, false, true, "stream");
  emit(e, "/* destroy() waits for this before it frees what the work uses. */");
  emit(e, "return cuda_ok(c, cudaEventRecord(c->done, stream), \"cudaEventRecord\") ? 0 : -1;");
  emit_close(e, "}");
  emit_blank(e);
}

static void emit_destroy(Emitter *e) {
  EmitState *st = e->st;
  const char *p = e->prefix;
  int ns = nstreams(e->g), ne = nevents(e->g);
  emit(e, "void %s_destroy(%s_ctx *c)", p, p);
  emit_open(e, "{");
  emit(e, "if (!c)");
  emit(e, "  return;");
  emit(e, "/* Work may still be queued: on the caller's stream by %s_run_device(), or", p);
  emit(e, "   on ours when a run failed half-way. */");
  emit(e, "if (c->done)");
  emit(e, "  cudaEventSynchronize(c->done);");
  emit(e, "for (int s = 0; s < %d; s++)", ns);
  emit(e, "  if (c->stream[s])");
  emit(e, "    cudaStreamSynchronize(c->stream[s]);");
  if (e->opt->cuda_graph) {
    emit(e, "if (c->graph)");
    emit(e, "  cudaGraphExecDestroy(c->graph);");
  }
  if (e->nkernels > 0)
    emit_kernel_teardown(e);
  fputs(st->text[SEC_TEARDOWN], e->f);
  emit(e, "cudaFree(c->arena);");
  if (st->nweights)
    emit(e, "cudaFree(c->weights);");
  if (ne > 0) {
    emit(e, "for (int k = 0; k < %d; k++)", ne);
    emit(e, "  if (c->event[k])");
    emit(e, "    cudaEventDestroy(c->event[k]);");
  }
  emit(e, "if (c->fork)");
  emit(e, "  cudaEventDestroy(c->fork);");
  emit(e, "if (c->done)");
  emit(e, "  cudaEventDestroy(c->done);");
  if (staging_floats(e->g) > 0)
    emit(e, "cudaFreeHost(c->staging);");
  emit_open(e, "for (int s = 0; s < %d; s++) {", ns);
  if (st->uses_workspace)
    emit(e, "cudaFree(c->workspace[s]);");
  if (st->uses_cublas) {
    emit(e, "if (c->cublas[s])");
    emit(e, "  cublasDestroy(c->cublas[s]);");
    emit(e, "cudaFree(c->cublas_workspace[s]);");
  }
  if (st->uses_cudnn) {
    emit(e, "if (c->cudnn[s])");
    emit(e, "  cudnnDestroy(c->cudnn[s]);");
  }
  emit(e, "if (c->join[s])");
  emit(e, "  cudaEventDestroy(c->join[s]);");
  emit(e, "if (c->stream[s])");
  emit(e, "  cudaStreamDestroy(c->stream[s]);");
  emit_close(e, "}");
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
static void emit_metadata(Emitter *e, bool inputs) {
  const char *p = e->prefix;
  const char *what = inputs ? "input" : "output";
  int count = inputs ? e->g->ninputs : e->g->noutputs;
  Tensor **list = inputs ? e->g->inputs : e->g->outputs;
  if (count > 0) {
    emit_open(e, "static const struct {");
    emit(e, "const char *name;");
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
      emit(e, "{\"%s\", %d, {%s}},", emit_c_string(e, t->name), t->rank, dims);
    }
    e->indent--;
    emit(e, "};");
    emit_blank(e);
  }
  emit(e, "int %s_num_%ss(void) { return %d; }", p, what, count);
  if (count > 0) {
    emit(e, "const char *%s_%s_name(int i) { return i >= 0 && i < %d ? %s_info[i].name : NULL; }", p,
         what, count, what);
    emit(e, "int %s_%s_rank(int i) { return i >= 0 && i < %d ? %s_info[i].rank : -1; }", p, what,
         count, what);
    emit(e, "const long long *%s_%s_dims(int i) { return i >= 0 && i < %d ? %s_info[i].dims : NULL; }",
         p, what, count, what);
  } else {
    emit(e, "const char *%s_%s_name(int i) { (void)i; return NULL; }", p, what);
    emit(e, "int %s_%s_rank(int i) { (void)i; return -1; }", p, what);
    emit(e, "const long long *%s_%s_dims(int i) { (void)i; return NULL; }", p, what);
  }
  emit_blank(e);
}

static void emit_c_file(Emitter *e, FILE *f) {
  EmitState *st = e->st;
  e->f = f;
  e->indent = 0;
  emit_file_comment(e, base_name(e, e->opt->c_path));
  emit_includes(e);
  emit_blank(e);
  if (st->len[SEC_KERNELS]) {
    fputs(st->text[SEC_KERNELS], f);
    emit_blank(e);
  }
  emit_struct(e);
  emit_blank(e);
  if (st->uses_one || st->uses_zero) {
    emit(e, "/* Scaling factors of cuDNN and cuBLAS calls: host memory, read at the call. */");
    if (st->uses_one)
      emit(e, "static const float one = 1.0f;");
    if (st->uses_zero)
      emit(e, "static const float zero = 0.0f;");
    emit_blank(e);
  }
  /* What follows marks library use itself: print it first, then the helpers. */
  char *rest = NULL;
  size_t restlen = 0;
  FILE *r = open_memstream(&rest, &restlen);
  if (!r) {
    e->failed = true;
    return;
  }
  e->f = r;
  if (st->nweights)
    emit_weights_loader(e);
  if (st->len[SEC_SETUP])
    fputs(st->text[SEC_SETUP], r);
  emit_node_table(e);
  emit_enqueue(e);
  if (e->opt->cuda_graph)
    emit_capture(e);
  emit_create(e);
  emit_run(e);
  emit_destroy(e);
  emit_metadata(e, true);
  emit_metadata(e, false);
  emit_profile(e);
  emit(e, "#ifndef OPC_NO_MAIN");
  if (st->nweights && !e->opt->embed_weights)
    emit(e, "static const char weights_file_name[] = \"%s\";",
         emit_c_string(e, base_name(e, e->opt->weights_path)));
  else
    emit(e, "static const char weights_file_name[] = \"\"; /* %s */",
         st->nweights ? "linked in" : "no weights");
  emit_blank(e);
  emit_trace_run(e);
  emit_describe(e);
  put_template(r, e->prefix, main_template);
  emit(e, "#endif");
  fclose(r);
  e->f = f;
  emit_check_helpers(e);
  fwrite(rest, 1, restlen, f);
  free(rest);
}

static void emit_h_file(Emitter *e, FILE *f) {
  const char *p = e->prefix;
  e->f = f;
  e->indent = 0;
  emit_file_comment(e, base_name(e, e->opt->h_path));
  char *guard = emit_str(e, "%s_H", p);
  for (char *q = guard; *q; q++)
    if (*q >= 'a' && *q <= 'z')
      *q = (char)(*q - 'a' + 'A');
  emit(e, "#ifndef %s", guard);
  emit(e, "#define %s", guard);
  emit_blank(e);
  emit(e, "#include <cuda_runtime.h>");
  emit_blank(e);
  emit(e, "#ifdef __cplusplus");
  emit(e, "extern \"C\" {");
  emit(e, "#endif");
  emit_blank(e);
  emit(e, "typedef struct %s_ctx %s_ctx;", p, p);
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * Creates a context: reads the weights (NULL: %s),",
       e->opt->embed_weights ? "those linked into the program"
                             : "the file named when the program was generated");
  emit(e, " * allocates every buffer, chooses the cuDNN algorithms, compiles the kernels%s.",
       e->opt->cuda_graph ? "\n * and captures the schedule in a CUDA graph" : "");
  emit(e, " * Convolution algorithms come from cuDNN's heuristics, or are timed when the");
  emit(e, " * environment has OPC_CONV_SEARCH=1.");
  emit(e, " * Returns 0 on success. On failure *ctx is still set when memory allowed,");
  emit(e, " * so that %s_error(*ctx) explains; release it with %s_destroy().", p, p);
  emit(e, " */");
  emit(e, "int %s_create(%s_ctx **ctx, const char *weights_path);", p, p);
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * One inference on host buffers, in the order of %s_input_name() and", p);
  emit(e, " * %s_output_name(). Blocks until the outputs are written; allocates nothing.", p);
  emit(e, " * A context runs one inference at a time; use one context per thread.");
  emit(e, " */");
  emit(e, "int %s_run(%s_ctx *ctx, const float *const *inputs, float *const *outputs);", p, p);
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * One inference on device buffers, enqueued on `stream` without waiting.");
  emit(e, " * The inputs are copied into the context when the stream reaches this call and");
  emit(e, " * the outputs copied out at its end, so the caller's buffers are bound by copy:");
  emit(e, " * they may be reused once the stream has passed this work.");
  emit(e, " */");
  emit(e, "int %s_run_device(%s_ctx *ctx, const float *const *inputs, float *const *outputs,", p, p);
  emit(e, "%*scudaStream_t stream);", (int)strlen(p) + 16, "");
  emit_blank(e);
  emit(e, "void %s_destroy(%s_ctx *ctx);", p, p);
  emit(e, "/* The last error of the context, naming the node and the library's message. */");
  emit(e, "const char *%s_error(const %s_ctx *ctx);", p, p);
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * Times every operation of the schedule alone and every stage as scheduled,");
  emit(e, " * each inside a CUDA graph of `repeats` issues (0: a default), and writes");
  emit(e, " * microseconds per operation and per stage to `path` as JSON, with the device");
  emit(e, " * and library versions: the file that `opc --cost-db` reads. The activations");
  emit(e, " * are overwritten; run again for outputs. Returns 0 on success.");
  emit(e, " */");
  emit(e, "int %s_profile(%s_ctx *ctx, const char *path, int repeats);", p, p);
  emit_blank(e);
  emit(e, "/* The model's inputs and outputs: name, rank and dims (NULL or -1 out of range). */");
  const char *what[2] = {"input", "output"};
  for (int k = 0; k < 2; k++) {
    emit(e, "int %s_num_%ss(void);", p, what[k]);
    emit(e, "const char *%s_%s_name(int i);", p, what[k]);
    emit(e, "int %s_%s_rank(int i);", p, what[k]);
    emit(e, "const long long *%s_%s_dims(int i);", p, what[k]);
  }
  emit_blank(e);
  emit(e, "#ifdef __cplusplus");
  emit(e, "}");
  emit(e, "#endif");
  emit_blank(e);
  emit(e, "#endif");
}

/* --------------------------------------------------------------- driver */

static bool write_file(Emitter *e, const char *path, void (*print)(Emitter *, FILE *)) {
  FILE *f = fopen(path, "w");
  if (!f) {
    opc_error("cannot write %s: %s", path, strerror(errno));
    return false;
  }
  print(e, f);
  bool ok = !ferror(f) && !e->failed;
  if (fclose(f) != 0 || !ok) {
    if (!e->failed)
      opc_error("cannot write %s: %s", path, strerror(errno));
    return false;
  }
  return true;
}

static bool open_sections(EmitState *st) {
  for (int i = 0; i < SEC_COUNT; i++) {
    st->sec[i] = open_memstream(&st->text[i], &st->len[i]);
    if (!st->sec[i])
      return false;
  }
  return true;
}

static void close_sections(EmitState *st) {
  for (int i = 0; i < SEC_COUNT; i++)
    if (st->sec[i]) {
      fclose(st->sec[i]);
      st->sec[i] = NULL;
    }
}

static void free_sections(EmitState *st) {
  close_sections(st);
  for (int i = 0; i < SEC_COUNT; i++)
    free(st->text[i]);
}

static bool valid_prefix(const char *p) {
  if (!p[0] || (p[0] >= '0' && p[0] <= '9'))
    return false;
  for (; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          *p == '_'))
      return false;
  return true;
}

static bool emit_all(Emitter *e, const char *c_tmp, const char *h_tmp, const char *w_tmp) {
  EmitState *st = e->st;
  emit_nodes(e);
  if (e->failed)
    return false;
  /* run() copies in and out of these: bind them while the parts are open. */
  for (int i = 0; i < e->g->ninputs; i++)
    buf(e, e->g->inputs[i]);
  for (int i = 0; i < e->g->noutputs; i++)
    buf(e, e->g->outputs[i]);
  /* Kernel source last: the nodes have requested their kernels by now. */
  e->f = st->sec[SEC_KERNELS];
  e->indent = 0;
  if (e->nkernels > 0)
    emit_kernel_source(e);
  close_sections(st);
  if (e->failed)
    return false;
  return write_file(e, c_tmp, emit_c_file) && write_file(e, h_tmp, emit_h_file) &&
         write_weights(e, w_tmp);
}

bool emit_program(Graph *g, const EmitOptions *opt) {
  const char *prefix = opt->prefix ? opt->prefix : "net";
  if (!valid_prefix(prefix)) {
    opc_error("--prefix '%s' is not a C identifier", prefix);
    return false;
  }
  Emitter e = {0};
  EmitState st = {0};
  e.g = g;
  e.opt = opt;
  e.prefix = prefix;
  e.st = &st;
  e.tensor_cname = arena_alloc(g->arena, sizeof(char *) * (size_t)(g->ntensors + 1));
  e.node_cname = arena_alloc(g->arena, sizeof(char *) * (size_t)(g->nnodes + 1));
  emit_reserve_names(&e);
  emit_name_tensors(&e);
  if (!check_graph(&e))
    return false;
  if (g->arena_bytes <= 0)
    plan_memory_simply(g);
  if (!open_sections(&st)) {
    opc_error("out of memory");
    free_sections(&st);
    return false;
  }
  const char *paths[3] = {opt->c_path, opt->h_path, opt->weights_path};
  const char *tmps[3];
  for (int i = 0; i < 3; i++)
    tmps[i] = emit_str(&e, "%s.tmp", paths[i]);
  bool ok = emit_all(&e, tmps[0], tmps[1], tmps[2]);
  free_sections(&st);
  for (int i = 0; i < 3 && ok; i++)
    if (rename(tmps[i], paths[i]) != 0) {
      opc_error("cannot write %s: %s", paths[i], strerror(errno));
      ok = false;
    }
  if (!ok) {
    for (int i = 0; i < 3; i++) {
      unlink(tmps[i]);
      unlink(paths[i]);
    }
  }
  return ok;
}
