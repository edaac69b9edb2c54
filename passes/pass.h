/*
 * pass.h - the entry function of every pass, for pipeline.c.
 * Each pass lives in its own file and is only called from the pipeline.
 */
#ifndef OPC_PASS_H
#define OPC_PASS_H

#include "passes.h"
#include "schedule.h"

/*
 * What the passes of one compile share, so that each analysis runs once:
 * the cost model (device file and --cost-db), loaded when a pass first
 * asks, and the dependency graph of schedule units, built when a pass first
 * asks and dropped by run_pipeline after every pass that rewrites nodes.
 */
/* Live nodes by kind, for --stats. */
typedef struct Counts {
  int by_kind[OP_COUNT];
  int nodes, views;
} Counts;

struct PassContext {
  Graph *g;
  const PassOptions *opt;
  bool have_cost;
  CostModel cost;
  SchedDeps *deps; /* with costs; NULL until asked for */
  Counts before;   /* --stats: the nodes before the first pass */
  HopeReport hope; /* place-devices' (--devices gpu,cpu), for the schedule report */
  HiosReport hios; /* the schedule pass's, for the schedule report */
  const char **qdq_notes; /* fuse-qdq's patterns left float, one line each, for --report */
  int nqdq_notes;
};

/* The cost model; NULL after reporting a bad device or cost file. */
const CostModel *pass_cost_model(PassContext *ctx);
/* The unit graph of the current nodes, with the cost model's costs (which
   must have loaded). */
SchedDeps *pass_deps(PassContext *ctx);

/* The scheduling passes up to the events (no memory plan): what a
   prediction of the schedule needs (serve_plan.c). */
bool run_schedule_passes(Graph *g, const PassOptions *opt, PassContext *ctx);

/* simplification */
bool pass_compile_bodies(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_fold_constants(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_remove_identity(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_eliminate_dead(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_eliminate_common(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_alias_reshape(Graph *g, const PassOptions *opt, PassContext *ctx);
/* fusion */
bool pass_fuse_qdq(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_fold_batchnorm(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_fuse_bias(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_fuse_pad(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_fuse_gelu(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_fuse_gated(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_fuse_squeeze_excite(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_fuse_activation(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_fuse_residual(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_lower_precision(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_choose_layout(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_concat_in_place(Graph *g, const PassOptions *opt, PassContext *ctx);
/* inter-operator scheduling */
bool pass_merge_convs(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_place_devices(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_schedule(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_sync(Graph *g, const PassOptions *opt, PassContext *ctx);
bool pass_verify_schedule(Graph *g, const PassOptions *opt, PassContext *ctx);
/* storage */
bool pass_plan_memory(Graph *g, const PassOptions *opt, PassContext *ctx);

#endif
