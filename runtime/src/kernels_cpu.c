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

/* Typed kernels are written once for every element type: a NaN test
   (v != v) or a sign test is constant for some of those types. */
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wtautological-compare"
#include "opc_kernels_expanded.inc" /* opc_kernels.inc, typed kernels instantiated */

const struct CUfunc_st *kernel_find(const char *name, size_t len) {
  for (int i = 0; i < opc_kernel_count; i++) {
    const char *k = opc_kernel_table[i].name;
    if (strlen(k) == len && memcmp(k, name, len) == 0)
      return &opc_kernel_table[i];
  }
  return NULL;
}
