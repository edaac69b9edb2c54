/*
 * training.c - the optimisers of domain ai.onnx.preview.training (Adagrad,
 * Adam, Momentum), lowered by the importer into kinds opc runs already.
 *
 * Each is elementwise arithmetic on its tensors, with the learning rate R
 * and the update count T (an int64 scalar) as run-time inputs; so, as
 * Einsum, it is no IR kind: its update rule becomes Mul, Add, Sub, Div,
 * Sqrt, Pow, Cast, Greater and Where nodes, which run on their kernels
 * and fold with their evaluators. One node optimises n tensors at once:
 * its inputs are R, T, then n of each per-tensor input (X..., G..., and
 * the optimiser's state), its outputs n of each new value.
 */
#include <math.h>
#include <string.h>

#include "import.h"

typedef struct Lowering {
  Importer *im;
  Graph *g;
  const char *name, *op; /* the node's name and op type, for messages and names */
  int count;             /* nodes and constants made so far, for their names */
  DType type;            /* the optimised tensors' type: float or double */
} Lowering;

static bool fail(Lowering *L, const char *msg, const char *what) {
  ir_error(L->g, NULL, "node '%s' (%s): %s%s", L->name, L->op, msg, what ? what : "");
  L->im->failed = true;
  return false;
}

/* A node of kind op reading a (and b, when given) into `out` (NULL: a new
   tensor; shape inference gives its type and shape). */
static Node *node(Lowering *L, OpKind op, Tensor *a, Tensor *b, Tensor *out) {
  int nin = b ? 2 : 1;
  Node *n = graph_add_node(L->g, op, arena_printf(L->g->arena, "%s/%s%d", L->name, op_name(op),
                                                  L->count++), nin, 1);
  n->in[0] = a;
  if (b)
    n->in[1] = b;
  n->out[0] = out ? out : graph_add_tensor(L->g, NULL);
  return n;
}

static Tensor *add_into(Lowering *L, OpKind op, Tensor *a, Tensor *b, Tensor *out) {
  return node(L, op, a, b, out)->out[0];
}

static Tensor *add(Lowering *L, OpKind op, Tensor *a, Tensor *b) {
  return add_into(L, op, a, b, NULL);
}

/* A scalar constant of the optimised tensors' type. */
static Tensor *scalar(Lowering *L, float v) {
  Tensor *t = graph_add_tensor(L->g, arena_printf(L->g->arena, "%s/c%d", L->name, L->count++));
  t->dtype = L->type;
  tensor_set_shape(t, 0, NULL);
  t->f32 = arena_dup(L->g->arena, &v, sizeof v);
  return t;
}

/* x cast to `to`. */
static Tensor *cast(Lowering *L, Tensor *x, DType to) {
  Node *n = node(L, OP_CAST, x, NULL, NULL);
  node_set_attr(L->g, n, "to", ATTR_INT)->i = to;
  return n->out[0];
}

/* T > 0 ? a : b: the first update (T = 0) gets no correction. */
static Tensor *after_first(Lowering *L, Tensor *t, Tensor *a, Tensor *b) {
  int64_t zero = 0; /* a scalar, so that the result keeps X's shape */
  Tensor *z = graph_add_tensor(L->g, arena_printf(L->g->arena, "%s/c%d", L->name, L->count++));
  z->dtype = DT_INT64;
  tensor_set_shape(z, 0, NULL);
  z->i64 = arena_dup(L->g->arena, &zero, sizeof zero);
  Tensor *positive = add(L, OP_GREATER, t, z);
  Node *n = graph_add_node(L->g, OP_WHERE, arena_printf(L->g->arena, "%s/Where%d", L->name,
                                                        L->count++), 3, 1);
  n->in[0] = positive;
  n->in[1] = a;
  n->in[2] = b;
  n->out[0] = graph_add_tensor(L->g, NULL);
  return n->out[0];
}

/* c * x + y, skipping the product when c is 0 (norm_coefficient's default). */
static Tensor *scaled_plus(Lowering *L, float c, Tensor *x, Tensor *y) {
  if (c == 0)
    return y;
  return add(L, OP_ADD, add(L, OP_MUL, scalar(L, c), x), y);
}

/* ---------------------------------------------------------- attributes */

typedef struct Attrs {
  float alpha, beta, epsilon, decay_factor, norm_coefficient, norm_coefficient_post;
  const char *mode;
} Attrs;

