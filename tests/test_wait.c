/* SPDX-License-Identifier: MIT */
#define _DEFAULT_SOURCE 1 /* usleep */
/* Waiting without polling: pub/sub wakes, holder TTLs, kept wakes, and the
 * subscriber connection dying under sleeping waiters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dialect/dialect.h"
#include "fixture.h"
#include "prim/lock.h"

static void run_until_parked(fx_world *w, leash_lock *l) {
    int i;
    for (i = 0; i < 500 && strcmp(leash__lock_state_name(l), "PARKED") != 0; i++)
        fx_run_for(w->loop, 2);
    CHECK_MSG(strcmp(leash__lock_state_name(l), "PARKED") == 0, "waiter never parked (state %s)",
              leash__lock_state_name(l));
}

/* A woken waiter tries at once, or (Redlock: route.h's wake_jitter_ms)
 * after a random pause, parked until then: turns of the loop that do not
 * block, until the attempt is sent and before its answer can be read. */
static void run_until_attempting(fx_world *w, leash_lock *l) {
    int64_t end = test_now_ms() + 1000;

    while (strcmp(leash__lock_state_name(l), "PARKED") == 0 && test_now_ms() < end) {
        usleep(200);
        fx_run_nowait(w->loop);
    }
    CHECK_STR_EQ(leash__lock_state_name(l), "ATTEMPT");
}

/* What the server of a lock's key (and channel: they share a slot) was
 * asked: scripts, and subscriptions (SSUBSCRIBE, sharded, in a cluster).
 * Counted since it started; a cluster's nodes (and the Redlock servers)
 * serve every case of the program, so only differences say something.
 * With Redlock it is the first of the N servers, which sees a copy of
 * every command. */
static long long script_calls(fx_world *w, const char *key) {
    test_redis *r = fx_redis_of(w, key);
    return test_redis_calls(r, "evalsha") + test_redis_calls(r, "eval");
}

static long long sub_calls(fx_world *w, const char *key) {
    test_redis *r = fx_redis_of(w, key);
    return test_redis_calls(r, "subscribe") + test_redis_calls(r, "ssubscribe");
}

static long long unsub_calls(fx_world *w, const char *key) {
    test_redis *r = fx_redis_of(w, key);
    return test_redis_calls(r, "unsubscribe") + test_redis_calls(r, "sunsubscribe");
}

/* The commands a client sent for `refused` attempts that were not granted
 * and then one that was granted a new hold. One server, a cluster: one
 * command an attempt, refused + 1 exactly. Redlock (quorum.c's top
 * comment): an attempt is a copy to each of the N servers, one not granted
 * is given back on all N, and a new hold is N copies, whose fences agree
 * as a rule (quorum.c: one proposal). They may not when the floor of
 * some servers is above the proposal (the holder before proposed ahead of
 * this one by its error, and not all of its copies had run): then a fence
 * raise adds a copy for each granting server below the fence, fewer than
 * N. And a grant's copy may never be written: after a lease without a
 * reply that carried the server's clock (a waiter that slept), each
 * connection asks TIME before it writes a stamped command (wire/conn.h),
 * and a majority may have granted before that answer came: the copies
 * not written are dropped. The windows for refused and refused + 1 do not
 * overlap, so the number of attempts is still exact. */
static void check_sent_for_attempts(long long sent, int refused) {
#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
    const long long n = FX_REDLOCK_N;
    long long lo = 2 * n * refused + n / 2 + 1, hi = 2 * n * refused + 2 * n - 1;

    CHECK_MSG(sent >= lo && sent <= hi,
              "%lld commands for %d refused attempts and a grant: %lld..%lld", sent, refused, lo,
              hi);
#else
    CHECK_EQ_INT(sent, refused + 1);
#endif
}

/* The client's stats once a parked waiter's last attempt is done with:
 * with Redlock its give-back (sent unheard, just before parking) goes out
 * from the loop, and commands_sent counts writes; it must not count as
 * the sleeper's (under ASan it was still going out 20 ms later: 4
 * commands). Waits until the count stops moving. */
static void stats_once_settled(fx_world *w, leash_stats *st) {
    leash_client_stats(w->c, st);
#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
    for (int i = 0; i < 40; i++) {
        uint64_t before = st->commands_sent;
        fx_run_for(w->loop, 50);
        leash_client_stats(w->c, st);
        if (st->commands_sent == before)
            break;
    }
#endif
}

static int64_t release_done_at;
static void note_release(leash_lock *l, int status, void *arg) {
    (void)l;
    (void)arg;
    CHECK_EQ_INT(status, LEASH_OK);
    release_done_at = test_now_ms();
}

TEST(waiter_is_woken_by_the_release_and_sends_nothing_while_asleep) {
    fx_world w;
    leash_client *holder_client;
    leash_lock *holder, *waiter;
    fx_result got = {0};
    long long calls_before, calls_after;
    fx_result rel = {0};
    leash_stats parked, woken;

    fx_world_up(&w, 5000, 0);
    holder_client = fx_world_client(&w, 5000);
    holder = leash_lock_new(holder_client, "wake");
    /* A fixed lease: the holder sends nothing either while it holds. */
    CHECK_EQ_INT(leash_lock_set_fixed_lease(holder, 10000), LEASH_OK);
    waiter = leash_lock_new(w.c, "wake");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(waiter, 20000, fx_acquire_cb, &got), LEASH_OK);
    run_until_parked(&w, waiter);
    stats_once_settled(&w, &parked);
    calls_before = script_calls(&w, "leash:wake");
    fx_run_for(w.loop, 1000);
    calls_after = script_calls(&w, "leash:wake");
    CHECK_EQ_INT(calls_after - calls_before, 0);
    leash_client_stats(w.c, &woken);
    CHECK_EQ_INT((long long)(woken.commands_sent - parked.commands_sent), 0); /* from parking on */
    CHECK_EQ_INT(got.calls, 0);

    CHECK_EQ_INT(leash_release(holder, note_release, &rel), LEASH_OK);
    fx_run_until(w.loop, &got, 2000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_MSG(got.at_ms - release_done_at <= TEST_SLACK_MS,
              "woken %lld ms after the release completed",
              (long long)(got.at_ms - release_done_at));
    /* One wake, one attempt: the release and the grant, nothing else. */
    calls_after = script_calls(&w, "leash:wake");
#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
    /* The release, the grant's copy, and a fence raise when the fences
     * differed (check_sent_for_attempts); a second attempt would add its
     * copy and its give-back (4). On a busy machine it may get no copy:
     * copies still unwritten once a majority decided are dropped
     * (quorum.c); the client's own count below still says one attempt. */
    CHECK_MSG(calls_after - calls_before <= 3, "%lld script calls on the first server",
              calls_after - calls_before);
#else
    CHECK_EQ_INT(calls_after - calls_before, 2);
#endif
    leash_client_stats(w.c, &woken);
    check_sent_for_attempts((long long)(woken.commands_sent - parked.commands_sent), 0);
    leash_client_free(holder_client);
    fx_world_down(&w);
}

