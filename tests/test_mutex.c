/* SPDX-License-Identifier: MIT */
/*
 * The mutex's state machine, cell by cell: for every (state, event) of the
 * tables at the top of src/prim/holding.c and src/prim/mutex.c, a handle
 * is brought into the state on the simulated Redis of support/sim.h
 * (virtual clock, every reply written here), the event is delivered, and
 * what follows is checked: the state after, the return of a call, and
 * which callbacks fired with what.
 *
 * How events arrive:
 * - calls through the public API;
 * - answers from the simulated server when the request they answer is on
 *   the wire (an attempt, a release, a force release); when none is, the
 *   table says the event cannot come, and it is delivered straight to the
 *   dispatcher (leash__lock_dispatch) to show that it changes nothing;
 * - timer events, wait-queue events and renewal answers straight to the
 *   dispatcher, as the timer, the wait queue and the watchdog deliver them
 *   (their own timing is what the integration tests check).
 * Each case is its own process; a case's name is "<event>:<state>".
 *
 * The lock family shares those states (src/prim/family.c): cases
 * "family/<event>:<state>" do the same with a fair lock for the rows of its
 * own table (its place's renewals, the place's deadline, the handoff), in
 * every state; in
 * the acquiring states the handle has a place (an attempt answered busy).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leash/leash.h>

#include "check.h"
#include "failalloc.h"
#include "prim/holding.h"
#include "prim/lock.h"
#include "sim_fixture.h"

/* ---- the expected outcome of every cell ----
 * "<state after>" ("=" unchanged, "freed"), then any of: rc=<status of the
 * call>, acq=<acquire callback's status>, rel=<release callback's status>,
 * lost=<lost reason>. A callback not named must not have fired. */
