/* SPDX-License-Identifier: MIT */
/*
 * The lock family (fair lock, read-write lock, semaphore): one machine,
 * whose states and shared events are prim/holding.c's (its table); this
 * file is what the family adds. Its kinds (family.h) differ only in what
 * they ask Redis and in how a read and a write pair.
 *
 * The family differs from the mutex in Redis: a busy answer leaves the
 * token a place in the name's queue (l->queued), which the watchdog renews
 * like a hold while the handle acquires and which is given up (a release)
 * when the acquire ends without the lock; the script that lets it in says
 * so on this client's own channel (handoff), so nobody is woken to try;
 * only the head of the queue looks again when the first holder's lease
 * runs out (ttl: a busy answer without a TTL is a waiter behind the head,
 * which sleeps until it is let in, told_when_let_in). Its releases wake
 * no local waiter: the script hands the lock over itself. Without pub/sub
 * (its queue polls: hold/waitq.h) no handoff comes: the head of the local
 * queue polls, and its attempt finds the let-in (a held answer); the
 * waiters behind it look once a lease (a ttl), in case the let-in went to
 * one of them.
 *
 * The family's own cells (every other one is holding.c's):
 *
 *               IDLE    AFTER_F ATTEMPT LAST    SUBSCR  PARKED  NOMEM   HELD    EXTRA   XNOMEM
 * acquire       paired  .       .       .       .       .       .       .       .       .
 * free          unpair  unpair  unpair  unpair  unpair  unpair  unpair  unpair  unpair  unpair
 * busy          .       .       place+  place+  .       .       .       .       .       .
 * renewed       .       -       place   place   place   place   place   .       .       .
 * not-ours      .       -       place   place   place   place   place   .       .       .
 * renew-failed  .       -       place   place   place   place   place   .       .       .
 * renew-unrepl  .       -       place   place   place   place   place   .       .       .
 * deadline      .       -       -       -       again   again   -       .       .       .
 * renew-due     .       -       prenew  prenew  prenew  prenew  prenew  .       .       .
 * handoff       -       ign     handed  handed  handed  handed  handed  -       -       -
 *
 *   .        holding.c's cell
 *   -, ign   as in holding.c's table
 *   paired   a write whose paired read holds or waits: refused, LEASH_ESTATE
 *            (upgrading a read to a write would wait for its own read, and
 *            two upgraders for each other); else holding.c's start
 *   unpair   the pair (leash_rw_lock_pair) ends, then holding.c's free
 *   place+   a wait's busy answer (not a try-once's) is a place in the
 *            queue, renewed from now on (given up if the wait ends); then
 *            holding.c's wait or tout
 *   place    a renewal of the waiter's place answered: renewed, the
 *            place's deadline moves; gone, a new place is taken (again)
 *            when SUBSCRIBING or PARKED, else the attempt on the wire
 *            takes one; failed, again soon
 *   prenew   the place's renewal joins the next batch
 *   deadline (with a place) the place went unrenewed for its lease and
 *            may be gone: again
 *   again    holding.c's again
 *   handed   let in by another's script: -> HELD with the place's
 *            deadline and renewal schedule, callback LEASH_OK; an attempt on
 *            the wire is dropped (it would find the hold). With
 *            wait_replicas, a fixed lease, a place past its deadline, or a
 *            let-in whose fence is not above the largest mark of the
 *            place's writes heard of this wait (the mark: at least the
 *            hash's last fence then; a late message: the hold it names may
 *            have run out before the token was queued again): again (the
 *            attempt finds the hold and decides)
 */
#include <string.h>

#include "base/clock.h"
#include "hold/watchdog.h"
#include "prim/family.h"
#include "prim/holding.h"

const leash__family_kind leash__fair_lock = {'f', LEASH__UNPAIRED};
const leash__family_kind leash__read_lock = {'r', LEASH__PAIR_READ};
const leash__family_kind leash__write_lock = {'w', LEASH__PAIR_WRITE};
const leash__family_kind leash__semaphore = {'s', LEASH__UNPAIRED};

enum {
    F_IDLE = LEASH__LOCK_IDLE,
    F_AFTER_FORCE = LEASH__LOCK_AFTER_FORCE,
    F_ATTEMPT = LEASH__LOCK_ATTEMPT,
    F_LAST = LEASH__LOCK_LAST,
    F_SUBSCRIBING = LEASH__LOCK_SUBSCRIBING,
    F_PARKED = LEASH__LOCK_PARKED
};

