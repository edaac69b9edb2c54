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

#include "../scalar/scalar.h"

#define IR_MAX_RANK 8

/* --------------------------------------------------------------- limits */

/*
 * What opc accepts, all in one place; docs/reliability.md ("Limits") gives
 * the reason for each value. A model past one is rejected at compile time,
 * where it is detected and before anything of that size is allocated.
 */

/* cuDNN's tensor descriptors and cuBLAS's classic API take int sizes and
   strides: a tensor past 2^31-1 elements cannot be handed to them. */
#define LIMIT_TENSOR_ELEMENTS ((int64_t)2147483647)
/* The element limit times the widest run-time type (8 bytes). Kept apart
   so that raising the element limit does not silently allow bigger
   buffers; a smaller --max-memory lowers it (check_tensor_size). */
#define LIMIT_TENSOR_BYTES ((int64_t)1 << 34)
/* Activation arena plus weights, by default: fits the 80 GB of the default
   device (an H100) with room for the CUDA context and cuDNN workspaces.
   --max-memory changes it (Graph.max_memory). */
#define LIMIT_PROGRAM_BYTES ((int64_t)64 << 30)
/* Nodes in one graph: far beyond the models opc is tested on. Compile
   cost grows about linearly (a 200,000-node chain: 9 s, 1.3 GB, and the
   emitted C grows by 1.5-2.4 KB a node), so this bounds what a malformed
   file can ask for to about a minute and a few GB. */
#define LIMIT_NODES 1000000
/* Combinations of copies a serving program's rounds can run: each is a
   CUDA graph captured in create(). */
#define LIMIT_SERVE_COMBINATIONS 256
/* Models in one serving program. */
#define LIMIT_SERVE_MODELS 64
/* Bytes in one tensor, node, graph or attribute name: exporters write a
   few dozen; names are copied into messages and the emitted C. */
#define LIMIT_NAME_BYTES 4096
/* Compile-time evaluation (ir/fold.c, ir/fold_nn.c): results beyond this
   many elements, or evaluations past this many multiply-adds (a few
   seconds), stay run-time work; a kind without kernels is then rejected. */
#define FOLD_MAX_ELEMENTS ((int64_t)1 << 26)
#define FOLD_MAX_WORK ((int64_t)1 << 28)

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
bool dtype_at_run_time(DType t);      /* f32 f64 f16 bf16 i64 i32 i16 i8 u64 u32 u16 u8 bool */
bool dtype_at_interface(DType t);     /* the same: graph inputs and outputs (bf16 as bits) */
/* f rounded to the nearest value of floating type t (ties to even): what a
   cast to t and back gives; f itself for float32 and float64. */
float dtype_round(DType t, float f);
const char *dtype_onnx_name(DType t); /* "float32", "int64", ... */

typedef struct Node Node;

/* An integer opc knows at compile time although the program computes it
   at run time (ir/symbolic.c): scale * (the run-time size of the bounded
   tensor `origin`) + offset; a constant where origin is NULL (scale 0). */
typedef struct SymValue {
  const struct Tensor *origin;
  int64_t scale, offset;
} SymValue;

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
  int users_cap; /* room in users, for replace_reads to add the readers it moves */

  bool is_input;  /* graph input, fed by the caller */
  bool is_output; /* graph output, returned to the caller */

  struct Tensor *alias_of;
  int64_t alias_offset;

  /* Storage, filled by the memory planner: byte offset in the activation arena. */
  int64_t offset;

  /* A bounded tensor (NonZero's output at run time): `dims` are upper
     bounds, planned as the storage, and the dims of each run are written
     by its producer as int64s at `live_offset` in the arena (the memory
     planner places them). One dim, `bound_axis`, is the data's; the
     others are exact. Its elements are stored contiguously in the run's
     dims, so where every dim before bound_axis is 1 (a "prefix" layout)
     the run's elements are the first ones of the planned storage, at the
     planned strides. Which readers may take one, and what their outputs
     become, is ir/bounds.c's. */
  bool bounded;
  int bound_axis;
  /* The tensor whose run-time dim this one's is (the output of the node
     that made the bound, or itself): two bounded operands of one origin
     have one size in every run. */
  const struct Tensor *bound_origin;
  int64_t live_offset;
  /* A small run-time integer tensor computed from the dims of bounded ones
     (Shape, Gather, Concat, ...): each element as a symbol (ir/symbolic.c),
     or NULL where any is not known. */
  SymValue *sym;

  /* The static shape the model declares for it (a graph output's type or
     value_info), set by the importer: ir/pin.c derives from it a shape
     input that is given only at run time. */
  bool declared;
  int declared_rank;
  int64_t declared_dims[IR_MAX_RANK];
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
 * Operator kinds, one per row of ops.def. The table in ops.c (op_info)
 * gives each its ONNX name, arity, shape function, evaluator, parameters
 * and cost class. Order is not significant.
 */
typedef enum OpKind {
  OP_INVALID = 0,
#define OP(kind, ...) OP_##kind,
#include "ops.def"
#undef OP
  OP_COUNT
} OpKind;

/* What passes/cost_model.c models a kind as. */
typedef enum CostClass {
  COST_MEMORY,         /* launch + bytes / bandwidth + one flop per output */
  COST_WINDOW,         /* the same, a window's flops per output (MaxPool, AveragePool) */
  COST_REDUCE,         /* the same, one flop per input element */
  COST_CONV,           /* tiled implicit GEMM */
  COST_CONV_TRANSPOSE, /* GEMM then col2im */
  COST_GEMM,           /* batched GEMM (Gemm, MatMul) */
} CostClass;

/* Activation fused into a producing Conv or Gemm: a code of scalar.h's
   list (OPC_ACT_RELU ...; OPC_ACT_NONE for none). The ops.def row of the
   operator that computes it alone names the same code. */
typedef int Activation;

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
  bool column_major;         /* MaxPool's storage_order 1, for its Indices */
  bool auto_pad;             /* the node has an auto_pad attribute: new pads must reset it */
} Window;

