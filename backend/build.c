/*
 * build.c - compiling an emitted program with the system C compiler, for
 * the GPU (CUDA toolkit) or for opc's CPU runtime.
 *
 * The CPU runtime is found relative to the opc executable: in the build
 * tree as <builddir>/runtime/libopcrt.a with the headers in the source tree,
 * once installed as <prefix>/<libdir>/libopcrt.a and
 * <prefix>/<includedir>/opc/runtime.
 */
#include <errno.h>
#include <limits.h>
#include <spawn.h>
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
  if (file_exists(p.lib))
    return &p;
  snprintf(p.lib, sizeof p.lib, "%.3000s/../%.500s/libopcrt.a", dir, OPC_LIBDIR);
  snprintf(p.include, sizeof p.include, "%.3000s/../%.500s/opc/runtime", dir, OPC_INCLUDEDIR);
  snprintf(p.cpu_lib, sizeof p.cpu_lib, "%.3000s/../%.500s/libopcrt_cpu.a", dir, OPC_LIBDIR);
  snprintf(p.cpu_include, sizeof p.cpu_include, "%.3000s/../%.500s/opc", dir, OPC_INCLUDEDIR);
  if (file_exists(p.lib))
    return &p;
  snprintf(p.lib, sizeof p.lib, "%.3000s/%.500s/libopcrt.a", OPC_PREFIX, OPC_LIBDIR);
  snprintf(p.include, sizeof p.include, "%.3000s/%.500s/opc/runtime", OPC_PREFIX, OPC_INCLUDEDIR);
  snprintf(p.cpu_lib, sizeof p.cpu_lib, "%.3000s/%.500s/libopcrt_cpu.a", OPC_PREFIX, OPC_LIBDIR);
  snprintf(p.cpu_include, sizeof p.cpu_include, "%.3000s/%.500s/opc", OPC_PREFIX, OPC_INCLUDEDIR);
  return &p;
}

/* Both targets also see the prefixed CPU runtime: a program without CPU
   units includes nothing of it and links no member of it. */
const char *target_cflags(Target t) {
  static char flags[3 * PATH_MAX];
  const RuntimePaths *p = runtime_paths();
  if (t == TARGET_CUDA)
    snprintf(flags, sizeof flags, "-I%s/include -I%.4000s", OPC_CUDA_DIR, p->cpu_include);
  else
    snprintf(flags, sizeof flags, "-I%.4000s -I%.4000s", p->include, p->cpu_include);
  return flags;
}

const char *target_libs(Target t) {
  static char libs[4 * PATH_MAX];
  const RuntimePaths *p = runtime_paths();
  if (t == TARGET_CUDA)
    snprintf(libs, sizeof libs,
             "%.4000s -L%s/lib64 -L%s/lib64/stubs -lcudnn -lcublas -lcudart -lcuda -lnvrtc "
             "-ldl -lpthread -lmvec -lm",
             p->cpu_lib, OPC_CUDA_DIR, OPC_CUDA_DIR);
  else
    snprintf(libs, sizeof libs, "%.4000s %.4000s -ldl -lpthread -lmvec -lm%s%s", p->lib, p->cpu_lib,
             *OPC_RUNTIME_LINK_FLAGS ? " " : "", OPC_RUNTIME_LINK_FLAGS);
  return libs;
}

/* Appends the space-separated words of `s` to argv. */
static int split_words(char *s, char **argv, int argc, int max) {
  for (char *w = strtok(s, " \t"); w && argc < max - 1; w = strtok(NULL, " \t"))
    argv[argc++] = w;
  return argc;
}

/*
 * A shared library leaves out main() and exports only the generated API:
 * -Wl,--exclude-libs,ALL keeps the CPU runtime's CUDA look-alikes, linked in
 * statically, out of its dynamic symbols, so that a process may load the
 * library beside the real CUDA libraries, or several models' libraries.
 */
bool build_executable(const char *c_path, const char *exe_path, Target t, bool shared) {
  const char *cc_env = getenv("CC");
  char cc[1024], cflags[2 * PATH_MAX], libs[3 * PATH_MAX];
  snprintf(cc, sizeof cc, "%s", cc_env && *cc_env ? cc_env : "cc");
  snprintf(cflags, sizeof cflags, "%s", target_cflags(t));
  snprintf(libs, sizeof libs, "%s", target_libs(t));
  if (t == TARGET_CPU && !file_exists(runtime_paths()->lib)) {
    opc_error("the CPU runtime is not at %s; build it or install opc", runtime_paths()->lib);
    return false;
  }

  /* CFLAGS follow opc's -O2, as in make: CFLAGS=-O0 builds a program fast
     for a test. */
  const char *cflags_env = getenv("CFLAGS");
  char user_flags[1024];
  snprintf(user_flags, sizeof user_flags, "%s", cflags_env ? cflags_env : "");

  char *argv[64];
  int argc = split_words(cc, argv, 0, 64);
  argv[argc++] = "-O2";
  argc = split_words(user_flags, argv, argc, 48);
  if (shared) {
    argv[argc++] = "-fPIC";
    argv[argc++] = "-shared";
    argv[argc++] = "-DOPC_NO_MAIN";
    argv[argc++] = "-Wl,--exclude-libs,ALL";
  }
  argc = split_words(cflags, argv, argc, 64);
  argv[argc++] = (char *)c_path;
  argv[argc++] = "-o";
  argv[argc++] = (char *)exe_path;
  argc = split_words(libs, argv, argc, 64);
  argv[argc] = NULL;

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
    opc_error("the C compiler failed to build %s from %s", exe_path, c_path);
    return false;
  }
  return true;
}
