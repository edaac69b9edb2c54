/*
 * test_fold.c - compile-time evaluation. Expected values are worked out by
 * hand from the operator definitions.
 */
#include <math.h>

#include "check.h"

/* Parses and infers (which folds every node whose inputs are constant). */
static Graph *folded(const char *text) {
  Graph *g = parse(text);
  if (g && !graph_infer_shapes(g)) {
    graph_free(g);
    return NULL;
  }
  return g;
}

static void test_movement(void) {
  Graph *g = folded(
      "graph \"t\" opset 13\n"
      "const %m: i64[2,3] = [0,1,2,3,4,5]\n"
      "const %v: i64[10] = [0,1,2,3,4,5,6,7,8,9]\n"
      "const %st: i64[1] = [-1]\nconst %en: i64[1] = [-9223372036854775807]\n"
      "const %sp: i64[1] = [-3]\n"
      "const %idx: i64[2] = [-1,0]\nconst %two: i64[2] = [2,1]\n"
      "const %rep: i64[2] = [1,2]\nconst %es: i64[2] = [2,3]\nconst %col: i64[2,1] = [7,8]\n"
      "%tr = Transpose(%m)\n"
      "%sl = Slice(%v, %st, %en, _, %sp)\n"
      "%ga = Gather(%m, %idx) {axis=1}\n"
      "%cc = Concat(%m, %m) {axis=1}\n"
      "%s1, %s2 = Split(%m, %two) {axis=1}\n"
      "%ti = Tile(%m, %rep)\n"
      "%ex = Expand(%col, %es)\n"
      "%fl = Flatten(%m) {axis=0}\n");
  CHECK(g != NULL);
  if (!g)
    return;
  /* [[0,1,2],[3,4,5]]^T = [[0,3],[1,4],[2,5]] */
  CHECK(has_ints(g, "tr", (int64_t[]){0, 3, 1, 4, 2, 5}, 6));
  /* from index 9 down by 3 while > -1: 9, 6, 3, 0 */
  CHECK(has_ints(g, "sl", (int64_t[]){9, 6, 3, 0}, 4));
  /* columns -1 (=2) and 0 of each row */
  CHECK(has_ints(g, "ga", (int64_t[]){2, 0, 5, 3}, 4));
  CHECK(has_ints(g, "cc", (int64_t[]){0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}, 12));
  CHECK(has_ints(g, "s1", (int64_t[]){0, 1, 3, 4}, 4));
  CHECK(has_ints(g, "s2", (int64_t[]){2, 5}, 2));
  CHECK(has_ints(g, "ti", (int64_t[]){0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}, 12));
  CHECK(has_ints(g, "ex", (int64_t[]){7, 7, 7, 8, 8, 8}, 6));
  CHECK(has_ints(g, "fl", (int64_t[]){0, 1, 2, 3, 4, 5}, 6));
  graph_free(g);
}

