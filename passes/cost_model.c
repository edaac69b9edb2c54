/*
 * cost_model.c - predicted latency of operators and of concurrent stages.
 *
 * One operator: cuDNN runs a batch-1 convolution as an implicit GEMM whose
 * output is cut into tiles (tile_m pixels x tile_n channels); each resident
 * tile walks the whole reduction (C/g x kernel volume). With few tiles the
 * GPU is mostly idle, so latency is
 *     conv_fixed + step * CRS * max(1, tiles / slots) + operand bytes / bandwidth
 * where slots = SMs x blocks_per_sm and step is the time one tile needs per
 * reduction element at gemm_efficiency of an SM's FP32 peak. Fitted on the
 * 131 convolutions of Inception-V3, GoogLeNet, SqueezeNet 1.1 and ResNet-50
 * in bench/data/h100 (geometric-mean error about 3%). Depthwise convolutions
 * use a separate power law fitted on NASNet's (about 14%). Everything else
 * is memory-bound: launch + bytes / sustained bandwidth.
 *
 * A stage: its groups run on separate streams. The longest group runs at
 * full speed and every other group adds the share of its time it takes from
 * it: interference + (1 - interference) x occupancy. A stage is never
 * shorter than its total work at full-machine throughput. Fitted and checked
 * on the 20 Inception blocks of bench/data/h100/inception-blocks.json
 * (branch-concurrency gain within about 12% geometric mean). Known bias:
 * lone sibling convolutions (sibling-merge.txt) overlap better than this
 * predicts (2.5-3.6x measured against 1.4-1.9x), so merges look a little
 * better than they are; the merged convolution itself is within 3%.
 *
 * With --cost-db, a unit measured by `net --profile` costs what was
 * measured (cost_db.c); its occupancy stays the analytic one.
 */
#include <math.h>
#include <stdlib.h>

#include "schedule.h"

void cost_model_init(CostModel *cm, const Device *dev) {
  *cm = (CostModel){.dev = *dev};
}

static double slots(const Device *d) { return d->sm_count * d->blocks_per_sm; }

/* Time one tile needs per reduction element (us), for float32 data or
   16-bit data (half). */
static double tile_step_us(const CostModel *cm, bool half) {
  const Device *d = &cm->dev;
  double sm_flops_per_us = d->peak_fp32_tflops * 1e6 / d->sm_count;
  double step = 2.0 * d->tile_m * d->tile_n * d->blocks_per_sm /
                (d->gemm_efficiency * sm_flops_per_us);
  /* TF32 tensor cores: the data-sheet gain over FP32, but no more than the
     2.5x measured on H100 batch-1 convolutions (they stay latency-bound).
     FP16 and BF16 ones: their data-sheet gain, capped at twice that, an
     assumption until a lent GPU measures it. */
  double peak = half && d->peak_fp16_tflops > 0 ? d->peak_fp16_tflops
                : cm->tf32                      ? d->peak_tf32_tflops
                                                : d->peak_fp32_tflops;
  double cap = half ? 5.0 : 2.5;
  if ((half || cm->tf32) && peak > d->peak_fp32_tflops) {
    double gain = peak / d->peak_fp32_tflops;
    step /= gain < cap ? gain : cap;
  }
  return step;
}

/* An M x N output, K-long reduction, `count` independent products, on
   float32 or 16-bit (half) data. */
static double gemm_us(const CostModel *cm, double m, double n, double k, double count,
                      double bytes, bool half, double *occupancy) {
  const Device *d = &cm->dev;
  double tiles = ceil(m / d->tile_m) * ceil(n / d->tile_n) * count;
  double waves = tiles / slots(d);
  if (occupancy)
    *occupancy = waves < 1 ? waves : 1;
  if (waves < 1)
    waves = 1;
  return d->conv_fixed_us + tile_step_us(cm, half) * k * waves +
         bytes / (d->operand_bandwidth_gbs * 1e3);
}