static const char *const table[LEASH__EV_COUNT][LEASH__LOCK_STATES] = {
    /*                      IDLE                AFTER_FORCE        ATTEMPT
     *                      LAST                SUBSCRIBING        PARKED
     *                      NOMEM               HELD               EXTRA    XNOMEM */
    [LEASH__EV_ACQUIRE] = {"ATTEMPT rc=OK", "= rc=ESTATE", "= rc=ESTATE", "= rc=ESTATE",
                           "= rc=ESTATE", "= rc=ESTATE", "= rc=ESTATE", "EXTRA rc=OK",
                           "= rc=ESTATE", "= rc=ESTATE"},
    [LEASH__EV_RELEASE] = {"= rc=ESTATE", "= rc=ESTATE", "IDLE rc=OK acq=ECANCELED",
                           "IDLE rc=OK acq=ECANCELED", "IDLE rc=OK acq=ECANCELED rel=ENOTHELD",
                           "IDLE rc=OK acq=ECANCELED rel=ENOTHELD",
                           "IDLE rc=OK acq=ECANCELED rel=ENOTHELD", "IDLE rc=OK", "= rc=ESTATE",
                           "= rc=ESTATE"},
    [LEASH__EV_CANCEL] = {"= rc=ESTATE", "IDLE rc=OK acq=ECANCELED", "IDLE rc=OK acq=ECANCELED",
                          "IDLE rc=OK acq=ECANCELED", "IDLE rc=OK acq=ECANCELED",
                          "IDLE rc=OK acq=ECANCELED", "IDLE rc=OK acq=ECANCELED", "= rc=ESTATE",
                          "HELD rc=OK acq=ECANCELED", "HELD rc=OK acq=ECANCELED"},
    [LEASH__EV_FORCE] = {"= rc=OK", "= rc=ESTATE", "= rc=ESTATE", "= rc=ESTATE", "= rc=ESTATE",
                         "= rc=ESTATE", "= rc=ESTATE", "= rc=ESTATE", "= rc=ESTATE", "= rc=ESTATE"},
    [LEASH__EV_FREE] = {"freed", "freed acq=ECANCELED rel=ECANCELED", "freed acq=ECANCELED",
                        "freed acq=ECANCELED", "freed acq=ECANCELED", "freed acq=ECANCELED",
                        "freed acq=ECANCELED", "freed", "freed acq=ECANCELED",
                        "freed acq=ECANCELED"},
    [LEASH__EV_CLOSE] = {"IDLE rc=OK", "IDLE rc=OK", "IDLE rc=OK", "IDLE rc=OK", "IDLE rc=OK",
                         "IDLE rc=OK", "IDLE rc=OK", "IDLE rc=OK", "IDLE rc=OK", "IDLE rc=OK"},
    [LEASH__EV_GRANTED] = {"=", "=", "HELD acq=OK", "HELD acq=OK", "=", "=", "=", "=",
                           "HELD acq=OK", "="},
    [LEASH__EV_BUSY] = {"=", "=", "SUBSCRIBING", "IDLE acq=ETIMEDOUT", "=", "=", "=", "=",
                        "IDLE lost=EXPIRED acq=EBUSY", "="},
    [LEASH__EV_LATE] = {"=", "=", "ATTEMPT", "IDLE acq=ETIMEDOUT", "=", "=", "=", "=", "EXTRA",
                        "="},
    [LEASH__EV_GONE] = {"=", "=", "IDLE acq=EPROTO", "IDLE acq=EPROTO", "=", "=", "=", "=",
                        "IDLE lost=EXPIRED acq=EBUSY", "="},
    [LEASH__EV_FAILED] = {"=", "=", "IDLE acq=EREDIS", "IDLE acq=EREDIS", "=", "=", "=", "=",
                          "HELD acq=EREDIS", "="},
    [LEASH__EV_UNREPLICATED] = {"=", "=", "IDLE acq=EREPLICAS", "IDLE acq=EREPLICAS", "=", "=", "=",
                                "=", "HELD acq=EREPLICAS", "="},
    [LEASH__EV_RELEASED] = {"= rel=OK", "=", "= rel=OK", "=", "=", "=", "=", "= rel=OK", "=", "="},
    [LEASH__EV_FORCED] = {"= rel=OK", "ATTEMPT rel=OK", "=", "=", "=", "=", "=", "=", "=", "="},
    [LEASH__EV_RENEWED] = {"=", "=", "=", "=", "=", "=", "=", "= renewed", "= renewed",
                           "= renewed"},
    [LEASH__EV_NOT_OURS] = {"=", "=", "=", "=", "=", "=", "=", "IDLE lost=EXPIRED",
                            "IDLE lost=EXPIRED acq=ECANCELED", "IDLE lost=EXPIRED acq=ECANCELED"},
    [LEASH__EV_RENEW_FAILED] = {"=", "=", "=", "=", "=", "=", "=", "=", "=", "="},
    [LEASH__EV_RENEW_UNREPLICATED] = {"=", "=", "=", "=", "=", "=", "=", "IDLE lost=REPLICAS",
                                      "IDLE lost=REPLICAS acq=ECANCELED",
                                      "IDLE lost=REPLICAS acq=ECANCELED"},
    [LEASH__EV_WAIT_END] = {"=", "IDLE acq=ETIMEDOUT", "LAST", "=", "IDLE acq=ETIMEDOUT",
                            "IDLE acq=ETIMEDOUT", "IDLE acq=ETIMEDOUT", "=", "=", "="},
    [LEASH__EV_OVERDUE] = {"=", "=", "=", "IDLE acq=ECONN", "=", "=", "=", "=", "=", "="},
    [LEASH__EV_TTL] = {"=", "=", "=", "=", "ATTEMPT", "ATTEMPT", "=", "=", "=", "="},
    [LEASH__EV_RETRY] = {"=", "=", "=", "=", "=", "=", "ATTEMPT", "=", "=", "EXTRA"},
    [LEASH__EV_DEADLINE] = {"=", "=", "=", "=", "=", "=", "=", "IDLE lost=UNREACHABLE",
                            "IDLE lost=UNREACHABLE acq=ECANCELED",
                            "IDLE lost=UNREACHABLE acq=ECANCELED"},
    [LEASH__EV_MAX_HOLD] = {"=", "=", "=", "=", "=", "=", "=", "IDLE lost=MAX_HOLD",
                            "IDLE lost=MAX_HOLD acq=ECANCELED", "IDLE lost=MAX_HOLD acq=ECANCELED"},
    [LEASH__EV_RENEW_DUE] = {"=", "=", "=", "=", "=", "=", "=", "= renewing", "= renewing",
                             "= renewing"},
    [LEASH__EV_WAKE] = {"=", "=", "=", "=", "=", "ATTEMPT", "=", "=", "=", "="},
    [LEASH__EV_COVERED] = {"=", "=", "=", "=", "ATTEMPT", "ATTEMPT", "=", "=", "=", "="},
    [LEASH__EV_ALIVE] = {"=", "=", "=", "=", "=", "=", "=", "=", "=", "="},
    [LEASH__EV_HANDOFF] = {"=", "=", "=", "=", "=", "=", "=", "=", "=", "="},
    /* A multi-lock's events (prim/multi.c): its members' adopt only. */
    [LEASH__EV_MEMBER_ACQUIRED] = {"=", "=", "=", "=", "=", "=", "=", "=", "=", "="},
    [LEASH__EV_MEMBER_LOST] = {"=", "=", "=", "=", "=", "=", "=", "=", "=", "="},
    [LEASH__EV_MEMBER_RELEASED] = {"=", "=", "=", "=", "=", "=", "=", "=", "=", "="},
    [LEASH__EV_ADOPT] = {"HELD", "=", "=", "=", "=", "=", "=", "=", "=", "="},
    [LEASH__EV_GROUP_ANSWERED] = {"=", "=", "=", "=", "=", "=", "=", "=", "=", "="},
};

