/* SPDX-License-Identifier: MIT */
/*
 * The multi-lock (leash_multi_lock_new): several mutexes held as one. Its
 * members are mutex handles of its own (prim/mutex.c), made with it and
 * never shown to the user, so every member is a whole mutex on every
 * topology: its attempt, wait, fence (a Redlock member's fence raised as
 * any mutex's), watchdog and lost callback are the mutex's. This file
 * decides only how the members are taken, kept and given back together.
 *
 * Taking. The members are ordered once, by cluster hash slot and then by
 * key (one global order, the same in every process), and an acquire walks
 * them in that order, each with a try-once attempt. When one is busy and
 * the acquire may wait, every member taken so far is given back first and
 * the acquire waits for that one member alone, with what is left of the
 * wait; once granted, the walk starts again from the first member not
 * held, try-once. So a waiting multi-lock never holds anything, which is
 * stronger than the order alone: two multi-locks over overlapping names,
 * in whatever order their callers named them, never wait for each other
 * while holding (no deadlock), and a member held by another process keeps
 * none of the others from anyone.
 *
 * One script. In leash's layout, where no WAIT for replicas follows the
 * grants, the members that the walk comes to and that one script may
 * carry (the route says which: every one on one server or Sentinel, and
 * on Redlock, where each server gets its copy; those of one slot in a
 * cluster) are tried together instead, in one script that checks every
 * key before it writes any (dialect/multi.c): all of them or none, in one
 * round trip. On Redlock the script is the mutex's acquire for several
 * keys (fence proposal, floors, one fence above every member's floor)
 * and the quorum decides the whole as it decides a mutex's grant
 * (route/quorum.c: a majority granted every member within the validity,
 * the floors raised where the fences differ); where it did not, what the
 * granting servers wrote is given back by token. Its grant becomes each
 * member's hold as if the member's own attempt had got it (holding.c's
 * adopt event), so from then on each member is renewed, released and
 * lost as a mutex. Busy, it wrote nothing (on Redlock: nothing that is
 * not given back), and the acquire waits for the busy member alone, as
 * above.
 *
 * Giving back. A member is given back by freeing its handle (which
 * releases a hold or a grant still on the wire in the background) and
 * making a new one for the next acquire: a grant that comes late is then
 * released by the freed handle, never leaked, and no release slot of a
 * member is ever busy when the user's release needs it.
 *
 * Keeping. When every member is held, the members' renewals are set due
 * at the same moment (the earliest of theirs), so the watchdog sends them
 * in one loop iteration: one script per node and slot. The first member
 * that is lost loses the whole: the others are given back and the
 * multi-lock's lost callback fires once, with that member's reason.
 *
 * States
 *   IDLE        not held, no acquire pending (a release may be answering)
 *   TAKING      acquiring: member `cur`'s acquire, or the one script, is
 *               pending
 *   CANCELLING  acquiring, cancelled: until member `cur` answers (or the
 *               timer ends a cancelled script)
 *   HELD        every member holds
 *
 *                 IDLE      TAKING    CANCELLING  HELD
 * acquire         start     ESTATE    ESTATE      ESTATE
 * release         ESTATE    undo      undo        give
 * cancel          ESTATE    cancel    ESTATE      ESTATE
 * wait-end        -         tout      ended       -
 * group-answered  -         group     -           -
 * force           ESTATE    ESTATE    ESTATE      ESTATE
 * free            free      free      free        free
 * close           -         owe       owe         drop
 * member-acquired -         next      undo        -
 * member-lost     -         retake    retake      lost
 * member-released rel       rel       rel         rel
 *
 *   -        cannot come (or comes after a close): ignored
 *   ESTATE   refused, LEASH_ESTATE; nothing changes
 *   start    a release still answering: ESTATE; else the members take the
 *            handle's settings and the walk begins -> TAKING (a member's
 *            refusal, LEASH_ENOMEM: refused, nothing changed)
 *   next     granted: the next member not held, try-once; none left ->
 *            HELD, callback LEASH_OK. Busy, try-once or not: when the
 *            acquire may wait, everything taken is given back and this
 *            member waits alone for what is left of the wait (none left:
 *            LEASH_ETIMEDOUT) -> TAKING. Any other answer (busy of a
 *            try-once, timeout, an error): everything taken is given back,
 *            the callback gets it -> IDLE
 *   cancel   member `cur` is cancelled -> CANCELLING; the one script on
 *            the wire instead: what it may write is released now (and
 *            after its late copies; on Redlock always, what servers
 *            that answered already granted too), the callback comes from
 *            the loop (the timer at once: ended) -> CANCELLING
 *   ended    the cancel of the one script: callback LEASH_ECANCELED -> IDLE
 *   group    the one script of a slot's members (one server, a cluster,
 *            Sentinel, Redlock's quorum; leash's layout; no WAIT)
 *            answered. Granted: every member of it holds (holding.c's
 *            adopt), the walk goes on; granted after its lease: released,
 *            and a wait with time left walks again (new tokens), else
 *            LEASH_ECONN. Busy at a member: as a member's busy answer
 *            (this copy wrote nothing; when it was resent, what it may
 *            have written is released; on Redlock the quorum gave back
 *            each member's token on the servers that granted or did not
 *            answer, route/quorum.c). Late: the same script (same
 *            tokens) asks again, and takes as its own what an earlier
 *            copy wrote (try-once: that is released, LEASH_ECONN); on
 *            Redlock what it wrote is released and a new script goes
 *            with new tokens. An error: what it may have written is
 *            released, the callback gets the error -> IDLE (Redlock,
 *            LEASH_ECONN while the acquire may wait: too few servers
 *            answered; the first member waits alone, as busy)
 *   undo     as cancel (in CANCELLING: as it goes); the release's
 *            callback follows the acquire's, LEASH_ENOTHELD (the whole was
 *            never held; what was taken is given back); a second one while
 *            it is owed: ESTATE
 *   tout     the one deadline of the whole passed (the wait's; a
 *            try-once's is command_timeout_ms; a turn of the loop later,
 *            so that a grant read late after a stall comes first):
 *            everything taken is given back (the member on the wire too:
 *            a late grant is released; the one script on the wire as at a
 *            cancel), callback LEASH_ETIMEDOUT (try-once: LEASH_ECONN) ->
 *            IDLE. So a
 *            multi-lock ends by its deadline however many members it has
 *   undo     everything taken (this grant too) is given back, callback
 *            LEASH_ECANCELED -> IDLE
 *   give     every member's release goes, the watchdogs stop now -> IDLE;
 *            the callback once, when every member answered: LEASH_OK, or
 *            the first member's error in the global order (a member that
 *            refused its release for holding nothing: LEASH_ENOTHELD)
 *   retake   that member is no longer held; the walk takes it again
 *   lost     the other members are given back, the lost callback fires
 *            once with the member's reason -> IDLE
 *   rel      one member's release answered; the last one calls back
 *   owe      the members end as any handle at a close (leash_client_close
 *            releases their holds; the one script on the wire: as at a
 *            cancel); the acquire's callback is owed until the free -> IDLE
 *   drop     the members' holds are released by the close -> IDLE
 *   free     every member is freed (holds and late grants released in the
 *            background, not for leash_lock_abandon); the acquire's and
 *            the release's callbacks fire LEASH_ECANCELED inside the free
 */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/token.h"
