/*
 * main.c - the opc command line: parses every option up front, then runs
 * import -> passes -> emit (-> build). The only place that decides the
 * exit status: 0 success, 1 usage error, 2 a model that cannot be compiled.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "frontend/frontend.h"
#include "passes/passes.h"

enum { EXIT_USAGE = 1, EXIT_COMPILE = 2 };

static const char usage_line[] = "usage: opc MODEL.onnx [MODEL.onnx ...] -o OUT [options]\n";

static const char help_text[] =
    "opc - compiles an ONNX model into one standalone C program for CUDA\n"
    "\n"
    "usage: opc MODEL.onnx [MODEL.onnx ...] -o OUT [options]\n"
    "       opc [NAME=]MODEL.onnx ... -o OUT [--instances NAME=K,...] [options]\n"
    "       opc MODEL.onnx --dump-ir [--input-shape NAME=DIMS] [--batch N]\n"
    "       opc --cflags TARGET | --libs TARGET | --emit-main FILE.c | --list-operators | --help\n"
    "       opc --version\n"
    "\n"
    "Output:\n"
    "  -o OUT                 OUT ending in .c: write OUT, the .h and the .weights beside it;\n"
    "                         OUT ending in .so: also build the shared library OUT, which\n"
    "                         exports the generated API only (from libnet.c, .h, .weights\n"
    "                         for -o libnet.so, which are kept); otherwise also build the\n"
    "                         executable OUT (from OUT.c, OUT.h, OUT.weights, kept too)\n"
    "  --emit triton          OUT is a Triton model repository: for each model, OUT/NAME/\n"
    "                         config.pbtxt, OUT/NAME/1/ with the program as libnet.so, and\n"
    "                         opc's backend that runs it, OUT/NAME/libtriton_opc.so\n"
    "  --triton-backend opc|python\n"
    "                         with --emit triton: run the program with opc's backend in C\n"
    "                         (default) or with Triton's Python backend (1/model.py)\n"
    "  --max-batch N|B,B,...  with --emit triton: Triton's dynamic batching up to N requests'\n"
    "                         rows, on programs compiled for batch 1, 2, 4, ... N (or the\n"
    "                         sizes given) with every input's first dimension rebound\n"
    "  --model-name NAME      with --emit triton: the model's name (default: made from its\n"
    "                         file name, as for NAME=MODEL.onnx)\n"
    "  --instances K          with --emit triton: instances of each model (default 1)\n"
    "  --target cuda|cpu|stand-in\n"
    "                         the program and what it links against: cuda (default), the\n"
    "                         GPU program on CUDA; cpu, the CPU program (CPU kernels where\n"
    "                         opc has them) on opc's CPU runtime; stand-in, the GPU program\n"
    "                         on opc's CPU runtime, which stands in for CUDA (to test it)\n"
    "  --cpu-features host|vnni|generic\n"
    "                         the CPU that runs the CPU program: host (default), this one;\n"
    "                         vnni, one with AVX-512 VNNI, whose int8 convolutions then take\n"
    "                         filters packed at compile time; generic, any x86-64 (they take\n"
    "                         the GEMM, which oneDNN runs well without VNNI)\n"
    "  --prefix NAME          prefix of every symbol of the generated API (default net)\n"
    "  --embed-weights        link the weights into the program instead of reading a file\n"
    "  --no-cuda-graph        issue the kernels on every run instead of replaying a CUDA graph\n"
    "  --precision fp32|tf32|fp16|bf16\n"
    "                        fp32 (default): strict float32; tf32: TF32 tensor cores in\n"
    "                        convolutions and GEMMs; fp16, bf16: those, pooling and the\n"
    "                        data between them stored in 16 bits, computing in float32\n"
    "  --io-precision fp32|fp16\n"
    "                        the type of float inputs and outputs at the API: float32\n"
    "                        (default), or float16 with --precision fp16 (no casts)\n"
    "  --layout auto|nchw|nhwc\n"
    "                        storage order of 4-D data around 16-bit convolutions: auto\n"
    "                        (default) and nhwc store it channels-last, as cuDNN's fastest\n"
    "                        tensor-core kernels want it; nchw keeps ONNX's order\n"
    "  --cflags TARGET        print the compiler flags for building generated code, and exit\n"
    "                         (CUDA: $OPC_CUDA_HOME, else the configured toolkit, else\n"
    "                         PyPI's CUDA wheels in python3's site-packages; README)\n"
    "  --libs TARGET          print the linker flags for building generated code, and exit\n"
    "  --emit-main FILE.c     write the programs' main alone, the same for every model of one\n"
    "                         --prefix, and exit: compile it once and link it with each OUT.c\n"
    "                         built with -DOPC_MAIN_APART (opc does so itself, keeping the\n"
    "                         compiled main in $OPC_CACHE_DIR, default ~/.cache/opc; set it\n"
    "                         empty to compile main with each model)\n"
    "\n"
    "Inputs:\n"
    "  --input-shape NAME=DIMS  replace the shape of input NAME, e.g. x=1x3x224x224 (repeatable)\n"
    "  --batch N              pin the symbolic or unknown leading dimension of every input\n"
    "  --const-input NAME=FILE  bind input NAME to the tensor in FILE at compile time: it\n"
    "                         becomes a constant and is no longer an input of the program.\n"
    "                         FILE is an ONNX TensorProto (.pb) or a NumPy array (.npy, C\n"
    "                         order); for a sequence or optional input, an ONNX\n"
    "                         SequenceProto or OptionalProto (.pb). Inputs that decide\n"
    "                         shapes (Reshape's shape, Resize's scales, ...) must be bound\n"
    "                         this way (repeatable)\n"
    "  --max-dim NAME=N       bound tensor NAME, whose length is known only at run time and\n"
    "                         that its operator does not bound (a Range to a run-time\n"
    "                         limit), by N elements: its storage is planned for N, and a\n"
    "                         run in which it is longer fails, naming it (repeatable)\n"
    "\n"
    "Optimisation and scheduling:\n"
    "  -O0, -O1               only the passes code generation needs / every pass (default)\n"
    "  --schedule S           lios (default), ios, greedy, sequential; with --gpus, hios\n"
    "                         (default) or lios within each GPU\n"
    "  --streams N            use at most N CUDA streams\n"
    "  --prune R,S            IOS pruning: at most R operators per group, S groups per stage\n"
    "  --lios-priority P      rank (default) or paper\n"
    "  --device NAME|FILE     device the cost model describes (default h100)\n"
    "  --cost-db FILE         measured operator latencies for the cost model\n"
    "  --gpus N               place the operators on up to N GPUs (HIOS; the schedule\n"
    "                         hios), with peer copies between them\n"
    "  --placement P          with --gpus: lp (HIOS-LP, default), round-robin or contiguous\n"
    "  --hios-window W        with --gpus: group at most W operators on one GPU (default 3)\n"
    "  --link-gbps X          bandwidth between two GPUs, GB/s (default: the device file's)\n"
    "  --devices gpu,cpu      run each operator on the GPU or on the host CPU (HOPE), with\n"
    "                         copies between them; the CPU's operators are opc's CPU kernels\n"
    "  --partition P          with --devices gpu,cpu: ilp (HOPE's ILP, GLPK; default),\n"
    "                         heuristic (HOPE's greedy search), alternate, gpu or cpu\n"
    "  --cpu-cost-db FILE     measured latencies of the CPU program (its net --profile)\n"
    "  --cpu-device NAME|FILE the host CPU's model (default cpu)\n"
    "  --no-merge             do not merge operators\n"
    "\n"
    "Serving several requests and models (more than one model, or --instances):\n"
    "  NAME=MODEL.onnx        name a model (letters, digits, '_' and '-'); the program's\n"
    "                         API and its weights file (OUT.NAME.weights) use the name.\n"
    "                         By default it is made from the file name less .onnx: each\n"
    "                         run of other characters than ASCII letters, digits and '_'\n"
    "                         becomes one '_' (none at either end), '_' goes before a\n"
    "                         leading digit, and an empty name is 'model'\n"
    "                         (squeezenet1.1-7.onnx: squeezenet1_1_7)\n"
    "  --instances NAME=K,... requests of each model in flight at once (default 1 each);\n"
    "                         every copy is scheduled together with all the others\n"
    "  --queue-capacity N     requests each model's queue holds (default 256)\n"
    "  --arrivals NAME=RATE,...  the expected load, in requests per second: opc chooses\n"
    "                         the instances (unless --instances gives them) and each\n"
    "                         model's launcher interval on the cost model; --report\n"
    "                         prints the candidates and a comparison with separate\n"
    "                         contexts and with IOS per model\n"
    "  --latency-bound MS     with --arrivals: keep every model's p99 latency below MS\n"
    "\n"
    "Limits:\n"
    "  --max-memory BYTES     the most device memory the program may use, activations\n"
    "                         plus weights (default 64G); also bounds every tensor.\n"
    "                         Suffixes K, M, G, T are powers of 1024, e.g. 16G\n"
    "\n"
    "Inspection:\n"
    "  --dump-ir              print the imported IR and exit (no -o needed)\n"
    "  --dump-after PASS      print the IR after PASS, or after every pass with 'all'\n"
    "  --verify-each          verify the IR after every pass\n"
    "  --stats                node counts by kind before and after the passes\n"
    "  --report               per-stage schedule table, predicted for --device's GPU\n"
    "  --emit-schedule FILE   write the schedule as JSON\n"
    "  --emit-dot FILE        write the scheduled graph for Graphviz\n"
    "  --list-operators       print the supported operators and their types (Markdown), and exit\n"
    "  --help, --version\n"
    "\n"
    "Exit status: 0 success, 1 usage error, 2 the model cannot be compiled.\n";

/* One model of the command line: NAME=FILE, or FILE named after its stem. */
typedef struct ModelArg {
  const char *name;
  const char *path;
  bool named;    /* NAME=FILE; otherwise the name is made from the file name */
  int instances; /* --instances; 0 until given */
} ModelArg;

