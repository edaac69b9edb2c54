/*
 * plan_memory.c - places every storage tensor in one activation arena.
 *
 * Storage tensors are the runtime values that own memory: not constants
 * (they live in the weights) and not views (they borrow their base's
 * memory). Graph inputs and outputs get places of their own for the whole
 * run. Other tensors may share memory when it is provably safe under the
 * schedule: every node that touched the old tensor must happen before
 * every node that writes the new one, where "happens before" means stream
 * order or a chain of events (computed with vector clocks over the issue
 * order). At -O0 or without a schedule nothing is shared.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "pass.h"
#include "rewrite.h"

#define ARENA_ALIGN 256

typedef struct Buffer {
  Tensor *t;
  int64_t size; /* bytes, aligned */
  bool pinned;  /* graph input or output: lives for the whole run */
  int first;    /* issue position of the first writer, for ordering */
  int nwriters; /* non-view nodes writing the storage or a view of it */
  /* Per stream, with reuse: the position of the last node on that stream
     that reads or writes the storage (0: none), and the least clock any
     writer of it starts with. Comparing the two decides whether one
     buffer is finished with before another is written, without visiting
     every pair of nodes. */
  int *last_access;
  int *writers_see;
} Buffer;

/* Happens-before between issued nodes, from the streams and events. */
typedef struct Clocks {
  const Graph *g; /* whose schedule it replays */
  int nstreams;
  int *pos;   /* per node id: position on its stream, from 1; 0 if not issued */
  int *issue; /* per node id: issue index, -1 if not issued */
  int *vc;    /* per node id: nstreams entries, the clock it starts with */
} Clocks;