#include "dialect/multi.h"
#include "prim/holding.h"
#include "prim/multi.h"

enum {
    S_IDLE,
    S_TAKING,
    S_CANCELLING,
    S_HELD,
    S_COUNT
};

typedef struct leash__member {
    leash_lock *l; /* NULL after a give-back that found no memory: made again at the next walk */
    char *name;
    unsigned batch; /* what one script may carry with it: the route's batch key of its slot */
    int held;       /* granted in this acquire, or holding */
    int release;    /* the user's release of it has not answered yet */
} leash__member;

struct leash__multi {
    int n;
    leash__member *m; /* in the caller's order */
    int *order;       /* indices into m: by slot, then key */
    int cur;          /* the member whose acquire is pending, -1 none */
    int cur_waits;    /* that acquire waits (it is not a try-once) */
    int ending;       /* the handle is being freed: members' callbacks are nobody's */
    int undo;         /* a release came while acquiring: its callback follows the acquire's */
    /* The one script for members of one slot on the wire (cur is -1
     * then): its members (indices into m) and their tokens. */
    leash__req *group;
    int group_n;
    int group_idx[LEASH_MULTI_MAX];
    char group_tok[LEASH_MULTI_MAX][LEASH__TOKEN_LEN + 1];
    int64_t group_sent;
    /* The script on the wire asks again with the tokens of one that went
     * before it (its answer was "too late"): that one may have run. */
    int group_again;
    unsigned releasing;
    int rel_status;
    leash_release_cb *rel_cb;
    void *rel_arg;
};

/* A member's answer, deferred to the loop (a release refused inside the
 * call that started it). */
typedef struct deferred {
    leash__later item;
    leash_lock *l;
    int member, status;
} deferred;

static const leash__logger *lg(const leash_lock *l) {
    return &l->core->env.log;
}

static const char *state_name(int state) {
    static const char *const names[S_COUNT] = {"IDLE", "TAKING", "CANCELLING", "HELD"};
    return state >= 0 && state < S_COUNT ? names[state] : "?";
}

static void set_state(leash_lock *l, int to) {
    if (to != l->state && leash__log_on(lg(l), LEASH_LOG_DEBUG))
        leash__log(lg(l), LEASH_LOG_DEBUG, "STATE: %s => %s (%s) multi-lock %s",
                   state_name(l->state), state_name(to), leash__event_name(l->event), l->log_name);
    l->state = to;
    l->hold.count = to == S_HELD;
}

/* ---- members ---- */

static void on_member_acquired(leash_lock *member, int status, void *arg);
static void on_member_lost(leash_lock *member, int reason, void *arg);
static void on_member_released(leash_lock *member, int status, void *arg);

/* Which member of l handle `member` is, -1 when none (one given back). */
static int member_index(const leash_lock *l, const leash_lock *member) {
    int i;

    if (l->multi->ending)
        return -1;
    for (i = 0; i < l->multi->n; i++)
        if (l->multi->m[i].l == member)
            return i;
    return -1;
}

static void deliver(leash_lock *l, int type, int member, int status) {
    leash__event e;

    memset(&e, 0, sizeof(e));
    e.type = type;
    e.member = member;
    e.status = status;
    leash__lock_deliver(l, &e);
}

static void on_member_acquired(leash_lock *member, int status, void *arg) {
    int i = member_index(arg, member);

    if (i >= 0)
        deliver(arg, LEASH__EV_MEMBER_ACQUIRED, i, status);
}

static void on_member_lost(leash_lock *member, int reason, void *arg) {
    int i = member_index(arg, member);

    if (i >= 0)
        deliver(arg, LEASH__EV_MEMBER_LOST, i, reason);
}

static void on_member_released(leash_lock *member, int status, void *arg) {
    int i = member_index(arg, member);

    if (i >= 0)
        deliver(arg, LEASH__EV_MEMBER_RELEASED, i, status);
}

