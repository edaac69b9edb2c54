/*
 * ops_copy.c - operators that only move data: copies for reshapes that are
 * not views, Concat, Split, Slice and Transpose. Each one becomes a few
 * strided copies, printed as cudaMemcpyAsync, cudaMemcpy2DAsync,
 * cudnnTransformTensor or a launch of opc's copy kernel, whichever is the
 * simplest that is also fast.
 */
#include <string.h>

#include "emit.h"

/* ------------------------------------------------------- strided copies */

/* Shorter contiguous rows go to opc's copy kernel: cudaMemcpy2DAsync moves
   a 2-D copy row by row, and rows of a few bytes (a Slice with a step, a
   Concat along the last axis) run far below the memory's bandwidth. */
enum { MIN_ROW_ELEMENTS = 16 };

/* The kind of copy for a merged plan, from its rows: contiguous in both
   (memcpy), else a kernel, which takes any source strides. */
static CopyKind copy_kind(const CopyPlan *p) {
  bool dst_positive = true, src_positive = true;
  for (int i = 0; i < p->rank; i++) {
    dst_positive = dst_positive && p->dst[i] > 0;
    src_positive = src_positive && p->src[i] > 0;
  }
  if (!dst_positive)
    return COPY_IMPOSSIBLE; /* no output is laid out so */
  int last = p->rank - 1;
  bool rows = src_positive && p->dst[last] == 1 && p->src[last] == 1;
  if (rows && p->rank == 1)
    return COPY_1D;
  if (rows && p->dims[last] >= MIN_ROW_ELEMENTS)
    return p->rank == 2 ? COPY_2D : COPY_CUDNN;
  return COPY_KERNEL;
}

CopyPlan plan_copy(int rank, const int64_t *dims, const int64_t *dst_strides,
                   const int64_t *src_strides) {
  CopyPlan p = {0};
  int64_t count = 1;
  for (int i = 0; i < rank; i++)
    count *= dims[i];
  if (count == 0) {
    p.kind = COPY_NOTHING;
    return p;
  }
  /* Drop unit dims, then merge neighbours that are contiguous in both. */
  for (int i = 0; i < rank; i++) {
    if (dims[i] == 1)
      continue;
    int k = p.rank - 1;
    if (k >= 0 && p.dst[k] == dst_strides[i] * dims[i] && p.src[k] == src_strides[i] * dims[i]) {
      p.dims[k] *= dims[i];
      p.dst[k] = dst_strides[i];
      p.src[k] = src_strides[i];
      continue;
    }
    p.dims[p.rank] = dims[i];
    p.dst[p.rank] = dst_strides[i];
    p.src[p.rank] = src_strides[i];
    p.rank++;
  }
  if (p.rank == 0) {
    p.rank = 1;
    p.dims[0] = 1;
    p.dst[0] = p.src[0] = 1;
  }
  p.kind = copy_kind(&p);
  return p;
}

void copy_setup(Emitter *e, const Node *n, const char *what, CopyPlan *p) {
  if (p->kind != COPY_CUDNN)
    return;
  p->src_desc = emit_tensor_desc(e, n, emit_str(e, "%s_from", what), p->rank, p->dims, p->src, 4,
                                 false);
  p->dst_desc = emit_tensor_desc(e, n, emit_str(e, "%s_to", what), p->rank, p->dims, p->dst, 4,
                                 false);
}

