/*
 * sequence.c - sequences and optionals whose structure is known at compile
 * time, lowered at import. The IR has tensors only: a sequence becomes the
 * list of the IR tensors it holds, an optional the tensor (or sequence) it
 * holds or nothing. Each ONNX value of such a type is a placeholder tensor
 * (the one its name resolves to) that no IR node reads or writes; the
 * importer keeps, beside it, what it stands for. The operators then pick
 * from those lists at compile time (SequenceAt, SequenceInsert,
 * SequenceErase, SequenceLength, Optional...), or become IR kinds that run
 * at run time (SplitToSequence: Slices; ConcatFromSequence: Concat, with
 * Unsqueezes for new_axis; SequenceMap: its body once per element). A
 * position, a split or a presence that depends on run-time data is refused
 * with the input to bind, and so is a sequence or optional at the graph's
 * inputs or outputs, whose structure the caller would decide.
 */
#include <stdlib.h>
#include <string.h>

#include "import.h"

enum { MAX_ELEMENTS = 4096 }; /* a sequence's elements, each a tensor of the IR */

/* What the placeholder `holder` stands for. */
struct SeqValue {
  const Tensor *holder;
  bool optional; /* an optional: present or empty; else a sequence */
  bool present;  /* an optional that holds something */
  bool is_seq;   /* holds a sequence (items[0..n)); else one tensor, items[0] */
  int n;
  Tensor **items;
};

static const char *const sequence_ops[] = {
    "ConcatFromSequence", "Optional",        "OptionalGetElement", "OptionalHasElement",
    "SequenceAt",         "SequenceConstruct", "SequenceEmpty",     "SequenceErase",
    "SequenceInsert",     "SequenceLength",  "SequenceMap",        "SplitToSequence",
    NULL};

bool is_sequence_op(const char *op_type) {
  for (int i = 0; sequence_ops[i]; i++)
    if (strcmp(op_type, sequence_ops[i]) == 0)
      return true;
  return false;
}

const SeqValue *seq_of(const Importer *im, const Tensor *t) {
  for (int i = 0; t && i < im->nseqs; i++)
    if (im->seqs[i]->holder == t)
      return im->seqs[i];
  return NULL;
}

/* "a sequence", "an optional": what a message calls v. */
const char *seq_kind_str(const SeqValue *v) { return v->optional ? "an optional" : "a sequence"; }

/* Records that `holder` stands for v (copied). */
static void remember(Importer *im, Tensor *holder, SeqValue v) {
  if (!holder)
    return; /* an output nobody reads */
  if (im->nseqs == im->seqcap) {
    im->seqcap = im->seqcap ? 2 * im->seqcap : 16;
    im->seqs = realloc(im->seqs, sizeof *im->seqs * (size_t)im->seqcap);
  }
  SeqValue *copy = arena_alloc(im->g->arena, sizeof *copy);
  *copy = v;
  copy->holder = holder;
  copy->items = arena_alloc(im->g->arena, sizeof(Tensor *) * (size_t)(v.n + 1));
  for (int i = 0; i < v.n; i++)
    copy->items[i] = v.items[i];
  im->seqs[im->nseqs++] = copy;
}

static SeqValue sequence(int n, Tensor **items) {
  return (SeqValue){.is_seq = true, .n = n, .items = items};
}

/* `to` takes from's value: an Identity node for a tensor, the same list for
   a sequence or optional. */
void connect_value(Importer *im, const char *name, Tensor *from, Tensor *to) {
  const SeqValue *v = seq_of(im, from);
  if (v) {
    remember(im, to, *v);
    return;
  }
  Graph *g = im->g;
  Node *id = graph_add_node(g, OP_IDENTITY, name, 1, 1);
  id->in[0] = from;
  id->out[0] = to;
}

/* ------------------------------------------------------------ helpers */

typedef struct Lowering {
  Importer *im;
  Graph *g;
  const Onnx__NodeProto *np;
  const char *name, *op;
  int count; /* nodes and constants made, for their names */
} Lowering;

static bool fail(Lowering *L, const char *msg) {
  ir_error(L->g, NULL, "node '%s' (%s): %s", L->name, L->op, msg);
  L->im->failed = true;
  return false;
}