/* Member i's handle, made if a give-back left none; NULL without memory. */
static leash_lock *member(leash_lock *l, int i) {
    leash__member *m = &l->multi->m[i];

    if (m->l == NULL) {
        m->l = leash__lock_make(l->core, &leash__mutex, m->name);
        if (m->l != NULL) {
            m->l->quiet_refusals = 1;
            leash_on_lost(m->l, on_member_lost, l);
        }
    }
    return m->l;
}

/* Gives member i back: its handle goes (a hold, or a grant still on its
 * way, is released in the background) and a new one takes its place. */
static void give_back(leash_lock *l, int i) {
    leash__member *m = &l->multi->m[i];
    leash_lock *old = m->l;

    m->l = NULL;
    m->held = 0;
    if (l->multi->cur == i)
        l->multi->cur = -1;
    if (old != NULL)
        leash_lock_free(old); /* its callbacks find no member now */
    member(l, i);             /* no memory: made again at the next walk */
}

static void drop_group(leash_lock *l);

static void give_back_all(leash_lock *l) {
    int i;

    drop_group(l);
    for (i = 0; i < l->multi->n; i++)
        if (l->multi->m[i].held || l->multi->cur == i)
            give_back(l, i);
}

/* ---- acquiring ---- */

/* The first member not held, in the global order; -1 when all are. */
static int next_member(const leash_lock *l) {
    int k;

    for (k = 0; k < l->multi->n; k++)
        if (!l->multi->m[l->multi->order[k]].held)
            return l->multi->order[k];
    return -1;
}

/* What is left of the wait, for a member that waits alone. */
static int64_t wait_left(const leash_lock *l) {
    int64_t left;

    if (l->wait_deadline == 0)
        return LEASH_WAIT_FOREVER;
    left = l->wait_deadline - leash__now_ms();
    return left > 0 ? left : 0;
}

/* Member i's acquire goes (waiting or try-once): its status. */
static int take(leash_lock *l, int i, int waits) {
    leash_lock *ml = member(l, i);
    int rc;

    if (ml == NULL)
        return LEASH_ENOMEM;
    /* The members hold as the handle says (handle.c's settings). */
    ml->lease_ms = l->lease_ms;
    ml->renew_ms = l->renew_ms;
    ml->max_hold_ms = l->max_hold_ms;
    ml->watchdog = l->watchdog;
    ml->reentrant = 0;
    rc = leash_acquire(ml, waits ? wait_left(l) : 0, on_member_acquired, l);
    if (rc == LEASH_OK) {
        l->multi->cur = i;
        l->multi->cur_waits = waits;
    }
    return rc;
}

/* Every member's renewal falls due with the earliest one's: the watchdog
 * then sends them in one loop iteration, one script per node and slot. */
static void renew_together(leash_lock *l) {
    int64_t due = INT64_MAX;
    int i;

    for (i = 0; i < l->multi->n; i++) {
        const leash__hold *h = &l->multi->m[i].l->hold;
        if (h->watchdog && h->renew_state == LEASH__RENEW_IDLE && h->renew_due < due)
            due = h->renew_due;
    }
    if (due == INT64_MAX)
        return;
    for (i = 0; i < l->multi->n; i++) {
        leash_lock *ml = l->multi->m[i].l;
        if (ml->hold.watchdog && ml->hold.renew_state == LEASH__RENEW_IDLE &&
            ml->hold.renew_due > due) {
            ml->hold.renew_due = due;
            leash__holding_arm(ml);
        }
    }
}

/* The handle's own counters (leash_lock_stats): its acquires and holds
 * as one; the members' count in the client's. */
static void count_end(leash_lock_stats *st, int status) {
    switch (status) {
    case LEASH_OK:
        st->grants++;
        st->holds++;
        break;
    case LEASH_EBUSY:
        st->busy++;
        break;
    case LEASH_ETIMEDOUT:
        st->timeouts++;
        break;
    case LEASH_ECANCELED:
        st->cancels++;
        break;
    default:
        st->acquire_errors++;
    }
}

static void count_lost(leash_lock_stats *st, int reason) {
    switch (reason) {
    case LEASH_LOST_EXPIRED:
        st->lost_expired++;
        break;
    case LEASH_LOST_UNREACHABLE:
        st->lost_unreachable++;
        break;
    case LEASH_LOST_MAX_HOLD:
        st->lost_max_hold++;
        break;
    case LEASH_LOST_FIXED_LEASE:
        st->lost_fixed_lease++;
        break;
    default:
        st->lost_replicas++;
    }
}

/* The release's callback, with rel_status. */
static void finish_release(leash_lock *l) {
    leash_release_cb *cb = l->multi->rel_cb;
    void *arg = l->multi->rel_arg;

    l->multi->rel_cb = NULL;
    l->multi->rel_arg = NULL;
    if (cb != NULL)
        cb(l, l->multi->rel_status, arg);
}

/* The acquire ends with status (from the loop: a member's callback). */
static void finish_acquire(leash_lock *l, int status) {
    leash_acquire_cb *cb = l->acq_cb;
    void *arg = l->acq_arg;

    count_end(&l->stats, status);
    leash__timer_stop(&l->timer);
    if (status != LEASH_OK)
        give_back_all(l);
    l->acq_cb = NULL;
    l->acq_arg = NULL;
    if (status == LEASH_OK) {
        renew_together(l);
        set_state(l, S_HELD);
    } else {
        set_state(l, S_IDLE);
    }
    if (cb != NULL)
        cb(l, status, arg);
    if (l->multi->undo && !l->freed) {
        l->multi->undo = 0;
        finish_release(l);
    }
}

