/*
 * triton_opc.c - libtriton_opc.so, a Triton Inference Server backend that
 * runs programs opc compiled, with no Python in the request path.
 *
 * A model's version directory holds the program as a shared library:
 * libnet.so when config.pbtxt's max_batch_size is 0 (shapes are the
 * program's, batch dimension included), or libnet_bB.so for several batch
 * sizes B up to max_batch_size when Triton forms batches. Each library is
 * dlopened and driven through its net_* API (docs/emitted-program.md); the
 * backend knows nothing else of opc. Each instance has a context per
 * program. A batch Triton hands over runs on the smallest program that
 * holds it: the requests' inputs are gathered into the program's buffers,
 * the rows past them zeroed, and each request gets its rows of the outputs.
 *
 * Every failure is a Triton error with opc's message, sent to the request
 * it concerns; the server stays up.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "triton_api.h"

enum { MAX_RANK = 16, MAX_PROGRAMS = 64, MAX_PORTS = 256 };

/* The net_* API of one libnet.so. */
typedef struct NetApi {
  int (*create)(void **ctx, const char *weights);
  int (*run)(void *ctx, const void *const *in, void *const *out);
  void (*destroy)(void *ctx);
  const char *(*error)(const void *ctx);
  int (*num_inputs)(void), (*num_outputs)(void);
  const char *(*input_name)(int), *(*output_name)(int);
  const char *(*input_type)(int), *(*output_type)(int);
  int (*input_rank)(int), (*output_rank)(int);
  const long long *(*input_dims)(int), *(*output_dims)(int);
  int (*output_shape)(const void *ctx, int i, long long *dims);
  int (*set_device)(int); /* cudaSetDevice, in a --target cuda library only */
} NetApi;

typedef struct Program {
  void *lib;
  NetApi api;
  int batch; /* rows of its inputs; 0: unbatched (max_batch_size 0) */
  char *weights;
} Program;

/* An input or output, as the programs declare it. */
typedef struct Port {
  const char *name; /* the first program's string */
  TRITONSERVER_DataType type;
  int elem_size, rank;
  int64_t dims[MAX_RANK];
  uint64_t row_bytes; /* one batch row; unbatched: the whole tensor */
} Port;

typedef struct Model {
  char *name;
  int max_batch; /* config.pbtxt's max_batch_size */
  Program programs[MAX_PROGRAMS];
  int nprograms; /* ascending batch */
  Port inputs[MAX_PORTS], outputs[MAX_PORTS];
  int ninputs, noutputs;
} Model;

typedef struct Instance {
  Model *model;
  void *ctx[MAX_PROGRAMS];
  void *in[MAX_PORTS], *out[MAX_PORTS]; /* the largest program's size */
  int device;                           /* KIND_GPU's device, else -1 */
} Instance;

/* ------------------------------------------------------------ errors */

static TRITONSERVER_Error *fail(TRITONSERVER_Error_Code code, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return TRITONSERVER_ErrorNew(code, msg);
}

