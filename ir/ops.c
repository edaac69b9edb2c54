/*
 * ops.c - the operator table: name, arity and shape function of each kind.
 *
 * Shape functions follow the ONNX operator specification, opsets 7 to 21.
 * Where an opset moved a parameter from an attribute to an input (Split's
 * split, Squeeze's axes, Pad's pads, ...) the input wins when present and
 * the attribute is read otherwise, so one function serves every version.
 * Inputs that decide a shape must be compile-time constants by the time a
 * shape function runs: graph_infer_shapes folds shape arithmetic as it goes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ir.h"
#include "scalar.h"
#include "shapes.h"

/* ------------------------------------------------------------ helpers */

/* Bound on one dimension computed in floating point, so that it converts
   to int64 safely; set_out then checks the tensor against the limits. */
#define MAX_DIM ((int64_t)1 << 59)

static Tensor *in(const Node *n, int i) { return node_input(n, i); }

/* Dims from attributes and constants can be anything: arithmetic on them
   is checked so that a hostile model gets an error, not an overflow. */
static bool checked(Graph *g, Node *n, bool overflowed) {
  if (overflowed)
    ir_error(g, n, "dimension arithmetic overflows");
  return !overflowed;
}

/* Sets an output's type. A view keeps its strides (they describe where it
   lives in its storage), everything else becomes contiguous. */
static bool set_out(Graph *g, Node *n, int slot, DType dt, int rank, const int64_t *dims) {
  if (slot >= n->nout || !n->out[slot])
    return true; /* an absent optional output */
  if (rank > IR_MAX_RANK) {
    ir_error(g, n, "output rank %d is beyond opc's limit of %d", rank, IR_MAX_RANK);
    return false;
  }
  for (int i = 0; i < rank; i++)
    if (dims[i] < 0) {
      ir_error(g, n, "output dimension %d would be negative (%lld)", i, (long long)dims[i]);
      return false;
    }
  Tensor *t = n->out[slot];
  /* Checked here, before any evaluator or planner sizes storage by it. */
  if (!check_tensor_size(g, n, "output", t->name, dt, rank, dims))
    return false;
  /* An empty tensor's strides count its zero dimensions as 1. */
  if (!shape_fits(rank, dims)) {
    ir_error(g, n, "output dimensions multiply to more than 2^59");
    return false;
  }
  t->dtype = dt;
  if (t->alias_of) {
    t->rank = rank;
    for (int i = 0; i < rank; i++)
      t->dims[i] = dims[i];
  } else {
    tensor_set_shape(t, rank, dims);
  }
  return true;
}

static bool same_as(Graph *g, Node *n, int slot, const Tensor *x) {
  return set_out(g, n, slot, x->dtype, x->rank, x->dims);
}

static bool resolve_axis(Graph *g, Node *n, int64_t axis, int rank, int *out) {
  if (axis < -rank || axis >= rank) {
    ir_error(g, n, "axis %lld is out of range for rank %d", (long long)axis, rank);
    return false;
  }
  *out = (int)(axis < 0 ? axis + rank : axis);
  return true;
}

/*
 * A yes-or-no attribute (keepdims, ceil_mode, ...): 0 or 1, or absent for
 * `dflt`. Other values are refused: implementations read them apart (ONNX
 * Runtime takes keepdims=3, largest=2 or ceil_mode=2 as 0, transA=2 as 1,
 * and refuses CumSum's exclusive=2), so any reading would be a guess.
 */
static bool flag_attr(Graph *g, Node *n, const char *name, bool dflt, bool *out) {
  int64_t v = node_attr_int(n, name, dflt);
  if (v != 0 && v != 1) {
    ir_error(g, n, "attribute '%s' is %lld; it must be 0 or 1", name, (long long)v);
    return false;
  }
  *out = v == 1;
  return true;
}

static bool need_rank(Graph *g, Node *n, const Tensor *t, int lo, int hi) {
  if (t->rank < lo || t->rank > hi) {
    if (lo == hi)
      ir_error(g, n, "input '%s' must have rank %d, has %d", t->name, lo, t->rank);
    else
      ir_error(g, n, "input '%s' must have rank %d to %d, has %d", t->name, lo, hi, t->rank);
    return false;
  }
  return true;
}

/* Reports that input t (a "shape" or "labels" input) must be known when opc
   runs, naming the graph input to bind when t is computed from one. */
static bool not_constant(Graph *g, Node *n, const char *role, const Tensor *t) {
  const Tensor *input = graph_input_behind(g, t);
  if (input && input != t)
    ir_error(g, n, "%s input '%s' is not a compile-time constant; it depends on graph input "
             "'%s' (bind it with --const-input)", role, t->name, input->name);
  else
    ir_error(g, n, "%s input '%s' is not a compile-time constant (bind it with --const-input)",
             role, t->name);
  return false;
}

static bool need_const(Graph *g, Node *n, const Tensor *t) {
  return tensor_is_const(t) || not_constant(g, n, "shape", t);
}

/* Checks a shape-deciding input: a compile-time constant of rank 0 or 1
   whose values are of the wanted kind (`kind_ok`, named by `kind`). */
static bool const_vector(Graph *g, Node *n, const Tensor *t, bool kind_ok, const char *kind) {
  if (!need_const(g, n, t))
    return false;
  if (!kind_ok) {
    ir_error(g, n, "shape input '%s' must be %s tensor, is %s", t->name, kind,
             dtype_name(t->dtype));
    return false;
  }
  if (t->rank > 1) {
    ir_error(g, n, "shape input '%s' must be 1-D, has rank %d", t->name, t->rank);
    return false;
  }
  return true;
}

/* An input that decides a shape left out (an empty name), where the
   arity check cannot tell: Slice's starts and ends, say, are optional
   only together with the opset-1 form. */
static bool absent_shape_input(Graph *g, Node *n) {
  ir_error(g, n, "a shape input it needs is absent");
  return false;
}

/* The values of an integer input that decides a shape; it must be a
   compile-time constant of rank 0 or 1. */
static bool symbolic_shape(const Tensor *t, int64_t *vals, int *count);

static bool const_ints(Graph *g, Node *n, const Tensor *t, const int64_t **vals, int *count) {
  if (!t)
    return absent_shape_input(g, n);
  if (!const_vector(g, n, t, dtype_is_integer(t->dtype) && t->i64, "an integer"))
    return false;
  *vals = t->i64;
  *count = (int)tensor_numel(t);
  return true;
}

/* The same for a float input (Resize's and Upsample's scales). */
static bool const_floats(Graph *g, Node *n, const Tensor *t, const float **vals, int *count) {
  if (!t)
    return absent_shape_input(g, n);
  if (!const_vector(g, n, t, dtype_is_float(t->dtype) && t->f32, "a float"))
    return false;
  *vals = t->f32;
  *count = (int)tensor_numel(t);
  return true;
}

/* Ints that later opsets moved from an attribute into input 1 (axes, pads,
   split sizes, a target shape): the input's constant values when it is
   there, else the attribute's; *count -1 when neither is. */
static bool ints_input_or_attr(Graph *g, Node *n, const char *attr, const int64_t **vals,
                               int *count) {
  if (in(n, 1))
    return const_ints(g, n, in(n, 1), vals, count);
  *count = node_attr_ints(n, attr, vals);
  return true;
}

/* Trilu's k, CumSum's axis: a constant integer scalar (rank 0 or one
   element). */
static bool const_scalar_int(Graph *g, Node *n, const Tensor *t, int64_t *out) {
  const int64_t *v;
  int count;
  if (!const_ints(g, n, t, &v, &count))
    return false;
  if (count != 1) {
    ir_error(g, n, "'%s' must hold one value, has %d", t->name, count);
    return false;
  }
  *out = v[0];
  return true;
}

/* Whether the shape (rb, db) broadcasts to (ra, da) without changing it
   (ONNX's unidirectional broadcasting). */
static bool broadcasts_to(int rb, const int64_t *db, int ra, const int64_t *da) {
  if (rb > ra)
    return false;
  for (int i = 0; i < rb; i++) {
    int64_t b = db[rb - 1 - i], a = da[ra - 1 - i];
    if (b != 1 && b != a)
      return false;
  }
  return true;
}

/* Index of s in names, or -1. */
static int name_index(const char *const *names, int count, const char *s) {
  for (int i = 0; i < count; i++)
    if (strcmp(names[i], s) == 0)
      return i;
  return -1;
}

static const char *shape_str(const Tensor *t, char *buf, size_t size) {
  return tensor_type_str(t, buf, size);
}

/* ------------------------------------------------------- broadcasting */

bool broadcast_shape(int ra, const int64_t *da, int rb, const int64_t *db, int *rank,
                     int64_t *dims) {
  int r = ra > rb ? ra : rb;
  if (r > IR_MAX_RANK)
    return false;
  for (int i = 0; i < r; i++) {
    int64_t a = i < ra ? da[ra - 1 - i] : 1;
    int64_t b = i < rb ? db[rb - 1 - i] : 1;
    if (a != b && a != 1 && b != 1)
      return false;
    dims[r - 1 - i] = a == 1 ? b : a;
  }
  *rank = r;
  return true;
}

void broadcast_strides(int rt, const int64_t *dt, int rank, const int64_t *dims,
                       int64_t *strides) {
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; i--) {
    int j = i - (rank - rt);
    if (j < 0 || dt[j] == 1 || dims[i] == 1) {
      strides[i] = 0;
      if (j >= 0)
        stride *= dt[j];
    } else {
      strides[i] = stride;
      stride *= dt[j];
    }
  }
}

int64_t broadcast_offset(int64_t index, int rank, const int64_t *dims, const int64_t *strides) {
  int64_t off = 0;
  for (int i = rank - 1; i >= 0; i--) {
    if (dims[i] > 0) {
      off += (index % dims[i]) * strides[i];
      index /= dims[i];
    }
  }
  return off;
}

/* --------------------------------------------------- elementwise kinds */

/* The default of float attribute `name` in a row's attrs column
   ("alpha=0.2, beta=0.5"), or dflt when the row gives none. */
static float attr_default(const OpInfo *info, const char *name, float dflt) {
  size_t len = strlen(name);
  for (const char *p = info->attrs; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] != 0)) {
    p += strspn(p, " ");
    if (strncmp(p, name, len) == 0 && p[len] == '=')
      return strtof(p + len + 1, NULL);
  }
  return dflt;
}

/* The attributes of activations, with the spec's defaults: the row's, and
   for the attributes it does not name, values that no kernel reads. */
static void act_params(Node *n) {
  const OpInfo *info = op_info(n->op);
  n->p.act.alpha = node_attr_float(n, "alpha", attr_default(info, "alpha", 1.0f));
  n->p.act.beta = node_attr_float(n, "beta", attr_default(info, "beta", 0.5f));
  n->p.act.gamma = node_attr_float(n, "gamma", attr_default(info, "gamma", 1.05070102214813232421875f));
  n->p.act.lambd = node_attr_float(n, "lambd", attr_default(info, "lambd", 0.5f));
  n->p.act.bias = node_attr_float(n, "bias", attr_default(info, "bias", 0.0f));
  n->p.act.tanh = strcmp(node_attr_string(n, "approximate", "none"), "tanh") == 0;
}

static bool infer_unary(Graph *g, Node *n) {
  if (op_info(n->op)->params == PARAMS_ACT)
    act_params(n);
  return same_as(g, n, 0, in(n, 0));
}

static bool infer_clip(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  /* Before opset 11 the bounds are attributes. */
  n->p.clip.has_min = node_attr(n, "min") != NULL;
  n->p.clip.has_max = node_attr(n, "max") != NULL;
  n->p.clip.min = node_attr_float(n, "min", 0.0f);
  n->p.clip.max = node_attr_float(n, "max", 0.0f);
  for (int i = 1; i <= 2; i++) {
    Tensor *b = in(n, i);
    if (b && tensor_numel(b) != 1) {
      ir_error(g, n, "bound '%s' must be a scalar, has %lld elements", b->name,
               (long long)tensor_numel(b));
      return false;
    }
  }
  return same_as(g, n, 0, x);
}

/* Before opset 7 a 1-D slope held one value per channel (axis 1). The IR
   keeps one meaning, numpy broadcasting, so such a slope is replaced by a
   copy shaped [C,1,...,1]. */
static bool per_channel_slope(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *slope = in(n, 1);
  if (g->opset <= 0 || g->opset >= 7 || slope->rank != 1 || x->rank <= 2 ||
      slope->dims[0] != x->dims[1] || slope->dims[0] == 1)
    return true;
  if (!tensor_is_const(slope)) {
    ir_error(g, n, "a per-channel slope (opset %lld) must be a constant", (long long)g->opset);
    return false;
  }
  const char *name = arena_printf(g->arena, "%s.per_channel", slope->name);
  Tensor *t = graph_add_tensor(g, graph_find_tensor(g, name) ? NULL : name);
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < x->rank - 1; i++)
    dims[i] = i == 0 ? slope->dims[0] : 1;
  t->dtype = slope->dtype;
  tensor_set_shape(t, x->rank - 1, dims);
  size_t bytes = (size_t)slope->dims[0] * (slope->f32 ? sizeof(float) : sizeof(int64_t));
  t->f32 = slope->f32 ? arena_dup(g->arena, slope->f32, bytes) : NULL;
  t->i64 = slope->i64 ? arena_dup(g->arena, slope->i64, bytes) : NULL;
  n->in[1] = t;
  return true;
}

static bool infer_prelu(Graph *g, Node *n) {
  if (!per_channel_slope(g, n))
    return false;
  Tensor *x = in(n, 0), *slope = in(n, 1);
  char a[128], b[128];
  if (!broadcasts_to(slope->rank, slope->dims, x->rank, x->dims)) {
    ir_error(g, n, "slope %s does not broadcast to input %s", shape_str(slope, a, sizeof a),
             shape_str(x, b, sizeof b));
    return false;
  }
  return same_as(g, n, 0, x);
}

static bool infer_gelu(Graph *g, Node *n) {
  const char *s = node_attr_string(n, "approximate", "none");
  if (strcmp(s, "none") != 0 && strcmp(s, "tanh") != 0) {
    ir_error(g, n, "unknown approximate '%s'", s);
    return false;
  }
  act_params(n);
  return same_as(g, n, 0, in(n, 0));
}

/* The numpy broadcast of the inputs from `first` on into (rank, dims).
   Their dtypes are the type column's business (infer.c). */
static bool broadcast_inputs(Graph *g, Node *n, int first, int *rank, int64_t *dims) {
  Tensor *a = in(n, first);
  *rank = a->rank;
  memcpy(dims, a->dims, sizeof(int64_t) * IR_MAX_RANK);
  for (int i = first + 1; i < n->nin; i++) {
    Tensor *t = in(n, i);
    if (!t) {
      ir_error(g, n, "input %d is missing", i);
      return false;
    }
    int64_t out[IR_MAX_RANK];
    if (!broadcast_shape(*rank, dims, t->rank, t->dims, rank, out)) {
      char x[128], y[128];
      ir_error(g, n, "shapes %s and %s do not broadcast", shape_str(a, x, sizeof x),
               shape_str(t, y, sizeof y));
      return false;
    }
    memcpy(dims, out, sizeof(int64_t) * IR_MAX_RANK);
  }
  return true;
}

/* Add, Sub, Mul, Div, Pow, Sum, Max, Min, Mean, And, Or, Xor, Bitwise*. */
static bool infer_broadcast(Graph *g, Node *n) {
  int rank;
  int64_t dims[IR_MAX_RANK];
  return broadcast_inputs(g, n, 0, &rank, dims) &&
         set_out(g, n, 0, in(n, 0)->dtype, rank, dims);
}

/* Equal, Greater, Less, GreaterOrEqual, LessOrEqual. */
static bool infer_compare(Graph *g, Node *n) {
  int rank;
  int64_t dims[IR_MAX_RANK];
  return broadcast_inputs(g, n, 0, &rank, dims) && set_out(g, n, 0, DT_BOOL, rank, dims);
}

static bool infer_bit_shift(Graph *g, Node *n) {
  const char *dir = node_attr_string(n, "direction", "");
  if (strcmp(dir, "LEFT") != 0 && strcmp(dir, "RIGHT") != 0) {
    ir_error(g, n, "direction must be LEFT or RIGHT, is '%s'", dir);
    return false;
  }
  n->p.bit_shift.left = strcmp(dir, "LEFT") == 0;
  return infer_broadcast(g, n);
}

/* IsNaN, IsInf. */
static bool infer_is_class(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  if (!flag_attr(g, n, "detect_negative", true, &n->p.is_inf.negative) ||
      !flag_attr(g, n, "detect_positive", true, &n->p.is_inf.positive))
    return false;
  return set_out(g, n, 0, DT_BOOL, x->rank, x->dims);
}

/* Where(condition, X, Y): all three broadcast together. */
static bool infer_where(Graph *g, Node *n) {
  int rank;
  int64_t dims[IR_MAX_RANK];
  return broadcast_inputs(g, n, 0, &rank, dims) &&
         set_out(g, n, 0, in(n, 1)->dtype, rank, dims);
}

/* IfSelect of one bounded branch and one static (torchvision's `if
   boxes.numel() == 0: return an empty keep`): the output is a bound of its
   own (ir/bounds.c), the bounded branch's dims, its run the chosen
   branch's. The static one must fit: the same dims but along the run-time
   axis, where it has at most the bound. */
static bool if_select_run(Graph *g, Node *n, const Tensor *a, const Tensor *b) {
  const Tensor *run = a->bounded ? a : b, *other = a->bounded ? b : a;
  bool fits = !other->bounded && other->rank == run->rank;
  for (int d = 0; fits && d < run->rank; d++)
    fits = d == run->bound_axis ? other->dims[d] <= run->dims[d] : other->dims[d] == run->dims[d];
  if (!fits) {
    char ta[IR_MAX_RANK * 24 + 16], tb[IR_MAX_RANK * 24 + 16];
    ir_error(g, n, "the then branch gives '%s' of type %s and the else branch '%s' of type %s; "
             "opc runs an If whose condition is run-time data on a branch of run-time size "
             "only where the other is static and differs at most along that axis, within "
             "its bound", a->name, tensor_type_str(a, ta, sizeof ta), b->name,
             tensor_type_str(b, tb, sizeof tb));
    return false;
  }
  if (!set_out(g, n, 0, run->dtype, run->rank, run->dims))
    return false;
  n->out[0]->bounded = true;
  n->out[0]->bound_axis = run->bound_axis;
  return true;
}

/* IfSelect(condition, then, else): the If's output from the branch its
   one-value condition picks; the branches must agree on the shape, which
   ONNX allows them not to, but along a run-time axis. */
static bool infer_if_select(Graph *g, Node *n) {
  Tensor *cond = in(n, 0), *a = in(n, 1), *b = in(n, 2);
  if (cond->rank != 0) {
    ir_error(g, n, "condition '%s' must be one value of rank 0, is rank %d", cond->name, cond->rank);
    return false;
  }
  if (a->bounded != b->bounded || (a->bounded && !tensor_same_shape(a, b)))
    return if_select_run(g, n, a, b);
  if (!tensor_same_shape(a, b)) {
    char ta[IR_MAX_RANK * 24 + 16], tb[IR_MAX_RANK * 24 + 16];
    ir_error(g, n, "the then branch gives '%s' of type %s and the else branch '%s' of type %s; "
             "opc runs an If whose condition is run-time data only when its branches' outputs "
             "have one shape", a->name, tensor_type_str(a, ta, sizeof ta), b->name,
             tensor_type_str(b, tb, sizeof tb));
    return false;
  }
  if (a->bounded || b->bounded) {
    ir_error(g, n, "a branch's output '%s' has a size known only at run time; opc runs an If "
             "whose condition is run-time data only on outputs of static shape",
             a->bounded ? a->name : b->name);
    return false;
  }
  return set_out(g, n, 0, a->dtype, a->rank, a->dims);
}

/* The same type on both sides of a Loop body's boundary: a carried value
   keeps its dtype and static shape from one iteration to the next. */
static bool loop_types_agree(Graph *g, Node *n, const Tensor *a, const Tensor *b,
                             const char *what) {
  if (a->dtype == b->dtype && tensor_same_shape(a, b) && !a->bounded && !b->bounded)
    return true;
  char ta[IR_MAX_RANK * 24 + 16], tb[IR_MAX_RANK * 24 + 16];
  ir_error(g, n, "%s: '%s' is %s%s but '%s' is %s%s; opc runs a Loop at run time only when "
           "each carried value keeps its dtype and static shape", what, a->name,
           tensor_type_str(a, ta, sizeof ta), a->bounded ? " (bounded)" : "", b->name,
           tensor_type_str(b, tb, sizeof tb), b->bounded ? " (bounded)" : "");
  return false;
}

/* A run-time Loop: its outputs are its carried inputs' types; the last,
   its body's memory, is the body's arena (one byte until it is planned). */
static bool infer_loop(Graph *g, Node *n) {
  Graph *body = n->body;
  int carried = body ? body->noutputs - 1 : -1;
  if (!body || carried < 0 || n->nout != carried + 1 || body->ninputs != n->nin) {
    ir_error(g, n, "a Loop node needs its body graph, with one input per node input and one "
             "output more than the carried values");
    return false;
  }
  Tensor *m = in(n, 0), *cond = in(n, 1);
  if ((m && (m->dtype != DT_INT64 || tensor_numel(m) != 1)) ||
      (cond && (cond->dtype != DT_BOOL || tensor_numel(cond) != 1))) {
    ir_error(g, n, "the trip count must be one int64 and the condition one bool");
    return false;
  }
  if (body->outputs[0]->dtype != DT_BOOL || tensor_numel(body->outputs[0]) != 1) {
    ir_error(g, n, "the body's condition '%s' must be one bool", body->outputs[0]->name);
    return false;
  }
  for (int k = 0; k < carried; k++) {
    const Tensor *x = in(n, 2 + k);
    if (!loop_types_agree(g, n, x, body->inputs[2 + k], "carried value") ||
        !loop_types_agree(g, n, x, body->outputs[1 + k], "carried value") ||
        !set_out(g, n, k, x->dtype, x->rank, x->dims))
      return false;
    /* A scan output's rows, planned for its bound: the iterations run are
       the Loop's to write (backend/loop.c). */
    if (k >= carried - body->loop_scans && n->out[k]) {
      n->out[k]->bounded = true;
      n->out[k]->bound_axis = 0;
    }
  }
  int64_t bytes = body->arena_bytes > 0 ? body->arena_bytes : 1;
  return set_out(g, n, carried, DT_UINT8, 1, &bytes);
}

/* A run-time If run as an IF node: its outputs are the branches' values,
   which must agree in dtype and static shape (frontend/loop.c imports
   only such Ifs this way); the last, the bodies' memory, is the larger of
   the two bodies' arenas, which never run together (one byte until they
   are planned). */
