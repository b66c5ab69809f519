/* SPDX-License-Identifier: MIT */
/*
 * The watchdog: renewals of held holds, batched. A hold whose renewal falls
 * due joins the due list; from the loop, once the current loop iteration is
 * done, the list goes out in as few renew commands as the route allows:
 * holds whose keys share a batch key (one server: all; a cluster: one
 * slot) go together, up to LEASH__RENEW_BATCH per command. Holds align
 * their renew times on a coarse grid (hold.c), so those that fall due
 * together share commands. Each hold hears its own answer (hold->renewed).
 */
#ifndef LEASH_HOLD_WATCHDOG_H
#define LEASH_HOLD_WATCHDOG_H

#include "base/env.h"
#include "base/list.h"
#include "base/timer.h"
#include "hold/hold.h"
#include "route/route.h"

typedef struct leash__watchdog {
    leash__env *env;
    leash__route *route;
    leash__list due;
    leash__timer flush_timer;
} leash__watchdog;

void leash__watchdog_init(leash__watchdog *w, leash__env *env, leash__route *route);
/* Makes its timer (the env is attached). LEASH_OK / LEASH_ENOMEM. */
int leash__watchdog_prepare(leash__watchdog *w);
void leash__watchdog_clear(leash__watchdog *w);

/* h's renewal is due: it goes with the next batch. */
void leash__watchdog_request(leash__watchdog *w, leash__hold *h);
/* h no longer wants a renewal (released, lost, freed): forget it; an
 * answer on its way is not delivered. */
void leash__watchdog_forget(leash__hold *h);

#endif
