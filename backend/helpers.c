/*
 * helpers.c - the static helpers net.c defines once, when something used
 * them: each library's checking helper, make_tensor, pick_conv_algo and
 * pick_deconv_algo, and the fused convolution's forms (choose_form).
 */
#include <string.h>

#include "emit.h"

static const char *const lib_status_type[LIB_COUNT] = {
    [LIB_CUDA] = "cudaError_t", [LIB_CUDNN] = "cudnnStatus_t", [LIB_CUBLAS] = "cublasStatus_t",
    [LIB_DRIVER] = "CUresult", [LIB_NVRTC] = "nvrtcResult",
};
static const char *const lib_success[LIB_COUNT] = {
    [LIB_CUDA] = "cudaSuccess", [LIB_CUDNN] = "CUDNN_STATUS_SUCCESS",
    [LIB_CUBLAS] = "CUBLAS_STATUS_SUCCESS", [LIB_DRIVER] = "CUDA_SUCCESS",
    [LIB_NVRTC] = "NVRTC_SUCCESS",
};
static const char *const lib_message[LIB_COUNT] = {
    [LIB_CUDA] = "cudaGetErrorString(status)", [LIB_CUDNN] = "cudnnGetErrorString(status)",
    [LIB_CUBLAS] = "cublasGetStatusString(status)", [LIB_DRIVER] = "message",
    [LIB_NVRTC] = "nvrtcGetErrorString(status)",
};

/* A cuDNN call of pick_*_algo on handle h, checked: the helper returns 0
   when it fails. */
static void emit_pick_call(Emitter *e, const char *function, const char *args) {
  emit(e, "if (!cudnn_ok(c, %s(h, %s),", function, args);
  emit(e, "              \"%s\"))", function);
  emit(e, "  return 0;");
}

/*
 * pick_conv_algo / pick_deconv_algo: the first algorithm of cuDNN's
 * heuristics that fits the workspace limit, and its workspace raising the
 * stream's.
 */
static void emit_pick_algo(Emitter *e, const char *name, const char *dir, const char *perf,
                           const char *args, const char *params) {
  emit(e, "/* The first algorithm of cuDNN's heuristics that fits the workspace limit;");
  emit(e, "   raises *workspace to what it needs. */");
  emit(e, "static int pick_%s_algo(%s_ctx *c, cudnnHandle_t h,", name, e->prefix);
  emit(e, "                          %s,", params);
  emit(e, "                          cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y,");
  emit(e, "                          cudnnConvolution%sAlgo_t *algo, size_t *workspace)", perf);
  emit_open(e, "{");
  emit(e, "cudnnConvolution%sAlgoPerf_t perf[8];", perf);
  emit(e, "int count = 0;");
  emit(e, "size_t bytes = 0;");
  if (strcmp(name, "conv") == 0) {
    emit(e, "/* OPC_CONV_SEARCH=1 in the environment times every algorithm instead. */");
    emit(e, "const char *search = getenv(\"OPC_CONV_SEARCH\");");
    emit_open(e, "if (search && strcmp(search, \"1\") == 0) {");
    emit_pick_call(e, "cudnnFindConvolutionForwardAlgorithm", emit_str(e, "%s, 8, &count, perf", args));
    emit_close(e, "} else if (!cudnn_ok(c, cudnnGetConvolutionForwardAlgorithm_v7(h, %s, 8, &count, perf),", args);
    emit(e, "                       \"cudnnGetConvolutionForwardAlgorithm_v7\")) {");
    emit(e, "  return 0;");
    emit(e, "}");
  } else {
    emit_pick_call(e, emit_str(e, "cudnnGetConvolution%sAlgorithm_v7", dir),
                   emit_str(e, "%s, 8, &count, perf", args));
  }
  emit_open(e, "for (int i = 0; i < count; i++) {");
  emit(e, "if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > workspace_limit)");
  emit(e, "  continue;");
  if (!e->opt->tf32) {
    emit(e, "if (perf[i].mathType != CUDNN_FMA_MATH) /* strict float32: no TF32 tensor cores */");
    emit(e, "  continue;");
  }
  emit(e, "*algo = perf[i].algo;");
  emit(e, "/* The algorithm runs in the math type it was listed with. */");
  emit(e, "if (!cudnn_ok(c, cudnnSetConvolutionMathType(conv, perf[i].mathType), \"cudnnSetConvolutionMathType\"))");
  emit(e, "  return 0;");
  emit_pick_call(e, emit_str(e, "cudnnGetConvolution%sWorkspaceSize", dir),
                 emit_str(e, "%s, *algo, &bytes", args));
  emit(e, "if (bytes > *workspace)");
  emit(e, "  *workspace = bytes;");
  emit(e, "return 1;");
  emit_close(e, "}");
  emit(e, "report(c, \"pick_%s_algo\",", name);
  emit(e, "       \"cuDNN lists no algorithm that is supported%s and fits in the workspace limit\");",
       e->opt->tf32 ? "" : " in strict float32");
  emit(e, "return 0;");
  emit_close(e, "}");
  emit_blank(e);
}

