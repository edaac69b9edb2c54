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
 *
 * A capture builds into a graph object from its start (the user's, with
 * cudaStreamBeginCaptureToGraph), which cudaStreamGetCaptureInfo hands
 * out, and a node handle names one of its entries, so that a compiler can
 * add a conditional node in the middle of a capture (cudaGraphAddNode)
 * and capture its bodies. A conditional node is an op that runs its
 * bodies inline; its handle's value lives in the executable graph, set by
 * kernels through cudaGraphSetConditional. What CUDA refuses in bodies is
 * refused when the graph is instantiated (README.md, "Conditional nodes").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define MAX_CAP_STREAMS 32

/* Work is an op: a captured call, or a conditional node (a CondOp). A
 * record and a wait order two captured streams; an event record or wait
 * node (cudaGraphAddNode) records or waits on a user's event on replay. */
typedef enum {
  ENTRY_WORK, ENTRY_RECORD, ENTRY_WAIT, ENTRY_EMPTY, ENTRY_EVENT_RECORD, ENTRY_EVENT_WAIT
} EntryKind;

typedef struct Entry {
  EntryKind kind;
  int stream; /* index into the stream list; 0 is the origin */
  Op *op;     /* ENTRY_WORK */
  int slot;   /* ENTRY_RECORD, ENTRY_WAIT */
  Event *event; /* ENTRY_EVENT_RECORD, ENTRY_EVENT_WAIT (a reference) */
  struct CUgraphNode_st *node; /* its handle, once one was given out */
} Entry;

typedef int Known[MAX_CAP_STREAMS];

/* The entry indices of one stream's nodes, in order: known[i][j] = k
 * means stream i is ordered after node nodes[j].at[k - 1]. */
typedef struct StreamNodes {
  int *at;
  int n, cap;
} StreamNodes;

struct Capture {
  enum cudaStreamCaptureMode mode;
  unsigned long long id;
  struct CUgraph_st *graph; /* what it appends to */
  bool to_graph;            /* cudaStreamBeginCaptureToGraph: the user's graph */
  pthread_t owner; /* the thread that began it */
  Capture *next;   /* the list of captures in progress */
  bool invalid;
  Stream *streams[MAX_CAP_STREAMS];
  int nstreams;
  Known known[MAX_CAP_STREAMS]; /* known[i][j]: work entries of j ordered before i's next */
  Known *slot_known;
  int capslots;
  StreamNodes nodes[MAX_CAP_STREAMS];
  struct CUgraphNode_st **deps_out[MAX_CAP_STREAMS]; /* cudaStreamGetCaptureInfo's */
  cudaGraphEdgeData *edges_out[MAX_CAP_STREAMS];
  Event **events; /* events recorded in the capture, to unbind at the end */
  int nevents, capevents;
};

/* A conditional handle, made for one graph: kernels set its value, which
 * lives in the one executable graph of that graph's root (CUDA allows
 * only one at a time). `id` is what the program holds. */
typedef struct CondHandle {
  unsigned long long id;
  unsigned default_value, flags;
  bool used; /* a conditional node of the graph or of its bodies uses it */
} CondHandle;

struct CUgraph_st {
  Entry *entries;
  int nentries, capentries;
  Stream *streams[MAX_CAP_STREAMS];
  int nstreams;
  int nslots;
  struct CUgraph_st *parent; /* a body: the graph that holds its node */
  Capture *capture;          /* a capture appending to it */
  CondHandle *handles;
  int nhandles, caphandles;
  int instances;  /* executable graphs made from it that live */
  bool destroyed; /* by the user, or with its node; freed once no instance lives */
};

struct CUgraphNode_st {
  struct CUgraph_st *graph;
  int entry;
};

/* A conditional node: an op that runs its bodies, in the order their
 * nodes were added (a valid order: a node's dependencies exist before
 * it), inline on the stream that runs it. */
typedef struct CondOp {
  Op op;
  unsigned long long handle;
  enum cudaGraphConditionalNodeType type;
  unsigned size;
  cudaGraph_t bodies[2];
} CondOp;

/* A handle's value in an executable graph. */
typedef struct ExecHandle {
  unsigned long long id;
  unsigned default_value, flags;
  unsigned value; /* atomic: kernels set it */
} ExecHandle;

