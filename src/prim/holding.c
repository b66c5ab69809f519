/* SPDX-License-Identifier: MIT */
/*
 * The machine every kind of lock shares (the mutex, prim/mutex.c; the lock
 * family, prim/family.c): its states, and what every event does in them
 * that the kinds do alike. Every event that can reach a handle (a call, an
 * answer, a timer, a wake from its wait queue, the client's free or close)
 * goes through its kind's dispatch(), which decides the kind's own cells
 * (each kind's file has their table) and hands every other event to
 * leash__holding_step(), which switches on the state and then on the event;
 * every change of state goes through set_state(), which does the work of
 * leaving the old state and entering the new one. What a kind says to
 * Redis (its attempt, release and force release) and whom a release wakes
 * are its leash__prim's (prim/lock.h).
 *
 * States
 *   IDLE         not held, no acquire pending
 *   AFTER_FORCE  acquiring: this handle's force release goes first
 *   ATTEMPT      acquiring: an attempt is on the wire, the wait has time
 *   LAST         acquiring: the wait ended with an attempt on the wire
 *   SUBSCRIBING  acquiring, busy: until the channel's subscription is confirmed
 *   PARKED       acquiring, busy: asleep until a release, the holder's TTL, the end
 *                (polling, docs/how-it-works.md "Waiting without pub/sub": a release is its
 *                queue's poll, a wake as any)
 *   NOMEM        acquiring: no memory for the attempt; again shortly
 *   HELD         held
 *   EXTRA        held: an extra (reentrant) hold is on the wire
 *   XNOMEM       held: no memory for the extra hold; again shortly
 * A release or force release in flight is not a state: it lives beside
 * it. A release's answer can come while a new acquire runs (it was sent
 * first; answers overtake each other only when Redis answered the release
 * LOADING or BUSY and it went again after a pause); not while an extra
 * hold is pending (each refuses the other). A force release is sent only
 * from IDLE, and the acquire that follows it waits in AFTER_FORCE.
 *
 * Some cells are a kind's own: "kind" below; the mutex's (the starvation
 * bound: alive) are in prim/mutex.c, the family's (its place in the queue
 * in Redis, renewed like a hold while it waits, and the handoff) in
 * prim/family.c. Where a kind has no cell of its own, this table's stands.
 *
 *               IDLE    AFTER_F ATTEMPT LAST    SUBSCR  PARKED  NOMEM   HELD    EXTRA   XNOMEM
 * acquire       start   ESTATE  ESTATE  ESTATE  ESTATE  ESTATE  ESTATE  extra   ESTATE  ESTATE
 * release       ESTATE  ESTATE  undo    undo    undo    undo    undo    give    ESTATE  ESTATE
 * cancel        ESTATE  cancel  cancel  cancel  cancel  cancel  cancel  ESTATE  xcancel xcancel
 * force         force   ESTATE  ESTATE  ESTATE  ESTATE  ESTATE  ESTATE  ESTATE  ESTATE  ESTATE
 * free          free    free    free    free    free    free    free    free    free    free
 * close         close   close   close   close   close   close   close   close   close   close
 * granted       -       -       held    held    -       -       -       -       xheld   -
 * busy          -       -       wait*   tout*   -       -       -       -       xlost   -
 * late          -       -       late    tout    -       -       -       -       xagain  -
 * gone          -       -       proto   proto   -       -       -       -       xlost   -
 * failed        -       -       fagain  fail    -       -       -       -       xfail   -
 * unreplicated  -       -       unrepl  unrepl  -       -       -       -       xunrepl -
 * released      rel     -       rel     rel     rel     rel     rel     rel     -       -
 * forced        forced  go      -       -       -       -       -       -       -       -
 * renewed       -       kind    kind    kind    kind    kind    kind    renewed renewed renewed
 * not-ours      -       kind    kind    kind    kind    kind    kind    lost    lost    lost
 * renew-failed  -       kind    kind    kind    kind    kind    kind    retry   retry   retry
 * renew-unrepl  -       kind    kind    kind    kind    kind    kind    lost    lost    lost
 * wait-end      -       tout    last    -       tout    tout    tout    -       -       -
 * overdue       -       -       -       econn   -       -       -       -       -       -
 * ttl           -       -       -       -       again   again   -       -       -       -
 * retry         -       -       -       -       -       -       again   -       -       xagain
 * deadline      -       kind    kind    kind    kind    kind    kind    lost    lost    lost
 * max-hold      -       -       -       -       -       -       -       lost    lost    lost
 * renew-due     -       kind    kind    kind    kind    kind    kind    renew   renew   renew
 * wake          -       -       -       -       -       again   ign     -       -       -
 * covered       -       ign     ign     ign     again   again   ign     -       -       -
 * alive         -       later   later   later   later   later   later   -       -       -
 * handoff       -       kind    kind    kind    kind    kind    kind    ign     ign     ign
 * adopt         adopt   -       -       -       -       -       -       -       -       -
 *
 *   -        cannot come in this state (nothing of that kind is pending):
 *            ignored
 *   kind     the kind's own (its file's table); where it has none, as -
 *   *        the kind may do its own first (the family notes a place)
 *   ign      may come (the wait queue tells every waiter of the channel):
 *            nothing to do
 *   ESTATE   refused, LEASH_ESTATE; nothing changes
 *   start    a new token, an attempt -> ATTEMPT (AFTER_FORCE while this
 *            handle's force release is on the wire); no memory: refused
 *   extra    reentrant and no release in flight: an extra hold -> EXTRA
 *            (else ESTATE); no memory: refused
 *   undo     the acquire ends LEASH_ECANCELED (from the loop), and the
 *            release answers for its grant: a release follows the attempt
 *            written (LEASH_OK if it was granted, LEASH_ENOTHELD if not),
 *            else LEASH_ENOTHELD from the loop -> IDLE
 *   give     the last hold: the watchdog stops now, the release goes ->
 *            IDLE; one of several: the count goes down -> HELD
 *   cancel   the acquire ends LEASH_ECANCELED (from the loop); an attempt
 *            written is released (late copies included) -> IDLE
 *   xcancel  the extra hold ends LEASH_ECANCELED (from the loop) -> HELD
 *   adopt    a multi-lock's one script granted the handle's token (set
 *            while idle, prim/multi.c): the hold begins as after a grant of
 *            its own, with no acquire and no callback -> HELD
 *   force    no release in flight: the force release goes; no memory:
 *            refused
 *   free     pending callbacks fire LEASH_ECANCELED inside the free; a hold
 *            or an attempt written is released in the background (a hold
 *            of leash_lock_abandon is not: it runs out its lease); the
 *            handle is gone
 *   close    the acquire ends (its callback owed until the client's free);
 *            a hold is released for real and the close waits for it -> IDLE
 *   held     -> HELD, callback LEASH_OK (a grant that came after its lease
 *            ran out: released, then again while the wait has time, else
 *            LEASH_ECONN -> IDLE)
 *   xheld    the count goes up, the deadline moves -> HELD, callback OK
 *            (after the deadline: lost, callback LEASH_ECONN -> IDLE)
 *   wait     try-once: LEASH_EBUSY -> IDLE; else queued on the channel:
 *            PARKED when the attempt was covered by the subscription that
 *            is confirmed now, or the queue polls (a kept wake: again), a
 *            new attempt when covered only now, else SUBSCRIBING; polling,
 *            a mutex at its queue's head sends the holder's pttl to the
 *            waiters behind it (alive: only the head asks)
 *   tout     LEASH_ETIMEDOUT -> IDLE
 *   late     the copy came after its own not_after and did nothing: again
 *            while the wait has time (try-once, or none left: LEASH_ECONN;
 *            a grant an earlier copy got is released)
 *   proto    LEASH_EPROTO -> IDLE (a new hold cannot be "gone")
 *   fail     the acquire ends with the error -> IDLE (an answer that was
 *            lost: the attempt may still run, its grant is released)
 *   fagain   as fail, but an attempt that failed LEASH_ECONN only once its
 *            copies waited as long as a grant may (Redlock: servers that
 *            restart, whose connections come back) goes again while the
 *            wait has time, as one server's attempt waits for its
 *            connection (its grant released, a new token)
 *   xlost    the hold is gone: lost EXPIRED, then the extra hold's
 *            callback LEASH_EBUSY -> IDLE
 *   xagain   the extra hold again -> EXTRA (XNOMEM without memory)
 *   xfail    the extra hold's callback gets the error -> HELD
 *   unrepl   granted where too few replicas acknowledged it (wait_replicas):
 *            the grant is released, LEASH_EREPLICAS -> IDLE
 *   xunrepl  the extra hold's callback gets LEASH_EREPLICAS -> HELD (the
 *            count Redis raised goes with the last release)
 *   rel      the release's callback gets the answer; a last hold's release
 *            wakes the local waiters (the kind's hold_given_back); a
 *            release of one of several holds that found the hold gone: lost
 *            EXPIRED first (HELD -> IDLE)
 *   forced   the force release's callback gets the answer
 *   go       the attempt goes now -> ATTEMPT (NOMEM), then as forced
 *   renewed  the deadline moves, the next renewal is scheduled (an answer
 *            after the deadline: lost)
 *   lost     the lost callback (EXPIRED, UNREACHABLE, FIXED_LEASE, MAX_HOLD,
 *            REPLICAS) -> IDLE; the hold is released unless it expired, not
 *            before its local deadline (REPLICAS comes sooner); expired on
 *            Redlock, or a family token found queued again or let in anew,
 *            it is released at once (it holds nothing any more where it
 *            counts, or nothing its handle may use); an extra
 *            hold then ends LEASH_ECANCELED; renew-unrepl on a route
 *            that retries it (route->retry_unreplicated: Sentinel) is retry
 *   retry    a renewal again soon
 *   renew    the renewal joins the next batch
 *   last     -> LAST (the answer on the wire decides, by the bound below)
 *   econn    the answer on the wire did not come by the wait's end +
 *            command_timeout_ms (leash.h), one more turn of the loop
 *            granted (an answer read late after a stall comes first): a
 *            connection whose answers trickle in or queue is never silent
 *            long enough to be broken, so the acquire's own timer ends it:
 *            the attempt is abandoned (a grant it still gets is released),
 *            LEASH_ECONN -> IDLE
 *   again    an attempt -> ATTEMPT (NOMEM without memory); a wake (a
 *            release, or the queue's poll: hold/waitq.h) after
 *            a split vote, on a route whose attempts must not go in step
 *            with other clients' (Redlock), after a random pause
 *   later    the holder lives on: the TTL wake moves (capped: anyone may
 *            publish)
 *
 * User callbacks come last in every handler, or are followed by a check of
 * l->freed: a callback may free the handle or the client.
 *
 * Stats (leash_lock_stats, and the client's sums): an accepted acquire is
 * counted where every event is delivered (leash__lock_deliver), its end
 * where its callback is handed out (finish_acquire, defer_acquire), waits
 * and holds where states change (set_state), losses in lose_then(),
 * renewals in renewed(): each event at the one place that decides it, so
 * no path can count it twice.
 */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "hold/watchdog.h"
