/* cuda_runtime.h - entry header of opc's CPU runtime; see cuda_runtime_api.h. */
#ifndef OPC_CUDA_RUNTIME_H
#define OPC_CUDA_RUNTIME_H

#include "cuda_runtime_api.h"
#include "library_types.h"

#endif
