/*
 * emit.h - the emitter's internals, shared by the files of backend/;
 * backend.h is the folder's public header.
 *
 * Every line of the emitted program goes through emit(), emit_open() and
 * emit_close(), which keep the indentation. An operator's code comes from
 * its OpEmitter: the fields it keeps in the context, what `create` does once,
 * what `enqueue` does on every run and what `destroy` releases. The second
 * half of this header is the core's own bookkeeping (EmitState) and the
 * helpers the core's operator emitters (ops_*.c) share.
 */
#ifndef OPC_EMIT_H
#define OPC_EMIT_H

#include "backend.h"

typedef struct Emitter {
  FILE *f;
  int indent;
  Graph *g;
  const EmitOptions *opt;
  const char *prefix;     /* "net" */
  const char **tensor_cname; /* per tensor id: C expression of its buffer, once buf() ran */
  const char **live_cname;   /* per tensor id: its run's dims, once live_dims() ran */
  const char **node_cname;   /* per node id: C identifier for its fields */
  const char **kernels; /* custom kernels used so far, by name */
  int nkernels;
  bool failed;

  /* --- the rest is the core's bookkeeping (emit.c and the files of net.c's parts) --- */
  struct EmitState *st;
  /* The statement that ends a failed call where code is being printed now:
     "return -1" in the per-node setup functions, "goto fail" in create()
     and enqueue(). Print it through emit_fail(). */
  const char *fail;
  const Node *node; /* the node whose code is being printed, or NULL */
  /* Printing code the host CPU runs (HOPE): every CUDA, cuDNN and cuBLAS
     name gets the prefix of the CPU runtime's own build (cpu_prefix_line). */
  bool cpu_code;
  /* The stream every launch and call goes on, instead of the node's (a
     Loop's body: backend/loop.c), or NULL. */
  const char *stream;
  /* A Loop's body: opc's kernels wherever they take the node, since CUDA
     allows no cuDNN or cuBLAS call in a conditional node's body. */
  bool kernels_only;
  /* Under kernels_only, the first call printed that CUDA refuses in such a
     body ("calls cuDNN"), or NULL: emit_call notes it. */
  const char *refused_in_body;
  /* A Loop's body: its nodes' data (node_data), apart from the graph's,
     whose table is indexed by the graph's own node ids. NULL: the graph's. */
  void **body_node_data;
} Emitter;