static int64_t align_up(int64_t x) { return (x + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN; }

/* Simulates the host issuing the schedule; false if it is not usable. */
static bool compute_clocks(Graph *g, Clocks *c) {
  const Schedule *s = &g->sched;
  if (!s->order || s->norder == 0)
    return false;
  int nstreams = 1, nevents = 0;
  for (int i = 0; i < s->norder; i++) {
    Node *n = s->order[i];
    NodeSchedule *ns = node_sched(g, n);
    if (ns->stream < 0 || n->id < 0 || n->id >= g->nnodes || g->nodes[n->id] != n)
      return false;
    if (ns->stream + 1 > nstreams)
      nstreams = ns->stream + 1;
    if (ns->record_event + 1 > nevents)
      nevents = ns->record_event + 1;
    for (int w = 0; w < ns->nwaits; w++) {
      if (ns->waits[w] < 0)
        return false;
      if (ns->waits[w] + 1 > nevents)
        nevents = ns->waits[w] + 1;
    }
  }
  int nn = g->nnodes;
  c->g = g;
  c->nstreams = nstreams;
  c->pos = calloc((size_t)nn + 1, sizeof(int));
  c->issue = malloc(sizeof(int) * ((size_t)nn + 1));
  c->vc = calloc((size_t)nn * (size_t)nstreams + 1, sizeof(int));
  int *stream_vc = calloc((size_t)nstreams * (size_t)nstreams + 1, sizeof(int));
  int *event_vc = calloc((size_t)(nevents + 1) * (size_t)nstreams, sizeof(int));
  for (int i = 0; i < nn; i++)
    c->issue[i] = -1;
  for (int i = 0; i < s->norder; i++) {
    Node *n = s->order[i];
    NodeSchedule *ns = node_sched(g, n);
    int *cur = &c->vc[n->id * nstreams];
    int *sv = &stream_vc[ns->stream * nstreams];
    memcpy(cur, sv, sizeof(int) * (size_t)nstreams);
    /* A wait sees the event's most recent record issued before it. */
    for (int w = 0; w < ns->nwaits; w++) {
      int *ev = &event_vc[ns->waits[w] * nstreams];
      for (int k = 0; k < nstreams; k++)
        if (ev[k] > cur[k])
          cur[k] = ev[k];
    }
    cur[ns->stream]++;
    c->pos[n->id] = cur[ns->stream];
    c->issue[n->id] = i;
    memcpy(sv, cur, sizeof(int) * (size_t)nstreams);
    if (ns->record_event >= 0)
      memcpy(&event_vc[ns->record_event * nstreams], cur, sizeof(int) * (size_t)nstreams);
  }
  free(stream_vc);
  free(event_vc);
  return true;
}

static void free_clocks(Clocks *c) {
  free(c->pos);
  free(c->issue);
  free(c->vc);
}

/*
 * What node n has seen of stream s when it starts. Of its own stream it
 * has seen only the nodes before it, so that a node never counts as
 * finished before itself.
 */
static int seen_of(const Clocks *c, const Node *n, int s) {
  int v = c->vc[n->id * c->nstreams + s];
  return s == node_sched(c->g, n)->stream ? v - 1 : v;
}

static void note_access(const Clocks *c, Buffer *b, const Node *n) {
  int p = c->pos[n->id];
  int s = node_sched(c->g, n)->stream;
  if (p > b->last_access[s])
    b->last_access[s] = p;
}

static void note_writer(const Clocks *c, Buffer *b, const Node *n) {
  for (int s = 0; s < c->nstreams; s++)
    if (seen_of(c, n, s) < b->writers_see[s])
      b->writers_see[s] = seen_of(c, n, s);
  note_access(c, b, n);
}

/* True when every node touching `old` happens before every writer of `new`. */
static bool dead_before(int nstreams, const Buffer *old, const Buffer *new) {
  if (old->pinned || new->pinned || new->nwriters == 0)
    return false;
  for (int s = 0; s < nstreams; s++)
    if (new->writers_see[s] < old->last_access[s])
      return false;
  return true;
}

typedef struct Span {
  int64_t begin, end;
} Span;

static int cmp_span(const void *a, const void *b) {
  const Span *x = a, *y = b;
  return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int cmp_buffer(const void *a, const void *b) {
  const Buffer *x = a, *y = b;
  if (x->pinned != y->pinned)
    return x->pinned ? -1 : 1;
  if (x->first != y->first)
    return x->first < y->first ? -1 : 1;
  return x->t->id - y->t->id;
}

/* First fit, from `base`, below, between or above the spans of live
   conflicting buffers. */
static int64_t first_fit(Span *spans, int nspans, int64_t size, int64_t base) {
  qsort(spans, (size_t)nspans, sizeof(Span), cmp_span);
  int64_t at = base;
  for (int i = 0; i < nspans; i++) {
    if (spans[i].begin >= at + size)
      return at;
    if (spans[i].end > at)
      at = spans[i].end;
  }
  return at;
}

static Buffer *buffer_of(Buffer *bufs, int *index_of, Tensor *t) {
  Tensor *s = tensor_storage(t);
  return index_of[s->id] >= 0 ? &bufs[index_of[s->id]] : NULL;
}

/*
 * A view must name its storage directly, but a later pass may have turned
 * the base of an existing view into a view itself. concat-in-place and
 * merge-convs re-point the views they make bases of (the schedule's
 * dependencies, built before this pass, need that); this is the net under
 * them. Through a contiguous intermediate the offsets simply add; through
 * a strided one the view cannot be expressed.
 */
static bool resolve_view_chains(Graph *g) {
  for (int i = 0; i < g->ntensors; i++) {
    Tensor *t = g->tensors[i];
    for (int depth = 0; t->alias_of && t->alias_of->alias_of; depth++) {
      Tensor *mid = t->alias_of;
      if (!has_contiguous_strides(mid) || depth > g->ntensors) {
        ir_error(g, t->producer, "view '%s' of strided view '%s' has no single storage", t->name,
                 mid->name);
        return false;
      }
      t->alias_offset += mid->alias_offset;
      t->alias_of = mid->alias_of;
    }
  }
  return true;
}

/* Readers and writers of each storage, through views. View nodes issue
   nothing. Clears *reuse when a live node is not in the schedule. */
static void collect_uses(Graph *g, Buffer *bufs, int *index_of, const Clocks *c, bool *reuse) {
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || n->is_view)
      continue;
    for (int j = 0; j < n->nout; j++) {
      Buffer *b = n->out[j] ? buffer_of(bufs, index_of, n->out[j]) : NULL;
      if (!b)
        continue;
      b->nwriters++;
      if (*reuse)
        note_writer(c, b, n);
      int at = *reuse ? c->issue[n->id] : n->id;
      if (b->first < 0 || at < b->first)
        b->first = at;
    }
    for (int j = 0; j < n->nin; j++) {
      Buffer *b = n->in[j] ? buffer_of(bufs, index_of, n->in[j]) : NULL;
      if (b && *reuse)
        note_access(c, b, n);
    }
    if (*reuse && c->issue[n->id] < 0)
      *reuse = false; /* a live node the schedule does not issue: play safe */
  }
}

/*
 * Per buffer, in placement order: the least clock with which any writer of
 * it or of a later buffer starts (-1 where one has no writer, which never
 * allows reuse). A buffer whose last accesses are all within it is
 * finished with before every later buffer is written.
 */
