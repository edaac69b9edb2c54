/*
 * prelude_cpu.h - compiles opc_kernels.inc as plain C for the CPU runtime.
 *
 * A launch becomes `opc_nparts` calls of the kernel function, one per part;
 * part p runs its own contiguous slice of the parallel loop.
 *
 * The runtime compiles the kernels once per instruction set: for plain
 * x86-64, for AVX2 with FMA (x86-64-v3) and for AVX-512 (x86-64-v4), named
 * with OPC_ISA_SUFFIX ("", "_avx2", "_avx512"); module.c calls the widest
 * the CPU has.
 */
#ifndef OPC_PRELUDE_CPU_H
#define OPC_PRELUDE_CPU_H

#include <math.h>

#ifndef OPC_ISA_SUFFIX
#define OPC_ISA_SUFFIX
#endif
#define OPC_PASTE_(a, b) a##b
#define OPC_PASTE(a, b) OPC_PASTE_(a, b)

#include "vector_math.h"

/* Whether the launch is dense: rank 1, unit stride for y, and for each
 * input k what inputs[k] says: 'd' unit stride, 's' one element broadcast
 * (stride 0), and nothing in the inputs after the string's end. That is
 * what the backend's collapse() makes of contiguous elementwise work, with
 * or without a scalar operand. If so, the fields are stored again as
 * constants, so that the kernel body inlined after this test sees plain
 * arrays and its loop vectorises; the values are the ones the fields
 * already held, so the body computes exactly what it would. */
static inline __attribute__((always_inline)) int opc_dense(struct opc_kargs *a, const char *inputs)
{
  if (a->rank != 1 || a->ystride[0] != 1)
    return 0;
  int used = (int)__builtin_strlen(inputs);
  for (int k = 0; k < 4; k++) {
    long long stride = k < used && inputs[k] == 'd';
    if (a->xstride[k][0] != stride || (a->x_extent[k] != 0) != (k < used))
      return 0;
  }
  a->rank = 1;
  a->ystride[0] = 1;
  for (int k = 0; k < 4; k++)
    a->xstride[k][0] = k < used && inputs[k] == 'd';
  return 1;
}

#define OPC_DEVICE static
/* The formulas of scalar/scalar.h, which kernel_types.py writes in, with
 * libm's (vectorisable) expf. */
#define OPC_SCALAR static inline
#define OPC_SCALAR_EXP expf
#define OPC_ALWAYS_INLINE inline __attribute__((always_inline))
/* A function whose float sums may be taken in any order, which is what
 * lets GCC vectorise a dot product (a sum kept in vector lanes, added
 * across at the end); NaN and infinities still propagate. Other
 * compilers keep the written order. */
#if defined(__GNUC__) && !defined(__clang__)
#define OPC_REASSOCIATE __attribute__((optimize("associative-math", "no-signed-zeros", "no-trapping-math")))
#else
#define OPC_REASSOCIATE
#endif
/* The kernel function runs the body inlined four times: for dense launches
 * with one input, with two, with a second input broadcast, and for any
 * launch. */
#define OPC_KERNEL(name)                                                                    \
  static inline __attribute__((always_inline)) void OPC_PASTE(name, _body)(                \
      const struct opc_kargs a, int opc_part, int opc_nparts);                              \
  void OPC_PASTE(name, OPC_ISA_SUFFIX)(const struct opc_kargs a, int opc_part, int opc_nparts) \
  {                                                                                         \
    struct opc_kargs d = a;                                                                 \
    if (opc_dense(&d, "d"))                                                                 \
      OPC_PASTE(name, _body)(d, opc_part, opc_nparts);                                      \
    else if (opc_dense(&d, "dd"))                                                           \
      OPC_PASTE(name, _body)(d, opc_part, opc_nparts);                                      \
    else if (opc_dense(&d, "ds"))                                                           \
      OPC_PASTE(name, _body)(d, opc_part, opc_nparts);                                      \
    else                                                                                    \
      OPC_PASTE(name, _body)(a, opc_part, opc_nparts);                                      \
  }                                                                                         \
  static inline __attribute__((always_inline)) void OPC_PASTE(name, _body)(                \
      const struct opc_kargs a, int opc_part, int opc_nparts)
/* A 2-D pool's plane (image n, channel c) along AVX-512 vectors, by the
 * runtime (kernels_cpu.c), in the kernel's buffer of `floats`; 0 where
 * that does not take it, and always where the kernels are built without
 * the runtime (the kernel tests' runner). */
#ifdef OPC_KERNELS_IN_RUNTIME
int opc_pool_plane_vectors(const struct opc_kargs *a, long long n, long long c, int average,
                           float *buf, long long floats);
#define OPC_POOL_PLANE_VECTORS(a, n, c, average, buf, floats) \
  opc_pool_plane_vectors(a, n, c, average, buf, floats)
#else
#define OPC_POOL_PLANE_VECTORS(a, n, c, average, buf, floats) 0
#endif
/* Units [begin, end) of opc_int8_conv_packed and items of
 * opc_qconv_depthwise_nhwc along AVX-512 VNNI, items of opc_quantized_add
 * (a dense launch's) and opc_max_pool_i8/u8 (channels-last) along AVX-512,
 * and of a dense opc_quantized_lookup along AVX-512 VBMI, by the runtime
 * (int8_avx512.c), from the AVX-512 kernels only; 0 where the CPU lacks
 * the instructions, so that the plain body runs, as it does in the
 * narrower kernels (OPC_KERNEL_ISA) and in the kernel tests' runner. */
