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
 * node->stream after its waits (filled by the sync pass).
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
}

typedef bool (*Scheduler)(const SchedDeps *, const CostModel *, const SchedOptions *, StagePlan *);

static Scheduler find_scheduler(const char *name) {
  if (strcmp(name, "sequential") == 0)
    return sched_sequential;
  if (strcmp(name, "greedy") == 0)
    return sched_greedy;
  if (strcmp(name, "ios") == 0)
    return sched_ios;
  if (strcmp(name, "lios") == 0)
    return sched_lios;
  return NULL;
}

static const char *canonical_name(const char *name) {
  static const char *names[] = {"sequential", "greedy", "ios", "lios"};
  for (int i = 0; i < 4; i++)
    if (strcmp(name, names[i]) == 0)
      return names[i];
  return name;
}

/* Copies the plan into g->sched and the nodes' schedule fields. */
static void store_plan(Graph *g, const SchedDeps *d, const StagePlan *p, const char *name) {
  Schedule *s = &g->sched;
  Arena *a = g->arena;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    n->stage = -1;
    n->group = 0;
    n->stream = 0;
    n->record_event = -1;
    n->waits = NULL;
    n->nwaits = 0;
    n->cost_us = 0;
  }
  s->scheduler = canonical_name(name);
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
      stage->nodes[k - lo] = n;
      n->stage = st;
      n->group = p->group[k];
    }
  }
  if (p->order) /* LIOS's issue order replaces the stage's group-by-group order */
    for (int st = 0; st < p->nstages; st++)
      if (s->stages[st].nnodes == d->n)
        memcpy(s->stages[st].nodes, s->order, sizeof(Node *) * (size_t)d->n);
  for (int u = 0; u < d->n; u++) {
    Node *n = d->unit[u];
    n->cost_us = d->cost[u];
    if (p->stream) {
      n->stream = p->stream[u];
      n->group = p->stream[u];
      if (n->stream + 1 > s->nstreams)
        s->nstreams = n->stream + 1;
    }
  }
  double seq = 0;
  for (int u = 0; u < d->n; u++)
    seq += d->cost[u];
  s->sequential_us = seq;
  s->predicted_us = p->predicted_us;
  s->states = p->states;
  s->transitions = p->transitions;
}

bool schedule_graph(Graph *g, const CostModel *cm, const SchedOptions *o) {
  Scheduler run = find_scheduler(o->scheduler);
  if (!run) {
    opc_error("unknown scheduler '%s' (expected ios, lios, greedy or sequential)", o->scheduler);
    return false;
  }
  SchedDeps *d = deps_build(g, cm);
  StagePlan plan;
  plan_init(&plan, g->arena, d->n);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (!run(d, cm, o, &plan))
    return false;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  store_plan(g, d, &plan, o->scheduler);
  /* LIOS's own makespan ignores contention; predict it like the program runs. */
  if (plan.stream) {
    g->sched.predicted_us = simulate_schedule(d, cm);
    g->sched.stages[0].predicted_us = g->sched.predicted_us;
  }
  g->sched.search_seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return true;
}

static bool valid_priority(const char *p) {
  return strcmp(p, "rank") == 0 || strcmp(p, "paper") == 0;
}

bool pass_schedule(Graph *g, const PassOptions *opt) {
  SchedOptions o;
  sched_options_from(opt, &o);
  if (!find_scheduler(o.scheduler)) {
    opc_error("unknown scheduler '%s' (expected ios, lios, greedy or sequential)", o.scheduler);
    return false;
  }
  if (!valid_priority(o.lios_priority)) {
    opc_error("unknown LIOS priority '%s' (expected rank or paper)", o.lios_priority);
    return false;
  }
  CostModel cm;
  if (!cost_model_from_options(g, opt, &cm))
    return false;
  cost_db_check_precision(cm.db, cm.tf32);
  return schedule_graph(g, &cm, &o);
}
