/*
 * sched_sim.c - predicted makespan of the issued program.
 *
 * Streams run their units in issue order; a unit starts once its stream is
 * free and its producers are done (plus one event's cost when a producer is
 * on another stream). While several units run, each progresses at the rate
 * 1 / (1 + sum of the others' shares), a unit's share being what the stage
 * model charges it beside a longer group: interference + (1 -
 * interference) x occupancy. With no interference and no occupancy this is
 * a plain list-schedule makespan.
 */
#include <stdlib.h>

#include "schedule.h"

double simulate_schedule(const SchedDeps *d, const CostModel *cm) {
  Graph *g = d->g;
  int n = d->n, ns = g->sched.nstreams > 0 ? g->sched.nstreams : 1;
  int **queue = calloc((size_t)ns, sizeof(int *));
  int *qlen = calloc((size_t)ns, sizeof(int));
  int *head = calloc((size_t)ns, sizeof(int));
  for (int s = 0; s < ns; s++)
    queue[s] = malloc(sizeof(int) * ((size_t)n + 1));
  for (int k = 0; k < g->sched.norder; k++) {
    int u = d->index_of[g->sched.order[k]->id];
    int s = u >= 0 ? d->unit[u]->stream : -1;
    if (s >= 0 && s < ns)
      queue[s][qlen[s]++] = u;
  }
  double *finish = malloc(sizeof(double) * ((size_t)n + 1));
  double *left = malloc(sizeof(double) * ((size_t)n + 1));
  double *share = malloc(sizeof(double) * ((size_t)n + 1));
  int *running = malloc(sizeof(int) * ((size_t)ns + 1)); /* per stream: unit or -1 */
  for (int u = 0; u < n; u++) {
    finish[u] = -1;
    left[u] = d->cost[u];
    double k = cm->dev.interference;
    share[u] = k + (1 - k) * d->occ[u];
  }
  for (int s = 0; s < ns; s++)
    running[s] = -1;
  double now = 0, sync = cost_sync_us(cm);
  int done = 0, total = 0;
  for (int s = 0; s < ns; s++)
    total += qlen[s];
  while (done < total) {
    /* start what can start now; note the earliest future start */
    double next_start = 1e300;
    for (int s = 0; s < ns; s++) {
      if (running[s] >= 0 || head[s] >= qlen[s])
        continue;
      int u = queue[s][head[s]];
      double ready = now;
      bool blocked = false;
      for (int k = 0; k < d->npred[u]; k++) {
        int p = d->pred[u][k];
        if (finish[p] < 0) {
          blocked = true;
          break;
        }
        double t = finish[p] + (d->unit[p]->stream != s ? sync : 0);
        if (t > ready)
          ready = t;
      }
      if (blocked)
        continue;
      if (ready <= now)
        running[s] = u;
      else if (ready < next_start)
        next_start = ready;
    }
    double total_share = 0;
    int nrun = 0;
    for (int s = 0; s < ns; s++)
      if (running[s] >= 0) {
        total_share += share[running[s]];
        nrun++;
      }
    if (!nrun && next_start >= 1e300)
      break; /* a dependency that can never be met: the verifier reports it */
    double step = next_start - now;
    for (int s = 0; s < ns; s++)
      if (running[s] >= 0) {
        int u = running[s];
        double rate = 1.0 / (1.0 + total_share - share[u]);
        if (left[u] / rate < step)
          step = left[u] / rate;
      }
    for (int s = 0; s < ns; s++)
      if (running[s] >= 0) {
        int u = running[s];
        double rate = 1.0 / (1.0 + total_share - share[u]);
        left[u] -= step * rate;
        if (left[u] <= 1e-9) {
          finish[u] = now + step;
          running[s] = -1;
          head[s]++;
          done++;
        }
      }
    now += step;
  }
  for (int s = 0; s < ns; s++)
    free(queue[s]);
  free(queue);
  free(qlen);
  free(head);
  free(finish);
  free(left);
  free(share);
  free(running);
  return now;
}
