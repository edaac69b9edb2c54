/*
 * prefix_filter.c - standard input to standard output through
 * cpu_prefix_line() (backend/prefix_api.c), the C form of the prefix rule;
 * test_prefixed.py compares it with the Python form (prefix_header.py).
 */
#include <stdio.h>
#include <stdlib.h>

char *cpu_prefix_line(const char *line);

int main(void) {
  size_t cap = 1 << 16, len = 0, got;
  char *text = malloc(cap);
  while (text && (got = fread(text + len, 1, cap - len - 1, stdin)) > 0) {
    len += got;
    if (len + 1 == cap)
      text = realloc(text, cap *= 2);
  }
  if (!text)
    return 1;
  text[len] = 0;
  char *out = cpu_prefix_line(text);
  if (!out)
    return 1;
  fputs(out, stdout);
  free(out);
  free(text);
  return 0;
}