static void log_error(TRITONSERVER_Error *e, const char *what) {
  if (!e)
    return;
  char msg[2048];
  snprintf(msg, sizeof msg, "opc backend: %s: %s", what, TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_Error *le = TRITONSERVER_LogMessage(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, msg);
  if (le)
    TRITONSERVER_ErrorDelete(le);
  TRITONSERVER_ErrorDelete(e);
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* --------------------------------------------------------- programs */

/* net_input_type's names, with Triton's type and the element size. */
static bool triton_type(const char *s, TRITONSERVER_DataType *type, int *size) {
  static const struct {
    const char *name;
    TRITONSERVER_DataType type;
    int size;
  } types[] = {
      {"float32", TRITONSERVER_TYPE_FP32, 4}, {"float64", TRITONSERVER_TYPE_FP64, 8},
      {"float16", TRITONSERVER_TYPE_FP16, 2}, {"int64", TRITONSERVER_TYPE_INT64, 8},
      {"int32", TRITONSERVER_TYPE_INT32, 4},  {"int16", TRITONSERVER_TYPE_INT16, 2},
      {"int8", TRITONSERVER_TYPE_INT8, 1},    {"uint64", TRITONSERVER_TYPE_UINT64, 8},
      {"uint32", TRITONSERVER_TYPE_UINT32, 4}, {"uint16", TRITONSERVER_TYPE_UINT16, 2},
      {"uint8", TRITONSERVER_TYPE_UINT8, 1},  {"bool", TRITONSERVER_TYPE_BOOL, 1},
      {"bfloat16", TRITONSERVER_TYPE_BF16, 2},
  };
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (strcmp(s, types[i].name) == 0) {
      *type = types[i].type;
      *size = types[i].size;
      return true;
    }
  return false;
}

static TRITONSERVER_Error *find_symbol(void *lib, const char *path, const char *name, void **fn) {
  *fn = dlsym(lib, name);
  return *fn ? NULL
             : fail(TRITONSERVER_ERROR_INVALID_ARG, "%s has no %s: not a program opc built", path,
                    name);
}

static TRITONSERVER_Error *open_program(Program *p, const char *path) {
  p->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!p->lib)
    return fail(TRITONSERVER_ERROR_NOT_FOUND, "cannot load %s: %s", path, dlerror());
  NetApi *a = &p->api;
  struct {
    const char *name;
    void **fn;
  } syms[] = {
      {"net_create", (void **)&a->create},         {"net_run", (void **)&a->run},
      {"net_destroy", (void **)&a->destroy},       {"net_error", (void **)&a->error},
      {"net_num_inputs", (void **)&a->num_inputs}, {"net_num_outputs", (void **)&a->num_outputs},
      {"net_input_name", (void **)&a->input_name}, {"net_output_name", (void **)&a->output_name},
      {"net_input_type", (void **)&a->input_type}, {"net_output_type", (void **)&a->output_type},
      {"net_input_rank", (void **)&a->input_rank}, {"net_output_rank", (void **)&a->output_rank},
      {"net_input_dims", (void **)&a->input_dims}, {"net_output_dims", (void **)&a->output_dims},
      {"net_output_shape", (void **)&a->output_shape},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    TRITONSERVER_Error *e = find_symbol(p->lib, path, syms[i].name, syms[i].fn);
    if (e)
      return e;
  }
  /* The CUDA runtime a --target cuda library links, through its handle. */
  a->set_device = (int (*)(int))dlsym(p->lib, "cudaSetDevice");
  return NULL;
}

/* Port `i` of program p, checked against the first program's where given:
   same name, type and dims but the first, which is the program's batch. */
static TRITONSERVER_Error *describe_port(const Program *p, const char *path, bool input, int i,
                                         Port *port, bool first) {
  const NetApi *a = &p->api;
  const char *name = input ? a->input_name(i) : a->output_name(i);
  const char *type = input ? a->input_type(i) : a->output_type(i);
  int rank = input ? a->input_rank(i) : a->output_rank(i);
  const long long *dims = input ? a->input_dims(i) : a->output_dims(i);
  const char *kind = input ? "input" : "output";
  Port q = {.name = name, .rank = rank};
  if (!triton_type(type, &q.type, &q.elem_size))
    return fail(TRITONSERVER_ERROR_UNSUPPORTED, "%s: %s '%s' is %s, which Triton has no type for",
                path, kind, name, type);
  if (rank > MAX_RANK || (p->batch && rank < 1))
    return fail(TRITONSERVER_ERROR_UNSUPPORTED, "%s: %s '%s' has rank %d: %s", path, kind, name,
                rank, rank < 1 ? "a batched program's tensors need a batch dimension" : "too many");
  q.row_bytes = (uint64_t)q.elem_size;
  for (int d = 0; d < rank; d++) {
    q.dims[d] = dims[d];
    if (d > 0 || !p->batch)
      q.row_bytes *= (uint64_t)dims[d];
  }
  if (p->batch && q.dims[0] != p->batch)
    return fail(TRITONSERVER_ERROR_INVALID_ARG, "%s: %s '%s' has %lld rows, not the program's %d",
                path, kind, name, (long long)q.dims[0], p->batch);
  if (first) {
    *port = q;
    return NULL;
  }
  bool same = strcmp(q.name, port->name) == 0 && q.type == port->type && q.rank == port->rank &&
              q.row_bytes == port->row_bytes;
  for (int d = 1; d < rank && same; d++)
    same = q.dims[d] == port->dims[d];
  return same ? NULL
              : fail(TRITONSERVER_ERROR_INVALID_ARG,
                     "%s: %s %d ('%s') differs from the smaller programs' ('%s') beyond its batch",
                     path, kind, i, q.name, port->name);
}

static TRITONSERVER_Error *describe_program(Model *m, const Program *p, const char *path) {
  bool first = p == &m->programs[0];
  int nin = p->api.num_inputs(), nout = p->api.num_outputs();
  if (nin > MAX_PORTS || nout > MAX_PORTS)
    return fail(TRITONSERVER_ERROR_UNSUPPORTED, "%s: more than %d inputs or outputs", path,
                MAX_PORTS);
  if (!first && (nin != m->ninputs || nout != m->noutputs))
    return fail(TRITONSERVER_ERROR_INVALID_ARG,
                "%s has %d inputs and %d outputs, the smaller programs %d and %d", path, nin, nout,
                m->ninputs, m->noutputs);
  m->ninputs = nin;
  m->noutputs = nout;
  TRITONSERVER_Error *e = NULL;
  for (int i = 0; i < nin && !e; i++)
    e = describe_port(p, path, true, i, &m->inputs[i], first);
  for (int i = 0; i < nout && !e; i++)
    e = describe_port(p, path, false, i, &m->outputs[i], first);
  return e;
}

static bool exists(const char *path) { return access(path, R_OK) == 0; }

/* Loads the program for `batch` (0: libnet.so) from dir, if it is there. */
static TRITONSERVER_Error *load_program(Model *m, const char *dir, int batch, bool required) {
  char path[4096], weights[4096];
  if (batch)
    snprintf(path, sizeof path, "%s/libnet_b%d.so", dir, batch);
  else
    snprintf(path, sizeof path, "%s/libnet.so", dir);
  if (!exists(path))
    return required ? fail(TRITONSERVER_ERROR_NOT_FOUND, "model '%s': %s is missing", m->name, path)
                    : NULL;
  if (m->nprograms == MAX_PROGRAMS)
    return fail(TRITONSERVER_ERROR_UNSUPPORTED, "model '%s': more than %d programs", m->name,
                MAX_PROGRAMS);
  Program *p = &m->programs[m->nprograms++];
  p->batch = batch;
  /* A program whose weights equal the smallest's has no file of its own
     (opc compared them when it wrote the repository). */
  snprintf(weights, sizeof weights, "%.*s.weights", (int)strlen(path) - 3, path);
  if (!exists(weights) && m->nprograms > 1)
    p->weights = m->programs[0].weights ? strdup(m->programs[0].weights) : NULL;
  else
    p->weights = exists(weights) ? strdup(weights) : NULL;
  TRITONSERVER_Error *e = open_program(p, path);
  return e ? e : describe_program(m, p, path);
}

/* ------------------------------------------------------------ model */

/* max_batch_size from the model's configuration, as JSON. */
static TRITONSERVER_Error *read_max_batch(TRITONBACKEND_Model *model, int *max_batch) {
  TRITONSERVER_Message *config;
  TRITONSERVER_Error *e = TRITONBACKEND_ModelConfig(model, 1, &config);
  if (e)
    return e;
  const char *json;
  size_t size;
  e = TRITONSERVER_MessageSerializeToJson(config, &json, &size);
  if (!e) {
    char *text = strndup(json, size);
    const char *key = text ? strstr(text, "\"max_batch_size\":") : NULL;
    *max_batch = key ? atoi(key + strlen("\"max_batch_size\":")) : 0;
    free(text);
    if (*max_batch < 0 || *max_batch > 1 << 20)
      e = fail(TRITONSERVER_ERROR_INVALID_ARG, "max_batch_size %d is out of range", *max_batch);
  }
  TRITONSERVER_Error *d = TRITONSERVER_MessageDelete(config);
  if (d)
    TRITONSERVER_ErrorDelete(d);
  return e;
}

static void free_model(Model *m) {
  if (!m)
    return;
  for (int i = 0; i < m->nprograms; i++) {
    if (m->programs[i].lib)
      dlclose(m->programs[i].lib);
    free(m->programs[i].weights);
  }
  free(m->name);
  free(m);
}

static TRITONSERVER_Error *load_programs(Model *m, const char *dir) {
  if (m->max_batch == 0)
    return load_program(m, dir, 0, true);
  TRITONSERVER_Error *e = NULL;
  for (int b = 1; b < m->max_batch && !e; b++)
    e = load_program(m, dir, b, false);
  return e ? e : load_program(m, dir, m->max_batch, true);
}

TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  uint32_t major, minor;
  TRITONSERVER_Error *e = TRITONBACKEND_ApiVersion(&major, &minor);
  if (e)
    return e;
  if (major != TRITON_API_MAJOR)
    return fail(TRITONSERVER_ERROR_UNSUPPORTED,
                "opc backend: Triton's backend API is %u.%u; this backend needs %d.x", major,
                minor, TRITON_API_MAJOR);
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  const char *name, *location;
  uint64_t version;
  TRITONBACKEND_ArtifactType artifact;
  TRITONSERVER_Error *e = TRITONBACKEND_ModelName(model, &name);
  if (!e)
    e = TRITONBACKEND_ModelVersion(model, &version);
  if (!e)
    e = TRITONBACKEND_ModelRepository(model, &artifact, &location);
  if (e)
    return e;
  if (artifact != TRITONBACKEND_ARTIFACT_FILESYSTEM)
    return fail(TRITONSERVER_ERROR_UNSUPPORTED, "model '%s': the opc backend reads only files",
                name);
  Model *m = calloc(1, sizeof *m);
  if (!m || !(m->name = strdup(name))) {
    free(m);
    return fail(TRITONSERVER_ERROR_INTERNAL, "model '%s': out of memory", name);
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%llu", location, (unsigned long long)version);
  e = read_max_batch(model, &m->max_batch);
  if (!e)
    e = load_programs(m, dir);
  if (!e)
    e = TRITONBACKEND_ModelSetState(model, m);
  if (e)
    free_model(m);
  return e;
}

TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *m;
  TRITONSERVER_Error *e = TRITONBACKEND_ModelState(model, &m);
  if (!e)
    free_model(m);
  return e;
}

