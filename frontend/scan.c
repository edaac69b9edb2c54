/*
 * scan.c - Scan, unrolled by the importer, and the stacking of per-step
 * values that Scan and Loop share.
 *
 * A Scan runs as many steps as its scan inputs are long along their scan
 * axes: static dims, so the count is always known at compile time. The
 * body is imported once a step, in a scope of its own ("scan/3/..."), the
 * state variables threaded from one step to the next. A step's slice of a
 * scan input is a Gather of one index along its axis, counted from the end
 * where the input's direction is 1; each scan output is the steps' values
 * stacked along its axis (an Unsqueeze of each, then one Concat), the last
 * step's first where its direction is 1.
 *
 * Opset 8's Scan has a batch axis first in every state and scan input
 * (the scan axis is then axis 1) and an optional sequence_lens. Its steps
 * run once per batch entry, on that entry's Gather, and every result is
 * stacked along the batch axis. sequence_lens must be absent or, known at
 * compile time, the full length for every entry: a shorter one, which
 * stops that entry early and pads its outputs, is refused.
 */
#include <stdlib.h>
#include <string.h>

#include "import.h"

enum { MAX_STEPS = 1024, MAX_VALUES = 64 };

typedef struct ScanLowering {
  Importer *im;
  Graph *g;
  const char *name; /* the Scan node's */
  int count;        /* nodes made so far, for their names */
} ScanLowering;

static bool fail(ScanLowering *L, const char *msg, const char *detail) {
  ir_error(L->g, NULL, "node '%s' (Scan): %s%s", L->name, msg, detail ? detail : "");
  L->im->failed = true;
  return false;
}

static const char *fresh(ScanLowering *L, const char *what) {
  return arena_printf(L->g->arena, "%s/%s%d", L->name, what, L->count++);
}

/* Attribute `attr`'s ints into v (up to max; *n of them; an INT
   attribute is one), false when absent. */
static bool proto_ints(const Onnx__NodeProto *np, const char *attr, int64_t *v, int max, int *n) {
  for (size_t i = 0; i < np->n_attribute; i++) {
    const Onnx__AttributeProto *a = np->attribute[i];
    if (strcmp(proto_str(a->name), attr) != 0)
      continue;
    if (a->n_ints > 0 || a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) {
      *n = (int)a->n_ints < max ? (int)a->n_ints : max;
      for (int k = 0; k < *n; k++)
        v[k] = a->ints[k];
    } else {
      *n = 1;
      v[0] = a->i;
    }
    return true;
  }
  *n = 0;
  return false;
}

/* x's slice at `index` along `axis`, that axis gone: a Gather. */
static Tensor *slice_at(ScanLowering *L, Tensor *x, int axis, int64_t index) {
  Graph *g = L->g;
  Tensor *at = graph_add_tensor(g, fresh(L, "index"));
  at->dtype = DT_INT64;
  tensor_set_shape(at, 0, NULL);
  at->i64 = arena_dup(g->arena, &index, sizeof index);
  Node *n = graph_add_node(g, OP_GATHER, fresh(L, "slice"), 2, 1);
  node_set_attr(g, n, "axis", ATTR_INT)->i = axis;
  n->in[0] = x;
  n->in[1] = at;
  return n->out[0] = graph_add_tensor(g, NULL);
}

void import_stack(Importer *im, const char *name, Tensor **values, int count, int axis,
                  Tensor *out) {
  Graph *g = im->g;
  int64_t where = axis, one = 1;
  Tensor *axes = graph_add_tensor(g, arena_printf(g->arena, "%s/%s/axes", name, out->name));
  axes->dtype = DT_INT64;
  tensor_set_shape(axes, 1, &one);
  axes->i64 = arena_dup(g->arena, &where, sizeof where);
  Node *cat = graph_add_node(g, OP_CONCAT, arena_printf(g->arena, "%s/%s", name, out->name),
                             count, 1);
  node_set_attr(g, cat, "axis", ATTR_INT)->i = axis;
  cat->out[0] = out;
  bool axes_input = g->opset >= 13;
  for (int k = 0; k < count; k++) {
    Node *u = graph_add_node(g, OP_UNSQUEEZE,
                             arena_printf(g->arena, "%s/%s/%d", name, out->name, k),
                             axes_input ? 2 : 1, 1);
    u->in[0] = values[k];
    if (axes_input) {
      u->in[1] = axes;
    } else {
      Attr *a = node_set_attr(g, u, "axes", ATTR_INTS);
      a->n = 1;
      a->ints = axes->i64;
    }
    cat->in[k] = u->out[0] = graph_add_tensor(g, NULL);
  }
}

