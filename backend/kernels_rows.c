/*
 * kernels_rows.c - pooling, reductions, softmax and normalisations as
 * launches of opc's kernels: the pools, the Reduce* operators and the
 * global pools, Softmax and LogSoftmax, LayerNormalization,
 * RMSNormalization, GroupNormalization, RotaryEmbedding, Attention,
 * InstanceNormalization, LRN, BatchNormalization, Hardmax, CumSum,
 * MeanVarianceNormalization and LpNormalization.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* ---------------------------------------------------------------- pools */

static void run_pool(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  const Window *w = &n->win;
  if (pool_nhwc_takes(e, n)) {
    emit_pool_nhwc(e, n);
    return;
  }
  if (w->nspatial < 1 || w->nspatial > 3 || x->rank != 2 + w->nspatial) {
    kernel_fail(e, n, "pooling over 1 to 3 spatial dims only");
    return;
  }
  bool average = n->op == OP_AVERAGE_POOL;
  if (average && w->count_include_pad) {
    for (int d = 0; d < w->nspatial; d++) {
      int64_t last = (y->dims[2 + d] - 1) * w->stride[d] + (w->kernel[d] - 1) * w->dilation[d];
      if (last >= x->dims[2 + d] + w->pad_begin[d] + w->pad_end[d]) {
        kernel_fail(e, n, "count_include_pad with windows past the end padding is not supported");
        return;
      }
    }
  }
  Launch L = {.kernel = op_kernel(e, n->op), .rank = 5};
  if (!dtype_is_float(x->dtype)) { /* MaxPool on int8 or uint8 (ops.def's run_types) */
    L.kernel = typed_kernel(e, L.kernel, x->dtype);
    set_element_type(&L, x->dtype);
  }
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], x5[5], y5[5];
  strides_of(x, xs);
  strides_of(y, ys);
  for (int d = 0; d < 5; d++) {
    bool real = d < x->rank;
    L.dims[d] = real ? y->dims[d] : 1;
    x5[d] = real ? xs[d] : 0;
    y5[d] = real ? ys[d] : 0;
  }
  set_output(&L, buf(e, y), y5);
  set_input(&L, 0, buf(e, x), x5);
  L.x_extent[0] = reach(x->rank, x->dims, xs, &(int64_t){0});
  for (int d = 0; d < 3; d++) {
    bool real = d < w->nspatial;
    L.i[d] = real ? w->kernel[d] : 1;
    L.i[3 + d] = real ? w->stride[d] : 1;
    L.i[6 + d] = real ? w->dilation[d] : 1;
    L.i[9 + d] = real ? w->pad_begin[d] : 0;
    L.i[12 + d] = real ? x->dims[2 + d] : 1;
  }
  group_i(&L, 0, 3, "window");
  group_i(&L, 3, 3, "strides");
  group_i(&L, 6, 3, "dilations");
  group_i(&L, 9, 3, "padding before");
  group_i(&L, 12, 3, "the input's spatial dims");
  if (average) {
    L.i[15] = w->count_include_pad;
    group_i(&L, 15, 1, "count_include_pad");
  }
  if (n->op == OP_LP_POOL) {
    L.f[0] = (float)n->p.lp.p;
    group_f(&L, 0, 1, "p");
  }
  emit_launch(e, n, &L);
  Tensor *indices = n->nout > 1 ? n->out[1] : NULL;
  if (indices && tensor_needed(indices)) {
    /* MaxPool's Indices: a second pass over the same windows. */
    if (x->dtype != DT_FLOAT) {
      kernel_fail(e, n, "MaxPool's Indices output takes float32 data only");
      return;
    }
    Launch A = L;
    A.kernel = "opc_max_pool_argmax";
    strides_of(indices, ys);
    for (int d = 0; d < 5; d++)
      y5[d] = d < x->rank ? ys[d] : 0;
    set_output(&A, buf(e, indices), y5);
    A.y_bytes = 8;
    A.i[15] = w->column_major;
    group_i(&A, 15, 1, "storage_order");
    emit_launch(e, n, &A);
  }
}

