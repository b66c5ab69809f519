/*
 * What every lock handle sees of its client: the environment, the route
 * (where commands go), the dialect (what they say), the run-later queue,
 * the wait queues, the watchdog, the list of handles, the defaults of the
 * options, and the graceful close. client.c makes it; the primitives use
 * it; nothing below the primitives knows it.
 */
#ifndef LEASH_PRIM_CORE_H
#define LEASH_PRIM_CORE_H

#include <stdint.h>

#include <leash/leash.h>

#include "base/env.h"
#include "base/later.h"
#include "base/list.h"
#include "base/token.h"
#include "dialect/dialect.h"
#include "hold/waitq.h"
#include "hold/watchdog.h"
#include "route/route.h"

#define LEASH__CLIENT_MAGIC 0x6c656173u /* "leas" */
#define LEASH__LOCK_MAGIC 0x6c6f636bu   /* "lock" */

typedef struct leash__core {
    leash__env env;
    leash_client *client; /* the public handle, for leash_lock_client() */
    leash__route *route;
    const leash__dialect *dialect;
    leash__laterq later;
    leash__waitqs waitqs;
    leash__watchdog dog;
    leash__list locks;     /* every live handle */
    leash__list graveyard; /* handles freed inside a callback: memory goes at leave */
    /* Defaults of a new handle, and what every command needs. */
    const char *key_prefix;
    int db;
    int fenced; /* grants read and raise a fence floor per lock (Redlock) */
    int wait_replicas;
    /* This client's id on the family's channels; "" until its first
     * family handle. */
    char client_id[LEASH__TOKEN_LEN + 1];
    int64_t lease_ms, renew_ms, max_hold_ms, command_timeout_ms;
    /* leash_client_close: closing, and the releases it still waits for. */
    int closing;
    unsigned close_pending;
    int close_status;
    void (*close_ready)(struct leash__core *core); /* close_pending reached 0 */
} leash__core;

/* The core of a client (for tests and tools that look inside). */
leash__core *leash__client_core(leash_client *c);

/* During leash_client_close: a release the close waits for was sent; and
 * one ended with status. */
void leash__core_close_wait(leash__core *core);
void leash__core_close_step(leash__core *core, int status);

#endif
