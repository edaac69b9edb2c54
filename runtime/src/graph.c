/*
 * graph.c - stream capture and CUDA graphs.
 *
 * While a stream is captured, what is submitted to it is appended to the
 * capture as entries, in the host's order: work (an op), record (an event
 * record, which becomes a numbered slot) and wait (a wait on a slot). A
 * stream that waits on an event recorded in the capture joins the capture.
 * Replaying the entries in the same order on the same streams reproduces
 * the same ordering, and the ops are checked again as they are queued.
 *
 * To find unjoined streams, the capture keeps for each stream how many work
 * entries of every other stream it is ordered after; at the end the origin
 * must be ordered after all of them.
 *
 * What a capture forbids follows CUDA. Calls that are "potentially unsafe"
 * (cudaMalloc, synchronous copies, handle creation, ...) fail, and
 * invalidate the capture, when the calling thread's capture interaction
 * mode says so (cudaThreadExchangeStreamCaptureMode): its own capture
 * unless begun relaxed, and in the default global mode any other thread's
 * global capture too. Touching the legacy stream fails while any capture
 * holds a blocking stream, since the legacy stream is ordered with those.
 *
 * A capture may span devices: a stream of another device that waits on an
 * event recorded in the capture joins it, as cudaStreamWaitEvent accepts
 * an event of another device. cudaGraphInstantiate documents that only
 * graphs instantiated for device launch must have all their nodes on one
 * device, so such a graph instantiates and launches from the host; each
 * op keeps its device (Op.device) in replays.
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define MAX_CAP_STREAMS 32

typedef enum { ENTRY_WORK, ENTRY_RECORD, ENTRY_WAIT } EntryKind;

typedef struct Entry {
  EntryKind kind;
  int stream; /* index into the stream list; 0 is the origin */
  Op *op;     /* ENTRY_WORK */
  int slot;   /* ENTRY_RECORD, ENTRY_WAIT */
} Entry;

typedef int Known[MAX_CAP_STREAMS];

struct Capture {
  enum cudaStreamCaptureMode mode;
  pthread_t owner; /* the thread that began it */
  Capture *next;   /* the list of captures in progress */
  bool invalid;
  Stream *streams[MAX_CAP_STREAMS];
  int nstreams;
  Known known[MAX_CAP_STREAMS]; /* known[i][j]: work entries of j ordered before i's next */
  Known *slot_known;
  int nslots, capslots;
  Entry *entries;
  int nentries, capentries;
  Event **events; /* events recorded in the capture, to unbind at the end */
  int nevents, capevents;
};

struct CUgraph_st {
  Entry *entries;
  int nentries;
  Stream *streams[MAX_CAP_STREAMS];
  int nstreams;
  int nslots;
};

struct CUgraphExec_st {
  struct CUgraph_st g; /* its own references to ops and streams */
  Fence *slot_fence;
  uint32_t **slot_clock; /* checking mode */
};

static bool grow(void **p, int *cap, int need, size_t elem) {
  if (need <= *cap)
    return true;
  int n = *cap ? 2 * *cap : 16;
  while (n < need)
    n *= 2;
  void *q = realloc(*p, n * elem);
  if (!q)
    return false;
  *p = q;
  *cap = n;
  return true;
}

static Capture *live; /* captures in progress */
static _Thread_local enum cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;

void capture_invalidate_locked(Capture *c) {
  c->invalid = true;
}

void capture_invalidate_all_locked(void) {
  for (Capture *c = live; c; c = c->next)
    c->invalid = true;
}

/* Whether c bars the calling thread from potentially unsafe calls. */
static bool bars_this_thread(const Capture *c) {
  if (thread_mode == cudaStreamCaptureModeRelaxed)
    return false;
  if (pthread_equal(c->owner, pthread_self()))
    return c->mode != cudaStreamCaptureModeRelaxed;
  return c->mode == cudaStreamCaptureModeGlobal && thread_mode == cudaStreamCaptureModeGlobal;
}

bool capture_forbids_unsafe_locked(void) {
  bool barred = false;
  for (Capture *c = live; c; c = c->next) {
    if (bars_this_thread(c)) {
      c->invalid = true;
      barred = true;
    }
  }
  return barred;
}

bool rt_capture_forbids(void) {
  pthread_mutex_lock(&rt.lock);
  bool barred = capture_forbids_unsafe_locked();
  pthread_mutex_unlock(&rt.lock);
  return barred;
}

