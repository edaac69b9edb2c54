/*
 * pool.c - the thread pool that splits one operation across the cores.
 *
 * Several streams may run operations at once, so the pool keeps a list of
 * jobs; helpers take parts from any job, and the thread that submitted a job
 * works on its own job too. That keeps every job moving even when all
 * helpers are busy, and nested use cannot deadlock. OpenBLAS runs one
 * thread (blas.c): the pool hands it disjoint blocks instead, so the machine
 * is never oversubscribed by two thread pools.
 *
 * Operations follow each other within microseconds, and waking a sleeping
 * thread costs about as much as a small operation. So an idle helper, and a
 * submitter waiting for its last parts, first spin for a short while
 * (SPIN_NS) before they sleep, and nobody signals a condition variable
 * unless a thread sleeps on it.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rt.h"

/* How long an idle thread polls before it sleeps: longer than the gap
 * between two operations of a stream, far shorter than a scheduler tick. */
#define SPIN_NS 50000

typedef struct Job {
  PartFn *fn;
  void *ctx;
  int nparts;
  int next;      /* the next part to hand out */
  int done;      /* parts finished; written under the lock, polled atomically */
  bool sleeping; /* the submitter sleeps on pool.done */
  struct Job *link;
} Job;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t work; /* a job was posted */
  pthread_cond_t done; /* a job finished */
  pthread_once_t once;
  Job *jobs;           /* jobs with parts left to hand out */
  int posted;          /* bumped with every job, polled atomically by spinners */
  int sleepers;        /* helpers sleeping on `work` */
  int nthreads;        /* helpers + the submitting thread */
} pool = {
  .lock = PTHREAD_MUTEX_INITIALIZER,
  .work = PTHREAD_COND_INITIALIZER,
  .done = PTHREAD_COND_INITIALIZER,
  .once = PTHREAD_ONCE_INIT,
};

/* Hands out the next part of the first job; pool.lock held. */
static bool take_part(Job **job, int *part) {
  Job *j = pool.jobs;
  if (!j)
    return false;
  *job = j;
  *part = j->next++;
  if (j->next == j->nparts)
    pool.jobs = j->link;
  return true;
}

static void finish_part(Job *j) {
  int done = j->done + 1;
  __atomic_store_n(&j->done, done, __ATOMIC_RELEASE);
  if (done == j->nparts && j->sleeping)
    pthread_cond_broadcast(&pool.done);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Polls *p (without the lock) until it differs from `was` or SPIN_NS pass;
 * returns whether it changed. */
static bool spin_until_change(const int *p, int was) {
  long long end = now_ns() + SPIN_NS;
  for (;;) {
    for (int i = 0; i < 64; i++) {
      if (__atomic_load_n(p, __ATOMIC_ACQUIRE) != was)
        return true;
      cpu_relax();
    }
    if (now_ns() > end)
      return false;
  }
}

static void *helper(void *arg) {
  (void)arg;
  pthread_mutex_lock(&pool.lock);
  for (;;) {
    Job *j;
    int part;
    while (!take_part(&j, &part)) {
      int posted = pool.posted;
      pthread_mutex_unlock(&pool.lock);
      bool more = spin_until_change(&pool.posted, posted);
      pthread_mutex_lock(&pool.lock);
      if (more || pool.jobs)
        continue;
      pool.sleepers++;
      pthread_cond_wait(&pool.work, &pool.lock);
      pool.sleepers--;
    }
    pthread_mutex_unlock(&pool.lock);
    j->fn(j->ctx, part, j->nparts);
    pthread_mutex_lock(&pool.lock);
    finish_part(j);
  }
  return NULL;
}

static void start_pool(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  const char *env = getenv("OPC_THREADS");
  if (env && atoi(env) > 0)
    n = atoi(env);
  if (n < 1)
    n = 1;
  if (n > 256)
    n = 256;
  pool.nthreads = 1;
  for (long i = 1; i < n; i++) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int failed = pthread_create(&t, &attr, helper, NULL);
    pthread_attr_destroy(&attr);
    if (failed)
      break;
    pool.nthreads++;
  }
}

int pool_threads(void) {
  pthread_once(&pool.once, start_pool);
  return pool.nthreads;
}

int pool_parts(long long work, long long grain) {
  int threads = pool_threads();
  if (threads == 1 || grain < 1 || work <= grain)
    return 1;
  long long parts = work / grain;
  /* A few parts per thread even out parts of unequal speed. */
  if (parts > 4LL * threads)
    parts = 4LL * threads;
  return (int)parts;
}

void pool_run(PartFn *fn, void *ctx, int nparts) {
  if (nparts <= 0)
    return;
  if (nparts == 1 || pool_threads() == 1) {
    for (int p = 0; p < nparts; p++)
      fn(ctx, p, nparts);
    return;
  }
  Job job = {.fn = fn, .ctx = ctx, .nparts = nparts};
  pthread_mutex_lock(&pool.lock);
  Job **tail = &pool.jobs;
  while (*tail)
    tail = &(*tail)->link;
  *tail = &job;
  __atomic_store_n(&pool.posted, pool.posted + 1, __ATOMIC_RELEASE);
  if (pool.sleepers > 0)
    pthread_cond_broadcast(&pool.work);
  /* Work on our own job until every part has been handed out. */
  while (job.next < nparts) {
    int part = job.next++;
    if (job.next == nparts) {
      Job **p = &pool.jobs;
      while (*p != &job)
        p = &(*p)->link;
      *p = job.link;
    }
    pthread_mutex_unlock(&pool.lock);
    fn(ctx, part, nparts);
    pthread_mutex_lock(&pool.lock);
    finish_part(&job);
  }
  while (job.done < nparts) {
    int done = job.done;
    pthread_mutex_unlock(&pool.lock);
    bool moved = spin_until_change(&job.done, done);
    pthread_mutex_lock(&pool.lock);
    if (moved || job.done == nparts)
      continue;
    job.sleeping = true;
    pthread_cond_wait(&pool.done, &pool.lock);
    job.sleeping = false;
  }
  pthread_mutex_unlock(&pool.lock);
}

/* ---- scratch ---- */

typedef struct Scratch {
  void *p[4];
  size_t size[4];
} Scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void free_scratch(void *arg) {
  Scratch *s = arg;
  for (int i = 0; i < 4; i++)
    free(s->p[i]);
  free(s);
}

static void make_scratch_key(void) {
  pthread_key_create(&scratch_key, free_scratch);
}

void *scratch(int slot, size_t bytes) {
  pthread_once(&scratch_once, make_scratch_key);
  Scratch *s = pthread_getspecific(scratch_key);
  if (!s) {
    s = calloc(1, sizeof *s);
    if (!s)
      return NULL;
    pthread_setspecific(scratch_key, s);
  }
  if (bytes == 0)
    bytes = 64;
  if (s->size[slot] < bytes) {
    size_t want = bytes + bytes / 4;
    void *p = NULL;
    if (posix_memalign(&p, 64, want) != 0)
      return NULL;
    free(s->p[slot]);
    s->p[slot] = p;
    s->size[slot] = want;
  }
  return s->p[slot];
}
