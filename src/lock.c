/*
 * The lock state machine.
 *
 * States (l->state) and what moves them:
 *
 *   IDLE --acquire--> ACQUIRING --granted--> HELD --release (last hold)--> IDLE
 *                        |  ^                  |--lost (expired, unreachable,
 *                        |  |                  |   max hold, fixed lease)--> IDLE
 *                        |  +-- busy: join the name's waiters, then
 *                        |      SUBSCRIBING -> attempt -> PARKED -> attempt ...
 *                        +--busy (try once), timeout, cancel, error, release--> IDLE
 *
 * While ACQUIRING, l->phase says what the acquire waits for. While HELD,
 * phase ATTEMPT means an extra (reentrant) hold is in flight. A release
 * request (rel_cmd) lives beside the state: a handle can start a new acquire
 * while its last release is still on the wire (the connection keeps them in
 * order).
 *
 * Every user callback is the last thing an event handler does, or is followed
 * by a check of l->freed: a callback may free the handle or the client.
 */
#include "lock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "client.h"
#include "clock.h"
#include "renew.h"
#include "resp.h"
#include "scripts.h"

#define FOREVER INT64_MAX
/* Slack between "every late copy of an attempt is void" and the release
 * that cleans up after them, for the clocks' drift meanwhile. */
#define LATE_COPY_MARGIN_MS 5
/* Longest a waiter sleeps on one TTL: numbers from the wire (a busy
 * answer's PTTL, a "renewed" message) are clamped to it, so no sum can
 * overflow and nothing sent by a stranger strands a waiter for long. */
#define MAX_SLEEP_MS ((int64_t)86400000)

static int64_t clamp_sleep(long long ms) {
    return ms < 0 ? 0 : ms > MAX_SLEEP_MS ? MAX_SLEEP_MS : (int64_t)ms;
}

static void lock_arm(leash_lock *l);
static void send_attempt(leash_lock *l);
static void on_lock_timer(void *arg);

/* An acquire callback is owed: a new hold on its way, or an extra hold of
 * a held handle (in flight, or waiting to be sent again). */
static int acquire_pending(const leash_lock *l) {
    return l->acq_cb != NULL;
}

static int force_in_flight(const leash_lock *l) {
    return l->rel_cmd != NULL && l->rel_force;
}

static const leash__logger *lock_log(const leash_lock *l) {
    return &l->client->cfg.log;
}

/* The local deadline keeps a margin for clock drift between us and Redis. */
static int64_t drift_ms(int64_t lease) {
    return lease / 100 + 2;
}

/* Renew times are aligned down on a grid of 1/16 of the interval, so that
 * locks taken at nearby moments renew in the same batch. Earlier is safe. */
static int64_t renew_time(int64_t from, int64_t interval) {
    int64_t due = from + interval, grid = interval / 16;
    if (grid > 1)
        due -= due % grid;
    return due;
}

/* ---- public handle management ---- */

leash_lock *leash_lock_new(leash_client *c, const char *name) {
    leash_lock *l;

    if (c == NULL || c->magic != LEASH__CLIENT_MAGIC || c->freeing || c->closing)
        return NULL;
    l = calloc(1, sizeof(*l));
    if (l == NULL) {
        leash__log(&c->cfg.log, LEASH_LOG_ERROR, "leash_lock_new: out of memory");
        return NULL;
    }
    if (leash__keys_make(&l->keys, &c->cfg.log, c->cfg.key_prefix, name, c->cfg.db) != LEASH_OK) {
        free(l);
        return NULL;
    }
    l->magic = LEASH__LOCK_MAGIC;
    l->client = c;
    l->name = l->keys.key + strlen(c->cfg.key_prefix);
    l->lease_ms = c->cfg.lease_ms;
    l->renew_ms = c->cfg.renew_interval_ms;
    l->max_hold_ms = c->cfg.max_hold_ms;
    l->watchdog = 1;
    l->reentrant = 1;
    leash__timer_init(&l->timer, c, on_lock_timer, l);
    if (c->attached && leash__timer_create(&l->timer) != LEASH_OK) {
        leash__log(&c->cfg.log, LEASH_LOG_ERROR, "leash_lock_new: out of memory (a timer)");
        leash__keys_clear(&l->keys);
        free(l);
        return NULL;
    }
    l->next = c->locks;
    if (c->locks)
        c->locks->prev = l;
    c->locks = l;
    return l;
}

/* Commands need a loop to go out on; `who` names the refused call. */
static int loop_attached(const leash_lock *l, const char *who) {
    if (!l->client->attached)
        leash__log(lock_log(l), LEASH_LOG_ERROR, "%s %s: the client is not attached to a loop", who,
                   l->name);
    return l->client->attached;
}

static int lock_ok(const leash_lock *l) {
    return l != NULL && l->magic == LEASH__LOCK_MAGIC && !l->freed && !l->client->freeing &&
           !l->client->closing;
}

void leash_lock_set_data(leash_lock *l, void *data) {
    if (l != NULL)
        l->data = data;
}
void *leash_lock_get_data(const leash_lock *l) {
    return l ? l->data : NULL;
}
const char *leash_lock_name(const leash_lock *l) {
    return l ? l->name : NULL;
}
leash_client *leash_lock_client(const leash_lock *l) {
    return l ? l->client : NULL;
}

static int settings_check(leash_lock *l, const char *who) {
    if (!lock_ok(l))
        return l == NULL ? LEASH_EINVAL : LEASH_ESTATE;
    if (l->state != LEASH__LOCK_IDLE) {
        leash__log(lock_log(l), LEASH_LOG_ERROR, "%s: lock %s is acquiring or held", who, l->name);
        return LEASH_ESTATE;
    }
    return LEASH_OK;
}

int leash_lock_set_watchdog(leash_lock *l, int64_t lease_ms, int64_t renew_interval_ms) {
    int rc = settings_check(l, "leash_lock_set_watchdog");
    if (rc != LEASH_OK)
        return rc;
    if ((rc = leash__check_lease(lock_log(l), lease_ms, renew_interval_ms,
                                 "leash_lock_set_watchdog")) != LEASH_OK)
        return rc;
    l->watchdog = 1;
    l->lease_ms = lease_ms;
    l->renew_ms = renew_interval_ms > 0 ? renew_interval_ms : lease_ms / 3;
    return LEASH_OK;
}

