/*
 * kernels_quantized.c - the integer products, MatMulInteger and
 * ConvInteger, as launches of opc's kernels (opc_matmul_integer,
 * opc_conv_integer, the first operand's type naming the instance): int32
 * sums, one thread per output. QLinearMatMul and QLinearConv put those
 * sums in scratch, then requantise them (opc_requantize) by one float32
 * multiplier per output channel: worked out at compile time where the
 * three scales are constants, else by opc_requant_multiplier in each run.
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
 *
 * The CPU program (--target cpu) differs from the GPU program here only:
 * a channels-last QLinearConv with constant zero points and bias is one
 * opc_int8_conv_packed launch, its filter packed at compile time, where
 * the GPU program takes the GEMM ("the CPU program's int8 convolution").
 */
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "scalar.h"

/* A 2-D convolution whose y is stored channels-last (NHWC) and x
   channels-last or in ONNX's order, as choose-layout's int8 form stores
   those of the GEMM's convolutions (x keeps ONNX's order when it has few
   channels). Tensors the same in both orders count as either. */
static bool conv_is_nhwc(const Node *n, const Tensor *x) {
  return x->rank == 4 && tensor_is_channels_last(n->out[0]) &&
         (tensor_is_channels_last(x) || row_major(x));
}

/* Elements from x[k] to its last one (a contiguous tensor's count). */
static void whole_input(Launch *L, int k, const Tensor *t) {
  int64_t s[IR_MAX_RANK];
  strides_of(t, s);
  L->x_extent[k] = reach(t->rank, t->dims, s, &(int64_t){0});
}

/* ---------------------------------------- through cuBLASLt's int8 GEMM */

/*
 * An integer matmul or convolution with constant weights, on cublasLtMatmul.
 * cuBLASLt's IMMA kernels take the "TN" form only: D (m x n, column-major)
 * = op(A) op(B) with A stored k x m (transposed) and B k x n, m and k
 * multiples of 4. Both operands are therefore stored as rows of k' int8
 * values (k' = K rounded up to 4, zeros after K):
 *   - MatMul: the sums [M, N] (row-major) are D = W^T A'^T of m = N' (N
 *     rounded up to 4) and n = M: A is W = B' transposed, [N', K'] at
 *     compile time; B is the packed activations [M, K'] (opc_int8_pack).
 *   - Conv (group 1): each image's sums [Cout, P] (P = H' W') are rows of
 *     D = X'^T W of m = N P rounded up to 4 and n = Cout: A is the
 *     activations as one row per output pixel, [N P, K'] with K = C KH KW
 *     (opc_int8_im2row); B is W = w' [Cout, K'].
 * A' = A - 128 for uint8 activations (A itself for int8) and w' = w less
 * its zero point, when every value fits int8 (symmetric int8 weights
 * always do); since sum (a - za) w' = sum a' w' + (128 - za) sum w',
 * opc_int8_fixup adds (128 - za) times w''s column sums, folded at compile
 * time. A padded tap of the convolution is packed as za - 128, whose
 * term (a' + 128 - za) is 0, as the operator's padding contributes.
 */
typedef struct LtPlan {
  bool on;
  int64_t k, k4;         /* the sum's length, and it rounded up to 4 */
  int64_t gm, gn;        /* cuBLASLt's m (a multiple of 4) and n */
  int64_t rows, cols;    /* the sums of an image: rows x cols */
  int64_t images;        /* of the convolution; 1 for the matmul */
  int offset;            /* subtracted from the activations: 128 for uint8 */
  bool conv;
  bool nhwc;             /* a convolution with channels-last y, in the matmul's form */
  bool x_last;           /* and channels-last x (else x in ONNX's order) */
  const char *w, *colsum;                  /* weights */
  const char *handle, *desc, *al, *bl, *dl; /* context fields, "c->..." */
  const char *acc, *packed;                /* scratch: int32 D, int8 packed rows */
  const int64_t *w_data, *colsum_data; /* W's values and column sums at compile time */
  const char *corr; /* QLinear's epilogue: (offset - za) colsum + bias, or NULL */
} LtPlan;

static int64_t round4(int64_t v) { return (v + 3) / 4 * 4; }

/* Where weight_values puts element (r, q) of rows K' apart: the GEMM's
   rows one after another, or the CPU program's blocks (packed_index). */
typedef int64_t (*Placement)(int64_t r, int64_t q, int64_t k4);

static int64_t row_index(int64_t r, int64_t q, int64_t k4) { return r * k4 + q; }

/* The weights less their zero point as int8 rows: `rows` rows of `k`
   values, element (r, q) at w[r * rs + q' * qs]; the zero point is one, or
   one per row. q' is q, except for a channels-last convolution (taps > 1:
   a filter's KH KW taps), whose row runs over the taps with the channels
   innermost, as its packed pixels do: q = tap C + c is w's c taps + tap.
   Into the plan's w_data ([padded, K'] values, zeros past k and past
   `rows`, each where `place` says) and colsum_data, in the arena: the
   GEMM's W and the CPU program's packed filter. False when a value does
   not fit int8 or the data is not constant. */
static bool weight_values(Emitter *e, LtPlan *p, const Tensor *w, const Tensor *zw, int64_t rows,
                          int64_t padded, int64_t rs, int64_t qs, int64_t taps, Placement place) {
  if (!w->i64 || (zw && !zw->i64))
    return false;
  int64_t *values = arena_alloc(e->g->arena, sizeof(int64_t) * (size_t)(padded * p->k4));
  int64_t *colsum = arena_alloc(e->g->arena, sizeof(int64_t) * (size_t)rows);
  memset(values, 0, sizeof(int64_t) * (size_t)(padded * p->k4));
  for (int64_t r = 0; r < rows; r++) {
    int64_t z = !zw ? 0 : tensor_numel(zw) > 1 ? zw->i64[r] : zw->i64[0], sum = 0;
    for (int64_t q = 0; q < p->k; q++) {
      int64_t c = p->k / taps, from = q % c * taps + q / c; /* q itself when taps is 1 */
      int64_t v = w->i64[r * rs + from * qs] - z;
      if (v < -128 || v > 127)
        return false;
      values[place(r, q, p->k4)] = v;
      sum += v;
    }
    colsum[r] = sum; /* |sum| <= 128 K: K is below 2^24 */
  }
  p->w_data = values;
  p->colsum_data = colsum;
  return true;
}

