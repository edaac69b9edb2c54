/*
 * cpu_units.c - the host CPU's part of a `--devices gpu,cpu` program (HOPE).
 *
 * The passes placed some units on the host CPU (Schedule.host_device) and
 * made every move between it and the GPU a transfer node. A CPU unit runs
 * opc's own CPU implementation of cuDNN, cuBLAS and the kernels
 * (runtime/), linked beside the real libraries under its own names: the
 * build libopcrt_cpu.a and its header opc_cpu.h, where every CUDA name has
 * the prefix "cpu_". So a CPU unit's code is printed exactly as the GPU's
 * would be, and cpu_line() gives every library name, and every net.c
 * helper that takes the libraries' types, that prefix.
 *
 * All CPU units and the copies into host memory go on one stream of the
 * GPU (the scheduler gives the CPU one lane): a unit is a host function
 * there (cudaLaunchHostFunc), which runs the unit on the CPU runtime's own
 * stream and waits for it. So the GPU's events order the CPU's work like
 * any other, and the whole program is still one CUDA graph: a host
 * function is a node of it. A host function may not call CUDA, and does
 * not: only the cpu_ copy, which is another library. Its failures go to
 * c->cpu_error, since the host thread may be printing c->error meanwhile;
 * run() and create() report them after their synchronisation.
 *
 * The CPU's memory is the CPU runtime's (cpu_cudaMalloc: host memory),
 * registered with CUDA as pinned, so that the copies between it and the
 * GPU are asynchronous and can be captured.
 */
#include <stdlib.h>
#include <string.h>

#include "emit.h"

bool emit_has_cpu(const Emitter *e) { return e->g->sched.host_device > 0; }

bool node_is_cpu_code(const Emitter *e, const Node *n) {
  return node_on_cpu(e->g, n) && !node_is_transfer(e->g, n);
}

/* net.c's helpers that take the libraries' types: the CPU's code calls
   copies of them, printed again through cpu_line(). */
static const char *const helper_names[] = {
    "report",           "make_tensor",     "pick_conv_algo", "pick_deconv_algo",
    "precomp_workspace", "choose_form",    "workspace_limit", "pick_kernel_arch",
    "kernel_image",     "load_kernels",    "cu_ok",          "make_conv",
    "free_conv",        "conv_shape",      "conv_descs",     NULL,
};