struct CUgraphExec_st {
  struct CUgraph_st g; /* its own references to ops and streams */
  struct CUgraph_st *source;
  Fence *slot_fence;
  uint32_t **slot_clock; /* checking mode */
  ExecHandle *handles;
  int nhandles;
  /* The end of its latest launch, which the next one is ordered after
   * (cudaGraphLaunch: "ordered behind ... any previous launches"). */
  Fence last;
  uint32_t *last_clock; /* checking mode */
  /* The user's reference and its queued tasks': CUDA lets a program
   * destroy an executable graph whose launch still runs. */
  int refs;
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

static unsigned long long last_capture_id, last_handle_id;

static bool graph_add_entry(struct CUgraph_st *g, Entry e) {
  if (!grow((void **)&g->entries, &g->capentries, g->nentries + 1, sizeof(Entry)))
    return false;
  g->entries[g->nentries++] = e;
  return true;
}

static bool add_entry(Capture *c, Entry e) {
  if (!graph_add_entry(c->graph, e)) {
    c->invalid = true;
    return false;
  }
  return true;
}

/* Counts the entry just appended as the next node of capture stream i. */
static void count_node(Capture *c, int i) {
  StreamNodes *sn = &c->nodes[i];
  if (!grow((void **)&sn->at, &sn->cap, sn->n + 1, sizeof(int))) {
    c->invalid = true;
    return;
  }
  sn->at[sn->n++] = c->graph->nentries - 1;
  c->known[i][i] = sn->n;
}

void capture_add_op_locked(Stream *s, Op *op) {
  Capture *c = s->capture;
  if (c->invalid || !add_entry(c, (Entry){.kind = ENTRY_WORK, .stream = s->cap_index, .op = op})) {
    op_unref(op);
    return;
  }
  count_node(c, s->cap_index);
}

/* A new slot recording what capture stream i has done so far; -1 when
 * out of memory (the capture is invalidated). */
static int new_slot(Capture *c, int i) {
  if (!grow((void **)&c->slot_known, &c->capslots, c->graph->nslots + 1, sizeof(Known))) {
    c->invalid = true;
    return -1;
  }
  int slot = c->graph->nslots++;
  memcpy(c->slot_known[slot], c->known[i], sizeof(Known));
  if (!add_entry(c, (Entry){.kind = ENTRY_RECORD, .stream = i, .slot = slot}))
    return -1;
  return slot;
}

/* Stream i of c waits for slot: it knows what the slot knew. */
static bool wait_slot(Capture *c, int i, int slot) {
  int *mine = c->known[i];
  const int *theirs = c->slot_known[slot];
  for (int j = 0; j < c->nstreams; j++)
    if (theirs[j] > mine[j])
      mine[j] = theirs[j];
  return add_entry(c, (Entry){.kind = ENTRY_WAIT, .stream = i, .slot = slot});
}

/* Orders capture stream `to` after all that stream `from` did so far, as
 * an event recorded on one and waited on by the other would. */
static bool link_streams(Capture *c, int from, int to) {
  if (from == to)
    return true;
  int slot = new_slot(c, from);
  return slot >= 0 && wait_slot(c, to, slot);
}

cudaError_t capture_record_locked(Stream *s, Event *e) {
  Capture *c = s->capture;
  if (!grow((void **)&c->events, &c->capevents, c->nevents + 1, sizeof(Event *))) {
    c->invalid = true;
    return cudaErrorMemoryAllocation;
  }
  int slot = new_slot(c, s->cap_index);
  if (slot < 0)
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
  if (!wait_slot(c, s->cap_index, e->slot))
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
  c->graph->capture = NULL;
  rt.ncaptures--;
}

static void free_capture(Capture *c) {
  for (int i = 0; i < MAX_CAP_STREAMS; i++) {
    free(c->nodes[i].at);
    free(c->deps_out[i]);
    free(c->edges_out[i]);
  }
  free(c->slot_known);
  free(c->events);
  free(c);
}

/* ---- graphs ---- */

static struct CUgraph_st *graph_new(struct CUgraph_st *parent) {
  struct CUgraph_st *g = calloc(1, sizeof *g);
  if (g)
    g->parent = parent;
  return g;
}

/* Frees a graph's entries: `own` when they are the graph's (its node
 * handles too), not an executable graph's copy. rt.lock held. */
static void drop_entry_locked(Entry *e) {
  if (e->kind == ENTRY_WORK && e->op)
    op_unref(e->op);
  if (e->event)
    event_unref_locked(e->event);
}

static void free_entries_locked(Entry *entries, int n, bool own) {
  for (int i = 0; i < n; i++) {
    drop_entry_locked(&entries[i]);
    if (own)
      free(entries[i].node);
  }
  free(entries);
}

static void graph_release_locked(struct CUgraph_st *g, bool own) {
  for (int i = 0; i < g->nstreams; i++)
    stream_unref_locked(g->streams[i]);
  free_entries_locked(g->entries, g->nentries, own);
}

static void graph_free_locked(struct CUgraph_st *g) {
  graph_release_locked(g, true);
  free(g->handles);
  free(g);
}

/* The graph is no longer the user's (or its node's): freed now, or by the
 * last executable graph made from it. rt.lock held. */
static void graph_drop_locked(struct CUgraph_st *g) {
  g->destroyed = true;
  if (g->instances == 0)
    graph_free_locked(g);
}

static void release_cond(Op *op) {
  CondOp *c = (CondOp *)op;
  for (unsigned i = 0; i < c->size; i++)
    if (c->bodies[i])
      graph_drop_locked(c->bodies[i]);
}

static bool is_cond(const Entry *e) {
  return e->kind == ENTRY_WORK && e->op->kind == OP_CONDITIONAL;
}

/* ---- capture API ---- */

static cudaError_t begin_capture(cudaStream_t stream, enum cudaStreamCaptureMode mode,
                                 struct CUgraph_st *to_graph) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (mode < cudaStreamCaptureModeGlobal || mode > cudaStreamCaptureModeRelaxed)
    return rt_error(cudaErrorInvalidValue);
  Stream *s = rt_stream(stream);
  if (rt_is_legacy(s))
    return rt_error(cudaErrorStreamCaptureUnsupported);
  Capture *c = calloc(1, sizeof *c);
  struct CUgraph_st *g = to_graph ? to_graph : graph_new(NULL);
  if (!c || !g) {
    free(c);
    if (!to_graph)
      free(g);
    return rt_error(cudaErrorMemoryAllocation);
  }
  c->mode = mode;
  c->owner = pthread_self();
  c->graph = g;
  c->to_graph = to_graph != NULL;
  pthread_mutex_lock(&rt.lock);
  if (s->capture || g->capture) {
    pthread_mutex_unlock(&rt.lock);
    free(c);
    if (!to_graph)
      free(g);
    return rt_error(cudaErrorIllegalState);
  }
  c->id = ++last_capture_id;
  c->next = live;
  live = c;
  g->capture = c;
  s->capture = c;
  s->cap_index = 0;
  c->streams[c->nstreams++] = s;
  stream_ref_locked(s);
  rt.ncaptures++;
  pthread_mutex_unlock(&rt.lock);
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  return begin_capture(stream, mode, NULL);
}

