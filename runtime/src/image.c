/*
 * image.c - the formats of module images (see image.h): a CUBIN's ELF
 * header as CUDA's ELF ABI 8 lays it out (the SM in bits 8-15 of e_flags,
 * where older ABIs had it in bits 0-7), and PTX's leading directives.
 */
#include <stdlib.h>
#include <string.h>

#include "image.h"

enum { EM_CUDA = 190, ELFOSABI_CUDA = 0x41, CUDA_ELF_ABI = 8 };

static void put16(unsigned char *p, unsigned v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, unsigned long v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static unsigned long get32(const unsigned char *p) {
  return p[0] | (unsigned long)p[1] << 8 | (unsigned long)p[2] << 16 | (unsigned long)p[3] << 24;
}

void cubin_write(unsigned char *image, int sm) {
  memset(image, 0, CUBIN_SIZE);
  memcpy(image, "\x7f" "ELF", 4);
  image[4] = 2; /* 64-bit */
  image[5] = 1; /* little-endian */
  image[6] = 1; /* ELF version */
  image[7] = ELFOSABI_CUDA;
  image[8] = CUDA_ELF_ABI;
  put16(image + 16, 2); /* an executable */
  put16(image + 18, EM_CUDA);
  put32(image + 20, 1);
  put32(image + 48, (unsigned long)sm << 8);
  put16(image + 52, CUBIN_SIZE);
}

/* Byte by byte: a shorter image (PTX "") ends before the magic does. */
bool image_is_elf(const unsigned char *image) {
  return image[0] == 0x7f && image[1] == 'E' && image[2] == 'L' && image[3] == 'F';
}

int cubin_sm(const unsigned char *image) {
  if (!image_is_elf(image) || image[4] != 2 || image[5] != 1)
    return 0;
  if ((image[18] | image[19] << 8) != EM_CUDA)
    return 0;
  unsigned long flags = get32(image + 48);
  return (int)(image[8] >= CUDA_ELF_ABI ? (flags >> 8) & 0xff : flags & 0xff);
}

/* "9.0" as 90; -1 if it is not a version. */
static int parse_version(const char *s) {
  char *end;
  long major = strtol(s, &end, 10);
  if (end == s || *end != '.' || end[1] < '0' || end[1] > '9')
    return -1;
  return (int)(major * 10 + (end[1] - '0'));
}

bool ptx_header(const char *text, int *isa, int *target) {
  *isa = *target = -1;
  for (const char *line = text; *line;) {
    const char *s = line + strspn(line, " \t\r");
    const char *nl = strchr(s, '\n');
    if (strncmp(s, ".version", 8) == 0)
      *isa = parse_version(s + 8 + strspn(s + 8, " \t"));
    else if (strncmp(s, ".target", 7) == 0 && strncmp(s + 7 + strspn(s + 7, " \t"), "sm_", 3) == 0)
      *target = atoi(s + 7 + strspn(s + 7, " \t") + 3);
    else if (*s != '\n' && *s != 0 && strncmp(s, "//", 2) != 0)
      break; /* the code begins: the directives come before it */
    if (!nl)
      break;
    line = nl + 1;
  }
  return *isa > 0 && *target > 0;
}
