/*
 * vector_math.h - the float maths functions of glibc's libmvec, declared
 * with their vector versions, so that a loop calling them can be
 * vectorised. <math.h> declares them so only under -ffast-math, which would
 * break the NaN tests of the kernels and of the runtime. Link with -lmvec.
 */
#ifndef OPC_VECTOR_MATH_H
#define OPC_VECTOR_MATH_H

#include <math.h>

#if defined(__GNUC__) && !defined(__clang__)
#define OPC_VECTOR_MATH __attribute__((simd("notinbranch")))
#else
#define OPC_VECTOR_MATH /* clang has no such attribute: scalar calls */
#endif
float expf(float) OPC_VECTOR_MATH;
float expm1f(float) OPC_VECTOR_MATH;
float logf(float) OPC_VECTOR_MATH;
float log1pf(float) OPC_VECTOR_MATH;
float powf(float, float) OPC_VECTOR_MATH;
float tanhf(float) OPC_VECTOR_MATH;
float erff(float) OPC_VECTOR_MATH;
float sinf(float) OPC_VECTOR_MATH;
float cosf(float) OPC_VECTOR_MATH;
float tanf(float) OPC_VECTOR_MATH;
float asinf(float) OPC_VECTOR_MATH;
float acosf(float) OPC_VECTOR_MATH;
float atanf(float) OPC_VECTOR_MATH;
float sinhf(float) OPC_VECTOR_MATH;
float coshf(float) OPC_VECTOR_MATH;
float asinhf(float) OPC_VECTOR_MATH;
float acoshf(float) OPC_VECTOR_MATH;
float atanhf(float) OPC_VECTOR_MATH;

#endif
