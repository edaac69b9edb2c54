/*
 * test_mutate.c - mutation tests of the schedule checkers.
 *
 *   test_mutate MODEL.onnx SCHEDULER [--limit N] [--seed S]
 *                [--emit DIR --emit-count K [--emit-gaps]]
 *
 * Compiles MODEL with the pipeline (the scheduler named), then breaks the
 * schedule and the memory plan one mutation at a time and asks each checker
 * about the broken version:
 *
 *   drop-wait      one event wait removed from one unit
 *   hoist-wait     one event wait moved to the unit before on the same
 *                  stream, issued after the record: the dropped wait is
 *                  redundant, another path orders the pair (harmless)
 *   drop-event     one event's record removed, with every wait on it
 *   dangling-wait  one event's record removed, its waits left: a malformed
 *                  schedule that every checker must reject
 *   move-stream    one unit moved to another stream (or a new one), its
 *                  waits and record unchanged
 *   share-live     a storage tensor placed on the bytes of another whose
 *                  lifetime overlaps its own
 *   share-dead     the same onto one whose lifetime does not overlap (mostly
 *                  harmless: the control for false alarms)
 *   share-in-place a unit's output placed on the bytes of one of its inputs
 *
 * Results are counted by what the oracle finds. A share-* mutation whose
 * only fault is that one unit reads one buffer and writes the other (its
 * output on its own input's bytes) is counted as share-in-place, whatever
 * was drawn; one whose faults are that, or else that a graph output is a
 * view of the overwritten storage (read by the caller after the run), as
 * share-output-view. They are classes of their own because
 * verify_buffer_reuse missed both until this test found them, and the
 * run-time race checker cannot see them (docs/reliability.md, "Checkers
 * shown to fail").
 *
 * Whether a mutation creates a race or an overlap is decided by oracle.c,
 * not by the checkers. A checker must report every mutation that creates
 * what it checks for (kill rate 100%) and nothing else (no false alarm).
 * One line per checker and kind is printed as
 *   RESULT model scheduler checker kind tried harmful reported false_alarms
 * for run_mutation.py to add up. Exit status 1 on any miss or false alarm.
 *
 * With --emit, the first K mutations that create a race visible at run time
 * (two units' accesses nothing orders), taken in turn from each kind, are emitted
 * as programs DIR/mut<i>.c, and the unmutated one as DIR/clean.c; their
 * list is DIR/manifest.txt for run_mutation.py, which runs them under the
 * race checker. With --emit-gaps, the mutations emitted are those of the
 * two classes above instead, to see whether the run-time checker notices
 * them. The backend is called directly: the
 * pipeline's verifier would refuse these schedules.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../../backend/backend.h"
#include "../../../frontend/frontend.h"
#include "oracle.h"

typedef enum Kind {
  DROP_WAIT,
  HOIST_WAIT,
  DROP_EVENT,
  DANGLING_WAIT,
  MOVE_STREAM,
  SHARE_LIVE,
  SHARE_DEAD,
  SHARE_IN_PLACE,
  SHARE_OUTPUT_VIEW,
  NKINDS
} Kind;

static const char *const kind_names[NKINDS] = {
    "drop-wait",  "hoist-wait", "drop-event",     "dangling-wait",     "move-stream",
    "share-live", "share-dead", "share-in-place", "share-output-view",
};

typedef struct Mutation {
  Kind kind;
  int unit;      /* issue index (drop-wait, hoist-wait, move-stream) */
  int arg;       /* wait index, event, or new stream; storage index x for share-* */
  int to;        /* hoist-wait: issue index of the unit that waits instead */
  int arg2;      /* storage index y (share-*) */
  int64_t shift; /* bytes into y (share-*) */
} Mutation;

enum { CHECK_DEPS, CHECK_REUSE, CHECK_PASS, NCHECKERS };
static const char *const checker_names[NCHECKERS] = {
    "verify_schedule_deps", "verify_buffer_reuse", "pass_verify_schedule",
};

