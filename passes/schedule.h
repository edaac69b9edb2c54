/*
 * schedule.h - what the inter-operator scheduling files share: the device
 * description, the cost model, the dependency graph of schedule units, the
 * schedulers and the checks.
 *
 * A schedule unit is a live node that is not a view: views issue nothing,
 * so dependencies are computed through storage (a node reading tensor T
 * depends on every unit writing a part of T's storage that T covers).
 */
#ifndef OPC_SCHEDULE_H
#define OPC_SCHEDULE_H

#include "passes.h"

/* ---------------------------------------------------------------- device */

/*
 * Data-sheet figures plus the few constants the cost model was calibrated
 * with (see passes/devices/README.md and bench/data/h100/).
 */
typedef struct Device {
  char name[64];
  int sm_count;
  double peak_fp32_tflops, peak_tf32_tflops, peak_fp16_tflops;
  double mem_bandwidth_gbs;
  double l2_mb;
  double kernel_launch_us; /* per kernel inside a CUDA graph */
  double event_record_us, event_wait_us;

  /* calibration of the implicit-GEMM model of cuDNN convolutions */
  double conv_fixed_us;      /* latency floor of one convolution */
  double tile_m, tile_n;     /* output tile: pixels x output channels */
  double blocks_per_sm;      /* tiles resident per SM */
  double gemm_efficiency;    /* fraction of per-SM FP32 peak one busy SM sustains */
  double operand_bandwidth_gbs; /* effective bandwidth for operand traffic (mostly L2) */
  /* memory-bound kernels */
  double memory_efficiency;  /* fraction of mem_bandwidth_gbs sustained */
  double threads_per_sm;     /* resident threads: fills the machine */
  /* stage contention: a group running beside the longest one adds this
     fraction of its time even when it fills little of the machine */
  double interference;

  /* the link between two such GPUs (HIOS, --gpus N): one direction */
  char link[32];           /* "nvlink4", "pcie5", ... */
  double link_gbps;        /* bandwidth of one peer copy, GB/s */
  double link_latency_us;  /* fixed cost of one peer copy */
  /* the GPU's link to the host (HOPE, --devices gpu,cpu): one pinned copy */
  double host_link_gbps;
  double host_link_latency_us; /* with the host function that hands over */

  /* A host CPU's file ("kind": "cpu") fills only these, mem_bandwidth_gbs
     and name. */
  bool is_cpu;
  double cpu_gflops; /* float32 GFLOP/s convolutions and GEMMs sustain, all cores */
  double cpu_op_us;  /* fixed cost of one operator: waking the threads, its set-up */
} Device;

/* Loads NAME (looked up among the installed device files) or a FILE path;
   NULL means "h100". Reports an error and returns false on failure. */
bool device_load(const char *spec, Device *dev);
/* Parses the JSON text of a device file; `where` names it in messages. */
bool device_parse(const char *text, const char *where, Device *dev);

/* ------------------------------------------------------------ cost model */

/* Measured latencies by unit key (cost_db.c), from `net --profile`. */
typedef struct CostDb CostDb;

typedef struct CostModel {
  Device dev;
  bool tf32;
  /* Tests replace the analytic model with synthetic costs; NULL: analytic. */
  double (*node_cost)(const Node *n);
  double (*node_occupancy)(const Node *n);
  /* --cost-db: a unit whose key is here costs what was measured; NULL: none. */
  const CostDb *db;
  /* HOPE (--devices gpu,cpu): units on device host_device (> 0) run on the
     host CPU `cpu`, measured in cpu_db where it has them. */
  int host_device;
  Device cpu;
  const CostDb *cpu_db;
} CostModel;

void cost_model_init(CostModel *cm, const Device *dev);
/* The model the options ask for: --device, --precision, --cost-db (read into
   g's arena). Reports an error and returns false on a bad file. The
   pipeline loads it once per compile (pass_cost_model). */
bool cost_model_from_options(Graph *g, const PassOptions *opt, CostModel *cm);

/* Reads a profile written by `net --profile` (format "opc-profile-1"); NULL
   after reporting an error. Several times for one key: their median. */
CostDb *cost_db_load(Arena *a, const char *path);
/* Warns when the profiled program's precision is not this compile's. */
void cost_db_check_precision(const CostDb *db, const char *precision);
/* The measured time of n's key, when the file has it. */
bool cost_db_lookup(const CostDb *db, const Node *n, double *us);
int cost_db_size(const CostDb *db);

