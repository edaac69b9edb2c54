/*
 * sched_ios.c - IOS: dynamic programming over "endings".
 *
 * The units left to schedule form a state S; the last stage of an optimal
 * schedule of S is an ending S' of S (no edge leaves S' towards S - S'), so
 *     cost[S] = min over endings S' of  cost[S - S'] + stage(S')
 * memoised on S. Inside a stage, connected units form a group (run in
 * order on one stream); groups run concurrently. Pruning as in the paper:
 * at most s groups per stage and r units per group.
 *
 * States are bitsets of one block of at most 64 units. Units are laid out by
 * ASAP level; the layout is cut at units every path passes through (the end
 * of an Inception block, say), and blocks still larger than 16 units are cut
 * between levels where the fewest units have edges across. A block whose
 * search exceeds its budget of transitions is cut in two and searched again,
 * so the search time stays bounded (NASNet-A, RandWire: about 0.2 s). Within
 * a block the result is never worse than greedy's stages: when pruning
 * makes the search miss them, greedy's are kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "schedule.h"

enum { DEFAULT_MAX_BLOCK = 16, DEFAULT_BUDGET = 100000 };

typedef struct Block {
  int base, m;        /* positions base .. base+m-1 of the layout */
  uint64_t pred[64];  /* predecessors inside the block */
  uint64_t succ[64];
  GroupLoad load[64]; /* each unit alone */
} Block;

typedef struct Memo {
  uint64_t *key; /* 0 = empty slot (the empty state is never stored) */
  double *cost;
  uint64_t *choice;
  int cap, count;
} Memo;

typedef struct Ending {
  uint64_t set;
  double cost;
} Ending;

typedef struct Search {
  const CostModel *cm;
  const Block *b;
  int r, s, streams;
  Memo memo;
  long transitions, budget;
  bool over;
  uint64_t comp[64]; /* during enumeration: the group of each chosen unit */
  /* endings of the state being expanded */
  Ending *ends;
  int nends, capends;
} Search;

static int popcount(uint64_t x) { return __builtin_popcountll(x); }
static int lowest(uint64_t x) { return __builtin_ctzll(x); }

/* ------------------------------------------------------------------ memo */

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

static void memo_init(Memo *m) {
  m->cap = 1024;
  m->count = 0;
  m->key = calloc((size_t)m->cap, sizeof(uint64_t));
  m->cost = calloc((size_t)m->cap, sizeof(double));
  m->choice = calloc((size_t)m->cap, sizeof(uint64_t));
}

static void memo_free(Memo *m) {
  free(m->key);
  free(m->cost);
  free(m->choice);
}

static int memo_slot(const Memo *m, uint64_t key) {
  int i = (int)(mix(key) & (uint64_t)(m->cap - 1));
  while (m->key[i] && m->key[i] != key)
    i = (i + 1) & (m->cap - 1);
  return i;
}

static void memo_put(Memo *m, uint64_t key, double cost, uint64_t choice);

static void memo_grow(Memo *m) {
  Memo old = *m;
  m->cap *= 2;
  m->count = 0;
  m->key = calloc((size_t)m->cap, sizeof(uint64_t));
  m->cost = calloc((size_t)m->cap, sizeof(double));
  m->choice = calloc((size_t)m->cap, sizeof(uint64_t));
  for (int i = 0; i < old.cap; i++)
    if (old.key[i])
      memo_put(m, old.key[i], old.cost[i], old.choice[i]);
  memo_free(&old);
}

static void memo_put(Memo *m, uint64_t key, double cost, uint64_t choice) {
  if ((m->count + 1) * 2 > m->cap)
    memo_grow(m);
  int i = memo_slot(m, key);
  if (!m->key[i])
    m->count++;
  m->key[i] = key;
  m->cost[i] = cost;
  m->choice[i] = choice;
}

/* ------------------------------------------------------ stage evaluation */

/* The stage cost of ending E, whose groups are given by se->comp. */
static double ending_cost(Search *se, uint64_t e, int *ngroups) {
  GroupLoad g[64];
  int root_slot[64];
  int n = 0;
  for (uint64_t bits = e; bits; bits &= bits - 1) {
    int v = lowest(bits);
    int root = lowest(se->comp[v]);
    if (root == v) {
      root_slot[v] = n;
      g[n++] = (GroupLoad){0};
    }
  }
  for (uint64_t bits = e; bits; bits &= bits - 1) {
    int v = lowest(bits);
    GroupLoad *dst = &g[root_slot[lowest(se->comp[v])]];
    dst->alone += se->b->load[v].alone;
    dst->overlap += se->b->load[v].overlap;
    dst->work += se->b->load[v].work;
  }
  *ngroups = n;
  return cost_stage_loads(se->cm, g, n, se->streams);
}

