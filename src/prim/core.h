/* SPDX-License-Identifier: MIT */
/*
 * What every lock handle sees of its client: the environment, the route
 * (where commands go), the dialect (what they say), the run-later queue,
 * the wait queues, the watchdog, the list of handles, the primitives' part
 * of the configuration, and the graceful close. client.c makes it; the
 * primitives use it; nothing below the primitives knows it.
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

/* The primitives' part of the client's configuration (options.h), with
 * the parts below that they read too. Read-only. */
typedef struct leash__prim_cfg {
    const leash__conn_cfg *conn;   /* db, command_timeout_ms */
    const leash__route_cfg *route; /* wait_replicas */
    const char *key_prefix;
    int64_t lease_ms, renew_ms, max_hold_ms; /* a new handle's defaults */
} leash__prim_cfg;

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
    const leash__prim_cfg *cfg;
    /* This client's id on the family's channels; "" until its first
     * family handle. */
    char client_id[LEASH__TOKEN_LEN + 1];
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
