/* SPDX-License-Identifier: MIT */
#define _DEFAULT_SOURCE 1 /* usleep */
/* The watchdog, the local deadline and the lost callback, with 300 ms
 * leases (renewed every 100 ms). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "fixture.h"

#define LEASE 300
#define RENEW (LEASE / 3)

/* A held lock with its lost callback recorded in *lost. */
static leash_lock *hold(fx_world *w, const char *name, fx_result *lost) {
    leash_lock *l = leash_lock_new(w->c, name);
    CHECK(l != NULL);
    leash_on_lost(l, fx_lost_cb, lost);
    CHECK_EQ_INT(fx_acquire_sync(w->loop, l, 0, 5000), LEASH_OK);
    CHECK(leash_held(l));
    return l;
}

static int64_t absolute_deadline(const leash_lock *l) {
    return test_now_ms() + leash_valid_ms(l);
}

TEST(watchdog_keeps_a_short_lease_alive) {
    fx_world w;
    fx_result lost = {0};
    leash_lock *l;
    int64_t t0, end;
    long long pttl;

    fx_world_up(&w, LEASE, 0);
    t0 = test_now_ms();
    l = hold(&w, "long-job", &lost);
    /* The deadline counts from the moment the acquire was sent. */
    CHECK_MSG(leash_valid_ms(l) > LEASE - (test_now_ms() - t0) - 20 && leash_valid_ms(l) < LEASE,
              "valid for %lld ms, %lld ms after asking", (long long)leash_valid_ms(l),
              (long long)(test_now_ms() - t0));
    end = test_now_ms() + 3000; /* ten leases */
    while (test_now_ms() < end) {
        fx_run_for(w.loop, 50);
        CHECK_MSG(leash_held(l), "hold dropped at %lld ms before the end",
                  (long long)(end - test_now_ms()));
        pttl = test_redis_int(fx_redis_of(&w, "leash:long-job"), "PTTL leash:long-job");
        CHECK_MSG(pttl > 0 && pttl <= LEASE, "PTTL %lld", pttl);
    }
    CHECK_EQ_INT(lost.calls, 0);
    CHECK_MSG(leash_renewals(l) >= 20, "only %llu renewals in 3 s",
              (unsigned long long)leash_renewals(l));
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "leash:long-job"), "leash:long-job"), 0);
    fx_world_down(&w);
}

TEST(fixed_lease_expires_and_is_reported_lost) {
    fx_world w;
    fx_result lost = {0};
    leash_lock *l = NULL;
    int64_t deadline;

    fx_world_up(&w, LEASE, 0);
    l = leash_lock_new(w.c, "fixed");
    CHECK_EQ_INT(leash_lock_set_fixed_lease(l, LEASE), LEASH_OK);
    leash_on_lost(l, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    deadline = absolute_deadline(l);
    fx_run_until(w.loop, &lost, 2000);
    CHECK_EQ_INT(lost.status, LEASH_LOST_FIXED_LEASE);
    CHECK_MSG(lost.at_ms <= deadline + TEST_SLACK_MS, "lost %lld ms after the deadline",
              (long long)(lost.at_ms - deadline));
    CHECK(!leash_held(l));
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "leash:fixed"), "leash:fixed"), 0);
    CHECK_EQ_INT(lost.calls, 1);
    CHECK_EQ_INT(leash_release(l, NULL, NULL), LEASH_ESTATE);
    fx_world_down(&w);
}

TEST(max_hold_ends_in_lost_max_hold) {
    fx_world w;
    fx_result lost = {0};
    leash_lock *l;
    int64_t t0, granted, now;

    fx_world_up(&w, LEASE, 0);
    l = leash_lock_new(w.c, "capped");
    CHECK_EQ_INT(leash_lock_set_max_hold(l, 700), LEASH_OK);
    leash_on_lost(l, fx_lost_cb, &lost);
    t0 = test_now_ms();
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    granted = test_now_ms();
    /* Renewed every 100 ms, yet never guaranteed past the maximum, where
     * the key is given back: a waiter may be granted it then. */
    fx_run_for(w.loop, 620);
    now = test_now_ms();
    CHECK_MSG(leash_valid_ms(l) == 0 || now + leash_valid_ms(l) <= granted + 700,
              "valid for %lld ms more at %lld ms, beyond the maximum", (long long)leash_valid_ms(l),
              (long long)(now - granted));
    fx_run_until(w.loop, &lost, 3000);
    CHECK_EQ_INT(lost.status, LEASH_LOST_MAX_HOLD);
    CHECK_MSG(lost.at_ms - t0 >= 690 && lost.at_ms - t0 <= 700 + TEST_SLACK_MS, "after %lld ms",
              (long long)(lost.at_ms - t0));
    CHECK(!leash_held(l));
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "leash:capped"), "leash:capped"),
                 0); /* released, not left to expire */
    fx_world_down(&w);
}

