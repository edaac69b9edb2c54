/*
 * The command line of the serving program:
 *   ./serve [--weights DIR] [--seed S] [--requests N] [--output-dir DIR]
 *           [--input MODEL:NAME=FILE]... [--policy MODEL=LIMIT[/MS]]... [--verbose]
 *   ./serve --load poisson:RATE[,MODEL=RATE...] [--duration S] [--trace FILE.json] ...
 * Without --load it submits N requests of each model at once (default 1),
 * each with random inputs of its own (floating ones in [-1, 1) drawn from
 * --seed and the request's number, integer and bool ones zero), waits for
 * them and prints each output's mean. --input gives every request of MODEL
 * its input NAME from FILE (.npy or ONNX TensorProto .pb, of the input's
 * type and shape). --output-dir writes request K of model
 * M's inputs and outputs as DIR/M-K-input-I.npy and DIR/M-K-output-O.npy.
 * --load submits requests as Poisson arrivals for --duration seconds
 * (default 10): RATE requests per second of each model, MODEL=RATE for one,
 * and prints per model the throughput, the latency percentiles, the queue's
 * length over time and the backlog (requests not served within the
 * duration). --trace writes the run as a Chrome trace (chrome://tracing,
 * ui.perfetto.dev): one row of rounds, naming the copies that ran together,
 * a row of requests per model, and the queues' lengths. --policy sets a
 * model's launcher policy (net_set_policy). Without --weights the weights
 * files are looked for beside the program, then where opc wrote them.
 * Exit status: 0 done, 1 bad arguments, 2 error at run time.
 */

#include "main_inputs.c"
#include "main_common.c"

static int usage(void)
{
  fprintf(stderr, "usage: net [--weights DIR] [--seed S] [--requests N] [--output-dir DIR]\n"
                  "           [--input MODEL:NAME=FILE]... [--load poisson:RATE[,MODEL=RATE...]]\n"
                  "           [--duration S] [--trace FILE.json] [--policy MODEL=LIMIT[/MS]]...\n"
                  "           [--verbose]\n");
  return 1;
}

/* Each model's inputs and outputs: host buffers, filled or read once. */
typedef struct {
  void *in[MAX_MODEL_IO], *out[MAX_MODEL_IO];
} Buffers;

static int alloc_buffers(int m, Buffers *b)
{
  for (int i = 0; i < net_num_inputs(m); i++)
    if (!(b->in[i] = malloc((size_t)numel_of(net_input_rank(m, i), net_input_dims(m, i)) *
                                (size_t)net_input_element_size(m, i) + 1)))
      return -1;
  for (int o = 0; o < net_num_outputs(m); o++)
    if (!(b->out[o] = malloc((size_t)numel_of(net_output_rank(m, o), net_output_dims(m, o)) *
                                 (size_t)net_output_element_size(m, o) + 1)))
      return -1;
  return 0;
}

static void free_buffers(int m, Buffers *b)
{
  for (int i = 0; m >= 0 && i < net_num_inputs(m); i++)
    free(b->in[i]);
  for (int o = 0; m >= 0 && o < net_num_outputs(m); o++)
    free(b->out[o]);
}

/* --input MODEL:NAME=FILE, by model and input; NULL: random. */
static const char *input_file[MODEL_COUNT][MAX_MODEL_IO];

static int add_input_file(const char *arg)
{
  const char *colon = strchr(arg, ':'), *eq = colon ? strchr(colon, '=') : NULL;
  char model[256];
  if (!eq || (size_t)(colon - arg) >= sizeof model)
    return -1;
  snprintf(model, sizeof model, "%.*s", (int)(colon - arg), arg);
  int m = net_model_index(model);
  for (int i = 0; m >= 0 && i < net_num_inputs(m); i++)
    if (strlen(net_input_name(m, i)) == (size_t)(eq - colon - 1) &&
        strncmp(net_input_name(m, i), colon + 1, (size_t)(eq - colon - 1)) == 0) {
      input_file[m][i] = eq + 1;
      return 0;
    }
  fprintf(stderr, "net: --input %s: no model '%s' with that input\n", arg, model);
  return -1;
}

/* The inputs of request k of model m: from --input files, else random with
   a seed of its own, so that every request differs. */
