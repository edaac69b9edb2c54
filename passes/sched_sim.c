/*
 * sched_sim.c - the device as a fluid model, and the predicted makespan of
 * the issued program (simulate_schedule).
 *
 * Each program runs on streams of its own; several programs share the
 * device (contexts side by side, or one program run after run). Streams run
 * their units in issue order; a unit starts once its stream is free and its
 * producers are done (plus one event's cost when a producer is on another
 * stream). While several units run, each progresses at the rate
 * 1 / (1 + sum of the others' shares), a unit's share being what the stage
 * model charges it beside a longer group: interference + (1 -
 * interference) x occupancy. With no interference and no occupancy this is
 * a plain list-schedule makespan. On several GPUs the sum runs over the
 * units of the unit's own GPU, and a transfer between GPUs, done by copy
 * engines, neither slows nor is slowed. A program's runs follow one another: a
 * run starts when the previous one has finished and its release time has
 * come, as a launch waits for the one before it on the same stream.
 */
#include <stdlib.h>

#include "schedule.h"

enum { SIM_GPUS = 16 }; /* --gpus takes at most 16 */

/* A queued run of a program. */
typedef struct SimRun {
  int id;
  double release;
  unsigned char *active; /* per unit, or NULL: every unit works */
  struct SimRun *next;
} SimRun;

/* A program and its runs. */
typedef struct SimContext {
  const SimProgram *p;
  int lane0;          /* its streams are lanes lane0 .. lane0 + nstreams - 1 */
  SimRun *queue, *last; /* queue: the run in progress (when started), then the waiting ones */
  bool started;       /* the head of the queue is running */
  int *head;          /* per stream: the next unit position in issue order to start */
  int **lane_units;   /* per stream: its units, in issue order */
  int *lane_count;
  double *finish;     /* per unit, this run: -1 until done */
  double *left;       /* per unit, this run: work left, in microseconds alone */
  int done;           /* units of this run finished */
} SimContext;

struct SimDevice {
  const CostModel *cm;
  SimContext *ctx;
  int nctx;
  int nlanes;
  int *running_ctx, *running_unit; /* per lane: -1 when idle */
  double now;
  int next_id;
};

SimDevice *sim_new(const CostModel *cm, const SimProgram *const *programs, int nprograms) {
  SimDevice *s = calloc(1, sizeof *s);
  s->cm = cm;
  s->nctx = nprograms;
  s->ctx = calloc((size_t)nprograms + 1, sizeof(SimContext));
  for (int k = 0; k < nprograms; k++) {
    SimContext *c = &s->ctx[k];
    const SimProgram *p = programs[k];
    int ns = p->nstreams > 0 ? p->nstreams : 1;
    c->p = p;
    c->lane0 = s->nlanes;
    s->nlanes += ns;
    c->head = calloc((size_t)ns, sizeof(int));
    c->lane_count = calloc((size_t)ns, sizeof(int));
    c->lane_units = calloc((size_t)ns, sizeof(int *));
    for (int t = 0; t < ns; t++)
      c->lane_units[t] = malloc(sizeof(int) * ((size_t)p->nunits + 1));
    for (int u = 0; u < p->nunits; u++) {
      int t = p->stream[u] >= 0 && p->stream[u] < ns ? p->stream[u] : 0;
      c->lane_units[t][c->lane_count[t]++] = u;
    }
    c->finish = malloc(sizeof(double) * ((size_t)p->nunits + 1));
    c->left = malloc(sizeof(double) * ((size_t)p->nunits + 1));
  }
  s->running_ctx = malloc(sizeof(int) * ((size_t)s->nlanes + 1));
  s->running_unit = malloc(sizeof(int) * ((size_t)s->nlanes + 1));
  for (int l = 0; l < s->nlanes; l++)
    s->running_ctx[l] = s->running_unit[l] = -1;
  return s;
}

void sim_free(SimDevice *s) {
  if (!s)
    return;
  for (int k = 0; k < s->nctx; k++) {
    SimContext *c = &s->ctx[k];
    int ns = c->p->nstreams > 0 ? c->p->nstreams : 1;
    for (int t = 0; t < ns; t++)
      free(c->lane_units[t]);
    free(c->lane_units);
    free(c->lane_count);
    free(c->head);
    free(c->finish);
    free(c->left);
    for (SimRun *r = c->queue, *next; r; r = next) {
      next = r->next;
      free(r->active);
      free(r);
    }
  }
  free(s->ctx);
  free(s->running_ctx);
  free(s->running_unit);
  free(s);
}