/* What one run of the steps reads and makes. */
typedef struct Steps {
  const Onnx__GraphProto *body;
  int nstates, nscans, nouts;       /* N, M, K */
  Tensor *state[MAX_VALUES];        /* in: the initial values; out: the final ones */
  Tensor *scan[MAX_VALUES];         /* the scan inputs */
  int64_t in_axis[MAX_VALUES], in_reverse[MAX_VALUES];
  int64_t length;
  Tensor **per_step;                /* out: [k * length + t], scan output k of step t */
} Steps;

/* Runs the body `length` times under `scope`. */
static bool run_steps(ScanLowering *L, Steps *s, const char *scope) {
  Tensor *in[2 * MAX_VALUES], *outs[2 * MAX_VALUES];
  for (int64_t t = 0; t < s->length && !L->im->failed; t++) {
    if (L->g->nnodes > LIMIT_NODES)
      return fail(L, "unrolled, it passes opc's limit on nodes", NULL);
    for (int i = 0; i < s->nstates; i++)
      in[i] = s->state[i];
    for (int j = 0; j < s->nscans; j++)
      in[s->nstates + j] = slice_at(L, s->scan[j], (int)s->in_axis[j],
                                    s->in_reverse[j] ? s->length - 1 - t : t);
    const char *step = arena_printf(L->g->arena, "%s/%lld", scope, (long long)t);
    L->im->if_depth++;
    bool imported = import_subgraph(L->im, s->body, step, in, outs);
    L->im->if_depth--;
    if (!imported)
      return false;
    for (int i = 0; i < s->nstates + s->nouts; i++)
      if (!outs[i])
        return fail(L, "a body output is not produced by the body: ",
                    proto_str(s->body->output[i]->name));
    for (int i = 0; i < s->nstates; i++)
      s->state[i] = outs[i];
    for (int k = 0; k < s->nouts; k++)
      s->per_step[k * s->length + t] = outs[s->nstates + k];
  }
  return !L->im->failed;
}

/* A tensor's shape, inferred now; false, reported, where it cannot be. */
static bool shape_now(ScanLowering *L, Tensor *t) {
  int before = ir_error_count();
  graph_evaluate(L->g, t);
  if (ir_error_count() != before) {
    L->im->failed = true;
    return false;
  }
  return t->dtype != DT_UNDEFINED || fail(L, "the shape of its input is unknown: ", t->name);
}

/* The scan inputs' axes (normalised) and common length. */
static bool scan_lengths(ScanLowering *L, Steps *s, int first_axis) {
  s->length = -1;
  for (int j = 0; j < s->nscans; j++) {
    Tensor *x = s->scan[j];
    if (!shape_now(L, x))
      return false;
    int64_t axis = s->in_axis[j] + first_axis;
    if (axis < 0)
      axis += x->rank;
    if (axis < first_axis || axis >= x->rank)
      return fail(L, "a scan input axis is outside its input's rank: ", x->name);
    s->in_axis[j] = axis;
    if (s->length >= 0 && x->dims[axis] != s->length)
      return fail(L, "its scan inputs differ in length along their scan axes: ", x->name);
    s->length = x->dims[axis];
  }
  if (s->length > MAX_STEPS)
    return fail(L, "it runs more than 1024 steps, for opc, which unrolls it", NULL);
  if (s->length == 0)
    return fail(L, "it runs no step, so its scan outputs have no shape opc can know", NULL);
  return true;
}

/* The node's outputs: the final states, then each scan output's values
   stacked along its axis, in its direction. `values` holds, for output
   k, `count` values in step order. */