enum { MAX_MODELS = 64, MAX_INSTANCES = 64, MAX_BATCHES = 32, MAX_BATCH = 4096 };

typedef struct Config {
  ModelArg models[MAX_MODELS];
  int nmodels;
  const char *instances; /* --instances, parsed once the models are known */
  bool triton;            /* --emit triton: -o names a Triton model repository */
  const char *model_name; /* --model-name, with --emit triton */
  int64_t triton_instances;
  bool triton_python;    /* --triton-backend python */
  const char *max_batch; /* --max-batch, parsed into batches */
  int batches[MAX_BATCHES];
  int nbatches;
  const char *arrivals;  /* --arrivals, likewise */
  double rate[MAX_MODELS];
  double latency_bound_ms;
  int64_t queue_capacity;
  const char *out;
  bool help, version, list_operators, dump_ir;
  const char *print_flags; /* "--cflags" or "--libs": print for `target` and exit */
  const char *main_source; /* --emit-main: write main alone there and exit */
  Target target;
  ImportOptions import;
  InputShape *shapes; /* --input-shape, one slot per argument at most */
  ConstInput *consts; /* --const-input, likewise */
  MaxDim *max_dims;   /* --max-dim, likewise */
  PassOptions passes;
  EmitOptions emit;
} Config;

/* ---------------------------------------------------------- parsing */

typedef struct Args {
  int argc;
  char **argv;
  int i;
} Args;

static bool flag(const Args *a, const char *name) { return strcmp(a->argv[a->i], name) == 0; }

/*
 * True when the current argument is option `name`, as "name VALUE" or
 * "name=VALUE". *value is then its value, or NULL (reported) when missing.
 */
static bool takes(Args *a, const char *name, const char **value) {
  const char *arg = a->argv[a->i];
  size_t len = strlen(name);
  if (strncmp(arg, name, len) != 0 || (arg[len] != '\0' && arg[len] != '='))
    return false;
  if (arg[len] == '=') {
    *value = arg + len + 1;
  } else if (a->i + 1 < a->argc) {
    *value = a->argv[++a->i];
  } else {
    opc_error("option %s needs a value", name);
    *value = NULL;
  }
  return true;
}

/* The shift of a byte-count suffix: none, or K, M, G, T (powers of 1024,
   either case); -1 for anything else. */
static int unit_shift(const char *suffix) {
  if (suffix[0] == '\0')
    return 0;
  if (suffix[1] != '\0')
    return -1;
  switch (suffix[0]) {
  case 'K': case 'k': return 10;
  case 'M': case 'm': return 20;
  case 'G': case 'g': return 30;
  case 'T': case 't': return 40;
  default: return -1;
  }
}

/* A positive byte count such as 1048576 or 16G. */
static bool parse_bytes(const char *option, const char *s, int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = s[0] >= '0' && s[0] <= '9' ? strtoll(s, &end, 10) : 0;
  int shift = end ? unit_shift(end) : -1;
  if (v <= 0 || errno || shift < 0 || v > INT64_MAX >> shift) {
    opc_error("%s: expected a positive number of bytes, optionally with K, M, G or T "
              "(like 16G), got '%s'", option, s);
    return false;
  }
  *out = (int64_t)v << shift;
  return true;
}

static bool parse_positive(const char *option, const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || !(v > 0 && v <= 1e9)) {
    opc_error("%s: expected a positive number, got '%s'", option, s);
    return false;
  }
  *out = v;
  return true;
}

static bool parse_int(const char *option, const char *s, long min, long max, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) {
    opc_error("%s: expected a number from %ld to %ld, got '%s'", option, min, max, s);
    return false;
  }
  *out = v;
  return true;
}

/* Stores an option's string value; false when it was missing (reported). */
static bool set(const char **dst, const char *value) {
  *dst = value;
  return value != NULL;
}

static bool one_of(const char *option, const char *s, const char *const *choices) {
  for (int i = 0; choices[i]; i++)
    if (strcmp(s, choices[i]) == 0)
      return true;
  char expected[256] = "";
  for (int i = 0; choices[i]; i++)
    snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s%s",
             i == 0 ? "" : choices[i + 1] ? ", " : " or ", choices[i]);
  opc_error("%s: unknown value '%s' (expected %s)", option, s, expected);
  return false;
}

static bool parse_target(const char *option, const char *s, Target *t) {
  const Target targets[] = {TARGET_CUDA, TARGET_CPU, TARGET_STAND_IN};
  for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++)
    if (strcmp(s, target_name(targets[k])) == 0) {
      *t = targets[k];
      return true;
    }
  opc_error("%s: unknown target '%s' (cuda, cpu or stand-in)", option, s);
  return false;
}

static bool add_input_shape(Config *c, const char *s) {
  const char *eq = strchr(s, '=');
  InputShape *shape = (InputShape *)&c->import.shapes[c->import.nshapes];
  if (!eq || eq == s || !parse_shape(eq + 1, shape)) {
    opc_error("--input-shape: expected NAME=DIMS like x=1x3x224x224, got '%s'", s);
    return false;
  }
  shape->name = strndup(s, (size_t)(eq - s));
  c->import.nshapes++;
  return true;
}

static bool add_const_input(Config *c, const char *s) {
  const char *eq = strchr(s, '=');
  if (!eq || eq == s || eq[1] == '\0') {
    opc_error("--const-input: expected NAME=FILE like shape=shape.npy, got '%s'", s);
    return false;
  }
  ConstInput *ci = &c->consts[c->import.nconsts++];
  ci->name = strndup(s, (size_t)(eq - s));
  ci->path = eq + 1;
  return true;
}

static bool add_max_dim(Config *c, const char *s) {
  const char *eq = strchr(s, '=');
  int64_t bound;
  if (!eq || eq == s) {
    opc_error("--max-dim: expected NAME=N like positions=512, got '%s'", s);
    return false;
  }
  if (!parse_int("--max-dim", eq + 1, 1, 1L << 40, &bound))
    return false;
  MaxDim *d = &c->max_dims[c->import.nmax_dims++];
  d->name = strndup(s, (size_t)(eq - s));
  d->bound = bound;
  return true;
}

