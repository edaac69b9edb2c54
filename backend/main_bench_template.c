/*
 * --bench: N runs after W warm-up runs, each timed by CUDA events on the
 * first stream, then the device and the latency's mean and percentiles.
 * It reads the context's fields, so it stays beside the model when main is
 * compiled apart.
 */

static int compare_floats(const void *a, const void *b)
{
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted times. */
static float percentile(const float *sorted, int n, double p)
{
  int k = (int)ceil(p * n) - 1;
  return sorted[k < 0 ? 0 : k >= n ? n - 1 : k];
}

int net_main_bench(net_ctx *c, const void *const *inputs, void *const *outputs, int runs, int warmup)
{
  cudaEvent_t start = NULL, stop = NULL;
  float *times = calloc((size_t)runs, sizeof(float));
  int status = -1;
  cudaError_t err = cudaSuccess;
  if (!times || (err = cudaEventCreateWithFlags(&start, cudaEventDefault)) != cudaSuccess ||
      (err = cudaEventCreateWithFlags(&stop, cudaEventDefault)) != cudaSuccess)
    goto done;
  for (int i = 0; i < warmup; i++)
    if (net_run(c, inputs, outputs) != 0)
      goto done;
  for (int i = 0; i < runs; i++) {
    if ((err = cudaEventRecord(start, c->stream[0])) != cudaSuccess || net_run(c, inputs, outputs) != 0 ||
        (err = cudaEventRecord(stop, c->stream[0])) != cudaSuccess ||
        (err = cudaEventSynchronize(stop)) != cudaSuccess ||
        (err = cudaEventElapsedTime(&times[i], start, stop)) != cudaSuccess)
      goto done;
  }
  double sum = 0;
  for (int i = 0; i < runs; i++)
    sum += times[i];
  qsort(times, (size_t)runs, sizeof(float), compare_floats);
  /* What ran: the GPU, or the CPU runtime's threads and BLAS kernels. */
  struct cudaDeviceProp prop;
  int device = 0;
  if ((err = cudaGetDevice(&device)) != cudaSuccess ||
      (err = cudaGetDeviceProperties(&prop, device)) != cudaSuccess)
    goto done;
  printf("device: %s\n", prop.name);
  printf("latency_ms mean=%.4f p50=%.4f p90=%.4f p99=%.4f min=%.4f runs=%d\n", sum / runs,
         percentile(times, runs, 0.50), percentile(times, runs, 0.90), percentile(times, runs, 0.99),
         times[0], runs);
  status = 0;
done:
  if (err != cudaSuccess)
    snprintf(c->error, sizeof c->error, "benchmark: %s", cudaGetErrorString(err));
  if (start)
    cudaEventDestroy(start);
  if (stop)
    cudaEventDestroy(stop);
  free(times);
  return status;
}
