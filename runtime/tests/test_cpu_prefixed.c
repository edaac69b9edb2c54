/*
 * test_cpu_prefixed.c - the prefixed CPU runtime (libopcrt_cpu.a,
 * opc_cpu.h) linked beside the plain one (libopcrt.a), as a program that
 * places some operators on the CPU uses it beside the real CUDA libraries:
 * here the plain runtime plays the GPU.
 *
 * A GPU stream copies the input into CPU-runtime memory, a host function on
 * that stream runs a convolution (cpu_cudnn) and a kernel (cpu_cuLaunchKernel)
 * on a cpu_ stream and waits for them, the GPU stream copies the result back
 * and applies a ReLU (cudnn), and the numbers are checked against direct
 * loops. A cpu_cublasSgemm runs too, and the two copies' state (current
 * device, last error, allocations) is checked to be separate.
 */
#include <string.h>

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "opc_cpu.h"

#include "../kernels/opc_kargs.h"
#include "testutil.h"

#ifndef OPC_CPU_RUNTIME
#error "the plain runtime's headers define OPC_CPU_RUNTIME"
#endif
#ifndef OPC_CPU_RUNTIME_PREFIXED
#error "opc_cpu.h defines OPC_CPU_RUNTIME_PREFIXED"
#endif

enum { N = 2, C = 3, H = 9, W = 7, K = 4, R = 3, S = 3 };
#define XSIZE (N * C * H * W)
#define WSIZE (K * C * R * S)
#define YSIZE (N * K * H * W) /* pad 1, stride 1: same height and width */

/* What the host function on the GPU stream needs. */
typedef struct CpuWork {
  cpu_cudaStream_t stream;
  cpu_cudnnHandle_t dnn;
  cpu_cudnnTensorDescriptor_t xd, yd;
  cpu_cudnnFilterDescriptor_t wd;
  cpu_cudnnConvolutionDescriptor_t cd;
  cpu_CUfunction copy;
  float *x, *w, *conv, *y; /* cpu_cudaMalloc'd */
  void *ws;
  size_t ws_size;
  int ran, ok;
} CpuWork;

static void expect_rt(cudaError_t e, const char *what) {
  if (e != cudaSuccess)
    fail("%s: %s", what, cudaGetErrorName(e));
}

static void expect_cpu(cpu_cudaError_t e, const char *what) {
  if (e != cpu_cudaSuccess)
    fail("%s: %s", what, cpu_cudaGetErrorName(e));
}

/* Runs inside the GPU stream: the CPU-placed part of the program. */
static void cpu_part(void *arg) {
  CpuWork *cw = arg;
  float one = 1, zero = 0;
  cw->ran = 1;
  cw->ok = cpu_cudnnConvolutionForward(cw->dnn, &one, cw->xd, cw->x, cw->wd, cw->w, cw->cd,
                                       cpu_CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, cw->ws,
                                       cw->ws_size, &zero, cw->yd, cw->conv) ==
           cpu_CUDNN_STATUS_SUCCESS;
  struct opc_kargs a;
  memset(&a, 0, sizeof a);
  a.x[0] = cw->conv;
  a.y = cw->y;
  a.n = YSIZE;
  a.rank = 1;
  a.dims[0] = YSIZE;
  a.xstride[0][0] = 1;
  a.ystride[0] = 1;
  a.x_extent[0] = YSIZE * sizeof(float);
  a.y_extent = YSIZE * sizeof(float);
  void *params[] = {&a};
  cw->ok &= cpu_cuLaunchKernel(cw->copy, 1, 1, 1, 256, 1, 1, 0, cw->stream, params, NULL) ==
            cpu_CUDA_SUCCESS;
  cw->ok &= cpu_cudaStreamSynchronize(cw->stream) == cpu_cudaSuccess;
}

static void conv_reference(const float *x, const float *w, float *y) {
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++)
      for (int h = 0; h < H; h++)
        for (int v = 0; v < W; v++) {
          double acc = 0;
          for (int c = 0; c < C; c++)
            for (int r = 0; r < R; r++)
              for (int s = 0; s < S; s++) {
                int ih = h + r - 1, iw = v + s - 1;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                  acc += (double)x[((n * C + c) * H + ih) * W + iw] * w[((k * C + c) * R + r) * S + s];
              }
          float f = (float)acc;
          y[((n * K + k) * H + h) * W + v] = f > 0 ? f : 0;
        }
}