static bool read_attrs(Lowering *L, const Onnx__NodeProto *np, Attrs *a) {
  for (size_t i = 0; i < np->n_attribute; i++) {
    const Onnx__AttributeProto *p = np->attribute[i];
    const char *name = proto_str(p->name);
    float *f = strcmp(name, "alpha") == 0                   ? &a->alpha
               : strcmp(name, "beta") == 0                  ? &a->beta
               : strcmp(name, "epsilon") == 0               ? &a->epsilon
               : strcmp(name, "decay_factor") == 0          ? &a->decay_factor
               : strcmp(name, "norm_coefficient") == 0      ? &a->norm_coefficient
               : strcmp(name, "norm_coefficient_post") == 0 ? &a->norm_coefficient_post
                                                            : NULL;
    if (f && p->has_f)
      *f = p->f;
    else if (strcmp(name, "mode") == 0 && p->has_s) {
      char *s = arena_alloc(L->g->arena, p->s.len + 1);
      memcpy(s, p->s.data, p->s.len);
      a->mode = s;
    } else
      return fail(L, "unknown or mistyped attribute ", name);
  }
  return true;
}

/* ---------------------------------------------------------- the rules */

/* The inputs and outputs of one optimised tensor: in[0] X, in[1] G, then
   the state (V, H); out[k] the new value of X and of each state. */
typedef struct One {
  Tensor *x, *g, *state[2];
  Tensor *out[3];
} One;

/* Adagrad: r = R / (1 + T decay_factor); g = norm_coefficient X + G;
   H' = H + g g; X' = X - r g / (sqrt(H') + epsilon). */
static void adagrad(Lowering *L, const Attrs *a, Tensor *r, Tensor *tf, const One *o) {
  Tensor *rate = add(L, OP_DIV, r, add(L, OP_ADD, scalar(L, 1),
                                       add(L, OP_MUL, tf, scalar(L, a->decay_factor))));
  Tensor *g = scaled_plus(L, a->norm_coefficient, o->x, o->g);
  Tensor *h = add_into(L, OP_ADD, o->state[0], add(L, OP_MUL, g, g), o->out[1]);
  Tensor *root = add(L, OP_ADD, add(L, OP_SQRT, h, NULL), scalar(L, a->epsilon));
  add_into(L, OP_SUB, o->x, add(L, OP_DIV, add(L, OP_MUL, rate, g), root), o->out[0]);
}

/* Momentum: g = norm_coefficient X + G; V' = alpha V + beta' g, beta' = 1
   on the first update (T = 0); standard: X' = X - R V'; nesterov:
   X' = X - R (g + alpha V'). */
static void momentum(Lowering *L, const Attrs *a, Tensor *r, Tensor *t, const One *o) {
  Tensor *g = scaled_plus(L, a->norm_coefficient, o->x, o->g);
  Tensor *beta = after_first(L, t, scalar(L, a->beta), scalar(L, 1));
  Tensor *v = add_into(L, OP_ADD, add(L, OP_MUL, scalar(L, a->alpha), o->state[0]),
                       add(L, OP_MUL, beta, g), o->out[1]);
  Tensor *step = strcmp(a->mode, "nesterov") == 0
                     ? add(L, OP_ADD, g, add(L, OP_MUL, scalar(L, a->alpha), v))
                     : v;
  add_into(L, OP_SUB, o->x, add(L, OP_MUL, r, step), o->out[0]);
}

/* Adam: g = norm_coefficient X + G; V' = alpha V + (1 - alpha) g;
   H' = beta H + (1 - beta) g g; r = R sqrt(1 - beta^T) / (1 - alpha^T)
   after the first update (T > 0), else R; X' = (1 - norm_coefficient_post)
   (X - r V' / (sqrt(H') + epsilon)). */