TEST(waiter_sleeps_through_a_renewing_holder_without_a_command) {
    fx_world w;
    leash_client *holder_client;
    leash_lock *holder, *waiter;
    fx_result got = {0};
    leash_stats before, after;

    fx_world_up(&w, 300, 0);
    holder_client = fx_world_client(&w, 300); /* watchdog: renewed every 100 ms */
    holder = leash_lock_new(holder_client, "renewing");
    waiter = leash_lock_new(w.c, "renewing");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(waiter, 20000, fx_acquire_cb, &got), LEASH_OK);
    run_until_parked(&w, waiter);
    stats_once_settled(&w, &before);
    fx_run_for(w.loop, 1500); /* five leases of the holder */
    leash_client_stats(w.c, &after);
    CHECK(leash_held(holder));
    CHECK_MSG(after.commands_sent == before.commands_sent,
              "the waiter sent %llu commands while the holder renewed",
              (unsigned long long)(after.commands_sent - before.commands_sent));
    CHECK_EQ_INT(got.calls, 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 5000), LEASH_OK);
    fx_run_until(w.loop, &got, 2000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    leash_client_stats(w.c, &after);
    /* The grant: one attempt (Redlock: its copies). */
    check_sent_for_attempts((long long)(after.commands_sent - before.commands_sent), 0);
    leash_client_free(holder_client);
    fx_world_down(&w);
}

TEST(contending_again_within_the_linger_costs_two_attempts) {
    fx_world w;
    leash_client *other_client;
    leash_lock *other, *mine;
    fx_result got = {0};
    leash_stats before, after;
    long long subs;

    fx_world_up(&w, 5000, 0);
    other_client = fx_world_client(&w, 5000);
    other = leash_lock_new(other_client, "again-and-again");
    mine = leash_lock_new(w.c, "again-and-again");
    /* First contention: try, subscribe, try again, sleep, get it. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(mine, 5000, fx_acquire_cb, &got), LEASH_OK);
    run_until_parked(&w, mine);
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 5000), LEASH_OK);
    fx_run_until(w.loop, &got, 2000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, mine, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_OK);

    /* Again, within the linger: the first try is already covered. */
    subs = sub_calls(&w, "leash:again-and-again");
    memset(&got, 0, sizeof(got));
    leash_client_stats(w.c, &before);
    CHECK_EQ_INT(leash_acquire(mine, 5000, fx_acquire_cb, &got), LEASH_OK);
    run_until_parked(&w, mine);
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 5000), LEASH_OK);
    fx_run_until(w.loop, &got, 2000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    leash_client_stats(w.c, &after);
    /* Two attempts: the busy one, and the grant (Redlock: see the helper). */
    check_sent_for_attempts((long long)(after.commands_sent - before.commands_sent), 1);
    CHECK_EQ_INT(sub_calls(&w, "leash:again-and-again"), subs);
    leash_client_free(other_client);
    fx_world_down(&w);
}