int leash_lock_set_fixed_lease(leash_lock *l, int64_t lease_ms) {
    int rc = settings_check(l, "leash_lock_set_fixed_lease");
    if (rc != LEASH_OK)
        return rc;
    if ((rc = leash__check_lease(lock_log(l), lease_ms, 0, "leash_lock_set_fixed_lease")) !=
        LEASH_OK)
        return rc;
    l->watchdog = 0;
    l->lease_ms = lease_ms;
    return LEASH_OK;
}

int leash_lock_set_max_hold(leash_lock *l, int64_t max_hold_ms) {
    int rc = settings_check(l, "leash_lock_set_max_hold");
    if (rc != LEASH_OK)
        return rc;
    if (max_hold_ms < 0 || max_hold_ms > LEASH_DURATION_MAX_MS) {
        leash__log(lock_log(l), LEASH_LOG_ERROR,
                   "leash_lock_set_max_hold: max_hold_ms must be 0..LEASH_DURATION_MAX_MS (got "
                   "%lld)",
                   (long long)max_hold_ms);
        return LEASH_EINVAL;
    }
    l->max_hold_ms = max_hold_ms;
    return LEASH_OK;
}

int leash_lock_set_reentrant(leash_lock *l, int on) {
    int rc = settings_check(l, "leash_lock_set_reentrant");
    if (rc != LEASH_OK)
        return rc;
    l->reentrant = on != 0;
    return LEASH_OK;
}

void leash_on_lost(leash_lock *l, leash_lost_cb *cb, void *arg) {
    if (l == NULL || l->magic != LEASH__LOCK_MAGIC)
        return;
    l->lost_cb = cb;
    l->lost_arg = arg;
}

/* ---- queries ---- */

int leash_held(const leash_lock *l) {
    return leash_valid_ms(l) > 0;
}

int64_t leash_valid_ms(const leash_lock *l) {
    int64_t left;
    if (l == NULL || l->magic != LEASH__LOCK_MAGIC || l->state != LEASH__LOCK_HELD)
        return 0;
    left = l->deadline - leash__now_ms();
    return left > 0 ? left : 0;
}

uint64_t leash_fence(const leash_lock *l) {
    return l ? l->fence : 0;
}

int leash_hold_count(const leash_lock *l) {
    return l != NULL && l->state == LEASH__LOCK_HELD ? l->holds : 0;
}

uint64_t leash_renewals(const leash_lock *l) {
    return l ? l->renewals : 0;
}

/* ---- commands ---- */

/* The zeros the connection overwrites with a server-time stamp. */
static const char stamp_zeros[LEASH__STAMP_DIGITS + 1] = "0000000000000000000";

/* A release of `token` that gives back holds down to count_after. A
 * release resent after a lost answer asks the script whether the hold could
 * have expired: valid_until is the hold's local deadline (0 = not known,
 * for releases nobody waits for). */
static leash__cmd *make_release(leash_lock *l, const char *token, int count_after, int64_t deadline,
                                int64_t valid_until, leash__reply_fn *fn) {
    const char *argv[3 + 5];
    size_t lens[3 + 5], len;
    char count[21];
    char *buf;
    leash__cmd *cmd;

    argv[3] = l->keys.key;
    lens[3] = l->keys.key_len;
    argv[4] = token;
    lens[4] = LEASH__TOKEN_LEN;
    argv[5] = count;
    lens[5] = leash__resp_int(count, count_after);
    argv[6] = l->keys.channel;
    lens[6] = l->keys.channel_len;
    argv[7] = stamp_zeros;
    lens[7] = LEASH__STAMP_DIGITS;
    buf = leash__script_call(&len, &l->client->scripts, LEASH__SCRIPT_RELEASE, 1, 8, argv, lens);
    if (buf == NULL)
        return NULL;
    cmd = leash__cmd_new(buf, len, LEASH__SCRIPT_RELEASE, LEASH__CMD_RETRY, deadline, fn, l);
    if (cmd == NULL) {
        free(buf);
        return NULL;
    }
    if (valid_until != 0)
        leash__cmd_stamp(cmd, LEASH__STAMP_RESEND_VALID_UNTIL, valid_until);
    return cmd;
}

/* A release nobody waits for (loss, free, abandoned grant), sent now or,
 * with send_at != 0, not before then. */
static void release_in_background(leash_lock *l, const char *token, int64_t send_at) {
    int64_t lease = l->hold_lease > 0 ? l->hold_lease : l->lease_ms;
    int64_t from = send_at > 0 ? send_at : leash__now_ms();
    leash__cmd *cmd =
        make_release(l, token, 0, from + l->client->cfg.command_timeout_ms + lease, 0, NULL);
    if (cmd == NULL) {
        leash__log(lock_log(l), LEASH_LOG_WARN,
                   "lock %s: no memory to release it; it expires with its lease", l->name);
        return;
    }
    leash__cmd_orphan(cmd);
    if (send_at > 0)
        leash__conn_send_at(&l->client->cmd, cmd, send_at);
    else
        leash__conn_send(&l->client->cmd, cmd);
}

/* The attempt of l->token was written and will not be sent again: once
 * every copy of it that may still sit somewhere (a frozen server's socket)
 * is void, a release cleans up after any of them that ran. The connection
 * stamps each copy "not after command_timeout_ms from its write", and none
 * is written after now. */
static void release_after_late_copies(leash_lock *l) {
    const leash__config *cfg = &l->client->cfg;

    release_in_background(l, l->token,
                          leash__now_ms() + cfg->command_timeout_ms + LATE_COPY_MARGIN_MS +
                              cfg->command_timeout_ms / 500);
}

/* An attempt that was written and whose answer will not be read: a grant
 * it got is released now (the release follows it on the connection), and
 * again once its late copies are void. */
static void forget_attempt(leash_lock *l) {
    release_in_background(l, l->token, 0);
    release_after_late_copies(l);
}

