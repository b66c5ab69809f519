/* SPDX-License-Identifier: MIT */
#define _DEFAULT_SOURCE 1 /* usleep */
/* The multi-lock (leash_multi_lock_new) on a real loop against a real Redis
 * (one server, a cluster, or Redlock's independent servers: fixture.h):
 * all or nothing, no deadlock between overlapping multi-locks, cancel and
 * timeout give everything back, lost once, the watchdog renews every
 * member, a fence per member that grows. Each case runs twice: with names
 * of one slot (a hash tag) and with names spread over slots. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#ifdef LEASH_TEST_ONE_SERVER
#include "proxy.h"
#endif

/* The members' names: of one slot ({acct}), or spread (each its own). */
static const char *const tagged[] = {"{acct}a", "{acct}b", "{acct}c"};
static const char *const spread[] = {"acct-a", "acct-b", "acct-c"};

static const char *key_of(const char *name, char *buf, size_t len) {
    snprintf(buf, len, "leash:%s", name);
    return buf;
}

static int exists(fx_world *w, const char *name) {
    char key[64];

    key_of(name, key, sizeof(key));
    return fx_redis_exists(fx_redis_of(w, key), key);
}

/* Runs the loop until no key of names[] is left (the give-backs go in the
 * background): 1, or 0 after timeout_ms. */
static int run_until_gone(fx_world *w, const char *const *names, int n, int64_t timeout_ms) {
    int64_t end = test_now_ms() + timeout_ms;
    int i, left;

    do {
        fx_run_for(w->loop, 10);
        for (left = 0, i = 0; i < n; i++)
            left += exists(w, names[i]);
        if (left == 0)
            return 1;
    } while (test_now_ms() < end);
    return 0;
}

static void all_or_nothing(const char *const *names) {
    fx_world w;
    leash_client *c2;
    leash_lock *m, *other, *probe;
    fx_result r = {0};

    fx_world_up(&w, 5000, 0);
#ifdef LEASH_TEST_TOPOLOGY_CLUSTER
    if (names == spread) { /* the spread names live on more than one master */
        char k0[64], k1[64], k2[64];
        CHECK(fx_redis_of(&w, key_of(names[0], k0, sizeof(k0))) !=
                  fx_redis_of(&w, key_of(names[1], k1, sizeof(k1))) ||
              fx_redis_of(&w, k0) != fx_redis_of(&w, key_of(names[2], k2, sizeof(k2))));
    }
#endif
    c2 = fx_world_client(&w, 5000);
    m = leash_multi_lock_new(w.c, names, 3);
    CHECK(m != NULL);
    other = leash_lock_new(c2, names[1]);
    probe = leash_lock_new(c2, names[0]);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_OK);

    /* Try-once: busy, and nothing taken. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_EBUSY);
    CHECK(!leash_held(m));
    CHECK(run_until_gone(&w, (const char *const[]){names[0], names[2]}, 2, 2000));

    /* Waiting: still nothing taken while it waits. */
    CHECK_EQ_INT(leash_acquire(m, 10000, fx_acquire_cb, &r), LEASH_OK);
    fx_run_for(w.loop, 300);
    CHECK_EQ_INT(r.calls, 0);
    CHECK_EQ_INT(exists(&w, names[0]) + exists(&w, names[2]), 0);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, probe, 0, 5000),
                 LEASH_OK); /* a waiting member keeps nobody out */
    CHECK_EQ_INT(fx_release_sync(w.loop, probe, 5000), LEASH_OK);

    /* Free: it takes them all. */
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 5000), LEASH_OK);
    fx_run_until(w.loop, &r, 5000);
    CHECK_EQ_INT(r.status, LEASH_OK);
    CHECK(leash_held(m));
    CHECK(leash_valid_ms(m) > 4000);
    CHECK_EQ_INT(leash_hold_count(m), 1);
    CHECK_EQ_INT(exists(&w, names[0]) + exists(&w, names[1]) + exists(&w, names[2]), 3);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(leash_acquire(m, 0, fx_acquire_cb, &r), LEASH_ESTATE); /* not reentrant */
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    CHECK(!leash_held(m));
    CHECK_EQ_INT(fx_dbsize(&w), 0);
    leash_client_free(c2);
    fx_world_down(&w);
}

TEST(all_or_nothing_in_one_slot) {
    all_or_nothing(tagged);
}

TEST(all_or_nothing_spread_over_slots) {
    all_or_nothing(spread);
}

/* Two clients each loop a multi-lock over the same names, named in
 * opposite orders, waiting for ever; a third loops a plain mutex of the
 * middle name. None may deadlock, and no two hold at once. A hold lasts
 * until the test's next turn of the loop (10 ms). */
typedef struct racer {
    leash_lock *l;
    int rounds, want, busy, holding;
    struct racer *all; /* the three */
    int *overlap;
} racer;

static void racer_go(racer *x);

static void racer_released(leash_lock *l, int status, void *arg) {
    racer *x = arg;

    (void)l;
    CHECK_EQ_INT(status, LEASH_OK);
    x->busy = 0;
    if (x->rounds < x->want)
        racer_go(x);
}

