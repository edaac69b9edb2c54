/*
 * fuzz_cost_db.c - libFuzzer target: the bytes as a cost database, the
 * JSON profile that `opc --cost-db FILE` reads (passes/cost_db.c).
 */
#include <stdlib.h>

#include "../../passes/schedule.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Arena *a = arena_new();
  CostDb *db = cost_db_load(a, fuzz_write_file("profile.json", data, size));
  if (db) {
    cost_db_check_precision(db, "tf32");
    (void)cost_db_size(db);
  }
  arena_free(a);
  return 0;
}