typedef struct Tally {
  int tried, harmful, reported, false_alarms;
} Tally;

/* Everything a mutation may change, to put back afterwards. */
typedef struct Saved {
  int *stream, *record_event, *nwaits;
  int **waits;
  int64_t *offset;
  int nstreams;
} Saved;

typedef struct Run {
  Graph *g;
  PassOptions opt;
  PassContext *ctx;
  Oracle oracle;
  Saved saved;
  uint64_t rng;
  int limit;
  Tally tally[NCHECKERS][NKINDS];
  int failures;
  bool emit_gaps;  /* emit the known gaps instead of races */
  Mutation *emit; /* run-time candidates */
  int nemit;
  const char *model, *scheduler;
} Run;

/* ------------------------------------------------------------ utilities */

/* splitmix64: the same samples on every machine for a given seed. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static int random_below(Run *r, int n) { return (int)(next_random(&r->rng) % (uint64_t)n); }

/* The checkers report through ir_error on stderr: silence them while they
   run on mutations, so that the output shows only the test's findings. */
static int quiet_stderr(void) {
  fflush(stderr);
  int saved = dup(2);
  int devnull = open("/dev/null", O_WRONLY);
  dup2(devnull, 2);
  close(devnull);
  return saved;
}

static void restore_stderr(int saved) {
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
}

/* ------------------------------------------------------ save and restore */

static void save_state(Run *r) {
  Graph *g = r->g;
  Saved *s = &r->saved;
  s->stream = malloc(sizeof(int) * (size_t)g->nnodes);
  s->record_event = malloc(sizeof(int) * (size_t)g->nnodes);
  s->nwaits = malloc(sizeof(int) * (size_t)g->nnodes);
  s->waits = malloc(sizeof(int *) * (size_t)g->nnodes);
  s->offset = malloc(sizeof(int64_t) * (size_t)g->ntensors);
  for (int i = 0; i < g->nnodes; i++) {
    s->stream[i] = node_sched(g, g->nodes[i])->stream;
    s->record_event[i] = node_sched(g, g->nodes[i])->record_event;
    s->nwaits[i] = node_sched(g, g->nodes[i])->nwaits;
    s->waits[i] = node_sched(g, g->nodes[i])->waits;
  }
  for (int i = 0; i < g->ntensors; i++)
    s->offset[i] = g->tensors[i]->offset;
  s->nstreams = g->sched.nstreams;
}

static void restore_state(Run *r) {
  Graph *g = r->g;
  Saved *s = &r->saved;
  for (int i = 0; i < g->nnodes; i++) {
    node_sched(g, g->nodes[i])->stream = s->stream[i];
    node_sched(g, g->nodes[i])->record_event = s->record_event[i];
    node_sched(g, g->nodes[i])->nwaits = s->nwaits[i];
    node_sched(g, g->nodes[i])->waits = s->waits[i];
  }
  for (int i = 0; i < g->ntensors; i++)
    g->tensors[i]->offset = s->offset[i];
  g->sched.nstreams = s->nstreams;
}

/* -------------------------------------------------------------- mutating */

/* n's waits without those equal to `event` (or without index `skip`). */
static void remove_waits(Graph *g, Node *n, int event, int skip) {
  NodeSchedule *ns = node_sched(g, n);
  int *w = arena_alloc(g->arena, sizeof(int) * ((size_t)ns->nwaits + 1));
  int k = 0;
  for (int i = 0; i < ns->nwaits; i++)
    if (i != skip && ns->waits[i] != event)
      w[k++] = ns->waits[i];
  ns->waits = w;
  ns->nwaits = k;
}

static Node *recorder_of(Graph *g, int event) {
  for (int k = 0; k < g->sched.norder; k++)
    if (node_sched(g, g->sched.order[k])->record_event == event)
      return g->sched.order[k];
  return NULL;
}

