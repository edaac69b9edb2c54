/*
 * kernels_nhwc.c - the CPU target's channels-last float kernels. Under
 * --target cpu, choose-layout stores the data of the float32 convolutions
 * that conv_runs_channels_last takes channels-last, and with them the
 * pools, BatchNormalizations and elementwise operators of their chains.
 * Such nodes go to opc's kernels (node_emitter), never to cuDNN's forms:
 *  - a convolution is one launch of opc_conv_nhwc (group 1) or
 *    opc_conv_depthwise_nhwc (a channel per group), its filter packed now
 *    into net.weights in the order the kernel reads it, with the bias,
 *    residual and activation that passes fused into the node applied in
 *    the same pass;
 *  - a 2-D MaxPool or AveragePool is one launch of opc_pool_nhwc;
 *  - an inference BatchNormalization with constant parameters is one
 *    launch of opc_channel_affine_nhwc, its scale and shift folded now,
 *    with the activation fused into it, and so is a squeeze-and-excitation
 *    block's Mul by its gate;
 *  - a Resize over H and W is one launch of opc_resize_nhwc, whose pixels
 *    copy or blend whole runs of channels.
 * Nothing is packed or fused at run time. The kernels' contracts are
 * their comments in opc_kernels.inc.
 */
#include <math.h>
#include <string.h>

#include "emit.h"

typedef struct ConvNhwc {
  const char *filter, *bias; /* the packed constants in net.weights */
} ConvNhwc;

static int64_t round16(int64_t v) { return (v + 15) / 16 * 16; }

static bool is_depthwise(const Node *n) { return n->win.group > 1; }

/* Elements from one pixel to the next of a 4-D tensor whose channels are
   innermost and whose pixels lie at one stride, rows and images packed
   after them (a channel Concat's slice included); 0 for any other. A
   tensor with one channel or one pixel is the same in both orders. */
static int64_t pixel_stride(const Tensor *t) {
  if (t->rank != 4)
    return 0;
  int64_t s[IR_MAX_RANK];
  strides_of(t, s);
  if (s[1] != 1 && t->dims[1] > 1)
    return 0;
  if (t->dims[2] * t->dims[3] == 1)
    return t->dims[1];
  if (s[3] < t->dims[1] || s[2] != s[3] * t->dims[3] || s[0] != s[2] * t->dims[2])
    return 0;
  return s[3];
}

/* x in ONNX's order, which the dense kernel reads too (f[2]): an image's
   few channels, which choose-layout leaves so. */
static bool planar_input(const Node *n) {
  const Tensor *x = n->in[0];
  return !is_depthwise(n) && !pixel_stride(x) && row_major(x);
}

static bool conv_supports(Emitter *e, const Node *n) {
  const Tensor *z = node_input(n, 3);
  return e->opt->target == TARGET_CPU && !node_is_cpu_code(e, n) && conv_runs_channels_last(n) &&
         (pixel_stride(n->in[0]) || planar_input(n)) && pixel_stride(n->out[0]) &&
         (!z || pixel_stride(z)) &&
         (n->act == OPC_ACT_NONE || act_op(n->act) != OP_INVALID);
}

/* The filter w [M, C / group, KH, KW] (ONNX's order in the IR, whatever
   its strides) as the kernel reads it (opc_conv_tap_at), and the bias, M
   rounded up to 16 with zeros. */
