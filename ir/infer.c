/*
 * infer.c - running the shape functions over a graph, folding the shape
 * arithmetic (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) as it goes
 * so that every shape input is a constant by the time its reader runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapes.h"

static bool all_inputs_const(const Node *n) {
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] && !tensor_is_const(n->in[i]))
      return false;
  return true;
}

static bool check_arity(Graph *g, Node *n) {
  const OpInfo *info = op_info(n->op);
  if (n->op == OP_INVALID || !info->infer) {
    ir_error(g, n, "unsupported operator");
    return false;
  }
  /* Conv's fourth input is opc's fused residual, not ONNX's; a fused
     bias is one more input too. */
  int max_in = n->op == OP_CONV ? 4 : info->max_inputs;
  if (info->traits & T_FUSED_BIAS)
    max_in++;
  if (n->nin < info->min_inputs || (max_in >= 0 && n->nin > max_in)) {
    ir_error(g, n, "has %d inputs, expects %d to %d", n->nin, info->min_inputs, max_in);
    return false;
  }
  if (n->nout < info->min_outputs || (info->max_outputs >= 0 && n->nout > info->max_outputs)) {
    ir_error(g, n, "has %d outputs, expects %d to %d", n->nout, info->min_outputs,
             info->max_outputs);
    return false;
  }
  for (int i = 0; i < info->min_inputs; i++)
    if (!n->in[i]) {
      ir_error(g, n, "required input %d is missing", i);
      return false;
    }
  for (int i = 0; i < info->min_outputs; i++)
    if (!n->out[i]) {
      ir_error(g, n, "required output %d is missing", i);
      return false;
    }
  return true;
}

/* ---------------------------------------------------- type constraints */

/* A set of dtypes: bit t stands for DType t. */
typedef uint32_t TypeSet;

static TypeSet type_bit(DType t) { return (TypeSet)1 << t; }

/* Every dtype opc holds, in the order messages list them. */
static const DType all_dtypes[] = {
    DT_FLOAT16, DT_FLOAT, DT_DOUBLE, DT_BFLOAT16, DT_INT8,   DT_INT16, DT_INT32,
    DT_INT64,   DT_UINT8, DT_UINT16, DT_UINT32,   DT_UINT64, DT_BOOL,
};

/* A name of ops.def's type column: a group or one dtype; 0 if unknown. */
static TypeSet named_types(const char *name) {
  TypeSet flt = type_bit(DT_FLOAT16) | type_bit(DT_FLOAT) | type_bit(DT_DOUBLE) |
                type_bit(DT_BFLOAT16);
  TypeSet sint = type_bit(DT_INT8) | type_bit(DT_INT16) | type_bit(DT_INT32) | type_bit(DT_INT64);
  TypeSet uint = type_bit(DT_UINT8) | type_bit(DT_UINT16) | type_bit(DT_UINT32) |
                 type_bit(DT_UINT64);
  const struct {
    const char *name;
    TypeSet set;
  } groups[] = {
      {"float", flt},         {"sint", sint},
      {"uint", uint},         {"int", sint | uint},
      {"num", sint | uint | flt}, {"any", sint | uint | flt | type_bit(DT_BOOL)},
      {"index", type_bit(DT_INT32) | type_bit(DT_INT64)},
  };
  for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
    if (strcmp(groups[i].name, name) == 0)
      return groups[i].set;
  DType t = dtype_from_name(name);
  return t == DT_UNDEFINED || t == DT_STRING ? 0 : type_bit(t);
}

enum { MAX_TYPE_WORDS = 9 }; /* QLinearConv has 9 inputs */

/* One row's type column, parsed: per input word, the allowed dtypes, or
   the earlier input whose dtype it must share. */
typedef struct TypeRule {
  int nwords;
  TypeSet allowed[MAX_TYPE_WORDS];
  int same_as[MAX_TYPE_WORDS]; /* -1: none */
} TypeRule;

/* A mistake in ops.def is opc's bug: it stops every compile at once, so
   that any test finds it. */
static void bad_types(OpKind op, const char *why, const char *word) {
  fprintf(stderr, "opc: internal error: ops.def: %s: %s '%s'\n", op_name(op), why, word);
  abort();
}

static void parse_word(OpKind op, char *word, TypeRule *r) {
  int i = r->nwords++;
  r->same_as[i] = -1;
  r->allowed[i] = 0;
  if (word[0] == '=') {
    char *end;
    long k = strtol(word + 1, &end, 10);
    if (*end || end == word + 1 || k < 0 || k >= i)
      bad_types(op, "'=K' must name an earlier input:", word);
    r->same_as[i] = (int)k;
    return;
  }
  for (char *name = strtok(word, "|"); name; name = strtok(NULL, "|")) {
    TypeSet s = named_types(name);
    if (!s)
      bad_types(op, "unknown type set", name);
    r->allowed[i] |= s;
  }
}

