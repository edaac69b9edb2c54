/*
 * sched_hope.c - HOPE (Xia et al., "HOPE: a heterogeneity-oriented
 * parallel execution engine for inference on mobiles", 2022): every unit
 * placed on the GPU or on the host CPU, each processor running one unit at
 * a time.
 *
 * The model, shared by every method and by hope_evaluate: unit v on
 * processor p takes run[p][v], plus xfer[v][k] for every producer
 * pred[v][k] placed on the other processor (the receiver pays the
 * transfer, the paper's Eq. 1). It starts once its producers have finished
 * and its processor is free; the latency is the end of the last unit.
 *
 * "ilp" is the paper's Sec. 2: an integer programme (Eqs. 1-6, big-M)
 * solved by GLPK, over subgraphs of at most `subgraph_units` units cut by
 * the upward-rank partition (Alg. 1) and solved one after another in
 * topological order. "heuristic" is Sec. 3: short units merged into their
 * producer's super-op, then the greedy top-K search (Alg. 2). Both keep
 * all-GPU or all-CPU instead when that is strictly faster (the searches
 * are myopic; see keep_single_if_faster). Whatever the method, the plan's
 * latency and start times are hope_evaluate's of the returned placement
 * and order, so the numbers always agree.
 */
#include <glpk.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

enum {
  HOPE_DEFAULT_SUBGRAPH = 12, /* the paper's NT */
  HOPE_TOP_K = 4,             /* the paper's K for two devices: 2^4 mappings per step */
};
/* A unit is short (merged into its producer's super-op) when it costs less
   than this fraction of the mean unit on both processors: the paper's
   example is a ReLU at 0.1 ms beside convolutions of 3 ms. */
#define HOPE_SHORT_FRACTION 0.2
/* GLPK's time per subgraph; past it the best solution found is kept. */
#define HOPE_ILP_SECONDS 2.0
/* Alg. 1's balance: eps starts at 0.2 and grows by 0.1 until a split fits. */
#define HOPE_EPS_START 0.2
#define HOPE_EPS_STEP 0.1

/*
 * A schedule under construction: units appended one at a time, each as
 * early as the model allows after the units already appended. Appending
 * in a topological order is exactly hope_evaluate with that order.
 */
typedef struct Hope {
  const SchedDeps *d;
  const HopeCosts *c;
  int n;
  Arena *scratch;
  int *device; /* per unit, -1 until placed */
  double *start, *end;
  double free_at[HOPE_PROCESSORS];
  int *order, norder;
  /* scratch, reset after each use */
  int *slot;             /* a unit's place in the part or subgraph at hand, else -1 */
  int *pos;              /* order_by_key's */
  double *key, *key_end; /* start and end times to order by */
} Hope;

static double xfer(const HopeCosts *c, int v, int k) { return c->xfer ? c->xfer[v][k] : 0; }

static bool can_run(const HopeCosts *c, int v, int p) { return isfinite(c->run[p][v]); }

/* v's time on p given its producers' processors (device[]: all known). */
static double duration(const SchedDeps *d, const HopeCosts *c, const int *device, int v, int p) {
  double t = c->run[p][v];
  for (int k = 0; k < d->npred[v]; k++)
    if (device[d->pred[v][k]] != p)
      t += xfer(c, v, k);
  return t;
}

/* The earliest v can start on p: its producers' ends, and p free. */
static double ready_on(const Hope *h, int v, int p) {
  double t = h->free_at[p];
  for (int k = 0; k < h->d->npred[v]; k++)
    if (h->end[h->d->pred[v][k]] > t)
      t = h->end[h->d->pred[v][k]];
  return t;
}

/* Appends v on p (its producers already placed). */
static void place(Hope *h, int v, int p) {
  h->device[v] = p;
  h->start[v] = ready_on(h, v, p);
  h->end[v] = h->start[v] + duration(h->d, h->c, h->device, v, p);
  h->free_at[p] = h->end[v];
  h->order[h->norder++] = v;
}

static void hope_init(Hope *h, const SchedDeps *d, const HopeCosts *c) {
  *h = (Hope){.d = d, .c = c, .n = d->n, .scratch = arena_new()};
  size_t n = (size_t)d->n + 1;
  h->device = arena_alloc(h->scratch, sizeof(int) * n);
  h->start = arena_alloc(h->scratch, sizeof(double) * n);
  h->end = arena_alloc(h->scratch, sizeof(double) * n);
  h->order = arena_alloc(h->scratch, sizeof(int) * n);
  h->slot = arena_alloc(h->scratch, sizeof(int) * n);
  h->pos = arena_alloc(h->scratch, sizeof(int) * n);
  h->key = arena_alloc(h->scratch, sizeof(double) * n);
  h->key_end = arena_alloc(h->scratch, sizeof(double) * n);
  for (int v = 0; v < d->n; v++)
    h->device[v] = h->slot[v] = h->pos[v] = -1;
}

