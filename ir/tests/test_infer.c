/*
 * test_infer.c - shape inference. Every expected shape is worked out by
 * hand from the ONNX operator specification (the arithmetic is in the
 * comments), never taken from opc's own output.
 */
#include <stdlib.h>

#include "check.h"

/* Parses and infers; NULL when either fails. */
static Graph *inferred(const char *text) {
  Graph *g = parse(text);
  if (g && !graph_infer_shapes(g)) {
    graph_free(g);
    return NULL;
  }
  return g;
}

/* Whether inference reports exactly one error on this graph. */
static bool fails_once(const char *text) {
  Graph *g = parse(text);
  if (!g)
    return false;
  int before = ir_error_count();
  bool ok = graph_infer_shapes(g);
  graph_free(g);
  return !ok && one_error(before);
}

static Node *node_named(Graph *g, const char *name) {
  for (int i = 0; i < g->nnodes; i++)
    if (strcmp(g->nodes[i]->name, name) == 0)
      return g->nodes[i];
  return NULL;
}

static void test_conv_same_padding(void) {
  /* 5 wide, kernel 4, stride 1: out = ceil(5/1) = 5, total pad =
     (5-1)*1 + 4 - 5 = 3, odd: SAME_UPPER puts the extra 1 at the end,
     SAME_LOWER at the beginning. With stride 2: out = ceil(5/2) = 3,
     total = 2*2 + 4 - 5 = 3 again. */
  Graph *g = inferred("graph \"t\" opset 13\n"
                      "input %x: f32[1,1,5,5]\n"
                      "const %w: f32[1,1,4,4] = random\n"
                      "%up = Conv(%x, %w) {auto_pad=\"SAME_UPPER\"} name=\"up\"\n"
                      "%lo = Conv(%x, %w) {auto_pad=\"SAME_LOWER\"} name=\"lo\"\n"
                      "%s2 = Conv(%x, %w) {auto_pad=\"SAME_UPPER\", strides=[2,1]} name=\"s2\"\n"
                      "%va = Conv(%x, %w) {auto_pad=\"VALID\", strides=[2,2]} name=\"va\"\n"
                      "output %up\noutput %lo\noutput %s2\noutput %va\n");
  CHECK(g != NULL);
  if (!g)
    return;
  CHECK(has_type(g, "up", "f32[1,1,5,5]"));
  CHECK(has_type(g, "lo", "f32[1,1,5,5]"));
  CHECK(has_type(g, "s2", "f32[1,1,3,5]"));
  /* VALID: floor((5 - 4) / 2) + 1 = 1 */
  CHECK(has_type(g, "va", "f32[1,1,1,1]"));
  Window up = node_named(g, "up")->win, lo = node_named(g, "lo")->win;
  CHECK(up.nspatial == 2 && up.kernel[0] == 4 && up.stride[0] == 1 && up.dilation[0] == 1);
  CHECK(up.pad_begin[0] == 1 && up.pad_end[0] == 2 && up.pad_begin[1] == 1 && up.pad_end[1] == 2);
  CHECK(lo.pad_begin[0] == 2 && lo.pad_end[0] == 1 && lo.pad_begin[1] == 2 && lo.pad_end[1] == 1);
  Window s2 = node_named(g, "s2")->win;
  CHECK(s2.stride[0] == 2 && s2.pad_begin[0] == 1 && s2.pad_end[0] == 2);
  Window va = node_named(g, "va")->win;
  CHECK(va.pad_begin[0] == 0 && va.pad_end[1] == 0);
  graph_free(g);
}

static void test_conv_explicit(void) {
  /* 4 channels, group 2, weight [8,2,3,3]: 2 * 2 = 4 input channels.
     H: dilation 2 -> extent 5, pads 1+2, stride 2: (10+3-5)/2 + 1 = 5.
     W: pads 0+1, stride 1: (10+1-5)/1 + 1 = 7. */
  Graph *g = inferred("graph \"t\" opset 13\n"
                      "input %x: f32[1,4,10,10]\n"
                      "const %w: f32[8,2,3,3] = random\n"
                      "const %b: f32[8] = zeros\n"
                      "%y = Conv(%x, %w, %b) {group=2, dilations=[2,2], pads=[1,0,2,1], "
                      "strides=[2,1]} name=\"c\"\n"
                      "output %y\n");
  CHECK(g && has_type(g, "y", "f32[1,8,5,7]"));
  if (g) {
    Window w = node_named(g, "c")->win;
    CHECK(w.group == 2 && w.dilation[1] == 2 && w.pad_begin[0] == 1 && w.pad_begin[1] == 0 &&
          w.pad_end[0] == 2 && w.pad_end[1] == 1 && w.stride[0] == 2 && w.stride[1] == 1);
  }
  graph_free(g);
  /* 1-D convolution, kernel from the weight: (7 - 3)/1 + 1 = 5 */
  g = inferred("graph \"t\" opset 11\ninput %x: f32[2,3,7]\nconst %w: f32[6,3,3] = random\n"
               "%y = Conv(%x, %w)\noutput %y\n");
  CHECK(g && has_type(g, "y", "f32[2,6,5]"));
  graph_free(g);
  /* channel mismatch: 4 input channels, weight expects 3 */
  CHECK(fails_once("graph \"t\" opset 13\ninput %x: f32[1,4,8,8]\n"
                   "const %w: f32[8,3,3,3] = random\n%y = Conv(%x, %w)\noutput %y\n"));
}

static void test_pool(void) {
  /* 6 wide, kernel 3, stride 2: floor((6-3)/2)+1 = 2, ceil: ceil(3/2)+1 = 3.
     5 wide with pads 1+1, kernel 2, stride 2: ceil((5+2-2)/2)+1 = 4, but
     the 4th window would start at 3*2 = 6 >= 5 + 1, inside the end
     padding, so it is dropped: 3 (as the MaxPool spec says). */
  Graph *g = inferred("graph \"t\" opset 12\n"
                      "input %x: f32[1,1,6,6]\ninput %z: f32[1,1,5,5]\n"
                      "%fl = MaxPool(%x) {kernel_shape=[3,3], strides=[2,2]}\n"
                      "%ce = MaxPool(%x) {kernel_shape=[3,3], strides=[2,2], ceil_mode=1}\n"
                      "%dr = MaxPool(%z) {kernel_shape=[2,2], strides=[2,2], pads=[1,1,1,1], "
                      "ceil_mode=1}\n"
                      "%av = AveragePool(%z) {kernel_shape=[3,3], pads=[1,1,1,1], "
                      "count_include_pad=1} name=\"av\"\n"
                      "%sl = AveragePool(%z) {kernel_shape=[2,2], strides=[2,2], "
                      "auto_pad=\"SAME_LOWER\"} name=\"sl\"\n"
                      "%gp = GlobalAveragePool(%z)\n"
                      "output %fl\noutput %ce\noutput %dr\noutput %av\noutput %sl\noutput %gp\n");
  CHECK(g != NULL);
  if (!g)
    return;
  CHECK(has_type(g, "fl", "f32[1,1,2,2]"));
  CHECK(has_type(g, "ce", "f32[1,1,3,3]"));
  CHECK(has_type(g, "dr", "f32[1,1,3,3]"));
  CHECK(has_type(g, "av", "f32[1,1,5,5]"));
  /* SAME_LOWER, 5 wide, stride 2: out 3, total = 2*2 + 2 - 5 = 1, at the start */
  CHECK(has_type(g, "sl", "f32[1,1,3,3]"));
  CHECK(has_type(g, "gp", "f32[1,1,1,1]"));
  Window av = node_named(g, "av")->win, sl = node_named(g, "sl")->win;
  CHECK(av.count_include_pad && !av.ceil_mode && av.pad_begin[0] == 1 && av.pad_end[1] == 1);
  CHECK(sl.pad_begin[0] == 1 && sl.pad_end[0] == 0);
  graph_free(g);
  /* MaxPool's Indices: int64, of the output's shape; storage_order 1 is
     column-major, 2 is refused once, clearly */
  g = inferred("graph \"t\" opset 12\ninput %x: f32[1,1,4,4]\n"
               "%y, %i = MaxPool(%x) {kernel_shape=[2,2], storage_order=1} name=\"m\"\n"
               "output %y\noutput %i\n");
  CHECK(g && has_type(g, "i", "i64[1,1,3,3]") && node_named(g, "m")->win.column_major);
  graph_free(g);
  CHECK(fails_once("graph \"t\" opset 12\ninput %x: f32[1,1,4,4]\n"
                   "%y, %i = MaxPool(%x) {kernel_shape=[2,2], storage_order=2}\noutput %y\n"));
  /* kernel_shape is required */
  CHECK(fails_once("graph \"t\"\ninput %x: f32[1,1,4,4]\n%y = MaxPool(%x)\noutput %y\n"));
}

