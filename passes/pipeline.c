/*
 * pipeline.c - the fixed pass pipeline: the only place that knows the order.
 *
 * Simplification comes first so that fusion sees canonical patterns;
 * fusion runs before in-place concat because a fused node is what writes
 * into the concat's slice; scheduling sees the final set of nodes; memory
 * is planned last because buffer reuse depends on the schedule, and the
 * schedule check runs after it so that it can check that reuse too.
 */
#include <string.h>

#include "pass.h"

/* name, optional (skipped at -O0), rewrites (may change the nodes), entry */
static const Pass pipeline[] = {
    {"compile-bodies", false, true, pass_compile_bodies}, /* a run-time Loop's body, alone */
    {"fuse-qdq", true, true, pass_fuse_qdq}, /* before fold-constants turns DQ(w) into floats */
    {"fold-constants", false, true, pass_fold_constants}, /* no code exists for shape arithmetic */
    {"remove-identity", true, true, pass_remove_identity},
    {"eliminate-dead", true, true, pass_eliminate_dead},
    {"eliminate-common", true, true, pass_eliminate_common},
    {"alias-reshape", true, true, pass_alias_reshape},
    {"fold-batchnorm", true, true, pass_fold_batchnorm},
    {"fuse-bias", true, true, pass_fuse_bias},
    {"fuse-pad", true, true, pass_fuse_pad},
    {"fuse-gelu", true, true, pass_fuse_gelu},
    {"fuse-gated", true, true, pass_fuse_gated},
    {"fuse-activation", true, true, pass_fuse_activation},
    {"fuse-residual", true, true, pass_fuse_residual},
    {"fuse-squeeze-excite", true, true, pass_fuse_squeeze_excite}, /* float32 only */
    {"eliminate-dead", true, true, pass_eliminate_dead}, /* what fusion left behind */
    {"lower-precision", false, true, pass_lower_precision}, /* --precision fp16|bf16 */
    {"choose-layout", false, true, pass_choose_layout},     /* NHWC around 16-bit convolutions */
    {"concat-in-place", true, true, pass_concat_in_place},
    {"merge-convs", true, true, pass_merge_convs},
    {"place-devices", false, true, pass_place_devices}, /* --gpus N, --devices gpu,cpu */
    {"schedule", false, false, pass_schedule},
    {"sync", false, false, pass_sync},
    {"plan-memory", false, false, pass_plan_memory},
    {"verify-schedule", false, false, pass_verify_schedule},
};

const Pass *pipeline_passes(int *count) {
  *count = (int)(sizeof pipeline / sizeof pipeline[0]);
  return pipeline;
}

static bool known_pass(const char *name) {
  int n;
  const Pass *p = pipeline_passes(&n);
  for (int i = 0; i < n; i++)
    if (strcmp(p[i].name, name) == 0)
      return true;
  return strcmp(name, "all") == 0;
}

bool pipeline_check_dump_after(const char *option, const char *name) {
  if (known_pass(name))
    return true;
  char list[1024];
  int len = snprintf(list, sizeof list, "all");
  int n;
  const Pass *p = pipeline_passes(&n);
  for (int i = 0; i < n; i++) {
    bool seen = false; /* eliminate-dead runs twice */
    for (int j = 0; j < i; j++)
      seen |= strcmp(p[j].name, p[i].name) == 0;
    if (!seen)
      len += snprintf(list + len, sizeof list - (size_t)len, ", %s", p[i].name);
  }
  opc_error("%s: unknown pass '%s'; valid names: %s", option, name, list);
  return false;
}

const char *pass_precision_name(const PassOptions *opt) {
  return opt->half == DT_FLOAT16 ? "fp16" : opt->half == DT_BFLOAT16 ? "bf16" : opt->tf32 ? "tf32" : "fp32";
}

/* -------------------------------------------------------------- context */

PassContext *pass_context_new(Graph *g, const PassOptions *opt) {
  PassContext *ctx = arena_alloc(g->arena, sizeof *ctx);
  *ctx = (PassContext){.g = g, .opt = opt};
  return ctx;
}

