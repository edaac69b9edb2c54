/*
 * nvrtc.c - NVRTC without a compiler. The CPU runtime already holds every
 * kernel of opc_kernels.inc as C, so "compiling" only checks that each
 * kernel the source defines is one of them; that catches a program built
 * from a newer opc_kernels.inc than the runtime it links with.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktable.h"
#include "nvrtc.h"

struct _nvrtcProgram {
  char *src;
  char *log;
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
  *major = 13;
  *minor = 0;
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
  free(*prog);
  *prog = NULL;
  return NVRTC_SUCCESS;
}

/* Appends a line to the program's log. */
static bool log_line(nvrtcProgram p, const char *name, size_t len) {
  const char *fmt = "error: kernel '%.*s' is not built into the opc CPU runtime "
                    "(rebuild libopcrt with this opc_kernels.inc)\n";
  int n = snprintf(NULL, 0, fmt, (int)len, name);
  size_t old = strlen(p->log);
  char *log = realloc(p->log, old + n + 1);
  if (!log)
    return false;
  snprintf(log + old, n + 1, fmt, (int)len, name);
  p->log = log;
  return true;
}

static bool is_ident(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char *const *options) {
  (void)options;
  if (!prog)
    return NVRTC_ERROR_INVALID_PROGRAM;
  if (numOptions < 0)
    return NVRTC_ERROR_INVALID_INPUT;
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
    if (!log_line(prog, name, len))
      return NVRTC_ERROR_OUT_OF_MEMORY;
  }
  return ok ? NVRTC_SUCCESS : NVRTC_ERROR_COMPILATION;
}

/* The "PTX" is the source text itself. */
nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *ptxSizeRet) {
  if (!prog)
    return NVRTC_ERROR_INVALID_PROGRAM;
  if (!ptxSizeRet)
    return NVRTC_ERROR_INVALID_INPUT;
  *ptxSizeRet = strlen(prog->src) + 1;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *ptx) {
  if (!prog)
    return NVRTC_ERROR_INVALID_PROGRAM;
  if (!ptx)
    return NVRTC_ERROR_INVALID_INPUT;
  memcpy(ptx, prog->src, strlen(prog->src) + 1);
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
