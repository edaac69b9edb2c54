/*
 * kernels_cpu.c - opc's custom kernels compiled as C. The kernel text is
 * shared with the CUDA build; prelude_cpu.h makes each kernel a function
 * that runs one part of its parallel loop.
 *
 * meson compiles this file once per instruction set (OPC_ISA_SUFFIX and the
 * matching -m flags); the plain build also holds the lookup by name and
 * the choice of instruction set.
 */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opc_kargs.h"
#define OPC_KERNELS_IN_RUNTIME
#include "prelude_cpu.h"
#include "ktable.h"
#include "pool_vec.h"

/* Typed kernels are written once for every element type: a NaN test
   (v != v) or a sign test is constant for some of those types. */
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wtautological-compare"
#include "opc_kernels_expanded.inc" /* opc_kernels.inc, typed kernels instantiated */

#ifndef OPC_ISA_BUILD
/* The pooling kernels' planes (opc_max_pool_plane, opc_average_pool_plane)
 * through pool_vec.c: the kernels' arguments as a PoolPlane, their
 * -INFINITY for a maximum with no input, alpha 1 and beta 0; the kernel's
 * buffer of `floats` holds the rows folded across. */
int opc_pool_plane_vectors(const struct opc_kargs *a, long long n, long long c, int average,
                           float *buf, long long floats) {
  PoolPlane pp = {
      .x = (const float *)a->x[0] + n * a->xstride[0][0] + c * a->xstride[0][1],
      .y = (float *)a->y + n * a->ystride[0] + c * a->ystride[1],
      .xrow = a->xstride[0][2], .yrow = a->ystride[2],
      .in_h = (int)a->i[12], .in_w = (int)a->i[13], .out_h = (int)a->dims[2],
      .out_w = (int)a->dims[3], .win_h = (int)a->i[0], .win_w = (int)a->i[1],
      .stride_h = (int)a->i[3], .stride_w = (int)a->i[4], .pad_h = (int)a->i[9],
      .pad_w = (int)a->i[10],
      .fold = !average ? PLANE_MAX : a->i[15] ? PLANE_AVERAGE_WHOLE : PLANE_AVERAGE_INSIDE,
      .lowest = -INFINITY, .alpha = 1, .beta = 0};
  if (!pool_vectors_fit(&pp) || pool_across_floats(&pp) > floats)
    return 0;
  pool_plane_vectors(&pp, buf);
  return 1;
}

const struct CUfunc_st *kernel_find(const char *name, size_t len) {
  for (int i = 0; i < opc_kernel_count; i++) {
    const char *k = opc_kernel_table[i].name;
    if (strlen(k) == len && memcmp(k, name, len) == 0)
      return &opc_kernel_table[i];
  }
  return NULL;
}

static const char *const isa_names[KERNEL_ISAS] = {"x86-64", "avx2", "avx512"};

const char *kernel_isa_name(int isa) { return isa_names[isa]; }

/* The widest instruction set the CPU has, by the -m flags of meson.build. */
static int widest_isa(void) {
#if defined(__x86_64__) && defined(OPC_KERNEL_ISAS_BUILT)
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
              __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
              __builtin_cpu_supports("f16c");
  bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                __builtin_cpu_supports("avx512vl");
  return avx512 ? KERNEL_AVX512 : avx2 ? KERNEL_AVX2 : KERNEL_X86_64;
#else
  return KERNEL_X86_64;
#endif
}

static int chosen_isa;

static void choose_isa(void) {
  chosen_isa = widest_isa();
  const char *want = getenv("OPC_KERNEL_ISA");
  if (!want || !*want)
    return;
  for (int isa = 0; isa < KERNEL_ISAS; isa++) {
    if (strcmp(want, isa_names[isa]) == 0 && isa <= chosen_isa) {
      chosen_isa = isa;
      return;
    }
  }
  fprintf(stderr,
          "opc runtime: OPC_KERNEL_ISA=%s is not x86-64, avx2 or avx512 within what this CPU "
          "has; running the %s kernels\n",
          want, isa_names[chosen_isa]);
}

int kernel_isa(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, choose_isa);
  return chosen_isa;
}
#endif
