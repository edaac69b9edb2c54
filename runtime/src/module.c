/*
 * module.c - the driver API's modules and kernel launches. Kernels are not
 * loaded from the image: every kernel of opc_kernels.inc is built into the
 * runtime, and a module only finds them by name. The image is checked as
 * a driver checks it, so that a program that would not load its kernels on
 * a GPU fails here too: PTX must be of a PTX ISA the driver knows, a CUBIN
 * must be for the device's SM.
 */
#include <stdlib.h>
#include <string.h>

#include "dnn.h"
#include "image.h"
#include "ktable.h"
#include "rt.h"

struct CUmod_st {
  int unused;
};

static CUresult cu_result(cudaError_t err) {
  switch (err) {
  case cudaSuccess: return CUDA_SUCCESS;
  case cudaErrorInvalidValue: return CUDA_ERROR_INVALID_VALUE;
  case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
  case cudaErrorStreamCaptureUnsupported: return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  case cudaErrorNotSupported: return CUDA_ERROR_NOT_SUPPORTED;
  case cudaErrorInvalidResourceHandle: return CUDA_ERROR_INVALID_HANDLE;
  default: return CUDA_ERROR_LAUNCH_FAILED;
  }
}

CUresult cuInit(unsigned int Flags) {
  if (Flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  return cu_result(rt_enter());
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  cudaError_t err = rt_enter();
  if (err)
    return cu_result(err);
  if (ordinal < 0 || ordinal >= rt_device_count())
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

/* The newest PTX ISA a driver JIT-compiles: each CUDA release brings one
 * (PTX ISA 9.0 came with CUDA 13.0, 8.7 with 12.8). 0 below CUDA 11.0,
 * older than any driver of a compute capability 9.0 device. */
static int driver_ptx_isa(int driver) {
  static const struct {
    int driver, isa;
  } releases[] = {
      {13000, 90}, {12090, 88}, {12080, 87}, {12070, 86}, {12050, 85}, {12040, 84},
      {12030, 83}, {12020, 82}, {12010, 81}, {12000, 80}, {11080, 78}, {11070, 77},
      {11060, 76}, {11050, 75}, {11040, 74}, {11030, 73}, {11020, 72}, {11010, 71},
      {11000, 70},
  };
  for (size_t i = 0; i < sizeof releases / sizeof releases[0]; i++)
    if (driver >= releases[i].driver)
      return releases[i].isa;
  return 0;
}

/* The device's compute capability as 90 for 9.0. */
static CUresult device_sm(int *sm) {
  int major, minor;
  CUresult r = cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0);
  if (r == CUDA_SUCCESS)
    r = cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0);
  *sm = r == CUDA_SUCCESS ? major * 10 + minor : 0;
  return r;
}

/* A CUBIN runs on its own SM and on later minor versions of the same major
 * (sm_80 code on sm_86), never across majors. */
static CUresult check_cubin(const unsigned char *image, int device) {
  int sm = cubin_sm(image);
  if (sm == 0)
    return CUDA_ERROR_INVALID_IMAGE;
  if (sm / 10 != device / 10 || sm % 10 > device % 10)
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  return CUDA_SUCCESS;
}

/* PTX is JIT-compiled by the driver, which knows the PTX ISA versions up to
 * its own release's and targets up to the device's. */
static CUresult check_ptx(const char *text, int device) {
  int isa, target, driver;
  if (!ptx_header(text, &isa, &target))
    return CUDA_ERROR_INVALID_IMAGE;
  CUresult r = cuDriverGetVersion(&driver);
  if (r != CUDA_SUCCESS)
    return r;
  if (isa > driver_ptx_isa(driver))
    return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
  if (target > device)
    return CUDA_ERROR_INVALID_PTX;
  return CUDA_SUCCESS;
}

/* Loading a module is not an operation a stream capture can record: it
 * fails, and invalidates the capture, where CUDA's capture modes bar a
 * potentially unsafe call (graph.c). */