/* Input k's tensor; NULL when absent (or undefined: reported). */
static Tensor *input(Lowering *L, size_t k) {
  if (k >= L->np->n_input || !*L->np->input[k])
    return NULL;
  Tensor *t = import_lookup(L->im, L->np->input[k]);
  if (!t)
    fail(L, arena_printf(L->g->arena, "input '%s' is not defined by any node, initializer or "
                         "graph input", L->np->input[k]));
  return t;
}

/* Output k's tensor; NULL when nobody reads it. */
static Tensor *output(Lowering *L, size_t k) {
  if (k >= L->np->n_output || !*L->np->output[k])
    return NULL;
  return import_lookup(L->im, L->np->output[k]);
}

/* Input k, which must be a sequence; NULL after an error. */
static const SeqValue *sequence_input(Lowering *L, size_t k) {
  if (k >= L->np->n_input || !*L->np->input[k])
    return fail(L, "needs its sequence input"), NULL;
  Tensor *t = input(L, k);
  if (!t)
    return NULL;
  const SeqValue *v = seq_of(L->im, t);
  if (!v || v->optional)
    return fail(L, arena_printf(L->g->arena, "input '%s' is not a sequence", t->name)), NULL;
  return v;
}

static int64_t attr_int(const Onnx__NodeProto *np, const char *attr, int64_t fallback) {
  for (size_t i = 0; i < np->n_attribute; i++)
    if (strcmp(proto_str(np->attribute[i]->name), attr) == 0)
      return np->attribute[i]->i;
  return fallback;
}

/* A scalar constant written into `t` (SequenceLength, OptionalHasElement). */
static void set_scalar(Lowering *L, Tensor *t, DType dtype, int64_t v) {
  if (!t)
    return;
  t->dtype = dtype;
  tensor_set_shape(t, 0, NULL);
  t->i64 = arena_dup(L->g->arena, &v, sizeof v);
}

static Node *add(Lowering *L, OpKind op, int nin, Tensor *out) {
  Node *n = graph_add_node(L->g, op, arena_printf(L->g->arena, "%s/%s%d", L->name, op_name(op),
                                                  L->count++), nin, 1);
  n->out[0] = out ? out : graph_add_tensor(L->g, NULL);
  return n;
}

/* Unsqueeze or Squeeze (op) of x at `axis`, in the form the opset takes:
   axes an input from opset 13, an attribute before. */
static Tensor *squeeze_op(Lowering *L, OpKind op, Tensor *x, int64_t axis) {
  bool axes_input = L->g->opset >= 13;
  Node *n = add(L, op, axes_input ? 2 : 1, NULL);
  n->in[0] = x;
  if (axes_input) {
    n->in[1] = import_ints_constant(L->g, L->name, &L->count, &axis, 1);
  } else {
    Attr *a = node_set_attr(L->g, n, "axes", ATTR_INTS);
    a->n = 1;
    a->ints = arena_dup(L->g->arena, &axis, sizeof axis);
  }
  return n->out[0];
}

/*
 * The position input k, known at compile time, with the spec's negative
 * positions counted from the end: within [-n, n) (SequenceAt,
 * SequenceErase) or [-n, n] (SequenceInsert, `at_end`). `fallback` when
 * the input is absent. False after an error.
 */
static bool position(Lowering *L, size_t k, int n, bool at_end, int64_t fallback, int64_t *pos) {
  Tensor *p = input(L, k);
  if (!p) {
    *pos = fallback;
    return !L->im->failed;
  }
  if (!import_known_now(L->im, L->name, L->op, p, "position"))
    return false;
  if ((p->dtype != DT_INT64 && p->dtype != DT_INT32) || tensor_numel(p) != 1 || !p->i64)
    return fail(L, arena_printf(L->g->arena, "its position '%s' must be one int32 or int64",
                                p->name));
  int64_t v = p->i64[0], last = at_end ? n : n - 1;
  if (v < -(int64_t)n || v > last)
    return fail(L, arena_printf(L->g->arena, "position %lld is outside [%d, %lld] for a "
                                "sequence of %d tensors", (long long)v, -n, (long long)last, n));
  *pos = v < 0 ? v + n : v;
  return true;
}

