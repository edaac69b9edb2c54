/*
 * test_text.c - the text form: a hand-written graph in the documented
 * format dumps back character for character, dump -> parse -> dump is the
 * identity, and malformed text is reported with its file and line.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* open_memstream, dup2 */
#endif
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static char *dump_to_string(Graph *g) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  graph_dump(g, f);
  fclose(f);
  return buf;
}

/* Written by hand from docs/ir-format.md: every construct of the format. */
static const char canonical[] =
    "graph \"main\" opset 13 path \"model.onnx\"\n"
    "input %x: f32[1,3,8,8]\n"
    "input %\"odd name\\t\\\"1\\\"\": f32[2]\n"
    "const %w: f32[4,3,3,3] = <108 values>\n"
    "const %shape: i64[2] = [1,-1]\n"
    "const %half: f32[2] = [0.5,-1.0]\n"
    "const %scalar: f32[] = [1e-05]\n"
    "%y: f32[1,4,8,8] = Conv(%x, %w, _) {kernel_shape=[3,3], strides=[1,1], pads=[1,1,1,1], "
    "group=1} name=\"conv1\" .act=relu .stage=1 .stream=1\n"
    "%a: f32[1,2,8,8] @%y+0, %b: f32[1,2,8,8] @%y+128 = Split(%y) {axis=1} name=\"split\" .view\n"
    "%t: f32[1,2,4,8] @%y+0:[256,64,8,1] = Identity(%a) name=\"t\" .view\n"
    "%r: f32[1,256] = Reshape(%b, %shape) name=\"r\" .act=leaky_relu .alpha=0.01 .beta=6.0 "
    ".fused=[\"bn1\",\"relu1\"] .group=2 .event=3 .waits=[1,2] .cost=12.5\n"
    "%q: f32[2], _ = Dropout(%\"odd name\\t\\\"1\\\"\") {f=1e-05, big=100.0, s=\"SAME_UPPER\", "
    "fs=[1.0,2.5], ss=[\"a\",\"b\\\\c\"], t=tensor(f32[2]=[1.0,2.0]), e=[], n=-3} "
    "name=\"n\\\"q\"\n"
    "%k: i64[3] = Constant() {value=tensor(i64[3]=[4,5,6])} name=\"k\"\n"
    "%hs: f32[2] = Add(%half, %scalar) name=\"hs\"\n"
    "%nz: i64[1,<=2] = NonZero(%hs) name=\"nz\"\n"
    "output %r\n"
    "output %q\n"
    "output %hs\n"
    "output %nz\n";

