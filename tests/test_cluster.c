/*
 * leash on a real Redis Cluster (tests/support/redis_cluster.h: 3 masters,
 * 3 replicas, node timeout 500 ms, on loopback): locks over every slot,
 * waking through sharded pub/sub, and the events a cluster goes through.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "redis_cluster.h"

/* Options for a client of c: every master is a seed. */
static void cluster_options(leash_options *o, test_cluster *c, const char **seeds,
                            char bufs[][32], int64_t lease_ms) {
    int i, n = 0;

    fx_fault_options(o, test_cluster_port(c, 0), lease_ms);
    o->command_timeout_ms = 1000;
    o->connect_timeout_ms = 1000;
    for (i = 0; i < c->cfg.masters; i++) {
        snprintf(bufs[n], 32, "127.0.0.1:%d", test_cluster_port(c, i));
        seeds[n] = bufs[n];
        n++;
    }
    o->topology = LEASH_TOPOLOGY_CLUSTER;
    o->nodes = seeds;
    o->nodes_count = n;
}

typedef struct cworld {
    test_cluster c;
    fx_loop *loop;
    leash_client *a, *b;
    const char *seeds[TEST_CLUSTER_MAX_NODES];
    char bufs[TEST_CLUSTER_MAX_NODES][32];
} cworld;

static leash_client *cw_client(cworld *w, int64_t lease_ms) {
    leash_options o;
    leash_client *cl;

    cluster_options(&o, &w->c, w->seeds, w->bufs, lease_ms);
    cl = fx_client_opts(w->loop, &o);
    fx_wait_connected(w->loop, cl, 5000);
    return cl;
}

static void cw_up(cworld *w, int64_t lease_ms) {
    memset(w, 0, sizeof(*w));
    CHECK_EQ_INT(test_cluster_start(&w->c, NULL), 0);
    w->loop = fx_loop_new();
    w->a = cw_client(w, lease_ms);
    w->b = cw_client(w, lease_ms);
}

static void cw_down(cworld *w) {
    leash_client_free(w->a);
    leash_client_free(w->b);
    fx_loop_free(w->loop);
    test_cluster_stop(&w->c);
}

/* Every lock of n names, spread over the slots: held by a, refused to b,
 * released, then b's. */
TEST(locks_over_every_master_exclude_each_other) {
    cworld w;
    enum { N = 300 };
    leash_lock *la[N], *lb[N];
    char name[32];
    int i;

    cw_up(&w, 5000);
    for (i = 0; i < N; i++) {
        snprintf(name, sizeof name, "k%d", i);
        la[i] = leash_lock_new(w.a, name);
        lb[i] = leash_lock_new(w.b, name);
        CHECK_EQ_INT(fx_acquire_sync(w.loop, la[i], 0, 3000), LEASH_OK);
        CHECK(leash_fence(la[i]) > 0);
    }
    for (i = 0; i < N; i++)
        CHECK_EQ_INT(fx_acquire_sync(w.loop, lb[i], 0, 3000), LEASH_EBUSY);
    for (i = 0; i < N; i++) {
        CHECK_EQ_INT(fx_release_sync(w.loop, la[i], 3000), LEASH_OK);
        CHECK_EQ_INT(fx_acquire_sync(w.loop, lb[i], 0, 3000), LEASH_OK);
        CHECK(leash_fence(lb[i]) > leash_fence(la[i]));
        CHECK_EQ_INT(fx_release_sync(w.loop, lb[i], 3000), LEASH_OK);
    }
    for (i = 0; i < N; i++) {
        leash_lock_free(la[i]);
        leash_lock_free(lb[i]);
    }
    cw_down(&w);
}

/* A waiter sleeps on the sharded channel and wakes on the release. */
TEST(a_waiter_wakes_on_the_release_through_sharded_pubsub) {
    cworld w;
    leash_lock *holder, *waiter;
    fx_result res = {0};
    leash_stats before, after;
    int64_t released_at;

    cw_up(&w, 5000);
    holder = leash_lock_new(w.a, "woken");
    waiter = leash_lock_new(w.b, "woken");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(waiter, 10000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_for(w.loop, 300);
    CHECK_EQ_INT(res.calls, 0);
    leash_client_stats(w.b, &before);
    fx_run_for(w.loop, 500);
    leash_client_stats(w.b, &after);
    /* Asleep: nothing sent. */
    CHECK_EQ_INT(after.commands_sent, before.commands_sent);
    released_at = test_now_ms();
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 3000), LEASH_OK);
    fx_run_until(w.loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK(res.at_ms - released_at < 200 + TEST_SLACK_MS);
    CHECK_EQ_INT(fx_release_sync(w.loop, waiter, 3000), LEASH_OK);
    leash_lock_free(holder);
    leash_lock_free(waiter);
    cw_down(&w);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(locks_over_every_master_exclude_each_other),
        TEST_CASE(a_waiter_wakes_on_the_release_through_sharded_pubsub),
        {0},
    };
    return test_main(argc, argv, cases);
}