static void test_pipeline(void) {
  CpuWork cw;
  memset(&cw, 0, sizeof cw);
  float *hx = rnd_array(XSIZE), *hw = rnd_array(WSIZE), want[YSIZE], got[YSIZE];
  conv_reference(hx, hw, want);

  /* The GPU side. */
  cudaStream_t gs;
  cudnnHandle_t gdnn;
  cudnnTensorDescriptor_t gyd;
  cudnnActivationDescriptor_t relu;
  float *dx, *dy, *hout;
  expect_rt(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking), "cudaStreamCreate");
  expect(cudnnCreate(&gdnn) == CUDNN_STATUS_SUCCESS, "cudnnCreate");
  cudnnSetStream(gdnn, gs);
  cudnnCreateTensorDescriptor(&gyd);
  cudnnSetTensor4dDescriptor(gyd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, H, W);
  cudnnCreateActivationDescriptor(&relu);
  cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0);
  expect_rt(cudaMalloc((void **)&dx, XSIZE * 4), "cudaMalloc");
  expect_rt(cudaMalloc((void **)&dy, YSIZE * 4), "cudaMalloc");
  expect_rt(cudaMallocHost((void **)&hout, YSIZE * 4), "cudaMallocHost");

  /* The CPU side. */
  expect_cpu(cpu_cudaStreamCreateWithFlags(&cw.stream, cpu_cudaStreamNonBlocking),
             "cpu_cudaStreamCreate");
  expect(cpu_cudnnCreate(&cw.dnn) == cpu_CUDNN_STATUS_SUCCESS, "cpu_cudnnCreate");
  cpu_cudnnSetStream(cw.dnn, cw.stream);
  cpu_cudnnCreateTensorDescriptor(&cw.xd);
  cpu_cudnnCreateTensorDescriptor(&cw.yd);
  cpu_cudnnCreateFilterDescriptor(&cw.wd);
  cpu_cudnnCreateConvolutionDescriptor(&cw.cd);
  cpu_cudnnSetTensor4dDescriptor(cw.xd, cpu_CUDNN_TENSOR_NCHW, cpu_CUDNN_DATA_FLOAT, N, C, H, W);
  cpu_cudnnSetTensor4dDescriptor(cw.yd, cpu_CUDNN_TENSOR_NCHW, cpu_CUDNN_DATA_FLOAT, N, K, H, W);
  cpu_cudnnSetFilter4dDescriptor(cw.wd, cpu_CUDNN_DATA_FLOAT, cpu_CUDNN_TENSOR_NCHW, K, C, R, S);
  cpu_cudnnSetConvolution2dDescriptor(cw.cd, 1, 1, 1, 1, 1, 1, cpu_CUDNN_CROSS_CORRELATION,
                                      cpu_CUDNN_DATA_FLOAT);
  int n, c, h, w;
  cpu_cudnnGetConvolution2dForwardOutputDim(cw.cd, cw.xd, cw.wd, &n, &c, &h, &w);
  expect(n == N && c == K && h == H && w == W, "cpu_ convolution output dims");
  expect(cpu_cudnnGetConvolutionForwardWorkspaceSize(
             cw.dnn, cw.xd, cw.wd, cw.cd, cw.yd, cpu_CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
             &cw.ws_size) == cpu_CUDNN_STATUS_SUCCESS,
         "cpu_ workspace size");
  expect_cpu(cpu_cudaMalloc((void **)&cw.x, XSIZE * 4), "cpu_cudaMalloc");
  expect_cpu(cpu_cudaMalloc((void **)&cw.w, WSIZE * 4), "cpu_cudaMalloc");
  expect_cpu(cpu_cudaMalloc((void **)&cw.conv, YSIZE * 4), "cpu_cudaMalloc");
  expect_cpu(cpu_cudaMalloc((void **)&cw.y, YSIZE * 4), "cpu_cudaMalloc");
  if (cw.ws_size)
    expect_cpu(cpu_cudaMalloc(&cw.ws, cw.ws_size), "cpu_cudaMalloc workspace");
  /* From pageable memory the copy may still be in flight when it returns
     (and it is on the legacy stream, which the non-blocking cpu_ stream does
     not wait for): the checking mode would call the convolution a race. */
  expect_cpu(cpu_cudaMemcpy(cw.w, hw, WSIZE * 4, cpu_cudaMemcpyHostToDevice), "cpu_cudaMemcpy");
  expect_cpu(cpu_cudaDeviceSynchronize(), "cpu_cudaDeviceSynchronize");
  cpu_CUmodule mod;
  const char *ptx = ".version 8.0\n.target sm_90\n.address_size 64\n";
  expect(cpu_cuModuleLoadData(&mod, ptx) == cpu_CUDA_SUCCESS &&
             cpu_cuModuleGetFunction(&cw.copy, mod, "opc_copy_b4") == cpu_CUDA_SUCCESS,
         "cpu_ kernel opc_copy_b4");

  /* The CPU runtime's memory is host memory to the GPU: pinned, as the
     real program registers it. */
  expect_rt(cudaHostRegister(cw.x, XSIZE * 4, cudaHostRegisterDefault), "cudaHostRegister x");
  expect_rt(cudaHostRegister(cw.y, YSIZE * 4, cudaHostRegisterDefault), "cudaHostRegister y");

  /* The program: GPU, then the CPU part inside the GPU stream, then GPU. */
  expect_rt(cudaMemcpyAsync(dx, hx, XSIZE * 4, cudaMemcpyHostToDevice, gs), "H2D");
  expect_rt(cudaMemcpyAsync(cw.x, dx, XSIZE * 4, cudaMemcpyDeviceToHost, gs), "GPU to CPU");
  expect_rt(cudaLaunchHostFunc(gs, cpu_part, &cw), "cudaLaunchHostFunc");
  expect_rt(cudaMemcpyAsync(dy, cw.y, YSIZE * 4, cudaMemcpyHostToDevice, gs), "CPU to GPU");
  float one = 1, zero = 0;
  expect(cudnnActivationForward(gdnn, relu, &one, gyd, dy, &zero, gyd, dy) ==
             CUDNN_STATUS_SUCCESS,
         "cudnnActivationForward");
  expect_rt(cudaMemcpyAsync(hout, dy, YSIZE * 4, cudaMemcpyDeviceToHost, gs), "D2H");
  expect_rt(cudaStreamSynchronize(gs), "cudaStreamSynchronize");
  expect(cw.ran && cw.ok, "the CPU part ran inside the GPU stream");
  memcpy(got, hout, sizeof got);
  close_arrays("relu(conv) through both runtimes", got, want, YSIZE, 1e-4f);

  expect_rt(cudaHostUnregister(cw.x), "cudaHostUnregister");
  expect_rt(cudaHostUnregister(cw.y), "cudaHostUnregister");
  expect(cpu_cuModuleUnload(mod) == cpu_CUDA_SUCCESS, "cpu_cuModuleUnload");
  cpu_cudnnDestroyTensorDescriptor(cw.xd);
  cpu_cudnnDestroyTensorDescriptor(cw.yd);
  cpu_cudnnDestroyFilterDescriptor(cw.wd);
  cpu_cudnnDestroyConvolutionDescriptor(cw.cd);
  cpu_cudnnDestroy(cw.dnn);
  expect_cpu(cpu_cudaStreamDestroy(cw.stream), "cpu_cudaStreamDestroy");
  expect_cpu(cpu_cudaFree(cw.x), "cpu_cudaFree");
  expect_cpu(cpu_cudaFree(cw.w), "cpu_cudaFree");
  expect_cpu(cpu_cudaFree(cw.conv), "cpu_cudaFree");
  expect_cpu(cpu_cudaFree(cw.y), "cpu_cudaFree");
  expect_cpu(cpu_cudaFree(cw.ws), "cpu_cudaFree");
  cudnnDestroyTensorDescriptor(gyd);
  cudnnDestroyActivationDescriptor(relu);
  cudnnDestroy(gdnn);
  expect_rt(cudaStreamDestroy(gs), "cudaStreamDestroy");
  expect_rt(cudaFree(dx), "cudaFree");
  expect_rt(cudaFree(dy), "cudaFree");
  expect_rt(cudaFreeHost(hout), "cudaFreeHost");
  free(hx);
  free(hw);
}