/* Which member of Node.p a kind's shape inference fills (ops.def). */
typedef enum ParamKind {
  PARAMS_NONE,
  PARAMS_WINDOW, /* Node.win only */
  PARAMS_ACT,
  PARAMS_CLIP,
  PARAMS_NORM,
  PARAMS_LRN,
  PARAMS_GEMM,
  PARAMS_AXIS,
  PARAMS_REDUCE,
  PARAMS_SLICE,
  PARAMS_SPLIT,
  PARAMS_TRANSPOSE,
  PARAMS_PAD,
  PARAMS_RESIZE,
  PARAMS_DEPTH_SPACE,
  PARAMS_CAST,
  PARAMS_TRILU,
  PARAMS_MOD,
  PARAMS_LP,
  PARAMS_LOSS,
  PARAMS_SCATTER,
  PARAMS_ARG,
  PARAMS_TOPK,
  PARAMS_ONE_HOT,
  PARAMS_UNIQUE,
  PARAMS_GATHER_ND,
  PARAMS_BIT_SHIFT,
  PARAMS_IS_INF,
  PARAMS_RNN,
  PARAMS_QUANT,
  PARAMS_REVERSE_SEQUENCE,
  PARAMS_GRID,
  PARAMS_NMS,
  PARAMS_COMPRESS,
  PARAMS_GROUP_NORM,
  PARAMS_ROTARY,
  PARAMS_ATTENTION,
  PARAMS_ROI_ALIGN,
  PARAMS_DFT,
  PARAMS_TFIDF,
  PARAMS_SE,
} ParamKind;

typedef enum PadMode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } PadMode;
typedef enum LossReduction { LOSS_NONE, LOSS_SUM, LOSS_MEAN } LossReduction;
/* ScatterND's and ScatterElements' reduction, in the spec's order. */
typedef enum ScatterReduction {
  SCATTER_NONE, SCATTER_ADD, SCATTER_MUL, SCATTER_MAX, SCATTER_MIN,
} ScatterReduction;

/* Resize's and Upsample's modes; -1 in a field means a name opc does not
   know, which the emitter reports. */
typedef enum ResizeMode { RESIZE_NEAREST, RESIZE_LINEAR, RESIZE_CUBIC, RESIZE_BILINEAR } ResizeMode;
/* In the order of the ONNX spec's lists (the emitted kernels take these numbers). */
typedef enum ResizeCoord {
  COORD_HALF_PIXEL, COORD_PYTORCH_HALF_PIXEL, COORD_ALIGN_CORNERS, COORD_ASYMMETRIC,
  COORD_TF_HALF_PIXEL_FOR_NN, COORD_TF_CROP_AND_RESIZE, COORD_HALF_PIXEL_SYMMETRIC,
} ResizeCoord;
typedef enum ResizeNearest {
  NEAREST_ROUND_PREFER_FLOOR, NEAREST_ROUND_PREFER_CEIL, NEAREST_FLOOR, NEAREST_CEIL,
} ResizeNearest;
/* LSTM's, GRU's and RNN's direction attribute. */
typedef enum RnnDirection { RNN_FORWARD, RNN_REVERSE, RNN_BIDIRECTIONAL } RnnDirection;

typedef enum AspectPolicy { ASPECT_STRETCH, ASPECT_NOT_LARGER, ASPECT_NOT_SMALLER } AspectPolicy;

/*
 * A node's attributes resolved by shape inference: defaults applied, axes
 * normalised, opset differences settled. Passes and the backend read these,
 * never the raw attributes. Which member is valid is op_info(op)->params;
 * arrays hang off the graph's arena.
 */
