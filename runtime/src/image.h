/*
 * image.h - the module images the runtime's NVRTC makes and its
 * cuModuleLoadData reads. The kernels are built into the runtime, so an
 * image carries only what a driver checks before loading: for PTX, the
 * .version and .target directives; for a CUBIN, the SM in its ELF header.
 */
#ifndef OPC_IMAGE_H
#define OPC_IMAGE_H

#include <stdbool.h>

/* A CUBIN is an ELF64 header (EM_CUDA) and nothing else. */
enum { CUBIN_SIZE = 64 };

void cubin_write(unsigned char *image, int sm);
/* Whether the image starts as an ELF file does. */
bool image_is_elf(const unsigned char *image);
/* The SM of a CUDA ELF image (90 for sm_90), or 0 if it is not one. */
int cubin_sm(const unsigned char *image);
/* PTX's ".version 9.0" as 90 and ".target sm_90" as 90; false when the
   text has no .version or .target directive before its code. */
bool ptx_header(const char *text, int *isa, int *target);

#endif