TEST(key_deleted_behind_our_back_is_lost_expired) {
    fx_world w;
    fx_result lost = {0};
    leash_lock *l;
    int64_t t0;

    fx_world_up(&w, LEASE, 0);
    l = hold(&w, "deleted", &lost);
    fx_run_for(w.loop, 150);
    /* Every copy (Redlock: on all N, so no majority renews it). */
    CHECK_EQ_INT(fx_key_cmd(&w, "leash:deleted", "DEL leash:deleted"), FX_COPIES);
    t0 = test_now_ms();
    fx_run_until(w.loop, &lost, 2000);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    CHECK_MSG(lost.at_ms - t0 <= RENEW + TEST_SLACK_MS, "lost %lld ms after the delete",
              (long long)(lost.at_ms - t0));
    CHECK(!leash_held(l));
    fx_run_for(w.loop, 300);
    CHECK_EQ_INT(lost.calls, 1);
    fx_world_down(&w);
}

TEST(key_taken_over_by_another_token_is_lost_expired) {
    fx_world w;
    fx_result lost = {0};
    leash_lock *l;
    redisReply *rep;
    int64_t t0;

    fx_world_up(&w, LEASE, 0);
    l = hold(&w, "stolen", &lost);
    /* Every copy is taken over (Redlock: on all N); PEXPIRE answers 1 each. */
    CHECK_EQ_INT(fx_key_cmd(&w, "leash:stolen", "EVAL %s 1 leash:stolen",
                            "redis.call('del', KEYS[1]); redis.call('hset', KEYS[1], 'thief', 1); "
                            "return redis.call('pexpire', KEYS[1], 60000)"),
                 FX_COPIES);
    t0 = test_now_ms();
    fx_run_until(w.loop, &lost, 2000);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    CHECK(lost.at_ms - t0 <= RENEW + TEST_SLACK_MS);
    CHECK(!leash_held(l));
    /* The thief's hold is untouched: a loss never deletes another owner. */
    CHECK_EQ_INT(test_redis_int(fx_redis_of(&w, "leash:stolen"), "HGET leash:stolen thief"), -1);
    rep = test_redis_cmd(fx_redis_of(&w, "leash:stolen"), "HGET leash:stolen thief");
    CHECK(rep && rep->type == REDIS_REPLY_STRING);
    freeReplyObject(rep);
    /* Untouched on every copy: the loss sent nothing that removed one. */
    CHECK_EQ_INT(fx_key_cmd(&w, "leash:stolen", "HEXISTS leash:stolen thief"), FX_COPIES);
    fx_world_down(&w);
}

/* A renewal written just before the key's server froze (SIGSTOP) waits in
 * its socket; the client gives up on it after the command timeout. When the
 * server thaws, that copy runs late: it must not set a fresh lease (the
 * holder, or a release that already reported, counts on the old one). The
 * key's server here: the one server, the key's master in a cluster (frozen
 * for less than the cluster's node timeout, 500 ms: no failover), one of
 * Redlock's five (the others keep renewing the hold). */