static int *later_writers_floor(const Buffer *bufs, int nbufs, int ns) {
  int *floor = malloc(sizeof(int) * ((size_t)nbufs + 1) * (size_t)ns);
  for (int i = nbufs - 1; i >= 0; i--)
    for (int s = 0; s < ns; s++) {
      int see = bufs[i].nwriters > 0 ? bufs[i].writers_see[s] : -1;
      int later = i + 1 < nbufs ? floor[(i + 1) * ns + s] : see;
      floor[i * ns + s] = see < later ? see : later;
    }
  return floor;
}

static bool finished_for_good(const Buffer *b, const int *floor, int ns) {
  for (int s = 0; s < ns; s++)
    if (b->last_access[s] > floor[s])
      return false;
  return true;
}

/*
 * Places buffers sorted pinned first. Pinned buffers conflict with
 * everything, so they are stacked from 0. Each other buffer is compared
 * only with the buffers still active: one finished with before every later
 * buffer is written can never conflict again and leaves the active set,
 * which keeps planning linear in a long chain.
 */
static int64_t place_with_reuse(Buffer *bufs, int nbufs, int ns) {
  int64_t base = 0;
  int first = 0;
  for (; first < nbufs && bufs[first].pinned; first++) {
    bufs[first].t->offset = base;
    base += bufs[first].size;
  }
  int nrest = nbufs - first;
  int *floor = later_writers_floor(bufs + first, nrest, ns);
  int *active = malloc(sizeof(int) * ((size_t)nrest + 1));
  Span *spans = malloc(sizeof(Span) * ((size_t)nrest + 1));
  int nactive = 0;
  int64_t total = base;
  for (int i = first; i < nbufs; i++) {
    Buffer *b = &bufs[i];
    const int *fl = &floor[(i - first) * ns];
    int keep = 0, nspans = 0;
    for (int k = 0; k < nactive; k++) {
      const Buffer *old = &bufs[active[k]];
      if (finished_for_good(old, fl, ns))
        continue;
      active[keep++] = active[k];
      if (!dead_before(ns, old, b))
        spans[nspans++] = (Span){old->t->offset, old->t->offset + old->size};
    }
    nactive = keep;
    b->t->offset = first_fit(spans, nspans, b->size, base);
    if (b->t->offset + b->size > total)
      total = b->t->offset + b->size;
    active[nactive++] = i;
  }
  free(floor);
  free(active);
  free(spans);
  return total;
}

static int64_t place_one_after_another(Buffer *bufs, int nbufs) {
  int64_t total = 0;
  for (int i = 0; i < nbufs; i++) {
    bufs[i].t->offset = total;
    total += bufs[i].size;
  }
  return total;
}

/* ------------------------------------------------- the program's memory */

/* The run-time dims of the bounded tensors, after the activations: each
   is written by its producer and read after the run, so none is reused. */
static int64_t place_live_dims(Graph *g, int64_t total) {
  for (int i = 0; i < g->ntensors; i++) {
    Tensor *t = g->tensors[i];
    if (!t->bounded)
      continue;
    t->live_offset = total;
    total += align_up((int64_t)sizeof(int64_t) * t->rank);
  }
  return total;
}

/* A constant the program keeps on the device: one a live node reads, or a
   constant graph output. */
static bool is_weight(const Tensor *t) {
  if (!tensor_is_const(t))
    return false;
  if (t->is_output)
    return true;
  for (int i = 0; i < t->nusers; i++)
    if (!t->users[i]->dead)
      return true;
  return false;
}

/* The bytes of the weights file: each array on a 64-byte boundary, as
   backend/emit.c lays them out. */
static int64_t weight_bytes(const Tensor *t) {
  return ((int64_t)dtype_size(t->dtype) * tensor_numel(t) + 63) / 64 * 64;
}

enum { NLARGEST = 3 };

typedef struct Contributor {
  const Tensor *t;
  int64_t bytes;
} Contributor;

/* Keeps the NLARGEST biggest, largest first. */
static void consider(Contributor *top, const Tensor *t, int64_t bytes) {
  for (int i = 0; i < NLARGEST; i++)
    if (!top[i].t || bytes > top[i].bytes) {
      memmove(&top[i + 1], &top[i], sizeof *top * (size_t)(NLARGEST - 1 - i));
      top[i] = (Contributor){t, bytes};
      return;
    }
}

/*
 * The program allocates the arena and the weights on the device when it
 * starts; past the limit it would fail there (or on a smaller GPU), so it
 * is refused here, naming what takes the room.
 */