/* The family's rows: where a cell is NULL, the mutex's applies. */
enum {
    FAMILY_ROWS = 7
};
static const int family_events[FAMILY_ROWS] = {
    LEASH__EV_RENEWED,  LEASH__EV_NOT_OURS,  LEASH__EV_RENEW_FAILED, LEASH__EV_RENEW_UNREPLICATED,
    LEASH__EV_DEADLINE, LEASH__EV_RENEW_DUE, LEASH__EV_HANDOFF,
};
static const char *const family_table[LEASH__EV_COUNT][LEASH__LOCK_STATES] = {
    /*                      IDLE AFTER_FORCE ATTEMPT
     *                      LAST SUBSCRIBING PARKED
     *                      NOMEM HELD EXTRA XNOMEM */
    [LEASH__EV_RENEWED] = {NULL, NULL, "= place", "= place", "= place", "= place", "= place"},
    [LEASH__EV_NOT_OURS] = {NULL, NULL, "= unplaced", "= unplaced", "ATTEMPT unplaced",
                            "ATTEMPT unplaced", "= unplaced"},
    [LEASH__EV_RENEW_FAILED] = {NULL, NULL, "= place", "= place", "= place", "= place", "= place"},
    [LEASH__EV_RENEW_UNREPLICATED] = {NULL, NULL, "= place", "= place", "= place", "= place",
                                      "= place"},
    [LEASH__EV_DEADLINE] = {NULL, NULL, "=", "=", "ATTEMPT", "ATTEMPT", "="},
    [LEASH__EV_RENEW_DUE] = {NULL, NULL, "= renewing", "= renewing", "= renewing", "= renewing",
                             "= renewing"},
    [LEASH__EV_HANDOFF] = {"=", "=", "HELD acq=OK", "HELD acq=OK", "HELD acq=OK", "HELD acq=OK",
                           "HELD acq=OK", "=", "=", "="},
};

static const char *const event_names[LEASH__EV_COUNT] = {
    "acquire",      "release",
    "cancel",       "force",
    "free",         "close",
    "granted",      "busy",
    "late",         "gone",
    "failed",       "unreplicated",
    "released",     "forced",
    "renewed",      "not-ours",
    "renew-failed", "renew-unreplicated",
    "wait-end",     "overdue",
    "ttl",          "retry",
    "deadline",     "max-hold",
    "renew-due",    "wake",
    "covered",      "alive",
    "handoff",      "member-acquired",
    "member-lost",  "member-released",
    "adopt",        "group-answered",
};

/* ---- the world of one case ---- */

static sim *S;
static leash_client *C;
static leash_lock *L;
/* A fair lock instead of a mutex: its own acquire and release scripts. */
static int family;
static int s_acquire = LS_ACQUIRE, s_release = LS_RELEASE;
static simfx_rec acq, rel, lost, closed;

static void grant(void) {
    simfx_grant(simfx_oldest(S, s_acquire));
    sim_run(S);
}

static void busy(void) {
    simfx_busy(simfx_oldest(S, s_acquire), 2000);
    sim_run(S);
}

static const char *state(void) {
    return leash__lock_state_name(L);
}

static void run_call(int (*fn)(void), int *rc) {
    simfx_in_call = 1;
    *rc = fn();
    simfx_in_call = 0;
    sim_run(S);
}