static bool infer_if(Graph *g, Node *n) {
  Graph *then_b = n->body, *else_b = n->else_body;
  int nout = then_b ? then_b->noutputs : -1;
  if (!then_b || !else_b || else_b->noutputs != nout || n->nout != nout + 1 ||
      n->nin != 1 + then_b->ninputs + else_b->ninputs) {
    ir_error(g, n, "an If node needs its two bodies, each with as many outputs as the node but "
             "one, and one input per node input after the condition");
    return false;
  }
  Tensor *cond = in(n, 0);
  if (!cond || cond->dtype != DT_BOOL || tensor_numel(cond) != 1) {
    ir_error(g, n, "the condition must be one bool");
    return false;
  }
  for (int k = 0; k < nout; k++) {
    const Tensor *a = then_b->outputs[k], *b = else_b->outputs[k];
    if (a->dtype != b->dtype || !tensor_same_shape(a, b) || a->bounded || b->bounded) {
      char ta[IR_MAX_RANK * 24 + 16], tb[IR_MAX_RANK * 24 + 16];
      ir_error(g, n, "output %d is %s%s in the then branch but %s%s in the else branch; an If "
               "node needs both of one dtype and static shape", k,
               tensor_type_str(a, ta, sizeof ta), a->bounded ? " (bounded)" : "",
               tensor_type_str(b, tb, sizeof tb), b->bounded ? " (bounded)" : "");
      return false;
    }
    if (!set_out(g, n, k, a->dtype, a->rank, a->dims))
      return false;
  }
  int64_t bytes = then_b->arena_bytes > else_b->arena_bytes ? then_b->arena_bytes
                                                             : else_b->arena_bytes;
  bytes = bytes > 0 ? bytes : 1;
  return set_out(g, n, nout, DT_UINT8, 1, &bytes);
}

/* The spec asks for fmod=1 on floats; with fmod=0 opc computes what the
   reference does, numpy's floored mod (the result takes the divisor's sign). */
static bool infer_mod(Graph *g, Node *n) {
  int64_t fmod_attr = node_attr_int(n, "fmod", 0);
  if (fmod_attr != 0 && fmod_attr != 1) {
    ir_error(g, n, "fmod must be 0 or 1, is %lld", (long long)fmod_attr);
    return false;
  }
  n->p.mod.fmod = fmod_attr != 0;
  return infer_broadcast(g, n);
}

/* ------------------------------------------------------- quantization */

/* The range of a quantized type opc holds; false for any other. */
static bool quant_range(DType t, int64_t *lo, int64_t *hi) {
  switch (t) {
  case DT_INT8: *lo = -128; *hi = 127; return true;
  case DT_UINT8: *lo = 0; *hi = 255; return true;
  case DT_INT16: *lo = -32768; *hi = 32767; return true;
  case DT_UINT16: *lo = 0; *hi = 65535; return true;
  case DT_INT32: *lo = INT32_MIN; *hi = INT32_MAX; return true;
  default: return false;
  }
}

/* ONNX's names of the quantized types opc has no storage for. */
static const char *quant_type_name(int64_t t) {
  switch (t) {
  case 17: return "float8e4m3fn";
  case 18: return "float8e4m3fnuz";
  case 19: return "float8e5m2";
  case 20: return "float8e5m2fnuz";
  case 21: return "uint4";
  case 22: return "int4";
  case 23: return "float4e2m1";
  default: return dtype_size((DType)t) ? dtype_onnx_name((DType)t) : "unknown";
  }
}

/* Whether a scale or zero point holds one value: a scalar or a 1-D tensor of one. */
static bool one_value(const Tensor *t) {
  return t->rank == 0 || (t->rank == 1 && t->dims[0] == 1);
}

/* The scale's granularity: one value (a scalar or one element, as ONNX
   Runtime reads it: *axis -1), or one per element along `axis` (a 1-D
   tensor). The zero point, when given, has the scale's shape, except that
   one value may be a scalar and the other one element: ONNX Runtime's
   quantize_static writes bias DequantizeLinear nodes so, and runs them.
   Blocked quantization (opset 21's block_size) is refused by name. */
static bool quant_axis(Graph *g, Node *n, const Tensor *x, const Tensor *scale,
                       const Tensor *zero, int *axis) {
  char a[128], b[128];
  if (node_attr_int(n, "block_size", 0) != 0) {
    ir_error(g, n, "blocked quantization (block_size %lld) is not supported",
             (long long)node_attr_int(n, "block_size", 0));
    return false;
  }
  if (zero && !tensor_same_shape(zero, scale) && !(one_value(zero) && one_value(scale))) {
    ir_error(g, n, "zero point %s must have the scale's shape %s", shape_str(zero, a, sizeof a),
             shape_str(scale, b, sizeof b));
    return false;
  }
  *axis = -1;
  if (one_value(scale))
    return true;
  if (scale->rank != 1) {
    ir_error(g, n, "scale %s must be a scalar or 1-D (per axis)", shape_str(scale, a, sizeof a));
    return false;
  }
  if (x->rank == 0) {
    ir_error(g, n, "a per-axis scale %s needs an input of rank 1 or more",
             shape_str(scale, a, sizeof a));
    return false;
  }
  if (!resolve_axis(g, n, node_attr_int(n, "axis", 1), x->rank, axis))
    return false;
  if (scale->dims[0] != x->dims[*axis]) {
    ir_error(g, n, "scale %s does not match input %s along axis %d",
             shape_str(scale, a, sizeof a), shape_str(x, b, sizeof b), *axis);
    return false;
  }
  return true;
}

/* QuantizeLinear(x, scale, zero_point): the quantized type is the zero
   point's, or the attribute output_dtype (opset 21), or uint8. saturate
   concerns float8 only, which opc refuses by name. */
static bool infer_quantize(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *scale = in(n, 1), *zero = in(n, 2);
  int64_t want = node_attr_int(n, "output_dtype", 0);
  DType to = zero ? zero->dtype : DT_UINT8;
  if (want != 0) {
    if (!quant_range((DType)want, &n->p.quant.lo, &n->p.quant.hi) || want == DT_INT32) {
      ir_error(g, n, "quantizing to %s is not supported (opc quantizes to int8 and uint8, and "
               "to int16 and uint16 at compile time)", quant_type_name(want));
      return false;
    }
    if (zero && zero->dtype != (DType)want) {
      ir_error(g, n, "output_dtype %s differs from the zero point's type %s",
               quant_type_name(want), dtype_onnx_name(zero->dtype));
      return false;
    }
    to = (DType)want;
  }
  bool saturate;
  if (!flag_attr(g, n, "saturate", true, &saturate) ||
      !quant_axis(g, n, x, scale, zero, &n->p.quant.axis))
    return false;
  quant_range(to, &n->p.quant.lo, &n->p.quant.hi);
  return set_out(g, n, 0, to, x->rank, x->dims);
}

/* DequantizeLinear(x, scale, zero_point): float of the scale's type. An
   int32 input has no zero point in the spec; one given is subtracted. */
static bool infer_dequantize(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *scale = in(n, 1), *zero = in(n, 2);
  int64_t want = node_attr_int(n, "output_dtype", 0);
  if (want != 0 && (DType)want != scale->dtype) {
    ir_error(g, n, "output_dtype %s differs from the scale's type %s, which opc computes in",
             quant_type_name(want), dtype_onnx_name(scale->dtype));
    return false;
  }
  if (!quant_axis(g, n, x, scale, zero, &n->p.quant.axis))
    return false;
  quant_range(x->dtype, &n->p.quant.lo, &n->p.quant.hi);
  return set_out(g, n, 0, scale->dtype, x->rank, x->dims);
}

/* DynamicQuantizeLinear(x): y (uint8, x's shape), its scale (a float32
   scalar) and its zero point (a uint8 scalar). */
static bool infer_dynamic_quantize(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  n->p.quant.axis = -1;
  n->p.quant.lo = 0;
  n->p.quant.hi = 255;
  return set_out(g, n, 0, DT_UINT8, x->rank, x->dims) && set_out(g, n, 1, DT_FLOAT, 0, NULL) &&
         set_out(g, n, 2, DT_UINT8, 0, NULL);
}

/* ------------------------------------------------------- integer products */

static bool need_channels(Graph *g, Node *n, const Tensor *p, int64_t c);
static bool infer_conv(Graph *g, Node *n);
static bool infer_matmul(Graph *g, Node *n);
static bool fused_bias_fits(Graph *g, Node *n, int64_t cols);

/* A zero point of an integer product: one value, or (when `count` > 0)
   a 1-D tensor of `count`, one per `what`. */
static bool integer_zero_point(Graph *g, Node *n, int k, int64_t count, const char *what) {
  const Tensor *z = in(n, k);
  if (!z || one_value(z) || (count > 0 && z->rank == 1 && z->dims[0] == count))
    return true;
  char a[128];
  if (count > 0)
    ir_error(g, n, "zero point '%s' %s must be a scalar or have shape [%lld] (one per %s)",
             z->name, shape_str(z, a, sizeof a), (long long)count, what);
  else
    ir_error(g, n, "zero point '%s' %s must be a scalar", z->name, shape_str(z, a, sizeof a));
  return false;
}

/* The output, already shaped, becomes int32. */
static bool int32_out(Graph *g, Node *n) {
  Tensor *y = n->out[0];
  int64_t dims[IR_MAX_RANK];
  memcpy(dims, y->dims, sizeof dims);
  return set_out(g, n, 0, DT_INT32, y->rank, dims);
}

/* MatMulInteger(A, B, a_zero_point, b_zero_point): MatMul's shapes, int32.
   A's zero point is one value or one per row of A (rank 2 or more), B's
   one value or one per column of B; ONNX's N-D forms are refused. */
static bool infer_matmul_integer(Graph *g, Node *n) {
  Tensor *a = in(n, 0), *b = in(n, 1);
  if (!infer_matmul(g, n))
    return false;
  int64_t rows = a->rank >= 2 ? a->dims[a->rank - 2] : 0;
  int64_t cols = b->rank >= 2 ? b->dims[b->rank - 1] : 0;
  if (!integer_zero_point(g, n, 2, rows, "row of A") ||
      !integer_zero_point(g, n, 3, cols, "column of B"))
    return false;
  return int32_out(g, n);
}

/* ConvInteger(x, w, x_zero_point, w_zero_point): Conv's window and shapes,
   int32; x's zero point is one value, w's one or one per output channel.
   Only 1-D and 2-D convolutions run (opc_conv_integer), for QLinearConv
   too, which comes here with its x and w alone. */
static bool infer_conv_integer(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *w = in(n, 1);
  if (x->rank > 4) {
    ir_error(g, n, "input '%s' has rank %d: opc runs 1-D and 2-D %s only (rank 3 or 4)",
             x->name, x->rank, op_info(n->op)->name);
    return false;
  }
  Node conv = *n;
  conv.nin = 2; /* Conv's inputs 2 and 3 (bias, residual) mean other things */
  if (!infer_conv(g, &conv))
    return false;
  n->win = conv.win;
  if (!integer_zero_point(g, n, 2, 0, NULL) ||
      !integer_zero_point(g, n, 3, w->dims[0], "output channel"))
    return false;
  return int32_out(g, n);
}

/* Inputs `first` and `second` of a QLinear kind as a node of those two
   inputs alone, for MatMul's and Conv's shape functions; `pair` holds
   them. */
static Node operand_node(Node *n, Tensor **pair, int first, int second) {
  Node view = *n;
  pair[0] = in(n, first);
  pair[1] = in(n, second);
  view.in = pair;
  view.nin = 2;
  return view;
}

/* A scale or zero point of a QLinear kind: one value, or (when `count` >
   0) one per output channel. */
static bool qlinear_param(Graph *g, Node *n, int k, int64_t count, const char *role) {
  const Tensor *t = in(n, k);
  if (one_value(t) || (count > 0 && t->rank == 1 && t->dims[0] == count))
    return true;
  char a[128];
  if (count > 0)
    ir_error(g, n, "%s '%s' %s must be a scalar or have shape [%lld] (one per output channel)",
             role, t->name, shape_str(t, a, sizeof a), (long long)count);
  else
    ir_error(g, n, "%s '%s' %s must be a scalar (opc quantizes this operand per tensor)", role,
             t->name, shape_str(t, a, sizeof a));
  return false;
}

/* The parameters QLinearMatMul and QLinearConv share: inputs 1, 2 (the
   first operand's scale and zero point: one value), 4, 5 (the second's:
   one value or one per output channel) and 6, 7 (the output's: one
   value). The output takes y_zero_point's type. */
/* A fused activation (fuse-qdq) narrows the saturation (qlinear_bounds):
   a clamp, Relu or Clip, quantized at compile time with y's scale and zero
   point, which must then be constants. */
static bool qlinear_activation(Graph *g, Node *n) {
  if (n->act == OPC_ACT_NONE)
    return true;
  if (n->act != OPC_ACT_RELU && n->act != OPC_ACT_CLIP) {
    ir_error(g, n, "a fused %s cannot be folded into the requantisation (Relu and Clip can)",
             act_name(n->act));
    return false;
  }
  if (tensor_is_const(in(n, 6)) && tensor_is_const(in(n, 7)))
    return true;
  ir_error(g, n, "a fused %s needs y's scale and zero point as constants", act_name(n->act));
  return false;
}

static bool qlinear_params(Graph *g, Node *n, int64_t channels) {
  if (!qlinear_activation(g, n) || !qlinear_param(g, n, 1, 0, "scale") ||
      !qlinear_param(g, n, 2, 0, "zero point") ||
      !qlinear_param(g, n, 4, channels, "scale") ||
      !qlinear_param(g, n, 5, channels, "zero point") ||
      !qlinear_param(g, n, 6, 0, "scale") || !qlinear_param(g, n, 7, 0, "zero point"))
    return false;
  Tensor *y = n->out[0];
  int64_t dims[IR_MAX_RANK];
  memcpy(dims, y->dims, sizeof dims);
  return set_out(g, n, 0, in(n, 7)->dtype, y->rank, dims);
}

/* QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point,
   y_scale, y_zero_point): MatMul's shapes; b's scale and zero point may
   be per column. */
static bool infer_qlinear_matmul(Graph *g, Node *n) {
  Tensor *pair[2];
  Node mm = operand_node(n, pair, 0, 3);
  if (!infer_matmul(g, &mm))
    return false;
  const Tensor *b = in(n, 3);
  return qlinear_params(g, n, b->rank >= 2 ? b->dims[b->rank - 1] : 0);
}

/* QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point,
   y_scale, y_zero_point, B): Conv's window and shapes, 1-D and 2-D; w's
   scale and zero point may be per output channel, B is int32 [M]. */
static bool infer_qlinear_conv(Graph *g, Node *n) {
  Tensor *pair[2];
  Node conv = operand_node(n, pair, 0, 3);
  if (!infer_conv_integer(g, &conv))
    return false;
  n->win = conv.win;
  int64_t m = in(n, 3)->dims[0];
  return need_channels(g, n, in(n, 8), m) && qlinear_params(g, n, m);
}

/* QuantizedAdd(a, a_scale, a_zero_point, b, b_scale, b_zero_point,
   y_scale, y_zero_point), opc's own (fuse-qdq): a and b of one shape and
   type, broadcasting nothing; every scale and zero point one value. */
static bool infer_quantized_add(Graph *g, Node *n) {
  const Tensor *a = in(n, 0), *b = in(n, 3);
  if (!tensor_same_shape(a, b) || a->dtype != b->dtype || a->bounded || b->bounded) {
    char ta[IR_MAX_RANK * 24 + 16], tb[IR_MAX_RANK * 24 + 16];
    ir_error(g, n, "adds '%s' (%s) and '%s' (%s): the operands of QuantizedAdd have one static "
             "shape and one type", a->name, tensor_type_str(a, ta, sizeof ta), b->name,
             tensor_type_str(b, tb, sizeof tb));
    return false;
  }
  return set_out(g, n, 0, a->dtype, a->rank, a->dims) && qlinear_params(g, n, 0);
}

/* QuantizedLookup(x, table), opc's own (fuse-qdq): y of x's shape and
   the table's type; the table a constant of 256 values, one per byte. */
static bool infer_quantized_lookup(Graph *g, Node *n) {
  const Tensor *x = in(n, 0), *t = in(n, 1);
  if (t->rank != 1 || t->dims[0] != 256 || !tensor_is_const(t) || x->bounded) {
    ir_error(g, n, "'%s' must be a constant table of 256 values, and '%s' static", t->name,
             x->name);
    return false;
  }
  return set_out(g, n, 0, t->dtype, x->rank, x->dims);
}

/* ------------------------------------------------------- normalisation */

/* Checks that a per-channel parameter has shape [C]. */
static bool need_channels(Graph *g, Node *n, const Tensor *p, int64_t c) {
  if (!p)
    return true;
  if (p->rank != 1 || p->dims[0] != c) {
    char a[128];
    ir_error(g, n, "'%s' must have shape [%lld], has %s", p->name, (long long)c,
             shape_str(p, a, sizeof a));
    return false;
  }
  return true;
}

static bool infer_batch_norm(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  if (!need_rank(g, n, x, 2, IR_MAX_RANK))
    return false;
  int64_t c = x->dims[1];
  n->p.norm.epsilon = node_attr_float(n, "epsilon", 1e-5f);
  if (!flag_attr(g, n, "training_mode", false, &n->p.norm.training))
    return false;
  n->p.norm.momentum = node_attr_float(n, "momentum", 0.9f);
  for (int i = 1; i < 5; i++)
    if (!need_channels(g, n, in(n, i), c))
      return false;
  /* Training-mode outputs: running mean and variance, [C]. */
  return same_as(g, n, 0, x) && set_out(g, n, 1, x->dtype, 1, &c) &&
         set_out(g, n, 2, x->dtype, 1, &c);
}

static bool infer_instance_norm(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  if (!need_rank(g, n, x, 3, IR_MAX_RANK))
    return false;
  n->p.norm.epsilon = node_attr_float(n, "epsilon", 1e-5f);
  return need_channels(g, n, in(n, 1), x->dims[1]) && need_channels(g, n, in(n, 2), x->dims[1]) &&
         same_as(g, n, 0, x);
}

/* LayerNormalization and RMSNormalization: the row is the dims from `axis`
   on; scale (and bias) broadcast to the row's shape. */
static bool row_norm_params(Graph *g, Node *n, Tensor *x) {
  int axis;
  if (!resolve_axis(g, n, node_attr_int(n, "axis", -1), x->rank, &axis))
    return false;
  n->p.norm.axis = axis;
  n->p.norm.epsilon = node_attr_float(n, "epsilon", 1e-5f);
  for (int i = 1; i <= 2; i++) {
    Tensor *p = in(n, i);
    if (p && !broadcasts_to(p->rank, p->dims, x->rank - axis, x->dims + axis)) {
      char a[128], b[128];
      ir_error(g, n, "'%s' %s does not broadcast to the normalised dims (from axis %d) of %s",
               p->name, shape_str(p, a, sizeof a), axis, shape_str(x, b, sizeof b));
      return false;
    }
  }
  return true;
}

static bool infer_layer_norm(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  if (!row_norm_params(g, n, x))
    return false;
  int axis = n->p.norm.axis;
  int64_t stat[IR_MAX_RANK];
  for (int i = 0; i < x->rank; i++)
    stat[i] = i < axis ? x->dims[i] : 1;
  DType stash = (DType)node_attr_int(n, "stash_type", DT_FLOAT);
  return same_as(g, n, 0, x) && set_out(g, n, 1, stash, x->rank, stat) &&
         set_out(g, n, 2, stash, x->rank, stat);
}

/* RMSNormalization (opset 23): x / sqrt(mean of x^2 over the row +
   epsilon) * scale. Its first stage runs in float32 or wider; a narrower
   stash_type would change the result, so it is refused. */
static bool infer_rms_norm(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  int64_t stash = node_attr_int(n, "stash_type", DT_FLOAT);
  if (stash != DT_FLOAT) {
    ir_error(g, n, "stash_type %lld is not supported: only 1 (float32)", (long long)stash);
    return false;
  }
  if (x->rank < 1) {
    ir_error(g, n, "input must have rank 1 or more");
    return false;
  }
  return row_norm_params(g, n, x) && same_as(g, n, 0, x);
}

/* GroupNormalization: x is [N, C, ...], its channels split into
   num_groups groups normalised apart. Opset 21 made scale and bias one
   value per channel; opsets 18 to 20 have one per group. With no opset
   known, either shape is taken. */
static bool infer_group_norm(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  if (!need_rank(g, n, x, 2, IR_MAX_RANK))
    return false;
  int64_t c = x->dims[1], groups = node_attr_int(n, "num_groups", 0);
  if (groups <= 0 || c % groups != 0) {
    ir_error(g, n, "attribute 'num_groups' (%lld) must be positive and divide the %lld channels",
             (long long)groups, (long long)c);
    return false;
  }
  int64_t stash = node_attr_int(n, "stash_type", DT_FLOAT);
  if (stash != DT_FLOAT) {
    ir_error(g, n, "stash_type %lld is not supported: only 1 (float32)", (long long)stash);
    return false;
  }
  bool per_channel = g->opset >= 21;
  if (g->opset <= 0)
    per_channel = in(n, 1)->rank == 1 && in(n, 1)->dims[0] == c;
  n->p.group_norm.epsilon = node_attr_float(n, "epsilon", 1e-5f);
  n->p.group_norm.groups = groups;
  n->p.group_norm.per_channel = per_channel;
  int64_t want = per_channel ? c : groups;
  return need_channels(g, n, in(n, 1), want) && need_channels(g, n, in(n, 2), want) &&
         same_as(g, n, 0, x);
}

/* Checks a cos or sin cache: [max_position, half] when position_ids index
   it, else [batch, seq, half]. */
static bool need_cache(Graph *g, Node *n, const Tensor *t, bool indexed, int64_t batch,
                       int64_t seq, int64_t half) {
  bool ok = indexed ? t->rank == 2 && t->dims[0] > 0 && t->dims[1] == half
                    : t->rank == 3 && t->dims[0] == batch && t->dims[1] == seq &&
                          t->dims[2] == half;
  if (!ok) {
    char a[128];
    if (indexed)
      ir_error(g, n, "cache '%s' has shape %s; with position_ids it must be [max_position, %lld]",
               t->name, shape_str(t, a, sizeof a), (long long)half);
    else
      ir_error(g, n, "cache '%s' has shape %s; without position_ids it must be [%lld, %lld, %lld]",
               t->name, shape_str(t, a, sizeof a), (long long)batch, (long long)seq,
               (long long)half);
  }
  return ok;
}

/* RotaryEmbedding (opset 23): x is [batch, heads, seq, head] or [batch,
   seq, hidden] with num_heads; cos and sin caches are [max_position,
   rot/2] read at position_ids [batch, seq], or [batch, seq, rot/2]
   without them. */
static bool infer_rotary_embedding(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *pos = in(n, 3);
  if (!need_rank(g, n, x, 3, 4))
    return false;
  int64_t heads = node_attr_int(n, "num_heads", 0);
  bool in_3d = x->rank == 3;
  if (in_3d && (heads <= 0 || x->dims[2] % heads != 0)) {
    ir_error(g, n, "a 3-D input needs attribute 'num_heads' (%lld) positive and dividing its "
             "last dim %lld", (long long)heads, (long long)x->dims[2]);
    return false;
  }
  if (!in_3d)
    heads = x->dims[1];
  int64_t batch = x->dims[0], seq = in_3d ? x->dims[1] : x->dims[2];
  int64_t head = in_3d ? x->dims[2] / heads : x->dims[3];
  int64_t rot = node_attr_int(n, "rotary_embedding_dim", 0);
  if (rot == 0)
    rot = head;
  if (rot < 0 || rot > head || rot % 2 != 0) {
    ir_error(g, n, "rotary_embedding_dim %lld must be even and at most the head size %lld",
             (long long)rot, (long long)head);
    return false;
  }
  n->p.rotary.batch = batch;
  n->p.rotary.seq = seq;
  n->p.rotary.heads = heads;
  n->p.rotary.head = head;
  n->p.rotary.rot = rot;
  n->p.rotary.in_3d = in_3d;
  if (!flag_attr(g, n, "interleaved", false, &n->p.rotary.interleaved))
    return false;
  for (int i = 1; i <= 2; i++)
    if (!need_cache(g, n, in(n, i), pos != NULL, batch, seq, rot / 2))
      return false;
  if (pos && in(n, 1)->dims[0] != in(n, 2)->dims[0]) {
    ir_error(g, n, "the cos and sin caches have different lengths");
    return false;
  }
  if (pos && (pos->rank != 2 || pos->dims[0] != batch || pos->dims[1] != seq)) {
    char a[128];
    ir_error(g, n, "position_ids '%s' has shape %s; it must be [%lld, %lld]", pos->name,
             shape_str(pos, a, sizeof a), (long long)batch, (long long)seq);
    return false;
  }
  return same_as(g, n, 0, x);
}