static void apply(Run *r, const Mutation *m) {
  Graph *g = r->g;
  Node *n = m->unit >= 0 ? g->sched.order[m->unit] : NULL;
  switch (m->kind) {
  case DROP_WAIT:
    remove_waits(g, n, -1, m->arg);
    break;
  case HOIST_WAIT:
    node_add_wait(g, g->sched.order[m->to], node_sched(g, n)->waits[m->arg]);
    remove_waits(g, n, -1, m->arg);
    break;
  case DROP_EVENT:
    for (int k = 0; k < g->sched.norder; k++)
      remove_waits(g, g->sched.order[k], m->arg, -1);
    node_sched(g, recorder_of(g, m->arg))->record_event = -1;
    break;
  case DANGLING_WAIT:
    node_sched(g, recorder_of(g, m->arg))->record_event = -1;
    break;
  case MOVE_STREAM:
    node_sched(g, n)->stream = m->arg;
    if (m->arg >= g->sched.nstreams)
      g->sched.nstreams = m->arg + 1;
    break;
  case SHARE_LIVE:
  case SHARE_DEAD:
  case SHARE_IN_PLACE:
  case SHARE_OUTPUT_VIEW: {
    Tensor *x = r->oracle.st[m->arg].t, *y = r->oracle.st[m->arg2].t;
    x->offset = y->offset + m->shift;
    /* views report their base's place, as plan_memory leaves them */
    for (int i = 0; i < g->ntensors; i++)
      if (g->tensors[i]->alias_of == x)
        g->tensors[i]->offset = x->offset;
    break;
  }
  default:
    break;
  }
}

static void describe(Run *r, const Mutation *m, char *buf, size_t size) {
  Graph *g = r->g;
  switch (m->kind) {
  case DROP_WAIT:
    snprintf(buf, size, "%s: '%s' no longer waits on event %d", kind_names[m->kind],
             g->sched.order[m->unit]->name, node_sched(g, g->sched.order[m->unit])->waits[m->arg]);
    break;
  case HOIST_WAIT:
    snprintf(buf, size, "%s: event %d waited on by '%s' instead of '%s'", kind_names[m->kind],
             node_sched(g, g->sched.order[m->unit])->waits[m->arg], g->sched.order[m->to]->name,
             g->sched.order[m->unit]->name);
    break;
  case DROP_EVENT:
  case DANGLING_WAIT:
    snprintf(buf, size, "%s: event %d (recorded after '%s')", kind_names[m->kind], m->arg,
             recorder_of(g, m->arg)->name);
    break;
  case MOVE_STREAM:
    snprintf(buf, size, "%s: '%s' from stream %d to %d", kind_names[m->kind],
             g->sched.order[m->unit]->name, node_sched(g, g->sched.order[m->unit])->stream, m->arg);
    break;
  default:
    snprintf(buf, size, "%s: '%s' placed at byte %lld of '%s'", kind_names[m->kind],
             r->oracle.st[m->arg].t->name, (long long)m->shift, r->oracle.st[m->arg2].t->name);
    break;
  }
}

/* ------------------------------------------------------------- checking */

/* A new context for each call of pass_verify_schedule, so that nothing it
   may cache about the schedule outlives the mutation it was computed for
   (the unit graph itself does not change: mutations touch no node). */
static PassContext *fresh_context(Run *r) { return pass_context_new(r->g, &r->opt); }

static void tally(Run *r, int checker, Kind kind, bool harmful, bool reported,
                  const char *what, const Verdict *v) {
  Tally *t = &r->tally[checker][kind];
  t->tried++;
  t->harmful += harmful;
  t->reported += harmful && reported;
  t->false_alarms += !harmful && reported;
  if (harmful == reported)
    return;
  printf("%s %s: %s %s %s (oracle: %s)\n", r->model, r->scheduler, checker_names[checker],
         harmful ? "MISSED" : "FALSE ALARM on", what, harmful ? v->why : "harmless");
  r->failures++;
}

