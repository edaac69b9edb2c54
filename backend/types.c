/*
 * types.c - the element types of run-time tensors: their C names in net.c,
 * the kernel instance each type uses, and the check of a node's types
 * against what its kind's emitter handles (ops.def's run_types column).
 *
 * Float32 is what everything computes in. The other types a run-time
 * tensor may have (float64, float16, int64, int32, int16, int8, uint64,
 * uint32, uint16, uint8, bool) come from index and shape computations,
 * from casts and from the interface, so only the operators
 * that carry them in real models take them: data movement (any type, by
 * element size), Cast, integer and float64 arithmetic, comparisons (numbers
 * in, bools out), logic and bitwise operators, Where, indexing (GatherND,
 * the scatters, ArgMax, ArgMin, TopK) and reductions. float16 is a storage
 * type here: moved and cast, and tested by IsNaN and IsInf, only; bfloat16
 * is moved and cast only. Both also run in the cuDNN and cuBLAS operators
 * that --precision fp16|bf16 gives them (node_emitter, emit.c). int16,
 * uint16, uint32 and uint64 (TY_RARE_INTS) reach programs mostly at their
 * interface: they are moved and cast, and taken by Max, Min, Mod, Clip,
 * BitShift (the unsigned ones) and Pow's exponent.
 */
#include <string.h>

#include "emit.h"

/* Input 1 of the kinds with T_INDICES holds indices read at run time
   (their labels, for the losses); -1: none. */
static int index_input(OpKind op) { return op_info(op)->traits & T_INDICES ? 1 : -1; }

/* The element types each kind's emitter handles at run time, for its data
   inputs and outputs (ops.def's run_types column; parameter inputs such as
   indices are checked by index_input above). */
static unsigned types_of(OpKind op) { return op_info(op)->run_types; }

uint32_t backend_run_time_types(OpKind op) { return types_of(op); }

/* "f32, f64, ..." for an error message. */
static const char *type_list(Emitter *e, unsigned set) {
  const char *s = "";
  for (int t = 0; t < 32; t++)
    if (set & (1u << t))
      s = emit_str(e, "%s%s%s", s, *s ? ", " : "", dtype_name((DType)t));
  return s;
}

static bool unsupported(Emitter *e, const Node *n, const Tensor *t, const char *role,
                        unsigned set) {
  ir_error(e->g, n, "%s '%s' is %s; %s runs on %s only", role, t->name, dtype_name(t->dtype),
           op_info(n->op)->name, type_list(e, set));
  e->failed = true;
  return false;
}

/* Whether a parameter input (shape, axes, pads) is left out of the check:
   the emitters read those when opc runs, never at run time. */
static bool is_parameter(const Node *n, int k) {
  return k != index_input(n->op) && op_input_is_param(n->op, k);
}

bool check_node_types(Emitter *e, const Node *n) {
  unsigned set = types_of(n->op);
  for (int k = 0; k < n->nout; k++) {
    if (k == 1 && (op_info(n->op)->traits & T_INDEX_OUTPUT)) {
      if (n->out[k] && n->out[k]->dtype != DT_INT64)
        return unsupported(e, n, n->out[k], "indices", TY_I64);
      continue;
    }
    if (n->out[k] && !(set & (1u << n->out[k]->dtype)))
      return unsupported(e, n, n->out[k], "output", set);
  }
  for (int k = 0; k < n->nin; k++) {
    const Tensor *x = n->in[k];
    if (!x || is_parameter(n, k))
      continue;
    if (k == index_input(n->op)) {
      if (!((TY_I64 | TY_I32) & (1u << x->dtype)))
        return unsupported(e, n, x, "indices", TY_I64 | TY_I32);
      continue;
    }
    if (!(set & (1u << x->dtype)))
      return unsupported(e, n, x, "input", set);
  }
  return true;
}

/* ------------------------------------------------------------ C types */

const char *typed_kernel(Emitter *e, const char *base, DType t) {
  return emit_str(e, "%s_%s", base, dtype_name(t));
}

const char *sized_kernel(Emitter *e, const char *base, DType t) {
  return emit_str(e, "%s_b%d", base, (int)dtype_size(t));
}

int index_kind(const Tensor *indices) {
  return indices->dtype == DT_INT64 ? 8 : 4;
}
