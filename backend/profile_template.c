/*
 * net_profile(): the measuring half of the profile loop (`net --profile`,
 * read back by `opc --cost-db`).
 *
 * Every unit is timed alone. Its calls, issued `repeats` times one after
 * another on its own stream, are captured into a CUDA graph; the graph is
 * launched once to warm up, then several times between two events, and the
 * unit costs the median launch divided by `repeats`. Inside a graph the
 * host's cost (argument checks, the API's launch path) stays out, as it
 * does when the program runs its own graph. Each stage is timed the same
 * way as scheduled: its units on their streams, ordered by the schedule's
 * events inside the stage, forked from and joined back to stream 0.
 */

#ifdef OPC_CPU_RUNTIME
enum { PROFILE_REPEATS = 2, PROFILE_LAUNCHES = 3 }; /* CPU timings: keep the loop quick */
#else
enum { PROFILE_REPEATS = 20, PROFILE_LAUNCHES = 10 };
#endif

typedef int (*profile_issue)(net_ctx *c, int which, cudaStream_t origin);

/* Unit k's calls on its stream (`origin` is that stream). */
static int issue_unit(net_ctx *c, int k, cudaStream_t origin)
{
  (void)origin;
  cudaStream_t stream = c->stream[node_info[k].stream];
  int ok = begin_node(c, k, stream) && node_run[k](c) == 0 && end_node(c, k, stream);
  if (!ok && c->node) {
    nvtxRangePop();
    c->node = NULL;
  }
  return ok ? 0 : -1;
}

/* Stage s as scheduled, starting after and ending before `origin`'s work. */
static int issue_stage(net_ctx *c, int s, cudaStream_t origin)
{
  int used[STREAM_COUNT] = {0};
  int first = stage_info[s].first, end = stage_info[s].first + stage_info[s].count;
  for (int i = first; i < end; i++)
    used[node_info[stage_node[i]].stream] = 1;
  if (!cuda_ok(c, cudaEventRecord(c->fork, origin), "cudaEventRecord"))
    return -1;
  for (int t = 0; t < STREAM_COUNT; t++)
    if (used[t] && c->stream[t] != origin &&
        !cuda_ok(c, cudaStreamWaitEvent(c->stream[t], c->fork, 0), "cudaStreamWaitEvent"))
      return -1;
  for (int i = first; i < end; i++) {
    int k = stage_node[i];
    cudaStream_t stream = c->stream[node_info[k].stream];
    for (int w = node_info[k].first_wait; w < node_info[k].first_wait + node_info[k].nwaits; w++)
      if (!cuda_ok(c, cudaStreamWaitEvent(stream, schedule_event(c, stage_wait[w]), 0),
                   "cudaStreamWaitEvent"))
        return -1;
    if (issue_unit(c, k, origin) != 0)
      return -1;
    if (node_info[k].record >= 0 &&
        !cuda_ok(c, cudaEventRecord(schedule_event(c, node_info[k].record), stream), "cudaEventRecord"))
      return -1;
  }
  for (int t = 0; t < STREAM_COUNT; t++)
    if (used[t] && c->stream[t] != origin &&
        (!cuda_ok(c, cudaEventRecord(c->join[t], c->stream[t]), "cudaEventRecord") ||
         !cuda_ok(c, cudaStreamWaitEvent(origin, c->join[t], 0), "cudaStreamWaitEvent")))
      return -1;
  return 0;
}

