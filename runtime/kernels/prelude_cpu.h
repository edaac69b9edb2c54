/*
 * prelude_cpu.h - compiles opc_kernels.inc as plain C for the CPU runtime.
 *
 * A launch becomes `opc_nparts` calls of the kernel function, one per part;
 * part p runs its own contiguous slice of the parallel loop.
 */
#ifndef OPC_PRELUDE_CPU_H
#define OPC_PRELUDE_CPU_H

#include <math.h>

#define OPC_DEVICE static
#define OPC_KERNEL(name) void name(const struct opc_kargs a, int opc_part, int opc_nparts)
#define OPC_FOR_EACH(i, count)                                                   \
  for (long long i = (count) * opc_part / opc_nparts,                            \
                 opc_end_##i = (count) * (opc_part + 1) / opc_nparts;            \
       i < opc_end_##i; i++)

#endif
