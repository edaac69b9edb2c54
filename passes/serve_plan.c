/*
 * serve_plan.c - the launcher's parameters of a serving program for a
 * stated arrival mix (--arrivals a=300/s,b=100/s [--latency-bound MS]),
 * chosen on the cost model, and the simulated comparison with the ways of
 * serving the same load that TOP's paper compares against.
 *
 * For each candidate number of copies per model the models' joint graph is
 * scheduled as the program would be, and every combination of copies a
 * round can run is simulated on the device model (sched_sim.c) for its
 * latency. A queue simulation of the launcher (the same rules as
 * serve_template.c: per-model queues, a round takes up to each model's
 * limit once its interval has passed, two rounds queued on the device)
 * then replays the same seeded Poisson arrivals for each candidate. The
 * search is exhaustive over the copies (1 to 4 of each model, at most
 * LIMIT_SERVE_COMBINATIONS combinations), then improves each model's interval
 * in turn (coordinate descent over multiples of the model's own latency).
 * The choice: no backlog, then within the latency bound, then the highest
 * share of its arrivals served for the least served model (so that over
 * the load no model starves), then the most requests served, then the
 * lowest worst p99 latency, then fewest copies.
 *
 * TOP learns these choices with multi-agent reinforcement learning and a
 * graph-neural-network policy; here the space is small enough to search.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pass.h"

/* A round's host side, beside its schedule: the copies of its inputs and
   outputs through pinned memory, and the launch. Rough PCIe figures: no
   round has been measured on a GPU yet. */
#define HOST_LINK_GBS 20.0
#define LAUNCH_US 10.0
/* Rounds queued on the device at once (serve_template.c's ROUNDS_IN_FLIGHT). */
#define ROUNDS_IN_FLIGHT 2
#define MAX_TRIED_INSTANCES 4

typedef struct Simulated {
  double served_per_s[LIMIT_SERVE_MODELS];
  double p50_ms[LIMIT_SERVE_MODELS], p99_ms[LIMIT_SERVE_MODELS];
  int arrived[LIMIT_SERVE_MODELS], served[LIMIT_SERVE_MODELS], rejected[LIMIT_SERVE_MODELS];
  long long rounds;
  double requests_per_round;
  bool no_backlog;
  double worst_p99_ms;
} Simulated;

/* The seeded Poisson arrivals every candidate sees: times in seconds. */
typedef struct Arrivals {
  int n;
  double *time;
  int *model;
  double seconds;
} Arrivals;

static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static Arrivals make_arrivals(const double *rate, int nmodels, uint64_t seed) {
  double total = 0;
  for (int m = 0; m < nmodels; m++)
    total += rate[m];
  Arrivals a = {0};
  /* Enough arrivals for percentiles to settle: 4000, within 2 to 30 s. */
  a.seconds = total > 0 ? fmin(30.0, fmax(2.0, 4000.0 / total)) : 2.0;
  int cap = (int)(total * a.seconds * 2 + 64);
  a.time = malloc(sizeof(double) * (size_t)cap);
  a.model = malloc(sizeof(int) * (size_t)cap);
  double next[LIMIT_SERVE_MODELS];
  uint64_t state = seed;
  for (int m = 0; m < nmodels; m++) {
    double u = ((double)(next_random(&state) >> 11) + 0.5) / 9007199254740992.0;
    next[m] = rate[m] > 0 ? -log(u) / rate[m] : 1e300;
  }
  for (;;) {
    int m = 0;
    for (int k = 1; k < nmodels; k++)
      if (next[k] < next[m])
        m = k;
    if (next[m] >= a.seconds || a.n == cap)
      break;
    a.time[a.n] = next[m];
    a.model[a.n++] = m;
    double u = ((double)(next_random(&state) >> 11) + 0.5) / 9007199254740992.0;
    next[m] += -log(u) / rate[m];
  }
  return a;
}