/* A pad as wide as the kernel leaves a window over padding only (a flipped
   bit in pads): refused. One narrower than the kernel is fine, and a
   convolution's pads may be as wide as it likes (zeros). */
static void test_pool_pads(void) {
  CHECK(fails_with("graph \"t\" opset 12\ninput %x: f32[1,1,4]\n"
                   "%y = MaxPool(%x) {kernel_shape=[2], pads=[2,0]} name=\"p\"\noutput %y\n",
                   "node 'p' (MaxPool): pads 2 and 0 of spatial axis 0 must be smaller than "
                   "its kernel_shape 2"));
  CHECK(fails_with("graph \"t\" opset 12\ninput %x: f32[1,1,4,4]\n"
                   "%y = AveragePool(%x) {kernel_shape=[3,3], pads=[0,1,0,3]}\noutput %y\n",
                   "pads 1 and 3 of spatial axis 1 must be smaller than its kernel_shape 3"));
  /* (4 + 1 + 1 - 2) / 1 + 1 = 5 */
  Graph *g = inferred("graph \"t\" opset 12\ninput %x: f32[1,1,4]\n"
                      "const %w: f32[1,1,2] = ones\n"
                      "%p = MaxPool(%x) {kernel_shape=[2], pads=[1,1]}\n"
                      "%c = Conv(%x, %w) {pads=[3,3]}\noutput %p\noutput %c\n");
  CHECK(g && has_type(g, "p", "f32[1,1,5]"));
  /* (4 + 6 - 2) / 1 + 1 = 9 */
  CHECK(g && has_type(g, "c", "f32[1,1,9]"));
  graph_free(g);
}

static void test_conv_transpose(void) {
  /* out = stride*(in-1) + output_padding + (k-1)*dilation + 1 - pads.
     H: 3*2 + 1 + 3 = 10, W: 2*2 + 1 + 3 = 8; channels = W[1]*group = 2. */
  Graph *g = inferred("graph \"t\" opset 11\n"
                      "input %x: f32[1,1,3,3]\nconst %w: f32[1,2,3,3] = random\n"
                      "%op = ConvTranspose(%x, %w) {strides=[3,2], output_padding=[1,1]}\n"
                      "%pd = ConvTranspose(%x, %w) {strides=[3,2], pads=[1,2,1,2]}\n"
                      "%os = ConvTranspose(%x, %w) {strides=[3,2], output_shape=[10,8]} "
                      "name=\"os\"\n"
                      "%su = ConvTranspose(%x, %w) {strides=[2,2], auto_pad=\"SAME_UPPER\"} "
                      "name=\"su\"\n"
                      "output %op\noutput %pd\noutput %os\noutput %su\n");
  CHECK(g != NULL);
  if (!g)
    return;
  CHECK(has_type(g, "op", "f32[1,2,10,8]"));
  /* H: 3*2 + 3 - 2 = 7, W: 2*2 + 3 - 4 = 3 */
  CHECK(has_type(g, "pd", "f32[1,2,7,3]"));
  /* output_shape 10x8: the full output is 9x7, so nothing is padded and
     one extra row and column come from output padding. */
  CHECK(has_type(g, "os", "f32[1,2,10,8]"));
  Window os = node_named(g, "os")->win;
  CHECK(os.pad_begin[0] == 0 && os.pad_end[0] == 0 && os.output_padding[0] == 1 &&
        os.output_padding[1] == 1);
  /* SAME_UPPER: out = 3*2 = 6; full = 2*2 + 3 = 7, total pad 1 at the end */
  CHECK(has_type(g, "su", "f32[1,2,6,6]"));
  Window su = node_named(g, "su")->win;
  CHECK(su.pad_begin[0] == 0 && su.pad_end[0] == 1);
  graph_free(g);
}

static void test_reshape(void) {
  /* [2,3,4]: [0,-1] keeps 2 and infers 12; [-1,0,2] copies 3 and infers
     24/6 = 4; allowzero keeps a literal 0. */
  Graph *g = inferred("graph \"t\" opset 14\n"
                      "input %x: f32[2,3,4]\ninput %e: f32[0,4]\n"
                      "const %s1: i64[2] = [0,-1]\nconst %s2: i64[3] = [-1,0,2]\n"
                      "const %s3: i64[2] = [4,0]\n"
                      "%a = Reshape(%x, %s1)\n%b = Reshape(%x, %s2)\n"
                      "%c = Reshape(%e, %s3) {allowzero=1}\n"
                      "%f = Flatten(%x) {axis=0}\n%h = Flatten(%x) {axis=-1}\n"
                      "%k = Flatten(%x)\n"
                      "output %a\noutput %b\noutput %c\noutput %f\noutput %h\noutput %k\n");
  CHECK(g != NULL);
  if (!g)
    return;
  CHECK(has_type(g, "a", "f32[2,12]"));
  CHECK(has_type(g, "b", "f32[4,3,2]"));
  CHECK(has_type(g, "c", "f32[4,0]"));
  CHECK(has_type(g, "f", "f32[1,24]"));
  CHECK(has_type(g, "h", "f32[6,4]"));
  CHECK(has_type(g, "k", "f32[2,12]"));
  graph_free(g);
  /* 24 elements do not make 5 x something */
  CHECK(fails_once("graph \"t\"\ninput %x: f32[2,3,4]\nconst %s: i64[2] = [5,-1]\n"
                   "%y = Reshape(%x, %s)\noutput %y\n"));
  /* a shape computed at run time cannot be compiled */
  CHECK(fails_once("graph \"t\"\ninput %x: f32[2,3,4]\ninput %s: f32[2]\n"
                   "%y = Reshape(%x, %s)\noutput %y\n"));
  /* opset 1-4 give the shape as an attribute */
  g = inferred("graph \"t\" opset 4\ninput %x: f32[2,3,4]\n"
               "%y = Reshape(%x) {shape=[3,8]}\noutput %y\n");
  CHECK(g && has_type(g, "y", "f32[3,8]"));
  graph_free(g);
}