static void test_arithmetic(void) {
  Graph *g = folded(
      "graph \"t\" opset 13\n"
      "const %a: i64[2,1] = [-7,9]\nconst %b: i64[2] = [2,-4]\n"
      "const %x: f32[2,2] = [1.0,-2.0,0.5,4.0]\nconst %y: f32[2] = [2.0,0.5]\n"
      "const %big: i64[1] = [9223372036854775807]\nconst %one: i64[1] = [1]\n"
      "%add = Add(%a, %b)\n%sub = Sub(%a, %b)\n%mul = Mul(%a, %b)\n%div = Div(%a, %b)\n"
      "%fdiv = Div(%x, %y)\n%pow = Pow(%x, %y)\n%ipow = Pow(%b, %b)\n"
      "%max = Max(%x, %y)\n%min = Min(%a, %b)\n%mean = Mean(%x, %y, %x)\n"
      "%sum = Sum(%x, %y, %y)\n%bigsub = Sub(%big, %one)\n");
  CHECK(g != NULL);
  if (!g)
    return;
  /* a is a column, b a row: [[-7+2, -7-4], [9+2, 9-4]] */
  CHECK(has_type(g, "add", "i64[2,2]") && has_ints(g, "add", (int64_t[]){-5, -11, 11, 5}, 4));
  CHECK(has_ints(g, "sub", (int64_t[]){-9, -3, 7, 13}, 4));
  CHECK(has_ints(g, "mul", (int64_t[]){-14, 28, 18, -36}, 4));
  /* integer division truncates toward zero: -7/2 = -3, -7/-4 = 1, 9/-4 = -2 */
  CHECK(has_ints(g, "div", (int64_t[]){-3, 1, 4, -2}, 4));
  CHECK(has_floats(g, "fdiv", (float[]){0.5f, -4.0f, 0.25f, 8.0f}, 4, 0));
  /* 1^2, (-2)^0.5 = nan, 0.5^2, 4^0.5 */
  Tensor *p = graph_find_tensor(g, "pow");
  CHECK(p && p->f32 && p->f32[0] == 1.0f && p->f32[1] != p->f32[1] && p->f32[2] == 0.25f &&
        p->f32[3] == 2.0f);
  /* 2^2 = 4, (-4)^-4 -> 0 in integers */
  CHECK(has_ints(g, "ipow", (int64_t[]){4, 0}, 2));
  CHECK(has_floats(g, "max", (float[]){2.0f, 0.5f, 2.0f, 4.0f}, 4, 0));
  CHECK(has_ints(g, "min", (int64_t[]){-7, -7, 2, -4}, 4));
  /* (1+2+1)/3, (-2+0.5-2)/3, (0.5+2+0.5)/3, (4+0.5+4)/3 */
  CHECK(has_floats(g, "mean", (float[]){4.0f / 3, -3.5f / 3, 1.0f, 8.5f / 3}, 4, 1e-6f));
  /* x + 2y per row: 1+4, -2+1, 0.5+4, 4+1 (Sum takes floats only) */
  CHECK(has_floats(g, "sum", (float[]){5.0f, -1.0f, 4.5f, 5.0f}, 4, 0));
  /* exact in int64, beyond what a double holds */
  CHECK(has_ints(g, "bigsub", (int64_t[]){9223372036854775806}, 1));
  graph_free(g);
  /* integer division by zero is an error, not a crash */
  int before = ir_error_count();
  g = folded("graph \"t\"\nconst %a: i64[1] = [1]\nconst %z: i64[1] = [0]\n%d = Div(%a, %z)\n");
  CHECK(!g && one_error(before));
  graph_free(g);
}

