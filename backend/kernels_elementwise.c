/*
 * kernels_elementwise.c - elementwise operators and activations as launches of
 * opc's kernels: unary (activations, math functions, Clip), binary with
 * broadcasting, Sum/Mean/Max/Min, Trilu, Mod, Gelu, comparisons, logic
 * and bitwise operators, IsNaN/IsInf, Where, CastLike, QuantizeLinear,
 * DequantizeLinear, and the fused activation of a Conv or Gemm that cuDNN
 * cannot apply.
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

/* In-place activation of a Conv or Gemm output that cuDNN cannot fuse: the
   kernel named after the activation ("opc_" and its act_name), which takes
   the parameters the traits of its row say under its kernel's names. */
static void activation_launch(Emitter *e, const Node *n, Activation act, float alpha,
                              float beta, const Tensor *y) {
  if (act == OPC_ACT_NONE)
    return;
  OpKind op = act_op(act);
  const char *kernel = emit_str(e, "opc_%s", act_name(act));
  Launch L = {.kernel = op_info(op)->traits & T_TYPED_KERNEL ? typed_kernel(e, kernel, y->dtype)
                                                             : kernel};
  if (y->dtype == DT_FLOAT16 || y->dtype == DT_BFLOAT16) { /* the 16-bit instance */
    L.kernel = typed_kernel(e, kernel, y->dtype);
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
  if (y->dtype == DT_FLOAT)
    L.act = act;
  unsigned traits = op_info(op)->traits;
  int count = (traits & T_ACT_ALPHA ? 1 : 0) + (traits & T_ACT_BETA ? 1 : 0);
  const char *names[2];
  if (count > 0 && op_kernel_params(e, op, names) == count) {
    L.f[0] = alpha;
    L.f[1] = count > 1 ? beta : 0;
    group_f(&L, 0, count, count > 1 ? emit_str(e, "%s, %s", names[0], names[1]) : names[0]);
  }
  emit_launch(e, n, &L);
}

/* A convolution's bias, residual z (or none) and fused activation after
   it in one launch, in place on y (opc_conv_epilogue), where cuDNN takes
   a call for each. The bias is read by the channel, dim 1. */
void emit_conv_epilogue(Emitter *e, const Node *n, const char *bias, const Tensor *z) {
  const Tensor *y = n->out[0];
  Launch L = {.kernel = typed_kernel(e, "opc_conv_epilogue", y->dtype), .rank = y->rank};
  memcpy(L.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
  int64_t s[IR_MAX_RANK], per_channel[IR_MAX_RANK] = {0};
  strides_of(y, s);
  set_output(&L, buf(e, y), s);
  set_input(&L, 0, buf(e, y), s);
  per_channel[1] = 1;
  set_input(&L, 1, bias, per_channel);
  L.adds = 1;
  if (z) {
    int64_t zs[IR_MAX_RANK];
    strides_of(z, zs);
    set_input(&L, 2, buf(e, z), zs);
    L.adds = 2;
  }
  collapse(&L);
  set_element_type(&L, y->dtype);
  L.act = n->act;
  L.f[0] = n->act_alpha;
  L.f[1] = n->act_beta;
  if (n->act != OPC_ACT_NONE)
    group_f(&L, 0, 2, "the activation's parameters");
  L.note = z ? "y = act(y + bias + z), in place" : "y = act(y + bias), in place";
  emit_launch(e, n, &L);
}

void emit_kernel_activation(Emitter *e, const Node *n, const Tensor *y) {
  activation_launch(e, n, n->act, n->act_alpha, n->act_beta, y);
}

/* The activation a node of ours carries, if a pass fused one into it. */
void fused_activation(Emitter *e, const Node *n) {
  if (n->act != OPC_ACT_NONE)
    activation_launch(e, n, n->act, n->act_alpha, n->act_beta, n->out[0]);
}

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
    if (b->f32 && !dtype_is_integer(n->out[0]->dtype)) { /* integer ones stay exact in x[1], x[2] */
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
   for the activations that also have float16 and bfloat16 instances and
   Clip, which has integer ones. */
static const char *kernel_for_type(Emitter *e, const Node *n, const char *kernel) {
  if ((op_info(n->op)->traits & T_TYPED_KERNEL) || dtype_is_integer(node_data_type(n)))
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

/* The node's kernel (ops.def's kernel column), its float parameters read
   from the attributes its row names: "opc_selu(alpha, gamma)". */
static void run_unary(Emitter *e, Node *n) {
  Launch L = typed_elementwise(e, n, op_kernel(e, n->op), n->in, 1);
  collapse(&L);
  if (node_data_type(n) == DT_FLOAT) /* Swish's kernel applies Swish, though it fuses as SiLU */
    L.act = kernel_activation(op_kernel(e, n->op));
  if (n->op == OP_CLIP) {
    if (!clip_bounds(e, n, &L))
      return;
  } else {
    const char *names[2];
    int count = op_kernel_params(e, n->op, names);
    for (int k = 0; k < count; k++)
      L.f[k] = act_param(n, names[k]);
    if (count == 1)
      group_f(&L, 0, 1, names[0]);
    else if (count == 2)
      group_f(&L, 0, 2, emit_str(e, "%s, %s", names[0], names[1]));
  }
  emit_launch(e, n, &L);
  fused_activation(e, n);
}

static void run_binary(Emitter *e, Node *n) {
  if (channel_gate_nhwc_takes(e, n)) {
    emit_channel_gate_nhwc(e, n);
    return;
  }
  Launch L = typed_elementwise(e, n, op_kernel(e, n->op), n->in, 2);
  collapse(&L);
  emit_launch(e, n, &L);
  fused_activation(e, n);
}

/* Sum, Mean, Max, Min: up to four inputs per launch; further launches take
   the partial result back as their first input. */
static void run_variadic(Emitter *e, Node *n) {
  const char *kernel = op_kernel(e, n->op);
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
  Launch L = elementwise(e, n, sized_kernel(e, op_kernel(e, n->op), n->out[0]->dtype), n->in, 1);
  set_element_type(&L, n->out[0]->dtype);
  L.i[0] = k;
  L.i[1] = n->p.trilu.upper;
  if (n->p.trilu.k_at_run_time) {
    int64_t none[IR_MAX_RANK] = {0};
    set_input(&L, 1, buf(e, n->in[1]), none);
    L.x_extent[1] = 1;
    L.x_bytes[1] = (int)dtype_size(n->in[1]->dtype);
    L.i[2] = 1;
    L.note = "x[1] holds k, read at run time";
    group_i(&L, 0, 3, "k, upper, k from x[1]");
  } else {
    group_i(&L, 0, 2, "k, upper");
  }
  emit_launch(e, n, &L);
}

static void run_mod(Emitter *e, Node *n) {
  Launch L = typed_elementwise(e, n, op_kernel(e, n->op), n->in, 2);
  collapse(&L);
  L.i[0] = n->p.mod.fmod;
  group_i(&L, 0, 1, "fmod");
  emit_launch(e, n, &L);
}

/* Float32 to a float32 power is opc_pow; an integer base, or an exponent
   of another type, the instance for the base's type, which reads the
   exponent by its ONNX number. Other bases (float64, float16) have no
   kernel here. */
static void run_pow(Emitter *e, Node *n) {
  Tensor *x = n->in[0], *y = n->in[1];
  if (x->dtype != DT_FLOAT && x->dtype != DT_INT32 && x->dtype != DT_INT64) {
    kernel_fail(e, n, emit_str(e, "Pow's base '%s' is %s; Pow runs on f32, i32 and i64 bases "
                               "only", x->name, dtype_name(x->dtype)));
    return;
  }
  if (x->dtype == DT_FLOAT && y->dtype == DT_FLOAT) {
    run_binary(e, n);
    return;
  }
  Launch L = elementwise(e, n, typed_kernel(e, op_kernel(e, n->op), x->dtype), n->in, 2);
  set_element_type(&L, x->dtype);
  L.x_bytes[1] = (int)dtype_size(y->dtype);
  collapse(&L);
  L.i[0] = y->dtype;
  group_i(&L, 0, 1, emit_str(e, "exponent %s", dtype_name(y->dtype)));
  emit_launch(e, n, &L);
}

static void run_gelu(Emitter *e, Node *n) {
  bool approx = n->p.act.tanh;
  const char *kernel = op_kernel(e, n->op);
  Launch L = typed_elementwise(e, n, approx ? emit_str(e, "%s_tanh", kernel) : kernel, n->in, 1);
  collapse(&L);
  emit_launch(e, n, &L);
}

/* ---------------------------------- comparison, logic, bits and Where */

/* The instance for the node: bools only (the kinds that take nothing
   else) have one; comparisons and IsNaN go by their inputs' type (the
   output is a bool), bools by uint8's instance, which reads the same
   bytes; Where by the size of what it selects (T_SIZED_KERNEL). */
static const char *logic_instance(Emitter *e, const Node *n) {
  const OpInfo *info = op_info(n->op);
  const char *kernel = op_kernel(e, n->op);
  if (info->run_types == TY_BOOL)
    return kernel;
  if (info->traits & T_SIZED_KERNEL)
    return sized_kernel(e, kernel, n->out[0]->dtype);
  DType t = n->in[0]->dtype;
  return typed_kernel(e, kernel, t == DT_BOOL ? DT_UINT8 : t);
}

static void logic_params(Emitter *e, const Node *n, Launch *L) {
  int code;
  const char *label;
  if (n->op == OP_BIT_SHIFT) {
    L->i[0] = n->p.bit_shift.left;
    group_i(L, 0, 1, n->p.bit_shift.left ? "LEFT" : "RIGHT");
  } else if (n->op == OP_IS_NAN || n->op == OP_IS_INF) {
    L->i[0] = n->op == OP_IS_NAN;
    L->i[1] = n->op == OP_IS_INF && n->p.is_inf.positive;
    L->i[2] = n->op == OP_IS_INF && n->p.is_inf.negative;
    group_i(L, 0, 3, "NaN, +infinity, -infinity");
  } else if (op_kernel_code(e, n->op, &code, &label)) {
    L->i[0] = code;
    group_i(L, 0, 1, label);
  }
}

/* IfSelect of a bounded branch and a static one (ir/ops.c): one launch
   copies the chosen branch's elements, one thread writes the output's
   dims of this run (opc_if_select_run). Both branches and the output are
   contiguous in prefix layout (ir/bounds.c), so a run's elements are the
   first of its storage. */
static void run_if_select_run(Emitter *e, Node *n) {
  const Tensor *then = n->in[1], *other = n->in[2], *y = n->out[0];
  const Tensor *run = then->bounded ? then : other, *fixed = then->bounded ? other : then;
  if (!buffer_is_contiguous(then) || !buffer_is_contiguous(other) || !buffer_is_contiguous(y)) {
    kernel_fail(e, n, "an If of a branch of run-time size reads contiguous branches only");
    return;
  }
  for (int mode = 0; mode < 2; mode++) {
    Launch L = {.kernel = sized_kernel(e, "opc_if_select_run", y->dtype), .nx = 4,
                .n = mode ? 1 : tensor_numel(y)};
    L.x[0] = buf(e, n->in[0]);
    L.x_extent[0] = 1;
    L.x_bytes[0] = 1;
    if (mode == 0) {
      L.x[1] = tensor_numel(then) ? buf(e, then) : NULL;
      L.x[2] = tensor_numel(other) ? buf(e, other) : NULL;
      L.x_extent[1] = tensor_numel(then);
      L.x_extent[2] = tensor_numel(other);
      L.x_bytes[1] = L.x_bytes[2] = L.y_bytes = (int)dtype_size(y->dtype);
      L.y = buf(e, y);
      L.y_extent = tensor_numel(y);
    } else {
      L.x[3] = live_dims(e, run);
      L.x_extent[3] = run->rank;
      L.x_bytes[3] = 8;
      L.y = live_dims(e, y);
      L.y_extent = y->rank;
      L.y_bytes = 8;
    }
    L.i[0] = then->bounded;
    L.i[1] = mode;
    L.i[2] = tensor_numel(fixed);
    L.i[3] = fixed->rank;
    for (int d = 0; d < fixed->rank; d++)
      L.i[4 + d] = fixed->dims[d];
    group_i(&L, 0, 4, "whether the then branch is the bounded one, which launch, the static "
                      "branch's elements and rank");
    group_i(&L, 4, fixed->rank, "the static branch's dims");
    L.note = mode ? "one thread: the dims of this run, the chosen branch's"
                  : "the chosen branch's elements";
    emit_launch(e, n, &L);
  }
}

static void run_logic(Emitter *e, Node *n) {
  if (n->op == OP_IF_SELECT && n->out[0]->bounded) {
    run_if_select_run(e, n);
    return;
  }
  Launch L = elementwise(e, n, logic_instance(e, n), n->in, n->nin);
  /* The operands' types differ: numbers in and bools out, or a bool
     condition among other values. */
  L.y_bytes = (int)dtype_size(n->out[0]->dtype);
  for (int i = 0; i < n->nin; i++)
    L.x_bytes[i] = (int)dtype_size(n->in[i]->dtype);
  collapse(&L);
  logic_params(e, n, &L);
  emit_launch(e, n, &L);
}

/* CastLike is a Cast to its second input's type, which inference has put
   in the node's parameters: Cast's emitter reads only the first input. */
static void run_cast_like(Emitter *e, Node *n) { run_reshape_copy(e, n); }

/* ------------------------------------------------------- quantization */

/* Strides that read a scale or zero point over the output's dims: none
   for one value, its own along the quantization axis for one per channel. */
static void quant_strides(const Node *n, const Tensor *t, int rank, int64_t *s) {
  int64_t own[IR_MAX_RANK];
  strides_of(t, own);
  for (int d = 0; d < rank; d++)
    s[d] = d == n->p.quant.axis ? own[0] : 0;
}

/* Whether a scale or zero point is one value known now (a float32 scale,
   an integer zero point): the launch then takes it as an argument. */
static bool constant_value(const Tensor *t) {
  return t && tensor_is_const(t) && tensor_numel(t) == 1 &&
         (t->dtype == DT_FLOAT ? t->f32 != NULL : t->i64 != NULL);
}

/* QuantizeLinear and DequantizeLinear: the instance of the quantized type
   (the output's, the input's), x, the scale and the zero point when given
   (i[0] 1), and QuantizeLinear's range in f. One scale and zero point
   known now (QDQ models' activations) are arguments instead (i[0] 2: the
   scale in f[2], the zero point in i[1]), so that x is the launch's only
   operand and the CPU runtime's loop over it is a dense one. */
static void run_quantize(Emitter *e, Node *n) {
  bool quantize = n->op == OP_QUANTIZE_LINEAR;
  const Tensor *x = n->in[0], *y = n->out[0], *scale = n->in[1], *zero = node_input(n, 2);
  DType q = quantize ? y->dtype : x->dtype;
  bool known = scale->dtype == DT_FLOAT && constant_value(scale) && (!zero || constant_value(zero));
  Launch L = {.kernel = typed_kernel(e, op_kernel(e, n->op), q)};
  launch_over(e, &L, y, x);
  int64_t s[IR_MAX_RANK];
  L.x_bytes[0] = (int)dtype_size(x->dtype);
  L.y_bytes = (int)dtype_size(y->dtype);
  if (!known) {
    quant_strides(n, scale, L.rank, s);
    set_input(&L, 1, buf(e, scale), s);
  }
  if (zero && !known) {
    quant_strides(n, zero, L.rank, s);
    set_input(&L, 2, buf(e, zero), s);
    L.x_bytes[2] = (int)dtype_size(zero->dtype);
  }
  collapse(&L);
  if (known) {
    L.i[0] = 2;
    L.i[1] = zero ? zero->i64[0] : 0;
    group_i(&L, 0, 2, "scale and zero point given here, the zero point");
    L.f[2] = scale->f32[0];
    group_f(&L, 2, 1, "scale");
  } else {
    L.i[0] = zero != NULL;
    group_i(&L, 0, 1, "zero point in x[2]");
  }
  if (quantize) {
    L.f[0] = (float)n->p.quant.lo;
    L.f[1] = (float)n->p.quant.hi;
    group_f(&L, 0, 2, "saturated to");
  }
  emit_launch(e, n, &L);
}

/* DynamicQuantizeLinear: two one-thread launches find x's range and write
   the scale and the zero point, then opc_quantize_linear_u8 quantizes x by
   them, read with stride 0. */
static void run_dynamic_quantize(Emitter *e, Node *n) {
  const Tensor *x = n->in[0];
  for (int k = 1; k <= 2; k++) {
    Launch P = {.kernel = typed_kernel(e, op_kernel(e, n->op), DT_UINT8)};
    P.rank = x->rank;
    memcpy(P.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    int64_t s[IR_MAX_RANK];
    strides_of(x, s);
    set_input(&P, 0, buf(e, x), s);
    P.y = buf(e, n->out[k]);
    P.y_extent = 1;
    P.y_bytes = (int)dtype_size(n->out[k]->dtype);
    P.n = 1;
    P.i[0] = k == 2;
    group_i(&P, 0, 1, k == 2 ? "the zero point" : "the scale");
    P.note = "one thread: the range of x, then the scale or the zero point";
    emit_launch(e, n, &P);
  }
  const Tensor *y = n->out[0];
  Launch L = {.kernel = typed_kernel(e, "opc_quantize_linear", DT_UINT8)};
  launch_over(e, &L, y, x);
  int64_t none[IR_MAX_RANK] = {0};
  set_input(&L, 1, buf(e, n->out[1]), none);
  set_input(&L, 2, buf(e, n->out[2]), none);
  L.y_bytes = L.x_bytes[2] = 1;
  collapse(&L);
  L.i[0] = 1;
  group_i(&L, 0, 1, "zero point in x[2]");
  L.f[0] = 0.0f;
  L.f[1] = 255.0f;
  group_f(&L, 0, 2, "saturated to");
  emit_launch(e, n, &L);
}

/* ------------------------------------- the emitters ops.def names */

const OpEmitter kernel_unary = {.run = run_unary};
const OpEmitter kernel_binary = {.run = run_binary};
const OpEmitter kernel_variadic = {.run = run_variadic};
const OpEmitter kernel_trilu = {.run = run_trilu};
const OpEmitter kernel_mod = {.run = run_mod};
const OpEmitter kernel_pow = {.run = run_pow};
const OpEmitter kernel_gelu = {.run = run_gelu};
const OpEmitter kernel_logic = {.run = run_logic};
const OpEmitter kernel_cast_like = {.run = run_cast_like};
const OpEmitter kernel_quantize = {.run = run_quantize};
const OpEmitter kernel_dynamic_quantize = {.run = run_dynamic_quantize};
