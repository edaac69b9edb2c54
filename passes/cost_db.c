/*
 * cost_db.c - measured unit latencies (--cost-db), and the key that names a
 * unit in them.
 *
 * The loop: `net --profile prof.json` times every schedule unit of the
 * compiled program alone on the target and writes each one's key and
 * microseconds; `opc --cost-db prof.json` reads that file back, and the
 * cost model takes the measured time of any unit whose key it finds there.
 * The compiler computes the key both when it emits the program (the key
 * goes into net.c) and when the cost model asks, with unit_cost_key(), so
 * that both sides agree by construction.
 *
 * A key names what decides a unit's cost and nothing else: the operator,
 * the type and layout of every input and output, the resolved window, the
 * fused activation and the remaining attributes. Tensor and node names are
 * left out, so that identical layers share one entry; when a file holds
 * several times for one key, the median counts.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

/* ------------------------------------------------------------------ key */

typedef struct KeyBuf {
  char *p;
  size_t size;
  int len; /* what the whole key needs, even beyond size */
} KeyBuf;

__attribute__((format(printf, 2, 3))) static void put(KeyBuf *k, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t used = (size_t)k->len < k->size ? (size_t)k->len : k->size;
  int n = vsnprintf(k->p ? k->p + used : NULL, k->size - used, fmt, ap);
  va_end(ap);
  if (n > 0)
    k->len += n;
}

static void put_ints(KeyBuf *k, const char *sep, int count, const int64_t *v) {
  for (int i = 0; i < count; i++)
    put(k, "%s%lld", i ? sep : "", (long long)v[i]);
}

static bool contiguous(const Tensor *t) {
  int64_t expect = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    if (t->dims[d] > 1 && t->strides[d] != expect)
      return false;
    expect *= t->dims[d];
  }
  return true;
}

/* "f32[1,64,56,56]", with the strides of a strided view: they change the
   kernel (a convolution writing into a concatenation's slice). */
static void put_tensor(KeyBuf *k, const Tensor *t) {
  if (!t) {
    put(k, "-");
    return;
  }
  put(k, "%s[", dtype_name(t->dtype));
  put_ints(k, ",", t->rank, t->dims);
  put(k, "]");
  if (!contiguous(t)) {
    put(k, "/");
    put_ints(k, ",", t->rank, t->strides);
  }
}

static bool has_window(OpKind op) {
  return op == OP_CONV || op == OP_CONV_TRANSPOSE || op == OP_MAX_POOL || op == OP_AVERAGE_POOL;
}

static void put_window(KeyBuf *k, const Node *n) {
  const Window *w = &n->win;
  int s = w->nspatial;
  put(k, "|k=");
  put_ints(k, "x", s, w->kernel);
  put(k, "|s=");
  put_ints(k, "x", s, w->stride);
  put(k, "|d=");
  put_ints(k, "x", s, w->dilation);
  put(k, "|p=");
  put_ints(k, ",", s, w->pad_begin);
  put(k, ",");
  put_ints(k, ",", s, w->pad_end);
  if (n->op == OP_CONV_TRANSPOSE) {
    put(k, "|op=");
    put_ints(k, "x", s, w->output_padding);
  }
  if (n->op == OP_CONV || n->op == OP_CONV_TRANSPOSE)
    put(k, "|g=%lld", (long long)(w->group > 0 ? w->group : 1));
  if (n->op == OP_MAX_POOL || n->op == OP_AVERAGE_POOL)
    put(k, "|ceil=%d|cip=%d", w->ceil_mode, w->count_include_pad);
}

static const char *act_key(Activation a) {
  switch (a) {
  case ACT_RELU: return "relu";
  case ACT_CLIP: return "clip";
  case ACT_SIGMOID: return "sigmoid";
  case ACT_TANH: return "tanh";
  case ACT_LEAKY_RELU: return "leakyrelu";
  case ACT_NONE: break;
  }
  return NULL;
}

static int by_attr_name(const void *a, const void *b) {
  return strcmp((*(const Attr *const *)a)->name, (*(const Attr *const *)b)->name);
}

