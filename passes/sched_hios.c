/*
 * sched_hios.c - HIOS (Hierarchical Inter-Operator Scheduler, the HIOS-LP
 * algorithm): units placed on several GPUs, then grouped within each.
 *
 * Across GPUs (the paper's Alg. 1): repeatedly take the longest remaining
 * path, counting both unit times and transfer times (every edge might
 * cross GPUs), whose intermediate units touch no unit already placed, and
 * put the whole path on the GPU where the units placed so far finish
 * earliest. A path on one GPU pays no transfers, which is the point.
 *
 * Within each GPU (Alg. 2): slide a window along the GPU's units in
 * priority order; a window of independent units becomes one group that
 * runs concurrently (the stage model's time) when that lowers the
 * latency. A grouping that would close a cycle across GPUs deadlocks the
 * evaluation and is refused.
 *
 * The evaluation of a placement is the paper's: each GPU runs its units
 * (or groups) one after another in priority order, each as soon as its
 * producers have finished, plus a transfer for a producer on another GPU.
 * `placement` "round-robin" and "contiguous" replace Alg. 1 by the naive
 * splits the paper and the benchmark compare with.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

typedef struct Hios {
  const SchedDeps *d;
  const CostModel *cm;
  double *const *xfer; /* xfer[v][k]: moving pred[v][k]'s output to v's GPU */
  double **sxfer;      /* the same per successor edge */
  int n, ndev;
  double *prio;        /* longest path to an exit, units and transfers */
  int *by_prio;        /* units by descending priority: a topological order */
  bool *copy;          /* a transfer unit: runs on the copy engine, beside the GPU's work */
  /* scratch of evaluate() */
  int **list, *nlist, *pos;
  bool *done;
  double *free_at, *finish;
  GroupLoad *loads;
} Hios;

/* ---------------------------------------------------------- transfers */

/* Bytes unit v reads of what its k-th producer writes. */
int64_t hios_edge_bytes(const SchedDeps *d, int v, int k) {
  Node *reader = d->unit[v], *writer = d->unit[d->pred[v][k]];
  int64_t bytes = 0;
  for (int i = 0; i < reader->nin; i++) {
    Tensor *t = reader->in[i];
    if (!t || tensor_is_const(t))
      continue;
    for (int j = 0; j < writer->nout; j++) {
      Tensor *o = writer->out[j];
      if (!o || tensor_storage(o) != tensor_storage(t))
        continue;
      int64_t a = tensor_numel(t), b = tensor_numel(o);
      bytes += (a < b ? a : b) * (int64_t)dtype_size(t->dtype);
    }
  }
  return bytes;
}

double hios_transfer_us(const CostModel *cm, int64_t bytes) {
  return cm->dev.link_latency_us + (double)bytes / (cm->dev.link_gbps * 1e3) + cost_sync_us(cm);
}

double **hios_transfer_costs(const SchedDeps *d, const CostModel *cm) {
  Arena *a = d->g->arena;
  double **x = arena_alloc(a, sizeof(double *) * ((size_t)d->n + 1));
  for (int v = 0; v < d->n; v++) {
    x[v] = arena_alloc(a, sizeof(double) * ((size_t)d->npred[v] + 1));
    for (int k = 0; k < d->npred[v]; k++)
      x[v][k] = hios_transfer_us(cm, hios_edge_bytes(d, v, k));
  }
  return x;
}

/* --------------------------------------------------------- evaluation */

/* Time of one item: a unit alone, or a group running concurrently. */
static double item_us(Hios *h, const int *units, int k) {
  if (k == 1)
    return h->d->cost[units[0]];
  for (int i = 0; i < k; i++) {
    h->loads[i] = (GroupLoad){0};
    cost_unit_load(h->cm, h->d->cost[units[i]], h->d->occ[units[i]], &h->loads[i]);
  }
  return cost_stage_loads(h->cm, h->loads, k, k);
}

/*
 * Latency of the placed units (device >= 0): each GPU runs its items in
 * priority order, each when its producers' data has arrived. Units of one
 * item share `item` (their leader) and are consecutive on their GPU.
 * INFINITY when the items deadlock (a grouping closed a cycle).
 */
