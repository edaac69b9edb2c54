/*
 * run_cases.c - pass tests as data, in the manner of QBE's test files and
 * LLVM's FileCheck. A case file (passes/tests/cases/NAME.ir) holds:
 *
 *   # what the case shows
 *   run fuse-bias                  passes of pipeline.c, run in order
 *                                  (-O0 first: the passes run as at -O0;
 *                                  --gpus=N, --placement=P, --devices=gpu,cpu,
 *                                  --partition=P, --precision=fp16|bf16,
 *                                  --io-precision=fp16, --layout=nchw|nhwc,
 *                                  --target=cpu as opc's options)
 *   ---                            the input IR (docs/ir-format.md)
 *   ...
 *   --- expect                     the IR after the passes, as dumped
 *   ...
 *
 * `--- expect same` says the passes must not change the IR (a must-not-fire
 * case); `--- expect error` says the last pass must fail, and each line
 * after it is text its messages must contain. Types may be left
 * out of the input: shapes are inferred before the passes run, as the
 * frontend does. The input may carry a schedule and a memory plan written
 * by hand (.issue, .stream, .event, .waits; arena and "at" offsets), for
 * plan-memory and verify-schedule. The expected text is parsed and dumped
 * again, so it only has to mean the same IR; the comparison is then exact.
 *
 * Usage: run_cases [--update] DIR|FILE...   A directory runs every .ir in
 * it and also checks that every pass of the pipeline has a case. --update
 * rewrites each expected section with what the passes produced (review the
 * diff before committing it).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../pass.h"

typedef struct Case {
  const char *path;
  char *text;                 /* the whole file */
  char *passes[8];
  int npasses;
  int opt_level;              /* 1 unless the run line says -O0 */
  int gpus;                   /* --gpus=N on the run line; 0: one GPU */
  const char *placement;      /* --placement=P on the run line */
  bool cpu;                   /* --devices=gpu,cpu on the run line (HOPE) */
  const char *partition;      /* --partition=P on the run line */
  DType half;                 /* --precision=fp16|bf16 on the run line */
  bool io_half;               /* --io-precision=fp16 on the run line */
  TensorLayout layout;        /* --layout=nchw|nhwc on the run line */
  bool cpu_target;            /* --target=cpu on the run line */
  char *input;                /* IR text */
  char *expect;               /* IR text, or NULL with same / error */
  char *error_lines;          /* with error: what the messages must contain */
  bool same, error;
  size_t expect_at;           /* offset of the newline before '--- expect' */
} Case;

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *s = malloc((size_t)n + 1);
  size_t got = fread(s, 1, (size_t)n, f);
  s[got] = '\0';
  fclose(f);
  return s;
}

/* Splits the file into its header, input and expect sections. */
static bool parse_case(Case *c) {
  char *input = strstr(c->text, "\n---\n");
  char *expect = input ? strstr(input + 1, "\n--- expect") : NULL;
  if (!input || !expect) {
    fprintf(stderr, "%s: needs a '---' input section and a '--- expect' section\n", c->path);
    return false;
  }
  *input = '\0';
  c->input = input + 5;
  c->expect_at = (size_t)(expect - c->text);
  *expect = '\0';
  char *rest = expect + strlen("\n--- expect");
  char *eol = strchr(rest, '\n');
  if (eol)
    *eol = '\0';
  c->same = strstr(rest, "same") != NULL;
  c->error = strstr(rest, "error") != NULL;
  c->expect = c->same || c->error ? NULL : (eol ? eol + 1 : "");
  c->error_lines = c->error && eol ? eol + 1 : "";
  for (char *line = strtok(c->text, "\n"); line; line = strtok(NULL, "\n")) {
    if (strncmp(line, "run ", 4) != 0)
      continue;
    for (char *w = strtok(line + 4, " "); w && c->npasses < 8; w = strtok(NULL, " ")) {
      if (strcmp(w, "-O0") == 0 || strcmp(w, "-O1") == 0)
        c->opt_level = w[2] - '0';
      else if (strncmp(w, "--gpus=", 7) == 0)
        c->gpus = atoi(w + 7);
      else if (strncmp(w, "--placement=", 12) == 0)
        c->placement = w + 12;
      else if (strcmp(w, "--devices=gpu,cpu") == 0)
        c->cpu = true;
      else if (strncmp(w, "--partition=", 12) == 0)
        c->partition = w + 12;
      else if (strcmp(w, "--precision=fp16") == 0 || strcmp(w, "--precision=bf16") == 0)
        c->half = w[12] == 'f' ? DT_FLOAT16 : DT_BFLOAT16;
      else if (strcmp(w, "--io-precision=fp16") == 0)
        c->io_half = true;
      else if (strcmp(w, "--layout=nchw") == 0 || strcmp(w, "--layout=nhwc") == 0)
        c->layout = w[10] == 'c' ? LAYOUT_NCHW : LAYOUT_NHWC;
      else if (strcmp(w, "--target=cpu") == 0)
        c->cpu_target = true;
      else
        c->passes[c->npasses++] = w;
    }
    break;
  }
  if (!c->npasses)
    fprintf(stderr, "%s: no 'run PASS...' line\n", c->path);
  return c->npasses > 0;
}

