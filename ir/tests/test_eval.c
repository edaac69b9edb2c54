/*
 * test_eval.c - the compile-time evaluators of the comparison, logic,
 * bitwise, selection and indexing kinds, and the older kinds on the other
 * dtypes the specification allows. Expected values are worked out by hand
 * from the ONNX operator definitions (the arithmetic is in the comments).
 */
#include "check.h"

#define HEADER "graph \"t\" opset 18\n"

/* Parses and infers (which folds every node whose inputs are constant). */
static Graph *folded(const char *text) {
  Graph *g = parse(text);
  if (g && !graph_infer_shapes(g)) {
    graph_free(g);
    return NULL;
  }
  return g;
}

static void test_compare(void) {
  Graph *g = folded(HEADER
                    "const %a: f32[2,2] = [1.0,nan,3.0,-1.0]\nconst %b: f32[2] = [1.0,2.0]\n"
                    "%eq = Equal(%a, %b)\n%gt = Greater(%a, %b)\n%lt = Less(%a, %b)\n"
                    "%ge = GreaterOrEqual(%a, %b)\n%le = LessOrEqual(%a, %b)\n"
                    "const %u: u64[2] = [-1,1]\nconst %one: u64[] = [1]\n"
                    "%ugt = Greater(%u, %one)\n"
                    "const %s: i32[3] = [-5,0,7]\nconst %zero: i32[] = [0]\n"
                    "%slt = Less(%s, %zero)\n"
                    "const %p: bool[2] = [1,0]\n%peq = Equal(%p, %p)\n");
  CHECK(g != NULL);
  if (!g)
    return;
  /* b broadcasts over rows: (1,1) (nan,2) (3,1) (-1,2); NaN compares false */
  CHECK(has_values(g, "eq", "bool[2,2] = [1,0,0,0]"));
  CHECK(has_values(g, "gt", "bool[2,2] = [0,0,1,0]"));
  CHECK(has_values(g, "lt", "bool[2,2] = [0,0,0,1]"));
  CHECK(has_values(g, "ge", "bool[2,2] = [1,0,1,0]"));
  CHECK(has_values(g, "le", "bool[2,2] = [1,0,0,1]"));
  /* u64 2^64-1 (held as -1) is the largest, not negative */
  CHECK(has_values(g, "ugt", "bool[2] = [1,0]"));
  CHECK(has_values(g, "slt", "bool[3] = [1,0,0]"));
  CHECK(has_values(g, "peq", "bool[2] = [1,1]"));
  graph_free(g);
}

static void test_logic_bits(void) {
  Graph *g = folded(HEADER
                    "const %p: bool[2,1] = [1,0]\nconst %q: bool[2] = [1,0]\n"
                    "%and = And(%p, %q)\n%or = Or(%p, %q)\n%xor = Xor(%p, %q)\n%not = Not(%q)\n"
                    "const %x8: u8[3] = [200,1,128]\nconst %s8: u8[3] = [1,8,7]\n"
                    "%shl = BitShift(%x8, %s8) {direction=\"LEFT\"}\n"
                    "%shr = BitShift(%x8, %s8) {direction=\"RIGHT\"}\n"
                    "const %w: u64[1] = [-1]\nconst %sh: u64[1] = [60]\n"
                    "%wr = BitShift(%w, %sh) {direction=\"RIGHT\"}\n"
                    "const %i8: i8[3] = [5,-1,0]\nconst %m8: i8[3] = [3,15,-128]\n"
                    "%band = BitwiseAnd(%i8, %m8)\n%bor = BitwiseOr(%i8, %m8)\n"
                    "%bxor = BitwiseXor(%i8, %m8)\n%bnot = BitwiseNot(%i8)\n"
                    "const %u16: u16[2] = [0,65535]\n%unot = BitwiseNot(%u16)\n");
  CHECK(g != NULL);
  if (!g)
    return;
  /* p is a column, q a row */
  CHECK(has_values(g, "and", "bool[2,2] = [1,0,0,0]"));
  CHECK(has_values(g, "or", "bool[2,2] = [1,1,1,0]"));
  CHECK(has_values(g, "xor", "bool[2,2] = [0,1,1,0]"));
  CHECK(has_values(g, "not", "bool[2] = [0,1]"));
  /* 200 << 1 = 400 wraps to 144; a shift by the width (8) gives 0;
     128 << 7 leaves no bit in 8 */
  CHECK(has_values(g, "shl", "u8[3] = [144,0,0]"));
  CHECK(has_values(g, "shr", "u8[3] = [100,0,1]"));
  /* (2^64 - 1) >> 60 = 15, an unsigned shift */
  CHECK(has_values(g, "wr", "u64[1] = [15]"));
  /* 5&3 = 1, 0xff&0x0f = 15; 5|3 = 7; 5^3 = 6, 0xff^0x0f = 0xf0 = -16 */
  CHECK(has_values(g, "band", "i8[3] = [1,15,0]"));
  CHECK(has_values(g, "bor", "i8[3] = [7,-1,-128]"));
  CHECK(has_values(g, "bxor", "i8[3] = [6,-16,-128]"));
  CHECK(has_values(g, "bnot", "i8[3] = [-6,0,-1]"));
  CHECK(has_values(g, "unot", "u16[2] = [65535,0]"));
  graph_free(g);
}

