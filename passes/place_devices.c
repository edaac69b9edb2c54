/*
 * place_devices.c - `--gpus N`: puts every unit on one GPU (HIOS-LP, see
 * sched_hios.c) and makes every move between GPUs an explicit unit.
 * `--devices gpu,cpu` does the same with the GPU and the host CPU (HOPE's
 * partition, see sched_hope.c): the CPU is device 1 (Schedule.host_device)
 * and a move between them is a copy through pinned host memory.
 *
 * After it, every tensor lives on one GPU (tensor_device): a unit's
 * output on the unit's GPU, a graph input on GPU 0, a constant on the GPU
 * of the units reading it (one copy per GPU that reads it, so that the
 * emitter needs no per-GPU lookups). A unit never reads another GPU's
 * memory: each such read becomes a transfer, an Identity node on the
 * reader's GPU (node_is_transfer), which the emitter issues as a peer
 * copy. The graph's outputs are brought back to GPU 0, where the caller's
 * copies start. Transfers copy whole contiguous tensors: a strided view is
 * first made contiguous on its own GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pass.h"
#include "rewrite.h"

/* "x_gpu1", "x_dense0", or on the host CPU "x_cpu", "x_dense_cpu". */
static const char *suffixed(Graph *g, const char *name, const char *what, int device) {
  char buf[512];
  bool cpu = g->sched.host_device > 0 && device == g->sched.host_device;
  if (cpu && strcmp(what, "gpu") == 0)
    snprintf(buf, sizeof buf, "%s_cpu", name);
  else if (cpu)
    snprintf(buf, sizeof buf, "%s_%s_cpu", name, what);
  else
    snprintf(buf, sizeof buf, "%s_%s%d", name, what, device);
  char *s = arena_alloc(g->arena, strlen(buf) + 1);
  strcpy(s, buf);
  return s;
}

/* An Identity node on `device` copying x into a new tensor. */
static Tensor *copy_node(Graph *g, Tensor *x, int device, const char *what) {
  const char *name = suffixed(g, x->name, what, device);
  Tensor *y = graph_add_tensor(g, name);
  y->dtype = x->dtype;
  tensor_set_shape(y, x->rank, x->dims);
  Node *n = graph_add_node(g, OP_IDENTITY, name, 1, 1);
  n->in[0] = x;
  n->out[0] = y;
  y->producer = n;
  node_sched(g, n)->device = device;
  return y;
}

/* Remembers the copy of each (tensor, GPU) pair made so far. */
typedef struct Copies {
  Tensor **from, **to;
  int *device;
  int n, cap;
} Copies;

static Tensor *find_copy(const Copies *c, const Tensor *t, int device) {
  for (int i = 0; i < c->n; i++)
    if (c->from[i] == t && c->device[i] == device)
      return c->to[i];
  return NULL;
}

static void add_copy(Copies *c, Tensor *from, Tensor *to, int device) {
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 16;
    c->from = realloc(c->from, sizeof(Tensor *) * (size_t)c->cap);
    c->to = realloc(c->to, sizeof(Tensor *) * (size_t)c->cap);
    c->device = realloc(c->device, sizeof(int) * (size_t)c->cap);
  }
  c->from[c->n] = from;
  c->to[c->n] = to;
  c->device[c->n++] = device;
}

/* The constant t as `device` reads it: itself for the first GPU that
   does, a clone sharing its data for the others. */
static Tensor *constant_on(Graph *g, Copies *c, Tensor *t, int device, int *owner) {
  if (owner[t->id] < 0)
    owner[t->id] = device;
  if (owner[t->id] == device)
    return t;
  Tensor *k = find_copy(c, t, device);
  if (k)
    return k;
  k = graph_add_tensor(g, suffixed(g, t->name, "gpu", device));
  k->dtype = t->dtype;
  tensor_set_shape(k, t->rank, t->dims);
  k->f32 = t->f32;
  k->i64 = t->i64;
  add_copy(c, t, k, device);
  return k;
}