static const Pass *find_pass(const char *name) {
  int n;
  const Pass *p = pipeline_passes(&n);
  for (int i = 0; i < n; i++)
    if (strcmp(p[i].name, name) == 0)
      return &p[i];
  return NULL;
}

/* The dump without its header line: the path in it depends on where the
   case is run from. */
static char *dump(Graph *g) {
  char *s = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&s, &len);
  graph_dump(g, f);
  fclose(f);
  char *nl = strchr(s, '\n');
  if (strncmp(s, "graph ", 6) == 0 && nl)
    memmove(s, nl + 1, strlen(nl + 1) + 1);
  return s;
}

/* The IR of `text` as the dump prints it; NULL after a reported error. */
static Graph *load(const char *text, const char *path, bool infer) {
  Graph *g = graph_parse(text, path);
  if (g && infer && !(graph_toposort(g) && graph_infer_shapes(g))) {
    graph_free(g);
    return NULL;
  }
  return g;
}

static void show(const char *what, const char *text) {
  fprintf(stderr, "---- %s\n%s", what, text);
}

/* Replaces the expect section of the file with `actual`. */
static void update(const Case *c, const char *original, const char *actual) {
  FILE *f = fopen(c->path, "w");
  if (!f)
    return;
  fwrite(original, 1, c->expect_at, f);
  fprintf(f, "\n--- expect\n%s", actual);
  fclose(f);
}

/* Messages go to stderr; an error case checks them, so stderr is read
   back from a file while its passes run. */
typedef struct Capture {
  int saved;
  FILE *file;
} Capture;

static void capture_begin(Capture *k) {
  fflush(stderr);
  k->file = tmpfile();
  k->saved = dup(2);
  if (k->file)
    dup2(fileno(k->file), 2);
}

/* Restores stderr, shows what was captured there, and returns it. */
static char *capture_end(Capture *k) {
  fflush(stderr);
  dup2(k->saved, 2);
  close(k->saved);
  char *text = calloc(1, 1);
  if (!k->file)
    return text;
  long size = ftell(k->file);
  rewind(k->file);
  if (size > 0) {
    text = realloc(text, (size_t)size + 1);
    size_t got = fread(text, 1, (size_t)size, k->file);
    text[got] = '\0';
  }
  fclose(k->file);
  fputs(text, stderr);
  return text;
}

/* Every non-empty line of `wanted` appears in `messages`. */
static bool messages_contain(const char *path, const char *messages, const char *wanted) {
  char *copy = strdup(wanted);
  bool ok = true;
  for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n"))
    if (!strstr(messages, line)) {
      fprintf(stderr, "%s: no message contains '%s'\n", path, line);
      ok = false;
    }
  free(copy);
  return ok;
}