static bool ident_char(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* `line` with "cpu_" before every helper name of the list. */
static char *prefix_helpers(const char *line) {
  size_t len = strlen(line), cap = len * 2 + 64;
  char *out = malloc(cap), *o = out;
  if (!out)
    return NULL;
  for (size_t i = 0; i < len;) {
    if (ident_char(line[i]) && (i == 0 || !ident_char(line[i - 1]))) {
      size_t j = i;
      while (j < len && ident_char(line[j]))
        j++;
      for (int h = 0; helper_names[h]; h++)
        if (strlen(helper_names[h]) == j - i && memcmp(line + i, helper_names[h], j - i) == 0) {
          if ((size_t)(o - out) + 4 + (j - i) + (len - j) + 1 > cap)
            break;
          memcpy(o, "cpu_", 4);
          o += 4;
          break;
        }
      memcpy(o, line + i, j - i);
      o += j - i;
      i = j;
    } else {
      *o++ = line[i++];
    }
  }
  *o = 0;
  return out;
}

char *cpu_line(const char *line) {
  char *api = cpu_prefix_line(line);
  if (!api)
    return NULL;
  char *all = prefix_helpers(api);
  free(api);
  return all;
}

/* ------------------------------------------------------------ the context */

void emit_cpu_fields(Emitter *e) {
  if (!emit_has_cpu(e))
    return;
  Uses *u = &e->st->cpu;
  emit(e, "/* The host CPU (--devices gpu,cpu): opc's CPU runtime under its cpu_ names. */");
  emit(e, "cpu_cudaStream_t cpu_stream;");
  if (u->cudnn)
    emit(e, "cpu_cudnnHandle_t cpu_cudnn;");
  if (u->cublas) {
    emit(e, "cpu_cublasHandle_t cpu_cublas;");
    emit(e, "void *cpu_cublas_workspace;");
  }
  if (u->workspace) {
    emit(e, "void *cpu_workspace;");
    emit(e, "size_t cpu_workspace_bytes;");
  }
  emit(e, "float *cpu_arena; /* the CPU's activations, pinned for the GPU's copies */");
  if (e->st->nweights)
    emit(e, "float *cpu_weights; /* the CPU's copy of the constants */");
  emit(e, "const char *cpu_node; /* the CPU unit that runs, for messages */");
  emit(e, "volatile int cpu_failed; /* a CPU unit failed: the rest of the run skips */");
  emit(e, "char cpu_error[%d];", OPC_ERROR_SIZE);
}

/* In create(), after the GPU's arena and weights. */
void emit_cpu_memory(Emitter *e) {
  if (!emit_has_cpu(e))
    return;
  Uses *u = &e->st->cpu;
  long long arena = (long long)e->g->arena_bytes;
  emit_blank(e);
  emit(e, "/* The host CPU: a stream and handles of the CPU runtime, an arena, the weights. */");
  e->cpu_code = true;
  emit_call(e, LIB_CUDA, NULL, "cudaStreamCreateWithFlags(&c->cpu_stream, cudaStreamNonBlocking)");
  if (u->cudnn) {
    emit_call(e, LIB_CUDNN, NULL, "cudnnCreate(&c->cpu_cudnn)");
    emit_call(e, LIB_CUDNN, NULL, "cudnnSetStream(c->cpu_cudnn, c->cpu_stream)");
  }
  if (u->cublas) {
    emit_call(e, LIB_CUBLAS, NULL, "cublasCreate(&c->cpu_cublas)");
    emit_call(e, LIB_CUBLAS, NULL, "cublasSetStream(c->cpu_cublas, c->cpu_stream)");
    emit_call(e, LIB_CUDA, NULL, "cudaMalloc(&c->cpu_cublas_workspace, cublas_workspace_bytes)");
    emit_call(e, LIB_CUBLAS, NULL,
              "cublasSetWorkspace(c->cpu_cublas, c->cpu_cublas_workspace, cublas_workspace_bytes)");
  }
  emit_call(e, LIB_CUDA, NULL, "cudaMalloc((void **)&c->cpu_arena, %lld)", arena);
  e->cpu_code = false;
  emit(e, "/* Pinned, so that the GPU's copies to and from it are asynchronous and can be");
  emit(e, "   captured. */");
  emit_call(e, LIB_CUDA, NULL, "cudaHostRegister(c->cpu_arena, %lld, cudaHostRegisterDefault)",
            arena);
  if (e->st->nweights) {
    e->cpu_code = true;
    emit_call(e, LIB_CUDA, NULL, "cudaMalloc((void **)&c->cpu_weights, weights_bytes)");
    e->cpu_code = false;
    emit_call(e, LIB_CUDA, NULL,
              "cudaMemcpy(c->cpu_weights, c->weights, weights_bytes, cudaMemcpyDeviceToHost)");
  }
}

/* In create(), once every setup has sized the CPU's workspace. */
void emit_cpu_workspace(Emitter *e) {
  if (!emit_has_cpu(e) || !e->st->cpu.workspace)
    return;
  e->cpu_code = true;
  emit(e, "if (c->cpu_workspace_bytes > 0 &&");
  emit(e, "    !cuda_ok(c, cudaMalloc(&c->cpu_workspace, c->cpu_workspace_bytes), \"cudaMalloc\"))");
  emit(e, "  %s;", emit_fail(e));
  e->cpu_code = false;
}

void emit_cpu_teardown(Emitter *e) {
  if (!emit_has_cpu(e))
    return;
  Uses *u = &e->st->cpu;
  emit(e, "if (c->cpu_arena)");
  emit(e, "  cudaHostUnregister(c->cpu_arena);");
  e->cpu_code = true;
  emit(e, "cudaFree(c->cpu_arena);");
  if (e->st->nweights)
    emit(e, "cudaFree(c->cpu_weights);");
  if (u->workspace)
    emit(e, "cudaFree(c->cpu_workspace);");
  if (u->cublas) {
    emit(e, "if (c->cpu_cublas)");
    emit(e, "  cublasDestroy(c->cpu_cublas);");
    emit(e, "cudaFree(c->cpu_cublas_workspace);");
  }
  if (u->cudnn) {
    emit(e, "if (c->cpu_cudnn)");
    emit(e, "  cudnnDestroy(c->cpu_cudnn);");
  }
  emit(e, "if (c->cpu_stream)");
  emit(e, "  cudaStreamDestroy(c->cpu_stream);");
  e->cpu_code = false;
}

/* ------------------------------------------------------------ the units */

/* The host function that runs a CPU unit's run function on the CPU. */
const char *emit_cpu_host_function(Emitter *e, const Node *n, const char *run) {
  const char *fn = emit_str(e, "host_%s", run);
  fprintf(e->st->sec[SEC_SETUP],
          "/* %s (%s) on the host CPU, in a host function of its GPU stream: after a\n"
          "   failure the run's other CPU units do nothing, and run() reports it. */\n"
          "static void %s(void *arg)\n{\n"
          "  %s_ctx *c = arg;\n"
          "  if (c->cpu_failed) {\n    return;\n  }\n"
          "  c->cpu_node = \"%s\";\n"
          "  if (%s(c) != 0 ||\n"
          "      !cpu_cuda_ok(c, cpu_cudaStreamSynchronize(c->cpu_stream), \"cudaStreamSynchronize\")) {\n"
          "    c->cpu_failed = 1;\n  }\n}\n\n",
          comment_text(e, n->name), op_name(n->op), fn, e->prefix, emit_node_label(e, n), run);
  e->st->cpu.lib[LIB_CUDA] = true;
  return fn;
}

const char *emit_cpu_setup_fail(Emitter *e) {
  e->st->cpu.failure = true;
  return "return cpu_failure(c)";
}

/* After a synchronisation: a CPU unit's failure is the run's. */
void emit_cpu_check(Emitter *e, const char *fail) {
  if (!emit_has_cpu(e))
    return;
  emit_open(e, "if (c->cpu_failed) {");
  emit(e, "snprintf(c->error, sizeof c->error, \"%%s\", c->cpu_error);");
  emit(e, "c->cpu_failed = 0;");
  emit(e, "%s;", fail);
  emit_close(e, "}");
}

/* The helpers the CPU's code used, printed again under their cpu_ names. */
void emit_cpu_helpers(Emitter *e) {
  if (!emit_has_cpu(e))
    return;
  e->cpu_code = true;
  emit_check_helpers(e);
  e->cpu_code = false;
}