static void racer_acquired(leash_lock *l, int status, void *arg) {
    racer *x = arg;
    int i;

    CHECK_EQ_INT(status, LEASH_OK);
    CHECK(leash_held(l));
    for (i = 0; i < 3; i++)
        if (&x->all[i] != x && (x->all[i].holding || leash_held(x->all[i].l)))
            (*x->overlap)++;
    x->holding = 1;
    x->rounds++;
}

static void racer_go(racer *x) {
    x->busy = 1;
    CHECK_EQ_INT(leash_acquire(x->l, LEASH_WAIT_FOREVER, racer_acquired, x), LEASH_OK);
}

static void overlapping(const char *const *names) {
    enum {
        ROUNDS = 25
    };
    const char *const reversed[] = {names[2], names[1], names[0]};
    fx_world w;
    leash_client *c2, *c3;
    racer x[3];
    int overlap = 0, i, turns = 0;

    fx_world_up(&w, 5000, 0);
    c2 = fx_world_client(&w, 5000);
    c3 = fx_world_client(&w, 5000);
    memset(x, 0, sizeof(x));
    x[0].l = leash_multi_lock_new(w.c, names, 3);
    x[1].l = leash_multi_lock_new(c2, reversed, 3);
    x[2].l = leash_lock_new(c3, names[1]);
    for (i = 0; i < 3; i++) {
        CHECK(x[i].l != NULL);
        x[i].want = ROUNDS;
        x[i].all = x;
        x[i].overlap = &overlap;
    }
    fx_wait_connected(w.loop, c2, 5000);
    fx_wait_connected(w.loop, c3, 5000);
    for (i = 0; i < 3; i++)
        racer_go(&x[i]);
    while ((x[0].busy || x[1].busy || x[2].busy) && turns++ < 3000) {
        fx_run_for(w.loop, 10);
        for (i = 0; i < 3; i++)
            if (x[i].holding) {
                x[i].holding = 0;
                CHECK_EQ_INT(leash_release(x[i].l, racer_released, &x[i]), LEASH_OK);
            }
    }
    CHECK_MSG(x[0].rounds == ROUNDS && x[1].rounds == ROUNDS && x[2].rounds == ROUNDS,
              "rounds %d %d %d of %d: stuck", x[0].rounds, x[1].rounds, x[2].rounds, ROUNDS);
    CHECK_EQ_INT(overlap, 0);
    CHECK(run_until_gone(&w, names, 3, 2000));
    leash_client_free(c2);
    leash_client_free(c3);
    fx_world_down(&w);
}

TEST(overlapping_multi_locks_in_opposite_order_never_deadlock_in_one_slot) {
    overlapping(tagged);
}

TEST(overlapping_multi_locks_in_opposite_order_never_deadlock_spread) {
    overlapping(spread);
}

static void cancel_and_timeout(const char *const *names) {
    fx_world w;
    leash_lock *m, *other;
    fx_result r = {0}, r2 = {0}, r3 = {0}, rel = {0};
    int64_t t0, took;

    fx_world_up(&w, 5000, 0);
    m = leash_multi_lock_new(w.c, names, 3);
    other = leash_lock_new(w.c, names[2]);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_OK);

    /* The wait's deadline covers the whole. */
    t0 = test_now_ms();
    CHECK_EQ_INT(leash_acquire(m, 300, fx_acquire_cb, &r), LEASH_OK);
    fx_run_until(w.loop, &r, 5000);
    took = r.at_ms - t0;
    CHECK_EQ_INT(r.status, LEASH_ETIMEDOUT);
    CHECK_MSG(took >= 300 && took <= 300 + TEST_SLACK_MS, "timed out after %lld ms",
              (long long)took);
    CHECK(run_until_gone(&w, names, 2, 2000));

    /* Cancel while it waits. */
    CHECK_EQ_INT(leash_acquire(m, LEASH_WAIT_FOREVER, fx_acquire_cb, &r2), LEASH_OK);
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(leash_cancel(m), LEASH_OK);
    CHECK_EQ_INT(r2.calls, 0); /* from the loop */
    CHECK_EQ_INT(leash_cancel(m), LEASH_ESTATE);
    fx_run_until(w.loop, &r2, 2000);
    CHECK_EQ_INT(r2.status, LEASH_ECANCELED);
    CHECK(run_until_gone(&w, names, 2, 2000));
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 5000), LEASH_OK);
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(r2.calls, 1);
    CHECK(!leash_held(m));

    /* A release while it waits undoes the acquire: ECANCELED, then the
     * release's callback, ENOTHELD (the whole was never held). */
    memset(&r2, 0, sizeof(r2));
    memset(&rel, 0, sizeof(rel));
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(m, LEASH_WAIT_FOREVER, fx_acquire_cb, &r2), LEASH_OK);
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(leash_release(m, fx_release_cb, &rel), LEASH_OK);
    CHECK_EQ_INT(r2.calls + rel.calls, 0); /* from the loop */
    CHECK_EQ_INT(leash_release(m, fx_release_cb, &rel), LEASH_ESTATE);
    fx_run_until(w.loop, &rel, 2000);
    CHECK_EQ_INT(r2.calls, 1);
    CHECK_EQ_INT(r2.status, LEASH_ECANCELED);
    CHECK_EQ_INT(rel.status, LEASH_ENOTHELD);
    CHECK(run_until_gone(&w, names, 2, 2000));
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 5000), LEASH_OK);

    /* Cancel at once, the grants on their way: released, never leaked. */
    CHECK_EQ_INT(leash_acquire(m, LEASH_WAIT_FOREVER, fx_acquire_cb, &r3), LEASH_OK);
    CHECK_EQ_INT(leash_cancel(m), LEASH_OK);
    fx_run_until(w.loop, &r3, 2000);
    CHECK_EQ_INT(r3.status, LEASH_ECANCELED);
    CHECK(run_until_gone(&w, names, 3, 2000));
    CHECK_EQ_INT(fx_dbsize(&w), 0);

    /* Usable again. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    fx_world_down(&w);
}

/* An acquire asked from inside a callback that worked a while (the loop's
 * idea of now lags behind by then, and a timer set from it fires early)
 * never times out before its wait. */
