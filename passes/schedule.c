/*
 * schedule.c - the schedule pass: builds the unit graph, runs the chosen
 * scheduler and writes the result into g->sched and the nodes.
 *
 * Stage schedulers (sequential, greedy, ios) produce stages of groups: the
 * groups of a stage run concurrently on their own streams. LIOS produces a
 * stream and an issue order per unit instead; it is stored as ONE stage
 * holding every unit, its groups being the streams (node->group ==
 * node->stream), and g->sched.order is LIOS's issue order. Either way the
 * emitter's contract is the same: issue g->sched.order, each node on
 * node->stream after its waits (filled by the sync pass), and list the
 * nodes in g->sched.listing, which places the views among them.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pass.h"
#include "schedule.h"

void plan_init(StagePlan *p, Arena *a, int n) {
  *p = (StagePlan){0};
  p->cap = n + 1;
  p->stage_start = arena_alloc(a, sizeof(int) * ((size_t)n + 2));
  p->units = arena_alloc(a, sizeof(int) * ((size_t)n + 1));
  p->group = arena_alloc(a, sizeof(int) * ((size_t)n + 1));
  p->ngroups = arena_alloc(a, sizeof(int) * ((size_t)n + 1));
  p->stage_us = arena_alloc(a, sizeof(double) * ((size_t)n + 1));
}

void plan_add_stage(StagePlan *p, const SchedDeps *d, const int *units, const int *groups, int n,
                    double stage_us) {
  (void)d;
  int base = p->stage_start[p->nstages];
  int ngroups = 0;
  for (int i = 0; i < n; i++)
    if (groups[i] + 1 > ngroups)
      ngroups = groups[i] + 1;
  /* Issue order: group by group, each group in topological (unit) order. */
  int k = base;
  for (int gi = 0; gi < ngroups; gi++) {
    int first = k;
    for (int i = 0; i < n; i++)
      if (groups[i] == gi) {
        int j = k++;
        while (j > first && p->units[j - 1] > units[i]) {
          p->units[j] = p->units[j - 1];
          j--;
        }
        p->units[j] = units[i];
      }
    for (int j = first; j < k; j++)
      p->group[j] = gi;
  }
  p->ngroups[p->nstages] = ngroups;
  p->stage_us[p->nstages] = stage_us;
  p->nstages++;
  p->stage_start[p->nstages] = k;
  p->predicted_us += stage_us;
}

void sched_options_from(const PassOptions *opt, SchedOptions *o) {
  *o = (SchedOptions){0};
  o->scheduler = opt->scheduler ? opt->scheduler : "lios";
  if (opt->opt_level == 0)
    o->scheduler = "sequential";
  o->streams = opt->streams > 0 ? opt->streams : 8;
  if (o->streams > 64)
    o->streams = 64;
  /* PassOptions: 0 = not given (IOS's defaults r=3, s=8), negative = no limit.
     SchedOptions: <= 0 = no limit. */
  o->prune_r = opt->prune_r == 0 ? 3 : opt->prune_r;
  o->prune_s = opt->prune_s == 0 ? 8 : opt->prune_s;
  o->lios_priority = opt->lios_priority ? opt->lios_priority : "rank";
  o->progress = isatty(2);
  o->gpus = opt->gpus > 0 ? opt->gpus : 1;
  if (o->gpus > 1 && !opt->scheduler)
    o->scheduler = "hios";
  o->placement = opt->placement ? opt->placement : "lp";
  o->window = opt->window > 0 ? opt->window : 3;
  o->host_device = 0;
  if (opt->cpu) { /* the GPU and the host CPU: two devices, LIOS on each */
    o->gpus = 2;
    o->host_device = 1;
    if (!opt->scheduler)
      o->scheduler = "lios";
  }
}

/*
 * The schedulers: the only list of their names. `chooses_streams`: the
 * scheduler puts every unit on a stream itself (one stage whose groups are
 * the streams), so assign_streams keeps its choice.
 */
static const SchedulerDef schedulers[] = {
    {"lios", sched_lios, true},
    {"hios", sched_hios, true},
    {"ios", sched_ios, false},
    {"greedy", sched_greedy, false},
    {"sequential", sched_sequential, false},
};
enum { NSCHEDULERS = sizeof schedulers / sizeof schedulers[0] };

const SchedulerDef *scheduler_find(const char *name) {
  for (int i = 0; name && i < NSCHEDULERS; i++)
    if (strcmp(name, schedulers[i].name) == 0)
      return &schedulers[i];
  return NULL;
}

const char *const *scheduler_names(void) {
  static const char *names[NSCHEDULERS + 1];
  for (int i = 0; i < NSCHEDULERS; i++)
    names[i] = schedulers[i].name;
  return names;
}

