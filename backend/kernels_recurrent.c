/*
 * kernels_recurrent.c - LSTM, GRU and RNN as launches of opc's kernels and
 * cuBLAS products.
 *
 * The input's part of every gate at every step, the work that does not
 * wait on the state, is one cuBLAS product for all steps (and both
 * directions) over the biases opc_rnn_bias writes first; opc_rnn_init sets
 * the state before the first step; then one launch of opc_rnn_steps runs
 * every step of every direction, a block of threads per (direction, batch
 * entry) carrying its state from step to step; opc_rnn_output writes Y, Y_h
 * and Y_c from the states. The CPU target stores a constant R column by
 * column (pack_columns), which the CPU's steps read in vector lanes. Everything between lives in the node's scratch,
 * laid out as opc_kernels.inc's recurrent section says: per direction, the
 * gates' input parts G [seq][batch][gates * hidden], then the states S [seq
 * + 1][batch][2 * hidden], then the steps' work area. Since a step reads
 * the state slot before it and writes the one after, the state needs no
 * double buffer of its own.
 */
#include <string.h>

#include "emit.h"
#include "scalar.h"

/* Floats of one direction's G and S. */
static int64_t rnn_gate_floats(const Node *n) {
  return n->p.rnn.seq * n->p.rnn.batch * n->p.rnn.gates * n->p.rnn.hidden;
}

static int64_t rnn_slot_floats(const Node *n) { return n->p.rnn.batch * 2 * n->p.rnn.hidden; }

/* opc_rnn_steps's work area: per batch entry, the gates and one vector. */
static int64_t rnn_work_floats(const Node *n) {
  return n->p.rnn.batch * (n->p.rnn.gates + 1) * n->p.rnn.hidden;
}

static int64_t rnn_direction_floats(const Node *n) {
  return rnn_gate_floats(n) + (n->p.rnn.seq + 1) * rnn_slot_floats(n) + rnn_work_floats(n);
}

/* What setup gives run: the scratch, and R as the CPU target stores it, or
   NULL. */
typedef struct Recurrent {
  const char *scratch, *columns;
} Recurrent;

/* Floats from one column of R to the next as the CPU target stores it:
   its rows and 16 more, so that a block of rows read down the columns
   does not map every column to one set of the L1 cache (a multiple of
   4 KiB apart would). */
static int64_t column_stride(const Node *n) { return n->p.rnn.gates * n->p.rnn.hidden + 16; }

/* R [dirs, gates * hidden, hidden] stored with its rows innermost,
   [dirs][hidden][column_stride], in net.weights, when the program is the
   CPU target's and R a float constant: then opc_rnn_steps takes each
   step's products a column of R at a time, in vector lanes along the
   rows (opc_rnn_products), rather than a dot product per row. */
static const char *pack_columns(Emitter *e, const Node *n) {
  const Tensor *r = n->in[2];
  if (e->opt->target != TARGET_CPU || r->dtype != DT_FLOAT || !r->f32)
    return NULL;
  int64_t dirs = r->dims[0], rows = r->dims[1], hidden = r->dims[2], ld = column_stride(n);
  int64_t count = dirs * hidden * ld;
  float *packed = arena_alloc(e->g->arena, sizeof(float) * (size_t)count);
  memset(packed, 0, sizeof(float) * (size_t)count);
  for (int64_t d = 0; d < dirs; d++)
    for (int64_t row = 0; row < rows; row++)
      for (int64_t k = 0; k < hidden; k++)
        packed[(d * hidden + k) * ld + row] = r->f32[(d * rows + row) * hidden + k];
  return weights_add_typed(e, emit_str(e, "%s_r_columns", node_id(e, n)), DT_FLOAT, packed, count);
}