/* --------------------------------------------------------- instance */

static void free_instance(Instance *in) {
  if (!in)
    return;
  for (int p = 0; p < in->model->nprograms; p++)
    if (in->ctx[p])
      in->model->programs[p].api.destroy(in->ctx[p]);
  for (int i = 0; i < MAX_PORTS; i++) {
    free(in->in[i]);
    free(in->out[i]);
  }
  free(in);
}

/* KIND_GPU: the instance's device, for this thread. */
static TRITONSERVER_Error *bind_device(Instance *in) {
  if (in->device < 0)
    return NULL;
  const Program *p = &in->model->programs[0];
  if (!p->api.set_device)
    return fail(TRITONSERVER_ERROR_INVALID_ARG,
                "model '%s': a KIND_GPU instance needs a program built with --target cuda",
                in->model->name);
  int status = p->api.set_device(in->device);
  return status ? fail(TRITONSERVER_ERROR_INTERNAL, "model '%s': cudaSetDevice(%d) failed: %d",
                       in->model->name, in->device, status)
                : NULL;
}

/* The contexts, and buffers for the largest program's inputs and outputs. */
static TRITONSERVER_Error *make_contexts(Instance *in) {
  Model *m = in->model;
  for (int p = 0; p < m->nprograms; p++) {
    Program *prog = &m->programs[p];
    if (prog->api.create(&in->ctx[p], prog->weights) != 0) {
      TRITONSERVER_Error *e = fail(TRITONSERVER_ERROR_INTERNAL, "model '%s': creating %s: %s",
                                   m->name, prog->weights ? prog->weights : "the program",
                                   in->ctx[p] ? prog->api.error(in->ctx[p]) : "out of memory");
      return e;
    }
  }
  uint64_t rows = (uint64_t)(m->max_batch ? m->programs[m->nprograms - 1].batch : 1);
  for (int i = 0; i < m->ninputs; i++)
    if (!(in->in[i] = calloc(1, m->inputs[i].row_bytes * rows + 1)))
      return fail(TRITONSERVER_ERROR_INTERNAL, "model '%s': out of memory", m->name);
  for (int i = 0; i < m->noutputs; i++)
    if (!(in->out[i] = malloc(m->outputs[i].row_bytes * rows + 1)))
      return fail(TRITONSERVER_ERROR_INTERNAL, "model '%s': out of memory", m->name);
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  TRITONBACKEND_Model *model;
  void *m;
  TRITONSERVER_InstanceGroupKind kind;
  int32_t device;
  TRITONSERVER_Error *e = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (!e)
    e = TRITONBACKEND_ModelState(model, &m);
  if (!e)
    e = TRITONBACKEND_ModelInstanceKind(instance, &kind);
  if (!e)
    e = TRITONBACKEND_ModelInstanceDeviceId(instance, &device);
  if (e)
    return e;
  Instance *in = calloc(1, sizeof *in);
  if (!in)
    return fail(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  in->model = m;
  in->device = kind == TRITONSERVER_INSTANCEGROUPKIND_GPU ? device : -1;
  e = bind_device(in);
  if (!e)
    e = make_contexts(in);
  if (!e)
    e = TRITONBACKEND_ModelInstanceSetState(instance, in);
  if (e)
    free_instance(in);
  return e;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  void *in;
  TRITONSERVER_Error *e = TRITONBACKEND_ModelInstanceState(instance, &in);
  if (!e)
    free_instance(in);
  return e;
}

/* ---------------------------------------------------------- execute */

/* A request taken into a batch: its rows and its inputs. */
typedef struct Taken {
  TRITONBACKEND_Request *request;
  int rows;
  TRITONBACKEND_Input *inputs[MAX_PORTS];
} Taken;

static const char *type_name(TRITONSERVER_DataType t) {
  static const char *const names[] = {"INVALID", "BOOL", "UINT8", "UINT16", "UINT32",
                                      "UINT64",  "INT8", "INT16", "INT32",  "INT64",
                                      "FP16",    "FP32", "FP64",  "BYTES",  "BF16"};
  return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

static void format_shape(char *s, size_t size, const int64_t *dims, int rank) {
  size_t n = (size_t)snprintf(s, size, "[");
  for (int d = 0; d < rank && n < size; d++)
    n += (size_t)snprintf(s + n, size - n, "%s%lld", d ? ", " : "", (long long)dims[d]);
  if (n < size)
    snprintf(s + n, size - n, "]");
}

/* One input of a request against the program's: type, shape, size. */
static TRITONSERVER_Error *check_input(const Model *m, const Port *port, TRITONBACKEND_Input *input,
                                       int *rows) {
  TRITONSERVER_DataType type;
  const int64_t *shape;
  uint32_t rank;
  uint64_t bytes;
  TRITONSERVER_Error *e =
      TRITONBACKEND_InputProperties(input, NULL, &type, &shape, &rank, &bytes, NULL);
  if (e)
    return e;
  bool ok = type == port->type && (int)rank == port->rank;
  for (int d = m->max_batch ? 1 : 0; d < port->rank && ok; d++)
    ok = shape[d] == port->dims[d];
  int64_t r = m->max_batch && rank > 0 ? shape[0] : 1;
  ok = ok && r >= 1 && r <= m->max_batch + (m->max_batch == 0) &&
       bytes == port->row_bytes * (uint64_t)r;
  if (ok) {
    *rows = (int)r;
    return NULL;
  }
  char want[512], got[512];
  format_shape(want, sizeof want, port->dims, port->rank);
  if (m->max_batch)
    memcpy(want, "[N", 2); /* the batch, 1 to max_batch_size */
  format_shape(got, sizeof got, shape, (int)rank);
  return fail(TRITONSERVER_ERROR_INVALID_ARG,
              "model '%s': input '%s' must be %s %s%s, not %s %s (%llu bytes)", m->name,
              port->name, type_name(port->type), want, m->max_batch ? " with N at most max_batch_size" : "",
              type_name(type), got, (unsigned long long)bytes);
}

/* A request's inputs: exactly the program's, each checked. */
static TRITONSERVER_Error *take_request(const Model *m, Taken *t) {
  uint32_t count;
  TRITONSERVER_Error *e = TRITONBACKEND_RequestInputCount(t->request, &count);
  if (e)
    return e;
  for (uint32_t i = 0; i < count; i++) {
    const char *name;
    if ((e = TRITONBACKEND_RequestInputName(t->request, i, &name)))
      return e;
    int k = 0;
    while (k < m->ninputs && strcmp(m->inputs[k].name, name) != 0)
      k++;
    if (k == m->ninputs)
      return fail(TRITONSERVER_ERROR_INVALID_ARG, "model '%s' has no input '%s'", m->name, name);
  }
  t->rows = 0;
  for (int k = 0; k < m->ninputs; k++) {
    if ((e = TRITONBACKEND_RequestInput(t->request, m->inputs[k].name, &t->inputs[k]))) {
      TRITONSERVER_ErrorDelete(e);
      return fail(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': input '%s' is missing", m->name,
                  m->inputs[k].name);
    }
    int rows;
    if ((e = check_input(m, &m->inputs[k], t->inputs[k], &rows)))
      return e;
    if (k > 0 && rows != t->rows)
      return fail(TRITONSERVER_ERROR_INVALID_ARG,
                  "model '%s': input '%s' has %d rows, '%s' %d: one batch size per request",
                  m->name, m->inputs[k].name, rows, m->inputs[0].name, t->rows);
    t->rows = rows;
  }
  return NULL;
}

static void answer_error(TRITONBACKEND_Request *request, TRITONSERVER_Error *error) {
  TRITONBACKEND_Response *response;
  TRITONSERVER_Error *e = TRITONBACKEND_ResponseNew(&response, request);
  if (!e)
    e = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error);
  log_error(e, "sending an error response");
}

/* Copies input k of a request, all its buffers, to dst. */
static TRITONSERVER_Error *copy_input(const Model *m, TRITONBACKEND_Input *input, char *dst) {
  uint32_t buffers;
  TRITONSERVER_Error *e =
      TRITONBACKEND_InputProperties(input, NULL, NULL, NULL, NULL, NULL, &buffers);
  for (uint32_t b = 0; b < buffers && !e; b++) {
    const void *src;
    uint64_t size;
    TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
    int64_t type_id = 0;
    e = TRITONBACKEND_InputBuffer(input, b, &src, &size, &type, &type_id);
    if (!e && type == TRITONSERVER_MEMORY_GPU)
      e = fail(TRITONSERVER_ERROR_UNSUPPORTED, "model '%s': an input in GPU memory", m->name);
    if (!e) {
      memcpy(dst, src, size);
      dst += size;
    }
  }
  return e;
}

/* The one buffer of a request's input, where it may be run from in place. */
static const void *input_in_place(TRITONBACKEND_Input *input) {
  uint32_t buffers;
  const void *src;
  uint64_t size;
  TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
  int64_t type_id = 0;
  TRITONSERVER_Error *e =
      TRITONBACKEND_InputProperties(input, NULL, NULL, NULL, NULL, NULL, &buffers);
  if (!e && buffers == 1)
    e = TRITONBACKEND_InputBuffer(input, 0, &src, &size, &type, &type_id);
  if (e)
    TRITONSERVER_ErrorDelete(e);
  return !e && buffers == 1 && type != TRITONSERVER_MEMORY_GPU ? src : NULL;
}

/* Whether the request asked for output `name` (no list: every output). */
static bool wants_output(TRITONBACKEND_Request *request, const char *name) {
  uint32_t count;
  if (TRITONBACKEND_RequestOutputCount(request, &count) || count == 0)
    return true;
  for (uint32_t i = 0; i < count; i++) {
    const char *o;
    if (!TRITONBACKEND_RequestOutputName(request, i, &o) && strcmp(o, name) == 0)
      return true;
  }
  return false;
}

/* The response to one request: its rows of each output, from `first`. */
static TRITONSERVER_Error *respond(Instance *in, const Program *p, void *ctx, Taken *t,
                                   int first) {
  const Model *m = in->model;
  TRITONBACKEND_Response *response;
  TRITONSERVER_Error *e = TRITONBACKEND_ResponseNew(&response, t->request);
  if (e)
    return e;
  for (int k = 0; k < m->noutputs && !e; k++) {
    const Port *port = &m->outputs[k];
    if (!wants_output(t->request, port->name))
      continue;
    long long run_dims[MAX_RANK];
    int64_t shape[MAX_RANK];
    p->api.output_shape(ctx, k, run_dims);
    uint64_t bytes = (uint64_t)port->elem_size;
    for (int d = 0; d < port->rank; d++) {
      shape[d] = d == 0 && m->max_batch ? t->rows : run_dims[d];
      bytes *= (uint64_t)shape[d];
      if (m->max_batch && d > 0 && run_dims[d] != port->dims[d])
        e = fail(TRITONSERVER_ERROR_UNSUPPORTED,
                 "model '%s': output '%s' is sized by the data, which batching cannot split",
                 m->name, port->name);
    }
    TRITONBACKEND_Output *output;
    void *dst;
    TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
    int64_t type_id = 0;
    if (!e)
      e = TRITONBACKEND_ResponseOutput(response, &output, port->name, port->type, shape,
                                       (uint32_t)port->rank);
    if (!e)
      e = TRITONBACKEND_OutputBuffer(output, &dst, bytes, &type, &type_id);
    if (!e && type == TRITONSERVER_MEMORY_GPU)
      e = fail(TRITONSERVER_ERROR_UNSUPPORTED, "model '%s': an output in GPU memory", m->name);
    if (!e)
      memcpy(dst, (char *)in->out[k] + (uint64_t)first * port->row_bytes, bytes);
  }
  TRITONSERVER_Error *s = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, e);
  log_error(s, "sending a response");
  return e;
}

