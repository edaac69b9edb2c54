/*
 * program.c - emit_program(): checks that the pipeline left a schedule and
 * a memory plan, prints every node into the parts of net.c (nodes.c), then
 * writes net.c (its parts in order, from the files beside this one), net.h
 * and net.weights.
 *
 * Everything is written to "<name>.tmp" files first and renamed at the end,
 * so that a failure leaves no partial output behind.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emit.h"
#include "main_bench_template.h"
#include "main_template.h"

/* ------------------------------------------------------------ helpers */

const char *base_name(Emitter *e, const char *path) {
  const char *slash = strrchr(path, '/');
  return arena_strdup(e->g->arena, slash ? slash + 1 : path);
}

const char *absolute_path(Emitter *e, const char *path) {
  if (path[0] == '/')
    return path;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd))
    return path;
  return emit_str(e, "%s/%s", cwd, path);
}

/* Prints a fixed text, replacing "net_" at the start of an identifier
   by the prefix (the templates are written for the default prefix). */
/* The first "net_" or "NET_" in s, or NULL. */
static const char *find_net(const char *s) {
  const char *lower = strstr(s, "net_"), *upper = strstr(s, "NET_");
  if (!lower || (upper && upper < lower))
    return upper;
  return lower;
}

void put_template(FILE *f, const char *prefix, const char *const *lines) {
  for (int i = 0; lines[i]; i++) {
    const char *s = lines[i];
    while (*s) {
      const char *hit = find_net(s);
      if (!hit) {
        fputs(s, f);
        break;
      }
      bool word_start = hit == lines[i] || !((hit[-1] >= 'a' && hit[-1] <= 'z') ||
                                             (hit[-1] >= 'A' && hit[-1] <= 'Z') ||
                                             (hit[-1] >= '0' && hit[-1] <= '9') || hit[-1] == '_');
      fwrite(s, 1, (size_t)(hit - s), f);
      if (!word_start)
        fwrite(hit, 1, 3, f);
      else if (hit[0] == 'n')
        fputs(prefix, f);
      else
        for (const char *p = prefix; *p; p++)
          fputc(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p, f);
      fputc('_', f);
      s = hit + 4;
    }
    fputc('\n', f);
  }
}

/* ------------------------------------------------------------- checks */

