/* check.h - the few helpers the IR's unit tests share. */
#ifndef OPC_IR_TESTS_CHECK_H
#define OPC_IR_TESTS_CHECK_H

#include <stdio.h>
#include <string.h>

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
