/* SPDX-License-Identifier: MIT */
/* LEASH_DIALECT_REDISSON against a client that speaks Redisson's RLock
 * layout (redisson.h), on one server and on a cluster (fixture.h):
 * exclusion, wake-ups and force releases both ways, reentrancy counts and
 * the field as Redisson sees them, renewals as its watchdog expects, its
 * unlock latches, names with hash tags, and the option itself; on
 * Redlock's servers, against Redisson's RedLock. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "redisson.h"
#ifdef LEASH_TEST_ONE_SERVER
#include "proxy.h"
#endif

#ifdef LEASH_TEST_TOPOLOGY_CLUSTER
/* leash's LEASH_PUBSUB_AUTO and Redisson alike: sharded from Redis 7.0 */
#define SHARDED (test_redis_version() >= 70000)
#else
#define SHARDED 0
#endif

/* Redisson's default lease (lockWatchdogTimeout): a waiter woken before it
 * ran out was woken by a message. */
#define REDISSON_LEASE_MS 30000

/* A client of the world's Redis in the Redisson dialect, sharing
 * Redisson's names (no key prefix), connected. */
static leash_client *rds_client(fx_world *w, int64_t lease_ms) {
    leash_options o;
    leash_client *c;

    fx_world_options(w, &o, lease_ms);
    o.dialect = LEASH_DIALECT_REDISSON;
    o.key_prefix = "";
    c = fx_client_opts(w->loop, &o);
    fx_wait_connected(w->loop, c, 5000);
    return c;
}

#ifndef LEASH_TEST_TOPOLOGY_REDLOCK
/* One server or a cluster: the Redisson client talks to the server that
 * holds the key. */

/* The one field of hash `key`, into field (64 bytes); its value. */
static long long only_field(fx_world *w, const char *key, char *field) {
    redisReply *r = test_redis_cmd(fx_redis_of(w, key), "HGETALL %s", key);
    long long v;

    CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY);
    CHECK_EQ_INT((long long)r->elements, 2);
    CHECK(strlen(r->element[0]->str) < 64);
    strcpy(field, r->element[0]->str);
    v = atoll(r->element[1]->str);
    freeReplyObject(r);
    return v;
}

/* HGET key field on server r as a number, -1 when there is none. */
static long long hget_on(test_redis *r, const char *key, const char *field) {
    redisReply *reply = test_redis_cmd(r, "HGET %s %s", key, field);
    long long v;

    CHECK(reply != NULL);
    v = reply->type == REDIS_REPLY_STRING ? atoll(reply->str) : -1;
    freeReplyObject(reply);
    return v;
}

static long long hget(fx_world *w, const char *key, const char *field) {
    return hget_on(fx_redis_of(w, key), key, field);
}

/* "<8>-<4>-<4>-<4>-<12 hex digits>:0" */
static int leash_field_shape(const char *f) {
    size_t i;

    if (strlen(f) != 38 || strcmp(f + 36, ":0") != 0)
        return 0;
    for (i = 0; i < 36; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? f[i] != '-' : !isxdigit((unsigned char)f[i]))
            return 0;
    }
    return 1;
}

/* Turns the loop until the Redisson waiter saw a "0": ms it took, or -1
 * after timeout_ms. */
static int64_t run_until_message(fx_loop *loop, rs_waiter *rw, int64_t timeout_ms) {
    int64_t start = test_now_ms();

    while (test_now_ms() - start < timeout_ms) {
        if (rs_waiter_poll(rw) > 0)
            return test_now_ms() - start;
        fx_run_for(loop, 2);
    }
    return -1;
}

