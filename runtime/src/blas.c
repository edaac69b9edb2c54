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
 *
 * oneDNN's sgemm comes first where libdnnl.so.2 is installed: it generates
 * its kernels at run time from cpuid's instruction sets, so no model name
 * misleads it, and on the convolutions' GEMM shapes it runs faster than
 * OpenBLAS's Cooperlake kernels on one thread (bench/cpu/bench_gemm.c).
 * Debian builds it with OpenMP; the pool's threads each ask for one OpenMP
 * thread, as the pool already gives the GEMMs disjoint blocks.
 * OPC_BLAS=openblas or OPC_BLAS=onednn picks one.
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

/* Whether AddressSanitizer (and with it LeakSanitizer) is built in: GCC
 * says so with a macro, clang with __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define OPC_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OPC_ADDRESS_SANITIZER 1
#endif
#endif
#ifndef OPC_ADDRESS_SANITIZER
#define OPC_ADDRESS_SANITIZER 0
#endif

/* dnnl_sgemm: row-major, the transposes as 'N' or 'T'. */
typedef int DnnlSgemmFn(char, char, long long, long long, long long, float, const float *,
                        long long, const float *, long long, float, float *, long long);

/* dnnl_gemm_s8s8s32: row-major int8 GEMM into int32; offsetc 'F' with
   co NULL-free (one offset), ao and bo the operands' zero points. */
typedef int DnnlGemmS8Fn(char, char, char, long long, long long, long long, float,
                         const signed char *, long long, signed char, const signed char *,
                         long long, signed char, float, int *, long long, const int *);

/* dnnl_version_t, and the value of its cpu_runtime for OpenMP. */
typedef struct DnnlVersion {
  int major, minor, patch;
  const char *hash;
  unsigned cpu_runtime, gpu_runtime;
} DnnlVersion;
typedef const DnnlVersion *DnnlVersionFn(void);
#define DNNL_RUNTIME_OMP 2u

static struct {
  pthread_once_t once;
  SgemmFn *sgemm;
  DnnlSgemmFn *dnnl_sgemm;
  DnnlGemmS8Fn *dnnl_gemm_s8; /* with dnnl_sgemm, where the library has it */
  void (*omp_set_num_threads)(int);
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

/* oneDNN's sgemm and the OpenMP runtime it was built with, or false. */
static bool load_onednn(void) {
  void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return false;
  blas.dnnl_sgemm = (DnnlSgemmFn *)dlsym(h, "dnnl_sgemm");
  blas.dnnl_gemm_s8 = (DnnlGemmS8Fn *)dlsym(h, "dnnl_gemm_s8s8s32");
  void *omp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
  blas.omp_set_num_threads = omp ? (void (*)(int))dlsym(omp, "omp_set_num_threads") : NULL;
  DnnlVersionFn *version = (DnnlVersionFn *)dlsym(h, "dnnl_version");
  const DnnlVersion *v = version ? version() : NULL;
  /* Another threading runtime (TBB, its own pool) would start threads
   * beside the pool's that one OpenMP call cannot stop. */
  if (!blas.dnnl_sgemm || !blas.omp_set_num_threads || !v || v->cpu_runtime != DNNL_RUNTIME_OMP) {
    blas.dnnl_sgemm = NULL;
    blas.dnnl_gemm_s8 = NULL;
    dlclose(h);
    return false;
  }
  snprintf(blas.description, sizeof blas.description,
           "oneDNN %d.%d.%d sgemm, kernels generated from the CPU's features", v->major, v->minor,
           v->patch);
  return true;
}

static void load(void) {
  const char *choice = getenv("OPC_BLAS");
  if (choice && *choice && strcmp(choice, "openblas") && strcmp(choice, "onednn")) {
    snprintf(blas.error, sizeof blas.error, "OPC_BLAS=%s: expected openblas or onednn", choice);
    return;
  }
#if OPC_ADDRESS_SANITIZER
  /* LeakSanitizer's check at exit crashes ("Tracer caught signal 11")
   * walking the threads of a process that loaded oneDNN and its OpenMP
   * runtime: a sanitizer build uses OpenBLAS unless told otherwise. */
  bool want_onednn = choice && !strcmp(choice, "onednn");
#else
  bool want_onednn = !choice || !*choice || !strcmp(choice, "onednn");
#endif
  if (want_onednn && load_onednn())
    return;
  if (choice && !strcmp(choice, "onednn")) {
    snprintf(blas.error, sizeof blas.error,
             "OPC_BLAS=onednn: cannot load oneDNN (libdnnl.so.2, built with OpenMP)");
    return;
  }
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
  if (!blas.sgemm && !blas.dnnl_sgemm) {
    static pthread_once_t reported = PTHREAD_ONCE_INIT;
    pthread_once(&reported, report_error);
  }
  return blas.sgemm || blas.dnnl_sgemm;
}

const char *blas_description(void) {
  return blas_ready() ? blas.description : blas.error;
}

/* One OpenMP thread for each calling thread: a thread OpenMP did not start
 * has its own setting, so each pool thread asks once. */
static void one_openmp_thread(void) {
  static __thread bool asked;
  if (!asked) {
    blas.omp_set_num_threads(1);
    asked = true;
  }
}

bool blas_sgemm(bool row_major, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  if (blas.dnnl_sgemm) {
    one_openmp_thread();
    /* Column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T.
     * oneDNN returns a status (dnnl_success is 0); OpenBLAS has none. */
    if (row_major)
      return blas.dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b,
                             ldb, beta, c, ldc) == 0;
    return blas.dnnl_sgemm(trans_b ? 'T' : 'N', trans_a ? 'T' : 'N', n, m, k, alpha, b, ldb, a,
                           lda, beta, c, ldc) == 0;
  }
  blas.sgemm(row_major ? CblasRowMajor : CblasColMajor, trans_a ? CblasTrans : CblasNoTrans,
             trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  return true;
}

/* oneDNN's int8 GEMM is exact only with VNNI: without it, its kernels sum
 * pairs of u8 x s8 products into 16 bits, saturating (oneDNN documents
 * the overflow); the runtime's own loop is used there instead. */
bool blas_has_gemm_s8(void) {
  pthread_once(&blas.once, load);
  __builtin_cpu_init();
  return blas.dnnl_gemm_s8 != NULL && __builtin_cpu_supports("avx512vnni");
}

/* Column-major int32 C = op(A) op(B) of int8 A and B, on oneDNN; only after
 * blas_has_gemm_s8() returned true. oneDNN's int8 GEMM is row-major: the
 * column-major product is computed as row-major C^T = op(B)^T op(A)^T.
 * With alpha 1 and beta 0 oneDNN stores the int32 sums unscaled. */
bool blas_gemm_s8(bool trans_a, bool trans_b, int m, int n, int k, const signed char *a, int lda,
                  const signed char *b, int ldb, int *c, int ldc) {
  static const int no_offset = 0;
  one_openmp_thread();
  return blas.dnnl_gemm_s8(trans_b ? 'T' : 'N', trans_a ? 'T' : 'N', 'F', n, m, k, 1.0f, b, ldb, 0,
                           a, lda, 0, 0.0f, c, ldc, &no_offset) == 0;
}