/* Attention's heads: from the attribute for 3-D inputs (it must divide
   the hidden size), from dim 1 for 4-D ones (an attribute must agree). */
static bool attention_heads(Graph *g, Node *n, const char *attr, const Tensor *t,
                            int64_t *heads, int64_t *head) {
  int64_t given = node_attr_int(n, attr, 0);
  if (t->rank == 4) {
    if (given && given != t->dims[1]) {
      ir_error(g, n, "attribute '%s' (%lld) disagrees with '%s''s %lld heads", attr,
               (long long)given, t->name, (long long)t->dims[1]);
      return false;
    }
    *heads = t->dims[1];
    *head = t->dims[3];
    return true;
  }
  if (given <= 0 || t->dims[2] % given != 0) {
    ir_error(g, n, "3-D inputs need attribute '%s' (%lld) positive and dividing %lld", attr,
             (long long)given, (long long)t->dims[2]);
    return false;
  }
  *heads = given;
  *head = t->dims[2] / given;
  return true;
}

/* Checks one past cache: [batch, kv_heads, past, head]. */
static bool need_past(Graph *g, Node *n, const Tensor *t, int64_t batch, int64_t heads,
                      int64_t past, int64_t head) {
  if (t->rank != 4 || t->dims[0] != batch || t->dims[1] != heads || t->dims[2] != past ||
      t->dims[3] != head) {
    char a[128];
    ir_error(g, n, "'%s' has shape %s; it must be [%lld, %lld, %lld, %lld]", t->name,
             shape_str(t, a, sizeof a), (long long)batch, (long long)heads, (long long)past,
             (long long)head);
    return false;
  }
  return true;
}

/* The attributes and outputs of Attention that opc leaves out, refused by
   name. A softmax in float32 or wider is what opc computes. */
static bool attention_refusals(Graph *g, Node *n) {
  int64_t precision = node_attr_int(n, "softmax_precision", DT_FLOAT);
  if (precision != DT_FLOAT && precision != DT_DOUBLE) {
    ir_error(g, n, "softmax_precision %lld is not supported: only 1 (float32) or 11 (double)",
             (long long)precision);
    return false;
  }
  if (n->nout > 3 && n->out[3]) {
    ir_error(g, n, "output 3 (qk_matmul_output) is not supported");
    return false;
  }
  if (node_attr_float(n, "softcap", 0) < 0) {
    ir_error(g, n, "softcap must not be negative");
    return false;
  }
  return true;
}

/* Attention (opset 23): softmax(Q K^T scale (capped) + mask) V per head,
   K and V shared by q_heads / kv_heads query heads (grouped-query
   attention), after past_key and past_value, which present_key and
   present_value extend. */
static bool infer_attention(Graph *g, Node *n) {
  Tensor *q = in(n, 0), *k = in(n, 1), *v = in(n, 2), *mask = in(n, 3);
  Tensor *past_k = in(n, 4), *past_v = in(n, 5);
  if (!need_rank(g, n, q, 3, 4) || !need_rank(g, n, k, q->rank, q->rank) ||
      !need_rank(g, n, v, q->rank, q->rank) || !attention_refusals(g, n))
    return false;
  int64_t qh, kh, vh, head, khead, vhead;
  if (!attention_heads(g, n, "q_num_heads", q, &qh, &head) ||
      !attention_heads(g, n, "kv_num_heads", k, &kh, &khead) ||
      !attention_heads(g, n, "kv_num_heads", v, &vh, &vhead))
    return false;
  bool in_3d = q->rank == 3;
  int64_t batch = q->dims[0], q_seq = q->dims[in_3d ? 1 : 2], kv_seq = k->dims[in_3d ? 1 : 2];
  if (k->dims[0] != batch || v->dims[0] != batch || v->dims[in_3d ? 1 : 2] != kv_seq ||
      kh != vh || khead != head) {
    char a[128], b[128], c[128];
    ir_error(g, n, "Q %s, K %s and V %s do not agree in batch, heads, sequence or head size",
             shape_str(q, a, sizeof a), shape_str(k, b, sizeof b), shape_str(v, c, sizeof c));
    return false;
  }
  if (qh % kh != 0) {
    ir_error(g, n, "the %lld key/value heads must divide the %lld query heads", (long long)kh,
             (long long)qh);
    return false;
  }
  if (!past_k != !past_v) {
    ir_error(g, n, "past_key and past_value must be given together");
    return false;
  }
  int64_t past = past_k && past_k->rank == 4 ? past_k->dims[2] : 0;
  if (past_k && (!need_past(g, n, past_k, batch, kh, past, head) ||
                 !need_past(g, n, past_v, batch, kh, past, vhead)))
    return false;
  int64_t total = past + kv_seq, full[4] = {batch, qh, q_seq, total};
  if (mask && !broadcasts_to(mask->rank, mask->dims, 4, full)) {
    char a[128];
    ir_error(g, n, "attn_mask %s does not broadcast to [%lld, %lld, %lld, %lld] (batch, heads, "
             "queries, past and new keys)", shape_str(mask, a, sizeof a), (long long)batch,
             (long long)qh, (long long)q_seq, (long long)total);
    return false;
  }
  if (mask && mask->dtype != DT_BOOL && mask->dtype != q->dtype) {
    ir_error(g, n, "attn_mask must be bool or of Q's type, is %s", dtype_name(mask->dtype));
    return false;
  }
  n->p.attention.batch = batch;
  n->p.attention.q_heads = qh;
  n->p.attention.kv_heads = kh;
  n->p.attention.q_seq = q_seq;
  n->p.attention.kv_seq = kv_seq;
  n->p.attention.past = past;
  n->p.attention.head = head;
  n->p.attention.v_head = vhead;
  n->p.attention.in_3d = in_3d;
  n->p.attention.scale = node_attr_float(n, "scale", (float)(1.0 / sqrt((double)head)));
  n->p.attention.softcap = node_attr_float(n, "softcap", 0);
  if (!flag_attr(g, n, "is_causal", false, &n->p.attention.causal))
    return false;
  int64_t y3[3] = {batch, q_seq, qh * vhead}, y4[4] = {batch, qh, q_seq, vhead};
  int64_t pk[4] = {batch, kh, total, head}, pv[4] = {batch, kh, total, vhead};
  return set_out(g, n, 0, q->dtype, in_3d ? 3 : 4, in_3d ? y3 : y4) &&
         set_out(g, n, 1, k->dtype, 4, pk) && set_out(g, n, 2, v->dtype, 4, pv);
}

static bool infer_lrn(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  if (node_attr_int(n, "size", 0) <= 0) {
    ir_error(g, n, "attribute 'size' is required and must be positive");
    return false;
  }
  n->p.lrn.size = node_attr_int(n, "size", 0);
  n->p.lrn.alpha = node_attr_float(n, "alpha", 1e-4f);
  n->p.lrn.beta = node_attr_float(n, "beta", 0.75f);
  n->p.lrn.bias = node_attr_float(n, "bias", 1.0f);
  return need_rank(g, n, x, 3, IR_MAX_RANK) && same_as(g, n, 0, x);
}

/* MeanVarianceNormalization and the reductions: sets reduced[d] to `all`
   for each of the rank axes, then to true for each of the count axes given
   (negative ones count from the end). */
static bool mark_axes(Graph *g, Node *n, const int64_t *axes, int count, int rank, bool all,
                      bool *reduced) {
  for (int d = 0; d < rank; d++)
    reduced[d] = all;
  for (int i = 0; i < count; i++) {
    int a;
    if (!resolve_axis(g, n, axes[i], rank, &a))
      return false;
    reduced[a] = true;
  }
  return true;
}

static bool mvn_axes(Graph *g, Node *n, bool *reduced) {
  Tensor *x = in(n, 0);
  static const int64_t dflt[3] = {0, 2, 3};
  const int64_t *axes;
  int count = node_attr_ints(n, "axes", &axes);
  if (count < 0) {
    axes = dflt;
    count = 3;
  }
  return mark_axes(g, n, axes, count, x->rank, false, reduced);
}

static bool infer_mvn(Graph *g, Node *n) {
  n->p.reduce.noop = false;
  n->p.reduce.keepdims = true;
  return mvn_axes(g, n, n->p.reduce.reduced) && same_as(g, n, 0, in(n, 0));
}

static bool lp_norm_plan(Graph *g, Node *n, int *axis, int *p) {
  Tensor *x = in(n, 0);
  int64_t pv = node_attr_int(n, "p", 2);
  if (pv != 1 && pv != 2) {
    ir_error(g, n, "p must be 1 or 2, is %lld", (long long)pv);
    return false;
  }
  *p = (int)pv;
  if (x->rank < 1) {
    ir_error(g, n, "input must have rank 1 or more");
    return false;
  }
  return resolve_axis(g, n, node_attr_int(n, "axis", -1), x->rank, axis);
}

static bool infer_lp_norm(Graph *g, Node *n) {
  return lp_norm_plan(g, n, &n->p.lp.axis, &n->p.lp.p) && same_as(g, n, 0, in(n, 0));
}

/* ------------------------------------------------------------- windows */

/* Reads an ints attribute of exactly `count` values into out, or fills
   out with dflt when absent. */
static bool window_attr(Graph *g, Node *n, const char *name, int count, int64_t dflt,
                        int64_t *out) {
  const int64_t *v;
  int k = node_attr_ints(n, name, &v);
  if (k < 0) {
    for (int i = 0; i < count; i++)
      out[i] = dflt;
    return true;
  }
  if (k != count) {
    ir_error(g, n, "attribute '%s' must have %d values, has %d", name, count, k);
    return false;
  }
  for (int i = 0; i < count; i++)
    out[i] = v[i];
  return true;
}

typedef enum { PAD_NOTSET, PAD_VALID, PAD_SAME_UPPER, PAD_SAME_LOWER } AutoPad;

static bool auto_pad(Graph *g, Node *n, AutoPad *out) {
  static const char *const names[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"}; /* AutoPad */
  const char *s = node_attr_string(n, "auto_pad", "NOTSET");
  int k = *s ? name_index(names, 4, s) : PAD_NOTSET; /* "" counts as NOTSET */
  if (k < 0) {
    ir_error(g, n, "unknown auto_pad '%s'", s);
    return false;
  }
  *out = (AutoPad)k;
  return true;
}

/* The spatial window common to Conv, ConvTranspose and the pools: kernel,
   strides, dilations and explicit pads (auto_pad is resolved by the caller,
   whose output size rule differs). `kernel` is the weight's spatial dims
   for the convolutions, NULL for pools (then kernel_shape is required). */
static bool read_window(Graph *g, Node *n, const Tensor *x, const int64_t *kernel, Window *w) {
  memset(w, 0, sizeof *w);
  w->auto_pad = node_attr(n, "auto_pad") != NULL;
  if (x->rank < 3 || x->rank > 5) {
    ir_error(g, n, "input '%s' must have 1 to 3 spatial dims (rank 3 to 5), has rank %d",
             x->name, x->rank);
    return false;
  }
  int ns = x->rank - 2;
  w->nspatial = ns;
  const int64_t *ks;
  int k = node_attr_ints(n, "kernel_shape", &ks);
  if (k < 0 && !kernel) {
    ir_error(g, n, "attribute 'kernel_shape' is required");
    return false;
  }
  if (k >= 0 && k != ns) {
    ir_error(g, n, "attribute 'kernel_shape' must have %d values, has %d", ns, k);
    return false;
  }
  for (int i = 0; i < ns; i++) {
    w->kernel[i] = k >= 0 ? ks[i] : kernel[i];
    if (kernel && w->kernel[i] != kernel[i]) {
      ir_error(g, n, "kernel_shape does not match the weight's spatial dims");
      return false;
    }
  }
  int64_t pads[6];
  if (!window_attr(g, n, "strides", ns, 1, w->stride) ||
      !window_attr(g, n, "dilations", ns, 1, w->dilation) ||
      !window_attr(g, n, "pads", 2 * ns, 0, pads))
    return false;
  for (int i = 0; i < ns; i++) {
    w->pad_begin[i] = pads[i];
    w->pad_end[i] = pads[ns + i];
    if (w->kernel[i] <= 0 || w->stride[i] <= 0 || w->dilation[i] <= 0) {
      ir_error(g, n, "kernel, strides and dilations must be positive");
      return false;
    }
    if (pads[i] < 0 || pads[ns + i] < 0) {
      ir_error(g, n, "pads must not be negative");
      return false;
    }
    /* Bounded so that the window arithmetic below cannot overflow. */
    int64_t limit = (int64_t)1 << 24;
    if (w->kernel[i] > limit || w->stride[i] > limit || w->dilation[i] > limit ||
        pads[i] > limit || pads[ns + i] > limit) {
      ir_error(g, n, "window attributes beyond 2^24 are not supported");
      return false;
    }
  }
  return true;
}

static int64_t extent(const Window *w, int i) { return (w->kernel[i] - 1) * w->dilation[i] + 1; }

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* Output size of a convolution or pooling window on axis i of size `size`,
   resolving auto_pad into pads. */
static bool window_output(Graph *g, Node *n, Window *w, AutoPad ap, int i, int64_t size,
                          int64_t *out) {
  int64_t k = extent(w, i), s = w->stride[i];
  if (ap == PAD_SAME_UPPER || ap == PAD_SAME_LOWER) {
    *out = ceil_div(size, s);
    int64_t total = (*out - 1) * s + k - size;
    if (total < 0)
      total = 0;
    int64_t small = total / 2, big = total - total / 2;
    w->pad_begin[i] = ap == PAD_SAME_UPPER ? small : big;
    w->pad_end[i] = ap == PAD_SAME_UPPER ? big : small;
    return true;
  }
  if (ap == PAD_VALID)
    w->pad_begin[i] = w->pad_end[i] = 0;
  int64_t span = size + w->pad_begin[i] + w->pad_end[i] - k;
  if (span < 0) {
    ir_error(g, n, "window of extent %lld does not fit the padded input of size %lld on spatial "
             "axis %d", (long long)k, (long long)(size + w->pad_begin[i] + w->pad_end[i]), i);
    return false;
  }
  if (w->ceil_mode) {
    *out = ceil_div(span, s) + 1;
    /* A last window starting inside the end padding is dropped. */
    if ((*out - 1) * s >= size + w->pad_begin[i])
      (*out)--;
  } else {
    *out = floor_div(span, s) + 1;
  }
  return true;
}

/* Conv and ConvTranspose: the window (its kernel the weight's spatial dims),
   auto_pad and the group. */
static bool conv_window(Graph *g, Node *n, Window *w, AutoPad *ap) {
  Tensor *x = in(n, 0), *wt = in(n, 1);
  if (!wt || x->rank != wt->rank) {
    ir_error(g, n, "weight must have the input's rank %d", x->rank);
    return false;
  }
  if (!read_window(g, n, x, wt->dims + 2, w) || !auto_pad(g, n, ap))
    return false;
  w->group = node_attr_int(n, "group", 1);
  return true;
}

static bool infer_conv(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *wt = in(n, 1), *b = in(n, 2), *z = in(n, 3);
  Window w;
  AutoPad ap;
  if (!conv_window(g, n, &w, &ap))
    return false;
  int64_t m = wt->dims[0], channels;
  bool wraps = w.group > 0 && __builtin_mul_overflow(wt->dims[1], w.group, &channels);
  if (w.group <= 0 || wraps || x->dims[1] != channels || m % w.group != 0) {
    ir_error(g, n, "input has %lld channels but the weight expects %lld x group %lld",
             (long long)x->dims[1], (long long)wt->dims[1], (long long)w.group);
    return false;
  }
  if (!need_channels(g, n, b, m))
    return false;
  int64_t dims[IR_MAX_RANK] = {x->dims[0], m};
  for (int i = 0; i < w.nspatial; i++)
    if (!window_output(g, n, &w, ap, i, x->dims[2 + i], &dims[2 + i]))
      return false;
  n->win = w;
  if (!set_out(g, n, 0, x->dtype, x->rank, dims))
    return false;
  /* The fused residual input must match the output exactly. */
  if (z && !tensor_same_shape(z, n->out[0])) {
    char a[128], c[128];
    ir_error(g, n, "residual '%s' %s does not match the output %s", z->name,
             shape_str(z, a, sizeof a), shape_str(n->out[0], c, sizeof c));
    return false;
  }
  return true;
}

static bool infer_conv_transpose(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *wt = in(n, 1), *b = in(n, 2);
  Window w;
  AutoPad ap;
  if (!conv_window(g, n, &w, &ap))
    return false;
  int ns = w.nspatial;
  if (w.group <= 0 || x->dims[1] != wt->dims[0] || wt->dims[0] % w.group != 0) {
    ir_error(g, n, "input has %lld channels, the weight expects %lld (group %lld)",
             (long long)x->dims[1], (long long)wt->dims[0], (long long)w.group);
    return false;
  }
  int64_t m;
  if (!checked(g, n, __builtin_mul_overflow(wt->dims[1], w.group, &m)) ||
      !need_channels(g, n, b, m) ||
      !window_attr(g, n, "output_padding", ns, 0, w.output_padding))
    return false;
  /* output_shape may list the spatial dims only, or N and C too. */
  const int64_t *os;
  int nos = node_attr_ints(n, "output_shape", &os);
  if (nos >= 0 && nos != ns && nos != ns + 2) {
    ir_error(g, n, "attribute 'output_shape' must have %d values, has %d", ns, nos);
    return false;
  }
  if (nos == ns + 2)
    os += 2;
  int64_t dims[IR_MAX_RANK] = {x->dims[0], m};
  for (int i = 0; i < ns; i++) {
    int64_t full;
    if (w.output_padding[i] < 0 || w.output_padding[i] > ((int64_t)1 << 24)) {
      ir_error(g, n, "output_padding %lld is out of range", (long long)w.output_padding[i]);
      return false;
    }
    if (!checked(g, n, __builtin_mul_overflow(w.stride[i], x->dims[2 + i] - 1, &full)))
      return false;
    full += w.output_padding[i] + extent(&w, i);
    int64_t target = -1;
    if (nos >= 0)
      target = os[i];
    else if (ap == PAD_SAME_UPPER || ap == PAD_SAME_LOWER)
      target = x->dims[2 + i] * w.stride[i];
    if (ap == PAD_VALID)
      w.pad_begin[i] = w.pad_end[i] = 0;
    if (target < 0) {
      dims[2 + i] = full - w.pad_begin[i] - w.pad_end[i];
      continue;
    }
    /* Pads come from the requested size; a size beyond the full output
       grows the output padding instead (the extra rows see only the bias). */
    int64_t total = full - target;
    if (total >= 0) {
      int64_t small = total / 2, big = total - total / 2;
      w.pad_begin[i] = ap == PAD_SAME_UPPER ? small : big;
      w.pad_end[i] = ap == PAD_SAME_UPPER ? big : small;
    } else {
      w.pad_begin[i] = w.pad_end[i] = 0;
      w.output_padding[i] -= total;
    }
    dims[2 + i] = target;
  }
  for (int i = 0; i < ns; i++)
    if (dims[2 + i] <= 0) {
      ir_error(g, n, "output spatial dim %d would be %lld", i, (long long)dims[2 + i]);
      return false;
    }
  n->win = w;
  return set_out(g, n, 0, x->dtype, x->rank, dims);
}

/* A pad as wide as the kernel makes a window of padding only, whose max or
   average is undefined (opc gave -inf or NaN, ONNX Runtime refuses the
   model): pads must be smaller than the kernel. */
static bool pool_pads_fit(Graph *g, Node *n, const Window *w) {
  for (int i = 0; i < w->nspatial; i++)
    if (w->pad_begin[i] >= w->kernel[i] || w->pad_end[i] >= w->kernel[i]) {
      ir_error(g, n, "pads %lld and %lld of spatial axis %d must be smaller than its "
               "kernel_shape %lld: a window would cover padding only",
               (long long)w->pad_begin[i], (long long)w->pad_end[i], i, (long long)w->kernel[i]);
      return false;
    }
  return true;
}

static bool infer_pool(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  Window w;
  AutoPad ap;
  if (!read_window(g, n, x, NULL, &w) || !auto_pad(g, n, &ap) || !pool_pads_fit(g, n, &w))
    return false;
  if (!flag_attr(g, n, "ceil_mode", false, &w.ceil_mode) ||
      !flag_attr(g, n, "count_include_pad", false, &w.count_include_pad) ||
      !flag_attr(g, n, "storage_order", false, &w.column_major))
    return false;
  n->p.lp.p = (int)node_attr_int(n, "p", 2); /* LpPool */
  int64_t dims[IR_MAX_RANK] = {x->dims[0], x->dims[1]};
  for (int i = 0; i < w.nspatial; i++)
    if (!window_output(g, n, &w, ap, i, x->dims[2 + i], &dims[2 + i]))
      return false;
  n->win = w;
  /* MaxPool's optional Indices (set_out skips an absent one). */
  return set_out(g, n, 0, x->dtype, x->rank, dims) && set_out(g, n, 1, DT_INT64, x->rank, dims);
}

/* MaxUnpool's unpooled shape, [N, C, (in - 1) * stride + kernel - pads]:
   what its indices count in (output_shape only adds zeros after it). */
void max_unpool_shape(const Node *n, int64_t *dims) {
  const Tensor *x = n->in[0];
  const Window *w = &n->win;
  dims[0] = x->dims[0];
  dims[1] = x->dims[1];
  for (int i = 0; i < w->nspatial; i++)
    dims[2 + i] = (x->dims[2 + i] - 1) * w->stride[i] + w->kernel[i] - w->pad_begin[i] -
                  w->pad_end[i];
}

/* MaxUnpool: X and the int64 Indices a MaxPool gave, both [N, C, spatial],
   spread into zeros of the unpooled shape, as the ONNX reference does:
   output_shape, which must be known when opc runs (it decides the shape),
   may only add zeros after each spatial axis. */
static bool infer_max_unpool(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *indices = in(n, 1), *shape = in(n, 2);
  if (!read_window(g, n, x, NULL, &n->win))
    return false;
  if (!tensor_same_shape(x, indices)) {
    ir_error(g, n, "I must have the shape of X");
    return false;
  }
  int64_t unpooled[IR_MAX_RANK], dims[IR_MAX_RANK];
  max_unpool_shape(n, unpooled);
  memcpy(dims, unpooled, sizeof dims);
  if (shape) {
    if (!tensor_is_const(shape))
      return not_constant(g, n, "output_shape", shape);
    if (shape->rank != 1 || shape->dims[0] != x->rank || !shape->i64 ||
        shape->i64[0] != x->dims[0] || shape->i64[1] != x->dims[1]) {
      ir_error(g, n, "output_shape must hold %d int64 values starting with X's N and C",
               x->rank);
      return false;
    }
    for (int i = 2; i < x->rank; i++) {
      if (shape->i64[i] < unpooled[i]) {
        ir_error(g, n, "output_shape[%d] is %lld, less than the %lld the windows cover", i,
                 (long long)shape->i64[i], (long long)unpooled[i]);
        return false;
      }
      dims[i] = shape->i64[i];
    }
  }
  int64_t total = 1;
  for (int i = 0; i < x->rank; i++)
    total *= unpooled[i] > 0 ? unpooled[i] : 0;
  for (int64_t i = 0; indices->i64 && i < tensor_numel(indices); i++)
    if (indices->i64[i] < 0 || indices->i64[i] >= total) {
      ir_error(g, n, "index %lld of I is %lld; the output holds %lld elements", (long long)i,
               (long long)indices->i64[i], (long long)total);
      return false;
    }
  return set_out(g, n, 0, x->dtype, x->rank, dims);
}

static bool infer_global_pool(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  if (!need_rank(g, n, x, 3, IR_MAX_RANK))
    return false;
  n->p.lp.p = (int)node_attr_int(n, "p", 2); /* GlobalLpPool */
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < x->rank; i++)
    dims[i] = i < 2 ? x->dims[i] : 1;
  return set_out(g, n, 0, x->dtype, x->rank, dims);
}