/* weight_values' rows and sums into net.weights, as the GEMM reads them. */
static bool lt_weights(Emitter *e, const Node *n, LtPlan *p, const Tensor *w, const Tensor *zw,
                       int64_t rows, int64_t padded, int64_t rs, int64_t qs, int64_t taps) {
  if (!weight_values(e, p, w, zw, rows, padded, rs, qs, taps, row_index))
    return false;
  p->w = weights_add_typed(e, emit_str(e, "%s_int8_w", node_id(e, n)), DT_INT8, p->w_data,
                           padded * p->k4);
  p->colsum = weights_add_typed(e, emit_str(e, "%s_int8_colsum", node_id(e, n)), DT_INT32,
                                p->colsum_data, rows);
  return true;
}

/* Whether the node may take the GEMM: single-GPU code (a CPU unit, a
   multi-GPU or serving program keeps the kernel), contiguous activations
   and output (or both channels-last: choose-layout's int8 form), one zero
   point of the activations. OPC_INT8_GEMM=kernel at compile time keeps
   the kernel too, to compare the two. */
static bool lt_allowed(Emitter *e, const Node *n, const Tensor *a, const Tensor *za,
                       bool conv) {
  if (!int8_gemm_allowed(e->g) || emit_multi_gpu(e) || node_is_cpu_code(e, n))
    return false;
  if (za && tensor_numel(za) != 1)
    return false;
  bool stored = (conv && conv_is_nhwc(n, a)) || (row_major(a) && row_major(n->out[0]));
  return stored && tensor_numel(a) > 0 && tensor_numel(n->out[0]) > 0;
}

static const char *lt_field(Emitter *e, const Node *n, const char *type, const char *what) {
  const char *f = emit_unique(e, emit_str(e, "%s_%s", node_id(e, n), what));
  emit_to(e, SEC_FIELDS, "%s %s;", type, f);
  return emit_str(e, "c->%s", f);
}

/* create(): the handle, descriptor, layouts and scratch; destroy() frees
   them. The packing kernels write every row of the scratch the GEMM reads. */
static void lt_objects(Emitter *e, const Node *n, LtPlan *p) {
  p->handle = lt_field(e, n, "cublasLtHandle_t", "lt");
  p->desc = lt_field(e, n, "cublasLtMatmulDesc_t", "lt_desc");
  p->al = lt_field(e, n, "cublasLtMatrixLayout_t", "lt_a");
  p->bl = lt_field(e, n, "cublasLtMatrixLayout_t", "lt_b");
  p->dl = lt_field(e, n, "cublasLtMatrixLayout_t", "lt_d");
  const char *scratch = lt_field(e, n, "int *", "lt_scratch");
  emit(e, "/* cuBLASLt's int8 GEMM, \"TN\": A (k' x m, op T) by B (k' x n) into int32 D */");
  emit_call(e, LIB_CUBLAS, n, "cublasLtCreate(&%s)", p->handle);
  emit_call(e, LIB_CUBLAS, n, "cublasLtMatmulDescCreate(&%s, CUBLAS_COMPUTE_32I, CUDA_R_32I)",
            p->desc);
  emit_call(e, LIB_CUBLAS, n,
            "cublasLtMatmulDescSetAttribute(%s, CUBLASLT_MATMUL_DESC_TRANSA, "
            "&(int32_t){CUBLAS_OP_T}, sizeof(int32_t))",
            p->desc);
  long long k4 = p->k4, gm = p->gm, gn = p->gn;
  emit_call(e, LIB_CUBLAS, n, "cublasLtMatrixLayoutCreate(&%s, CUDA_R_8I, %lld, %lld, %lld)",
            p->al, k4, gm, k4);
  emit_call(e, LIB_CUBLAS, n, "cublasLtMatrixLayoutCreate(&%s, CUDA_R_8I, %lld, %lld, %lld)",
            p->bl, k4, gn, k4);
  emit_call(e, LIB_CUBLAS, n, "cublasLtMatrixLayoutCreate(&%s, CUDA_R_32I, %lld, %lld, %lld)",
            p->dl, gm, gn, gm);
  int64_t acc_ints = p->gm * p->gn, packed_rows = p->conv ? p->gm : p->gn;
  int64_t ints = acc_ints + (packed_rows * p->k4 + 3) / 4;
  emit_call(e, LIB_CUDA, n, "cudaMalloc((void **)&%s, %lld * sizeof(int))", scratch,
            (long long)ints);
  emit_to(e, SEC_TEARDOWN, "cudaFree(%s);", scratch);
  emit_to(e, SEC_TEARDOWN, "cublasLtMatrixLayoutDestroy(%s);", p->dl);
  emit_to(e, SEC_TEARDOWN, "cublasLtMatrixLayoutDestroy(%s);", p->bl);
  emit_to(e, SEC_TEARDOWN, "cublasLtMatrixLayoutDestroy(%s);", p->al);
  emit_to(e, SEC_TEARDOWN, "cublasLtMatmulDescDestroy(%s);", p->desc);
  emit_to(e, SEC_TEARDOWN, "cublasLtDestroy(%s);", p->handle);
  p->acc = scratch;
  p->packed = emit_str(e, "(signed char *)(%s + %lld)", scratch, (long long)acc_ints);
}

/* Sizes no int32 index or sum of the GEMM can overflow. */
static bool lt_sizes_fit(const LtPlan *p) { return int8_gemm_sizes_fit(p->k4, p->gm, p->gn); }

/* Plans the GEMM of a matmul of A by constant B [K, N] (zero points za,
   zb) in the node's setup; p->on stays false when it does not fit. */