static int compare_doubles(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

static double percentile(double *v, int n, double p) {
  if (n == 0)
    return 0;
  qsort(v, (size_t)n, sizeof(double), compare_doubles);
  int k = (int)ceil(p * n) - 1;
  return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* Latencies (ms) per request, -1 until done; from them the figures. */
static void summarise(const Arrivals *a, const double *finish, int nmodels, double copies,
                      Simulated *out) {
  double *lat = malloc(sizeof(double) * ((size_t)a->n + 1));
  long long backlog = 0, arrived_all = 0;
  out->worst_p99_ms = 0;
  for (int m = 0; m < nmodels; m++) {
    int n = 0;
    out->served[m] = 0;
    out->arrived[m] = 0; /* the refused ones too: they are among the arrivals */
    for (int i = 0; i < a->n; i++) {
      if (a->model[i] != m)
        continue;
      out->arrived[m]++;
      if (finish[i] < 0)
        continue;
      if (finish[i] <= a->seconds)
        out->served[m]++;
      lat[n++] = (finish[i] - a->time[i]) * 1e3;
    }
    out->served_per_s[m] = out->served[m] / a->seconds;
    out->p50_ms[m] = percentile(lat, n, 0.50);
    out->p99_ms[m] = percentile(lat, n, 0.99);
    if (out->p99_ms[m] > out->worst_p99_ms)
      out->worst_p99_ms = out->p99_ms[m];
    backlog += out->arrived[m] - out->served[m];
    arrived_all += out->arrived[m];
  }
  /* What the last rounds still hold is not a backlog; anything beyond a
     couple of rounds or 2% of the arrivals is. */
  out->no_backlog = backlog <= fmax(2 * ROUNDS_IN_FLIGHT * copies, 0.02 * (double)arrived_all);
  free(lat);
}

/* ---------------------------------------------------- the joint program */

/* A candidate: the copies of each model, with every combination's round. */
typedef struct Candidate {
  int instances[LIMIT_SERVE_MODELS];
  double interval_ms[LIMIT_SERVE_MODELS];
  double *round_us; /* per combination (mixed radix, as set_active counts) */
  int combos;
  Simulated sim;
  bool simulated;
} Candidate;

/* Waiting requests, a FIFO per model: indices into the arrivals. */
typedef struct Queues {
  int *slot;
  int first[LIMIT_SERVE_MODELS], head[LIMIT_SERVE_MODELS], tail[LIMIT_SERVE_MODELS];
} Queues;

static void queues_init(Queues *q, const Arrivals *a, int nmodels) {
  q->slot = malloc(sizeof(int) * ((size_t)a->n + 1));
  int offset = 0;
  for (int m = 0; m < nmodels; m++) {
    q->first[m] = offset;
    q->head[m] = q->tail[m] = 0;
    for (int i = 0; i < a->n; i++)
      offset += a->model[i] == m;
  }
}

static int queue_length(const Queues *q, int m) { return q->tail[m] - q->head[m]; }

/* False when the model's queue is full: the request is refused. */
static bool queue_push(Queues *q, int m, int request, int capacity) {
  if (queue_length(q, m) >= capacity)
    return false;
  q->slot[q->first[m] + q->tail[m]++] = request;
  return true;
}

static int queue_pop(Queues *q, int m) { return q->slot[q->first[m] + q->head[m]++]; }

/* A round in flight: its requests and when the device finishes it. */
typedef struct Round {
  double end;
  int count;
  int request[LIMIT_SERVE_COMBINATIONS];
} Round;

/* Takes a round at `now` as the launcher would; false when none can go. */
static bool take_round(Queues *q, const Candidate *c, int nmodels, double now, double *last_taken,
                       Round *r, int *combo) {
  int radix = 1;
  *combo = -1;
  r->count = 0;
  for (int m = 0; m < nmodels; m++) {
    int n = queue_length(q, m);
    if (n > c->instances[m])
      n = c->instances[m];
    if (now < last_taken[m] + c->interval_ms[m] * 1e-3)
      n = 0;
    if (n > 0)
      last_taken[m] = now;
    for (int k = 0; k < n; k++)
      r->request[r->count++] = queue_pop(q, m);
    *combo += n * radix;
    radix *= c->instances[m] + 1;
  }
  return r->count > 0;
}

/* The launcher's rules replayed on the rounds' predicted times. */
static void simulate_launcher(const Arrivals *a, int nmodels, const Candidate *c, int capacity,
                              Simulated *out) {
  double *finish = malloc(sizeof(double) * ((size_t)a->n + 1));
  Queues q;
  queues_init(&q, a, nmodels);
  double last_taken[LIMIT_SERVE_MODELS];
  Round *round = malloc(sizeof(Round) * ROUNDS_IN_FLIGHT);
  int in_flight = 0, oldest = 0, next = 0, combo;
  double device_free = 0, now = 0;
  long long rounds = 0, taken = 0;
  for (int m = 0; m < nmodels; m++) {
    last_taken[m] = -1e300;
    out->rejected[m] = 0;
  }
  for (int i = 0; i < a->n; i++)
    finish[i] = -1;
  for (;;) {
    /* Rounds while a slot is free and some model may be taken. */
    while (in_flight < ROUNDS_IN_FLIGHT) {
      Round *r = &round[(oldest + in_flight) % ROUNDS_IN_FLIGHT];
      if (!take_round(&q, c, nmodels, now, last_taken, r, &combo))
        break;
      device_free = fmax(now + LAUNCH_US * 1e-6, device_free) + c->round_us[combo] * 1e-6;
      r->end = device_free;
      in_flight++;
      rounds++;
      taken += r->count;
    }
    /* The next event: an arrival, the oldest round's end, an interval's end. */
    double t = next < a->n ? a->time[next] : 1e300;
    if (in_flight && round[oldest].end < t)
      t = round[oldest].end;
    for (int m = 0; m < nmodels && in_flight < ROUNDS_IN_FLIGHT; m++) {
      double opens = last_taken[m] + c->interval_ms[m] * 1e-3;
      if (queue_length(&q, m) > 0 && opens > now && opens < t)
        t = opens;
    }
    if (t >= 1e300)
      break;
    now = t;
    while (in_flight && round[oldest].end <= now) {
      for (int k = 0; k < round[oldest].count; k++)
        finish[round[oldest].request[k]] = round[oldest].end;
      oldest = (oldest + 1) % ROUNDS_IN_FLIGHT;
      in_flight--;
    }
    for (; next < a->n && a->time[next] <= now; next++)
      if (!queue_push(&q, a->model[next], next, capacity))
        out->rejected[a->model[next]]++;
  }
  out->rounds = rounds;
  out->requests_per_round = rounds ? (double)taken / (double)rounds : 0;
  int copies = 0;
  for (int m = 0; m < nmodels; m++)
    copies += c->instances[m];
  summarise(a, finish, nmodels, copies, out);
  free(finish);
  free(q.slot);
  free(round);
}

/* Scheduled graph of the given copies; NULL after an error (reported). */
static Graph *scheduled_join(Graph *const *models, const char *const *names, const int *instances,
                             int nmodels, const PassOptions *opt, const char *scheduler,
                             PassContext **ctx_out) {
  Graph *j = graph_join(models, names, instances, nmodels);
  PassOptions quiet = *opt;
  quiet.dump_after = NULL;
  quiet.report = quiet.stats = false;
  quiet.emit_schedule = quiet.emit_dot = NULL;
  if (scheduler)
    quiet.scheduler = scheduler;
  PassContext *ctx = pass_context_new(j, &quiet);
  /* Only the scheduling and event passes: a prediction needs no memory plan. */
  if (!run_schedule_passes(j, &quiet, ctx)) {
    graph_free(j);
    return NULL;
  }
  *ctx_out = ctx;
  return j;
}

/* Bytes a request of the model copies in (inputs) or out (outputs). */
static double io_bytes(const Graph *model, bool outputs) {
  double bytes = 0;
  int n = outputs ? model->noutputs : model->ninputs;
  Tensor **list = outputs ? model->outputs : model->inputs;
  for (int i = 0; i < n; i++)
    bytes += (double)tensor_numel(list[i]) * (double)dtype_size(list[i]->dtype);
  return bytes;
}

static double copy_us(double bytes) { return bytes / (HOST_LINK_GBS * 1e3); }

/* Every combination's round: its copies' units on the joint schedule, the
   others doing nothing, plus its host copies. */
static bool predict_rounds(Graph *const *models, const char *const *names, int nmodels,
                           const PassOptions *opt, Candidate *c) {
  PassContext *ctx = NULL;
  Graph *j = scheduled_join(models, names, c->instances, nmodels, opt, NULL, &ctx);
  if (!j)
    return false;
  const CostModel *cm = pass_cost_model(ctx);
  SimProgram p;
  sim_program_of(pass_deps(ctx), j->arena, &p);
  c->combos = 1;
  for (int m = 0; m < nmodels; m++)
    c->combos *= c->instances[m] + 1;
  c->combos--;
  c->round_us = malloc(sizeof(double) * ((size_t)c->combos + 1));
  unsigned char *active = malloc((size_t)p.nunits + 1);
  unsigned char on[LIMIT_SERVE_COMBINATIONS + 1];
  for (int k = 0; k < c->combos; k++) {
    int rest = k + 1, copy = 0;
    double bytes = 0;
    for (int m = 0; m < nmodels; m++) {
      int n = rest % (c->instances[m] + 1);
      rest /= c->instances[m] + 1;
      for (int i = 0; i < c->instances[m]; i++)
        on[copy++] = i < n;
      bytes += n * (io_bytes(models[m], false) + io_bytes(models[m], true));
    }
    for (int u = 0; u < p.nunits; u++)
      active[u] = p.instance[u] < 0 || on[p.instance[u]];
    const SimProgram *programs[1] = {&p};
    SimDevice *s = sim_new(cm, programs, 1);
    double when = 0;
    sim_submit(s, 0, 0, active);
    if (sim_advance(s, 1e300, &when) < 0)
      when = sim_now(s);
    sim_free(s);
    c->round_us[k] = when + copy_us(bytes);
  }
  free(active);
  graph_free(j);
  return true;
}

/* ------------------------------------- the baselines: separate contexts */

/*
 * Independent contexts (what users do without a serving program): `count[m]`
 * contexts of model m, each its own program on streams of its own, each
 * running one request at a time (its run() call) on the shared device.
 */
static bool simulate_contexts(Graph *const *models, const char *const *names, int nmodels,
                              const PassOptions *opt, const char *scheduler, const int *count,
                              const Arrivals *a, int capacity, Simulated *out) {
  SimProgram prog[LIMIT_SERVE_MODELS];
  Graph *single[LIMIT_SERVE_MODELS] = {0};
  const CostModel *cm = NULL;
  bool ok = true;
  int one = 1;
  for (int m = 0; m < nmodels && ok; m++) {
    PassContext *ctx = NULL;
    single[m] = scheduled_join(&models[m], &names[m], &one, 1, opt, scheduler, &ctx);
    ok = single[m] != NULL;
    if (ok) {
      cm = pass_cost_model(ctx);
      sim_program_of(pass_deps(ctx), single[m]->arena, &prog[m]);
    }
  }
  int ncontexts = 0, model_of[LIMIT_SERVE_COMBINATIONS + 1];
  const SimProgram *programs[LIMIT_SERVE_COMBINATIONS + 1] = {0};
  for (int m = 0; m < nmodels; m++)
    for (int k = 0; k < count[m]; k++) {
      model_of[ncontexts] = m;
      programs[ncontexts++] = &prog[m];
    }
  if (ok) {
    SimDevice *s = sim_new(cm, programs, ncontexts);
    double *finish = malloc(sizeof(double) * ((size_t)a->n + 1));
    int *request_of_run = malloc(sizeof(int) * ((size_t)a->n + 1));
    int *context_of_run = malloc(sizeof(int) * ((size_t)a->n + 1));
    int *busy = calloc((size_t)ncontexts + 1, sizeof(int));
    int next = 0, running = 0;
    Queues q;
    queues_init(&q, a, nmodels);
    for (int m = 0; m < nmodels; m++)
      out->rejected[m] = 0;
    for (int i = 0; i < a->n; i++)
      finish[i] = -1;
    while (next < a->n || running > 0) {
      double t = next < a->n ? a->time[next] * 1e6 : 1e300, when = 0;
      int run = sim_advance(s, t, &when);
      if (run >= 0) {
        int k = context_of_run[run];
        finish[request_of_run[run]] = (when + copy_us(io_bytes(models[model_of[k]], true))) * 1e-6;
        busy[k] = 0;
        running--;
      } else if (next < a->n) {
        if (!queue_push(&q, a->model[next], next, capacity))
          out->rejected[a->model[next]]++;
        next++;
      } else {
        break; /* a run that never ends: nothing the device model can do */
      }
      /* Each free context takes the oldest waiting request of its model. */
      for (int k = 0; k < ncontexts; k++) {
        int m = model_of[k];
        if (busy[k] || queue_length(&q, m) == 0)
          continue;
        double release = sim_now(s) + LAUNCH_US + copy_us(io_bytes(models[m], false));
        int id = sim_submit(s, k, release, NULL);
        request_of_run[id] = queue_pop(&q, m);
        context_of_run[id] = k;
        busy[k] = 1;
        running++;
      }
    }
    out->rounds = 0;
    out->requests_per_round = 0;
    int copies = 0;
    for (int m = 0; m < nmodels; m++)
      copies += count[m];
    summarise(a, finish, nmodels, copies, out);
    sim_free(s);
    free(finish);
    free(request_of_run);
    free(context_of_run);
    free(busy);
    free(q.slot);
  }
  for (int m = 0; m < nmodels; m++)
    graph_free(single[m]);
  return ok;
}

/* ------------------------------------------------------------- the search */

/* Whether x is a better choice than y. */
static bool better(const Simulated *x, int xcopies, const Simulated *y, int ycopies, int nmodels,
                   double bound_ms) {
  if (x->no_backlog != y->no_backlog)
    return x->no_backlog;
  bool xin = bound_ms <= 0 || x->worst_p99_ms <= bound_ms;
  bool yin = bound_ms <= 0 || y->worst_p99_ms <= bound_ms;
  if (xin != yin)
    return xin;
  /* Over the load, no model may starve for the others: the least served
     share of a model's arrivals first, then the requests served. */
  double xs = 0, ys = 0, xmin = 1, ymin = 1;
  for (int m = 0; m < nmodels; m++) {
    xs += x->served_per_s[m];
    ys += y->served_per_s[m];
    if (x->arrived[m] > 0)
      xmin = fmin(xmin, (double)x->served[m] / x->arrived[m]);
    if (y->arrived[m] > 0)
      ymin = fmin(ymin, (double)y->served[m] / y->arrived[m]);
  }
  if (fabs(xmin - ymin) > 0.01)
    return xmin > ymin;
  if (fabs(xs - ys) > 0.01 * fmax(xs, ys))
    return xs > ys;
  if (fabs(x->worst_p99_ms - y->worst_p99_ms) > 0.01 * fmax(x->worst_p99_ms, y->worst_p99_ms))
    return x->worst_p99_ms < y->worst_p99_ms;
  return xcopies < ycopies;
}

static int copies_of(const Candidate *c, int nmodels) {
  int n = 0;
  for (int m = 0; m < nmodels; m++)
    n += c->instances[m];
  return n;
}

static void print_row(FILE *f, const char *what, const Simulated *s, int nmodels,
                      const char *const *names) {
  for (int m = 0; m < nmodels; m++)
    fprintf(f, "  %-28s %-16s %9d %9.1f %9.3f %9.3f %8d%s\n", m == 0 ? what : "", names[m],
            s->arrived[m], s->served_per_s[m], s->p50_ms[m], s->p99_ms[m],
            s->arrived[m] - s->served[m], m == nmodels - 1 && !s->no_backlog ? "  backlog" : "");
}

static const char *describe(const Candidate *c, int nmodels, const char *const *names, char *buf,
                            size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (int m = 0; m < nmodels; m++) {
    len += (size_t)snprintf(buf + len, size - len, "%s%s=%d", m ? "," : "", names[m], c->instances[m]);
    if (c->interval_ms[m] > 0 && len < size)
      len += (size_t)snprintf(buf + len, size - len, "/%.2gms", c->interval_ms[m]);
    if (len >= size)
      break;
  }
  return buf;
}

bool serve_plan(Graph *const *models, const char *const *names, int nmodels,
                const PassOptions *opt, ServePlan *plan, FILE *report) {
  if (nmodels > LIMIT_SERVE_MODELS) {
    opc_error("--arrivals: at most %d models", LIMIT_SERVE_MODELS);
    return false;
  }
  Arrivals a = make_arrivals(plan->rate, nmodels, 1);
  int capacity = plan->queue_capacity > 0 ? plan->queue_capacity : 256;
  /* The candidates: every count of copies, 1 to 4 each (or the given ones). */
  int limit[LIMIT_SERVE_MODELS], total = 1;
  for (int m = 0; m < nmodels; m++) {
    limit[m] = plan->fixed_instances ? plan->fixed_instances[m] : MAX_TRIED_INSTANCES;
    total *= plan->fixed_instances ? 1 : limit[m];
  }
  Candidate *cand = calloc((size_t)total, sizeof(Candidate));
  int best = -1, ncand = 0;
  bool ok = true;
  for (int k = 0; k < total && ok; k++) {
    Candidate *c = &cand[ncand];
    int rest = k;
    long long combos = 1;
    for (int m = 0; m < nmodels; m++) {
      c->instances[m] = plan->fixed_instances ? limit[m] : rest % limit[m] + 1;
      rest /= plan->fixed_instances ? 1 : limit[m];
      combos *= c->instances[m] + 1;
    }
    if (combos - 1 > LIMIT_SERVE_COMBINATIONS)
      continue;
    ok = predict_rounds(models, names, nmodels, opt, c);
    if (!ok)
      break;
    simulate_launcher(&a, nmodels, c, capacity, &c->sim);
    c->simulated = true;
    if (best < 0 || better(&c->sim, copies_of(c, nmodels), &cand[best].sim,
                           copies_of(&cand[best], nmodels), nmodels, plan->latency_bound_ms))
      best = ncand;
    ncand++;
  }
  if (ok && best < 0) {
    opc_error("--arrivals: every candidate needs more than %d CUDA graphs", LIMIT_SERVE_COMBINATIONS);
    ok = false;
  }
  /* Each model's interval in turn, in multiples of its own round alone. */
  Candidate chosen = {0};
  if (ok) {
    chosen = cand[best];
    static const double steps[] = {0.5, 1, 2, 4};
    for (int pass = 0; pass < 2; pass++)
      for (int m = 0; m < nmodels; m++) {
        int alone = 0, radix = 1;
        for (int j = 0; j < m; j++)
          radix *= chosen.instances[j] + 1;
        alone = radix - 1; /* one request of model m */
        for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
          Candidate trial = chosen;
          trial.interval_ms[m] = steps[s] * chosen.round_us[alone] * 1e-3;
          simulate_launcher(&a, nmodels, &trial, capacity, &trial.sim);
          if (better(&trial.sim, copies_of(&trial, nmodels), &chosen.sim,
                     copies_of(&chosen, nmodels), nmodels, plan->latency_bound_ms))
            chosen = trial;
        }
      }
    for (int m = 0; m < nmodels; m++) {
      plan->instances[m] = chosen.instances[m];
      plan->interval_ms[m] = chosen.interval_ms[m];
    }
    plan->feasible = chosen.sim.no_backlog &&
                     (plan->latency_bound_ms <= 0 || chosen.sim.worst_p99_ms <= plan->latency_bound_ms);
    plan->predicted_p99_ms = chosen.sim.worst_p99_ms;
    double served = 0;
    for (int m = 0; m < nmodels; m++)
      served += chosen.sim.served_per_s[m];
    plan->predicted_served_per_s = served;
  }
  /* The report: the candidates, then the choice against the baselines. */
  if (ok && report) {
    char buf[512];
    fprintf(report, "serving plan: %d candidates, %.1f s of seeded Poisson arrivals (%d requests)",
            ncand, a.seconds, a.n);
    if (plan->latency_bound_ms > 0)
      fprintf(report, ", p99 bound %.3g ms", plan->latency_bound_ms);
    fprintf(report, "\n  %-40s %10s %10s %10s %8s\n", "instances[/interval]", "served/s",
            "worst p99", "req/round", "backlog");
    for (int k = 0; k < ncand; k++) {
      double served = 0;
      for (int m = 0; m < nmodels; m++)
        served += cand[k].sim.served_per_s[m];
      fprintf(report, "  %-40s %10.1f %10.3f %10.2f %8s\n", describe(&cand[k], nmodels, names, buf, sizeof buf),
              served, cand[k].sim.worst_p99_ms, cand[k].sim.requests_per_round,
              cand[k].sim.no_backlog ? "no" : "yes");
    }
    fprintf(report, "chosen: %s%s\n", describe(&chosen, nmodels, names, buf, sizeof buf),
            plan->feasible ? "" : " (no candidate meets the load; the least starved)");
    fprintf(report, "\nsimulated against the baselines (same arrivals):\n");
    fprintf(report, "  %-28s %-16s %9s %9s %9s %9s %8s\n", "system", "model", "arrived", "served/s",
            "p50_ms", "p99_ms", "backlog");
    print_row(report, "joint schedule (chosen)", &chosen.sim, nmodels, names);
    Simulated base;
    if (simulate_contexts(models, names, nmodels, opt, NULL, chosen.instances, &a, capacity, &base))
      print_row(report, "independent contexts", &base, nmodels, names);
    int ones[LIMIT_SERVE_MODELS];
    for (int m = 0; m < nmodels; m++)
      ones[m] = 1;
    if (simulate_contexts(models, names, nmodels, opt, "ios", ones, &a, capacity, &base))
      print_row(report, "IOS per model", &base, nmodels, names);
  }
  for (int k = 0; k < ncand; k++)
    free(cand[k].round_us);
  free(cand);
  free(a.time);
  free(a.model);
  return ok;
}