static void test_gather(void) {
  /* data [5,4,3], indices [1,2] on axis 1: [5] + [1,2] + [3] */
  Graph *g = inferred("graph \"t\" opset 13\ninput %x: f32[5,4,3]\n"
                      "const %i: i64[1,2] = [-1,0]\nconst %s: i64[] = [-2]\n"
                      "%y = Gather(%x, %i) {axis=1}\n%z = Gather(%x, %s) {axis=-1}\n"
                      "output %y\noutput %z\n");
  CHECK(g && has_type(g, "y", "f32[5,1,2,3]"));
  /* a scalar index removes the axis */
  CHECK(g && has_type(g, "z", "f32[5,4]"));
  graph_free(g);
  CHECK(fails_once("graph \"t\"\ninput %x: f32[5,4]\nconst %i: i64[1] = [4]\n"
                   "%y = Gather(%x, %i) {axis=1}\noutput %y\n"));
  CHECK(fails_once("graph \"t\"\ninput %x: f32[5,4]\nconst %i: i64[1] = [0]\n"
                   "%y = Gather(%x, %i) {axis=2}\noutput %y\n"));
}

static void test_slice(void) {
  /* axis 0 of 10, start -1 -> 9, end far below -> -1 (clamped for a
     negative step), step -2: 9,7,5,3,1 = 5 elements. axis 1 of 8, 0..8
     step 3: 0,3,6 = 3. The INT64_MAX end PyTorch writes clamps to 8. */
  Graph *g = inferred("graph \"t\" opset 13\ninput %x: f32[10,8]\n"
                      "const %st: i64[2] = [-1,0]\n"
                      "const %en: i64[2] = [-9223372036854775807,8]\n"
                      "const %ax: i64[2] = [0,1]\nconst %sp: i64[2] = [-2,3]\n"
                      "const %s1: i64[1] = [2]\nconst %e1: i64[1] = [9223372036854775807]\n"
                      "const %a1: i64[1] = [-1]\n"
                      "%y = Slice(%x, %st, %en, %ax, %sp)\n"
                      "%z = Slice(%x, %s1, %e1, %a1)\n"
                      "%e = Slice(%x, %e1, %s1)\n"
                      "output %y\noutput %z\noutput %e\n");
  CHECK(g && has_type(g, "y", "f32[5,3]"));
  CHECK(g && has_type(g, "z", "f32[10,6]"));
  /* start beyond the end with step 1: empty */
  CHECK(g && has_type(g, "e", "f32[0,8]"));
  graph_free(g);
  /* opset 1-9: attributes */
  g = inferred("graph \"t\" opset 9\ninput %x: f32[10,8]\n"
               "%y = Slice(%x) {starts=[1,-3], ends=[1000,-1]}\noutput %y\n");
  CHECK(g && has_type(g, "y", "f32[9,2]"));
  graph_free(g);
}

static void test_matmul_gemm(void) {
  /* batch dims [2,1] and [5] broadcast to [2,5]; 1-D operands lose
     their added dim again. */
  Graph *g = inferred("graph \"t\" opset 13\n"
                      "input %a: f32[2,1,3,4]\ninput %b: f32[5,4,6]\n"
                      "input %v: f32[4]\ninput %m: f32[3,4]\n"
                      "%ab = MatMul(%a, %b)\n%vb = MatMul(%v, %b)\n%mv = MatMul(%m, %v)\n"
                      "%vv = MatMul(%v, %v)\n"
                      "output %ab\noutput %vb\noutput %mv\noutput %vv\n");
  CHECK(g && has_type(g, "ab", "f32[2,5,3,6]"));
  CHECK(g && has_type(g, "vb", "f32[5,6]"));
  CHECK(g && has_type(g, "mv", "f32[3]"));
  CHECK(g && has_type(g, "vv", "f32[]"));
  graph_free(g);
  CHECK(fails_once("graph \"t\"\ninput %a: f32[3,4]\ninput %b: f32[5,6]\n"
                   "%y = MatMul(%a, %b)\noutput %y\n"));
  /* A [4,3] transposed is 3x4, B [5,4] transposed is 4x5; C [5] broadcasts */
  g = inferred("graph \"t\" opset 13\ninput %a: f32[4,3]\nconst %b: f32[5,4] = random\n"
               "const %c: f32[5] = zeros\n"
               "%y = Gemm(%a, %b, %c) {transA=1, transB=1}\noutput %y\n");
  CHECK(g && has_type(g, "y", "f32[3,5]"));
  graph_free(g);
  CHECK(fails_once("graph \"t\"\ninput %a: f32[4,3]\nconst %b: f32[5,4] = random\n"
                   "const %c: f32[4] = zeros\n%y = Gemm(%a, %b, %c) {transB=1}\noutput %y\n"));
}

static void test_resize(void) {
  /* scales: floor(4*2) = 8, floor(5*0.5) = 2; sizes taken as given;
     not_larger: scale = min(7/4, 7/5) = 1.4: round(5.6) = 6, round(7) = 7 */
  Graph *g = inferred("graph \"t\" opset 13\ninput %x: f32[1,3,4,5]\n"
                      "const %sc: f32[4] = [1.0,1.0,2.0,0.5]\n"
                      "const %sz: i64[4] = [1,3,7,9]\n"
                      "const %roi: f32[0] = []\nconst %none: f32[0] = []\n"
                      "%a = Resize(%x, _, %sc)\n%b = Resize(%x, %roi, %none, %sz)\n"
                      "output %a\noutput %b\n");
  CHECK(g && has_type(g, "a", "f32[1,3,8,2]"));
  CHECK(g && has_type(g, "b", "f32[1,3,7,9]"));
  graph_free(g);
  g = inferred("graph \"t\" opset 18\ninput %x: f32[1,3,4,5]\n"
               "const %sz: i64[2] = [7,7]\n"
               "%y = Resize(%x, _, _, %sz) {axes=[2,3], keep_aspect_ratio_policy=\"not_larger\"}\n"
               "%z = Resize(%x, _, _, %sz) {axes=[2,3], keep_aspect_ratio_policy=\"not_smaller\"}\n"
               "output %y\noutput %z\n");
  CHECK(g && has_type(g, "y", "f32[1,3,6,7]"));
  /* not_smaller: scale = max(1.75, 1.4) = 1.75: round(7) = 7, round(8.75) = 9 */
  CHECK(g && has_type(g, "z", "f32[1,3,7,9]"));
  graph_free(g);
  /* opset 10: (X, scales); Upsample 7 has scales as an attribute, 9 as input */
  g = inferred("graph \"t\" opset 10\ninput %x: f32[1,3,4,5]\n"
               "const %sc: f32[4] = [1.0,1.0,1.5,3.0]\n"
               "%y = Resize(%x, %sc)\n%u = Upsample(%x, %sc)\n"
               "%w = Upsample(%x) {scales=[1.0,1.0,2.0,2.0]}\n"
               "output %y\noutput %u\noutput %w\n");
  CHECK(g && has_type(g, "y", "f32[1,3,6,15]"));
  CHECK(g && has_type(g, "u", "f32[1,3,6,15]"));
  CHECK(g && has_type(g, "w", "f32[1,3,8,10]"));
  graph_free(g);
  CHECK(fails_once("graph \"t\" opset 13\ninput %x: f32[1,3,4,5]\n"
                   "const %sc: f32[4] = [1.0,1.0,2.0,2.0]\nconst %sz: i64[4] = [1,3,8,8]\n"
                   "%y = Resize(%x, _, %sc, %sz)\noutput %y\n"));
}

