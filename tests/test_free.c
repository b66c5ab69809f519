/* SPDX-License-Identifier: MIT */
/* Freeing handles and clients from inside every kind of callback, and
 * tearing a client down with waiters, holders and commands in flight. Run
 * under AddressSanitizer, these are the use-after-free and leak tests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

/* What a callback does before it returns. */
enum action {
    FREE_LOCK,
    FREE_CLIENT
};
static enum action action;
static leash_client *the_client;
static fx_result seen;

static void act(leash_lock *l, int status) {
    seen.calls++;
    seen.done = 1;
    seen.status = status;
    if (action == FREE_LOCK) {
        leash_lock_free(l);
        leash_lock_free(l); /* harmless while it is still being freed */
        CHECK(!leash_held(l));
    } else {
        leash_client_free(the_client);
    }
    /* Calls on a handle being freed are refused, not crashes. */
    CHECK_EQ_INT(leash_acquire(l, 0, fx_acquire_cb, NULL), LEASH_ESTATE);
    CHECK_EQ_INT(leash_release(l, NULL, NULL), LEASH_ESTATE);
}

static void acquire_then_act(leash_lock *l, int status, void *arg) {
    (void)arg;
    act(l, status);
}
static void release_then_act(leash_lock *l, int status, void *arg) {
    (void)arg;
    act(l, status);
}
static void lost_then_act(leash_lock *l, int reason, void *arg) {
    (void)arg;
    act(l, reason);
}

/* One scenario for each kind of callback; `how` picks what to free. */
static void scenario(int kind, enum action how) {
    fx_world w;
    leash_lock *l, *holder;
    fx_result dummy = {0};

    fx_world_up(&w, 300, 300);
    the_client = w.c;
    action = how;
    memset(&seen, 0, sizeof(seen));
    l = leash_lock_new(w.c, "victim");
    holder = leash_lock_new(w.c, "victim");
    switch (kind) {
    case 0: /* acquire OK */
        CHECK_EQ_INT(leash_acquire(l, 0, acquire_then_act, NULL), LEASH_OK);
        break;
    case 1: /* acquire EBUSY */
        CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
        CHECK_EQ_INT(leash_acquire(l, 0, acquire_then_act, NULL), LEASH_OK);
        break;
    case 2: /* acquire ETIMEDOUT */
        CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
        CHECK_EQ_INT(leash_acquire(l, 100, acquire_then_act, NULL), LEASH_OK);
        break;
    case 3: /* acquire ECANCELED */
        CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
        CHECK_EQ_INT(leash_acquire(l, 5000, acquire_then_act, NULL), LEASH_OK);
        fx_run_for(w.loop, 50);
        CHECK_EQ_INT(leash_cancel(l), LEASH_OK);
        break;
#ifdef LEASH_TEST_ONE_SERVER
    case 4: /* acquire ECONN: stops the server, so one server only */
        test_redis_freeze(&w.r);
        CHECK_EQ_INT(leash_acquire(l, 0, acquire_then_act, NULL), LEASH_OK);
        break;
#endif
    case 5: /* release OK */
        CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
        CHECK_EQ_INT(leash_release(l, release_then_act, NULL), LEASH_OK);
        break;
    case 6: /* lost */
        CHECK_EQ_INT(leash_lock_set_fixed_lease(l, 200), LEASH_OK);
        leash_on_lost(l, lost_then_act, NULL);
        CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
        break;
    case 7: /* acquire OK of a waiter woken by a release */
        CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
        CHECK_EQ_INT(leash_acquire(l, 5000, acquire_then_act, NULL), LEASH_OK);
        fx_run_for(w.loop, 50);
        CHECK_EQ_INT(leash_release(holder, fx_release_cb, &dummy), LEASH_OK);
        break;
    }
    fx_run_until(w.loop, &seen, 3000);
#ifdef LEASH_TEST_ONE_SERVER
    test_redis_thaw(&w.r);
#endif
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(seen.calls, 1);
    if (how == FREE_CLIENT) {
        w.c = NULL; /* freed by the callback */
        fx_world_down(&w);
        return;
    }
    /* The client is fine; nothing of the victim stays in Redis. */
    leash_lock_free(holder);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "leash:victim"), "leash:victim"), 0);
    fx_world_down(&w);
}