TEST(holder_that_vanished_hands_over_when_its_key_expires) {
    fx_world w;
    leash_lock *waiter;
    fx_result got = {0};
    int64_t expires_at;

    fx_world_up(&w, 5000, 0);
    /* A holder that crashed: its lock is there, with 400 ms left, and it
     * will never publish a release (Redlock: on every server). */
    CHECK_EQ_INT(fx_key_cmd(&w, "leash:crashed", "SET leash:crashed %s:0:1:1 PX 400",
                            "dead0000000000000000000000000000"),
                 FX_COPIES);
    expires_at = test_now_ms() + 400;
    waiter = leash_lock_new(w.c, "crashed");
    CHECK_EQ_INT(leash_acquire(waiter, 3000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_until(w.loop, &got, 3000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_MSG(got.at_ms >= expires_at - 5 && got.at_ms <= expires_at + TEST_SLACK_MS,
              "got it %lld ms after the key expired", (long long)(got.at_ms - expires_at));
    fx_world_down(&w);
}

TEST(release_seen_between_attempt_and_sleep_is_not_lost) {
    fx_world w;
    leash_client *holder_client;
    leash_lock *holder, *waiter;
    fx_result got = {0};
    char token[LEASH__TOKEN_LEN + 1];
    int64_t t0;

    fx_world_up(&w, 5000, 0);
    holder_client = fx_world_client(&w, 5000);
#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
    /* The hold must be on every server (the DEL below counts them). */
    fx_wait_every_server(w.loop, holder_client, FX_REDLOCK_N, 5000);
#endif
    holder = leash_lock_new(holder_client, "kept");
    CHECK_EQ_INT(leash_lock_set_fixed_lease(holder, 10000), LEASH_OK);
    waiter = leash_lock_new(w.c, "kept");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    memcpy(token, holder->hold.token, sizeof(token));
    CHECK_EQ_INT(leash_acquire(waiter, 5000, fx_acquire_cb, &got), LEASH_OK);
    run_until_parked(&w, waiter);

    /* Wake the waiter, let its attempt run (busy: still held) but keep its
     * answer unread; then the lock is released, and the release message is
     * seen before the busy answer: no waiter is parked at that moment. */
    {
        leash__event wake;
        memset(&wake, 0, sizeof(wake));
        wake.type = LEASH__EV_WAKE;
        leash__lock_dispatch(waiter, &wake);
    }
    run_until_attempting(&w, waiter); /* at once on one server and in a cluster */
    fx_run_nowait(w.loop);            /* writes the attempt */
    usleep(50 * 1000);                /* Redis answers "busy"; we don't read it yet */
    /* Gone (from every copy), no message. */
    CHECK_EQ_INT(fx_key_cmd(&w, "leash:kept", "DEL leash:kept"), FX_COPIES);
    t0 = test_now_ms();
    leash__waitqs_released(&waiter->core->waitqs, waiter->names.channel, waiter->names.channel_len,
                           token, LEASH__TOKEN_LEN);
    CHECK_STR_EQ(leash__lock_state_name(waiter), "ATTEMPT");
    /* The busy answer parks it: the kept wake sends it straight back
     * (without it, it would sleep out the holder's 10 s TTL). */
    fx_run_until(w.loop, &got, 1000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_MSG(got.at_ms - t0 < 200, "took %lld ms", (long long)(got.at_ms - t0));
    leash_client_free(holder_client);
    fx_world_down(&w);
}

/* ---- a release publishes only when someone waits (section 5) ----
 * A waiter's attempt that finds the lock taken marks the key in the same
 * script; a release publishes only when the mark is there. */

/* PUBLISH and SPUBLISH the server of `key` ran (in scripts included). */
static long long publishes(fx_world *w, const char *key) {
    test_redis *r = fx_redis_of(w, key);
    return test_redis_calls(r, "publish") + test_redis_calls(r, "spublish");
}

TEST(a_release_publishes_only_after_a_waiter_marked_the_lock) {
    fx_world w;
    leash_client *holder_client;
    leash_lock *holder, *other;
    fx_result got = {0};
    long long before;

    fx_world_up(&w, 5000, 0);
    holder_client = fx_world_client(&w, 5000);
#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
    fx_wait_every_server(w.loop, holder_client, FX_REDLOCK_N, 5000);
    fx_wait_every_server(w.loop, w.c, FX_REDLOCK_N, 5000);
#endif
    holder = leash_lock_new(holder_client, "marked");
    /* A fixed lease: no renewal (which a mark also makes publish). */
    CHECK_EQ_INT(leash_lock_set_fixed_lease(holder, 10000), LEASH_OK);
    other = leash_lock_new(w.c, "marked");

    /* Nobody waits: nothing published. */
    before = publishes(&w, "leash:marked");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 5000), LEASH_OK);
    CHECK_EQ_INT(publishes(&w, "leash:marked") - before, 0);

    /* A try-once found it busy: it waits for no message, so its attempt
     * marks nothing, and the release publishes nothing. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_EBUSY);
    fx_run_for(w.loop, 50); /* Redlock: its give-back */
    before = publishes(&w, "leash:marked");
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 5000), LEASH_OK);
    fx_run_for(w.loop, 50);
    CHECK_MSG(publishes(&w, "leash:marked") - before == 0,
              "%lld publishes for a release that a try-once found busy",
              publishes(&w, "leash:marked") - before);

    /* A waiter marked it: the release publishes, and wakes it at once. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(other, 5000, fx_acquire_cb, &got), LEASH_OK);
    run_until_parked(&w, other);
    before = publishes(&w, "leash:marked");
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 5000), LEASH_OK);
    fx_run_until(w.loop, &got, 2000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_EQ_INT(publishes(&w, "leash:marked") - before, 1);

    /* Its hold started unmarked: nobody waits, nothing published. */
    before = publishes(&w, "leash:marked");
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 5000), LEASH_OK);
    CHECK_EQ_INT(publishes(&w, "leash:marked") - before, 0);
    leash_client_free(holder_client);
    fx_world_down(&w);
}

/* Many waiters, each its own client, on one name: each grant is released
 * at once, and its holder asks again only after the next grant (it cannot
 * take its own release's turn: every handoff goes to a waiter that was
 * asleep or attempting). A waiter's attempt between a grant
 * and its release marks that hold, so its release publishes; a wake-up
 * lost to the mark would leave the waiters asleep until the holder's
 * lease (HERD_LEASE_MS) ran out. Every handoff (a release call to the next
 * grant, whoever gets it) comes well before that. */
enum {
    HERD_N = 8,
    HERD_LEASE_MS = 3000,
    HERD_RUN_MS = 1500
};

typedef struct herd {
    leash_lock *l[HERD_N];
    int idle[HERD_N];    /* released, asks again at the next grant */
    int64_t released_at; /* the last release call; 0 none yet */
    int64_t longest;     /* the longest handoff seen, ms */
    int grants, errors, stop;
} herd;

static herd the_herd;
static void herd_ask(leash_lock *l);

static void herd_released(leash_lock *l, int status, void *arg) {
    int *idle = arg;

    (void)l;
    if (status != LEASH_OK)
        the_herd.errors++;
    *idle = 1;
}

static void herd_acquired(leash_lock *l, int status, void *arg) {
    int64_t now = test_now_ms();
    int i;

    (void)arg;
    if (status != LEASH_OK) {
        the_herd.errors++;
        return;
    }
    the_herd.grants++;
    if (the_herd.released_at != 0 && now - the_herd.released_at > the_herd.longest)
        the_herd.longest = now - the_herd.released_at;
    the_herd.released_at = now;
    for (i = 0; i < HERD_N && !the_herd.stop; i++) {
        if (the_herd.idle[i]) {
            the_herd.idle[i] = 0;
            herd_ask(the_herd.l[i]);
        }
    }
    for (i = 0; i < HERD_N && the_herd.l[i] != l; i++)
        ;
    if (i == HERD_N || leash_release(l, herd_released, &the_herd.idle[i]) != LEASH_OK)
        the_herd.errors++;
}