double cost_conv_us(const CostModel *cm, const ConvShape *s, double *occupancy) {
  const Device *d = &cm->dev;
  int64_t g = s->groups > 0 ? s->groups : 1;
  double cin_g = (double)s->in_channels / (double)g;
  double cout_g = (double)s->out_channels / (double)g;
  double crs = cin_g * (double)s->kernel_volume;
  double out_elems = (double)s->batch * (double)s->out_channels * (double)s->out_pixels;
  double elem = s->elem_bytes > 0 ? (double)s->elem_bytes : 4.0;
  double bytes = elem * ((double)s->in_elems + out_elems + (double)s->out_channels * crs);
  if (g > 1 && cin_g <= 1 && cout_g <= 4) {
    /* Depthwise: cuDNN's direct kernel, a power law in the multiply-adds. */
    double mfma = out_elems * crs / 1e6;
    double threads = d->sm_count * d->threads_per_sm;
    if (occupancy)
      *occupancy = out_elems < threads ? out_elems / threads : 1;
    return 2.25 + 2.22 * (67.0 / d->peak_fp32_tflops) * pow(mfma, 0.75) +
           bytes / (d->operand_bandwidth_gbs * 1e3);
  }
  return gemm_us(cm, (double)s->batch * (double)s->out_pixels, cout_g, crs, (double)g, bytes,
                 elem < 4, occupancy);
}

static double numel(const Tensor *t) { return t ? (double)tensor_numel(t) : 0; }

/* Bytes every input and output moves, constants included. */
static double node_bytes(const Node *n) {
  double b = 0;
  for (int i = 0; i < n->nin; i++)
    if (n->in[i])
      b += numel(n->in[i]) * (double)dtype_size(n->in[i]->dtype);
  for (int i = 0; i < n->nout; i++)
    if (n->out[i])
      b += numel(n->out[i]) * (double)dtype_size(n->out[i]->dtype);
  return b;
}

static double spatial(const Tensor *t, int from) {
  double p = 1;
  for (int i = from; t && i < t->rank; i++)
    p *= (double)t->dims[i];
  return p;
}

static void conv_shape(const Node *n, ConvShape *s) {
  const Tensor *x = n->in[0], *w = n->in[1], *y = n->out[0];
  *s = (ConvShape){0};
  s->batch = x->rank > 0 ? x->dims[0] : 1;
  s->in_channels = x->rank > 1 ? x->dims[1] : 1;
  s->out_channels = y->rank > 1 ? y->dims[1] : 1;
  s->groups = n->win.group > 0 ? n->win.group : 1;
  s->out_pixels = (int64_t)spatial(y, 2);
  s->kernel_volume = (int64_t)spatial(w, 2);
  s->in_elems = tensor_numel(x);
  s->elem_bytes = (int64_t)dtype_size(y->dtype);
}

static bool in_16_bits(const Node *n) {
  DType t = n->nout && n->out[0] ? n->out[0]->dtype : DT_FLOAT;
  return t == DT_FLOAT16 || t == DT_BFLOAT16;
}

static double conv_node_us(const CostModel *cm, const Node *n, double *occ) {
  ConvShape s;
  conv_shape(n, &s);
  double t = cost_conv_us(cm, &s, occ);
  if (node_input(n, 3)) /* residual: one more read of the output's size */
    t += numel(n->in[3]) * (double)dtype_size(n->in[3]->dtype) /
         (cm->dev.operand_bandwidth_gbs * 1e3);
  return t;
}

/* ConvTranspose: an input-pixels x (Cout x kernel) product, then col2im. */
static double conv_transpose_us(const CostModel *cm, const Node *n, double *occ) {
  const Tensor *x = n->in[0], *w = n->in[1];
  double g = n->win.group > 0 ? (double)n->win.group : 1;
  double m = (x->rank > 0 ? (double)x->dims[0] : 1) * spatial(x, 2);
  double cin = x->rank > 1 ? (double)x->dims[1] : 1;
  double cols = (w->rank > 1 ? (double)w->dims[1] : 1) * spatial(w, 2);
  return gemm_us(cm, m, cols, cin / g, g, node_bytes(n), in_16_bits(n), occ) +
         cm->dev.kernel_launch_us;
}

/* Gemm and MatMul: batch of M x N products with a K-long reduction. */
static double matmul_us(const CostModel *cm, const Node *n, double *occ) {
  const Tensor *a = n->in[0], *y = n->out[0];
  if (!a || !y || a->rank < 1 || y->rank < 1)
    return cm->dev.kernel_launch_us;
  double k = (double)a->dims[a->rank - 1];
  if (n->op == OP_GEMM && n->p.gemm.trans_a && a->rank >= 2)
    k = (double)a->dims[a->rank - 2];
  double cols = (double)y->dims[y->rank - 1];
  double rows = y->rank >= 2 ? (double)y->dims[y->rank - 2] : 1;
  double batch = numel(y) / (rows * cols > 0 ? rows * cols : 1);
  return gemm_us(cm, rows, cols, k, batch, node_bytes(n), in_16_bits(n), occ);
}