/* Asks the oracle and the three checkers about the current (mutated)
   state; returns the class the mutation is counted in. */
static Kind judge(Run *r, const Mutation *m, const char *what, Verdict *v) {
  oracle_judge(&r->oracle, v);
  int saved = quiet_stderr();
  bool deps = verify_schedule_deps(r->g);
  bool reuse = verify_buffer_reuse(r->g);
  bool pass = pass_verify_schedule(r->g, &r->opt, fresh_context(r));
  restore_stderr(saved);
  /* A wait on an event never recorded is malformed whatever it orders. */
  bool malformed = m->kind == DANGLING_WAIT;
  Kind kind = m->kind;
  if (kind >= SHARE_LIVE) { /* the share-* kinds */
    bool gap = v->overlaps > 0 && !v->dep_races;
    if (gap && v->in_place == v->overlaps)
      kind = SHARE_IN_PLACE;
    else if (gap && v->output_view == v->overlaps)
      kind = SHARE_OUTPUT_VIEW;
    else if (kind == SHARE_IN_PLACE && v->overlaps)
      kind = SHARE_LIVE;
  }
  tally(r, CHECK_DEPS, kind, malformed || v->dep_races > 0, !deps, what, v);
  tally(r, CHECK_REUSE, kind, malformed || v->overlaps > 0, !reuse, what, v);
  tally(r, CHECK_PASS, kind, malformed || v->dep_races + v->overlaps > 0, !pass, what, v);
  return kind;
}

static bool shows_at_run_time(const Mutation *m, const Verdict *v) {
  if (m->kind == DANGLING_WAIT || m->kind == SHARE_DEAD)
    return false;
  return v->dep_races > 0 || v->unordered > 0;
}

static void try_mutation(Run *r, const Mutation *m) {
  char what[512];
  describe(r, m, what, sizeof what);
  apply(r, m);
  Verdict v;
  Kind cls = judge(r, m, what, &v);
  restore_state(r);
  /* a move to a new stream would need one more stream in the program */
  bool new_stream = m->kind == MOVE_STREAM && m->arg >= r->saved.nstreams;
  bool gap = cls == SHARE_IN_PLACE || cls == SHARE_OUTPUT_VIEW;
  if (new_stream || (r->emit_gaps ? !gap : !shows_at_run_time(m, &v) || gap))
    return;
  r->emit = realloc(r->emit, sizeof(Mutation) * ((size_t)r->nemit + 1));
  r->emit[r->nemit] = *m;
  /* emitted by class: a gap is emitted under its class */
  r->emit[r->nemit++].kind = r->emit_gaps ? cls : m->kind;
}

/* ------------------------------------------------------------ candidates */

/* Tries every candidate when there are at most `limit`, else `limit` of
   them drawn without repetition. */
static void try_sample(Run *r, Mutation *cand, int n) {
  for (int i = 0; i < n && i < r->limit; i++) {
    int j = i + random_below(r, n - i);
    Mutation t = cand[i];
    cand[i] = cand[j];
    cand[j] = t;
    try_mutation(r, &cand[i]);
  }
}

static void push(Mutation **arr, int *n, Mutation m) {
  *arr = realloc(*arr, sizeof(Mutation) * ((size_t)*n + 1));
  (*arr)[(*n)++] = m;
}

/* Draws repeat: the same placement is tried once. */
static void push_new(Mutation **arr, int *n, Mutation m) {
  for (int i = 0; i < *n; i++) {
    const Mutation *o = &(*arr)[i];
    if (o->kind == m.kind && o->arg == m.arg && o->arg2 == m.arg2 && o->shift == m.shift)
      return;
  }
  push(arr, n, m);
}

