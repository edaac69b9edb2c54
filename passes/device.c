/*
 * device.c - GPU descriptions for the cost model, read from JSON files.
 *
 * `--device h100` looks for h100.json beside the executable's install
 * (../share/opc/devices), in the configured data directory, then in the
 * source tree; anything containing a '/' or ending in ".json" is a path.
 */
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_paths.h"
#include "schedule.h"

/* Calibration constants of the H100 fit: used when a file leaves them out. */
static const Device calibration_defaults = {
    .kernel_launch_us = 1.9,
    .event_record_us = 0.25,
    .event_wait_us = 0.25,
    .conv_fixed_us = 2.78,
    .tile_m = 32,
    .tile_n = 32,
    .blocks_per_sm = 1.607,
    .gemm_efficiency = 0.291,
    .operand_bandwidth_gbs = 0, /* 0: 2.49 x mem_bandwidth_gbs */
    .memory_efficiency = 0.8,
    .threads_per_sm = 2048,
    .interference = 0.2,
    .link = "nvlink4",
    .link_gbps = 450,
    .link_latency_us = 2.0,
    /* PCIe 5.0 x16 as pinned copies sustain it; the latency includes the
       host function that hands a CPU unit its turn */
    .host_link_gbps = 25,
    .host_link_latency_us = 10,
};


static bool get_number(json_t *root, const char *key, bool required, double *out,
                       const char *where) {
  json_t *v = json_object_get(root, key);
  if (!v) {
    if (required)
      opc_error("%s: device file lacks \"%s\"", where, key);
    return !required;
  }
  if (!json_is_number(v)) {
    opc_error("%s: \"%s\" must be a number", where, key);
    return false;
  }
  *out = json_number_value(v);
  if (!(*out >= 0)) {
    opc_error("%s: \"%s\" must not be negative", where, key);
    return false;
  }
  return true;
}

/* A host CPU ("kind": "cpu"): its rates for the CPU cost model (HOPE). */
static bool cpu_parse(json_t *root, const char *where, Device *dev) {
  *dev = (Device){.is_cpu = true};
  snprintf(dev->name, sizeof dev->name, "%s", json_string_value(json_object_get(root, "name")));
  bool ok = get_number(root, "gflops", true, &dev->cpu_gflops, where) &&
            get_number(root, "mem_bandwidth_gbs", true, &dev->mem_bandwidth_gbs, where) &&
            get_number(root, "op_us", true, &dev->cpu_op_us, where);
  if (ok && (dev->cpu_gflops <= 0 || dev->mem_bandwidth_gbs <= 0)) {
    opc_error("%s: a CPU's gflops and mem_bandwidth_gbs must be positive", where);
    ok = false;
  }
  return ok;
}