/*
 * A convolution with fused bias and relu runs as one cuDNN call only where
 * cuDNN accepts it: create() tries the forms in order (choose_form).
 */
static void emit_form_names(Emitter *e) {
  emit(e, "/* How a convolution with fused bias and relu runs, chosen in create(). */");
  emit(e, "enum { FORM_FUSED, FORM_FUSED_PRECOMP, FORM_SEPARATE };");
  emit(e, "static const char *const form_name[] = {");
  emit(e, "  \"fused, its own algorithm\",");
  emit(e, "  \"fused, IMPLICIT_PRECOMP_GEMM\",");
  emit(e, "  \"separate convolution, bias and activation\",");
  emit(e, "};");
  emit_blank(e);
}

static void emit_form_helpers(Emitter *e) {
  const char *p = e->prefix;
  emit(e, "/* Raises *workspace to what the fused call's fallback algorithm needs, where");
  emit(e, "   cuDNN offers it for this problem. */");
  emit(e, "static int precomp_workspace(%s_ctx *c, cudnnHandle_t h, cudnnTensorDescriptor_t x,", p);
  emit(e, "                             cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,");
  emit(e, "                             cudnnTensorDescriptor_t y, size_t *workspace)");
  emit_open(e, "{");
  emit(e, "size_t bytes = 0;");
  emit(e, "cudnnStatus_t status = cudnnGetConvolutionForwardWorkspaceSize(");
  emit(e, "    h, x, w, conv, y, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, &bytes);");
  emit(e, "if (status == CUDNN_STATUS_NOT_SUPPORTED)");
  emit(e, "  return 1;");
  emit(e, "if (!cudnn_ok(c, status, \"cudnnGetConvolutionForwardWorkspaceSize\"))");
  emit(e, "  return 0;");
  emit(e, "if (bytes > *workspace)");
  emit(e, "  *workspace = bytes;");
  emit(e, "return 1;");
  emit_close(e, "}");
  emit_blank(e);
  emit(e, "/*");
  emit(e, " * The first form cuDNN accepts, tried for real on the node's stream: the");
  emit(e, " * fused call with the chosen algorithm, the fused call with");
  emit(e, " * IMPLICIT_PRECOMP_GEMM, else separate calls. cuDNN answers NOT_SUPPORTED");
  emit(e, " * for some algorithms, shapes and layouts of the fused call.");
  emit(e, " */");
  emit(e, "static int choose_form(%s_ctx *c, cudnnStatus_t (*fused)(%s_ctx *, cudnnConvolutionFwdAlgo_t),", p, p);
  emit(e, "                       cudnnConvolutionFwdAlgo_t algo, cudaStream_t stream, int *form)");
  emit_open(e, "{");
  emit(e, "cudnnStatus_t status = fused(c, algo);");
  emit(e, "*form = FORM_FUSED;");
  emit(e, "if (status == CUDNN_STATUS_NOT_SUPPORTED && algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) {");
  emit(e, "  status = fused(c, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);");
  emit(e, "  *form = FORM_FUSED_PRECOMP;");
  emit(e, "}");
  emit(e, "if (status == CUDNN_STATUS_NOT_SUPPORTED)");
  emit(e, "  *form = FORM_SEPARATE;");
  emit(e, "else if (!cudnn_ok(c, status, \"cudnnConvolutionBiasActivationForward\"))");
  emit(e, "  return 0;");
  emit(e, "/* A try wrote the node's output: finish it before another stream's try. */");
  emit(e, "return cuda_ok(c, cudaStreamSynchronize(stream), \"cudaStreamSynchronize\");");
  emit_close(e, "}");
  emit_blank(e);
}

/*
 * make_conv and free_conv: a convolution's four descriptors from one
 * constant conv_shape. One call a node instead of eight keeps a large
 * model's net.c quick to compile (the setup code was most of it).
 */