/* SEGate (fuse-squeeze-excite): the gate of a squeeze-and-excitation block
   from its pooled vector p [N, C, 1, 1] and its two layers packed in one
   vector (W1 [hidden, C], b1, W2 [C, hidden], b2); with a third input, a
   filter [O, C, ...] of the convolution reading the gated data, its copy
   with input channel c scaled by the gate of c (one image only). */
static bool infer_se_gate(Graph *g, Node *n) {
  Tensor *p = in(n, 0), *packed = in(n, 1), *filter = in(n, 2);
  if (!need_rank(g, n, p, 4, 4) || !need_rank(g, n, packed, 1, 1))
    return false;
  const char *inner = node_attr_string(n, "inner", "none");
  n->p.se.inner = act_from_name(inner);
  n->p.se.hidden = node_attr_int(n, "hidden", 0);
  int64_t c = p->dims[1], r = n->p.se.hidden;
  if (strcmp(inner, "none") != 0 && n->p.se.inner == OPC_ACT_NONE) {
    ir_error(g, n, "unknown inner activation '%s'", inner);
    return false;
  }
  if (p->dims[2] != 1 || p->dims[3] != 1 || r < 1 || packed->dims[0] != 2 * r * c + r + c) {
    ir_error(g, n, "wants p [N, C, 1, 1] and %lld packed weights for hidden %lld, got %lld",
             (long long)(2 * r * c + r + c), (long long)r, (long long)packed->dims[0]);
    return false;
  }
  if (!filter)
    return set_out(g, n, 0, p->dtype, 4, p->dims);
  if (!need_rank(g, n, filter, 3, IR_MAX_RANK))
    return false;
  if (filter->dims[1] != c || p->dims[0] != 1) {
    ir_error(g, n, "a scaled filter needs one image and %lld input channels", (long long)c);
    return false;
  }
  return set_out(g, n, 0, filter->dtype, filter->rank, filter->dims);
}

/* ------------------------------------------------------- data movement */

static bool concat_axis(Graph *g, Node *n, int *axis) {
  const Attr *a = node_attr(n, "axis");
  /* Opset 1 and 2 defaulted to axis 1; later opsets require it. */
  int64_t v = a && a->kind == ATTR_INT ? a->i : 1;
  if (!a && g->opset >= 4) {
    ir_error(g, n, "attribute 'axis' is required");
    return false;
  }
  return resolve_axis(g, n, v, in(n, 0)->rank, axis);
}

static bool infer_concat(Graph *g, Node *n) {
  Tensor *first = in(n, 0);
  int axis;
  if (!first || !concat_axis(g, n, &axis))
    return false;
  n->p.axis.axis = axis;
  int64_t dims[IR_MAX_RANK];
  memcpy(dims, first->dims, sizeof dims);
  dims[axis] = 0;
  for (int i = 0; i < n->nin; i++) {
    Tensor *t = in(n, i);
    if (!t) {
      ir_error(g, n, "input %d is missing", i);
      return false;
    }
    bool ok = t->rank == first->rank;
    for (int d = 0; ok && d < t->rank; d++)
      ok = d == axis || t->dims[d] == first->dims[d];
    if (!ok) {
      char a[128], b[128];
      ir_error(g, n, "input '%s' %s does not concatenate with '%s' %s on axis %d", t->name,
               shape_str(t, a, sizeof a), first->name, shape_str(first, b, sizeof b), axis);
      return false;
    }
    dims[axis] += t->dims[axis];
  }
  return set_out(g, n, 0, first->dtype, first->rank, dims);
}

static bool split_plan(Graph *g, Node *n, int *axis, int64_t *sizes) {
  Tensor *x = in(n, 0);
  if (!resolve_axis(g, n, node_attr_int(n, "axis", 0), x->rank, axis))
    return false;
  int64_t dim = x->dims[*axis];
  const int64_t *v = NULL;
  int count;
  if (!ints_input_or_attr(g, n, "split", &v, &count))
    return false;
  if (count == 0)
    count = -1; /* an empty split list means equal parts */
  if (count >= 0) {
    if (count != n->nout) {
      ir_error(g, n, "split lists %d sizes for %d outputs", count, n->nout);
      return false;
    }
    int64_t total = 0;
    for (int i = 0; i < count; i++) {
      if (v[i] < 0 || v[i] > dim) {
        ir_error(g, n, "split size %lld does not fit an axis of %lld", (long long)v[i],
                 (long long)dim);
        return false;
      }
      sizes[i] = v[i];
      total += v[i];
    }
    if (total != dim) {
      ir_error(g, n, "split sizes add up to %lld, the axis has %lld", (long long)total,
               (long long)dim);
      return false;
    }
    return true;
  }
  int64_t parts = node_attr_int(n, "num_outputs", n->nout);
  if (parts != n->nout) {
    ir_error(g, n, "num_outputs is %lld but the node has %d outputs", (long long)parts, n->nout);
    return false;
  }
  /* Opset 18's num_outputs lets the last part be smaller; before, the
     parts had to be equal. */
  int64_t chunk = ceil_div(dim, parts);
  if (!node_attr(n, "num_outputs") && dim % parts != 0) {
    ir_error(g, n, "axis of size %lld does not split into %lld equal parts", (long long)dim,
             (long long)parts);
    return false;
  }
  int64_t left = dim;
  for (int i = 0; i < n->nout; i++) {
    sizes[i] = left < chunk ? left : chunk;
    left -= sizes[i];
  }
  if (left != 0) {
    ir_error(g, n, "axis of size %lld does not split into %lld parts", (long long)dim,
             (long long)parts);
    return false;
  }
  return true;
}

static bool infer_split(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  int axis;
  int64_t *sizes = arena_alloc(g->arena, sizeof(int64_t) * (size_t)(n->nout + 1));
  if (!split_plan(g, n, &axis, sizes))
    return false;
  n->p.split.axis = axis;
  n->p.split.sizes = sizes;
  int64_t dims[IR_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  for (int i = 0; i < n->nout; i++) {
    dims[axis] = sizes[i];
    if (!set_out(g, n, i, x->dtype, x->rank, dims))
      return false;
  }
  return true;
}

/* Reads Slice's starts, ends, axes and steps from inputs (opset 10+) or
   attributes (before). */
static bool slice_lists(Graph *g, Node *n, const int64_t **starts, const int64_t **ends,
                        const int64_t **axes, const int64_t **steps, int *count, int *naxes,
                        int *nsteps) {
  int ne;
  int64_t at_bound[IR_MAX_RANK];
  if (n->nin >= 3) {
    /* Ends the program computes from a run's size (torchvision's
       x[:box_sum]): their values at the bound; ir/bounds.c checks them. */
    if (symbolic_shape(in(n, 2), at_bound, &ne)) {
      int64_t *kept = arena_alloc(g->arena, sizeof(int64_t) * IR_MAX_RANK);
      memcpy(kept, at_bound, sizeof at_bound);
      *ends = kept;
    } else if (!const_ints(g, n, in(n, 2), ends, &ne)) {
      return false;
    }
    if (!const_ints(g, n, in(n, 1), starts, count))
      return false;
    *naxes = *nsteps = -1;
    if (in(n, 3) && !const_ints(g, n, in(n, 3), axes, naxes))
      return false;
    if (in(n, 4) && !const_ints(g, n, in(n, 4), steps, nsteps))
      return false;
  } else {
    if (n->nin == 2) {
      ir_error(g, n, "Slice takes starts and ends together");
      return false;
    }
    *count = node_attr_ints(n, "starts", starts);
    ne = node_attr_ints(n, "ends", ends);
    *naxes = node_attr_ints(n, "axes", axes);
    *nsteps = -1;
    if (*count < 0 || ne < 0) {
      ir_error(g, n, "attributes 'starts' and 'ends' are required");
      return false;
    }
  }
  if (ne != *count || (*naxes >= 0 && *naxes != *count) || (*nsteps >= 0 && *nsteps != *count)) {
    ir_error(g, n, "starts, ends, axes and steps must have the same length");
    return false;
  }
  return true;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Slice's start and length along an axis of dim elements, from begin to
   end by step. Negative indices count from the end; then clamp as the
   spec says, which differs for negative steps so that index dim-1 stays
   reachable. */
static void clamp_axis(int64_t b, int64_t e, int64_t dim, int64_t st, int64_t *start,
                       int64_t *ext) {
  if (b < 0)
    b = b < -dim ? 0 : b + dim; /* written to avoid overflow on INT64_MIN */
  if (e < 0)
    e = e < -dim ? -1 : e + dim;
  if (st > 0) {
    b = clamp(b, 0, dim);
    e = clamp(e, 0, dim);
  } else {
    b = clamp(b, 0, dim - 1);
    e = clamp(e, -1, dim - 1);
  }
  int64_t len = st > 0 ? ceil_div(e - b, st) : ceil_div(b - e, -st);
  *start = b;
  *ext = len > 0 ? len : 0;
}

/* An element of a small run-time integer tensor, as far as opc follows
   it back: element `element` of `base` plus `offset`, or the constant
   `offset` where base is NULL. */
typedef struct RunIndex {
  const Tensor *base;
  int64_t element, offset;
} RunIndex;

enum { RUN_INDEX_DEPTH = 16 }; /* steps followed back */

/* The one-element operand of an Add or Sub that is a constant, or NULL. */
static const Tensor *constant_scalar(const Tensor *t) {
  return t && t->i64 && dtype_is_integer(t->dtype) && tensor_numel(t) == 1 ? t : NULL;
}

/* Follows element i of t back through the nodes that move it unchanged
   (the T_RESHAPES kinds: Identity, Unsqueeze, Squeeze, Reshape, Flatten;
   a widening integer Cast; a Concat of vectors) and those that add a
   constant to it (Add, Sub), to the value it is of a tensor opc does not
   follow (a Loop's iteration number, a graph input, a Gather...). */
static RunIndex trace_index(const Tensor *t, int64_t i, int depth) {
  if (t->i64 && dtype_is_integer(t->dtype))
    return (RunIndex){NULL, 0, t->i64[i]};
  const Node *p = t->producer;
  RunIndex here = {t, i, 0};
  if (!p || depth >= RUN_INDEX_DEPTH || p->nout < 1 || p->out[0] != t)
    return here;
  const Tensor *x = p->nin > 0 ? p->in[0] : NULL;
  /* The kinds that move their input unchanged (T_RESHAPES), but Cast,
     which may also narrow it. */
  if (p->op != OP_CAST && (op_info(p->op)->traits & T_RESHAPES))
    return x && tensor_numel(x) == tensor_numel(t) ? trace_index(x, i, depth + 1) : here;
  switch (p->op) {
  case OP_CAST: /* an integer that a narrower type would wrap stays unfollowed */
    return x && dtype_is_integer(x->dtype) && dtype_size(t->dtype) >= dtype_size(x->dtype)
               ? trace_index(x, i, depth + 1) : here;
  case OP_CONCAT:
    if (t->rank != 1)
      return here;
    for (int k = 0; k < p->nin; k++) {
      int64_t count = p->in[k] ? tensor_numel(p->in[k]) : 0;
      if (i < count)
        return trace_index(p->in[k], i, depth + 1);
      i -= count;
    }
    return here;
  case OP_ADD:
  case OP_SUB: {
    const Tensor *a = p->in[0], *b = p->in[1], *c = constant_scalar(b), *v = a;
    if (!c && p->op == OP_ADD && (c = constant_scalar(a)))
      v = b;
    if (!c || tensor_numel(v) != tensor_numel(t))
      return here;
    RunIndex r = trace_index(v, i, depth + 1);
    int64_t add = p->op == OP_SUB ? -c->i64[0] : c->i64[0];
    if (__builtin_add_overflow(r.offset, add, &r.offset))
      return here;
    return r;
  }
  default:
    return here;
  }
}

/* Slice's output length along an axis sliced from start to start + span
   by step, where nothing clamps. */
static int64_t unclamped_length(int64_t span, int64_t step) {
  if (step > 0)
    return span > 0 ? ceil_div(span, step) : 0;
  return span < 0 ? ceil_div(-span, -step) : 0;
}

/* A Slice whose starts are run-time data, each end its start plus a
   constant (test_loop11's body: x[i:i+1]), found by following both back
   (trace_index): the output is static, each such axis the length the
   constant gives, and the kernel reads the starts and ends, clamps them
   as ONNX says, and fails the run where clamping changed that length.
   Axes and steps must be constants. */
static bool slice_plan_at_run_time(Graph *g, Node *n, int64_t *start, int64_t *step,
                                   int64_t *ext) {
  Tensor *x = in(n, 0), *starts = in(n, 1), *ends = in(n, 2);
  const int64_t *axes = NULL, *steps = NULL;
  int naxes = -1, nsteps = -1;
  if ((in(n, 3) && !const_ints(g, n, in(n, 3), &axes, &naxes)) ||
      (in(n, 4) && !const_ints(g, n, in(n, 4), &steps, &nsteps)))
    return false;
  int64_t count = tensor_numel(starts);
  if (!ends || starts->rank > 1 || tensor_numel(ends) != count || count > IR_MAX_RANK ||
      (naxes >= 0 && naxes != count) || (nsteps >= 0 && nsteps != count) ||
      !dtype_is_integer(starts->dtype) || !dtype_is_integer(ends->dtype)) {
    ir_error(g, n, "starts, ends, axes and steps must be integer vectors of one length "
             "(at most %d)", IR_MAX_RANK);
    return false;
  }
  bool seen[IR_MAX_RANK] = {false};
  for (int d = 0; d < x->rank; d++) {
    start[d] = 0;
    step[d] = 1;
    ext[d] = x->dims[d];
    n->p.slice.run_element[d] = -1;
  }
  n->p.slice.bounded_axis = -1;
  for (int i = 0; i < (int)count; i++) {
    int axis;
    if (!resolve_axis(g, n, naxes >= 0 ? axes[i] : i, x->rank, &axis))
      return false;
    if (seen[axis]) {
      ir_error(g, n, "axis %d is sliced twice", axis);
      return false;
    }
    seen[axis] = true;
    int64_t st = nsteps >= 0 ? steps[i] : 1, dim = x->dims[axis];
    if (st == 0) {
      ir_error(g, n, "slice step must not be 0");
      return false;
    }
    RunIndex b = trace_index(starts, i, 0), e = trace_index(ends, i, 0);
    step[axis] = st;
    if (!b.base && !e.base) { /* both constants: a static axis */
      clamp_axis(b.offset, e.offset, dim, st, &start[axis], &ext[axis]);
      continue;
    }
    int64_t span;
    if ((b.base != e.base || b.element != e.element) && n->p.slice.bounded_axis < 0) {
      /* Form b: a length only the run decides, bounded by the axis. */
      n->p.slice.bounded_axis = axis;
      ext[axis] = ceil_div(dim, st > 0 ? st : -st);
      n->p.slice.run_element[axis] = i;
      n->p.slice.run_time = true;
      continue;
    }
    if (b.base != e.base || b.element != e.element ||
        __builtin_sub_overflow(e.offset, b.offset, &span)) {
      /* The words of not_constant, which tools/conformance read to bind. */
      const Tensor *t = tensor_is_const(ends) ? starts : ends;
      const Tensor *input = graph_input_behind(g, t);
      ir_error(g, n, "shape input '%s' is not a compile-time constant%s%s%s, and opc cannot "
               "tell that element %d of ends '%s' is the start's plus a constant, while axis "
               "%d already has a length only the run decides, the one such axis a Slice may "
               "have (bind it with --const-input)", t->name,
               input && input != t ? "; it depends on graph input '" : "",
               input && input != t ? input->name : "", input && input != t ? "'" : "", i,
               ends->name, n->p.slice.bounded_axis);
      return false;
    }
    int64_t len = unclamped_length(span, st), most = ceil_div(dim, st > 0 ? st : -st);
    if (len > most) {
      ir_error(g, n, "ends input '%s' is its start plus %lld along axis %d, which has %lld "
               "elements: the slice would be clamped in every run", ends->name,
               (long long)span, axis, (long long)dim);
      return false;
    }
    ext[axis] = len;
    n->p.slice.run_element[axis] = i;
    n->p.slice.run_time = true;
  }
  return true;
}

static bool slice_plan(Graph *g, Node *n, int64_t *start, int64_t *step, int64_t *ext) {
  Tensor *x = in(n, 0);
  const int64_t *starts, *ends, *axes = NULL, *steps = NULL;
  int count, naxes, nsteps;
  n->p.slice.run_time = false;
  n->p.slice.bounded_axis = -1;
  if (n->nin >= 3 && in(n, 1) && !tensor_is_const(in(n, 1)))
    return slice_plan_at_run_time(g, n, start, step, ext);
  if (!slice_lists(g, n, &starts, &ends, &axes, &steps, &count, &naxes, &nsteps))
    return false;
  bool seen[IR_MAX_RANK] = {false};
  for (int d = 0; d < x->rank; d++) {
    start[d] = 0;
    step[d] = 1;
    ext[d] = x->dims[d];
  }
  for (int i = 0; i < count; i++) {
    int axis;
    if (!resolve_axis(g, n, naxes >= 0 ? axes[i] : i, x->rank, &axis))
      return false;
    if (seen[axis]) {
      ir_error(g, n, "axis %d is sliced twice", axis);
      return false;
    }
    seen[axis] = true;
    int64_t dim = x->dims[axis], st = nsteps >= 0 ? steps[i] : 1;
    if (st == 0) {
      ir_error(g, n, "slice step must not be 0");
      return false;
    }
    step[axis] = st;
    clamp_axis(starts[i], ends[i], dim, st, &start[axis], &ext[axis]);
  }
  return true;
}

static bool infer_slice(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  if (!slice_plan(g, n, n->p.slice.start, n->p.slice.step, n->p.slice.extent) ||
      !set_out(g, n, 0, x->dtype, x->rank, n->p.slice.extent))
    return false;
  int axis = n->p.slice.run_time ? n->p.slice.bounded_axis : -1;
  if (axis < 0)
    return true;
  /* Form b: the run's length along the axis is the kernel's to count. */
  for (int d = 0; d < x->rank; d++)
    if (d != axis && n->p.slice.run_element[d] >= 0) {
      /* The words of not_constant, which tools/conformance read to bind. */
      ir_error(g, n, "shape input '%s' is not a compile-time constant, and it slices axes %d "
               "and %d at run time, axis %d to a length only the run decides (its end not "
               "the start plus a constant): opc takes such an axis with no other run-time "
               "start (bind it with --const-input)", in(n, 1)->name, axis, d, axis);
      return false;
    }
  Tensor *y = n->out[0];
  y->bounded = tensor_numel(y) > 0;
  y->bound_axis = axis;
  y->bound_origin = y;
  return true;
}

static bool infer_pad(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  const int64_t *pads;
  int count;
  if (!ints_input_or_attr(g, n, "pads", &pads, &count))
    return false;
  if (count < 0)
    count = node_attr_ints(n, "paddings", &pads); /* opset 1 */
  if (count < 0) {
    ir_error(g, n, "pads are missing");
    return false;
  }
  const char *mode = node_attr_string(n, "mode", "constant");
  static const char *const modes[] = {"constant", "reflect", "edge", "wrap"}; /* PadMode */
  int m = name_index(modes, 4, mode);
  if (m < 0) {
    ir_error(g, n, "unknown pad mode '%s'", mode);
    return false;
  }
  n->p.pad.mode = (PadMode)m;
  n->p.pad.value = node_attr_float(n, "value", 0.0f);
  n->p.pad.pads = pads;
  n->p.pad.npads = count;
  Tensor *cv = in(n, 2);
  if (cv && tensor_numel(cv) != 1) {
    ir_error(g, n, "constant_value must be a scalar");
    return false;
  }
  /* Opset 18's axes say which dims the pads refer to. */
  int axes[IR_MAX_RANK], naxes = x->rank;
  for (int i = 0; i < x->rank; i++)
    axes[i] = i;
  if (in(n, 3)) {
    const int64_t *av;
    if (!const_ints(g, n, in(n, 3), &av, &naxes))
      return false;
    if (naxes > x->rank) {
      ir_error(g, n, "more pad axes than the input has dims");
      return false;
    }
    for (int i = 0; i < naxes; i++)
      if (!resolve_axis(g, n, av[i], x->rank, &axes[i]))
        return false;
  }
  if (count != 2 * naxes) {
    ir_error(g, n, "pads must have %d values, has %d", 2 * naxes, count);
    return false;
  }
  memcpy(n->p.pad.axes, axes, sizeof axes);
  n->p.pad.naxes = naxes;
  int64_t dims[IR_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  for (int i = 0; i < naxes; i++) {
    int64_t d = dims[axes[i]];
    if (!checked(g, n, __builtin_add_overflow(d, pads[i], &d) ||
                           __builtin_add_overflow(d, pads[naxes + i], &d)))
      return false;
    dims[axes[i]] = d;
  }
  return set_out(g, n, 0, x->dtype, x->rank, dims);
}

static bool infer_gemm(Graph *g, Node *n) {
  Tensor *a = in(n, 0), *b = in(n, 1), *c = in(n, 2);
  if (!need_rank(g, n, a, 2, 2) || !need_rank(g, n, b, 2, 2))
    return false;
  bool ta, tb;
  if (!flag_attr(g, n, "transA", false, &ta) || !flag_attr(g, n, "transB", false, &tb))
    return false;
  n->p.gemm.trans_a = ta;
  n->p.gemm.trans_b = tb;
  n->p.gemm.alpha = node_attr_float(n, "alpha", 1.0f);
  n->p.gemm.beta = node_attr_float(n, "beta", 1.0f);
  int64_t m = a->dims[ta ? 1 : 0], k = a->dims[ta ? 0 : 1];
  int64_t kb = b->dims[tb ? 1 : 0], nn = b->dims[tb ? 0 : 1];
  if (k != kb) {
    char x[128], y[128];
    ir_error(g, n, "inner dims differ: A %s%s, B %s%s", shape_str(a, x, sizeof x),
             ta ? " (transposed)" : "", shape_str(b, y, sizeof y), tb ? " (transposed)" : "");
    return false;
  }
  int64_t dims[2] = {m, nn};
  if (c && !broadcasts_to(c->rank, c->dims, 2, dims)) {
    char x[128];
    ir_error(g, n, "C %s does not broadcast to [%lld,%lld]", shape_str(c, x, sizeof x),
             (long long)m, (long long)nn);
    return false;
  }
  return set_out(g, n, 0, a->dtype, 2, dims);
}

void matmul_operands(const Tensor *a, const Tensor *b, int64_t *ad, int *ar, int64_t *bd,
                     int *br) {
  *ar = a->rank;
  *br = b->rank;
  memcpy(ad, a->dims, sizeof a->dims);
  memcpy(bd, b->dims, sizeof b->dims);
  if (*ar == 1) {
    ad[1] = ad[0];
    ad[0] = 1;
    *ar = 2;
  }
  if (*br == 1) {
    bd[1] = 1;
    *br = 2;
  }
}

static bool infer_matmul(Graph *g, Node *n) {
  Tensor *a = in(n, 0), *b = in(n, 1);
  if (a->rank < 1 || b->rank < 1) {
    ir_error(g, n, "MatMul operands must have rank 1 or more");
    return false;
  }
  int64_t ad[IR_MAX_RANK + 1], bd[IR_MAX_RANK + 1];
  int ar, br;
  matmul_operands(a, b, ad, &ar, bd, &br);
  int64_t m = ad[ar - 2], k = ad[ar - 1], kb = bd[br - 2], nn = bd[br - 1];
  if (k != kb) {
    char x[128], y[128];
    ir_error(g, n, "inner dims differ: %s x %s", shape_str(a, x, sizeof x),
             shape_str(b, y, sizeof y));
    return false;
  }
  int64_t dims[IR_MAX_RANK + 2];
  int rank;
  if (!broadcast_shape(ar - 2, ad, br - 2, bd, &rank, dims)) {
    char x[128], y[128];
    ir_error(g, n, "batch dims of %s and %s do not broadcast", shape_str(a, x, sizeof x),
             shape_str(b, y, sizeof y));
    return false;
  }
  if (a->rank != 1)
    dims[rank++] = m;
  if (b->rank != 1)
    dims[rank++] = nn;
  return set_out(g, n, 0, a->dtype, rank, dims) && fused_bias_fits(g, n, nn);
}

/* A fused bias (T_FUSED_BIAS, the input after ONNX's): one value of the
   output's type per column, `cols` of them, folded in from an Add (the
   node absorbed it): a model's own node with that input is refused. */
static bool fused_bias_fits(Graph *g, Node *n, int64_t cols) {
  const OpInfo *info = op_info(n->op);
  const Tensor *bias = n->nin > info->max_inputs ? in(n, info->max_inputs) : NULL;
  if (!bias || !(info->traits & T_FUSED_BIAS))
    return true;
  if (n->nfused == 0) {
    ir_error(g, n, "has %d inputs, expects %d to %d", n->nin, info->min_inputs,
             info->max_inputs);
    return false;
  }
  if (bias->rank == 1 && bias->dims[0] == cols && bias->dtype == n->out[0]->dtype)
    return true;
  char s[128];
  ir_error(g, n, "fused bias '%s' %s must have shape [%lld] and the output's type", bias->name,
           shape_str(bias, s, sizeof s), (long long)cols);
  return false;
}

static bool infer_flatten(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  int64_t axis = node_attr_int(n, "axis", 1);
  if (axis < -x->rank || axis > x->rank) {
    ir_error(g, n, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
    return false;
  }
  if (axis < 0)
    axis += x->rank;
  int64_t dims[2] = {1, 1};
  for (int i = 0; i < x->rank; i++)
    dims[i < axis ? 0 : 1] *= x->dims[i];
  return set_out(g, n, 0, x->dtype, 2, dims);
}

/* A target shape the program computes from a bounded tensor's dims, whose
   every element opc knows symbolically (ir/symbolic.c): its values where
   each run is at its bound, the dims planned; ir/bounds.c decides
   whether the reshape may be compiled. */
static bool symbolic_shape(const Tensor *t, int64_t *vals, int *count) {
  if (!t || tensor_is_const(t) || !t->sym || t->rank > 1 || tensor_numel(t) > IR_MAX_RANK)
    return false;
  *count = (int)tensor_numel(t);
  for (int i = 0; i < *count; i++)
    vals[i] = sym_at_bound(t->sym[i]);
  return true;
}

static bool infer_reshape(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  const int64_t *shape;
  int64_t at_bound[IR_MAX_RANK];
  int count;
  if (symbolic_shape(in(n, 1), at_bound, &count))
    shape = at_bound;
  else if (!ints_input_or_attr(g, n, "shape", &shape, &count)) /* an attribute before opset 5 */
    return false;
  if (count < 0) {
    ir_error(g, n, "the target shape is missing");
    return false;
  }
  if (count > IR_MAX_RANK) {
    ir_error(g, n, "target rank %d is beyond opc's limit of %d", count, IR_MAX_RANK);
    return false;
  }
  bool allowzero;
  if (!flag_attr(g, n, "allowzero", false, &allowzero))
    return false;
  int64_t dims[IR_MAX_RANK], known = 1;
  int infer_at = -1;
  for (int i = 0; i < count; i++) {
    int64_t d = shape[i];
    if (d == 0 && !allowzero) {
      if (i >= x->rank) {
        ir_error(g, n, "target dim %d is 0 (copy) but the input has rank %d", i, x->rank);
        return false;
      }
      d = x->dims[i];
    }
    if (d == -1) {
      if (infer_at >= 0) {
        ir_error(g, n, "the target shape has more than one -1");
        return false;
      }
      infer_at = i;
      continue;
    }
    if (d < 0) {
      ir_error(g, n, "target dim %d is %lld", i, (long long)d);
      return false;
    }
    dims[i] = d;
    if (!checked(g, n, __builtin_mul_overflow(known, d, &known)))
      return false;
  }
  int64_t total = tensor_numel(x);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      ir_error(g, n, "cannot reshape %lld elements with a -1 next to %lld", (long long)total,
               (long long)known);
      return false;
    }
    dims[infer_at] = total / known;
    known = total;
  }
  if (known != total) {
    char a[128];
    ir_error(g, n, "cannot reshape %s (%lld elements) to %lld elements",
             shape_str(x, a, sizeof a), (long long)total, (long long)known);
    return false;
  }
  return set_out(g, n, 0, x->dtype, count, dims);
}

static bool infer_squeeze(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  const int64_t *axes;
  int count;
  if (!ints_input_or_attr(g, n, "axes", &axes, &count))
    return false;
  bool drop[IR_MAX_RANK] = {false};
  if (count < 0) {
    for (int i = 0; i < x->rank; i++)
      drop[i] = x->dims[i] == 1;
  }
  for (int i = 0; i < count; i++) {
    int a;
    if (!resolve_axis(g, n, axes[i], x->rank, &a))
      return false;
    if (x->dims[a] != 1) {
      ir_error(g, n, "cannot squeeze axis %d of size %lld", a, (long long)x->dims[a]);
      return false;
    }
    drop[a] = true;
  }
  int64_t dims[IR_MAX_RANK];
  int rank = 0;
  for (int i = 0; i < x->rank; i++)
    if (!drop[i])
      dims[rank++] = x->dims[i];
  return set_out(g, n, 0, x->dtype, rank, dims);
}

static bool infer_unsqueeze(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  const int64_t *axes;
  int count;
  if (!ints_input_or_attr(g, n, "axes", &axes, &count))
    return false;
  if (count < 0) {
    ir_error(g, n, "axes are missing");
    return false;
  }
  int rank = x->rank + count;
  if (rank > IR_MAX_RANK) {
    ir_error(g, n, "output rank %d is beyond opc's limit of %d", rank, IR_MAX_RANK);
    return false;
  }
  bool added[IR_MAX_RANK] = {false};
  for (int i = 0; i < count; i++) {
    int a;
    if (!resolve_axis(g, n, axes[i], rank, &a))
      return false;
    if (added[a]) {
      ir_error(g, n, "axis %d appears twice", a);
      return false;
    }
    added[a] = true;
  }
  int64_t dims[IR_MAX_RANK];
  for (int i = 0, j = 0; i < rank; i++)
    dims[i] = added[i] ? 1 : x->dims[j++];
  return set_out(g, n, 0, x->dtype, rank, dims);
}

static bool transpose_plan(Graph *g, Node *n, int *perm) {
  Tensor *x = in(n, 0);
  const int64_t *p;
  int count = node_attr_ints(n, "perm", &p);
  if (count < 0) {
    for (int i = 0; i < x->rank; i++)
      perm[i] = x->rank - 1 - i;
    return true;
  }
  if (count != x->rank) {
    ir_error(g, n, "perm has %d values for rank %d", count, x->rank);
    return false;
  }
  bool used[IR_MAX_RANK] = {false};
  for (int i = 0; i < count; i++) {
    if (p[i] < 0 || p[i] >= count || used[p[i]]) {
      ir_error(g, n, "perm is not a permutation of 0..%d", count - 1);
      return false;
    }
    used[p[i]] = true;
    perm[i] = (int)p[i];
  }
  return true;
}

static bool infer_transpose(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  int *perm = n->p.transpose.perm;
  if (!transpose_plan(g, n, perm))
    return false;
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < x->rank; i++)
    dims[i] = x->dims[perm[i]];
  return set_out(g, n, 0, x->dtype, x->rank, dims);
}

static bool infer_tile(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  const int64_t *reps;
  int count;
  if (!const_ints(g, n, in(n, 1), &reps, &count))
    return false;
  if (count != x->rank) {
    ir_error(g, n, "repeats has %d values for rank %d", count, x->rank);
    return false;
  }
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < x->rank; i++) {
    if (reps[i] < 0) {
      ir_error(g, n, "repeat %lld is negative", (long long)reps[i]);
      return false;
    }
    if (!checked(g, n, __builtin_mul_overflow(x->dims[i], reps[i], &dims[i])))
      return false;
  }
  return set_out(g, n, 0, x->dtype, x->rank, dims);
}

