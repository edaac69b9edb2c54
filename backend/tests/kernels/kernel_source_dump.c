/*
 * kernel_source_dump.c - prints the kernel source the way net.c carries it,
 * for test_compile.py to compile: the CUDA prelude (or, with --cpu, an
 * #include of the C one), struct opc_kargs, then the blocks that the named
 * kernels need, or every block when none is named.
 *
 * usage: kernel_source_dump [--cpu] [--list] [KERNEL...]
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernel_source.h"

static bool needed(int k, int argc, char **argv, int first) {
  if (first == argc)
    return true;
  for (int a = first; a < argc; a++) {
    for (int b = 0; b < kernel_nblocks; b++) {
      if (kernel_blocks[b].kind != KB_KERNEL || strcmp(kernel_blocks[b].name, argv[a]) != 0)
        continue;
      if (b == k)
        return true;
      for (int d = 0; d < kernel_blocks[b].ndeps; d++)
        if (kernel_blocks[b].deps[d] == k)
          return true;
    }
  }
  return false;
}

int main(int argc, char **argv) {
  int first = 1;
  bool cpu = false;
  if (first < argc && strcmp(argv[first], "--list") == 0) {
    for (int b = 0; b < kernel_nblocks; b++)
      if (kernel_blocks[b].kind == KB_KERNEL)
        printf("%s\n", kernel_blocks[b].name);
    return 0;
  }
  if (first < argc && strcmp(argv[first], "--cpu") == 0) {
    cpu = true;
    first++;
  }
  /* On the CPU the prelude comes after the struct, as the runtime has it. */
  if (!cpu)
    printf("%s\n", kernel_prelude_cuda);
  printf("%s\n", kernel_kargs_h);
  if (cpu)
    printf("#include \"prelude_cpu.h\"\n");
  for (int k = 0; k < kernel_nblocks; k++)
    if (needed(k, argc, argv, first))
      printf("\n%s\n", kernel_blocks[k].text);
  return 0;
}
