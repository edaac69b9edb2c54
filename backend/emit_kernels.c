/*
 * emit_kernels.c - operators printed as launches of opc's own kernels.
 *
 * The kernels live in runtime/kernels/opc_kernels.inc; kernel_source.c
 * (generated from it) gives their text. A net.c that launches any of them
 * carries the source of just those, compiles it with NVRTC in create() and
 * loads it as a module. Each launch fills one struct opc_kargs: the
 * iteration space, pointers with the extents the CPU runtime's race checker
 * needs, element strides (0 broadcasts) and a few scalar parameters, all
 * known when opc runs, so every value is printed as a literal.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "kernel_source.h"

/* Threads per block of every launch, and the most blocks a launch uses:
   the kernels' loops are grid-stride, so bigger counts just loop. */
enum { BLOCK_THREADS = 256, MAX_BLOCKS = 65535 };

/* ------------------------------------------------------ kernel requests */

static const KernelBlock *find_block(const char *name) {
  for (int i = 0; i < kernel_nblocks; i++)
    if (kernel_blocks[i].kind == KB_KERNEL && strcmp(kernel_blocks[i].name, name) == 0)
      return &kernel_blocks[i];
  return NULL;
}

void kernel_request(Emitter *e, const char *name) {
  for (int i = 0; i < e->nkernels; i++)
    if (strcmp(e->kernels[i], name) == 0)
      return;
  if (!find_block(name)) {
    ir_error(e->g, e->node, "internal error: no kernel named '%s'", name);
    e->failed = true;
    return;
  }
  /* Arrays grow by copying into the arena: the arena frees them all at once. */
  const char **grown = arena_alloc(e->g->arena, sizeof(char *) * (size_t)(e->nkernels + 1));
  if (e->nkernels)
    memcpy(grown, e->kernels, sizeof(char *) * (size_t)e->nkernels);
  grown[e->nkernels++] = arena_strdup(e->g->arena, name);
  e->kernels = grown;
}

/* ------------------------------------------------------ the source text */

/* Prints `text` as C string literals, one per line, the last ending in `end`. */
static void emit_string_lines(Emitter *e, const char *text, const char *end) {
  const char *line = text;
  while (*line) {
    const char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    char *lit = arena_alloc(e->g->arena, len * 2 + 1);
    char *p = lit;
    for (size_t i = 0; i < len; i++) {
      char ch = line[i];
      if (ch == '\\' || ch == '"' || (ch == '?' && i + 1 < len && line[i + 1] == '?'))
        *p++ = '\\'; /* a backslash before '?' keeps "??" from forming trigraphs */
      *p++ = ch == '\t' ? ' ' : ch;
    }
    *p = 0;
    line += len + (nl ? 1 : 0);
    emit(e, "    \"%s\\n\"%s", lit, *line ? "" : end);
  }
}

/* Whether block k is needed by one of the used kernels. */
static bool block_used(Emitter *e, int k) {
  for (int u = 0; u < e->nkernels; u++) {
    const KernelBlock *b = find_block(e->kernels[u]);
    if (b == &kernel_blocks[k])
      return true;
    for (int d = 0; b && d < b->ndeps; d++)
      if (b->deps[d] == k)
        return true;
  }
  return false;
}

/*
 * The kernels are compiled to a CUBIN for the GPU's own sm_XY: the driver
 * loads it as it is, whatever its version. PTX would be JIT-compiled by the
 * driver, which refuses PTX newer than itself (an NVRTC newer than the
 * driver), so PTX is only the fallback for a GPU newer than NVRTC knows:
 * then the newest compute_XY below it. The line that creates the program
 * is a format: the prefix names the source.
 */
static const char *const load_lines[] = {
    "/* The architecture to compile opc's kernels for: the GPU's own sm_XY when",
    "   NVRTC can target it (a CUBIN, loaded without JIT compilation, so a driver",
    "   older than NVRTC loads it too), else the newest compute_XY below it (PTX,",
    "   JIT-compiled by the driver). 0, or -1 with a message in error. */",
    "static int pick_kernel_arch(char *arch, size_t arch_size, int *cubin, char *error, size_t size)",
    "{",
    "  int device, major, minor;",
    "  cudaError_t status = cudaGetDevice(&device);",
    "  if (status == cudaSuccess)",
    "    status = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);",
    "  if (status == cudaSuccess)",
    "    status = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);",
    "  if (status != cudaSuccess) {",
    "    snprintf(error, size, \"kernels: compute capability: %s\", cudaGetErrorString(status));",
    "    return -1;",
    "  }",
    "  int gpu = major * 10 + minor, best = 0, count = 0, *archs = NULL;",
    "  nvrtcResult result = nvrtcGetNumSupportedArchs(&count);",
    "  if (result == NVRTC_SUCCESS && !(archs = malloc(sizeof *archs * (size_t)(count + 1))))",
    "    result = NVRTC_ERROR_OUT_OF_MEMORY;",
    "  if (result == NVRTC_SUCCESS)",
    "    result = nvrtcGetSupportedArchs(archs);",
    "  for (int i = 0; result == NVRTC_SUCCESS && i < count; i++)",
    "    if (archs[i] <= gpu && archs[i] > best)",
    "      best = archs[i];",
    "  free(archs);",
    "  if (result != NVRTC_SUCCESS) {",
    "    snprintf(error, size, \"kernels: nvrtcGetSupportedArchs: %s\", nvrtcGetErrorString(result));",
    "    return -1;",
    "  }",
    "  if (best == 0) {",
    "    snprintf(error, size, \"kernels: NVRTC cannot compile for this GPU (sm_%d): \"",
    "             \"every architecture it supports is newer\", gpu);",
    "    return -1;",
    "  }",
    "  *cubin = best == gpu;",
    "  snprintf(arch, arch_size, \"%s_%d\", *cubin ? \"sm\" : \"compute\", best);",
    "  return 0;",
    "}",
    "",
    "/* The compiled program's CUBIN, or its PTX: 0 with *image to free, or -1. */",
    "static int kernel_image(nvrtcProgram program, int cubin, char **image, char *error, size_t size)",
    "{",
    "  const char *step = cubin ? \"nvrtcGetCUBIN\" : \"nvrtcGetPTX\";",
    "  size_t image_size = 0;",
    "  nvrtcResult result;",
    "  if (cubin)",
    "    result = nvrtcGetCUBINSize(program, &image_size);",
    "  else",
    "    result = nvrtcGetPTXSize(program, &image_size);",
    "  if (result == NVRTC_SUCCESS && image_size == 0) {",
    "    snprintf(error, size, \"%s: NVRTC made an empty image\", step);",
    "    return -1;",
    "  }",
    "  *image = NULL;",
    "  if (result == NVRTC_SUCCESS && !(*image = malloc(image_size)))",
    "    result = NVRTC_ERROR_OUT_OF_MEMORY;",
    "  if (result == NVRTC_SUCCESS)",
    "    result = cubin ? nvrtcGetCUBIN(program, *image) : nvrtcGetPTX(program, *image);",
    "  if (result != NVRTC_SUCCESS) {",
    "    snprintf(error, size, \"%s: %s\", step, nvrtcGetErrorString(result));",
    "    free(*image);",
    "    *image = NULL;",
    "    return -1;",
    "  }",
    "  return 0;",
    "}",
    "",
    "/* Compiles the kernels for the GPU in use and loads them: 0, or -1 with a",
    "   message in error. */",
    "static int load_kernels(CUmodule *module, char *error, size_t size)",
    "{",
    "  char arch[32], option[64];",
    "  int cubin;",
    "  if (pick_kernel_arch(arch, sizeof arch, &cubin, error, size) != 0)",
    "    return -1;",
    "  snprintf(option, sizeof option, \"--gpu-architecture=%s\", arch);",
    "  const char *options[] = {option};",
    "  nvrtcProgram program;",
    "  nvrtcResult result =",
    "      nvrtcCreateProgram(&program, %s_kernel_source, \"%s_kernels.cu\", 0, NULL, NULL);",
    "  if (result != NVRTC_SUCCESS) {",
    "    snprintf(error, size, \"nvrtcCreateProgram: %s\", nvrtcGetErrorString(result));",
    "    return -1;",
    "  }",
    "  result = nvrtcCompileProgram(program, 1, options);",
    "  if (result != NVRTC_SUCCESS) {",
    "    /* The compiler's log says what went wrong; keep as much as fits. */",
    "    size_t log_size = 0;",
    "    char *log = NULL;",
    "    if (nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS &&",
    "        (log = malloc(log_size + 1)))",
    "      if (nvrtcGetProgramLog(program, log) != NVRTC_SUCCESS)",
    "        log[0] = 0;",
    "    snprintf(error, size, \"nvrtcCompileProgram (%s): %s: %s\", arch,",
    "             nvrtcGetErrorString(result), log ? log : \"\");",
    "    free(log);",
    "    nvrtcDestroyProgram(&program);",
    "    return -1;",
    "  }",
    "  char *image = NULL;",
    "  int got = kernel_image(program, cubin, &image, error, size);",
    "  result = nvrtcDestroyProgram(&program);",
    "  if (got == 0 && result != NVRTC_SUCCESS) {",
    "    snprintf(error, size, \"nvrtcDestroyProgram: %s\", nvrtcGetErrorString(result));",
    "    got = -1;",
    "  }",
    "  if (got != 0) {",
    "    free(image);",
    "    return -1;",
    "  }",
    "  CUresult loaded = cuModuleLoadData(module, image);",
    "  free(image);",
    "  if (loaded != CUDA_SUCCESS) {",
    "    const char *message = NULL;",
    "    cuGetErrorString(loaded, &message);",
    "    snprintf(error, size, \"cuModuleLoadData (%s for %s%s): %s\", cubin ? \"CUBIN\" : \"PTX\", arch,",
    "             cubin ? \"\" : \", JIT-compiled by the driver as NVRTC cannot target this GPU\",",
    "             message ? message : \"unknown error\");",
    "    return -1;",
    "  }",
    "  return 0;",
    "}",
};

static void emit_load_function(Emitter *e) {
  for (size_t i = 0; i < sizeof load_lines / sizeof load_lines[0]; i++) {
    if (strstr(load_lines[i], "nvrtcCreateProgram(&program"))
      emit(e, load_lines[i], e->prefix, e->prefix);
    else
      emit(e, "%s", load_lines[i]);
  }
}