static bool infer_expand(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  const int64_t *shape;
  int64_t at_bound[IR_MAX_RANK];
  int count, rank;
  if (symbolic_shape(in(n, 1), at_bound, &count)) /* bounded: ir/bounds.c */
    shape = at_bound;
  else if (!const_ints(g, n, in(n, 1), &shape, &count))
    return false;
  int64_t dims[IR_MAX_RANK];
  if (count > IR_MAX_RANK || !broadcast_shape(x->rank, x->dims, count, shape, &rank, dims)) {
    char a[128];
    ir_error(g, n, "%s does not expand to a shape of %d dims", shape_str(x, a, sizeof a), count);
    return false;
  }
  return set_out(g, n, 0, x->dtype, rank, dims);
}

/* Gather and GatherElements: the axis, into Node.p, and indices of an
   integer type. */
static bool gather_plan(Graph *g, Node *n) {
  Tensor *idx = in(n, 1);
  if (!resolve_axis(g, n, node_attr_int(n, "axis", 0), in(n, 0)->rank, &n->p.axis.axis))
    return false;
  if (idx->dtype == DT_INT64 || idx->dtype == DT_INT32)
    return true;
  ir_error(g, n, "indices '%s' must be int32 or int64, are %s", idx->name,
           dtype_name(idx->dtype));
  return false;
}

/* Indices known at compile time must lie in [-dim, dim). */
static bool indices_in_range(Graph *g, Node *n, const Tensor *idx, int64_t dim) {
  for (int64_t i = 0; idx->i64 && i < tensor_numel(idx); i++)
    if (idx->i64[i] < -dim || idx->i64[i] >= dim) {
      ir_error(g, n, "index %lld is out of range for an axis of size %lld",
               (long long)idx->i64[i], (long long)dim);
      return false;
    }
  return true;
}

static bool infer_gather(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *idx = in(n, 1);
  if (!gather_plan(g, n))
    return false;
  int axis = n->p.axis.axis;
  if (!indices_in_range(g, n, idx, x->dims[axis]))
    return false;
  int rank = x->rank - 1 + idx->rank;
  if (rank > IR_MAX_RANK) {
    ir_error(g, n, "output rank %d is beyond opc's limit of %d", rank, IR_MAX_RANK);
    return false;
  }
  int64_t dims[IR_MAX_RANK];
  int r = 0;
  for (int i = 0; i < axis; i++)
    dims[r++] = x->dims[i];
  for (int i = 0; i < idx->rank; i++)
    dims[r++] = idx->dims[i];
  for (int i = axis + 1; i < x->rank; i++)
    dims[r++] = x->dims[i];
  return set_out(g, n, 0, x->dtype, rank, dims);
}

static bool infer_gather_elements(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *idx = in(n, 1);
  if (x->rank < 1) {
    ir_error(g, n, "input must have rank 1 or more");
    return false;
  }
  if (!gather_plan(g, n))
    return false;
  int axis = n->p.axis.axis;
  if (idx->rank != x->rank) {
    ir_error(g, n, "indices have rank %d, the input %d", idx->rank, x->rank);
    return false;
  }
  for (int d = 0; d < x->rank; d++)
    if (d != axis && idx->dims[d] > x->dims[d]) {
      char a[128], b[128];
      ir_error(g, n, "indices %s do not fit the input %s off the axis", shape_str(idx, a, sizeof a),
               shape_str(x, b, sizeof b));
      return false;
    }
  return indices_in_range(g, n, idx, x->dims[axis]) &&
         set_out(g, n, 0, x->dtype, idx->rank, idx->dims);
}

static bool infer_depth_space(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  int64_t b = node_attr_int(n, "blocksize", 0);
  if (!need_rank(g, n, x, 4, 4))
    return false;
  if (b <= 0) {
    ir_error(g, n, "attribute 'blocksize' is required and must be positive");
    return false;
  }
  const char *mode = node_attr_string(n, "mode", "DCR");
  if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0) {
    ir_error(g, n, "unknown mode '%s'", mode);
    return false;
  }
  n->p.depth_space.blocksize = b;
  n->p.depth_space.crd = strcmp(mode, "CRD") == 0;
  int64_t dims[4] = {x->dims[0], x->dims[1], x->dims[2], x->dims[3]};
  if (n->op == OP_DEPTH_TO_SPACE) {
    if (dims[1] % (b * b) != 0) {
      ir_error(g, n, "%lld channels do not divide by blocksize^2 = %lld", (long long)dims[1],
               (long long)(b * b));
      return false;
    }
    dims[1] /= b * b;
    dims[2] *= b;
    dims[3] *= b;
  } else {
    if (dims[2] % b != 0 || dims[3] % b != 0) {
      ir_error(g, n, "height and width must divide by the blocksize %lld", (long long)b);
      return false;
    }
    dims[1] *= b * b;
    dims[2] /= b;
    dims[3] /= b;
  }
  return set_out(g, n, 0, x->dtype, 4, dims);
}

/* Resize's and Upsample's modes; names opc does not know become -1, for the
   emitter to report (shape inference does not need them). False after
   reporting a flag that is neither 0 nor 1. */
static bool resize_params(Graph *g, Node *n) {
  static const char *const modes[] = {"nearest", "linear", "cubic", "bilinear"}; /* ResizeMode */
  static const char *const coords[] = {
      "half_pixel",           "pytorch_half_pixel", "align_corners",        "asymmetric",
      "tf_half_pixel_for_nn", "tf_crop_and_resize", "half_pixel_symmetric",
  }; /* ResizeCoord */
  static const char *const nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                        "ceil"}; /* ResizeNearest */
  static const char *const policies[] = {"stretch", "not_larger", "not_smaller"};
  n->p.resize.mode = name_index(modes, 4, node_attr_string(n, "mode", "nearest"));
  n->p.resize.coord = name_index(
      coords, 7, node_attr_string(n, "coordinate_transformation_mode", "half_pixel"));
  n->p.resize.nearest =
      name_index(nearest, 4, node_attr_string(n, "nearest_mode", "round_prefer_floor"));
  int policy = name_index(policies, 3, node_attr_string(n, "keep_aspect_ratio_policy", "stretch"));
  n->p.resize.policy = policy < 0 ? ASPECT_STRETCH : (AspectPolicy)policy;
  if (!flag_attr(g, n, "antialias", false, &n->p.resize.antialias) ||
      !flag_attr(g, n, "exclude_outside", false, &n->p.resize.exclude_outside))
    return false;
  n->p.resize.cubic_a = node_attr_float(n, "cubic_coeff_a", -0.75f);
  n->p.resize.extrapolation = node_attr_float(n, "extrapolation_value", 0.0f);
  const Attr *a = node_attr(n, "scales");
  n->p.resize.scales = a ? a->floats : NULL;
  n->p.resize.nscales = a ? a->n : 0;
  int rank = n->nin > 0 && n->in[0] ? n->in[0]->rank : 0;
  n->p.resize.naxes = rank;
  for (int i = 0; i < rank; i++)
    n->p.resize.axes[i] = i;
  return true;
}

/* Output size from a scale, as ONNX Runtime computes it: float product,
   rounded down. */
static bool scaled(Graph *g, Node *n, int64_t size, float scale, int64_t *out) {
  float v = floorf((float)size * scale);
  if (!(scale > 0) || !(v < (float)MAX_DIM)) {
    ir_error(g, n, "scale %g does not give a usable size", (double)scale);
    return false;
  }
  *out = (int64_t)v;
  return true;
}

static bool infer_resize(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  if (!resize_params(g, n))
    return false;
  /* Opset 10 had (X, scales); 11 added roi before scales and sizes after. */
  bool v10 = g->opset > 0 && g->opset < 11;
  Tensor *scales_t = in(n, v10 ? 1 : 2), *sizes_t = v10 ? NULL : in(n, 3);
  const float *scales = NULL;
  const int64_t *sizes = NULL;
  int ns = 0, nz = 0;
  if (scales_t && !const_floats(g, n, scales_t, &scales, &ns))
    return false;
  if (sizes_t && !const_ints(g, n, sizes_t, &sizes, &nz))
    return false;
  if ((ns > 0) == (nz > 0)) {
    ir_error(g, n, "exactly one of scales and sizes must be given");
    return false;
  }
  int axes[IR_MAX_RANK], naxes = x->rank;
  for (int i = 0; i < x->rank; i++)
    axes[i] = i;
  const int64_t *av;
  int na = node_attr_ints(n, "axes", &av); /* opset 18 */
  if (na >= 0) {
    if (na > x->rank) {
      ir_error(g, n, "more axes than the input has dims");
      return false;
    }
    naxes = na;
    for (int i = 0; i < na; i++)
      if (!resolve_axis(g, n, av[i], x->rank, &axes[i]))
        return false;
  }
  if ((ns > 0 ? ns : nz) != naxes) {
    ir_error(g, n, "%s has %d values for %d axes", ns > 0 ? "scales" : "sizes",
             ns > 0 ? ns : nz, naxes);
    return false;
  }
  memcpy(n->p.resize.axes, axes, sizeof axes);
  n->p.resize.naxes = naxes;
  int64_t dims[IR_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  const char *policy = node_attr_string(n, "keep_aspect_ratio_policy", "stretch");
  if (ns > 0) {
    for (int i = 0; i < naxes; i++)
      if (!scaled(g, n, x->dims[axes[i]], scales[i], &dims[axes[i]]))
        return false;
  } else if (strcmp(policy, "stretch") == 0) {
    for (int i = 0; i < naxes; i++)
      dims[axes[i]] = sizes[i];
  } else if (strcmp(policy, "not_larger") == 0 || strcmp(policy, "not_smaller") == 0) {
    bool larger = strcmp(policy, "not_smaller") == 0;
    double scale = 0;
    for (int i = 0; i < naxes; i++) {
      double s = (double)sizes[i] / (double)x->dims[axes[i]];
      if (i == 0 || (larger ? s > scale : s < scale))
        scale = s;
    }
    for (int i = 0; i < naxes; i++) {
      double v = floor(scale * (double)x->dims[axes[i]] + 0.5);
      if (!(v >= 0 && v < (double)MAX_DIM)) {
        ir_error(g, n, "sizes do not give a usable shape");
        return false;
      }
      dims[axes[i]] = (int64_t)v;
    }
  } else {
    ir_error(g, n, "unknown keep_aspect_ratio_policy '%s'", policy);
    return false;
  }
  return set_out(g, n, 0, x->dtype, x->rank, dims);
}

static bool infer_upsample(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  if (!resize_params(g, n))
    return false;
  const float *scales;
  int ns;
  if (in(n, 1)) { /* opset 9 */
    if (!const_floats(g, n, in(n, 1), &scales, &ns))
      return false;
  } else {
    const Attr *a = node_attr(n, "scales");
    if (!a || a->kind != ATTR_FLOATS) {
      ir_error(g, n, "scales are missing");
      return false;
    }
    scales = a->floats;
    ns = a->n;
  }
  if (ns != x->rank) {
    ir_error(g, n, "scales has %d values for rank %d", ns, x->rank);
    return false;
  }
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < x->rank; i++)
    if (!scaled(g, n, x->dims[i], scales[i], &dims[i]))
      return false;
  return set_out(g, n, 0, x->dtype, x->rank, dims);
}

/* k, a scalar: known at compile time, or read by the kernel at run time
   (it decides no shape). */
static bool trilu_k(Graph *g, Node *n) {
  Tensor *k = in(n, 1);
  n->p.trilu.k = 0;
  n->p.trilu.k_at_run_time = k && !tensor_is_const(k);
  if (!k || !n->p.trilu.k_at_run_time)
    return !k || const_scalar_int(g, n, k, &n->p.trilu.k);
  if (tensor_numel(k) != 1) {
    ir_error(g, n, "'%s' must hold one value, has %lld", k->name, (long long)tensor_numel(k));
    return false;
  }
  return true;
}

/* ReverseSequence: the time and batch axes, 0 and 1 in either order, and
   one length per batch, within the time axis where known now. */
static bool infer_reverse_sequence(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *lens = in(n, 1);
  int64_t time = node_attr_int(n, "time_axis", 0), batch = node_attr_int(n, "batch_axis", 1);
  if (!need_rank(g, n, x, 2, IR_MAX_RANK))
    return false;
  if ((time != 0 && time != 1) || (batch != 0 && batch != 1) || time == batch) {
    ir_error(g, n, "time_axis %lld and batch_axis %lld must be 0 and 1, one each",
             (long long)time, (long long)batch);
    return false;
  }
  if (lens->rank != 1 || lens->dims[0] != x->dims[batch]) {
    ir_error(g, n, "sequence_lens must hold one length per batch (%lld)",
             (long long)x->dims[batch]);
    return false;
  }
  for (int64_t b = 0; lens->i64 && b < lens->dims[0]; b++)
    if (lens->i64[b] < 0 || lens->i64[b] > x->dims[time]) {
      ir_error(g, n, "sequence length %lld is outside [0, %lld]", (long long)lens->i64[b],
               (long long)x->dims[time]);
      return false;
    }
  n->p.reverse_sequence.time_axis = (int)time;
  n->p.reverse_sequence.batch_axis = (int)batch;
  return same_as(g, n, 0, x);
}

/* Det: [*, M, M] to [*], M at most scalar.h's OPC_DET_MAX. */
static bool infer_det(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  if (!need_rank(g, n, x, 2, IR_MAX_RANK))
    return false;
  int64_t m = x->dims[x->rank - 1];
  if (x->dims[x->rank - 2] != m) {
    ir_error(g, n, "input '%s' must hold square matrices, has %lld x %lld", x->name,
             (long long)x->dims[x->rank - 2], (long long)m);
    return false;
  }
  if (m > OPC_DET_MAX) {
    ir_error(g, n, "matrices of %lld x %lld: opc takes at most %d x %d", (long long)m,
             (long long)m, OPC_DET_MAX, OPC_DET_MAX);
    return false;
  }
  return set_out(g, n, 0, x->dtype, x->rank - 2, x->dims);
}