#include "prim/holding.h"

enum {
    M_IDLE = LEASH__LOCK_IDLE,
    M_AFTER_FORCE = LEASH__LOCK_AFTER_FORCE,
    M_ATTEMPT = LEASH__LOCK_ATTEMPT,
    M_LAST = LEASH__LOCK_LAST,
    M_SUBSCRIBING = LEASH__LOCK_SUBSCRIBING,
    M_PARKED = LEASH__LOCK_PARKED,
    M_NOMEM = LEASH__LOCK_NOMEM,
    M_HELD = LEASH__LOCK_HELD,
    M_EXTRA = LEASH__LOCK_EXTRA,
    M_XNOMEM = LEASH__LOCK_XNOMEM,
    M_COUNT = LEASH__LOCK_STATES
};

static const char *const state_names[M_COUNT] = {
    "IDLE",   "AFTER_FORCE", "ATTEMPT", "LAST",  "SUBSCRIBING",
    "PARKED", "NOMEM",       "HELD",    "EXTRA", "XNOMEM",
};

#define FOREVER INT64_MAX
/* Longest a waiter sleeps on one TTL: numbers from the wire (a busy
 * answer's PTTL, a "renewed" message) are clamped to it, so no sum can
 * overflow and nothing sent by a stranger strands a waiter for long. */
#define MAX_SLEEP_MS ((int64_t)86400000)
/* How soon to build an attempt again after a failed allocation. */
#define NOMEM_RETRY_MS 10
/* Slack between "every late copy of an attempt is void" and the release
 * that cleans up after them, for the clocks' drift meanwhile. */
#define LATE_COPY_MARGIN_MS 5

/* A counter of the handle and its client's of the same name: both move in
 * the one place that decides the event. */
#define COUNT(l, field) ((l)->stats.field++, (l)->core->env.stats->field++)

static void count_time(uint64_t *total, uint64_t *max, uint64_t *ctotal, uint64_t *cmax,
                       int64_t since) {
    int64_t d = leash__now_us() - since;
    uint64_t us = d > 0 ? (uint64_t)d : 0;

    *total += us;
    *ctotal += us;
    if (us > *max)
        *max = us;
    if (us > *cmax)
        *cmax = us;
}

int leash__holding_acquiring(int state) {
    return state >= M_AFTER_FORCE && state <= M_NOMEM;
}

int leash__holding_held(int state) {
    return state >= M_HELD;
}

static int acquiring(int state) {
    return leash__holding_acquiring(state);
}

static int holding(int state) {
    return leash__holding_held(state);
}

static const leash__logger *lg(const leash_lock *l) {
    return &l->core->env.log;
}

static int64_t clamp_sleep(int64_t ms) {
    return ms < 0 ? 0 : ms > MAX_SLEEP_MS ? MAX_SLEEP_MS : ms;
}

static int event(leash_lock *l, int type) {
    leash__event e;
    memset(&e, 0, sizeof(e));
    e.type = type;
    return leash__lock_deliver(l, &e);
}

/* ---- completions, from the loop or now ---- */

typedef struct later_cb {
    leash__later item;
    leash_lock *lock;
    leash_acquire_cb *acq_cb; /* one of the two */
    leash_release_cb *rel_cb;
    void *arg;
    int status;
} later_cb;

static void run_later_cb(leash__later *item) {
    later_cb *d = (later_cb *)item;
    leash_lock *l = d->lock;
    leash_acquire_cb *acq = d->acq_cb;
    leash_release_cb *rel = d->rel_cb;
    void *arg = d->arg;
    int status = d->status;

    free(d);
    if (acq != NULL)
        acq(l, status, arg);
    else if (rel != NULL)
        rel(l, status, arg);
}

static later_cb *later_new(leash_lock *l) {
    later_cb *d = calloc(1, sizeof(*d));
    if (d != NULL) {
        d->item.owner = l;
        d->item.run = run_later_cb;
        d->lock = l;
    }
    return d;
}

static void later_push(leash_lock *l, later_cb *d) {
    leash__later_push(&l->core->later, &d->item);
}

/* Every acquire ends here or in finish_acquire, with the status its
 * callback gets (l->acq_cb is set exactly while one is pending). */
static void acquire_counted(leash_lock *l, int status) {
    switch (status) {
    case LEASH_OK:
        COUNT(l, grants);
        break;
    case LEASH_EBUSY:
        COUNT(l, busy);
        break;
    case LEASH_ETIMEDOUT:
        COUNT(l, timeouts);
        break;
    case LEASH_ECANCELED:
        COUNT(l, cancels);
        break;
    default:
        COUNT(l, acquire_errors);
        break;
    }
}

/* Hands the pending acquire's callback to d (delivered from the loop). */
static void defer_acquire(leash_lock *l, later_cb *d, int status) {
    if (l->acq_cb != NULL)
        acquire_counted(l, status);
    d->acq_cb = l->acq_cb;
    d->arg = l->acq_arg;
    d->status = status;
    l->acq_cb = NULL;
    l->acq_arg = NULL;
    later_push(l, d);
}

static void finish_acquire(leash_lock *l, int status) {
    leash_acquire_cb *cb = l->acq_cb;
    void *arg = l->acq_arg;

    if (cb != NULL)
        acquire_counted(l, status);
    l->acq_cb = NULL;
    l->acq_arg = NULL;
    if (cb != NULL)
        cb(l, status, arg);
}

/* ---- the release slot ---- */

/* The release slot is taken: a release on the wire, or its callback still
 * owed (it comes after a lost callback that runs first). */
static int release_busy(const leash_lock *l) {
    return l->rel.req != NULL || l->rel.owed;
}

/* req, on the wire, takes the slot for the release or force release the
 * call of e asked for (its callback), of token (NULL: a force release). */
