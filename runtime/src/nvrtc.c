/*
 * nvrtc.c - NVRTC without a compiler. The CPU runtime already holds every
 * kernel of opc_kernels.inc as C, so "compiling" only checks that each
 * kernel the source defines is one of them; that catches a program built
 * from a newer opc_kernels.inc than the runtime it links with.
 *
 * What it does model is versions, which decide whether a GPU's driver can
 * load the result: like NVRTC 13.0 it accepts -arch for the architectures
 * of nvrtcGetSupportedArchs, stamps its PTX with PTX ISA 9.0, and makes a
 * CUBIN only for a real architecture (sm_XY, not compute_XY).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "ktable.h"
#include "nvrtc.h"

enum { NVRTC_MAJOR = 13, NVRTC_MINOR = 0, PTX_ISA_MAJOR = 9, PTX_ISA_MINOR = 0, DEFAULT_ARCH = 75 };

/* NVRTC 13.0's list: Volta (sm_70) is gone, Turing is the oldest. */
static const int supported_archs[] = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};
#define NARCHS ((int)(sizeof supported_archs / sizeof supported_archs[0]))

struct _nvrtcProgram {
  char *src;
  char *log;
  char *ptx;    /* after a successful compile, else NULL */
  int arch;     /* 90 for sm_90 or compute_90 */
  bool virtual; /* compute_XY: PTX only, no CUBIN */
};

const char *nvrtcGetErrorString(nvrtcResult result) {
  switch (result) {
  case NVRTC_SUCCESS: return "NVRTC_SUCCESS";
  case NVRTC_ERROR_OUT_OF_MEMORY: return "NVRTC_ERROR_OUT_OF_MEMORY";
  case NVRTC_ERROR_PROGRAM_CREATION_FAILURE: return "NVRTC_ERROR_PROGRAM_CREATION_FAILURE";
  case NVRTC_ERROR_INVALID_INPUT: return "NVRTC_ERROR_INVALID_INPUT";
  case NVRTC_ERROR_INVALID_PROGRAM: return "NVRTC_ERROR_INVALID_PROGRAM";
  case NVRTC_ERROR_INVALID_OPTION: return "NVRTC_ERROR_INVALID_OPTION";
  case NVRTC_ERROR_COMPILATION: return "NVRTC_ERROR_COMPILATION";
  case NVRTC_ERROR_BUILTIN_OPERATION_FAILURE: return "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE";
  case NVRTC_ERROR_INTERNAL_ERROR: return "NVRTC_ERROR_INTERNAL_ERROR";
  }
  return "NVRTC_ERROR unknown";
}