/* ---- the waiter's place ---- */

/* A write of the place was answered (a): its mark (a->fence), at least
 * every fence the hash had given then. An answer without one (0) marks
 * every let-in as possibly older. */
static void place_written(leash_lock *l, const leash__answer *a) {
    uint64_t mark = a->fence > 0 ? a->fence : UINT64_MAX;

    if (mark > l->place_mark)
        l->place_mark = mark;
}

/* Whether a let-in under fence was granted after every write of the
 * place this handle heard of: a hash's fences strictly grow, and a write's
 * mark is at least the last one given before it, so a fence above the
 * largest mark was given after. Else the let-in may be a late message
 * (its bytes held on the way) that names a hold which ran out unrenewed,
 * after which an attempt of the token queued it again: the place's
 * deadline is the new place's, not that hold's. The server's clock does
 * not decide: it may have stepped back (fences then run ahead of it). */
static int let_in_after_place(const leash_lock *l, uint64_t fence) {
    return fence > l->place_mark;
}

/* An attempt answered "queued": the token has a place, which lives as long
 * as its lease from the attempt's write, and is renewed. */
static void note_place(leash_lock *l, const leash__answer *a) {
    int64_t written = leash__holding_attempt_time(l, a);

    place_written(l, a);

    if (!l->queued) {
        l->queued = 1;
        l->hold.max_ms = 0; /* a place has no maximum; a hold gets it back */
        /* A fixed lease keeps the client's interval, which may not fit it. */
        if (l->hold.renew_ms <= 0 || l->hold.renew_ms >= l->hold.lease_ms)
            l->hold.renew_ms = l->hold.lease_ms / 3 > 0 ? l->hold.lease_ms / 3 : 1;
        leash__hold_queue(&l->hold, written);
    } else {
        leash__hold_extend(&l->hold, written);
    }
}

/* The wait ended: a waiter leaves the queue at once, not a lease later (if
 * it was let in meanwhile, the release gives that back); let in, its place
 * is its hold now, and a renewal of the place still on the wire is the
 * hold's first (hold_renewed). */
static void wait_ended(leash_lock *l, int granted) {
    if (!granted && l->queued)
        leash__holding_release_in_background(l, l->hold.token, 0);
    l->place_renewal_out = granted && l->queued && l->hold.renew_state == LEASH__RENEW_INFLIGHT;
    l->queued = 0;
    l->place_mark = 0;
}

/* What a renewal of the waiter's place answered. */
static void place_renewed(leash_lock *l, const leash__event *e) {
    if (!l->queued)
        return;
    switch (e->type) {
    case LEASH__EV_RENEWED:
        place_written(l, e->answer);
        leash__hold_extend(&l->hold, e->sent);
        leash__hold_schedule_renewal(&l->hold, e->sent);
        leash__holding_arm(l);
        break;
    case LEASH__EV_NOT_OURS:
        /* The place is gone (its lease ran out while we could not reach
         * Redis, a force release, lost data): take one again. */
        l->queued = 0;
        if (l->state == F_PARKED || l->state == F_SUBSCRIBING)
            leash__holding_again(l);
        break;
    default:
        leash__hold_retry_renewal(&l->hold, leash__now_ms());
        leash__holding_arm(l);
        break;
    }
}

/* Let in by a script it did not send (a release, an expiry noticed, a
 * renewal of its place): the hold is what its place was (the script gave
 * the hold the place's expiry), and its deadline the place's, which the
 * last write of the place this client saw answered set. Where that cannot
 * be trusted, or counts only with replicas or with a fresh lease (a fixed
 * lease), an attempt of its own, which finds the hold, decides. */
