/*
 * onnx.c - the ONNX importer: reads a ModelProto with protobuf-c and lowers
 * its graph to the IR, one IR node per ONNX node. Constant nodes and
 * initializers become constant tensors. Shapes are pinned from the command
 * line where the model leaves them symbolic, then inferred by the IR.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "import.h"

/* ---------------------------------------------------------- the file */

uint8_t *read_whole_file(const char *path, size_t *len, ReadProblem *problem, int *os_error) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    *problem = READ_CANNOT_OPEN;
    *os_error = errno;
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    *problem = READ_NOT_REGULAR;
    fclose(f);
    return NULL;
  }
  if (st.st_size == 0) {
    *problem = READ_EMPTY;
    fclose(f);
    return NULL;
  }
  uint8_t *data = malloc((size_t)st.st_size);
  size_t got = data ? fread(data, 1, (size_t)st.st_size, f) : 0;
  bool bad = ferror(f) || got != (size_t)st.st_size;
  fclose(f);
  if (bad) {
    *problem = READ_FAILED;
    free(data);
    return NULL;
  }
  *len = got;
  return data;
}

/* The model file; NULL after reporting why not. */
static uint8_t *read_model(const char *path, size_t *len) {
  ReadProblem problem;
  int os_error = 0;
  uint8_t *data = read_whole_file(path, len, &problem, &os_error);
  if (data)
    return data;
  switch (problem) {
  case READ_CANNOT_OPEN:
    opc_error("%s: cannot open: %s", path, strerror(os_error));
    break;
  case READ_NOT_REGULAR:
    opc_error("%s: not a regular file", path);
    break;
  case READ_EMPTY:
    opc_error("%s: empty file, not an ONNX model", path);
    break;
  case READ_FAILED:
    opc_error("%s: cannot read the file", path);
    break;
  }
  return NULL;
}

/* The directory part of `path`, "." when there is none. */
const char *path_dir(Arena *a, const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    return ".";
  if (slash == path)
    return "/";
  char *dir = arena_strdup(a, path);
  dir[slash - path] = '\0';
  return dir;
}

/* ------------------------------------------------------------- names */

static bool domain_is_default(const char *domain) {
  return !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
}

/* The name used in messages and in the IR: the ONNX one, or OpType_N. */
static const char *node_name(Graph *g, const Onnx__NodeProto *np, size_t index) {
  if (np->name && *np->name)
    return np->name;
  return arena_printf(g->arena, "%s_%zu", proto_str(np->op_type), index);
}

/* The op type as a user would look it up: prefixed with a foreign domain. */
static const char *qualified_op(Graph *g, const Onnx__NodeProto *np) {
  if (domain_is_default(np->domain))
    return proto_str(np->op_type);
  return arena_printf(g->arena, "%s.%s", np->domain, proto_str(np->op_type));
}

/* Sorted by name, as the operator list merges them into the table's. The
   sequence and optional operators are lowered (sequence.c): the tensors
   they hold run at run time, their structure is settled at compile time. */
const ImportedOp imported_ops[] = {
    {"ConcatFromSequence", "seq", true},
    {"Einsum", "num", true},
    {"If", "bool", false},
    {"Loop", "i64 bool any", false},
    {"Optional", "any|seq", true},
    {"OptionalGetElement", "opt", true},
    {"OptionalHasElement", "opt", true},
    {"Scan", "any", false},
    {"SequenceAt", "seq index", true},
    {"SequenceConstruct", "any", true},
    {"SequenceEmpty", "", true},
    {"SequenceErase", "seq index", true},
    {"SequenceInsert", "seq any index", true},
    {"SequenceLength", "seq", true},
    {"SequenceMap", "seq any", true},
    {"SplitToSequence", "any index", true},
    /* domain ai.onnx.preview.training, lowered to elementwise kinds (training.c) */
    {"ai.onnx.preview.training.Adagrad", "float i64 float", true},
    {"ai.onnx.preview.training.Adam", "float i64 float", true},
    {"ai.onnx.preview.training.Momentum", "float i64 float", true},
    {NULL, NULL, false}};

/* If, Loop, Scan and Einsum are not IR kinds: the importer inlines the
   branch an If's condition chooses (import_if), unrolls a Loop
   (import_loop) and a Scan (scan.c), and lowers an Einsum to kinds that
   are (einsum.c). */
static bool is_op(const Onnx__NodeProto *np, const char *op) {
  return domain_is_default(np->domain) && strcmp(proto_str(np->op_type), op) == 0;
}

/* The kind an ONNX op_type names: opc's own kinds (T_INTERNAL) are no
   ONNX operator. */
static OpKind onnx_kind(const char *op_type) {
  OpKind op = op_from_name(op_type);
  return op != OP_INVALID && (op_info(op)->traits & T_INTERNAL) ? OP_INVALID : op;
}

static bool node_supported(const Onnx__NodeProto *np) {
  return is_op(np, "If") || is_op(np, "Loop") || is_op(np, "Scan") || is_op(np, "Einsum") ||
         is_training_op(np) ||
         (domain_is_default(np->domain) && is_sequence_op(proto_str(np->op_type))) ||
         (domain_is_default(np->domain) && onnx_kind(proto_str(np->op_type)) != OP_INVALID);
}

/*
 * Lists every unsupported operator in one message, each with the nodes that
 * use it, so that a user sees the whole gap at once rather than one op per run.
 */
static bool check_operators(Importer *im, const Onnx__GraphProto *gp) {
  Graph *g = im->g;
  const char **ops = arena_alloc(g->arena, sizeof(char *) * (gp->n_node + 1));
  size_t nbad = 0;
  for (size_t i = 0; i < gp->n_node; i++)
    ops[i] = node_supported(gp->node[i]) ? NULL : qualified_op(g, gp->node[i]);
  for (size_t i = 0; i < gp->n_node; i++)
    nbad += ops[i] != NULL;
  if (nbad == 0)
    return true;

  enum { MAX_NAMES = 8 };
  char *msg = NULL;
  size_t msglen = 0;
  FILE *f = open_memstream(&msg, &msglen);
  bool first_op = true;
  for (size_t i = 0; i < gp->n_node; i++) {
    if (!ops[i])
      continue;
    const char *op = ops[i];
    fprintf(f, "%s%s (node ", first_op ? "" : ", ", op);
    first_op = false;
    int count = 0;
    for (size_t j = i; j < gp->n_node; j++) {
      if (!ops[j] || strcmp(ops[j], op) != 0)
        continue;
      if (count < MAX_NAMES)
        fprintf(f, "%s'%s'", count ? ", " : "", node_name(g, gp->node[j], j));
      count++;
      ops[j] = NULL;
    }
    if (count > MAX_NAMES)
      fprintf(f, " and %d more", count - MAX_NAMES);
    fputc(')', f);
  }
  fclose(f);
  ir_error(g, NULL, "unsupported operators: %s", msg);
  free(msg);
  return false;
}

/* ------------------------------------------------------------- limits */

static bool name_ok(Importer *im, const char *name, const char *fmt, size_t index) {
  if (!name || strlen(name) <= LIMIT_NAME_BYTES)
    return true;
  char what[64];
  snprintf(what, sizeof what, fmt, index);
  return check_name_length(im->g, what, name);
}

/* Names end up in messages, in the IR and in the emitted C; they are
   checked before anything prints one. The first name over reports. */
