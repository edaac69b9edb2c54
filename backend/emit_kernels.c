/*
 * emit_kernels.c - opc's own kernels in net.c: the kernels it uses, their
 * source text, its NVRTC compile and module load, the launch call, and the
 * table of the operators done with them (by category, kernels_*.c).
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
enum { BLOCK_THREADS = KERNEL_BLOCK_THREADS, MAX_BLOCKS = 65535 };

/* ------------------------------------------------------ kernel requests */

static const KernelBlock *find_block(const char *name) {
  for (int i = 0; i < kernel_nblocks; i++)
    if (kernel_blocks[i].kind == KB_KERNEL && strcmp(kernel_blocks[i].name, name) == 0)
      return &kernel_blocks[i];
  return NULL;
}

void kernel_request(Emitter *e, const char *name) {
  used(e)->kernels = true;
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
  if (e->st->gpu.kernels)
    emit_load_function(e);
  if (e->st->cpu.kernels) { /* the host CPU's copy: the CPU runtime's NVRTC and module */
    emit_blank(e);
    e->cpu_code = true;
    emit_load_function(e);
    e->cpu_code = false;
  }
}

/* The host CPU's module: every kernel, under the CPU runtime's names. */
static void emit_cpu_kernel_fields(Emitter *e) {
  e->cpu_code = true;
  emit_open(e, "struct {");
  emit(e, "CUmodule module;");
  for (int i = 0; i < e->nkernels; i++)
    emit(e, "CUfunction %s;", e->kernels[i]);
  emit_close(e, "} cpu_kernel; /* opc's own kernels, for the host CPU */");
  e->cpu_code = false;
}

void emit_kernel_fields(Emitter *e) {
  if (e->nkernels == 0)
    return;
  if (e->st->cpu.kernels)
    emit_cpu_kernel_fields(e);
  if (!e->st->gpu.kernels)
    return;
  emit_open(e, "struct {");
  emit(e, "CUmodule module;");
  for (int i = 0; i < e->nkernels; i++)
    emit(e, "CUfunction %s;", e->kernels[i]);
  if (emit_multi_gpu(e))
    emit_close(e, "} kernel[%d]; /* opc's own kernels, compiled in create(), per GPU */",
               e->g->sched.ndevices);
  else
    emit_close(e, "} kernel; /* opc's own kernels, compiled in create() */");
}

/* Compiles and loads the kernels into `module` (a context field such as
   "c->kernel") and looks up each one used. */
static void emit_module_load(Emitter *e, const char *module) {
  emit(e, "if (load_kernels(&%s.module, c->error, sizeof c->error) != 0)", module);
  emit(e, "  %s;", emit_fail(e));
  for (int i = 0; i < e->nkernels; i++)
    emit_call(e, LIB_DRIVER, NULL, "cuModuleGetFunction(&%s.%s, %s.module, \"%s\")", module,
              e->kernels[i], module, e->kernels[i]);
}

void emit_kernel_setup(Emitter *e) {
  if (e->nkernels == 0)
    return;
  if (e->st->cpu.kernels) {
    e->cpu_code = true;
    emit(e, "/* opc's own kernels for the host CPU: the CPU runtime's build of them. */");
    emit_module_load(e, "c->cpu_kernel");
    e->cpu_code = false;
  }
  if (!e->st->gpu.kernels)
    return;
  if (emit_multi_gpu(e)) {
    emit(e, "/* opc's own kernels: a module per GPU, since a module belongs to the");
    emit(e, "   context it was loaded in. */");
    emit_open(e, "for (int d = 0; d < GPU_COUNT; d++) {");
    emit_set_device(e, "d");
    emit_module_load(e, "c->kernel[d]");
    emit_close(e, "}");
    emit_set_device(e, "0");
    return;
  }
  emit(e, "/* opc's own kernels: compiled for this GPU, then looked up by name. */");
  emit_module_load(e, "c->kernel");
}

void emit_kernel_teardown(Emitter *e) {
  if (e->nkernels == 0)
    return;
  if (e->st->cpu.kernels) {
    e->cpu_code = true;
    emit(e, "if (c->cpu_kernel.module)");
    emit(e, "  cuModuleUnload(c->cpu_kernel.module);");
    e->cpu_code = false;
  }
  if (!e->st->gpu.kernels)
    return;
  if (emit_multi_gpu(e)) {
    emit(e, "/* cuModuleUnload unloads from the current context: the module's GPU's */");
    emit(e, "for (int d = 0; d < GPU_COUNT; d++)");
    emit(e, "  if (c->kernel[d].module && cudaSetDevice(c->gpu[d]) == cudaSuccess)");
    emit(e, "    cuModuleUnload(c->kernel[d].module);");
    return;
  }
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
  int device = node_sched(e->g, n)->device;
  const char *kernel = e->cpu_code          ? "c->cpu_kernel"
                       : emit_multi_gpu(e) ? emit_str(e, "c->kernel[%d]", device)
                                           : "c->kernel";
  emit_call(e, LIB_DRIVER, n, "cuLaunchKernel(%s.%s, %s, 1, 1, %d, 1, 1, 0, %s, params, NULL)",
            kernel, name, grid, BLOCK_THREADS, node_stream(e, n));
}
