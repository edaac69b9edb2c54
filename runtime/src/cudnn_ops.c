/*
 * cudnn_ops.c - cuDNN's element-wise, pooling, softmax, reduction, LRN and
 * batch-normalisation operations on strided float tensors.
 *
 * The element-wise ones share the walker (walk.c): an op keeps the walk
 * and its scalars, and a row function does the arithmetic.
 */
#include <float.h>
#include <string.h>

#include "dnn.h"
#include "vector_math.h"

/* ---- element-wise ops through the walker ---- */

typedef enum {
  EW_ACTIVATION, /* y = alpha * act(x) + beta * y          ops: x, y */
  EW_OP_TENSOR,  /* c = op(a1 * a, a2 * b) + beta * c      ops: a, b, c */
  EW_ADD,        /* c = alpha * a + beta * c              ops: a, c */
  EW_SCALE,      /* y = alpha * y                         ops: y */
  EW_SET,        /* y = value                             ops: y */
  EW_COPY,       /* y = x, any element size               ops: x, y */
  EW_AFFINE,     /* y = alpha * (s * x + t) + beta * y    ops: x, s, t, y */
} EwKind;

typedef struct EwOp {
  Op op;
  Walk walk;
  EwKind kind;
  cudnnOpTensorOp_t optensor;
  Act act;
  float alpha, alpha2, beta;
} EwOp;

/* y = alpha act(x) + beta y, act of the given mode: a constant where it is
 * inlined, so that act_apply's switch goes and the loop vectorises. */
static inline __attribute__((always_inline)) void act_loop(const Act *act, int mode,
                                                           const float *x, float *y, long long n,
                                                           float alpha, float beta) {
  Act a = *act;
  a.mode = (cudnnActivationMode_t)mode;
  for (long long i = 0; i < n; i++) {
    float v = alpha * act_apply(&a, x[i]);
    y[i] = beta != 0 ? v + beta * y[i] : v;
  }
}