static void conv_setup(Emitter *e, Node *n) {
  ConvNhwc *p = node_data(e, n, sizeof *p);
  const Tensor *w = n->in[1], *bias = node_input(n, 2);
  int64_t m = w->dims[0], cin = w->dims[1], taps = w->dims[2] * w->dims[3], m16 = round16(m);
  int64_t count = is_depthwise(n) ? taps * m16 : m16 * taps * cin;
  float *packed = arena_alloc(e->g->arena, sizeof(float) * (size_t)count);
  float *b = arena_alloc(e->g->arena, sizeof(float) * (size_t)m16);
  memset(packed, 0, sizeof(float) * (size_t)count);
  memset(b, 0, sizeof(float) * (size_t)m16);
  bool planar = planar_input(n);
  for (int64_t o = 0; o < m; o++) {
    b[o] = bias ? bias->f32[o] : 0.0f;
    for (int64_t c = 0; c < cin; c++)
      for (int64_t t = 0; t < taps; t++) {
        float v = w->f32[(o * cin + c) * taps + t];
        if (is_depthwise(n))
          packed[t * m16 + o] = v;
        else
          packed[(o / 16 * taps * cin + (planar ? c * taps + t : t * cin + c)) * 16 + o % 16] = v;
      }
  }
  p->filter = weights_add_typed(e, emit_str(e, "%s_packed_w", node_id(e, n)), DT_FLOAT, packed,
                                count);
  p->bias = weights_add_typed(e, emit_str(e, "%s_packed_b", node_id(e, n)), DT_FLOAT, b, m16);
}

/* Elements from x's first to its last (a slice's reach, not its count). */
static int64_t extent_of(const Tensor *t) {
  int64_t s[IR_MAX_RANK];
  strides_of(t, s);
  return reach(t->rank, t->dims, s, &(int64_t){0});
}

/* y as the launch's output: its pixel stride, and what it writes, one run
   of channels per pixel where y is a channel slice (a Concat's output
   that concat-in-place made its storage). */
static void set_y(Emitter *e, Launch *L, const Tensor *y) {
  int64_t none[8] = {0}, stride = pixel_stride(y);
  set_output(L, buf(e, y), none);
  L->ystride[0] = stride;
  L->y_extent = extent_of(y);
  if (stride > y->dims[1]) {
    L->y_runs = y->dims[0] * y->dims[2] * y->dims[3];
    L->y_run_stride = stride;
    L->y_extent = y->dims[1];
  }
}

static void conv_run(Emitter *e, Node *n) {
  const ConvNhwc *p = node_data(e, n, sizeof *p);
  const Tensor *x = n->in[0], *y = n->out[0], *z = node_input(n, 3);
  int64_t m = y->dims[1], oh = y->dims[2], ow = y->dims[3], pixels = y->dims[0] * oh * ow;
  int64_t none[8] = {0};
  bool dw = is_depthwise(n);
  Launch L = {.kernel = dw ? "opc_conv_depthwise_nhwc" : "opc_conv_nhwc"};
  if (dw) {
    L.rank = 3;
    L.dims[0] = y->dims[0], L.dims[1] = oh, L.dims[2] = (m + 63) / 64;
  } else {
    L.rank = 2;
    L.dims[0] = (pixels + 11) / 12, L.dims[1] = (m + 63) / 64;
  }
  set_y(e, &L, y);
  set_input(&L, 0, buf(e, x), none);
  L.xstride[0][0] = planar_input(n) ? 1 : pixel_stride(x);
  L.x_extent[0] = extent_of(x);
  set_input(&L, 1, p->filter, none);
  L.x_extent[1] = dw ? n->in[1]->dims[2] * n->in[1]->dims[3] * round16(m)
                     : round16(m) * tensor_numel(n->in[1]) / m;
  set_input(&L, 2, p->bias, none);
  L.x_extent[2] = round16(m);
  if (z) {
    set_input(&L, 3, buf(e, z), none);
    L.xstride[3][0] = pixel_stride(z);
    L.x_extent[3] = extent_of(z);
  }
  L.i[0] = x->dims[1];
  window_args(&L.i[1], &n->win, x);
  group_i(&L, 0, 11, "C, H, W, KH, KW, strides, dilations, leading pads");
  L.i[11] = ow;
  L.i[12] = oh * ow;
  L.i[13] = m;
  L.i[14] = n->act;
  L.i[15] = pixels;
  group_i(&L, 11, 5, "W', H' W', M, the activation (scalar.h's code), N H' W'");
  L.f[0] = n->act_alpha;
  L.f[1] = n->act_beta;
  L.f[2] = planar_input(n);
  group_f(&L, 0, 3, "the activation's parameters, x in ONNX's order (0: channels-last)");
  L.note = z ? "y = act(bias + conv(x) + z), channels-last" : "y = act(bias + conv(x)), channels-last";
  emit_launch(e, n, &L);
}