static void test_split_squeeze(void) {
  Graph *g = inferred("graph \"t\" opset 13\ninput %x: f32[1,5,6]\n"
                      "const %sp: i64[2] = [2,3]\nconst %ax: i64[2] = [0,-1]\n"
                      "const %sq: i64[1] = [0]\n"
                      "%a, %b = Split(%x, %sp) {axis=1}\n"
                      "%c, %d, %e = Split(%x) {axis=-1}\n"
                      "%u = Unsqueeze(%x, %ax)\n%s = Squeeze(%x, %sq)\n%t = Squeeze(%x)\n"
                      "output %a\noutput %b\noutput %c\noutput %e\noutput %u\noutput %s\n"
                      "output %t\n");
  CHECK(g && has_type(g, "a", "f32[1,2,6]") && has_type(g, "b", "f32[1,3,6]"));
  CHECK(g && has_type(g, "c", "f32[1,5,2]") && has_type(g, "e", "f32[1,5,2]"));
  /* output rank 5; axes 0 and -1 -> 0 and 4 */
  CHECK(g && has_type(g, "u", "f32[1,1,5,6,1]"));
  CHECK(g && has_type(g, "s", "f32[5,6]") && has_type(g, "t", "f32[5,6]"));
  graph_free(g);
  /* opset 18 num_outputs: 7 in 3 parts of ceil(7/3) = 3: 3, 3, 1 */
  g = inferred("graph \"t\" opset 18\ninput %x: f32[7]\n"
               "%a, %b, %c = Split(%x) {num_outputs=3}\noutput %a\noutput %c\n");
  CHECK(g && has_type(g, "a", "f32[3]") && has_type(g, "c", "f32[1]"));
  graph_free(g);
  /* opset 11: attributes */
  g = inferred("graph \"t\" opset 11\ninput %x: f32[1,5,6]\n"
               "%a, %b = Split(%x) {axis=1, split=[4,1]}\n"
               "%u = Unsqueeze(%x) {axes=[1]}\n%s = Squeeze(%x) {axes=[0]}\n"
               "output %a\noutput %b\noutput %u\noutput %s\n");
  CHECK(g && has_type(g, "a", "f32[1,4,6]") && has_type(g, "b", "f32[1,1,6]"));
  CHECK(g && has_type(g, "u", "f32[1,1,5,6]") && has_type(g, "s", "f32[5,6]"));
  graph_free(g);
  CHECK(fails_once("graph \"t\" opset 11\ninput %x: f32[1,5,6]\n"
                   "%a, %b = Split(%x) {axis=1, split=[4,2]}\noutput %a\n"));
  CHECK(fails_once("graph \"t\" opset 11\ninput %x: f32[1,5,6]\n"
                   "%s = Squeeze(%x) {axes=[1]}\noutput %s\n"));
}

static void test_pad_misc(void) {
  Graph *g = inferred(
      "graph \"t\" opset 18\ninput %x: f32[1,2,3]\n"
      "const %p: i64[6] = [0,1,2,0,3,-1]\nconst %p2: i64[2] = [1,2]\n"
      "const %ax: i64[1] = [-1]\nconst %cv: f32[] = [0.5]\n"
      "%a = Pad(%x, %p, %cv)\n%b = Pad(%x, %p2, _, %ax) {mode=\"reflect\"}\n"
      "%t = Transpose(%x)\n%t2 = Transpose(%x) {perm=[1,0,2]}\n"
      "const %rep: i64[3] = [2,1,3]\nconst %es: i64[4] = [4,1,2,1]\n"
      "%ti = Tile(%x, %rep)\n%ex = Expand(%x, %es)\n"
      "output %a\noutput %b\noutput %t\noutput %t2\noutput %ti\noutput %ex\n");
  /* [1+0+0, 2+1+3, 3+2-1] */
  CHECK(g && has_type(g, "a", "f32[1,6,4]"));
  CHECK(g && has_type(g, "b", "f32[1,2,6]"));
  CHECK(g && has_type(g, "t", "f32[3,2,1]") && has_type(g, "t2", "f32[2,1,3]"));
  CHECK(g && has_type(g, "ti", "f32[2,2,9]"));
  /* [1,2,3] against [4,1,2,1]: [4,1,2,3] */
  CHECK(g && has_type(g, "ex", "f32[4,1,2,3]"));
  graph_free(g);
  /* opset 2 pads attribute; SpaceToDepth needs even H and W: 3+1+1 = 5 is odd */
  CHECK(fails_once("graph \"t\" opset 2\ninput %x: f32[1,8,2,3]\n"
                   "%a = Pad(%x) {pads=[0,0,1,1,0,0,1,1]}\n"
                   "%s = SpaceToDepth(%a) {blocksize=2}\noutput %s\n"));
  g = inferred("graph \"t\" opset 2\ninput %x: f32[1,8,2,3]\n"
               "%a = Pad(%x) {pads=[0,0,1,1,0,0,1,2]}\n"
               "%d = DepthToSpace(%x) {blocksize=2}\n"
               "%s = SpaceToDepth(%a) {blocksize=2}\n"
               "output %a\noutput %d\noutput %s\n");
  /* H 2+1+1 = 4, W 3+1+2 = 6; DepthToSpace: 8/4 = 2 channels, 4x6;
     SpaceToDepth of [1,8,4,6]: 32 channels, 2x3 */
  CHECK(g && has_type(g, "a", "f32[1,8,4,6]"));
  CHECK(g && has_type(g, "d", "f32[1,2,4,6]"));
  CHECK(g && has_type(g, "s", "f32[1,32,2,3]"));
  graph_free(g);
}

static void test_reduce_norm(void) {
  Graph *g = inferred(
      "graph \"t\" opset 13\ninput %x: f32[2,3,4]\n"
      "const %ax: i64[2] = [0,-1]\nconst %none: i64[0] = []\n"
      "%m = ReduceMean(%x) {axes=[1]}\n%s = ReduceSum(%x, %ax) {keepdims=0}\n"
      "%n = ReduceSum(%x, %none) {noop_with_empty_axes=1}\n%all = ReduceMax(%x) {keepdims=0}\n"
      "%sm = Softmax(%x)\n"
      "const %sc: f32[3] = ones\nconst %bi: f32[3] = zeros\n"
      "input %im: f32[2,3,4,4]\n"
      "%bn, %rm, %rv = BatchNormalization(%im, %sc, %bi, %sc, %sc)\n"
      "output %m\noutput %s\noutput %n\noutput %all\noutput %sm\noutput %bn\n");
  CHECK(g && has_type(g, "m", "f32[2,1,4]"));
  CHECK(g && has_type(g, "s", "f32[3]"));
  CHECK(g && has_type(g, "n", "f32[2,3,4]"));
  CHECK(g && has_type(g, "all", "f32[]"));
  CHECK(g && has_type(g, "sm", "f32[2,3,4]"));
  CHECK(g && has_type(g, "bn", "f32[2,3,4,4]") && has_type(g, "rm", "f32[3]"));
  graph_free(g);
  /* LayerNorm's scale must broadcast to the dims from axis 1, [3,4]: a
     [3] scale does not (3 against the last dim 4). */
  CHECK(fails_once("graph \"t\" opset 17\ninput %x: f32[2,3,4]\nconst %sc: f32[3] = ones\n"
                   "%y = LayerNormalization(%x, %sc) {axis=1}\noutput %y\n"));
  g = inferred("graph \"t\" opset 17\ninput %x: f32[2,3,4]\nconst %sc: f32[3,4] = ones\n"
               "%y, %mean, %isd = LayerNormalization(%x, %sc) {axis=1}\n"
               "%dr, %mask = Dropout(%x)\noutput %y\noutput %dr\n");
  CHECK(g && has_type(g, "y", "f32[2,3,4]") && has_type(g, "mean", "f32[2,1,1]"));
  CHECK(g && has_type(g, "isd", "f32[2,1,1]"));
  CHECK(g && has_type(g, "mask", "bool[2,3,4]"));
  graph_free(g);
  /* Dropout in training mode is random: rejected; a constant false is fine */
  CHECK(fails_once("graph \"t\" opset 13\ninput %x: f32[2]\nconst %r: f32[] = [0.5]\n"
                   "const %on: bool[] = [1]\n%y = Dropout(%x, %r, %on)\noutput %y\n"));
  g = inferred("graph \"t\" opset 13\ninput %x: f32[2]\nconst %r: f32[] = [0.5]\n"
               "const %off: bool[] = [0]\n%y = Dropout(%x, %r, %off)\noutput %y\n");
  CHECK(g && has_type(g, "y", "f32[2]"));
  graph_free(g);
}