/*
 * Enumerates the endings of S among cand[i..]: units in decreasing order, a
 * unit may join only if all its successors inside S already did.
 */
static void enumerate(Search *se, uint64_t s, const int *cand, int ncand, int i, uint64_t e) {
  if (se->over)
    return;
  if (i == ncand) {
    if (!e)
      return;
    int ngroups;
    double c = ending_cost(se, e, &ngroups);
    if (se->s > 0 && ngroups > se->s)
      return;
    if (se->nends == se->capends) {
      se->capends = se->capends ? se->capends * 2 : 64;
      se->ends = realloc(se->ends, sizeof(Ending) * (size_t)se->capends);
    }
    se->ends[se->nends++] = (Ending){e, c};
    return;
  }
  enumerate(se, s, cand, ncand, i + 1, e); /* without cand[i] */
  int u = cand[i];
  uint64_t need = se->b->succ[u] & s;
  if ((need & ~e) != 0)
    return;
  if (se->r > 0 && se->s > 0 && popcount(e) + 1 > se->r * se->s)
    return;
  uint64_t group = 1ull << u;
  for (uint64_t bits = need; bits; bits &= bits - 1)
    group |= se->comp[lowest(bits)];
  if (se->r > 0 && popcount(group) > se->r)
    return;
  uint64_t saved[64];
  int nsaved = 0;
  for (uint64_t bits = group; bits; bits &= bits - 1) {
    int v = lowest(bits);
    saved[nsaved++] = se->comp[v];
    se->comp[v] = group;
  }
  enumerate(se, s, cand, ncand, i + 1, e | (1ull << u));
  nsaved = 0;
  for (uint64_t bits = group; bits; bits &= bits - 1)
    se->comp[lowest(bits)] = saved[nsaved++];
}

static double solve(Search *se, uint64_t s) {
  if (!s || se->over)
    return 0;
  int slot = memo_slot(&se->memo, s);
  if (se->memo.key[slot] == s)
    return se->memo.cost[slot];
  int cand[64], ncand = 0;
  for (int v = se->b->m - 1; v >= 0; v--)
    if (s >> v & 1)
      cand[ncand++] = v;
  se->nends = 0;
  enumerate(se, s, cand, ncand, 0, 0);
  /* solve() below reuses se->ends: keep this state's endings aside */
  int n = se->nends;
  Ending *ends = malloc(sizeof(Ending) * ((size_t)n + 1));
  memcpy(ends, se->ends, sizeof(Ending) * (size_t)n);
  se->transitions += n;
  if (se->transitions > se->budget)
    se->over = true;
  double best = 1e300;
  uint64_t choice = 0;
  for (int k = 0; k < n && !se->over; k++) {
    double c = ends[k].cost + solve(se, s & ~ends[k].set);
    if (c < best) {
      best = c;
      choice = ends[k].set;
    }
  }
  free(ends);
  if (se->over)
    return 0;
  memo_put(&se->memo, s, best, choice);
  return best;
}

/* ----------------------------------------------------------------- blocks */

/*
 * Units are laid out by ASAP level (the stages greedy would form), ties in
 * topological order, so that block boundaries fall between levels and a
 * block can hold whole greedy stages.
 */
typedef struct Layout {
  int *perm;   /* position -> unit */
  int *pos_of; /* unit -> position */
  int *level;  /* per unit */
} Layout;

static void layout_build(const SchedDeps *d, Layout *l) {
  int n = d->n;
  l->perm = malloc(sizeof(int) * ((size_t)n + 1));
  l->pos_of = malloc(sizeof(int) * ((size_t)n + 1));
  l->level = calloc((size_t)n + 1, sizeof(int));
  int maxlevel = 0;
  for (int u = 0; u < n; u++) { /* unit order is topological */
    for (int k = 0; k < d->npred[u]; k++)
      if (l->level[d->pred[u][k]] + 1 > l->level[u])
        l->level[u] = l->level[d->pred[u][k]] + 1;
    if (l->level[u] > maxlevel)
      maxlevel = l->level[u];
  }
  int *start = calloc((size_t)maxlevel + 2, sizeof(int));
  for (int u = 0; u < n; u++)
    start[l->level[u] + 1]++;
  for (int k = 0; k <= maxlevel; k++)
    start[k + 1] += start[k];
  for (int u = 0; u < n; u++) {
    int p = start[l->level[u]]++;
    l->perm[p] = u;
    l->pos_of[u] = p;
  }
  free(start);
}

static void layout_free(Layout *l) {
  free(l->perm);
  free(l->pos_of);
  free(l->level);
}

