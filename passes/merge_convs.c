/*
 * merge_convs.c - IOS's operator merge: sibling convolutions reading the
 * same tensor become one convolution whose output channels are theirs
 * stacked; each original output becomes a channel slice (a view) of the
 * merged output, written by a view Split, so nothing is copied.
 *
 * Siblings qualify with the same stride, dilation and activation, group 1,
 * no residual input, constant weights (and bias), outputs that are neither
 * views nor graph outputs. Kernels are zero-padded, centred, to the largest
 * kernel: a k-tap kernel padded by o = (K - k) / 2 taps on each side reads
 * the same inputs when its pads grow by o x dilation, so the set must agree
 * on pad + o x dilation at both ends (e.g. 1x3 pads (0,1) and 3x1 pads (1,0)
 * both become 3x3 pads (1,1)); K - k must be even.
 *
 * A merge is taken only where the cost model predicts the merged
 * convolution faster than the siblings running concurrently.
 */
#include <stdlib.h>
#include <string.h>

#include "pass.h"
#include "rewrite.h"
#include "schedule.h"

enum { MAX_SIBLINGS = 32 };

static bool candidate(const Node *n) {
  if (n->dead || n->is_view || n->op != OP_CONV || n->nin < 2 || n->nout != 1)
    return false;
  const Tensor *x = n->in[0], *w = n->in[1], *y = n->out[0];
  if (!x || !w || !y || !w->f32 || y->alias_of || y->is_output || y->is_input)
    return false;
  /* A channel slice of a channels-last output has its pixels apart, and
     cuDNN lists no convolution algorithm for a reader of one (seen on an
     H200 with cuDNN 9.19): only outputs in ONNX's order merge, but for
     float32 ones channels-last, which only the CPU target stores so
     (choose-layout's CPU form), whose kernels read and write such slices. */
  bool cpu_form = y->dtype == DT_FLOAT && tensor_is_channels_last(y) && conv_runs_channels_last(n);
  if (!has_contiguous_strides(y) && !cpu_form)
    return false;
  if (node_input(n, 2) && !n->in[2]->f32)
    return false;
  if (node_input(n, 3))
    return false;
  int ns = n->win.nspatial;
  if (ns < 1 || ns > 3 || n->win.group != 1 || w->rank != ns + 2 || y->rank != ns + 2 ||
      x->rank != ns + 2 || (y->dtype != DT_FLOAT && y->dtype != DT_FLOAT16 &&
                            y->dtype != DT_BFLOAT16))
    return false;
  return true;
}

static bool same_geometry(const Node *a, const Node *b) {
  if (a->win.nspatial != b->win.nspatial || a->act != b->act || a->act_alpha != b->act_alpha ||
      a->act_beta != b->act_beta)
    return false;
  for (int i = 0; i < a->win.nspatial; i++)
    if (a->win.stride[i] != b->win.stride[i] || a->win.dilation[i] != b->win.dilation[i])
      return false;
  for (int i = 0; i < a->out[0]->rank; i++)
    if (i != 1 && a->out[0]->dims[i] != b->out[0]->dims[i])
      return false;
  return true;
}

/* The merged window of `set`, or false when the kernels do not line up. */
static bool merged_window(Node **set, int n, Window *w) {
  *w = set[0]->win;
  int ns = w->nspatial;
  for (int d = 0; d < ns; d++) {
    int64_t k = 0;
    for (int i = 0; i < n; i++)
      if (set[i]->win.kernel[d] > k)
        k = set[i]->win.kernel[d];
    w->kernel[d] = k;
    for (int i = 0; i < n; i++) {
      const Window *s = &set[i]->win;
      int64_t grow = k - s->kernel[d];
      if (grow % 2)
        return false;
      int64_t begin = s->pad_begin[d] + grow / 2 * s->dilation[d];
      int64_t end = s->pad_end[d] + grow / 2 * s->dilation[d];
      if (i == 0) {
        w->pad_begin[d] = begin;
        w->pad_end[d] = end;
      } else if (begin != w->pad_begin[d] || end != w->pad_end[d]) {
        return false;
      }
    }
  }
  return true;
}

static int64_t out_channels(const Node *n) { return n->out[0]->dims[1]; }