/* The value t as a unit on `device` reads it: t, or its transfer. */
static Tensor *value_on(Graph *g, Copies *c, Tensor *t, int device) {
  int from = tensor_device(g, t);
  if (from == device)
    return t;
  Tensor *k = find_copy(c, t, device);
  if (k)
    return k;
  Tensor *src = t;
  if (!has_contiguous_strides(t)) { /* a strided view: made contiguous where it lives */
    src = find_copy(c, t, -1 - from);
    if (!src) {
      src = copy_node(g, t, from, "dense");
      add_copy(c, t, src, -1 - from);
    }
  }
  k = copy_node(g, src, device, "gpu");
  add_copy(c, t, k, device);
  return k;
}

/*
 * LIOS's makespan of a partition: the GPU's units on its streams, the
 * CPU's on one lane, each unit also paying the copies it receives (as in
 * HOPE's model). HOPE's model runs one unit at a time on the GPU too, so
 * its best partition may offload units that the GPU's streams would have
 * overlapped for free; this is the check against that.
 */
static double lios_makespan(Graph *g, const PassOptions *opt, const CostModel *cm, SchedDeps *d,
                            const HopeCosts *c, const int *device) {
  double *saved = malloc(sizeof(double) * ((size_t)d->n + 1));
  for (int u = 0; u < d->n; u++) {
    saved[u] = d->cost[u];
    node_sched(g, d->unit[u])->device = device[u];
    d->cost[u] = c->run[device[u]][u];
    for (int k = 0; k < d->npred[u]; k++)
      if (device[d->pred[u][k]] != device[u])
        d->cost[u] += c->xfer[u][k];
  }
  SchedOptions o;
  sched_options_from(opt, &o);
  StagePlan p;
  plan_init(&p, g->arena, d->n);
  sched_lios(d, cm, &o, &p);
  for (int u = 0; u < d->n; u++) {
    d->cost[u] = saved[u];
    node_sched(g, d->unit[u])->device = 0;
  }
  free(saved);
  return p.mapped_us;
}

static int64_t bytes_of(const Tensor *t) {
  return tensor_numel(t) * (int64_t)dtype_size(t->dtype);
}

/* The graph's inputs and outputs stay on GPU 0, where the caller's copies
   are: a unit on the CPU also receives the inputs it reads and sends back
   the outputs it writes, which HOPE's edges between units do not count. */
static double boundary_copies_us(const CostModel *cm, const Node *n) {
  double us = 0;
  for (int i = 0; i < n->nin; i++) {
    const Tensor *t = n->in[i];
    const Tensor *s = t && t->alias_of ? t->alias_of : t;
    if (s && s->is_input)
      us += cost_host_transfer_us(cm, bytes_of(t));
  }
  for (int i = 0; i < n->nout; i++)
    if (n->out[i] && n->out[i]->is_output)
      us += cost_host_transfer_us(cm, bytes_of(n->out[i]));
  return us;
}

/* HOPE's partition between the GPU (device 0) and the host CPU (device 1). */
static bool place_on_cpu(Graph *g, const PassOptions *opt, const CostModel *cm, SchedDeps *d,
                         HopeReport *report) {
  HopeCosts c;
  for (int p = 0; p < HOPE_PROCESSORS; p++) {
    c.run[p] = arena_alloc(g->arena, sizeof(double) * ((size_t)d->n + 1));
    for (int u = 0; u < d->n; u++)
      c.run[p][u] = cost_node_on(cm, d->g, d->unit[u], p == HOPE_CPU);
  }
  for (int u = 0; u < d->n; u++)
    c.run[HOPE_CPU][u] += boundary_copies_us(cm, d->unit[u]);
  double **xfer = arena_alloc(g->arena, sizeof(double *) * ((size_t)d->n + 1));
  for (int v = 0; v < d->n; v++) {
    xfer[v] = arena_alloc(g->arena, sizeof(double) * ((size_t)d->npred[v] + 1));
    for (int k = 0; k < d->npred[v]; k++)
      xfer[v][k] = cost_host_transfer_us(cm, hios_edge_bytes(d, v, k));
  }
  c.xfer = xfer;
  const char *method = opt->partition ? opt->partition : "ilp";
  HopePlan plan;
  if (!hope_plan(d, &c, method, 0, g->arena, &plan))
    return false;
  int *gpu = calloc((size_t)d->n + 1, sizeof(int));
  Schedule *s = &g->sched;
  report->model_us = plan.latency_us;
  report->partition_us = lios_makespan(g, opt, cm, d, &c, plan.device);
  report->gpu_us = lios_makespan(g, opt, cm, d, &c, gpu);
  /* a chosen partition (not a forced one) stays only where it pays */
  bool chosen = strcmp(method, "ilp") == 0 || strcmp(method, "heuristic") == 0;
  bool offloads = false;
  for (int u = 0; u < d->n; u++)
    offloads |= plan.device[u] == HOPE_CPU;
  report->kept_gpu = chosen && offloads && report->gpu_us <= report->partition_us;
  s->ndevices = 2;
  s->host_device = 1;
  for (int u = 0; u < d->n; u++)
    node_sched(g, d->unit[u])->device = !report->kept_gpu && plan.device[u] == HOPE_CPU ? 1 : 0;
  free(gpu);
  return true;
}

