/*
 * test_import.c - checks onnx_import against the models and expectations
 * written by make_models.py (see its header for the line format).
 *
 * Usage: test_import DIR   (DIR holds the models and expected.txt)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../frontend.h"

static int failures;
static int lineno;

static void fail(const char *fmt, const char *a, const char *b) {
  fprintf(stdout, "FAIL expected.txt:%d: ", lineno);
  fprintf(stdout, fmt, a, b);
  fputc('\n', stdout);
  failures++;
}

/* ------------------------------------------------------------ tokens */

typedef struct Tokens {
  char *words[512];
  int n, pos;
} Tokens;

static void split(char *line, Tokens *tk) {
  tk->n = tk->pos = 0;
  for (char *w = strtok(line, " \n"); w && tk->n < 512; w = strtok(NULL, " \n"))
    tk->words[tk->n++] = w;
}

static const char *next(Tokens *tk) { return tk->pos < tk->n ? tk->words[tk->pos++] : ""; }
static long long next_int(Tokens *tk) { return strtoll(next(tk), NULL, 10); }
static float next_float(Tokens *tk) { return strtof(next(tk), NULL); }

/* ------------------------------------------------------------ options */

typedef struct Options {
  ImportOptions opt;
  InputShape shapes[8];
  char names[8][64];
  ConstInput consts[16];
  char const_names[16][64];
  char const_paths[16][128];
} Options;

/* "-" or "batch=2;shape=x:5x3x4;const=s:s.npy" */
static bool parse_options(const char *text, Options *o) {
  memset(o, 0, sizeof *o);
  o->opt.shapes = o->shapes;
  o->opt.consts = o->consts;
  if (strcmp(text, "-") == 0)
    return true;
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", text);
  for (char *item = strtok(buf, ";"); item; item = strtok(NULL, ";")) {
    if (strncmp(item, "batch=", 6) == 0) {
      o->opt.batch = atoll(item + 6);
    } else if (strncmp(item, "shape=", 6) == 0) {
      char *colon = strchr(item, ':');
      int k = o->opt.nshapes++;
      if (!colon || k >= 8)
        return false;
      *colon = '\0';
      snprintf(o->names[k], sizeof o->names[k], "%s", item + 6);
      o->shapes[k].name = o->names[k];
      if (!parse_shape(colon + 1, &o->shapes[k]))
        return false;
    } else if (strncmp(item, "const=", 6) == 0) {
      char *colon = strchr(item, ':');
      int k = o->opt.nconsts++;
      if (!colon || k >= 16)
        return false;
      *colon = '\0';
      snprintf(o->const_names[k], sizeof o->const_names[k], "%s", item + 6);
      snprintf(o->const_paths[k], sizeof o->const_paths[k], "%s", colon + 1);
      o->consts[k].name = o->const_names[k];
      o->consts[k].path = o->const_paths[k];
    } else {
      return false;
    }
  }
  return true;
}

/* Imports with stderr captured into `err` (NUL-terminated, truncated to size). */
static Graph *import_capturing(const char *model, const ImportOptions *opt, char *err,
                               size_t size) {
  fflush(stderr);
  int saved = dup(2);
  FILE *tmp = tmpfile();
  dup2(fileno(tmp), 2);
  Graph *g = onnx_import(model, opt);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  size_t len = fread(err, 1, size - 1, tmp);
  err[len] = '\0';
  fclose(tmp);
  return g;
}

/* ------------------------------------------------------------ checks */

static bool same_float(float a, float b) {
  return a == b || (isnan(a) && isnan(b));
}

/* Compares dtype, shape and data with a SPEC from the token stream. */
static bool check_tensor(const Tensor *t, Tokens *tk, const char *what) {
  DType dt = dtype_from_name(next(tk));
  if (t->dtype != dt) {
    fail("%s: dtype %s differs", what, dtype_name(t->dtype));
    return false;
  }
  int rank = (int)next_int(tk);
  bool ok = t->rank == rank;
  for (int i = 0; i < rank; i++)
    ok &= i < t->rank && t->dims[i] == next_int(tk);
  if (!ok) {
    fail("%s: shape differs%s", what, "");
    return false;
  }
  long long count = next_int(tk);
  if (count != tensor_numel(t)) {
    fail("%s: element count differs%s", what, "");
    return false;
  }
  bool floating = dtype_is_float(dt);
  if (floating ? !t->f32 || t->i64 : !t->i64 || t->f32) {
    fail("%s: constant data is not in the canonical %s field", what, floating ? "f32" : "i64");
    return false;
  }
  for (long long i = 0; i < count; i++) {
    const char *word = next(tk);
    bool same = floating ? same_float(t->f32[i], strtof(word, NULL))
                         : t->i64[i] == strtoll(word, NULL, 10);
    if (!same) {
      fail("%s: value differs from %s", what, word);
      return false;
    }
  }
  return true;
}