/* Yes-or-no attributes are 0 or 1. A flipped bit made keepdims 3, which
   opc took as 1 and ONNX Runtime as 0 (a different output shape); every
   such flag now refuses other values. */
static void test_flags(void) {
  CHECK(fails_with("graph \"t\" opset 13\ninput %x: f32[2,3]\n"
                   "%y = ReduceMax(%x) {axes=[1], keepdims=3} name=\"r\"\noutput %y\n",
                   "node 'r' (ReduceMax): attribute 'keepdims' is 3; it must be 0 or 1"));
  CHECK(fails_with("graph \"t\" opset 13\ninput %x: f32[2,3]\n"
                   "%y = ArgMax(%x) {keepdims=-1}\noutput %y\n",
                   "attribute 'keepdims' is -1; it must be 0 or 1"));
  CHECK(fails_with("graph \"t\" opset 11\ninput %x: f32[2,3]\nconst %k: i64[1] = [2]\n"
                   "%y, %i = TopK(%x, %k) {largest=2}\noutput %y\n",
                   "attribute 'largest' is 2; it must be 0 or 1"));
  CHECK(fails_with("graph \"t\" opset 12\ninput %x: f32[1,1,5]\n"
                   "%y = MaxPool(%x) {kernel_shape=[2], ceil_mode=2}\noutput %y\n",
                   "attribute 'ceil_mode' is 2; it must be 0 or 1"));
  /* 0 and 1 still mean what they say: [2,3] reduced over axis 1 */
  Graph *g = inferred("graph \"t\" opset 13\ninput %x: f32[2,3]\n"
                      "%k = ReduceMax(%x) {axes=[1], keepdims=1}\n"
                      "%d = ReduceMax(%x) {axes=[1], keepdims=0}\noutput %k\noutput %d\n");
  CHECK(g && has_type(g, "k", "f32[2,1]") && has_type(g, "d", "f32[2]"));
  graph_free(g);
}

/* A node whose outputs are all empty has nothing to compute: they become
   empty constants (a batch of 0 once reached cuDNN, which refuses it).
   A node with one non-empty output still runs. */
static void test_empty_outputs(void) {
  Graph *g = inferred("graph \"t\" opset 13\ninput %x: f32[0,3,4,4]\n"
                      "const %w: f32[2,3,3,3] = random\ninput %a: f32[2,0]\n"
                      "input %b: f32[0,5]\n"
                      "%c = Conv(%x, %w)\n%r = Relu(%c)\n%m = MatMul(%a, %b)\n"
                      "output %r\noutput %m\n");
  CHECK(g && has_type(g, "c", "f32[0,2,2,2]") && tensor_is_const(graph_find_tensor(g, "c")));
  CHECK(g && has_type(g, "r", "f32[0,2,2,2]") && tensor_is_const(graph_find_tensor(g, "r")));
  /* [2,0] x [0,5] is a [2,5] of zeros: work for a kernel, not empty */
  CHECK(g && has_type(g, "m", "f32[2,5]") && !tensor_is_const(graph_find_tensor(g, "m")));
  graph_free(g);
}

/* PyTorch's x.view(x.size(0), -1): Shape -> Gather -> Unsqueeze -> Concat
   -> Reshape, which must fold while shapes are inferred. */
static void test_shape_chain(void) {
  Graph *g = inferred("graph \"t\" opset 11\ninput %x: f32[2,3,4,5]\n"
                      "const %zero: i64[] = [0]\nconst %minus1: i64[1] = [-1]\n"
                      "%s = Shape(%x)\n%d0 = Gather(%s, %zero) {axis=0}\n"
                      "%u = Unsqueeze(%d0) {axes=[0]}\n"
                      "%shape = Concat(%u, %minus1) {axis=0}\n"
                      "%y = Reshape(%x, %shape)\n"
                      "%mid = Shape(%x) {start=1, end=-1}\n"
                      "output %y\noutput %mid\n");
  CHECK(g != NULL);
  if (!g)
    return;
  CHECK(has_type(g, "s", "i64[4]") && has_ints(g, "s", (int64_t[]){2, 3, 4, 5}, 4));
  CHECK(has_type(g, "d0", "i64[]") && has_ints(g, "d0", (int64_t[]){2}, 1));
  CHECK(has_type(g, "u", "i64[1]"));
  CHECK(has_ints(g, "shape", (int64_t[]){2, -1}, 2));
  CHECK(has_type(g, "y", "f32[2,60]"));
  /* opset 15 start/end: dims 1..2 */
  CHECK(has_ints(g, "mid", (int64_t[]){3, 4}, 2));
  graph_free(g);
  /* The same with int arithmetic: Mul(d2, d3) and Cast, as newer exports do */
  g = inferred("graph \"t\" opset 13\ninput %x: f32[2,3,4,5]\n"
               "const %i2: i64[1] = [2]\nconst %i3: i64[1] = [3]\nconst %ax: i64[1] = [0]\n"
               "%s = Shape(%x)\n%d2 = Gather(%s, %i2)\n%d3 = Gather(%s, %i3)\n"
               "%p = Mul(%d2, %d3)\n%c = Cast(%p) {to=1}\n%back = Cast(%c) {to=7}\n"
               "%d01 = Slice(%s, %ax, %i2)\n%shape = Concat(%d01, %back) {axis=0}\n"
               "%y = Reshape(%x, %shape)\noutput %y\n");
  CHECK(g && has_ints(g, "p", (int64_t[]){20}, 1));
  CHECK(g && has_type(g, "c", "f32[1]") && has_floats(g, "c", (float[]){20}, 1, 0));
  CHECK(g && has_type(g, "y", "f32[2,3,20]"));
  graph_free(g);
}