/* An implicit-GEMM convolution (or matrix product) by its geometry. */
typedef struct ConvShape {
  int64_t batch, in_channels, out_channels, groups;
  int64_t out_pixels;     /* per image: product of output spatial dims */
  int64_t kernel_volume;  /* product of kernel spatial dims */
  int64_t in_elems;       /* elements of the input tensor (all images) */
  int64_t elem_bytes;     /* 2 for 16-bit data (--precision fp16|bf16); 0 or 4: float32 */
} ConvShape;

double cost_conv_us(const CostModel *cm, const ConvShape *s, double *occupancy);
/* The least one node can take on the GPU: its arithmetic at the device's
   peak for its precision or its bytes at full memory bandwidth, whichever
   is longer, plus one kernel launch. */
double cost_node_floor_us(const CostModel *cm, const Node *n);
/* Predicted latency of one node alone, on its device; views cost 0. */
double cost_node_us(const CostModel *cm, const Graph *g, const Node *n);
/* The same on the GPU (cpu false) or the host CPU, wherever it is placed. */
double cost_node_on(const CostModel *cm, const Graph *g, const Node *n, bool cpu);
/* One copy of `bytes` between the GPU and the host, pinned. */
double cost_host_transfer_us(const CostModel *cm, int64_t bytes);
/* Fraction of the GPU the node's work can fill, in [0, 1]. */
double cost_occupancy(const CostModel *cm, const Graph *g, const Node *n);

/* What a group of units run one after another on one stream adds up to. */
typedef struct GroupLoad {
  double alone;   /* sum of latencies alone */
  double overlap; /* what it adds beside a longer group: sum of t * share */
  double work;    /* sum of t * occupancy: time at full-machine throughput */
} GroupLoad;

/* Per-unit contributions to a GroupLoad. */
void cost_unit_load(const CostModel *cm, double t, double occupancy, GroupLoad *out);
/* Latency of one stage whose groups run concurrently, at most max_streams
   streams (groups beyond are packed onto streams, longest first; `g` is
   then overwritten). */
double cost_stage_loads(const CostModel *cm, GroupLoad *g, int ngroups, int max_streams);
/* Same for nodes: group_of[i] is the group of nodes[i] (0..ngroups-1). */
double cost_stage_us(const CostModel *cm, const Graph *g, Node *const *nodes, int n,
                     const int *group_of, int max_streams);
/* Cost of one cross-stream dependency. */
double cost_sync_us(const CostModel *cm);

/* ------------------------------------------------------ dependency graph */

typedef struct SchedDeps {
  Graph *g;
  int n;         /* units, in a topological order */
  Node **unit;
  int *index_of; /* node id -> unit index, -1 for non-units */
  int **pred, *npred; /* deduplicated predecessor units */
  int **succ, *nsucc;
  double *cost, *occ;
} SchedDeps;

/* Builds the unit graph of g (arena-allocated); costs filled when cm != NULL. */
SchedDeps *deps_build(Graph *g, const CostModel *cm);

/* ----------------------------------------------------------- schedulers */

typedef struct SchedOptions {
  const char *scheduler; /* "ios", "lios", "greedy", "sequential" */
  int streams;           /* at most this many streams */
  int prune_r, prune_s;  /* IOS: units per group, groups per stage; <= 0: unlimited */
  const char *lios_priority; /* "rank" or "paper" */
  int max_block;         /* IOS: units per DP block (<= 64); 0: default */
  long budget;           /* IOS: transitions per block before it is split; 0: default */
  bool progress;         /* progress lines on stderr */
  int gpus;              /* HIOS: GPUs to place on (1: one) */
  const char *placement; /* HIOS: "lp" (the paper's), "round-robin", "contiguous" */
  int window;            /* HIOS: most units grouped on one GPU */
  int host_device;       /* HOPE: the host CPU's device (one stream there); 0: none */
} SchedOptions;

/*
 * A schedule under construction: stages of groups of unit indices. LIOS
 * puts everything in one stage with one group per stream and gives the
 * issue order itself (`order`); stage schedulers leave order NULL.
 */
typedef struct StagePlan {
  int nstages, cap;
  int *stage_start; /* into units[], nstages + 1 entries */
  int *units;       /* unit indices, grouped, in issue order inside a stage */
  int *group;       /* group of units[k] within its stage */
  int *ngroups;     /* per stage */
  double *stage_us;
  int *order;       /* optional: global issue order (LIOS) */
  int *stream;      /* optional: stream per unit index (LIOS, HIOS) */
  int *device;      /* optional: GPU per unit index (HIOS) */
  double mapped_us; /* HIOS: latency after placement, before grouping */
  double predicted_us;
  long states, transitions;
} StagePlan;

