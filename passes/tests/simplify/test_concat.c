/*
 * test_concat.c - concat-in-place and the Split/Slice views: offsets and
 * strides derived by hand from the row-major layout, and every case where
 * the copy must stay.
 */
#include "testlib.h"

static PassOptions opt = {.opt_level = 1};

/* A node producing `name` from x, so the tensor has a writer of its own:
   a Relu when the shapes agree, else a 1x1 Conv changing the channels. */
static Tensor *produced(Graph *g, Tensor *x, const char *name, Shape s) {
  Tensor *y = t_value(g, name, s);
  if (tensor_same_shape(x, y)) {
    n_unary(g, OP_RELU, name, x, y);
  } else {
    const char *wname = arena_printf(g->arena, "%s_w", name);
    Tensor *w = t_const(g, wname, shape(4, (int)s.d[1], (int)x->dims[1], 1, 1), -1, 1);
    n_conv(g, name, x, w, NULL, y, 1, 0, 1);
  }
  return y;
}

static Node *concat(Graph *g, const char *name, int n, Tensor **in, Tensor *out, int64_t axis) {
  Node *c = n_add(g, OP_CONCAT, name, n, in, 1, &out);
  node_set_attr(g, c, "axis", ATTR_INT)->i = axis;
  return c;
}

static void test_in_place(int batch) {
  Graph *g = graph_new("concat");
  Tensor *x = t_input(g, "x", shape(4, batch, 1, 4, 4));
  Tensor *a = produced(g, x, "a", shape(4, batch, 2, 4, 4));
  Tensor *b = produced(g, x, "b", shape(4, batch, 3, 4, 4));
  Tensor *c = t_value(g, "c", shape(4, batch, 5, 4, 4));
  concat(g, "cat", 2, (Tensor *[]){a, b}, c, 1);
  Tensor *r = produced(g, c, "r", shape(4, batch, 5, 4, 4));
  graph_add_output(g, r);
  ready(g);
  CHECK(pass_concat_in_place(g, &opt, pass_context_new(g, &opt)));
  CHECK(find_node(g, "cat")->is_view);
  /* c is [batch,5,4,4]: strides [80,16,4,1]; b starts at channel 2. */
  CHECK(a->alias_of == c && a->alias_offset == 0);
  CHECK(b->alias_of == c && b->alias_offset == 32);
  CHECK(a->strides[0] == 80 && a->strides[1] == 16 && a->strides[2] == 4 && a->strides[3] == 1);
  CHECK(b->strides[0] == 80 && b->strides[1] == 16);
  CHECK(c->alias_of == NULL);
  CHECK(graph_verify(g));
  graph_free(g);
}

/* Concat along the last axis at batch 1 still works, with strides. */
static void test_in_place_inner_axis(void) {
  Graph *g = graph_new("concat3");
  Tensor *x = t_input(g, "x", shape(2, 3, 2));
  Tensor *a = produced(g, x, "a", shape(2, 3, 2));
  Tensor *b = produced(g, x, "b", shape(2, 3, 2));
  Tensor *c = t_value(g, "c", shape(2, 3, 4));
  concat(g, "cat", 2, (Tensor *[]){a, b}, c, -1);
  graph_add_output(g, c);
  ready(g);
  CHECK(pass_concat_in_place(g, &opt, pass_context_new(g, &opt)));
  CHECK(a->alias_of == c && a->alias_offset == 0 && a->strides[0] == 4 && a->strides[1] == 1);
  CHECK(b->alias_of == c && b->alias_offset == 2 && b->strides[0] == 4);
  graph_free(g);
}

enum { AS_OUTPUT, TWO_CONCATS, GRAPH_INPUT, CONSTANT, TWICE, OTHER_READER, MULTI_OUTPUT };