static const OpEmitter kernel_conv_nhwc = {.setup = conv_setup, .run = conv_run};

/* ------------------------------------------- pools, BatchNormalization */

bool node_runs_nhwc(const Emitter *e, const Node *n) {
  const Tensor *y = n->nout ? n->out[0] : NULL;
  return e->opt->target == TARGET_CPU && y && y->rank == 4 && y->dtype == DT_FLOAT &&
         y->dims[1] > 1 && y->dims[2] * y->dims[3] > 1 && pixel_stride(y);
}

/* A convolution's form is this file's own; ops.def's kernel column names
   opc's kernels that run a kind in every program, which a conditional
   node's body may call (op_runs_in_body), and this form is the CPU
   target's alone. A pool, a BatchNormalization and an SE block's Mul go
   to their kind's kernel emitter, which hands such nodes to the functions
   below. Other channels-last nodes (elementwise ones) take the usual
   choice: they read and write any strides. */
const OpEmitter *nhwc_emitter(Emitter *e, const Node *n) {
  if (!node_runs_nhwc(e, n))
    return NULL;
  if (n->op == OP_CONV)
    return conv_supports(e, n) ? &kernel_conv_nhwc : NULL;
  bool own_form = pool_nhwc_takes(e, n) || batch_norm_nhwc_takes(e, n) ||
                  channel_gate_nhwc_takes(e, n);
  return own_form ? kernel_op_emitter(n->op) : NULL;
}

bool pool_nhwc_takes(const Emitter *e, const Node *n) {
  const Tensor *x = n->in[0];
  return (n->op == OP_MAX_POOL || n->op == OP_AVERAGE_POOL) && node_runs_nhwc(e, n) &&
         n->win.nspatial == 2 && n->nout == 1 && pixel_stride(x) && pixel_stride(n->out[0]);
}

/* A row of output pixels by 64 channels per item (launch [N, H', C / 64
   rounded up]). */
void emit_pool_nhwc(Emitter *e, const Node *n) {
  const Tensor *x = n->in[0], *y = n->out[0];
  int64_t c = y->dims[1], none[8] = {0};
  Launch L = {.kernel = "opc_pool_nhwc", .rank = 3};
  L.dims[0] = y->dims[0], L.dims[1] = y->dims[2], L.dims[2] = (c + 63) / 64;
  set_y(e, &L, y);
  set_input(&L, 0, buf(e, x), none);
  L.xstride[0][0] = pixel_stride(x);
  L.x_extent[0] = extent_of(x);
  L.i[0] = c;
  window_args(&L.i[1], &n->win, x);
  group_i(&L, 0, 11, "C, H, W, KH, KW, strides, dilations, leading pads");
  L.i[11] = y->dims[3];
  L.i[12] = n->op == OP_MAX_POOL;
  L.i[13] = n->op == OP_AVERAGE_POOL && n->win.count_include_pad;
  group_i(&L, 11, 3, "W', a max (0: an average), count_include_pad");
  L.note = "channels-last";
  emit_launch(e, n, &L);
}

/* opc_channel_affine_nhwc's scalar arguments for output y: a's image
   stride (0: one for every image), and the node's activation. */
static void affine_args(Launch *L, const Node *n, const Tensor *y, int64_t image_stride) {
  L->i[0] = y->dims[1];
  L->i[1] = y->dims[0] * y->dims[2] * y->dims[3];
  L->i[2] = n->act;
  L->i[3] = image_stride;
  L->i[4] = y->dims[2] * y->dims[3];
  group_i(L, 0, 5, "C, N H W, the activation (scalar.h's code), the scale's (a gate's) image stride, H W");
  L->f[0] = n->act_alpha;
  L->f[1] = n->act_beta;
  group_f(L, 0, 2, "the activation's parameters");
}