typedef union Params {
  /* The activations' float attributes (ops.def's kernel column names the
     ones each kind's kernel reads) and Gelu's approximation. */
  struct { float alpha, beta, gamma, lambd, bias; bool tanh; } act;
  /* Clip's bounds before opset 11 (later they are inputs 1 and 2). */
  struct { bool has_min, has_max; float min, max; } clip;
  /* BatchNormalization (momentum: its running statistics' in training
     mode), InstanceNormalization, LayerNormalization. */
  struct { float epsilon, momentum; int axis; bool training; } norm;
  struct { int64_t size; float alpha, beta, bias; } lrn;
  struct { float alpha, beta; bool trans_a, trans_b; } gemm;
  /* Concat, Gather, GatherElements, CumSum, Softmax, LogSoftmax, Hardmax
     (coerce2d: before opset 13 every dim from axis on is one). CumSum's
     axis is an input: axis_at_run_time when it is run-time data, which the
     kernel reads (axis is then 0 and means nothing). */
  struct { int axis; bool coerce2d, exclusive, reverse, axis_at_run_time; } axis;
  /* Reduce* and MeanVarianceNormalization: the reduced input axes; noop
     when empty axes with noop_with_empty_axes make it an identity. */
  struct { bool reduced[IR_MAX_RANK]; bool noop, keepdims; } reduce;
  /* per input axis: first index, step (1 when untouched), output extent.
     run_time: some starts are run-time data whose ends are start + a
     constant (ir/ops.c slice_at_run_time); run_element[axis] is then the
     element of starts and ends that slices that axis, -1 for an axis
     whose start is in `start`. Its kernel reads and clamps them on the
     device, and fails the run where the length is not `extent`. */
  struct {
    int64_t start[IR_MAX_RANK], step[IR_MAX_RANK], extent[IR_MAX_RANK];
    bool run_time;
    int run_element[IR_MAX_RANK];
    /* The one run-time axis whose end is not its start plus a constant
       (-1: none): the output is bounded there, at the axis's length by
       the step, its run's length the kernel's. */
    int bounded_axis;
  } slice;
  struct { int axis; int64_t *sizes; /* one per output */ } split;
  struct { int perm[IR_MAX_RANK]; /* perm[i]: input axis of output axis i */ } transpose;
  /* pads[k] and pads[naxes + k]: before and after axis axes[k]; NULL when
     not constant. has_value false: the value is the input constant_value. */
  struct {
    PadMode mode;
    float value;
    const int64_t *pads;
    int npads;
    int axes[IR_MAX_RANK], naxes;
  } pad;
  struct {
    int mode;       /* ResizeMode, or -1 */
    int coord;      /* ResizeCoord, or -1 */
    int nearest;    /* ResizeNearest, or -1 */
    AspectPolicy policy;
    bool antialias, exclude_outside;
    float cubic_a, extrapolation;
    const float *scales; /* Upsample-7's attribute, else NULL */
    int nscales;
    int axes[IR_MAX_RANK], naxes; /* Resize-18's axes, else every dim */
  } resize;
  struct { int64_t blocksize; bool crd; } depth_space;
  struct { DType to; } cast;
  struct { int64_t k; bool upper, k_at_run_time; } trilu; /* k: when known at compile time */
  struct { bool fmod; } mod;
  /* LpNormalization (axis, p), LpPool and GlobalLpPool (p). */
  struct { int axis; int p; } lp;
  struct { LossReduction reduction; bool has_ignore; int64_t ignore; } loss;
  /* ScatterND (axis unused), ScatterElements and its old name Scatter. */
  struct { int axis; ScatterReduction reduction; } scatter;
  /* ArgMax, ArgMin. */
  struct { int axis; bool keepdims, select_last; } arg;
  /* TopK: k_at_run_time when K is run-time data; k is then the bound, the
     axis's length, and the outputs are bounded. */
  struct { int axis; int64_t k; bool largest, sorted, k_at_run_time; } topk;
  /* OneHot: the output axis of the one-hot dimension, its size. */
  struct { int axis; int64_t depth; } one_hot;
  /* Unique: along `axis` when has_axis, else over the flattened input;
     count is the number of unique elements (or slices) found. */
  struct { bool has_axis, sorted; int axis; int64_t count; } unique;
  struct { int batch_dims; } gather_nd;
  struct { bool left; } bit_shift;
  struct { bool negative, positive; } is_inf;
  /* LSTM, GRU and RNN: `gates` blocks of `hidden` rows in W and R (LSTM
     4: i o f c; GRU 3: z r h; RNN 1), `nacts` activations per direction
     (f g h, f g, f) as OPC_RNN_* codes (scalar.h) with their alpha and
     beta; clip 0 when absent; batch_major for layout 1. */
  struct {
    RnnDirection direction;
    int ndirections, gates, nacts;
    int64_t seq, batch, input, hidden;
    int act[2][3];
    float alpha[2][3], beta[2][3];
    float clip;
    bool input_forget, linear_before_reset, batch_major;
  } rnn;
  /* QuantizeLinear, DequantizeLinear: the axis of a per-axis scale, or -1
     for one scale over the whole tensor; lo and hi are the quantized
     type's range, which QuantizeLinear saturates to. */
  struct { int axis; int64_t lo, hi; } quant;
  struct { int time_axis, batch_axis; } reverse_sequence; /* each 0 or 1 */
  /* GridSample and AffineGrid: the spatial axes (2 or 3); GridSample's
     mode (0 linear, 1 nearest, 2 cubic) and padding (0 zeros, 1 border,
     2 reflection), scalar.h's codes; align_corners. */
  struct { int spatial, mode, padding; bool align_corners; } grid;
  /* RoiAlign: out_h by out_w bins per roi, sampling samples per bin and
     axis (0: adaptive), the rois' scale to the input, half_pixel (opset
     16's default; false: output_half_pixel) and max_mode (mode max). */
  struct {
    int64_t out_h, out_w, sampling;
    float scale;
    bool half_pixel, max_mode;
  } roi_align;
  /* DFT and STFT: the transform's length (dft_length, STFT's
     frame_length) and how many input values along the axis it reads
     (samples, or bins for an inverse one-sided DFT: min of the input's
     extent and what the length takes). DFT's axis, or axis_at_run_time
     when its input 2 is run-time data, which the kernel reads (length and
     used are then -1: the axis's own extent, which every axis then shares
     with the output). STFT: frame_step and has_window. */
  struct {
    int axis;
    int64_t length, used, step;
    bool inverse, onesided, axis_at_run_time, has_window;
  } dft;
  /* Compress: along `axis`, or over the flattened input when it is -1. */
  struct { int axis; } compress;
  /* NonMaxSuppression: center_point_box, up to per_class boxes kept per
     batch and class (max_output_boxes_per_class, at most the box count),
     the IoU threshold, and the score threshold where there is one. A
     limit given as run-time data is read by the kernels: per_class is then
     the box count, the bound. */
  struct {
    bool center, has_score_threshold;
    bool per_class_at_run_time, iou_at_run_time, score_at_run_time;
    int64_t per_class;
    float iou_threshold, score_threshold;
  } nms;
  /* GroupNormalization: scale and bias per channel (opset 21) or per
     group (opset 18 to 20). */
  struct { float epsilon; int64_t groups; bool per_channel; } group_norm;
  /* RotaryEmbedding: x is [batch, heads, seq, head] or, in_3d, [batch,
     seq, heads * head]; the first `rot` of each head's dims rotate, in
     pairs (i, i + rot/2), or (2i, 2i + 1) when interleaved. */
  struct { int64_t batch, seq, heads, head, rot; bool in_3d, interleaved; } rotary;
  /* Attention: Q [batch, q_heads, q_seq, head] (or [batch, q_seq,
     q_heads * head] when in_3d, as K, V and Y are then), K and V with
     kv_heads (dividing q_heads) of kv_seq tokens after `past` cached
     ones; scale multiplies Q K^T, softcap (0: none) caps it. */
  struct AttentionParams {
    int64_t batch, q_heads, kv_heads, q_seq, kv_seq, past, head, v_head;
    float scale, softcap;
    bool in_3d, causal;
  } attention;
  /* TfIdfVectorizer: `grams` n-grams, gram g being table[3g] items of
     pool from table[3g + 1], counted into output column table[3g + 2]
     (weighted by weights[g], 1 without weights); `outputs` columns. */
  struct {
    int mode; /* 0 TF, 1 IDF, 2 TFIDF */
    int64_t min_gram, max_gram, max_skip, grams, outputs, pool_size;
    const int64_t *table, *pool;
    const float *weights;
  } tfidf;
  /* SEGate (fuse-squeeze-excite): `hidden` units between its two fully
     connected layers, `inner` the activation after the first (attribute
     `inner`, an act_name); the gate's own activation is Node.act. */
  struct { int64_t hidden; Activation inner; } se;
} Params;