#if defined(OPC_KERNELS_IN_RUNTIME) && defined(OPC_ISA_AVX512)
int opc_int8_conv_packed_vnni(const struct opc_kargs *a, int x_signed, long long begin,
                              long long end);
int opc_qconv_depthwise_vnni(const struct opc_kargs *a, int x_signed, long long begin,
                             long long end);
int opc_quantized_add_avx512(const struct opc_kargs *a, int x_signed, long long begin,
                             long long end);
#define OPC_INT8_CONV_PACKED_FAST(a, x_signed, begin, end) \
  opc_int8_conv_packed_vnni(a, x_signed, begin, end)
#define OPC_QCONV_DEPTHWISE_FAST(a, x_signed, begin, end) \
  opc_qconv_depthwise_vnni(a, x_signed, begin, end)
#define OPC_QUANTIZED_ADD_FAST(a, x_signed, begin, end) \
  opc_quantized_add_avx512(a, x_signed, begin, end)
int opc_max_pool_bytes_avx512(const struct opc_kargs *a, int x_signed, long long begin,
                              long long end);
#define OPC_MAX_POOL_BYTES_FAST(a, x_signed, begin, end) \
  opc_max_pool_bytes_avx512(a, x_signed, begin, end)
int opc_lookup_bytes_vbmi(const struct opc_kargs *a, long long begin, long long end);
#define OPC_QUANTIZED_LOOKUP_FAST(a, begin, end) opc_lookup_bytes_vbmi(a, begin, end)
/* Units of opc_conv_nhwc and opc_channel_affine_nhwc and items of
 * opc_conv_depthwise_nhwc and opc_pool_nhwc (the CPU target's channels-last
 * float kernels) along AVX-512 (conv_avx512.c). */
int opc_conv_nhwc_fast(const struct opc_kargs *a, long long begin, long long end);
int opc_conv_depthwise_nhwc_fast(const struct opc_kargs *a, long long begin, long long end);
#define OPC_CONV_NHWC_FAST(a, begin, end) opc_conv_nhwc_fast(a, begin, end)
#define OPC_CONV_DEPTHWISE_NHWC_FAST(a, begin, end) opc_conv_depthwise_nhwc_fast(a, begin, end)
int opc_pool_nhwc_fast(const struct opc_kargs *a, long long begin, long long end);
int opc_channel_affine_nhwc_fast(const struct opc_kargs *a, long long begin, long long end);
#define OPC_POOL_NHWC_FAST(a, begin, end) opc_pool_nhwc_fast(a, begin, end)
#define OPC_CHANNEL_AFFINE_NHWC_FAST(a, begin, end) opc_channel_affine_nhwc_fast(a, begin, end)
#else
#define OPC_INT8_CONV_PACKED_FAST(a, x_signed, begin, end) 0
#define OPC_QCONV_DEPTHWISE_FAST(a, x_signed, begin, end) 0
#define OPC_QUANTIZED_ADD_FAST(a, x_signed, begin, end) 0
#define OPC_MAX_POOL_BYTES_FAST(a, x_signed, begin, end) 0
#define OPC_QUANTIZED_LOOKUP_FAST(a, begin, end) 0
#define OPC_CONV_NHWC_FAST(a, begin, end) 0
#define OPC_CONV_DEPTHWISE_NHWC_FAST(a, begin, end) 0
#define OPC_POOL_NHWC_FAST(a, begin, end) 0
#define OPC_CHANNEL_AFFINE_NHWC_FAST(a, begin, end) 0
#endif
/* Conditional graph nodes: a kernel sets its node's handle. In the
 * runtime the call checks that a kernel of the graph running the node
 * makes it (graph.c); the kernel tests' runner has no graphs and drops it. */
typedef unsigned long long cudaGraphConditionalHandle;
#ifdef OPC_KERNELS_IN_RUNTIME
void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);
#else
static inline void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value)
{
  (void)handle;
  (void)value;
}
#endif
/* A part's iterations are consecutive, so a kernel may carry coordinates
 * from one iteration to the next instead of dividing them out again. */
#define OPC_CONSECUTIVE 1
#define OPC_FOR_EACH(i, count)                                                   \
  for (long long i = (count) * opc_part / opc_nparts,                            \
                 opc_end_##i = (count) * (opc_part + 1) / opc_nparts;            \
       i < opc_end_##i; i++)
/* Tile kernels (prelude_cuda.h): one thread runs a part's tiles whole, so
 * a tile's "threads" are a plain loop, its barrier nothing and its shared
 * arrays the thread's own. */
#define OPC_TILES(t, count) OPC_FOR_EACH(t, count)
/* Unit kernels (opc_kernels.inc): the runtime splits them by iterations. */
#define OPC_FOR_EACH_UNIT(i, count) OPC_FOR_EACH(i, count)
#define OPC_THREADS(i, count) for (long long i = 0; i < (count); i++)
#define OPC_SYNC() ((void)0)
#define OPC_SHARED
/* The part's range of iterations [OPC_PART_BEGIN, OPC_PART_END), for a
 * kernel that takes them in runs rather than one by one. */
#define OPC_PART_BEGIN(count) ((count) * opc_part / opc_nparts)
#define OPC_PART_END(count) ((count) * (opc_part + 1) / opc_nparts)

#endif