/* ---- one script for the members of one slot ---- */

/* Whether members of one slot may go in one script: leash's own layout
 * (dialect/multi.c writes it; on Redlock its fenced form, with the
 * mutex's fence floors and proposal), without WAIT for replicas (which
 * the route pipelines after the mutex's grants). */
static int one_script(const leash_lock *l) {
    const leash__core *core = l->core;

    return core->dialect == &leash__dialect_leash && core->cfg->route->wait_replicas == 0;
}

/* Whether the servers answer the one script apart (Redlock): those that
 * granted it did so whatever the others said. A busy decision is given
 * back by the quorum (route/quorum.c: every member's token, where a
 * server granted or did not answer, as a mutex's attempt is); one the
 * owner ends itself (a cancel, a deadline, a late grant) or that may
 * leave late copies (late, no answer) by the owner, now and after them. */
static int partial(const leash_lock *l) {
    return l->core->route->fenced;
}

/* What the script may have written is released in the background: now,
 * and once more when every copy of it that may still sit somewhere (a
 * frozen server's socket) is void: each is stamped "not after
 * command_timeout_ms from its write". */
static void release_group(leash_lock *l) {
    leash__multi *mu = l->multi;
    int64_t later = leash__holding_late_copies_void(l);
    int k;

    for (k = 0; k < mu->group_n; k++) {
        leash_lock *ml = member(l, mu->group_idx[k]);
        if (ml == NULL)
            continue; /* no memory: it expires with its lease */
        /* The release waits for a server's connection as long as a key
         * of this lease may stand there (a server down at the answer). */
        if (ml->hold.count == 0)
            ml->hold.lease_ms = l->lease_ms;
        leash__holding_release_in_background(ml, mu->group_tok[k], 0);
        leash__holding_release_in_background(ml, mu->group_tok[k], later);
    }
    mu->group_n = 0;
}

/* Stops waiting for the script on the wire (the acquire ended without
 * it); what it, or one before it with its tokens, may have written is
 * released. On Redlock always: servers that granted it while the quorum
 * was still open keep their keys for a lease, and nobody else gives them
 * back (the quorum has no token for them); the tokens are this script's
 * own, so the release takes nothing of anyone's. */
static void drop_group(leash_lock *l) {
    leash__multi *mu = l->multi;

    if (mu->group == NULL)
        return;
    if (leash__req_cancel(mu->group) || mu->group_again || partial(l))
        release_group(l);
    mu->group = NULL;
    mu->group_n = 0;
}

static void on_group(void *arg, const leash__answer *a, size_t n) {
    leash_lock *l = arg;
    leash__event e;

    (void)n;
    l->multi->group = NULL;
    memset(&e, 0, sizeof(e));
    e.type = LEASH__EV_GROUP_ANSWERED;
    e.answer = a;
    leash__lock_deliver(l, &e);
}

/* The one script for members group_idx[0..n) with tokens group_tok goes:
 * its status. */
static int send_group(leash_lock *l, int n) {
    leash__multi *mu = l->multi;
    leash__core *core = l->core;
    const leash__names *names[LEASH_MULTI_MAX];
    const char *tokens[LEASH_MULTI_MAX];
    int64_t now = leash__now_ms(), cto = core->cfg->conn->command_timeout_ms;
    leash__send s;
    leash__cmd *cmd;
    int k;

    for (k = 0; k < n; k++) {
        leash_lock *ml = member(l, mu->group_idx[k]);
        if (ml == NULL)
            return LEASH_ENOMEM;
        names[k] = &ml->names;
        tokens[k] = mu->group_tok[k];
    }
    cmd = leash__multi_acquire_cmd(names, tokens, (size_t)n, l->lease_ms, cto, now + cto);
    if (cmd == NULL)
        return LEASH_ENOMEM;
    memset(&s, 0, sizeof(s));
    s.slot = names[0]->slot;
    s.op = core->dialect->acquire;
    s.cmd = cmd;
    s.nanswers = 1;
    s.names = names[0];
    s.group = names;
    s.group_tokens = tokens;
    s.ngroup = (size_t)n;
    s.lease_ms = l->lease_ms;
    s.what = l->log_name;
    s.done = on_group;
    s.arg = l;
    if ((mu->group = leash__route_send(core->route, &s)) == NULL)
        return LEASH_ENOMEM;
    mu->group_n = n;
    mu->group_sent = now;
    return LEASH_OK;
}

/* Members idx[0..n) (n >= 2, of one batch key: one slot in a cluster) are
 * tried in one script, all or none, with new tokens: its status. */
static int take_group(leash_lock *l, const int *idx, int n) {
    leash__multi *mu = l->multi;
    int k;

    for (k = 0; k < n; k++) {
        if (leash__token_new(mu->group_tok[k]) != 0)
            return LEASH_ENOMEM;
        mu->group_idx[k] = idx[k];
    }
    mu->group_again = 0;
    return send_group(l, n);
}

/* Whether a script with the group's tokens other than the one that gave
 * answer a may have run: that one was written more than once (its first
 * copy's answer was lost with a connection, and the copy may have run
 * before the resend, or may still run until its "not after"), or it asks
 * again for one that went before it. */
static int another_copy(const leash_lock *l, const leash__answer *a) {
    return a->resent || l->multi->group_again;
}

/* The script granted member i's token: the member holds as after a grant
 * of its own (holding.c, adopt). */
