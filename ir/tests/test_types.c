/*
 * test_types.c - the ONNX type constraints of ops.def, the output dtypes
 * the shape functions set, and where a node may run: compile-time only
 * kinds and today's float32-only run time. The rules come from the ONNX
 * operator specification.
 */
#include "check.h"

#define HEADER "graph \"t\" opset 18\n"

/* Every row's type column has at most one word per input, and a word for
   each kind that takes inputs (its syntax is checked when the table is
   first read, which any inference does). */
static void test_table(void) {
  CHECK(strcmp(infer_errors(HEADER "input %x: f32[2]\n%y = Relu(%x)\n"), "") == 0);
  for (int k = 1; k < OP_COUNT; k++) {
    const OpInfo *info = op_info((OpKind)k);
    int words = 0;
    for (const char *p = info->types; *p; p++)
      words += (p == info->types || p[-1] == ' ') && *p != ' ';
    int max_in = k == OP_CONV ? 4 : info->max_inputs; /* opc's fused residual */
    bool fits = max_in < 0 || words <= max_in;
    bool covers = max_in == 0 || words > 0;
    if (!fits || !covers)
      fprintf(stderr, "  %s: %d type words for %d to %d inputs\n", info->name, words,
              info->min_inputs, info->max_inputs);
    CHECK(fits && covers);
  }
}

static void test_mismatches(void) {
  CHECK(fails_with(HEADER "input %a: f32[2]\nconst %b: i64[2] = [1,2]\n%y = Add(%a, %b)\n",
                   "node 'Add_0' (Add): input 'b' of Add has type i64, expected the same type "
                   "as input 'a' (f32)"));
  CHECK(fails_with(HEADER "const %x: i64[1,1,3,3] = random\nconst %w: i64[1,1,1,1] = ones\n"
                          "%y = Conv(%x, %w)\n",
                   "input 'x' of Conv has type i64, expected one of f16, f32, f64, bf16"));
  CHECK(fails_with(HEADER "const %c: f32[2] = [1.0,0.0]\nconst %a: f32[2] = ones\n"
                          "%y = Where(%c, %a, %a)\n",
                   "input 'c' of Where has type f32, expected one of bool"));
  CHECK(fails_with(HEADER "const %c: bool[2] = [1,0]\nconst %a: f32[2] = ones\n"
                          "const %b: f16[2] = ones\n%y = Where(%c, %a, %b)\n",
                   "input 'b' of Where has type f16, expected the same type as input 'a' (f32)"));
  CHECK(fails_with(HEADER "input %x: f32[3,2]\nconst %i: f32[1] = [0.0]\n%y = Gather(%x, %i)\n",
                   "input 'i' of Gather has type f32, expected one of i32, i64"));
  /* Sum and Mean take floats only; Max and Min any number */
  CHECK(fails_with(HEADER "const %a: i64[2] = [1,2]\n%y = Sum(%a, %a)\n",
                   "input 'a' of Sum has type i64, expected one of f16, f32, f64, bf16"));
  CHECK(strcmp(infer_errors(HEADER "const %a: u8[2] = [1,2]\n%y = Max(%a, %a)\n"), "") == 0);
  /* variadic inputs share the first one's type */
  CHECK(fails_with(HEADER "const %a: f32[2] = ones\nconst %b: f64[2] = ones\n"
                          "%y = Max(%a, %a, %b)\n",
                   "input 'b' of Max has type f64, expected the same type as input 'a' (f32)"));
  /* BitShift is for unsigned integers, logic for bool */
  CHECK(fails_with(HEADER "const %a: i32[2] = [1,2]\n%y = BitShift(%a, %a) {direction=\"LEFT\"}\n",
                   "expected one of u8, u16, u32, u64"));
  CHECK(fails_with(HEADER "const %a: i64[2] = [1,0]\n%y = Not(%a)\n", "expected one of bool"));
  CHECK(fails_with(HEADER "const %a: f32[2] = ones\nconst %i: i32[1,1] = [0]\n"
                          "%y = ScatterND(%a, %i, %a)\n",
                   "input 'i' of ScatterND has type i32, expected one of i64"));
}