/* ------------------------------------------------------ the operators */

static void sequence_empty(Lowering *L) { remember(L->im, output(L, 0), sequence(0, NULL)); }

static void sequence_construct(Lowering *L) {
  int n = (int)L->np->n_input;
  Tensor **items = arena_alloc(L->g->arena, sizeof(Tensor *) * (size_t)(n + 1));
  for (int i = 0; i < n; i++) {
    items[i] = input(L, (size_t)i);
    if (!items[i]) {
      if (!L->im->failed)
        fail(L, "takes no absent inputs");
      return;
    }
    if (seq_of(L->im, items[i])) {
      fail(L, arena_printf(L->g->arena, "input '%s' is %s; a sequence holds tensors",
                           items[i]->name, seq_kind_str(seq_of(L->im, items[i]))));
      return;
    }
  }
  if (n == 0) {
    fail(L, "takes at least one tensor");
    return;
  }
  remember(L->im, output(L, 0), sequence(n, items));
}

static void sequence_insert(Lowering *L) {
  const SeqValue *s = sequence_input(L, 0);
  Tensor *t = s ? input(L, 1) : NULL;
  int64_t pos;
  if (!t) {
    if (s && !L->im->failed)
      fail(L, "needs the tensor to insert");
    return;
  }
  if (seq_of(L->im, t)) {
    fail(L, arena_printf(L->g->arena, "input '%s' is %s; a sequence holds tensors", t->name,
                         seq_kind_str(seq_of(L->im, t))));
    return;
  }
  if (s->n >= MAX_ELEMENTS) {
    fail(L, arena_printf(L->g->arena, "a sequence of more than %d tensors is beyond opc",
                         MAX_ELEMENTS));
    return;
  }
  if (!position(L, 2, s->n, true, s->n, &pos))
    return;
  Tensor **items = arena_alloc(L->g->arena, sizeof(Tensor *) * (size_t)(s->n + 2));
  for (int i = 0, j = 0; i <= s->n; i++)
    items[i] = i == pos ? t : s->items[j++];
  remember(L->im, output(L, 0), sequence(s->n + 1, items));
}

static void sequence_at(Lowering *L) {
  const SeqValue *s = sequence_input(L, 0);
  int64_t pos;
  if (!s || !position(L, 1, s->n, false, 0, &pos))
    return;
  if (!input(L, 1) && !L->im->failed) {
    fail(L, "needs its position input");
    return;
  }
  Tensor *y = output(L, 0);
  if (y)
    connect_value(L->im, arena_printf(L->g->arena, "%s/at", L->name), s->items[pos], y);
}

static void sequence_erase(Lowering *L) {
  const SeqValue *s = sequence_input(L, 0);
  int64_t pos;
  if (!s)
    return;
  if (s->n == 0) {
    fail(L, "erases from an empty sequence");
    return;
  }
  if (!position(L, 1, s->n, false, s->n - 1, &pos))
    return;
  Tensor **items = arena_alloc(L->g->arena, sizeof(Tensor *) * (size_t)s->n);
  for (int i = 0, j = 0; i < s->n; i++)
    if (i != pos)
      items[j++] = s->items[i];
  remember(L->im, output(L, 0), sequence(s->n - 1, items));
}

static void sequence_length(Lowering *L) {
  const SeqValue *s = sequence_input(L, 0);
  if (s)
    set_scalar(L, output(L, 0), DT_INT64, s->n);
}

/* Concat of the elements along axis; with new_axis, each first gains that
   axis (Unsqueeze), so they stack. */
static void concat_from_sequence(Lowering *L) {
  const SeqValue *s = sequence_input(L, 0);
  Tensor *y = output(L, 0);
  if (!s || !y)
    return;
  if (s->n == 0) {
    fail(L, "concatenates an empty sequence, whose type and shape opc cannot know");
    return;
  }
  int64_t axis = attr_int(L->np, "axis", INT64_MIN), new_axis = attr_int(L->np, "new_axis", 0);
  if (axis == INT64_MIN) {
    fail(L, "needs its attribute 'axis'");
    return;
  }
  Node *cat = add(L, OP_CONCAT, s->n, y);
  node_set_attr(L->g, cat, "axis", ATTR_INT)->i = axis;
  for (int i = 0; i < s->n; i++)
    cat->in[i] = new_axis ? squeeze_op(L, OP_UNSQUEEZE, s->items[i], axis) : s->items[i];
}

