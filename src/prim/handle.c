/* SPDX-License-Identifier: MIT */
/*
 * What every kind of lock handle shares: making and freeing one, the
 * public calls (each becomes an event of the handle's kind's dispatch),
 * the per-lock settings and the queries. A kind's idle state is 0: the
 * settings may change only then.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "prim/lock.h"

static const leash__logger *lg(const leash_lock *l) {
    return &l->core->env.log;
}

int leash__lock_usable(const leash_lock *l) {
    return l != NULL && l->magic == LEASH__LOCK_MAGIC && !l->freed && !l->core->env.freeing &&
           !l->core->closing;
}

/* Commands need a loop to go out on; `who` names the refused call. */
static int loop_attached(const leash_lock *l, const char *who) {
    if (!l->core->env.attached)
        leash__log(lg(l), LEASH_LOG_ERROR, "%s %s: the client is not attached to a loop", who,
                   l->log_name);
    return l->core->env.attached;
}

int leash__lock_deliver(leash_lock *l, const leash__event *e) {
    /* A user callback run from the dispatch may call into l again: that
     * event is traced as the cause until it returns, then this one is
     * again. l outlives the callbacks (a handle freed inside one waits in
     * the graveyard until the loop's entry returns). */
    int rc, outer = l->event;

    l->event = e->type;
    rc = l->prim->dispatch(l, e);
    /* Counted where it is decided: a call runs no user callback, so l is
     * still there. */
    if (e->type == LEASH__EV_ACQUIRE && rc == LEASH_OK) {
        l->stats.acquires++;
        l->core->env.stats->acquires++;
    }
    l->event = outer;
    return rc;
}

leash_lock *leash__lock_make(leash__core *core, const leash__prim *prim, const char *name) {
    leash_lock *l = calloc(1, sizeof(*l));

    if (l == NULL) {
        leash__log(&core->env.log, LEASH_LOG_ERROR, "leash_lock_new: out of memory");
        return NULL;
    }
    l->core = core;
    if (prim->names(l, name) != LEASH_OK) {
        free(l);
        return NULL;
    }
    l->names.sharded = &core->route->sharded;
    l->names.fenced = core->route->fenced;
    l->magic = LEASH__LOCK_MAGIC;
    l->prim = prim;
    l->name = l->names.key + strlen(core->cfg->key_prefix);
    if (strlen(l->name) <= LEASH__LOG_NAME_MAX)
        snprintf(l->log_name, sizeof(l->log_name), "%s", l->name);
    else
        snprintf(l->log_name, sizeof(l->log_name), "%.*s...(%zu bytes)", LEASH__LOG_NAME_MAX - 16,
                 l->name, strlen(l->name));
    l->lease_ms = core->cfg->lease_ms;
    l->renew_ms = core->cfg->renew_ms;
    l->max_hold_ms = core->cfg->max_hold_ms;
    l->watchdog = 1;
    l->reentrant = 1;
    l->event = -1;
    prim->init(l);
    if (core->env.attached && leash__timer_create(&l->timer) != LEASH_OK) {
        leash__log(&core->env.log, LEASH_LOG_ERROR, "leash_lock_new: out of memory (a timer)");
        leash__names_clear(&l->names);
        free(l);
        return NULL;
    }
    leash__list_insert_tail(&core->locks, &l->link);
    return l;
}

int leash__lock_prepare(leash_lock *l) {
    return leash__timer_create(&l->timer);
}

/* ---- calls ---- */

int leash_acquire(leash_lock *l, int64_t wait_ms, leash_acquire_cb *cb, void *arg) {
    leash__event e;

    if (l == NULL || cb == NULL || wait_ms < LEASH_WAIT_FOREVER ||
        wait_ms > LEASH_DURATION_MAX_MS) {
        if (l != NULL && l->magic == LEASH__LOCK_MAGIC && wait_ms > LEASH_DURATION_MAX_MS)
            leash__log(lg(l), LEASH_LOG_ERROR,
                       "leash_acquire: wait_ms %lld is over LEASH_DURATION_MAX_MS (lock %s)",
                       (long long)wait_ms, l->log_name);
        return LEASH_EINVAL;
    }
    if (!leash__lock_usable(l))
        return LEASH_ESTATE;
    if (!loop_attached(l, "leash_acquire"))
        return LEASH_ELOOP;
    memset(&e, 0, sizeof(e));
    e.type = LEASH__EV_ACQUIRE;
    e.wait_ms = wait_ms;
    e.acq_cb = cb;
    e.arg = arg;
    return leash__lock_deliver(l, &e);
}