static void emit_make_conv(Emitter *e) {
  const char *p = e->prefix;
  emit(e, "/* A convolution's descriptors from its shape; not inlined, as make_tensor. */");
  emit(e, "static __attribute__((noinline)) int make_conv(%s_ctx *c, conv_descs *d, const conv_shape *s)", p);
  emit_open(e, "{");
  emit(e, "return make_tensor(c, &d->x, s->type, s->rank, s->x, s->x_strides) &&");
  emit(e, "       make_tensor(c, &d->y, s->type, s->rank, s->y, s->y_strides) &&");
  emit(e, "       cudnn_ok(c, cudnnCreateFilterDescriptor(&d->filter), \"cudnnCreateFilterDescriptor\") &&");
  emit(e, "       cudnn_ok(c, cudnnSetFilterNdDescriptor(d->filter, s->type, s->filter_format, s->rank,");
  emit(e, "                                              s->filter), \"cudnnSetFilterNdDescriptor\") &&");
  emit(e, "       cudnn_ok(c, cudnnCreateConvolutionDescriptor(&d->conv),");
  emit(e, "                \"cudnnCreateConvolutionDescriptor\") &&");
  emit(e, "       cudnn_ok(c, cudnnSetConvolutionNdDescriptor(d->conv, s->rank - 2, s->pad, s->stride,");
  emit(e, "                                                   s->dilation, CUDNN_CROSS_CORRELATION,");
  emit(e, "                                                   CUDNN_DATA_FLOAT),");
  emit(e, "                \"cudnnSetConvolutionNdDescriptor\") &&");
  emit(e, "       (s->groups == 1 ||");
  emit(e, "        cudnn_ok(c, cudnnSetConvolutionGroupCount(d->conv, s->groups),");
  emit(e, "                 \"cudnnSetConvolutionGroupCount\")) &&");
  emit(e, "       cudnn_ok(c, cudnnSetConvolutionMathType(d->conv, s->math), \"cudnnSetConvolutionMathType\");");
  emit_close(e, "}");
  emit_blank(e);
  emit(e, "static void free_conv(conv_descs *d)");
  emit_open(e, "{");
  emit(e, "if (d->x)");
  emit(e, "  cudnnDestroyTensorDescriptor(d->x);");
  emit(e, "if (d->y)");
  emit(e, "  cudnnDestroyTensorDescriptor(d->y);");
  emit(e, "if (d->filter)");
  emit(e, "  cudnnDestroyFilterDescriptor(d->filter);");
  emit(e, "if (d->conv)");
  emit(e, "  cudnnDestroyConvolutionDescriptor(d->conv);");
  emit_close(e, "}");
  emit_blank(e);
}

/* The types of the helpers above that the context's fields use: printed
   before the context struct. */
static void emit_conv_types(Emitter *e) {
  emit(e, "/* A convolution in cuDNN's terms, fixed at compile time: 4 or 5 dims (N, C");
  emit(e, "   and 2 or 3 spatial ones), and what its descriptors say besides. */");
  emit_open(e, "typedef struct conv_shape {");
  emit(e, "cudnnDataType_t type;");
  emit(e, "int rank;");
  emit(e, "int x[5], x_strides[5], y[5], y_strides[5], filter[5];");
  emit(e, "cudnnTensorFormat_t filter_format;");
  emit(e, "int pad[3], stride[3], dilation[3], groups;");
  emit(e, "cudnnMathType_t math;");
  emit_close(e, "} conv_shape;");
  emit_blank(e);
  emit(e, "/* Its descriptors, made once by make_conv() and freed by free_conv(). */");
  emit_open(e, "typedef struct conv_descs {");
  emit(e, "cudnnTensorDescriptor_t x, y;");
  emit(e, "cudnnFilterDescriptor_t filter;");
  emit(e, "cudnnConvolutionDescriptor_t conv;");
  emit_close(e, "} conv_descs;");
  emit_blank(e);
}

void emit_helper_types(Emitter *e) {
  if (e->st->gpu.make_conv)
    emit_conv_types(e);
  if (e->st->cpu.make_conv) {
    e->cpu_code = true;
    emit_conv_types(e);
    e->cpu_code = false;
  }
}