/* "lios, ios, greedy or sequential", for messages. */
static const char *expected_schedulers(void) {
  static char buf[128];
  buf[0] = '\0';
  for (int i = 0; i < NSCHEDULERS; i++)
    snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s",
             i == 0 ? "" : i + 1 < NSCHEDULERS ? ", " : " or ", schedulers[i].name);
  return buf;
}

/* Copies the plan into g->sched, the nodes' entries included. */
static void store_plan(Graph *g, const SchedDeps *d, const StagePlan *p, const SchedulerDef *def) {
  Schedule *s = &g->sched;
  Arena *a = g->arena;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    NodeSchedule *ns = node_sched(g, n);
    ns->stage = -1;
    ns->group = 0;
    ns->stream = 0;
    ns->record_event = -1;
    ns->waits = NULL;
    ns->nwaits = 0;
    ns->cost_us = 0;
    ns->device = 0;
  }
  s->scheduler = def->name;
  s->ndevices = 1;
  s->host_device = 0;
  s->nstages = p->nstages;
  s->stages = arena_alloc(a, sizeof(Stage) * ((size_t)p->nstages + 1));
  s->order = arena_alloc(a, sizeof(Node *) * ((size_t)d->n + 1));
  s->norder = d->n;
  s->nevents = 0;
  s->nstreams = 1;
  for (int k = 0; k < d->n; k++)
    s->order[k] = d->unit[p->order ? p->order[k] : p->units[k]];
  for (int st = 0; st < p->nstages; st++) {
    Stage *stage = &s->stages[st];
    int lo = p->stage_start[st], hi = p->stage_start[st + 1];
    stage->nnodes = hi - lo;
    stage->ngroups = p->ngroups[st];
    stage->predicted_us = p->stage_us[st];
    stage->nodes = arena_alloc(a, sizeof(Node *) * ((size_t)(hi - lo) + 1));
    for (int k = lo; k < hi; k++) {
      Node *n = d->unit[p->units[k]];
      NodeSchedule *ns = node_sched(g, n);
      stage->nodes[k - lo] = n;
      ns->stage = st;
      ns->group = p->group[k];
    }
  }
  if (p->order) /* LIOS's issue order replaces the stage's group-by-group order */
    for (int st = 0; st < p->nstages; st++)
      if (s->stages[st].nnodes == d->n)
        memcpy(s->stages[st].nodes, s->order, sizeof(Node *) * (size_t)d->n);
  for (int u = 0; u < d->n; u++) {
    Node *n = d->unit[u];
    NodeSchedule *ns = node_sched(g, n);
    ns->cost_us = d->cost[u];
    if (p->stream) /* the scheduler's streams are its groups */
      ns->group = p->stream[u];
    if (p->device)
      ns->device = p->device[u];
  }
  double seq = 0;
  for (int u = 0; u < d->n; u++)
    seq += d->cost[u];
  s->sequential_us = seq;
  s->predicted_us = p->predicted_us;
  s->states = p->states;
  s->transitions = p->transitions;
}

/* ---------------------------------------------------------------- streams */

/* Stream of a group: a free stream that produced most of its inputs. */
static int pick_stream(const SchedDeps *d, const int *stream_of, Node *const *nodes, int n,
                       int group, const bool *taken, const double *load, int nstreams) {
  int votes[64] = {0};
  for (int i = 0; i < n; i++) {
    if (node_sched(d->g, nodes[i])->group != group)
      continue;
    int u = d->index_of[nodes[i]->id];
    for (int k = 0; k < d->npred[u]; k++) {
      int s = stream_of[d->pred[u][k]];
      if (s >= 0)
        votes[s]++;
    }
  }
  int best = -1;
  for (int s = 0; s < nstreams; s++)
    if (!taken[s] && (best < 0 || votes[s] > votes[best]))
      best = s;
  if (best >= 0)
    return best;
  /* every stream is taken in this stage: share the least loaded */
  best = 0;
  for (int s = 1; s < nstreams; s++)
    if (load[s] < load[best])
      best = s;
  return best;
}

static int by_load_desc(const void *a, const void *b, void *ctx) {
  const double *load = ctx;
  int x = *(const int *)a, y = *(const int *)b;
  return (load[x] < load[y]) - (load[x] > load[y]);
}

