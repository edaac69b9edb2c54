/*
 * kernels_elementwise.c - elementwise operators and activations as launches of
 * opc's kernels: unary (activations, math functions, Clip), binary with
 * broadcasting, Sum/Mean/Max/Min, Trilu, Mod, Gelu, comparisons, logic
 * and bitwise operators, IsNaN/IsInf, Where, CastLike, and the fused
 * activation of a Conv or Gemm that cuDNN cannot apply.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* ------------------------------------------------- elementwise operators */

/* An elementwise launch over the node's output with inputs broadcast. */
static Launch elementwise(Emitter *e, const Node *n, const char *kernel, Tensor *const *inputs,
                          int count) {
  Launch L = {.kernel = kernel};
  const Tensor *y = n->out[0];
  L.rank = y->rank;
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  int64_t s[IR_MAX_RANK];
  strides_of(y, s);
  set_output(&L, buf(e, y), s);
  for (int k = 0; k < count; k++) {
    broadcast_to(inputs[k], L.rank, L.dims, s);
    set_input(&L, k, buf(e, inputs[k]), s);
  }
  return L;
}

/* In-place activation of a Conv or Gemm output that cuDNN cannot fuse. */
static void activation_launch(Emitter *e, const Node *n, Activation act, float alpha,
                              float beta, const Tensor *y) {
  static const char *const kernel[] = {
      [ACT_RELU] = "opc_relu_f32", [ACT_CLIP] = "opc_clip", [ACT_SIGMOID] = "opc_sigmoid",
      [ACT_TANH] = "opc_tanh", [ACT_LEAKY_RELU] = "opc_leaky_relu", [ACT_SILU] = "opc_silu",
      [ACT_HARD_SIGMOID] = "opc_hard_sigmoid", [ACT_HARD_SWISH] = "opc_hard_swish",
      [ACT_MISH] = "opc_mish",
  };
  if (act == ACT_NONE)
    return;
  Launch L = {.kernel = kernel[act]};
  if (y->dtype == DT_FLOAT16 || y->dtype == DT_BFLOAT16) { /* the 16-bit instance */
    const char *base = act == ACT_RELU ? "opc_relu" : kernel[act];
    L.kernel = typed_kernel(e, base, y->dtype);
    set_element_type(&L, y->dtype);
  }
  L.rank = y->rank;
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  int64_t s[IR_MAX_RANK];
  strides_of(y, s);
  set_output(&L, buf(e, y), s);
  set_input(&L, 0, buf(e, y), s);
  collapse(&L);
  L.note = "the fused activation, in place";
  if (act == ACT_CLIP) {
    L.f[0] = alpha;
    L.f[1] = beta;
    group_f(&L, 0, 2, "min, max");
  } else if (act == ACT_HARD_SIGMOID) {
    L.f[0] = alpha;
    L.f[1] = beta;
    group_f(&L, 0, 2, "alpha, beta");
  } else if (act == ACT_LEAKY_RELU) {
    L.f[0] = alpha;
    group_f(&L, 0, 1, "alpha");
  }
  emit_launch(e, n, &L);
}

void emit_kernel_activation(Emitter *e, const Node *n, const Tensor *y) {
  activation_launch(e, n, n->act, n->act_alpha, n->act_beta, y);
}

/* The activation a node of ours carries, if a pass fused one into it. */
void fused_activation(Emitter *e, const Node *n) {
  if (n->act != ACT_NONE)
    activation_launch(e, n, n->act, n->act_alpha, n->act_beta, n->out[0]);
}

typedef struct UnaryKernel {
  OpKind op;
  const char *kernel;
  int nf;
  const char *attr[2]; /* names of the float attributes into f[] */
} UnaryKernel;

/* An activation's float parameter by its attribute's name, as resolved by
   shape inference. */
static float act_param(const Node *n, const char *name) {
  if (strcmp(name, "beta") == 0)
    return n->p.act.beta;
  if (strcmp(name, "gamma") == 0)
    return n->p.act.gamma;
  if (strcmp(name, "lambd") == 0)
    return n->p.act.lambd;
  if (strcmp(name, "bias") == 0)
    return n->p.act.bias;
  return n->p.act.alpha;
}

