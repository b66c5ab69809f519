/* SPDX-License-Identifier: MIT */
#include "hold/waitq.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/token.h"

static leash__waiter *waiter_of(leash__list *n) {
    return LEASH__CONTAINER(n, leash__waiter, link);
}

static leash__waiter *head_of(const leash__waitq *q) {
    return leash__list_empty(&q->waiters) ? NULL : waiter_of(q->waiters.next);
}

static int wanted(const leash__waitq *q) {
    return q->refs > 0 || q->holders > 0 || q->lingering;
}

static int polls(const leash__waitq *q) {
    return q->polling;
}

/* Nobody needs q any more: the route may unsubscribe; q goes. */
static void drop(leash__waitq *q) {
    leash__waitqs *qs = q->qs;

    if (q->subscribed)
        leash__route_want(qs->route, q->e.key, q->e.len, q->slot, 0);
    leash__strmap_remove(&qs->map, &q->e);
    leash__timer_clear(&q->linger);
    leash__timer_clear(&q->poll);
    free(q);
}

static void linger_over(void *arg) {
    leash__waitq *q = arg;

    q->lingering = 0;
    if (!wanted(q))
        drop(q);
}

/* No local waiter or holder is left: linger (covered for whoever contends
 * again soon), or go. */
static void idle(leash__waitq *q) {
    q->kept = 0;
    leash__timer_stop(&q->poll);
    if (q->qs->linger_ms > 0 &&
        leash__timer_at(&q->linger, leash__now_ms() + q->qs->linger_ms, 0) == LEASH_OK) {
        q->lingering = 1;
        return;
    }
    drop(q);
}

static void wake(leash__waitq *q, leash__waiter *w) {
    w->parked = 0;
    w->woken = 1;
    q->qs->env->stats->wakeups++;
    w->hooks->wake(w);
}

/* ---- polling ---- */

/* Polling: the next try of the head is due after a pause drawn from the
 * upper half of the backoff. Armed while waiters are joined. */
static void poll_arm(leash__waitq *q) {
    int64_t half = q->poll_ms / 2;

    if (!polls(q) || q->refs == 0 || q->poll.due != 0)
        return;
    (void)leash__timer_at(
        &q->poll, leash__now_ms() + half + (int64_t)leash__random_below((uint64_t)half + 1), 1);
}

static void poll_due(void *arg) {
    leash__waitq *q = arg;
    leash__waiter *head = head_of(q);

    q->poll.due = 0;
    q->poll_ms = q->poll_ms * 2 < LEASH_POLL_MAX_MS ? q->poll_ms * 2 : LEASH_POLL_MAX_MS;
    /* A head with an attempt on the wire is asking already; when it parks
     * it is asked again at the next pause. The try may end its wait (a
     * grant, an error): q stays until the walk is over. */
    q->refs++;
    if (head != NULL && head->parked) {
        q->qs->env->stats->polls++;
        wake(q, head);
    }
    if (q->qs->env->freeing)
        return;
    if (--q->refs == 0) {
        if (q->holders == 0)
            idle(q);
        return;
    }
    poll_arm(q);
}

/* ---- joining and leaving ---- */

void leash__waiter_init(leash__waiter *w, const leash__waiter_hooks *hooks) {
    memset(w, 0, sizeof(*w));
    leash__list_init(&w->link);
    w->hooks = hooks;
}

int leash__waitq_exists(const leash__waitqs *qs, const char *chan, size_t len) {
    return leash__strmap_find(&qs->map, chan, len) != NULL;
}