static void parse_rule(OpKind op, TypeRule *r) {
  char text[128], *words[MAX_TYPE_WORDS];
  int count = 0;
  snprintf(text, sizeof text, "%s", op_info(op)->types);
  for (char *w = strtok(text, " "); w; w = strtok(NULL, " ")) {
    if (count == MAX_TYPE_WORDS)
      bad_types(op, "too many words in", op_info(op)->types);
    words[count++] = w;
  }
  r->nwords = 0;
  for (int i = 0; i < count; i++) /* after the split: parse_word uses strtok too */
    parse_word(op, words[i], r);
}

static const TypeRule *type_rule(OpKind op) {
  static TypeRule rules[OP_COUNT];
  static bool parsed;
  if (!parsed) {
    for (int k = 1; k < OP_COUNT; k++)
      parse_rule((OpKind)k, &rules[k]);
    parsed = true;
  }
  return &rules[op];
}

/* "f16, f32, f64, bf16" */
static const char *set_names(TypeSet s, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < sizeof all_dtypes / sizeof all_dtypes[0]; i++)
    if (s & type_bit(all_dtypes[i]) && len < size)
      len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "",
                              dtype_name(all_dtypes[i]));
  return buf;
}

/* Whether input i satisfies its word of the type column. */
static bool check_input_type(Graph *g, Node *n, const TypeRule *r, int i) {
  Tensor *t = n->in[i];
  int w = i < r->nwords ? i : r->nwords - 1;
  Tensor *like = r->same_as[w] >= 0 ? node_input(n, r->same_as[w]) : NULL;
  const char *op = op_name(n->op);
  if (like && like->dtype != t->dtype) {
    ir_error(g, n, "input '%s' of %s has type %s, expected the same type as input '%s' (%s)",
             t->name, op, dtype_name(t->dtype), like->name, dtype_name(like->dtype));
    return false;
  }
  char names[128];
  if (r->same_as[w] < 0 && !(r->allowed[w] & type_bit(t->dtype))) {
    ir_error(g, n, "input '%s' of %s has type %s, expected one of %s", t->name, op,
             dtype_name(t->dtype), set_names(r->allowed[w], names, sizeof names));
    return false;
  }
  return true;
}

/* The ONNX type constraints of ops.def's type column. */
static bool check_input_types(Graph *g, Node *n) {
  const TypeRule *r = type_rule(n->op);
  for (int i = 0; i < n->nin; i++) {
    Tensor *t = n->in[i];
    if (!t)
      continue;
    if (t->dtype == DT_UNDEFINED || dtype_size(t->dtype) == 0) {
      ir_error(g, n, "input '%s' has no known type", t->name);
      return false;
    }
    if (r->nwords > 0 && !check_input_type(g, n, r, i))
      return false;
  }
  return true;
}

/* ------------------------------------------------- where the work happens */

/* A kind without kernels runs only when it folds: every input must be a
   constant. The message names the graph input to bind with --const-input;
   the conformance runner binds it to its test data and tries again. */
static bool check_compile_time_inputs(Graph *g, Node *n) {
  if (op_info(n->op)->eval != AT_COMPILE_TIME)
    return true;
  for (int i = 0; i < n->nin; i++) {
    Tensor *t = n->in[i];
    if (!t || tensor_is_const(t))
      continue;
    const Tensor *input = graph_input_behind(g, t);
    if (input && input != t)
      ir_error(g, n, "%s runs only at compile time here: input '%s' is not a compile-time "
               "constant; it depends on graph input '%s' (bind it with --const-input)",
               op_name(n->op), t->name, input->name);
    else
      ir_error(g, n, "%s runs only at compile time here: input '%s' is not a compile-time "
               "constant", op_name(n->op), t->name);
    return false;
  }
  return true;
}

/* A run-time value needs a storage type of net.c (dtype_at_run_time);
   whether the operator's kernels take it is the backend's question. Other
   dtypes pass when the node folds at compile time (all its inputs
   constant), or on a parameter input (shapes, axes, indices), which the
   backend reads as constants. */
static bool compile_time_type(Graph *g, Node *n, const char *role, const Tensor *t) {
  ir_error(g, n, "%s '%s' is %s, a type that exists at compile time only (run-time values "
           "are float32, float64, float16, int64, int32, int16, int8, uint64, uint32, uint16, uint8 "
           "or bool)",
           role, t->name, dtype_onnx_name(t->dtype));
  return false;
}

/* A data input or output of n of a type net.c cannot store, with its
   role in *role; NULL when there is none. */