static bool capturing(void) {
  return rt_capture_forbids();
}

CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  if (rt_enter())
    return CUDA_ERROR_LAUNCH_FAILED;
  if (!module || !image)
    return CUDA_ERROR_INVALID_VALUE;
  if (capturing())
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  int device;
  CUresult r = device_sm(&device);
  if (r == CUDA_SUCCESS)
    r = image_is_elf(image) ? check_cubin(image, device) : check_ptx(image, device);
  if (r != CUDA_SUCCESS)
    return r;
  *module = calloc(1, sizeof **module);
  return *module ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                            CUjit_option *options, void **optionValues) {
  (void)numOptions;
  (void)options;
  (void)optionValues;
  return cuModuleLoadData(module, image);
}

CUresult cuModuleUnload(CUmodule hmod) {
  if (rt_enter())
    return CUDA_ERROR_LAUNCH_FAILED;
  if (!hmod)
    return CUDA_ERROR_INVALID_HANDLE;
  free(hmod);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
  if (rt_enter())
    return CUDA_ERROR_LAUNCH_FAILED;
  if (!hfunc || !name)
    return CUDA_ERROR_INVALID_VALUE;
  if (!hmod)
    return CUDA_ERROR_INVALID_HANDLE;
  const struct CUfunc_st *f = kernel_find(name, strlen(name));
  if (!f)
    return CUDA_ERROR_NOT_FOUND;
  *hfunc = (CUfunction)f;
  return CUDA_SUCCESS;
}

typedef struct KernelOp {
  Op op;
  const struct CUfunc_st *f;
  KernelFn *fn; /* f's build for the instruction set in use */
  long long blocks; /* the launch's grid */
  struct opc_kargs a;
} KernelOp;

/* A launch as it runs: the op, and the graph it runs in, which a kernel
 * setting a conditional node's handle needs (graph.c). */
typedef struct KernelRun {
  KernelOp *k;
  struct CUgraphExec_st *exec;
} KernelRun;

static void kernel_part(void *ctx, int part, int nparts) {
  KernelRun *r = ctx;
  struct CUgraphExec_st *outer = graph_running();
  graph_set_running(r->exec);
  graph_set_in_kernel(true);
  r->k->fn(r->k->a, part, nparts);
  graph_set_in_kernel(false);
  graph_set_running(outer);
}

static void run_kernel(Op *op) {
  KernelOp *k = (KernelOp *)op;
  KernelRun run = {k, graph_running()};
  if (k->a.n <= 0)
    return;
  /* n counts the parallel loop's iterations, which may be whole rows:
   * the extents (in bytes, about 4 per element) tell better how much
   * memory the launch sweeps. */
  long long work = k->a.n;
  if (k->a.y_extent / 4 > work)
    work = k->a.y_extent / 4;
  for (int i = 0; i < 4; i++)
    if (k->a.x_extent[i] / 4 > work)
      work = k->a.x_extent[i] / 4;
  int parts = pool_parts(work, 16384);
  /* A tile kernel's blocks each carry a whole tile (every step of an
   * LSTM direction), which the memory they sweep does not show: as on a
   * GPU, where the blocks run side by side, its tiles go to the threads. */
  if (k->f->tiles && parts < k->blocks)
    parts = k->blocks < pool_threads() ? (int)k->blocks : pool_threads();
  /* A unit kernel's iterations are each much work that the memory does
   * not show either (a convolution's tile of outputs): split by them. */
  if (k->f->units)
    parts = pool_parts(k->a.n, 1);
  if (parts > k->a.n)
    parts = (int)k->a.n;
  pool_run(kernel_part, &run, parts);
}

/* A kernel that reads scattered parts of its inputs (opc_concat_runs: many
 * tensors from one base) lists them (opc_kargs.h): x_extent[3] < 0 says
 * x[3] is a table of -x_extent[3] bytes, int64 triples (operand k, byte
 * offset from x[k], bytes), so that the checker sees those reads alone,
 * not the tensors between them. The table is a constant, in device memory
 * that the host can read here. */