/* MaxUnpool: the output cleared, then X scattered to its indices. */
static void run_max_unpool(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *indices = n->in[1], *y = n->out[0];
  int64_t xs[IR_MAX_RANK], is[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(indices, is);
  strides_of(y, ys);
  Launch clear = {.kernel = op_kernel(e, n->op), .rank = y->rank};
  memcpy(clear.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  set_output(&clear, buf(e, y), ys);
  group_i(&clear, 0, 1, "0: clear the output");
  emit_launch(e, n, &clear);
  Launch L = {.kernel = op_kernel(e, n->op), .rank = x->rank};
  memcpy(L.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), xs);
  set_input(&L, 1, buf(e, indices), is);
  L.x_extent[0] = reach(x->rank, x->dims, xs, &(int64_t){0});
  L.x_extent[1] = reach(indices->rank, indices->dims, is, &(int64_t){0});
  L.x_bytes[1] = 8;
  L.y_extent = reach(y->rank, y->dims, ys, &(int64_t){0});
  L.i[0] = 1;
  group_i(&L, 0, 1, "1: scatter X");
  int64_t unpooled[IR_MAX_RANK];
  max_unpool_shape(n, unpooled);
  for (int d = 0; d < y->rank; d++)
    L.i[1 + d] = unpooled[d];
  group_i(&L, 1, y->rank, "the unpooled dims the indices count in");
  L.note = "x = {X, I (int64)}; y strides are the output's";
  emit_launch(e, n, &L);
}

/* ---------------------------------------- reductions, softmax, row norms */

static void run_reduce(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  bool reduced[IR_MAX_RANK], noop = false;
  if (n->op == OP_GLOBAL_AVERAGE_POOL || n->op == OP_GLOBAL_MAX_POOL) {
    for (int d = 0; d < x->rank; d++)
      reduced[d] = d >= 2;
  } else {
    memcpy(reduced, n->p.reduce.reduced, sizeof reduced);
    noop = n->p.reduce.noop;
  }
  if (noop) {
    run_reshape_copy(e, n);
    return;
  }
  int64_t yst[IR_MAX_RANK];
  reduced_output_strides(x, y, reduced, yst);
  Launch L = {0};
  bool max = n->op == OP_REDUCE_MAX || n->op == OP_GLOBAL_MAX_POOL;
  bool sum = !max && n->op != OP_REDUCE_MIN;
  L.kernel = typed_kernel(e, op_kernel(e, n->op), y->dtype);
  if (!row_launch(e, n, &L, x, reduced, buf(e, y), yst, false))
    return;
  set_element_type(&L, y->dtype);
  /* Only the outer positions are written. */
  int64_t low;
  L.y_extent = reach(L.rank, L.dims, L.ystride, &low);
  if (sum) {
    bool mean = n->op == OP_REDUCE_MEAN || n->op == OP_GLOBAL_AVERAGE_POOL;
    L.i[14] = mean ? L.i[15] : 0;
    group_i(&L, 14, 1, mean ? "the divisor: a mean" : "0: a sum");
  } else {
    L.f[1] = dtype_is_float(y->dtype) ? (max ? -INFINITY : INFINITY) : 0.0f;
    group_f(&L, 1, 1, "the value of an empty row");
  }
  row_run_length(e, &L, x, reduced);
  emit_launch(e, n, &L);
}

static void run_softmax(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  int axis = n->p.axis.axis;
  bool coerce = n->p.axis.coerce2d;
  bool reduced[IR_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    reduced[d] = coerce ? d >= axis : d == axis;
  int64_t ys[IR_MAX_RANK];
  strides_of(y, ys);
  Launch L = {.kernel = op_kernel(e, n->op)};
  if (!row_launch(e, n, &L, x, reduced, buf(e, y), ys, true))
    return;
  emit_launch(e, n, &L);
}

/* LayerNormalization's optional outputs, Mean and InvStdDev: one value per
   row, in the input's shape with the normalised dims set to 1. */
static void layer_norm_stats(Emitter *e, const Node *n, const bool *reduced) {
  Tensor *x = n->in[0];
  for (int k = 1; k <= 2 && k < n->nout; k++) {
    Tensor *out = n->out[k];
    if (!tensor_needed(out))
      continue;
    int64_t ys[IR_MAX_RANK];
    reduced_output_strides(x, out, reduced, ys);
    Launch L = {.kernel = k == 1 ? "opc_reduce_sum_f32" : "opc_reduce_inv_std"};
    if (!row_launch(e, n, &L, x, reduced, buf(e, out), ys, false))
      return;
    int64_t low;
    L.y_extent = reach(L.rank, L.dims, L.ystride, &low);
    if (k == 1) {
      L.i[14] = L.i[15];
      group_i(&L, 14, 1, "the divisor: a mean");
    } else {
      L.f[0] = n->p.norm.epsilon;
      group_f(&L, 0, 1, "epsilon");
    }
    L.note = k == 1 ? "the Mean output" : "the InvStdDev output";
    emit_launch(e, n, &L);
  }
}

static void run_layer_norm(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0], *scale = node_input(n, 1), *bias = node_input(n, 2);
  int axis = n->p.norm.axis;
  bool reduced[IR_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    reduced[d] = d >= axis;
  int64_t ys[IR_MAX_RANK];
  strides_of(y, ys);
  Launch L = {.kernel = "opc_layer_norm"};
  if (!row_launch(e, n, &L, x, reduced, buf(e, y), ys, true))
    return;
  Tensor *params[2] = {scale, bias};
  for (int k = 0; k < 2; k++) {
    Tensor *p = params[k];
    if (!p)
      continue;
    int64_t count = tensor_numel(p);
    if (count != 1 && count != L.i[15]) {
      kernel_fail(e, n, "scale and bias must have the normalised shape or one element");
      return;
    }
    L.x[1 + k] = buf(e, p);
    L.x_extent[1 + k] = count;
    L.i[13 + k] = count == 1 ? 0 : 1;
  }
  L.nx = bias ? 3 : 2;
  group_i(&L, 13, bias ? 2 : 1, bias ? "scale and bias steps along the row" : "scale step along the row");
  L.f[0] = n->p.norm.epsilon;
  group_f(&L, 0, 1, "epsilon");
  L.note = "x = {input, scale, bias}";
  emit_launch(e, n, &L);
  layer_norm_stats(e, n, reduced);
}

/* Where along the row RMSNormalization's scale is read: position j takes
   element j / *div % *count. That covers a scale that broadcasts (aligned
   right) to the row's dims with its own dims in one run, the others 1: the
   whole row, one value, the last dims ([D] over [S, D]) or the first ones
   ([S, 1] over [S, D]). */
static bool row_scale_period(const Tensor *p, int rrank, const int64_t *rdims, int64_t *div,
                             int64_t *count) {
  int lo = rrank, hi = 0, skip = rrank - p->rank;
  for (int d = 0; d < rrank; d++)
    if (d >= skip && p->dims[d - skip] != 1) {
      lo = d < lo ? d : lo;
      hi = d + 1;
    }
  *count = 1;
  *div = 1;
  for (int d = lo; d < hi; d++) {
    if (d < skip || p->dims[d - skip] != rdims[d])
      return false; /* a dim of 1 inside the run */
    *count *= rdims[d];
  }
  for (int d = hi > lo ? hi : rrank; d < rrank; d++)
    *div *= rdims[d];
  return true;
}

static void run_rms_norm(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0], *scale = n->in[1];
  int axis = n->p.norm.axis;
  bool reduced[IR_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    reduced[d] = d >= axis;
  int64_t ys[IR_MAX_RANK], div, count;
  if (!row_scale_period(scale, x->rank - axis, x->dims + axis, &div, &count)) {
    kernel_fail(e, n, "scale must vary along one run of the normalised dims (its other dims 1)");
    return;
  }
  strides_of(y, ys);
  Launch L = {.kernel = op_kernel(e, n->op)};
  if (!row_launch(e, n, &L, x, reduced, buf(e, y), ys, true))
    return;
  L.x[1] = buf(e, scale);
  L.x_extent[1] = tensor_numel(scale);
  L.nx = 2;
  L.i[13] = div;
  L.i[14] = count;
  group_i(&L, 13, 2, "scale read at (position in the row / i[13]) % i[14]");
  L.f[0] = n->p.norm.epsilon;
  group_f(&L, 0, 1, "epsilon");
  L.note = "x = {input, scale}";
  emit_launch(e, n, &L);
}

static void run_instance_norm(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  bool reduced[IR_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    reduced[d] = d >= 2;
  int64_t ys[IR_MAX_RANK];
  strides_of(y, ys);
  Launch L = {.kernel = "opc_instance_norm"};
  if (!row_launch(e, n, &L, x, reduced, buf(e, y), ys, true))
    return;
  for (int k = 1; k <= 2; k++) {
    L.x[k] = buf(e, n->in[k]);
    L.x_extent[k] = x->dims[1];
  }
  L.nx = 3;
  L.i[13] = x->dims[1];
  group_i(&L, 13, 1, "channels");
  L.f[0] = n->p.norm.epsilon;
  group_f(&L, 0, 1, "epsilon");
  L.note = "x = {input, scale, bias}";
  emit_launch(e, n, &L);
  fused_activation(e, n);
}

/* ------------------------------------ group norm and rotary embedding */

/* Kernels that index their operands themselves, as contiguous arrays:
   one launch of `count` iterations, input k of x_extent elements. */
static bool whole_arrays(Emitter *e, Node *n, Launch *L, int64_t count) {
  for (int k = 0; k < n->nin; k++) {
    Tensor *t = n->in[k];
    if (t && !buffer_is_contiguous(t))
      return kernel_fail(e, n, "inputs must be contiguous (not a strided view)");
  }
  if (!buffer_is_contiguous(n->out[0]))
    return kernel_fail(e, n, "the output must be contiguous (not a strided view)");
  L->rank = 1;
  L->dims[0] = count;
  L->n = count;
  L->nx = n->nin;
  for (int k = 0; k < n->nin; k++) {
    Tensor *t = n->in[k];
    L->x[k] = t ? buf(e, t) : NULL;
    L->x_extent[k] = t ? tensor_numel(t) : 0;
    L->x_bytes[k] = t && t->dtype == DT_INT64 ? 8 : 0;
  }
  L->y = buf(e, n->out[0]);
  L->y_extent = tensor_numel(n->out[0]);
  return true;
}

static void run_group_norm(Emitter *e, Node *n) {
  Tensor *x = n->in[0];
  int64_t groups = n->p.group_norm.groups, spatial = dims_product(x->dims, 2, x->rank);
  Launch L = {.kernel = op_kernel(e, n->op)};
  if (!whole_arrays(e, n, &L, x->dims[0] * groups))
    return;
  L.i[0] = groups;
  L.i[1] = spatial;
  L.i[2] = n->p.group_norm.per_channel;
  group_i(&L, 0, 3, "groups, spatial size, scale per channel (else per group)");
  L.i[15] = x->dims[1] / groups * spatial;
  group_i(&L, 15, 1, "row length");
  L.f[0] = n->p.group_norm.epsilon;
  group_f(&L, 0, 1, "epsilon");
  L.note = "x = {input, scale, bias}";
  emit_launch(e, n, &L);
}

static void run_rotary_embedding(Emitter *e, Node *n) {
  Launch L = {.kernel = op_kernel(e, n->op)};
  int64_t rows = n->p.rotary.batch * n->p.rotary.seq * n->p.rotary.heads;
  if (!whole_arrays(e, n, &L, rows))
    return;
  L.i[0] = n->p.rotary.seq;
  L.i[1] = n->p.rotary.heads;
  L.i[2] = n->p.rotary.head;
  L.i[3] = n->p.rotary.rot;
  L.i[4] = n->p.rotary.in_3d;
  L.i[5] = n->p.rotary.interleaved;
  L.i[6] = n->in[1]->rank == 2 ? n->in[1]->dims[0] : rows / n->p.rotary.heads;
  group_i(&L, 0, 7, "seq, heads, head size, rotated dims, 3-D input, interleaved, cache rows");
  L.note = "x = {input, cos cache, sin cache, position_ids}";
  emit_launch(e, n, &L);
}

/* present_key or present_value (output k, 1 or 2): the past cache, then
   K or V (3-D inputs transposed to [batch, heads, seq, dim]). */
static void attention_present(Emitter *e, Node *n, int k) {
  const struct AttentionParams *p = &n->p.attention;
  Tensor *present = n->out[k], *now = n->in[k], *past = node_input(n, 3 + k);
  int64_t dim = k == 1 ? p->head : p->v_head, total = p->past + p->kv_seq, h = p->kv_heads;
  int64_t dst[4] = {h * total * dim, total * dim, dim, 1};
  int64_t dims[4] = {p->batch, h, p->kv_seq, dim};
  int64_t src3[4] = {p->kv_seq * h * dim, dim, h * dim, 1};
  int64_t src4[4] = {h * p->kv_seq * dim, p->kv_seq * dim, dim, 1};
  emit_kernel_copy(e, n, offset_ptr(e, buf(e, present), p->past * dim), dst, buf(e, now),
                   p->in_3d ? src3 : src4, 4, dims);
  if (past) {
    int64_t pdims[4] = {p->batch, h, p->past, dim};
    int64_t psrc[4] = {h * p->past * dim, p->past * dim, dim, 1};
    emit_kernel_copy(e, n, buf(e, present), dst, buf(e, past), psrc, 4, pdims);
  }
}

/* Attention as one opc kernel (opc_attention): the present caches first,
   by copies, since the kernel reads the keys and values from them when
   there is a past. */
static void run_attention(Emitter *e, Node *n) {
  const struct AttentionParams *p = &n->p.attention;
  Tensor *q = n->in[0], *mask = node_input(n, 3), *y = n->out[0];
  bool past = node_input(n, 4) != NULL;
  Tensor *present[3] = {NULL, n->nout > 1 ? n->out[1] : NULL, n->nout > 2 ? n->out[2] : NULL};
  if (past && (!present[1] || !present[2])) {
    kernel_fail(e, n, "past_key and past_value need the present_key and present_value outputs");
    return;
  }
  for (int k = 0; k < n->nin; k++)
    if (k != 3 && n->in[k] && !buffer_is_contiguous(n->in[k])) {
      kernel_fail(e, n, "Q, K, V and the past caches must be contiguous (not strided views)");
      return;
    }
  for (int k = 0; k < 3; k++)
    if ((k == 0 || present[k]) && !buffer_is_contiguous(n->out[k])) {
      kernel_fail(e, n, "the outputs must be contiguous (not strided views)");
      return;
    }
  for (int k = 1; k <= 2; k++)
    if (present[k] && (past || tensor_needed(present[k])))
      attention_present(e, n, k);
  int64_t total = p->past + p->kv_seq;
  Launch L = {.kernel = op_kernel(e, n->op), .rank = 1};
  L.n = L.dims[0] = p->batch * p->q_heads * p->q_seq;
  L.nx = mask ? 4 : 3;
  L.x[0] = buf(e, q);
  L.x_extent[0] = tensor_numel(q);
  for (int k = 1; k <= 2; k++) {
    Tensor *from = past ? present[k] : n->in[k];
    L.x[k] = buf(e, from);
    L.x_extent[k] = tensor_numel(from);
  }
  L.y = buf(e, y);
  L.y_extent = tensor_numel(y);
  int64_t full[4] = {p->batch, p->q_heads, p->q_seq, total};
  if (mask) {
    int64_t ms[4], low;
    broadcast_to(mask, 4, full, ms);
    L.x[3] = buf(e, mask);
    L.x_extent[3] = reach(4, full, ms, &low);
    L.x_bytes[3] = mask->dtype == DT_BOOL ? 1 : 0;
    for (int d = 0; d < 4; d++)
      L.i[12 + d] = ms[d];
    group_i(&L, 12, 4, "attn_mask strides along batch, head, query, key");
  }
  int64_t v[11] = {p->q_heads, p->q_seq, total, p->head, p->v_head, p->q_heads / p->kv_heads,
                   p->in_3d, p->in_3d && !past, p->past, p->causal,
                   mask ? (mask->dtype == DT_BOOL ? 1 : 2) : 0};
  memcpy(L.i, v, sizeof v);
  group_i(&L, 0, 11, "heads, queries, keys, head size, value head size, query heads per kv "
          "head, 3-D Q and Y, 3-D K and V, past length, causal, mask (0 none, 1 bool, 2 float)");
  L.f[0] = p->scale;
  L.f[1] = p->softcap;
  group_f(&L, 0, 2, "scale, softcap");
  L.note = past ? "x = {Q, present_key, present_value, attn_mask}" : "x = {Q, K, V, attn_mask}";
  emit_launch(e, n, &L);
}

/* ------------------------------------------------------- normalisation */

static void run_lrn(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  Launch L = {.kernel = "opc_lrn", .rank = x->rank};
  memcpy(L.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), xs);
  L.i[0] = n->p.lrn.size;
  group_i(&L, 0, 1, "size");
  L.f[0] = n->p.lrn.alpha;
  L.f[1] = n->p.lrn.beta;
  L.f[2] = n->p.lrn.bias;
  group_f(&L, 0, 3, "alpha, beta, bias");
  emit_launch(e, n, &L);
}

/* Whether opc's kernel runs a BatchNormalization in one launch: float32,
   float16 or bfloat16 data with float32 parameters, its mean known to be
   zeros (fold-batchnorm folds it into the bias), so that x, scale, bias
   and variance are its four inputs; a fused Relu or Clip, the
   pre-activations' (DenseNet's BN -> Relu), then goes into the same
   launch. */
_Static_assert(OPC_ACT_RELU == 1 && OPC_ACT_CLIP == 2, "opc_batch_norm's i[0] codes");

static bool batch_norm_data_type(DType t) {
  return t == DT_FLOAT || t == DT_FLOAT16 || t == DT_BFLOAT16;
}

bool batch_norm_in_one_pass(const Node *n) {
  const Tensor *x = n->in[0], *mean = node_input(n, 3);
  if (!batch_norm_data_type(x->dtype) || n->out[0]->dtype != x->dtype || !mean || !mean->f32 ||
      n->in[1]->dtype != DT_FLOAT || n->in[2]->dtype != DT_FLOAT ||
      node_input(n, 4)->dtype != DT_FLOAT ||
      (n->act != OPC_ACT_NONE && n->act != OPC_ACT_RELU && n->act != OPC_ACT_CLIP))
    return false;
  for (int64_t c = 0; c < tensor_numel(mean); c++)
    if (mean->f32[c] != 0.0f)
      return false;
  return true;
}

/*
 * BatchNormalization in training mode normalises with the batch's
 * statistics: each channel's mean and (biased) variance over every other
 * dim, which opc_batch_moments writes into the node's scratch (means, then
 * variances); the running statistics, outputs 1 and 2, are the inputs'
 * times momentum plus the batch's times 1 - momentum (opc_running_average).
 */
static void setup_batch_norm(Emitter *e, Node *n) {
  const char **scratch = node_data(e, n, sizeof *scratch);
  if (!n->p.norm.training)
    return;
  const char *field = emit_unique(e, emit_str(e, "%s_moments", node_id(e, n)));
  emit_to(e, SEC_FIELDS, "float *%s; /* the batch's means, then variances */", field);
  emit_call(e, LIB_CUDA, n, "cudaMalloc((void **)&c->%s, %lld * sizeof(float))", field,
            (long long)(2 * n->in[0]->dims[1]));
  emit_to(e, SEC_TEARDOWN, "cudaFree(c->%s);", field);
  *scratch = emit_str(e, "c->%s", field);
}

/* The batch's means into scratch[0..C), variances into scratch[C..2C). */
static void batch_moments(Emitter *e, Node *n, const char *scratch) {
  Tensor *x = n->in[0];
  int64_t xs[IR_MAX_RANK], low;
  strides_of(x, xs);
  Launch L = {.kernel = "opc_batch_moments", .rank = 1, .dims = {x->dims[1]}};
  int64_t one[IR_MAX_RANK] = {1}, along_c[IR_MAX_RANK] = {xs[1]};
  set_output(&L, scratch, one);
  L.y_extent = 2 * x->dims[1];
  set_input(&L, 0, buf(e, x), along_c);
  L.x_extent[0] = reach(x->rank, x->dims, xs, &low);
  int others = 0;
  for (int d = 0; d < x->rank; d++)
    if (d != 1) {
      L.i[1 + others] = x->dims[d];
      L.i[8 + others] = xs[d];
      others++;
    }
  L.i[0] = others;
  L.i[15] = x->dims[1];
  group_i(&L, 0, 1 + others, "the other dims: how many, their sizes");
  group_i(&L, 8, others, "their strides");
  group_i(&L, 15, 1, "where the variances start");
  L.note = "each channel's mean and variance over the batch";
  emit_launch(e, n, &L);
}

/* Output k (1: running mean, 2: running variance) = input k + 2 times
   momentum + the batch's statistic times 1 - momentum. */
static void running_average(Emitter *e, Node *n, int k, const char *scratch) {
  Tensor *out = n->out[k];
  if (!tensor_needed(out))
    return;
  int64_t c = n->in[0]->dims[1], one[IR_MAX_RANK] = {1};
  Launch L = {.kernel = "opc_running_average", .rank = 1, .dims = {c}};
  set_output(&L, buf(e, out), one);
  set_input(&L, 0, buf(e, n->in[k + 2]), one);
  set_input(&L, 1, k == 1 ? scratch : emit_str(e, "(%s + %lld)", scratch, (long long)c), one);
  L.f[0] = n->p.norm.momentum;
  group_f(&L, 0, 1, "momentum");
  emit_launch(e, n, &L);
}

/* BatchNormalization: one launch where the mean is zeros, its activation
   inside; else subtract the mean, then scale, then the activation. In
   training mode the mean and variance are the batch's. */
static void run_batch_norm(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  if (batch_norm_nhwc_takes(e, n)) {
    emit_batch_norm_nhwc(e, n);
    return;
  }
  const char *mean = buf(e, n->in[3]), *var = buf(e, n->in[4]);
  if (n->p.norm.training) {
    if (x->dtype != DT_FLOAT || y->dtype != DT_FLOAT) {
      kernel_fail(e, n, "BatchNormalization in training mode runs on float32 only");
      return;
    }
    const char *scratch = *(const char **)node_data(e, n, sizeof(const char *));
    batch_moments(e, n, scratch);
    for (int k = 1; k < n->nout; k++)
      running_average(e, n, k, scratch);
    mean = scratch;
    var = emit_str(e, "(%s + %lld)", scratch, (long long)x->dims[1]);
  }
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], channel[IR_MAX_RANK] = {0};
  strides_of(x, xs);
  strides_of(y, ys);
  channel[1] = 1;
  bool one_pass = !n->p.norm.training && batch_norm_in_one_pass(n);
  if (!one_pass) {
    Launch L = {.kernel = "opc_sub_f32", .rank = x->rank};
    memcpy(L.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    set_output(&L, buf(e, y), ys);
    set_input(&L, 0, buf(e, x), xs);
    set_input(&L, 1, mean, channel);
    L.note = "first x - mean, into y";
    emit_launch(e, n, &L);
  }
  Launch M = {.kernel = x->dtype == DT_FLOAT ? "opc_batch_norm"
                                             : typed_kernel(e, "opc_batch_norm", x->dtype),
              .rank = x->rank};
  M.x_bytes[0] = M.y_bytes = (int)dtype_size(x->dtype);
  memcpy(M.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  set_output(&M, buf(e, y), ys);
  set_input(&M, 0, one_pass ? buf(e, x) : buf(e, y), one_pass ? xs : ys);
  set_input(&M, 1, buf(e, n->in[1]), channel);
  set_input(&M, 2, buf(e, n->in[2]), channel);
  set_input(&M, 3, var, channel);
  M.i[0] = one_pass ? n->act : OPC_ACT_NONE;
  group_i(&M, 0, 1, "the activation after it: 1 Relu, 2 Clip");
  M.f[0] = n->p.norm.epsilon;
  M.f[1] = n->act_alpha;
  M.f[2] = n->act_beta;
  group_f(&M, 0, 3, "epsilon, the activation's parameters");
  M.note = one_pass ? "the mean is zeros: y = act(x * scale / sqrt(variance + epsilon) + bias)"
                    : "x = {x - mean, scale, bias, variance}";
  emit_launch(e, n, &M);
  if (!one_pass)
    fused_activation(e, n);
}

/* SEGate: a block per tile of SE_CHUNK channels of one image (opc_se_gate
   says why each recomputes the hidden layer). Its shared arrays bound the
   hidden units and the chunk. */
enum { SE_CHUNK = 32, SE_MAX_HIDDEN = 1024 };
_Static_assert(OPC_ACT_RELU == 1 && OPC_ACT_CLIP == 2 && OPC_ACT_SIGMOID == 3 &&
                   OPC_ACT_TANH == 4 && OPC_ACT_ELU == 5 && OPC_ACT_LEAKY_RELU == 6 &&
                   OPC_ACT_SILU == 7 && OPC_ACT_SWISH == 8 && OPC_ACT_HARD_SIGMOID == 9 &&
                   OPC_ACT_HARD_SWISH == 10 && OPC_ACT_MISH == 11 && OPC_ACT_COUNT == 12,
               "opc_activation_by_code's cases");

static void run_se_gate(Emitter *e, Node *n) {
  Tensor *p = n->in[0], *packed = n->in[1], *filter = node_input(n, 2), *y = n->out[0];
  int64_t images = p->dims[0], c = p->dims[1], r = n->p.se.hidden;
  if (r > SE_MAX_HIDDEN || !buffer_is_contiguous(p) || !buffer_is_contiguous(y) ||
      p->dtype != y->dtype) {
    kernel_fail(e, n, "SEGate takes at most 1024 hidden units, on contiguous data of one type");
    return;
  }
  int64_t tiles = (c + SE_CHUNK - 1) / SE_CHUNK;
  DType t = y->dtype;
  Launch L = {.kernel = t == DT_FLOAT ? "opc_se_gate" : typed_kernel(e, "opc_se_gate", t),
              .rank = 1, .nx = filter ? 3 : 2};
  L.x_bytes[0] = L.y_bytes = (int)dtype_size(t);
  L.dims[0] = images * tiles * KERNEL_BLOCK_THREADS;
  L.n = L.dims[0];
  L.x[0] = buf(e, p);
  L.x_extent[0] = images * c;
  L.x[1] = buf(e, packed);
  L.x_extent[1] = tensor_numel(packed);
  if (filter) {
    L.x[2] = buf(e, filter);
    L.x_extent[2] = tensor_numel(filter);
    L.x_bytes[2] = (int)dtype_size(filter->dtype);
  }
  L.y = buf(e, y);
  L.y_extent = tensor_numel(y);
  /* Each hidden unit's sum in as many parts as keep the block's threads
     busy, at most 1024 partial sums in all. */
  int64_t split = KERNEL_BLOCK_THREADS / r;
  split = split < 1 ? 1 : split * r > SE_MAX_HIDDEN ? SE_MAX_HIDDEN / r : split;
  int64_t i[] = {c, r, SE_CHUNK, tiles, images, n->p.se.inner, n->act,
                 filter ? filter->dims[0] : 0, filter ? tensor_numel(filter) / (filter->dims[0] * c) : 1,
                 split};
  memcpy(L.i, i, sizeof i);
  group_i(&L, 0, 10, "C, hidden, chunk, tiles per image, images, inner and gate activation, "
                     "filter outputs (0: y is the gate), taps, parts of each hidden sum");
  L.f[0] = n->act_alpha;
  L.f[1] = n->act_beta;
  group_f(&L, 0, 2, "the gate's parameters");
  L.note = filter ? "y = the filter, input channel c times gate(W2 inner(W1 p + b1) + b2)[c]"
                  : "y = gate(W2 inner(W1 p + b1) + b2), a block per 32 channels";
  emit_launch(e, n, &L);
}

const OpEmitter kernel_se_gate = {.run = run_se_gate};

/* ------------------------------------------ more reductions and row kernels */

/* ReduceSumSquare, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum,
   ReduceLogSumExp and GlobalLpPool: one row kernel each. An empty axes list
   with noop_with_empty_axes reduces nothing: rows of one element, which
   still get squared, logged... as the spec asks. */
static void run_reduce_more(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  bool reduced[IR_MAX_RANK];
  if (n->op == OP_GLOBAL_LP_POOL) {
    for (int d = 0; d < x->rank; d++)
      reduced[d] = d >= 2;
  } else {
    memcpy(reduced, n->p.reduce.reduced, sizeof reduced);
  }
  int64_t yst[IR_MAX_RANK];
  reduced_output_strides(x, y, reduced, yst);
  Launch L = {.kernel = typed_kernel(e, op_kernel(e, n->op), y->dtype)};
  if (!row_launch(e, n, &L, x, reduced, buf(e, y), yst, false))
    return;
  set_element_type(&L, y->dtype);
  /* Only the outer positions are written. */
  int64_t low;
  L.y_extent = reach(L.rank, L.dims, L.ystride, &low);
  if (n->op == OP_GLOBAL_LP_POOL) {
    L.f[0] = (float)n->p.lp.p;
    group_f(&L, 0, 1, "p");
  }
  row_run_length(e, &L, x, reduced);
  emit_launch(e, n, &L);
}

/* CumSum whose axis is run-time data: every element a work item, the
   kernel finds the rows (opc_cumsum_at). */
static void run_cumsum_at(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  Launch L = {.kernel = typed_kernel(e, "opc_cumsum_at", y->dtype)};
  set_element_type(&L, y->dtype);
  launch_over(e, &L, y, x);
  int64_t none[IR_MAX_RANK] = {0};
  set_input(&L, 1, buf(e, n->in[1]), none);
  L.x_extent[1] = 1;
  L.x_bytes[1] = (int)dtype_size(n->in[1]->dtype);
  L.i[12] = index_kind(n->in[1]);
  L.i[13] = n->p.axis.exclusive;
  L.i[14] = n->p.axis.reverse;
  group_i(&L, 12, 3, "the axis's index kind, exclusive, reverse");
  L.note = "x[1] holds the axis, read at run time";
  emit_launch(e, n, &L);
}

/* Hardmax, CumSum, MeanVarianceNormalization and LpNormalization: kernels
   that read a row and write it back. */
static void run_row_more(Emitter *e, Node *n) {
  if (n->op == OP_CUMSUM && n->p.axis.axis_at_run_time) {
    run_cumsum_at(e, n);
    return;
  }
  Tensor *x = n->in[0], *y = n->out[0];
  bool reduced[IR_MAX_RANK] = {false}, coerce = false;
  int axis = 0, p = 2;
  if (n->op == OP_HARDMAX) {
    axis = n->p.axis.axis;
    coerce = n->p.axis.coerce2d;
  } else if (n->op == OP_CUMSUM) {
    axis = n->p.axis.axis;
  } else if (n->op == OP_LP_NORM) {
    axis = n->p.lp.axis;
    p = n->p.lp.p;
  } else {
    memcpy(reduced, n->p.reduce.reduced, sizeof reduced);
  }
  if (n->op != OP_MVN)
    for (int d = 0; d < x->rank; d++)
      reduced[d] = coerce ? d >= axis : d == axis;
  int64_t ys[IR_MAX_RANK];
  strides_of(y, ys);
  Launch L = {.kernel = op_kernel(e, n->op)};
  if (!row_launch(e, n, &L, x, reduced, buf(e, y), ys, true))
    return;
  if (n->op == OP_CUMSUM) {
    /* CumSum is written once over the types it sums (opc_cumsum_i64, ...). */
    L.kernel = typed_kernel(e, L.kernel, y->dtype);
    set_element_type(&L, y->dtype);
    L.i[13] = n->p.axis.exclusive;
    L.i[14] = n->p.axis.reverse;
    group_i(&L, 13, 2, "exclusive, reverse");
  } else if (n->op == OP_LP_NORM) {
    L.i[14] = p;
    group_i(&L, 14, 1, "p");
  } else if (n->op == OP_MVN) {
    L.f[0] = 1e-9f;
    group_f(&L, 0, 1, "epsilon, added to the standard deviation");
  }
  emit_launch(e, n, &L);
}

/* ---------------------------------------------------------- determinants */

/* Det: one work item per matrix, over the output's dims (one dim of 1 for
   a single matrix); the kernel reads each matrix by the input's strides. */
static void run_det(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], low;
  strides_of(x, xs);
  strides_of(y, ys);
  int rank = y->rank;
  Launch L = {.kernel = op_kernel(e, n->op), .rank = rank ? rank : 1};
  L.dims[0] = 1;
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)rank);
  int64_t yst[IR_MAX_RANK] = {1}, xst[IR_MAX_RANK] = {0};
  memcpy(yst, ys, sizeof(int64_t) * (size_t)rank);
  memcpy(xst, xs, sizeof(int64_t) * (size_t)rank);
  set_output(&L, buf(e, y), yst);
  set_input(&L, 0, buf(e, x), xst);
  L.x_extent[0] = reach(x->rank, x->dims, xs, &low);
  L.i[0] = x->dims[x->rank - 1];
  L.i[1] = xs[x->rank - 2];
  L.i[2] = xs[x->rank - 1];
  group_i(&L, 0, 3, "side, the input's row and column strides");
  emit_launch(e, n, &L);
}