static void block_build(const SchedDeps *d, const CostModel *cm, const Layout *l, int lo, int m,
                        Block *b) {
  memset(b, 0, sizeof *b);
  b->base = lo;
  b->m = m;
  for (int v = 0; v < m; v++) {
    int u = l->perm[lo + v];
    for (int k = 0; k < d->npred[u]; k++) {
      int p = l->pos_of[d->pred[u][k]] - lo;
      if (p >= 0 && p < m) {
        b->pred[v] |= 1ull << p;
        b->succ[p] |= 1ull << v;
      }
    }
    cost_unit_load(cm, d->cost[u], d->occ[u], &b->load[v]);
  }
}

/* Groups of a stage: connected components of `e` inside the block. */
static int stage_groups(const Block *b, uint64_t e, int *group_of) {
  int ngroups = 0;
  uint64_t left = e;
  while (left) {
    uint64_t comp = left & -left, frontier = comp;
    while (frontier) {
      int v = lowest(frontier);
      frontier &= frontier - 1;
      uint64_t next = (b->pred[v] | b->succ[v]) & e & ~comp;
      comp |= next;
      frontier |= next;
    }
    for (uint64_t bits = comp; bits; bits &= bits - 1)
      group_of[lowest(bits)] = ngroups;
    ngroups++;
    left &= ~comp;
  }
  return ngroups;
}

static double stage_cost(const CostModel *cm, const Block *b, uint64_t e, int streams) {
  int group_of[64];
  int ngroups = stage_groups(b, e, group_of);
  GroupLoad loads[64] = {{0}};
  for (uint64_t bits = e; bits; bits &= bits - 1) {
    int v = lowest(bits);
    GroupLoad *dst = &loads[group_of[v]];
    dst->alone += b->load[v].alone;
    dst->overlap += b->load[v].overlap;
    dst->work += b->load[v].work;
  }
  return cost_stage_loads(cm, loads, ngroups, streams);
}

static void add_stage(StagePlan *p, const SchedDeps *d, const Layout *l, const Block *b,
                      uint64_t e, double cost) {
  int units[64], groups[64], group_of[64], n = 0;
  stage_groups(b, e, group_of);
  for (uint64_t bits = e; bits; bits &= bits - 1) {
    int v = lowest(bits);
    units[n] = l->perm[b->base + v];
    groups[n++] = group_of[v];
  }
  plan_add_stage(p, d, units, groups, n, cost);
}

/* Greedy inside the block: each stage takes every ready unit. */
static int greedy_stages(const CostModel *cm, const Block *b, int streams, uint64_t *stages,
                         double *total) {
  uint64_t left = b->m == 64 ? ~0ull : (1ull << b->m) - 1;
  int n = 0;
  *total = 0;
  while (left) {
    uint64_t ready = 0;
    for (uint64_t bits = left; bits; bits &= bits - 1) {
      int v = lowest(bits);
      if (!(b->pred[v] & left))
        ready |= 1ull << v;
    }
    stages[n++] = ready;
    *total += stage_cost(cm, b, ready, streams);
    left &= ~ready;
  }
  return n;
}

typedef struct Totals {
  long states, transitions;
} Totals;

/* Searches one block; false when it ran over its budget. The block's greedy
   schedule is kept when the (pruned) search finds nothing better. */
static bool search_block(const SchedDeps *d, const CostModel *cm, const SchedOptions *o,
                         const Layout *l, const Block *b, StagePlan *p, Totals *tot) {
  Search se = {.cm = cm, .b = b, .r = o->prune_r, .s = o->prune_s, .streams = o->streams};
  se.budget = o->budget > 0 ? o->budget : DEFAULT_BUDGET;
  memo_init(&se.memo);
  uint64_t all = b->m == 64 ? ~0ull : (1ull << b->m) - 1;
  double best = solve(&se, all);
  bool ok = !se.over;
  if (ok) {
    uint64_t stages[64];
    double greedy;
    int nst = greedy_stages(cm, b, o->streams, stages, &greedy);
    if (greedy < best - 1e-9) {
      for (int k = 0; k < nst; k++)
        add_stage(p, d, l, b, stages[k], stage_cost(cm, b, stages[k], o->streams));
    } else {
      /* choice[] gives the last stage first: collect, then add in order. */
      nst = 0;
      for (uint64_t s = all; s;) {
        uint64_t e = se.memo.choice[memo_slot(&se.memo, s)];
        stages[nst++] = e;
        s &= ~e;
      }
      for (int k = nst - 1; k >= 0; k--)
        add_stage(p, d, l, b, stages[k], stage_cost(cm, b, stages[k], o->streams));
    }
    tot->states += se.memo.count;
  }
  tot->transitions += se.transitions;
  memo_free(&se.memo);
  free(se.ends);
  return ok;
}