static void test_not_in_place(int why) {
  Graph *g = graph_new("concat_no");
  Tensor *x = t_input(g, "x", shape(4, 1, 2, 4, 4));
  Tensor *a = produced(g, x, "a", shape(4, 1, 2, 4, 4));
  Tensor *b = produced(g, x, "b", shape(4, 1, 2, 4, 4));
  Tensor *c = t_value(g, "c", shape(4, 1, 4, 4, 4));
  Tensor *second = b;
  if (why == GRAPH_INPUT)
    second = x;
  if (why == CONSTANT)
    second = t_const(g, "k", shape(4, 1, 2, 4, 4), -1, 1);
  if (why == TWICE)
    second = a;
  if (why == MULTI_OUTPUT) {
    Tensor *p = t_value(g, "p", shape(4, 1, 2, 4, 4));
    second = t_value(g, "q", shape(4, 1, 2, 4, 4));
    Node *s = n_add(g, OP_SPLIT, "split", 1, (Tensor *[]){produced(g, x, "w", shape(4, 1, 4, 4, 4))}, 2,
                    (Tensor *[]){p, second});
    node_set_attr(g, s, "axis", ATTR_INT)->i = 1;
    graph_add_output(g, p);
  }
  concat(g, "cat", 2, (Tensor *[]){a, second}, c, 1);
  graph_add_output(g, c);
  if (second != b)
    graph_add_output(g, b);
  if (why == AS_OUTPUT)
    graph_add_output(g, a);
  if (why == TWO_CONCATS) {
    Tensor *c2 = t_value(g, "c2", shape(4, 1, 4, 4, 4));
    concat(g, "cat2", 2, (Tensor *[]){a, b}, c2, 1);
    graph_add_output(g, c2);
  }
  if (why == OTHER_READER)
    graph_add_output(g, produced(g, a, "r", shape(4, 1, 2, 4, 4)));
  ready(g);
  CHECK(pass_concat_in_place(g, &opt, pass_context_new(g, &opt)));
  CHECK(!find_node(g, "cat")->is_view);
  /* (the Split case's outputs may become views of the Split's input) */
  CHECK(a->alias_of == NULL && second->alias_of != c);
  if (why == TWO_CONCATS)
    CHECK(!find_node(g, "cat2")->is_view);
  graph_free(g);
}

/* concat(concat(p, q), s): every producer writes into the outer output. */
static void test_nested(void) {
  Graph *g = graph_new("nested");
  Tensor *x = t_input(g, "x", shape(4, 1, 1, 2, 2));
  Tensor *p = produced(g, x, "p", shape(4, 1, 1, 2, 2));
  Tensor *q = produced(g, x, "q", shape(4, 1, 2, 2, 2));
  Tensor *s = produced(g, x, "s", shape(4, 1, 3, 2, 2));
  Tensor *r = t_value(g, "r", shape(4, 1, 3, 2, 2));
  Tensor *t = t_value(g, "t", shape(4, 1, 6, 2, 2));
  concat(g, "inner", 2, (Tensor *[]){p, q}, r, 1);
  concat(g, "outer", 2, (Tensor *[]){s, r}, t, 1);
  graph_add_output(g, t);
  ready(g);
  CHECK(pass_concat_in_place(g, &opt, pass_context_new(g, &opt)));
  CHECK(find_node(g, "inner")->is_view && find_node(g, "outer")->is_view);
  /* t = [s (3 ch), p (1 ch), q (2 ch)], 4 elements per channel. */
  CHECK(s->alias_of == t && s->alias_offset == 0);
  CHECK(r->alias_of == t && r->alias_offset == 12);
  CHECK(p->alias_of == t && p->alias_offset == 12);
  CHECK(q->alias_of == t && q->alias_offset == 16);
  CHECK(graph_verify(g));
  graph_free(g);
}

static void test_split(int batch, int axis, bool input_to_output, bool expect) {
  Graph *g = graph_new("split");
  Tensor *x = t_input(g, "x", shape(4, batch, 6, 4, 4));
  Tensor *y = input_to_output ? x : produced(g, x, "y", shape(4, batch, 6, 4, 4));
  Shape s1 = shape(4, batch, 6, 4, 4), s2 = s1;
  s1.d[axis] = 2;
  s2.d[axis] = axis == 1 ? 4 : 2;
  Tensor *a = t_value(g, "a", s1), *b = t_value(g, "b", s2);
  Node *sp = n_add(g, OP_SPLIT, "split", 1, &y, 2, (Tensor *[]){a, b});
  node_set_attr(g, sp, "axis", ATTR_INT)->i = axis;
  set_ints(g, sp, "split", 2, (int64_t[]){s1.d[axis], s2.d[axis]});
  graph_add_output(g, a);
  graph_add_output(g, b);
  ready(g);
  CHECK(pass_concat_in_place(g, &opt, pass_context_new(g, &opt)));
  CHECK(sp->is_view == expect);
  if (expect) {
    CHECK(a->alias_of == y && a->alias_offset == 0);
    CHECK(b->alias_of == y && b->alias_offset == 32); /* 2 channels of 4x4 */
    CHECK(b->strides[1] == 16 && b->strides[3] == 1);
    CHECK(graph_verify(g));
  } else {
    CHECK(a->alias_of == NULL && b->alias_of == NULL);
  }
  graph_free(g);
}

