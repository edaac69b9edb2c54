/*
 * verify_schedule.c - checks the schedule as the emitted program will run
 * it, independently of how it was made: every unit issued exactly once,
 * every data dependency (through storage) ordered by stream order or a
 * chain of events, every event recorded before it is waited on, and, once
 * memory is planned, buffers that share arena bytes used one after the
 * other. A failure is a compiler bug and is reported as an error.
 *
 * Happens-before is replayed with vector clocks in issue order: each stream
 * knows how many units of every stream it is ordered after; recording an
 * event snapshots the recording stream's clock, waiting joins it.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "pass.h"
#include "schedule.h"

typedef struct Replay {
  SchedDeps *d;
  int ns;
  int *order_pos;  /* per unit: position in g->sched.order */
  int *stream_pos; /* per unit: 1-based position on its stream */
  int *seen;       /* per unit: clock (ns ints) when it starts, after its waits */
} Replay;

static bool replay(Graph *g, SchedDeps *d, Replay *r) {
  Schedule *s = &g->sched;
  int ns = s->nstreams > 0 ? s->nstreams : 1;
  r->d = d;
  r->ns = ns;
  r->order_pos = malloc(sizeof(int) * ((size_t)d->n + 1));
  r->stream_pos = calloc((size_t)d->n + 1, sizeof(int));
  r->seen = calloc((size_t)d->n * (size_t)ns + 1, sizeof(int));
  for (int u = 0; u < d->n; u++)
    r->order_pos[u] = -1;
  int nev = s->nevents > 0 ? s->nevents : 0;
  int *event_snapshot = calloc((size_t)nev * (size_t)ns + 1, sizeof(int));
  bool *recorded = calloc((size_t)nev + 1, sizeof(bool));
  int *clock = calloc((size_t)ns * (size_t)ns, sizeof(int));
  int *count = calloc((size_t)ns, sizeof(int));
  bool ok = true;
  for (int k = 0; k < s->norder && ok; k++) {
    Node *n = s->order[k];
    NodeSchedule *at = node_sched(g, n);
    int u = n->id >= 0 ? d->index_of[n->id] : -1;
    if (u < 0) {
      ir_error(g, n, "schedule issues a node that is dead or a view");
      ok = false;
      break;
    }
    if (r->order_pos[u] >= 0) {
      ir_error(g, n, "schedule issues this node twice");
      ok = false;
      break;
    }
    if (at->stream < 0 || at->stream >= ns) {
      ir_error(g, n, "schedule puts this node on stream %d of %d", at->stream, ns);
      ok = false;
      break;
    }
    r->order_pos[u] = k;
    int *c = &clock[at->stream * ns];
    for (int w = 0; w < at->nwaits; w++) {
      int ev = at->waits[w];
      if (ev < 0 || ev >= nev || !recorded[ev]) {
        ir_error(g, n, "schedule waits on event %d before it is recorded", ev);
        ok = false;
        break;
      }
      for (int t = 0; t < ns; t++)
        if (event_snapshot[ev * ns + t] > c[t])
          c[t] = event_snapshot[ev * ns + t];
    }
    memcpy(&r->seen[u * ns], c, sizeof(int) * (size_t)ns);
    r->stream_pos[u] = ++count[at->stream];
    c[at->stream] = r->stream_pos[u];
    if (at->record_event >= 0) {
      int ev = at->record_event;
      if (ev >= nev || recorded[ev]) {
        ir_error(g, n, "schedule records event %d twice or beyond the %d events", ev, nev);
        ok = false;
        break;
      }
      recorded[ev] = true;
      memcpy(&event_snapshot[ev * ns], c, sizeof(int) * (size_t)ns);
    }
  }
  for (int u = 0; u < d->n && ok; u++)
    if (r->order_pos[u] < 0) {
      ir_error(g, d->unit[u], "schedule never issues this node");
      ok = false;
    }
  free(event_snapshot);
  free(recorded);
  free(clock);
  free(count);
  return ok;
}

