/*
 * serve.c - what a serving program (Graph.serve) adds to net.c: the tables
 * of its models, copies and their inputs and outputs; set_active(), which
 * picks the copies enqueue() issues; one CUDA graph per combination of
 * copies a round can run; and the launcher, net_submit() and the rest of
 * the API, whose fixed code is serve_template.c.
 */
#include <string.h>

#include "emit.h"
#include "serve_main_template.h"
#include "serve_template.h"

/* Combinations of copies a round can run: each model's count of requests,
   0 to its copies, not all 0. */
int serve_combinations(const ServeInfo *s) {
  long long count = 1;
  for (int m = 0; m < s->nmodels; m++)
    count *= s->models[m].ninstances + 1;
  return count - 1 > LIMIT_SERVE_COMBINATIONS ? LIMIT_SERVE_COMBINATIONS + 1 : (int)(count - 1);
}

bool check_serve(const Graph *g, const EmitOptions *opt) {
  const ServeInfo *s = g->serve;
  int combos = serve_combinations(s);
  if (combos > LIMIT_SERVE_COMBINATIONS) {
    ir_error(g, NULL,
             "%d models with these instances make more than %d combinations of copies, each a "
             "CUDA graph; give fewer instances",
             s->nmodels, LIMIT_SERVE_COMBINATIONS);
    return false;
  }
  if (!opt->model_weights_paths) {
    ir_error(g, NULL, "internal error: no weights file names for the models");
    return false;
  }
  return true;
}

/* Every copy's inputs, then every copy's outputs: the `io` numbering. */
static int io_count(const Graph *g) { return g->ninputs + g->noutputs; }

static const Tensor *io_tensor(const Graph *g, int k) {
  return k < g->ninputs ? g->inputs[k] : g->outputs[k - g->ninputs];
}

/* The tensor's name in its model: "a.0/x" is "x". */
static const char *model_name_of(const Tensor *t) {
  const char *slash = strchr(t->name, '/');
  return slash ? slash + 1 : t->name;
}

static int64_t io_bytes(const Tensor *t) { return tensor_numel(t) * (int64_t)dtype_size(t->dtype); }

static int64_t staging_bytes(const Graph *g) {
  int64_t total = 0;
  for (int k = 0; k < io_count(g); k++)
    total += (io_bytes(io_tensor(g, k)) + 63) / 64 * 64;
  return total;
}

static void emit_model_table(Emitter *e) {
  const ServeInfo *s = e->g->serve;
  emit_open(e, "static const struct {");
  emit(e, "const char *name;");
  emit(e, "int instances, first_instance; /* its copies */");
  emit(e, "int ninputs, noutputs;");
  emit(e, "int policy_limit;              /* requests per round, by default */");
  emit(e, "double policy_interval_ms;     /* between two rounds that take it, by default */");
  emit_close(e, "} model_info[MODEL_COUNT] = {");
  e->indent++;
  for (int m = 0; m < s->nmodels; m++) {
    const ServedModel *sm = &s->models[m];
    emit(e, "{\"%s\", %d, %d, %d, %d, %d, %s},", emit_c_string(e, sm->name), sm->ninstances,
         sm->first_instance, sm->ninputs, sm->noutputs, sm->ninstances,
         emit_float(e, (float)(e->opt->serve_interval_ms ? e->opt->serve_interval_ms[m] : 0)));
  }
  e->indent--;
  emit(e, "};");
  emit(e, "/* Each copy's model, and its first input and output in io_info and c->io. */");
  emit_open(e, "static const struct {");
  emit(e, "int model, first_input, first_output;");
  emit_close(e, "} instance_info[INSTANCE_COUNT] = {");
  e->indent++;
  for (int i = 0; i < s->ninstances; i++)
    emit(e, "{%d, %d, %d}, /* %s.%d */", s->instance_model[i], s->first_input[i],
         e->g->ninputs + s->first_output[i], comment_text(e, s->models[s->instance_model[i]].name),
         i - s->models[s->instance_model[i]].first_instance);
  e->indent--;
  emit(e, "};");
}