void copy_run(Emitter *e, const Node *n, const CopyPlan *p, const char *dst, const char *src) {
  const char *stream = node_stream(e, n);
  const char *type = dtype_c_type(node_data_type(n)); /* the elements copied */
  switch (p->kind) {
  case COPY_1D:
    emit_call(e, LIB_CUDA, n, "cudaMemcpyAsync(%s, %s, %lld * sizeof(%s), cudaMemcpyDeviceToDevice, %s)",
              dst, src, (long long)p->dims[0], type, stream);
    break;
  case COPY_2D:
    /* Rows of dims[1] elements, pitches in dst/src[0]. */
    emit_call(e, LIB_CUDA, n,
              "cudaMemcpy2DAsync(%s, %lld * sizeof(%s), %s, %lld * sizeof(%s), %lld * sizeof(%s), %lld, cudaMemcpyDeviceToDevice, %s)",
              dst, (long long)p->dst[0], type, src, (long long)p->src[0], type,
              (long long)p->dims[1], type, (long long)p->dims[0], stream);
    break;
  case COPY_CUDNN:
    emit_call(e, LIB_CUDNN, n, "cudnnTransformTensor(%s, %s, %s, %s, %s, %s, %s)", node_cudnn(e, n),
              emit_scalar(e, 1), p->src_desc, src, emit_scalar(e, 0), p->dst_desc, dst);
    break;
  case COPY_KERNEL:
    emit_kernel_copy(e, n, dst, p->dst, src, p->src, p->rank, p->dims);
    break;
  case COPY_NOTHING:
  case COPY_IMPOSSIBLE:
    break;
  }
}

/* "c->x + 12", or just "c->x". */
const char *offset_ptr(Emitter *e, const char *base, int64_t offset) {
  return offset ? emit_str(e, "%s + %lld", base, (long long)offset) : base;
}

/* ---------------------------------------------------- one copy per node */

/*
 * Every operator here is a list of copies: the node data holds their plans,
 * with the element offsets of each copy in its source and destination.
 */
typedef struct Copies {
  int count;
  bool one_launch; /* a Concat copied by opc_concat_blocks */
  CopyPlan plan[64];
  const Tensor *dst[64], *src[64];
  int64_t dst_offset[64], src_offset[64];
} Copies;

static bool add_copy(Copies *c, const Tensor *dst, int64_t dst_offset, const int64_t *dst_strides,
                     const Tensor *src, int64_t src_offset, const int64_t *src_strides, int rank,
                     const int64_t *dims) {
  if (c->count == 64)
    return false;
  int k = c->count++;
  c->plan[k] = plan_copy(rank, dims, dst_strides, src_strides);
  /* cuDNN transforms float32 tensors; other types take opc's copy kernel. */
  if (c->plan[k].kind == COPY_CUDNN && dst->dtype != DT_FLOAT)
    c->plan[k].kind = COPY_KERNEL;
  c->dst[k] = dst;
  c->src[k] = src;
  c->dst_offset[k] = dst_offset;
  c->src_offset[k] = src_offset;
  return c->plan[k].kind != COPY_IMPOSSIBLE;
}

/* A copy of x into y with the same element order (y may have other dims). */
static bool plan_same_order(Copies *c, const Tensor *x, const Tensor *y) {
  if (tensor_same_shape(x, y))
    return add_copy(c, y, 0, y->strides, x, 0, x->strides, y->rank, y->dims);
  if (!buffer_is_contiguous(x) || !buffer_is_contiguous(y))
    return false;
  int64_t count = tensor_numel(y), one = 1;
  return add_copy(c, y, 0, &one, x, 0, &one, 1, &count);
}

static bool plan_concat(Copies *c, const Node *n) {
  const Tensor *y = n->out[0];
  int64_t axis = n->p.axis.axis, at = 0;
  for (int i = 0; i < n->nin; i++) {
    const Tensor *x = n->in[i];
    if (!x)
      continue;
    if (!add_copy(c, y, at * y->strides[axis], y->strides, x, 0, x->strides, x->rank, x->dims))
      return false;
    at += x->dims[axis];
  }
  return true;
}

static bool plan_split(Copies *c, const Node *n) {
  const Tensor *x = n->in[0];
  int64_t axis = n->p.split.axis, at = 0;
  for (int i = 0; i < n->nout; i++) {
    const Tensor *y = n->out[i];
    if (!y)
      continue;
    if (!add_copy(c, y, 0, y->strides, x, at * x->strides[axis], x->strides, y->rank, y->dims))
      return false;
    at += y->dims[axis];
  }
  return true;
}