static void replay_free(Replay *r) {
  free(r->order_pos);
  free(r->stream_pos);
  free(r->seen);
}

/* Unit a is ordered before unit b when b starts. */
static bool happens_before(const Replay *r, int a, int b) {
  if (r->order_pos[a] >= r->order_pos[b])
    return false;
  int sa = node_sched(r->d->g, r->d->unit[a])->stream;
  if (sa == node_sched(r->d->g, r->d->unit[b])->stream)
    return true;
  return r->seen[b * r->ns + sa] >= r->stream_pos[a];
}

static bool check_dependencies(Graph *g, const Replay *r) {
  const SchedDeps *d = r->d;
  for (int u = 0; u < d->n; u++)
    for (int k = 0; k < d->npred[u]; k++) {
      int p = d->pred[u][k];
      if (!happens_before(r, p, u)) {
        ir_error(g, d->unit[u], "schedule violates dependency %s -> %s", d->unit[p]->name,
                 d->unit[u]->name);
        return false;
      }
    }
  return true;
}

bool verify_schedule_deps(Graph *g) {
  Replay r;
  bool ok = replay(g, deps_build(g, NULL), &r) && check_dependencies(g, &r);
  replay_free(&r);
  return ok;
}

/* ------------------------------------------------------------ buffer reuse */

/*
 * Buffers that share arena bytes must be used one after the other. Pairs
 * are not all compared: in order of their first write, each buffer is
 * checked against the last earlier owner of each of its bytes, then owns
 * them. If every owner of a byte is finished before the next one writes,
 * any two of them are ordered too, since happens-before is transitive.
 */
typedef struct Buffer {
  Tensor *t;
  int64_t lo, hi;      /* bytes in the arena */
  int first;           /* issue position of the first writer; -1 for an input */
  bool read_after_run; /* a graph output is this storage or a view of it */
  int *writers, nwriters, capwriters;
  int *users, nusers, capusers; /* readers and writers */
} Buffer;

/* Arena bytes [lo, hi) last owned by buffer `owner`. */
typedef struct Segment {
  int64_t lo, hi;
  int owner;
} Segment;

typedef struct Owners {
  Segment *seg;
  int n, cap;
} Owners;

static int by_first_write(const void *a, const void *b) {
  const Buffer *x = a, *y = b;
  if (x->first != y->first)
    return x->first < y->first ? -1 : 1;
  return (x->t->id > y->t->id) - (x->t->id < y->t->id);
}

/* Nodes are added unit by unit, so a repeat can only be the last one. */
static void add_unit(int **arr, int *n, int *cap, int v) {
  if (*n > 0 && (*arr)[*n - 1] == v)
    return;
  if (*n == *cap) {
    *cap = *cap ? 2 * *cap : 4;
    *arr = realloc(*arr, sizeof(int) * (size_t)*cap);
  }
  (*arr)[(*n)++] = v;
}

/*
 * Every use of `a` is ordered before every write of `b`. A unit that uses
 * `a` and writes `b` is not ordered before itself: no kernel is asked to
 * write over bytes it reads, and the planner never asks it.
 */
static bool used_before(const Replay *r, const Buffer *a, const Buffer *b) {
  if (a->read_after_run || b->t->is_input)
    return false;
  for (int i = 0; i < a->nusers; i++)
    for (int j = 0; j < b->nwriters; j++)
      if (!happens_before(r, a->users[i], b->writers[j]))
        return false;
  return true;
}

/* The first segment that ends after `lo`. */
static int first_segment_after(const Owners *o, int64_t lo) {
  int a = 0, b = o->n;
  while (a < b) {
    int m = (a + b) / 2;
    if (o->seg[m].hi <= lo)
      a = m + 1;
    else
      b = m;
  }
  return a;
}

/* Makes buffer i the owner of [lo, hi): segments it covers go, segments
   it cuts keep their parts outside. */
