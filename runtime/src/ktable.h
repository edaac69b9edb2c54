/* ktable.h - the table of kernels built into the runtime, generated from
 * kernels/opc_kernels.inc by kernels/gen_table.py. */
#ifndef OPC_KTABLE_H
#define OPC_KTABLE_H

#include <stddef.h>

#include "opc_kargs.h"

typedef void KernelFn(const struct opc_kargs a, int opc_part, int opc_nparts);

/* A CUfunction points at one of these. */
struct CUfunc_st {
  const char *name;
  KernelFn *fn;
};

extern const struct CUfunc_st opc_kernel_table[];
extern const int opc_kernel_count;

/* The kernel called `name`, or NULL. */
const struct CUfunc_st *kernel_find(const char *name, size_t len);

#endif
