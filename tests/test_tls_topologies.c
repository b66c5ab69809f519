/* SPDX-License-Identifier: MIT */
/* TLS on every topology: a Redis Cluster whose nodes speak TLS
 * (tls-cluster yes: CLUSTER SLOTS and MOVED name the TLS ports to a TLS
 * client), reached from one seed, and Redlock's independent TLS servers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "redis_cluster.h"

/* Options for TLS clients, trusting the test CA. */
static void tls_base(leash_options *o, int64_t lease_ms) {
    fx_fault_options(o, 1, lease_ms);
    o->command_timeout_ms = 2000;
    o->connect_timeout_ms = 2000;
    o->tls = 1;
    o->tls_ca_file = test_tls_file(0, "ca.pem");
}

static void start_tls_cluster(test_cluster *c) {
    test_cluster_config cfg = {0};

    cfg.masters = 3;
    cfg.replicas = TEST_CLUSTER_NO_REPLICAS;
    cfg.tls_dir = test_tls_certs();
    CHECK(cfg.tls_dir != NULL);
    CHECK_EQ_INT(test_cluster_start(c, &cfg), 0);
}

/* A TLS cluster client whose one seed is the first master's TLS port. */
static void seed_options(leash_options *o, test_cluster *c, char *seed, size_t cap,
                         const char **seeds) {
    tls_base(o, 5000);
    snprintf(seed, cap, "127.0.0.1:%d", c->node[0].server.tls_port);
    seeds[0] = seed;
    o->topology = LEASH_TOPOLOGY_CLUSTER;
    o->nodes = seeds;
    o->nodes_count = 1;
}

/* A key of the lock `name` prefix that lives on master m (slots in equal
 * ranges, in order). */
static void name_on_master(int m, char *out, size_t cap) {
    char key[64];

    CHECK_EQ_INT(test_cluster_key_in_slot(m * 5461 + 100, "leash:tls", key, sizeof key), 0);
    snprintf(out, cap, "%s", key + strlen("leash:"));
}

/* One seed (the first master's TLS port): the other masters are reached
 * at the TLS ports CLUSTER SLOTS names; a waiter on another client wakes
 * through sharded pub/sub over TLS; a slot that moves is followed
 * (MOVED names the TLS port too). */
