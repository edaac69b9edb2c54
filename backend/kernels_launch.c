/*
 * kernels_launch.c - building and printing one launch of opc's kernels.
 *
 * A Launch (emit.h) is filled by the operators of kernels_*.c: the
 * iteration space, the output and inputs with their element strides, and
 * the scalar parameters in labelled groups; emit_launch() prints it as one
 * struct opc_kargs and its cuLaunchKernel. row_launch() sets up the row
 * kernels (reductions, softmax, normalisations, losses).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "scalar.h"

/* --------------------------------------------------------------- launches */

/* Marks f[start..start+count) or i[...] as one labelled group. */
void group_f(Launch *L, int start, int count, const char *label) {
  L->fgroup[L->nfgroups++] = (Group){start, count, label};
}

void group_i(Launch *L, int start, int count, const char *label) {
  if (count <= 0)
    return; /* a row of no dims (a reduction over no axes) has nothing to list */
  L->igroup[L->nigroups++] = (Group){start, count, label};
}

/* ".i = {...}," with a comment per group; [k] = where a group skips ahead. */
static void emit_groups(Emitter *e, const Launch *L, const char *field, const Group *groups,
                        int count) {
  if (count == 0)
    return;
  /* In index order, whatever order they were added in. */
  Group *sorted = arena_dup(e->g->arena, groups, sizeof(Group) * (size_t)count);
  for (int k = 1; k < count; k++)
    for (int j = k; j > 0 && sorted[j - 1].start > sorted[j].start; j--) {
      Group t = sorted[j];
      sorted[j] = sorted[j - 1];
      sorted[j - 1] = t;
    }
  const Group *g = sorted;
  const char **text = arena_alloc(e->g->arena, sizeof(char *) * (size_t)count);
  int next = 0;
  for (int k = 0; k < count; k++) {
    const char *s = g[k].start != next ? emit_str(e, "[%d] = ", g[k].start) : "";
    for (int j = g[k].start; j < g[k].start + g[k].count; j++) {
      const char *v = field[0] == 'f' ? emit_float(e, L->f[j])
                      : L->iexpr[j]   ? L->iexpr[j]
                                      : emit_str(e, "%lld", (long long)L->i[j]);
      s = emit_str(e, "%s%s%s", s, j > g[k].start ? ", " : "", v);
    }
    text[k] = s;
    next = g[k].start + g[k].count;
  }
  if (count == 1) {
    emit(e, ".%s = {%s}, /* %s */", field, text[0], g[0].label);
    return;
  }
  int width = 0;
  for (int k = 0; k < count; k++)
    if ((int)strlen(text[k]) + 1 > width)
      width = (int)strlen(text[k]) + 1;
  emit_open(e, ".%s = {", field);
  for (int k = 0; k < count; k++)
    emit(e, "%-*s /* %s */", width, emit_str(e, "%s,", text[k]), g[k].label);
  emit_close(e, "},");
}

/* Each of scalar.h's activation codes: its name, and the kernel that
   kernel_types.py writes for it, "opc_" and its name. */
static const struct {
  const char *code, *kernel;
} activations[] = {
#define ACTIVATION_ROW(NAME, name, params) [OPC_ACT_##NAME] = {"OPC_ACT_" #NAME, "opc_" #name},
    OPC_ACTIVATIONS(ACTIVATION_ROW)
#undef ACTIVATION_ROW
};

Activation kernel_activation(const char *kernel) {
  for (int code = OPC_ACT_NONE + 1; code < OPC_ACT_COUNT; code++)
    if (strcmp(kernel, activations[code].kernel) == 0)
      return code;
  return OPC_ACT_NONE;
}

/* An operand's element size: float32 unless the operator said otherwise. */
static int64_t element_bytes(int bytes) { return bytes ? bytes : 4; }

