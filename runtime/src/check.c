/*
 * check.c - the checking mode (OPC_CHECK=1): finds pairs of operations that
 * touch the same bytes, at least one writing, with nothing ordering them.
 *
 * Happens-before is tracked with vector clocks. The host and every stream
 * are agents. An op on stream s gets epoch ++clock_s[s]; events snapshot a
 * stream's clock, waits and host synchronisations join clocks, and the
 * host's clock is joined into a stream whenever the host queues work on it.
 * Access P (agent a, epoch e) is ordered before the op with clock C when
 * C[a] >= e.
 *
 * The checks happen when ops are queued, in the host's program order, so the
 * verdict does not depend on thread timing. Memory is shadowed by a sorted
 * array of segments, each with its last write and the reads since then.
 * Accesses ordered before a newer one are dropped: anything ordered after
 * the newer access is ordered after them too, and anything that is not
 * conflicts with the newer access (or was harmless), so no race is lost.
 *
 * Work on one device that touches memory another device allocated is
 * reported too, even where CUDA's peer access would allow it: opc must
 * move data between devices with explicit copies, which are the only ops
 * exempt (Op.transfer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

#define MAX_REPORTS 8

typedef struct Acc {
  uint32_t epoch;
  int agent;
  const char *name;
  const char *unsynced; /* Op.unsynced */
  const char *range;    /* Op.name: the NVTX range, or NULL */
} Acc;

typedef struct Seg {
  uintptr_t lo, hi;
  bool has_write;
  Acc write;
  Acc *reads; /* at most one per agent: a later read of the same agent supersedes */
  int nreads, capreads;
} Seg;

static struct {
  Seg *segs;
  int n, cap;
  int reports;
} shadow;

static void exit_if_raced(void) {
  if (rt_failed()) {
    fflush(NULL);
    _exit(3);
  }
}

void check_fail(void) {
  __atomic_store_n(&rt.raced, true, __ATOMIC_RELEASE);
}

void check_init(void) {
  const char *env = getenv("OPC_CHECK");
  if (!env || !*env || strcmp(env, "0") == 0)
    return;
  rt.host_clock = calloc(MAX_AGENTS, sizeof(uint32_t));
  if (!rt.host_clock) {
    fprintf(stderr, "opc-check: out of memory; checking disabled\n");
    return;
  }
  rt.check = true;
  rt.nagents = 1; /* agent 0 is the host */
  rt.agent_stream_id[0] = -1;
  atexit(exit_if_raced);
}

uint32_t *clock_new(void) {
  return calloc(MAX_AGENTS, sizeof(uint32_t));
}

void clock_join(uint32_t *into, const uint32_t *from) {
  for (int i = 0; i < rt.nagents; i++)
    if (from[i] > into[i])
      into[i] = from[i];
}

void clock_copy(uint32_t *into, const uint32_t *from) {
  memcpy(into, from, MAX_AGENTS * sizeof(uint32_t));
}

void check_stream_created_locked(Stream *s) {
  if (rt.nagents == MAX_AGENTS) {
    fprintf(stderr, "opc-check: more than %d streams; checking disabled\n", MAX_AGENTS - 1);
    rt.check = false;
    return;
  }
  s->clock = clock_new();
  if (!s->clock) {
    fprintf(stderr, "opc-check: out of memory; checking disabled\n");
    rt.check = false;
    return;
  }
  s->agent = rt.nagents++;
  rt.agent_stream_id[s->agent] = s->id;
  rt.agent_device[s->agent] = s->device;
  clock_copy(s->clock, rt.host_clock);
}

void check_enter_locked(Stream *s) {
  clock_join(s->clock, rt.host_clock);
  if (rt_is_legacy(s)) {
    for (int i = 0; i < rt.nstreams; i++) {
      Stream *o = rt.streams[i];
      if (o != s && o->device == s->device && !(o->flags & cudaStreamNonBlocking) && o->clock)
        clock_join(s->clock, o->clock);
    }
  } else if (!(s->flags & cudaStreamNonBlocking)) {
    clock_join(s->clock, rt.legacy[s->device]->clock);
  }
}

void check_host_sync_locked(const uint32_t *clock) {
  if (clock)
    clock_join(rt.host_clock, clock);
}

/* "stream 2", or "stream 2 on device 1" off device 0, for reports. */
typedef struct StreamName {
  char text[48];
} StreamName;

static StreamName stream_name(int agent) {
  StreamName n;
  if (rt.agent_device[agent] == 0)
    snprintf(n.text, sizeof n.text, "stream %d", rt.agent_stream_id[agent]);
  else
    snprintf(n.text, sizeof n.text, "stream %d on device %d", rt.agent_stream_id[agent],
             rt.agent_device[agent]);
  return n;
}

/* ---- the shadow segments ---- */

static bool acc_same(const Acc *a, const Acc *b) {
  return a->agent == b->agent && a->epoch == b->epoch;
}