/*
 * One operation. Inputs follow the ONNX operator's input order; an omitted
 * optional input is NULL. Three fused extensions:
 *   Conv:  in[3] is an optional residual Z: y = act(conv(x, w) + b + z).
 *   Conv and Gemm: `act` (with act_alpha, act_beta) is applied last.
 *   A kind with T_FUSED_BIAS (MatMul): one input after ONNX's, a bias per
 *   output column that fuse-bias folded in from an Add.
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

  Window win; /* Conv, ConvTranspose, MaxPool, AveragePool, LpPool */
  Params p;   /* the rest, by op_info(op)->params */
  Activation act;
  float act_alpha, act_beta;

  /* Names of the ONNX nodes folded into this one, for the emitted comments. */
  const char **fused;
  int nfused;

  /* A view node moves no data: its output aliases its input (Reshape,
     in-place Concat, Split along the outer axis). */
  bool is_view;
  bool dead; /* marked for removal by graph_compact() */

  /* In a program that serves several models (Graph.serve): the copy of a
     model this node belongs to; -1 otherwise. */
  int instance;

  /* A Loop run at run time (OP_LOOP): its body, a graph of its own in
     the same arena. Body inputs: the iteration number (int64, rank 0),
     the condition (bool, rank 0), the carried values, then the outer
     values the body reads (the node's inputs from 2 on, in that order);
     body outputs: the condition, then the carried values. An If run as a
     conditional node (OP_IF): body is the then branch and else_body the
     else branch; each body's inputs are the outer values it reads (the
     node's inputs after the condition: the then body's, then the else
     body's), its outputs the If's. NULL for every other kind. */
  struct Graph *body, *else_body;
};

typedef struct Graph Graph;

/* Where a kind's work can happen (ops.def). */
typedef enum Evaluation {
  AT_RUN_TIME,     /* the backend has kernels; folds when its inputs are constant */
  AT_COMPILE_TIME, /* no kernels: every input must be a constant, and it folds */
  FROM_SHAPES,     /* reads only its inputs' shapes: always folds (Shape, Size) */
} Evaluation;

/* Sets of element types, one bit per DType: the types a kind's run-time
   code takes (ops.def's run_types column; backend/types.c checks them). */
enum {
  TY_F32 = 1u << DT_FLOAT,
  TY_F64 = 1u << DT_DOUBLE,
  TY_F16 = 1u << DT_FLOAT16,
  TY_BF16 = 1u << DT_BFLOAT16,
  TY_I64 = 1u << DT_INT64,
  TY_I32 = 1u << DT_INT32,
  TY_I8 = 1u << DT_INT8,
  TY_U8 = 1u << DT_UINT8,
  TY_BOOL = 1u << DT_BOOL,
  TY_I16 = 1u << DT_INT16,
  TY_U16 = 1u << DT_UINT16,
  TY_U32 = 1u << DT_UINT32,
  TY_U64 = 1u << DT_UINT64,
  TY_ANY = TY_F32 | TY_F64 | TY_F16 | TY_I64 | TY_I32 | TY_I8 | TY_U8 | TY_BOOL,
  /* the integers that reach a program mostly at its interface: data
     movement, Cast, Max, Min, Mod and BitShift take them */
  TY_RARE_INTS = TY_I16 | TY_U16 | TY_U32 | TY_U64,
  TY_MOVED = TY_ANY | TY_BF16 | TY_RARE_INTS, /* what the kernels that copy by element size take */
  TY_HALVES = TY_F32 | TY_F16 | TY_BF16, /* float32, and the 16-bit types computing in float */
  TY_NUMERIC = TY_F32 | TY_F64 | TY_I64 | TY_I32 | TY_I8 | TY_U8,
  TY_SIGNED = TY_F32 | TY_F64 | TY_I64 | TY_I32 | TY_I8,
  TY_WIDE = TY_F32 | TY_F64 | TY_I64 | TY_I32, /* what sums (CumSum) come in */
  TY_INTEGER = TY_I64 | TY_I32 | TY_I8 | TY_U8,
  TY_FLOATS = TY_F32 | TY_F64 | TY_F16, /* IsNaN and IsInf read float16's bits too */
  /* the integer types Pow's exponent may have beside its base's (run_pow) */
  TY_POW_EXPONENTS = TY_I8 | TY_U8 | TY_RARE_INTS,
};

/* Traits of a kind (ops.def's traits column), asked by passes and the
   backend through op_info()->traits. */