static int fill_inputs(int m, Buffers *b, unsigned long long seed, int k)
{
  uint64_t state = seed + (uint64_t)k * 1000003u + (uint64_t)m * 7919u;
  for (int i = 0; i < net_num_inputs(m); i++) {
    Expected x = {net_input_name(m, i), input_file[m][i], element_type(net_input_type(m, i)),
                  net_input_rank(m, i), net_input_dims(m, i)};
    if (input_file[m][i]) {
      if (read_input(&x, b->in[i]) != 0)
        return -1;
    } else {
      fill_input(x.type, b->in[i], numel_of(x.rank, x.dims), &state);
    }
  }
  return 0;
}

/* ------------------------------------------------- N requests at once */

static int write_request(const char *dir, int m, int k, const Buffers *b)
{
  char path[4096];
  for (int i = 0; i < net_num_inputs(m); i++) {
    snprintf(path, sizeof path, "%s/%s-%d-input-%d.npy", dir, net_model_name(m), k, i);
    if (write_npy(path, element_type(net_input_type(m, i)), net_input_rank(m, i),
                  net_input_dims(m, i), b->in[i]) != 0)
      return -1;
  }
  for (int o = 0; o < net_num_outputs(m); o++) {
    snprintf(path, sizeof path, "%s/%s-%d-output-%d.npy", dir, net_model_name(m), k, o);
    if (write_npy(path, element_type(net_output_type(m, o)), net_output_rank(m, o),
                  net_output_dims(m, o), b->out[o]) != 0)
      return -1;
  }
  return 0;
}

static void print_outputs(int m, int k, const Buffers *b, const net_times *t)
{
  for (int o = 0; o < net_num_outputs(m); o++) {
    int type = element_type(net_output_type(m, o));
    long long n = numel_of(net_output_rank(m, o), net_output_dims(m, o));
    double sum = 0;
    for (long long j = 0; j < n; j++)
      sum += element_value(type, b->out[o], j);
    printf("%s[%d] %s: %s", net_model_name(m), k, net_output_name(m, o),
           element_types[type].short_name);
    print_shape(stdout, net_output_rank(m, o), net_output_dims(m, o));
    printf(" mean=%.6g first=%.6g (copy %d, round %lld)\n", n ? sum / n : 0.0,
           n ? element_value(type, b->out[o], 0) : 0.0, t->instance, t->round);
  }
}

/* Submits `requests` requests of every model at once and waits for them all. */
static int run_requests(net_ctx *c, int requests, unsigned long long seed, const char *dir)
{
  int total = net_num_models() * requests, status = 0, submitted = 0;
  Buffers *b = calloc((size_t)total + 1, sizeof(Buffers));
  net_request *handle = calloc((size_t)total + 1, sizeof(net_request));
  net_times *times = calloc((size_t)total + 1, sizeof(net_times));
  if (!b || !handle || !times)
    status = 2;
  for (int k = 0; k < requests && status == 0; k++)
    for (int m = 0; m < net_num_models() && status == 0; m++) {
      Buffers *r = &b[submitted];
      if (alloc_buffers(m, r) != 0) {
        status = 2;
        break;
      }
      if (fill_inputs(m, r, seed, k) != 0) {
        status = 1;
        break;
      }
      if (net_submit(c, m, (const void *const *)r->in, r->out, &handle[submitted]) != NET_OK)
        status = 2;
      else
        submitted++;
    }
  /* Every request taken is waited for, also after a failure. */
  for (int i = 0; i < submitted; i++)
    if (net_wait(c, handle[i], &times[i]) != NET_OK)
      status = 2;
  for (int i = 0; i < submitted && status == 0; i++) {
    int m = i % net_num_models(), k = i / net_num_models();
    if (dir && write_request(dir, m, k, &b[i]) != 0)
      status = 1;
    else if (!dir)
      print_outputs(m, k, &b[i], &times[i]);
  }
  for (int i = 0; b && i < total; i++)
    free_buffers(i % net_num_models(), &b[i]);
  free(b);
  free(handle);
  free(times);
  return status;
}

/* --------------------------------------------------------- --load */

typedef struct {
  int model;
  int status;
  net_request handle;
  net_times times;
} Arrival;

