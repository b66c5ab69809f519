/* SPDX-License-Identifier: MIT */
/*
 * What leash leaves in Redis, against real redis-servers: every key it
 * writes has a TTL and a name nobody uses leaves nothing; a key of the
 * application at one of a lock's names is left as it was and never turns
 * into a hold; a lock's other names never collide with another lock's
 * key; fences only grow, also when Redis lost its data; and the channels
 * carry the db, so that locks of one name in two dbs never hear each
 * other. (Each case failed on the engine before issue 9's fixes.)
 */
#define _GNU_SOURCE

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "fixture.h"

/* ---- Pub/sub is shared by every db: channels carry the db ---- */

/*
 * Two deployments of one app on one Redis, separated by db. In db 0 a
 * holder of "x" renews with a waiter behind it, so its renewals announce
 * themselves; in db 1 the holder of "x" crashed (a client whose loop never
 * runs again: no renewal, no release, its key just expires) and a waiter
 * waits for it. db 0's announcements must not keep db 1's waiter asleep,
 * and db 0's release must not make it try.
 */
TEST(dbs_do_not_hear_each_others_lock_messages) {
    test_redis r;
    fx_loop *loop = fx_loop_new(), *dead = fx_loop_new();
    leash_options o;
    leash_client *c0, *c0w, *c1, *c1w;
    leash_lock *h0, *w0, *h1, *w1;
    fx_result g0 = {0}, g1 = {0};
    leash_stats before, after;
    int64_t expires_at;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    c0 = fx_client(loop, &r, 300); /* renews every 100 ms */
    c0w = fx_client(loop, &r, 300);
    fx_options(&o, &r, 600);
    o.db = 1;
    c1 = fx_client_opts(dead, &o);
    o.lease_ms = 5000;
    c1w = fx_client_opts(loop, &o);
    h0 = leash_lock_new(c0, "x");
    w0 = leash_lock_new(c0w, "x");
    h1 = leash_lock_new(c1, "x");
    w1 = leash_lock_new(c1w, "x");
    CHECK_EQ_INT(fx_acquire_sync(loop, h0, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(w0, LEASH_WAIT_FOREVER, fx_acquire_cb, &g0), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(dead, h1, 0, 3000), LEASH_OK);
    expires_at = test_now_ms() + 600;
    CHECK_EQ_INT(leash_acquire(w1, LEASH_WAIT_FOREVER, fx_acquire_cb, &g1), LEASH_OK);
    /* db 1's lock is free once h1's key expired, whatever db 0 does. */
    fx_run_until(loop, &g1, 3000);
    CHECK_EQ_INT(g1.status, LEASH_OK);
    CHECK_MSG(g1.at_ms <= expires_at + TEST_SLACK_MS, "db 1's waiter got it %lld ms after expiry",
              (long long)(g1.at_ms - expires_at));
    CHECK(leash_held(h0));
    CHECK_EQ_INT(g0.calls, 0);

    /* db 1 has a waiter again (w1 holds, h1... is dead; a new handle waits),
     * and db 0 releases: db 1's waiting client sends nothing for it. */
    memset(&g1, 0, sizeof(g1));
    h1 = leash_lock_new(c1w, "x");
    CHECK_EQ_INT(leash_acquire(h1, LEASH_WAIT_FOREVER, fx_acquire_cb, &g1), LEASH_OK);
    fx_run_for(loop, 200);
    leash_client_stats(c1w, &before);
    CHECK_EQ_INT(fx_release_sync(loop, h0, 3000), LEASH_OK);
    fx_run_until(loop, &g0, 3000);
    CHECK_EQ_INT(g0.status, LEASH_OK);
    fx_run_for(loop, 200);
    leash_client_stats(c1w, &after);
    CHECK_EQ_INT((long long)(after.commands_sent - before.commands_sent), 0);
    CHECK_EQ_INT(g1.calls, 0);
    CHECK_EQ_INT(fx_release_sync(loop, w0, 3000), LEASH_OK);
    leash_client_free(c0);
    leash_client_free(c0w);
    leash_client_free(c1w);
    leash_client_free(c1);
    fx_loop_free(loop);
    fx_loop_free(dead);
    test_redis_stop(&r);
}

/* ---- A failed acquire leaves no hold; scripts check before writing ---- */

/* The TYPE and TTL of a key, to see that nothing touched it. */
static void key_shape(test_redis *r, const char *key, char type[16], long long *pttl) {
    redisReply *rep = test_redis_cmd(r, "TYPE %s", key);
    CHECK(rep != NULL && rep->type == REDIS_REPLY_STATUS);
    snprintf(type, 16, "%s", rep->str);
    freeReplyObject(rep);
    *pttl = test_redis_int(r, "PTTL %s", key);
}

/*
 * Keys of the application at the names a lock's script touches, or used
 * to: the lock's own key of another type, and the names the fence counter
 * and tombstones had. An acquire either works (and its release leaves
 * nothing) or fails with LEASH_EREDIS having written nothing; never a hold
 * that nobody owns and every other client sees as busy.
 */
TEST(a_key_of_another_type_never_leaves_a_hold_behind) {
    static const struct {
        const char *key, *make;
    } junk[] = {
        {"{leash:j0}:fence", "HSET {leash:j0}:fence f 1"},
        {"{leash:j1}:fence", "SET {leash:j1}:fence not-a-number"},
        {"leash:j2", "HSET leash:j2 app-field 1"},
        {"leash:j3", "RPUSH leash:j3 a b"},
        {"leash:j4", "SET leash:j4 application-data PX 60000"},
        {"leash:j5", "SET leash:j5 0123456789abcdef0123456789abcdef"},
    };
    fx_world w;
    leash_client *other;
    size_t i;

    fx_world_up(&w, 5000, 0);
    other = fx_client(w.loop, &w.r, 5000);
    for (i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        char name[8], type0[16], type1[16];
        long long ttl0, ttl1, keys0;
        redisReply *rep = test_redis_cmd(&w.r, junk[i].make);
        leash_lock *l, *o;
        int st;

        CHECK(rep != NULL && rep->type != REDIS_REPLY_ERROR);
        freeReplyObject(rep);
        snprintf(name, sizeof(name), "j%zu", i);
        key_shape(&w.r, junk[i].key, type0, &ttl0);
        keys0 = test_redis_int(&w.r, "DBSIZE");
        l = leash_lock_new(w.c, name);
        o = leash_lock_new(other, name);
        st = fx_acquire_sync(w.loop, l, 0, 3000);
        CHECK_MSG(st == LEASH_OK || st == LEASH_EREDIS, "case %zu: %s", i, leash_status_name(st));
        if (st == LEASH_OK) {
            CHECK_EQ_INT(fx_acquire_sync(w.loop, o, 0, 3000), LEASH_EBUSY);
            CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
            CHECK_EQ_INT(fx_acquire_sync(w.loop, o, 0, 3000), LEASH_OK);
            CHECK_EQ_INT(fx_release_sync(w.loop, o, 3000), LEASH_OK);
        } else {
            /* Nothing written: the same keys, the application's untouched. */
            CHECK_EQ_INT(test_redis_int(&w.r, "DBSIZE"), keys0);
            CHECK_EQ_INT(fx_acquire_sync(w.loop, o, 0, 3000), LEASH_EREDIS);
        }
        key_shape(&w.r, junk[i].key, type1, &ttl1);
        CHECK_STR_EQ(type1, type0);
        CHECK_MSG(ttl1 == ttl0 || (ttl0 > 0 && ttl1 > 0 && ttl1 <= ttl0),
                  "case %zu: ttl %lld -> %lld", i, ttl0, ttl1);
        CHECK_EQ_INT(test_redis_int(&w.r, "DBSIZE"), keys0);
        leash_lock_free(l);
        leash_lock_free(o);
    }
    leash_client_free(other);
    fx_world_down(&w);
}

/* ---- Fences only grow, also when Redis lost its data ---- */

TEST(fences_grow_across_a_restart_without_persistence) {
    fx_world w;
    leash_lock *l;
    uint64_t before;

    fx_world_up(&w, 5000, 0);
    l = leash_lock_new(w.c, "fenced-restart");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    before = leash_fence(l);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    CHECK_EQ_INT(test_redis_restart(&w.r), 0); /* every key is gone */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 3000, 6000), LEASH_OK);
    CHECK_MSG(leash_fence(l) > before, "fence %llu after %llu", (unsigned long long)leash_fence(l),
              (unsigned long long)before);
    /* The same when the key of a live hold was evicted or lost. */
    before = leash_fence(l);
    CHECK_EQ_INT(test_redis_int(&w.r, "FLUSHALL"), -1);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_ENOTHELD);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    CHECK(leash_fence(l) > before);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    fx_world_down(&w);
}

