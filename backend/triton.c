/*
 * triton.c - a Triton Inference Server model around programs built as
 * shared libraries: config.pbtxt, from the graph's inputs and outputs, and
 * what runs them: opc's native backend, libtriton_opc.so (serve/triton),
 * copied into the model's folder where Triton looks for it first, or the
 * Python backend's model.py (triton_model.py, the same for every model,
 * since it reads the rest from the library's API).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "triton_model_template.h"

/* Triton's name for each run-time element type. */
static const char *triton_type(DType t) {
  switch (t) {
  case DT_FLOAT: return "TYPE_FP32";
  case DT_DOUBLE: return "TYPE_FP64";
  case DT_FLOAT16: return "TYPE_FP16";
  case DT_BFLOAT16: return "TYPE_BF16";
  case DT_INT64: return "TYPE_INT64";
  case DT_INT32: return "TYPE_INT32";
  case DT_INT16: return "TYPE_INT16";
  case DT_INT8: return "TYPE_INT8";
  case DT_UINT64: return "TYPE_UINT64";
  case DT_UINT32: return "TYPE_UINT32";
  case DT_UINT16: return "TYPE_UINT16";
  case DT_UINT8: return "TYPE_UINT8";
  case DT_BOOL: return "TYPE_BOOL";
  default: return NULL;
  }
}

/* A protobuf text-format string literal. */
static void print_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 32 || ch > 126)
      fprintf(f, "\\%03o", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

/* One input or output. A scalar has no dims in the program; Triton wants at
   least one, so it gets [1] and a reshape to none. With batching, Triton's
   dims leave out the first, the batch. */
static bool print_tensor(FILE *f, const Tensor *t, bool batched, bool last) {
  const char *type = triton_type(t->dtype);
  if (!type) {
    opc_error("'%s': Triton has no type for %s", t->name, dtype_onnx_name(t->dtype));
    return false;
  }
  fprintf(f, "  {\n    name: ");
  print_string(f, t->name);
  fprintf(f, "\n    data_type: %s\n    dims: [ ", type);
  if (t->rank == 0)
    fprintf(f, "1 ]\n    reshape: { shape: [ ] }\n");
  /* A bounded output's size is the data's (NonZero): any, to Triton. */
  for (int d = batched ? 1 : 0; d < t->rank; d++)
    fprintf(f, "%lld%s", t->bounded && d == t->bound_axis ? -1LL : (long long)t->dims[d], d + 1 < t->rank ? ", " : " ]\n");
  fprintf(f, "  }%s\n", last ? "" : ",");
  return true;
}

static bool write_config(const Graph *g, const TritonOptions *o, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    opc_error("cannot write %s: %s", path, strerror(errno));
    return false;
  }
  fprintf(f, "# Written by opc %s from %s for the %s target: the program is\n", OPC_VERSION,
          o->source, target_name(o->target));
  if (o->python)
    fprintf(f, "# 1/libnet.so, which 1/model.py runs (Triton's Python backend).\n");
  else if (o->max_batch)
    fprintf(f, "# 1/libnet_bB.so for each batch size B, which libtriton_opc.so runs (opc's\n"
               "# backend): a batch of requests runs on the smallest program that holds it.\n");
  else
    fprintf(f, "# 1/libnet.so, which libtriton_opc.so beside this file runs (opc's backend).\n");
  fprintf(f, "name: ");
  print_string(f, o->name);
  fprintf(f, "\nbackend: \"%s\"\n", o->python ? "python" : "opc");
  if (o->max_batch)
    fprintf(f, "max_batch_size: %d\ndynamic_batching { }\n", o->max_batch);
  else
    fprintf(f, "# The program's shapes are fixed, batch dimension included.\n"
               "max_batch_size: 0\n");
  bool ok = true;
  for (int k = 0; k < 2; k++) {
    int count = k == 0 ? g->ninputs : g->noutputs;
    Tensor **list = k == 0 ? g->inputs : g->outputs;
    fprintf(f, "%s [\n", k == 0 ? "input" : "output");
    for (int i = 0; i < count && ok; i++)
      ok = print_tensor(f, list[i], o->max_batch > 0, i + 1 == count);
    fprintf(f, "]\n");
  }
  fprintf(f, "instance_group [\n  {\n    count: %d\n    kind: %s\n  }\n]\n", o->instances,
          o->target == TARGET_CUDA ? "KIND_GPU" : "KIND_CPU");
  if (fclose(f) != 0 && ok) {
    opc_error("cannot write %s: %s", path, strerror(errno));
    ok = false;
  }
  return ok;
}

static bool write_model_py(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    opc_error("cannot write %s: %s", path, strerror(errno));
    return false;
  }
  for (const char *const *line = triton_model_template; *line; line++)
    fprintf(f, "%s\n", *line);
  if (fclose(f) != 0) {
    opc_error("cannot write %s: %s", path, strerror(errno));
    return false;
  }
  return true;
}

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* libtriton_opc.so beside this opc: in the build tree, then the install
   tree relative to the executable, then the configured prefix. */
static const char *backend_library(void) {
  static char path[PATH_MAX + 64];
  char dir[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", dir, sizeof dir - 1);
  dir[len > 0 ? len : 0] = '\0';
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = '\0';
  snprintf(path, sizeof path, "%.3000s/serve/triton/libtriton_opc.so", dir);
  if (file_exists(path))
    return path;
  snprintf(path, sizeof path, "%.3000s/../%.500s/libtriton_opc.so", dir, OPC_LIBDIR);
  if (file_exists(path))
    return path;
  snprintf(path, sizeof path, "%.3000s/%.500s/libtriton_opc.so", OPC_PREFIX, OPC_LIBDIR);
  return path;
}

static bool copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb");
  if (!in) {
    opc_error("cannot read opc's Triton backend %s: %s (build it, or install opc)", from,
              strerror(errno));
    return false;
  }
  FILE *out = fopen(to, "wb");
  if (!out) {
    opc_error("cannot write %s: %s", to, strerror(errno));
    fclose(in);
    return false;
  }
  char buf[1 << 16];
  size_t n;
  bool ok = true;
  while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
    ok = fwrite(buf, 1, n, out) == n;
  ok = !ferror(in) && ok;
  fclose(in);
  if (fclose(out) != 0 || !ok) {
    opc_error("cannot write %s: %s", to, strerror(errno));
    return false;
  }
  chmod(to, 0755);
  return true;
}

bool write_triton_model(const Graph *g, const TritonOptions *o) {
  char config[4096], runner[4096];
  snprintf(config, sizeof config, "%s/config.pbtxt", o->model_dir);
  if (o->python)
    snprintf(runner, sizeof runner, "%s/1/model.py", o->model_dir);
  else
    snprintf(runner, sizeof runner, "%s/libtriton_opc.so", o->model_dir);
  if (write_config(g, o, config) &&
      (o->python ? write_model_py(runner) : copy_file(backend_library(), runner)))
    return true;
  remove(config);
  remove(runner);
  return false;
}
