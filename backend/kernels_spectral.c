/*
 * kernels_spectral.c - DFT and STFT as launches of opc's kernels (opc_dft,
 * opc_stft): one work item per complex output value, each a direct sum
 * over its transform (O(n^2) per transform, fine at audio front ends' frame sizes).
 * The windows and MelWeightMatrix always fold at compile time.
 */
#include <string.h>

#include "emit.h"

/* DFT: the input read by its strides along the output's dims (0 along the
   last, whose extent differs: real or complex), its axis's stride the
   kernel's step along the transform. A run-time axis is x[1]. */
static void run_dft(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  int last = y->rank - 1;
  Launch L = {.kernel = typed_kernel(e, "opc_dft", y->dtype)};
  set_element_type(&L, y->dtype);
  L.rank = y->rank;
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  int64_t ys[IR_MAX_RANK], xs[IR_MAX_RANK], low;
  strides_of(y, ys);
  set_output(&L, buf(e, y), ys);
  strides_of(x, xs);
  L.i[2] = xs[last];
  L.i[3] = x->dims[last];
  xs[last] = 0;
  set_input(&L, 0, buf(e, x), xs);
  xs[last] = L.i[2];
  L.x_extent[0] = reach(x->rank, x->dims, xs, &low);
  L.i[0] = n->p.dft.axis;
  if (n->p.dft.axis_at_run_time) {
    set_input(&L, 1, buf(e, n->in[2]), (int64_t[IR_MAX_RANK]){0});
    L.x_extent[1] = 1;
    L.x_bytes[1] = (int)dtype_size(n->in[2]->dtype);
    L.i[1] = index_kind(n->in[2]);
    L.note = "x[1] holds the axis, read at run time";
  }
  L.i[4] = n->p.dft.used;
  L.i[5] = n->p.dft.length;
  L.i[6] = !n->p.dft.inverse ? 0 : n->p.dft.onesided ? 2 : 1;
  L.i[7] = y->dims[last];
  /* One work item per complex value: the last dim is the item's own. */
  L.dims[last] = 1;
  L.n = tensor_numel(y) / (y->dims[last] ? y->dims[last] : 1);
  group_i(&L, 0, 8, "axis, its index kind (0: that axis), the input's component stride and "
                    "count, values summed, length, mode (0 forward, 1 inverse, 2 IRFFT), "
                    "the output's components");
  emit_launch(e, n, &L);
}

/* STFT over the output [batch, frames, bins, 2]; the signal and the window
   by their strides, given to the kernel as numbers. */
static void run_stft(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0], *w = n->p.dft.has_window ? n->in[2] : NULL;
  Launch L = {.kernel = typed_kernel(e, "opc_stft", y->dtype)};
  set_element_type(&L, y->dtype);
  L.rank = 4;
  memcpy(L.dims, y->dims, sizeof(int64_t) * 4);
  int64_t ys[IR_MAX_RANK], xs[IR_MAX_RANK], ws[IR_MAX_RANK] = {0}, none[IR_MAX_RANK] = {0}, low;
  strides_of(y, ys);
  set_output(&L, buf(e, y), ys);
  strides_of(x, xs);
  set_input(&L, 0, buf(e, x), none);
  L.x_extent[0] = reach(x->rank, x->dims, xs, &low);
  if (w) {
    strides_of(w, ws);
    set_input(&L, 1, buf(e, w), none);
    L.x_extent[1] = reach(1, w->dims, ws, &low);
  }
  L.i[0] = xs[0];
  L.i[1] = xs[1];
  L.i[2] = xs[2];
  L.i[3] = x->dims[2];
  L.i[4] = n->p.dft.step;
  L.i[5] = n->p.dft.length;
  L.i[6] = w != NULL;
  L.i[7] = ws[0];
  L.dims[3] = 1; /* one work item per complex value */
  L.n = tensor_numel(y) / 2;
  group_i(&L, 0, 8, "the signal's batch, sample and component strides, components, "
                    "frame_step, frame_length, has a window, its stride");
  emit_launch(e, n, &L);
}

/* ------------------------------------- the emitters ops.def names */

const OpEmitter kernel_dft = {.run = run_dft};
const OpEmitter kernel_stft = {.run = run_stft};