static void lt_setup_matmul(Emitter *e, const Node *n, LtPlan *p, const Tensor *a,
                            const Tensor *b, const Tensor *za, const Tensor *zb) {
  if (!lt_allowed(e, n, a, za, false) || b->rank != 2 || a->rank < 1 ||
      a->dims[a->rank - 1] != b->dims[0] || b->dims[0] < 1 || b->dims[1] < 1)
    return;
  p->k = b->dims[0];
  p->k4 = round4(p->k);
  p->rows = tensor_numel(a) / p->k;
  p->cols = b->dims[1];
  p->images = 1;
  p->gm = round4(p->cols);
  p->gn = p->rows;
  p->offset = a->dtype == DT_UINT8 ? 128 : 0;
  /* W's row j is B's column j: element (j, q) at B[q * N + j]; zero rows to N'. */
  if (!lt_sizes_fit(p) || !lt_weights(e, n, p, b, zb, p->cols, p->gm, 1, p->cols, 1))
    return;
  lt_objects(e, n, p);
  p->on = true;
}

/* A channels-last convolution (x and y NHWC, as choose-layout stores
   them) is the matmul of its pixels' rows by the filter: sums [N H' W',
   Cout] = D = W X'^T of m = Cout' (Cout rounded up to 4) and n = N H' W',
   A the filter [Cout', K'], B the pixels' rows, and D's columns, one per
   output pixel, are y's channels-last pixels: the matmul's epilogues
   write y as they are. With x channels-last too, K is in the order (tap,
   channel) and the rows are opc_int8_im2row_nhwc's (a 1x1 convolution's
   rows are x's pixels themselves, a KxK one's whole pixels gathered);
   with x in ONNX's order (few channels), opc_int8_im2row's. */
static void lt_setup_conv_nhwc(Emitter *e, const Node *n, LtPlan *p, const Tensor *x,
                               const Tensor *w, const Tensor *zw) {
  const Tensor *y = n->out[0];
  p->nhwc = true;
  p->x_last = tensor_is_channels_last(x);
  p->k = tensor_numel(w) / w->dims[0];
  p->k4 = round4(p->k);
  p->images = 1;
  p->rows = tensor_numel(y) / y->dims[1];
  p->cols = y->dims[1];
  p->gm = round4(p->cols);
  p->gn = p->rows;
  p->offset = x->dtype == DT_UINT8 ? 128 : 0;
  int64_t taps = p->x_last ? w->dims[2] * w->dims[3] : 1;
  if (!lt_sizes_fit(p) || !lt_weights(e, n, p, w, zw, p->cols, p->gm, p->k, 1, taps))
    return;
  lt_objects(e, n, p);
  p->on = true;
}

/* The same for a convolution of group 1 with constant w [Cout, C, KH, KW]. */
static void lt_setup_conv(Emitter *e, const Node *n, LtPlan *p, const Tensor *x,
                          const Tensor *w, const Tensor *zx, const Tensor *zw) {
  const Tensor *y = n->out[0];
  if (!lt_allowed(e, n, x, zx, true) || n->win.group != 1 || !row_major(w))
    return;
  if (conv_is_nhwc(n, x)) {
    /* choose-layout stored it so for the GEMM: the same predicate. */
    if (n->op == OP_QLINEAR_CONV && qlinear_conv_takes_int8_gemm(n))
      lt_setup_conv_nhwc(e, n, p, x, w, zw);
    return;
  }
  p->conv = true;
  p->k = tensor_numel(w) / w->dims[0];
  p->k4 = round4(p->k);
  p->images = y->dims[0];
  p->rows = y->dims[1];
  p->cols = tensor_numel(y) / (p->images * p->rows);
  p->gm = round4(p->images * p->cols);
  p->gn = p->rows;
  p->offset = x->dtype == DT_UINT8 ? 128 : 0;
  if (!lt_sizes_fit(p) || !lt_weights(e, n, p, w, zw, p->rows, p->rows, p->k, 1, 1))
    return;
  lt_objects(e, n, p);
  p->on = true;
}

/* opc_int8_pack: A [M, K] into A' [M, K'] int8. */
static void pack_launch(Emitter *e, const Node *n, const LtPlan *p, const Tensor *a) {
  Launch L = {.kernel = typed_kernel(e, "opc_int8_pack", a->dtype)};
  L.rank = 2;
  L.dims[0] = p->rows;
  L.dims[1] = p->k4;
  int64_t ys[8] = {p->k4, 1}, xs[8] = {p->k, 1};
  set_output(&L, p->packed, ys);
  L.y_bytes = 1;
  set_input(&L, 0, buf(e, a), xs);
  L.x_extent[0] = p->rows * p->k; /* the padding's columns read nothing */
  L.x_bytes[0] = 1;
  L.i[0] = p->k;
  L.i[1] = p->offset;
  group_i(&L, 0, 2, "K, the offset that makes A int8");
  emit_launch(e, n, &L);
}

/* opc_int8_im2row: x [N, C, H, W] into rows [N H' W', K'] int8, one per
   output pixel, a row per thread; the rows past N H' W' up to cuBLASLt's
   m (a multiple of 4) are zeros. opc_int8_im2row_nhwc: the same of a
   channels-last x, N H' W' rows (cuBLASLt's n). */
static void im2row_launch(Emitter *e, const Node *n, const LtPlan *p, const Tensor *x,
                          const Tensor *zx) {
  const Window *win = &n->win;
  const Tensor *y = n->out[0];
  const char *kernel = p->x_last ? "opc_int8_im2row_nhwc" : "opc_int8_im2row";
  int64_t pixels = tensor_numel(y) / (y->dims[0] * y->dims[1]); /* H' W' */
  Launch L = {.kernel = typed_kernel(e, kernel, x->dtype)};
  L.rank = 1;
  L.dims[0] = p->nhwc ? p->gn : p->gm;
  int64_t ys[8] = {p->k4}, none[8] = {0};
  set_output(&L, p->packed, ys);
  L.y_extent = L.dims[0] * p->k4; /* each thread writes its whole row */
  L.y_bytes = 1;
  set_input(&L, 0, buf(e, x), none);
  whole_input(&L, 0, x);
  L.x_bytes[0] = 1;
  if (zx) {
    set_input(&L, 1, buf(e, zx), none);
    L.x_extent[1] = 1;
    L.x_bytes[1] = 1;
  }
  L.i[0] = x->dims[1];
  window_args(&L.i[1], win, x);
  group_i(&L, 0, 11, "C, H, W, KH, KW, strides, dilations, leading pads");
  L.i[11] = y->dims[y->rank - 1];
  L.i[12] = p->offset;
  L.i[13] = zx != NULL;
  L.i[14] = pixels;
  L.i[15] = y->dims[0] * pixels;
  group_i(&L, 11, 5, "W', the offset that makes x int8, x's zero point given, H' W', N H' W'");
  emit_launch(e, n, &L);
}

