/*
 * sync.c - events between streams.
 *
 * The schedule pass put every unit on a stream; here the streams are
 * numbered by first use. There is no barrier between stages: only real
 * dependencies synchronise.
 *
 * Events: a dependency from another stream becomes a wait on an event
 * recorded after the producer. Vector clocks make the set minimal: clock[s]
 * says how many units of each stream stream s is already ordered after, an
 * event carries its stream's clock at the record, and a wait is dropped when
 * stream order, an earlier wait or another chosen wait already implies it.
 */
#include <stdlib.h>
#include <string.h>

#include "pass.h"
#include "schedule.h"

typedef struct Clocks {
  int nstreams;
  int *now;      /* nstreams x nstreams: what each stream is ordered after */
  int *snapshot; /* per unit: its stream's clock right after it */
  int *pos;      /* per unit: 1-based position on its stream */
  int *count;    /* units issued per stream */
} Clocks;

/* Stream ids in order of first use, so that the first issued unit is on 0. */
static int compact_streams(Graph *g) {
  int remap[64];
  for (int s = 0; s < 64; s++)
    remap[s] = -1;
  int used = 0;
  /* Stream 0 is where the caller's work meets the program's: on several
     GPUs, it must be GPU 0's, where the inputs and outputs are. */
  for (int k = 0; k < g->sched.norder && !used; k++)
    if (node_sched(g, g->sched.order[k])->device == 0)
      remap[node_sched(g, g->sched.order[k])->stream] = used++;
  for (int k = 0; k < g->sched.norder; k++) {
    Node *n = g->sched.order[k];
    NodeSchedule *ns = node_sched(g, n);
    if (remap[ns->stream] < 0)
      remap[ns->stream] = used++;
    ns->stream = remap[ns->stream];
  }
  return used ? used : 1;
}

/* The minimal waits of unit u on stream s; updates the clocks. */
static void place_waits(Graph *g, const SchedDeps *d, Clocks *c, int u, int *events) {
  int ns = c->nstreams;
  Node *n = d->unit[u];
  int s = node_sched(g, n)->stream;
  int *clock = &c->now[s * ns];
  /* the latest unknown predecessor on each other stream */
  int latest[64];
  for (int t = 0; t < ns; t++)
    latest[t] = -1;
  for (int k = 0; k < d->npred[u]; k++) {
    int p = d->pred[u][k];
    int t = node_sched(g, d->unit[p])->stream;
    if (t == s || clock[t] >= c->pos[p])
      continue;
    if (latest[t] < 0 || c->pos[p] > c->pos[latest[t]])
      latest[t] = p;
  }
  /* drop candidates another candidate's event already covers */
  for (int t = 0; t < ns; t++) {
    if (latest[t] < 0)
      continue;
    for (int t2 = 0; t2 < ns; t2++)
      if (t2 != t && latest[t2] >= 0 && c->snapshot[latest[t2] * ns + t] >= c->pos[latest[t]]) {
        latest[t] = -1;
        break;
      }
  }
  for (int t = 0; t < ns; t++) {
    int p = latest[t];
    if (p < 0)
      continue;
    Node *pn = d->unit[p];
    NodeSchedule *at = node_sched(g, pn);
    if (at->record_event < 0)
      at->record_event = (*events)++;
    node_add_wait(g, n, at->record_event);
    for (int k = 0; k < ns; k++)
      if (c->snapshot[p * ns + k] > clock[k])
        clock[k] = c->snapshot[p * ns + k];
  }
  c->pos[u] = ++c->count[s];
  clock[s] = c->pos[u];
  memcpy(&c->snapshot[u * ns], clock, sizeof(int) * (size_t)ns);
}

/*
 * Of each node's waits, those on events recorded inside its own stage: a
 * stage timed alone (net_profile) starts after everything before it, so
 * only these still order its nodes.
 */
static void find_stage_waits(Graph *g, int nevents) {
  Node **recorder = calloc((size_t)nevents + 1, sizeof(Node *));
  for (int k = 0; k < g->sched.norder; k++) {
    Node *n = g->sched.order[k];
    NodeSchedule *ns = node_sched(g, n);
    if (ns->record_event >= 0)
      recorder[ns->record_event] = n;
  }
  for (int k = 0; k < g->sched.norder; k++) {
    Node *n = g->sched.order[k];
    NodeSchedule *ns = node_sched(g, n);
    for (int w = 0; w < ns->nwaits; w++) {
      const Node *r = recorder[ns->waits[w]];
      if (!r || node_sched(g, r)->stage != ns->stage)
        continue;
      if (!ns->stage_waits)
        ns->stage_waits = arena_alloc(g->arena, sizeof(int) * (size_t)ns->nwaits);
      ns->stage_waits[ns->nstage_waits++] = ns->waits[w];
    }
  }
  free(recorder);
}

bool sync_graph(Graph *g, const SchedDeps *d) {
  Schedule *sch = &g->sched;
  if (!sch->order)
    return true;
  for (int i = 0; i < g->nnodes; i++) {
    node_sched(g, g->nodes[i])->record_event = -1;
    node_sched(g, g->nodes[i])->waits = NULL;
    node_sched(g, g->nodes[i])->nwaits = 0;
    node_sched(g, g->nodes[i])->stage_waits = NULL;
    node_sched(g, g->nodes[i])->nstage_waits = 0;
  }
  int ns = compact_streams(g);
  Clocks c = {.nstreams = ns};
  c.now = calloc((size_t)ns * (size_t)ns, sizeof(int));
  c.snapshot = calloc((size_t)d->n * (size_t)ns + 1, sizeof(int));
  c.pos = calloc((size_t)d->n + 1, sizeof(int));
  c.count = calloc((size_t)ns, sizeof(int));
  int events = 0;
  for (int k = 0; k < sch->norder; k++) {
    int u = d->index_of[sch->order[k]->id];
    if (u >= 0)
      place_waits(g, d, &c, u, &events);
  }
  sch->nstreams = ns;
  sch->nevents = events;
  find_stage_waits(g, events);
  free(c.now);
  free(c.snapshot);
  free(c.pos);
  free(c.count);
  return true;
}

bool pass_sync(Graph *g, const PassOptions *opt, PassContext *ctx) {
  const CostModel *cm = pass_cost_model(ctx);
  if (!cm || !sync_graph(g, pass_deps(ctx)))
    return false;
  /* What the program, without stage barriers, is predicted to take. */
  g->sched.simulated_us = simulate_schedule(pass_deps(ctx), cm);
  return true;
}
