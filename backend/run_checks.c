/*
 * run_checks.c - the run-time checks of shape inputs that opc took from a
 * declared output shape (ir/pin.c): their table and code in net.c, and the
 * calls in run() and run_device() that make them before any work is queued.
 * The check is host code over the values the caller gives, so the CPU
 * runtime and CUDA run the same text.
 */
#include <string.h>

#include "emit.h"
#include "run_check_template.h"

static const char *const kind_names[] = {
    [RUN_CHECK_EQUAL] = "RUN_EQUAL",         [RUN_CHECK_RESHAPE] = "RUN_RESHAPE",
    [RUN_CHECK_SQUEEZE] = "RUN_SQUEEZE",     [RUN_CHECK_UNSQUEEZE] = "RUN_UNSQUEEZE",
    [RUN_CHECK_EXPAND] = "RUN_EXPAND",       [RUN_CHECK_TILE] = "RUN_TILE",
    [RUN_CHECK_REDUCE] = "RUN_REDUCE",
};

static const char *type_name(DType t) {
  switch (t) {
  case DT_INT64: return "RUN_I64";
  case DT_INT32: return "RUN_I32";
  case DT_FLOAT: return "RUN_F32";
  default: return "RUN_F64";
  }
}

static const char *dims_list(Emitter *e, const int64_t *v, int n) {
  char buf[IR_MAX_RANK * 2 * 22 + 1] = "";
  for (int i = 0; i < n; i++)
    snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%lld", i ? ", " : "", (long long)v[i]);
  return emit_str(e, "%s", buf);
}

/* Where the checked input sits among the graph's inputs. */
static int input_index(const Graph *g, const Tensor *t) {
  for (int i = 0; i < g->ninputs; i++)
    if (g->inputs[i] == t)
      return i;
  return -1;
}

/* The check code and its table, one entry per check. */
void emit_run_check_code(Emitter *e) {
  Graph *g = e->g;
  if (g->nchecks == 0)
    return;
  for (int i = 0; run_check_template[i]; i++)
    emit(e, "%s", run_check_template[i]);
  emit_blank(e);
  emit(e, "static const struct run_check run_checks[%d] = {", g->nchecks);
  e->indent++;
  for (int i = 0; i < g->nchecks; i++) {
    const RunCheck *k = &g->checks[i];
    emit(e, "{\"%s\", \"%s\", \"%s\", \"%s\",", emit_c_string(e, k->node_name),
         op_name(k->op), emit_c_string(e, k->input->name), emit_c_string(e, k->pinned_by));
    emit(e, " %s, %d, %s, %lld, %d, {%s}, %d, {%s}},", kind_names[k->kind], k->flag,
         type_name(k->input->dtype), (long long)tensor_numel(k->input), k->data_rank,
         dims_list(e, k->data_dims, k->data_rank), k->nwant, dims_list(e, k->want, k->nwant));
  }
  e->indent--;
  emit(e, "};");
  emit_blank(e);
}

/* The checks in run(): over the caller's host buffers. */
void emit_run_checks(Emitter *e) {
  Graph *g = e->g;
  if (g->nchecks == 0)
    return;
  emit(e, "/* The shape inputs opc compiled for (run_checks): before any work. */");
  for (int i = 0; i < g->nchecks; i++) {
    const RunCheck *k = &g->checks[i];
    if (tensor_numel(k->input) == 0) /* an empty list: nothing to read */
      emit(e, "if (run_check_fails(&run_checks[%d], NULL, c->error, sizeof c->error))", i);
    else
      emit(e, "if (run_check_fails(&run_checks[%d], inputs[%d], c->error, sizeof c->error))", i,
           input_index(g, k->input));
    emit(e, "  return -1;");
  }
}

/* Bytes of pinned host memory that run_device() copies the checked inputs
   into, each at a multiple of 8. */
int64_t run_check_staging_bytes(const Graph *g) {
  int64_t total = 0;
  for (int i = 0; i < g->nchecks; i++)
    total += (tensor_numel(g->checks[i].input) * (int64_t)dtype_size(g->checks[i].input->dtype) + 7) / 8 * 8;
  return total;
}

/* The checks in run_device(): the caller's device buffers are copied to
   pinned memory on its stream, which is waited for, then checked. */
void emit_run_device_checks(Emitter *e) {
  Graph *g = e->g;
  if (g->nchecks == 0)
    return;
  emit(e, "/* The shape inputs opc compiled for (run_checks): read back and checked before any work. */");
  int64_t at = 0;
  for (int i = 0; i < g->nchecks; i++) {
    const Tensor *t = g->checks[i].input;
    int64_t bytes = tensor_numel(t) * (int64_t)dtype_size(t->dtype);
    if (bytes == 0)
      continue;
    emit(e, "if (!cuda_ok(c, cudaMemcpyAsync(c->check_staging + %lld, inputs[%d], %lld, "
         "cudaMemcpyDeviceToHost, stream), \"cudaMemcpyAsync of input '%s'\"))",
         (long long)at, input_index(g, t), (long long)bytes, emit_c_string(e, t->name));
    emit(e, "  return -1;");
    at += (bytes + 7) / 8 * 8;
  }
  if (at > 0) {
    emit(e, "if (!cuda_ok(c, cudaStreamSynchronize(stream), \"cudaStreamSynchronize\"))");
    emit(e, "  return -1;");
  }
  at = 0;
  for (int i = 0; i < g->nchecks; i++) {
    const Tensor *t = g->checks[i].input;
    int64_t bytes = tensor_numel(t) * (int64_t)dtype_size(t->dtype);
    emit(e, "if (run_check_fails(&run_checks[%d], %s, c->error, sizeof c->error))", i,
         bytes ? emit_str(e, "c->check_staging + %lld", (long long)at) : "NULL");
    emit(e, "  return -1;");
    at += (bytes + 7) / 8 * 8;
  }
}