/* Stops waiting for the attempt in flight; with release_grant, whatever it
 * may have been granted is released (forget_attempt). */
static void abandon_attempt(leash_lock *l, int release_grant) {
    leash__cmd *cmd = l->attempt;
    int written;

    if (cmd == NULL)
        return;
    l->attempt = NULL;
    /* Written once is enough: a resend queued after a broken connection
     * may have run the first time. */
    written = (cmd->flags & LEASH__CMD_WRITTEN) != 0;
    leash__cmd_cancel(cmd);
    if (written && release_grant)
        forget_attempt(l);
}

/* ---- completions ---- */

static void finish_acquire(leash_lock *l, int status) {
    leash_acquire_cb *cb = l->acq_cb;
    void *arg = l->acq_arg;

    l->acq_cb = NULL;
    l->acq_arg = NULL;
    cb(l, status, arg);
}

/* Ends the pending acquire of an ACQUIRING handle: back to IDLE, then tell. */
static void acquire_failed(leash_lock *l, int status) {
    leash__waiters_leave(l);
    abandon_attempt(l, 1);
    l->state = LEASH__LOCK_IDLE;
    l->phase = LEASH__PHASE_NONE;
    l->timed_out = 0;
    leash__timer_stop(&l->timer);
    finish_acquire(l, status);
}

static void finish_release(leash_lock *l, int status) {
    leash_release_cb *cb = l->rel_cb;
    void *arg = l->rel_arg;
    leash_client *c = l->client;
    int close_waits = l->rel_close_wait;

    l->rel_cmd = NULL;
    l->rel_force = 0;
    l->rel_close_wait = 0;
    l->rel_cb = NULL;
    l->rel_arg = NULL;
    if (cb != NULL)
        cb(l, status, arg);
    if (close_waits)
        leash__client_close_step(c, status);
}

/* Ends the hold locally: no more renewals, no more timers. */
static void end_hold(leash_lock *l) {
    leash__waiters_hold_ended(l);
    l->state = LEASH__LOCK_IDLE;
    l->phase = LEASH__PHASE_NONE;
    l->holds = 0;
    leash__renew_forget(l);
    leash__timer_stop(&l->timer);
}

static void lose(leash_lock *l, int reason) {
    leash_lost_cb *cb = l->lost_cb;
    int had_attempt = l->attempt != NULL;

    leash__log(lock_log(l), LEASH_LOG_WARN, "lock %s lost (%s), fence %llu", l->name,
               leash_lost_reason_name(reason), (unsigned long long)l->fence);
    abandon_attempt(l, 0);
    end_hold(l);
    if (reason != LEASH_LOST_EXPIRED)
        release_in_background(l, l->token, 0);
    l->client->stats.losts++;
    if (cb != NULL) {
        cb(l, reason, l->lost_arg);
        if (l->freed)
            return;
    }
    if (had_attempt && l->acq_cb != NULL)
        finish_acquire(l, LEASH_ECANCELED);
}

/* ---- acquiring ---- */

static void become_held(leash_lock *l, uint64_t fence, int holds) {
    int64_t sent = l->attempt_sent;

    leash__waiters_granted(l);
    l->state = LEASH__LOCK_HELD;
    l->phase = LEASH__PHASE_NONE;
    l->timed_out = 0;
    l->fence = fence;
    l->holds = holds;
    l->renewals = 0;
    l->held_since = sent;
    l->deadline = sent + l->hold_lease - drift_ms(l->hold_lease);
    if (l->hold_watchdog)
        l->renew_due = renew_time(sent, l->hold_renew);
    lock_arm(l);
    finish_acquire(l, LEASH_OK);
}

static void park(leash_lock *l) {
    if (leash__waiters_park(l)) {
        send_attempt(l);
        return;
    }
    l->phase = LEASH__PHASE_PARKED;
    lock_arm(l);
}

/* Busy: decide how to wait for the next try. */
static void wait_for_release(leash_lock *l, long long pttl) {
    int64_t now = leash__now_ms();
    unsigned epoch;

    /* A holder that crashed publishes nothing: its key expiring is the
     * release. A key without expiry (pttl -1) gets looked at every lease. */
    l->ttl_wake = now + (pttl >= 0 ? clamp_sleep(pttl) + 1 : l->lease_ms);
    if (clamp_sleep(pttl) > l->ttl_seen)
        l->ttl_seen = clamp_sleep(pttl);
    if (leash__waiters_join(l) != LEASH_OK) {
        acquire_failed(l, LEASH_ENOMEM);
        return;
    }
    /* Covered only by the very subscription that was confirmed when the
     * attempt went out: one that dropped and came back meanwhile may have
     * missed the release. */
    epoch = leash__waiters_covered(l);
    if (l->attempt_epoch != 0 && epoch == l->attempt_epoch)
        park(l);
    else if (epoch != 0)
        send_attempt(l);
    else {
        l->phase = LEASH__PHASE_SUBSCRIBING;
        lock_arm(l);
    }
}

enum {
    ANSWER_GRANTED,
    ANSWER_BUSY,
    ANSWER_LATE, /* the copy came after its not_after: it did nothing */
    ANSWER_GONE, /* an extra hold found its hold gone */
    ANSWER_FAILED
};

/* How soon to try again after a failed allocation (never inside the
 * caller's own call: there it is LEASH_ENOMEM). */
#define NOMEM_RETRY_MS 10

/* Reads the acquire script's answer: {1, fence, count, now} or {0, x, now}
 * (x: the holder's pttl, -3 too late, -4 gone). */