static void test_classes_where(void) {
  Graph *g = folded(HEADER
                    "const %f: f32[4] = [nan,inf,-inf,1.0]\n"
                    "%isnan = IsNaN(%f)\n%isinf = IsInf(%f)\n"
                    "%ispos = IsInf(%f) {detect_negative=0}\n%isneg = IsInf(%f) {detect_positive=0}\n"
                    "const %c: bool[2,1] = [1,0]\nconst %x: f32[] = [9.0]\n"
                    "const %y: f32[1,3] = [1.0,2.0,3.0]\n%w = Where(%c, %x, %y)\n"
                    "const %ci: bool[3] = [0,1,0]\nconst %xi: i32[3] = [1,2,3]\n"
                    "const %yi: i32[] = [-7]\n%wi = Where(%ci, %xi, %yi)\n");
  CHECK(g != NULL);
  if (!g)
    return;
  CHECK(has_values(g, "isnan", "bool[4] = [1,0,0,0]"));
  CHECK(has_values(g, "isinf", "bool[4] = [0,1,1,0]"));
  CHECK(has_values(g, "ispos", "bool[4] = [0,1,0,0]"));
  CHECK(has_values(g, "isneg", "bool[4] = [0,0,1,0]"));
  /* [2,1], [] and [1,3] broadcast to [2,3]: row 0 takes x, row 1 y */
  CHECK(has_values(g, "w", "f32[2,3] = [9,9,9,1,2,3]"));
  CHECK(has_values(g, "wi", "i32[3] = [-7,2,-7]"));
  graph_free(g);
}