static void test_generators(void) {
  Graph *g = inferred(
      "graph \"t\" opset 13\n"
      "const %shape: i64[2] = [2,3]\n"
      "const %s: i64[] = [0]\nconst %l: i64[] = [10]\nconst %d: i64[] = [3]\n"
      "const %fs: f32[] = [1.0]\nconst %fl: f32[] = [2.0]\nconst %fd: f32[] = [0.3]\n"
      "%c = ConstantOfShape(%shape) {value=tensor(i64[1]=[7])}\n"
      "%z = ConstantOfShape(%shape)\n"
      "%r = Range(%s, %l, %d)\n%rf = Range(%fs, %fl, %fd)\n"
      "%k = Constant() {value=tensor(f32[2]=[1.5,-2.0])}\n"
      "%ki = Constant() {value_ints=[4,5,6]}\n"
      "output %c\noutput %z\noutput %r\noutput %rf\noutput %k\noutput %ki\n");
  CHECK(g != NULL);
  if (!g)
    return;
  CHECK(has_type(g, "c", "i64[2,3]") && has_ints(g, "c", (int64_t[]){7, 7, 7, 7, 7, 7}, 6));
  CHECK(has_type(g, "z", "f32[2,3]") && has_floats(g, "z", (float[]){0, 0, 0, 0, 0, 0}, 6, 0));
  /* 0,3,6,9 */
  CHECK(has_type(g, "r", "i64[4]") && has_ints(g, "r", (int64_t[]){0, 3, 6, 9}, 4));
  /* ceil((2 - 1) / 0.3) = 4: 1.0, 1.3, 1.6, 1.9 */
  CHECK(has_type(g, "rf", "f32[4]") &&
        has_floats(g, "rf", (float[]){1.0f, 1.3f, 1.6f, 1.9f}, 4, 1e-6f));
  CHECK(has_type(g, "k", "f32[2]") && has_floats(g, "k", (float[]){1.5f, -2.0f}, 2, 0));
  CHECK(has_type(g, "ki", "i64[3]") && has_ints(g, "ki", (int64_t[]){4, 5, 6}, 3));
  graph_free(g);
}

static void test_errors(void) {
  /* wrong arity */
  CHECK(fails_once("graph \"t\"\ninput %x: f32[2]\n%y = Relu(%x, %x)\noutput %y\n"));
  CHECK(fails_once("graph \"t\"\ninput %x: f32[2]\n%y = Add(%x)\noutput %y\n"));
  /* a type the operator's ONNX constraint leaves out */
  CHECK(fails_once("graph \"t\"\ninput %x: u16[2]\n%y = Relu(%x)\noutput %y\n"));
  /* every numeric type has run-time storage now: int16 data and a Cast to
     uint16 infer (the backend says which kernels take them) */
  Graph *typed = parse("graph \"t\"\ninput %x: i16[2]\n%y = Add(%x, %x)\n"
                       "%z = Cast(%y) {to=4}\noutput %z\n");
  CHECK(typed && graph_infer_shapes(typed) && has_type(typed, "z", "u16[2]"));
  graph_free(typed);
  /* inconsistent shapes */
  CHECK(fails_once("graph \"t\"\ninput %a: f32[2,3]\ninput %b: f32[4]\n"
                   "%y = Add(%a, %b)\noutput %y\n"));
  CHECK(fails_once("graph \"t\" opset 13\ninput %a: f32[2,3]\ninput %b: f32[2,4]\n"
                   "%y = Concat(%a, %b) {axis=0}\noutput %y\n"));
  /* out-of-range axes */
  CHECK(fails_once("graph \"t\" opset 13\ninput %a: f32[2,3]\n"
                   "%y = Concat(%a, %a) {axis=2}\noutput %y\n"));
  CHECK(fails_once("graph \"t\" opset 13\ninput %a: f32[2,3]\n"
                   "%y = Softmax(%a) {axis=-3}\noutput %y\n"));
  CHECK(fails_once("graph \"t\" opset 11\ninput %a: f32[2,3]\n"
                   "%y = Transpose(%a) {perm=[0,0]}\noutput %y\n"));
  /* GridSample: the grid's shape and batch, the modes, 5-d cubic;
     AffineGrid: theta's shape, a size known now; Det: square, at most
     32 x 32 */
  CHECK(fails_once("graph \"t\" opset 16\ninput %x: f32[2,3,4,5]\ninput %g: f32[1,6,7,2]\n"
                   "%y = GridSample(%x, %g)\noutput %y\n"));
  CHECK(fails_once("graph \"t\" opset 16\ninput %x: f32[2,3,4,5]\ninput %g: f32[2,6,7,3]\n"
                   "%y = GridSample(%x, %g)\noutput %y\n"));
  CHECK(fails_once("graph \"t\" opset 20\ninput %x: f32[1,3,4,5,6]\ninput %g: f32[1,2,3,4,3]\n"
                   "%y = GridSample(%x, %g) {mode=\"cubic\"}\noutput %y\n"));
  CHECK(fails_once("graph \"t\" opset 20\ninput %t: f32[2,2,4]\nconst %s: i64[4] = [2,1,4,5]\n"
                   "%y = AffineGrid(%t, %s)\noutput %y\n"));
  CHECK(fails_once("graph \"t\" opset 20\ninput %t: f32[2,2,3]\ninput %s: i64[4]\n"
                   "%y = AffineGrid(%t, %s)\noutput %y\n"));
  CHECK(fails_once("graph \"t\" opset 11\ninput %x: f32[2,3,4]\n%y = Det(%x)\noutput %y\n"));
  CHECK(fails_once("graph \"t\" opset 11\ninput %x: f32[33,33]\n%y = Det(%x)\noutput %y\n"));
  Graph *gs = inferred("graph \"t\" opset 20\ninput %x: f32[2,3,4,5]\ninput %g: f32[2,6,7,2]\n"
                       "%y = GridSample(%x, %g) {mode=\"bicubic\", padding_mode=\"reflection\"}\n"
                       "output %y\n");
  CHECK(gs && gs->nodes[0]->p.grid.mode == 2 && gs->nodes[0]->p.grid.padding == 2 &&
        gs->nodes[0]->out[0]->dims[1] == 3 && gs->nodes[0]->out[0]->dims[3] == 7);
  if (gs)
    graph_free(gs);
  /* ReverseSequence: axes 0 and 1 one each, a length per batch, lengths
     known now within the time axis */
  CHECK(fails_once("graph \"t\" opset 13\ninput %a: f32[4,3]\ninput %l: i64[3]\n"
                   "%y = ReverseSequence(%a, %l) {time_axis=1, batch_axis=1}\noutput %y\n"));
  CHECK(fails_once("graph \"t\" opset 13\ninput %a: f32[4,3]\ninput %l: i64[4]\n"
                   "%y = ReverseSequence(%a, %l)\noutput %y\n"));
  CHECK(fails_once("graph \"t\" opset 13\ninput %a: f32[4,3]\nconst %l: i64[3] = [1, 5, 2]\n"
                   "%y = ReverseSequence(%a, %l)\noutput %y\n"));
  Graph *rs = inferred("graph \"t\" opset 13\ninput %a: f32[4,3]\ninput %l: i64[4]\n"
                       "%y = ReverseSequence(%a, %l) {time_axis=1, batch_axis=0}\noutput %y\n");
  CHECK(rs && rs->nodes[0]->p.reverse_sequence.time_axis == 1 &&
        rs->nodes[0]->out[0]->rank == 2 && rs->nodes[0]->out[0]->dims[0] == 4);
  if (rs)
    graph_free(rs);
  /* TfIdfVectorizer: a known mode, lengths 1 <= min <= max, ngram_counts
     starting runs of whole n-grams in the pool, one index per n-gram, one
     weight per n-gram; [N, C] gives [N, columns] in float */
#define TFIDF(attrs) ("graph \"t\" opset 9\ninput %a: i64[2,6]\n%y = TfIdfVectorizer(%a) {" attrs \
                      "}\noutput %y\n")
  CHECK(fails_once(TFIDF("mode=\"TFX\", min_gram_length=1, max_gram_length=2, "
                         "ngram_counts=[0,2], ngram_indexes=[0,1,2], pool_int64s=[2,3,5,6]")));
  CHECK(fails_once(TFIDF("mode=\"TF\", min_gram_length=2, max_gram_length=1, "
                         "ngram_counts=[0,2], ngram_indexes=[0,1,2], pool_int64s=[2,3,5,6]")));
  CHECK(fails_once(TFIDF("mode=\"TF\", min_gram_length=1, max_gram_length=2, "
                         "ngram_counts=[0,3], ngram_indexes=[0,1,2], pool_int64s=[2,3,5,6]")));
  CHECK(fails_once(TFIDF("mode=\"TF\", min_gram_length=1, max_gram_length=2, "
                         "ngram_counts=[0,2], ngram_indexes=[0,1], pool_int64s=[2,3,5,6]")));
  CHECK(fails_once(TFIDF("mode=\"TF\", min_gram_length=1, max_gram_length=2, "
                         "ngram_counts=[0,2], ngram_indexes=[0,1,2,3], pool_int64s=[2,3,5,6]")));
  CHECK(fails_once(TFIDF("mode=\"TFIDF\", min_gram_length=1, max_gram_length=2, "
                         "ngram_counts=[0,2], ngram_indexes=[0,1,2], pool_int64s=[2,3,5,6], "
                         "weights=[1.0,2.0]")));
  Graph *tf = inferred(TFIDF("mode=\"IDF\", min_gram_length=1, max_gram_length=2, "
                             "ngram_counts=[0,2], ngram_indexes=[0,4,2], pool_int64s=[2,3,5,6]"));
  CHECK(tf && has_type(tf, "y", "f32[2,5]") && tf->nodes[0]->p.tfidf.grams == 3 &&
        tf->nodes[0]->p.tfidf.table[7] == 2);
  if (tf)
    graph_free(tf);
