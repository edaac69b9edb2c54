/*
 * opc_kargs.h - the one argument block of every opc kernel.
 *
 * Shared by the host code of net.c, the CUDA kernels (compiled by NVRTC,
 * which has no standard headers: hence `long long`, not int64_t) and the CPU
 * runtime, which compiles the same kernels as C. Kernels take it by value.
 *
 * Conventions common to all kernels (opc_kernels.inc documents the rest):
 *   dims[0..rank)   the iteration space, usually the output's shape;
 *   ystride[d]      element stride of y along dims[d];
 *   xstride[k][d]   element stride of input x[k] along dims[d] (0 broadcasts);
 *   x_extent[k]     bytes reachable from x[k] (0 when x[k] is unused),
 *   y_extent        the same for y: the CPU runtime's race checker reads them;
 *                   x_extent[3] < 0 instead says that x[3] is a table of
 *                   -x_extent[3] bytes listing the parts of x[0..3) read, as
 *                   int64 triples (operand, byte offset from it, bytes), for
 *                   a kernel reading scattered tensors from one base
 *                   (opc_concat_runs), whose own extents are then 0;
 *
 * The pointers are untyped: a kernel is written once over an element type
 * and instantiated per type (opc_add_i64, opc_copy_b8, ...), and each
 * instance casts them to its own type.
 *   f[], i[]        per-kernel scalar parameters;
 *   act             the activation an activation kernel applies: its code in
 *                   scalar/scalar.h's list (OPC_ACT_*, parameters in f[0]
 *                   and f[1]), 0 for the other kernels. The CPU runtime
 *                   folds such a launch, in place right after a
 *                   convolution, into the convolution's epilogue.
 *   y_runs          above 1: y is written as y_runs runs of y_extent bytes,
 *                   y_run_stride bytes apart (a channel slice of
 *                   channels-last data, which the CPU target's kernels
 *                   write straight into a Concat's output), so that the
 *                   race checker sees the bytes between them as not
 *                   written; 0 for the other launches;
 *   adds            a convolution's epilogue kernel (opc_conv_epilogue):
 *                   1 when it adds a per-channel bias x[1] to x[0] before
 *                   its activation, 2 when also a residual x[2]; 0 for the
 *                   other kernels. The CPU runtime folds it like act.
 */
#ifndef OPC_KARGS_H
#define OPC_KARGS_H

struct opc_kargs {
  const void *x[4];
  void *y;
  long long n; /* iterations of the kernel's parallel loop */
  int rank;
  long long dims[8];
  long long xstride[4][8];
  long long ystride[8];
  long long x_extent[4];
  long long y_extent;
  long long y_runs, y_run_stride;
  float f[8];
  long long i[16];
  int act;
  int adds;
};

#endif
