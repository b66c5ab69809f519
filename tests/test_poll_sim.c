/* SPDX-License-Identifier: MIT */
/*
 * Waiting without pub/sub (docs/how-it-works.md "Waiting without pub/sub") on the
 * simulated Redis of support/sim.h, for what a real server cannot be made
 * to do on demand: a proxy that closes the connection on SUBSCRIBE (as
 * twemproxy does for a command it does not support), a server whose
 * subscriber connection breaks a few times, and a holder that renews
 * forever while four handles wait.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leash/leash.h>

#include "check.h"
#include "failalloc.h"
#include "route/node.h"
#include "sim_fixture.h"

static sim *S;
static leash_client *C;

/* A client with the default reconnect backoff and a long lease. */
static void up(int pubsub) {
    leash_options o;

    failalloc_reset();
    S = sim_new();
    sim_options(S, &o);
    o.lease_ms = 30000;
    o.reconnect_min_ms = 50;
    o.reconnect_max_ms = 2000;
    o.pubsub = pubsub;
    C = simfx_client(S, &o);
    sim_run(S);
}

static void down(void) {
    sim_run(S);
    leash_client_free(C);
    CHECK_EQ_INT(sim_timers_alive(S), 0);
    sim_free(S);
}

static uint64_t servers_polling(void) {
    leash_stats st;

    leash_client_stats(C, &st);
    return st.servers_polling;
}

/* The SUBSCRIBEs a proxy closed and the attempts a waiter sent over ms of
 * virtual time, with the holder's remaining TTL shrinking from ttl. A
 * SUBSCRIBE is closed while closes_left lasts, then confirmed. */
typedef struct proxy_run {
    int closes, confirms, attempts;
} proxy_run;

static proxy_run run_proxy(int closes_left, int ms, long long ttl) {
    proxy_run r = {0, 0, 0};
    int t, i;

    for (t = 0; t < ms; t += 10) {
        for (i = 0; i < sim_conn_count(S); i++) {
            sim_conn *c = sim_conn_at(S, i);
            sim_cmd *cmd;
            if (!sim_conn_live(c) || sim_conn_pending(c) == 0)
                continue;
            cmd = sim_conn_cmd(c, 0);
            if (sim_cmd_is(cmd, "SUBSCRIBE") && closes_left > 0) {
                closes_left--;
                r.closes++;
                sim_close(c);
            } else if (sim_cmd_is(cmd, "SUBSCRIBE")) {
                r.confirms++;
                CHECK_EQ_INT(sim_reply_auto(c), 0);
            } else if (simfx_script_of(cmd) == LS_ACQUIRE) {
                r.attempts++;
                simfx_busy(cmd, ttl - t > 1 ? ttl - t : 1);
            }
        }
        sim_run(S);
        sim_advance(S, 10);
    }
    return r;
}

/* A proxy that closes the connection on every SUBSCRIBE: after a few
 * closes in a row, each right after the SUBSCRIBE went out on a connection
 * whose handshake succeeded, the client takes it as a refusal and polls,
 * logged once and counted, instead of reconnecting its subscriber
 * connection forever while its waiter sleeps until the holder's TTL. */
TEST(subscribe_closed_by_a_proxy_falls_back_to_polling) {
    simfx_rec a = {0};
    leash_lock *l;
    proxy_run r;

    up(LEASH_PUBSUB_AUTO);
    sim_set_auto(S, SIM_AUTO_SUBSCRIBE, 0);
    l = leash_lock_new(C, "x");
    CHECK_EQ_INT(leash_acquire(l, 20000, simfx_on_acquired, &a), LEASH_OK);
    r = run_proxy(1000000, 10000, 30000);
    fprintf(stderr, "in 10 s: %d SUBSCRIBEs closed, %d attempts\n", r.closes, r.attempts);
    CHECK_MSG(r.closes <= 3, "a reconnect loop: %d SUBSCRIBEs closed in 10 s", r.closes);
    CHECK_MSG(r.attempts >= 5, "the waiter did not poll: %d attempts in 10 s", r.attempts);
    CHECK_EQ_INT((int)servers_polling(), 1);
    CHECK_EQ_INT(a.calls, 0);
    leash_lock_free(l);
    down();
}

/* A network that breaks the subscriber connection twice right after its
 * SUBSCRIBE, then lets it through: the server is healthy, pub/sub stays
 * (the waiter does not poll); and a confirmation starts the count over, so
 * two more such breaks later do not make it poll either. */
TEST(subscriber_connection_flaps_keep_pubsub) {
    simfx_rec a = {0};
    leash_lock *l;
    proxy_run r;
    int i;

    up(LEASH_PUBSUB_AUTO);
    sim_set_auto(S, SIM_AUTO_SUBSCRIBE, 0);
    l = leash_lock_new(C, "x");
    CHECK_EQ_INT(leash_acquire(l, 20000, simfx_on_acquired, &a), LEASH_OK);
    r = run_proxy(2, 5000, 30000);
    CHECK_EQ_INT(r.closes, 2);
    CHECK_EQ_INT(r.confirms, 1);
    CHECK_EQ_INT((int)servers_polling(), 0);
    /* Subscribed: the waiter sleeps (its tries after each reconnect and at
     * the confirmation only). */
    CHECK_MSG(r.attempts <= 4, "%d attempts while subscribed", r.attempts);
    /* The subscriber connection is lost again (a server's CLIENT KILL),
     * and the next two SUBSCRIBEs are broken too. */
    for (i = 0; i < sim_conn_count(S); i++)
        if (sim_conn_live(sim_conn_at(S, i)) && sim_conn_role(sim_conn_at(S, i)) == SIM_ROLE_SUB)
            sim_close(sim_conn_at(S, i));
    r = run_proxy(2, 5000, 25000);
    CHECK_EQ_INT(r.closes, 2);
    CHECK_EQ_INT(r.confirms, 1);
    CHECK_EQ_INT((int)servers_polling(), 0);
    CHECK_EQ_INT(a.calls, 0);
    leash_lock_free(l);
    down();
}

