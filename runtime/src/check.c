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
 * An op's ranges of one kind are applied in one sweep over the segments
 * they span, spliced back once: a strided copy touches thousands of ranges.
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
} Access;

typedef struct Range {
  uintptr_t lo, hi;
} Range;

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

/* A race on the bytes of segment s (those both accesses touch). */
static void report(const Access *a, const Seg *s, const Acc *prior, bool prior_wrote) {
  check_fail();
  if (shadow.reports++ >= MAX_REPORTS)
    return;
  if (prior->unsynced) {
    /* Only a synchronisation covering the legacy stream orders it. */
    fprintf(stderr,
            "opc-check: race: node '%s' (%s) %s [%#lx, %#lx) written by %s%s%s%s on "
            "%s without synchronisation: it may still be in flight after it returns\n",
            a->acc.name ? a->acc.name : "?", stream_name(a->acc.agent).text,
            a->write ? "writes" : "reads", (unsigned long)s->lo, (unsigned long)s->hi,
            prior->unsynced, prior->range ? " in node '" : "", prior->range ? prior->range : "",
            prior->range ? "'" : "", stream_name(prior->agent).text);
    return;
  }
  fprintf(stderr,
          "opc-check: race: node '%s' (%s) %s [%#lx, %#lx) %s by node '%s' (%s) "
          "without ordering\n",
          a->acc.name ? a->acc.name : "?", stream_name(a->acc.agent).text,
          a->write ? "writes" : "reads", (unsigned long)s->lo, (unsigned long)s->hi,
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
    report(a, s, &s->write, true);
    clean = false;
  }
  if (a->write) {
    for (int i = 0; i < s->nreads && clean; i++) {
      if (!ordered(&s->reads[i], a->clock)) {
        report(a, s, &s->reads[i], false);
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

/* Room for n segments in *buf. */
static bool reserve(Seg **buf, int *cap, int n) {
  if (n <= *cap)
    return true;
  int want = *cap ? *cap : 256;
  while (want < n)
    want *= 2;
  Seg *grown = realloc(*buf, want * sizeof **buf);
  if (!grown)
    return false;
  *buf = grown;
  *cap = want;
  return true;
}

/* Appends a piece to the window, joined to the one before where their
   states are the same. */
static void push_piece(Seg *out, int *m, Seg *piece) {
  Seg *prev = *m ? &out[*m - 1] : NULL;
  if (prev && prev->hi == piece->lo && seg_same_state(prev, piece)) {
    prev->hi = piece->hi;
    seg_clear(piece);
    return;
  }
  out[(*m)++] = *piece;
}

/*
 * Applies one access to sorted, disjoint ranges r[0..k) in one sweep: the
 * segments from the first range to the last are rebuilt into a window,
 * split where a range begins or ends, and spliced back once. (An op can
 * touch thousands of strided ranges; splitting and merging the shadow
 * array per range moved the whole array each time.)
 */
static bool check_ranges(const Access *a, const Range *r, int k) {
  static Seg *window;
  static int window_cap;
  int first = seg_lower_bound(r[0].lo), last = first;
  while (last < shadow.n && shadow.segs[last].lo < r[k - 1].hi)
    last++;
  /* Each range or segment adds at most two pieces. */
  if (!reserve(&window, &window_cap, 2 * (last - first) + 2 * k + 1)) {
    check_fail();
    return false;
  }
  int i = first, j = 0, m = 0;
  uintptr_t pos = r[0].lo;
  if (first < last && shadow.segs[first].lo < pos)
    pos = shadow.segs[first].lo;
  bool clean = true;
  while (i < last || j < k) {
    Seg *s = i < last ? &shadow.segs[i] : NULL;
    const Range *v = j < k ? &r[j] : NULL;
    bool in_seg = s && s->lo <= pos, in_range = v && v->lo <= pos;
    if (!in_seg && !in_range) {
      pos = s && (!v || s->lo < v->lo) ? s->lo : v->lo;
      continue;
    }
    uintptr_t end = UINTPTR_MAX;
    if (s && (in_seg ? s->hi : s->lo) < end)
      end = in_seg ? s->hi : s->lo;
    if (v && (in_range ? v->hi : v->lo) < end)
      end = in_range ? v->hi : v->lo;
    Seg piece = {.lo = pos, .hi = end};
    if (in_seg && pos == s->lo && end == s->hi) {
      piece = *s; /* the whole segment: its reads move to the piece */
      s->reads = NULL;
      s->nreads = s->capreads = 0;
    } else if (in_seg) {
      piece.has_write = s->has_write;
      piece.write = s->write;
      if (!reads_copy(&piece, s))
        check_fail();
    }
    if (in_range)
      clean &= apply(&piece, a);
    push_piece(window, &m, &piece);
    pos = end;
    if (in_seg && pos >= s->hi)
      i++;
    if (in_range && pos >= v->hi)
      j++;
  }
  /* Splice the window in place of segments [first, last). */
  for (int x = first; x < last; x++)
    seg_clear(&shadow.segs[x]);
  int n = shadow.n - (last - first) + m;
  if (!reserve(&shadow.segs, &shadow.cap, n)) {
    check_fail();
    return false;
  }
  memmove(&shadow.segs[first + m], &shadow.segs[last], (shadow.n - last) * sizeof(Seg));
  memcpy(&shadow.segs[first], window, m * sizeof(Seg));
  shadow.n = n;
  seg_merge_around(first, first + m);
  return clean;
}

static int range_order(const void *x, const void *y) {
  const Range *a = x, *b = y;
  return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* The op's non-empty spans of one kind, sorted, those that touch or
   overlap joined (one access covers them alike); their count, or -1. */
static int gather_ranges(const Op *op, bool write, Range **out, int *cap) {
  int k = 0;
  for (int i = 0; i < op->nspans; i++) {
    const Span *sp = &op->spans[i];
    if (sp->write != write || sp->hi <= sp->lo)
      continue;
    if (k == *cap) {
      int want = *cap ? 2 * *cap : 64;
      Range *grown = realloc(*out, want * sizeof **out);
      if (!grown)
        return -1;
      *out = grown;
      *cap = want;
    }
    (*out)[k++] = (Range){sp->lo, sp->hi};
  }
  qsort(*out, k, sizeof **out, range_order);
  int joined = 0;
  for (int i = 0; i < k; i++) {
    if (joined && (*out)[i].lo <= (*out)[joined - 1].hi) {
      if ((*out)[i].hi > (*out)[joined - 1].hi)
        (*out)[joined - 1].hi = (*out)[i].hi;
    } else {
      (*out)[joined++] = (*out)[i];
    }
  }
  return joined;
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
  static Range *ranges;
  static int ranges_cap;
  /* Reads first: an op that reads and writes the same bytes is no race. */
  for (int pass = 0; pass < 2; pass++) {
    a.write = pass == 1;
    int k = gather_ranges(op, a.write, &ranges, &ranges_cap);
    if (k < 0) {
      check_fail();
      return;
    }
    /* Ranges far apart in the shadow go in separate sweeps, so that the
       segments between them are neither copied nor compared. */
    for (int c0 = 0, c = 1; c <= k; c++) {
      if (c < k && seg_lower_bound(ranges[c].lo) - seg_lower_bound(ranges[c - 1].hi) <= 8)
        continue;
      if (!check_ranges(&a, ranges + c0, c - c0))
        return; /* the op's first race is enough */
      c0 = c;
    }
  }
}