static void test_canonical(void) {
  Graph *g = parse(canonical);
  CHECK(g != NULL);
  if (!g)
    return;
  char *once = dump_to_string(g);
  CHECK(strcmp(once, canonical) == 0);
  if (strcmp(once, canonical) != 0)
    fprintf(stderr, "--- dumped:\n%s--- expected:\n%s", once, canonical);
  Graph *g2 = parse(once);
  CHECK(g2 != NULL);
  if (g2) {
    char *twice = dump_to_string(g2);
    CHECK(strcmp(once, twice) == 0);
    free(twice);
  }
  /* the parsed structure, field by field */
  Tensor *a = graph_find_tensor(g, "a"), *b = graph_find_tensor(g, "b");
  Tensor *t = graph_find_tensor(g, "t"), *y = graph_find_tensor(g, "y");
  CHECK(a && a->alias_of == y && a->alias_offset == 0 && b->alias_offset == 128);
  CHECK(t && t->strides[0] == 256 && t->strides[1] == 64 && t->strides[3] == 1);
  CHECK(b->strides[1] == 64); /* a contiguous view gets contiguous strides */
  Tensor *nz = graph_find_tensor(g, "nz");
  /* "<=": the bound of the run-time dim */
  CHECK(nz && nz->bounded && nz->bound_axis == 1 && nz->dims[1] == 2 && !y->bounded);
  Tensor *odd = graph_find_tensor(g, "odd name\t\"1\"");
  CHECK(odd && odd->is_input && odd->rank == 1 && odd->dims[0] == 2);
  Tensor *sc = graph_find_tensor(g, "scalar");
  CHECK(sc && sc->rank == 0 && sc->f32 && sc->f32[0] == 1e-5f);
  Node *conv = g->nodes[0], *r = g->nodes[3], *q = g->nodes[4];
  NodeSchedule *conv_at = node_sched(g, conv), *r_at = node_sched(g, r);
  CHECK(conv->op == OP_CONV && conv->nin == 3 && conv->in[2] == NULL && conv->act == OPC_ACT_RELU);
  CHECK(conv_at->stage == 1 && conv_at->stream == 1 && conv_at->record_event == -1);
  CHECK(g->nodes[1]->is_view && g->nodes[1]->nout == 2);
  CHECK(r->act == OPC_ACT_LEAKY_RELU && r->act_alpha == 0.01f && r->act_beta == 6.0f);
  CHECK(r->nfused == 2 && strcmp(r->fused[1], "relu1") == 0 && r_at->group == 2);
  CHECK(r_at->record_event == 3 && r_at->nwaits == 2 && r_at->waits[1] == 2);
  CHECK(r_at->cost_us == 12.5);
  CHECK(q->nout == 2 && q->out[1] == NULL && strcmp(q->name, "n\"q") == 0);
  CHECK(node_attr_float(q, "f", 0) == 1e-5f && node_attr_int(q, "n", 0) == -3);
  CHECK(strcmp(node_attr_string(q, "s", ""), "SAME_UPPER") == 0);
  const Attr *ss = node_attr(q, "ss"), *tt = node_attr(q, "t"), *e = node_attr(q, "e");
  CHECK(ss && ss->kind == ATTR_STRINGS && ss->n == 2 && strcmp(ss->strings[1], "b\\c") == 0);
  CHECK(tt && tt->kind == ATTR_TENSOR && tt->t->f32 && tt->t->f32[1] == 2.0f);
  CHECK(e && e->kind == ATTR_INTS && e->n == 0);
  CHECK(g->opset == 13 && strcmp(g->path, "model.onnx") == 0 && g->noutputs == 4);
  /* uses are built */
  CHECK(y->nusers == 1 && y->producer == conv);
  free(once);
  graph_free(g);
  graph_free(g2);
}

/* An inferred graph dumps, parses and dumps the same. */
static void test_round_trip_inferred(void) {
  Graph *g = parse("graph \"net\" opset 11 path \"x.onnx\"\n"
                   "input %in: f32[1,3,16,16]\n"
                   "const %w: f32[8,3,3,3] = random   # comment\n"
                   "const %b: f32[8] = ones\n"
                   "%c = Conv(%in, %w, %b) {pads=[1,1,1,1], strides=[2,2]}\n"
                   "%p = MaxPool(%c) {kernel_shape=[2,2], strides=[2,2]}\n"
                   "%s = Shape(%p)\n"
                   "output %p\n");
  CHECK(g && graph_infer_shapes(g));
  if (!g)
    return;
  char *once = dump_to_string(g);
  Graph *g2 = parse(once);
  char *twice = g2 ? dump_to_string(g2) : NULL;
  CHECK(twice && strcmp(once, twice) == 0);
  /* random weights are the same on every parse, and lie in [-1, 1] */
  Tensor *w1 = graph_find_tensor(g, "w"), *w2 = g2 ? graph_find_tensor(g2, "w") : NULL;
  CHECK(w1 && w2 && memcmp(w1->f32, w2->f32, sizeof(float) * 216) == 0);
  bool in_range = true, varied = false;
  for (int i = 0; w1 && i < 216; i++) {
    in_range &= w1->f32[i] >= -1 && w1->f32[i] <= 1;
    varied |= w1->f32[i] != w1->f32[0];
  }
  CHECK(in_range && varied);
  CHECK(strstr(once, "%c: f32[1,8,8,8] = Conv(%in, %w, %b)") != NULL);
  CHECK(strstr(once, "%p: f32[1,8,4,4] = MaxPool(%c)") != NULL);
  free(once);
  free(twice);
  graph_free(g);
  graph_free(g2);
}