static bool parse_prune(Config *c, const char *s) {
  char *end;
  long r = strtol(s, &end, 10);
  long k = *end == ',' ? strtol(end + 1, &end, 10) : 0;
  if (r < 1 || k < 1 || *end) {
    opc_error("--prune: expected R,S with two positive numbers, got '%s'", s);
    return false;
  }
  c->passes.prune_r = (int)r;
  c->passes.prune_s = (int)k;
  return true;
}

static bool is_c_identifier(const char *s) {
  if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
    return false;
  for (s++; *s; s++)
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9')))
      return false;
  return true;
}

/* A name given with NAME=FILE or --model-name: it names the model in the
   serving program's API, its weights file OUT.NAME.weights and its Triton
   directory and config.pbtxt, all of which take '-' too. */
static bool is_model_name(const char *s) {
  if (!*s)
    return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_' || *s == '-'))
      return false;
  return true;
}

static bool is_name_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_';
}

/*
 * The name a model takes from its file's stem (the file name less ".onnx"),
 * whatever the file is called: every run of characters other than ASCII
 * letters, digits and '_' becomes one '_' (dropped at either end), a name
 * that would start with a digit gets a leading '_', and one left empty is
 * "model". "squeezenet1.1-7" is squeezenet1_1_7, "2 nets" _2_nets. It is
 * always a C identifier and a Triton model name.
 */
static char *name_from_stem(const char *stem, size_t len) {
  char *name = malloc(len + sizeof "model" + 1);
  size_t n = 0;
  bool gap = false;
  for (size_t i = 0; i < len; i++) {
    if (!is_name_char(stem[i])) {
      gap = true;
      continue;
    }
    if (gap && n > 0)
      name[n++] = '_';
    if (n == 0 && stem[i] >= '0' && stem[i] <= '9')
      name[n++] = '_';
    name[n++] = stem[i];
    gap = false;
  }
  name[n] = '\0';
  if (n == 0)
    strcpy(name, "model");
  return name;
}

/* "a, b and c": the models' names, for messages that ask for one. */
static const char *model_names(const Config *c) {
  static char list[1024];
  size_t len = 0;
  list[0] = '\0';
  for (int i = 0; i < c->nmodels && len < sizeof list; i++)
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                            i == 0 ? "" : i + 1 == c->nmodels ? " and " : ", ", c->models[i].name);
  return list;
}

/*
 * FILE (named after its stem) or NAME=FILE. An argument that is a file is
 * always FILE, so that a file name may hold '=' too.
 */
static bool add_model(Config *c, const char *arg) {
  if (c->nmodels == MAX_MODELS) {
    opc_error("more than %d models given", MAX_MODELS);
    return false;
  }
  ModelArg *m = &c->models[c->nmodels];
  const char *eq = strchr(arg, '=');
  const char *slash = strrchr(arg, '/');
  m->named = eq && (!slash || eq < slash) && access(arg, F_OK) != 0;
  if (m->named) {
    m->name = strndup(arg, (size_t)(eq - arg));
    m->path = eq + 1;
    if (!is_model_name(m->name)) {
      opc_error("'%s': a model's name must be letters, digits, '_' and '-' (given in %s)",
                m->name, arg);
      free((char *)m->name);
      return false;
    }
  } else {
    const char *stem = slash ? slash + 1 : arg;
    size_t len = strlen(stem);
    if (len >= 5 && strcmp(stem + len - 5, ".onnx") == 0)
      len -= 5;
    m->name = name_from_stem(stem, len);
    m->path = arg;
  }
  for (int i = 0; i < c->nmodels; i++)
    if (strcmp(c->models[i].name, m->name) == 0) {
      bool derived = !c->models[i].named || !m->named;
      opc_error("two models are named '%s' (%s and %s%s); name them with NAME=FILE, like "
                "%s_2=%s", m->name, c->models[i].path, m->path,
                derived ? "; a name made from a file name keeps its letters, digits and '_'" : "",
                m->name, m->path);
      free((char *)m->name);
      return false;
    }
  c->nmodels++;
  return true;
}

/* --instances NAME=K,...: each name a model of the command line. */
static bool parse_instances(Config *c) {
  for (int i = 0; i < c->nmodels; i++)
    c->models[i].instances = 1;
  if (!c->instances)
    return true;
  char *list = strdup(c->instances);
  bool ok = true;
  for (char *item = strtok(list, ","); item && ok; item = strtok(NULL, ",")) {
    char *eq = strchr(item, '=');
    int64_t k = 0;
    ModelArg *m = NULL;
    if (eq) {
      *eq = '\0';
      for (int i = 0; i < c->nmodels; i++)
        if (strcmp(c->models[i].name, item) == 0)
          m = &c->models[i];
    }
    if (!eq || !m) {
      opc_error("--instances: expected NAME=K with NAME one of the models, got '%s' (the "
                "models: %s)", item, model_names(c));
      ok = false;
    } else {
      ok = parse_int("--instances", eq + 1, 1, MAX_INSTANCES, &k);
      if (ok)
        m->instances = (int)k;
    }
  }
  free(list);
  return ok;
}

/* --arrivals NAME=RATE,...: requests per second (a trailing "/s" allowed);
   a model not named gets none. */
static bool parse_arrivals(Config *c) {
  if (!c->arrivals)
    return true;
  char *list = strdup(c->arrivals);
  bool ok = true;
  for (char *item = strtok(list, ","); item && ok; item = strtok(NULL, ",")) {
    char *eq = strchr(item, '='), *end = NULL;
    int m = -1;
    if (eq) {
      *eq = '\0';
      for (int i = 0; i < c->nmodels; i++)
        if (strcmp(c->models[i].name, item) == 0)
          m = i;
    }
    double rate = eq ? strtod(eq + 1, &end) : -1;
    if (end && strcmp(end, "/s") == 0)
      end += 2;
    if (m < 0 || !end || *end || !(rate >= 0 && rate <= 1e7)) {
      opc_error("--arrivals: expected NAME=RATE (requests per second, like a=300/s) with NAME one "
                "of the models, got '%s%s%s' (the models: %s)", item, eq ? "=" : "",
                eq ? eq + 1 : "", model_names(c));
      ok = false;
    } else {
      c->rate[m] = rate;
    }
  }
  free(list);
  return ok;
}

/* A program that serves requests (several models, or copies of one). With
   --emit triton, Triton serves them: one program per model. */
static bool serving(const Config *c) {
  return !c->triton && (c->nmodels > 1 || c->instances || c->arrivals);
}

static int compare_ints(const void *a, const void *b) {
  return *(const int *)a - *(const int *)b;
}

/* --max-batch N: 1, 2, 4, ... below N, and N; or the sizes given, sorted. */
static bool parse_max_batch(Config *c) {
  const char *s = c->max_batch;
  if (!strchr(s, ',')) {
    int64_t n;
    if (!parse_int("--max-batch", s, 1, MAX_BATCH, &n))
      return false;
    for (int b = 1; b < n; b *= 2)
      c->batches[c->nbatches++] = b;
    c->batches[c->nbatches++] = (int)n;
    return true;
  }
  char *copy = strdup(s);
  bool ok = true;
  for (char *w = copy, *next; w && ok; w = next) {
    next = strchr(w, ',');
    if (next)
      *next++ = '\0';
    int64_t b;
    if (c->nbatches == MAX_BATCHES) {
      opc_error("--max-batch: more than %d sizes", MAX_BATCHES);
      ok = false;
      break;
    }
    ok = parse_int("--max-batch (a batch size)", w, 1, MAX_BATCH, &b);
    for (int i = 0; ok && i < c->nbatches; i++)
      if (c->batches[i] == b) {
        opc_error("--max-batch: %lld is given twice", (long long)b);
        ok = false;
      }
    if (ok)
      c->batches[c->nbatches++] = (int)b;
  }
  free(copy);
  qsort(c->batches, (size_t)c->nbatches, sizeof c->batches[0], compare_ints);
  return ok;
}

