/* arena.c - bump allocation in large chunks, released all at once. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

enum { CHUNK_SIZE = 1 << 20 };

typedef struct Chunk {
  struct Chunk *next;
  size_t used, size;
  _Alignas(16) unsigned char data[];
} Chunk;

struct Arena {
  Chunk *head;
};

Arena *arena_new(void) {
  Arena *a = calloc(1, sizeof *a);
  if (!a) {
    fprintf(stderr, "opc: fatal: out of memory\n");
    abort();
  }
  return a;
}

void arena_free(Arena *a) {
  if (!a)
    return;
  for (Chunk *c = a->head, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  free(a);
}

void *arena_alloc(Arena *a, size_t size) {
  size = (size + 15) & ~(size_t)15;
  Chunk *c = a->head;
  if (!c || c->size - c->used < size) {
    size_t cap = size > CHUNK_SIZE ? size : CHUNK_SIZE;
    c = malloc(sizeof *c + cap);
    if (!c) {
      /* The compiler cannot report anything useful without memory. */
      fprintf(stderr, "opc: fatal: out of memory\n");
      abort();
    }
    c->used = 0;
    c->size = cap;
    /* Keep the partly used chunk at the head when a huge block comes in. */
    if (a->head && size > CHUNK_SIZE) {
      c->next = a->head->next;
      a->head->next = c;
    } else {
      c->next = a->head;
      a->head = c;
    }
  }
  void *p = c->data + c->used;
  c->used += size;
  memset(p, 0, size);
  return p;
}

void *arena_dup(Arena *a, const void *p, size_t size) {
  void *q = arena_alloc(a, size ? size : 1);
  if (size)
    memcpy(q, p, size);
  return q;
}

char *arena_strdup(Arena *a, const char *s) {
  return arena_dup(a, s, strlen(s) + 1);
}

char *arena_printf(Arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = arena_alloc(a, (size_t)len + 1);
  va_start(ap, fmt);
  vsnprintf(s, (size_t)len + 1, fmt, ap);
  va_end(ap);
  return s;
}
