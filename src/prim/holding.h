/* SPDX-License-Identifier: MIT */
/*
 * The machine every kind of lock shares (prim/holding.c): its states, and
 * what the events every kind sees alike do in them (an attempt, a grant, a
 * wait for a release, the hold and its renewals, a loss, the release slot,
 * the handle's free and the client's close). A kind's dispatch (prim/mutex.c,
 * prim/family.c) decides its own events and hands every other one to
 * leash__holding_step.
 */
#ifndef LEASH_PRIM_HOLDING_H
#define LEASH_PRIM_HOLDING_H

#include <stdint.h>

#include "hold/hold.h"
#include "hold/waitq.h"
#include "prim/lock.h"

/* The states of a handle, whatever its kind (holding.c's table says what
 * each is). A kind's idle state is 0: handle.c's settings may change only
 * then. */
enum leash__lock_state {
    LEASH__LOCK_IDLE,
    LEASH__LOCK_AFTER_FORCE,
    LEASH__LOCK_ATTEMPT,
    LEASH__LOCK_LAST,
    LEASH__LOCK_SUBSCRIBING,
    LEASH__LOCK_PARKED,
    LEASH__LOCK_NOMEM,
    LEASH__LOCK_HELD,
    LEASH__LOCK_EXTRA,
    LEASH__LOCK_XNOMEM,
    LEASH__LOCK_STATES
};

/* What the shared events do in l's state: a call's status, 0 for others
 * (leash__prim.dispatch). */
int leash__holding_step(leash_lock *l, const leash__event *e);

/* A kind's init (leash__prim): sets up a new handle's timer, its waiter
 * (with the kind's waiter_hooks) and its hold (whose renewals' answers go
 * to the kind's hold_renewed). */
void leash__holding_init(leash_lock *l);
const char *leash__holding_state_name(int state);

/* Acquiring (AFTER_FORCE .. NOMEM); holding (HELD, EXTRA, XNOMEM). */
int leash__holding_acquiring(int state);
int leash__holding_held(int state);

/* An attempt from the loop -> ATTEMPT (EXTRA while holding); without
 * memory NOMEM (XNOMEM), tried again shortly. */
void leash__holding_again(leash_lock *l);
/* The acquire is granted -> HELD, its callback LEASH_OK (last: l may be
 * gone after). */
void leash__holding_take(leash_lock *l);
/* Stops waiting for the attempt in flight; with release_grant, whatever it
 * may have been granted is released. */
void leash__holding_abandon_attempt(leash_lock *l, int release_grant);
/* A release nobody waits for (a loss, a free, an abandoned grant, a place
 * given up), sent now or, with send_at != 0, not before then. */
void leash__holding_release_in_background(leash_lock *l, const char *token, int64_t send_at);
/* When every copy of an attempt written until now that may still sit
 * somewhere (a frozen server's socket) is void: each is stamped "not
 * after command_timeout_ms from its write"; plus a margin for the clocks'
 * drift. A release sent then cleans up after any of them that ran. */
int64_t leash__holding_late_copies_void(const leash_lock *l);
/* Sets the handle's one timer for what its state waits for. */
void leash__holding_arm(leash_lock *l);
/* When the answered attempt was written (the lease runs from then). */
int64_t leash__holding_attempt_time(const leash_lock *l, const leash__answer *a);

/* The wait queue's hooks every kind shares: a wake, the subscription
 * confirmed, the holder alive, passed over for a waiter a release kept the
 * lock for. Each becomes an event of l. */
void leash__holding_waiter_wake(leash__waiter *w);
void leash__holding_waiter_covered(leash__waiter *w);
void leash__holding_waiter_alive(leash__waiter *w, int64_t lease_ms);
void leash__holding_waiter_passed_over(leash__waiter *w);

/* A renewal's answer: the event it is for every kind (RENEWED,
 * RENEW_UNREPLICATED, NOT_OURS, RENEW_FAILED); and that event (or the one
 * the kind made of it) delivered to l. */
int leash__holding_renewal_type(const leash__answer *a);
void leash__holding_renewal(leash_lock *l, int type, const leash__answer *a, int64_t sent);

#endif