TEST(field_and_reentrant_counts_are_as_redisson_sees_them) {
    fx_world w;
    leash_client *c;
    leash_lock *a;
    rs_client rc;
    char field[64];
    long long pttl;

    fx_world_up(&w, 5000, 0);
    c = rds_client(&w, 5000);
    rs_client_init(&rc, fx_redis_of(&w, "res"), SHARDED);
    a = leash_lock_new(c, "res");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    {
        redisReply *r = test_redis_cmd(fx_redis_of(&w, "res"), "TYPE res");
        CHECK(r != NULL && r->type == REDIS_REPLY_STATUS);
        CHECK_STR_EQ(r->str, "hash");
        freeReplyObject(r);
    }
    CHECK_EQ_INT(only_field(&w, "res", field), 1);
    CHECK_MSG(leash_field_shape(field), "field %s", field);
    pttl = test_redis_int(fx_redis_of(&w, "res"), "PTTL res");
    CHECK_MSG(pttl > 0 && pttl <= 5000, "pttl %lld", pttl);
    CHECK(leash_fence(a) > 0);

    /* Redisson's own threads are kept out, and cannot unlock it. */
    pttl = rs_try_lock(&rc, "res", 1, REDISSON_LEASE_MS);
    CHECK_MSG(pttl > 0 && pttl <= 5000, "tryLock answered %lld", pttl);
    CHECK_EQ_INT(rs_unlock(&rc, "res", 1, REDISSON_LEASE_MS, "u1"), -1);
    CHECK_EQ_INT(hget(&w, "res", field), 1);

    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_hold_count(a), 2);
    CHECK_EQ_INT(hget(&w, "res", field), 2);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    CHECK_EQ_INT(hget(&w, "res", field), 1);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "res"), "res"), 0);

    /* Each hold has a field of its own (a new owner token). */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    {
        char again[64];
        CHECK_EQ_INT(only_field(&w, "res", again), 1);
        CHECK(leash_field_shape(again));
        CHECK(strcmp(again, field) != 0);
    }
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    /* Redisson's refused unlock wrote no latch: nothing is left. */
    CHECK_EQ_INT(fx_dbsize(&w), 0);
    rs_client_close(&rc);
    leash_client_free(c);
    fx_world_down(&w);
}