static bool check_names(Importer *im, const Onnx__GraphProto *gp) {
  bool ok = !gp->name || check_name_length(im->g, "the graph name", gp->name);
  for (size_t i = 0; ok && i < gp->n_initializer; i++)
    ok = name_ok(im, gp->initializer[i]->name, "the name of initializer %zu", i);
  for (size_t i = 0; ok && i < gp->n_input; i++)
    ok = name_ok(im, gp->input[i]->name, "the name of graph input %zu", i);
  for (size_t i = 0; ok && i < gp->n_output; i++)
    ok = name_ok(im, gp->output[i]->name, "the name of graph output %zu", i);
  for (size_t i = 0; ok && i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    ok = name_ok(im, np->name, "the name of node %zu", i) &&
         name_ok(im, np->op_type, "the op_type of node %zu", i) &&
         name_ok(im, np->domain, "the domain of node %zu", i);
    for (size_t j = 0; ok && j < np->n_input; j++)
      ok = name_ok(im, np->input[j], "an input name of node %zu", i);
    for (size_t j = 0; ok && j < np->n_output; j++)
      ok = name_ok(im, np->output[j], "an output name of node %zu", i);
    for (size_t j = 0; ok && j < np->n_attribute; j++)
      ok = name_ok(im, np->attribute[j]->name, "an attribute name of node %zu", i);
  }
  return ok;
}

static bool check_node_count(Importer *im, const Onnx__GraphProto *gp) {
  if (gp->n_node <= LIMIT_NODES)
    return true;
  ir_error(im->g, NULL, "the graph has %zu nodes, over the limit of %d nodes", gp->n_node,
           LIMIT_NODES);
  return false;
}

/* -------------------------------------------------------- definitions */

/* The tensor `name` refers to where the importer is: the innermost
   subgraph that defines it, else the main graph; NULL if none does. */
static Tensor *lookup_anywhere(Importer *im, const char *name) {
  for (const Scope *s = im->scope; s; s = s->parent)
    for (int i = 0; i < s->n; i++)
      if (strcmp(s->names[i], name) == 0)
        return s->tensors[i];
  Tensor *t = graph_find_tensor(im->g, name);
  return t || !im->capture ? t : loop_capture_outer_find(im, name);
}

/* Inside a run-time Loop's body, a value of the graphs around it becomes
   one of the body's (loop.c). */
Tensor *import_lookup(Importer *im, const char *name) {
  Tensor *t = lookup_anywhere(im, name);
  return t && im->capture ? loop_capture(im, t) : t;
}

/* A new tensor for `name` defined in the innermost subgraph, named with
   its prefix and, where that is taken, a number. */
static Tensor *define_in_scope(Importer *im, const char *name) {
  Scope *s = im->scope;
  Graph *g = im->g;
  const char *ir_name = arena_printf(g->arena, "%s/%s", s->prefix, name);
  for (int k = 2; graph_find_tensor(g, ir_name); k++)
    ir_name = arena_printf(g->arena, "%s/%s_%d", s->prefix, name, k);
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 16;
    s->names = realloc(s->names, sizeof *s->names * (size_t)s->cap);
    s->tensors = realloc(s->tensors, sizeof *s->tensors * (size_t)s->cap);
  }
  s->names[s->n] = arena_strdup(g->arena, name);
  return s->tensors[s->n++] = graph_add_tensor(g, ir_name);
}

/* Creates the tensor for a new definition; reports a second definition in
   the same graph or subgraph. */
static Tensor *define(Importer *im, const char *name, const char *by) {
  Scope *s = im->scope;
  bool twice = false;
  for (int i = 0; s && i < s->n; i++)
    twice |= strcmp(s->names[i], name) == 0;
  if (twice || (!s && graph_find_tensor(im->g, name))) {
    ir_error(im->g, NULL, "tensor '%s' is defined twice (again by %s)", name, by);
    im->failed = true;
    return NULL;
  }
  return s ? define_in_scope(im, name) : graph_add_tensor(im->g, name);
}

static void push_scope(Importer *im, Scope *s, const char *prefix) {
  *s = (Scope){.prefix = prefix, .parent = im->scope};
  im->scope = s;
}

static void pop_scope(Importer *im) {
  Scope *s = im->scope;
  im->scope = s->parent;
  free(s->names);
  free(s->tensors);
}

static void import_initializers(Importer *im, const Onnx__GraphProto *gp) {
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *p = gp->initializer[i];
    const char *name = proto_str(p->name);
    if (!*name) {
      ir_error(im->g, NULL, "initializer %zu has no name", i);
      im->failed = true;
      continue;
    }
    const char *what = arena_printf(im->g->arena, "initializer '%s'", name);
    Tensor *t = define(im, name, what);
    if (t && !tensor_from_proto(im, NULL, what, p, t))
      im->failed = true;
  }
  im->ninitializers = im->g->ntensors;
  if (gp->n_sparse_initializer) {
    ir_error(im->g, NULL, "sparse initializers are not supported");
    im->failed = true;
  }
}

/* ------------------------------------------------------------- inputs */

static const InputShape *find_override(const ImportOptions *opt, const char *name) {
  for (int i = 0; i < opt->nshapes; i++)
    if (strcmp(opt->shapes[i].name, name) == 0)
      return &opt->shapes[i];
  return NULL;
}

static const Onnx__TypeProto__Tensor *tensor_type(const Onnx__ValueInfoProto *vi) {
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
    return NULL;
  return tp->tensor_type;
}

/* The declared shape, with dynamic dimensions pinned by --batch; false
   (reported) when a dimension stays dynamic. */
static bool declared_shape(Importer *im, const char *name, const Onnx__TensorShapeProto *sp,
                           Tensor *t) {
  if (!sp) {
    ir_error(im->g, NULL, "input '%s' has no declared shape; give it with --input-shape %s=...",
             name, name);
    return false;
  }
  if (sp->n_dim > IR_MAX_RANK) {
    ir_error(im->g, NULL, "input '%s' has rank %zu, beyond opc's limit of %d", name, sp->n_dim,
             IR_MAX_RANK);
    return false;
  }
  int64_t dims[IR_MAX_RANK];
  for (size_t i = 0; i < sp->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = sp->dim[i];
    bool fixed = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                 d->dim_value >= 0;
    if (fixed) {
      dims[i] = d->dim_value;
    } else if (i == 0 && im->opt->batch > 0) {
      dims[i] = im->opt->batch;
    } else {
      const char *param = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                              ? arena_printf(im->g->arena, " ('%s')", proto_str(d->dim_param))
                              : "";
      ir_error(im->g, NULL,
               "input '%s' has a dynamic dimension %zu%s; pin it with --input-shape %s=... or "
               "--batch N",
               name, i, param, name);
      return false;
    }
  }
  if (!shape_fits((int)sp->n_dim, dims)) {
    ir_error(im->g, NULL, "input '%s' has dimensions that multiply to more than 2^59", name);
    return false;
  }
  tensor_set_shape(t, (int)sp->n_dim, dims);
  return true;
}

static const ConstInput *find_binding(const ImportOptions *opt, const char *name) {
  for (int i = 0; i < opt->nconsts; i++)
    if (strcmp(opt->consts[i].name, name) == 0)
      return &opt->consts[i];
  return NULL;
}

/* "[2,N,?]": fixed dimensions, symbolic names, ? for unknown ones. */
static const char *declared_str(Arena *a, const Onnx__TensorShapeProto *sp) {
  const char *s = "[";
  for (size_t i = 0; i < sp->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = sp->dim[i];
    const char *dim = "?";
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
      dim = arena_printf(a, "%lld", (long long)d->dim_value);
    else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
      dim = proto_str(d->dim_param);
    s = arena_printf(a, "%s%s%s", s, i ? "," : "", dim);
  }
  return arena_printf(a, "%s]", s);
}

/* A symbolic or unknown dimension accepts any size; a fixed one must match. */
static bool declared_accepts(const Onnx__TensorShapeProto *sp, const Tensor *t) {
  if ((int)sp->n_dim != t->rank)
    return false;
  for (size_t i = 0; i < sp->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = sp->dim[i];
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
        d->dim_value != t->dims[i])
      return false;
  }
  return true;
}

/*
 * --const-input: the input becomes a constant holding the file's tensor.
 * Its type must be what the model declares (or what --input-shape says),
 * since the graph was built for that type.
 */
