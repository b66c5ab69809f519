/* SPDX-License-Identifier: MIT */
/*
 * The lock family (prim/family.c): the fair lock, the read and write locks
 * and the semaphore, one machine whose kinds differ only in what they ask
 * Redis and whether they pair.
 */
#ifndef LEASH_PRIM_FAMILY_H
#define LEASH_PRIM_FAMILY_H

#include "prim/core.h"
#include "prim/lock.h"

/* How a kind of the family takes part in a leash_rw_lock_pair. */
enum leash__pair_role {
    LEASH__UNPAIRED,
    /* goes in under its paired write's hold */
    LEASH__PAIR_READ,
    /* refused while its paired read holds or waits (an upgrade would wait
     * for its own read) */
    LEASH__PAIR_WRITE
};

/* A kind of the family: read-only, one of the four below. */
struct leash__family_kind {
    char script_mode; /* what the family's scripts call it (dialect.h's family_acquire_cmd) */
    enum leash__pair_role pair_role;
};

extern const leash__family_kind leash__fair_lock;
extern const leash__family_kind leash__read_lock;
extern const leash__family_kind leash__write_lock;
extern const leash__family_kind leash__semaphore; /* of leash_lock.permits */

/* The family's kind of handle. */
extern const leash__prim leash__family;

/* A new handle of the family (logs why on failure: NULL); permits: the
 * semaphore's, 1 for the fair lock, 0 for the others. */
leash_lock *leash__family_new(leash__core *core, const leash__family_kind *kind, const char *name,
                              int permits);

#endif
