/*
 * ops_cudnn.c - operators printed as cuDNN calls: convolutions, pooling,
 * normalisation, softmax, activations, broadcasting arithmetic and
 * reductions. Each has a `supports` test: what cuDNN cannot express goes to
 * opc's own kernels (emit_kernels.c).
 */
#include <math.h>
#include <string.h>

#include "emit.h"

/* Tensor cores under --precision tf32, and for 16-bit data, which they
   take with float32 accumulation. */
static const char *math_type(Emitter *e, const Node *n) {
  return e->opt->tf32 || node_in_half(n) ? "CUDNN_TENSOR_OP_MATH" : "CUDNN_FMA_MATH";
}

static const char *desc_of(Emitter *e, const Node *n, const char *what, const Tensor *t) {
  return emit_tensor_desc_of(e, n, what, t, 4, false);
}

static void contiguous_strides(int rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
}

/* A descriptor of dims (1, c, 1, ...): per-channel parameters. */
static const char *channel_desc(Emitter *e, const Node *n, const char *what, int64_t channels,
                                int rank) {
  int64_t dims[IR_MAX_RANK], strides[IR_MAX_RANK];
  for (int i = 0; i < rank; i++)
    dims[i] = 1;
  dims[1] = channels;
  contiguous_strides(rank, dims, strides);
  return emit_tensor_desc(e, n, what, rank, dims, strides, 4, false);
}

static const char *double_literal(Emitter *e, double v) {
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%.17g", v);
  if (!strpbrk(tmp, ".en"))
    strcat(tmp, ".0");
  return emit_str(e, "%s", tmp);
}

/* Raises the node stream's workspace to `bytes_expr` (a size_t lvalue). */
static void grow_workspace(Emitter *e, const Node *n, const char *bytes_expr) {
  const char *ws = node_workspace_bytes(e, n);
  emit(e, "if (%s > %s)", bytes_expr, ws);
  emit(e, "  %s = %s;", ws, bytes_expr);
}

/* ------------------------------------------------- fused activations */

/* Every activation a row of ops.def names: cuDNN's own (act_setup) or
   opc's kernel after the call. */
bool act_supported(const Node *n) { return n->act == OPC_ACT_NONE || act_op(n->act) != OP_INVALID; }

static const char *op_tensor_desc(Emitter *e, const Node *n, const char *what, const char *op) {
  const char *d = emit_desc(e, n, "OpTensor", what);
  emit_call(e, LIB_CUDNN, n, "cudnnSetOpTensorDescriptor(%s, %s, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN)",
            d, op);
  return d;
}

static const char *activation_desc(Emitter *e, const Node *n, const char *mode, double coef) {
  const char *d = emit_desc(e, n, "Activation", "act");
  emit_call(e, LIB_CUDNN, n, "cudnnSetActivationDescriptor(%s, %s, CUDNN_PROPAGATE_NAN, %s)", d, mode,
            double_literal(e, coef));
  return d;
}

/* cuDNN applies the fused activations whose rows name a cuDNN mode (ops.def's
   cudnn column) itself, but for clipped ReLU only from 0 to a finite bound;
   opc's kernels apply the others (act_run). */
void act_setup(Emitter *e, const Node *n, ActPlan *p) {
  memset(p, 0, sizeof *p);
  const char *mode = n->act == OPC_ACT_NONE ? NULL : op_cudnn(act_op(n->act));
  if (!mode)
    return;
  if (n->act != OPC_ACT_CLIP)
    p->act = activation_desc(e, n, mode, 0);
  else if (n->act_alpha == 0 && isfinite(n->act_beta))
    p->act = activation_desc(e, n, mode, n->act_beta);
}

void act_run(Emitter *e, const Node *n, const ActPlan *p, const char *ydesc, const char *y) {
  if (n->act == OPC_ACT_NONE)
    return;
  if (p->act) {
    emit_call(e, LIB_CUDNN, n, "cudnnActivationForward(%s, %s, %s, %s, %s, %s, %s, %s)",
              node_cudnn(e, n), p->act, emit_scalar(e, 1), ydesc, y, emit_scalar(e, 0), ydesc, y);
    return;
  }
  /* Activations whose row names no cuDNN mode (SiLU among them: cuDNN's
     swish mode is not documented for cudnnActivationForward) and clip with
     a lower bound other than 0: opc's kernel. */
  emit_kernel_activation(e, n, n->out[0]);
}

/* -------------------------------------------------------- convolution */

/*
 * Conv and ConvTranspose in cuDNN's terms: 1-D becomes 2-D with H = 1, and
 * padding cuDNN cannot express (asymmetric) moves into a zero-padded copy
 * of the input (Conv) or a larger output that is then cropped (ConvTranspose).
 */
typedef struct ConvPlan {
  int nsp;                 /* spatial dims given to cuDNN: 2 or 3 */
  int64_t x[5], w[5], y[5];      /* dims in cuDNN order */
  int64_t xs[5], ys[5];          /* strides of x and y */
  int64_t pad[3], stride[3], dil[3];
  int64_t scratch[5];      /* padded input (Conv) or full output (ConvTranspose) */
  int64_t scratch_offset;  /* where x (Conv) or y (ConvTranspose) starts in it */
  bool use_scratch;
  bool fused;              /* cudnnConvolutionBiasActivationForward, where cuDNN accepts it */
  bool bias_is_zero;       /* the bias exists only for the fused call */
  bool epilogue;           /* bias, residual and activation in one opc_conv_epilogue */
  bool channels_last;      /* NHWC filter (choose-layout), with NHWC x and y */
  const char *xd, *wd, *yd, *bd, *zd, *cd, *sd, *vd, *algo, *scratch_ptr, *bias;
  const char *form;        /* the context field of the form create() chose */
  ActPlan act;
} ConvPlan;

