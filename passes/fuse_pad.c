/*
 * fuse_pad.c - an explicit Pad in front of a Conv or pooling node becomes
 * that node's own padding, when the two are the same thing:
 *   Conv         pads with zeros: the Pad must be constant mode, value 0;
 *   AveragePool  counts padded zeros only with count_include_pad=1;
 *   MaxPool      ignores padded cells, which equals padding with -inf.
 * Only spatial axes may be padded, by non-negative amounts, and the Pad's
 * output must feed nothing else. ceil_mode pools are left alone: their last
 * window may hang past the padded input, where the two forms disagree.
 */
#include <math.h>
#include <string.h>

#include "pass.h"
#include "rewrite.h"

typedef struct PadSpec {
  int64_t begin[IR_MAX_RANK], end[IR_MAX_RANK];
  float value;
} PadSpec;

/* Reads a constant-mode Pad's amounts and value, resolved by shape inference. */
static bool read_pad(const Node *pad, int rank, PadSpec *p) {
  memset(p, 0, sizeof *p);
  if (pad->p.pad.mode != PAD_CONSTANT || !pad->p.pad.pads)
    return false;
  const int64_t *pads = pad->p.pad.pads;
  const int *axes = pad->p.pad.axes;
  int naxes = pad->p.pad.naxes;
  if (pad->p.pad.npads != 2 * naxes || naxes > rank)
    return false;
  for (int i = 0; i < naxes; i++) {
    p->begin[axes[i]] += pads[i];
    p->end[axes[i]] += pads[naxes + i];
  }
  p->value = pad->p.pad.value;
  Tensor *tvalue = node_input(pad, 2);
  if (tvalue) {
    if (tensor_numel(tvalue) != 1 || !tvalue->f32)
      return false;
    p->value = tvalue->f32[0];
  }
  return true;
}

static bool consumer_accepts(const Node *n, float value) {
  if (n->op == OP_CONV)
    return value == 0.0f;
  if (n->op == OP_AVERAGE_POOL)
    return value == 0.0f && n->win.count_include_pad && !n->win.ceil_mode;
  if (n->op == OP_MAX_POOL) {
    if (n->nout > 1 && n->out[1] && (n->out[1]->nusers || n->out[1]->is_output))
      return false; /* indices would count the padding */
    return isinf(value) && value < 0 && !n->win.ceil_mode;
  }
  return false; /* no other kind pads */
}

bool pass_fuse_pad(Graph *g, const PassOptions *opt, PassContext *ctx) {
  begin_rewrite(g);
  int fused = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *pad = g->nodes[i];
    if (pad->dead || pad->op != OP_PAD || !node_input(pad, 0) || pad->nout < 1)
      continue;
    Tensor *x = pad->in[0], *y = pad->out[0];
    Node *c = sole_consumer(y);
    int rank = x->rank;
    if (!c || c->in[0] != y || rank < 3 || c->win.nspatial != rank - 2)
      continue;
    PadSpec p;
    if (!read_pad(pad, rank, &p) || !consumer_accepts(c, p.value))
      continue;
    bool ok = p.begin[0] == 0 && p.end[0] == 0 && p.begin[1] == 0 && p.end[1] == 0;
    for (int a = 2; a < rank; a++)
      ok = ok && p.begin[a] >= 0 && p.end[a] >= 0;
    if (!ok)
      continue;

    int ns = rank - 2;
    Attr *pads = node_set_attr(g, c, "pads", ATTR_INTS);
    pads->n = 2 * ns;
    pads->ints = arena_alloc(g->arena, sizeof(int64_t) * (size_t)(2 * ns));
    for (int s = 0; s < ns; s++) {
      c->win.pad_begin[s] += p.begin[s + 2];
      c->win.pad_end[s] += p.end[s + 2];
      pads->ints[s] = c->win.pad_begin[s];
      pads->ints[ns + s] = c->win.pad_end[s];
    }
    /* The pads are explicit now; SAME_* would recompute them. */
    if (c->win.auto_pad)
      node_set_attr(g, c, "auto_pad", ATTR_STRING)->s = "NOTSET";
    c->in[0] = x;
    node_absorb(g, c, pad);
    pad->dead = true;
    fused++;
  }
  if (!fused)
    return true;
  return finish_rewrite(g);
}