/*
 * a before b: the earlier start, then the earlier end (on one processor an
 * equal start means that a unit of no length went first), then the lower
 * index. Values within tol count as equal.
 */
static bool key_before(const double *start, const double *end, double tol, int a, int b) {
  if (fabs(start[a] - start[b]) > tol)
    return start[a] < start[b];
  if (fabs(end[a] - end[b]) > tol)
    return end[a] < end[b];
  return a < b;
}

/*
 * units[0..m) (a topological order, closed under producers together with
 * what is already placed) reordered by key_before, but never before a
 * producer: times that a solver's tolerance leaves slightly out of order
 * cannot break the topological order.
 */
static void order_by_key(const Hope *h, int *units, int m, const double *start, const double *end,
                         double tol) {
  const SchedDeps *d = h->d;
  int *waiting = arena_alloc(h->scratch, sizeof(int) * ((size_t)m + 1));
  int *slot = h->pos, *out = arena_alloc(h->scratch, sizeof(int) * ((size_t)m + 1));
  for (int i = 0; i < m; i++)
    slot[units[i]] = i;
  for (int i = 0; i < m; i++)
    for (int k = 0; k < d->npred[units[i]]; k++)
      waiting[i] += slot[d->pred[units[i]][k]] >= 0;
  for (int r = 0; r < m; r++) {
    int best = -1;
    for (int i = 0; i < m; i++)
      if (waiting[i] == 0 && (best < 0 || key_before(start, end, tol, units[i], units[best])))
        best = i;
    int v = units[best];
    out[r] = v;
    waiting[best] = -1;
    for (int k = 0; k < d->nsucc[v]; k++)
      if (slot[d->succ[v][k]] >= 0)
        waiting[slot[d->succ[v][k]]]--;
  }
  for (int i = 0; i < m; i++)
    slot[units[i]] = -1;
  memcpy(units, out, sizeof(int) * (size_t)m);
}

/* ---------------------------------------------------------- evaluation */

double hope_evaluate(const SchedDeps *d, const HopeCosts *c, const int *device, const int *order,
                     double *start) {
  int n = d->n;
  int *list = malloc(sizeof(int) * ((size_t)n + 1));
  double *end = malloc(sizeof(double) * ((size_t)n + 1));
  bool *done = calloc((size_t)n + 1, sizeof(bool));
  /* each processor's units in `order`: GPU ones from the front, CPU ones from the back */
  int head[HOPE_PROCESSORS] = {0, n - 1}, pos[HOPE_PROCESSORS];
  for (int i = 0; i < n; i++) {
    int v = order ? order[i] : i;
    if (device[v] == HOPE_GPU)
      list[head[HOPE_GPU]++] = v;
    else
      list[head[HOPE_CPU]--] = v;
  }
  pos[HOPE_GPU] = 0;
  pos[HOPE_CPU] = n - 1;
  double free_at[HOPE_PROCESSORS] = {0, 0}, latency = 0;
  int todo = n;
  while (todo > 0) {
    bool progress = false;
    for (int p = 0; p < HOPE_PROCESSORS; p++)
      for (;;) {
        bool more = p == HOPE_GPU ? pos[p] < head[p] : pos[p] > head[p];
        if (!more)
          break;
        int v = list[pos[p]];
        double t = free_at[p];
        bool ready = true;
        for (int k = 0; k < d->npred[v] && ready; k++) {
          int u = d->pred[v][k];
          ready = done[u];
          if (ready && end[u] > t)
            t = end[u];
        }
        if (!ready)
          break; /* waits for a producer on the other processor */
        end[v] = t + duration(d, c, device, v, p);
        if (start)
          start[v] = t;
        done[v] = true;
        free_at[p] = end[v];
        if (end[v] > latency)
          latency = end[v];
        pos[p] += p == HOPE_GPU ? 1 : -1;
        todo--;
        progress = true;
      }
    if (!progress) {
      latency = INFINITY; /* the processors' orders wait for each other */
      break;
    }
  }
  free(list);
  free(end);
  free(done);
  return latency;
}

/* ----------------------------------------------------- Alg. 1: partition */

typedef struct Parts {
  int *units; /* every unit once, part after part */
  int *first; /* part i is units[first[i] .. first[i + 1]) */
  int nparts, nunits;
} Parts;

static void emit_part(Parts *ps, const int *units, int m) {
  memcpy(ps->units + ps->nunits, units, sizeof(int) * (size_t)m);
  ps->nunits += m;
  ps->first[++ps->nparts] = ps->nunits;
}

/*
 * The paper's Alg. 1 on the subgraph `units` (topological order): upward
 * ranks within it (1 + the largest rank of a producer inside), then the
 * rank r whose split V0 = {rank <= r}, V1 = {rank > r} satisfies the
 * balance max(|V0|, |V1|) <= (1 + eps) |V| / 2 with the fewest units at
 * rank r (the paper's vertex-cut count), the more even split on a tie;
 * eps grows until a split fits. V0 holds every producer of its units, so
 * the parts stay in topological order. Returns |V0|, with V0 first in
 * `units`; 0 when all units share one rank (an antichain).
 */