static void test_unary_cast(void) {
  Graph *g = folded(
      "graph \"t\" opset 13\n"
      "const %x: f32[4] = [-2.0,0.0,0.5,2.5]\nconst %i: i64[3] = [-3,0,4]\n"
      "const %lo: f32[] = [-1.0]\nconst %hi: f32[] = [1.0]\n"
      "%relu = Relu(%x)\n%leaky = LeakyRelu(%x) {alpha=0.5}\n%sig = Sigmoid(%x)\n"
      "%exp = Exp(%x)\n%neg = Neg(%i)\n%abs = Abs(%i)\n%round = Round(%x)\n"
      "%clip = Clip(%x, %lo, %hi)\n%hsw = HardSwish(%x)\n"
      "%toint = Cast(%x) {to=7}\n%tobool = Cast(%i) {to=9}\n%tof = Cast(%i) {to=1}\n"
      "%tou8 = Cast(%i) {to=2}\n");
  CHECK(g != NULL);
  if (!g)
    return;
  CHECK(has_floats(g, "relu", (float[]){0, 0, 0.5f, 2.5f}, 4, 0));
  CHECK(has_floats(g, "leaky", (float[]){-1.0f, 0, 0.5f, 2.5f}, 4, 0));
  /* 1/(1+e^2) = 0.1192029, 0.5, 1/(1+e^-0.5) = 0.6224593, 1/(1+e^-2.5) = 0.9241418 */
  CHECK(has_floats(g, "sig", (float[]){0.1192029f, 0.5f, 0.6224593f, 0.9241418f}, 4, 1e-6f));
  CHECK(has_floats(g, "exp", (float[]){0.1353353f, 1.0f, 1.6487213f, 12.182494f}, 4, 1e-5f));
  CHECK(has_ints(g, "neg", (int64_t[]){3, 0, -4}, 3));
  CHECK(has_ints(g, "abs", (int64_t[]){3, 0, 4}, 3));
  /* halves round to even: 0.5 -> 0, 2.5 -> 2 */
  CHECK(has_floats(g, "round", (float[]){-2.0f, 0, 0, 2.0f}, 4, 0));
  CHECK(has_floats(g, "clip", (float[]){-1.0f, 0, 0.5f, 1.0f}, 4, 0));
  /* x * clamp(x/6 + 1/2, 0, 1): -2 * 1/6, 0, 0.5 * 7/12, 2.5 * 11/12 */
  CHECK(has_floats(g, "hsw", (float[]){-1.0f / 3, 0, 7.0f / 24, 27.5f / 12}, 4, 1e-6f));
  /* float to int truncates toward zero */
  CHECK(has_type(g, "toint", "i64[4]") && has_ints(g, "toint", (int64_t[]){-2, 0, 0, 2}, 4));
  CHECK(has_type(g, "tobool", "bool[3]") && has_ints(g, "tobool", (int64_t[]){1, 0, 1}, 3));
  CHECK(has_floats(g, "tof", (float[]){-3.0f, 0, 4.0f}, 3, 0));
  /* -3 wraps to 253 in uint8 */
  CHECK(has_ints(g, "tou8", (int64_t[]){253, 0, 4}, 3));
  graph_free(g);
}

/* Casts to f16 and bf16 keep a float but round it to what the narrower type
   holds, ties to even. */
static void test_narrow_casts(void) {
  Graph *g = folded("graph \"t\" opset 13\n"
                    "const %x: f32[4] = [0.1,65519.0,65520.0,1e-08]\n"
                    "const %b: f32[3] = [1.00390625,1.01171875,-3.0]\n"
                    "%h = Cast(%x) {to=10}\n%bf = Cast(%b) {to=16}\n");
  CHECK(g != NULL);
  if (!g)
    return;
  /* 0.1 lies in [2^-4, 2^-3), where halves step by 2^-14: 1638.4 steps
     round to 1638 = 0.0999755859375. 65519 rounds to the largest half,
     65504; 65520 overflows. 1e-8 is below half the smallest subnormal
     (2^-24 / 2), so it becomes 0. */
  Tensor *h = graph_find_tensor(g, "h");
  CHECK(has_type(g, "h", "f16[4]") && h->f32 && h->f32[0] == 0.0999755859375f &&
        h->f32[1] == 65504.0f && h->f32[2] == INFINITY && h->f32[3] == 0.0f);
  /* bf16 keeps 7 mantissa bits: 1 + 2^-8 is halfway between 1 and
     1 + 2^-7 and goes to the even 1; 1 + 3*2^-8 goes to 1 + 2^-6. */
  CHECK(has_floats(g, "bf", (float[]){1.0f, 1.015625f, -3.0f}, 3, 0));
  graph_free(g);
}