static void read_listed_spans(Op *op, const struct opc_kargs *a) {
  if (a->x_extent[3] >= 0 || !a->x[3])
    return;
  const long long *t = a->x[3];
  long long n = -a->x_extent[3] / (3 * (long long)sizeof(long long));
  op_span(op, t, (size_t)-a->x_extent[3], false);
  for (long long j = 0; j < n; j++, t += 3)
    if (t[0] >= 0 && t[0] < 3 && a->x[t[0]] && t[2] > 0)
      op_span(op, (const unsigned char *)a->x[t[0]] + t[1], (size_t)t[2], false);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra) {
  if (rt_enter())
    return CUDA_ERROR_LAUNCH_FAILED;
  (void)sharedMemBytes;
  if (!f)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!kernelParams || !kernelParams[0] || extra)
    return CUDA_ERROR_INVALID_VALUE;
  if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ)
    return CUDA_ERROR_INVALID_VALUE;
  KernelOp *k = op_new(sizeof *k, run_kernel, f->name);
  if (!k)
    return CUDA_ERROR_OUT_OF_MEMORY;
  k->f = f;
  k->op.kind = OP_KERNEL;
  k->fn = f->fn[kernel_isa()];
  k->blocks = (long long)gridDimX * gridDimY * gridDimZ;
  memcpy(&k->a, kernelParams[0], sizeof k->a);
  for (int i = 0; i < 4; i++)
    if (k->a.x_extent[i] > 0)
      op_span(&k->op, k->a.x[i], (size_t)k->a.x_extent[i], false);
  read_listed_spans(&k->op, &k->a);
  if (k->a.y_extent > 0 && k->a.y_runs > 1) {
    const long long dims[2] = {k->a.y_runs, k->a.y_extent}, strides[2] = {k->a.y_run_stride, 1};
    op_span_strided(&k->op, k->a.y, 2, dims, strides, 1, true);
  } else if (k->a.y_extent > 0) {
    op_span(&k->op, k->a.y, (size_t)k->a.y_extent, true);
  }
  return cu_result(rt_submit(hStream, &k->op));
}

/* The Act doing the same arithmetic as the activation kernel k, from the
 * code its launch states (opc_kargs.h: act) and its parameters f[0] and
 * f[1], when it reads x[0] alone. Sigmoid, Tanh, SiLU and Swish become
 * cuDNN's modes, which the epilogues have vector paths for; their e^x
 * comes from exp_inline there, which may differ from the kernels' expf in
 * the last bit, as cuDNN's fused forms may from opc's kernels on a GPU. */
static bool act_of_code(const struct opc_kargs *a, Act *act);

static bool kernel_activation(const KernelOp *k, Act *act) {
  const struct opc_kargs *a = &k->a;
  if (a->act <= OPC_ACT_NONE || a->act >= OPC_ACT_COUNT || a->x_extent[1] || a->x_extent[2] ||
      a->x_extent[3] || a->adds)
    return false;
  return act_of_code(a, act);
}

/* The Act of the code a launch states (opc_kargs.h: act) with its
   parameters f[0] and f[1]; identity for none. */
static bool act_of_code(const struct opc_kargs *a, Act *act) {
  if (a->act < OPC_ACT_NONE || a->act >= OPC_ACT_COUNT)
    return false;
  if (a->act == OPC_ACT_NONE) {
    *act = (Act){.mode = CUDNN_ACTIVATION_IDENTITY, .swish_beta = 1.0f};
    return true;
  }
  *act = (Act){.mode = (cudnnActivationMode_t)(KERNEL_ACT_BASE + a->act), .coef = a->f[0],
               .offset = a->f[1], .swish_beta = 1.0f};
  if (a->act == OPC_ACT_SIGMOID)
    act->mode = CUDNN_ACTIVATION_SIGMOID;
  else if (a->act == OPC_ACT_TANH)
    act->mode = CUDNN_ACTIVATION_TANH;
  else if (a->act == OPC_ACT_SILU || a->act == OPC_ACT_SWISH)
    act->mode = CUDNN_ACTIVATION_SWISH;
  if (a->act == OPC_ACT_SWISH)
    act->swish_beta = a->f[0];
  return true;
}