static double evaluate(Hios *h, const int *device, const int *item, double *start) {
  int n = h->n;
  for (int g = 0; g < h->ndev; g++) {
    h->nlist[g] = 0;
    h->pos[g] = 0;
    h->free_at[g] = 0;
  }
  int todo = 0;
  for (int r = 0; r < n; r++) {
    int u = h->by_prio[r];
    h->done[u] = false;
    if (device[u] >= 0) {
      h->list[device[u]][h->nlist[device[u]]++] = u;
      todo++;
    }
  }
  double latency = 0;
  while (todo > 0) {
    bool progress = false;
    for (int g = 0; g < h->ndev; g++) {
      while (h->pos[g] < h->nlist[g]) {
        int *units = &h->list[g][h->pos[g]], k = 1;
        while (h->pos[g] + k < h->nlist[g] && item[units[k]] == item[units[0]])
          k++;
        bool copy = k == 1 && h->copy[units[0]];
        double ready = copy ? 0 : h->free_at[g]; /* a copy does not wait for kernels */
        for (int i = 0; i < k; i++) {
          int v = units[i];
          for (int e = 0; e < h->d->npred[v]; e++) {
            int p = h->d->pred[v][e];
            if (device[p] < 0)
              continue;
            if (item[p] == item[v] && device[p] == g)
              return INFINITY; /* a group holding a producer and its consumer */
            if (!h->done[p])
              goto blocked;
            double t = h->finish[p] + (device[p] != g ? h->xfer[v][e] : 0);
            if (t > ready)
              ready = t;
          }
        }
        double end = ready + item_us(h, units, k);
        for (int i = 0; i < k; i++) {
          h->done[units[i]] = true;
          h->finish[units[i]] = end;
          if (start)
            start[units[i]] = ready;
        }
        if (!copy)
          h->free_at[g] = end;
        if (end > latency)
          latency = end;
        h->pos[g] += k;
        todo -= k;
        progress = true;
      }
    blocked:;
    }
    if (!progress)
      return INFINITY;
  }
  return latency;
}

/* ------------------------------------------------- across GPUs: Alg. 1 */

/*
 * The longest valid path among unplaced units: its intermediate units have
 * no edge to or from a placed unit; its length counts the edge from a
 * placed producer into its first unit and from its last unit to a placed
 * consumer. Writes the path into `path` (in order) and returns its length.
 */
static int longest_valid_path(Hios *h, const int *device, int *path, double *ext, int *prev_ext,
                              int *prev_end) {
  const SchedDeps *d = h->d;
  int best = -1;
  double best_len = -1;
  for (int v = 0; v < h->n; v++) {
    if (device[v] >= 0)
      continue;
    bool clean = true;
    double in = 0, out = 0;
    for (int k = 0; k < d->npred[v]; k++)
      if (device[d->pred[v][k]] >= 0) {
        clean = false;
        if (h->xfer[v][k] > in)
          in = h->xfer[v][k];
      }
    for (int k = 0; k < d->nsucc[v]; k++)
      if (device[d->succ[v][k]] >= 0) {
        clean = false;
        if (h->sxfer[v][k] > out)
          out = h->sxfer[v][k];
      }
    double len = in + d->cost[v];
    int from = -1;
    for (int k = 0; k < d->npred[v]; k++) {
      int p = d->pred[v][k];
      if (device[p] >= 0 || ext[p] < 0)
        continue;
      double l = ext[p] + h->xfer[v][k] + d->cost[v];
      if (l > len) {
        len = l;
        from = p;
      }
    }
    prev_end[v] = from;
    /* v continues a path only as its first unit or as a clean one */
    ext[v] = clean ? len : in + d->cost[v];
    prev_ext[v] = clean ? from : -1;
    if (len + out > best_len) {
      best_len = len + out;
      best = v;
    }
  }
  int np = 0;
  for (int v = best; v >= 0; v = np == 1 ? prev_end[v] : prev_ext[v])
    path[np++] = v;
  for (int i = 0; i < np / 2; i++) {
    int t = path[i];
    path[i] = path[np - 1 - i];
    path[np - 1 - i] = t;
  }
  return np;
}