/* The sizes of the pieces: `split` known now (a scalar: pieces of that
   size, the last smaller; a list: the sizes), or pieces of 1. */
static int split_sizes(Lowering *L, Tensor *split, int64_t dim, int64_t *sizes) {
  if (!split) {
    if (dim > MAX_ELEMENTS)
      return fail(L, arena_printf(L->g->arena, "splits into %lld tensors, more than opc's "
                                  "limit of %d", (long long)dim, MAX_ELEMENTS)), -1;
    for (int64_t i = 0; i < dim; i++)
      sizes[i] = 1;
    return (int)dim;
  }
  if (!import_known_now(L->im, L->name, L->op, split, "split"))
    return -1;
  int64_t count = tensor_numel(split);
  if ((split->dtype != DT_INT64 && split->dtype != DT_INT32) || split->rank > 1 || !split->i64)
    return fail(L, "its split must be an int32 or int64 scalar or list"), -1;
  if (split->rank == 0) {
    int64_t size = split->i64[0];
    if (size <= 0)
      return fail(L, "its split must be positive"), -1;
    count = (dim + size - 1) / size;
    if (count > MAX_ELEMENTS)
      return fail(L, "splits into more tensors than opc's limit"), -1;
    for (int64_t i = 0; i < count; i++)
      sizes[i] = i < count - 1 ? size : dim - size * (count - 1);
    return (int)count;
  }
  if (count > MAX_ELEMENTS)
    return fail(L, "splits into more tensors than opc's limit"), -1;
  int64_t sum = 0;
  for (int64_t i = 0; i < count; i++) {
    sizes[i] = split->i64[i];
    if (sizes[i] < 0)
      return fail(L, "its split has a negative size"), -1;
    sum += sizes[i];
  }
  if (sum != dim)
    return fail(L, arena_printf(L->g->arena, "its split sums to %lld, but the axis has %lld",
                                (long long)sum, (long long)dim)), -1;
  return (int)count;
}

/* A Slice of each piece along axis; without a split and keepdims=0, each
   loses the axis (Squeeze). */
static void split_to_sequence(Lowering *L) {
  Tensor *x = input(L, 0), *split = input(L, 1);
  if (!x || L->im->failed)
    return;
  if (seq_of(L->im, x)) {
    fail(L, arena_printf(L->g->arena, "input '%s' is %s, not a tensor", x->name,
                         seq_kind_str(seq_of(L->im, x))));
    return;
  }
  int errors = ir_error_count();
  graph_evaluate(L->g, x); /* the lowering needs x's shape now */
  if (ir_error_count() != errors) {
    L->im->failed = true;
    return;
  }
  int64_t axis = attr_int(L->np, "axis", 0), keepdims = attr_int(L->np, "keepdims", 1);
  if (axis < -x->rank || axis >= x->rank) {
    fail(L, arena_printf(L->g->arena, "axis %lld is outside [%d, %d] for input '%s' of rank %d",
                         (long long)axis, -x->rank, x->rank - 1, x->name, x->rank));
    return;
  }
  if (axis < 0)
    axis += x->rank;
  int64_t *sizes = calloc(MAX_ELEMENTS + 1, sizeof *sizes);
  Tensor **items = arena_alloc(L->g->arena, sizeof(Tensor *) * (MAX_ELEMENTS + 1));
  int count = sizes ? split_sizes(L, split, x->dims[axis], sizes) : -1;
  for (int i = 0, start = 0; i < count; start += (int)sizes[i], i++) {
    int64_t begin = start, end = start + sizes[i];
    Node *n = add(L, OP_SLICE, 4, NULL);
    n->in[0] = x;
    n->in[1] = import_ints_constant(L->g, L->name, &L->count, &begin, 1);
    n->in[2] = import_ints_constant(L->g, L->name, &L->count, &end, 1);
    n->in[3] = import_ints_constant(L->g, L->name, &L->count, &axis, 1);
    items[i] = split || keepdims ? n->out[0] : squeeze_op(L, OP_SQUEEZE, n->out[0], axis);
  }
  free(sizes);
  if (count >= 0)
    remember(L->im, output(L, 0), sequence(count, items));
}