static void put_attr(KeyBuf *k, const Attr *a) {
  put(k, "|%s=", a->name);
  switch (a->kind) {
  case ATTR_INT: put(k, "%lld", (long long)a->i); break;
  case ATTR_FLOAT: put(k, "%.9g", a->f); break;
  case ATTR_STRING: put(k, "%s", a->s ? a->s : ""); break;
  case ATTR_INTS: put_ints(k, ",", a->n, a->ints); break;
  case ATTR_FLOATS:
    for (int i = 0; i < a->n; i++)
      put(k, "%s%.9g", i ? "," : "", a->floats[i]);
    break;
  default: put(k, "?"); break; /* tensors, graphs: their kind is what matters */
  }
}

/* Attributes in name order; for windowed operators the resolved window
   stands for them (pads and auto_pad spell the same window). */
static void put_attrs(KeyBuf *k, const Node *n) {
  if (has_window(n->op) || n->nattrs <= 0)
    return;
  const Attr *sorted[64];
  int count = 0;
  for (int i = 0; i < n->nattrs && count < 64; i++)
    sorted[count++] = &n->attrs[i];
  qsort(sorted, (size_t)count, sizeof sorted[0], by_attr_name);
  for (int i = 0; i < count; i++)
    put_attr(k, sorted[i]);
}

int unit_cost_key(const Node *n, char *buf, size_t size) {
  KeyBuf k = {buf, buf ? size : 0, 0};
  if (k.p && k.size)
    k.p[0] = '\0';
  put(&k, "%s|", op_name(n->op));
  for (int i = 0; i < n->nin; i++) {
    if (i)
      put(&k, ",");
    put_tensor(&k, n->in[i]);
  }
  put(&k, "->");
  for (int i = 0; i < n->nout; i++) {
    if (i)
      put(&k, ",");
    put_tensor(&k, n->out[i]);
  }
  if (has_window(n->op))
    put_window(&k, n);
  if (n->act == ACT_CLIP)
    put(&k, "|act=clip(%.9g,%.9g)", n->act_alpha, n->act_beta);
  else if (n->act == ACT_LEAKY_RELU)
    put(&k, "|act=leakyrelu(%.9g)", n->act_alpha);
  else if (act_key(n->act))
    put(&k, "|act=%s", act_key(n->act));
  put_attrs(&k, n);
  return k.len;
}

/* --------------------------------------------------------------- the file */

typedef struct Entry {
  const char *key;
  double us;
} Entry;

struct CostDb {
  const char *path;
  int tf32;     /* the profiled program's precision: 1 tf32, 0 fp32, -1 not said */
  Entry *slots; /* open addressing: key NULL = empty */
  int cap, count;
};

