/*
 * test_formulas.c - the runtime's hand-vectorised activations against the
 * scalar formulas of scalar/scalar.h, over special values: NaN, the
 * infinities, the zeros, subnormals, the largest floats, and each
 * activation's breakpoints (HardSwish's +-3, HardSigmoid's +-2.5 for the
 * parameters below, Mish's softplus cut at 20, exp_inline's clamps at -104
 * and 89, e^x's overflow near 88.7).
 *
 * The vector paths checked:
 *   - dnn.h's exp16, sigmoid16 and swish16 (GCC vectors), directly and as
 *     act_row uses them for every activation mode;
 *   - conv_tile.c's AVX-512 epilogue (vector_activate), through
 *     tile_multiply_store with a filter of ones; only on a CPU with
 *     AVX-512, and skipped (said so) on others.
 * NaN must stay NaN and an infinity the same infinity; other values may
 * differ from the formula by rounding, 4 ulp at most, where it has no
 * cancellation. HardSwish and HardSigmoid cancel near their breakpoints
 * (x / 6 + 1/2 near 0), where contracting to FMA or not (GCC chooses per
 * loop) moves the result by up to an ulp of the terms: there they may
 * differ by 4 ulp of 1, times |x| (and a zero may come out as such a
 * small value).
 */
#include <float.h>

#include "dnn.h"
#include "testutil.h"

static const float specials[] = {
    NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f,
    1e-45f, -1e-45f, 1.1754942e-38f, -1.1754942e-38f, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX,
    3.0f, -3.0f, 2.9999998f, -2.9999998f, 3.0000002f, -3.0000002f,
    2.5f, -2.5f, 2.4999998f, -2.5000002f,
    20.0f, 19.999998f, 20.000002f, -20.0f,
    88.7f, 88.8f, -88.8f, 89.0f, 89.5f, -103.9f, -104.0f, -104.5f, -150.0f, 150.0f,
    1.0f, -1.0f, 0.5f, -0.5f, 1e-8f, -1e-8f, 6.0f, -6.0f, 0.1f, -0.1f, 1e30f, -1e30f,
};
#define NSPECIAL ((int)(sizeof specials / sizeof specials[0]))

static float ulp(float v) {
  v = fabsf(v);
  return nextafterf(v < FLT_MIN ? FLT_MIN : v, INFINITY) - (v < FLT_MIN ? FLT_MIN : v);
}

/* got against the formula's want for input x; zero_sign: whether the
 * sign of a zero result counts; slack: what cancellation may add. */
static void check(const char *what, float x, float got, float want, bool zero_sign, float slack) {
  bool ok;
  if (isnan(want))
    ok = isnan(got);
  else if (isinf(want))
    ok = got == want;
  else if (want == 0.0f && slack == 0)
    ok = got == want && (!zero_sign || signbit(got) == signbit(want));
  else
    ok = !isnan(got) && !isinf(got) && fabsf(got - want) <= 4 * ulp(want) + slack;
  if (!ok)
    fail("%s(%a = %g): %a (%g), the formula gives %a (%g)", what, x, x, got, got, want, want);
}

/* specials, then a copy of them shifted by one place, so that each value
 * is met both in a vector of 16 and in act_row's scalar tail. */
static int inputs(float *x) {
  int n = 0;
  for (int i = 0; i < NSPECIAL; i++)
    x[n++] = specials[i];
  for (int i = 0; i < NSPECIAL; i++)
    x[n++] = specials[(i + 1) % NSPECIAL];
  return n;
}

static void check_vectors16(void) {
  float x[2 * NSPECIAL + 16];
  int n = inputs(x);
  for (int i = 0; i + 16 <= n; i += 16) {
    F16 v = *(const F16 *)(x + i);
    F16 e = exp16(v), s = sigmoid16(v), w = swish16(v, 1.7f), w1 = swish16(v, 1.0f);
    for (int k = 0; k < 16; k++) {
      check("exp16", x[i + k], e[k], exp_inline(x[i + k]), true, 0);
      check("sigmoid16", x[i + k], s[k], opc_sigmoid_of(x[i + k]), true, 0);
      check("swish16 (beta 1.7)", x[i + k], w[k], opc_swish_of(x[i + k], 1.7f), true, 0);
      check("swish16 (beta 1)", x[i + k], w1[k], opc_silu_of(x[i + k]), true, 0);
    }
  }
}

/* The slack of check() for mode at x. */
static float slack(int mode, float x) {
  bool cancels = mode == KERNEL_ACT_HARD_SWISH || mode == KERNEL_ACT_HARD_SIGMOID;
  return cancels && fabsf(x) < 1e6f ? 4 * FLT_EPSILON * fmaxf(fabsf(x), 1.0f) : 0.0f;
}

/* Every mode act_row knows, with parameters that put breakpoints among
 * the specials. */
