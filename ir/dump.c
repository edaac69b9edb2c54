/*
 * dump.c - printing the IR in its text form (docs/ir-format.md). parse.c
 * reads the same form back; dump -> parse -> dump is the identity, so any
 * change here needs the matching change there.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* Constants with more values than this print as "<N values>". */
#define INLINE_VALUES 16

static void put_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"': fputs("\\\"", f); break;
    case '\\': fputs("\\\\", f); break;
    case '\n': fputs("\\n", f); break;
    case '\t': fputs("\\t", f); break;
    case '\r': fputs("\\r", f); break;
    default:
      if (*p < 0x20 || *p == 0x7f)
        fprintf(f, "\\x%02x", *p);
      else
        fputc(*p, f);
    }
  }
  fputc('"', f);
}

/* Names of [A-Za-z0-9_.:/-] print bare, except where a colon would be
   read as the ": type" separator (one that ends the name or doubles). */
static bool bare_name(const char *s) {
  if (!*s)
    return false;
  for (; *s; s++) {
    if (!isalnum((unsigned char)*s) && !strchr("_.:/-", *s))
      return false;
    if (*s == ':' && (s[1] == 0 || s[1] == ':'))
      return false;
  }
  return true;
}

static void put_ref(FILE *f, const Tensor *t) {
  fputc('%', f);
  if (bare_name(t->name))
    fputs(t->name, f);
  else
    put_string(f, t->name);
}

/* The shortest decimal that reads back as the same float, always with a
   dot or an exponent so that the parser knows it is a float. */
static void put_float(FILE *f, float v) {
  if (isnan(v)) {
    fputs("nan", f);
    return;
  }
  if (isinf(v)) {
    fputs(v < 0 ? "-inf" : "inf", f);
    return;
  }
  char buf[48];
  for (int prec = 1; prec <= 9; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
    if (strtof(buf, NULL) == v)
      break;
  }
  /* %g switches to an exponent once the digits run out: 100 would be
     1e+02. Whole numbers below 1e16 read better written out. */
  char *e = strchr(buf, 'e');
  if (e && atoi(e + 1) >= 0 && atoi(e + 1) < 16)
    snprintf(buf, sizeof buf, "%.*g", atoi(e + 1) + 1, (double)v);
  fputs(buf, f);
  if (!strpbrk(buf, ".e"))
    fputs(".0", f);
}

/* "[1,2]", or "[1,<=2]" where dim `bound_axis` is a bound, the data's
   (-1: none). */
static void put_ints_bounded(FILE *f, const int64_t *v, int n, int bound_axis) {
  fputc('[', f);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s%s%lld", i ? "," : "", i == bound_axis ? "<=" : "", (long long)v[i]);
  fputc(']', f);
}

static void put_ints(FILE *f, const int64_t *v, int n) { put_ints_bounded(f, v, n, -1); }

static bool contiguous(const Tensor *t) {
  int64_t stride = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    if (t->strides[i] != stride)
      return false;
    stride *= t->dims[i] > 0 ? t->dims[i] : 1;
  }
  return true;
}

/* "f32[1,64,8,8]", ":[strides]" after it for storage in another order
   (channels-last), and for a view "@%base+OFFSET" with ":[strides]" when
   the view is not contiguous. */
static void put_type(FILE *f, const Tensor *t) {
  fprintf(f, "%s", dtype_name(t->dtype));
  put_ints_bounded(f, t->dims, t->rank, t->bounded ? t->bound_axis : -1);
  if (!t->alias_of) {
    if (!contiguous(t)) {
      fputc(':', f);
      put_ints(f, t->strides, t->rank);
    }
    return;
  }
  fputs(" @", f);
  put_ref(f, t->alias_of);
  fprintf(f, "+%lld", (long long)t->alias_offset);
  if (!contiguous(t)) {
    fputc(':', f);
    put_ints(f, t->strides, t->rank);
  }
}

/* A runtime value's declared type and, once the memory plan is made, its
   storage's byte offset in the arena: " at 256". Views and constants have
   no place of their own. */
static void put_decl(FILE *f, const Graph *g, const Tensor *t) {
  put_type(f, t);
  if (g->arena_bytes > 0 && !t->alias_of && !tensor_is_const(t))
    fprintf(f, " at %lld", (long long)t->offset);
}

