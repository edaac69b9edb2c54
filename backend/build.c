/*
 * build.c - compiling an emitted program with the system C compiler, for
 * the GPU (CUDA toolkit) or for opc's CPU runtime.
 *
 * The CPU runtime is found relative to the opc executable: in the build
 * tree as <builddir>/runtime/libopcrt.a with the headers in the source tree,
 * once installed as <prefix>/<libdir>/libopcrt.a and
 * <prefix>/<includedir>/opc/runtime. So is opc's stand-in for libcuda
 * (runtime/stubs), which GPU programs link against where CUDA comes from
 * PyPI's wheels, which have none.
 */
#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"

#ifndef OPC_SOURCE_DIR
#define OPC_SOURCE_DIR "."
#endif
#ifndef OPC_BUILD_DIR
#define OPC_BUILD_DIR "."
#endif
#ifndef OPC_PREFIX
#define OPC_PREFIX "/usr/local"
#endif
#ifndef OPC_LIBDIR
#define OPC_LIBDIR "lib"
#endif
#ifndef OPC_INCLUDEDIR
#define OPC_INCLUDEDIR "include"
#endif
#ifndef OPC_CUDA_DIR
#define OPC_CUDA_DIR "/usr/local/cuda"
#endif
#ifndef OPC_PYTHON_SITE
#define OPC_PYTHON_SITE ""
#endif

#ifndef OPC_RUNTIME_LINK_FLAGS
#define OPC_RUNTIME_LINK_FLAGS ""
#endif

extern char **environ;

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* The directory of the running opc executable, "" if unknown. */
static const char *exe_dir(void) {
  static char dir[PATH_MAX];
  if (dir[0])
    return dir;
  ssize_t len = readlink("/proc/self/exe", dir, sizeof dir - 1);
  if (len <= 0) {
    dir[0] = 0;
    return dir;
  }
  dir[len] = 0;
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = 0;
  return dir;
}

/* The CPU runtime's headers and library, and its prefixed build (a
   --devices gpu,cpu program's CPU units call it beside real CUDA). */
typedef struct RuntimePaths {
  char include[PATH_MAX];
  char lib[PATH_MAX];
  char cpu_include[PATH_MAX]; /* where opc_cpu.h is */
  char cpu_lib[PATH_MAX];     /* libopcrt_cpu.a */
  char stubs[PATH_MAX];       /* where opc's libcuda.so stand-in is */
} RuntimePaths;

/* The CPU runtime next to this opc: build tree first, then the install tree
   relative to the executable, then the configured prefix. */
static const RuntimePaths *runtime_paths(void) {
  static RuntimePaths p;
  if (p.lib[0])
    return &p;
  const char *dir = exe_dir();
  snprintf(p.lib, sizeof p.lib, "%.3000s/runtime/libopcrt.a", dir);
  snprintf(p.include, sizeof p.include, "%.3000s/runtime/include", OPC_SOURCE_DIR);
  snprintf(p.cpu_lib, sizeof p.cpu_lib, "%.3000s/runtime/libopcrt_cpu.a", dir);
  snprintf(p.cpu_include, sizeof p.cpu_include, "%.3000s/runtime", dir);
  snprintf(p.stubs, sizeof p.stubs, "%.3000s/runtime/stubs", dir);
  if (file_exists(p.lib))
    return &p;
  snprintf(p.lib, sizeof p.lib, "%.3000s/../%.500s/libopcrt.a", dir, OPC_LIBDIR);
  snprintf(p.include, sizeof p.include, "%.3000s/../%.500s/opc/runtime", dir, OPC_INCLUDEDIR);
  snprintf(p.cpu_lib, sizeof p.cpu_lib, "%.3000s/../%.500s/libopcrt_cpu.a", dir, OPC_LIBDIR);
  snprintf(p.cpu_include, sizeof p.cpu_include, "%.3000s/../%.500s/opc", dir, OPC_INCLUDEDIR);
  snprintf(p.stubs, sizeof p.stubs, "%.3000s/../%.500s/opc/stubs", dir, OPC_LIBDIR);
  if (file_exists(p.lib))
    return &p;
  snprintf(p.lib, sizeof p.lib, "%.3000s/%.500s/libopcrt.a", OPC_PREFIX, OPC_LIBDIR);
  snprintf(p.include, sizeof p.include, "%.3000s/%.500s/opc/runtime", OPC_PREFIX, OPC_INCLUDEDIR);
  snprintf(p.cpu_lib, sizeof p.cpu_lib, "%.3000s/%.500s/libopcrt_cpu.a", OPC_PREFIX, OPC_LIBDIR);
  snprintf(p.cpu_include, sizeof p.cpu_include, "%.3000s/%.500s/opc", OPC_PREFIX, OPC_INCLUDEDIR);
  snprintf(p.stubs, sizeof p.stubs, "%.3000s/%.500s/opc/stubs", OPC_PREFIX, OPC_LIBDIR);
  return &p;
}