static bool run_case(const char *path, bool updating) {
  Case c = {.path = path, .opt_level = 1};
  char *original = read_file(path);
  if (!original) {
    fprintf(stderr, "%s: cannot read\n", path);
    return false;
  }
  c.text = strdup(original);
  bool ok = parse_case(&c);
  Graph *g = ok ? load(c.input, path, true) : NULL;
  ok = g != NULL;
  char *before = ok ? dump(g) : NULL;
  PassOptions opt = {.opt_level = c.opt_level, .verify_each = true, .gpus = c.gpus,
                     .placement = c.placement, .cpu = c.cpu, .partition = c.partition,
                     .half = c.half, .tf32 = c.half != 0, .io_half = c.io_half,
                     .layout = c.layout, .cpu_target = c.cpu_target};
  PassContext *ctx = ok ? pass_context_new(g, &opt) : NULL;
  bool failed = false;
  Capture capture;
  capture_begin(&capture);
  for (int i = 0; ok && i < c.npasses && !failed; i++) {
    const Pass *p = find_pass(c.passes[i]);
    if (!p) {
      fprintf(stderr, "%s: no pass named '%s' in the pipeline\n", path, c.passes[i]);
      ok = false;
      break;
    }
    failed = !p->run(g, &opt, ctx);
    if (p->rewrites)
      ctx->deps = NULL;
    if (!failed && !graph_verify(g)) {
      fprintf(stderr, "%s: IR verification failed after '%s'\n", path, p->name);
      ok = false;
    }
  }
  char *messages = capture_end(&capture);
  if (ok && failed != c.error) {
    fprintf(stderr, "%s: the passes %s\n", path, failed ? "failed" : "succeeded, expected an error");
    ok = false;
  }
  if (ok && c.error)
    ok = messages_contain(path, messages, c.error_lines);
  free(messages);
  if (ok && !c.error) {
    char *actual = dump(g);
    char *expected = NULL;
    if (c.same) {
      expected = strdup(before);
    } else {
      Graph *e = load(c.expect, path, false);
      expected = e ? dump(e) : strdup("(expected IR does not parse)\n");
      graph_free(e);
    }
    if (updating && !c.same && strcmp(actual, expected) != 0) {
      update(&c, original, actual);
      fprintf(stderr, "%s: updated\n", path);
    } else if (strcmp(actual, expected) != 0) {
      fprintf(stderr, "%s: the IR after '%s' differs\n", path, c.passes[c.npasses - 1]);
      show("expected", expected);
      show("actual", actual);
      ok = false;
    }
    free(actual);
    free(expected);
  }
  free(before);
  graph_free(g);
  free(c.text);
  free(original);
  return ok;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every pass of the pipeline has at least one case file that runs it last. */
static bool all_passes_covered(char **paths, int n) {
  int count;
  const Pass *p = pipeline_passes(&count);
  bool ok = true;
  for (int i = 0; i < count; i++) {
    bool found = false;
    for (int k = 0; k < n && !found; k++) {
      char *text = read_file(paths[k]);
      char *run = text ? strstr(text, "\nrun ") : NULL;
      if (run) {
        char *eol = strchr(run + 1, '\n');
        if (eol)
          *eol = '\0';
        char *last = strrchr(run, ' ');
        found = last && strcmp(last + 1, p[i].name) == 0;
      }
      free(text);
    }
    if (!found) {
      fprintf(stderr, "no case runs pass '%s' last\n", p[i].name);
      ok = false;
    }
  }
  return ok;
}

int main(int argc, char **argv) {
  bool updating = false;
  int failures = 0, cases = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--update") == 0) {
      updating = true;
      continue;
    }
    DIR *dir = opendir(argv[i]);
    if (!dir) {
      cases++;
      failures += !run_case(argv[i], updating);
      continue;
    }
    char **paths = NULL;
    int n = 0;
    for (struct dirent *e; (e = readdir(dir));) {
      size_t len = strlen(e->d_name);
      if (len < 4 || strcmp(e->d_name + len - 3, ".ir") != 0)
        continue;
      paths = realloc(paths, sizeof *paths * ((size_t)n + 1));
      paths[n] = malloc(strlen(argv[i]) + len + 2);
      sprintf(paths[n++], "%s/%s", argv[i], e->d_name);
    }
    closedir(dir);
    qsort(paths, (size_t)n, sizeof *paths, by_name);
    for (int k = 0; k < n; k++) {
      cases++;
      failures += !run_case(paths[k], updating);
    }
    failures += !all_passes_covered(paths, n);
    for (int k = 0; k < n; k++)
      free(paths[k]);
    free(paths);
  }
  printf("%d case(s), %d failure(s)\n", cases, failures);
  return failures ? 1 : 0;
}
