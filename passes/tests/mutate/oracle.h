/*
 * oracle.h - an independent judge of a schedule and its memory plan, for the
 * mutation tests of the schedule checkers.
 *
 * It shares no code with passes/verify_schedule.c or passes/plan_memory.c
 * and is written to be obviously right rather than fast: happens-before is
 * the transitive closure (one bit set per unit) of stream order and event
 * edges in issue order; conflicts are found from every unit's inputs and
 * outputs, element by element where views are strided.
 */
#ifndef OPC_MUTATE_ORACLE_H
#define OPC_MUTATE_ORACLE_H

#include <stdint.h>

#include "../../pass.h"

/* The host: it writes the graph inputs before any unit and reads the
   outputs after every unit. */
#define UNIT_BEGIN (-1)
#define UNIT_END (1 << 30)

typedef struct Access {
  int unit; /* issue index in g->sched.order, or UNIT_BEGIN / UNIT_END */
  Tensor *t; /* the tensor named by the node (maybe a view) */
  bool write;
} Access;

/* One storage tensor (not a view, not a constant) and everything touching it. */
typedef struct StorageUse {
  Tensor *t;
  Access *acc;
  int nacc;
} StorageUse;

/* A pair of accesses to the same storage that touch a common element, at
   least one writing: they must be ordered. a < b in issue order. */
typedef struct Conflict {
  int a, b;
} Conflict;

typedef struct Oracle {
  Graph *g;
  int n;            /* units: g->sched.order */
  int words;        /* uint64 words per bit set */
  uint64_t *before; /* n bit sets: before[b] holds a when a happens before b */
  StorageUse *st;
  int nst;
  Conflict *conf; /* same-storage conflicts, independent of the schedule */
  int nconf;
} Oracle;

/* What the oracle finds in the current schedule and plan. */
typedef struct Verdict {
  int dep_races;   /* same-storage conflicts not ordered by happens-before */
  int overlaps;    /* pairs of storages sharing bytes whose lifetimes overlap */
  int unordered;   /* of those, pairs with an access pair of two units that nothing
                      orders (a run-time race) */
  int in_place;    /* of those, pairs that would be fine but for one unit reading one
                      and writing the other: the unit's output on its input's bytes */
  int output_view; /* of those, pairs that would be fine if, besides, the caller's read
                      of a graph output that is a view did not count */
  const char *why; /* the first problem, for messages (static buffer) */
} Verdict;

/* Collects the accesses and the same-storage conflicts; the schedule's
   units (order) and the nodes must not change afterwards. */
void oracle_init(Oracle *o, Graph *g);
void oracle_free(Oracle *o);
/* Recomputes happens-before from g->sched and judges it with the plan. */
void oracle_judge(Oracle *o, Verdict *v);
/* Whether a happens before b under the last oracle_judge's schedule. */
bool oracle_hb(const Oracle *o, int a, int b);
/* Whether storage x's accesses are all finished before any write of y. */
bool oracle_done_before(const Oracle *o, const StorageUse *x, const StorageUse *y);
/* Bytes of a storage tensor in the arena. */
int64_t storage_bytes(const Tensor *t);

#endif