typedef struct late_start {
    leash_lock *m;
    fx_result *r;
    int64_t asked;
} late_start;

static void start_late(leash_lock *l, int status, void *arg) {
    late_start *ls = arg;
    int64_t until = test_now_ms() + 40;

    (void)l;
    (void)status;
    while (test_now_ms() < until)
        ;
    ls->asked = test_now_ms();
    CHECK_EQ_INT(leash_acquire(ls->m, 100, fx_acquire_cb, ls->r), LEASH_OK);
}

static void never_early(const char *const *names) {
    fx_world w;
    leash_lock *m, *other, *trigger;
    fx_result r = {0};
    late_start ls;
    int i;

    fx_world_up(&w, 5000, 0);
    m = leash_multi_lock_new(w.c, names, 3);
    other = leash_lock_new(w.c, names[2]);
    trigger = leash_lock_new(w.c, "trigger");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_OK);
    for (i = 0; i < 3; i++) {
        memset(&r, 0, sizeof(r));
        ls.m = m;
        ls.r = &r;
        CHECK_EQ_INT(leash_acquire(trigger, 0, start_late, &ls), LEASH_OK);
        fx_run_until(w.loop, &r, 5000);
        CHECK_EQ_INT(r.status, LEASH_ETIMEDOUT);
        CHECK_MSG(r.at_ms - ls.asked >= 100, "timed out %lld ms after a 100 ms wait",
                  (long long)(r.at_ms - ls.asked));
        CHECK_EQ_INT(fx_release_sync(w.loop, trigger, 5000), LEASH_OK);
        CHECK(run_until_gone(&w, names, 2, 2000));
    }
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 5000), LEASH_OK);
    fx_world_down(&w);
}

TEST(a_wait_asked_late_in_a_loop_turn_never_ends_early) {
    never_early(tagged);
    never_early(spread);
}

TEST(cancel_and_timeout_give_every_member_back_in_one_slot) {
    cancel_and_timeout(tagged);
}

TEST(cancel_and_timeout_give_every_member_back_spread) {
    cancel_and_timeout(spread);
}