static int split_by_rank(Hope *h, int *units, int m) {
  const SchedDeps *d = h->d;
  int *rank = arena_alloc(h->scratch, sizeof(int) * ((size_t)m + 1));
  int *slot = h->slot, top = 0;
  for (int i = 0; i < m; i++)
    slot[units[i]] = i;
  for (int i = 0; i < m; i++) {
    int v = units[i];
    rank[i] = 1;
    for (int k = 0; k < d->npred[v]; k++) {
      int a = slot[d->pred[v][k]];
      if (a >= 0 && rank[a] + 1 > rank[i])
        rank[i] = rank[a] + 1;
    }
    if (rank[i] > top)
      top = rank[i];
  }
  for (int i = 0; i < m; i++)
    slot[units[i]] = -1;
  if (top == 1)
    return 0;
  int *count = arena_alloc(h->scratch, sizeof(int) * ((size_t)top + 2));
  int *acc = arena_alloc(h->scratch, sizeof(int) * ((size_t)top + 2));
  for (int i = 0; i < m; i++)
    count[rank[i]]++;
  for (int r = 1; r <= top; r++)
    acc[r] = acc[r - 1] + count[r];
  int cut = -1;
  for (double eps = HOPE_EPS_START; cut < 0; eps += HOPE_EPS_STEP)
    for (int r = 1; r < top; r++) {
      int w0 = acc[r], w1 = m - acc[r];
      if ((w0 > w1 ? w0 : w1) > (1 + eps) * m / 2 + 1e-9)
        continue;
      if (cut < 0 || count[r] < count[cut] ||
          (count[r] == count[cut] && abs(w0 - w1) < abs(acc[cut] - (m - acc[cut]))))
        cut = r;
    }
  /* stable: each side keeps the topological order */
  int *tmp = arena_alloc(h->scratch, sizeof(int) * ((size_t)m + 1));
  int k = 0;
  for (int i = 0; i < m; i++)
    if (rank[i] <= cut)
      tmp[k++] = units[i];
  int m0 = k;
  for (int i = 0; i < m; i++)
    if (rank[i] > cut)
      tmp[k++] = units[i];
  memcpy(units, tmp, sizeof(int) * (size_t)m);
  return m0;
}

/* Splits recursively until every part has at most `limit` units; an
   antichain, which ranks cannot split, is cut in half by index. */
static void partition(Hope *h, int *units, int m, int limit, Parts *ps) {
  if (m <= limit) {
    emit_part(ps, units, m);
    return;
  }
  int m0 = split_by_rank(h, units, m);
  if (m0 == 0)
    m0 = m / 2;
  partition(h, units, m0, limit, ps);
  partition(h, units + m0, m - m0, limit, ps);
}

/* ------------------------------------------------------ Sec. 2: the ILP */

/*
 * The earliest-finish placement of a part after what is placed: each unit
 * in turn on the processor where it ends first. It bounds the part's
 * optimum from above (tau's bound and big-M) and stands in when GLPK
 * finds no solution in its time.
 */
static double place_earliest_finish(Hope *h, const int *units, int m) {
  double latency = 0;
  for (int i = 0; i < m; i++) {
    int v = units[i], best = -1;
    double best_end = INFINITY;
    for (int p = 0; p < HOPE_PROCESSORS; p++) {
      if (!can_run(h->c, v, p))
        continue;
      double e = ready_on(h, v, p) + duration(h->d, h->c, h->device, v, p);
      if (best < 0 || e < best_end) {
        best = p;
        best_end = e;
      }
    }
    place(h, v, best);
    if (h->end[v] > latency)
      latency = h->end[v];
  }
  return latency;
}

/* Undoes the placement of the last m units appended. */
static void unplace(Hope *h, int m, const double *free_at) {
  for (int i = 0; i < m; i++)
    h->device[h->order[--h->norder]] = -1;
  memcpy(h->free_at, free_at, sizeof h->free_at);
}

typedef struct Lp {
  glp_prob *lp;
  int *ind;
  double *val;
  int len;
} Lp;

static void term(Lp *l, int col, double coef) {
  if (coef == 0)
    return;
  l->len++;
  l->ind[l->len] = col;
  l->val[l->len] = coef;
}

/* Adds the row sum(terms) >= lb (or == lb) and starts a new one. */
static void row(Lp *l, int type, double lb) {
  int r = glp_add_rows(l->lp, 1);
  glp_set_mat_row(l->lp, r, l->len, l->ind, l->val);
  glp_set_row_bnds(l->lp, r, type, lb, lb);
  l->len = 0;
}