void emit_kernel_source(Emitter *e) {
  if (e->nkernels == 0)
    return;
  emit(e, "/*");
  emit(e, " * opc's own kernels, for what cuDNN and cuBLAS lack (runtime/kernels/opc_kernels.inc");
  emit(e, " * of opc %s). create() compiles them with NVRTC; each launch fills a", OPC_VERSION);
  emit(e, " * struct opc_kargs, whose fields the kernels' comments explain.");
  emit(e, " */");
  emit(e, "%s", kernel_kargs_h);
  emit_blank(e);
  emit(e, "static const char %s_kernel_source[] =", e->prefix);
  emit_string_lines(e, kernel_prelude_cuda, "");
  emit(e, "    \"\\n\"");
  emit_string_lines(e, kernel_kargs_h, "");
  for (int k = 0; k < kernel_nblocks; k++) {
    if (!block_used(e, k))
      continue;
    emit(e, "    \"\\n\"");
    emit_string_lines(e, kernel_blocks[k].text, "");
  }
  emit(e, "    \"\";");
  emit_blank(e);
  emit_load_function(e);
}

void emit_kernel_fields(Emitter *e) {
  if (e->nkernels == 0)
    return;
  emit_open(e, "struct {");
  emit(e, "CUmodule module;");
  for (int i = 0; i < e->nkernels; i++)
    emit(e, "CUfunction %s;", e->kernels[i]);
  emit_close(e, "} kernel; /* opc's own kernels, compiled in create() */");
}

void emit_kernel_setup(Emitter *e) {
  if (e->nkernels == 0)
    return;
  emit(e, "/* opc's own kernels: compiled for this GPU, then looked up by name. */");
  emit(e, "if (load_kernels(&c->kernel.module, c->error, sizeof c->error) != 0)");
  emit(e, "  %s;", emit_fail(e));
  for (int i = 0; i < e->nkernels; i++)
    emit_call(e, LIB_DRIVER, NULL,
              "cuModuleGetFunction(&c->kernel.%s, c->kernel.module, \"%s\")", e->kernels[i],
              e->kernels[i]);
}

void emit_kernel_teardown(Emitter *e) {
  if (e->nkernels == 0)
    return;
  emit(e, "if (c->kernel.module)");
  emit(e, "  cuModuleUnload(c->kernel.module);");
}

void emit_kernel_launch(Emitter *e, const Node *n, const char *name, const char *count) {
  kernel_request(e, name);
  char *end = NULL;
  long long literal = strtoll(count, &end, 10);
  const char *grid;
  if (end != count && *end == 0) {
    long long blocks = (literal + BLOCK_THREADS - 1) / BLOCK_THREADS;
    grid = emit_str(e, "%lld", blocks < 1 ? 1 : blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks);
  } else {
    grid = emit_str(e, "(unsigned int)((%s + %d) / %d < %d ? (%s + %d) / %d : %d)", count,
                    BLOCK_THREADS - 1, BLOCK_THREADS, MAX_BLOCKS, count, BLOCK_THREADS - 1,
                    BLOCK_THREADS, MAX_BLOCKS);
  }
  emit(e, "void *params[] = {&a};");
  emit_call(e, LIB_DRIVER, n, "cuLaunchKernel(c->kernel.%s, %s, 1, 1, %d, 1, 1, 0, %s, params, NULL)",
            name, grid, BLOCK_THREADS, node_stream(e, n));
}

/* --------------------------------------------------------------- launches */

/* A run of scalar parameters that means one thing, printed with a comment. */
typedef struct Group {
  int start, count;
  const char *label;
} Group;

/* One launch, as it will be printed. */
typedef struct Launch {
  const char *kernel;
  int nx; /* inputs x[0..nx) are printed */
  const char *x[4];
  int64_t x_extent[4];
  const char *y;
  int64_t y_extent;
  int64_t n;
  int rank;
  int64_t dims[8];
  int64_t xstride[4][8];
  int64_t ystride[8];
  float f[8];
  int64_t i[16];
  Group fgroup[8], igroup[16]; /* which of f and i are printed, and what they are */
  int nfgroups, nigroups;
  const char *note; /* printed above the arguments, when they need a word */
} Launch;

/* Marks f[start..start+count) or i[...] as one labelled group. */
static void group_f(Launch *L, int start, int count, const char *label) {
  L->fgroup[L->nfgroups++] = (Group){start, count, label};
}

static void group_i(Launch *L, int start, int count, const char *label) {
  if (count <= 0)
    return; /* a row of no dims (a reduction over no axes) has nothing to list */
  L->igroup[L->nigroups++] = (Group){start, count, label};
}

static const char *list_ints(Emitter *e, int count, const int64_t *v) {
  char *s = emit_str(e, "%s", "");
  for (int i = 0; i < count; i++)
    s = emit_str(e, "%s%s%lld", s, i ? ", " : "", (long long)v[i]);
  return s;
}

/* ".i = {...}," with a comment per group; [k] = where a group skips ahead. */
static void emit_groups(Emitter *e, const Launch *L, const char *field, const Group *groups,
                        int count) {
  if (count == 0)
    return;
  /* In index order, whatever order they were added in. */
  Group *sorted = arena_dup(e->g->arena, groups, sizeof(Group) * (size_t)count);
  for (int k = 1; k < count; k++)
    for (int j = k; j > 0 && sorted[j - 1].start > sorted[j].start; j--) {
      Group t = sorted[j];
      sorted[j] = sorted[j - 1];
      sorted[j - 1] = t;
    }
  const Group *g = sorted;
  const char **text = arena_alloc(e->g->arena, sizeof(char *) * (size_t)count);
  int next = 0;
  for (int k = 0; k < count; k++) {
    const char *s = g[k].start != next ? emit_str(e, "[%d] = ", g[k].start) : "";
    for (int j = g[k].start; j < g[k].start + g[k].count; j++) {
      const char *v = field[0] == 'f' ? emit_float(e, L->f[j]) : emit_str(e, "%lld", (long long)L->i[j]);
      s = emit_str(e, "%s%s%s", s, j > g[k].start ? ", " : "", v);
    }
    text[k] = s;
    next = g[k].start + g[k].count;
  }
  if (count == 1) {
    emit(e, ".%s = {%s}, /* %s */", field, text[0], g[0].label);
    return;
  }
  int width = 0;
  for (int k = 0; k < count; k++)
    if ((int)strlen(text[k]) + 1 > width)
      width = (int)strlen(text[k]) + 1;
  emit_open(e, ".%s = {", field);
  for (int k = 0; k < count; k++)
    emit(e, "%-*s /* %s */", width, emit_str(e, "%s,", text[k]), g[k].label);
  emit_close(e, "},");
}

static void emit_launch(Emitter *e, const Node *n, const Launch *L) {
  if (L->n == 0) {
    emit(e, "/* %s: the output is empty, nothing to launch */", L->kernel);
    return;
  }
  emit_open(e, "{");
  if (L->note)
    emit(e, "/* %s */", L->note);
  emit_open(e, "struct opc_kargs a = {");
  if (L->nx > 0) {
    const char *xs = "", *ext = "", *strides = "";
    for (int k = 0; k < L->nx; k++) {
      const char *sep = k ? ", " : "";
      xs = emit_str(e, "%s%s%s", xs, sep, L->x[k] ? L->x[k] : "NULL");
      ext = emit_str(e, "%s%s%lld", ext, sep, (long long)L->x_extent[k]);
      strides = emit_str(e, "%s%s{%s}", strides, sep, list_ints(e, L->rank, L->xstride[k]));
    }
    emit(e, ".x = {%s}, .x_extent = {%s},", xs, ext);
    emit(e, ".y = %s, .y_extent = %lld,", L->y, (long long)L->y_extent);
    emit(e, ".n = %lld, .rank = %d, .dims = {%s},", (long long)L->n, L->rank,
         list_ints(e, L->rank, L->dims));
    emit(e, ".xstride = {%s},", strides);
  } else {
    emit(e, ".y = %s, .y_extent = %lld,", L->y, (long long)L->y_extent);
    emit(e, ".n = %lld, .rank = %d, .dims = {%s},", (long long)L->n, L->rank,
         list_ints(e, L->rank, L->dims));
  }
  emit(e, ".ystride = {%s},", list_ints(e, L->rank, L->ystride));
  emit_groups(e, L, "f", L->fgroup, L->nfgroups);
  emit_groups(e, L, "i", L->igroup, L->nigroups);
  emit_close(e, "};");
  emit_kernel_launch(e, n, L->kernel, emit_str(e, "%lld", (long long)L->n));
  emit_close(e, "}");
}

/* Elements reachable from the lowest address a view touches, which is
   *low elements from its first element (*low <= 0). */
static int64_t reach(int rank, const int64_t *dims, const int64_t *strides, int64_t *low) {
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < rank; d++) {
    if (dims[d] == 0) {
      *low = 0;
      return 0;
    }
    int64_t span = (dims[d] - 1) * strides[d];
    if (span < 0)
      lo += span;
    else
      hi += span;
  }
  *low = lo;
  return hi - lo + 1;
}

static int64_t numel(int rank, const int64_t *dims) {
  int64_t count = 1;
  for (int d = 0; d < rank; d++)
    count *= dims[d];
  return count;
}

/* A tensor's element strides: its own when it is a view, else contiguous. */
static void strides_of(const Tensor *t, int64_t *s) {
  bool set = false;
  for (int d = 0; d < t->rank; d++)
    set = set || t->strides[d] != 0;
  int64_t step = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    s[d] = set || tensor_numel(t) <= 1 ? t->strides[d] : step;
    step *= t->dims[d];
  }
}

/* Strides that read `t` as if broadcast (numpy, aligned right) to dims. */
static void broadcast_to(const Tensor *t, int rank, const int64_t *dims, int64_t *s) {
  int64_t own[IR_MAX_RANK];
  strides_of(t, own);
  for (int d = 0; d < rank; d++) {
    int j = d - (rank - t->rank);
    s[d] = j < 0 || (t->dims[j] == 1 && dims[d] != 1) ? 0 : own[j];
  }
}

/* Sets the output of a launch: y over L->dims with the given strides. */
static void set_output(Launch *L, const char *y, const int64_t *ystride) {
  int64_t low;
  L->y = y;
  memcpy(L->ystride, ystride, sizeof(int64_t) * (size_t)L->rank);
  L->y_extent = reach(L->rank, L->dims, L->ystride, &low);
  L->n = numel(L->rank, L->dims);
}

/* Adds input x[k] read with the given strides over L->dims. */
static void set_input(Launch *L, int k, const char *x, const int64_t *xstride) {
  int64_t low;
  L->x[k] = x;
  memcpy(L->xstride[k], xstride, sizeof(int64_t) * (size_t)L->rank);
  L->x_extent[k] = reach(L->rank, L->dims, L->xstride[k], &low);
  if (k + 1 > L->nx)
    L->nx = k + 1;
}