OPC_VECTOR_CLONES void act_row(const Act *act, const float *x, float *y, long long n,
                               float alpha, float beta) {
  switch ((int)act->mode) {
  case CUDNN_ACTIVATION_RELU:
    for (long long i = 0; i < n; i++)
      y[i] = alpha * opc_clipped_relu_of(x[i], INFINITY) + (beta != 0 ? beta * y[i] : 0);
    return;
  case CUDNN_ACTIVATION_CLIPPED_RELU: {
    float top = act->coef;
    for (long long i = 0; i < n; i++)
      y[i] = alpha * opc_clipped_relu_of(x[i], top) + (beta != 0 ? beta * y[i] : 0);
    return;
  }
  case CUDNN_ACTIVATION_SIGMOID: {
    long long i = 0;
    for (; i + 16 <= n; i += 16) {
      F16 r = alpha * sigmoid16(*(const F16 *)(x + i));
      if (beta != 0)
        r += beta * *(const F16 *)(y + i);
      *(F16 *)(y + i) = r;
    }
    for (; i < n; i++)
      y[i] = alpha * opc_sigmoid_of(x[i]) + (beta != 0 ? beta * y[i] : 0);
    return;
  }
  case CUDNN_ACTIVATION_TANH:
    for (long long i = 0; i < n; i++)
      y[i] = alpha * opc_tanh_of(x[i]) + (beta != 0 ? beta * y[i] : 0);
    return;
  case CUDNN_ACTIVATION_SWISH: {
    float b = act->swish_beta;
    long long i = 0;
    for (; i + 16 <= n; i += 16) {
      F16 r = alpha * swish16(*(const F16 *)(x + i), b);
      if (beta != 0)
        r += beta * *(const F16 *)(y + i);
      *(F16 *)(y + i) = r;
    }
    for (; i < n; i++)
      y[i] = alpha * opc_swish_of(x[i], b) + (beta != 0 ? beta * y[i] : 0);
    return;
  }
  /* opc's own activations, one loop each (scalar.h's list), so that
   * each formula's loop vectorises. */
#define KERNEL_ACT_ROW(NAME, name, params)                                \
  case KERNEL_ACT_##NAME:                                                 \
    act_loop(act, KERNEL_ACT_##NAME, x, y, n, alpha, beta);               \
    return;
    OPC_ACTIVATIONS(KERNEL_ACT_ROW)
#undef KERNEL_ACT_ROW
  default:
    act_loop(act, (int)act->mode, x, y, n, alpha, beta);
    return;
  }
}

/* c = op(alpha * a, alpha2 * b) over a contiguous row, b contiguous (bs 1)
 * or one value (bs 0, a bias or a squeeze-excitation gate): a loop per
 * operation, which the compiler vectorises. False for the other ops. */
static bool op_tensor_row(cudnnOpTensorOp_t op, const float *a, const float *b, long long bs,
                          float *c, long long n, float alpha, float alpha2) {
  switch (op) {
  case CUDNN_OP_TENSOR_ADD:
    if (bs == 0) {
      float v = alpha2 * b[0];
      for (long long i = 0; i < n; i++)
        c[i] = alpha * a[i] + v;
    } else {
      for (long long i = 0; i < n; i++)
        c[i] = alpha * a[i] + alpha2 * b[i];
    }
    return true;
  case CUDNN_OP_TENSOR_MUL:
    if (bs == 0) {
      float v = alpha2 * b[0];
      for (long long i = 0; i < n; i++)
        c[i] = alpha * a[i] * v;
    } else {
      for (long long i = 0; i < n; i++)
        c[i] = alpha * a[i] * (alpha2 * b[i]);
    }
    return true;
  default:
    return false;
  }
}

OPC_VECTOR_CLONES static void ew_row(void *ctx, char *const *p, const long long *s,
                                     long long n) {
  const EwOp *e = ctx;
  float alpha = e->alpha, alpha2 = e->alpha2, beta = e->beta;
  switch (e->kind) {
  case EW_ACTIVATION: {
    const float *x = (const float *)p[0];
    float *y = (float *)p[1];
    if (s[0] == 1 && s[1] == 1) {
      act_row(&e->act, x, y, n, alpha, beta);
      break;
    }
    for (long long i = 0; i < n; i++) {
      float v = alpha * act_apply(&e->act, x[i * s[0]]);
      y[i * s[1]] = beta != 0 ? v + beta * y[i * s[1]] : v;
    }
    break;
  }
  case EW_OP_TENSOR: {
    const float *a = (const float *)p[0], *b = (const float *)p[1];
    float *c = (float *)p[2];
    if (s[0] == 1 && s[2] == 1 && (s[1] == 1 || s[1] == 0) && beta == 0 &&
        op_tensor_row(e->optensor, a, b, s[1], c, n, alpha, alpha2))
      break;
    for (long long i = 0; i < n; i++) {
      float u = alpha * a[i * s[0]], v;
      switch (e->optensor) {
      case CUDNN_OP_TENSOR_ADD: v = u + alpha2 * b[i * s[1]]; break;
      case CUDNN_OP_TENSOR_MUL: v = u * (alpha2 * b[i * s[1]]); break;
      case CUDNN_OP_TENSOR_MIN: v = fminf(u, alpha2 * b[i * s[1]]); break;
      case CUDNN_OP_TENSOR_MAX: v = fmaxf(u, alpha2 * b[i * s[1]]); break;
      case CUDNN_OP_TENSOR_SQRT: v = sqrtf(u); break;
      case CUDNN_OP_TENSOR_NOT: v = 1.0f - u; break;
      default: v = u; break;
      }
      c[i * s[2]] = beta != 0 ? v + beta * c[i * s[2]] : v;
    }
    break;
  }
  case EW_ADD: {
    const float *a = (const float *)p[0];
    float *c = (float *)p[1];
    if (s[1] == 1 && s[0] == 0) { /* a bias broadcast along the row */
      float v = alpha * a[0];
      if (beta == 1)
        for (long long i = 0; i < n; i++)
          c[i] += v;
      else
        for (long long i = 0; i < n; i++)
          c[i] = v + (beta != 0 ? beta * c[i] : 0);
      break;
    }
    if (s[1] == 1 && s[0] == 1) {
      for (long long i = 0; i < n; i++)
        c[i] = alpha * a[i] + (beta != 0 ? beta * c[i] : 0);
      break;
    }
    for (long long i = 0; i < n; i++) {
      float v = alpha * a[i * s[0]];
      c[i * s[1]] = beta != 0 ? v + beta * c[i * s[1]] : v;
    }
    break;
  }
  case EW_SCALE: {
    float *y = (float *)p[0];
    for (long long i = 0; i < n; i++)
      y[i * s[0]] *= alpha;
    break;
  }
  case EW_SET: {
    float *y = (float *)p[0];
    for (long long i = 0; i < n; i++)
      y[i * s[0]] = alpha;
    break;
  }
  case EW_COPY: {
    size_t elem = e->walk.elem;
    if (s[0] == 1 && s[1] == 1) {
      memmove(p[1], p[0], n * elem);
      break;
    }
    /* Typed loops for the common sizes: a memcpy call per element costs
     * more than the element. */
    if (elem == 4) {
      const uint32_t *a = (const uint32_t *)p[0];
      uint32_t *c = (uint32_t *)p[1];
      for (long long i = 0; i < n; i++)
        c[i * s[1]] = a[i * s[0]];
    } else if (elem == 2) {
      const uint16_t *a = (const uint16_t *)p[0];
      uint16_t *c = (uint16_t *)p[1];
      for (long long i = 0; i < n; i++)
        c[i * s[1]] = a[i * s[0]];
    } else if (elem == 8) {
      const uint64_t *a = (const uint64_t *)p[0];
      uint64_t *c = (uint64_t *)p[1];
      for (long long i = 0; i < n; i++)
        c[i * s[1]] = a[i * s[0]];
    } else {
      for (long long i = 0; i < n; i++)
        memcpy(p[1] + i * s[1] * elem, p[0] + i * s[0] * elem, elem);
    }
    break;
  }
  case EW_AFFINE: {
    const float *x = (const float *)p[0], *sc = (const float *)p[1], *sh = (const float *)p[2];
    float *y = (float *)p[3];
    if (s[0] == 1 && s[3] == 1 && s[1] == 0 && s[2] == 0 && beta == 0) {
      /* A packed row of one channel (NCHW): one scale and shift. */
      float a = sc[0], b = sh[0];
      for (long long i = 0; i < n; i++)
        y[i] = alpha * (a * x[i] + b);
      break;
    }
    for (long long i = 0; i < n; i++) {
      float v = alpha * (sc[i * s[1]] * x[i * s[0]] + sh[i * s[2]]);
      y[i * s[3]] = beta != 0 ? v + beta * y[i * s[3]] : v;
    }
    break;
  }
  }
}

static void run_ew(Op *op) {
  EwOp *e = (EwOp *)op;
  Walk w = e->walk; /* walk_run rearranges its walk; replays need the original */
  walk_run(&w, ew_row, e);
}

/* Whether walk operand k covers exactly (p, t). */
static bool walks_over(const Walk *w, int k, const void *p, const Tensor *t) {
  if (w->base[k] != (const char *)p || w->rank != t->rank)
    return false;
  for (int i = 0; i < t->rank; i++)
    if (w->dims[i] != t->dims[i] || w->strides[k][i] != t->strides[i])
      return false;
  return true;
}

bool ew_is_channel_bias(const Op *op, const void *y, const Tensor *yt, const float **bias,
                        long long *stride) {
  const EwOp *e = (const EwOp *)op;
  if (op->run != run_ew || e->kind != EW_ADD || e->alpha != 1 || e->beta != 1 ||
      yt->type != CUDNN_DATA_FLOAT || yt->rank < 2 || !walks_over(&e->walk, 1, y, yt))
    return false;
  for (int i = 0; i < yt->rank; i++)
    if (i != 1 && yt->dims[i] != 1 && e->walk.strides[0][i] != 0)
      return false;
  *bias = (const float *)e->walk.base[0];
  *stride = e->walk.strides[0][1];
  return true;
}

bool ew_is_activation_in_place(const Op *op, const void *y, const Tensor *yt, Act *act) {
  const EwOp *e = (const EwOp *)op;
  if (op->run != run_ew || e->kind != EW_ACTIVATION || e->alpha != 1 || e->beta != 0 ||
      yt->type != CUDNN_DATA_FLOAT || !walks_over(&e->walk, 0, y, yt) ||
      !walks_over(&e->walk, 1, y, yt))
    return false;
  *act = e->act;
  return true;
}

static EwOp *ew_new(EwKind kind, const Tensor *over, const char *api) {
  EwOp *e = op_new(sizeof *e, run_ew, api);
  if (!e)
    return NULL;
  e->kind = kind;
  walk_init(&e->walk, over->rank, over->dims, dnn_type_size(over->type));
  return e;
}

static bool is_float(const Tensor *t) {
  return t->type == CUDNN_DATA_FLOAT;
}

/* Points a run's copy of a 16-bit op's float walk at its operands' float
 * copies: the args are the walk's operands, in order. */
static void ew_bind(Op *inner, void *const *ptrs) {
  EwOp *e = (EwOp *)inner;
  for (int k = 0; k < e->walk.nops; k++)
    e->walk.base[k] = ptrs[k];
}

/* The op to queue for e, an element-wise op over the float views
 * (dnn_float_view) of the `nargs` tensors of args: e itself when they are
 * all float, else a half_op_new op that runs it over float copies. NULL
 * when out of memory (e is then freed). */
static Op *ew_queued(EwOp *e, const HalfArg *args, int nargs) {
  for (int i = 0; i < nargs; i++)
    if (args[i].store != STORE_F32)
      return half_op_new(&e->op, sizeof *e, ew_bind, args, nargs);
  return &e->op;
}

cudnnStatus_t cudnnActivationForward(cudnnHandle_t handle,
                                     cudnnActivationDescriptor_t activationDesc,
                                     const void *alpha, const cudnnTensorDescriptor_t xDesc,
                                     const void *x, const void *beta,
                                     const cudnnTensorDescriptor_t yDesc, void *y) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !activationDesc || !alpha || !beta || !xDesc || !x || !yDesc || !y)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (!activationDesc->set)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  const Tensor *xt = &xDesc->t, *yt = &yDesc->t;
  if (!xt->rank || !yt->rank)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  if (!same_dims(xt, yt))
    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  /* cuDNN: BAD_PARAM when x's data type differs from y's. */
  cudnnStatus_t st = check_pair_type(xt, yt);
  if (st)
    return st;
  Tensor xf = dnn_float_view(xt), yf = dnn_float_view(yt);
  EwOp *e = ew_new(EW_ACTIVATION, &yf, "cudnnActivationForward");
  if (!e)
    return CUDNN_STATUS_ALLOC_FAILED;
  e->act = (Act){.mode = activationDesc->mode, .coef = (float)activationDesc->coef,
                 .swish_beta = (float)activationDesc->swish_beta};
  float b = *(const float *)beta;
  e->alpha = *(const float *)alpha;
  e->beta = b;
  walk_add(&e->walk, x, xf.strides);
  walk_add(&e->walk, y, yf.strides);
  HalfArg args[2] = {dnn_half_arg(x, xt, true, false), dnn_half_arg(y, yt, b != 0, true)};
  Op *op = ew_queued(e, args, 2);
  if (!op)
    return CUDNN_STATUS_ALLOC_FAILED;
  span_tensor(op, x, xt, false);
  span_output(op, y, yt, b);
  return dnn_submit(handle, op, DNN_ACTIVATION);
}

