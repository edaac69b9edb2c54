/*
 * kernels_quantized.c - the integer products, MatMulInteger and
 * ConvInteger, as launches of opc's kernels (opc_matmul_integer,
 * opc_conv_integer, the first operand's type naming the instance): int32
 * sums, one thread per output. QLinearMatMul and QLinearConv put those
 * sums in scratch, then requantise them (opc_requant_multiplier,
 * opc_requantize).
 *
 * An integer matmul whose B is a constant matrix (quantize_dynamic's
 * MatMulInteger, fuse-qdq's QLinearMatMul) takes cuBLASLt's int8 GEMM
 * instead of opc_matmul_integer, when B less its zero point fits int8
 * (symmetric int8 weights always do) and A's zero point is one value:
 * opc_int8_pack makes A int8 (A - 128 for uint8), cublasLtMatmul sums
 * int8 products into int32, and opc_int8_fixup adds (128 - za) times B's
 * column sums, folded at compile time. The sums are the same integers.
 * See docs/architecture.md, "Int8 GEMM". ConvInteger and QLinearConv still
 * use opc_conv_integer.
 */
#include <stdlib.h>
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

/* ---------------------------------------- through cuBLASLt's int8 GEMM */

/* How an integer matmul with a constant B runs on cublasLtMatmul. In
   cuBLAS's column-major terms the int32 sums [M, N] (row-major) are
   D (N x M) = op(W) (N x K) times A'^T (K x M), with W = B' transposed,
   stored [N', K'] row-major (K' x N' column-major, op = T): the "TN" form
   that cuBLASLt's IMMA kernels take. N' and K' are N and K rounded up to
   multiples of 4 (its m and k must be), padded with zeros. */
typedef struct LtPlan {
  bool on;
  int64_t m, n, k, n4, k4;
  int offset;          /* subtracted from A to make it int8: 128 for uint8 */
  const char *w, *colsum;                  /* weights */
  const char *handle, *desc, *wl, *al, *dl; /* context fields, "c->..." */
  const char *acc, *packed;                /* scratch: int32 [M, N'], int8 [M, K'] */
} LtPlan;

static int64_t round4(int64_t v) { return (v + 3) / 4 * 4; }

/* B' = B - zb as int8 values (int64 array, [K, N]), or NULL when one does
   not fit int8 or B or zb is not a constant. */
static int64_t *int8_weights(Emitter *e, const Tensor *b, const Tensor *zb) {
  int64_t k = b->dims[0], n = b->dims[1];
  if (!b->i64 || (zb && !zb->i64))
    return NULL;
  int64_t *w = arena_alloc(e->g->arena, sizeof(int64_t) * (size_t)(k * n));
  for (int64_t p = 0; p < k; p++)
    for (int64_t j = 0; j < n; j++) {
      int64_t z = !zb ? 0 : tensor_numel(zb) > 1 ? zb->i64[j] : zb->i64[0];
      int64_t v = b->i64[p * n + j] - z;
      if (v < -128 || v > 127)
        return NULL;
      w[p * n + j] = v;
    }
  return w;
}

/* Whether the matmul can take the GEMM: single-GPU code (a CPU unit or a
   multi-GPU program keeps the kernel), contiguous A and output, a 2-D
   constant B, one zero point of A. OPC_INT8_GEMM=kernel at compile time
   keeps the kernel too, to compare the two. */
static bool lt_fits(Emitter *e, const Node *n, const Tensor *a, const Tensor *b,
                    const Tensor *za) {
  const char *choice = getenv("OPC_INT8_GEMM");
  if (choice && !strcmp(choice, "kernel"))
    return false;
  if (emit_multi_gpu(e) || node_is_cpu_code(e, n) || e->g->serve)
    return false;
  if (b->rank != 2 || a->rank < 1 || a->dims[a->rank - 1] != b->dims[0] || b->dims[0] < 1 ||
      b->dims[1] < 1)
    return false;
  if (za && tensor_numel(za) != 1)
    return false;
  return is_contiguous(a) && is_contiguous(n->out[0]) && tensor_numel(a) > 0;
}

/* The weights: W [N', K'] int8, zeros in the padding; B''s column sums. */
static void lt_weights(Emitter *e, const Node *n, LtPlan *p, const int64_t *bw) {
  int64_t *w = arena_alloc(e->g->arena, sizeof(int64_t) * (size_t)(p->n4 * p->k4));
  int64_t *colsum = arena_alloc(e->g->arena, sizeof(int64_t) * (size_t)p->n);
  memset(w, 0, sizeof(int64_t) * (size_t)(p->n4 * p->k4));
  for (int64_t j = 0; j < p->n; j++) {
    int64_t sum = 0;
    for (int64_t q = 0; q < p->k; q++) {
      w[j * p->k4 + q] = bw[q * p->n + j];
      sum += bw[q * p->n + j];
    }
    colsum[j] = sum; /* |sum| <= 128 K: an int32 below K = 2^24 */
  }
  p->w = weights_add_typed(e, emit_str(e, "%s_int8_w", node_id(e, n)), DT_INT8, w,
                           p->n4 * p->k4);
  p->colsum = weights_add_typed(e, emit_str(e, "%s_int8_colsum", node_id(e, n)), DT_INT32,
                                colsum, p->n);
}