/* Drops dims of size 1 and merges neighbours contiguous in every operand:
   for kernels that only care about elements, not coordinates. */
static void collapse(Launch *L) {
  int r = 0;
  for (int d = 0; d < L->rank; d++) {
    if (L->dims[d] == 1)
      continue;
    bool merge = r > 0 && L->ystride[r - 1] == L->ystride[d] * L->dims[d];
    for (int k = 0; k < L->nx; k++)
      merge = merge && L->xstride[k][r - 1] == L->xstride[k][d] * L->dims[d];
    if (merge) {
      L->dims[r - 1] *= L->dims[d];
      L->ystride[r - 1] = L->ystride[d];
      for (int k = 0; k < L->nx; k++)
        L->xstride[k][r - 1] = L->xstride[k][d];
      continue;
    }
    L->dims[r] = L->dims[d];
    L->ystride[r] = L->ystride[d];
    for (int k = 0; k < L->nx; k++)
      L->xstride[k][r] = L->xstride[k][d];
    r++;
  }
  if (r == 0) {
    L->dims[0] = 1;
    L->ystride[0] = 1;
    for (int k = 0; k < L->nx; k++)
      L->xstride[k][0] = 0;
    r = 1;
  }
  L->rank = r;
}

static bool fail(Emitter *e, const Node *n, const char *msg) {
  ir_error(e->g, n, "%s", msg);
  e->failed = true;
  return false;
}

/* Whether the tensor is produced for someone: graph output or used. */
static bool tensor_needed(const Tensor *t) { return t && (t->is_output || t->nusers > 0); }

/* ------------------------------------------------- elementwise operators */

/* An elementwise launch over the node's output with inputs broadcast. */
static Launch elementwise(Emitter *e, const Node *n, const char *kernel, Tensor *const *inputs,
                          int count) {
  Launch L = {.kernel = kernel};
  const Tensor *y = n->out[0];
  L.rank = y->rank;
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  int64_t s[IR_MAX_RANK];
  strides_of(y, s);
  set_output(&L, buf(e, y), s);
  for (int k = 0; k < count; k++) {
    broadcast_to(inputs[k], L.rank, L.dims, s);
    set_input(&L, k, buf(e, inputs[k]), s);
  }
  return L;
}

/* In-place activation of a Conv or Gemm output that cuDNN cannot fuse. */
static void activation_launch(Emitter *e, const Node *n, Activation act, float alpha,
                              float beta, const Tensor *y) {
  static const char *const kernel[] = {
      [ACT_RELU] = "opc_relu", [ACT_CLIP] = "opc_clip", [ACT_SIGMOID] = "opc_sigmoid",
      [ACT_TANH] = "opc_tanh", [ACT_LEAKY_RELU] = "opc_leaky_relu",
  };
  if (act == ACT_NONE)
    return;
  Launch L = {.kernel = kernel[act]};
  L.rank = y->rank;
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  int64_t s[IR_MAX_RANK];
  strides_of(y, s);
  set_output(&L, buf(e, y), s);
  set_input(&L, 0, buf(e, y), s);
  collapse(&L);
  L.note = "the fused activation, in place";
  if (act == ACT_CLIP) {
    L.f[0] = alpha;
    L.f[1] = beta;
    group_f(&L, 0, 2, "min, max");
  } else if (act == ACT_LEAKY_RELU) {
    L.f[0] = alpha;
    group_f(&L, 0, 1, "alpha");
  }
  emit_launch(e, n, &L);
}

void emit_kernel_activation(Emitter *e, const Node *n, const Tensor *y) {
  activation_launch(e, n, n->act, n->act_alpha, n->act_beta, y);
}

/* The activation a node of ours carries, if a pass fused one into it. */
static void fused_activation(Emitter *e, const Node *n) {
  if (n->act != ACT_NONE)
    activation_launch(e, n, n->act, n->act_alpha, n->act_beta, n->out[0]);
}

typedef struct UnaryKernel {
  OpKind op;
  const char *kernel;
  int nf;
  const char *attr[2]; /* names of the float attributes into f[] */
} UnaryKernel;

/* An activation's float parameter by its attribute's name, as resolved by
   shape inference. */
static float act_param(const Node *n, const char *name) {
  if (strcmp(name, "beta") == 0)
    return n->p.act.beta;
  if (strcmp(name, "gamma") == 0)
    return n->p.act.gamma;
  if (strcmp(name, "lambd") == 0)
    return n->p.act.lambd;
  if (strcmp(name, "bias") == 0)
    return n->p.act.bias;
  return n->p.act.alpha;
}

static const UnaryKernel unary_kernels[] = {
    {OP_RELU, "opc_relu", 0, {0}},
    {OP_LEAKY_RELU, "opc_leaky_relu", 1, {"alpha"}},
    {OP_ELU, "opc_elu", 1, {"alpha"}},
    {OP_SELU, "opc_selu", 2, {"alpha", "gamma"}},
    {OP_CELU, "opc_celu", 1, {"alpha"}},
    {OP_SIGMOID, "opc_sigmoid", 0, {0}},
    {OP_TANH, "opc_tanh", 0, {0}},
    {OP_HARD_SIGMOID, "opc_hard_sigmoid", 2, {"alpha", "beta"}},
    {OP_HARD_SWISH, "opc_hard_swish", 0, {0}},
    {OP_SOFTPLUS, "opc_softplus", 0, {0}},
    {OP_SOFTSIGN, "opc_softsign", 0, {0}},
    {OP_CLIP, "opc_clip", 0, {0}}, /* bounds read by clip_bounds() */
    {OP_ERF, "opc_erf", 0, {0}},
    {OP_EXP, "opc_exp", 0, {0}},
    {OP_LOG, "opc_log", 0, {0}},
    {OP_SQRT, "opc_sqrt", 0, {0}},
    {OP_ABS, "opc_abs", 0, {0}},
    {OP_NEG, "opc_neg", 0, {0}},
    {OP_RECIPROCAL, "opc_reciprocal", 0, {0}},
    {OP_FLOOR, "opc_floor", 0, {0}},
    {OP_CEIL, "opc_ceil", 0, {0}},
    {OP_ROUND, "opc_round", 0, {0}},
    {OP_SIGN, "opc_sign", 0, {0}},
    {OP_SIN, "opc_sin", 0, {0}},
    {OP_COS, "opc_cos", 0, {0}},
    {OP_TAN, "opc_tan", 0, {0}},
    {OP_ASIN, "opc_asin", 0, {0}},
    {OP_ACOS, "opc_acos", 0, {0}},
    {OP_ATAN, "opc_atan", 0, {0}},
    {OP_SINH, "opc_sinh", 0, {0}},
    {OP_COSH, "opc_cosh", 0, {0}},
    {OP_ASINH, "opc_asinh", 0, {0}},
    {OP_ACOSH, "opc_acosh", 0, {0}},
    {OP_ATANH, "opc_atanh", 0, {0}},
    /* more operators */
    {OP_THRESHOLDED_RELU, "opc_thresholded_relu", 1, {"alpha"}},
    {OP_SHRINK, "opc_shrink", 2, {"lambd", "bias"}},
    {OP_MISH, "opc_mish", 0, {0}},
};

static const UnaryKernel *unary_kernel(OpKind op) {
  for (size_t i = 0; i < sizeof unary_kernels / sizeof unary_kernels[0]; i++)
    if (unary_kernels[i].op == op)
      return &unary_kernels[i];
  return NULL;
}

/* Clip's bounds: attributes before opset 11, optional inputs after, printed
   as literals when constant and else read by the kernel from x[1] and x[2];
   absent ones are the float range, as the spec says. */
static bool clip_bounds(Emitter *e, const Node *n, Launch *L) {
  L->f[0] = n->p.clip.has_min ? n->p.clip.min : -FLT_MAX;
  L->f[1] = n->p.clip.has_max ? n->p.clip.max : FLT_MAX;
  group_f(L, 0, 2, "min, max");
  for (int i = 1; i <= 2; i++) {
    Tensor *b = node_input(n, i);
    if (!b)
      continue;
    if (tensor_numel(b) != 1)
      return fail(e, n, "Clip's bounds must be scalars");
    if (b->f32) {
      L->f[i - 1] = b->f32[0];
      continue;
    }
    int64_t none[IR_MAX_RANK] = {0};
    set_input(L, i, buf(e, b), none);
    L->x_extent[i] = 1;
    L->note = "x = {input, min, max}: a bound computed at run time replaces f's";
  }
  return true;
}

static void run_unary(Emitter *e, Node *n) {
  const UnaryKernel *u = unary_kernel(n->op);
  Launch L = elementwise(e, n, u->kernel, n->in, 1);
  collapse(&L);
  for (int k = 0; k < u->nf; k++)
    L.f[k] = act_param(n, u->attr[k]);
  if (u->nf == 1)
    group_f(&L, 0, 1, u->attr[0]);
  else if (u->nf == 2)
    group_f(&L, 0, 2, emit_str(e, "%s, %s", u->attr[0], u->attr[1]));
  if (n->op == OP_CLIP && !clip_bounds(e, n, &L))
    return;
  emit_launch(e, n, &L);
  fused_activation(e, n);
}

static const char *binary_kernel(OpKind op) {
  switch (op) {
  case OP_ADD: return "opc_add";
  case OP_SUB: return "opc_sub";
  case OP_MUL: return "opc_mul";
  case OP_DIV: return "opc_div";
  case OP_POW: return "opc_pow";
  case OP_PRELU: return "opc_prelu";
  default: return NULL;
  }
}

static void run_binary(Emitter *e, Node *n) {
  Launch L = elementwise(e, n, binary_kernel(n->op), n->in, 2);
  collapse(&L);
  emit_launch(e, n, &L);
  fused_activation(e, n);
}

/* Sum, Mean, Max, Min: up to four inputs per launch; further launches take
   the partial result back as their first input. */
static void run_variadic(Emitter *e, Node *n) {
  const char *kernel = n->op == OP_MAX ? "opc_max" : n->op == OP_MIN ? "opc_min" : "opc_sum";
  int done = 0;
  while (done < n->nin) {
    Tensor *inputs[4];
    int count = 0;
    if (done > 0)
      inputs[count++] = n->out[0];
    while (count < 4 && done < n->nin)
      inputs[count++] = n->in[done++];
    Launch L = elementwise(e, n, kernel, inputs, count);
    collapse(&L);
    L.i[0] = count;
    group_i(&L, 0, 1, "inputs");
    if (strcmp(kernel, "opc_sum") == 0) {
      L.f[0] = n->op == OP_MEAN && done == n->nin ? 1.0f / (float)n->nin : 1.0f;
      group_f(&L, 0, 1, n->op == OP_MEAN && done == n->nin ? "1 / inputs: the mean" : "factor");
    }
    emit_launch(e, n, &L);
  }
  fused_activation(e, n);
}

