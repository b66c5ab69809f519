/* SPDX-License-Identifier: MIT */
#define _DEFAULT_SOURCE 1 /* usleep */
/* The lock engine on a real loop against a real Redis (one server, a
 * cluster, or Redlock's independent servers: fixture.h): exclusion,
 * try-once, fences, reentrancy, FIFO, timeouts, cancel, bad keys, scale. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

TEST(exclusion_between_two_clients) {
    fx_world w;
    leash_client *c2;
    leash_lock *a, *b;
    fx_result rb = {0};

    fx_world_up(&w, 5000, 0);
    c2 = fx_world_client(&w, 5000);
    a = leash_lock_new(w.c, "job");
    b = leash_lock_new(c2, "job");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, b, 0, 5000), LEASH_EBUSY);
    CHECK(!leash_held(b));
    CHECK_EQ_INT(leash_acquire(b, 5000, fx_acquire_cb, &rb), LEASH_OK);
    fx_run_for(w.loop, 200);
    CHECK_EQ_INT(rb.calls, 0); /* still waiting: a holds it */
    CHECK(leash_held(a));
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    fx_run_until(w.loop, &rb, 5000);
    CHECK_EQ_INT(rb.status, LEASH_OK);
    CHECK(leash_held(b));
    CHECK(!leash_held(a));
    CHECK(leash_fence(b) > leash_fence(a));
    CHECK_EQ_INT(fx_release_sync(w.loop, b, 5000), LEASH_OK);
    leash_client_free(c2);
    fx_world_down(&w);
}

TEST(exclusion_between_two_handles_of_one_client) {
    fx_world w;
    leash_lock *a, *b;

    fx_world_up(&w, 5000, 0);
    a = leash_lock_new(w.c, "shared");
    b = leash_lock_new(w.c, "shared");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, b, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, b, 100, 5000), LEASH_ETIMEDOUT);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, b, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, b, 5000), LEASH_OK);
    fx_world_down(&w);
}

TEST(fence_grows_across_holds) {
    fx_world w;
    leash_lock *a, *b;
    uint64_t last = 0;
    int i;

    fx_world_up(&w, 5000, 0);
    a = leash_lock_new(w.c, "fenced");
    b = leash_lock_new(w.c, "fenced");
    for (i = 0; i < 6; i++) {
        leash_lock *l = i % 2 ? a : b;
        CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
        CHECK_MSG(leash_fence(l) > last, "fence %llu after %llu",
                  (unsigned long long)leash_fence(l), (unsigned long long)last);
        last = leash_fence(l);
        CHECK_EQ_INT(fx_release_sync(w.loop, l, 5000), LEASH_OK);
        CHECK_EQ_INT((long long)leash_fence(l), (long long)last); /* kept after release */
    }
    CHECK_EQ_INT(fx_dbsize(&w), 0); /* nothing stays behind */
    fx_world_down(&w);
}

#ifndef LEASH_TEST_TOPOLOGY_REDLOCK
/* What bench/ reports (leash-bench-throughput, idle), asserted: a cycle
 * on a lock nobody else wants costs Redis 6 calls (EVALSHA, TIME, SET; on
 * release EVALSHA, GET, DEL: dialect/leash.c) and leaves no key behind, so
 * Redis memory does not grow with the cycles. (Redlock adds the fence
 * floor's calls.) */
TEST(an_uncontended_cycle_costs_six_redis_calls_and_leaves_nothing) {
    enum {
        CYCLES = 40
    };
    fx_world w;
    leash_lock *l[CYCLES];
    test_redis *r;
    long long calls;
    char name[32];
    int i;

    fx_world_up(&w, 10000, 0);
    r = fx_redis_of(&w, "leash:{cycle}");
    for (i = 0; i < CYCLES; i++) {
        snprintf(name, sizeof(name), "{cycle}%d", i);
        l[i] = leash_lock_new(w.c, name);
        CHECK(l[i] != NULL);
    }
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l[0], 0, 5000), LEASH_OK); /* scripts loaded */
    CHECK_EQ_INT(fx_release_sync(w.loop, l[0], 5000), LEASH_OK);
    freeReplyObject(test_redis_cmd(r, "CONFIG RESETSTAT"));
    for (i = 0; i < CYCLES; i++) {
        CHECK_EQ_INT(fx_acquire_sync(w.loop, l[i], 0, 5000), LEASH_OK);
        CHECK_EQ_INT(fx_release_sync(w.loop, l[i], 5000), LEASH_OK);
    }
    calls = test_redis_lock_calls(r);
    CHECK_MSG(calls >= 6 * CYCLES && calls <= 6 * CYCLES + 2,
              "%lld Redis calls for %d cycles, 6 each", calls, CYCLES);
    CHECK_EQ_INT(fx_dbsize(&w), 0);
    for (i = 0; i < CYCLES; i++)
        leash_lock_free(l[i]);
    fx_world_down(&w);
}
#endif