/* Channels innermost (NHWC, or a channel slice of it), as an NHWC filter
   wants its data. */
static bool channels_inner(const Tensor *t) {
  return t->rank >= 3 && (t->dims[1] == 1 || t->strides[1] == 1);
}

/* Spreads a tensor's dims and strides into cuDNN's layout (H = 1 for 1-D). */
static void conv_layout(const Tensor *t, int nspatial, int64_t *dims, int64_t *strides) {
  dims[0] = t->dims[0];
  dims[1] = t->dims[1];
  strides[0] = t->strides[0];
  strides[1] = t->strides[1];
  if (nspatial == 1) {
    dims[2] = 1;
    dims[3] = t->dims[2];
    strides[3] = t->strides[2];
    strides[2] = t->dims[2] * t->strides[2];
  } else {
    for (int i = 0; i < nspatial; i++) {
      dims[2 + i] = t->dims[2 + i];
      strides[2 + i] = t->strides[2 + i];
    }
  }
}

static bool plan_conv(const Node *n, ConvPlan *p) {
  memset(p, 0, sizeof *p);
  const Window *win = &n->win;
  const Tensor *x = n->in[0], *w = n->in[1], *y = n->out[0];
  int ns = win->nspatial;
  if (ns < 1 || ns > 3 || x->rank != ns + 2 || w->rank != ns + 2 || y->rank != ns + 2)
    return false;
  p->nsp = ns == 1 ? 2 : ns;
  int64_t ws[5];
  conv_layout(x, ns, p->x, p->xs);
  conv_layout(w, ns, p->w, ws);
  conv_layout(y, ns, p->y, p->ys);
  bool transpose = n->op == OP_CONV_TRANSPOSE;
  /* A 1x1 or one-channel filter is the same in both orders: the data says. */
  p->channels_last = !buffer_is_contiguous(w) || (!buffer_is_contiguous(x) && channels_inner(x)) ||
                     (!buffer_is_contiguous(y) && channels_inner(y));
  for (int i = 0; i < p->nsp; i++) {
    int k = ns == 1 ? i - 1 : i; /* the model's spatial index; -1 for the added H */
    p->stride[i] = k < 0 ? 1 : win->stride[k];
    p->dil[i] = k < 0 ? 1 : win->dilation[k] ? win->dilation[k] : 1;
    int64_t pb = k < 0 ? 0 : win->pad_begin[k], pe = k < 0 ? 0 : win->pad_end[k];
    int64_t op = k < 0 || !transpose ? 0 : win->output_padding[k];
    if (pb < 0 || pe < 0)
      return false;
    if (!transpose && pb != pe)
      p->use_scratch = true;
    /* ConvTranspose fits cuDNN's output size rule directly when the extra
       end rows come from output_padding within one stride. */
    if (transpose && (pb - pe + op < 0 || pb - pe + op >= p->stride[i]))
      p->use_scratch = true;
    p->pad[i] = pb;
  }
  if (p->use_scratch) {
    int64_t offset = 0, size = 1;
    p->scratch[0] = transpose ? p->y[0] : p->x[0];
    p->scratch[1] = transpose ? p->y[1] : p->x[1];
    for (int i = p->nsp - 1; i >= 0; i--) {
      int k = ns == 1 ? i - 1 : i;
      int64_t pb = k < 0 ? 0 : win->pad_begin[k], pe = k < 0 ? 0 : win->pad_end[k];
      int64_t len;
      if (!transpose) {
        len = p->x[2 + i] + pb + pe;
      } else {
        int64_t full = (p->x[2 + i] - 1) * p->stride[i] + p->dil[i] * (p->w[2 + i] - 1) + 1;
        len = full > pb + p->y[2 + i] ? full : pb + p->y[2 + i];
      }
      p->scratch[2 + i] = len;
      offset += pb * size;
      size *= len;
      p->pad[i] = 0;
    }
    p->scratch_offset = offset;
  }
  return true;
}

static bool conv_supports(Emitter *e, const Node *n) {
  (void)e;
  ConvPlan p;
  if (!plan_conv(n, &p) || !act_supported(n))
    return false;
  /* The padded copy is float32 (cudnnTransformTensor into it). */
  if (node_in_half(n) && p.use_scratch)
    return false;
  /* An NHWC filter is 2-D, stored K, R, S, C, for NHWC data, and 16-bit:
     float32 data channels-last is the CPU target's (kernels_conv.c). */
  if (p.channels_last && (!node_in_half(n) || n->op != OP_CONV || p.use_scratch || n->win.nspatial != 2 ||
                          !tensor_is_channels_last(n->in[1]) || !channels_inner(n->in[0]) ||
                          !channels_inner(n->out[0]) ||
                          (node_input(n, 3) && !channels_inner(n->in[3]))))
    return false;
  /* A fused residual or activation is only printed for Conv. */
  if (n->op == OP_CONV_TRANSPOSE && (n->act != OPC_ACT_NONE || node_input(n, 3)))
    return false;
  return true;
}