double sim_now(const SimDevice *s) { return s->now; }

int sim_submit(SimDevice *s, int program, double release, const unsigned char *active) {
  SimContext *c = &s->ctx[program];
  SimRun *r = calloc(1, sizeof *r);
  r->id = s->next_id++;
  r->release = release;
  if (active) {
    r->active = malloc((size_t)c->p->nunits + 1);
    for (int u = 0; u < c->p->nunits; u++)
      r->active[u] = active[u];
  }
  if (c->last)
    c->last->next = r;
  else
    c->queue = r;
  c->last = r;
  return r->id;
}

/* The head run of c begins: every unit's work set, nothing started yet. */
static void begin_run(SimContext *c) {
  const SimProgram *p = c->p;
  int ns = p->nstreams > 0 ? p->nstreams : 1;
  for (int u = 0; u < p->nunits; u++) {
    c->finish[u] = -1;
    c->left[u] = !c->queue->active || c->queue->active[u] ? p->cost[u] : 0;
  }
  for (int t = 0; t < ns; t++)
    c->head[t] = 0;
  c->done = 0;
  c->started = true;
}

/*
 * Starts what can start now: runs whose time has come, and on each idle
 * lane its next unit when its producers are done. Returns the earliest
 * future time something could start (1e300: none).
 */
static double start_ready(SimDevice *s, double sync) {
  double next_start = 1e300;
  for (int k = 0; k < s->nctx; k++) {
    SimContext *c = &s->ctx[k];
    if (!c->queue)
      continue;
    if (!c->started) {
      if (c->queue->release > s->now) {
        if (c->queue->release < next_start)
          next_start = c->queue->release;
        continue;
      }
      begin_run(c);
    }
    const SimProgram *p = c->p;
    int ns = p->nstreams > 0 ? p->nstreams : 1;
    for (int t = 0; t < ns; t++) {
      int lane = c->lane0 + t;
      if (s->running_unit[lane] >= 0 || c->head[t] >= c->lane_count[t])
        continue;
      int u = c->lane_units[t][c->head[t]];
      double ready = s->now;
      bool blocked = false;
      for (int i = 0; i < p->npred[u]; i++) {
        int q = p->pred[u][i];
        if (c->finish[q] < 0) {
          blocked = true;
          break;
        }
        double at = c->finish[q] + (p->stream[q] != t ? sync : 0);
        if (at > ready)
          ready = at;
      }
      if (blocked)
        continue;
      if (ready <= s->now) {
        s->running_ctx[lane] = k;
        s->running_unit[lane] = u;
      } else if (ready < next_start) {
        next_start = ready;
      }
    }
  }
  return next_start;
}

/* The run of c at the head of its queue has finished: the next may start. */
static int end_run(SimContext *c) {
  SimRun *r = c->queue;
  int id = r->id;
  c->queue = r->next;
  if (!c->queue)
    c->last = NULL;
  c->started = false;
  free(r->active);
  free(r);
  return id;
}

/* What unit u of p takes from the others on its GPU while it runs. */
static double share_of(const SimProgram *p, int u, double k) {
  return p->copy && p->copy[u] ? 0 : k + (1 - k) * p->occupancy[u];
}

static int gpu_of(const SimProgram *p, int u) {
  int g = p->device ? p->device[u] : 0;
  return g >= 0 && g < SIM_GPUS ? g : 0;
}

/* The rate of unit u of p: 1 alone, slower beside others on its GPU. */
static double rate_of(const SimProgram *p, int u, double k, const double *total) {
  if (p->copy && p->copy[u])
    return 1.0;
  return 1.0 / (1.0 + total[gpu_of(p, u)] - share_of(p, u, k));
}