/* ------------------------------------------------------ data movement */

/* y = x between two strided layouts over dims; x's strides may be negative. */
static void copy_launch(Emitter *e, const Node *n, const char *y, const int64_t *ystride,
                        const char *x, const int64_t *xstride, int rank, const int64_t *dims) {
  Launch L = {.kernel = "opc_copy", .rank = rank};
  memcpy(L.dims, dims, sizeof(int64_t) * (size_t)rank);
  set_output(&L, y, ystride);
  set_input(&L, 0, x, xstride);
  collapse(&L);
  int64_t low;
  L.x_extent[0] = reach(L.rank, L.dims, L.xstride[0], &low);
  /* x[0] points at the lowest element read; i[0] leads back to the first. */
  if (low != 0)
    L.x[0] = emit_str(e, "%s - %lld", x, (long long)-low);
  L.i[0] = -low;
  group_i(&L, 0, 1, "offset of the first element from x[0]");
  emit_launch(e, n, &L);
}

void emit_kernel_copy(Emitter *e, const Node *n, const char *dst, const int64_t *dst_strides,
                      const char *src, const int64_t *src_strides, int rank,
                      const int64_t *dims) {
  copy_launch(e, n, dst, dst_strides, src, src_strides, rank, dims);
}

static const char *offset_ptr(Emitter *e, const char *base, int64_t offset) {
  return offset ? emit_str(e, "%s + %lld", base, (long long)offset) : base;
}

/* Whether `part` already lies where a copy would put it: same storage,
   offset and strides (a pass made it a view of its destination). */
static bool already_there(Tensor *part, Tensor *whole, int64_t offset, const int64_t *strides) {
  if (!part->alias_of || tensor_storage(part) != tensor_storage(whole))
    return false;
  int64_t whole_offset = whole->alias_of ? whole->alias_offset : 0;
  if (part->alias_offset != whole_offset + offset)
    return false;
  for (int d = 0; d < part->rank; d++)
    if (part->dims[d] > 1 && part->strides[d] != strides[d])
      return false;
  return true;
}

/* Identity, Dropout, Cast, Flatten, Reshape, Squeeze, Unsqueeze: the same
   elements in row-major order, when the node is not a view. */
static void run_reshape_copy(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  if (n->op == OP_DROPOUT && n->nout > 1 && tensor_needed(n->out[1])) {
    fail(e, n, "Dropout's mask output is not supported");
    return;
  }
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], contiguous[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  /* Walk the shape of whichever side is strided; the other is contiguous. */
  bool y_plain = true;
  int64_t step = 1;
  for (int d = y->rank - 1; d >= 0; d--) {
    y_plain = y_plain && (y->dims[d] == 1 || ys[d] == step);
    step *= y->dims[d];
  }
  const Tensor *walk = y_plain ? x : y;
  step = 1;
  for (int d = walk->rank - 1; d >= 0; d--) {
    contiguous[d] = step;
    step *= walk->dims[d];
  }
  if (y_plain) {
    copy_launch(e, n, buf(e, y), contiguous, buf(e, x), xs, x->rank, x->dims);
  } else {
    bool x_plain = true;
    step = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
      x_plain = x_plain && (x->dims[d] == 1 || xs[d] == step);
      step *= x->dims[d];
    }
    if (!x_plain) {
      fail(e, n, "a reshaping copy between two strided views is not supported");
      return;
    }
    copy_launch(e, n, buf(e, y), ys, buf(e, x), contiguous, y->rank, y->dims);
  }
}

static void run_transpose(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  const int *perm = n->p.transpose.perm;
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], src[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  for (int d = 0; d < y->rank; d++)
    src[d] = xs[perm[d]];
  copy_launch(e, n, buf(e, y), ys, buf(e, x), src, y->rank, y->dims);
}

/* Copies one piece of a Concat (into_whole) or a Split (out of the whole):
   `piece` lies at element `offset` of `whole`, whose strides are ws.
   Nothing is emitted when a pass already placed the piece there. */
static void copy_piece(Emitter *e, Node *n, Tensor *piece, Tensor *whole, int64_t offset,
                       const int64_t *ws, bool into_whole) {
  if (already_there(piece, whole, offset, ws))
    return;
  int64_t ps[IR_MAX_RANK];
  strides_of(piece, ps);
  if (into_whole)
    copy_launch(e, n, offset_ptr(e, buf(e, whole), offset), ws, buf(e, piece), ps, piece->rank,
                piece->dims);
  else
    copy_launch(e, n, buf(e, piece), ps, offset_ptr(e, buf(e, whole), offset), ws, piece->rank,
                piece->dims);
}

static void run_concat(Emitter *e, Node *n) {
  Tensor *y = n->out[0];
  int axis = n->p.axis.axis;
  int64_t ys[IR_MAX_RANK];
  strides_of(y, ys);
  int64_t at = 0;
  for (int k = 0; k < n->nin; k++) {
    Tensor *x = n->in[k];
    copy_piece(e, n, x, y, at * ys[axis], ys, true);
    at += x->dims[axis];
  }
}

static void run_split(Emitter *e, Node *n) {
  Tensor *x = n->in[0];
  int axis = n->p.split.axis;
  const int64_t *sizes = n->p.split.sizes;
  int64_t xs[IR_MAX_RANK];
  strides_of(x, xs);
  int64_t at = 0;
  for (int k = 0; k < n->nout; k++) {
    Tensor *y = n->out[k];
    if (y && tensor_needed(y))
      copy_piece(e, n, y, x, at * xs[axis], xs, false);
    at += sizes[k];
  }
}

static void run_slice(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  const int64_t *start = n->p.slice.start, *step = n->p.slice.step;
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], src[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  int64_t first = 0;
  for (int d = 0; d < x->rank; d++) {
    first += start[d] * xs[d];
    src[d] = xs[d] * step[d];
  }
  copy_launch(e, n, buf(e, y), ys, offset_ptr(e, buf(e, x), first), src, y->rank, y->dims);
}

static void run_expand(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  int64_t ys[IR_MAX_RANK], src[IR_MAX_RANK];
  strides_of(y, ys);
  broadcast_to(x, y->rank, y->dims, src);
  copy_launch(e, n, buf(e, y), ys, buf(e, x), src, y->rank, y->dims);
}

/* Tile: each dim d becomes (repeats, size) with the input's stride 0 along
   the repeats, so the copy has up to twice the rank before merging. */
static void run_tile(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0], *reps = n->in[1];
  if (!reps->i64) {
    fail(e, n, "Tile's repeats must be constant");
    return;
  }
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  int64_t dims[2 * IR_MAX_RANK], src[2 * IR_MAX_RANK], dst[2 * IR_MAX_RANK];
  int rank = 0;
  for (int d = 0; d < x->rank; d++) {
    if (reps->i64[d] != 1) {
      dims[rank] = reps->i64[d];
      src[rank] = 0;
      dst[rank++] = x->dims[d] * ys[d];
    }
    if (x->dims[d] != 1) {
      dims[rank] = x->dims[d];
      src[rank] = xs[d];
      dst[rank++] = ys[d];
    }
  }
  /* Merge what can be merged before checking the kernel's rank limit. */
  int r = 0;
  for (int d = 0; d < rank; d++) {
    if (r > 0 && dst[r - 1] == dst[d] * dims[d] && src[r - 1] == src[d] * dims[d]) {
      dims[r - 1] *= dims[d];
      dst[r - 1] = dst[d];
      src[r - 1] = src[d];
    } else {
      dims[r] = dims[d];
      dst[r] = dst[d];
      src[r++] = src[d];
    }
  }
  if (r > 8) {
    fail(e, n, "this Tile needs more than 8 dims of copying");
    return;
  }
  if (r == 0) {
    dims[0] = 1;
    dst[0] = src[0] = 1;
    r = 1;
  }
  copy_launch(e, n, buf(e, y), dst, buf(e, x), src, r, dims);
}

/* DepthToSpace and SpaceToDepth are 6-d transposes. */
static void run_depth_space(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  int64_t b = n->p.depth_space.blocksize;
  bool crd = n->p.depth_space.crd;
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  int64_t dims[6], src[6], dst[6];
  if (n->op == OP_DEPTH_TO_SPACE) {
    /* Output (N, C', H, b1, W, b2); the input channel is b1*b*C' + b2*C' + c'
       (DCR) or c'*b*b + b1*b + b2 (CRD). */
    int64_t c = y->dims[1];
    int64_t d6[6] = {y->dims[0], c, x->dims[2], b, x->dims[3], b};
    int64_t y6[6] = {ys[0], ys[1], b * ys[2], ys[2], b * ys[3], ys[3]};
    int64_t x6[6] = {xs[0], crd ? b * b * xs[1] : xs[1], xs[2],
                     crd ? b * xs[1] : b * c * xs[1], xs[3], crd ? xs[1] : c * xs[1]};
    memcpy(dims, d6, sizeof dims);
    memcpy(dst, y6, sizeof dst);
    memcpy(src, x6, sizeof src);
  } else {
    /* Output channel (b1*b + b2)*C + c reads input (c, h*b + b1, w*b + b2). */
    int64_t c = x->dims[1];
    int64_t d6[6] = {x->dims[0], b, b, c, y->dims[2], y->dims[3]};
    int64_t y6[6] = {ys[0], b * c * ys[1], c * ys[1], ys[1], ys[2], ys[3]};
    int64_t x6[6] = {xs[0], xs[2], xs[3], xs[1], b * xs[2], b * xs[3]};
    memcpy(dims, d6, sizeof dims);
    memcpy(dst, y6, sizeof dst);
    memcpy(src, x6, sizeof src);
  }
  copy_launch(e, n, buf(e, y), dst, buf(e, x), src, 6, dims);
}

/* Gather: dims are the input's with the axis replaced by the number of
   indices; the output's index dims must merge into one. */
