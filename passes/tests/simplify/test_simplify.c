/*
 * test_simplify.c - fold-constants, remove-identity, eliminate-dead,
 * eliminate-common and alias-reshape on small hand-built graphs.
 */
#include <string.h>

#include "../../rewrite.h"
#include "testlib.h"

static PassOptions opt = {.opt_level = 1};

static Shape v4(void) { return shape(2, 1, 4); }

static void test_fold_constants(void) {
  Graph *g = graph_new("fold");
  Tensor *x = t_input(g, "x", v4());
  Tensor *a = t_const_values(g, "a", v4(), (float[]){1, 2, 3, 4});
  Tensor *b = t_const_values(g, "b", v4(), (float[]){10, 20, 30, 40});
  Tensor *c = t_value(g, "c", v4()), *d = t_value(g, "d", v4()), *y = t_value(g, "y", v4());
  n_binary(g, OP_ADD, "add", a, b, c);
  n_binary(g, OP_MUL, "mul", c, x, y);
  n_unary(g, OP_NEG, "neg", a, d); /* a graph output that becomes constant */
  /* Not evaluable at compile time: stays, though its inputs are constant. */
  Tensor *w = t_const(g, "w", shape(4, 1, 1, 1, 1), -1, 1);
  Tensor *k = t_const(g, "k", shape(4, 1, 1, 2, 2), -1, 1);
  Tensor *cv = t_value(g, "cv", shape(4, 1, 1, 2, 2));
  n_conv(g, "conv", k, w, NULL, cv, 1, 0, 1);
  graph_add_output(g, y);
  graph_add_output(g, d);
  graph_add_output(g, cv);
  ready(g);
  CHECK(pass_fold_constants(g, &opt, pass_context_new(g, &opt)));
  CHECK(count_op(g, OP_ADD) == 0 && count_op(g, OP_NEG) == 0);
  CHECK(count_op(g, OP_MUL) == 1 && count_op(g, OP_CONV) == 1);
  CHECK(c->f32 && c->f32[0] == 11 && c->f32[3] == 44);
  CHECK(d->f32 && d->f32[1] == -2 && d->is_output && g->outputs[1] == d);
  CHECK(find_node(g, "mul")->in[0] == c && c->producer == NULL);
  graph_free(g);
}

/* Shape of a runtime tensor: shape inference made its output constant
   already, so the node itself must go (the backend has no code for it). */
static void test_fold_inferred(void) {
  Graph *g = graph_new("fold_shape");
  Tensor *x = t_input(g, "x", shape(2, 2, 3));
  Tensor *s = t_const_ints(g, "s", shape(1, 2), (int64_t[]){2, 3});
  Tensor *y = t_value(g, "y", shape(1, 6));
  n_unary(g, OP_SHAPE, "shape", x, s);
  Tensor *six = t_const_ints(g, "six", shape(1, 1), (int64_t[]){6});
  n_binary(g, OP_RESHAPE, "reshape", x, six, y);
  graph_add_output(g, y);
  graph_add_output(g, s);
  ready(g);
  CHECK(pass_fold_constants(g, &opt, pass_context_new(g, &opt)));
  CHECK(count_op(g, OP_SHAPE) == 0 && count_op(g, OP_RESHAPE) == 1);
  CHECK(s->is_output && s->i64[1] == 3);
  graph_free(g);
}

static void test_identity(void) {
  Graph *g = graph_new("identity");
  Tensor *x = t_input(g, "x", v4());
  Tensor *a = t_value(g, "a", v4()), *b = t_value(g, "b", v4()), *c = t_value(g, "c", v4());
  Tensor *e = t_value(g, "e", v4()), *f = t_value(g, "f", v4());
  n_unary(g, OP_RELU, "r1", x, a);
  n_unary(g, OP_IDENTITY, "id", a, b);
  n_unary(g, OP_RELU, "r2", b, c);
  Node *cast = n_unary(g, OP_CAST, "cast_same", c, e);
  node_set_attr(g, cast, "to", ATTR_INT)->i = DT_FLOAT;
  n_unary(g, OP_DROPOUT, "drop", e, f);
  graph_add_output(g, f);
  ready(g);
  CHECK(pass_remove_identity(g, &opt, pass_context_new(g, &opt)));
  /* Identity and the same-type Cast are gone; the Dropout wrote the graph
     output f, so r2 now writes f itself and the name survives. */
  CHECK(count_op(g, OP_IDENTITY) == 0 && count_op(g, OP_CAST) == 0 && count_op(g, OP_DROPOUT) == 0);
  Node *r2 = find_node(g, "r2");
  CHECK(r2 && r2->in[0] == a && r2->out[0] == f);
  CHECK(g->noutputs == 1 && g->outputs[0] == f && f->is_output);
  CHECK(graph_verify(g));
  graph_free(g);
}

