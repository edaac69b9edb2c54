/*
 * oracle.c - see oracle.h. Deliberately simple: quadratic loops and bit
 * sets, no vector clocks, no reuse of the dependency graph the checkers use.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oracle.h"

/* ------------------------------------------------------------ footprints */

/* The elements of a tensor inside its storage: start + sum(i_k * stride_k). */
typedef struct Footprint {
  int64_t start;
  int rank;
  const int64_t *dims, *strides;
  bool contiguous;
  int64_t lo, hi; /* bounds [lo, hi) */
} Footprint;

static Footprint footprint_of(const Tensor *t) {
  Footprint f = {0};
  int64_t n = tensor_numel(t);
  if (!t->alias_of) {
    f.contiguous = true;
    f.hi = n;
    return f;
  }
  f.start = t->alias_offset;
  f.rank = t->rank;
  f.dims = t->dims;
  f.strides = t->strides;
  f.lo = f.hi = t->alias_offset;
  /* Contiguous when each stride is the product of the dims inside it;
     axes of extent 1 do not matter. */
  int64_t expect = 1;
  f.contiguous = true;
  for (int i = t->rank - 1; i >= 0; i--) {
    if (t->dims[i] == 1)
      continue;
    if (t->strides[i] != expect)
      f.contiguous = false;
    expect *= t->dims[i];
    int64_t reach = (t->dims[i] - 1) * t->strides[i];
    if (reach < 0)
      f.lo += reach;
    else
      f.hi += reach;
  }
  f.hi += n > 0 ? 1 : 0;
  return f;
}

/* Calls mark(elem - lo) for every element of f; returns false from the first
   callback that does. */
static bool each_element(const Footprint *f, bool (*visit)(void *, int64_t), void *arg) {
  if (f->contiguous) {
    for (int64_t e = f->lo; e < f->hi; e++)
      if (!visit(arg, e))
        return false;
    return true;
  }
  int64_t idx[IR_MAX_RANK] = {0};
  for (;;) {
    int64_t e = f->start;
    for (int i = 0; i < f->rank; i++)
      e += idx[i] * f->strides[i];
    if (!visit(arg, e))
      return false;
    int i = f->rank - 1;
    while (i >= 0 && ++idx[i] == f->dims[i])
      idx[i--] = 0;
    if (i < 0)
      return true;
  }
}

typedef struct Marks {
  unsigned char *bit;
  int64_t lo, hi;
} Marks;

static bool mark_element(void *arg, int64_t e) {
  Marks *m = arg;
  m->bit[e - m->lo] = 1;
  return true;
}

/* Returns false (stops) at the first element already marked. */
static bool element_unmarked(void *arg, int64_t e) {
  Marks *m = arg;
  return e < m->lo || e >= m->hi || !m->bit[e - m->lo];
}

/* Whether two tensors of one storage share an element. */
static bool footprints_meet(const Tensor *x, const Tensor *y) {
  Footprint a = footprint_of(x), b = footprint_of(y);
  if (a.hi <= b.lo || b.hi <= a.lo || a.lo == a.hi || b.lo == b.hi)
    return false;
  if (a.contiguous && b.contiguous)
    return true;
  Marks m = {calloc((size_t)(a.hi - a.lo), 1), a.lo, a.hi};
  each_element(&a, mark_element, &m);
  bool meet = !each_element(&b, element_unmarked, &m);
  free(m.bit);
  return meet;
}

int64_t storage_bytes(const Tensor *t) {
  return tensor_numel(t) * (int64_t)dtype_size(t->dtype);
}

/* -------------------------------------------------------------- accesses */

static bool in_arena(Tensor *t) {
  return t && !tensor_is_const(t) && tensor_numel(t) > 0 && !tensor_is_const(tensor_storage(t));
}

static void add_access(Oracle *o, int *slot, int unit, Tensor *t, bool write) {
  if (!in_arena(t))
    return;
  Tensor *s = tensor_storage(t);
  if (slot[s->id] < 0) {
    slot[s->id] = o->nst;
    o->st[o->nst++] = (StorageUse){.t = s};
  }
  StorageUse *u = &o->st[slot[s->id]];
  u->acc = realloc(u->acc, sizeof(Access) * ((size_t)u->nacc + 1));
  u->acc[u->nacc++] = (Access){unit, t, write};
}

static void add_conflict(Oracle *o, int a, int b) {
  o->conf = realloc(o->conf, sizeof(Conflict) * ((size_t)o->nconf + 1));
  o->conf[o->nconf++] = a < b ? (Conflict){a, b} : (Conflict){b, a};
}

/* Pairs inside one storage that touch a common element, one of them writing.
   The host's accesses are ordered with everything and need no pair. */