static int place_longest_paths(Hios *h, int *device, const int *item) {
  int n = h->n, placed = 0, npaths = 0;
  int *path = malloc(sizeof(int) * ((size_t)n + 1));
  int *prev_ext = malloc(sizeof(int) * ((size_t)n + 1));
  int *prev_end = malloc(sizeof(int) * ((size_t)n + 1));
  double *ext = malloc(sizeof(double) * ((size_t)n + 1));
  for (int v = 0; v < n; v++) {
    device[v] = -1;
    ext[v] = -1;
  }
  while (placed < n) {
    int np = longest_valid_path(h, device, path, ext, prev_ext, prev_end);
    int pick = 0;
    double pick_us = INFINITY;
    for (int g = 0; g < h->ndev; g++) {
      for (int i = 0; i < np; i++)
        device[path[i]] = g;
      double us = evaluate(h, device, item, NULL);
      if (us < pick_us) {
        pick_us = us;
        pick = g;
      }
    }
    for (int i = 0; i < np; i++)
      device[path[i]] = pick;
    placed += np;
    npaths++;
  }
  free(path);
  free(prev_ext);
  free(prev_end);
  free(ext);
  return npaths;
}

/* The naive splits: unit by unit in turn, or topological ranges of equal work. */
static void place_naive(Hios *h, int *device, bool round_robin) {
  double total = 0, sum = 0;
  for (int u = 0; u < h->n; u++)
    total += h->d->cost[u];
  for (int u = 0; u < h->n; u++) {
    if (round_robin) {
      device[u] = u % h->ndev;
      continue;
    }
    int g = total > 0 ? (int)(sum / total * h->ndev) : 0;
    device[u] = g < h->ndev ? g : h->ndev - 1;
    sum += h->d->cost[u];
  }
}

/* ------------------------------------------------- within GPUs: Alg. 2 */

static bool adjacent(const SchedDeps *d, int a, int b) {
  for (int k = 0; k < d->npred[b]; k++)
    if (d->pred[b][k] == a)
      return true;
  for (int k = 0; k < d->npred[a]; k++)
    if (d->pred[a][k] == b)
      return true;
  return false;
}

static double group_by_window(Hios *h, const int *device, int *item, int window) {
  int n = h->n;
  double best = evaluate(h, device, item, NULL);
  /* each GPU's units in priority order, and every unit's place there */
  int *at = malloc(sizeof(int) * ((size_t)n + 1));
  int *size = malloc(sizeof(int) * ((size_t)n + 1));
  for (int g = 0; g < h->ndev; g++)
    h->nlist[g] = 0;
  for (int r = 0; r < n; r++) {
    int u = h->by_prio[r];
    at[u] = h->nlist[device[u]];
    h->list[device[u]][h->nlist[device[u]]++] = u;
    size[u] = 1;
  }
  int **list = malloc(sizeof(int *) * (size_t)h->ndev);
  for (int g = 0; g < h->ndev; g++) {
    list[g] = malloc(sizeof(int) * ((size_t)h->nlist[g] + 1));
    memcpy(list[g], h->list[g], sizeof(int) * (size_t)h->nlist[g]);
  }
  int *count = malloc(sizeof(int) * (size_t)h->ndev);
  for (int g = 0; g < h->ndev; g++)
    count[g] = h->nlist[g];
  for (int r = 0; r < n; r++) {
    int v = h->by_prio[r], g = device[v];
    if (size[item[v]] > 1 || h->copy[v])
      continue;
    int take = 0;
    for (int p = 1; p < window && at[v] + p < count[g]; p++) {
      int w = list[g][at[v] + p];
      if (size[item[w]] > 1 || h->copy[w])
        break;
      bool independent = true;
      for (int i = 0; i < p && independent; i++)
        independent = !adjacent(h->d, list[g][at[v] + i], w);
      if (!independent)
        break;
      for (int i = 1; i <= p; i++)
        item[list[g][at[v] + i]] = v;
      double us = evaluate(h, device, item, NULL);
      for (int i = 1; i <= p; i++)
        item[list[g][at[v] + i]] = list[g][at[v] + i];
      if (us < best) {
        best = us;
        take = p;
      }
    }
    for (int i = 1; i <= take; i++)
      item[list[g][at[v] + i]] = v;
    size[v] = take + 1;
  }
  for (int g = 0; g < h->ndev; g++)
    free(list[g]);
  free(list);
  free(count);
  free(at);
  free(size);
  return best;
}

/* -------------------------------------------------------------- driver */

static int by_priority(const void *a, const void *b, void *ctx) {
  const double *prio = ctx;
  int x = *(const int *)a, y = *(const int *)b;
  if (prio[x] != prio[y])
    return prio[x] < prio[y] ? 1 : -1;
  return (x > y) - (x < y);
}