TEST(a_tls_cluster_from_one_seed) {
    test_cluster c;
    fx_loop *loop;
    leash_options o;
    leash_client *a, *b;
    const char *seeds[1];
    char seed[32], name[3][64], key[80], says[96];
    leash_lock *l[3], *waiter;
    fx_result res = {0};
    int m;

    start_tls_cluster(&c);
    loop = fx_loop_new();
    seed_options(&o, &c, seed, sizeof seed, seeds);
    fx_log_clear();
    a = fx_client_opts(loop, &o);
    b = fx_client_opts(loop, &o);
    for (m = 0; m < 3; m++) {
        name_on_master(m, name[m], sizeof name[m]);
        l[m] = leash_lock_new(a, name[m]);
        CHECK(l[m] != NULL);
        CHECK_EQ_INT(fx_acquire_sync(loop, l[m], 0, 5000), LEASH_OK);
        snprintf(key, sizeof key, "leash:%s", name[m]);
        CHECK_EQ_INT(test_cluster_int(&c, m, "EXISTS %s", key), 1);
        snprintf(says, sizeof says, "command connection to 127.0.0.1:%d ready",
                 c.node[m].server.tls_port);
        CHECK_MSG(fx_log_contains(says), "no \"%s\" in the log", says);
    }

    /* Waking on the third master's shard. */
    waiter = leash_lock_new(b, name[2]);
    CHECK_EQ_INT(leash_acquire(waiter, 10000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_for(loop, 300);
    CHECK(!res.done);
    CHECK_EQ_INT(fx_release_sync(loop, l[2], 5000), LEASH_OK);
    CHECK_EQ_INT(fx_run_until_flag(loop, &res.done, 5000), 0);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(loop, waiter, 5000), LEASH_OK);

    /* The first lock's slot moves to the second master: its release
     * follows MOVED there, over TLS. */
    CHECK_EQ_INT(test_cluster_migrate_slot(&c, 100, 1), 0);
    CHECK_EQ_INT(fx_release_sync(loop, l[0], 5000), LEASH_OK);
    snprintf(key, sizeof key, "leash:%s", name[0]);
    CHECK_EQ_INT(test_cluster_int(&c, 1, "EXISTS %s", key), 0);
    CHECK_EQ_INT(fx_acquire_sync(loop, l[0], 0, 5000), LEASH_OK);
    CHECK_EQ_INT(test_cluster_int(&c, 1, "EXISTS %s", key), 1);
    CHECK_EQ_INT(fx_release_sync(loop, l[0], 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(loop, l[1], 5000), LEASH_OK);

    leash_client_free(a);
    leash_client_free(b);
    fx_loop_free(loop);
    test_cluster_stop(&c);
}

/* A cluster seed with the wrong CA: ETLS, not a hang. */
TEST(a_tls_cluster_with_the_wrong_ca_is_etls) {
    test_cluster c;
    fx_loop *loop;
    leash_options o;
    leash_client *a;
    leash_lock *l;
    const char *seeds[1];
    char seed[32];

    start_tls_cluster(&c);
    loop = fx_loop_new();
    seed_options(&o, &c, seed, sizeof seed, seeds);
    o.tls_ca_file = test_tls_file(0, "other-ca.pem");
    fx_log_clear();
    a = fx_client_opts(loop, &o);
    l = leash_lock_new(a, "tls-wrong-ca");
    CHECK_EQ_INT(fx_acquire_sync(loop, l, 0, 5000), LEASH_ETLS);
    CHECK(fx_log_contains("certificate verify failed"));
    leash_client_free(a);
    fx_loop_free(loop);
    test_cluster_stop(&c);
}

#define REDLOCK_N 3

/* Redlock over three TLS servers, one of them with a client certificate
 * required: the client has one, so all three grant; a client that trusts
 * another CA gets ETLS. */
TEST(redlock_over_tls) {
    test_redis r[REDLOCK_N];
    test_redis_config cfg = {0};
    fx_loop *loop;
    leash_options o;
    leash_client *a, *b;
    leash_lock *la, *lb;
    const char *nodes[REDLOCK_N];
    char text[REDLOCK_N][32];
    fx_result res = {0};
    int i;

    cfg.tls_dir = test_tls_certs();
    CHECK(cfg.tls_dir != NULL);
    for (i = 0; i < REDLOCK_N; i++) {
        cfg.tls_auth_clients = i == 0;
        CHECK_EQ_INT(test_redis_start(&r[i], &cfg), 0);
        snprintf(text[i], sizeof text[i], "127.0.0.1:%d", r[i].tls_port);
        nodes[i] = text[i];
    }
    loop = fx_loop_new();
    tls_base(&o, 5000);
    o.topology = LEASH_TOPOLOGY_REDLOCK;
    o.nodes = nodes;
    o.nodes_count = REDLOCK_N;
    o.tls_cert_file = test_tls_file(1, "client.pem");
    o.tls_key_file = test_tls_file(2, "client.key");
    a = fx_client_opts(loop, &o);
    b = fx_client_opts(loop, &o);
    /* Else a copy still waiting for its connection is dropped once a
     * majority granted. */
    fx_wait_every_server(loop, a, REDLOCK_N, 5000);
    fx_wait_every_server(loop, b, REDLOCK_N, 5000);
    la = leash_lock_new(a, "tls-redlock");
    lb = leash_lock_new(b, "tls-redlock");
    CHECK_EQ_INT(fx_acquire_sync(loop, la, 0, 5000), LEASH_OK);
    /* Granted by a majority; the last copy may still be on its way. */
    fx_run_for(loop, 100);
    for (i = 0; i < REDLOCK_N; i++)
        CHECK_EQ_INT(fx_redis_exists(&r[i], "leash:tls-redlock"), 1);
    CHECK_EQ_INT(leash_acquire(lb, 10000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_for(loop, 300);
    CHECK(!res.done);
    CHECK_EQ_INT(fx_release_sync(loop, la, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_run_until_flag(loop, &res.done, 5000), 0);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(loop, lb, 5000), LEASH_OK);
    leash_client_free(a);
    leash_client_free(b);

    /* Every server refuses a client that trusts another CA: ETLS. */
    o.tls_ca_file = test_tls_file(0, "other-ca.pem");
    fx_log_clear();
    a = fx_client_opts(loop, &o);
    la = leash_lock_new(a, "tls-redlock");
    CHECK_EQ_INT(fx_acquire_sync(loop, la, 0, 5000), LEASH_ETLS);
    CHECK(fx_log_contains("certificate verify failed"));
    leash_client_free(a);
    fx_loop_free(loop);
    for (i = 0; i < REDLOCK_N; i++)
        test_redis_stop(&r[i]);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE_T(a_tls_cluster_from_one_seed, 120),
        TEST_CASE_T(a_tls_cluster_with_the_wrong_ca_is_etls, 120),
        TEST_CASE(redlock_over_tls),
        {0},
    };
    return test_main(argc, argv, cases);
}