/* Slice: the output is the input seen with shifted origin and scaled strides. */
static bool plan_slice(Copies *c, const Node *n) {
  const Tensor *x = n->in[0], *y = n->out[0];
  int64_t strides[IR_MAX_RANK], offset = 0;
  for (int a = 0; a < x->rank; a++) {
    offset += n->p.slice.start[a] * x->strides[a];
    strides[a] = x->strides[a] * n->p.slice.step[a];
  }
  return add_copy(c, y, 0, y->strides, x, offset, strides, y->rank, y->dims);
}

static bool plan_transpose(Copies *c, const Node *n) {
  const Tensor *x = n->in[0], *y = n->out[0];
  int64_t perm[IR_MAX_RANK], strides[IR_MAX_RANK];
  for (int i = 0; i < x->rank; i++)
    perm[i] = n->p.transpose.perm[i];
  for (int i = 0; i < y->rank; i++) {
    if (perm[i] < 0 || perm[i] >= x->rank)
      return false;
    strides[i] = x->strides[perm[i]];
  }
  return add_copy(c, y, 0, y->strides, x, 0, strides, y->rank, y->dims);
}

static bool plan_copies(Copies *c, const Node *n) {
  c->count = 0;
  switch (n->op) {
  case OP_CONCAT:
    return plan_concat(c, n);
  case OP_SPLIT:
    return plan_split(c, n);
  case OP_SLICE:
    return plan_slice(c, n);
  case OP_TRANSPOSE:
    return plan_transpose(c, n);
  case OP_DROPOUT:
    /* The mask output (training only) is not supported. */
    if (n->nout > 1 && n->out[1] && (n->out[1]->nusers || n->out[1]->is_output))
      return false;
    return plan_same_order(c, n->in[0], n->out[0]);
  default:
    return plan_same_order(c, n->in[0], n->out[0]);
  }
}

/* A copy as `rows` rows of `size` contiguous elements, read one after
   another and written `pitch` apart; false when it is not one. */
static bool as_rows(const CopyPlan *p, int64_t *rows, int64_t *size, int64_t *pitch) {
  if (p->rank == 1 && p->src[0] == 1) {
    bool dense = p->dst[0] == 1;
    *rows = dense ? 1 : p->dims[0];
    *size = dense ? p->dims[0] : 1;
    *pitch = dense ? *size : p->dst[0];
    return true;
  }
  if (p->rank != 2)
    return false;
  /* The plan keeps the tensor's order of dims, not its storage's: the
     block's dim (unit strides) may come first (channels-last data). */
  int block = p->src[1] == 1 && p->dst[1] == 1 ? 1 : 0, other = 1 - block;
  if (p->src[block] != 1 || p->dst[block] != 1 || p->src[other] != p->dims[block])
    return false;
  *rows = p->dims[other];
  *size = p->dims[block];
  *pitch = p->dst[other];
  return true;
}

/* Whether a Concat's copies are blocks of the output's rows, each input's
   after the one before (DenseNet's channels-last joins: a row per pixel).
   Worth one launch when there are two or more. */
static bool concat_blocks(const Copies *c, ConcatBlocks *b) {
  b->count = 0;
  b->rows = b->row = 0;
  int64_t pitch = 0;
  for (int k = 0; k < c->count; k++) {
    int64_t rows, size, p;
    if (c->plan[k].kind == COPY_NOTHING)
      continue;
    if (!as_rows(&c->plan[k], &rows, &size, &p) || c->src_offset[k] != 0 ||
        c->dst_offset[k] != b->row || (b->count && (rows != b->rows || (rows > 1 && p != pitch))))
      return false;
    b->src[b->count] = c->src[k];
    b->start[b->count] = b->row;
    b->size[b->count++] = size;
    b->rows = rows;
    b->row += size;
    pitch = p;
  }
  return b->count >= 2 && (b->rows == 1 || pitch == b->row);
}

