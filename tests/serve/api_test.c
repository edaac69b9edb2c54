/*
 * api_test.c - what the serving API promises, checked against a serving
 * program built with -DOPC_NO_MAIN (test_serve.py builds it with
 * -DSERVE_H='"serve.h"'):
 *   - a full queue refuses a request with NET_QUEUE_FULL, and no request
 *     taken is lost: each one finishes with the right outputs;
 *   - an unknown model, a stale or made-up handle, a NULL buffer and a bad
 *     policy are refused with NET_BAD_ARGUMENT and a message;
 *   - net_poll() says NET_PENDING until the request is done;
 *   - threads submitting and waiting at once get their own outputs;
 *   - net_destroy() with requests in flight finishes them first.
 * Outputs are compared bit for bit with those of net_run() on the same
 * inputs. usage: api_test WEIGHTS_DIR; exit status 0 when every check holds.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include SERVE_H

static int failures;

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "api_test: line %d: ", __LINE__);                    \
      fprintf(stderr, __VA_ARGS__);                                        \
      fputc('\n', stderr);                                                 \
      failures++;                                                          \
    }                                                                      \
  } while (0)

typedef struct {
  void *in[16], *out[16];
  size_t in_bytes[16], out_bytes[16];
} Buffers;

static size_t bytes_of(int rank, const long long *dims, int size) {
  size_t n = (size_t)size;
  for (int i = 0; i < rank; i++)
    n *= (size_t)dims[i];
  return n;
}

/* Buffers for model m, inputs filled from `seed`: small integers, valid as
   any type's values (indices, masks and floats alike). */
static void make_buffers(int m, unsigned seed, Buffers *b) {
  memset(b, 0, sizeof *b);
  for (int i = 0; i < net_num_inputs(m); i++) {
    b->in_bytes[i] = bytes_of(net_input_rank(m, i), net_input_dims(m, i), net_input_element_size(m, i));
    unsigned char *p = calloc(b->in_bytes[i] + 1, 1);
    int size = net_input_element_size(m, i);
    int is_float = strncmp(net_input_type(m, i), "float", 5) == 0 && size == 4;
    for (size_t k = 0; k < b->in_bytes[i] / (size_t)size; k++) {
      seed = seed * 1103515245u + 12345u;
      if (is_float) {
        float v = (float)((seed >> 16) % 2001) / 1000.0f - 1.0f;
        memcpy(p + k * 4, &v, 4);
      } else {
        p[k * (size_t)size] = (unsigned char)((seed >> 16) % 2); /* 0 or 1, little-endian */
      }
    }
    b->in[i] = p;
  }
  for (int o = 0; o < net_num_outputs(m); o++) {
    b->out_bytes[o] = bytes_of(net_output_rank(m, o), net_output_dims(m, o), net_output_element_size(m, o));
    b->out[o] = calloc(b->out_bytes[o] + 1, 1);
  }
}

static void free_buffers(Buffers *b) {
  for (int i = 0; i < 16; i++) {
    free(b->in[i]);
    free(b->out[i]);
  }
}

static int same_outputs(int m, const Buffers *a, const Buffers *b) {
  for (int o = 0; o < net_num_outputs(m); o++)
    if (memcmp(a->out[o], b->out[o], a->out_bytes[o]) != 0)
      return 0;
  return 1;
}

static net_ctx *ctx;
static Buffers reference[64]; /* per model: seed 1, through net_run() */

static void check_references(void) {
  for (int m = 0; m < net_num_models(); m++) {
    make_buffers(m, 1, &reference[m]);
    int s = net_run(ctx, m, (const void *const *)reference[m].in, reference[m].out);
    CHECK(s == NET_OK, "net_run of model %d: %d, %s", m, s, net_error(ctx));
  }
}

static void check_bad_arguments(void) {
  Buffers b;
  make_buffers(0, 1, &b);
  net_request r = 0;
  CHECK(net_model_index(net_model_name(0)) == 0, "net_model_index of the first model");
  CHECK(net_model_index("no such model") == -1, "net_model_index of an unknown name");
  CHECK(net_submit(ctx, -1, (const void *const *)b.in, b.out, &r) == NET_BAD_ARGUMENT,
        "model -1 accepted");
  CHECK(strstr(net_error(ctx), "no model number -1") != NULL, "message: %s", net_error(ctx));
  CHECK(net_submit(ctx, net_num_models(), (const void *const *)b.in, b.out, &r) == NET_BAD_ARGUMENT,
        "model past the last accepted");
  CHECK(net_submit(ctx, 0, NULL, b.out, &r) == NET_BAD_ARGUMENT || net_num_inputs(0) == 0,
        "NULL inputs accepted");
  CHECK(net_wait(ctx, 123456789, NULL) == NET_BAD_ARGUMENT, "a made-up handle accepted");
  CHECK(net_poll(ctx, -1, NULL) == NET_BAD_ARGUMENT, "handle -1 accepted");
  CHECK(net_set_policy(ctx, 0, 0, 0) == NET_BAD_ARGUMENT, "limit 0 accepted");
  CHECK(net_set_policy(ctx, 0, net_model_instances(0) + 1, 0) == NET_BAD_ARGUMENT,
        "a limit above the instances accepted");
  CHECK(net_set_policy(ctx, 0, 1, -1) == NET_BAD_ARGUMENT, "a negative interval accepted");
  CHECK(net_queue_length(ctx, -1) == -1, "queue length of model -1");
  /* A collected handle is stale. */
  CHECK(net_submit(ctx, 0, (const void *const *)b.in, b.out, &r) == NET_OK, "submit: %s",
        net_error(ctx));
  CHECK(net_wait(ctx, r, NULL) == NET_OK, "wait: %s", net_error(ctx));
  CHECK(net_wait(ctx, r, NULL) == NET_BAD_ARGUMENT, "a collected handle waited for twice");
  CHECK(strstr(net_error(ctx), "not a request") != NULL, "message: %s", net_error(ctx));
  free_buffers(&b);
}

