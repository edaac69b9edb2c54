/*
 * schedule_report.c - what the user sees of a schedule: --emit-schedule
 * (JSON), --emit-dot (Graphviz, stages as clusters, streams as colours)
 * and --report (a per-stage table on stdout). The driver writes them once
 * the pipeline has succeeded, from g->sched and the context's unit graph.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "pass.h"

/*
 * The transfers of a schedule on several GPUs: every dependency between
 * units on different GPUs moves the bytes the consumer reads. Calls
 * `each` once per transfer (may be NULL) and returns how many there are.
 */
typedef struct Transfer {
  const char *from; /* the unit writing what moves, or the graph input */
  int from_device;
  const Node *to;   /* the transfer unit */
  int64_t bytes;
  double us;
} Transfer;

/* "gpu1", or "cpu" for HOPE's host CPU. */
static const char *device_label(const Graph *g, int device) {
  static char buf[4][16];
  static int next;
  if (g->sched.host_device > 0 && device == g->sched.host_device)
    return "cpu";
  char *b = buf[next++ % 4];
  snprintf(b, sizeof buf[0], "gpu%d", device);
  return b;
}

/* The transfer units, in issue order. */
static int transfers_of(Graph *g, PassContext *ctx, Transfer *out) {
  if (g->sched.ndevices <= 1)
    return 0;
  const CostModel *cm = pass_cost_model(ctx);
  int count = 0;
  for (int k = 0; k < g->sched.norder; k++) {
    const Node *n = g->sched.order[k];
    if (!node_is_transfer(g, n))
      continue;
    if (out) {
      const Tensor *x = n->in[0];
      int64_t bytes = tensor_numel(n->out[0]) * (int64_t)dtype_size(n->out[0]->dtype);
      double us = g->sched.host_device > 0 ? cost_host_transfer_us(cm, bytes)
                                           : hios_transfer_us(cm, bytes);
      const Tensor *s = x->alias_of ? x->alias_of : x;
      out[count] =
          (Transfer){s->producer ? s->producer->name : x->name, tensor_device(g, x), n, bytes, us};
    }
    count++;
  }
  return count;
}

static Transfer *all_transfers(Graph *g, PassContext *ctx, int *n) {
  *n = transfers_of(g, ctx, NULL);
  Transfer *t = calloc((size_t)*n + 1, sizeof(Transfer));
  transfers_of(g, ctx, t);
  return t;
}

/* The group ids of a stage are dense from 0; the stream of group k. */
static int group_stream(const Graph *g, const Stage *st, int group) {
  for (int i = 0; i < st->nnodes; i++)
    if (node_sched(g, st->nodes[i])->group == group)
      return node_sched(g, st->nodes[i])->stream;
  return 0;
}

static json_t *unit_json(const Graph *g, const Node *n) {
  NodeSchedule *ns = node_sched(g, n);
  json_t *u = json_object();
  json_object_set_new(u, "name", json_string(n->name));
  json_object_set_new(u, "op", json_string(op_name(n->op)));
  json_object_set_new(u, "cost_us", json_real(ns->cost_us));
  json_object_set_new(u, "device", json_integer(ns->device));
  int len = unit_cost_key(n, NULL, 0);
  char *key = malloc((size_t)len + 1);
  if (key) {
    unit_cost_key(n, key, (size_t)len + 1);
    json_object_set_new(u, "key", json_string(key));
    free(key);
  }
  if (ns->record_event >= 0)
    json_object_set_new(u, "records_event", json_integer(ns->record_event));
  if (ns->nwaits) {
    json_t *w = json_array();
    for (int i = 0; i < ns->nwaits; i++)
      json_array_append_new(w, json_integer(ns->waits[i]));
    json_object_set_new(u, "waits", w);
  }
  return u;
}

static json_t *stage_json(const Graph *g, const Stage *st, int index) {
  json_t *s = json_object();
  json_object_set_new(s, "index", json_integer(index));
  json_object_set_new(s, "predicted_us", json_real(st->predicted_us));
  json_t *groups = json_array();
  for (int k = 0; k < st->ngroups; k++) {
    json_t *grp = json_object();
    json_object_set_new(grp, "stream", json_integer(group_stream(g, st, k)));
    json_t *units = json_array();
    for (int i = 0; i < st->nnodes; i++)
      if (node_sched(g, st->nodes[i])->group == k)
        json_array_append_new(units, unit_json(g, st->nodes[i]));
    json_object_set_new(grp, "units", units);
    json_array_append_new(groups, grp);
  }
  json_object_set_new(s, "groups", groups);
  return s;
}