/* --emit triton: --instances is the instance count of every model. */
static bool check_triton_options(Config *c) {
  if (!c->triton) {
    if (c->model_name || c->max_batch || c->triton_python) {
      opc_error("%s is an option of --emit triton",
                c->model_name ? "--model-name" : c->max_batch ? "--max-batch" : "--triton-backend");
      return false;
    }
    return true;
  }
  if (c->max_batch && c->triton_python) {
    opc_error("--max-batch: dynamic batching needs opc's backend, not --triton-backend python");
    return false;
  }
  if (c->max_batch && !parse_max_batch(c))
    return false;
  if (!c->out || c->dump_ir) {
    opc_error("--emit triton writes a model repository: give it with -o REPO");
    return false;
  }
  if (c->model_name && c->nmodels > 1) {
    opc_error("--model-name names one model; name several with NAME=MODEL.onnx");
    return false;
  }
  if (c->arrivals || c->latency_bound_ms > 0) {
    opc_error("--arrivals and --latency-bound plan a serving program, not a Triton model");
    return false;
  }
  if (strcmp(c->emit.prefix, "net") != 0) {
    opc_error("--prefix: a Triton model's backend calls the net_ API");
    return false;
  }
  c->triton_instances = 1;
  return !c->instances ||
         parse_int("--instances (with --emit triton, a count)", c->instances, 1, MAX_INSTANCES,
                   &c->triton_instances);
}

static const char *const priorities[] = {"paper", "rank", NULL};
static const char *const precisions[] = {"fp32", "tf32", "fp16", "bf16", NULL};
static const char *const io_precisions[] = {"fp32", "fp16", NULL};
static const char *const layouts[] = {"auto", "nchw", "nhwc", NULL};
static const char *const placements[] = {"lp", "round-robin", "contiguous", NULL};
static const char *const emit_kinds[] = {"triton", NULL};
static const char *const cpu_features[] = {"host", "vnni", "generic", NULL};

/* Whether the CPU compiling the model has AVX-512 VNNI: --cpu-features
   host, the default, writes the CPU program for it. */
static bool host_has_vnni(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}
static const char *const triton_backends[] = {"opc", "python", NULL};
static const char *const partitions[] = {"ilp", "heuristic", "alternate", "gpu", "cpu", NULL};

/* --devices: the GPU alone, or the GPU and the host CPU (in either order). */
static bool parse_devices(PassOptions *p, const char *v) {
  if (strcmp(v, "gpu") == 0) {
    p->cpu = false;
    return true;
  }
  if (strcmp(v, "gpu,cpu") == 0 || strcmp(v, "cpu,gpu") == 0) {
    p->cpu = true;
    return true;
  }
  opc_error("--devices '%s': expected gpu or gpu,cpu", v);
  return false;
}

/* One option; false after reporting a usage error. */
static bool parse_option(Args *a, Config *c) {
  PassOptions *p = &c->passes;
  const char *v;
  int64_t n;
  if (flag(a, "--help") || flag(a, "-h"))
    c->help = true;
  else if (flag(a, "--version"))
    c->version = true;
  else if (flag(a, "--list-operators"))
    c->list_operators = true;
  else if (flag(a, "--dump-ir"))
    c->dump_ir = true;
  else if (flag(a, "-O0") || flag(a, "-O1"))
    p->opt_level = a->argv[a->i][2] - '0';
  else if (flag(a, "--stats"))
    p->stats = true;
  else if (flag(a, "--verify-each"))
    p->verify_each = true;
  else if (flag(a, "--no-merge"))
    p->no_merge = true;
  else if (flag(a, "--report"))
    p->report = true;
  else if (flag(a, "--embed-weights"))
    c->emit.embed_weights = true;
  else if (flag(a, "--no-cuda-graph"))
    c->emit.cuda_graph = false;
  else if (takes(a, "-o", &v))
    return set(&c->out, v);
  else if (takes(a, "--input-shape", &v))
    return v && add_input_shape(c, v);
  else if (takes(a, "--const-input", &v))
    return v && add_const_input(c, v);
  else if (takes(a, "--max-dim", &v))
    return v && add_max_dim(c, v);
  else if (takes(a, "--max-memory", &v))
    return v && parse_bytes("--max-memory", v, &c->import.max_memory);
  else if (takes(a, "--batch", &v))
    return v && parse_int("--batch", v, 1, 1 << 30, &c->import.batch);
  else if (takes(a, "--dump-after", &v))
    return v && pipeline_check_dump_after("--dump-after", v) && set(&p->dump_after, v);
  else if (takes(a, "--schedule", &v))
    return v && one_of("--schedule", v, scheduler_names()) && set(&p->scheduler, v);
  else if (takes(a, "--streams", &v)) {
    if (!v || !parse_int("--streams", v, 1, 64, &n))
      return false;
    p->streams = (int)n;
  } else if (takes(a, "--gpus", &v)) {
    if (!v || !parse_int("--gpus", v, 1, 16, &n))
      return false;
    p->gpus = (int)n;
  } else if (takes(a, "--hios-window", &v)) {
    if (!v || !parse_int("--hios-window", v, 1, 16, &n))
      return false;
    p->window = (int)n;
  } else if (takes(a, "--placement", &v))
    return v && one_of("--placement", v, placements) && set(&p->placement, v);
  else if (takes(a, "--link-gbps", &v))
    return v && parse_positive("--link-gbps", v, &p->link_gbps);
  else if (takes(a, "--devices", &v))
    return v && parse_devices(p, v);
  else if (takes(a, "--partition", &v))
    return v && one_of("--partition", v, partitions) && set(&p->partition, v);
  else if (takes(a, "--cpu-cost-db", &v))
    return set(&p->cpu_cost_db, v);
  else if (takes(a, "--cpu-device", &v))
    return set(&p->cpu_device, v);
  else if (takes(a, "--prune", &v))
    return v && parse_prune(c, v);
  else if (takes(a, "--lios-priority", &v))
    return v && one_of("--lios-priority", v, priorities) && set(&p->lios_priority, v);
  else if (takes(a, "--device", &v))
    return set(&p->device, v);
  else if (takes(a, "--cost-db", &v))
    return set(&p->cost_db, v);
  else if (takes(a, "--emit-schedule", &v))
    return set(&p->emit_schedule, v);
  else if (takes(a, "--emit-dot", &v))
    return set(&p->emit_dot, v);
  else if (takes(a, "--prefix", &v)) {
    if (!v)
      return false;
    if (!is_c_identifier(v)) {
      opc_error("--prefix: '%s' is not a C identifier", v);
      return false;
    }
    c->emit.prefix = v;
  } else if (takes(a, "--layout", &v)) {
    if (!v || !one_of("--layout", v, layouts))
      return false;
    c->passes.layout = strcmp(v, "nchw") == 0 ? LAYOUT_NCHW : strcmp(v, "nhwc") == 0 ? LAYOUT_NHWC : LAYOUT_AUTO;
  } else if (takes(a, "--io-precision", &v)) {
    if (!v || !one_of("--io-precision", v, io_precisions))
      return false;
    c->passes.io_half = strcmp(v, "fp16") == 0;
  } else if (takes(a, "--precision", &v)) {
    if (!v || !one_of("--precision", v, precisions))
      return false;
    /* 16-bit data runs on tensor cores, and so may what stays float32 */
    c->passes.half = strcmp(v, "fp16") == 0 ? DT_FLOAT16 : strcmp(v, "bf16") == 0 ? DT_BFLOAT16 : 0;
    c->emit.tf32 = strcmp(v, "tf32") == 0 || c->passes.half;
    c->emit.precision = v;
    c->passes.tf32 = c->emit.tf32; /* the cost model's convolutions and GEMMs */
  } else if (takes(a, "--target", &v))
    return v && parse_target("--target", v, &c->target);
  else if (takes(a, "--cpu-features", &v)) {
    if (!v || !one_of("--cpu-features", v, cpu_features))
      return false;
    c->emit.cpu_vnni = strcmp(v, "vnni") == 0 || (strcmp(v, "host") == 0 && host_has_vnni());
  }
  else if (takes(a, "--cflags", &v)) {
    c->print_flags = "--cflags";
    return v && parse_target("--cflags", v, &c->target);
  } else if (takes(a, "--emit-main", &v)) {
    c->main_source = v;
    return v != NULL;
  } else if (takes(a, "--libs", &v)) {
    c->print_flags = "--libs";
    return v && parse_target("--libs", v, &c->target);
  } else if (takes(a, "--instances", &v))
    return set(&c->instances, v);
  else if (takes(a, "--emit", &v)) {
    if (!v || !one_of("--emit", v, emit_kinds))
      return false;
    c->triton = true;
  } else if (takes(a, "--triton-backend", &v)) {
    if (!v || !one_of("--triton-backend", v, triton_backends))
      return false;
    c->triton_python = strcmp(v, "python") == 0;
  } else if (takes(a, "--max-batch", &v)) {
    return set(&c->max_batch, v);
  } else if (takes(a, "--model-name", &v)) {
    if (!v)
      return false;
    if (!is_model_name(v)) {
      opc_error("--model-name: '%s' must be letters, digits, '_' and '-'", v);
      return false;
    }
    c->model_name = v;
  }
  else if (takes(a, "--arrivals", &v))
    return set(&c->arrivals, v);
  else if (takes(a, "--latency-bound", &v))
    return v && parse_positive("--latency-bound", v, &c->latency_bound_ms);
  else if (takes(a, "--queue-capacity", &v))
    return v && parse_int("--queue-capacity", v, 1, 1 << 20, &c->queue_capacity);
  else if (a->argv[a->i][0] == '-' && a->argv[a->i][1] != '\0') {
    opc_error("unknown option '%s'", a->argv[a->i]);
    return false;
  } else {
    return add_model(c, a->argv[a->i]);
  }
  return true;
}

