/*
 * dnn.h - internals of the cuDNN implementation: descriptor contents, the
 * strided element walker and the activation functions.
 */
#ifndef OPC_DNN_H
#define OPC_DNN_H

#include <math.h>

#include "cudnn.h"
#include "rt.h"

#define MAX_DIMS 8

/* A tensor layout: dims and strides in elements, outermost first. */
typedef struct Tensor {
  cudnnDataType_t type;
  int rank; /* 0 until set */
  long long dims[MAX_DIMS];
  long long strides[MAX_DIMS];
} Tensor;

struct cudnnTensorStruct {
  Tensor t;
};

struct cudnnFilterStruct {
  cudnnDataType_t type;
  int rank; /* 0 until set; K, C, then spatial dims */
  long long dims[MAX_DIMS];
  cudnnTensorFormat_t format; /* NCHW: packed in that order; NHWC: K, spatial dims, C */
};

struct cudnnConvolutionStruct {
  int nspatial; /* 0 until set */
  int pad[3], stride[3], dilation[3];
  cudnnConvolutionMode_t mode;
  cudnnDataType_t compute; /* FLOAT, or HALF for HALF data (computed in float all the same) */
  int groups;
  cudnnMathType_t math;
};

struct cudnnActivationStruct {
  bool set;
  cudnnActivationMode_t mode;
  double coef;
  double swish_beta;
};

struct cudnnPoolingStruct {
  int nspatial; /* 0 until set */
  cudnnPoolingMode_t mode;
  int window[3], pad[3], stride[3];
};

struct cudnnOpTensorStruct {
  bool set;
  cudnnOpTensorOp_t op;
};

struct cudnnReduceTensorStruct {
  bool set;
  cudnnReduceTensorOp_t op;
  cudnnReduceTensorIndices_t indices;
  cudnnIndicesType_t index_type;
};

struct cudnnLRNStruct {
  unsigned n;
  double alpha, beta, k;
};

/*
 * Kinds of calls, for the lazy initialisation model: a handle loads what a
 * kind of call needs on its first use, which a capture cannot record, so
 * that use must happen eagerly, outside any capture (see README.md).
 */
typedef enum {
  DNN_CONV_FWD,
  DNN_CONV_BIAS_ACT,
  DNN_CONV_BWD_DATA,
  DNN_OP_TENSOR, /* cudnnOpTensor, cudnnAddTensor */
  DNN_ACTIVATION,
  DNN_POOLING,
  DNN_SOFTMAX,
  DNN_REDUCTION,
  DNN_LRN,
  DNN_BATCH_NORM,
  DNN_TRANSFORM,
  DNN_FILL, /* cudnnSetTensor, cudnnScaleTensor */
} DnnKind;

struct cudnnContext {
  cudaStream_t stream;
  int device;    /* current when it was created: NULL is its legacy stream */
  unsigned warm; /* bit k: kind k has run eagerly; guarded by rt.lock */
};

cudnnStatus_t dnn_status(cudaError_t err);
/* CUDNN_STATUS_EXECUTION_FAILED once a race was seen, else SUCCESS. */
cudnnStatus_t dnn_enter(void);
/* Submits op, a call of `kind`, on the handle's stream and maps the result;
 * inside a capture, fails with CUDNN_STATUS_NOT_INITIALIZED unless the
 * handle has run that kind eagerly. */
cudnnStatus_t dnn_submit(cudnnHandle_t h, Op *op, DnnKind kind);
/* Marks a kind as run eagerly (cudnnFind* runs its kernels). */
void dnn_warm(cudnnHandle_t h, DnnKind kind);
/* Whether the handle's stream is capturing; if so, invalidates the
 * capture. rt.lock held. */
bool dnn_capturing_locked(cudnnHandle_t h);
/* Checks a workspace argument against the `need` bytes of the call's
 * algorithm: BAD_PARAM when smaller (or NULL). The caller then records
 * that its op overwrites them (span_workspace). */