static void emit_io_table(Emitter *e) {
  Graph *g = e->g;
  emit(e, "/* Every copy's inputs, then every copy's outputs: name in the model, type,");
  emit(e, "   shape, bytes, and place in a round's pinned staging memory. */");
  emit_open(e, "static const struct {");
  emit(e, "const char *name, *type;");
  emit(e, "int element_size, rank;");
  emit(e, "long long dims[8];");
  emit(e, "long long bytes, staging;");
  emit_close(e, "} io_info[IO_COUNT] = {");
  e->indent++;
  int64_t staging = 0;
  for (int k = 0; k < io_count(g); k++) {
    const Tensor *t = io_tensor(g, k);
    char dims[256] = "";
    for (int d = 0; d < t->rank; d++)
      snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", d ? ", " : "",
               (long long)t->dims[d]);
    emit(e, "{\"%s\", \"%s\", %d, %d, {%s}, %lld, %lld},", emit_c_string(e, model_name_of(t)),
         dtype_onnx_name(t->dtype), (int)dtype_size(t->dtype), t->rank, dims,
         (long long)io_bytes(t), (long long)staging);
    staging += (io_bytes(t) + 63) / 64 * 64;
  }
  e->indent--;
  emit(e, "};");
}

void emit_serve_tables(Emitter *e) {
  Graph *g = e->g;
  const ServeInfo *s = g->serve;
  int most = 1;
  for (int m = 0; m < s->nmodels; m++) {
    if (s->models[m].ninputs > most)
      most = s->models[m].ninputs;
    if (s->models[m].noutputs > most)
      most = s->models[m].noutputs;
  }
  emit(e, "/* The models this program serves, their copies, and the combinations of copies");
  emit(e, "   a round can run (a CUDA graph each). */");
  emit(e, "enum { MODEL_COUNT = %d, INSTANCE_COUNT = %d, COMBO_COUNT = %d };", s->nmodels,
       s->ninstances, serve_combinations(s));
  emit(e, "enum { IO_COUNT = %d, MAX_MODEL_IO = %d };", io_count(g) > 0 ? io_count(g) : 1, most);
  emit(e, "/* Requests each model's queue holds; rounds queued on the device at once. */");
  emit(e, "enum { QUEUE_CAPACITY = %d, ROUNDS_IN_FLIGHT = 2 };",
       e->opt->queue_capacity > 0 ? e->opt->queue_capacity : 256);
  emit(e, "static const size_t STAGING_BYTES = %lld; /* per round */",
       (long long)(staging_bytes(g) > 0 ? staging_bytes(g) : 64));
  emit_blank(e);
  emit_model_table(e);
  if (io_count(g) > 0)
    emit_io_table(e);
  emit_blank(e);
}

/* create(): c->io, each copy's input and output buffers. */
void emit_serve_bind_io(Emitter *e) {
  Graph *g = e->g;
  emit(e, "/* Each copy's inputs and outputs, for the rounds' copies. */");
  for (int k = 0; k < io_count(g); k++)
    emit(e, "c->io[%d] = %s;", k, buf(e, io_tensor(g, k)));
}

/* set_active(), capture(c, combo) and issue_round(c, combo). */
void emit_serve_rounds(Emitter *e) {
  const char *p = e->prefix;
  emit(e, "/* The copies enqueue() issues for a combination: combo + 1 counts each");
  emit(e, "   model's requests in mixed radix (its copies + 1 per model), first copies first. */");
  emit(e, "static void set_active(%s_ctx *c, int combo)", p);
  emit_open(e, "{");
  emit(e, "int rest = combo + 1;");
  emit_open(e, "for (int m = 0; m < MODEL_COUNT; m++) {");
  emit(e, "int count = rest %% (model_info[m].instances + 1);");
  emit(e, "rest /= model_info[m].instances + 1;");
  emit(e, "for (int k = 0; k < model_info[m].instances; k++)");
  emit(e, "  c->active[model_info[m].first_instance + k] = k < count;");
  emit_close(e, "}");
  emit_close(e, "}");
  emit_blank(e);
  if (e->opt->cuda_graph)
    emit_capture_into(e, "the schedule of one combination of copies into its CUDA graph",
                      ", int combo", "set_active(c, combo);", "&c->graph[combo]");
  emit(e, "/* A round's work on the first stream (the launcher thread's). */");
  emit(e, "static int issue_round(%s_ctx *c, int combo)", p);
  emit_open(e, "{");
  if (e->opt->cuda_graph) {
    emit(e, "return cuda_ok(c, cudaGraphLaunch(c->graph[combo], c->stream[0]), \"cudaGraphLaunch\") ? 0 : -1;");
  } else {
    emit(e, "set_active(c, combo);");
    emit(e, "return enqueue(c, c->stream[0]);");
  }
  emit_close(e, "}");
  emit_blank(e);
  put_template(e->f, p, serve_template);
  emit_blank(e);
}

