/*
 * The client: options, the loop's hooks, the two connections, the waiter
 * channels, the renewal batcher and every lock handle.
 *
 * Re-entrancy: every entry from the loop (timer, hiredis callback) and every
 * public call that may run user callbacks is bracketed by
 * leash__client_enter/leave. Objects freed inside (locks, the client) are
 * only marked; their memory goes when the outermost leave returns.
 */
#ifndef LEASH_CLIENT_H
#define LEASH_CLIENT_H

#include <leash/leash.h>
#include <leash/loop.h>

#include "conn.h"
#include "options.h"
#include "renew.h"
#include "scripts.h"
#include "timer.h"
#include "waiters.h"

/* A completion decided outside the loop (cancel, release while acquiring),
 * delivered from the loop so that no callback runs inside the call. */
typedef struct leash__deferred {
    struct leash__deferred *next;
    leash_lock *lock;
    leash_acquire_cb *acq_cb; /* one of these two is set */
    leash_release_cb *rel_cb;
    void *arg;
    int status;
} leash__deferred;

#define LEASH__CLIENT_MAGIC 0x6c656173u /* "leas" */
#define LEASH__LOCK_MAGIC 0x6c6f636bu   /* "lock" */

struct leash_client {
    uint32_t magic;
    leash__config cfg;
    leash__scripts scripts;
    leash_loop loop;
    int attached;
    leash__conn cmd;
    leash__conn sub;
    leash__chans chans;
    leash__renewer renewer;
    leash_lock *locks;                      /* every live handle */
    leash_lock *graveyard;                  /* handles freed inside a callback */
    leash__deferred *soon_head, *soon_tail; /* completions to deliver from the loop */
    leash__timer soon_timer;
    leash_stats stats;
    unsigned depth;
    int freeing;
    /* leash_client_close: releases still to be answered, and the outcome */
    int closing;
    unsigned close_pending;
    int close_status;
    leash_close_cb *close_cb;
    void *close_arg;
    void *data;
};

void leash__client_enter(leash_client *c);
void leash__client_leave(leash_client *c);

/* Queues d (allocated by the caller) for delivery from the loop. */
void leash__client_defer(leash_client *c, leash__deferred *d);
/* Delivers l's queued completions now (its handle is being freed). */
void leash__client_deliver_now(leash_client *c, leash_lock *l);

/* During leash_client_close: a release the close waits for was sent (it
 * will report with leash__client_close_step), or one ended. */
void leash__client_close_wait(leash_client *c);
void leash__client_close_step(leash_client *c, int status);

#endif