TEST(reentrant_holds_are_counted) {
    fx_world w;
    leash_lock *a, *other;

    fx_world_up(&w, 5000, 0);
    a = leash_lock_new(w.c, "again");
    other = leash_lock_new(w.c, "again");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_hold_count(a), 2);
    CHECK_EQ_INT(test_lock_value(fx_redis_of(&w, "leash:again"), "leash:again", NULL, NULL), 2);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    CHECK(leash_held(a));
    CHECK_EQ_INT(leash_hold_count(a), 1);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    CHECK(!leash_held(a));
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "leash:again"), "leash:again"), 0);
    CHECK_EQ_INT(leash_release(a, NULL, NULL), LEASH_ESTATE); /* no hold left */
    fx_world_down(&w);
}

/* The hold vanished (force-released, expired, server restarted) before the
 * watchdog noticed: an extra hold must not bring it back as a new hold
 * whose fence the handle never saw. */
TEST(extra_hold_of_a_vanished_hold_is_lost_not_recreated) {
    fx_world w;
    leash_client *admin_client;
    leash_lock *a, *admin;
    fx_result got = {0}, lost = {0};
    uint64_t fence;

    fx_world_up(&w, 5000, 0); /* renewals every 1.7 s: none in this test */
    admin_client = fx_world_client(&w, 5000);
    a = leash_lock_new(w.c, "vanished");
    leash_on_lost(a, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    fence = leash_fence(a);
    admin = leash_lock_new(admin_client, "vanished");
    CHECK_EQ_INT(fx_force_release_sync(w.loop, admin, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(a, 0, fx_acquire_cb, &got), LEASH_OK);
    fx_run_until(w.loop, &got, 5000);
    CHECK_EQ_INT(got.status, LEASH_EBUSY);
    CHECK_EQ_INT(lost.calls, 1);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    CHECK(!leash_held(a));
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "leash:vanished"), "leash:vanished"), 0);
    /* A new hold is a new hold: with a new fence. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK(leash_fence(a) > fence);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    leash_client_free(admin_client);
    fx_world_down(&w);
}

TEST(non_reentrant_handle_refuses_a_second_hold) {
    fx_world w;
    leash_lock *a;
    fx_result r = {0};

    fx_world_up(&w, 5000, 0);
    a = leash_lock_new(w.c, "once");
    CHECK_EQ_INT(leash_lock_set_reentrant(a, 0), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(a, 0, fx_acquire_cb, &r), LEASH_ESTATE);
    CHECK_EQ_INT(leash_lock_set_reentrant(a, 1), LEASH_ESTATE); /* held */
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_release(a, fx_release_cb, &r), LEASH_ESTATE);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(r.calls, 0);
    fx_world_down(&w);
}

static char order[8];
static int order_len;
static void note_order(leash_lock *l, int status, void *arg) {
    CHECK_EQ_INT(status, LEASH_OK);
    order[order_len++] = *(const char *)arg;
    leash_release(l, NULL, NULL);
}

