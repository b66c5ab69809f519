/* SPDX-License-Identifier: MIT */
/*
 * Local waiters, one queue per lock channel, and the channel's
 * subscription.
 *
 * A waiting acquire joins its channel's queue: the first waiter of a
 * channel makes the route subscribe (one subscription per channel per
 * client, whatever the number of waiters), and the subscription stays
 * wanted while waiters, holders that came through the queue, or the linger
 * after them remain. Waiters queue in FIFO order. A release of the lock
 * (its message, or a local release this client saw succeed first) wakes
 * the head only, if it is parked; if none is, the wake is kept for the
 * next waiter that parks. A woken waiter that leaves without the lock
 * hands its wake on. A release that kept the lock for one waiter (the
 * mutex's reservation) also wakes that one, wherever it queues.
 *
 * Events go up to each waiter's owner through the hooks of leash__waiter:
 * wake (try now), covered (the subscription is confirmed, again: try once
 * more, a release may have gone unheard), alive (the holder announced a
 * renewal: sleep on).
 *
 * Without pub/sub (its channel polls, as the route says for its slot:
 * LEASH_PUBSUB_OFF, or the server that would publish its releases refused
 * a subscription; a cluster's other masters' channels keep pub/sub, a
 * Redlock client polls only once too few servers subscribe) a queue
 * subscribes nothing and counts as confirmed from the start, or from when
 * it began to poll; one whose slot moves to a node that subscribes
 * subscribes again. Its poll timer wakes the head, if parked, after a backoff
 * that starts at LEASH_POLL_MIN_MS and doubles up to LEASH_POLL_MAX_MS
 * (each pause drawn from its upper half, so that clients started together
 * drift apart), and starts again at the bottom when a waiter is granted
 * (the next may be let in soon: a semaphore's permits, readers). Only the
 * head asks: one asker per lock name and client; the others sleep behind
 * it on their own TTL wakes, which the head's busy answers push later
 * (leash__waitq_holder_seen), as a renewal's message does with pub/sub.
 */
#ifndef LEASH_HOLD_WAITQ_H
#define LEASH_HOLD_WAITQ_H

#include <stddef.h>
#include <stdint.h>

#include "base/env.h"
#include "base/list.h"
#include "base/strmap.h"
#include "base/timer.h"
#include "base/token.h"
#include "route/route.h"

typedef struct leash__waitq leash__waitq;
typedef struct leash__waiter leash__waiter;

typedef struct leash__waiter_hooks {
    void (*wake)(leash__waiter *w);
    void (*covered)(leash__waiter *w);
    void (*alive)(leash__waiter *w, int64_t lease_ms);
    /* The family: the lock was handed to token with fence; 1 if this
     * waiter is the one (it takes it), else 0. */
    int (*handoff)(leash__waiter *w, const char *token, uint64_t fence);
    /* The mutex: 1 if w waits with token (LEASH__TOKEN_LEN digits), for
     * which a release kept the lock (it is woken, wherever it queues). */
    int (*owns)(const leash__waiter *w, const char *token);
    /* The mutex: a release kept the lock for another waiter (for
     * LEASH_RESERVE_MS at most): w, the head, sleeps on (as alive), or,
     * starving and not queued yet, tries once to queue. */
    void (*passed_over)(leash__waiter *w);
} leash__waiter_hooks;

struct leash__waiter {
    leash__waitq *q; /* NULL when not queued */
    leash__list link;
    int parked;
    int woken;          /* sent to try for a release: owed to the others if it leaves */
    int reserved_wake;  /* a release kept the lock for it while it was not parked */
    leash__waitq *held; /* the queue a hold came through (keeps the channel wanted) */
    const leash__waiter_hooks *hooks;
};

typedef struct leash__waitqs {
    leash__env *env;
    leash__route *route;
    int64_t linger_ms;
    leash__strmap map; /* channel -> leash__waitq */
} leash__waitqs;

struct leash__waitq {
    leash__strmap_entry e; /* key: the channel, stored after the struct */
    leash__waitqs *qs;
    unsigned slot;
    leash__list waiters;
    unsigned refs;    /* joined waiters */
    unsigned holders; /* local holders that came through this queue */
    unsigned kept;    /* wakes kept for the next waiter that parks */
    unsigned epoch;   /* confirmations of its subscription so far; 0: not confirmed now */
    int confirmed;
    int lingering;
    int subscribed; /* the route was asked for its channel */
    int polling;    /* no pub/sub for its channel (leash__route_polls_at) */
    leash__timer linger;
    leash__timer poll;                     /* polling: the head's next try */
    int64_t poll_ms;                       /* polling: the backoff now */
    char last_token[LEASH__TOKEN_LEN + 1]; /* release already turned into a wake */
};

/* Installs itself as the route's channel-event owner. */
void leash__waitqs_init(leash__waitqs *qs, leash__env *env, leash__route *route, int64_t linger_ms);
/* Frees every queue (the client is being freed; nothing is joined). */
void leash__waitqs_clear(leash__waitqs *qs);

void leash__waiter_init(leash__waiter *w, const leash__waiter_hooks *hooks);
/* Joins w to the queue of chan (making it, and wanting its subscription, if
 * it is the first). LEASH_OK / LEASH_ENOMEM. */
int leash__waitq_join(leash__waitqs *qs, leash__waiter *w, const char *chan, size_t len,
                      unsigned slot);
/* Whether chan has a queue (a subscription wanted) already. */
int leash__waitq_exists(const leash__waitqs *qs, const char *chan, size_t len);
void leash__waitq_leave(leash__waiter *w);
/* w leaves because it was granted the lock; the channel stays wanted until
 * its hold ends (leash__waitq_hold_ended). */
void leash__waitq_granted(leash__waiter *w);
void leash__waitq_hold_ended(leash__waiter *w);
/* Nonzero if an attempt sent now cannot miss a release (joined, and the
 * subscription confirmed): the subscription's epoch, which changes every
 * time it is confirmed anew. 0 when not covered. */
unsigned leash__waitq_covered(const leash__waiter *w);
/* Whether w's queue polls (no pub/sub): an attempt of a waiter in it is
 * covered whenever it was sent, and it parks at once. */
int leash__waitq_polls(const leash__waiter *w);
/* Polling: w's attempt found the lock held for pttl more ms. When w is
 * its queue's head, the others sleep on (alive, as a holder's renewal
 * message would tell them): only the head asks. Nothing otherwise (pub/
 * sub, a negative pttl, w not the head). */
void leash__waitq_holder_seen(leash__waiter *w, int64_t pttl);
/* Parks w; returns 1 if a kept wake was waiting: try again at once. */
int leash__waitq_park(leash__waiter *w);
/* A release of the lock behind chan was seen (our own release's answer). */
void leash__waitqs_released(leash__waitqs *qs, const char *chan, size_t len, const char *token,
                            size_t token_len);

#endif
