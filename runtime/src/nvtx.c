/*
 * nvtx.c - NVTX ranges: a stack of names per host thread. Operations take
 * the innermost name when they are made, so the checker can say which node
 * of the model did what.
 */
#include <stdlib.h>
#include <string.h>

#include "nvtx3/nvToolsExt.h"
#include "rt.h"

#define MAX_DEPTH 64

static _Thread_local const char *stack[MAX_DEPTH];
static _Thread_local int depth;

/* Interned strings live for the whole process: ops keep pointers to them. */
static struct {
  pthread_mutex_t lock;
  const char **slots;
  size_t cap, count;
} names = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t hash(const char *s) {
  size_t h = 1469598103934665603u;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211u;
  return h;
}

static bool grow_names(void) {
  size_t cap = names.cap ? 2 * names.cap : 256;
  const char **slots = calloc(cap, sizeof *slots);
  if (!slots)
    return false;
  for (size_t i = 0; i < names.cap; i++) {
    const char *s = names.slots[i];
    if (!s)
      continue;
    size_t j = hash(s) & (cap - 1);
    while (slots[j])
      j = (j + 1) & (cap - 1);
    slots[j] = s;
  }
  free(names.slots);
  names.slots = slots;
  names.cap = cap;
  return true;
}

const char *intern(const char *s) {
  if (!s)
    return NULL;
  pthread_mutex_lock(&names.lock);
  const char *found = NULL;
  if (2 * (names.count + 1) > names.cap && !grow_names())
    goto out;
  size_t j = hash(s) & (names.cap - 1);
  while (names.slots[j] && strcmp(names.slots[j], s) != 0)
    j = (j + 1) & (names.cap - 1);
  if (!names.slots[j]) {
    char *copy = strdup(s);
    if (!copy)
      goto out;
    names.slots[j] = copy;
    names.count++;
  }
  found = names.slots[j];
out:
  pthread_mutex_unlock(&names.lock);
  return found;
}

const char *nvtx_current(void) {
  if (depth == 0)
    return NULL;
  return stack[(depth < MAX_DEPTH ? depth : MAX_DEPTH) - 1];
}

int nvtxRangePushA(const char *message) {
  if (depth < MAX_DEPTH)
    stack[depth] = intern(message ? message : "");
  return depth++;
}

int nvtxRangePop(void) {
  if (depth == 0)
    return -1;
  return --depth;
}

void nvtxMarkA(const char *message) {
  (void)message;
}