/* cuBLAS through the prefix (cpu_cublasCreate is a macro for
   cpu_cublasCreate_v2, as in the real header). */
static void test_cublas(void) {
  enum { M = 5, NN = 4, KK = 3 };
  float ha[M * KK], hb[KK * NN], hc[M * NN], want[M * NN];
  for (int i = 0; i < M * KK; i++)
    ha[i] = rnd();
  for (int i = 0; i < KK * NN; i++)
    hb[i] = rnd();
  for (int i = 0; i < M; i++) /* column-major */
    for (int j = 0; j < NN; j++) {
      float acc = 0;
      for (int k = 0; k < KK; k++)
        acc += ha[k * M + i] * hb[j * KK + k];
      want[j * M + i] = acc;
    }
  cpu_cublasHandle_t b;
  cpu_cudaStream_t s;
  float *a, *bb, *cc, one = 1, zero = 0;
  expect(cpu_cublasCreate(&b) == cpu_CUBLAS_STATUS_SUCCESS, "cpu_cublasCreate");
  cpu_cudaStreamCreate(&s);
  cpu_cublasSetStream(b, s);
  cpu_cudaMalloc((void **)&a, sizeof ha);
  cpu_cudaMalloc((void **)&bb, sizeof hb);
  cpu_cudaMalloc((void **)&cc, sizeof hc);
  cpu_cudaMemcpyAsync(a, ha, sizeof ha, cpu_cudaMemcpyHostToDevice, s);
  cpu_cudaMemcpyAsync(bb, hb, sizeof hb, cpu_cudaMemcpyHostToDevice, s);
  expect(cpu_cublasSgemm(b, cpu_CUBLAS_OP_N, cpu_CUBLAS_OP_N, M, NN, KK, &one, a, M, bb, KK, &zero,
                         cc, M) == cpu_CUBLAS_STATUS_SUCCESS,
         "cpu_cublasSgemm");
  cpu_cudaMemcpyAsync(hc, cc, sizeof hc, cpu_cudaMemcpyDeviceToHost, s);
  expect_cpu(cpu_cudaStreamSynchronize(s), "cpu_cudaStreamSynchronize");
  close_arrays("cpu_cublasSgemm", hc, want, M * NN, 1e-5f);
  cpu_cudaFree(a);
  cpu_cudaFree(bb);
  cpu_cudaFree(cc);
  cpu_cudaStreamDestroy(s);
  cpu_cublasDestroy(b);
}