TEST(local_waiters_are_served_in_fifo_order) {
    fx_world w;
    leash_lock *h, *w1, *w2, *w3;
    int done = 0;

    fx_world_up(&w, 5000, 0);
    h = leash_lock_new(w.c, "fifo");
    w1 = leash_lock_new(w.c, "fifo");
    w2 = leash_lock_new(w.c, "fifo");
    w3 = leash_lock_new(w.c, "fifo");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(w1, 5000, note_order, "1"), LEASH_OK);
    fx_run_for(w.loop, 30);
    CHECK_EQ_INT(leash_acquire(w2, 5000, note_order, "2"), LEASH_OK);
    fx_run_for(w.loop, 30);
    CHECK_EQ_INT(leash_acquire(w3, 5000, note_order, "3"), LEASH_OK);
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(order_len, 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, h, 5000), LEASH_OK);
    while (order_len < 3 && done++ < 300)
        fx_run_for(w.loop, 10);
    CHECK_EQ_INT(order_len, 3);
    CHECK(memcmp(order, "123", 3) == 0);
    fx_world_down(&w);
}

TEST(wait_timeout_is_on_time) {
    fx_world w;
    leash_lock *h, *x;
    fx_result r = {0};
    int64_t t0, took;

    fx_world_up(&w, 5000, 0);
    h = leash_lock_new(w.c, "slow");
    x = leash_lock_new(w.c, "slow");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    t0 = test_now_ms();
    CHECK_EQ_INT(leash_acquire(x, 300, fx_acquire_cb, &r), LEASH_OK);
    fx_run_until(w.loop, &r, 5000);
    took = r.at_ms - t0;
    CHECK_EQ_INT(r.status, LEASH_ETIMEDOUT);
    CHECK_MSG(took >= 300 && took <= 300 + TEST_SLACK_MS, "timed out after %lld ms, wanted 300",
              (long long)took);
    CHECK(!leash_held(x));
    fx_world_down(&w);
}

TEST(cancel_completes_from_the_loop) {
    fx_world w;
    leash_lock *h, *x;
    fx_result r = {0};

    fx_world_up(&w, 5000, 0);
    h = leash_lock_new(w.c, "cancel");
    x = leash_lock_new(w.c, "cancel");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(x, LEASH_WAIT_FOREVER, fx_acquire_cb, &r), LEASH_OK);
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(leash_cancel(x), LEASH_OK);
    CHECK_EQ_INT(r.calls, 0); /* not inside the call */
    CHECK_EQ_INT(leash_cancel(x), LEASH_ESTATE);
    fx_run_until(w.loop, &r, 1000);
    CHECK_EQ_INT(r.status, LEASH_ECANCELED);
    CHECK_EQ_INT(fx_release_sync(w.loop, h, 5000), LEASH_OK);
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(r.calls, 1);
    CHECK(!leash_held(x));
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "leash:cancel"), "leash:cancel"), 0);
    /* The handle is usable again. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, x, 0, 5000), LEASH_OK);
    fx_world_down(&w);
}

TEST(cancel_racing_a_grant_releases_it) {
    fx_world w;
    leash_lock *x;
    leash_client *c2;
    leash_lock *y;
    fx_result r = {0};
    int i;

    fx_world_up(&w, 5000, 0);
    c2 = fx_world_client(&w, 5000);
    y = leash_lock_new(c2, "race");
    for (i = 0; i < 20; i++) {
        memset(&r, 0, sizeof(r));
        x = leash_lock_new(w.c, "race");
        /* The attempt is on the wire and will be granted: cancel anyway. */
        CHECK_EQ_INT(leash_acquire(x, 0, fx_acquire_cb, &r), LEASH_OK);
        fx_run_for(w.loop, i % 3); /* 0, 1 or 2 ms: before or after the write */
        if (r.calls == 0) {
            CHECK_EQ_INT(leash_cancel(x), LEASH_OK);
            fx_run_until(w.loop, &r, 1000);
            CHECK_EQ_INT(r.status, LEASH_ECANCELED);
        } else {
            CHECK_EQ_INT(r.status, LEASH_OK);
            CHECK_EQ_INT(fx_release_sync(w.loop, x, 5000), LEASH_OK);
        }
        /* Whatever happened, nobody holds it now: another owner gets it. */
        CHECK_EQ_INT(fx_acquire_sync(w.loop, y, 1000, 5000), LEASH_OK);
        CHECK_EQ_INT(fx_release_sync(w.loop, y, 5000), LEASH_OK);
        leash_lock_free(x);
    }
    leash_client_free(c2);
    fx_world_down(&w);
}

