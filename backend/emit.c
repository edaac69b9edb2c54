/*
 * emit.c - printing: indentation, C names, buffers, checked calls and the
 * small helpers every operator emitter uses. program.c assembles the file.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* ------------------------------------------------------------- printing */

/* Lines longer than this are broken after a comma, outside literals. */
enum { WRAP_COLUMN = 100 };

/*
 * Where to break `text` so that the piece from `start` fits in `room`
 * columns: just past a comma outside literals and inside brackets,
 * preferring the outermost level unless that leaves a very short line.
 * 0 if there is no such comma.
 */
static size_t wrap_point(const char *text, size_t start, size_t room) {
  size_t best = 0, best_outer = 0;
  int depth = 0, outer = 1 << 30;
  char quote = 0;
  for (size_t i = 0; text[i] && i < start + room; i++) {
    char ch = text[i];
    if (quote) {
      if (ch == '\\' && text[i + 1])
        i++;
      else if (ch == quote)
        quote = 0;
    } else if (ch == '"' || ch == '\'') {
      quote = ch;
    } else if (ch == '(' || ch == '{' || ch == '[') {
      depth++;
    } else if (ch == ')' || ch == '}' || ch == ']') {
      depth--;
    } else if (ch == ',' && depth > 0 && text[i + 1] == ' ' && i >= start) {
      best = i + 1;
      if (depth <= outer) {
        outer = depth;
        best_outer = i + 1;
      }
    }
  }
  return best_outer > start + room / 2 ? best_outer : best;
}

static void put_line(FILE *f, int indent, const char *text) {
  if (!*text) {
    fputc('\n', f);
    return;
  }
  int width = 2 * indent;
  size_t start = 0, len = strlen(text);
  /* Preprocessor lines and comments are left as they are. */
  bool wrappable = text[0] != '#' && text[0] != '/' && text[0] != '*';
  while (wrappable && len - start + (size_t)width > WRAP_COLUMN) {
    size_t room = WRAP_COLUMN > width + 20 ? (size_t)(WRAP_COLUMN - width) : 20;
    size_t cut = wrap_point(text, start, room);
    if (cut == 0)
      break;
    fprintf(f, "%*s%.*s\n", width, "", (int)(cut - start), text + start);
    start = cut;
    while (text[start] == ' ')
      start++;
    if (width == 2 * indent)
      width += 4;
  }
  fprintf(f, "%*s%s\n", width, "", text + start);
}

static void vemit(Emitter *e, FILE *f, int indent, const char *fmt, va_list ap) {
  char *text = NULL;
  if (vasprintf(&text, fmt, ap) < 0) {
    e->failed = true;
    return;
  }
  if (e->cpu_code) { /* the host CPU's code calls the CPU runtime's copy */
    char *cpu = cpu_line(text);
    free(text);
    if (!(text = cpu)) {
      e->failed = true;
      return;
    }
  }
  /* Several lines at once keep their own relative layout. */
  char *line = text;
  for (;;) {
    char *nl = strchr(line, '\n');
    if (nl)
      *nl = 0;
    put_line(f, indent, line);
    if (!nl)
      break;
    line = nl + 1;
  }
  free(text);
}

Uses *used(Emitter *e) { return e->cpu_code ? &e->st->cpu : &e->st->gpu; }

void emit(Emitter *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vemit(e, e->f, e->indent, fmt, ap);
  va_end(ap);
}

void emit_open(Emitter *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vemit(e, e->f, e->indent, fmt, ap);
  va_end(ap);
  e->indent++;
}

void emit_close(Emitter *e, const char *fmt, ...) {
  if (e->indent > 0)
    e->indent--;
  va_list ap;
  va_start(ap, fmt);
  vemit(e, e->f, e->indent, fmt, ap);
  va_end(ap);
}

void emit_blank(Emitter *e) { fputc('\n', e->f); }

/* A node's fields in the context struct follow a comment naming it. */
void emit_fields_header(Emitter *e) {
  EmitState *st = e->st;
  if (!e->node || st->fields_node == e->node)
    return;
  st->fields_node = e->node;
  fprintf(st->sec[SEC_FIELDS], "  /* %s (%s) */\n", comment_text(e, e->node->name),
          op_name(e->node->op));
}

void emit_to(Emitter *e, Section s, const char *fmt, ...) {
  if (s == SEC_FIELDS)
    emit_fields_header(e);
  va_list ap;
  va_start(ap, fmt);
  vemit(e, e->st->sec[s], 1, fmt, ap);
  va_end(ap);
}

char *emit_str(Emitter *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *text = NULL;
  if (vasprintf(&text, fmt, ap) < 0)
    text = NULL;
  va_end(ap);
  char *s = arena_strdup(e->g->arena, text ? text : "");
  free(text);
  return s;
}