/* ------------------------------------------------ where CUDA is */

/*
 * GPU programs build against CUDA laid out in one of two ways:
 *  - a toolkit: DIR/include and DIR/lib64, whose libraries have unversioned
 *    names, with the driver's link-time stub in DIR/lib64/stubs;
 *  - PyPI's wheels (tools/cuda-wheels.txt), DIR being a site-packages'
 *    nvidia/ folder: DIR/cu13/{include,lib} and DIR/cudnn/{include,lib}.
 *    Their libraries have versioned names only (libcudart.so.13), so they
 *    are linked as -l:NAME, and none is the driver's, so the driver is
 *    linked against opc's stand-in (runtime/stubs).
 * The first of these places that holds either wins:
 *  1. $OPC_CUDA_HOME; where it is set, nothing else is searched;
 *  2. the toolkit opc was configured with (meson's `cuda` option);
 *  3. the wheels beside opc's own Python package (`pip install .` puts opc
 *     in site-packages/opc/bin);
 *  4. the wheels in the site-packages of the python3 that meson found.
 */
typedef enum CudaLayout { CUDA_MISSING, CUDA_TOOLKIT, CUDA_WHEELS } CudaLayout;

typedef struct CudaHome {
  CudaLayout layout;
  char dir[PATH_MAX];
  char searched[4 * PATH_MAX]; /* the places looked at, for the error */
} CudaHome;

static CudaLayout layout_of(const char *dir) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%.4000s/include/cuda_runtime.h", dir);
  if (file_exists(path))
    return CUDA_TOOLKIT;
  snprintf(path, sizeof path, "%.4000s/cu13/include/cuda_runtime.h", dir);
  if (file_exists(path))
    return CUDA_WHEELS;
  return CUDA_MISSING;
}

/* Looks for CUDA in `dir`, noting it among the places searched as `what`;
   true, with `h` filled in, if it is there. */
static bool look_in(CudaHome *h, const char *dir, const char *what) {
  size_t n = strlen(h->searched);
  snprintf(h->searched + n, sizeof h->searched - n, "%s%.1000s (%s)", n ? ", " : "", dir, what);
  h->layout = layout_of(dir);
  snprintf(h->dir, sizeof h->dir, "%s", dir);
  return h->layout != CUDA_MISSING;
}

/* The site-packages folder that holds opc's Python package, "" if opc
   does not run from one: its executable is site-packages/opc/bin/opc. */
static const char *package_site(void) {
  static char site[PATH_MAX];
#ifdef OPC_PYTHON_PACKAGE
  snprintf(site, sizeof site, "%s", exe_dir());
  for (int up = 0; up < 2; up++) {
    char *slash = strrchr(site, '/');
    if (!slash) {
      site[0] = 0;
      break;
    }
    *slash = 0;
  }
#endif
  return site;
}

static const CudaHome *cuda_home(void) {
  static CudaHome h;
  static bool searched;
  if (searched)
    return &h;
  searched = true;
  const char *env = getenv("OPC_CUDA_HOME");
  if (env && *env) {
    look_in(&h, env, "$OPC_CUDA_HOME");
    return &h;
  }
  if (look_in(&h, OPC_CUDA_DIR, "the configured toolkit"))
    return &h;
  char wheels[PATH_MAX];
  if (*package_site()) {
    snprintf(wheels, sizeof wheels, "%.4000s/nvidia", package_site());
    if (look_in(&h, wheels, "the wheels beside opc's Python package"))
      return &h;
  }
  if (*OPC_PYTHON_SITE)
    look_in(&h, OPC_PYTHON_SITE "/nvidia", "the wheels of python3's site-packages");
  return &h;
}