static void lost_once(const char *const *names) {
    fx_world w;
    leash_lock *m;
    fx_result lost = {0};
    char key[64];

    fx_world_up(&w, 600, 0);
    m = leash_multi_lock_new(w.c, names, 3);
    leash_on_lost(m, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
    CHECK(fx_key_cmd(&w, key_of(names[1], key, sizeof(key)), "DEL %s", key) >= 1);
    fx_run_until(w.loop, &lost, 2000);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    CHECK(!leash_held(m));
    CHECK(run_until_gone(&w, names, 3, 2000)); /* the others given back */
    fx_run_for(w.loop, 700);
    CHECK_EQ_INT(lost.calls, 1);
    CHECK_EQ_INT(leash_release(m, NULL, NULL), LEASH_ESTATE);
    /* Usable again. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    CHECK_EQ_INT(lost.calls, 1);
    fx_world_down(&w);
}

TEST(lost_once_when_one_member_key_is_deleted_in_one_slot) {
    lost_once(tagged);
}

TEST(lost_once_when_one_member_key_is_deleted_spread) {
    lost_once(spread);
}

static void watchdog(const char *const *names) {
    fx_world w;
    leash_lock *m;
    fx_result lost = {0};
    int i;

    fx_world_up(&w, 300, 0);
    m = leash_multi_lock_new(w.c, names, 3);
    leash_on_lost(m, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
    fx_run_for(w.loop, 1200);
    CHECK_EQ_INT(lost.calls, 0);
    CHECK(leash_held(m));
    CHECK_MSG(leash_renewals(m) >= 3, "every member renewed %llu times",
              (unsigned long long)leash_renewals(m));
    for (i = 0; i < 3; i++)
        CHECK(exists(&w, names[i]));
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_dbsize(&w), 0);
    fx_world_down(&w);
}

TEST(the_watchdog_renews_every_member_in_one_slot) {
    watchdog(tagged);
}

#ifndef LEASH_TEST_TOPOLOGY_REDLOCK
/* What docs/multi.md "Several locks at once" says a cycle costs: on one server
 * the members (of one slot or not; in a cluster those of one slot) are
 * taken in one script (GET and SET each, one TIME), and each is released
 * as a mutex (3 calls). Nothing is left behind. */
static void cycle_cost(const char *const *names, long long calls_per_cycle,
                       long long scripts_per_cycle) {
    enum {
        CYCLES = 20
    };
    fx_world w;
    leash_lock *m;
    test_redis *r;
    long long calls, scripts;
    char key[64];
    int i;

    fx_world_up(&w, 10000, 0);
    r = fx_redis_of(&w, key_of(names[0], key, sizeof(key)));
    m = leash_multi_lock_new(w.c, names, 3);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK); /* scripts loaded */
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    freeReplyObject(test_redis_cmd(r, "CONFIG RESETSTAT"));
    for (i = 0; i < CYCLES; i++) {
        CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
        CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    }
    calls = test_redis_lock_calls(r);
    scripts = test_redis_calls(r, "evalsha");
    CHECK_MSG(calls >= calls_per_cycle * CYCLES && calls <= calls_per_cycle * CYCLES + 2,
              "%lld Redis calls for %d cycles of 3 members, wanted %lld each", calls, CYCLES,
              calls_per_cycle);
    CHECK_MSG(scripts == scripts_per_cycle * CYCLES, "%lld scripts for %d cycles, wanted %lld each",
              scripts, CYCLES, scripts_per_cycle);
    CHECK_EQ_INT(fx_dbsize(&w), 0);
    fx_world_down(&w);
}

TEST(a_cycle_of_members_of_one_slot_takes_them_in_one_script) {
    cycle_cost(tagged, 1 + 1 + 3 * 2 + 3 * 3, 1 + 3);
}

#ifdef LEASH_TEST_ONE_SERVER
TEST(a_cycle_of_members_of_several_slots_on_one_server_takes_them_in_one_script) {
    cycle_cost(spread, 1 + 1 + 3 * 2 + 3 * 3, 1 + 3);
}
#endif
#endif

#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
/* Calls of every server, from INFO commandstats: those of a lock's
 * scripts (test_redis_lock_calls), or of one command. */
static long long redlock_calls(fx_world *w, const char *cmd) {
    long long n = 0;
    int i;

    for (i = 0; i < FX_REDLOCK_N; i++)
        n += cmd == NULL ? test_redis_lock_calls(&w->servers[i])
                         : test_redis_calls(&w->servers[i], cmd);
    return n;
}

/* What docs/multi.md says a Redlock cycle of 3 members costs: one script
 * per server takes the three, all or none on that server, and the quorum
 * decides the whole in one round trip (a member at a time, it took three
 * round trips and a script per member per server). Per server: the
 * script (TIME, one EXISTS, a GET of each fence floor, a SET of each key
 * and each floor) and each member released as a mutex (3 calls). Each
 * member's fence is still a Redlock mutex's: above its floor, which the
 * grant raised to it on every server. */
TEST(a_redlock_cycle_takes_every_member_in_one_script_per_server) {
    enum {
        CYCLES = 20
    };
    fx_world w;
    leash_lock *m, *single;
    long long calls, scripts;
    uint64_t fence;
    int64_t t0, took;
    int i;

    fx_world_up(&w, 10000, 0);
    m = leash_multi_lock_new(w.c, spread, 3);
    single = leash_lock_new(w.c, spread[2]);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK); /* scripts loaded */
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    fx_run_for(w.loop, 200); /* the slower servers' copies */
    for (i = 0; i < FX_REDLOCK_N; i++)
        freeReplyObject(test_redis_cmd(&w.servers[i], "CONFIG RESETSTAT"));
    t0 = test_now_ms();
    for (i = 0; i < CYCLES; i++) {
        CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
        CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    }
    took = test_now_ms() - t0;
    fx_run_for(w.loop, 200);
    calls = redlock_calls(&w, NULL);
    scripts = redlock_calls(&w, "evalsha");
    fprintf(stderr,
            "redlock, 3 members: %.1f Redis calls and %.1f scripts per cycle (%d servers), "
            "%.2f ms per cycle\n",
            (double)calls / CYCLES, (double)scripts / CYCLES, FX_REDLOCK_N, (double)took / CYCLES);
    CHECK_MSG(scripts == (1 + 3) * FX_REDLOCK_N * CYCLES,
              "%lld scripts for %d cycles of 3 members, wanted %d each", scripts, CYCLES,
              (1 + 3) * FX_REDLOCK_N);
    /* A subscription of the loop may add a call. */
    CHECK_MSG(calls >= (1 + 1 + 1 + 3 * 3 + 3 * 3) * FX_REDLOCK_N * CYCLES &&
                  calls <= (1 + 1 + 1 + 3 * 3 + 3 * 3) * FX_REDLOCK_N * CYCLES + 5,
              "%lld Redis calls for %d cycles of 3 members, wanted %d each", calls, CYCLES,
              (1 + 1 + 1 + 3 * 3 + 3 * 3) * FX_REDLOCK_N);
    /* A mutex of a member's name gets a fence above the member's. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
    fence = leash_multi_fence(m, 2);
    CHECK(fence > 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, single, 0, 5000), LEASH_OK);
    CHECK_MSG(leash_fence(single) > fence, "the mutex's fence %llu after the member's %llu",
              (unsigned long long)leash_fence(single), (unsigned long long)fence);
    fence = leash_fence(single);
    CHECK_EQ_INT(fx_release_sync(w.loop, single, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
    CHECK(leash_multi_fence(m, 2) > fence);
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_dbsize(&w), 0);
    fx_world_down(&w);
}
#endif

#ifndef LEASH_TEST_TOPOLOGY_REDLOCK
/* Members of one slot renew together: one script for the three. */
TEST(members_of_one_slot_renew_in_one_script) {
    fx_world w;
    leash_lock *m;
    test_redis *r;
    long long scripts;
    uint64_t renewals;

    fx_world_up(&w, 300, 0);
    r = fx_redis_of(&w, "leash:{acct}a");
    m = leash_multi_lock_new(w.c, tagged, 3);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
    fx_run_for(w.loop, 50);
    freeReplyObject(test_redis_cmd(r, "CONFIG RESETSTAT"));
    renewals = leash_renewals(m);
    fx_run_for(w.loop, 1000);
    renewals = leash_renewals(m) - renewals;
    scripts = test_redis_calls(r, "evalsha");
    CHECK_MSG(renewals >= 5, "%llu renewals", (unsigned long long)renewals);
    /* Apart, it would be 3 each; a timer of the loop may split one. */
    CHECK_MSG(scripts < 2 * (long long)renewals, "%lld scripts for %llu renewals of 3 members",
              scripts, (unsigned long long)renewals);
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    fx_world_down(&w);
}
#endif

TEST(the_watchdog_renews_every_member_spread) {
    watchdog(spread);
}

static void fences(const char *const *names) {
    fx_world w;
    leash_lock *m, *single;
    uint64_t last[3] = {0, 0, 0};
    int round, i;

    fx_world_up(&w, 5000, 0);
    m = leash_multi_lock_new(w.c, names, 3);
    single = leash_lock_new(w.c, names[1]);
    CHECK_EQ_INT((long long)leash_multi_fence(m, 0), 0);
    for (round = 0; round < 4; round++) {
        CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
        for (i = 0; i < 3; i++) {
            CHECK_MSG(leash_multi_fence(m, i) > last[i], "member %d: fence %llu after %llu", i,
                      (unsigned long long)leash_multi_fence(m, i), (unsigned long long)last[i]);
            last[i] = leash_multi_fence(m, i);
        }
        CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
        /* A mutex of a member's name shares its fences. */
        CHECK_EQ_INT(fx_acquire_sync(w.loop, single, 0, 5000), LEASH_OK);
        CHECK(leash_fence(single) > last[1]);
        last[1] = leash_fence(single);
        CHECK_EQ_INT(fx_release_sync(w.loop, single, 5000), LEASH_OK);
    }
    CHECK_EQ_INT((long long)leash_multi_fence(m, 3), 0);
    CHECK_EQ_INT((long long)leash_multi_fence(single, 0), 0);
    CHECK_EQ_INT(fx_dbsize(&w), 0);
    fx_world_down(&w);
}

TEST(each_member_has_a_fence_that_grows_in_one_slot) {
    fences(tagged);
}

TEST(each_member_has_a_fence_that_grows_spread) {
    fences(spread);
}

/* The loop stalls past a try-once's deadline (command_timeout_ms) with
 * the one script's grant unread in the socket: the grant, read late,
 * decides (the deadline gives the loop one more turn once it passed, as
 * a mutex's does). */
TEST(a_loop_that_stalls_past_a_try_once_reads_its_grant_first) {
    fx_world w;
    leash_lock *m;
    fx_result r = {0};

    fx_world_up(&w, 5000, 300);
    m = leash_multi_lock_new(w.c, tagged, 3);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK); /* the script is loaded */
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    CHECK(run_until_gone(&w, tagged, 3, 3000));
    fx_acquire_unread(&w, m, "leash:{acct}c", 0, &r); /* the last member's key: granted */
    usleep(500 * 1000);
    fx_run_until(w.loop, &r, 3000);
    CHECK_EQ_INT(r.status, LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    leash_lock_free(m);
    fx_world_down(&w);
}

#ifdef LEASH_TEST_ONE_SERVER
/* One deadline covers the whole: a member whose attempt is on the wire
 * when the wait ends (its answer stalled) keeps a mutex waiting up to the
 * command timeout; the multi-lock ends at its wait all the same. */
TEST(the_wait_deadline_covers_the_whole_even_with_an_answer_stalled) {
    fx_world w;
    fault_proxy p;
    leash_options o;
    leash_client *c2;
    leash_lock *m, *other;
    fx_result r = {0};
    int64_t t0, took;

    fx_world_up(&w, 5000, 0);
    CHECK_EQ_INT(fp_start(&p, w.r.port), 0);
    fx_fault_options(&o, p.port, 5000);
    o.command_timeout_ms = 1500;
    c2 = fx_client_opts(w.loop, &o);
    fx_wait_connected(w.loop, c2, 5000);
    other = leash_lock_new(w.c, spread[0]);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_OK);
    m = leash_multi_lock_new(c2, spread, 3);
    t0 = test_now_ms();
    CHECK_EQ_INT(leash_acquire(m, 500, fx_acquire_cb, &r), LEASH_OK);
    fx_run_for(w.loop, 200);
    CHECK_EQ_INT(fp_stall(&p, FP_CMD, FP_DOWN, 1), 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 5000), LEASH_OK); /* wakes it */
    fx_run_until(w.loop, &r, 5000);
    took = r.at_ms - t0;
    CHECK_EQ_INT(r.status, LEASH_ETIMEDOUT);
    CHECK_MSG(took >= 500 && took <= 500 + TEST_SLACK_MS, "ended after %lld ms, wanted 500",
              (long long)took);
    CHECK_EQ_INT(fp_clear(&p), 0);
    CHECK(run_until_gone(&w, spread, 3, 3000)); /* the stalled grant given back */
    leash_client_free(c2);
    fp_stop(&p);
    fx_world_down(&w);
}
#endif