bool device_parse(const char *text, const char *where, Device *dev) {
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  if (!root) {
    opc_error("%s:%d: bad device file: %s", where, err.line, err.text);
    return false;
  }
  bool ok = json_is_object(root);
  if (!ok)
    opc_error("%s: a device file is a JSON object", where);
  *dev = calibration_defaults;
  json_t *name = ok ? json_object_get(root, "name") : NULL;
  if (ok && !json_is_string(name)) {
    opc_error("%s: device file lacks a \"name\" string", where);
    ok = false;
  }
  if (ok)
    snprintf(dev->name, sizeof dev->name, "%s", json_string_value(name));
  json_t *kind = ok ? json_object_get(root, "kind") : NULL;
  if (kind && !(json_is_string(kind) && (strcmp(json_string_value(kind), "cpu") == 0 ||
                                         strcmp(json_string_value(kind), "gpu") == 0))) {
    opc_error("%s: \"kind\" must be \"gpu\" or \"cpu\"", where);
    ok = false;
  } else if (kind && strcmp(json_string_value(kind), "cpu") == 0) {
    ok = cpu_parse(root, where, dev);
    json_decref(root);
    return ok;
  }
  json_t *link = ok ? json_object_get(root, "link") : NULL;
  if (link && !json_is_string(link)) {
    opc_error("%s: \"link\" must be a string", where);
    ok = false;
  } else if (link) {
    snprintf(dev->link, sizeof dev->link, "%s", json_string_value(link));
  }
  double sm = 0;
  struct {
    const char *key;
    double *field;
    bool required;
  } fields[] = {
      {"sm_count", &sm, true},
      {"peak_fp32_tflops", &dev->peak_fp32_tflops, true},
      {"peak_tf32_tflops", &dev->peak_tf32_tflops, false},
      {"peak_fp16_tflops", &dev->peak_fp16_tflops, false},
      {"mem_bandwidth_gbs", &dev->mem_bandwidth_gbs, true},
      {"l2_mb", &dev->l2_mb, false},
      {"kernel_launch_us", &dev->kernel_launch_us, false},
      {"event_record_us", &dev->event_record_us, false},
      {"event_wait_us", &dev->event_wait_us, false},
      {"conv_fixed_us", &dev->conv_fixed_us, false},
      {"tile_m", &dev->tile_m, false},
      {"tile_n", &dev->tile_n, false},
      {"blocks_per_sm", &dev->blocks_per_sm, false},
      {"gemm_efficiency", &dev->gemm_efficiency, false},
      {"operand_bandwidth_gbs", &dev->operand_bandwidth_gbs, false},
      {"memory_efficiency", &dev->memory_efficiency, false},
      {"threads_per_sm", &dev->threads_per_sm, false},
      {"interference", &dev->interference, false},
      {"link_gbps", &dev->link_gbps, false},
      {"link_latency_us", &dev->link_latency_us, false},
      {"host_link_gbps", &dev->host_link_gbps, false},
      {"host_link_latency_us", &dev->host_link_latency_us, false},
  };
  for (size_t i = 0; ok && i < sizeof fields / sizeof fields[0]; i++)
    ok = get_number(root, fields[i].key, fields[i].required, fields[i].field, where);
  json_decref(root);
  if (!ok)
    return false;
  dev->sm_count = (int)sm;
  if (dev->sm_count < 1 || dev->peak_fp32_tflops <= 0 || dev->mem_bandwidth_gbs <= 0 ||
      dev->tile_m < 1 || dev->tile_n < 1 || dev->blocks_per_sm <= 0 ||
      dev->gemm_efficiency <= 0 || dev->memory_efficiency <= 0 || dev->threads_per_sm <= 0 ||
      dev->interference > 1 || dev->link_gbps <= 0 || dev->host_link_gbps <= 0) {
    opc_error("%s: device figures out of range (sm_count, peaks, bandwidths and "
              "efficiencies must be positive, interference at most 1)", where);
    return false;
  }
  if (dev->peak_tf32_tflops <= 0)
    dev->peak_tf32_tflops = dev->peak_fp32_tflops;
  if (dev->operand_bandwidth_gbs <= 0)
    dev->operand_bandwidth_gbs = 2.49 * dev->mem_bandwidth_gbs;
  return true;
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (len + 1 == cap) {
      char *bigger = realloc(buf, cap * 2);
      if (!bigger) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = bigger;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf)
    buf[len] = 0;
  return buf;
}

static bool load_file(const char *path, Device *dev) {
  char *text = read_text(path);
  if (!text) {
    opc_error("%s: cannot read device file", path);
    return false;
  }
  bool ok = device_parse(text, path, dev);
  free(text);
  return ok;
}

static bool is_path(const char *spec) {
  size_t n = strlen(spec);
  return strchr(spec, '/') || (n > 5 && strcmp(spec + n - 5, ".json") == 0);
}

/* The directory of the running executable, or "" when unknown. */
static void exe_dir(char *buf, size_t size) {
  ssize_t n = readlink("/proc/self/exe", buf, size - 1);
  buf[n > 0 ? n : 0] = 0;
  char *slash = strrchr(buf, '/');
  if (slash)
    *slash = 0;
  else
    buf[0] = 0;
}

bool device_load(const char *spec, Device *dev) {
  if (!spec || !*spec)
    spec = "h100";
  if (is_path(spec))
    return load_file(spec, dev);
  for (const char *c = spec; *c; c++)
    if (!(*c == '_' || *c == '-' || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
          (*c >= '0' && *c <= '9'))) {
      opc_error("bad device name '%s'", spec);
      return false;
    }
  char dir[PATH_MAX];
  exe_dir(dir, sizeof dir);
  const char *dirs[4];
  char *owned[2] = {NULL, NULL};
  int nd = 0;
  if (dir[0] && asprintf(&owned[0], "%s/../share/opc/devices", dir) >= 0)
    dirs[nd++] = owned[0];
  if (dir[0] && asprintf(&owned[1], "%s/devices", dir) >= 0)
    dirs[nd++] = owned[1];
  dirs[nd++] = OPC_DEVICE_DATADIR;
  dirs[nd++] = OPC_DEVICE_SRCDIR;
  char *found = NULL;
  for (int i = 0; i < nd && !found; i++) {
    char *path = NULL;
    if (asprintf(&path, "%s/%s.json", dirs[i], spec) < 0)
      break;
    if (access(path, R_OK) == 0)
      found = path;
    else
      free(path);
  }
  free(owned[0]);
  free(owned[1]);
  if (found) {
    bool ok = load_file(found, dev);
    free(found);
    return ok;
  }
  opc_error("unknown device '%s' (no %s.json in %s or %s)", spec, spec, OPC_DEVICE_DATADIR,
            OPC_DEVICE_SRCDIR);
  return false;
}