static int acquire_wait(void) {
    return leash_acquire(L, 5000, simfx_on_acquired, &acq);
}

static int acquire_once(void) {
    return leash_acquire(L, 0, simfx_on_acquired, &acq);
}

static int release(void) {
    return leash_release(L, simfx_on_released, &rel);
}

static int force(void) {
    return leash_force_release(L, simfx_on_released, &rel);
}

/* ---- bringing the handle into a state ---- */

static void up(void) {
    leash_options o;

    failalloc_reset();
    S = sim_new();
    sim_options(S, &o);
    o.lease_ms = 3000;
    o.command_timeout_ms = 5000; /* no silence breaks while replies wait */
    o.sub_linger_ms = 0;
    C = simfx_client(S, &o);
    sim_run(S);
    /* Confirmations come when a case asks: each event is one event. */
    sim_set_auto(S, SIM_AUTO_SUBSCRIBE, 0);
    L = family ? leash_fair_lock_new(C, "x") : leash_lock_new(C, "x");
    CHECK(L != NULL);
    leash_on_lost(L, simfx_on_lost, &lost);
    memset(&acq, 0, sizeof(acq));
    memset(&rel, 0, sizeof(rel));
    memset(&lost, 0, sizeof(lost));
    memset(&closed, 0, sizeof(closed));
}

static void held(void) {
    int rc;
    run_call(acquire_once, &rc);
    CHECK_EQ_INT(rc, LEASH_OK);
    grant();
    CHECK_STR_EQ(state(), "HELD");
}

static void parked(void) {
    int rc;
    run_call(acquire_wait, &rc);
    busy(); /* subscribes, then tries again once confirmed */
    CHECK_EQ_INT(sim_reply_auto(sim_sub_conn(S)), 0);
    sim_run(S);
    busy();
    CHECK_STR_EQ(state(), "PARKED");
}

static void synthetic(int type, const leash__answer *a);

/* The family's acquiring states, the handle with a place in the queue. */
static void into_placed(int st) {
    int rc;

    switch (st) {
    case LEASH__LOCK_ATTEMPT:
        parked();
        synthetic(LEASH__EV_TTL, NULL); /* the head looks again */
        break;
    case LEASH__LOCK_LAST:
        simfx_in_call = 1;
        rc = leash_acquire(L, 600, simfx_on_acquired, &acq);
        simfx_in_call = 0;
        CHECK_EQ_INT(rc, LEASH_OK);
        sim_run(S);
        busy(); /* a place; subscribes */
        CHECK_EQ_INT(sim_reply_auto(sim_sub_conn(S)), 0);
        sim_run(S); /* covered: the attempt again */
        sim_advance(S, 600);
        break;
    case LEASH__LOCK_SUBSCRIBING:
        run_call(acquire_wait, &rc);
        busy();
        break;
    case LEASH__LOCK_PARKED:
        parked();
        break;
    case LEASH__LOCK_NOMEM:
        parked();
        failalloc_arm(1); /* the look's attempt finds no memory */
        synthetic(LEASH__EV_TTL, NULL);
        failalloc_disarm();
        break;
    }
    CHECK_MSG(leash__lock_state(L) == st, "could not reach state %d (at %s)", st, state());
    CHECK_MSG(L->queued, "no place in state %s", state());
}

/* with_release: a release (or force release) of an earlier hold is in
 * flight too, where the state allows one and the event is its answer. */
