/*
 * The command line of the compiled model:
 *   ./net [--weights FILE] [--input NAME=FILE]... [--output NAME=FILE]...
 *         [--seed S] [--bench N [--warmup W]] [--trace FILE.json]
 *         [--profile FILE.json [--repeats R]] [--verbose]
 * Inputs are read from .npy (C order, little-endian) or ONNX TensorProto .pb
 * files of the input's type and shape (net.h lists them); floating inputs
 * not given are filled with random numbers in [-1, 1) drawn from --seed
 * (default 1), integer and bool ones with zeros, an index always in range.
 * --output writes an output as .npy of its type. --bench
 * times N runs after W warm-up runs; --trace writes the time of every
 * node of one run as a Chrome trace; --profile times every node alone and
 * every stage, each in a CUDA graph of R repeats, for `opc --cost-db`.
 * --verbose prints each node's stream and the form of calls create() chose
 * for it (a fused convolution that cuDNN refused runs as separate calls).
 * Without --weights the weights file is looked for beside the program.
 * Exit status: 0 done, 1 bad arguments or input files, 2 error at run time.
 */

/*
 * What main calls: the model's API (net.h declares it too, and where both
 * are seen the compiler checks that they agree) and main's helpers beside
 * the model. main is the same for every model, so opc compiles it apart
 * once and links it with the model's file (OPC_MAIN_APART, opc --emit-main).
 */
struct net_ctx;
int net_create(struct net_ctx **ctx, const char *weights_path);
int net_run(struct net_ctx *ctx, const void *const *inputs, void *const *outputs);
void net_destroy(struct net_ctx *ctx);
const char *net_error(const struct net_ctx *ctx);
int net_profile(struct net_ctx *ctx, const char *path, int repeats);
int net_num_inputs(void);
const char *net_input_name(int i);
const char *net_input_type(int i);
int net_input_element_size(int i);
int net_input_rank(int i);
const long long *net_input_dims(int i);
int net_num_outputs(void);
const char *net_output_name(int i);
const char *net_output_type(int i);
int net_output_element_size(int i);
int net_output_rank(int i);
const long long *net_output_dims(int i);
int net_output_shape(const struct net_ctx *ctx, int i, long long *dims);
extern const char net_main_weights_file[];
int net_main_bench(struct net_ctx *c, const void *const *inputs, void *const *outputs, int runs,
                   int warmup);
int net_main_trace(struct net_ctx *c, const char *path);
void net_main_describe(const struct net_ctx *c);

#include "main_inputs.c"
#include "main_common.c"

static int usage(void)
{
  fprintf(stderr, "usage: net [--weights FILE] [--input NAME=FILE]... [--output NAME=FILE]...\n"
                  "           [--seed S] [--bench N [--warmup W]] [--trace FILE.json]\n"
                  "           [--profile FILE.json [--repeats R]] [--verbose]\n");
  return 1;
}

/* Index of the input or output called `name` (the part of NAME=FILE before '='). */
static int find_io(const char *arg, int output, const char **file)
{
  const char *eq = strchr(arg, '=');
  if (!eq)
    return -1;
  *file = eq + 1;
  int count = output ? net_num_outputs() : net_num_inputs();
  for (int i = 0; i < count; i++) {
    const char *name = output ? net_output_name(i) : net_input_name(i);
    if (strlen(name) == (size_t)(eq - arg) && strncmp(name, arg, (size_t)(eq - arg)) == 0)
      return i;
  }
  return -1;
}

/* The weights file beside the program, if there is one. */
static char *weights_beside(const char *argv0)
{
  if (!net_main_weights_file[0])
    return NULL;
  const char *slash = strrchr(argv0, '/');
  size_t dir = slash ? (size_t)(slash - argv0 + 1) : 0;
  char *path = malloc(dir + strlen(net_main_weights_file) + 1);
  if (!path)
    return NULL;
  memcpy(path, argv0, dir);
  strcpy(path + dir, net_main_weights_file);
  FILE *f = fopen(path, "rb");
  if (!f) {
    free(path);
    return NULL;
  }
  fclose(f);
  return path;
}

static int out_of_memory(void)
{
  fprintf(stderr, "net: out of memory\n");
  return 1;
}