static void handed(leash_lock *l, const leash__event *e) {
    int64_t now = leash__now_ms();

    if (e->sent != 0)
        leash__hold_extend(&l->hold, e->sent);
    leash__holding_abandon_attempt(l, 0);
    /* Let in before an attempt answered "queued": which copy of it wrote
     * the place (an earlier one may have, before a reconnect) is not
     * known, so neither is the place's expiry. Let in no later than a
     * write of the place this handle heard of: the hold may have ended
     * before that write queued the token again (let_in_after_place). */
    if (!l->queued || l->core->cfg->route->wait_replicas > 0 || !l->watchdog ||
        now >= l->hold.deadline || !let_in_after_place(l, e->fence)) {
        leash__holding_again(l);
        return;
    }
    leash__hold_take_place(&l->hold, now, e->fence, l->max_hold_ms);
    leash__holding_take(l);
}

/* ---- the dispatcher ---- */

/* The family's own cells while acquiring (the table above); 1 if it took
 * e whole. */
static int acquiring_event(leash_lock *l, const leash__event *e) {
    int st = l->state;

    switch (e->type) {
    case LEASH__EV_BUSY:
        if ((st == F_ATTEMPT || st == F_LAST) && !l->wait_once)
            note_place(l, e->answer); /* given up if the wait ends */
        return 0;
    case LEASH__EV_RENEW_DUE:
        if (l->queued)
            leash__watchdog_request(&l->core->dog, &l->hold);
        leash__holding_arm(l);
        return 1;
    case LEASH__EV_RENEWED:
    case LEASH__EV_NOT_OURS:
    case LEASH__EV_RENEW_FAILED:
    case LEASH__EV_RENEW_UNREPLICATED:
        place_renewed(l, e);
        return 1;
    case LEASH__EV_DEADLINE:
        /* A place that went unrenewed for its lease may be gone. */
        if (l->queued && (st == F_SUBSCRIBING || st == F_PARKED))
            leash__holding_again(l);
        return 1;
    case LEASH__EV_HANDOFF:
        if (st != F_AFTER_FORCE)
            handed(l, e);
        return 1;
    default:
        return 0;
    }
}

/* A write whose paired read holds or waits. */
static int upgrade(const leash_lock *l) {
    return l->family->pair_role == LEASH__PAIR_WRITE && l->pair != NULL && l->pair->state != F_IDLE;
}

static int dispatch(leash_lock *l, const leash__event *e) {
    if (leash__holding_acquiring(l->state) && acquiring_event(l, e))
        return 0;
    switch (e->type) {
    case LEASH__EV_BUSY:
    case LEASH__EV_GONE:
        /* The extra hold's attempt found no hold: the token may wait in
         * the queue again (a late copy of its attempt), and the loss that
         * follows gives that place back. */
        if (l->state == LEASH__LOCK_EXTRA)
            l->requeued = 1;
        break;
    case LEASH__EV_ACQUIRE:
        if (l->state == F_IDLE && l->acq_cb == NULL && upgrade(l)) {
            leash__log(&l->core->env.log, LEASH_LOG_ERROR,
                       "leash_acquire %s: its paired read handle holds or waits (upgrading a "
                       "read to a write is refused: it would wait for its own read, and two "
                       "upgraders for each other)",
                       l->log_name);
            return LEASH_ESTATE;
        }
        break;
    case LEASH__EV_FREE:
        if (l->pair != NULL) {
            l->pair->pair = NULL;
            l->pair = NULL;
        }
        break;
    default:
        break;
    }
    return leash__holding_step(l, e);
}

/* ---- what the family says to Redis ---- */

static int names(leash_lock *l, const char *name) {
    leash__core *core = l->core;

    return core->dialect->family_names(&l->names, &core->env.log, core->cfg->key_prefix, name,
                                       core->cfg->conn->db, core->client_id);
}

static leash__cmd *attempt_cmd(leash_lock *l, int extra, int64_t deadline) {
    leash__core *core = l->core;
    /* A read whose paired write holds goes in under it. */
    const char *under = l->family->pair_role == LEASH__PAIR_READ && l->pair != NULL &&
                                leash__holding_held(l->pair->state)
                            ? l->pair->hold.token
                            : NULL;

    return core->dialect->family_acquire_cmd(&l->names, l->hold.token, l->hold.lease_ms,
                                             l->family->script_mode, l->permits, l->wait_once,
                                             extra ? l->hold.count + 1 : 1, under,
                                             core->cfg->conn->command_timeout_ms, deadline);
}

static leash__cmd *release_cmd(const leash_lock *l, const char *token, int count_after,
                               int64_t valid_until, int64_t deadline) {
    return l->core->dialect->family_release_cmd(&l->names, token, count_after, valid_until,
                                                deadline);
}