TEST(leash_holds_then_a_redisson_waiter_is_woken_by_its_release) {
    fx_world w;
    leash_client *c;
    leash_lock *a;
    rs_client rc;
    rs_waiter rw;
    int64_t took;

    fx_world_up(&w, 5000, 0);
    c = rds_client(&w, REDISSON_LEASE_MS);
    rs_client_init(&rc, fx_redis_of(&w, "res"), SHARDED);
    a = leash_lock_new(c, "res");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);

    /* Redisson's lock(): try, subscribe, try again, sleep on the channel. */
    CHECK(rs_try_lock(&rc, "res", 7, REDISSON_LEASE_MS) > 0);
    rs_waiter_init(&rw, fx_redis_of(&w, "res"), "res", SHARDED);
    CHECK(rs_try_lock(&rc, "res", 7, REDISSON_LEASE_MS) > 0);
    CHECK_EQ_INT(run_until_message(w.loop, &rw, 300), -1);

    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    took = run_until_message(w.loop, &rw, 2000);
    CHECK_MSG(took >= 0 && took < 500 + TEST_SLACK_MS, "woken after %lld ms", (long long)took);
    CHECK_EQ_INT(rs_try_lock(&rc, "res", 7, REDISSON_LEASE_MS), -1);
    {
        char field[64];
        rs_field(&rc, 7, field);
        CHECK_EQ_INT(hget(&w, "res", field), 1);
    }
    /* Now leash is kept out. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(rs_unlock(&rc, "res", 7, REDISSON_LEASE_MS, "u1"), 1);
    rs_waiter_close(&rw);
    rs_client_close(&rc);
    leash_client_free(c);
    fx_world_down(&w);
}

TEST(redisson_holds_reentrantly_then_its_last_unlock_wakes_a_leash_waiter) {
    fx_world w;
    leash_client *c;
    leash_lock *a;
    rs_client rc;
    fx_result got = {0};
    char field[64];
    int64_t t0;

    fx_world_up(&w, 5000, 0);
    c = rds_client(&w, REDISSON_LEASE_MS);
    rs_client_init(&rc, fx_redis_of(&w, "res"), SHARDED);
    a = leash_lock_new(c, "res");
    CHECK_EQ_INT(rs_try_lock(&rc, "res", 1, REDISSON_LEASE_MS), -1);
    CHECK_EQ_INT(rs_try_lock(&rc, "res", 1, REDISSON_LEASE_MS), -1);
    rs_field(&rc, 1, field);
    CHECK_EQ_INT(hget(&w, "res", field), 2);

    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(leash_acquire(a, 20000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_for(w.loop, 300);
    CHECK_EQ_INT(got.calls, 0);
    CHECK_EQ_INT(rs_unlock(&rc, "res", 1, REDISSON_LEASE_MS, "u1"), 0); /* still held */
    fx_run_for(w.loop, 300);
    CHECK_EQ_INT(got.calls, 0);

    t0 = test_now_ms();
    CHECK_EQ_INT(rs_unlock(&rc, "res", 1, REDISSON_LEASE_MS, "u2"), 1);
    fx_run_until(w.loop, &got, 5000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    /* The holder's TTL was about 30 s: only the message explains this. */
    CHECK_MSG(got.at_ms - t0 < 500 + TEST_SLACK_MS, "granted %lld ms after the unlock",
              (long long)(got.at_ms - t0));
    CHECK_EQ_INT(only_field(&w, "res", field), 1);
    CHECK(leash_field_shape(field));
    CHECK(rs_try_lock(&rc, "res", 1, REDISSON_LEASE_MS) > 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    rs_client_close(&rc);
    leash_client_free(c);
    fx_world_down(&w);
}

TEST(leash_force_release_removes_a_redisson_hold_and_wakes_its_waiter) {
    fx_world w;
    leash_client *c;
    leash_lock *admin;
    rs_client rc;
    rs_waiter rw;
    int64_t took;

    fx_world_up(&w, 5000, 0);
    c = rds_client(&w, 5000);
    rs_client_init(&rc, fx_redis_of(&w, "res"), SHARDED);
    CHECK_EQ_INT(rs_try_lock(&rc, "res", 1, REDISSON_LEASE_MS), -1);
    rs_waiter_init(&rw, fx_redis_of(&w, "res"), "res", SHARDED);
    CHECK(rs_try_lock(&rc, "res", 2, REDISSON_LEASE_MS) > 0);

    admin = leash_lock_new(c, "res");
    CHECK_EQ_INT(fx_force_release_sync(w.loop, admin, 5000), LEASH_OK);
    took = run_until_message(w.loop, &rw, 2000);
    CHECK_MSG(took >= 0 && took < 500 + TEST_SLACK_MS, "woken after %lld ms", (long long)took);
    /* The holder's watchdog finds it gone; the waiter gets it. */
    CHECK_EQ_INT(rs_renew(&rc, "res", 1, REDISSON_LEASE_MS), 0);
    CHECK_EQ_INT(rs_try_lock(&rc, "res", 2, REDISSON_LEASE_MS), -1);
    CHECK_EQ_INT(rs_unlock(&rc, "res", 2, REDISSON_LEASE_MS, "u1"), 1);
    CHECK_EQ_INT(fx_force_release_sync(w.loop, admin, 5000), LEASH_ENOTHELD);
    rs_waiter_close(&rw);
    rs_client_close(&rc);
    leash_client_free(c);
    fx_world_down(&w);
}

TEST(redisson_force_unlock_wakes_leash_waiters_and_the_holder_loses_at_its_renewal) {
    fx_world w;
    leash_client *c, *c2;
    leash_lock *a, *b;
    rs_client rc;
    fx_result lost = {0}, got = {0};
    int64_t t0;

    fx_world_up(&w, 5000, 0);
    c = rds_client(&w, 3000); /* renewals every 1000 ms */
    c2 = rds_client(&w, 3000);
    rs_client_init(&rc, fx_redis_of(&w, "res"), SHARDED);
    a = leash_lock_new(c, "res");
    b = leash_lock_new(c2, "res");
    leash_on_lost(a, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(b, 10000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_for(w.loop, 200);
    CHECK_EQ_INT(got.calls, 0);

    t0 = test_now_ms();
    CHECK_EQ_INT(rs_force_unlock(&rc, "res"), 1);
    fx_run_until(w.loop, &got, 5000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    /* The TTL b last saw was 2 s or more: the "0" woke it. */
    CHECK_MSG(got.at_ms - t0 < 1000, "granted %lld ms after forceUnlock",
              (long long)(got.at_ms - t0));
    fx_run_until(w.loop, &lost, 1000 + 2 * TEST_SLACK_MS);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    CHECK_MSG(lost.at_ms - t0 <= 1000 + TEST_SLACK_MS, "lost %lld ms after forceUnlock",
              (long long)(lost.at_ms - t0));
    CHECK(!leash_held(a));
    CHECK(leash_held(b));
    CHECK_EQ_INT(fx_release_sync(w.loop, b, 5000), LEASH_OK);
    CHECK_EQ_INT(rs_force_unlock(&rc, "res"), 0);
    rs_client_close(&rc);
    leash_client_free(c2);
    leash_client_free(c);
    fx_world_down(&w);
}

TEST(renewals_keep_the_pttl_up_as_redissons_watchdog_does) {
    fx_world w;
    leash_client *c;
    leash_lock *a;
    rs_client rc;
    char field[64];
    long long pttl, lowest = 900;
    int64_t end;

    fx_world_up(&w, 5000, 0);
    c = rds_client(&w, 900); /* renewals every 300 ms: lease / 3 */
    rs_client_init(&rc, fx_redis_of(&w, "res"), SHARDED);
    a = leash_lock_new(c, "res");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    end = test_now_ms() + 2700; /* three leases */
    while (test_now_ms() < end) {
        fx_run_for(w.loop, 50);
        pttl = test_redis_int(fx_redis_of(&w, "res"), "PTTL res");
        CHECK_MSG(pttl > 0 && pttl <= 900, "pttl %lld", pttl);
        if (pttl < lowest)
            lowest = pttl;
    }
    /* Renewed every third of the lease, never let run down further. */
    CHECK_MSG(lowest >= 900 - 300 - TEST_SLACK_MS - 50, "pttl fell to %lld", lowest);
    CHECK(leash_renewals(a) >= 6);
    CHECK(leash_held(a));
    /* Redisson's watchdog script finds the field as its own would be. */
    CHECK_EQ_INT(only_field(&w, "res", field), 1);
    CHECK_EQ_INT(test_redis_int(fx_redis_of(&w, "res"), "HEXISTS res %s", field), 1);
    CHECK(rs_try_lock(&rc, "res", 1, REDISSON_LEASE_MS) > 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    rs_client_close(&rc);
    leash_client_free(c);
    fx_world_down(&w);
}

TEST(redissons_unlock_latches_do_not_confuse_leash) {
    fx_world w;
    leash_client *c;
    leash_lock *a;
    rs_client rc;
    char field[64];
    long long pttl;

    fx_world_up(&w, 5000, 0);
    c = rds_client(&w, 5000);
    rs_client_init(&rc, fx_redis_of(&w, "res"), SHARDED);
    a = leash_lock_new(c, "res");
    CHECK_EQ_INT(rs_try_lock(&rc, "res", 1, REDISSON_LEASE_MS), -1);
    CHECK_EQ_INT(rs_unlock(&rc, "res", 1, REDISSON_LEASE_MS, "req-1"), 1);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    /* Redisson resends its unlock (its answer was lost): the latch
     * answers what the first copy did, and leash's hold stays. */
    CHECK_EQ_INT(rs_unlock(&rc, "res", 1, REDISSON_LEASE_MS, "req-1"), 1);
    CHECK_EQ_INT(only_field(&w, "res", field), 1);
    CHECK(leash_field_shape(field));
    pttl = test_redis_int(fx_redis_of(&w, "redisson_unlock_latch:{res}:req-1"),
                          "PTTL redisson_unlock_latch:{res}:req-1");
    CHECK_MSG(pttl > 0, "latch pttl %lld", pttl);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "res"), "res"), 0);
    rs_client_close(&rc);
    leash_client_free(c);
    fx_world_down(&w);
}

/* A key of another type (a string of another program, a lock of leash's
 * own dialect) is neither taken nor removed: the scripts check before
 * they write. */
TEST(a_key_that_is_no_redisson_hash_is_left_alone) {
    fx_world w;
    leash_client *c;
    leash_lock *a;
    redisReply *r;

    fx_world_up(&w, 5000, 0);
    c = rds_client(&w, 5000);
    CHECK_EQ_INT(fx_key_cmd(&w, "app-data", "SET app-data precious"), FX_COPIES);
    a = leash_lock_new(c, "app-data");
    fx_log_clear();
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_EREDIS);
    CHECK(fx_log_contains("WRONGTYPE"));
    fx_log_clear();
    CHECK_EQ_INT(fx_force_release_sync(w.loop, a, 5000), LEASH_EREDIS);
    CHECK(fx_log_contains("WRONGTYPE"));
    r = test_redis_cmd(fx_redis_of(&w, "app-data"), "GET app-data");
    CHECK(r != NULL && r->type == REDIS_REPLY_STRING);
    CHECK_STR_EQ(r->str, "precious");
    freeReplyObject(r);
    CHECK_EQ_INT(test_redis_int(fx_redis_of(&w, "app-data"), "PTTL app-data"), -1);

    /* A client of leash's own dialect holds "leash:shared". */
    {
        leash_lock *own = leash_lock_new(w.c, "shared"), *other = leash_lock_new(c, "leash:shared");
        CHECK_EQ_INT(fx_acquire_sync(w.loop, own, 0, 5000), LEASH_OK);
        CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_EREDIS);
        CHECK_EQ_INT(fx_force_release_sync(w.loop, other, 5000), LEASH_EREDIS);
        CHECK(leash_held(own));
        CHECK_EQ_INT(fx_release_sync(w.loop, own, 5000), LEASH_OK);
    }
    leash_client_free(c);
    fx_world_down(&w);
}

