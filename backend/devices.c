/*
 * devices.c - a program on several GPUs (--gpus N, after HIOS): which GPU
 * each stream, event and node is on, and the parts of create() and
 * destroy() that are per GPU.
 *
 * The passes placed every node and made every move between GPUs a
 * transfer node (passes/place_devices.c), so the program only has to
 * create each resource on its GPU and make that GPU current before the
 * calls that need it: CUDA launches a kernel only into a stream of the
 * current device, and cuDNN and cuBLAS handles work on the device that
 * was current when they were created. GPU 0 holds the inputs and outputs
 * and stream 0; GPU d > 0 has an arena of its own (gpu_arena[d]) and a
 * copy of the weights (gpu_weights[d]).
 *
 * The program's GPU d runs on CUDA device c->gpu[d]: device d, unless
 * OPC_GPU_MAP names others. Several of the program's GPUs may share one
 * device, each with its own streams, handles, arena and weights, so that a
 * program for two or four GPUs runs, and is checked, on a machine with one.
 */
#include "emit.h"

bool emit_multi_gpu(const Emitter *e) { return gpu_count(e->g) > 1; }

int stream_device(const Emitter *e, int s) {
  for (int k = 0; k < e->g->sched.norder; k++)
    if (node_sched(e->g, e->g->sched.order[k])->stream == s)
      return node_sched(e->g, e->g->sched.order[k])->device;
  return 0;
}

static int event_device(const Emitter *e, int event) {
  for (int k = 0; k < e->g->sched.norder; k++)
    if (node_sched(e->g, e->g->sched.order[k])->record_event == event)
      return node_sched(e->g, e->g->sched.order[k])->device;
  return 0;
}

static void emit_table(Emitter *e, const char *comment, const char *name, int count,
                       int (*device_of)(const Emitter *, int)) {
  if (count == 0)
    return;
  emit(e, "/* %s */", comment);
  char line[1024];
  int len = snprintf(line, sizeof line, "static const int %s[%d] = {", name, count);
  for (int i = 0; i < count && len < (int)sizeof line - 16; i++) {
    if (len > 90) {
      emit(e, "%s", line);
      len = snprintf(line, sizeof line, "   ");
    }
    len += snprintf(line + len, sizeof line - (size_t)len, "%s%d", i ? ", " : "", device_of(e, i));
  }
  emit(e, "%s};", line);
}

static int issued_device(const Emitter *e, int k) {
  return node_sched(e->g, e->st->issued[k])->device;
}

/* In create(), before anything is put on a GPU: c->gpu[], from the
   environment, checked against the machine's device count. */
static void emit_map_gpus(Emitter *e) {
  emit(e, "/*");
  emit(e, " * The CUDA device each of the program's GPUs runs on: GPU d on device d,");
  emit(e, " * unless OPC_GPU_MAP lists one device per GPU, separated by commas. Two");
  emit(e, " * GPUs may share a device (\"0,0\" runs this program on one): each keeps");
  emit(e, " * its streams, arena and weights, and the transfers become copies.");
  emit(e, " */");
  emit(e, "static int map_gpus(%s_ctx *c, int devices)", e->prefix);
  emit_open(e, "{");
  emit(e, "const char *map = getenv(\"OPC_GPU_MAP\");");
  emit(e, "const char *next = map;");
  emit_open(e, "for (int d = 0; d < GPU_COUNT; d++) {");
  emit(e, "long device = d;");
  emit_open(e, "if (map && *map) {");
  emit(e, "char *end;");
  emit(e, "device = strtol(next, &end, 10);");
  emit_open(e, "if (end == next || *end != (d + 1 < GPU_COUNT ? ',' : '\\0')) {");
  emit(e, "snprintf(c->error, sizeof c->error,");
  emit(e, "         \"OPC_GPU_MAP=%%s: expected %%d CUDA device numbers separated by commas\",");
  emit(e, "         map, GPU_COUNT);");
  emit(e, "return -1;");
  emit_close(e, "}");
  emit(e, "next = end + 1;");
  emit_close(e, "}");
  emit_open(e, "if (device < 0 || device >= devices) {");
  emit(e, "if (map && *map)");
  emit(e, "  snprintf(c->error, sizeof c->error, \"OPC_GPU_MAP=%%s: device %%ld; the machine has %%d\",");
  emit(e, "           map, device, devices);");
  emit(e, "else");
  emit(e, "  snprintf(c->error, sizeof c->error, \"this program runs on %%d GPUs; the machine has %%d \"");
  emit(e, "           \"(OPC_GPU_MAP=0,0,... runs it on fewer)\", GPU_COUNT, devices);");
  emit(e, "return -1;");
  emit_close(e, "}");
  emit(e, "c->gpu[d] = (int)device;");
  emit_close(e, "}");
  emit(e, "return 0;");
  emit_close(e, "}");
  emit_blank(e);
}