static void find_conflicts(Oracle *o, const StorageUse *u) {
  for (int i = 0; i < u->nacc; i++)
    for (int j = i + 1; j < u->nacc; j++) {
      const Access *x = &u->acc[i], *y = &u->acc[j];
      if (x->unit == y->unit || !(x->write || y->write))
        continue;
      if (x->unit == UNIT_BEGIN || x->unit == UNIT_END || y->unit == UNIT_BEGIN ||
          y->unit == UNIT_END)
        continue;
      if (footprints_meet(x->t, y->t))
        add_conflict(o, x->unit, y->unit);
    }
}

void oracle_init(Oracle *o, Graph *g) {
  memset(o, 0, sizeof *o);
  o->g = g;
  o->n = g->sched.norder;
  o->words = (o->n + 63) / 64;
  o->before = calloc((size_t)o->n * (size_t)o->words + 1, sizeof(uint64_t));
  int maxid = 0;
  for (int i = 0; i < g->ntensors; i++)
    if (g->tensors[i]->id >= maxid)
      maxid = g->tensors[i]->id + 1;
  int *slot = malloc(sizeof(int) * ((size_t)maxid + 1));
  for (int i = 0; i <= maxid; i++)
    slot[i] = -1;
  o->st = calloc((size_t)g->ntensors + 1, sizeof(StorageUse));
  for (int i = 0; i < g->ninputs; i++)
    add_access(o, slot, UNIT_BEGIN, g->inputs[i], true);
  for (int k = 0; k < o->n; k++) {
    Node *n = g->sched.order[k];
    for (int j = 0; j < n->nin; j++)
      add_access(o, slot, k, n->in[j], false);
    for (int j = 0; j < n->nout; j++)
      add_access(o, slot, k, n->out[j], true);
  }
  for (int i = 0; i < g->noutputs; i++)
    add_access(o, slot, UNIT_END, g->outputs[i], false);
  free(slot);
  for (int i = 0; i < o->nst; i++)
    find_conflicts(o, &o->st[i]);
}

void oracle_free(Oracle *o) {
  for (int i = 0; i < o->nst; i++)
    free(o->st[i].acc);
  free(o->st);
  free(o->conf);
  free(o->before);
}

/* -------------------------------------------------------- happens-before */

static void join_before(Oracle *o, int into, int from) {
  uint64_t *dst = &o->before[(size_t)into * (size_t)o->words];
  const uint64_t *src = &o->before[(size_t)from * (size_t)o->words];
  for (int w = 0; w < o->words; w++)
    dst[w] |= src[w];
  dst[from / 64] |= 1ull << (from % 64);
}

/*
 * Edges: a unit follows the previous unit of its stream, and the latest
 * unit, issued before it, that recorded an event it waits on (a wait on an
 * event nothing recorded yet orders nothing, as in CUDA). Every edge goes
 * forward in issue order, so one pass in that order closes them.
 */
static void compute_before(Oracle *o) {
  const Schedule *s = &o->g->sched;
  memset(o->before, 0, sizeof(uint64_t) * (size_t)o->n * (size_t)o->words);
  int nstreams = 1, nevents = 1;
  for (int k = 0; k < o->n; k++) {
    Node *n = s->order[k];
    NodeSchedule *ns = node_sched(o->g, n);
    if (ns->stream + 1 > nstreams)
      nstreams = ns->stream + 1;
    if (ns->record_event + 1 > nevents)
      nevents = ns->record_event + 1;
    for (int w = 0; w < ns->nwaits; w++)
      if (ns->waits[w] + 1 > nevents)
        nevents = ns->waits[w] + 1;
  }
  int *last_on_stream = malloc(sizeof(int) * (size_t)nstreams);
  int *last_record = malloc(sizeof(int) * (size_t)nevents);
  for (int i = 0; i < nstreams; i++)
    last_on_stream[i] = -1;
  for (int i = 0; i < nevents; i++)
    last_record[i] = -1;
  for (int k = 0; k < o->n; k++) {
    Node *n = s->order[k];
    NodeSchedule *ns = node_sched(o->g, n);
    for (int w = 0; w < ns->nwaits; w++)
      if (ns->waits[w] >= 0 && last_record[ns->waits[w]] >= 0)
        join_before(o, k, last_record[ns->waits[w]]);
    if (ns->stream >= 0 && last_on_stream[ns->stream] >= 0)
      join_before(o, k, last_on_stream[ns->stream]);
    if (ns->stream >= 0)
      last_on_stream[ns->stream] = k;
    if (ns->record_event >= 0)
      last_record[ns->record_event] = k;
  }
  free(last_on_stream);
  free(last_record);
}