/* Whether strides run row-major over dims with no gaps. */
static bool packed_walk(int rank, const long long *dims, const long long *strides) {
  long long step = 1;
  for (int i = rank - 1; i >= 0; i--) {
    if (dims[i] != 1 && strides[i] != step)
      return false;
    step *= dims[i];
  }
  return true;
}

/* The arguments of op when it is a launch of one of opc's kernels in
 * place over exactly (y, yt), both walks packed over as many values from
 * the same address (the same values in the same order); else NULL. */
static const struct opc_kargs *in_place_over(const Op *op, const void *y, const Tensor *yt) {
  if (op->run != run_kernel || yt->type != CUDNN_DATA_FLOAT ||
      !packed_walk(yt->rank, yt->dims, yt->strides))
    return NULL;
  const struct opc_kargs *a = &((const KernelOp *)op)->a;
  if (a->rank < 0 || a->rank > 8) /* the arguments' arrays hold 8 dims */
    return NULL;
  long long count = 1, want = 1;
  for (int i = 0; i < a->rank; i++)
    count *= a->dims[i];
  for (int i = 0; i < yt->rank; i++)
    want *= yt->dims[i];
  if (a->x[0] != y || a->y != y || a->n != count || count != want ||
      !packed_walk(a->rank, a->dims, a->xstride[0]) || !packed_walk(a->rank, a->dims, a->ystride))
    return NULL;
  return a;
}

bool kernel_is_activation_in_place(const Op *op, const void *y, const Tensor *yt, Act *act) {
  return in_place_over(op, y, yt) && kernel_activation((const KernelOp *)op, act);
}

/* The per-channel stride of a bias read at strides bstride over a packed
 * walk (dims, ystride) of y (yt, packed): along each dim the bias must
 * stay put within a channel's plane and step with the channel. Gives the
 * bias's stride between channels; false when it reads otherwise. */
static bool channel_stride(const struct opc_kargs *a, const Tensor *yt, long long *stride) {
  long long plane = 1, channels = yt->rank > 1 ? yt->dims[1] : 1;
  for (int d = 2; d < yt->rank; d++)
    plane *= yt->dims[d];
  *stride = 0;
  bool found = channels == 1;
  for (int k = 0; k < a->rank; k++) {
    long long step = a->ystride[k], span = step * a->dims[k], b = a->xstride[1][k];
    if (a->dims[k] == 1)
      continue;
    if (span <= plane || step >= plane * channels) {
      if (b != 0)
        return false; /* within a plane, or across images: one bias */
    } else if (step >= plane && step % plane == 0 && span <= plane * channels) {
      if (found || b % (step / plane))
        return false;
      *stride = b / (step / plane);
      found = true;
    } else {
      return false; /* a dim that crosses planes and channels at once */
    }
  }
  return found;
}

bool kernel_is_conv_epilogue(const Op *op, const void *y, const Tensor *yt, ConvEpilogue *ep) {
  const struct opc_kargs *a = in_place_over(op, y, yt);
  if (!a || a->adds < 1 || a->adds > 2 || a->rank < 1 ||
      memcmp(a->xstride[0], a->ystride, sizeof(long long) * (size_t)a->rank) != 0)
    return false;
  /* z, when added, read where y is: the convolution's z at y's strides. */
  if (a->adds > 1 && memcmp(a->xstride[2], a->ystride, sizeof(long long) * (size_t)a->rank) != 0)
    return false;
  if (!channel_stride(a, yt, &ep->bias_stride) || !act_of_code(a, &ep->act))
    return false;
  ep->bias = (const float *)a->x[1];
  ep->z = a->adds > 1 ? (const float *)a->x[2] : NULL;
  return true;
}