static void release_take(leash_lock *l, leash__req *req, const leash__event *e, const char *token,
                         int final) {
    l->rel.req = req;
    l->rel.cb = e->rel_cb;
    l->rel.arg = e->arg;
    l->rel.final = final;
    l->rel.force = token == NULL;
    if (token != NULL)
        memcpy(l->rel.token, token, sizeof(l->rel.token));
}

/* The slot's callback gets status, and the slot is free. */
static void finish_release(leash_lock *l, int status) {
    leash_release_cb *cb = l->rel.cb;
    void *arg = l->rel.arg;
    leash__core *core = l->core;
    int close_waits = l->rel.close_wait;

    l->rel.req = NULL;
    l->rel.force = 0;
    l->rel.close_wait = 0;
    l->rel.owed = 0;
    l->rel.cb = NULL;
    l->rel.arg = NULL;
    if (cb != NULL)
        cb(l, status, arg);
    if (close_waits)
        leash__core_close_step(core, status);
}

/* ---- commands ---- */

static void on_attempt(void *arg, const leash__answer *a, size_t n);
static void on_release(void *arg, const leash__answer *a, size_t n);
static void on_force(void *arg, const leash__answer *a, size_t n);

static leash__cmd *release_cmd(const leash_lock *l, const char *token, int count_after,
                               int64_t valid_until, int64_t deadline) {
    return l->prim->release_cmd(l, token, count_after, valid_until, deadline);
}

static leash__req *send(leash_lock *l, const leash__opdef *op, leash__cmd *cmd, int64_t send_at,
                        leash__done_fn *done, void *arg) {
    leash__send s;

    memset(&s, 0, sizeof(s));
    s.slot = l->names.slot;
    s.op = op;
    s.cmd = cmd;
    s.nanswers = 1;
    s.send_at = send_at;
    s.what = l->log_name;
    s.done = done;
    s.arg = arg;
    s.names = &l->names;
    /* An extra hold's attempt is the hold's own token: nothing to give
     * back when it fails (route.h). */
    s.token = op == l->core->dialect->acquire && holding(l->state) ? NULL : l->hold.token;
    s.lease_ms = l->hold.lease_ms;
    return leash__route_send(l->core->route, &s);
}

/* A release nobody waits for (loss, free, abandoned grant), sent now or,
 * with send_at != 0, not before then. */
void leash__holding_release_in_background(leash_lock *l, const char *token, int64_t send_at) {
    leash__core *core = l->core;
    int64_t from = send_at > 0 ? send_at : leash__now_ms();
    leash__cmd *cmd =
        release_cmd(l, token, 0, 0, from + core->cfg->conn->command_timeout_ms + l->hold.lease_ms);

    /* A waiter's place goes with it (a release gives it up). */
    if (strcmp(token, l->hold.token) == 0)
        l->queued = 0;

    if (cmd == NULL || send(l, core->dialect->release, cmd, send_at, NULL, NULL) == NULL)
        leash__log(lg(l), LEASH_LOG_WARN,
                   "lock %s: no memory to release it; it expires with its lease", l->log_name);
}

static void release_in_background(leash_lock *l, const char *token, int64_t send_at) {
    leash__holding_release_in_background(l, token, send_at);
}

/* The attempt of l's token was written and will not be sent again: once
 * every copy of it that may still sit somewhere (a frozen server's socket)
 * is void, a release cleans up after any of them that ran. The connection
 * stamps each copy "not after command_timeout_ms from its write", and none
 * is written after now. */
static void release_after_late_copies(leash_lock *l) {
    release_in_background(l, l->hold.token, leash__holding_late_copies_void(l));
}

int64_t leash__holding_late_copies_void(const leash_lock *l) {
    int64_t v = l->core->cfg->conn->command_timeout_ms;
    return leash__now_ms() + v + LATE_COPY_MARGIN_MS + v / 500;
}

/* An attempt that was written and whose answer will not be read: a grant
 * it got is released now (the release follows it on the connection), and
 * again once its late copies are void. */
static void forget_attempt(leash_lock *l) {
    release_in_background(l, l->hold.token, 0);
    release_after_late_copies(l);
}

/* Stops waiting for the attempt in flight; with release_grant, whatever it
 * may have been granted is released. */
void leash__holding_abandon_attempt(leash_lock *l, int release_grant) {
    leash__req *req = l->attempt;

    if (req == NULL)
        return;
    l->attempt = NULL;
    if (leash__req_cancel(req) && release_grant)
        forget_attempt(l);
}

static void abandon_attempt(leash_lock *l, int release_grant) {
    leash__holding_abandon_attempt(l, release_grant);
}

static leash__cmd *make_attempt(leash_lock *l) {
    leash__core *core = l->core;
    int64_t deadline;
    int extra = holding(l->state);

    if (extra)
        deadline = l->hold.deadline;
    else if (l->wait_once)
        deadline = leash__now_ms() + core->cfg->conn->command_timeout_ms;
    else
        deadline = l->wait_deadline;
    return l->prim->attempt_cmd(l, extra, deadline);
}

/* Sends cmd as the attempt. 0, or -1 without memory (cmd freed). */
static int put_attempt(leash_lock *l, leash__cmd *cmd) {
    leash__req *req;

    l->w.parked = 0;
    l->attempt_sent = leash__now_ms();
    l->attempt_epoch = leash__waitq_covered(&l->w);
    req = send(l, l->core->dialect->acquire, cmd, 0, on_attempt, l);
    if (req == NULL)
        return -1;
    l->attempt = req;
    return 0;
}

/* ---- states ---- */

static void arm(leash_lock *l) {
    leash__holding_arm(l);
}

/* Every change of state goes through here: the work of leaving the old
 * state, and of entering the new one. At debug level each change is a
 * line, "STATE: FROM => TO (EVENT) lock NAME" (curl's mstate() is the
 * model), so that a user's log shows the path the handle took; staying in
 * a state (its entry work run again) is not a line. */
static void set_state(leash_lock *l, int to) {
    int from = l->state;
    leash_stats *cst = l->core->env.stats;

    if (to != from && leash__log_on(lg(l), LEASH_LOG_DEBUG))
        leash__log(lg(l), LEASH_LOG_DEBUG, "STATE: %s => %s (%s) lock %s", state_names[from],
                   state_names[to], leash__event_name(l->event), l->log_name);

    /* The stats' waits and holds begin and end with the states. */
    if ((to == M_SUBSCRIBING || to == M_PARKED) && !l->waited) {
        l->waited = 1;
        COUNT(l, waits);
        cst->waiting_now++;
    }
    if (acquiring(from) && !acquiring(to) && l->waited) {
        l->waited = 0;
        cst->waiting_now--;
        count_time(&l->stats.wait_us_total, &l->stats.wait_us_max, &cst->wait_us_total,
                   &cst->wait_us_max, l->acquire_us);
    }
    if (!holding(from) && holding(to)) {
        l->hold_us = leash__now_us();
        COUNT(l, holds);
        cst->held_now++;
    } else if (holding(from) && !holding(to)) {
        cst->held_now--;
        count_time(&l->stats.hold_us_total, &l->stats.hold_us_max, &cst->hold_us_total,
                   &cst->hold_us_max, l->hold_us);
    }
    if (acquiring(from) && !acquiring(to)) {
        if (to != M_HELD) {
            leash__waitq_leave(&l->w); /* hands an unused wake on */
            /* A waiter's place stops being renewed (also when a release
             * went already). */
            leash__watchdog_forget(&l->hold);
        }
        /* What the token holds in Redis for the wait (a place, a
         * reservation) is given up, or became the hold. */
        if (l->prim->wait_ended != NULL)
            l->prim->wait_ended(l, to == M_HELD);
    }
    if (holding(from) && !holding(to)) {
        leash__watchdog_forget(&l->hold);
        leash__waitq_hold_ended(&l->w);
        l->hold.count = 0;
    }
    if (to == M_HELD && acquiring(from))
        leash__waitq_granted(&l->w);
    l->state = to;
    arm(l);
}

/* When the answer to the attempt on the wire is overdue (the overdue
 * event): command_timeout_ms after the wait ended (LAST). A try-once has
 * no such bound of its own: like a wait with time left, it waits for an
 * answer the connection keeps delivering (a burst of its own commands
 * ahead of it is not an outage: test_conn), and only silence breaks it. */
static int64_t answer_due(const leash_lock *l) {
    return l->wait_deadline + l->core->cfg->conn->command_timeout_ms;
}