TEST(release_while_acquiring_leaves_no_hold_and_no_watchdog) {
    fx_world w;
    leash_lock *x;
    fx_result ra = {0}, rr = {0};
    leash_stats before, after;

    fx_world_up(&w, 300, 0);
    x = leash_lock_new(w.c, "zombie");
    CHECK_EQ_INT(leash_acquire(x, 0, fx_acquire_cb, &ra), LEASH_OK);
    fx_run_for(w.loop, 0);
    CHECK_EQ_INT(leash_release(x, fx_release_cb, &rr), LEASH_OK);
    CHECK(!leash_held(x));
    fx_run_until(w.loop, &rr, 2000);
    CHECK_EQ_INT(ra.calls, 1);
    CHECK_EQ_INT(ra.status, LEASH_ECANCELED);
    CHECK(rr.status == LEASH_OK || rr.status == LEASH_ENOTHELD);
    leash_client_stats(w.c, &before);
    fx_run_for(w.loop, 400); /* more than a renew interval */
    leash_client_stats(w.c, &after);
    CHECK_EQ_INT((long long)(after.renew_commands - before.renew_commands), 0);
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "leash:zombie"), "leash:zombie"), 0);
    fx_world_down(&w);
}

/* The loop stalls (a long callback, a stopped process) after the attempt
 * went out and reads the grant only after its lease ran out: nothing of
 * it can be trusted, it is given back, and a wait with time left tries
 * again and gets the lock, instead of ending LEASH_ECONN. */
