/* SPDX-License-Identifier: MIT */
/*
 * A real Redis Cluster for tests: N masters with R replicas each, every
 * node a redis-server of tests/support/redis_server.h (its own folder
 * under test_tmpdir(), a free port of 127.0.0.1, stopped by its pid, dies
 * with the thread that started it), with cluster-enabled yes and a short
 * cluster-node-timeout so that failures are noticed in well under a
 * second.
 *
 *     test_cluster c;
 *     CHECK(test_cluster_start(&c, NULL) == 0);        (3 masters + 3 replicas)
 *     int m = test_cluster_master_of_slot(&c, test_cluster_slot_of_key("k"));
 *     ... connect to 127.0.0.1:test_cluster_port(&c, m) ...
 *     CHECK(test_cluster_kill(&c, m) == 0);
 *     CHECK(test_cluster_wait_promoted(&c, m) >= 0);
 *     test_cluster_stop(&c);
 *
 * Nodes are named by their index in c->node[]: at the start the masters
 * are 0 .. masters-1, owning the slots in equal ranges in that order, and
 * the j-th replica of master k is masters + j * masters + k (so with one
 * replica each, node masters + k replicates node k). Added nodes take the
 * next indexes. Roles change with failovers; ask test_cluster_role().
 *
 * Every event (start, restart, failover, migration, new node) returns
 * once the cluster has settled, else fails after the settle timeout with
 * the reason on stderr. Settled means, on every live node: cluster_state
 * is ok; the node knows every node the harness joined, none in handshake;
 * it flags every dead node as failing (fail? or fail) and no live one;
 * every live node reports the same owner for each of the 16384 slots and
 * the same role and master for each live node; and every live replica
 * whose master is alive has master_link_status:up.
 *
 * Functions return 0 (or an index) on success, -1 on failure with the
 * reason on stderr. Indexes that are out of range are failures, not
 * crashes.
 */
#ifndef LEASH_TESTS_REDIS_CLUSTER_H
#define LEASH_TESTS_REDIS_CLUSTER_H

#include <hiredis/hiredis.h>

#include "redis_server.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TEST_CLUSTER_SLOTS 16384
#define TEST_CLUSTER_MAX_NODES 16
/* test_cluster_config.replicas: masters only. */
#define TEST_CLUSTER_NO_REPLICAS (-1)

typedef struct test_cluster_config {
    int masters;         /* 0: 3 */
    int replicas;        /* per master; 0: 1; TEST_CLUSTER_NO_REPLICAS: none */
    int node_timeout_ms; /* cluster-node-timeout; 0: 500 */
    /* 1: cluster-require-full-coverage no (nodes keep serving their slots
     * while some slot has no live master); 0: yes, Redis' default. */
    int partial_coverage;
    /* How long an event may take to settle; 0: 20000. */
    int settle_timeout_ms;
    /* As in test_redis_config; requirepass is also the masterauth of the
     * replicas and the AUTH of MIGRATE. The extra lines come after the
     * harness' own, so they may override them (e.g.
     * "cluster-allow-reads-when-down yes"). */
    const char *requirepass;
    const char *acl_user;
    const char *extra;
    /* NULL, or a folder of certificates (test_tls_certs()): every node also
     * serves TLS on its server.tls_port, and the cluster bus and the
     * replication go over TLS (tls-cluster yes, tls-replication yes), so
     * that CLUSTER SLOTS and MOVED name the TLS ports to TLS clients. */
    const char *tls_dir;
    /* Placement, node by node (the index of c->node[]; NULL: 127.0.0.1 in
     * the caller's namespace, as without it): host[i] is the address node
     * i listens on, announces to the cluster (cluster-announce-ip) and is
     * met at, so that CLUSTER SLOTS and MOVED hand it out; netns[i] its
     * network namespace (test_redis_config.netns: the harness makes its
     * own connections to the node there), e.g. a node of
     * tests/support/netlab.h. Not copied: the strings must stay valid
     * until test_cluster_stop (the lab owns them). Nodes added later take
     * the entries of their indexes. */
    const char *host[TEST_CLUSTER_MAX_NODES];
    const char *netns[TEST_CLUSTER_MAX_NODES];
} test_cluster_config;

