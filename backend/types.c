/*
 * types.c - the element types of run-time tensors: their C names in net.c,
 * the kernel instance each type uses, and the table of which types each
 * operator's emitter handles.
 *
 * Float32 is what everything computes in. The other types a run-time
 * tensor may have (float64, float16, int64, int32, int8, uint8, bool) come
 * from index and shape computations and from casts, so only the operators
 * that carry them in real models take them: data movement (any type, by
 * element size), Cast, integer and float64 arithmetic, comparisons (numbers
 * in, bools out), logic and bitwise operators, Where, indexing (GatherND,
 * the scatters, ArgMax, ArgMin, TopK) and reductions. float16 is a storage
 * type here: moved and cast, and tested by IsNaN and IsInf, only; bfloat16
 * is moved and cast only. Both also run in the cuDNN and cuBLAS operators
 * that --precision fp16|bf16 gives them (node_emitter, emit.c).
 */
#include <string.h>

#include "emit.h"

/* Sets of element types, one bit per ONNX type number. */
enum {
  F32 = 1u << DT_FLOAT,
  F64 = 1u << DT_DOUBLE,
  F16 = 1u << DT_FLOAT16,
  I64 = 1u << DT_INT64,
  I32 = 1u << DT_INT32,
  I8 = 1u << DT_INT8,
  U8 = 1u << DT_UINT8,
  BOOL = 1u << DT_BOOL,
  BF16 = 1u << DT_BFLOAT16,
  ANY = F32 | F64 | F16 | I64 | I32 | I8 | U8 | BOOL,
  MOVED = ANY | BF16, /* what the kernels that copy by element size take */
  HALVES = F32 | F16 | BF16, /* float32, and the 16-bit types computing in float */
  NUMERIC = F32 | F64 | I64 | I32 | I8 | U8,
  SIGNED = F32 | F64 | I64 | I32 | I8,
  WIDE = F32 | F64 | I64 | I32, /* what sums (CumSum) come in */
  INTEGER = I64 | I32 | I8 | U8,
  FLOATS = F32 | F64 | F16, /* IsNaN and IsInf read float16's bits too */
};

/* The element types each kind's emitter handles at run time, for its data
   inputs and outputs (parameter inputs such as indices are checked by
   index_types below). A kind not listed computes in float32 only. */