static void take_bytes(Owners *o, int64_t lo, int64_t hi, int i) {
  int a = first_segment_after(o, lo), b = a;
  while (b < o->n && o->seg[b].lo < hi)
    b++;
  Segment left = {0}, right = {0};
  bool has_left = a < b && o->seg[a].lo < lo, has_right = a < b && o->seg[b - 1].hi > hi;
  if (has_left)
    left = (Segment){o->seg[a].lo, lo, o->seg[a].owner};
  if (has_right)
    right = (Segment){hi, o->seg[b - 1].hi, o->seg[b - 1].owner};
  int keep = has_left + 1 + has_right;
  if (o->n - (b - a) + keep > o->cap) {
    o->cap = 2 * (o->n + keep);
    o->seg = realloc(o->seg, sizeof(Segment) * (size_t)o->cap);
  }
  memmove(&o->seg[a + keep], &o->seg[b], sizeof(Segment) * (size_t)(o->n - b));
  o->n += keep - (b - a);
  int k = a;
  if (has_left)
    o->seg[k++] = left;
  o->seg[k++] = (Segment){lo, hi, i};
  if (has_right)
    o->seg[k] = right;
}

static bool ordered_with_owners(Graph *g, const Replay *r, const Owners *o, const Buffer *buf,
                                int i) {
  const Buffer *b = &buf[i];
  int last = -1;
  for (int k = first_segment_after(o, b->lo); k < o->n && o->seg[k].lo < b->hi; k++) {
    const Buffer *a = &buf[o->seg[k].owner];
    if (o->seg[k].owner == last)
      continue;
    last = o->seg[k].owner;
    if (used_before(r, a, b) || used_before(r, b, a))
      continue;
    ir_error(g, a->t->producer, "buffers '%s' and '%s' share arena bytes but may be live at "
             "the same time", a->t->name, b->t->name);
    return false;
  }
  return true;
}

static int max_tensor_id(Graph *g, const SchedDeps *d) {
  int maxid = 0;
  for (int i = 0; i < g->ntensors; i++)
    if (g->tensors[i]->id + 1 > maxid)
      maxid = g->tensors[i]->id + 1;
  for (int u = 0; u < d->n; u++)
    for (int j = 0; j < d->unit[u]->nin + d->unit[u]->nout; j++) {
      Node *n = d->unit[u];
      Tensor *t = j < n->nin ? n->in[j] : n->out[j - n->nin];
      if (t && t->id + 1 > maxid)
        maxid = t->id + 1;
      if (t && tensor_storage(t)->id + 1 > maxid)
        maxid = tensor_storage(t)->id + 1;
    }
  return maxid;
}

/* The buffers of g with their writers and users; *nb of them. */
static Buffer *collect_buffers(Graph *g, const Replay *r, int *nb) {
  const SchedDeps *d = r->d;
  int maxid = max_tensor_id(g, d);
  Buffer *buf = calloc((size_t)g->ntensors + 1, sizeof(Buffer));
  int *slot = malloc(sizeof(int) * ((size_t)maxid + 1));
  for (int i = 0; i < maxid; i++)
    slot[i] = -1;
  *nb = 0;
  for (int i = 0; i < g->ntensors; i++) {
    Tensor *t = g->tensors[i];
    if (t->alias_of || tensor_is_const(t) || tensor_numel(t) <= 0)
      continue;
    if (!t->producer && !t->is_input)
      continue;
    slot[t->id] = *nb;
    buf[*nb] = (Buffer){.t = t, .lo = t->offset, .first = t->is_input ? -1 : INT_MAX,
                        .read_after_run = t->is_output};
    buf[*nb].hi = t->offset + tensor_numel(t) * (int64_t)dtype_size(t->dtype);
    (*nb)++;
  }
  /* The caller reads a graph output after the run, through its storage. */
  for (int i = 0; i < g->noutputs; i++) {
    Tensor *s = tensor_storage(g->outputs[i]);
    if (s->id >= 0 && s->id < maxid && slot[s->id] >= 0)
      buf[slot[s->id]].read_after_run = true;
  }
  for (int u = 0; u < d->n; u++) {
    Node *n = d->unit[u];
    for (int j = 0; j < n->nout; j++)
      if (n->out[j] && slot[tensor_storage(n->out[j])->id] >= 0) {
        Buffer *b = &buf[slot[tensor_storage(n->out[j])->id]];
        add_unit(&b->writers, &b->nwriters, &b->capwriters, u);
        add_unit(&b->users, &b->nusers, &b->capusers, u);
        if (r->order_pos[u] < b->first)
          b->first = r->order_pos[u];
      }
    for (int j = 0; j < n->nin; j++)
      if (n->in[j] && !tensor_is_const(n->in[j]) && slot[tensor_storage(n->in[j])->id] >= 0) {
        Buffer *b = &buf[slot[tensor_storage(n->in[j])->id]];
        add_unit(&b->users, &b->nusers, &b->capusers, u);
      }
  }
  free(slot);
  return buf;
}