/* GridSample's mode and padding_mode as scalar.h's codes; opset 16's
   names (bilinear, bicubic) and opset 20's (linear, cubic) both read. */
static bool grid_modes(Graph *g, Node *n) {
  const char *mode = node_attr_string(n, "mode", "bilinear");
  const char *pad = node_attr_string(n, "padding_mode", "zeros");
  static const char *const modes[] = {"linear", "nearest", "cubic", "bilinear", "nearest", "bicubic"};
  static const char *const pads[] = {"zeros", "border", "reflection"};
  n->p.grid.mode = n->p.grid.padding = -1;
  for (int k = 0; k < 6; k++)
    if (strcmp(mode, modes[k]) == 0)
      n->p.grid.mode = k % 3;
  for (int k = 0; k < 3; k++)
    if (strcmp(pad, pads[k]) == 0)
      n->p.grid.padding = k;
  if (n->p.grid.mode < 0) {
    ir_error(g, n, "unknown mode '%s' (linear, nearest or cubic; bilinear, bicubic)", mode);
    return false;
  }
  if (n->p.grid.padding < 0) {
    ir_error(g, n, "unknown padding_mode '%s' (zeros, border or reflection)", pad);
    return false;
  }
  return true;
}

/* GridSample: X [N, C, (D,) H, W] sampled at grid [N, (D_out,) H_out,
   W_out, r], r the number of spatial axes, into [N, C, (D_out,) H_out,
   W_out]. */
static bool infer_grid_sample(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *grid = in(n, 1);
  if (!need_rank(g, n, x, 4, 5) || !grid_modes(g, n) ||
      !flag_attr(g, n, "align_corners", false, &n->p.grid.align_corners))
    return false;
  int r = x->rank - 2;
  n->p.grid.spatial = r;
  if (grid->rank != x->rank || grid->dims[0] != x->dims[0] || grid->dims[r + 1] != r) {
    ir_error(g, n, "grid must have shape [N=%lld, %s, %d] for a %d-d input", (long long)x->dims[0],
             r == 2 ? "H_out, W_out" : "D_out, H_out, W_out", r, x->rank);
    return false;
  }
  if (r == 3 && n->p.grid.mode == 2) {
    ir_error(g, n, "cubic mode takes a 4-d input only (this one is 5-d)");
    return false;
  }
  int64_t dims[IR_MAX_RANK] = {x->dims[0], x->dims[1]};
  for (int d = 0; d < r; d++)
    dims[2 + d] = grid->dims[1 + d];
  return set_out(g, n, 0, x->dtype, x->rank, dims);
}

/* RoiAlign: X [N, C, H, W], rois [R, 4] and batch_indices [R] give [R, C,
   output_height, output_width]. R may be a run's bound (ir/bounds.c). */
static bool infer_roi_align(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *rois = in(n, 1), *batch = in(n, 2);
  if (!need_rank(g, n, x, 4, 4) || !need_rank(g, n, rois, 2, 2) || !need_rank(g, n, batch, 1, 1))
    return false;
  if (x->dims[2] < 1 || x->dims[3] < 1) {
    ir_error(g, n, "input '%s' has an empty plane (%lld x %lld): no element to sample", x->name,
             (long long)x->dims[2], (long long)x->dims[3]);
    return false;
  }
  if (rois->dims[1] != 4 || batch->dims[0] != rois->dims[0]) {
    ir_error(g, n, "rois must be [R, 4] and batch_indices [R]; they are [%lld, %lld] and [%lld]",
             (long long)rois->dims[0], (long long)rois->dims[1], (long long)batch->dims[0]);
    return false;
  }
  const char *mode = node_attr_string(n, "mode", "avg");
  /* Opset 10 has no attribute and maps as output_half_pixel does. */
  const char *coords = node_attr_string(n, "coordinate_transformation_mode",
                                        g->opset > 0 && g->opset < 16 ? "output_half_pixel"
                                                                      : "half_pixel");
  if (strcmp(mode, "avg") != 0 && strcmp(mode, "max") != 0) {
    ir_error(g, n, "unknown mode '%s' (avg or max)", mode);
    return false;
  }
  if (strcmp(coords, "half_pixel") != 0 && strcmp(coords, "output_half_pixel") != 0) {
    ir_error(g, n, "unknown coordinate_transformation_mode '%s' (half_pixel or "
             "output_half_pixel)", coords);
    return false;
  }
  n->p.roi_align.out_h = node_attr_int(n, "output_height", 1);
  n->p.roi_align.out_w = node_attr_int(n, "output_width", 1);
  n->p.roi_align.sampling = node_attr_int(n, "sampling_ratio", 0);
  n->p.roi_align.scale = node_attr_float(n, "spatial_scale", 1.0f);
  n->p.roi_align.half_pixel = strcmp(coords, "half_pixel") == 0;
  n->p.roi_align.max_mode = strcmp(mode, "max") == 0;
  if (n->p.roi_align.out_h < 1 || n->p.roi_align.out_w < 1 || n->p.roi_align.sampling < 0) {
    ir_error(g, n, "output_height and output_width must be positive and sampling_ratio at "
             "least 0; they are %lld, %lld and %lld", (long long)n->p.roi_align.out_h,
             (long long)n->p.roi_align.out_w, (long long)n->p.roi_align.sampling);
    return false;
  }
  for (int64_t r = 0; batch->i64 && r < batch->dims[0]; r++)
    if (batch->i64[r] < 0 || batch->i64[r] >= x->dims[0]) {
      ir_error(g, n, "batch_indices[%lld] is %lld; the input holds %lld images", (long long)r,
               (long long)batch->i64[r], (long long)x->dims[0]);
      return false;
    }
  int64_t dims[4] = {rois->dims[0], x->dims[1], n->p.roi_align.out_h, n->p.roi_align.out_w};
  return set_out(g, n, 0, x->dtype, 4, dims);
}

/* ------------------------------------------------------ the audio front end */

/* The last dim of DFT's and STFT's signal: 1 for real values, 2 for
   complex ones (real, imaginary). */
static bool signal_components(Graph *g, Node *n, const Tensor *x) {
  int64_t c = x->dims[x->rank - 1];
  if (c == 1 || c == 2)
    return true;
  ir_error(g, n, "the last dimension of '%s' holds a real (1) or complex (2) value; it is %lld",
           x->name, (long long)c);
  return false;
}

/* A positive compile-time length (dft_length, frame_length, frame_step). */
static bool positive_length(Graph *g, Node *n, const Tensor *t, int64_t *out) {
  if (!const_scalar_int(g, n, t, out))
    return false;
  if (*out >= 1)
    return true;
  ir_error(g, n, "'%s' must be at least 1, is %lld", t->name, (long long)*out);
  return false;
}

/* DFT's axis: [-r, -2] or [0, r - 2] (the last dim is the complex one). */
static bool dft_axis(Graph *g, Node *n, int64_t a, int rank, int *out) {
  if (a < -rank || a > rank - 2 || a == -1) {
    ir_error(g, n, "axis %lld is out of range: DFT takes [%d, -2] or [0, %d] for rank %d",
             (long long)a, -rank, rank - 2, rank);
    return false;
  }
  *out = (int)(a < 0 ? a + rank : a);
  return true;
}

/* The transform's length, the input values it reads and the output's
   extent along the axis, for n_in input values there; false when the
   length is not at least 1 (an IRFFT of one bin has no default). */
static bool dft_extents(const Node *n, int64_t n_in, int64_t *length, int64_t *used,
                        int64_t *out) {
  bool irfft = n->p.dft.inverse && n->p.dft.onesided;
  int64_t len = *length > 0 ? *length : irfft ? 2 * (n_in - 1) : n_in;
  if (len < 1)
    return false;
  int64_t takes = irfft ? len / 2 + 1 : len;
  *length = len;
  *used = n_in < takes ? n_in : takes;
  *out = n->p.dft.onesided && !n->p.dft.inverse ? len / 2 + 1 : len;
  return true;
}

/* A run-time axis decides no shape only when every axis it may name
   keeps its extent: a full transform of each axis's own length. */
static bool dft_axis_at_run_time(Graph *g, Node *n, const Tensor *x, const Tensor *axis,
                                 int64_t length) {
  if (tensor_numel(axis) != 1) {
    ir_error(g, n, "'%s' must hold one value, has %lld", axis->name,
             (long long)tensor_numel(axis));
    return false;
  }
  bool same = !n->p.dft.onesided;
  for (int d = 0; d < x->rank - 1 && same; d++)
    same = length <= 0 || x->dims[d] == length;
  if (!same)
    return not_constant(g, n, "axis (it decides the output's shape here)", axis);
  return true;
}

/* DFT: input [..., 1 or 2]; dft_length (a constant: it is an output dim);
   the axis, opset 20's input 2 (default -2, run-time data where it decides
   no shape) or opset 17's attribute (default 1). The output is complex
   [..., 2], or real [..., 1] for an inverse one-sided DFT (IRFFT). */
static bool infer_dft(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *len_in = in(n, 1), *axis_in = in(n, 2);
  if (!need_rank(g, n, x, 2, IR_MAX_RANK) || !signal_components(g, n, x) ||
      !flag_attr(g, n, "inverse", false, &n->p.dft.inverse) ||
      !flag_attr(g, n, "onesided", false, &n->p.dft.onesided))
    return false;
  int64_t length = 0, a, dims[IR_MAX_RANK];
  if (len_in && !positive_length(g, n, len_in, &length))
    return false;
  n->p.dft.axis_at_run_time = axis_in && !tensor_is_const(axis_in);
  memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  dims[x->rank - 1] = n->p.dft.inverse && n->p.dft.onesided ? 1 : 2;
  if (n->p.dft.axis_at_run_time) {
    if (!dft_axis_at_run_time(g, n, x, axis_in, length))
      return false;
    n->p.dft.axis = 0;
    n->p.dft.length = n->p.dft.used = -1;
    return set_out(g, n, 0, x->dtype, x->rank, dims);
  }
  if (axis_in) {
    if (!const_scalar_int(g, n, axis_in, &a))
      return false;
  } else {
    a = g->opset >= 20 ? -2 : node_attr_int(n, "axis", 1);
  }
  if (!dft_axis(g, n, a, x->rank, &n->p.dft.axis))
    return false;
  int axis = n->p.dft.axis;
  if (!dft_extents(n, x->dims[axis], &length, &n->p.dft.used, &dims[axis])) {
    ir_error(g, n, "axis %d holds %lld value(s), which give no transform length%s; give "
             "dft_length", axis, (long long)x->dims[axis],
             n->p.dft.inverse && n->p.dft.onesided ? " (an IRFFT's is 2 * (bins - 1))" : "");
    return false;
  }
  n->p.dft.length = length;
  return set_out(g, n, 0, x->dtype, x->rank, dims);
}

/* STFT: signal [batch, length, 1 or 2], frame_step and frame_length
   constants (they decide the frames and bins), a window [frame_length]
   that may be run-time data. Output [batch, frames, bins, 2]. */
static bool infer_stft(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *step = in(n, 1), *window = in(n, 2), *len_in = in(n, 3);
  bool onesided;
  if (!need_rank(g, n, x, 3, 3) || !signal_components(g, n, x) ||
      !flag_attr(g, n, "onesided", true, &onesided) ||
      !positive_length(g, n, step, &n->p.dft.step))
    return false;
  int64_t length = x->dims[1];
  if (len_in && !positive_length(g, n, len_in, &length))
    return false;
  if (window) {
    if (!need_rank(g, n, window, 1, 1))
      return false;
    if (len_in && window->dims[0] != length) {
      ir_error(g, n, "window '%s' holds %lld values; frame_length is %lld", window->name,
               (long long)window->dims[0], (long long)length);
      return false;
    }
    length = window->dims[0];
  }
  if (length < 1 || length > x->dims[1]) {
    ir_error(g, n, "frame_length %lld does not fit the signal's %lld samples", (long long)length,
             (long long)x->dims[1]);
    return false;
  }
  if (onesided && x->dims[2] == 2) {
    ir_error(g, n, "a one-sided STFT needs a real signal; '%s' is complex (set onesided=0)",
             x->name);
    return false;
  }
  n->p.dft.onesided = onesided;
  n->p.dft.length = n->p.dft.used = length;
  n->p.dft.has_window = window != NULL;
  int64_t dims[4] = {x->dims[0], (x->dims[1] - length) / n->p.dft.step + 1,
                     onesided ? length / 2 + 1 : length, 2};
  return set_out(g, n, 0, x->dtype, 4, dims);
}

/* output_datatype: the ONNX type code of a window's or MelWeightMatrix's
   output, any number type (default float). */
static bool output_datatype(Graph *g, Node *n, DType *dt) {
  int64_t v = node_attr_int(n, "output_datatype", DT_FLOAT);
  static const DType numbers[] = {DT_FLOAT,  DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16,
                                  DT_INT8,   DT_INT16,  DT_INT32,   DT_INT64,
                                  DT_UINT8,  DT_UINT16, DT_UINT32,  DT_UINT64};
  for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
    if (v == (int64_t)numbers[i]) {
      *dt = numbers[i];
      return true;
    }
  ir_error(g, n, "output_datatype %lld is not a number type", (long long)v);
  return false;
}

/* HannWindow, HammingWindow, BlackmanWindow: size is the output's length,
   so a compile-time constant; the evaluator reads periodic. */
static bool infer_window(Graph *g, Node *n) {
  int64_t size;
  bool periodic;
  DType dt;
  if (!const_scalar_int(g, n, in(n, 0), &size) || !output_datatype(g, n, &dt) ||
      !flag_attr(g, n, "periodic", true, &periodic))
    return false;
  if (size < 0) {
    ir_error(g, n, "window size %lld is negative", (long long)size);
    return false;
  }
  return set_out(g, n, 0, dt, 1, &size);
}

static bool const_scalar_float(Graph *g, Node *n, const Tensor *t, float *out);

/* MelWeightMatrix: every input a constant (the first two decide the
   shape [dft_length / 2 + 1, num_mel_bins]); each band's edges must fall
   on a bin of the one-sided DFT, which the evaluator then indexes. */
static bool infer_mel_weight_matrix(Graph *g, Node *n) {
  int64_t num, length, rate;
  float lo, hi;
  DType dt;
  if (!const_scalar_int(g, n, in(n, 0), &num) || !positive_length(g, n, in(n, 1), &length) ||
      !positive_length(g, n, in(n, 2), &rate) || !const_scalar_float(g, n, in(n, 3), &lo) ||
      !const_scalar_float(g, n, in(n, 4), &hi) || !output_datatype(g, n, &dt))
    return false;
  if (num < 0 || num > FOLD_MAX_ELEMENTS) {
    ir_error(g, n, "num_mel_bins %lld is out of range: 0 to %lld", (long long)num,
             (long long)FOLD_MAX_ELEMENTS);
    return false;
  }
  int64_t dims[2] = {length / 2 + 1, num}, bins = dims[0];
  if (!set_out(g, n, 0, dt, 2, dims)) /* first: it bounds the loop below */
    return false;
  for (int64_t i = 0; i < num + 2; i++) {
    long long b = opc_mel_bin_of(i, num, length, rate, lo, hi);
    if (b < 0 || b >= bins) {
      ir_error(g, n, "mel band edge %lld falls at DFT bin %lld, outside the %lld bins of a "
               "%lld-point DFT (lower_edge_hertz %g, upper_edge_hertz %g, sample_rate %lld)",
               (long long)i, b, (long long)bins, (long long)length, lo, hi, (long long)rate);
      return false;
    }
  }
  return true;
}

/* AffineGrid: theta [N, 2, 3] or [N, 3, 4] and a constant size [N, C, H,
   W] or [N, C, D, H, W] give the grid [N, (D,) H, W, r]. */
static bool infer_affine_grid(Graph *g, Node *n) {
  Tensor *theta = in(n, 0), *size = in(n, 1);
  if (!need_rank(g, n, theta, 3, 3) ||
      !flag_attr(g, n, "align_corners", false, &n->p.grid.align_corners))
    return false;
  int r = (int)theta->dims[1];
  if ((r != 2 && r != 3) || theta->dims[2] != r + 1) {
    ir_error(g, n, "theta must have shape [N, 2, 3] or [N, 3, 4]");
    return false;
  }
  if (size->rank != 1 || size->dims[0] != r + 2) {
    ir_error(g, n, "size must hold %d values, [N, C, %s], for a theta of %d rows", r + 2,
             r == 2 ? "H, W" : "D, H, W", r);
    return false;
  }
  if (!size->i64) {
    ir_error(g, n, "size '%s' must be known at compile time", size->name);
    return false;
  }
  if (size->i64[0] != theta->dims[0]) {
    ir_error(g, n, "size's N %lld differs from theta's %lld", (long long)size->i64[0],
             (long long)theta->dims[0]);
    return false;
  }
  int64_t dims[IR_MAX_RANK] = {theta->dims[0]};
  for (int d = 0; d < r; d++) {
    if (size->i64[2 + d] <= 0) {
      ir_error(g, n, "size's spatial dims must be positive, has %lld", (long long)size->i64[2 + d]);
      return false;
    }
    dims[1 + d] = size->i64[2 + d];
  }
  dims[1 + r] = r;
  n->p.grid.spatial = r;
  return set_out(g, n, 0, theta->dtype, r + 2, dims);
}

static bool infer_trilu(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  return flag_attr(g, n, "upper", true, &n->p.trilu.upper) && need_rank(g, n, x, 2, IR_MAX_RANK) && trilu_k(g, n) &&
         same_as(g, n, 0, x);
}

/* ------------------------------------------- indexing and selection */

/* Index values known at compile time along axis `axis` of x, or, with
   axis -1, column j of the last dim addressing axis first + j (ScatterND,
   GatherND), must lie in [-dim, dim). */
static bool index_columns_in_range(Graph *g, Node *n, const Tensor *idx, const Tensor *x,
                                   int first) {
  int64_t k = idx->dims[idx->rank - 1];
  for (int64_t i = 0; idx->i64 && k > 0 && i < tensor_numel(idx); i++) {
    int64_t dim = x->dims[first + i % k], v = idx->i64[i];
    if (v < -dim || v >= dim) {
      ir_error(g, n, "index %lld is out of range for an axis of size %lld", (long long)v,
               (long long)dim);
      return false;
    }
  }
  return true;
}

static bool scatter_reduction(Graph *g, Node *n) {
  static const char *const names[] = {"none", "add", "mul", "max", "min"}; /* ScatterReduction */
  const char *r = node_attr_string(n, "reduction", "none");
  int k = name_index(names, 5, r);
  if (k < 0) {
    ir_error(g, n, "unknown reduction '%s' (none, add, mul, max or min)", r);
    return false;
  }
  /* add and mul came in opset 16, max and min in 18. */
  static const int since[] = {1, 16, 16, 18, 18};
  if (g->opset > 0 && g->opset < since[k]) {
    ir_error(g, n, "reduction '%s' needs opset %d or later; the model's is %lld", r, since[k],
             (long long)g->opset);
    return false;
  }
  n->p.scatter.reduction = (ScatterReduction)k;
  n->p.scatter.axis = 0;
  return true;
}

/* The last dim of ScatterND's and GatherND's indices: how many leading
   dims of the data (after `batch` batch dims) one index tuple addresses. */
static bool index_depth(Graph *g, Node *n, const Tensor *idx, const Tensor *x, int batch,
                        int64_t *k) {
  if (idx->rank < 1) {
    ir_error(g, n, "indices must have rank 1 or more");
    return false;
  }
  *k = idx->dims[idx->rank - 1];
  if (*k < (n->op == OP_GATHER_ND ? 1 : 0) || *k > x->rank - batch) {
    ir_error(g, n, "index tuples of %lld values do not fit data of rank %d", (long long)*k,
             x->rank);
    return false;
  }
  return true;
}

/* ScatterND: updates must have the shape indices[:-1] + data[k:]. */
static bool infer_scatter_nd(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *idx = in(n, 1), *upd = in(n, 2);
  int64_t k;
  if (!scatter_reduction(g, n) || !index_depth(g, n, idx, x, 0, &k))
    return false;
  int64_t dims[2 * IR_MAX_RANK];
  int rank = 0;
  for (int i = 0; i < idx->rank - 1; i++)
    dims[rank++] = idx->dims[i];
  for (int i = (int)k; i < x->rank; i++)
    dims[rank++] = x->dims[i];
  bool fits = upd->rank == rank;
  for (int i = 0; fits && i < rank; i++)
    fits = upd->dims[i] == dims[i];
  if (!fits) {
    char a[128], b[128], c[128];
    ir_error(g, n, "updates %s do not match indices %s and data %s", shape_str(upd, a, sizeof a),
             shape_str(idx, b, sizeof b), shape_str(x, c, sizeof c));
    return false;
  }
  return index_columns_in_range(g, n, idx, x, 0) && same_as(g, n, 0, x);
}

static bool infer_scatter_elements(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *idx = in(n, 1), *upd = in(n, 2);
  if (!scatter_reduction(g, n) || !need_rank(g, n, x, 1, IR_MAX_RANK) ||
      !resolve_axis(g, n, node_attr_int(n, "axis", 0), x->rank, &n->p.scatter.axis))
    return false;
  int axis = n->p.scatter.axis;
  bool fits = idx->rank == x->rank && tensor_same_shape(idx, upd);
  for (int d = 0; fits && d < x->rank; d++)
    fits = d == axis || idx->dims[d] <= x->dims[d];
  if (!fits) {
    char a[128], b[128], c[128];
    ir_error(g, n, "indices %s and updates %s must have one shape that fits data %s",
             shape_str(idx, a, sizeof a), shape_str(upd, b, sizeof b), shape_str(x, c, sizeof c));
    return false;
  }
  return indices_in_range(g, n, idx, x->dims[axis]) && same_as(g, n, 0, x);
}

/* GatherND: the output is indices[:-1] + data[batch_dims + k:]. */
static bool infer_gather_nd(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *idx = in(n, 1);
  int64_t b = node_attr_int(n, "batch_dims", 0), k;
  if (b < 0 || b >= x->rank || b >= idx->rank) {
    ir_error(g, n, "batch_dims %lld must be below the ranks of data and indices",
             (long long)b);
    return false;
  }
  n->p.gather_nd.batch_dims = (int)b;
  for (int d = 0; d < b; d++)
    if (idx->dims[d] != x->dims[d]) {
      char a[128], c[128];
      ir_error(g, n, "the batch dims of indices %s and data %s differ",
               shape_str(idx, a, sizeof a), shape_str(x, c, sizeof c));
      return false;
    }
  if (!index_depth(g, n, idx, x, (int)b, &k) || !index_columns_in_range(g, n, idx, x, (int)b))
    return false;
  int64_t dims[2 * IR_MAX_RANK];
  int rank = 0;
  for (int i = 0; i < idx->rank - 1; i++)
    dims[rank++] = idx->dims[i];
  for (int i = (int)(b + k); i < x->rank; i++)
    dims[rank++] = x->dims[i];
  return set_out(g, n, 0, x->dtype, rank, dims);
}

/* OneHot(indices, depth, values): a new axis of `depth` entries, values
   = [off, on]. */