/* One timer per handle; what it waits for depends on the state. A
 * waiter's place (l->queued: a kind that queues in Redis, the family, takes
 * one) is renewed like a hold while it acquires: the place's renewal and
 * deadline are this timer's too, and their events the kind's cells. */
void leash__holding_arm(leash_lock *l) {
    int64_t due = FOREVER;
    int keep_alive = 0;

    switch (l->state) {
    case M_AFTER_FORCE:
    case M_ATTEMPT:
    case M_SUBSCRIBING:
    case M_PARKED:
    case M_NOMEM:
        keep_alive = 1;
        if (l->wait_deadline != 0)
            due = l->wait_deadline;
        /* Subscribing too: a subscription that never comes must not keep
         * a waiter past the holder's lease. */
        if ((l->state == M_PARKED || l->state == M_SUBSCRIBING) && l->ttl_wake < due)
            due = l->ttl_wake;
        if (l->state == M_NOMEM && l->retry_at < due)
            due = l->retry_at;
        if (l->queued) {
            if (l->hold.renew_state == LEASH__RENEW_IDLE && l->hold.renew_due < due)
                due = l->hold.renew_due;
            if ((l->state == M_PARKED || l->state == M_SUBSCRIBING) && l->hold.deadline < due)
                due = l->hold.deadline;
        }
        break;
    case M_LAST:
        keep_alive = 1;
        due = leash__deadline_next(answer_due(l), l->overdue_turn);
        break;
    case M_HELD:
    case M_EXTRA:
    case M_XNOMEM:
        due = leash__hold_next_due(&l->hold);
        if (l->state == M_XNOMEM && l->retry_at < due)
            due = l->retry_at;
        break;
    default:
        break;
    }
    if (due == FOREVER) {
        leash__timer_stop(&l->timer);
        return;
    }
    if (due != l->timer.due)
        leash__timer_at(&l->timer, due, keep_alive);
}

/* What the timer found due, in order of precedence. */
static void on_timer(void *arg) {
    leash_lock *l = arg;
    int64_t now = leash__now_ms();

    switch (l->state) {
    case M_AFTER_FORCE:
    case M_ATTEMPT:
    case M_SUBSCRIBING:
    case M_PARKED:
    case M_NOMEM:
        if (l->wait_deadline != 0 && now >= l->wait_deadline)
            event(l, LEASH__EV_WAIT_END);
        else if (l->queued && (l->state == M_PARKED || l->state == M_SUBSCRIBING) &&
                 now >= l->hold.deadline)
            event(l, LEASH__EV_DEADLINE);
        else if (l->queued && l->hold.renew_state == LEASH__RENEW_IDLE && now >= l->hold.renew_due)
            event(l, LEASH__EV_RENEW_DUE);
        else if ((l->state == M_PARKED || l->state == M_SUBSCRIBING) && now >= l->ttl_wake)
            event(l, LEASH__EV_TTL);
        else if (l->state == M_NOMEM && now >= l->retry_at)
            event(l, LEASH__EV_RETRY);
        else
            arm(l);
        break;
    case M_LAST:
        if (leash__deadline_ends(answer_due(l), &l->overdue_turn, now))
            event(l, LEASH__EV_OVERDUE);
        else
            arm(l);
        break;
    case M_HELD:
    case M_EXTRA:
    case M_XNOMEM:
        if (leash__hold_max_reached(&l->hold, now))
            event(l, LEASH__EV_MAX_HOLD);
        else if (now >= l->hold.deadline)
            event(l, LEASH__EV_DEADLINE);
        else if (l->state == M_XNOMEM && now >= l->retry_at)
            event(l, LEASH__EV_RETRY);
        else if (l->hold.watchdog && l->hold.renew_state == LEASH__RENEW_IDLE &&
                 now >= l->hold.renew_due)
            event(l, LEASH__EV_RENEW_DUE);
        else
            arm(l);
        break;
    default:
        break;
    }
}

/* ---- actions ---- */

/* An attempt from the loop: without memory, tried again shortly. */
void leash__holding_again(leash_lock *l) {
    int extra = holding(l->state);
    leash__cmd *cmd;

    /* No randomness now: as without memory, again shortly. */
    if (!extra && l->core->route->fresh_tokens && leash__token_new(l->hold.token) != 0)
        cmd = NULL;
    else
        cmd = make_attempt(l);

    if (cmd == NULL || put_attempt(l, cmd) != 0) {
        l->retry_at = leash__now_ms() + NOMEM_RETRY_MS;
        set_state(l, extra ? M_XNOMEM : M_NOMEM);
        return;
    }
    set_state(l, extra ? M_EXTRA : M_ATTEMPT);
}

static void again(leash_lock *l) {
    leash__holding_again(l);
}

/* The acquire ends with status -> IDLE; the callback comes last. */
static void acquire_ends(leash_lock *l, int status) {
    abandon_attempt(l, 1);
    set_state(l, M_IDLE);
    finish_acquire(l, status);
}

/* The hold is lost: the lost callback, then an extra hold's callback
 * (still owed through the lost callback, so that a free inside it ends
 * with LEASH_ECANCELED and a new acquire is refused) gets `owed`. */
static void lose_then(leash_lock *l, int reason, int owed) {
    leash_lost_cb *cb = l->lost_cb;
    int extra_owed = l->acq_cb != NULL;
    int64_t deadline = l->hold.deadline;

    leash__log(lg(l), LEASH_LOG_WARN, "lock %s lost (%s), fence %llu", l->log_name,
               leash_lost_reason_name(reason), (unsigned long long)l->hold.fence);
    abandon_attempt(l, 0);
    set_state(l, M_IDLE);
    /* Up to its local deadline the hold was guaranteed to its holder
     * (leash_valid_ms), who may be writing under it right now; the last
     * write that counted keeps the key that long (on the replicas that
     * acknowledged it too). A loss that comes sooner (a renewal too few
     * replicas acknowledged) gives the key back only then: a release now
     * would hand the lock to a waiter inside that validity. Redlock: a
     * renewal that found the hold gone on a majority (nothing left to
     * guard) may have spread it onto servers that lacked it
     * (dialect/leash.c, renew): given back there at once. */
    if (l->requeued) {
        /* The token holds nothing this handle may use (it waits, or went
         * in anew): its place or new hold goes now, and again once the
         * late copies that may queue it are void. */
        l->requeued = 0;
        forget_attempt(l);
    } else if (reason == LEASH_LOST_EXPIRED && l->core->route->fenced) {
        release_in_background(l, l->hold.token, 0);
    } else if (reason != LEASH_LOST_EXPIRED) {
        release_in_background(l, l->hold.token, deadline > leash__now_ms() ? deadline : 0);
    }
    l->core->env.stats->losts++;
    switch (reason) {
    case LEASH_LOST_EXPIRED:
        COUNT(l, lost_expired);
        break;
    case LEASH_LOST_UNREACHABLE:
        COUNT(l, lost_unreachable);
        break;
    case LEASH_LOST_MAX_HOLD:
        COUNT(l, lost_max_hold);
        break;
    case LEASH_LOST_FIXED_LEASE:
        COUNT(l, lost_fixed_lease);
        break;
    default:
        COUNT(l, lost_replicas);
        break;
    }
    if (cb != NULL) {
        cb(l, reason, l->lost_arg);
        if (l->freed)
            return;
    }
    /* Only the extra hold's: without one, the lost callback may have
     * started a new acquire. */
    if (extra_owed)
        finish_acquire(l, owed);
}

static void lose(leash_lock *l, int reason) {
    lose_then(l, reason, LEASH_ECANCELED);
}

/* Why a hold ends at its deadline: the maximum hold time (the deadline
 * never passes it), or no renewal in time, or its fixed lease. */
static int deadline_reason(const leash_lock *l) {
    if (leash__hold_max_reached(&l->hold, leash__now_ms()))
        return LEASH_LOST_MAX_HOLD;
    return l->hold.watchdog ? LEASH_LOST_UNREACHABLE : LEASH_LOST_FIXED_LEASE;
}

static void woken(leash_lock *l);