static void test_reduce_softmax(void) {
  Graph *g = folded(
      "graph \"t\" opset 13\n"
      "const %x: f32[2,3] = [1.0,2.0,3.0,4.0,5.0,6.0]\n"
      "const %i: i64[2,2] = [1,2,3,4]\nconst %ax0: i64[1] = [0]\n"
      "const %z: f32[1,2,2] = zeros\n"
      "const %l: f32[2] = [0.0,0.6931472]\n"
      "%rs = ReduceSum(%x, %ax0)\n%rm = ReduceMean(%x) {axes=[1], keepdims=0}\n"
      "%rx = ReduceMax(%x) {keepdims=0}\n%rn = ReduceMin(%i) {axes=[-1]}\n"
      "%is = ReduceSum(%i) {keepdims=0}\n"
      "%sm = Softmax(%l)\n%lsm = LogSoftmax(%l)\n%s13 = Softmax(%z) {axis=1}\n");
  CHECK(g != NULL);
  if (!g)
    return;
  CHECK(has_type(g, "rs", "f32[1,3]") && has_floats(g, "rs", (float[]){5, 7, 9}, 3, 0));
  CHECK(has_type(g, "rm", "f32[2]") && has_floats(g, "rm", (float[]){2, 5}, 2, 1e-6f));
  CHECK(has_type(g, "rx", "f32[]") && has_floats(g, "rx", (float[]){6}, 1, 0));
  CHECK(has_type(g, "rn", "i64[2,1]") && has_ints(g, "rn", (int64_t[]){1, 3}, 2));
  CHECK(has_ints(g, "is", (int64_t[]){10}, 1));
  /* exp(0) : exp(ln 2) = 1 : 2 */
  CHECK(has_floats(g, "sm", (float[]){1.0f / 3, 2.0f / 3}, 2, 1e-6f));
  CHECK(has_floats(g, "lsm", (float[]){-1.0986123f, -0.4054651f}, 2, 1e-6f));
  /* opset 13: along axis 1 only, 2 elements each */
  CHECK(has_floats(g, "s13", (float[]){0.5f, 0.5f, 0.5f, 0.5f}, 4, 1e-6f));
  graph_free(g);
  /* before opset 13, axis 1 of [1,2,2] flattens to 4 elements */
  g = folded("graph \"t\" opset 11\nconst %z: f32[1,2,2] = zeros\n"
             "%s11 = Softmax(%z) {axis=1}\n");
  CHECK(g && has_floats(g, "s11", (float[]){0.25f, 0.25f, 0.25f, 0.25f}, 4, 1e-6f));
  graph_free(g);
}

/* Before opset 7, PRelu's 1-D slope is per channel (axis 1), not
   broadcast against the last axis. */
static void test_legacy_prelu(void) {
  Graph *g = folded("graph \"t\" opset 6\n"
                    "const %x: f32[1,2,2] = [-1.0,-1.0,-2.0,-2.0]\n"
                    "const %s: f32[2] = [0.5,0.25]\n%y = PRelu(%x, %s)\n");
  /* channel 0: -1 * 0.5 twice; channel 1: -2 * 0.25 twice */
  CHECK(g && has_floats(g, "y", (float[]){-0.5f, -0.5f, -0.5f, -0.5f}, 4, 0));
  CHECK(g && graph_verify(g));
  graph_free(g);
}

/* Conv of constants folds; Relu of an input waits; a Conv whose
   multiply-adds pass the evaluators' work limit stays run-time work,
   without an error, as a too-large result does. */
static void test_not_evaluable(void) {
  Graph *g = parse("graph \"t\" opset 13\ninput %x: f32[1,1,3,3]\n"
                   "const %c: f32[1,1,3,3] = ones\nconst %w: f32[1,1,1,1] = ones\n"
                   "const %big: f32[1,1,1024,1024] = ones\nconst %k: f32[1,1,32,64] = ones\n"
                   "%y = Conv(%c, %w)\n%r = Relu(%x)\n%z = Conv(%big, %k)\n");
  CHECK(g && graph_infer_shapes(g));
  if (!g)
    return;
  int before = ir_error_count();
  Tensor *y = graph_find_tensor(g, "y"), *r = graph_find_tensor(g, "r");
  Tensor *z = graph_find_tensor(g, "z");
  CHECK(tensor_is_const(y) && y->f32[8] == 1.0f);
  CHECK(!node_fold(g, r->producer) && !tensor_is_const(r));
  CHECK(!node_fold(g, z->producer) && !tensor_is_const(z));
  CHECK(ir_error_count() == before);
  graph_free(g);
}

int main(void) {
  test_movement();
  test_arithmetic();
  test_unary_cast();
  test_narrow_casts();
  test_reduce_softmax();
  test_legacy_prelu();
  test_not_evaluable();
  return finish("test_fold");
}