#ifdef LEASH_TEST_ONE_SERVER
/* The one script of a slot's members ran, its answer stalled: a free, a
 * cancel or a timeout gives back what it wrote without the answer. */
TEST(a_script_grant_whose_answer_is_stalled_is_given_back) {
    fx_world w;
    fault_proxy p;
    leash_options o;
    leash_client *c2;
    leash_lock *m;
    fx_result r = {0};
    int round;

    fx_world_up(&w, 5000, 0);
    CHECK_EQ_INT(fp_start(&p, w.r.port), 0);
    fx_fault_options(&o, p.port, 5000);
    o.command_timeout_ms = 3000;
    c2 = fx_client_opts(w.loop, &o);
    fx_wait_connected(w.loop, c2, 5000);
    m = leash_multi_lock_new(c2, tagged, 3);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK); /* the script is loaded */
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    for (round = 0; round < 3; round++) {
        CHECK_EQ_INT(fp_stall(&p, FP_CMD, FP_DOWN, 1), 0);
        memset(&r, 0, sizeof(r));
        CHECK_EQ_INT(leash_acquire(m, round == 2 ? 300 : LEASH_WAIT_FOREVER, fx_acquire_cb, &r),
                     LEASH_OK);
        fx_run_for(w.loop, 100);
        CHECK_EQ_INT(exists(&w, tagged[0]) + exists(&w, tagged[1]) + exists(&w, tagged[2]), 3);
        if (round == 0) {
            leash_lock_free(m);
            CHECK_EQ_INT(r.status, LEASH_ECANCELED);
        } else if (round == 1) {
            CHECK_EQ_INT(leash_cancel(m), LEASH_OK);
        }
        /* Given back with the answers still stalled. */
        CHECK_MSG(run_until_gone(&w, tagged, 3, 2000), "round %d: not given back", round);
        CHECK_EQ_INT(fp_clear(&p), 0);
        if (round == 0)
            m = leash_multi_lock_new(c2, tagged, 3);
        else
            fx_run_until(w.loop, &r, 5000);
        CHECK_EQ_INT(r.calls, 1);
        CHECK_EQ_INT(r.status, round == 2 ? LEASH_ETIMEDOUT : LEASH_ECANCELED);
        fx_run_for(w.loop, 200);
        CHECK_EQ_INT(fx_dbsize(&w), 0);
    }
    leash_client_free(c2);
    fp_stop(&p);
    fx_world_down(&w);
}
#endif