static void check_const(Graph *g, Tokens *tk) {
  const char *name = next(tk);
  Tensor *t = graph_find_tensor(g, name);
  if (!t || t->producer || t->is_input) {
    fail("constant '%s' is missing or not a constant%s", name, "");
    return;
  }
  check_tensor(t, tk, name);
}

static void check_input(Graph *g, Tokens *tk) {
  const char *name = next(tk);
  Tensor *t = graph_find_tensor(g, name);
  if (!t || !t->is_input) {
    fail("'%s' is not a graph input%s", name, "");
    return;
  }
  int rank = (int)next_int(tk);
  bool ok = t->rank == rank && t->dtype == DT_FLOAT;
  for (int i = 0; i < rank; i++)
    ok &= i < t->rank && t->dims[i] == next_int(tk);
  if (!ok) {
    char buf[128];
    fail("input '%s' has type %s", name, tensor_type_str(t, buf, sizeof buf));
  }
}

static Node *find_node(Graph *g, const char *name) {
  for (int i = 0; i < g->nnodes; i++)
    if (strcmp(g->nodes[i]->name, name) == 0)
      return g->nodes[i];
  return NULL;
}

static void check_node(Graph *g, Tokens *tk) {
  const char *name = next(tk);
  Node *n = find_node(g, name);
  if (!n) {
    fail("no node named '%s'%s", name, "");
    return;
  }
  if (strcmp(op_name(n->op), next(tk)) != 0)
    fail("node '%s' has op %s", name, op_name(n->op));
  int nin = (int)next_int(tk);
  if (n->nin != nin)
    fail("node '%s': input count differs%s", name, "");
  for (int i = 0; i < nin; i++) {
    const char *want = next(tk);
    Tensor *in = node_input(n, i);
    const char *got = in ? in->name : "_";
    if (strcmp(got, want) != 0)
      fail("node '%s': input is '%s'", name, got);
  }
  int nout = (int)next_int(tk);
  if (n->nout != nout)
    fail("node '%s': output count differs%s", name, "");
  for (int i = 0; i < nout && i < n->nout; i++) {
    const char *want = next(tk);
    if (!n->out[i] || strcmp(n->out[i]->name, want) != 0)
      fail("node '%s': output differs from '%s'", name, want);
  }
}

static void check_attr(Graph *g, Tokens *tk) {
  const char *node = next(tk);
  const char *name = next(tk);
  const char *kind = next(tk);
  Node *n = find_node(g, node);
  const Attr *a = n ? node_attr(n, name) : NULL;
  if (!a) {
    fail("node '%s' has no attribute '%s'", node, name);
    return;
  }
  bool ok = true;
  if (strcmp(kind, "float") == 0) {
    ok = a->kind == ATTR_FLOAT && a->f == next_float(tk);
  } else if (strcmp(kind, "int") == 0) {
    ok = a->kind == ATTR_INT && a->i == next_int(tk);
  } else if (strcmp(kind, "string") == 0) {
    ok = a->kind == ATTR_STRING && strcmp(a->s, next(tk)) == 0;
  } else if (strcmp(kind, "floats") == 0) {
    ok = a->kind == ATTR_FLOATS && a->n == next_int(tk);
    for (int i = 0; ok && i < a->n; i++)
      ok = a->floats[i] == next_float(tk);
  } else if (strcmp(kind, "ints") == 0) {
    ok = a->kind == ATTR_INTS && a->n == next_int(tk);
    for (int i = 0; ok && i < a->n; i++)
      ok = a->ints[i] == next_int(tk);
  } else if (strcmp(kind, "strings") == 0) {
    ok = a->kind == ATTR_STRINGS && a->n == next_int(tk);
    for (int i = 0; ok && i < a->n; i++)
      ok = strcmp(a->strings[i], next(tk)) == 0;
  } else if (strcmp(kind, "tensor") == 0) {
    ok = a->kind == ATTR_TENSOR && a->t && check_tensor(a->t, tk, name);
  } else if (strcmp(kind, "tensors") == 0) {
    ok = a->kind == ATTR_TENSORS && a->n == next_int(tk);
    for (int i = 0; ok && i < a->n; i++)
      ok = check_tensor(a->tensors[i], tk, name);
  } else {
    fail("unknown attribute kind '%s'%s", kind, "");
    return;
  }
  if (!ok)
    fail("attribute '%s' of node '%s' differs", name, node);
}

