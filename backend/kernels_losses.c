/*
 * kernels_losses.c - NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
 * as launches of opc's kernels.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/*
 * NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. The labels are an
 * int64 or int32 tensor, computed at run time or a constant (which ops.c
 * checks against the classes). SoftmaxCrossEntropyLoss first
 * writes LogSoftmax over the classes (dim 1) into its log_prob output, or
 * into scratch when nobody reads it; opc_nll_loss then gives each label's
 * loss, into the output (reduction none) or into scratch, which
 * opc_nll_loss_total sums (or averages) into the scalar output.
 */

/* The node's scratch in create(): losses first, then log-probabilities. */
typedef struct LossScratch {
  const char *field; /* "c->..._scratch", or NULL when none is needed */
  int64_t losses;    /* floats for the per-label losses, 0 when unused */
  int64_t log_prob;  /* floats for the log-probabilities, 0 when unused */
} LossScratch;

static LossScratch loss_scratch_size(const Node *n, LossReduction reduction) {
  LossScratch s = {0};
  if (reduction != LOSS_NONE)
    s.losses = tensor_numel(n->in[1]);
  if (n->op == OP_SCE_LOSS && !(n->nout > 1 && tensor_needed(n->out[1])))
    s.log_prob = tensor_numel(n->in[0]);
  return s;
}

static void setup_loss(Emitter *e, Node *n) {
  LossReduction reduction = n->p.loss.reduction;
  LossScratch *s = node_data(e, n, sizeof *s);
  *s = loss_scratch_size(n, reduction);
  int64_t count = s->losses + s->log_prob;
  if (count == 0)
    return;
  const char *field = emit_unique(e, emit_str(e, "%s_scratch", node_id(e, n)));
  emit_to(e, SEC_FIELDS, "float *%s; /* per-label losses, then log-probabilities */", field);
  emit_call(e, LIB_CUDA, n, "cudaMalloc((void **)&c->%s, %lld * sizeof(float))", field,
            (long long)count);
  emit_to(e, SEC_TEARDOWN, "cudaFree(c->%s);", field);
  s->field = emit_str(e, "c->%s", field);
}

/* The parameters both loss kernels read: the labels' kind, ignore_index
   and the number of classes (i[2]..i[5]). */
static void loss_label_params(const Node *n, Launch *L) {
  L->x_bytes[1] = (int)dtype_size(n->in[1]->dtype);
  L->i[2] = index_kind(n->in[1]);
  L->i[3] = n->p.loss.has_ignore;
  L->i[4] = n->p.loss.ignore;
  L->i[5] = n->in[0]->dims[1];
  group_i(L, 2, 4, "the labels' kind, whether ignore_index is set, its value, the classes");
}

/* SoftmaxCrossEntropyLoss's LogSoftmax over the classes into logp. */
static bool loss_log_softmax(Emitter *e, const Node *n, const char *logp, const int64_t *ls) {
  const Tensor *x = n->in[0];
  bool reduced[IR_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    reduced[d] = d == 1;
  Launch L = {.kernel = "opc_log_softmax"};
  if (!row_launch(e, n, &L, x, reduced, logp, ls, true))
    return false;
  emit_launch(e, n, &L);
  return true;
}

/* The weights input as x[2] of a launch (or null), with its stride in i[1]. */
static void loss_weights(Emitter *e, const Node *n, Launch *L) {
  const Tensor *w = node_input(n, 2);
  int64_t none[IR_MAX_RANK] = {0};
  memcpy(L->xstride[2], none, sizeof none);
  L->x[2] = w ? buf(e, w) : NULL;
  L->x_extent[2] = 0;
  L->nx = 3;
  L->i[1] = 0;
  if (w) {
    int64_t ws[IR_MAX_RANK];
    strides_of(w, ws);
    L->i[1] = ws[0];
    L->x_extent[2] = reach(1, w->dims, ws, &(int64_t){0});
  }
  group_i(L, 1, 1, "the weights' stride");
}

static void run_loss(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *labels = n->in[1], *y = n->out[0];
  LossReduction reduction = n->p.loss.reduction;
  const LossScratch *s = node_data(e, n, sizeof *s);
  /* The log-probabilities and their strides. */
  const char *logp = buf(e, x);
  int64_t ls[IR_MAX_RANK];
  strides_of(x, ls);
  if (n->op == OP_SCE_LOSS) {
    if (s->log_prob > 0) {
      logp = emit_str(e, "(%s + %lld)", s->field, (long long)s->losses);
      int64_t step = 1;
      for (int d = x->rank - 1; d >= 0; d--) {
        ls[d] = step;
        step *= x->dims[d];
      }
    } else {
      logp = buf(e, n->out[1]);
      strides_of(n->out[1], ls);
    }
    if (!loss_log_softmax(e, n, logp, ls))
      return;
  }
  const char *label_buf = buf(e, labels);

  /* One iteration per label: dims are the labels', C is left out of x's. */
  Launch L = {.kernel = "opc_nll_loss", .rank = labels->rank};
  memcpy(L.dims, labels->dims, sizeof(int64_t) * (size_t)labels->rank);
  int64_t ys[IR_MAX_RANK], xs[IR_MAX_RANK], lab[IR_MAX_RANK];
  if (reduction == LOSS_NONE) {
    strides_of(y, ys);
    set_output(&L, buf(e, y), ys);
  } else {
    int64_t step = 1;
    for (int d = labels->rank - 1; d >= 0; d--) {
      ys[d] = step;
      step *= labels->dims[d];
    }
    set_output(&L, s->field, ys);
  }
  for (int d = 0; d < labels->rank; d++)
    xs[d] = ls[d == 0 ? 0 : d + 1];
  set_input(&L, 0, logp, xs);
  L.x_extent[0] = reach(x->rank, x->dims, ls, &(int64_t){0});
  int64_t step = 1;
  for (int d = labels->rank - 1; d >= 0; d--) {
    lab[d] = step;
    step *= labels->dims[d];
  }
  set_input(&L, 1, label_buf, lab);
  L.i[0] = ls[1];
  group_i(&L, 0, 1, "the log-probabilities' stride along C");
  loss_weights(e, n, &L);
  loss_label_params(n, &L);
  L.note = "x = {log-probabilities, labels, weights}";
  emit_launch(e, n, &L);
  if (reduction == LOSS_NONE)
    return;

  /* The sum or mean, one iteration. */
  int64_t count = tensor_numel(labels);
  Launch T = {.kernel = "opc_nll_loss_total", .rank = 1, .dims = {1}};
  int64_t zero[IR_MAX_RANK] = {0};
  set_output(&T, buf(e, y), zero);
  set_input(&T, 0, s->field, zero);
  T.x_extent[0] = count;
  set_input(&T, 1, label_buf, zero);
  T.x_extent[1] = count;
  loss_weights(e, n, &T);
  T.i[0] = count;
  loss_label_params(n, &T);
  T.i[6] = reduction == LOSS_MEAN;
  group_i(&T, 0, 1, "the number of labels");
  group_i(&T, 6, 1, reduction == LOSS_MEAN ? "1: the mean" : "0: the sum");
  T.note = "x = {per-label losses, labels, weights}";
  emit_launch(e, n, &T);
}

const OpEmitter kernel_loss = {.setup = setup_loss, .run = run_loss};