static int parse_attempt(leash_lock *l, redisReply *r, int status, int *err, uint64_t *fence,
                         long long *n) {
    if (status != LEASH_OK) {
        *err = status;
        return ANSWER_FAILED;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        leash__log(lock_log(l), LEASH_LOG_ERROR, "acquire %s: Redis error: %s", l->name, r->str);
        *err = LEASH_EREDIS;
        return ANSWER_FAILED;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
        r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_INTEGER &&
        r->element[3]->type == REDIS_REPLY_INTEGER) {
        leash__conn_server_time(&l->client->cmd, r->element[3]->integer);
        if (r->element[0]->integer == 1 && r->element[2]->type == REDIS_REPLY_INTEGER &&
            r->element[1]->integer >= 0 && r->element[2]->integer >= 1 &&
            r->element[2]->integer <= INT32_MAX) {
            *fence = (uint64_t)r->element[1]->integer;
            *n = r->element[2]->integer;
            return ANSWER_GRANTED;
        }
        if (r->element[0]->integer == 0) {
            *n = r->element[1]->integer;
            if (*n == -3)
                return ANSWER_LATE;
            if (*n == -4)
                return ANSWER_GONE;
            return ANSWER_BUSY;
        }
    }
    leash__log(lock_log(l), LEASH_LOG_ERROR, "acquire %s: reply of unexpected shape", l->name);
    *err = LEASH_EPROTO;
    return ANSWER_FAILED;
}

/* The answer to an extra (reentrant) hold of a held handle. */
static void on_reentrant_reply(leash_lock *l, int answer, int err, long long count) {
    l->phase = LEASH__PHASE_NONE;
    if (leash__now_ms() >= l->deadline) {
        /* Too late: the hold ended at its deadline; so did this request. */
        leash_acquire_cb *cb = l->acq_cb;
        void *arg = l->acq_arg;
        l->acq_cb = NULL;
        lose(l, l->hold_watchdog ? LEASH_LOST_UNREACHABLE : LEASH_LOST_FIXED_LEASE);
        if (!l->freed && cb != NULL)
            cb(l, LEASH_ECONN, arg);
        return;
    }
    if (answer == ANSWER_GRANTED) {
        int64_t d = l->attempt_sent + l->hold_lease - drift_ms(l->hold_lease);
        l->holds = (int)count;
        if (d > l->deadline)
            l->deadline = d;
        lock_arm(l);
        finish_acquire(l, LEASH_OK);
    } else if (answer == ANSWER_LATE) {
        send_attempt(l); /* it did nothing: ask again while the hold lasts */
    } else if (answer == ANSWER_GONE || answer == ANSWER_BUSY) {
        /* Our hold is gone: the extra hold fails, and the hold is lost. */
        leash_acquire_cb *cb = l->acq_cb;
        void *arg = l->acq_arg;
        l->acq_cb = NULL;
        lose(l, LEASH_LOST_EXPIRED);
        if (!l->freed && cb != NULL)
            cb(l, LEASH_EBUSY, arg);
    } else {
        finish_acquire(l, err);
    }
}

static void on_attempt_reply(void *arg, redisReply *r, int status) {
    leash_lock *l = arg;
    int err = LEASH_OK, answer;
    uint64_t fence = 0;
    long long n = 0;

    l->attempt = NULL;
    answer = parse_attempt(l, r, status, &err, &fence, &n);
    if (l->state == LEASH__LOCK_HELD) {
        on_reentrant_reply(l, answer, err, n);
        return;
    }
    switch (answer) {
    case ANSWER_GRANTED:
        if (l->attempt_sent + l->hold_lease - drift_ms(l->hold_lease) <= leash__now_ms()) {
            /* The answer took longer than the lease: nothing left to trust. */
            leash__log(lock_log(l), LEASH_LOG_WARN,
                       "acquire %s: granted after its lease ran out; releasing it", l->name);
            release_in_background(l, l->token, 0);
            acquire_failed(l, LEASH_ECONN);
            return;
        }
        become_held(l, fence, (int)n);
        return;
    case ANSWER_BUSY:
        if (l->wait_once) {
            acquire_failed(l, LEASH_EBUSY);
            return;
        }
        if (l->timed_out || (l->wait_deadline != 0 && leash__now_ms() >= l->wait_deadline)) {
            acquire_failed(l, LEASH_ETIMEDOUT);
            return;
        }
        wait_for_release(l, n);
        return;
    case ANSWER_LATE:
        /* It arrived after its own not_after and did nothing: a slow pipe
         * or a clock that moved. Ask again while the wait allows. */
        if (!l->timed_out && (l->wait_deadline == 0 || leash__now_ms() < l->wait_deadline) &&
            !l->wait_once) {
            send_attempt(l);
            return;
        }
        acquire_failed(l, l->timed_out ? LEASH_ETIMEDOUT : LEASH_ECONN);
        return;
    case ANSWER_GONE:
        leash__log(lock_log(l), LEASH_LOG_ERROR, "acquire %s: the script answered an extra hold",
                   l->name);
        acquire_failed(l, LEASH_EPROTO);
        return;
    default:
        /* Without an answer the attempt may still run (a frozen server
         * keeps it in its socket): forget_attempt cleans up after it. */
        if (err == LEASH_ECONN)
            forget_attempt(l);
        acquire_failed(l, err);
        return;
    }
}

/* The acquire command for the current hold count (a new hold: 1). */
static leash__cmd *make_attempt(leash_lock *l) {
    const char *argv[3 + 5];
    size_t lens[3 + 5], len;
    char lease[21], count[21];
    int64_t deadline;
    char *buf;
    leash__cmd *cmd;
    int reentrant = l->state == LEASH__LOCK_HELD;

    argv[3] = l->keys.key;
    lens[3] = l->keys.key_len;
    argv[4] = l->token;
    lens[4] = LEASH__TOKEN_LEN;
    argv[5] = lease;
    lens[5] = leash__resp_int(lease, l->hold_lease);
    argv[6] = count;
    lens[6] = leash__resp_int(count, reentrant ? l->holds + 1 : 1);
    argv[7] = stamp_zeros;
    lens[7] = LEASH__STAMP_DIGITS;
    if (reentrant)
        deadline = l->deadline;
    else if (l->wait_once)
        deadline = leash__now_ms() + l->client->cfg.command_timeout_ms;
    else
        deadline = l->wait_deadline;
    buf = leash__script_call(&len, &l->client->scripts, LEASH__SCRIPT_ACQUIRE, 1, 8, argv, lens);
    cmd = buf ? leash__cmd_new(buf, len, LEASH__SCRIPT_ACQUIRE, LEASH__CMD_RETRY, deadline,
                               on_attempt_reply, l)
              : NULL;
    if (cmd == NULL) {
        free(buf);
        return NULL;
    }
    leash__cmd_stamp(cmd, LEASH__STAMP_NOT_AFTER, l->client->cfg.command_timeout_ms);
    return cmd;
}

