/*
 * kernels_movement.c - data movement as launches of opc's copy kernels:
 * reshapes, Transpose, Concat, Split, Slice, Expand, Tile, DepthToSpace and
 * SpaceToDepth, Gather and GatherElements, Pad, Resize and Upsample.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* ------------------------------------------------------ data movement */

/* y = x between two strided layouts over dims; x's strides may be negative.
   The elements are of the node's type (that of its outputs). */
static void copy_launch(Emitter *e, const Node *n, const char *y, const int64_t *ystride,
                        const char *x, const int64_t *xstride, int rank, const int64_t *dims) {
  DType type = node_data_type(n);
  Launch L = {.kernel = sized_kernel(e, "opc_copy", type), .rank = rank};
  set_element_type(&L, type);
  memcpy(L.dims, dims, sizeof(int64_t) * (size_t)rank);
  set_output(&L, y, ystride);
  set_input(&L, 0, x, xstride);
  collapse(&L);
  int64_t low;
  L.x_extent[0] = reach(L.rank, L.dims, L.xstride[0], &low);
  /* x[0] points at the lowest element read; i[0] leads back to the first. */
  if (low != 0)
    L.x[0] = emit_str(e, "%s - %lld", x, (long long)-low);
  L.i[0] = -low;
  group_i(&L, 0, 1, "offset of the first element from x[0]");
  emit_launch(e, n, &L);
}

void emit_kernel_copy(Emitter *e, const Node *n, const char *dst, const int64_t *dst_strides,
                      const char *src, const int64_t *src_strides, int rank,
                      const int64_t *dims) {
  copy_launch(e, n, dst, dst_strides, src, src_strides, rank, dims);
}

/* Whether `part` already lies where a copy would put it: same storage,
   offset and strides (a pass made it a view of its destination). */
static bool already_there(Tensor *part, Tensor *whole, int64_t offset, const int64_t *strides) {
  if (!part->alias_of || tensor_storage(part) != tensor_storage(whole))
    return false;
  int64_t whole_offset = whole->alias_of ? whole->alias_offset : 0;
  if (part->alias_offset != whole_offset + offset)
    return false;
  for (int d = 0; d < part->rank; d++)
    if (part->dims[d] > 1 && part->strides[d] != strides[d])
      return false;
  return true;
}

/* Cast between two types: one launch of opc_cast, which converts any type
   to any other (the kernel reads them by their ONNX numbers). */
static void run_cast(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  Launch L = {.kernel = "opc_cast", .rank = y->rank};
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), xs);
  collapse(&L);
  L.x_bytes[0] = (int)dtype_size(x->dtype);
  L.y_bytes = (int)dtype_size(y->dtype);
  L.i[0] = x->dtype;
  L.i[1] = y->dtype;
  group_i(&L, 0, 2, emit_str(e, "from %s to %s", dtype_name(x->dtype),
                             dtype_name(y->dtype)));
  emit_launch(e, n, &L);
}

/* Identity, Dropout, Cast, Flatten, Reshape, Squeeze, Unsqueeze: the same
   elements in row-major order, when the node is not a view. */
void run_reshape_copy(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  if (x->dtype != y->dtype) {
    run_cast(e, n);
    return;
  }
  if (n->op == OP_DROPOUT && n->nout > 1 && tensor_needed(n->out[1])) {
    kernel_fail(e, n, "Dropout's mask output is not supported");
    return;
  }
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], contiguous[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  /* Walk the shape of whichever side is strided; the other is contiguous. */
  bool y_plain = true;
  int64_t step = 1;
  for (int d = y->rank - 1; d >= 0; d--) {
    y_plain = y_plain && (y->dims[d] == 1 || ys[d] == step);
    step *= y->dims[d];
  }
  const Tensor *walk = y_plain ? x : y;
  step = 1;
  for (int d = walk->rank - 1; d >= 0; d--) {
    contiguous[d] = step;
    step *= walk->dims[d];
  }
  if (y_plain) {
    copy_launch(e, n, buf(e, y), contiguous, buf(e, x), xs, x->rank, x->dims);
  } else {
    bool x_plain = true;
    step = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
      x_plain = x_plain && (x->dims[d] == 1 || xs[d] == step);
      step *= x->dims[d];
    }
    if (!x_plain) {
      kernel_fail(e, n, "a reshaping copy between two strided views is not supported");
      return;
    }
    copy_launch(e, n, buf(e, y), ys, buf(e, x), contiguous, y->rank, y->dims);
  }
}

static void run_transpose(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  const int *perm = n->p.transpose.perm;
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], src[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  for (int d = 0; d < y->rank; d++)
    src[d] = xs[perm[d]];
  copy_launch(e, n, buf(e, y), ys, buf(e, x), src, y->rank, y->dims);
}

/* Copies one piece of a Concat (into_whole) or a Split (out of the whole):
   `piece` lies at element `offset` of `whole`, whose strides are ws.
   Nothing is emitted when a pass already placed the piece there. */
static void copy_piece(Emitter *e, Node *n, Tensor *piece, Tensor *whole, int64_t offset,
                       const int64_t *ws, bool into_whole) {
  if (already_there(piece, whole, offset, ws))
    return;
  int64_t ps[IR_MAX_RANK];
  strides_of(piece, ps);
  if (into_whole)
    copy_launch(e, n, offset_ptr(e, buf(e, whole), offset), ws, buf(e, piece), ps, piece->rank,
                piece->dims);
  else
    copy_launch(e, n, buf(e, piece), ps, offset_ptr(e, buf(e, whole), offset), ws, piece->rank,
                piece->dims);
}

/* The byte offset of t's first element in its device's arena, or -1 for
   a constant, which the weights hold. */
static int64_t arena_bytes(const Tensor *t) {
  const Tensor *owner = t->alias_of ? t->alias_of : t;
  if (tensor_is_const(owner))
    return -1;
  return owner->offset + (t->alias_of ? t->alias_offset * (int64_t)dtype_size(t->dtype) : 0);
}

/* What a launch of opc_concat_runs reads: x[0], x[1] and x[2] (the
   table) with their extents, and x[3], the parts of x[0] and x[1] listed
   for the race checker (opc_kargs.h), its bytes. */
typedef struct RunsReads {
  const char *x[4];
  int64_t extent[3], listed;
} RunsReads;

/* One launch of opc_concat_runs: `which` copies the inputs the table marks
   with it, over `rows` rows from `first`; or (which -1) the output's dims
   in this run. */