/* Redisson's forceUnlock removed leash's hold: an extra (reentrant) hold
 * asked for afterwards must not write a new hash, which would be a hold
 * nobody released (its field is the removed hold's) and a fence its
 * holder never saw. */
TEST(an_extra_hold_after_a_force_unlock_does_not_bring_the_hold_back) {
    fx_world w;
    leash_client *c;
    leash_lock *a;
    rs_client rc;
    fx_result lost = {0};

    fx_world_up(&w, 5000, 0);
    c = rds_client(&w, 30000);
    rs_client_init(&rc, fx_redis_of(&w, "res"), SHARDED);
    a = leash_lock_new(c, "res");
    leash_on_lost(a, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(rs_force_unlock(&rc, "res"), 1);
    CHECK(fx_acquire_sync(w.loop, a, 0, 5000) != LEASH_OK);
    CHECK_EQ_INT(lost.calls, 1);
    CHECK(!leash_held(a));
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "res"), "res"), 0);
    /* Nor while a Redisson thread holds it. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(rs_force_unlock(&rc, "res"), 1);
    CHECK_EQ_INT(rs_try_lock(&rc, "res", 1, REDISSON_LEASE_MS), -1);
    CHECK(fx_acquire_sync(w.loop, a, 0, 5000) != LEASH_OK);
    CHECK_EQ_INT(lost.calls, 2);
    {
        char field[64];
        CHECK_EQ_INT(only_field(&w, "res", field), 1);
        CHECK(!leash_field_shape(field));
    }
    CHECK_EQ_INT(rs_unlock(&rc, "res", 1, REDISSON_LEASE_MS, "u1"), 1);
    rs_client_close(&rc);
    leash_client_free(c);
    fx_world_down(&w);
}

/* Redisson names the channel of a name with a '{' without adding braces:
 * the name's own tag keeps it in the key's slot (a cluster's SSUBSCRIBE
 * at the key's master would answer MOVED otherwise). */
