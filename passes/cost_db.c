/*
 * cost_db.c - measured unit latencies (--cost-db), looked up by the key
 * that names a unit (unit_cost_key, ir/cost_key.c).
 *
 * The loop: `net --profile prof.json` times every schedule unit of the
 * compiled program alone on the target and writes each one's key and
 * microseconds; `opc --cost-db prof.json` reads that file back, and the
 * cost model takes the measured time of any unit whose key it finds there.
 * The compiler computes the key both when it emits the program (the key
 * goes into net.c) and when the cost model asks, with unit_cost_key(), so
 * that both sides agree by construction. When a file holds several times
 * for one key, the median counts.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

/* --------------------------------------------------------------- the file */

typedef struct Entry {
  const char *key;
  double us;
} Entry;

struct CostDb {
  const char *path;
  const char *precision; /* the profiled program's: "fp32", "tf32", "fp16", "bf16"; NULL: not said */
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
  json_t *measured_precision = json_object_get(root, "precision");
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
    /* Profiles before --precision fp16|bf16 said only whether TF32 was on. */
    if (json_is_string(measured_precision))
      db->precision = arena_strdup(a, json_string_value(measured_precision));
    else if (json_is_boolean(measured_tf32))
      db->precision = json_is_true(measured_tf32) ? "tf32" : "fp32";
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

void cost_db_check_precision(const CostDb *db, const char *precision) {
  /* Tensor-core timings mislead a strict-FP32 compile, 16-bit ones a
     float32 one, and the reverse. */
  if (db && db->precision && strcmp(db->precision, precision) != 0)
    ir_warning(NULL, NULL, "%s: measured with --precision %s, compiling with %s", db->path,
               db->precision, precision);
}

bool cost_model_from_options(Graph *g, const PassOptions *opt, CostModel *cm) {
  Device dev;
  if (!device_load(opt->device, &dev))
    return false;
  if (dev.is_cpu) {
    opc_error("--device %s: a CPU's file; the GPU's goes here (the CPU's: --cpu-device)",
              dev.name);
    return false;
  }
  if (opt->link_gbps > 0) {
    dev.link_gbps = opt->link_gbps;
    snprintf(dev.link, sizeof dev.link, "--link-gbps");
  }
  cost_model_init(cm, &dev);
  cm->tf32 = opt->tf32;
  if (opt->cost_db && !(cm->db = cost_db_load(g->arena, opt->cost_db)))
    return false;
  if (opt->cpu) {
    if (!device_load(opt->cpu_device ? opt->cpu_device : "cpu", &cm->cpu))
      return false;
    if (!cm->cpu.is_cpu) {
      opc_error("--cpu-device %s: a GPU's file; the host CPU's needs \"kind\": \"cpu\"",
                cm->cpu.name);
      return false;
    }
    cm->host_device = 1;
    if (opt->cpu_cost_db && !(cm->cpu_db = cost_db_load(g->arena, opt->cpu_cost_db)))
      return false;
  }
  return true;
}