cudnnStatus_t dnn_workspace_ok(const void *ws, size_t size, size_t need);
void span_workspace(Op *op, void *ws, size_t need);
/* Bytes per element of a data type, 0 for unsupported ones. */
size_t dnn_type_size(cudnnDataType_t type);
long long tensor_count(const Tensor *t);
/* Records the tensor's bytes in the op's spans. */
void span_tensor(Op *op, const void *p, const Tensor *t, bool write);
/* Records an output the op writes; with beta != 0 the old values are read
   too, since they are blended into the result. */
void span_output(Op *op, const void *y, const Tensor *yt, float beta);
bool same_dims(const Tensor *a, const Tensor *b);
/* Checks an input x and an output y of the same dims (min_rank or more)
 * and of type float, in cuDNN's order: NOT_FINALIZED, SHAPE_MISMATCH,
 * NOT_SUPPORTED_DATA_TYPE. */
cudnnStatus_t check_same_float(const Tensor *xt, const Tensor *yt, int min_rank);

/* ---- 16-bit tensors (see half.c) ---- */

_Static_assert(MAX_DIMS <= HALF_MAX_DIMS, "a tensor's dims must fit a HalfArg");

/* FLOAT, HALF or BFLOAT16: the types the convolutions, pooling, activations,
 * op tensors and reductions compute (HALF and BFLOAT16 through float
 * copies). */
bool dnn_float_type(cudnnDataType_t type);
/* An input x and an output y that must have one type, as cuDNN's
 * activations and pooling want: BAD_PARAM when they differ,
 * NOT_SUPPORTED_DATA_TYPE when it is none of dnn_float_type's. */
cudnnStatus_t check_pair_type(const Tensor *xt, const Tensor *yt);
/* The layout the float op sees for t: t itself when it is float, else its
 * float copy's (packed, type FLOAT). */
Tensor dnn_float_view(const Tensor *t);
/* The HalfArg of tensor (p, t); STORE_F32 when t is float. */
HalfArg dnn_half_arg(const void *p, const Tensor *t, bool read, bool write);

/* ---- activations ---- */

typedef struct Act {
  cudnnActivationMode_t mode; /* or one of ActKernelMode */
  float coef, swish_beta;
  float offset; /* KERNEL_ACT_HARD_SIGMOID's beta */
} Act;

/*
 * e^x as straight-line arithmetic, within 1.2 ulp of the exact value
 * wherever that is a normal float: x = n ln 2 + r, with n rounded to the
 * nearest integer, e^r a degree-7 Taylor polynomial on |r| <= ln 2 / 2,
 * and 2^n applied as two powers of two, so that overflow gives inf and
 * underflow 0 or a subnormal; NaN stays NaN. A loop that calls it (the
 * sigmoids of the conv epilogues) vectorises into a dozen instructions,
 * where libmvec's expf is a call with every live vector register spilled
 * around it.
 */
static inline float exp_inline(float x) {
  x = x < -104.0f ? -104.0f : x;
  x = x > 89.0f ? 89.0f : x;
  /* Adding 1.5 2^23 rounds to an integer, which the low bits then hold:
   * reading n from them rather than converting a float needs no guard
   * for NaN, whose garbage exponent the NaN in p overrides anyway. */
  union {
    float f;
    unsigned bits;
  } shifted = {.f = x * 1.44269504f + 12582912.0f};
  float n = shifted.f - 12582912.0f;
  float r = x - n * 0.693359375f; /* ln 2 in two parts: n times the first is exact */
  r = r + n * 2.12194440e-4f;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  unsigned e = shifted.bits - 0x4b400000u; /* n, two's complement */
  unsigned e1 = (e >> 1) | (e & 0x80000000u), e2 = e - e1;
  union {
    unsigned bits;
    float f;
  } s1 = {.bits = (e1 + 127) << 23}, s2 = {.bits = (e2 + 127) << 23};
  return p * s1.f * s2.f;
}

/* The formulas of the activations, taking e^x from exp_inline. */
#define OPC_SCALAR_EXP exp_inline
#include "scalar.h"

/*
 * Activations of opc's own kernels that cuDNN has no mode for, which a
 * convolution may still run in its epilogue when the emitted program
 * launches them in place right after it (kernel_is_activation_in_place):
 * one per row of scalar.h's list, KERNEL_ACT_BASE past its code, with
 * coef and offset as its parameters. They lie outside cuDNN's enum, and
 * cudnnSetActivationDescriptor refuses them, so no caller can ask for one.
 */
