/*
 * contexts.c - the baseline of the throughput benchmark: what a user does
 * without a serving program. Each model is its own single-model program
 * (opc MODEL.onnx --prefix mK -DOPC_NO_MAIN); `--contexts K` gives each
 * model K contexts, each driven by a thread of its own that takes the
 * model's next request from a shared queue and runs it with mK_run().
 *
 * It implements the part of a serving program's API that the serving
 * program's own main uses (net_submit, net_wait, net_queue_length, the
 * model tables) over those contexts, and then includes that main
 * (backend/serve_main_template.c), so that both sides generate the same
 * Poisson arrivals and report the same figures the same way.
 *
 * models.h, written by bench_throughput.py, includes each model's header
 * and defines MODEL_COUNT and the table `programs[]` of its functions.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

/* One single-model program, through wrappers that take its context as void *. */
typedef struct Program {
  const char *name, *weights; /* its weights file, beside the program */
  int (*create)(void **ctx, const char *weights_path);
  int (*run)(void *ctx, const void *const *inputs, void *const *outputs);
  void (*destroy)(void *ctx);
  const char *(*error)(void *ctx);
  int (*num_inputs)(void), (*num_outputs)(void);
  const char *(*input_name)(int), *(*output_name)(int);
  const char *(*input_type)(int), *(*output_type)(int);
  int (*input_element_size)(int), (*output_element_size)(int);
  int (*input_rank)(int), (*output_rank)(int);
  const long long *(*input_dims)(int), *(*output_dims)(int);
} Program;

#include "models.h"

enum { MAX_MODEL_IO = 16, QUEUE_CAPACITY = 256, MAX_CONTEXTS = 16 };
enum { NET_OK = 0, NET_ERROR = -1, NET_QUEUE_FULL = -2, NET_BAD_ARGUMENT = -3, NET_PENDING = 1 };
typedef long long net_request;
typedef struct net_times {
  double submitted, started, finished;
  int instance;    /* the context that ran it */
  long long round; /* each request is a round of its own here */
} net_times;

enum { REQUEST_COUNT = 2 * MODEL_COUNT * QUEUE_CAPACITY };

typedef struct Request {
  int busy; /* taken and not yet collected */
  int done, status, model;
  const void *const *inputs;
  void *const *outputs;
  net_times times;
} Request;

typedef struct Worker {
  struct net_ctx *c;
  int model, index;
  void *ctx; /* the model's own context */
  pthread_t thread;
} Worker;

typedef struct net_ctx {
  pthread_mutex_t lock;
  pthread_cond_t work, finished;
  Request request[REQUEST_COUNT];
  int queue[MODEL_COUNT][QUEUE_CAPACITY], head[MODEL_COUNT], length[MODEL_COUNT];
  Worker worker[MODEL_COUNT][MAX_CONTEXTS];
  int contexts, started, stopping;
  long long rounds;
  char error[1024];
} net_ctx;

static int contexts_per_model = 1; /* --contexts, read before main() */