static void concat_runs_launch(Emitter *e, Node *n, const RunsReads *r, int which, int64_t first,
                               int64_t rows) {
  Tensor *y = n->out[0];
  int axis = n->p.axis.axis;
  DType type = y->dtype;
  Launch L = {.kernel = sized_kernel(e, "opc_concat_runs", type), .nx = 4, .rank = y->rank};
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  for (int k = 0; k < 4; k++) {
    L.x[k] = r->x[k];
    L.x_extent[k] = k < 3 ? r->extent[k] : -r->listed;
    L.x_bytes[k] = k == 0 || k == 3 ? 1 : 8; /* in bytes: the tables' offsets are */
  }
  L.i[0] = which < 0;
  L.i[1] = n->nin;
  L.i[2] = axis;
  L.i[3] = dims_product(y->dims, axis + 1, y->rank);
  L.i[4] = first;
  L.i[5] = which;
  group_i(&L, 0, 6, "mode, inputs, axis, elements in a row, first row, this launch");
  if (which < 0) {
    L.n = 1;
    L.y = live_dims(e, y);
    L.y_extent = y->rank;
    L.y_bytes = 8;
    L.note = emit_str(e, "one thread: the dims of '%s' in this run, the runs summed",
                      comment_text(e, y->name));
  } else {
    L.n = rows * L.i[3];
    L.y = buf(e, y);
    L.y_extent = tensor_numel(y);
    L.y_bytes = (int)dtype_size(type);
    L.note = which ? "the rows of a constant input, after the runs before it"
                   : "every input's run of rows, after the runs before it";
  }
  emit_launch(e, n, &L);
}

/* The parts read, as opc_kargs.h lists them: (operand, byte offset, bytes). */
static int64_t *add_read(int64_t *list, int *count, int operand, int64_t offset, int64_t bytes) {
  int64_t *t = list + 3 * (*count)++;
  t[0] = operand;
  t[1] = offset;
  t[2] = bytes;
  return list;
}

/* Concat along the run-time axis of bounded inputs and static ones
   (ir/bounds.c): one launch copies every input in the arena, from the
   lowest; one more each constant; one thread writes the output's dims of
   the run. Their table (opc_concat_runs) is a constant of the weights, and
   so are the lists of what they read, for the race checker: the inputs
   lie apart in the arena, other tensors between them. */
static void run_concat_runs(Emitter *e, Node *n) {
  Tensor *y = n->out[0];
  int axis = n->p.axis.axis, constants = 0, device = tensor_device(e->g, y);
  int64_t *table = arena_alloc(e->g->arena, sizeof(int64_t) * 5 * (size_t)n->nin);
  int64_t *reads = arena_alloc(e->g->arena, sizeof(int64_t) * 6 * (size_t)n->nin);
  int64_t *dims_reads = arena_alloc(e->g->arena, sizeof(int64_t) * 3 * (size_t)n->nin);
  int64_t low = INT64_MAX, live_low = INT64_MAX, rows = 0;
  const Tensor *base = NULL, *live_base = NULL;
  for (int k = 0; k < n->nin; k++) {
    const Tensor *x = n->in[k];
    int64_t *t = table + 5 * k, at = arena_bytes(x);
    if (!row_major(x) || (at >= 0 && tensor_device(e->g, x) != device)) {
      kernel_fail(e, n, emit_str(e, "Concat along the run-time axis reads contiguous inputs "
                                 "on its own device only; '%s' is not one", x->name));
      return;
    }
    t[0] = at < 0 ? ++constants : 0;
    t[1] = at < 0 ? 0 : at;
    t[2] = x->bounded ? x->live_offset : -1;
    t[3] = x->dims[axis];
    t[4] = rows;
    rows += x->dims[axis];
    if (at >= 0 && tensor_numel(x) > 0 && at < low)
      low = at, base = x;
    if (x->bounded && x->live_offset < live_low)
      live_low = x->live_offset, live_base = x;
  }
  int nreads = 0, ndims = 0;
  for (int k = 0; k < n->nin; k++) {
    const Tensor *x = n->in[k];
    int64_t *t = table + 5 * k;
    if (t[0] == 0 && base) {
      t[1] -= low;
      add_read(reads, &nreads, 0, t[1], tensor_numel(x) * (int64_t)dtype_size(x->dtype));
    }
    if (t[2] >= 0) {
      t[2] = (t[2] - live_low) / 8;
      add_read(reads, &nreads, 1, 8 * t[2], 8 * x->rank);
      add_read(dims_reads, &ndims, 1, 8 * t[2], 8 * x->rank);
    }
  }
  const char *name = y->name;
  RunsReads r = {
      .x = {base ? buf(e, base) : "NULL", live_base ? live_dims(e, live_base) : "NULL",
            weights_add_typed(e, emit_str(e, "%s_runs", name), DT_INT64, table, 5 * (int64_t)n->nin),
            weights_add_typed(e, emit_str(e, "%s_reads", name), DT_INT64, reads, 3 * (int64_t)nreads)},
      .extent = {0, 0, 5 * (int64_t)n->nin},
      .listed = 24 * (int64_t)nreads};
  if (base)
    concat_runs_launch(e, n, &r, 0, 0, rows);
  /* The constants' launches and the dims' read x[1] as listed alone. */
  r.x[3] = weights_add_typed(e, emit_str(e, "%s_dims_reads", name), DT_INT64, dims_reads,
                             3 * (int64_t)ndims);
  r.listed = 24 * (int64_t)ndims;
  for (int k = 0, which = 0; k < n->nin; k++) {
    const Tensor *x = n->in[k];
    if (table[5 * k] == 0)
      continue;
    r.x[0] = buf(e, x);
    r.extent[0] = tensor_numel(x) * (int64_t)dtype_size(x->dtype);
    concat_runs_launch(e, n, &r, ++which, table[5 * k + 4], table[5 * k + 3]);
  }
  r.x[0] = "NULL";
  r.extent[0] = 0;
  concat_runs_launch(e, n, &r, -1, 0, 0);
}