const char *emit_float(Emitter *e, float v) {
  if (isnan(v))
    return "NAN";
  if (isinf(v))
    return v > 0 ? "INFINITY" : "-INFINITY";
  if (v == (float)(int64_t)v && fabsf(v) < 1e9f)
    return emit_str(e, "%.1ff", (double)v);
  /* %.9g always reads back to the same float. */
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%.9g", (double)v);
  if (!strpbrk(tmp, ".e"))
    strcat(tmp, ".0");
  return emit_str(e, "%sf", tmp);
}

const char *emit_scalar(Emitter *e, float v) {
  if (v == 1.0f) {
    e->st->gpu.one = true; /* plain floats: the CPU's code shares them */
    return "&one";
  }
  if (v == 0.0f && !signbit(v)) {
    e->st->gpu.zero = true;
    return "&zero";
  }
  return emit_str(e, "&(const float){%s}", emit_float(e, v));
}

/* The contents of a C string literal for `s`. */
const char *emit_format_text(Emitter *e, const char *s) {
  char *out = arena_alloc(e->g->arena, strlen(s) * 2 + 1), *p = out;
  for (; *s; s++) {
    if (*s == '%')
      *p++ = '%';
    *p++ = *s;
  }
  *p = 0;
  return out;
}

const char *emit_c_string(Emitter *e, const char *s) {
  size_t len = strlen(s);
  char *out = arena_alloc(e->g->arena, len * 4 + 1);
  char *p = out;
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') {
      *p++ = '\\';
      *p++ = (char)ch;
    } else if (ch == '\n') {
      *p++ = '\\';
      *p++ = 'n';
    } else if (ch == '\t') {
      *p++ = '\\';
      *p++ = 't';
    } else if (ch < 32 || ch == '?' || ch >= 127) {
      /* '?' avoids trigraphs; octal escapes never swallow the next char. */
      p += sprintf(p, "\\%03o", ch);
    } else {
      *p++ = (char)ch;
    }
  }
  *p = 0;
  return out;
}

/* `s` with any comment delimiter inside it broken up. */
const char *comment_text(Emitter *e, const char *s) {
  if (!strstr(s, "*/") && !strstr(s, "/*"))
    return s;
  char *out = arena_strdup(e->g->arena, s);
  for (char *p = out; p[0] && p[1]; p++)
    if ((p[0] == '*' && p[1] == '/') || (p[0] == '/' && p[1] == '*'))
      p[1] = '_';
  return out;
}

/* ----------------------------------------------------------------- names */

static const char *const reserved_names[] = {
    /* C keywords and names net.c uses itself */
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "_Bool", "_Complex", "_Imaginary",
    "_Alignas", "_Alignof", "_Atomic", "_Generic", "_Noreturn", "_Static_assert",
    "_Thread_local", "bool", "true", "false", "NULL", "c", "a", "one", "zero", "stream", "event",
    "fork", "join", "cudnn", "cublas", "cublas_workspace", "workspace", "workspace_bytes",
    "arena", "weights", "node", "profile", "kernel", "output_dims", "staging", "done", "trace",
    "gpu", "gpu_arena", "gpu_weights", "cpu_arena", "cpu_error", "cpu_failed", "cpu_node",
    "cpu_stream", "cpu_weights", "io", "active",
    "graph", "error", "module", "fail", "main", "errno", "stdin", "stdout", "stderr",
};

static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static bool name_taken(const NameSet *set, const char *name) {
  if (!set->cap)
    return false;
  for (uint64_t i = name_hash(name) & (uint64_t)(set->cap - 1); set->slots[i];
       i = (i + 1) & (uint64_t)(set->cap - 1))
    if (strcmp(set->slots[i], name) == 0)
      return true;
  return false;
}

static void name_add(Emitter *e, NameSet *set, const char *name) {
  if ((set->count + 1) * 2 > set->cap) {
    NameSet old = *set;
    set->cap = old.cap ? old.cap * 2 : 512;
    set->slots = arena_alloc(e->g->arena, sizeof(char *) * (size_t)set->cap);
    set->count = 0;
    for (int i = 0; i < old.cap; i++)
      if (old.slots[i])
        name_add(e, set, old.slots[i]);
  }
  uint64_t i = name_hash(name) & (uint64_t)(set->cap - 1);
  while (set->slots[i])
    i = (i + 1) & (uint64_t)(set->cap - 1);
  set->slots[i] = name;
  set->count++;
}

void emit_reserve_names(Emitter *e) {
  for (size_t i = 0; i < sizeof reserved_names / sizeof reserved_names[0]; i++)
    name_add(e, &e->st->fields, reserved_names[i]);
}

