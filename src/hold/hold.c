/* SPDX-License-Identifier: MIT */
#include "hold/hold.h"

#include <leash/leash.h>

int64_t leash__drift_ms(int64_t lease_ms) {
    return lease_ms / 100 + 2;
}

/* Renew times are aligned down on a grid of 1/16 of the interval, so that
 * holds taken at nearby moments renew in the same batch. Earlier is safe. */
void leash__hold_schedule_renewal(leash__hold *h, int64_t sent) {
    int64_t due = sent + h->renew_ms, grid = h->renew_ms / 16;
    if (grid > 1)
        due -= due % grid;
    h->renew_due = due;
}

/* The deadline a write sent at `sent` gives: never past the maximum hold
 * time, where the hold ends and its key is given back. */
static int64_t deadline_of(const leash__hold *h, int64_t sent) {
    int64_t d = sent + h->lease_ms - leash__drift_ms(h->lease_ms);
    if (h->max_ms > 0 && h->since + h->max_ms < d)
        d = h->since + h->max_ms;
    return d;
}

void leash__hold_begin(leash__hold *h, int64_t sent, uint64_t fence, int count) {
    h->fence = fence;
    h->count = count;
    h->renewals = 0;
    h->floor_kept_at = 0;
    h->since = sent;
    h->deadline = deadline_of(h, sent);
    if (h->watchdog)
        leash__hold_schedule_renewal(h, sent);
}

void leash__hold_queue(leash__hold *h, int64_t sent) {
    h->count = 0;
    h->since = sent;
    h->deadline = sent + h->lease_ms - leash__drift_ms(h->lease_ms);
    leash__hold_schedule_renewal(h, sent);
}

void leash__hold_take_place(leash__hold *h, int64_t now, uint64_t fence, int64_t max_ms) {
    h->fence = fence;
    h->count = 1;
    h->renewals = 0;
    h->since = now;
    h->max_ms = max_ms;
    if (max_ms > 0 && now + max_ms < h->deadline)
        h->deadline = now + max_ms;
}

void leash__hold_extend(leash__hold *h, int64_t sent) {
    int64_t d = deadline_of(h, sent);
    if (d > h->deadline)
        h->deadline = d;
}

int64_t leash__hold_valid_ms(const leash__hold *h, int64_t now) {
    return h->deadline > now ? h->deadline - now : 0;
}

int64_t leash__hold_next_due(const leash__hold *h) {
    int64_t due = h->deadline;
    if (h->max_ms > 0 && h->since + h->max_ms < due)
        due = h->since + h->max_ms;
    if (h->watchdog && h->renew_state == LEASH__RENEW_IDLE && h->renew_due < due)
        due = h->renew_due;
    return due;
}

int leash__hold_max_reached(const leash__hold *h, int64_t now) {
    return h->max_ms > 0 && now >= h->since + h->max_ms;
}

void leash__hold_retry_renewal(leash__hold *h, int64_t now) {
    int64_t retry = h->renew_ms / 4;
    if (retry > 200)
        retry = 200;
    if (retry < 10)
        retry = 10;
    h->renew_due = now + retry;
}

int leash__hold_check_lease(const leash__logger *lg, int64_t lease_ms, int64_t renew_ms,
                            const char *who) {
    if (lease_ms <= 0 || lease_ms > LEASH_DURATION_MAX_MS) {
        leash__log(lg, LEASH_LOG_ERROR, "%s: lease_ms must be 10..LEASH_DURATION_MAX_MS (got %lld)",
                   who, (long long)lease_ms);
        return LEASH_EINVAL;
    }
    /* The local deadline keeps a drift margin: a lease must leave room. */
    if (lease_ms < 10) {
        leash__log(lg, LEASH_LOG_ERROR, "%s: lease_ms must be >= 10 (got %lld)", who,
                   (long long)lease_ms);
        return LEASH_EINVAL;
    }
    if (renew_ms < 0 || (renew_ms > 0 && renew_ms >= lease_ms)) {
        leash__log(lg, LEASH_LOG_ERROR,
                   "%s: renew_interval_ms must be > 0 and below lease_ms (got %lld, lease %lld)",
                   who, (long long)renew_ms, (long long)lease_ms);
        return LEASH_EINVAL;
    }
    return LEASH_OK;
}