/* Streams of one stage's groups, heaviest group first. */
static void stage_streams(const Stage *stage, const SchedDeps *d, int *stream_of,
                          int max_streams) {
  int ng = stage->ngroups;
  double *gload = calloc((size_t)ng + 1, sizeof(double));
  int *gorder = malloc(sizeof(int) * ((size_t)ng + 1));
  int *gstream = malloc(sizeof(int) * ((size_t)ng + 1));
  for (int i = 0; i < stage->nnodes; i++)
    gload[node_sched(d->g, stage->nodes[i])->group] += node_sched(d->g, stage->nodes[i])->cost_us;
  for (int k = 0; k < ng; k++)
    gorder[k] = k;
  qsort_r(gorder, (size_t)ng, sizeof(int), by_load_desc, gload);
  bool taken[64] = {false};
  double sload[64] = {0};
  for (int k = 0; k < ng; k++) {
    int gi = gorder[k];
    int s = pick_stream(d, stream_of, stage->nodes, stage->nnodes, gi, taken, sload, max_streams);
    taken[s] = true;
    sload[s] += gload[gi];
    gstream[gi] = s;
  }
  for (int i = 0; i < stage->nnodes; i++) {
    Node *n = stage->nodes[i];
    NodeSchedule *ns = node_sched(d->g, n);
    ns->stream = gstream[ns->group];
    stream_of[d->index_of[n->id]] = ns->stream;
  }
  free(gload);
  free(gorder);
  free(gstream);
}

/*
 * The one place that puts units on streams. A scheduler that chose streams
 * keeps them (its groups are the streams); otherwise each group of a stage
 * gets its own stream, preferring the stream its inputs were produced on
 * so that dependent work stays in stream order and needs no event. Ids are
 * reused across stages, so at most `max_streams` exist; groups beyond that
 * share streams. The sync pass then numbers them by first use.
 */
static void assign_streams(Graph *g, const SchedDeps *d, const SchedulerDef *def,
                           int max_streams) {
  if (max_streams < 1)
    max_streams = 1;
  if (max_streams > 64)
    max_streams = 64;
  if (def->chooses_streams) {
    for (int u = 0; u < d->n; u++)
      node_sched(g, d->unit[u])->stream = node_sched(g, d->unit[u])->group;
  } else {
    int *stream_of = malloc(sizeof(int) * ((size_t)d->n + 1));
    for (int u = 0; u < d->n; u++)
      stream_of[u] = -1;
    for (int st = 0; st < g->sched.nstages; st++)
      stage_streams(&g->sched.stages[st], d, stream_of, max_streams);
    free(stream_of);
  }
  g->sched.nstreams = 1;
  for (int u = 0; u < d->n; u++)
    if (node_sched(g, d->unit[u])->stream + 1 > g->sched.nstreams)
      g->sched.nstreams = node_sched(g, d->unit[u])->stream + 1;
}

/* -------------------------------------------------------------- the pass */

bool schedule_with(Graph *g, const SchedDeps *d, const CostModel *cm, const SchedOptions *o,
                   HiosReport *hios) {
  const SchedulerDef *def = scheduler_find(o->scheduler);
  if (!def) {
    opc_error("unknown scheduler '%s' (expected %s)", o->scheduler, expected_schedulers());
    return false;
  }
  StagePlan plan;
  plan_init(&plan, g->arena, d->n);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (!def->run(d, cm, o, &plan))
    return false;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  store_plan(g, d, &plan, def);
  if (hios)
    hios->mapped_us = plan.mapped_us;
  if (plan.device) {
    g->sched.ndevices = o->gpus;
    g->sched.host_device = o->host_device;
  }
  store_listing(g);
  assign_streams(g, d, def, o->streams);
  /* LIOS's own makespan ignores contention; predict it like the program runs.
     HIOS keeps its own prediction, its evaluation of the groups. */
  if (plan.stream && strcmp(def->name, "hios") != 0) {
    g->sched.predicted_us = simulate_schedule(d, cm);
    g->sched.stages[0].predicted_us = g->sched.predicted_us;
  }
  g->sched.search_seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return true;
}

bool schedule_graph(Graph *g, const CostModel *cm, const SchedOptions *o) {
  return schedule_with(g, deps_build(g, cm), cm, o, NULL);
}

static bool valid_priority(const char *p) {
  return strcmp(p, "rank") == 0 || strcmp(p, "paper") == 0;
}

bool pass_schedule(Graph *g, const PassOptions *opt, PassContext *ctx) {
  SchedOptions o;
  sched_options_from(opt, &o);
  if (!scheduler_find(o.scheduler)) {
    opc_error("unknown scheduler '%s' (expected %s)", o.scheduler, expected_schedulers());
    return false;
  }
  if (o.gpus > 1 && strcmp(o.scheduler, "hios") != 0 && strcmp(o.scheduler, "lios") != 0) {
    opc_error("--gpus %d: the %s scheduler plans one GPU; use --schedule hios or lios", o.gpus,
              o.scheduler);
    return false;
  }
  if (!valid_priority(o.lios_priority)) {
    opc_error("unknown LIOS priority '%s' (expected rank or paper)", o.lios_priority);
    return false;
  }
  const CostModel *cm = pass_cost_model(ctx);
  if (!cm)
    return false;
  cost_db_check_precision(cm->db, pass_precision_name(ctx->opt));
  return schedule_with(g, pass_deps(ctx), cm, &o, &ctx->hios);
}