int leash_release(leash_lock *l, leash_release_cb *cb, void *arg) {
    leash__event e;

    if (l == NULL)
        return LEASH_EINVAL;
    if (!leash__lock_usable(l))
        return LEASH_ESTATE;
    memset(&e, 0, sizeof(e));
    e.type = LEASH__EV_RELEASE;
    e.rel_cb = cb;
    e.arg = arg;
    return leash__lock_deliver(l, &e);
}

int leash_force_release(leash_lock *l, leash_release_cb *cb, void *arg) {
    leash__event e;

    if (l == NULL)
        return LEASH_EINVAL;
    if (!leash__lock_usable(l))
        return LEASH_ESTATE;
    if (!loop_attached(l, "leash_force_release"))
        return LEASH_ELOOP;
    memset(&e, 0, sizeof(e));
    e.type = LEASH__EV_FORCE;
    e.rel_cb = cb;
    e.arg = arg;
    return leash__lock_deliver(l, &e);
}

int leash_cancel(leash_lock *l) {
    leash__event e;

    if (l == NULL)
        return LEASH_EINVAL;
    if (!leash__lock_usable(l))
        return LEASH_ESTATE;
    memset(&e, 0, sizeof(e));
    e.type = LEASH__EV_CANCEL;
    return leash__lock_deliver(l, &e);
}

/* ---- the end of a handle ---- */

static void end(leash_lock *l, int type) {
    leash__core *core = l->core;
    leash__event e;

    memset(&e, 0, sizeof(e));
    e.type = type;
    leash__lock_deliver(l, &e);
    if (type == LEASH__EV_FREE) {
        leash__list_remove(&l->link);
        leash__list_insert_tail(&core->graveyard, &l->link);
    }
}

void leash_lock_free(leash_lock *l) {
    leash__core *core;

    if (l == NULL || l->magic != LEASH__LOCK_MAGIC || l->freed)
        return;
    core = l->core;
    if (core->env.freeing || core->closing)
        return; /* the client's teardown frees it */
    leash__env_enter(&core->env);
    end(l, LEASH__EV_FREE);
    leash__env_leave(&core->env);
}

/* The holder cannot tell whether the work the hold guards is over (an
 * nginx upstream it stopped may still run): deleting the key would let the
 * next holder in beside that work, so the key stays and runs out its lease,
 * as a crashed holder's does. */
void leash_lock_abandon(leash_lock *l) {
    if (l == NULL || l->magic != LEASH__LOCK_MAGIC || l->freed)
        return;
    l->abandoned = 1;
    leash_lock_free(l);
}

void leash__lock_teardown(leash_lock *l) {
    end(l, LEASH__EV_FREE);
}

void leash__lock_close(leash_lock *l) {
    end(l, LEASH__EV_CLOSE);
}

void leash__lock_destroy(leash_lock *l) {
    leash__list_remove(&l->link);
    if (l->prim->destroy != NULL)
        l->prim->destroy(l);
    leash__names_clear(&l->names);
    l->magic = 0;
    free(l);
}

/* ---- settings ---- */

static int settings_check(leash_lock *l, const char *who) {
    if (!leash__lock_usable(l))
        return l == NULL ? LEASH_EINVAL : LEASH_ESTATE;
    if (l->state != 0) {
        leash__log(lg(l), LEASH_LOG_ERROR, "%s: lock %s is acquiring or held", who, l->log_name);
        return LEASH_ESTATE;
    }
    return LEASH_OK;
}