void emit_check_helpers(Emitter *e) {
  /* The CPU's code keeps its messages apart: it runs in host functions,
     while the host thread may be issuing and reporting (cpu_units.c). */
  const char *error = e->cpu_code ? "cpu_error" : "error";
  const char *node = e->cpu_code ? "cpu_node" : "node";
  if (e->cpu_code)
    emit(e, "/* Keeps a CPU unit's \"node 'NAME' (Op): CALL: MESSAGE\" for run(). */");
  else
    emit(e, "/* Keeps \"node 'NAME' (Op): CALL: MESSAGE\" for %s_error(). */", e->prefix);
  emit(e, "static __attribute__((noinline)) void report(%s_ctx *c, const char *call,", e->prefix);
  emit(e, "                                            const char *message)");
  emit_open(e, "{");
  emit(e, "if (c->%s)", node);
  emit(e, "  snprintf(c->%s, sizeof c->%s, \"%%s: %%s: %%s\", c->%s, call, message);", error, error,
       node);
  emit(e, "else");
  emit(e, "  snprintf(c->%s, sizeof c->%s, \"%%s: %%s\", call, message);", error, error);
  emit_close(e, "}");
  emit_blank(e);
  if (e->cpu_code && used(e)->failure) {
    emit(e, "/* A CPU unit's set-up failed in create(): its message is the program's. */");
    emit(e, "static int cpu_failure(%s_ctx *c)", e->prefix);
    emit_open(e, "{");
    emit(e, "snprintf(c->error, sizeof c->error, \"%%s\", c->cpu_error);");
    emit(e, "return -1;");
    emit_close(e, "}");
    emit_blank(e);
  }
  emit(e, "/* Each library's checking helper: reports a failure and returns 0. They");
  emit(e, "   follow every library call, so they are not inlined: a copy at each call");
  emit(e, "   saves nothing beside the call and costs the C compiler a third of a");
  emit(e, "   large program's optimised build. */");
  for (int lib = 0; lib < LIB_COUNT; lib++) {
    if (!used(e)->lib[lib])
      continue;
    emit(e, "static __attribute__((noinline)) int %s(%s_ctx *c, %s status, const char *call)",
         lib_check_helper[lib], e->prefix, lib_status_type[lib]);
    emit_open(e, "{");
    if (lib == LIB_DRIVER)
      emit(e, "const char *message = \"unknown driver error\";");
    emit(e, "if (status == %s)", lib_success[lib]);
    emit(e, "  return 1;");
    if (lib == LIB_DRIVER)
      emit(e, "cuGetErrorString(status, &message);");
    emit(e, "report(c, call, %s);", lib_message[lib]);
    emit(e, "return 0;");
    emit_close(e, "}");
    emit_blank(e);
  }
  if (used(e)->make_tensor) {
    emit(e, "/* A tensor descriptor with explicit dims and strides (4 to 8 dims); not");
    emit(e, "   inlined, as the checking helpers. */");
    emit(e, "static __attribute__((noinline)) int make_tensor(%s_ctx *c, cudnnTensorDescriptor_t *desc,",
         e->prefix);
    emit(e, "                                                 cudnnDataType_t type, int rank,");
    emit(e, "                                                 const int *dims, const int *strides)");
    emit_open(e, "{");
    emit(e, "return cudnn_ok(c, cudnnCreateTensorDescriptor(desc), \"cudnnCreateTensorDescriptor\") &&");
    emit(e, "       cudnn_ok(c, cudnnSetTensorNdDescriptor(*desc, type, rank, dims, strides),");
    emit(e, "                \"cudnnSetTensorNdDescriptor\");");
    emit_close(e, "}");
    emit_blank(e);
  }
  if (used(e)->make_conv)
    emit_make_conv(e);
  if (used(e)->cublas) {
    emit(e, "/* cuBLAS's workspace per stream (its recommendation for Hopper). */");
    emit(e, "static const size_t cublas_workspace_bytes = (size_t)32 << 20;");
    emit_blank(e);
  }
  if (used(e)->pick_conv_algo || used(e)->pick_deconv_algo) {
    emit(e, "/* The most workspace a convolution may ask for. */");
    emit(e, "static const size_t workspace_limit = (size_t)256 << 20;");
    emit_blank(e);
  }
  if (!e->cpu_code && (e->st->gpu.conv_forms || e->st->cpu.conv_forms))
    emit_form_names(e);
  if (used(e)->conv_forms)
    emit_form_helpers(e);
  if (used(e)->pick_conv_algo)
    emit_pick_algo(e, "conv", "Forward", "Fwd", "x, w, conv, y", "cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w");
  if (used(e)->pick_deconv_algo)
    emit_pick_algo(e, "deconv", "BackwardData", "BwdData", "w, x, conv, y",
                   "cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t x");
}