static void setup_recurrent(Emitter *e, Node *n) {
  Recurrent *p = node_data(e, n, sizeof *p);
  const char *field = emit_unique(e, emit_str(e, "%s_scratch", node_id(e, n)));
  emit_to(e, SEC_FIELDS,
          "float *%s; /* per direction: the gates' input parts, the states, the steps' work */",
          field);
  emit_call(e, LIB_CUDA, n, "cudaMalloc((void **)&c->%s, %lld * sizeof(float))", field,
            (long long)(n->p.rnn.ndirections * rnn_direction_floats(n)));
  emit_to(e, SEC_TEARDOWN, "cudaFree(c->%s);", field);
  p->scratch = emit_str(e, "c->%s", field);
  p->columns = pack_columns(e, n);
}

/* Input k's element strides into s; returns its extent in elements. */
static int64_t input_strides(const Node *n, int k, int64_t *s) {
  const Tensor *t = node_input(n, k);
  strides_of(t, s);
  return reach(t->rank, t->dims, s, &(int64_t){0});
}

/* Where direction d's block of input k (W, R, B, P, or a state) starts,
   as a pointer expression, and its extent from there; NULL when absent.
   The states are split along their direction axis (0, or 1 under layout
   1), the others along axis 0. */
static const char *direction_block(Emitter *e, const Node *n, int k, int d, int64_t *s,
                                   int64_t *extent) {
  const Tensor *t = node_input(n, k);
  if (!t) {
    *extent = 0;
    return NULL;
  }
  int64_t whole = input_strides(n, k, s);
  int axis = (k == 5 || k == 6) && n->p.rnn.batch_major ? 1 : 0;
  int64_t start = d * s[axis];
  *extent = whole - start;
  return offset_ptr(e, buf(e, t), start);
}

_Static_assert(OPC_RNN_TANH == 1 && OPC_RNN_SIGMOID == 2, "opc_rnn_apply's codes");

/* Whether directions 0 and 1 have the same activations, so that one
   launch of opc_rnn_steps can take both. */
static bool same_activations(const Node *n) {
  for (int a = 0; a < n->p.rnn.nacts; a++)
    if (n->p.rnn.act[0][a] != n->p.rnn.act[1][a] || n->p.rnn.alpha[0][a] != n->p.rnn.alpha[1][a] ||
        n->p.rnn.beta[0][a] != n->p.rnn.beta[1][a])
      return false;
  return true;
}

/* Every step of directions [d, d + dirs) in one launch (opc_kernels.inc
   lists its arguments): a block per (direction, batch entry). */