/* ---- Every key has a TTL; an unused name leaves nothing ---- */

/* Fails the test if any key of the db has no TTL. */
static void every_key_expires(test_redis *r) {
    redisReply *rep = test_redis_cmd(r, "KEYS *");
    size_t i;

    CHECK(rep != NULL && rep->type == REDIS_REPLY_ARRAY);
    for (i = 0; i < rep->elements; i++) {
        long long ttl = test_redis_int(r, "PTTL %b", rep->element[i]->str, rep->element[i]->len);
        CHECK_MSG(ttl > 0 || ttl == -2, "key %s has no TTL (%lld)", rep->element[i]->str, ttl);
    }
    freeReplyObject(rep);
}

TEST(every_key_has_a_ttl_and_unused_names_leave_nothing) {
    fx_world w;
    leash_client *c2;
    leash_lock *a, *b, *waiter, *quitter, *admin;
    fx_result got = {0}, gone = {0};
    int i;

    fx_world_up(&w, 300, 0);
    c2 = fx_client(w.loop, &w.r, 300);
    a = leash_lock_new(w.c, "ttl");
    b = leash_lock_new(c2, "ttl");
    waiter = leash_lock_new(c2, "ttl");
    quitter = leash_lock_new(c2, "ttl");
    admin = leash_lock_new(c2, "ttl-forced");
    for (i = 0; i < 5; i++) {
        /* a hold, an extra hold, a waiter that gets it, one that gives up,
         * a try-once that finds it busy */
        CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 3000), LEASH_OK);
        CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 3000), LEASH_OK);
        every_key_expires(&w.r);
        CHECK_EQ_INT(leash_acquire(waiter, 3000, fx_acquire_cb, &got), LEASH_OK);
        CHECK_EQ_INT(leash_acquire(quitter, 50, fx_acquire_cb, &gone), LEASH_OK);
        CHECK_EQ_INT(fx_acquire_sync(w.loop, b, 0, 3000), LEASH_EBUSY);
        fx_run_until(w.loop, &gone, 3000);
        CHECK_EQ_INT(gone.status, LEASH_ETIMEDOUT);
        every_key_expires(&w.r);
        CHECK_EQ_INT(fx_release_sync(w.loop, a, 3000), LEASH_OK);
        CHECK_EQ_INT(fx_release_sync(w.loop, a, 3000), LEASH_OK);
        fx_run_until(w.loop, &got, 3000);
        CHECK_EQ_INT(got.status, LEASH_OK);
        every_key_expires(&w.r);
        CHECK_EQ_INT(fx_release_sync(w.loop, waiter, 3000), LEASH_OK);
        memset(&got, 0, sizeof(got));
        memset(&gone, 0, sizeof(gone));
    }
    /* A hold left to the client's free, a force release of a free name. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_force_release_sync(w.loop, admin, 3000), LEASH_ENOTHELD);
    every_key_expires(&w.r);
    leash_client_free(c2);
    leash_client_free(w.c);
    w.c = NULL;
    /* Three leases later, nothing of any of it is left. */
    fx_run_for(w.loop, 900);
    CHECK_EQ_INT(test_redis_int(&w.r, "DBSIZE"), 0);
    fx_world_down(&w);
}