bool kernel_concat_blocks(Emitter *e, const Node *n, const ConcatBlocks *b, bool emit_it) {
  const Tensor *y = n->out[0];
  int device = tensor_device(e->g, y);
  int64_t low = INT64_MAX;
  const Tensor *base = NULL;
  for (int k = 0; k < b->count; k++) {
    int64_t at = arena_bytes(b->src[k]);
    if (at < 0 || tensor_device(e->g, b->src[k]) != device)
      return false;
    if (at < low)
      low = at, base = b->src[k];
  }
  if (!emit_it)
    return true;
  DType type = y->dtype;
  int64_t bytes = (int64_t)dtype_size(type);
  int64_t *table = arena_alloc(e->g->arena, sizeof(int64_t) * 3 * (size_t)b->count);
  int64_t *reads = arena_alloc(e->g->arena, sizeof(int64_t) * 3 * (size_t)b->count);
  int nreads = 0;
  for (int k = 0; k < b->count; k++) {
    int64_t *t = table + 3 * k;
    t[0] = arena_bytes(b->src[k]) - low;
    t[1] = b->start[k];
    t[2] = b->size[k];
    add_read(reads, &nreads, 0, t[0], b->rows * b->size[k] * bytes);
  }
  Launch L = {.kernel = sized_kernel(e, "opc_concat_blocks", type), .nx = 4, .rank = 1};
  L.n = b->rows * b->row;
  L.dims[0] = L.n;
  L.x[0] = buf(e, base);
  L.x[1] = "NULL";
  L.x[2] = weights_add_typed(e, emit_str(e, "%s_blocks", y->name), DT_INT64, table,
                             3 * (int64_t)b->count);
  L.x[3] = weights_add_typed(e, emit_str(e, "%s_reads", y->name), DT_INT64, reads,
                             3 * (int64_t)nreads);
  L.x_extent[2] = 3 * (int64_t)b->count;
  L.x_extent[3] = -24 * (int64_t)nreads;
  for (int k = 0; k < 4; k++)
    L.x_bytes[k] = k == 0 || k == 3 ? 1 : 8;
  L.y = buf(e, y);
  L.y_extent = L.n;
  L.y_bytes = (int)bytes;
  L.i[0] = b->count;
  L.i[1] = b->row;
  group_i(&L, 0, 2, "inputs, elements in a row");
  L.note = emit_str(e, "every input's block of each of the %lld rows", (long long)b->rows);
  emit_launch(e, n, &L);
  return true;
}

static void run_concat(Emitter *e, Node *n) {
  Tensor *y = n->out[0];
  int axis = n->p.axis.axis;
  if (y->bounded && y->bound_axis == axis) { /* along the run-time axis: ir/bounds.c */
    run_concat_runs(e, n);
    return;
  }
  int64_t ys[IR_MAX_RANK];
  strides_of(y, ys);
  int64_t at = 0;
  for (int k = 0; k < n->nin; k++) {
    Tensor *x = n->in[k];
    copy_piece(e, n, x, y, at * ys[axis], ys, true);
    at += x->dims[axis];
  }
}

static void run_split(Emitter *e, Node *n) {
  Tensor *x = n->in[0];
  int axis = n->p.split.axis;
  const int64_t *sizes = n->p.split.sizes;
  int64_t xs[IR_MAX_RANK];
  strides_of(x, xs);
  int64_t at = 0;
  for (int k = 0; k < n->nout; k++) {
    Tensor *y = n->out[k];
    if (y && tensor_needed(y))
      copy_piece(e, n, y, x, at * xs[axis], xs, false);
    at += sizes[k];
  }
}

/* A node whose kernel finds a run to be one this program cannot compute
   (a Slice of run-time starts that clamping shortens, a Range past its
   --max-dim): the device buffer it records the fault in, five int64s,
   zeros until then, the first a flag. After the run the host reads it
   and fails the run with the message that `report` (a snprintf's
   format and arguments after the buffer's size, reading `fault`)
   writes; it zeroes the buffer for the next run. net_run_device() does
   not wait for its work, so it leaves the check out. */
typedef struct FaultBuffer {
  const char *field;
} FaultBuffer;

static void add_fault_buffer(Emitter *e, Node *n, const char *report) {
  FaultBuffer *f = node_data(e, n, sizeof *f);
  const char *field = emit_unique(e, emit_str(e, "%s_fault", node_id(e, n)));
  emit_to(e, SEC_FIELDS, "long long *%s; /* a fault its kernel found in a run, or zeros */",
          field);
  emit_call(e, LIB_CUDA, n, "cudaMalloc((void **)&c->%s, 5 * sizeof(long long))", field);
  /* cudaMemset may return before the fill is done on device memory. */
  emit_call(e, LIB_CUDA, n, "cudaMemset(c->%s, 0, 5 * sizeof(long long))", field);
  emit_call(e, LIB_CUDA, n, "cudaDeviceSynchronize()");
  emit_to(e, SEC_TEARDOWN, "cudaFree(c->%s);", field);
  f->field = emit_str(e, "c->%s", field);
  EmitState *st = e->st;
  const char **grown = arena_alloc(e->g->arena, sizeof(char *) * (size_t)(st->nfaults + 1));
  if (st->nfaults)
    memcpy(grown, st->faults, sizeof(char *) * (size_t)st->nfaults);
  grown[st->nfaults++] = f->field;
  st->faults = grown;
  add_after_run(
      e, emit_str(
             e, "{ /* %s (%s): a fault its kernel found */\n"
                "  long long fault[5] = {0};\n"
                "  if (!cuda_ok(c, cudaMemcpy(fault, %s, sizeof fault, cudaMemcpyDeviceToHost), "
                "\"cudaMemcpy\"))\n"
                "    return -1;\n"
                "  if (fault[0]) {\n"
                "    if (!cuda_ok(c, cudaMemset(%s, 0, sizeof fault), \"cudaMemset\") ||\n"
                "        !cuda_ok(c, cudaDeviceSynchronize(), \"cudaDeviceSynchronize\"))\n"
                "      return -1;\n"
                "    snprintf(c->error, sizeof c->error, %s);\n"
                "    return -1;\n"
                "  }\n"
                "}",
             comment_text(e, n->name), op_name(n->op), f->field, f->field, report));
}

static void setup_slice(Emitter *e, Node *n) {
  if (!n->p.slice.run_time || n->p.slice.bounded_axis >= 0 || tensor_numel(n->out[0]) == 0)
    return;
  const Tensor *y = n->out[0];
  const char *want = "";
  for (int d = 0; d < y->rank; d++)
    want = emit_str(e, "%s%s%lldLL", want, d ? ", " : "", (long long)y->dims[d]);
  const char *message = emit_str(
      e, "node '%s' (Slice): along axis %%lld its start %%lld and end %%lld (inputs '%s' and "
         "'%s') clamp to %%lld elements, but this program was compiled for %%lld (the end is "
         "the start plus a constant)", emit_format_text(e, n->name),
      emit_format_text(e, n->in[1]->name), emit_format_text(e, n->in[2]->name));
  add_fault_buffer(e, n, emit_str(e, "\"%s\", fault[1], fault[2], fault[3], fault[4], "
                                     "((const long long[]){%s})[fault[1]]",
                                  emit_c_string(e, message), want));
}