static void herd_ask(leash_lock *l) {
    if (leash_acquire(l, LEASH_WAIT_FOREVER, herd_acquired, NULL) != LEASH_OK)
        the_herd.errors++;
}

TEST(every_handoff_among_many_waiters_comes_well_before_the_lease) {
    fx_world w;
    leash_client *c[HERD_N];
    int64_t end;
    int i;

    memset(&the_herd, 0, sizeof(the_herd));
    fx_world_up(&w, HERD_LEASE_MS, 0);
    for (i = 0; i < HERD_N; i++) {
        c[i] = fx_world_client(&w, HERD_LEASE_MS);
        the_herd.l[i] = leash_lock_new(c[i], "herd");
        CHECK(the_herd.l[i] != NULL);
        CHECK_EQ_INT(leash_lock_set_fixed_lease(the_herd.l[i], HERD_LEASE_MS), LEASH_OK);
    }
    for (i = 0; i < HERD_N; i++)
        herd_ask(the_herd.l[i]);
    end = test_now_ms() + HERD_RUN_MS;
    while (test_now_ms() < end)
        fx_run_for(w.loop, 10);
    the_herd.stop = 1;
    /* A handoff still awaited counts too (lost: it would end at the lease). */
    if (test_now_ms() - the_herd.released_at > the_herd.longest)
        the_herd.longest = test_now_ms() - the_herd.released_at;
    printf("%d grants, longest handoff %lld ms\n", the_herd.grants, (long long)the_herd.longest);
    CHECK_EQ_INT(the_herd.errors, 0);
    CHECK_MSG(the_herd.grants >= 2 * HERD_N, "%d grants", the_herd.grants);
    CHECK_MSG(the_herd.longest < HERD_LEASE_MS / 3 + TEST_SLACK_MS,
              "a handoff took %lld ms (lease %d ms): a wake-up was lost",
              (long long)the_herd.longest, HERD_LEASE_MS);
    for (i = 0; i < HERD_N; i++)
        leash_client_free(c[i]);
    fx_world_down(&w);
}

TEST(waiters_survive_the_subscriber_connection_being_killed) {
    fx_world w;
    leash_client *holder_client;
    leash_lock *holder, *w1, *w2;
    fx_result g1 = {0}, g2 = {0};
    leash_stats before, s;
    long long killed;
    int i;

    fx_world_up(&w, 5000, 0);
    holder_client = fx_world_client(&w, 5000);
    holder = leash_lock_new(holder_client, "pubsub-kill");
    CHECK_EQ_INT(leash_lock_set_fixed_lease(holder, 10000), LEASH_OK);
    w1 = leash_lock_new(w.c, "pubsub-kill");
    w2 = leash_lock_new(w.c, "pubsub-kill");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(w1, 8000, fx_acquire_cb, &g1), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(w2, 8000, fx_acquire_cb, &g2), LEASH_OK);
    run_until_parked(&w, w1);
    run_until_parked(&w, w2);
    /* w.c's subscriber connections: at the channel's server (in a cluster,
     * the master of its slot, where the subscription is sharded; Redlock:
     * every server, else a majority still covers the channel). */
    for (i = 0; i < 500 && fx_channels(&w) < FX_COPIES; i++)
        fx_run_for(w.loop, 2);                /* Redlock: a majority's confirmation parks them */
    CHECK_EQ_INT(fx_channels(&w), FX_COPIES); /* the channel, on every server */
    leash_client_stats(w.c, &before);
    killed = fx_key_cmd(&w, "leash:pubsub-kill", "CLIENT KILL TYPE pubsub");
    CHECK_EQ_INT(killed, FX_COPIES);
    fx_run_for(w.loop, 300); /* reconnect, resubscribe, try once more */
    leash_client_stats(w.c, &s);
    CHECK(s.sub_connects - before.sub_connects >= (uint64_t)killed); /* each came back */
    CHECK_EQ_INT(g1.calls + g2.calls, 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 5000), LEASH_OK);
    /* Either waiter may be first: both tried again once resubscribed, and
     * on a busy machine the second one's try can come after the release
     * (the mutex promises no order). */
    for (i = 0; i < 200 && !g1.done && !g2.done; i++)
        fx_run_for(w.loop, 10);
    CHECK_MSG(g1.done + g2.done == 1, "%d waiters granted within 2 s", g1.done + g2.done);
    {
        fx_result *first = g1.done ? &g1 : &g2, *second = g1.done ? &g2 : &g1;

        CHECK_EQ_INT(first->status, LEASH_OK);
        leash_release(first->lock, NULL, NULL);
        fx_run_until(w.loop, second, 2000);
        CHECK_EQ_INT(second->status, LEASH_OK);
    }
    leash_client_free(holder_client);
    fx_world_down(&w);
}