static void into(int st, int with_release) {
    int rc;

    if (family && st >= LEASH__LOCK_ATTEMPT && st <= LEASH__LOCK_NOMEM) {
        into_placed(st);
        goto reached;
    }
    switch (st) {
    case LEASH__LOCK_IDLE:
        if (with_release == 1) {
            held();
            run_call(release, &rc);
        } else if (with_release == 2) {
            run_call(force, &rc);
        }
        break;
    case LEASH__LOCK_AFTER_FORCE:
        run_call(force, &rc);
        run_call(acquire_wait, &rc);
        break;
    case LEASH__LOCK_ATTEMPT:
        if (with_release == 1) {
            held();
            run_call(release, &rc);
        }
        run_call(acquire_wait, &rc);
        break;
    case LEASH__LOCK_LAST:
        simfx_in_call = 1;
        rc = leash_acquire(L, 300, simfx_on_acquired, &acq);
        simfx_in_call = 0;
        sim_run(S);
        sim_advance(S, 300);
        break;
    case LEASH__LOCK_SUBSCRIBING:
        sim_set_auto(S, SIM_AUTO_SUBSCRIBE, 0);
        run_call(acquire_wait, &rc);
        busy();
        break;
    case LEASH__LOCK_PARKED:
        parked();
        break;
    case LEASH__LOCK_NOMEM:
        parked();
        failalloc_arm(1); /* the wake's attempt finds no memory */
        simfx_publish_release(S);
        failalloc_disarm();
        break;
    case LEASH__LOCK_HELD:
        held();
        if (with_release == 1) {
            run_call(acquire_once, &rc);
            grant();
            run_call(release, &rc); /* one of two holds */
        }
        break;
    case LEASH__LOCK_EXTRA:
        held();
        run_call(acquire_once, &rc);
        break;
    case LEASH__LOCK_XNOMEM:
        held();
        run_call(acquire_once, &rc);
        failalloc_arm(1); /* the extra hold's next attempt finds no memory */
        simfx_answer(S, s_acquire, "*4\r\n:0\r\n:-3\r\n:0\r\n:%lld\r\n", simfx_server_ms());
        failalloc_disarm();
        break;
    }
    CHECK_MSG(leash__lock_state(L) == st, "could not reach state %d (at %s)", st, state());
reached:
    /* Only the callbacks of the event count. */
    memset(&acq, 0, sizeof(acq));
    memset(&rel, 0, sizeof(rel));
    memset(&lost, 0, sizeof(lost));
}

/* ---- delivering an event ---- */

static void synthetic(int type, const leash__answer *a) {
    leash__event e;
    memset(&e, 0, sizeof(e));
    e.type = type;
    e.answer = a;
    e.sent = sim_now();
    e.lease_ms = 3000;
    if (type == LEASH__EV_HANDOFF) {
        e.sent = 0; /* a message, not an answer to something sent */
        e.fence = 78;
    }
    leash__lock_dispatch(L, &e);
    sim_run(S);
}

static void answer_or_synthetic(int script, int type, int kind, int status, const char *reply) {
    leash__answer a;

    if (simfx_pending(S, script) != NULL &&
        sim_conn_cmd(sim_cmd_conn(S), 0) == simfx_pending(S, script)) {
        simfx_answer(S, script, "%s", reply);
        return;
    }
    memset(&a, 0, sizeof(a));
    a.status = status;
    a.kind = kind;
    a.n = kind == LEASH__ANS_BUSY ? 2000 : 1;
    a.fence = 77;
    synthetic(type, &a);
}

static int freed;