static void rnn_steps_launch(Emitter *e, const Node *n, int d, int dirs, const Recurrent *p) {
  int64_t s[IR_MAX_RANK], extent;
  Launch L = {.kernel = "opc_rnn_steps", .rank = 1};
  L.dims[0] = dirs * n->p.rnn.batch * KERNEL_BLOCK_THREADS;
  L.n = L.dims[0];
  L.y = offset_ptr(e, p->scratch, d * rnn_direction_floats(n));
  L.y_extent = dirs * rnn_direction_floats(n);
  if (p->columns) {
    int64_t block = column_stride(n) * n->p.rnn.hidden;
    L.x[1] = offset_ptr(e, p->columns, d * block);
    L.x_extent[1] = (n->p.rnn.ndirections - d) * block;
    L.i[6] = 1;
    L.i[7] = column_stride(n);
    L.i[13] = block;
  } else {
    L.x[1] = direction_block(e, n, 2, d, s, &extent);
    L.x_extent[1] = extent;
    L.i[6] = s[1];
    L.i[7] = s[2];
    L.i[13] = s[0];
  }
  int k = n->op == OP_LSTM ? 7 : n->op == OP_GRU ? 3 : -1;
  L.x[2] = k >= 0 ? direction_block(e, n, k, d, s, &extent) : NULL;
  L.x_extent[2] = L.x[2] ? extent : 0;
  L.i[11] = L.x[2] ? s[1] : 0;
  L.i[14] = L.x[2] ? s[0] : 0;
  const Tensor *lens = node_input(n, 4);
  L.x[3] = lens ? buf(e, lens) : NULL;
  L.x_extent[3] = lens ? n->p.rnn.batch : 0;
  L.x_bytes[3] = 4;
  L.nx = 4;
  L.i[0] = n->op == OP_LSTM ? 2 : n->op == OP_GRU ? 1 : 0;
  L.i[1] = n->p.rnn.hidden;
  L.i[2] = n->p.rnn.batch;
  L.i[3] = n->p.rnn.seq;
  L.i[4] = dirs;
  L.i[5] = n->p.rnn.direction == RNN_REVERSE || d == 1;
  for (int a = 0; a < 3; a++) {
    L.i[8 + a] = a < n->p.rnn.nacts ? n->p.rnn.act[d][a] : 0;
    L.f[a] = a < n->p.rnn.nacts ? n->p.rnn.alpha[d][a] : 0;
    L.f[3 + a] = a < n->p.rnn.nacts ? n->p.rnn.beta[d][a] : 0;
  }
  L.f[6] = n->p.rnn.clip;
  L.i[12] = n->op == OP_LSTM ? n->p.rnn.input_forget : n->p.rnn.linear_before_reset;
  L.i[15] = rnn_direction_floats(n);
  group_i(&L, 0, 4, "kind (0 RNN, 1 GRU, 2 LSTM), hidden, batch, seq");
  group_i(&L, 4, 2, "directions, whether the first runs backwards");
  group_i(&L, 6, 2, "R's strides");
  group_i(&L, 8, 3, "activations f g h (OPC_RNN_*)");
  group_i(&L, 11, 1, n->op == OP_LSTM ? "P's stride" : "B's stride");
  group_i(&L, 12, 1, n->op == OP_LSTM ? "input_forget" : "linear_before_reset");
  group_i(&L, 13, 2, n->op == OP_LSTM ? "R's and P's direction strides" : "R's and B's direction strides");
  group_i(&L, 15, 1, "scratch floats per direction");
  group_f(&L, 0, 3, "alphas");
  group_f(&L, 3, 3, "betas");
  group_f(&L, 6, 1, "clip (0: none)");
  L.note = emit_str(e, "every step; x = {-, R, %s, sequence_lens}", n->op == OP_LSTM ? "P" : "B");
  emit_launch(e, n, &L);
}

/* Direction d's input parts of the gates, G. */
static void rnn_input_launch(Emitter *e, const Node *n, int d, const char *scratch) {
  const Tensor *x = n->in[0];
  int64_t xs[IR_MAX_RANK], ws[IR_MAX_RANK], bs[IR_MAX_RANK], extent;
  int64_t rows = n->p.rnn.gates * n->p.rnn.hidden;
  bool bm = n->p.rnn.batch_major;
  Launch L = {.kernel = "opc_rnn_input", .rank = 3,
              .dims = {n->p.rnn.seq, n->p.rnn.batch, rows}};
  L.n = L.dims[0] * L.dims[1] * L.dims[2];
  int64_t ys[3] = {n->p.rnn.batch * rows, rows, 1};
  set_output(&L, offset_ptr(e, scratch, d * rnn_direction_floats(n)), ys);
  L.y_extent = rnn_gate_floats(n);
  L.x_extent[0] = input_strides(n, 0, xs);
  set_input(&L, 0, buf(e, x), (int64_t[]){xs[bm ? 1 : 0], xs[bm ? 0 : 1], 0});
  const char *w = direction_block(e, n, 1, d, ws, &extent);
  set_input(&L, 1, w, (int64_t[]){0, 0, ws[1]});
  L.x_extent[1] = extent;
  const char *b = direction_block(e, n, 3, d, bs, &extent);
  set_input(&L, 2, b, (int64_t[]){0, 0, 0});
  L.x_extent[2] = extent;
  L.nx = 3;
  L.i[0] = n->p.rnn.input;
  L.i[1] = xs[2];
  L.i[2] = ws[2];
  L.i[3] = b ? bs[1] : 0;
  L.i[4] = rows;
  L.i[5] = n->op == OP_GRU && n->p.rnn.linear_before_reset;
  L.i[6] = 2 * n->p.rnn.hidden;
  group_i(&L, 0, 3, "input size, X's and W's strides along it");
  group_i(&L, 3, 2, "B's stride, where Rb starts");
  group_i(&L, 5, 2, "whether Rb is left out from row i[6] on");
  L.note = "x = {X, W, B}: the input's part of every gate at every step";
  emit_launch(e, n, &L);
}