/* opc_int8_fixup: D plus (offset - za) times the column sums, into the
   sums y: [M, N] of a matmul, [N, Cout, H' W'] of a convolution; a row of
   y per thread. */
static void fixup_launch(Emitter *e, const Node *n, const LtPlan *p, const Tensor *a,
                         const Tensor *za, const char *y) {
  Launch L = {.kernel = typed_kernel(e, "opc_int8_fixup", a->dtype)};
  int64_t none[8] = {0};
  L.rank = 1;
  L.dims[0] = p->images * p->rows;
  int64_t ys[8] = {p->cols};
  set_output(&L, y, ys);
  L.y_extent = L.dims[0] * p->cols;
  L.y_bytes = 4;
  set_input(&L, 0, p->acc, none);
  L.x_extent[0] = p->gm * p->gn;
  set_input(&L, 1, p->colsum, none);
  L.x_extent[1] = p->conv ? p->rows : p->cols;
  L.x_bytes[0] = L.x_bytes[1] = 4;
  if (za) {
    set_input(&L, 2, buf(e, za), none);
    L.x_extent[2] = 1;
    L.x_bytes[2] = 1;
  }
  L.i[0] = p->offset;
  L.i[1] = za != NULL;
  group_i(&L, 0, 2, "the activations' offset, their zero point given");
  L.i[2] = p->cols;
  L.i[3] = p->conv ? p->rows : 0;
  L.i[4] = p->gm;
  group_i(&L, 2, 3, "sums per row, channels per image (0: a matmul), D's ld");
  emit_launch(e, n, &L);
}

/* QLinearMatMul and QLinearConv with a constant zero point of the
   activations (or none) and bias (or none): the correction (offset - za)
   times the column sums plus the bias, one int32 per channel, folded now,
   so that opc_int8_requantize reads the GEMM's D directly. Wraps as int32. */
static void lt_fold_correction(Emitter *e, const Node *n, LtPlan *p, const Tensor *za,
                               const Tensor *bias) {
  const int64_t *colsum = p->colsum_data;
  if (!p->on || (za && !za->i64) || (bias && !bias->i64))
    return;
  int64_t channels = p->conv ? p->rows : p->cols;
  int64_t shift = p->offset - (za ? za->i64[0] : 0);
  int64_t *corr = arena_alloc(e->g->arena, sizeof(int64_t) * (size_t)channels);
  for (int64_t c = 0; c < channels; c++) {
    uint32_t v = (uint32_t)shift * (uint32_t)colsum[c] + (uint32_t)(bias ? bias->i64[c] : 0);
    corr[c] = (int32_t)v;
  }
  p->corr = weights_add_typed(e, emit_str(e, "%s_int8_corr", node_id(e, n)), DT_INT32, corr,
                              channels);
}

/* The activations a packed, and the GEMM into D. */
static void lt_gemm(Emitter *e, const Node *n, const LtPlan *p, const Tensor *a,
                    const Tensor *za) {
  if (p->conv || p->nhwc)
    im2row_launch(e, n, p, a, za);
  else
    pack_launch(e, n, p, a);
  const char *first = p->conv ? p->packed : p->w, *second = p->conv ? p->w : p->packed;
  emit_call(e, LIB_CUBLAS, n,
            "cublasLtMatmul(%s, %s, &(int32_t){1}, %s, %s, %s, %s, &(int32_t){0}, %s, %s, %s, "
            "%s, NULL, NULL, 0, %s)",
            p->handle, p->desc, first, p->al, second, p->bl, p->acc, p->dl, p->acc, p->dl,
            node_stream(e, n));
}

/* The sums into y (int32, the output's shape) through the GEMM. */
static void lt_run(Emitter *e, const Node *n, const LtPlan *p, const Tensor *a,
                   const Tensor *za, const char *y) {
  lt_gemm(e, n, p, a, za);
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
  lt_setup_matmul(e, n, p, n->in[0], n->in[1], node_input(n, 2), node_input(n, 3));
}

