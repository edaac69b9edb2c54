/* sched_sequential.c - one stream, one unit per stage, topological order. */
#include "schedule.h"

bool sched_sequential(const SchedDeps *d, const CostModel *cm, const SchedOptions *o,
                      StagePlan *p) {
  (void)cm;
  (void)o;
  int group = 0;
  for (int u = 0; u < d->n; u++)
    plan_add_stage(p, d, &u, &group, 1, d->cost[u]);
  return true;
}