bool oracle_hb(const Oracle *o, int a, int b) {
  if (a == b)
    return false;
  if (a == UNIT_BEGIN || b == UNIT_END)
    return true;
  if (a == UNIT_END || b == UNIT_BEGIN)
    return false;
  return (o->before[(size_t)b * (size_t)o->words + (size_t)a / 64] >> (a % 64)) & 1;
}

/* ---------------------------------------------------------------- verdict */

/* Relaxations that reproduce what a checker with a known gap believes. */
enum { STRICT = 0, SAME_UNIT_OK = 1, OUTPUT_VIEWS_IGNORED = 2 };

static bool is_host(int unit) { return unit == UNIT_BEGIN || unit == UNIT_END; }

/* x is finished with before y is first written. SAME_UNIT_OK: a unit that
   touches x and writes y counts as ordered (an in-place op).
   OUTPUT_VIEWS_IGNORED: the caller's read of a graph output that is a view
   of x does not count. */
static bool done_before(const Oracle *o, const StorageUse *x, const StorageUse *y, int relax) {
  for (int i = 0; i < x->nacc; i++)
    for (int j = 0; j < y->nacc; j++) {
      const Access *a = &x->acc[i], *b = &y->acc[j];
      if (!b->write || oracle_hb(o, a->unit, b->unit))
        continue;
      if ((relax & SAME_UNIT_OK) && a->unit == b->unit && !is_host(a->unit))
        continue;
      if ((relax & OUTPUT_VIEWS_IGNORED) && a->unit == UNIT_END && a->t->alias_of)
        continue;
      return false;
    }
  return true;
}

static bool fine_when(const Oracle *o, const StorageUse *x, const StorageUse *y, int relax) {
  return done_before(o, x, y, relax) || done_before(o, y, x, relax);
}

bool oracle_done_before(const Oracle *o, const StorageUse *x, const StorageUse *y) {
  return done_before(o, x, y, STRICT);
}

/* Some access of x and some access of y, one writing, are not ordered. */
static bool has_unordered_pair(const Oracle *o, const StorageUse *x, const StorageUse *y) {
  for (int i = 0; i < x->nacc; i++)
    for (int j = 0; j < y->nacc; j++) {
      const Access *a = &x->acc[i], *b = &y->acc[j];
      /* one op reading and writing the same bytes is no race at run time */
      if ((a->write || b->write) && a->unit != b->unit && !oracle_hb(o, a->unit, b->unit) &&
          !oracle_hb(o, b->unit, a->unit))
        return true;
    }
  return false;
}

static char why_buf[512];

static int by_arena_offset(const void *a, const void *b) {
  const StorageUse *x = *(StorageUse *const *)a, *y = *(StorageUse *const *)b;
  if (x->t->offset != y->t->offset)
    return x->t->offset < y->t->offset ? -1 : 1;
  return x->t->id - y->t->id;
}

void oracle_judge(Oracle *o, Verdict *v) {
  memset(v, 0, sizeof *v);
  compute_before(o);
  for (int i = 0; i < o->nconf; i++)
    if (!oracle_hb(o, o->conf[i].a, o->conf[i].b)) {
      if (!v->dep_races++)
        snprintf(why_buf, sizeof why_buf, "'%s' and '%s' touch the same tensor unordered",
                 o->g->sched.order[o->conf[i].a]->name, o->g->sched.order[o->conf[i].b]->name);
    }
  /* Two storages may share bytes only when one is finished with before
     the other is first written. Sorted by offset, each storage meets only
     those that start before it ends. */
  StorageUse **by_offset = malloc(sizeof(StorageUse *) * ((size_t)o->nst + 1));
  for (int i = 0; i < o->nst; i++)
    by_offset[i] = &o->st[i];
  qsort(by_offset, (size_t)o->nst, sizeof *by_offset, by_arena_offset);
  for (int i = 0; i < o->nst; i++)
    for (int j = i + 1; j < o->nst; j++) {
      const StorageUse *x = by_offset[i], *y = by_offset[j];
      if (y->t->offset >= x->t->offset + storage_bytes(x->t))
        break;
      if (storage_bytes(y->t) == 0)
        continue;
      if (fine_when(o, x, y, STRICT))
        continue;
      if (!v->overlaps++ && !v->dep_races)
        snprintf(why_buf, sizeof why_buf, "'%s' and '%s' share bytes while both live",
                 x->t->name, y->t->name);
      v->in_place += fine_when(o, x, y, SAME_UNIT_OK);
      v->output_view += fine_when(o, x, y, SAME_UNIT_OK | OUTPUT_VIEWS_IGNORED);
      v->unordered += has_unordered_pair(o, x, y);
    }
  free(by_offset);
  v->why = v->dep_races || v->overlaps ? why_buf : "";
}