/*
 * The ILP of one part S (m units), with the units placed before it fixed.
 * In our words, i, j in S, p a processor, P(i) i's producers:
 *
 *   variables  b[i][p] binary (i on p), psi[i][j] binary for each pair of
 *              S with no path between them, st[i] >= 0 (start),
 *              t[i] >= 0 (time on its processor), tau (the part's end)
 *   minimise   tau                                                 (2)
 *   (6)  b[i][GPU] + b[i][CPU] = 1; b[i][p] = 0 where run[p][i] = INFINITY
 *   (1)  t[i] >= run[p][i] b[i][p] + sum_{k in P(i)} xfer[i][k] (b[i][p] - b[k][p])
 *        for each p: on i's own processor the sum is exactly the transfers
 *        from producers elsewhere; on the other one the right side is <= 0.
 *        A producer k placed in an earlier part has a constant b[k][p].
 *   (2)  tau >= st[i] + t[i]
 *   (3)  st[i] >= st[k] + t[k] for an edge k -> i inside S, and
 *        st[i] >= end[k] (a column bound) for a producer k placed earlier
 *   (5)  for each pair i, j without a path and each p, when both are on p
 *        one runs after the other:
 *          st[i] >= st[j] + t[j] - M psi[i][j] - M (2 - b[i][p] - b[j][p])
 *          st[j] >= st[i] + t[i] - M (1 - psi[i][j]) - M (2 - b[i][p] - b[j][p])
 *        (pairs with a path are ordered by (3): the paper's Eq. 4 remark)
 *   and, for the parts after the first, st[i] >= free[p] b[i][p]: p is busy
 *   with earlier parts until free[p].
 *
 * Departures from the paper's text, none changing the optimum: one start
 * st[i] per unit rather than one per (unit, processor), since b picks one;
 * one psi per pair, the b terms switching (5) off on a processor that does
 * not hold both; the transfer of an edge between parts is in the
 * receiver's t (as for any edge), its start bound is the producer's end.
 *
 * Valid inequalities tighten the relaxation, without which GLPK cannot
 * prove a wide part of 10-12 units optimal in seconds:
 *   tau <= UB, the latency of the earliest-finish placement, so M = UB
 *   suffices (every st and st + t lies in [0, UB]);
 *   st[i] >= head[i], the end of i's earlier-part producers or, inside S,
 *   a producer's head plus its faster run time;
 *   energetic cuts: for each release r (a distinct head) and processor p,
 *   the units with head >= r that p holds run one after another, from
 *   max(r, free[p]) when p holds any of them, each taking at least
 *   run[p][i] plus its transfers from earlier-part producers not on p (a
 *   constant ext[i][p]); for each such unit j:
 *     tau >= max(r, free[p]) b[j][p] + sum_{head[i] >= r} (run[p][i] + ext[i][p]) b[i][p]
 *   (b[j][p] switches the start on: tau is the part's end, which may come
 *   before free[p] when the part leaves p alone). In a part whose producers
 *   all lie in earlier parts these durations are exact, and the cuts are
 *   what makes such parts solve in milliseconds rather than time out.
 */
typedef struct PartIlp {
  int m, npairs;
  int *pair_i, *pair_j;
} PartIlp;

static int col_b(int i, int p) { return 1 + 2 * i + p; }
static int col_st(const PartIlp *q, int i) { return 1 + 2 * q->m + i; }
static int col_t(const PartIlp *q, int i) { return 1 + 3 * q->m + i; }
static int col_tau(const PartIlp *q) { return 1 + 4 * q->m; }
static int col_psi(const PartIlp *q, int k) { return 2 + 4 * q->m + k; }

/* Pairs of S with no path between them (paths stay inside S: what lies
   before S holds every producer of S's units, nothing after S feeds S). */
static void unordered_pairs(Hope *h, const int *units, int m, const int *slot, PartIlp *q) {
  const SchedDeps *d = h->d;
  bool *reach = arena_alloc(h->scratch, (size_t)m * (size_t)m + 1); /* reach[a*m+b]: a -> b */
  for (int j = 0; j < m; j++)
    for (int k = 0; k < d->npred[units[j]]; k++) {
      int a = slot[d->pred[units[j]][k]];
      if (a < 0)
        continue;
      reach[a * m + j] = true;
      for (int x = 0; x < a; x++)
        reach[x * m + j] |= reach[x * m + a];
    }
  q->pair_i = arena_alloc(h->scratch, sizeof(int) * ((size_t)m * (size_t)m / 2 + 1));
  q->pair_j = arena_alloc(h->scratch, sizeof(int) * ((size_t)m * (size_t)m / 2 + 1));
  for (int i = 0; i < m; i++)
    for (int j = i + 1; j < m; j++)
      if (!reach[i * m + j]) {
        q->pair_i[q->npairs] = i;
        q->pair_j[q->npairs++] = j;
      }
}

/* The earliest each unit of the part can start: its earlier-part
   producers' ends, and inside the part a producer's head plus its faster
   run time. */
