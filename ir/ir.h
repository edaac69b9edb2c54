/*
 * ir.h - opc's operator IR: the one data structure every stage shares.
 *
 * A Graph owns an Arena; every Tensor, Node, string and array hanging off
 * the graph is allocated from it and released at once by graph_free().
 * Nothing in here knows about protobuf, CUDA or the emitted program.
 */
#ifndef OPC_IR_H
#define OPC_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define IR_MAX_RANK 8

/* ---------------------------------------------------------------- arena */

typedef struct Arena Arena;

Arena *arena_new(void);
void arena_free(Arena *a);
void *arena_alloc(Arena *a, size_t size);          /* zero-filled, 16-aligned */
void *arena_dup(Arena *a, const void *p, size_t size);
char *arena_strdup(Arena *a, const char *s);
char *arena_printf(Arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------- types */

/* Numbering follows ONNX's TensorProto.DataType so import needs no table. */
typedef enum DType {
  DT_UNDEFINED = 0,
  DT_FLOAT = 1,
  DT_UINT8 = 2,
  DT_INT8 = 3,
  DT_UINT16 = 4,
  DT_INT16 = 5,
  DT_INT32 = 6,
  DT_INT64 = 7,
  DT_STRING = 8,
  DT_BOOL = 9,
  DT_FLOAT16 = 10,
  DT_DOUBLE = 11,
  DT_UINT32 = 12,
  DT_UINT64 = 13,
  DT_BFLOAT16 = 16,
} DType;

const char *dtype_name(DType t);     /* "f32", "i64", ... */
DType dtype_from_name(const char *s); /* inverse; DT_UNDEFINED if unknown */
bool dtype_is_float(DType t);         /* float, double, half, bfloat16 */
bool dtype_is_integer(DType t);       /* every int, uint and bool */

typedef struct Node Node;

/*
 * A value in the graph. Constant data is kept in one canonical form:
 * floating types in `f32`, integer and boolean types in `i64`, whatever the
 * dtype says. Runtime values have neither.
 *
 * A view shares storage with another tensor: `alias_of` is the tensor that
 * owns the storage (never itself a view), `alias_offset` the element offset
 * into it, and `strides` the element strides of the view. Non-views have
 * contiguous strides.
 */
typedef struct Tensor {
  int id;
  const char *name;
  DType dtype;
  int rank;
  int64_t dims[IR_MAX_RANK];
  int64_t strides[IR_MAX_RANK];

  float *f32;   /* constant data of a floating dtype, or NULL */
  int64_t *i64; /* constant data of an integer/bool dtype, or NULL */

  Node *producer; /* NULL for graph inputs and constants */
  int producer_slot;
  Node **users; /* rebuilt by graph_rebuild_uses(); a node appears once per input slot */
  int nusers;

  bool is_input;  /* graph input, fed by the caller */
  bool is_output; /* graph output, returned to the caller */

  struct Tensor *alias_of;
  int64_t alias_offset;

  /* Storage, filled by the memory planner: byte offset in the activation arena. */
  int64_t offset;
} Tensor;

/* ----------------------------------------------------------- attributes */

typedef enum AttrKind {
  ATTR_UNDEFINED,
  ATTR_FLOAT,
  ATTR_INT,
  ATTR_STRING,
  ATTR_TENSOR,
  ATTR_GRAPH, /* kept only so that the importer can name it in an error */
  ATTR_FLOATS,
  ATTR_INTS,
  ATTR_STRINGS,
  ATTR_TENSORS,
  ATTR_GRAPHS,
} AttrKind;

typedef struct Attr {
  const char *name;
  AttrKind kind;
  float f;
  int64_t i;
  const char *s;
  Tensor *t; /* ATTR_TENSOR: a detached constant tensor, not in the graph */
  int n;     /* element count of floats/ints/strings/tensors */
  float *floats;
  int64_t *ints;
  const char **strings;
  Tensor **tensors;
} Attr;

/* ------------------------------------------------------------ operators */

/*
 * Operator kinds. The table in ops.c (op_info) gives each one its ONNX name,
 * arity and shape function. Order is not significant; append new kinds.
 */
typedef enum OpKind {
  OP_INVALID = 0,
  /* convolution and normalisation */
  OP_CONV, OP_CONV_TRANSPOSE, OP_BATCH_NORM, OP_INSTANCE_NORM, OP_LAYER_NORM, OP_LRN,
  /* activations */
  OP_RELU, OP_LEAKY_RELU, OP_PRELU, OP_ELU, OP_SELU, OP_CELU, OP_SIGMOID, OP_TANH,
  OP_HARD_SIGMOID, OP_HARD_SWISH, OP_SOFTPLUS, OP_SOFTSIGN, OP_CLIP, OP_ERF,
  /* unary maths */
  OP_EXP, OP_LOG, OP_SQRT, OP_ABS, OP_NEG, OP_RECIPROCAL, OP_FLOOR, OP_CEIL, OP_ROUND, OP_SIGN,
  OP_SIN, OP_COS, OP_TAN, OP_ASIN, OP_ACOS, OP_ATAN, OP_SINH, OP_COSH, OP_ASINH, OP_ACOSH, OP_ATANH,
  /* elementwise with broadcasting */
  OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_SUM, OP_MAX, OP_MIN, OP_MEAN,
  /* pooling */
  OP_MAX_POOL, OP_AVERAGE_POOL, OP_GLOBAL_AVERAGE_POOL, OP_GLOBAL_MAX_POOL,
  /* data movement and shape */
  OP_CONCAT, OP_SPLIT, OP_SLICE, OP_PAD, OP_GEMM, OP_MATMUL, OP_FLATTEN, OP_RESHAPE,
  OP_SQUEEZE, OP_UNSQUEEZE, OP_TRANSPOSE, OP_TILE, OP_EXPAND, OP_GATHER,
  OP_DEPTH_TO_SPACE, OP_SPACE_TO_DEPTH, OP_RESIZE, OP_UPSAMPLE,
  /* reductions and softmax */
  OP_SOFTMAX, OP_LOG_SOFTMAX, OP_REDUCE_MEAN, OP_REDUCE_SUM, OP_REDUCE_MAX, OP_REDUCE_MIN,
  /* trivial in inference, or compile time only */
  OP_DROPOUT, OP_IDENTITY, OP_CONSTANT, OP_SHAPE, OP_CAST,
  OP_CONSTANT_OF_SHAPE, OP_RANGE,
  /* more operators */ OP_REDUCE_SUM_SQUARE, OP_REDUCE_PROD, OP_REDUCE_LOG_SUM_EXP, OP_REDUCE_L1,
  OP_REDUCE_L2, OP_REDUCE_LOG_SUM, OP_TRILU, OP_GATHER_ELEMENTS, OP_HARDMAX, OP_CUMSUM,
  OP_THRESHOLDED_RELU, OP_SHRINK, OP_MVN, OP_MOD, OP_EYE_LIKE, OP_LP_NORM, OP_GLOBAL_LP_POOL,
  OP_LP_POOL, OP_MISH, OP_GELU,
  /* losses */ OP_NLL_LOSS, OP_SCE_LOSS,
  OP_COUNT
} OpKind;

/* Activation fused into a producing Conv or Gemm. */
typedef enum Activation {
  ACT_NONE,
  ACT_RELU,
  ACT_CLIP,    /* min(max(x, alpha), beta) */
  ACT_SIGMOID,
  ACT_TANH,
  ACT_LEAKY_RELU, /* alpha = slope */
} Activation;

/*
 * Window parameters of Conv, ConvTranspose, MaxPool and AveragePool,
 * resolved by shape inference from the attributes (auto_pad, defaults,
 * ceil_mode folded into the output size). Spatial dims only.
 */
typedef struct Window {
  int nspatial;
  int64_t kernel[3];
  int64_t stride[3];
  int64_t dilation[3];
  int64_t pad_begin[3];
  int64_t pad_end[3];
  int64_t output_padding[3]; /* ConvTranspose only */
  int64_t group;             /* Conv, ConvTranspose */
  bool ceil_mode;            /* pooling */
  bool count_include_pad;    /* AveragePool */
} Window;

/*
 * One operation. Inputs follow the ONNX operator's input order; an omitted
 * optional input is NULL. Two fused extensions:
 *   Conv:  in[3] is an optional residual Z: y = act(conv(x, w) + b + z).
 *   Conv and Gemm: `act` (with act_alpha, act_beta) is applied last.
 */
struct Node {
  int id;
  OpKind op;
  const char *name; /* the ONNX node name, or a generated one */
  Tensor **in;
  int nin;
  Tensor **out;
  int nout;
  Attr *attrs;
  int nattrs;

  Window win; /* Conv, ConvTranspose, MaxPool, AveragePool */
  Activation act;
  float act_alpha, act_beta;

  /* Names of the ONNX nodes folded into this one, for the emitted comments. */
  const char **fused;
  int nfused;

  /* A view node moves no data: its output aliases its input (Reshape,
     in-place Concat, Split along the outer axis). */
  bool is_view;
  bool dead; /* marked for removal by graph_compact() */

  /* Schedule, filled by the scheduling passes. */
  int stage;
  int group;
  int stream;
  int record_event; /* event recorded on `stream` after this node, or -1 */
  int *waits;       /* events waited on before this node */
  int nwaits;
  int *stage_waits; /* of those, the events recorded inside its own stage (profiles) */
  int nstage_waits;
  double cost_us;   /* predicted latency of this node alone */
};

typedef struct Graph Graph;

/* Description of one operator kind. */
typedef struct OpInfo {
  const char *name; /* ONNX op_type */
  int min_inputs, max_inputs;   /* max_inputs -1: variadic */
  int min_outputs, max_outputs;
  /* Infers output dtypes and shapes from the inputs and attributes, fills
     node->win where relevant. Reports an error and returns false on a bad
     shape or dtype. */
  bool (*infer)(Graph *g, Node *n);
} OpInfo;

const OpInfo *op_info(OpKind op);
OpKind op_from_name(const char *onnx_op_type); /* OP_INVALID if unsupported */
const char *op_name(OpKind op);

/* ------------------------------------------------------------- schedule */

typedef struct Stage {
  Node **nodes; /* in issue order */
  int nnodes;
  int ngroups;
  double predicted_us;
} Stage;

/* Schedules are data: passes compute them, the emitter prints them. */
typedef struct Schedule {
  const char *scheduler; /* "sequential", "greedy", "ios", "lios"; NULL before scheduling */
  int nstreams;
  int nevents;
  Stage *stages;
  int nstages;
  Node **order; /* every live non-view node, in the order the host issues them */
  int norder;
  double predicted_us;
  double sequential_us;
  /* search statistics */
  long states, transitions;
  double search_seconds;
  /* predicted makespan of the issued program (no barriers between stages),
     from the scheduler's event simulation; 0 when not computed */
  double simulated_us;
} Schedule;

/* ---------------------------------------------------------------- graph */

struct Graph {
  Arena *arena;
  const char *path; /* the model file, for messages */
  const char *name;
  int64_t opset;

  Tensor **tensors;
  int ntensors, cap_tensors;
  Node **nodes; /* topological order once graph_toposort() has run */
  int nnodes, cap_nodes;
  Tensor **inputs;
  int ninputs;
  Tensor **outputs;
  int noutputs;

  struct NameMap *names; /* tensor name -> Tensor */

  int64_t arena_bytes;  /* activation arena size, from the memory planner */
  Schedule sched;
};

Graph *graph_new(const char *path);
void graph_free(Graph *g);

Tensor *graph_add_tensor(Graph *g, const char *name); /* name NULL: generated */
Tensor *graph_find_tensor(Graph *g, const char *name);
Node *graph_add_node(Graph *g, OpKind op, const char *name, int nin, int nout);
void graph_add_input(Graph *g, Tensor *t);
void graph_add_output(Graph *g, Tensor *t);

/* Sets producer links and use lists from the node list. */
void graph_rebuild_uses(Graph *g);
/* Orders nodes topologically; reports a cycle and returns false. */
bool graph_toposort(Graph *g);
/* Drops nodes marked dead and tensors nothing refers to, then rebuilds uses. */
void graph_compact(Graph *g);
/* Makes every use of `from` a use of `to` (graph outputs included). */
void graph_replace_uses(Graph *g, Tensor *from, Tensor *to);

/* Checks acyclicity, single definition before use, and shape consistency. */
bool graph_verify(Graph *g);
/* Prints the IR in the text format of docs/architecture.md. */
void graph_dump(Graph *g, FILE *f);
/* Reads that text format back: the tests build small graphs with it. */
Graph *graph_parse(const char *text, const char *path);
/* Runs every node's shape function in order. */
bool graph_infer_shapes(Graph *g);

/* ------------------------------------------------------- tensor helpers */

int64_t tensor_numel(const Tensor *t);
size_t dtype_size(DType t);
bool tensor_is_const(const Tensor *t);
void tensor_set_shape(Tensor *t, int rank, const int64_t *dims); /* contiguous strides */
bool tensor_same_shape(const Tensor *a, const Tensor *b);
/* "f32[1,3,224,224]" into buf; returns buf */
char *tensor_type_str(const Tensor *t, char *buf, size_t size);
/* The tensor that owns the storage: itself unless a view. */
Tensor *tensor_storage(Tensor *t);

/* ------------------------------------------------------- node helpers */

const Attr *node_attr(const Node *n, const char *name);
int64_t node_attr_int(const Node *n, const char *name, int64_t dflt);
float node_attr_float(const Node *n, const char *name, float dflt);
const char *node_attr_string(const Node *n, const char *name, const char *dflt);
/* Number of ints, with *out pointing at them; -1 when the attribute is absent. */
int node_attr_ints(const Node *n, const char *name, const int64_t **out);
Attr *node_set_attr(Graph *g, Node *n, const char *name, AttrKind kind);
/* Input `i`, or NULL when absent or beyond nin. */
Tensor *node_input(const Node *n, int i);

/* ------------------------------------------- shape inference and folding */

/* Checks the node's arity and input dtypes against its kind, then runs its
   shape function (outputs' dtype and dims, node->win). Reports and returns
   false on an error. View outputs keep their strides. */
bool node_infer(Graph *g, Node *n);
/* Evaluates a node whose inputs are all constant (or absent): re-infers
   its outputs' shapes, fills their constant data and returns true. Returns
   false, without an error, when the kind is not evaluable at compile time
   or the result would be very large (false with an error when its shapes
   do not infer or, say, an integer divides by zero). Shape folds whenever
   its input's shape is known. */
bool node_fold(Graph *g, Node *n);
/* Whether node_fold can evaluate this kind. */
bool op_is_evaluable(OpKind op);

/* Numpy broadcasting of two shapes into (rank, dims); false when they are
   incompatible. dims needs IR_MAX_RANK entries. */
bool broadcast_shape(int ra, const int64_t *da, int rb, const int64_t *db, int *rank,
                     int64_t *dims);
/* Element strides that read a contiguous tensor of shape (rt, dt) as if it
   had the broadcast shape (rank, dims): 0 along broadcast axes. */
void broadcast_strides(int rt, const int64_t *dt, int rank, const int64_t *dims,
                       int64_t *strides);
/* Element offset, under `strides`, of the index-th element (row-major) of
   the shape (rank, dims). */
int64_t broadcast_offset(int64_t index, int rank, const int64_t *dims, const int64_t *strides);

/* ---------------------------------------------------------- diagnostics */

/*
 * Errors are printed once, where they are detected, in the compiler style
 *   opc: error: model.onnx: node 'conv_3' (Conv): message
 * and the caller returns failure up to main.
 */
void ir_error(const Graph *g, const Node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ir_warning(const Graph *g, const Node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Errors not tied to a graph: file I/O, usage. */
void opc_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Counts errors reported so far (tests use it). */
int ir_error_count(void);

#endif