static bool infer_one_hot(Graph *g, Node *n) {
  Tensor *idx = in(n, 0), *depth = in(n, 1), *values = in(n, 2);
  if (!need_const(g, n, depth))
    return false;
  if (tensor_numel(depth) != 1 || depth->rank > 1) {
    ir_error(g, n, "depth '%s' must be a constant scalar", depth->name);
    return false;
  }
  if (tensor_numel(values) != 2 || values->rank != 1) {
    ir_error(g, n, "values '%s' must hold two values, [off, on]", values->name);
    return false;
  }
  int64_t d = depth->i64 ? depth->i64[0] : (int64_t)depth->f32[0];
  if (d <= 0 || d > MAX_DIM) {
    ir_error(g, n, "depth %lld must be positive", (long long)d);
    return false;
  }
  int axis;
  if (!resolve_axis(g, n, node_attr_int(n, "axis", -1), idx->rank + 1, &axis))
    return false;
  n->p.one_hot.axis = axis;
  n->p.one_hot.depth = d;
  int64_t dims[IR_MAX_RANK + 1];
  for (int i = 0, j = 0; i <= idx->rank; i++)
    dims[i] = i == axis ? d : idx->dims[j++];
  return set_out(g, n, 0, values->dtype, idx->rank + 1, dims);
}

/* ArgMax, ArgMin. */
static bool infer_arg(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  if (!need_rank(g, n, x, 1, IR_MAX_RANK) ||
      !resolve_axis(g, n, node_attr_int(n, "axis", 0), x->rank, &n->p.arg.axis))
    return false;
  bool keep;
  if (!flag_attr(g, n, "keepdims", true, &keep) ||
      !flag_attr(g, n, "select_last_index", false, &n->p.arg.select_last))
    return false;
  n->p.arg.keepdims = keep;
  int64_t dims[IR_MAX_RANK];
  int rank = 0;
  for (int i = 0; i < x->rank; i++) {
    if (i != n->p.arg.axis)
      dims[rank++] = x->dims[i];
    else if (keep)
      dims[rank++] = 1;
  }
  return set_out(g, n, 0, DT_INT64, rank, dims);
}

/* TopK: K is input 1 (opset 10) or attribute k (opset 1). */
static bool infer_topk(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *k_in = in(n, 1);
  int64_t k = node_attr_int(n, "k", -1);
  /* A run-time K (one value, checked on the device against the axis) leaves
     the outputs' length along the axis to the data, within the axis or
     what K's computation can reach (RetinaNet's min(1000, n)). */
  n->p.topk.k_at_run_time = k_in && !tensor_is_const(k_in);
  if (!need_rank(g, n, x, 1, IR_MAX_RANK) ||
      !resolve_axis(g, n, node_attr_int(n, "axis", -1), x->rank, &n->p.topk.axis))
    return false;
  int axis = n->p.topk.axis;
  if (n->p.topk.k_at_run_time) {
    if (k_in->dtype != DT_INT64 || tensor_numel(k_in) != 1) {
      ir_error(g, n, "K '%s' must hold one int64", k_in->name);
      return false;
    }
    k = x->dims[axis];
    int64_t most = sym_upper_bound(k_in);
    if (most < k)
      k = most < 0 ? 0 : most;
  } else if (k_in && !const_scalar_int(g, n, k_in, &k)) {
    return false;
  }
  if (k < 0 || k > x->dims[axis]) {
    ir_error(g, n, "K = %lld is outside [0, %lld], the size of axis %d", (long long)k,
             (long long)x->dims[axis], axis);
    return false;
  }
  n->p.topk.k = k;
  if (!flag_attr(g, n, "largest", true, &n->p.topk.largest) ||
      !flag_attr(g, n, "sorted", true, &n->p.topk.sorted))
    return false;
  int64_t dims[IR_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  dims[axis] = k;
  if (!set_out(g, n, 0, x->dtype, x->rank, dims) || !set_out(g, n, 1, DT_INT64, x->rank, dims))
    return false;
  for (int i = 0; i < 2; i++)
    if (n->out[i])
      if ((n->out[i]->bounded = n->p.topk.k_at_run_time && tensor_numel(n->out[i]) > 0))
        n->out[i]->bound_axis = axis;
  return true;
}

/* NonZero: [rank, count], count known only from the values. A scalar
   counts as one element of a 1-D tensor, as numpy has it. */
static bool infer_non_zero(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  /* At run time the count is known only on the device: the output is
     planned for every element being nonzero. */
  bool at_run_time = !tensor_is_const(x);
  int64_t dims[2] = {x->rank > 0 ? x->rank : 1, at_run_time ? tensor_numel(x) : count_non_zero(x)};
  if (!set_out(g, n, 0, DT_INT64, 2, dims))
    return false;
  n->out[0]->bounded = at_run_time;
  n->out[0]->bound_axis = 1; /* the count; the rank is exact */
  return true;
}

/* A float input that holds one value, a compile-time constant. */
static bool const_scalar_float(Graph *g, Node *n, const Tensor *t, float *out) {
  const float *v;
  int count;
  if (!const_floats(g, n, t, &v, &count))
    return false;
  if (count != 1) {
    ir_error(g, n, "'%s' must hold one value, has %d", t->name, count);
    return false;
  }
  *out = v[0];
  return true;
}

/* NonMaxSuppression's optional scalar input k (max_output_boxes_per_class,
   iou_threshold, score_threshold): a compile-time constant read into
   *value, or run-time data of the spec's type and one element, for the
   kernels to read (*at_run_time). */
static bool nms_limit(Graph *g, Node *n, int k, DType dtype, bool *at_run_time, double *value) {
  Tensor *t = in(n, k);
  *at_run_time = t && !tensor_is_const(t);
  if (!t)
    return true;
  if (*at_run_time) {
    if (t->dtype != dtype || tensor_numel(t) != 1) {
      ir_error(g, n, "'%s' must hold one %s", t->name, dtype_onnx_name(dtype));
      return false;
    }
    return true;
  }
  if (dtype == DT_INT64) {
    int64_t v;
    if (!const_scalar_int(g, n, t, &v))
      return false;
    *value = (double)v;
    return true;
  }
  float v;
  if (!const_scalar_float(g, n, t, &v))
    return false;
  *value = v;
  return true;
}

/* NonMaxSuppression: boxes [B, S, 4] and scores [B, C, S] give rows
   (batch, class, box). With run-time boxes, scores or limits, how many are
   kept is the data's, and the output is planned for per_class of every
   batch and class: the limit where it is a constant, else every box. */
static bool infer_nms(Graph *g, Node *n) {
  Tensor *boxes = in(n, 0), *scores = in(n, 1);
  if (!need_rank(g, n, boxes, 3, 3) || !need_rank(g, n, scores, 3, 3))
    return false;
  if (boxes->dims[2] != 4 || scores->dims[0] != boxes->dims[0] ||
      scores->dims[2] != boxes->dims[1]) {
    ir_error(g, n, "boxes must be [batches, boxes, 4] and scores [batches, classes, boxes]; "
             "they are [%lld, %lld, %lld] and [%lld, %lld, %lld]",
             (long long)boxes->dims[0], (long long)boxes->dims[1], (long long)boxes->dims[2],
             (long long)scores->dims[0], (long long)scores->dims[1], (long long)scores->dims[2]);
    return false;
  }
  int64_t center = node_attr_int(n, "center_point_box", 0);
  if (center != 0 && center != 1) {
    ir_error(g, n, "center_point_box must be 0 or 1, is %lld", (long long)center);
    return false;
  }
  double max_per_class = 0, iou = 0, score = 0;
  if (!nms_limit(g, n, 2, DT_INT64, &n->p.nms.per_class_at_run_time, &max_per_class) ||
      !nms_limit(g, n, 3, DT_FLOAT, &n->p.nms.iou_at_run_time, &iou) ||
      !nms_limit(g, n, 4, DT_FLOAT, &n->p.nms.score_at_run_time, &score))
    return false;
  if (!(iou >= 0.0 && iou <= 1.0)) {
    ir_error(g, n, "iou_threshold must be in [0, 1], is %g", iou);
    return false;
  }
  /* compared as a double: torchvision's exports ask for INT64_MAX, which
     converts to 2^63, past what an int64 holds */
  int64_t per_class = n->p.nms.per_class_at_run_time         ? boxes->dims[1]
                      : max_per_class < 0                    ? 0
                      : max_per_class >= (double)boxes->dims[1] ? boxes->dims[1]
                                                             : (int64_t)max_per_class;
  n->p.nms.center = center == 1;
  n->p.nms.has_score_threshold = in(n, 4) != NULL;
  n->p.nms.per_class = per_class < boxes->dims[1] ? per_class : boxes->dims[1];
  n->p.nms.iou_threshold = (float)iou;
  n->p.nms.score_threshold = (float)score;
  int64_t bound = scores->dims[0] * scores->dims[1] * n->p.nms.per_class;
  bool at_run_time = false;
  for (int k = 0; k < n->nin; k++)
    at_run_time |= in(n, k) && !tensor_is_const(in(n, k));
  int64_t dims[2] = {bound, 3};
  if (!at_run_time) {
    int64_t *rows = malloc(sizeof(int64_t) * 3 * (size_t)bound + 1);
    if (!rows) {
      ir_error(g, n, "out of memory");
      return false;
    }
    dims[0] = nms_select(n, rows);
    free(rows);
  }
  if (!set_out(g, n, 0, DT_INT64, 2, dims))
    return false;
  n->out[0]->bounded = at_run_time && bound > 0;
  n->out[0]->bound_axis = 0; /* the rows; each has 3 entries */
  return true;
}

/* Compress: the slices along `axis` (the elements of the flattened input
   without one) whose condition is true; a shorter condition drops the
   rest. With a run-time condition, how many are kept is the data's: the
   output is planned for the condition's length. */
static bool infer_compress(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *cond = in(n, 1);
  if (!need_rank(g, n, cond, 1, 1))
    return false;
  int axis = -1;
  if (node_attr(n, "axis") && !resolve_axis(g, n, node_attr_int(n, "axis", 0), x->rank, &axis))
    return false;
  n->p.compress.axis = axis;
  int64_t along = axis >= 0 ? x->dims[axis] : tensor_numel(x);
  if (cond->dims[0] > along) {
    ir_error(g, n, "condition '%s' has %lld entries, more than the %lld %s", cond->name,
             (long long)cond->dims[0], (long long)along, axis >= 0 ? "slices along the axis" : "elements");
    return false;
  }
  bool at_run_time = !tensor_is_const(cond);
  int64_t count = at_run_time ? cond->dims[0] : count_non_zero(cond);
  int64_t dims[IR_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  if (axis >= 0)
    dims[axis] = count;
  if (!(axis >= 0 ? set_out(g, n, 0, x->dtype, x->rank, dims) : set_out(g, n, 0, x->dtype, 1, &count)))
    return false;
  n->out[0]->bounded = at_run_time && tensor_numel(n->out[0]) > 0;
  n->out[0]->bound_axis = axis >= 0 ? axis : 0;
  return true;
}

/* Unique: the output sizes come from the values. */
/* Unique: at compile time the count is known; at run time it is the data's,
   and Y, indices and counts are planned for every item being unique
   (bounded); inverse_indices has one entry per item either way. */
static bool infer_unique(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  bool at_run_time = !tensor_is_const(x);
  if (!flag_attr(g, n, "sorted", true, &n->p.unique.sorted))
    return false;
  n->p.unique.has_axis = node_attr(n, "axis") != NULL;
  n->p.unique.axis = 0;
  if (n->p.unique.has_axis &&
      !resolve_axis(g, n, node_attr_int(n, "axis", 0), x->rank, &n->p.unique.axis))
    return false;
  int axis = n->p.unique.axis;
  int64_t along = n->p.unique.has_axis ? x->dims[axis] : tensor_numel(x);
  int64_t u = at_run_time ? along : count_unique(n), dims[IR_MAX_RANK];
  n->p.unique.count = u;
  memcpy(dims, x->dims, sizeof dims);
  dims[axis] = u;
  bool y_ok = n->p.unique.has_axis ? set_out(g, n, 0, x->dtype, x->rank, dims)
                                   : set_out(g, n, 0, x->dtype, 1, &u);
  if (!(y_ok && set_out(g, n, 1, DT_INT64, 1, &u) && set_out(g, n, 2, DT_INT64, 1, &along) &&
        set_out(g, n, 3, DT_INT64, 1, &u)))
    return false;
  for (int k = 0; k < n->nout; k++)
    if (n->out[k] && k != 2) {
      n->out[k]->bounded = at_run_time && u > 0;
      n->out[k]->bound_axis = k == 0 ? axis : 0; /* Y along its axis (0 flattened) */
    }
  return true;
}

/* -------------------------------------------------------- reductions */

static bool softmax_axis(Graph *g, Node *n, int *axis, bool *coerce2d) {
  Tensor *x = in(n, 0);
  *coerce2d = g->opset > 0 && g->opset < 13;
  if (x->rank == 0) {
    ir_error(g, n, "input must have rank 1 or more");
    return false;
  }
  return resolve_axis(g, n, node_attr_int(n, "axis", *coerce2d ? 1 : -1), x->rank, axis);
}

static bool infer_softmax(Graph *g, Node *n) {
  int axis;
  bool coerce;
  if (!softmax_axis(g, n, &axis, &coerce))
    return false;
  n->p.axis.axis = axis;
  n->p.axis.coerce2d = coerce;
  return same_as(g, n, 0, in(n, 0));
}

static bool reduce_plan(Graph *g, Node *n, bool *reduced, bool *noop) {
  Tensor *x = in(n, 0);
  const int64_t *axes;
  int count;
  /* Axes became an input in opset 13 (ReduceSum) and 18 (the others). */
  if (!ints_input_or_attr(g, n, "axes", &axes, &count))
    return false;
  bool noop_flag;
  if (!flag_attr(g, n, "noop_with_empty_axes", false, &noop_flag))
    return false;
  *noop = count <= 0 && noop_flag;
  return mark_axes(g, n, axes, count, x->rank, count <= 0 && !*noop, reduced);
}

static bool infer_reduce(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  bool *reduced = n->p.reduce.reduced;
  if (!reduce_plan(g, n, reduced, &n->p.reduce.noop))
    return false;
  bool keep;
  if (!flag_attr(g, n, "keepdims", true, &keep))
    return false;
  n->p.reduce.keepdims = keep;
  int64_t dims[IR_MAX_RANK];
  int rank = 0;
  for (int i = 0; i < x->rank; i++) {
    if (!reduced[i])
      dims[rank++] = x->dims[i];
    else if (keep)
      dims[rank++] = 1;
  }
  return set_out(g, n, 0, x->dtype, rank, dims);
}

/* CumSum's axis: known at compile time, or read by the kernel at run time
   (it decides no shape: the output is the input's). */
static bool cumsum_axis(Graph *g, Node *n, int *axis) {
  Tensor *t = in(n, 1);
  int64_t a;
  n->p.axis.axis_at_run_time = !tensor_is_const(t);
  if (n->p.axis.axis_at_run_time) {
    *axis = 0;
    if (tensor_numel(t) != 1) {
      ir_error(g, n, "'%s' must hold one value, has %lld", t->name, (long long)tensor_numel(t));
      return false;
    }
    return true;
  }
  return const_scalar_int(g, n, t, &a) && resolve_axis(g, n, a, in(n, 0)->rank, axis);
}

static bool infer_cumsum(Graph *g, Node *n) {
  int axis;
  Tensor *x = in(n, 0);
  if (x->rank < 1) {
    ir_error(g, n, "input must have rank 1 or more");
    return false;
  }
  if (!flag_attr(g, n, "exclusive", false, &n->p.axis.exclusive) ||
      !flag_attr(g, n, "reverse", false, &n->p.axis.reverse))
    return false;
  if (!cumsum_axis(g, n, &axis))
    return false;
  n->p.axis.axis = axis;
  return same_as(g, n, 0, x);
}

/* -------------------------------------------- trivial and compile time */

static bool infer_dropout(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *ratio = in(n, 1), *training = in(n, 2);
  if (training && !tensor_is_const(training))
    return not_constant(g, n, "training_mode", training);
  if (training && tensor_numel(training) != 1) {
    ir_error(g, n, "training_mode must hold one value, holds %lld",
             (long long)tensor_numel(training));
    return false;
  }
  /* Training mode drops values at random, which nothing compiled ahead of
     time reproduces, unless the ratio is 0: then it keeps everything, as
     inference does. The default ratio is 0.5. */
  if (training && training->i64[0] != 0) {
    if (ratio && !tensor_is_const(ratio))
      return not_constant(g, n, "ratio", ratio);
    if (!ratio || tensor_numel(ratio) != 1 || ratio->f32[0] != 0) {
      ir_error(g, n, "training-mode Dropout is not supported unless its ratio is a constant 0 "
               "(it drops values at random)");
      return false;
    }
  }
  if (!same_as(g, n, 0, x) || !set_out(g, n, 1, DT_BOOL, x->rank, x->dims))
    return false;
  /* The mask keeps everything: a constant, which fold-constants takes off
     the node so that only the copy of x is left to run. */
  Tensor *mask = n->nout > 1 ? n->out[1] : NULL;
  if (mask && !mask->i64) {
    int64_t count = tensor_numel(mask);
    mask->i64 = arena_alloc(g->arena, sizeof(int64_t) * (size_t)(count + 1));
    for (int64_t i = 0; i < count; i++)
      mask->i64[i] = 1;
  }
  return true;
}

static bool infer_constant(Graph *g, Node *n) {
  static const char *const kinds[] = {"value", "value_float", "value_int", "value_floats",
                                      "value_ints"};
  const Attr *a = NULL;
  for (int i = 0; i < 5 && !a; i++)
    a = node_attr(n, kinds[i]);
  if (!a) {
    ir_error(g, n, "Constant has no supported value attribute");
    return false;
  }
  int64_t count = a->n;
  switch (a->kind) {
  case ATTR_TENSOR:
    return set_out(g, n, 0, a->t->dtype, a->t->rank, a->t->dims);
  case ATTR_FLOAT:
    return set_out(g, n, 0, DT_FLOAT, 0, NULL);
  case ATTR_INT:
    return set_out(g, n, 0, DT_INT64, 0, NULL);
  case ATTR_FLOATS:
    return set_out(g, n, 0, DT_FLOAT, 1, &count);
  case ATTR_INTS:
    return set_out(g, n, 0, DT_INT64, 1, &count);
  default:
    ir_error(g, n, "attribute '%s' has the wrong kind", a->name);
    return false;
  }
}

void shape_range(const Node *n, int rank, int *start, int *end) {
  int64_t s = node_attr_int(n, "start", 0), e = node_attr_int(n, "end", rank);
  if (s < 0)
    s += rank;
  if (e < 0)
    e += rank;
  *start = (int)clamp(s, 0, rank);
  *end = (int)clamp(e, 0, rank);
}

static bool infer_shape(Graph *g, Node *n) {
  int start, end;
  shape_range(n, in(n, 0)->rank, &start, &end);
  int64_t len = end > start ? end - start : 0;
  return set_out(g, n, 0, DT_INT64, 1, &len);
}

/* Opset 1 named the target type with a string. */
static DType dtype_from_onnx_string(const char *s) {
  static const struct {
    const char *name;
    DType t;
  } names[] = {{"FLOAT", DT_FLOAT},   {"DOUBLE", DT_DOUBLE}, {"FLOAT16", DT_FLOAT16},
               {"INT8", DT_INT8},     {"INT16", DT_INT16},   {"INT32", DT_INT32},
               {"INT64", DT_INT64},   {"UINT8", DT_UINT8},   {"UINT16", DT_UINT16},
               {"UINT32", DT_UINT32}, {"UINT64", DT_UINT64}, {"BOOL", DT_BOOL}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(names[i].name, s) == 0)
      return names[i].t;
  return DT_UNDEFINED;
}

static bool cast_target(Graph *g, Node *n, DType *to) {
  const Attr *a = node_attr(n, "to");
  *to = DT_UNDEFINED;
  if (a && a->kind == ATTR_INT)
    *to = (DType)a->i;
  else if (a && a->kind == ATTR_STRING)
    *to = dtype_from_onnx_string(a->s);
  if (dtype_size(*to) == 0) {
    ir_error(g, n, "unsupported or missing target type 'to'");
    return false;
  }
  return true;
}

static bool infer_cast(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  DType to;
  if (!cast_target(g, n, &to))
    return false;
  n->p.cast.to = to;
  return set_out(g, n, 0, to, x->rank, x->dims);
}

/* CastLike(input, target_type): a Cast to the second input's dtype. */
static bool infer_cast_like(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  n->p.cast.to = in(n, 1)->dtype;
  return set_out(g, n, 0, n->p.cast.to, x->rank, x->dims);
}

static bool infer_size(Graph *g, Node *n) { return set_out(g, n, 0, DT_INT64, 0, NULL); }

static bool infer_constant_of_shape(Graph *g, Node *n) {
  const int64_t *shape;
  int64_t at_bound[IR_MAX_RANK];
  int count;
  if (symbolic_shape(in(n, 0), at_bound, &count)) /* bounded: ir/bounds.c */
    shape = at_bound;
  else if (!const_ints(g, n, in(n, 0), &shape, &count))
    return false;
  if (count > IR_MAX_RANK) {
    ir_error(g, n, "rank %d is beyond opc's limit of %d", count, IR_MAX_RANK);
    return false;
  }
  const Attr *a = node_attr(n, "value");
  DType dt = DT_FLOAT;
  if (a) {
    if (a->kind != ATTR_TENSOR || tensor_numel(a->t) != 1) {
      ir_error(g, n, "attribute 'value' must be a one-element tensor");
      return false;
    }
    dt = a->t->dtype;
  }
  return set_out(g, n, 0, dt, count, shape);
}

/* Range to a limit that is run-time data of no run's size (a graph
   input, a value read from the data): its output's length is bounded
   only by --max-dim, which names the output; integers from constant
   start and delta. The output is a bound of its own, its kernel writing
   the run's length and failing the run where it passes the bound
   (backend/kernels_movement.c). */
static bool range_to_max_dim(Graph *g, Node *n) {
  Tensor *start = in(n, 0), *limit = in(n, 1), *delta = in(n, 2), *y = n->out[0];
  const char *name = y ? y->name : "";
  int64_t bound = graph_max_dim(g, name);
  if (bound <= 0) {
    const Tensor *input = graph_input_behind(g, limit);
    const char *bind = input && input != limit ? input->name : limit->name;
    ir_error(g, n, "shape input '%s' is not a compile-time constant%s%s%s, so the length of "
             "output '%s' is known only at run time, and nothing bounds it: give its most "
             "elements with --max-dim %s=N, or bind '%s' with --const-input", limit->name,
             input && input != limit ? "; it depends on graph input '" : "",
             input && input != limit ? input->name : "", input && input != limit ? "'" : "",
             name, name, bind);
    return false;
  }
  for (int i = 0; i < 3; i++)
    if (tensor_numel(in(n, i)) != 1 || in(n, i)->rank > 1) {
      ir_error(g, n, "'%s' must be a scalar", in(n, i)->name);
      return false;
    }
  if (!start->i64 || !dtype_is_integer(start->dtype) || limit->dtype != start->dtype ||
      (start->dtype != DT_INT64 && start->dtype != DT_INT32)) {
    ir_error(g, n, "Range to a run-time limit (output '%s', bounded by --max-dim) runs on int64 "
             "and int32 only, is %s", name, dtype_name(start->dtype));
    return false;
  }
  if (delta->i64[0] == 0) {
    ir_error(g, n, "delta must not be 0");
    return false;
  }
  if (!set_out(g, n, 0, start->dtype, 1, &bound))
    return false;
  y->bounded = true;
  y->bound_axis = 0;
  y->bound_origin = y;
  return true;
}

static bool infer_range(Graph *g, Node *n) {
  Tensor *t[3] = {in(n, 0), in(n, 1), in(n, 2)};
  /* A limit the program computes from a run's size (torch.arange(n)): its
     value at the bound; ir/bounds.c checks the rest. */
  int64_t limit_at_bound;
  int nlimit;
  bool run_limit = symbolic_shape(t[1], &limit_at_bound, &nlimit) && nlimit == 1 && t[0]->i64;
  /* --max-dim bounds integer Ranges; a float one keeps need_const's error. */
  if (t[1] && !run_limit && !tensor_is_const(t[1]) && tensor_is_const(t[0]) &&
      tensor_is_const(t[2]) && (t[0]->dtype == DT_INT64 || t[0]->dtype == DT_INT32))
    return range_to_max_dim(g, n);
  for (int i = 0; i < 3; i++) {
    if (!(i == 1 && run_limit) && !need_const(g, n, t[i]))
      return false;
    if (tensor_numel(t[i]) != 1 || t[i]->rank > 1) {
      ir_error(g, n, "'%s' must be a scalar", t[i]->name);
      return false;
    }
  }
  int64_t count;
  if (t[0]->i64) {
    int64_t start = t[0]->i64[0], delta = t[2]->i64[0];
    int64_t limit = run_limit ? limit_at_bound : t[1]->i64[0];
    if (delta == 0) {
      ir_error(g, n, "delta must not be 0");
      return false;
    }
    int64_t span;
    if (!checked(g, n, __builtin_sub_overflow(delta > 0 ? limit : start,
                                              delta > 0 ? start : limit, &span)))
      return false;
    count = delta == INT64_MIN ? (span < 0 ? 0 : 1) : ceil_div(span, delta > 0 ? delta : -delta);
  } else {
    double start = t[0]->f32[0], limit = t[1]->f32[0], delta = t[2]->f32[0];
    if (delta == 0) {
      ir_error(g, n, "delta must not be 0");
      return false;
    }
    double c = ceil((limit - start) / delta);
    if (!(c < (double)MAX_DIM)) { /* also catches NaN */
      ir_error(g, n, "Range of %g to %g by %g has no usable length", start, limit, delta);
      return false;
    }
    count = c > 0 ? (int64_t)c : 0;
  }
  if (count < 0)
    count = 0;
  return set_out(g, n, 0, t[0]->dtype, 1, &count);
}

static bool infer_eye_like(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  if (!need_rank(g, n, x, 2, 2))
    return false;
  DType dt = (DType)node_attr_int(n, "dtype", x->dtype);
  if (dtype_size(dt) == 0 || dt == DT_STRING) {
    ir_error(g, n, "unsupported dtype %d", (int)dt);
    return false;
  }
  return set_out(g, n, 0, dt, 2, x->dims);
}

/* ------------------------------------------------------------- losses */
/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 12 to 22):
   scores [N, C, d1..dk], labels [N, d1..dk], optional per-class weights [C].
   Run-time data is float32 only, so the labels must be known when opc runs;
   checking them here turns the spec's "undefined" out-of-range labels into
   an error, which lets the kernels index without bounds checks. */

static bool loss_attrs(Graph *g, Node *n, LossReduction *reduction, bool *has_ignore,
                int64_t *ignore) {
  static const char *const names[] = {"none", "sum", "mean"}; /* LossReduction */
  const char *r = node_attr_string(n, "reduction", "mean");
  int k = name_index(names, 3, r);
  if (k < 0) {
    ir_error(g, n, "unknown reduction '%s' (none, sum or mean)", r);
    return false;
  }
  *reduction = (LossReduction)k;
  *has_ignore = node_attr(n, "ignore_index") != NULL;
  *ignore = node_attr_int(n, "ignore_index", 0);
  return true;
}

static bool loss_labels(Graph *g, Node *n, const Tensor *x, const Tensor *labels) {
  bool fits = labels->rank == x->rank - 1 && labels->dims[0] == x->dims[0];
  for (int d = 1; fits && d < labels->rank; d++)
    fits = labels->dims[d] == x->dims[d + 1];
  if (!fits) {
    char a[128], b[128];
    ir_error(g, n, "labels %s do not match scores %s (expected [N, d1..dk] of [N, C, d1..dk])",
             shape_str(labels, a, sizeof a), shape_str(x, b, sizeof b));
    return false;
  }
  return true;
}

/* Constant labels are checked now; run-time ones out of range give NaN
   losses (the kernels' note says why). */
static bool labels_in_range(Graph *g, Node *n, const Tensor *labels, int64_t classes) {
  if (!tensor_is_const(labels) || !labels->i64)
    return true;
  int64_t count = tensor_numel(labels);
  for (int64_t i = 0; i < count; i++) {
    int64_t t = labels->i64[i];
    if ((n->p.loss.has_ignore && t == n->p.loss.ignore) || (t >= 0 && t < classes))
      continue;
    ir_error(g, n, "label %lld (element %lld of '%s') is outside [0, %lld) and is not "
             "ignore_index", (long long)t, (long long)i, labels->name, (long long)classes);
    return false;
  }
  return true;
}

static bool infer_loss(Graph *g, Node *n) {
  Tensor *x = in(n, 0), *labels = in(n, 1), *weight = in(n, 2);
  if (!loss_attrs(g, n, &n->p.loss.reduction, &n->p.loss.has_ignore, &n->p.loss.ignore) ||
      !need_rank(g, n, x, 2, IR_MAX_RANK) || !loss_labels(g, n, x, labels))
    return false;
  int64_t c = x->dims[1];
  if ((weight && !need_channels(g, n, weight, c)) || !labels_in_range(g, n, labels, c))
    return false;
  int rank = n->p.loss.reduction == LOSS_NONE ? labels->rank : 0;
  return set_out(g, n, 0, x->dtype, rank, labels->dims) && same_as(g, n, 1, x);
}

/* ----------------------------------------------------------- recurrent */
/* LSTM, GRU and RNN (opsets 7, 14 and 22): X [seq, batch, input] (layout
   1: [batch, seq, input]), W [dirs, gates * hidden, input], R [dirs,
   gates * hidden, hidden], then the optional B [dirs, 2 * gates * hidden],
   sequence_lens [batch], initial_h (and LSTM's initial_c) [dirs, batch,
   hidden] (layout 1: [batch, dirs, hidden]) and LSTM's peepholes P [dirs,
   3 * hidden]. Outputs: Y [seq, dirs, batch, hidden] (layout 1: [batch,
   seq, dirs, hidden]), Y_h and LSTM's Y_c shaped as initial_h. */

/* The spec's activation functions, in OPC_RNN_* order, with how many of
   activation_alpha and activation_beta each consumes and its defaults:
   the spec's, those of the ONNX operator of the same name (ONNX Runtime
   takes 0 for Affine's, ThresholdedRelu's and ScaledTanh's). */
static const struct {
  const char *name;
  int nalpha, nbeta;
  float alpha, beta;
} rnn_functions[OPC_RNN_COUNT] = {
    [OPC_RNN_RELU] = {"Relu", 0, 0, 0, 0},
    [OPC_RNN_TANH] = {"Tanh", 0, 0, 0, 0},
    [OPC_RNN_SIGMOID] = {"Sigmoid", 0, 0, 0, 0},
    [OPC_RNN_AFFINE] = {"Affine", 1, 1, 1.0f, 0.0f},
    [OPC_RNN_LEAKY_RELU] = {"LeakyRelu", 1, 0, 0.01f, 0},
    [OPC_RNN_THRESHOLDED_RELU] = {"ThresholdedRelu", 1, 0, 1.0f, 0},
    [OPC_RNN_SCALED_TANH] = {"ScaledTanh", 1, 1, 1.0f, 1.0f},
    [OPC_RNN_HARD_SIGMOID] = {"HardSigmoid", 1, 1, 0.2f, 0.5f},
    [OPC_RNN_ELU] = {"Elu", 1, 0, 1.0f, 0},
    [OPC_RNN_SOFTSIGN] = {"Softsign", 0, 0, 0, 0},
    [OPC_RNN_SOFTPLUS] = {"Softplus", 0, 0, 0, 0},
};

/* The code of an activation's name, matched without case as ONNX Runtime
   does; -1 when unknown. */
static int rnn_function(const char *name) {
  for (int i = 0; i < OPC_RNN_COUNT; i++)
    if (strcasecmp(rnn_functions[i].name, name) == 0)
      return i;
  return -1;
}

/* The activations: the spec's defaults (LSTM f g h: Sigmoid Tanh Tanh,
   GRU f g: Sigmoid Tanh, RNN f: Tanh) or nacts names per direction. The
   alphas and betas are consumed in order by the functions that take one
   (the spec's wording, and ONNX Runtime's reading); a function left
   without one takes its default. */
static bool rnn_activations(Graph *g, Node *n) {
  static const int defaults[3] = {OPC_RNN_SIGMOID, OPC_RNN_TANH, OPC_RNN_TANH};
  int nacts = n->p.rnn.nacts, ndir = n->p.rnn.ndirections;
  const Attr *names = node_attr(n, "activations");
  const Attr *alphas = node_attr(n, "activation_alpha"), *betas = node_attr(n, "activation_beta");
  if (names && (names->kind != ATTR_STRINGS || names->n != nacts * ndir)) {
    ir_error(g, n, "attribute 'activations' must list %d function names, one per gate function "
             "and direction", nacts * ndir);
    return false;
  }
  int next_alpha = 0, next_beta = 0;
  for (int d = 0; d < ndir; d++)
    for (int k = 0; k < nacts; k++) {
      int code = n->op == OP_RNN ? OPC_RNN_TANH : defaults[k];
      if (names) {
        code = rnn_function(names->strings[d * nacts + k]);
        if (code < 0) {
          ir_error(g, n, "unknown activation function '%s'", names->strings[d * nacts + k]);
          return false;
        }
      }
      float alpha = rnn_functions[code].alpha, beta = rnn_functions[code].beta;
      if (rnn_functions[code].nalpha && alphas && alphas->kind == ATTR_FLOATS &&
          next_alpha < alphas->n)
        alpha = alphas->floats[next_alpha++];
      if (rnn_functions[code].nbeta && betas && betas->kind == ATTR_FLOATS &&
          next_beta < betas->n)
        beta = betas->floats[next_beta++];
      n->p.rnn.act[d][k] = code;
      n->p.rnn.alpha[d][k] = alpha;
      n->p.rnn.beta[d][k] = beta;
    }
  return true;
}

/* The attributes but the activations, into n->p.rnn. */
static bool rnn_attrs(Graph *g, Node *n) {
  static const char *const directions[] = {"forward", "reverse", "bidirectional"};
  const char *dir = node_attr_string(n, "direction", "forward");
  int d = name_index(directions, 3, dir);
  if (d < 0) {
    ir_error(g, n, "unknown direction '%s' (forward, reverse or bidirectional)", dir);
    return false;
  }
  n->p.rnn.direction = (RnnDirection)d;
  n->p.rnn.ndirections = d == RNN_BIDIRECTIONAL ? 2 : 1;
  n->p.rnn.gates = n->op == OP_LSTM ? 4 : n->op == OP_GRU ? 3 : 1;
  n->p.rnn.nacts = n->op == OP_LSTM ? 3 : n->op == OP_GRU ? 2 : 1;
  n->p.rnn.clip = 0;
  if (node_attr(n, "clip")) {
    float clip = node_attr_float(n, "clip", 0);
    if (!(clip > 0)) {
      ir_error(g, n, "attribute 'clip' is %g; it must be positive", clip);
      return false;
    }
    n->p.rnn.clip = clip;
  }
  n->p.rnn.input_forget = n->p.rnn.linear_before_reset = false;
  /* GRU-1 and GRU-3 have no layout; reading an absent one gives 0. */
  return flag_attr(g, n, "layout", false, &n->p.rnn.batch_major) &&
         (n->op != OP_LSTM || flag_attr(g, n, "input_forget", false, &n->p.rnn.input_forget)) &&
         (n->op != OP_GRU ||
          flag_attr(g, n, "linear_before_reset", false, &n->p.rnn.linear_before_reset));
}

/* Checks that input k, when present, has the given dims. */
static bool rnn_input_dims(Graph *g, Node *n, int k, int rank, const int64_t *dims) {
  const Tensor *t = in(n, k);
  if (!t)
    return true;
  bool fits = t->rank == rank;
  for (int i = 0; fits && i < rank; i++)
    fits = t->dims[i] == dims[i];
  if (!fits) {
    static const char *const roles[] = {"X", "W", "R", "B", "sequence_lens", "initial_h",
                                        "initial_c", "P"};
    char a[128], b[128] = "[";
    for (int i = 0; i < rank; i++)
      snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", i ? "," : "", (long long)dims[i]);
    ir_error(g, n, "input %s '%s' is %s, expected shape %s]", roles[k], t->name,
             shape_str(t, a, sizeof a), b);
  }
  return fits;
}

/* Constant sequence lengths must lie in [0, seq]: the evaluator and the
   kernels index X and Y by them. */
static bool rnn_lengths_in_range(Graph *g, Node *n, const Tensor *lens, int64_t seq) {
  if (!lens || !tensor_is_const(lens) || !lens->i64)
    return true;
  for (int64_t b = 0; b < tensor_numel(lens); b++)
    if (lens->i64[b] < 0 || lens->i64[b] > seq) {
      ir_error(g, n, "sequence_lens[%lld] is %lld, outside [0, %lld]", (long long)b,
               (long long)lens->i64[b], (long long)seq);
      return false;
    }
  return true;
}

static bool infer_recurrent(Graph *g, Node *n) {
  const Tensor *x = in(n, 0), *w = in(n, 1), *r = in(n, 2);
  if (!rnn_attrs(g, n) || !rnn_activations(g, n) || !need_rank(g, n, x, 3, 3) ||
      !need_rank(g, n, w, 3, 3) || !need_rank(g, n, r, 3, 3))
    return false;
  bool bm = n->p.rnn.batch_major;
  int64_t dirs = n->p.rnn.ndirections, gates = n->p.rnn.gates;
  int64_t seq = x->dims[bm ? 1 : 0], batch = x->dims[bm ? 0 : 1], input = x->dims[2];
  int64_t hidden = node_attr_int(n, "hidden_size", r->dims[2]);
  if (hidden <= 0 || hidden > MAX_DIM / 8) {
    ir_error(g, n, "attribute 'hidden_size' is %lld; it must be positive", (long long)hidden);
    return false;
  }
  n->p.rnn.seq = seq, n->p.rnn.batch = batch, n->p.rnn.input = input, n->p.rnn.hidden = hidden;
  int64_t state[3] = {dirs, batch, hidden};
  if (bm)
    state[0] = batch, state[1] = dirs;
  if (!rnn_input_dims(g, n, 1, 3, (int64_t[]){dirs, gates * hidden, input}) ||
      !rnn_input_dims(g, n, 2, 3, (int64_t[]){dirs, gates * hidden, hidden}) ||
      !rnn_input_dims(g, n, 3, 2, (int64_t[]){dirs, 2 * gates * hidden}) ||
      !rnn_input_dims(g, n, 4, 1, &batch) || !rnn_input_dims(g, n, 5, 3, state) ||
      !rnn_input_dims(g, n, 6, 3, state) ||
      !rnn_input_dims(g, n, 7, 2, (int64_t[]){dirs, 3 * hidden}) ||
      !rnn_lengths_in_range(g, n, in(n, 4), seq))
    return false;
  int64_t y[4] = {seq, dirs, batch, hidden};
  if (bm)
    y[0] = batch, y[1] = seq, y[2] = dirs;
  return set_out(g, n, 0, x->dtype, 4, y) && set_out(g, n, 1, x->dtype, 3, state) &&
         set_out(g, n, 2, x->dtype, 3, state);
}

/* ------------------------------------------------------ TfIdfVectorizer */

/* TfIdfVectorizer's n-grams: pool_int64s holds the 1-grams from
   ngram_counts[0], the 2-grams from ngram_counts[1], ...; ngram_indexes
   gives each n-gram, in pool order, its output column. Into a table of
   (length, start in the pool, column) per n-gram. */
static bool tfidf_grams(Graph *g, Node *n, const int64_t *pool, int64_t pool_size) {
  const int64_t *counts, *indexes;
  int levels = node_attr_ints(n, "ngram_counts", &counts);
  int64_t nindexes = node_attr_ints(n, "ngram_indexes", &indexes);
  int64_t *table = arena_alloc(g->arena, sizeof(int64_t) * 3 * (size_t)(nindexes + 1));
  int64_t grams = 0, outputs = 0;
  for (int level = 0; level < levels; level++) {
    int64_t len = level + 1, start = counts[level];
    int64_t end = level + 1 < levels ? counts[level + 1] : pool_size;
    if (start < 0 || end < start || end > pool_size || (end - start) % len != 0) {
      ir_error(g, n, "ngram_counts[%d] = %lld does not start a run of %lld-grams within "
               "pool_int64s (%lld items)", level, (long long)start, (long long)len,
               (long long)pool_size);
      return false;
    }
    for (int64_t at = start; at < end; at += len, grams++) {
      if (grams >= nindexes) {
        ir_error(g, n, "ngram_indexes has %lld entries, fewer than the pool's n-grams",
                 (long long)nindexes);
        return false;
      }
      if (indexes[grams] < 0 || indexes[grams] >= MAX_DIM) {
        ir_error(g, n, "ngram_indexes[%lld] = %lld is not a valid output column",
                 (long long)grams, (long long)indexes[grams]);
        return false;
      }
      table[3 * grams] = len, table[3 * grams + 1] = at, table[3 * grams + 2] = indexes[grams];
      outputs = indexes[grams] + 1 > outputs ? indexes[grams] + 1 : outputs;
    }
  }
  if (grams != nindexes) {
    ir_error(g, n, "ngram_indexes has %lld entries; the pool holds %lld n-grams",
             (long long)nindexes, (long long)grams);
    return false;
  }
  n->p.tfidf.grams = grams, n->p.tfidf.outputs = outputs, n->p.tfidf.table = table;
  return true;
}

/* TfIdfVectorizer on int32 or int64 data (pool_strings is not supported):
   [C] gives [columns], [N, C] gives [N, columns], the columns being the
   largest of ngram_indexes plus one. */
static bool infer_tfidf(Graph *g, Node *n) {
  Tensor *x = in(n, 0);
  if (!need_rank(g, n, x, 1, 2))
    return false;
  const char *mode = node_attr_string(n, "mode", "");
  n->p.tfidf.mode = strcmp(mode, "TF") == 0 ? 0 : strcmp(mode, "IDF") == 0 ? 1
                  : strcmp(mode, "TFIDF") == 0 ? 2 : -1;
  if (n->p.tfidf.mode < 0) {
    ir_error(g, n, "mode is '%s'; it must be TF, IDF or TFIDF", mode);
    return false;
  }
  if (node_attr(n, "pool_strings")) {
    ir_error(g, n, "pool_strings: opc counts integer n-grams only (pool_int64s)");
    return false;
  }
  const int64_t *pool;
  int64_t pool_size = node_attr_ints(n, "pool_int64s", &pool);
  int64_t lo = node_attr_int(n, "min_gram_length", 0), hi = node_attr_int(n, "max_gram_length", 0);
  int64_t skip = node_attr_int(n, "max_skip_count", 0);
  if (lo < 1 || hi < lo || skip < 0) {
    ir_error(g, n, "min_gram_length %lld, max_gram_length %lld and max_skip_count %lld: the "
             "lengths must be 1 <= min <= max, the skip count not negative", (long long)lo,
             (long long)hi, (long long)skip);
    return false;
  }
  n->p.tfidf.min_gram = lo, n->p.tfidf.max_gram = hi, n->p.tfidf.max_skip = skip;
  n->p.tfidf.pool = pool, n->p.tfidf.pool_size = pool_size;
  if (!tfidf_grams(g, n, pool, pool_size))
    return false;
  const Attr *w = node_attr(n, "weights");
  n->p.tfidf.weights = w && w->n ? w->floats : NULL;
  if (w && w->n && w->n != n->p.tfidf.grams) {
    ir_error(g, n, "weights has %d values; the pool holds %lld n-grams", w->n,
             (long long)n->p.tfidf.grams);
    return false;
  }
  int64_t dims[2] = {x->dims[0], n->p.tfidf.outputs};
  return x->rank == 1 ? set_out(g, n, 0, DT_FLOAT, 1, &dims[1]) : set_out(g, n, 0, DT_FLOAT, 2, dims);
}

/* ---------------------------------------------------------------- table */

static const OpInfo op_table[OP_COUNT] = {
    [OP_INVALID] = {"<invalid>", 0, 0, 0, 0, NULL, NULL, PARAMS_NONE, COST_MEMORY, 0, AT_RUN_TIME, "",
                    0, TY_F32, OPC_ACT_NONE, NULL, NULL, NULL},
#define OP(kind, name, min_in, max_in, min_out, max_out, infer, fold, params, cost,      \
           param_inputs, eval, types, traits, run_types, act, act_name, half, attrs,      \
           kernel, emitter, library, cudnn) /* the last four: the backend's (emit.c) */   \
  [OP_##kind] = {name, min_in, max_in, min_out, max_out, infer, fold, params, cost,      \
                 param_inputs, eval, types, traits, run_types, act, act_name, half, attrs},
#include "ops.def"
#undef OP
};