/* Memory-bound kernels: launch, traffic, and the arithmetic of windows. */
static double memory_us(const CostModel *cm, const Node *n, double *occ) {
  const Device *d = &cm->dev;
  double out = n->nout && n->out[0] ? numel(n->out[0]) : 0;
  double threads = d->sm_count * d->threads_per_sm;
  if (occ)
    *occ = out < threads ? out / threads : 1;
  double flops = out;
  CostClass cost = op_info(n->op)->cost;
  if (cost == COST_WINDOW) {
    double window = 1;
    for (int i = 0; i < n->win.nspatial; i++)
      window *= (double)n->win.kernel[i];
    flops = out * window;
  } else if (cost == COST_REDUCE) {
    flops = numel(n->in[0]);
  }
  double bandwidth = d->mem_bandwidth_gbs * d->memory_efficiency * 1e3; /* bytes/us */
  double rate = d->peak_fp32_tflops * 1e6 * 0.25;                       /* flops/us */
  return d->kernel_launch_us + node_bytes(n) / bandwidth + flops / rate;
}

static double analytic(const CostModel *cm, const Node *n, double *occ) {
  if (occ)
    *occ = 0;
  if (n->is_view || n->dead)
    return 0;
  bool operands = n->nin >= 2 && n->in[0] && n->in[1] && n->out[0];
  switch (op_info(n->op)->cost) {
  case COST_CONV:
    if (operands)
      return conv_node_us(cm, n, occ);
    break;
  case COST_CONV_TRANSPOSE:
    if (operands)
      return conv_transpose_us(cm, n, occ);
    break;
  case COST_GEMM:
    return matmul_us(cm, n, occ);
  case COST_MEMORY:
  case COST_WINDOW:
  case COST_REDUCE:
    break;
  }
  return memory_us(cm, n, occ);
}

/* Floating-point operations of the node's arithmetic, for the CPU model. */
static double node_flops(const Node *n) {
  bool operands = n->nin >= 2 && n->in[0] && n->in[1] && n->out[0];
  switch (op_info(n->op)->cost) {
  case COST_CONV: /* each output: C_in/group x kernel taps */
    if (operands) {
      const Tensor *x = n->in[0], *w = n->in[1];
      double g = n->win.group > 0 ? (double)n->win.group : 1;
      double cin = x->rank > 1 ? (double)x->dims[1] : 1;
      return 2 * numel(n->out[0]) * spatial(w, 2) * cin / g;
    }
    break;
  case COST_CONV_TRANSPOSE: /* each input: C_out/group x kernel taps */
    if (operands) {
      const Tensor *w = n->in[1];
      return 2 * numel(n->in[0]) * (w->rank > 1 ? (double)w->dims[1] : 1) * spatial(w, 2);
    }
    break;
  case COST_GEMM: {
    const Tensor *a = n->in[0], *y = n->out[0];
    if (a && y && a->rank >= 1)
      return 2 * numel(y) * (double)a->dims[a->rank - 1];
    break;
  }
  case COST_WINDOW: {
    double window = 1;
    for (int i = 0; i < n->win.nspatial; i++)
      window *= (double)n->win.kernel[i];
    return numel(n->out[0]) * window;
  }
  case COST_REDUCE:
    return numel(n->in[0]);
  case COST_MEMORY:
    break;
  }
  return n->nout && n->out[0] ? numel(n->out[0]) : 0;
}

double cost_node_floor_us(const CostModel *cm, const Node *n) {
  const Device *d = &cm->dev;
  double peak = in_16_bits(n) ? d->peak_fp16_tflops
                : cm->tf32    ? d->peak_tf32_tflops
                              : d->peak_fp32_tflops;
  double arithmetic = node_flops(n) / (peak * 1e6), memory = node_bytes(n) / (d->mem_bandwidth_gbs * 1e3);
  return (arithmetic > memory ? arithmetic : memory) + d->kernel_launch_us;
}

/* The host CPU: a fixed cost, then its arithmetic and its memory traffic. */
static double cpu_node_us(const CostModel *cm, const Node *n) {
  const Device *c = &cm->cpu;
  double measured;
  if (cost_db_lookup(cm->cpu_db, n, &measured))
    return measured;
  return c->cpu_op_us + node_flops(n) / (c->cpu_gflops * 1e3) +
         node_bytes(n) / (c->mem_bandwidth_gbs * 1e3);
}

double cost_host_transfer_us(const CostModel *cm, int64_t bytes) {
  return cm->dev.host_link_latency_us + (double)bytes / (cm->dev.host_link_gbps * 1e3);
}

static int64_t output_bytes(const Node *n) {
  return tensor_numel(n->out[0]) * (int64_t)dtype_size(n->out[0]->dtype);
}

