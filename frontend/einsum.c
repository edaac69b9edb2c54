/*
 * einsum.c - Einsum, lowered by the importer into kinds opc runs already.
 *
 * Einsum is not an IR kind: its equation becomes Transpose, Reshape,
 * Slice, Mul, ReduceSum and MatMul nodes, so it runs on their kernels and
 * cuBLAS and folds with their evaluators. The lowering needs its
 * operands' shapes, which the importer infers first (graph_evaluate).
 *
 *  1. Each label repeated within one operand (a diagonal, "ii->i") is
 *     taken once: its axes moved last, merged by a Reshape, and every
 *     (d+1)-th element kept by a Slice.
 *  2. Two operands of a float type MatMul takes, whose labels are each in
 *     both or in the output, are one batched product: each operand is
 *     transposed to (batch labels, its own labels, contracted labels) and
 *     reshaped to [batch..., M, K] (the other to [batch..., K, N]), and
 *     the product is reshaped and transposed to the output's order.
 *  3. Otherwise every operand is transposed to one order of all labels
 *     (the output's first, then the contracted ones), given 1 for the
 *     labels it lacks, multiplied with broadcasting, and the contracted
 *     labels summed by a ReduceSum.
 * An ellipsis stands for unnamed labels aligned right; a size-1 ellipsis
 * dim broadcasts. The implicit output ("ij,jk") is the ellipsis, then the
 * labels seen once, in alphabetical order.
 */
#include <string.h>

#include "import.h"

/* Labels are codes: a letter is its character, the ellipsis's dims are
   1 .. ELLIPSIS_CODES, counted from the left of the widest one. */
enum { ELLIPSIS_CODES = IR_MAX_RANK, MAX_LABELS = 128, MAX_OPERANDS = 16 };

typedef struct Term {
  int n;                    /* labels, one per axis once the ellipsis is expanded */
  int label[IR_MAX_RANK];
} Term;

typedef struct Lowering {
  Importer *im;
  Graph *g;
  const char *name; /* the Einsum node's, for messages and the new nodes' names */
  int count;        /* nodes made so far, for their names */
} Lowering;

static bool fail(Lowering *L, const char *msg) {
  ir_error(L->g, NULL, "node '%s' (Einsum): %s", L->name, msg);
  L->im->failed = true;
  return false;
}

/* ------------------------------------------------------------ parsing */

/* One term of the equation, letters and at most one "...", into its
   labels for an operand of `rank` axes (-1: the output, whose ellipsis is
   `ell` wide). Its ellipsis width goes to *width. */
