/*
 * test_emit.c - the emitter's printing helpers: identifiers made from
 * tensor names, C string escapes, float literals and line wrapping. The
 * expected strings are written by hand from the C rules they follow; and
 * emit_program() refusing a graph the pipeline has not scheduled.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../emit.h"

static int failures;

static void expect(const char *what, const char *got, const char *want) {
  if (strcmp(got, want) != 0) {
    fprintf(stderr, "FAIL %s: got \"%s\", want \"%s\"\n", what, got, want);
    failures++;
  }
}

static void test_names(Emitter *e) {
  expect("plain", emit_unique(e, "conv1_out"), "conv1_out");
  expect("separators", emit_unique(e, "mixed_5b/branch1x1:0"), "mixed_5b_branch1x1_0");
  expect("duplicate", emit_unique(e, "conv1_out"), "conv1_out_2");
  expect("same after sanitising", emit_unique(e, "conv1.out"), "conv1_out_3");
  expect("leading digit", emit_unique(e, "123"), "t123");
  expect("keyword", emit_unique(e, "int"), "int_2");
  expect("reserved field", emit_unique(e, "stream"), "stream_2");
  expect("only symbols", emit_unique(e, "::"), "t");
  expect("leading separator", emit_unique(e, "/x/"), "x");
}

static void test_strings(Emitter *e) {
  expect("quote", emit_c_string(e, "a\"b\\c"), "a\\\"b\\\\c");
  expect("newline", emit_c_string(e, "a\nb"), "a\\nb");
  expect("trigraph", emit_c_string(e, "?\?="), "\\077\\077=");
  expect("control", emit_c_string(e, "\x01"), "\\001");
}

static void test_floats(Emitter *e) {
  expect("integer", emit_float(e, 2.0f), "2.0f");
  expect("fraction", emit_float(e, 0.5f), "0.5f");
  expect("negative", emit_float(e, -0.25f), "-0.25f");
  expect("tenth", emit_float(e, 0.1f), "0.100000001f");
  expect("tiny", emit_float(e, 1e-30f), "1e-30f");
  expect("infinity", emit_float(e, -1.0f / 0.0f), "-INFINITY");
  expect("scalar one", emit_scalar(e, 1.0f), "&one");
  expect("scalar other", emit_scalar(e, -1.0f), "&(const float){-1.0f}");
}

/* A call longer than 100 columns breaks after a comma of its argument list,
   never inside the string literal, and continues 4 columns deeper. */
static void test_wrapping(Emitter *e) {
  char *text = NULL;
  size_t len = 0;
  e->f = open_memstream(&text, &len);
  e->indent = 1;
  emit(e, "if (!f(c, aaaaaaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, cccccccccccccccccccccc, \"x, y, z\", dddddddddd))");
  fclose(e->f);
  expect("wrapped", text,
         "  if (!f(c, aaaaaaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, cccccccccccccccccccccc, \"x, y, z\",\n"
         "      dddddddddd))\n");
  free(text);
}

/* The backend only prints: without the pipeline's schedule and memory
   plan it refuses the graph (an internal error) and writes nothing. */
static void test_requires_pipeline(void) {
  Graph *g = graph_new("test.onnx");
  char dir[] = "/tmp/opc-test-emit-XXXXXX";
  if (!mkdtemp(dir)) {
    failures++;
    graph_free(g);
    return;
  }
  char c[64], h[64], w[64];
  snprintf(c, sizeof c, "%s/net.c", dir);
  snprintf(h, sizeof h, "%s/net.h", dir);
  snprintf(w, sizeof w, "%s/net.weights", dir);
  EmitOptions opt = {.c_path = c, .h_path = h, .weights_path = w};
  if (emit_program(g, &opt) || access(c, F_OK) == 0) {
    fprintf(stderr, "FAIL emit_program without a schedule succeeded\n");
    failures++;
  }
  rmdir(dir);
  graph_free(g);
}

int main(void) {
  Graph *g = graph_new("test.onnx");
  EmitState st = {0};
  Emitter e = {.g = g, .st = &st, .prefix = "net"};
  emit_reserve_names(&e);
  test_names(&e);
  test_strings(&e);
  test_floats(&e);
  test_wrapping(&e);
  graph_free(g);
  test_requires_pipeline();
  if (failures)
    fprintf(stderr, "%d failed\n", failures);
  return failures != 0;
}
