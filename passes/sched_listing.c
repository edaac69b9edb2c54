/*
 * sched_listing.c - the order in which net.c lists the nodes: the issue
 * order, with each view and constant (whose code is nothing, and whose
 * comment says where its data comes from) placed as soon as its inputs
 * are, so that it reads next to its producer.
 *
 * After each issued node, the nodes that issue nothing and have become
 * ready are listed in sweeps over the node array: a sweep lists, in array
 * order, every ready node it passes, and sweeps repeat while one lists
 * anything. Two heaps replay those sweeps without scanning the array: one
 * holds the ready nodes still ahead of the sweep, the other those behind
 * it, which wait for the next sweep.
 */
#include <stdlib.h>

#include "pass.h"
#include "schedule.h"

static bool issues_nothing(const Node *n) { return n->is_view || n->op == OP_CONSTANT; }

/* A min-heap of node array indices. */
typedef struct Heap {
  int *at;
  int n;
} Heap;

static void heap_push(Heap *h, int v) {
  int i = h->n++;
  while (i > 0 && h->at[(i - 1) / 2] > v) {
    h->at[i] = h->at[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->at[i] = v;
}

static int heap_pop(Heap *h) {
  int top = h->at[0], last = h->at[--h->n], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= h->n)
      break;
    if (c + 1 < h->n && h->at[c + 1] < h->at[c])
      c++;
    if (h->at[c] >= last)
      break;
    h->at[i] = h->at[c];
    i = c;
  }
  if (h->n > 0)
    h->at[i] = last;
  return top;
}

typedef struct Lister {
  Graph *g;
  int *index;       /* per node id: its place in g->nodes */
  int *pending;     /* per node index: inputs whose producer is not listed yet */
  int *waiter_start; /* per node index: where its waiting consumers begin in waiters */
  int *waiters;     /* consumer indices that issue nothing, one per input slot */
  bool *listed;     /* per node index */
  Heap ahead, behind;
  int cursor;       /* the index the sweep has reached */
  Node **listing;
  int count;
} Lister;

static void become_ready(Lister *l, int i) {
  heap_push(i > l->cursor ? &l->ahead : &l->behind, i);
}

static void list_node(Lister *l, int i) {
  l->listing[l->count++] = l->g->nodes[i];
  l->listed[i] = true;
  for (int k = l->waiter_start[i]; k < l->waiter_start[i + 1]; k++) {
    int c = l->waiters[k];
    if (--l->pending[c] == 0 && !l->listed[c])
      become_ready(l, c);
  }
}

static void list_ready(Lister *l) {
  l->cursor = -1;
  for (;;) {
    if (l->ahead.n == 0) {
      if (l->behind.n == 0)
        return;
      Heap t = l->ahead;
      l->ahead = l->behind;
      l->behind = t;
      l->cursor = -1;
    }
    int i = heap_pop(&l->ahead);
    l->cursor = i;
    list_node(l, i);
  }
}

static bool waits_for_inputs(const Node *n) { return !n->dead && issues_nothing(n); }

/* Producer index of each input slot of each waiting node, as a CSR table. */
static void build_waiters(Lister *l) {
  Graph *g = l->g;
  int nn = g->nnodes;
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    if (!waits_for_inputs(n))
      continue;
    for (int j = 0; j < n->nin; j++)
      if (n->in[j] && n->in[j]->producer) {
        l->waiter_start[l->index[n->in[j]->producer->id] + 1]++;
        l->pending[i]++;
      }
  }
  for (int i = 0; i < nn; i++)
    l->waiter_start[i + 1] += l->waiter_start[i];
  int *fill = calloc((size_t)nn + 1, sizeof(int));
  for (int i = 0; i < nn; i++) {
    Node *n = g->nodes[i];
    if (!waits_for_inputs(n))
      continue;
    for (int j = 0; j < n->nin; j++)
      if (n->in[j] && n->in[j]->producer) {
        int p = l->index[n->in[j]->producer->id];
        l->waiters[l->waiter_start[p] + fill[p]++] = i;
      }
  }
  free(fill);
}

void store_listing(Graph *g) {
  Schedule *s = &g->sched;
  int nn = g->nnodes;
  Lister l = {.g = g};
  int maxid = 0;
  for (int i = 0; i < nn; i++)
    if (g->nodes[i]->id + 1 > maxid)
      maxid = g->nodes[i]->id + 1;
  l.index = malloc(sizeof(int) * ((size_t)maxid + 1));
  for (int i = 0; i < nn; i++)
    l.index[g->nodes[i]->id] = i;
  l.pending = calloc((size_t)nn + 1, sizeof(int));
  l.waiter_start = calloc((size_t)nn + 2, sizeof(int));
  int nslots = 0;
  for (int i = 0; i < nn; i++)
    nslots += g->nodes[i]->nin;
  l.waiters = malloc(sizeof(int) * ((size_t)nslots + 1));
  l.listed = calloc((size_t)nn + 1, sizeof(bool));
  l.ahead.at = malloc(sizeof(int) * ((size_t)nn + 1));
  l.behind.at = malloc(sizeof(int) * ((size_t)nn + 1));
  l.listing = arena_alloc(g->arena, sizeof(Node *) * ((size_t)nn + 1));
  build_waiters(&l);

  l.cursor = -1;
  for (int i = 0; i < nn; i++)
    if (waits_for_inputs(g->nodes[i]) && l.pending[i] == 0)
      become_ready(&l, i);
  list_ready(&l);
  for (int k = 0; k < s->norder; k++) {
    int i = l.index[s->order[k]->id];
    if (l.listed[i]) /* a constant, listed with the views */
      continue;
    l.cursor = -1;
    list_node(&l, i);
    list_ready(&l);
  }
  l.listing[l.count] = NULL;
  s->listing = l.listing;
  free(l.index);
  free(l.pending);
  free(l.waiter_start);
  free(l.waiters);
  free(l.listed);
  free(l.ahead.at);
  free(l.behind.at);
}