enum {
  /* Runs in 16 bits when its data input is 16-bit, float16 or bfloat16
     (--precision): it moves elements, or opc's kernels compute it in
     float32 between 16-bit loads and stores, or cuDNN takes it so. */
  T_FOLLOWS_HALF = 1u << 0,
  /* The same in float16 only: cuDNN's means, maxima and minima
     (cudnnReduceTensor refuses bfloat16 data). */
  T_FOLLOWS_F16 = 1u << 1,
  /* Reads and writes each operand with any strides, so either channel
     order (choose-layout changes the layout across it at no cost). */
  T_ANY_LAYOUT = 1u << 2,
  /* Inputs after the first stay float32 beside 16-bit data (cuDNN's
     batch normalisation parameters): op_input_stays_float(). */
  T_FLOAT_PARAMS = 1u << 3,
  /* Input 1 holds indices (int32 or int64) read at run time. */
  T_INDICES = 1u << 4,
  /* Fused into a Conv or Gemm (the act column), the activation takes
     Node.act_alpha, and Node.act_beta. */
  T_ACT_ALPHA = 1u << 5,
  T_ACT_BETA = 1u << 6,
  /* Its kernel is written once over the element types, each instance
     named with its type ("opc_add_i64", "opc_relu_f32"). */
  T_TYPED_KERNEL = 1u << 7,
  /* Takes an activation fused into its output (Node.act: fuse-activation). */
  T_FUSES_ACT = 1u << 8,
  /* Its kernel has one instance per element size ("opc_where_b4"). */
  T_SIZED_KERNEL = 1u << 9,
  /* Its library form (a cuDNN call) writes through a tensor descriptor,
     so the CPU runtime's race checker sees each element it writes
     (concat-in-place). */
  T_EXACT_WRITES = 1u << 10,
  /* Its first output is its first input's elements, unchanged, in another
     shape or the same, where its type stays and its other outputs are
     unused (Reshape, Identity, a Cast to its own type, inference's
     Dropout): alias-reshape makes it a view of a contiguous input. */
  T_RESHAPES = 1u << 11,
  /* A cuDNN call whose 4-D operands share one layout, either channel
     order, where it is 2-D, one output, along the channels, and any 4-D
     filter a constant that can be reordered: choose-layout groups its
     operands. */
  T_SAME_LAYOUT = 1u << 12,
  /* Its kernel has one instance per quantized type, named by it
     ("opc_quantize_linear_u8"), each computing in float32: float32 is in
     its run_types for its other operands, with no instance of its own. */
  T_QUANTIZED_KERNEL = 1u << 13,
  /* Output 1 holds int64 indices into its input, whatever the data's
     type (MaxPool's Indices): backend/types.c checks it as such. */
  T_INDEX_OUTPUT = 1u << 14,
  /* opc's own kind, which only a pass makes (SEGate): the ONNX reader
     refuses a node of that op_type as it would an unknown one. */
  T_INTERNAL = 1u << 15,
  /* Elementwise: output element k reads the inputs' elements at k's own
     position, broadcast. A bounded input passes its bound on (ir/bounds.c):
     the kernel runs over the planned storage, and the run's dims are the
     input's. */
  T_BOUND_ELEMENTWISE = 1u << 16,
  /* Gather's rule for a bounded input or bounded indices (ir/bounds.c). */
  T_BOUND_GATHER = 1u << 17,
  /* Transpose's: one that keeps the dims other than 1 in order moves a
     bounded input's elements nowhere (ir/bounds.c). */
  T_BOUND_TRANSPOSE = 1u << 18,
  /* Slice's and Split's: a bounded input cut along other axes, its
     run-time one whole; Concat's: bounded inputs of one origin joined
     along another axis, or of any origins and static ones joined along
     the run-time axis, the output a bound of its own (ir/bounds.c). */
  T_BOUND_SLICES = 1u << 19,
  /* Its kernel reads a bounded input's dims of the run itself, and counts
     only the run's elements (NonZero, TopK along the run-time axis,
     NonMaxSuppression of boxes of a run, IfSelect of a bounded branch):
     its outputs are bounds of their own (ir/bounds.c). */
  T_BOUND_COUNTS = 1u << 20,
  /* Shape and Size: of a bounded input they run, reading its dims of the
     run, where they otherwise fold (ir/bounds.c). */
  T_BOUND_SHAPE = 1u << 21,
  /* Reduce* and ArgMax/ArgMin: over a bounded input's run-time axis its
     kernel reads the run's length and reduces the run's elements alone,
     the output static; along other axes the output stays bounded
     (ir/bounds.c). */
  T_BOUND_REDUCE = 1u << 22,
  /* Takes one input more than ONNX's, opc's own: a bias along the output's
     last axis, one value per column, that fuse-bias folds in from an Add
     (MatMul: cuBLASLt adds it in the GEMM's epilogue). */
  T_FUSED_BIAS = 1u << 23,
  /* ConstantOfShape, Expand and Range: an output shape (or Range's limit)
     that is a run-time value of one origin's run (ir/symbolic.c) makes
     the output bounded, of that origin; the kernel fills the bound
     (ir/bounds.c). */
  T_BOUND_FILL = 1u << 24,
  /* RoiAlign: rois (and batch_indices) of a run, their kernel reading the
     run's count and computing its rois alone; the output bounded along
     its rois' axis, of their origin (ir/bounds.c). */
  T_BOUND_ROIS = 1u << 25,
  /* ScatterElements along a run-time axis: updates and indices of a run,
     their kernel reading its length there; the data bounded along the
     axis or static, the output as the data (ir/bounds.c). */
  T_BOUND_SCATTER = 1u << 26,
  /* Gemm and MatMul of a left operand whose rows are a run's, Softmax
     along an axis after the run-time one: every planned row computed
     from its own, the output's rows of the run those of the run's
     (ir/bounds.c). */
  T_BOUND_ROWS = 1u << 27,
  /* Its outputs' elements are its data inputs' elements (those not
     parameters), placed by position with no arithmetic (Concat, Split,
     Slice, Transpose, the reshapes): a per-tensor quantization commutes
     with it, Q(op(DQ(a), DQ(b))) = op(Q(DQ(a)), Q(DQ(b))), so fuse-qdq
     runs it on the quantized bytes. */
  T_MOVES_VALUES = 1u << 28,
  /* Its output's elements are some of its data input's, chosen by their
     order (MaxPool's maxima): a non-decreasing map commutes with it, and
     Q(DQ(x)) is one where both scales are positive, so fuse-qdq runs it
     on the quantized bytes as it does T_MOVES_VALUES kinds. */
  T_SELECTS_VALUES = 1u << 29,
};

/* Description of one operator kind: a row of ops.def. */
typedef struct OpInfo {
  const char *name; /* ONNX op_type */
  int min_inputs, max_inputs;   /* max_inputs -1: variadic */
  int min_outputs, max_outputs;
  /* Infers output dtypes and shapes from the inputs and attributes, fills
     node->win and node->p. Reports an error and returns false on a bad
     shape or dtype. */
  bool (*infer)(Graph *g, Node *n);
  /* Fills the outputs' constant data, shapes already inferred; NULL when
     the kind is never evaluated at compile time. */
  bool (*fold)(Graph *g, Node *n);
  ParamKind params;
  CostClass cost;
  unsigned param_inputs; /* bit i: input i is a parameter, not f32 data */
  Evaluation eval;
  /* The ONNX type constraints of the inputs, one word per input (the last
     repeats for variadic inputs): a set of dtypes such as "float" or
     "i32|i64", or "=K", the type of input K. ops.def lists the sets. */
  const char *types;
  unsigned traits;    /* T_* bits */
  unsigned run_types; /* TY_* set: the element types its run-time code takes */
  /* The activation it becomes when fused into a Conv or Gemm (OPC_ACT_NONE:
     never), and that activation's name in the IR's text and cost keys. */
  Activation act;
  const char *act_name;
  /* Whether cuDNN or cuBLAS run this node on 16-bit data (--precision
     fp16|bf16: lower-precision lowers it); NULL: never. */
  bool (*half)(const Node *n);
  /* Its float attributes with the spec's defaults, "alpha=0.2, beta=0.5"
     (Node.p.act; the kernel takes them in this order), or NULL. */
  const char *attrs;
} OpInfo;

/* The kind whose row names activation a, or OP_INVALID for OPC_ACT_NONE. */
OpKind act_op(Activation a);
/* Activation a's name in the IR text ("relu"), or NULL for OPC_ACT_NONE. */
const char *act_name(Activation a);
/* The activation named `name` in the IR text, or OPC_ACT_NONE. */
Activation act_from_name(const char *name);

const OpInfo *op_info(OpKind op);
/* Whether the backend has an opc kernel (not only cuDNN or cuBLAS) for the
   kind, or moves it with device copies: what a conditional node's body
   may run (ops.def's emitter and library columns). */