/* Delivers event ev; returns a call's status (0 for other events). */
static int deliver(int ev) {
    int rc = 0;
    char reply[128];

    switch (ev) {
    case LEASH__EV_ACQUIRE:
        run_call(acquire_wait, &rc);
        break;
    case LEASH__EV_RELEASE:
        run_call(release, &rc);
        break;
    case LEASH__EV_CANCEL:
        simfx_in_call = 1;
        rc = leash_cancel(L);
        simfx_in_call = 0;
        sim_run(S);
        break;
    case LEASH__EV_FORCE:
        run_call(force, &rc);
        break;
    case LEASH__EV_FREE:
        leash_lock_free(L); /* callbacks come inside: allowed */
        freed = 1;
        sim_run(S);
        break;
    case LEASH__EV_CLOSE:
        rc = leash_client_close(C, simfx_on_closed, &closed);
        break;
    case LEASH__EV_GRANTED:
        snprintf(reply, sizeof(reply), "*4\r\n:1\r\n:77\r\n:%d\r\n:%lld\r\n",
                 leash__lock_state(L) == LEASH__LOCK_EXTRA ? 2 : 1, simfx_server_ms());
        answer_or_synthetic(s_acquire, ev, LEASH__ANS_GRANTED, LEASH_OK, reply);
        break;
    case LEASH__EV_BUSY:
        snprintf(reply, sizeof(reply), "*4\r\n:0\r\n:2000\r\n:0\r\n:%lld\r\n", simfx_server_ms());
        answer_or_synthetic(s_acquire, ev, LEASH__ANS_BUSY, LEASH_OK, reply);
        break;
    case LEASH__EV_LATE:
        snprintf(reply, sizeof(reply), "*4\r\n:0\r\n:-3\r\n:0\r\n:%lld\r\n", simfx_server_ms());
        answer_or_synthetic(s_acquire, ev, LEASH__ANS_LATE, LEASH_OK, reply);
        break;
    case LEASH__EV_GONE:
        snprintf(reply, sizeof(reply), "*4\r\n:0\r\n:-4\r\n:0\r\n:%lld\r\n", simfx_server_ms());
        answer_or_synthetic(s_acquire, ev, LEASH__ANS_GONE, LEASH_OK, reply);
        break;
    case LEASH__EV_FAILED:
        answer_or_synthetic(s_acquire, ev, 0, LEASH_EREDIS, "-ERR no\r\n");
        break;
    case LEASH__EV_RELEASED:
        answer_or_synthetic(s_release, ev, LEASH__ANS_RELEASED, LEASH_OK,
                            leash__lock_state(L) == LEASH__LOCK_HELD ? ":1\r\n" : ":0\r\n");
        break;
    case LEASH__EV_FORCED:
        answer_or_synthetic(LS_FORCE, ev, LEASH__ANS_REMOVED, LEASH_OK, ":1\r\n");
        break;
    case LEASH__EV_RENEWED: {
        leash__answer a = {.status = LEASH_OK, .kind = LEASH__ANS_RENEWED};
        synthetic(ev, &a);
        break;
    }
    case LEASH__EV_NOT_OURS: {
        leash__answer a = {.status = LEASH_OK, .kind = LEASH__ANS_NOT_OURS};
        synthetic(ev, &a);
        break;
    }
    case LEASH__EV_RENEW_FAILED: {
        leash__answer a = {.status = LEASH_ECONN};
        synthetic(ev, &a);
        break;
    }
    case LEASH__EV_UNREPLICATED: {
        /* WAIT's answer is the route's; the handle sees the marked grant. */
        leash__answer a = {.status = LEASH_OK,
                           .kind = LEASH__ANS_GRANTED,
                           .fence = 77,
                           .n = 1,
                           .replicas_short = 1};
        synthetic(ev, &a);
        break;
    }
    case LEASH__EV_RENEW_UNREPLICATED: {
        leash__answer a = {.status = LEASH_OK, .kind = LEASH__ANS_RENEWED, .replicas_short = 1};
        synthetic(ev, &a);
        break;
    }
    default:
        synthetic(ev, NULL);
        break;
    }
    return rc;
}

/* ---- checking ---- */

static int status_named(const char *name) {
    static const struct {
        const char *name;
        int value;
    } names[] = {
        {"OK", LEASH_OK},
        {"ESTATE", LEASH_ESTATE},
        {"ECANCELED", LEASH_ECANCELED},
        {"ETIMEDOUT", LEASH_ETIMEDOUT},
        {"ECONN", LEASH_ECONN},
        {"EBUSY", LEASH_EBUSY},
        {"EPROTO", LEASH_EPROTO},
        {"EREDIS", LEASH_EREDIS},
        {"ENOTHELD", LEASH_ENOTHELD},
        {"EXPIRED", LEASH_LOST_EXPIRED},
        {"UNREACHABLE", LEASH_LOST_UNREACHABLE},
        {"MAX_HOLD", LEASH_LOST_MAX_HOLD},
        {"EREPLICAS", LEASH_EREPLICAS},
        {"REPLICAS", LEASH_LOST_REPLICAS},
    };
    size_t i;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(names[i].name, name) == 0)
            return names[i].value;
    test_failf_(__FILE__, __LINE__, "status_named", "unknown name %s in the table", name);
}

static void check_cb(const char *what, const simfx_rec *r, const char *spec, const char *key) {
    const char *p = strstr(spec, key);
    char name[32];

    if (p == NULL) {
        CHECK_MSG(r->calls == 0, "%s: %s callback fired (%d) and the table says it does not", what,
                  key, r->status);
        return;
    }
    sscanf(p + strlen(key), "%31[A-Z_]", name);
    CHECK_MSG(r->calls == 1, "%s: %s callback fired %d times, the table says once (%s)", what, key,
              r->calls, name);
    CHECK_MSG(r->status == status_named(name), "%s: %s callback said %d, the table says %s", what,
              key, r->status, name);
}