static bool parse_args(int argc, char **argv, Config *c) {
  c->passes.opt_level = 1;
  c->emit.prefix = "net";
  c->emit.cuda_graph = true;
  c->emit.cpu_vnni = host_has_vnni();
  c->target = TARGET_CUDA;
  c->queue_capacity = 256;
  c->shapes = calloc((size_t)argc, sizeof(InputShape));
  c->import.shapes = c->shapes;
  c->consts = calloc((size_t)argc, sizeof(ConstInput));
  c->import.consts = c->consts;
  c->max_dims = calloc((size_t)argc, sizeof(MaxDim));
  c->import.max_dims = c->max_dims;
  Args a = {argc, argv, 1};
  for (; a.i < argc; a.i++)
    if (!parse_option(&a, c))
      return false;
  if (c->help || c->version || c->list_operators || c->print_flags || c->main_source)
    return true;
  if (c->nmodels == 0) {
    opc_error("no model given");
    return false;
  }
  if (!check_triton_options(c))
    return false;
  if (!c->triton && (!parse_instances(c) || !parse_arrivals(c)))
    return false;
  if (c->latency_bound_ms > 0 && !c->arrivals) {
    opc_error("--latency-bound needs --arrivals, the load it bounds");
    return false;
  }
  if (serving(c) && c->dump_ir) {
    opc_error("--dump-ir reads one model; --dump-after shows a serving program's graph");
    return false;
  }
  c->passes.cpu_target = c->target == TARGET_CPU;
  /* Without -o, only inspection makes sense. */
  const PassOptions *p = &c->passes;
  bool inspects = p->dump_after || p->stats || p->report || p->emit_schedule || p->emit_dot;
  if (p->gpus > 1 && p->scheduler && strcmp(p->scheduler, "hios") != 0 &&
      strcmp(p->scheduler, "lios") != 0) {
    opc_error("--gpus %d: the %s scheduler plans one GPU; use --schedule hios or lios", p->gpus,
              p->scheduler);
    return false;
  }
  if (p->cpu && p->gpus > 1) {
    opc_error("--devices gpu,cpu takes one GPU; --gpus %d places on several", p->gpus);
    return false;
  }
  if (p->cpu && p->scheduler && strcmp(p->scheduler, "lios") != 0) {
    opc_error("--devices gpu,cpu: the %s scheduler plans one device; use --schedule lios",
              p->scheduler);
    return false;
  }
  if (p->cpu && serving(c)) {
    opc_error("--devices gpu,cpu: a program serving several requests or models runs on the GPU");
    return false;
  }
  if (p->layout == LAYOUT_NHWC && (p->gpus > 1 || p->cpu)) {
    opc_error("--layout nhwc: a program on several devices keeps ONNX's order (--gpus, "
              "--devices)");
    return false;
  }
  if (p->layout == LAYOUT_NHWC && !p->half) {
    opc_error("--layout nhwc needs --precision fp16 or bf16: it orders the data of 16-bit "
              "convolutions");
    return false;
  }
  if (p->io_half && p->half != DT_FLOAT16) {
    opc_error("--io-precision fp16 needs --precision fp16: the program's data is float16 then");
    return false;
  }
  if (!p->cpu && (p->partition || p->cpu_cost_db || p->cpu_device)) {
    opc_error("%s needs --devices gpu,cpu",
              p->partition ? "--partition" : p->cpu_cost_db ? "--cpu-cost-db" : "--cpu-device");
    return false;
  }
  if (p->gpus > 1 && serving(c)) {
    opc_error("--gpus %d: a program serving several requests or models runs on one GPU",
              p->gpus);
    return false;
  }
  if (!c->out && !c->dump_ir && !inspects) {
    opc_error("no output given (-o OUT)");
    return false;
  }
  return true;
}

static void free_config(Config *c) {
  for (int i = 0; i < c->nmodels; i++)
    free((char *)c->models[i].name);
  for (int i = 0; i < c->import.nshapes; i++)
    free((char *)c->shapes[i].name);
  free(c->shapes);
  for (int i = 0; i < c->import.nconsts; i++)
    free((char *)c->consts[i].name);
  free(c->consts);
  for (int i = 0; i < c->import.nmax_dims; i++)
    free((char *)c->max_dims[i].name);
  free(c->max_dims);
}

/* ---------------------------------------------------------- compiling */

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Path `base` with `ext` appended, malloc'ed. */
static char *with_ext(const char *base, size_t baselen, const char *ext) {
  size_t len = baselen + strlen(ext) + 1;
  char *p = malloc(len);
  snprintf(p, len, "%.*s%s", (int)baselen, base, ext);
  return p;
}

/*
 * OUT ending in .c: write OUT, OUT's .h and .weights (a serving program:
 * OUT.NAME.weights per model). OUT ending in .so: write them for OUT less
 * its .so and build the shared library OUT. Otherwise write OUT.c, OUT.h,
 * the weights and build the executable OUT from them. A failed build
 * removes them all, so that no failure leaves partial output.
 */
static bool write_outputs(Graph *g, Config *c, const char *out) {
  bool source_only = ends_with(out, ".c");
  bool shared = ends_with(out, ".so");
  size_t baselen = strlen(out) - (source_only ? 2 : shared ? 3 : 0);
  char *c_path = with_ext(out, baselen, ".c");
  char *h_path = with_ext(out, baselen, ".h");
  char *w_path = with_ext(out, baselen, ".weights");
  int nmodels = g->serve ? g->serve->nmodels : 0;
  char **model_w = calloc((size_t)nmodels + 1, sizeof(char *));
  for (int m = 0; m < nmodels; m++) {
    char *ext = malloc(strlen(g->serve->models[m].name) + 10);
    sprintf(ext, ".%s.weights", g->serve->models[m].name);
    model_w[m] = with_ext(out, baselen, ext);
    free(ext);
  }
  EmitOptions emit = c->emit;
  emit.target = c->target;
  emit.c_path = c_path;
  emit.h_path = h_path;
  emit.weights_path = w_path;
  emit.model_weights_paths = (const char *const *)model_w;
  emit.queue_capacity = (int)c->queue_capacity;
  bool ok = emit_program(g, &emit);
  if (ok && !source_only) {
    ok = build_executable(c_path, out, c->target, shared, g->serve ? NULL : c->emit.prefix);
    if (!ok) {
      remove(c_path);
      remove(h_path);
      remove(w_path);
      for (int m = 0; m < nmodels; m++)
        remove(model_w[m]);
      remove(out);
    }
  }
  for (int m = 0; m < nmodels; m++)
    free(model_w[m]);
  free(model_w);
  free(c_path);
  free(h_path);
  free(w_path);
  return ok;
}