bool capture_blocks_legacy_locked(int device, bool invalidate) {
  bool blocked = false;
  for (Capture *c = live; c; c = c->next) {
    for (int i = 0; i < c->nstreams; i++) {
      const Stream *s = c->streams[i];
      if (s->device == device && !(s->flags & cudaStreamNonBlocking)) {
        c->invalid |= invalidate;
        blocked = true;
        break;
      }
    }
  }
  return blocked;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!mode || *mode < cudaStreamCaptureModeGlobal || *mode > cudaStreamCaptureModeRelaxed)
    return rt_error(cudaErrorInvalidValue);
  enum cudaStreamCaptureMode old = thread_mode;
  thread_mode = *mode;
  *mode = old;
  return cudaSuccess;
}

static bool add_entry(Capture *c, Entry e) {
  if (!grow((void **)&c->entries, &c->capentries, c->nentries + 1, sizeof(Entry))) {
    c->invalid = true;
    return false;
  }
  c->entries[c->nentries++] = e;
  return true;
}

void capture_add_op_locked(Stream *s, Op *op) {
  Capture *c = s->capture;
  if (c->invalid || !add_entry(c, (Entry){.kind = ENTRY_WORK, .stream = s->cap_index, .op = op})) {
    op_unref(op);
    return;
  }
  c->known[s->cap_index][s->cap_index]++;
}

cudaError_t capture_record_locked(Stream *s, Event *e) {
  Capture *c = s->capture;
  if (!grow((void **)&c->slot_known, &c->capslots, c->nslots + 1, sizeof(Known)) ||
      !grow((void **)&c->events, &c->capevents, c->nevents + 1, sizeof(Event *))) {
    c->invalid = true;
    return cudaErrorMemoryAllocation;
  }
  int slot = c->nslots++;
  memcpy(c->slot_known[slot], c->known[s->cap_index], sizeof(Known));
  if (!add_entry(c, (Entry){.kind = ENTRY_RECORD, .stream = s->cap_index, .slot = slot}))
    return cudaErrorMemoryAllocation;
  e->refs++;
  c->events[c->nevents++] = e;
  e->capture = c;
  e->slot = slot;
  return cudaSuccess;
}

cudaError_t capture_wait_locked(Stream *s, Event *e) {
  Capture *c = e->capture;
  if (s->capture && s->capture != c) {
    capture_invalidate_locked(s->capture);
    return cudaErrorStreamCaptureIsolation;
  }
  if (!s->capture) {
    /* The waiting stream is forked into the capture. */
    if (rt_is_legacy(s))
      return cudaErrorStreamCaptureImplicit;
    if (c->nstreams == MAX_CAP_STREAMS) {
      c->invalid = true;
      return cudaErrorNotSupported;
    }
    s->capture = c;
    s->cap_index = c->nstreams;
    c->streams[c->nstreams++] = s;
    stream_ref_locked(s);
    memset(c->known[s->cap_index], 0, sizeof(Known));
  }
  int *mine = c->known[s->cap_index];
  const int *theirs = c->slot_known[e->slot];
  for (int j = 0; j < c->nstreams; j++)
    if (theirs[j] > mine[j])
      mine[j] = theirs[j];
  if (!add_entry(c, (Entry){.kind = ENTRY_WAIT, .stream = s->cap_index, .slot = e->slot}))
    return cudaErrorMemoryAllocation;
  return cudaSuccess;
}

static void end_capture_locked(Capture *c) {
  for (Capture **p = &live; *p; p = &(*p)->next) {
    if (*p == c) {
      *p = c->next;
      break;
    }
  }
  for (int i = 0; i < c->nstreams; i++) {
    c->streams[i]->capture = NULL;
    stream_unref_locked(c->streams[i]);
  }
  for (int i = 0; i < c->nevents; i++) {
    Event *e = c->events[i];
    if (e->capture == c)
      e->capture = NULL;
    event_unref_locked(e);
  }
  rt.ncaptures--;
}

static void free_entries(Entry *entries, int n) {
  for (int i = 0; i < n; i++)
    if (entries[i].kind == ENTRY_WORK && entries[i].op)
      op_unref(entries[i].op);
  free(entries);
}