/* Where CUDA is; NULL, reported with every place searched, if nowhere. */
static const CudaHome *cuda_found(void) {
  const CudaHome *h = cuda_home();
  if (h->layout != CUDA_MISSING)
    return h;
  opc_error("no CUDA toolkit or CUDA wheels found: looked in %s for include/cuda_runtime.h (a "
            "toolkit) or cu13/include/cuda_runtime.h (a site-packages' nvidia folder); set "
            "OPC_CUDA_HOME to one, install PyPI's CUDA wheels (README), or build for opc's CPU "
            "runtime with --target cpu",
            h->searched);
  return NULL;
}

const char *target_name(Target t) {
  return t == TARGET_CUDA ? "cuda" : t == TARGET_CPU ? "cpu" : "stand-in";
}

/* cpu and stand-in build against opc's CPU runtime alike. Every target
   also sees the prefixed CPU runtime: a program without CPU units
   includes nothing of it and links no member of it. NULL, reported,
   where CUDA is not found. */
const char *target_cflags(Target t) {
  static char flags[4 * PATH_MAX];
  const RuntimePaths *p = runtime_paths();
  if (t != TARGET_CUDA) {
    snprintf(flags, sizeof flags, "-I%.4000s -I%.4000s", p->include, p->cpu_include);
    return flags;
  }
  const CudaHome *h = cuda_found();
  if (!h)
    return NULL;
  if (h->layout == CUDA_TOOLKIT)
    snprintf(flags, sizeof flags, "-I%.4000s/include -I%.4000s", h->dir, p->cpu_include);
  else
    snprintf(flags, sizeof flags, "-I%.4000s/cu13/include -I%.4000s/cudnn/include -I%.4000s",
             h->dir, h->dir, p->cpu_include);
  return flags;
}

/* The rpath finds CUDA's libraries where they are, without LD_LIBRARY_PATH;
   the driver (libcuda.so.1) comes from the system at run time. NULL,
   reported, where CUDA or opc's libcuda stand-in is not found. */
const char *target_libs(Target t) {
  static char libs[8 * PATH_MAX];
  const RuntimePaths *p = runtime_paths();
  if (t != TARGET_CUDA) {
    snprintf(libs, sizeof libs, "%.4000s %.4000s -ldl -lpthread -lmvec -lm%s%s", p->lib, p->cpu_lib,
             *OPC_RUNTIME_LINK_FLAGS ? " " : "", OPC_RUNTIME_LINK_FLAGS);
    return libs;
  }
  const CudaHome *h = cuda_found();
  if (!h)
    return NULL;
  if (h->layout == CUDA_TOOLKIT) {
    snprintf(libs, sizeof libs,
             "%.4000s -L%.4000s/lib64 -L%.4000s/lib64/stubs -Wl,-rpath,%.4000s/lib64 -lcudnn "
             "-lcublasLt -lcublas -lcudart -lcuda -lnvrtc -ldl -lpthread -lmvec -lm",
             p->cpu_lib, h->dir, h->dir, h->dir);
    return libs;
  }
  char stub[PATH_MAX];
  snprintf(stub, sizeof stub, "%.4000s/libcuda.so", p->stubs);
  if (!file_exists(stub)) {
    opc_error("opc's stand-in for libcuda, to link with CUDA's wheels, is not at %s; build it or "
              "install opc",
              stub);
    return NULL;
  }
  snprintf(libs, sizeof libs,
           "%.4000s -L%.4000s/cu13/lib -L%.4000s/cudnn/lib -L%.4000s -Wl,-rpath,%.4000s/cu13/lib "
           "-Wl,-rpath,%.4000s/cudnn/lib -l:libcudnn.so.9 -l:libcublasLt.so.13 -l:libcublas.so.13 "
           "-l:libcudart.so.13 "
           "-lcuda -l:libnvrtc.so.13 -ldl -lpthread -lmvec -lm",
           p->cpu_lib, h->dir, h->dir, p->stubs, h->dir, h->dir);
  return libs;
}

/* Appends the space-separated words of `s` to argv. */
static int split_words(char *s, char **argv, int argc, int max) {
  for (char *w = strtok(s, " \t"); w && argc < max - 1; w = strtok(NULL, " \t"))
    argv[argc++] = w;
  return argc;
}

/* Runs the compiler words `argv` and waits; false, reported, if it failed. */
static bool run_compiler(char **argv, const char *what) {
  pid_t pid;
  int err = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
  if (err != 0) {
    opc_error("cannot run the C compiler '%s': %s", argv[0], strerror(err));
    return false;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      opc_error("waiting for the C compiler: %s", strerror(errno));
      return false;
    }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    opc_error("the C compiler failed to build %s", what);
    return false;
  }
  return true;
}

