/*
 * stream.c - streams as worker threads, tasks, events and host
 * synchronisation.
 *
 * A task's seq numbers its place in its stream; a Fence (stream, seq) is
 * done once the stream's done_seq reaches seq. Recording an event takes the
 * fence of a record task; waiting on it queues a task that waits for that
 * fence. Each device has a legacy stream (id 0), ordered with every
 * blocking stream of its device, as in CUDA: its tasks wait for their
 * pending work and theirs for its.
 */
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt.h"

Runtime rt = {
  .lock = PTHREAD_MUTEX_INITIALIZER,
  .cond = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static _Thread_local cudaError_t last_error = cudaSuccess;
/* Set while a host function (cudaLaunchHostFunc) runs on this thread: CUDA
   forbids it any CUDA call, and answers one with cudaErrorNotPermitted. */
static _Thread_local bool in_host_fn;

static Stream *stream_new_locked(unsigned flags, int device, bool legacy);

/* A switch's value, or NULL when it is unset, empty, "0" or "off". */
static const char *env_switch(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v || strcmp(v, "0") == 0 || strcmp(v, "off") == 0)
    return NULL;
  return v;
}

static void env_ignored(const char *name, const char *v, const char *expected) {
  fprintf(stderr, "opc runtime: %s=%s ignored: expected %s\n", name, v, expected);
}

/* The switches that make the runtime refuse what a real device may
 * refuse; see README.md. */
static void read_env(void) {
  const char *v = env_switch("OPC_RT_PAGEABLE");
  if (v && strcmp(v, "error") == 0)
    rt.pageable_error = true;
  else if (v)
    env_ignored("OPC_RT_PAGEABLE", v, "'error'");
  v = env_switch("OPC_RT_REFUSE_FUSED");
  if (v && strcmp(v, "other") == 0)
    rt.refuse_fused = REFUSE_OTHER;
  else if (v && strcmp(v, "all") == 0)
    rt.refuse_fused = REFUSE_ALL;
  else if (v)
    env_ignored("OPC_RT_REFUSE_FUSED", v, "'other' or 'all'");
  v = env_switch("OPC_GRAPH_BRANCHES");
  if (v && strcmp(v, "concurrent") == 0)
    rt.concurrent_graphs = true;
  else if (v && strcmp(v, "serial") != 0)
    env_ignored("OPC_GRAPH_BRANCHES", v, "'concurrent' or 'serial'");
}

static void init_runtime(void) {
  read_env();
  check_init();
  pthread_mutex_lock(&rt.lock);
  rt.legacy[0] = stream_new_locked(0, 0, true);
  pthread_mutex_unlock(&rt.lock);
}

cudaError_t rt_device_ready(int device) {
  pthread_mutex_lock(&rt.lock);
  if (!rt.legacy[device])
    rt.legacy[device] = stream_new_locked(0, device, true);
  bool ok = rt.legacy[device] != NULL;
  pthread_mutex_unlock(&rt.lock);
  return ok ? cudaSuccess : cudaErrorMemoryAllocation;
}

bool rt_failed(void) {
  return __atomic_load_n(&rt.raced, __ATOMIC_ACQUIRE);
}

cudaError_t rt_enter(void) {
  pthread_once(&init_once, init_runtime);
  if (in_host_fn)
    return rt_error(cudaErrorNotPermitted);
  if (rt_failed())
    return rt_error(cudaErrorLaunchFailure);
  return cudaSuccess;
}

cudaError_t rt_error(cudaError_t err) {
  if (err != cudaSuccess)
    last_error = err;
  return err;
}

cudaError_t cudaGetLastError(void) {
  cudaError_t err = last_error;
  last_error = cudaSuccess;
  if (err == cudaSuccess && rt_failed())
    return cudaErrorLaunchFailure;
  return err;
}

cudaError_t cudaPeekAtLastError(void) {
  if (last_error == cudaSuccess && rt_failed())
    return cudaErrorLaunchFailure;
  return last_error;
}