TEST(a_renewal_that_runs_late_does_not_extend_the_lease) {
    enum {
        LATE_LEASE = 600, /* renewals every 200 ms */
        TIMEOUT = 150,
        FROZEN = 420
    };
    fx_world w;
    fx_result lost = {0};
    leash_lock *l;
    test_redis *r;
    uint64_t renewals;
    int64_t end;
    long long pttl;

    fx_world_up(&w, LATE_LEASE, TIMEOUT);
    l = hold(&w, "late-renewal", &lost);
    r = fx_redis_of(&w, "leash:late-renewal");
    /* Right after a renewal: the next one falls due in the freeze. */
    renewals = leash_renewals(l);
    end = test_now_ms() + 2000;
    while (leash_renewals(l) == renewals && test_now_ms() < end)
        fx_run_for(w.loop, 2);
    CHECK_MSG(leash_renewals(l) > renewals, "no renewal within 2 s");
    test_redis_freeze(r);
    /* The renewal goes into the frozen server's socket at about 200 ms;
     * its connection is given up 150 ms later. */
    fx_run_for(w.loop, FROZEN);
    test_redis_thaw(r);
    /* The loop stays still: the client neither reconnects nor renews
     * again before the PTTL is read; only the copy in the socket ran. */
    usleep(80 * 1000);
    pttl = test_redis_int(r, "PTTL leash:late-renewal");
    CHECK_MSG(pttl < LATE_LEASE - FROZEN + TEST_SLACK_MS,
              "PTTL %lld ms: the late renewal set a fresh lease", pttl);
    /* Held or lost by its deadline meanwhile: either way it ends. */
    fx_run_for(w.loop, 100);
    (void)fx_release_sync(w.loop, l, 5000);
    fx_world_down(&w);
}

/* The process stalls (a callback that blocks, a descheduled or paused
 * process) between writing an acquire and reading its answer: the
 * server's clock in that answer is read STALL ms late. The renewals of
 * another hold on the same connection must still run: the clock offset
 * the connection keeps is a lower bound, and a sample read late must not
 * lower it below what an earlier one showed (the renewals' "not after"
 * stamps would lie in the past, every renewal would do nothing, and the
 * hold would be lost with its server well). */
TEST(a_stall_before_an_answer_is_read_does_not_void_the_renewals) {
    enum {
        STALL_LEASE = 900, /* renewals every 300 ms */
        TIMEOUT = 150,
        STALL = 400
    };
    fx_world w;
    fx_result lost = {0}, got = {0};
    leash_lock *l, *m = NULL;
    test_redis *r;
    int64_t end;
    int tries;

    fx_world_up(&w, STALL_LEASE, TIMEOUT);
    l = hold(&w, "{stall}held", &lost);
    r = fx_redis_of(&w, "leash:{stall}other");
    for (tries = 0; tries < 20; tries++) {
        char name[32];
        snprintf(name, sizeof(name), "{stall}other%d", tries);
        m = leash_lock_new(w.c, name);
        memset(&got, 0, sizeof(got));
        CHECK_EQ_INT(leash_acquire(m, 0, fx_acquire_cb, &got), LEASH_OK);
        end = test_now_ms() + 2000;
        snprintf(name, sizeof(name), "leash:{stall}other%d", tries);
        /* Turn the loop until the server ran the acquire, not one turn more. */
        while (fx_redis_exists(r, name) == 0 && test_now_ms() < end) {
            fx_run_nowait(w.loop);
            usleep(2000);
        }
        if (!got.done)
            break;
        /* Its answer was read in the same turn: try another name. */
        CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
        leash_lock_free(m);
        m = NULL;
    }
    CHECK_MSG(m != NULL, "the answer was always read before the stall");
    usleep(STALL * 1000);
    fx_run_until(w.loop, &got, 2000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    /* Two leases: the hold is renewed all along. */
    fx_run_for(w.loop, 2 * STALL_LEASE);
    CHECK_MSG(lost.calls == 0, "hold lost (%s) with its server well",
              leash_lost_reason_name(lost.status));
    CHECK(leash_held(l));
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 5000), LEASH_OK);
    fx_world_down(&w);
}

#ifdef LEASH_TEST_ONE_SERVER
/* One server by nature, up to the #endif: they stop (SIGSTOP) or restart
 * it. */
TEST(frozen_server_is_lost_unreachable_by_the_deadline) {
    fx_world w;
    fx_result lost = {0};
    leash_lock *l;
    int64_t deadline;

    fx_world_up(&w, LEASE, 0);
    l = hold(&w, "frozen", &lost);
    fx_run_for(w.loop, 120);
    test_redis_freeze(&w.r);
    deadline = absolute_deadline(l);
    fx_run_until(w.loop, &lost, 3000);
    test_redis_thaw(&w.r);
    CHECK_EQ_INT(lost.status, LEASH_LOST_UNREACHABLE);
    CHECK_MSG(lost.at_ms <= deadline + TEST_SLACK_MS, "lost %lld ms after the local deadline",
              (long long)(lost.at_ms - deadline));
    CHECK(!leash_held(l));
    /* Back to normal once the server is: the same handle takes it again. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 3000, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 5000), LEASH_OK);
    fx_world_down(&w);
}

TEST(server_restarted_without_data_is_lost_then_works_again) {
    fx_world w;
    fx_result lost = {0};
    leash_lock *l, *m;

    fx_world_up(&w, LEASE, 0);
    l = hold(&w, "restart", &lost);
    CHECK_EQ_INT(test_redis_restart(&w.r), 0);
    fx_run_until(w.loop, &lost, 3000);
    CHECK(lost.status == LEASH_LOST_EXPIRED || lost.status == LEASH_LOST_UNREACHABLE);
    CHECK(!leash_held(l));
    m = leash_lock_new(w.c, "restart-other");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 2000, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 2000, 5000), LEASH_OK);
    fx_run_for(w.loop, 2 * LEASE);
    CHECK(leash_held(l)); /* renewed on the new server */
    CHECK_EQ_INT(lost.calls, 1);
    fx_world_down(&w);
}