TEST(a_grant_read_after_its_lease_ran_out_is_tried_again_while_the_wait_has_time) {
    fx_world w;
    leash_lock *l;
    fx_result got = {0};

    fx_world_up(&w, 300, 0);
    l = leash_lock_new(w.c, "stalled");
    fx_acquire_unread(&w, l, "leash:stalled", 5000, &got);
    usleep(400 * 1000); /* the answer waits in the socket past the lease */
    fx_log_clear();
    fx_run_until(w.loop, &got, 3000);
    CHECK(fx_log_contains("granted after its lease ran out"));
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK(leash_held(l));
    CHECK(leash_valid_ms(l) > 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_lock_free(l);
    fx_world_down(&w);
}

/* The program, not Redis, was silent: its loop did not run for longer than
 * the command timeout (a callback that blocked) while the answer came. */
TEST(a_loop_that_stalls_past_the_command_timeout_keeps_its_connections) {
    fx_world w;
    leash_lock *l;
    fx_result got = {0};

    fx_world_up(&w, 5000, 300);
    l = leash_lock_new(w.c, "stalled-loop");
    fx_acquire_unread(&w, l, "leash:stalled-loop", 0, &got);
    usleep(500 * 1000);
    fx_log_clear();
    fx_run_until(w.loop, &got, 3000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK(!fx_log_contains("no reply for"));
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    fx_world_down(&w);
}

/* The same when the loop stalls past a wait's end + command_timeout_ms
 * with the attempt's answer in the socket: the answer, read late, decides
 * (the acquire's own timer for slow answers gives it that turn). */
TEST(a_loop_that_stalls_past_a_waits_bound_reads_its_answer_first) {
    fx_world w;
    leash_lock *l;
    fx_result got = {0};

    fx_world_up(&w, 5000, 300);
    l = leash_lock_new(w.c, "stalled-wait");
    fx_acquire_unread(&w, l, "leash:stalled-wait", 100, &got);
    usleep(600 * 1000);
    fx_run_until(w.loop, &got, 3000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK(leash_held(l));
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_lock_free(l);
    fx_world_down(&w);
}

/* A lock state read's answer that waits unread through a stall of the
 * loop past the read's deadline (command_timeout_ms) is read first. */
static void stalled_read_cb(const leash_state *st, int status, void *arg) {
    fx_result *r = arg;

    (void)st;
    r->done = 1;
    r->calls++;
    r->status = status;
}

TEST(a_loop_that_stalls_past_a_reads_deadline_reads_its_answer_first) {
    fx_world w;
    leash_lock *l;
    fx_result got = {0};
    int tries;

    fx_world_up(&w, 5000, 300);
    l = leash_lock_new(w.c, "stalled-read");
    /* The first read finds the way (a cluster's map, the scripts). */
    CHECK_EQ_INT(leash_lock_state(l, stalled_read_cb, &got), LEASH_OK);
    fx_run_until(w.loop, &got, 3000);
    for (tries = 0; tries < 20; tries++) {
        memset(&got, 0, sizeof(got));
        CHECK_EQ_INT(leash_lock_state(l, stalled_read_cb, &got), LEASH_OK);
        fx_run_nowait(w.loop); /* the read goes out */
        if (!got.done)
            break;
        /* Its answer was read in the same turn: again. */
    }
    CHECK_MSG(!got.done, "the answer was always read before the stall");
    usleep(600 * 1000);
    fx_run_until(w.loop, &got, 3000);
    CHECK_EQ_INT(got.calls, 1);
    CHECK_EQ_INT(got.status, LEASH_OK);
    leash_lock_free(l);
    fx_world_down(&w);
}

TEST(wrongtype_key_gives_eredis_and_client_stays_usable) {
    fx_world w;
    leash_lock *x, *y;

    fx_world_up(&w, 5000, 0);
    /* On every server the key lives on: with Redlock, a majority refuses. */
    CHECK_EQ_INT(fx_key_cmd(&w, "leash:plain-string", "SET leash:plain-string hello"), FX_COPIES);
    x = leash_lock_new(w.c, "plain-string");
    fx_log_clear();
    CHECK_EQ_INT(fx_acquire_sync(w.loop, x, 0, 5000), LEASH_EREDIS);
    CHECK(fx_log_contains("WRONGTYPE"));
    CHECK_EQ_INT(fx_acquire_sync(w.loop, x, 1000, 5000), LEASH_EREDIS);
    y = leash_lock_new(w.c, "fine");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, y, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, y, 5000), LEASH_OK);
    fx_world_down(&w);
}

/* The name's share of a log line is bounded: the Redis error after it
 * must be in the line (a 512-byte name used to push it out). */
TEST(a_long_name_leaves_the_redis_error_in_the_log_line) {
    char name[LEASH_NAME_MAX + 1], key[LEASH_NAME_MAX + 16];
    fx_world w;
    leash_lock *x;

    memset(name, 'n', LEASH_NAME_MAX);
    name[LEASH_NAME_MAX] = '\0';
    snprintf(key, sizeof(key), "leash:%s", name);
    fx_world_up(&w, 5000, 0);
    CHECK_EQ_INT(fx_key_cmd(&w, key, "SET %s hello", key), FX_COPIES);
    x = leash_lock_new(w.c, name);
    CHECK(x != NULL);
    fx_log_clear();
    CHECK_EQ_INT(fx_acquire_sync(w.loop, x, 0, 5000), LEASH_EREDIS);
    CHECK(fx_log_contains("Redis error: WRONGTYPE"));
    CHECK(fx_log_contains("...(512 bytes)"));
    fx_world_down(&w);
}

/* The trace of the machine (set_state, at debug level): one try-once
 * acquire and its release are these three lines, in this order, and no
 * other change of state of the handle. */
TEST(a_debug_log_traces_each_change_of_state) {
    static const char *const path[] = {
        "STATE: IDLE => ATTEMPT (ACQUIRE) lock traced\n",
        "STATE: ATTEMPT => HELD (GRANTED) lock traced\n",
        "STATE: HELD => IDLE (RELEASE) lock traced\n",
    };
    fx_world w;
    leash_lock *x;

    fx_world_up(&w, 5000, 0);
    x = leash_lock_new(w.c, "traced");
    CHECK(x != NULL);
    fx_log_clear();
    CHECK_EQ_INT(fx_acquire_sync(w.loop, x, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, x, 5000), LEASH_OK);
    /* Each line in order, and these three only. */
    CHECK_EQ_INT(fx_log_state_path("traced", path, sizeof(path) / sizeof(path[0])), 3);
    leash_lock_free(x);
    fx_world_down(&w);
}

#define MANY 20000
static int many_acquired, many_released, many_failed;

static void many_released_cb(leash_lock *l, int status, void *arg) {
    (void)l;
    (void)arg;
    if (status == LEASH_OK)
        many_released++;
    else
        many_failed++;
}

static void many_acquired_cb(leash_lock *l, int status, void *arg) {
    (void)arg;
    if (status != LEASH_OK) {
        many_failed++;
        return;
    }
    many_acquired++;
    CHECK_EQ_INT(leash_release(l, many_released_cb, NULL), LEASH_OK);
}

TEST(twenty_thousand_locks_on_one_client) {
    fx_world w;
    static leash_lock *locks[MANY];
    char name[32];
    int i, guard = 0;

    fx_world_up(&w, 30000, 0);
    for (i = 0; i < MANY; i++) {
        snprintf(name, sizeof(name), "many:%d", i);
        locks[i] = leash_lock_new(w.c, name);
        CHECK(locks[i] != NULL);
        CHECK_EQ_INT(leash_acquire(locks[i], 10000, many_acquired_cb, NULL), LEASH_OK);
    }
    while (many_released + many_failed < MANY && guard++ < 3000)
        fx_run_for(w.loop, 10);
    CHECK_EQ_INT(many_failed, 0);
    CHECK_EQ_INT(many_acquired, MANY);
    CHECK_EQ_INT(many_released, MANY);
#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
    /* A release is reported once M servers released (quorum.c): the first
     * server may still be working through its copies, written but unheard. */
    for (i = 0; i < 500 && fx_dbsize(&w) > 0; i++)
        fx_run_for(w.loop, 10);
#endif
    CHECK_EQ_INT(fx_dbsize(&w), 0); /* no leash:many:* key left (nor any other) */
    for (i = 0; i < MANY; i++)
        leash_lock_free(locks[i]);
    fx_world_down(&w);
}

/* ---- force release ---- */

TEST(force_release_wakes_the_waiters_of_every_client) {
    fx_world w;
    leash_client *holder_client, *admin_client;
    leash_lock *holder, *waiter, *admin;
    fx_result got = {0}, forced = {0};

    fx_world_up(&w, 5000, 0);
    holder_client = fx_world_client(&w, 5000);
    admin_client = fx_world_client(&w, 5000);
    holder = leash_lock_new(holder_client, "stuck");
    /* A fixed lease of 10 s: only the force release can end it sooner. */
    CHECK_EQ_INT(leash_lock_set_fixed_lease(holder, 10000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    waiter = leash_lock_new(w.c, "stuck");
    CHECK_EQ_INT(leash_acquire(waiter, 20000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_for(w.loop, 200);
    CHECK_EQ_INT(got.calls, 0);

    admin = leash_lock_new(admin_client, "stuck");
    CHECK_EQ_INT(leash_force_release(admin, fx_release_cb, &forced), LEASH_OK);
    CHECK_EQ_INT(forced.calls, 0); /* never inside the call */
    fx_run_until(w.loop, &forced, 5000);
    CHECK_EQ_INT(forced.status, LEASH_OK);
    CHECK(fx_log_contains("force-released"));
    fx_run_until(w.loop, &got, 5000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_MSG(got.at_ms - forced.at_ms <= TEST_SLACK_MS, "woken %lld ms after the force release",
              (long long)(got.at_ms - forced.at_ms));
    CHECK(leash_fence(waiter) > leash_fence(holder));

    /* Nobody holds it any more: a second one finds nothing to remove. */
    CHECK_EQ_INT(fx_release_sync(w.loop, waiter, 5000), LEASH_OK);
    forced = (fx_result){0};
    CHECK_EQ_INT(leash_force_release(admin, fx_release_cb, &forced), LEASH_OK);
    fx_run_until(w.loop, &forced, 5000);
    CHECK_EQ_INT(forced.status, LEASH_ENOTHELD);
    /* The old holder's release is told the truth, and removes nothing. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, admin, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 5000), LEASH_ENOTHELD);
    CHECK(leash_held(admin));
    CHECK_EQ_INT(fx_release_sync(w.loop, admin, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "leash:stuck"), "leash:stuck"), 0);
    leash_client_free(admin_client);
    leash_client_free(holder_client);
    fx_world_down(&w);
}

TEST(force_released_holder_is_lost_at_its_next_renewal) {
    fx_world w;
    leash_client *admin_client;
    leash_lock *holder, *admin;
    fx_result lost = {0}, forced = {0};

    fx_world_up(&w, 300, 0); /* renewed every 100 ms */
    admin_client = fx_world_client(&w, 5000);
    holder = leash_lock_new(w.c, "job");
    leash_on_lost(holder, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    admin = leash_lock_new(admin_client, "job");
    CHECK_EQ_INT(leash_force_release(admin, fx_release_cb, &forced), LEASH_OK);
    fx_run_until(w.loop, &forced, 5000);
    CHECK_EQ_INT(forced.status, LEASH_OK);
    fx_run_until(w.loop, &lost, 2000);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    CHECK_MSG(lost.at_ms - forced.at_ms <= 100 + TEST_SLACK_MS,
              "lost %lld ms after the force release", (long long)(lost.at_ms - forced.at_ms));
    CHECK(!leash_held(holder));
    CHECK_EQ_INT(leash_release(holder, NULL, NULL), LEASH_ESTATE);
    leash_client_free(admin_client);
    fx_world_down(&w);
}

static void take_over_cb(leash_lock *l, int status, void *arg) {
    fx_result *r = arg;
    CHECK_EQ_INT(status, LEASH_OK);
    /* From inside the callback: the handle is idle again, and may acquire. */
    CHECK_EQ_INT(leash_acquire(l, 0, fx_acquire_cb, r), LEASH_OK);
}

/* Redis forgot the scripts (restart, SCRIPT FLUSH): a force release and an
 * acquire issued right after it must still run in that order. */
TEST(force_release_runs_before_what_follows_it_after_a_script_flush) {
    fx_world w;
    leash_client *holder_client;
    leash_lock *holder, *admin, *taker;
    fx_result forced = {0}, got = {0};

    fx_world_up(&w, 5000, 0);
    holder_client = fx_world_client(&w, 5000);
    holder = leash_lock_new(holder_client, "flushed");
    admin = leash_lock_new(w.c, "flushed");
    taker = leash_lock_new(w.c, "flushed");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    fx_all(&w, "SCRIPT FLUSH");
    /* The acquire script is cached again; the force script is not. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, taker, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(leash_force_release(admin, fx_release_cb, &forced), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(taker, 0, fx_acquire_cb, &got), LEASH_OK);
    fx_run_until(w.loop, &forced, 5000);
    fx_run_until(w.loop, &got, 5000);
    CHECK_EQ_INT(forced.status, LEASH_OK);
    CHECK_EQ_INT(got.status, LEASH_OK);
    fx_run_for(w.loop, 50);
    CHECK(leash_held(taker));
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "leash:flushed"), "leash:flushed"), 1);
    CHECK_EQ_INT(fx_release_sync(w.loop, taker, 5000), LEASH_OK);
    leash_client_free(holder_client);
    fx_world_down(&w);
}

TEST(force_release_leaves_a_key_that_is_not_a_lock_alone) {
    fx_world w;
    leash_lock *admin;

    fx_world_up(&w, 5000, 0);
    /* On every server the key lives on (Redlock: not a lock anywhere). */
    CHECK_EQ_INT(fx_key_cmd(&w, "leash:app-data", "SET leash:app-data precious"), FX_COPIES);
    admin = leash_lock_new(w.c, "app-data");
    fx_log_clear();
    CHECK_EQ_INT(fx_force_release_sync(w.loop, admin, 5000), LEASH_EREDIS);
    CHECK(fx_log_contains("WRONGTYPE"));
    /* Left alone on every copy, not only the first server's. */
    CHECK_EQ_INT(fx_key_cmd(&w, "leash:app-data", "EXISTS leash:app-data"), FX_COPIES);
    fx_world_down(&w);
}

TEST(force_release_is_refused_on_a_busy_handle) {
    fx_world w;
    leash_lock *a, *b;
    fx_result got = {0}, forced = {0};

    fx_world_up(&w, 5000, 0);
    a = leash_lock_new(w.c, "busy");
    b = leash_lock_new(w.c, "busy");
    CHECK_EQ_INT(leash_force_release(NULL, NULL, NULL), LEASH_EINVAL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    fx_log_clear();
    CHECK_EQ_INT(leash_force_release(a, fx_release_cb, &forced), LEASH_ESTATE);
    CHECK(fx_log_contains("holds the lock; use leash_release"));
    CHECK_EQ_INT(leash_acquire(b, 5000, fx_acquire_cb, &got), LEASH_OK);
    CHECK_EQ_INT(leash_force_release(b, fx_release_cb, &forced), LEASH_ESTATE);
    CHECK(fx_log_contains("is acquiring it; use leash_cancel"));
    CHECK_EQ_INT(leash_cancel(b), LEASH_OK);
    fx_run_until(w.loop, &got, 5000);
    CHECK_EQ_INT(got.status, LEASH_ECANCELED);
    CHECK(leash_held(a));
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(forced.calls, 0); /* refused calls never call back */

    /* b takes over from a: force release, then acquire from the callback. */
    got = (fx_result){0};
    CHECK_EQ_INT(leash_force_release(b, take_over_cb, &got), LEASH_OK);
    CHECK_EQ_INT(leash_force_release(b, NULL, NULL), LEASH_ESTATE);
    CHECK(fx_log_contains("a release is in flight"));
    fx_run_until(w.loop, &got, 5000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK(leash_held(b));
    CHECK_EQ_INT(fx_release_sync(w.loop, b, 5000), LEASH_OK);
    fx_world_down(&w);
}

#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
/* A queue needs one server that orders it (leash.h, "The lock family"). */
TEST(lock_family_constructors_return_null_on_redlock) {
    fx_world w;
    leash_lock *mutex;

    fx_world_up(&w, 5000, 0);
    fx_log_clear();
    CHECK(leash_fair_lock_new(w.c, "family") == NULL);
    CHECK(fx_log_contains("edlock") || fx_log_contains("EDLOCK"));
    CHECK(leash_read_lock_new(w.c, "family") == NULL);
    CHECK(leash_write_lock_new(w.c, "family") == NULL);
    CHECK(leash_semaphore_new(w.c, "family", 3) == NULL);
    /* The mutex of the same name is fine. */
    mutex = leash_lock_new(w.c, "family");
    CHECK(mutex != NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, mutex, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, mutex, 5000), LEASH_OK);
    fx_world_down(&w);
}
#endif

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(exclusion_between_two_clients),
        TEST_CASE(exclusion_between_two_handles_of_one_client),
        TEST_CASE(fence_grows_across_holds),
#ifndef LEASH_TEST_TOPOLOGY_REDLOCK
        TEST_CASE(an_uncontended_cycle_costs_six_redis_calls_and_leaves_nothing),
#endif
        TEST_CASE(reentrant_holds_are_counted),
        TEST_CASE(extra_hold_of_a_vanished_hold_is_lost_not_recreated),
        TEST_CASE(non_reentrant_handle_refuses_a_second_hold),
        TEST_CASE(local_waiters_are_served_in_fifo_order),
        TEST_CASE(wait_timeout_is_on_time),
        TEST_CASE(cancel_completes_from_the_loop),
        TEST_CASE(cancel_racing_a_grant_releases_it),
        TEST_CASE(release_while_acquiring_leaves_no_hold_and_no_watchdog),
        TEST_CASE(a_grant_read_after_its_lease_ran_out_is_tried_again_while_the_wait_has_time),
        TEST_CASE(a_loop_that_stalls_past_the_command_timeout_keeps_its_connections),
        TEST_CASE(a_loop_that_stalls_past_a_waits_bound_reads_its_answer_first),
        TEST_CASE(a_loop_that_stalls_past_a_reads_deadline_reads_its_answer_first),
        TEST_CASE(wrongtype_key_gives_eredis_and_client_stays_usable),
        TEST_CASE(a_long_name_leaves_the_redis_error_in_the_log_line),
        TEST_CASE(a_debug_log_traces_each_change_of_state),
        TEST_CASE(force_release_wakes_the_waiters_of_every_client),
        TEST_CASE(force_released_holder_is_lost_at_its_next_renewal),
        TEST_CASE(force_release_runs_before_what_follows_it_after_a_script_flush),
        TEST_CASE(force_release_leaves_a_key_that_is_not_a_lock_alone),
        TEST_CASE(force_release_is_refused_on_a_busy_handle),
        TEST_CASE_T(twenty_thousand_locks_on_one_client, 90),
#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
        TEST_CASE(lock_family_constructors_return_null_on_redlock),
#endif
        {0},
    };
    return fx_main(argc, argv, cases);
}