static void test_identity_kept(void) {
  Graph *g = graph_new("identity_kept");
  Tensor *x = t_input(g, "x", v4());
  Tensor *y = t_value(g, "y", v4()), *m = t_value(g, "m", v4());
  Tensor *z = t_value(g, "z", v4()), *i64 = t_value(g, "i", v4());
  n_unary(g, OP_IDENTITY, "id", x, y); /* graph input straight to output */
  n_add(g, OP_DROPOUT, "drop", 1, &x, 2, (Tensor *[]){z, m}); /* mask is used */
  Node *cast = n_unary(g, OP_CAST, "cast", x, i64);
  node_set_attr(g, cast, "to", ATTR_INT)->i = DT_INT64;
  i64->dtype = DT_INT64;
  graph_add_output(g, y);
  graph_add_output(g, m);
  graph_add_output(g, z);
  graph_add_output(g, i64);
  ready(g);
  CHECK(pass_remove_identity(g, &opt, pass_context_new(g, &opt)));
  CHECK(count_op(g, OP_IDENTITY) == 1 && count_op(g, OP_DROPOUT) == 1 && count_op(g, OP_CAST) == 1);
  graph_free(g);
}

static void test_dead(void) {
  Graph *g = graph_new("dead");
  Tensor *x = t_input(g, "x", v4());
  t_input(g, "unused_input", v4());
  Tensor *k = t_const(g, "k", v4(), -1, 1);
  t_const(g, "orphan", v4(), -1, 1);
  Tensor *a = t_value(g, "a", v4()), *b = t_value(g, "b", v4());
  Tensor *c = t_value(g, "c", v4()), *y = t_value(g, "y", v4());
  n_binary(g, OP_ADD, "used", x, k, y);
  n_unary(g, OP_RELU, "dead1", x, a);
  n_unary(g, OP_SIGMOID, "dead2", a, b);
  n_binary(g, OP_MUL, "dead3", b, k, c);
  graph_add_output(g, y);
  ready(g);
  CHECK(pass_eliminate_dead(g, &opt, pass_context_new(g, &opt)));
  CHECK(g->nnodes == 1 && g->nodes[0]->op == OP_ADD);
  CHECK(graph_find_tensor(g, "unused_input") && g->ninputs == 2);
  bool orphan_left = false, k_left = false, input_left = false;
  for (int i = 0; i < g->ntensors; i++) {
    CHECK(g->tensors[i]->id == i);
    orphan_left |= strcmp(g->tensors[i]->name, "orphan") == 0;
    k_left |= g->tensors[i] == k;
    input_left |= strcmp(g->tensors[i]->name, "unused_input") == 0;
  }
  CHECK(!orphan_left && k_left && input_left);
  CHECK(g->ntensors == 4); /* x, unused_input, k, y */
  CHECK(graph_verify(g));
  graph_free(g);
}

static void test_common(void) {
  Graph *g = graph_new("cse");
  Tensor *x = t_input(g, "x", v4());
  Tensor *a1 = t_value(g, "a1", v4()), *a2 = t_value(g, "a2", v4());
  Tensor *b1 = t_value(g, "b1", v4()), *b2 = t_value(g, "b2", v4());
  Tensor *l1 = t_value(g, "l1", v4()), *l2 = t_value(g, "l2", v4());
  Tensor *s = t_value(g, "s", v4()), *t = t_value(g, "t", v4());
  n_unary(g, OP_RELU, "relu1", x, a1);
  n_unary(g, OP_RELU, "relu2", x, a2);
  /* Same as sig1 once relu2 is relu1; placed first so that the duplicate
     is only visible after the use lists are rebuilt. */
  n_unary(g, OP_SIGMOID, "sig2", a2, b2);
  n_unary(g, OP_SIGMOID, "sig1", a1, b1);
  node_set_attr(g, n_unary(g, OP_LEAKY_RELU, "lr1", x, l1), "alpha", ATTR_FLOAT)->f = 0.1f;
  node_set_attr(g, n_unary(g, OP_LEAKY_RELU, "lr2", x, l2), "alpha", ATTR_FLOAT)->f = 0.2f;
  n_binary(g, OP_ADD, "sum1", b1, b2, s);
  n_binary(g, OP_ADD, "sum2", l1, l2, t);
  graph_add_output(g, s);
  graph_add_output(g, t);
  ready(g);
  CHECK(pass_eliminate_common(g, &opt, pass_context_new(g, &opt)));
  CHECK(count_op(g, OP_RELU) == 1 && count_op(g, OP_SIGMOID) == 1);
  CHECK(count_op(g, OP_LEAKY_RELU) == 2);
  Node *sum = find_node(g, "sum1");
  CHECK(sum->in[0] == sum->in[1]);
  CHECK(graph_verify(g));
  graph_free(g);
}