/* Busy: decide how to wait for the next try. */
static void wait_for_release(leash_lock *l, int64_t pttl) {
    int64_t now = leash__now_ms();
    unsigned epoch;
    int polls;

    if (leash__waitq_join(&l->core->waitqs, &l->w, l->names.channel, l->names.channel_len,
                          l->names.slot) != LEASH_OK) {
        acquire_ends(l, LEASH_ENOMEM);
        return;
    }
    polls = leash__waitq_polls(&l->w);
    /* A holder that crashed publishes nothing: its key expiring is the
     * release. A key without expiry (pttl -1) gets looked at every lease.
     * A family waiter is told when it is let in: only the head looks when
     * the first holder's lease runs out (-6: not the head); polling, nobody
     * tells it, so it looks once a lease (its let-in may have gone to it
     * while another of its queue polled). */
    if (l->prim->told_when_let_in && pttl < 0)
        l->ttl_wake = polls ? now + l->hold.lease_ms : FOREVER;
    else
        l->ttl_wake = now + (pttl >= 0 ? clamp_sleep(pttl) + 1 : l->hold.lease_ms);
    if (clamp_sleep(pttl) > l->ttl_seen)
        l->ttl_seen = clamp_sleep(pttl);
    /* Polling, only the head asks (docs/how-it-works.md "Waiting without pub/sub"): its
     * answer pushes the others' TTL wakes. Not for a family, whose
     * waiters behind the head look once a lease for a let-in. */
    if (polls && !l->prim->told_when_let_in)
        leash__waitq_holder_seen(&l->w, pttl);
    /* Covered only by the very subscription that was confirmed when the
     * attempt went out: one that dropped and came back meanwhile may have
     * missed the release. A queue that polls misses nothing. */
    epoch = leash__waitq_covered(&l->w);
    if (polls || (l->attempt_epoch != 0 && epoch == l->attempt_epoch)) {
        int kept = leash__waitq_park(&l->w);
        set_state(l, M_PARKED);
        if (kept)
            woken(l); /* a wake was kept for us */
    } else if (epoch != 0) {
        again(l);
    } else {
        set_state(l, M_SUBSCRIBING);
    }
}

/* When the answered attempt was written, from the route (the server ran
 * it later: the lease runs from then at the soonest); else when it was
 * handed to the route. A command that waited for a connection (a failover,
 * a reconnect) does not count its wait against the lease. */
int64_t leash__holding_attempt_time(const leash_lock *l, const leash__answer *a) {
    return a->sent_ms > l->attempt_sent ? a->sent_ms : l->attempt_sent;
}

static int64_t attempt_time(const leash_lock *l, const leash__answer *a) {
    return leash__holding_attempt_time(l, a);
}

void leash__holding_take(leash_lock *l) {
    l->requeued = 0;
    set_state(l, M_HELD);
    finish_acquire(l, LEASH_OK);
}

static void granted(leash_lock *l, const leash__answer *a) {
    int64_t sent = attempt_time(l, a);

    if (sent + l->hold.lease_ms - leash__drift_ms(l->hold.lease_ms) <= leash__now_ms()) {
        /* The answer took longer than the lease: nothing left to trust.
         * A wait with time left tries again (Redlock: servers that came
         * back while the others' grants ran out); the give-back goes
         * first, on the same connections. */
        leash__log(lg(l), LEASH_LOG_WARN,
                   "acquire %s: granted after its lease ran out; releasing it", l->log_name);
        release_in_background(l, l->hold.token, 0);
        if (l->state == M_ATTEMPT && !l->wait_once &&
            (l->wait_deadline == 0 || leash__now_ms() < l->wait_deadline))
            again(l);
        else
            acquire_ends(l, LEASH_ECONN);
        return;
    }
    l->hold.max_ms = l->max_hold_ms;
    leash__hold_begin(&l->hold, sent, a->fence, (int)a->n);
    leash__holding_take(l);
}

static void extra_granted(leash_lock *l, const leash__answer *a) {
    if (leash__now_ms() >= l->hold.deadline) {
        /* Too late: the hold ended at its deadline; so did this request. */
        lose_then(l, deadline_reason(l), LEASH_ECONN);
        return;
    }
    l->hold.count = (int)a->n;
    leash__hold_extend(&l->hold, attempt_time(l, a));
    leash__holding_take(l);
}

static void renewed(leash_lock *l, const leash__event *e) {
    int64_t now = leash__now_ms();

    if (e->type == LEASH__EV_RENEWED && now < l->hold.deadline)
        COUNT(l, renewals);
    else
        COUNT(l, renewals_failed);
    if (now >= l->hold.deadline) {
        /* The answer came too late (a busy loop, a stopped process): the
         * hold already ended at its deadline, whatever Redis says now. */
        lose(l, deadline_reason(l));
        return;
    }
    switch (e->type) {
    case LEASH__EV_RENEWED:
        leash__hold_extend(&l->hold, e->sent);
        l->hold.renewals++;
        leash__hold_schedule_renewal(&l->hold, e->sent);
        arm(l);
        break;
    case LEASH__EV_NOT_OURS:
        lose(l, LEASH_LOST_EXPIRED);
        break;
    case LEASH__EV_RENEW_UNREPLICATED:
        if (!l->core->route->retry_unreplicated) {
            lose(l, LEASH_LOST_REPLICAS);
            break;
        }
        /* Through Sentinel a failover under way leaves the replicas
         * unlinked for a moment: the hold stands on the last renewal that
         * counted, until its deadline, and the renewal goes again. */
        leash__log(lg(l), LEASH_LOG_INFO, "renew %s: too few replicas: trying again soon", l->name);
        leash__hold_retry_renewal(&l->hold, now);
        arm(l);
        break;
    default:
        leash__log(lg(l), LEASH_LOG_INFO, "renew %s failed (%s): trying again soon", l->log_name,
                   leash_strerror(e->answer != NULL ? e->answer->status : LEASH_ECONN));
        leash__hold_retry_renewal(&l->hold, now);
        arm(l);
        break;
    }
}

/* A release woke the parked handle: it tries now; where waiters of other
 * clients, woken by the same release, already split a quorum's vote and
 * would try in step and split it again and again, after a random pause
 * (the timer's TTL wake then tries). A handoff to the next in line costs
 * no pause. */
static void woken(leash_lock *l) {
    int64_t jitter = l->split ? l->core->route->wake_jitter_ms : 0;

    if (jitter <= 0) {
        again(l);
        return;
    }
    l->ttl_wake = leash__now_ms() + 1 + (int64_t)leash__random_below((uint64_t)jitter);
    arm(l);
}

/* The holder announced a renewal of lease_ms: nobody needs to look before
 * that runs out. Anyone allowed to PUBLISH can send this: believe no more
 * than our own lease or the longest TTL Redis itself showed us. */
static void holder_alive(leash_lock *l, const leash__event *e) {
    int64_t sleep = clamp_sleep(e->lease_ms),
            cap = l->lease_ms > l->ttl_seen ? l->lease_ms : l->ttl_seen;

    if (sleep > cap)
        sleep = cap;
    l->ttl_wake = leash__now_ms() + sleep + 1;
    arm(l);
}

/* ---- calls ---- */

static int start(leash_lock *l, const leash__event *e) {
    leash__core *core = l->core;
    leash__cmd *cmd = NULL;

    if (leash__token_new(l->hold.token) != 0) {
        leash__log(lg(l), LEASH_LOG_ERROR, "leash_acquire %s: no randomness for a token",
                   l->log_name);
        return LEASH_ENOMEM;
    }
    l->wait_once = e->wait_ms == 0;
    l->wait_deadline = e->wait_ms > 0 ? leash__now_ms() + e->wait_ms : 0;
    l->hold.lease_ms = l->lease_ms;
    l->hold.renew_ms = l->renew_ms;
    l->hold.watchdog = l->watchdog;
    l->hold.max_ms = l->max_hold_ms;
    l->ttl_seen = 0;
    l->split = 0;
    l->acquire_us = leash__now_us();
    /* Built and sent before anything changes: without memory the call
     * fails whole. */
    if (!l->rel.force) {
        if ((cmd = make_attempt(l)) == NULL || put_attempt(l, cmd) != 0)
            return LEASH_ENOMEM;
    }
    l->acq_cb = e->acq_cb;
    l->acq_arg = e->arg;
    /* Already subscribed for this name (other waiters): joining now makes
     * this very attempt one that cannot miss a release. */
    if (e->wait_ms != 0 &&
        leash__waitq_exists(&core->waitqs, l->names.channel, l->names.channel_len) &&
        leash__waitq_join(&core->waitqs, &l->w, l->names.channel, l->names.channel_len,
                          l->names.slot) == LEASH_OK &&
        l->attempt != NULL)
        l->attempt_epoch = leash__waitq_covered(&l->w);
    set_state(l, cmd != NULL ? M_ATTEMPT : M_AFTER_FORCE);
    return LEASH_OK;
}