static ConvShape merged_shape(Node **set, int n, const Window *w) {
  ConvShape s = {0};
  const Tensor *x = set[0]->in[0], *y = set[0]->out[0];
  s.batch = x->dims[0];
  s.in_channels = x->dims[1];
  s.groups = 1;
  s.out_pixels = 1;
  for (int d = 2; d < y->rank; d++)
    s.out_pixels *= y->dims[d];
  s.kernel_volume = 1;
  for (int d = 0; d < w->nspatial; d++)
    s.kernel_volume *= w->kernel[d];
  s.in_elems = tensor_numel(x);
  for (int i = 0; i < n; i++)
    s.out_channels += out_channels(set[i]);
  return s;
}

/* Predicted gain of merging: concurrent stage minus merged conv (> 0: merge). */
static double merge_gain(const CostModel *cm, const Graph *g, Node **set, int n, int streams) {
  Window w;
  if (n < 2 || !merged_window(set, n, &w))
    return -1;
  ConvShape s = merged_shape(set, n, &w);
  double merged = cost_conv_us(cm, &s, NULL);
  int groups[MAX_SIBLINGS];
  for (int i = 0; i < n; i++)
    groups[i] = i;
  return cost_stage_us(cm, g, set, n, groups, streams) - merged;
}

/*
 * The best subset of siblings to merge: start from all, drop the member
 * whose removal helps most while the merge does not pay (a 1x1 padded to
 * 5x5 costs 25 times its work), stop at two.
 */
static int choose_subset(const CostModel *cm, const Graph *g, Node **set, int n, int streams) {
  while (n >= 2) {
    if (merge_gain(cm, g, set, n, streams) > 0)
      return n;
    int drop = -1;
    double best = -1e300;
    for (int i = 0; i < n; i++) {
      Node *tmp = set[i];
      set[i] = set[n - 1];
      set[n - 1] = tmp;
      double gain = merge_gain(cm, g, set, n - 1, streams);
      set[n - 1] = set[i];
      set[i] = tmp;
      if (gain > best) {
        best = gain;
        drop = i;
      }
    }
    Node *tmp = set[drop];
    set[drop] = set[n - 1];
    set[n - 1] = tmp;
    n--;
  }
  return 0;
}

/* Siblings read one input, so they share its type (lower-precision made
   all three tensors of a 16-bit convolution 16-bit). */
static Tensor *new_tensor(Graph *g, const char *name, DType type, int rank, const int64_t *dims) {
  Tensor *t = graph_add_tensor(g, name);
  t->dtype = type;
  tensor_set_shape(t, rank, dims);
  return t;
}

static void set_ints(Graph *g, Node *n, const char *name, const int64_t *v, int count) {
  Attr *a = node_set_attr(g, n, name, ATTR_INTS);
  a->n = count;
  a->ints = arena_dup(g->arena, v, sizeof(int64_t) * (size_t)count);
}

/* Stacked, zero-padded, centred weights and concatenated biases. */
static void build_weights(Graph *g, Node **set, int n, const Window *w, Node *merged) {
  int ns = w->nspatial;
  const Tensor *x = set[0]->in[0];
  int64_t cin = x->dims[1], cout = 0;
  for (int i = 0; i < n; i++)
    cout += out_channels(set[i]);
  int64_t wd[5] = {cout, cin, 1, 1, 1};
  int64_t kvol = 1;
  for (int d = 0; d < ns; d++) {
    wd[2 + d] = w->kernel[d];
    kvol *= w->kernel[d];
  }
  DType type = set[0]->out[0]->dtype;
  Tensor *wt = new_tensor(g, arena_printf(g->arena, "%s_w", merged->name), type, ns + 2, wd);
  if (!has_contiguous_strides(set[0]->in[1]))
    tensor_set_channels_last(wt); /* choose-layout's order, as the siblings' */
  wt->f32 = arena_alloc(g->arena, sizeof(float) * (size_t)(cout * cin * kvol));
  int64_t bd[1] = {cout};
  Tensor *bt = new_tensor(g, arena_printf(g->arena, "%s_b", merged->name), type, 1, bd);
  bt->f32 = arena_alloc(g->arena, sizeof(float) * (size_t)cout);
  int64_t base = 0;
  for (int i = 0; i < n; i++) {
    const Tensor *src = set[i]->in[1];
    const Window *sw = &set[i]->win;
    int64_t k[3] = {1, 1, 1}, kk[3] = {1, 1, 1}, off[3] = {0, 0, 0};
    for (int d = 0; d < ns; d++) {
      k[d] = sw->kernel[d];
      kk[d] = w->kernel[d];
      off[d] = (kk[d] - k[d]) / 2;
    }
    int64_t co = out_channels(set[i]);
    for (int64_t o = 0; o < co; o++)
      for (int64_t c = 0; c < cin; c++)
        for (int64_t a = 0; a < k[0]; a++)
          for (int64_t b = 0; b < k[1]; b++)
            for (int64_t e = 0; e < k[2]; e++) {
              int64_t from = (((o * cin + c) * k[0] + a) * k[1] + b) * k[2] + e;
              int64_t to = ((((base + o) * cin + c) * kk[0] + a + off[0]) * kk[1] + b + off[1]) *
                               kk[2] + e + off[2];
              wt->f32[to] = src->f32[from];
            }
    const Tensor *bias = node_input(set[i], 2);
    for (int64_t o = 0; o < co; o++)
      bt->f32[base + o] = bias ? bias->f32[o] : 0.0f;
    base += co;
  }
  merged->in[1] = wt;
  merged->in[2] = bt;
}

