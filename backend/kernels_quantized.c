/*
 * kernels_quantized.c - the integer products, MatMulInteger and
 * ConvInteger, as launches of opc's kernels (opc_matmul_integer,
 * opc_conv_integer, the first operand's type naming the instance): int32
 * sums, one thread per output. QLinearMatMul and QLinearConv put those
 * sums in scratch, then requantise them (opc_requant_multiplier,
 * opc_requantize). No cuBLAS or cuDNN int8 call is used; the kernels are
 * exact, not fast.
 */
#include <string.h>

#include "emit.h"

static bool is_contiguous(const Tensor *t) {
  int64_t s[IR_MAX_RANK], expect = 1;
  strides_of(t, s);
  for (int d = t->rank - 1; d >= 0; d--) {
    if (t->dims[d] != 1 && s[d] != expect)
      return false;
    expect *= t->dims[d];
  }
  return true;
}

/* Elements from x[k] to its last one (a contiguous tensor's count). */
static void whole_input(Launch *L, int k, const Tensor *t) {
  int64_t s[IR_MAX_RANK];
  strides_of(t, s);
  L->x_extent[k] = reach(t->rank, t->dims, s, &(int64_t){0});
}

/* ------------------------------------------------------ MatMulInteger */

/* A MatMul operand seen as a matrix with batch dims: a 1-D A is one row
   [1, K], a 1-D B one column [K, 1]. dims and strides (rank r) of that
   view; the dim added has stride 0. */