/* The Slice of run-time starts: one launch of opc_slice_at, which reads
   them on the device (opc_kernels.inc). */
static void run_slice_at(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  if (tensor_numel(y) == 0)
    return;
  const Tensor *starts = n->in[1], *ends = n->in[2];
  if (starts->dtype != ends->dtype || (dtype_size(starts->dtype) != 8 && dtype_size(starts->dtype) != 4)) {
    kernel_fail(e, n, "Slice reads run-time starts and ends of one type, int64 or int32, only");
    return;
  }
  FaultBuffer *f = node_data(e, n, sizeof *f);
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], src[IR_MAX_RANK], first = 0;
  strides_of(x, xs);
  strides_of(y, ys);
  Launch L = {.kernel = sized_kernel(e, "opc_slice_at", node_data_type(n)), .rank = y->rank,
              .nx = 4};
  set_element_type(&L, node_data_type(n));
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  for (int d = 0; d < x->rank; d++) {
    int k = n->p.slice.run_element[d];
    if (k < 0)
      first += n->p.slice.start[d] * xs[d];
    src[d] = xs[d] * n->p.slice.step[d];
    L.i[2 + d] = n->p.slice.step[d];
  }
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), src);
  /* Rows 1 and 2 of xstride say which axes read a start, and their
     lengths: the starts and ends are read by index, not at strides. */
  for (int d = 0; d < x->rank; d++) {
    L.xstride[1][d] = n->p.slice.run_element[d];
    L.xstride[2][d] = x->dims[d];
  }
  int64_t low;
  L.x_extent[0] = reach(x->rank, x->dims, xs, &low);
  if (low != 0) {
    kernel_fail(e, n, "Slice of run-time starts reads an input of positive strides only");
    return;
  }
  L.x[1] = buf(e, starts);
  L.x[2] = buf(e, ends);
  L.x_extent[1] = L.x_extent[2] = tensor_numel(starts);
  L.x_bytes[1] = L.x_bytes[2] = (int)dtype_size(starts->dtype);
  L.x[3] = f->field;
  L.x_extent[3] = 5;
  L.x_bytes[3] = 8;
  L.i[0] = first;
  L.i[1] = (int64_t)dtype_size(starts->dtype);
  group_i(&L, 0, 2 + x->rank, "offset of the constant starts, index size, steps");
  if (n->p.slice.bounded_axis >= 0) { /* its run's length: the kernel's count */
    if (!row_major(y)) {
      kernel_fail(e, n, "Slice of a run-time length writes a contiguous output only");
      return;
    }
    L.x[3] = live_dims(e, y);
    L.x_extent[3] = y->rank;
    L.i[10] = n->p.slice.bounded_axis + 1;
    group_i(&L, 10, 1, "the run-time axis + 1; x[3] takes the run's dims");
  }
  L.note = "the starts and ends are read on the device; x[3] takes a fault";
  emit_launch(e, n, &L);
}

static void run_slice(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  if (n->p.slice.run_time) {
    run_slice_at(e, n);
    return;
  }
  const int64_t *start = n->p.slice.start, *step = n->p.slice.step;
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], src[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  int64_t first = 0;
  for (int d = 0; d < x->rank; d++) {
    first += start[d] * xs[d];
    src[d] = xs[d] * step[d];
  }
  copy_launch(e, n, buf(e, y), ys, offset_ptr(e, buf(e, x), first), src, y->rank, y->dims);
}

static void run_expand(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  int64_t ys[IR_MAX_RANK], src[IR_MAX_RANK];
  strides_of(y, ys);
  broadcast_to(x, y->rank, y->dims, src);
  copy_launch(e, n, buf(e, y), ys, buf(e, x), src, y->rank, y->dims);
}

/* ConstantOfShape that runs (its shape a run-time value, ir/bounds.c):
   the value, one element in the weights, copied at stride 0 over the
   whole planned output, its bound; its dims of the run are written after
   (backend/nodes.c). */
static void run_constant_of_shape(Emitter *e, Node *n) {
  Tensor *y = n->out[0];
  const Attr *a = node_attr(n, "value");
  const Tensor *v = a && a->kind == ATTR_TENSOR ? a->t : NULL;
  int64_t zero_i = 0;
  float zero_f = 0;
  const void *value = v ? (v->f32 ? (const void *)v->f32 : (const void *)v->i64)
                        : dtype_is_float(y->dtype) ? (const void *)&zero_f : (const void *)&zero_i;
  if (!value) {
    kernel_fail(e, n, "ConstantOfShape's value holds no element");
    return;
  }
  int64_t ys[IR_MAX_RANK], none[IR_MAX_RANK] = {0};
  strides_of(y, ys);
  const char *x = weights_add_typed(e, "constant_of_shape_value", y->dtype, value, 1);
  copy_launch(e, n, buf(e, y), ys, x, none, y->rank, y->dims);
}

/* Range that runs (its limit a run's size, from 0 by 1: ir/bounds.c): the
   whole bound, start + i * delta; its dims of the run are written after
   (backend/nodes.c). */
static bool range_to_max_dim(const Node *n);

static void run_range(Emitter *e, Node *n) {
  Tensor *y = n->out[0];
  const Tensor *start = n->in[0], *delta = n->in[2];
  if (!start->i64 || !delta->i64) {
    kernel_fail(e, n, "Range runs with a constant integer start and delta only");
    return;
  }
  Launch L = {.kernel = typed_kernel(e, "opc_range", y->dtype), .n = tensor_numel(y)};
  L.y = buf(e, y);
  L.y_extent = tensor_numel(y);
  L.y_bytes = (int)dtype_size(y->dtype);
  L.i[0] = start->i64[0];
  L.i[1] = delta->i64[0];
  group_i(&L, 0, 2, "start, delta");
  if (range_to_max_dim(n)) {
    FaultBuffer *f = node_data(e, n, sizeof *f);
    L.nx = 3;
    L.x[0] = buf(e, n->in[1]);
    L.x_extent[0] = 1;
    L.x_bytes[0] = (int)dtype_size(y->dtype);
    L.x[1] = live_dims(e, y);
    L.x_extent[1] = 1;
    L.x_bytes[1] = 8;
    L.x[2] = f->field;
    L.x_extent[2] = 5;
    L.x_bytes[2] = 8;
    L.i[2] = 1;
    group_i(&L, 2, 1, "the limit is x[0], the length written to x[1]");
  }
  emit_launch(e, n, &L);
}