int sim_advance(SimDevice *s, double until, double *when) {
  double sync = cost_sync_us(s->cm), k = s->cm->dev.interference;
  for (;;) {
    double next_start = start_ready(s, sync);
    double total[SIM_GPUS] = {0}; /* per GPU: the running units' shares */
    int nrun = 0;
    for (int l = 0; l < s->nlanes; l++)
      if (s->running_unit[l] >= 0) {
        const SimProgram *p = s->ctx[s->running_ctx[l]].p;
        total[gpu_of(p, s->running_unit[l])] += share_of(p, s->running_unit[l], k);
        nrun++;
      }
    if (!nrun && next_start >= 1e300 && until >= 1e300)
      return -1; /* nothing queued, or a dependency that can never be met */
    double step = (next_start < until ? next_start : until) - s->now;
    for (int l = 0; l < s->nlanes; l++)
      if (s->running_unit[l] >= 0) {
        const SimContext *c = &s->ctx[s->running_ctx[l]];
        int u = s->running_unit[l];
        double rate = rate_of(c->p, u, k, total);
        if (c->left[u] / rate < step)
          step = c->left[u] / rate;
      }
    if (!nrun && s->now + step >= until) {
      s->now = until;
      return -1;
    }
    int finished = -1;
    for (int l = 0; l < s->nlanes; l++)
      if (s->running_unit[l] >= 0) {
        SimContext *c = &s->ctx[s->running_ctx[l]];
        int u = s->running_unit[l];
        double rate = rate_of(c->p, u, k, total);
        c->left[u] -= step * rate;
        if (c->left[u] <= 1e-9) {
          c->finish[u] = s->now + step;
          s->running_unit[l] = s->running_ctx[l] = -1;
          c->head[l - c->lane0]++;
          if (++c->done == c->p->nunits)
            finished = end_run(c);
        }
      }
    s->now += step;
    if (finished >= 0) {
      if (when)
        *when = s->now;
      return finished;
    }
    if (s->now >= until)
      return -1;
  }
}

/* ------------------------------------------------------------ one program */

void sim_program_of(const SchedDeps *d, Arena *a, SimProgram *p) {
  Graph *g = d->g;
  p->nstreams = g->sched.nstreams > 0 ? g->sched.nstreams : 1;
  p->nunits = 0;
  int *position = arena_alloc(a, sizeof(int) * ((size_t)d->n + 1)); /* unit -> issue position */
  int *stream = arena_alloc(a, sizeof(int) * ((size_t)d->n + 1));
  int *instance = arena_alloc(a, sizeof(int) * ((size_t)d->n + 1));
  double *cost = arena_alloc(a, sizeof(double) * ((size_t)d->n + 1));
  double *occupancy = arena_alloc(a, sizeof(double) * ((size_t)d->n + 1));
  int *device = arena_alloc(a, sizeof(int) * ((size_t)d->n + 1));
  unsigned char *copy = arena_alloc(a, (size_t)d->n + 1);
  int **pred = arena_alloc(a, sizeof(int *) * ((size_t)d->n + 1));
  int *npred = arena_alloc(a, sizeof(int) * ((size_t)d->n + 1));
  for (int u = 0; u < d->n; u++)
    position[u] = -1;
  for (int k = 0; k < g->sched.norder; k++) {
    int u = d->index_of[g->sched.order[k]->id];
    NodeSchedule *ns = u < 0 ? NULL : node_sched(g, d->unit[u]);
    if (!ns || ns->stream < 0 || ns->stream >= p->nstreams)
      continue;
    position[u] = p->nunits;
    stream[p->nunits] = ns->stream;
    instance[p->nunits] = d->unit[u]->instance;
    cost[p->nunits] = d->cost[u];
    occupancy[p->nunits] = d->occ[u];
    device[p->nunits] = ns->device;
    copy[p->nunits] = node_is_transfer(g, d->unit[u]);
    p->nunits++;
  }
  for (int u = 0; u < d->n; u++) {
    int at = position[u];
    if (at < 0)
      continue;
    pred[at] = arena_alloc(a, sizeof(int) * ((size_t)d->npred[u] + 1));
    npred[at] = 0;
    for (int i = 0; i < d->npred[u]; i++)
      if (position[d->pred[u][i]] >= 0)
        pred[at][npred[at]++] = position[d->pred[u][i]];
  }
  p->stream = stream;
  p->instance = instance;
  p->cost = cost;
  p->occupancy = occupancy;
  p->device = device;
  p->copy = copy;
  p->pred = pred;
  p->npred = npred;
}

double simulate_schedule(const SchedDeps *d, const CostModel *cm) {
  Arena *a = arena_new();
  SimProgram p;
  sim_program_of(d, a, &p);
  const SimProgram *programs[1] = {&p};
  SimDevice *s = sim_new(cm, programs, 1);
  double when = 0;
  sim_submit(s, 0, 0, NULL);
  if (p.nunits == 0 || sim_advance(s, 1e300, &when) < 0)
    when = sim_now(s);
  sim_free(s);
  arena_free(a);
  return when;
}