/* Cast goes from any type to any type, at compile time. */
static void test_casts(void) {
  Graph *g = parse(HEADER "const %b: bool[3] = [1,0,1]\nconst %i: i8[2] = [-1,100]\n"
                          "%h = Cast(%b) {to=10}\n%u = Cast(%i) {to=4}\n%f = Cast(%i) {to=16}\n"
                          "%like = CastLike(%i, %h)\n");
  CHECK(g && graph_infer_shapes(g));
  CHECK(has_values(g, "h", "f16[3] = [1,0,1]"));
  CHECK(has_values(g, "u", "u16[2] = [65535,100]"));
  CHECK(has_values(g, "f", "bf16[2] = [-1,100]"));
  CHECK(has_values(g, "like", "f16[2] = [-1,100]"));
  graph_free(g);
}

/* The output dtypes the specification gives each new kind. */
static void test_output_types(void) {
  Graph *g = parse(HEADER
                   "const %x: f16[2,3] = [1.0,5.0,3.0,2.0,2.0,0.0]\n"
                   "const %k: i64[1] = [2]\nconst %i: i32[2] = [0,2]\n"
                   "const %d: f32[] = [4.0]\nconst %v: i8[2] = [0,7]\n"
                   "%eq = Equal(%x, %x)\n%am = ArgMax(%x) {axis=1, keepdims=0}\n"
                   "%tv, %ti = TopK(%x, %k)\n%nz = NonZero(%x)\n%sz = Size(%x)\n"
                   "%oh = OneHot(%i, %d, %v)\n%nan = IsNaN(%x)\n"
                   "%uy, %ui, %uv, %uc = Unique(%x)\n");
  CHECK(g && graph_infer_shapes(g));
  CHECK(has_type(g, "eq", "bool[2,3]"));
  CHECK(has_type(g, "am", "i64[2]"));
  CHECK(has_type(g, "tv", "f16[2,2]") && has_type(g, "ti", "i64[2,2]"));
  /* five non-zero values in a rank-2 tensor */
  CHECK(has_type(g, "nz", "i64[2,5]"));
  CHECK(has_values(g, "sz", "i64[] = [6]"));
  CHECK(has_type(g, "oh", "i8[2,4]"));
  CHECK(has_type(g, "nan", "bool[2,3]"));
  /* 0, 1, 2, 3, 5 */
  CHECK(has_type(g, "uy", "f16[5]") && has_type(g, "ui", "i64[5]") &&
        has_type(g, "uv", "i64[6]") && has_type(g, "uc", "i64[5]"));
  graph_free(g);
}

/* Kinds without kernels run only when they fold, and Range only with a
   constant start and delta (its limit may be a run's size); the message
   is the one the conformance runner looks for to bind the input and
   retry. */