/* ------------------------------------------------ main, compiled apart */

/*
 * A program's main is the same for every model of one symbol prefix
 * (write_main_source), and compiling it is most of a small model's build.
 * So opc compiles it once per compiler, flags and prefix into a cache and
 * links that object with the model's file built with -DOPC_MAIN_APART, as
 * ccache would. The object's name is a hash of what decides it: main's text
 * (which names opc's version), the compiler words and the compiler's own
 * file. Where there is no cache, main is compiled with the model.
 */

/* $OPC_CACHE_DIR (set but empty: no cache), else $XDG_CACHE_HOME/opc, else
   ~/.cache/opc; created if missing. NULL when there is none. */
static const char *cache_dir(void) {
  static char dir[PATH_MAX];
  const char *env = getenv("OPC_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (env)
    snprintf(dir, sizeof dir, "%s", env);
  else if (xdg && *xdg)
    snprintf(dir, sizeof dir, "%s/opc", xdg);
  else if (home && *home)
    snprintf(dir, sizeof dir, "%s/.cache/opc", home);
  else
    return NULL;
  if (!*dir)
    return NULL;
  for (char *q = dir + 1;; q++) { /* mkdir -p */
    char c = *q;
    if (c != '/' && c != 0)
      continue;
    *q = 0;
    bool ok = mkdir(dir, 0755) == 0 || errno == EEXIST;
    *q = c;
    if (!ok)
      return NULL;
    if (!c)
      break;
  }
  return access(dir, W_OK) == 0 ? dir : NULL;
}

/* Two 64-bit FNV-1a hashes with different starting points. */
static void hash_bytes(uint64_t h[2], const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < 2; k++)
      h[k] = (h[k] ^ p[i]) * 0x100000001b3ull;
}

/* The compiler's own file, found on PATH as posix_spawnp finds it: its
   identity, size and time of change stand for its version. */
static void hash_compiler(uint64_t h[2], const char *name) {
  char path[PATH_MAX];
  struct stat st;
  const char *dirs = strchr(name, '/') ? "" : getenv("PATH");
  memset(&st, 0, sizeof st);
  if (!dirs || !*dirs) {
    stat(name, &st);
  } else {
    for (const char *d = dirs; d; d = strchr(d, ':') ? strchr(d, ':') + 1 : NULL) {
      int len = (int)strcspn(d, ":");
      snprintf(path, sizeof path, "%.*s/%s", len, d, name);
      if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0)
        break;
      memset(&st, 0, sizeof st);
    }
  }
  long long id[5] = {(long long)st.st_dev, (long long)st.st_ino, (long long)st.st_size,
                     (long long)st.st_mtim.tv_sec, (long long)st.st_mtim.tv_nsec};
  hash_bytes(h, id, sizeof id);
}

/* Writes `len` bytes of `text` to `path`. */
static bool write_file(const char *path, const char *text, size_t len) {
  FILE *f = fopen(path, "w");
  bool ok = f && fwrite(text, 1, len, f) == len;
  if (f && fclose(f) != 0)
    ok = false;
  return ok;
}

/*
 * The object of main for the compiler words `cc` (`ncc` of them) and
 * `prefix`: from the cache, or compiled into it. It is compiled from a file
 * of this process's own and renamed into place with its source, so that
 * concurrent opcs never see a partial file. NULL with *failed false when
 * there is no cache; NULL with *failed true, reported, when main did not
 * compile.
 */