static int extra(leash_lock *l, const leash__event *e) {
    leash__cmd *cmd;

    if (!l->reentrant) {
        leash__log(lg(l), LEASH_LOG_ERROR, "leash_acquire %s: already held and not reentrant",
                   l->log_name);
        return LEASH_ESTATE;
    }
    if (release_busy(l)) {
        leash__log(lg(l), LEASH_LOG_ERROR,
                   "leash_acquire %s: a release of this handle is in flight", l->log_name);
        return LEASH_ESTATE;
    }
    if ((cmd = make_attempt(l)) == NULL || put_attempt(l, cmd) != 0)
        return LEASH_ENOMEM;
    l->acq_cb = e->acq_cb;
    l->acq_arg = e->arg;
    set_state(l, M_EXTRA);
    return LEASH_OK;
}

/* The release asked for while acquiring: the acquire ends, and the release
 * answers for whatever it was granted. With an attempt on the wire (or
 * queued), the release goes behind it first: then nothing has changed if
 * there is no memory for it. */
static int undo(leash_lock *l, const leash__event *e) {
    leash__core *core = l->core;
    later_cb *dacq = later_new(l), *drel = NULL;
    leash__cmd *cmd;
    leash__req *req = NULL;

    if (dacq == NULL)
        return LEASH_ENOMEM;
    if (l->attempt != NULL) {
        cmd = release_cmd(l, l->hold.token, 0,
                          l->attempt_sent + l->hold.lease_ms - leash__drift_ms(l->hold.lease_ms),
                          leash__now_ms() + core->cfg->conn->command_timeout_ms + l->hold.lease_ms);
        req = cmd != NULL ? send(l, core->dialect->release, cmd, 0, on_release, l) : NULL;
        if (req == NULL) {
            free(dacq);
            return LEASH_ENOMEM;
        }
    } else if ((drel = later_new(l)) == NULL) {
        free(dacq);
        return LEASH_ENOMEM;
    }
    defer_acquire(l, dacq, LEASH_ECANCELED);
    if (req != NULL) {
        /* An attempt that was written may also sit in a frozen server's
         * socket: the release behind it cannot catch that copy. */
        if (leash__req_cancel(l->attempt))
            release_after_late_copies(l);
        l->attempt = NULL;
        release_take(l, req, e, l->hold.token, 1);
    } else {
        drel->rel_cb = e->rel_cb;
        drel->arg = e->arg;
        drel->status = LEASH_ENOTHELD;
        if (e->rel_cb != NULL)
            later_push(l, drel);
        else
            free(drel);
    }
    set_state(l, M_IDLE);
    return LEASH_OK;
}

static int give(leash_lock *l, const leash__event *e) {
    leash__core *core = l->core;
    int64_t deadline = l->hold.deadline, now = leash__now_ms();
    int last = l->hold.count == 1;
    leash__cmd *cmd;
    leash__req *req;

    if (deadline < now + core->cfg->conn->command_timeout_ms)
        deadline = now + core->cfg->conn->command_timeout_ms;
    cmd = release_cmd(l, l->hold.token, l->hold.count - 1, l->hold.deadline, deadline);
    req = cmd != NULL ? send(l, core->dialect->release, cmd, 0, on_release, l) : NULL;
    if (req == NULL)
        return LEASH_ENOMEM;
    release_take(l, req, e, l->hold.token, last);
    if (last)
        set_state(l, M_IDLE); /* the watchdog stops now, whatever Redis answers */
    else
        l->hold.count--;
    return LEASH_OK;
}

static int cancel(leash_lock *l) {
    later_cb *d = later_new(l);

    if (d == NULL)
        return LEASH_ENOMEM;
    defer_acquire(l, d, LEASH_ECANCELED);
    if (holding(l->state)) {
        /* An extra hold: the set-count scripts make a late grant harmless
         * (the last release deletes whatever the count). */
        abandon_attempt(l, 0);
        set_state(l, M_HELD);
    } else {
        abandon_attempt(l, 1);
        set_state(l, M_IDLE);
    }
    return LEASH_OK;
}

static int force(leash_lock *l, const leash__event *e) {
    leash__core *core = l->core;
    int64_t deadline = leash__now_ms() + core->cfg->conn->command_timeout_ms;
    leash__cmd *cmd = l->prim->force_cmd(l, deadline);
    leash__req *req = cmd != NULL ? send(l, core->dialect->force, cmd, 0, on_force, l) : NULL;

    if (req == NULL)
        return LEASH_ENOMEM;
    release_take(l, req, e, NULL, 0);
    return LEASH_OK;
}

/* The handle goes: everything pending ends ECANCELED inside this call. */
static void free_handle(leash_lock *l) {
    int held = holding(l->state), tearing_down = l->core->env.freeing;

    l->freed = 1;
    leash__later_run_owner(&l->core->later, l);
    /* One of those callbacks freed the client: its teardown has ended this
     * handle already. */
    if (!tearing_down && l->core->env.freeing)
        return;
    abandon_attempt(l, !held);
    if (held && l->abandoned) {
        /* leash_lock_abandon: the key runs out its lease; its waiters
         * (this client's too) wake at its end, as after a crash. */
        leash__log(lg(l), LEASH_LOG_INFO,
                   "lock %s: abandoned: its hold is left to run out its lease", l->log_name);
    } else if (held) {
        release_in_background(l, l->hold.token, 0);
        /* Nobody hears that release's answer, which wakes this client's
         * next waiter where the kind wakes them (no message does: a key
         * granted to a local waiter was never found busy). Woken now, its
         * attempt follows the release on every connection. */
        if (l->prim->hold_given_back != NULL)
            l->prim->hold_given_back(l, l->hold.token);
    }
    set_state(l, M_IDLE);
    leash__timer_clear(&l->timer);
    if (l->rel.req != NULL) {
        leash__req_orphan(l->rel.req); /* it still goes out; nobody hears it */
        l->rel.req = NULL;
    }
    if (l->rel.owed || l->rel.close_wait || l->rel.cb != NULL)
        finish_release(l, LEASH_ECANCELED);
    finish_acquire(l, LEASH_ECANCELED);
}

static void on_close_release(void *arg, const leash__answer *a, size_t n) {
    int status = a->status;

    (void)n;
    if (status == LEASH_OK && a->kind == LEASH__ANS_NOT_OURS)
        status = LEASH_ENOTHELD;
    else if (status == LEASH_OK && a->kind == LEASH__ANS_UNSURE)
        status = LEASH_ECONN;
    leash__core_close_step(arg, status);
}

/* leash_client_close: the acquire ends (its callback is owed until the
 * client's free), a hold is released for real and waited for. */
static void close_handle(leash_lock *l) {
    leash__core *core = l->core;
    leash__cmd *cmd;
    int64_t deadline;

    if (l->rel.req != NULL) {
        l->rel.close_wait = 1;
        leash__core_close_wait(core);
    }
    if (acquiring(l->state)) {
        abandon_attempt(l, 1);
        set_state(l, M_IDLE);
        return;
    }
    if (!holding(l->state))
        return;
    abandon_attempt(l, 0); /* an extra hold: the release below takes all */
    deadline = l->hold.deadline;
    if (deadline < leash__now_ms() + core->cfg->conn->command_timeout_ms)
        deadline = leash__now_ms() + core->cfg->conn->command_timeout_ms;
    cmd = release_cmd(l, l->hold.token, 0, l->hold.deadline, deadline);
    set_state(l, M_IDLE);
    if (cmd == NULL || send(l, core->dialect->release, cmd, 0, on_close_release, core) == NULL) {
        leash__log(lg(l), LEASH_LOG_WARN,
                   "lock %s: no memory to release it; it expires with its lease", l->log_name);
        core->close_status = LEASH_ECONN;
        return;
    }
    leash__core_close_wait(core);
}

/* ---- answers ---- */