bool op_runs_in_body(OpKind op);
/* Adds a line to g->notes. */
void graph_note(Graph *g, const char *fmt, ...);
OpKind op_from_name(const char *onnx_op_type); /* OP_INVALID if unsupported */
/* The integer kind fuse-qdq makes of a float one between DequantizeLinear
   and QuantizeLinear (ops.def's INTEGER_FORM rows), or OP_INVALID. */
OpKind op_integer_form(OpKind op);
const char *op_name(OpKind op);

/* ------------------------------------------------------------- schedule */

typedef struct Stage {
  Node **nodes; /* in issue order */
  int nnodes;
  int ngroups;
  double predicted_us;
} Stage;

/* One node's place in the schedule: the schedule's table, indexed by
   Node.id (node_sched()). place-devices fills `device`, the scheduling
   passes the rest. */
typedef struct NodeSchedule {
  int stage;
  int group;
  int stream;
  int record_event; /* event recorded on `stream` after this node, or -1 */
  int *waits;       /* events waited on before this node */
  int nwaits;
  int *stage_waits; /* of those, the events recorded inside its own stage (profiles) */
  int nstage_waits;
  double cost_us;   /* predicted latency of this node alone */
  int device;       /* GPU of the node (--gpus N; HIOS), or Schedule.host_device (the
                       host CPU: --devices gpu,cpu; HOPE); 0 otherwise */
} NodeSchedule;

/* Schedules are data: passes compute them, the emitter prints them. */
typedef struct Schedule {
  /* per node, indexed by Node.id: grows with graph_add_node and follows
     the nodes when they are renumbered */
  NodeSchedule *node;
  int cap_node;
  const char *scheduler; /* "sequential", "greedy", "ios", "lios"; NULL before scheduling */
  int nstreams;
  int nevents;
  int ndevices; /* devices the units are placed on (NodeSchedule.device); 1 but for HIOS and HOPE */
  int host_device; /* the host CPU's device number (HOPE: --devices gpu,cpu); 0: none,
                      device 0 being always a GPU */
  Stage *stages;
  int nstages;
  Node **order; /* every live non-view node, in the order the host issues them */
  int norder;
  /* every live node in the order net.c lists them: `order`, with each node
     that issues nothing (a view, a constant) where its inputs are ready;
     NULL-terminated */
  Node **listing;
  double predicted_us;
  double sequential_us;
  /* search statistics */
  long states, transitions;
  double search_seconds;
  /* predicted makespan of the issued program (no barriers between stages),
     from the scheduler's event simulation; 0 when not computed */
  double simulated_us;
} Schedule;

/* ------------------------------------------------------ serving programs */

/*
 * A program that serves several models (`opc a.onnx b.onnx -o serve
 * --instances a=2,b=1`): its graph holds `ninstances` copies of each
 * model, made by graph_join after each model went through the rewriting
 * passes. A copy handles one request; the copies share nothing at run time
 * but the model's constants, so the scheduler may run any of them side by
 * side. Each node knows its copy (Node.instance); the graph's inputs and
 * outputs are listed copy after copy, each copy's in its model's order.
 */
typedef struct ServedModel {
  const char *name; /* names the model in the program's API (main.c's add_model) */
  const char *path; /* the model file, for messages */
  int ninstances;
  int first_instance; /* its copies are first_instance .. first_instance + ninstances - 1 */
  int ninputs, noutputs; /* of each copy */
} ServedModel;

typedef struct ServeInfo {
  ServedModel *models;
  int nmodels;
  int ninstances;
  int *instance_model; /* per copy: its model */
  int *first_input;    /* per copy: its first input in g->inputs */
  int *first_output;   /* per copy: its first output in g->outputs */
} ServeInfo;

/* ---------------------------------------------------------------- graph */

/*
 * A check that net_run makes before it runs (ir/pin.c, docs/emitted-program.md):
 * opc compiled node `node` for the value it derived from a pinned output
 * shape in place of graph input `input`, which the caller still gives; the
 * value given must make the shape the program was compiled for.
 */
typedef enum RunCheckKind {
  RUN_CHECK_EQUAL,     /* the values must be `want` (split sizes, a depth, a size, a shape) */
  RUN_CHECK_RESHAPE,   /* Reshape's shape: 0 and -1 as ONNX reads them; flag: allowzero */
  RUN_CHECK_SQUEEZE,   /* axes removed from the data's shape */
  RUN_CHECK_UNSQUEEZE, /* axes inserted into the data's shape */
  RUN_CHECK_EXPAND,    /* broadcast with the data's shape */
  RUN_CHECK_TILE,      /* repeats times the data's dims */
  RUN_CHECK_REDUCE,    /* axes kept as 1 (keepdims=1); flag: noop_with_empty_axes */
} RunCheckKind;

typedef struct RunCheck {
  RunCheckKind kind;
  int flag;
  const Node *node;               /* during inference only: passes may replace it */
  const char *node_name;          /* for messages */
  OpKind op;
  Tensor *input;                  /* the graph input whose value is checked */
  int data_rank;                  /* the node's data input, where the kind reads it */
  int64_t data_dims[IR_MAX_RANK];
  int nwant;                      /* the dims the value must make (or, EQUAL, the values) */
  int64_t *want;
  const char *pinned_by;          /* "the declared shape of output 'y'", for messages */
} RunCheck;

/* --max-dim NAME=N: the bound of a tensor whose run-time length its
   operator does not bound (a Range to a run-time limit). */
typedef struct MaxDim {
  const char *name;
  int64_t bound;
} MaxDim;

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
  bool placed;          /* a Loop's body: its offsets moved into the graph's arena (backend/loop.c) */
  int loop_scans;       /* a Loop's body: its last outputs that stack scan outputs (frontend/loop.c) */
  const char **notes;   /* why each run-time If runs as it does, for --report (frontend/loop.c) */
  int nnotes;
  int64_t max_memory;   /* the program's memory limit in bytes (--max-memory) */
  Schedule sched;
  ServeInfo *serve;     /* several models in one program; NULL for one */
  RunCheck *checks;     /* the run-time checks of pinned shape inputs (ir/pin.c) */
  int nchecks, cap_checks;
  const MaxDim *max_dims; /* --max-dim, shared with its bodies */
  int nmax_dims;
};

