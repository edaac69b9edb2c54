/*
 * import.h - what the files of frontend/ share: the importer's state and
 * the decoding of TensorProto data into the IR's canonical form.
 */
#ifndef OPC_IMPORT_H
#define OPC_IMPORT_H

#include "frontend.h"
#include "onnx.pb-c.h"
#include "onnx-data.pb-c.h"

/*
 * The names a subgraph being imported defines (an If's branch, a Loop's
 * iteration), innermost first. Each maps to a tensor of its own, named
 * with the scope's prefix ("if1/t"), so that two subgraphs may use one
 * name and an outer name is never mistaken for an inner one.
 */
typedef struct Scope {
  const char *prefix;
  const char **names;
  struct Tensor **tensors;
  int n, cap;
  struct Scope *parent;
} Scope;

typedef struct SeqValue SeqValue; /* a sequence or optional (sequence.c) */

typedef struct Importer {
  Graph *g;
  const char *dir; /* directory of the model file: external data is relative to it */
  const ImportOptions *opt;
  int ninitializers; /* tensors 0..ninitializers-1 are the initializers */
  bool failed;       /* an error has been reported; keep going to find the others */
  int if_depth;      /* subgraphs being inlined, one inside another */
  Scope *scope;      /* the innermost subgraph's names; NULL in the main graph */
  struct LoopCapture *capture; /* the run-time Loop body being imported (loop.c), or NULL */
  const Onnx__GraphProto *top; /* the main graph, for its declared shapes */
  SeqValue **seqs;   /* what the placeholders of sequences and optionals stand for */
  int nseqs, seqcap;
} Importer;

/* Protobuf-c leaves absent proto2 strings NULL; the importer treats them as "". */
static inline const char *proto_str(const char *s) { return s ? s : ""; }

/*
 * Fills t's dtype, shape and constant data (t->f32 or t->i64) from `p`,
 * whatever storage form the data is in, external files included. `what`
 * names the tensor in messages ("initializer 'w'"); `n` is the node the
 * tensor belongs to, or NULL. Reports and returns false on bad data.
 */
bool tensor_from_proto(Importer *im, const Node *n, const char *what,
                       const Onnx__TensorProto *p, Tensor *t);

/*
 * Fills t from `len` bytes of packed elements of dtype `dt` in C order
 * (little-endian unless `big_endian`), checking that the length matches
 * the shape. Reports against `what` and returns false on a mismatch.
 */
bool tensor_from_bytes(Importer *im, const char *what, DType dt, int rank, const int64_t *dims,
                       const uint8_t *data, size_t len, bool big_endian, Tensor *t);

/*
 * --const-input: reads the file of `ci` (a TensorProto .pb or a .npy) into
 * t's dtype, shape and constant data. Reports and returns false when the
 * file is missing, corrupt or holds a tensor opc cannot represent.
 */
bool const_input_load(Importer *im, const ConstInput *ci, Tensor *t);

/*
 * --const-input of a sequence (a SequenceProto file) or, `optional`, an
 * optional (an OptionalProto) of a tensor or, `of_seq`, of a sequence: the tensors it holds, each a new constant,
 * in *items[0..*n), and whether an optional holds anything in *present.
 * Reports and returns false on a file it cannot read or bind.
 */
bool const_input_load_list(Importer *im, const ConstInput *ci, bool optional, bool of_seq,
                           bool *present, int *n, struct Tensor ***items);

/*
 * Einsum(in[0..nin)) with `equation` into y, as Transpose, Reshape, Slice,
 * Mul, ReduceSum and MatMul nodes named after `name` (einsum.c). Reports
 * (im->failed) and returns false on an equation it cannot lower.
 */
bool lower_einsum(Importer *im, const char *name, const char *equation, struct Tensor **in,
                  int nin, struct Tensor *y);

/* The tensor `name` refers to where the importer is (the innermost
   subgraph that defines it, else the main graph); NULL if none does. */
struct Tensor *import_lookup(Importer *im, const char *name);

/* Whether t is known at compile time, folding what it depends on; false,
   with an error naming node `name` (operator `op`), what t is to it
   (`what`: "position") and the graph input to bind, when it is not. */
bool import_known_now(Importer *im, const char *name, const char *op, struct Tensor *t,
                      const char *what);

/* A new int64 constant of n values, named "PREFIX/cK" with K = (*count)++:
   the shape and axis inputs of the nodes a lowering makes. */
struct Tensor *import_ints_constant(Graph *g, const char *prefix, int *count, const int64_t *v,
                                    int n);