TEST(free_lock_in_acquire_ok) {
    scenario(0, FREE_LOCK);
}
TEST(free_lock_in_acquire_busy) {
    scenario(1, FREE_LOCK);
}
TEST(free_lock_in_acquire_timeout) {
    scenario(2, FREE_LOCK);
}
TEST(free_lock_in_acquire_canceled) {
    scenario(3, FREE_LOCK);
}
#ifdef LEASH_TEST_ONE_SERVER
TEST(free_lock_in_acquire_econn) {
    scenario(4, FREE_LOCK);
}
#endif
TEST(free_lock_in_release) {
    scenario(5, FREE_LOCK);
}
TEST(free_lock_in_lost) {
    scenario(6, FREE_LOCK);
}
TEST(free_lock_in_woken_acquire) {
    scenario(7, FREE_LOCK);
}
TEST(free_client_in_acquire_ok) {
    scenario(0, FREE_CLIENT);
}
TEST(free_client_in_acquire_busy) {
    scenario(1, FREE_CLIENT);
}
TEST(free_client_in_acquire_timeout) {
    scenario(2, FREE_CLIENT);
}
TEST(free_client_in_acquire_canceled) {
    scenario(3, FREE_CLIENT);
}
#ifdef LEASH_TEST_ONE_SERVER
TEST(free_client_in_acquire_econn) {
    scenario(4, FREE_CLIENT);
}
#endif
TEST(free_client_in_release) {
    scenario(5, FREE_CLIENT);
}
TEST(free_client_in_lost) {
    scenario(6, FREE_CLIENT);
}
TEST(free_client_in_woken_acquire) {
    scenario(7, FREE_CLIENT);
}

TEST(client_free_with_waiters_holders_and_commands_in_flight) {
    fx_world w;
    leash_client *other;
    leash_lock *held[3], *waiting[3], *inflight, *releasing, *blocker, *stuck, *forcing;
    fx_result rh[3] = {{0}}, rw[3] = {{0}}, ri = {0}, rr = {0}, rf = {0}, lost = {0};
    char name[32];
    int i;

    fx_world_up(&w, 5000, 300);
    other = fx_world_client(&w, 5000);
    blocker = leash_lock_new(other, "contended");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, blocker, 0, 5000), LEASH_OK);
    stuck = leash_lock_new(other, "stuck");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, stuck, 0, 5000), LEASH_OK);
    for (i = 0; i < 3; i++) {
        snprintf(name, sizeof(name), "held-%d", i);
        held[i] = leash_lock_new(w.c, name);
        leash_on_lost(held[i], fx_lost_cb, &lost);
        CHECK_EQ_INT(fx_acquire_sync(w.loop, held[i], 0, 5000), LEASH_OK);
        waiting[i] = leash_lock_new(w.c, "contended");
        CHECK_EQ_INT(leash_acquire(waiting[i], 10000, fx_acquire_cb, &rw[i]), LEASH_OK);
    }
    releasing = held[2];
    CHECK_EQ_INT(fx_acquire_sync(w.loop, releasing, 0, 5000), LEASH_OK); /* a second hold */
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(leash_release(releasing, fx_release_cb, &rr), LEASH_OK); /* in flight */
    inflight = leash_lock_new(w.c, "inflight");
    CHECK_EQ_INT(leash_acquire(inflight, 0, fx_acquire_cb, &ri), LEASH_OK); /* in flight */
    forcing = leash_lock_new(w.c, "stuck");
    CHECK_EQ_INT(leash_force_release(forcing, fx_release_cb, &rf), LEASH_OK); /* in flight */
    leash_client_free(w.c);
    for (i = 0; i < 3; i++) {
        CHECK_EQ_INT(rh[i].calls, 0);
        CHECK_EQ_INT(rw[i].calls, 1);
        CHECK_EQ_INT(rw[i].status, LEASH_ECANCELED);
    }
    CHECK_EQ_INT(ri.calls, 1);
    CHECK_EQ_INT(ri.status, LEASH_ECANCELED);
    CHECK_EQ_INT(rr.calls, 1);
    CHECK_EQ_INT(rr.status, LEASH_ECANCELED);
    CHECK_EQ_INT(rf.calls, 1);
    CHECK_EQ_INT(rf.status, LEASH_ECANCELED);
    CHECK_EQ_INT(lost.calls, 0);
    /* The best-effort releases reached Redis: nothing of ours is left. */
    fx_run_for(w.loop, 100);
    for (i = 0; i < 3; i++) {
        snprintf(name, sizeof(name), "leash:held-%d", i);
        CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, name), name), 0);
    }
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "leash:inflight"), "leash:inflight"), 0);
    CHECK_EQ_INT(fx_redis_exists(fx_redis_of(&w, "leash:stuck"), "leash:stuck"),
                 0);                  /* the force release went out */
    CHECK_EQ_INT(fx_channels(&w), 0); /* the subscriptions went too */
    leash_client_free(other);
    w.c = NULL; /* freed above */
    fx_world_down(&w);
}

static leash_lock *second_waiter;
static void free_the_other_waiter(leash_lock *l, int status, void *arg) {
    fx_result *r = arg;
    (void)l;
    r->calls++;
    r->done = 1;
    r->status = status;
    leash_lock_free(second_waiter);
}

