/*
 * The request launcher: net_submit() and the two threads behind it.
 *
 * Requests wait in a queue per model. The launcher thread takes a round of
 * them, of each model at most its limit (its policy; at most its copies)
 * and no sooner than its interval after the last round that took it, and
 * runs them together: their inputs into the copies' buffers, the CUDA graph
 * captured for that combination of copies, the outputs back, all on the
 * first stream. Rounds follow one another on that stream, so up to
 * ROUNDS_IN_FLIGHT are queued on the device at once, each with pinned
 * staging memory of its own. The completer thread waits for each round in
 * turn, copies its outputs to the callers' buffers and wakes net_wait().
 */

enum { REQUEST_FREE, REQUEST_QUEUED, REQUEST_RUNNING, REQUEST_DONE };
/* Queued, in flight, or finished and not yet collected by net_wait()/net_poll(). */
enum { REQUEST_COUNT = 2 * MODEL_COUNT * QUEUE_CAPACITY + ROUNDS_IN_FLIGHT * INSTANCE_COUNT };

struct request {
  int state;
  int model;
  unsigned generation; /* changes with every reuse of the slot: stale handles are refused */
  int status;          /* NET_OK, or NET_ERROR when its round failed */
  const void *input[MAX_MODEL_IO];
  void *output[MAX_MODEL_IO];
  net_times times;
};

struct round {
  int combo; /* which CUDA graph: the count of requests of each model */
  int count;
  int request[INSTANCE_COUNT]; /* request[k] runs on copy instance[k] */
  int instance[INSTANCE_COUNT];
  unsigned char *staging; /* pinned: every copy's inputs, then outputs (io_info) */
  cudaEvent_t done;
  int failed;
  char why[1024];
};

struct serve {
  pthread_mutex_t lock;
  pthread_cond_t wake_launcher, wake_completer, finished;
  pthread_t launcher, completer;
  int launcher_started, completer_started;
  int stopping;       /* net_destroy(): finish what was submitted, then stop */
  int launcher_done;
  char broken[1024];  /* set when a round failed: later requests fail too */
  struct request request[REQUEST_COUNT];
  int free_request[REQUEST_COUNT];
  int nfree;
  int queue[MODEL_COUNT][QUEUE_CAPACITY];
  int head[MODEL_COUNT], length[MODEL_COUNT];
  int limit[MODEL_COUNT];       /* policy: requests of the model per round */
  double interval[MODEL_COUNT]; /* policy: seconds between two rounds that take it */
  double last_taken[MODEL_COUNT];
  struct round round[ROUNDS_IN_FLIGHT];
  int first_round, rounds; /* in flight: round[first_round], then the next ones */
  long long rounds_started;
};

