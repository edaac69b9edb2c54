/* testutil.h - small helpers shared by the runtime's tests. */
#ifndef OPC_RT_TESTUTIL_H
#define OPC_RT_TESTUTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;

static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  failures++;
}

static void expect(bool ok, const char *what) {
  if (!ok)
    fail("%s", what);
}

/* Deterministic values in [-1, 1). */
static unsigned rng_state = 12345;
static float rnd(void) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return (float)((rng_state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

__attribute__((unused)) static float *rnd_array(long long n) {
  float *a = malloc((n ? n : 1) * sizeof(float));
  for (long long i = 0; i < n; i++)
    a[i] = rnd();
  return a;
}

/* Compares got with want; prints the first mismatch. */
__attribute__((unused)) static bool close_arrays(const char *what, const float *got, const float *want, long long n,
                         float tol) {
  for (long long i = 0; i < n; i++) {
    float d = fabsf(got[i] - want[i]);
    if (!(d <= tol * (1.0f + fabsf(want[i])))) {
      fail("%s: element %lld is %g, expected %g", what, i, got[i], want[i]);
      return false;
    }
  }
  return true;
}

static int finish(const char *name) {
  if (failures) {
    fprintf(stderr, "%s: %d failure(s)\n", name, failures);
    return 1;
  }
  printf("%s: ok\n", name);
  return 0;
}

#endif