/* Issue index of the unit before order[k] on its stream, or -1. */
static int previous_on_stream(const Graph *g, int k) {
  const Schedule *s = &g->sched;
  for (int i = k - 1; i >= 0; i--)
    if (node_sched(g, s->order[i])->stream == node_sched(g, s->order[k])->stream)
      return i;
  return -1;
}

static void mutate_sync(Run *r) {
  Schedule *s = &r->g->sched;
  Mutation *waits = NULL, *hoists = NULL, *events = NULL, *dangling = NULL, *moves = NULL;
  int nw = 0, nh = 0, ne = 0, nd = 0, nm = 0;
  int *recorded_at = malloc(sizeof(int) * ((size_t)s->nevents + 1));
  for (int e = 0; e < s->nevents; e++)
    recorded_at[e] = s->norder; /* never: no hoist */
  for (int k = 0; k < s->norder; k++)
    if (node_sched(r->g, s->order[k])->record_event >= 0)
      recorded_at[node_sched(r->g, s->order[k])->record_event] = k;
  for (int k = 0; k < s->norder; k++) {
    Node *n = s->order[k];
    NodeSchedule *ns = node_sched(r->g, n);
    int before = previous_on_stream(r->g, k);
    for (int w = 0; w < ns->nwaits; w++) {
      push(&waits, &nw, (Mutation){.kind = DROP_WAIT, .unit = k, .arg = w});
      if (before > recorded_at[ns->waits[w]])
        push(&hoists, &nh, (Mutation){.kind = HOIST_WAIT, .unit = k, .arg = w, .to = before});
    }
    if (ns->record_event >= 0) {
      push(&events, &ne, (Mutation){.kind = DROP_EVENT, .unit = -1, .arg = ns->record_event});
      push(&dangling, &nd, (Mutation){.kind = DANGLING_WAIT, .unit = -1, .arg = ns->record_event});
    }
    /* every other stream, and one new stream */
    for (int t = 0; t <= s->nstreams; t++)
      if (t != ns->stream)
        push(&moves, &nm, (Mutation){.kind = MOVE_STREAM, .unit = k, .arg = t});
  }
  try_sample(r, waits, nw);
  try_sample(r, hoists, nh);
  try_sample(r, events, ne);
  try_sample(r, dangling, nd);
  try_sample(r, moves, nm);
  free(recorded_at);
  free(waits);
  free(hoists);
  free(events);
  free(dangling);
  free(moves);
}

/* The oracle's index of t's storage, or -1 (a constant, or not in the arena). */
static int storage_index(const Oracle *o, Tensor *t) {
  if (!t)
    return -1;
  for (int i = 0; i < o->nst; i++)
    if (o->st[i].t == tensor_storage(t))
      return i;
  return -1;
}

static bool lifetimes_overlap(const Oracle *o, int x, int y) {
  return !oracle_done_before(o, &o->st[x], &o->st[y]) &&
         !oracle_done_before(o, &o->st[y], &o->st[x]);
}

/*
 * Pairs of storages drawn at random, sorted by whether their lifetimes
 * overlap under the unmutated schedule, until each kind has `limit` (or
 * enough draws were made). x goes to y's start, or to a random 256-byte
 * step inside y. Then `limit` units, each with one output put on one of
 * its inputs.
 */