/* Direction d's G set to the biases, before a cuBLAS product adds X W^T. */
static void rnn_bias_launch(Emitter *e, const Node *n, int d, const char *scratch) {
  int64_t bs[IR_MAX_RANK], extent, rows = n->p.rnn.gates * n->p.rnn.hidden;
  Launch L = {.kernel = "opc_rnn_bias", .rank = 2,
              .dims = {n->p.rnn.seq * n->p.rnn.batch, rows}};
  L.n = L.dims[0] * rows;
  set_output(&L, offset_ptr(e, scratch, d * rnn_direction_floats(n)), (int64_t[]){rows, 1});
  L.y_extent = rnn_gate_floats(n);
  set_input(&L, 0, direction_block(e, n, 3, d, bs, &extent), (int64_t[]){0, 0});
  L.x_extent[0] = extent;
  L.nx = 1;
  L.i[0] = bs[1];
  L.i[1] = rows;
  L.i[2] = n->op == OP_GRU && n->p.rnn.linear_before_reset;
  L.i[3] = 2 * n->p.rnn.hidden;
  group_i(&L, 0, 2, "B's stride, where Rb starts");
  group_i(&L, 2, 2, "whether Rb is left out from row i[3] on");
  L.note = "x = {B}: the biases, to which cuBLAS adds X W^T";
  emit_launch(e, n, &L);
}

/*
 * The input's part of the gates, X W^T, for every step (and both
 * directions) at once as cuBLAS products: G[t][b] of direction d is the
 * column-major product W_d^T X[t, b] into the G rows of the scratch, with
 * beta 1 over the biases opc_rnn_bias wrote there first (beta 0 when the
 * node has none). The (t, b) rows of X fold into one matrix when they are
 * one stride apart in G's order, t outer: then one strided-batched call
 * covers both directions (stride 0 over X); otherwise each direction is a
 * batch over its batch entries. False when W's or X's rows are not unit
 * stride, or nothing is to be computed: the kernel does it all then.
 */
typedef struct InputGemm {
  int64_t n, lda, ldb, ldc, stride_a, stride_b, stride_c, batch;
} InputGemm;

static bool plan_input_gemm(const Node *n, const int64_t *xs, const int64_t *ws, bool fold,
                            InputGemm *g) {
  int64_t seq = n->p.rnn.seq, batch = n->p.rnn.batch, input = n->p.rnn.input;
  int64_t rows = n->p.rnn.gates * n->p.rnn.hidden;
  bool bm = n->p.rnn.batch_major;
  int64_t ts = xs[bm ? 1 : 0], bs = xs[bm ? 0 : 1];
  if (seq <= 0 || batch <= 0 || input <= 0 || xs[2] != 1 || ws[2] != 1 || ws[1] < input)
    return false;
  if (fold) {
    int64_t ld = seq * batch == 1 ? input : batch == 1 ? ts : (seq == 1 || ts == batch * bs) ? bs : 0;
    if (ld < input)
      return false;
    *g = (InputGemm){.n = seq * batch, .lda = ws[1], .ldb = ld, .ldc = rows, .stride_a = ws[0],
                     .stride_c = rnn_direction_floats(n), .batch = n->p.rnn.ndirections};
    return true;
  }
  int64_t ld = seq == 1 ? input : ts;
  if (ld < input)
    return false;
  *g = (InputGemm){.n = seq, .lda = ws[1], .ldb = ld, .ldc = batch * rows, .stride_b = bs, .stride_c = rows,
                   .batch = batch};
  return true;
}