/* `base` as a C identifier not yet in `set`, then added to it. */
static const char *unique_in(Emitter *e, NameSet *set, const char *base) {
  size_t len = strlen(base);
  char *room = arena_alloc(e->g->arena, len + 32);
  char *s = room + 1, *p = s; /* room[0]: for a 't' in front */
  for (const char *q = base; *q; q++) {
    unsigned char ch = (unsigned char)*q;
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    /* Runs of separators collapse into one underscore, never a leading one. */
    if (ok)
      *p++ = (char)ch;
    else if (p > s && p[-1] != '_')
      *p++ = '_';
  }
  while (p > s + 1 && p[-1] == '_')
    p--;
  *p = 0;
  /* Nothing left, or a digit first once leading separators are gone
     ("_1x", a tensor of the serving model "_1x"): a 't' makes it a name. */
  if (p == s || (s[0] >= '0' && s[0] <= '9'))
    *--s = 't';
  /* The CPU's code gives every CUDA-like name, and the names of net.c's
     helpers, a prefix (cpu_line): no name of ours may look like one. */
  char *cpu = emit_has_cpu(e) ? cpu_line(s) : NULL;
  if (cpu && strcmp(cpu, s) != 0) {
    memmove(s + 2, s, strlen(s) + 1);
    memcpy(s, "t_", 2);
  }
  free(cpu);
  if (name_taken(set, s)) {
    size_t n = strlen(s);
    for (int k = 2;; k++) {
      sprintf(s + n, "_%d", k);
      if (!name_taken(set, s))
        break;
    }
  }
  name_add(e, set, s);
  return s;
}

const char *emit_unique(Emitter *e, const char *base) { return unique_in(e, &e->st->fields, base); }

/* Node ids only prefix field names (which emit_unique keeps apart), so they
   need to differ from each other, not from tensor names. */
const char *node_id(Emitter *e, const Node *n) {
  if (n->id < 0 || n->id >= e->g->nnodes || e->g->nodes[n->id] != n)
    return unique_in(e, &e->st->node_ids, n->name);
  if (!e->node_cname[n->id])
    e->node_cname[n->id] = unique_in(e, &e->st->node_ids, n->name);
  return e->node_cname[n->id];
}

/* --------------------------------------------------------------- buffers */

/* Float data of a constant tensor; integer constants are converted. */
const char *dtype_c_type(DType t) {
  switch (t) {
  case DT_FLOAT: return "float";
  case DT_DOUBLE: return "double";
  case DT_FLOAT16: case DT_BFLOAT16: return "uint16_t";
  case DT_INT64: return "int64_t";
  case DT_INT32: return "int32_t";
  case DT_INT16: return "int16_t";
  case DT_INT8: return "int8_t";
  case DT_UINT64: return "uint64_t";
  case DT_UINT32: return "uint32_t";
  case DT_UINT16: return "uint16_t";
  case DT_UINT8: case DT_BOOL: return "uint8_t";
  default: return NULL;
  }
}

/* Gather's and GatherElements' kernels read their indices as floats: a
   constant they index with is stored converted, not in its own type. */
/* A run-time tensor needs a C type; the ir checks that, so a miss here is
   reported rather than trusted. */
static bool check_storage_type(Emitter *e, const Tensor *t) {
  if (e->failed) /* reported once */
    return false;
  if (dtype_c_type(t->dtype))
    return true;
  ir_error(e->g, e->node, "tensor '%s' is %s, which net.c has no type for", t->name,
           dtype_onnx_name(t->dtype));
  e->failed = true;
  return false;
}

/* Binds a typed pointer `name` into the arena at the tensor's offset. */
static void bind_arena(Emitter *e, const char *name, const Tensor *t) {
  FILE *bind = e->st->sec[SEC_BIND];
  const char *arena = device_arena(e, tensor_device(e->g, t));
  if (t->dtype == DT_FLOAT)
    fprintf(bind, "  c->%s = %s + %lld;\n", name, arena, (long long)(t->offset / 4));
  else
    fprintf(bind, "  c->%s = (%s *)((unsigned char *)%s + %lld);\n", name,
            dtype_c_type(t->dtype), arena, (long long)t->offset);
}

static const char *tensor_field(Emitter *e, const Tensor *t);

const char *live_dims(Emitter *e, const Tensor *t) {
  bool known = t->id >= 0 && t->id < e->g->ntensors && e->g->tensors[t->id] == t;
  if (known && e->live_cname[t->id]) /* one field a tensor, however many read it */
    return e->live_cname[t->id];
  const char *name = emit_unique(e, emit_str(e, "%s_dims", tensor_field(e, t)));
  emit_to(e, SEC_BUFFERS, "long long *%s; /* the dims of %s in this run */", name,
          emit_c_string(e, t->name));
  fprintf(e->st->sec[SEC_BIND], "  c->%s = (long long *)((unsigned char *)%s + %lld);\n", name,
          device_arena(e, tensor_device(e->g, t)), (long long)t->live_offset);
  const char *expr = emit_str(e, "c->%s", name);
  if (known)
    e->live_cname[t->id] = expr;
  return expr;
}