static void put_attempt(leash_lock *l, leash__cmd *cmd) {
    l->w.parked = 0;
    l->attempt = cmd;
    l->attempt_sent = leash__now_ms();
    l->attempt_epoch = leash__waiters_covered(l);
    l->phase = LEASH__PHASE_ATTEMPT;
    lock_arm(l);
    leash__conn_send(&l->client->cmd, cmd);
}

/* An attempt from the loop (a wake, a timer, an answer): without memory it
 * is tried again shortly. */
static void send_attempt(leash_lock *l) {
    leash__cmd *cmd;

    if (force_in_flight(l)) {
        /* The force release this handle sent runs first, also when Redis
         * makes it wait (LOADING, BUSY): its answer sends this attempt. */
        l->phase = LEASH__PHASE_AFTER_FORCE;
        lock_arm(l);
        return;
    }
    cmd = make_attempt(l);
    if (cmd == NULL) {
        l->phase = LEASH__PHASE_RETRY;
        l->retry_at = leash__now_ms() + NOMEM_RETRY_MS;
        lock_arm(l);
        return;
    }
    put_attempt(l, cmd);
}

int leash_acquire(leash_lock *l, int64_t wait_ms, leash_acquire_cb *cb, void *arg) {
    leash_client *c;
    leash__cmd *cmd = NULL;

    if (l == NULL || cb == NULL || wait_ms < LEASH_WAIT_FOREVER ||
        wait_ms > LEASH_DURATION_MAX_MS) {
        if (l != NULL && l->magic == LEASH__LOCK_MAGIC && wait_ms > LEASH_DURATION_MAX_MS)
            leash__log(lock_log(l), LEASH_LOG_ERROR,
                       "leash_acquire: wait_ms %lld is over LEASH_DURATION_MAX_MS (lock %s)",
                       (long long)wait_ms, l->name);
        return LEASH_EINVAL;
    }
    if (!lock_ok(l))
        return LEASH_ESTATE;
    c = l->client;
    if (!loop_attached(l, "leash_acquire"))
        return LEASH_ELOOP;
    if (acquire_pending(l)) {
        leash__log(&c->cfg.log, LEASH_LOG_ERROR, "leash_acquire %s: already acquiring", l->name);
        return LEASH_ESTATE;
    }
    if (l->state == LEASH__LOCK_HELD) {
        if (!l->reentrant) {
            leash__log(&c->cfg.log, LEASH_LOG_ERROR,
                       "leash_acquire %s: already held and not reentrant", l->name);
            return LEASH_ESTATE;
        }
        if (l->rel_cmd != NULL) {
            leash__log(&c->cfg.log, LEASH_LOG_ERROR,
                       "leash_acquire %s: a release of this handle is in flight", l->name);
            return LEASH_ESTATE;
        }
        if ((cmd = make_attempt(l)) == NULL)
            return LEASH_ENOMEM;
        l->acq_cb = cb;
        l->acq_arg = arg;
        put_attempt(l, cmd);
        return LEASH_OK;
    }

    if (leash__token_new(l->token) != 0) {
        leash__log(&c->cfg.log, LEASH_LOG_ERROR, "leash_acquire %s: no randomness for a token",
                   l->name);
        return LEASH_ENOMEM;
    }
    l->wait_once = wait_ms == 0;
    l->wait_deadline = wait_ms > 0 ? leash__now_ms() + wait_ms : 0;
    l->hold_lease = l->lease_ms;
    /* Built before anything changes: without memory the call fails whole. */
    if (!force_in_flight(l) && (cmd = make_attempt(l)) == NULL)
        return LEASH_ENOMEM;
    l->state = LEASH__LOCK_ACQUIRING;
    l->acq_cb = cb;
    l->acq_arg = arg;
    l->timed_out = 0;
    l->ttl_seen = 0;
    l->hold_renew = l->renew_ms;
    l->hold_watchdog = l->watchdog;
    l->hold_max = l->max_hold_ms;
    /* Already subscribed for this name (other waiters): joining now makes
     * this very attempt one that cannot miss a release. */
    if (wait_ms != 0 && leash__chans_find(&c->chans, l->keys.channel, l->keys.channel_len))
        leash__waiters_join(l);
    if (cmd != NULL)
        put_attempt(l, cmd);
    else
        send_attempt(l); /* waits for the force release */
    return LEASH_OK;
}

/* ---- events from the other modules ---- */

void leash__lock_wake(leash_lock *l) {
    if (l->state == LEASH__LOCK_ACQUIRING && l->phase == LEASH__PHASE_PARKED)
        send_attempt(l);
}

void leash__lock_subscribed(leash_lock *l) {
    if (l->state != LEASH__LOCK_ACQUIRING)
        return;
    /* Waiting for this, or parked across a subscriber reconnect: a release
     * may have gone unheard, so try once more. */
    if (l->phase == LEASH__PHASE_SUBSCRIBING || l->phase == LEASH__PHASE_PARKED)
        send_attempt(l);
}

void leash__lock_holder_renewed(leash_lock *l, int64_t lease_ms) {
    int64_t sleep = clamp_sleep(lease_ms), cap;

    if (l->state != LEASH__LOCK_ACQUIRING)
        return;
    /* The holder is alive for lease_ms more: sleep on (a busy answer in
     * flight sets the time again from the key's own TTL). Anyone allowed
     * to PUBLISH can send this: believe no more than our own lease or the
     * longest TTL Redis itself showed us. */
    cap = l->lease_ms > l->ttl_seen ? l->lease_ms : l->ttl_seen;
    if (sleep > cap)
        sleep = cap;
    l->ttl_wake = leash__now_ms() + sleep + 1;
    if (l->phase == LEASH__PHASE_PARKED || l->phase == LEASH__PHASE_SUBSCRIBING)
        lock_arm(l);
}