static void on_attempt(void *arg, const leash__answer *a, size_t n) {
    leash_lock *l = arg;
    leash__event e;
    static const int kinds[] = {
        [LEASH__ANS_GRANTED] = LEASH__EV_GRANTED,
        [LEASH__ANS_BUSY] = LEASH__EV_BUSY,
        [LEASH__ANS_LATE] = LEASH__EV_LATE,
        [LEASH__ANS_GONE] = LEASH__EV_GONE,
    };

    (void)n;
    l->attempt = NULL;
    memset(&e, 0, sizeof(e));
    e.answer = a;
    if (a->status != LEASH_OK || a->kind > LEASH__ANS_GONE)
        e.type = LEASH__EV_FAILED;
    else if (a->kind == LEASH__ANS_GRANTED && a->replicas_short)
        e.type = LEASH__EV_UNREPLICATED;
    else
        e.type = kinds[a->kind];
    leash__lock_deliver(l, &e);
}

/* The answer of the release or force release in flight (l->rel). */
static void rel_answered(leash_lock *l, int type, const leash__answer *a) {
    leash__event e;

    l->rel.req = NULL;
    memset(&e, 0, sizeof(e));
    e.type = type;
    e.answer = a;
    leash__lock_deliver(l, &e);
}

static void on_release(void *arg, const leash__answer *a, size_t n) {
    (void)n;
    rel_answered(arg, LEASH__EV_RELEASED, a);
}

static void on_force(void *arg, const leash__answer *a, size_t n) {
    (void)n;
    rel_answered(arg, LEASH__EV_FORCED, a);
}

/* The release's answer, in any state. */
static void release_answered(leash_lock *l, const leash__answer *a) {
    int status = a->status;

    if (status == LEASH_OK) {
        switch (a->kind) {
        case LEASH__ANS_RELEASED:
        case LEASH__ANS_LEFT:
            if (l->rel.final && l->prim->hold_given_back != NULL)
                l->prim->hold_given_back(l, l->rel.token);
            break;
        case LEASH__ANS_UNSURE:
            /* Resent after a lost answer, past the hold's deadline:
             * released by the first copy or expired before it, the hold is
             * over. */
            leash__log(lg(l), LEASH_LOG_INFO,
                       "release %s: answer lost, hold over (released or expired)", l->log_name);
            status = LEASH_ECONN;
            break;
        default:
            status = LEASH_ENOTHELD;
            break;
        }
    }
    if (status == LEASH_ENOTHELD && !l->rel.final && l->state == M_HELD &&
        memcmp(l->rel.token, l->hold.token, LEASH__TOKEN_LEN) == 0) {
        /* Giving back one of several holds found them all gone. The
         * release's callback stays owed through the lost callback (a free
         * inside it ends it LEASH_ECANCELED). */
        l->rel.owed = 1;
        lose(l, LEASH_LOST_EXPIRED);
        if (!l->freed)
            finish_release(l, status);
        return;
    }
    finish_release(l, status);
}

/* The force release's answer; our waiters hear of it from the script's
 * PUBLISH, like everyone else's. */
static void force_answered(leash_lock *l, const leash__answer *a) {
    int status = a->status;

    if (status == LEASH_OK)
        status = a->kind == LEASH__ANS_REMOVED ? LEASH_OK : LEASH_ENOTHELD;
    if (status == LEASH_OK)
        leash__log(lg(l), LEASH_LOG_WARN, "lock %s: force-released (someone's hold removed)",
                   l->log_name);
    finish_release(l, status);
}

/* ---- the dispatcher ---- */

static int refuse(leash_lock *l, const char *call, const char *why) {
    leash__log(lg(l), l->quiet_refusals ? LEASH_LOG_DEBUG : LEASH_LOG_ERROR, "%s %s: %s", call,
               l->log_name, why);
    return LEASH_ESTATE;
}

/* What every state does with the events that concern the release slot,
 * the handle's end, and the client's close. Returns 1 if it took e. */
static int common(leash_lock *l, const leash__event *e, int *rc) {
    switch (e->type) {
    case LEASH__EV_FREE:
        free_handle(l);
        return 1;
    case LEASH__EV_CLOSE:
        close_handle(l);
        return 1;
    case LEASH__EV_RELEASED:
        /* The slot holds one request: this answer is for a release. */
        if (!l->rel.force)
            release_answered(l, e->answer);
        return 1;
    case LEASH__EV_FORCED:
        if (!l->rel.force)
            return 1;
        if (l->state == M_AFTER_FORCE) {
            /* This handle's force release goes first: now its attempt. */
            l->rel.force = 0;
            again(l);
            if (l->freed)
                return 1;
        }
        force_answered(l, e->answer);
        return 1;
    case LEASH__EV_FORCE:
        *rc = l->state != M_IDLE ? refuse(l, "leash_force_release",
                                          holding(l->state) ? "this handle holds the lock; use "
                                                              "leash_release"
                                                            : "this handle is acquiring it; use "
                                                              "leash_cancel")
              : release_busy(l)  ? refuse(l, "leash_force_release", "a release is in flight")
                                 : force(l, e);
        return 1;
    default:
        return 0;
    }
}

static int in_idle(leash_lock *l, const leash__event *e) {
    switch (e->type) {
    case LEASH__EV_ACQUIRE:
        if (l->acq_cb != NULL)
            return refuse(l, "leash_acquire",
                          "the extra hold's callback is owed (it comes after the lost callback)");
        return start(l, e);
    case LEASH__EV_RELEASE:
        return refuse(l, "leash_release", release_busy(l) ? "a release is in flight" : "not held");
    case LEASH__EV_CANCEL:
        return refuse(l, "leash_cancel", "no acquire is pending");
    case LEASH__EV_ADOPT:
        l->hold.lease_ms = l->lease_ms;
        l->hold.renew_ms = l->renew_ms;
        l->hold.watchdog = l->watchdog;
        l->hold.max_ms = l->max_hold_ms;
        leash__hold_begin(&l->hold, e->sent, e->fence, 1);
        l->requeued = 0;
        set_state(l, M_HELD);
        return 0;
    default:
        return 0;
    }
}

/* Acquiring: what is alike whether an attempt is on the wire or not (the
 * calls, the holder alive). Returns 1 if it took e (*rc its status). */
static int in_acquiring(leash_lock *l, const leash__event *e, int *rc) {
    switch (e->type) {
    case LEASH__EV_ACQUIRE:
        *rc = refuse(l, "leash_acquire", "already acquiring");
        return 1;
    case LEASH__EV_RELEASE:
        *rc = release_busy(l) ? refuse(l, "leash_release", "a release is in flight") : undo(l, e);
        return 1;
    case LEASH__EV_CANCEL:
        *rc = cancel(l);
        return 1;
    case LEASH__EV_ALIVE:
        /* With an attempt on the wire: a busy answer sets the time again
         * from the key's own TTL; until then, this one stands. */
        holder_alive(l, e);
        return 1;
    default:
        return 0;
    }
}

/* AFTER_FORCE, SUBSCRIBING, PARKED, NOMEM: acquiring, nothing on the wire. */
static int in_waiting(leash_lock *l, const leash__event *e) {
    switch (e->type) {
    case LEASH__EV_WAIT_END:
        acquire_ends(l, LEASH_ETIMEDOUT);
        return 0;
    case LEASH__EV_TTL:
    case LEASH__EV_COVERED:
        if (l->state == M_SUBSCRIBING || l->state == M_PARKED)
            again(l);
        return 0;
    case LEASH__EV_WAKE:
        if (l->state == M_PARKED)
            woken(l);
        return 0;
    case LEASH__EV_RETRY:
        if (l->state == M_NOMEM)
            again(l);
        return 0;
    default:
        return 0;
    }
}

/* Whether a failed attempt goes again (fagain): LEASH_ECONN for want of
 * answers, on a route whose attempts each have a token of their own (a
 * quorum, whose copies wait for a connection no longer than the command
 * timeout or the lease: route/quorum.c), while the wait has time. Servers
 * that restart keep a majority of its connections coming back for longer
 * than one attempt; on one server the attempt would wait in its
 * connection's queue until the wait ends. An attempt that failed sooner
 * than its copies could have waited (a refusal) ends the acquire: no loop
 * without a pause. */
static int attempts_again(const leash_lock *l, const leash__answer *a) {
    int64_t now = leash__now_ms(), bound = l->core->cfg->conn->command_timeout_ms;

    if (l->hold.lease_ms > 0 && l->hold.lease_ms < bound)
        bound = l->hold.lease_ms;
    return a->status == LEASH_ECONN && l->core->route->fresh_tokens && !l->wait_once &&
           (l->wait_deadline == 0 || now < l->wait_deadline) && now - l->attempt_sent >= bound;
}