static const char **tensor_slot(Emitter *e, const Tensor *t) {
  if (t->id >= 0 && t->id < e->g->ntensors && e->g->tensors[t->id] == t)
    return &e->tensor_cname[t->id];
  return NULL;
}

/* The field name of a tensor's buffer: tensors are named before anything
   else, so that they keep their model names. */
static const char *tensor_field(Emitter *e, const Tensor *t) {
  if (t->id >= 0 && t->id < e->g->ntensors && e->g->tensors[t->id] == t) {
    if (!e->st->tensor_field[t->id])
      e->st->tensor_field[t->id] = emit_unique(e, t->name);
    return e->st->tensor_field[t->id];
  }
  return emit_unique(e, t->name);
}

void emit_name_tensors(Emitter *e) {
  Graph *g = e->g;
  e->st->tensor_field = arena_alloc(g->arena, sizeof(char *) * (size_t)(g->ntensors + 1));
  for (int i = 0; i < g->ninputs; i++)
    tensor_field(e, g->inputs[i]);
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead)
      continue;
    for (int k = 0; k < n->nin; k++)
      if (n->in[k])
        tensor_field(e, n->in[k]);
    for (int k = 0; k < n->nout; k++)
      if (n->out[k])
        tensor_field(e, n->out[k]);
  }
}

/* A constant's values in its storage order: the IR keeps them in ONNX's
   order, while a channels-last filter (choose-layout) is stored K, R, S, C. */
static const void *in_storage_order(Emitter *e, const Tensor *t, const void *data) {
  if (buffer_is_contiguous(t))
    return data;
  size_t size = dtype_is_float(t->dtype) ? sizeof(float) : sizeof(int64_t);
  int64_t count = tensor_numel(t);
  unsigned char *to = arena_alloc(e->g->arena, size * (size_t)count);
  int64_t at[IR_MAX_RANK] = {0}, offset = 0;
  for (int64_t i = 0; i < count; i++) {
    memcpy(to + (size_t)offset * size, (const unsigned char *)data + (size_t)i * size, size);
    for (int d = t->rank - 1; d >= 0; d--) { /* the next index in ONNX's order */
      offset += t->strides[d];
      if (++at[d] < t->dims[d])
        break;
      offset -= at[d] * t->strides[d];
      at[d] = 0;
    }
  }
  return to;
}

const char *buf(Emitter *e, const Tensor *t) {
  const char **slot = tensor_slot(e, t);
  if (slot && *slot)
    return *slot;
  const char *expr;
  if (tensor_is_const(t) && !t->alias_of) {
    const void *data = dtype_is_float(t->dtype) ? (const void *)t->f32 : (const void *)t->i64;
    if (!dtype_c_type(t->dtype) || !data) {
      ir_error(e->g, e->node, "constant '%s' is %s, which net.c cannot store", t->name,
               dtype_onnx_name(t->dtype));
      e->failed = true;
      return "NULL";
    }
    expr = weights_add_typed(e, t->name, t->dtype, in_storage_order(e, t, data), tensor_numel(t));
  } else {
    /* Which types an operator may compute in is checked per node
       (check_node_types); here every type has its own C pointer type. */
    if (!check_storage_type(e, t))
      return "NULL";
    const char *name = tensor_field(e, t);
    const char *type = dtype_c_type(t->dtype);
    emit_to(e, SEC_BUFFERS, "%s *%s;", type, name);
    if (t->alias_of) {
      const char *base = buf(e, t->alias_of);
      if (t->alias_of->dtype != t->dtype) /* a view never changes the type; be safe */
        base = emit_str(e, "(%s *)%s", type, base);
      if (t->alias_offset)
        fprintf(e->st->sec[SEC_BIND], "  c->%s = %s + %lld;\n", name, base,
                (long long)t->alias_offset);
      else
        fprintf(e->st->sec[SEC_BIND], "  c->%s = %s;\n", name, base);
    } else {
      bind_arena(e, name, t);
    }
    expr = emit_str(e, "c->%s", name);
  }
  if (slot)
    *slot = expr;
  return expr;
}

/* ------------------------------------------------------------ the weights */

/* The model whose weights file holds a constant of a serving program: that
   of the node being printed, else that of the output it is. */
