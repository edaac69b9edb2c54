/*
 * prefix_api.c - the prefix rule of opc's prefixed CPU runtime
 * (libopcrt_cpu.a, opc_cpu.h): every CUDA, cuDNN, cuBLAS, NVRTC and NVTX
 * identifier gets the prefix cpu_, so that code placed on the CPU calls the
 * CPU runtime beside the real CUDA libraries.
 *
 *   char *cpu_prefix_line(const char *line);
 *
 * returns a malloc'd copy of `line` (any text, newlines included) with every
 * API identifier prefixed, NULL when out of memory. It is the rule of
 * runtime/prefix_header.py, which made opc_cpu.h, in C:
 *
 *   (?<![A-Za-z0-9_])(?:(?:cuda|cudnn|cublas|cu[A-Z]|CU|nvrtc|NVRTC|nvtx|NVTX)[A-Za-z0-9_]*
 *                      |(?:dim3|_nvrtcProgram)(?![A-Za-z0-9_]))
 *
 * A maximal run of identifier characters is an API identifier when it starts
 * with cuda, cudnn, cublas, cu + an uppercase letter, CU, nvrtc, NVRTC,
 * nvtx or NVTX, or is dim3 or _nvrtcProgram. Nothing is skipped: comments,
 * string literals and #include names are rewritten too. Applying it twice
 * changes nothing more. runtime/tests/test_prefixed.py checks that this
 * function and the Python rule agree on the runtime's headers.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

char *cpu_prefix_line(const char *line);

#define CPU_PREFIX "cpu_"

static bool is_ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static bool starts_with(const char *s, size_t n, const char *p) {
  size_t k = strlen(p);
  return n >= k && memcmp(s, p, k) == 0;
}

static bool equals(const char *s, size_t n, const char *p) {
  return strlen(p) == n && memcmp(s, p, n) == 0;
}

/* Whether the identifier s[0..n) belongs to the API. */
static bool is_api_ident(const char *s, size_t n) {
  static const char *const starts[] = {"cuda", "cudnn", "cublas", "CU",
                                       "nvrtc", "NVRTC", "nvtx", "NVTX"};
  for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++)
    if (starts_with(s, n, starts[i]))
      return true;
  if (n >= 3 && s[0] == 'c' && s[1] == 'u' && s[2] >= 'A' && s[2] <= 'Z')
    return true;
  return equals(s, n, "dim3") || equals(s, n, "_nvrtcProgram");
}

char *cpu_prefix_line(const char *line) {
  size_t len = strlen(line), plen = strlen(CPU_PREFIX);
  /* At most one prefix per identifier of at least 2 characters, and identifiers are
     separated: len / 2 + 1 prefixes bound it. */
  size_t cap = len + (len / 2 + 1) * plen + 1;
  char *out = malloc(cap);
  if (!out)
    return NULL;
  size_t o = 0;
  for (size_t i = 0; i < len;) {
    if (!is_ident_char(line[i])) {
      out[o++] = line[i++];
      continue;
    }
    size_t j = i;
    while (j < len && is_ident_char(line[j]))
      j++;
    if (is_api_ident(line + i, j - i)) {
      memcpy(out + o, CPU_PREFIX, plen);
      o += plen;
    }
    memcpy(out + o, line + i, j - i);
    o += j - i;
    i = j;
  }
  out[o] = 0;
  return out;
}
