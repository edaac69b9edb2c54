/*
 * sched_deps.c - the dependency graph of schedule units, through storage.
 *
 * Views issue nothing, so an edge cannot follow tensors: a unit reading T
 * depends on every unit that writes a part of T's storage overlapping the
 * elements T covers. That is what makes an in-place Concat's consumer wait
 * for all the producers writing its slices, and a consumer of a Split view
 * wait only for the one writer of its storage.
 */
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

typedef struct Write {
  int unit;
  int64_t lo, hi; /* element range [lo, hi) in the storage tensor */
} Write;

/* Element range of t inside its storage. */
static void storage_range(const Tensor *t, int64_t *lo, int64_t *hi) {
  int64_t n = tensor_numel(t);
  if (!t->alias_of) {
    *lo = 0;
    *hi = n;
    return;
  }
  int64_t extent = n > 0 ? 1 : 0;
  for (int i = 0; i < t->rank && n > 0; i++)
    extent += (t->dims[i] - 1) * (t->strides[i] > 0 ? t->strides[i] : -t->strides[i]);
  *lo = t->alias_offset;
  *hi = t->alias_offset + extent;
}

static bool is_unit(const Node *n) { return !n->dead && !n->is_view; }

/* Kahn's algorithm, ties broken by position in g->nodes (a min-heap would be
   faster; graphs are a few thousand units at most). */
static void topo_order(SchedDeps *d, Node **cand, int ncand, int **pred, int *npred) {
  int *indeg = calloc((size_t)ncand + 1, sizeof(int));
  int *ready = calloc((size_t)ncand + 1, sizeof(int));
  int **succ = calloc((size_t)ncand + 1, sizeof(int *));
  int *nsucc = calloc((size_t)ncand + 1, sizeof(int));
  int *cap = calloc((size_t)ncand + 1, sizeof(int));
  for (int u = 0; u < ncand; u++)
    for (int k = 0; k < npred[u]; k++) {
      int p = pred[u][k];
      if (nsucc[p] == cap[p]) {
        cap[p] = cap[p] ? cap[p] * 2 : 4;
        succ[p] = realloc(succ[p], sizeof(int) * (size_t)cap[p]);
      }
      succ[p][nsucc[p]++] = u;
      indeg[u]++;
    }
  /* `ready` is kept sorted ascending; the smallest index goes first. */
  int nready = 0, done = 0;
  for (int u = 0; u < ncand; u++)
    if (!indeg[u])
      ready[nready++] = u;
  int *pos = calloc((size_t)ncand + 1, sizeof(int));
  int head = 0;
  while (head < nready) {
    /* pick the smallest remaining ready index */
    int best = head;
    for (int i = head + 1; i < nready; i++)
      if (ready[i] < ready[best])
        best = i;
    int u = ready[best];
    ready[best] = ready[head];
    ready[head++] = u;
    pos[u] = done;
    d->unit[done++] = cand[u];
    for (int k = 0; k < nsucc[u]; k++)
      if (--indeg[succ[u][k]] == 0)
        ready[nready++] = succ[u][k];
  }
  /* A cycle cannot happen in a verified graph; keep the rest in node order. */
  for (int u = 0; u < ncand && done < ncand; u++)
    if (indeg[u] > 0)
      d->unit[done++] = cand[u];
  for (int u = 0; u < ncand; u++)
    free(succ[u]);
  free(succ);
  free(nsucc);
  free(cap);
  free(indeg);
  free(ready);
  free(pos);
}