TEST(one_subscription_per_name_shared_by_local_waiters) {
    fx_world w;
    leash_lock *holder, *ws[5];
    fx_result g[5];
    long long subs, unsubs;
    int i;

    memset(g, 0, sizeof(g));
    fx_world_up(&w, 5000, 0);
    subs = sub_calls(&w, "leash:shared-sub");
    unsubs = unsub_calls(&w, "leash:shared-sub");
    holder = leash_lock_new(w.c, "shared-sub");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    for (i = 0; i < 5; i++) {
        ws[i] = leash_lock_new(w.c, "shared-sub");
        CHECK_EQ_INT(leash_acquire(ws[i], 8000, fx_acquire_cb, &g[i]), LEASH_OK);
    }
    for (i = 0; i < 5; i++)
        run_until_parked(&w, ws[i]);
    CHECK_EQ_INT(sub_calls(&w, "leash:shared-sub") - subs, 1);
    {
        char ch[FX_CHANNEL_MAX];
        size_t n = fx_channel("shared-sub", 0, ch);
        CHECK_EQ_INT(fx_subscribers(&w, ch, n), 1);
    }
    for (i = 0; i < 5; i++) {
        leash_lock *next = i == 0 ? holder : ws[i - 1];
        leash_release(next, NULL, NULL);
        fx_run_until(w.loop, &g[i], 2000);
        CHECK_EQ_INT(g[i].status, LEASH_OK);
    }
    leash_release(ws[4], NULL, NULL);
    fx_run_for(w.loop, 100);
    /* The last holder left: the subscription lingers (sub_linger_ms, 1 s by
     * default) in case the name is contended again, then goes. */
    CHECK_EQ_INT(unsub_calls(&w, "leash:shared-sub") - unsubs, 0);
    fx_run_for(w.loop, 1100);
    CHECK_EQ_INT(unsub_calls(&w, "leash:shared-sub") - unsubs, 1);
    CHECK(
        !leash__waitq_exists(&ws[0]->core->waitqs, ws[0]->names.channel, ws[0]->names.channel_len));
    fx_world_down(&w);
}

/* A handle freed while it holds (a server's request that ended) gives the
 * lock to the next local waiter as a release does: no waiter sleeps out a
 * TTL or its wait. */
TEST(a_holder_freed_wakes_the_next_local_waiter) {
    fx_world w;
    leash_lock *cur, *ws[4];
    fx_result g[4];
    int i;

    memset(g, 0, sizeof(g));
    fx_world_up(&w, 5000, 0);
    cur = leash_lock_new(w.c, "freed-holder");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, cur, 0, 5000), LEASH_OK);
    for (i = 0; i < 4; i++) {
        ws[i] = leash_lock_new(w.c, "freed-holder");
        CHECK_EQ_INT(leash_acquire(ws[i], 3000, fx_acquire_cb, &g[i]), LEASH_OK);
    }
    for (i = 0; i < 4; i++)
        run_until_parked(&w, ws[i]);
    for (i = 0; i < 4; i++) {
        int64_t t0 = test_now_ms();
        int j, next = -1;

        leash_lock_free(cur);
        while (next < 0 && test_now_ms() - t0 < 2000) {
            fx_run_for(w.loop, 5);
            for (j = 0; j < 4; j++)
                if (ws[j] != NULL && g[j].done && leash_held(ws[j]))
                    next = j;
        }
        CHECK_MSG(next >= 0, "no waiter took it within 2 s of free %d", i);
        CHECK_MSG(test_now_ms() - t0 < 500 + TEST_SLACK_MS, "took %lld ms",
                  (long long)(test_now_ms() - t0));
        cur = ws[next];
        ws[next] = NULL;
    }
    leash_lock_free(cur);
    fx_world_down(&w);
}

/* ---- no waiter starves (docs/how-it-works.md "Fairness") ----
 * Not with Redlock, whose waiters race (leash.h, LEASH_STARVE_MS). The
 * contention runs take seconds: on one loop kind (libev) only, which the
 * cluster build uses too. */
#if !defined(LEASH_TEST_TOPOLOGY_REDLOCK) && !defined(LEASH_TEST_LOOP_LIBEVENT) && \
    !defined(LEASH_TEST_LOOP_LIBUV)
#define FAIRNESS_RUNS 1
#endif
#ifndef LEASH_TEST_TOPOLOGY_REDLOCK

#ifdef FAIRNESS_RUNS
/* One contender: its own client and handle, looping acquire
 * (LEASH_WAIT_FOREVER) -> hold HOLD_MS -> release -> acquire again. */
enum {
    FAIR_HOLD_MS = 1,
    FAIR_RUN_MS = 1500,
    FAIR_MAX = 16
};

typedef struct contender {
    leash_client *c;
    leash_lock *l;
    int64_t held_at; /* test_now_ms() of the grant; 0: not held */
    int pending;     /* an acquire or release is in flight */
    int grants, errors;
} contender;

static void fair_acquired(leash_lock *l, int status, void *arg) {
    contender *k = arg;

    (void)l;
    k->pending = 0;
    if (status != LEASH_OK) {
        k->errors++;
        return;
    }
    k->grants++;
    k->held_at = test_now_ms();
}

static void fair_ask(contender *k) {
    k->pending = 1;
    if (leash_acquire(k->l, LEASH_WAIT_FOREVER, fair_acquired, k) != LEASH_OK) {
        k->pending = 0;
        k->errors++;
    }
}

static void fair_released(leash_lock *l, int status, void *arg) {
    contender *k = arg;

    (void)l;
    k->pending = 0;
    if (status != LEASH_OK)
        k->errors++;
}

/* n contenders of one name on one loop, each its own client, for run_ms:
 * each one's grants into grants[]; 0, or the number of failed calls. */
static int contend(fx_world *w, fx_loop *loop, int n, int64_t run_ms, int *grants) {
    contender ks[FAIR_MAX];
    int64_t end;
    int i, errors = 0;

    memset(ks, 0, sizeof(ks));
    for (i = 0; i < n; i++) {
        leash_options o;
        fx_world_options(w, &o, 5000);
        ks[i].c = fx_client_opts(loop, &o);
        fx_wait_connected(loop, ks[i].c, 5000);
        ks[i].l = leash_lock_new(ks[i].c, "no-starving");
        CHECK(ks[i].l != NULL);
    }
    for (i = 0; i < n; i++)
        fair_ask(&ks[i]);
    end = test_now_ms() + run_ms;
    while (test_now_ms() < end) {
        fx_run_for(loop, 1);
        for (i = 0; i < n; i++) {
            contender *k = &ks[i];
            if (k->pending)
                continue;
            if (k->held_at != 0 && test_now_ms() - k->held_at >= FAIR_HOLD_MS) {
                k->held_at = 0;
                k->pending = 1;
                if (leash_release(k->l, fair_released, k) != LEASH_OK) {
                    k->pending = 0;
                    k->errors++;
                }
            } else if (k->held_at == 0) {
                fair_ask(k);
            }
        }
    }
    for (i = 0; i < n; i++) {
        grants[i] = ks[i].grants;
        errors += ks[i].errors;
        leash_client_free(ks[i].c);
    }
    return errors;
}

