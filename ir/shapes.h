/*
 * shapes.h - private to ir/: the pieces of shape inference (ops.c) that
 * the compile-time evaluator (fold.c) needs too, so that both read the
 * attributes and shape inputs the same way. Each reports its own errors.
 */
#ifndef OPC_IR_SHAPES_H
#define OPC_IR_SHAPES_H

#include "ir.h"

/* Resolves a possibly negative axis against `rank`; reports when out of range. */
bool resolve_axis(Graph *g, Node *n, int64_t axis, int rank, int *out);

/* Slice: per input axis, the first index and the step (1 on untouched axes)
   and the output extent. */
bool slice_plan(Graph *g, Node *n, int64_t *start, int64_t *step, int64_t *extent);

/* Split: the axis and the size of each of the node's outputs. */
bool split_plan(Graph *g, Node *n, int *axis, int64_t *sizes);

/* Reduce*: which input axes are reduced; *noop when the node is an identity
   (empty axes with noop_with_empty_axes). */
bool reduce_plan(Graph *g, Node *n, bool *reduced, bool *noop);

/* Transpose: the permutation, perm[i] = input axis of output axis i. */
bool transpose_plan(Graph *g, Node *n, int *perm);

/* Gather: the axis. */
bool gather_axis(Graph *g, Node *n, int *axis);

/* Concat: the axis. */
bool concat_axis(Graph *g, Node *n, int *axis);

/* Softmax and LogSoftmax: the axis (before opset 13 everything from it on
   is one flattened axis; *coerce2d tells which). */
bool softmax_axis(Graph *g, Node *n, int *axis, bool *coerce2d);

/* Shape: the range of dims it returns. */
void shape_range(const Node *n, int rank, int *start, int *end);

/* Cast: the target dtype. */
bool cast_target(Graph *g, Node *n, DType *to);

/* --- more operators --- */

/* Trilu: the diagonal offset k (0 when the input is absent). */
bool trilu_k(Graph *g, Node *n, int64_t *k);

/* GatherElements: the axis. */
bool gather_elements_axis(Graph *g, Node *n, int *axis);

/* CumSum: the axis, from its constant input. */
bool cumsum_axis(Graph *g, Node *n, int *axis);

/* MeanVarianceNormalization: which axes the statistics run over. */
bool mvn_axes(Graph *g, Node *n, bool *reduced);

/* LpNormalization: the axis and p (1 or 2). */
bool lp_norm_plan(Graph *g, Node *n, int *axis, int *p);

/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: the reduction, and
   the ignored label (*has_ignore false when the node names none). */
bool loss_attrs(Graph *g, Node *n, LossReduction *reduction, bool *has_ignore,
                int64_t *ignore);

/* The compile-time evaluators of ops.def's fold column (fold.c). */
bool fold_unary(Graph *g, Node *n);
bool fold_prelu(Graph *g, Node *n);
bool fold_clip(Graph *g, Node *n);
bool fold_broadcast(Graph *g, Node *n);
bool fold_mod(Graph *g, Node *n);
bool fold_copy(Graph *g, Node *n);
bool fold_dropout(Graph *g, Node *n);
bool fold_concat(Graph *g, Node *n);
bool fold_split(Graph *g, Node *n);
bool fold_slice(Graph *g, Node *n);
bool fold_transpose(Graph *g, Node *n);
bool fold_tile(Graph *g, Node *n);
bool fold_expand(Graph *g, Node *n);
bool fold_gather(Graph *g, Node *n);
bool fold_gather_elements(Graph *g, Node *n);
bool fold_trilu(Graph *g, Node *n);
bool fold_softmax(Graph *g, Node *n);
bool fold_hardmax(Graph *g, Node *n);
bool fold_reduce(Graph *g, Node *n);
bool fold_reduce_more(Graph *g, Node *n);
bool fold_cumsum(Graph *g, Node *n);
bool fold_constant(Graph *g, Node *n);
bool fold_shape(Graph *g, Node *n);
bool fold_cast(Graph *g, Node *n);
bool fold_constant_of_shape(Graph *g, Node *n);
bool fold_range(Graph *g, Node *n);
bool fold_eye_like(Graph *g, Node *n);

#endif
