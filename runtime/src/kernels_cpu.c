/*
 * kernels_cpu.c - opc's custom kernels compiled as C. The kernel text is
 * shared with the CUDA build; prelude_cpu.h makes each kernel a function
 * that runs one part of its parallel loop.
 */
#include <math.h>
#include <string.h>

#include "opc_kargs.h"
#include "prelude_cpu.h"
#include "ktable.h"

#include "opc_kernels.inc"

const struct CUfunc_st *kernel_find(const char *name, size_t len) {
  for (int i = 0; i < opc_kernel_count; i++) {
    const char *k = opc_kernel_table[i].name;
    if (strlen(k) == len && memcmp(k, name, len) == 0)
      return &opc_kernel_table[i];
  }
  return NULL;
}