Graph *graph_new(const char *path);
void graph_free(Graph *g);
/* A graph in the arena of `owner` (a Loop's body), freed with it. */
Graph *graph_new_in(Graph *owner, const char *name);

Tensor *graph_add_tensor(Graph *g, const char *name); /* name NULL: generated */
Tensor *graph_find_tensor(Graph *g, const char *name);
/* The bound --max-dim gives the tensor named `name`, or 0. */
int64_t graph_max_dim(const Graph *g, const char *name);
Node *graph_add_node(Graph *g, OpKind op, const char *name, int nin, int nout);
void graph_add_input(Graph *g, Tensor *t);
void graph_add_output(Graph *g, Tensor *t);

/* A graph input that t's value depends on, or NULL. */
const Tensor *graph_input_behind(const Graph *g, const Tensor *t);
/* Sets producer links and use lists from the node list. */
void graph_rebuild_uses(Graph *g);
/* Orders nodes topologically; reports a cycle and returns false. */
bool graph_toposort(Graph *g);
/* Drops nodes marked dead and tensors nothing refers to, then rebuilds uses. */
void graph_compact(Graph *g);
/* Sets each node's id to its place in g->nodes; its schedule entry follows. */
void graph_renumber_nodes(Graph *g);

/*
 * The graph of a serving program: instances[m] copies of models[m], named
 * by names[m] (graph_join, ir/join.c). Tensors and nodes of copy k of model
 * "a" are named "a.k/<name>", constants "a/<name>" (one per model, shared by
 * its copies). The models must have been rewritten already and must outlive
 * the result, which shares their attributes and constant data.
 */
Graph *graph_join(Graph *const *models, const char *const *names, const int *instances,
                  int nmodels);
/* The model a copy belongs to, or NULL (not a serving program, or -1). */
const ServedModel *graph_instance_model(const Graph *g, int instance);

/* Checks acyclicity, single definition before use, and shape consistency. */
bool graph_verify(Graph *g);
/* Prints the IR in the text format of docs/architecture.md. */
void graph_dump(Graph *g, FILE *f);
/* Reads that text format back: the tests build small graphs with it. */
Graph *graph_parse(const char *text, const char *path);
/* Where a shape input of n is given only at run time but n's output shape
   is declared, replaces it by the value that makes that shape and records
   the run-time check (ir/pin.c); false after an error. */
bool pin_shape_input(Graph *g, Node *n);
/* After n's shape function: a pinned node's outputs must have their
   declared shapes. */
bool check_pinned_output(Graph *g, Node *n);

/* Runs every node's shape function in order. */
bool graph_infer_shapes(Graph *g);
/* Infers and folds the nodes that t depends on, producers first, so that
   a value needed while the graph is still being imported (an If's
   condition) is known where it can be; true when t is then a constant.
   Errors are reported as inference reports them. */
bool graph_evaluate(Graph *g, Tensor *t);

/* ------------------------------------------------------- tensor helpers */

/* Element count of a shape, in *count (0 when a dim is 0); false when a
   dim is negative or the nonzero dims multiply past int64, since strides
   and tensor_numel multiply them (a hostile shape must not wrap). */
bool shape_numel(int rank, const int64_t *dims, int64_t *count);
/* Checks a tensor of this type against the element and byte limits (the
   byte limit is g->max_memory when that is smaller); reports "<what>
   '<name>' has N elements, over the limit of ..." against node n (or the
   graph) and returns false when it is over one. name may be NULL. */
bool check_tensor_size(const Graph *g, const Node *n, const char *what, const char *name,
                       DType dt, int rank, const int64_t *dims);
/* Checks a name against LIMIT_NAME_BYTES; reports "<what> is N bytes
   long ..." and returns false when it is over. */
bool check_name_length(const Graph *g, const char *what, const char *name);

int64_t tensor_numel(const Tensor *t);
/* dims[from] * ... * dims[to - 1] (1 when from >= to). */
int64_t dims_product(const int64_t *dims, int from, int to);
size_t dtype_size(DType t);
bool tensor_is_const(const Tensor *t);
void tensor_set_shape(Tensor *t, int rank, const int64_t *dims); /* contiguous strides */
/* Channels-last storage of an N, C, spatial... tensor (NHWC for rank 4):
   C varies fastest, then the spatial dims, then N. The dims stay in ONNX's
   order; only the strides change. */
void tensor_set_channels_last(Tensor *t);
bool tensor_is_channels_last(const Tensor *t);
/* Whether the strides visit every element once in some order of the dims
   (the storage a non-view owns: contiguous, or channels-last). */
bool tensor_has_dense_strides(const Tensor *t);
/* The most a shape's nonzero dims may multiply to, so that byte strides
   fit in int64 (the element limit above is far lower for non-empty
   tensors). */
#define IR_MAX_ELEMENTS ((int64_t)1 << 59)
/* Whether tensor_set_shape can take these (non-negative) dims: their
   product, zeros counted as 1 as the strides count them, is at most
   IR_MAX_ELEMENTS, so that strides and byte offsets fit in int64 even for
   an empty tensor. Shapes read from files must be checked with it. */
bool shape_fits(int rank, const int64_t *dims);
/* Shape: the range [start, end) of its input's dims that it returns. */
void shape_range(const Node *n, int rank, int *start, int *end);
bool tensor_same_shape(const Tensor *a, const Tensor *b);
/* "f32[1,3,224,224]" into buf; returns buf */
char *tensor_type_str(const Tensor *t, char *buf, size_t size);
/* The tensor that owns the storage: itself unless a view. */
Tensor *tensor_storage(Tensor *t);
/* The GPU holding t (--gpus N): its storage's writer's; 0 for a graph
   input; -1 for a constant, which each GPU reading it holds. */
int tensor_device(const Graph *g, const Tensor *t);
/* An Identity reading another device's memory: a peer copy between GPUs,
   or a copy between the GPU and the host CPU. */
bool node_is_transfer(const Graph *g, const Node *n);
/* The node's entry in the schedule's table (Schedule.node); the pointer
   holds until a node is added or the nodes are renumbered. */
NodeSchedule *node_sched(const Graph *g, const Node *n);
/* Makes n wait for event before it runs (appends to its schedule entry). */
void node_add_wait(Graph *g, Node *n, int event);
/* Whether the node runs on the host CPU (HOPE), beside the GPU. */
bool node_on_cpu(const Graph *g, const Node *n);
/* The GPUs the program runs on: its devices but the host CPU. */
int gpu_count(const Graph *g);

