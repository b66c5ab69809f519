/*
 * The watchdog's renewals, batched: a lock whose renewal falls due joins the
 * client's due list, and the list is flushed from the loop as soon as the
 * current loop iteration is done, up to LEASH__RENEW_BATCH locks per EVALSHA.
 * Locks align their renew times on a coarse grid (see lock.c), so those that
 * fall due together go out in one command.
 */
#ifndef LEASH_RENEW_H
#define LEASH_RENEW_H

#include <stdint.h>

#include "timer.h"

#define LEASH__RENEW_BATCH 100

typedef struct leash_lock leash_lock;
typedef struct leash_client leash_client;
typedef struct leash__renew_batch leash__renew_batch;

typedef struct leash__renewer {
    leash_lock *due_head, *due_tail;
    leash__timer flush_timer;
} leash__renewer;

void leash__renewer_init(leash__renewer *r, leash_client *c);
void leash__renewer_clear(leash__renewer *r);

/* l's renewal is due: send it with the next batch. */
void leash__renew_request(leash_lock *l);
/* l no longer wants a renewal (released, lost, freed): forget it. */
void leash__renew_forget(leash_lock *l);

#endif