enum { KERNEL_ACT_BASE = 64 };
typedef enum ActKernelMode {
#define KERNEL_ACT_MODE(NAME, name, params) KERNEL_ACT_##NAME = KERNEL_ACT_BASE + OPC_ACT_##NAME,
  OPC_ACTIVATIONS(KERNEL_ACT_MODE)
#undef KERNEL_ACT_MODE
} ActKernelMode;

/*
 * Stride 2 over a packed row, the common case of a split by column phase
 * (the depthwise planes, strided pools): padded columns [lo, hi),
 * at from[lo..hi), go to the even phase (even[q / 2]) or the odd one
 * (odd[q / 2]). Whole pairs are one deinterleaving loop, which the
 * compiler vectorises with shuffles: restrict spares it the overlap checks
 * that otherwise sent it down the scalar path.
 */
static inline void split_phases2(float *restrict even, float *restrict odd,
                                 const float *restrict from, int lo, int hi) {
  int q = lo;
  if (q < hi && q % 2) {
    odd[q / 2] = from[q];
    q++;
  }
  int pairs = (hi - q) / 2, half = q / 2;
  for (int k = 0; k < pairs; k++) {
    even[half + k] = from[q + 2 * k];
    odd[half + k] = from[q + 2 * k + 1];
  }
  q += 2 * pairs;
  if (q < hi)
    even[q / 2] = from[q];
}

/*
 * Sixteen floats at any float's place, and their bits. Loops over a row
 * that need e^x are written with these rather than left to the
 * vectoriser: in a plain loop GCC threads exp_inline's clamps through the
 * rest of the formula, copying it, divisions and all, once per clamp
 * (three divides per vector in the Swish epilogue).
 */
typedef float F16 __attribute__((vector_size(64), aligned(4), may_alias));
typedef int I16 __attribute__((vector_size(64)));
typedef unsigned U16 __attribute__((vector_size(64)));

static inline __attribute__((always_inline)) F16 f16_splat(float v) {
  F16 zero = {0};
  return zero + v;
}

static inline __attribute__((always_inline)) F16 f16_select(I16 mask, F16 a, F16 b) {
  return (F16)((mask & (I16)a) | (~mask & (I16)b));
}

/* exp_inline on sixteen values, step for step. */
static inline __attribute__((always_inline)) F16 exp16(F16 x) {
  x = f16_select(x < -104.0f, f16_splat(-104.0f), x);
  x = f16_select(x > 89.0f, f16_splat(89.0f), x);
  F16 shifted = x * 1.44269504f + 12582912.0f;
  F16 n = shifted - 12582912.0f;
  F16 r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  F16 p = r * (1.0f / 5040) + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  I16 e = (I16)shifted - 0x4b400000, e1 = e >> 1, e2 = e - e1;
  return p * (F16)((U16)(e1 + 127) << 23) * (F16)((U16)(e2 + 127) << 23);
}

static inline __attribute__((always_inline)) F16 sigmoid16(F16 v) {
  return 1.0f / (1.0f + exp16(-v));
}

static inline __attribute__((always_inline)) F16 swish16(F16 v, float beta) {
  return v / (1.0f + exp16(-beta * v));
}

/* The activation, by scalar.h's formulas (with exp_inline); a code of
 * scalar.h's list past KERNEL_ACT_BASE for opc's own. */
static inline float act_apply(const Act *a, float v) {
  switch ((int)a->mode) {
  case CUDNN_ACTIVATION_SIGMOID: return opc_sigmoid_of(v);
  case CUDNN_ACTIVATION_RELU: return opc_clipped_relu_of(v, INFINITY);
  case CUDNN_ACTIVATION_TANH: return opc_tanh_of(v);
  case CUDNN_ACTIVATION_CLIPPED_RELU: return opc_clipped_relu_of(v, a->coef);
  case CUDNN_ACTIVATION_ELU: return opc_elu_of(v, a->coef);
  case CUDNN_ACTIVATION_SWISH: return opc_swish_of(v, a->swish_beta);
  case CUDNN_ACTIVATION_IDENTITY: return v;
  }
  return opc_activation_of((int)a->mode - KERNEL_ACT_BASE, v, a->coef, a->offset);
}