static bool check_reuse(Graph *g, const Replay *r) {
  int nb;
  Buffer *buf = collect_buffers(g, r, &nb);
  qsort(buf, (size_t)nb, sizeof *buf, by_first_write);
  Owners owners = {0};
  bool ok = true;
  for (int i = 0; i < nb && ok; i++) {
    /* Written by no unit and not an input: nothing can clash with it. */
    if (buf[i].nwriters == 0 && !buf[i].t->is_input)
      continue;
    ok = ordered_with_owners(g, r, &owners, buf, i);
    take_bytes(&owners, buf[i].lo, buf[i].hi, i);
  }
  for (int i = 0; i < nb; i++) {
    free(buf[i].writers);
    free(buf[i].users);
  }
  free(owners.seg);
  free(buf);
  return ok;
}

bool verify_buffer_reuse(Graph *g) {
  if (g->arena_bytes <= 0)
    return true; /* not planned yet */
  Replay r;
  bool ok = replay(g, deps_build(g, NULL), &r) && check_reuse(g, &r);
  replay_free(&r);
  return ok;
}

/*
 * On several GPUs: a unit reads only tensors on its own GPU, but for a
 * transfer, which reads another's; and a stream's units share a GPU, since
 * a stream belongs to one device. (That each transfer is ordered after its
 * producer is the dependency check's: a transfer is a unit.)
 */
bool verify_placement(Graph *g) {
  int device_of[64];
  for (int s = 0; s < 64; s++)
    device_of[s] = -1;
  for (int k = 0; k < g->sched.norder; k++) {
    Node *n = g->sched.order[k];
    NodeSchedule *ns = node_sched(g, n);
    if (ns->stream >= 0 && ns->stream < 64) {
      if (device_of[ns->stream] >= 0 && device_of[ns->stream] != ns->device) {
        ir_error(g, n, "on device %d, but its stream %d is device %d's", ns->device, ns->stream,
                 device_of[ns->stream]);
        return false;
      }
      device_of[ns->stream] = ns->device;
    }
    if (node_is_transfer(g, n))
      continue;
    for (int i = 0; i < n->nin; i++) {
      Tensor *t = n->in[i];
      if (t && tensor_device(g, t) >= 0 && tensor_device(g, t) != ns->device) {
        ir_error(g, n, "on device %d, reads '%s' on device %d without a transfer", ns->device,
                 t->name, tensor_device(g, t));
        return false;
      }
    }
  }
  return true;
}

bool pass_verify_schedule(Graph *g, const PassOptions *opt, PassContext *ctx) {
  if (!g->sched.order) {
    opc_error("%s: no schedule to verify", g->path);
    return false;
  }
  Replay r;
  bool ok = replay(g, pass_deps(ctx), &r) && check_dependencies(g, &r) && verify_placement(g);
  if (ok && g->arena_bytes > 0)
    ok = check_reuse(g, &r);
  replay_free(&r);
  return ok;
}