/* What the pipeline made: --emit-schedule, --emit-dot, --report, --stats. */
static bool write_reports(Graph *g, PassContext *ctx, const PassOptions *p, Target target) {
  if (p->emit_schedule && !schedule_write_json(g, ctx, p->emit_schedule))
    return false;
  if (p->emit_dot && !schedule_write_dot(g, ctx, p->emit_dot))
    return false;
  if (p->report) {
    schedule_print_report(g, ctx, stdout);
    if (target != TARGET_CUDA)
      printf("--target %s: these are GPU predictions from the device file; the "
             "program's own times on the CPU come from its --bench and --profile\n",
             target_name(target));
  }
  if (p->stats)
    pipeline_print_stats(g, ctx);
  return true;
}

/* Standard output must have taken everything printed to it. */
static bool flushed(void) {
  if (fflush(stdout) == 0)
    return true;
  opc_error("cannot write to standard output");
  return false;
}

/* Whether g or a Loop body in it has a tensor of that name. */
static bool has_tensor(Graph *g, const char *name) {
  if (graph_find_tensor(g, name))
    return true;
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->body && has_tensor(g->nodes[i]->body, name))
      return true;
  return false;
}

/* Every --max-dim must name a tensor of the model. */
static bool max_dims_named(const Config *c, Graph *g) {
  bool ok = true;
  for (int i = 0; i < c->import.nmax_dims; i++)
    if (!has_tensor(g, c->max_dims[i].name)) {
      opc_error("--max-dim: '%s' is no tensor of %s", c->max_dims[i].name, g->path);
      ok = false;
    }
  return ok;
}

static int compile_one(Config *c) {
  Graph *g = onnx_import(c->models[0].path, &c->import);
  if (!g)
    return EXIT_COMPILE;
  if (!max_dims_named(c, g)) {
    graph_free(g);
    return EXIT_COMPILE;
  }
  bool ok;
  if (c->dump_ir) {
    ok = graph_verify(g);
    if (ok)
      graph_dump(g, stdout);
  } else {
    PassContext *ctx = pass_context_new(g, &c->passes);
    ok = run_pipeline(g, &c->passes, ctx) && write_reports(g, ctx, &c->passes, c->target);
    if (ok && c->out)
      ok = write_outputs(g, c, c->out);
  }
  graph_free(g);
  ok = flushed() && ok;
  return ok ? EXIT_SUCCESS : EXIT_COMPILE;
}

/* Every --input-shape and --const-input must name an input of some model. */
static bool all_used(const Config *c, const bool *shape_used, const bool *const_used) {
  bool ok = true;
  for (int i = 0; i < c->import.nshapes; i++)
    if (!shape_used[i]) {
      opc_error("--input-shape names '%s', which is not an input of any model",
                c->import.shapes[i].name);
      ok = false;
    }
  for (int i = 0; i < c->import.nconsts; i++)
    if (!const_used[i]) {
      opc_error("--const-input: '%s' is not an input of any model", c->import.consts[i].name);
      ok = false;
    }
  return ok;
}

/*
 * --arrivals: the instances (unless given) and the launcher's intervals that
 * the cost model predicts best for the load; with --report, the candidates
 * and the comparison with the baselines on standard output. `note` gets a
 * line for net.h.
 */
static bool plan_serving(Config *c, Graph **models, const char **names, int *instances,
                         double *interval_ms, char *note, size_t size) {
  ServePlan plan = {.rate = c->rate,
                    .latency_bound_ms = c->latency_bound_ms,
                    .fixed_instances = c->instances ? instances : NULL,
                    .queue_capacity = (int)c->queue_capacity,
                    .instances = instances,
                    .interval_ms = interval_ms};
  if (!serve_plan(models, names, c->nmodels, &c->passes, &plan, c->passes.report ? stdout : NULL))
    return false;
  char bound[64] = "";
  if (c->latency_bound_ms > 0)
    snprintf(bound, sizeof bound, " --latency-bound %g", c->latency_bound_ms);
  snprintf(note, size, "opc chose them for --arrivals %s%s:\npredicted %.1f requests/s served, "
           "worst p99 latency %.3g ms%s.", c->arrivals, bound, plan.predicted_served_per_s,
           plan.predicted_p99_ms, plan.feasible ? "" : " (more load than it can serve)");
  if (!plan.feasible)
    ir_warning(NULL, NULL, "--arrivals %s: no candidate serves this load%s; chose the one that serves most",
                c->arrivals, c->latency_bound_ms > 0 ? " within the latency bound" : "");
  return true;
}

/*
 * A serving program: each model is imported and rewritten on its own, then
 * its copies are joined into one graph (graph_join) that is scheduled as a
 * whole and emitted with the request launcher.
 */
static int compile_serving(Config *c) {
  int n = c->nmodels;
  Graph *models[MAX_MODELS] = {0};
  const char *names[MAX_MODELS];
  int instances[MAX_MODELS];
  bool *shape_used = calloc((size_t)c->import.nshapes + 1, sizeof(bool));
  bool *const_used = calloc((size_t)c->import.nconsts + 1, sizeof(bool));
  ImportOptions import = c->import;
  import.shape_used = shape_used;
  import.const_used = const_used;
  bool ok = true;
  for (int m = 0; m < n; m++) {
    names[m] = c->models[m].name;
    instances[m] = c->models[m].instances;
    models[m] = onnx_import(c->models[m].path, &import);
    ok = models[m] != NULL && ok;
    /* graph_join copies no body: an If runs both branches, a Loop is refused */
    if (models[m] && !pass_if_both_branches(models[m], "a serving program runs no conditional "
                                            "nodes"))
      ok = false;
    for (int i = 0; models[m] && i < models[m]->nnodes; i++)
      if (models[m]->nodes[i]->body) {
        opc_error("%s: node '%s' (Loop): its trip count or condition is run-time data, which "
                  "opc runs in a single model's program only, not in a serving program",
                  c->models[m].path, models[m]->nodes[i]->name);
        ok = false;
        break;
      }
    /* A serving program has no run() to check shape inputs in (ir/pin.c). */
    if (models[m] && models[m]->nchecks > 0) {
      opc_error("%s: node '%s' (%s): input '%s' decides a shape and is given at run time; a "
                "serving program needs it constant (bind it with --const-input)",
                c->models[m].path, models[m]->checks[0].node_name,
                op_name(models[m]->checks[0].op), models[m]->checks[0].input->name);
      ok = false;
    }
  }
  ok = ok && all_used(c, shape_used, const_used);
  for (int m = 0; m < n && ok; m++) {
    PassContext *ctx = pass_context_new(models[m], &c->passes);
    ok = run_pipeline_part(models[m], &c->passes, ctx, PIPELINE_REWRITE);
    if (ok && c->passes.stats) {
      printf("model %s (%s), after rewriting:\n", names[m], c->models[m].path);
      pipeline_print_stats(models[m], ctx);
    }
  }
  double interval_ms[MAX_MODELS] = {0};
  char note[512] = "";
  if (ok && c->arrivals)
    ok = plan_serving(c, models, names, instances, interval_ms, note, sizeof note);
  Graph *joint = NULL;
  if (ok) {
    c->emit.serve_interval_ms = interval_ms;
    c->emit.serve_note = note[0] ? note : NULL;
    joint = graph_join(models, names, instances, n);
    PassContext *ctx = pass_context_new(joint, &c->passes);
    PassOptions joint_opt = c->passes;
    joint_opt.stats = false; /* printed per model above */
    ok = run_pipeline_part(joint, &joint_opt, ctx, PIPELINE_SCHEDULE) &&
         write_reports(joint, ctx, &joint_opt, c->target);
    if (ok && c->out)
      ok = write_outputs(joint, c, c->out);
  }
  graph_free(joint);
  for (int m = 0; m < n; m++)
    graph_free(models[m]);
  free(shape_used);
  free(const_used);
  ok = flushed() && ok;
  return ok ? EXIT_SUCCESS : EXIT_COMPILE;
}

