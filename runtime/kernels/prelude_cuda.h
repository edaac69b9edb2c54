/*
 * prelude_cuda.h - compiles opc_kernels.inc as CUDA C++ with NVRTC.
 *
 * NVRTC has no standard headers; the device maths functions (expf, erff,
 * rintf, ...) are built in, the constants of <math.h> are not. The parallel
 * loop is grid-stride, so any grid size covers any count.
 */
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif

#define OPC_DEVICE __device__
/* The formulas of scalar/scalar.h, written into the kernels' source. */
#define OPC_SCALAR __device__
#define OPC_SCALAR_EXP expf
#define OPC_ALWAYS_INLINE __forceinline__
#define OPC_REASSOCIATE /* prelude_cpu.h: for the CPU's vectorisation */
#define OPC_KERNEL(name) extern "C" __global__ void name(const struct opc_kargs a)
/* A thread's iterations are a grid apart, not consecutive (see prelude_cpu.h). */
#define OPC_CONSECUTIVE 0
#define OPC_FOR_EACH(i, count)                                                   \
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;           \
       i < (count); i += (long long)blockDim.x * gridDim.x)
/* Tile kernels (opc_se_gate): each tile is one block's work, its threads
   sharing arrays declared OPC_SHARED and meeting at OPC_SYNC(). Every
   thread of a block runs the same tiles, so all of them reach each
   barrier. The launch gives a block per tile, up to the grid limit. */
#define OPC_TILES(t, count) \
  for (long long t = blockIdx.x; t < (count); t += gridDim.x)
/* Unit kernels: a unit is one thread's, as any iteration. */
#define OPC_FOR_EACH_UNIT(i, count) OPC_FOR_EACH(i, count)
#define OPC_THREADS(i, count) \
  for (long long i = threadIdx.x; i < (count); i += blockDim.x)
#define OPC_SYNC() __syncthreads()
#define OPC_SHARED __shared__
/* Only for code under OPC_CONSECUTIVE: CPU planes (prelude_cpu.h), and an
   empty range. */
#define OPC_POOL_PLANE_VECTORS(a, n, c, average, buf, floats) 0
#define OPC_INT8_CONV_PACKED_FAST(a, x_signed, begin, end) 0
#define OPC_QCONV_DEPTHWISE_FAST(a, x_signed, begin, end) 0
#define OPC_QUANTIZED_ADD_FAST(a, x_signed, begin, end) 0
#define OPC_MAX_POOL_BYTES_FAST(a, x_signed, begin, end) 0
#define OPC_QUANTIZED_LOOKUP_FAST(a, begin, end) 0
#define OPC_CONV_NHWC_FAST(a, begin, end) 0
#define OPC_CONV_DEPTHWISE_NHWC_FAST(a, begin, end) 0
#define OPC_POOL_NHWC_FAST(a, begin, end) 0
#define OPC_CHANNEL_AFFINE_NHWC_FAST(a, begin, end) 0
#define OPC_PART_BEGIN(count) 0LL
#define OPC_PART_END(count) 0LL
/* Conditional graph nodes (CUDA 12.4+): a kernel sets its node's handle.
   Declared as CUDA 13's device runtime declares it; ptxas leaves it for
   the driver to resolve when it loads the module, as it does vprintf, so
   a whole-program compile needs neither -rdc nor a device link. */
typedef unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle,
                                                   unsigned int value);