void leash__lock_renewed(leash_lock *l, int result, int status, int64_t sent) {
    int64_t now = leash__now_ms(), retry;

    if (l->state != LEASH__LOCK_HELD)
        return;
    if (now >= l->deadline) {
        /* The answer came too late (a busy loop, a stopped process): the
         * hold already ended at its deadline, whatever Redis says now. */
        lose(l, l->hold_watchdog ? LEASH_LOST_UNREACHABLE : LEASH_LOST_FIXED_LEASE);
        return;
    }
    if (result == 1) {
        int64_t d = sent + l->hold_lease - drift_ms(l->hold_lease);
        if (d > l->deadline)
            l->deadline = d;
        l->renewals++;
        l->client->stats.renewals++;
        l->renew_due = renew_time(sent, l->hold_renew);
    } else if (result == 0) {
        lose(l, LEASH_LOST_EXPIRED);
        return;
    } else {
        /* No answer or a failed one: try again soon, while time is left. */
        retry = l->hold_renew / 4;
        if (retry > 200)
            retry = 200;
        if (retry < 10)
            retry = 10;
        l->renew_due = now + retry;
        leash__log(lock_log(l), LEASH_LOG_INFO, "renew %s failed (%s): retrying in %lld ms",
                   l->name, leash_strerror(status), (long long)retry);
    }
    lock_arm(l);
}

/* ---- the handle's one timer ---- */

static void lock_arm(leash_lock *l) {
    int64_t due = FOREVER;
    int keep_alive = 0;

    if (l->state == LEASH__LOCK_ACQUIRING) {
        keep_alive = 1;
        if (l->wait_deadline != 0 && !l->timed_out)
            due = l->wait_deadline;
        /* Subscribing too: a subscription that never comes must not keep
         * a waiter past the holder's lease. */
        if ((l->phase == LEASH__PHASE_PARKED || l->phase == LEASH__PHASE_SUBSCRIBING) &&
            l->ttl_wake < due)
            due = l->ttl_wake;
        if (l->phase == LEASH__PHASE_RETRY && l->retry_at < due)
            due = l->retry_at;
    } else if (l->state == LEASH__LOCK_HELD) {
        due = l->deadline;
        if (l->hold_max > 0 && l->held_since + l->hold_max < due)
            due = l->held_since + l->hold_max;
        if (l->hold_watchdog && l->renew_state == LEASH__RENEW_IDLE && l->renew_due < due)
            due = l->renew_due;
        if (l->phase == LEASH__PHASE_RETRY && l->retry_at < due)
            due = l->retry_at;
    }
    if (due == FOREVER) {
        leash__timer_stop(&l->timer);
        return;
    }
    if (due != l->timer.due && leash__timer_at(&l->timer, due, keep_alive) != LEASH_OK)
        leash__log(lock_log(l), LEASH_LOG_ERROR, "lock %s: no memory for its timer", l->name);
}

static void on_lock_timer(void *arg) {
    leash_lock *l = arg;
    int64_t now = leash__now_ms();

    if (l->state == LEASH__LOCK_ACQUIRING) {
        if (l->wait_deadline != 0 && now >= l->wait_deadline && !l->timed_out) {
            if (l->phase == LEASH__PHASE_ATTEMPT) {
                l->timed_out = 1; /* the answer in flight decides */
            } else {
                acquire_failed(l, LEASH_ETIMEDOUT);
                return;
            }
        } else if (((l->phase == LEASH__PHASE_PARKED || l->phase == LEASH__PHASE_SUBSCRIBING) &&
                    now >= l->ttl_wake) ||
                   (l->phase == LEASH__PHASE_RETRY && now >= l->retry_at)) {
            send_attempt(l);
            return;
        }
    } else if (l->state == LEASH__LOCK_HELD) {
        if (l->hold_max > 0 && now >= l->held_since + l->hold_max) {
            lose(l, LEASH_LOST_MAX_HOLD);
            return;
        }
        if (now >= l->deadline) {
            lose(l, l->hold_watchdog ? LEASH_LOST_UNREACHABLE : LEASH_LOST_FIXED_LEASE);
            return;
        }
        if (l->phase == LEASH__PHASE_RETRY && now >= l->retry_at) {
            send_attempt(l);
            return;
        }
        if (l->hold_watchdog && l->renew_state == LEASH__RENEW_IDLE && now >= l->renew_due)
            leash__renew_request(l);
    }
    lock_arm(l);
}

/* ---- release, cancel ---- */

/* A release or force release answered with an error, or with a reply of no
 * known shape. */
static int release_failed(leash_lock *l, const char *what, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) {
        leash__log(lock_log(l), LEASH_LOG_ERROR, "%s %s: Redis error: %s", what, l->name, r->str);
        return LEASH_EREDIS;
    }
    leash__log(lock_log(l), LEASH_LOG_ERROR, "%s %s: reply of unexpected shape", what, l->name);
    return LEASH_EPROTO;
}

static void on_release_reply(void *arg, redisReply *r, int status) {
    leash_lock *l = arg;
    int final = l->rel_final;

    if (status == LEASH_OK) {
        if (r->type != REDIS_REPLY_INTEGER) {
            status = release_failed(l, "release", r);
        } else if (r->integer >= 0) {
            if (final)
                leash__waiters_released(l->client, l->keys.channel, l->keys.channel_len,
                                        l->rel_token, LEASH__TOKEN_LEN);
        } else if (r->integer == -2) {
            /* Resent after a lost answer, past the hold's deadline: released
             * by the first copy or expired before it, the hold is over. */
            leash__log(lock_log(l), LEASH_LOG_INFO,
                       "release %s: answer lost, hold over (released or expired)", l->name);
            status = LEASH_ECONN;
        } else {
            status = LEASH_ENOTHELD;
        }
    }
    if (status == LEASH_ENOTHELD && !final && l->state == LEASH__LOCK_HELD &&
        memcmp(l->rel_token, l->token, LEASH__TOKEN_LEN) == 0) {
        /* Giving back one of several holds found them all gone. */
        leash_release_cb *cb = l->rel_cb;
        void *rarg = l->rel_arg;
        l->rel_cmd = NULL;
        l->rel_cb = NULL;
        lose(l, LEASH_LOST_EXPIRED);
        if (!l->freed && cb != NULL)
            cb(l, status, rarg);
        return;
    }
    finish_release(l, status);
}