const OpInfo *op_info(OpKind op) { return &op_table[op > 0 && op < OP_COUNT ? op : 0]; }

/* ops.def's emitter and library columns as written: which kinds have an
   opc kernel, or are device copies. */
static const char *const body_columns[OP_COUNT][2] = {
#define OP(kind, name, min_in, max_in, min_out, max_out, infer, fold, params, cost,      \
           param_inputs, eval, types, traits, run_types, act, act_name, half, attrs,      \
           kernel, emitter, library, cudnn)                                               \
  [OP_##kind] = {#emitter, #library},
#include "ops.def"
#undef OP
};

bool op_runs_in_body(OpKind op) {
  if (op <= 0 || op >= OP_COUNT || op == OP_LOOP || op == OP_IF)
    return false;
  if (op == OP_CONSTANT || op_table[op].eval != AT_RUN_TIME)
    return true; /* folded at compile time */
  return strcmp(body_columns[op][0], "NULL") != 0 || strcmp(body_columns[op][1], "&copy_op") == 0;
}

const char *op_name(OpKind op) { return op_info(op)->name; }

OpKind op_from_name(const char *name) {
  for (int i = 1; i < OP_COUNT; i++)
    if (op_table[i].name && strcmp(op_table[i].name, name) == 0)
      return (OpKind)i;
  return OP_INVALID;
}

OpKind op_integer_form(OpKind op) {
  switch (op) {
#define OP(...)
#define INTEGER_FORM(kind, integer) \
  case OP_##kind:                   \
    return OP_##integer;
#include "ops.def"
#undef INTEGER_FORM
#undef OP
  default:
    return OP_INVALID;
  }
}

OpKind act_op(Activation a) {
  for (int i = 1; a != OPC_ACT_NONE && i < OP_COUNT; i++)
    if (op_table[i].act == a)
      return (OpKind)i;
  return OP_INVALID;
}

const char *act_name(Activation a) { return op_info(act_op(a))->act_name; }

Activation act_from_name(const char *name) {
  for (int i = 1; name && i < OP_COUNT; i++)
    if (op_table[i].act_name && strcmp(op_table[i].act_name, name) == 0)
      return op_table[i].act;
  return OPC_ACT_NONE;
}
