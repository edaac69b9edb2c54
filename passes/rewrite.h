/*
 * rewrite.h - small helpers shared by the simplification, fusion and
 * storage passes: rewiring nodes, making constants and views.
 * Private to passes/.
 */
#ifndef OPC_REWRITE_H
#define OPC_REWRITE_H

#include "passes.h"

/* The one node reading `t`, or NULL when t has zero or several readers or
   is a graph output (its value must survive, so it cannot be fused away). */
Node *sole_consumer(const Tensor *t);

/*
 * Folds Adds into the Conv feeding them (fuse-bias, fuse-residual): for each
 * live Add of a Conv output `y` and another tensor `other`, where the Add is
 * y's only reader, the Conv has no activation or residual input yet and the
 * Add's output has y's shape, calls fold, with y as either operand until it
 * folds. A fold that returns true has made `conv` compute the Add.
 * Finishes the rewrite when anything was folded.
 */
typedef bool (*AddFolder)(Graph *g, Node *conv, Tensor *y, Node *add, Tensor *other);
bool fold_adds_into_convs(Graph *g, AddFolder fold);
/* After `into` took over the work of `eaten` (its only reader): `into`
   writes eaten's output and `eaten` is gone. */
void swallow_consumer(Graph *g, Node *into, Node *eaten);

/* Sets input slot i, growing the input array when i >= n->nin. */
void set_node_input(Graph *g, Node *n, int i, Tensor *t);
/* Makes `n` produce `t` in output slot `slot`. */
void set_node_output(Node *n, int slot, Tensor *t);
/* Records that `from` (and whatever it had absorbed) now lives inside `into`. */
void node_absorb(Graph *g, Node *into, const Node *from);

/*
 * Every read of `from` by a live node becomes a read of `to`. The readers
 * are found through from->users, so that this costs the readers, not the
 * graph: the lists are exact after begin_rewrite, and replace_reads keeps
 * them so (it adds the readers it moves to to->users). A pass that points
 * inputs at `from` by hand must rebuild the lists before calling it.
 */
void replace_reads(Graph *g, Tensor *from, Tensor *to);
/*
 * Removes node `n` whose output `out` carries the same value as `in`:
 * readers of `out` read `in` instead. When `out` is a graph output its name
 * must survive, so the producer of `in` is made to write `out` directly.
 * Returns false (and leaves the graph alone) when neither is possible.
 */
bool bypass_node(Graph *g, Node *n, Tensor *in, Tensor *out);

/* Whether t is a float32 constant holding one value; gives the value. */
bool scalar_constant(const Tensor *t, float *value);

/* A fresh f32 constant with the shape of `like`, named after it. */
Tensor *new_const_like(Graph *g, const Tensor *like, const char *suffix);
/* A fresh f32 constant of shape [n], filled with `fill`. */
Tensor *new_const_vector(Graph *g, const char *name, int64_t n, float fill);

bool has_contiguous_strides(const Tensor *t);
/* Makes `t` a view of storage `base` (never itself a view). */
void make_view(Tensor *t, Tensor *base, int64_t offset, const int64_t *strides);

/* Numbers nodes and tensors by position and rebuilds use lists: every
   pass starts from this, whoever ran before. */
void begin_rewrite(Graph *g);
/* Drops dead nodes and restores topological order after a rewrite. */
bool finish_rewrite(Graph *g);

/* Reads an activation node on float32 (a kind whose ops.def row names an
   act; Clip with constant bounds, Swish of alpha 1 only) into
   act/alpha/beta; false for anything else. */
bool activation_of(const Node *n, Activation *act, float *alpha, float *beta);

#endif