void emit(Emitter *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the line, then indents: for lines ending in '{'. */
void emit_open(Emitter *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Dedents, then prints the line: for lines starting with '}'. */
void emit_close(Emitter *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void emit_blank(Emitter *e);

/* C expression for the device pointer of a tensor's first element, of the
   tensor's storage type (dtype_c_type). */
const char *buf(Emitter *e, const Tensor *t);
/* The run-time dims of a bounded tensor (int64s, Tensor.live_offset), as C. */
const char *live_dims(Emitter *e, const Tensor *t);

/*
 * Element types (types.c). Besides float32, run-time tensors may be
 * float64, float16 (storage only: moved and cast), int64, int32, int8,
 * uint8 and bool; which operators handle which is a table there.
 */
/* The C type net.c stores a run-time dtype in: float, int64_t, ... (a
   float16 is its bits, uint16_t; a bool one byte, uint8_t). */
const char *dtype_c_type(DType t);
/* "opc_add" for `t` -> "opc_add_i64": the instance of a typed kernel. */
const char *typed_kernel(Emitter *e, const char *base, DType t);
/* "opc_copy" -> "opc_copy_b8": the instance of a data-movement kernel for
   the size of t's elements. */
const char *sized_kernel(Emitter *e, const char *base, DType t);
/* The kind of index tensor opc_index() reads: 8 (int64) or 4 (int32). */
int index_kind(const Tensor *indices);
/* Reports and returns false when the node's run-time tensors have types
   its emitter does not handle. */
bool check_node_types(Emitter *e, const Node *n);
/* C identifier prefix for a node's context fields, e.g. "mixed_5b_conv". */
const char *node_id(Emitter *e, const Node *n);

typedef struct OpEmitter {
  /* Declares the node's fields in the context struct (descriptors, algos). */
  void (*fields)(Emitter *e, Node *n);
  /* Code in create(): descriptors, algorithm choice, workspace size. */
  void (*setup)(Emitter *e, Node *n);
  /* Code in enqueue(): the call(s) issued on the node's stream. */
  void (*run)(Emitter *e, Node *n);
  /* Code in destroy(). */
  void (*teardown)(Emitter *e, Node *n);
  /* NULL, or false when this emitter cannot print this particular node
     (the core then falls back to kernel_op_emitter()). Any hook may be NULL. */
  bool (*supports)(Emitter *e, const Node *n);
  /* Whether it also prints the node with float16 or bfloat16 tensors
     (--precision fp16|bf16): cuDNN's and cuBLAS's 16-bit forms, or opc's
     kernels where supports() says the node is one they take in 16 bits. */
  bool half;
} OpEmitter;

/* The library emitter for a kind (ops.def's library column: cuDNN, cuBLAS
   or copies), or NULL when the backend has none. */
const OpEmitter *op_emitter(OpKind op);

/*
 * Checked calls. Every call into CUDA, cuDNN, cuBLAS, the driver API or
 * NVRTC is printed through emit_call(), which wraps it in the library's
 * checking helper of net.c and ends a failure with e->fail:
 *     if (!cudnn_ok(c, cudnnSetStream(c->cudnn[0], c->stream[0]), "cudnnSetStream"))
 *       goto fail;
 * On failure the helper stores "node 'NAME' (Op): FUNCTION: <the library's
 * error string>" in c->error (a char array of OPC_ERROR_SIZE bytes), the
 * node being c->node, which the core sets where each node's setup and
 * enqueue code starts (NULL elsewhere), and returns 0. `fmt` is the call
 * itself. To fail with a message of your own (an NVRTC log), fill c->error
 * and print emit_fail(e).
 */
typedef enum Lib { LIB_CUDA, LIB_CUDNN, LIB_CUBLAS, LIB_DRIVER, LIB_NVRTC, LIB_COUNT } Lib;
void emit_call(Emitter *e, Lib lib, const Node *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The statement to print after setting c->error by hand (e.g. an NVRTC log). */
const char *emit_fail(Emitter *e);
/* "if (COND) {", emit_fail(e), "}": COND is the format's text. */
void emit_fail_if(Emitter *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "node 'conv1' (Conv)" as the body of a C string literal. */
const char *emit_node_label(Emitter *e, const Node *n);
/* Each library's checking helper in net.c: "cuda_ok", "cudnn_ok"... */
extern const char *const lib_check_helper[LIB_COUNT];
#define OPC_ERROR_SIZE 1024

/* The body of a C string literal for `s` (quotes, backslashes, controls escaped). */
const char *emit_c_string(Emitter *e, const char *s);
/* s with each '%' doubled: a name written into a printf format of net.c
   (then through emit_c_string) prints as itself. */
const char *emit_format_text(Emitter *e, const char *s);
/* printf into the graph's arena: for building C expressions. */
char *emit_str(Emitter *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "&one", "&zero" or "&(const float){0.5f}": a host scalar for cuDNN/cuBLAS. */
const char *emit_scalar(Emitter *e, float v);
/* A float literal that reads back exactly, e.g. "0.5f". */
const char *emit_float(Emitter *e, float v);

/*
 * The parts of net.c, printed to separate memory streams so that the order
 * in which things are discovered does not matter; emit_program() joins them.
 * e->f is the part being printed now; emit_to() adds a line to another one
 * (a context field or a destroy() line) from anywhere.
 */
typedef enum Section {
  SEC_KERNELS,  /* kernel source text */
  SEC_FIELDS,   /* members of the context struct */
  SEC_BIND,     /* create(): buffer pointers into the arena and the weights */
  SEC_SETUP,    /* one setup function per node */
  SEC_CREATE,   /* create(): the calls of the setup functions */
  SEC_PREPARE,  /* create(): choices that try calls, once buffers and workspaces exist */
  SEC_ENQUEUE,  /* enqueue(): the schedule */
  SEC_TEARDOWN, /* destroy(): node resources */
  SEC_BUFFERS,  /* context members: activation buffers (buf()) */
  SEC_CONSTS,   /* context members: constants in the weights (weights_add()) */
  SEC_COUNT
} Section;
void emit_to(Emitter *e, Section s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A fresh C identifier from `base` (sanitised, never a keyword or a name
   already used in the context struct): for fields of the context. */
const char *emit_unique(Emitter *e, const char *base);

/*
 * Constant data in net.weights. weights_add() stores `count` floats and
 * returns a C expression for their device address (a context field bound in
 * create); `name` seeds the field's name. weights_add_typed() stores data
 * of the IR's form (float for floating dtypes, int64_t for integer and bool
 * ones) as `dtype`. buf() does this by itself for a constant tensor, which
 * is stored in its own type.
 */
const char *weights_add(Emitter *e, const char *name, const float *data, int64_t count);
const char *weights_add_typed(Emitter *e, const char *name, DType dtype, const void *data,
                              int64_t count);

/*
 * cuDNN descriptors owned by a node: declares the context field
 * `<node>_<what>`, prints its creation in the current (setup) code, and its
 * destruction in destroy(). Returns the C expression of the field.
 * Dims are padded to `min_rank` (at least 4) with 1s at the end, or at the
 * front when `pad_front` (numpy broadcasting alignment). The element type
 * is the node's data's (dnn_data_type); emit_tensor_desc_as names another.
 */
const char *emit_tensor_desc(Emitter *e, const Node *n, const char *what, int rank,
                             const int64_t *dims, const int64_t *strides, int min_rank,
                             bool pad_front);
const char *emit_tensor_desc_as(Emitter *e, const Node *n, const char *what, const char *type,
                                int rank, const int64_t *dims, const int64_t *strides,
                                int min_rank, bool pad_front);
/* Same, for a Tensor's own dims and strides. */
const char *emit_tensor_desc_of(Emitter *e, const Node *n, const char *what, const Tensor *t,
                                int min_rank, bool pad_front);
/* The dims and strides such a descriptor gets (padded as above, size-1 dims
   with packed strides) into d and s; returns their count. */
int emit_desc_layout(int rank, const int64_t *dims, const int64_t *strides, int min_rank,
                     bool pad_front, int64_t *d, int64_t *s);
/*
 * A convolution's x, y, filter and convolution descriptors in one field
 * `<node>_descs` of net.c's type conv_descs, made by one call of net.c's
 * make_conv() from a constant conv_shape, and freed by free_conv(). Returns
 * the field's C expression; its members are .x, .y, .filter and .conv.
 */
typedef struct ConvShape {
  int nspatial; /* 2 or 3 */
  const int64_t *x, *x_strides, *y, *y_strides, *filter; /* nspatial + 2 each */
  bool filter_nhwc;
  const int64_t *pad, *stride, *dilation; /* nspatial each */
  int64_t groups;
  const char *math; /* CUDNN_FMA_MATH or CUDNN_TENSOR_OP_MATH */
} ConvShape;
const char *emit_conv_descs(Emitter *e, const Node *n, const ConvShape *shape);

/* The emitter that will print `n`: the core's own if it supports the node,
   else opc's kernels, else NULL. */
const OpEmitter *node_emitter(Emitter *e, const Node *n);

/* C expressions for the node's stream and per-stream library handles. */
const char *node_stream(Emitter *e, const Node *n);  /* "c->stream[1]" */
const char *node_cudnn(Emitter *e, const Node *n);   /* "c->cudnn[1]" */
const char *node_cublas(Emitter *e, const Node *n);  /* "c->cublas[1]" */

/*
 * emit_kernels.c: opc's own kernels, for the operators cuDNN and cuBLAS lack.
 * Their portable source is runtime/kernels/opc_kernels.inc; net.c carries the
 * text of the kernels it uses and compiles it with NVRTC in create().
 */
/* The emitter of opc's kernels for a kind (ops.def's emitter column), or
   NULL when no kernel implements it. */
const OpEmitter *kernel_op_emitter(OpKind op);
void kernel_request(Emitter *e, const char *name);
void emit_kernel_source(Emitter *e);   /* struct opc_kargs and the used kernels' source */
void emit_kernel_fields(Emitter *e);   /* CUmodule and CUfunction fields of the context */
void emit_kernel_setup(Emitter *e);    /* NVRTC compile, module load, function look-up */
void emit_kernel_teardown(Emitter *e);
/* Launches `name` over `count` iterations with the struct opc_kargs variable `a`. */
void emit_kernel_launch(Emitter *e, const Node *n, const char *name, const char *count);
/* Ready-made launches for the core's emitters:
   the node's fused activation (n->act) applied in place on y, for what cuDNN
   cannot fuse (an act whose row names no cuDNN mode, Clip with a lower
   bound other than 0)
   (kernels_elementwise.c); */
void emit_kernel_activation(Emitter *e, const Node *n, const Tensor *y);
/* kernels_elementwise.c: a convolution's bias, residual z (or NULL) and
   activation in one launch on its output, in place. */
void emit_conv_epilogue(Emitter *e, const Node *n, const char *bias, const Tensor *z);
/* dst = src between any two strided layouts over dims (src strides may be
   negative: src is the address of the element at coordinate 0)
   (kernels_movement.c). */
void emit_kernel_copy(Emitter *e, const Node *n, const char *dst, const int64_t *dst_strides,
                      const char *src, const int64_t *src_strides, int rank, const int64_t *dims);

/* A Concat whose inputs each fill a contiguous block of every row of the
   output, read from contiguous storage: `rows` rows of `row` elements,
   input k's block at element start[k] of a row, size[k] long. One launch of
   opc_concat_blocks copies them all, in place of a copy per input. */
enum { CONCAT_BLOCKS_MAX = 64 };
typedef struct ConcatBlocks {
  int count;
  const Tensor *src[CONCAT_BLOCKS_MAX];
  int64_t start[CONCAT_BLOCKS_MAX], size[CONCAT_BLOCKS_MAX];
  int64_t rows, row;
} ConcatBlocks;

/* Whether one launch can copy b: every input in the output's arena, on its
   device (constants lie in the weights). Emits it when `emit_it`
   (kernels_movement.c). */
bool kernel_concat_blocks(Emitter *e, const Node *n, const ConcatBlocks *b, bool emit_it);

/*
 * The files of opc's kernels: emit_kernels.c (the source text, NVRTC, the
 * module and the table of operators), kernels_launch.c (one launch, built
 * and printed), and the operators by category: kernels_elementwise.c,
 * kernels_movement.c, kernels_rows.c, kernels_losses.c and kernels_index.c.
 */

/* A run of scalar parameters that means one thing, printed with a comment. */
typedef struct Group {
  int start, count;
  const char *label;
} Group;

/* One launch, as it will be printed. */
typedef struct Launch {
  const char *kernel;
  int nx; /* inputs x[0..nx) are printed */
  const char *x[4];
  int64_t x_extent[4]; /* in elements; printed in bytes */
  const char *y;
  int64_t y_extent;
  int x_bytes[4], y_bytes; /* element sizes; 0 for float32's 4 */
  /* Above 1: y is written as y_runs runs of y_extent elements,
     y_run_stride elements apart (opc_kargs.h); 0 for one range. */
  int64_t y_runs, y_run_stride;
  int64_t n;
  int rank;
  int64_t dims[8];
  int64_t xstride[4][8];
  int64_t ystride[8];
  float f[8];
  int64_t i[16];
  /* A C expression printed for i[k] instead of its value (a launch inside
     a loop of the emitted code), or NULL. */
  const char *iexpr[16];
  Group fgroup[8], igroup[16]; /* which of f and i are printed, and what they are */
  int nfgroups, nigroups;
  const char *note; /* printed above the arguments, when they need a word */
  /* The activation a float32 launch applies (scalar.h's code), stated to
     the runtime in its arguments; OPC_ACT_NONE for the others. */
  Activation act;
  /* What a convolution's epilogue kernel adds before act: 1 its bias, 2
     its bias and a residual (opc_kargs.h); 0 for the other kernels. */
  int adds;
} Launch;

/* kernels_launch.c: the activation of scalar.h's list whose kernel is
   `kernel` (an elementwise row's kernel column), or OPC_ACT_NONE. */
Activation kernel_activation(const char *kernel);
/* kernels_launch.c: every operand of L holds elements of `type`. */
void set_element_type(Launch *L, DType type);
/* The type of the elements a node moves or computes: its outputs'. */
DType node_data_type(const Node *n);
/* Whether the node computes on 16-bit floats (float16 or bfloat16). */
bool node_in_half(const Node *n);
/* cuDNN's name of the node's element type: CUDNN_DATA_FLOAT, _HALF, _BFLOAT16. */
const char *dnn_data_type(const Node *n);
/* cuBLAS's (cudaDataType_t): CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF. */
const char *blas_data_type(const Node *n);
/* kernels_launch.c: f[start..start+count) or i[...] as one labelled group. */
void group_f(Launch *L, int start, int count, const char *label);
void group_i(Launch *L, int start, int count, const char *label);
/* Threads per block of every launch: a tile kernel (opc_se_gate) counts
   KERNEL_BLOCK_THREADS iterations per tile, so that each gets a block. */
enum { KERNEL_BLOCK_THREADS = 256 };
/* Prints the launch: its struct opc_kargs and emit_kernel_launch(). */
void emit_launch(Emitter *e, const Node *n, const Launch *L);
/* Elements reachable from the lowest address a view touches (*low). */
int64_t reach(int rank, const int64_t *dims, const int64_t *strides, int64_t *low);
/* A tensor's element strides: its own when it is a view, else contiguous. */
void strides_of(const Tensor *t, int64_t *s);
/* kernels_launch.c: whether t's elements lie in C order with no gaps. */
bool row_major(const Tensor *t);
/* Strides that read `t` as if broadcast (numpy, aligned right) to dims. */
void broadcast_to(const Tensor *t, int rank, const int64_t *dims, int64_t *s);
/* The output y over L->dims, and input x[k], with the given strides. */
void set_output(Launch *L, const char *y, const int64_t *ystride);
void set_input(Launch *L, int k, const char *x, const int64_t *xstride);
/* A launch over y's elements: L's dims y's, y the output and x input 0,
   each at its own strides (of x's shape y's, as an elementwise kind's). */
void launch_over(Emitter *e, Launch *L, const Tensor *y, const Tensor *x);
/* A 1-D or 2-D window's ten kernel arguments, as the convolution kernels
   read them: H, W, KH, KW, strides, dilations and leading pads. */
void window_args(int64_t *i, const Window *win, const Tensor *x);
/* Drops dims of size 1 and merges neighbours contiguous in every operand. */
void collapse(Launch *L);
/* Reports msg as an error of the node; returns false. */
bool kernel_fail(Emitter *e, const Node *n, const char *msg);
/* Whether the tensor is produced for someone: graph output or used. */
bool tensor_needed(const Tensor *t);
/* A row kernel over x reducing the dims marked in `reduced` (kernels_launch.c). */
bool row_launch(Emitter *e, const Node *n, Launch *L, const Tensor *x, const bool *reduced,
                const char *y, const int64_t *yst, bool writes_rows);
/* A reduction's row along a bounded x's run-time axis: x[1] is its length
   in this run (kernels_launch.c). */
void row_run_length(Emitter *e, Launch *L, const Tensor *x, const bool *reduced);
/* Output strides along x's dims for a reduction's output y (keepdims or not). */
void reduced_output_strides(const Tensor *x, const Tensor *y, const bool *reduced,
                            int64_t *yst);
/* The activation a node of ours carries, if a pass fused one into it
   (kernels_elementwise.c). */
void fused_activation(Emitter *e, const Node *n);
/* Whether opc's BatchNormalization kernel runs n in one launch, a fused
   activation included (kernels_rows.c). */
bool batch_norm_in_one_pass(const Node *n);
/* y = x in y's layout: Identity, Reshape... and a reduction over nothing
   (kernels_movement.c). */
void run_reshape_copy(Emitter *e, Node *n);
/* The emitters of opc's kernels that ops.def's emitter column names. */
extern const OpEmitter kernel_unary, kernel_binary, kernel_variadic, kernel_trilu, kernel_mod,
    kernel_pow, kernel_gelu, kernel_logic, kernel_cast_like, kernel_quantize,
    kernel_dynamic_quantize;                                           /* kernels_elementwise.c */
extern const OpEmitter kernel_reshape, kernel_transpose, kernel_concat, kernel_split,
    kernel_slice, kernel_expand, kernel_tile, kernel_depth_space, kernel_gather,
    kernel_gather_elements, kernel_pad, kernel_resize, kernel_reverse_sequence,
    kernel_grid_sample, kernel_roi_align, kernel_affine_grid,
    kernel_constant_of_shape, kernel_range;                            /* kernels_movement.c */
extern const OpEmitter kernel_gather_nd, kernel_scatter_nd, kernel_scatter_elements,
    kernel_arg, kernel_topk, kernel_non_zero, kernel_shape_of, kernel_nms, kernel_compress,
    kernel_one_hot, kernel_unique, kernel_tfidf; /* kernels_index.c */
extern const OpEmitter kernel_loss;                                    /* kernels_losses.c */
extern const OpEmitter kernel_recurrent;                               /* kernels_recurrent.c */
extern const OpEmitter kernel_dft, kernel_stft;                        /* kernels_spectral.c */
extern const OpEmitter kernel_matmul_integer, kernel_conv_integer,
    kernel_qlinear, kernel_quantized_add, kernel_quantized_lookup;                              /* kernels_quantized.c */
/* kernels_nhwc.c: whether the CPU target runs node n channels-last on its
   own kernels (choose-layout stored its float32 data so), and the
   channels-last forms of the pools and BatchNormalization that
   kernels_rows.c hands such nodes, of a Mul by a channel gate that
   kernels_elementwise.c does, and of a Resize that kernels_movement.c
   does. */
bool node_runs_nhwc(const Emitter *e, const Node *n);
/* The emitter of such a node (kernel_conv_nhwc for a convolution, else
   ops.def's kernel emitter where it takes the node), or NULL. */
const OpEmitter *nhwc_emitter(Emitter *e, const Node *n);
bool pool_nhwc_takes(const Emitter *e, const Node *n);
void emit_pool_nhwc(Emitter *e, const Node *n);
bool batch_norm_nhwc_takes(const Emitter *e, const Node *n);
void emit_batch_norm_nhwc(Emitter *e, const Node *n);
bool channel_gate_nhwc_takes(const Emitter *e, const Node *n);
void emit_channel_gate_nhwc(Emitter *e, const Node *n);
/* A Resize of channels-last x and y over H and W, whose opc_resize launch
   `general` (kernels_movement.c) has worked out: opc_resize_nhwc takes it
   from there. */
bool resize_nhwc_takes(const Emitter *e, const Node *n, const Launch *general);
void emit_resize_nhwc(Emitter *e, const Node *n, const Launch *general);
extern const OpEmitter kernel_pool, kernel_max_unpool, kernel_reduce, kernel_softmax, kernel_layer_norm,
    kernel_rms_norm, kernel_group_norm, kernel_rotary_embedding, kernel_attention,
    kernel_instance_norm, kernel_lrn, kernel_batch_norm, kernel_se_gate, kernel_reduce_more,
    kernel_row_more, kernel_det;                                       /* kernels_rows.c */
/* ops.def's kernel column: the kernel's name ("opc_selu"), and the names of
   the float parameters it takes (its row's attrs column, "alpha=1.67...,
   gamma=1.05..."), which act_param() reads from the node. NULL, or 0:
   none. */
const char *op_kernel(Emitter *e, OpKind op);
int op_kernel_params(Emitter *e, OpKind op, const char *names[2]);
/* A kernel shared by several kinds takes which one it computes in i[0]:
   the column's "opc_compare[1 Greater]" gives 1 and its label "Greater".
   False when the kind's kernel is its own. */
bool op_kernel_code(Emitter *e, OpKind op, int *code, const char **label);
/* ops.def's cudnn column: cuDNN's name of the kind's operation
   ("CUDNN_OP_TENSOR_ADD"), or NULL. */
const char *op_cudnn(OpKind op);

/* ------------------------------------------------ the core's own state */

/* One constant array in net.weights. */
typedef struct Weight {
  const char *cname;
  DType dtype;      /* how it is stored */
  const void *data; /* the IR's form: float for floating dtypes, else int64_t */
  int64_t count;
  int64_t offset; /* in bytes from the start of its file's data; a multiple of 64 */
  int model;      /* a serving program's model whose file holds it; 0 otherwise */
} Weight;

/* A set of C identifiers (open addressing on the arena). */
typedef struct NameSet {
  const char **slots;
  int cap, count;
} NameSet;

typedef struct Uses {
  bool lib[LIB_COUNT];
  bool cudnn, cublas, workspace, kernels;
  bool one, zero, make_tensor, make_conv;
  bool pick_conv_algo, pick_deconv_algo;
  bool conv_forms; /* a convolution chooses its fused form in create() */
  bool failure;    /* the CPU's set-up code reports through cpu_failure() */
} Uses;

typedef struct EmitState {
  FILE *sec[SEC_COUNT];
  char *text[SEC_COUNT];
  size_t len[SEC_COUNT];

  NameSet fields;   /* every member of the context struct so far */
  NameSet node_ids; /* prefixes of node fields and setup functions */

  /* C statements net_run() runs once its work has ended, each ending in
     `return -1` on failure: a run-time Loop's iterations against its scan
     outputs' rows (backend/loop.c). */
  const char **after_run;
  int nafter_run;
  /* Device buffers of run-time faults (a Slice of run-time starts:
     kernels_movement.c), five int64s each: create()'s eager run reads
     inputs no caller gave, so they are zeroed after it. */
  const char **faults;
  int nfaults;

  Weight *weights;
  int nweights, capweights;
  int64_t weight_bytes;      /* all of them */
  /* A serving program has a weights file per model: its arrays, its bytes. */
  int *model_nweights;
  int64_t *model_weight_bytes;

  /* What the assembled file must define because something used it: the
     GPU's code, and the host CPU's (HOPE), which has copies of its own. */
  Uses gpu, cpu;
  const Node *fields_node; /* whose comment heads the last fields printed */
  Node **issued;           /* the nodes enqueue() issues, in order */
  int nissued, capissued;

  const char **tensor_field; /* per tensor id: its buffer's field name */

  /* The nodes whose form of calls create() chooses, and the field holding it. */
  const Node **formed;
  const char **form_field;
  int nformed, capformed;

  /* What a node's setup code decided, for its run code: per node id. */
  void **node_data;
} EmitState;

/* What the code being printed uses: the GPU's, or in CPU code the CPU's. */
Uses *used(Emitter *e);

void emit_reserve_names(Emitter *e);
/* Before the first context field of e->node: a comment naming the node. */
void emit_fields_header(Emitter *e);
/* A node's setup function in create(), where its emitter has one (nodes.c). */
void emit_node_setup(Emitter *e, const OpEmitter *op, Node *n);
/* `s` made safe to print inside a C comment. */
const char *comment_text(Emitter *e, const char *s);
/* Gives every tensor of the graph its field name, before anything else. */
void emit_name_tensors(Emitter *e);

/* Workspace of the node's stream: a void * and its size in bytes. The setup
   code raises the size; create() allocates the largest after all setups. */
const char *node_workspace(Emitter *e, const Node *n);
const char *node_workspace_bytes(Emitter *e, const Node *n);

/* A cuDNN descriptor field `<node>_<what>` of type cudnn<kind>Descriptor_t:
   created in the current setup code and destroyed in destroy(). */
const char *emit_desc(Emitter *e, const Node *n, const char *kind, const char *what);

/* Records that create() chooses the form of n's calls, kept in the context
   field `field` (FORM_FUSED, FORM_FUSED_PRECOMP or FORM_SEPARATE), so that
   --verbose and profiles can say which one each node took. */
void emit_record_form(Emitter *e, const Node *n, const char *field);

/* The weights file: header, data, checksum (weights.c). */
bool write_weights(Emitter *e, const char *path);
/* A serving program's weights file of one model. */
bool write_model_weights(Emitter *e, int model, const char *path);
uint64_t weights_hash(const unsigned char *p, size_t n, uint64_t h);

/* The library emitters that ops.def's library column names. */
extern const OpEmitter cudnn_conv, cudnn_deconv, cudnn_pool, cudnn_reduce, cudnn_softmax,
    cudnn_lrn, cudnn_batch_norm, cudnn_activation, cudnn_arith;       /* ops_cudnn.c */
extern const OpEmitter blas_gemm, blas_matmul;                          /* ops_blas.c */
extern const OpEmitter copy_op; /* ops_copy.c: data movement by copies and views */
extern const OpEmitter loop_op; /* loop.c: a run-time Loop, a WHILE node */
extern const OpEmitter if_op;   /* if.c: a run-time If, an IF node with two bodies */
/* loop.c: whether g holds a run-time Loop or If (a node with a body) */
bool graph_has_loop(const Graph *g);

/* An emitter for a body (loop.c): the graph's state, but the body's graph,
   its own per-tensor and per-node names, and its launches on the node's
   body stream (c->ID_stream). emit.c's field names per tensor id are the
   body's while it is in use (body_begin, body_end). */
typedef struct BodyEmitter {
  Emitter e;
  Emitter *outer;    /* the graph's */
  const char *trips; /* a Loop's trip count's buffer, or NULL */
  const char **tensor_field, **saved;
} BodyEmitter;
void body_emitter(Emitter *e, const Node *n, Graph *body, BodyEmitter *b);
void body_begin(BodyEmitter *b);
void body_end(BodyEmitter *b);
/* The kernels a copy of e asked for, and its failure, back into e. */
void body_take_back(Emitter *e, const Emitter *copy);
/* A body's tensors into the node's region of the arena, its last output. */
void place_body(const Node *n, Graph *body);
/* One body node: its work in a run function of its own, a call to it in
   `calls`; refused, naming `owner`, where it calls what CUDA does not
   allow in a conditional node's body. */
bool emit_body_node(BodyEmitter *b, const Node *owner, Node *n, FILE *calls);
/* Every node of `body` in schedule order, as emit_body_node prints them: the
   calls' text (malloc'd, for the caller to free), or NULL on a failure. */
char *emit_body_calls(BodyEmitter *b, const Node *owner, Graph *body);
void emit_after_run(Emitter *e);     /* loop.c: EmitState.after_run's statements */
/* loop.c: one more of them, a block checking what the run left on the
   device (net_run() prints them after its work is done). */
void add_after_run(Emitter *e, const char *code);
/* loop.c: a Loop's or If's stream its bodies are captured on, created in
   create() and destroyed in destroy(). */
void capture_stream_setup(Emitter *e, Node *n);
void capture_stream_teardown(Emitter *e, Node *n);
/* loop.c: a function adding a conditional node to the CUDA graph being
   captured on n's stream. emit_conditional_open prints its head: the
   declarations and the handle, created for that graph, in `handle`; the
   caller then prints what sets the handle's first value (device code).
   emit_conditional_close adds the node of `type` ("cudaGraphCondTypeIf",
   "cudaGraphCondTypeWhile") with `size` bodies after everything before it,
   captures body k by the call body_calls[k] (a C expression, 0 on success)
   on n's capture stream, and returns. w is the caller's copy of e, printing
   to the setup section. */
void emit_conditional_open(Emitter *w, Emitter *e, const Node *n, const char *fn,
                           const char *comment);
void emit_conditional_close(Emitter *w, const Node *n, const char *type, int size,
                            const char *const *body_calls);
const OpEmitter *transfer_op_emitter(void);   /* ops_copy.c: a copy between GPUs */
/* "base + offset", or base when the offset is 0 (ops_copy.c). */
const char *offset_ptr(Emitter *e, const char *base, int64_t offset);

bool buffer_is_contiguous(const Tensor *t);
/* The per-node record of the setup code (zeroed, in the arena). */
void *node_data(Emitter *e, const Node *n, size_t size);

/* A comma-separated list of numbers, for "(const int[]){...}". */
const char *int_list(Emitter *e, int count, const int64_t *v);

/*
 * A copy of `dims` elements between two strided layouts, with the cheapest
 * call that is fast: cudaMemcpyAsync when both are contiguous,
 * cudaMemcpy2DAsync when rows are long and contiguous (2-D),
 * cudnnTransformTensor for such rows in more dims, else opc's copy kernel
 * (short or strided rows; any source strides). plan_copy() is pure;
 * copy_setup() creates the descriptors a cuDNN copy needs (in setup code),
 * copy_run() prints the call (in run code).
 */
typedef enum CopyKind {
  COPY_NOTHING, COPY_1D, COPY_2D, COPY_CUDNN, COPY_KERNEL, COPY_IMPOSSIBLE
} CopyKind;
typedef struct CopyPlan {
  CopyKind kind;
  int rank;
  int64_t dims[IR_MAX_RANK], dst[IR_MAX_RANK], src[IR_MAX_RANK];
  const char *dst_desc, *src_desc;
} CopyPlan;
CopyPlan plan_copy(int rank, const int64_t *dims, const int64_t *dst_strides,
                   const int64_t *src_strides);
void copy_setup(Emitter *e, const Node *n, const char *what, CopyPlan *p);
void copy_run(Emitter *e, const Node *n, const CopyPlan *p, const char *dst, const char *src);

/*
 * The fused activation of a Conv or Gemm (n->act), applied in place on its
 * output y: cudnnActivationForward for RELU, SIGMOID, TANH and CLIP with a
 * zero minimum, opc's kernel (emit_kernel_activation) for the others.
 */
typedef struct ActPlan {
  const char *act; /* activation descriptor, or NULL */
} ActPlan;
bool act_supported(const Node *n);
void act_setup(Emitter *e, const Node *n, ActPlan *p);
void act_run(Emitter *e, const Node *n, const ActPlan *p, const char *ydesc, const char *y);

/*
 * net.c's parts, by file, in the order program.c prints them. Each prints
 * at e->f; the nodes' code must have been printed into the sections first.
 */
const char *base_name(Emitter *e, const char *path);     /* "net.c" of "out/net.c" */
const char *absolute_path(Emitter *e, const char *path); /* from the working directory */
/* Prints a template's lines with "net_" replaced by the prefix (program.c). */
void put_template(FILE *f, const char *prefix, const char *const *lines);
void emit_nodes(Emitter *e);            /* nodes.c: every node into the sections */
void emit_struct(Emitter *e);           /* frame.c: the context struct */
/* devices.c: a program on several GPUs (--gpus N) */
bool emit_multi_gpu(const Emitter *e);
int stream_device(const Emitter *e, int s);
void emit_device_tables(Emitter *e);   /* stream_device[], event_device[], node_device[] */
const char *gpu_device(Emitter *e, const char *gpu); /* "c->gpu[gpu]": its CUDA device */
void emit_set_device(Emitter *e, const char *gpu);
void emit_device_fields(Emitter *e);
void emit_device_count_check(Emitter *e); /* in create(): each GPU's device (map_gpus) */
void emit_device_memory(Emitter *e);   /* in create(): the other GPUs' arenas and weights */
void emit_device_teardown(Emitter *e);
const char *device_arena(Emitter *e, int device);  /* "c->arena", "c->gpu_arena[1]" */
const char *device_weights(Emitter *e);            /* of the node being printed */
void emit_helper_types(Emitter *e);   /* helpers.c: their types, before the context */
void emit_check_helpers(Emitter *e);    /* helpers.c: what the code above used */
/* cpu_units.c: the host CPU's part of a --devices gpu,cpu program (HOPE) */
bool emit_has_cpu(const Emitter *e);
bool node_is_cpu_code(const Emitter *e, const Node *n); /* a CPU unit, not a copy */
char *cpu_prefix_line(const char *line); /* prefix_api.c: CUDA names get "cpu_" (malloc'd) */
char *cpu_line(const char *line);        /* and net.c's helpers that take their types */
void emit_cpu_fields(Emitter *e);
void emit_cpu_memory(Emitter *e);     /* in create(): stream, handles, arena, weights */
void emit_cpu_workspace(Emitter *e);  /* in create(): after the setups */
void emit_cpu_teardown(Emitter *e);
const char *emit_cpu_host_function(Emitter *e, const Node *n, const char *run);
const char *emit_cpu_setup_fail(Emitter *e); /* the set-up code's failure statement */
void emit_cpu_check(Emitter *e, const char *fail); /* after a synchronisation */
void emit_cpu_helpers(Emitter *e);
void emit_weights_loader(Emitter *e);   /* weights.c */

/*
 * serve.c: a serving program's parts (Graph.serve): its tables, the copies
 * enqueue() issues, a CUDA graph per combination of copies, the launcher
 * (serve_template.c) and its main (serve_main_template.c).
 */
int serve_combinations(const ServeInfo *s); /* past the limit: LIMIT_SERVE_COMBINATIONS + 1 */
bool check_serve(const Graph *g, const EmitOptions *opt);
void emit_serve_tables(Emitter *e);  /* before the context struct */
void emit_serve_bind_io(Emitter *e); /* create(): c->io */
void emit_serve_weights(Emitter *e); /* create(): each model's weights */
void emit_serve_rounds(Emitter *e);  /* set_active, capture, issue_round, the launcher */
void emit_serve_create(Emitter *e);  /* the end of create() */
void emit_serve_main(Emitter *e);
void emit_serve_header(Emitter *e);  /* net.h */
/* nodes.c: a capture() function; program.c: net.h's input and output functions. */
void emit_capture_into(Emitter *e, const char *what, const char *params, const char *prelude,
                       const char *target);
void emit_io_declarations(Emitter *e, const char *model);
void emit_node_table(Emitter *e);       /* node_table.c: node_info[], begin_node()... */
void emit_enqueue(Emitter *e);          /* nodes.c */
void emit_capture(Emitter *e);          /* nodes.c */
void emit_create(Emitter *e);           /* frame.c */
void emit_run(Emitter *e);              /* frame.c: run() and run_device() */
void emit_destroy(Emitter *e);          /* frame.c: destroy() and error() */
void emit_metadata(Emitter *e, bool inputs); /* frame.c: the inputs' or outputs' info */
/* run_checks.c: the run-time checks of pinned shape inputs (ir/pin.c) */
void emit_run_check_code(Emitter *e);     /* their code and table in net.c */
void emit_run_checks(Emitter *e);         /* in run(), over host inputs */
void emit_run_device_checks(Emitter *e);  /* in run_device(), over device inputs */
int64_t run_check_staging_bytes(const Graph *g);
void emit_output_shape(Emitter *e); /* frame.c: net_output_shape, the dims of the last run */
void emit_profile(Emitter *e);          /* node_table.c: net_profile() */
void emit_trace_run(Emitter *e);        /* node_table.c: main's --trace */
void emit_describe(Emitter *e, bool for_main); /* node_table.c: --verbose */

#endif