void emit_device_tables(Emitter *e) {
  if (!emit_multi_gpu(e))
    return;
  emit(e, "enum { GPU_COUNT = %d };", e->g->sched.ndevices);
  emit_table(e, "The GPU of each stream.", "stream_device", e->g->sched.nstreams, stream_device);
  emit_table(e, "The GPU of each event: that of the stream recording it.", "event_device",
             e->g->sched.nevents, event_device);
  emit_table(e, "The GPU of each issued node: current while its calls are issued.", "node_device",
             e->st->nissued, issued_device);
  emit_blank(e);
  emit_map_gpus(e);
}

const char *gpu_device(Emitter *e, const char *gpu) { return emit_str(e, "c->gpu[%s]", gpu); }

void emit_set_device(Emitter *e, const char *gpu) {
  emit_call(e, LIB_CUDA, NULL, "cudaSetDevice(%s)", gpu_device(e, gpu));
}

/* At the start of create(): the devices the program's GPUs run on. */
void emit_device_count_check(Emitter *e) {
  if (!emit_multi_gpu(e))
    return;
  emit(e, "int devices = 0;");
  emit_call(e, LIB_CUDA, NULL, "cudaGetDeviceCount(&devices)");
  emit(e, "if (map_gpus(c, devices) != 0)");
  emit(e, "  %s;", emit_fail(e));
}

void emit_device_fields(Emitter *e) {
  if (!emit_multi_gpu(e))
    return;
  int n = e->g->sched.ndevices;
  emit(e, "int gpu[%d]; /* the CUDA device of each of the program's GPUs */", n);
  emit(e, "float *gpu_arena[%d]; /* GPU d's activations, d > 0 (GPU 0's: arena) */", n);
  if (e->st->nweights)
    emit(e, "float *gpu_weights[%d]; /* GPU d's copy of the constants, d > 0 */", n);
}

/*
 * After GPU 0's arena and weights: those of the other GPUs, and peer
 * access where the GPUs have it. A copy between devices works either way;
 * without peer access the driver stages the copy through host memory.
 */
void emit_device_memory(Emitter *e) {
  if (!emit_multi_gpu(e))
    return;
  emit_blank(e);
  emit(e, "/* The other GPUs: an arena each, a copy of the weights, peer access. */");
  emit_open(e, "for (int d = 1; d < GPU_COUNT; d++) {");
  emit_set_device(e, "d");
  emit_call(e, LIB_CUDA, NULL, "cudaMalloc((void **)&c->gpu_arena[d], %lld)",
            (long long)e->g->arena_bytes);
  if (e->st->nweights) {
    emit_call(e, LIB_CUDA, NULL, "cudaMalloc((void **)&c->gpu_weights[d], weights_bytes)");
    emit_call(e, LIB_CUDA, NULL,
              "cudaMemcpyPeer(c->gpu_weights[d], c->gpu[d], c->weights, c->gpu[0], weights_bytes)");
    emit(e, "/* A copy between devices may still run when cudaMemcpyPeer returns. */");
    emit_call(e, LIB_CUDA, NULL, "cudaDeviceSynchronize()");
  }
  emit_close(e, "}");
  emit_open(e, "for (int d = 0; d < GPU_COUNT; d++) {");
  emit_set_device(e, "d");
  emit_open(e, "for (int peer = 0; peer < GPU_COUNT; peer++) {");
  emit(e, "int can = 0;");
  emit(e, "if (c->gpu[peer] == c->gpu[d])");
  emit(e, "  continue;");
  emit_call(e, LIB_CUDA, NULL, "cudaDeviceCanAccessPeer(&can, c->gpu[d], c->gpu[peer])");
  emit(e, "cudaError_t status = can ? cudaDeviceEnablePeerAccess(c->gpu[peer], 0) : cudaSuccess;");
  emit(e, "if (status == cudaErrorPeerAccessAlreadyEnabled)");
  emit(e, "  (void)cudaGetLastError(); /* by an earlier context, or for GPUs sharing devices */");
  emit(e, "else if (!cuda_ok(c, status, \"cudaDeviceEnablePeerAccess\"))");
  emit(e, "  %s;", emit_fail(e));
  emit_close(e, "}");
  emit_close(e, "}");
  emit_set_device(e, "0");
}

void emit_device_teardown(Emitter *e) {
  if (!emit_multi_gpu(e))
    return;
  emit_open(e, "for (int d = 1; d < GPU_COUNT; d++) {");
  emit(e, "cudaFree(c->gpu_arena[d]);");
  if (e->st->nweights)
    emit(e, "cudaFree(c->gpu_weights[d]);");
  emit_close(e, "}");
}

const char *device_arena(Emitter *e, int device) {
  if (device > 0 && device == e->g->sched.host_device)
    return "c->cpu_arena";
  return device > 0 && emit_multi_gpu(e) ? emit_str(e, "c->gpu_arena[%d]", device) : "c->arena";
}

const char *device_weights(Emitter *e) {
  int d = e->node ? node_sched(e->g, e->node)->device : 0;
  if (d > 0 && d == e->g->sched.host_device)
    return "c->cpu_weights";
  return d > 0 && emit_multi_gpu(e) ? emit_str(e, "c->gpu_weights[%d]", d) : "c->weights";
}