static void test_scatter(void) {
  Graph *g = folded(HEADER
                    "const %d: f32[4] = [1.0,2.0,3.0,4.0]\n"
                    "const %idx: i64[3,1] = [0,-1,0]\nconst %upd: f32[3] = [10.0,20.0,5.0]\n"
                    "%none = ScatterND(%d, %idx, %upd)\n"
                    "%add = ScatterND(%d, %idx, %upd) {reduction=\"add\"}\n"
                    "%mul = ScatterND(%d, %idx, %upd) {reduction=\"mul\"}\n"
                    "%max = ScatterND(%d, %idx, %upd) {reduction=\"max\"}\n"
                    "%min = ScatterND(%d, %idx, %upd) {reduction=\"min\"}\n"
                    "const %m: i32[2,3] = [1,2,3,4,5,6]\n"
                    "const %ri: i64[1,1] = [-1]\nconst %ru: i32[1,3] = [7,8,9]\n"
                    "%rows = ScatterND(%m, %ri, %ru)\n"
                    "const %ei: i64[2,2] = [0,1,1,2]\nconst %eu: i32[2] = [-5,-6]\n"
                    "%elems = ScatterND(%m, %ei, %eu) {reduction=\"add\"}\n"
                    "const %sd: f32[2,3] = zeros\nconst %si: i64[2,2] = [2,-3,0,0]\n"
                    "const %su: f32[2,2] = [1.0,2.0,3.0,4.0]\n"
                    "%se = ScatterElements(%sd, %si, %su) {axis=1}\n"
                    "%sea = ScatterElements(%sd, %si, %su) {axis=1, reduction=\"add\"}\n"
                    "const %bi: i32[1,2] = [1,0]\nconst %bu: bool[1,2] = [1,1]\n"
                    "const %bd: bool[2,2] = zeros\n%sb = Scatter(%bd, %bi, %bu)\n");
  CHECK(g != NULL);
  if (!g)
    return;
  /* updates go in order: [0] = 10, [3] = 20, [0] = 5 */
  CHECK(has_values(g, "none", "f32[4] = [5,2,3,20]"));
  CHECK(has_values(g, "add", "f32[4] = [16,2,3,24]"));
  CHECK(has_values(g, "mul", "f32[4] = [50,2,3,80]"));
  CHECK(has_values(g, "max", "f32[4] = [10,2,3,20]"));
  CHECK(has_values(g, "min", "f32[4] = [1,2,3,4]"));
  /* index tuples of one value address whole rows; -1 is the last */
  CHECK(has_values(g, "rows", "i32[2,3] = [1,2,3,7,8,9]"));
  /* (0,1) += -5, (1,2) += -6 */
  CHECK(has_values(g, "elems", "i32[2,3] = [1,-3,3,4,5,0]"));
  /* row 0: column 2 = 1, column -3 = 0 gets 2; row 1: column 0 gets 3 then 4 */
  CHECK(has_values(g, "se", "f32[2,3] = [2,0,1,4,0,0]"));
  CHECK(has_values(g, "sea", "f32[2,3] = [2,0,1,7,0,0]"));
  /* Scatter (opset 9) is ScatterElements: axis 0, row indices 1 and 0 */
  CHECK(has_values(g, "sb", "bool[2,2] = [0,1,1,0]"));
  graph_free(g);
  int before = ir_error_count();
  CHECK(!folded(HEADER "const %d: f32[4] = zeros\nconst %i: i64[1,1] = [4]\n"
                       "const %u: f32[1] = [1.0]\n%y = ScatterND(%d, %i, %u)\n") &&
        one_error(before));
  CHECK(fails_with(HEADER "const %d: f32[4] = zeros\nconst %i: i64[1,1] = [0]\n"
                          "const %u: f32[1] = [1.0]\n%y = ScatterND(%d, %i, %u) {reduction=\"sub\"}\n",
                   "unknown reduction 'sub'"));
}

static void test_gather_nd_one_hot(void) {
  Graph *g = folded(HEADER
                    "const %g: i32[2,2] = [0,1,2,3]\n"
                    "const %gi: i64[2,2] = [0,0,1,-1]\n%ge = GatherND(%g, %gi)\n"
                    "const %gr: i64[2,1] = [1,0]\n%grow = GatherND(%g, %gr)\n"
                    "const %g3: f32[2,2,2] = [0.0,1.0,2.0,3.0,4.0,5.0,6.0,7.0]\n"
                    "const %gb: i64[2,1] = [1,0]\n%gbatch = GatherND(%g3, %gb) {batch_dims=1}\n"
                    "const %oi: i64[3] = [0,-1,5]\nconst %od: i64[] = [3]\n"
                    "const %ov: f32[2] = [-1.0,2.0]\n"
                    "%oh = OneHot(%oi, %od, %ov)\n%oh0 = OneHot(%oi, %od, %ov) {axis=0}\n"
                    "const %fi: f32[2] = [1.0,2.0]\nconst %fd: f32[] = [3.0]\n"
                    "const %vi: i64[2] = [0,1]\n%ohf = OneHot(%fi, %fd, %vi)\n");
  CHECK(g != NULL);
  if (!g)
    return;
  /* elements (0,0) and (1,-1) = (1,1) */
  CHECK(has_values(g, "ge", "i32[2] = [0,3]"));
  /* rows 1 and 0 */
  CHECK(has_values(g, "grow", "i32[2,2] = [2,3,0,1]"));
  /* batch 0 takes its row 1 = [2,3], batch 1 its row 0 = [4,5] */
  CHECK(has_values(g, "gbatch", "f32[2,2] = [2,3,4,5]"));
  /* on = 2, off = -1; -1 is depth - 1; 5 is outside [-3, 3): all off */
  CHECK(has_values(g, "oh", "f32[3,3] = [2,-1,-1,-1,-1,2,-1,-1,-1]"));
  /* the same with the one-hot axis first: y[d][i] = on when index i is d */
  CHECK(has_values(g, "oh0", "f32[3,3] = [2,-1,-1,-1,-1,-1,-1,2,-1]"));
  CHECK(has_values(g, "ohf", "i64[2,3] = [0,1,0,0,0,1]"));
  graph_free(g);
}