static void conv_descriptors(Emitter *e, Node *n, ConvPlan *p) {
  int rank = p->nsp + 2;
  bool transpose = n->op == OP_CONV_TRANSPOSE;
  ConvShape shape = {.nspatial = p->nsp, .x = p->x, .x_strides = p->xs, .y = p->y,
                     .y_strides = p->ys, .filter = p->w, .filter_nhwc = p->channels_last,
                     .pad = p->pad, .stride = p->stride, .dilation = p->dil,
                     .groups = n->win.group > 1 ? n->win.group : 1, .math = math_type(e, n)};
  const char *descs = emit_conv_descs(e, n, &shape);
  p->xd = emit_str(e, "%s.x", descs);
  p->yd = emit_str(e, "%s.y", descs);
  p->wd = emit_str(e, "%s.filter", descs);
  p->cd = emit_str(e, "%s.conv", descs);
  if (p->use_scratch) {
    int64_t sstrides[5];
    contiguous_strides(rank, p->scratch, sstrides);
    const char *field = emit_unique(e, emit_str(e, "%s_%s", node_id(e, n), transpose ? "full" : "padded"));
    int64_t count = 1;
    for (int i = 0; i < rank; i++)
      count *= p->scratch[i];
    emit_to(e, SEC_FIELDS, "float *%s; /* %s */", field,
            transpose ? "the uncropped output" : "the input with its asymmetric padding");
    emit_call(e, LIB_CUDA, n, "cudaMalloc((void **)&c->%s, %lld * sizeof(float))", field,
              (long long)count);
    emit_to(e, SEC_TEARDOWN, "cudaFree(c->%s);", field);
    p->scratch_ptr = emit_str(e, "c->%s", field);
    p->sd = emit_tensor_desc(e, n, transpose ? "full" : "padded", rank, p->scratch, sstrides, 4, false);
    /* The part of the scratch that x (or y) occupies. */
    p->vd = emit_tensor_desc(e, n, transpose ? "crop" : "interior", rank, transpose ? p->y : p->x,
                             sstrides, 4, false);
  }
}

static void conv_setup(Emitter *e, Node *n) {
  ConvPlan *p = node_data(e, n, sizeof(ConvPlan));
  plan_conv(n, p);
  conv_descriptors(e, n, p);
  int rank = p->nsp + 2;
  const Tensor *b = node_input(n, 2), *z = node_input(n, 3);
  if (b || n->act == OPC_ACT_RELU) {
    p->bd = channel_desc(e, n, "b", p->y[1], rank);
    p->bias = b ? buf(e, b) : NULL;
  }
  if (z)
    p->zd = desc_of(e, n, "z", z);
  /* Conv + bias + residual + relu is one cuDNN call, when cuDNN accepts it
     for this problem; create() tries it (choose_form) and records the form. */
  p->fused = n->act == OPC_ACT_RELU;
  if (p->fused) {
    if (!b) { /* cuDNN's bias has the data's type; zeros are zero bits in each */
      float *zeros = arena_alloc(e->g->arena, sizeof(float) * (size_t)p->y[1]);
      p->bias = weights_add_typed(e, emit_str(e, "%s_zero_bias", node_id(e, n)),
                                  node_data_type(n), zeros, p->y[1]);
      p->bias_is_zero = true;
    }
  }
  /* A bias with a residual or an activation after it: one pass of opc's
     kernel for what would be two or three of cuDNN's (the fused call's
     fallback included, which then needs no activation descriptor). */
  p->epilogue = b && (z || n->act != OPC_ACT_NONE);
  if (!p->epilogue || p->fused)
    act_setup(e, n, &p->act);
  const char *algo = emit_unique(e, emit_str(e, "%s_algo", node_id(e, n)));
  emit_to(e, SEC_FIELDS, "cudnnConvolutionFwdAlgo_t %s;", algo);
  p->algo = emit_str(e, "c->%s", algo);
  used(e)->pick_conv_algo = true;
  used(e)->workspace = true;
  const char *x = p->use_scratch ? p->sd : p->xd;
  emit(e, "if (!pick_conv_algo(c, %s, %s, %s, %s, %s, &%s, &%s)) {", node_cudnn(e, n), x, p->wd,
       p->cd, p->yd, p->algo, node_workspace_bytes(e, n));
  emit(e, "  return -1;");
  emit(e, "}");
  if (p->fused) {
    used(e)->conv_forms = true;
    const char *form = emit_unique(e, emit_str(e, "%s_form", node_id(e, n)));
    emit_to(e, SEC_FIELDS, "int %s; /* FORM_FUSED, FORM_FUSED_PRECOMP or FORM_SEPARATE */", form);
    p->form = emit_str(e, "c->%s", form);
    emit_record_form(e, n, p->form);
    emit(e, "if (!precomp_workspace(c, %s, %s, %s, %s, %s, &%s)) {", node_cudnn(e, n), x, p->wd,
         p->cd, p->yd, node_workspace_bytes(e, n));
    emit(e, "  return -1;");
    emit(e, "}");
  }
}

/*
 * fused_<node>(c, algo): the one-call form of a convolution with fused bias,
 * residual and relu, returning cuDNN's status, so that create() can try it
 * (choose_form) and the run code can issue it.
 */