void plan_init(StagePlan *p, Arena *a, int n);
/* Appends a stage: units[i] in group groups[i]; sorted into issue order. */
void plan_add_stage(StagePlan *p, const SchedDeps *d, const int *units, const int *groups, int n,
                    double stage_us);

/* One scheduler of the table in schedule.c. */
typedef struct SchedulerDef {
  const char *name;
  bool (*run)(const SchedDeps *d, const CostModel *cm, const SchedOptions *o, StagePlan *p);
  bool chooses_streams; /* one stage whose groups are the streams it chose */
} SchedulerDef;

const SchedulerDef *scheduler_find(const char *name); /* NULL: no such scheduler */

bool sched_sequential(const SchedDeps *d, const CostModel *cm, const SchedOptions *o, StagePlan *p);
bool sched_greedy(const SchedDeps *d, const CostModel *cm, const SchedOptions *o, StagePlan *p);
bool sched_ios(const SchedDeps *d, const CostModel *cm, const SchedOptions *o, StagePlan *p);
bool sched_lios(const SchedDeps *d, const CostModel *cm, const SchedOptions *o, StagePlan *p);
bool sched_hios(const SchedDeps *d, const CostModel *cm, const SchedOptions *o, StagePlan *p);

/*
 * HIOS over several GPUs (sched_hios.c). xfer[v][k] is the time to move
 * what pred[v][k] writes to v's GPU when they are on different GPUs.
 */
typedef struct MultiGpuPlan {
  int ndev;
  int *device;       /* per unit */
  int *item;         /* per unit: the first unit of its group (itself when alone) */
  double *start;     /* per unit, predicted */
  int *order;        /* units by predicted start */
  double mapped_us;  /* latency of the placement, one unit at a time per GPU */
  double latency_us; /* after grouping units within each GPU */
  int npaths;        /* paths Alg. 1 placed (0 for the naive splits) */
} MultiGpuPlan;

/* Bytes unit v reads of what its k-th producer writes. */
int64_t hios_edge_bytes(const SchedDeps *d, int v, int k);
/* One transfer of `bytes` between two GPUs: the link plus an event. */
double hios_transfer_us(const CostModel *cm, int64_t bytes);
/* hios_transfer_us of every edge of d, in g's arena. */
double **hios_transfer_costs(const SchedDeps *d, const CostModel *cm);
/* placement "lp" (Alg. 1), "round-robin" or "contiguous", or the GPUs
   `given` per unit, then Alg. 2 with groups of at most `window` units (1:
   none). Without `given`, the best over 1..ndev GPUs. */
void hios_plan(const SchedDeps *d, const CostModel *cm, double *const *xfer, int ndev,
               const char *placement, int window, const int *given, MultiGpuPlan *out);
/* The latency of a given placement and grouping (device[u] < 0: left out). */
double hios_evaluate(const SchedDeps *d, const CostModel *cm, double *const *xfer, int ndev,
                     const int *device, const int *item);

/*
 * HOPE: the GPU and the host CPU together (sched_hope.c). Each processor
 * runs one unit at a time; a unit whose producer ran on the other processor
 * first receives that producer's output, which costs the receiver xfer
 * (the paper's Eq. 1: the transfer belongs to the receiving unit).
 */
enum { HOPE_GPU = 0, HOPE_CPU = 1, HOPE_PROCESSORS = 2 };

typedef struct HopeCosts {
  double *run[HOPE_PROCESSORS]; /* per unit: time on that processor; INFINITY: cannot */
  double *const *xfer;          /* xfer[v][k]: moving what pred[v][k] writes across */
  /* "ilp": GLPK's wall-clock limit per subgraph, past which the best
     solution found is kept; 0: HOPE_ILP_SECONDS. A test that checks
     optimality gives it ample time, so that a loaded machine cannot
     change its result. */
  double ilp_seconds;
} HopeCosts;

typedef struct HopePlan {
  int *device;       /* per unit: HOPE_GPU or HOPE_CPU */
  double *start;     /* per unit, predicted */
  int *order;        /* units by predicted start: the order on each processor */
  double latency_us; /* predicted end of the last unit */
  int subgraphs;     /* "ilp": subgraphs solved (HOPE's Alg. 1 partition) */
  int optimal;       /* "ilp": subgraphs GLPK proved optimal */
} HopePlan;