static int weight_model(Emitter *e, const char *name) {
  const ServeInfo *s = e->g->serve;
  if (!s)
    return 0;
  if (e->node && e->node->instance >= 0)
    return s->instance_model[e->node->instance];
  for (int i = 0; i < s->ninstances; i++) {
    const ServedModel *m = &s->models[s->instance_model[i]];
    for (int k = 0; k < m->noutputs; k++)
      if (strcmp(e->g->outputs[s->first_output[i] + k]->name, name) == 0)
        return s->instance_model[i];
  }
  return 0;
}

const char *weights_add_typed(Emitter *e, const char *name, DType dtype, const void *data,
                              int64_t count) {
  EmitState *st = e->st;
  if (st->nweights == st->capweights) {
    st->capweights = st->capweights ? st->capweights * 2 : 64;
    Weight *grown = arena_alloc(e->g->arena, sizeof(Weight) * (size_t)st->capweights);
    if (st->nweights)
      memcpy(grown, st->weights, sizeof(Weight) * (size_t)st->nweights);
    st->weights = grown;
  }
  Weight *w = &st->weights[st->nweights++];
  const Tensor *t = graph_find_tensor(e->g, name);
  w->cname = t && t->name == name ? tensor_field(e, t) : emit_unique(e, name);
  w->dtype = dtype;
  w->data = data;
  w->count = count;
  w->model = weight_model(e, name);
  /* Every array on a 64-byte boundary. */
  int64_t padded = (count * (int64_t)dtype_size(dtype) + 63) / 64 * 64;
  w->offset = e->g->serve ? st->model_weight_bytes[w->model] : st->weight_bytes;
  st->weight_bytes += padded;
  const char *base = device_weights(e);
  if (e->g->serve) {
    st->model_weight_bytes[w->model] += padded;
    st->model_nweights[w->model]++;
    base = emit_str(e, "c->weights[%d]", w->model);
  }
  emit_to(e, SEC_CONSTS, "%s *%s;", dtype_c_type(dtype), w->cname);
  if (dtype == DT_FLOAT)
    fprintf(st->sec[SEC_BIND], "  c->%s = %s + %lld;\n", w->cname, base, (long long)w->offset / 4);
  else
    fprintf(st->sec[SEC_BIND], "  c->%s = (%s *)((unsigned char *)%s + %lld);\n", w->cname,
            dtype_c_type(dtype), base, (long long)w->offset);
  return emit_str(e, "c->%s", w->cname);
}

const char *weights_add(Emitter *e, const char *name, const float *data, int64_t count) {
  return weights_add_typed(e, name, DT_FLOAT, data, count);
}

/* --------------------------------------------------------- checked calls */

const char *const lib_check_helper[LIB_COUNT] = {
    [LIB_CUDA] = "cuda_ok", [LIB_CUDNN] = "cudnn_ok", [LIB_CUBLAS] = "cublas_ok",
    [LIB_DRIVER] = "cu_ok", [LIB_NVRTC] = "nvrtc_ok",
};

const char *emit_fail(Emitter *e) {
  return e->fail ? e->fail : "return -1";
}

/* The formatted text, malloc'ed; NULL (and the emitter failed) when out of
   memory. */
static char *vformat(Emitter *e, const char *fmt, va_list ap) {
  char *text = NULL;
  if (vasprintf(&text, fmt, ap) < 0) {
    e->failed = true;
    return NULL;
  }
  return text;
}

/* What CUDA refuses of a call in a conditional node's body (kernels,
   memsets and device copies only), or NULL. */
static const char *refused_in_body(Lib lib, const char *call) {
  static const char *const calls[][2] = {
      {"cudaEventRecord", "records an event"},
      {"cudaStreamWaitEvent", "waits on an event"},
      {"cudaLaunchHostFunc", "runs a host function"},
      {"cudaStreamSynchronize", "synchronises with the host"},
      {"cudaDeviceSynchronize", "synchronises with the host"},
  };
  if (lib == LIB_CUDNN)
    return "calls cuDNN";
  if (lib == LIB_CUBLAS)
    return "calls cuBLAS";
  size_t name = strcspn(call, "( ");
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
    if (strlen(calls[i][0]) == name && strncmp(call, calls[i][0], name) == 0)
      return calls[i][1];
  /* A copy's kind is its last word but the stream. */
  if (strstr(call, "cudaMemcpyDeviceToHost") || strstr(call, "cudaMemcpyHostToDevice"))
    return "copies between the host and the device";
  return NULL;
}

void emit_call(Emitter *e, Lib lib, const Node *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *call = vformat(e, fmt, ap);
  va_end(ap);
  if (!call)
    return;
  /* The message names the function; c->node, set where the node's code
     starts, names the node. */
  (void)n;
  if (e->kernels_only && !e->refused_in_body)
    e->refused_in_body = refused_in_body(lib, call);
  used(e)->lib[lib] = true;
  emit_fail_if(e, "!%s(c, %s, \"%.*s\")", lib_check_helper[lib], call, (int)strcspn(call, "( "),
               call);
  free(call);
}

