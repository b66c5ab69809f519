/* SPDX-License-Identifier: MIT */
/*
 * The lock family against the races an adversarial review found: a place
 * renewal answered after the handoff, a lost handoff message, a late one
 * (after the hold it names ran out and the token was queued again), a
 * close or free with a waiter queued, and a stress of each kind with delayed
 * connections (counted violations and losses must be 0).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "fixture.h"
#include "prim/core.h"
#include "prim/lock.h"
#include "proxy.h"
#include "redis_server.h"

/* The key of family handle l (the whole lock is one hash). */
typedef struct fkeys {
    char key[LEASH__FLOOR_MAX];
    size_t len;
} fkeys;

static void keys_of(leash_lock *l, fkeys *k) {
    memcpy(k->key, l->names.key, l->names.key_len);
    k->len = l->names.key_len;
}

/* The expiry in field <prefix><token> of k's hash ('h': a holder's
 * "<mode>:<count>:<fence>:<client>:<expiry>", 'q': a waiter's
 * "<mode>:<client>:<expiry>:<place>"), or -1. */
static long long expiry(test_redis *r, fkeys *k, char prefix, const char *tok) {
    char f[64];
    redisReply *rep;
    long long v = -1;

    snprintf(f, sizeof f, "%c%s", prefix, tok);
    rep = test_redis_cmd(r, "HGET %b %s", k->key, k->len, f);
    if (rep != NULL && rep->type == REDIS_REPLY_STRING) {
        const char *p = rep->str;
        int skip = prefix == 'h' ? 4 : 2;
        while (skip > 0 && (p = strchr(p, ':')) != NULL) {
            p++;
            skip--;
        }
        if (p != NULL)
            v = atoll(p);
    }
    if (rep != NULL)
        freeReplyObject(rep);
    return v;
}

static long long hexists(test_redis *r, fkeys *k, char prefix, const char *tok) {
    char f[64];
    snprintf(f, sizeof f, "%c%s", prefix, tok);
    return test_redis_int(r, "HEXISTS %b %s", k->key, k->len, f);
}

/*
 * A waiter's place renewal is answered "2" (place renewed) after the
 * handoff message already made the handle a holder: hold_renewed maps
 * QUEUED-while-holding to NOT_OURS, so the fresh hold is lost (EXPIRED,
 * nothing released): a spurious loss and a hold nobody owns in Redis.
 */