static const Tensor *compile_time_value(const Node *n, const char **role) {
  *role = "input";
  for (int i = 0; i < n->nin; i++) {
    Tensor *t = n->in[i];
    if (t && !op_input_is_param(n->op, i) && !dtype_at_run_time(t->dtype))
      return t;
  }
  *role = "output";
  for (int i = 0; i < n->nout; i++)
    if (n->out[i] && !dtype_at_run_time(n->out[i]->dtype))
      return n->out[i];
  return NULL;
}

static bool check_run_time_dtypes(Graph *g, Node *n) {
  const OpInfo *info = op_info(n->op);
  if (info->eval != AT_RUN_TIME || (op_is_evaluable(n->op) && all_inputs_const(n)))
    return true;
  const char *role;
  const Tensor *t = compile_time_value(n, &role);
  return !t || compile_time_type(g, n, role, t);
}

/* A constant integer exponent of Pow (allowed since opset 12) becomes a float
   constant, so that the backend sees float32 run-time operands only. */
static void float_exponent(Graph *g, Node *n) {
  Tensor *e = n->op == OP_POW ? node_input(n, 1) : NULL;
  if (!e || !e->i64 || !dtype_is_integer(e->dtype))
    return;
  Tensor *f = graph_add_tensor(g, arena_printf(g->arena, "%s_f32", e->name));
  f->dtype = DT_FLOAT;
  tensor_set_shape(f, e->rank, e->dims);
  int64_t count = tensor_numel(e);
  f->f32 = arena_alloc(g->arena, sizeof(float) * (size_t)(count ? count : 1));
  for (int64_t i = 0; i < count; i++)
    f->f32[i] = (float)e->i64[i];
  n->in[1] = f;
  graph_rebuild_uses(g);
}

/* The run-time dtype check comes after the shape function, which
   resolves Cast's target type. */
bool node_infer(Graph *g, Node *n) {
  float_exponent(g, n);
  return check_arity(g, n) && check_input_types(g, n) && check_compile_time_inputs(g, n) &&
         op_info(n->op)->infer(g, n) && infer_bounds(g, n) && check_run_time_dtypes(g, n) &&
         (infer_symbols(g, n), true);
}

void report_not_folded(const Graph *g, const Node *n) {
  int64_t count = 0;
  for (int i = 0; i < n->nout; i++)
    if (n->out[i])
      count += tensor_numel(n->out[i]); /* each under the tensor limit: no overflow */
  /* Why it had to fold: no kernels, or a value of a compile-time type. */
  const char *role;
  const Tensor *t = compile_time_value(n, &role);
  char why[LIMIT_NAME_BYTES + 64] = "";
  if (op_info(n->op)->eval == AT_RUN_TIME && t)
    snprintf(why, sizeof why, " (its %s '%s' is %s)", role, t->name, dtype_onnx_name(t->dtype));
  if (count > FOLD_MAX_ELEMENTS)
    ir_error(g, n, "%s runs only at compile time here%s, and its result is too big to fold: "
             "%lld elements, limit %lld", op_name(n->op), why, (long long)count,
             (long long)FOLD_MAX_ELEMENTS);
  else
    ir_error(g, n, "%s runs only at compile time here%s, and opc could not evaluate it "
             "(%lld elements of output)", op_name(n->op), why, (long long)count);
}

/* A node that did not fold has nowhere to run when its kind has no
   kernels or it holds a value of a type that exists at compile time only. */
static bool must_fold(Graph *g, Node *n) {
  const char *role;
  if (op_info(n->op)->eval == AT_RUN_TIME && !compile_time_value(n, &role))
    return false;
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] && n->in[i]->bounded && (op_info(n->op)->traits & T_BOUND_SHAPE))
      return false; /* Shape of a run's dims runs (ir/bounds.c) */
  report_not_folded(g, n);
  return true;
}

/* node_infer, keeping the storage order an output was declared with in
   .ir text (channels-last strides) when its dims come out the same. */
static bool infer_keeping_order(Graph *g, Node *n) {
  enum { MAX_KEPT = 8 };
  Tensor kept[MAX_KEPT];
  int nkept = n->nout < MAX_KEPT ? n->nout : MAX_KEPT;
  for (int i = 0; i < nkept; i++)
    if (n->out[i])
      kept[i] = *n->out[i];
  if (!node_infer(g, n))
    return false;
  for (int i = 0; i < nkept; i++) {
    Tensor *t = n->out[i];
    if (t && !t->alias_of && kept[i].rank == t->rank && tensor_same_shape(&kept[i], t) &&
        tensor_has_dense_strides(&kept[i]))
      memcpy(t->strides, kept[i].strides, sizeof t->strides);
  }
  return true;
}

/*
 * A node whose every output is empty (a zero dimension) has nothing to
 * compute, whatever its inputs: its outputs become empty constants and the
 * node folds away, so that no kernel sees an empty tensor (cuDNN refuses a
 * zero dimension: a batch of 0 made the program fail at run time).
 */