static bool parse_term(Lowering *L, const char *s, int len, int rank, int ell, Term *t,
                       int *width) {
  int letters = 0, dots = -1;
  for (int i = 0; i < len; i++) {
    char c = s[i];
    if (c == '.') {
      if (dots >= 0 || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.')
        return fail(L, "an ellipsis must be \"...\", once per term");
      dots = letters;
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      letters++;
    } else {
      return fail(L, arena_printf(L->g->arena, "unexpected character '%c' in the equation", c));
    }
  }
  int w = rank < 0 ? (dots >= 0 ? ell : 0) : rank - letters;
  if (rank >= 0 && (w < 0 || (dots < 0 && w != 0)))
    return fail(L, arena_printf(L->g->arena, "a term names %d axes of an operand of rank %d",
                                letters, rank));
  if (letters + w > IR_MAX_RANK)
    return fail(L, "a term has more axes than opc's rank limit");
  *width = w;
  t->n = 0;
  for (int i = 0; i < len; i++) {
    if (s[i] == '.') {
      for (int k = 0; k < w; k++)
        t->label[t->n++] = ell - w + k + 1; /* aligned right */
      i += 2;
    } else {
      t->label[t->n++] = s[i];
    }
  }
  return true;
}

/* The equation without spaces, split into its operands' terms and the
   output's (implicit when there is no "->"). */
static bool parse(Lowering *L, const char *equation, Tensor **in, int nin, Term *terms,
                  Term *out) {
  char *eq = arena_alloc(L->g->arena, strlen(equation) + 1);
  int len = 0;
  for (const char *p = equation; *p; p++)
    if (*p != ' ')
      eq[len++] = *p;
  eq[len] = 0;
  const char *arrow = strstr(eq, "->");
  int lhs = arrow ? (int)(arrow - eq) : len;
  const char *start = eq;
  int k = 0, ell = 0, widths[MAX_OPERANDS];
  for (int i = 0; i <= lhs; i++) {
    if (i < lhs && eq[i] != ',')
      continue;
    if (k >= nin)
      return fail(L, arena_printf(L->g->arena, "the equation has more terms than the %d inputs",
                                  nin));
    if (!parse_term(L, start, (int)(eq + i - start), in[k]->rank, 0, &terms[k], &widths[k]))
      return false;
    ell = widths[k] > ell ? widths[k] : ell;
    start = eq + i + 1;
    k++;
  }
  if (k != nin)
    return fail(L, arena_printf(L->g->arena, "the equation has %d terms for %d inputs", k, nin));
  /* Now that the widest ellipsis is known, align every one to the right. */
  start = eq;
  k = 0;
  for (int i = 0; i <= lhs; i++)
    if (i == lhs || eq[i] == ',') {
      parse_term(L, start, (int)(eq + i - start), in[k]->rank, ell, &terms[k], &widths[k]);
      start = eq + i + 1;
      k++;
    }
  int seen[MAX_LABELS] = {0};
  for (k = 0; k < nin; k++)
    for (int j = 0; j < terms[k].n; j++)
      seen[terms[k].label[j]]++;
  if (arrow) {
    int w;
    if (!parse_term(L, arrow + 2, (int)strlen(arrow + 2), -1, ell, out, &w))
      return false;
    int used[MAX_LABELS] = {0};
    for (int j = 0; j < out->n; j++) {
      int c = out->label[j];
      if (!seen[c] || used[c]++)
        return fail(L, arena_printf(L->g->arena, "output label '%c' %s", c,
                                    used[c] > 1 ? "appears twice" : "is in no input"));
    }
    return true;
  }
  out->n = 0;
  for (int c = 1; c <= ell; c++)
    out->label[out->n++] = c;
  for (int c = 'A'; c <= 'z'; c++)
    if (c > ELLIPSIS_CODES && seen[c] == 1) {
      if (out->n == IR_MAX_RANK)
        return fail(L, "the output has more axes than opc's rank limit");
      out->label[out->n++] = c;
    }
  return true;
}

/* ------------------------------------------------------- new nodes */

/* A node of kind op reading in[0..nin), writing `out` (NULL: a new tensor,
   whose shape the caller sets for the steps after it; shape inference
   sets it again). */
static Node *add(Lowering *L, OpKind op, Tensor **in, int nin, Tensor *out) {
  Node *n = graph_add_node(L->g, op, arena_printf(L->g->arena, "%s/%s%d", L->name,
                                                  op_name(op), L->count++), nin, 1);
  for (int i = 0; i < nin; i++)
    n->in[i] = in[i];
  n->out[0] = out ? out : graph_add_tensor(L->g, NULL);
  n->out[0]->dtype = in[0]->dtype;
  return n;
}

/* x transposed by perm (skipped when perm keeps the order). */
static Tensor *transpose(Lowering *L, Tensor *x, const int *perm) {
  bool same = true;
  int64_t p[IR_MAX_RANK], dims[IR_MAX_RANK];
  for (int d = 0; d < x->rank; d++) {
    p[d] = perm[d];
    dims[d] = x->dims[perm[d]];
    same = same && perm[d] == d;
  }
  if (same)
    return x;
  Node *n = add(L, OP_TRANSPOSE, &x, 1, NULL);
  Attr *a = node_set_attr(L->g, n, "perm", ATTR_INTS);
  a->n = x->rank;
  a->ints = arena_dup(L->g->arena, p, sizeof(int64_t) * (size_t)x->rank);
  tensor_set_shape(n->out[0], x->rank, dims);
  return n->out[0];
}

/* x reshaped to dims (into `out` when given; skipped when nothing changes). */
static Tensor *reshape(Lowering *L, Tensor *x, int rank, const int64_t *dims, Tensor *out) {
  if (!out && rank == x->rank && memcmp(dims, x->dims, sizeof(int64_t) * (size_t)rank) == 0)
    return x;
  Tensor *in[2] = {x, import_ints_constant(L->g, L->name, &L->count, dims, rank)};
  Node *n = add(L, OP_RESHAPE, in, 2, out);
  tensor_set_shape(n->out[0], rank, dims);
  return n->out[0];
}

/* ------------------------------------------------------------ steps */

/* Step 1: the diagonal of every label that t repeats, until none is. */
static bool take_diagonals(Lowering *L, Tensor **x, Term *t) {
  for (;;) {
    int p = -1, q = -1;
    for (int i = 0; i < t->n && p < 0; i++)
      for (int j = i + 1; j < t->n; j++)
        if (t->label[i] == t->label[j]) {
          p = i, q = j;
          break;
        }
    if (p < 0)
      return true;
    int64_t d = (*x)->dims[p];
    if ((*x)->dims[q] != d)
      return fail(L, arena_printf(L->g->arena, "label '%c' has sizes %lld and %lld in one input",
                                  t->label[p], (long long)d, (long long)(*x)->dims[q]));
    int perm[IR_MAX_RANK], r = 0;
    Term rest = {0};
    int64_t dims[IR_MAX_RANK];
    for (int i = 0; i < t->n; i++)
      if (i != p && i != q) {
        dims[r] = (*x)->dims[i];
        rest.label[r] = t->label[i];
        perm[r++] = i;
      }
    perm[r] = p;
    perm[r + 1] = q;
    Tensor *moved = transpose(L, *x, perm);
    dims[r] = d * d;
    Tensor *flat = reshape(L, moved, r + 1, dims, NULL);
    /* Slice(flat, starts 0, ends d*d, axes last, steps d + 1). */
    int64_t zero = 0, end = d * d, axis = r, step = d + 1;
    Tensor *in[5] = {flat, import_ints_constant(L->g, L->name, &L->count, &zero, 1), import_ints_constant(L->g, L->name, &L->count, &end, 1),
                     import_ints_constant(L->g, L->name, &L->count, &axis, 1), import_ints_constant(L->g, L->name, &L->count, &step, 1)};
    Node *n = add(L, OP_SLICE, in, 5, NULL);
    dims[r] = d;
    tensor_set_shape(n->out[0], r + 1, dims);
    rest.label[r] = t->label[p];
    rest.n = r + 1;
    *x = n->out[0];
    *t = rest;
  }
}

static int find(const Term *t, int label) {
  for (int i = 0; i < t->n; i++)
    if (t->label[i] == label)
      return i;
  return -1;
}

/* The size of each label over all operands, checked: equal, or 1 for an
   ellipsis dim that broadcasts. */
static bool label_sizes(Lowering *L, Tensor **x, const Term *t, int nin, int64_t *size) {
  for (int c = 0; c < MAX_LABELS; c++)
    size[c] = -1;
  for (int k = 0; k < nin; k++)
    for (int i = 0; i < t[k].n; i++) {
      int c = t[k].label[i];
      int64_t d = x[k]->dims[i];
      if (size[c] < 0 || size[c] == d || (c <= ELLIPSIS_CODES && size[c] == 1)) {
        size[c] = d;
      } else if (!(c <= ELLIPSIS_CODES && d == 1)) {
        return fail(L, c <= ELLIPSIS_CODES
                           ? "the inputs' ellipsis dims do not broadcast"
                           : arena_printf(L->g->arena, "label '%c' has sizes %lld and %lld", c,
                                          (long long)size[c], (long long)d));
      }
    }
  return true;
}

/* Step 2: a batched MatMul of two operands, when it applies. */
static bool lower_matmul(Lowering *L, Tensor **x, const Term *t, const Term *out,
                         const int64_t *size, Tensor *y) {
  DType dt = x[0]->dtype;
  if (dt != DT_FLOAT && dt != DT_FLOAT16 && dt != DT_BFLOAT16)
    return false;
  /* Batch: in both and the output; contracted: in both only; kept: in one
     and the output. A label in one input only and not in the output
     (a sum) leaves it to step 3, as does a broadcast ellipsis dim. */
  Term batch = {0}, contracted = {0}, own[2] = {{0}, {0}};
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < t[k].n; i++) {
      int c = t[k].label[i], other = find(&t[1 - k], c), o = find(out, c);
      if (x[k]->dims[i] != size[c])
        return false;
      if (other < 0 && o < 0)
        return false;
      if (other < 0)
        own[k].label[own[k].n++] = c;
      else if (k == 0 && o >= 0)
        batch.label[batch.n++] = c;
      else if (k == 0)
        contracted.label[contracted.n++] = c;
    }
  /* A: (batch, own A, contracted) -> [batch, M, K]; B: (batch,
     contracted, own B) -> [batch, K, N]. */
  const Term *order[2][3] = {{&batch, &own[0], &contracted}, {&batch, &contracted, &own[1]}};
  Tensor *m[2];
  int64_t M = 1, N = 1, K = 1;
  for (int i = 0; i < own[0].n; i++)
    M *= size[own[0].label[i]];
  for (int i = 0; i < own[1].n; i++)
    N *= size[own[1].label[i]];
  for (int i = 0; i < contracted.n; i++)
    K *= size[contracted.label[i]];
  for (int k = 0; k < 2; k++) {
    int perm[IR_MAX_RANK], r = 0;
    for (int part = 0; part < 3; part++)
      for (int i = 0; i < order[k][part]->n; i++)
        perm[r++] = find(&t[k], order[k][part]->label[i]);
    Tensor *moved = transpose(L, x[k], perm);
    int64_t dims[IR_MAX_RANK];
    for (int i = 0; i < batch.n; i++)
      dims[i] = size[batch.label[i]];
    dims[batch.n] = k == 0 ? M : K;
    dims[batch.n + 1] = k == 0 ? K : N;
    m[k] = reshape(L, moved, batch.n + 2, dims, NULL);
  }
  Node *mm = add(L, OP_MATMUL, m, 2, NULL);
  /* The product's labels: batch, own A, own B; then the output's order. */
  Term got = batch;
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < own[0].n; i++)
    got.label[got.n++] = own[0].label[i];
  for (int i = 0; i < own[1].n; i++)
    got.label[got.n++] = own[1].label[i];
  for (int i = 0; i < got.n; i++)
    dims[i] = size[got.label[i]];
  int perm[IR_MAX_RANK];
  bool same = true;
  for (int i = 0; i < out->n; i++) {
    perm[i] = find(&got, out->label[i]);
    same = same && perm[i] == i;
  }
  if (same) {
    reshape(L, mm->out[0], got.n, dims, y);
    return true;
  }
  Tensor *shaped = reshape(L, mm->out[0], got.n, dims, NULL);
  Node *n = add(L, OP_TRANSPOSE, &shaped, 1, y);
  int64_t p[IR_MAX_RANK];
  for (int i = 0; i < out->n; i++)
    p[i] = perm[i];
  Attr *a = node_set_attr(L->g, n, "perm", ATTR_INTS);
  a->n = out->n;
  a->ints = arena_dup(L->g->arena, p, sizeof(int64_t) * (size_t)out->n);
  return true;
}