/* The Range of ir/ops.c range_to_max_dim: a run-time limit of no run's
   size, the output bounded by --max-dim, which names it. */
static bool range_to_max_dim(const Node *n) {
  const Tensor *limit = n->in[1];
  return n->out[0]->bounded && n->out[0]->bound_origin == n->out[0] && !limit->sym &&
         !tensor_is_const(limit);
}

static void setup_range(Emitter *e, Node *n) {
  if (!range_to_max_dim(n))
    return;
  const char *name = emit_format_text(e, n->out[0]->name);
  const char *message = emit_str(
      e, "node '%s' (Range): its output '%s' has %%lld elements in this run, more than the "
         "%%lld that --max-dim %s=%lld allows", emit_format_text(e, n->name), name, name,
      (long long)n->out[0]->dims[0]);
  add_fault_buffer(e, n, emit_str(e, "\"%s\", fault[1], fault[2]", emit_c_string(e, message)));
}

/* Tile: each dim d becomes (repeats, size) with the input's stride 0 along
   the repeats, so the copy has up to twice the rank before merging. */
static void run_tile(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0], *reps = n->in[1];
  if (!reps->i64) {
    kernel_fail(e, n, "Tile's repeats must be constant");
    return;
  }
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  int64_t dims[2 * IR_MAX_RANK], src[2 * IR_MAX_RANK], dst[2 * IR_MAX_RANK];
  int rank = 0;
  for (int d = 0; d < x->rank; d++) {
    if (reps->i64[d] != 1) {
      dims[rank] = reps->i64[d];
      src[rank] = 0;
      dst[rank++] = x->dims[d] * ys[d];
    }
    if (x->dims[d] != 1) {
      dims[rank] = x->dims[d];
      src[rank] = xs[d];
      dst[rank++] = ys[d];
    }
  }
  /* Merge what can be merged before checking the kernel's rank limit. */
  int r = 0;
  for (int d = 0; d < rank; d++) {
    if (r > 0 && dst[r - 1] == dst[d] * dims[d] && src[r - 1] == src[d] * dims[d]) {
      dims[r - 1] *= dims[d];
      dst[r - 1] = dst[d];
      src[r - 1] = src[d];
    } else {
      dims[r] = dims[d];
      dst[r] = dst[d];
      src[r++] = src[d];
    }
  }
  if (r > 8) {
    kernel_fail(e, n, "this Tile needs more than 8 dims of copying");
    return;
  }
  if (r == 0) {
    dims[0] = 1;
    dst[0] = src[0] = 1;
    r = 1;
  }
  copy_launch(e, n, buf(e, y), dst, buf(e, x), src, r, dims);
}

/* DepthToSpace and SpaceToDepth are 6-d transposes. */
static void run_depth_space(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  int64_t b = n->p.depth_space.blocksize;
  bool crd = n->p.depth_space.crd;
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  int64_t dims[6], src[6], dst[6];
  if (n->op == OP_DEPTH_TO_SPACE) {
    /* Output (N, C', H, b1, W, b2); the input channel is b1*b*C' + b2*C' + c'
       (DCR) or c'*b*b + b1*b + b2 (CRD). */
    int64_t c = y->dims[1];
    int64_t d6[6] = {y->dims[0], c, x->dims[2], b, x->dims[3], b};
    int64_t y6[6] = {ys[0], ys[1], b * ys[2], ys[2], b * ys[3], ys[3]};
    int64_t x6[6] = {xs[0], crd ? b * b * xs[1] : xs[1], xs[2],
                     crd ? b * xs[1] : b * c * xs[1], xs[3], crd ? xs[1] : c * xs[1]};
    memcpy(dims, d6, sizeof dims);
    memcpy(dst, y6, sizeof dst);
    memcpy(src, x6, sizeof src);
  } else {
    /* Output channel (b1*b + b2)*C + c reads input (c, h*b + b1, w*b + b2). */
    int64_t c = x->dims[1];
    int64_t d6[6] = {x->dims[0], b, b, c, y->dims[2], y->dims[3]};
    int64_t y6[6] = {ys[0], b * c * ys[1], c * ys[1], ys[1], ys[2], ys[3]};
    int64_t x6[6] = {xs[0], xs[2], xs[3], xs[1], b * xs[2], b * xs[3]};
    memcpy(dims, d6, sizeof dims);
    memcpy(dst, y6, sizeof dst);
    memcpy(src, x6, sizeof src);
  }
  copy_launch(e, n, buf(e, y), dst, buf(e, x), src, 6, dims);
}

/* The end of Gather and GatherElements: the axis and its size, then the
   launch, input and indices in place. */
static void launch_gather(Emitter *e, const Node *n, Launch *L, const Tensor *x, int axis) {
  L->i[0] = axis;
  L->i[1] = x->dims[axis];
  L->i[2] = index_kind(n->in[1]);
  group_i(L, 0, 3, "axis, its size, the indices' kind");
  set_element_type(L, x->dtype);
  L->x_bytes[1] = L->i[2] ? (int)L->i[2] : 4;
  L->note = "x = {input, indices}";
  emit_launch(e, n, L);
}

/* Gather: dims are the input's with the axis replaced by the number of
   indices; the output's index dims must merge into one. */
