/*
 * blas.c - OpenBLAS, loaded at run time with kernels chosen from the CPU's
 * features.
 *
 * OpenBLAS picks its kernels once, while it loads, from the CPU's family and
 * model numbers. A virtual machine that reports a generic model ("Intel(R)
 * Xeon(R) Processor") gets its generic SSE3 kernels ("Prescott") although
 * the CPU has AVX2, FMA and AVX-512: GEMM runs 2-3x slower and nothing says
 * so. OpenBLAS's only way to choose is the OPENBLAS_CORETYPE variable,
 * read while it loads, and a program linked with -lopenblas has loaded it
 * before main runs. So the runtime is not linked with OpenBLAS: it loads
 * libopenblas.so.0 itself on first use, with OPENBLAS_CORETYPE set from
 * cpuid's feature bits for the duration of the load, and leaves the
 * environment as it found it.
 *
 * A user's own OPENBLAS_CORETYPE wins. When the process has loaded OpenBLAS
 * already (another library linked it), the runtime loads a copy of its own
 * into a new link-map namespace (dlmopen), where the variable takes effect;
 * if that fails, the process's choice stands. The device name (`net
 * --bench` prints it) says whose choice the kernels were.
 */
#include <cblas.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

typedef void SgemmFn(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const enum CBLAS_TRANSPOSE,
                     const blasint, const blasint, const blasint, const float, const float *,
                     const blasint, const float *, const blasint, const float, float *,
                     const blasint);

static struct {
  pthread_once_t once;
  SgemmFn *sgemm;
  void (*set_num_threads)(int);
  char *(*get_corename)(void);
  char description[160];
  char error[512];
} blas = {.once = PTHREAD_ONCE_INIT};

/* The OpenBLAS kernels for the widest vector instructions the CPU has, by
 * feature rather than model. NULL where OpenBLAS's generic choice is right. */
static const char *core_for_features(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "Haswell";
  if (__builtin_cpu_supports("avx"))
    return "Sandybridge";
  return NULL;
}

/* OpenBLAS loaded with `core`'s kernels: OPENBLAS_CORETYPE is set only for
   the duration of the load. A new link-map namespace (LM_ID_NEWLM) gives a
   copy of its own beside one the process loaded already (a Python whose
   NumPy links Debian's OpenBLAS: Triton's Python backend). */
static void *open_with_core(Lmid_t space, const char *library, const char *core) {
  setenv("OPENBLAS_CORETYPE", core, 1);
  void *h = dlmopen(space, library, RTLD_NOW | RTLD_LOCAL);
  unsetenv("OPENBLAS_CORETYPE");
  return h;
}

static void *open_library(const char **whose) {
  const char *library = "libopenblas.so.0";
  const char *user = getenv("OPENBLAS_CORETYPE");
  const char *core = core_for_features();
  void *h = dlopen(library, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h) {
    void *own = core && !(user && *user) ? open_with_core(LM_ID_NEWLM, library, core) : NULL;
    if (own) {
      dlclose(h);
      *whose = "chosen by opc from the CPU's features, a private copy beside the process's own";
      return own;
    }
    *whose = "chosen by OpenBLAS: the process had loaded it already";
    return h;
  }
  if (user && *user) {
    *whose = "OPENBLAS_CORETYPE from the environment";
    return dlopen(library, RTLD_NOW | RTLD_LOCAL);
  }
  if (!core) {
    *whose = "chosen by OpenBLAS: no AVX";
    return dlopen(library, RTLD_NOW | RTLD_LOCAL);
  }
  *whose = "chosen by opc from the CPU's features";
  return open_with_core(LM_ID_BASE, library, core);
}

static void load(void) {
  const char *whose = "";
  void *h = open_library(&whose);
  if (!h) {
    snprintf(blas.error, sizeof blas.error, "cannot load OpenBLAS: %s", dlerror());
    return;
  }
  blas.sgemm = (SgemmFn *)dlsym(h, "cblas_sgemm");
  blas.set_num_threads = (void (*)(int))dlsym(h, "openblas_set_num_threads");
  blas.get_corename = (char *(*)(void))dlsym(h, "openblas_get_corename");
  if (!blas.sgemm || !blas.set_num_threads) {
    snprintf(blas.error, sizeof blas.error,
             "libopenblas.so.0 lacks cblas_sgemm or openblas_set_num_threads");
    blas.sgemm = NULL;
    return;
  }
  /* The pool gives OpenBLAS disjoint blocks: its own threads would
   * oversubscribe the cores. */
  blas.set_num_threads(1);
  const char *core = blas.get_corename ? blas.get_corename() : "unknown";
  snprintf(blas.description, sizeof blas.description, "OpenBLAS %s kernels, %s", core, whose);
}

static void report_error(void) {
  fprintf(stderr, "opc runtime: %s\n", blas.error);
}

bool blas_ready(void) {
  pthread_once(&blas.once, load);
  if (!blas.sgemm) {
    static pthread_once_t reported = PTHREAD_ONCE_INIT;
    pthread_once(&reported, report_error);
  }
  return blas.sgemm != NULL;
}

const char *blas_description(void) {
  return blas_ready() ? blas.description : blas.error;
}

void blas_sgemm(bool row_major, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  blas.sgemm(row_major ? CblasRowMajor : CblasColMajor, trans_a ? CblasTrans : CblasNoTrans,
             trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
