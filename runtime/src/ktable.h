/* ktable.h - the table of kernels built into the runtime, generated from
 * kernels/opc_kernels.inc by kernels/gen_table.py. */
#ifndef OPC_KTABLE_H
#define OPC_KTABLE_H

#include <stddef.h>

#include "opc_kargs.h"

typedef void KernelFn(const struct opc_kargs a, int opc_part, int opc_nparts);

/* The instruction sets each kernel is compiled for (prelude_cpu.h). */
enum { KERNEL_X86_64, KERNEL_AVX2, KERNEL_AVX512, KERNEL_ISAS };

/* A CUfunction points at one of these. */
struct CUfunc_st {
  const char *name;
  KernelFn *fn[KERNEL_ISAS];
  int tiles; /* a tile kernel: each block one tile (opc_kernels.inc) */
  int units; /* a unit kernel: each iteration much work (opc_kernels.inc) */
};

extern const struct CUfunc_st opc_kernel_table[];
extern const int opc_kernel_count;

/* The kernel called `name`, or NULL. */
const struct CUfunc_st *kernel_find(const char *name, size_t len);
/* The instruction set whose kernels run: the widest the CPU has, or a
 * narrower one that OPC_KERNEL_ISA names (x86-64, avx2, avx512). */
int kernel_isa(void);
const char *kernel_isa_name(int isa);

#endif