static void free_capture(Capture *c, bool keep_entries) {
  if (!keep_entries)
    free_entries(c->entries, c->nentries);
  free(c->slot_known);
  free(c->events);
  free(c);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (mode < cudaStreamCaptureModeGlobal || mode > cudaStreamCaptureModeRelaxed)
    return rt_error(cudaErrorInvalidValue);
  Stream *s = rt_stream(stream);
  if (rt_is_legacy(s))
    return rt_error(cudaErrorStreamCaptureUnsupported);
  Capture *c = calloc(1, sizeof *c);
  if (!c)
    return rt_error(cudaErrorMemoryAllocation);
  c->mode = mode;
  c->owner = pthread_self();
  pthread_mutex_lock(&rt.lock);
  if (s->capture) {
    pthread_mutex_unlock(&rt.lock);
    free(c);
    return rt_error(cudaErrorIllegalState);
  }
  c->next = live;
  live = c;
  s->capture = c;
  s->cap_index = 0;
  c->streams[c->nstreams++] = s;
  stream_ref_locked(s);
  rt.ncaptures++;
  pthread_mutex_unlock(&rt.lock);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!pGraph)
    return rt_error(cudaErrorInvalidValue);
  *pGraph = NULL;
  Stream *s = rt_stream(stream);
  pthread_mutex_lock(&rt.lock);
  Capture *c = s->capture;
  if (!c || c->streams[0] != s) {
    pthread_mutex_unlock(&rt.lock);
    return rt_error(c ? cudaErrorStreamCaptureUnmatched : cudaErrorIllegalState);
  }
  if (c->mode != cudaStreamCaptureModeRelaxed && !pthread_equal(c->owner, pthread_self())) {
    pthread_mutex_unlock(&rt.lock);
    return rt_error(cudaErrorStreamCaptureWrongThread);
  }
  for (int j = 1; j < c->nstreams && !err; j++)
    if (c->known[0][j] < c->known[j][j])
      err = cudaErrorStreamCaptureUnjoined;
  if (c->invalid && !err)
    err = cudaErrorStreamCaptureInvalidated;
  struct CUgraph_st *g = NULL;
  if (!err && !(g = calloc(1, sizeof *g)))
    err = cudaErrorMemoryAllocation;
  if (g) {
    g->entries = c->entries;
    g->nentries = c->nentries;
    g->nslots = c->nslots;
    g->nstreams = c->nstreams;
    for (int i = 0; i < c->nstreams; i++) {
      g->streams[i] = c->streams[i];
      stream_ref_locked(c->streams[i]);
    }
  }
  end_capture_locked(c);
  pthread_mutex_unlock(&rt.lock);
  free_capture(c, g != NULL);
  if (err)
    return rt_error(err);
  *pGraph = g;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!status)
    return rt_error(cudaErrorInvalidValue);
  Stream *s = rt_stream(stream);
  pthread_mutex_lock(&rt.lock);
  /* The legacy stream encompasses captured blocking streams; asking does
   * not invalidate them. */
  if (rt_is_legacy(s) && capture_blocks_legacy_locked(s->device, false))
    err = cudaErrorStreamCaptureImplicit;
  else if (!s->capture)
    *status = cudaStreamCaptureStatusNone;
  else
    *status = s->capture->invalid ? cudaStreamCaptureStatusInvalidated
                                  : cudaStreamCaptureStatusActive;
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