static void run_gather(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *idx = n->in[1], *y = n->out[0];
  int axis = n->p.axis.axis;
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  Launch L = {.kernel = sized_kernel(e, "opc_gather", x->dtype), .rank = x->rank};
  memcpy(L.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  int64_t count = tensor_numel(idx);
  L.dims[axis] = count;
  int64_t out[IR_MAX_RANK];
  for (int d = 0; d < axis; d++)
    out[d] = ys[d];
  for (int d = axis + 1; d < x->rank; d++)
    out[d] = ys[d - 1 + idx->rank];
  /* The index dims of the output, merged: stride of the innermost. */
  out[axis] = idx->rank > 0 ? ys[axis + idx->rank - 1] : 0;
  for (int j = idx->rank - 1; j > 0; j--)
    if (y->dims[axis + j - 1] > 1 && ys[axis + j - 1] != ys[axis + j] * y->dims[axis + j]) {
      kernel_fail(e, n, "Gather into a strided view of this shape is not supported");
      return;
    }
  set_output(&L, buf(e, y), out);
  set_input(&L, 0, buf(e, x), xs);
  L.x_extent[0] = tensor_numel(x) ? 1 + (x->dims[axis] - 1) * xs[axis] : 0;
  for (int d = 0; d < x->rank; d++)
    if (d != axis)
      L.x_extent[0] += (x->dims[d] - 1) * xs[d];
  int64_t unit[IR_MAX_RANK] = {0};
  set_input(&L, 1, buf(e, idx), unit);
  L.x_extent[1] = count;
  launch_gather(e, n, &L, x, axis);
}

/* The instance of opc_pad_constant for a type: float16 moves its bits
   (b2), bool is uint8. */
static const char *pad_constant_kernel(Emitter *e, DType type) {
  if (type == DT_FLOAT16)
    return "opc_pad_constant_b2";
  return typed_kernel(e, "opc_pad_constant", type == DT_BOOL ? DT_UINT8 : type);
}

/* Pad: pads and the constant from inputs (opset 11+) or attributes. */
static void run_pad(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  const int64_t *pads = n->p.pad.pads;
  int count = n->p.pad.npads;
  float value = n->p.pad.value;
  Tensor *vt = node_input(n, 2);
  if (vt) {
    if (!tensor_is_const(vt) || tensor_numel(vt) != 1) {
      kernel_fail(e, n, arena_printf(e->g->arena, "input '%s' is not a compile-time constant "
                              "(Pad's constant_value must be a constant scalar)", vt->name));
      return;
    }
    value = vt->f32 ? vt->f32[0] : (float)vt->i64[0];
  }
  const int *axes = n->p.pad.axes;
  int naxes = n->p.pad.naxes;
  if (count != 2 * naxes) {
    kernel_fail(e, n, "Pad's pads do not match the input's rank");
    return;
  }
  static const char *const kernels[] = {
      [PAD_CONSTANT] = "opc_pad_constant", [PAD_REFLECT] = "opc_pad_reflect",
      [PAD_EDGE] = "opc_pad_edge",         [PAD_WRAP] = "opc_pad_wrap"};
  bool constant = n->p.pad.mode == PAD_CONSTANT;
  Launch L = {.rank = x->rank};
  /* The constant mode converts its value to the element type; the others
     only move elements. */
  L.kernel = constant ? pad_constant_kernel(e, x->dtype) : sized_kernel(e, kernels[n->p.pad.mode], x->dtype);
  set_element_type(&L, x->dtype);
  if (constant && x->dtype == DT_FLOAT16 && value != 0.0f) {
    kernel_fail(e, n, "Pad of a float16 tensor pads with 0 only");
    return;
  }
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), xs);
  L.x_extent[0] = tensor_numel(x) ? reach(x->rank, x->dims, xs, &(int64_t){0}) : 0;
  for (int k = 0; k < naxes; k++)
    L.i[axes[k]] = pads[k];
  for (int d = 0; d < x->rank; d++)
    L.i[8 + d] = x->dims[d];
  group_i(&L, 0, x->rank, "padding before each dim");
  group_i(&L, 8, x->rank, "the input's dims");
  if (constant) {
    L.f[0] = value;
    group_f(&L, 0, 1, "value");
  } else {
    if (tensor_numel(x) == 0) {
      kernel_fail(e, n, "Pad cannot reflect, repeat or wrap an empty input");
      return;
    }
  }
  emit_launch(e, n, &L);
}

static void run_gather_elements(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *idx = n->in[1], *y = n->out[0];
  int axis = n->p.axis.axis;
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], is[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  strides_of(idx, is);
  Launch L = {.kernel = sized_kernel(e, "opc_gather_elements", x->dtype), .rank = y->rank};
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), xs);
  L.x_extent[0] = reach(x->rank, x->dims, xs, &(int64_t){0});
  set_input(&L, 1, buf(e, idx), is);
  launch_gather(e, n, &L, x, axis);
}

/* ReverseSequence over the input's own dims, not collapsed: the kernel
   needs the time and batch axes as they are. */
static void run_reverse_sequence(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *lens = n->in[1], *y = n->out[0];
  int time = n->p.reverse_sequence.time_axis, batch = n->p.reverse_sequence.batch_axis;
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], ls[IR_MAX_RANK] = {0};
  strides_of(x, xs);
  strides_of(y, ys);
  ls[batch] = 1;
  Launch L = {.kernel = sized_kernel(e, op_kernel(e, n->op), x->dtype), .rank = x->rank};
  memcpy(L.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), xs);
  set_input(&L, 1, buf(e, lens), ls);
  set_element_type(&L, x->dtype);
  L.x_bytes[1] = (int)dtype_size(lens->dtype);
  L.i[0] = time;
  L.i[1] = batch;
  group_i(&L, 0, 2, "time axis, batch axis");
  L.note = "x = {input, sequence lengths}";
  emit_launch(e, n, &L);
}

/* ------------------------------------------------------- grid sampling */

/* GridSample over the output's dims; the kernel reads the input's own
   strides past its N and C, and the grid's components by their stride. */
static void run_grid_sample(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *grid = n->in[1], *y = n->out[0];
  int r = n->p.grid.spatial;
  int64_t xs[IR_MAX_RANK], gs[IR_MAX_RANK], ys[IR_MAX_RANK], low;
  strides_of(x, xs);
  strides_of(grid, gs);
  strides_of(y, ys);
  /* The grid point of output (n, c, ...) is grid (n, ...): none along C. */
  int64_t ga[IR_MAX_RANK] = {gs[0], 0};
  for (int d = 0; d < r; d++)
    ga[2 + d] = gs[1 + d];
  Launch L = {.kernel = op_kernel(e, n->op), .rank = y->rank};
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), xs);
  set_input(&L, 1, buf(e, grid), ga);
  L.x_extent[0] = reach(x->rank, x->dims, xs, &low);
  L.x_extent[1] = reach(grid->rank, grid->dims, gs, &low);
  L.i[0] = n->p.grid.mode;
  L.i[1] = n->p.grid.padding;
  L.i[2] = n->p.grid.align_corners;
  L.i[3] = r;
  group_i(&L, 0, 4, "mode, padding, align_corners, spatial axes");
  for (int d = 0; d < r; d++)
    L.i[4 + d] = x->dims[2 + d];
  group_i(&L, 4, r, "the input's spatial sizes");
  L.i[7] = gs[r + 1];
  group_i(&L, 7, 1, "the grid's stride between components");
  L.note = "x = {input (own strides), grid}";
  emit_launch(e, n, &L);
}

