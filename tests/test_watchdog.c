/* The watchdog, the local deadline and the lost callback, with 300 ms
 * leases (renewed every 100 ms). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "fixture.h"

#define LEASE 300
#define RENEW (LEASE / 3)

typedef struct world {
    test_redis r;
    fx_loop *loop;
    leash_client *c;
} world;

static void world_up(world *w) {
    CHECK_EQ_INT(test_redis_start(&w->r, NULL), 0);
    w->loop = fx_loop_new();
    w->c = fx_client(w->loop, &w->r, LEASE);
    fx_wait_connected(w->loop, w->c, 5000);
}

static void world_down(world *w) {
    leash_client_free(w->c);
    test_redis_stop(&w->r);
    fx_loop_free(w->loop);
}

/* A held lock with its lost callback recorded in *lost. */
static leash_lock *hold(world *w, const char *name, fx_result *lost) {
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
    world w;
    fx_result lost = {0};
    leash_lock *l;
    int64_t end;
    long long pttl;

    world_up(&w);
    l = hold(&w, "long-job", &lost);
    CHECK(leash_valid_ms(l) > LEASE - 20 && leash_valid_ms(l) <= LEASE);
    end = test_now_ms() + 3000; /* ten leases */
    while (test_now_ms() < end) {
        fx_run_for(w.loop, 50);
        CHECK_MSG(leash_held(l), "hold dropped at %lld ms before the end",
                  (long long)(end - test_now_ms()));
        pttl = test_redis_int(&w.r, "PTTL leash:long-job");
        CHECK_MSG(pttl > 0 && pttl <= LEASE, "PTTL %lld", pttl);
    }
    CHECK_EQ_INT(lost.calls, 0);
    CHECK_MSG(leash_renewals(l) >= 25, "only %llu renewals in 3 s",
              (unsigned long long)leash_renewals(l));
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_redis_exists(&w.r, "leash:long-job"), 0);
    world_down(&w);
}