TEST(release_stops_the_watchdog_at_once) {
    fx_world w;
    fx_result lost = {0}, rel = {0};
    leash_lock *l;
    leash_stats a, b;

    fx_world_up(&w, LEASE, 0);
    l = hold(&w, "stop", &lost);
    test_redis_freeze(&w.r); /* the release cannot even be answered */
    CHECK_EQ_INT(leash_release(l, fx_release_cb, &rel), LEASH_OK);
    CHECK(!leash_held(l));
    CHECK_EQ_INT(leash_valid_ms(l), 0);
    leash_client_stats(w.c, &a);
    fx_run_for(w.loop, 2 * LEASE);
    leash_client_stats(w.c, &b);
    CHECK_EQ_INT((long long)(b.renew_commands - a.renew_commands), 0);
    CHECK_EQ_INT(lost.calls, 0);
    test_redis_thaw(&w.r);
    fx_run_until(w.loop, &rel, 3000);
    /* The lease ran out while the server slept: Redis says so, truthfully. */
    CHECK_EQ_INT(rel.status, LEASH_ENOTHELD);
    fx_world_down(&w);
}
#endif

/* A program that blocks its loop past the deadline: the lost callback can
 * only come once the loop runs again, but leash_held() is already false. */
TEST(held_turns_false_at_the_deadline_while_the_loop_is_blocked) {
    fx_world w;
    fx_result lost = {0};
    leash_lock *l;
    int64_t deadline;

    fx_world_up(&w, LEASE, 0);
    l = hold(&w, "blocked", &lost);
    deadline = absolute_deadline(l);
    while (test_now_ms() <= deadline)
        usleep(10 * 1000);
    CHECK(!leash_held(l));
    CHECK_EQ_INT(leash_valid_ms(l), 0);
    CHECK_EQ_INT(lost.calls, 0);
    fx_run_until(w.loop, &lost, 2000);
    CHECK_MSG(lost.status == LEASH_LOST_UNREACHABLE || lost.status == LEASH_LOST_EXPIRED, "lost %s",
              leash_lost_reason_name(lost.status));
    CHECK_EQ_INT(lost.calls, 1);
    fx_run_for(w.loop, RENEW);
    CHECK_EQ_INT(lost.calls, 1);
    CHECK(!leash_held(l));
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "leash:blocked"), "leash:blocked"), 0);
    /* The handle is free again, and takes the lock like any other. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 5000), LEASH_OK);
    fx_world_down(&w);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(watchdog_keeps_a_short_lease_alive),
        TEST_CASE(fixed_lease_expires_and_is_reported_lost),
        TEST_CASE(max_hold_ends_in_lost_max_hold),
        TEST_CASE(key_deleted_behind_our_back_is_lost_expired),
        TEST_CASE(key_taken_over_by_another_token_is_lost_expired),
        TEST_CASE(a_renewal_that_runs_late_does_not_extend_the_lease),
        TEST_CASE(a_stall_before_an_answer_is_read_does_not_void_the_renewals),
#ifdef LEASH_TEST_ONE_SERVER
        /* One server by nature: they stop (SIGSTOP) or restart it. */
        TEST_CASE(frozen_server_is_lost_unreachable_by_the_deadline),
        TEST_CASE(server_restarted_without_data_is_lost_then_works_again),
        TEST_CASE(release_stops_the_watchdog_at_once),
#endif
        TEST_CASE(held_turns_false_at_the_deadline_while_the_loop_is_blocked),
        {0},
    };
    return fx_main(argc, argv, cases);
}