typedef struct test_cluster_node {
    /* server.pid is 0 while the node is killed; port and folder stay. */
    test_redis server;
    int bus_port; /* cluster-port */
    char id[41];  /* the cluster node id, "" before it was read */

    /* Private. */
    redisContext *admin_;
} test_cluster_node;

typedef struct test_cluster {
    int count; /* nodes in node[], killed ones included */
    test_cluster_node node[TEST_CLUSTER_MAX_NODES];
    test_cluster_config cfg; /* a copy with the defaults filled in */

    /* Private. */
    int master_[TEST_CLUSTER_MAX_NODES]; /* master of each node when last settled */
    char *strings_[4];
} test_cluster;

/* ---- life cycle ---- */

/* Starts the nodes, assigns the slots, joins the nodes (CLUSTER MEET),
 * sets up the replicas and waits until the cluster has settled. Takes a
 * little over 2 s: a master that starts does not turn its state to ok
 * before 2 s (CLUSTER_WRITABLE_DELAY in Redis). cfg NULL: the defaults.
 * On failure the nodes started so far are stopped. */
int test_cluster_start(test_cluster *c, const test_cluster_config *cfg);

/* SIGTERM to every node (SIGKILL after 3 s), reaps them, removes their
 * folders and frees what c holds. Safe on a half-started, stopped or
 * zeroed c, and twice. */
void test_cluster_stop(test_cluster *c);

/* ---- introspection ---- */

/* The hash slot of a key: CRC16 of the key, or of its hash tag (what is
 * between the first '{' and the first '}' after it, when not empty). */
int test_cluster_slot_of(const void *key, size_t len);
int test_cluster_slot_of_key(const char *key);

/* Writes "<prefix>{<n>}" with the first n whose slot is slot into out.
 * Returns 0, or -1 when out is too small. */
int test_cluster_key_in_slot(int slot, const char *prefix, char *out, size_t cap);

/* The port of a node; the index of the node with that port, -1 if none. */
int test_cluster_port(const test_cluster *c, int node);
int test_cluster_node_by_port(const test_cluster *c, int port);

/* 1 while the node's process runs. */
int test_cluster_alive(const test_cluster *c, int node);

enum {
    TEST_CLUSTER_DOWN = 0,
    TEST_CLUSTER_MASTER = 1,
    TEST_CLUSTER_REPLICA = 2
};

/* The node's role as the node itself reports it (ROLE); TEST_CLUSTER_DOWN
 * when killed; -1 on failure. */
int test_cluster_role(test_cluster *c, int node);

/* The master of a replica as the replica itself reports it; -1 for a
 * master, a killed node or a failure. */
int test_cluster_master_of(test_cluster *c, int replica);

/* The lowest live node that reports master as its master; -1 if none. */
int test_cluster_replica_of(test_cluster *c, int master);

/* The owner of a slot in the slot map of the lowest live node (after an
 * event, every live node has the same map); -1 if the slot has none or on
 * failure. */
int test_cluster_master_of_slot(test_cluster *c, int slot);

/* A command to one node on a cached blocking connection (hiredis format,
 * so %s and %b), authenticated with requirepass when set; key commands
 * get the node's own answer, -MOVED and -ASK included. A broken
 * connection is replaced once per call; a command times out after 3 s.
 * NULL for a killed node or on failure; the caller frees the reply with
 * freeReplyObject. */
redisReply *test_cluster_cmd(test_cluster *c, int node, const char *fmt, ...);

/* The integer reply of a command; -1 for any other reply. */
long long test_cluster_int(test_cluster *c, int node, const char *fmt, ...);

/* The value of a field of CLUSTER INFO on a node ("cluster_state" gives
 * "ok" or "fail") into out; returns 0, -1 if absent or on failure. */
int test_cluster_info(test_cluster *c, int node, const char *field, char *out, size_t cap);

/* ---- waiting ---- */