static void graph_release_locked(struct CUgraph_st *g) {
  for (int i = 0; i < g->nstreams; i++)
    stream_unref_locked(g->streams[i]);
  free_entries(g->entries, g->nentries);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!graph)
    return rt_error(cudaErrorInvalidValue);
  pthread_mutex_lock(&rt.lock);
  graph_release_locked(graph);
  pthread_mutex_unlock(&rt.lock);
  free(graph);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                 unsigned long long flags) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!pGraphExec || !graph)
    return rt_error(cudaErrorInvalidValue);
  (void)flags;
  struct CUgraphExec_st *x = calloc(1, sizeof *x);
  if (!x)
    return rt_error(cudaErrorMemoryAllocation);
  const struct CUgraph_st *g = graph;
  x->g.entries = malloc((g->nentries ? g->nentries : 1) * sizeof(Entry));
  x->slot_fence = calloc(g->nslots ? g->nslots : 1, sizeof(Fence));
  x->slot_clock = calloc(g->nslots ? g->nslots : 1, sizeof(uint32_t *));
  bool ok = x->g.entries && x->slot_fence && x->slot_clock;
  for (int i = 0; ok && rt.check && i < g->nslots; i++)
    ok = (x->slot_clock[i] = clock_new()) != NULL;
  if (!ok) {
    for (int i = 0; x->slot_clock && i < g->nslots; i++)
      free(x->slot_clock[i]);
    free(x->slot_clock);
    free(x->slot_fence);
    free(x->g.entries);
    free(x);
    return rt_error(cudaErrorMemoryAllocation);
  }
  memcpy(x->g.entries, g->entries, g->nentries * sizeof(Entry));
  x->g.nentries = g->nentries;
  x->g.nslots = g->nslots;
  x->g.nstreams = g->nstreams;
  for (int i = 0; i < g->nentries; i++)
    if (g->entries[i].kind == ENTRY_WORK)
      op_ref(g->entries[i].op);
  pthread_mutex_lock(&rt.lock);
  for (int i = 0; i < g->nstreams; i++) {
    x->g.streams[i] = g->streams[i];
    stream_ref_locked(g->streams[i]);
  }
  pthread_mutex_unlock(&rt.lock);
  *pGraphExec = x;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                          unsigned long long flags) {
  return cudaGraphInstantiate(pGraphExec, graph, flags);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!x)
    return rt_error(cudaErrorInvalidValue);
  pthread_mutex_lock(&rt.lock);
  graph_release_locked(&x->g);
  pthread_mutex_unlock(&rt.lock);
  for (int i = 0; i < x->g.nslots; i++)
    free(x->slot_clock[i]);
  free(x->slot_clock);
  free(x->slot_fence);
  free(x);
  return cudaSuccess;
}

/*
 * A replay queues the entries on the streams they were captured from, so
 * that independent branches run at once, as on a GPU. Outside checking
 * mode it queues them all on the launch stream instead (OPC_GRAPH_BRANCHES
 * chooses): every operation already spreads over all the cores (pool.c),
 * so branches at once only compete for them, and each hand-over between
 * two stream threads costs a wake-up of several microseconds, as much as a
 * small operation. The capture order is a valid order for one stream: a
 * stream's entries keep their order, and an event's record comes before
 * every wait on it. It is also what CUDA promises, a graph ordered as a
 * whole on the stream it is launched on. Checking mode keeps the streams,
 * whose clocks it checks.
 */
static cudaError_t replay_locked(struct CUgraphExec_st *x, Stream *origin) {
  const struct CUgraph_st *g = &x->g;
  bool one_stream = !rt.check && !rt.concurrent_graphs;
  for (int i = 0; i < g->nentries; i++) {
    const Entry *e = &g->entries[i];
    Stream *s = e->stream == 0 || one_stream ? origin : g->streams[e->stream];
    if (one_stream && e->kind == ENTRY_WAIT)
      continue; /* what it waits for is earlier on the same stream */
    if (rt.check)
      check_enter_locked(s);
    switch (e->kind) {
    case ENTRY_WORK: {
      op_ref(e->op);
      cudaError_t err = rt_submit_locked(s, e->op);
      if (err)
        return err;
      break;
    }
    case ENTRY_RECORD:
      x->slot_fence[e->slot] = rt_last_fence_locked(s);
      if (rt.check)
        clock_copy(x->slot_clock[e->slot], s->clock);
      break;
    case ENTRY_WAIT:
      rt_queue_wait_locked(s, x->slot_fence[e->slot]);
      if (rt.check)
        clock_join(s->clock, x->slot_clock[e->slot]);
      break;
    }
  }
  return cudaSuccess;
}

/* Nothing to move to a device: the graph already lives in host memory. */
cudaError_t cudaGraphUpload(cudaGraphExec_t x, cudaStream_t stream) {
  (void)stream;
  cudaError_t err = rt_enter();
  if (err)
    return err;
  return x ? cudaSuccess : rt_error(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t stream) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!x)
    return rt_error(cudaErrorInvalidResourceHandle);
  Stream *s = rt_stream(stream);
  pthread_mutex_lock(&rt.lock);
  if (s->capture)
    err = cudaErrorNotSupported;
  else if (rt_is_legacy(s) && capture_blocks_legacy_locked(s->device, true))
    err = cudaErrorStreamCaptureImplicit;
  else
    err = replay_locked(x, s);
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}
