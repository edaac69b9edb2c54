/*
 * testlib.h - building small graphs by hand for the pass tests, and the
 * naive reference maths the numeric checks compare against.
 */
#ifndef OPC_PASS_TESTLIB_H
#define OPC_PASS_TESTLIB_H

#include "../../pass.h"

extern int test_failures;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      test_failures++;                                                       \
    }                                                                        \
  } while (0)

/* Shapes are written as a rank and an array: shape(4, 1, 3, 8, 8). */
typedef struct Shape {
  int rank;
  int64_t d[IR_MAX_RANK];
} Shape;
Shape shape(int rank, ...);

Tensor *t_input(Graph *g, const char *name, Shape s);
Tensor *t_value(Graph *g, const char *name, Shape s);
/* Constant with deterministic pseudo-random values in [lo, hi]. */
Tensor *t_const(Graph *g, const char *name, Shape s, float lo, float hi);
Tensor *t_const_values(Graph *g, const char *name, Shape s, const float *values);
Tensor *t_const_ints(Graph *g, const char *name, Shape s, const int64_t *values);

Node *n_add(Graph *g, OpKind op, const char *name, int nin, Tensor **in, int nout, Tensor **out);
/* Single-output shorthands. */
Node *n_unary(Graph *g, OpKind op, const char *name, Tensor *x, Tensor *y);
Node *n_binary(Graph *g, OpKind op, const char *name, Tensor *a, Tensor *b, Tensor *y);
/* 2-D Conv with square kernel, symmetric pads; sets attributes and win. */
Node *n_conv(Graph *g, const char *name, Tensor *x, Tensor *w, Tensor *b, Tensor *y,
             int64_t stride, int64_t pad, int64_t group);
void set_ints(Graph *g, Node *n, const char *attr, int count, const int64_t *v);

/* Live nodes of a kind. */
int count_op(const Graph *g, OpKind op);
Node *find_node(const Graph *g, const char *name);
bool has_fused(const Node *n, const char *name);
/* Prepares a hand-built graph as the pipeline would: order and uses. */
void ready(Graph *g);

/* y[N,M,OH,OW] = conv(x[N,C,H,W], w[M,C/group,K,K]) + b, zero padding. */
void ref_conv2d(const float *x, int64_t n, int64_t c, int64_t h, int64_t w_, const float *w,
                int64_t m, int64_t k, const float *b, int64_t stride, int64_t pad, int64_t group,
                float *y, int64_t oh, int64_t ow);
float max_abs_diff(const float *a, const float *b, int64_t n);
float frand(unsigned *state, float lo, float hi);

int test_finish(const char *name);

#endif