static void mutate_plan(Run *r) {
  Oracle *o = &r->oracle;
  Verdict v;
  oracle_judge(o, &v); /* happens-before of the unmutated schedule */
  Mutation *live = NULL, *dead = NULL;
  int nl = 0, nd = 0;
  for (int draw = 0; draw < 200 * r->limit && (nl < r->limit || nd < r->limit); draw++) {
    int x = random_below(r, o->nst), y = random_below(r, o->nst);
    int64_t ysize = storage_bytes(o->st[y].t);
    if (x == y || storage_bytes(o->st[x].t) == 0 || ysize == 0)
      continue;
    int64_t steps = (ysize + 255) / 256;
    int64_t shift = random_below(r, 2) ? 0 : (int64_t)random_below(r, (int)steps) * 256;
    Mutation m = {.kind = SHARE_LIVE, .unit = -1, .arg = x, .arg2 = y, .shift = shift};
    if (lifetimes_overlap(o, x, y)) {
      if (nl < r->limit)
        push_new(&live, &nl, m);
    } else if (nd < r->limit) {
      m.kind = SHARE_DEAD;
      push_new(&dead, &nd, m);
    }
  }
  int nu = r->g->sched.norder;
  for (int draw = 0; draw < 20 * r->limit && nl < 2 * r->limit; draw++) {
    Node *n = r->g->sched.order[random_below(r, nu)];
    if (n->nin == 0 || n->nout == 0)
      continue;
    int x = storage_index(o, n->out[random_below(r, n->nout)]);
    int y = storage_index(o, n->in[random_below(r, n->nin)]);
    if (x >= 0 && y >= 0 && x != y)
      push_new(&live, &nl, (Mutation){.kind = SHARE_IN_PLACE, .unit = -1, .arg = x, .arg2 = y});
  }
  for (int i = 0; i < nl; i++)
    try_mutation(r, &live[i]);
  for (int i = 0; i < nd; i++)
    try_mutation(r, &dead[i]);
  free(live);
  free(dead);
}

/* --------------------------------------------------------------- emitting */

static bool emit_to(Run *r, const char *dir, const char *name) {
  char c[4096], h[4096], w[4096];
  snprintf(c, sizeof c, "%s/%s.c", dir, name);
  snprintf(h, sizeof h, "%s/%s.h", dir, name);
  snprintf(w, sizeof w, "%s/%s.weights", dir, name);
  EmitOptions e = {.c_path = c, .h_path = h, .weights_path = w, .prefix = "net",
                   .cuda_graph = true};
  return emit_program(r->g, &e);
}

static const Mutation *nth_of_kind(const Run *r, Kind kind, int nth) {
  for (int i = 0; i < r->nemit; i++)
    if (r->emit[i].kind == kind && nth-- == 0)
      return &r->emit[i];
  return NULL;
}

/* The first `count` run-time candidates, taken in turn from each kind in
   this order (so that a small count still covers the plan as well as the
   synchronisation). */
static const Kind emit_order[] = {DROP_WAIT, SHARE_LIVE, MOVE_STREAM, DROP_EVENT};
static const Kind emit_gap_order[] = {SHARE_IN_PLACE, SHARE_OUTPUT_VIEW};

static bool emit_programs(Run *r, const char *dir, int count) {
  char path[4096];
  snprintf(path, sizeof path, "%s/manifest.txt", dir);
  FILE *f = fopen(path, "w");
  if (!f || !emit_to(r, dir, "clean")) {
    fprintf(stderr, "cannot write into %s\n", dir);
    return false;
  }
  fprintf(f, "clean clean unmutated\n");
  int done = 0;
  for (int round = 0; done < count; round++) {
    int found = 0;
    const Kind *order = r->emit_gaps ? emit_gap_order : emit_order;
    int norder = r->emit_gaps ? 2 : (int)(sizeof emit_order / sizeof *emit_order);
    for (int k = 0; k < norder && done < count; k++) {
      const Mutation *m = nth_of_kind(r, order[k], round);
      if (!m)
        continue;
      found++;
      char name[64], what[512];
      snprintf(name, sizeof name, "mut%d", done++);
      describe(r, m, what, sizeof what);
      apply(r, m);
      bool ok = emit_to(r, dir, name);
      restore_state(r);
      if (!ok)
        return false;
      fprintf(f, "%s %s %s\n", name, r->emit_gaps ? "gap" : "race", what);
    }
    if (!found)
      break;
  }
  fclose(f);
  return true;
}

/* ------------------------------------------------------------------ main */