static bool seg_same_state(const Seg *a, const Seg *b) {
  if (a->has_write != b->has_write || a->nreads != b->nreads)
    return false;
  if (a->has_write && !acc_same(&a->write, &b->write))
    return false;
  for (int i = 0; i < a->nreads; i++)
    if (!acc_same(&a->reads[i], &b->reads[i]))
      return false;
  return true;
}

static void seg_clear(Seg *s) {
  free(s->reads);
  s->reads = NULL;
  s->nreads = s->capreads = 0;
}

/* Makes room for one segment at index i. */
static bool seg_insert(int i) {
  if (shadow.n == shadow.cap) {
    int cap = shadow.cap ? 2 * shadow.cap : 256;
    Seg *segs = realloc(shadow.segs, cap * sizeof *segs);
    if (!segs)
      return false;
    shadow.segs = segs;
    shadow.cap = cap;
  }
  memmove(&shadow.segs[i + 1], &shadow.segs[i], (shadow.n - i) * sizeof(Seg));
  memset(&shadow.segs[i], 0, sizeof(Seg));
  shadow.n++;
  return true;
}

static void seg_remove(int i, int count) {
  if (count == 0) /* nothing to move; segs may still be NULL (a batch-0 program) */
    return;
  for (int k = i; k < i + count; k++)
    seg_clear(&shadow.segs[k]);
  memmove(&shadow.segs[i], &shadow.segs[i + count], (shadow.n - i - count) * sizeof(Seg));
  shadow.n -= count;
}