/*
 * A view names its storage directly (ir.h), and the schedule's dependencies
 * (sched_deps.c) find a reader's writer through that one step. So the views
 * already made of a sibling's output (alias-reshape's Reshapes of it) must
 * follow it into the merged output: left naming the sibling's output, now a
 * view itself, their readers had no dependency on the merged convolution
 * and ran on other streams before it (fasterrcnn_mobilenet_v3_large_320_fpn's
 * RPN head: cls_logits and bbox_pred on the last level, each reshaped).
 * That takes the sibling's slice to be one block of the merged output, as
 * it is at batch 1 (the channels are the outermost dimension that varies).
 */
static bool views_can_follow(const Graph *g, const Tensor *y) {
  if (y->dims[0] == 1)
    return true;
  for (int k = 0; k < g->ntensors; k++)
    if (g->tensors[k]->alias_of == y)
      return false;
  return true;
}

static void repoint_views(Graph *g, const Tensor *yi, Tensor *y, int64_t offset) {
  for (int k = 0; k < g->ntensors; k++) {
    Tensor *v = g->tensors[k];
    if (v->alias_of == yi) {
      v->alias_of = y;
      v->alias_offset += offset;
    }
  }
}

/* Replaces the siblings by one convolution and a view Split. */
static void merge(Graph *g, Node **set, int n, const Window *w) {
  const Tensor *y0 = set[0]->out[0];
  int rank = y0->rank;
  Node *merged = graph_add_node(g, OP_CONV, arena_printf(g->arena, "%s_merged", set[0]->name),
                                3, 1);
  merged->in[0] = set[0]->in[0];
  merged->win = *w;
  merged->act = set[0]->act;
  merged->act_alpha = set[0]->act_alpha;
  merged->act_beta = set[0]->act_beta;
  build_weights(g, set, n, w, merged);

  int64_t dims[IR_MAX_RANK];
  memcpy(dims, y0->dims, sizeof(int64_t) * (size_t)rank);
  dims[1] = 0;
  for (int i = 0; i < n; i++)
    dims[1] += out_channels(set[i]);
  Tensor *y = new_tensor(g, arena_printf(g->arena, "%s_out", merged->name), y0->dtype, rank, dims);
  if (!has_contiguous_strides(y0))
    tensor_set_channels_last(y); /* the siblings' order (the CPU form's) */
  merged->out[0] = y;

  int ns = w->nspatial;
  int64_t pads[6], strides[3], dil[3], kernel[3];
  for (int d = 0; d < ns; d++) {
    pads[d] = w->pad_begin[d];
    pads[ns + d] = w->pad_end[d];
    strides[d] = w->stride[d];
    dil[d] = w->dilation[d];
    kernel[d] = w->kernel[d];
  }
  set_ints(g, merged, "kernel_shape", kernel, ns);
  set_ints(g, merged, "strides", strides, ns);
  set_ints(g, merged, "dilations", dil, ns);
  set_ints(g, merged, "pads", pads, 2 * ns);
  node_set_attr(g, merged, "group", ATTR_INT)->i = 1;

  /* Names of what the merged node stands for, for the emitted comments. */
  int nf = 0;
  for (int i = 0; i < n; i++)
    nf += 1 + set[i]->nfused;
  merged->fused = arena_alloc(g->arena, sizeof(char *) * (size_t)nf);
  for (int i = 0; i < n; i++) {
    merged->fused[merged->nfused++] = set[i]->name;
    for (int j = 0; j < set[i]->nfused; j++)
      merged->fused[merged->nfused++] = set[i]->fused[j];
  }

  /* The view Split: each original output is a channel slice of y. */
  Node *split = graph_add_node(g, OP_SPLIT, arena_printf(g->arena, "%s_split", merged->name),
                               g->opset >= 13 ? 2 : 1, n);
  split->in[0] = y;
  split->is_view = true;
  node_set_attr(g, split, "axis", ATTR_INT)->i = 1;
  int64_t sizes[MAX_SIBLINGS];
  for (int i = 0; i < n; i++)
    sizes[i] = out_channels(set[i]);
  split->p.split.axis = 1; /* what shape inference would resolve */
  split->p.split.sizes = arena_dup(g->arena, sizes, sizeof(int64_t) * (size_t)n);
  if (g->opset >= 13) {
    int64_t len = n;
    Tensor *st = graph_add_tensor(g, arena_printf(g->arena, "%s_sizes", split->name));
    st->dtype = DT_INT64;
    tensor_set_shape(st, 1, &len);
    st->i64 = arena_dup(g->arena, sizes, sizeof(int64_t) * (size_t)n);
    split->in[1] = st;
  } else {
    set_ints(g, split, "split", sizes, n);
  }
  int64_t offset = 0;
  for (int i = 0; i < n; i++) {
    Tensor *yi = set[i]->out[0];
    repoint_views(g, yi, y, offset);
    yi->alias_of = y;
    yi->alias_offset = offset;
    memcpy(yi->strides, y->strides, sizeof(int64_t) * (size_t)rank);
    split->out[i] = yi;
    offset += out_channels(set[i]) * y->strides[1];
    set[i]->dead = true;
  }
}

