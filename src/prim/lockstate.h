/* SPDX-License-Identifier: MIT */
/*
 * A lock's state read back from Redis (prim/lockstate.c; leash.h,
 * leash_lock_state): the request behind both public calls.
 */
#ifndef LEASH_PRIM_LOCKSTATE_H
#define LEASH_PRIM_LOCKSTATE_H

#include <leash/leash.h>

#include "prim/core.h"

/* Reads lock `name`'s state through core's route and calls cb once from
 * the loop. The errors of leash_client_lock_state (leash.h); a client
 * that is not usable is the caller's to refuse. */
int leash__state_request(leash__core *core, const char *name, leash_state_cb *cb, void *arg);

#endif
