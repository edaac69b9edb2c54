/*
 * import.h - what the files of frontend/ share: the importer's state and
 * the decoding of TensorProto data into the IR's canonical form.
 */
#ifndef OPC_IMPORT_H
#define OPC_IMPORT_H

#include "frontend.h"
#include "onnx.pb-c.h"

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

typedef struct Importer {
  Graph *g;
  const char *dir; /* directory of the model file: external data is relative to it */
  const ImportOptions *opt;
  int ninitializers; /* tensors 0..ninitializers-1 are the initializers */
  bool failed;       /* an error has been reported; keep going to find the others */
  int if_depth;      /* subgraphs being inlined, one inside another */
  Scope *scope;      /* the innermost subgraph's names; NULL in the main graph */
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
 * Einsum(in[0..nin)) with `equation` into y, as Transpose, Reshape, Slice,
 * Mul, ReduceSum and MatMul nodes named after `name` (einsum.c). Reports
 * (im->failed) and returns false on an equation it cannot lower.
 */
bool lower_einsum(Importer *im, const char *name, const char *equation, struct Tensor **in,
                  int nin, struct Tensor *y);

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