static char *cached_main(char **cc, int ncc, const char *prefix, bool *failed) {
  *failed = false;
  const char *dir = cache_dir();
  if (!dir)
    return NULL;
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  if (!m)
    return NULL;
  bool written = write_main_source(m, prefix);
  if (fclose(m) != 0 || !written) {
    free(text);
    return NULL;
  }
  uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
  hash_bytes(h, text, len);
  for (int i = 0; i < ncc; i++)
    hash_bytes(h, cc[i], strlen(cc[i]) + 1);
  hash_compiler(h, cc[0]);

  static char obj[PATH_MAX];
  char stem[PATH_MAX], src[PATH_MAX], tmp_src[PATH_MAX], tmp_obj[PATH_MAX];
  snprintf(stem, sizeof stem, "%.4000s/main-%016llx%016llx", dir, (unsigned long long)h[0],
           (unsigned long long)h[1]);
  snprintf(obj, sizeof obj, "%.4000s.o", stem);
  if (file_exists(obj)) {
    free(text);
    return obj;
  }
  long pid = (long)getpid();
  snprintf(src, sizeof src, "%.4000s.c", stem);
  snprintf(tmp_src, sizeof tmp_src, "%.4000s.%ld.c", stem, pid);
  snprintf(tmp_obj, sizeof tmp_obj, "%.4000s.%ld.o", stem, pid);
  bool ok = write_file(tmp_src, text, len);
  free(text);
  if (!ok) {
    remove(tmp_src);
    return NULL;
  }
  char *argv[64];
  int argc = 0;
  for (int i = 0; i < ncc && argc < 58; i++)
    argv[argc++] = cc[i];
  argv[argc++] = "-c";
  argv[argc++] = tmp_src;
  argv[argc++] = "-o";
  argv[argc++] = tmp_obj;
  argv[argc] = NULL;
  char what[PATH_MAX + 64];
  snprintf(what, sizeof what, "the programs' main, compiled apart (opc --emit-main writes it)");
  *failed = !run_compiler(argv, what);
  ok = !*failed && rename(tmp_src, src) == 0 && rename(tmp_obj, obj) == 0;
  remove(tmp_src);
  remove(tmp_obj);
  return ok ? obj : NULL;
}

/*
 * A shared library leaves out main() and exports only the generated API:
 * -Wl,--exclude-libs,ALL keeps the CPU runtime's CUDA look-alikes, linked in
 * statically, out of its dynamic symbols, so that a process may load the
 * library beside the real CUDA libraries, or several models' libraries.
 * An executable whose main is opc's own (`main_prefix` set) links main
 * from the cache.
 */
bool build_executable(const char *c_path, const char *exe_path, Target t, bool shared,
                      const char *main_prefix) {
  const char *cc_env = getenv("CC");
  char cc[1024], cflags[4 * PATH_MAX], libs[8 * PATH_MAX];
  snprintf(cc, sizeof cc, "%s", cc_env && *cc_env ? cc_env : "cc");
  if (t != TARGET_CUDA && !file_exists(runtime_paths()->lib)) {
    opc_error("the CPU runtime is not at %s; build it or install opc", runtime_paths()->lib);
    return false;
  }
  const char *target_flags = target_cflags(t), *target_lib_flags;
  if (!target_flags)
    return false;
  snprintf(cflags, sizeof cflags, "%s", target_flags);
  if (!(target_lib_flags = target_libs(t)))
    return false;
  snprintf(libs, sizeof libs, "%s", target_lib_flags);

  /* -O1: net.c is host code that calls the libraries, where the work is;
     it runs once, at capture, or once per node per run without a graph.
     -O2 takes 2.5 times as long on a large model's net.c (NASNet-A: 11.3
     against 4.5 CPU s) and runs no faster. -O1 still has the flow-based
     warnings (-Wmaybe-uninitialized). CFLAGS follow, as in make:
     CFLAGS=-O0 builds a program fast for a test. */
  const char *cflags_env = getenv("CFLAGS");
  char user_flags[1024];
  snprintf(user_flags, sizeof user_flags, "%s", cflags_env ? cflags_env : "");

  char *argv[64];
  int argc = split_words(cc, argv, 0, 64);
  argv[argc++] = "-O1";
  argc = split_words(user_flags, argv, argc, 48);
  char *main_obj = NULL;
  if (!shared && main_prefix) {
    bool failed;
    argv[argc] = NULL;
    main_obj = cached_main(argv, argc, main_prefix, &failed);
    if (failed)
      return false;
  }
  if (shared) {
    argv[argc++] = "-fPIC";
    argv[argc++] = "-shared";
    argv[argc++] = "-DOPC_NO_MAIN";
    argv[argc++] = "-Wl,--exclude-libs,ALL";
  } else if (main_obj) {
    argv[argc++] = "-DOPC_MAIN_APART";
  }
  argc = split_words(cflags, argv, argc, 60);
  argv[argc++] = (char *)c_path;
  if (main_obj)
    argv[argc++] = main_obj;
  argv[argc++] = "-o";
  argv[argc++] = (char *)exe_path;
  argc = split_words(libs, argv, argc, 64);
  argv[argc] = NULL;

  char what[2 * PATH_MAX];
  snprintf(what, sizeof what, "%.4000s from %.4000s", exe_path, c_path);
  return run_compiler(argv, what);
}
