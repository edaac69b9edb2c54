/*
 * bench_rnn_steps.c - opc_rnn_steps, the kernel that runs every step of an
 * LSTM, GRU or RNN, with R as ONNX gives it (a dot product per row) against
 * R column by column as the CPU target stores it (backend/kernels_recurrent.c,
 * pack_columns: the rows' sums in vector lanes), one thread, in one run:
 * the evidence for that layout.
 *
 *   cc -O2 bench/cpu/bench_rnn_steps.c -o bench_rnn_steps -Iruntime/kernels \
 *      -Wl,--start-group build/runtime/libopcrt*.a -Wl,--end-group \
 *      -lm -lmvec -ldl -lpthread
 *   ./bench_rnn_steps
 *
 * The kernel is the AVX-512 build's (opc_rnn_steps_avx512), called as the
 * runtime calls it, one part. Each shape runs both layouts once untimed,
 * then alternately in rounds of 200 launches, and the best round of each
 * is reported, with the last state of both, which must be equal to within
 * rounding.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opc_kargs.h"

void opc_rnn_steps_avx512(const struct opc_kargs a, int part, int nparts);

enum { ROUNDS = 7, LAUNCHES = 200 };

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

typedef struct Shape {
  const char *name;
  int kind; /* 0 RNN, 1 GRU, 2 LSTM: opc_rnn_steps's i[0] */
  long hidden, seq;
} Shape;

/* The launch's arguments, as kernels_recurrent.c's rnn_steps_launch sets
   them for one direction and one batch entry, with R's strides given. */
static struct opc_kargs steps_args(const Shape *s, const float *r, long row_stride,
                                   long column_stride, const float *bias, float *scratch,
                                   long scratch_floats) {
  struct opc_kargs a;
  memset(&a, 0, sizeof a);
  long rows = (s->kind == 2 ? 4 : s->kind == 1 ? 3 : 1) * s->hidden;
  a.x[1] = r;
  a.x[2] = bias;
  a.x_extent[1] = s->hidden * (row_stride == 1 ? column_stride : rows);
  a.x_extent[2] = 2 * rows;
  a.y = scratch;
  a.y_extent = scratch_floats;
  a.n = 256;
  a.rank = 1;
  a.dims[0] = 256;
  a.i[0] = s->kind;
  a.i[1] = s->hidden;
  a.i[2] = 1; /* batch */
  a.i[3] = s->seq;
  a.i[4] = 1; /* directions */
  a.i[6] = row_stride;
  a.i[7] = column_stride;
  a.i[8] = 2; /* sigmoid, tanh, tanh */
  a.i[9] = 1;
  a.i[10] = 1;
  a.i[11] = 1;
  a.i[12] = s->kind == 1; /* GRU's linear_before_reset */
  a.i[15] = scratch_floats;
  return a;
}

/* The best round's microseconds per launch; the last state's first value
   into *state. */
static double best_round(const struct opc_kargs *a, float *scratch, long scratch_floats,
                         const float *initial, const Shape *s, float *state) {
  double best = 1e30;
  for (int round = 0; round < ROUNDS; round++) {
    memcpy(scratch, initial, sizeof(float) * (size_t)scratch_floats);
    double start = now_us();
    for (int i = 0; i < LAUNCHES; i++)
      opc_rnn_steps_avx512(*a, 0, 1);
    double us = (now_us() - start) / LAUNCHES;
    if (us < best)
      best = us;
  }
  long rows = (s->kind == 2 ? 4 : s->kind == 1 ? 3 : 1) * s->hidden;
  *state = scratch[s->seq * rows + s->seq * 2 * s->hidden];
  return best;
}

int main(void) {
  const Shape shapes[] = {
      {"GRU-KWS's GRU", 1, 64, 49},     {"LSTM, 128 units", 2, 128, 49},
      {"GRU, 128 units", 1, 128, 49},   {"LSTM, 256 units", 2, 256, 49},
      {"GRU, 256 units", 1, 256, 49},   {"RNN, 70 units", 0, 70, 81},
  };
  printf("| shape | hidden | steps | R per row, us | R by columns, us | ratio |\n");
  printf("|---|---:|---:|---:|---:|---:|\n");
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    const Shape *s = &shapes[k];
    long rows = (s->kind == 2 ? 4 : s->kind == 1 ? 3 : 1) * s->hidden, ld = rows + 16;
    long scratch_floats = s->seq * rows + (s->seq + 1) * 2 * s->hidden + rows + s->hidden;
    float *r = malloc(sizeof(float) * (size_t)(rows * s->hidden));
    float *columns = calloc((size_t)(ld * s->hidden), sizeof(float));
    float *bias = malloc(sizeof(float) * (size_t)(2 * rows));
    float *scratch = malloc(sizeof(float) * (size_t)scratch_floats);
    float *initial = malloc(sizeof(float) * (size_t)scratch_floats);
    if (!r || !columns || !bias || !scratch || !initial) {
      fprintf(stderr, "bench_rnn_steps: out of memory\n");
      return 1;
    }
    /* Weights of a trained layer's size (about 1 / sqrt(hidden)), and
       gate inputs that keep the state moving. */
    for (long i = 0; i < rows * s->hidden; i++)
      r[i] = (float)sin(0.7 * (double)i) / sqrtf((float)s->hidden);
    for (long row = 0; row < rows; row++)
      for (long c = 0; c < s->hidden; c++)
        columns[c * ld + row] = r[row * s->hidden + c];
    for (long i = 0; i < 2 * rows; i++)
      bias[i] = 0.01f * (float)(i % 7);
    for (long i = 0; i < scratch_floats; i++)
      initial[i] = 0.5f * (float)sin(0.37 * (double)i);
    struct opc_kargs by_rows = steps_args(s, r, s->hidden, 1, bias, scratch, scratch_floats);
    struct opc_kargs by_columns = steps_args(s, columns, 1, ld, bias, scratch, scratch_floats);
    opc_rnn_steps_avx512(by_rows, 0, 1);
    opc_rnn_steps_avx512(by_columns, 0, 1);
    double rows_us = 1e30, columns_us = 1e30;
    float state_rows = 0, state_columns = 0;
    for (int pass = 0; pass < 3; pass++) { /* alternately */
      double t = best_round(&by_rows, scratch, scratch_floats, initial, s, &state_rows);
      rows_us = t < rows_us ? t : rows_us;
      t = best_round(&by_columns, scratch, scratch_floats, initial, s, &state_columns);
      columns_us = t < columns_us ? t : columns_us;
    }
    if (fabsf(state_rows - state_columns) > 1e-4f * (1.0f + fabsf(state_rows))) {
      fprintf(stderr, "bench_rnn_steps: %s: the layouts disagree (%g against %g)\n", s->name,
              state_rows, state_columns);
      return 1;
    }
    printf("| %s | %ld | %ld | %.1f | %.1f | %.2f |\n", s->name, s->hidden, s->seq, rows_us,
           columns_us, columns_us / rows_us);
    free(r);
    free(columns);
    free(bias);
    free(scratch);
    free(initial);
  }
  return 0;
}