/* ---- A lock's other names never collide with another lock's key ---- */

TEST(locks_named_like_another_locks_companions_are_independent) {
    static const char *const names[] = {"a{x}",       "a{x}:fence",   "a{x}:released",
                                        "a{x}:rel:x", "{leash:a}{x}", "a{x}\x01"};
    fx_world w;
    leash_client *c2;
    leash_lock *l[6], *o[6];
    int i;

    fx_world_up(&w, 5000, 0);
    c2 = fx_client(w.loop, &w.r, 5000);
    for (i = 0; i < 6; i++) {
        l[i] = leash_lock_new(w.c, names[i]);
        o[i] = leash_lock_new(c2, names[i]);
        CHECK(l[i] != NULL && o[i] != NULL);
        CHECK_MSG(fx_acquire_sync(w.loop, l[i], 0, 3000) == LEASH_OK, "lock %s", names[i]);
    }
    for (i = 0; i < 6; i++) {
        CHECK(leash_held(l[i]));
        CHECK_EQ_INT(fx_acquire_sync(w.loop, o[i], 0, 3000), LEASH_EBUSY);
    }
    for (i = 0; i < 6; i++) {
        CHECK_EQ_INT(fx_release_sync(w.loop, l[i], 3000), LEASH_OK);
        CHECK_EQ_INT(fx_acquire_sync(w.loop, o[i], 0, 3000), LEASH_OK);
        CHECK_EQ_INT(fx_release_sync(w.loop, o[i], 3000), LEASH_OK);
    }
    leash_client_free(c2);
    fx_world_down(&w);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(dbs_do_not_hear_each_others_lock_messages),
        TEST_CASE(a_key_of_another_type_never_leaves_a_hold_behind),
        TEST_CASE(fences_grow_across_a_restart_without_persistence),
        TEST_CASE(every_key_has_a_ttl_and_unused_names_leave_nothing),
        TEST_CASE(locks_named_like_another_locks_companions_are_independent),
        {0},
    };
    return test_main(argc, argv, cases);
}