/*
 * Captures into the user's graph: here, a conditional node's body, which
 * is how a compiler fills one. The runtime keeps a graph as its captured
 * streams and their order, so it captures only into an empty graph, with
 * no dependencies (cudaErrorNotSupported otherwise: a limit of this
 * runtime, not CUDA's).
 */
cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                          const cudaGraphNode_t *dependencies,
                                          const cudaGraphEdgeData *dependencyData,
                                          size_t numDependencies, enum cudaStreamCaptureMode mode) {
  (void)dependencies;
  (void)dependencyData;
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!graph)
    return rt_error(cudaErrorInvalidValue);
  if (numDependencies > 0 || graph->nentries > 0)
    return rt_error(cudaErrorNotSupported);
  return begin_capture(stream, mode, graph);
}

/* The graph keeps the capture's streams, on which it replays; a body
 * runs inline in its node and keeps none. rt.lock held. */
static void keep_streams_locked(struct CUgraph_st *g, const Capture *c) {
  if (g->parent)
    return;
  g->nstreams = c->nstreams;
  for (int i = 0; i < c->nstreams; i++) {
    g->streams[i] = c->streams[i];
    stream_ref_locked(c->streams[i]);
  }
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (pGraph)
    *pGraph = NULL;
  Stream *s = rt_stream(stream);
  pthread_mutex_lock(&rt.lock);
  Capture *c = s->capture;
  if (!c || c->streams[0] != s) {
    pthread_mutex_unlock(&rt.lock);
    return rt_error(c ? cudaErrorStreamCaptureUnmatched : cudaErrorIllegalState);
  }
  /* Only a capture into the user's graph may leave pGraph out: the
   * caller has the graph. */
  if (!pGraph && !c->to_graph) {
    pthread_mutex_unlock(&rt.lock);
    return rt_error(cudaErrorInvalidValue);
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
  struct CUgraph_st *g = c->graph;
  if (!err)
    keep_streams_locked(g, c);
  end_capture_locked(c);
  if (err && !c->to_graph)
    graph_free_locked(g);
  pthread_mutex_unlock(&rt.lock);
  free_capture(c);
  if (err)
    return rt_error(err);
  if (pGraph)
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

static struct CUgraphNode_st *node_of(struct CUgraph_st *g, int entry) {
  Entry *e = &g->entries[entry];
  if (!e->node && (e->node = malloc(sizeof *e->node)))
    *e->node = (struct CUgraphNode_st){g, entry};
  return e->node;
}

/* The nodes capture stream i is ordered after: for every stream, the
 * last of its nodes that i knows of (a superset of CUDA's frontier, whose
 * extra edges change no order). Kept until the next call. rt.lock held. */
static cudaError_t capture_deps_locked(Capture *c, int i, size_t *n) {
  struct CUgraphNode_st **deps = realloc(c->deps_out[i], MAX_CAP_STREAMS * sizeof *deps);
  if (!deps)
    return cudaErrorMemoryAllocation;
  c->deps_out[i] = deps;
  *n = 0;
  for (int j = 0; j < c->nstreams; j++) {
    int k = c->known[i][j];
    if (k > 0 && !(deps[*n] = node_of(c->graph, c->nodes[j].at[k - 1])))
      return cudaErrorMemoryAllocation;
    *n += k > 0;
  }
  free(c->edges_out[i]);
  c->edges_out[i] = calloc(*n ? *n : 1, sizeof(cudaGraphEdgeData));
  return c->edges_out[i] ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                     enum cudaStreamCaptureStatus *captureStatus_out,
                                     unsigned long long *id_out, cudaGraph_t *graph_out,
                                     const cudaGraphNode_t **dependencies_out,
                                     const cudaGraphEdgeData **edgeData_out,
                                     size_t *numDependencies_out) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!captureStatus_out)
    return rt_error(cudaErrorInvalidValue);
  Stream *s = rt_stream(stream);
  pthread_mutex_lock(&rt.lock);
  Capture *c = s->capture;
  size_t n = 0;
  if (rt_is_legacy(s) && capture_blocks_legacy_locked(s->device, false))
    err = cudaErrorStreamCaptureImplicit;
  else if (!c)
    *captureStatus_out = cudaStreamCaptureStatusNone;
  else if (c->invalid)
    *captureStatus_out = cudaStreamCaptureStatusInvalidated;
  else if (!(err = capture_deps_locked(c, s->cap_index, &n))) {
    *captureStatus_out = cudaStreamCaptureStatusActive;
    if (id_out)
      *id_out = c->id;
    if (graph_out)
      *graph_out = c->graph;
    if (dependencies_out)
      *dependencies_out = (const cudaGraphNode_t *)c->deps_out[s->cap_index];
    if (edgeData_out)
      *edgeData_out = c->edges_out[s->cap_index];
    if (numDependencies_out)
      *numDependencies_out = n;
  }
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

/* Non-default edges (programmatic launches) are not modelled. */
static bool default_edges(const cudaGraphEdgeData *data, size_t n) {
  static const cudaGraphEdgeData zero;
  for (size_t i = 0; data && i < n; i++)
    if (memcmp(&data[i], &zero, sizeof zero) != 0)
      return false;
  return true;
}

/* Whether nodes[0..n) are distinct nodes of g. */
static bool nodes_of(const struct CUgraph_st *g, const cudaGraphNode_t *nodes, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!nodes[i] || nodes[i]->graph != g)
      return false;
    for (size_t k = 0; k < i; k++)
      if (nodes[k] == nodes[i])
        return false;
  }
  return true;
}

cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t stream, cudaGraphNode_t *dependencies,
                                                const cudaGraphEdgeData *dependencyData,
                                                size_t numDependencies, unsigned int flags) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (flags > cudaStreamSetCaptureDependencies || (numDependencies && !dependencies))
    return rt_error(cudaErrorInvalidValue);
  if (!default_edges(dependencyData, numDependencies))
    return rt_error(cudaErrorNotSupported);
  Stream *s = rt_stream(stream);
  pthread_mutex_lock(&rt.lock);
  Capture *c = s->capture;
  if (!c)
    err = cudaErrorIllegalState;
  else if (!nodes_of(c->graph, dependencies, numDependencies))
    err = cudaErrorInvalidValue;
  /* The stream is ordered after the nodes' streams up to them. Replacing
   * (Set) cannot take back the order it already has; that only orders
   * more, never less, than CUDA would. */
  for (size_t i = 0; !err && i < numDependencies; i++) {
    int from = c->graph->entries[dependencies[i]->entry].stream;
    if (!link_streams(c, from, s->cap_index))
      err = cudaErrorMemoryAllocation;
  }
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

/* ---- conditional nodes ---- */

static _Thread_local struct CUgraphExec_st *running;
static _Thread_local bool in_kernel;

struct CUgraphExec_st *graph_running(void) {
  return running;
}

void graph_set_running(struct CUgraphExec_st *x) {
  running = x;
}

void graph_set_in_kernel(bool k) {
  in_kernel = k;
}

/* The handle `id` made for g or for a graph g is a body of (the graphs
 * whose conditional nodes may use it), or NULL. */
static CondHandle *handle_above(struct CUgraph_st *g, unsigned long long id) {
  for (; g; g = g->parent)
    for (int i = 0; i < g->nhandles; i++)
      if (g->handles[i].id == id)
        return &g->handles[i];
  return NULL;
}

static ExecHandle *exec_handle(struct CUgraphExec_st *x, unsigned long long id) {
  for (int i = 0; x && i < x->nhandles; i++)
    if (x->handles[i].id == id)
      return &x->handles[i];
  return NULL;
}

cudaError_t cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle *pHandle_out,
                                             cudaGraph_t graph, unsigned int defaultLaunchValue,
                                             unsigned int flags) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!pHandle_out || !graph || (flags & ~(unsigned)cudaGraphCondAssignDefault))
    return rt_error(cudaErrorInvalidValue);
  pthread_mutex_lock(&rt.lock);
  if (grow((void **)&graph->handles, &graph->caphandles, graph->nhandles + 1, sizeof(CondHandle))) {
    /* Not small integers, so that a handle is not mistaken for a count. */
    unsigned long long id = 0x0c0d000000000000ull + ++last_handle_id;
    graph->handles[graph->nhandles++] = (CondHandle){id, defaultLaunchValue, flags, false};
    *pHandle_out = id;
  } else {
    err = cudaErrorMemoryAllocation;
  }
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

/* The device function (prelude_cpu.h gives kernels its name). A host
 * call, or a handle that is not one of the graph running the kernel, is
 * an error the device would meet: sticky, as a kernel's fault is. */
void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value) {
  if (!in_kernel) {
    rt_fail_device(cudaErrorLaunchFailure,
                   "cudaGraphSetConditional called from host code: it is a device function, "
                   "for kernels only");
    return;
  }
  ExecHandle *h = exec_handle(running, handle);
  if (!h) {
    rt_fail_device(cudaErrorLaunchFailure,
                   running ? "a kernel set a conditional handle that is not one of the graph it "
                             "runs in"
                           : "a kernel launched outside a graph set a conditional handle");
    return;
  }
  __atomic_store_n(&h->value, value, __ATOMIC_RELEASE);
}