#ifdef LEASH_TEST_ONE_SERVER
/* The value of key, or "" (buf is len bytes). */
static const char *value_of(fx_world *w, const char *key, char *buf, size_t len) {
    redisReply *v = test_redis_cmd(&w->r, "GET %s", key);

    CHECK(v != NULL);
    snprintf(buf, len, "%s", v->type == REDIS_REPLY_STRING ? v->str : "");
    freeReplyObject(v);
    return buf;
}

/* The one script ran, its answer was lost with the connection, and it is
 * resent: the resend finds the keys its first copy wrote and writes them
 * again. Meanwhile others wrote into them (an attempt that waits marks a
 * hold "w"; a starving waiter queues behind it): the resend keeps both,
 * as the mutex's own writes do, so the release still publishes and hands
 * the lock to the queued waiter. */
TEST(a_resent_script_keeps_the_mark_and_queue_others_wrote) {
    static const char waiter[] = "0123456789abcdef0123456789abcdef";
    fx_world w;
    fault_proxy p;
    leash_options o;
    leash_client *c2;
    leash_lock *m;
    fx_result r = {0};
    char key[64], v[256], marked[384], queue[64];
    unsigned long long fence1;
    redisReply *set;
    size_t vn, qn;

    fx_world_up(&w, 5000, 0);
    CHECK_EQ_INT(fp_start(&p, w.r.port), 0);
    fx_fault_options(&o, p.port, 5000);
    o.command_timeout_ms = 3000;
    c2 = fx_client_opts(w.loop, &o);
    fx_wait_connected(w.loop, c2, 5000);
    m = leash_multi_lock_new(c2, tagged, 3);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK); /* the script is loaded */
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);

    /* Copy 1 runs; its answer is held. */
    CHECK_EQ_INT(fp_stall(&p, FP_CMD, FP_DOWN, 1), 0);
    CHECK_EQ_INT(leash_acquire(m, 10000, fx_acquire_cb, &r), LEASH_OK);
    key_of(tagged[0], key, sizeof(key));
    fx_run_until_key_exists(&w, key);
    value_of(&w, key, v, sizeof(v));
    CHECK_MSG(strlen(v) > 36 && strncmp(v + 32, ":0:1:", 5) == 0, "copy 1 wrote %s", v);
    fence1 = strtoull(v + 37, NULL, 10);
    /* Another's waiting attempt marked it, a starving waiter queued. */
    snprintf(queue, sizeof(queue), ":%s:%lld", waiter, (long long)test_now_ms());
    snprintf(marked, sizeof(marked), "%.32s:1:1:%s%s", v, v + 37, queue);
    set = test_redis_cmd(&w.r, "SET %s %s KEEPTTL", key, marked);
    CHECK(set != NULL && set->type == REDIS_REPLY_STATUS);
    freeReplyObject(set);

    /* The connection goes: the script is resent with the same tokens. */
    CHECK_EQ_INT(fp_cut(&p, FP_CMD), 0);
    CHECK_EQ_INT(fp_clear(&p), 0);
    fx_run_until(w.loop, &r, 5000);
    CHECK_EQ_INT(r.status, LEASH_OK);
    value_of(&w, key, v, sizeof(v));
    CHECK_MSG(strncmp(v, marked, 32) == 0 && strncmp(v + 32, ":1:1:", 5) == 0,
              "the resend wrote %s over %s: the mark is gone", v, marked);
    vn = strlen(v);
    qn = strlen(queue);
    CHECK_MSG(vn > qn && strcmp(v + vn - qn, queue) == 0,
              "the resend wrote %s over %s: the queue is gone", v, marked);
    CHECK(strtoull(v + 37, NULL, 10) >= fence1);

    /* The release hands the first key to the queued waiter. */
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    value_of(&w, key, v, sizeof(v));
    CHECK_MSG(strncmp(v, waiter, 32) == 0, "released to %s, not to the queued waiter", v);
    leash_client_free(c2);
    fp_stop(&p);
    fx_world_down(&w);
}
#endif