static bool check_graph(Emitter *e) {
  Graph *g = e->g;
  bool ok = true;
  for (int i = 0; i < g->ninputs; i++)
    if (!dtype_at_interface(g->inputs[i]->dtype)) {
      ir_error(g, NULL, "input '%s' is %s, a type opc programs do not take", g->inputs[i]->name,
               dtype_onnx_name(g->inputs[i]->dtype));
      ok = false;
    }
  for (int i = 0; i < g->noutputs; i++) {
    Tensor *t = g->outputs[i];
    if (!dtype_at_interface(t->dtype)) {
      ir_error(g, NULL, "output '%s' is %s, a type opc programs do not return", t->name,
               dtype_onnx_name(t->dtype));
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
    /* A serving program's requests and a split program's copies between
       GPUs are sized before the run; neither has a place for the size
       that the data decides yet. */
    if (t->bounded && (g->serve || emit_multi_gpu(e))) {
      ir_error(g, t->producer, "output '%s' has a size the data decides, which %s cannot "
               "return yet", t->name, g->serve ? "a serving program" : "a program on several GPUs");
      ok = false;
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

/*
 * The backend only prints: the schedule (issue order, streams, stages),
 * its events and the memory plan come from the pass pipeline. Their absence
 * or an index out of range is a compiler bug, reported once here.
 */
static bool check_node_schedule(const Graph *g, const Node *n) {
  NodeSchedule *ns = node_sched(g, n);
  const Schedule *s = &g->sched;
  if (ns->stream < 0 || ns->stream >= s->nstreams || ns->stage < 0 || ns->stage >= s->nstages ||
      ns->record_event >= s->nevents) {
    ir_error(g, n, "internal error: stream %d, stage %d or event %d out of range",
             ns->stream, ns->stage, ns->record_event);
    return false;
  }
  for (int w = 0; w < ns->nwaits; w++)
    if (ns->waits[w] < 0 || ns->waits[w] >= s->nevents) {
      ir_error(g, n, "internal error: waits for event %d of %d", ns->waits[w], s->nevents);
      return false;
    }
  return true;
}

static bool check_pipeline(Graph *g) {
  if (!g->sched.order || !g->sched.listing || !g->sched.scheduler || g->sched.nstreams < 1) {
    ir_error(g, NULL, "internal error: no schedule; the pass pipeline must run before emission");
    return false;
  }
  if (g->arena_bytes <= 0) {
    ir_error(g, NULL, "internal error: no memory plan; the pass pipeline must run before emission");
    return false;
  }
  for (int i = 0; i < g->sched.norder; i++)
    if (!check_node_schedule(g, g->sched.order[i]))
      return false;
  return true;
}

/* ---------------------------------------------------------- the files */

static void emit_file_comment(Emitter *e, const char *what) {
  emit(e, "/*");
  emit(e, " * %s - generated by opc %s from %s; do not edit.", what, OPC_VERSION,
       comment_text(e, e->g->path));
  if (what == e->opt->c_path || strcmp(what, base_name(e, e->opt->c_path)) == 0) {
    const Schedule *s = &e->g->sched;
    emit(e, " *");
    emit(e, " * %d operations on %d stream%s (%s schedule), %d cross-stream event%s;", s->norder,
         s->nstreams, s->nstreams == 1 ? "" : "s", s->scheduler, s->nevents,
         s->nevents == 1 ? "" : "s");
    emit(e, " * %lld bytes of activations, %lld bytes of weights in %s.",
         (long long)e->g->arena_bytes, (long long)e->st->weight_bytes,
         e->opt->embed_weights ? "the program"
         : e->g->serve         ? "a weights file per model"
                               : base_name(e, e->opt->weights_path));
    if (e->g->serve)
      emit(e, " * Serves %d model%s in %d copies, %d combinations of copies per round.",
           e->g->serve->nmodels, e->g->serve->nmodels == 1 ? "" : "s", e->g->serve->ninstances,
           serve_combinations(e->g->serve));
    emit(e, " * Build: cc -O1 %s -I<CUDA>/include -lcudnn -lcublasLt -lcublas -lcudart -lcuda -lnvrtc -lm,",
         base_name(e, e->opt->c_path));
    emit(e, " * or with `opc --cflags/--libs --target cpu` for opc's CPU runtime.");
    emit(e, " * -DOPC_NO_MAIN leaves out main() to link the model into another program.");
  } else {
    emit(e, " * The interface of the compiled model; see %s for the program.",
         comment_text(e, base_name(e, e->opt->c_path)));
  }
  emit(e, " */");
}

static void emit_includes(Emitter *e) {
  emit(e, "#include <errno.h>");
  emit(e, "#include <math.h>");
  emit(e, "#include <pthread.h>");
  if (e->g->serve)
    emit(e, "#include <stdarg.h>");
  emit(e, "#include <stdint.h>");
  emit(e, "#include <stdio.h>");
  emit(e, "#include <stdlib.h>");
  emit(e, "#include <string.h>");
  if (e->g->serve)
    emit(e, "#include <time.h>");
  emit_blank(e);
  emit(e, "#include <cuda.h>");
  emit(e, "#include <cuda_runtime.h>");
  emit(e, "#include <cudnn.h>");
  emit(e, "#include <cublas_v2.h>");
  emit(e, "#include <cublasLt.h>");
  emit(e, "#include <nvrtc.h>");
  emit(e, "#include <nvtx3/nvToolsExt.h>");
  if (emit_has_cpu(e)) {
    emit(e, "/* The host CPU's units: opc's CPU runtime, its names prefixed with cpu_ */");
    emit(e, "#include <opc_cpu.h>");
  }
  emit_blank(e);
  emit(e, "#include \"%s\"", base_name(e, e->opt->h_path));
  emit_blank(e);
  emit(e, "/* One lock for every opc model linked into one program or library (each");
  emit(e, "   file's weak definition is merged into one by the linker; hidden, so that a");
  emit(e, "   library exports its API only): a capture must not overlap another");
  emit(e, "   context's cudnnDestroy or cublasDestroy, whose device-wide");
  emit(e, "   synchronisation would invalidate it. */");
  emit(e, "pthread_mutex_t opc_capture_lock __attribute__((weak, visibility(\"hidden\"))) =");
  emit(e, "    PTHREAD_MUTEX_INITIALIZER;");
}

/*
 * The ready-made main of one model: first what it asks of the model, then
 * main itself, which is the same for every model of one prefix, so that
 * opc may compile it apart once (main_source) and build the program with
 * OPC_MAIN_APART.
 */
static void emit_main(Emitter *e) {
  const char *p = e->prefix;
  emit(e, "/* What main asks of this model; main may be compiled apart (OPC_MAIN_APART). */");
  if (e->st->nweights && !e->opt->embed_weights)
    emit(e, "const char %s_main_weights_file[] = \"%s\";", p,
         emit_c_string(e, base_name(e, e->opt->weights_path)));
  else
    emit(e, "const char %s_main_weights_file[] = \"\"; /* %s */", p,
         e->st->nweights ? "linked in" : "no weights");
  emit_blank(e);
  emit_trace_run(e);
  emit_describe(e, true);
  put_template(e->f, p, main_bench_template);
  emit_blank(e);
  emit(e, "#ifndef OPC_MAIN_APART");
  put_template(e->f, p, main_template);
  emit(e, "#endif");
}

/* Headers of main compiled apart: those net.c's prelude gives it. */
static const char *const main_headers[] = {"errno.h", "math.h", "stdint.h", "stdio.h",
                                           "stdlib.h", "string.h", NULL};

bool write_main_source(FILE *f, const char *prefix) {
  fprintf(f, "/*\n * The command line of every program opc emits with the symbol prefix %s:\n"
             " * what its net.c holds under OPC_MAIN_APART, compiled once and linked with\n"
             " * the model's file built with -DOPC_MAIN_APART. Written by opc %s.\n */\n",
          prefix, OPC_VERSION);
  for (int i = 0; main_headers[i]; i++)
    fprintf(f, "#include <%s>\n", main_headers[i]);
  fputc('\n', f);
  put_template(f, prefix, main_template);
  return !ferror(f);
}

static void emit_model_header(Emitter *e);

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
  if (e->g->serve)
    emit_serve_tables(e);
  emit_helper_types(e);
  emit_struct(e);
  emit_blank(e);
  if (e->st->gpu.one || e->st->gpu.zero) {
    emit(e, "/* Scaling factors of cuDNN and cuBLAS calls: host memory, read at the call. */");
    if (e->st->gpu.one)
      emit(e, "static const float one = 1.0f;");
    if (e->st->gpu.zero)
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
  if (e->g->serve)
    emit_serve_rounds(e);
  else if (e->opt->cuda_graph)
    emit_capture(e);
  emit_create(e);
  if (!e->g->serve)
    emit_run(e);
  emit_destroy(e);
  if (!e->g->serve) {
    emit_metadata(e, true);
    emit_metadata(e, false);
    emit_output_shape(e);
  }
  emit_profile(e);
  emit(e, "#ifndef OPC_NO_MAIN");
  if (e->g->serve)
    emit_serve_main(e);
  else
    emit_main(e);
  emit(e, "#endif");
  fclose(r);
  e->f = f;
  emit_check_helpers(e);
  emit_cpu_helpers(e);
  fwrite(rest, 1, restlen, f);
  free(rest);
}

/* net.h's list of the inputs and outputs, with their types and shapes. */
static void emit_io_list(Emitter *e) {
  Graph *g = e->g;
  emit(e, "/*");
  for (int k = 0; k < 2; k++) {
    int count = k == 0 ? g->ninputs : g->noutputs;
    Tensor **list = k == 0 ? g->inputs : g->outputs;
    emit(e, " * %s:", k == 0 ? "Inputs" : "Outputs");
    if (count == 0)
      emit(e, " *   none");
    for (int i = 0; i < count; i++) {
      char dims[256] = "";
      for (int d = 0; d < list[i]->rank; d++)
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", d ? ", " : "",
                 (long long)list[i]->dims[d]);
      emit(e, " *   %d  %s: %s [%s]", i, comment_text(e, list[i]->name),
           dtype_onnx_name(list[i]->dtype), dims);
    }
  }
  emit(e, " */");
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
  if (e->g->serve)
    emit_serve_header(e);
  else
    emit_model_header(e);
  emit_blank(e);
  emit(e, "#ifdef __cplusplus");
  emit(e, "}");
  emit(e, "#endif");
  emit_blank(e);
  emit(e, "#endif");
}

/* net.h's declarations for one model. */
static void emit_model_header(Emitter *e) {
  const char *p = e->prefix;
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
  emit_io_list(e);
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * One inference on host buffers, in the order of %s_input_name() and", p);
  emit(e, " * %s_output_name(), each of its tensor's type and shape in C order.", p);
  emit(e, " * Blocks until the outputs are written; allocates nothing.");
  emit(e, " * A context runs one inference at a time; use one context per thread.");
  emit(e, " */");
  emit(e, "int %s_run(%s_ctx *ctx, const void *const *inputs, void *const *outputs);", p, p);
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * One inference on device buffers, enqueued on `stream` without waiting.");
  emit(e, " * The inputs are copied into the context when the stream reaches this call and");
  emit(e, " * the outputs copied out at its end, so the caller's buffers are bound by copy:");
  emit(e, " * they may be reused once the stream has passed this work.");
  emit(e, " */");
  emit(e, "int %s_run_device(%s_ctx *ctx, const void *const *inputs, void *const *outputs,", p, p);
  emit(e, "%*scudaStream_t stream);", (int)strlen(p) + 16, "");
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * The dims of output i in the last run, into `dims` (room for its rank);");
  emit(e, " * returns the rank, -1 for no such output. Where the data decides an output's");
  emit(e, " * size (NonZero), its declared dims are bounds and its buffer is sized for");
  emit(e, " * them; the run writes its elements first, in C order of these dims. After");
  emit(e, " * %s_run_device(), read them once `stream` has passed the run.", p);
  emit(e, " */");
  emit(e, "int %s_output_shape(const %s_ctx *ctx, int i, long long *dims);", p, p);
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
  emit(e, "/*");
  emit(e, " * The model's inputs and outputs: name, element type (\"float32\", \"int64\",");
  emit(e, " * ...; a float16 is its 16 bits, a bool one byte), element size in bytes,");
  emit(e, " * rank and dims (NULL or -1 out of range).");
  emit(e, " */");
  emit_io_declarations(e, "");
}

/* net.h: the functions that describe the inputs and outputs; `model` is
   the parameter before the index ("int model, " in a serving program). */
void emit_io_declarations(Emitter *e, const char *model) {
  const char *p = e->prefix, *what[2] = {"input", "output"};
  for (int k = 0; k < 2; k++) {
    emit(e, "int %s_num_%ss(%s);", p, what[k], model[0] ? "int model" : "void");
    emit(e, "const char *%s_%s_name(%sint i);", p, what[k], model);
    emit(e, "const char *%s_%s_type(%sint i);", p, what[k], model);
    emit(e, "int %s_%s_element_size(%sint i);", p, what[k], model);
    emit(e, "int %s_%s_rank(%sint i);", p, what[k], model);
    emit(e, "const long long *%s_%s_dims(%sint i);", p, what[k], model);
  }
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

/* The weights: one file, or a serving program's file per model. */
static bool write_all_weights(Emitter *e, const char *const *tmps) {
  if (!e->g->serve)
    return write_weights(e, tmps[0]);
  for (int m = 0; m < e->g->serve->nmodels; m++)
    if (!write_model_weights(e, m, tmps[m]))
      return false;
  return true;
}

static bool emit_all(Emitter *e, const char *c_tmp, const char *h_tmp, const char *const *w_tmps) {
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
         write_all_weights(e, w_tmps);
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
  e.live_cname = arena_alloc(g->arena, sizeof(char *) * (size_t)(g->ntensors + 1));
  e.node_cname = arena_alloc(g->arena, sizeof(char *) * (size_t)(g->nnodes + 1));
  emit_reserve_names(&e);
  emit_name_tensors(&e);
  if (!check_graph(&e))
    return false;
  if (!check_pipeline(g))
    return false;
  if (g->serve && !check_serve(g, opt))
    return false;
  if (!open_sections(&st)) {
    opc_error("out of memory");
    free_sections(&st);
    return false;
  }
  /* net.c, net.h, then the weights file or each model's. */
  int nweights = g->serve ? g->serve->nmodels : 1;
  int npaths = 2 + nweights;
  const char **paths = arena_alloc(g->arena, sizeof(char *) * (size_t)npaths);
  const char **tmps = arena_alloc(g->arena, sizeof(char *) * (size_t)npaths);
  paths[0] = opt->c_path;
  paths[1] = opt->h_path;
  for (int i = 0; i < nweights; i++)
    paths[2 + i] = g->serve ? opt->model_weights_paths[i] : opt->weights_path;
  if (g->serve) {
    st.model_nweights = arena_alloc(g->arena, sizeof(int) * (size_t)nweights);
    st.model_weight_bytes = arena_alloc(g->arena, sizeof(int64_t) * (size_t)nweights);
  }
  for (int i = 0; i < npaths; i++)
    tmps[i] = emit_str(&e, "%s.tmp", paths[i]);
  bool ok = emit_all(&e, tmps[0], tmps[1], tmps + 2);
  free_sections(&st);
  for (int i = 0; i < npaths && ok; i++)
    if (rename(tmps[i], paths[i]) != 0) {
      opc_error("cannot write %s: %s", paths[i], strerror(errno));
      ok = false;
    }
  if (!ok) {
    for (int i = 0; i < npaths; i++) {
      unlink(tmps[i]);
      unlink(paths[i]);
    }
  }
  return ok;
}