TEST(free_another_waiter_of_the_same_name_in_a_callback) {
    fx_world w;
    leash_lock *holder, *first;
    fx_result r1 = {0}, r2 = {0};

    fx_world_up(&w, 5000, 300);
    holder = leash_lock_new(w.c, "pair");
    first = leash_lock_new(w.c, "pair");
    second_waiter = leash_lock_new(w.c, "pair");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(first, 5000, free_the_other_waiter, &r1), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(second_waiter, 5000, fx_acquire_cb, &r2), LEASH_OK);
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(leash_release(holder, NULL, NULL), LEASH_OK);
    fx_run_until(w.loop, &r1, 2000);
    CHECK_EQ_INT(r1.status, LEASH_OK);
    CHECK_EQ_INT(r2.calls, 1);
    CHECK_EQ_INT(r2.status, LEASH_ECANCELED);
    CHECK_EQ_INT(fx_release_sync(w.loop, first, 5000), LEASH_OK);
    fx_world_down(&w);
}

/* The release a client's free sends for a hold still held is the same
 * release as leash_release's: it tells the name's waiters in other
 * clients, on every server version (Redis 6.x has no SPUBLISH: the free's
 * release is written as the version needs, like any command). */
TEST(a_client_freed_while_holding_wakes_another_clients_waiter) {
    fx_world w;
    leash_client *other;
    leash_lock *holder, *waiter;
    fx_result rw = {0};
    int64_t freed;

    fx_world_up(&w, 5000, 300);
    other = fx_world_client(&w, 5000);
    holder = leash_lock_new(w.c, "handed");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    waiter = leash_lock_new(other, "handed");
    CHECK_EQ_INT(leash_acquire(waiter, 10000, fx_acquire_cb, &rw), LEASH_OK);
    fx_run_for(w.loop, 300); /* the waiter is asleep on the channel */
    CHECK_EQ_INT(rw.calls, 0);
    freed = test_now_ms();
    leash_client_free(w.c);
    w.c = NULL;
    fx_run_until(w.loop, &rw, 8000);
    CHECK_EQ_INT(rw.status, LEASH_OK);
    /* Woken by the release's message, not by the lease's end (5 s). */
    CHECK(test_now_ms() - freed <= 500 + TEST_SLACK_MS);
    CHECK_EQ_INT(fx_release_sync(w.loop, waiter, 5000), LEASH_OK);
    leash_client_free(other);
    fx_world_down(&w);
}

/* leash_lock_abandon: the hold is not released and no longer renewed: a
 * waiter elsewhere gets the lock when the key's lease runs out, not at the
 * abandon (nginx, when a backend it gave up on may still work). */
TEST(an_abandoned_hold_runs_out_its_lease) {
    fx_world w;
    leash_client *other;
    leash_lock *holder, *waiter;
    fx_result rw = {0};
    int64_t abandoned;

    fx_world_up(&w, 1500, 300);
    other = fx_world_client(&w, 1500);
    holder = leash_lock_new(w.c, "abandoned");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    waiter = leash_lock_new(other, "abandoned");
    CHECK_EQ_INT(leash_acquire(waiter, 20000, fx_acquire_cb, &rw), LEASH_OK);
    fx_run_for(w.loop, 300); /* the waiter is asleep on the channel */
    abandoned = test_now_ms();
    leash_lock_abandon(holder);
    /* No release: the key outlives the abandon by its lease less the 300
     * ms since the grant (renewals come every 500 ms, the first after the
     * abandon). */
    fx_run_for(w.loop, 700);
    CHECK_EQ_INT(rw.calls, 0);
    /* No renewal either: it runs out within the lease. */
    fx_run_until(w.loop, &rw, 20000);
    CHECK_EQ_INT(rw.status, LEASH_OK);
    CHECK(test_now_ms() - abandoned <= 1500 + TEST_SLACK_MS);
    CHECK(fx_release_sync(w.loop, waiter, 5000) == LEASH_OK);
    leash_lock_abandon(NULL);
    leash_client_free(other);
    fx_world_down(&w);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(free_lock_in_acquire_ok),
        TEST_CASE(free_lock_in_acquire_busy),
        TEST_CASE(free_lock_in_acquire_timeout),
        TEST_CASE(free_lock_in_acquire_canceled),
#ifdef LEASH_TEST_ONE_SERVER /* stops the server: one server only */
        TEST_CASE(free_lock_in_acquire_econn),
#endif
        TEST_CASE(free_lock_in_release),
        TEST_CASE(free_lock_in_lost),
        TEST_CASE(free_lock_in_woken_acquire),
        TEST_CASE(free_client_in_acquire_ok),
        TEST_CASE(free_client_in_acquire_busy),
        TEST_CASE(free_client_in_acquire_timeout),
        TEST_CASE(free_client_in_acquire_canceled),
#ifdef LEASH_TEST_ONE_SERVER /* stops the server: one server only */
        TEST_CASE(free_client_in_acquire_econn),
#endif
        TEST_CASE(free_client_in_release),
        TEST_CASE(free_client_in_lost),
        TEST_CASE(free_client_in_woken_acquire),
        TEST_CASE(client_free_with_waiters_holders_and_commands_in_flight),
        TEST_CASE(free_another_waiter_of_the_same_name_in_a_callback),
        TEST_CASE(a_client_freed_while_holding_wakes_another_clients_waiter),
        TEST_CASE(an_abandoned_hold_runs_out_its_lease),
        {0},
    };
    return fx_main(argc, argv, cases);
}