static json_t *transfers_json(Graph *g, PassContext *ctx) {
  int n;
  Transfer *t = all_transfers(g, ctx, &n);
  json_t *list = json_array();
  for (int i = 0; i < n; i++) {
    json_t *x = json_object();
    json_object_set_new(x, "from", json_string(t[i].from));
    json_object_set_new(x, "from_device", json_string(device_label(g, t[i].from_device)));
    json_object_set_new(x, "to", json_string(t[i].to->name));
    json_object_set_new(x, "to_device",
                        json_string(device_label(g, node_sched(g, t[i].to)->device)));
    json_object_set_new(x, "bytes", json_integer(t[i].bytes));
    json_object_set_new(x, "predicted_us", json_real(t[i].us));
    json_array_append_new(list, x);
  }
  free(t);
  return list;
}

bool schedule_write_json(Graph *g, PassContext *ctx, const char *path) {
  const Schedule *sc = &g->sched;
  json_t *root = json_object();
  json_object_set_new(root, "model", json_string(g->path));
  json_object_set_new(root, "scheduler", json_string(sc->scheduler ? sc->scheduler : "none"));
  json_object_set_new(root, "predicted_latency_us", json_real(sc->predicted_us));
  json_object_set_new(root, "sequential_latency_us", json_real(sc->sequential_us));
  json_object_set_new(root, "simulated_latency_us", json_real(sc->simulated_us));
  json_object_set_new(root, "units", json_integer(sc->norder));
  json_object_set_new(root, "streams", json_integer(sc->nstreams));
  json_object_set_new(root, "events", json_integer(sc->nevents));
  json_object_set_new(root, "devices", json_integer(sc->ndevices));
  if (sc->ndevices > 1) {
    json_object_set_new(root, "placed_latency_us", json_real(ctx->hios.mapped_us));
    json_object_set_new(root, "transfers", transfers_json(g, ctx));
  }
  if (sc->host_device > 0) {
    json_t *hope = json_object();
    json_object_set_new(hope, "partition", json_string(ctx->opt->partition ? ctx->opt->partition
                                                                             : "ilp"));
    json_object_set_new(hope, "model_latency_us", json_real(ctx->hope.model_us));
    json_object_set_new(hope, "partition_latency_us", json_real(ctx->hope.partition_us));
    json_object_set_new(hope, "gpu_alone_latency_us", json_real(ctx->hope.gpu_us));
    json_object_set_new(hope, "kept_gpu", json_boolean(ctx->hope.kept_gpu));
    json_object_set_new(root, "hope", hope);
  }
  json_t *search = json_object();
  json_object_set_new(search, "states", json_integer(sc->states));
  json_object_set_new(search, "transitions", json_integer(sc->transitions));
  json_object_set_new(search, "seconds", json_real(sc->search_seconds));
  json_object_set_new(root, "search", search);
  json_t *stages = json_array();
  for (int i = 0; i < sc->nstages; i++)
    json_array_append_new(stages, stage_json(g, &sc->stages[i], i));
  json_object_set_new(root, "stages", stages);
  json_t *order = json_array();
  for (int i = 0; i < sc->norder; i++)
    json_array_append_new(order, json_string(sc->order[i]->name));
  json_object_set_new(root, "order", order);
  int rc = json_dump_file(root, path, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (rc != 0) {
    opc_error("%s: cannot write the schedule", path);
    return false;
  }
  return true;
}

static const char *stream_colour(int s) {
  static const char *palette[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3",
                                  "#fdb462", "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd",
                                  "#ccebc5", "#ffed6f"};
  return palette[s % (int)(sizeof palette / sizeof palette[0])];
}

static int pred_index(const SchedDeps *d, int v, int u) {
  for (int k = 0; k < d->npred[v]; k++)
    if (d->pred[v][k] == u)
      return k;
  return 0;
}

/* A dot identifier: the node id, so that names need no quoting rules. */
bool schedule_write_dot(Graph *g, PassContext *ctx, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    opc_error("%s: cannot write the graph", path);
    return false;
  }
  const Schedule *sc = &g->sched;
  fprintf(f, "digraph schedule {\n  rankdir=TB;\n  node [shape=box, style=filled, "
             "fontname=\"Helvetica\", fontsize=10];\n");
  for (int i = 0; i < sc->nstages; i++) {
    const Stage *st = &sc->stages[i];
    fprintf(f, "  subgraph cluster_stage%d {\n    label=\"stage %d  %.1f us\";\n"
               "    style=rounded; color=\"#999999\";\n", i, i, st->predicted_us);
    for (int k = 0; k < st->nnodes; k++) {
      const Node *n = st->nodes[k];
      NodeSchedule *ns = node_sched(g, n);
      fprintf(f, "    n%d [label=\"", n->id);
      for (const char *c = n->name; *c; c++)
        fprintf(f, (*c == '"' || *c == '\\') ? "\\%c" : "%c", *c);
      if (sc->ndevices > 1)
        fprintf(f, "\\n%s  %.1f us  %s s%d\", fillcolor=\"%s\"];\n", op_name(n->op),
                ns->cost_us, device_label(g, ns->device), ns->stream, stream_colour(ns->device));
      else
        fprintf(f, "\\n%s  %.1f us  s%d\", fillcolor=\"%s\"];\n", op_name(n->op), ns->cost_us,
                ns->stream, stream_colour(ns->stream));
    }
    fprintf(f, "  }\n");
  }
  SchedDeps *d = pass_deps(ctx);
  for (int u = 0; u < d->n; u++)
    for (int k = 0; k < d->nsucc[u]; k++) {
      const Node *a = d->unit[u], *b = d->unit[d->succ[u][k]];
      if (node_sched(g, a)->device != node_sched(g, b)->device)
        fprintf(f, "  n%d -> n%d [style=bold, color=\"#d62728\", label=\"%.1f KB\"];\n", a->id,
                b->id, (double)hios_edge_bytes(d, d->succ[u][k], pred_index(d, d->succ[u][k], u)) / 1024);
      else
        fprintf(f, "  n%d -> n%d%s;\n", a->id, b->id,
                node_sched(g, a)->stream != node_sched(g, b)->stream ? " [style=dashed]" : "");
    }
  fprintf(f, "}\n");
  bool ok = fclose(f) == 0;
  if (!ok)
    opc_error("%s: cannot write the graph", path);
  return ok;
}