/* A scheduled and planned graph: the arena, each storage tensor's place and
   each node's place in the issue order round-trip, and the parser rebuilds
   the issue order and the stream and event counts from them. */
static const char planned[] =
    "graph \"main\" opset 13 path \"\"\n"
    "arena 1024\n"
    "input %x: f32[64] at 0\n"
    "const %s: i64[2] = [8,8]\n"
    "%a: f32[64] at 512 = Relu(%x) name=\"a\" .stream=1 .issue=1 .event=0\n"
    "%v: f32[8,8] @%a+0 = Reshape(%a, %s) name=\"v\" .view\n"
    "%b: f32[64] at 768 = Sigmoid(%x) name=\"b\" .issue=0\n"
    "%y: f32[8,8] at 256 = Add(%v, %v) name=\"y\" .issue=2 .waits=[0]\n"
    "output %y\n";

static void test_planned(void) {
  Graph *g = parse(planned);
  CHECK(g != NULL);
  if (!g)
    return;
  char *once = dump_to_string(g);
  CHECK(strcmp(once, planned) == 0);
  if (strcmp(once, planned) != 0)
    fprintf(stderr, "--- dumped:\n%s--- expected:\n%s", once, planned);
  Tensor *a = graph_find_tensor(g, "a"), *v = graph_find_tensor(g, "v");
  Tensor *x = graph_find_tensor(g, "x");
  CHECK(g->arena_bytes == 1024 && x->offset == 0 && a->offset == 512);
  CHECK(v->offset == 512); /* a view reports its storage's place */
  Schedule *s = &g->sched;
  CHECK(s->norder == 3 && s->nstreams == 2 && s->nevents == 1);
  CHECK(s->norder == 3 && strcmp(s->order[0]->name, "b") == 0 &&
        strcmp(s->order[1]->name, "a") == 0 && strcmp(s->order[2]->name, "y") == 0);
  free(once);
  graph_free(g);
}

static void test_fills(void) {
  Graph *g = parse("const %z: f32[2,2] = zeros\nconst %o: i64[3] = ones\n"
                   "const %f: f32[2,2] = [3.5]\nconst %n: f32[3] = <3 values>\n"
                   "const %e: f32[0] = []\n");
  CHECK(g != NULL);
  if (!g)
    return;
  CHECK(has_floats(g, "z", (float[]){0, 0, 0, 0}, 4, 0));
  CHECK(has_ints(g, "o", (int64_t[]){1, 1, 1}, 3));
  CHECK(has_floats(g, "f", (float[]){3.5f, 3.5f, 3.5f, 3.5f}, 4, 0));
  Tensor *e = graph_find_tensor(g, "e");
  CHECK(e && tensor_is_const(e) && tensor_numel(e) == 0);
  CHECK(g->opset == 0 && strcmp(g->name, "main") == 0);
  graph_free(g);
}

/* Parses text that must fail; returns what went to stderr. */
static char *parse_error(const char *text) {
  fflush(stderr);
  FILE *tmp = tmpfile();
  int saved = dup(2);
  dup2(fileno(tmp), 2);
  int before = ir_error_count();
  Graph *g = graph_parse(text, "bad.ir");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  CHECK(g == NULL && one_error(before));
  graph_free(g);
  static char buf[1024];
  rewind(tmp);
  size_t n = fread(buf, 1, sizeof buf - 1, tmp);
  buf[n] = 0;
  fclose(tmp);
  return buf;
}