static void run_gather(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *idx = n->in[1], *y = n->out[0];
  int axis = n->p.axis.axis;
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  Launch L = {.kernel = "opc_gather", .rank = x->rank};
  memcpy(L.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  int64_t count = tensor_numel(idx);
  L.dims[axis] = count;
  int64_t out[IR_MAX_RANK];
  for (int d = 0; d < axis; d++)
    out[d] = ys[d];
  for (int d = axis + 1; d < x->rank; d++)
    out[d] = ys[d - 1 + idx->rank];
  /* The index dims of the output, merged: stride of the innermost. */
  out[axis] = idx->rank > 0 ? ys[axis + idx->rank - 1] : 0;
  for (int j = idx->rank - 1; j > 0; j--)
    if (y->dims[axis + j - 1] > 1 && ys[axis + j - 1] != ys[axis + j] * y->dims[axis + j]) {
      fail(e, n, "Gather into a strided view of this shape is not supported");
      return;
    }
  set_output(&L, buf(e, y), out);
  set_input(&L, 0, buf(e, x), xs);
  L.x_extent[0] = tensor_numel(x) ? 1 + (x->dims[axis] - 1) * xs[axis] : 0;
  for (int d = 0; d < x->rank; d++)
    if (d != axis)
      L.x_extent[0] += (x->dims[d] - 1) * xs[d];
  int64_t unit[IR_MAX_RANK] = {0};
  set_input(&L, 1, buf(e, idx), unit);
  L.x_extent[1] = count;
  L.i[0] = axis;
  L.i[1] = x->dims[axis];
  group_i(&L, 0, 2, "axis, its size");
  L.note = "x = {input, indices as floats}";
  emit_launch(e, n, &L);
}

/* Pad: pads and the constant from inputs (opset 11+) or attributes. */
static void run_pad(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  const int64_t *pads = n->p.pad.pads;
  int count = n->p.pad.npads;
  float value = n->p.pad.value;
  Tensor *vt = node_input(n, 2);
  if (vt) {
    if (!vt->f32 || tensor_numel(vt) != 1) {
      fail(e, n, arena_printf(e->g->arena, "input '%s' is not a compile-time constant "
                              "(Pad's constant_value must be a constant scalar)", vt->name));
      return;
    }
    value = vt->f32[0];
  }
  const int *axes = n->p.pad.axes;
  int naxes = n->p.pad.naxes;
  if (count != 2 * naxes) {
    fail(e, n, "Pad's pads do not match the input's rank");
    return;
  }
  static const char *const kernels[] = {
      [PAD_CONSTANT] = "opc_pad_constant", [PAD_REFLECT] = "opc_pad_reflect",
      [PAD_EDGE] = "opc_pad_edge",         [PAD_WRAP] = "opc_pad_wrap"};
  Launch L = {.rank = x->rank};
  L.kernel = kernels[n->p.pad.mode];
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), xs);
  L.x_extent[0] = tensor_numel(x) ? reach(x->rank, x->dims, xs, &(int64_t){0}) : 0;
  for (int k = 0; k < naxes; k++)
    L.i[axes[k]] = pads[k];
  for (int d = 0; d < x->rank; d++)
    L.i[8 + d] = x->dims[d];
  group_i(&L, 0, x->rank, "padding before each dim");
  group_i(&L, 8, x->rank, "the input's dims");
  if (strcmp(L.kernel, "opc_pad_constant") == 0) {
    L.f[0] = value;
    group_f(&L, 0, 1, "value");
  } else {
    if (tensor_numel(x) == 0) {
      fail(e, n, "Pad cannot reflect, repeat or wrap an empty input");
      return;
    }
  }
  emit_launch(e, n, &L);
}

void emit_kernel_pad(Emitter *e, const Node *n, const char *dst, const char *src, int rank,
                     const int64_t *src_dims, const int64_t *src_strides,
                     const int64_t *pad_begin, const int64_t *pad_end, float value) {
  Launch L = {.kernel = "opc_pad_constant", .rank = rank};
  int64_t ys[IR_MAX_RANK], step = 1;
  for (int d = rank - 1; d >= 0; d--) {
    L.dims[d] = src_dims[d] + pad_begin[d] + pad_end[d];
    ys[d] = step;
    step *= L.dims[d];
  }
  set_output(&L, dst, ys);
  set_input(&L, 0, src, src_strides);
  L.x_extent[0] = reach(rank, src_dims, src_strides, &(int64_t){0});
  for (int d = 0; d < rank; d++) {
    L.i[d] = pad_begin[d];
    L.i[8 + d] = src_dims[d];
  }
  group_i(&L, 0, rank, "padding before each dim");
  group_i(&L, 8, rank, "the input's dims");
  L.f[0] = value;
  group_f(&L, 0, 1, "value");
  emit_launch(e, n, &L);
}

/* --------------------------------------------------------------- resize */

typedef struct Ratio {
  int64_t num, den;
} Ratio;

static int64_t gcd(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* A positive float32 as an exact ratio of integers: mantissa over a power
   of two. False when it does not fit (absurdly small or large scales). */
static bool float_ratio(float v, Ratio *r) {
  int exp;
  float m = frexpf(v, &exp); /* v = m * 2^exp, m in [0.5, 1) */
  int64_t mant = (int64_t)ldexpf(m, 24);
  exp -= 24;
  if (exp >= 0) {
    if (exp > 30)
      return false;
    r->num = mant << exp;
    r->den = 1;
  } else {
    if (exp < -60)
      return false;
    r->num = mant;
    r->den = (int64_t)1 << -exp;
  }
  int64_t g = gcd(r->num, r->den);
  r->num /= g;
  r->den /= g;
  return true;
}

static const char *const coordinate_modes[] = {
    "half_pixel",           "pytorch_half_pixel", "align_corners",        "asymmetric",
    "tf_half_pixel_for_nn", "tf_crop_and_resize", "half_pixel_symmetric",
};


/* Resize and Upsample: per axis an exact scale, then the axes that do not
   map identically go to the kernel (at most 3). */
static void run_resize(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  int rank = x->rank;
  Ratio scale[IR_MAX_RANK];
  float roi[2 * IR_MAX_RANK];
  for (int d = 0; d < rank; d++) {
    scale[d] = (Ratio){1, 1};
    roi[d] = 0.0f;
    roi[rank + d] = 1.0f;
  }
  int mode = n->p.resize.mode;
  int coord, interp;
  bool exclude = false;
  float cubic_a = -0.75f, extrapolation = 0.0f;
  if (n->op == OP_UPSAMPLE || (e->g->opset > 0 && e->g->opset < 11)) {
    /* Upsample and Resize-10: asymmetric coordinates, nearest rounds down. */
    coord = 3;
    interp = mode == RESIZE_NEAREST ? 2 : 4;
    if (mode != RESIZE_NEAREST && mode != RESIZE_LINEAR && mode != RESIZE_BILINEAR) {
      fail(e, n, "unsupported mode");
      return;
    }
    Tensor *st = node_input(n, 1);
    const float *s = NULL;
    int count = 0;
    if (st) {
      s = st->f32;
      count = s ? (int)tensor_numel(st) : 0;
    } else if (n->p.resize.scales) {
      s = n->p.resize.scales;
      count = n->p.resize.nscales;
    }
    if (!s || count != rank) {
      fail(e, n, "the scales must be constant, one per dim");
      return;
    }
    for (int d = 0; d < rank; d++)
      if (!float_ratio(s[d], &scale[d])) {
        fail(e, n, "a scale is out of range");
        return;
      }
  } else {
    if (n->p.resize.antialias) {
      fail(e, n, "Resize with antialias is not supported");
      return;
    }
    coord = n->p.resize.coord;
    int nm = n->p.resize.nearest;
    if (coord < 0 || nm < 0) {
      fail(e, n, "unknown coordinate_transformation_mode or nearest_mode");
      return;
    }
    interp = mode == RESIZE_NEAREST ? nm
             : mode == RESIZE_LINEAR  ? 4
             : mode == RESIZE_CUBIC   ? 5
                                      : -1;
    if (interp < 0) {
      fail(e, n, "unknown mode");
      return;
    }
    exclude = n->p.resize.exclude_outside;
    cubic_a = n->p.resize.cubic_a;
    extrapolation = n->p.resize.extrapolation;
    const int *axes = n->p.resize.axes;
    int naxes = n->p.resize.naxes;
    Tensor *rt = node_input(n, 1), *st = node_input(n, 2), *zt = node_input(n, 3);
    if (coord == 5) {
      if (!rt || !rt->f32 || tensor_numel(rt) != 2 * naxes) {
        fail(e, n, rt ? arena_printf(e->g->arena, "input '%s' is not a compile-time constant "
                                     "(tf_crop_and_resize needs a constant roi)", rt->name)
                      : "tf_crop_and_resize needs a roi input");
        return;
      }
      for (int k = 0; k < naxes; k++) {
        roi[axes[k]] = rt->f32[k];
        roi[rank + axes[k]] = rt->f32[naxes + k];
      }
    }
    if (st && tensor_numel(st) > 0) {
      if (!st->f32) {
        fail(e, n, "Resize's scales must be constant");
        return;
      }
      for (int k = 0; k < naxes; k++)
        if (!float_ratio(st->f32[k], &scale[axes[k]])) {
          fail(e, n, "a scale is out of range");
          return;
        }
    } else if (zt && zt->i64) {
      AspectPolicy policy = n->p.resize.policy;
      for (int k = 0; k < naxes; k++)
        scale[axes[k]] = (Ratio){zt->i64[k], x->dims[axes[k]]};
      if (policy != ASPECT_STRETCH) {
        /* One scale for all axes: the smallest (not_larger) or largest. */
        bool larger = policy == ASPECT_NOT_SMALLER;
        Ratio pick = scale[axes[0]];
        for (int k = 1; k < naxes; k++) {
          Ratio r = scale[axes[k]];
          bool bigger = r.num * pick.den > pick.num * r.den;
          if (bigger == larger && r.num * pick.den != pick.num * r.den)
            pick = r;
        }
        for (int k = 0; k < naxes; k++)
          scale[axes[k]] = pick;
      }
    } else {
      fail(e, n, "Resize's scales or sizes must be constant");
      return;
    }
  }
  Launch L = {.kernel = "opc_resize", .rank = rank};
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)rank);
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), xs);
  L.x_extent[0] = reach(rank, x->dims, xs, &(int64_t){0});
  int naxes = 0;
  for (int d = 0; d < rank; d++) {
    bool same = scale[d].num == scale[d].den && y->dims[d] == x->dims[d] && roi[d] == 0.0f &&
                roi[rank + d] == 1.0f;
    /* tf_half_pixel_for_nn shifts by half a pixel: identity only when rounding down. */
    if (coord == 4 && interp != 0 && interp != 2)
      same = false;
    if (same || (x->dims[d] == 1 && y->dims[d] == 1))
      continue;
    if (naxes == 3) {
      fail(e, n, "Resize of more than 3 axes at once is not supported");
      return;
    }
    L.i[1 + naxes] = d;
    L.i[4 + naxes] = x->dims[d];
    L.i[7 + naxes] = scale[d].num;
    L.i[10 + naxes] = scale[d].den;
    L.f[2 + 2 * naxes] = roi[d];
    L.f[3 + 2 * naxes] = roi[rank + d];
    naxes++;
  }
  if (naxes == 0) {
    copy_launch(e, n, buf(e, y), ys, buf(e, x), xs, rank, y->dims);
    return;
  }
  L.i[0] = naxes;
  L.i[13] = coord;
  L.i[14] = interp;
  L.i[15] = exclude;
  L.f[0] = cubic_a;
  L.f[1] = extrapolation;
  static const char *const interp_names[] = {"nearest, round_prefer_floor",
                                             "nearest, round_prefer_ceil", "nearest, floor",
                                             "nearest, ceil", "linear", "cubic"};
  group_i(&L, 0, 1, "resized axes");
  group_i(&L, 1, naxes, "which");
  group_i(&L, 4, naxes, "their input sizes");
  group_i(&L, 7, naxes, "their scales: numerators");
  group_i(&L, 10, naxes, "denominators");
  group_i(&L, 13, 3, emit_str(e, "%s, %s, exclude_outside", coordinate_modes[coord],
                              interp_names[interp]));
  group_f(&L, 0, 2, "cubic_coeff_a, extrapolation_value");
  if (coord == 5)
    group_f(&L, 2, 2 * naxes, "roi start and end of each resized axis");
  emit_launch(e, n, &L);
}