double cost_node_on(const CostModel *cm, const Graph *g, const Node *n, bool cpu) {
  if (n->is_view || n->dead)
    return 0;
  if (cm->node_cost)
    return cm->node_cost(n);
  if (node_is_transfer(g, n)) { /* the link, not the processors' memory */
    bool host = cm->host_device > 0 && (node_sched(g, n)->device == cm->host_device ||
                                        tensor_device(g, n->in[0]) == cm->host_device);
    return host ? cost_host_transfer_us(cm, output_bytes(n))
                : hios_transfer_us(cm, output_bytes(n)) - cost_sync_us(cm);
  }
  if (cpu)
    return cpu_node_us(cm, n);
  double measured;
  if (cost_db_lookup(cm->db, n, &measured))
    return measured;
  return analytic(cm, n, NULL);
}

double cost_node_us(const CostModel *cm, const Graph *g, const Node *n) {
  return cost_node_on(cm, g, n, cm->host_device > 0 && node_sched(g, n)->device == cm->host_device);
}

double cost_occupancy(const CostModel *cm, const Graph *g, const Node *n) {
  if (n->is_view || n->dead)
    return 0;
  if (cm->node_occupancy)
    return cm->node_occupancy(n);
  if (node_is_transfer(g, n))
    return 0;
  if (cm->host_device > 0 && node_sched(g, n)->device == cm->host_device)
    return 1; /* each of its operators spreads over every core */
  double occ = 0;
  analytic(cm, n, &occ);
  return occ;
}

double cost_sync_us(const CostModel *cm) {
  return cm->dev.event_record_us + cm->dev.event_wait_us;
}

void cost_unit_load(const CostModel *cm, double t, double occupancy, GroupLoad *out) {
  double k = cm->dev.interference;
  out->alone = t;
  out->overlap = t * (k + (1 - k) * occupancy);
  out->work = t * occupancy;
}

static int by_alone_desc(const void *a, const void *b) {
  double x = ((const GroupLoad *)a)->alone, y = ((const GroupLoad *)b)->alone;
  return (x < y) - (x > y);
}

double cost_stage_loads(const CostModel *cm, GroupLoad *g, int ngroups, int max_streams) {
  if (ngroups <= 0)
    return 0;
  if (max_streams > 0 && ngroups > max_streams) {
    qsort(g, (size_t)ngroups, sizeof *g, by_alone_desc);
    /* Groups beyond the streams share them: longest first onto the least loaded. */
    GroupLoad bins[64] = {{0}};
    int nb = max_streams < 64 ? max_streams : 64;
    for (int i = 0; i < ngroups; i++) {
      int best = 0;
      for (int b = 1; b < nb; b++)
        if (bins[b].alone < bins[best].alone)
          best = b;
      bins[best].alone += g[i].alone;
      bins[best].overlap += g[i].overlap;
      bins[best].work += g[i].work;
    }
    for (int b = 0; b < nb; b++)
      g[b] = bins[b];
    ngroups = nb;
  }
  /* the longest group runs at full speed, the others add their overlap */
  int longest = 0;
  for (int i = 1; i < ngroups; i++)
    if (g[i].alone > g[longest].alone)
      longest = i;
  double t = g[longest].alone, work = 0;
  for (int i = 0; i < ngroups; i++) {
    if (i != longest)
      t += g[i].overlap;
    work += g[i].work;
  }
  if (work > t)
    t = work;
  return t + (ngroups - 1) * cost_sync_us(cm);
}

double cost_stage_us(const CostModel *cm, const Graph *graph, Node *const *nodes, int n,
                     const int *group_of, int max_streams) {
  int ngroups = 0;
  for (int i = 0; i < n; i++)
    if (group_of[i] + 1 > ngroups)
      ngroups = group_of[i] + 1;
  GroupLoad *g = calloc((size_t)ngroups + 1, sizeof *g);
  if (!g)
    return 0;
  for (int i = 0; i < n; i++) {
    GroupLoad u;
    cost_unit_load(cm, cost_node_us(cm, graph, nodes[i]), cost_occupancy(cm, graph, nodes[i]), &u);
    GroupLoad *dst = &g[group_of[i]];
    dst->alone += u.alone;
    dst->overlap += u.overlap;
    dst->work += u.work;
  }
  /* Empty group ids do not count as groups. */
  int used = 0;
  for (int i = 0; i < ngroups; i++)
    if (g[i].alone > 0 || g[i].work > 0)
      g[used++] = g[i];
  double t = cost_stage_loads(cm, g, used, max_streams);
  free(g);
  return t;
}
