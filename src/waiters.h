/*
 * Local waiters of one lock name, and the pub/sub channel they share.
 *
 * A waiting acquire joins its name's channel: the first waiter of a name
 * subscribes (one subscription per name per client, reference-counted), the
 * last one to leave unsubscribes. Waiters queue in FIFO order. A release of
 * the lock (its pub/sub message, or a local release that this client saw
 * succeed first) wakes the head of the queue only, if it is parked; if no
 * waiter is parked, the wake is kept for the next waiter that parks.
 */
#ifndef LEASH_WAITERS_H
#define LEASH_WAITERS_H

#include <stddef.h>
#include <stdint.h>

#include "timer.h"
#include "token.h"

typedef struct leash_lock leash_lock;
typedef struct leash_client leash_client;
typedef struct leash__chan leash__chan;

enum leash__sub_state {
    LEASH__SUB_NONE,    /* not subscribed (or the subscriber connection is down) */
    LEASH__SUB_PENDING, /* SUBSCRIBE sent, not confirmed */
    LEASH__SUB_ACTIVE,  /* confirmed: no release can be missed from here on */
    LEASH__SUB_LEAVING  /* UNSUBSCRIBE sent, not confirmed */
};

struct leash__chan {
    leash__chan *hnext;
    char *name;
    size_t len;
    unsigned hash;
    int sub;             /* enum leash__sub_state */
    int refs;            /* joined waiters */
    int holders;         /* local holders that came through this queue */
    leash__timer linger; /* unsubscribes once idle for sub_linger_ms */
    int lingering;
    leash_lock *head, *tail;
    unsigned epoch;                        /* confirmed subscriptions so far */
    unsigned kept;                         /* wakes kept for the next waiter that parks */
    char last_token[LEASH__TOKEN_LEN + 1]; /* release already turned into a wake */
};

typedef struct leash__chans {
    leash__chan **buckets;
    size_t nbuckets, count;
} leash__chans;

/* The part of a lock handle that belongs to its channel. */
typedef struct leash__waiter {
    leash__chan *chan; /* NULL when not joined */
    leash_lock *next, *prev;
    int parked;
    int woken; /* its attempt was sent for a release: owed to the others if it leaves */
    leash__chan *hold_chan; /* the queue a held lock came through */
} leash__waiter;

void leash__chans_clear(leash__chans *t);
leash__chan *leash__chans_find(const leash__chans *t, const char *name, size_t len);

/* Joins l to its name's FIFO (subscribing if first). LEASH_OK / LEASH_ENOMEM. */
int leash__waiters_join(leash_lock *l);
void leash__waiters_leave(leash_lock *l);
/* l leaves because it was granted the lock; it keeps the channel wanted
 * until its hold ends (leash__waiters_hold_ended). */
void leash__waiters_granted(leash_lock *l);
void leash__waiters_hold_ended(leash_lock *l);
/* 1 while ch's subscription is needed: waiters, holders, or lingering. */
int leash__chan_wanted(const leash__chan *ch);
/* Nonzero if an attempt sent now cannot miss a release (joined, and the
 * subscription confirmed): the subscription's epoch, which changes every
 * time it is confirmed anew. 0 when not covered. */
unsigned leash__waiters_covered(const leash_lock *l);
/* Parks l; returns 1 if a kept wake was waiting: try again at once. */
int leash__waiters_park(leash_lock *l);
/* A release of the lock behind `channel` was seen (message or local). */
void leash__waiters_released(leash_client *c, const char *channel, size_t len, const char *token,
                             size_t token_len);
/* The holder renewed its lease of lease_ms: nobody needs to look before
 * that runs out. */
void leash__waiters_holder_renewed(leash_client *c, const char *channel, size_t len,
                                   int64_t lease_ms);
/* The subscription of ch was confirmed: every joined waiter tries again. */
void leash__waiters_subscribed(leash_client *c, leash__chan *ch);
/* Frees ch if nobody needs it any more. */
void leash__waiters_maybe_free(leash_client *c, leash__chan *ch);

#endif