static void test_errors(void) {
  const char *m;
  m = parse_error("input %x: f32[2]\n\n%y = Frobnicate(%x)\n");
  CHECK(strncmp(m, "opc: error: bad.ir:3: ", 22) == 0 && strstr(m, "Frobnicate"));
  m = parse_error("# a comment\ninput %x: q7[2]\n");
  CHECK(strncmp(m, "opc: error: bad.ir:2: ", 22) == 0 && strstr(m, "q7"));
  m = parse_error("const %w: f32[2,2] = [1.0,2.0]\n");
  CHECK(strncmp(m, "opc: error: bad.ir:1: ", 22) == 0);
  m = parse_error("const %w: f32[2,2] = <5 values>\n");
  CHECK(strncmp(m, "opc: error: bad.ir:1: ", 22) == 0);
  m = parse_error("const %w: i64[2] = [1.5,2]\n");
  CHECK(strncmp(m, "opc: error: bad.ir:1: ", 22) == 0);
  m = parse_error("input %x: f32[2]\n%y = Relu(%x) {alpha=}\n");
  CHECK(strncmp(m, "opc: error: bad.ir:2: ", 22) == 0);
  m = parse_error("input %x: f32[2]\n%y = Relu(%x) name=\"unterminated\n");
  CHECK(strncmp(m, "opc: error: bad.ir:2: ", 22) == 0);
  m = parse_error("input %x: f32[2]\n%y = Relu(%x) .colour=red\n");
  CHECK(strstr(m, "colour") != NULL);
  m = parse_error("input %x: f32[2] trailing\n");
  CHECK(strncmp(m, "opc: error: bad.ir:1: ", 22) == 0);
  m = parse_error("graph \"a\" opset\n");
  CHECK(strncmp(m, "opc: error: bad.ir:1: ", 22) == 0);
  m = parse_error("arena 0\n");
  CHECK(strncmp(m, "opc: error: bad.ir:1: ", 22) == 0);
  m = parse_error("input %x: f32[2]\n%y: f32[2] @%x+0 at 0 = Relu(%x)\n");
  CHECK(strncmp(m, "opc: error: bad.ir:2: ", 22) == 0 && strstr(m, "view"));
  m = parse_error("input %x: f32[2]\n%y = Relu(%x) .issue=0\n%z = Relu(%y) .issue=0\n");
  CHECK(strncmp(m, "opc: error: bad.ir:3: ", 22) == 0);
  m = parse_error("input %x: f32[2]\n%y = Relu(%x) .issue=0\n%z = Relu(%y) .issue=2\n");
  CHECK(strstr(m, "issue positions") != NULL);
  /* Storage strides of its own must visit each element once. */
  m = parse_error("input %x: f16[1,2,3,4]:[24,1,8,3]\n");
  CHECK(strncmp(m, "opc: error: bad.ir:1: ", 22) == 0 && strstr(m, "order of the dims"));
  m = parse_error("input %x: f16[1,2,3,4]:[24,1,8]\n");
  CHECK(strstr(m, "3 strides for rank 4") != NULL);
}

/* A channels-last tensor: strides after the type, kept through a round
   trip; the helpers agree with them. */
static void test_channels_last(void) {
  const char *text = "graph \"main\" opset 0 path \"test\"\n"
                     "input %x: f16[1,8,4,4]:[128,1,32,8]\n"
                     "%y: f16[1,8,4,4]:[128,1,32,8] = Relu(%x) name=\"r\"\n"
                     "%z: f16[1,8,4,4] = Identity(%y) name=\"to_nchw\"\n"
                     "output %z\n";
  Graph *g = parse(text);
  CHECK(g != NULL);
  if (!g)
    return;
  char *dumped = dump_to_string(g);
  CHECK(strcmp(dumped, text) == 0);
  if (strcmp(dumped, text) != 0)
    fprintf(stderr, "--- dumped:\n%s--- expected:\n%s", dumped, text);
  Tensor *x = graph_find_tensor(g, "x"), *z = graph_find_tensor(g, "z");
  CHECK(tensor_is_channels_last(x) && tensor_has_dense_strides(x) && !tensor_is_channels_last(z));
  Tensor t = *z;
  tensor_set_channels_last(&t);
  CHECK(t.strides[0] == 128 && t.strides[1] == 1 && t.strides[2] == 32 && t.strides[3] == 8);
  CHECK(graph_verify(g));
  free(dumped);
  graph_free(g);
}

int main(void) {
  test_canonical();
  test_round_trip_inferred();
  test_planned();
  test_fills();
  test_errors();
  test_channels_last();
  return finish("test_text");
}
