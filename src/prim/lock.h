/* SPDX-License-Identifier: MIT */
/*
 * A lock handle (leash_lock), whatever its kind. The public calls, the
 * answers, the timers and the wait queue's wake-ups all reach it as events
 * of its kind's one dispatch function (prim/mutex.c for the mutex,
 * prim/family.c for the lock family), which decides what the kind's own
 * events do and hands the rest to the machine every kind shares
 * (prim/holding.c: the states, the acquire, the hold, the release slot).
 */
#ifndef LEASH_PRIM_LOCK_H
#define LEASH_PRIM_LOCK_H

#include <stdint.h>

#include <leash/leash.h>

#include "base/later.h"
#include "base/list.h"
#include "base/timer.h"
#include "base/token.h"
#include "dialect/dialect.h"
#include "hold/hold.h"
#include "hold/waitq.h"
#include "prim/core.h"
#include "route/route.h"

/* Everything that can happen to a handle. */
enum leash__event_type {
    /* calls */
    LEASH__EV_ACQUIRE,
    LEASH__EV_RELEASE,
    LEASH__EV_CANCEL,
    LEASH__EV_FORCE,
    LEASH__EV_FREE,  /* leash_lock_free, or the client's free */
    LEASH__EV_CLOSE, /* leash_client_close */
    /* the acquire attempt's answer */
    LEASH__EV_GRANTED,
    LEASH__EV_BUSY,
    LEASH__EV_LATE,
    LEASH__EV_GONE,
    LEASH__EV_FAILED,
    LEASH__EV_UNREPLICATED, /* granted, but too few replicas acknowledged it */
    /* other answers */
    LEASH__EV_RELEASED, /* the release's (any status) */
    LEASH__EV_FORCED,   /* the force release's (any status) */
    LEASH__EV_RENEWED,
    LEASH__EV_NOT_OURS,
    LEASH__EV_RENEW_FAILED,
    LEASH__EV_RENEW_UNREPLICATED, /* renewed, but too few replicas acknowledged it */
    /* timers */
    LEASH__EV_WAIT_END,
    LEASH__EV_OVERDUE, /* the attempt's answer did not come by the acquire's bound */
    LEASH__EV_TTL,
    LEASH__EV_RETRY,
    LEASH__EV_DEADLINE,
    LEASH__EV_MAX_HOLD,
    LEASH__EV_RENEW_DUE,
    /* the wait queue */
    LEASH__EV_WAKE,
    LEASH__EV_COVERED,
    LEASH__EV_ALIVE,
    LEASH__EV_HANDOFF, /* family: this waiter was let in (a message or a renewal) */
    /* a multi-lock's members (prim/multi.c): member, status */
    LEASH__EV_MEMBER_ACQUIRED, /* its acquire's callback (status) */
    LEASH__EV_MEMBER_LOST,     /* its lost callback (status: the reason) */
    LEASH__EV_MEMBER_RELEASED, /* its release's callback (status) */
    /* a multi-lock's script granted this member's token (prim/multi.c):
     * sent, fence */
    LEASH__EV_ADOPT,
    /* a multi-lock's one script for members of one slot answered: answer */
    LEASH__EV_GROUP_ANSWERED,
    LEASH__EV_COUNT
};

typedef struct leash__event {
    int type;
    int64_t wait_ms;          /* ACQUIRE */
    leash_acquire_cb *acq_cb; /* ACQUIRE */
    leash_release_cb *rel_cb; /* RELEASE, FORCE */
    void *arg;
    const leash__answer *answer; /* the answer events */
    int64_t sent;                /* RENEWED etc.: when the renewal went out; ADOPT: the grant */
    int64_t lease_ms;            /* ALIVE */
    int passed_over;             /* ALIVE: the release kept the lock for another waiter */
    uint64_t fence;              /* HANDOFF, ADOPT */
    int member;                  /* MEMBER_*: which member of a multi-lock */
    int status;                  /* MEMBER_*: what its callback said */
} leash__event;

/* A kind of lock: one of these per primitive (leash__mutex, leash__family),
 * registered by the constructor that makes its handles (client.c). */