static void test_arg_topk(void) {
  Graph *g = folded(HEADER
                    "const %am: f32[2,3] = [1.0,3.0,3.0,nan,0.0,nan]\n"
                    "%amax = ArgMax(%am) {axis=1}\n"
                    "%amaxl = ArgMax(%am) {axis=1, select_last_index=1}\n"
                    "%amin = ArgMin(%am) {axis=1, keepdims=0}\n"
                    "const %ai: i32[2,2] = [4,-2,4,7]\n"
                    "%amin0 = ArgMin(%ai) {axis=0}\n"
                    "%amax0 = ArgMax(%ai) {axis=0, select_last_index=1}\n"
                    "const %au: u64[2] = [1,-1]\n%aum = ArgMax(%au)\n"
                    "const %tk: f32[2,4] = [1.0,3.0,3.0,2.0,5.0,nan,4.0,5.0]\n"
                    "const %k2: i64[1] = [2]\n"
                    "%tv, %ti = TopK(%tk, %k2)\n%sv, %si = TopK(%tk, %k2) {largest=0}\n"
                    "const %tc: i32[3,2] = [1,9,3,9,2,0]\nconst %k1: i64[1] = [1]\n"
                    "%cv, %ci = TopK(%tc, %k1) {axis=0}\n");
  CHECK(g != NULL);
  if (!g)
    return;
  /* row 0: the first 3 (the last with select_last_index); row 1: the NaN
     in front, which nothing compares above, as in ONNX Runtime */
  CHECK(has_values(g, "amax", "i64[2,1] = [1,0]"));
  CHECK(has_values(g, "amaxl", "i64[2,1] = [2,0]"));
  CHECK(has_values(g, "amin", "i64[2] = [0,0]"));
  CHECK(has_values(g, "amin0", "i64[1,2] = [0,0]"));
  CHECK(has_values(g, "amax0", "i64[1,2] = [1,1]"));
  CHECK(has_values(g, "aum", "i64[1] = [1]"));
  /* ties keep index order; NaN goes last */
  CHECK(has_values(g, "tv", "f32[2,2] = [3,3,5,5]") && has_values(g, "ti", "i64[2,2] = [1,2,0,3]"));
  CHECK(has_values(g, "sv", "f32[2,2] = [1,2,4,5]") && has_values(g, "si", "i64[2,2] = [0,3,2,0]"));
  /* down the columns: 3 at row 1; 9 at rows 0 and 1, the lower index */
  CHECK(has_values(g, "cv", "i32[1,2] = [3,9]") && has_values(g, "ci", "i64[1,2] = [1,0]"));
  graph_free(g);
  CHECK(fails_with(HEADER "const %x: f32[3] = zeros\nconst %k: i64[1] = [4]\n"
                          "%v, %i = TopK(%x, %k)\n",
                   "K = 4 is outside [0, 3]"));
}

