/* check.h - the few helpers the IR's unit tests share. */
#ifndef OPC_IR_TESTS_CHECK_H
#define OPC_IR_TESTS_CHECK_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../ir.h"

static int failures;

/* Records a failed expectation with its place; the test goes on so that
   one run shows every failure. */
#define CHECK(cond) check((cond), #cond, __FILE__, __LINE__)

static inline void check(bool ok, const char *what, const char *file, int line) {
  if (!ok) {
    fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
    failures++;
  }
}

/* Parses a graph written in the text format; NULL (with a message) when
   the text itself is wrong. */
static inline Graph *parse(const char *text) {
  Graph *g = graph_parse(text, "test");
  if (!g)
    fprintf(stderr, "test graph does not parse:\n%s\n", text);
  return g;
}

/* Whether tensor `name` has the type written as in the text format. */
static inline bool has_type(Graph *g, const char *name, const char *want) {
  Tensor *t = graph_find_tensor(g, name);
  if (!t) {
    fprintf(stderr, "  no tensor '%s'\n", name);
    return false;
  }
  char buf[256];
  tensor_type_str(t, buf, sizeof buf);
  if (strcmp(buf, want) != 0) {
    fprintf(stderr, "  '%s' is %s, expected %s\n", name, buf, want);
    return false;
  }
  return true;
}

/* Whether tensor `name` is an integer constant with exactly these values. */
static inline bool has_ints(Graph *g, const char *name, const int64_t *want, int n) {
  Tensor *t = graph_find_tensor(g, name);
  if (!t || !t->i64 || tensor_numel(t) != n) {
    fprintf(stderr, "  '%s' is not an integer constant of %d values\n", name, n);
    return false;
  }
  for (int i = 0; i < n; i++)
    if (t->i64[i] != want[i]) {
      fprintf(stderr, "  '%s'[%d] is %lld, expected %lld\n", name, i, (long long)t->i64[i],
              (long long)want[i]);
      return false;
    }
  return true;
}

/* Whether tensor `name` is a float constant with these values, to within tol. */
static inline bool has_floats(Graph *g, const char *name, const float *want, int n, float tol) {
  Tensor *t = graph_find_tensor(g, name);
  if (!t || !t->f32 || tensor_numel(t) != n) {
    fprintf(stderr, "  '%s' is not a float constant of %d values\n", name, n);
    return false;
  }
  for (int i = 0; i < n; i++) {
    float d = t->f32[i] - want[i];
    if (!(d <= tol && d >= -tol)) {
      fprintf(stderr, "  '%s'[%d] is %g, expected %g\n", name, i, (double)t->f32[i],
              (double)want[i]);
      return false;
    }
  }
  return true;
}

/* Whether tensor `name` is a constant whose type and values print as
   `want`, e.g. "bool[2,2] = [1,0,0,1]" (floats with %g). */
static inline bool has_values(Graph *g, const char *name, const char *want) {
  Tensor *t = graph_find_tensor(g, name);
  if (!t || !tensor_is_const(t)) {
    fprintf(stderr, "  '%s' is not a constant\n", name);
    return false;
  }
  char buf[1024];
  tensor_type_str(t, buf, sizeof buf);
  size_t len = strlen(buf);
  len += (size_t)snprintf(buf + len, sizeof buf - len, " = [");
  for (int64_t i = 0; i < tensor_numel(t) && len < sizeof buf; i++) {
    const char *sep = i ? "," : "";
    if (t->f32)
      len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%g", sep, (double)t->f32[i]);
    else
      len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%lld", sep, (long long)t->i64[i]);
  }
  if (len < sizeof buf)
    snprintf(buf + len, sizeof buf - len, "]");
  if (strcmp(buf, want) != 0) {
    fprintf(stderr, "  '%s' is %s\n  expected %s\n", name, buf, want);
    return false;
  }
  return true;
}

/* Infers the graph in `text` and returns what it printed on stderr (the
   error messages), "" when inference succeeds. */
static inline const char *infer_errors(const char *text) {
  static char out[4096];
  out[0] = '\0';
  Graph *g = parse(text);
  if (!g)
    return "(does not parse)";
  fflush(stderr);
  FILE *tmp = tmpfile();
  int saved = dup(2);
  dup2(fileno(tmp), 2);
  bool ok = graph_infer_shapes(g);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  size_t n = fread(out, 1, sizeof out - 1, tmp);
  out[n] = '\0';
  fclose(tmp);
  graph_free(g);
  if (ok && n == 0)
    return "";
  fputs(out, stderr); /* the message stays visible in the test log */
  return out;
}

/* Whether inference of `text` fails with a message containing `want`. */
static inline bool fails_with(const char *text, const char *want) {
  const char *got = infer_errors(text);
  if (!strstr(got, want)) {
    fprintf(stderr, "  expected an error containing: %s\n", want);
    return false;
  }
  return true;
}

/* Whether the step reported exactly one more error than before. */
static inline bool one_error(int before) { return ir_error_count() == before + 1; }

static inline int finish(const char *name) {
  if (failures)
    fprintf(stderr, "%s: %d failure(s)\n", name, failures);
  else
    printf("%s: ok\n", name);
  return failures ? 1 : 0;
}

#endif