/* A node writing a graph output is never the one dropped. */
static void test_common_output(void) {
  Graph *g = graph_new("cse_out");
  Tensor *x = t_input(g, "x", v4());
  Tensor *a = t_value(g, "a", v4()), *b = t_value(g, "b", v4());
  n_unary(g, OP_RELU, "r1", x, a);
  n_unary(g, OP_RELU, "r2", x, b);
  graph_add_output(g, a);
  graph_add_output(g, b);
  ready(g);
  CHECK(pass_eliminate_common(g, &opt, pass_context_new(g, &opt)));
  CHECK(count_op(g, OP_RELU) == 2);
  graph_free(g);
}

static Node *reshape(Graph *g, const char *name, Tensor *x, Tensor *y) {
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < y->rank; i++)
    dims[i] = y->dims[i];
  Tensor *s = t_const_ints(g, arena_printf(g->arena, "%s_shape", name), shape(1, y->rank), dims);
  return n_binary(g, OP_RESHAPE, name, x, s, y);
}

static void test_alias(void) {
  Graph *g = graph_new("alias");
  Tensor *x = t_input(g, "x", shape(4, 1, 2, 2, 2));
  Tensor *y = t_value(g, "y", shape(4, 1, 2, 2, 2));
  Tensor *r1 = t_value(g, "r1", shape(2, 2, 4)), *r2 = t_value(g, "r2", shape(1, 8));
  Tensor *out = t_value(g, "out", shape(1, 8)), *xo = t_value(g, "xo", shape(2, 1, 8));
  n_unary(g, OP_RELU, "relu", x, y);
  Node *n1 = reshape(g, "reshape1", y, r1);
  Node *n2 = reshape(g, "reshape2", r1, r2);
  n_unary(g, OP_SIGMOID, "sig", r2, out);
  Node *n3 = n_unary(g, OP_FLATTEN, "flat", x, xo); /* graph input to graph output */
  graph_add_output(g, out);
  graph_add_output(g, xo);
  ready(g);
  CHECK(pass_alias_reshape(g, &opt, pass_context_new(g, &opt)));
  CHECK(n1->is_view && r1->alias_of == y && r1->alias_offset == 0);
  CHECK(n2->is_view && r2->alias_of == y); /* the storage, not the view r1 */
  CHECK(r1->strides[0] == 4 && r1->strides[1] == 1);
  CHECK(!n3->is_view && xo->alias_of == NULL);
  CHECK(graph_verify(g));
  graph_free(g);
}

/* A strided view (here: a channel slice at batch 2) cannot be reshaped in place. */
static void test_alias_strided(void) {
  Graph *g = graph_new("alias_strided");
  Tensor *x = t_input(g, "x", shape(4, 2, 4, 2, 2));
  Tensor *y = t_value(g, "y", shape(4, 2, 4, 2, 2));
  Tensor *v = t_value(g, "v", shape(4, 2, 2, 2, 2));
  Tensor *f = t_value(g, "f", shape(2, 2, 8)), *out = t_value(g, "out", shape(2, 2, 8));
  n_unary(g, OP_RELU, "relu", x, y);
  Node *sl = n_unary(g, OP_SLICE, "slice", y, v);
  sl->is_view = true;
  make_view(v, y, 8, y->strides); /* channels 2..3 of each image */
  Node *flat = n_unary(g, OP_FLATTEN, "flat", v, f);
  n_unary(g, OP_RELU, "relu2", f, out);
  graph_add_output(g, out);
  ready(g);
  CHECK(pass_alias_reshape(g, &opt, pass_context_new(g, &opt)));
  CHECK(!flat->is_view && f->alias_of == NULL);
  graph_free(g);
}

int main(void) {
  test_fold_constants();
  test_fold_inferred();
  test_identity();
  test_identity_kept();
  test_dead();
  test_common();
  test_common_output();
  test_alias();
  test_alias_strided();
  return test_finish("passes-simplify");
}