/* Step 3: every operand over all labels, multiplied, contracted labels
   summed. */
static bool lower_products(Lowering *L, Tensor **x, const Term *t, int nin, const Term *out,
                           const int64_t *size, Tensor *y) {
  Term all = *out;
  for (int k = 0; k < nin; k++)
    for (int i = 0; i < t[k].n; i++)
      if (find(&all, t[k].label[i]) < 0) {
        if (all.n == IR_MAX_RANK)
          return fail(L, "the equation has more labels than opc's rank limit");
        all.label[all.n++] = t[k].label[i];
      }
  bool sums = all.n > out->n;
  Tensor *product = NULL;
  for (int k = 0; k < nin; k++) {
    /* Its labels in the order of `all`, then 1 for those it lacks. */
    int perm[IR_MAX_RANK], r = 0;
    int64_t dims[IR_MAX_RANK];
    for (int i = 0; i < all.n; i++) {
      int at = find(&t[k], all.label[i]);
      if (at >= 0)
        perm[r++] = at;
      dims[i] = at >= 0 ? x[k]->dims[at] : 1;
    }
    Tensor *moved = transpose(L, x[k], perm);
    bool last = k == nin - 1 && !sums;
    Tensor *v = reshape(L, moved, all.n, dims, nin == 1 && last ? y : NULL);
    if (k == 0) {
      product = v;
      continue;
    }
    Tensor *in[2] = {product, v};
    Node *n = add(L, OP_MUL, in, 2, last ? y : NULL);
    int64_t both[IR_MAX_RANK];
    for (int i = 0; i < all.n; i++)
      both[i] = size[all.label[i]];
    tensor_set_shape(n->out[0], all.n, both);
    product = n->out[0];
  }
  if (!sums)
    return true;
  int64_t axes[IR_MAX_RANK];
  for (int i = out->n; i < all.n; i++)
    axes[i - out->n] = i;
  bool axes_input = L->g->opset >= 13;
  Tensor *in[2] = {product, axes_input ? import_ints_constant(L->g, L->name, &L->count, axes, all.n - out->n) : NULL};
  Node *n = add(L, OP_REDUCE_SUM, in, axes_input ? 2 : 1, y);
  node_set_attr(L->g, n, "keepdims", ATTR_INT)->i = 0;
  if (!axes_input) {
    Attr *a = node_set_attr(L->g, n, "axes", ATTR_INTS);
    a->n = all.n - out->n;
    a->ints = arena_dup(L->g->arena, axes, sizeof(int64_t) * (size_t)a->n);
  }
  return true;
}