static void emit_fused_conv(Emitter *e, Node *n, ConvPlan *p, const char *xd, const char *x) {
  const Tensor *z = node_input(n, 3);
  const char *fn = emit_str(e, "fused_%s", node_id(e, n));
  const char *y = buf(e, n->out[0]);
  FILE *saved = e->f;
  int indent = e->indent;
  e->f = e->st->sec[SEC_SETUP];
  e->indent = 0;
  emit(e, "/* %s: conv, bias%s and relu in one call */", comment_text(e, n->name), z ? ", residual" : "");
  emit(e, "static cudnnStatus_t %s(%s_ctx *c, cudnnConvolutionFwdAlgo_t algo)", fn, e->prefix);
  emit_open(e, "{");
  emit(e, "return cudnnConvolutionBiasActivationForward(");
  e->indent += 2;
  emit(e, "%s, %s, %s, %s, %s, %s, %s, algo,", node_cudnn(e, n), emit_scalar(e, 1), xd, x, p->wd,
       buf(e, n->in[1]), p->cd);
  emit(e, "%s, %s, %s, %s, %s,", node_workspace(e, n), node_workspace_bytes(e, n),
       emit_scalar(e, z ? 1 : 0), z ? p->zd : p->yd, z ? buf(e, z) : y);
  emit(e, "%s, %s, %s, %s, %s);", p->bd, p->bias, p->act.act, p->yd, y);
  e->indent -= 2;
  emit_close(e, "}");
  emit_blank(e);
  e->f = saved;
  e->indent = indent;
  emit_to(e, SEC_PREPARE, "c->node = \"%s\";", emit_node_label(e, n));
  if (e->cpu_code)
    emit_to(e, SEC_PREPARE, "c->cpu_node = c->node;");
  if (emit_multi_gpu(e)) {
    emit_to(e, SEC_PREPARE, "if (!cuda_ok(c, cudaSetDevice(c->gpu[%d]), \"cudaSetDevice\")) {",
            node_sched(e->g, n)->device);
    emit_to(e, SEC_PREPARE, "  goto fail;");
    emit_to(e, SEC_PREPARE, "}");
  }
  emit_to(e, SEC_PREPARE, "if (!choose_form(c, %s, %s, %s, &%s)) {", fn, p->algo, node_stream(e, n),
          p->form);
  emit_to(e, SEC_PREPARE, "  %s;", e->cpu_code ? emit_cpu_setup_fail(e) : "goto fail");
  emit_to(e, SEC_PREPARE, "}");
}

static void conv_run(Emitter *e, Node *n) {
  ConvPlan *p = node_data(e, n, sizeof(ConvPlan));
  const char *h = node_cudnn(e, n);
  const char *x = buf(e, n->in[0]), *w = buf(e, n->in[1]), *y = buf(e, n->out[0]);
  const char *xd = p->xd;
  if (p->use_scratch) {
    int64_t count = 1;
    for (int i = 0; i < p->nsp + 2; i++)
      count *= p->scratch[i];
    emit_call(e, LIB_CUDA, n, "cudaMemsetAsync(%s, 0, %lld * sizeof(float), %s)", p->scratch_ptr,
              (long long)count, node_stream(e, n));
    emit_call(e, LIB_CUDNN, n, "cudnnTransformTensor(%s, %s, %s, %s, %s, %s, %s + %lld)", h,
              emit_scalar(e, 1), p->xd, x, emit_scalar(e, 0), p->vd, p->scratch_ptr,
              (long long)p->scratch_offset);
    x = p->scratch_ptr;
    xd = p->sd;
  }
  const Tensor *z = node_input(n, 3);
  if (p->fused) {
    emit_fused_conv(e, n, p, xd, x);
    const char *fn = emit_str(e, "fused_%s", node_id(e, n));
    emit(e, "if (%s == FORM_FUSED) {", p->form);
    emit(e, "  return cudnn_ok(c, %s(c, %s),", fn, p->algo);
    emit(e, "                  \"cudnnConvolutionBiasActivationForward\") ? 0 : -1;");
    emit(e, "}");
    emit(e, "if (%s == FORM_FUSED_PRECOMP) {", p->form);
    emit(e, "  return cudnn_ok(c, %s(c, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM),", fn);
    emit(e, "                  \"cudnnConvolutionBiasActivationForward\") ? 0 : -1;");
    emit(e, "}");
  }
  emit_call(e, LIB_CUDNN, n, "cudnnConvolutionForward(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            h, emit_scalar(e, 1), xd, x, p->wd, w, p->cd, p->algo, node_workspace(e, n),
            node_workspace_bytes(e, n), emit_scalar(e, 0), p->yd, y);
  if (p->epilogue) {
    emit_conv_epilogue(e, n, p->bias, z);
    return;
  }
  if (p->bias && !p->bias_is_zero)
    emit_call(e, LIB_CUDNN, n, "cudnnAddTensor(%s, %s, %s, %s, %s, %s, %s)", h, emit_scalar(e, 1),
              p->bd, p->bias, emit_scalar(e, 1), p->yd, y);
  if (z)
    emit_call(e, LIB_CUDNN, n, "cudnnAddTensor(%s, %s, %s, %s, %s, %s, %s)", h, emit_scalar(e, 1),
              p->zd, buf(e, z), emit_scalar(e, 1), p->yd, y);
  act_run(e, n, &p->act, p->yd, y);
}

const OpEmitter cudnn_conv = {
    .setup = conv_setup, .run = conv_run, .supports = conv_supports, .half = true};

/* ConvTranspose is the gradient of a convolution with respect to its input. */
static void deconv_setup(Emitter *e, Node *n) {
  ConvPlan *p = node_data(e, n, sizeof(ConvPlan));
  plan_conv(n, p);
  conv_descriptors(e, n, p);
  const Tensor *b = node_input(n, 2);
  if (b) {
    p->bd = channel_desc(e, n, "b", p->y[1], p->nsp + 2);
    p->bias = buf(e, b);
  }
  const char *algo = emit_unique(e, emit_str(e, "%s_algo", node_id(e, n)));
  emit_to(e, SEC_FIELDS, "cudnnConvolutionBwdDataAlgo_t %s;", algo);
  p->algo = emit_str(e, "c->%s", algo);
  used(e)->pick_deconv_algo = true;
  used(e)->workspace = true;
  emit(e, "if (!pick_deconv_algo(c, %s, %s, %s, %s, %s, &%s, &%s))", node_cudnn(e, n), p->wd,
       p->xd, p->cd, p->use_scratch ? p->sd : p->yd, p->algo, node_workspace_bytes(e, n));
  emit(e, "  return -1;");
}

