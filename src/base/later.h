/* SPDX-License-Identifier: MIT */
/*
 * The run-later queue: completions decided inside a user's call (a cancel,
 * a release while acquiring) are delivered from the loop, so that no
 * callback runs inside the call that started it (libcurl's rule).
 *
 * An item is embedded in a small struct its producer allocates; run() is
 * called once, from the loop, and frees it. Items carry their owner (a
 * lock handle), so that freeing the owner can deliver its items at once.
 */
#ifndef LEASH_BASE_LATER_H
#define LEASH_BASE_LATER_H

#include "base/list.h"
#include "base/timer.h"

typedef struct leash__later {
    leash__list link;
    const void *owner;
    void (*run)(struct leash__later *item);
} leash__later;

typedef struct leash__laterq {
    leash__list items;
    leash__timer timer;
} leash__laterq;

void leash__laterq_init(leash__laterq *q, leash__env *env);
/* Queues item (owner and run set by the caller) for delivery from the loop. */
void leash__later_push(leash__laterq *q, leash__later *item);
/* Runs owner's items now (the owner is being freed). */
void leash__later_run_owner(leash__laterq *q, const void *owner);
/* Runs every item now (the client is being freed). */
void leash__later_run_all(leash__laterq *q);
/* 1 if nothing is queued. */
int leash__later_idle(const leash__laterq *q);

#endif
