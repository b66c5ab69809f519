/* SPDX-License-Identifier: MIT */
/* Waiting without pub/sub (docs/how-it-works.md "Waiting without pub/sub"): servers that
 * refuse SUBSCRIBE (an ACL user without channels or without the pub/sub
 * commands, SUBSCRIBE renamed away) and the option LEASH_PUBSUB_OFF. The
 * waiters poll: a release is found within the backoff, a dead holder at its
 * TTL; one asker per lock name and client; the local FIFO and the family's
 * order stay; a refusal is logged once and counted, and never becomes a
 * reconnect loop. One server (and Redlock: the first refusal polls), libev. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "prim/lock.h"

#define USER "poller"
#define PASS "poll-pw"

typedef struct world {
    test_redis r;
    fx_loop *loop;
} world;

/* A server whose user USER has the ACL rule `rule` (NULL: none), with more
 * config lines `extra` (NULL: none). */
static void up(world *w, const char *rule, const char *extra) {
    test_redis_config cfg;
    char acl[256];

    memset(&cfg, 0, sizeof(cfg));
    if (rule != NULL) {
        snprintf(acl, sizeof(acl), USER " on >" PASS " %s", rule);
        cfg.acl_user = acl;
    }
    cfg.extra = extra;
    memset(&w->r, 0, sizeof(w->r));
    CHECK_EQ_INT(test_redis_start(&w->r, &cfg), 0);
    w->loop = fx_loop_new();
    fx_log_clear();
}

static void down(world *w) {
    fx_loop_free(w->loop);
    test_redis_stop(&w->r);
}

/* A client of w's server, as USER when user is set. */
static leash_client *client(world *w, int user, int pubsub, int64_t lease_ms) {
    leash_options o;
    leash_client *c;

    fx_options(&o, &w->r, lease_ms);
    if (user) {
        o.username = USER;
        o.password = PASS;
    }
    o.pubsub = pubsub;
    c = fx_client_opts(w->loop, &o);
    fx_wait_connected(w->loop, c, 5000);
    return c;
}

static void run_until_state(world *w, leash_lock *l, const char *state) {
    int i;
    for (i = 0; i < 1000 && strcmp(leash__lock_state_name(l), state) != 0; i++)
        fx_run_for(w->loop, 2);
    CHECK_MSG(strcmp(leash__lock_state_name(l), state) == 0, "state %s, not %s",
              leash__lock_state_name(l), state);
}

/* Connections the server accepted so far (INFO stats). */
static long long accepted(world *w) {
    redisReply *rep = test_redis_cmd(&w->r, "INFO stats");
    const char *p;
    long long n;

    CHECK(rep != NULL && rep->type == REDIS_REPLY_STRING);
    p = strstr(rep->str, "total_connections_received:");
    CHECK(p != NULL);
    n = atoll(p + strlen("total_connections_received:"));
    freeReplyObject(rep);
    return n;
}

/* How many times the captured log holds needle. */
static int log_count(const char *needle) {
    const char *p = fx_log_text();
    int n = 0;

    while ((p = strstr(p, needle)) != NULL) {
        n++;
        p += strlen(needle);
    }
    return n;
}

/* The ':' in the value of a mutex's key. */
static int colons_of(world *w, const char *key) {
    redisReply *rep = test_redis_cmd(&w->r, "GET %s", key);
    const char *p;
    int n = 0;

    CHECK(rep != NULL && rep->type == REDIS_REPLY_STRING);
    for (p = rep->str; *p != '\0'; p++)
        n += *p == ':';
    freeReplyObject(rep);
    return n;
}

static long long scripts(world *w) {
    return test_redis_calls(&w->r, "evalsha") + test_redis_calls(&w->r, "eval");
}

static int64_t release_done_at;
static void note_release(leash_lock *l, int status, void *arg) {
    (void)l;
    (void)arg;
    CHECK_EQ_INT(status, LEASH_OK);
    release_done_at = test_now_ms();
}

static void release_now(world *w, leash_lock *l) {
    release_done_at = 0;
    CHECK_EQ_INT(leash_release(l, note_release, NULL), LEASH_OK);
    while (release_done_at == 0)
        fx_run_for(w->loop, 1);
}