static void deconv_run(Emitter *e, Node *n) {
  ConvPlan *p = node_data(e, n, sizeof(ConvPlan));
  const char *h = node_cudnn(e, n);
  const char *x = buf(e, n->in[0]), *w = buf(e, n->in[1]), *y = buf(e, n->out[0]);
  emit_call(e, LIB_CUDNN, n,
            "cudnnConvolutionBackwardData(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", h,
            emit_scalar(e, 1), p->wd, w, p->xd, x, p->cd, p->algo, node_workspace(e, n),
            node_workspace_bytes(e, n), emit_scalar(e, 0), p->use_scratch ? p->sd : p->yd,
            p->use_scratch ? p->scratch_ptr : y);
  if (p->use_scratch)
    emit_call(e, LIB_CUDNN, n, "cudnnTransformTensor(%s, %s, %s, %s + %lld, %s, %s, %s)", h,
              emit_scalar(e, 1), p->vd, p->scratch_ptr, (long long)p->scratch_offset,
              emit_scalar(e, 0), p->yd, y);
  if (p->bias)
    emit_call(e, LIB_CUDNN, n, "cudnnAddTensor(%s, %s, %s, %s, %s, %s, %s)", h, emit_scalar(e, 1),
              p->bd, p->bias, emit_scalar(e, 1), p->yd, y);
}

const OpEmitter cudnn_deconv = {
    .setup = deconv_setup, .run = deconv_run, .supports = conv_supports};

/* ------------------------------------------------------------ pooling */

typedef struct PoolPlan {
  int nsp;
  int64_t x[5], xs[5], y[5], ys[5];
  int64_t window[3], pad[3], stride[3];
  const char *xd, *yd, *pd;
} PoolPlan;

static bool plan_pool(const Node *n, PoolPlan *p) {
  memset(p, 0, sizeof *p);
  const Window *win = &n->win;
  const Tensor *x = n->in[0], *y = n->out[0];
  int ns = win->nspatial;
  if (!pool_fits_library(n))
    return false;
  p->nsp = ns == 1 ? 2 : ns;
  conv_layout(x, ns, p->x, p->xs);
  conv_layout(y, ns, p->y, p->ys);
  for (int i = 0; i < p->nsp; i++) {
    int k = ns == 1 ? i - 1 : i;
    p->window[i] = k < 0 ? 1 : win->kernel[k];
    p->stride[i] = k < 0 ? 1 : win->stride[k];
    p->pad[i] = k < 0 ? 0 : win->pad_begin[k];
  }
  return true;
}

static bool pool_supports(Emitter *e, const Node *n) {
  (void)e;
  PoolPlan p;
  return plan_pool(n, &p);
}

static void pool_setup(Emitter *e, Node *n) {
  PoolPlan *p = node_data(e, n, sizeof(PoolPlan));
  plan_pool(n, p);
  int rank = p->nsp + 2;
  p->xd = emit_tensor_desc(e, n, "x", rank, p->x, p->xs, 4, false);
  p->yd = emit_tensor_desc(e, n, "y", rank, p->y, p->ys, 4, false);
  p->pd = emit_desc(e, n, "Pooling", "pool");
  const char *mode = n->op == OP_MAX_POOL ? "CUDNN_POOLING_MAX"
                     : n->win.count_include_pad ? "CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING"
                                                : "CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING";
  emit_call(e, LIB_CUDNN, n,
            "cudnnSetPoolingNdDescriptor(%s, %s, CUDNN_PROPAGATE_NAN, %d, (const int[]){%s}, (const int[]){%s}, (const int[]){%s})",
            p->pd, mode, p->nsp, int_list(e, p->nsp, p->window), int_list(e, p->nsp, p->pad),
            int_list(e, p->nsp, p->stride));
}

static void pool_run(Emitter *e, Node *n) {
  PoolPlan *p = node_data(e, n, sizeof(PoolPlan));
  emit_call(e, LIB_CUDNN, n, "cudnnPoolingForward(%s, %s, %s, %s, %s, %s, %s, %s)", node_cudnn(e, n),
            p->pd, emit_scalar(e, 1), p->xd, buf(e, n->in[0]), emit_scalar(e, 0), p->yd,
            buf(e, n->out[0]));
}

const OpEmitter cudnn_pool = {
    .setup = pool_setup, .run = pool_run, .supports = pool_supports, .half = true};

/* --------------------------------------------------------- reductions */

typedef struct ReducePlan {
  int rank;
  int64_t x[IR_MAX_RANK], y[IR_MAX_RANK], ys[IR_MAX_RANK];
  bool identity; /* noop_with_empty_axes and no axes: a copy */
  const char *xd, *yd, *rd;
} ReducePlan;

static bool plan_reduce(const Node *n, ReducePlan *p) {
  memset(p, 0, sizeof *p);
  const Tensor *x = n->in[0], *y = n->out[0];
  if (!buffer_is_contiguous(y) || x->rank < 1)
    return false;
  bool reduce[IR_MAX_RANK] = {0};
  if (n->op == OP_GLOBAL_AVERAGE_POOL || n->op == OP_GLOBAL_MAX_POOL) {
    for (int i = 2; i < x->rank; i++)
      reduce[i] = true;
  } else {
    if (n->p.reduce.noop) {
      p->identity = true;
      return true;
    }
    for (int i = 0; i < x->rank; i++)
      reduce[i] = n->p.reduce.reduced[i];
  }
  if (x->bounded && reduce[x->bound_axis])
    return false; /* the run's length is on the device: opc's kernels read it */
  p->rank = x->rank;
  for (int i = 0; i < x->rank; i++) {
    p->x[i] = x->dims[i];
    p->y[i] = reduce[i] ? 1 : x->dims[i];
  }
  contiguous_strides(p->rank, p->y, p->ys);
  int64_t count = 1;
  for (int i = 0; i < p->rank; i++)
    count *= p->y[i];
  return count == tensor_numel(y);
}