#undef TFIDF
  /* Trilu's k computed at run time must still be one value (a shape the
     compiler knows), and such a k is accepted */
  CHECK(fails_once("graph \"t\" opset 14\ninput %a: f32[3,3]\ninput %k: i64[2]\n"
                   "%y = Trilu(%a, %k)\noutput %y\n"));
  Graph *trilu = inferred("graph \"t\" opset 14\ninput %a: f32[3,3]\ninput %k: i64[1]\n"
                          "%y = Trilu(%a, %k)\noutput %y\n");
  CHECK(trilu != NULL);
  if (trilu) {
    CHECK(trilu->nodes[0]->p.trilu.k_at_run_time);
    graph_free(trilu);
  }
  /* an error is reported once: the readers of a failed node stay quiet */
  CHECK(fails_once("graph \"t\"\ninput %a: f32[2,3]\ninput %b: f32[4]\n"
                   "%y = Add(%a, %b)\n%z = Relu(%y)\n%w = Relu(%z)\noutput %w\n"));
  /* a cycle */
  CHECK(fails_once("graph \"t\"\ninput %a: f32[2]\n%b = Add(%a, %c)\n%c = Relu(%b)\n"
                   "output %c\n"));
  /* Broadcast shapes where the first input is the smaller one */
  Graph *g = inferred("graph \"t\"\ninput %a: f32[3,1]\ninput %b: f32[2,1,4]\n"
                      "%y = Add(%a, %b)\n%z = Sum(%a, %b, %a)\n%p = PRelu(%b, %a) \noutput %y\n"
                      "output %z\n");
  CHECK(g == NULL); /* PRelu's slope [3,1] does not broadcast to [2,1,4] */
  g = inferred("graph \"t\"\ninput %a: f32[3,1]\ninput %b: f32[2,1,4]\n"
               "%y = Add(%a, %b)\n%z = Sum(%a, %b, %a)\noutput %y\noutput %z\n");
  CHECK(g && has_type(g, "y", "f32[2,3,4]") && has_type(g, "z", "f32[2,3,4]"));
  graph_free(g);
}

/* LSTM, GRU and RNN: shapes by the spec's tables, for both layouts, and
   each malformed input or attribute refused with its name. */