/* Each copy has its own state. */
static void test_separate_state(void) {
  int n_gpu = 0, n_cpu = 0, dev = -1, cdev = -1;
  expect_rt(cudaGetDeviceCount(&n_gpu), "cudaGetDeviceCount");
  expect_cpu(cpu_cudaGetDeviceCount(&n_cpu), "cpu_cudaGetDeviceCount");
  expect(n_gpu >= 1 && n_cpu >= 1, "both runtimes have devices");
  if (n_gpu >= 2 && n_cpu >= 3) {
    expect_rt(cudaSetDevice(1), "cudaSetDevice(1)");
    expect_cpu(cpu_cudaSetDevice(2), "cpu_cudaSetDevice(2)");
    cudaGetDevice(&dev);
    cpu_cudaGetDevice(&cdev);
    expect(dev == 1 && cdev == 2, "each runtime keeps its own current device");
    expect_cpu(cpu_cudaSetDevice(0), "cpu_cudaSetDevice(0)");
    cudaGetDevice(&dev);
    expect(dev == 1, "cpu_cudaSetDevice leaves the other runtime's device");
    expect_rt(cudaSetDevice(0), "cudaSetDevice(0)");
  }
  /* The last error. */
  cudaGetLastError();
  cpu_cudaGetLastError();
  expect(cpu_cudaSetDevice(-1) == cpu_cudaErrorInvalidDevice, "cpu_cudaSetDevice(-1) refused");
  expect(cudaPeekAtLastError() == cudaSuccess, "the other runtime's last error is untouched");
  expect(cpu_cudaGetLastError() == cpu_cudaErrorInvalidDevice, "cpu_ last error kept");
  /* Allocations: each runtime knows only its own. */
  void *g = NULL, *p = NULL;
  expect_rt(cudaMalloc(&g, 256), "cudaMalloc");
  expect_cpu(cpu_cudaMalloc(&p, 256), "cpu_cudaMalloc");
  expect(cpu_cudaFree(g) == cpu_cudaErrorInvalidDevicePointer,
         "cpu_cudaFree refuses the other runtime's pointer");
  expect(cudaFree(p) == cudaErrorInvalidDevicePointer,
         "cudaFree refuses the cpu_ runtime's pointer");
  cudaGetLastError();
  cpu_cudaGetLastError();
  expect_rt(cudaFree(g), "cudaFree");
  expect_cpu(cpu_cudaFree(p), "cpu_cudaFree");
}

int main(void) {
  test_separate_state();
  test_pipeline();
  test_cublas();
  return finish("test_cpu_prefixed");
}