void rt_fail_async(const char *api) {
  int none = cudaSuccess;
  if (__atomic_compare_exchange_n(&rt.async_error, &none, cudaErrorMemoryAllocation, false,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    fprintf(stderr, "opc runtime: %s failed: out of memory for scratch space\n", api);
}

void rt_fail_device(cudaError_t err, const char *why) {
  int none = cudaSuccess;
  if (__atomic_compare_exchange_n(&rt.async_error, &none, err, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE))
    fprintf(stderr, "opc runtime: %s\n", why);
}

cudaError_t rt_async_error(void) {
  return (cudaError_t)__atomic_load_n(&rt.async_error, __ATOMIC_ACQUIRE);
}

cudaError_t rt_wait_result(void) {
  return rt_failed() ? cudaErrorLaunchFailure : rt_async_error();
}

/* cudaErrorNotReady answers a query: it does not become the last error. */
static cudaError_t query_result(cudaError_t err) {
  return err == cudaErrorNotReady ? err : rt_error(err);
}

double rt_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

Stream *rt_stream_on(cudaStream_t s, int device) {
  if (s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread)
    return rt.legacy[device];
  return s;
}

Stream *rt_stream(cudaStream_t s) {
  return rt_stream_on(s, rt_device());
}

bool rt_is_legacy(const Stream *s) {
  return s == rt.legacy[s->device];
}

/*
 * The CUDA Programming Guide ("Stream and Event Behavior", multi-device
 * system): a kernel launch fails if it is issued to a stream that is not
 * associated to the current device; a memory copy succeeds. A memset,
 * cuDNN's and cuBLAS's kernels are refused like kernels (a strict choice
 * for the memset: CUDA does not document it).
 */
cudaError_t rt_launch_device_check(const Stream *s, const Op *op) {
  if (op->transfer || s->device == rt_device())
    return cudaSuccess;
  return cudaErrorInvalidResourceHandle;
}

/* ---- tasks ---- */

bool rt_fence_done_locked(Fence f) {
  return f.stream == NULL || f.stream->done_seq >= f.seq;
}

Fence rt_last_fence_locked(Stream *s) {
  return (Fence){s, s->next_seq - 1};
}

/* Asks f's stream to broadcast rt.cond once f is done; the caller then
 * sleeps on rt.cond. Each waiter registers again after every wake-up, so
 * keeping only the lowest seq loses no one. */
static void want_fence_locked(Fence f) {
  if (f.stream && f.seq < f.stream->want_seq)
    f.stream->want_seq = f.seq;
}

/* Whether t may run; if not, registers what it still waits for. */
static bool task_ready_locked(const Task *t) {
  bool ready = true;
  for (int i = 0; i < t->nwaits; i++)
    if (!rt_fence_done_locked(t->waits[i])) {
      want_fence_locked(t->waits[i]);
      ready = false;
    }
  return ready;
}

static void task_add_wait_locked(Task *t, Fence f) {
  if (rt_fence_done_locked(f))
    return;
  Fence *w = realloc(t->waits, (t->nwaits + 1) * sizeof *w);
  if (!w) {
    /* Waiting on the host instead keeps the ordering without memory. */
    rt_wait_fence_locked(f);
    return;
  }
  t->waits = w;
  stream_ref_locked(f.stream);
  t->waits[t->nwaits++] = f;
}

/* The implicit ordering of a device's legacy stream with its blocking
 * streams. */
static void add_legacy_waits_locked(Stream *s, Task *t) {
  if (rt_is_legacy(s)) {
    for (int i = 0; i < rt.nstreams; i++) {
      Stream *o = rt.streams[i];
      if (o != s && o->device == s->device && !(o->flags & cudaStreamNonBlocking))
        task_add_wait_locked(t, rt_last_fence_locked(o));
    }
  } else if (!(s->flags & cudaStreamNonBlocking)) {
    task_add_wait_locked(t, rt_last_fence_locked(rt.legacy[s->device]));
  }
}

/* NULL when out of memory. */
static Task *task_new_locked(Stream *s) {
  Task *t = calloc(1, sizeof *t);
  if (!t)
    return NULL;
  t->seq = s->next_seq++;
  add_legacy_waits_locked(s, t);
  return t;
}

static void task_push_locked(Stream *s, Task *t) {
  if (s->tail)
    s->tail->next = t;
  else
    s->head = t;
  s->tail = t;
  __atomic_add_fetch(&s->pushed, 1, __ATOMIC_RELEASE);
  pthread_cond_signal(&s->wake);
}

/*
 * Hand-offs between the host and the streams' workers poll before they
 * sleep. A thread that sleeps at once pays a wake-up on every hand-off,
 * tens of microseconds on a busy machine, which is most of a small
 * program's run; CUDA's default scheduling (cudaDeviceScheduleAuto) spins
 * too while the host has cores to spare. The poll yields the core between
 * looks, so it never keeps runnable work off it, and gives up after
 * SPIN_NS.
 */
enum { SPIN_NS = 50000 };

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Releases rt.lock, polls until done(arg) or SPIN_NS have passed, and takes
   the lock again. The caller checks its condition again under the lock. */
static void spin_unlocked(bool (*done)(const void *), const void *arg) {
  pthread_mutex_unlock(&rt.lock);
  int64_t end = now_ns() + SPIN_NS;
  for (int i = 0; !done(arg); i++) {
    if (i % 64 == 63 && now_ns() > end)
      break;
    if (i % 8 == 7)
      sched_yield();
    else
      cpu_relax();
  }
  pthread_mutex_lock(&rt.lock);
}

static void task_free_locked(Task *t) {
  for (int i = 0; i < t->nwaits; i++)
    stream_unref_locked(t->waits[i].stream);
  free(t->waits);
  if (t->record)
    event_unref_locked(t->record);
  if (t->op)
    op_unref(t->op);
  if (t->exec)
    graph_exec_unref_locked(t->exec);
  free(t);
}

cudaError_t rt_submit_locked(Stream *s, Op *op) {
  if (op->device < 0)
    op->device = s->device;
  if (s->capture) {
    capture_add_op_locked(s, op);
    return cudaSuccess;
  }
  if (rt_is_legacy(s) && capture_blocks_legacy_locked(s->device, true)) {
    op_unref(op);
    return cudaErrorStreamCaptureImplicit;
  }
  if (rt.check) {
    check_enter_locked(s);
    check_op_locked(s, op);
    if (rt_failed()) {
      op_unref(op);
      return cudaErrorLaunchFailure;
    }
  }
  Task *t = task_new_locked(s);
  if (!t) {
    op_unref(op);
    return cudaErrorMemoryAllocation;
  }
  t->op = op;
  t->exec = rt.replaying;
  if (t->exec)
    graph_exec_ref_locked(t->exec);
  task_push_locked(s, t);
  return cudaSuccess;
}

cudaError_t rt_submit(cudaStream_t stream, Op *op) {
  if (in_host_fn) {
    op_unref(op);
    return rt_error(cudaErrorNotPermitted);
  }
  pthread_mutex_lock(&rt.lock);
  cudaError_t err;
  Stream *s = rt_stream(stream);
  if (rt_failed()) {
    op_unref(op);
    err = cudaErrorLaunchFailure;
  } else if ((err = rt_launch_device_check(s, op))) {
    op_unref(op);
  } else {
    err = rt_submit_locked(s, op);
  }
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

void rt_queue_wait_locked(Stream *s, Fence f) {
  Task *t = task_new_locked(s);
  if (!t) {
    rt_wait_fence_locked(f); /* the host keeps the order instead */
    return;
  }
  task_add_wait_locked(t, f);
  task_push_locked(s, t);
}

Fence rt_queue_record_locked(Stream *s, Event *e) {
  e->gen++;
  Task *t = task_new_locked(s);
  if (!t)
    return rt_last_fence_locked(s); /* correct order, but no timestamp */
  e->refs++;
  t->record = e;
  t->record_gen = e->gen;
  task_push_locked(s, t);
  return (Fence){s, t->seq};
}

static bool fence_done_unlocked(const void *arg) {
  const Fence *f = arg;
  return __atomic_load_n(&f->stream->done_seq, __ATOMIC_ACQUIRE) >= f->seq;
}

void rt_wait_fence_locked(Fence f) {
  if (rt_fence_done_locked(f))
    return;
  stream_ref_locked(f.stream);
  spin_unlocked(fence_done_unlocked, &f);
  while (!rt_fence_done_locked(f)) {
    want_fence_locked(f);
    pthread_cond_wait(&rt.cond, &rt.lock);
  }
  stream_unref_locked(f.stream);
}

/* Waiting may let other threads add or end streams: the list is walked
 * by index, and a stream made meanwhile has nothing older to wait for. */
static void wait_streams_locked(int device, bool learn) {
  for (int i = 0; i < rt.nstreams; i++) {
    Stream *s = rt.streams[i];
    if (device >= 0 && s->device != device)
      continue;
    rt_wait_fence_locked(rt_last_fence_locked(s));
    if (rt.check && learn)
      check_host_sync_locked(s->clock);
  }
}

void rt_sync_device_locked(int device) {
  wait_streams_locked(device, true);
}

void rt_wait_all_locked(void) {
  wait_streams_locked(-1, false);
}

void rt_order_after_devices_locked(Stream *s, unsigned mask) {
  for (int i = 0; i < rt.nstreams; i++) {
    Stream *o = rt.streams[i];
    if (o == s || !(mask & (1u << o->device)))
      continue;
    rt_queue_wait_locked(s, rt_last_fence_locked(o));
    if (rt.check && o->clock)
      clock_join(s->clock, o->clock);
  }
}

/* ---- the worker ---- */

static void stream_free_locked(Stream *s) {
  for (int i = 0; i < rt.nstreams; i++) {
    if (rt.streams[i] == s) {
      rt.streams[i] = rt.streams[--rt.nstreams];
      break;
    }
  }
  pthread_cond_destroy(&s->wake);
  free(s->clock);
  free(s);
}

static bool waits_done_locked(const Task *t) {
  for (int i = 0; i < t->nwaits; i++)
    if (!rt_fence_done_locked(t->waits[i]))
      return false;
  return true;
}

/*
 * The op to run for task t: t's own, or one that also does the work of
 * the tasks queued right behind it that its absorb function can fold in
 * (a convolution takes the bias addition and activation after it, saving
 * their passes over memory and their hand-offs). A task is folded only if
 * it needs no further waiting and the one before it records no event, so
 * every event still marks the same point of the stream. *last is the last
 * task the returned op completes.
 */
static Op *absorb_followers_locked(Task *t, void *plan, Task **last) {
  Op *op = t->op;
  *last = t;
  if (!op || !op->absorb)
    return op;
  Task *next = t->next;
  while (!(*last)->record && next && next->op && waits_done_locked(next) &&
         op->absorb(op, next->op, plan)) {
    op = plan;
    *last = next;
    next = next->next;
  }
  return op;
}

typedef struct Idle {
  const Stream *s;
  uint64_t pushed; /* s->pushed when the worker found its queue empty */
} Idle;

static bool work_queued_unlocked(const void *arg) {
  const Idle *idle = arg;
  return __atomic_load_n(&idle->s->pushed, __ATOMIC_ACQUIRE) != idle->pushed;
}

static void *worker(void *arg) {
  Stream *s = arg;
  pthread_mutex_lock(&rt.lock);
  for (;;) {
    if (!s->head && !s->stop)
      spin_unlocked(work_queued_unlocked, &(Idle){s, s->pushed});
    while (!s->head && !s->stop)
      pthread_cond_wait(&s->wake, &rt.lock);
    if (!s->head)
      break;
    Task *t = s->head;
    while (!task_ready_locked(t))
      pthread_cond_wait(&rt.cond, &rt.lock);
    _Alignas(max_align_t) char plan[OP_PLAN_BYTES];
    Task *last = t;
    Op *op = absorb_followers_locked(t, plan, &last);
    pthread_mutex_unlock(&rt.lock);
    graph_set_running(t->exec);
    if (op)
      op->run(op);
    graph_set_running(NULL);
    /* Folding stops at a task that records, so only the last one can. */
    double now = last->record ? rt_now_ms() : 0;
    pthread_mutex_lock(&rt.lock);
    for (bool more = true; more;) {
      t = s->head;
      more = t != last;
      if (t->record && t->record->gen == t->record_gen) {
        t->record->time_ms = now;
        t->record->timed_gen = t->record_gen;
      }
      s->head = t->next;
      if (!s->head)
        s->tail = NULL;
      __atomic_store_n(&s->done_seq, t->seq, __ATOMIC_RELEASE);
      task_free_locked(t);
    }
    if (s->done_seq >= s->want_seq) {
      s->want_seq = UINT64_MAX;
      pthread_cond_broadcast(&rt.cond);
    }
  }
  stream_free_locked(s);
  pthread_cond_broadcast(&rt.cond);
  pthread_mutex_unlock(&rt.lock);
  return NULL;
}

static Stream *stream_new_locked(unsigned flags, int device, bool legacy) {
  Stream *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  if (rt.nstreams == rt.capstreams) {
    int cap = rt.capstreams ? 2 * rt.capstreams : 8;
    Stream **list = realloc(rt.streams, cap * sizeof *list);
    if (!list) {
      free(s);
      return NULL;
    }
    rt.streams = list;
    rt.capstreams = cap;
  }
  /* Every legacy stream is 0: reports name the device besides. */
  s->id = legacy ? 0 : ++rt.next_stream_id;
  s->device = device;
  s->flags = flags;
  s->refs = 1;
  s->next_seq = 1;
  s->want_seq = UINT64_MAX;
  s->agent = -1;
  pthread_cond_init(&s->wake, NULL);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int failed = pthread_create(&s->thread, &attr, worker, s);
  pthread_attr_destroy(&attr);
  if (failed) {
    pthread_cond_destroy(&s->wake);
    free(s);
    return NULL;
  }
  rt.streams[rt.nstreams++] = s;
  if (rt.check)
    check_stream_created_locked(s);
  return s;
}

void stream_ref_locked(Stream *s) {
  s->refs++;
}

void stream_unref_locked(Stream *s) {
  if (--s->refs == 0) {
    s->stop = true;
    pthread_cond_signal(&s->wake);
  }
}

/* ---- stream API ---- */

/*
 * Why the host may not wait for s (or ask whether it is done) now, or
 * cudaSuccess: s is being captured, and that capture is invalidated, or s
 * is the legacy stream and would join a capture. rt.lock held.
 */
static cudaError_t stream_sync_error_locked(Stream *s) {
  if (s->capture) {
    capture_invalidate_locked(s->capture);
    return cudaErrorStreamCaptureUnsupported;
  }
  if (rt_is_legacy(s) && capture_blocks_legacy_locked(s->device, true))
    return cudaErrorStreamCaptureImplicit;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!pStream || (flags & ~cudaStreamNonBlocking))
    return rt_error(cudaErrorInvalidValue);
  pthread_mutex_lock(&rt.lock);
  Stream *s = stream_new_locked(flags, rt_device(), false);
  pthread_mutex_unlock(&rt.lock);
  if (!s)
    return rt_error(cudaErrorMemoryAllocation);
  *pStream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority) {
  (void)priority;
  return cudaStreamCreateWithFlags(pStream, flags);
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (leastPriority)
    *leastPriority = 0;
  if (greatestPriority)
    *greatestPriority = 0;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream) {
  return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  Stream *s = rt_stream(stream);
  if (rt_is_legacy(s))
    return rt_error(cudaErrorInvalidResourceHandle);
  pthread_mutex_lock(&rt.lock);
  if (s->destroyed) {
    pthread_mutex_unlock(&rt.lock);
    return rt_error(cudaErrorInvalidResourceHandle);
  }
  if (s->capture) {
    capture_invalidate_locked(s->capture);
    pthread_mutex_unlock(&rt.lock);
    return rt_error(cudaErrorStreamCaptureUnsupported);
  }
  /* Pending work still runs; the worker leaves once nothing refers to it. */
  s->destroyed = true;
  stream_unref_locked(s);
  pthread_mutex_unlock(&rt.lock);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  Stream *s = rt_stream(stream);
  pthread_mutex_lock(&rt.lock);
  err = stream_sync_error_locked(s);
  if (!err) {
    rt_wait_fence_locked(rt_last_fence_locked(s));
    if (rt.check)
      check_host_sync_locked(s->clock);
  }
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err ? err : rt_wait_result());
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  Stream *s = rt_stream(stream);
  pthread_mutex_lock(&rt.lock);
  err = stream_sync_error_locked(s);
  if (!err && !rt_fence_done_locked(rt_last_fence_locked(s)))
    err = cudaErrorNotReady;
  pthread_mutex_unlock(&rt.lock);
  return query_result(err);
}

cudaError_t rt_device_sync(void) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  pthread_mutex_lock(&rt.lock);
  if (rt.ncaptures > 0) {
    /* The device encompasses every capture, whatever the thread or mode. */
    capture_invalidate_all_locked();
    pthread_mutex_unlock(&rt.lock);
    return rt_error(cudaErrorStreamCaptureUnsupported);
  }
  rt_sync_device_locked(rt_device());
  pthread_mutex_unlock(&rt.lock);
  return rt_error(rt_wait_result());
}

