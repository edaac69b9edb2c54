/*
 * node_table.c - the table of issued nodes in net.c (names, streams,
 * stages, events, predicted costs, profile keys) and what reads it:
 * begin_node() and end_node(), main's --trace and --verbose, and
 * net_profile().
 */
#include <string.h>

#include "emit.h"
#include "profile_template.h"

/* ------------------------------------------------------- trace, describe */

/* main's --trace: one run with every node timestamped, as a Chrome trace. */
void emit_trace_run(Emitter *e) {
  const char *p = e->prefix;
  emit(e, "/*");
  emit(e, " * --trace: one run issued directly (not from the CUDA graph) with every node");
  emit(e, " * timestamped on its stream, written as a Chrome trace (chrome://tracing,");
  emit(e, " * ui.perfetto.dev): one row per stream, microseconds from the start.");
  emit(e, " */");
  emit(e, "int %s_main_trace(%s_ctx *c, const char *path)", p, p);
  emit_open(e, "{");
  if (emit_multi_gpu(e)) {
    emit(e, "(void)path; /* one clock is one GPU's: events of two GPUs cannot be compared */");
    emit(e, "snprintf(c->error, sizeof c->error, \"--trace times one GPU; this program runs on %d\");",
         e->g->sched.ndevices);
    emit(e, "return -1;");
    emit_close(e, "}");
    emit_blank(e);
    return;
  }
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
void emit_describe(Emitter *e, bool for_main) {
  emit(e, "/* --verbose: each node's stream, and the form of calls create() chose for it. */");
  if (for_main)
    emit(e, "void %s_main_describe(const %s_ctx *c)", e->prefix, e->prefix);
  else
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

/* ---------------------------------------------------- node table, profile */

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

/* The issued nodes' waits inside their stages (the sync pass found them),
   one after the other: node_info's first_wait and nwaits index this. */
static void emit_stage_waits(Emitter *e, int total) {
  EmitState *st = e->st;
  int *waits = arena_alloc(e->g->arena, sizeof(int) * ((size_t)total + 1));
  int count = 0;
  for (int k = 0; k < st->nissued; k++)
    for (int w = 0; w < node_sched(e->g, st->issued[k])->nstage_waits; w++)
      waits[count++] = node_sched(e->g, st->issued[k])->stage_waits[w];
  emit(e, "/* What each node's issue waits on inside its stage. */");
  emit(e, "static const int stage_wait[%d] = {", total > 0 ? total : 1);
  emit_int_rows(e, waits, total > 0 ? total : 1);
  emit(e, "};");
}

/* The profile's key of a unit (ir/cost_key.c), as a C string body. */
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
  int nstages = g->sched.nstages;
  emit(e, "enum { STAGE_COUNT = %d, STREAM_COUNT = %d };", nstages, g->sched.nstreams);
  emit_open(e, "static const struct {");
  emit(e, "int first, count; /* in stage_node[] */");
  emit(e, "double predicted_us;");
  emit_close(e, "} stage_info[STAGE_COUNT] = {");
  e->indent++;
  int first = 0;
  for (int s = 0; s < nstages; s++) {
    const Stage *stage = &g->sched.stages[s];
    int count = 0;
    for (int i = 0; i < stage->nnodes; i++)
      count += index_of[stage->nodes[i]->id] >= 0;
    emit(e, "{%d, %d, %.4f},", first, count, stage->predicted_us);
    first += count;
  }
  e->indent--;
  emit(e, "};");
  emit(e, "/* The nodes of each stage, in issue order. */");
  int *nodes = arena_alloc(g->arena, sizeof(int) * ((size_t)st->nissued + 1));
  int count = 0;
  for (int s = 0; s < nstages; s++) {
    const Stage *stage = &g->sched.stages[s];
    for (int i = 0; i < stage->nnodes; i++) {
      int k = index_of[stage->nodes[i]->id];
      if (k >= 0 && count < st->nissued)
        nodes[count++] = k;
    }
  }
  emit(e, "static const int stage_node[%d] = {", count > 0 ? count : 1);
  emit_int_rows(e, nodes, count > 0 ? count : 1);
  emit(e, "};");
}

/* The event of the schedule numbered k, for net_profile(). */
static void emit_schedule_event(Emitter *e) {
  emit(e, "static cudaEvent_t schedule_event(%s_ctx *c, int k)", e->prefix);
  emit_open(e, "{");
  if (e->g->sched.nevents > 0) {
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
void emit_node_table(Emitter *e) {
  EmitState *st = e->st;
  const char *p = e->prefix;
  emit(e, "/* The issued nodes, in order: for NVTX ranges, messages and profiles. */");
  emit(e, "enum { NODE_COUNT = %d };", st->nissued);
  emit_device_tables(e);
  if (st->nissued == 0) {
    emit_blank(e);
    return;
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
  int first_wait = 0;
  for (int k = 0; k < st->nissued; k++) {
    const Node *n = st->issued[k];
    NodeSchedule *ns = node_sched(e->g, n);
    emit(e, "{\"%s\", \"%s\", \"%s\", %d, %d, %d, %d, %d, %.4f,", emit_c_string(e, n->name),
         op_name(n->op), emit_node_label(e, n), ns->stream, ns->stage, ns->record_event, first_wait,
         ns->nstage_waits, ns->cost_us);
    emit(e, " \"%s\"},", unit_key(e, n));
    first_wait += ns->nstage_waits;
  }
  e->indent--;
  emit(e, "};");
  if (!emit_multi_gpu(e) && !emit_has_cpu(e)) { /* what net_profile() reads: one GPU's */
    emit_stage_waits(e, first_wait);
    emit_stage_tables(e, issued_by_id(e));
    emit(e, "/* Each node's work, for net_profile(). */");
    emit(e, "static int (*const node_run[NODE_COUNT])(%s_ctx *c) = {", p);
    e->indent++;
    for (int k = 0; k < st->nissued; k++)
      emit(e, "run_%s,", node_id(e, st->issued[k]));
    e->indent--;
    emit(e, "};");
  }
  emit_blank(e);
  emit(e, "/* Node k starts on `stream`: it names messages and an NVTX range, and is");
  emit(e, "   timestamped while tracing. Not inlined, as the checking helpers. */");
  emit(e, "static __attribute__((noinline)) int begin_node(%s_ctx *c, int k, cudaStream_t stream)", p);
  emit_open(e, "{");
  emit(e, "c->node = node_info[k].label;");
  if (emit_multi_gpu(e)) {
    emit(e, "/* a kernel goes only into a stream of the current GPU */");
    emit(e, "if (!cuda_ok(c, cudaSetDevice(c->gpu[node_device[k]]), \"cudaSetDevice\"))");
    emit(e, "  return 0;");
  }
  emit(e, "nvtxRangePushA(node_info[k].name);");
  emit(e, "return !c->trace || cuda_ok(c, cudaEventRecord(c->trace[2 * k], stream), \"cudaEventRecord\");");
  emit_close(e, "}");
  emit_blank(e);
  emit_node_form(e);
  emit(e, "static __attribute__((noinline)) int end_node(%s_ctx *c, int k, cudaStream_t stream)", p);
  emit_open(e, "{");
  emit(e, "if (c->trace && !cuda_ok(c, cudaEventRecord(c->trace[2 * k + 1], stream), \"cudaEventRecord\"))");
  emit(e, "  return 0;");
  emit(e, "nvtxRangePop();");
  emit(e, "c->node = NULL;");
  emit(e, "return 1;");
  emit_close(e, "}");
  emit_blank(e);
}

/* A net_profile() that only says why this program cannot be profiled. */
static void emit_refused_profile(Emitter *e, const char *why, const char *message) {
  const char *p = e->prefix;
  emit(e, "/* net_profile(): %s. */", why);
  emit(e, "int %s_profile(%s_ctx *c, const char *path, int repeats)", p, p);
  emit_open(e, "{");
  emit(e, "(void)path;");
  emit(e, "(void)repeats;");
  emit(e, "snprintf(c->error, sizeof c->error, \"%s\");", emit_c_string(e, message));
  emit(e, "return -1;");
  emit_close(e, "}");
  emit_blank(e);
}

/* net_profile(): the schedule's facts, then the fixed code of profile_template.c. */
void emit_profile(Emitter *e) {
  const char *p = e->prefix;
  Graph *g = e->g;
  used(e)->lib[LIB_CUDA] = true;
  if (emit_multi_gpu(e)) {
    emit_refused_profile(e, "events time work on one GPU only, and this program spans several",
                         emit_str(e, "profiles time one GPU; this program runs on %d", gpu_count(g)));
    return;
  }
  if (emit_has_cpu(e)) {
    emit_refused_profile(e, "it times each node alone on its GPU stream with events, and this "
                            "program runs some on the host CPU, in host functions",
                         "profiles time the GPU's nodes; this program runs some on the CPU: "
                         "profile its --target cpu build for the CPU's costs");
    return;
  }
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
  emit(e, "const char *precision;");
  emit(e, "int tf32;");
  emit(e, "double predicted_us;");
  emit(e, "int cpu_program; /* --target cpu's program, not the GPU's */");
  const char *precision = e->opt->precision ? e->opt->precision : e->opt->tf32 ? "tf32" : "fp32";
  emit_close(e, "} schedule_info = {\"%s\", \"%s\", \"%s\", %d, %.4f, %d};",
              emit_c_string(e, g->path ? g->path : ""), g->sched.scheduler, precision,
              e->opt->tf32 ? 1 : 0, g->sched.predicted_us, e->opt->target == TARGET_CPU);
  emit_blank(e);
  put_template(e->f, p, profile_template);
  emit_blank(e);
}