/*
 * The data types cudnnOpTensor takes (cuDNN's table, with the descriptor's
 * compute type FLOAT; DOUBLE and INT8 rows aside, which are not computed
 * here): A, B and C of one type, or A and B FLOAT and C HALF or BFLOAT16.
 * The table has no row from 16-bit inputs to a FLOAT C (only INT8 inputs
 * widen), so that is refused, as are HALF into BFLOAT16 and the reverse.
 */
static bool op_tensor_types(cudnnDataType_t a, cudnnDataType_t b, cudnnDataType_t c) {
  if (a != b || !dnn_float_type(a) || !dnn_float_type(c))
    return false;
  return c == a || a == CUDNN_DATA_FLOAT;
}

cudnnStatus_t cudnnOpTensor(cudnnHandle_t handle, const cudnnOpTensorDescriptor_t opTensorDesc,
                            const void *alpha1, const cudnnTensorDescriptor_t aDesc,
                            const void *A, const void *alpha2,
                            const cudnnTensorDescriptor_t bDesc, const void *B,
                            const void *beta, const cudnnTensorDescriptor_t cDesc, void *C) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !opTensorDesc || !alpha1 || !alpha2 || !beta || !aDesc || !A || !cDesc || !C)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  bool unary = opTensorDesc->op == CUDNN_OP_TENSOR_SQRT || opTensorDesc->op == CUDNN_OP_TENSOR_NOT;
  if (!unary && (!bDesc || !B))
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  const Tensor *at = &aDesc->t, *ct = &cDesc->t, *bt = unary ? at : &bDesc->t;
  if (!opTensorDesc->set || !at->rank || !bt->rank || !ct->rank)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  if (!op_tensor_types(at->type, bt->type, ct->type))
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  Tensor af = dnn_float_view(at), bf = dnn_float_view(bt), cf = dnn_float_view(ct);
  long long as[MAX_DIMS], bs[MAX_DIMS];
  if (!broadcast_strides(&af, ct->rank, ct->dims, as) ||
      !broadcast_strides(&bf, ct->rank, ct->dims, bs))
    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  EwOp *e = ew_new(EW_OP_TENSOR, &cf, "cudnnOpTensor");
  if (!e)
    return CUDNN_STATUS_ALLOC_FAILED;
  float b = *(const float *)beta;
  e->optensor = opTensorDesc->op;
  e->alpha = *(const float *)alpha1;
  e->alpha2 = *(const float *)alpha2;
  e->beta = b;
  walk_add(&e->walk, A, as);
  walk_add(&e->walk, unary ? A : B, unary ? as : bs);
  walk_add(&e->walk, C, cf.strides);
  /* A unary op reads A as its B as well: two copies of A, simply. */
  HalfArg args[3] = {dnn_half_arg(A, at, true, false),
                     dnn_half_arg(unary ? A : B, bt, true, false),
                     dnn_half_arg(C, ct, b != 0, true)};
  Op *op = ew_queued(e, args, 3);
  if (!op)
    return CUDNN_STATUS_ALLOC_FAILED;
  span_tensor(op, A, at, false);
  if (!unary)
    span_tensor(op, B, bt, false);
  span_output(op, C, ct, b);
  return dnn_submit(handle, op, DNN_OP_TENSOR);
}

cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void *alpha,
                             const cudnnTensorDescriptor_t aDesc, const void *A, const void *beta,
                             const cudnnTensorDescriptor_t cDesc, void *C) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !alpha || !beta || !aDesc || !A || !cDesc || !C)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  const Tensor *at = &aDesc->t, *ct = &cDesc->t;
  if (!at->rank || !ct->rank)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  /* cuDNN: BAD_PARAM when the two descriptors' data types differ. */
  cudnnStatus_t st = check_pair_type(at, ct);
  if (st)
    return st;
  Tensor af = dnn_float_view(at), cf = dnn_float_view(ct);
  long long as[MAX_DIMS];
  if (!broadcast_strides(&af, ct->rank, ct->dims, as))
    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  EwOp *e = ew_new(EW_ADD, &cf, "cudnnAddTensor");
  if (!e)
    return CUDNN_STATUS_ALLOC_FAILED;
  float b = *(const float *)beta;
  e->alpha = *(const float *)alpha;
  e->beta = b;
  walk_add(&e->walk, A, as);
  walk_add(&e->walk, C, cf.strides);
  HalfArg args[2] = {dnn_half_arg(A, at, true, false), dnn_half_arg(C, ct, b != 0, true)};
  Op *op = ew_queued(e, args, 2);
  if (!op)
    return CUDNN_STATUS_ALLOC_FAILED;
  span_tensor(op, A, at, false);
  span_output(op, C, ct, b);
  return dnn_submit(handle, op, DNN_OP_TENSOR);
}