static void print_results(Run *r) {
  for (int c = 0; c < NCHECKERS; c++)
    for (int k = 0; k < NKINDS; k++) {
      Tally *t = &r->tally[c][k];
      printf("RESULT %s %s %s %s %d %d %d %d\n", r->model, r->scheduler, checker_names[c],
             kind_names[k], t->tried, t->harmful, t->reported, t->false_alarms);
    }
}

static bool compile_model(Run *r, const char *path) {
  ImportOptions import = {0};
  r->g = onnx_import(path, &import);
  if (!r->g)
    return false;
  r->opt = (PassOptions){.opt_level = 1, .scheduler = r->scheduler};
  r->ctx = pass_context_new(r->g, &r->opt);
  return run_pipeline(r->g, &r->opt, r->ctx);
}

/* The unmutated schedule and plan: the oracle and every checker agree. */
static bool check_unmutated(Run *r) {
  Verdict v;
  oracle_judge(&r->oracle, &v);
  if (v.dep_races || v.overlaps) {
    printf("%s %s: the oracle finds the UNMUTATED schedule wrong: %s\n", r->model, r->scheduler,
           v.why);
    return false;
  }
  bool ok = verify_schedule_deps(r->g) && verify_buffer_reuse(r->g) &&
            pass_verify_schedule(r->g, &r->opt, fresh_context(r));
  if (!ok)
    printf("%s %s: a checker rejects the UNMUTATED schedule\n", r->model, r->scheduler);
  return ok;
}

static void usage(void) {
  fprintf(stderr, "usage: test_mutate MODEL.onnx SCHEDULER [--limit N] [--seed S] "
                  "[--emit DIR --emit-count K [--emit-gaps]]\n");
}

/* Reads the options after MODEL and SCHEDULER; false on an unknown one. */
static bool parse_options(Run *r, int argc, char **argv, const char **emit_dir, int *emit_count) {
  for (int i = 3; i < argc; i++) {
    const char *opt = argv[i];
    if (strcmp(opt, "--emit-gaps") == 0) {
      r->emit_gaps = true;
      continue;
    }
    if (i + 1 >= argc)
      return false;
    const char *value = argv[++i];
    if (strcmp(opt, "--limit") == 0)
      r->limit = atoi(value);
    else if (strcmp(opt, "--seed") == 0)
      r->rng = strtoull(value, NULL, 0);
    else if (strcmp(opt, "--emit") == 0)
      *emit_dir = value;
    else if (strcmp(opt, "--emit-count") == 0)
      *emit_count = atoi(value);
    else
      return false;
  }
  return true;
}

static void free_run(Run *r) {
  free(r->saved.stream);
  free(r->saved.record_event);
  free(r->saved.nwaits);
  free(r->saved.waits);
  free(r->saved.offset);
  free(r->emit);
  oracle_free(&r->oracle);
  graph_free(r->g);
}

int main(int argc, char **argv) {
  Run r = {.limit = 40, .rng = 20};
  const char *emit_dir = NULL;
  int emit_count = 0;
  if (argc < 3 || !parse_options(&r, argc, argv, &emit_dir, &emit_count)) {
    usage();
    return 2;
  }
  const char *slash = strrchr(argv[1], '/');
  r.model = slash ? slash + 1 : argv[1];
  r.scheduler = argv[2];
  if (!compile_model(&r, argv[1])) {
    if (r.g)
      graph_free(r.g);
    return 2;
  }
  oracle_init(&r.oracle, r.g);
  save_state(&r);
  int status = 0;
  if (!check_unmutated(&r)) {
    status = 1;
  } else {
    mutate_sync(&r);
    mutate_plan(&r);
    print_results(&r);
    if (emit_dir && !emit_programs(&r, emit_dir, emit_count))
      status = 2;
    else if (r.failures)
      status = 1;
  }
  free_run(&r);
  return status;
}