static double *part_heads(Hope *h, const int *units, int m, const int *slot) {
  const SchedDeps *d = h->d;
  const HopeCosts *c = h->c;
  double *head = arena_alloc(h->scratch, sizeof(double) * ((size_t)m + 1));
  for (int i = 0; i < m; i++) {
    int v = units[i];
    for (int k = 0; k < d->npred[v]; k++) {
      int u = d->pred[v][k], a = slot[u];
      double t = a < 0 ? h->end[u] : head[a] + fmin(c->run[HOPE_GPU][u], c->run[HOPE_CPU][u]);
      if (t > head[i])
        head[i] = t;
    }
  }
  return head;
}

/* What v takes on p at least: its run and the transfers from producers
   placed in earlier parts on the other processor. */
static double known_us(const Hope *h, int v, int p, const int *slot) {
  double t = h->c->run[p][v];
  for (int k = 0; k < h->d->npred[v]; k++) {
    int u = h->d->pred[v][k];
    if (slot[u] < 0 && h->device[u] != p)
      t += xfer(h->c, v, k);
  }
  return t;
}

static bool first_release(const double *head, int r) {
  for (int i = 0; i < r; i++)
    if (head[i] == head[r])
      return false;
  return true;
}

/* For the units released at `release` or later, on p: one row per unit j
   of them, its b[j][p] switching the release term on. */
static void energetic_cuts(Hope *h, Lp *l, const PartIlp *q, const int *units, const int *slot,
                           const double *head, double release, int p) {
  double from = release > h->free_at[p] ? release : h->free_at[p];
  for (int j = 0; j < q->m; j++) {
    if (head[j] < release || !can_run(h->c, units[j], p))
      continue;
    term(l, col_tau(q), 1);
    for (int i = 0; i < q->m; i++)
      if (head[i] >= release && can_run(h->c, units[i], p))
        term(l, col_b(i, p), -known_us(h, units[i], p, slot) - (i == j ? from : 0));
    row(l, GLP_LO, 0);
  }
}

static glp_prob *ilp_build(Hope *h, const int *units, int m, const int *slot, PartIlp *q,
                           double ub) {
  const SchedDeps *d = h->d;
  const HopeCosts *c = h->c;
  glp_prob *lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  int ncols = col_psi(q, q->npairs) - 1;
  glp_add_cols(lp, ncols);
  double M = ub;
  double *head = part_heads(h, units, m, slot);
  for (int i = 0; i < m; i++) {
    int v = units[i];
    for (int p = 0; p < HOPE_PROCESSORS; p++) {
      glp_set_col_kind(lp, col_b(i, p), GLP_IV);
      if (can_run(c, v, p))
        glp_set_col_bnds(lp, col_b(i, p), GLP_DB, 0, 1);
      else
        glp_set_col_bnds(lp, col_b(i, p), GLP_FX, 0, 0);
    }
    glp_set_col_bnds(lp, col_st(q, i), GLP_LO, head[i], 0);
    glp_set_col_bnds(lp, col_t(q, i), GLP_LO, 0, 0);
  }
  glp_set_col_bnds(lp, col_tau(q), GLP_DB, 0, ub);
  glp_set_obj_coef(lp, col_tau(q), 1);
  for (int k = 0; k < q->npairs; k++)
    glp_set_col_kind(lp, col_psi(q, k), GLP_BV);

  Lp l = {.lp = lp};
  l.ind = arena_alloc(h->scratch, sizeof(int) * ((size_t)ncols + 2));
  l.val = arena_alloc(h->scratch, sizeof(double) * ((size_t)ncols + 2));
  for (int i = 0; i < m; i++) {
    int v = units[i];
    term(&l, col_b(i, HOPE_GPU), 1); /* (6) */
    term(&l, col_b(i, HOPE_CPU), 1);
    row(&l, GLP_FX, 1);
    for (int p = 0; p < HOPE_PROCESSORS; p++) { /* (1) */
      double own = can_run(c, v, p) ? c->run[p][v] : 0, constant = 0;
      for (int k = 0; k < d->npred[v]; k++) {
        int u = d->pred[v][k], a = slot[u];
        double x = xfer(c, v, k);
        own += x;
        if (a >= 0)
          term(&l, col_b(a, p), x);
        else if (h->device[u] == p)
          constant += x;
      }
      term(&l, col_t(q, i), 1);
      term(&l, col_b(i, p), -own);
      row(&l, GLP_LO, -constant);
    }
    term(&l, col_tau(q), 1); /* (2) */
    term(&l, col_st(q, i), -1);
    term(&l, col_t(q, i), -1);
    row(&l, GLP_LO, 0);
    for (int k = 0; k < d->npred[v]; k++) { /* (3) */
      int a = slot[d->pred[v][k]];
      if (a < 0)
        continue;
      term(&l, col_st(q, i), 1);
      term(&l, col_st(q, a), -1);
      term(&l, col_t(q, a), -1);
      row(&l, GLP_LO, 0);
    }
    for (int p = 0; p < HOPE_PROCESSORS; p++) /* busy with earlier parts */
      if (h->free_at[p] > 0) {
        term(&l, col_st(q, i), 1);
        term(&l, col_b(i, p), -h->free_at[p]);
        row(&l, GLP_LO, 0);
      }
  }
  for (int k = 0; k < q->npairs; k++) /* (5) */
    for (int p = 0; p < HOPE_PROCESSORS; p++) {
      int i = q->pair_i[k], j = q->pair_j[k];
      term(&l, col_st(q, i), 1);
      term(&l, col_st(q, j), -1);
      term(&l, col_t(q, j), -1);
      term(&l, col_psi(q, k), M);
      term(&l, col_b(i, p), -M);
      term(&l, col_b(j, p), -M);
      row(&l, GLP_LO, -2 * M);
      term(&l, col_st(q, j), 1);
      term(&l, col_st(q, i), -1);
      term(&l, col_t(q, i), -1);
      term(&l, col_psi(q, k), -M);
      term(&l, col_b(i, p), -M);
      term(&l, col_b(j, p), -M);
      row(&l, GLP_LO, -3 * M);
    }
  for (int r = 0; r < m; r++) /* the energetic cuts, once per distinct release */
    if (first_release(head, r))
      for (int p = 0; p < HOPE_PROCESSORS; p++)
        energetic_cuts(h, &l, q, units, slot, head, head[r], p);
  return lp;
}