/* "if (COND) {", the failure action, "}". Bodies are braced: for every
   unbraced body gcc's -Wmisleading-indentation reads source lines again, at
   a cost that grows faster than the file (7 of NASNet-A's 10 s at -O0). */
void emit_fail_if(Emitter *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *cond = vformat(e, fmt, ap);
  va_end(ap);
  if (!cond)
    return;
  emit_open(e, "if (%s) {", cond);
  emit(e, "%s;", emit_fail(e));
  emit_close(e, "}");
  free(cond);
}

const char *emit_node_label(Emitter *e, const Node *n) {
  return emit_c_string(e, emit_str(e, "node '%s' (%s)", n->name, op_name(n->op)));
}

/* ------------------------------------------------- streams and handles */

static int stream_of(const Emitter *e, const Node *n) { return node_sched(e->g, n)->stream; }

/* In the host CPU's code, its own stream, handles and workspace. */
const char *node_stream(Emitter *e, const Node *n) {
  if (e->stream)
    return e->stream;
  return e->cpu_code ? "c->cpu_stream" : emit_str(e, "c->stream[%d]", stream_of(e, n));
}

const char *node_cudnn(Emitter *e, const Node *n) {
  used(e)->cudnn = true;
  return e->cpu_code ? "c->cpu_cudnn" : emit_str(e, "c->cudnn[%d]", stream_of(e, n));
}

const char *node_cublas(Emitter *e, const Node *n) {
  used(e)->cublas = true;
  return e->cpu_code ? "c->cpu_cublas" : emit_str(e, "c->cublas[%d]", stream_of(e, n));
}

/* Workspace of the node's stream, sized in create() by the setup code. */
const char *node_workspace(Emitter *e, const Node *n) {
  used(e)->workspace = true;
  return e->cpu_code ? "c->cpu_workspace" : emit_str(e, "c->workspace[%d]", stream_of(e, n));
}

const char *node_workspace_bytes(Emitter *e, const Node *n) {
  used(e)->workspace = true;
  return e->cpu_code ? "c->cpu_workspace_bytes"
                     : emit_str(e, "c->workspace_bytes[%d]", stream_of(e, n));
}

/* -------------------------------------------------------- descriptors */

const char *emit_tensor_desc(Emitter *e, const Node *n, const char *what, int rank,
                             const int64_t *dims, const int64_t *strides, int min_rank,
                             bool pad_front) {
  return emit_tensor_desc_as(e, n, what, dnn_data_type(n), rank, dims, strides, min_rank,
                             pad_front);
}

int emit_desc_layout(int rank, const int64_t *dims, const int64_t *strides, int min_rank,
                     bool pad_front, int64_t *d, int64_t *s) {
  int out_rank = rank > min_rank ? rank : min_rank;
  if (out_rank < 4)
    out_rank = 4;
  int shift = pad_front ? out_rank - rank : 0;
  for (int i = 0; i < out_rank; i++) {
    d[i] = 1;
    s[i] = 1;
  }
  for (int i = 0; i < rank; i++) {
    d[i + shift] = dims[i];
    s[i + shift] = strides[i];
  }
  /* Padded and size-1 dims get the stride a packed layout would give them:
     their stride addresses nothing, but cuDNN leaves out every engine that
     needs packed tensors when a size-1 dim keeps its parent's stride. */
  for (int i = out_rank - 1; i >= 0; i--) {
    bool padded = pad_front ? i < shift : i >= rank;
    if (padded || d[i] == 1)
      s[i] = i + 1 < out_rank ? s[i + 1] * d[i + 1] : 1;
  }
  return out_rank;
}

const char *emit_tensor_desc_as(Emitter *e, const Node *n, const char *what, const char *type,
                                int rank, const int64_t *dims, const int64_t *strides,
                                int min_rank, bool pad_front) {
  int64_t d[IR_MAX_RANK], s[IR_MAX_RANK];
  int out_rank = emit_desc_layout(rank, dims, strides, min_rank, pad_front, d, s);
  const char *field = emit_unique(e, emit_str(e, "%s_%s", node_id(e, n), what));
  emit_to(e, SEC_FIELDS, "cudnnTensorDescriptor_t %s;", field);
  used(e)->make_tensor = true;
  used(e)->lib[LIB_CUDNN] = true;
  emit_fail_if(e, "!make_tensor(c, &c->%s, %s, %d, (const int[]){%s}, (const int[]){%s})", field,
               type, out_rank, int_list(e, out_rank, d), int_list(e, out_rank, s));
  emit_to(e, SEC_TEARDOWN, "if (c->%s) {", field);
  emit_to(e, SEC_TEARDOWN, "  cudnnDestroyTensorDescriptor(c->%s);", field);
  emit_to(e, SEC_TEARDOWN, "}");
  return emit_str(e, "c->%s", field);
}

