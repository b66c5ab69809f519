/* SPDX-License-Identifier: MIT */
/*
 * Redis Sentinel for tests: one master, replicas and sentinels, every one
 * a redis-server of tests/support/redis_server.h (its own folder under
 * test_tmpdir(), a free port of 127.0.0.1, stopped by its pid, dies with
 * the thread that started it). The sentinels watch the master under the
 * name TEST_SENTINEL_MASTER with a short down-after-milliseconds (2 s), so that
 * a killed master is replaced within a few seconds.
 *
 *     test_sentinel t;
 *     CHECK(test_sentinel_start(&t, NULL) == 0);   (1 master, 2 replicas, 3 sentinels)
 *     int m = test_sentinel_master(&t);            (index in t.data[])
 *     CHECK(test_redis_kill(&t.data[m]) == 0);
 *     CHECK(test_sentinel_wait_master(&t, m, 20000) >= 0);
 *     test_sentinel_stop(&t);
 *
 * Data nodes are t.data[0] (the first master) .. t.data[ndata - 1];
 * sentinels t.sentinel[0 .. nsentinels - 1]. Functions return 0 (or an
 * index) on success, -1 with the reason on stderr.
 */
#ifndef LEASH_TESTS_REDIS_SENTINEL_H
#define LEASH_TESTS_REDIS_SENTINEL_H

#include "redis_server.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TEST_SENTINEL_MASTER "mymaster"
#define TEST_SENTINEL_MAX_DATA 4
#define TEST_SENTINEL_MAX_SENTINELS 5

typedef struct test_sentinel_config {
    int replicas;  /* 0: 2 */
    int sentinels; /* 0: 3 (quorum: a majority) */
    /* down-after-milliseconds; 0: 2000 (500 and 1000 saw a promoted
     * replica failed over again, on a machine loaded well past its cores:
     * a hold with WAIT 1 then has no replica to acknowledge it for
     * seconds) */
    int down_after_ms;
    int failover_timeout_ms; /* failover-timeout; 0: 4000 */
    /* NULL, or the sentinels' own password (requirepass on the sentinel). */
    const char *sentinel_password;
    /* NULL, or an ACL user on the data nodes, "name" with password
     * data_password: replicas replicate and sentinels watch as it. */
    const char *data_user;
    const char *data_password;
    /* NULL, or a folder of test_tls_certs(): every data node and sentinel
     * also serves TLS (test_redis.tls_port), replicas replicate and
     * sentinels talk over TLS (tls-replication yes), so the sentinels name
     * the TLS ports. The plain ports stay for the harness. */
    const char *tls_dir;
    /* Where each node runs (a node of tests/support/netlab.h): the address
     * it listens on and is reached at (test_redis_config.host) and its
     * network namespace (test_redis_config.netns); NULL: 127.0.0.1 in the
     * caller's namespace. Replicas replicate from, and sentinels watch,
     * these addresses. */
    const char *data_host[TEST_SENTINEL_MAX_DATA];
    const char *data_netns[TEST_SENTINEL_MAX_DATA];
    const char *sentinel_host[TEST_SENTINEL_MAX_SENTINELS];
    const char *sentinel_netns[TEST_SENTINEL_MAX_SENTINELS];
} test_sentinel_config;

typedef struct test_sentinel {
    test_sentinel_config cfg;
    test_redis data[TEST_SENTINEL_MAX_DATA];
    test_redis sentinel[TEST_SENTINEL_MAX_SENTINELS];
    int ndata, nsentinels;
} test_sentinel;

/* Starts the data nodes, waits until every replica is in sync, starts the
 * sentinels and waits until each knows the others and every replica. */
int test_sentinel_start(test_sentinel *t, const test_sentinel_config *cfg);
/* Stops every process (by pid) and removes the folders. */
void test_sentinel_stop(test_sentinel *t);
/* The index of the data node sentinel[s] names as master, or -1. */
int test_sentinel_named_by(test_sentinel *t, int s);
/* The index of the data node the first live sentinel names as master. */
int test_sentinel_master(test_sentinel *t);
/* Waits (at most timeout_ms) until every live sentinel names one master
 * other than data[not_index] (-1: any) and that node says ROLE master;
 * returns its index. */
int test_sentinel_wait_master(test_sentinel *t, int not_index, int timeout_ms);
/* Without waiting: the index of the master every live sentinel names,
 * other than not_index and saying ROLE master, or -1. */
int test_sentinel_new_master(test_sentinel *t, int not_index);
/* Without waiting: 1 when data[i] is a replica of the master the
 * sentinels name, its link up. */
int test_sentinel_is_replica(test_sentinel *t, int i);
/* SENTINEL FAILOVER on a live sentinel, asked again every 5 s until the
 * sentinels name another master (a refusal, or a failover that ended
 * without a promotion), within timeout_ms. Returns the new master's
 * index, or -1. */
int test_sentinel_failover(test_sentinel *t, int timeout_ms);
/* Waits until test_sentinel_is_replica(t, i). */
int test_sentinel_wait_replica(test_sentinel *t, int i, int timeout_ms);
/* "127.0.0.1:port" of sentinel i into buf (its TLS port with tls_dir). */
const char *test_sentinel_addr(const test_sentinel *t, int i, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