static const char *lt_field(Emitter *e, const Node *n, const char *type, const char *what) {
  const char *f = emit_unique(e, emit_str(e, "%s_%s", node_id(e, n), what));
  emit_to(e, SEC_FIELDS, "%s %s;", type, f);
  return emit_str(e, "c->%s", f);
}

/* create(): the handle, descriptor, layouts and scratch; destroy() frees them. */
static void lt_objects(Emitter *e, const Node *n, LtPlan *p) {
  p->handle = lt_field(e, n, "cublasLtHandle_t", "lt");
  p->desc = lt_field(e, n, "cublasLtMatmulDesc_t", "lt_desc");
  p->wl = lt_field(e, n, "cublasLtMatrixLayout_t", "lt_w");
  p->al = lt_field(e, n, "cublasLtMatrixLayout_t", "lt_a");
  p->dl = lt_field(e, n, "cublasLtMatrixLayout_t", "lt_d");
  const char *scratch = lt_field(e, n, "int *", "lt_scratch");
  emit(e, "/* cuBLASLt's int8 GEMM, \"TN\": W (K' x N', op T) by A' (K' x M) into int32 D */");
  emit_call(e, LIB_CUBLAS, n, "cublasLtCreate(&%s)", p->handle);
  emit_call(e, LIB_CUBLAS, n, "cublasLtMatmulDescCreate(&%s, CUBLAS_COMPUTE_32I, CUDA_R_32I)",
            p->desc);
  emit_call(e, LIB_CUBLAS, n,
            "cublasLtMatmulDescSetAttribute(%s, CUBLASLT_MATMUL_DESC_TRANSA, "
            "&(int32_t){CUBLAS_OP_T}, sizeof(int32_t))",
            p->desc);
  emit_call(e, LIB_CUBLAS, n, "cublasLtMatrixLayoutCreate(&%s, CUDA_R_8I, %lld, %lld, %lld)",
            p->wl, (long long)p->k4, (long long)p->n4, (long long)p->k4);
  emit_call(e, LIB_CUBLAS, n, "cublasLtMatrixLayoutCreate(&%s, CUDA_R_8I, %lld, %lld, %lld)",
            p->al, (long long)p->k4, (long long)p->m, (long long)p->k4);
  emit_call(e, LIB_CUBLAS, n, "cublasLtMatrixLayoutCreate(&%s, CUDA_R_32I, %lld, %lld, %lld)",
            p->dl, (long long)p->n4, (long long)p->m, (long long)p->n4);
  int64_t acc_ints = p->m * p->n4, packed_ints = (p->m * p->k4 + 3) / 4;
  emit_call(e, LIB_CUDA, n, "cudaMalloc((void **)&%s, %lld * sizeof(int))", scratch,
            (long long)(acc_ints + packed_ints));
  emit_to(e, SEC_TEARDOWN, "cudaFree(%s);", scratch);
  emit_to(e, SEC_TEARDOWN, "cublasLtMatrixLayoutDestroy(%s);", p->dl);
  emit_to(e, SEC_TEARDOWN, "cublasLtMatrixLayoutDestroy(%s);", p->al);
  emit_to(e, SEC_TEARDOWN, "cublasLtMatrixLayoutDestroy(%s);", p->wl);
  emit_to(e, SEC_TEARDOWN, "cublasLtMatmulDescDestroy(%s);", p->desc);
  emit_to(e, SEC_TEARDOWN, "cublasLtDestroy(%s);", p->handle);
  p->acc = scratch;
  p->packed = emit_str(e, "(signed char *)(%s + %lld)", scratch, (long long)acc_ints);
}

/* Plans the GEMM for a matmul of A and constant B (zero points za, zb) in
   the node's setup; p->on stays false when it does not fit. */
