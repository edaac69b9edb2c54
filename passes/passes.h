/* passes.h - rewriting the IR: simplification, fusion, merging, scheduling. */
#ifndef OPC_PASSES_H
#define OPC_PASSES_H

#include "../ir/ir.h"

/* --layout: the storage order of 4-D activations around 16-bit convolutions. */
typedef enum TensorLayout {
  LAYOUT_AUTO, /* channels-last under --precision fp16|bf16, else NCHW */
  LAYOUT_NCHW, /* ONNX's order everywhere */
  LAYOUT_NHWC, /* channels-last around 16-bit convolutions */
} TensorLayout;

typedef struct PassOptions {
  int opt_level;          /* 0: only the passes code generation needs; 1: all (default) */
  const char *dump_after; /* name of a pass, or "all"; NULL for none */
  FILE *dump_file;        /* where dumps go; stdout when NULL */
  bool verify_each;       /* graph_verify() after every pass */
  bool stats;             /* --stats: node counts by kind before and after */

  /* scheduling */
  const char *scheduler;     /* "ios", "lios", "greedy", "sequential"; NULL: default */
  int streams;               /* --streams: at most this many streams */
  int prune_r, prune_s;      /* --prune r,s for IOS */
  const char *lios_priority; /* "rank" (default) or "paper" */
  const char *device;        /* --device NAME|FILE; NULL: h100 */
  const char *cost_db;       /* --cost-db FILE; NULL: analytic model only */
  bool no_merge;             /* forbid operator merging */
  bool report;               /* --report: per-stage table on stdout */
  const char *emit_schedule; /* --emit-schedule FILE.json */
  const char *emit_dot;      /* --emit-dot FILE.dot */
  bool tf32;                 /* --precision tf32: convolutions and GEMMs on tensor cores */
  DType half;                /* --precision fp16|bf16: DT_FLOAT16 or DT_BFLOAT16; else 0 */
  bool io_half;              /* --io-precision fp16: float16 graph inputs and outputs */
  TensorLayout layout;       /* --layout auto|nchw|nhwc */
  bool cpu_target;           /* --target cpu: float convolutions channels-last (choose-layout) */
  int gpus;                  /* --gpus N: place the units on N GPUs (HIOS); 0: one */
  const char *placement;     /* --placement lp|round-robin|contiguous (HIOS) */
  int window;                /* --hios-window W: most units grouped on one GPU */
  double link_gbps;          /* --link-gbps: overrides the device file's link; 0: keep */
  bool cpu;                  /* --devices gpu,cpu: units also on the host CPU (HOPE) */
  const char *partition;     /* --partition ilp|heuristic|alternate|gpu|cpu (HOPE) */
  const char *cpu_cost_db;   /* --cpu-cost-db FILE: the CPU program's measured latencies */
  const char *cpu_device;    /* --cpu-device NAME|FILE: the CPU's model; NULL: "cpu" */
} PassOptions;

/* --precision as its name: "fp32", "tf32", "fp16" or "bf16". */
const char *pass_precision_name(const PassOptions *opt);

/* What the passes of one compile share (pass.h): cost model, unit graph. */
typedef struct PassContext PassContext;

/* A pass: one file, one entry function. */
typedef struct Pass {
  const char *name;
  bool optional; /* skipped at -O0 */
  bool rewrites; /* may change the nodes: cached analyses are dropped after it */
  bool (*run)(Graph *g, const PassOptions *opt, PassContext *ctx);
} Pass;

/* The fixed pipeline, in order; the only place that knows the order. */
const Pass *pipeline_passes(int *count);
/* A pass name --dump-after accepts (a pass of the pipeline, or "all");
   otherwise reports the error with the valid names and returns false. */
bool pipeline_check_dump_after(const char *option, const char *name);
/* Every run-time If run as an IF node (OP_IF) made again as the importer
   makes one that does not qualify: both branches' nodes in g, each output
   an IfSelect; `why` goes to --report (compile_bodies.c). For programs
   with no conditional nodes: several GPUs, a CPU device, serving. */
bool pass_if_both_branches(Graph *g, const char *why);

/* One context per compile, in g's arena, for run_pipeline and the reports. */
PassContext *pass_context_new(Graph *g, const PassOptions *opt);
bool run_pipeline(Graph *g, const PassOptions *opt, PassContext *ctx);
/*
 * The pipeline in two halves: the passes that rewrite nodes, then the rest
 * (scheduling, events, memory, the schedule check). A serving program runs
 * the first half on each model and the second on their joint graph
 * (graph_join), with a context of its own.
 */
typedef enum PipelinePart { PIPELINE_REWRITE, PIPELINE_SCHEDULE } PipelinePart;
bool run_pipeline_part(Graph *g, const PassOptions *opt, PassContext *ctx, PipelinePart part);

/*
 * A serving program's launcher parameters for a stated arrival mix
 * (serve_plan.c): the copies of each model and its launcher interval, the
 * best that the cost model and a simulation of the launcher predict (no
 * backlog, within the latency bound, the most served, the lowest p99).
 * With `report`, the candidates and a simulated comparison with separate
 * contexts per request and with IOS per model are printed there.
 */
typedef struct ServePlan {
  const double *rate;         /* per model: requests per second (--arrivals) */
  double latency_bound_ms;    /* --latency-bound; 0: none */
  const int *fixed_instances; /* --instances given: keep them; NULL: choose */
  int queue_capacity;
  int *instances;             /* chosen, per model */
  double *interval_ms;        /* chosen, per model */
  bool feasible;              /* the choice serves the load within the bound */
  double predicted_served_per_s, predicted_p99_ms;
} ServePlan;
bool serve_plan(Graph *const *models, const char *const *names, int nmodels,
                const PassOptions *opt, ServePlan *plan, FILE *report);
/* --stats, on stdout: node counts by kind before and after run_pipeline. */
void pipeline_print_stats(Graph *g, const PassContext *ctx);

/* The scheduler names --schedule accepts, NULL-terminated (schedule.c). */
const char *const *scheduler_names(void);

/* The reports of a schedule the pipeline made, written by the driver
   (schedule_report.c): --emit-schedule, --emit-dot, --report. */
bool schedule_write_json(Graph *g, PassContext *ctx, const char *path);
bool schedule_write_dot(Graph *g, PassContext *ctx, const char *path);
void schedule_print_report(Graph *g, PassContext *ctx, FILE *f);

#endif