nvrtcResult nvrtcVersion(int *major, int *minor) {
  if (!major || !minor)
    return NVRTC_ERROR_INVALID_INPUT;
  *major = NVRTC_MAJOR;
  *minor = NVRTC_MINOR;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetNumSupportedArchs(int *numArchs) {
  if (!numArchs)
    return NVRTC_ERROR_INVALID_INPUT;
  *numArchs = NARCHS;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetSupportedArchs(int *supportedArchs) {
  if (!supportedArchs)
    return NVRTC_ERROR_INVALID_INPUT;
  memcpy(supportedArchs, supported_archs, sizeof supported_archs);
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name,
                               int numHeaders, const char *const *headers,
                               const char *const *includeNames) {
  (void)name;
  (void)headers;
  (void)includeNames;
  if (!prog || !src || numHeaders < 0)
    return NVRTC_ERROR_INVALID_INPUT;
  struct _nvrtcProgram *p = calloc(1, sizeof *p);
  if (!p || !(p->src = strdup(src)) || !(p->log = strdup(""))) {
    if (p)
      free(p->src);
    free(p);
    return NVRTC_ERROR_OUT_OF_MEMORY;
  }
  *prog = p;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog) {
  if (!prog || !*prog)
    return NVRTC_ERROR_INVALID_PROGRAM;
  free((*prog)->src);
  free((*prog)->log);
  free((*prog)->ptx);
  free(*prog);
  *prog = NULL;
  return NVRTC_SUCCESS;
}

/* Appends `line` to the program's log. */
static bool log_append(nvrtcProgram p, const char *line) {
  size_t old = strlen(p->log), n = strlen(line);
  char *log = realloc(p->log, old + n + 1);
  if (!log)
    return false;
  memcpy(log + old, line, n + 1);
  p->log = log;
  return true;
}

/* Appends the line that says kernel `name` is none of the runtime's. */
static bool log_unknown_kernel(nvrtcProgram p, const char *name, size_t len) {
  char line[256];
  snprintf(line, sizeof line,
           "error: kernel '%.*s' is not built into the opc CPU runtime "
           "(rebuild libopcrt with this opc_kernels.inc)\n",
           (int)(len > 100 ? 100 : len), name);
  return log_append(p, line);
}

static bool is_ident(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* The number of "sm_90", "compute_90" (or "sm_90a"): 90, with *virtual set;
   0 if NVRTC does not know that architecture. */
static int parse_arch(const char *value, bool *virtual) {
  const char *digits;
  if (strncmp(value, "sm_", 3) == 0)
    digits = value + 3, *virtual = false;
  else if (strncmp(value, "compute_", 8) == 0)
    digits = value + 8, *virtual = true;
  else
    return 0;
  char *end;
  long arch = strtol(digits, &end, 10);
  if (end == digits || (*end && strcmp(end, "a") != 0 && strcmp(end, "f") != 0))
    return 0;
  for (int i = 0; i < NARCHS; i++)
    if (supported_archs[i] == arch)
      return (int)arch;
  return 0;
}

/* Reads -arch / --gpu-architecture ("=value" or the next option), the last
   one winning as in NVRTC; other options are not modelled and are ignored. */
static nvrtcResult read_options(nvrtcProgram p, int n, const char *const *options) {
  p->arch = DEFAULT_ARCH;
  p->virtual = true;
  static const char *const names[] = {"-arch", "--gpu-architecture"};
  for (int i = 0; i < n; i++) {
    if (!options || !options[i])
      return NVRTC_ERROR_INVALID_INPUT;
    for (int k = 0; k < 2; k++) {
      size_t len = strlen(names[k]);
      const char *value = NULL;
      if (strncmp(options[i], names[k], len) == 0 && options[i][len] == '=')
        value = options[i] + len + 1;
      else if (strcmp(options[i], names[k]) == 0 && i + 1 < n && options[i + 1])
        value = options[++i];
      else
        continue;
      if (!(p->arch = parse_arch(value, &p->virtual))) {
        if (!log_append(p, "nvrtc: error: invalid value for --gpu-architecture (-arch)\n"))
          return NVRTC_ERROR_OUT_OF_MEMORY;
        return NVRTC_ERROR_INVALID_OPTION;
      }
      break;
    }
  }
  return NVRTC_SUCCESS;
}

/* The PTX of a successful compile: its header only, as the kernels are the
   runtime's own. The .version is what a driver checks. */
static bool make_ptx(nvrtcProgram p) {
  const char *fmt = "//\n"
                    "// Generated by the opc CPU runtime's NVRTC %d.%d\n"
                    "//\n"
                    "\n"
                    ".version %d.%d\n"
                    ".target sm_%d\n"
                    ".address_size 64\n";
  char text[256];
  snprintf(text, sizeof text, fmt, NVRTC_MAJOR, NVRTC_MINOR, PTX_ISA_MAJOR, PTX_ISA_MINOR,
           p->arch);
  free(p->ptx);
  return (p->ptx = strdup(text)) != NULL;
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char *const *options) {
  if (!prog)
    return NVRTC_ERROR_INVALID_PROGRAM;
  if (numOptions < 0)
    return NVRTC_ERROR_INVALID_INPUT;
  free(prog->ptx);
  prog->ptx = NULL;
  prog->log[0] = 0;
  nvrtcResult r = read_options(prog, numOptions, options);
  if (r != NVRTC_SUCCESS)
    return r;
  bool ok = true;
  const char *key = "OPC_KERNEL(";
  for (const char *s = strstr(prog->src, key); s; s = strstr(s + 1, key)) {
    /* Only uses at the start of a line define kernels; skip the #define. */
    const char *line = s;
    while (line > prog->src && (line[-1] == ' ' || line[-1] == '\t'))
      line--;
    if (line > prog->src && line[-1] != '\n')
      continue;
    const char *name = s + strlen(key);
    while (*name == ' ')
      name++;
    size_t len = 0;
    while (is_ident(name[len]))
      len++;
    if (len == 0 || kernel_find(name, len))
      continue;
    ok = false;
    if (!log_unknown_kernel(prog, name, len))
      return NVRTC_ERROR_OUT_OF_MEMORY;
  }
  if (!ok)
    return NVRTC_ERROR_COMPILATION;
  return make_ptx(prog) ? NVRTC_SUCCESS : NVRTC_ERROR_OUT_OF_MEMORY;
}

/* Before a successful compile, the PTX is empty, as NVRTC's is. */
nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *ptxSizeRet) {
  if (!prog)
    return NVRTC_ERROR_INVALID_PROGRAM;
  if (!ptxSizeRet)
    return NVRTC_ERROR_INVALID_INPUT;
  *ptxSizeRet = prog->ptx ? strlen(prog->ptx) + 1 : 1;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *ptx) {
  if (!prog)
    return NVRTC_ERROR_INVALID_PROGRAM;
  if (!ptx)
    return NVRTC_ERROR_INVALID_INPUT;
  const char *text = prog->ptx ? prog->ptx : "";
  memcpy(ptx, text, strlen(text) + 1);
  return NVRTC_SUCCESS;
}

/* A CUBIN exists only after compiling for a real architecture. */
static bool has_cubin(nvrtcProgram prog) {
  return prog->ptx && !prog->virtual;
}

nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *cubinSizeRet) {
  if (!prog)
    return NVRTC_ERROR_INVALID_PROGRAM;
  if (!cubinSizeRet)
    return NVRTC_ERROR_INVALID_INPUT;
  *cubinSizeRet = has_cubin(prog) ? CUBIN_SIZE : 0;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin) {
  if (!prog)
    return NVRTC_ERROR_INVALID_PROGRAM;
  if (!cubin)
    return NVRTC_ERROR_INVALID_INPUT;
  if (has_cubin(prog))
    cubin_write((unsigned char *)cubin, prog->arch);
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *logSizeRet) {
  if (!prog)
    return NVRTC_ERROR_INVALID_PROGRAM;
  if (!logSizeRet)
    return NVRTC_ERROR_INVALID_INPUT;
  *logSizeRet = strlen(prog->log) + 1;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log) {
  if (!prog)
    return NVRTC_ERROR_INVALID_PROGRAM;
  if (!log)
    return NVRTC_ERROR_INVALID_INPUT;
  memcpy(log, prog->log, strlen(prog->log) + 1);
  return NVRTC_SUCCESS;
}