/* Every contender was served, the most-served at most twice the least. */
static void check_fair(const int *grants, int n) {
    int i, lo = grants[0], hi = grants[0];

    for (i = 1; i < n; i++) {
        if (grants[i] < lo)
            lo = grants[i];
        if (grants[i] > hi)
            hi = grants[i];
    }
    for (i = 0; i < n; i++)
        printf("%d%s", grants[i], i + 1 < n ? " " : "\n");
    CHECK_MSG(lo > 0, "a contender was never served (least %d, most %d)", lo, hi);
    CHECK_MSG(hi <= 2 * lo, "the most-served got %d grants, the least %d", hi, lo);
}

TEST(no_waiter_starves_among_sixteen_clients_of_one_loop) {
    fx_world w;
    int grants[16];

    fx_world_up(&w, 5000, 0);
    CHECK_EQ_INT(contend(&w, w.loop, 16, FAIR_RUN_MS, grants), 0);
    check_fair(grants, 16);
    fx_world_down(&w);
}

TEST(no_waiter_starves_across_four_processes) {
    enum {
        PROCS = 4,
        EACH = 4
    };
    fx_world w;
    int *shared, grants[PROCS * EACH], i, status;
    pid_t pids[PROCS];

    shared = mmap(NULL, sizeof(int) * (PROCS * EACH + PROCS), PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(shared != MAP_FAILED);
    memset(shared, 0, sizeof(int) * (PROCS * EACH + PROCS));
    fx_world_up(&w, 5000, 0);
    for (i = 0; i < PROCS; i++) {
        pids[i] = fork();
        CHECK(pids[i] >= 0);
        if (pids[i] == 0) {
            fx_loop *loop = fx_loop_new();
            shared[PROCS * EACH + i] = contend(&w, loop, EACH, FAIR_RUN_MS, shared + i * EACH);
            fx_loop_free(loop);
            _exit(0);
        }
    }
    for (i = 0; i < PROCS; i++) {
        CHECK(waitpid(pids[i], &status, 0) == pids[i]);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d failed", i);
        CHECK_EQ_INT(shared[PROCS * EACH + i], 0);
    }
    memcpy(grants, shared, sizeof(grants));
    check_fair(grants, PROCS * EACH);
    munmap(shared, sizeof(int) * (PROCS * EACH + PROCS));
    fx_world_down(&w);
}

#endif

/* A waiter reserved the grant after a hold and is gone (its process died):
 * the release keeps the lock for it LEASH_RESERVE_MS, no longer. */
TEST(a_grant_kept_for_a_waiter_that_is_gone_frees_within_reserve_ms) {
    fx_world w;
    leash_lock *h, *next;
    fx_result g;
    redisReply *rep;
    test_redis *r;
    char value[256], gone[33];
    int64_t t0, took;

    memset(&g, 0, sizeof(g));
    fx_world_up(&w, 5000, 0);
    h = leash_lock_new(w.c, "reserved-for-the-dead");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    r = fx_redis_of(&w, "leash:reserved-for-the-dead");
    rep = test_redis_cmd(r, "GET leash:reserved-for-the-dead");
    CHECK(rep != NULL && rep->type == REDIS_REPLY_STRING && rep->len < 100);
    memset(gone, 'a', 32);
    gone[32] = '\0';
    snprintf(value, sizeof(value), "%s:%s:1", rep->str, gone);
    freeReplyObject(rep);
    CHECK_EQ_INT(fx_key_cmd(&w, "leash:reserved-for-the-dead", "SET %s %s KEEPTTL",
                            "leash:reserved-for-the-dead", value),
                 1);
    next = leash_lock_new(w.c, "reserved-for-the-dead");
    CHECK_EQ_INT(leash_acquire(next, 5000, fx_acquire_cb, &g), LEASH_OK);
    run_until_parked(&w, next);
    CHECK_EQ_INT(fx_release_sync(w.loop, h, 5000), LEASH_OK);
    t0 = test_now_ms();
    fx_run_until(w.loop, &g, 5000);
    took = test_now_ms() - t0;
    CHECK_EQ_INT(g.status, LEASH_OK);
    CHECK_MSG(took >= LEASH_RESERVE_MS / 2, "granted %lld ms after the release: not kept",
              (long long)took);
    CHECK_MSG(took <= LEASH_RESERVE_MS + TEST_SLACK_MS, "granted %lld ms after the release",
              (long long)took);
    leash_lock_free(h);
    leash_lock_free(next);
    fx_world_down(&w);
}

/* The release script, run by hand as a waiter's token, on a value with
 * a queue of starving waiters (dialect/leash.c): a waiter that gives up
 * leaves the queue; one whose turn has come passes it on. */
static long long release_as(test_redis *r, const char *key, const char *token) {
    const leash__script *s = leash__dialect_leash.scripts[LEASH__LEASH_SCRIPT_RELEASE];
    redisReply *rep;
    long long n;

    CHECK(strstr(s->src, "redis.call('del', KEYS[1])") != NULL); /* the release script */
    rep = test_redis_cmd(r, "EVAL %b 1 %s %s 0 chan publish 0", s->src, s->len, key, token);
    CHECK(rep != NULL && rep->type == REDIS_REPLY_INTEGER);
    n = rep->integer;
    freeReplyObject(rep);
    return n;
}

static void check_value(test_redis *r, const char *key, const char *want) {
    redisReply *rep = test_redis_cmd(r, "GET %s", key);

    CHECK(rep != NULL && rep->type == REDIS_REPLY_STRING);
    CHECK_STR_EQ(rep->str, want);
    freeReplyObject(rep);
}

TEST(a_starving_waiter_that_gives_up_leaves_the_queue) {
    fx_world w;
    test_redis *r;
    char h[33], q[33], n[33], value[256], want[256];
    redisReply *rep;

    memset(h, 'a', 32);
    memset(q, 'b', 32);
    memset(n, 'c', 32);
    h[32] = q[32] = n[32] = '\0';
    leash__dialects_init();
    fx_world_up(&w, 5000, 0);
    r = fx_redis_of(&w, "leash:quitter");
    /* Held by h; q, then n queued behind it: q gives up. */
    snprintf(value, sizeof(value), "%s:1:1:5:%s:7:%s:9", h, q, n);
    freeReplyObject(test_redis_cmd(r, "SET leash:quitter %s PX 5000", value));
    CHECK_EQ_INT(release_as(r, "leash:quitter", q), -1);
    snprintf(want, sizeof(want), "%s:1:1:5:%s:9", h, n);
    check_value(r, "leash:quitter", want);
    /* Kept for q, n queued next: q gives its turn to n. */
    snprintf(value, sizeof(value), "%s:1:0:0:%s:9", q, n);
    freeReplyObject(test_redis_cmd(r, "SET leash:quitter %s PX 5000", value));
    CHECK_EQ_INT(release_as(r, "leash:quitter", q), 0);
    snprintf(want, sizeof(want), "%s:1:0:0", n);
    check_value(r, "leash:quitter", want);
    rep = test_redis_cmd(r, "PTTL leash:quitter");
    CHECK(rep != NULL && rep->type == REDIS_REPLY_INTEGER && rep->integer > 0 &&
          rep->integer <= LEASH_RESERVE_MS);
    freeReplyObject(rep);
    fx_world_down(&w);
}

/* A handover keeps the released hold's fence beside the waiter it keeps
 * the lock for, and that waiter's grant takes a fence above it: fences
 * grow across a handover even when the server's clock stepped back since
 * the released grant (here an hour: the released fence is planted an hour
 * ahead of the clock). */
TEST(a_grant_kept_for_a_waiter_takes_a_fence_above_the_released_one) {
    const leash__script *acquire = leash__dialect_leash.scripts[LEASH__LEASH_SCRIPT_ACQUIRE];
    fx_world w;
    test_redis *r;
    char h[33], q[33], value[256], want[256];
    unsigned long long ahead;
    int version = test_redis_version();
    redisReply *rep;

    memset(h, 'a', 32);
    memset(q, 'b', 32);
    h[32] = q[32] = '\0';
    leash__dialects_init();
    fx_world_up(&w, 5000, 0);
    r = fx_redis_of(&w, "leash:handed");
    rep = test_redis_cmd(r, "TIME");
    CHECK(rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2);
    ahead = strtoull(rep->element[0]->str, NULL, 10) * 1000000ULL +
            strtoull(rep->element[1]->str, NULL, 10) + 3600ULL * 1000000ULL;
    freeReplyObject(rep);
    snprintf(value, sizeof(value), "%s:1:1:%llu:%s:7", h, ahead, q);
    freeReplyObject(test_redis_cmd(r, "SET leash:handed %s PX 5000", value));
    CHECK_EQ_INT(release_as(r, "leash:handed", h), 0);
    snprintf(want, sizeof(want), "%s:1:0:%llu", q, ahead);
    check_value(r, "leash:handed", want);
    CHECK(strstr(acquire->src, "'NX'") != NULL); /* the acquire script */
    if (version != 0 && version < 70000)
        acquire = acquire->older; /* SET NX GET is 7.0 */
    rep = test_redis_cmd(r, "EVAL %b 1 leash:handed %s 5000 1 0", acquire->src, acquire->len, q);
    CHECK(rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 4);
    CHECK_EQ_INT(rep->element[0]->integer, 1); /* granted */
    CHECK_MSG((unsigned long long)rep->element[1]->integer > ahead,
              "fence %lld, the released one %llu", rep->element[1]->integer, ahead);
    freeReplyObject(rep);
    fx_world_down(&w);
}

/* A queued value's tail is checked alike by every script: the force
 * release refuses, as the acquire does, a string whose tail is not
 * ":<token>:<since>" entries (it is not a lock: nothing is deleted). */
TEST(the_force_release_refuses_a_value_whose_tail_is_not_a_queue) {
    const leash__script *force = leash__dialect_leash.scripts[LEASH__LEASH_SCRIPT_FORCE];
    fx_world w;
    test_redis *r;
    char h[33], q[33], value[256];
    redisReply *rep;

    memset(h, 'a', 32);
    memset(q, 'b', 32);
    h[32] = q[32] = '\0';
    leash__dialects_init();
    fx_world_up(&w, 5000, 0);
    r = fx_redis_of(&w, "leash:junk-tail");
    snprintf(value, sizeof(value), "%s:1:1:5:%s:7not-a-queue", h, q);
    freeReplyObject(test_redis_cmd(r, "SET leash:junk-tail %s PX 5000", value));
    CHECK(strstr(force->src, "'forced'") != NULL); /* the force script */
    rep = test_redis_cmd(r, "EVAL %b 1 leash:junk-tail chan publish", force->src, force->len);
    CHECK(rep != NULL && rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "WRONGTYPE", 9) == 0);
    freeReplyObject(rep);
    check_value(r, "leash:junk-tail", value);
    fx_world_down(&w);
}