static void fold_if_empty(Graph *g, Node *n) {
  for (int i = 0; i < n->nout; i++)
    if (n->out[i] && (tensor_numel(n->out[i]) != 0 || n->out[i]->alias_of))
      return;
  for (int i = 0; i < n->nout; i++) {
    Tensor *t = n->out[i];
    if (!t || tensor_is_const(t))
      continue;
    if (dtype_is_float(t->dtype))
      t->f32 = arena_alloc(g->arena, sizeof(float));
    else
      t->i64 = arena_alloc(g->arena, sizeof(int64_t));
  }
}

/*
 * A run-time value whose every element is known in every run (ir/symbolic.c:
 * a constant dim of a bounded tensor's Shape, Gather(Shape(boxes), 1)) is a
 * constant: its readers fold as on a static shape (torchvision's
 * Range(0, classes)). The node that computes it then issues nothing.
 */
static void fold_known_symbols(Graph *g, Node *n) {
  for (int i = 0; i < n->nout; i++) {
    Tensor *t = n->out[i];
    if (!t || !t->sym || tensor_is_const(t) || t->bounded || t->is_output)
      continue;
    int64_t count = tensor_numel(t);
    for (int64_t k = 0; k < count; k++)
      if (t->sym[k].origin)
        return;
    int64_t *values = arena_alloc(g->arena, sizeof(int64_t) * (size_t)(count ? count : 1));
    for (int64_t k = 0; k < count; k++)
      values[k] = t->sym[k].offset;
    t->i64 = values;
  }
}

/* The nodes t depends on, each after its producers: a depth-first walk
   with an explicit stack, as a model may be thousands of nodes deep. */
static int ancestors(Graph *g, Tensor *t, Node **order) {
  bool *seen = calloc((size_t)g->nnodes + 1, sizeof(bool));
  Node **stack = malloc(sizeof(Node *) * ((size_t)g->nnodes + 1));
  int *next = calloc((size_t)g->nnodes + 1, sizeof(int));
  int depth = 0, count = 0;
  if (t->producer) {
    stack[depth++] = t->producer;
    seen[t->producer->id] = true;
  }
  while (depth > 0) {
    Node *n = stack[depth - 1];
    if (next[n->id] == n->nin) {
      order[count++] = n;
      depth--;
      continue;
    }
    Tensor *in = n->in[next[n->id]++];
    if (in && in->producer && !seen[in->producer->id]) {
      seen[in->producer->id] = true;
      stack[depth++] = in->producer;
    }
  }
  free(seen);
  free(stack);
  free(next);
  return count;
}

bool graph_evaluate(Graph *g, Tensor *t) {
  if (tensor_is_const(t))
    return true;
  graph_rebuild_uses(g);
  Node **order = malloc(sizeof(Node *) * ((size_t)g->nnodes + 1));
  int count = ancestors(g, t, order);
  bool ok = true;
  for (int i = 0; i < count && ok; i++) {
    Node *n = order[i];
    ok = infer_keeping_order(g, n);
    if (ok && (op_info(n->op)->eval == FROM_SHAPES || all_inputs_const(n)))
      node_fold(g, n); /* false alone just means "not evaluable" */
  }
  free(order);
  return ok && tensor_is_const(t);
}

bool graph_infer_shapes(Graph *g) {
  if (!graph_toposort(g))
    return false;
  /* A failed node poisons its outputs; their readers are skipped silently
     so that each real problem is reported once. */
  bool *bad = calloc((size_t)g->ntensors + 1, sizeof(bool));
  bool ok = true;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    bool skip = false;
    for (int j = 0; j < n->nin; j++)
      if (n->in[j] && bad[n->in[j]->id])
        skip = true;
    bool done = !skip && pin_shape_input(g, n) && infer_keeping_order(g, n) &&
                check_pinned_output(g, n);
    /* Shape and Size always fold: they read only shapes, which are static.
       Other kinds fold when all their inputs are known. */
    if (done && (op_info(n->op)->eval == FROM_SHAPES || all_inputs_const(n))) {
      int before = ir_error_count();
      bool folded = node_fold(g, n); /* false alone just means "not evaluable" */
      done = ir_error_count() == before && (folded || !must_fold(g, n));
    }
    if (done) {
      fold_if_empty(g, n);
      fold_known_symbols(g, n);
    }
    if (!done) {
      ok = false;
      for (int j = 0; j < n->nout; j++)
        if (n->out[j])
          bad[n->out[j]->id] = true;
    }
  }
  free(bad);
  /* Shape functions may swap in normalised inputs (legacy PRelu slopes). */
  graph_rebuild_uses(g);
  return ok;
}