int main(int argc, char **argv)
{
  int nin = net_num_inputs(), nout = net_num_outputs();
  const char *weights = NULL, *trace = NULL, *profile = NULL;
  unsigned long long seed = 1;
  int runs = 0, warmup = 0, repeats = 0, verbose = 0, status = 2;
  /* Per input, then per output: its file, data, element type and, for an
     output, its dims in the run. One block, as many as the model has. */
  size_t nio = (size_t)nin + (size_t)nout + 1;
  const char **input_file = calloc(nio, sizeof *input_file), **output_file = NULL;
  void **in = calloc(nio, sizeof *in), **out = NULL;
  int *in_type = calloc(nio, sizeof *in_type), *out_type = NULL;
  int *out_rank = calloc(nio, sizeof *out_rank);
  long long (*out_dims)[8] = calloc(nio, sizeof *out_dims);
  char *beside = NULL;
  struct net_ctx *c = NULL;
  if (!input_file || !in || !in_type || !out_rank || !out_dims) {
    status = out_of_memory();
    goto done;
  }
  output_file = input_file + nin;
  out = in + nin;
  out_type = in_type + nin;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL, *file = NULL;
    char *end = NULL;
    int k;
    if (strcmp(arg, "--verbose") == 0) {
      verbose = 1;
      continue;
    }
    if (!value) {
      status = usage();
      goto done;
    }
    i++;
    if (strcmp(arg, "--weights") == 0) {
      weights = value;
    } else if (strcmp(arg, "--trace") == 0) {
      trace = value;
    } else if (strcmp(arg, "--profile") == 0) {
      profile = value;
    } else if (strcmp(arg, "--input") == 0 || strcmp(arg, "--output") == 0) {
      int output = arg[2] == 'o';
      if ((k = find_io(value, output, &file)) < 0) {
        fprintf(stderr, "net: %s %s: no %s of that name\n", arg, value, output ? "output" : "input");
        status = 1;
        goto done;
      }
      if (output)
        output_file[k] = file;
      else
        input_file[k] = file;
    } else if (strcmp(arg, "--seed") == 0) {
      seed = strtoull(value, &end, 0);
      if (*end) {
        status = usage();
        goto done;
      }
    } else if (strcmp(arg, "--bench") == 0 || strcmp(arg, "--warmup") == 0 ||
               strcmp(arg, "--repeats") == 0) {
      long v = strtol(value, &end, 10);
      if (*end || v < 0 || v > 1000000) {
        status = usage();
        goto done;
      }
      if (arg[2] == 'b')
        runs = (int)v;
      else if (arg[2] == 'w')
        warmup = (int)v;
      else
        repeats = (int)v;
    } else {
      status = usage();
      goto done;
    }
  }

  uint64_t state = seed;
  for (int i = 0; i < nin; i++)
    if ((in_type[i] = element_type(net_input_type(i))) < 0) {
      fprintf(stderr, "net: input '%s' has type %s, which this main cannot read\n",
              net_input_name(i), net_input_type(i));
      status = 1;
      goto done;
    }
  for (int i = 0; i < nout; i++)
    if ((out_type[i] = element_type(net_output_type(i))) < 0) {
      fprintf(stderr, "net: output '%s' has type %s, which this main cannot write\n",
              net_output_name(i), net_output_type(i));
      status = 1;
      goto done;
    }
  for (int i = 0; i < nin; i++) {
    long long n = numel_of(net_input_rank(i), net_input_dims(i));
    if (!(in[i] = malloc((size_t)n * (size_t)net_input_element_size(i) + 1))) {
      status = out_of_memory();
      goto done;
    }
    Expected x = {net_input_name(i), input_file[i], in_type[i], net_input_rank(i),
                  net_input_dims(i)};
    if (input_file[i]) {
      if (read_input(&x, in[i]) != 0) {
        status = 1;
        goto done;
      }
    } else {
      fill_input(in_type[i], in[i], n, &state);
    }
  }
  for (int i = 0; i < nout; i++) {
    long long n = numel_of(net_output_rank(i), net_output_dims(i));
    size_t bytes = (size_t)n * (size_t)net_output_element_size(i);
    if (!(out[i] = malloc(bytes + 1))) {
      status = out_of_memory();
      goto done;
    }
  }

  beside = weights ? NULL : weights_beside(argv[0]);
  if (net_create(&c, weights ? weights : beside) != 0)
    goto done;
  if (verbose)
    net_main_describe(c);
  if (net_run(c, (const void *const *)in, out) != 0)
    goto done;
  /* An output's dims in this run: its declared ones are bounds where the
     data decides its size (NonZero). */
  for (int i = 0; i < nout; i++)
    out_rank[i] = net_output_shape(c, i, out_dims[i]);
  if (runs > 0 && net_main_bench(c, (const void *const *)in, out, runs, warmup) != 0)
    goto done;
  if (trace && net_main_trace(c, trace) != 0)
    goto done;
  if (profile && net_profile(c, profile, repeats) != 0)
    goto done;
  status = 0;
  for (int i = 0; i < nout; i++) {
    if (output_file[i]) {
      if (write_npy(output_file[i], out_type[i], out_rank[i], out_dims[i], out[i]) != 0)
        status = 1;
    } else if (runs == 0) {
      long long n = numel_of(out_rank[i], out_dims[i]);
      double sum = 0;
      for (long long j = 0; j < n; j++)
        sum += element_value(out_type[i], out[i], j);
      printf("%s: %s", net_output_name(i), element_types[out_type[i]].short_name);
      print_shape(stdout, out_rank[i], out_dims[i]);
      double first = n ? element_value(out_type[i], out[i], 0) : 0.0;
      printf(" mean=%.6g first=%.6g\n", n ? sum / n : 0.0, first);
    }
  }
done:
  if (status == 2)
    fprintf(stderr, "net: error: %s\n", net_error(c));
  net_destroy(c);
  free(beside);
  for (int i = 0; in && i < nin + nout; i++)
    free(in[i]);
  free(in);
  free(input_file);
  free(in_type);
  free(out_rank);
  free(out_dims);
  return status;
}