/* ATTEMPT, LAST: acquiring, an attempt on the wire. */
static int in_attempt(leash_lock *l, const leash__event *e) {
    int last = l->state == M_LAST;

    switch (e->type) {
    case LEASH__EV_GRANTED:
        granted(l, e->answer);
        return 0;
    case LEASH__EV_BUSY:
        if (l->wait_once)
            acquire_ends(l, LEASH_EBUSY);
        else if (last || (l->wait_deadline != 0 && leash__now_ms() >= l->wait_deadline))
            acquire_ends(l, LEASH_ETIMEDOUT);
        else {
            l->split = e->answer->split;
            wait_for_release(l, e->answer->n);
        }
        return 0;
    case LEASH__EV_LATE:
        /* This copy arrived after its own not_after and did nothing (a
         * slow pipe, a clock that moved); an earlier copy, written before
         * a reconnect, may have run. Asking again with the same token finds
         * such a grant; ending now, it is released. */
        if (last || l->wait_once ||
            (l->wait_deadline != 0 && leash__now_ms() >= l->wait_deadline)) {
            forget_attempt(l);
            acquire_ends(l, last ? LEASH_ETIMEDOUT : LEASH_ECONN);
        } else {
            again(l);
        }
        return 0;
    case LEASH__EV_GONE:
        leash__log(lg(l), LEASH_LOG_ERROR, "acquire %s: the script answered an extra hold",
                   l->log_name);
        acquire_ends(l, LEASH_EPROTO);
        return 0;
    case LEASH__EV_FAILED:
        /* Without an answer the attempt may still run (a frozen server
         * keeps it in its socket): forget_attempt cleans up after it. */
        if (e->answer->status == LEASH_ECONN)
            forget_attempt(l);
        if (!last && attempts_again(l, e->answer))
            again(l);
        else
            acquire_ends(l, e->answer->status);
        return 0;
    case LEASH__EV_UNREPLICATED:
        release_in_background(l, l->hold.token, 0);
        acquire_ends(l, LEASH_EREPLICAS);
        return 0;
    case LEASH__EV_WAIT_END:
        if (!last) {
            l->overdue_turn = 0;
            set_state(l, M_LAST); /* the answer in flight decides */
        }
        return 0;
    case LEASH__EV_OVERDUE:
        if (!last)
            return 0; /* only LAST's timer looks for it */
        /* Not a warning: a burst the server cannot answer that soon ends
         * thousands of waits this way at once, and their callbacks say it. */
        leash__log(lg(l), LEASH_LOG_DEBUG,
                   "acquire %s: no answer %lld ms after the wait ended: LEASH_ECONN (the "
                   "answers come too slowly)",
                   l->log_name, (long long)l->core->cfg->conn->command_timeout_ms);
        acquire_ends(l, LEASH_ECONN);
        return 0;
    default:
        return 0;
    }
}

/* HELD, EXTRA, XNOMEM. */
static int in_held(leash_lock *l, const leash__event *e) {
    int extra_pending = l->state != M_HELD;

    switch (e->type) {
    case LEASH__EV_ACQUIRE:
        if (extra_pending)
            return refuse(l, "leash_acquire", "already acquiring");
        return extra(l, e);
    case LEASH__EV_RELEASE:
        if (extra_pending)
            return refuse(l, "leash_release", "an extra hold is in flight; cancel it first");
        if (release_busy(l))
            return refuse(l, "leash_release", "a release is in flight");
        return give(l, e);
    case LEASH__EV_CANCEL:
        if (!extra_pending)
            return refuse(l, "leash_cancel", "no acquire is pending");
        return cancel(l);
    case LEASH__EV_GRANTED:
        if (l->state == M_EXTRA)
            extra_granted(l, e->answer);
        return 0;
    case LEASH__EV_BUSY:
    case LEASH__EV_GONE:
        /* Our hold is gone: the extra hold fails, and the hold is lost. */
        if (l->state == M_EXTRA)
            lose_then(l, LEASH_LOST_EXPIRED, LEASH_EBUSY);
        return 0;
    case LEASH__EV_LATE:
    case LEASH__EV_RETRY:
        if ((e->type == LEASH__EV_LATE && l->state == M_EXTRA) ||
            (e->type == LEASH__EV_RETRY && l->state == M_XNOMEM))
            again(l); /* it did nothing: ask again while the hold lasts */
        return 0;
    case LEASH__EV_FAILED:
    case LEASH__EV_UNREPLICATED:
        if (l->state == M_EXTRA) {
            set_state(l, M_HELD);
            finish_acquire(l, e->type == LEASH__EV_FAILED ? e->answer->status : LEASH_EREPLICAS);
        }
        return 0;
    case LEASH__EV_RENEWED:
    case LEASH__EV_NOT_OURS:
    case LEASH__EV_RENEW_FAILED:
    case LEASH__EV_RENEW_UNREPLICATED:
        renewed(l, e);
        return 0;
    case LEASH__EV_DEADLINE:
        lose(l, deadline_reason(l));
        return 0;
    case LEASH__EV_MAX_HOLD:
        lose(l, LEASH_LOST_MAX_HOLD);
        return 0;
    case LEASH__EV_RENEW_DUE:
        leash__watchdog_request(&l->core->dog, &l->hold);
        arm(l);
        return 0;
    default:
        return 0;
    }
}

int leash__holding_step(leash_lock *l, const leash__event *e) {
    int rc = 0;

    if (common(l, e, &rc) || (acquiring(l->state) && in_acquiring(l, e, &rc)))
        return rc;
    switch (l->state) {
    case M_IDLE:
        rc = in_idle(l, e);
        break;
    case M_AFTER_FORCE:
    case M_SUBSCRIBING:
    case M_PARKED:
    case M_NOMEM:
        rc = in_waiting(l, e);
        break;
    case M_ATTEMPT:
    case M_LAST:
        rc = in_attempt(l, e);
        break;
    default:
        rc = in_held(l, e);
        break;
    }
    return rc;
}

/* ---- hooks: the wait queue and the watchdog report here ---- */

static leash_lock *of_waiter(leash__waiter *w) {
    return LEASH__CONTAINER(w, leash_lock, w);
}

void leash__holding_waiter_wake(leash__waiter *w) {
    event(of_waiter(w), LEASH__EV_WAKE);
}

void leash__holding_waiter_covered(leash__waiter *w) {
    event(of_waiter(w), LEASH__EV_COVERED);
}

void leash__holding_waiter_alive(leash__waiter *w, int64_t lease_ms) {
    leash__event e;
    memset(&e, 0, sizeof(e));
    e.type = LEASH__EV_ALIVE;
    e.lease_ms = lease_ms;
    leash__lock_deliver(of_waiter(w), &e);
}

void leash__holding_waiter_passed_over(leash__waiter *w) {
    leash__event e;
    memset(&e, 0, sizeof(e));
    e.type = LEASH__EV_ALIVE;
    e.lease_ms = LEASH_RESERVE_MS;
    e.passed_over = 1;
    leash__lock_deliver(of_waiter(w), &e);
}

int leash__holding_renewal_type(const leash__answer *a) {
    if (a->status != LEASH_OK)
        return LEASH__EV_RENEW_FAILED;
    /* "Queued" for a holding handle: the renewal ran before the token was
     * let in, and the hold kept that place's expiry (the family's
     * hold_renewed takes any other for what it is: no hold). */
    if (a->kind == LEASH__ANS_RENEWED || a->kind == LEASH__ANS_HANDED ||
        a->kind == LEASH__ANS_QUEUED)
        return a->replicas_short ? LEASH__EV_RENEW_UNREPLICATED : LEASH__EV_RENEWED;
    return LEASH__EV_NOT_OURS;
}

void leash__holding_renewal(leash_lock *l, int type, const leash__answer *a, int64_t sent) {
    leash__event e;

    memset(&e, 0, sizeof(e));
    e.type = type;
    e.answer = a;
    e.sent = sent;
    e.fence = a->fence;
    leash__lock_deliver(l, &e);
}

void leash__holding_init(leash_lock *l) {
    leash__timer_init(&l->timer, &l->core->env, on_timer, l);
    leash__waiter_init(&l->w, l->prim->waiter_hooks);
    leash__list_init(&l->hold.due_link);
    l->hold.names = &l->names;
    l->hold.renewed = l->prim->hold_renewed;
    l->state = M_IDLE;
}

const char *leash__holding_state_name(int state) {
    return state >= 0 && state < M_COUNT ? state_names[state] : "?";
}
