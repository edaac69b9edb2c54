/*
 * infer.c - running the shape functions over a graph, folding the shape
 * arithmetic (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) as it goes
 * so that every shape input is a constant by the time its reader runs.
 */
#include <stdlib.h>

#include "ir.h"

static bool all_inputs_const(const Node *n) {
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] && !tensor_is_const(n->in[i]))
      return false;
  return true;
}

static bool check_arity(Graph *g, Node *n) {
  const OpInfo *info = op_info(n->op);
  if (n->op == OP_INVALID || !info->infer) {
    ir_error(g, n, "unsupported operator");
    return false;
  }
  /* Conv's fourth input is opc's fused residual, not ONNX's. */
  int max_in = n->op == OP_CONV ? 4 : info->max_inputs;
  if (n->nin < info->min_inputs || (max_in >= 0 && n->nin > max_in)) {
    ir_error(g, n, "has %d inputs, expects %d to %d", n->nin, info->min_inputs, max_in);
    return false;
  }
  if (n->nout < info->min_outputs || (info->max_outputs >= 0 && n->nout > info->max_outputs)) {
    ir_error(g, n, "has %d outputs, expects %d to %d", n->nout, info->min_outputs,
             info->max_outputs);
    return false;
  }
  for (int i = 0; i < info->min_inputs; i++)
    if (!n->in[i]) {
      ir_error(g, n, "required input %d is missing", i);
      return false;
    }
  for (int i = 0; i < info->min_outputs; i++)
    if (!n->out[i]) {
      ir_error(g, n, "required output %d is missing", i);
      return false;
    }
  return true;
}

/* A run-time value needs a storage type of net.c (dtype_at_run_time);
   whether the operator's kernels take it is the backend's question. Other
   dtypes pass when the node will be evaluated at compile time, which
   happens when all its inputs are constant. */
static bool check_dtypes(Graph *g, Node *n) {
  unsigned params = op_info(n->op)->param_inputs;
  bool folds = op_is_evaluable(n->op) && all_inputs_const(n);
  for (int i = 0; i < n->nin; i++) {
    Tensor *t = n->in[i];
    if (!t)
      continue;
    if (t->dtype == DT_UNDEFINED || dtype_size(t->dtype) == 0) {
      ir_error(g, n, "input '%s' has no known type", t->name);
      return false;
    }
    if ((params >> i) & 1 || dtype_at_run_time(t->dtype) || folds)
      continue;
    ir_error(g, n, "input '%s' is %s, a type that exists at compile time only (run-time values "
             "are float32, float64, float16, int64, int32, int8, uint8 or bool)",
             t->name, dtype_onnx_name(t->dtype));
    return false;
  }
  return true;
}

/* A constant integer exponent of Pow (allowed since opset 12) becomes a float
   constant, so that the backend sees float32 run-time operands only. */
static void float_exponent(Graph *g, Node *n) {
  Tensor *e = n->op == OP_POW ? node_input(n, 1) : NULL;
  if (!e || !e->i64 || !dtype_is_integer(e->dtype))
    return;
  Tensor *f = graph_add_tensor(g, arena_printf(g->arena, "%s_f32", e->name));
  f->dtype = DT_FLOAT;
  tensor_set_shape(f, e->rank, e->dims);
  int64_t count = tensor_numel(e);
  f->f32 = arena_alloc(g->arena, sizeof(float) * (size_t)(count ? count : 1));
  for (int64_t i = 0; i < count; i++)
    f->f32[i] = (float)e->i64[i];
  n->in[1] = f;
  graph_rebuild_uses(g);
}

bool node_infer(Graph *g, Node *n) {
  float_exponent(g, n);
  return check_arity(g, n) && check_dtypes(g, n) && op_info(n->op)->infer(g, n);
}

bool graph_infer_shapes(Graph *g) {
  if (!graph_toposort(g))
    return false;
  /* A failed node poisons its outputs; their readers are skipped silently
     so that each real problem is reported once. */
  bool *bad = calloc((size_t)g->ntensors + 1, sizeof(bool));
  bool ok = true;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    bool skip = false;
    for (int j = 0; j < n->nin; j++)
      if (n->in[j] && bad[n->in[j]->id])
        skip = true;
    bool done = !skip && node_infer(g, n);
    /* Shape and EyeLike always fold: they read only shapes, which are
       static. Other kinds fold when all their inputs are known. */
    if (done && (n->op == OP_SHAPE || n->op == OP_CONSTANT || n->op == OP_EYE_LIKE ||
                 all_inputs_const(n))) {
      int before = ir_error_count();
      node_fold(g, n); /* false alone just means "not evaluable" */
      done = ir_error_count() == before;
    }
    if (!done) {
      ok = false;
      for (int j = 0; j < n->nout; j++)
        if (n->out[j])
          bad[n->out[j]->id] = true;
    }
  }
  free(bad);
  /* Shape functions may swap in normalised inputs (legacy PRelu slopes). */
  graph_rebuild_uses(g);
  return ok;
}