/* A key kept for a waiter (count 0) is no hold of that waiter's token: a
 * renewal of it does not stretch LEASH_RESERVE_MS to a whole lease. */
TEST(a_renewal_does_not_stretch_a_grant_kept_for_a_waiter) {
    const leash__script *renew = leash__dialect_leash.scripts[LEASH__LEASH_SCRIPT_RENEW];
    fx_world w;
    test_redis *r;
    char q[33], value[256];
    redisReply *rep;

    memset(q, 'b', 32);
    q[32] = '\0';
    leash__dialects_init();
    fx_world_up(&w, 5000, 0);
    r = fx_redis_of(&w, "leash:kept");
    snprintf(value, sizeof(value), "%s:1:0:0", q);
    freeReplyObject(test_redis_cmd(r, "SET leash:kept %s PX %d", value, LEASH_RESERVE_MS));
    CHECK(strstr(renew->src, "renewed:") != NULL); /* the renew script */
    rep = test_redis_cmd(r, "EVAL %b 1 leash:kept %s 30000 chan m publish 0", renew->src,
                         renew->len, q);
    /* One answer, and the server's clock (dialect/leash.c, renew). */
    CHECK(rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
          rep->element[0]->type == REDIS_REPLY_INTEGER &&
          rep->element[1]->type == REDIS_REPLY_INTEGER && rep->element[1]->integer > 0);
    CHECK_EQ_INT(rep->element[0]->integer, 0);
    freeReplyObject(rep);
    rep = test_redis_cmd(r, "PTTL leash:kept");
    CHECK(rep != NULL && rep->type == REDIS_REPLY_INTEGER && rep->integer <= LEASH_RESERVE_MS);
    freeReplyObject(rep);
    fx_world_down(&w);
}