/* create(): each model's weights, from its file (or linked in). */
void emit_serve_weights(Emitter *e) {
  if (e->st->nweights == 0) {
    emit(e, "(void)weights_dir; /* no model has constants */");
    return;
  }
  emit_open(e, "for (int m = 0; m < MODEL_COUNT; m++) {");
  emit(e, "char path[4096];");
  emit(e, "const char *dir = weights_dir ? weights_dir : %s;",
       e->opt->embed_weights ? "\"\"" : "default_weights_dir");
  emit(e, "if ((size_t)snprintf(path, sizeof path, \"%%s/%%s\", dir, weights_info[m].file) >= sizeof path) {");
  emit(e, "  snprintf(c->error, sizeof c->error, \"the weights folder's name is too long\");");
  emit(e, "  goto fail;");
  emit(e, "}");
  if (e->opt->embed_weights)
    emit(e, "if ((weights_dir ? load_weights(c, m, path) : upload_linked_weights(c, m)) != 0)");
  else
    emit(e, "if (load_weights(c, m, path) != 0)");
  emit(e, "  goto fail;");
  emit_close(e, "}");
}

/* The end of create(): the eager run, one graph per combination, the threads. */
void emit_serve_create(Emitter *e) {
  if (e->opt->cuda_graph) {
    emit_blank(e);
    emit(e, "/* One eager run of every copy first: cuDNN and cuBLAS initialise lazily on");
    emit(e, "   first use, which a capture does not allow, and a library error then names");
    emit(e, "   its node. Then a CUDA graph for each combination of copies. */");
    emit(e, "set_active(c, COMBO_COUNT - 1);");
    emit(e, "if (enqueue(c, c->stream[0]) != 0 ||");
    emit(e, "    !cuda_ok(c, cudaStreamSynchronize(c->stream[0]), \"cudaStreamSynchronize\"))");
    emit(e, "  goto fail;");
    emit(e, "for (int k = 0; k < COMBO_COUNT; k++)");
    emit(e, "  if (capture(c, k) != 0)");
    emit(e, "    goto fail;");
  }
  emit(e, "if (serve_start(c) != 0)");
  emit(e, "  goto fail;");
}

/* main(): the load generator of serve_main_template.c, after what it reads. */
void emit_serve_main(Emitter *e) {
  const ServeInfo *s = e->g->serve;
  emit(e, "/* Each model's weights file, as opc wrote it. */");
  emit(e, "static const char *const weights_file[MODEL_COUNT] = {");
  for (int m = 0; m < s->nmodels; m++)
    emit(e, "  \"%s\",", emit_c_string(e, base_name(e, e->opt->model_weights_paths[m])));
  emit(e, "};");
  emit_blank(e);
  emit_describe(e, false);
  put_template(e->f, e->prefix, serve_main_template);
}