TEST(place_renewal_answered_after_handoff_loses_the_hold) {
    test_redis r;
    fault_proxy p;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *ca, *cb;
    leash_lock *a, *b;
    fx_result lost = {0}, acq = {0};
    fkeys k;
    long long s0, s;
    int64_t end;
    char tok[LEASH__TOKEN_LEN + 1];

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(fp_start(&p, r.port), 0);
    ca = fx_fault_client(loop, r.port, 900);
    cb = fx_fault_client(loop, p.port, 900); /* place renewals every 300 ms */
    fx_wait_connected(loop, ca, 3000);
    fx_wait_connected(loop, cb, 3000);
    a = leash_fair_lock_new(ca, "fl");
    b = leash_fair_lock_new(cb, "fl");
    CHECK(a != NULL && b != NULL);
    keys_of(b, &k);
    leash_on_lost(b, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(loop, a, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(b, 10000, fx_acquire_cb, &acq), LEASH_OK);
    test_run_for(loop, 100);
    memcpy(tok, b->hold.token, sizeof tok);
    s0 = expiry(&r, &k, 'q', tok);
    CHECK_MSG(s0 > 0, "b has no place");
    /* Command replies to b take 200 ms; its subscriber connection is fast. */
    CHECK_EQ_INT(fp_delay(&p, FP_CMD, FP_DOWN, 200), 0);
    end = test_now_ms() + 3000;
    do {
        ev_run(loop, EVRUN_NOWAIT);
        s = expiry(&r, &k, 'q', tok);
    } while (s == s0 && test_now_ms() < end);
    CHECK_MSG(s > s0, "no place renewal seen");
    /* The renewal ran in Redis; its answer (2) is on its way. Hand over. */
    CHECK_EQ_INT(leash_release(a, NULL, NULL), LEASH_OK);
    fx_run_until(loop, &acq, 1000);
    CHECK_EQ_INT(acq.status, LEASH_OK);
    fprintf(stderr, "handed: valid_ms %lld\n", (long long)leash_valid_ms(b));
    test_run_for(loop, 400);
    fprintf(stderr,
            "after the renewal's answer: lost.calls %d reason %d held %d; "
            "in Redis: holder %lld\n",
            lost.calls, lost.status, leash_held(b), hexists(&r, &k, 'h', tok));
    CHECK_MSG(lost.calls == 0, "the handed-over hold was lost (reason %d)", lost.status);
    leash_client_free(ca);
    leash_client_free(cb);
    fp_stop(&p);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

static void close_cb(int status, void *arg) {
    *(int *)arg = status == LEASH_OK ? 1 : 2;
}

/* leash_client_close with a queued waiter: is its place given up before
 * the connections close? Else the dead place gets the next grant. */
TEST(close_with_a_queued_waiter_leaves_no_place) {
    test_redis r;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *ca, *cb;
    leash_lock *a, *b;
    fx_result acq = {0};
    fkeys k;
    int closed = 0;
    char tok[LEASH__TOKEN_LEN + 1];

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    ca = fx_client(loop, &r, 3000);
    cb = fx_client(loop, &r, 3000);
    fx_wait_connected(loop, ca, 3000);
    fx_wait_connected(loop, cb, 3000);
    a = leash_fair_lock_new(ca, "cl");
    b = leash_fair_lock_new(cb, "cl");
    keys_of(b, &k);
    CHECK_EQ_INT(fx_acquire_sync(loop, a, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(b, 10000, fx_acquire_cb, &acq), LEASH_OK);
    test_run_for(loop, 100);
    memcpy(tok, b->hold.token, sizeof tok);
    CHECK(hexists(&r, &k, 'q', tok) == 1);
    CHECK_EQ_INT(leash_client_close(cb, close_cb, &closed), LEASH_OK);
    fx_run_until_flag(loop, &closed, 2000);
    fprintf(stderr, "closed %d; place left in Redis: %lld\n", closed, hexists(&r, &k, 'q', tok));
    CHECK_EQ_INT(fx_release_sync(loop, a, 2000), LEASH_OK);
    fprintf(stderr, "after a's release: dead token holds: %lld\n", hexists(&r, &k, 'h', tok));
    CHECK_MSG(hexists(&r, &k, 'h', tok) == 0 && hexists(&r, &k, 'q', tok) == 0,
              "the closed client's waiter keeps a place / got the lock");
    leash_client_free(ca);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/* leash_client_free with a queued waiter. */
TEST(free_with_a_queued_waiter_leaves_no_place) {
    test_redis r;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *ca, *cb;
    leash_lock *a, *b;
    fx_result acq = {0};
    fkeys k;
    char tok[LEASH__TOKEN_LEN + 1];

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    ca = fx_client(loop, &r, 3000);
    cb = fx_client(loop, &r, 3000);
    fx_wait_connected(loop, ca, 3000);
    fx_wait_connected(loop, cb, 3000);
    a = leash_fair_lock_new(ca, "fr");
    b = leash_fair_lock_new(cb, "fr");
    keys_of(b, &k);
    CHECK_EQ_INT(fx_acquire_sync(loop, a, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(b, 10000, fx_acquire_cb, &acq), LEASH_OK);
    test_run_for(loop, 100);
    memcpy(tok, b->hold.token, sizeof tok);
    CHECK(hexists(&r, &k, 'q', tok) == 1);
    leash_client_free(cb);
    test_run_for(loop, 100);
    fprintf(stderr, "after free; place left in Redis: %lld\n", hexists(&r, &k, 'q', tok));
    CHECK_EQ_INT(fx_release_sync(loop, a, 2000), LEASH_OK);
    fprintf(stderr, "after a's release: dead token holds: %lld\n", hexists(&r, &k, 'h', tok));
    CHECK_MSG(hexists(&r, &k, 'h', tok) == 0 && hexists(&r, &k, 'q', tok) == 0,
              "the freed client's waiter keeps a place / got the lock");
    leash_client_free(ca);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/* ---- stress: exclusion across clients, some behind slow proxies ---- */
#define SH 24
typedef struct shandle {
    leash_lock *l;
    char mode;
    int inside, ci;
    ev_timer t;
    struct ev_loop *loop;
} shandle;
static int s_writers, s_readers, s_permits, s_viol, s_losts, s_grants, s_fail, s_stop;
static int s_max_permits, s_wci;
static void s_go(shandle *h);
static void s_enter(shandle *h) {
    h->inside = 1;
    s_grants++;
    if (h->mode == 'w' || h->mode == 'f') {
        if (s_writers || s_readers)
            s_viol++;
        s_writers++;
        s_wci = h->ci;
    } else if (h->mode == 'r') {
        if (s_writers) {
            s_viol++;
            fprintf(stderr, "reader of client %d in while a writer of client %d holds\n", h->ci,
                    s_wci);
        }
        s_readers++;
    } else {
        if (s_permits >= s_max_permits)
            s_viol++;
        s_permits++;
    }
}
static void s_leave(shandle *h) {
    if (!h->inside)
        return;
    h->inside = 0;
    if (h->mode == 'w' || h->mode == 'f')
        s_writers--;
    else if (h->mode == 'r')
        s_readers--;
    else
        s_permits--;
}
static void s_lost(leash_lock *l, int reason, void *arg) {
    shandle *h = arg;
    (void)l;
    fprintf(stderr, "lost %c reason %d\n", h->mode, reason);
    s_losts++;
    s_leave(h);
    ev_timer_stop(h->loop, &h->t);
    ev_timer_set(&h->t, 0.001, 0);
    ev_timer_start(h->loop, &h->t);
}
static void s_rel_cb(leash_lock *l, int status, void *arg) {
    (void)l;
    (void)status;
    (void)arg;
}
static void s_timer(struct ev_loop *loop, ev_timer *t, int revents) {
    shandle *h = (shandle *)((char *)t - offsetof(shandle, t));
    (void)loop;
    (void)revents;
    if (h->inside) {
        s_leave(h);
        leash_release(h->l, s_rel_cb, h);
    }
    if (!s_stop)
        s_go(h);
}
static void s_acq_cb(leash_lock *l, int status, void *arg) {
    shandle *h = arg;
    (void)l;
    if (status == LEASH_OK) {
        if (leash_valid_ms(h->l) <= 0)
            fprintf(stderr, "granted with valid_ms 0\n");
        s_enter(h);
        ev_timer_set(&h->t, (rand() % 15) / 1000.0, 0);
    } else {
        if (status != LEASH_ETIMEDOUT) {
            s_fail++;
            fprintf(stderr, "acquire %c: %s\n", h->mode, leash_status_name(status));
        }
        ev_timer_set(&h->t, (rand() % 5) / 1000.0, 0);
    }
    ev_timer_start(h->loop, &h->t);
}
static void s_go(shandle *h) {
    int rc = leash_acquire(h->l, 300 + rand() % 2000, s_acq_cb, h);
    if (rc != LEASH_OK) {
        fprintf(stderr, "acquire call %c: %s\n", h->mode, leash_status_name(rc));
        ev_timer_set(&h->t, 0.01, 0);
        ev_timer_start(h->loop, &h->t);
    }
}
static void stress(int kind, int seconds) {
    test_redis r;
    fault_proxy p1, p2;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *c[3];
    static shandle hs[SH];
    int i;
    int64_t end;

    s_writers = s_readers = s_permits = s_viol = s_losts = s_grants = s_fail = s_stop = 0;
    s_max_permits = 3;
    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(fp_start(&p1, r.port), 0);
    CHECK_EQ_INT(fp_start(&p2, r.port), 0);
    c[0] = fx_fault_client(loop, r.port, 600);
    c[1] = fx_fault_client(loop, p1.port, 600);
    c[2] = fx_fault_client(loop, p2.port, 600);
    for (i = 0; i < 3; i++)
        fx_wait_connected(loop, c[i], 3000);
    CHECK_EQ_INT(fp_delay(&p1, FP_CMD, FP_DOWN, 30), 0);
    CHECK_EQ_INT(fp_delay(&p2, FP_SUB, FP_DOWN, 30), 0);
    for (i = 0; i < SH; i++) {
        shandle *h = &hs[i];
        memset(h, 0, sizeof(*h));
        h->loop = loop;
        h->ci = i % 3;
        ev_timer_init(&h->t, s_timer, 0, 0);
        if (kind == 'f') {
            h->mode = 'f';
            h->l = leash_fair_lock_new(c[i % 3], "st");
        } else if (kind == 's') {
            h->mode = 's';
            h->l = leash_semaphore_new(c[i % 3], "st", 3);
        } else if (i % 4 == 0) {
            h->mode = 'w';
            h->l = leash_write_lock_new(c[i % 3], "st");
        } else {
            h->mode = 'r';
            h->l = leash_read_lock_new(c[i % 3], "st");
        }
        CHECK(h->l != NULL);
        leash_on_lost(h->l, s_lost, h);
        s_go(h);
    }
    end = test_now_ms() + seconds * 1000;
    while (test_now_ms() < end)
        ev_run(loop, EVRUN_ONCE);
    s_stop = 1;
    fprintf(stderr, "kind %c: grants %d violations %d losts %d failures %d\n", kind, s_grants,
            s_viol, s_losts, s_fail);
    for (i = 0; i < SH; i++)
        ev_timer_stop(loop, &hs[i].t);
    for (i = 0; i < 3; i++)
        leash_client_free(c[i]);
    CHECK_EQ_INT(s_viol, 0);
    CHECK_EQ_INT(s_losts, 0);
    fp_stop(&p1);
    fp_stop(&p2);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}
TEST(stress_fair) {
    stress('f', 10);
}
TEST(stress_rw) {
    stress('r', 10);
}
TEST(stress_sem) {
    stress('s', 10);
}

/* A non-head waiter whose handoff message is lost (a silent subscriber
 * connection) never learns it holds: its place renewals answer 1 (the
 * token is a holder), taken as "place renewed"; its TTL wake is FOREVER. */
TEST(lost_handoff_message_strands_a_non_head_waiter_that_keeps_the_lock) {
    test_redis r;
    fault_proxy p;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *ca, *cb, *cc;
    leash_lock *a, *b, *cl;
    fx_result acqb = {0}, acqc = {0};
    fkeys k;
    char tok[LEASH__TOKEN_LEN + 1];
    long long s0;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(fp_start(&p, r.port), 0);
    ca = fx_fault_client(loop, r.port, 900);
    cc = fx_fault_client(loop, r.port, 900);
    cb = fx_fault_client(loop, p.port, 900);
    fx_wait_connected(loop, ca, 3000);
    fx_wait_connected(loop, cb, 3000);
    fx_wait_connected(loop, cc, 3000);
    a = leash_fair_lock_new(ca, "lh");
    cl = leash_fair_lock_new(cc, "lh");
    b = leash_fair_lock_new(cb, "lh");
    keys_of(b, &k);
    CHECK_EQ_INT(fx_acquire_sync(loop, a, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(cl, 20000, fx_acquire_cb, &acqc), LEASH_OK);
    test_run_for(loop, 100);
    CHECK_EQ_INT(leash_acquire(b, 20000, fx_acquire_cb, &acqb), LEASH_OK);
    test_run_for(loop, 200);
    memcpy(tok, b->hold.token, sizeof tok);
    CHECK(hexists(&r, &k, 'q', tok) == 1);
    /* b's subscriber connection goes silent (half-open). */
    CHECK_EQ_INT(fp_blackhole(&p, FP_SUB, FP_DOWN, 1), 0);
    CHECK_EQ_INT(fx_release_sync(loop, a, 2000), LEASH_OK);
    fx_run_until(loop, &acqc, 2000);
    CHECK_EQ_INT(acqc.status, LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(loop, cl, 2000), LEASH_OK);
    s0 = expiry(&r, &k, 'h', tok);
    fprintf(stderr, "b holds in Redis: %lld (expiry %lld)\n", hexists(&r, &k, 'h', tok), s0);
    test_run_for(loop, 4000);
    fprintf(
        stderr,
        "4 s later: b's callback %d, b holds in Redis: %lld, expiry moved by %lld ms, state %s\n",
        acqb.calls, hexists(&r, &k, 'h', tok), expiry(&r, &k, 'h', tok) - s0,
        leash__mutex.state_name(b->state));
    CHECK_MSG(acqb.calls == 1, "b holds the lock in Redis (renewing it) and was never told");
    leash_client_free(ca);
    leash_client_free(cb);
    leash_client_free(cc);
    fp_stop(&p);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/*
 * A let-in message that comes late (its bytes held on the way, as TCP
 * retransmits them after a partition) names a hold that ended long ago:
 * the waiter was let in while it could not hear Redis, the hold ran out
 * unrenewed, another took the lock, and the waiter's attempt queued the
 * same token again. The message must not make it a holder beside the
 * new one: its place's deadline is that of the new place, not of the
 * hold the message names.
 */
static void late_let_in(int step_back_ms) {
    test_redis r;
    test_redis_config cfg;
    fault_proxy p;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *ca, *cb, *cc;
    leash_lock *a, *b, *cl;
    fx_result acqb = {0};
    fkeys k;
    char tok[LEASH__TOKEN_LEN + 1];
    int64_t end;

    memset(&cfg, 0, sizeof(cfg));
    cfg.clock_shift_ms = step_back_ms > 0 ? 1 : 0;
    CHECK_EQ_INT(test_redis_start(&r, &cfg), 0);
    CHECK_EQ_INT(fp_start(&p, r.port), 0);
    ca = fx_fault_client(loop, r.port, 900);
    cc = fx_fault_client(loop, r.port, 900);
    cb = fx_fault_client(loop, p.port, 900);
    fx_wait_connected(loop, ca, 3000);
    fx_wait_connected(loop, cb, 3000);
    fx_wait_connected(loop, cc, 3000);
    a = leash_fair_lock_new(ca, "late");
    cl = leash_fair_lock_new(cc, "late");
    b = leash_fair_lock_new(cb, "late");
    keys_of(b, &k);
    CHECK_EQ_INT(fx_acquire_sync(loop, a, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(b, 30000, fx_acquire_cb, &acqb), LEASH_OK);
    test_run_for(loop, 200);
    memcpy(tok, b->hold.token, sizeof tok);
    CHECK(hexists(&r, &k, 'q', tok) == 1);
    /* b hears nothing: its let-in message waits on the way, its commands
     * go nowhere. */
    CHECK_EQ_INT(fp_stall(&p, FP_SUB, FP_DOWN, 1), 0);
    CHECK_EQ_INT(fp_blackhole(&p, FP_CMD, FP_BOTH, 1), 0);
    CHECK_EQ_INT(fx_release_sync(loop, a, 2000), LEASH_OK);
    CHECK(hexists(&r, &k, 'h', tok) == 1); /* b was let in, in Redis */
    /* Its hold runs out unrenewed (lease 900 ms); cl takes the lock. */
    test_run_for(loop, 1300);
    CHECK_EQ_INT(fx_acquire_sync(loop, cl, 0, 3000), LEASH_OK);
    CHECK(hexists(&r, &k, 'h', tok) == 0);
    /* The server's clock may step back by more than a lease: the new
     * place is written at a time before the grant the message names. */
    if (step_back_ms > 0)
        CHECK_EQ_INT(test_redis_step_clock(&r, -step_back_ms), 0);
    /* b's attempt gets through and queues the same token again. */
    CHECK_EQ_INT(fp_blackhole(&p, FP_CMD, FP_BOTH, 0), 0);
    end = test_now_ms() + 5000 + TEST_SLACK_MS;
    while (hexists(&r, &k, 'q', tok) != 1 && test_now_ms() < end)
        test_run_for(loop, 5);
    CHECK_MSG(hexists(&r, &k, 'q', tok) == 1, "b's token was not queued again");
    test_run_for(loop, 100);
    CHECK_EQ_INT(acqb.calls, 0);
    /* Now the old let-in message arrives. */
    CHECK_EQ_INT(fp_stall(&p, FP_SUB, FP_DOWN, 0), 0);
    test_run_for(loop, 300);
    fprintf(stderr,
            "after the late message: b's callback %d (status %d), b held %d fence %llu; "
            "cl held %d fence %llu\n",
            acqb.calls, acqb.status, leash_held(b), (unsigned long long)leash_fence(b),
            leash_held(cl), (unsigned long long)leash_fence(cl));
    /* Told it holds, b would write with a fence below cl's while cl
     * holds: mutual exclusion broken (until a renewal tells it). */
    CHECK_MSG(acqb.calls == 0, "b was let in (fence %llu) while cl holds (fence %llu)",
              (unsigned long long)leash_fence(b), (unsigned long long)leash_fence(cl));
    CHECK(leash_held(cl));
    CHECK_EQ_INT(fx_release_sync(loop, cl, 2000), LEASH_OK);
    fx_run_until(loop, &acqb, 3000 + TEST_SLACK_MS);
    CHECK_EQ_INT(acqb.status, LEASH_OK);
    CHECK(leash_fence(b) > leash_fence(cl));
    leash_client_free(ca);
    leash_client_free(cb);
    leash_client_free(cc);
    fp_stop(&p);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

TEST(late_let_in_message_after_a_requeue_is_no_hold) {
    late_let_in(0);
}

/* As above, with the server's clock stepped back 5 s (more than the
 * lease) after the hold ran out: the place is written with TIME before
 * the message's fence, which must still count as older than the place. */
TEST(late_let_in_message_after_a_clock_step_back_is_no_hold) {
    late_let_in(5000);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(place_renewal_answered_after_handoff_loses_the_hold),
        TEST_CASE(close_with_a_queued_waiter_leaves_no_place),
        TEST_CASE(free_with_a_queued_waiter_leaves_no_place),
        TEST_CASE(lost_handoff_message_strands_a_non_head_waiter_that_keeps_the_lock),
        TEST_CASE(late_let_in_message_after_a_requeue_is_no_hold),
        TEST_CASE(late_let_in_message_after_a_clock_step_back_is_no_hold),
        TEST_CASE_T(stress_fair, 60),
        TEST_CASE_T(stress_rw, 60),
        TEST_CASE_T(stress_sem, 60),
        {0},
    };
    return test_main(argc, argv, cases);
}