static const UnaryKernel unary_kernels[] = {
    {OP_RELU, "opc_relu", 0, {0}}, /* typed, as are Abs, Neg and Sign */
    {OP_LEAKY_RELU, "opc_leaky_relu", 1, {"alpha"}},
    {OP_ELU, "opc_elu", 1, {"alpha"}},
    {OP_SELU, "opc_selu", 2, {"alpha", "gamma"}},
    {OP_CELU, "opc_celu", 1, {"alpha"}},
    {OP_SIGMOID, "opc_sigmoid", 0, {0}},
    {OP_TANH, "opc_tanh", 0, {0}},
    {OP_HARD_SIGMOID, "opc_hard_sigmoid", 2, {"alpha", "beta"}},
    {OP_HARD_SWISH, "opc_hard_swish", 0, {0}},
    {OP_SOFTPLUS, "opc_softplus", 0, {0}},
    {OP_SOFTSIGN, "opc_softsign", 0, {0}},
    {OP_CLIP, "opc_clip", 0, {0}}, /* bounds read by clip_bounds() */
    {OP_ERF, "opc_erf", 0, {0}},
    {OP_EXP, "opc_exp", 0, {0}},
    {OP_LOG, "opc_log", 0, {0}},
    {OP_SQRT, "opc_sqrt", 0, {0}},
    {OP_ABS, "opc_abs", 0, {0}}, /* typed: opc_abs_f32, opc_abs_i64, ... */
    {OP_NEG, "opc_neg", 0, {0}},
    {OP_RECIPROCAL, "opc_reciprocal", 0, {0}},
    {OP_FLOOR, "opc_floor", 0, {0}},
    {OP_CEIL, "opc_ceil", 0, {0}},
    {OP_ROUND, "opc_round", 0, {0}},
    {OP_SIGN, "opc_sign", 0, {0}},
    {OP_SIN, "opc_sin", 0, {0}},
    {OP_COS, "opc_cos", 0, {0}},
    {OP_TAN, "opc_tan", 0, {0}},
    {OP_ASIN, "opc_asin", 0, {0}},
    {OP_ACOS, "opc_acos", 0, {0}},
    {OP_ATAN, "opc_atan", 0, {0}},
    {OP_SINH, "opc_sinh", 0, {0}},
    {OP_COSH, "opc_cosh", 0, {0}},
    {OP_ASINH, "opc_asinh", 0, {0}},
    {OP_ACOSH, "opc_acosh", 0, {0}},
    {OP_ATANH, "opc_atanh", 0, {0}},
    /* more operators */
    {OP_THRESHOLDED_RELU, "opc_thresholded_relu", 1, {"alpha"}},
    {OP_SHRINK, "opc_shrink", 2, {"lambd", "bias"}},
    {OP_MISH, "opc_mish", 0, {0}},
    {OP_SWISH, "opc_swish", 1, {"alpha"}},
};

static const UnaryKernel *unary_kernel(OpKind op) {
  for (size_t i = 0; i < sizeof unary_kernels / sizeof unary_kernels[0]; i++)
    if (unary_kernels[i].op == op)
      return &unary_kernels[i];
  return NULL;
}

/* Clip's bounds: attributes before opset 11, optional inputs after, printed
   as literals when constant and else read by the kernel from x[1] and x[2];
   absent ones are the float range, as the spec says. */
static bool clip_bounds(Emitter *e, const Node *n, Launch *L) {
  L->f[0] = n->p.clip.has_min ? n->p.clip.min : -FLT_MAX;
  L->f[1] = n->p.clip.has_max ? n->p.clip.max : FLT_MAX;
  group_f(L, 0, 2, "min, max");
  for (int i = 1; i <= 2; i++) {
    Tensor *b = node_input(n, i);
    if (!b)
      continue;
    if (tensor_numel(b) != 1)
      return kernel_fail(e, n, "Clip's bounds must be scalars");
    if (b->f32) {
      L->f[i - 1] = b->f32[0];
      continue;
    }
    int64_t none[IR_MAX_RANK] = {0};
    set_input(L, i, buf(e, b), none);
    L->x_extent[i] = 1;
    L->note = "x = {input, min, max}: a bound computed at run time replaces f's";
  }
  return true;
}

/* The instance of a kernel written once over the element types: the one
   for the node's type. The kernels of other kinds are float32 only, but
   for the activations that also have float16 and bfloat16 instances. */
static const char *kernel_for_type(Emitter *e, const Node *n, const char *kernel) {
  static const OpKind typed[] = {OP_ABS, OP_NEG, OP_ADD, OP_SUB,    OP_MUL,  OP_DIV,
                                 OP_MOD, OP_MAX, OP_MIN, OP_CUMSUM, OP_RELU, OP_SIGN};
  for (size_t k = 0; k < sizeof typed / sizeof typed[0]; k++)
    if (typed[k] == n->op)
      return typed_kernel(e, kernel, node_data_type(n));
  return node_in_half(n) ? typed_kernel(e, kernel, node_data_type(n)) : kernel;
}

/* An elementwise launch of the node's kernel, typed by its output. */
static Launch typed_elementwise(Emitter *e, const Node *n, const char *kernel, Tensor *const *inputs,
                                int count) {
  Launch L = elementwise(e, n, kernel_for_type(e, n, kernel), inputs, count);
  set_element_type(&L, node_data_type(n));
  return L;
}