TEST(free_while_waiting_cancels_inside_and_gives_back) {
    fx_world w;
    leash_lock *m, *other;
    fx_result r = {0};

    fx_world_up(&w, 5000, 0);
    m = leash_multi_lock_new(w.c, spread, 3);
    other = leash_lock_new(w.c, spread[1]);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(m, LEASH_WAIT_FOREVER, fx_acquire_cb, &r), LEASH_OK);
    fx_run_for(w.loop, 100);
    leash_lock_free(m);
    CHECK_EQ_INT(r.calls, 1);
    CHECK_EQ_INT(r.status, LEASH_ECANCELED);
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 5000), LEASH_OK);
    CHECK(run_until_gone(&w, spread, 3, 2000));

    /* Freed while held: released. */
    m = leash_multi_lock_new(w.c, tagged, 3);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
    leash_lock_free(m);
    CHECK(run_until_gone(&w, tagged, 3, 2000));
    fx_world_down(&w);
}

static void closed(int status, void *arg) {
    *(int *)arg = status == LEASH_OK ? 1 : -1;
}

TEST(the_client_free_and_close_end_a_multi_lock) {
    fx_world w;
    leash_client *c2, *c3;
    leash_lock *m, *other;
    fx_result r = {0};
    int done = 0;

    fx_world_up(&w, 5000, 0);
    other = leash_lock_new(w.c, spread[1]);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_OK);
    c2 = fx_world_client(&w, 5000);
    fx_wait_connected(w.loop, c2, 5000);
    m = leash_multi_lock_new(c2, spread, 3);
    CHECK_EQ_INT(leash_acquire(m, LEASH_WAIT_FOREVER, fx_acquire_cb, &r), LEASH_OK);
    fx_run_for(w.loop, 100);
    leash_client_free(c2);
    CHECK_EQ_INT(r.calls, 1);
    CHECK_EQ_INT(r.status, LEASH_ECANCELED);
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 5000), LEASH_OK);
    CHECK(run_until_gone(&w, spread, 3, 2000));

    /* A close releases the members it holds, and waits for them; an
     * acquire ends ECANCELED (the client is freed after). */
    c3 = fx_world_client(&w, 5000);
    fx_wait_connected(w.loop, c3, 5000);
    m = leash_multi_lock_new(c3, tagged, 3);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_OK);
    memset(&r, 0, sizeof(r));
    CHECK_EQ_INT(
        leash_acquire(leash_multi_lock_new(c3, spread, 3), LEASH_WAIT_FOREVER, fx_acquire_cb, &r),
        LEASH_OK);
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(leash_client_close(c3, closed, &done), LEASH_OK);
    CHECK_EQ_INT(fx_run_until_flag(w.loop, &done, 5000), 0);
    CHECK_EQ_INT(done, 1);
    CHECK_EQ_INT(r.calls, 1);
    CHECK_EQ_INT(r.status, LEASH_ECANCELED);
    CHECK(run_until_gone(&w, tagged, 3, 100));
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 5000), LEASH_OK);
    CHECK(run_until_gone(&w, spread, 3, 2000));
    fx_world_down(&w);
}

