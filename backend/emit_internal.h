/*
 * emit_internal.h - the core emitter's own state, shared by emit.c,
 * program.c and the operator emitters of the core (ops_*.c). The kernels'
 * emitter needs only emit.h.
 */
#ifndef OPC_EMIT_INTERNAL_H
#define OPC_EMIT_INTERNAL_H

#include "emit.h"

/* One constant array in net.weights. */
typedef struct Weight {
  const char *cname;
  const float *data;
  int64_t count;
  int64_t offset; /* in floats from the start of the data; a multiple of 16 */
} Weight;

/* A set of C identifiers (open addressing on the arena). */
typedef struct NameSet {
  const char **slots;
  int cap, count;
} NameSet;

typedef struct EmitState {
  FILE *sec[SEC_COUNT];
  char *text[SEC_COUNT];
  size_t len[SEC_COUNT];

  NameSet fields;   /* every member of the context struct so far */
  NameSet node_ids; /* prefixes of node fields and setup functions */

  Weight *weights;
  int nweights, capweights;
  int64_t weight_floats;

  /* What the assembled file must define because something used it. */
  bool lib_used[LIB_COUNT];
  bool uses_cudnn, uses_cublas, uses_workspace;
  bool uses_one, uses_zero, uses_make_tensor;
  bool uses_pick_conv_algo, uses_pick_deconv_algo;
  bool uses_conv_forms; /* a convolution chooses its fused form in create() */
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

void emit_reserve_names(Emitter *e);
/* Before the first context field of e->node: a comment naming the node. */
void emit_fields_header(Emitter *e);
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
uint64_t weights_hash(const unsigned char *p, size_t n, uint64_t h);

/* Emitters of the core, by file. */
const OpEmitter *cudnn_op_emitter(OpKind op); /* ops_cudnn.c */
const OpEmitter *blas_op_emitter(OpKind op);  /* ops_blas.c */
const OpEmitter *copy_op_emitter(OpKind op);  /* ops_copy.c */

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

#endif