/* Everything after the options is the text stderr must contain. */
static void check_error(const char *model, const Options *o, const char *line_rest) {
  char err[8192];
  Graph *g = import_capturing(model, &o->opt, err, sizeof err);
  if (g) {
    fail("%s imported, but should fail with: %s", model, line_rest);
    graph_free(g);
    return;
  }
  if (strncmp(err, "opc: error: ", 12) != 0)
    fail("%s: stderr does not start with 'opc: error: ': %s", model, err);
  if (!strstr(err, line_rest))
    fail("stderr lacks '%s'; it was: %s", line_rest, err);
}

static void run_line(char *line) {
  char copy[4096];
  snprintf(copy, sizeof copy, "%s", line);
  Tokens tk;
  split(line, &tk);
  if (tk.n == 0)
    return;
  const char *what = next(&tk);
  const char *model = next(&tk);
  Options o;
  if (!parse_options(next(&tk), &o)) {
    fail("bad options on line: %s%s", copy, "");
    return;
  }
  if (strcmp(what, "error") == 0) {
    /* The message is the rest of the original line, spaces and all. */
    char *rest = copy;
    for (int i = 0; i < 3; i++)
      rest = strchr(rest, ' ') + 1;
    rest[strcspn(rest, "\n")] = '\0';
    check_error(model, &o, rest);
    return;
  }
  char err[8192];
  Graph *g = import_capturing(model, &o.opt, err, sizeof err);
  if (!g) {
    fail("%s failed to import: %s", model, err);
    return;
  }
  if (strcmp(what, "const") == 0)
    check_const(g, &tk);
  else if (strcmp(what, "input") == 0)
    check_input(g, &tk);
  else if (strcmp(what, "node") == 0)
    check_node(g, &tk);
  else if (strcmp(what, "attr") == 0)
    check_attr(g, &tk);
  else if (strcmp(what, "ok") != 0)
    fail("unknown check '%s'%s", what, "");
  graph_free(g);
}

/* parse_shape on its own: both separators, and what it must refuse. */
static void check_parse_shape(void) {
  InputShape s;
  if (!parse_shape("1x3x224x224", &s) || s.rank != 4 || s.dims[0] != 1 || s.dims[3] != 224)
    fail("parse_shape(%s) is wrong%s", "1x3x224x224", "");
  if (!parse_shape("2,5", &s) || s.rank != 2 || s.dims[0] != 2 || s.dims[1] != 5)
    fail("parse_shape(%s) is wrong%s", "2,5", "");
  if (!parse_shape("7", &s) || s.rank != 1 || s.dims[0] != 7)
    fail("parse_shape(%s) is wrong%s", "7", "");
  const char *bad[] = {"", "x", "1x", "x1", "1xx2", "1x-2", "0x3", "1x3y", "1 x 2", "a",
                       "1x2x3x4x5x6x7x8x9", "99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (parse_shape(bad[i], &s))
      fail("parse_shape accepted '%s'%s", bad[i], "");
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_import DIR\n");
    return 2;
  }
  /* Models are opened by relative name so that messages name them briefly. */
  if (chdir(argv[1]) != 0) {
    perror(argv[1]);
    return 2;
  }
  FILE *f = fopen("expected.txt", "r");
  if (!f) {
    perror("expected.txt");
    return 2;
  }
  check_parse_shape();
  char line[4096];
  int checks = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    run_line(line);
    checks++;
  }
  fclose(f);
  printf("test_import: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : checks > 0 ? 0 : 1;
}