static void run_matmul_integer(Emitter *e, Node *n) {
  const LtPlan *p = node_data(e, n, sizeof *p);
  if (!row_major(n->out[0])) {
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
   launch's space is that output's rows in runs of 16, [N, M, H', W' / 16
   rounded up] (a 1-D convolution has H' = 1); x and w are read contiguous, as opc_conv_integer says. */
static void conv_sums(Emitter *e, const Node *n, const Tensor *x, const Tensor *w,
                      const Tensor *zx, const Tensor *zw, const char *y) {
  const Tensor *out = n->out[0];
  const Window *win = &n->win;
  bool flat = win->nspatial == 1; /* a 1-D convolution, as height 1 */
  Launch L = {.kernel = typed_kernel(e, "opc_conv_integer", x->dtype)};
  int64_t width = out->dims[out->rank - 1];
  L.rank = 4; /* a run of 16 outputs of a row per thread */
  L.dims[0] = out->dims[0];
  L.dims[1] = out->dims[1];
  L.dims[2] = flat ? 1 : out->dims[2];
  L.dims[3] = (width + 15) / 16;
  int64_t ys[8] = {L.dims[1] * L.dims[2] * width, L.dims[2] * width, width, 16};
  int64_t none[8] = {0};
  set_output(&L, y, ys);
  L.y_extent = L.dims[0] * L.dims[1] * L.dims[2] * width; /* each thread writes its run */
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
  L.i[0] = x->dims[1] / win->group;
  L.i[1] = out->dims[1] / win->group;
  window_args(&L.i[2], win, x);
  group_i(&L, 0, 12, "C/group, M/group, H, W, KH, KW, strides, dilations, leading pads");
  L.i[12] = (zx ? 1 : 0) | (zw ? 2 : 0) | (w->dtype == DT_INT8 ? 4 : 0);
  L.i[13] = zw && tensor_numel(zw) > 1;
  L.i[14] = width;
  group_i(&L, 12, 3, "zero points of x (1), of w (2), w signed (4); w's per channel; W'");
  emit_launch(e, n, &L);
}

static bool conv_operands_contiguous(Emitter *e, const Node *n, const Tensor *x,
                                     const Tensor *w) {
  if (row_major(x) && row_major(w) && row_major(n->out[0]))
    return true;
  return kernel_fail(e, n, "the integer convolutions read and write contiguous tensors only");
}

static void setup_conv_integer(Emitter *e, Node *n) {
  LtPlan *p = node_data(e, n, sizeof *p);
  lt_setup_conv(e, n, p, n->in[0], n->in[1], node_input(n, 2), node_input(n, 3));
}

static void run_conv_integer(Emitter *e, Node *n) {
  const LtPlan *p = node_data(e, n, sizeof *p);
  if (!conv_operands_contiguous(e, n, n->in[0], n->in[1]))
    return;
  if (p->on)
    lt_run(e, n, p, n->in[0], node_input(n, 2), buf(e, n->out[0]));
  else
    conv_sums(e, n, n->in[0], n->in[1], node_input(n, 2), node_input(n, 3), buf(e, n->out[0]));
}

/* ------------------------------------------- QLinearMatMul, QLinearConv */

/* The node's scratch: the int32 sums (the output's count), then the
   float32 multipliers (one per output channel), unless they were worked
   out at compile time (constant_multipliers). */
typedef struct QLinearScratch {
  const char *sums, *multipliers;
  bool multipliers_known; /* in the weights: no opc_requant_multiplier */
  int64_t channels; /* output channels: N of QLinearMatMul, M of QLinearConv */
  LtPlan lt;        /* QLinearMatMul's GEMM, when it takes one */
  const char *dw_filter, *dw_bias; /* a channels-last depthwise QLinearConv's */
  const char *packed_filter, *packed_corr; /* the CPU program's packed convolution's */
} QLinearScratch;

static int64_t output_channels(const Node *n) {
  const Tensor *y = n->out[0], *b = n->in[3];
  if (n->op == OP_QLINEAR_CONV)
    return y->dims[1];
  return b->rank >= 2 ? b->dims[b->rank - 1] : 1;
}

/* Whether a QLinearConv's x and y are stored channels-last (NHWC), as
   choose-layout's int8 form stores them; tensors the same in both orders
   are taken as ONNX's. */
static bool stored_channels_last(const Node *n) {
  const Tensor *x = n->in[0], *y = n->out[0];
  return x->rank == 4 && tensor_is_channels_last(x) && tensor_is_channels_last(y) &&
         !(row_major(x) && row_major(y));
}

/* A channels-last depthwise QLinearConv's constants for
   opc_qconv_depthwise_nhwc, in the layout its contract states: the filter
   less its zero point as bytes, by blocks of 64 channels and fours of taps,
   each channel's four taps in one int32 lane, lanes in the order that
   unpacking four taps' bytes of x gives (the sum's vector r, lane 4 L + k:
   channel 16 L + 4 r + k); and the bias less x's zero point (as an unsigned
   byte) times the sum of the channel's filter, which the padding's taps,
   read as that zero point, add back. */
static void depthwise_setup(Emitter *e, const Node *n, QLinearScratch *s) {
  const Tensor *w = n->in[3], *zw = n->in[5], *bias = node_input(n, 8);
  int64_t c = w->dims[0], taps = w->dims[2] * w->dims[3], fours = (taps + 3) / 4;
  int64_t blocks = (c + 63) / 64, bytes = blocks * fours * 256;
  int64_t zx = n->in[2]->i64[0] + (n->in[0]->dtype == DT_INT8 ? 128 : 0);
  int64_t *filter = arena_alloc(e->g->arena, sizeof(int64_t) * (size_t)bytes);
  int64_t *sums = arena_alloc(e->g->arena, sizeof(int64_t) * (size_t)c);
  memset(filter, 0, sizeof(int64_t) * (size_t)bytes);
  for (int64_t ch = 0; ch < c; ch++) {
    int64_t z = tensor_numel(zw) > 1 ? zw->i64[ch] : zw->i64[0], total = 0;
    int64_t in_block = ch % 64, r = in_block % 16 / 4;
    int64_t lane = in_block / 16 * 4 + in_block % 4;
    for (int64_t t = 0; t < taps; t++) {
      int64_t v = w->i64[ch * taps + t] - z;
      filter[((ch / 64 * fours + t / 4) * 4 + r) * 64 + lane * 4 + t % 4] = v;
      total += v;
    }
    sums[ch] = (int32_t)(uint32_t)((bias ? bias->i64[ch] : 0) - zx * total);
  }
  s->dw_filter = weights_add_typed(e, emit_str(e, "%s_dw_filter", node_id(e, n)), DT_INT8,
                                   filter, bytes);
  s->dw_bias = weights_add_typed(e, emit_str(e, "%s_dw_bias", node_id(e, n)), DT_INT32, sums, c);
}

/* The multipliers of scales that are all float32 constants, worked out now
   by the formula the kernel uses (opc_requant_scale_of, scalar.h), so no
   run computes them again; NULL where a scale is run-time data. */
static const char *constant_multipliers(Emitter *e, const Node *n, int64_t channels) {
  const Tensor *sa = n->in[1], *sb = n->in[4], *sy = n->in[6];
  if (!sa->f32 || !sb->f32 || !sy->f32 || sa->dtype != DT_FLOAT || sb->dtype != DT_FLOAT ||
      sy->dtype != DT_FLOAT)
    return NULL;
  float *m = arena_alloc(e->g->arena, sizeof(float) * (size_t)channels);
  bool per_channel = tensor_numel(sb) > 1;
  for (int64_t c = 0; c < channels; c++)
    m[c] = opc_requant_scale_of(sa->f32[0], sb->f32[per_channel ? c : 0], sy->f32[0]);
  return weights_add(e, emit_str(e, "%s_multipliers", node_id(e, n)), m, channels);
}

/* ------------------------------- the CPU program's int8 convolution */

/*
 * The CPU program (--target cpu) runs a channels-last QLinearConv that the
 * GPU program takes through cuBLASLt (opc_int8_im2row_nhwc, the GEMM and
 * opc_int8_requantize: three launches and scratch between them) as one
 * launch of opc_int8_conv_packed, whose filter is packed now in the order
 * its inner loop reads it: blocks of 16 output channels, each k/4 step of
 * a block 16 channels' 4 consecutive bytes (the operand of x86's VNNI dot
 * product, vpdpbusd). The kernel makes x uint8 by adding `add` (128 for
 * int8 x, else 0), so the int32 folded with the bias is -(za + add) times
 * the filter's column sums: the sums are the GEMM's integers, requantised
 * by the same formula, so y is the GPU program's bit for bit. The kernel's
 * contract is its comment in runtime/kernels/opc_kernels.inc.
 */

static int64_t round16(int64_t v) { return (v + 15) / 16 * 16; }

/* The int8 value the kernel adds to x: x + add is uint8. */
static int64_t packed_add(const Tensor *x) { return x->dtype == DT_INT8 ? 128 : 0; }

/* Whether the CPU program packs this node's filter: a node the GPU program
   would run on the GEMM with x and y channels-last (lt_setup_conv's tests),
   whose zero points and bias are constants, and whose packed filter
   indexes within int32. x may be in ONNX's order (the stem's few
   channels), its filter then packed in the order of x's rows (taps=1). */
static bool packed_conv_applies(Emitter *e, const Node *n) {
  const Tensor *x = n->in[0], *w = n->in[3], *zx = n->in[2], *zy = n->in[7];
  const Tensor *bias = node_input(n, 8);
  if (e->opt->target != TARGET_CPU || !e->opt->cpu_vnni || !lt_allowed(e, n, x, zx, true) ||
      n->win.group != 1 ||
      !row_major(w) || !conv_is_nhwc(n, x) || !qlinear_conv_takes_int8_gemm(n))
    return false;
  if (!zx->i64 || !zy->i64 || tensor_numel(zy) != 1 || (bias && !bias->i64))
    return false;
  return round16(w->dims[0]) * round4(tensor_numel(w) / w->dims[0]) < 0x7fffffff;
}

/* The byte of the packed filter (K' columns) that holds w'[r][k]: block
   r / 16, its step k / 4, channel r % 16 of the block, byte k % 4. */
static int64_t packed_index(int64_t r, int64_t k, int64_t k4) {
  return ((r / 16 * (k4 / 4) + k / 4) * 16 + r % 16) * 4 + k % 4;
}

/* The packed filter and the bias less (za + add) times its column sums,
   one int32 per channel to M16 (wrapping as the GEMM's correction does),
   into net.weights. False, setting nothing, where the node keeps the GPU
   program's path. */
static bool packed_setup(Emitter *e, const Node *n, QLinearScratch *s) {
  const Tensor *x = n->in[0], *w = n->in[3], *bias = node_input(n, 8);
  if (!packed_conv_applies(e, n))
    return false;
  int64_t m = w->dims[0], taps = tensor_is_channels_last(x) ? w->dims[2] * w->dims[3] : 1;
  LtPlan p = {.k = tensor_numel(w) / m};
  p.k4 = round4(p.k);
  if (!weight_values(e, &p, w, n->in[5], m, round16(m), p.k, 1, taps, packed_index))
    return false;
  uint32_t shift = (uint32_t)(n->in[2]->i64[0] + packed_add(x));
  int64_t *corr = arena_alloc(e->g->arena, sizeof(int64_t) * (size_t)round16(m));
  memset(corr, 0, sizeof(int64_t) * (size_t)round16(m));
  for (int64_t c = 0; c < m; c++)
    corr[c] = (int32_t)((uint32_t)(bias ? bias->i64[c] : 0) - shift * (uint32_t)p.colsum_data[c]);
  s->packed_filter = weights_add_typed(e, emit_str(e, "%s_packed_w", node_id(e, n)), DT_INT8,
                                       p.w_data, round16(m) * p.k4);
  s->packed_corr = weights_add_typed(e, emit_str(e, "%s_packed_corr", node_id(e, n)), DT_INT32,
                                     corr, round16(m));
  return true;
}

/* opc_int8_conv_packed: 12 output pixels by 64 channels per work item
   (launch [P / 12, M / 64], rounded up), requantised with the multipliers
   made before it. */
static void packed_launch(Emitter *e, const Node *n, const QLinearScratch *s) {
  const Tensor *x = n->in[0], *w = n->in[3], *y = n->out[0];
  int64_t m = y->dims[1], pixels = y->dims[2] * y->dims[3], count = y->dims[0] * pixels;
  int64_t k4 = round4(tensor_numel(w) / m), none[8] = {0};
  Launch L = {.kernel = typed_kernel(e, "opc_int8_conv_packed", x->dtype), .rank = 2};
  L.dims[0] = (count + 11) / 12;
  L.dims[1] = (m + 63) / 64;
  set_output(&L, buf(e, y), none);
  L.y_extent = count * m; /* each work item writes its pixels' channels */
  L.y_bytes = 1;
  set_input(&L, 0, buf(e, x), none);
  whole_input(&L, 0, x);
  set_input(&L, 1, s->packed_filter, none);
  L.x_extent[1] = round16(m) * k4;
  set_input(&L, 2, s->packed_corr, none);
  L.x_extent[2] = round16(m);
  set_input(&L, 3, s->multipliers, none);
  L.x_extent[3] = s->channels;
  L.x_bytes[0] = L.x_bytes[1] = 1;
  L.x_bytes[2] = 4;
  L.i[0] = x->dims[1];
  window_args(&L.i[1], &n->win, x);
  group_i(&L, 0, 11, "C, H, W, KH, KW, strides, dilations, leading pads");
  L.i[11] = y->dims[3];
  L.i[12] = pixels;
  L.i[13] = m;
  L.i[14] = n->in[2]->i64[0] + packed_add(x);
  L.i[15] = count;
  group_i(&L, 11, 5, "W', H' W', M, a padded tap's x + add, N H' W'");
  qlinear_bounds(n, &L.f[0], &L.f[1]);
  group_f(&L, 0, 2, "saturated to");
  L.f[2] = (float)n->in[7]->i64[0];
  L.f[3] = !tensor_is_channels_last(x);
  group_f(&L, 2, 2, "y's zero point, x in ONNX's order (0: channels-last)");
  emit_launch(e, n, &L);
}

static void setup_qlinear(Emitter *e, Node *n) {
  QLinearScratch *s = node_data(e, n, sizeof *s);
  s->channels = output_channels(n);
  if (n->op == OP_QLINEAR_CONV && stored_channels_last(n) && qlinear_conv_depthwise_folds(n))
    depthwise_setup(e, n, s);
  else if (n->op == OP_QLINEAR_MATMUL)
    lt_setup_matmul(e, n, &s->lt, n->in[0], n->in[3], n->in[2], n->in[5]);
  else if (!packed_setup(e, n, s)) /* the CPU program's form, else the GPU program's */
    lt_setup_conv(e, n, &s->lt, n->in[0], n->in[3], n->in[2], n->in[5]);
  lt_fold_correction(e, n, &s->lt, n->in[2], node_input(n, 8));
  /* The int32 sums, where a kernel writes them before opc_requantize. */
  int64_t count = s->lt.corr || s->dw_filter || s->packed_filter ? 0 : tensor_numel(n->out[0]);
  s->multipliers = constant_multipliers(e, n, s->channels);
  s->multipliers_known = s->multipliers != NULL;
  int64_t floats = s->multipliers_known ? 0 : s->channels;
  if (count + floats == 0)
    return;
  const char *field = emit_unique(e, emit_str(e, "%s_scratch", node_id(e, n)));
  emit_to(e, SEC_FIELDS, "int *%s; /* %s */", field,
          !count ? "float32 multipliers" : floats ? "int32 sums, then float32 multipliers" : "int32 sums");
  emit_call(e, LIB_CUDA, n, "cudaMalloc((void **)&c->%s, %lld * sizeof(int))", field,
            (long long)(count + floats));
  emit_to(e, SEC_TEARDOWN, "cudaFree(c->%s);", field);
  s->sums = emit_str(e, "c->%s", field);
  if (!s->multipliers_known)
    s->multipliers = emit_str(e, "(float *)(c->%s + %lld)", field, (long long)count);
}

/* One multiplier per output channel: opc_requant_scale_of of the first
   operand's scale, the second's (one, or that channel's) and y's. */
static void multiplier_launch(Emitter *e, const Node *n, const QLinearScratch *s) {
  const Tensor *sb = n->in[4];
  if (s->multipliers_known)
    return;
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
/* A convolution's output 64 values of a channel's row per thread: its sums
   and y are contiguous [N, C, spatial] (conv_operands_contiguous), the
   bias one per channel. */
static void requantize_rows_launch(Emitter *e, const Node *n, const QLinearScratch *s) {
  const Tensor *y = n->out[0], *bias = node_input(n, 8);
  int64_t rows = y->dims[0] * y->dims[1], len = tensor_numel(y) / rows;
  int64_t along_rows[8] = {len, 64}, none[8] = {0};
  Launch L = {.kernel = typed_kernel(e, op_kernel(e, n->op), y->dtype), .rank = 2};
  L.dims[0] = rows;
  L.dims[1] = (len + 63) / 64;
  set_output(&L, buf(e, y), along_rows);
  L.y_extent = rows * len; /* each thread writes 64 values of a row */
  set_input(&L, 0, s->sums, none);
  L.x_extent[0] = rows * len;
  set_input(&L, 1, s->multipliers, none);
  L.x_extent[1] = s->channels;
  set_input(&L, 2, buf(e, n->in[7]), none);
  L.x_extent[2] = 1;
  L.x_bytes[2] = L.y_bytes = 1;
  if (bias) {
    set_input(&L, 3, buf(e, bias), none);
    whole_input(&L, 3, bias);
  }
  L.i[0] = bias != NULL;
  L.i[1] = 1;
  L.i[2] = len;
  L.i[3] = y->dims[1];
  L.i[4] = s->channels > 1;
  group_i(&L, 0, 5, "bias in x[3], a row a thread, its length, channels, multipliers per channel");
  qlinear_bounds(n, &L.f[0], &L.f[1]); /* the type's range, or a fused clamp's */
  group_f(&L, 0, 2, "saturated to");
  emit_launch(e, n, &L);
}

static void requantize_launch(Emitter *e, const Node *n, const QLinearScratch *s) {
  const Tensor *y = n->out[0], *bias = node_input(n, 8);
  int axis = n->op == OP_QLINEAR_CONV ? 1 : y->rank - 1;
  bool per_channel = s->channels > 1 && y->rank > 0;
  if (n->op == OP_QLINEAR_CONV && y->rank >= 3 && tensor_numel(y) > 0 && !s->lt.nhwc) {
    requantize_rows_launch(e, n, s);
    return;
  }
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

/* opc_int8_requantize: y straight from the GEMM's D, the correction and
   bias folded (lt_fold_correction); a row of y per thread. */
static void lt_requantize_launch(Emitter *e, const Node *n, const QLinearScratch *s) {
  const LtPlan *p = &s->lt;
  const Tensor *y = n->out[0];
  Launch L = {.kernel = typed_kernel(e, "opc_int8_requantize", y->dtype)};
  int64_t none[8] = {0}, ys[8] = {p->cols};
  L.rank = 1;
  L.dims[0] = p->images * p->rows;
  set_output(&L, buf(e, y), ys);
  L.y_extent = L.dims[0] * p->cols;
  L.y_bytes = 1;
  set_input(&L, 0, p->acc, none);
  L.x_extent[0] = p->gm * p->gn;
  set_input(&L, 1, p->corr, none);
  L.x_extent[1] = s->channels;
  set_input(&L, 2, s->multipliers, none);
  L.x_extent[2] = s->channels;
  set_input(&L, 3, buf(e, n->in[7]), none);
  L.x_extent[3] = 1;
  L.x_bytes[0] = L.x_bytes[1] = 4;
  L.x_bytes[3] = 1;
  L.i[0] = p->cols;
  L.i[1] = p->conv ? p->rows : 0;
  L.i[2] = p->gm;
  L.i[3] = s->channels > 1;
  group_i(&L, 0, 4, "sums per row, channels per image (0: a matmul), D's ld, per channel");
  qlinear_bounds(n, &L.f[0], &L.f[1]);
  group_f(&L, 0, 2, "saturated to");
  emit_launch(e, n, &L);
}

/* opc_qconv_depthwise_nhwc: a row of output pixels by 64 channels per
   thread, requantised with the multipliers made just before. */
static void depthwise_launch(Emitter *e, const Node *n, const QLinearScratch *s) {
  const Tensor *x = n->in[0], *y = n->out[0];
  int64_t c = x->dims[1], none[8] = {0};
  int64_t taps = n->in[3]->dims[2] * n->in[3]->dims[3];
  Launch L = {.kernel = typed_kernel(e, "opc_qconv_depthwise_nhwc", x->dtype), .rank = 3};
  L.dims[0] = y->dims[0];
  L.dims[1] = y->dims[2];
  L.dims[2] = (c + 63) / 64;
  set_output(&L, buf(e, y), none);
  L.y_extent = tensor_numel(y); /* each thread writes its rows */
  L.y_bytes = 1;
  set_input(&L, 0, buf(e, x), none);
  whole_input(&L, 0, x);
  L.x_bytes[0] = 1;
  set_input(&L, 1, s->dw_filter, none);
  L.x_extent[1] = (c + 63) / 64 * ((taps + 3) / 4) * 256;
  L.x_bytes[1] = 1;
  set_input(&L, 2, s->multipliers, none);
  L.x_extent[2] = c;
  set_input(&L, 3, s->dw_bias, none);
  L.x_extent[3] = c;
  L.i[0] = c;
  window_args(&L.i[1], &n->win, x);
  group_i(&L, 0, 11, "C, H, W, KH, KW, strides, dilations, leading pads");
  L.i[11] = y->dims[3];
  L.i[12] = n->in[2]->i64[0];
  L.i[13] = n->in[7]->i64[0];
  group_i(&L, 11, 3, "W', x's and y's zero points");
  qlinear_bounds(n, &L.f[0], &L.f[1]);
  group_f(&L, 0, 2, "saturated to");
  emit_launch(e, n, &L);
}

static void run_qlinear(Emitter *e, Node *n) {
  const QLinearScratch *s = node_data(e, n, sizeof *s);
  const Tensor *a = n->in[0], *b = n->in[3], *za = n->in[2], *zb = n->in[5];
  if (s->dw_filter || s->packed_filter) { /* channels-last: one kernel, requantising */
    multiplier_launch(e, n, s);
    if (s->dw_filter)
      depthwise_launch(e, n, s);
    else
      packed_launch(e, n, s);
    return;
  }
  if (s->lt.corr) { /* the GEMM and one epilogue: no int32 sums in between */
    if (s->lt.conv && !conv_operands_contiguous(e, n, a, b))
      return;
    lt_gemm(e, n, &s->lt, a, za);
    multiplier_launch(e, n, s);
    lt_requantize_launch(e, n, s);
    return;
  }
  if (n->op == OP_QLINEAR_CONV) {
    if (stored_channels_last(n) && !s->lt.on) { /* choose-layout chose neither kernel */
      kernel_fail(e, n, "a channels-last QLinearConv takes cuBLASLt's int8 GEMM or the "
                        "depthwise kernel only");
      return;
    }
    if (!s->lt.nhwc && !conv_operands_contiguous(e, n, a, b))
      return;
    if (s->lt.on)
      lt_run(e, n, &s->lt, a, za, s->sums);
    else
      conv_sums(e, n, a, b, za, zb, s->sums);
  } else {
    if (!row_major(n->out[0])) {
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

/* ------------------------------------------------------- QuantizedAdd */

/* One pass over y's elements, a and b read at their own strides (one
   layout: T_SAME_LAYOUT); the scales and zero points are constants
   (fuse-qdq made the node only then). */
static void run_quantized_add(Emitter *e, Node *n) {
  const Tensor *xa = n->in[0], *xb = n->in[3], *y = n->out[0];
  Launch L = {.kernel = typed_kernel(e, op_kernel(e, n->op), y->dtype), .rank = y->rank};
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  int64_t s[IR_MAX_RANK];
  strides_of(y, s);
  set_output(&L, buf(e, y), s);
  strides_of(xa, s);
  set_input(&L, 0, buf(e, xa), s);
  strides_of(xb, s);
  set_input(&L, 1, buf(e, xb), s);
  L.x_bytes[0] = L.x_bytes[1] = L.y_bytes = 1;
  collapse(&L);
  const int zero_points[3] = {2, 5, 7}; /* a's, b's and y's inputs */
  for (int k = 0; k < 3; k++)
    L.i[k] = n->in[zero_points[k]]->i64[0];
  group_i(&L, 0, 3, "zero points of a, b and y");
  qlinear_bounds(n, &L.f[0], &L.f[1]);
  group_f(&L, 0, 2, "saturated to");
  L.f[2] = n->in[1]->f32[0];
  L.f[3] = n->in[4]->f32[0];
  L.f[4] = n->in[6]->f32[0];
  group_f(&L, 2, 3, "scales of a, b and y");
  emit_launch(e, n, &L);
}

/* ---------------------------------------------------- QuantizedLookup */

/* One pass over y's elements, x read at its strides, the table (256
   bytes) into net.weights. */
static void run_quantized_lookup(Emitter *e, Node *n) {
  const Tensor *x = n->in[0], *table = n->in[1], *y = n->out[0];
  Launch L = {.kernel = typed_kernel(e, op_kernel(e, n->op), x->dtype)};
  launch_over(e, &L, y, x);
  int64_t none[IR_MAX_RANK] = {0};
  set_input(&L, 1, weights_add_typed(e, emit_str(e, "%s_table", node_id(e, n)), table->dtype,
                                     table->i64, 256), none);
  L.x_bytes[0] = L.x_bytes[1] = L.y_bytes = 1;
  collapse(&L);
  L.x_extent[1] = 256;
  emit_launch(e, n, &L);
}

const OpEmitter kernel_quantized_add = {.run = run_quantized_add};
const OpEmitter kernel_quantized_lookup = {.run = run_quantized_lookup};
const OpEmitter kernel_matmul_integer = {.setup = setup_matmul_integer, .run = run_matmul_integer};
const OpEmitter kernel_conv_integer = {.setup = setup_conv_integer, .run = run_conv_integer};
const OpEmitter kernel_qlinear = {.setup = setup_qlinear, .run = run_qlinear};