static void run_unary(Emitter *e, Node *n) {
  const UnaryKernel *u = unary_kernel(n->op);
  Launch L = typed_elementwise(e, n, u->kernel, n->in, 1);
  collapse(&L);
  for (int k = 0; k < u->nf; k++)
    L.f[k] = act_param(n, u->attr[k]);
  if (u->nf == 1)
    group_f(&L, 0, 1, u->attr[0]);
  else if (u->nf == 2)
    group_f(&L, 0, 2, emit_str(e, "%s, %s", u->attr[0], u->attr[1]));
  if (n->op == OP_CLIP && !clip_bounds(e, n, &L))
    return;
  emit_launch(e, n, &L);
  fused_activation(e, n);
}

static const char *binary_kernel(OpKind op) {
  static const char *const kernels[OP_COUNT] = {
      [OP_ADD] = "opc_add", [OP_SUB] = "opc_sub", [OP_MUL] = "opc_mul",
      [OP_DIV] = "opc_div", [OP_POW] = "opc_pow", [OP_PRELU] = "opc_prelu"};
  return kernels[op];
}

static void run_binary(Emitter *e, Node *n) {
  Launch L = typed_elementwise(e, n, binary_kernel(n->op), n->in, 2);
  collapse(&L);
  emit_launch(e, n, &L);
  fused_activation(e, n);
}

/* Sum, Mean, Max, Min: up to four inputs per launch; further launches take
   the partial result back as their first input. */
static void run_variadic(Emitter *e, Node *n) {
  const char *kernel = n->op == OP_MAX ? "opc_max" : n->op == OP_MIN ? "opc_min" : "opc_sum";
  int done = 0;
  while (done < n->nin) {
    Tensor *inputs[4];
    int count = 0;
    if (done > 0)
      inputs[count++] = n->out[0];
    while (count < 4 && done < n->nin)
      inputs[count++] = n->in[done++];
    Launch L = typed_elementwise(e, n, kernel, inputs, count);
    collapse(&L);
    L.i[0] = count;
    group_i(&L, 0, 1, "inputs");
    if (n->op == OP_SUM || n->op == OP_MEAN) {
      L.f[0] = n->op == OP_MEAN && done == n->nin ? 1.0f / (float)n->nin : 1.0f;
      group_f(&L, 0, 1, n->op == OP_MEAN && done == n->nin ? "1 / inputs: the mean" : "factor");
    }
    emit_launch(e, n, &L);
  }
  fused_activation(e, n);
}

static void run_trilu(Emitter *e, Node *n) {
  int64_t k = n->p.trilu.k;
  /* Not collapsed: the kernel needs the last two dims as they are. */
  Launch L = elementwise(e, n, sized_kernel(e, "opc_trilu", n->out[0]->dtype), n->in, 1);
  set_element_type(&L, n->out[0]->dtype);
  L.i[0] = k;
  L.i[1] = n->p.trilu.upper;
  group_i(&L, 0, 2, "k, upper");
  emit_launch(e, n, &L);
}

static void run_mod(Emitter *e, Node *n) {
  Launch L = typed_elementwise(e, n, "opc_mod", n->in, 2);
  collapse(&L);
  L.i[0] = n->p.mod.fmod;
  group_i(&L, 0, 1, "fmod");
  emit_launch(e, n, &L);
}

static void run_gelu(Emitter *e, Node *n) {
  bool approx = n->p.act.tanh;
  Launch L = typed_elementwise(e, n, approx ? "opc_gelu_tanh" : "opc_gelu", n->in, 1);
  collapse(&L);
  emit_launch(e, n, &L);
}

/* ---------------------------------- comparison, logic, bits and Where */

/* How a kernel of this section is picked among its instances: by its
   operands' type, by their element size (Where), or one for bools. */
typedef enum { BY_TYPE, BY_SIZE, BOOL_ONLY } Typing;

typedef struct LogicKernel {
  OpKind op;
  const char *kernel;
  Typing typing;
  int code;          /* i[0]: which operation of a shared kernel */
  const char *label; /* its name in net.c; NULL when i[0] is unused */
} LogicKernel;

