/*
 * shapes.h - private to ir/: what shape inference (ops.c) and the
 * compile-time evaluators (fold.c) share. Everything else reads a node's
 * resolved parameters (Node.p, Node.win) from ir.h.
 */
#ifndef OPC_IR_SHAPES_H
#define OPC_IR_SHAPES_H

#include "ir.h"

/* Shape: the range of dims it returns. */
void shape_range(const Node *n, int rank, int *start, int *end);

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