/* mkdir that accepts a directory already there; *made says whether it
   was this call that made it, so that a failure can take it back. */
static bool make_dir(const char *path, bool *made) {
  *made = mkdir(path, 0777) == 0;
  struct stat st;
  if (*made || (errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
    return true;
  opc_error("cannot make the directory %s: %s", path, errno == EEXIST ? "a file is in the way"
                                                                      : strerror(errno));
  return false;
}

/* DIR/BASE.so and the .c, .h and .weights written beside it. */
static void remove_program(const char *dir, const char *base) {
  char path[PATH_MAX];
  for (const char *ext = "so\0c\0h\0weights\0"; *ext; ext += strlen(ext) + 1) {
    snprintf(path, sizeof path, "%s/%s.%s", dir, base, ext);
    remove(path);
  }
}

/* Whether two files hold the same bytes (false where either is unreadable). */
static bool same_bytes(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  bool same = fa && fb;
  char x[1 << 15], y[1 << 15];
  while (same) {
    size_t n = fread(x, 1, sizeof x, fa), k = fread(y, 1, sizeof y, fb);
    same = n == k && memcmp(x, y, n) == 0 && !ferror(fa) && !ferror(fb);
    if (n == 0)
      break;
  }
  if (fa)
    fclose(fa);
  if (fb)
    fclose(fb);
  return same;
}

/* --max-batch: every input of the model `g` imported, its first
   dimension `batch`. */
static bool batch_shapes(const Graph *g, const char *model, int batch, InputShape *shapes) {
  for (int i = 0; i < g->ninputs; i++) {
    const Tensor *t = g->inputs[i];
    if (t->rank == 0) {
      opc_error("model '%s': --max-batch rebinds the first dimension of every input, and "
                "input '%s' is a scalar", model, t->name);
      return false;
    }
    shapes[i] = (InputShape){.name = t->name, .rank = t->rank};
    memcpy(shapes[i].dims, t->dims, sizeof t->dims);
    shapes[i].dims[0] = batch;
  }
  return true;
}

/* A batched program's outputs must each have the batch's rows. */
static bool check_batched_outputs(const Graph *g, const char *model, int batch) {
  for (int i = 0; i < g->noutputs; i++) {
    const Tensor *t = g->outputs[i];
    if (t->rank == 0 || t->bounded || t->dims[0] != batch) {
      opc_error("model '%s': with every input's first dimension %d, output '%s' is %s; "
                "--max-batch needs outputs whose first dimension is the batch", model, batch,
                t->name, t->rank == 0 ? "a scalar" : t->bounded ? "sized by the data" : "not");
      return false;
    }
  }
  return true;
}

/* The program of model m for `batch` rows, built as lib; returns its graph. */
static Graph *compile_batch(Config *c, int m, const Graph *g1, int batch, const char *lib,
                            bool report) {
  const char *name = c->model_name ? c->model_name : c->models[m].name;
  InputShape *shapes = calloc((size_t)g1->ninputs + 1, sizeof *shapes);
  bool *shape_used = calloc((size_t)g1->ninputs + 1, sizeof(bool));
  bool *const_used = calloc((size_t)c->import.nconsts + 1, sizeof(bool));
  ImportOptions import = c->import;
  import.shapes = shapes;
  import.nshapes = g1->ninputs;
  import.batch = 0;
  import.shape_used = shape_used;
  import.const_used = const_used;
  Graph *g = NULL;
  bool ok = batch_shapes(g1, name, batch, shapes);
  if (ok && !(g = onnx_import(c->models[m].path, &import))) {
    opc_error("model '%s': it cannot be compiled for batch %d with the first dimension of "
              "every input rebound (--max-batch): see the errors above", name, batch);
    ok = false;
  }
  if (ok) {
    PassContext *ctx = pass_context_new(g, &c->passes);
    ok = run_pipeline(g, &c->passes, ctx) && check_batched_outputs(g, name, batch) &&
         (!report || write_reports(g, ctx, &c->passes, c->target)) && write_outputs(g, c, lib);
  }
  free(shapes);
  free(shape_used);
  free(const_used);
  if (!ok) {
    graph_free(g);
    return NULL;
  }
  return g;
}

/*
 * --max-batch: VERSION_DIR/libnet_bB.so for each batch size B. A program
 * whose weights file holds the same bytes as the first program's loses it,
 * and the backend gives it the first's. Returns the largest program's graph.
 */
static Graph *write_batched(Config *c, int m, const Graph *g1, const char *version_dir) {
  char lib[PATH_MAX], base[64], first_w[PATH_MAX], w[PATH_MAX];
  Graph *g = NULL;
  int built = 0;
  for (; built < c->nbatches; built++) {
    snprintf(base, sizeof base, "libnet_b%d", c->batches[built]);
    snprintf(lib, sizeof lib, "%s/%s.so", version_dir, base);
    graph_free(g);
    if (!(g = compile_batch(c, m, g1, c->batches[built], lib, built == 0)))
      break;
    snprintf(w, sizeof w, "%s/%s.weights", version_dir, base);
    if (built == 0)
      snprintf(first_w, sizeof first_w, "%s", w);
    else if (same_bytes(first_w, w))
      remove(w);
  }
  if (built == c->nbatches)
    return g;
  for (int k = 0; k < built; k++) {
    snprintf(base, sizeof base, "libnet_b%d", c->batches[k]);
    remove_program(version_dir, base);
  }
  return NULL;
}

/* REPO/NAME/1/libnet.so and what write_outputs writes beside it (with
   --max-batch: libnet_bB.so for each batch size, from the imported g),
   then config.pbtxt and the backend; a failure takes back what it made. */
static bool write_triton(Graph *g, Config *c, int m) {
  const char *name = c->model_name ? c->model_name : c->models[m].name;
  size_t size = strlen(c->out) + strlen(name) + 32;
  char *model_dir = malloc(size), *version_dir = malloc(size), *lib = malloc(size);
  snprintf(model_dir, size, "%s/%s", c->out, name);
  snprintf(version_dir, size, "%s/1", model_dir);
  snprintf(lib, size, "%s/libnet.so", version_dir);
  bool made_model = false, made_version = false;
  bool ok = make_dir(model_dir, &made_model) && make_dir(version_dir, &made_version);
  Graph *largest = NULL;
  if (ok && c->nbatches)
    ok = (largest = write_batched(c, m, g, version_dir)) != NULL;
  else if (ok)
    ok = write_outputs(g, c, lib);
  if (ok) {
    TritonOptions t = {.model_dir = model_dir, .name = name, .source = c->models[m].path,
                       .instances = (int)c->triton_instances, .target = c->target,
                       .python = c->triton_python,
                       .max_batch = c->nbatches ? c->batches[c->nbatches - 1] : 0};
    ok = write_triton_model(largest ? largest : g, &t);
    for (int k = 0; !ok && k < (c->nbatches ? c->nbatches : 1); k++) {
      char base[64] = "libnet";
      if (c->nbatches)
        snprintf(base, sizeof base, "libnet_b%d", c->batches[k]);
      remove_program(version_dir, base);
    }
  }
  graph_free(largest);
  if (!ok && made_version)
    rmdir(version_dir);
  if (!ok && made_model)
    rmdir(model_dir);
  free(model_dir);
  free(version_dir);
  free(lib);
  return ok;
}

/*
 * --emit triton: a Triton model repository, each model compiled on its own
 * as a shared library (or one per batch size) under REPO/NAME/1, with
 * Triton's config and the backend that runs it.
 */
static int compile_triton(Config *c) {
  Graph *models[MAX_MODELS] = {0};
  bool *shape_used = calloc((size_t)c->import.nshapes + 1, sizeof(bool));
  bool *const_used = calloc((size_t)c->import.nconsts + 1, sizeof(bool));
  ImportOptions import = c->import;
  import.shape_used = shape_used;
  import.const_used = const_used;
  /* With --max-batch, this import gives the inputs whose first dimension
     each batch size rebinds: a symbolic one is 1 unless --batch says. */
  if (c->nbatches && !import.batch)
    import.batch = 1;
  bool ok = true;
  for (int m = 0; m < c->nmodels; m++) {
    models[m] = onnx_import(c->models[m].path, &import);
    ok = models[m] != NULL && ok;
  }
  ok = ok && all_used(c, shape_used, const_used);
  bool made_repo = false;
  ok = ok && make_dir(c->out, &made_repo);
  for (int m = 0; m < c->nmodels && ok; m++) {
    if (!c->nbatches) {
      PassContext *ctx = pass_context_new(models[m], &c->passes);
      ok = run_pipeline(models[m], &c->passes, ctx) &&
           write_reports(models[m], ctx, &c->passes, c->target);
    }
    ok = ok && write_triton(models[m], c, m);
  }
  if (!ok && made_repo)
    rmdir(c->out);
  for (int m = 0; m < c->nmodels; m++)
    graph_free(models[m]);
  free(shape_used);
  free(const_used);
  ok = flushed() && ok;
  return ok ? EXIT_SUCCESS : EXIT_COMPILE;
}

static int compile(Config *c) {
  if (c->triton)
    return compile_triton(c);
  return serving(c) ? compile_serving(c) : compile_one(c);
}

/* ---------------------------------------------------- --list-operators */

static const char operators_legend[] =
    "Where it runs: *run time* — opc emits kernels (cuDNN, cuBLAS or its own),\n"
    "and the node is still folded when all its inputs are constant; *compile\n"
    "time* — every input must be known when opc runs (a constant, or an input\n"
    "bound with `--const-input`) and the node is folded away; *shapes* — it\n"
    "reads only its inputs' shapes and always folds; *run time, lowered* — the\n"
    "importer rewrites it into other operators of this list, which run there.\n"
    "\n"
    "Run-time types: the element types of the data the emitted code computes\n"
    "on. ONNX types: the specification's constraint for each input, in order,\n"
    "which opc checks and its compile-time evaluator follows (float: f16 f32\n"
    "f64 bf16; sint: i8 i16 i32 i64; uint: u8 u16 u32 u64; int: sint and uint;\n"
    "num: int and float; any: num and bool; index: i32 i64; \"like K\": the\n"
    "type of input K, counting from 0; seq: a sequence, opt: an optional, both\n"
    "lowered inside the model where their length, positions and presence are\n"
    "known at compile time, never a graph input or output).\n";

/* "f32 f64 ...", in net.h's order of the run-time types. */
static void print_type_set(uint32_t set) {
  static const DType order[] = {DT_FLOAT,  DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16, DT_INT64,
                                DT_INT32,  DT_INT16,  DT_INT8,    DT_UINT64,   DT_UINT32,
                                DT_UINT16, DT_UINT8,  DT_BOOL};
  const char *sep = "";
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
    if (set >> order[i] & 1) {
      printf("%s%s", sep, dtype_name(order[i]));
      sep = " ";
    }
}

/* ops.def's type words, with "=K" spelled out. */
static void print_type_words(const char *types) {
  char text[128];
  snprintf(text, sizeof text, "%s", types);
  const char *sep = "";
  for (char *w = strtok(text, " "); w; w = strtok(NULL, " ")) {
    if (w[0] == '=') {
      printf("%slike %s", sep, w + 1);
    } else { /* a set "i8|u8" as "i8 or u8": a bare '|' would split the Markdown cell */
      printf("%s", sep);
      for (const char *c = w; *c; c++)
        *c == '|' ? fputs(" or ", stdout) : putchar(*c);
    }
    sep = ", ";
  }
}

static int by_onnx_name(const void *a, const void *b) {
  return strcmp(op_info(*(const OpKind *)a)->name, op_info(*(const OpKind *)b)->name);
}

/* One Markdown table of every kind opc knows, from the operator table and
   the backend's run-time type table, so that the document cannot drift. */
static void print_operators(void) {
  OpKind kinds[OP_COUNT];
  int count = 0;
  for (int k = 1; k < OP_COUNT; k++)
    kinds[count++] = (OpKind)k;
  qsort(kinds, (size_t)count, sizeof kinds[0], by_onnx_name);
  static const char *const where[] = {
      [AT_RUN_TIME] = "run time", [AT_COMPILE_TIME] = "compile time", [FROM_SHAPES] = "shapes"};
  printf("%s\n| Operator | Where it runs | Run-time types | ONNX types |\n|---|---|---|---|\n",
         operators_legend);
  const ImportedOp *imported = imported_ops;
  for (int i = 0; i <= count; i++) {
    /* the importer's own operators in their places: compile time, as
       every input they read must be known then, or lowered to kinds that
       run at run time */
    for (; imported->name && (i == count || strcmp(imported->name, op_info(kinds[i])->name) <= 0);
         imported++) {
      /* an internal kind of its name runs it at run time (a Loop's) */
      OpKind own = op_from_name(imported->name);
      if (own != OP_INVALID && (op_info(own)->traits & T_INTERNAL)) {
        printf("| %s | %s | ", imported->name, where[op_info(own)->eval]);
        print_type_set(backend_run_time_types(own));
        printf(" | ");
      } else {
        printf("| %s | %s |  | ", imported->name,
               imported->lowered ? "run time, lowered" : where[AT_COMPILE_TIME]);
      }
      print_type_words(imported->types);
      printf(" |\n");
    }
    if (i == count)
      break;
    const OpInfo *info = op_info(kinds[i]);
    if (imported > imported_ops && strcmp(imported[-1].name, info->name) == 0)
      continue; /* printed as the importer's operator above */
    printf("| %s | %s | ", info->name, where[info->eval]);
    if (info->eval == AT_RUN_TIME)
      print_type_set(backend_run_time_types(kinds[i]));
    printf(" | ");
    if (info->traits & T_INTERNAL) /* no ONNX node reads as one */
      printf("none: opc's own, made by a pass");
    else
      print_type_words(info->types);
    printf(" |\n");
  }
}

/* --emit-main FILE.c */
static bool emit_main_file(const char *path, const char *prefix) {
  FILE *f = fopen(path, "w");
  if (!f) {
    opc_error("--emit-main: cannot write %s: %s", path, strerror(errno));
    return false;
  }
  bool ok = write_main_source(f, prefix);
  if (fclose(f) != 0 || !ok) {
    opc_error("--emit-main: cannot write %s", path);
    remove(path);
    return false;
  }
  return true;
}

int main(int argc, char **argv) {
  Config c = {0};
  int status;
  if (!parse_args(argc, argv, &c)) {
    fputs(usage_line, stderr);
    status = EXIT_USAGE;
  } else if (c.help) {
    fputs(help_text, stdout);
    status = EXIT_SUCCESS;
  } else if (c.version) {
    printf("opc %s\n", OPC_VERSION);
    status = EXIT_SUCCESS;
  } else if (c.list_operators) {
    print_operators();
    status = EXIT_SUCCESS;
  } else if (c.print_flags) {
    const char *flags = strcmp(c.print_flags, "--cflags") == 0 ? target_cflags(c.target)
                                                               : target_libs(c.target);
    if (flags)
      puts(flags);
    status = flags ? EXIT_SUCCESS : EXIT_COMPILE;
  } else if (c.main_source) {
    status = emit_main_file(c.main_source, c.emit.prefix) ? EXIT_SUCCESS : EXIT_COMPILE;
  } else {
    status = compile(&c);
  }
  free_config(&c);
  return status;
}