static void lt_setup(Emitter *e, const Node *n, LtPlan *p, const Tensor *a, const Tensor *b,
                     const Tensor *za, const Tensor *zb) {
  if (!lt_fits(e, n, a, b, za))
    return;
  int64_t *bw = int8_weights(e, b, zb);
  if (!bw)
    return;
  p->k = b->dims[0];
  p->n = b->dims[1];
  p->m = tensor_numel(a) / p->k;
  p->k4 = round4(p->k);
  p->n4 = round4(p->n);
  p->offset = a->dtype == DT_UINT8 ? 128 : 0;
  if (p->k >= (1 << 24) / 128 * 128 || p->m > 0x7fffffff || p->n4 > 0x7fffffff)
    return;
  lt_weights(e, n, p, bw);
  lt_objects(e, n, p);
  p->on = true;
}

/* opc_int8_pack: A [M, K] into A' [M, K'] int8. */
static void pack_launch(Emitter *e, const Node *n, const LtPlan *p, const Tensor *a) {
  Launch L = {.kernel = typed_kernel(e, "opc_int8_pack", a->dtype)};
  L.rank = 2;
  L.dims[0] = p->m;
  L.dims[1] = p->k4;
  int64_t ys[8] = {p->k4, 1}, xs[8] = {p->k, 1};
  set_output(&L, p->packed, ys);
  L.y_bytes = 1;
  set_input(&L, 0, buf(e, a), xs);
  L.x_extent[0] = p->m * p->k; /* the padding's columns read nothing */
  L.x_bytes[0] = 1;
  L.i[0] = p->k;
  L.i[1] = p->offset;
  group_i(&L, 0, 2, "K, the offset that makes A int8");
  emit_launch(e, n, &L);
}

/* opc_int8_fixup: D [M, N'] plus (offset - za) times the column sums, into y [M, N]. */
static void fixup_launch(Emitter *e, const Node *n, const LtPlan *p, const Tensor *a,
                         const Tensor *za, const char *y) {
  Launch L = {.kernel = typed_kernel(e, "opc_int8_fixup", a->dtype)};
  L.rank = 2;
  L.dims[0] = p->m;
  L.dims[1] = p->n;
  int64_t ys[8] = {p->n, 1}, ds[8] = {p->n4, 1}, cs[8] = {0, 1}, none[8] = {0};
  set_output(&L, y, ys);
  L.y_bytes = 4;
  set_input(&L, 0, p->acc, ds);
  set_input(&L, 1, p->colsum, cs);
  L.x_bytes[0] = L.x_bytes[1] = 4;
  if (za) {
    set_input(&L, 2, buf(e, za), none);
    L.x_extent[2] = 1;
    L.x_bytes[2] = 1;
  }
  L.i[0] = p->offset;
  L.i[1] = za != NULL;
  group_i(&L, 0, 2, "A's offset, A's zero point given");
  emit_launch(e, n, &L);
}

/* The sums into y (int32, the output's shape) through the GEMM. */
static void lt_run(Emitter *e, const Node *n, const LtPlan *p, const Tensor *a,
                   const Tensor *za, const char *y) {
  pack_launch(e, n, p, a);
  emit_call(e, LIB_CUBLAS, n,
            "cublasLtMatmul(%s, %s, &(int32_t){1}, %s, %s, %s, %s, &(int32_t){0}, %s, %s, %s, "
            "%s, NULL, NULL, 0, %s)",
            p->handle, p->desc, p->w, p->wl, p->packed, p->al, p->acc, p->dl, p->acc, p->dl,
            node_stream(e, n));
  fixup_launch(e, n, p, a, za, y);
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

static void setup_matmul_integer(Emitter *e, Node *n) {
  LtPlan *p = node_data(e, n, sizeof *p);
  lt_setup(e, n, p, n->in[0], n->in[1], node_input(n, 2), node_input(n, 3));
}

static void run_matmul_integer(Emitter *e, Node *n) {
  const LtPlan *p = node_data(e, n, sizeof *p);
  if (!is_contiguous(n->out[0])) {
    kernel_fail(e, n, "MatMulInteger writes a contiguous output only");
    return;
  }
  if (p->on)
    lt_run(e, n, p, n->in[0], node_input(n, 2), buf(e, n->out[0]));
  else
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
  LtPlan lt;        /* QLinearMatMul's GEMM, when it takes one */
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
  if (n->op == OP_QLINEAR_MATMUL)
    lt_setup(e, n, &s->lt, n->in[0], n->in[3], n->in[2], n->in[5]);
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
    if (s->lt.on)
      lt_run(e, n, &s->lt, a, za, s->sums);
    else
      matmul_sums(e, n, a, b, za, zb, s->sums);
  }
  multiplier_launch(e, n, s);
  requantize_launch(e, n, s);
}

const OpEmitter kernel_matmul_integer = {.setup = setup_matmul_integer, .run = run_matmul_integer};
const OpEmitter kernel_conv_integer = {.run = run_conv_integer};
const OpEmitter kernel_qlinear = {.setup = setup_qlinear, .run = run_qlinear};
