/*
 * kernels_index.c - indexing and selection as launches of opc's kernels:
 * GatherND, ScatterND, ScatterElements and Scatter, ArgMax and ArgMin,
 * TopK. Their indices are run-time values (int64 or int32); their output
 * shapes depend on shapes only, never on the values.
 */
#include <string.h>

#include "emit.h"

/* The most dims one index tuple of GatherND or ScatterND may address: the
   kernels get their sizes and strides in i[6..11) and i[11..16). */
enum { MAX_TUPLE = 5 };

static int64_t count_of(int rank, const int64_t *dims) {
  int64_t count = 1;
  for (int d = 0; d < rank; d++)
    count *= dims[d];
  return count;
}

/* The stride that steps through dims [first, first + count) of a tensor
   as one merged dim, or -1 when they do not merge. */
static int64_t merged_stride(const Tensor *t, const int64_t *s, int first, int count) {
  if (count == 0)
    return 0;
  for (int j = first + count - 1; j > first; j--)
    if (t->dims[j - 1] > 1 && s[j - 1] != s[j] * t->dims[j])
      return -1;
  return s[first + count - 1];
}

/* The indices of GatherND and ScatterND: contiguous, tuples of at most
   MAX_TUPLE values. */
static bool tuples_ok(Emitter *e, const Node *n, const Tensor *idx) {
  if (idx->dims[idx->rank - 1] > MAX_TUPLE)
    return kernel_fail(e, n, emit_str(e, "%s with index tuples of more than %d values is not "
                                          "supported", op_info(n->op)->name, MAX_TUPLE));
  if (!row_major(idx))
    return kernel_fail(e, n, emit_str(e, "%s's indices must be contiguous",
                                      op_info(n->op)->name));
  return true;
}

/* i[6..11) and i[11..16): sizes and strides of dims [first, first + k) of
   a tensor, those one index tuple addresses. */
static void tuple_dims(Launch *L, const Tensor *t, const int64_t *s, int first, int k) {
  for (int j = 0; j < k; j++) {
    L->i[6 + j] = t->dims[first + j];
    L->i[11 + j] = s[first + j];
  }
  group_i(L, 6, k, "sizes of the dims a tuple addresses");
  group_i(L, 11, k, "their strides");
}

/* ------------------------------------------------------------- GatherND */

/* Dims: the batch dims, the tuples of a batch merged into one dim, then
   the slice a tuple picks. */
static void run_gather_nd(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *idx = n->in[1], *y = n->out[0];
  if (!tuples_ok(e, n, idx))
    return;
  int b = n->p.gather_nd.batch_dims, k = (int)idx->dims[idx->rank - 1];
  int tuple_dims_count = idx->rank - 1 - b;
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], xst[IR_MAX_RANK] = {0}, yst[IR_MAX_RANK] = {0};
  strides_of(x, xs);
  strides_of(y, ys);
  int64_t tuple_stride = merged_stride(y, ys, b, tuple_dims_count);
  if (tuple_stride < 0) {
    kernel_fail(e, n, "GatherND into a strided view of this shape is not supported");
    return;
  }
  Launch L = {.kernel = sized_kernel(e, "opc_gather_nd", x->dtype)};
  int r = 0;
  for (int d = 0; d < b; d++, r++) {
    L.dims[r] = x->dims[d];
    xst[r] = xs[d];
    yst[r] = ys[d];
  }
  L.dims[r] = count_of(tuple_dims_count, idx->dims + b);
  yst[r++] = tuple_stride;
  for (int d = b + k; d < x->rank; d++, r++) {
    L.dims[r] = x->dims[d];
    xst[r] = xs[d];
    yst[r] = ys[idx->rank - 1 + d - b - k];
  }
  L.rank = r;
  set_output(&L, buf(e, y), yst);
  set_input(&L, 0, buf(e, x), xst);
  L.x_extent[0] = reach(x->rank, x->dims, xs, &(int64_t){0});
  int64_t unit[IR_MAX_RANK] = {0};
  set_input(&L, 1, buf(e, idx), unit);
  L.x_extent[1] = tensor_numel(idx);
  L.i[0] = b;
  L.i[1] = k;
  L.i[2] = index_kind(idx);
  group_i(&L, 0, 3, "batch dims, values per tuple, the indices' kind");
  tuple_dims(&L, x, xs, b, k);
  set_element_type(&L, x->dtype);
  L.x_bytes[1] = (int)L.i[2];
  L.note = "x = {data, indices}";
  emit_launch(e, n, &L);
}

/* -------------------------------------------------------------- scatters */

/* The instance of a scatter kernel for a type: float16 and bool take
   reduction none only, which moves bits (b2) or bytes (u8). */
static const char *scatter_kernel(Emitter *e, const Node *n, const char *base, DType type) {
  ScatterReduction r = n->p.scatter.reduction;
  if ((type == DT_FLOAT16 || type == DT_BOOL) && r != SCATTER_NONE) {
    kernel_fail(e, n, emit_str(e, "%s with a reduction runs on f32, f64, i64, i32, i8 and u8 "
                                  "only, not %s", op_info(n->op)->name, dtype_name(type)));
    return NULL;
  }
  if (type == DT_FLOAT16)
    return emit_str(e, "%s_b2", base);
  return typed_kernel(e, base, type == DT_BOOL ? DT_UINT8 : type);
}