static leash__deferred *deferred_new(leash_lock *l) {
    leash__deferred *d = calloc(1, sizeof(*d));
    if (d != NULL)
        d->lock = l;
    return d;
}

int leash_release(leash_lock *l, leash_release_cb *cb, void *arg) {
    leash_client *c;
    leash__cmd *cmd;
    int64_t deadline;

    if (l == NULL)
        return LEASH_EINVAL;
    if (!lock_ok(l))
        return LEASH_ESTATE;
    c = l->client;
    if (l->rel_cmd != NULL) {
        leash__log(&c->cfg.log, LEASH_LOG_ERROR, "leash_release %s: a release is in flight",
                   l->name);
        return LEASH_ESTATE;
    }
    if (l->state == LEASH__LOCK_IDLE) {
        leash__log(&c->cfg.log, LEASH_LOG_ERROR, "leash_release %s: not held", l->name);
        return LEASH_ESTATE;
    }
    if (l->state == LEASH__LOCK_HELD && acquire_pending(l)) {
        leash__log(&c->cfg.log, LEASH_LOG_ERROR,
                   "leash_release %s: an extra hold is in flight; cancel it first", l->name);
        return LEASH_ESTATE;
    }

    if (l->state == LEASH__LOCK_ACQUIRING) {
        /* Give up the acquire; release its grant if one is on the way. */
        leash__deferred *dacq = deferred_new(l), *drel = NULL;
        int in_flight = l->attempt != NULL && (l->attempt->flags & LEASH__CMD_WRITTEN);
        cmd = NULL;
        if (dacq != NULL && in_flight)
            cmd = make_release(
                l, l->token, 0, leash__now_ms() + c->cfg.command_timeout_ms + l->hold_lease,
                l->attempt_sent + l->hold_lease - drift_ms(l->hold_lease), on_release_reply);
        else if (dacq != NULL)
            drel = deferred_new(l);
        if (dacq == NULL || (in_flight ? cmd == NULL : drel == NULL)) {
            free(dacq);
            free(drel);
            return LEASH_ENOMEM;
        }
        dacq->acq_cb = l->acq_cb;
        dacq->arg = l->acq_arg;
        dacq->status = LEASH_ECANCELED;
        l->acq_cb = NULL;
        leash__waiters_leave(l);
        abandon_attempt(l, 0);
        l->state = LEASH__LOCK_IDLE;
        l->phase = LEASH__PHASE_NONE;
        leash__timer_stop(&l->timer);
        leash__client_defer(c, dacq);
        if (cmd != NULL) {
            l->rel_cb = cb;
            l->rel_arg = arg;
            l->rel_cmd = cmd;
            l->rel_final = 1;
            memcpy(l->rel_token, l->token, sizeof(l->rel_token));
            leash__conn_send(&c->cmd, cmd);
            release_after_late_copies(l);
        } else {
            drel->rel_cb = cb;
            drel->arg = arg;
            drel->status = LEASH_ENOTHELD;
            if (cb != NULL)
                leash__client_defer(c, drel);
            else
                free(drel);
        }
        return LEASH_OK;
    }

    /* HELD: one hold back, or the last one. */
    deadline = l->deadline;
    if (deadline < leash__now_ms() + c->cfg.command_timeout_ms)
        deadline = leash__now_ms() + c->cfg.command_timeout_ms;
    cmd = make_release(l, l->token, l->holds - 1, deadline, l->deadline, on_release_reply);
    if (cmd == NULL)
        return LEASH_ENOMEM;
    l->rel_cb = cb;
    l->rel_arg = arg;
    l->rel_cmd = cmd;
    l->rel_final = l->holds == 1;
    memcpy(l->rel_token, l->token, sizeof(l->rel_token));
    if (l->rel_final)
        end_hold(l); /* the watchdog stops now, whatever Redis answers */
    else
        l->holds--;
    leash__conn_send(&c->cmd, cmd);
    return LEASH_OK;
}

/* Our waiters hear of it from the script's PUBLISH, like everyone else's.
 * An acquire of this handle that waited for it goes now. */
static void on_force_reply(void *arg, redisReply *r, int status) {
    leash_lock *l = arg;

    if (status == LEASH_OK) {
        if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1))
            status = r->integer == 1 ? LEASH_OK : LEASH_ENOTHELD;
        else
            status = release_failed(l, "force release", r);
    }
    if (status == LEASH_OK)
        leash__log(lock_log(l), LEASH_LOG_WARN, "lock %s: force-released (someone's hold removed)",
                   l->name);
    l->rel_force = 0;
    l->rel_cmd = NULL;
    if (l->state == LEASH__LOCK_ACQUIRING && l->phase == LEASH__PHASE_AFTER_FORCE)
        send_attempt(l);
    finish_release(l, status);
}

int leash_force_release(leash_lock *l, leash_release_cb *cb, void *arg) {
    leash_client *c;
    const char *argv[3 + 2];
    size_t lens[3 + 2], len;
    leash__cmd *cmd = NULL;
    char *buf;

    if (l == NULL)
        return LEASH_EINVAL;
    if (!lock_ok(l))
        return LEASH_ESTATE;
    c = l->client;
    if (!loop_attached(l, "leash_force_release"))
        return LEASH_ELOOP;
    if (l->state != LEASH__LOCK_IDLE) {
        leash__log(&c->cfg.log, LEASH_LOG_ERROR, "leash_force_release %s: this handle %s; use %s",
                   l->name, l->state == LEASH__LOCK_HELD ? "holds the lock" : "is acquiring it",
                   l->state == LEASH__LOCK_HELD ? "leash_release" : "leash_cancel");
        return LEASH_ESTATE;
    }
    if (l->rel_cmd != NULL) {
        leash__log(&c->cfg.log, LEASH_LOG_ERROR, "leash_force_release %s: a release is in flight",
                   l->name);
        return LEASH_ESTATE;
    }
    argv[3] = l->keys.key;
    lens[3] = l->keys.key_len;
    argv[4] = l->keys.channel;
    lens[4] = l->keys.channel_len;
    /* Never resent, neither after a lost reply (not LEASH__CMD_RETRY) nor
     * after NOSCRIPT (EVAL): either would run it behind commands issued
     * later, and remove the hold of whoever took the lock in between. */
    buf = leash__script_eval_call(&len, LEASH__SCRIPT_FORCE, 1, 5, argv, lens);
    if (buf != NULL)
        cmd = leash__cmd_new(buf, len, -1, 0, leash__now_ms() + c->cfg.command_timeout_ms,
                             on_force_reply, l);
    if (cmd == NULL) {
        free(buf);
        return LEASH_ENOMEM;
    }
    l->rel_cb = cb;
    l->rel_arg = arg;
    l->rel_cmd = cmd;
    l->rel_final = 0;
    l->rel_force = 1;
    leash__conn_send(&c->cmd, cmd);
    return LEASH_OK;
}