/* ---------------------------------------------------------------- pools */

static void run_pool(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  const Window *w = &n->win;
  if (w->nspatial < 1 || w->nspatial > 3 || x->rank != 2 + w->nspatial) {
    fail(e, n, "pooling over 1 to 3 spatial dims only");
    return;
  }
  bool average = n->op == OP_AVERAGE_POOL;
  if (average && w->count_include_pad) {
    for (int d = 0; d < w->nspatial; d++) {
      int64_t last = (y->dims[2 + d] - 1) * w->stride[d] + (w->kernel[d] - 1) * w->dilation[d];
      if (last >= x->dims[2 + d] + w->pad_begin[d] + w->pad_end[d]) {
        fail(e, n, "count_include_pad with windows past the end padding is not supported");
        return;
      }
    }
  }
  const char *kernel = average ? "opc_average_pool" : "opc_max_pool";
  if (n->op == OP_LP_POOL)
    kernel = "opc_lp_pool";
  Launch L = {.kernel = kernel, .rank = 5};
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], x5[5], y5[5];
  strides_of(x, xs);
  strides_of(y, ys);
  for (int d = 0; d < 5; d++) {
    bool real = d < x->rank;
    L.dims[d] = real ? y->dims[d] : 1;
    x5[d] = real ? xs[d] : 0;
    y5[d] = real ? ys[d] : 0;
  }
  set_output(&L, buf(e, y), y5);
  set_input(&L, 0, buf(e, x), x5);
  L.x_extent[0] = reach(x->rank, x->dims, xs, &(int64_t){0});
  for (int d = 0; d < 3; d++) {
    bool real = d < w->nspatial;
    L.i[d] = real ? w->kernel[d] : 1;
    L.i[3 + d] = real ? w->stride[d] : 1;
    L.i[6 + d] = real ? w->dilation[d] : 1;
    L.i[9 + d] = real ? w->pad_begin[d] : 0;
    L.i[12 + d] = real ? x->dims[2 + d] : 1;
  }
  group_i(&L, 0, 3, "window");
  group_i(&L, 3, 3, "strides");
  group_i(&L, 6, 3, "dilations");
  group_i(&L, 9, 3, "padding before");
  group_i(&L, 12, 3, "the input's spatial dims");
  if (average) {
    L.i[15] = w->count_include_pad;
    group_i(&L, 15, 1, "count_include_pad");
  }
  if (n->op == OP_LP_POOL) {
    L.f[0] = (float)n->p.lp.p;
    group_f(&L, 0, 1, "p");
  }
  emit_launch(e, n, &L);
}

/* ----------------------------------------------------------------- rows */

/*
 * A row kernel over x, reducing the dims marked in `reduced`: yst gives the
 * output's stride along each of x's dims (ignored along reduced dims for
 * reductions, used for kernels that write whole rows).
 */
static bool row_launch(Emitter *e, const Node *n, Launch *L, const Tensor *x,
                       const bool *reduced, const char *y, const int64_t *yst, bool writes_rows) {
  int64_t xs[IR_MAX_RANK];
  strides_of(x, xs);
  L->rank = x->rank > 0 ? x->rank : 1;
  int64_t outer_y[IR_MAX_RANK];
  for (int d = 0; d < L->rank; d++) {
    L->dims[d] = x->rank == 0 || reduced[d] ? 1 : x->dims[d];
    outer_y[d] = x->rank == 0 || reduced[d] ? 0 : yst[d];
  }
  if (x->rank == 0)
    xs[0] = 0;
  set_output(L, y, outer_y);
  set_input(L, 0, buf(e, x), xs);
  L->x_extent[0] = reach(x->rank, x->dims, xs, &(int64_t){0});
  /* The row: reduced dims, merged where both layouts allow. */
  int groups = 0;
  int64_t length = 1, y_span = 0;
  for (int d = 0; d < x->rank; d++) {
    if (!reduced[d])
      continue;
    length *= x->dims[d];
    y_span += (x->dims[d] - 1) * yst[d];
    int g = groups - 1;
    if (d > 0 && reduced[d - 1] && L->i[5 + g] == xs[d] * x->dims[d] &&
        L->i[9 + g] == yst[d] * x->dims[d]) {
      L->i[1 + g] *= x->dims[d];
      L->i[5 + g] = xs[d];
      L->i[9 + g] = yst[d];
      continue;
    }
    if (groups == 4)
      return fail(e, n, "the reduced dims do not merge into 4 groups");
    L->i[1 + groups] = x->dims[d];
    L->i[5 + groups] = xs[d];
    L->i[9 + groups] = yst[d];
    groups++;
  }
  L->i[0] = groups;
  L->i[15] = length;
  group_i(L, 0, 1, "the row: groups of dims");
  group_i(L, 1, groups, "their sizes");
  group_i(L, 5, groups, "their input strides");
  if (writes_rows)
    group_i(L, 9, groups, "their output strides");
  group_i(L, 15, 1, "the row's length");
  /* Kernels that write rows reach further than the outer strides say. */
  if (length > 0)
    L->y_extent += y_span;
  return true;
}

/* Output strides along x's dims for a reduction's output y (keepdims or not). */
static void reduced_output_strides(const Tensor *x, const Tensor *y, const bool *reduced,
                                   int64_t *yst) {
  int64_t ys[IR_MAX_RANK];
  strides_of(y, ys);
  bool keep = y->rank == x->rank;
  int j = 0;
  for (int d = 0; d < x->rank; d++) {
    if (keep)
      yst[d] = reduced[d] ? 0 : ys[d];
    else
      yst[d] = reduced[d] ? 0 : ys[j++];
  }
}

static void run_reduce(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  bool reduced[IR_MAX_RANK], noop = false;
  if (n->op == OP_GLOBAL_AVERAGE_POOL || n->op == OP_GLOBAL_MAX_POOL) {
    for (int d = 0; d < x->rank; d++)
      reduced[d] = d >= 2;
  } else {
    memcpy(reduced, n->p.reduce.reduced, sizeof reduced);
    noop = n->p.reduce.noop;
  }
  if (noop) {
    run_reshape_copy(e, n);
    return;
  }
  int64_t yst[IR_MAX_RANK];
  reduced_output_strides(x, y, reduced, yst);
  Launch L = {0};
  bool max = n->op == OP_REDUCE_MAX || n->op == OP_GLOBAL_MAX_POOL;
  L.kernel = max ? "opc_reduce_max" : n->op == OP_REDUCE_MIN ? "opc_reduce_min" : "opc_reduce_sum";
  if (!row_launch(e, n, &L, x, reduced, buf(e, y), yst, false))
    return;
  /* Only the outer positions are written. */
  int64_t low;
  L.y_extent = reach(L.rank, L.dims, L.ystride, &low);
  if (strcmp(L.kernel, "opc_reduce_sum") == 0) {
    bool mean = n->op == OP_REDUCE_MEAN || n->op == OP_GLOBAL_AVERAGE_POOL;
    L.f[0] = mean ? 1.0f / (float)(L.i[15] > 0 ? L.i[15] : 1) : 1.0f;
    group_f(&L, 0, 1, mean ? "1 / length: the mean" : "factor");
  }
  emit_launch(e, n, &L);
}