static void test_compile_time_only(void) {
  CHECK(fails_with(HEADER "input %s: i64[]\nconst %l: i64[] = [5]\nconst %d: i64[] = [1]\n"
                          "%y = Range(%s, %l, %d)\n",
                   "node 'Range_0' (Range): shape input 's' is not a compile-time constant"));
  /* OneHot has kernels: run-time indices with a constant depth */
  Graph *oh = parse(HEADER "input %x: i64[4]\nconst %d: i64[] = [3]\n"
                           "const %v: f32[2] = [0.0, 1.0]\n%y = OneHot(%x, %d, %v)\n");
  CHECK(oh && graph_infer_shapes(oh) && has_type(oh, "y", "f32[4,3]"));
  graph_free(oh);
  /* ScatterND has kernels: run-time data and indices are fine */
  Graph *s = parse(HEADER "input %x: f32[4]\ninput %i: i64[1,1]\nconst %u: f32[1] = [1.0]\n"
                          "%y = ScatterND(%x, %i, %u)\n");
  CHECK(s && graph_infer_shapes(s) && has_type(s, "y", "f32[4]"));
  graph_free(s);
  /* Unique at run time: its outputs bounded by every item being unique,
     but for inverse_indices, one entry an item */
  Graph *u = parse(HEADER "input %x: f32[4]\n%y, %i, %v, %c = Unique(%x)\n");
  CHECK(u && graph_infer_shapes(u) && has_type(u, "y", "f32[<=4]") &&
        has_type(u, "i", "i64[<=4]") && has_type(u, "v", "i64[4]") && has_type(u, "c", "i64[<=4]"));
  graph_free(u);
  /* NonZero at run time: bounded by every element being nonzero, the
     count (axis 1) the data's; an elementwise reader and a reshape carry
     the bound on, a Transpose that reorders its dims and a reduction of
     it not in prefix layout may not read it */
  Graph *nz = parse(HEADER "input %x: f32[4,5]\n%y = NonZero(%x)\n%n = Neg(%y)\n"
                    "const %a: i64[1] = [0]\n%u = Unsqueeze(%n, %a)\n");
  CHECK(nz && graph_infer_shapes(nz) && has_type(nz, "y", "i64[2,<=20]") &&
        has_type(nz, "n", "i64[2,<=20]") && has_type(nz, "u", "i64[1,2,<=20]") &&
        graph_find_tensor(nz, "u")->bound_origin == graph_find_tensor(nz, "y"));
  graph_free(nz);
  CHECK(fails_with(HEADER "input %x: f32[4,5]\n%y = NonZero(%x)\n%z = Transpose(%y)\n",
                   "node 'Transpose_1' (Transpose): input 'y' has a size known only at run time "
                   "(the output of a NonZero, i64[2,<=20]); the transpose reorders its dims"));
  CHECK(fails_with(HEADER "input %x: f32[4,5]\n%y = NonZero(%x)\n%z = ReduceMax(%y)\n",
                   "node 'ReduceMax_1' (ReduceMax): input 'y' has a size known only at run time "
                   "(the output of a NonZero, i64[2,<=20]); its kernels read at the planned "
                   "strides"));
  /* a reduction in prefix layout: across the run-time axis the output
     stays bounded, along it the output is static (ir/bounds.c) */
  Graph *r = parse(HEADER "input %x: f32[20]\n%y = NonZero(%x)\nconst %a: i64[1] = [0]\n"
                   "%m = ReduceMax(%y, %a)\n%s = ReduceSum(%y)\n");
  CHECK(r && graph_infer_shapes(r) && has_type(r, "m", "i64[1,<=20]") &&
        has_type(r, "s", "i64[1,1]") && !graph_find_tensor(r, "s")->bounded &&
        graph_find_tensor(r, "m")->bound_origin == graph_find_tensor(r, "y"));
  graph_free(r);
  /* comparison, logic and Where have kernels: run-time inputs are fine */
  Graph *c = parse(HEADER "input %x: f32[4]\nconst %z: f32[] = [0.0]\n%y = Equal(%x, %z)\n"
                          "%n = Not(%y)\n%w = Where(%n, %x, %z)\n");
  CHECK(c && graph_infer_shapes(c) && has_type(c, "y", "bool[4]") &&
        has_type(c, "w", "f32[4]"));
  graph_free(c);
  /* Size reads only the shape: a run-time input is fine */
  Graph *g = parse(HEADER "input %x: f32[4,5]\n%y = Size(%x)\n");
  CHECK(g && graph_infer_shapes(g) && has_values(g, "y", "i64[] = [20]"));
  graph_free(g);
}

/* Run-time values have the storage types of net.c, which since int16 and
   the wider unsigned types joined leave out only strings (the IR text has
   no string input; frontend-import checks that refusal). */
