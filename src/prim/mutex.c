/* SPDX-License-Identifier: MIT */
/*
 * The mutex (leash_lock_new): one machine, whose states and shared events
 * are prim/holding.c's (its table); this file is what the mutex adds: its
 * commands (dialect.h's acquire, release and force scripts), the local
 * waiters it wakes when it gives a hold back, and the starvation bound.
 *
 * The starvation bound. A mutex waiter that has waited LEASH_STARVE_MS
 * asks with its age at its next attempt (a release woke it, or kept the
 * lock for another waiter: passed over, it tries once then), which queues
 * it in Redis for the grants after the current hold (leash.h;
 * dialect/leash.c); a release that keeps the lock for it wakes it by its
 * token (the wait queue's owns hook), and the other waiters sleep on
 * (alive). Its states are the same. The cost is paid only while someone
 * starves: before LEASH_STARVE_MS an attempt asks for one hold, as ever.
 * Waiters that poll (no pub/sub) never queue: they race at each poll.
 *
 * The mutex's own cells (every other one is holding.c's):
 *
 *               IDLE    AFTER_F ATTEMPT LAST    SUBSCR  PARKED  NOMEM   HELD    EXTRA   XNOMEM
 * alive         -       starve  starve  starve  starve  starve  starve  -       -       -
 *
 *   starve   as holding.c's "later"; passed over (a release kept the lock
 *            for another waiter) and not yet asking with its age, it looks
 *            again once it has waited LEASH_STARVE_MS (at once if it has)
 * and in every attempt: a new hold's count is minus the wait's age once it
 * has waited LEASH_STARVE_MS (count_new), and leaving the wait without the
 * lock gives the reservation back (wait_ended).
 */
#include <string.h>

#include "base/clock.h"
#include "prim/holding.h"

/* Whether this mutex's waits may queue for grants once they starve
 * (leash.h, LEASH_STARVE_MS): the dialect can (dialect.h's reserves), and
 * the token stays for the whole wait (with a token per attempt, Redlock,
 * nobody could claim a grant kept for it). A try-once never waits. Nor
 * does a waiter that polls (leash__route_polls_at, for its name's slot):
 * no message tells it that a grant is kept for it, and its next poll may
 * come after the LEASH_RESERVE_MS the grant is kept; every holder would
 * then wait that long for nobody. */
static int may_reserve(const leash_lock *l) {
    return !l->wait_once && l->core->dialect->reserves && !l->core->route->fresh_tokens &&
           !leash__route_polls_at(l->core->route, l->names.slot);
}

/* A new hold's count: 1, or, from a waiter that has waited LEASH_STARVE_MS,
 * minus its age in ms: a busy lock then queues it, oldest first, for the
 * grants after the current hold. */
static int count_new(leash_lock *l) {
    int64_t waited = (leash__now_us() - l->acquire_us) / 1000;

    if (!may_reserve(l) || waited < LEASH_STARVE_MS)
        return 1;
    l->aged = 1;
    return waited < INT32_MAX ? -(int)waited : -INT32_MAX;
}

/* A waiter passed over for one that starves, and that has not asked with
 * its age yet, looks again once it has waited LEASH_STARVE_MS (at once if
 * it has): that attempt queues it for the grants to come (count_new). A
 * waiter nobody passed over (one holder that keeps the lock) sleeps on,
 * sending nothing. */
static void wake_when_starving(leash_lock *l) {
    int64_t starving = l->acquire_us / 1000 + LEASH_STARVE_MS + 1;

    if (!l->aged && may_reserve(l) && starving < l->ttl_wake) {
        l->ttl_wake = starving;
        leash__holding_arm(l);
    }
}

/* A waiter that asked with its age leaves the queue of starving waiters, or
 * gives its turn back (leash.h, LEASH_STARVE_MS). */
static void wait_ended(leash_lock *l, int granted) {
    if (!granted && l->aged)
        leash__holding_release_in_background(l, l->hold.token, 0);
    l->aged = 0;
}

