/*
 * parse.c - reading the IR's text form (docs/ir-format.md) back into a
 * Graph. Hand-written recursive descent over one line at a time; every
 * error names the file and line and the graph is thrown away.
 *
 * Tensors are created on first mention, so a node may read a value that a
 * later line defines: the verifier, not the parser, decides whether that
 * is an error (its tests build broken graphs this way).
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* The largest constant that .ir text may hold or generate, in elements. */
#define MAX_CONST_ELEMENTS ((int64_t)1 << 24)

typedef struct Parser {
  Graph *g;
  const char *path;
  const char *p; /* cursor within the current line */
  int line;
  bool failed;
  /* ".issue=N" of each node that has one, in the order read */
  Node **issued;
  int *issue_at;
  int nissued;
} Parser;

static bool fail(Parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool fail(Parser *ps, const char *fmt, ...) {
  if (ps->failed)
    return false; /* one message per line is plenty */
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  opc_error("%s:%d: %s", ps->path, ps->line, msg);
  ps->failed = true;
  return false;
}

/* ------------------------------------------------------------- lexing */

static void skip_space(Parser *ps) {
  while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r')
    ps->p++;
}

static bool at_end(Parser *ps) {
  skip_space(ps);
  return *ps->p == 0 || *ps->p == '\n' || *ps->p == '#';
}

static bool accept(Parser *ps, char c) {
  skip_space(ps);
  if (*ps->p != c)
    return false;
  ps->p++;
  return true;
}

static bool expect(Parser *ps, char c) {
  if (accept(ps, c))
    return true;
  return fail(ps, "expected '%c'", c);
}

/* Accepts a keyword only as a whole word. */
static bool accept_word(Parser *ps, const char *w) {
  skip_space(ps);
  size_t n = strlen(w);
  if (strncmp(ps->p, w, n) != 0 || isalnum((unsigned char)ps->p[n]) || ps->p[n] == '_')
    return false;
  ps->p += n;
  return true;
}

static bool is_ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Characters of a bare tensor name, the colon aside. */
static bool is_name_char(char c) { return is_ident_char(c) || c == '.' || c == '/' || c == '-'; }

static const char *ident(Parser *ps) {
  skip_space(ps);
  const char *start = ps->p;
  while (is_ident_char(*ps->p))
    ps->p++;
  if (ps->p == start) {
    fail(ps, "expected a name");
    return NULL;
  }
  char *s = arena_alloc(ps->g->arena, (size_t)(ps->p - start) + 1);
  memcpy(s, start, (size_t)(ps->p - start));
  return s;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* A double-quoted string with C escapes. */
static const char *string(Parser *ps) {
  if (!expect(ps, '"'))
    return NULL;
  size_t cap = 64, len = 0;
  char *buf = malloc(cap);
  while (*ps->p != '"') {
    char c = *ps->p;
    if (c == 0 || c == '\n') {
      free(buf);
      fail(ps, "unterminated string");
      return NULL;
    }
    ps->p++;
    if (c == '\\') {
      char e = *ps->p++;
      switch (e) {
      case 'n': c = '\n'; break;
      case 't': c = '\t'; break;
      case 'r': c = '\r'; break;
      case '0': c = 0; break;
      case '\\': case '"': case '\'': c = e; break;
      case 'x': {
        int hi = hex_digit(ps->p[0]), lo = hi >= 0 ? hex_digit(ps->p[1]) : -1;
        if (lo < 0) {
          free(buf);
          fail(ps, "bad \\x escape");
          return NULL;
        }
        c = (char)(hi * 16 + lo);
        ps->p += 2;
        break;
      }
      default:
        free(buf);
        fail(ps, "unknown escape '\\%c'", e ? e : '0');
        return NULL;
      }
    }
    if (len + 1 >= cap)
      buf = realloc(buf, cap *= 2);
    buf[len++] = c;
  }
  ps->p++;
  buf[len] = 0;
  const char *s = arena_strdup(ps->g->arena, buf);
  free(buf);
  return s;
}

/* The extent of a number token, and whether it is written as a float. */
static size_t number_extent(const char *p, bool *is_float) {
  size_t n = 0;
  *is_float = false;
  if (p[n] == '-' || p[n] == '+')
    n++;
  if (strncmp(p + n, "inf", 3) == 0 || strncmp(p + n, "nan", 3) == 0) {
    *is_float = true;
    return n + 3;
  }
  size_t digits = n;
  while (isdigit((unsigned char)p[n]) || p[n] == '.' || p[n] == 'e' || p[n] == 'E' ||
         ((p[n] == '-' || p[n] == '+') && (p[n - 1] == 'e' || p[n - 1] == 'E'))) {
    if (!isdigit((unsigned char)p[n]))
      *is_float = true;
    n++;
  }
  return n > digits ? n : 0;
}

static bool looks_like_number(Parser *ps) {
  skip_space(ps);
  bool f;
  return number_extent(ps->p, &f) > 0;
}

static bool integer(Parser *ps, int64_t *out) {
  skip_space(ps);
  bool is_float;
  size_t n = number_extent(ps->p, &is_float);
  if (n == 0 || is_float)
    return fail(ps, "expected an integer");
  char *end;
  *out = strtoll(ps->p, &end, 10);
  ps->p += n;
  return true;
}

/* Any number, as a double (an integer is a fine float). */
static bool number(Parser *ps, double *out, bool *is_float) {
  skip_space(ps);
  size_t n = number_extent(ps->p, is_float);
  if (n == 0)
    return fail(ps, "expected a number");
  char buf[64];
  if (n >= sizeof buf)
    return fail(ps, "number too long");
  memcpy(buf, ps->p, n);
  buf[n] = 0;
  *out = strtod(buf, NULL);
  ps->p += n;
  return true;
}

/* ------------------------------------------------------------ tensors */

/* "%name" or "%\"any name\"": the tensor, created on first mention. */
static Tensor *ref(Parser *ps) {
  if (!expect(ps, '%'))
    return NULL;
  const char *name;
  if (*ps->p == '"') {
    name = string(ps);
  } else {
    /* A colon belongs to the name only when the name goes on after it:
       "%x: f32[2]" declares x. */
    const char *start = ps->p;
    while (is_name_char(*ps->p) || (*ps->p == ':' && is_name_char(ps->p[1])))
      ps->p++;
    if (ps->p == start) {
      fail(ps, "expected a tensor name after '%%'");
      return NULL;
    }
    char *s = arena_alloc(ps->g->arena, (size_t)(ps->p - start) + 1);
    memcpy(s, start, (size_t)(ps->p - start));
    name = s;
  }
  if (!name)
    return NULL;
  Tensor *t = graph_find_tensor(ps->g, name);
  return t ? t : graph_add_tensor(ps->g, name);
}

/* "[1,2,3]" of integers; returns the count or -1. Where `bound_axis` is
   not NULL, one dim may be written "<=4", the bound of a bounded tensor's
   run-time dim, whose position it gets (else -1). */
static int int_list(Parser *ps, int64_t *out, int max, int *bound_axis) {
  if (!expect(ps, '['))
    return -1;
  int n = 0;
  if (bound_axis)
    *bound_axis = -1;
  if (accept(ps, ']'))
    return 0;
  do {
    int64_t v;
    if (n >= max) {
      fail(ps, "more than %d values", max);
      return -1;
    }
    if (bound_axis && accept(ps, '<')) {
      if (!expect(ps, '='))
        return -1;
      if (*bound_axis >= 0) {
        fail(ps, "two dims written as bounds; a bounded tensor has one");
        return -1;
      }
      *bound_axis = n;
    }
    if (!integer(ps, &v))
      return -1;
    out[n++] = v;
  } while (accept(ps, ','));
  return expect(ps, ']') ? n : -1;
}

/* ":[strides]" after a type: one per dim of t. */
static bool strides(Parser *ps, Tensor *t) {
  int64_t s[IR_MAX_RANK];
  int n = int_list(ps, s, IR_MAX_RANK, NULL);
  if (n < 0)
    return false;
  if (n != t->rank)
    return fail(ps, "%d strides for rank %d", n, t->rank);
  memcpy(t->strides, s, sizeof(int64_t) * (size_t)n);
  return true;
}

/* "f32[1,3,224,224]" into t, with ":[strides]" for storage in another
   order, or a view suffix "@%base+OFF[:[strides]]". */
static bool type(Parser *ps, Tensor *t) {
  skip_space(ps);
  const char *start = ps->p;
  while (isalnum((unsigned char)*ps->p) || *ps->p == '?')
    ps->p++;
  char name[16];
  size_t len = (size_t)(ps->p - start);
  if (len == 0 || len >= sizeof name)
    return fail(ps, "expected a type such as f32[1,3]");
  memcpy(name, start, len);
  name[len] = 0;
  DType dt = dtype_from_name(name);
  if (dt == DT_UNDEFINED && strcmp(name, "?") != 0)
    return fail(ps, "unknown dtype '%s'", name);
  int64_t dims[IR_MAX_RANK];
  int bound_axis;
  int rank = int_list(ps, dims, IR_MAX_RANK, &bound_axis);
  if (rank < 0)
    return false;
  for (int i = 0; i < rank; i++)
    if (dims[i] < 0)
      return fail(ps, "negative dimension %lld", (long long)dims[i]);
  if (!shape_fits(rank, dims))
    return fail(ps, "dimensions multiply to more than 2^59");
  t->dtype = dt;
  tensor_set_shape(t, rank, dims);
  t->bounded = bound_axis >= 0;
  t->bound_axis = bound_axis >= 0 ? bound_axis : 0;
  t->bound_origin = t->bounded ? t : NULL;
  if (accept(ps, ':')) { /* storage of its own, in another order */
    if (!strides(ps, t))
      return false;
    return tensor_has_dense_strides(t) || fail(ps, "strides that are not an order of the dims");
  }
  if (!accept(ps, '@'))
    return true;
  Tensor *base = ref(ps);
  if (!base || !expect(ps, '+') || !integer(ps, &t->alias_offset))
    return false;
  t->alias_of = base;
  return !accept(ps, ':') || strides(ps, t);
}

/* After a runtime value's type: its storage's byte offset in the arena,
   " at 256", which the dump prints once the memory plan is made. */
static bool placement(Parser *ps, Tensor *t) {
  if (!accept_word(ps, "at"))
    return true;
  if (t->alias_of)
    return fail(ps, "a view has no place of its own in the arena");
  if (!integer(ps, &t->offset))
    return false;
  if (t->offset < 0)
    return fail(ps, "negative arena offset %lld", (long long)t->offset);
  return true;
}

/* Deterministic values in [-1, 1], seeded by the tensor's name, so that
   tests get the same "random" weights on every run and machine. */
static void fill_random(Tensor *t) {
  uint64_t s = 1469598103934665603ull;
  for (const char *c = t->name; *c; c++)
    s = (s ^ (unsigned char)*c) * 1099511628211ull;
  int64_t numel = tensor_numel(t);
  for (int64_t i = 0; i < numel; i++) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    double v = (double)(s >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
    if (t->f32)
      t->f32[i] = (float)v;
    else
      t->i64[i] = (int64_t)floor(v * 4.0); /* small integers */
  }
}

/* Constant data after "=": "[values]", "<N values>", "random", "zeros" or
   "ones". The tensor's type is already set. */
static bool data(Parser *ps, Tensor *t) {
  int64_t numel = tensor_numel(t);
  bool is_float_type = dtype_is_float(t->dtype);
  if (!is_float_type && !dtype_is_integer(t->dtype))
    return fail(ps, "constants must have a numeric dtype, not %s", dtype_name(t->dtype));
  /* The data is allocated before it is read, and random, zeros and ones
     have none in the text: a wrong dimension must not ask for terabytes.
     .ir text is for tests, whose constants are far smaller. */
  if (numel > MAX_CONST_ELEMENTS)
    return fail(ps, "a constant of %lld elements; .ir text allows at most 2^24",
                (long long)numel);
  size_t count = (size_t)numel + 1;
  t->f32 = NULL;
  t->i64 = NULL;
  if (is_float_type)
    t->f32 = arena_alloc(ps->g->arena, count * sizeof(float));
  else
    t->i64 = arena_alloc(ps->g->arena, count * sizeof(int64_t));

  skip_space(ps);
  if (accept(ps, '<')) {
    int64_t n;
    if (!integer(ps, &n) || !accept_word(ps, "values") || !expect(ps, '>'))
      return fail(ps, "expected '<N values>'");
    if (n != numel)
      return fail(ps, "'<%lld values>' for a tensor of %lld elements", (long long)n,
                  (long long)numel);
    fill_random(t);
    return true;
  }
  if (accept_word(ps, "random")) {
    fill_random(t);
    return true;
  }
  bool zeros = accept_word(ps, "zeros");
  if (zeros || accept_word(ps, "ones")) {
    bool ones = !zeros;
    for (int64_t i = 0; i < numel; i++) {
      if (t->f32)
        t->f32[i] = ones ? 1.0f : 0.0f;
      else
        t->i64[i] = ones;
    }
    return true;
  }
  if (!expect(ps, '['))
    return false;
  int64_t n = 0;
  if (!accept(ps, ']')) {
    do {
      if (n >= numel)
        return fail(ps, "more than %lld values", (long long)numel);
      if (t->i64) {
        /* Read as an integer: a double would lose bits past 2^53. */
        if (!integer(ps, &t->i64[n]))
          return false;
      } else {
        double v;
        bool is_float;
        if (!number(ps, &v, &is_float))
          return false;
        t->f32[n] = (float)v;
      }
      n++;
    } while (accept(ps, ','));
    if (!expect(ps, ']'))
      return false;
  }
  if (n == 1 && numel > 1) {
    for (int64_t i = 1; i < numel; i++) {
      if (t->f32)
        t->f32[i] = t->f32[0];
      else
        t->i64[i] = t->i64[0];
    }
  } else if (n != numel) {
    return fail(ps, "%lld values for a tensor of %lld elements", (long long)n, (long long)numel);
  }
  return true;
}

/* ---------------------------------------------------------- attributes */

/* "[...]" of ints, floats or strings; an empty list is ints. */
static bool list_value(Parser *ps, Attr *a) {
  Arena *ar = ps->g->arena;
  int cap = 8, n = 0;
  skip_space(ps);
  const char *save = ps->p;
  if (!expect(ps, '['))
    return false;
  skip_space(ps);
  if (*ps->p == '"') {
    const char **v = arena_alloc(ar, sizeof(char *) * (size_t)cap);
    do {
      if (n == cap) {
        const char **w = arena_alloc(ar, sizeof(char *) * (size_t)(cap *= 2));
        memcpy(w, v, sizeof(char *) * (size_t)n);
        v = w;
      }
      if (!(v[n++] = string(ps)))
        return false;
    } while (accept(ps, ','));
    a->kind = ATTR_STRINGS;
    a->strings = v;
    a->n = n;
    return expect(ps, ']');
  }
  /* Numbers: a first pass decides ints or floats, the second reads them. */
  bool any_float = false;
  if (!accept(ps, ']')) {
    do {
      double v;
      bool is_float;
      if (!number(ps, &v, &is_float))
        return false;
      any_float |= is_float;
      n++;
    } while (accept(ps, ','));
    if (!expect(ps, ']'))
      return false;
  }
  ps->p = save;
  expect(ps, '[');
  a->n = n;
  if (any_float) {
    a->kind = ATTR_FLOATS;
    a->floats = arena_alloc(ar, sizeof(float) * (size_t)(n + 1));
  } else {
    a->kind = ATTR_INTS;
    a->ints = arena_alloc(ar, sizeof(int64_t) * (size_t)(n + 1));
  }
  for (int i = 0; i < n; i++) {
    double v;
    bool is_float;
    if (i)
      expect(ps, ',');
    if (any_float) {
      number(ps, &v, &is_float);
      a->floats[i] = (float)v;
    } else {
      integer(ps, &a->ints[i]);
    }
  }
  return expect(ps, ']');
}

/* "tensor(f32[2]=[1.0,2.0])": a detached constant, not in the graph. */
static bool tensor_value(Parser *ps, Attr *a) {
  if (!expect(ps, '('))
    return false;
  Tensor *t = arena_alloc(ps->g->arena, sizeof(Tensor));
  t->id = -1;
  t->name = "attribute";
  a->kind = ATTR_TENSOR;
  a->t = t;
  return type(ps, t) && expect(ps, '=') && data(ps, t) && expect(ps, ')');
}

static bool attr_value(Parser *ps, Attr *a) {
  skip_space(ps);
  if (*ps->p == '"') {
    a->kind = ATTR_STRING;
    a->s = string(ps);
    return a->s != NULL;
  }
  if (*ps->p == '[')
    return list_value(ps, a);
  if (accept_word(ps, "tensor"))
    return tensor_value(ps, a);
  if (!looks_like_number(ps))
    return fail(ps, "expected an attribute value");
  double v;
  bool is_float;
  const char *save = ps->p;
  if (!number(ps, &v, &is_float))
    return false;
  if (is_float) {
    a->kind = ATTR_FLOAT;
    a->f = (float)v;
    return true;
  }
  ps->p = save;
  a->kind = ATTR_INT;
  return integer(ps, &a->i);
}

/* "{name=value, ...}" */
static bool attrs(Parser *ps, Node *n) {
  if (accept(ps, '}'))
    return true;
  do {
    const char *name = ident(ps);
    if (!name || !expect(ps, '='))
      return false;
    if (node_attr(n, name))
      return fail(ps, "attribute '%s' given twice", name);
    Attr tmp = {0};
    if (!attr_value(ps, &tmp))
      return false;
    Attr *a = node_set_attr(ps->g, n, name, tmp.kind);
    const char *kept = a->name;
    *a = tmp;
    a->name = kept;
  } while (accept(ps, ','));
  return expect(ps, '}');
}

/* ---------------------------------------------------------- IR extras */

/* An activation by its name in ops.def's act_name column. */
static bool activation(Parser *ps, Node *n) {
  const char *name = ident(ps);
  if (!name)
    return false;
  for (int i = 1; i < OP_COUNT; i++) {
    const OpInfo *info = op_info((OpKind)i);
    if (info->act_name && strcmp(info->act_name, name) == 0) {
      n->act = info->act;
      return true;
    }
  }
  return fail(ps, "unknown activation '%s'", name);
}

static bool small_int(Parser *ps, int *out) {
  int64_t v;
  if (!integer(ps, &v))
    return false;
  if (v < -2147483647 || v > 2147483647)
    return fail(ps, "value %lld out of range", (long long)v);
  *out = (int)v;
  return true;
}

static bool float_value(Parser *ps, double *out) {
  bool is_float;
  return number(ps, out, &is_float);
}

/* One ".key[=value]" after the node name. */
static bool extra(Parser *ps, Node *n) {
  NodeSchedule *ns = node_sched(ps->g, n);
  const char *key = ident(ps);
  if (!key)
    return false;
  if (strcmp(key, "view") == 0) {
    n->is_view = true;
    return true;
  }
  if (strcmp(key, "cpu") == 0) { /* HOPE's host CPU: the device after GPU 0 */
    ns->device = 1;
    ps->g->sched.host_device = 1;
    return true;
  }
  if (!expect(ps, '='))
    return false;
  double v;
  if (strcmp(key, "act") == 0)
    return activation(ps, n);
  if (strcmp(key, "alpha") == 0 || strcmp(key, "beta") == 0 || strcmp(key, "cost") == 0) {
    if (!float_value(ps, &v))
      return false;
    if (key[0] == 'a')
      n->act_alpha = (float)v;
    else if (key[0] == 'b')
      n->act_beta = (float)v;
    else
      ns->cost_us = v;
    return true;
  }
  if (strcmp(key, "stage") == 0)
    return small_int(ps, &ns->stage);
  if (strcmp(key, "group") == 0)
    return small_int(ps, &ns->group);
  if (strcmp(key, "stream") == 0)
    return small_int(ps, &ns->stream);
  if (strcmp(key, "gpu") == 0)
    return small_int(ps, &ns->device);
  if (strcmp(key, "instance") == 0)
    return small_int(ps, &n->instance);
  if (strcmp(key, "event") == 0)
    return small_int(ps, &ns->record_event);
  if (strcmp(key, "issue") == 0) {
    int at = -1;
    if (!small_int(ps, &at))
      return false;
    for (int i = 0; i < ps->nissued; i++)
      if (ps->issued[i] == n || ps->issue_at[i] == at)
        return fail(ps, ps->issued[i] == n ? ".issue given twice" : "two nodes at issue %d", at);
    if (at < 0)
      return fail(ps, "negative issue position %d", at);
    ps->issued = realloc(ps->issued, sizeof(Node *) * (size_t)(ps->nissued + 1));
    ps->issue_at = realloc(ps->issue_at, sizeof(int) * (size_t)(ps->nissued + 1));
    ps->issued[ps->nissued] = n;
    ps->issue_at[ps->nissued++] = at;
    return true;
  }
  if (strcmp(key, "waits") == 0) {
    int64_t w[256];
    int count = int_list(ps, w, 256, NULL);
    if (count < 0)
      return false;
    ns->waits = arena_alloc(ps->g->arena, sizeof(int) * (size_t)(count + 1));
    for (int i = 0; i < count; i++)
      ns->waits[i] = (int)w[i];
    ns->nwaits = count;
    return true;
  }
  if (strcmp(key, "fused") == 0) {
    Attr tmp = {0};
    if (!list_value(ps, &tmp))
      return false;
    if (tmp.kind != ATTR_STRINGS && tmp.n > 0)
      return fail(ps, ".fused takes a list of strings");
    n->fused = tmp.strings;
    n->nfused = tmp.n;
    return true;
  }
  return fail(ps, "unknown extra '.%s'", key);
}

/* -------------------------------------------------------------- lines */

#define MAX_SLOTS 1024

/* "%a: f32[..], _, %b = Op(%x, _, %y) {attrs} name=\"..\" .extras" */
static bool node_line(Parser *ps) {
  Tensor *outs[MAX_SLOTS], *ins[MAX_SLOTS];
  int nout = 0, nin = 0;
  do {
    if (nout == MAX_SLOTS)
      return fail(ps, "too many outputs");
    if (accept(ps, '_')) {
      outs[nout++] = NULL;
      continue;
    }
    Tensor *t = ref(ps);
    if (!t)
      return false;
    if (accept(ps, ':') && !(type(ps, t) && placement(ps, t)))
      return false;
    outs[nout++] = t;
  } while (accept(ps, ','));
  if (!expect(ps, '='))
    return false;
  const char *opname = ident(ps);
  if (!opname)
    return false;
  OpKind op = op_from_name(opname);
  if (op == OP_INVALID)
    return fail(ps, "unknown operator '%s'", opname);
  if (!expect(ps, '('))
    return false;
  if (!accept(ps, ')')) {
    do {
      if (nin == MAX_SLOTS)
        return fail(ps, "too many inputs");
      if (accept(ps, '_')) {
        ins[nin++] = NULL;
        continue;
      }
      if (!(ins[nin++] = ref(ps)))
        return false;
    } while (accept(ps, ','));
    if (!expect(ps, ')'))
      return false;
  }
  Node *n = graph_add_node(ps->g, op, NULL, nin, nout);
  memcpy(n->in, ins, sizeof(Tensor *) * (size_t)nin);
  memcpy(n->out, outs, sizeof(Tensor *) * (size_t)nout);
  if (accept(ps, '{') && !attrs(ps, n))
    return false;
  if (accept_word(ps, "name")) {
    if (!expect(ps, '=') || !(n->name = string(ps)))
      return false;
  }
  while (accept(ps, '.'))
    if (!extra(ps, n))
      return false;
  return true;
}

static bool header_line(Parser *ps) {
  Graph *g = ps->g;
  const char *name = string(ps);
  if (!name)
    return false;
  g->name = name;
  if (accept_word(ps, "opset") && !integer(ps, &g->opset))
    return false;
  if (accept_word(ps, "path")) {
    const char *path = string(ps);
    if (!path)
      return false;
    g->path = path;
  }
  return true;
}

/* `model "NAME" path "FILE" instances K inputs I outputs O`: one model of
   a serving program, its copies numbered after the previous model's. */
static bool model_line(Parser *ps) {
  Graph *g = ps->g;
  ServeInfo *s = g->serve;
  if (!s)
    s = g->serve = arena_alloc(g->arena, sizeof *s);
  ServedModel m = {0};
  int64_t k = 0, in = 0, out = 0;
  if (!(m.name = string(ps)) || !accept_word(ps, "path") || !(m.path = string(ps)) ||
      !accept_word(ps, "instances") || !integer(ps, &k) || !accept_word(ps, "inputs") ||
      !integer(ps, &in) || !accept_word(ps, "outputs") || !integer(ps, &out))
    return fail(ps, "expected model \"NAME\" path \"FILE\" instances K inputs I outputs O");
  if (k < 1 || k > 1024 || in < 0 || in > 1 << 20 || out < 0 || out > 1 << 20)
    return fail(ps, "a model needs 1 to 1024 instances and at most 2^20 inputs and outputs");
  m.ninstances = (int)k;
  m.ninputs = (int)in;
  m.noutputs = (int)out;
  m.first_instance = s->ninstances;
  ServedModel *models = arena_alloc(g->arena, sizeof *models * (size_t)(s->nmodels + 1));
  if (s->nmodels)
    memcpy(models, s->models, sizeof *models * (size_t)s->nmodels);
  models[s->nmodels++] = m;
  s->models = models;
  int total = s->ninstances + m.ninstances;
  int *model_of = arena_alloc(g->arena, sizeof(int) * (size_t)total);
  int *first_in = arena_alloc(g->arena, sizeof(int) * (size_t)total);
  int *first_out = arena_alloc(g->arena, sizeof(int) * (size_t)total);
  if (s->ninstances) {
    memcpy(model_of, s->instance_model, sizeof(int) * (size_t)s->ninstances);
    memcpy(first_in, s->first_input, sizeof(int) * (size_t)s->ninstances);
    memcpy(first_out, s->first_output, sizeof(int) * (size_t)s->ninstances);
  }
  for (int i = s->ninstances; i < total; i++) {
    model_of[i] = s->nmodels - 1;
    first_in[i] = i ? first_in[i - 1] + s->models[model_of[i - 1]].ninputs : 0;
    first_out[i] = i ? first_out[i - 1] + s->models[model_of[i - 1]].noutputs : 0;
  }
  s->instance_model = model_of;
  s->first_input = first_in;
  s->first_output = first_out;
  s->ninstances = total;
  return true;
}

static bool line(Parser *ps) {
  Graph *g = ps->g;
  if (at_end(ps))
    return true;
  bool ok;
  if (accept_word(ps, "graph")) {
    ok = header_line(ps);
  } else if (accept_word(ps, "arena")) {
    ok = integer(ps, &g->arena_bytes);
    if (ok && g->arena_bytes <= 0)
      ok = fail(ps, "the arena size must be positive");
  } else if (accept_word(ps, "model")) {
    ok = model_line(ps);
  } else if (accept_word(ps, "input")) {
    Tensor *t = ref(ps);
    ok = t && expect(ps, ':') && type(ps, t) && placement(ps, t);
    if (ok)
      graph_add_input(g, t);
  } else if (accept_word(ps, "const")) {
    Tensor *t = ref(ps);
    ok = t && expect(ps, ':') && type(ps, t) && expect(ps, '=') && data(ps, t);
    if (ok && t->alias_of)
      ok = fail(ps, "a constant cannot be a view");
  } else if (accept_word(ps, "output")) {
    Tensor *t = ref(ps);
    ok = t != NULL;
    if (ok)
      graph_add_output(g, t);
  } else {
    ok = node_line(ps);
  }
  if (ok && !at_end(ps)) {
    int len = (int)strcspn(ps->p, "\n");
    ok = fail(ps, "unexpected '%.*s' at the end of the line", len < 20 ? len : 20, ps->p);
  }
  return ok;
}

/* The schedule the ".issue" extras describe: the issue order, and the
   stream and event counts its nodes use. Stages are not rebuilt. */
static bool rebuild_schedule(Parser *ps) {
  Graph *g = ps->g;
  if (!ps->nissued)
    return true;
  Schedule *s = &g->sched;
  s->order = arena_alloc(g->arena, sizeof(Node *) * (size_t)ps->nissued);
  s->norder = ps->nissued;
  s->nstreams = 1;
  s->ndevices = 1;
  s->nevents = 0;
  for (int i = 0; i < ps->nissued; i++) {
    Node *n = ps->issued[i];
    NodeSchedule *ns = node_sched(g, n);
    if (ps->issue_at[i] >= ps->nissued) {
      opc_error("%s: issue positions must run from 0 to %d; node '%s' is at %d", ps->path,
                ps->nissued - 1, n->name, ps->issue_at[i]);
      return false;
    }
    s->order[ps->issue_at[i]] = n;
    if (ns->stream + 1 > s->nstreams)
      s->nstreams = ns->stream + 1;
    if (ns->device + 1 > s->ndevices)
      s->ndevices = ns->device + 1;
    if (ns->record_event + 1 > s->nevents)
      s->nevents = ns->record_event + 1;
    for (int w = 0; w < ns->nwaits; w++)
      if (ns->waits[w] + 1 > s->nevents)
        s->nevents = ns->waits[w] + 1;
  }
  return true;
}

/* The model lines must account for every input and output, and every
   node's copy must exist. */
static bool check_serve(Parser *ps) {
  Graph *g = ps->g;
  const ServeInfo *s = g->serve;
  int ninstances = s ? s->ninstances : 0;
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->instance >= ninstances) {
      opc_error("%s: node '%s' is of instance %d, but the model lines give %d", ps->path,
                g->nodes[i]->name, g->nodes[i]->instance, ninstances);
      return false;
    }
  if (!s)
    return true;
  int last = s->ninstances - 1;
  int inputs = s->first_input[last] + s->models[s->instance_model[last]].ninputs;
  int outputs = s->first_output[last] + s->models[s->instance_model[last]].noutputs;
  if (inputs != g->ninputs || outputs != g->noutputs) {
    opc_error("%s: the model lines give %d inputs and %d outputs, the graph has %d and %d",
              ps->path, inputs, outputs, g->ninputs, g->noutputs);
    return false;
  }
  return true;
}

Graph *graph_parse(const char *text, const char *path) {
  Parser ps = {0};
  ps.path = path ? path : "<text>";
  ps.g = graph_new(ps.path);
  const char *p = text ? text : "";
  for (ps.line = 1; *p; ps.line++) {
    ps.p = p;
    ps.failed = false;
    if (!line(&ps)) {
      free(ps.issued);
      free(ps.issue_at);
      graph_free(ps.g);
      return NULL;
    }
    const char *nl = strchr(p, '\n');
    if (!nl)
      break;
    p = nl + 1;
  }
  bool ok = rebuild_schedule(&ps) && check_serve(&ps);
  free(ps.issued);
  free(ps.issue_at);
  if (!ok) {
    graph_free(ps.g);
    return NULL;
  }
  /* A view reports its storage's place, as the memory planner leaves it. */
  for (int i = 0; i < ps.g->ntensors; i++) {
    Tensor *t = ps.g->tensors[i];
    if (t->alias_of)
      t->offset = t->alias_of->offset;
  }
  graph_rebuild_uses(ps.g);
  return ps.g;
}