int leash__waitq_join(leash__waitqs *qs, leash__waiter *w, const char *chan, size_t len,
                      unsigned slot) {
    leash__waitq *q;

    if (w->q != NULL)
        return LEASH_OK;
    q = (leash__waitq *)leash__strmap_find(&qs->map, chan, len);
    if (q == NULL) {
        q = LEASH__STRMAP_OWNER_NEW(leash__waitq, e, chan, len);
        if (q == NULL)
            return LEASH_ENOMEM;
        q->qs = qs;
        q->slot = slot;
        q->polling = leash__route_polls_at(qs->route, slot);
        q->poll_ms = LEASH_POLL_MIN_MS;
        leash__list_init(&q->waiters);
        leash__timer_init(&q->linger, qs->env, linger_over, q);
        leash__timer_init(&q->poll, qs->env, poll_due, q);
        if (leash__timer_create(&q->linger) != LEASH_OK ||
            leash__timer_create(&q->poll) != LEASH_OK ||
            leash__strmap_insert(&qs->map, &q->e) != 0) {
            leash__timer_clear(&q->linger);
            leash__timer_clear(&q->poll);
            free(q);
            return LEASH_ENOMEM;
        }
        if (polls(q)) {
            /* Nothing to subscribe: a poll cannot miss a release. */
            q->confirmed = 1;
            q->epoch = 1;
        } else if (leash__route_want(qs->route, chan, len, slot, 1) != LEASH_OK) {
            leash__strmap_remove(&qs->map, &q->e);
            leash__timer_clear(&q->linger);
            leash__timer_clear(&q->poll);
            free(q);
            return LEASH_ENOMEM;
        } else {
            q->subscribed = 1;
        }
    }
    if (q->lingering) {
        q->lingering = 0;
        leash__timer_stop(&q->linger);
    }
    w->q = q;
    w->parked = 0;
    w->woken = 0;
    w->reserved_wake = 0;
    leash__list_insert_tail(&q->waiters, &w->link);
    q->refs++;
    return LEASH_OK;
}

void leash__waitq_leave(leash__waiter *w) {
    leash__waitq *q = w->q;
    leash__waiter *head;

    if (q == NULL)
        return;
    leash__list_remove(&w->link);
    w->q = NULL;
    w->parked = 0;
    /* A waiter that was sent to try for a release and leaves without the
     * lock (cancelled, freed, timed out, failed) hands that release on:
     * the lock may be free, and nobody else will say so. */
    if (w->woken) {
        w->woken = 0;
        q->kept++;
    }
    if (q->kept > q->refs - 1)
        q->kept = q->refs - 1;
    if (--q->refs == 0) {
        leash__timer_stop(&q->poll); /* nobody left to ask for */
        if (q->holders == 0)
            idle(q);
        return;
    }
    /* The new head may be parked with a wake waiting for it; not while the
     * client goes away: each woken head would send an attempt only to be
     * freed and release it (hundreds of commands, the last of which the
     * closing socket may not take). */
    head = head_of(q);
    if (q->kept > 0 && head != NULL && head->parked && !q->qs->env->freeing) {
        q->kept--;
        wake(q, head);
    }
}

void leash__waitq_granted(leash__waiter *w) {
    /* Every release announced so far came before this grant: a kept wake
     * would only send the next waiter into a busy attempt. Polling: the
     * next may be let in soon too (permits, readers): its poll starts at
     * the bottom of the backoff. */
    leash__waitq *q = w->q;

    if (q != NULL) {
        q->kept = 0;
        q->poll_ms = LEASH_POLL_MIN_MS;
        q->holders++;
        w->held = q;
    }
    w->woken = 0;
    leash__waitq_leave(w);
}

void leash__waitq_hold_ended(leash__waiter *w) {
    leash__waitq *q = w->held;

    if (q == NULL)
        return;
    w->held = NULL;
    if (--q->holders == 0 && q->refs == 0)
        idle(q);
}

unsigned leash__waitq_covered(const leash__waiter *w) {
    return w->q != NULL && w->q->confirmed ? w->q->epoch : 0;
}

int leash__waitq_polls(const leash__waiter *w) {
    return w->q != NULL && polls(w->q);
}

int leash__waitq_park(leash__waiter *w) {
    leash__waitq *q = w->q;

    if (q == NULL)
        return 0;
    poll_arm(q);
    if (w->reserved_wake) {
        w->reserved_wake = 0;
        w->woken = 1;
        q->qs->env->stats->wakeups++;
        return 1;
    }
    if (q->kept > 0) {
        q->kept--;
        w->woken = 1;
        q->qs->env->stats->wakeups++;
        return 1;
    }
    w->parked = 1;
    w->woken = 0;
    return 0;
}

void leash__waitq_holder_seen(leash__waiter *w, int64_t pttl) {
    leash__waitq *q = w->q;
    leash__list *n, *next;

    if (q == NULL || !polls(q) || pttl < 0 || head_of(q) != w)
        return;
    /* Polling, no renewal message pushes the wakes of the waiters behind
     * the head: each would ask at every holder's TTL (a holder that
     * renews keeps it near its renew interval). The head's answer is as
     * good as such a message: they sleep on, the head's polls find the
     * release. An alive only moves a timer: nobody leaves meanwhile. */
    for (n = w->link.next; n != &q->waiters; n = next) {
        next = n->next;
        waiter_of(n)->hooks->alive(waiter_of(n), pttl);
    }
}