static void bind_input(Importer *im, const ConstInput *ci, const Onnx__TypeProto__Tensor *tt,
                       Tensor *t) {
  Graph *g = im->g;
  if (!const_input_load(im, ci, t)) {
    im->failed = true;
    return;
  }
  DType declared = tt->has_elem_type ? (DType)tt->elem_type : DT_UNDEFINED;
  if (declared != t->dtype) {
    ir_error(g, NULL, "--const-input %s=%s: the file holds %s data but input '%s' is declared %s",
             ci->name, ci->path, dtype_name(t->dtype), ci->name,
             declared ? dtype_name(declared) : "without a data type");
    im->failed = true;
    return;
  }
  char got[128];
  tensor_type_str(t, got, sizeof got);
  const InputShape *pin = find_override(im->opt, ci->name);
  if (pin) {
    Tensor want = {.dtype = t->dtype};
    tensor_set_shape(&want, pin->rank, pin->dims);
    if (!tensor_same_shape(&want, t)) {
      char buf[128];
      ir_error(g, NULL, "--const-input %s=%s: the file holds %s but --input-shape gives %s",
               ci->name, ci->path, got, tensor_type_str(&want, buf, sizeof buf));
      im->failed = true;
    }
  } else if (tt->shape && !declared_accepts(tt->shape, t)) {
    ir_error(g, NULL, "--const-input %s=%s: the file holds %s but input '%s' is declared %s%s",
             ci->name, ci->path, got, ci->name, dtype_name(declared),
             declared_str(g->arena, tt->shape));
    im->failed = true;
  }
}

static void import_input(Importer *im, const Onnx__ValueInfoProto *vi) {
  const char *name = proto_str(vi->name);
  Graph *g = im->g;
  Tensor *existing = graph_find_tensor(g, name);
  /* Older exporters list initializers among the inputs: they stay constants.
     Initializers were defined first, so their ids come first. */
  if (existing && existing->id < im->ninitializers)
    return;
  Tensor *t = define(im, name, arena_printf(g->arena, "graph input '%s'", name));
  if (!t)
    return;
  const Onnx__TypeProto__Tensor *tt = tensor_type(vi);
  const ConstInput *bound = find_binding(im->opt, name);
  if (!tt && bound && vi->type &&
      (vi->type->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE ||
       vi->type->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE)) {
    bind_sequence_input(im, bound, vi->type, t);
    return;
  }
  if (!tt) {
    int kind = vi->type ? (int)vi->type->value_case : 0;
    ir_error(g, NULL, "input '%s' is not a tensor but %s; opc lowers sequences and optionals "
             "only inside the model, where their structure is known at compile time, and a "
             "graph input's is the caller's (bind it with --const-input)", name,
             kind == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE   ? "a sequence"
             : kind == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE ? "an optional"
             : kind == ONNX__TYPE_PROTO__VALUE_MAP_TYPE      ? "a map (maps are not supported)"
                                                             : "of no type opc knows");
    im->failed = true;
    return;
  }
  if (bound) {
    bind_input(im, bound, tt, t);
    return;
  }
  t->dtype = (DType)tt->elem_type;
  if (!dtype_at_interface(t->dtype)) {
    ir_error(g, NULL, "input '%s' has data type %s; opc compiles models whose inputs are "
             "float32, float64, float16, bfloat16, int64, int32, int16, int8, uint64, uint32, uint16, uint8 "
             "or bool",
             name, tt->has_elem_type ? dtype_onnx_name(t->dtype) : "(none)");
    im->failed = true;
    return;
  }
  const InputShape *pin = find_override(im->opt, name);
  bool shaped = true;
  if (pin)
    tensor_set_shape(t, pin->rank, pin->dims);
  else
    shaped = declared_shape(im, name, tt->shape, t);
  if (!shaped || !check_tensor_size(g, NULL, "input", name, t->dtype, t->rank, t->dims))
    im->failed = true;
  graph_add_input(g, t);
}

/* Every --input-shape must name a real input (a bound one checked it already). */
static void check_overrides(Importer *im) {
  for (int i = 0; i < im->opt->nshapes; i++) {
    const char *name = im->opt->shapes[i].name;
    Tensor *t = graph_find_tensor(im->g, name);
    bool used = t && (t->is_input || find_binding(im->opt, name));
    if (im->opt->shape_used) {
      im->opt->shape_used[i] |= used;
    } else if (!used) {
      ir_error(im->g, NULL, "--input-shape names '%s', which is not an input of the model", name);
      im->failed = true;
    }
  }
}

/*
 * Every --const-input must name a run-time input, once. Runs before the
 * node outputs are defined, so any tensor found past the initializers is
 * a graph input.
 */
static void check_bindings(Importer *im) {
  const ImportOptions *opt = im->opt;
  for (int i = 0; i < opt->nconsts; i++) {
    const char *name = opt->consts[i].name;
    Tensor *t = graph_find_tensor(im->g, name);
    const char *problem = NULL;
    if (find_binding(opt, name) != &opt->consts[i])
      problem = "is bound twice";
    else if (!t && !opt->const_used)
      problem = "is not an input of the model";
    else if (t && t->id < im->ninitializers && !opt->const_used)
      problem = "is an initializer, already a constant";
    if (t && t->id >= im->ninitializers && opt->const_used)
      opt->const_used[i] = true;
    if (problem) {
      ir_error(im->g, NULL, "--const-input: '%s' %s", name, problem);
      im->failed = true;
    }
  }
}

/* --------------------------------------------------------- attributes */