static void cell(int st, int ev) {
    const char *spec =
        family && family_table[ev][st] != NULL ? family_table[ev][st] : table[ev][st];
    char want[32], what[96];
    int rc, with_release = 0;
    uint64_t renewals;

    snprintf(what, sizeof(what), "%s%s in %s", family ? "family: " : "", event_names[ev],
             leash__mutex.state_name(st));
    up();
    if (ev == LEASH__EV_RELEASED)
        with_release = 1;
    if (ev == LEASH__EV_FORCED)
        with_release = 2;
    into(st, with_release);
    renewals = leash_renewals(L);
    rc = deliver(ev);
    sscanf(spec, "%31s", want);
    if (strcmp(want, "freed") == 0)
        CHECK(freed);
    else if (strcmp(want, "=") == 0)
        CHECK_MSG(leash__lock_state(L) == st, "%s: state %s, the table says unchanged", what,
                  state());
    else
        CHECK_MSG(strcmp(state(), want) == 0, "%s: state %s, the table says %s", what, state(),
                  want);
    if (strstr(spec, "rc=") != NULL) {
        sscanf(strstr(spec, "rc=") + 3, "%31[A-Z]", want);
        CHECK_MSG(rc == status_named(want), "%s: returned %s, the table says %s", what,
                  leash_status_name(rc), want);
    }
    check_cb(what, &acq, spec, "acq=");
    check_cb(what, &rel, spec, "rel=");
    check_cb(what, &lost, spec, "lost=");
    if (strstr(spec, "renewed") != NULL)
        CHECK_MSG(leash_renewals(L) == renewals + 1, "%s: the renewal was not counted", what);
    /* "place": the handle keeps its place; "unplaced": it has none. */
    if (strstr(spec, "unplaced") != NULL)
        CHECK_MSG(!L->queued, "%s: the place was kept, the table says it is gone", what);
    else if (strstr(spec, "place") != NULL)
        CHECK_MSG(L->queued, "%s: the place is gone, the table says it is kept", what);
    if (strstr(spec, "renewing") != NULL) {
        sim_advance(S, 1); /* the watchdog flushes from the loop */
        CHECK_MSG(simfx_pending(S, LS_RENEW) != NULL, "%s: no renewal went out", what);
    }
    if (ev != LEASH__EV_CLOSE || closed.calls == 0)
        leash_client_free(C);
    CHECK_EQ_INT(sim_timers_alive(S), 0);
    sim_free(S);
    /* failalloc keeps every block reachable: leaks show here, not in LSan. */
    CHECK_MSG(failalloc_outstanding() == 0, "%s: %ld blocks leaked", what, failalloc_outstanding());
}

/* One case per cell, named "<event>:<state>", then the family's rows,
 * "family/<event>:<state>" (select some on the command line); each runs in
 * its own process (test_main forks). */
#define CELLS (LEASH__EV_COUNT * LEASH__LOCK_STATES)
#define FAMILY_CELLS (FAMILY_ROWS * LEASH__LOCK_STATES)
static test_case cases[CELLS + FAMILY_CELLS + 1];

static void run_current(void) {
    int i = (int)(test_current() - cases);

    if (i >= CELLS) {
        i -= CELLS;
        family = 1;
        s_acquire = LS_FAMILY_ACQUIRE;
        s_release = LS_FAMILY_RELEASE;
        cell(i % LEASH__LOCK_STATES, family_events[i / LEASH__LOCK_STATES]);
        return;
    }
    cell(i % LEASH__LOCK_STATES, i / LEASH__LOCK_STATES);
}

int main(int argc, char **argv) {
    static char names[CELLS + FAMILY_CELLS][80];
    int i;

    for (i = 0; i < CELLS + FAMILY_CELLS; i++) {
        int j = i < CELLS ? i : i - CELLS;
        int ev = i < CELLS ? j / LEASH__LOCK_STATES : family_events[j / LEASH__LOCK_STATES];

        snprintf(names[i], sizeof(names[i]), "%s%s:%s", i < CELLS ? "" : "family/", event_names[ev],
                 leash__mutex.state_name(j % LEASH__LOCK_STATES));
        cases[i].name = names[i];
        cases[i].fn = run_current;
        cases[i].timeout_s = 20;
    }
    return test_main(argc, argv, cases);
}