/* The launcher holds model 0 back (a long interval) until its queue fills. */
static void check_full_queue(void) {
  enum { MOST = 4096 };
  static Buffers b[MOST];
  static net_request r[MOST];
  int n = 0, status = NET_OK;
  CHECK(net_set_policy(ctx, 0, 1, 3.6e6) == NET_OK, "policy: %s", net_error(ctx));
  for (; n < MOST; n++) {
    make_buffers(0, 1, &b[n]);
    status = net_submit(ctx, 0, (const void *const *)b[n].in, b[n].out, &r[n]);
    if (status != NET_OK)
      break;
  }
  CHECK(status == NET_QUEUE_FULL, "no full queue after %d requests (status %d)", n, status);
  CHECK(strstr(net_error(ctx), "its queue holds") != NULL, "message: %s", net_error(ctx));
  int queued = net_queue_length(ctx, 0);
  CHECK(queued == n || queued == n - 1, "queue length %d after %d requests, at most one taken",
        queued, n);
  /* The refused request was not taken; every taken one finishes. */
  CHECK(net_set_policy(ctx, 0, net_model_instances(0), 0) == NET_OK, "policy: %s", net_error(ctx));
  for (int i = 0; i < n; i++) {
    net_times t;
    CHECK(net_wait(ctx, r[i], &t) == NET_OK, "request %d: %s", i, net_error(ctx));
    CHECK(same_outputs(0, &b[i], &reference[0]), "request %d: wrong outputs", i);
    CHECK(t.submitted <= t.started && t.started <= t.finished, "request %d: times out of order", i);
  }
  for (int i = 0; i <= n && i < MOST; i++)
    free_buffers(&b[i]);
}

static void check_poll(void) {
  Buffers b;
  make_buffers(0, 1, &b);
  net_request r;
  CHECK(net_submit(ctx, 0, (const void *const *)b.in, b.out, &r) == NET_OK, "submit");
  int s;
  long spins = 0;
  while ((s = net_poll(ctx, r, NULL)) == NET_PENDING)
    spins++;
  CHECK(s == NET_OK, "poll ended with %d: %s", s, net_error(ctx));
  CHECK(same_outputs(0, &b, &reference[0]), "polled request: wrong outputs");
  free_buffers(&b);
}

enum { THREADS = 4, PER_THREAD = 12 };

static void *client(void *arg) {
  long id = (long)arg;
  for (int k = 0; k < PER_THREAD; k++) {
    int m = (int)((id + k) % net_num_models());
    Buffers b;
    make_buffers(m, 1, &b);
    net_request r;
    int s = net_submit(ctx, m, (const void *const *)b.in, b.out, &r);
    if (s == NET_OK)
      s = net_wait(ctx, r, NULL);
    CHECK(s == NET_OK, "thread %ld request %d: %s", id, k, net_error(ctx));
    CHECK(s != NET_OK || same_outputs(m, &b, &reference[m]), "thread %ld request %d: wrong outputs",
          id, k);
    free_buffers(&b);
  }
  return NULL;
}

static void check_threads(void) {
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++)
    pthread_create(&t[i], NULL, client, (void *)i);
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
}

/* Requests still queued when the context goes: they finish first. */
static void check_destroy(const char *weights) {
  net_ctx *c = NULL;
  CHECK(net_create(&c, weights) == 0, "create: %s", net_error(c));
  Buffers b[8];
  for (int i = 0; i < 8; i++) {
    int m = i % net_num_models();
    make_buffers(m, 1, &b[i]);
    net_request r;
    CHECK(net_submit(c, m, (const void *const *)b[i].in, b[i].out, &r) == NET_OK, "submit");
  }
  net_destroy(c);
  for (int i = 0; i < 8; i++) {
    CHECK(same_outputs(i % net_num_models(), &b[i], &reference[i % net_num_models()]),
          "request %d left unfinished by net_destroy", i);
    free_buffers(&b[i]);
  }
}

int main(int argc, char **argv) {
  const char *weights = argc > 1 ? argv[1] : NULL;
  if (net_create(&ctx, weights) != 0) {
    fprintf(stderr, "api_test: create: %s\n", net_error(ctx));
    net_destroy(ctx);
    return 1;
  }
  check_references();
  check_bad_arguments();
  check_full_queue();
  check_poll();
  check_threads();
  net_destroy(ctx);
  check_destroy(weights);
  for (int m = 0; m < net_num_models(); m++)
    free_buffers(&reference[m]);
  printf("api_test: %s (%d failed checks)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