static bool stopped(void) {
  return rt_failed() || rt_async_error() != cudaSuccess;
}

/* A body's nodes in the order they were added, which is a valid order
 * (a node's dependencies exist before it); a failed one stops it. */
static void run_body(const struct CUgraph_st *g) {
  for (int i = 0; i < g->nentries && !stopped(); i++)
    if (g->entries[i].kind == ENTRY_WORK)
      g->entries[i].op->run(g->entries[i].op);
}

static void run_cond(Op *op) {
  CondOp *c = (CondOp *)op;
  ExecHandle *h = exec_handle(running, c->handle);
  if (!h) {
    rt_fail_device(cudaErrorLaunchFailure, "a conditional node ran outside its graph");
    return;
  }
  if (c->type == cudaGraphCondTypeWhile) {
    while (__atomic_load_n(&h->value, __ATOMIC_ACQUIRE) && !stopped())
      run_body(c->bodies[0]);
  } else if (__atomic_load_n(&h->value, __ATOMIC_ACQUIRE)) {
    run_body(c->bodies[0]);
  } else if (c->size == 2) {
    run_body(c->bodies[1]);
  }
}

/* All bytes of the union past its first `used` are zero, as
 * cudaGraphAddNode requires. */
static bool rest_zero(const struct cudaGraphNodeParams *p, size_t used) {
  const unsigned char *b = (const unsigned char *)p->reserved1;
  for (size_t i = used; i < sizeof p->reserved1; i++)
    if (b[i])
      return false;
  return p->reserved0[0] == 0 && p->reserved0[1] == 0 && p->reserved0[2] == 0 &&
         p->reserved2 == 0;
}

/* A conditional node's op, its bodies made for it, or an error. rt.lock held. */
static cudaError_t cond_new_locked(struct CUgraph_st *g, struct cudaConditionalNodeParams *p,
                                   CondOp **out) {
  int driver;
  cudaDriverGetVersion(&driver);
  CondHandle *h = handle_above(g, p->handle);
  if (!h) {
    fprintf(stderr, "opc runtime: cudaGraphAddNode: conditional handle 0x%llx was not made for "
                    "this graph or a graph it is a body of\n", p->handle);
    return cudaErrorInvalidValue;
  }
  /* SWITCH is CUDA 12.8's; opc emits none, so it is not modelled. */
  if (p->type == cudaGraphCondTypeSwitch)
    return cudaErrorNotSupported;
  if ((p->type != cudaGraphCondTypeIf && p->type != cudaGraphCondTypeWhile) || p->size < 1 ||
      p->size > (p->type == cudaGraphCondTypeIf ? 2u : 1u))
    return cudaErrorInvalidValue;
  /* Conditional nodes came with CUDA 12.4's driver, IF's second body
   * (else) with 12.8's. */
  if (driver < 12040 || (p->size == 2 && driver < 12080))
    return cudaErrorNotSupported;
  CondOp *c = op_new(sizeof *c, run_cond, "conditional node");
  if (!c)
    return cudaErrorMemoryAllocation;
  c->op.kind = OP_CONDITIONAL;
  c->op.release = release_cond;
  c->op.device = rt_device();
  c->handle = p->handle;
  c->type = p->type;
  c->size = p->size;
  for (unsigned i = 0; i < p->size; i++) {
    if (!(c->bodies[i] = graph_new(g))) {
      op_unref(&c->op);
      return cudaErrorMemoryAllocation;
    }
  }
  h->used = true;
  p->phGraph_out = c->bodies;
  *out = c;
  return cudaSuccess;
}

/* The entry a node of these parameters becomes, or an error. rt.lock held. */
static cudaError_t node_entry_locked(struct CUgraph_st *g, struct cudaGraphNodeParams *p,
                                     Entry *e) {
  switch (p->type) {
  case cudaGraphNodeTypeConditional: {
    if (!rest_zero(p, sizeof p->conditional))
      return cudaErrorInvalidValue;
    CondOp *c;
    cudaError_t err = cond_new_locked(g, &p->conditional, &c);
    *e = (Entry){.kind = ENTRY_WORK, .op = err ? NULL : &c->op};
    return err;
  }
  case cudaGraphNodeTypeEmpty:
    *e = (Entry){.kind = ENTRY_EMPTY};
    return rest_zero(p, 0) ? cudaSuccess : cudaErrorInvalidValue;
  case cudaGraphNodeTypeEventRecord:
  case cudaGraphNodeTypeWaitEvent: {
    Event *ev = p->type == cudaGraphNodeTypeEventRecord ? p->eventRecord.event : p->eventWait.event;
    if (!ev || !rest_zero(p, sizeof p->eventRecord))
      return cudaErrorInvalidValue;
    ev->refs++;
    *e = (Entry){.kind = p->type == cudaGraphNodeTypeEventRecord ? ENTRY_EVENT_RECORD
                                                                  : ENTRY_EVENT_WAIT,
                 .event = ev};
    return cudaSuccess;
  }
  default:
    /* Kernels, copies and the rest come from stream capture here. */
    return cudaErrorNotSupported;
  }
}

