/* SPDX-License-Identifier: MIT */
/*
 * A one-shot timer of the loop, embedded in its owner. It is made when its
 * owner is (leash__timer_create), so that arming it never allocates and no
 * event is lost for want of a timer. Its callback runs between
 * leash__env_enter/leave, so it may free anything.
 */
#ifndef LEASH_BASE_TIMER_H
#define LEASH_BASE_TIMER_H

#include <stdint.h>

#include "base/env.h"

typedef void leash__timer_fn(void *arg);

typedef struct leash__timer {
    leash__env *env;
    void *handle; /* the adapter's timer; NULL until made */
    leash__timer_fn *fn;
    void *arg;
    int64_t due; /* monotonic ms when armed, else 0 */
} leash__timer;

void leash__timer_init(leash__timer *t, leash__env *env, leash__timer_fn *fn, void *arg);
/* Makes the loop's timer now (the env must be attached). LEASH_OK or
 * LEASH_ENOMEM. */
int leash__timer_create(leash__timer *t);
/* Arms the timer to fire at monotonic time `due` (re-arms if armed). keep
 * alive: whether the timer may keep the loop running on its own (only
 * while a user's request waits on it). LEASH_OK, or LEASH_ENOMEM for a
 * timer that was never made. */
int leash__timer_at(leash__timer *t, int64_t due, int keep_alive);
void leash__timer_stop(leash__timer *t);
/* Stops it and gives the loop's timer back. */
void leash__timer_clear(leash__timer *t);

/*
 * For a call's own deadline, which ends it without its answer: whether it
 * ends at `now`. Found past the deadline, it ends only one turn of the
 * loop later (*turn_at is set then, 0 until): an answer that waits unread
 * because this process did not run its loop for a while (a callback that
 * blocked) is read first; some loops (libuv) run their timers before they
 * look at the sockets. Until it ends, arm the timer for
 * leash__deadline_next(deadline, *turn_at). A timer that fires early (a
 * loop's idea of now lags) is "not yet".
 */
static inline int leash__deadline_ends(int64_t deadline, int64_t *turn_at, int64_t now) {
    if (now < deadline)
        return 0;
    if (*turn_at == 0) {
        *turn_at = now + 1;
        return 0;
    }
    return now >= *turn_at;
}

static inline int64_t leash__deadline_next(int64_t deadline, int64_t turn_at) {
    return turn_at != 0 ? turn_at : deadline;
}

/* The same for a timer t of the deadline's own (keeping the loop alive):
 * 1 when the call ends now; else 0, t armed for when to look again. */
static inline int leash__timer_deadline_ends(leash__timer *t, int64_t deadline, int64_t *turn_at,
                                             int64_t now) {
    if (leash__deadline_ends(deadline, turn_at, now))
        return 1;
    (void)leash__timer_at(t, leash__deadline_next(deadline, *turn_at), 1);
    return 0;
}

#endif