typedef struct leash__prim {
    const char *kind;
    /* What the event does in the handle's state: a call's status (LEASH_OK
     * accepted, an error refused: then nothing changed), 0 for others.
     * Reached through leash__lock_deliver only. */
    int (*dispatch)(leash_lock *l, const leash__event *e);
    const char *(*state_name)(int state);
    /* The handle's key and channel names (the dialect's layout for the
     * kind); a status, logged on failure. */
    int (*names)(leash_lock *l, const char *name);
    /* Sets up the kind's part of a new handle (its timer's callback...):
     * leash__holding_init, with the two hooks below. */
    void (*init)(leash_lock *l);
    /* What the wait queue tells the kind's waiters; where the answers of
     * its holds' renewals go (hold.h). */
    const leash__waiter_hooks *waiter_hooks;
    void (*hold_renewed)(leash__hold *h, const leash__answer *a, int64_t sent);
    /* The kind's commands, which the shared machine sends: an attempt (a
     * new hold, or with extra one more of a reentrant hold) that ends at
     * deadline; a release of token leaving count_after holds; a force
     * release. NULL without memory. */
    leash__cmd *(*attempt_cmd)(leash_lock *l, int extra, int64_t deadline);
    leash__cmd *(*release_cmd)(const leash_lock *l, const char *token, int count_after,
                               int64_t valid_until, int64_t deadline);
    leash__cmd *(*force_cmd)(const leash_lock *l, int64_t deadline);
    /* The last hold of token was given back (its release answered, or the
     * handle freed while holding): the kind wakes its local waiters, or
     * NULL where Redis hands the lock over itself. */
    void (*hold_given_back)(leash_lock *l, const char *token);
    /* The acquire's wait ended, granted (-> HELD) or not: what the kind's
     * token holds in Redis for the wait is given up, or became the hold.
     * NULL: nothing. */
    void (*wait_ended)(leash_lock *l, int granted);
    /* A waiter's busy answer without a TTL (negative) means it is told
     * when it is let in: it sleeps until then instead of looking again
     * every lease. */
    int told_when_let_in;
    /* A kind whose handle is more than one hold (the multi-lock): what
     * leash_valid_ms, leash_renewals and leash_multi_fence answer, and
     * the free of its part of the handle (leash__lock_destroy). NULL: the
     * handle's hold answers, and there is nothing to free. */
    int64_t (*valid_ms)(const leash_lock *l);
    uint64_t (*renewals)(const leash_lock *l);
    uint64_t (*member_fence)(const leash_lock *l, int i);
    void (*destroy)(leash_lock *l);
} leash__prim;

/* The release (or force release) in flight, or its callback still owed:
 * one at a time per handle. prim/holding.c owns it. */
typedef struct leash__release_slot {
    leash__req *req; /* on the wire, NULL once answered */
    leash_release_cb *cb;
    void *arg;
    int final;      /* it gives the last hold back */
    int force;      /* it is a force release */
    int close_wait; /* leash_client_close waits for it */
    int owed;       /* answered, its callback comes after a lost callback */
    char token[LEASH__TOKEN_LEN + 1];
} leash__release_slot;

/* A kind of the lock family (prim/family.h). */
typedef struct leash__family_kind leash__family_kind;
/* A multi-lock's members (prim/multi.c). */
typedef struct leash__multi leash__multi;

/* The most bytes of a lock's name a log line shows. */
#define LEASH__LOG_NAME_MAX 64

struct leash_lock {
    uint32_t magic;
    const leash__prim *prim;
    leash__core *core;
    leash__list link; /* core->locks, or core->graveyard once freed */
    leash__names names;
    const char *name; /* into names.key */
    /* The name as log lines show it: whole up to LEASH__LOG_NAME_MAX
     * bytes, else its start and its length, so that a long name leaves
     * the line room for what it says (a 512-byte line). */
    char log_name[LEASH__LOG_NAME_MAX + 24];
    void *data;
    int freed;
    /* leash_lock_abandon: the free leaves a hold in Redis to run out its
     * lease instead of releasing it. */
    int abandoned;
    /* A multi-lock's member (prim/multi.c): its calls are the multi-lock's
     * own, and a refusal is a race they expect (a hold lost unheard), not
     * a misuse: logged at DEBUG, not as an ERROR. */
    int quiet_refusals;

    /* Settings for the next hold. */
    int64_t lease_ms, renew_ms, max_hold_ms;
    int watchdog, reentrant;

    /* The lock family's (prim/family.c), NULL and 0 for other kinds: which
     * of its kinds, a semaphore's permits, and for read-write the other
     * handle of a leash_rw_lock_pair, or NULL. */
    const leash__family_kind *family;
    int permits;
    leash_lock *pair;