static void hios_init(Hios *h, const SchedDeps *d, const CostModel *cm, double *const *xfer,
                      int ndev) {
  int n = d->n;
  *h = (Hios){.d = d, .cm = cm, .xfer = xfer, .n = n, .ndev = ndev};
  h->sxfer = malloc(sizeof(double *) * ((size_t)n + 1));
  for (int u = 0; u < n; u++)
    h->sxfer[u] = malloc(sizeof(double) * ((size_t)d->nsucc[u] + 1));
  for (int v = 0; v < n; v++)
    for (int k = 0; k < d->npred[v]; k++) {
      int p = d->pred[v][k];
      for (int j = 0; j < d->nsucc[p]; j++)
        if (d->succ[p][j] == v)
          h->sxfer[p][j] = xfer[v][k];
    }
  h->prio = malloc(sizeof(double) * ((size_t)n + 1));
  for (int u = n - 1; u >= 0; u--) {
    double longest = 0;
    for (int k = 0; k < d->nsucc[u]; k++) {
      double l = h->sxfer[u][k] + h->prio[d->succ[u][k]];
      if (l > longest)
        longest = l;
    }
    h->prio[u] = d->cost[u] + longest;
  }
  h->by_prio = malloc(sizeof(int) * ((size_t)n + 1));
  for (int u = 0; u < n; u++)
    h->by_prio[u] = u;
  qsort_r(h->by_prio, (size_t)n, sizeof(int), by_priority, h->prio);
  h->list = malloc(sizeof(int *) * (size_t)ndev);
  for (int g = 0; g < ndev; g++)
    h->list[g] = malloc(sizeof(int) * ((size_t)n + 1));
  h->nlist = calloc((size_t)ndev, sizeof(int));
  h->pos = calloc((size_t)ndev, sizeof(int));
  h->free_at = calloc((size_t)ndev, sizeof(double));
  h->done = calloc((size_t)n + 1, sizeof(bool));
  h->finish = calloc((size_t)n + 1, sizeof(double));
  h->loads = calloc((size_t)n + 1, sizeof(GroupLoad));
  h->copy = calloc((size_t)n + 1, sizeof(bool));
  for (int u = 0; u < n; u++)
    h->copy[u] = node_is_transfer(d->g, d->unit[u]);
}

static void hios_free(Hios *h) {
  for (int u = 0; u < h->n; u++)
    free(h->sxfer[u]);
  free(h->sxfer);
  for (int g = 0; g < h->ndev; g++)
    free(h->list[g]);
  free(h->list);
  free(h->nlist);
  free(h->pos);
  free(h->free_at);
  free(h->done);
  free(h->finish);
  free(h->loads);
  free(h->copy);
  free(h->prio);
  free(h->by_prio);
}

double hios_evaluate(const SchedDeps *d, const CostModel *cm, double *const *xfer, int ndev,
                     const int *device, const int *item) {
  Hios h;
  hios_init(&h, d, cm, xfer, ndev);
  double us = evaluate(&h, device, item, NULL);
  hios_free(&h);
  return us;
}

/* The placement and grouping on exactly `ndev` GPUs (some may stay idle). */
static void plan_on(Hios *h, const char *placement, int window, const int *given,
                    MultiGpuPlan *out) {
  for (int u = 0; u < h->n; u++)
    out->item[u] = u;
  out->npaths = 0;
  if (given)
    memcpy(out->device, given, sizeof(int) * (size_t)h->n);
  else if (!placement || strcmp(placement, "lp") == 0)
    out->npaths = place_longest_paths(h, out->device, out->item);
  else
    place_naive(h, out->device, strcmp(placement, "round-robin") == 0);
  out->mapped_us = evaluate(h, out->device, out->item, NULL);
  out->latency_us = window > 1 ? group_by_window(h, out->device, out->item, window)
                               : out->mapped_us;
}

static void plan_alloc(Arena *a, int n, MultiGpuPlan *p) {
  p->device = arena_alloc(a, sizeof(int) * ((size_t)n + 1));
  p->item = arena_alloc(a, sizeof(int) * ((size_t)n + 1));
  p->start = arena_alloc(a, sizeof(double) * ((size_t)n + 1));
  p->order = arena_alloc(a, sizeof(int) * ((size_t)n + 1));
}