/* Until the cluster has settled (see the top of this file); for after a
 * change the harness did not make itself (test_redis_kill on a node, a
 * CLUSTER command through test_cluster_cmd). */
int test_cluster_wait_settled(test_cluster *c);

/* Until every live node reports cluster_state:fail and flags every dead
 * node as failing: the outage of test_cluster_kill_nodes on a majority of
 * the masters. */
int test_cluster_wait_down(test_cluster *c);

/* After a master was killed: until one of its replicas (as of the last
 * settled state) is a master owning slots, and the cluster has settled.
 * Returns that replica's index. Expect about 1 to 2.5 s with the default
 * node timeout: failure detection, then a random election delay. */
int test_cluster_wait_promoted(test_cluster *c, int old_master);

/* ---- events ---- */

/* SIGKILL, then waits until every live node flags the node as failing
 * (fail? or fail), which takes about the node timeout. It does not wait
 * for a failover: see test_cluster_wait_promoted. Folder, port and
 * nodes.conf stay for test_cluster_restart. */
int test_cluster_kill(test_cluster *c, int node);

/* Kills n nodes back to back, then waits as test_cluster_kill does. Two
 * masters out of three must die together: killed one at a time, the first
 * one's replica could be elected before the second dies, and the cluster
 * would recover instead of going down. */
int test_cluster_kill_nodes(test_cluster *c, const int *nodes, int n);

/* Starts a killed node again on its port with its nodes.conf and waits
 * until the cluster has settled. It comes back empty (no persistence): a
 * master that was replaced in the meantime rejoins as a replica of its
 * successor. A master takes 2 s or more to settle (CLUSTER_WRITABLE_DELAY). */
int test_cluster_restart(test_cluster *c, int node);

/* Restarts n killed nodes back to back, then waits as test_cluster_restart
 * does; the counterpart of test_cluster_kill_nodes (restarted one at a
 * time, a master still down could be failed over meanwhile). */
int test_cluster_restart_nodes(test_cluster *c, const int *nodes, int n);

/* CLUSTER FAILOVER (graceful: the master stops its clients until the
 * replica has caught up) on a live replica; waits until the replica is a
 * master, its old master a replica of it, and the cluster has settled. */
int test_cluster_failover(test_cluster *c, int replica);

/* Moves a slot to another master as a resharding does, with its keys, and
 * waits until the cluster has settled. Also in three steps, so that a
 * test can look at the cluster in between:
 *   _begin: CLUSTER SETSLOT IMPORTING on the target, then MIGRATING on the
 *     current owner. From here on the owner answers -ASK for a key of the
 *     slot it does not hold, and the target -MOVED unless ASKING came
 *     first.
 *   _move_keys: MIGRATE (REPLACE) of the slot's keys from the owner to the
 *     target in batches (GETKEYSINSLOT), at most max_keys of them (<= 0:
 *     all). Returns how many moved, or -1.
 *   _finish: moves what keys are left, then CLUSTER SETSLOT NODE on the
 *     target, the old owner and the other live masters, and waits until
 *     the cluster has settled.
 * Nothing to do, 0, when the target already owns the slot. */
int test_cluster_migrate_slot(test_cluster *c, int slot, int to_node);
int test_cluster_migrate_begin(test_cluster *c, int slot, int to_node);
int test_cluster_migrate_move_keys(test_cluster *c, int slot, int to_node, int max_keys);
int test_cluster_migrate_finish(test_cluster *c, int slot, int to_node);

/* Starts a new node, joins it (CLUSTER MEET) as a master without slots
 * and waits until the cluster has settled; returns its index. Give it
 * slots with test_cluster_migrate_slot. About 2 s (a new master's
 * CLUSTER_WRITABLE_DELAY). */
int test_cluster_add_node(test_cluster *c);

/* A new node made a replica of master (CLUSTER REPLICATE) once joined;
 * returns its index once the cluster has settled, well under a second. */
int test_cluster_add_replica(test_cluster *c, int master);

#ifdef __cplusplus
}
#endif

#endif