/* One planned product into G from W's block w and X's x. */
static void emit_input_gemm(Emitter *e, const Node *n, const InputGemm *g, const char *w,
                            const char *x, const char *out, float beta) {
  int64_t rows = n->p.rnn.gates * n->p.rnn.hidden, lda = g->lda;
  const char *h = node_cublas(e, n), *one = emit_scalar(e, 1), *b = emit_scalar(e, beta);
  const char *ops = emit_str(e, "%s, CUBLAS_OP_T, CUBLAS_OP_N, %lld, %lld, %lld", h,
                             (long long)rows, (long long)g->n, (long long)n->p.rnn.input);
  if (g->batch == 1)
    emit_call(e, LIB_CUBLAS, n, "cublasSgemm(%s, %s, %s, %lld, %s, %lld, %s, %s, %lld)", ops, one,
              w, (long long)lda, x, (long long)g->ldb, b, out, (long long)g->ldc);
  else
    emit_call(e, LIB_CUBLAS, n,
              "cublasSgemmStridedBatched(%s, %s, %s, %lld, %lld, %s, %lld, %lld, %s, %s, %lld, "
              "%lld, %lld)",
              ops, one, w, (long long)lda, (long long)g->stride_a, x, (long long)g->ldb,
              (long long)g->stride_b, b, out, (long long)g->ldc, (long long)g->stride_c,
              (long long)g->batch);
}

/* Every direction's G: by cuBLAS where it can, over the biases
   opc_rnn_bias wrote, else by opc_rnn_input alone. */
static void rnn_input(Emitter *e, const Node *n, const char *scratch) {
  int64_t xs[IR_MAX_RANK], ws[IR_MAX_RANK];
  input_strides(n, 0, xs);
  input_strides(n, 1, ws);
  InputGemm g;
  bool fold = plan_input_gemm(n, xs, ws, true, &g);
  if (!fold && !plan_input_gemm(n, xs, ws, false, &g)) {
    for (int d = 0; d < n->p.rnn.ndirections; d++)
      rnn_input_launch(e, n, d, scratch);
    return;
  }
  bool bias = node_input(n, 3) != NULL;
  for (int d = 0; bias && d < n->p.rnn.ndirections; d++)
    rnn_bias_launch(e, n, d, scratch);
  const char *x = buf(e, n->in[0]), *w = buf(e, n->in[1]);
  if (fold) {
    emit_input_gemm(e, n, &g, w, x, scratch, bias);
    return;
  }
  for (int d = 0; d < n->p.rnn.ndirections; d++)
    emit_input_gemm(e, n, &g, offset_ptr(e, w, d * ws[0]), x,
                    offset_ptr(e, scratch, d * rnn_direction_floats(n)), bias);
}

/* Direction d's state before its first step. */
static void rnn_init_launch(Emitter *e, const Node *n, int d, const char *scratch) {
  int64_t hidden = n->p.rnn.hidden, s[IR_MAX_RANK], extent;
  bool bm = n->p.rnn.batch_major;
  Launch L = {.kernel = "opc_rnn_init", .rank = 2, .dims = {n->p.rnn.batch, hidden}};
  L.n = L.dims[0] * hidden;
  set_output(&L, offset_ptr(e, scratch, d * rnn_direction_floats(n) + rnn_gate_floats(n)),
             (int64_t[]){2 * hidden, 1});
  L.y_extent = rnn_slot_floats(n);
  for (int k = 0; k < 2; k++) {
    const char *p = direction_block(e, n, 5 + k, d, s, &extent);
    set_input(&L, k, p, (int64_t[]){p ? s[bm ? 0 : 1] : 0, p ? s[2] : 0});
    L.x_extent[k] = extent;
  }
  L.nx = 2;
  L.i[0] = hidden;
  group_i(&L, 0, 1, "hidden: where c starts");
  L.note = "x = {initial_h, initial_c}";
  emit_launch(e, n, &L);
}