/* The smallest program that holds `rows` (unbatched: the one). */
static int choose_program(const Model *m, int rows) {
  int p = 0;
  while (m->max_batch && p + 1 < m->nprograms && m->programs[p].batch < rows)
    p++;
  return p;
}

/* Runs requests t[0..n) together, `rows` in all, and answers each. */
static void run_batch(Instance *in, TRITONBACKEND_ModelInstance *instance, Taken *t, int n,
                      int rows, uint64_t exec_start) {
  Model *m = in->model;
  int p = choose_program(m, rows);
  Program *prog = &m->programs[p];
  int capacity = m->max_batch ? prog->batch : 1;
  const void *ins[MAX_PORTS];
  TRITONSERVER_Error *e = NULL;
  for (int k = 0; k < m->ninputs && !e; k++) {
    const Port *port = &m->inputs[k];
    ins[k] = n == 1 && rows == capacity ? input_in_place(t[0].inputs[k]) : NULL;
    if (ins[k])
      continue;
    char *dst = in->in[k];
    for (int r = 0; r < n && !e; r++) {
      e = copy_input(m, t[r].inputs[k], dst);
      dst += port->row_bytes * (uint64_t)t[r].rows;
    }
    /* Padding rows: zeros, whose outputs nobody reads. */
    memset(dst, 0, port->row_bytes * (uint64_t)(capacity - rows));
    ins[k] = in->in[k];
  }
  uint64_t compute_start = now_ns();
  if (!e && prog->api.run(in->ctx[p], ins, in->out) != 0)
    e = fail(TRITONSERVER_ERROR_INTERNAL, "model '%s': %s", m->name,
             prog->api.error(in->ctx[p]));
  uint64_t compute_end = now_ns();
  int first = 0;
  for (int r = 0; r < n; r++) {
    bool ok;
    if (e) {
      answer_error(t[r].request, e);
      ok = false;
    } else {
      TRITONSERVER_Error *re = respond(in, prog, in->ctx[p], &t[r], first);
      ok = re == NULL;
      if (re)
        TRITONSERVER_ErrorDelete(re);
    }
    first += t[r].rows;
    uint64_t end = now_ns();
    log_error(TRITONBACKEND_ModelInstanceReportStatistics(instance, t[r].request, ok, exec_start,
                                                          compute_start, compute_end, end),
              "reporting statistics");
    log_error(TRITONBACKEND_RequestRelease(t[r].request, TRITONSERVER_REQUEST_RELEASE_ALL),
              "releasing a request");
  }
  if (e)
    TRITONSERVER_ErrorDelete(e);
  else
    log_error(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, (uint64_t)rows, exec_start,
                                                               compute_start, compute_end, now_ns()),
              "reporting statistics");
}

