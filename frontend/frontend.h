/* frontend.h - reading an ONNX model into the IR. */
#ifndef OPC_FRONTEND_H
#define OPC_FRONTEND_H

#include "../ir/ir.h"

/* A dimension pinned from the command line: --input-shape NAME=1x3x224x224. */
typedef struct InputShape {
  const char *name;
  int rank;
  int64_t dims[IR_MAX_RANK];
} InputShape;

/*
 * A graph input bound at compile time: --const-input NAME=FILE. The tensor
 * in FILE (an ONNX TensorProto, or a NumPy .npy array; for a sequence or
 * optional input, an ONNX SequenceProto or OptionalProto) replaces the input,
 * which becomes a constant and is no longer an input of the program. This
 * is how inputs that decide shapes (Reshape's shape, Resize's scales, ...)
 * become the compile-time constants a static-shape compiler needs.
 */
typedef struct ConstInput {
  const char *name;
  const char *path;
} ConstInput;

typedef struct ImportOptions {
  const InputShape *shapes;
  int nshapes;
  int64_t batch; /* --batch N: pins a symbolic or unknown leading dimension; 0 if unset */
  const ConstInput *consts;
  int nconsts;
  int64_t max_memory; /* --max-memory: the program's memory limit in bytes; 0: the default */
  const MaxDim *max_dims; /* --max-dim NAME=N */
  int nmax_dims;
  /* Several models in one program: an --input-shape or --const-input that
     names no input of this model is not an error here; the importer marks
     in these (one flag per shape, per binding) the ones this model used,
     and the caller checks that each was used by some model. NULL: one
     model, and every name must be its input. */
  bool *shape_used;
  bool *const_used;
} ImportOptions;

/*
 * Reads the model at `path`, lowers it to the IR, infers every shape and
 * folds the compile-time shape arithmetic. Returns NULL after reporting
 * every error found (all unsupported operators in one message).
 */
/* Operators the importer handles itself rather than as IR kinds, with
   their ONNX type words; the list ends with a NULL name. If: the branch its
   condition chooses is inlined; Loop: unrolled; so their conditions and
   trip counts must be known at compile time. Einsum: lowered to IR kinds. */
typedef struct ImportedOp {
  const char *name, *types;
  bool lowered; /* Einsum: made of IR kinds, which run at run time */
} ImportedOp;
extern const ImportedOp imported_ops[];

Graph *onnx_import(const char *path, const ImportOptions *opt);

/* Parses "1x3x224x224" (or "1,3,224,224"); false on a malformed string. */
bool parse_shape(const char *s, InputShape *out);

#endif