static double now_seconds(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The message of a call that failed; the caller holds the lock. */
static void set_error(net_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(net_ctx *c, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof c->error, fmt, ap);
  va_end(ap);
}

static int model_queues_empty(const struct serve *s)
{
  for (int m = 0; m < MODEL_COUNT; m++)
    if (s->length[m] > 0)
      return 0;
  return 1;
}

/*
 * Takes a round: of each model whose interval has passed, its queued
 * requests up to its limit, onto its first copies. Returns how many; with
 * none, *wake is the earliest time an interval ends for a model that has
 * requests (0: none waits on an interval).
 */
static int take_round(struct serve *s, struct round *r, double now, double *wake)
{
  int radix = 1;
  r->count = 0;
  r->combo = -1;
  *wake = 0;
  for (int m = 0; m < MODEL_COUNT; m++) {
    int n = s->length[m] < s->limit[m] ? s->length[m] : s->limit[m];
    double opens = s->last_taken[m] + s->interval[m];
    if (n > 0 && now < opens && !s->stopping) {
      if (*wake == 0 || opens < *wake)
        *wake = opens;
      n = 0;
    }
    if (n > 0)
      s->last_taken[m] = now;
    for (int k = 0; k < n; k++) {
      int q = s->queue[m][s->head[m]];
      s->head[m] = (s->head[m] + 1) % QUEUE_CAPACITY;
      s->length[m]--;
      struct request *req = &s->request[q];
      req->state = REQUEST_RUNNING;
      req->times.started = now;
      req->times.instance = k;
      req->times.round = s->rounds_started;
      r->request[r->count] = q;
      r->instance[r->count++] = model_info[m].first_instance + k;
    }
    r->combo += n * radix;
    radix *= model_info[m].instances + 1;
  }
  if (r->count > 0)
    s->rounds_started++;
  return r->count;
}

/* The round's work on the first stream: inputs in, its graph, outputs out.
   Outside the lock; the round's requests are the launcher's alone. */
static int launch_round(net_ctx *c, struct round *r)
{
  struct serve *s = c->serve;
  cudaStream_t stream = c->stream[0];
  cudaError_t err = cudaSuccess;
  const char *what = "";
  for (int k = 0; k < r->count && err == cudaSuccess; k++) {
    const struct request *req = &s->request[r->request[k]];
    int first = instance_info[r->instance[k]].first_input;
    for (int i = 0; i < model_info[req->model].ninputs && err == cudaSuccess; i++) {
      int io = first + i;
      if (io_info[io].bytes == 0)
        continue;
      memcpy(r->staging + io_info[io].staging, req->input[i], (size_t)io_info[io].bytes);
      what = "cudaMemcpyAsync of an input";
      err = cudaMemcpyAsync(c->io[io], r->staging + io_info[io].staging, (size_t)io_info[io].bytes,
                            cudaMemcpyHostToDevice, stream);
    }
  }
  if (err != cudaSuccess) {
    snprintf(r->why, sizeof r->why, "%s: %s", what, cudaGetErrorString(err));
    return 0;
  }
  if (issue_round(c, r->combo) != 0) {
    snprintf(r->why, sizeof r->why, "%s", c->error);
    return 0;
  }
  for (int k = 0; k < r->count && err == cudaSuccess; k++) {
    const struct request *req = &s->request[r->request[k]];
    int first = instance_info[r->instance[k]].first_output;
    for (int o = 0; o < model_info[req->model].noutputs && err == cudaSuccess; o++) {
      int io = first + o;
      if (io_info[io].bytes == 0)
        continue;
      what = "cudaMemcpyAsync of an output";
      err = cudaMemcpyAsync(r->staging + io_info[io].staging, c->io[io], (size_t)io_info[io].bytes,
                            cudaMemcpyDeviceToHost, stream);
    }
  }
  if (err == cudaSuccess) {
    what = "cudaEventRecord";
    err = cudaEventRecord(r->done, stream);
  }
  if (err != cudaSuccess) {
    snprintf(r->why, sizeof r->why, "%s: %s", what, cudaGetErrorString(err));
    return 0;
  }
  return 1;
}

static void *launcher_main(void *arg)
{
  net_ctx *c = arg;
  struct serve *s = c->serve;
  cudaError_t err = cudaSetDevice(c->device);
  pthread_mutex_lock(&s->lock);
  if (err != cudaSuccess)
    snprintf(s->broken, sizeof s->broken, "cudaSetDevice: %s", cudaGetErrorString(err));
  for (;;) {
    double wake = 0;
    if (s->rounds < ROUNDS_IN_FLIGHT) {
      struct round *r = &s->round[(s->first_round + s->rounds) % ROUNDS_IN_FLIGHT];
      if (take_round(s, r, now_seconds(), &wake) > 0) {
        r->failed = s->broken[0] != 0;
        snprintf(r->why, sizeof r->why, "%s", s->broken);
        pthread_mutex_unlock(&s->lock);
        if (!r->failed)
          r->failed = !launch_round(c, r);
        pthread_mutex_lock(&s->lock);
        s->rounds++;
        pthread_cond_signal(&s->wake_completer);
        continue;
      }
    }
    if (s->stopping && model_queues_empty(s))
      break;
    if (wake > 0 && s->rounds < ROUNDS_IN_FLIGHT) {
      struct timespec until;
      until.tv_sec = (time_t)wake;
      until.tv_nsec = (long)((wake - (double)until.tv_sec) * 1e9);
      pthread_cond_timedwait(&s->wake_launcher, &s->lock, &until);
    } else {
      pthread_cond_wait(&s->wake_launcher, &s->lock);
    }
  }
  s->launcher_done = 1;
  pthread_cond_signal(&s->wake_completer);
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* The outputs of a finished round into the callers' buffers. */
static void deliver_outputs(struct serve *s, const struct round *r)
{
  for (int k = 0; k < r->count; k++) {
    const struct request *req = &s->request[r->request[k]];
    int first = instance_info[r->instance[k]].first_output;
    for (int o = 0; o < model_info[req->model].noutputs; o++)
      if (io_info[first + o].bytes > 0)
        memcpy(req->output[o], r->staging + io_info[first + o].staging,
               (size_t)io_info[first + o].bytes);
  }
}

static void *completer_main(void *arg)
{
  net_ctx *c = arg;
  struct serve *s = c->serve;
  cudaError_t err = cudaSetDevice(c->device);
  pthread_mutex_lock(&s->lock);
  if (err != cudaSuccess)
    snprintf(s->broken, sizeof s->broken, "cudaSetDevice: %s", cudaGetErrorString(err));
  for (;;) {
    while (s->rounds == 0 && !s->launcher_done)
      pthread_cond_wait(&s->wake_completer, &s->lock);
    if (s->rounds == 0)
      break;
    struct round *r = &s->round[s->first_round];
    pthread_mutex_unlock(&s->lock);
    if (!r->failed && (err = cudaEventSynchronize(r->done)) != cudaSuccess) {
      snprintf(r->why, sizeof r->why, "cudaEventSynchronize: %s", cudaGetErrorString(err));
      r->failed = 1;
    }
    if (!r->failed)
      deliver_outputs(s, r);
    double finished = now_seconds();
    pthread_mutex_lock(&s->lock);
    if (r->failed && !s->broken[0])
      snprintf(s->broken, sizeof s->broken, "%s", r->why);
    for (int k = 0; k < r->count; k++) {
      struct request *req = &s->request[r->request[k]];
      req->state = REQUEST_DONE;
      req->status = r->failed ? NET_ERROR : NET_OK;
      req->times.finished = finished;
    }
    s->first_round = (s->first_round + 1) % ROUNDS_IN_FLIGHT;
    s->rounds--;
    pthread_cond_broadcast(&s->finished);
    pthread_cond_signal(&s->wake_launcher);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* create(): the queues, the rounds' staging memory and events, the threads. */
static int serve_start(net_ctx *c)
{
  struct serve *s = calloc(1, sizeof *s);
  pthread_condattr_t attr;
  if (!s) {
    snprintf(c->error, sizeof c->error, "out of memory for the request queues");
    return -1;
  }
  c->serve = s;
  pthread_mutex_init(&s->lock, NULL);
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* the launcher's timed waits */
  pthread_cond_init(&s->wake_launcher, &attr);
  pthread_condattr_destroy(&attr);
  pthread_cond_init(&s->wake_completer, NULL);
  pthread_cond_init(&s->finished, NULL);
  for (int i = 0; i < REQUEST_COUNT; i++)
    s->free_request[s->nfree++] = REQUEST_COUNT - 1 - i;
  for (int m = 0; m < MODEL_COUNT; m++) {
    s->limit[m] = model_info[m].policy_limit;
    s->interval[m] = model_info[m].policy_interval_ms * 1e-3;
    s->last_taken[m] = -1e300;
  }
  for (int k = 0; k < ROUNDS_IN_FLIGHT; k++) {
    if (!cuda_ok(c, cudaMallocHost((void **)&s->round[k].staging, STAGING_BYTES), "cudaMallocHost") ||
        !cuda_ok(c, cudaEventCreateWithFlags(&s->round[k].done, cudaEventDisableTiming),
                 "cudaEventCreateWithFlags"))
      return -1;
  }
  if (!cuda_ok(c, cudaGetDevice(&c->device), "cudaGetDevice"))
    return -1;
  if (pthread_create(&s->launcher, NULL, launcher_main, c) != 0) {
    snprintf(c->error, sizeof c->error, "cannot start the launcher thread");
    return -1;
  }
  s->launcher_started = 1;
  if (pthread_create(&s->completer, NULL, completer_main, c) != 0) {
    snprintf(c->error, sizeof c->error, "cannot start the completer thread");
    return -1;
  }
  s->completer_started = 1;
  return 0;
}

/* destroy(): lets the threads finish every submitted request, then frees. */
static void serve_stop(net_ctx *c)
{
  struct serve *s = c->serve;
  if (!s)
    return;
  pthread_mutex_lock(&s->lock);
  s->stopping = 1;
  if (!s->launcher_started)
    s->launcher_done = 1;
  pthread_cond_broadcast(&s->wake_launcher);
  pthread_cond_broadcast(&s->wake_completer);
  pthread_mutex_unlock(&s->lock);
  if (s->launcher_started)
    pthread_join(s->launcher, NULL);
  if (s->completer_started)
    pthread_join(s->completer, NULL);
  for (int k = 0; k < ROUNDS_IN_FLIGHT; k++) {
    if (s->round[k].done)
      cudaEventDestroy(s->round[k].done);
    cudaFreeHost(s->round[k].staging);
  }
  pthread_cond_destroy(&s->wake_launcher);
  pthread_cond_destroy(&s->wake_completer);
  pthread_cond_destroy(&s->finished);
  pthread_mutex_destroy(&s->lock);
  free(s);
  c->serve = NULL;
}

int net_submit(net_ctx *c, int model, const void *const *inputs, void *const *outputs,
               net_request *request)
{
  if (!c || !c->serve)
    return NET_BAD_ARGUMENT;
  struct serve *s = c->serve;
  int status = NET_BAD_ARGUMENT;
  pthread_mutex_lock(&s->lock);
  if (model < 0 || model >= MODEL_COUNT) {
    set_error(c, "net_submit: no model number %d (net_model_index() finds one by name)", model);
  } else if (!request || (model_info[model].ninputs > 0 && !inputs) ||
             (model_info[model].noutputs > 0 && !outputs)) {
    set_error(c, "net_submit: model '%s': no request handle, inputs or outputs given",
              model_info[model].name);
  } else if (s->stopping) {
    set_error(c, "net_submit: model '%s': the context is being destroyed", model_info[model].name);
  } else if (s->broken[0]) {
    status = NET_ERROR;
    set_error(c, "net_submit: an earlier round failed: %s", s->broken);
  } else if (s->length[model] == QUEUE_CAPACITY) {
    status = NET_QUEUE_FULL;
    set_error(c, "net_submit: model '%s': its queue holds %d requests already",
              model_info[model].name, QUEUE_CAPACITY);
  } else if (s->nfree == 0) {
    status = NET_QUEUE_FULL;
    set_error(c, "net_submit: model '%s': %d finished requests wait to be collected with "
              "net_wait() or net_poll()", model_info[model].name, REQUEST_COUNT);
  } else {
    int k = 0;
    for (; k < model_info[model].ninputs && inputs[k]; k++)
      ;
    int o = 0;
    for (; o < model_info[model].noutputs && outputs[o]; o++)
      ;
    if (k < model_info[model].ninputs || o < model_info[model].noutputs) {
      set_error(c, "net_submit: model '%s': %s %d is NULL", model_info[model].name,
                k < model_info[model].ninputs ? "input" : "output",
                k < model_info[model].ninputs ? k : o);
    } else {
      int q = s->free_request[--s->nfree];
      struct request *req = &s->request[q];
      req->state = REQUEST_QUEUED;
      req->model = model;
      req->generation++;
      req->status = NET_OK;
      for (int i = 0; i < model_info[model].ninputs; i++)
        req->input[i] = inputs[i];
      for (int i = 0; i < model_info[model].noutputs; i++)
        req->output[i] = outputs[i];
      memset(&req->times, 0, sizeof req->times);
      req->times.submitted = now_seconds();
      s->queue[model][(s->head[model] + s->length[model]) % QUEUE_CAPACITY] = q;
      s->length[model]++;
      *request = (net_request)req->generation << 32 | (net_request)q;
      status = NET_OK;
      pthread_cond_signal(&s->wake_launcher);
    }
  }
  pthread_mutex_unlock(&s->lock);
  return status;
}

/* The request a handle names, or NULL (reported) when it names none that is
   still to be collected. The caller holds the lock. */
static struct request *find_request(net_ctx *c, net_request handle, const char *call)
{
  struct serve *s = c->serve;
  long long q = handle & 0xffffffffLL;
  struct request *req = q >= 0 && q < REQUEST_COUNT ? &s->request[q] : NULL;
  if (!req || req->state == REQUEST_FREE || req->generation != (unsigned)(handle >> 32)) {
    set_error(c, "%s: %lld is not a request of this context waiting to be collected", call,
              (long long)handle);
    return NULL;
  }
  return req;
}

/* A finished request's status and times; its slot is free again. */
static int collect(net_ctx *c, struct request *req, net_times *times)
{
  struct serve *s = c->serve;
  int status = req->status;
  if (times)
    *times = req->times;
  if (status != NET_OK)
    set_error(c, "model '%s': its round failed: %s", model_info[req->model].name, s->broken);
  req->state = REQUEST_FREE;
  s->free_request[s->nfree++] = (int)(req - s->request);
  return status;
}

int net_wait(net_ctx *c, net_request request, net_times *times)
{
  if (!c || !c->serve)
    return NET_BAD_ARGUMENT;
  struct serve *s = c->serve;
  int status = NET_BAD_ARGUMENT;
  pthread_mutex_lock(&s->lock);
  struct request *req = find_request(c, request, "net_wait");
  if (req) {
    unsigned generation = req->generation;
    while (req->state != REQUEST_DONE && req->generation == generation)
      pthread_cond_wait(&s->finished, &s->lock);
    status = collect(c, req, times);
  }
  pthread_mutex_unlock(&s->lock);
  return status;
}

int net_poll(net_ctx *c, net_request request, net_times *times)
{
  if (!c || !c->serve)
    return NET_BAD_ARGUMENT;
  struct serve *s = c->serve;
  int status = NET_BAD_ARGUMENT;
  pthread_mutex_lock(&s->lock);
  struct request *req = find_request(c, request, "net_poll");
  if (req)
    status = req->state == REQUEST_DONE ? collect(c, req, times) : NET_PENDING;
  pthread_mutex_unlock(&s->lock);
  return status;
}

int net_run(net_ctx *c, int model, const void *const *inputs, void *const *outputs)
{
  net_request request;
  int status = net_submit(c, model, inputs, outputs, &request);
  return status == NET_OK ? net_wait(c, request, NULL) : status;
}

int net_set_policy(net_ctx *c, int model, int limit, double interval_ms)
{
  if (!c || !c->serve)
    return NET_BAD_ARGUMENT;
  struct serve *s = c->serve;
  int status = NET_BAD_ARGUMENT;
  pthread_mutex_lock(&s->lock);
  if (model < 0 || model >= MODEL_COUNT)
    set_error(c, "net_set_policy: no model number %d", model);
  else if (limit < 1 || limit > model_info[model].instances)
    set_error(c, "net_set_policy: model '%s' runs 1 to %d requests per round",
              model_info[model].name, model_info[model].instances);
  else if (!(interval_ms >= 0 && interval_ms <= 3.6e6))
    set_error(c, "net_set_policy: model '%s': the interval must be 0 to 3600000 ms",
              model_info[model].name);
  else {
    s->limit[model] = limit;
    s->interval[model] = interval_ms * 1e-3;
    status = NET_OK;
    pthread_cond_signal(&s->wake_launcher);
  }
  pthread_mutex_unlock(&s->lock);
  return status;
}

int net_queue_length(net_ctx *c, int model)
{
  if (!c || !c->serve || model < 0 || model >= MODEL_COUNT)
    return -1;
  pthread_mutex_lock(&c->serve->lock);
  int length = c->serve->length[model];
  pthread_mutex_unlock(&c->serve->lock);
  return length;
}

/* ------------------------------------------------ models and their tensors */

int net_num_models(void) { return MODEL_COUNT; }

const char *net_model_name(int model)
{
  return model >= 0 && model < MODEL_COUNT ? model_info[model].name : NULL;
}

int net_model_index(const char *name)
{
  for (int m = 0; name && m < MODEL_COUNT; m++)
    if (strcmp(model_info[m].name, name) == 0)
      return m;
  return -1;
}

int net_model_instances(int model)
{
  return model >= 0 && model < MODEL_COUNT ? model_info[model].instances : -1;
}

/* Input (or output) i of a model: its entry in io_info, that of the model's
   first copy; -1 out of range. */
static int model_io(int model, int i, int output)
{
  if (model < 0 || model >= MODEL_COUNT || i < 0 ||
      i >= (output ? model_info[model].noutputs : model_info[model].ninputs))
    return -1;
  const int first = model_info[model].first_instance;
  return (output ? instance_info[first].first_output : instance_info[first].first_input) + i;
}

int net_num_inputs(int model)
{
  return model >= 0 && model < MODEL_COUNT ? model_info[model].ninputs : -1;
}

int net_num_outputs(int model)
{
  return model >= 0 && model < MODEL_COUNT ? model_info[model].noutputs : -1;
}

const char *net_input_name(int model, int i)
{
  int k = model_io(model, i, 0);
  return k < 0 ? NULL : io_info[k].name;
}

const char *net_output_name(int model, int i)
{
  int k = model_io(model, i, 1);
  return k < 0 ? NULL : io_info[k].name;
}

const char *net_input_type(int model, int i)
{
  int k = model_io(model, i, 0);
  return k < 0 ? NULL : io_info[k].type;
}

const char *net_output_type(int model, int i)
{
  int k = model_io(model, i, 1);
  return k < 0 ? NULL : io_info[k].type;
}

int net_input_element_size(int model, int i)
{
  int k = model_io(model, i, 0);
  return k < 0 ? -1 : io_info[k].element_size;
}

int net_output_element_size(int model, int i)
{
  int k = model_io(model, i, 1);
  return k < 0 ? -1 : io_info[k].element_size;
}

int net_input_rank(int model, int i)
{
  int k = model_io(model, i, 0);
  return k < 0 ? -1 : io_info[k].rank;
}

int net_output_rank(int model, int i)
{
  int k = model_io(model, i, 1);
  return k < 0 ? -1 : io_info[k].rank;
}

const long long *net_input_dims(int model, int i)
{
  int k = model_io(model, i, 0);
  return k < 0 ? NULL : io_info[k].dims;
}

const long long *net_output_dims(int model, int i)
{
  int k = model_io(model, i, 1);
  return k < 0 ? NULL : io_info[k].dims;
}