static bool reduce_supports(Emitter *e, const Node *n) {
  (void)e;
  ReducePlan p;
  return plan_reduce(n, &p) && (!p.identity || buffer_is_contiguous(n->in[0]));
}

static void reduce_setup(Emitter *e, Node *n) {
  ReducePlan *p = node_data(e, n, sizeof(ReducePlan));
  plan_reduce(n, p);
  if (p->identity)
    return;
  const Tensor *x = n->in[0];
  p->xd = emit_tensor_desc(e, n, "x", p->rank, p->x, x->strides, 4, false);
  p->yd = emit_tensor_desc(e, n, "y", p->rank, p->y, p->ys, 4, false);
  p->rd = emit_desc(e, n, "ReduceTensor", "reduce");
  emit_call(e, LIB_CUDNN, n,
            "cudnnSetReduceTensorDescriptor(%s, %s, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN, CUDNN_REDUCE_TENSOR_NO_INDICES, CUDNN_32BIT_INDICES)",
            p->rd, op_cudnn(n->op));
  emit_open(e, "{");
  emit(e, "size_t bytes = 0;");
  emit_call(e, LIB_CUDNN, n, "cudnnGetReductionWorkspaceSize(%s, %s, %s, %s, &bytes)",
            node_cudnn(e, n), p->rd, p->xd, p->yd);
  grow_workspace(e, n, "bytes");
  emit_close(e, "}");
}

static void reduce_run(Emitter *e, Node *n) {
  ReducePlan *p = node_data(e, n, sizeof(ReducePlan));
  if (p->identity) {
    emit_call(e, LIB_CUDA, n,
              "cudaMemcpyAsync(%s, %s, %lld * sizeof(%s), cudaMemcpyDeviceToDevice, %s)",
              buf(e, n->out[0]), buf(e, n->in[0]), (long long)tensor_numel(n->out[0]),
              dtype_c_type(node_data_type(n)), node_stream(e, n));
    return;
  }
  emit_call(e, LIB_CUDNN, n, "cudnnReduceTensor(%s, %s, NULL, 0, %s, %s, %s, %s, %s, %s, %s, %s)",
            node_cudnn(e, n), p->rd, node_workspace(e, n), node_workspace_bytes(e, n),
            emit_scalar(e, 1), p->xd, buf(e, n->in[0]), emit_scalar(e, 0), p->yd,
            buf(e, n->out[0]));
}

/* 16-bit data reduces with float32 compute (the descriptor's compute type). */
const OpEmitter cudnn_reduce = {
    .setup = reduce_setup, .run = reduce_run, .supports = reduce_supports, .half = true};

/* ----------------------------------------------------------- softmax */

/* (outer, axis, inner): softmax over the middle dim, cuDNN's channel mode. */
static void softmax_shape(const Graph *g, const Node *n, int64_t *shape) {
  const Tensor *x = n->in[0];
  int64_t axis = n->p.axis.axis;
  bool coerce2d = n->p.axis.coerce2d;
  shape[0] = shape[1] = shape[2] = 1;
  shape[3] = 1;
  for (int i = 0; i < x->rank; i++) {
    if (i < axis)
      shape[0] *= x->dims[i];
    else if (i == axis || coerce2d)
      shape[1] *= x->dims[i]; /* before opset 13: flattened to 2-D at axis */
    else
      shape[2] *= x->dims[i];
  }
}

static bool softmax_supports(Emitter *e, const Node *n) {
  (void)e;
  return buffer_is_contiguous(n->in[0]) && buffer_is_contiguous(n->out[0]);
}

static void softmax_setup(Emitter *e, Node *n) {
  int64_t shape[4], strides[4];
  softmax_shape(e->g, n, shape);
  contiguous_strides(4, shape, strides);
  const char **d = node_data(e, n, sizeof(char *));
  *d = emit_tensor_desc(e, n, "x", 4, shape, strides, 4, false);
}

static void softmax_run(Emitter *e, Node *n) {
  const char **d = node_data(e, n, sizeof(char *));
  emit_call(e, LIB_CUDNN, n, "cudnnSoftmaxForward(%s, %s, CUDNN_SOFTMAX_MODE_CHANNEL, %s, %s, %s, %s, %s, %s)",
            node_cudnn(e, n), op_cudnn(n->op),
            emit_scalar(e, 1), *d, buf(e, n->in[0]), emit_scalar(e, 0), *d, buf(e, n->out[0]));
}

const OpEmitter cudnn_softmax = {
    .setup = softmax_setup, .run = softmax_run, .supports = softmax_supports};

/* ---------------------------------------------------------------- LRN */

typedef struct DescPair {
  const char *xd, *yd, *od; /* x, y, and the operation's own descriptor */
} DescPair;

static bool lrn_supports(Emitter *e, const Node *n) {
  (void)e;
  int64_t size = n->p.lrn.size;
  return n->in[0]->rank >= 3 && n->in[0]->rank <= 5 && size >= 1 && size <= 16 &&
         n->p.lrn.bias >= 1e-5f && n->p.lrn.beta >= 0.01f;
}