/* method: "ilp" (Sec. 2, GLPK, over subgraphs of at most subgraph_units),
   "heuristic" (Sec. 3, greedy top-K with node merging), "alternate" (units
   in topological order, GPU, CPU, GPU...), "gpu" or "cpu" (all on one).
   Reports an error (GLPK failure) and returns false. */
bool hope_plan(const SchedDeps *d, const HopeCosts *c, const char *method, int subgraph_units,
               Arena *a, HopePlan *out);
/* The latency of a given placement: each processor takes its units in
   `order` (NULL: d's topological order), each as early as it can. start may
   be NULL. */
double hope_evaluate(const SchedDeps *d, const HopeCosts *c, const int *device, const int *order,
                     double *start);

/* HOPE's statistics, for the schedule report: the partition's latency in
   the paper's model (one unit at a time per processor), and LIOS's
   prediction of it and of the GPU alone; place-devices keeps the faster of
   the last two (kept_gpu: the GPU alone). */
typedef struct HopeReport {
  double model_us, partition_us, gpu_us;
  bool kept_gpu;
} HopeReport;

/* HIOS's statistics, for the schedule report. */
typedef struct HiosReport {
  double mapped_us; /* the placement's latency, one unit at a time per GPU, before
                       grouping (HIOS; LIOS on several GPUs: its makespan) */
} HiosReport;

/* Runs the named scheduler and writes g->sched and every unit's entry,
   streams included; d is g's unit graph with cm's costs. Fills *hios
   unless NULL. */
bool schedule_with(Graph *g, const SchedDeps *d, const CostModel *cm, const SchedOptions *o,
                   HiosReport *hios);
/* The same, building the unit graph. */
bool schedule_graph(Graph *g, const CostModel *cm, const SchedOptions *o);
/* g->sched.listing from g->sched.order: the issue order with the views and
   constants placed right after their inputs (sched_listing.c). */
void store_listing(Graph *g);

/* Predicted makespan of the issued program (order, streams, waits) with
   contention: running kernels slow each other down by their shares. */
double simulate_schedule(const SchedDeps *d, const CostModel *cm);

/*
 * The device model behind it (sched_sim.c), for several programs sharing
 * the device: each program runs on streams of its own, its runs one after
 * another, and the units running at any moment slow each other down.
 */
typedef struct SimProgram {
  int nunits, nstreams;
  const int *stream;          /* per unit, units in issue order */
  int *const *pred;           /* per unit: its producers (unit indices) */
  const int *npred;
  const double *cost;         /* microseconds alone */
  const double *occupancy;    /* fraction of the device it fills */
  const int *instance;        /* per unit: Node.instance */
  const int *device;          /* per unit: its GPU; units slow only those of their GPU */
  const unsigned char *copy;  /* per unit: a transfer, on a copy engine: slows nothing */
} SimProgram;

/* The issued program of a scheduled graph (d: its unit graph with costs). */
void sim_program_of(const SchedDeps *d, Arena *a, SimProgram *p);

typedef struct SimDevice SimDevice;
SimDevice *sim_new(const CostModel *cm, const SimProgram *const *programs, int nprograms);
void sim_free(SimDevice *s);
/* Queues a run of a program: it starts once the program's previous run has
   finished and `release` (microseconds) has come; a unit whose `active`
   entry is 0 costs nothing (NULL: all work). Returns the run's number. */
int sim_submit(SimDevice *s, int program, double release, const unsigned char *active);
/* Advances until a run finishes (returns its number, *when its time) or
   until `until` (returns -1). */
int sim_advance(SimDevice *s, double until, double *when);
double sim_now(const SimDevice *s);

/* ------------------------------------------------- streams, events, checks */

/* Numbers the streams by first use and places the minimal set of events;
   d is g's unit graph. */
bool sync_graph(Graph *g, const SchedDeps *d);
/* Every dependency ordered by stream order and events; each unit issued once. */
bool verify_schedule_deps(Graph *g);
/* On several GPUs: every read of another GPU's tensor is a transfer's, and
   each stream's units share a GPU. */
bool verify_placement(Graph *g);
/* Buffers sharing arena bytes are used one after another (after planning). */
bool verify_buffer_reuse(Graph *g);

/* ------------------------------------------------------------------ merge */

/* IOS operator merge of sibling convolutions where `cm` predicts a gain;
   `merged` (may be NULL) receives the number of merges. */
bool merge_convs_with(Graph *g, const CostModel *cm, int streams, int *merged);

/* The scheduling options of the pipeline's options, defaults filled in. */
void sched_options_from(const PassOptions *opt, SchedOptions *o);

#endif