/*
 * The node goes on the graph's first stream, after its dependencies'
 * streams up to them (a record and a wait when the graph is being
 * captured): an order CUDA's includes.
 */
cudaError_t cudaGraphAddNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                             const cudaGraphNode_t *pDependencies,
                             const cudaGraphEdgeData *dependencyData, size_t numDependencies,
                             struct cudaGraphNodeParams *nodeParams) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!pGraphNode || !graph || !nodeParams || (numDependencies && !pDependencies))
    return rt_error(cudaErrorInvalidValue);
  if (!default_edges(dependencyData, numDependencies))
    return rt_error(cudaErrorNotSupported);
  pthread_mutex_lock(&rt.lock);
  Entry e;
  Capture *c = graph->capture;
  bool made = false;
  if (!nodes_of(graph, pDependencies, numDependencies))
    err = cudaErrorInvalidValue;
  else if (!(err = node_entry_locked(graph, nodeParams, &e)))
    made = true;
  for (size_t i = 0; !err && c && i < numDependencies; i++)
    if (!link_streams(c, graph->entries[pDependencies[i]->entry].stream, 0))
      err = cudaErrorMemoryAllocation;
  if (!err && !graph_add_entry(graph, e))
    err = cudaErrorMemoryAllocation;
  if (err && made)
    drop_entry_locked(&e);
  if (!err) {
    if (c)
      count_node(c, 0);
    if (!(*pGraphNode = node_of(graph, graph->nentries - 1)))
      err = cudaErrorMemoryAllocation;
  }
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!graph)
    return rt_error(cudaErrorInvalidValue);
  pthread_mutex_lock(&rt.lock);
  /* A body belongs to its node; a graph being captured to its capture. */
  if (graph->parent || graph->capture || graph->destroyed)
    err = cudaErrorInvalidValue;
  else
    graph_drop_locked(graph);
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

/* ---- instantiation: what CUDA refuses ---- */

static const char *const kind_names[] = {
    [OP_LIBRARY] = "library", [OP_KERNEL] = "kernel", [OP_MEMCPY] = "memcpy",
    [OP_MEMCPY_PAGEABLE] = "memcpy", [OP_MEMSET] = "memset", [OP_HOST] = "host",
    [OP_MEM_FREE] = "memory free", [OP_CONDITIONAL] = "conditional"};

/*
 * Why g may not be a conditional node's body on `device` (written into
 * why), or false. The CUDA 13 documentation of cudaConditionalNodeParams:
 * only kernel, empty, child-graph, memset, memcpy and conditional nodes,
 * recursively, all of one context; the Programming Guide adds that copies
 * must be of device or pinned (mapped) host memory. cuDNN's and cuBLAS's
 * calls are refused too: this runtime cannot show which nodes they make.
 */
static bool body_refused(const struct CUgraph_st *g, int device, char *why, size_t size) {
  if (g->capture) {
    snprintf(why, size, "a capture still under way (cudaStreamBeginCaptureToGraph)");
    return true;
  }
  for (int i = 0; i < g->nentries; i++) {
    const Entry *e = &g->entries[i];
    if (e->kind == ENTRY_EVENT_RECORD || e->kind == ENTRY_EVENT_WAIT) {
      snprintf(why, size, "an event %s node", e->kind == ENTRY_EVENT_RECORD ? "record" : "wait");
      return true;
    }
    if (e->kind != ENTRY_WORK)
      continue;
    const Op *op = e->op;
    switch (op->kind) {
    case OP_KERNEL:
    case OP_MEMCPY:
    case OP_MEMSET:
      if (op->device != device) {
        snprintf(why, size, "a %s node (%s) of device %d, not the node's device %d",
                 kind_names[op->kind], op->api, op->device, device);
        return true;
      }
      break;
    case OP_CONDITIONAL: {
      const CondOp *c = (const CondOp *)op;
      for (unsigned b = 0; b < c->size; b++)
        if (body_refused(c->bodies[b], device, why, size))
          return true;
      break;
    }
    case OP_MEMCPY_PAGEABLE:
      snprintf(why, size, "a memcpy node (%s) with an end in pageable host memory", op->api);
      return true;
    case OP_LIBRARY:
      snprintf(why, size, "a %s call, whose nodes this runtime cannot show to be kernels", op->api);
      return true;
    default:
      snprintf(why, size, "a %s node (%s)", kind_names[op->kind], op->api);
      return true;
    }
  }
  return false;
}

/* Calls fn(ctx, op) for every conditional node of g and of its bodies. */
static bool each_cond(const struct CUgraph_st *g, bool (*fn)(void *, CondOp *), void *ctx) {
  for (int i = 0; i < g->nentries; i++) {
    if (!is_cond(&g->entries[i]))
      continue;
    CondOp *c = (CondOp *)g->entries[i].op;
    if (!fn(ctx, c))
      return false;
    for (unsigned b = 0; b < c->size; b++)
      if (!each_cond(c->bodies[b], fn, ctx))
        return false;
  }
  return true;
}