cudaError_t cudaDeviceSynchronize(void) {
  return rt_device_sync();
}

/* ---- host functions ---- */

typedef struct HostFnOp {
  Op op;
  cudaHostFn_t fn;
  void *data;
} HostFnOp;

static void run_host_fn(Op *op) {
  HostFnOp *h = (HostFnOp *)op;
  in_host_fn = true;
  h->fn(h->data);
  in_host_fn = false;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!fn)
    return rt_error(cudaErrorInvalidValue);
  HostFnOp *h = op_new(sizeof *h, run_host_fn, "cudaLaunchHostFunc");
  if (!h)
    return rt_error(cudaErrorMemoryAllocation);
  h->fn = fn;
  h->data = userData;
  /* It touches no device memory; CUDA does not say it must be queued
   * from the stream's device. */
  h->op.transfer = true;
  h->op.kind = OP_HOST;
  return rt_submit(stream, &h->op);
}

/* ---- events ---- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!event || (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming)))
    return rt_error(cudaErrorInvalidValue);
  Event *e = calloc(1, sizeof *e);
  if (!e)
    return rt_error(cudaErrorMemoryAllocation);
  e->flags = flags;
  e->device = rt_device();
  e->refs = 1;
  if (rt.check && !(e->clock = clock_new())) {
    free(e);
    return rt_error(cudaErrorMemoryAllocation);
  }
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

static void event_set_fence_locked(Event *e, Fence f) {
  if (e->recorded)
    stream_unref_locked(e->fence.stream);
  stream_ref_locked(f.stream);
  e->fence = f;
  e->recorded = true;
}

void rt_event_record_locked(Stream *s, Event *e) {
  if (rt.check) {
    check_enter_locked(s);
    clock_copy(e->clock, s->clock);
  }
  e->capture = NULL;
  event_set_fence_locked(e, rt_queue_record_locked(s, e));
}

void rt_event_wait_locked(Stream *s, Event *e) {
  if (!e->recorded)
    return;
  if (rt.check) {
    check_enter_locked(s);
    clock_join(s->clock, e->clock);
  }
  rt_queue_wait_locked(s, e->fence);
}

/* rt_enter for a call on event e, which must not be NULL. */
static cudaError_t event_enter(Event *e) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  return e ? cudaSuccess : rt_error(cudaErrorInvalidResourceHandle);
}