/* SequenceMap: the body once per element, in a scope of its own
   ("map/2/..."); its inputs the elements of the sequences at that
   position and the tensors as they are. */
static void sequence_map(Lowering *L) {
  const Onnx__GraphProto *body = import_graph_attr(L->np, "body");
  size_t nin = L->np->n_input, nout = L->np->n_output;
  if (!body || nin < 1 || body->n_input != nin || body->n_output != nout || nout < 1) {
    fail(L, "expects a sequence, further inputs, and a body graph with an input for each and "
            "an output for each of the node's");
    return;
  }
  const SeqValue *first = sequence_input(L, 0);
  if (!first)
    return;
  const SeqValue **seqs = arena_alloc(L->g->arena, sizeof *seqs * nin);
  Tensor **in = arena_alloc(L->g->arena, sizeof *in * (nin + 1));
  for (size_t k = 0; k < nin; k++) {
    Tensor *t = input(L, k);
    if (!t) {
      if (!L->im->failed)
        fail(L, "takes no absent inputs");
      return;
    }
    seqs[k] = seq_of(L->im, t);
    if (seqs[k] && seqs[k]->optional) {
      fail(L, arena_printf(L->g->arena, "input '%s' is an optional; SequenceMap takes sequences "
                           "and tensors", t->name));
      return;
    }
    if (seqs[k] && seqs[k]->n != first->n) {
      fail(L, arena_printf(L->g->arena, "input '%s' is %s of another length than '%s'", t->name,
                           seq_kind_str(seqs[k]), L->np->input[0]));
      return;
    }
    in[k] = t;
  }
  Tensor ***outs = arena_alloc(L->g->arena, sizeof *outs * nout);
  for (size_t j = 0; j < nout; j++)
    outs[j] = arena_alloc(L->g->arena, sizeof(Tensor *) * (size_t)(first->n + 1));
  Tensor **got = arena_alloc(L->g->arena, sizeof *got * (nout + 1));
  for (int i = 0; i < first->n; i++) {
    if (L->im->if_depth >= 64 || L->g->nnodes > LIMIT_NODES) {
      fail(L, arena_printf(L->g->arena, "its body, imported once an element, passes the limit "
                           "of %d nodes or is nested too deep", LIMIT_NODES));
      return;
    }
    for (size_t k = 0; k < nin; k++)
      if (seqs[k])
        in[k] = seqs[k]->items[i];
    L->im->if_depth++;
    bool ok = import_subgraph(L->im, body, arena_printf(L->g->arena, "%s/%d", L->name, i), in, got);
    L->im->if_depth--;
    if (!ok)
      return;
    for (size_t j = 0; j < nout; j++) {
      if (!got[j] || seq_of(L->im, got[j])) {
        fail(L, arena_printf(L->g->arena, "body output '%s' is %s", proto_str(body->output[j]->name),
                             got[j] ? "not a tensor" : "not produced by the body"));
        return;
      }
      outs[j][i] = got[j];
    }
  }
  for (size_t j = 0; j < nout; j++)
    remember(L->im, output(L, j), sequence(first->n, outs[j]));
}

static void optional(Lowering *L) {
  Tensor *x = input(L, 0);
  if (L->im->failed)
    return;
  Tensor *one[1] = {x};
  SeqValue v = {.optional = true, .present = x != NULL, .n = x ? 1 : 0, .items = one};
  const SeqValue *s = seq_of(L->im, x);
  if (s && s->optional) {
    fail(L, "an optional of an optional is not supported");
    return;
  }
  if (s) {
    v.is_seq = true;
    v.n = s->n;
    v.items = s->items;
  }
  remember(L->im, output(L, 0), v);
}

/* A tensor or a sequence holds an element (from opset 18 they may stand
   where an optional does); an optional may not, and an absent input does
   not. */