static void adopt(leash_lock *l, int i, const char *token, int64_t sent, uint64_t fence) {
    leash_lock *ml = l->multi->m[i].l;
    leash__event e;

    memcpy(ml->hold.token, token, LEASH__TOKEN_LEN + 1);
    ml->lease_ms = l->lease_ms;
    ml->renew_ms = l->renew_ms;
    ml->max_hold_ms = l->max_hold_ms;
    ml->watchdog = l->watchdog;
    memset(&e, 0, sizeof(e));
    e.type = LEASH__EV_ADOPT;
    e.sent = sent;
    e.fence = fence;
    leash__lock_deliver(ml, &e);
    l->multi->m[i].held = 1;
}

/* ---- the walk ---- */

/* Member i, the first not held, goes try-once; with the others not held
 * that one script may carry with it, in one script where it can. Its
 * status. */
static int try_from(leash_lock *l, int i) {
    leash__multi *mu = l->multi;
    int idx[LEASH_MULTI_MAX], n = 0, k;

    if (one_script(l))
        for (k = 0; k < mu->n; k++) {
            int j = mu->order[k];
            if (!mu->m[j].held && mu->m[j].batch == mu->m[i].batch)
                idx[n++] = j;
        }
    if (n >= 2)
        return take_group(l, idx, n);
    return take(l, i, 0);
}

/* The walk goes on from the first member not held, try-once. */
static void walk(leash_lock *l) {
    int i = next_member(l), rc;

    if (i < 0) {
        finish_acquire(l, LEASH_OK);
        return;
    }
    rc = try_from(l, i);
    if (rc != LEASH_OK)
        finish_acquire(l, rc);
}

/* Member i is busy: a try-once ends LEASH_EBUSY; else what was taken is
 * given back and member i waits alone for what is left of the wait. */
static void wait_alone(leash_lock *l, int i) {
    int rc;

    if (l->wait_once) {
        finish_acquire(l, LEASH_EBUSY);
        return;
    }
    give_back_all(l);
    if (l->wait_deadline != 0 && wait_left(l) == 0) {
        finish_acquire(l, LEASH_ETIMEDOUT);
        return;
    }
    if ((rc = take(l, i, 1)) != LEASH_OK)
        finish_acquire(l, rc);
}

static void group_answered(leash_lock *l, const leash__answer *a) {
    leash__multi *mu = l->multi;
    int64_t sent = a->sent_ms > 0 ? a->sent_ms : mu->group_sent;
    int k, busy, first = mu->group_n > 0 ? mu->group_idx[0] : -1;

    if (l->state == S_CANCELLING || a->status != LEASH_OK) {
        /* An error: it may have run all the same, or still run (a copy
         * without an answer in a frozen server's socket): released now
         * and after its late copies, as a mutex's attempt is. */
        if (a->status != LEASH_OK || a->kind == LEASH__ANS_GRANTED ||
            (!partial(l) && another_copy(l, a)))
            release_group(l);
        if (a->status == LEASH_ECONN && partial(l) && l->state == S_TAKING && !l->wait_once &&
            first >= 0) {
            /* Too few servers answered (some restart, say): the first
             * member waits alone as a Redlock mutex, whose attempt knows
             * when to try again while its connections come back. */
            mu->group_n = 0;
            wait_alone(l, first);
            return;
        }
        mu->group_n = 0;
        finish_acquire(l, l->state == S_CANCELLING ? LEASH_ECANCELED : a->status);
        return;
    }
    switch (a->kind) {
    case LEASH__ANS_GRANTED:
        if (sent + l->lease_ms - leash__drift_ms(l->lease_ms) <= leash__now_ms()) {
            leash__log(lg(l), LEASH_LOG_WARN,
                       "acquire multi-lock %s: granted after its lease ran out; releasing it",
                       l->log_name);
            release_group(l);
            /* Nothing left to trust; a wait with time left tries again,
             * new tokens (a mutex's grant does the same: servers that
             * were slow may be quick again). */
            if (!l->wait_once && (l->wait_deadline == 0 || wait_left(l) > 0))
                walk(l);
            else
                finish_acquire(l, LEASH_ECONN);
            return;
        }
        for (k = 0; k < mu->group_n; k++)
            adopt(l, mu->group_idx[k], mu->group_tok[k], sent, a->fence);
        mu->group_n = 0;
        walk(l);
        return;
    case LEASH__ANS_BUSY:
        busy = (int)a->fence - 1; /* the index of the busy key (dialect/multi.h) */
        if (partial(l) && (busy < 0 || busy >= mu->group_n))
            busy = 0; /* a quorum's busy that no server named: wait for the first */
        if (busy < 0 || busy >= mu->group_n) {
            mu->group_n = 0;
            finish_acquire(l, LEASH_EPROTO);
            return;
        }
        k = mu->group_idx[busy];
        /* This copy wrote nothing; another may have written every key
         * (and found its own keys a resend would not be busy, so someone
         * took one after; or it still runs later): released, now and
         * after its late copies. The next script has new tokens. On
         * Redlock the quorum gave back what servers that granted it (or
         * did not answer) may keep: it was busy, not every server. */
        if (!partial(l) && another_copy(l, a))
            release_group(l);
        mu->group_n = 0;
        wait_alone(l, k);
        return;
    case LEASH__ANS_LATE:
        /* This copy came after its "not after" and did nothing; an earlier
         * one (written before a reconnect) may have run and written every
         * key. Asking again with the same tokens takes such keys as this
         * script's own grant (the script rewrites its own keys), as the
         * mutex asks again with its token: new tokens would find them
         * busy and wait for them up to a lease. A try-once ends, and
         * releases them (now, and after their late copies). On Redlock
         * they are released too (late copies are what a late answer
         * hints at; a quorum's tokens are never asked again: the
         * give-back of the next would meet them), and a new script with
         * new tokens goes while the wait has time. */
        if (l->wait_once || partial(l)) {
            release_group(l);
            mu->group_n = 0;
            if (l->wait_once)
                finish_acquire(l, LEASH_ECONN);
            else
                walk(l);
            return;
        }
        mu->group_again = 1;
        if ((k = send_group(l, mu->group_n)) != LEASH_OK) {
            release_group(l);
            finish_acquire(l, k);
        }
        return;
    default:
        release_group(l);
        finish_acquire(l, LEASH_EPROTO);
    }
}