/* The body of the refusal cases: a holder of another client holds "p"
 * (a fixed lease of 10 s: it says nothing while it holds), the waiter's
 * client (pubsub as given) is refused its subscription, polls, and gets
 * the lock within the backoff of the release, not at the holder's TTL. */
static void waiter_polls_after_refusal(world *w, int user, int pubsub) {
    leash_client *hc, *wc;
    leash_lock *holder, *waiter;
    fx_result got = {0};
    leash_stats st;
    long long conns;

    hc = client(w, user, LEASH_PUBSUB_AUTO, 10000);
    wc = client(w, user, pubsub, 10000);
    holder = leash_lock_new(hc, "p");
    waiter = leash_lock_new(wc, "p");
    CHECK_EQ_INT(leash_lock_set_fixed_lease(holder, 10000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w->loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(waiter, 30000, fx_acquire_cb, &got), LEASH_OK);
    run_until_state(w, waiter, "PARKED");

    /* Asleep and polling: no reconnect, no second subscription. */
    conns = accepted(w);
    fx_run_for(w->loop, 1500);
    CHECK_EQ_INT(accepted(w) - conns, 0);
    leash_client_stats(wc, &st);
    CHECK_EQ_INT((long long)st.reconnects, 0);
    CHECK_EQ_INT((long long)st.servers_polling, 1);
    CHECK_MSG(st.polls >= 3, "%llu polls in 1.5 s", (unsigned long long)st.polls);
    CHECK_MSG(st.subscriptions <= 1, "%llu subscriptions", (unsigned long long)st.subscriptions);
    CHECK_EQ_INT(log_count("waiters poll instead"), 1);
    CHECK_EQ_INT(got.calls, 0);

    release_now(w, holder);
    fx_run_until(w->loop, &got, 3000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_MSG(got.at_ms - release_done_at <= LEASH_POLL_MAX_MS + TEST_SLACK_MS,
              "granted %lld ms after the release", (long long)(got.at_ms - release_done_at));
    /* The waiter's own release (its key is marked: it publishes, or tries). */
    CHECK_EQ_INT(fx_release_sync(w->loop, waiter, 3000), LEASH_OK);
    CHECK_EQ_INT(log_count("waiters poll instead"), 1);

    leash_lock_free(holder);
    leash_lock_free(waiter);
    leash_client_free(hc);
    leash_client_free(wc);
}

TEST(acl_without_channels_falls_back_to_polling) {
    world w;

    if (test_redis_version() > 0 && test_redis_version() < 60200) {
        printf("  (skipped: ACL channel rules are Redis 6.2)\n");
        return;
    }
    up(&w, "~* +@all resetchannels", NULL);
    waiter_polls_after_refusal(&w, 1, LEASH_PUBSUB_AUTO);
    down(&w);
}

TEST(acl_without_pubsub_commands_falls_back_to_polling) {
    world w;

    /* PUBLISH stays (the holders' scripts publish); SUBSCRIBE does not. */
    up(&w, "~* &* +@all -subscribe -ssubscribe -psubscribe", NULL);
    waiter_polls_after_refusal(&w, 1, LEASH_PUBSUB_CLASSIC);
    down(&w);
}

TEST(renamed_subscribe_falls_back_to_polling) {
    world w;

    up(&w, NULL, "rename-command SUBSCRIBE \"\"\nrename-command SSUBSCRIBE \"\"");
    waiter_polls_after_refusal(&w, 0, LEASH_PUBSUB_AUTO);
    down(&w);
}

/* LEASH_PUBSUB_OFF: no subscriber connection at all, and the same waits. */
TEST(pubsub_off_polls_without_a_subscriber_connection) {
    world w;
    leash_client *hc, *wc;
    leash_lock *holder, *waiter;
    fx_result got = {0};
    leash_stats st;
    long long conns;

    up(&w, NULL, NULL);
    hc = client(&w, 0, LEASH_PUBSUB_AUTO, 10000);
    conns = accepted(&w);
    wc = client(&w, 0, LEASH_PUBSUB_OFF, 10000);
    fx_run_for(w.loop, 200);
    CHECK_EQ_INT(accepted(&w) - conns, 1); /* the command connection only */
    holder = leash_lock_new(hc, "off");
    waiter = leash_lock_new(wc, "off");
    CHECK_EQ_INT(leash_lock_set_fixed_lease(holder, 10000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(waiter, 30000, fx_acquire_cb, &got), LEASH_OK);
    run_until_state(&w, waiter, "PARKED");
    fx_run_for(w.loop, 1000);
    /* A poller does not queue in the key for a reservation (docs/how-it-works.md
     * "Fairness"): it could not hear it was let in within
     * LEASH_RESERVE_MS. The key is <token>:<w>:<count>:<fence> alone. */
    CHECK_EQ_INT(colons_of(&w, "leash:off"), 3);
    leash_client_stats(wc, &st);
    CHECK_EQ_INT((long long)st.subscriptions, 0);
    CHECK_EQ_INT((long long)st.servers_polling, 1);
    CHECK(st.polls >= 3);
    CHECK_EQ_INT(log_count("waiters poll instead"), 0); /* asked for: nothing to say */
    release_now(&w, holder);
    fx_run_until(w.loop, &got, 3000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_MSG(got.at_ms - release_done_at <= LEASH_POLL_MAX_MS + TEST_SLACK_MS,
              "granted %lld ms after the release", (long long)(got.at_ms - release_done_at));
    CHECK_EQ_INT(test_redis_calls(&w.r, "subscribe"), 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, waiter, 3000), LEASH_OK);
    leash_lock_free(holder);
    leash_lock_free(waiter);
    leash_client_free(hc);
    leash_client_free(wc);
    down(&w);
}

/* A holder that dies says nothing: the poller takes the lock when its key
 * expires (the TTL from the last answer), not a backoff later. The holder
 * is abandoned (leash_lock_abandon), as a crashed one: a handle that lives
 * on gives its key back at its local deadline, a little before the key
 * expires, and a poll then took the lock 8 ms "early" (ASan, one run). */
TEST(poller_takes_a_dead_holders_lock_at_its_ttl) {
    world w;
    leash_client *hc, *wc;
    leash_lock *holder, *waiter;
    fx_result got = {0};
    int64_t expires_at;

    up(&w, NULL, NULL);
    hc = client(&w, 0, LEASH_PUBSUB_OFF, 1500);
    wc = client(&w, 0, LEASH_PUBSUB_OFF, 1500);
    holder = leash_lock_new(hc, "dead");
    waiter = leash_lock_new(wc, "dead");
    CHECK_EQ_INT(leash_lock_set_fixed_lease(holder, 1500), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    leash_lock_abandon(holder);
    expires_at = test_now_ms() + test_redis_int(&w.r, "PTTL leash:dead");
    CHECK_EQ_INT(leash_acquire(waiter, 10000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_until(w.loop, &got, 5000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_MSG(got.at_ms >= expires_at - 5 && got.at_ms <= expires_at + TEST_SLACK_MS,
              "granted %lld ms after the holder's key expired",
              (long long)(got.at_ms - expires_at));
    CHECK_EQ_INT(fx_release_sync(w.loop, waiter, 3000), LEASH_OK);
    leash_lock_free(waiter);
    leash_client_free(hc);
    leash_client_free(wc);
    down(&w);
}

static int order[8], norder;
static void note_order(leash_lock *l, int status, void *arg) {
    CHECK_EQ_INT(status, LEASH_OK);
    order[norder++] = (int)(intptr_t)arg;
    CHECK_EQ_INT(leash_release(l, NULL, NULL), LEASH_OK);
}

/* Three waiters of one client: only the head asks, and they get the lock
 * in the order they came. */
TEST(one_asker_per_name_and_local_fifo) {
    world w;
    leash_client *hc, *wc;
    leash_lock *holder, *waiters[3];
    long long before, asked;
    int i;

    up(&w, NULL, NULL);
    hc = client(&w, 0, LEASH_PUBSUB_OFF, 10000);
    wc = client(&w, 0, LEASH_PUBSUB_OFF, 10000);
    holder = leash_lock_new(hc, "fifo");
    CHECK_EQ_INT(leash_lock_set_fixed_lease(holder, 10000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    norder = 0;
    for (i = 0; i < 3; i++) {
        waiters[i] = leash_lock_new(wc, "fifo");
        CHECK_EQ_INT(leash_acquire(waiters[i], 30000, note_order, (void *)(intptr_t)i), LEASH_OK);
        run_until_state(&w, waiters[i], "PARKED");
    }
    /* Polls of one asker in 2 s: pauses from 5 ms doubling to 250..500 ms
     * (LEASH_POLL_*): at most 6 + 2000 / 250 = 14; three askers, 40. */
    before = scripts(&w);
    fx_run_for(w.loop, 2000);
    asked = scripts(&w) - before;
    CHECK_MSG(asked >= 3 && asked <= 14, "%lld attempts in 2 s", asked);
    release_now(&w, holder);
    for (i = 0; i < 300 && norder < 3; i++)
        fx_run_for(w.loop, 10);
    CHECK_EQ_INT(norder, 3);
    CHECK_EQ_INT(order[0], 0);
    CHECK_EQ_INT(order[1], 1);
    CHECK_EQ_INT(order[2], 2);
    fx_run_for(w.loop, 50);
    for (i = 0; i < 3; i++)
        leash_lock_free(waiters[i]);
    leash_lock_free(holder);
    leash_client_free(hc);
    leash_client_free(wc);
    down(&w);
}

/* The lock family keeps its order without pub/sub: waiters of two clients
 * queue in Redis; each is let in in turn, and finds it by polling. */
static void family_order(leash_lock *(*make)(leash_client *, const char *)) {
    world w;
    leash_client *c[3];
    leash_lock *l[3];
    fx_result got[3] = {{0}};
    int i;

    up(&w, NULL, NULL);
    for (i = 0; i < 3; i++)
        c[i] = client(&w, 0, LEASH_PUBSUB_OFF, 10000);
    for (i = 0; i < 3; i++)
        l[i] = make(c[i], "fam");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l[0], 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(l[1], 30000, fx_acquire_cb, &got[1]), LEASH_OK);
    run_until_state(&w, l[1], "PARKED");
    CHECK_EQ_INT(leash_acquire(l[2], 30000, fx_acquire_cb, &got[2]), LEASH_OK);
    run_until_state(&w, l[2], "PARKED");
    fx_run_for(w.loop, 1000);
    CHECK_EQ_INT(got[1].calls + got[2].calls, 0);
    release_now(&w, l[0]);
    fx_run_until(w.loop, &got[1], 3000);
    CHECK_EQ_INT(got[1].status, LEASH_OK);
    CHECK_MSG(got[1].at_ms - release_done_at <= LEASH_POLL_MAX_MS + TEST_SLACK_MS,
              "let in %lld ms after the release", (long long)(got[1].at_ms - release_done_at));
    fx_run_for(w.loop, 600);
    CHECK_EQ_INT(got[2].calls, 0);
    release_now(&w, l[1]);
    fx_run_until(w.loop, &got[2], 3000);
    CHECK_EQ_INT(got[2].status, LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, l[2], 3000), LEASH_OK);
    for (i = 0; i < 3; i++) {
        leash_lock_free(l[i]);
        leash_client_free(c[i]);
    }
    down(&w);
}

static leash_lock *semaphore_1(leash_client *c, const char *name) {
    return leash_semaphore_new(c, name, 1);
}

TEST(fair_lock_keeps_its_order_without_pubsub) {
    family_order(leash_fair_lock_new);
}

TEST(semaphore_keeps_its_order_without_pubsub) {
    family_order(semaphore_1);
}

/* An ACL without channels refuses the family's hand-over message too: the
 * release still lets the next one in, which finds it by polling. */
TEST(fair_lock_under_an_acl_without_channels) {
    world w;
    leash_client *c[2];
    leash_lock *l[2];
    fx_result got = {0};
    int i;

    if (test_redis_version() > 0 && test_redis_version() < 60200) {
        printf("  (skipped: ACL channel rules are Redis 6.2)\n");
        return;
    }
    up(&w, "~* +@all resetchannels", NULL);
    for (i = 0; i < 2; i++) {
        c[i] = client(&w, 1, LEASH_PUBSUB_AUTO, 10000);
        l[i] = leash_fair_lock_new(c[i], "acl-fam");
    }
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l[0], 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(l[1], 30000, fx_acquire_cb, &got), LEASH_OK);
    run_until_state(&w, l[1], "PARKED");
    release_now(&w, l[0]);
    fx_run_until(w.loop, &got, 3000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, l[1], 3000), LEASH_OK);
    for (i = 0; i < 2; i++) {
        leash_lock_free(l[i]);
        leash_client_free(c[i]);
    }
    down(&w);
}

/* The wait deadline and leash_cancel end a polling wait as they end any:
 * one callback each, on time, and nothing asked after it. */
TEST(deadline_and_cancel_end_a_polling_wait) {
    world w;
    leash_client *hc, *wc;
    leash_lock *holder, *timed, *cancelled;
    fx_result t = {0}, c = {0};
    int64_t t0;
    long long before;

    up(&w, NULL, NULL);
    hc = client(&w, 0, LEASH_PUBSUB_OFF, 10000);
    wc = client(&w, 0, LEASH_PUBSUB_OFF, 10000);
    holder = leash_lock_new(hc, "end");
    timed = leash_lock_new(wc, "end");
    cancelled = leash_lock_new(wc, "end");
    CHECK_EQ_INT(leash_lock_set_fixed_lease(holder, 10000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    t0 = test_now_ms();
    CHECK_EQ_INT(leash_acquire(timed, 700, fx_acquire_cb, &t), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(cancelled, LEASH_WAIT_FOREVER, fx_acquire_cb, &c), LEASH_OK);
    run_until_state(&w, cancelled, "PARKED");
    fx_run_until(w.loop, &t, 3000);
    CHECK_EQ_INT(t.status, LEASH_ETIMEDOUT);
    CHECK_MSG(t.at_ms - t0 >= 700 && t.at_ms - t0 <= 700 + TEST_SLACK_MS, "timed out after %lld ms",
              (long long)(t.at_ms - t0));
    /* The head is gone: the one left asks on. */
    before = scripts(&w);
    fx_run_for(w.loop, 1000);
    CHECK(scripts(&w) - before >= 2);
    CHECK_EQ_INT(leash_cancel(cancelled), LEASH_OK);
    fx_run_until(w.loop, &c, 3000);
    CHECK_EQ_INT(c.status, LEASH_ECANCELED);
    fx_run_for(w.loop, 50);
    before = scripts(&w);
    fx_run_for(w.loop, 1000);
    CHECK_EQ_INT(scripts(&w) - before, 0);
    CHECK_EQ_INT(t.calls, 1);
    CHECK_EQ_INT(c.calls, 1);
    release_now(&w, holder);
    leash_lock_free(holder);
    leash_lock_free(timed);
    leash_lock_free(cancelled);
    leash_client_free(hc);
    leash_client_free(wc);
    down(&w);
}

/* Redlock (3 servers), `refusing` of which refuse SUBSCRIBE (renamed
 * away), and, with `stopped`, the first one down before the hold. The
 * first refusal makes the client poll: a release publishes only on the
 * servers where the key was marked as waited on, so no subset of the
 * subscriptions is sure to hear it. Each refusal is said once and counted,
 * nothing reconnects, and a waiter gets the lock within the backoff of its
 * release. With one server refusing and another down, fewer than a
 * majority could ever confirm a subscription: a waiter that kept pub/sub
 * would sleep until the holder's lease ran out. */
static void redlock_refusing(int refusing, int stopped) {
    test_redis s[3];
    test_redis_config cfg;
    char text[3][32];
    const char *nodes[3];
    fx_loop *loop;
    leash_options o;
    leash_client *hc, *wc;
    leash_lock *holder, *waiter;
    fx_result got = {0};
    leash_stats st;
    int i;

    for (i = 0; i < 3; i++) {
        memset(&cfg, 0, sizeof(cfg));
        if (i >= 3 - refusing)
            cfg.extra = "rename-command SUBSCRIBE \"\"";
        memset(&s[i], 0, sizeof(s[i]));
        CHECK_EQ_INT(test_redis_start(&s[i], &cfg), 0);
        snprintf(text[i], sizeof(text[i]), "127.0.0.1:%d", s[i].port);
        nodes[i] = text[i];
    }
    loop = fx_loop_new();
    fx_log_clear();
    fx_options(&o, &s[0], 10000);
    o.topology = LEASH_TOPOLOGY_REDLOCK;
    o.nodes = nodes;
    o.nodes_count = 3;
    hc = fx_client_opts(loop, &o);
    wc = fx_client_opts(loop, &o);
    fx_wait_every_server(loop, hc, 3, 5000);
    fx_wait_every_server(loop, wc, 3, 5000);
    if (stopped)
        test_redis_stop(&s[0]);
    holder = leash_lock_new(hc, "rl");
    waiter = leash_lock_new(wc, "rl");
    CHECK_EQ_INT(leash_lock_set_fixed_lease(holder, 10000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(waiter, 30000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_for(loop, 1500);
    CHECK_EQ_INT(got.calls, 0);
    leash_client_stats(wc, &st);
    CHECK_EQ_INT((long long)st.servers_polling, refusing);
    CHECK_MSG(st.polls >= 3, "%llu polls", (unsigned long long)st.polls);
    CHECK_EQ_INT((long long)st.reconnects, 0);
    CHECK_EQ_INT(log_count("Redis refused a subscription"), refusing);
    CHECK_EQ_INT(log_count("waiters poll instead"), refusing);
    release_done_at = 0;
    CHECK_EQ_INT(leash_release(holder, note_release, NULL), LEASH_OK);
    while (release_done_at == 0)
        fx_run_for(loop, 1);
    fx_run_until(loop, &got, 3000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_MSG(got.at_ms - release_done_at <= LEASH_POLL_MAX_MS + TEST_SLACK_MS,
              "granted %lld ms after the release", (long long)(got.at_ms - release_done_at));
    CHECK_EQ_INT(fx_release_sync(loop, waiter, 3000), LEASH_OK);
    leash_lock_free(holder);
    leash_lock_free(waiter);
    leash_client_free(hc);
    leash_client_free(wc);
    fx_loop_free(loop);
    for (i = 0; i < 3; i++)
        test_redis_stop(&s[i]);
}

TEST(redlock_with_a_refusing_server_polls) {
    redlock_refusing(1, 0);
}

TEST(redlock_with_a_majority_refusing_polls) {
    redlock_refusing(2, 0);
}

/* The lost wake-up of per-server polling: one server refuses, another is
 * down; the handoff comes within the backoff, not at the holder's TTL. */
TEST(redlock_with_a_refusing_and_a_stopped_server_polls) {
    redlock_refusing(1, 1);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(acl_without_channels_falls_back_to_polling),
        TEST_CASE(acl_without_pubsub_commands_falls_back_to_polling),
        TEST_CASE(renamed_subscribe_falls_back_to_polling),
        TEST_CASE(pubsub_off_polls_without_a_subscriber_connection),
        TEST_CASE(poller_takes_a_dead_holders_lock_at_its_ttl),
        TEST_CASE(one_asker_per_name_and_local_fifo),
        TEST_CASE(fair_lock_keeps_its_order_without_pubsub),
        TEST_CASE(semaphore_keeps_its_order_without_pubsub),
        TEST_CASE(fair_lock_under_an_acl_without_channels),
        TEST_CASE(deadline_and_cancel_end_a_polling_wait),
        TEST_CASE(redlock_with_a_refusing_server_polls),
        TEST_CASE(redlock_with_a_majority_refusing_polls),
        TEST_CASE(redlock_with_a_refusing_and_a_stopped_server_polls),
        {0},
    };
    return fx_main(argc, argv, cases);
}
