/* SPDX-License-Identifier: MIT */
/*
 * A hold: what every primitive keeps while it holds something in Redis (a
 * lock, a read share, a permit): its owner token, fence and count, its
 * lease, the local deadline, and the watchdog's schedule. The primitive
 * decides what every event does; this file only keeps the numbers.
 *
 * The deadline of a hold is computed from the moment its acquire (or the
 * latest successful renewal) was sent: sent + lease - drift, with drift a
 * margin for the clocks (1% of the lease + 2 ms), and never past the
 * maximum hold time (max_ms after the grant was sent), where the hold ends
 * and its key is given back. Time is CLOCK_MONOTONIC.
 */
#ifndef LEASH_HOLD_HOLD_H
#define LEASH_HOLD_HOLD_H

#include <stdint.h>

#include "base/list.h"
#include "base/log.h"
#include "base/token.h"
#include "dialect/dialect.h"

struct leash__renew_batch;

enum leash__renew_state {
    LEASH__RENEW_IDLE,
    LEASH__RENEW_DUE,     /* waits in the watchdog's due list */
    LEASH__RENEW_INFLIGHT /* in a batch on the wire */
};

typedef struct leash__hold {
    char token[LEASH__TOKEN_LEN + 1];
    uint64_t fence;
    int count;
    int64_t lease_ms, renew_ms, max_ms; /* max_ms 0: no maximum */
    int watchdog;                       /* 0: a fixed lease */
    int64_t since, deadline, renew_due;
    /* Redlock: when the last renewal that carried the fence (it spreads
     * the hold and keeps its fence floors: dialect/leash.c, renew) was
     * sent, counted once it renewed; 0 not yet. */
    int64_t floor_kept_at;
    uint64_t renewals;
    /* The watchdog's part. */
    const leash__names *names;
    int renew_state;
    leash__list due_link;
    struct leash__renew_batch *batch;
    int batch_slot;
    /* The owner hears what a renewal answered: sent is when it went out. */
    void (*renewed)(struct leash__hold *h, const leash__answer *a, int64_t sent);
} leash__hold;

/* The margin kept for clock drift between us and Redis. */
int64_t leash__drift_ms(int64_t lease_ms);

/* A new hold, granted for an acquire sent at `sent`. */
void leash__hold_begin(leash__hold *h, int64_t sent, uint64_t fence, int count);
/* A family waiter's place in the queue, written by an attempt sent at
 * `sent`: the deadline and renewals run as a hold's, the fence of the
 * last hold stays, the count is 0 (nothing held). */
void leash__hold_queue(leash__hold *h, int64_t sent);
/* The place became the hold at `now` (a handoff: another client's script
 * let it in): the place's deadline and renewal schedule stay, since its
 * last renewal wrote the expiry the hold has in Redis; max_ms (0: none)
 * starts counting now. */
void leash__hold_take_place(leash__hold *h, int64_t now, uint64_t fence, int64_t max_ms);
/* A renewal (or an extra hold) sent at `sent` succeeded. */
void leash__hold_extend(leash__hold *h, int64_t sent);
/* Milliseconds left before the deadline, 0 when past. */
int64_t leash__hold_valid_ms(const leash__hold *h, int64_t now);
/* When the hold's timer must fire next: its deadline, its maximum, or its
 * next renewal (watchdog on, none in flight). */
int64_t leash__hold_next_due(const leash__hold *h);
/* 1 when the maximum hold time is reached at now. */
int leash__hold_max_reached(const leash__hold *h, int64_t now);
/* After a renewal that succeeded (sent at `sent`): the next one's time. */
void leash__hold_schedule_renewal(leash__hold *h, int64_t sent);
/* After one that failed: the next one soon. */
void leash__hold_retry_renewal(leash__hold *h, int64_t now);

/* A lease setting: lease 10..LEASH_DURATION_MAX_MS, renew interval 0 (a
 * third of the lease) or below the lease. LEASH_OK, or LEASH_EINVAL with a
 * log line naming `who`. */
int leash__hold_check_lease(const leash__logger *lg, int64_t lease_ms, int64_t renew_ms,
                            const char *who);

#endif