/* The value's length, 0 when the key is gone. */
static size_t value_len(test_redis *r, const char *key) {
    redisReply *rep = test_redis_cmd(r, "GET %s", key);
    size_t n = rep != NULL && rep->type == REDIS_REPLY_STRING ? rep->len : 0;

    freeReplyObject(rep);
    return n;
}

/* Two starving waiters of two clients race for a release: the loser
 * queues in the winner's value. Freed, it leaves that queue at once, so
 * the winner's release keeps nothing for it (leash.h, LEASH_STARVE_MS). */
TEST(a_queued_waiter_freed_leaves_the_queue_at_once) {
    static const char key[] = "leash:freed-starver";
    fx_world w;
    leash_client *c2, *c3;
    leash_lock *h, *q, *p, *winner, *loser;
    fx_result gq, gp;
    test_redis *r;
    size_t held_len;
    int i;

    memset(&gq, 0, sizeof(gq));
    memset(&gp, 0, sizeof(gp));
    fx_world_up(&w, 5000, 0);
    c2 = fx_world_client(&w, 5000);
    c3 = fx_world_client(&w, 5000);
    fx_wait_connected(w.loop, c2, 5000);
    fx_wait_connected(w.loop, c3, 5000);
    r = fx_redis_of(&w, key);
    h = leash_lock_new(w.c, "freed-starver");
    q = leash_lock_new(c2, "freed-starver");
    p = leash_lock_new(c3, "freed-starver");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    held_len = value_len(r, key);
    CHECK_EQ_INT(leash_acquire(q, 5000, fx_acquire_cb, &gq), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(p, 5000, fx_acquire_cb, &gp), LEASH_OK);
    run_until_parked(&w, q);
    run_until_parked(&w, p);
    fx_run_for(w.loop, 2 * LEASH_STARVE_MS);
    CHECK_EQ_INT(fx_release_sync(w.loop, h, 5000), LEASH_OK);
    for (i = 0; i < 1000 && !gq.done && !gp.done; i++)
        fx_run_for(w.loop, 2);
    CHECK(gq.done != gp.done);
    winner = gq.done ? q : p;
    loser = gq.done ? p : q;
    CHECK_EQ_INT(gq.done ? gq.status : gp.status, LEASH_OK);
    for (i = 0; i < 250 && value_len(r, key) <= held_len; i++)
        fx_run_for(w.loop, 2);
    CHECK_MSG(value_len(r, key) > held_len, "the loser did not queue (value %zu bytes)",
              value_len(r, key));
    leash_lock_free(loser);
    fx_run_for(w.loop, 50);
    CHECK_MSG(value_len(r, key) <= held_len, "the freed waiter is still queued (%zu bytes)",
              value_len(r, key));
    CHECK_EQ_INT(fx_release_sync(w.loop, winner, 5000), LEASH_OK);
    CHECK_EQ_INT(value_len(r, key), 0);
    leash_lock_free(h);
    leash_lock_free(winner);
    leash_client_free(c2);
    leash_client_free(c3);
    fx_world_down(&w);
}
#endif

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(waiter_is_woken_by_the_release_and_sends_nothing_while_asleep),
        TEST_CASE(waiter_sleeps_through_a_renewing_holder_without_a_command),
        TEST_CASE(contending_again_within_the_linger_costs_two_attempts),
        TEST_CASE(holder_that_vanished_hands_over_when_its_key_expires),
        TEST_CASE(release_seen_between_attempt_and_sleep_is_not_lost),
        TEST_CASE(a_release_publishes_only_after_a_waiter_marked_the_lock),
        TEST_CASE(every_handoff_among_many_waiters_comes_well_before_the_lease),
        TEST_CASE(waiters_survive_the_subscriber_connection_being_killed),
        TEST_CASE(one_subscription_per_name_shared_by_local_waiters),
        TEST_CASE(a_holder_freed_wakes_the_next_local_waiter),
#ifdef FAIRNESS_RUNS
        TEST_CASE(no_waiter_starves_among_sixteen_clients_of_one_loop),
        TEST_CASE(no_waiter_starves_across_four_processes),
#endif
#ifndef LEASH_TEST_TOPOLOGY_REDLOCK
        TEST_CASE(a_grant_kept_for_a_waiter_that_is_gone_frees_within_reserve_ms),
        TEST_CASE(a_starving_waiter_that_gives_up_leaves_the_queue),
        TEST_CASE(a_grant_kept_for_a_waiter_takes_a_fence_above_the_released_one),
        TEST_CASE(the_force_release_refuses_a_value_whose_tail_is_not_a_queue),
        TEST_CASE(a_renewal_does_not_stretch_a_grant_kept_for_a_waiter),
        TEST_CASE(a_queued_waiter_freed_leaves_the_queue_at_once),
#endif
        {0},
    };
    return fx_main(argc, argv, cases);
}
