/*
 * sched_greedy.c - every unit that is ready forms the next stage.
 *
 * Ready units are independent of each other, so each is its own group;
 * the stage cost packs groups onto the available streams.
 */
#include <stdlib.h>

#include "schedule.h"

bool sched_greedy(const SchedDeps *d, const CostModel *cm, const SchedOptions *o, StagePlan *p) {
  int n = d->n;
  int *missing = calloc((size_t)n + 1, sizeof(int));
  int *ready = calloc((size_t)n + 1, sizeof(int));
  int *next = calloc((size_t)n + 1, sizeof(int));
  int *groups = calloc((size_t)n + 1, sizeof(int));
  GroupLoad *loads = calloc((size_t)n + 1, sizeof(GroupLoad));
  int nready = 0;
  for (int u = 0; u < n; u++) {
    missing[u] = d->npred[u];
    if (!missing[u])
      ready[nready++] = u;
  }
  while (nready > 0) {
    for (int i = 0; i < nready; i++) {
      groups[i] = i;
      cost_unit_load(cm, d->cost[ready[i]], d->occ[ready[i]], &loads[i]);
    }
    double t = cost_stage_loads(cm, loads, nready, o->streams);
    plan_add_stage(p, d, ready, groups, nready, t);
    int nnext = 0;
    for (int i = 0; i < nready; i++) {
      int u = ready[i];
      for (int k = 0; k < d->nsucc[u]; k++)
        if (--missing[d->succ[u][k]] == 0)
          next[nnext++] = d->succ[u][k];
    }
    int *tmp = ready;
    ready = next;
    next = tmp;
    nready = nnext;
  }
  free(missing);
  free(ready);
  free(next);
  free(groups);
  free(loads);
  return true;
}