void emit_launch(Emitter *e, const Node *n, const Launch *L) {
  if (L->n == 0) {
    emit(e, "/* %s: the output is empty, nothing to launch */", L->kernel);
    return;
  }
  emit_open(e, "{");
  if (L->note)
    emit(e, "/* %s */", L->note);
  emit_open(e, "struct opc_kargs a = {");
  if (L->nx > 0) {
    const char *xs = "", *ext = "", *strides = "";
    for (int k = 0; k < L->nx; k++) {
      const char *sep = k ? ", " : "";
      xs = emit_str(e, "%s%s%s", xs, sep, L->x[k] ? L->x[k] : "NULL");
      ext = emit_str(e, "%s%s%lld", ext, sep,
                     (long long)(L->x_extent[k] * element_bytes(L->x_bytes[k])));
      strides = emit_str(e, "%s%s{%s}", strides, sep, int_list(e, L->rank, L->xstride[k]));
    }
    emit(e, ".x = {%s}, .x_extent = {%s},", xs, ext);
    emit(e, ".y = %s, .y_extent = %lld,", L->y,
         (long long)(L->y_extent * element_bytes(L->y_bytes)));
    emit(e, ".n = %lld, .rank = %d, .dims = {%s},", (long long)L->n, L->rank,
         int_list(e, L->rank, L->dims));
    emit(e, ".xstride = {%s},", strides);
  } else {
    emit(e, ".y = %s, .y_extent = %lld,", L->y,
         (long long)(L->y_extent * element_bytes(L->y_bytes)));
    emit(e, ".n = %lld, .rank = %d, .dims = {%s},", (long long)L->n, L->rank,
         int_list(e, L->rank, L->dims));
  }
  emit(e, ".ystride = {%s},", int_list(e, L->rank, L->ystride));
  if (L->y_runs > 1)
    emit(e, ".y_runs = %lld, .y_run_stride = %lld, /* y: a channel slice, a run per pixel */",
         (long long)L->y_runs, (long long)(L->y_run_stride * element_bytes(L->y_bytes)));
  emit_groups(e, L, "f", L->fgroup, L->nfgroups);
  emit_groups(e, L, "i", L->igroup, L->nigroups);
  if (L->act != OPC_ACT_NONE)
    emit(e, ".act = %d, /* %s, in opc's scalar.h */", L->act, activations[L->act].code);
  if (L->adds)
    emit(e, ".adds = %d, /* %s */", L->adds, L->adds > 1 ? "bias and residual" : "bias");
  emit_close(e, "};");
  emit_kernel_launch(e, n, L->kernel, emit_str(e, "%lld", (long long)L->n));
  emit_close(e, "}");
}

/* Elements reachable from the lowest address a view touches, which is
   *low elements from its first element (*low <= 0). */
int64_t reach(int rank, const int64_t *dims, const int64_t *strides, int64_t *low) {
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < rank; d++) {
    if (dims[d] == 0) {
      *low = 0;
      return 0;
    }
    int64_t span = (dims[d] - 1) * strides[d];
    if (span < 0)
      lo += span;
    else
      hi += span;
  }
  *low = lo;
  return hi - lo + 1;
}

static int64_t numel(int rank, const int64_t *dims) {
  int64_t count = 1;
  for (int d = 0; d < rank; d++)
    count *= dims[d];
  return count;
}

/* Whether t's elements lie in C order with no gaps (strides_of's): dims
   of 1, or of 0 in an empty tensor, may have any stride. */
bool row_major(const Tensor *t) {
  int64_t s[IR_MAX_RANK], expect = 1;
  strides_of(t, s);
  for (int d = t->rank - 1; d >= 0; d--) {
    if (t->dims[d] > 1 && s[d] != expect)
      return false;
    expect *= t->dims[d];
  }
  return true;
}

/* A tensor's element strides: its own when it is a view, else contiguous. */
void strides_of(const Tensor *t, int64_t *s) {
  bool set = false;
  for (int d = 0; d < t->rank; d++)
    set = set || t->strides[d] != 0;
  int64_t step = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    s[d] = set || tensor_numel(t) <= 1 ? t->strides[d] : step;
    step *= t->dims[d];
  }
}

/* Strides that read `t` as if broadcast (numpy, aligned right) to dims. */
void broadcast_to(const Tensor *t, int rank, const int64_t *dims, int64_t *s) {
  int64_t own[IR_MAX_RANK];
  strides_of(t, own);
  for (int d = 0; d < rank; d++) {
    int j = d - (rank - t->rank);
    s[d] = j < 0 || (t->dims[j] == 1 && dims[d] != 1) ? 0 : own[j];
  }
}

/* Every operand of the launch holds elements of the given type. */
void set_element_type(Launch *L, DType type) {
  int bytes = (int)dtype_size(type);
  L->y_bytes = bytes;
  for (int k = 0; k < 4; k++)
    L->x_bytes[k] = bytes;
}

/* The type of the elements a node moves or computes: its outputs'. */
DType node_data_type(const Node *n) {
  for (int k = 0; k < n->nout; k++)
    if (n->out[k])
      return n->out[k]->dtype;
  return DT_FLOAT;
}

bool node_in_half(const Node *n) {
  DType t = node_data_type(n);
  return t == DT_FLOAT16 || t == DT_BFLOAT16;
}

const char *dnn_data_type(const Node *n) {
  DType t = node_data_type(n);
  return t == DT_FLOAT16    ? "CUDNN_DATA_HALF"
         : t == DT_BFLOAT16 ? "CUDNN_DATA_BFLOAT16"
                            : "CUDNN_DATA_FLOAT";
}