static void adam(Lowering *L, const Attrs *a, Tensor *r, Tensor *t, Tensor *tf, const One *o) {
  Tensor *g = scaled_plus(L, a->norm_coefficient, o->x, o->g);
  Tensor *v = add_into(L, OP_ADD, add(L, OP_MUL, scalar(L, a->alpha), o->state[0]),
                       add(L, OP_MUL, scalar(L, 1 - a->alpha), g), o->out[1]);
  Tensor *h = add_into(L, OP_ADD, add(L, OP_MUL, scalar(L, a->beta), o->state[1]),
                       add(L, OP_MUL, scalar(L, 1 - a->beta), add(L, OP_MUL, g, g)), o->out[2]);
  Tensor *root = add(L, OP_ADD, add(L, OP_SQRT, h, NULL), scalar(L, a->epsilon));
  Tensor *beta_t = add(L, OP_SUB, scalar(L, 1), add(L, OP_POW, scalar(L, a->beta), tf));
  Tensor *alpha_t = add(L, OP_SUB, scalar(L, 1), add(L, OP_POW, scalar(L, a->alpha), tf));
  Tensor *corrected = add(L, OP_DIV, add(L, OP_MUL, r, add(L, OP_SQRT, beta_t, NULL)), alpha_t);
  Tensor *rate = after_first(L, t, corrected, r);
  Tensor *step = add(L, OP_MUL, rate, add(L, OP_DIV, v, root));
  if (a->norm_coefficient_post == 0) {
    add_into(L, OP_SUB, o->x, step, o->out[0]);
    return;
  }
  add_into(L, OP_MUL, add(L, OP_SUB, o->x, step), scalar(L, 1 - a->norm_coefficient_post),
           o->out[0]);
}

/* ---------------------------------------------------------- the node */

bool is_training_op(const Onnx__NodeProto *np) {
  const char *op = proto_str(np->op_type);
  return strcmp(proto_str(np->domain), "ai.onnx.preview.training") == 0 &&
         (strcmp(op, "Adagrad") == 0 || strcmp(op, "Adam") == 0 || strcmp(op, "Momentum") == 0);
}

void import_training_op(Importer *im, const Onnx__NodeProto *np, const char *name) {
  Lowering L = {.im = im, .g = im->g, .name = name, .op = proto_str(np->op_type)};
  bool is_adam = strcmp(L.op, "Adam") == 0, is_momentum = strcmp(L.op, "Momentum") == 0;
  int states = is_adam ? 2 : 1;    /* Adam: V and H; Adagrad: H; Momentum: V */
  /* The spec's defaults; Momentum's attributes are required (NAN: absent). */
  Attrs a = {.epsilon = 1e-6f, .alpha = is_adam ? 0.9f : NAN, .beta = is_adam ? 0.999f : NAN,
             .norm_coefficient = is_momentum ? NAN : 0, .mode = ""};
  if (!read_attrs(&L, np, &a))
    return;
  if (is_momentum && (isnan(a.alpha) || isnan(a.beta) || isnan(a.norm_coefficient))) {
    fail(&L, "needs its attributes alpha, beta, mode and norm_coefficient", NULL);
    return;
  }
  if (is_momentum && strcmp(a.mode, "standard") != 0 && strcmp(a.mode, "nesterov") != 0) {
    fail(&L, "mode must be \"standard\" or \"nesterov\", not ", *a.mode ? a.mode : "absent");
    return;
  }
  int per = 2 + states; /* X, G and the states */
  int nin = (int)np->n_input, nout = (int)np->n_output;
  int n = (nin - 2) / per;
  if (nin < 2 + per || (nin - 2) % per != 0 || nout != n * (1 + states)) {
    fail(&L, is_adam ? "takes R, T and n each of X, G, V and H; returns n each of X, V and H"
             : is_momentum ? "takes R, T and n each of X, G and V; returns n each of X and V"
                           : "takes R, T and n each of X, G and H; returns n each of X and H",
         NULL);
    return;
  }
  Tensor **in = arena_alloc(L.g->arena, sizeof(Tensor *) * (size_t)nin);
  for (int i = 0; i < nin; i++) {
    in[i] = *np->input[i] ? import_lookup(im, np->input[i]) : NULL;
    if (!in[i]) {
      fail(&L, "an input is absent or not defined by any node, initializer or graph input: ",
           np->input[i]);
      return;
    }
  }
  L.type = in[2]->dtype == DT_DOUBLE ? DT_DOUBLE : DT_FLOAT;
  Tensor *r = in[0]->dtype == L.type ? in[0] : cast(&L, in[0], L.type);
  Tensor *t = in[1], *tf = cast(&L, t, L.type);
  for (int k = 0; k < n; k++) {
    One o = {.x = in[2 + k], .g = in[2 + n + k]};
    for (int s = 0; s < states; s++)
      o.state[s] = in[2 + (2 + s) * n + k];
    for (int s = 0; s <= states; s++) {
      const char *out = np->output[s * n + k];
      o.out[s] = *out ? import_lookup(im, out) : graph_add_tensor(L.g, NULL);
    }
    if (is_adam)
      adam(&L, &a, r, t, tf, &o);
    else if (is_momentum)
      momentum(&L, &a, r, t, &o);
    else
      adagrad(&L, &a, r, tf, &o);
  }
}