/*
 * Places the part `units` (m units, topological order) after what is
 * placed: GLPK's placement, appended in the order of its start times.
 * *optimal: GLPK proved it. False, with an error, when GLPK fails.
 */
static bool solve_part(Hope *h, int *units, int m, bool *optimal) {
  *optimal = false;
  int *slot = h->slot;
  double free_at[HOPE_PROCESSORS];
  memcpy(free_at, h->free_at, sizeof free_at);
  double ub = place_earliest_finish(h, units, m);
  unplace(h, m, free_at);
  ub += 1e-9 * (1 + ub); /* so that GLPK's tolerances keep that placement feasible */

  for (int i = 0; i < m; i++)
    slot[units[i]] = i;
  PartIlp q = {.m = m};
  unordered_pairs(h, units, m, slot, &q);
  glp_prob *lp = ilp_build(h, units, m, slot, &q, ub);
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = GLP_ON;
  parm.msg_lev = GLP_MSG_OFF;
  double limit = h->c->ilp_seconds > 0 ? h->c->ilp_seconds : HOPE_ILP_SECONDS;
  parm.tm_lim = (int)(limit * 1000);
  int ret = glp_intopt(lp, &parm);
  int status = glp_mip_status(lp);
  int *chosen = arena_alloc(h->scratch, sizeof(int) * ((size_t)m + 1));
  bool solved = status == GLP_OPT || status == GLP_FEAS;
  for (int i = 0; i < m && solved; i++) {
    h->key[units[i]] = glp_mip_col_val(lp, col_st(&q, i));
    h->key_end[units[i]] = h->key[units[i]] + glp_mip_col_val(lp, col_t(&q, i));
    chosen[i] = glp_mip_col_val(lp, col_b(i, HOPE_CPU)) > 0.5 ? HOPE_CPU : HOPE_GPU;
  }
  glp_delete_prob(lp);
  for (int i = 0; i < m; i++)
    slot[units[i]] = -1;
  if ((ret != 0 && ret != GLP_ETMLIM) || status == GLP_NOFEAS) {
    opc_error("hope: GLPK failed on a subgraph of %d units (glp_intopt: %d, status %d)", m, ret,
              status);
    return false;
  }
  if (!solved) {
    /* out of time before any solution: the earliest-finish placement */
    place_earliest_finish(h, units, m);
    return true;
  }
  *optimal = status == GLP_OPT;
  int *sorted = arena_dup(h->scratch, units, sizeof(int) * (size_t)m);
  order_by_key(h, sorted, m, h->key, h->key_end, 1e-7 * (1 + ub)); /* GLPK's tolerance */
  for (int i = 0; i < m; i++) { /* chosen[] is by place in `units` */
    int v = sorted[i], at = 0;
    while (units[at] != v)
      at++;
    place(h, v, chosen[at]);
  }
  return true;
}

static bool plan_ilp(Hope *h, int limit, HopePlan *out) {
  int n = h->n;
  Parts ps = {0};
  ps.units = arena_alloc(h->scratch, sizeof(int) * ((size_t)n + 1));
  ps.first = arena_alloc(h->scratch, sizeof(int) * ((size_t)n + 2));
  int *all = arena_alloc(h->scratch, sizeof(int) * ((size_t)n + 1));
  for (int v = 0; v < n; v++)
    all[v] = v;
  if (n > 0)
    partition(h, all, n, limit, &ps);
  int was = glp_term_out(GLP_OFF);
  bool ok = true;
  for (int i = 0; i < ps.nparts && ok; i++) {
    bool optimal;
    ok = solve_part(h, ps.units + ps.first[i], ps.first[i + 1] - ps.first[i], &optimal);
    out->subgraphs++;
    out->optimal += optimal;
  }
  glp_term_out(was);
  return ok;
}