    /* A multi-lock's (prim/multi.c), NULL for other kinds: its members. */
    leash__multi *multi;

    int state; /* the kind's own states */
    /* The event the kind's dispatch is deciding (LEASH__EV_*), -1 outside
     * one: what the trace of a state change names as its cause. */
    int event;
    leash__timer timer;

    /* The acquire that is pending. */
    leash_acquire_cb *acq_cb;
    void *acq_arg;
    int wait_once;          /* wait_ms was 0 */
    int64_t wait_deadline;  /* 0 = no limit */
    leash__req *attempt;    /* in flight */
    int64_t attempt_sent;   /* when it went (a multi-lock: when its acquire began) */
    int64_t overdue_turn;   /* LAST, a multi-lock's deadline: leash__deadline_ends's turn */
    unsigned attempt_epoch; /* the confirmed subscription it was sent under, 0 = none */
    int64_t ttl_wake;       /* try again then, even without a message */
    int64_t ttl_seen;       /* longest holder TTL Redis answered during this wait */
    int split;              /* the last busy answer was a split vote (route.h) */
    int aged;               /* an attempt of this wait asked with its age (reserving) */
    int64_t retry_at;       /* when to build the attempt again (no memory) */
    /* Family: the token may have a place in the queue in Redis, renewed
     * like a hold (hold.deadline is the place's), and given up when the
     * acquire ends without the lock. */
    int queued;
    /* Family: the place's renewal was on the wire when the token was let
     * in (prim/family.c): its answer, the hold's first, may say "queued"
     * (it ran before the let-in); no later one may. */
    int place_renewal_out;
    /* Family: the largest mark of a write of the token's place this
     * handle heard of this wait (an attempt or a renewal that answered
     * "queued": the hash's last fence then, or the server's clock in us if
     * larger; UINT64_MAX when one came without it), 0 none. A let-in whose
     * fence is not above it may name a hold that ended before the token
     * was queued again: prim/family.c, handed. */
    uint64_t place_mark;
    /* Family: a renewal or an extra hold's attempt found the hold's token
     * waiting in the queue again (a late copy of its attempt queued it), or
     * let in anew under another fence: the loss that follows gives that
     * place or hold back at once, or it would wait (or hold) with nobody to
     * use it. Set and consumed within one event (lose_then). */
    int requeued;
    leash__waiter w;

    /* The hold. */
    leash__hold hold;

    /* The release (or force release) in flight. */
    leash__release_slot rel;

    leash_lost_cb *lost_cb;
    void *lost_arg;

    /* leash_lock_stats, and what the timed counters started from. */
    leash_lock_stats stats;
    int64_t acquire_us; /* when the pending acquire was called */
    int64_t hold_us;    /* when the current hold was granted */
    int waited;         /* the pending acquire is counted in waits */
};

/* The mutex (prim/mutex.c). */
extern const leash__prim leash__mutex;

/* A new handle of kind prim for lock `name` (logs why on failure: NULL). */
leash_lock *leash__lock_make(leash__core *core, const leash__prim *prim, const char *name);
/* A handle the caller may use: alive, its client neither freed nor closing. */
int leash__lock_usable(const leash_lock *l);
/* Every event reaches the kind's dispatch through here: it names the event
 * as the cause of the state changes it makes (the trace), and counts an
 * accepted acquire. */
int leash__lock_deliver(leash_lock *l, const leash__event *e);
/* The client's teardown: every handle ends (callbacks ECANCELED, holds
 * released best-effort) and goes to the graveyard. */
void leash__lock_teardown(leash_lock *l);
/* leash_client_close: what the handle acquires ends, what it holds is
 * released for real. */
void leash__lock_close(leash_lock *l);
/* Frees the memory of a handle in the graveyard. */
void leash__lock_destroy(leash_lock *l);
/* Makes the handle's timer (handles made before the client was attached). */
int leash__lock_prepare(leash_lock *l);

/* For the unit tests of the state machines: delivers e to l as the loop
 * would, and tells l's state. */
int leash__lock_dispatch(leash_lock *l, const leash__event *e);
int leash__lock_state(const leash_lock *l);
const char *leash__lock_state_name(const leash_lock *l);
/* "ACQUIRE", "GRANTED", ...: an event's name for log lines; "-" for -1
 * (no event), "?" for a number out of range. */
const char *leash__event_name(int type);

#endif