/* Predecessors of every candidate, as candidate indices. */
static void find_preds(Graph *g, Node **cand, int ncand, const int *cand_of, int **pred,
                       int *npred) {
  /* ids index the arrays below: size them by the largest id in use */
  int nt = 0;
  for (int u = 0; u < ncand; u++) {
    Node *n = cand[u];
    for (int j = 0; j < n->nin + n->nout; j++) {
      Tensor *t = j < n->nin ? n->in[j] : n->out[j - n->nin];
      if (t && t->id + 1 > nt)
        nt = t->id + 1;
      if (t && tensor_storage(t)->id + 1 > nt)
        nt = tensor_storage(t)->id + 1;
    }
  }
  int *count = calloc((size_t)nt + 1, sizeof(int));
  for (int u = 0; u < ncand; u++)
    for (int j = 0; j < cand[u]->nout; j++)
      if (cand[u]->out[j])
        count[tensor_storage(cand[u]->out[j])->id]++;
  int *start = calloc((size_t)nt + 2, sizeof(int));
  for (int t = 0; t < nt; t++)
    start[t + 1] = start[t] + count[t];
  Write *w = calloc((size_t)start[nt] + 1, sizeof(Write));
  memset(count, 0, sizeof(int) * (size_t)nt);
  for (int u = 0; u < ncand; u++)
    for (int j = 0; j < cand[u]->nout; j++) {
      Tensor *o = cand[u]->out[j];
      if (!o)
        continue;
      int s = tensor_storage(o)->id;
      Write *dst = &w[start[s] + count[s]++];
      dst->unit = u;
      storage_range(o, &dst->lo, &dst->hi);
    }
  int *seen = malloc(sizeof(int) * ((size_t)ncand + 1));
  for (int u = 0; u < ncand; u++)
    seen[u] = -1;
  int *buf = malloc(sizeof(int) * ((size_t)ncand + 1));
  for (int u = 0; u < ncand; u++) {
    int nb = 0;
    Node *n = cand[u];
    for (int i = 0; i < n->nin; i++) {
      Tensor *t = n->in[i];
      if (!t || tensor_is_const(t))
        continue;
      int s = tensor_storage(t)->id;
      int64_t lo, hi;
      storage_range(t, &lo, &hi);
      for (int k = start[s]; k < start[s + 1]; k++)
        if (w[k].unit != u && w[k].lo < hi && lo < w[k].hi && seen[w[k].unit] != u) {
          seen[w[k].unit] = u;
          buf[nb++] = w[k].unit;
        }
    }
    npred[u] = nb;
    pred[u] = malloc(sizeof(int) * ((size_t)nb + 1));
    memcpy(pred[u], buf, sizeof(int) * (size_t)nb);
  }
  (void)cand_of;
  free(buf);
  free(seen);
  free(w);
  free(start);
  free(count);
}

SchedDeps *deps_build(Graph *g, const CostModel *cm) {
  Arena *a = g->arena;
  SchedDeps *d = arena_alloc(a, sizeof *d);
  d->g = g;
  Node **cand = malloc(sizeof(Node *) * ((size_t)g->nnodes + 1));
  int ncand = 0;
  for (int i = 0; i < g->nnodes; i++)
    if (is_unit(g->nodes[i]))
      cand[ncand++] = g->nodes[i];
  int **pred = calloc((size_t)ncand + 1, sizeof(int *));
  int *npred = calloc((size_t)ncand + 1, sizeof(int));
  find_preds(g, cand, ncand, NULL, pred, npred);

  d->n = ncand;
  d->unit = arena_alloc(a, sizeof(Node *) * ((size_t)ncand + 1));
  topo_order(d, cand, ncand, pred, npred);

  int maxid = 0;
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->id + 1 > maxid)
      maxid = g->nodes[i]->id + 1;
  d->index_of = arena_alloc(a, sizeof(int) * ((size_t)maxid + 1));
  for (int i = 0; i <= maxid; i++)
    d->index_of[i] = -1;
  for (int u = 0; u < ncand; u++)
    d->index_of[d->unit[u]->id] = u;

  /* Renumber predecessors into unit order and derive successors. */
  d->pred = arena_alloc(a, sizeof(int *) * ((size_t)ncand + 1));
  d->npred = arena_alloc(a, sizeof(int) * ((size_t)ncand + 1));
  d->succ = arena_alloc(a, sizeof(int *) * ((size_t)ncand + 1));
  d->nsucc = arena_alloc(a, sizeof(int) * ((size_t)ncand + 1));
  for (int c = 0; c < ncand; c++) {
    int u = d->index_of[cand[c]->id];
    d->npred[u] = npred[c];
    d->pred[u] = arena_alloc(a, sizeof(int) * ((size_t)npred[c] + 1));
    for (int k = 0; k < npred[c]; k++) {
      int p = d->index_of[cand[pred[c][k]]->id];
      d->pred[u][k] = p;
      d->nsucc[p]++;
    }
  }
  for (int u = 0; u < ncand; u++) {
    d->succ[u] = arena_alloc(a, sizeof(int) * ((size_t)d->nsucc[u] + 1));
    d->nsucc[u] = 0;
  }
  for (int u = 0; u < ncand; u++)
    for (int k = 0; k < d->npred[u]; k++) {
      int p = d->pred[u][k];
      d->succ[p][d->nsucc[p]++] = u;
    }
  for (int c = 0; c < ncand; c++)
    free(pred[c]);
  free(pred);
  free(npred);
  free(cand);

  d->cost = arena_alloc(a, sizeof(double) * ((size_t)ncand + 1));
  d->occ = arena_alloc(a, sizeof(double) * ((size_t)ncand + 1));
  if (cm)
    for (int u = 0; u < ncand; u++) {
      d->cost[u] = cost_node_us(cm, d->g, d->unit[u]);
      d->occ[u] = cost_occupancy(cm, d->g, d->unit[u]);
    }
  return d;
}