static void optional_has_element(Lowering *L) {
  Tensor *x = input(L, 0);
  if (L->im->failed)
    return;
  const SeqValue *s = seq_of(L->im, x);
  set_scalar(L, output(L, 0), DT_BOOL, x && (!s || !s->optional || s->present));
}

static void optional_get_element(Lowering *L) {
  Tensor *x = input(L, 0), *y = output(L, 0);
  if (L->im->failed)
    return;
  if (!x) {
    fail(L, "needs its input");
    return;
  }
  const SeqValue *s = seq_of(L->im, x);
  if (s && s->optional && !s->present) {
    fail(L, arena_printf(L->g->arena, "the optional '%s' is empty, so it has no element to get",
                         x->name));
    return;
  }
  if (!y)
    return;
  if (s && s->optional && s->is_seq)
    remember(L->im, y, sequence(s->n, s->items));
  else
    connect_value(L->im, arena_printf(L->g->arena, "%s/get", L->name),
                  s && s->optional ? s->items[0] : x, y);
}

void import_sequence_op(Importer *im, const Onnx__NodeProto *np, const char *name) {
  static const struct {
    const char *op;
    void (*lower)(Lowering *);
  } lowerings[] = {
      {"ConcatFromSequence", concat_from_sequence}, {"Optional", optional},
      {"OptionalGetElement", optional_get_element}, {"OptionalHasElement", optional_has_element},
      {"SequenceAt", sequence_at},                  {"SequenceConstruct", sequence_construct},
      {"SequenceEmpty", sequence_empty},            {"SequenceErase", sequence_erase},
      {"SequenceInsert", sequence_insert},          {"SequenceLength", sequence_length},
      {"SequenceMap", sequence_map},                {"SplitToSequence", split_to_sequence},
  };
  if (im->failed)
    return; /* positions cannot be evaluated on a graph that did not import */
  for (size_t i = 0; i < sizeof lowerings / sizeof lowerings[0]; i++)
    if (strcmp(proto_str(np->op_type), lowerings[i].op) == 0) {
      Lowering L = {.im = im, .g = im->g, .np = np, .name = name, .op = lowerings[i].op};
      lowerings[i].lower(&L);
      return;
    }
}

/* ------------------------------------------------- bound graph inputs */

/* The element type a TypeProto of a tensor declares; 0 when it is not a
   tensor's or declares none. */
static int declared_elem(const Onnx__TypeProto *tp) {
  bool tensor = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  return tensor && tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : 0;
}

/*
 * --const-input of a sequence or optional graph input: the file's tensors
 * become constants and `holder` stands for them, so the structure is known
 * at compile time like any bound input's value. The declared types must
 * hold: a sequence of tensors of the declared element type, an optional
 * of a tensor or of such a sequence.
 */
void bind_sequence_input(Importer *im, const ConstInput *ci, const Onnx__TypeProto *tp,
                         Tensor *holder) {
  bool optional = tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
  const Onnx__TypeProto *inner = optional ? tp->optional_type->elem_type : tp;
  bool of_seq = inner && inner->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
  const Onnx__TypeProto *elem = of_seq ? inner->sequence_type->elem_type : inner;
  if (!elem || elem->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
    ir_error(im->g, NULL, "--const-input %s=%s: input '%s' is declared neither a sequence of "
             "tensors nor an optional of a tensor or of one", ci->name, ci->path, ci->name);
    im->failed = true;
    return;
  }
  SeqValue v = {.optional = optional, .is_seq = of_seq};
  if (!const_input_load_list(im, ci, optional, of_seq, &v.present, &v.n, &v.items)) {
    im->failed = true;
    return;
  }
  int want = declared_elem(elem);
  for (int i = 0; i < v.n; i++)
    if (want && v.items[i]->dtype != (DType)want) {
      ir_error(im->g, NULL, "--const-input %s=%s: the file holds %s data but input '%s' is "
               "declared to hold %s", ci->name, ci->path, dtype_name(v.items[i]->dtype),
               ci->name, dtype_name((DType)want));
      im->failed = true;
      return;
    }
  remember(im, holder, v);
}