static void put_data(FILE *f, const Tensor *t) {
  int64_t n = tensor_numel(t);
  if (n > INLINE_VALUES) {
    fprintf(f, "<%lld values>", (long long)n);
    return;
  }
  fputc('[', f);
  for (int64_t i = 0; i < n; i++) {
    if (i)
      fputc(',', f);
    if (t->f32)
      put_float(f, t->f32[i]);
    else
      fprintf(f, "%lld", (long long)t->i64[i]);
  }
  fputc(']', f);
}

static void put_attr_value(FILE *f, const Attr *a) {
  switch (a->kind) {
  case ATTR_INT: fprintf(f, "%lld", (long long)a->i); break;
  case ATTR_FLOAT: put_float(f, a->f); break;
  case ATTR_STRING: put_string(f, a->s ? a->s : ""); break;
  case ATTR_INTS: put_ints(f, a->ints, a->n); break;
  case ATTR_FLOATS:
    fputc('[', f);
    for (int i = 0; i < a->n; i++) {
      if (i)
        fputc(',', f);
      put_float(f, a->floats[i]);
    }
    fputc(']', f);
    break;
  case ATTR_STRINGS:
    fputc('[', f);
    for (int i = 0; i < a->n; i++) {
      if (i)
        fputc(',', f);
      put_string(f, a->strings[i] ? a->strings[i] : "");
    }
    fputc(']', f);
    break;
  case ATTR_TENSOR:
    fputs("tensor(", f);
    put_type(f, a->t);
    fputc('=', f);
    if (tensor_is_const(a->t))
      put_data(f, a->t);
    else
      fputs("zeros", f);
    fputc(')', f);
    break;
  default:
    fputs("<unsupported>", f); /* graphs and tensor lists: not readable back */
    break;
  }
}

/* The IR's own fields, as ".key=value" after the node name; `issue` is
   the node's place in g->sched.order, -1 when the host does not issue it. */
static void put_extras(FILE *f, const Graph *g, const Node *n, int issue) {
  NodeSchedule *ns = node_sched(g, n);
  if (act_name(n->act))
    fprintf(f, " .act=%s", act_name(n->act));
  if (n->act_alpha != 0) {
    fputs(" .alpha=", f);
    put_float(f, n->act_alpha);
  }
  if (n->act_beta != 0) {
    fputs(" .beta=", f);
    put_float(f, n->act_beta);
  }
  if (n->is_view)
    fputs(" .view", f);
  if (n->nfused) {
    fputs(" .fused=[", f);
    for (int i = 0; i < n->nfused; i++) {
      if (i)
        fputc(',', f);
      put_string(f, n->fused[i] ? n->fused[i] : "");
    }
    fputc(']', f);
  }
  if (ns->stage)
    fprintf(f, " .stage=%d", ns->stage);
  if (ns->group)
    fprintf(f, " .group=%d", ns->group);
  if (ns->stream)
    fprintf(f, " .stream=%d", ns->stream);
  if (node_on_cpu(g, n))
    fprintf(f, " .cpu");
  else if (ns->device)
    fprintf(f, " .gpu=%d", ns->device);
  if (issue >= 0)
    fprintf(f, " .issue=%d", issue);
  if (ns->record_event != -1)
    fprintf(f, " .event=%d", ns->record_event);
  if (ns->nwaits) {
    fputs(" .waits=[", f);
    for (int i = 0; i < ns->nwaits; i++)
      fprintf(f, "%s%d", i ? "," : "", ns->waits[i]);
    fputc(']', f);
  }
  if (n->instance >= 0)
    fprintf(f, " .instance=%d", n->instance);
  if (ns->cost_us != 0) {
    /* 4 significant digits: a prediction, and expected dumps stay stable */
    char buf[32];
    snprintf(buf, sizeof buf, "%.4g", ns->cost_us);
    fprintf(f, " .cost=%s%s", buf, strpbrk(buf, ".ein") ? "" : ".0");
  }
}

static void put_node(FILE *f, const Graph *g, const Node *n, int issue) {
  for (int i = 0; i < n->nout; i++) {
    if (i)
      fputs(", ", f);
    if (!n->out[i]) {
      fputc('_', f);
      continue;
    }
    put_ref(f, n->out[i]);
    fputs(": ", f);
    put_decl(f, g, n->out[i]);
  }
  fprintf(f, " = %s(", op_name(n->op));
  for (int i = 0; i < n->nin; i++) {
    if (i)
      fputs(", ", f);
    if (n->in[i])
      put_ref(f, n->in[i]);
    else
      fputc('_', f);
  }
  fputc(')', f);
  if (n->nattrs) {
    fputs(" {", f);
    for (int i = 0; i < n->nattrs; i++) {
      fprintf(f, "%s%s=", i ? ", " : "", n->attrs[i].name);
      put_attr_value(f, &n->attrs[i]);
    }
    fputc('}', f);
  }
  fputs(" name=", f);
  put_string(f, n->name);
  put_extras(f, g, n, issue);
  fputc('\n', f);
}