static void test_run_time_dtypes(void) {
  CHECK(strcmp(infer_errors(HEADER "input %x: i16[4]\n%y = Relu(%x)\n"), "") == 0);
  CHECK(strcmp(infer_errors(HEADER "input %x: u64[4]\n%y = Cast(%x) {to=4}\n"), "") == 0);
  Graph *r = parse(HEADER "input %x: i64[4]\n%y = Relu(%x)\n%c = Cast(%x) {to=9}\n");
  CHECK(r && graph_infer_shapes(r));
  graph_free(r);
  /* the same with constant inputs folds */
  Graph *g = parse(HEADER "const %x: i64[2] = [-1,2]\n%y = Relu(%x)\n%c = Cast(%x) {to=1}\n");
  CHECK(g && graph_infer_shapes(g) && has_values(g, "y", "i64[2] = [0,2]") &&
        has_values(g, "c", "f32[2] = [-1,2]"));
  graph_free(g);
  /* parameter inputs (shapes, indices) are not run-time data */
  g = parse(HEADER "input %x: f32[3,2]\nconst %i: i64[1] = [2]\n%y = Gather(%x, %i)\n");
  CHECK(g && graph_infer_shapes(g) && has_type(g, "y", "f32[1,2]"));
  graph_free(g);
}

/* A row's traits agree with its other columns, so that what a pass decides
   from one the backend can do from the other: a kind that follows 16-bit
   input (lower-precision) or runs in the libraries' 16-bit form takes
   float16 (and bfloat16) at run time, and each fused activation has
   exactly one row, which names it. */
static bool row_ok(OpKind op, bool ok, const char *what) {
  if (!ok)
    fprintf(stderr, "  ops.def row %s: %s\n", op_name(op), what);
  return ok;
}

static void test_row_traits(void) {
  int rows_of[OPC_ACT_COUNT] = {0};
  for (int i = 1; i < OP_COUNT; i++) {
    OpKind op = (OpKind)i;
    const OpInfo *info = op_info(op);
    unsigned t = info->traits, types = info->run_types;
    CHECK(row_ok(op, !(t & (T_FOLLOWS_HALF | T_FOLLOWS_F16)) || (types & TY_F16),
                 "follows 16-bit input but run_types lacks TY_F16"));
    CHECK(row_ok(op, !(t & T_FOLLOWS_HALF) || (types & TY_BF16),
                 "follows 16-bit input but run_types lacks TY_BF16"));
    CHECK(row_ok(op, !info->half || (types & TY_HALVES) == TY_HALVES,
                 "has a 16-bit library form but run_types lacks TY_HALVES"));
    CHECK(row_ok(op, (info->act != OPC_ACT_NONE) == (info->act_name != NULL),
                 "act and act_name disagree"));
    CHECK(row_ok(op, info->act != OPC_ACT_NONE || !(t & (T_ACT_ALPHA | T_ACT_BETA)),
                 "activation parameters without an act"));
    CHECK(row_ok(op, info->act >= OPC_ACT_NONE && info->act < OPC_ACT_COUNT,
                 "act is no code of scalar.h's OPC_ACTIVATIONS"));
    if (info->act > OPC_ACT_NONE && info->act < OPC_ACT_COUNT)
      rows_of[info->act]++;
  }
  /* A code of scalar.h's list is fused by at most one operator. */
  for (int a = OPC_ACT_NONE + 1; a < OPC_ACT_COUNT; a++) {
    if (rows_of[a] > 1)
      fprintf(stderr, "  activation %d is named by %d rows of ops.def\n", a, rows_of[a]);
    CHECK(rows_of[a] <= 1);
    CHECK(!rows_of[a] || (act_op((Activation)a) != OP_INVALID && act_name((Activation)a) != NULL));
  }
}

int main(void) {
  test_row_traits();
  test_table();
  test_mismatches();
  test_casts();
  test_output_types();
  test_compile_time_only();
  test_run_time_dtypes();
  return finish("test_types");
}