/* The first segment whose end lies above addr. */
static int seg_lower_bound(uintptr_t addr) {
  int lo = 0, hi = shadow.n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (shadow.segs[mid].hi <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static bool reads_copy(Seg *to, const Seg *from) {
  to->reads = NULL;
  to->nreads = to->capreads = 0;
  if (from->nreads == 0)
    return true;
  to->reads = malloc(from->nreads * sizeof(Acc));
  if (!to->reads)
    return false;
  memcpy(to->reads, from->reads, from->nreads * sizeof(Acc));
  to->nreads = to->capreads = from->nreads;
  return true;
}

/* Ensures no segment straddles addr. */
static bool seg_split(uintptr_t addr) {
  int i = seg_lower_bound(addr);
  if (i == shadow.n || shadow.segs[i].lo >= addr)
    return true;
  if (!seg_insert(i + 1))
    return false;
  Seg *left = &shadow.segs[i], *right = &shadow.segs[i + 1];
  *right = *left;
  if (!reads_copy(right, left))
    return false;
  left->hi = addr;
  right->lo = addr;
  return true;
}

static void seg_merge_around(int first, int last) {
  if (first < 1)
    first = 1;
  for (int i = (last < shadow.n - 1 ? last : shadow.n - 1); i >= first; i--) {
    Seg *a = &shadow.segs[i - 1], *b = &shadow.segs[i];
    if (a->hi == b->lo && seg_same_state(a, b)) {
      a->hi = b->hi;
      seg_remove(i, 1);
    }
  }
}

void check_forget_locked(uintptr_t lo, uintptr_t hi) {
  if (!seg_split(lo) || !seg_split(hi))
    return;
  int i = seg_lower_bound(lo), j = i;
  while (j < shadow.n && shadow.segs[j].hi <= hi)
    j++;
  seg_remove(i, j - i);
}

/* ---- checking one access ---- */

typedef struct Access {
  Acc acc;
  const uint32_t *clock;
  bool write;
  uintptr_t lo, hi;
} Access;

static bool ordered(const Acc *prior, const uint32_t *clock) {
  return clock[prior->agent] >= prior->epoch;
}

/* The first access of s the host has not synchronised with, or NULL. */
static const Acc *unsynced_access(const Seg *s) {
  if (s->has_write && !ordered(&s->write, rt.host_clock))
    return &s->write;
  for (int i = 0; i < s->nreads; i++)
    if (!ordered(&s->reads[i], rt.host_clock))
      return &s->reads[i];
  return NULL;
}

void check_free_locked(uintptr_t lo, uintptr_t hi, const char *api) {
  for (int i = seg_lower_bound(lo); i < shadow.n && shadow.segs[i].lo < hi; i++) {
    const Acc *a = unsynced_access(&shadow.segs[i]);
    if (!a)
      continue;
    check_fail();
    if (shadow.reports++ < MAX_REPORTS)
      fprintf(stderr,
              "opc-check: race: [%#lx, %#lx) freed by %s while node '%s' on %s may "
              "still use it (no synchronisation since)\n",
              (unsigned long)lo, (unsigned long)hi, api, a->name ? a->name : "?",
              stream_name(a->agent).text);
    break;
  }
  check_forget_locked(lo, hi);
}

static void report(const Access *a, const Acc *prior, bool prior_wrote) {
  check_fail();
  if (shadow.reports++ >= MAX_REPORTS)
    return;
  if (prior->unsynced) {
    /* Only a synchronisation covering the legacy stream orders it. */
    fprintf(stderr,
            "opc-check: race: node '%s' (%s) %s [%#lx, %#lx) written by %s%s%s%s on "
            "%s without synchronisation: it may still be in flight after it returns\n",
            a->acc.name ? a->acc.name : "?", stream_name(a->acc.agent).text,
            a->write ? "writes" : "reads", (unsigned long)a->lo, (unsigned long)a->hi,
            prior->unsynced, prior->range ? " in node '" : "", prior->range ? prior->range : "",
            prior->range ? "'" : "", stream_name(prior->agent).text);
    return;
  }
  fprintf(stderr,
          "opc-check: race: node '%s' (%s) %s [%#lx, %#lx) %s by node '%s' (%s) "
          "without ordering\n",
          a->acc.name ? a->acc.name : "?", stream_name(a->acc.agent).text,
          a->write ? "writes" : "reads", (unsigned long)a->lo, (unsigned long)a->hi,
          prior_wrote ? "written" : "read", prior->name ? prior->name : "?",
          stream_name(prior->agent).text);
}

static bool add_read(Seg *s, Acc acc) {
  if (s->nreads == s->capreads) {
    int cap = s->capreads ? 2 * s->capreads : 2;
    Acc *reads = realloc(s->reads, cap * sizeof *reads);
    if (!reads)
      return false;
    s->reads = reads;
    s->capreads = cap;
  }
  s->reads[s->nreads++] = acc;
  return true;
}

/* Checks one segment wholly inside the access; returns false after a race. */
static bool apply(Seg *s, const Access *a) {
  bool clean = true;
  if (s->has_write && !ordered(&s->write, a->clock)) {
    report(a, &s->write, true);
    clean = false;
  }
  if (a->write) {
    for (int i = 0; i < s->nreads && clean; i++) {
      if (!ordered(&s->reads[i], a->clock)) {
        report(a, &s->reads[i], false);
        clean = false;
      }
    }
    seg_clear(s);
    s->has_write = true;
    s->write = a->acc;
    return clean;
  }
  int kept = 0;
  for (int i = 0; i < s->nreads; i++)
    if (!ordered(&s->reads[i], a->clock))
      s->reads[kept++] = s->reads[i];
  s->nreads = kept;
  if (!add_read(s, a->acc))
    check_fail();
  return clean;
}

static bool check_access(const Access *a) {
  if (!seg_split(a->lo) || !seg_split(a->hi)) {
    check_fail();
    return false;
  }
  int i = seg_lower_bound(a->lo), first = i;
  uintptr_t cursor = a->lo;
  bool clean = true;
  while (cursor < a->hi) {
    if (i < shadow.n && shadow.segs[i].lo == cursor) {
      clean &= apply(&shadow.segs[i], a);
      cursor = shadow.segs[i].hi;
      i++;
      continue;
    }
    uintptr_t end = a->hi;
    if (i < shadow.n && shadow.segs[i].lo < end)
      end = shadow.segs[i].lo;
    if (!seg_insert(i)) {
      check_fail();
      return false;
    }
    shadow.segs[i].lo = cursor;
    shadow.segs[i].hi = end;
    clean &= apply(&shadow.segs[i], a);
    cursor = end;
    i++;
  }
  seg_merge_around(first, i);
  return clean;
}

/* Reports op touching memory of another device than its own, once;
 * true if it does. */
static bool crosses_devices(const Stream *s, const Op *op) {
  if (op->transfer)
    return false;
  for (int i = 0; i < op->nspans; i++) {
    const Span *sp = &op->spans[i];
    int owner = sp->hi > sp->lo ? mem_device_locked((const void *)sp->lo) : -1;
    if (owner < 0 || owner == op->device)
      continue;
    check_fail();
    if (shadow.reports++ < MAX_REPORTS)
      fprintf(stderr,
              "opc-check: node '%s' (%s) %s [%#lx, %#lx): access to device %d's memory from "
              "device %d without a transfer (a copy between devices)\n",
              op->name ? op->name : op->api, stream_name(s->agent).text,
              sp->write ? "writes" : "reads", (unsigned long)sp->lo, (unsigned long)sp->hi, owner,
              op->device);
    return true;
  }
  return false;
}

void check_op_locked(Stream *s, Op *op) {
  if (!rt.check || s->agent < 0)
    return;
  if (crosses_devices(s, op))
    return;
  uint32_t epoch = ++s->clock[s->agent];
  Access a = {
    .acc = {.epoch = epoch, .agent = s->agent, .name = op->name ? op->name : op->api,
            .unsynced = op->unsynced, .range = op->name},
    .clock = s->clock,
  };
  /* Reads first: an op that reads and writes the same bytes is no race. */
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < op->nspans; i++) {
      const Span *sp = &op->spans[i];
      if (sp->write != (pass == 1) || sp->hi <= sp->lo)
        continue;
      a.write = sp->write;
      a.lo = sp->lo;
      a.hi = sp->hi;
      if (!check_access(&a))
        return; /* one report per op is enough */
    }
  }
}