const char *blas_data_type(const Node *n) {
  DType t = node_data_type(n);
  return t == DT_FLOAT16 ? "CUDA_R_16F" : t == DT_BFLOAT16 ? "CUDA_R_16BF" : "CUDA_R_32F";
}

/* Sets the output of a launch: y over L->dims with the given strides. */
void set_output(Launch *L, const char *y, const int64_t *ystride) {
  int64_t low;
  L->y = y;
  memcpy(L->ystride, ystride, sizeof(int64_t) * (size_t)L->rank);
  L->y_extent = reach(L->rank, L->dims, L->ystride, &low);
  L->n = numel(L->rank, L->dims);
}

/* Adds input x[k] read with the given strides over L->dims. */
void set_input(Launch *L, int k, const char *x, const int64_t *xstride) {
  int64_t low;
  L->x[k] = x;
  memcpy(L->xstride[k], xstride, sizeof(int64_t) * (size_t)L->rank);
  L->x_extent[k] = reach(L->rank, L->dims, L->xstride[k], &low);
  if (k + 1 > L->nx)
    L->nx = k + 1;
}

/* A launch over y's elements (emit.h). */
void launch_over(Emitter *e, Launch *L, const Tensor *y, const Tensor *x) {
  int64_t s[IR_MAX_RANK];
  L->rank = y->rank;
  memcpy(L->dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  strides_of(y, s);
  set_output(L, buf(e, y), s);
  strides_of(x, s);
  set_input(L, 0, buf(e, x), s);
}

/* Puts the dims in the order of the output's strides, largest first, the
   same for every operand: an output stored channels-last (and its
   operands, when they are too) then merges as a contiguous one does.
   Stable, so an output in ONNX's order keeps its dims as they are. */
static void order_by_output(Launch *L) {
  for (int d = 1; d < L->rank; d++)
    for (int j = d; j > 0 && L->ystride[j] > L->ystride[j - 1]; j--) {
      int64_t t = L->dims[j];
      L->dims[j] = L->dims[j - 1];
      L->dims[j - 1] = t;
      t = L->ystride[j];
      L->ystride[j] = L->ystride[j - 1];
      L->ystride[j - 1] = t;
      for (int k = 0; k < L->nx; k++) {
        t = L->xstride[k][j];
        L->xstride[k][j] = L->xstride[k][j - 1];
        L->xstride[k][j - 1] = t;
      }
    }
}

/* Drops dims of size 1 and merges neighbours contiguous in every operand,
   after ordering them by the output's strides: for kernels that only care
   about elements, not coordinates. */
void collapse(Launch *L) {
  order_by_output(L);
  int r = 0;
  for (int d = 0; d < L->rank; d++) {
    if (L->dims[d] == 1)
      continue;
    bool merge = r > 0 && L->ystride[r - 1] == L->ystride[d] * L->dims[d];
    for (int k = 0; k < L->nx; k++)
      merge = merge && L->xstride[k][r - 1] == L->xstride[k][d] * L->dims[d];
    if (merge) {
      L->dims[r - 1] *= L->dims[d];
      L->ystride[r - 1] = L->ystride[d];
      for (int k = 0; k < L->nx; k++)
        L->xstride[k][r - 1] = L->xstride[k][d];
      continue;
    }
    L->dims[r] = L->dims[d];
    L->ystride[r] = L->ystride[d];
    for (int k = 0; k < L->nx; k++)
      L->xstride[k][r] = L->xstride[k][d];
    r++;
  }
  if (r == 0) {
    L->dims[0] = 1;
    L->ystride[0] = 1;
    for (int k = 0; k < L->nx; k++)
      L->xstride[k][0] = 0;
    r = 1;
  }
  L->rank = r;
}

bool kernel_fail(Emitter *e, const Node *n, const char *msg) {
  ir_error(e->g, n, "%s", msg);
  e->failed = true;
  return false;
}

/* Whether the tensor is produced for someone: graph output or used. */
bool tensor_needed(const Tensor *t) { return t && (t->is_output || t->nusers > 0); }

/* ----------------------------------------------------------------- rows */

/* Whether the row runs along a bounded x's run-time axis (ir/bounds.c's
   T_BOUND_REDUCE): its length is then known on the device alone. */
static bool row_along_run(const Tensor *x, const bool *reduced) {
  return x->bounded && reduced[x->bound_axis];
}

/*
 * A row kernel over x, reducing the dims marked in `reduced`: yst gives the
 * output's stride along each of x's dims (ignored along reduced dims for
 * reductions, used for kernels that write whole rows). A row along a
 * bounded x's run-time axis makes that axis the row's first group, alone:
 * every dim before it is 1 (the prefix layout bounds.c asks for), and dims
 * of 1 are left out of such a row; row_run_length then hands the kernel
 * the group's size in this run.
 */
bool row_launch(Emitter *e, const Node *n, Launch *L, const Tensor *x,
                const bool *reduced, const char *y, const int64_t *yst, bool writes_rows) {
  bool run = row_along_run(x, reduced);
  if (run && writes_rows)
    return kernel_fail(e, n, "a row kernel writing whole rows does not take a run-time length");
  int64_t xs[IR_MAX_RANK];
  strides_of(x, xs);
  L->rank = x->rank > 0 ? x->rank : 1;
  int64_t outer_y[IR_MAX_RANK];
  for (int d = 0; d < L->rank; d++) {
    L->dims[d] = x->rank == 0 || reduced[d] ? 1 : x->dims[d];
    outer_y[d] = x->rank == 0 || reduced[d] ? 0 : yst[d];
  }
  if (x->rank == 0)
    xs[0] = 0;
  set_output(L, y, outer_y);
  set_input(L, 0, buf(e, x), xs);
  L->x_extent[0] = reach(x->rank, x->dims, xs, &(int64_t){0});
  /* The row: reduced dims, merged where both layouts allow. */
  int groups = 0;
  int64_t length = 1, y_span = 0;
  for (int d = 0; d < x->rank; d++) {
    if (!reduced[d] || (run && x->dims[d] == 1 && d != x->bound_axis))
      continue;
    length *= x->dims[d];
    y_span += (x->dims[d] - 1) * yst[d];
    int g = groups - 1;
    if (!run && d > 0 && reduced[d - 1] && L->i[5 + g] == xs[d] * x->dims[d] &&
        L->i[9 + g] == yst[d] * x->dims[d]) {
      L->i[1 + g] *= x->dims[d];
      L->i[5 + g] = xs[d];
      L->i[9 + g] = yst[d];
      continue;
    }
    if (groups == 4)
      return kernel_fail(e, n, "the reduced dims do not merge into 4 groups");
    L->i[1 + groups] = x->dims[d];
    L->i[5 + groups] = xs[d];
    L->i[9 + groups] = yst[d];
    groups++;
  }
  L->i[0] = groups;
  L->i[15] = length;
  group_i(L, 0, 1, "the row: groups of dims");
  group_i(L, 1, groups, "their sizes");
  group_i(L, 5, groups, "their input strides");
  if (writes_rows)
    group_i(L, 9, groups, "their output strides");
  group_i(L, 15, 1, "the row's length");
  /* Kernels that write rows reach further than the outer strides say. */
  if (length > 0)
    L->y_extent += y_span;
  return true;
}

/* A reduction's row along a bounded x's run-time axis (row_launch made it
   the first group): x[1] points at the axis's size in this run, which the
   kernel takes as the group's, so that it reduces the run's elements
   alone. Call after set_element_type. */
void row_run_length(Emitter *e, Launch *L, const Tensor *x, const bool *reduced) {
  if (!row_along_run(x, reduced))
    return;
  L->nx = 2;
  L->x[1] = emit_str(e, "(%s + %d)", live_dims(e, x), x->bound_axis);
  L->x_extent[1] = 1;
  L->x_bytes[1] = 8;
  L->note = emit_str(e, "x[1]: the length of the row's first group in this run (of '%s')",
                     x->name);
}

/* Output strides along x's dims for a reduction's output y (keepdims or not). */
void reduced_output_strides(const Tensor *x, const Tensor *y, const bool *reduced,
                            int64_t *yst) {
  int64_t ys[IR_MAX_RANK];
  strides_of(y, ys);
  bool keep = y->rank == x->rank;
  int j = 0;
  for (int d = 0; d < x->rank; d++) {
    if (keep)
      yst[d] = reduced[d] ? 0 : ys[d];
    else
      yst[d] = reduced[d] ? 0 : ys[j++];
  }
}

/* A 1-D or 2-D window's ten kernel arguments, as the
   convolution kernels read them: H, W, KH, KW, strides, dilations and
   leading pads (height first; a 1-D window has a height of 1). */
void window_args(int64_t *i, const Window *win, const Tensor *x) {
  bool flat = win->nspatial == 1;
  int last = win->nspatial - 1; /* the width's window axis */
  const int64_t args[10] = {
      flat ? 1 : x->dims[2],       x->dims[x->rank - 1], /* H, W */
      flat ? 1 : win->kernel[0],   win->kernel[last],
      flat ? 1 : win->stride[0],   win->stride[last],
      flat ? 1 : win->dilation[0], win->dilation[last],
      flat ? 0 : win->pad_begin[0], win->pad_begin[last]};
  memcpy(i, args, sizeof args);
}