const char *emit_tensor_desc_of(Emitter *e, const Node *n, const char *what, const Tensor *t,
                                int min_rank, bool pad_front) {
  return emit_tensor_desc(e, n, what, t->rank, t->dims, t->strides, min_rank, pad_front);
}

const char *emit_conv_descs(Emitter *e, const Node *n, const ConvShape *cs) {
  int rank = cs->nspatial + 2;
  int64_t x[IR_MAX_RANK], xs[IR_MAX_RANK], y[IR_MAX_RANK], ys[IR_MAX_RANK];
  emit_desc_layout(rank, cs->x, cs->x_strides, 4, false, x, xs);
  emit_desc_layout(rank, cs->y, cs->y_strides, 4, false, y, ys);
  const char *field = emit_unique(e, emit_str(e, "%s_descs", node_id(e, n)));
  emit_to(e, SEC_FIELDS, "conv_descs %s;", field);
  used(e)->make_conv = true;
  used(e)->make_tensor = true;
  used(e)->lib[LIB_CUDNN] = true;
  emit_open(e, "static const conv_shape shape = {");
  emit(e, ".type = %s, .rank = %d,", dnn_data_type(n), rank);
  emit(e, ".x = {%s}, .x_strides = {%s},", int_list(e, rank, x), int_list(e, rank, xs));
  emit(e, ".y = {%s}, .y_strides = {%s},", int_list(e, rank, y), int_list(e, rank, ys));
  emit(e, ".filter = {%s}, .filter_format = %s,", int_list(e, rank, cs->filter),
       cs->filter_nhwc ? "CUDNN_TENSOR_NHWC" : "CUDNN_TENSOR_NCHW");
  emit(e, ".pad = {%s}, .stride = {%s}, .dilation = {%s},", int_list(e, cs->nspatial, cs->pad),
       int_list(e, cs->nspatial, cs->stride), int_list(e, cs->nspatial, cs->dilation));
  emit(e, ".groups = %lld, .math = %s,", (long long)cs->groups, cs->math);
  emit_close(e, "};");
  emit_fail_if(e, "!make_conv(c, &c->%s, &shape)", field);
  emit_to(e, SEC_TEARDOWN, "free_conv(&c->%s);", field);
  return emit_str(e, "c->%s", field);
}

/* A descriptor field of another cuDNN type, created in the setup code and
   destroyed in destroy(): kind is "Filter", "Convolution", "Activation"... */
const char *emit_desc(Emitter *e, const Node *n, const char *kind, const char *what) {
  const char *field = emit_unique(e, emit_str(e, "%s_%s", node_id(e, n), what));
  emit_to(e, SEC_FIELDS, "cudnn%sDescriptor_t %s;", kind, field);
  emit_call(e, LIB_CUDNN, n, "cudnnCreate%sDescriptor(&c->%s)", kind, field);
  emit_to(e, SEC_TEARDOWN, "if (c->%s) {", field);
  emit_to(e, SEC_TEARDOWN, "  cudnnDestroy%sDescriptor(c->%s);", kind, field);
  emit_to(e, SEC_TEARDOWN, "}");
  return emit_str(e, "c->%s", field);
}

/* ------------------------------------------------------------ dispatch */

/* Whether every tensor the node computes on has type t: cuDNN and cuBLAS
   take float32, and float16 or bfloat16 (with float32 arithmetic) where the
   emitter says so, but never a mix. */
static bool computes_in(const Node *n, DType t) {
  for (int k = 0; k < n->nout; k++)
    if (n->out[k] && n->out[k]->dtype != t)
      return false;
  for (int k = 0; k < n->nin; k++) {
    const Tensor *x = n->in[k];
    if (!x || op_input_is_param(n->op, k))
      continue;
    if (x->dtype != (op_input_stays_float(n->op, k) ? DT_FLOAT : t))
      return false;
  }
  return true;
}

const OpEmitter *node_emitter(Emitter *e, const Node *n) {
  if (node_is_transfer(e->g, n))
    return transfer_op_emitter();
  const OpEmitter *own = op_emitter(n->op);
  /* Other types go to opc's kernels; copies move any type. */
  bool half = own && own->half && node_in_half(n) && computes_in(n, node_data_type(n));
  bool typed_ok = computes_in(n, DT_FLOAT) || half || own == &copy_op || own == &loop_op ||
                  own == &if_op;
  const OpEmitter *kern = kernel_op_emitter(n->op);
  /* The CPU target's channels-last float32 nodes (choose-layout's CPU
     form) run on opc's kernels, which have channels-last forms
     (kernels_nhwc.c); cuDNN's forms are the GPU program's. */
  const OpEmitter *nhwc = own != &copy_op ? nhwc_emitter(e, n) : NULL;
  if (nhwc)
    return nhwc;
  if (e->kernels_only && own != &copy_op && kern && (!kern->supports || kern->supports(e, n)))
    return kern;
  if (own && typed_ok && (!own->supports || own->supports(e, n)))
    return own;
  if (half) /* opc's kernels compute such a node in float32, unless they say they take it */
    return kern && kern->half && kern->supports && kern->supports(e, n) ? kern : NULL;
  if (kern && (!kern->supports || kern->supports(e, n)))
    return kern;
  return NULL;
}