TEST(bad_arguments_are_refused) {
    fx_world w;
    const char *names[LEASH_MULTI_MAX + 1];
    const char *twice[] = {"x", "y", "x"};
    const char *with_null[] = {"x", NULL};
    char buf[LEASH_MULTI_MAX + 1][16];
    leash_lock *m;
    int i;

    fx_world_up(&w, 5000, 0);
    for (i = 0; i <= LEASH_MULTI_MAX; i++) {
        snprintf(buf[i], sizeof(buf[i]), "n%d", i);
        names[i] = buf[i];
    }
    CHECK(leash_multi_lock_new(NULL, names, 2) == NULL);
    CHECK(leash_multi_lock_new(w.c, NULL, 2) == NULL);
    CHECK(leash_multi_lock_new(w.c, names, 0) == NULL);
    CHECK(leash_multi_lock_new(w.c, names, LEASH_MULTI_MAX + 1) == NULL);
    CHECK(leash_multi_lock_new(w.c, twice, 3) == NULL);
    CHECK(fx_log_contains("given twice"));
    CHECK(leash_multi_lock_new(w.c, with_null, 2) == NULL);
    CHECK(leash_multi_lock_new(w.c, (const char *const[]){"x", ""}, 2) == NULL);
    m = leash_multi_lock_new(w.c, names, LEASH_MULTI_MAX);
    CHECK(m != NULL);
    CHECK_EQ_INT(leash_release(m, NULL, NULL), LEASH_ESTATE);
    CHECK_EQ_INT(leash_cancel(m), LEASH_ESTATE);
    CHECK_EQ_INT(leash_force_release(m, NULL, NULL), LEASH_ESTATE);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_dbsize(&w), LEASH_MULTI_MAX);
    CHECK_EQ_INT(strcmp(leash_lock_name(m), "n0"), 0);
    leash_lock_free(m);
    CHECK(run_until_gone(&w, names, LEASH_MULTI_MAX, 3000));
    fx_world_down(&w);
}

/* The handshake loads the multi-lock's scripts (one server's and
 * Redlock's) with the mutex's: a multi-lock's first acquire on a new
 * connection (after a restart or a SCRIPT FLUSH) takes no NOSCRIPT round
 * trip, which on Redlock comes out of the grant's validity. */
TEST(a_first_multi_acquire_takes_no_noscript_round_trip) {
    fx_world w;
    leash_lock *m;
    leash_stats st;

    fx_world_up(&w, 5000, 0);
    m = leash_multi_lock_new(w.c, tagged, 3);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
    leash_client_stats(w.c, &st);
    CHECK_MSG(st.noscript_reloads == 0, "%llu NOSCRIPT answers for the first multi acquire",
              (unsigned long long)st.noscript_reloads);
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    leash_lock_free(m);
    fx_world_down(&w);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(all_or_nothing_in_one_slot),
        TEST_CASE(all_or_nothing_spread_over_slots),
        TEST_CASE(overlapping_multi_locks_in_opposite_order_never_deadlock_in_one_slot),
        TEST_CASE(overlapping_multi_locks_in_opposite_order_never_deadlock_spread),
        TEST_CASE(cancel_and_timeout_give_every_member_back_in_one_slot),
        TEST_CASE(a_wait_asked_late_in_a_loop_turn_never_ends_early),
        TEST_CASE(a_loop_that_stalls_past_a_try_once_reads_its_grant_first),
        TEST_CASE(cancel_and_timeout_give_every_member_back_spread),
        TEST_CASE(lost_once_when_one_member_key_is_deleted_in_one_slot),
        TEST_CASE(lost_once_when_one_member_key_is_deleted_spread),
        TEST_CASE(the_watchdog_renews_every_member_in_one_slot),
        TEST_CASE(the_watchdog_renews_every_member_spread),
#ifndef LEASH_TEST_TOPOLOGY_REDLOCK
        TEST_CASE(a_cycle_of_members_of_one_slot_takes_them_in_one_script),
#endif
#ifdef LEASH_TEST_ONE_SERVER
        TEST_CASE(a_cycle_of_members_of_several_slots_on_one_server_takes_them_in_one_script),
#endif
#ifndef LEASH_TEST_TOPOLOGY_REDLOCK
        TEST_CASE(members_of_one_slot_renew_in_one_script),
#endif
#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
        TEST_CASE(a_redlock_cycle_takes_every_member_in_one_script_per_server),
#endif
        TEST_CASE(each_member_has_a_fence_that_grows_in_one_slot),
        TEST_CASE(each_member_has_a_fence_that_grows_spread),
#ifdef LEASH_TEST_ONE_SERVER
        TEST_CASE(the_wait_deadline_covers_the_whole_even_with_an_answer_stalled),
#endif
#ifdef LEASH_TEST_ONE_SERVER
        TEST_CASE(a_script_grant_whose_answer_is_stalled_is_given_back),
        TEST_CASE(a_resent_script_keeps_the_mark_and_queue_others_wrote),
#endif
        TEST_CASE(free_while_waiting_cancels_inside_and_gives_back),
        TEST_CASE(the_client_free_and_close_end_a_multi_lock),
        TEST_CASE(bad_arguments_are_refused),
        TEST_CASE(a_first_multi_acquire_takes_no_noscript_round_trip),
        {0},
    };
    return fx_main(argc, argv, cases);
}