static void test_recurrent(void) {
  /* seq 5, batch 3, input 4, hidden 6, bidirectional: Y [5,2,3,6], the
     states [2,3,6]; layout 1 swaps seq and batch in X and Y ([3,5,2,6])
     and dirs and batch in the states ([3,2,6]). */
  const char *head = "graph \"t\" opset 14\ninput %x: f32[5,3,4]\ninput %xb: f32[3,5,4]\n"
                     "const %w: f32[2,24,4] = random\nconst %r: f32[2,24,6] = random\n"
                     "const %wg: f32[1,18,4] = random\nconst %rg: f32[1,18,6] = random\n";
  char text[2048];
  snprintf(text, sizeof text,
           "%s%%y, %%yh, %%yc = LSTM(%%x, %%w, %%r) {direction=\"bidirectional\", hidden_size=6}\n"
           "%%by, %%byh = LSTM(%%xb, %%w, %%r) {direction=\"bidirectional\", layout=1}\n"
           "_, %%gh = GRU(%%x, %%wg, %%rg) {direction=\"reverse\"}\n"
           "output %%y\noutput %%yh\noutput %%yc\noutput %%by\noutput %%byh\noutput %%gh\n", head);
  Graph *g = inferred(text);
  CHECK(g && has_type(g, "y", "f32[5,2,3,6]") && has_type(g, "yh", "f32[2,3,6]"));
  CHECK(g && has_type(g, "yc", "f32[2,3,6]") && has_type(g, "by", "f32[3,5,2,6]"));
  CHECK(g && has_type(g, "byh", "f32[3,2,6]") && has_type(g, "gh", "f32[1,3,6]"));
  graph_free(g);
  const struct {
    const char *node, *want;
  } bad[] = {
      {"%y = LSTM(%x, %wg, %rg)", "input W 'wg' is f32[1,18,4], expected shape [1,24,4]"},
      {"%y = GRU(%x, %wg, %rg) {hidden_size=5}", "input W 'wg' is f32[1,18,4], expected shape [1,15,4]"},
      {"%y = GRU(%x, %wg, %r)", "input R 'r' is f32[2,24,6], expected shape [1,18,6]"},
      {"%y = GRU(%x, %wg, %rg, %x)", "input B 'x' is f32[5,3,4], expected shape [1,36]"},
      {"%y = GRU(%x, %wg, %rg, _, _, %x)", "input initial_h 'x' is f32[5,3,4], expected shape [1,3,6]"},
      {"%y = GRU(%xb, %wg, %rg) {layout=2}", "attribute 'layout' is 2; it must be 0 or 1"},
      {"%y = GRU(%x, %wg, %rg) {direction=\"sideways\"}", "unknown direction 'sideways'"},
      {"%y = GRU(%x, %wg, %rg) {activations=[\"Sigmoid\"]}",
       "attribute 'activations' must list 2 function names"},
      {"%y = GRU(%x, %wg, %rg) {activations=[\"Sigmoid\",\"Gelu\"]}",
       "unknown activation function 'Gelu'"},
      {"%y = GRU(%x, %wg, %rg) {clip=-1.0}", "attribute 'clip' is -1; it must be positive"},
      {"%y = GRU(%x, %wg, %rg) {hidden_size=0}", "attribute 'hidden_size' is 0"},
      {"%y = GRU(%x, %wg, %rg) {linear_before_reset=3}", "attribute 'linear_before_reset' is 3"},
      {"%y = LSTM(%x, %w, %r) {direction=\"bidirectional\", input_forget=2}",
       "attribute 'input_forget' is 2"},
      {"%y = GRU(%m, %wg, %rg)", "input 'm' must have rank 3, has 2"},
      {"%y = GRU(%x, %wg, %rg, _, %len)", "sequence_lens[1] is 6, outside [0, 5]"},
      {"%y = GRU(%x, %wg, %rg, _, %short)", "input sequence_lens 'short' is i32[2], expected shape [3]"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(text, sizeof text,
             "%sconst %%len: i32[3] = [5,6,1]\nconst %%short: i32[2] = [1,1]\n"
             "const %%m: f32[3,4] = random\n%s name=\"rec\"\n"
             "output %%y\n", head, bad[i].node);
    CHECK(fails_with(text, bad[i].want));
    CHECK(fails_once(text));
  }
}

/* The limits of ir.h: checked when an output's shape is set, without
   wrapping, before anything is allocated (docs/reliability.md). */
static void test_limits(void) {
  /* 2^21 * 2^21 = 2^42 elements */
  CHECK(fails_once("graph \"t\" opset 13\ninput %x: f32[1,1]\nconst %s: i64[2] = [2097152,2097152]\n"
                   "%y = Expand(%x, %s)\noutput %y\n"));
  /* 2^31 four times: 2^124, which an unchecked product wraps to 0 */
  CHECK(fails_once("graph \"t\" opset 13\ninput %x: f32[1,1,1,1]\n"
                   "const %s: i64[4] = [2147483648,2147483648,2147483648,2147483648]\n"
                   "%y = Expand(%x, %s)\noutput %y\n"));
  /* exactly at the limit, and one past it */
  Graph *g = inferred("graph \"t\" opset 13\ninput %x: u8[1]\nconst %s: i64[1] = [2147483647]\n"
                      "%y = Expand(%x, %s)\noutput %y\n");
  CHECK(g && has_type(g, "y", "u8[2147483647]"));
  graph_free(g);
  CHECK(fails_once("graph \"t\" opset 13\ninput %x: u8[1]\nconst %s: i64[1] = [2147483648]\n"
                   "%y = Expand(%x, %s)\noutput %y\n"));
  /* empty: no elements, but its other dims still make strides, whose byte
     sizes must not wrap: up to 2^59 (shape_fits) */
  g = inferred("graph \"t\" opset 13\ninput %x: f32[1,1,1]\n"
               "const %s: i64[3] = [576460752303423488,1,0]\n%y = Expand(%x, %s)\noutput %y\n");
  CHECK(g && has_type(g, "y", "f32[576460752303423488,1,0]"));
  graph_free(g);
  CHECK(fails_once("graph \"t\" opset 13\ninput %x: f32[1,1,1]\n"
                   "const %s: i64[3] = [4611686018427387904,1,0]\n%y = Expand(%x, %s)\n"
                   "output %y\n"));
  CHECK(fails_once("graph \"t\" opset 13\ninput %x: f32[1,1,1]\n"
                   "const %s: i64[3] = [4611686018427387904,4,0]\n%y = Expand(%x, %s)\n"
                   "output %y\n"));
  /* 2^28 elements: under the tensor limit, over the folding limit; a kind
     without kernels (HannWindow) must fold, so this is an error;
     ConstantOfShape, which has one (a fill), runs instead */
  CHECK(fails_once("graph \"t\" opset 17\nconst %s: i64[] = [268435456]\n"
                   "%y = HannWindow(%s)\noutput %y\n"));
  g = inferred("graph \"t\" opset 13\ninput %x: f32[1,1]\nconst %s: i64[2] = [16384,16384]\n"
               "%c = ConstantOfShape(%s)\n%y = Add(%x, %c)\noutput %y\n");
  CHECK(g && has_type(g, "c", "f32[16384,16384]"));
  graph_free(g);
  /* a lower program limit lowers the tensor byte limit: f32[512] is 2048 bytes */
  g = parse("graph \"t\"\ninput %x: f32[1]\nconst %s: i64[1] = [512]\n"
            "%y = Expand(%x, %s)\noutput %y\n");
  CHECK(g != NULL);
  int before = ir_error_count();
  if (g) {
    g->max_memory = 1024;
    CHECK(!graph_infer_shapes(g) && one_error(before));
  }
  graph_free(g);

  int64_t count;
  CHECK(shape_numel(2, (int64_t[]){(int64_t)1 << 62, 4}, &count) == false);
  CHECK(shape_numel(3, (int64_t[]){(int64_t)1 << 62, 1, 0}, &count) && count == 0);
  CHECK(shape_numel(3, (int64_t[]){(int64_t)1 << 62, 4, 0}, &count) == false);
  CHECK(shape_numel(1, (int64_t[]){-1}, &count) == false);
  CHECK(shape_numel(0, NULL, &count) && count == 1);

  char name[LIMIT_NAME_BYTES + 2];
  memset(name, 'n', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  before = ir_error_count();
  CHECK(!check_name_length(NULL, "a name", name) && one_error(before));
  name[LIMIT_NAME_BYTES] = '\0';
  CHECK(check_name_length(NULL, "a name", name) && ir_error_count() == before + 1);
}

/* RoiAlign's shape and its coordinate mode's default: output_half_pixel
   in opset 10, which has no attribute, half_pixel from opset 16. */
static void test_roi_align(void) {
  static const char *const body = "input %x: f32[2,3,8,8]\ninput %r: f32[5,4]\n"
                                  "const %b: i64[5] = zeros\n"
                                  "%y = RoiAlign(%x, %r, %b) {output_height=2, output_width=3} "
                                  "name=\"ra\"\noutput %y\n";
  char text[512];
  for (int opset = 10; opset <= 16; opset += 6) {
    snprintf(text, sizeof text, "graph \"t\" opset %d\n%s", opset, body);
    Graph *g = inferred(text);
    CHECK(g && has_type(g, "y", "f32[5,3,2,3]"));
    CHECK(g && node_named(g, "ra")->p.roi_align.half_pixel == (opset == 16));
    graph_free(g);
  }
  /* batch_indices past the batch, when known */
  CHECK(fails_with("graph \"t\" opset 16\ninput %x: f32[2,3,8,8]\ninput %r: f32[1,4]\n"
                   "const %b: i64[1] = [2]\n%y = RoiAlign(%x, %r, %b)\noutput %y\n",
                   "batch_indices[0] is 2; the input holds 2 images"));
}

int main(void) {
  test_conv_same_padding();
  test_conv_explicit();
  test_pool();
  test_roi_align();
  test_pool_pads();
  test_conv_transpose();
  test_reshape();
  test_gather();
  test_slice();
  test_matmul_gemm();
  test_resize();
  test_split_squeeze();
  test_pad_misc();
  test_reduce_norm();
  test_flags();
  test_empty_outputs();
  test_shape_chain();
  test_generators();
  test_errors();
  test_recurrent();
  test_limits();
  return finish("test_infer");
}