/* ---- events ---- */

static void released(leash__waitq *q, const char *token, size_t token_len) {
    leash__waiter *head = head_of(q);

    if (head == NULL)
        return;
    /* One release, two announcements (our own answer, then the message, or
     * the other way round): wake once. */
    if (token_len == LEASH__TOKEN_LEN) {
        if (memcmp(q->last_token, token, LEASH__TOKEN_LEN) == 0)
            return;
        memcpy(q->last_token, token, LEASH__TOKEN_LEN);
        q->last_token[LEASH__TOKEN_LEN] = '\0';
    }
    if (head->parked)
        wake(q, head);
    else if (q->kept < q->refs)
        q->kept++;
}

/* A release kept the lock for the waiter of `reserved` (LEASH_RESERVE_MS
 * at most): that one tries now, wherever it queues (with an attempt on the
 * wire, which may have run before the release: as soon as it parks). The
 * head, if another, could only find it busy: it is passed over (it sleeps
 * on until the next release or the end of the reservation, whichever
 * comes first: the reserving waiter may be gone). Only once per release,
 * as released(). */
static void reserved_release(leash__waitq *q, const char *token, const char *reserved) {
    leash__waiter *head = head_of(q), *found = NULL;
    leash__list *n;

    if (head == NULL || memcmp(q->last_token, token, LEASH__TOKEN_LEN) == 0)
        head = NULL; /* our own release's answer already woke it */
    memcpy(q->last_token, token, LEASH__TOKEN_LEN);
    q->last_token[LEASH__TOKEN_LEN] = '\0';
    for (n = q->waiters.next; n != &q->waiters && found == NULL; n = n->next)
        if (waiter_of(n)->hooks->owns != NULL && waiter_of(n)->hooks->owns(waiter_of(n), reserved))
            found = waiter_of(n);
    if (found != NULL && found->parked)
        wake(q, found);
    else if (found != NULL)
        found->reserved_wake = 1;
    if (head != NULL && head != found && head->parked && head->hooks->passed_over != NULL)
        head->hooks->passed_over(head);
}

void leash__waitqs_released(leash__waitqs *qs, const char *chan, size_t len, const char *token,
                            size_t token_len) {
    leash__waitq *q = (leash__waitq *)leash__strmap_find(&qs->map, chan, len);
    if (q != NULL)
        released(q, token, token_len);
}

/* q's waiters cannot miss a release from now on (its subscription is
 * confirmed, or it polls): each tries once more. */
static void confirm(leash__waitq *q) {
    leash__waitqs *qs = q->qs;
    leash__list *n, *next;

    q->confirmed = 1;
    if (++q->epoch == 0) /* never 0: 0 means "not covered" */
        q->epoch = 1;
    /* Each waiter may leave the queue (or free its handle) as it tries;
     * waiters that join meanwhile were covered when they sent. The queue
     * itself stays: whoever leaves hands back to a queue with refs left,
     * or to one that lingers or drops only after this walk. */
    q->refs++;
    for (n = q->waiters.next; n != &q->waiters && !qs->env->freeing; n = next) {
        next = n->next;
        waiter_of(n)->hooks->covered(waiter_of(n));
    }
    if (qs->env->freeing)
        return;
    if (--q->refs == 0 && q->holders == 0)
        idle(q);
}

static void on_confirmed(void *owner, const char *chan, size_t len) {
    leash__waitqs *qs = owner;
    leash__waitq *q = (leash__waitq *)leash__strmap_find(&qs->map, chan, len);

    if (q != NULL && !polls(q))
        confirm(q);
}

/* The queue's channel polls from now on (its server refused a
 * subscription): it gives its subscription up and is confirmed by the
 * caller (confirm()). */
static void to_polling(leash__waitq *q) {
    q->polling = 1;
    if (q->subscribed) {
        q->subscribed = 0;
        leash__route_want(q->qs->route, q->e.key, q->e.len, q->slot, 0);
    }
    q->confirmed = 0; /* confirm() follows */
}

/* The queue's channel may be subscribed again (its slot moved to a node
 * that subscribes): it stops polling and wants its subscription; its
 * waiters sleep on their TTL wakes until it is confirmed, when each tries
 * once (an attempt sent while it polled did not mark the key). Without
 * memory for the subscription it polls on. */
static void to_subscribing(leash__waitq *q) {
    if (leash__route_want(q->qs->route, q->e.key, q->e.len, q->slot, 1) != LEASH_OK)
        return;
    q->subscribed = 1;
    q->polling = 0;
    q->confirmed = 0;
    q->poll_ms = LEASH_POLL_MIN_MS;
    leash__timer_stop(&q->poll);
}