/* ------------------------------------------- Sec. 3: the greedy search */

/*
 * Node merging (Sec. 3.2): a short unit with a single producer joins its
 * producer's super-op. Returns leader[v]: the first unit of v's super-op.
 * A member's only producer is in its super-op, so only the leader waits
 * for other super-ops, members run right after it on its processor, and
 * contracting super-ops keeps the graph acyclic. A short unit runs on
 * both processors, so a super-op may go wherever its leader may.
 */
static int *merge_short_units(Hope *h) {
  const SchedDeps *d = h->d;
  const HopeCosts *c = h->c;
  int n = h->n;
  double mean[HOPE_PROCESSORS] = {0, 0};
  int finite[HOPE_PROCESSORS] = {0, 0};
  for (int v = 0; v < n; v++)
    for (int p = 0; p < HOPE_PROCESSORS; p++)
      if (can_run(c, v, p)) {
        mean[p] += c->run[p][v];
        finite[p]++;
      }
  for (int p = 0; p < HOPE_PROCESSORS; p++)
    mean[p] = finite[p] ? mean[p] / finite[p] : 0;
  int *leader = arena_alloc(h->scratch, sizeof(int) * ((size_t)n + 1));
  for (int v = 0; v < n; v++) {
    bool is_short = true;
    for (int p = 0; p < HOPE_PROCESSORS; p++)
      is_short &= c->run[p][v] < HOPE_SHORT_FRACTION * mean[p]; /* false for INFINITY */
    leader[v] = is_short && d->npred[v] == 1 ? leader[d->pred[v][0]] : v;
  }
  return leader;
}

typedef struct Greedy {
  Hope *h;
  int *leader;
  int *next;     /* the next member of a super-op, topological order; -1: the last */
  double *ready; /* per leader: its producers' latest end */
  int *waiting;  /* per leader: producers not placed yet */
} Greedy;

/* A super-op's time on p: the leader with its transfers, then the members. */
static double superop_us(const Greedy *g, int leader, int p) {
  const Hope *h = g->h;
  if (!can_run(h->c, leader, p))
    return INFINITY;
  double t = duration(h->d, h->c, h->device, leader, p);
  for (int v = g->next[leader]; v >= 0; v = g->next[v])
    t += h->c->run[p][v];
  return t;
}

static int by_ready(const void *a, const void *b, void *ctx) {
  const double *ready = ctx;
  int x = *(const int *)a, y = *(const int *)b;
  if (ready[x] != ready[y])
    return ready[x] < ready[y] ? -1 : 1;
  return (x > y) - (x < y);
}

/*
 * The mapping of the K super-ops (sorted by ready time) whose last one ends
 * first, the earlier sum of ends on a tie, then the earlier mask (bit i
 * set: the i-th on the CPU).
 */
static unsigned best_mapping(const Greedy *g, const int *k_ops, int k) {
  const Hope *h = g->h;
  unsigned best = 0;
  double best_max = INFINITY, best_sum = INFINITY;
  for (unsigned mask = 0; mask < 1u << k; mask++) {
    double free_at[HOPE_PROCESSORS] = {h->free_at[0], h->free_at[1]}, last = 0, sum = 0;
    for (int i = 0; i < k; i++) {
      int p = (mask >> i) & 1, v = k_ops[i];
      double s = g->ready[v] > free_at[p] ? g->ready[v] : free_at[p];
      free_at[p] = s + superop_us(g, v, p);
      last = free_at[p] > last ? free_at[p] : last;
      sum += free_at[p];
    }
    if (last < best_max || (last == best_max && sum < best_sum)) {
      best = mask;
      best_max = last;
      best_sum = sum;
    }
  }
  return best;
}

/* Appends super-op `leader` on p and releases the super-ops it feeds. */
static void commit(Greedy *g, int leader, int p, int *queue, int *nqueue) {
  Hope *h = g->h;
  const SchedDeps *d = h->d;
  for (int v = leader; v >= 0; v = g->next[v])
    place(h, v, p);
  for (int v = leader; v >= 0; v = g->next[v])
    for (int k = 0; k < d->nsucc[v]; k++) {
      int s = d->succ[v][k];
      if (g->leader[s] == leader)
        continue;
      /* s is a leader: a member's single producer is in its own super-op */
      if (h->end[v] > g->ready[s])
        g->ready[s] = h->end[v];
      if (--g->waiting[s] == 0)
        queue[(*nqueue)++] = s;
    }
}

