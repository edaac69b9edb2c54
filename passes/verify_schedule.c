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
    if (n->stream < 0 || n->stream >= ns) {
      ir_error(g, n, "schedule puts this node on stream %d of %d", n->stream, ns);
      ok = false;
      break;
    }
    r->order_pos[u] = k;
    int *c = &clock[n->stream * ns];
    for (int w = 0; w < n->nwaits; w++) {
      int ev = n->waits[w];
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
    r->stream_pos[u] = ++count[n->stream];
    c[n->stream] = r->stream_pos[u];
    if (n->record_event >= 0) {
      int ev = n->record_event;
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
  int sa = r->d->unit[a]->stream;
  if (sa == r->d->unit[b]->stream)
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

typedef struct Buffer {
  Tensor *t;
  int64_t lo, hi; /* bytes in the arena */
  int *writers, nwriters;
  int *users, nusers; /* readers and writers */
} Buffer;

static int by_offset(const void *a, const void *b) {
  const Buffer *x = a, *y = b;
  return (x->lo > y->lo) - (x->lo < y->lo);
}

static void add_int(int **arr, int *n, int v) {
  for (int i = 0; i < *n; i++)
    if ((*arr)[i] == v)
      return;
  *arr = realloc(*arr, sizeof(int) * ((size_t)*n + 1));
  (*arr)[(*n)++] = v;
}

/* Every use of `a` is ordered before every write of `b`. */
static bool used_before(const Replay *r, const Buffer *a, const Buffer *b) {
  if (a->t->is_output || b->t->is_input)
    return false;
  for (int i = 0; i < a->nusers; i++)
    for (int j = 0; j < b->nwriters; j++)
      if (a->users[i] != b->writers[j] && !happens_before(r, a->users[i], b->writers[j]))
        return false;
  return true;
}

static bool check_reuse(Graph *g, const Replay *r) {
  const SchedDeps *d = r->d;
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
  Buffer *buf = calloc((size_t)g->ntensors + 1, sizeof(Buffer));
  int *slot = malloc(sizeof(int) * ((size_t)maxid + 1));
  for (int i = 0; i < maxid; i++)
    slot[i] = -1;
  int nb = 0;
  for (int i = 0; i < g->ntensors; i++) {
    Tensor *t = g->tensors[i];
    if (t->alias_of || tensor_is_const(t) || tensor_numel(t) <= 0)
      continue;
    if (!t->producer && !t->is_input)
      continue;
    slot[t->id] = nb;
    buf[nb].t = t;
    buf[nb].lo = t->offset;
    buf[nb].hi = t->offset + tensor_numel(t) * (int64_t)dtype_size(t->dtype);
    nb++;
  }
  for (int u = 0; u < d->n; u++) {
    Node *n = d->unit[u];
    for (int j = 0; j < n->nout; j++)
      if (n->out[j] && slot[tensor_storage(n->out[j])->id] >= 0) {
        Buffer *b = &buf[slot[tensor_storage(n->out[j])->id]];
        add_int(&b->writers, &b->nwriters, u);
        add_int(&b->users, &b->nusers, u);
      }
    for (int j = 0; j < n->nin; j++)
      if (n->in[j] && !tensor_is_const(n->in[j]) && slot[tensor_storage(n->in[j])->id] >= 0)
        add_int(&buf[slot[tensor_storage(n->in[j])->id]].users,
                &buf[slot[tensor_storage(n->in[j])->id]].nusers, u);
  }
  qsort(buf, (size_t)nb, sizeof *buf, by_offset);
  bool ok = true;
  for (int i = 0; i < nb && ok; i++)
    for (int j = i + 1; j < nb && buf[j].lo < buf[i].hi && ok; j++) {
      Buffer *a = &buf[i], *b = &buf[j];
      if (used_before(r, a, b) || used_before(r, b, a))
        continue;
      ir_error(g, a->t->producer, "buffers '%s' and '%s' share arena bytes but may be live at "
               "the same time", a->t->name, b->t->name);
      ok = false;
    }
  for (int i = 0; i < nb; i++) {
    free(buf[i].writers);
    free(buf[i].users);
  }
  free(buf);
  free(slot);
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

bool pass_verify_schedule(Graph *g, const PassOptions *opt, PassContext *ctx) {
  if (!g->sched.order) {
    opc_error("%s: no schedule to verify", g->path);
    return false;
  }
  Replay r;
  bool ok = replay(g, pass_deps(ctx), &r) && check_dependencies(g, &r);
  if (ok && g->arena_bytes > 0)
    ok = check_reuse(g, &r);
  replay_free(&r);
  return ok;
}
