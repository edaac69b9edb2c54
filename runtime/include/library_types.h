/*
 * library_types.h - opc's CPU implementation of the CUDA toolkit's data type
 * enum, shared by the libraries (cublasGemmEx's Atype, Btype and Ctype).
 * As in the toolkit, cuda_runtime.h, cublas_v2.h and cudnn.h include it.
 * The subset of types the runtime knows, with CUDA 13's values.
 */
#ifndef OPC_LIBRARY_TYPES_H
#define OPC_LIBRARY_TYPES_H

typedef enum cudaDataType_t {
  CUDA_R_16F = 2,   /* IEEE binary16 */
  CUDA_R_16BF = 14, /* bfloat16: the top 16 bits of a float */
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_8I = 3,
  CUDA_R_32I = 10
} cudaDataType;

#ifndef __cplusplus
typedef enum cudaDataType_t cudaDataType_t;
#endif

#endif