/* ------------------------------------------------------- node helpers */

const Attr *node_attr(const Node *n, const char *name);
int64_t node_attr_int(const Node *n, const char *name, int64_t dflt);
float node_attr_float(const Node *n, const char *name, float dflt);
const char *node_attr_string(const Node *n, const char *name, const char *dflt);
/* Number of ints, with *out pointing at them; -1 when the attribute is absent. */
int node_attr_ints(const Node *n, const char *name, const int64_t **out);
Attr *node_set_attr(Graph *g, Node *n, const char *name, AttrKind kind);
/* The same attributes with equal values, in any order (common subexpressions). */
bool node_same_attrs(const Node *a, const Node *b);
/* Whether input k of a node of this kind stays float32 when its data is
   16-bit: BatchNormalization's scale, bias, mean and variance, which cuDNN
   takes in float32 beside float16 or bfloat16 data. */
bool op_input_stays_float(OpKind op, int k);
/* Whether input k of a node of this kind is a parameter (shape, axes,
   indices) rather than data; false past the 32 inputs param_inputs can
   mark, which variadic operators (Concat, Sum) may have. */
bool op_input_is_param(OpKind op, int k);
/* Whether a window has 1 to 3 spatial dims and equal, non-negative
   padding at both ends (what cuDNN's descriptors express). */
bool window_is_symmetric(const Window *w);
/* Whether cuDNN's pooling takes this MaxPool or AveragePool: a symmetric
   window with padding smaller than it, no dilation, the output size rounded
   down (no ceil_mode growth), and no Indices output. Both lower-precision
   (which pools go 16-bit) and the backend (which emitter prints one) ask. */
bool pool_fits_library(const Node *n);
/* MaxUnpool's unpooled shape, which its indices count in (ops.c): the
   output's, or the part of it before output_shape's added zeros. */
void max_unpool_shape(const Node *n, int64_t *dims);
/* The other 16-bit library forms of ops.def's half column: a convolution
   with a symmetric window, any Gemm, and a MatMul cuBLAS does in one call
   (B one matrix, or A and B batched alike). */
bool conv_runs_half(const Node *n);
bool gemm_runs_half(const Node *n);
bool matmul_runs_half(const Node *n);
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
   or the result would be very large, or very costly to compute (a big
   Conv: ir/fold_nn.c's work limit) (false with an error when its shapes
   do not infer or, say, an integer divides by zero). Shape folds whenever
   its input's shape is known. */
bool node_fold(Graph *g, Node *n);
/* Reports a node of a kind without kernels that node_fold did not
   evaluate: "too big to fold: N elements, limit FOLD_MAX_ELEMENTS". */
void report_not_folded(const Graph *g, const Node *n);
/* The range a QLinearConv's or QLinearMatMul's requantised output is
   saturated to: its type's, narrowed by a fused Relu or Clip (Node.act,
   from fuse-qdq) quantized with y's constant scale and zero point, as
   Q(clip(v, lo, hi)) = clamp(Q(v), Q(lo), Q(hi)) for a monotonic Q. */
void qlinear_bounds(const Node *n, float *lo, float *hi);
/* Whether a QLinearConv is 2-D depthwise (group = C = M, at least 4
   channels) with the constants opc_qconv_depthwise_nhwc folds at compile
   time: the filter and its zero point, whose differences fit int8, x's
   and y's zero points (one each) and the bias (or none). choose-layout stores such a node's data
   channels-last, and kernels_quantized.c runs it on that kernel. */
bool qlinear_conv_depthwise_folds(const Node *n);
/* Whether a float32 2-D Conv is one the CPU target runs channels-last
   (opc_conv_nhwc, opc_conv_depthwise_nhwc): group 1, or one input and one
   output channel per group; its filter and bias (or none) constants, and
   at most 4096 input channels (the kernels' rows of zeros for the
   padding). choose-layout stores such a node's data channels-last under
   --target cpu, and kernels_nhwc.c runs it. */
bool conv_runs_channels_last(const Node *n);
/* Whether the CPU target writes node n's channels-last float32 output a
   run of channels per pixel, declared so to the race checker (opc_kargs'
   y_runs): a conv_runs_channels_last Conv, or a 2-D MaxPool or
   AveragePool. Such a node may write a channel slice of a Concat's
   output (concat-in-place). */
bool writes_pixel_runs(const Node *n);
/* Whether integer convolutions and matmuls may take cuBLASLt's int8 GEMM:
   not in a serving program (its kernels serve any batch), and not with
   OPC_INT8_GEMM=kernel, which asks for opc's kernels to compare the two.
   choose-layout and the backend both ask here, so they cannot disagree. */
bool int8_gemm_allowed(const Graph *g);
/* Whether the int8 GEMM of an m' x k' filter by k' x n rows (k' the depth
   and m' the output channels, each rounded up to 4) indexes and sums
   within int32. */
bool int8_gemm_sizes_fit(int64_t k4, int64_t m4, int64_t n);
/* Whether a constant integer filter w [M, ...] less its zero point zw
   (none, one, or one per output channel) fits int8, as the GEMM reads it. */
bool int8_filter_fits(const Tensor *w, const Tensor *zw);
/* Whether a QLinearConv runs as cuBLASLt's int8 GEMM on channels-last
   data: 2-D, group 1, one zero point of x, a constant filter that fits
   int8 (int8_filter_fits) and sizes that int8_gemm_sizes_fit. Shapes
   only: int8_gemm_allowed decides whether the GEMM is taken at all.
   choose-layout stores such a node's data channels-last; the backend
   plans the GEMM for it from the same sizes. */
bool qlinear_conv_takes_int8_gemm(const Node *n);
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

/*
 * The key under which `net --profile` records a schedule unit and
 * --cost-db looks it up (passes/cost_db.c): operator, input and output types,
 * window, fused activation and attributes, e.g.
 *   Conv|f32[1,64,56,56],f32[64,64,3,3],f32[64]->f32[1,64,56,56]|k=3x3|s=1x1|...
 * Written into buf like snprintf; returns the length of the whole key.
 */
int unit_cost_key(const Node *n, char *buf, size_t size);

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
/* While on (nested calls count), errors and warnings are neither printed
   nor counted: the importer tries a form it can fall back from (a Loop
   run at run time, else unrolled: frontend/loop.c). */
void ir_quiet(bool on);

#endif
