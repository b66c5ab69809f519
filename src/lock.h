/*
 * A lock handle and its state machine. Every change of a handle's state
 * happens in lock.c; other modules only report events to it:
 * replies (through the commands it sent), the renewer's results, wakes from
 * the waiters' channel, subscription confirmations and timer expiries.
 */
#ifndef LEASH_LOCK_H
#define LEASH_LOCK_H

#include <stdint.h>

#include <leash/leash.h>

#include "conn.h"
#include "keys.h"
#include "renew.h"
#include "timer.h"
#include "token.h"
#include "waiters.h"

enum leash__lock_state {
    LEASH__LOCK_IDLE,      /* not held, nothing asked */
    LEASH__LOCK_ACQUIRING, /* an acquire is pending */
    LEASH__LOCK_HELD       /* held (leash_held() may still say 0 past the deadline) */
};

enum leash__acquire_phase {
    LEASH__PHASE_NONE,
    LEASH__PHASE_ATTEMPT,     /* the acquire script is in flight */
    LEASH__PHASE_SUBSCRIBING, /* busy; waiting for the subscription to be confirmed */
    LEASH__PHASE_PARKED,      /* busy; sleeping until a release, the holder's TTL or the end */
    LEASH__PHASE_RETRY,       /* no memory for the attempt: try again at retry_at */
    LEASH__PHASE_AFTER_FORCE  /* this handle's force release goes first */
};

enum leash__renew_state {
    LEASH__RENEW_IDLE,
    LEASH__RENEW_DUE,
    LEASH__RENEW_INFLIGHT
};

struct leash_lock {
    uint32_t magic;
    leash_client *client;
    leash_lock *next, *prev; /* the client's handles, or its graveyard */
    leash__keys keys;
    const char *name; /* points into keys.key */
    void *data;
    int freed;

    /* settings for the next hold */
    int64_t lease_ms, renew_ms, max_hold_ms;
    int watchdog, reentrant;

    int state, phase;
    leash__timer timer;

    /* the pending acquire */
    leash_acquire_cb *acq_cb;
    void *acq_arg;
    int wait_once;         /* wait_ms was 0 */
    int64_t wait_deadline; /* 0 = no limit */
    int timed_out;         /* the wait ended while an attempt was in flight */
    leash__cmd *attempt;
    int64_t attempt_sent;
    unsigned attempt_epoch; /* the confirmed subscription it was sent under, 0 = none */
    int64_t ttl_wake;       /* parked: try again then, even without a message */
    int64_t ttl_seen;       /* longest holder TTL Redis answered during this wait */
    int64_t retry_at;       /* phase RETRY: when to send the attempt again */
    leash__waiter w;

    /* the hold */
    char token[LEASH__TOKEN_LEN + 1];
    uint64_t fence;
    int holds;
    int64_t hold_lease, hold_renew, hold_max;
    int hold_watchdog;
    int64_t held_since, deadline, renew_due;
    uint64_t renewals;

    /* renewal */
    int renew_state;
    leash_lock *renew_next, *renew_prev;
    leash__renew_batch *renew_batch;
    int renew_slot;

    /* the pending release */
    leash_release_cb *rel_cb;
    void *rel_arg;
    leash__cmd *rel_cmd;
    int rel_final;
    int rel_force;      /* rel_cmd is a force release */
    int rel_close_wait; /* leash_client_close waits for rel_cmd */
    char rel_token[LEASH__TOKEN_LEN + 1];

    leash_lost_cb *lost_cb;
    void *lost_arg;
};

/* Events from the other modules. */
void leash__lock_renewed(leash_lock *l, int result, int status, int64_t sent);
void leash__lock_wake(leash_lock *l);
void leash__lock_subscribed(leash_lock *l);
void leash__lock_holder_renewed(leash_lock *l, int64_t lease_ms);
/* leash_client_close: l gives up what it is acquiring (its callback is
 * owed until the client is freed) and releases what it holds, for real. */
void leash__lock_close(leash_lock *l);
/* Client teardown: cancel everything of l (callbacks ECANCELED), release
 * what it holds best-effort, and move it to the graveyard. */
void leash__lock_teardown(leash_lock *l);
void leash__lock_destroy(leash_lock *l);

#endif
