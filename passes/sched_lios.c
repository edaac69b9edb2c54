/*
 * sched_lios.c - LIOS list scheduling: repeatedly take the ready unit of
 * highest priority and put it on the stream where it finishes earliest.
 *
 * Priorities: "paper" is LIOS's own, the unit's latency; "rank" (default)
 * is the upward rank, the latency of the longest path from the unit to an
 * exit, which favours the critical path rather than merely long operators.
 * Ties go to the unit earliest in topological order, and to the lowest
 * stream. A dependency that crosses streams costs one event record + wait.
 */
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

bool sched_lios(const SchedDeps *d, const CostModel *cm, const SchedOptions *o, StagePlan *p) {
  int n = d->n, x = o->streams > 0 ? o->streams : 8;
  /* On several GPUs (placed by place-devices) each GPU has x streams of its
     own, streams g*x .. g*x+x-1, and a unit goes on one of its GPU's. */
  int gpus = o->gpus > 1 ? o->gpus : 1;
  if (x * gpus > 64)
    x = 64 / gpus;
  if (x > 64)
    x = 64;
  bool paper = o->lios_priority && strcmp(o->lios_priority, "paper") == 0;
  double *prio = calloc((size_t)n + 1, sizeof(double));
  for (int u = n - 1; u >= 0; u--) {
    double longest = 0;
    for (int k = 0; !paper && k < d->nsucc[u]; k++)
      if (prio[d->succ[u][k]] > longest)
        longest = prio[d->succ[u][k]];
    prio[u] = d->cost[u] + longest;
  }
  int *missing = calloc((size_t)n + 1, sizeof(int));
  int *ready = calloc((size_t)n + 1, sizeof(int));
  int *stream = arena_alloc(d->g->arena, sizeof(int) * ((size_t)n + 1));
  double *finish = calloc((size_t)n + 1, sizeof(double));
  double *free_at = calloc((size_t)(x * gpus), sizeof(double));
  int *order = arena_alloc(d->g->arena, sizeof(int) * ((size_t)n + 1));
  int nready = 0, norder = 0;
  for (int u = 0; u < n; u++)
    if (!(missing[u] = d->npred[u]))
      ready[nready++] = u;
  double sync = cost_sync_us(cm), makespan = 0;
  while (nready > 0) {
    int best = 0;
    for (int i = 1; i < nready; i++)
      if (prio[ready[i]] > prio[ready[best]] ||
          (prio[ready[i]] == prio[ready[best]] && ready[i] < ready[best]))
        best = i;
    int u = ready[best];
    ready[best] = ready[--nready];
    int first = node_sched(d->g, d->unit[u])->device * x, pick = first;
    /* the host CPU runs one unit at a time, each over all its cores */
    int here = o->host_device > 0 && node_sched(d->g, d->unit[u])->device == o->host_device ? 1 : x;
    double pick_finish = 0;
    for (int s = first; s < first + here; s++) {
      double start = free_at[s];
      for (int k = 0; k < d->npred[u]; k++) {
        int q = d->pred[u][k];
        double t = finish[q] + (stream[q] != s ? sync : 0);
        if (t > start)
          start = t;
      }
      if (s == first || start + d->cost[u] < pick_finish) {
        pick = s;
        pick_finish = start + d->cost[u];
      }
    }
    stream[u] = pick;
    finish[u] = pick_finish;
    free_at[pick] = pick_finish;
    if (pick_finish > makespan)
      makespan = pick_finish;
    order[norder++] = u;
    for (int k = 0; k < d->nsucc[u]; k++)
      if (--missing[d->succ[u][k]] == 0)
        ready[nready++] = d->succ[u][k];
  }
  /* Streams renumbered by first use, so that stream 0 is the busiest start. */
  int remap[64];
  for (int s = 0; s < 64; s++)
    remap[s] = -1;
  int used = 0;
  for (int k = 0; k < norder; k++)
    if (remap[stream[order[k]]] < 0)
      remap[stream[order[k]]] = used++;
  int *groups = calloc((size_t)n + 1, sizeof(int));
  int *units = calloc((size_t)n + 1, sizeof(int));
  for (int k = 0; k < norder; k++) {
    units[k] = order[k];
    groups[k] = remap[stream[order[k]]];
  }
  plan_add_stage(p, d, units, groups, norder, makespan);
  /* plan_add_stage kept the units; the issue order and streams are LIOS's. */
  p->order = order;
  p->stream = stream;
  for (int u = 0; u < n; u++)
    stream[u] = remap[stream[u]];
  if (gpus > 1) { /* its makespan: the single-GPU simulation does not apply */
    p->device = arena_alloc(d->g->arena, sizeof(int) * ((size_t)n + 1));
    for (int u = 0; u < n; u++)
      p->device[u] = node_sched(d->g, d->unit[u])->device;
    p->mapped_us = makespan;
  }
  free(groups);
  free(units);
  free(prio);
  free(missing);
  free(ready);
  free(finish);
  free(free_at);
  return true;
}