/* Why the host may not wait for e (or ask whether it is done) now, or
 * cudaSuccess: e was recorded in a capture, which is invalidated. rt.lock
 * held. */
static cudaError_t event_sync_error_locked(Event *e) {
  if (!e->capture)
    return cudaSuccess;
  capture_invalidate_locked(e->capture);
  return cudaErrorStreamCaptureUnsupported;
}

void event_unref_locked(Event *e) {
  if (--e->refs > 0)
    return;
  if (e->recorded)
    stream_unref_locked(e->fence.stream);
  free(e->clock);
  free(e);
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  cudaError_t err = event_enter(e);
  if (err)
    return err;
  pthread_mutex_lock(&rt.lock);
  if (e->destroyed) {
    pthread_mutex_unlock(&rt.lock);
    return rt_error(cudaErrorInvalidResourceHandle);
  }
  e->destroyed = true;
  event_unref_locked(e);
  pthread_mutex_unlock(&rt.lock);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream) {
  cudaError_t err = event_enter(e);
  if (err)
    return err;
  Stream *s = rt_stream(stream);
  /* The Programming Guide: cudaEventRecord fails if the event and the
   * stream are associated to different devices. */
  if (e->device != s->device)
    return rt_error(cudaErrorInvalidResourceHandle);
  pthread_mutex_lock(&rt.lock);
  if (s->capture) {
    err = capture_record_locked(s, e);
  } else if (rt_is_legacy(s) && capture_blocks_legacy_locked(s->device, true)) {
    err = cudaErrorStreamCaptureImplicit;
  } else {
    rt_event_record_locked(s, e);
  }
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t e, unsigned int flags) {
  cudaError_t err = event_enter(e);
  if (err)
    return err;
  if (flags != 0)
    return rt_error(cudaErrorInvalidValue);
  Stream *s = rt_stream(stream);
  pthread_mutex_lock(&rt.lock);
  if (e->capture) {
    err = capture_wait_locked(s, e);
  } else if (s->capture) {
    /* An event from outside the capture cannot order a captured stream. */
    capture_invalidate_locked(s->capture);
    err = cudaErrorStreamCaptureIsolation;
  } else if (rt_is_legacy(s) && capture_blocks_legacy_locked(s->device, true)) {
    err = cudaErrorStreamCaptureImplicit;
  } else {
    rt_event_wait_locked(s, e);
  }
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err);
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  cudaError_t err = event_enter(e);
  if (err)
    return err;
  pthread_mutex_lock(&rt.lock);
  err = event_sync_error_locked(e);
  if (!err && e->recorded && !rt_fence_done_locked(e->fence))
    err = cudaErrorNotReady;
  pthread_mutex_unlock(&rt.lock);
  return query_result(err);
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  cudaError_t err = event_enter(e);
  if (err)
    return err;
  pthread_mutex_lock(&rt.lock);
  err = event_sync_error_locked(e);
  if (!err && e->recorded) {
    rt_wait_fence_locked(e->fence);
    if (rt.check)
      check_host_sync_locked(e->clock);
  }
  pthread_mutex_unlock(&rt.lock);
  return rt_error(err ? err : rt_wait_result());
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  cudaError_t err = rt_enter();
  if (err)
    return err;
  if (!ms)
    return rt_error(cudaErrorInvalidValue);
  if (!start || !end)
    return rt_error(cudaErrorInvalidResourceHandle);
  pthread_mutex_lock(&rt.lock);
  /* The Programming Guide: it fails for events of two devices. */
  if ((start->flags | end->flags) & cudaEventDisableTiming || start->device != end->device)
    err = cudaErrorInvalidResourceHandle;
  else if (!start->recorded || !end->recorded || start->capture || end->capture)
    err = cudaErrorInvalidResourceHandle;
  else if (!rt_fence_done_locked(start->fence) || !rt_fence_done_locked(end->fence))
    err = cudaErrorNotReady;
  else if (start->timed_gen != start->gen || end->timed_gen != end->gen)
    err = cudaErrorInvalidResourceHandle;
  else
    *ms = (float)(end->time_ms - start->time_ms);
  pthread_mutex_unlock(&rt.lock);
  return query_result(err);
}

cudaError_t rt_submit_for_handle(int device, cudaStream_t stream, Op *op, unsigned *warm,
                                 unsigned bit, bool *cold) {
  cudaError_t err = cudaSuccess;
  *cold = false;
  pthread_mutex_lock(&rt.lock);
  Stream *s = rt_stream_on(stream, device);
  bool eager = !s->capture;
  if (rt_failed()) {
    op_unref(op);
    err = cudaErrorLaunchFailure;
  } else if ((err = rt_launch_device_check(s, op))) {
    /* The handle's kernels would be launched into its device's stream
     * from another device. */
    op_unref(op);
  } else if (!eager && !(*warm & bit)) {
    capture_invalidate_locked(s->capture);
    op_unref(op);
    *cold = true;
  } else {
    err = rt_submit_locked(s, op);
    if (!err && eager)
      *warm |= bit;
  }
  pthread_mutex_unlock(&rt.lock);
  return err;
}