static void test_non_zero_unique(void) {
  Graph *g = folded(HEADER
                    "const %nzx: bool[2,3] = [1,0,1,0,0,1]\n%nz = NonZero(%nzx)\n"
                    "const %nzs: f32[3] = [0.0,-0.5,nan]\n%nzf = NonZero(%nzs)\n"
                    "const %ux: i64[6] = [2,1,1,3,4,3]\n"
                    "%uy, %ui, %uv, %uc = Unique(%ux)\n"
                    "%vy, %vi, %vv, %vc = Unique(%ux) {sorted=0}\n"
                    "%oy = Unique(%ux)\n"
                    "const %ua: f32[3,2] = [1.0,0.0,0.0,1.0,1.0,0.0]\n"
                    "%ay, %ai, %av, %ac = Unique(%ua) {axis=0}\n"
                    "%by = Unique(%ua) {axis=1}\n%cy = Unique(%ua) {axis=1, sorted=0}\n");
  CHECK(g != NULL);
  if (!g)
    return;
  /* (0,0), (0,2), (1,2): one row of coordinates per dim */
  CHECK(has_values(g, "nz", "i64[2,3] = [0,0,1,0,2,2]"));
  /* NaN is not zero */
  CHECK(has_values(g, "nzf", "i64[1,2] = [1,2]"));
  CHECK(has_values(g, "uy", "i64[4] = [1,2,3,4]"));
  CHECK(has_values(g, "ui", "i64[4] = [1,0,3,4]"));
  CHECK(has_values(g, "uv", "i64[6] = [1,0,0,2,3,2]"));
  CHECK(has_values(g, "uc", "i64[4] = [2,1,2,1]"));
  /* unsorted: in order of first occurrence */
  CHECK(has_values(g, "vy", "i64[4] = [2,1,3,4]"));
  CHECK(has_values(g, "vi", "i64[4] = [0,1,3,4]"));
  CHECK(has_values(g, "vv", "i64[6] = [0,1,1,2,3,2]"));
  CHECK(has_values(g, "vc", "i64[4] = [1,2,2,1]"));
  CHECK(has_values(g, "oy", "i64[4] = [1,2,3,4]"));
  /* rows [1,0] [0,1] [1,0]: sorted [0,1] < [1,0] */
  CHECK(has_values(g, "ay", "f32[2,2] = [0,1,1,0]"));
  CHECK(has_values(g, "ai", "i64[2] = [1,0]"));
  CHECK(has_values(g, "av", "i64[3] = [1,0,1]"));
  CHECK(has_values(g, "ac", "i64[2] = [1,2]"));
  /* columns [1,0,1] and [0,1,0] differ; sorted, [0,1,0] comes first */
  CHECK(has_values(g, "by", "f32[3,2] = [0,1,1,0,0,1]"));
  CHECK(has_values(g, "cy", "f32[3,2] = [1,0,0,1,1,0]"));
  graph_free(g);
}

/* The older kinds on the other dtypes they allow: results wrap to their
   integer width or round to f16, u64 is unsigned. */