/* y = alpha * act(x) + beta * y over n contiguous values: one loop per
 * mode, so that they vectorise (with exp_inline, and libmvec's tanhf). */
void act_row(const Act *act, const float *x, float *y, long long n, float alpha, float beta);

/* ---- element-wise ops a convolution can fold into its epilogue ---- */

/* Whether op is cudnnAddTensor(alpha 1, bias, beta 1) onto exactly (y, yt)
 * with the bias broadcast over every dim but the channels (dim 1); gives
 * the bias and its stride between channels. */
bool ew_is_channel_bias(const Op *op, const void *y, const Tensor *yt, const float **bias,
                        long long *stride);
/* Whether op is cudnnActivationForward(alpha 1, beta 0) in place on exactly
 * (y, yt); gives the activation. */
bool ew_is_activation_in_place(const Op *op, const void *y, const Tensor *yt, Act *act);
/* The same for a launch of one of opc's activation kernels (module.c):
 * in place over exactly (y, yt), which must be packed. */
bool kernel_is_activation_in_place(const Op *op, const void *y, const Tensor *yt, Act *act);
/* What a launch of opc's convolution epilogue (opc_kargs.h: adds) does to
 * y: y = act(y + bias + z), the bias per channel, z (or NULL) at y's own
 * offsets. */
typedef struct ConvEpilogue {
  const float *bias, *z;
  long long bias_stride; /* between channels */
  Act act;
} ConvEpilogue;
/* Whether op is such a launch in place over exactly (y, yt), packed. */
bool kernel_is_conv_epilogue(const Op *op, const void *y, const Tensor *yt, ConvEpilogue *ep);

/* ---- the convolutions' register tile (conv_tile.c) ---- */

#define TILE_ROWS 8  /* output channels per tile */
#define TILE_COLS 48 /* output positions per tile, at most */

/* Whether this CPU runs tiles: AVX-512, and OPC_KERNEL_ISA allows it. */
bool tile_available(void);
/* Whether the tiles' stores (TileStore, ChanStore) apply activation mode
 * (a cuDNN mode, or KERNEL_ACT_BASE past a code of scalar.h's list). */
bool tile_activates(int mode);
/* out[m * TILE_COLS + j] = sum over r < R of w[m][r] * rows[r][p0 + j],
 * for m < TILE_ROWS and j < ncols (1 to TILE_COLS); rows[r][p0 + j] is
 * read only for j < ncols. */
void tile_multiply(const float *const *w, int R, const float *const *rows, long long p0,
                   int ncols, float *out);

/* Where a tile's results go when the convolution's epilogue is one the
 * tiles apply themselves: y = act(alpha v + bias + alpha2 z), act one that
 * tile_activates() (coef: the clipped ReLU's ceiling, Swish's beta), each
 * channel's plane packed, position q of the tile's plane
 * (rows of wq) being output (q / wq, q % wq) and dropped when q % wq >= ow. */
typedef struct TileStore {
  float *y[TILE_ROWS];       /* NULL for channels past the last */
  const float *z[TILE_ROWS]; /* NULL without a residual */
  float bias[TILE_ROWS];
  float alpha, alpha2, coef;
  int mode;
  int wq, ow;
} TileStore;

/* tile_multiply, then the results written straight to y, for plane
 * positions q0 to q0 + ncols - 1. */
void tile_multiply_store(const float *const *w, int R, const float *const *rows, long long p0,
                         long long q0, int ncols, const TileStore *st);

/* ---- chan: output channels along the vectors (conv_tile.c) ---- */

/*
 * Where the tiles pay for the extra positions of their padded rows (a
 * third more on a 7x7 plane) and for vectors of positions that a short
 * plane does not fill, the output channels go along the vectors instead:
 * 16 or 32 channels by up to CHAN_COLS positions of one output row, each
 * input value broadcast. The filters are first packed for each block of
 * channels into a panel of R rows of 16 nv floats (chan_pack), reused by
 * every tile of the plane; the results are transposed in registers to
 * reach y's channel planes.
 */