static bool legal_bodies(void *ctx, CondOp *c) {
  char why[256];
  for (unsigned b = 0; b < c->size; b++) {
    if (body_refused(c->bodies[b], c->op.device, why, sizeof why)) {
      fprintf(stderr,
              "opc runtime: cudaGraphInstantiate: body %u of a conditional node holds %s; CUDA "
              "allows only kernel, memset, memcpy, empty, child-graph and conditional nodes there, "
              "on the node's device\n", b, why);
      *(bool *)ctx = true;
      return false;
    }
  }
  return true;
}

static bool count_body_handles(void *ctx, CondOp *c) {
  for (unsigned b = 0; b < c->size; b++) {
    const struct CUgraph_st *body = c->bodies[b];
    for (int i = 0; i < body->nhandles; i++) {
      ((int *)ctx)[0]++;
      ((int *)ctx)[1] += !body->handles[i].used;
    }
  }
  return true;
}

/* Counts the handles of g and of its bodies (into ctx[0]) and the unused
 * ones (ctx[1]). */
static void count_handles(const struct CUgraph_st *g, int *ctx) {
  for (int i = 0; i < g->nhandles; i++) {
    ctx[0]++;
    ctx[1] += !g->handles[i].used;
  }
  each_cond(g, count_body_handles, ctx);
}

static void take_handles(struct CUgraphExec_st *x, const struct CUgraph_st *g) {
  for (int i = 0; i < g->nhandles; i++) {
    const CondHandle *h = &g->handles[i];
    /* Without cudaGraphCondAssignDefault CUDA documents no first value. */
    x->handles[x->nhandles++] = (ExecHandle){h->id, h->default_value, h->flags, 0};
  }
}

static bool take_body_handles(void *ctx, CondOp *c) {
  for (unsigned b = 0; b < c->size; b++)
    take_handles(ctx, c->bodies[b]);
  return true;
}

/* Checking mode: a conditional node reads and writes what its bodies do. */
static void add_body_spans(CondOp *into, const struct CUgraph_st *g) {
  for (int i = 0; i < g->nentries; i++) {
    if (g->entries[i].kind != ENTRY_WORK)
      continue;
    const Op *op = g->entries[i].op;
    if (op->kind == OP_CONDITIONAL) {
      const CondOp *c = (const CondOp *)op;
      for (unsigned b = 0; b < c->size; b++)
        add_body_spans(into, c->bodies[b]);
      continue;
    }
    for (int k = 0; k < op->nspans; k++)
      op_span(&into->op, (const void *)op->spans[k].lo, op->spans[k].hi - op->spans[k].lo,
              op->spans[k].write);
  }
}

static bool gather_spans(void *ctx, CondOp *c) {
  (void)ctx;
  c->op.nspans = 0;
  for (unsigned b = 0; b < c->size; b++)
    add_body_spans(c, c->bodies[b]);
  return true;
}

static bool has_cond(void *ctx, CondOp *c) {
  (void)c;
  *(bool *)ctx = true;
  return false;
}

/* cudaErrorInvalidValue, the one error cudaGraphInstantiate documents
 * (and what CUDA 12.9 returned for a graph with conditional nodes and
 * NCCL's calls, NVIDIA/nccl#1986), for what CUDA refuses. rt.lock held. */
static cudaError_t instantiable_locked(const struct CUgraph_st *g) {
  if (g->parent || g->capture)
    return cudaErrorInvalidValue;
  int counts[2] = {0, 0};
  count_handles(g, counts);
  if (counts[1] > 0) {
    fprintf(stderr, "opc runtime: cudaGraphInstantiate: %d conditional handle(s) of the graph "
                    "belong to no conditional node\n", counts[1]);
    return cudaErrorInvalidValue;
  }
  bool conditional = false, refused = false;
  each_cond(g, has_cond, &conditional);
  if (!conditional)
    return cudaSuccess;
  if (g->instances > 0) {
    fprintf(stderr, "opc runtime: cudaGraphInstantiate: a graph with conditional nodes may have "
                    "only one executable graph at a time\n");
    return cudaErrorInvalidValue;
  }
  each_cond(g, legal_bodies, &refused);
  return refused ? cudaErrorInvalidValue : cudaSuccess;
}

