/*
 * pool_vec.h - 2-D pooling of one plane along AVX-512 vectors (pool_vec.c),
 * for cudnnPoolingForward (cudnn_reduce.c) and for opc's pooling kernels
 * (kernels_cpu.c).
 */
#ifndef OPC_POOL_VEC_H
#define OPC_POOL_VEC_H

#include <stdbool.h>

typedef enum { PLANE_MAX, PLANE_AVERAGE_WHOLE, PLANE_AVERAGE_INSIDE } PlaneFold;

/*
 * One plane of a 2-D pool: rows of x and y contiguous, xrow and yrow
 * floats apart; the window's column stride 1 or 2. Windows reach past the
 * input on either side (padding, ceil_mode) and see fewer values.
 * A maximum starts at `lowest` (cuDNN's -FLT_MAX, the kernels' -INFINITY)
 * and a NaN wins it. PLANE_AVERAGE_WHOLE divides by the window's size,
 * PLANE_AVERAGE_INSIDE by its count of input values (0 / 0 where it has
 * none). y = alpha * pool + beta * y, y not read where beta is 0.
 */
typedef struct PoolPlane {
  const float *x;
  float *y;
  long long xrow, yrow;
  int in_h, in_w, out_h, out_w;
  int win_h, win_w, stride_h, stride_w, pad_h, pad_w;
  PlaneFold fold;
  float lowest, alpha, beta;
} PoolPlane;

/* The widest output row and window that pool_plane_vectors takes. */
#define POOL_VECTOR_WIDTH 1024
#define POOL_VECTOR_WIN 32

/* Whether pool_plane_vectors takes pp's shape on this CPU: AVX-512 (as
 * tile_available), a column stride of 1 or 2, and the sizes above. */
bool pool_vectors_fit(const PoolPlane *pp);
/* The floats of `across` that pool_plane_vectors needs for pp. */
long long pool_across_floats(const PoolPlane *pp);
/* `across`: pool_across_floats(pp) floats. */
void pool_plane_vectors(const PoolPlane *pp, float *across);

#endif