/* Per GPU: its units and their work; then the transfers between GPUs. */
static void print_devices(Graph *g, PassContext *ctx, FILE *f) {
  const Schedule *sc = &g->sched;
  fprintf(f, "%6s %6s %12s\n", "device", "units", "busy_us");
  for (int dev = 0; dev < sc->ndevices; dev++) {
    int units = 0;
    double busy = 0;
    for (int k = 0; k < sc->norder; k++)
      if (node_sched(g, sc->order[k])->device == dev) {
        units++;
        busy += node_sched(g, sc->order[k])->cost_us;
      }
    fprintf(f, "%6s %6d %12.2f\n", device_label(g, dev), units, busy);
  }
  int n;
  Transfer *t = all_transfers(g, ctx, &n);
  int64_t bytes = 0;
  double us = 0;
  for (int i = 0; i < n; i++) {
    bytes += t[i].bytes;
    us += t[i].us;
  }
  const CostModel *cm = pass_cost_model(ctx);
  bool host = sc->host_device > 0;
  fprintf(f, "transfers: %d, %.1f KB, %.2f us predicted in all (%s, %.1f GB/s, %.1f us each)\n",
          n, (double)bytes / 1024, us, host ? "host link" : cm->dev.link,
          host ? cm->dev.host_link_gbps : cm->dev.link_gbps,
          host ? cm->dev.host_link_latency_us : cm->dev.link_latency_us);
  for (int i = 0; i < n; i++)
    fprintf(f, "  %4s -> %-4s %10.1f KB %8.2f us  %s -> %s\n", device_label(g, t[i].from_device),
            device_label(g, node_sched(g, t[i].to)->device), (double)t[i].bytes / 1024, t[i].us,
            t[i].from, t[i].to->name);
  free(t);
  if (host) {
    const char *method = ctx->opt->partition ? ctx->opt->partition : "ilp";
    fprintf(f, "HOPE's %s partition: %.2f us in its model (one unit at a time per processor); "
               "LIOS predicts %.2f us, the GPU alone %.2f us\n",
            method, ctx->hope.model_us, ctx->hope.partition_us, ctx->hope.gpu_us);
    if (ctx->hope.kept_gpu)
      fprintf(f, "kept everything on the GPU: the partition does not beat it\n");
    fprintf(f, "placed on the GPU and the host CPU (%s); %s on the GPU, one unit at a time on "
               "the CPU\n",
            cm->cpu.name, sc->scheduler ? sc->scheduler : "none");
  } else if (sc->scheduler && strcmp(sc->scheduler, "hios") == 0)
    fprintf(f, "placed on %d GPUs: %.2f us, one unit at a time per GPU; grouped: %.2f us\n",
            sc->ndevices, ctx->hios.mapped_us, sc->predicted_us);
  else
    fprintf(f, "placed on %d GPUs by HIOS-LP; %s within each GPU\n", sc->ndevices,
            sc->scheduler ? sc->scheduler : "none");
}