/* A run-time Loop's body, or an If's (`which`: "body" or "else body"),
   after its node, as comments (graph_parse skips them): the IR text has no
   nested graphs. */
static void put_body(FILE *f, const Node *n, Graph *body, const char *which) {
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  if (!m)
    return;
  graph_dump(body, m);
  fclose(m);
  fprintf(f, "# %s of ", which);
  put_string(f, n->name);
  fputs(":\n", f);
  for (char *line = text; line && *line;) {
    char *end = strchr(line, '\n');
    fprintf(f, "#   %.*s\n", end ? (int)(end - line) : (int)strlen(line), line);
    line = end ? end + 1 : NULL;
  }
  free(text);
}

void graph_dump(Graph *g, FILE *f) {
  fputs("graph ", f);
  put_string(f, g->name ? g->name : "main");
  fprintf(f, " opset %lld path ", (long long)g->opset);
  put_string(f, g->path ? g->path : "");
  fputc('\n', f);
  if (g->arena_bytes > 0)
    fprintf(f, "arena %lld\n", (long long)g->arena_bytes);
  for (int m = 0; g->serve && m < g->serve->nmodels; m++) {
    const ServedModel *sm = &g->serve->models[m];
    fputs("model ", f);
    put_string(f, sm->name);
    fputs(" path ", f);
    put_string(f, sm->path);
    fprintf(f, " instances %d inputs %d outputs %d\n", sm->ninstances, sm->ninputs, sm->noutputs);
  }

  for (int i = 0; i < g->ninputs; i++) {
    fputs("input ", f);
    put_ref(f, g->inputs[i]);
    fputs(": ", f);
    put_decl(f, g, g->inputs[i]);
    fputc('\n', f);
  }

  /* Constants are the tensors with data that no node writes and that a
     node or the graph reads; leftovers of earlier rewrites stay hidden. */
  char *produced = calloc((size_t)g->ntensors + 1, 1);
  char *read = calloc((size_t)g->ntensors + 1, 1);
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    for (int j = 0; j < n->nout; j++)
      if (n->out[j] && n->out[j]->id < g->ntensors)
        produced[n->out[j]->id] = 1;
    for (int j = 0; j < n->nin; j++)
      if (n->in[j] && n->in[j]->id < g->ntensors)
        read[n->in[j]->id] = 1;
  }
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i]->id < g->ntensors)
      read[g->outputs[i]->id] = 1;
  for (int i = 0; i < g->ntensors; i++) {
    const Tensor *t = g->tensors[i];
    if (!tensor_is_const(t) || t->is_input || produced[i] || !read[i])
      continue;
    fputs("const ", f);
    put_ref(f, t);
    fputs(": ", f);
    put_type(f, t);
    fputs(" = ", f);
    put_data(f, t);
    fputc('\n', f);
  }
  free(produced);
  free(read);

  /* Each node's place in the issue order. Node ids may be stale after a
     rewrite, so the order is matched against the node list itself. */
  int *issue = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
  for (int i = 0; i < g->nnodes; i++)
    issue[i] = -1;
  for (int k = 0; k < g->sched.norder; k++) {
    const Node *n = g->sched.order[k];
    int at = n->id >= 0 && n->id < g->nnodes && g->nodes[n->id] == n ? n->id : -1;
    for (int i = 0; at < 0 && i < g->nnodes; i++)
      if (g->nodes[i] == n)
        at = i;
    if (at >= 0)
      issue[at] = k;
  }
  for (int i = 0; i < g->nnodes; i++) {
    put_node(f, g, g->nodes[i], issue[i]);
    if (g->nodes[i]->body)
      put_body(f, g->nodes[i], g->nodes[i]->body, "body");
    if (g->nodes[i]->else_body)
      put_body(f, g->nodes[i], g->nodes[i]->else_body, "else body");
  }
  free(issue);
  for (int i = 0; i < g->noutputs; i++) {
    fputs("output ", f);
    put_ref(f, g->outputs[i]);
    fputc('\n', f);
  }
}