/* ops.def's backend columns, by kind. */
typedef struct BackendOp {
  const char *kernel; /* "opc_selu", "opc_compare[1 Greater]" */
  const OpEmitter *emitter, *library;
  const char *cudnn;
} BackendOp;

static const BackendOp backend_ops[OP_COUNT] = {
#define OP(kind, name, min_in, max_in, min_out, max_out, infer, fold, params, cost, param_inputs, \
           eval, types, traits, run_types, act, act_name, half, attrs, kernel, emitter, library, \
           cudnn)                                                                          \
  [OP_##kind] = {kernel, emitter, library, cudnn},
#include "../ir/ops.def"
#undef OP
};

static const BackendOp *backend_op(OpKind op) {
  return &backend_ops[op > 0 && op < OP_COUNT ? op : 0];
}

const OpEmitter *op_emitter(OpKind op) { return backend_op(op)->library; }

const OpEmitter *kernel_op_emitter(OpKind op) { return backend_op(op)->emitter; }

const char *op_cudnn(OpKind op) { return backend_op(op)->cudnn; }

const char *op_kernel(Emitter *e, OpKind op) {
  const char *k = backend_op(op)->kernel;
  if (!k)
    return NULL;
  return emit_str(e, "%.*s", (int)strcspn(k, "["), k);
}

bool op_kernel_code(Emitter *e, OpKind op, int *code, const char **label) {
  const char *k = backend_op(op)->kernel;
  const char *p = k ? strchr(k, '[') : NULL;
  if (!p)
    return false;
  char *end;
  *code = (int)strtol(p + 1, &end, 10);
  end += strspn(end, " ");
  *label = emit_str(e, "%.*s", (int)strcspn(end, "]"), end);
  return true;
}

int op_kernel_params(Emitter *e, OpKind op, const char *names[2]) {
  const char *p = op_info(op)->attrs;
  int count = 0;
  while (p && *p && count < 2) {
    p += strspn(p, " ");
    size_t len = strcspn(p, "=,");
    names[count++] = emit_str(e, "%.*s", (int)len, p);
    p += strcspn(p, ",");
    p += *p == ',';
  }
  return count;
}

bool buffer_is_contiguous(const Tensor *t) {
  int64_t expect = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    if (t->dims[d] != 1 && t->strides[d] != expect)
      return false;
    expect *= t->dims[d];
  }
  return true;
}

void *node_data(Emitter *e, const Node *n, size_t size) {
  EmitState *st = e->st;
  if (!st->node_data)
    st->node_data = arena_alloc(e->g->arena, sizeof(void *) * (size_t)(e->g->nnodes + 1));
  void **table = e->body_node_data ? e->body_node_data : st->node_data;
  if (n->id < 0 || n->id >= e->g->nnodes || e->g->nodes[n->id] != n)
    return arena_alloc(e->g->arena, size);
  if (!table[n->id])
    table[n->id] = arena_alloc(e->g->arena, size);
  return table[n->id];
}

const char *int_list(Emitter *e, int count, const int64_t *v) {
  char *s = "";
  for (int i = 0; i < count; i++)
    s = emit_str(e, "%s%s%lld", s, i ? ", " : "", (long long)v[i]);
  return s;
}

/* ------------------------------------------------------ chosen forms */

void emit_record_form(Emitter *e, const Node *n, const char *field) {
  EmitState *st = e->st;
  if (st->nformed == st->capformed) {
    st->capformed = st->capformed ? st->capformed * 2 : 16;
    const Node **nodes = arena_alloc(e->g->arena, sizeof(Node *) * (size_t)st->capformed);
    const char **fields = arena_alloc(e->g->arena, sizeof(char *) * (size_t)st->capformed);
    if (st->nformed) {
      memcpy(nodes, st->formed, sizeof(Node *) * (size_t)st->nformed);
      memcpy(fields, st->form_field, sizeof(char *) * (size_t)st->nformed);
    }
    st->formed = nodes;
    st->form_field = fields;
  }
  st->formed[st->nformed] = n;
  st->form_field[st->nformed++] = field;
}