static void lrn_setup(Emitter *e, Node *n) {
  DescPair *p = node_data(e, n, sizeof(DescPair));
  p->xd = desc_of(e, n, "x", n->in[0]);
  p->yd = desc_of(e, n, "y", n->out[0]);
  p->od = emit_desc(e, n, "LRN", "lrn");
  emit_call(e, LIB_CUDNN, n, "cudnnSetLRNDescriptor(%s, %lld, %s, %s, %s)", p->od,
            (long long)n->p.lrn.size, double_literal(e, n->p.lrn.alpha),
            double_literal(e, n->p.lrn.beta), double_literal(e, n->p.lrn.bias));
}

static void lrn_run(Emitter *e, Node *n) {
  DescPair *p = node_data(e, n, sizeof(DescPair));
  emit_call(e, LIB_CUDNN, n,
            "cudnnLRNCrossChannelForward(%s, %s, CUDNN_LRN_CROSS_CHANNEL_DIM1, %s, %s, %s, %s, %s, %s)",
            node_cudnn(e, n), p->od, emit_scalar(e, 1), p->xd, buf(e, n->in[0]), emit_scalar(e, 0),
            p->yd, buf(e, n->out[0]));
}

const OpEmitter cudnn_lrn = {.setup = lrn_setup, .run = lrn_run, .supports = lrn_supports};

/* ------------------------------------------------------ batch norm */

/* BatchNormalization on (N, C, ...) seen as 4-D (N, C, rest, 1) or 5-D,
   contiguous, or a 4-D x and y both channels-last (choose-layout). */
static bool bn_shape(const Node *n, int64_t *shape, int64_t *strides, int *rank) {
  const Tensor *x = n->in[0], *y = n->out[0];
  if (x->rank == 4 && tensor_is_channels_last(x) && tensor_is_channels_last(y) &&
      !buffer_is_contiguous(x)) {
    memcpy(shape, x->dims, sizeof(int64_t) * 4);
    memcpy(strides, x->strides, sizeof(int64_t) * 4);
    *rank = 4;
    return true;
  }
  if (x->rank < 2 || !buffer_is_contiguous(x) || !buffer_is_contiguous(y))
    return false;
  if (x->rank == 5) {
    memcpy(shape, x->dims, sizeof(int64_t) * 5);
    *rank = 5;
    contiguous_strides(*rank, shape, strides);
    return true;
  }
  shape[0] = x->dims[0];
  shape[1] = x->dims[1];
  shape[2] = 1;
  shape[3] = 1;
  if (x->rank == 4) {
    shape[2] = x->dims[2];
    shape[3] = x->dims[3];
  } else {
    for (int i = 2; i < x->rank; i++)
      shape[2] *= x->dims[i];
  }
  *rank = 4;
  contiguous_strides(*rank, shape, strides);
  return true;
}

static bool bn_supports(Emitter *e, const Node *n) {
  (void)e;
  int64_t shape[5], strides[5];
  int rank;
  if (n->p.norm.training)
    return false; /* the batch's statistics: opc's kernels */
  /* With a fused activation, opc's kernel does both in one pass where it can. */
  if (n->act != OPC_ACT_NONE && batch_norm_in_one_pass(n))
    return false;
  return n->nin == 5 && bn_shape(n, shape, strides, &rank);
}

static void bn_setup(Emitter *e, Node *n) {
  DescPair *p = node_data(e, n, sizeof(DescPair));
  int64_t shape[5], strides[5];
  int rank;
  bn_shape(n, shape, strides, &rank);
  p->xd = emit_tensor_desc(e, n, "x", rank, shape, strides, 4, false);
  /* The scale, bias, mean and variance are float32 whatever x's type. */
  int64_t params[5] = {1, shape[1], 1, 1, 1}, pstrides[5];
  contiguous_strides(rank, params, pstrides);
  p->od = emit_tensor_desc_as(e, n, "params", "CUDNN_DATA_FLOAT", rank, params, pstrides, 4, false);
}

static void bn_run(Emitter *e, Node *n) {
  DescPair *p = node_data(e, n, sizeof(DescPair));
  emit_call(e, LIB_CUDNN, n,
            "cudnnBatchNormalizationForwardInference(%s, CUDNN_BATCHNORM_SPATIAL, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            node_cudnn(e, n), emit_scalar(e, 1), emit_scalar(e, 0), p->xd, buf(e, n->in[0]), p->xd,
            buf(e, n->out[0]), p->od, buf(e, n->in[1]), buf(e, n->in[2]), buf(e, n->in[3]),
            buf(e, n->in[4]), double_literal(e, n->p.norm.epsilon));
  fused_activation(e, n);
}

const OpEmitter cudnn_batch_norm = {
    .setup = bn_setup, .run = bn_run, .supports = bn_supports, .half = true};

/* -------------------------------------------------------- activations */

static bool clip_bounds(const Node *n, float *lo, float *hi) {
  *lo = -INFINITY;
  *hi = INFINITY;
  if (n->nin > 1 || !n->p.clip.has_min) {
    const Tensor *tmin = node_input(n, 1), *tmax = node_input(n, 2);
    if ((tmin && !tmin->f32) || (tmax && !tmax->f32))
      return false;
    if (tmin)
      *lo = tmin->f32[0];
    if (tmax)
      *hi = tmax->f32[0];
  }
  /* before opset 11 the bounds are attributes */
  if (n->p.clip.has_min)
    *lo = n->p.clip.min;
  if (n->p.clip.has_max)
    *hi = n->p.clip.max;
  return true;
}

static bool activation_supports(Emitter *e, const Node *n) {
  (void)e;
  if (n->in[0]->rank > 8)
    return false;
  if (n->op == OP_CLIP) {
    float lo, hi;
    return clip_bounds(n, &lo, &hi) && lo == 0 && isfinite(hi);
  }
  return true;
}