bool batch_norm_nhwc_takes(const Emitter *e, const Node *n) {
  if (n->op != OP_BATCH_NORM || !node_runs_nhwc(e, n) || n->p.norm.training || n->nout != 1 || !pixel_stride(n->in[0]) ||
      !pixel_stride(n->out[0]))
    return false;
  for (int k = 1; k < 5; k++)
    if (!n->in[k]->f32 || tensor_numel(n->in[k]) != n->out[0]->dims[1])
      return false;
  return n->act == OPC_ACT_NONE || act_op(n->act) != OP_INVALID;
}

/* y = act(x a + b), a = scale / sqrt(var + eps) and b = bias - mean a
   folded now; 16 pixels per unit. */
void emit_batch_norm_nhwc(Emitter *e, const Node *n) {
  const Tensor *x = n->in[0], *y = n->out[0];
  int64_t c = y->dims[1], c16 = round16(c), none[8] = {0};
  int64_t pixels = y->dims[0] * y->dims[2] * y->dims[3];
  float *mul = arena_alloc(e->g->arena, sizeof(float) * (size_t)c16);
  float *add = arena_alloc(e->g->arena, sizeof(float) * (size_t)c16);
  memset(mul, 0, sizeof(float) * (size_t)c16);
  memset(add, 0, sizeof(float) * (size_t)c16);
  for (int64_t k = 0; k < c; k++) {
    mul[k] = n->in[1]->f32[k] / sqrtf(n->in[4]->f32[k] + n->p.norm.epsilon);
    add[k] = n->in[2]->f32[k] - n->in[3]->f32[k] * mul[k];
  }
  Launch L = {.kernel = "opc_channel_affine_nhwc", .rank = 1, .dims = {(pixels + 15) / 16}};
  set_y(e, &L, y);
  set_input(&L, 0, buf(e, x), none);
  L.xstride[0][0] = pixel_stride(x);
  L.x_extent[0] = extent_of(x);
  set_input(&L, 1, weights_add_typed(e, emit_str(e, "%s_scale", node_id(e, n)), DT_FLOAT, mul, c16),
            none);
  set_input(&L, 2, weights_add_typed(e, emit_str(e, "%s_shift", node_id(e, n)), DT_FLOAT, add, c16),
            none);
  L.x_extent[1] = L.x_extent[2] = c16;
  affine_args(&L, n, y, 0);
  L.note = "y = act(x * scale + shift), scale and shift folded from the normalisation";
  emit_launch(e, n, &L);
}

/* The gate's tensor of a Mul of channels-last x by a per-channel gate
   [N, C, 1, 1] (a squeeze-and-excitation block's), or NULL. */
static const Tensor *channel_gate(const Node *n, const Tensor **x) {
  const Tensor *y = n->out[0];
  for (int k = 0; k < 2; k++) {
    const Tensor *a = n->in[k], *g = n->in[1 - k];
    if (tensor_same_shape(a, y) && g->rank == 4 && g->dims[0] == y->dims[0] &&
        g->dims[1] == y->dims[1] && g->dims[2] == 1 && g->dims[3] == 1 && row_major(g) &&
        g->dtype == DT_FLOAT) {
      *x = a;
      return g;
    }
  }
  return NULL;
}

bool channel_gate_nhwc_takes(const Emitter *e, const Node *n) {
  const Tensor *x;
  return n->op == OP_MUL && node_runs_nhwc(e, n) && channel_gate(n, &x) && pixel_stride(x) &&
         pixel_stride(n->out[0]);
}