bool pass_place_devices(Graph *g, const PassOptions *opt, PassContext *ctx) {
  if (opt->gpus <= 1 && !opt->cpu)
    return true;
  const CostModel *cm = pass_cost_model(ctx);
  if (!cm)
    return false;
  SchedDeps *d = pass_deps(ctx);
  if (opt->cpu) {
    if (!place_on_cpu(g, opt, cm, d, &ctx->hope))
      return false;
  } else {
    SchedOptions o;
    sched_options_from(opt, &o);
    MultiGpuPlan plan;
    hios_plan(d, cm, hios_transfer_costs(d, cm), opt->gpus, o.placement, o.window, NULL, &plan);
    for (int u = 0; u < d->n; u++)
      node_sched(g, d->unit[u])->device = plan.device[u];
  }
  /* a view lives where its storage does (tensor_device); its node, which
     issues nothing, says so too */
  for (int i = 0; i < g->nnodes; i++) {
    Node *v = g->nodes[i];
    if (!v->dead && v->is_view && v->nout > 0 && v->out[0] && tensor_device(g, v->out[0]) > 0)
      node_sched(g, v)->device = tensor_device(g, v->out[0]);
  }

  int ntensors = 0;
  for (int i = 0; i < g->nnodes; i++)
    for (int j = 0; j < g->nodes[i]->nin; j++)
      if (g->nodes[i]->in[j] && g->nodes[i]->in[j]->id + 1 > ntensors)
        ntensors = g->nodes[i]->in[j]->id + 1;
  int *owner = malloc(sizeof(int) * ((size_t)ntensors + 1));
  for (int i = 0; i < ntensors; i++)
    owner[i] = -1;
  Copies copies = {0};
  int nnodes = g->nnodes; /* the copies added below read what is already placed */
  for (int i = 0; i < nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || n->is_view)
      continue;
    for (int j = 0; j < n->nin; j++) {
      Tensor *t = n->in[j];
      if (!t)
        continue;
      n->in[j] = tensor_is_const(t) ? constant_on(g, &copies, t, node_sched(g, n)->device, owner)
                                    : value_on(g, &copies, t, node_sched(g, n)->device);
    }
  }
  /* outputs come back to GPU 0, under their own names */
  for (int i = 0; i < g->noutputs; i++) {
    Tensor *t = g->outputs[i];
    if (tensor_is_const(t) || tensor_device(g, t) == 0)
      continue;
    const char *name = t->name;
    t->name = suffixed(g, name, "gpu", tensor_device(g, t));
    t->is_output = false;
    Tensor *k = value_on(g, &copies, t, 0);
    k->name = name;
    k->producer->name = suffixed(g, name, "to_gpu", 0);
    k->is_output = true;
    g->outputs[i] = k;
  }
  free(copies.from);
  free(copies.to);
  free(copies.device);
  free(owner);
  for (int i = nnodes; i < g->nnodes; i++)
    if (!node_infer(g, g->nodes[i]))
      return false;
  graph_rebuild_uses(g);
  return graph_toposort(g); /* the copies go before their readers */
}