/* The one deadline of the whole acquire: the wait's, a try-once's
 * command_timeout_ms from its start (leash.h). */
static int64_t whole_deadline(const leash_lock *l) {
    return l->wait_once ? l->attempt_sent + l->core->cfg->conn->command_timeout_ms
                        : l->wait_deadline;
}

static int start(leash_lock *l, const leash__event *e) {
    int i, rc;

    if (l->multi->releasing)
        return LEASH_ESTATE; /* logged by the caller */
    for (i = 0; i < l->multi->n; i++)
        l->multi->m[i].held = 0;
    l->wait_once = e->wait_ms == 0;
    l->wait_deadline = e->wait_ms > 0 ? leash__now_ms() + e->wait_ms : 0;
    l->acquire_us = leash__now_us();
    l->attempt_sent = leash__now_ms(); /* a try-once's deadline counts from here */
    l->overdue_turn = 0;
    i = next_member(l);
    if ((rc = try_from(l, i)) != LEASH_OK)
        return rc;
    l->acq_cb = e->acq_cb;
    l->acq_arg = e->arg;
    if (l->wait_once || l->wait_deadline != 0)
        leash__timer_at(&l->timer, whole_deadline(l), 1);
    set_state(l, S_TAKING);
    return LEASH_OK;
}

static void member_acquired(leash_lock *l, int i, int status) {
    int waited = l->multi->cur_waits;

    l->multi->cur = -1;
    if (status == LEASH_OK) {
        l->multi->m[i].held = 1;
        walk(l);
        return;
    }
    if (status == LEASH_EBUSY && !waited) {
        /* Wait for this one alone, holding nothing meanwhile. */
        wait_alone(l, i);
        return;
    }
    finish_acquire(l, status);
}

/* ---- holding and releasing ---- */

static void member_released(leash_lock *l, int i, int status) {
    leash__member *m = &l->multi->m[i];

    if (!m->release)
        return;
    m->release = 0;
    if (status != LEASH_OK && l->multi->rel_status == LEASH_OK)
        l->multi->rel_status = status;
    if (--l->multi->releasing == 0)
        finish_release(l);
}

static void run_deferred(leash__later *item) {
    deferred *d = (deferred *)item;
    leash_lock *l = d->l;
    int member = d->member, status = d->status;

    free(d);
    if (!l->multi->ending)
        deliver(l, LEASH__EV_MEMBER_RELEASED, member, status);
}

static int give(leash_lock *l, const leash__event *e) {
    deferred *refused[LEASH_MULTI_MAX];
    int k, i, rc;

    /* The memory for a member's refusal first: once one release went,
     * the call can no longer fail. */
    for (k = 0; k < l->multi->n; k++) {
        refused[k] = calloc(1, sizeof(*refused[k]));
        if (refused[k] == NULL) {
            while (k-- > 0)
                free(refused[k]);
            return LEASH_ENOMEM;
        }
    }
    l->multi->rel_cb = e->rel_cb;
    l->multi->rel_arg = e->arg;
    l->multi->rel_status = LEASH_OK;
    l->multi->releasing = (unsigned)l->multi->n;
    set_state(l, S_IDLE);
    for (k = 0; k < l->multi->n; k++) {
        i = l->multi->order[k];
        l->multi->m[i].release = 1;
        l->multi->m[i].held = 0;
        rc = leash_release(l->multi->m[i].l, on_member_released, l);
        if (rc == LEASH_OK) {
            free(refused[k]);
            continue;
        }
        /* Its hold goes in the background; the answer comes from the loop.
         * LEASH_ESTATE refuses the call, it says nothing of a hold: a
         * member that no longer holds (lost just before, unheard yet) has
         * none to give back, and the user's release is told so as a
         * mutex's release of a hold that is gone is: LEASH_ENOTHELD. */
        give_back(l, i);
        refused[k]->l = l;
        refused[k]->member = i;
        refused[k]->status = rc == LEASH_ESTATE ? LEASH_ENOTHELD : rc;
        refused[k]->item.owner = l;
        refused[k]->item.run = run_deferred;
        leash__later_push(&l->core->later, &refused[k]->item);
    }
    return LEASH_OK;
}

static void lost(leash_lock *l, int i, int reason) {
    /* The deadline the loss came by (tools that check its lateness). */
    l->hold.deadline = l->multi->m[i].l->hold.deadline;
    l->multi->m[i].held = 0;
    give_back_all(l);
    set_state(l, S_IDLE);
    count_lost(&l->stats, reason);
    if (l->lost_cb != NULL)
        l->lost_cb(l, reason, l->lost_arg);
}

/* ---- the end of the handle ---- */