bool lower_einsum(Importer *im, const char *name, const char *equation, Tensor **in, int nin,
                  Tensor *y) {
  Lowering L = {.im = im, .g = im->g, .name = name};
  if (nin < 1 || nin > MAX_OPERANDS)
    return fail(&L, "takes 1 to 16 inputs");
  Tensor *x[MAX_OPERANDS];
  for (int k = 0; k < nin; k++) {
    /* The lowering needs the operands' shapes now. */
    int errors = ir_error_count();
    graph_evaluate(im->g, in[k]);
    if (ir_error_count() != errors) {
      im->failed = true; /* reported where it went wrong */
      return false;
    }
    for (int d = 0; d < in[k]->rank; d++)
      if (in[k]->dims[d] == 0)
        return fail(&L, "an empty input is not supported");
    if (in[k]->dtype != in[0]->dtype)
      return fail(&L, "the inputs must have one type");
    x[k] = in[k];
  }
  Term t[MAX_OPERANDS], out;
  if (!parse(&L, equation, x, nin, t, &out))
    return false;
  for (int k = 0; k < nin; k++)
    if (!take_diagonals(&L, &x[k], &t[k]))
      return false;
  int64_t size[MAX_LABELS];
  if (!label_sizes(&L, x, t, nin, size))
    return false;
  y->dtype = x[0]->dtype;
  if (nin == 2 && lower_matmul(&L, x, t, &out, size, y))
    return true;
  return lower_products(&L, x, t, nin, &out, size, y);
}