static bool copy_supports(Emitter *e, const Node *n) {
  (void)e;
  Copies c;
  /* A Concat along the run-time axis (ir/bounds.c) places each input after
     the runs before it, which only the device knows: opc_concat_runs. */
  if (n->op == OP_CONCAT && n->out[0] && n->out[0]->bounded &&
      n->out[0]->bound_axis == n->p.axis.axis)
    return false;
  /* A Slice of run-time starts reads them on the device: opc_slice_at. */
  if (n->op == OP_SLICE && n->p.slice.run_time)
    return false;
  /* A Cast that changes the type converts: opc_cast (kernels_movement.c). */
  if (n->nin > 0 && n->in[0] && n->out[0] && n->in[0]->dtype != n->out[0]->dtype)
    return false;
  return n->nin > 0 && n->in[0] && plan_copies(&c, n);
}

static void copy_setup_node(Emitter *e, Node *n) {
  Copies *c = node_data(e, n, sizeof(Copies));
  plan_copies(c, n);
  ConcatBlocks b;
  c->one_launch = n->op == OP_CONCAT && concat_blocks(c, &b) && kernel_concat_blocks(e, n, &b, false);
  if (c->one_launch)
    return;
  for (int i = 0; i < c->count; i++)
    copy_setup(e, n, c->count > 1 ? emit_str(e, "copy%d", i) : "copy", &c->plan[i]);
}

static void copy_run_node(Emitter *e, Node *n) {
  Copies *c = node_data(e, n, sizeof(Copies));
  ConcatBlocks b;
  if (c->one_launch && concat_blocks(c, &b)) {
    kernel_concat_blocks(e, n, &b, true);
    return;
  }
  for (int i = 0; i < c->count; i++)
    copy_run(e, n, &c->plan[i], offset_ptr(e, buf(e, c->dst[i]), c->dst_offset[i]),
             offset_ptr(e, buf(e, c->src[i]), c->src_offset[i]));
}

const OpEmitter copy_op = {
    .setup = copy_setup_node, .run = copy_run_node, .supports = copy_supports};

/* A transfer between devices (node_is_transfer): the passes made its input
   contiguous, so one copy moves it: between GPUs a peer copy, between the
   GPU and the host CPU one to or from the CPU's pinned arena. */
static void transfer_run(Emitter *e, Node *n) {
  NodeSchedule *ns = node_sched(e->g, n);
  Tensor *x = n->in[0], *y = n->out[0];
  int host = e->g->sched.host_device;
  if (host > 0 && (ns->device == host || tensor_device(e->g, x) == host)) {
    bool to_cpu = ns->device == host;
    emit(e, "/* from the %s to the %s */", to_cpu ? "GPU" : "CPU", to_cpu ? "CPU" : "GPU");
    emit_call(e, LIB_CUDA, n, "cudaMemcpyAsync(%s, %s, %lld * sizeof(%s), %s, %s)", buf(e, y),
              buf(e, x), (long long)tensor_numel(y), dtype_c_type(y->dtype),
              to_cpu ? "cudaMemcpyDeviceToHost" : "cudaMemcpyHostToDevice", node_stream(e, n));
    return;
  }
  /* Not cudaMemcpyPeerAsync: CUDA refuses it in a stream capture. Under
     unified addressing a device-to-device copy may join two devices. */
  emit(e, "/* from GPU %d to GPU %d */", tensor_device(e->g, x), ns->device);
  emit_call(e, LIB_CUDA, n, "cudaMemcpyAsync(%s, %s, %lld * sizeof(%s), cudaMemcpyDeviceToDevice, %s)",
            buf(e, y), buf(e, x), (long long)tensor_numel(y), dtype_c_type(y->dtype),
            node_stream(e, n));
}

static const OpEmitter transfer_emitter = {.run = transfer_run};

const OpEmitter *transfer_op_emitter(void) { return &transfer_emitter; }