static void free_handle(leash_lock *l) {
    leash__multi *mu = l->multi;
    int i;

    l->freed = 1;
    leash__timer_clear(&l->timer);
    /* A member's refusal still owed is dropped with the rest: the free
     * ends the release (LEASH_ECANCELED, below), not that refusal. */
    if (mu != NULL)
        mu->ending = 1;
    leash__later_run_owner(&l->core->later, l);
    if (mu == NULL)
        return; /* leash_multi_lock_new found no memory for it */
    drop_group(l);
    for (i = 0; i < mu->n; i++) {
        leash_lock *ml = mu->m[i].l;
        mu->m[i].l = NULL;
        if (ml == NULL)
            continue;
        ml->abandoned = l->abandoned;
        leash__lock_teardown(ml);
    }
    set_state(l, S_IDLE);
    if (mu->rel_cb != NULL) {
        mu->rel_status = LEASH_ECANCELED;
        finish_release(l);
    }
    if (l->acq_cb != NULL) {
        leash_acquire_cb *cb = l->acq_cb;
        l->acq_cb = NULL;
        cb(l, LEASH_ECANCELED, l->acq_arg);
    }
}

/* ---- the dispatcher ---- */

static int refuse(leash_lock *l, const char *call, const char *why) {
    leash__log(lg(l), LEASH_LOG_ERROR, "%s multi-lock %s: %s", call, l->log_name, why);
    return LEASH_ESTATE;
}

static int dispatch(leash_lock *l, const leash__event *e) {
    int closing = l->core->closing;

    switch (e->type) {
    case LEASH__EV_FREE:
        free_handle(l);
        return 0;
    case LEASH__EV_CLOSE:
        /* The client closes every member itself; an acquire's callback is
         * owed until the free. */
        drop_group(l);
        set_state(l, S_IDLE);
        return 0;
    case LEASH__EV_MEMBER_RELEASED:
        member_released(l, e->member, e->status);
        return 0;
    case LEASH__EV_FORCE:
        return refuse(l, "leash_force_release", "not for a multi-lock");
    default:
        break;
    }
    switch (l->state) {
    case S_IDLE:
        if (e->type == LEASH__EV_ACQUIRE) {
            int rc = start(l, e);
            if (rc == LEASH_ESTATE)
                refuse(l, "leash_acquire", "its release has not answered yet");
            return rc;
        }
        if (e->type == LEASH__EV_RELEASE)
            return refuse(l, "leash_release", "not held");
        if (e->type == LEASH__EV_CANCEL)
            return refuse(l, "leash_cancel", "no acquire is pending");
        return 0;
    case S_TAKING:
    case S_CANCELLING:
        if (e->type == LEASH__EV_ACQUIRE)
            return refuse(l, "leash_acquire", "already acquiring");
        if (e->type == LEASH__EV_RELEASE) {
            if (l->multi->undo)
                return refuse(l, "leash_release", "a release is in flight");
            l->multi->undo = 1;
            l->multi->rel_cb = e->rel_cb;
            l->multi->rel_arg = e->arg;
            l->multi->rel_status = LEASH_ENOTHELD;
        }
        if (e->type == LEASH__EV_RELEASE && l->state == S_CANCELLING)
            return LEASH_OK;
        if (e->type == LEASH__EV_CANCEL || e->type == LEASH__EV_RELEASE) {
            if (l->state == S_CANCELLING)
                return refuse(l, "leash_cancel", "already cancelled");
            set_state(l, S_CANCELLING);
            if (l->multi->cur >= 0) {
                leash_cancel(l->multi->m[l->multi->cur].l); /* granted already: undone below */
            } else {
                /* The one script's answer may be long: what it wrote is
                 * released now, and the acquire ends from the loop. */
                drop_group(l);
                leash__timer_at(&l->timer, 0, 1);
            }
            return LEASH_OK;
        }
        if (closing)
            return 0;
        if (e->type == LEASH__EV_WAIT_END) {
            if (l->state == S_TAKING)
                finish_acquire(l, l->wait_once ? LEASH_ECONN : LEASH_ETIMEDOUT);
            else if (l->multi->cur < 0)
                finish_acquire(l, LEASH_ECANCELED); /* a cancel of the one script */
            return 0;
        }
        if (e->type == LEASH__EV_GROUP_ANSWERED) {
            group_answered(l, e->answer);
            return 0;
        }
        if (e->type == LEASH__EV_MEMBER_ACQUIRED) {
            if (l->state == S_CANCELLING) {
                l->multi->cur = -1;
                if (e->status == LEASH_OK)
                    l->multi->m[e->member].held = 1;
                finish_acquire(l, LEASH_ECANCELED);
            } else {
                member_acquired(l, e->member, e->status);
            }
        } else if (e->type == LEASH__EV_MEMBER_LOST) {
            give_back(l, e->member);
        }
        return 0;
    case S_HELD:
        if (e->type == LEASH__EV_ACQUIRE)
            return refuse(l, "leash_acquire", "held (a multi-lock is not reentrant)");
        if (e->type == LEASH__EV_RELEASE)
            return give(l, e);
        if (e->type == LEASH__EV_CANCEL)
            return refuse(l, "leash_cancel", "no acquire is pending");
        if (e->type == LEASH__EV_MEMBER_LOST && !closing)
            lost(l, e->member, e->status);
        return 0;
    }
    return 0;
}

/* ---- making one ---- */

static int names(leash_lock *l, const char *name) {
    leash__core *core = l->core;

    return core->dialect->names(&l->names, &core->env.log, core->cfg->key_prefix, name,
                                core->cfg->conn->db);
}

/* The handle's timer: the deadline of the whole acquire. */
static void on_timer(void *arg) {
    leash_lock *l = arg;

    /* Never before the deadline (a loop's timer may fire early: one set
     * from inside a callback that worked a while counts from the loop's
     * idea of now, which lags), and one turn of the loop after it, so that
     * a grant that waits unread after a stall of the loop is read first
     * (base/timer.h; holding.c does the same). */
    if (l->state == S_TAKING && (l->wait_once || l->wait_deadline != 0) &&
        !leash__timer_deadline_ends(&l->timer, whole_deadline(l), &l->overdue_turn,
                                    leash__now_ms()))
        return;
    deliver(arg, LEASH__EV_WAIT_END, -1, 0);
}