/* Answers every request: the bad ones with their error, the rest in
   batches of at most the largest program's rows (one each unbatched). */
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                       TRITONBACKEND_Request **requests,
                                                       uint32_t request_count) {
  uint64_t exec_start = now_ns();
  void *state;
  TRITONSERVER_Error *e = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (e)
    return e;
  Instance *in = state;
  Model *m = in->model;
  Taken *t = calloc(request_count ? request_count : 1, sizeof *t);
  if (!t)
    return fail(TRITONSERVER_ERROR_INTERNAL, "model '%s': out of memory", m->name);
  TRITONSERVER_Error *device = bind_device(in);
  int n = 0;
  for (uint32_t r = 0; r < request_count; r++) {
    t[n].request = requests[r];
    e = device ? fail(TRITONSERVER_ERROR_INTERNAL, "%s", TRITONSERVER_ErrorMessage(device))
               : take_request(m, &t[n]);
    if (e) {
      answer_error(requests[r], e);
      TRITONSERVER_ErrorDelete(e);
      log_error(TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL),
                "releasing a request");
    } else {
      n++;
    }
  }
  if (device)
    TRITONSERVER_ErrorDelete(device);
  int limit = m->max_batch ? m->programs[m->nprograms - 1].batch : 1;
  for (int start = 0; start < n;) {
    int end = start, rows = 0;
    while (end < n && (end == start || rows + t[end].rows <= limit))
      rows += t[end++].rows;
    run_batch(in, instance, t + start, end - start, rows, exec_start);
    start = end;
  }
  free(t);
  return NULL;
}