/* Merges the siblings reading `x` that pay; returns how many merges. */
static int merge_siblings(Graph *g, const CostModel *cm, Node **readers, int nreaders,
                          int streams) {
  bool used[MAX_SIBLINGS] = {false};
  int merges = 0;
  for (int i = 0; i < nreaders; i++) {
    if (used[i])
      continue;
    Node *set[MAX_SIBLINGS];
    int n = 0;
    for (int j = i; j < nreaders; j++)
      if (!used[j] && same_geometry(readers[i], readers[j]))
        set[n++] = readers[j];
    /* The pads must line up; keep those agreeing with the first. */
    Window w;
    while (n >= 2 && !merged_window(set, n, &w)) {
      int keep = 1;
      for (int j = 1; j < n; j++) {
        Node *pair[2] = {set[0], set[j]};
        if (merged_window(pair, 2, &w))
          set[keep++] = set[j];
      }
      n = keep == n ? 0 : keep;
    }
    n = choose_subset(cm, g, set, n, streams);
    for (int j = i; j < nreaders; j++)
      for (int k = 0; k < n; k++)
        if (readers[j] == set[k])
          used[j] = true;
    used[i] = true;
    if (n >= 2 && merged_window(set, n, &w)) {
      merge(g, set, n, &w);
      merges++;
    }
  }
  return merges;
}

/* Merges with a given cost model; returns false only on a broken graph. */
bool merge_convs_with(Graph *g, const CostModel *cm, int streams, int *merged) {
  int count = 0;
  /* use lists are not rebuilt while merging: new nodes are not revisited */
  graph_rebuild_uses(g);
  for (int t = 0; t < g->ntensors; t++) {
    Tensor *x = g->tensors[t];
    Node *readers[MAX_SIBLINGS];
    int n = 0;
    for (int u = 0; u < x->nusers && n < MAX_SIBLINGS; u++) {
      Node *r = x->users[u];
      if (candidate(r) && r->in[0] == x && views_can_follow(g, r->out[0])) {
        bool dup = false;
        for (int k = 0; k < n; k++)
          dup |= readers[k] == r;
        if (!dup)
          readers[n++] = r;
      }
    }
    if (n >= 2)
      count += merge_siblings(g, cm, readers, n, streams);
  }
  if (count) {
    graph_compact(g);
    if (!graph_toposort(g))
      return false;
  }
  if (merged)
    *merged = count;
  return true;
}

bool pass_merge_convs(Graph *g, const PassOptions *opt, PassContext *ctx) {
  if (opt->no_merge)
    return true;
  const CostModel *cm = pass_cost_model(ctx);
  if (!cm)
    return false;
  SchedOptions o;
  sched_options_from(opt, &o);
  return merge_convs_with(g, cm, o.streams, NULL);
}