static int dispatch(leash_lock *l, const leash__event *e) {
    int rc = leash__holding_step(l, e);

    if (e->type == LEASH__EV_ALIVE && e->passed_over && leash__holding_acquiring(l->state))
        wake_when_starving(l);
    return rc;
}

/* ---- what the mutex says to Redis ---- */

static int names(leash_lock *l, const char *name) {
    leash__core *core = l->core;

    return core->dialect->names(&l->names, &core->env.log, core->cfg->key_prefix, name,
                                core->cfg->conn->db);
}

/* Whether an attempt marks the lock as waited on (its releases and
 * renewals then publish): one that will wait for a message does; a
 * try-once will not wait, and a waiter that polls (leash__route_polls_at:
 * the server that would publish its releases refused this client's
 * subscriptions) hears no message: holders would publish for nobody. A
 * pub/sub client of the same name marks with its own attempts. */
static int marks(const leash_lock *l) {
    return !l->wait_once && !leash__route_polls_at(l->core->route, l->names.slot);
}

static leash__cmd *attempt_cmd(leash_lock *l, int extra, int64_t deadline) {
    leash__core *core = l->core;

    return core->dialect->acquire_cmd(&l->names, l->hold.token, l->hold.lease_ms,
                                      extra ? l->hold.count + 1 : count_new(l), marks(l),
                                      core->cfg->conn->command_timeout_ms, deadline);
}

static leash__cmd *release_cmd(const leash_lock *l, const char *token, int count_after,
                               int64_t valid_until, int64_t deadline) {
    return l->core->dialect->release_cmd(&l->names, token, count_after, valid_until, deadline);
}

static leash__cmd *force_cmd(const leash_lock *l, int64_t deadline) {
    return l->core->dialect->force_cmd(&l->names, deadline);
}

/* A release of the mutex wakes this client's next waiter at once (its own
 * message comes too, later; the wait queue wakes once per release). */
static void hold_given_back(leash_lock *l, const char *token) {
    leash__waitqs_released(&l->core->waitqs, l->names.channel, l->names.channel_len, token,
                           LEASH__TOKEN_LEN);
}

/* ---- hooks: the wait queue and the watchdog report here ---- */

static int waiter_owns(const leash__waiter *w, const char *token) {
    const leash_lock *l = LEASH__CONTAINER(w, leash_lock, w);

    return memcmp(token, l->hold.token, LEASH__TOKEN_LEN) == 0;
}

static const leash__waiter_hooks waiter_hooks = {leash__holding_waiter_wake,
                                                 leash__holding_waiter_covered,
                                                 leash__holding_waiter_alive,
                                                 NULL /* handoff */,
                                                 waiter_owns,
                                                 leash__holding_waiter_passed_over};

static void hold_renewed(leash__hold *h, const leash__answer *a, int64_t sent) {
    leash_lock *l = LEASH__CONTAINER(h, leash_lock, hold);
    int type = leash__holding_renewal_type(a);

    if (a->status == LEASH_OK && a->kind != LEASH__ANS_RENEWED && a->kind != LEASH__ANS_NOT_OURS) {
        /* Only the family's renewals answer places and fences. */
        leash__log(&l->core->env.log, LEASH_LOG_WARN, "renew %s: the answer is neither 0 nor 1",
                   l->log_name);
        type = LEASH__EV_RENEW_FAILED;
    }
    leash__holding_renewal(l, type, a, sent);
}

const leash__prim leash__mutex = {
    .kind = "mutex",
    .dispatch = dispatch,
    .state_name = leash__holding_state_name,
    .names = names,
    .init = leash__holding_init,
    .waiter_hooks = &waiter_hooks,
    .hold_renewed = hold_renewed,
    .attempt_cmd = attempt_cmd,
    .release_cmd = release_cmd,
    .force_cmd = force_cmd,
    .hold_given_back = hold_given_back,
    .wait_ended = wait_ended,
    .told_when_let_in = 0,
};