static cudnnStatus_t fill(cudnnHandle_t handle, const cudnnTensorDescriptor_t yDesc, void *y,
                          const void *value, EwKind kind, const char *api) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !yDesc || !y || !value)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  const Tensor *yt = &yDesc->t;
  if (!yt->rank)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  if (!is_float(yt))
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  EwOp *e = ew_new(kind, yt, api);
  if (!e)
    return CUDNN_STATUS_ALLOC_FAILED;
  e->alpha = *(const float *)value;
  walk_add(&e->walk, y, yt->strides);
  if (kind == EW_SCALE)
    span_tensor(&e->op, y, yt, false);
  span_tensor(&e->op, y, yt, true);
  return dnn_submit(handle, &e->op, DNN_FILL);
}

cudnnStatus_t cudnnScaleTensor(cudnnHandle_t handle, const cudnnTensorDescriptor_t yDesc, void *y,
                               const void *alpha) {
  return fill(handle, yDesc, y, alpha, EW_SCALE, "cudnnScaleTensor");
}

cudnnStatus_t cudnnSetTensor(cudnnHandle_t handle, const cudnnTensorDescriptor_t yDesc, void *y,
                             const void *valuePtr) {
  return fill(handle, yDesc, y, valuePtr, EW_SET, "cudnnSetTensor");
}