/* y = x * g[n][c] by opc_channel_affine_nhwc, 16 pixels per unit. */
void emit_channel_gate_nhwc(Emitter *e, const Node *n) {
  const Tensor *x, *g = channel_gate(n, &x), *y = n->out[0];
  int64_t none[8] = {0}, pixels = y->dims[0] * y->dims[2] * y->dims[3];
  Launch L = {.kernel = "opc_channel_affine_nhwc", .rank = 1, .dims = {(pixels + 15) / 16}};
  set_y(e, &L, y);
  set_input(&L, 0, buf(e, x), none);
  L.xstride[0][0] = pixel_stride(x);
  L.x_extent[0] = extent_of(x);
  set_input(&L, 1, buf(e, g), none);
  L.x_extent[1] = tensor_numel(g);
  L.nx = 3; /* x[2], the shift, is null */
  affine_args(&L, n, y, y->dims[1]);
  L.note = "y = act(x * gate), the gate per image and channel";
  emit_launch(e, n, &L);
}

/* opc_resize's launch resizes axes general->i[1 .. 1 + i[0]), which must
   be H and W alone, of x and y both channels-last (choose-layout keeps a
   Resize's x in ONNX's order where it enlarges into y of that order). */
bool resize_nhwc_takes(const Emitter *e, const Node *n, const Launch *general) {
  if ((n->op != OP_RESIZE && n->op != OP_UPSAMPLE) || !node_runs_nhwc(e, n) ||
      !pixel_stride(n->in[0]) || !pixel_stride(n->out[0]) || n->in[0]->dtype != DT_FLOAT)
    return false;
  for (int k = 0; k < general->i[0]; k++)
    if (general->i[1 + k] < 2)
      return false;
  return true;
}

/* One output row per item (launch [N, H']), opc_resize's arguments
   regrouped by axis. */
void emit_resize_nhwc(Emitter *e, const Node *n, const Launch *general) {
  const Tensor *x = n->in[0], *y = n->out[0];
  int64_t none[8] = {0};
  Launch L = {.kernel = "opc_resize_nhwc", .rank = 2, .dims = {y->dims[0], y->dims[2]}};
  set_y(e, &L, y);
  set_input(&L, 0, buf(e, x), none);
  L.xstride[0][0] = pixel_stride(x);
  L.x_extent[0] = extent_of(x);
  L.i[0] = y->dims[1];
  L.i[1] = x->dims[2], L.i[2] = x->dims[3];
  L.i[3] = y->dims[2], L.i[4] = y->dims[3];
  L.i[5] = general->i[13], L.i[6] = general->i[14], L.i[7] = general->i[15];
  L.f[0] = general->f[0], L.f[1] = general->f[1];
  for (int k = 0; k < general->i[0]; k++) {
    int axis = (int)general->i[1 + k] - 2;
    L.i[8 + axis] = 1;
    L.i[10 + 2 * axis] = general->i[7 + k];
    L.i[11 + 2 * axis] = general->i[10 + k];
    L.f[2 + 2 * axis] = general->f[2 + 2 * k];
    L.f[3 + 2 * axis] = general->f[3 + 2 * k];
  }
  for (int axis = 0; axis < 2; axis++)
    if (!L.i[8 + axis])
      L.i[10 + 2 * axis] = L.i[11 + 2 * axis] = 1;
  group_i(&L, 0, 5, "C, H, W, H', W'");
  for (int k = 0; k < general->nigroups; k++)
    if (general->igroup[k].start == 13) /* names the modes */
      group_i(&L, 5, 3, general->igroup[k].label);
  group_i(&L, 8, 2, "H, W resized");
  group_i(&L, 10, 4, "their scales: H's, W's (numerator, denominator)");
  group_f(&L, 0, 2, "cubic_coeff_a, extrapolation_value");
  if (L.i[5] == 5) /* tf_crop_and_resize */
    group_f(&L, 2, 4, "roi start and end of H, of W");
  L.note = "channels-last";
  emit_launch(e, n, &L);
}