/* Per position p: units at positions <= p with an edge past p, p itself aside. */
static int *crossing_counts(const SchedDeps *d, const Layout *l) {
  int n = d->n;
  int *delta = calloc((size_t)n + 2, sizeof(int));
  int *cross = calloc((size_t)n + 1, sizeof(int));
  for (int a = 0; a < n; a++) {
    int u = l->perm[a], last = a;
    for (int k = 0; k < d->nsucc[u]; k++)
      if (l->pos_of[d->succ[u][k]] > last)
        last = l->pos_of[d->succ[u][k]];
    if (last > a) {
      delta[a]++;
      delta[last]--;
      cross[a]--; /* a itself does not count at its own position */
    }
  }
  int run = 0;
  for (int p = 0; p < n; p++) {
    run += delta[p];
    cross[p] += run;
  }
  free(delta);
  return cross;
}

/* The cut (after position p) inside [lo, hi) with the fewest crossings in
   the upper half of the allowed range, preferring level boundaries. */
static int best_cut(const Layout *l, const int *cross, int lo, int hi, int limit) {
  int from = lo + limit / 2 - 1, to = lo + limit - 1;
  if (to > hi - 2)
    to = hi - 2;
  if (from < lo)
    from = lo;
  if (from > to)
    from = to;
  int best = -1;
  for (int boundary_only = 1; boundary_only >= 0 && best < 0; boundary_only--)
    for (int p = to; p >= from; p--) {
      bool boundary = l->level[l->perm[p]] != l->level[l->perm[p + 1]];
      if (boundary_only && !boundary)
        continue;
      if (best < 0 || cross[p] < cross[best])
        best = p;
    }
  return best;
}

static bool schedule_range(const SchedDeps *d, const CostModel *cm, const SchedOptions *o,
                           const Layout *l, const int *cross, int lo, int hi, int limit,
                           StagePlan *p, Totals *tot) {
  while (lo < hi) {
    int end = hi;
    if (hi - lo > limit)
      end = best_cut(l, cross, lo, hi, limit) + 1;
    Block *b = malloc(sizeof *b);
    block_build(d, cm, l, lo, end - lo, b);
    int saved_stages = p->nstages;
    double saved_us = p->predicted_us;
    bool ok = search_block(d, cm, o, l, b, p, tot);
    free(b);
    if (!ok) {
      p->nstages = saved_stages;
      p->predicted_us = saved_us;
      if (end - lo <= 1)
        return false; /* a single unit cannot run over budget */
      if (!schedule_range(d, cm, o, l, cross, lo, end, (end - lo + 1) / 2, p, tot))
        return false;
    }
    lo = end;
  }
  return true;
}

bool sched_ios(const SchedDeps *d, const CostModel *cm, const SchedOptions *o, StagePlan *p) {
  int limit = o->max_block > 0 && o->max_block <= 64 ? o->max_block : DEFAULT_MAX_BLOCK;
  Layout l;
  layout_build(d, &l);
  int *cross = crossing_counts(d, &l);
  /* A natural cut after pos needs every earlier unit to feed pos (no sink
     before it) and every later one to follow from it (no source after it). */
  bool *sink_before = calloc((size_t)d->n + 1, sizeof(bool));
  bool *source_after = calloc((size_t)d->n + 1, sizeof(bool));
  for (int a = 1; a < d->n; a++)
    sink_before[a] = sink_before[a - 1] || d->nsucc[l.perm[a - 1]] == 0;
  for (int a = d->n - 2; a >= 0; a--)
    source_after[a] = source_after[a + 1] || d->npred[l.perm[a + 1]] == 0;
  Totals tot = {0};
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  bool ok = true, printed = false;
  int lo = 0;
  for (int pos = 0; pos < d->n && ok; pos++) {
    bool cut = cross[pos] == 0 && !sink_before[pos] && !source_after[pos];
    if (!cut && pos < d->n - 1)
      continue;
    ok = schedule_range(d, cm, o, &l, cross, lo, pos + 1, limit, p, &tot);
    lo = pos + 1;
    if (o->progress) {
      struct timespec t1;
      clock_gettime(CLOCK_MONOTONIC, &t1);
      double el = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
      if (el > 1.0) {
        fprintf(stderr, "\ropc: ios: %d of %d units scheduled (%.1f s)", pos + 1, d->n, el);
        printed = true;
      }
    }
  }
  if (printed)
    fprintf(stderr, "\r\033[K");
  free(cross);
  free(sink_before);
  free(source_after);
  layout_free(&l);
  p->states = tot.states;
  p->transitions = tot.transitions;
  if (!ok)
    opc_error("ios: the schedule search failed");
  return ok;
}
