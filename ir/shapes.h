/*
 * shapes.h - private to ir/: what shape inference (ops.c) and the
 * compile-time evaluators (fold.c, fold_nn.c) share. Everything else reads a node's
 * resolved parameters (Node.p, Node.win) from ir.h.
 */
#ifndef OPC_IR_SHAPES_H
#define OPC_IR_SHAPES_H

#include "ir.h"

/* The sizes that only the values decide (fold.c), for the shape functions
   of NonZero and Unique (node->p.unique resolved). */
int64_t count_non_zero(const Tensor *x);
int64_t count_unique(const Node *n);
/* NonMaxSuppression's selection over constant boxes and scores (fold_nn.c,
   node->p.nms resolved): writes the rows (batch, class, box) to `rows`,
   which has room for per_class of them per batch and class, and returns
   their count. */
int64_t nms_select(const Node *n, int64_t *rows);

/* The compile-time evaluators of ops.def's fold column (fold.c, and the
   network operators' in fold_nn.c), declared from the table. Each
   elementwise kind has its own, over a loop that the kinds of its family
   share. */
#define OP(kind, name, min_in, max_in, min_out, max_out, infer, fold, ...) \
  bool fold(Graph *g, Node *n);
#include "ops.def"
#undef OP

/* After a node's shape function: where it reads a bounded tensor, whether
   it may, and its outputs' bounds (bounds.c). */
bool infer_bounds(Graph *g, Node *n);

/* After it: the symbols of its output's elements where they follow from
   its inputs' (symbolic.c; Tensor.sym). */
void infer_symbols(Graph *g, Node *n);
/* Whether s is run(origin) itself; s's value where each origin's run is
   its bound; s in words, for an error. */
bool sym_is_run(SymValue s);
int64_t sym_at_bound(SymValue s);
const char *sym_str(Graph *g, SymValue s);
/* The most a one-element integer tensor can hold at run time, from its
   constant, its symbol (each origin's run within its bound) or a Min or
   ReduceMin of such values (min(1000, n) as torchvision writes it, moved
   through Reshape and the like); INT64_MAX when unknown. */
int64_t sym_upper_bound(const Tensor *t);

/* Row-major index <-> coordinates over dims (fold.c); a zero dim gives 0. */
void unravel(int64_t index, int rank, const int64_t *dims, int64_t *coord);
int64_t ravel(int rank, const int64_t *dims, const int64_t *coord);

/* MatMul's operands as numpy promotes them (ops.c): a 1-D A becomes a row
   and a 1-D B a column, into ad/bd (IR_MAX_RANK + 1 dims each); the dims
   added leave the result again. */
void matmul_operands(const Tensor *a, const Tensor *b, int64_t *ad, int *ar, int64_t *bd,
                     int *br);

#endif