/* RoiAlign over the output's dims, one output a thread. */
static void run_roi_align(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *rois = n->in[1], *batch = n->in[2], *y = n->out[0];
  int64_t xs[IR_MAX_RANK], rs[IR_MAX_RANK], bs[IR_MAX_RANK], ys[IR_MAX_RANK], low;
  strides_of(x, xs);
  strides_of(rois, rs);
  strides_of(batch, bs);
  strides_of(y, ys);
  /* Output (r, c, ph, pw) reads roi r and batch index r: along R only. */
  int64_t ra[4] = {rs[0], 0, 0, 0}, ba[4] = {bs[0], 0, 0, 0};
  Launch L = {.kernel = op_kernel(e, n->op), .rank = 4};
  memcpy(L.dims, y->dims, sizeof(int64_t) * 4);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), xs);
  set_input(&L, 1, buf(e, rois), ra);
  set_input(&L, 2, buf(e, batch), ba);
  L.x_extent[0] = reach(x->rank, x->dims, xs, &low);
  L.x_extent[1] = reach(rois->rank, rois->dims, rs, &low);
  L.x_extent[2] = reach(batch->rank, batch->dims, bs, &low);
  L.x_bytes[2] = 8;
  L.i[0] = x->dims[0];
  L.i[1] = x->dims[2];
  L.i[2] = x->dims[3];
  group_i(&L, 0, 3, "the input's N, H, W");
  L.i[3] = n->p.roi_align.sampling;
  L.i[4] = n->p.roi_align.half_pixel;
  L.i[5] = n->p.roi_align.max_mode;
  group_i(&L, 3, 3, "sampling_ratio, half_pixel, max mode");
  L.i[6] = rs[1];
  group_i(&L, 6, 1, "the rois' stride between coordinates");
  if (rois->bounded) { /* a run's rois (ir/bounds.c): their count in this run */
    int64_t none[4] = {0};
    set_input(&L, 3, live_dims(e, rois), none);
    L.x_extent[3] = rois->rank;
    L.x_bytes[3] = 8;
  }
  L.i[7] = rois->bounded;
  group_i(&L, 7, 1, "whether x[3] holds the rois' dims in this run");
  L.f[0] = n->p.roi_align.scale;
  group_f(&L, 0, 1, "spatial_scale");
  L.note = "x = {input, rois, batch_indices (int64), the rois' dims in this run}";
  emit_launch(e, n, &L);
}

/* AffineGrid over the output's dims: theta's row k for component k. */
static void run_affine_grid(Emitter *e, Node *n) {
  Tensor *theta = n->in[0], *y = n->out[0];
  int r = n->p.grid.spatial;
  int64_t ts[IR_MAX_RANK], ys[IR_MAX_RANK], ta[IR_MAX_RANK] = {0}, low;
  strides_of(theta, ts);
  strides_of(y, ys);
  ta[0] = ts[0];
  ta[r + 1] = ts[1];
  Launch L = {.kernel = op_kernel(e, n->op), .rank = y->rank};
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, theta), ta);
  L.x_extent[0] = reach(theta->rank, theta->dims, ts, &low);
  L.i[0] = n->p.grid.align_corners;
  L.i[1] = r;
  L.i[2] = ts[2];
  group_i(&L, 0, 3, "align_corners, spatial axes, theta's column stride");
  emit_launch(e, n, &L);
}

/* --------------------------------------------------------------- resize */

typedef struct Ratio {
  int64_t num, den;
} Ratio;