/*
 * Alg. 1 commits each path to a GPU before it sees the transfers later
 * paths will need, so on a slow link more GPUs can come out slower than
 * fewer. HIOS-LP keeps the best over 1..ndev GPUs: `--gpus N` means at
 * most N, and never predicts worse than one GPU. The naive splits use all
 * ndev, as asked.
 */
void hios_plan(const SchedDeps *d, const CostModel *cm, double *const *xfer, int ndev,
               const char *placement, int window, const int *given, MultiGpuPlan *out) {
  Arena *a = d->g->arena;
  int n = d->n;
  plan_alloc(a, n, out);
  out->latency_us = INFINITY;
  MultiGpuPlan trial;
  plan_alloc(a, n, &trial);
  bool lp = !placement || strcmp(placement, "lp") == 0;
  for (int m = given || !lp ? ndev : 1; m <= ndev; m++) {
    Hios h;
    hios_init(&h, d, cm, xfer, m);
    plan_on(&h, placement, window, given, &trial);
    hios_free(&h);
    if (trial.latency_us < out->latency_us - 1e-9 || out->latency_us == INFINITY) {
      MultiGpuPlan keep = *out;
      *out = trial;
      trial = keep;
    }
  }
  out->ndev = ndev;
  Hios h;
  hios_init(&h, d, cm, xfer, ndev);
  evaluate(&h, out->device, out->item, out->start);
  /* issue order: by start time, then by priority (keeps producers first) */
  for (int r = 0; r < n; r++)
    out->order[r] = h.by_prio[r];
  for (int i = 1; i < n; i++) {
    int u = out->order[i], j = i;
    while (j > 0 && out->start[out->order[j - 1]] > out->start[u]) {
      out->order[j] = out->order[j - 1];
      j--;
    }
    out->order[j] = u;
  }
  hios_free(&h);
}

/* ------------------------------------------------------ the scheduler */

/*
 * After place-devices every unit has its GPU and every move between GPUs
 * is a transfer unit, so an edge costs one event; without it (a unit
 * graph scheduled directly, as the tests do) HIOS places the units
 * itself. A group of k units runs on k streams of its GPU, transfers on
 * one more; streams are numbered GPU by GPU.
 */
bool sched_hios(const SchedDeps *d, const CostModel *cm, const SchedOptions *o, StagePlan *p) {
  int n = d->n, ndev = o->gpus > 0 ? o->gpus : 1;
  int window = o->window > 0 ? o->window : 3;
  if (window > o->streams)
    window = o->streams > 0 ? o->streams : 1;
  if ((window + 1) * ndev > 64) /* stream ids stay below 64 */
    window = 64 / ndev - 1;
  int lanes = window + 1;
  bool placed = false;
  for (int u = 0; u < n; u++)
    placed |= node_sched(d->g, d->unit[u])->device != 0;
  int *given = NULL;
  double **xfer;
  if (placed) {
    given = arena_alloc(d->g->arena, sizeof(int) * ((size_t)n + 1));
    for (int u = 0; u < n; u++)
      given[u] = node_sched(d->g, d->unit[u])->device;
    xfer = arena_alloc(d->g->arena, sizeof(double *) * ((size_t)n + 1));
    for (int v = 0; v < n; v++) {
      xfer[v] = arena_alloc(d->g->arena, sizeof(double) * ((size_t)d->npred[v] + 1));
      for (int k = 0; k < d->npred[v]; k++)
        xfer[v][k] = cost_sync_us(cm);
    }
  } else {
    xfer = hios_transfer_costs(d, cm);
  }
  MultiGpuPlan plan;
  hios_plan(d, cm, xfer, ndev, o->placement, window, given, &plan);
  int *stream = arena_alloc(d->g->arena, sizeof(int) * ((size_t)n + 1));
  int *slot = calloc((size_t)n + 1, sizeof(int));
  int *groups = calloc((size_t)n + 1, sizeof(int));
  for (int k = 0; k < n; k++) {
    int u = plan.order[k];
    int lane = node_is_transfer(d->g, d->unit[u]) ? window : slot[plan.item[u]]++;
    stream[u] = plan.device[u] * lanes + lane;
    groups[k] = stream[u];
  }
  plan_add_stage(p, d, plan.order, groups, n, plan.latency_us);
  p->order = plan.order;
  p->stream = stream;
  p->device = plan.device;
  p->mapped_us = plan.mapped_us;
  free(slot);
  free(groups);
  return true;
}