const CostModel *pass_cost_model(PassContext *ctx) {
  if (!ctx->have_cost) {
    if (!cost_model_from_options(ctx->g, ctx->opt, &ctx->cost))
      return NULL;
    ctx->have_cost = true;
  }
  return &ctx->cost;
}

SchedDeps *pass_deps(PassContext *ctx) {
  if (!ctx->deps)
    ctx->deps = deps_build(ctx->g, pass_cost_model(ctx));
  return ctx->deps;
}

/* ---------------------------------------------------------------- stats */

static void count_nodes(const Graph *g, Counts *c) {
  memset(c, 0, sizeof *c);
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (n->dead)
      continue;
    c->by_kind[n->op]++;
    c->nodes++;
    c->views += n->is_view;
  }
}

static void print_stats(const Counts *before, const Counts *after) {
  /* Kinds sorted by name: a simple selection over the few present. */
  bool done[OP_COUNT] = {false};
  printf("%-24s %8s %8s\n", "operator", "before", "after");
  for (;;) {
    int pick = -1;
    for (int k = 0; k < OP_COUNT; k++) {
      if (done[k] || (!before->by_kind[k] && !after->by_kind[k]))
        continue;
      if (pick < 0 || strcmp(op_name((OpKind)k), op_name((OpKind)pick)) < 0)
        pick = k;
    }
    if (pick < 0)
      break;
    done[pick] = true;
    printf("%-24s %8d %8d\n", op_name((OpKind)pick), before->by_kind[pick], after->by_kind[pick]);
  }
  printf("%-24s %8d %8d\n", "total nodes", before->nodes, after->nodes);
  printf("%-24s %8d %8d\n", "views", before->views, after->views);
  printf("%-24s %8d %8d\n", "schedule units", before->nodes - before->views,
         after->nodes - after->views);
}

/* ------------------------------------------------------------- pipeline */

/* The passes of `parts` (bit 1 << PipelinePart), in pipeline order, up to
   and including `last` (NULL: to the end). */
static bool run_passes(Graph *g, const PassOptions *opt, PassContext *ctx, unsigned parts,
                       const char *last) {
  if (opt->dump_after && !pipeline_check_dump_after("--dump-after", opt->dump_after))
    return false;
  if (!graph_toposort(g))
    return false;
  count_nodes(g, &ctx->before);

  FILE *dump = opt->dump_file ? opt->dump_file : stdout;
  int n;
  const Pass *p = pipeline_passes(&n);
  for (int i = 0; i < n; i++) {
    PipelinePart part = p[i].rewrites ? PIPELINE_REWRITE : PIPELINE_SCHEDULE;
    if (!(parts >> part & 1u))
      continue;
    if (p[i].optional && opt->opt_level <= 0)
      continue;
    if (!p[i].run(g, opt, ctx))
      return false;
    if (p[i].rewrites)
      ctx->deps = NULL;
    if (opt->verify_each && !graph_verify(g)) {
      ir_error(g, NULL, "IR verification failed after pass '%s'", p[i].name);
      return false;
    }
    if (opt->dump_after &&
        (strcmp(opt->dump_after, "all") == 0 || strcmp(opt->dump_after, p[i].name) == 0)) {
      fprintf(dump, "# after %s\n", p[i].name);
      graph_dump(g, dump);
    }
    if (last && strcmp(p[i].name, last) == 0)
      break;
  }
  return true;
}

bool run_pipeline(Graph *g, const PassOptions *opt, PassContext *ctx) {
  return run_passes(g, opt, ctx, 1u << PIPELINE_REWRITE | 1u << PIPELINE_SCHEDULE, NULL);
}

bool run_pipeline_part(Graph *g, const PassOptions *opt, PassContext *ctx, PipelinePart part) {
  return run_passes(g, opt, ctx, 1u << part, NULL);
}

bool run_schedule_passes(Graph *g, const PassOptions *opt, PassContext *ctx) {
  return run_passes(g, opt, ctx, 1u << PIPELINE_SCHEDULE, "sync");
}

void pipeline_print_stats(Graph *g, const PassContext *ctx) {
  Counts after;
  count_nodes(g, &after);
  print_stats(&ctx->before, &after);
}