static double now_seconds(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *worker_main(void *arg)
{
  Worker *w = arg;
  net_ctx *c = w->c;
  pthread_mutex_lock(&c->lock);
  for (;;) {
    while (c->length[w->model] == 0 && !c->stopping)
      pthread_cond_wait(&c->work, &c->lock);
    if (c->length[w->model] == 0)
      break;
    int q = c->queue[w->model][c->head[w->model]];
    c->head[w->model] = (c->head[w->model] + 1) % QUEUE_CAPACITY;
    c->length[w->model]--;
    Request *r = &c->request[q];
    r->times.started = now_seconds();
    r->times.instance = w->index;
    r->times.round = c->rounds++;
    pthread_mutex_unlock(&c->lock);
    int status = programs[w->model].run(w->ctx, r->inputs, r->outputs);
    pthread_mutex_lock(&c->lock);
    if (status != 0)
      snprintf(c->error, sizeof c->error, "%s: %s", programs[w->model].name,
               programs[w->model].error(w->ctx));
    r->status = status == 0 ? NET_OK : NET_ERROR;
    r->times.finished = now_seconds();
    r->done = 1;
    pthread_cond_broadcast(&c->finished);
  }
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

int net_num_models(void) { return MODEL_COUNT; }
const char *net_model_name(int m) { return m >= 0 && m < MODEL_COUNT ? programs[m].name : NULL; }

int net_model_index(const char *name)
{
  for (int m = 0; name && m < MODEL_COUNT; m++)
    if (strcmp(programs[m].name, name) == 0)
      return m;
  return -1;
}

int net_num_inputs(int m) { return programs[m].num_inputs(); }
int net_num_outputs(int m) { return programs[m].num_outputs(); }
const char *net_input_name(int m, int i) { return programs[m].input_name(i); }
const char *net_output_name(int m, int i) { return programs[m].output_name(i); }
const char *net_input_type(int m, int i) { return programs[m].input_type(i); }
const char *net_output_type(int m, int i) { return programs[m].output_type(i); }
int net_input_element_size(int m, int i) { return programs[m].input_element_size(i); }
int net_output_element_size(int m, int i) { return programs[m].output_element_size(i); }
int net_input_rank(int m, int i) { return programs[m].input_rank(i); }
int net_output_rank(int m, int i) { return programs[m].output_rank(i); }
const long long *net_input_dims(int m, int i) { return programs[m].input_dims(i); }
const long long *net_output_dims(int m, int i) { return programs[m].output_dims(i); }

const char *net_error(const net_ctx *c) { return c ? c->error : "out of memory"; }

/* Every model's `contexts_per_model` contexts, each with its thread. */
int net_create(net_ctx **ctx, const char *weights_dir)
{
  net_ctx *c = calloc(1, sizeof *c);
  *ctx = c;
  if (!c)
    return -1;
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->work, NULL);
  pthread_cond_init(&c->finished, NULL);
  c->contexts = contexts_per_model;
  for (int m = 0; m < MODEL_COUNT; m++)
    for (int k = 0; k < c->contexts; k++) {
      Worker *w = &c->worker[m][k];
      *w = (Worker){c, m, k, NULL, 0};
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", weights_dir ? weights_dir : ".", programs[m].weights);
      if (programs[m].create(&w->ctx, weights_dir ? path : NULL) != 0) {
        snprintf(c->error, sizeof c->error, "%s: %s", programs[m].name, programs[m].error(w->ctx));
        return -1;
      }
    }
  for (int m = 0; m < MODEL_COUNT; m++)
    for (int k = 0; k < c->contexts; k++)
      pthread_create(&c->worker[m][k].thread, NULL, worker_main, &c->worker[m][k]);
  c->started = 1;
  return 0;
}

void net_destroy(net_ctx *c)
{
  if (!c)
    return;
  if (c->started) {
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    pthread_cond_broadcast(&c->work);
    pthread_mutex_unlock(&c->lock);
    for (int m = 0; m < MODEL_COUNT; m++)
      for (int k = 0; k < c->contexts; k++)
        pthread_join(c->worker[m][k].thread, NULL);
  }
  for (int m = 0; m < MODEL_COUNT; m++)
    for (int k = 0; k < c->contexts; k++)
      if (c->worker[m][k].ctx)
        programs[m].destroy(c->worker[m][k].ctx);
  free(c);
}

int net_submit(net_ctx *c, int model, const void *const *inputs, void *const *outputs,
               net_request *request)
{
  pthread_mutex_lock(&c->lock);
  int status = NET_QUEUE_FULL;
  if (c->length[model] < QUEUE_CAPACITY) {
    for (int q = 0; q < REQUEST_COUNT; q++)
      if (!c->request[q].busy) {
        Request *r = &c->request[q];
        *r = (Request){1, 0, NET_OK, model, inputs, outputs, {now_seconds(), 0, 0, 0, 0}};
        c->queue[model][(c->head[model] + c->length[model]) % QUEUE_CAPACITY] = q;
        c->length[model]++;
        *request = q;
        status = NET_OK;
        pthread_cond_broadcast(&c->work);
        break;
      }
  }
  pthread_mutex_unlock(&c->lock);
  return status;
}

int net_wait(net_ctx *c, net_request request, net_times *times)
{
  pthread_mutex_lock(&c->lock);
  Request *r = &c->request[request];
  while (!r->done)
    pthread_cond_wait(&c->finished, &c->lock);
  int status = r->status;
  if (times)
    *times = r->times;
  r->busy = 0;
  pthread_mutex_unlock(&c->lock);
  return status;
}

int net_queue_length(net_ctx *c, int model)
{
  pthread_mutex_lock(&c->lock);
  int n = c->length[model];
  pthread_mutex_unlock(&c->lock);
  return n;
}

int net_set_policy(net_ctx *c, int model, int limit, double interval_ms)
{
  (void)model, (void)limit, (void)interval_ms;
  snprintf(c->error, sizeof c->error, "independent contexts have no launcher policy");
  return NET_BAD_ARGUMENT;
}

static void describe(const net_ctx *c) { (void)c; }

/* The serving main looks for the weights files beside the program. */
static const char *weights_file[MODEL_COUNT];

#define main serving_main
#include "serve_main_template.c"
#undef main

/* --contexts K, then the serving main's own options. */
int main(int argc, char **argv)
{
  for (int m = 0; m < MODEL_COUNT; m++)
    weights_file[m] = programs[m].weights;
  if (argc > 2 && strcmp(argv[1], "--contexts") == 0) {
    contexts_per_model = atoi(argv[2]);
    argv[2] = argv[0];
    argv += 2;
    argc -= 2;
  }
  if (contexts_per_model < 1 || contexts_per_model > MAX_CONTEXTS) {
    fprintf(stderr, "contexts: --contexts must be 1 to %d\n", MAX_CONTEXTS);
    return 1;
  }
  return serving_main(argc, argv);
}