static int64_t gcd(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* A positive float32 as an exact ratio of integers: mantissa over a power
   of two. False when it does not fit (absurdly small or large scales). */
static bool float_ratio(float v, Ratio *r) {
  int exp;
  float m = frexpf(v, &exp); /* v = m * 2^exp, m in [0.5, 1) */
  int64_t mant = (int64_t)ldexpf(m, 24);
  exp -= 24;
  if (exp >= 0) {
    if (exp > 30)
      return false;
    r->num = mant << exp;
    r->den = 1;
  } else {
    if (exp < -60)
      return false;
    r->num = mant;
    r->den = (int64_t)1 << -exp;
  }
  int64_t g = gcd(r->num, r->den);
  r->num /= g;
  r->den /= g;
  return true;
}

static const char *const coordinate_modes[] = {
    "half_pixel",           "pytorch_half_pixel", "align_corners",        "asymmetric",
    "tf_half_pixel_for_nn", "tf_crop_and_resize", "half_pixel_symmetric",
};


/* Resize and Upsample: per axis an exact scale, then the axes that do not
   map identically go to the kernel (at most 3). */
static void run_resize(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  int rank = x->rank;
  Ratio scale[IR_MAX_RANK];
  float roi[2 * IR_MAX_RANK];
  for (int d = 0; d < rank; d++) {
    scale[d] = (Ratio){1, 1};
    roi[d] = 0.0f;
    roi[rank + d] = 1.0f;
  }
  int mode = n->p.resize.mode;
  int coord, interp;
  bool exclude = false;
  float cubic_a = -0.75f, extrapolation = 0.0f;
  if (n->op == OP_UPSAMPLE || (e->g->opset > 0 && e->g->opset < 11)) {
    /* Upsample and Resize-10: asymmetric coordinates, nearest rounds down. */
    coord = 3;
    interp = mode == RESIZE_NEAREST ? 2 : 4;
    if (mode != RESIZE_NEAREST && mode != RESIZE_LINEAR && mode != RESIZE_BILINEAR) {
      kernel_fail(e, n, "unsupported mode");
      return;
    }
    Tensor *st = node_input(n, 1);
    const float *s = NULL;
    int count = 0;
    if (st) {
      s = st->f32;
      count = s ? (int)tensor_numel(st) : 0;
    } else if (n->p.resize.scales) {
      s = n->p.resize.scales;
      count = n->p.resize.nscales;
    }
    if (!s || count != rank) {
      kernel_fail(e, n, "the scales must be constant, one per dim");
      return;
    }
    for (int d = 0; d < rank; d++)
      if (!float_ratio(s[d], &scale[d])) {
        kernel_fail(e, n, "a scale is out of range");
        return;
      }
  } else {
    if (n->p.resize.antialias) {
      kernel_fail(e, n, "Resize with antialias is not supported");
      return;
    }
    coord = n->p.resize.coord;
    int nm = n->p.resize.nearest;
    if (coord < 0 || nm < 0) {
      kernel_fail(e, n, "unknown coordinate_transformation_mode or nearest_mode");
      return;
    }
    interp = mode == RESIZE_NEAREST ? nm
             : mode == RESIZE_LINEAR  ? 4
             : mode == RESIZE_CUBIC   ? 5
                                      : -1;
    if (interp < 0) {
      kernel_fail(e, n, "unknown mode");
      return;
    }
    exclude = n->p.resize.exclude_outside;
    cubic_a = n->p.resize.cubic_a;
    extrapolation = n->p.resize.extrapolation;
    const int *axes = n->p.resize.axes;
    int naxes = n->p.resize.naxes;
    Tensor *rt = node_input(n, 1), *st = node_input(n, 2), *zt = node_input(n, 3);
    if (coord == 5) {
      if (!rt || !rt->f32 || tensor_numel(rt) != 2 * naxes) {
        kernel_fail(e, n, rt ? arena_printf(e->g->arena, "input '%s' is not a compile-time constant "
                                     "(tf_crop_and_resize needs a constant roi)", rt->name)
                      : "tf_crop_and_resize needs a roi input");
        return;
      }
      for (int k = 0; k < naxes; k++) {
        roi[axes[k]] = rt->f32[k];
        roi[rank + axes[k]] = rt->f32[naxes + k];
      }
    }
    if (st && tensor_numel(st) > 0) {
      if (!st->f32) {
        kernel_fail(e, n, "Resize's scales must be constant");
        return;
      }
      for (int k = 0; k < naxes; k++)
        if (!float_ratio(st->f32[k], &scale[axes[k]])) {
          kernel_fail(e, n, "a scale is out of range");
          return;
        }
    } else if (zt && zt->i64) {
      AspectPolicy policy = n->p.resize.policy;
      for (int k = 0; k < naxes; k++)
        scale[axes[k]] = (Ratio){zt->i64[k], x->dims[axes[k]]};
      if (policy != ASPECT_STRETCH) {
        /* One scale for all axes: the smallest (not_larger) or largest. */
        bool larger = policy == ASPECT_NOT_SMALLER;
        Ratio pick = scale[axes[0]];
        for (int k = 1; k < naxes; k++) {
          Ratio r = scale[axes[k]];
          bool bigger = r.num * pick.den > pick.num * r.den;
          if (bigger == larger && r.num * pick.den != pick.num * r.den)
            pick = r;
        }
        for (int k = 0; k < naxes; k++)
          scale[axes[k]] = pick;
      }
    } else {
      kernel_fail(e, n, "Resize's scales or sizes must be constant");
      return;
    }
  }
  Launch L = {.kernel = "opc_resize", .rank = rank};
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)rank);
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), xs);
  L.x_extent[0] = reach(rank, x->dims, xs, &(int64_t){0});
  int naxes = 0;
  for (int d = 0; d < rank; d++) {
    bool same = scale[d].num == scale[d].den && y->dims[d] == x->dims[d] && roi[d] == 0.0f &&
                roi[rank + d] == 1.0f;
    /* tf_half_pixel_for_nn shifts by half a pixel: identity only when rounding down. */
    if (coord == 4 && interp != 0 && interp != 2)
      same = false;
    if (same || (x->dims[d] == 1 && y->dims[d] == 1))
      continue;
    if (naxes == 3) {
      kernel_fail(e, n, "Resize of more than 3 axes at once is not supported");
      return;
    }
    L.i[1 + naxes] = d;
    L.i[4 + naxes] = x->dims[d];
    L.i[7 + naxes] = scale[d].num;
    L.i[10 + naxes] = scale[d].den;
    L.f[2 + 2 * naxes] = roi[d];
    L.f[3 + 2 * naxes] = roi[rank + d];
    naxes++;
  }
  if (naxes == 0) {
    copy_launch(e, n, buf(e, y), ys, buf(e, x), xs, rank, y->dims);
    return;
  }
  L.i[0] = naxes;
  L.i[13] = coord;
  L.i[14] = interp;
  L.i[15] = exclude;
  L.f[0] = cubic_a;
  L.f[1] = extrapolation;
  static const char *const interp_names[] = {"nearest, round_prefer_floor",
                                             "nearest, round_prefer_ceil", "nearest, floor",
                                             "nearest, ceil", "linear", "cubic"};
  group_i(&L, 0, 1, "resized axes");
  group_i(&L, 1, naxes, "which");
  group_i(&L, 4, naxes, "their input sizes");
  group_i(&L, 7, naxes, "their scales: numerators");
  group_i(&L, 10, naxes, "denominators");
  group_i(&L, 13, 3, emit_str(e, "%s, %s, exclude_outside", coordinate_modes[coord],
                              interp_names[interp]));
  group_f(&L, 0, 2, "cubic_coeff_a, extrapolation_value");
  if (coord == 5)
    group_f(&L, 2, 2 * naxes, "roi start and end of each resized axis");
  if (resize_nhwc_takes(e, n, &L))
    emit_resize_nhwc(e, n, &L);
  else
    emit_launch(e, n, &L);
}

/* ------------------------------------- the emitters ops.def names */

const OpEmitter kernel_reshape = {.run = run_reshape_copy};
const OpEmitter kernel_transpose = {.run = run_transpose};
const OpEmitter kernel_concat = {.run = run_concat};
const OpEmitter kernel_split = {.run = run_split};
const OpEmitter kernel_slice = {.setup = setup_slice, .run = run_slice};
const OpEmitter kernel_expand = {.run = run_expand};
const OpEmitter kernel_constant_of_shape = {.run = run_constant_of_shape};
const OpEmitter kernel_range = {.setup = setup_range, .run = run_range};
const OpEmitter kernel_tile = {.run = run_tile};
const OpEmitter kernel_depth_space = {.run = run_depth_space};
const OpEmitter kernel_gather = {.run = run_gather};
const OpEmitter kernel_gather_elements = {.run = run_gather_elements};
const OpEmitter kernel_reverse_sequence = {.run = run_reverse_sequence};
const OpEmitter kernel_pad = {.run = run_pad};
const OpEmitter kernel_resize = {.run = run_resize};
const OpEmitter kernel_grid_sample = {.run = run_grid_sample};
const OpEmitter kernel_roi_align = {.run = run_roi_align};
const OpEmitter kernel_affine_grid = {.run = run_affine_grid};