static void run_softmax(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  int axis = n->p.axis.axis;
  bool coerce = n->p.axis.coerce2d;
  bool reduced[IR_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    reduced[d] = coerce ? d >= axis : d == axis;
  int64_t ys[IR_MAX_RANK];
  strides_of(y, ys);
  Launch L = {.kernel = n->op == OP_SOFTMAX ? "opc_softmax" : "opc_log_softmax"};
  if (!row_launch(e, n, &L, x, reduced, buf(e, y), ys, true))
    return;
  emit_launch(e, n, &L);
}

/* LayerNormalization's optional outputs, Mean and InvStdDev: one value per
   row, in the input's shape with the normalised dims set to 1. */
static void layer_norm_stats(Emitter *e, const Node *n, const bool *reduced) {
  Tensor *x = n->in[0];
  for (int k = 1; k <= 2 && k < n->nout; k++) {
    Tensor *out = n->out[k];
    if (!tensor_needed(out))
      continue;
    int64_t ys[IR_MAX_RANK];
    reduced_output_strides(x, out, reduced, ys);
    Launch L = {.kernel = k == 1 ? "opc_reduce_sum" : "opc_reduce_inv_std"};
    if (!row_launch(e, n, &L, x, reduced, buf(e, out), ys, false))
      return;
    int64_t low;
    L.y_extent = reach(L.rank, L.dims, L.ystride, &low);
    L.f[0] = k == 1 ? 1.0f / (float)(L.i[15] > 0 ? L.i[15] : 1)
                    : n->p.norm.epsilon;
    group_f(&L, 0, 1, k == 1 ? "1 / length: the mean" : "epsilon");
    L.note = k == 1 ? "the Mean output" : "the InvStdDev output";
    emit_launch(e, n, &L);
  }
}

static void run_layer_norm(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0], *scale = node_input(n, 1), *bias = node_input(n, 2);
  int axis = n->p.norm.axis;
  bool reduced[IR_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    reduced[d] = d >= axis;
  int64_t ys[IR_MAX_RANK];
  strides_of(y, ys);
  Launch L = {.kernel = "opc_layer_norm"};
  if (!row_launch(e, n, &L, x, reduced, buf(e, y), ys, true))
    return;
  Tensor *params[2] = {scale, bias};
  for (int k = 0; k < 2; k++) {
    Tensor *p = params[k];
    if (!p)
      continue;
    int64_t count = tensor_numel(p);
    if (count != 1 && count != L.i[15]) {
      fail(e, n, "scale and bias must have the normalised shape or one element");
      return;
    }
    L.x[1 + k] = buf(e, p);
    L.x_extent[1 + k] = count;
    L.i[13 + k] = count == 1 ? 0 : 1;
  }
  L.nx = bias ? 3 : 2;
  group_i(&L, 13, bias ? 2 : 1, bias ? "scale and bias steps along the row" : "scale step along the row");
  L.f[0] = n->p.norm.epsilon;
  group_f(&L, 0, 1, "epsilon");
  L.note = "x = {input, scale, bias}";
  emit_launch(e, n, &L);
  layer_norm_stats(e, n, reduced);
}

static void run_instance_norm(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  bool reduced[IR_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    reduced[d] = d >= 2;
  int64_t ys[IR_MAX_RANK];
  strides_of(y, ys);
  Launch L = {.kernel = "opc_instance_norm"};
  if (!row_launch(e, n, &L, x, reduced, buf(e, y), ys, true))
    return;
  for (int k = 1; k <= 2; k++) {
    L.x[k] = buf(e, n->in[k]);
    L.x_extent[k] = x->dims[1];
  }
  L.nx = 3;
  L.i[13] = x->dims[1];
  group_i(&L, 13, 1, "channels");
  L.f[0] = n->p.norm.epsilon;
  group_f(&L, 0, 1, "epsilon");
  L.note = "x = {input, scale, bias}";
  emit_launch(e, n, &L);
  fused_activation(e, n);
}

/* ------------------------------------------------------- normalisation */

static void run_lrn(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  Launch L = {.kernel = "opc_lrn", .rank = x->rank};
  memcpy(L.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), xs);
  L.i[0] = n->p.lrn.size;
  group_i(&L, 0, 1, "size");
  L.f[0] = n->p.lrn.alpha;
  L.f[1] = n->p.lrn.beta;
  L.f[2] = n->p.lrn.bias;
  group_f(&L, 0, 3, "alpha, beta, bias");
  emit_launch(e, n, &L);
}

/* BatchNormalization in two launches: subtract the mean, then scale. */
static void run_batch_norm(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  for (int k = 1; k < n->nout; k++)
    if (tensor_needed(n->out[k])) {
      fail(e, n, "BatchNormalization's training outputs are not supported");
      return;
    }
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], channel[IR_MAX_RANK] = {0};
  strides_of(x, xs);
  strides_of(y, ys);
  channel[1] = 1;
  Launch L = {.kernel = "opc_sub", .rank = x->rank};
  memcpy(L.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), xs);
  set_input(&L, 1, buf(e, n->in[3]), channel);
  L.note = "first x - mean, into y";
  emit_launch(e, n, &L);
  Launch M = {.kernel = "opc_batch_norm", .rank = x->rank};
  memcpy(M.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  set_output(&M, buf(e, y), ys);
  set_input(&M, 0, buf(e, y), ys);
  set_input(&M, 1, buf(e, n->in[1]), channel);
  set_input(&M, 2, buf(e, n->in[2]), channel);
  set_input(&M, 3, buf(e, n->in[4]), channel);
  M.f[0] = n->p.norm.epsilon;
  group_f(&M, 0, 1, "epsilon");
  M.note = "x = {x - mean, scale, bias, variance}";
  emit_launch(e, n, &M);
  fused_activation(e, n);
}

/* --- losses --- */

/*
 * NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. The labels are
 * compile-time constants (ops.c checks them), stored in the weights as
 * floats with -1 for an ignored label. SoftmaxCrossEntropyLoss first
 * writes LogSoftmax over the classes (dim 1) into its log_prob output, or
 * into scratch when nobody reads it; opc_nll_loss then gives each label's
 * loss, into the output (reduction none) or into scratch, which
 * opc_nll_loss_total sums (or averages) into the scalar output.
 */

/* The node's scratch in create(): losses first, then log-probabilities. */
typedef struct LossScratch {
  const char *field; /* "c->..._scratch", or NULL when none is needed */
  int64_t losses;    /* floats for the per-label losses, 0 when unused */
  int64_t log_prob;  /* floats for the log-probabilities, 0 when unused */
} LossScratch;

static LossScratch loss_scratch_size(const Node *n, LossReduction reduction) {
  LossScratch s = {0};
  if (reduction != LOSS_NONE)
    s.losses = tensor_numel(n->in[1]);
  if (n->op == OP_SCE_LOSS && !(n->nout > 1 && tensor_needed(n->out[1])))
    s.log_prob = tensor_numel(n->in[0]);
  return s;
}

static void setup_loss(Emitter *e, Node *n) {
  LossReduction reduction = n->p.loss.reduction;
  LossScratch *s = node_data(e, n, sizeof *s);
  *s = loss_scratch_size(n, reduction);
  int64_t count = s->losses + s->log_prob;
  if (count == 0)
    return;
  const char *field = emit_unique(e, emit_str(e, "%s_scratch", node_id(e, n)));
  emit_to(e, SEC_FIELDS, "float *%s; /* per-label losses, then log-probabilities */", field);
  emit_call(e, LIB_CUDA, n, "cudaMalloc((void **)&c->%s, %lld * sizeof(float))", field,
            (long long)count);
  emit_to(e, SEC_TEARDOWN, "cudaFree(c->%s);", field);
  s->field = emit_str(e, "c->%s", field);
}

/* The labels as floats in the weights, -1 where ignored. */
static const char *loss_labels(Emitter *e, const Node *n, bool has_ignore, int64_t ignore) {
  const Tensor *labels = n->in[1];
  int64_t count = tensor_numel(labels);
  float *data = arena_alloc(e->g->arena, sizeof(float) * (size_t)(count > 0 ? count : 1));
  for (int64_t i = 0; i < count; i++) {
    int64_t t = labels->i64[i];
    data[i] = has_ignore && t == ignore ? -1.0f : (float)t;
  }
  return weights_add(e, emit_str(e, "%s_labels", node_id(e, n)), data, count);
}

