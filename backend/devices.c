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
 */
#include "emit.h"

bool emit_multi_gpu(const Emitter *e) { return gpu_count(e->g) > 1; }

int stream_device(const Emitter *e, int s) {
  for (int k = 0; k < e->g->sched.norder; k++)
    if (e->g->sched.order[k]->stream == s)
      return e->g->sched.order[k]->device;
  return 0;
}

static int event_device(const Emitter *e, int event) {
  for (int k = 0; k < e->g->sched.norder; k++)
    if (e->g->sched.order[k]->record_event == event)
      return e->g->sched.order[k]->device;
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

static int issued_device(const Emitter *e, int k) { return e->st->issued[k]->device; }

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
}

void emit_set_device(Emitter *e, const char *device) {
  emit_call(e, LIB_CUDA, NULL, "cudaSetDevice(%s)", device);
}

/* At the start of create(): the machine has the GPUs the program needs. */
void emit_device_count_check(Emitter *e) {
  if (!emit_multi_gpu(e))
    return;
  emit(e, "int gpus = 0;");
  emit_call(e, LIB_CUDA, NULL, "cudaGetDeviceCount(&gpus)");
  emit_open(e, "if (gpus < GPU_COUNT) {");
  emit(e, "snprintf(c->error, sizeof c->error, \"this program runs on %%d GPUs; the machine has %%d\",");
  emit(e, "         GPU_COUNT, gpus);");
  emit(e, "%s;", emit_fail(e));
  emit_close(e, "}");
}

void emit_device_fields(Emitter *e) {
  if (!emit_multi_gpu(e))
    return;
  int n = e->g->sched.ndevices;
  emit(e, "float *gpu_arena[%d]; /* GPU d's activations, d > 0 (GPU 0's: arena) */", n);
  if (e->st->nweights)
    emit(e, "float *gpu_weights[%d]; /* GPU d's copy of the constants, d > 0 */", n);
}

/*
 * After GPU 0's arena and weights: those of the other GPUs, and peer
 * access where the GPUs have it. cudaMemcpyPeerAsync works either way;
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
    emit_call(e, LIB_CUDA, NULL, "cudaMemcpyPeer(c->gpu_weights[d], d, c->weights, 0, weights_bytes)");
    emit(e, "/* A copy between devices may still run when cudaMemcpyPeer returns. */");
    emit_call(e, LIB_CUDA, NULL, "cudaDeviceSynchronize()");
  }
  emit_close(e, "}");
  emit_open(e, "for (int d = 0; d < GPU_COUNT; d++) {");
  emit_set_device(e, "d");
  emit_open(e, "for (int peer = 0; peer < GPU_COUNT; peer++) {");
  emit(e, "int can = 0;");
  emit(e, "if (peer == d)");
  emit(e, "  continue;");
  emit_call(e, LIB_CUDA, NULL, "cudaDeviceCanAccessPeer(&can, d, peer)");
  emit(e, "cudaError_t status = can ? cudaDeviceEnablePeerAccess(peer, 0) : cudaSuccess;");
  emit(e, "if (status == cudaErrorPeerAccessAlreadyEnabled)");
  emit(e, "  (void)cudaGetLastError(); /* enabled by an earlier context: fine */");
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
  int d = e->node ? e->node->device : 0;
  if (d > 0 && d == e->g->sched.host_device)
    return "c->cpu_weights";
  return d > 0 && emit_multi_gpu(e) ? emit_str(e, "c->gpu_weights[%d]", d) : "c->weights";
}