static bool check_program_memory(Graph *g) {
  int64_t weights = 0;
  Contributor top[NLARGEST] = {{0}};
  for (int i = 0; i < g->ntensors; i++) {
    const Tensor *t = g->tensors[i];
    if (is_weight(t)) {
      weights += weight_bytes(t);
      consider(top, t, weight_bytes(t));
    } else if (!tensor_is_const(t) && !t->alias_of &&
               ((t->producer && !t->producer->dead) || t->is_input)) {
      consider(top, t, (int64_t)dtype_size(t->dtype) * tensor_numel(t));
    }
  }
  int64_t total = g->arena_bytes + weights;
  if (total <= g->max_memory)
    return true;
  char largest[512] = "";
  size_t len = 0;
  for (int i = 0; i < NLARGEST && top[i].t && len < sizeof largest; i++)
    len += (size_t)snprintf(largest + len, sizeof largest - len, "%s%s '%.64s' %lld bytes",
                            i ? ", " : "", tensor_is_const(top[i].t) ? "weight" : "activation",
                            top[i].t->name, (long long)top[i].bytes);
  ir_error(g, NULL, "the program needs %lld bytes of device memory (activations %lld, weights "
           "%lld), over the limit of %lld bytes (--max-memory); the largest: %s",
           (long long)total, (long long)g->arena_bytes, (long long)weights,
           (long long)g->max_memory, largest);
  return false;
}

bool pass_plan_memory(Graph *g, const PassOptions *opt, PassContext *ctx) {
  begin_rewrite(g);
  if (!resolve_view_chains(g))
    return false;
  int nt = g->ntensors;
  int *index_of = malloc(sizeof(int) * ((size_t)nt + 1));
  Buffer *bufs = calloc((size_t)nt + 1, sizeof(Buffer));
  int nbufs = 0;
  for (int i = 0; i < nt; i++) {
    index_of[i] = -1;
    g->tensors[i]->offset = 0;
  }

  /* Every runtime tensor a live node or the caller touches needs storage. */
  for (int i = 0; i < nt; i++) {
    Tensor *t = g->tensors[i];
    if (tensor_is_const(t) || t->alias_of)
      continue;
    bool touched = t->is_input || t->is_output || t->producer || t->nusers > 0;
    if (!touched)
      continue;
    if (t->id != i) {
      ir_error(g, NULL, "plan-memory: tensor '%s' has id %d at index %d", t->name, t->id, i);
      free(index_of);
      free(bufs);
      return false;
    }
    Buffer *b = &bufs[nbufs];
    index_of[i] = nbufs++;
    b->t = t;
    b->size = align_up((int64_t)dtype_size(t->dtype) * tensor_numel(t));
    if (b->size == 0)
      b->size = ARENA_ALIGN;
    b->pinned = t->is_input || t->is_output;
    b->first = -1;
  }

  /* A graph output may be a view of an intermediate tensor: that storage
     must survive until the output is copied out. */
  for (int i = 0; i < g->noutputs; i++) {
    Buffer *b = buffer_of(bufs, index_of, g->outputs[i]);
    if (b)
      b->pinned = true;
  }

  Clocks clocks = {0};
  bool reuse = opt->opt_level > 0 && compute_clocks(g, &clocks);
  int ns = reuse ? clocks.nstreams : 1;
  int *per_stream = malloc(sizeof(int) * 2 * ((size_t)nbufs + 1) * (size_t)ns);
  for (int i = 0; i < nbufs; i++) {
    bufs[i].last_access = &per_stream[2 * i * ns];
    bufs[i].writers_see = &per_stream[(2 * i + 1) * ns];
    for (int s = 0; s < ns; s++) {
      bufs[i].last_access[s] = 0;
      bufs[i].writers_see[s] = INT_MAX;
    }
  }
  collect_uses(g, bufs, index_of, &clocks, &reuse);

  /* Sorting moves the buffers: index_of is not used after this point. */
  qsort(bufs, (size_t)nbufs, sizeof(Buffer), cmp_buffer);
  int64_t total = reuse ? place_with_reuse(bufs, nbufs, ns) : place_one_after_another(bufs, nbufs);
  total = place_live_dims(g, total);
  /* Never empty: the program allocates it, and 0 means "not planned". */
  g->arena_bytes = total > 0 ? total : ARENA_ALIGN;

  /* Views have no storage of their own: they report their base's place. */
  for (int i = 0; i < nt; i++) {
    Tensor *t = g->tensors[i];
    if (t->alias_of)
      t->offset = t->alias_of->offset;
  }

  free(per_stream);
  free(bufs);
  free(index_of);
  if (clocks.pos)
    free_clocks(&clocks);
  return check_program_memory(g);
}