/* Which channels poll may have changed (hold/waitq.h; the route's polling
 * hook): each queue asks the route for its own. One that polls now gives
 * its subscription up and is confirmed: each waiter tries once (a release
 * may have gone unheard while it waited for a subscription), then the
 * head polls. One that may subscribe again wants its subscription. The
 * queues are walked in two rounds: the first changes no waiter, so none
 * can go meanwhile. */
static void on_polling(void *owner) {
    leash__waitqs *qs = owner;
    leash__strmap_entry *e, *next;

    for (e = leash__strmap_next(&qs->map, NULL); e != NULL; e = leash__strmap_next(&qs->map, e)) {
        leash__waitq *q = (leash__waitq *)e;
        int now = leash__route_polls_at(qs->route, q->slot);
        if (now && !q->polling)
            to_polling(q);
        else if (!now && q->polling)
            to_subscribing(q);
    }
    for (e = leash__strmap_next(&qs->map, NULL); e != NULL && !qs->env->freeing; e = next) {
        leash__waitq *q = (leash__waitq *)e;
        next = leash__strmap_next(&qs->map, e);
        if (!q->polling || q->confirmed)
            continue; /* subscribing, or polling already (or made while the walk ran) */
        q->refs++;
        confirm(q);
        if (qs->env->freeing)
            return;
        next = leash__strmap_next(&qs->map, e);
        if (--q->refs == 0 && q->holders == 0)
            idle(q);
        else
            poll_arm(q);
    }
}

static void on_gone(void *owner, const char *chan, size_t len) {
    leash__waitqs *qs = owner;
    leash__waitq *q = (leash__waitq *)leash__strmap_find(&qs->map, chan, len);

    if (q == NULL || polls(q))
        return;
    /* Waiters keep their TTL timers; once confirmed again, each tries.
     * A linger has nothing left to keep alive. */
    q->confirmed = 0;
    if (q->lingering) {
        q->lingering = 0;
        leash__timer_stop(&q->linger);
        if (!wanted(q))
            drop(q);
    }
}

static void on_message(void *owner, const char *chan, size_t len, const char *msg, size_t msg_len) {
    leash__waitqs *qs = owner;
    leash__waitq *q = (leash__waitq *)leash__strmap_find(&qs->map, chan, len);
    leash__msg m;
    leash__list *n, *next;

    if (q == NULL)
        return;
    qs->route->dialect->message(msg, msg_len, &m);
    switch (m.kind) {
    case LEASH__MSG_RELEASED:
        if (m.reserved != NULL)
            reserved_release(q, m.token, m.reserved);
        else
            released(q, m.token, m.token_len);
        break;
    case LEASH__MSG_FORCED:
        released(q, NULL, 0);
        break;
    case LEASH__MSG_GRANTED:
        for (n = q->waiters.next; n != &q->waiters; n = next) {
            leash__waiter *w = waiter_of(n);
            next = n->next;
            if (w->hooks->handoff != NULL && w->hooks->handoff(w, m.token, m.fence)) {
                qs->env->stats->wakeups++;
                break;
            }
        }
        break;
    case LEASH__MSG_RENEWED:
        if (m.lease_ms <= 0)
            break;
        for (n = q->waiters.next; n != &q->waiters; n = next) {
            next = n->next;
            waiter_of(n)->hooks->alive(waiter_of(n), m.lease_ms);
        }
        break;
    default:
        break;
    }
}

static const leash__sub_hooks sub_hooks = {on_confirmed, on_gone, on_message, on_polling};

void leash__waitqs_init(leash__waitqs *qs, leash__env *env, leash__route *route,
                        int64_t linger_ms) {
    memset(qs, 0, sizeof(*qs));
    qs->env = env;
    qs->route = route;
    qs->linger_ms = linger_ms;
    leash__route_set_hooks(route, &sub_hooks, qs);
}

void leash__waitqs_clear(leash__waitqs *qs) {
    leash__strmap_entry *e, *next;

    for (e = leash__strmap_next(&qs->map, NULL); e != NULL; e = next) {
        leash__waitq *q = (leash__waitq *)e;
        next = leash__strmap_next(&qs->map, e);
        leash__timer_clear(&q->linger);
        leash__timer_clear(&q->poll);
        free(q);
    }
    leash__strmap_free(&qs->map);
}