static void activation_setup(Emitter *e, Node *n) {
  DescPair *p = node_data(e, n, sizeof(DescPair));
  p->xd = desc_of(e, n, "x", n->in[0]);
  p->yd = tensor_same_shape(n->in[0], n->out[0]) &&
                  memcmp(n->in[0]->strides, n->out[0]->strides, sizeof(int64_t) * (size_t)n->in[0]->rank) == 0
              ? p->xd
              : desc_of(e, n, "y", n->out[0]);
  /* The mode is the row's cudnn column; its coefficient Clip's upper
     bound, or the alpha of a kind with one (Elu). */
  float lo, hi = 0;
  if (n->op == OP_CLIP)
    clip_bounds(n, &lo, &hi);
  else if (op_info(n->op)->params == PARAMS_ACT)
    hi = n->p.act.alpha;
  p->od = activation_desc(e, n, op_cudnn(n->op), hi);
}

static void activation_run(Emitter *e, Node *n) {
  DescPair *p = node_data(e, n, sizeof(DescPair));
  emit_call(e, LIB_CUDNN, n, "cudnnActivationForward(%s, %s, %s, %s, %s, %s, %s, %s)",
            node_cudnn(e, n), p->od, emit_scalar(e, 1), p->xd, buf(e, n->in[0]), emit_scalar(e, 0),
            p->yd, buf(e, n->out[0]));
}

const OpEmitter cudnn_activation = {
    .setup = activation_setup, .run = activation_run, .supports = activation_supports};

/* ------------------------------------------------ broadcast arithmetic */

/*
 * cudnnOpTensor computes C = op(alpha1 * A, alpha2 * B) + beta * C where A
 * has C's shape and every dim of B is C's or 1. Two inputs or more are
 * chained through C: C = op(C, next).
 */
typedef struct ArithPlan {
  int first;        /* the input that has the output's shape */
  const char *od, *yd;
  const char *desc[16]; /* per input */
} ArithPlan;

static bool broadcasts_to(const Tensor *b, const Tensor *y) {
  if (b->rank > y->rank)
    return false;
  for (int i = 0; i < b->rank; i++) {
    int64_t d = b->dims[b->rank - 1 - i];
    if (d != 1 && d != y->dims[y->rank - 1 - i])
      return false;
  }
  return true;
}

static bool plan_arith(const Node *n, ArithPlan *p) {
  memset(p, 0, sizeof *p);
  const Tensor *y = n->out[0];
  if (n->nin < 1 || n->nin > 16 || y->rank > 5)
    return false;
  p->first = -1;
  for (int i = 0; i < n->nin; i++) {
    const Tensor *t = n->in[i];
    if (!t || !broadcasts_to(t, y) || t->rank > 5)
      return false;
    if (p->first < 0 && tensor_same_shape(t, y))
      p->first = i;
  }
  /* Sub is not commutative: only y = a - b with a full, or its mirror. */
  return p->first >= 0 && (n->op != OP_SUB || n->nin == 2);
}

static bool arith_supports(Emitter *e, const Node *n) {
  (void)e;
  ArithPlan p;
  return plan_arith(n, &p);
}

static void arith_setup(Emitter *e, Node *n) {
  ArithPlan *p = node_data(e, n, sizeof(ArithPlan));
  plan_arith(n, p);
  const Tensor *y = n->out[0];
  p->yd = emit_tensor_desc_of(e, n, "y", y, 4, true);
  for (int i = 0; i < n->nin; i++) {
    const Tensor *t = n->in[i];
    bool same = tensor_same_shape(t, y) && memcmp(t->strides, y->strides, sizeof(int64_t) * (size_t)y->rank) == 0;
    p->desc[i] = same ? p->yd : emit_tensor_desc_of(e, n, emit_str(e, "in%d", i), t, 4, true);
  }
  p->od = op_tensor_desc(e, n, "op", op_cudnn(n->op));
}

static void arith_run(Emitter *e, Node *n) {
  ArithPlan *p = node_data(e, n, sizeof(ArithPlan));
  const char *y = buf(e, n->out[0]), *h = node_cudnn(e, n);
  float scale = n->op == OP_MEAN ? 1.0f / (float)n->nin : 1.0f;
  int a = p->first;
  if (n->nin == 1) {
    emit_call(e, LIB_CUDNN, n, "cudnnTransformTensor(%s, %s, %s, %s, %s, %s, %s)", h,
              emit_scalar(e, scale), p->desc[0], buf(e, n->in[0]), emit_scalar(e, 0), p->yd, y);
    return;
  }
  bool first_call = true;
  for (int i = 0; i < n->nin; i++) {
    if (i == a)
      continue;
    float alpha_a = first_call ? scale : 1.0f, alpha_b = scale;
    if (n->op == OP_SUB) {
      /* y = in0 - in1, with A the full-shaped one. */
      alpha_a = a == 0 ? 1.0f : -1.0f;
      alpha_b = a == 0 ? -1.0f : 1.0f;
    }
    emit_call(e, LIB_CUDNN, n, "cudnnOpTensor(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", h, p->od,
              emit_scalar(e, alpha_a), first_call ? p->desc[a] : p->yd,
              first_call ? buf(e, n->in[a]) : y, emit_scalar(e, alpha_b), p->desc[i],
              buf(e, n->in[i]), emit_scalar(e, 0), p->yd, y);
    first_call = false;
  }
}

const OpEmitter cudnn_arith = {.setup = arith_setup, .run = arith_run, .supports = arith_supports};