TEST(names_with_a_hash_tag_and_a_key_prefix) {
    fx_world w;
    leash_client *c;
    leash_options o;
    leash_lock *a, *p;
    rs_client rc;
    rs_waiter rw;
    int64_t took;

    fx_world_up(&w, 5000, 0);
    c = rds_client(&w, 5000);
    rs_client_init(&rc, fx_redis_of(&w, "app:{42}:lock"), SHARDED);
    a = leash_lock_new(c, "app:{42}:lock");
    CHECK(a != NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK(rs_try_lock(&rc, "app:{42}:lock", 1, REDISSON_LEASE_MS) > 0);
    rs_waiter_init(&rw, fx_redis_of(&w, "app:{42}:lock"), "app:{42}:lock", SHARDED);
    CHECK_STR_EQ(rw.channel, "redisson_lock__channel:app:{42}:lock");
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    took = run_until_message(w.loop, &rw, 2000);
    CHECK_MSG(took >= 0, "no message on %s", rw.channel);
    rs_waiter_close(&rw);
    rs_client_close(&rc);

    /* Braces that are no tag would put Redisson's channel in another slot. */
    fx_log_clear();
    CHECK(leash_lock_new(c, "a{}b") == NULL);
    CHECK(fx_log_contains("braces"));

    /* A key prefix is part of the name Redisson sees. */
    fx_world_options(&w, &o, 5000);
    o.dialect = LEASH_DIALECT_REDISSON;
    o.key_prefix = "svc:";
    leash_client_free(c);
    c = fx_client_opts(w.loop, &o);
    p = leash_lock_new(c, "res");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, p, 0, 5000), LEASH_OK);
    rs_client_init(&rc, fx_redis_of(&w, "svc:res"), SHARDED);
    CHECK(rs_try_lock(&rc, "svc:res", 1, REDISSON_LEASE_MS) > 0);
    rs_waiter_init(&rw, fx_redis_of(&w, "svc:res"), "svc:res", SHARDED);
    CHECK_EQ_INT(fx_release_sync(w.loop, p, 5000), LEASH_OK);
    CHECK(run_until_message(w.loop, &rw, 2000) >= 0);
    CHECK_EQ_INT(rs_try_lock(&rc, "svc:res", 1, REDISSON_LEASE_MS), -1);
    CHECK_EQ_INT(rs_unlock(&rc, "svc:res", 1, REDISSON_LEASE_MS, "u1"), 1);
    rs_waiter_close(&rw);
    rs_client_close(&rc);
    leash_client_free(c);
    fx_world_down(&w);
}