/* The scatters start from a copy of the data in the output. */
static void copy_data(Emitter *e, const Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  emit_kernel_copy(e, n, buf(e, y), ys, buf(e, x), xs, x->rank, x->dims);
}

/* The end of every scatter: types, reduction, the launch. */
static void launch_scatter(Emitter *e, const Node *n, Launch *L) {
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  L->i[1] = index_kind(n->in[1]);
  L->i[2] = n->p.scatter.reduction;
  set_element_type(L, n->out[0]->dtype);
  L->x_bytes[1] = (int)L->i[1];
  L->note = emit_str(e, "x = {updates, indices%s}; reduction %s",
                     L->nx > 2 ? ", the updates' dims in this run" : "",
                     names[n->p.scatter.reduction]);
  emit_launch(e, n, L);
}

/* One iteration per element of the slice a tuple addresses; each runs
   through the tuples in order. */
static void run_scatter_nd(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *idx = n->in[1], *upd = n->in[2], *y = n->out[0];
  const char *kernel = scatter_kernel(e, n, "opc_scatter_nd", y->dtype);
  if (!kernel || !tuples_ok(e, n, idx))
    return;
  int k = (int)idx->dims[idx->rank - 1], lead = idx->rank - 1;
  int64_t ys[IR_MAX_RANK], us[IR_MAX_RANK], yst[IR_MAX_RANK] = {0}, ust[IR_MAX_RANK] = {0};
  strides_of(y, ys);
  strides_of(upd, us);
  int64_t tuple_stride = merged_stride(upd, us, 0, lead);
  if (tuple_stride < 0) {
    kernel_fail(e, n, "ScatterND from strided updates of this shape is not supported");
    return;
  }
  copy_data(e, n);
  Launch L = {.kernel = kernel, .rank = 1, .dims = {1}};
  for (int d = k; d < x->rank; d++) {
    L.dims[d - k] = x->dims[d];
    yst[d - k] = ys[d];
    ust[d - k] = us[lead + d - k];
  }
  if (x->rank > k)
    L.rank = x->rank - k;
  set_output(&L, buf(e, y), yst);
  L.y_extent = reach(y->rank, y->dims, ys, &(int64_t){0});
  set_input(&L, 0, buf(e, upd), ust);
  L.x_extent[0] = reach(upd->rank, upd->dims, us, &(int64_t){0});
  int64_t unit[IR_MAX_RANK] = {0};
  set_input(&L, 1, buf(e, idx), unit);
  L.x_extent[1] = tensor_numel(idx);
  L.i[0] = k;
  L.i[3] = count_of(lead, idx->dims);
  L.i[4] = tuple_stride;
  group_i(&L, 0, 5, "values per tuple, the indices' kind, reduction, tuples, their stride "
                    "in the updates");
  tuple_dims(&L, y, ys, 0, k);
  if (L.i[3] == 0)
    L.n = 0; /* no updates: the copy is all */
  launch_scatter(e, n, &L);
}

/* One iteration per position of the updates off the axis; each runs
   along the axis in order. */
static void run_scatter_elements(Emitter *e, Node *n) {
  Tensor *idx = n->in[1], *upd = n->in[2], *y = n->out[0];
  const char *kernel = scatter_kernel(e, n, "opc_scatter_elements", y->dtype);
  if (!kernel)
    return;
  copy_data(e, n);
  int axis = n->p.scatter.axis;
  int64_t ys[IR_MAX_RANK], us[IR_MAX_RANK], is[IR_MAX_RANK];
  strides_of(y, ys);
  strides_of(upd, us);
  strides_of(idx, is);
  Launch L = {.kernel = kernel, .rank = upd->rank};
  memcpy(L.dims, upd->dims, sizeof(int64_t) * (size_t)upd->rank);
  L.dims[axis] = 1;
  L.i[0] = upd->dims[axis];
  L.i[3] = y->dims[axis];
  L.i[4] = ys[axis];
  L.i[5] = us[axis];
  L.i[6] = is[axis];
  ys[axis] = us[axis] = is[axis] = 0;
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, upd), us);
  set_input(&L, 1, buf(e, idx), is);
  ys[axis] = L.i[4];
  us[axis] = L.i[5];
  is[axis] = L.i[6];
  L.y_extent = reach(y->rank, y->dims, ys, &(int64_t){0});
  L.x_extent[0] = reach(upd->rank, upd->dims, us, &(int64_t){0});
  L.x_extent[1] = reach(idx->rank, idx->dims, is, &(int64_t){0});
  group_i(&L, 0, 1, "the updates' size along the axis");
  group_i(&L, 1, 2, "the indices' kind, reduction");
  group_i(&L, 3, 4, "the output's size along the axis; strides along it: output, updates, "
                    "indices");
  if (upd->bounded) { /* a run's updates (ir/bounds.c): their length in this run */
    int64_t none[IR_MAX_RANK] = {0};
    set_input(&L, 2, live_dims(e, upd), none);
    L.x_extent[2] = upd->rank;
    L.x_bytes[2] = 8;
    L.i[7] = 1;
    L.i[8] = axis;
    group_i(&L, 7, 2, "whether x[2] holds the updates' dims in this run, the axis");
  }
  if (L.i[0] == 0)
    L.n = 0; /* no updates: the copy is all */
  launch_scatter(e, n, &L);
}