int leash_cancel(leash_lock *l) {
    leash__deferred *d;

    if (l == NULL)
        return LEASH_EINVAL;
    if (!lock_ok(l))
        return LEASH_ESTATE;
    if (!acquire_pending(l)) {
        leash__log(lock_log(l), LEASH_LOG_ERROR, "leash_cancel %s: no acquire is pending", l->name);
        return LEASH_ESTATE;
    }
    if ((d = deferred_new(l)) == NULL)
        return LEASH_ENOMEM;
    d->acq_cb = l->acq_cb;
    d->arg = l->acq_arg;
    d->status = LEASH_ECANCELED;
    l->acq_cb = NULL;
    if (l->state == LEASH__LOCK_ACQUIRING) {
        leash__waiters_leave(l);
        abandon_attempt(l, 1);
        l->state = LEASH__LOCK_IDLE;
        l->phase = LEASH__PHASE_NONE;
        leash__timer_stop(&l->timer);
    } else {
        /* An extra hold in flight: the set-count scripts make a late grant
         * harmless (the last release deletes whatever the count). */
        abandon_attempt(l, 0);
        l->phase = LEASH__PHASE_NONE;
        lock_arm(l);
    }
    leash__client_defer(l->client, d);
    return LEASH_OK;
}

/* ---- freeing ---- */

/* Cancels everything of l and moves it to the graveyard. */
static void lock_cancel_all(leash_lock *l) {
    leash_client *c = l->client;

    l->freed = 1;
    leash__client_deliver_now(c, l);
    if (l->state == LEASH__LOCK_ACQUIRING) {
        leash__waiters_leave(l);
        abandon_attempt(l, 1);
    } else if (l->state == LEASH__LOCK_HELD) {
        abandon_attempt(l, 0);
        leash__renew_forget(l);
        leash__waiters_hold_ended(l);
        release_in_background(l, l->token, 0);
    }
    l->state = LEASH__LOCK_IDLE;
    l->phase = LEASH__PHASE_NONE;
    leash__timer_clear(&l->timer);
    if (l->rel_cmd != NULL) {
        leash__cmd_orphan(l->rel_cmd); /* the release still goes out */
        l->rel_cmd = NULL;
        if (l->rel_cb != NULL)
            finish_release(l, LEASH_ECANCELED);
    }
    if (l->acq_cb != NULL)
        finish_acquire(l, LEASH_ECANCELED);

    if (l->prev)
        l->prev->next = l->next;
    else
        c->locks = l->next;
    if (l->next)
        l->next->prev = l->prev;
    l->prev = NULL;
    l->next = c->graveyard;
    c->graveyard = l;
}

void leash_lock_free(leash_lock *l) {
    leash_client *c;

    if (l == NULL || l->magic != LEASH__LOCK_MAGIC || l->freed)
        return;
    c = l->client;
    if (c->freeing || c->closing)
        return; /* the client's teardown frees it */
    leash__client_enter(c);
    lock_cancel_all(l);
    leash__client_leave(c);
}

/* The answer to a release leash_client_close sent. */
static void on_close_release(void *arg, redisReply *r, int status) {
    leash_client *c = arg;

    if (status == LEASH_OK && r->type != REDIS_REPLY_INTEGER)
        status = r->type == REDIS_REPLY_ERROR ? LEASH_EREDIS : LEASH_EPROTO;
    else if (status == LEASH_OK && r->integer < 0)
        status = r->integer == -1 ? LEASH_ENOTHELD : LEASH_ECONN;
    leash__client_close_step(c, status);
}

void leash__lock_close(leash_lock *l) {
    leash_client *c = l->client;
    leash__cmd *cmd;
    int64_t deadline;

    if (l->rel_cmd != NULL) {
        l->rel_close_wait = 1;
        leash__client_close_wait(c);
    }
    if (l->state == LEASH__LOCK_ACQUIRING) {
        leash__waiters_leave(l);
        abandon_attempt(l, 1);
        l->state = LEASH__LOCK_IDLE;
        l->phase = LEASH__PHASE_NONE;
        leash__timer_stop(&l->timer);
        return;
    }
    if (l->state != LEASH__LOCK_HELD)
        return;
    abandon_attempt(l, 0); /* an extra hold: the release below takes all */
    deadline = l->deadline;
    if (deadline < leash__now_ms() + c->cfg.command_timeout_ms)
        deadline = leash__now_ms() + c->cfg.command_timeout_ms;
    cmd = make_release(l, l->token, 0, deadline, l->deadline, on_close_release);
    end_hold(l);
    if (cmd == NULL) {
        leash__log(lock_log(l), LEASH_LOG_WARN,
                   "lock %s: no memory to release it; it expires with its lease", l->name);
        c->close_status = LEASH_ECONN;
        return;
    }
    cmd->arg = c;
    leash__client_close_wait(c);
    leash__conn_send(&c->cmd, cmd);
}

void leash__lock_teardown(leash_lock *l) {
    lock_cancel_all(l);
}

void leash__lock_destroy(leash_lock *l) {
    leash__keys_clear(&l->keys);
    l->magic = 0;
    free(l);
}