TEST(fixed_lease_expires_and_is_reported_lost) {
    world w;
    fx_result lost = {0};
    leash_lock *l = NULL;
    int64_t deadline;

    world_up(&w);
    l = leash_lock_new(w.c, "fixed");
    CHECK_EQ_INT(leash_lock_set_fixed_lease(l, LEASE), LEASH_OK);
    leash_on_lost(l, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    deadline = absolute_deadline(l);
    fx_run_until(w.loop, &lost, 2000);
    CHECK_EQ_INT(lost.status, LEASH_LOST_FIXED_LEASE);
    CHECK_MSG(lost.at_ms <= deadline + 15, "lost %lld ms after the deadline",
              (long long)(lost.at_ms - deadline));
    CHECK(!leash_held(l));
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(fx_redis_exists(&w.r, "leash:fixed"), 0);
    CHECK_EQ_INT(lost.calls, 1);
    CHECK_EQ_INT(leash_release(l, NULL, NULL), LEASH_ESTATE);
    world_down(&w);
}

TEST(max_hold_ends_in_lost_max_hold) {
    world w;
    fx_result lost = {0};
    leash_lock *l;
    int64_t t0;

    world_up(&w);
    l = leash_lock_new(w.c, "capped");
    CHECK_EQ_INT(leash_lock_set_max_hold(l, 700), LEASH_OK);
    leash_on_lost(l, fx_lost_cb, &lost);
    t0 = test_now_ms();
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    fx_run_until(w.loop, &lost, 3000);
    CHECK_EQ_INT(lost.status, LEASH_LOST_MAX_HOLD);
    CHECK_MSG(lost.at_ms - t0 >= 690 && lost.at_ms - t0 <= 800, "after %lld ms",
              (long long)(lost.at_ms - t0));
    CHECK(!leash_held(l));
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(fx_redis_exists(&w.r, "leash:capped"), 0); /* released, not left to expire */
    world_down(&w);
}

TEST(key_deleted_behind_our_back_is_lost_expired) {
    world w;
    fx_result lost = {0};
    leash_lock *l;
    int64_t t0;

    world_up(&w);
    l = hold(&w, "deleted", &lost);
    fx_run_for(w.loop, 150);
    CHECK_EQ_INT(test_redis_int(&w.r, "DEL leash:deleted"), 1);
    t0 = test_now_ms();
    fx_run_until(w.loop, &lost, 2000);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    CHECK_MSG(lost.at_ms - t0 <= RENEW + 100, "lost %lld ms after the delete",
              (long long)(lost.at_ms - t0));
    CHECK(!leash_held(l));
    fx_run_for(w.loop, 300);
    CHECK_EQ_INT(lost.calls, 1);
    world_down(&w);
}

TEST(key_taken_over_by_another_token_is_lost_expired) {
    world w;
    fx_result lost = {0};
    leash_lock *l;
    redisReply *rep;
    int64_t t0;

    world_up(&w);
    l = hold(&w, "stolen", &lost);
    rep = test_redis_cmd(&w.r, "EVAL %s 1 leash:stolen",
                         "redis.call('del', KEYS[1]); redis.call('hset', KEYS[1], 'thief', 1); "
                         "return redis.call('pexpire', KEYS[1], 60000)");
    CHECK(rep != NULL);
    freeReplyObject(rep);
    t0 = test_now_ms();
    fx_run_until(w.loop, &lost, 2000);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    CHECK(lost.at_ms - t0 <= RENEW + 100);
    CHECK(!leash_held(l));
    /* The thief's hold is untouched: a loss never deletes another owner. */
    CHECK_EQ_INT(test_redis_int(&w.r, "HGET leash:stolen thief"), -1);
    rep = test_redis_cmd(&w.r, "HGET leash:stolen thief");
    CHECK(rep && rep->type == REDIS_REPLY_STRING);
    freeReplyObject(rep);
    world_down(&w);
}

TEST(frozen_server_is_lost_unreachable_by_the_deadline) {
    world w;
    fx_result lost = {0};
    leash_lock *l;
    int64_t deadline;

    world_up(&w);
    l = hold(&w, "frozen", &lost);
    fx_run_for(w.loop, 120);
    test_redis_freeze(&w.r);
    deadline = absolute_deadline(l);
    fx_run_until(w.loop, &lost, 3000);
    test_redis_thaw(&w.r);
    CHECK_EQ_INT(lost.status, LEASH_LOST_UNREACHABLE);
    CHECK_MSG(lost.at_ms <= deadline + 15, "lost %lld ms after the local deadline",
              (long long)(lost.at_ms - deadline));
    CHECK(!leash_held(l));
    /* Back to normal once the server is: the same handle takes it again. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 3000, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 5000), LEASH_OK);
    world_down(&w);
}

TEST(server_restarted_without_data_is_lost_then_works_again) {
    world w;
    fx_result lost = {0};
    leash_lock *l, *m;

    world_up(&w);
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
    world_down(&w);
}

TEST(release_stops_the_watchdog_at_once) {
    world w;
    fx_result lost = {0}, rel = {0};
    leash_lock *l;
    leash_stats a, b;

    world_up(&w);
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
    world_down(&w);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(watchdog_keeps_a_short_lease_alive),
        TEST_CASE(fixed_lease_expires_and_is_reported_lost),
        TEST_CASE(max_hold_ends_in_lost_max_hold),
        TEST_CASE(key_deleted_behind_our_back_is_lost_expired),
        TEST_CASE(key_taken_over_by_another_token_is_lost_expired),
        TEST_CASE(frozen_server_is_lost_unreachable_by_the_deadline),
        TEST_CASE(server_restarted_without_data_is_lost_then_works_again),
        TEST_CASE(release_stops_the_watchdog_at_once),
        {0},
    };
    return test_main(argc, argv, cases);
}