/* ------------------------------------------------------------ selection */

/* ArgMax, ArgMin: a row kernel along the axis, writing int64. */
static void run_arg(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  int axis = n->p.arg.axis;
  if (x->dims[axis] == 0 && tensor_numel(y) > 0 && !x->bounded) {
    kernel_fail(e, n, emit_str(e, "%s along an empty axis has no answer", op_info(n->op)->name));
    return;
  }
  bool reduced[IR_MAX_RANK] = {false};
  reduced[axis] = true;
  int64_t yst[IR_MAX_RANK];
  reduced_output_strides(x, y, reduced, yst);
  Launch L = {.kernel = typed_kernel(e, "opc_arg_extreme", x->dtype)};
  if (!row_launch(e, n, &L, x, reduced, buf(e, y), yst, false))
    return;
  /* Only the outer positions are written. */
  L.y_extent = reach(L.rank, L.dims, L.ystride, &(int64_t){0});
  set_element_type(&L, x->dtype);
  L.y_bytes = 8;
  L.i[13] = n->op == OP_ARG_MAX;
  L.i[14] = n->p.arg.select_last;
  group_i(&L, 13, 2, "largest, select_last_index");
  row_run_length(e, &L, x, reduced);
  emit_launch(e, n, &L);
}

/* TopK: opc_topk, one iteration per input element, each scanning its row
   for its place (O(N) an element, O(N^2) a row), or for long rows
   opc_topk_select, a block per row selecting the best K by radix (about
   10 passes over a float32 row), then opc_topk_take writing the outputs
   from its rows. The scan wins on short rows, where the selection's fixed
   cost (a histogram of 16 x 256 counters per digit) dominates; measured on
   the CPU runtime (2 threads, float32, K = 10; ms, scan against
   selection): 64 rows of 16, 0.045 against 0.34; of 64, 0.26 against
   0.42; of 256, 1.41 against 0.24; of 1,024 (K = 100), 34 against 1.9
   (1,025). Hence the scan up to 128 elements. net.c is one text for both
   targets, so the GPU takes the same rule: there a scan of at most 128
   steps a thread is cheap, and the selection's barriers cost about as
   much (not measured on a GPU yet). */
enum { TOPK_SCAN_LENGTH = 128 };

static bool topk_selects(const Node *n) {
  return n->in[0]->dims[n->p.topk.axis] > TOPK_SCAN_LENGTH && n->p.topk.k > 0;
}

static int64_t topk_rows(const Node *n) {
  const Tensor *x = n->in[0];
  return tensor_numel(x) == 0 ? 0 : tensor_numel(x) / x->dims[n->p.topk.axis];
}

typedef struct TopkScratch {
  const char *scratch; /* opc_topk_select's rows, or NULL */
} TopkScratch;

/* create(): the selection's rows, 4 x K's bound int64s each. */
static void setup_topk(Emitter *e, Node *n) {
  TopkScratch *s = node_data(e, n, sizeof *s);
  if (!topk_selects(n) || topk_rows(n) == 0)
    return;
  const char *field = emit_unique(e, emit_str(e, "%s_scratch", node_id(e, n)));
  emit_to(e, SEC_FIELDS, "long long *%s; /* TopK's rows: keys, indices, twice */", field);
  emit_call(e, LIB_CUDA, n, "cudaMalloc((void **)&c->%s, %lld * sizeof(long long))", field,
            (long long)(4 * n->p.topk.k * topk_rows(n)));
  emit_to(e, SEC_TEARDOWN, "cudaFree(c->%s);", field);
  s->scratch = emit_str(e, "c->%s", field);
}

/* The arguments opc_topk, opc_topk_select and opc_topk_take share: x, K
   and the run's dims in x[0..3), i[0..9). */
static void topk_args(Emitter *e, const Node *n, Launch *L, const int64_t *xs) {
  const Tensor *x = n->in[0];
  int axis = n->p.topk.axis;
  set_input(L, 0, buf(e, x), xs);
  L->x_extent[0] = reach(x->rank, x->dims, xs, &(int64_t){0});
  L->i[0] = axis;
  L->i[1] = x->dims[axis];
  L->i[2] = xs[axis];
  L->i[4] = n->p.topk.k;
  L->i[5] = n->p.topk.largest;
  L->i[7] = n->p.topk.k_at_run_time;
  set_element_type(L, x->dtype);
  if (n->p.topk.k_at_run_time) {
    L->nx = 2;
    L->x[1] = buf(e, n->in[1]);
    L->x_extent[1] = 1;
    L->x_bytes[1] = 8;
  }
  if (x->bounded) {
    L->nx = 3;
    L->x[2] = live_dims(e, x);
    L->x_extent[2] = x->rank;
    L->x_bytes[2] = 8;
    L->i[8] = 1;
  }
}