/* The optimisers of ai.onnx.preview.training (Adagrad, Adam, Momentum),
   lowered to elementwise kinds (training.c). */
bool is_training_op(const Onnx__NodeProto *np);
void import_training_op(Importer *im, const Onnx__NodeProto *np, const char *name);

/* Scan, unrolled into its steps (scan.c). */
/* A Loop whose trip count or condition is run-time data, as one OP_LOOP
   node owning its body (loop.c). */
void import_runtime_loop(Importer *im, const Onnx__NodeProto *np, const char *name,
                         const Onnx__GraphProto *body);
/* Whether a Loop's iterations are all known at compile time: its trip
   count and condition known now, and its body's condition computed from
   them and constants only (loop.c). */
bool loop_known_now(Importer *im, const Onnx__NodeProto *np, const Onnx__GraphProto *body);
/* Whether every scan output of a Loop has a declared first dim, the bound
   of its rows when the Loop runs at run time (loop.c). */
bool loop_scans_bounded(Importer *im, const Onnx__NodeProto *np, const Onnx__GraphProto *body);
/* Inside a run-time Loop's body: the body's own tensor for t, a tensor of
   an enclosing graph (loop.c). */
struct Tensor *loop_capture(Importer *im, struct Tensor *t);
/* Inside a run-time Loop's body: the tensor `name` of the graph around
   it, or NULL (loop.c). */
struct Tensor *loop_capture_outer_find(Importer *im, const char *name);
/* Inside a run-time body: the graph around it (loop.c). */
Graph *loop_capture_outer_graph(Importer *im);
/* An If whose condition is run-time data as one OP_IF node owning both
   branches (a CUDA-graph IF node); false, with the reason, when it does
   not qualify (loop.c). */
bool import_runtime_if(Importer *im, const Onnx__NodeProto *np, const char *name,
                       struct Tensor *cond, const Onnx__GraphProto *then_gp,
                       const Onnx__GraphProto *else_gp, const char **why);
void import_scan(Importer *im, const Onnx__NodeProto *np, const char *name);

/* out = values[0..count), stacked along a new axis `axis`: an Unsqueeze
   of each, then one Concat named after `name` (Loop's and Scan's scan
   outputs). */
void import_stack(Importer *im, const char *name, struct Tensor **values, int count, int axis,
                  struct Tensor *out);

/* The graph attribute `attr` of a node ("body"), or NULL. */
const Onnx__GraphProto *import_graph_attr(const Onnx__NodeProto *np, const char *attr);

/* The nodes of subgraph gp in a scope of its own named `prefix`, its
   inputs standing for inputs[], outs[i] the tensor of its output i. False
   after an error. */
bool import_subgraph(Importer *im, const Onnx__GraphProto *gp, const char *prefix,
                     struct Tensor *const *inputs, struct Tensor **outs);

/*
 * Sequences and optionals (sequence.c). Each value of such a type is a
 * placeholder tensor that no IR node reads; seq_of says what it stands
 * for (NULL: t is a tensor). is_sequence_op: the operators the importer
 * lowers there; import_sequence_op lowers one.
 */
bool is_sequence_op(const char *op_type);
void import_sequence_op(Importer *im, const Onnx__NodeProto *np, const char *name);
const SeqValue *seq_of(const Importer *im, const struct Tensor *t);
const char *seq_kind_str(const SeqValue *v); /* "a sequence", "an optional" */
/* `to` takes from's value: through an Identity node named `name` for a
   tensor, as the same list for a sequence or optional. */
void connect_value(Importer *im, const char *name, struct Tensor *from, struct Tensor *to);
/* --const-input of a graph input whose type `tp` is a sequence or an
   optional: `holder` stands for what the file holds. */
void bind_sequence_input(Importer *im, const ConstInput *ci, const Onnx__TypeProto *tp,
                         struct Tensor *holder);

/* Why read_whole_file returned no data. */
typedef enum { READ_CANNOT_OPEN, READ_NOT_REGULAR, READ_EMPTY, READ_FAILED } ReadProblem;

/*
 * The whole of file `path` (malloc'd), its size in *len; or NULL with the
 * problem, and for READ_CANNOT_OPEN the errno of fopen in *os_error.
 * Reports nothing: the model and --const-input word it differently.
 */
uint8_t *read_whole_file(const char *path, size_t *len, ReadProblem *problem, int *os_error);

/* The directory part of `path`, "." when there is none. */
const char *path_dir(Arena *a, const char *path);

/* Converts an IEEE half or a bfloat16 bit pattern to float. */
float half_to_float(uint16_t h);
float bfloat16_to_float(uint16_t h);

#endif