static void write_outputs(ScanLowering *L, const Onnx__NodeProto *np, Steps *s, Tensor **values,
                          int count, const int64_t *axes, const int64_t *reverse) {
  for (int i = 0; i < s->nstates + s->nouts && !L->im->failed; i++) {
    Tensor *to = *np->output[i] ? import_lookup(L->im, np->output[i]) : NULL;
    if (!to)
      continue;
    if (i < s->nstates) {
      connect_value(L->im, arena_printf(L->g->arena, "%s/output_%d", L->name, i),
                    s->state[i], to);
      continue;
    }
    int k = i - s->nstates;
    Tensor **v = &values[k * count];
    Tensor *ordered[MAX_STEPS];
    for (int t = 0; t < count; t++)
      ordered[t] = reverse && reverse[k] ? v[count - 1 - t] : v[t];
    int64_t axis = axes ? axes[k] : 0;
    if (axis < 0) {
      if (!shape_now(L, v[0]))
        return;
      axis += v[0]->rank + 1;
    }
    import_stack(L->im, L->name, ordered, count, (int)axis, to);
  }
}

/* Reads the node's inputs into s (states from input `first`) and the
   directions and axes of the scan inputs. */
static bool read_inputs(ScanLowering *L, const Onnx__NodeProto *np, int first, Steps *s,
                        const char *directions_attr) {
  const Onnx__GraphProto *body = s->body;
  int64_t m = 0;
  int n = 0;
  if (!proto_ints(np, "num_scan_inputs", &m, 1, &n) || m < 1)
    return fail(L, "needs its attribute num_scan_inputs, at least 1", NULL);
  s->nscans = (int)m;
  s->nstates = (int)np->n_input - first - s->nscans;
  s->nouts = (int)np->n_output - s->nstates;
  if (s->nstates < 0 || s->nouts < 0 || s->nstates + s->nscans > MAX_VALUES ||
      s->nouts > MAX_VALUES || body->n_input != (size_t)(s->nstates + s->nscans) ||
      body->n_output != np->n_output)
    return fail(L, "its body must take the states and one slice of each scan input, and give "
                "the states and the scan outputs, as the node does", NULL);
  for (int i = 0; i < s->nstates + s->nscans; i++) {
    const char *name = np->input[first + i];
    Tensor *t = *name ? import_lookup(L->im, name) : NULL;
    if (!t)
      return fail(L, "an input is absent or not defined: ", name);
    if (seq_of(L->im, t))
      return fail(L, "takes tensors; this input is a sequence or optional: ", name);
    if (i < s->nstates)
      s->state[i] = t;
    else
      s->scan[i - s->nstates] = t;
  }
  int got = 0;
  memset(s->in_axis, 0, sizeof s->in_axis);
  memset(s->in_reverse, 0, sizeof s->in_reverse);
  proto_ints(np, "scan_input_axes", s->in_axis, MAX_VALUES, &got);
  if (got && got != s->nscans)
    return fail(L, "scan_input_axes must give one axis per scan input", NULL);
  proto_ints(np, directions_attr, s->in_reverse, MAX_VALUES, &got);
  if (got && got != s->nscans)
    return fail(L, "its input directions must give one per scan input", NULL);
  return true;
}

/* Opset 9 on: the steps once. */
static void scan_whole(ScanLowering *L, const Onnx__NodeProto *np, Steps *s) {
  int64_t out_axes[MAX_VALUES] = {0}, out_reverse[MAX_VALUES] = {0};
  int got = 0;
  proto_ints(np, "scan_output_axes", out_axes, MAX_VALUES, &got);
  if (got && got != s->nouts) {
    fail(L, "scan_output_axes must give one axis per scan output", NULL);
    return;
  }
  proto_ints(np, "scan_output_directions", out_reverse, MAX_VALUES, &got);
  if (got && got != s->nouts) {
    fail(L, "scan_output_directions must give one per scan output", NULL);
    return;
  }
  if (!scan_lengths(L, s, 0))
    return;
  Tensor **per_step = calloc((size_t)(s->nouts * s->length) + 1, sizeof *per_step);
  if (!per_step) {
    fail(L, "out of memory", NULL);
    return;
  }
  s->per_step = per_step;
  if (run_steps(L, s, L->name))
    write_outputs(L, np, s, per_step, (int)s->length, out_axes, out_reverse);
  free(per_step);
}