static leash__cmd *force_cmd(const leash_lock *l, int64_t deadline) {
    return l->core->dialect->family_force_cmd(&l->names, deadline);
}

/* ---- hooks: the wait queue and the watchdog report here ---- */

static int waiter_handoff(leash__waiter *w, const char *token, uint64_t fence) {
    leash_lock *l = LEASH__CONTAINER(w, leash_lock, w);
    leash__event e;

    if (memcmp(token, l->hold.token, LEASH__TOKEN_LEN) != 0)
        return 0;
    memset(&e, 0, sizeof(e));
    e.type = LEASH__EV_HANDOFF;
    e.fence = fence;
    leash__lock_deliver(l, &e);
    return 1;
}

static const leash__waiter_hooks waiter_hooks = {leash__holding_waiter_wake,
                                                 leash__holding_waiter_covered,
                                                 leash__holding_waiter_alive,
                                                 waiter_handoff,
                                                 NULL /* owns */,
                                                 leash__holding_waiter_passed_over};

static void hold_renewed(leash__hold *h, const leash__answer *a, int64_t sent) {
    leash_lock *l = LEASH__CONTAINER(h, leash_lock, hold);
    int type = leash__holding_renewal_type(a), place_renewal = l->place_renewal_out;

    l->place_renewal_out = 0;
    /* A waiter's place: it was let in. */
    if (a->status == LEASH_OK && a->kind == LEASH__ANS_HANDED && !leash__holding_held(l->state))
        type = LEASH__EV_HANDOFF;
    /* "Queued" is a hold's answer only to the renewal of its place that
     * was on the wire when the token was let in (it ran first; which
     * millisecond it went out in says nothing: the let-in may be read in
     * the same one). Any other says the token waits again (its hold was
     * given back by a copy this handle never heard of, and a late copy of
     * its attempt queued it): no hold. */
    /* Let in anew (another fence): the same copies gave the hold back and
     * queued the token, and it went in again, after others maybe: the
     * hold this handle had ended there. */
    l->requeued = a->status == LEASH_OK && leash__holding_held(l->state) &&
                  ((a->kind == LEASH__ANS_QUEUED && !place_renewal) ||
                   (a->kind == LEASH__ANS_HANDED && a->fence != l->hold.fence));
    if (l->requeued)
        type = LEASH__EV_NOT_OURS;
    leash__holding_renewal(l, type, a, sent);
}

const leash__prim leash__family = {
    .kind = "family",
    .dispatch = dispatch,
    .state_name = leash__holding_state_name,
    .names = names,
    .init = leash__holding_init,
    .waiter_hooks = &waiter_hooks,
    .hold_renewed = hold_renewed,
    .attempt_cmd = attempt_cmd,
    .release_cmd = release_cmd,
    .force_cmd = force_cmd,
    .hold_given_back = NULL, /* the family's script hands the lock over itself */
    .wait_ended = wait_ended,
    .told_when_let_in = 1,
};

/* ---- making and pairing handles ---- */

leash_lock *leash__family_new(leash__core *core, const leash__family_kind *kind, const char *name,
                              int permits) {
    leash_lock *l = leash__lock_make(core, &leash__family, name);

    if (l != NULL) {
        l->family = kind;
        l->permits = permits;
    }
    return l;
}

int leash_rw_lock_pair(leash_lock *read, leash_lock *write) {
    if (!leash__lock_usable(read) || !leash__lock_usable(write))
        return LEASH_EINVAL;
    if (read->family == NULL || read->family->pair_role != LEASH__PAIR_READ ||
        write->family == NULL || write->family->pair_role != LEASH__PAIR_WRITE ||
        read->core != write->core || read->names.key_len != write->names.key_len ||
        memcmp(read->names.key, write->names.key, read->names.key_len) != 0) {
        leash__log(&read->core->env.log, LEASH_LOG_ERROR,
                   "leash_rw_lock_pair: needs a read and a write handle of one name and client");
        return LEASH_EINVAL;
    }
    if (read->pair != NULL)
        read->pair->pair = NULL;
    if (write->pair != NULL)
        write->pair->pair = NULL;
    read->pair = write;
    write->pair = read;
    return LEASH_OK;
}