/* Output k (Y, Y_h, Y_c) of direction d from its states. */
static void rnn_output_launch(Emitter *e, const Node *n, int k, int d, const char *scratch) {
  Tensor *y = n->out[k];
  int64_t ys[IR_MAX_RANK];
  strides_of(y, ys);
  bool bm = n->p.rnn.batch_major, reverse = n->p.rnn.direction == RNN_REVERSE || d == 1;
  Launch L = {.kernel = "opc_rnn_output", .rank = 3,
              .dims = {k == 0 ? n->p.rnn.seq : 1, n->p.rnn.batch, n->p.rnn.hidden}};
  L.n = L.dims[0] * L.dims[1] * L.dims[2];
  int64_t start, strides[3];
  if (k == 0) {
    /* Y [seq, dirs, batch, h], or [batch, seq, dirs, h] */
    strides[0] = ys[bm ? 1 : 0], strides[1] = ys[bm ? 0 : 2], strides[2] = ys[3];
    start = d * ys[bm ? 2 : 1];
  } else {
    /* Y_h, Y_c [dirs, batch, h], or [batch, dirs, h] */
    strides[0] = 0, strides[1] = ys[bm ? 0 : 1], strides[2] = ys[2];
    start = d * ys[bm ? 1 : 0];
  }
  int64_t whole = reach(y->rank, y->dims, ys, &(int64_t){0});
  set_output(&L, offset_ptr(e, buf(e, y), start), strides);
  L.y_extent = whole - start;
  int64_t none[3] = {0};
  set_input(&L, 0, offset_ptr(e, scratch, d * rnn_direction_floats(n) + rnn_gate_floats(n)), none);
  L.x_extent[0] = (n->p.rnn.seq + 1) * rnn_slot_floats(n);
  const Tensor *lens = node_input(n, 4);
  set_input(&L, 1, lens ? buf(e, lens) : NULL, none);
  L.x_extent[1] = lens ? n->p.rnn.batch : 0;
  L.x_bytes[1] = 4;
  L.nx = 2;
  L.i[0] = n->p.rnn.hidden;
  L.i[1] = n->p.rnn.seq;
  L.i[2] = reverse;
  L.i[3] = k == 2;
  L.i[4] = k > 0;
  group_i(&L, 0, 5, "hidden, seq, backwards, the part (0 h, 1 c), whether the last state");
  L.note = k == 0 ? "Y; x = {states, sequence_lens}" : k == 1 ? "Y_h; x = {states, sequence_lens}"
                                                          : "Y_c; x = {states, sequence_lens}";
  emit_launch(e, n, &L);
}

static void run_recurrent(Emitter *e, Node *n) {
  const Recurrent *p = node_data(e, n, sizeof *p);
  int dirs = n->p.rnn.ndirections;
  rnn_input(e, n, p->scratch);
  for (int d = 0; d < dirs; d++)
    rnn_init_launch(e, n, d, p->scratch);
  if (n->p.rnn.seq > 0 && n->p.rnn.batch > 0) {
    if (dirs == 1 || same_activations(n))
      rnn_steps_launch(e, n, 0, dirs, p);
    else
      for (int d = 0; d < dirs; d++)
        rnn_steps_launch(e, n, d, 1, p);
  }
  for (int d = 0; d < dirs; d++)
    for (int k = 0; k < n->nout && k < 3; k++)
      if (n->out[k] && tensor_needed(n->out[k]))
        rnn_output_launch(e, n, k, d, p->scratch);
}

const OpEmitter kernel_recurrent = {.setup = setup_recurrent, .run = run_recurrent};