/* sequence_lens, where given, must be the full length for every entry. */
static bool full_lengths(ScanLowering *L, const Onnx__NodeProto *np, int64_t length) {
  if (!np->n_input || !*np->input[0])
    return true;
  Tensor *lens = import_lookup(L->im, np->input[0]);
  if (!lens)
    return fail(L, "its sequence_lens is not defined: ", np->input[0]);
  if (!import_known_now(L->im, L->name, "Scan", lens, "sequence_lens"))
    return false;
  for (int64_t b = 0; b < tensor_numel(lens); b++)
    if ((lens->i64 ? lens->i64[b] : (int64_t)lens->f32[b]) != length)
      return fail(L, "a sequence_lens shorter than the scan inputs (which stops that batch "
                  "entry early and pads its outputs) is not supported", NULL);
  return true;
}

/* Opset 8: the steps once per batch entry, each result stacked along the
   batch axis. */
static void scan_batched(ScanLowering *L, const Onnx__NodeProto *np, Steps *s) {
  if (!scan_lengths(L, s, 1) || !full_lengths(L, np, s->length))
    return;
  int64_t batch = s->scan[0]->dims[0];
  for (int j = 0; j < s->nscans; j++)
    s->in_axis[j]--; /* each entry's slice has no batch axis */
  Tensor *initial[MAX_VALUES], *whole[MAX_VALUES];
  memcpy(initial, s->state, sizeof initial);
  memcpy(whole, s->scan, sizeof whole);
  size_t per_entry = (size_t)(s->nouts * s->length);
  Tensor **per_step = calloc(per_entry + 1, sizeof *per_step);
  Tensor **results = calloc((size_t)((s->nstates + s->nouts) * batch) + 1, sizeof *results);
  if (!per_step || !results) {
    free(per_step);
    free(results);
    fail(L, "out of memory", NULL);
    return;
  }
  s->per_step = per_step;
  for (int64_t b = 0; b < batch && !L->im->failed; b++) {
    for (int i = 0; i < s->nstates; i++)
      s->state[i] = slice_at(L, initial[i], 0, b);
    for (int j = 0; j < s->nscans; j++)
      s->scan[j] = slice_at(L, whole[j], 0, b);
    if (!run_steps(L, s, arena_printf(L->g->arena, "%s/batch%lld", L->name, (long long)b)))
      break;
    for (int i = 0; i < s->nstates; i++)
      results[i * batch + b] = s->state[i];
    for (int k = 0; k < s->nouts; k++) {
      Tensor *stacked = graph_add_tensor(L->g, fresh(L, "stacked"));
      import_stack(L->im, arena_printf(L->g->arena, "%s/batch%lld", L->name, (long long)b),
                   &per_step[k * s->length], (int)s->length, 0, stacked);
      results[(s->nstates + k) * batch + b] = stacked;
    }
  }
  for (int i = 0; i < s->nstates + s->nouts && !L->im->failed; i++) {
    Tensor *to = *np->output[i] ? import_lookup(L->im, np->output[i]) : NULL;
    if (to)
      import_stack(L->im, L->name, &results[i * batch], (int)batch, 0, to);
  }
  free(per_step);
  free(results);
}

void import_scan(Importer *im, const Onnx__NodeProto *np, const char *name) {
  ScanLowering L = {im, im->g, name, 0};
  Steps *s = calloc(1, sizeof *s);
  if (!s) {
    fail(&L, "out of memory", NULL);
    return;
  }
  s->body = import_graph_attr(np, "body");
  bool batched = im->g->opset < 9;
  if (!s->body)
    fail(&L, "needs its graph attribute body", NULL);
  else if (read_inputs(&L, np, batched ? 1 : 0, s, batched ? "directions" : "scan_input_directions"))
    (batched ? scan_batched : scan_whole)(&L, np, s);
  free(s);
}
