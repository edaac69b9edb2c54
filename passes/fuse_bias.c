/*
 * fuse_bias.c - Conv followed by Add of a constant that is the same for
 * every position of a channel: the constant goes into the Conv's bias.
 *
 * Broadcasting aligns shapes on the right, so a per-channel constant for
 * an N-D output [N, C, d1..dk] has the shape [C, 1..1] (k ones) or
 * [1, C, 1..1]; a plain [C] would run along the last axis instead and is
 * not a bias (unless C is 1: a scalar).
 */
#include "pass.h"
#include "rewrite.h"

/* The per-channel value of constant `t` added to output `y`, via
   value[c * step]; false if t is not constant per channel. */
static bool per_channel(const Tensor *t, const Tensor *y, int64_t *step) {
  if (!t->f32 || t->rank > y->rank || y->rank < 2)
    return false;
  int64_t channels = y->dims[1];
  int lead = y->rank - t->rank; /* t's axis i is y's axis i + lead */
  *step = 0;
  for (int i = 0; i < t->rank; i++) {
    int axis = i + lead;
    if (t->dims[i] == 1)
      continue;
    if (axis != 1 || t->dims[i] != channels)
      return false;
    *step = 1; /* every other dim is 1, so channel c sits at element c */
  }
  return true;
}

/* Adds constant `k`, when it is per channel, to the bias of `conv`. */
static bool fold_bias(Graph *g, Node *conv, Tensor *y, Node *add, Tensor *k) {
  int64_t step;
  Tensor *b = node_input(conv, 2);
  int64_t channels = y->dims[1];
  if (!per_channel(k, y, &step) || (b && (!b->f32 || tensor_numel(b) != channels)))
    return false;
  Tensor *nb = new_const_vector(
      g, arena_printf(g->arena, "%s_bias", b ? b->name : conv->name), channels, 0);
  for (int64_t c = 0; c < channels; c++)
    nb->f32[c] = (b ? b->f32[c] : 0) + k->f32[c * step];
  set_node_input(g, conv, 2, nb);
  swallow_consumer(g, conv, add);
  return true;
}

bool pass_fuse_bias(Graph *g, const PassOptions *opt, PassContext *ctx) {
  return fold_adds_into_convs(g, fold_bias);
}