static void test_slice(int64_t axis, int64_t start, int64_t step, int out_extent, bool expect,
                       int64_t offset) {
  Graph *g = graph_new("slice");
  Tensor *x = t_input(g, "x", shape(4, 1, 6, 4, 4));
  Tensor *y = produced(g, x, "y", shape(4, 1, 6, 4, 4));
  Shape s = shape(4, 1, 6, 4, 4);
  s.d[axis] = out_extent;
  Tensor *z = t_value(g, "z", s);
  int64_t end = step > 0 ? start + out_extent : start - out_extent;
  Tensor *in[5] = {y, t_const_ints(g, "starts", shape(1, 1), &start),
                   t_const_ints(g, "ends", shape(1, 1), &end),
                   t_const_ints(g, "axes", shape(1, 1), &axis),
                   t_const_ints(g, "steps", shape(1, 1), &step)};
  Node *sl = n_add(g, OP_SLICE, "slice", 5, in, 1, &z);
  graph_add_output(g, z);
  ready(g);
  CHECK(pass_concat_in_place(g, &opt, pass_context_new(g, &opt)));
  CHECK(sl->is_view == expect);
  if (expect)
    CHECK(z->alias_of == y && z->alias_offset == offset);
  else
    CHECK(z->alias_of == NULL);
  graph_free(g);
}

/* Slice -> Reshape where the Reshape became a view first (alias-reshape
   runs earlier): the Reshape's view must follow into the Slice's input
   storage, and must not expose a graph input as a graph output. */
static void test_slice_then_reshape(bool from_input) {
  Graph *g = graph_new("slice_reshape");
  Tensor *x = t_input(g, "x", shape(2, 4, 3));
  Tensor *y = from_input ? x : produced(g, x, "y", shape(2, 4, 3));
  Tensor *z = t_value(g, "z", shape(2, 2, 3)), *r = t_value(g, "r", shape(1, 6));
  int64_t start = 1, end = 3, axis = 0;
  Tensor *in[4] = {y, t_const_ints(g, "starts", shape(1, 1), &start),
                   t_const_ints(g, "ends", shape(1, 1), &end), t_const_ints(g, "axes", shape(1, 1), &axis)};
  Node *sl = n_add(g, OP_SLICE, "slice", 4, in, 1, &z);
  int64_t dims[1] = {6};
  Node *re = n_binary(g, OP_RESHAPE, "reshape", z, t_const_ints(g, "shape", shape(1, 1), dims), r);
  graph_add_output(g, r);
  ready(g);
  PassOptions o = opt;
  CHECK(pass_alias_reshape(g, &o, pass_context_new(g, &o)));
  CHECK(re->is_view && r->alias_of == z);
  CHECK(pass_concat_in_place(g, &o, pass_context_new(g, &o)));
  if (from_input) {
    CHECK(!sl->is_view && z->alias_of == NULL && r->alias_of == z);
  } else {
    CHECK(sl->is_view && z->alias_of == y && z->alias_offset == 3);
    CHECK(r->alias_of == y && r->alias_offset == 3);
    CHECK(graph_verify(g));
  }
  graph_free(g);
}

int main(void) {
  test_in_place(1);
  test_in_place(2);
  test_in_place_inner_axis();
  test_not_in_place(AS_OUTPUT);
  test_not_in_place(TWO_CONCATS);
  test_not_in_place(GRAPH_INPUT);
  test_not_in_place(CONSTANT);
  test_not_in_place(TWICE);
  test_not_in_place(OTHER_READER);
  test_not_in_place(MULTI_OUTPUT);
  test_nested();

  test_split(1, 1, false, true);
  test_split(2, 1, false, false); /* batch 2: blocks are not contiguous */
  test_split(1, 2, false, false); /* inner axis */
  test_split(1, 1, true, false);  /* graph input viewed as graph output */

  test_slice(1, 2, 1, 3, true, 32);
  test_slice(1, -4, 1, 3, true, 32); /* -4 + 6 = 2 */
  test_slice(1, 4, -1, 3, false, 0);
  test_slice(3, 1, 1, 2, false, 0);
  test_slice_then_reshape(false);
  test_slice_then_reshape(true);
  return test_finish("passes-concat");
}
