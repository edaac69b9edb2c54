/* testlib.c - see testlib.h. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "testlib.h"

int test_failures;

Shape shape(int rank, ...) {
  Shape s = {rank, {0}};
  va_list ap;
  va_start(ap, rank);
  for (int i = 0; i < rank; i++)
    s.d[i] = va_arg(ap, int);
  va_end(ap);
  return s;
}

Tensor *t_value(Graph *g, const char *name, Shape s) {
  Tensor *t = graph_add_tensor(g, name);
  t->dtype = DT_FLOAT;
  tensor_set_shape(t, s.rank, s.d);
  return t;
}

Tensor *t_input(Graph *g, const char *name, Shape s) {
  Tensor *t = t_value(g, name, s);
  graph_add_input(g, t);
  return t;
}

float frand(unsigned *state, float lo, float hi) {
  *state = *state * 1103515245u + 12345u;
  return lo + (hi - lo) * (float)((*state >> 8) & 0xffff) / 65535.0f;
}

Tensor *t_const(Graph *g, const char *name, Shape s, float lo, float hi) {
  Tensor *t = t_value(g, name, s);
  int64_t n = tensor_numel(t);
  t->f32 = arena_alloc(g->arena, sizeof(float) * (size_t)(n + 1));
  unsigned seed = 7;
  for (const char *p = name; *p; p++)
    seed = seed * 31 + (unsigned char)*p;
  for (int64_t i = 0; i < n; i++)
    t->f32[i] = frand(&seed, lo, hi);
  return t;
}

Tensor *t_const_values(Graph *g, const char *name, Shape s, const float *values) {
  Tensor *t = t_value(g, name, s);
  int64_t n = tensor_numel(t);
  t->f32 = arena_alloc(g->arena, sizeof(float) * (size_t)(n + 1));
  memcpy(t->f32, values, sizeof(float) * (size_t)n);
  return t;
}

Tensor *t_const_ints(Graph *g, const char *name, Shape s, const int64_t *values) {
  Tensor *t = t_value(g, name, s);
  t->dtype = DT_INT64;
  int64_t n = tensor_numel(t);
  t->i64 = arena_alloc(g->arena, sizeof(int64_t) * (size_t)(n + 1));
  memcpy(t->i64, values, sizeof(int64_t) * (size_t)n);
  return t;
}

Node *n_add(Graph *g, OpKind op, const char *name, int nin, Tensor **in, int nout, Tensor **out) {
  Node *n = graph_add_node(g, op, name, nin, nout);
  for (int i = 0; i < nin; i++)
    n->in[i] = in[i];
  for (int i = 0; i < nout; i++)
    n->out[i] = out[i];
  return n;
}

Node *n_unary(Graph *g, OpKind op, const char *name, Tensor *x, Tensor *y) {
  return n_add(g, op, name, 1, &x, 1, &y);
}

Node *n_binary(Graph *g, OpKind op, const char *name, Tensor *a, Tensor *b, Tensor *y) {
  Tensor *in[2] = {a, b};
  return n_add(g, op, name, 2, in, 1, &y);
}

void set_ints(Graph *g, Node *n, const char *attr, int count, const int64_t *v) {
  Attr *a = node_set_attr(g, n, attr, ATTR_INTS);
  a->n = count;
  a->ints = arena_alloc(g->arena, sizeof(int64_t) * (size_t)(count + 1));
  memcpy(a->ints, v, sizeof(int64_t) * (size_t)count);
}

Node *n_conv(Graph *g, const char *name, Tensor *x, Tensor *w, Tensor *b, Tensor *y,
             int64_t stride, int64_t pad, int64_t group) {
  Tensor *in[3] = {x, w, b};
  Node *n = n_add(g, OP_CONV, name, b ? 3 : 2, in, 1, &y);
  int64_t k = w->dims[2];
  set_ints(g, n, "kernel_shape", 2, (int64_t[]){k, k});
  set_ints(g, n, "strides", 2, (int64_t[]){stride, stride});
  set_ints(g, n, "pads", 4, (int64_t[]){pad, pad, pad, pad});
  node_set_attr(g, n, "group", ATTR_INT)->i = group;
  n->win.nspatial = 2;
  for (int i = 0; i < 2; i++) {
    n->win.kernel[i] = k;
    n->win.stride[i] = stride;
    n->win.dilation[i] = 1;
    n->win.pad_begin[i] = pad;
    n->win.pad_end[i] = pad;
  }
  n->win.group = group;
  return n;
}

int count_op(const Graph *g, OpKind op) {
  int c = 0;
  for (int i = 0; i < g->nnodes; i++)
    c += !g->nodes[i]->dead && g->nodes[i]->op == op;
  return c;
}

Node *find_node(const Graph *g, const char *name) {
  for (int i = 0; i < g->nnodes; i++)
    if (!g->nodes[i]->dead && strcmp(g->nodes[i]->name, name) == 0)
      return g->nodes[i];
  return NULL;
}

bool has_fused(const Node *n, const char *name) {
  for (int i = 0; i < n->nfused; i++)
    if (strcmp(n->fused[i], name) == 0)
      return true;
  return false;
}

/* Sorts the graph and resolves every node's attributes into its
   parameters (Node.p, Node.win) by shape inference, as the importer would.
   Some tests build nodes that inference rejects on purpose (a toy Reshape
   without its shape input): those keep the shapes the test gave them. */
void ready(Graph *g) {
  if (!graph_toposort(g))
    test_failures++;
  for (int i = 0; i < g->nnodes; i++)
    node_infer(g, g->nodes[i]);
}

void ref_conv2d(const float *x, int64_t n, int64_t c, int64_t h, int64_t w_, const float *w,
                int64_t m, int64_t k, const float *b, int64_t stride, int64_t pad, int64_t group,
                float *y, int64_t oh, int64_t ow) {
  int64_t cg = c / group, mg = m / group;
  for (int64_t in = 0; in < n; in++)
    for (int64_t om = 0; om < m; om++)
      for (int64_t oy = 0; oy < oh; oy++)
        for (int64_t ox = 0; ox < ow; ox++) {
          double acc = b ? b[om] : 0;
          int64_t gi = om / mg;
          for (int64_t ic = 0; ic < cg; ic++)
            for (int64_t ky = 0; ky < k; ky++)
              for (int64_t kx = 0; kx < k; kx++) {
                int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w_)
                  continue;
                int64_t cin = gi * cg + ic;
                acc += (double)x[((in * c + cin) * h + iy) * w_ + ix] *
                       w[((om * cg + ic) * k + ky) * k + kx];
              }
          y[((in * m + om) * oh + oy) * ow + ox] = (float)acc;
        }
}

float max_abs_diff(const float *a, const float *b, int64_t n) {
  float worst = 0;
  for (int64_t i = 0; i < n; i++)
    worst = fmaxf(worst, fabsf(a[i] - b[i]));
  return worst;
}

int test_finish(const char *name) {
  if (test_failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures);
    return 1;
  }
  printf("%s: ok\n", name);
  return 0;
}
