/*
 * kernel_source.h - the text of opc's kernels, as the compiler carries it.
 *
 * kernel_source.c is generated at build time by kernel_source_gen.py from
 * runtime/kernels/{opc_kernels.inc,prelude_cuda.h,opc_kargs.h}; the CPU
 * runtime compiles the same files, so there is one source of truth.
 */
#ifndef OPC_KERNEL_SOURCE_H
#define OPC_KERNEL_SOURCE_H

#include <stddef.h>

typedef enum KernelBlockKind {
  KB_NOTE,   /* a comment on a group of kernels */
  KB_HELPER, /* an OPC_DEVICE function */
  KB_KERNEL, /* an OPC_KERNEL */
} KernelBlockKind;

typedef struct KernelBlock {
  const char *name; /* the function's name; "noteN" for notes */
  KernelBlockKind kind;
  const char *text; /* its source lines, with the comment above it */
  int ndeps;
  const int *deps; /* blocks it needs, transitively, as indices, ascending */
} KernelBlock;

/* In file order: a block's dependencies come before it. */
extern const KernelBlock kernel_blocks[];
extern const int kernel_nblocks;

extern const char kernel_prelude_cuda[]; /* prelude_cuda.h */
extern const char kernel_kargs_h[];      /* opc_kargs.h */

#endif