/* A server that leaves SUBSCRIBE unanswered (slow, or a link that lost
 * it): the client breaks the connection itself after command_timeout_ms,
 * again and again; that is no refusal, pub/sub stays. */
TEST(unanswered_subscribes_keep_pubsub) {
    simfx_rec a = {0};
    leash_lock *l;
    leash_stats st;
    int t;

    up(LEASH_PUBSUB_AUTO);
    sim_set_auto(S, SIM_AUTO_SUBSCRIBE, 0);
    l = leash_lock_new(C, "x");
    CHECK_EQ_INT(leash_acquire(l, 20000, simfx_on_acquired, &a), LEASH_OK);
    sim_run(S);
    simfx_busy(simfx_oldest(S, LS_ACQUIRE), 30000);
    for (t = 0; t < 10000; t += 10) {
        sim_run(S);
        sim_advance(S, 10);
    }
    leash_client_stats(C, &st);
    CHECK_MSG(st.subscriptions >= LEASH__SUB_CLOSES_REFUSED + 1, "%d SUBSCRIBEs written",
              (int)st.subscriptions);
    CHECK_EQ_INT((int)st.servers_polling, 0);
    leash_lock_free(l);
    down();
}

/* One asker per lock name and process while polling, also while a live
 * holder renews (its pttl stays ~1 s): the waiters behind the head sleep
 * on while the head's polls find the lock held. */
TEST(polling_one_asker_per_name_while_the_holder_renews) {
    simfx_rec a[4];
    leash_lock *l[4];
    char tok[4][40];
    int per[4] = {0}, other = 0, t, i, k, n = 0;

    up(LEASH_PUBSUB_OFF);
    memset(a, 0, sizeof(a));
    memset(tok, 0, sizeof(tok));
    for (i = 0; i < 4; i++) {
        l[i] = leash_lock_new(C, "x");
        CHECK_EQ_INT(leash_acquire(l[i], 20000, simfx_on_acquired, &a[i]), LEASH_OK);
    }
    for (t = 0; t < 10000; t += 10) {
        sim_cmd *cmd;
        sim_run(S);
        while ((cmd = simfx_pending(S, LS_ACQUIRE)) != NULL &&
               sim_conn_cmd(sim_cmd_conn(S), 0) == cmd) {
            const char *tk = sim_cmd_arg(cmd, 4);
            for (k = 0; k < n && strcmp(tok[k], tk) != 0; k++)
                ;
            if (k == n && n < 4)
                snprintf(tok[n++], sizeof(tok[0]), "%s", tk);
            if (k < 4)
                per[k]++;
            else
                other++;
            simfx_busy(cmd, 1000); /* the holder renews: ~1 s left, always */
            sim_run(S);
        }
        sim_advance(S, 10);
    }
    fprintf(stderr, "attempts in 10 s per waiter: %d %d %d %d (others %d)\n", per[0], per[1],
            per[2], per[3], other);
    CHECK_EQ_INT(other, 0);
    CHECK_MSG(per[0] >= 10, "the head polled %d times in 10 s", per[0]);
    CHECK_MSG(per[1] + per[2] + per[3] <= 3, "the waiters behind the head asked %d times in 10 s",
              per[1] + per[2] + per[3]);
    for (i = 0; i < 4; i++)
        leash_lock_free(l[i]);
    down();
}

/* The mark argument of the oldest acquire on the wire (after the key,
 * the token, the lease and the count; sim_options's locks are not fenced). */
static const char *attempt_mark(void) {
    sim_cmd *cmd = simfx_oldest(S, LS_ACQUIRE);

    CHECK(cmd != NULL && cmd->argc > 7);
    return sim_cmd_arg(cmd, 7);
}

/* A waiter marks the lock as waited on (its releases and renewals then
 * publish) only when it listens: a polling waiter hears no message. */
static void mark_case(int pubsub, const char *want) {
    simfx_rec a = {0};
    leash_lock *l;

    up(pubsub);
    l = leash_lock_new(C, "x");
    CHECK_EQ_INT(leash_acquire(l, 20000, simfx_on_acquired, &a), LEASH_OK);
    sim_run(S);
    CHECK_STR_EQ(attempt_mark(), want);
    simfx_busy(simfx_oldest(S, LS_ACQUIRE), 30);
    sim_run(S);
    sim_advance(S, 40);
    sim_run(S);
    CHECK_STR_EQ(attempt_mark(), want); /* its poll, or its try at the TTL */
    leash_lock_free(l);
    down();
}

TEST(polling_waiters_do_not_mark) {
    mark_case(LEASH_PUBSUB_OFF, "0");
}
TEST(listening_waiters_mark) {
    mark_case(LEASH_PUBSUB_AUTO, "1");
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(subscribe_closed_by_a_proxy_falls_back_to_polling),
        TEST_CASE(subscriber_connection_flaps_keep_pubsub),
        TEST_CASE(unanswered_subscribes_keep_pubsub),
        TEST_CASE(polling_one_asker_per_name_while_the_holder_renews),
        TEST_CASE(polling_waiters_do_not_mark),
        TEST_CASE(listening_waiters_mark),
        {0},
    };
    return test_main(argc, argv, cases);
}