/* Alg. 2 over the super-ops. */
static void plan_heuristic(Hope *h) {
  const SchedDeps *d = h->d;
  int n = h->n;
  Greedy g = {.h = h, .leader = merge_short_units(h)};
  g.next = arena_alloc(h->scratch, sizeof(int) * ((size_t)n + 1));
  g.ready = arena_alloc(h->scratch, sizeof(double) * ((size_t)n + 1));
  g.waiting = arena_alloc(h->scratch, sizeof(int) * ((size_t)n + 1));
  int *tail = arena_alloc(h->scratch, sizeof(int) * ((size_t)n + 1));
  int *queue = arena_alloc(h->scratch, sizeof(int) * ((size_t)n + 1));
  int nqueue = 0;
  for (int v = 0; v < n; v++) {
    g.next[v] = -1;
    int l = g.leader[v];
    if (l == v) {
      tail[v] = v;
      g.waiting[v] = d->npred[v];
      if (g.waiting[v] == 0)
        queue[nqueue++] = v;
    } else {
      g.next[tail[l]] = v;
      tail[l] = v;
    }
  }
  int k_ops[HOPE_TOP_K];
  while (nqueue > 0) {
    qsort_r(queue, (size_t)nqueue, sizeof(int), by_ready, g.ready);
    int k = nqueue < HOPE_TOP_K ? nqueue : HOPE_TOP_K;
    memcpy(k_ops, queue, sizeof(int) * (size_t)k);
    memmove(queue, queue + k, sizeof(int) * (size_t)(nqueue - k));
    nqueue -= k;
    unsigned mask = best_mapping(&g, k_ops, k);
    for (int i = 0; i < k; i++)
      commit(&g, k_ops[i], (mask >> i) & 1, queue, &nqueue);
  }
}

/* -------------------------------------------------------------- driver */

static const char *const methods[] = {"ilp", "heuristic", "alternate", "gpu", "cpu"};

/* The plan of h's placement and order, in a's memory: hope_evaluate's
   start times, and the order re-sorted by them. */
static void finish_plan(Hope *h, Arena *a, HopePlan *out) {
  int n = h->n;
  size_t sz = (size_t)n + 1;
  out->device = arena_dup(a, h->device, sizeof(int) * sz);
  out->start = arena_alloc(a, sizeof(double) * sz);
  out->order = arena_dup(a, h->order, sizeof(int) * sz);
  hope_evaluate(h->d, h->c, out->device, out->order, out->start);
  for (int v = 0; v < n; v++)
    h->key_end[v] = out->start[v] + duration(h->d, h->c, out->device, v, out->device[v]);
  order_by_key(h, out->order, n, out->start, h->key_end, 0);
  out->latency_us = hope_evaluate(h->d, h->c, out->device, out->order, out->start);
}

/*
 * Both searches are myopic: a subgraph's ILP minimises its own end, and
 * the greedy search the end of K units, neither counting what their
 * placement costs the units after them in transfers. On dense graphs
 * (every unit reading from many earlier ones) that can make a mixed
 * placement worse than one processor alone, so the searches keep a single
 * processor's plan when it is strictly faster.
 */
static void keep_single_if_faster(Hope *h) {
  int n = h->n;
  double best = hope_evaluate(h->d, h->c, h->device, h->order, NULL);
  int *all = arena_alloc(h->scratch, sizeof(int) * ((size_t)n + 1));
  for (int p = 0; p < HOPE_PROCESSORS; p++) {
    for (int v = 0; v < n; v++)
      all[v] = p;
    double t = hope_evaluate(h->d, h->c, all, NULL, NULL);
    if (t < best) {
      best = t;
      memcpy(h->device, all, sizeof(int) * (size_t)n);
      for (int v = 0; v < n; v++)
        h->order[v] = v;
    }
  }
}

bool hope_plan(const SchedDeps *d, const HopeCosts *c, const char *method, int subgraph_units,
               Arena *a, HopePlan *out) {
  *out = (HopePlan){0};
  size_t nmethods = sizeof methods / sizeof methods[0], which = 0;
  while (which < nmethods && !(method && strcmp(method, methods[which]) == 0))
    which++;
  if (which == nmethods) {
    opc_error("hope: unknown method '%s' (expected ilp, heuristic, alternate, gpu or cpu)",
              method ? method : "(none)");
    return false;
  }
  bool searches = which <= 1; /* ilp, heuristic: they choose the processors */
  for (int v = 0; searches && v < d->n; v++)
    if (!can_run(c, v, HOPE_GPU) && !can_run(c, v, HOPE_CPU)) {
      ir_error(d->g, d->unit[v], "hope: runs on neither the GPU nor the CPU");
      return false;
    }
  Hope h;
  hope_init(&h, d, c);
  bool ok = true;
  if (which == 0)
    ok = plan_ilp(&h, subgraph_units > 0 ? subgraph_units : HOPE_DEFAULT_SUBGRAPH, out);
  else if (which == 1)
    plan_heuristic(&h);
  else
    for (int v = 0; v < d->n; v++)
      place(&h, v, which == 2 ? v % 2 : which == 3 ? HOPE_GPU : HOPE_CPU);
  if (ok && searches)
    keep_single_if_faster(&h);
  if (ok)
    finish_plan(&h, a, out);
  arena_free(h.scratch);
  return ok;
}