static void test_other_dtypes(void) {
  Graph *g = folded(HEADER
                    "const %ma: i32[4] = [-7,7,-7,7]\nconst %mb: i32[4] = [2,2,-2,-2]\n"
                    "%mod = Mod(%ma, %mb)\n%fmod = Mod(%ma, %mb) {fmod=1}\n"
                    "const %fa: f32[2] = [-7.5,7.5]\nconst %fb: f32[2] = [2.0,-2.0]\n"
                    "%ffmod = Mod(%fa, %fb) {fmod=1}\n"
                    "const %u8a: u8[2] = [200,10]\n%u8s = Add(%u8a, %u8a)\n"
                    "const %i8a: i8[2] = [100,-100]\n%i8m = Mul(%i8a, %i8a)\n"
                    "const %um: u64[2] = [-1,5]\nconst %un: u64[2] = [1,6]\n"
                    "%umax = Max(%um, %un)\n%umin = Min(%um, %un)\n%udiv = Div(%um, %un)\n"
                    "%ubig = Cast(%um) {to=1}\n"
                    "const %h: f16[2] = [1.0,2048.0]\nconst %h1: f16[2] = [0.0009765625,1.0]\n"
                    "%hs = Add(%h, %h1)\n%hc = Concat(%h, %h1) {axis=0}\n"
                    "const %r0: i32[] = [5]\nconst %r1: i32[] = [-1]\nconst %rd: i32[] = [-2]\n"
                    "%range = Range(%r0, %r1, %rd)\n"
                    "const %cs: i32[4] = [1,2,3,4]\nconst %ax: i32[] = [0]\n"
                    "%cum = CumSum(%cs, %ax) {exclusive=1, reverse=1}\n"
                    "const %eb: bool[2,1] = [1,0]\nconst %es: i64[2] = [2,3]\n"
                    "%exp = Expand(%eb, %es)\n"
                    "const %t8: i8[2] = [-1,2]\nconst %rep: i64[1] = [2]\n%tile = Tile(%t8, %rep)\n"
                    "const %su: u16[4] = [1,2,3,4]\nconst %st: i64[1] = [-1]\n"
                    "const %en: i64[1] = [-5]\nconst %sx: i64[1] = [0]\nconst %sp: i64[1] = [-2]\n"
                    "%slice = Slice(%su, %st, %en, %sx, %sp)\n"
                    "const %gb: bool[3] = [1,0,1]\nconst %gx: i32[2] = [-1,1]\n"
                    "%gath = Gather(%gb, %gx)\n"
                    "const %ge: i8[2,2] = [1,2,3,4]\nconst %gei: i64[2,2] = [1,0,-1,0]\n"
                    "%gel = GatherElements(%ge, %gei) {axis=1}\n");
  CHECK(g != NULL);
  if (!g)
    return;
  /* floored (the divisor's sign) and truncated (the dividend's) */
  CHECK(has_values(g, "mod", "i32[4] = [1,1,-1,-1]"));
  CHECK(has_values(g, "fmod", "i32[4] = [-1,1,-1,1]"));
  CHECK(has_values(g, "ffmod", "f32[2] = [-1.5,1.5]"));
  /* 400 - 256 = 144; 10000 = 39 * 256 + 16 */
  CHECK(has_values(g, "u8s", "u8[2] = [144,20]"));
  CHECK(has_values(g, "i8m", "i8[2] = [16,16]"));
  /* 2^64 - 1, held as -1 */
  CHECK(has_values(g, "umax", "u64[2] = [-1,6]"));
  CHECK(has_values(g, "umin", "u64[2] = [1,5]"));
  CHECK(has_values(g, "udiv", "u64[2] = [-1,0]"));
  CHECK(has_values(g, "ubig", "f32[2] = [1.84467e+19,5]"));
  /* 1 + 2^-10 is a half; 2049 lies halfway between the halves 2048 and
     2050 and goes to the even 2048 */
  CHECK(has_values(g, "hs", "f16[2] = [1.00098,2048]"));
  CHECK(has_values(g, "hc", "f16[4] = [1,2048,0.000976562,1]"));
  CHECK(has_values(g, "range", "i32[3] = [5,3,1]"));
  /* reversed and exclusive: the sum of the elements after each */
  CHECK(has_values(g, "cum", "i32[4] = [9,7,4,0]"));
  CHECK(has_values(g, "exp", "bool[2,3] = [1,1,1,0,0,0]"));
  CHECK(has_values(g, "tile", "i8[4] = [-1,2,-1,2]"));
  /* from the last element down by 2 */
  CHECK(has_values(g, "slice", "u16[2] = [4,2]"));
  CHECK(has_values(g, "gath", "bool[2] = [1,0]"));
  CHECK(has_values(g, "gel", "i8[2,2] = [2,1,4,3]"));
  graph_free(g);
}

int main(void) {
  test_compare();
  test_logic_bits();
  test_classes_where();
  test_scatter();
  test_gather_nd_one_hot();
  test_arg_topk();
  test_non_zero_unique();
  test_other_dtypes();
  return finish("test_eval");
}