int leash_lock_set_watchdog(leash_lock *l, int64_t lease_ms, int64_t renew_interval_ms) {
    int rc = settings_check(l, "leash_lock_set_watchdog");
    if (rc != LEASH_OK)
        return rc;
    if ((rc = leash__hold_check_lease(lg(l), lease_ms, renew_interval_ms,
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
    if ((rc = leash__hold_check_lease(lg(l), lease_ms, 0, "leash_lock_set_fixed_lease")) !=
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
        leash__log(lg(l), LEASH_LOG_ERROR,
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
    return l ? l->core->client : NULL;
}

int leash_held(const leash_lock *l) {
    return leash_valid_ms(l) > 0;
}

int64_t leash_valid_ms(const leash_lock *l) {
    if (l == NULL || l->magic != LEASH__LOCK_MAGIC || l->hold.count == 0)
        return 0;
    if (l->prim->valid_ms != NULL)
        return l->prim->valid_ms(l);
    return leash__hold_valid_ms(&l->hold, leash__now_ms());
}

uint64_t leash_fence(const leash_lock *l) {
    return l ? l->hold.fence : 0;
}

int leash_hold_count(const leash_lock *l) {
    return l != NULL ? l->hold.count : 0;
}

uint64_t leash_renewals(const leash_lock *l) {
    if (l != NULL && l->prim->renewals != NULL)
        return l->prim->renewals(l);
    return l ? l->hold.renewals : 0;
}

uint64_t leash_multi_fence(const leash_lock *l, int i) {
    if (l == NULL || l->magic != LEASH__LOCK_MAGIC || l->prim->member_fence == NULL)
        return 0;
    return l->prim->member_fence(l, i);
}

void leash_lock_stats_sized(const leash_lock *l, leash_lock_stats *out, size_t size) {
    if (out == NULL)
        return;
    memset(out, 0, size);
    if (l != NULL && l->magic == LEASH__LOCK_MAGIC)
        memcpy(out, &l->stats, size < sizeof(l->stats) ? size : sizeof(l->stats));
}

/* ---- for the state machines' unit tests ---- */

int leash__lock_dispatch(leash_lock *l, const leash__event *e) {
    int rc;
    leash__env_enter(&l->core->env);
    rc = leash__lock_deliver(l, e);
    leash__env_leave(&l->core->env);
    return rc;
}

int leash__lock_state(const leash_lock *l) {
    return l->state;
}

const char *leash__lock_state_name(const leash_lock *l) {
    return l->prim->state_name(l->state);
}

const char *leash__event_name(int type) {
    static const char *const names[LEASH__EV_COUNT] = {
        [LEASH__EV_ACQUIRE] = "ACQUIRE",
        [LEASH__EV_RELEASE] = "RELEASE",
        [LEASH__EV_CANCEL] = "CANCEL",
        [LEASH__EV_FORCE] = "FORCE",
        [LEASH__EV_FREE] = "FREE",
        [LEASH__EV_CLOSE] = "CLOSE",
        [LEASH__EV_GRANTED] = "GRANTED",
        [LEASH__EV_BUSY] = "BUSY",
        [LEASH__EV_LATE] = "LATE",
        [LEASH__EV_GONE] = "GONE",
        [LEASH__EV_FAILED] = "FAILED",
        [LEASH__EV_UNREPLICATED] = "UNREPLICATED",
        [LEASH__EV_RELEASED] = "RELEASED",
        [LEASH__EV_FORCED] = "FORCED",
        [LEASH__EV_RENEWED] = "RENEWED",
        [LEASH__EV_NOT_OURS] = "NOT_OURS",
        [LEASH__EV_RENEW_FAILED] = "RENEW_FAILED",
        [LEASH__EV_RENEW_UNREPLICATED] = "RENEW_UNREPLICATED",
        [LEASH__EV_WAIT_END] = "WAIT_END",
        [LEASH__EV_OVERDUE] = "OVERDUE",
        [LEASH__EV_TTL] = "TTL",
        [LEASH__EV_RETRY] = "RETRY",
        [LEASH__EV_DEADLINE] = "DEADLINE",
        [LEASH__EV_MAX_HOLD] = "MAX_HOLD",
        [LEASH__EV_RENEW_DUE] = "RENEW_DUE",
        [LEASH__EV_WAKE] = "WAKE",
        [LEASH__EV_COVERED] = "COVERED",
        [LEASH__EV_ALIVE] = "ALIVE",
        [LEASH__EV_HANDOFF] = "HANDOFF",
        [LEASH__EV_MEMBER_ACQUIRED] = "MEMBER_ACQUIRED",
        [LEASH__EV_MEMBER_LOST] = "MEMBER_LOST",
        [LEASH__EV_MEMBER_RELEASED] = "MEMBER_RELEASED",
        [LEASH__EV_ADOPT] = "ADOPT",
        [LEASH__EV_GROUP_ANSWERED] = "GROUP_ANSWERED",
    };

    if (type == -1)
        return "-";
    return type >= 0 && type < LEASH__EV_COUNT && names[type] != NULL ? names[type] : "?";
}