static void exec_free(struct CUgraphExec_st *x) {
  for (int i = 0; x->slot_clock && i < x->g.nslots; i++)
    free(x->slot_clock[i]);
  free(x->slot_clock);
  free(x->slot_fence);
  free(x->handles);
  free(x->last_clock);
  free(x->g.entries);
  free(x);
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
  pthread_mutex_lock(&rt.lock);
  struct CUgraph_st *g = graph;
  int counts[2] = {0, 0};
  count_handles(g, counts);
  x->g.nslots = g->nslots;
  x->g.entries = malloc((g->nentries ? g->nentries : 1) * sizeof(Entry));
  x->slot_fence = calloc(g->nslots ? g->nslots : 1, sizeof(Fence));
  x->slot_clock = calloc(g->nslots ? g->nslots : 1, sizeof(uint32_t *));
  x->handles = calloc(counts[0] ? counts[0] : 1, sizeof(ExecHandle));
  bool ok = x->g.entries && x->slot_fence && x->slot_clock && x->handles;
  for (int i = 0; ok && rt.check && i < g->nslots; i++)
    ok = (x->slot_clock[i] = clock_new()) != NULL;
  if (ok && rt.check)
    ok = (x->last_clock = clock_new()) != NULL;
  err = ok ? instantiable_locked(g) : cudaErrorMemoryAllocation;
  if (err) {
    pthread_mutex_unlock(&rt.lock);
    exec_free(x);
    return rt_error(err);
  }
  memcpy(x->g.entries, g->entries, g->nentries * sizeof(Entry));
  x->g.nentries = g->nentries;
  x->g.nstreams = g->nstreams;
  for (int i = 0; i < g->nentries; i++) {
    Entry *e = &x->g.entries[i];
    e->node = NULL; /* the graph's */
    if (e->kind == ENTRY_WORK)
      op_ref(e->op);
    if (e->event)
      e->event->refs++;
  }
  for (int i = 0; i < g->nstreams; i++) {
    x->g.streams[i] = g->streams[i];
    stream_ref_locked(g->streams[i]);
  }
  take_handles(x, g);
  each_cond(g, take_body_handles, x);
  if (rt.check)
    each_cond(g, gather_spans, NULL);
  x->source = g;
  x->refs = 1;
  g->instances++;
  pthread_mutex_unlock(&rt.lock);
  *pGraphExec = x;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                          unsigned long long flags) {
  return cudaGraphInstantiate(pGraphExec, graph, flags);
}

void graph_exec_ref_locked(struct CUgraphExec_st *x) {
  x->refs++;
}

void graph_exec_unref_locked(struct CUgraphExec_st *x) {
  if (--x->refs == 0)
    exec_free(x);
}

/* Its tasks keep their ops and the exec's handles until they are done. */
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!x)
    return rt_error(cudaErrorInvalidValue);
  pthread_mutex_lock(&rt.lock);
  graph_release_locked(&x->g, false);
  x->g.entries = NULL;
  x->g.nentries = 0;
  if (x->last.stream)
    stream_unref_locked(x->last.stream);
  x->last.stream = NULL;
  if (--x->source->instances == 0 && x->source->destroyed)
    graph_free_locked(x->source);
  graph_exec_unref_locked(x);
  pthread_mutex_unlock(&rt.lock);
  return cudaSuccess;
}

/* Sets the handles made with cudaGraphCondAssignDefault to their default
 * value, first thing in each launch, in stream order. */
typedef struct DefaultsOp {
  Op op;
  struct CUgraphExec_st *x;
} DefaultsOp;

static void run_defaults(Op *op) {
  struct CUgraphExec_st *x = ((DefaultsOp *)op)->x;
  for (int i = 0; i < x->nhandles; i++)
    if (x->handles[i].flags & cudaGraphCondAssignDefault)
      __atomic_store_n(&x->handles[i].value, x->handles[i].default_value, __ATOMIC_RELEASE);
}

static cudaError_t queue_defaults_locked(struct CUgraphExec_st *x, Stream *origin) {
  bool any = false;
  for (int i = 0; i < x->nhandles; i++)
    any |= (x->handles[i].flags & cudaGraphCondAssignDefault) != 0;
  if (!any)
    return cudaSuccess;
  DefaultsOp *d = op_new(sizeof *d, run_defaults, "cudaGraphLaunch");
  if (!d)
    return cudaErrorMemoryAllocation;
  d->x = x;
  d->op.transfer = true; /* touches no device memory */
  return rt_submit_locked(origin, &d->op);
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
 * whose clocks it checks. A conditional node is an op like the others;
 * its tasks carry the executable graph, whose handles its kernels set.
 */
static cudaError_t replay_locked(struct CUgraphExec_st *x, Stream *origin) {
  const struct CUgraph_st *g = &x->g;
  bool one_stream = !rt.check && !rt.concurrent_graphs;
  rt.replaying = x;
  if (x->last.stream && x->last.stream != origin) { /* one stream keeps its own order */
    if (rt.check) {
      check_enter_locked(origin);
      clock_join(origin->clock, x->last_clock);
    }
    rt_queue_wait_locked(origin, x->last);
  }
  cudaError_t err = queue_defaults_locked(x, origin);
  for (int i = 0; !err && i < g->nentries; i++) {
    const Entry *e = &g->entries[i];
    Stream *s = e->stream == 0 || one_stream ? origin : g->streams[e->stream];
    if (one_stream && e->kind == ENTRY_WAIT)
      continue; /* what it waits for is earlier on the same stream */
    if (rt.check)
      check_enter_locked(s);
    switch (e->kind) {
    case ENTRY_WORK:
      op_ref(e->op);
      err = rt_submit_locked(s, e->op);
      break;
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
    case ENTRY_EMPTY:
      break;
    case ENTRY_EVENT_RECORD:
      rt_event_record_locked(s, e->event);
      break;
    case ENTRY_EVENT_WAIT:
      rt_event_wait_locked(s, e->event);
      break;
    }
  }
  rt.replaying = NULL;
  /* Every captured stream joined the origin: its end is the graph's. */
  if (x->last.stream)
    stream_unref_locked(x->last.stream);
  x->last = rt_last_fence_locked(origin);
  stream_ref_locked(origin);
  if (rt.check) {
    check_enter_locked(origin);
    clock_copy(x->last_clock, origin->clock);
  }
  return err;
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