/* A block per row: its best K, sorted, into the scratch. */
static void topk_select_launch(Emitter *e, const Node *n, const int64_t *xs) {
  const Tensor *x = n->in[0];
  const TopkScratch *s = node_data(e, n, sizeof *s);
  Launch L = {.kernel = typed_kernel(e, "opc_topk_select", x->dtype), .rank = x->rank};
  memcpy(L.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  topk_args(e, n, &L, xs);
  L.n = topk_rows(n) * KERNEL_BLOCK_THREADS;
  L.i[3] = n->p.topk.k;
  L.i[9] = topk_rows(n);
  L.y = s->scratch;
  L.y_extent = 4 * n->p.topk.k * topk_rows(n);
  L.y_bytes = 8;
  group_i(&L, 0, 10, "axis, its length, x's stride along it, K's bound, K, largest, -, K in "
                     "x[1], the run's length in x[2], rows");
  L.note = "a block per row: its best K, sorted, into the scratch";
  emit_launch(e, n, &L);
}

static void run_topk(Emitter *e, Node *n) {
  Tensor *x = n->in[0];
  int axis = n->p.topk.axis;
  int64_t xs[IR_MAX_RANK];
  strides_of(x, xs);
  bool selects = topk_selects(n) && topk_rows(n) > 0;
  if (selects)
    topk_select_launch(e, n, xs);
  /* Values, indices, then with a run-time K or a bounded input (read
     along its run-time axis, ir/bounds.c) each one's dims in this run. */
  bool run_dims = n->p.topk.k_at_run_time || x->bounded;
  for (int w = 0; w < (run_dims ? 4 : 2) && w % 2 < n->nout; w++) {
    Tensor *y = n->out[w % 2];
    if (!tensor_needed(y))
      continue;
    int64_t ys[IR_MAX_RANK];
    strides_of(y, ys);
    bool take = selects && w < 2;
    Launch L = {.kernel = typed_kernel(e, take ? "opc_topk_take" : "opc_topk", x->dtype),
                .rank = x->rank};
    memcpy(L.dims, take ? y->dims : x->dims, sizeof(int64_t) * (size_t)x->rank);
    if (take) {
      set_output(&L, buf(e, y), ys);
      L.i[9] = dims_product(y->dims, axis + 1, y->rank);
    } else {
      L.i[3] = ys[axis];
      ys[axis] = 0;
      set_output(&L, buf(e, y), ys);
      ys[axis] = L.i[3];
    }
    L.y_extent = reach(y->rank, y->dims, ys, &(int64_t){0});
    int64_t xs_take[IR_MAX_RANK];
    memcpy(xs_take, xs, sizeof xs_take);
    xs_take[axis] = 0; /* opc_topk_take: each row's base; the index picks along the axis */
    topk_args(e, n, &L, take ? xs_take : xs);
    if (take) {
      L.x_extent[0] = reach(x->rank, x->dims, xs, &(int64_t){0});
      L.i[2] = xs[axis];
    }
    if (tensor_numel(y) == 0)
      L.n = 0; /* K = 0 */
    if (take) {
      L.i[3] = n->p.topk.k;
      L.nx = 4;
      L.x[3] = ((const TopkScratch *)node_data(e, n, sizeof(TopkScratch)))->scratch;
      L.x_extent[3] = 4 * n->p.topk.k * topk_rows(n);
      L.x_bytes[3] = 8;
    }
    L.i[6] = w < 2 ? w : 2;
    if (take)
      group_i(&L, 0, 10, "axis, its length, x's stride along it, K's bound, K, largest, which "
                         "output, K in x[1], the run's length in x[2], elements after the axis");
    else if (n->p.topk.k_at_run_time)
      group_i(&L, 0, 8, "axis, its length, input and output strides along it, K's bound, "
                        "largest, which output (2: its dims), K in x[1]");
    else
      group_i(&L, 0, 7, "axis, its length, input and output strides along it, K, largest, "
                        "which output");
    if (!take && x->bounded)
      group_i(&L, 8, 1, "the axis's length in this run in x[2]");
    if (w >= 2) {
      L.n = 1;
      L.y = live_dims(e, y);
      L.y_extent = y->rank;
    }
    if (w % 2 == 1 || w >= 2)
      L.y_bytes = 8;
    static const char *what[6] = {"the values", "the indices", "one thread: the values' dims",
                                  "one thread: the indices' dims", "the values from the scratch",
                                  "the indices from the scratch"};
    L.note = what[take ? 4 + w : w];
    emit_launch(e, n, &L);
  }
}

/* NonZero at run time: one launch writes the coordinates, one the dims of
   this run, both counting the nonzero elements first (one thread each). */
static void run_non_zero(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  DType type = x->dtype == DT_BOOL ? DT_UINT8 : x->dtype; /* a bool is a 0/1 byte */
  int64_t xs[IR_MAX_RANK];
  strides_of(x, xs);
  for (int w = 0; w < 2; w++) {
    Launch L = {.kernel = typed_kernel(e, "opc_non_zero", type), .rank = x->rank, .n = 1};
    memcpy(L.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    set_input(&L, 0, buf(e, x), xs);
    set_element_type(&L, type);
    L.y = w == 0 ? buf(e, y) : live_dims(e, y);
    L.y_extent = w == 0 ? tensor_numel(y) : 2;
    L.y_bytes = 8;
    L.i[0] = w;
    group_i(&L, 0, 1, "which output");
    if (x->bounded) { /* count the run's elements alone (ir/bounds.c) */
      L.nx = 2;
      L.x[1] = live_dims(e, x);
      L.x_extent[1] = x->rank;
      L.x_bytes[1] = 8;
      L.i[1] = 1;
      L.i[2] = x->bound_axis;
      group_i(&L, 1, 2, "x's dims of this run in x[1], its run-time dim");
    }
    L.note = w == 0 ? "one thread: the coordinates" : "one thread: the dims of this run";
    emit_launch(e, n, &L);
  }
}

/* Shape and Size of a bounded tensor (ir/bounds.c): one thread reads its
   dims of this run, the others fold. */
static void run_shape_of(Emitter *e, Node *n) {
  const Tensor *x = n->in[0], *y = n->out[0];
  int start = 0, end = x->rank;
  bool size = n->op == OP_SIZE;
  if (!size)
    shape_range(n, x->rank, &start, &end);
  Launch L = {.kernel = "opc_shape_of", .n = 1, .nx = 1};
  L.x[0] = live_dims(e, x);
  L.x_extent[0] = x->rank;
  L.x_bytes[0] = 8;
  L.y = buf(e, y);
  L.y_extent = tensor_numel(y);
  L.y_bytes = 8;
  L.i[0] = size;
  L.i[1] = start;
  L.i[2] = end;
  group_i(&L, 0, 3, "Size (1) or Shape (0), the dims from, to");
  L.note = emit_str(e, "one thread: the dims of '%s' in this run", x->name);
  emit_launch(e, n, &L);
}

/* x[k] of L: a run-time scalar, read by the kernel. */
static void set_scalar_input(Emitter *e, Launch *L, int k, const Tensor *t) {
  L->x[k] = buf(e, t);
  L->x_extent[k] = 1;
  L->x_bytes[k] = (int)dtype_size(t->dtype);
  if (k + 1 > L->nx)
    L->nx = k + 1;
}

/* Boxes of a run (ir/bounds.c): the count of this run goes in the x slot
   a run-time threshold leaves free, i[7] naming it. */
static bool nms_run_count(Emitter *e, Node *n, Launch *L) {
  int k = !n->p.nms.score_at_run_time ? 3 : !n->p.nms.iou_at_run_time ? 2 : 0;
  if (!k)
    return kernel_fail(e, n, "NonMaxSuppression of boxes of a run-time count takes at most one "
                       "of its thresholds as run-time data");
  const Tensor *boxes = n->in[0];
  L->x[k] = emit_str(e, "(%s + %d)", live_dims(e, boxes), boxes->bound_axis);
  L->x_extent[k] = 1;
  L->x_bytes[k] = 8;
  L->nx = 4;
  L->i[7] = k;
  group_i(L, 7, 1, "the x slot of the boxes' count in this run");
  return true;
}

/* NonMaxSuppression at run time (opc_nms): the boxes' sort keys, merge
   passes sorting them, then chunk by chunk a parallel test of each box
   against those kept before the chunk and a thread per batch and class
   resolving the chunk in order; then one thread writes the rows and one
   the dims of this run. Every launch is planned at the bound (boxes, or
   a chunk's share of them) and exits early past this run's boxes. The
   scratch holds the keys twice, a flag per box, the kept boxes, their
   count and their edges. Thresholds given as run-time data are read by the launches that
   use them, a run-time max_output_boxes_per_class by the rows: the
   greedy choice keeps boxes in one order whatever the limit, so a limit
   takes the first of every class's kept boxes. */
typedef struct NmsScratch {
  const char *scratch;
} NmsScratch;

/* Chunks: a chunk's test runs in parallel, its resolution on one thread
   per class and a launch pair each, so about 256 boxes a chunk, at most
   NMS_CHUNKS of them. */
enum { NMS_CHUNKS = 32, NMS_CHUNK_BOXES = 256 };

/* Kept boxes are binned by their low x (opc_nms_bin): a box is tested
   against those in the bins its x range meets. */
enum { NMS_BINS = 1024 };

static int64_t nms_segments(const Node *n) {
  return n->in[1]->dims[0] * n->in[1]->dims[1];
}

static int64_t nms_scratch_size(const Node *n) {
  return nms_segments(n) * (3 * n->in[1]->dims[2] + 5 * n->p.nms.per_class + NMS_BINS + 3);
}

static int64_t nms_chunks(const Node *n) {
  int64_t chunks = (n->in[1]->dims[2] + NMS_CHUNK_BOXES - 1) / NMS_CHUNK_BOXES;
  return chunks < 1 ? 1 : chunks > NMS_CHUNKS ? NMS_CHUNKS : chunks;
}

/* opc_nms_spread's blocks: 64 strips of blocks of 64. */
static int64_t padded_4096(int64_t count) {
  return (count + 4095) / 4096 * 4096;
}

static void setup_nms(Emitter *e, Node *n) {
  NmsScratch *s = node_data(e, n, sizeof *s);
  if (nms_segments(n) == 0 || n->in[1]->dims[2] == 0)
    return;
  const char *field = emit_unique(e, emit_str(e, "%s_scratch", node_id(e, n)));
  emit_to(e, SEC_FIELDS, "long long *%s; /* NonMaxSuppression's keys, flags and kept boxes */",
          field);
  emit_call(e, LIB_CUDA, n, "cudaMalloc((void **)&c->%s, %lld * sizeof(long long))", field,
            (long long)nms_scratch_size(n));
  emit_to(e, SEC_TEARDOWN, "cudaFree(c->%s);", field);
  s->scratch = emit_str(e, "c->%s", field);
}

/* One launch of opc_nms: `mode` over `count` iterations, `part` its pass
   or chunk. */
static bool nms_launch(Emitter *e, Node *n, int mode, int64_t count, int64_t part,
                       const char *note) {
  Tensor *boxes = n->in[0], *scores = n->in[1], *y = n->out[0];
  const char *scratch = ((const NmsScratch *)node_data(e, n, sizeof(NmsScratch)))->scratch;
  Launch L = {.kernel = "opc_nms", .n = count};
  if (mode >= 3) {
    L.nx = 2;
    L.x[0] = buf(e, boxes);
    L.x_extent[0] = tensor_numel(boxes);
    L.x[1] = buf(e, scores);
    L.x_extent[1] = tensor_numel(scores);
    if (n->p.nms.iou_at_run_time)
      set_scalar_input(e, &L, 2, n->in[3]);
    if (n->p.nms.score_at_run_time)
      set_scalar_input(e, &L, 3, n->in[4]);
    if (boxes->bounded && !nms_run_count(e, n, &L))
      return false;
    L.y = scratch;
    L.y_extent = nms_scratch_size(n);
  } else if (mode == 1) {
    if (n->p.nms.per_class_at_run_time)
      set_scalar_input(e, &L, 0, n->in[2]);
    if (scratch) { /* none where there are no boxes: no rows */
      L.nx = 2;
      L.x[1] = scratch;
      L.x_extent[1] = nms_scratch_size(n);
      L.x_bytes[1] = 8;
    }
    L.y = buf(e, y);
    L.y_extent = tensor_numel(y);
  } else {
    L.nx = 1;
    L.x[0] = buf(e, y);
    L.x_extent[0] = tensor_numel(y);
    L.x_bytes[0] = 8;
    L.y = live_dims(e, y);
    L.y_extent = 2;
  }
  L.y_bytes = 8;
  L.i[0] = mode;
  L.i[1] = scores->dims[0];
  L.i[2] = scores->dims[1];
  L.i[3] = scores->dims[2];
  L.i[4] = n->p.nms.per_class;
  L.i[5] = n->p.nms.center;
  L.i[6] = n->p.nms.has_score_threshold;
  L.i[8] = part;
  L.i[9] = padded_4096(scores->dims[2]);
  L.i[10] = nms_chunks(n);
  L.i[11] = padded_4096((scores->dims[2] + nms_chunks(n) - 1) / nms_chunks(n));
  L.i[12] = NMS_BINS;
  group_i(&L, 0, 7, "mode, batches, classes, boxes, rows per class, center_point_box, "
                    "whether scores are thresholded");
  group_i(&L, 8, 5, "pass or chunk, boxes padded to 4096, chunks, a chunk's bound padded to "
                    "4096, bins");
  L.f[0] = n->p.nms.iou_threshold;
  L.f[1] = n->p.nms.score_threshold;
  group_f(&L, 0, 2, "IoU and score thresholds");
  L.note = note;
  emit_launch(e, n, &L);
  return true;
}

static void run_nms(Emitter *e, Node *n) {
  Tensor *boxes = n->in[0], *scores = n->in[1];
  if (!row_major(boxes) || !row_major(scores)) {
    kernel_fail(e, n, "NonMaxSuppression reads contiguous boxes and scores only");
    return;
  }
  int64_t count = scores->dims[2], each = nms_segments(n) * padded_4096(count);
  if (count >= 0xffffffffll) {
    kernel_fail(e, n, "NonMaxSuppression takes fewer than 2^32 - 1 boxes");
    return;
  }
  if (nms_segments(n) > 0 && count > 0) {
    if (!nms_launch(e, n, 3, each, 0, "each box's sort key: score, then index"))
      return;
    for (int64_t pass = 0; (1ll << pass) < count; pass++)
      nms_launch(e, n, 4, each / 64, pass, "a merge pass: runs of 2^i[8] keys merged in pairs");
    for (int64_t chunk = 0; chunk < nms_chunks(n); chunk++) {
      nms_launch(e, n, 5, nms_segments(n) * padded_4096((count + nms_chunks(n) - 1) / nms_chunks(n)),
                 chunk, "chunk i[8]: each box against those kept before it");
      nms_launch(e, n, 6, nms_segments(n), chunk, "chunk i[8] resolved, a thread per class");
    }
  }
  nms_launch(e, n, 1, 1, 0, "one thread: the kept boxes as rows");
  nms_launch(e, n, 2, 1, 0, "one thread: the dims of this run");
}

/* Compress: one thread keeps the selected slices; where the condition is
   run-time data, a second writes the dims of this run (opc_compress). */
static void run_compress(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *cond = n->in[1], *y = n->out[0];
  if (!row_major(x) || !row_major(cond)) {
    kernel_fail(e, n, "Compress reads a contiguous input and condition only");
    return;
  }
  int axis = n->p.compress.axis;
  for (int mode = 0; mode < (y->bounded ? 2 : 1); mode++) {
    Launch L = {.kernel = sized_kernel(e, "opc_compress", x->dtype), .n = 1, .nx = 2};
    L.rank = x->rank;
    memcpy(L.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    L.x[0] = buf(e, x);
    L.x_extent[0] = tensor_numel(x);
    L.x_bytes[0] = (int)dtype_size(x->dtype);
    L.x[1] = buf(e, cond);
    L.x_extent[1] = cond->dims[0];
    L.x_bytes[1] = 1;
    L.y = mode ? live_dims(e, y) : buf(e, y);
    L.y_extent = mode ? y->rank : tensor_numel(y);
    L.y_bytes = mode ? 8 : (int)dtype_size(x->dtype);
    L.i[0] = mode;
    L.i[1] = axis >= 0 ? dims_product(x->dims, 0, axis) : 1;
    L.i[2] = axis >= 0 ? x->dims[axis] : tensor_numel(x);
    L.i[3] = axis >= 0 ? dims_product(x->dims, axis + 1, x->rank) : 1;
    L.i[4] = cond->dims[0];
    L.i[5] = axis;
    group_i(&L, 0, 6, "mode, outer, along, inner, condition length, axis");
    L.note = mode ? "one thread: the dims of this run" : "one thread: the selected slices";
    emit_launch(e, n, &L);
  }
}

/* OneHot at run time: its depth is a compile-time constant (it is a dim of
   the output), its indices and values may be run-time data. One work item
   per output element (opc_one_hot). */
static void run_one_hot(Emitter *e, Node *n) {
  Tensor *idx = n->in[0], *values = n->in[2], *y = n->out[0];
  int kind = idx->dtype == DT_FLOAT ? -4 : idx->dtype == DT_DOUBLE ? -8
             : idx->dtype == DT_INT64 || idx->dtype == DT_INT32 ? index_kind(idx) : 0;
  if (!kind) {
    kernel_fail(e, n, emit_str(e, "OneHot reads int64, int32, float32 or float64 indices at run "
                               "time; '%s' is %s", idx->name, dtype_name(idx->dtype)));
    return;
  }
  int axis = n->p.one_hot.axis;
  Launch L = {.kernel = sized_kernel(e, "opc_one_hot", y->dtype), .nx = 2};
  set_element_type(&L, y->dtype);
  L.rank = y->rank;
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  int64_t ys[IR_MAX_RANK], is[IR_MAX_RANK], xs[IR_MAX_RANK];
  strides_of(y, ys);
  set_output(&L, buf(e, y), ys);
  strides_of(idx, is);
  for (int d = 0, j = 0; d < y->rank; d++)
    xs[d] = d == axis ? 0 : is[j++];
  set_input(&L, 0, buf(e, idx), xs);
  L.x_bytes[0] = (int)dtype_size(idx->dtype);
  L.x[1] = buf(e, values);
  L.x_extent[1] = 2;
  L.i[0] = axis;
  L.i[1] = n->p.one_hot.depth;
  L.i[2] = kind;
  group_i(&L, 0, 3, "axis, depth, the indices' kind (-4, -8: float32, float64)");
  L.note = "x[1]: [off, on]";
  emit_launch(e, n, &L);
}

/* Unique at run time: one launch analyses the input into a scratch of
   int64s (the count, each group's first item, each item's group), then one
   launch writes each output the model uses and one the dims of each
   bounded one (opc_unique). */
typedef struct UniqueScratch {
  const char *scratch;
} UniqueScratch;

static int64_t unique_items(const Node *n) {
  const Tensor *x = n->in[0];
  return n->p.unique.has_axis ? x->dims[n->p.unique.axis] : tensor_numel(x);
}

static void setup_unique(Emitter *e, Node *n) {
  UniqueScratch *s = node_data(e, n, sizeof *s);
  const char *field = emit_unique(e, emit_str(e, "%s_scratch", node_id(e, n)));
  emit_to(e, SEC_FIELDS, "long long *%s; /* the count, groups' first items, items' groups */",
          field);
  emit_call(e, LIB_CUDA, n, "cudaMalloc((void **)&c->%s, %lld * sizeof(long long))", field,
            (long long)(3 * unique_items(n) + 1));
  emit_to(e, SEC_TEARDOWN, "cudaFree(c->%s);", field);
  s->scratch = emit_str(e, "c->%s", field);
}

static int unique_kind(DType t) {
  switch (t) {
  case DT_FLOAT: return 1;
  case DT_DOUBLE: return 2;
  case DT_INT64: return 8;
  case DT_INT32: return 4;
  case DT_INT8: return -1;
  default: return 0;
  }
}

/* One launch of opc_unique: `mode` writing `y` (`count` elements of
   `bytes` each). */
static void unique_launch(Emitter *e, const Node *n, int mode, const char *y, int64_t count,
                          int bytes) {
  static const char *what[7] = {"the groups, into the scratch", "Y", "indices", "inverse_indices",
                                "counts", "Y's dims in this run", "the dims in this run"};
  const Tensor *x = n->in[0];
  const UniqueScratch *s = node_data(e, n, sizeof *s);
  int64_t along = unique_items(n), axis = n->p.unique.has_axis ? n->p.unique.axis : -1;
  Launch L = {.kernel = typed_kernel(e, "opc_unique", x->dtype), .n = 1, .nx = mode ? 2 : 1};
  L.rank = x->rank;
  memcpy(L.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  L.x[0] = buf(e, x);
  L.x_extent[0] = tensor_numel(x);
  L.x_bytes[0] = (int)dtype_size(x->dtype);
  if (mode) {
    L.x[1] = s->scratch;
    L.x_extent[1] = 3 * along + 1;
    L.x_bytes[1] = 8;
  }
  L.y = y;
  L.y_extent = count;
  L.y_bytes = bytes;
  L.i[0] = mode;
  L.i[1] = along;
  L.i[2] = axis >= 0 ? dims_product(x->dims, 0, (int)axis) : 1;
  L.i[3] = axis >= 0 ? dims_product(x->dims, (int)axis + 1, x->rank) : 1;
  L.i[4] = n->p.unique.sorted;
  L.i[5] = axis;
  L.i[6] = unique_kind(x->dtype);
  group_i(&L, 0, 7, "mode, items, outer, inner, sorted, axis, element kind");
  L.note = emit_str(e, "one thread: %s", what[mode]);
  emit_launch(e, n, &L);
}

static void run_unique(Emitter *e, Node *n) {
  Tensor *x = n->in[0];
  if (!row_major(x)) {
    kernel_fail(e, n, "Unique reads a contiguous input only");
    return;
  }
  const UniqueScratch *s = node_data(e, n, sizeof *s);
  unique_launch(e, n, 0, s->scratch, 3 * unique_items(n) + 1, 8);
  for (int k = 0; k < n->nout && k < 4; k++) {
    Tensor *y = n->out[k];
    if (!y)
      continue;
    unique_launch(e, n, k + 1, buf(e, y), tensor_numel(y), k == 0 ? (int)dtype_size(y->dtype) : 8);
    if (y->bounded)
      unique_launch(e, n, k == 0 ? 5 : 6, live_dims(e, y), y->rank, 8);
  }
}

/* ------------------------------------------------------ TfIdfVectorizer */

/* TfIdfVectorizer: one work item per output element, [rows, columns]; the
   n-grams' table, the pool and the weights are the program's weights. */
static void run_tfidf(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  int64_t rows = x->rank == 2 ? x->dims[0] : 1, grams = n->p.tfidf.grams, low;
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  Launch L = {.kernel = op_kernel(e, n->op), .rank = 2, .dims = {rows, n->p.tfidf.outputs}};
  int64_t yst[IR_MAX_RANK] = {y->rank == 2 ? ys[0] : 0, ys[y->rank - 1]};
  int64_t xst[IR_MAX_RANK] = {x->rank == 2 ? xs[0] : 0, 0}, none[IR_MAX_RANK] = {0};
  set_output(&L, buf(e, y), yst);
  set_input(&L, 0, buf(e, x), xst);
  L.x_extent[0] = reach(x->rank, x->dims, xs, &low);
  L.x_bytes[0] = (int)dtype_size(x->dtype);
  /* Never empty: a buffer of one unused value where there is nothing. */
  float *ones = arena_alloc(e->g->arena, sizeof(float) * (size_t)(grams + 1));
  for (int64_t k = 0; k <= grams; k++)
    ones[k] = n->p.tfidf.weights && k < grams ? n->p.tfidf.weights[k] : 1.0f;
  int64_t zero = 0;
  set_input(&L, 1, weights_add_typed(e, "tfidf_grams", DT_INT64,
                                     grams ? (const void *)n->p.tfidf.table : &zero,
                                     grams ? 3 * grams : 1), none);
  L.x_extent[1] = grams ? 3 * grams : 1;
  L.x_bytes[1] = 8;
  int64_t pool_size = n->p.tfidf.pool_size;
  set_input(&L, 2, weights_add_typed(e, "tfidf_pool", DT_INT64,
                                     pool_size ? (const void *)n->p.tfidf.pool : &zero,
                                     pool_size ? pool_size : 1), none);
  L.x_extent[2] = pool_size ? pool_size : 1;
  L.x_bytes[2] = 8;
  set_input(&L, 3, weights_add(e, "tfidf_weights", ones, grams + 1), none);
  L.x_extent[3] = grams + 1;
  L.i[0] = grams;
  L.i[1] = n->p.tfidf.mode;
  L.i[2] = n->p.tfidf.min_gram;
  L.i[3] = n->p.tfidf.max_gram;
  L.i[4] = x->dims[x->rank - 1];
  L.i[5] = xs[x->rank - 1];
  L.i[6] = L.x_bytes[0];
  L.i[7] = n->p.tfidf.max_skip;
  group_i(&L, 0, 8, "n-grams, mode (0 TF, 1 IDF, 2 TFIDF), min and max length, items a row, "
                    "their stride and size, max skip count");
  L.note = "x = {rows, n-grams (length, pool start, column), pool, weights}";
  emit_launch(e, n, &L);
}

/* ------------------------------------- the emitters ops.def names */

const OpEmitter kernel_gather_nd = {.run = run_gather_nd};
const OpEmitter kernel_scatter_nd = {.run = run_scatter_nd};
const OpEmitter kernel_scatter_elements = {.run = run_scatter_elements};
const OpEmitter kernel_arg = {.run = run_arg};
const OpEmitter kernel_topk = {.setup = setup_topk, .run = run_topk};
const OpEmitter kernel_non_zero = {.run = run_non_zero};
const OpEmitter kernel_shape_of = {.run = run_shape_of};
const OpEmitter kernel_nms = {.setup = setup_nms, .run = run_nms};
const OpEmitter kernel_compress = {.run = run_compress};
const OpEmitter kernel_one_hot = {.run = run_one_hot};
const OpEmitter kernel_unique = {.setup = setup_unique, .run = run_unique};
const OpEmitter kernel_tfidf = {.run = run_tfidf};