/* What the generator and the collector share. */
typedef struct {
  net_ctx *c;
  Arrival *arrival;
  int capacity;
  int count;     /* submitted so far */
  int collected;
  int done;      /* the generator has finished */
  pthread_mutex_t lock;
  pthread_cond_t more;
} Load;

/* Collects the requests in the order they were submitted; each one's own
   times come from the program, so the order costs no accuracy. */
static void *collect_main(void *arg)
{
  Load *l = arg;
  pthread_mutex_lock(&l->lock);
  for (;;) {
    while (l->collected == l->count && !l->done)
      pthread_cond_wait(&l->more, &l->lock);
    if (l->collected == l->count)
      break;
    Arrival *a = &l->arrival[l->collected];
    pthread_mutex_unlock(&l->lock);
    a->status = net_wait(l->c, a->handle, &a->times);
    pthread_mutex_lock(&l->lock);
    l->collected++;
  }
  pthread_mutex_unlock(&l->lock);
  return NULL;
}

static int compare_doubles(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double percentile_of(const double *sorted, int n, double p)
{
  int k = (int)ceil(p * n) - 1;
  return n ? sorted[k < 0 ? 0 : k >= n ? n - 1 : k] : 0.0;
}

/* "poisson:RATE[,MODEL=RATE...]" into rate[] (requests per second). */
static int parse_load(const char *spec, double *rate)
{
  if (strncmp(spec, "poisson:", 8) != 0)
    return -1;
  char text[1024];
  snprintf(text, sizeof text, "%s", spec + 8);
  for (char *item = strtok(text, ","); item; item = strtok(NULL, ",")) {
    char *eq = strchr(item, '='), *end;
    double r = strtod(eq ? eq + 1 : item, &end);
    if (*end || !(r >= 0 && r <= 1e7))
      return -1;
    if (!eq) {
      for (int m = 0; m < net_num_models(); m++)
        rate[m] = r;
      continue;
    }
    *eq = '\0';
    int m = net_model_index(item);
    if (m < 0) {
      fprintf(stderr, "net: --load: no model '%s'\n", item);
      return -1;
    }
    rate[m] = r;
  }
  return 0;
}

/* An exponential gap with mean 1/rate, from the state. */
static double next_gap(uint64_t *state, double rate)
{
  double u = ((double)(next_random(state) >> 11) + 0.5) / 9007199254740992.0;
  return -log(u) / rate;
}

static void sleep_until(double t)
{
  struct timespec until;
  until.tv_sec = (time_t)t;
  until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
    ;
}

enum { QUEUE_SAMPLES = 20 }; /* points of each queue's printed history */

/* The run as a Chrome trace: rounds, requests, queue lengths. */
static int write_trace(const char *path, const Load *l, double start, const int *depth,
                       const double *depth_time, int nsamples)
{
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "net: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  fputs("{\"traceEvents\": [\n", f);
  fputs("  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": 0, \"args\": {\"name\": \"rounds\"}}", f);
  for (int m = 0; m < net_num_models(); m++)
    fprintf(f, ",\n  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, \"args\": "
               "{\"name\": \"%s requests\"}}", m + 1, net_model_name(m));
  /* Each round once, at its first request, naming every copy that ran in it. */
  long long rounds = 0;
  for (int i = 0; i < l->count; i++)
    if (l->arrival[i].status == NET_OK && l->arrival[i].times.round + 1 > rounds)
      rounds = l->arrival[i].times.round + 1;
  int *first = malloc(sizeof(int) * ((size_t)rounds + 1));
  int *next = malloc(sizeof(int) * ((size_t)l->count + 1));
  for (long long r = 0; first && r < rounds; r++)
    first[r] = -1;
  for (int i = l->count - 1; first && next && i >= 0; i--)
    if (l->arrival[i].status == NET_OK) {
      next[i] = first[l->arrival[i].times.round];
      first[l->arrival[i].times.round] = i;
    }
  for (long long r = 0; first && next && r < rounds; r++) {
    const Arrival *a = first[r] >= 0 ? &l->arrival[first[r]] : NULL;
    if (!a)
      continue;
    fprintf(f, ",\n  {\"name\": \"round %lld:", r);
    for (int j = first[r]; j >= 0; j = next[j])
      fprintf(f, " %s.%d", net_model_name(l->arrival[j].model), l->arrival[j].times.instance);
    fprintf(f, "\", \"ph\": \"X\", \"pid\": 0, \"tid\": 0, \"ts\": %.3f, \"dur\": %.3f}",
            (a->times.started - start) * 1e6, (a->times.finished - a->times.started) * 1e6);
  }
  free(first);
  free(next);
  for (int i = 0; i < l->count; i++) {
    const Arrival *a = &l->arrival[i];
    if (a->status != NET_OK)
      continue;
    fprintf(f, ",\n  {\"name\": \"%s.%d\", \"ph\": \"X\", \"pid\": 0, \"tid\": %d, \"ts\": %.3f, "
               "\"dur\": %.3f, \"args\": {\"round\": %lld, \"queued_us\": %.1f}}",
            net_model_name(a->model), a->times.instance, a->model + 1,
            (a->times.submitted - start) * 1e6, (a->times.finished - a->times.submitted) * 1e6,
            a->times.round, (a->times.started - a->times.submitted) * 1e6);
  }
  for (int s = 0; s < nsamples; s++)
    for (int m = 0; m < net_num_models(); m++)
      fprintf(f, ",\n  {\"name\": \"queue %s\", \"ph\": \"C\", \"pid\": 0, \"ts\": %.3f, "
                 "\"args\": {\"length\": %d}}",
              net_model_name(m), (depth_time[s] - start) * 1e6, depth[s * net_num_models() + m]);
  fputs("\n]}\n", f);
  if (fclose(f) != 0) {
    fprintf(stderr, "net: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}

/* Per model: arrivals, what was served within the run, latencies, queues. */
static void report_load(const Load *l, const double *rate, int *rejected, double start, double end,
                        const int *depth, int nsamples)
{
  int models = net_num_models();
  double *latency = malloc(sizeof(double) * ((size_t)l->count + 1));
  printf("load: poisson arrivals for %.3f s; latency from submit to outputs written\n", end - start);
  printf("%-16s %8s %8s %8s %8s %8s %10s %9s %9s %9s %6s %6s\n", "model", "rate/s", "arrived",
         "served", "rejected", "backlog", "served/s", "p50_ms", "p90_ms", "p99_ms", "q_max", "q_mean");
  int all_arrived = 0, all_served = 0;
  for (int m = 0; m < models && latency; m++) {
    int arrived = rejected[m], served = 0, n = 0, qmax = 0;
    double qsum = 0;
    for (int i = 0; i < l->count; i++) {
      const Arrival *a = &l->arrival[i];
      if (a->model != m)
        continue;
      arrived++;
      if (a->status == NET_OK && a->times.finished <= end)
        served++;
      if (a->status == NET_OK)
        latency[n++] = (a->times.finished - a->times.submitted) * 1e3;
    }
    for (int s = 0; s < nsamples; s++) {
      int d = depth[s * models + m];
      qmax = d > qmax ? d : qmax;
      qsum += d;
    }
    qsort(latency, (size_t)n, sizeof(double), compare_doubles);
    printf("%-16s %8.1f %8d %8d %8d %8d %10.2f %9.3f %9.3f %9.3f %6d %6.2f\n", net_model_name(m),
           rate[m], arrived, served, rejected[m], arrived - served, served / (end - start),
           percentile_of(latency, n, 0.50), percentile_of(latency, n, 0.90),
           percentile_of(latency, n, 0.99), qmax, nsamples ? qsum / nsamples : 0.0);
    printf("%-16s queue length at each 1/%d of the run:", "", QUEUE_SAMPLES);
    for (int p = 0; p < QUEUE_SAMPLES && nsamples; p++)
      printf(" %d", depth[(long long)p * nsamples / QUEUE_SAMPLES * models + m]);
    printf("\n");
    all_arrived += arrived;
    all_served += served;
  }
  long long rounds = 0;
  int in_rounds = 0;
  for (int i = 0; i < l->count; i++)
    if (l->arrival[i].status == NET_OK && l->arrival[i].times.round + 1 > rounds)
      rounds = l->arrival[i].times.round + 1;
  for (int i = 0; i < l->count; i++)
    in_rounds += l->arrival[i].status == NET_OK;
  printf("total: %d arrived, %d served (%.2f/s), backlog %d; %lld rounds, %.2f requests per round\n",
         all_arrived, all_served, all_served / (end - start), all_arrived - all_served, rounds,
         rounds ? (double)in_rounds / (double)rounds : 0.0);
  free(latency);
}

static int run_load(net_ctx *c, const char *spec, double duration, unsigned long long seed,
                    const char *trace)
{
  int models = net_num_models(), status = 2;
  double rate[MODEL_COUNT] = {0}, next[MODEL_COUNT];
  int rejected[MODEL_COUNT] = {0};
  Buffers b[MODEL_COUNT];
  memset(b, 0, sizeof b);
  if (parse_load(spec, rate) != 0) {
    fprintf(stderr, "net: --load: expected poisson:RATE[,MODEL=RATE...], got '%s'\n", spec);
    return 1;
  }
  double total_rate = 0;
  for (int m = 0; m < models; m++)
    total_rate += rate[m];
  /* Room for four times the expected arrivals; the run stops early past that. */
  int capacity = (int)(total_rate * duration * 4 + 1000);
  int nsamples_max = (int)(duration / 0.005) + 2, nsamples = 0;
  Load l = {c, calloc((size_t)capacity, sizeof(Arrival)), capacity, 0, 0, 0,
            PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
  int *depth = calloc((size_t)nsamples_max * (size_t)models + 1, sizeof(int));
  double *depth_time = calloc((size_t)nsamples_max + 1, sizeof(double));
  pthread_t collector;
  int collecting = 0;
  double start = now_seconds(), end = start + duration, sample = start;
  if (!l.arrival || !depth || !depth_time)
    goto done;
  for (int m = 0; m < models; m++) {
    if (alloc_buffers(m, &b[m]) != 0)
      goto done;
    if (fill_inputs(m, &b[m], seed, 0) != 0) {
      status = 1;
      goto done;
    }
  }
  if (pthread_create(&collector, NULL, collect_main, &l) != 0)
    goto done;
  collecting = 1;
  uint64_t state = seed;
  start = now_seconds();
  end = start + duration;
  sample = start;
  for (int m = 0; m < models; m++)
    next[m] = rate[m] > 0 ? start + next_gap(&state, rate[m]) : 1e300;
  for (;;) {
    int m = 0;
    for (int k = 1; k < models; k++)
      if (next[k] < next[m])
        m = k;
    double t = next[m] < sample ? next[m] : sample;
    if (t >= end || l.count == l.capacity)
      break;
    sleep_until(t);
    if (t == sample) {
      depth_time[nsamples] = now_seconds();
      for (int k = 0; k < models; k++)
        depth[nsamples * models + k] = net_queue_length(c, k);
      nsamples += nsamples < nsamples_max - 1;
      sample += 0.005;
      continue;
    }
    Arrival *a = &l.arrival[l.count];
    a->model = m;
    int s = net_submit(c, m, (const void *const *)b[m].in, b[m].out, &a->handle);
    if (s == NET_QUEUE_FULL) {
      rejected[m]++;
    } else if (s != NET_OK) {
      goto done;
    } else {
      pthread_mutex_lock(&l.lock);
      l.count++;
      pthread_cond_signal(&l.more);
      pthread_mutex_unlock(&l.lock);
    }
    next[m] += next_gap(&state, rate[m]);
  }
  if (l.count == l.capacity)
    fprintf(stderr, "net: --load: stopped early, at %d requests\n", l.count);
  end = now_seconds() < end ? end : now_seconds();
  status = 0;
done:
  pthread_mutex_lock(&l.lock);
  l.done = 1;
  pthread_cond_signal(&l.more);
  pthread_mutex_unlock(&l.lock);
  if (collecting)
    pthread_join(collector, NULL);
  for (int i = 0; i < l.count && status == 0; i++)
    if (l.arrival[i].status != NET_OK)
      status = 2;
  if (status == 0) {
    report_load(&l, rate, rejected, start, end, depth, nsamples);
    if (trace && write_trace(trace, &l, start, depth, depth_time, nsamples) != 0)
      status = 1;
  }
  for (int m = 0; m < models; m++)
    free_buffers(m, &b[m]);
  free(l.arrival);
  free(depth);
  free(depth_time);
  return status;
}

/* ------------------------------------------------------------- main */

/* The folder of the program, when every model's weights file is there. */
static char *weights_beside(const char *argv0)
{
  const char *slash = strrchr(argv0, '/');
  size_t dir = slash ? (size_t)(slash - argv0) : 1;
  char *path = malloc(dir + 4096);
  if (!path)
    return NULL;
  for (int m = 0; m < net_num_models(); m++) {
    snprintf(path, dir + 4096, "%.*s/%s", (int)dir, slash ? argv0 : ".", weights_file[m]);
    FILE *f = fopen(path, "rb");
    if (!f) {
      free(path);
      return NULL;
    }
    fclose(f);
  }
  snprintf(path, dir + 1, "%.*s", (int)dir, slash ? argv0 : ".");
  return path;
}

/* --policy MODEL=LIMIT[/MS] */
static int set_policy(net_ctx *c, const char *arg)
{
  char name[256];
  const char *eq = strchr(arg, '=');
  if (!eq || (size_t)(eq - arg) >= sizeof name)
    return -1;
  snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
  char *end;
  long limit = strtol(eq + 1, &end, 10);
  double interval = 0;
  if (*end == '/')
    interval = strtod(end + 1, &end);
  if (*end || net_set_policy(c, net_model_index(name), (int)limit, interval) != NET_OK) {
    fprintf(stderr, "net: --policy %s: %s\n", arg, net_error(c));
    return -1;
  }
  return 0;
}

int main(int argc, char **argv)
{
  const char *weights = NULL, *dir = NULL, *load = NULL, *trace = NULL, *policy[64];
  unsigned long long seed = 1;
  int requests = 1, verbose = 0, npolicies = 0, status = 2;
  double duration = 10;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    char *end = NULL;
    if (strcmp(arg, "--verbose") == 0) {
      verbose = 1;
      continue;
    }
    if (!value)
      return usage();
    i++;
    if (strcmp(arg, "--weights") == 0) {
      weights = value;
    } else if (strcmp(arg, "--output-dir") == 0) {
      dir = value;
    } else if (strcmp(arg, "--load") == 0) {
      load = value;
    } else if (strcmp(arg, "--trace") == 0) {
      trace = value;
    } else if (strcmp(arg, "--input") == 0) {
      if (add_input_file(value) != 0)
        return 1;
    } else if (strcmp(arg, "--policy") == 0 && npolicies < 64) {
      policy[npolicies++] = value;
    } else if (strcmp(arg, "--seed") == 0) {
      seed = strtoull(value, &end, 0);
      if (*end)
        return usage();
    } else if (strcmp(arg, "--requests") == 0) {
      long v = strtol(value, &end, 10);
      if (*end || v < 1 || v > QUEUE_CAPACITY)
        return usage();
      requests = (int)v;
    } else if (strcmp(arg, "--duration") == 0) {
      duration = strtod(value, &end);
      if (*end || !(duration > 0 && duration <= 86400))
        return usage();
    } else {
      return usage();
    }
  }
  for (int m = 0; m < net_num_models(); m++)
    for (int i = 0; i < net_num_inputs(m); i++)
      if (element_type(net_input_type(m, i)) < 0) {
        fprintf(stderr, "net: model '%s': input '%s' has type %s, which this main cannot fill\n",
                net_model_name(m), net_input_name(m, i), net_input_type(m, i));
        return 1;
      }
  char *beside = weights ? NULL : weights_beside(argv[0]);
  net_ctx *c = NULL;
  if (net_create(&c, weights ? weights : beside) != 0)
    goto done;
  if (verbose)
    describe(c);
  for (int i = 0; i < npolicies; i++)
    if (set_policy(c, policy[i]) != 0) {
      status = 1;
      goto done;
    }
  status = load ? run_load(c, load, duration, seed, trace) : run_requests(c, requests, seed, dir);
done:
  if (status == 2)
    fprintf(stderr, "net: error: %s\n", net_error(c));
  net_destroy(c);
  free(beside);
  return status;
}