#define CHAN_COLS 12

/* Where a chan tile's results go: y = act(alpha v + bias + alpha2 z), act
 * one that tile_activates(). y, z: channel k0's plane of the image. */
typedef struct ChanStore {
  float *y;
  const float *z; /* NULL without a residual */
  long long ys, zs; /* between channels */
  float bias[32];   /* channels k0 to k0 + 31 */
  float alpha, alpha2, coef;
  int mode;
  int kvalid;       /* channels from k0 on that exist */
} ChanStore;

/* panel[r][16 v + i] = w[(16 v + i) ldw + r] for i < kvalid - 16 v, else 0;
 * v < nv (1 or 2), r < R. */
void chan_pack(const float *w, long long ldw, int kvalid, int nv, int R, float *panel);
/* The filter rows a tile sums: first + i stride + j for i < runs, j < len
 * (all R of them as one run, or those of the filter rows that do not read
 * only padding for the tile's output row). */
typedef struct ChanRows {
  int runs, len, stride, first;
} ChanRows;

/* For positions j < np (1 to CHAN_COLS): the sum over rs's rows r of
 * panel[r][c] * rows[r][q + j], through st's epilogue to y[c][at + j]. */
void chan_multiply_store(const float *panel, int nv, const ChanRows *rs,
                         const float *const *rows, long long q, long long at, int np,
                         const ChanStore *st);

/*
 * A depthwise filter on 16 channels along the vectors: their input is
 * transposed into one zero-padded plane of 16-float positions (buf), so
 * that every tap of every output is one aligned vector, whatever the
 * stride; an output tile is up to CHAN_DW_COLS positions of one row.
 */
#define CHAN_DW_COLS 14

typedef struct ChanDw {
  const float *x;          /* the first channel's input plane */
  long long xs_c, xs_h;    /* between channels and rows; columns are packed */
  int in_w;
  int pad_h, pad_w;        /* input (h, w) is at buf's row h + pad_h, column w + pad_w */
  int rows, width;         /* buf's rows and columns: those the taps reach */
  float *buf;              /* rows * width * 16 floats, 64-byte aligned, padding zeroed */
  const float *wv;         /* taps * 16: tap t's weight for each channel, 64-byte aligned */
  const long long *tap_at; /* tap t's offset into buf, in floats */
  int taps;
  int stride_h, stride_w;  /* stride_w 1 or 2 */
  int out_w;
} ChanDw;

/* Input rows [h0, h1) of channels 0 to kvalid - 1 (the rest zero) into buf. */
void chan_dw_fill(const ChanDw *d, int kvalid, int h0, int h1);
/* Output row oh, positions ow0 to ow0 + np - 1 (np 1 to CHAN_DW_COLS),
 * of the 16 channels through st's epilogue (st: channel 0 of the 16). */
void chan_dw_store(const ChanDw *d, int oh, int ow0, int np, const ChanStore *st);

/* ---- the walker: parallel loops over strided tensors ---- */

#define WALK_OPS 4

/*
 * Visits every index of `dims` (row-major) for up to WALK_OPS operands,
 * each with its own strides (0 broadcasts). Dims that are contiguous for
 * every operand are merged first, so most walks are one long row. The row
 * function gets each operand's pointer at the row start, its stride along
 * the row, and the row length.
 */
typedef struct Walk {
  int rank, nops;
  size_t elem;
  long long dims[MAX_DIMS];
  long long strides[WALK_OPS][MAX_DIMS];
  char *base[WALK_OPS];
  long long total;
} Walk;

typedef void RowFn(void *ctx, char *const *p, const long long *s, long long n);

void walk_init(Walk *w, int rank, const long long *dims, size_t elem);
/* Adds an operand; strides in elements, one per dim of the walk. */
void walk_add(Walk *w, const void *base, const long long *strides);
void walk_run(Walk *w, RowFn *row, void *ctx);

/* Strides that broadcast `t` over `dims` (0 where t has 1), or false when
 * t's dims do not broadcast to them. */
bool broadcast_strides(const Tensor *t, int rank, const long long *dims, long long *out);

#endif