/* Old models leave the attribute type out; it follows from the field set. */
static Onnx__AttributeProto__AttributeType attr_type(const Onnx__AttributeProto *a) {
  if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
    return a->type;
  if (a->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
  if (a->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  if (a->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
  if (a->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
  if (a->g) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
  if (a->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
  if (a->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
  if (a->n_strings) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
  if (a->n_tensors) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS;
  if (a->n_graphs) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS;
  return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

/* ONNX's name of an attribute type, as messages say it. */
static const char *attr_type_name(Onnx__AttributeProto__AttributeType t) {
  static const char *const names[] = {
      "UNDEFINED", "FLOAT", "INT",     "STRING",  "TENSOR",         "GRAPH",      "FLOATS", "INTS",
      "STRINGS",   "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};
  return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "an unknown type";
}

/*
 * The type of a value field that is set and disagrees with the attribute's
 * type (its declared one, or the first field set when none is declared);
 * UNDEFINED when every field agrees. ONNX's checker and ONNX Runtime refuse
 * such an attribute; opc would read the declared field, empty, and use a
 * default instead (a flipped bit turned Conv's dilations from INTS to
 * STRING).
 */
static Onnx__AttributeProto__AttributeType attr_stray_field(const Onnx__AttributeProto *a,
                                                            Onnx__AttributeProto__AttributeType t) {
  const struct {
    bool set;
    Onnx__AttributeProto__AttributeType type;
  } fields[] = {
      {a->has_f, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT},
      {a->has_i, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT},
      {a->has_s, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING},
      {a->t != NULL, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR},
      {a->g != NULL, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH},
      {a->sparse_tensor != NULL, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR},
      {a->tp != NULL, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO},
      {a->n_floats > 0, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS},
      {a->n_ints > 0, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS},
      {a->n_strings > 0, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS},
      {a->n_tensors > 0, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS},
      {a->n_graphs > 0, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS},
      {a->n_sparse_tensors > 0, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS},
      {a->n_type_protos > 0, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS},
  };
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (fields[i].set && fields[i].type != t)
      return fields[i].type;
  return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

static const char *binary_str(Arena *a, ProtobufCBinaryData b) {
  char *s = arena_alloc(a, b.len + 1);
  if (b.len)
    memcpy(s, b.data, b.len);
  return s;
}

/* An attribute tensor lives outside the graph: it is data, not a value. */
static Tensor *attr_tensor(Importer *im, const Node *n, const char *attr,
                           const Onnx__TensorProto *p) {
  Tensor *t = arena_alloc(im->g->arena, sizeof *t);
  t->id = -1;
  t->name = arena_strdup(im->g->arena, p->name && *p->name ? p->name : attr);
  const char *what = arena_printf(im->g->arena, "attribute '%s'", attr);
  return tensor_from_proto(im, n, what, p, t) ? t : NULL;
}

static bool convert_attr(Importer *im, const Node *n, const Onnx__AttributeProto *a, Attr *out) {
  Arena *arena = im->g->arena;
  out->name = arena_strdup(arena, proto_str(a->name));
  Onnx__AttributeProto__AttributeType type = attr_type(a);
  Onnx__AttributeProto__AttributeType stray = attr_stray_field(a, type);
  if (stray != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) {
    if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
      ir_error(im->g, n, "attribute '%s' is declared %s but holds a value of type %s", out->name,
               attr_type_name(type), attr_type_name(stray));
    else
      ir_error(im->g, n, "attribute '%s' holds values of two types, %s and %s", out->name,
               attr_type_name(type), attr_type_name(stray));
    return false;
  }
  switch (type) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    out->kind = ATTR_FLOAT;
    out->f = a->f;
    return true;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
    out->kind = ATTR_INT;
    out->i = a->i;
    return true;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
    out->kind = ATTR_STRING;
    out->s = binary_str(arena, a->s);
    return true;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
    out->kind = ATTR_TENSOR;
    out->t = a->t ? attr_tensor(im, n, out->name, a->t) : NULL;
    return out->t != NULL;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
    out->kind = ATTR_FLOATS;
    out->n = (int)a->n_floats;
    out->floats = arena_dup(arena, a->floats, sizeof(float) * a->n_floats);
    return true;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    out->kind = ATTR_INTS;
    out->n = (int)a->n_ints;
    out->ints = arena_dup(arena, a->ints, sizeof(int64_t) * a->n_ints);
    return true;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
    out->kind = ATTR_STRINGS;
    out->n = (int)a->n_strings;
    out->strings = arena_alloc(arena, sizeof(char *) * (a->n_strings + 1));
    for (size_t i = 0; i < a->n_strings; i++)
      out->strings[i] = binary_str(arena, a->strings[i]);
    return true;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS:
    out->kind = ATTR_TENSORS;
    out->n = (int)a->n_tensors;
    out->tensors = arena_alloc(arena, sizeof(Tensor *) * (a->n_tensors + 1));
    for (size_t i = 0; i < a->n_tensors; i++)
      if (!(out->tensors[i] = attr_tensor(im, n, out->name, a->tensors[i])))
        return false;
    return true;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
    ir_error(im->g, n, "attribute '%s' is a subgraph; opc does not support subgraphs", out->name);
    return false;
  default:
    ir_error(im->g, n, "attribute '%s' has a kind opc does not support", out->name);
    return false;
  }
}

static bool convert_attrs(Importer *im, Node *n, const Onnx__NodeProto *np) {
  n->nattrs = (int)np->n_attribute;
  n->attrs = arena_alloc(im->g->arena, sizeof(Attr) * (np->n_attribute + 1));
  bool ok = true;
  for (size_t i = 0; i < np->n_attribute; i++)
    ok &= convert_attr(im, n, np->attribute[i], &n->attrs[i]);
  return ok;
}

/* ------------------------------------------------------------- nodes */

/*
 * A Constant node becomes a constant tensor and no IR node. A stand-in
 * node carries the name and attributes for messages and lookups.
 */
static void import_constant(Importer *im, const Onnx__NodeProto *np, const char *name) {
  Graph *g = im->g;
  Node tmp = {.name = name, .op = OP_CONSTANT};
  if (np->n_output != 1 || !np->output[0] || !*np->output[0] || np->n_input != 0) {
    ir_error(g, &tmp, "expects no inputs and one output");
    im->failed = true;
    return;
  }
  if (!convert_attrs(im, &tmp, np)) {
    im->failed = true;
    return;
  }
  Tensor *t = import_lookup(im, np->output[0]);
  if (tmp.nattrs != 1) {
    ir_error(g, &tmp, "expects exactly one value attribute, has %d attributes", tmp.nattrs);
    im->failed = true;
    return;
  }
  const Attr *a = &tmp.attrs[0];
  int64_t n = a->n;
  if (strcmp(a->name, "value") == 0 && a->kind == ATTR_TENSOR) {
    const Tensor *v = a->t;
    t->dtype = v->dtype;
    tensor_set_shape(t, v->rank, v->dims);
    t->f32 = v->f32;
    t->i64 = v->i64;
  } else if (strcmp(a->name, "value_float") == 0 && a->kind == ATTR_FLOAT) {
    t->dtype = DT_FLOAT;
    tensor_set_shape(t, 0, NULL);
    t->f32 = arena_dup(g->arena, &a->f, sizeof(float));
  } else if (strcmp(a->name, "value_int") == 0 && a->kind == ATTR_INT) {
    t->dtype = DT_INT64;
    tensor_set_shape(t, 0, NULL);
    t->i64 = arena_dup(g->arena, &a->i, sizeof(int64_t));
  } else if (strcmp(a->name, "value_floats") == 0 && a->kind == ATTR_FLOATS) {
    t->dtype = DT_FLOAT;
    tensor_set_shape(t, 1, &n);
    t->f32 = arena_alloc(g->arena, sizeof(float) * (size_t)(n + 1));
    if (n)
      memcpy(t->f32, a->floats, sizeof(float) * (size_t)n);
  } else if (strcmp(a->name, "value_ints") == 0 && a->kind == ATTR_INTS) {
    t->dtype = DT_INT64;
    tensor_set_shape(t, 1, &n);
    t->i64 = arena_alloc(g->arena, sizeof(int64_t) * (size_t)(n + 1));
    if (n)
      memcpy(t->i64, a->ints, sizeof(int64_t) * (size_t)n);
  } else {
    ir_error(g, &tmp, "attribute '%s' is not a supported constant value", a->name);
    im->failed = true;
  }
}

/* Defines the tensors every node writes, so that inputs can refer to
   values defined later (a cycle is reported by the toposort, not here). */
static void define_outputs(Importer *im, const Onnx__GraphProto *gp) {
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    const char *by = arena_printf(im->g->arena, "node '%s'", node_name(im->g, np, i));
    for (size_t j = 0; j < np->n_output; j++)
      if (np->output[j] && *np->output[j])
        define(im, np->output[j], by);
  }
}

/* Trailing empty names are dropped: the IR reads a missing slot as absent. */
static int count_names(char **names, size_t n) {
  while (n > 0 && (!names[n - 1] || !*names[n - 1]))
    n--;
  return (int)n;
}

static void import_if(Importer *im, const Onnx__NodeProto *np, const char *name);
static void import_loop(Importer *im, const Onnx__NodeProto *np, const char *name);
static void import_einsum(Importer *im, const Onnx__NodeProto *np, const char *name);

/*
 * An IR node reads tensors only. An Identity of a sequence or optional
 * passes it on (handled here: false, nothing more to do); any other
 * operator reading one is refused (false, reported).
 */
static bool sequences_read_ok(Importer *im, const Onnx__NodeProto *np, const char *name,
                              OpKind op, int nin, int nout) {
  for (int i = 0; i < nin; i++) {
    Tensor *t = *np->input[i] ? import_lookup(im, np->input[i]) : NULL;
    const SeqValue *v = seq_of(im, t);
    if (!v)
      continue;
    if (op == OP_IDENTITY && nin == 1 && nout == 1) {
      connect_value(im, name, t, import_lookup(im, np->output[0]));
      return false;
    }
    ir_error(im->g, NULL, "node '%s' (%s): input '%s' is %s, and %s takes tensors", name,
             op_name(op), t->name, seq_kind_str(v), op_name(op));
    im->failed = true;
    return false;
  }
  return true;
}

static void import_node(Importer *im, const Onnx__NodeProto *np, size_t index) {
  Graph *g = im->g;
  const char *name = node_name(g, np, index);
  if (is_op(np, "If")) {
    import_if(im, np, name);
    return;
  }
  if (is_op(np, "Loop")) {
    import_loop(im, np, name);
    return;
  }
  if (is_op(np, "Scan")) {
    import_scan(im, np, name);
    return;
  }
  if (is_op(np, "Einsum")) {
    import_einsum(im, np, name);
    return;
  }
  if (domain_is_default(np->domain) && is_sequence_op(proto_str(np->op_type))) {
    import_sequence_op(im, np, name);
    return;
  }
  if (is_training_op(np)) {
    import_training_op(im, np, name);
    return;
  }
  OpKind op = op_from_name(proto_str(np->op_type));
  if (op == OP_CONSTANT) {
    import_constant(im, np, name);
    return;
  }
  int nin = count_names(np->input, np->n_input);
  int nout = count_names(np->output, np->n_output);
  if (!sequences_read_ok(im, np, name, op, nin, nout))
    return;
  Node *n = graph_add_node(g, op, name, nin, nout);
  for (int i = 0; i < nin; i++) {
    const char *in = np->input[i];
    if (!*in)
      continue; /* an absent optional input */
    n->in[i] = import_lookup(im, in);
    if (!n->in[i]) {
      ir_error(g, n, "input '%s' is not defined by any node, initializer or graph input", in);
      im->failed = true;
    }
  }
  for (int i = 0; i < nout; i++) {
    const char *out = np->output[i];
    /* An unused optional output in the middle still needs a value to write. */
    n->out[i] = *out ? import_lookup(im, out) : graph_add_tensor(g, NULL);
  }
  if (!convert_attrs(im, n, np))
    im->failed = true;
}

/* Einsum: its inputs and output resolved, its equation read, then
   einsum.c's lowering. */
static void import_einsum(Importer *im, const Onnx__NodeProto *np, const char *name) {
  Graph *g = im->g;
  int nin = (int)np->n_input;
  const char *equation = NULL;
  for (size_t i = 0; i < np->n_attribute; i++)
    if (strcmp(proto_str(np->attribute[i]->name), "equation") == 0 &&
        attr_type(np->attribute[i]) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
      equation = binary_str(g->arena, np->attribute[i]->s);
  if (!equation || np->n_output != 1 || nin < 1 || nin > 16) {
    ir_error(g, NULL, "node '%s' (Einsum): %s", name,
             !equation ? "needs its string attribute 'equation'" : "takes 1 to 16 inputs and one output");
    im->failed = true;
    return;
  }
  Tensor **in = arena_alloc(g->arena, sizeof(Tensor *) * (size_t)nin);
  for (int i = 0; i < nin; i++) {
    in[i] = *np->input[i] ? import_lookup(im, np->input[i]) : NULL;
    if (!in[i]) {
      ir_error(g, NULL, "node '%s' (Einsum): input '%s' is not defined by any node, initializer "
               "or graph input", name, np->input[i]);
      im->failed = true;
      return;
    }
    if (seq_of(im, in[i])) {
      ir_error(g, NULL, "node '%s' (Einsum): input '%s' is %s, and Einsum takes tensors", name,
               np->input[i], seq_kind_str(seq_of(im, in[i])));
      im->failed = true;
      return;
    }
  }
  if (!*np->output[0])
    return; /* nothing reads it */
  lower_einsum(im, name, equation, in, nin, import_lookup(im, np->output[0]));
}

/* ------------------------------------------------------------ If */

/* A lowering's int64 constant (import.h). */
Tensor *import_ints_constant(Graph *g, const char *prefix, int *count, const int64_t *v, int n) {
  int64_t len = n;
  Tensor *t = graph_add_tensor(g, arena_printf(g->arena, "%s/c%d", prefix, (*count)++));
  t->dtype = DT_INT64;
  tensor_set_shape(t, 1, &len);
  t->i64 = arena_dup(g->arena, v, sizeof(int64_t) * (size_t)(n ? n : 1));
  return t;
}

/* The graph attribute `which` ("then_branch", "body"), or NULL. */
const Onnx__GraphProto *import_graph_attr(const Onnx__NodeProto *np, const char *which) {
  for (size_t i = 0; i < np->n_attribute; i++)
    if (strcmp(proto_str(np->attribute[i]->name), which) == 0)
      return np->attribute[i]->g;
  return NULL;
}

/* The value of a constant condition: a bool (or number) of one element. */
static bool condition_value(const Tensor *t) {
  return t->i64 ? t->i64[0] != 0 : t->f32[0] != 0;
}

/* `name` in the innermost scope stands for t (a subgraph's input). */
static void bind_in_scope(Importer *im, const char *name, Tensor *t) {
  Scope *s = im->scope;
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 16;
    s->names = realloc(s->names, sizeof *s->names * (size_t)s->cap);
    s->tensors = realloc(s->tensors, sizeof *s->tensors * (size_t)s->cap);
  }
  s->names[s->n] = arena_strdup(im->g->arena, name);
  s->tensors[s->n++] = t;
}

/*
 * The nodes of subgraph gp, as if written where the node that holds it
 * is, in a scope of their own named `prefix`: its inputs stand for
 * `inputs`, and it reads the outer graph's values by name, as ONNX's
 * scoping allows. outs[i] is the tensor its output i names. False after
 * an error.
 */
bool import_subgraph(Importer *im, const Onnx__GraphProto *gp, const char *prefix,
                     Tensor *const *inputs, Tensor **outs) {
  if (!check_node_count(im, gp) || !check_names(im, gp) || !check_operators(im, gp)) {
    im->failed = true;
    return false;
  }
  Scope scope;
  push_scope(im, &scope, prefix);
  for (size_t i = 0; i < gp->n_input; i++)
    bind_in_scope(im, proto_str(gp->input[i]->name), inputs[i]);
  import_initializers(im, gp);
  define_outputs(im, gp);
  for (size_t i = 0; i < gp->n_node && !im->failed; i++)
    import_node(im, gp->node[i], i);
  for (size_t i = 0; i < gp->n_output; i++)
    outs[i] = import_lookup(im, proto_str(gp->output[i]->name));
  pop_scope(im);
  return !im->failed;
}

/* The branch in the If's place, and an Identity from each of its outputs
   to the If's. */
static void inline_branch(Importer *im, const Onnx__NodeProto *np, const char *name,
                          const Onnx__GraphProto *gp) {
  Graph *g = im->g;
  Tensor **from = calloc(gp->n_output + 1, sizeof *from);
  if (!import_subgraph(im, gp, name, NULL, from)) {
    free(from);
    return;
  }
  for (size_t i = 0; i < np->n_output; i++) {
    const char *out = np->output[i];
    Tensor *to = out && *out ? import_lookup(im, out) : NULL;
    if (!from[i] || from[i] == to) {
      ir_error(g, NULL, "node '%s' (If): branch output '%s' is not produced by the branch", name,
               proto_str(gp->output[i]->name));
      im->failed = true;
      break;
    }
    if (!to)
      continue; /* an output nobody reads */
    connect_value(im, arena_printf(g->arena, "%s/output_%zu", name, i), from[i], to);
  }
  free(from);
}

/* The branch's outputs, or false after an error: as many as the node's,
   each a tensor the branch makes or reads. */
static bool branch_outputs(Importer *im, const Onnx__NodeProto *np, const char *name,
                           const Onnx__GraphProto *gp, const char *which, Tensor **outs) {
  if (gp->n_output != np->n_output) {
    ir_error(im->g, NULL, "node '%s' (If): the %s branch has %zu outputs, the node %zu", name,
             which, gp->n_output, np->n_output);
    im->failed = true;
    return false;
  }
  if (!import_subgraph(im, gp, arena_printf(im->g->arena, "%s/%s", name, which), NULL, outs))
    return false;
  for (size_t i = 0; i < gp->n_output; i++) {
    if (!outs[i] || seq_of(im, outs[i])) {
      ir_error(im->g, NULL, "node '%s' (If): the %s branch's output '%s' is %s; opc runs an If "
               "whose condition is run-time data on tensor outputs only", name, which,
               proto_str(gp->output[i]->name), outs[i] ? "a sequence or optional"
                                                        : "not produced by the branch");
      im->failed = true;
      return false;
    }
  }
  return true;
}

/* The condition as one value of rank 0, whatever its declared rank: a
   Reshape to [] (alias-reshape makes it a view). */
static Tensor *condition_scalar(Graph *g, const char *name, Tensor *cond) {
  Tensor *shape = graph_add_tensor(g, arena_printf(g->arena, "%s/condition_shape", name));
  int64_t none = 0;
  shape->dtype = DT_INT64;
  tensor_set_shape(shape, 1, &none);
  shape->i64 = arena_dup(g->arena, &none, sizeof none);
  Node *r = graph_add_node(g, OP_RESHAPE, arena_printf(g->arena, "%s/condition", name), 2, 1);
  r->in[0] = cond;
  r->in[1] = shape;
  return r->out[0] = graph_add_tensor(g, arena_printf(g->arena, "%s/condition", name));
}

/*
 * If whose condition is run-time data: both branches are imported, each in
 * a scope of its own ("if/then/...", "if/else/..."), and each output of the
 * If is an IfSelect of the two branches' values by the condition. Every run
 * computes both branches and keeps the chosen one's values: ONNX operators
 * have no side effects, so this is the If's result; what it costs is the
 * other branch's work (a CUDA-graph conditional node would skip it).
 */
static void select_branches(Importer *im, const Onnx__NodeProto *np, const char *name,
                            Tensor *cond, const Onnx__GraphProto *then_gp,
                            const Onnx__GraphProto *else_gp) {
  Graph *g = im->g;
  size_t n = np->n_output;
  Tensor **then_outs = calloc(2 * n + 2, sizeof *then_outs), **else_outs = then_outs + n + 1;
  if (branch_outputs(im, np, name, then_gp, "then", then_outs) &&
      branch_outputs(im, np, name, else_gp, "else", else_outs)) {
    Tensor *pick = condition_scalar(g, name, cond);
    for (size_t i = 0; i < n; i++) {
      Tensor *to = *np->output[i] ? import_lookup(im, np->output[i]) : NULL;
      if (!to)
        continue; /* an output nobody reads */
      Node *sel = graph_add_node(g, OP_IF_SELECT, arena_printf(g->arena, "%s/output_%zu", name, i),
                                 3, 1);
      sel->in[0] = pick;
      sel->in[1] = then_outs[i];
      sel->in[2] = else_outs[i];
      sel->out[0] = to;
    }
  }
  free(then_outs);
}

/*
 * If. Where the condition is known at compile time (computed from
 * constants and shapes, as exporters write `if x.dim() == 4`, or bound
 * with --const-input) the chosen branch is imported in its place, and the
 * other is never read; where it is run-time data, select_branches.
 */
static void import_if(Importer *im, const Onnx__NodeProto *np, const char *name) {
  enum { MAX_IF_DEPTH = 64 };
  Graph *g = im->g;
  if (im->failed)
    return; /* the condition cannot be evaluated on a graph that did not import */
  if (im->if_depth >= MAX_IF_DEPTH) {
    ir_error(g, NULL, "node '%s' (If): Ifs nested more than %d deep", name, MAX_IF_DEPTH);
    im->failed = true;
    return;
  }
  const Onnx__GraphProto *then_gp = import_graph_attr(np, "then_branch"), *else_gp = import_graph_attr(np, "else_branch");
  if (count_names(np->input, np->n_input) != 1 || !then_gp || !else_gp) {
    ir_error(g, NULL, "node '%s' (If): expects one input, the condition, and the attributes "
             "then_branch and else_branch, each a graph", name);
    im->failed = true;
    return;
  }
  Tensor *cond = import_lookup(im, np->input[0]);
  if (!cond) {
    ir_error(g, NULL, "node '%s' (If): input '%s' is not defined by any node, initializer or "
             "graph input", name, np->input[0]);
    im->failed = true;
    return;
  }
  int before = ir_error_count();
  if (!graph_evaluate(g, cond)) {
    if (ir_error_count() != before) {
      im->failed = true;
      return;
    }
    const char *why = NULL;
    Graph *top = im->capture ? loop_capture_outer_graph(im) : g;
    int notes = top->nnotes; /* the --report lines of Ifs in the branches */
    if (then_gp->n_output == np->n_output && else_gp->n_output == np->n_output &&
        import_runtime_if(im, np, name, cond, then_gp, else_gp, &why)) {
      graph_note(top, "If '%s': a CUDA-graph IF node, only the branch taken runs", name);
      return;
    }
    top->nnotes = notes; /* the branches are imported again below */
    if (why)
      graph_note(top, "If '%s': both branches run (IfSelect): %s", name, why);
    im->if_depth++;
    select_branches(im, np, name, cond, then_gp, else_gp);
    im->if_depth--;
    return;
  }
  if (cond->dtype != DT_BOOL || tensor_numel(cond) != 1) {
    ir_error(g, NULL, "node '%s' (If): the condition '%s' must be one bool", name, cond->name);
    im->failed = true;
    return;
  }
  const Onnx__GraphProto *taken = condition_value(cond) ? then_gp : else_gp;
  if (taken->n_output != np->n_output) {
    ir_error(g, NULL, "node '%s' (If): the %s branch has %zu outputs, the node %zu", name,
             taken == then_gp ? "then" : "else", taken->n_output, np->n_output);
    im->failed = true;
    return;
  }
  im->if_depth++;
  inline_branch(im, np, name, taken);
  im->if_depth--;
}

/* ------------------------------------------------------------ Loop */

/* A value the importer needs now, made known where it can be: false, with
   an error naming the input to bind, when it depends on run-time data. */
bool import_known_now(Importer *im, const char *name, const char *op, Tensor *t,
                      const char *what) {
  int before = ir_error_count();
  if (graph_evaluate(im->g, t))
    return true;
  const Tensor *input = graph_input_behind(im->g, t);
  if (ir_error_count() == before && input)
    ir_error(im->g, NULL, "node '%s' (%s): its %s '%s' is computed at run time, and opc "
             "compiles %s only when it is known at compile time; it depends on graph input "
             "'%s' (bind it with --const-input)", name, op, what, t->name, op, input->name);
  else if (ir_error_count() == before)
    ir_error(im->g, NULL, "node '%s' (%s): its %s '%s' cannot be evaluated at compile time",
             name, op, what, t->name);
  im->failed = true;
  return false;
}

/* A constant scalar's value as an integer. */
static int64_t scalar_value(const Tensor *t) {
  return t->i64 ? t->i64[0] : (int64_t)t->f32[0];
}

/* Whether a value known at compile time is one element of `dtype`; false,
   reported, if not. */
static bool one_of(Importer *im, const char *name, const char *what, const Tensor *t,
                   DType dtype) {
  if (t->dtype == dtype && tensor_numel(t) == 1)
    return true;
  ir_error(im->g, NULL, "node '%s' (Loop): its %s '%s' must be one %s", name, what, t->name,
           dtype_onnx_name(dtype));
  im->failed = true;
  return false;
}

static Tensor *scalar_constant(Graph *g, const char *name, DType dtype, int64_t v) {
  Tensor *t = graph_add_tensor(g, name);
  t->dtype = dtype;
  tensor_set_shape(t, 0, NULL);
  t->i64 = arena_dup(g->arena, &v, sizeof v);
  return t;
}

/* Checks a Loop's inputs against its body; false after an error. */
static bool loop_shape_ok(Importer *im, const Onnx__NodeProto *np, const char *name,
                          const Onnx__GraphProto *body) {
  size_t nin = np->n_input;
  if (body && nin >= 2 && body->n_input == nin && body->n_output >= nin - 1 &&
      np->n_output == body->n_output - 1)
    return true;
  ir_error(im->g, NULL, "node '%s' (Loop): expects the inputs M, cond and the loop-carried "
           "values, and a body graph with as many inputs and one more output than the node",
           name);
  im->failed = true;
  return false;
}

/* The carried values and scan outputs after the last iteration, written to
   the Loop's outputs. */
static void loop_outputs(Importer *im, const Onnx__NodeProto *np, const char *name,
                         Tensor **carried_values, int carried, Tensor **stacked, int stride,
                         int iterations) {
  Graph *g = im->g;
  for (size_t i = 0; !im->failed && i < np->n_output; i++) {
    Tensor *to = *np->output[i] ? import_lookup(im, np->output[i]) : NULL;
    if (!to)
      continue; /* an output nobody reads */
    if (i < (size_t)carried) {
      connect_value(im, arena_printf(g->arena, "%s/output_%zu", name, i), carried_values[i], to);
    } else if (seq_of(im, stacked[(i - (size_t)carried) * (size_t)stride])) {
      ir_error(g, NULL, "node '%s' (Loop): its scan output '%s' is a sequence or optional; "
               "scan outputs are tensors", name, to->name);
      im->failed = true;
    } else if (iterations == 0) {
      ir_error(g, NULL, "node '%s' (Loop): runs no iteration, so its scan output '%s' has no "
               "shape opc can know", name, to->name);
      im->failed = true;
    } else {
      import_stack(im, name, &stacked[(i - (size_t)carried) * (size_t)stride], iterations, 0, to);
    }
  }
}

/* Whether a Loop carries a sequence or optional, which only unrolling
   lowers. */
static bool carries_sequence(Importer *im, const Onnx__NodeProto *np) {
  for (size_t i = 2; i < np->n_input; i++) {
    Tensor *t = *np->input[i] ? import_lookup(im, np->input[i]) : NULL;
    if (t && seq_of(im, t))
      return true;
  }
  return false;
}

/*
 * Loop whose trip count and conditions are known at compile time (constant,
 * computed from shapes, or bound with --const-input): the body is imported
 * once an iteration, each in a scope of its own ("loop/3/..."), the
 * loop-carried values threaded from one to the next, and each scan output
 * the iterations' values stacked along a new first axis. A count or
 * condition computed from run-time data is refused, naming the input to
 * bind; so is a loop of more than MAX_ITERATIONS.
 */
static void import_loop(Importer *im, const Onnx__NodeProto *np, const char *name) {
  enum { MAX_ITERATIONS = 1024 };
  Graph *g = im->g;
  const Onnx__GraphProto *body = import_graph_attr(np, "body");
  if (im->failed || !loop_shape_ok(im, np, name, body))
    return;
  int nin = (int)np->n_input, carried = nin - 2;
  int scans = (int)body->n_output - 1 - carried;
  /* Scan outputs, as many rows as iterations, without a declared bound,
     and carried sequences need the count at compile time: below, an
     error names the input to bind. */
  if ((scans == 0 || loop_scans_bounded(im, np, body)) && !carries_sequence(im, np) &&
      !loop_known_now(im, np, body) && !im->failed) {
    /* Quietly: a body that needs its iteration number at compile time (a
       Slice at it) is refused below instead, naming the input to bind. */
    int notes = g->nnotes; /* the --report lines of Ifs in the body, if it is unrolled */
    ir_quiet(true);
    import_runtime_loop(im, np, name, body);
    ir_quiet(false);
    if (!im->failed)
      return;
    im->failed = false;
    g->nnotes = notes;
  }
  if (im->failed)
    return;
  int64_t trips = INT64_MAX;
  Tensor *m = *np->input[0] ? import_lookup(im, np->input[0]) : NULL;
  if (*np->input[0] && (!m || !import_known_now(im, name, "Loop", m, "trip count") ||
                        !one_of(im, name, "trip count", m, DT_INT64)))
    return;
  if (m)
    trips = scalar_value(m);
  Tensor *cond = *np->input[1] ? import_lookup(im, np->input[1])
                               : scalar_constant(g, arena_printf(g->arena, "%s/cond", name),
                                                 DT_BOOL, 1);
  if (!cond || !import_known_now(im, name, "Loop", cond, "condition") ||
      !one_of(im, name, "condition", cond, DT_BOOL))
    return;
  Tensor **in = calloc((size_t)nin + 1, sizeof *in);
  Tensor **outs = calloc(body->n_output + 1, sizeof *outs);
  Tensor **stacked = calloc((size_t)scans * MAX_ITERATIONS + 1, sizeof *stacked);
  if (!in || !outs || !stacked) {
    ir_error(g, NULL, "node '%s' (Loop): out of memory", name);
    im->failed = true;
    free(in);
    free(outs);
    free(stacked);
    return;
  }
  for (int i = 0; i < carried; i++)
    if (!(in[2 + i] = import_lookup(im, np->input[2 + i]))) {
      ir_error(g, NULL, "node '%s' (Loop): input '%s' is not defined", name, np->input[2 + i]);
      im->failed = true;
    }
  int k = 0;
  for (; !im->failed && k < trips && scalar_value(cond) != 0; k++) {
    if (k == MAX_ITERATIONS || im->if_depth >= 64 || g->nnodes > LIMIT_NODES) {
      ir_error(g, NULL, "node '%s' (Loop): runs more than %d iterations, or unrolled passes the "
               "limit of %d nodes, or is nested too deep, for opc, which unrolls it at compile "
               "time", name, MAX_ITERATIONS, LIMIT_NODES);
      im->failed = true;
      break;
    }
    const char *scope = arena_printf(g->arena, "%s/%d", name, k);
    in[0] = scalar_constant(g, arena_printf(g->arena, "%s/iteration", scope), DT_INT64, k);
    in[1] = cond;
    im->if_depth++;
    bool imported = import_subgraph(im, body, scope, in, outs);
    im->if_depth--;
    for (size_t i = 0; imported && i < body->n_output; i++)
      if (!outs[i]) {
        ir_error(g, NULL, "node '%s' (Loop): body output '%s' is not produced by the body", name,
                 proto_str(body->output[i]->name));
        im->failed = true;
      }
    if (im->failed || !import_known_now(im, name, "Loop", outs[0], "body's condition") ||
        !one_of(im, name, "body's condition", outs[0], DT_BOOL))
      break;
    cond = outs[0];
    for (int i = 0; i < carried; i++)
      in[2 + i] = outs[1 + i];
    for (int j = 0; j < scans; j++)
      stacked[j * MAX_ITERATIONS + k] = outs[1 + carried + j];
  }
  loop_outputs(im, np, name, in + 2, carried, stacked, MAX_ITERATIONS, k);
  free(in);
  free(outs);
  free(stacked);
}

/* ------------------------------------------------------------ outputs */

static void import_outputs(Importer *im, const Onnx__GraphProto *gp) {
  for (size_t i = 0; i < gp->n_output; i++) {
    const char *name = proto_str(gp->output[i]->name);
    Tensor *t = graph_find_tensor(im->g, name);
    if (!t) {
      ir_error(im->g, NULL, "graph output '%s' is not produced by any node", name);
      im->failed = true;
      continue;
    }
    const SeqValue *v = seq_of(im, t);
    if (v) {
      ir_error(im->g, NULL, "graph output '%s' is %s; opc programs return tensors, so a "
               "sequence or optional is lowered only inside the model (return its elements "
               "instead: SequenceAt, ConcatFromSequence, OptionalGetElement)", name,
               seq_kind_str(v));
      im->failed = true;
      continue;
    }
    graph_add_output(im->g, t);
  }
  if (gp->n_output == 0) {
    ir_error(im->g, NULL, "the graph has no outputs");
    im->failed = true;
  }
}

/* A declared shape with every dimension fixed; false when any is symbolic. */
static bool static_shape(const Onnx__ValueInfoProto *vi, int *rank, int64_t *dims) {
  const Onnx__TypeProto__Tensor *tt = tensor_type(vi);
  if (!tt || !tt->shape || tt->shape->n_dim > IR_MAX_RANK)
    return false;
  for (size_t i = 0; i < tt->shape->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
    if (d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE || d->dim_value < 0)
      return false;
    dims[i] = d->dim_value;
  }
  *rank = (int)tt->shape->n_dim;
  /* A declaration beyond opc's limits cannot match an inferred shape. */
  return shape_fits(*rank, dims);
}

/*
 * Where the model declares a static shape (value_info, graph outputs) it
 * must agree with inference. For an intermediate value a disagreement is
 * only a warning, since a stale declaration does not change the
 * computation. For a graph output it is an error (`fatal`): the declared
 * shape is what a caller of the model allocates, and ONNX's checker refuses
 * such a model (a flipped bit in an output's dimension). Replaced input
 * shapes change everything downstream: no check; after --batch, only a
 * warning. False after reporting an error.
 */
/* A bounded tensor's declared dims are one run's: they must lie within
   its bounds. */
static bool within_bounds(const Tensor *t, const Tensor *declared) {
  if (!t->bounded || t->rank != declared->rank)
    return false;
  for (int d = 0; d < t->rank; d++)
    if (declared->dims[d] > t->dims[d])
      return false;
  return true;
}

static bool check_declared(Importer *im, Onnx__ValueInfoProto **vis, size_t count, bool fatal) {
  if (im->opt->nshapes > 0 || im->opt->nconsts > 0)
    return true;
  fatal &= im->opt->batch == 0;
  bool ok = true;
  for (size_t i = 0; i < count; i++) {
    int rank;
    int64_t dims[IR_MAX_RANK];
    Tensor *t = graph_find_tensor(im->g, proto_str(vis[i]->name));
    if (!t || t->dtype == DT_UNDEFINED || !static_shape(vis[i], &rank, dims))
      continue;
    Tensor declared = {.dtype = t->dtype};
    tensor_set_shape(&declared, rank, dims);
    if (tensor_same_shape(t, &declared) || within_bounds(t, &declared))
      continue;
    char want[128], got[128];
    tensor_type_str(&declared, want, sizeof want);
    tensor_type_str(t, got, sizeof got);
    if (fatal) {
      ir_error(im->g, t->producer, "graph output '%s' is declared %s but inferred %s", t->name,
               want, got);
      ok = false;
    } else {
      ir_warning(im->g, NULL, "'%s' is declared %s but inferred %s", t->name, want, got);
    }
  }
  return ok;
}

/* The static shapes the model declares, which let ir/pin.c take a shape
   input given at run time. Not where --input-shape or --batch change the
   shapes the declarations were written for. */
static void note_declared(Importer *im, Onnx__ValueInfoProto **vis, size_t count) {
  if (im->opt->nshapes > 0 || im->opt->batch != 0)
    return;
  for (size_t i = 0; i < count; i++) {
    Tensor *t = graph_find_tensor(im->g, proto_str(vis[i]->name));
    if (t && !t->is_input && static_shape(vis[i], &t->declared_rank, t->declared_dims))
      t->declared = true;
  }
}

/* An ONNX element type as a message names it: "int8", or its number when
   opc does not know it (float8 kinds, or a damaged value). */
static const char *elem_type_str(Graph *g, int32_t elem_type) {
  if (elem_type == 0)
    return "UNDEFINED (0)";
  const char *name = dtype_onnx_name((DType)elem_type);
  return strcmp(name, "undefined") != 0 ? name
                                        : arena_printf(g->arena, "data type %d", (int)elem_type);
}

/* After inference: every output must have a type, the one the model
   declares for it (ONNX Runtime refuses a model where they differ, and a
   caller would read the output as the declared type). */
static bool check_outputs(Importer *im, const Onnx__GraphProto *gp) {
  bool ok = true;
  for (int i = 0; i < im->g->noutputs; i++) {
    Tensor *t = im->g->outputs[i];
    if (t->dtype == DT_UNDEFINED) {
      ir_error(im->g, NULL, "graph output '%s' has no inferred type", t->name);
      ok = false;
      continue;
    }
    if (!dtype_at_interface(t->dtype)) {
      ir_error(im->g, NULL, "graph output '%s' is %s; opc programs return float32, float64, "
               "float16, bfloat16, int64, int32, int16, int8, uint64, uint32, uint16, uint8 or bool outputs", t->name,
               dtype_onnx_name(t->dtype));
      ok = false;
      continue;
    }
    const Onnx__TypeProto__Tensor *tt = tensor_type(gp->output[i]);
    if (tt && tt->has_elem_type && tt->elem_type != (int32_t)t->dtype) {
      ir_error(im->g, t->producer, "graph output '%s' is declared %s, but %s makes %s",
               t->name, elem_type_str(im->g, tt->elem_type),
               t->producer ? op_name(t->producer->op) : "the model", dtype_onnx_name(t->dtype));
      ok = false;
    }
  }
  return ok;
}

/* ------------------------------------------------------------- model */

static int64_t default_opset(const Onnx__ModelProto *m) {
  for (size_t i = 0; i < m->n_opset_import; i++)
    if (domain_is_default(m->opset_import[i]->domain))
      return m->opset_import[i]->version;
  return 1; /* the first models predate opset_import */
}

static bool import_graph(Importer *im, const Onnx__ModelProto *m) {
  Graph *g = im->g;
  const Onnx__GraphProto *gp = m->graph;
  if (!gp) {
    ir_error(g, NULL, "not a valid ONNX model (it has no graph)");
    return false;
  }
  g->opset = default_opset(m);
  if (!check_node_count(im, gp) || !check_names(im, gp))
    return false;
  if (gp->name && *gp->name)
    g->name = arena_strdup(g->arena, gp->name);
  if (!check_operators(im, gp))
    return false;

  im->top = gp;
  import_initializers(im, gp);
  for (size_t i = 0; i < gp->n_input; i++)
    import_input(im, gp->input[i]);
  check_overrides(im);
  check_bindings(im);
  define_outputs(im, gp);
  if (im->failed)
    return false;
  for (size_t i = 0; i < gp->n_node; i++)
    import_node(im, gp->node[i], i);
  import_outputs(im, gp);
  if (im->failed)
    return false;
  note_declared(im, gp->value_info, gp->n_value_info);
  note_declared(im, gp->output, gp->n_output);
  if (!graph_toposort(g) || !graph_infer_shapes(g) || !check_outputs(im, gp))
    return false;
  check_declared(im, gp->value_info, gp->n_value_info, false);
  return check_declared(im, gp->output, gp->n_output, true);
}

Graph *onnx_import(const char *path, const ImportOptions *opt) {
  static const ImportOptions no_options;
  size_t len;
  uint8_t *data = read_model(path, &len);
  if (!data)
    return NULL;
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, data);
  free(data);
  if (!m) {
    opc_error("%s: not a valid ONNX model (corrupt or truncated protobuf)", path);
    return NULL;
  }
  Graph *g = graph_new(path);
  if (opt && opt->max_memory > 0)
    g->max_memory = opt->max_memory;
  if (opt) {
    g->max_dims = opt->max_dims;
    g->nmax_dims = opt->nmax_dims;
  }
  Importer im = {.g = g, .dir = path_dir(g->arena, path), .opt = opt ? opt : &no_options};
  bool ok = import_graph(&im, m);
  free(im.seqs);
  onnx__model_proto__free_unpacked(m, NULL);
  if (!ok) {
    graph_free(g);
    return NULL;
  }
  return g;
}

/* ------------------------------------------------------ command line */

bool parse_shape(const char *s, InputShape *out) {
  int rank = 0;
  const char *p = s;
  for (;;) {
    if (*p < '0' || *p > '9' || rank == IR_MAX_RANK)
      return false;
    char *end;
    errno = 0;
    long long d = strtoll(p, &end, 10);
    if (errno || d <= 0)
      return false;
    out->dims[rank++] = d;
    p = end;
    if (*p == '\0')
      break;
    if (*p != 'x' && *p != ',')
      return false;
    p++;
  }
  out->rank = rank;
  return true;
}