static int compare_times(const void *a, const void *b)
{
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* Microseconds of one issue(which): `repeats` of them captured in a graph,
   the median of `launches` timed launches. ev: two timing events. */
static int time_in_graph(net_ctx *c, profile_issue issue, int which, cudaStream_t stream, int repeats,
                         int launches, const cudaEvent_t *ev, double *us)
{
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  float ms[64];
  if (launches > 64)
    launches = 64;
  if (!cuda_ok(c, cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
               "cudaStreamBeginCapture"))
    return -1;
  int ok = 1;
  for (int r = 0; r < repeats && ok; r++)
    ok = issue(c, which, stream) == 0;
  /* End the capture even after a failure, so that the stream is usable. */
  if (!cuda_ok(c, cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture"))
    ok = 0;
  ok = ok && cuda_ok(c, cudaGraphInstantiate(&exec, graph, 0ULL), "cudaGraphInstantiate");
  ok = ok && cuda_ok(c, cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); /* warm-up */
  for (int l = 0; l < launches && ok; l++)
    ok = cuda_ok(c, cudaEventRecord(ev[0], stream), "cudaEventRecord") &&
         cuda_ok(c, cudaGraphLaunch(exec, stream), "cudaGraphLaunch") &&
         cuda_ok(c, cudaEventRecord(ev[1], stream), "cudaEventRecord") &&
         cuda_ok(c, cudaEventSynchronize(ev[1]), "cudaEventSynchronize") &&
         cuda_ok(c, cudaEventElapsedTime(&ms[l], ev[0], ev[1]), "cudaEventElapsedTime");
  if (ok) {
    qsort(ms, (size_t)launches, sizeof ms[0], compare_times);
    double median = launches % 2 ? ms[launches / 2] : (ms[launches / 2 - 1] + ms[launches / 2]) / 2.0;
    *us = median * 1000.0 / repeats;
  }
  if (exec)
    cudaGraphExecDestroy(exec);
  if (graph)
    cudaGraphDestroy(graph);
  return ok ? 0 : -1;
}

/* s as a JSON string. */
static void put_json_string(FILE *f, const char *s)
{
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 32)
      fprintf(f, "\\u%04x", (unsigned char)*s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

/* cuBLAS's version as 10000 * major + 100 * minor + patch, or -1 unknown. */
static long long cublas_version(void)
{
#ifdef CUBLAS_VER_MAJOR
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    return major * 10000LL + minor * 100LL + patch;
#endif
  return -1;
}

static void write_profile(const net_ctx *c, FILE *f, const double *unit_us, const double *stage_us,
                          int repeats, int launches)
{
  struct cudaDeviceProp prop;
  int device = 0, runtime = 0, driver = 0;
  memset(&prop, 0, sizeof prop);
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    snprintf(prop.name, sizeof prop.name, "unknown");
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  long long cublas = cublas_version();
  fputs("{\n  \"format\": \"opc-profile-1\",\n  \"model\": ", f);
  put_json_string(f, schedule_info.model);
  fputs(",\n  \"device\": ", f);
  put_json_string(f, prop.name);
#ifdef OPC_CPU_RUNTIME /* the GPU program on the CPU runtime is the stand-in */
  fputs(schedule_info.cpu_program ? ",\n  \"target\": \"cpu\"" : ",\n  \"target\": \"stand-in\"", f);
#else
  fputs(",\n  \"target\": \"cuda\"", f);
#endif
  fprintf(f, ",\n  \"cuda_runtime\": %d,\n  \"cuda_driver\": %d,\n  \"cudnn\": %lld,\n", runtime, driver,
          (long long)cudnnGetVersion());
  if (cublas >= 0)
    fprintf(f, "  \"cublas\": %lld,\n", cublas);
  else
    fputs("  \"cublas\": null,\n", f);
  fprintf(f, "  \"precision\": \"%s\",\n  \"tf32\": %s,\n  \"scheduler\": ", schedule_info.precision,
          schedule_info.tf32 ? "true" : "false");
  put_json_string(f, schedule_info.scheduler);
  fprintf(f, ",\n  \"repeats\": %d,\n  \"launches\": %d,\n", repeats, launches);
  double total = 0;
  for (int s = 0; s < STAGE_COUNT; s++)
    total += stage_us[s];
  fprintf(f, "  \"predicted_us\": %.4f,\n  \"measured_us\": %.4f,\n", schedule_info.predicted_us, total);
  fputs("  \"units\": [\n", f);
  for (int k = 0; k < NODE_COUNT; k++) {
    fputs("    {\"name\": ", f);
    put_json_string(f, node_info[k].name);
    fprintf(f, ", \"op\": \"%s\", \"stage\": %d, \"stream\": %d, \"us\": %.4f, \"predicted_us\": %.4f,\n",
            node_info[k].op, node_info[k].stage, node_info[k].stream, unit_us[k],
            node_info[k].predicted_us);
    fputs("     \"key\": ", f);
    put_json_string(f, node_info[k].key);
    if (node_form(c, k)) {
      fputs(", \"form\": ", f);
      put_json_string(f, node_form(c, k));
    }
    fprintf(f, "}%s\n", k + 1 < NODE_COUNT ? "," : "");
  }
  fputs("  ],\n  \"stages\": [\n", f);
  for (int s = 0; s < STAGE_COUNT; s++)
    fprintf(f, "    {\"index\": %d, \"units\": %d, \"us\": %.4f, \"predicted_us\": %.4f}%s\n", s,
            stage_info[s].count, stage_us[s], stage_info[s].predicted_us, s + 1 < STAGE_COUNT ? "," : "");
  fputs("  ]\n}\n", f);
}

int net_profile(net_ctx *c, const char *path, int repeats)
{
  int launches = PROFILE_LAUNCHES, status = -1;
  double *unit_us = calloc(NODE_COUNT, sizeof(double));
  double *stage_us = calloc(STAGE_COUNT ? STAGE_COUNT : 1, sizeof(double));
  cudaEvent_t ev[2] = {NULL, NULL};
  FILE *f = NULL;
  if (repeats <= 0)
    repeats = PROFILE_REPEATS;
  if (!unit_us || !stage_us) {
    snprintf(c->error, sizeof c->error, "profile: out of memory");
    goto done;
  }
  if (!cuda_ok(c, cudaEventCreateWithFlags(&ev[0], cudaEventDefault), "cudaEventCreateWithFlags") ||
      !cuda_ok(c, cudaEventCreateWithFlags(&ev[1], cudaEventDefault), "cudaEventCreateWithFlags"))
    goto done;
  for (int k = 0; k < NODE_COUNT; k++)
    if (time_in_graph(c, issue_unit, k, c->stream[node_info[k].stream], repeats, launches, ev,
                      &unit_us[k]) != 0)
      goto done;
  for (int s = 0; s < STAGE_COUNT; s++)
    if (time_in_graph(c, issue_stage, s, c->stream[0], repeats, launches, ev, &stage_us[s]) != 0)
      goto done;
  if (!(f = fopen(path, "w"))) {
    snprintf(c->error, sizeof c->error, "cannot write %s: %s", path, strerror(errno));
    goto done;
  }
  write_profile(c, f, unit_us, stage_us, repeats, launches);
  status = ferror(f) ? -1 : 0;
  if (fclose(f) != 0)
    status = -1;
  if (status != 0)
    snprintf(c->error, sizeof c->error, "cannot write %s: %s", path, strerror(errno));
done:
  for (int i = 0; i < 2; i++)
    if (ev[i])
      cudaEventDestroy(ev[i]);
  free(unit_us);
  free(stage_us);
  return status;
}