static const LogicKernel logic_kernels[] = {
    {OP_EQUAL, "opc_compare", BY_TYPE, 0, "Equal"},
    {OP_GREATER, "opc_compare", BY_TYPE, 1, "Greater"},
    {OP_LESS, "opc_compare", BY_TYPE, 2, "Less"},
    {OP_GREATER_OR_EQUAL, "opc_compare", BY_TYPE, 3, "GreaterOrEqual"},
    {OP_LESS_OR_EQUAL, "opc_compare", BY_TYPE, 4, "LessOrEqual"},
    {OP_AND, "opc_logic", BOOL_ONLY, 0, "and"},
    {OP_OR, "opc_logic", BOOL_ONLY, 1, "or"},
    {OP_XOR, "opc_logic", BOOL_ONLY, 2, "xor"},
    {OP_NOT, "opc_not", BOOL_ONLY, 0, NULL},
    {OP_BITWISE_AND, "opc_bitwise", BY_TYPE, 0, "and"},
    {OP_BITWISE_OR, "opc_bitwise", BY_TYPE, 1, "or"},
    {OP_BITWISE_XOR, "opc_bitwise", BY_TYPE, 2, "xor"},
    {OP_BITWISE_NOT, "opc_bitwise_not", BY_TYPE, 0, NULL},
    {OP_BIT_SHIFT, "opc_bit_shift", BY_TYPE, 0, NULL}, /* parameters from the node */
    {OP_IS_NAN, "opc_is_class", BY_TYPE, 0, NULL},
    {OP_IS_INF, "opc_is_class", BY_TYPE, 0, NULL},
    {OP_WHERE, "opc_where", BY_SIZE, 0, NULL},
};

static const LogicKernel *logic_kernel(OpKind op) {
  for (size_t i = 0; i < sizeof logic_kernels / sizeof logic_kernels[0]; i++)
    if (logic_kernels[i].op == op)
      return &logic_kernels[i];
  return NULL;
}

/* The instance for the node: comparisons and IsNaN go by their inputs'
   type (the output is a bool), bools by uint8's instance, which reads
   the same bytes; Where by the size of what it selects. */
static const char *logic_instance(Emitter *e, const Node *n, const LogicKernel *k) {
  if (k->typing == BOOL_ONLY)
    return k->kernel;
  if (k->typing == BY_SIZE)
    return sized_kernel(e, k->kernel, n->out[0]->dtype);
  DType t = n->in[0]->dtype;
  return typed_kernel(e, k->kernel, t == DT_BOOL ? DT_UINT8 : t);
}

static void logic_params(const Node *n, const LogicKernel *k, Launch *L) {
  if (n->op == OP_BIT_SHIFT) {
    L->i[0] = n->p.bit_shift.left;
    group_i(L, 0, 1, n->p.bit_shift.left ? "LEFT" : "RIGHT");
  } else if (n->op == OP_IS_NAN || n->op == OP_IS_INF) {
    L->i[0] = n->op == OP_IS_NAN;
    L->i[1] = n->op == OP_IS_INF && n->p.is_inf.positive;
    L->i[2] = n->op == OP_IS_INF && n->p.is_inf.negative;
    group_i(L, 0, 3, "NaN, +infinity, -infinity");
  } else if (k->label) {
    L->i[0] = k->code;
    group_i(L, 0, 1, k->label);
  }
}

static void run_logic(Emitter *e, Node *n) {
  const LogicKernel *k = logic_kernel(n->op);
  Launch L = elementwise(e, n, logic_instance(e, n, k), n->in, n->nin);
  /* The operands' types differ: numbers in and bools out, or a bool
     condition among other values. */
  L.y_bytes = (int)dtype_size(n->out[0]->dtype);
  for (int i = 0; i < n->nin; i++)
    L.x_bytes[i] = (int)dtype_size(n->in[i]->dtype);
  collapse(&L);
  logic_params(n, k, &L);
  emit_launch(e, n, &L);
}

/* CastLike is a Cast to its second input's type, which inference has put
   in the node's parameters: Cast's emitter reads only the first input. */
static void run_cast_like(Emitter *e, Node *n) { run_reshape_copy(e, n); }

/* ---------------------------------------------------------- the table */

static const OpEmitter unary_emitter = {.run = run_unary};
static const OpEmitter binary_emitter = {.run = run_binary};
static const OpEmitter variadic_emitter = {.run = run_variadic};
static const OpEmitter trilu_emitter = {.run = run_trilu};
static const OpEmitter mod_emitter = {.run = run_mod};
static const OpEmitter gelu_emitter = {.run = run_gelu};
static const OpEmitter logic_emitter = {.run = run_logic};
static const OpEmitter cast_like_emitter = {.run = run_cast_like};

const OpEmitter *kernel_elementwise_emitter(OpKind op) {
  if (unary_kernel(op))
    return &unary_emitter;
  if (binary_kernel(op))
    return &binary_emitter;
  if (logic_kernel(op))
    return &logic_emitter;
  static const OpEmitter *const emitters[OP_COUNT] = {
      [OP_SUM] = &variadic_emitter, [OP_MEAN] = &variadic_emitter,
      [OP_MAX] = &variadic_emitter, [OP_MIN] = &variadic_emitter,
      [OP_TRILU] = &trilu_emitter,  [OP_MOD] = &mod_emitter,
      [OP_GELU] = &gelu_emitter,    [OP_CAST_LIKE] = &cast_like_emitter};
  return emitters[op];
}