cudnnStatus_t cudnnTransformTensor(cudnnHandle_t handle, const void *alpha,
                                   const cudnnTensorDescriptor_t xDesc, const void *x,
                                   const void *beta, const cudnnTensorDescriptor_t yDesc, void *y) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !alpha || !beta || !xDesc || !x || !yDesc || !y)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  const Tensor *xt = &xDesc->t, *yt = &yDesc->t;
  if (!xt->rank || !yt->rank)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  if (!same_dims(xt, yt))
    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  float a = *(const float *)alpha, b = *(const float *)beta;
  /* Other element types are only moved, never scaled. */
  bool copy = a == 1 && b == 0;
  if (xt->type != yt->type || (!is_float(xt) && !copy))
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  EwOp *e = ew_new(copy ? EW_COPY : EW_ADD, yt, "cudnnTransformTensor");
  if (!e)
    return CUDNN_STATUS_ALLOC_FAILED;
  e->alpha = a;
  e->beta = b;
  walk_add(&e->walk, x, xt->strides);
  walk_add(&e->walk, y, yt->strides);
  span_tensor(&e->op, x, xt, false);
  span_output(&e->op, y, yt, b);
  return dnn_submit(handle, &e->op, DNN_TRANSFORM);
}

/* ---- batch normalisation (inference) ---- */

typedef struct BnOp {
  EwOp ew; /* an EW_AFFINE walk; operands 1 and 2 are set on each run */
  const float *gamma, *bias, *mean, *var;
  Tensor param; /* the layout of the four parameter tensors */
  float eps;
} BnOp;

/*
 * Folds the parameters into y = s * x + t, s = gamma / sqrt(var + eps) and
 * t = bias - mean * s, packed in the parameters' shape. This happens on
 * every run: a replayed graph must see the parameters' current values.
 */
static void run_bn(Op *op) {
  BnOp *bn = (BnOp *)op;
  const Tensor *p = &bn->param;
  long long count = tensor_count(p);
  float *scale = scratch(0, count * sizeof(float));
  float *shift = scratch(1, count * sizeof(float));
  if (!scale || !shift) {
    rt_fail_async(op->api);
    return;
  }
  long long idx[MAX_DIMS] = {0};
  for (long long i = 0; i < count; i++) {
    long long off = 0;
    for (int d = 0; d < p->rank; d++)
      off += idx[d] * p->strides[d];
    scale[i] = bn->gamma[off] / sqrtf(bn->var[off] + bn->eps);
    shift[i] = bn->bias[off] - bn->mean[off] * scale[i];
    for (int d = p->rank - 1; d >= 0; d--) {
      if (++idx[d] < p->dims[d])
        break;
      idx[d] = 0;
    }
  }
  Walk w = bn->ew.walk;
  w.base[1] = (char *)scale;
  w.base[2] = (char *)shift;
  walk_run(&w, ew_row, &bn->ew);
}

_Static_assert(sizeof(BnOp) <= OP_PLAN_BYTES, "a 16-bit batch norm runs a copy of its BnOp");

/* Points a run's copy of a 16-bit batch norm at the float copies of x and
 * y (the args), the walk's operands 0 and 3; the parameters are float and
 * used where they are. */
static void bn_bind(Op *inner, void *const *ptrs) {
  BnOp *bn = (BnOp *)inner;
  bn->ew.walk.base[0] = ptrs[0];
  bn->ew.walk.base[3] = ptrs[1];
}

cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t yDesc,
    void *y, const cudnnTensorDescriptor_t bnDesc, const void *bnScale, const void *bnBias,
    const void *estimatedMean, const void *estimatedVariance, double epsilon) {
  if (dnn_enter())
    return CUDNN_STATUS_EXECUTION_FAILED;
  if (!handle || !alpha || !beta || !xDesc || !x || !yDesc || !y || !bnDesc || !bnScale ||
      !bnBias || !estimatedMean || !estimatedVariance)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  const Tensor *xt = &xDesc->t, *yt = &yDesc->t, *pt = &bnDesc->t;
  if (!pt->rank)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  if (!xt->rank || !yt->rank)
    return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  if (!same_dims(xt, yt) || xt->rank < 3)
    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  /* x and y: both FLOAT, both HALF or both BFLOAT16; BAD_PARAM when their
   * types differ (cuDNN: "data types mismatch for xDesc, yDesc"). The
   * parameters are FLOAT for all three, as cudnnDeriveBNTensorDescriptor
   * derives them for HALF (and BFLOAT16) data; 16-bit parameters are
   * NOT_SUPPORTED_DATA_TYPE. 16-bit x and y run the float op over packed
   * float copies (half_op_new). */
  cudnnStatus_t st = check_pair_type(xt, yt);
  if (st)
    return st;
  if (!is_float(pt))
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  if (epsilon < 1e-5 - 1e-12)
    return CUDNN_STATUS_BAD_PARAM; /* CUDNN_BN_MIN_EPSILON */
  /* Spatial: parameters are 1 x C x 1 ...; per activation: 1 x C x H ... */
  if (pt->rank != xt->rank || pt->dims[0] != 1 || pt->dims[1] != xt->dims[1])
    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  for (int i = 2; i < xt->rank; i++) {
    long long want = mode == CUDNN_BATCHNORM_PER_ACTIVATION ? xt->dims[i] : 1;
    if (pt->dims[i] != want)
      return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  }
  if (mode != CUDNN_BATCHNORM_PER_ACTIVATION && mode != CUDNN_BATCHNORM_SPATIAL &&
      mode != CUDNN_BATCHNORM_SPATIAL_PERSISTENT)
    return CUDNN_STATUS_BAD_PARAM;
  BnOp *bn = op_new(sizeof *bn, run_bn, "cudnnBatchNormalizationForwardInference");
  if (!bn)
    return CUDNN_STATUS_ALLOC_FAILED;
  bn->gamma = bnScale;
  bn->bias = bnBias;
  bn->mean = estimatedMean;
  bn->var = estimatedVariance;
  bn->param = *pt;
  bn->eps = (float)epsilon;
  EwOp *e = &bn->ew;
  e->kind = EW_AFFINE;
  e->alpha = *(const float *)alpha;
  e->beta = *(const float *)beta;
  Tensor xf = dnn_float_view(xt), yf = dnn_float_view(yt);
  walk_init(&e->walk, xt->rank, xt->dims, sizeof(float));
  /* The folded arrays are packed in the parameters' shape, broadcast over x. */
  long long packed[MAX_DIMS], stride = 1;
  for (int i = pt->rank - 1; i >= 0; i--) {
    packed[i] = pt->dims[i] == 1 ? 0 : stride;
    stride *= pt->dims[i];
  }
  walk_add(&e->walk, x, xf.strides);
  walk_add(&e->walk, NULL, packed);
  walk_add(&e->walk, NULL, packed);
  walk_add(&e->walk, y, yf.strides);
  float b = e->beta;
  Op *op = &e->op;
  if (xt->type != CUDNN_DATA_FLOAT) {
    HalfArg args[2] = {dnn_half_arg(x, xt, true, false), dnn_half_arg(y, yt, b != 0, true)};
    op = half_op_new(&e->op, sizeof *bn, bn_bind, args, 2);
    if (!op)
      return CUDNN_STATUS_ALLOC_FAILED;
  }
  span_tensor(op, x, xt, false);
  span_tensor(op, bnScale, pt, false);
  span_tensor(op, bnBias, pt, false);
  span_tensor(op, estimatedMean, pt, false);
  span_tensor(op, estimatedVariance, pt, false);
  span_output(op, y, yt, b);
  return dnn_submit(handle, op, DNN_BATCH_NORM);
}