static int modes(Act *acts, const char **names) {
  int n = 0;
  acts[n] = (Act){.mode = CUDNN_ACTIVATION_RELU}, names[n++] = "relu";
  acts[n] = (Act){.mode = CUDNN_ACTIVATION_CLIPPED_RELU, .coef = 6}, names[n++] = "clipped relu";
  acts[n] = (Act){.mode = CUDNN_ACTIVATION_SIGMOID}, names[n++] = "sigmoid";
  acts[n] = (Act){.mode = CUDNN_ACTIVATION_TANH}, names[n++] = "tanh";
  acts[n] = (Act){.mode = CUDNN_ACTIVATION_ELU, .coef = 0.7f}, names[n++] = "elu";
  acts[n] = (Act){.mode = CUDNN_ACTIVATION_SWISH, .swish_beta = 1.7f}, names[n++] = "swish";
  acts[n] = (Act){.mode = CUDNN_ACTIVATION_IDENTITY}, names[n++] = "identity";
  static const char *const codes[] = {
#define CODE_NAME(NAME, name, params) [OPC_ACT_##NAME] = #name,
      OPC_ACTIVATIONS(CODE_NAME)
#undef CODE_NAME
  };
  for (int code = OPC_ACT_NONE + 1; code < OPC_ACT_COUNT; code++) {
    acts[n] = (Act){.mode = (cudnnActivationMode_t)(KERNEL_ACT_BASE + code), .coef = 0.2f,
                    .offset = 0.5f};
    if (code == OPC_ACT_CLIP)
      acts[n].coef = -3, acts[n].offset = 20;
    names[n++] = codes[code];
  }
  return n;
}

/* act_row, alpha 1 and beta 0, against act_apply (the formulas). Its
 * scalar loops add beta y only when beta is not 0, but add a 0 instead,
 * which makes -0 +0: the sign of zeros is not compared here. */
static void check_act_row(void) {
  Act acts[32];
  const char *names[32];
  int nmodes = modes(acts, names);
  float x[2 * NSPECIAL], y[2 * NSPECIAL];
  int n = inputs(x);
  for (int m = 0; m < nmodes; m++) {
    act_row(&acts[m], x, y, n, 1.0f, 0.0f);
    char what[64];
    snprintf(what, sizeof what, "act_row %s", names[m]);
    for (int i = 0; i < n; i++)
      check(what, x[i], y[i], act_apply(&acts[m], x[i]), false, slack((int)acts[m].mode, x[i]));
  }
}

/* conv_tile.c's epilogue: a 1x1 filter of ones over one row of specials,
 * for each mode TileStore takes; a -0 input is +0 after the bias. */
static void check_tiles(void) {
  if (!tile_available()) {
    printf("tiles: no AVX-512 (or OPC_KERNEL_ISA forbids it): conv_tile.c's vectors not checked\n");
    return;
  }
  const Act acts[] = {
      {.mode = CUDNN_ACTIVATION_IDENTITY},
      {.mode = CUDNN_ACTIVATION_RELU},
      {.mode = CUDNN_ACTIVATION_CLIPPED_RELU, .coef = 6},
      {.mode = (cudnnActivationMode_t)KERNEL_ACT_HARD_SWISH},
      {.mode = CUDNN_ACTIVATION_SWISH, .swish_beta = 1.7f},
      {.mode = CUDNN_ACTIVATION_SIGMOID},
  };
  static float ones[TILE_ROWS], out[TILE_ROWS][TILE_COLS];
  const float *w[TILE_ROWS];
  for (int m = 0; m < TILE_ROWS; m++)
    ones[m] = 1.0f, w[m] = &ones[m];
  for (int from = 0; from < NSPECIAL; from += TILE_COLS) {
    int cols = NSPECIAL - from < TILE_COLS ? NSPECIAL - from : TILE_COLS;
    const float *rows[1] = {specials + from};
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
      TileStore st = {.alpha = 1, .alpha2 = 0, .mode = (int)acts[a].mode, .wq = cols, .ow = cols};
      st.coef = acts[a].mode == CUDNN_ACTIVATION_SWISH ? acts[a].swish_beta : acts[a].coef;
      for (int m = 0; m < TILE_ROWS; m++)
        st.y[m] = out[m];
      tile_multiply_store(w, 1, rows, 0, 0, cols, &st);
      char what[64];
      snprintf(what, sizeof what, "tile epilogue, mode %d", (int)acts[a].mode);
      for (int m = 0; m < TILE_ROWS; m++)
        for (int j = 0; j < cols; j++) {
          float v = specials[from + j] * 1.0f + 0.0f;
          check(what, specials[from + j], out[m][j], act_apply(&acts[a], v), true,
                slack((int)acts[a].mode, v));
        }
    }
  }
  printf("tiles: conv_tile.c's vectors checked\n");
}

int main(void) {
  check_vectors16();
  check_act_row();
  check_tiles();
  return finish("test_formulas");
}