/*
 * The floor no schedule can beat on this device: the longest chain of
 * dependent kernels, each taking its cost_node_floor_us. Nodes that issue
 * nothing (views, constants) pass their inputs' times on. *kernels: the
 * chain's length.
 */
static double floor_us(const Graph *g, const CostModel *cm, int *kernels) {
  double *finish = calloc((size_t)g->nnodes + 1, sizeof *finish);
  int *count = calloc((size_t)g->nnodes + 1, sizeof *count);
  double longest = 0;
  *kernels = 0;
  for (int i = 0; finish && count && i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (n->dead)
      continue;
    double start = 0;
    int before = 0;
    for (int k = 0; k < n->nin; k++) {
      const Node *p = n->in[k] ? n->in[k]->producer : NULL;
      if (p && !p->dead && finish[p->id] > start) {
        start = finish[p->id];
        before = count[p->id];
      }
    }
    bool issues = !n->is_view && n->op != OP_CONSTANT;
    finish[n->id] = start + (issues ? cost_node_floor_us(cm, n) : 0);
    count[n->id] = before + issues;
    if (finish[n->id] > longest) {
      longest = finish[n->id];
      *kernels = count[n->id];
    }
  }
  free(finish);
  free(count);
  return longest;
}

void schedule_print_report(Graph *g, PassContext *ctx, FILE *f) {
  const Schedule *sc = &g->sched;
  const CostModel *cm = pass_cost_model(ctx);
  for (int i = 0; i < g->nnotes; i++)
    fprintf(f, "%s\n", g->notes[i]);
  fprintf(f, "schedule: %s, %d units, %d stages, %d streams, %d events\n",
          sc->scheduler ? sc->scheduler : "none", sc->norder, sc->nstages, sc->nstreams,
          sc->nevents);
  if (cm)
    fprintf(f, "device: %s (--device %s): the times below are predicted for it\n", cm->dev.name,
            ctx->opt->device ? ctx->opt->device : "h100");
  fprintf(f, "%6s %7s %6s %12s %12s  %s\n", "stage", "groups", "units", "predicted_us",
          "serial_us", "longest unit");
  for (int i = 0; i < sc->nstages; i++) {
    const Stage *st = &sc->stages[i];
    double serial = 0;
    const Node *longest = NULL;
    for (int k = 0; k < st->nnodes; k++) {
      serial += node_sched(g, st->nodes[k])->cost_us;
      if (!longest || node_sched(g, st->nodes[k])->cost_us > node_sched(g, longest)->cost_us)
        longest = st->nodes[k];
    }
    fprintf(f, "%6d %7d %6d %12.2f %12.2f  %s\n", i, st->ngroups, st->nnodes,
            st->predicted_us, serial, longest ? longest->name : "-");
  }
  if (sc->ndevices > 1)
    print_devices(g, ctx, f);
  double speedup = sc->predicted_us > 0 ? sc->sequential_us / sc->predicted_us : 1;
  fprintf(f, "predicted %.2f us, sequential %.2f us, speedup %.2fx\n", sc->predicted_us,
          sc->sequential_us, speedup);
  if (sc->simulated_us > 0)
    fprintf(f, "simulated program (no stage barriers): %.2f us, speedup %.2fx\n",
            sc->simulated_us, sc->sequential_us / sc->simulated_us);
  int kernels;
  double floor = cm ? floor_us(g, cm, &kernels) : 0;
  if (floor > 0)
    fprintf(f, "floor: %.2f us, the longest chain of %d kernels, each its arithmetic at peak or "
               "its bytes at full bandwidth, plus a launch; predicted / floor %.2f\n",
            floor, kernels, (sc->simulated_us > 0 ? sc->simulated_us : sc->predicted_us) / floor);
  /* Only the IOS programme searches states; the others decide in one pass. */
  if (sc->states > 0 || (sc->scheduler && strcmp(sc->scheduler, "ios") == 0))
    fprintf(f, "search: %ld states, %ld transitions, %.3f ms\n", sc->states, sc->transitions,
            sc->search_seconds * 1e3);
  else
    fprintf(f, "search: one pass over %d units, %.3f ms\n", sc->norder, sc->search_seconds * 1e3);
  for (int i = 0; i < ctx->nqdq_notes; i++)
    fprintf(f, "fuse-qdq: %s\n", ctx->qdq_notes[i]);
}
