/*
 * triton.c - a Triton Inference Server model around a program built as a
 * shared library: config.pbtxt, from the graph's inputs and outputs, and
 * the Python-backend model.py (triton_model.py, the same for every model,
 * since it reads the rest from the library's API).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "triton_model_template.h"

/* Triton's name for each run-time element type. */
static const char *triton_type(DType t) {
  switch (t) {
  case DT_FLOAT: return "TYPE_FP32";
  case DT_DOUBLE: return "TYPE_FP64";
  case DT_FLOAT16: return "TYPE_FP16";
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
   least one, so it gets [1] and a reshape to none. */
static bool print_tensor(FILE *f, const Tensor *t, bool last) {
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
  for (int d = 0; d < t->rank; d++)
    fprintf(f, "%lld%s", t->bounded ? -1LL : (long long)t->dims[d], d + 1 < t->rank ? ", " : " ]\n");
  fprintf(f, "  }%s\n", last ? "" : ",");
  return true;
}

static bool write_config(const Graph *g, const TritonOptions *o, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    opc_error("cannot write %s: %s", path, strerror(errno));
    return false;
  }
  fprintf(f, "# Written by opc %s from %s for the %s target: the program is\n"
             "# 1/libnet.so, which 1/model.py runs (Triton's Python backend).\n",
          OPC_VERSION, o->source, o->target == TARGET_CUDA ? "cuda" : "cpu");
  fprintf(f, "name: ");
  print_string(f, o->name);
  fprintf(f, "\nbackend: \"python\"\n"
             "# The program's shapes are fixed, batch dimension included.\n"
             "max_batch_size: 0\n");
  bool ok = true;
  for (int k = 0; k < 2; k++) {
    int count = k == 0 ? g->ninputs : g->noutputs;
    Tensor **list = k == 0 ? g->inputs : g->outputs;
    fprintf(f, "%s [\n", k == 0 ? "input" : "output");
    for (int i = 0; i < count && ok; i++)
      ok = print_tensor(f, list[i], i + 1 == count);
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

bool write_triton_model(const Graph *g, const TritonOptions *o) {
  char config[4096], model_py[4096];
  snprintf(config, sizeof config, "%s/config.pbtxt", o->model_dir);
  snprintf(model_py, sizeof model_py, "%s/1/model.py", o->model_dir);
  if (write_config(g, o, config) && write_model_py(model_py))
    return true;
  remove(config);
  remove(model_py);
  return false;
}