static void init(leash_lock *l) {
    leash__timer_init(&l->timer, &l->core->env, on_timer, l);
}

/* The global order: slot, then key bytes. */
static int before(const leash_lock *x, const leash_lock *y) {
    size_t n = x->names.key_len < y->names.key_len ? x->names.key_len : y->names.key_len;
    int c;

    if (x->names.slot != y->names.slot)
        return x->names.slot < y->names.slot;
    if ((c = memcmp(x->names.key, y->names.key, n)) != 0)
        return c < 0;
    return x->names.key_len < y->names.key_len;
}

/* An insertion sort: at most LEASH_MULTI_MAX members, once per handle. */
static void sort_members(leash_lock *l) {
    leash__multi *mu = l->multi;
    int i, j, v;

    for (i = 1; i < mu->n; i++) {
        v = mu->order[i];
        for (j = i; j > 0 && before(mu->m[v].l, mu->m[mu->order[j - 1]].l); j--)
            mu->order[j] = mu->order[j - 1];
        mu->order[j] = v;
    }
}

/* The members' handles made (logs why not): 1, or 0. */
static int make_members(leash_lock *l, const char *const *names, int n) {
    leash__multi *mu = l->multi;
    int i;

    for (i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        mu->order[i] = i;
        if ((mu->m[i].name = malloc(len + 1)) == NULL)
            return 0;
        memcpy(mu->m[i].name, names[i], len + 1);
        if (member(l, i) == NULL)
            return 0;
        mu->m[i].batch = l->core->route->ops->batch_key(l->core->route, mu->m[i].l->names.slot);
    }
    sort_members(l);
    for (i = 1; i < n; i++) {
        const leash_lock *a = mu->m[mu->order[i - 1]].l, *b = mu->m[mu->order[i]].l;
        if (a->names.key_len == b->names.key_len &&
            memcmp(a->names.key, b->names.key, a->names.key_len) == 0) {
            leash__log(lg(l), LEASH_LOG_ERROR,
                       "leash_multi_lock_new: the name %s is given twice (a multi-lock would "
                       "wait for itself)",
                       a->log_name);
            return 0;
        }
    }
    return 1;
}

leash_lock *leash__multi_make(leash__core *core, const char *const *names, int n) {
    leash_lock *l;
    int i;

    if (names == NULL || n < 1 || n > LEASH_MULTI_MAX) {
        leash__log(&core->env.log, LEASH_LOG_ERROR,
                   "leash_multi_lock_new: %d names (1..LEASH_MULTI_MAX = %d)", n, LEASH_MULTI_MAX);
        return NULL;
    }
    for (i = 0; i < n; i++)
        if (names[i] == NULL) {
            leash__log(&core->env.log, LEASH_LOG_ERROR, "leash_multi_lock_new: name %d is NULL", i);
            return NULL;
        }
    /* The handle first: it comes before its members in the client's list,
     * so the client's teardown ends it (and it its members) first. */
    if ((l = leash__lock_make(core, &leash__multi_prim, names[0])) == NULL)
        return NULL;
    l->multi = calloc(1, sizeof(*l->multi));
    if (l->multi == NULL || (l->multi->m = calloc((size_t)n, sizeof(leash__member))) == NULL ||
        (l->multi->order = calloc((size_t)n, sizeof(int))) == NULL) {
        leash__log(&core->env.log, LEASH_LOG_ERROR, "leash_multi_lock_new: out of memory");
        goto fail;
    }
    l->multi->n = n;
    l->multi->cur = -1;
    if (!make_members(l, names, n))
        goto fail;
    return l;
fail:
    leash_lock_free(l);
    return NULL;
}

/* ---- the kind ---- */

static void destroy(leash_lock *l) {
    int i;

    if (l->multi == NULL)
        return;
    if (l->multi->m != NULL)
        for (i = 0; i < l->multi->n; i++)
            free(l->multi->m[i].name);
    free(l->multi->m);
    free(l->multi->order);
    free(l->multi);
    l->multi = NULL;
}

static int64_t valid_ms(const leash_lock *l) {
    int64_t now = leash__now_ms(), least = INT64_MAX, v;
    int i;

    if (l->state != S_HELD)
        return 0;
    for (i = 0; i < l->multi->n; i++) {
        const leash_lock *ml = l->multi->m[i].l;
        if (ml == NULL || ml->hold.count == 0)
            return 0;
        if ((v = leash__hold_valid_ms(&ml->hold, now)) < least)
            least = v;
    }
    return least;
}

static uint64_t renewals(const leash_lock *l) {
    uint64_t least = UINT64_MAX;
    int i;

    if (l->state != S_HELD)
        return 0;
    for (i = 0; i < l->multi->n; i++)
        if (l->multi->m[i].l->hold.renewals < least)
            least = l->multi->m[i].l->hold.renewals;
    return least;
}

static uint64_t member_fence(const leash_lock *l, int i) {
    const leash_lock *ml;

    if (i < 0 || i >= l->multi->n || (ml = l->multi->m[i].l) == NULL)
        return 0;
    return ml->hold.fence;
}

const leash__prim leash__multi_prim = {
    .kind = "multi",
    .dispatch = dispatch,
    .state_name = state_name,
    .names = names,
    .init = init,
    .valid_ms = valid_ms,
    .renewals = renewals,
    .member_fence = member_fence,
    .destroy = destroy,
};
