/*
 * cublasLt.h - opc's CPU implementation of the cuBLASLt subset that opc's
 * GEMMs use: a handle, a matmul descriptor, matrix layouts and
 * cublasLtMatmul, declared from NVIDIA's cuBLASLt documentation with CUDA
 * 13's values. Two cases are computed, under the restrictions the
 * documentation states for them (runtime/README.md, "Int8 GEMM" and
 * "Float matmul with epilogues"): the integer one (A and B CUDA_R_8I, C
 * and D CUDA_R_32I, CUBLAS_COMPUTE_32I, int32 alpha and beta), and
 * float32, float16 or bfloat16 matrices with float32 compute and scale,
 * with the bias, ReLU and GELU epilogues; other types return
 * CUBLAS_STATUS_NOT_SUPPORTED.
 */
#ifndef OPC_CUBLASLT_H
#define OPC_CUBLASLT_H

#include <stddef.h>
#include <stdint.h>
#include "cublas_v2.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cublasLtContext *cublasLtHandle_t;

/* The descriptors are opaque; the library allocates them. */
typedef struct cublasLtMatmulDescOpaque_t cublasLtMatmulDescOpaque_t;
typedef cublasLtMatmulDescOpaque_t *cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque_t cublasLtMatrixLayoutOpaque_t;
typedef cublasLtMatrixLayoutOpaque_t *cublasLtMatrixLayout_t;

/* An algorithm a heuristic chose; the runtime takes NULL (its own choice). */
typedef struct {
  uint64_t data[8];
} cublasLtMatmulAlgo_t;

/* Attributes of a matmul descriptor, with the type each one's buffer holds. */
typedef enum {
  CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0, /* int32_t: a cublasComputeType_t */
  CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,   /* int32_t: a cudaDataType_t */
  CUBLASLT_MATMUL_DESC_POINTER_MODE = 2, /* int32_t: a cublasLtPointerMode_t */
  CUBLASLT_MATMUL_DESC_TRANSA = 3,       /* int32_t: a cublasOperation_t */
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_TRANSC = 5,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,     /* uint32_t: a cublasLtEpilogue_t */
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8, /* const void *: the bias, in device memory */
  CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26 /* int32_t: a cudaDataType_t; -1, D's type */
} cublasLtMatmulDescAttributes_t;

typedef enum {
  CUBLASLT_POINTER_MODE_HOST = 0,   /* alpha and beta in host memory */
  CUBLASLT_POINTER_MODE_DEVICE = 1  /* alpha and beta in device memory */
} cublasLtPointerMode_t;

/* What is applied to alpha op(A) op(B) + beta C before D is written: a
 * bias (one element per row of D, the same for every column), then ReLU
 * or GELU. The flags combine: RELU_BIAS is RELU | BIAS. */
typedef enum {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_RELU = 2,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_RELU_BIAS = 6,
  CUBLASLT_EPILOGUE_GELU = 32,
  CUBLASLT_EPILOGUE_GELU_BIAS = 36
} cublasLtEpilogue_t;

/* Attributes of a matrix layout, with the type each one's buffer holds. */
typedef enum {
  CUBLASLT_MATRIX_LAYOUT_TYPE = 0,                 /* uint32_t: a cudaDataType */
  CUBLASLT_MATRIX_LAYOUT_ORDER = 1,                /* int32_t: a cublasLtOrder_t */
  CUBLASLT_MATRIX_LAYOUT_ROWS = 2,                 /* uint64_t */
  CUBLASLT_MATRIX_LAYOUT_COLS = 3,                 /* uint64_t */
  CUBLASLT_MATRIX_LAYOUT_LD = 4,                   /* int64_t */
  CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,          /* int32_t */
  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6  /* int64_t, in elements */
} cublasLtMatrixLayoutAttribute_t;

/* How a matrix is stored; the runtime computes the column-major order. */
typedef enum {
  CUBLASLT_ORDER_COL = 0,
  CUBLASLT_ORDER_ROW = 1,
  CUBLASLT_ORDER_COL32 = 2,
  CUBLASLT_ORDER_COL4_4R2_8C = 3,
  CUBLASLT_ORDER_COL32_2R_4R4 = 4
} cublasLtOrder_t;

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t sizeInBytes);

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes);

/* D = alpha * op(A) op(B) + beta * C, column-major: op(A) is m x k, op(B)
 * k x n, C and D m x n. algo NULL: the library chooses. */
cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