/* ------------------------------------- the emitters ops.def names */

const OpEmitter kernel_pool = {.run = run_pool};
const OpEmitter kernel_max_unpool = {.run = run_max_unpool};
const OpEmitter kernel_det = {.run = run_det};
/* cuDNN reduces 16-bit data, but not along a run-time axis, whose length
   is on the device: there opc's kernel takes it (ir/bounds.c). */
static bool reduce_supports(Emitter *e, const Node *n) {
  (void)e;
  const Tensor *x = n->in[0];
  bool along_run = x->bounded && op_info(n->op)->params == PARAMS_REDUCE &&
                   n->p.reduce.reduced[x->bound_axis];
  return !node_in_half(n) || along_run;
}

const OpEmitter kernel_reduce = {.run = run_reduce, .supports = reduce_supports, .half = true};
const OpEmitter kernel_softmax = {.run = run_softmax};
const OpEmitter kernel_layer_norm = {.run = run_layer_norm};
const OpEmitter kernel_rms_norm = {.run = run_rms_norm};
const OpEmitter kernel_group_norm = {.run = run_group_norm};
const OpEmitter kernel_rotary_embedding = {.run = run_rotary_embedding};
const OpEmitter kernel_attention = {.run = run_attention};
const OpEmitter kernel_instance_norm = {.run = run_instance_norm};
const OpEmitter kernel_lrn = {.run = run_lrn};
/* In 16 bits opc's kernel takes the one-pass form only (cuDNN runs the
   others). */
static bool batch_norm_supports(Emitter *e, const Node *n) {
  (void)e;
  return !node_in_half(n) || (!n->p.norm.training && batch_norm_in_one_pass(n));
}

const OpEmitter kernel_batch_norm = {.setup = setup_batch_norm,
                                     .run = run_batch_norm,
                                     .supports = batch_norm_supports,
                                     .half = true};
const OpEmitter kernel_reduce_more = {.run = run_reduce_more};
const OpEmitter kernel_row_more = {.run = run_row_more};