static uint64_t hash_key(const char *s) {
  uint64_t h = 14695981039346656037ULL;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static Entry *find_slot(const CostDb *db, const char *key) {
  uint64_t i = hash_key(key) & (uint64_t)(db->cap - 1);
  while (db->slots[i].key && strcmp(db->slots[i].key, key) != 0)
    i = (i + 1) & (uint64_t)(db->cap - 1);
  return &db->slots[i];
}

static int by_key_then_us(const void *a, const void *b) {
  const Entry *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c ? c : (x->us > y->us) - (x->us < y->us);
}

/* Checks one element of "units" and reads it into *out. */
static bool read_unit(const char *path, size_t index, json_t *u, Entry *out) {
  json_t *key = json_object_get(u, "key"), *us = json_object_get(u, "us");
  if (!json_is_object(u) || !json_is_string(key) || !json_is_number(us)) {
    opc_error("%s: units[%zu]: expected an object with a \"key\" string and a \"us\" number", path,
              index);
    return false;
  }
  double v = json_number_value(us);
  if (!isfinite(v) || v < 0) {
    opc_error("%s: units[%zu]: \"us\" must be a finite time >= 0, not %g", path, index, v);
    return false;
  }
  out->key = json_string_value(key);
  out->us = v;
  return true;
}

/* Equal keys next to each other, each run's median into the table. */
static void fill_table(CostDb *db, Arena *a, Entry *e, int n) {
  qsort(e, (size_t)n, sizeof *e, by_key_then_us);
  for (int lo = 0; lo < n;) {
    int hi = lo + 1;
    while (hi < n && strcmp(e[hi].key, e[lo].key) == 0)
      hi++;
    int m = hi - lo;
    double median = m % 2 ? e[lo + m / 2].us : (e[lo + m / 2 - 1].us + e[lo + m / 2].us) / 2;
    Entry *slot = find_slot(db, e[lo].key);
    slot->key = arena_strdup(a, e[lo].key);
    slot->us = median;
    db->count++;
    lo = hi;
  }
}

CostDb *cost_db_load(Arena *a, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    opc_error("%s: %s", path, strerror(errno));
    return NULL;
  }
  json_error_t err;
  json_t *root = json_loadf(f, 0, &err);
  fclose(f);
  if (!root) {
    opc_error("%s: line %d: %s", path, err.line, err.text);
    return NULL;
  }
  CostDb *db = NULL;
  json_t *format = json_object_get(root, "format");
  json_t *units = json_object_get(root, "units");
  if (!json_is_object(root) || !json_is_string(format) ||
      strcmp(json_string_value(format), "opc-profile-1") != 0) {
    opc_error("%s: not an opc profile (expected \"format\": \"opc-profile-1\", as written by "
              "`net --profile`)", path);
    goto done;
  }
  if (!json_is_array(units)) {
    opc_error("%s: no \"units\" array", path);
    goto done;
  }
  json_t *measured_tf32 = json_object_get(root, "tf32");
  size_t n = json_array_size(units);
  Entry *e = calloc(n + 1, sizeof *e);
  if (!e) {
    opc_error("out of memory");
    goto done;
  }
  bool ok = true;
  for (size_t i = 0; i < n && ok; i++)
    ok = read_unit(path, i, json_array_get(units, i), &e[i]);
  if (ok) {
    db = arena_alloc(a, sizeof *db);
    db->path = arena_strdup(a, path);
    db->tf32 = json_is_boolean(measured_tf32) ? json_is_true(measured_tf32) : -1;
    db->cap = 16;
    while ((size_t)db->cap < 2 * n + 2)
      db->cap *= 2;
    db->slots = arena_alloc(a, sizeof(Entry) * (size_t)db->cap);
    fill_table(db, a, e, (int)n);
  }
  free(e);
done:
  json_decref(root);
  return db;
}

bool cost_db_lookup(const CostDb *db, const Node *n, double *us) {
  if (!db)
    return false;
  char small[512];
  int len = unit_cost_key(n, small, sizeof small);
  char *key = small;
  if ((size_t)len >= sizeof small) {
    if (!(key = malloc((size_t)len + 1)))
      return false;
    unit_cost_key(n, key, (size_t)len + 1);
  }
  const Entry *slot = find_slot(db, key);
  if (key != small)
    free(key);
  if (!slot->key)
    return false;
  *us = slot->us;
  return true;
}

int cost_db_size(const CostDb *db) { return db ? db->count : 0; }

void cost_db_check_precision(const CostDb *db, bool tf32) {
  /* Tensor-core timings mislead a strict-FP32 compile, and the reverse. */
  if (db && db->tf32 >= 0 && db->tf32 != tf32)
    ir_warning(NULL, NULL, "%s: measured with --precision %s, compiling with %s", db->path,
               db->tf32 ? "tf32" : "fp32", tf32 ? "tf32" : "fp32");
}

bool cost_model_from_options(Graph *g, const PassOptions *opt, CostModel *cm) {
  Device dev;
  if (!device_load(opt->device, &dev))
    return false;
  cost_model_init(cm, &dev);
  cm->tf32 = opt->tf32;
  if (opt->cost_db && !(cm->db = cost_db_load(g->arena, opt->cost_db)))
    return false;
  return true;
}