/* SoftmaxCrossEntropyLoss's LogSoftmax over the classes into logp. */
static bool loss_log_softmax(Emitter *e, const Node *n, const char *logp, const int64_t *ls) {
  const Tensor *x = n->in[0];
  bool reduced[IR_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    reduced[d] = d == 1;
  Launch L = {.kernel = "opc_log_softmax"};
  if (!row_launch(e, n, &L, x, reduced, logp, ls, true))
    return false;
  emit_launch(e, n, &L);
  return true;
}

/* The weights input as x[2] of a launch (or null), with its stride in i[1]. */
static void loss_weights(Emitter *e, const Node *n, Launch *L) {
  const Tensor *w = node_input(n, 2);
  int64_t none[IR_MAX_RANK] = {0};
  memcpy(L->xstride[2], none, sizeof none);
  L->x[2] = w ? buf(e, w) : NULL;
  L->x_extent[2] = 0;
  L->nx = 3;
  L->i[1] = 0;
  if (w) {
    int64_t ws[IR_MAX_RANK];
    strides_of(w, ws);
    L->i[1] = ws[0];
    L->x_extent[2] = reach(1, w->dims, ws, &(int64_t){0});
  }
  group_i(L, 1, 1, "the weights' stride");
}

static void run_loss(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *labels = n->in[1], *y = n->out[0];
  LossReduction reduction = n->p.loss.reduction;
  bool has_ignore = n->p.loss.has_ignore;
  int64_t ignore = n->p.loss.ignore;
  const LossScratch *s = node_data(e, n, sizeof *s);
  /* The log-probabilities and their strides. */
  const char *logp = buf(e, x);
  int64_t ls[IR_MAX_RANK];
  strides_of(x, ls);
  if (n->op == OP_SCE_LOSS) {
    if (s->log_prob > 0) {
      logp = emit_str(e, "(%s + %lld)", s->field, (long long)s->losses);
      int64_t step = 1;
      for (int d = x->rank - 1; d >= 0; d--) {
        ls[d] = step;
        step *= x->dims[d];
      }
    } else {
      logp = buf(e, n->out[1]);
      strides_of(n->out[1], ls);
    }
    if (!loss_log_softmax(e, n, logp, ls))
      return;
  }
  const char *label_buf = loss_labels(e, n, has_ignore, ignore);

  /* One iteration per label: dims are the labels', C is left out of x's. */
  Launch L = {.kernel = "opc_nll_loss", .rank = labels->rank};
  memcpy(L.dims, labels->dims, sizeof(int64_t) * (size_t)labels->rank);
  int64_t ys[IR_MAX_RANK], xs[IR_MAX_RANK], lab[IR_MAX_RANK];
  if (reduction == LOSS_NONE) {
    strides_of(y, ys);
    set_output(&L, buf(e, y), ys);
  } else {
    int64_t step = 1;
    for (int d = labels->rank - 1; d >= 0; d--) {
      ys[d] = step;
      step *= labels->dims[d];
    }
    set_output(&L, s->field, ys);
  }
  for (int d = 0; d < labels->rank; d++)
    xs[d] = ls[d == 0 ? 0 : d + 1];
  set_input(&L, 0, logp, xs);
  L.x_extent[0] = reach(x->rank, x->dims, ls, &(int64_t){0});
  int64_t step = 1;
  for (int d = labels->rank - 1; d >= 0; d--) {
    lab[d] = step;
    step *= labels->dims[d];
  }
  set_input(&L, 1, label_buf, lab);
  L.i[0] = ls[1];
  group_i(&L, 0, 1, "the log-probabilities' stride along C");
  loss_weights(e, n, &L);
  L.note = "x = {log-probabilities, labels (-1: ignored), weights}";
  emit_launch(e, n, &L);
  if (reduction == LOSS_NONE)
    return;

  /* The sum or mean, one iteration. */
  int64_t count = tensor_numel(labels);
  Launch T = {.kernel = "opc_nll_loss_total", .rank = 1, .dims = {1}};
  int64_t zero[IR_MAX_RANK] = {0};
  set_output(&T, buf(e, y), zero);
  set_input(&T, 0, s->field, zero);
  T.x_extent[0] = count;
  set_input(&T, 1, label_buf, zero);
  T.x_extent[1] = count;
  loss_weights(e, n, &T);
  T.i[0] = count;
  T.i[2] = reduction == LOSS_MEAN;
  group_i(&T, 0, 1, "the number of labels");
  group_i(&T, 2, 1, reduction == LOSS_MEAN ? "1: the mean" : "0: the sum");
  T.note = "x = {per-label losses, labels (-1: ignored), weights}";
  emit_launch(e, n, &T);
}

static const OpEmitter loss_emitter = {.setup = setup_loss, .run = run_loss};

/* --- more operators --- */

/* ReduceSumSquare, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum,
   ReduceLogSumExp and GlobalLpPool: one row kernel each. An empty axes list
   with noop_with_empty_axes reduces nothing: rows of one element, which
   still get squared, logged... as the spec asks. */
static const char *reduce_more_kernel(OpKind op) {
  switch (op) {
  case OP_REDUCE_SUM_SQUARE: return "opc_reduce_sum_square";
  case OP_REDUCE_PROD: return "opc_reduce_prod";
  case OP_REDUCE_LOG_SUM_EXP: return "opc_reduce_log_sum_exp";
  case OP_REDUCE_L1: return "opc_reduce_l1";
  case OP_REDUCE_L2: return "opc_reduce_l2";
  case OP_REDUCE_LOG_SUM: return "opc_reduce_log_sum";
  case OP_GLOBAL_LP_POOL: return "opc_reduce_lp";
  default: return NULL;
  }
}

static void run_reduce_more(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  bool reduced[IR_MAX_RANK];
  if (n->op == OP_GLOBAL_LP_POOL) {
    for (int d = 0; d < x->rank; d++)
      reduced[d] = d >= 2;
  } else {
    memcpy(reduced, n->p.reduce.reduced, sizeof reduced);
  }
  int64_t yst[IR_MAX_RANK];
  reduced_output_strides(x, y, reduced, yst);
  Launch L = {.kernel = reduce_more_kernel(n->op)};
  if (!row_launch(e, n, &L, x, reduced, buf(e, y), yst, false))
    return;
  /* Only the outer positions are written. */
  int64_t low;
  L.y_extent = reach(L.rank, L.dims, L.ystride, &low);
  if (n->op == OP_GLOBAL_LP_POOL) {
    L.f[0] = (float)n->p.lp.p;
    group_f(&L, 0, 1, "p");
  }
  emit_launch(e, n, &L);
}

/* Hardmax, CumSum, MeanVarianceNormalization and LpNormalization: kernels
   that read a row and write it back. */
static void run_row_more(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->out[0];
  bool reduced[IR_MAX_RANK] = {false}, coerce = false;
  int axis = 0, p = 2;
  if (n->op == OP_HARDMAX) {
    axis = n->p.axis.axis;
    coerce = n->p.axis.coerce2d;
  } else if (n->op == OP_CUMSUM) {
    axis = n->p.axis.axis;
  } else if (n->op == OP_LP_NORM) {
    axis = n->p.lp.axis;
    p = n->p.lp.p;
  } else {
    memcpy(reduced, n->p.reduce.reduced, sizeof reduced);
  }
  if (n->op != OP_MVN)
    for (int d = 0; d < x->rank; d++)
      reduced[d] = coerce ? d >= axis : d == axis;
  int64_t ys[IR_MAX_RANK];
  strides_of(y, ys);
  Launch L = {0};
  switch (n->op) {
  case OP_HARDMAX: L.kernel = "opc_hardmax"; break;
  case OP_CUMSUM: L.kernel = "opc_cumsum"; break;
  case OP_LP_NORM: L.kernel = "opc_lp_norm"; break;
  default: L.kernel = "opc_mvn"; break;
  }
  if (!row_launch(e, n, &L, x, reduced, buf(e, y), ys, true))
    return;
  if (n->op == OP_CUMSUM) {
    L.i[13] = n->p.axis.exclusive;
    L.i[14] = n->p.axis.reverse;
    group_i(&L, 13, 2, "exclusive, reverse");
  } else if (n->op == OP_LP_NORM) {
    L.i[14] = p;
    group_i(&L, 14, 1, "p");
  } else if (n->op == OP_MVN) {
    L.f[0] = 1e-9f;
    group_f(&L, 0, 1, "epsilon, added to the standard deviation");
  }
  emit_launch(e, n, &L);
}

static void run_trilu(Emitter *e, Node *n) {
  int64_t k = n->p.trilu.k;
  /* Not collapsed: the kernel needs the last two dims as they are. */
  Launch L = elementwise(e, n, "opc_trilu", n->in, 1);
  L.i[0] = k;
  L.i[1] = n->p.trilu.upper;
  group_i(&L, 0, 2, "k, upper");
  emit_launch(e, n, &L);
}

static void run_gather_elements(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *idx = n->in[1], *y = n->out[0];
  int axis = n->p.axis.axis;
  if (!tensor_is_const(idx)) {
    fail(e, n, "GatherElements needs constant indices");
    return;
  }
  int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK], is[IR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  strides_of(idx, is);
  Launch L = {.kernel = "opc_gather_elements", .rank = y->rank};
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  set_output(&L, buf(e, y), ys);
  set_input(&L, 0, buf(e, x), xs);
  L.x_extent[0] = reach(x->rank, x->dims, xs, &(int64_t){0});
  set_input(&L, 1, buf(e, idx), is);
  L.i[0] = axis;
  L.i[1] = x->dims[axis];
  group_i(&L, 0, 2, "axis, its size");
  L.note = "x = {input, indices as floats}";
  emit_launch(e, n, &L);
}

static void run_mod(Emitter *e, Node *n) {
  Launch L = elementwise(e, n, "opc_mod", n->in, 2);
  collapse(&L);
  L.i[0] = n->p.mod.fmod;
  group_i(&L, 0, 1, "fmod");
  emit_launch(e, n, &L);
}

static void run_gelu(Emitter *e, Node *n) {
  bool approx = n->p.act.tanh;
  Launch L = elementwise(e, n, approx ? "opc_gelu_tanh" : "opc_gelu", n->in, 1);
  collapse(&L);
  emit_launch(e, n, &L);
}

static const OpEmitter reduce_more_emitter = {.run = run_reduce_more};
static const OpEmitter row_more_emitter = {.run = run_row_more};
static const OpEmitter trilu_emitter = {.run = run_trilu};
static const OpEmitter gather_elements_emitter = {.run = run_gather_elements};
static const OpEmitter mod_emitter = {.run = run_mod};
static const OpEmitter gelu_emitter = {.run = run_gelu};

/* --- more operators (end) --- */

/* ---------------------------------------------------------- the table */

static const OpEmitter unary_emitter = {.run = run_unary};
static const OpEmitter binary_emitter = {.run = run_binary};
static const OpEmitter variadic_emitter = {.run = run_variadic};
static const OpEmitter reshape_emitter = {.run = run_reshape_copy};
static const OpEmitter transpose_emitter = {.run = run_transpose};
static const OpEmitter concat_emitter = {.run = run_concat};
static const OpEmitter split_emitter = {.run = run_split};
static const OpEmitter slice_emitter = {.run = run_slice};
static const OpEmitter expand_emitter = {.run = run_expand};
static const OpEmitter tile_emitter = {.run = run_tile};
static const OpEmitter depth_space_emitter = {.run = run_depth_space};
static const OpEmitter gather_emitter = {.run = run_gather};
static const OpEmitter pad_emitter = {.run = run_pad};
static const OpEmitter resize_emitter = {.run = run_resize};
static const OpEmitter pool_emitter = {.run = run_pool};
static const OpEmitter reduce_emitter = {.run = run_reduce};
static const OpEmitter softmax_emitter = {.run = run_softmax};
static const OpEmitter layer_norm_emitter = {.run = run_layer_norm};
static const OpEmitter instance_norm_emitter = {.run = run_instance_norm};
static const OpEmitter lrn_emitter = {.run = run_lrn};
static const OpEmitter batch_norm_emitter = {.run = run_batch_norm};

const OpEmitter *kernel_op_emitter(OpKind op) {
  if (unary_kernel(op))
    return &unary_emitter;
  if (binary_kernel(op))
    return &binary_emitter;
  switch (op) {
  case OP_SUM: case OP_MEAN: case OP_MAX: case OP_MIN: return &variadic_emitter;
  case OP_IDENTITY: case OP_DROPOUT: case OP_CAST: case OP_FLATTEN: case OP_RESHAPE:
  case OP_SQUEEZE: case OP_UNSQUEEZE: return &reshape_emitter;
  case OP_TRANSPOSE: return &transpose_emitter;
  case OP_CONCAT: return &concat_emitter;
  case OP_SPLIT: return &split_emitter;
  case OP_SLICE: return &slice_emitter;
  case OP_EXPAND: return &expand_emitter;
  case OP_TILE: return &tile_emitter;
  case OP_DEPTH_TO_SPACE: case OP_SPACE_TO_DEPTH: return &depth_space_emitter;
  case OP_GATHER: return &gather_emitter;
  case OP_PAD: return &pad_emitter;
  case OP_RESIZE: case OP_UPSAMPLE: return &resize_emitter;
  case OP_MAX_POOL: case OP_AVERAGE_POOL: return &pool_emitter;
  case OP_GLOBAL_AVERAGE_POOL: case OP_GLOBAL_MAX_POOL:
  case OP_REDUCE_MEAN: case OP_REDUCE_SUM: case OP_REDUCE_MAX: case OP_REDUCE_MIN:
    return &reduce_emitter;
  case OP_SOFTMAX: case OP_LOG_SOFTMAX: return &softmax_emitter;
  case OP_LAYER_NORM: return &layer_norm_emitter;
  case OP_INSTANCE_NORM: return &instance_norm_emitter;
  case OP_LRN: return &lrn_emitter;
  case OP_BATCH_NORM: return &batch_norm_emitter;
  /* more operators */
  case OP_REDUCE_SUM_SQUARE: case OP_REDUCE_PROD: case OP_REDUCE_LOG_SUM_EXP: case OP_REDUCE_L1:
  case OP_REDUCE_L2: case OP_REDUCE_LOG_SUM: case OP_GLOBAL_LP_POOL:
    return &reduce_more_emitter;
  case OP_HARDMAX: case OP_CUMSUM: case OP_MVN: case OP_LP_NORM: return &row_more_emitter;
  case OP_TRILU: return &trilu_emitter;
  case OP_GATHER_ELEMENTS: return &gather_elements_emitter;
  case OP_MOD: return &mod_emitter;
  case OP_GELU: return &gelu_emitter;
  case OP_LP_POOL: return &pool_emitter;
  case OP_NLL_LOSS: case OP_SCE_LOSS: return &loss_emitter; /* losses */
  default: return NULL;
  }
}