#ifdef LEASH_TEST_ONE_SERVER
/* leash writes no unlock latch: a release whose answer was lost (the
 * path from Redis drops it, the connection breaks, the release goes
 * again) is told apart by the counts it sets and, for the last hold, by
 * the hold's deadline. The retry publishes nothing a second time. */
TEST(a_release_retried_after_a_lost_answer_needs_no_latch) {
    test_redis r;
    fault_proxy p;
    fx_loop *loop = fx_loop_new();
    leash_options o;
    leash_client *c;
    leash_lock *l;
    fx_result rel = {0}, rel2 = {0};
    rs_client rc;
    rs_waiter rw;
    char field[64];

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(fp_start(&p, r.port), 0);
    fx_options(&o, &r, 10000);
    o.port = p.port;
    o.command_timeout_ms = 300;
    o.dialect = LEASH_DIALECT_REDISSON;
    o.key_prefix = "";
    c = fx_client_opts(loop, &o);
    l = leash_lock_new(c, "res");
    rs_client_init(&rc, &r, 0);
    rs_waiter_init(&rw, &r, "res", 0);
    CHECK_EQ_INT(fx_acquire_sync(loop, l, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(loop, l, 0, 3000), LEASH_OK);
    {
        redisReply *h = test_redis_cmd(&r, "HKEYS res");
        CHECK(h != NULL && h->elements == 1);
        strcpy(field, h->element[0]->str);
        freeReplyObject(h);
    }

    /* One of two holds. */
    CHECK_EQ_INT(fp_blackhole(&p, FP_CMD, FP_DOWN, 1), 0);
    CHECK_EQ_INT(leash_release(l, fx_release_cb, &rel), LEASH_OK);
    fx_run_for(loop, 100);
    CHECK_EQ_INT(hget_on(&r, "res", field), 1); /* it ran */
    CHECK_EQ_INT(fp_blackhole(&p, FP_CMD, FP_DOWN, 0), 0);
    fx_run_until(loop, &rel, 5000);
    CHECK_EQ_INT(rel.status, LEASH_OK);
    CHECK_EQ_INT(hget_on(&r, "res", field), 1); /* not 0 */
    CHECK_EQ_INT(leash_hold_count(l), 1);

    /* The last one. */
    CHECK_EQ_INT(fp_blackhole(&p, FP_CMD, FP_DOWN, 1), 0);
    CHECK_EQ_INT(leash_release(l, fx_release_cb, &rel2), LEASH_OK);
    fx_run_for(loop, 100);
    CHECK_EQ_INT(fx_redis_exists(&r, "res"), 0); /* it ran */
    CHECK_EQ_INT(fp_blackhole(&p, FP_CMD, FP_DOWN, 0), 0);
    fx_run_until(loop, &rel2, 5000);
    CHECK_EQ_INT(rel2.status, LEASH_OK);
    fx_run_for(loop, 100);
    CHECK_EQ_INT(rs_waiter_poll(&rw), 1);
    CHECK_EQ_INT(test_redis_int(&r, "DBSIZE"), 0);

    rs_waiter_close(&rw);
    rs_client_close(&rc);
    leash_client_free(c);
    fp_stop(&p);
    fx_loop_free(loop);
    test_redis_stop(&r);
}

/* The grant's answer is lost and the acquire goes again with the same
 * token: it finds its own field and must leave the count at 1 (Redisson's
 * HINCRBY would make it 2, and the one release the caller makes would
 * leave the lock held). */
TEST(an_acquire_retried_after_a_lost_answer_holds_once) {
    test_redis r;
    fault_proxy p;
    fx_loop *loop = fx_loop_new();
    leash_options o;
    leash_client *c;
    leash_lock *l;
    fx_result got = {0};
    char field[64];

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(fp_start(&p, r.port), 0);
    fx_options(&o, &r, 10000);
    o.port = p.port;
    o.command_timeout_ms = 300;
    o.dialect = LEASH_DIALECT_REDISSON;
    o.key_prefix = "";
    c = fx_client_opts(loop, &o);
    fx_wait_connected(loop, c, 5000);
    l = leash_lock_new(c, "res");
    CHECK_EQ_INT(fp_blackhole(&p, FP_CMD, FP_DOWN, 1), 0);
    CHECK_EQ_INT(leash_acquire(l, 5000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_for(loop, 100);
    CHECK_EQ_INT(fx_redis_exists(&r, "res"), 1); /* it ran */
    CHECK_EQ_INT(fp_blackhole(&p, FP_CMD, FP_DOWN, 0), 0);
    fx_run_until(loop, &got, 5000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_EQ_INT(leash_hold_count(l), 1);
    {
        redisReply *h = test_redis_cmd(&r, "HGETALL res");
        CHECK(h != NULL && h->type == REDIS_REPLY_ARRAY);
        CHECK_EQ_INT((long long)h->elements, 2);
        strcpy(field, h->element[0]->str);
        CHECK_STR_EQ(h->element[1]->str, "1");
        freeReplyObject(h);
    }
    CHECK_EQ_INT(fx_release_sync(loop, l, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_redis_exists(&r, "res"), 0);
    leash_client_free(c);
    fp_stop(&p);
    fx_loop_free(loop);
    test_redis_stop(&r);
}
#endif

#else

/* Redisson's RedLock is an RLock on each of several independent servers:
 * one that holds a majority keeps leash's quorum out, and its unlocks wake
 * leash's waiter; leash's hold keeps it from a majority in turn. */
TEST(a_redisson_redlock_and_a_leash_redlock_exclude_each_other) {
    fx_world w;
    leash_client *c;
    leash_lock *a;
    rs_client rc[FX_REDLOCK_N];
    fx_result got = {0};
    uint64_t fence;
    int64_t t0;
    long long calls;
    int i, busy = 0;

    fx_world_up(&w, 5000, 0);
    c = rds_client(&w, REDISSON_LEASE_MS);
    fx_wait_every_server(w.loop, c, FX_REDLOCK_N, 5000);
    for (i = 0; i < FX_REDLOCK_N; i++)
        rs_client_init(&rc[i], &w.servers[i], 0);
    for (i = 0; i < FX_REDLOCK_N / 2 + 1; i++)
        CHECK_EQ_INT(rs_try_lock(&rc[i], "res", 1, REDISSON_LEASE_MS), -1);
    a = leash_lock_new(c, "res");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_EBUSY);
    /* The try-once's give-back to the free servers goes out from the loop
     * after its answer: counted from once it ran (the script count stops
     * moving), or it would be the waiter's fifth script (failed once in a
     * clean-clone CI run). */
    calls = -1;
    for (i = 0; i < 40; i++) {
        long long now = test_redis_calls(&w.servers[FX_REDLOCK_N - 1], "evalsha");
        if (now == calls)
            break;
        calls = now;
        fx_run_for(w.loop, 50);
    }
    CHECK_EQ_INT(leash_acquire(a, 20000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_for(w.loop, 300);
    CHECK_EQ_INT(got.calls, 0);
    /* It sleeps: an attempt, one more once subscribed, and their
     * give-backs (a give-back that announced itself would wake the
     * waiter that sent it, again and again). */
    calls = test_redis_calls(&w.servers[FX_REDLOCK_N - 1], "evalsha") - calls;
    CHECK_MSG(calls <= 4, "%lld scripts on a free server while waiting", calls);

    /* Another Redisson thread takes it over before leash's waiter can try
     * (the loop does not turn): the waiter wakes, finds it busy, sleeps;
     * that thread's unlocks, a moment later, are a release of their own,
     * though they read "0" as the first ones did. */
    for (i = 0; i < FX_REDLOCK_N / 2 + 1; i++) {
        CHECK_EQ_INT(rs_unlock(&rc[i], "res", 1, REDISSON_LEASE_MS, "u1"), 1);
        CHECK_EQ_INT(rs_try_lock(&rc[i], "res", 3, REDISSON_LEASE_MS), -1);
    }
    fx_run_for(w.loop, 200);
    CHECK_EQ_INT(got.calls, 0);
    t0 = test_now_ms();
    for (i = 0; i < FX_REDLOCK_N / 2 + 1; i++)
        CHECK_EQ_INT(rs_unlock(&rc[i], "res", 3, REDISSON_LEASE_MS, "u3"), 1);
    fx_run_until(w.loop, &got, 5000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_MSG(got.at_ms - t0 < 500 + TEST_SLACK_MS, "granted %lld ms after the unlocks",
              (long long)(got.at_ms - t0));
    fence = leash_fence(a);
    CHECK(fence > 0);
    for (i = 0; i < FX_REDLOCK_N; i++)
        busy += rs_try_lock(&rc[i], "res", 2, REDISSON_LEASE_MS) > 0;
    CHECK_MSG(busy > FX_REDLOCK_N / 2, "leash holds %d of %d servers", busy, FX_REDLOCK_N);
    for (i = 0; i < FX_REDLOCK_N; i++)
        (void)rs_unlock(&rc[i], "res", 2, REDISSON_LEASE_MS, "u2");
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK(leash_fence(a) > fence);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    /* Left behind: Redisson's unlock latches and leash's fence floors,
     * every one with a TTL. */
    for (i = 0; i < FX_REDLOCK_N; i++) {
        CHECK_EQ_INT(fx_redis_exists(&w.servers[i], "res"), 0);
        CHECK_EQ_INT(test_redis_int(&w.servers[i], "EVAL %s 0",
                                    "local n = 0 for _, k in ipairs(redis.call('keys', '*')) do "
                                    "if redis.call('pttl', k) < 0 then n = n + 1 end end "
                                    "return n"),
                     0);
        rs_client_close(&rc[i]);
    }
    leash_client_free(c);
    fx_world_down(&w);
}
#endif

TEST(the_option_is_checked_and_the_family_is_refused) {
    fx_world w;
    leash_options o;
    leash_client *c = NULL;

    fx_world_up(&w, 5000, 0);
    fx_world_options(&w, &o, 5000);
    o.dialect = 2;
    fx_log_clear();
    CHECK_EQ_INT(leash_client_new(&c, &o), LEASH_EINVAL);
    CHECK(c == NULL);
    CHECK(fx_log_contains("dialect 2"));

    c = rds_client(&w, 5000);
    fx_log_clear();
    CHECK(leash_fair_lock_new(c, "fam") == NULL);
#ifndef LEASH_TEST_TOPOLOGY_REDLOCK /* there Redlock's own refusal comes first */
    CHECK(fx_log_contains("not with the redisson dialect"));
#endif
    CHECK(leash_read_lock_new(c, "fam") == NULL);
    CHECK(leash_write_lock_new(c, "fam") == NULL);
    CHECK(leash_semaphore_new(c, "fam", 2) == NULL);
    leash_client_free(c);
    fx_world_down(&w);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
#ifndef LEASH_TEST_TOPOLOGY_REDLOCK
        TEST_CASE(field_and_reentrant_counts_are_as_redisson_sees_them),
        TEST_CASE(leash_holds_then_a_redisson_waiter_is_woken_by_its_release),
        TEST_CASE(redisson_holds_reentrantly_then_its_last_unlock_wakes_a_leash_waiter),
        TEST_CASE(leash_force_release_removes_a_redisson_hold_and_wakes_its_waiter),
        TEST_CASE(redisson_force_unlock_wakes_leash_waiters_and_the_holder_loses_at_its_renewal),
        TEST_CASE(renewals_keep_the_pttl_up_as_redissons_watchdog_does),
        TEST_CASE(redissons_unlock_latches_do_not_confuse_leash),
        TEST_CASE(names_with_a_hash_tag_and_a_key_prefix),
        TEST_CASE(a_key_that_is_no_redisson_hash_is_left_alone),
        TEST_CASE(an_extra_hold_after_a_force_unlock_does_not_bring_the_hold_back),
#ifdef LEASH_TEST_ONE_SERVER
        TEST_CASE(a_release_retried_after_a_lost_answer_needs_no_latch),
        TEST_CASE(an_acquire_retried_after_a_lost_answer_holds_once),
#endif
#else
        TEST_CASE(a_redisson_redlock_and_a_leash_redlock_exclude_each_other),
#endif
        TEST_CASE(the_option_is_checked_and_the_family_is_refused),
        {0},
    };
    return fx_main(argc, argv, cases);
}