static void matrix_view(const Tensor *t, bool is_b, int64_t *dims, int64_t *strides, int *r) {
  int64_t s[IR_MAX_RANK];
  strides_of(t, s);
  *r = t->rank;
  memcpy(dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
  memcpy(strides, s, sizeof(int64_t) * (size_t)t->rank);
  if (t->rank == 1) {
    int at = is_b ? 1 : 0; /* where the added dim goes */
    dims[1 - at] = t->dims[0];
    strides[1 - at] = s[0];
    dims[at] = 1;
    strides[at] = 0;
    *r = 2;
  }
}

/* Strides of an operand's batch dims over the output's batch dims (rank
   nb, aligned right; 0 where the operand broadcasts). */
static void batch_strides(int r, const int64_t *dims, const int64_t *strides, int nb,
                          const int64_t *out, int64_t *s) {
  for (int d = 0; d < nb; d++) {
    int j = d - (nb - (r - 2));
    s[d] = j < 0 || (dims[j] == 1 && out[d] != 1) ? 0 : strides[j];
  }
}

/* A zero point read over the launch's dims: stride 1 along dim `along`
   when it holds one value per row or column, else 0 everywhere. */
static void zero_point_input(Emitter *e, Launch *L, int k, const Tensor *z, int along) {
  int64_t s[8] = {0};
  if (!z)
    return;
  if (tensor_numel(z) > 1)
    s[along] = 1;
  set_input(L, k, buf(e, z), s);
  whole_input(L, k, z);
  L->x_bytes[k] = 1;
}

/* The sums of A and B (less their zero points za, zb, when given) into
   the int32 array `y` shaped as the node's output, contiguous: the
   launch's space is that output as [batch..., M, N]. */
static void matmul_sums(Emitter *e, const Node *n, const Tensor *a, const Tensor *b,
                        const Tensor *za, const Tensor *zb, const char *y) {
  int64_t ad[IR_MAX_RANK], as[IR_MAX_RANK], bd[IR_MAX_RANK], bs[IR_MAX_RANK];
  int ar, br;
  matrix_view(a, false, ad, as, &ar);
  matrix_view(b, true, bd, bs, &br);
  /* The output's batch dims: its dims before the last two (or fewer when
     an operand was 1-D), as inference broadcast them. */
  int nb = (ar > br ? ar : br) - 2;
  Launch L = {.kernel = typed_kernel(e, "opc_matmul_integer", a->dtype)};
  L.rank = nb + 2;
  memcpy(L.dims, n->out[0]->dims, sizeof(int64_t) * (size_t)nb);
  L.dims[nb] = ad[ar - 2];
  L.dims[nb + 1] = bd[br - 1];
  int64_t ys[8], xa[8] = {0}, xb[8] = {0}, step = 1;
  for (int d = L.rank - 1; d >= 0; d--) {
    ys[d] = step;
    step *= L.dims[d];
  }
  set_output(&L, y, ys);
  L.y_bytes = 4;
  batch_strides(ar, ad, as, nb, L.dims, xa);
  batch_strides(br, bd, bs, nb, L.dims, xb);
  xa[nb] = as[ar - 2];     /* A's row */
  xb[nb + 1] = bs[br - 1]; /* B's column */
  set_input(&L, 0, buf(e, a), xa);
  set_input(&L, 1, buf(e, b), xb);
  whole_input(&L, 0, a);
  whole_input(&L, 1, b);
  L.x_bytes[0] = L.x_bytes[1] = 1;
  zero_point_input(e, &L, 2, za, nb);
  zero_point_input(e, &L, 3, zb, nb + 1);
  L.i[0] = ad[ar - 1];
  L.i[1] = as[ar - 1];
  L.i[2] = bs[br - 2];
  group_i(&L, 0, 3, "K, A's and B's strides along it");
  L.i[3] = za != NULL;
  L.i[4] = zb != NULL;
  L.i[5] = b->dtype == DT_INT8;
  group_i(&L, 3, 3, "A's zero point given, B's given, B signed");
  emit_launch(e, n, &L);
}

static void run_matmul_integer(Emitter *e, Node *n) {
  if (!is_contiguous(n->out[0])) {
    kernel_fail(e, n, "MatMulInteger writes a contiguous output only");
    return;
  }
  matmul_sums(e, n, n->in[0], n->in[1], node_input(n, 2), node_input(n, 3), buf(e, n->out[0]));
}

/* -------------------------------------------------------- ConvInteger */

/* The sums of x and w (less their zero points zx, zw, when given) into
   the int32 array `y` shaped as the node's output, contiguous: the
   launch's space is that output as [N, M, H', W'] (a 1-D convolution has
   H' = 1); x and w are read contiguous, as opc_conv_integer says. */
static void conv_sums(Emitter *e, const Node *n, const Tensor *x, const Tensor *w,
                      const Tensor *zx, const Tensor *zw, const char *y) {
  const Tensor *out = n->out[0];
  const Window *win = &n->win;
  bool flat = win->nspatial == 1; /* a 1-D convolution, as height 1 */
  Launch L = {.kernel = typed_kernel(e, "opc_conv_integer", x->dtype)};
  L.rank = 4;
  L.dims[0] = out->dims[0];
  L.dims[1] = out->dims[1];
  L.dims[2] = flat ? 1 : out->dims[2];
  L.dims[3] = out->dims[out->rank - 1];
  int64_t ys[8] = {L.dims[1] * L.dims[2] * L.dims[3], L.dims[2] * L.dims[3], L.dims[3], 1};
  int64_t none[8] = {0};
  set_output(&L, y, ys);
  L.y_bytes = 4;
  set_input(&L, 0, buf(e, x), none);
  set_input(&L, 1, buf(e, w), none);
  whole_input(&L, 0, x);
  whole_input(&L, 1, w);
  L.x_bytes[0] = L.x_bytes[1] = 1;
  if (zx) {
    set_input(&L, 2, buf(e, zx), none);
    whole_input(&L, 2, zx);
    L.x_bytes[2] = 1;
  }
  if (zw) {
    set_input(&L, 3, buf(e, zw), none);
    whole_input(&L, 3, zw);
    L.x_bytes[3] = 1;
  }
  int last = win->nspatial - 1; /* the width's window axis */
  L.i[0] = x->dims[1] / win->group;
  L.i[1] = out->dims[1] / win->group;
  L.i[2] = flat ? 1 : x->dims[2];
  L.i[3] = x->dims[x->rank - 1];
  L.i[4] = flat ? 1 : win->kernel[0];
  L.i[5] = win->kernel[last];
  L.i[6] = flat ? 1 : win->stride[0];
  L.i[7] = win->stride[last];
  L.i[8] = flat ? 1 : win->dilation[0];
  L.i[9] = win->dilation[last];
  L.i[10] = flat ? 0 : win->pad_begin[0];
  L.i[11] = win->pad_begin[last];
  group_i(&L, 0, 12, "C/group, M/group, H, W, KH, KW, strides, dilations, leading pads");
  L.i[12] = (zx ? 1 : 0) | (zw ? 2 : 0) | (w->dtype == DT_INT8 ? 4 : 0);
  L.i[13] = zw && tensor_numel(zw) > 1;
  group_i(&L, 12, 2, "zero points of x (1), of w (2), w signed (4); w's per channel");
  emit_launch(e, n, &L);
}

static bool conv_operands_contiguous(Emitter *e, const Node *n, const Tensor *x,
                                     const Tensor *w) {
  if (is_contiguous(x) && is_contiguous(w) && is_contiguous(n->out[0]))
    return true;
  return kernel_fail(e, n, "the integer convolutions read and write contiguous tensors only");
}

static void run_conv_integer(Emitter *e, Node *n) {
  if (conv_operands_contiguous(e, n, n->in[0], n->in[1]))
    conv_sums(e, n, n->in[0], n->in[1], node_input(n, 2), node_input(n, 3), buf(e, n->out[0]));
}

/* ------------------------------------------- QLinearMatMul, QLinearConv */

/* The node's scratch: the int32 sums (the output's count), then the
   float32 multipliers (one per output channel). */
typedef struct QLinearScratch {
  const char *sums, *multipliers;
  int64_t channels; /* output channels: N of QLinearMatMul, M of QLinearConv */
} QLinearScratch;

static int64_t output_channels(const Node *n) {
  const Tensor *y = n->out[0], *b = n->in[3];
  if (n->op == OP_QLINEAR_CONV)
    return y->dims[1];
  return b->rank >= 2 ? b->dims[b->rank - 1] : 1;
}

static void setup_qlinear(Emitter *e, Node *n) {
  QLinearScratch *s = node_data(e, n, sizeof *s);
  s->channels = output_channels(n);
  int64_t count = tensor_numel(n->out[0]);
  const char *field = emit_unique(e, emit_str(e, "%s_scratch", node_id(e, n)));
  emit_to(e, SEC_FIELDS, "int *%s; /* int32 sums, then float32 multipliers */", field);
  emit_call(e, LIB_CUDA, n, "cudaMalloc((void **)&c->%s, %lld * sizeof(int))", field,
            (long long)(count + s->channels));
  emit_to(e, SEC_TEARDOWN, "cudaFree(c->%s);", field);
  s->sums = emit_str(e, "c->%s", field);
  s->multipliers = emit_str(e, "(float *)(c->%s + %lld)", field, (long long)count);
}

/* One multiplier per output channel: opc_requant_scale_of of the first
   operand's scale, the second's (one, or that channel's) and y's. */
static void multiplier_launch(Emitter *e, const Node *n, const QLinearScratch *s) {
  const Tensor *sb = n->in[4];
  Launch L = {.kernel = "opc_requant_multiplier"};
  L.rank = 1;
  L.dims[0] = s->channels;
  int64_t one[8] = {1}, none[8] = {0};
  set_output(&L, s->multipliers, one);
  set_input(&L, 0, buf(e, n->in[1]), none);
  set_input(&L, 1, buf(e, sb), none);
  set_input(&L, 2, buf(e, n->in[6]), none);
  for (int k = 0; k < 3; k++)
    whole_input(&L, k, n->in[k == 0 ? 1 : k == 1 ? 4 : 6]);
  L.i[0] = tensor_numel(sb) > 1;
  group_i(&L, 0, 1, "the second operand's scale per channel");
  emit_launch(e, n, &L);
}

/* The sums requantised into y: over y's dims, the channel axis (the last
   for QLinearMatMul, 1 for QLinearConv) picks the multiplier and bias. */
static void requantize_launch(Emitter *e, const Node *n, const QLinearScratch *s) {
  const Tensor *y = n->out[0], *bias = node_input(n, 8);
  int axis = n->op == OP_QLINEAR_CONV ? 1 : y->rank - 1;
  bool per_channel = s->channels > 1 && y->rank > 0;
  Launch L = {.kernel = typed_kernel(e, op_kernel(e, n->op), y->dtype)};
  L.rank = y->rank;
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  int64_t ys[IR_MAX_RANK], along[IR_MAX_RANK] = {0}, none[IR_MAX_RANK] = {0};
  strides_of(y, ys);
  if (per_channel)
    along[axis] = 1;
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, s->sums, ys);
  set_input(&L, 1, s->multipliers, along);
  set_input(&L, 2, buf(e, n->in[7]), none);
  L.x_extent[1] = s->channels;
  L.x_bytes[2] = L.y_bytes = 1;
  if (bias) {
    set_input(&L, 3, buf(e, bias), along);
    whole_input(&L, 3, bias);
  }
  collapse(&L);
  L.i[0] = bias != NULL;
  group_i(&L, 0, 1, "bias in x[3]");
  qlinear_bounds(n, &L.f[0], &L.f[1]); /* the type's range, or a fused clamp's */
  group_f(&L, 0, 2, "saturated to");
  emit_launch(e, n, &L);
}

static void run_qlinear(Emitter *e, Node *n) {
  const QLinearScratch *s = node_data(e, n, sizeof *s);
  const Tensor *a = n->in[0], *b = n->in[3], *za = n->in[2], *zb = n->in[5];
  if (n->op == OP_QLINEAR_CONV) {
    if (!conv_operands_contiguous(e, n, a, b))
      return;
    conv_sums(e, n, a, b, za, zb, s->sums);
  } else {
    if (!is_contiguous(n->out[0])) {
      kernel_fail(e, n, "QLinearMatMul writes a contiguous output only");
      return;
    }
    matmul_sums(e, n, a, b, za, zb, s->sums);
  }
  multiplier_launch(e, n, s);
  requantize_launch(e, n, s);
}

const OpEmitter kernel_matmul_integer = {.run = run_matmul_integer};
const OpEmitter kernel_conv_integer = {.run = run_conv_integer};
const OpEmitter kernel_qlinear = {.setup = setup_qlinear, .run = run_qlinear};