/* net.h: the serving API. */
void emit_serve_header(Emitter *e) {
  const char *p = e->prefix;
  const ServeInfo *s = e->g->serve;
  char *up = emit_str(e, "%s", p);
  for (char *q = up; *q; q++)
    if (*q >= 'a' && *q <= 'z')
      *q = (char)(*q - 'a' + 'A');
  emit(e, "typedef struct %s_ctx %s_ctx;", p, p);
  emit(e, "/* A submitted request, until net_wait() or net_poll() collects it. */");
  emit(e, "typedef long long %s_request;", p);
  emit_blank(e);
  emit(e, "/* What became of a request (seconds on CLOCK_MONOTONIC). */");
  emit_open(e, "typedef struct %s_times {", p);
  emit(e, "double submitted; /* %s_submit() */", p);
  emit(e, "double started;   /* its round was taken from the queues */");
  emit(e, "double finished;  /* its outputs were written */");
  emit(e, "int instance;     /* the copy of its model that ran it */");
  emit(e, "long long round;  /* the requests of one round ran together */");
  emit_close(e, "} %s_times;", p);
  emit_blank(e);
  emit(e, "/* Status of the calls below. */");
  emit(e, "enum { %s_OK = 0, %s_ERROR = -1, %s_QUEUE_FULL = -2, %s_BAD_ARGUMENT = -3, %s_PENDING = 1 };",
       up, up, up, up, up);
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * The models, by number:");
  for (int m = 0; m < s->nmodels; m++) {
    double interval = e->opt->serve_interval_ms ? e->opt->serve_interval_ms[m] : 0;
    emit(e, " *   %d  %s (%s): %d instance%s%s", m, comment_text(e, s->models[m].name),
         comment_text(e, s->models[m].path), s->models[m].ninstances,
         s->models[m].ninstances == 1 ? "" : "s",
         interval > 0 ? emit_str(e, ", launcher interval %.3g ms", interval) : "");
  }
  /* The note's lines, each its own comment line. */
  for (const char *line = e->opt->serve_note; line && *line;) {
    const char *end = strchr(line, '\n');
    int len = end ? (int)(end - line) : (int)strlen(line);
    emit(e, " * %s", comment_text(e, emit_str(e, "%.*s", len, line)));
    line = end ? end + 1 : line + len;
  }
  emit(e, " * An instance is a copy of the model: a round runs up to that many of its");
  emit(e, " * requests at once, beside the other models' requests.");
  emit(e, " */");
  emit(e, "int %s_num_models(void);", p);
  emit(e, "const char *%s_model_name(int model);", p);
  emit(e, "int %s_model_index(const char *name); /* -1 when no model has that name */", p);
  emit(e, "int %s_model_instances(int model);", p);
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * Creates a context: reads each model's weights file from `weights_dir` (NULL:");
  emit(e, " * where opc wrote them), allocates every buffer, chooses the cuDNN algorithms,");
  emit(e, " * compiles the kernels%s, and starts", e->opt->cuda_graph ? ", captures a CUDA graph for each combination\n * of copies a round can run" : "");
  emit(e, " * the launcher and completer threads. Returns 0 on success; on failure *ctx is");
  emit(e, " * still set when memory allowed, so that %s_error(*ctx) explains.", p);
  emit(e, " */");
  emit(e, "int %s_create(%s_ctx **ctx, const char *weights_dir);", p, p);
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * Queues a request for `model`: host buffers of its inputs and outputs, in the");
  emit(e, " * order of %s_input_name() and %s_output_name(). The inputs are read when its", p, p);
  emit(e, " * round starts and the outputs written when it ends, so both must stay valid");
  emit(e, " * until %s_wait() or %s_poll() says it is done. Never blocks, allocates", p, p);
  emit(e, " * nothing; any thread may call it. Returns %s_OK and sets *request,", up);
  emit(e, " * %s_QUEUE_FULL when the model's queue is full (the request is not taken),", up);
  emit(e, " * %s_BAD_ARGUMENT for an unknown model or missing buffers.", up);
  emit(e, " */");
  emit(e, "int %s_submit(%s_ctx *ctx, int model, const void *const *inputs, void *const *outputs,", p, p);
  emit(e, "%*s%s_request *request);", (int)strlen(p) + 12, "", p);
  emit(e, "/* Blocks until the request is done and collects it: its status (%s_OK, or", up);
  emit(e, "   %s_ERROR when its round failed) and, if `times` is not NULL, its times. */", up);
  emit(e, "int %s_wait(%s_ctx *ctx, %s_request request, %s_times *times);", p, p, p, p);
  emit(e, "/* The same without blocking: %s_PENDING while it is not done. */", up);
  emit(e, "int %s_poll(%s_ctx *ctx, %s_request request, %s_times *times);", p, p, p, p);
  emit(e, "/* Submits and waits: one inference. */");
  emit(e, "int %s_run(%s_ctx *ctx, int model, const void *const *inputs, void *const *outputs);", p, p);
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * The launcher's policy for a model: at most `limit` of its requests per round");
  emit(e, " * (1 to its instances), and at least `interval_ms` between two rounds that take");
  emit(e, " * it, so that more requests gather. The defaults are opc's choice.");
  emit(e, " */");
  emit(e, "int %s_set_policy(%s_ctx *ctx, int model, int limit, double interval_ms);", p, p);
  emit(e, "/* Requests of the model waiting in its queue. */");
  emit(e, "int %s_queue_length(%s_ctx *ctx, int model);", p, p);
  emit_blank(e);
  emit(e, "/* Waits for every submitted request to finish, then frees everything. */");
  emit(e, "void %s_destroy(%s_ctx *ctx);", p, p);
  emit(e, "/* The message of the last call that failed, naming the model or the node. */");
  emit(e, "const char *%s_error(const %s_ctx *ctx);", p, p);
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * Times every operation of the schedule alone and every stage as scheduled,");
  emit(e, " * as for one model (the file that `opc --cost-db` reads). Call it before");
  emit(e, " * submitting requests. Returns 0 on success.");
  emit(e, " */");
  emit(e, "int %s_profile(%s_ctx *ctx, const char *path, int repeats);", p, p);
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * Each model's inputs and outputs: name, element type (\"float32\", \"int64\",");
  emit(e, " * ...; a float16 is its 16 bits, a bool one byte), element size in bytes, rank");
  emit(e, " * and dims (NULL or -1 out of range).");
  emit(e, " */");
  emit_io_declarations(e, "int model, ");
}