static const unsigned runtime_types[OP_COUNT] = {
    /* data movement: any type, by element size */
    [OP_IDENTITY] = MOVED, [OP_RESHAPE] = MOVED, [OP_FLATTEN] = MOVED, [OP_SQUEEZE] = MOVED,
    [OP_UNSQUEEZE] = MOVED, [OP_TRANSPOSE] = MOVED, [OP_CONCAT] = MOVED, [OP_SPLIT] = MOVED,
    [OP_SLICE] = MOVED, [OP_EXPAND] = MOVED, [OP_TILE] = MOVED, [OP_GATHER] = MOVED,
    [OP_GATHER_ELEMENTS] = MOVED, [OP_PAD] = ANY, [OP_TRILU] = MOVED,
    /* conversion between any two types */
    [OP_CAST] = MOVED,
    /* arithmetic */
    [OP_ADD] = NUMERIC | F16 | BF16, [OP_SUB] = NUMERIC | F16 | BF16,
    [OP_MUL] = NUMERIC | F16 | BF16, [OP_DIV] = NUMERIC | F16 | BF16, [OP_MOD] = NUMERIC,
    [OP_MAX] = NUMERIC | F16 | BF16, [OP_MIN] = NUMERIC | F16 | BF16, [OP_ABS] = NUMERIC,
    [OP_NEG] = SIGNED, [OP_CUMSUM] = WIDE, [OP_RELU] = SIGNED | F16 | BF16, [OP_SIGN] = NUMERIC,
    /* comparison (numbers in, a bool out), logic and bits, Where (by size) */
    [OP_EQUAL] = NUMERIC | BOOL, [OP_GREATER] = NUMERIC | BOOL, [OP_LESS] = NUMERIC | BOOL,
    [OP_GREATER_OR_EQUAL] = NUMERIC | BOOL, [OP_LESS_OR_EQUAL] = NUMERIC | BOOL,
    [OP_NOT] = BOOL, [OP_AND] = BOOL, [OP_OR] = BOOL, [OP_XOR] = BOOL,
    [OP_BITWISE_AND] = INTEGER, [OP_BITWISE_OR] = INTEGER, [OP_BITWISE_XOR] = INTEGER,
    [OP_BITWISE_NOT] = INTEGER, [OP_BIT_SHIFT] = U8,
    [OP_IS_NAN] = FLOATS | BOOL, [OP_IS_INF] = FLOATS | BOOL, [OP_WHERE] = ANY,
    [OP_CAST_LIKE] = ANY,
    /* indexing: GatherND and the scatters move any type (a scatter's
       reductions take numeric ones: kernels_index.c checks); ArgMax,
       ArgMin and TopK compare numbers and give int64 indices */
    [OP_GATHER_ND] = ANY, [OP_SCATTER_ND] = ANY, [OP_SCATTER_ELEMENTS] = ANY,
    [OP_SCATTER] = ANY, [OP_ARG_MAX] = NUMERIC, [OP_ARG_MIN] = NUMERIC, [OP_TOP_K] = NUMERIC,
    /* reductions: sums, largest and smallest on numbers, the rest (a mean,
       logs, roots) on floating types */
    [OP_REDUCE_SUM] = NUMERIC, [OP_REDUCE_MAX] = NUMERIC | F16 | BF16,
    [OP_REDUCE_MIN] = NUMERIC | F16 | BF16, [OP_REDUCE_MEAN] = F32 | F64 | F16 | BF16, [OP_REDUCE_SUM_SQUARE] = F32 | F64, [OP_REDUCE_PROD] = F32 | F64,
    [OP_REDUCE_LOG_SUM_EXP] = F32 | F64, [OP_REDUCE_L1] = F32 | F64, [OP_REDUCE_L2] = F32 | F64,
    [OP_REDUCE_LOG_SUM] = F32 | F64,
    /* cuDNN's and cuBLAS's 16-bit forms (--precision fp16|bf16), where the
       emitter can print the node that way (OpEmitter.half) */
    [OP_CONV] = HALVES, [OP_GEMM] = HALVES, [OP_MATMUL] = HALVES,
    [OP_MAX_POOL] = HALVES, [OP_AVERAGE_POOL] = HALVES, [OP_GLOBAL_AVERAGE_POOL] = HALVES,
    [OP_GLOBAL_MAX_POOL] = HALVES, /* and the 16-bit reductions above: cuDNN's */
    /* activations with 16-bit instances of their kernels */
    [OP_LEAKY_RELU] = HALVES, [OP_ELU] = HALVES, [OP_SIGMOID] = HALVES, [OP_TANH] = HALVES,
    [OP_HARD_SIGMOID] = HALVES, [OP_HARD_SWISH] = HALVES, [OP_SWISH] = HALVES,
    [OP_MISH] = HALVES, [OP_CLIP] = HALVES, [OP_GELU] = HALVES, [OP_SUM] = HALVES,
    [OP_MEAN] = HALVES,
    /* cuDNN's batch normalisation: 16-bit data, float32 parameters
       (op_input_stays_float) */
    [OP_BATCH_NORM] = HALVES,
};

/* Kinds with an index input read at run time (their labels, for the
   losses): which input it is, counting from 1 so that 0 means none. */
static const signed char index_input_plus_one[OP_COUNT] = {
    [OP_GATHER] = 2,         [OP_GATHER_ELEMENTS] = 2, [OP_GATHER_ND] = 2,
    [OP_SCATTER_ND] = 2,     [OP_SCATTER_ELEMENTS] = 2, [OP_SCATTER] = 2,
    [OP_NLL_LOSS] = 2,       [OP_SCE_LOSS] = 2,
};

static int index_input(OpKind op) { return index_input_plus_one[op] - 1; }

static unsigned types_of(OpKind op) { return runtime_types[op] ? runtime_types[op] : F32; }

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
  return k != index_input(n->op) && (op_info(n->op)->param_inputs & (1u << k));
}

bool check_node_types(Emitter *e, const Node *n) {
  unsigned set = types_of(n->op);
  for (int k = 0; k < n->nout; k++)
    if (n->out[k] && !(set & (1u << n->out[k]->dtype)))
      return unsupported(e, n, n->out[k], "output", set);
  for (int k = 0; k < n->nin; k++) {
    const Tensor *x = n->in[k];
    if (!x || is_parameter(n, k))
      continue;
    if (k == index_input(n->op)) {
      if (!((I64 | I32) & (1u << x->dtype)))
        return unsupported(e, n, x, "indices", I64 | I32);
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
