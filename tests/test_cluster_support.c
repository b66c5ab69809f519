/* SPDX-License-Identifier: MIT */
/*
 * Self-test of the Redis Cluster harness (tests/support/redis_cluster.h):
 * the cluster tests of leash trust its starts, its slot map and its
 * events, so each is checked here against what Redis itself answers.
 * The times of the start and of each event are printed, to see when a
 * slow machine makes them drift.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* kill, getppid in /proc scans */
#endif

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "check.h"
#include "redis_cluster.h"

/* ---- helpers ---- */

/* The reply of a command as "+status", "-error", "$string", ":int" or
 * "nil", which reads well in CHECK_STR_EQ. */
static char *reply_text(redisReply *reply) {
    static char buf[512];

    if (!reply)
        snprintf(buf, sizeof buf, "(no reply)");
    else if (reply->type == REDIS_REPLY_STATUS)
        snprintf(buf, sizeof buf, "+%s", reply->str);
    else if (reply->type == REDIS_REPLY_ERROR)
        snprintf(buf, sizeof buf, "-%s", reply->str);
    else if (reply->type == REDIS_REPLY_STRING)
        snprintf(buf, sizeof buf, "$%s", reply->str);
    else if (reply->type == REDIS_REPLY_INTEGER)
        snprintf(buf, sizeof buf, ":%lld", reply->integer);
    else if (reply->type == REDIS_REPLY_NIL)
        snprintf(buf, sizeof buf, "nil");
    else
        snprintf(buf, sizeof buf, "(type %d)", reply->type);
    if (reply)
        freeReplyObject(reply);
    return buf;
}

#define CMD(c, node, ...) reply_text(test_cluster_cmd((c), (node), __VA_ARGS__))

static void expect_redirect(test_cluster *c, int node, const char *kind, int slot, int to,
                            const char *key) {
    char want[128];

    snprintf(want, sizeof want, "-%s %d 127.0.0.1:%d", kind, slot, test_cluster_port(c, to));
    CHECK_STR_EQ(CMD(c, node, "GET %s", key), want);
}

static void start(test_cluster *c, const test_cluster_config *cfg) {
    int64_t t0 = test_now_ms();

    CHECK(test_cluster_start(c, cfg) == 0);
    printf("  start: %lld ms\n", (long long)(test_now_ms() - t0));
}

/* Runs an event and prints how long it took to settle. */
#define TIMED(what, expr)                                                        \
    do {                                                                         \
        int64_t timed_t0_ = test_now_ms();                                       \
        CHECK(expr);                                                             \
        printf("  %s: %lld ms\n", what, (long long)(test_now_ms() - timed_t0_)); \
    } while (0)

/* Every node reports cluster_state as state. */
static void check_state(test_cluster *c, const char *state) {
    char value[32];
    int i;

    for (i = 0; i < c->count; i++) {
        if (!test_cluster_alive(c, i))
            continue;
        CHECK(test_cluster_info(c, i, "cluster_state", value, sizeof value) == 0);
        CHECK_MSG(strcmp(value, state) == 0, "node %d: cluster_state:%s", i, value);
    }
}

/* Processes whose parent is this one: what a stop must leave none of. */
static int children(void) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;

    CHECK(d != NULL);
    while ((e = readdir(d)) != NULL) {
        char path[300], buf[512], *p;
        FILE *f;

        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(buf, sizeof buf, f) && (p = strrchr(buf, ')')) != NULL) {
            char state;
            int ppid;

            /* A zombie is gone but for its exit status. */
            if (sscanf(p + 1, " %c %d", &state, &ppid) == 2 && ppid == (int)getpid() &&
                state != 'Z')
                n++;
        }
        fclose(f);
    }
    closedir(d);
    return n;
}

/* Checks that every live node's CLUSTER SLOTS (not the CLUSTER NODES
 * the harness reads) names owner as the master of slot. */
static void check_owner_everywhere(test_cluster *c, int slot, int owner) {
    size_t r;
    int i;

    for (i = 0; i < c->count; i++) {
        redisReply *slots;
        int port = -1;

        if (!test_cluster_alive(c, i))
            continue;
        slots = test_cluster_cmd(c, i, "CLUSTER SLOTS");
        CHECK(slots && slots->type == REDIS_REPLY_ARRAY);
        for (r = 0; r < slots->elements; r++) {
            const redisReply *range = slots->element[r];

            CHECK(range->elements >= 3);
            if (range->element[0]->integer <= slot && slot <= range->element[1]->integer)
                port = (int)range->element[2]->element[1]->integer;
        }
        freeReplyObject(slots);
        CHECK_MSG(port == test_cluster_port(c, owner), "node %d: slot %d at port %d, not %d", i,
                  slot, port, test_cluster_port(c, owner));
    }
}

/* Writes key=value through the master of its slot and waits until a
 * replica has it. Returns the master. */
static int write_replicated(test_cluster *c, const char *key, const char *value) {
    int m = test_cluster_master_of_slot(c, test_cluster_slot_of_key(key));

    CHECK(m >= 0);
    CHECK_STR_EQ(CMD(c, m, "SET %s %s", key, value), "+OK");
    CHECK_EQ_INT(test_cluster_int(c, m, "WAIT 1 5000"), 1);
    return m;
}

/* ---- cases ---- */

TEST(t_slot_of_key) {
    static const char *keys[] = {
        "foo",           "bar", "123456789", "{user1000}.a", "foo{}{bar}", "foo{{bar}}zap",
        "foo{bar}{zap}", "{",   "}{",        "a{b",          "",           "lock:{orders}:1"};
    test_cluster c;
    char key[64];
    size_t i;
    int slot;

    /* The CRC16 check value of the specification. */
    CHECK_EQ_INT(test_cluster_slot_of_key("123456789"), 0x31C3 & 16383);
    CHECK_EQ_INT(test_cluster_slot_of_key("{user1000}.following"),
                 test_cluster_slot_of_key("{user1000}.followers"));
    CHECK_EQ_INT(test_cluster_slot_of_key("foo{bar}{zap}"), test_cluster_slot_of_key("bar"));

    start(&c, &(test_cluster_config){.masters = 1, .replicas = TEST_CLUSTER_NO_REPLICAS});
    for (i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK_EQ_INT(test_cluster_slot_of_key(keys[i]),
                     test_cluster_int(&c, 0, "CLUSTER KEYSLOT %s", keys[i]));
    for (slot = 0; slot < TEST_CLUSTER_SLOTS; slot += 997) {
        CHECK(test_cluster_key_in_slot(slot, "k:", key, sizeof key) == 0);
        CHECK_EQ_INT(test_cluster_int(&c, 0, "CLUSTER KEYSLOT %s", key), slot);
    }
    CHECK(test_cluster_key_in_slot(5, "k", key, 3) == -1);
    test_cluster_stop(&c);
}

TEST(t_start_stop) {
    test_cluster c, zero;
    char dirs[6][256], value[32];
    int i;

    start(&c, NULL);
    CHECK_EQ_INT(c.count, 6);
    CHECK_EQ_INT(children(), 6);
    for (i = 0; i < 3; i++) {
        CHECK_EQ_INT(test_cluster_role(&c, i), TEST_CLUSTER_MASTER);
        CHECK_EQ_INT(test_cluster_role(&c, 3 + i), TEST_CLUSTER_REPLICA);
        CHECK_EQ_INT(test_cluster_master_of(&c, 3 + i), i);
        CHECK_EQ_INT(test_cluster_replica_of(&c, i), 3 + i);
        CHECK_EQ_INT(test_cluster_master_of(&c, i), -1);
    }
    for (i = 0; i < 6; i++) {
        CHECK_EQ_INT(test_cluster_node_by_port(&c, test_cluster_port(&c, i)), i);
        CHECK(test_cluster_info(&c, i, "cluster_known_nodes", value, sizeof value) == 0);
        CHECK_STR_EQ(value, "6");
        CHECK(test_cluster_info(&c, i, "cluster_slots_ok", value, sizeof value) == 0);
        CHECK_STR_EQ(value, "16384");
        snprintf(dirs[i], sizeof dirs[i], "%s", c.node[i].server.dir);
        CHECK(access(dirs[i], F_OK) == 0);
    }
    check_state(&c, "ok");
    CHECK_EQ_INT(test_cluster_node_by_port(&c, 1), -1);
    CHECK_EQ_INT(test_cluster_role(&c, 99), -1);
    CHECK(test_cluster_cmd(&c, 99, "PING") == NULL);

    test_cluster_stop(&c);
    CHECK_EQ_INT(children(), 0);
    for (i = 0; i < 6; i++)
        CHECK_MSG(access(dirs[i], F_OK) != 0, "%s is still there", dirs[i]);
    CHECK_EQ_INT(c.count, 0);
    test_cluster_stop(&c);
    memset(&zero, 0, sizeof zero);
    test_cluster_stop(&zero);
}

/* A start that gives up halfway stops what it had started. */
TEST(t_failed_start_cleans_up) {
    test_cluster c;

    CHECK(test_cluster_start(&c, &(test_cluster_config){.settle_timeout_ms = 1}) == -1);
    CHECK_EQ_INT(children(), 0);
    CHECK_EQ_INT(c.count, 0);
    test_cluster_stop(&c);
    CHECK(test_cluster_start(&c, &(test_cluster_config){.masters = 9}) == -1);
    CHECK_EQ_INT(children(), 0);
}

/* Field of a flat key/value array (what RESP2 makes of a map). */
static const redisReply *field(const redisReply *map, const char *name) {
    size_t i;

    CHECK(map->type == REDIS_REPLY_ARRAY);
    for (i = 0; i + 1 < map->elements; i += 2)
        if (map->element[i]->type == REDIS_REPLY_STRING && strcmp(map->element[i]->str, name) == 0)
            return map->element[i + 1];
    return NULL;
}

TEST(t_slots_match_shards) {
    static int covered[TEST_CLUSTER_SLOTS];
    test_cluster c;
    redisReply *shards;
    size_t s, j;
    int node, slot;

    start(&c, NULL);
    for (node = 0; node < c.count; node++) {
        shards = test_cluster_cmd(&c, node, "CLUSTER SHARDS");
        CHECK(shards && shards->type == REDIS_REPLY_ARRAY);
        CHECK_EQ_INT(shards->elements, 3);
        memset(covered, 0, sizeof covered);
        for (s = 0; s < shards->elements; s++) {
            const redisReply *slots = field(shards->element[s], "slots");
            const redisReply *nodes = field(shards->element[s], "nodes");
            int master = -1;

            CHECK(slots && nodes && nodes->type == REDIS_REPLY_ARRAY);
            for (j = 0; j < nodes->elements; j++) {
                const redisReply *role = field(nodes->element[j], "role");
                const redisReply *port = field(nodes->element[j], "port");

                CHECK(role && port && port->type == REDIS_REPLY_INTEGER);
                if (strcmp(role->str, "master") == 0)
                    master = test_cluster_node_by_port(&c, (int)port->integer);
            }
            CHECK(master >= 0);
            for (j = 0; j + 1 < slots->elements; j += 2) {
                int from = (int)slots->element[j]->integer,
                    to = (int)slots->element[j + 1]->integer;

                for (slot = from; slot <= to; slot++)
                    covered[slot]++;
                CHECK_EQ_INT(test_cluster_master_of_slot(&c, from), master);
                CHECK_EQ_INT(test_cluster_master_of_slot(&c, to), master);
                CHECK_EQ_INT(test_cluster_master_of_slot(&c, (from + to) / 2), master);
            }
        }
        for (slot = 0; slot < TEST_CLUSTER_SLOTS; slot++)
            CHECK_MSG(covered[slot] == 1, "slot %d in %d shards", slot, covered[slot]);
        freeReplyObject(shards);
    }
    /* The layout the header promises. */
    CHECK_EQ_INT(test_cluster_master_of_slot(&c, 0), 0);
    CHECK_EQ_INT(test_cluster_master_of_slot(&c, 16383), 2);
    CHECK_EQ_INT(test_cluster_master_of_slot(&c, -1), -1);
    test_cluster_stop(&c);
}

TEST(t_replica_read) {
    test_cluster c;
    int m, r;

    start(&c, NULL);
    m = write_replicated(&c, "greeting", "hello");
    r = test_cluster_replica_of(&c, m);
    CHECK(r >= 0 && r != m);
    /* A replica redirects reads to its master unless asked for READONLY. */
    CHECK(strncmp(CMD(&c, r, "GET greeting"), "-MOVED ", 7) == 0);
    CHECK_STR_EQ(CMD(&c, r, "READONLY"), "+OK");
    CHECK_STR_EQ(CMD(&c, r, "GET greeting"), "$hello");
    test_cluster_stop(&c);
}

TEST(t_failover) {
    test_cluster c;
    int m, r, slot = test_cluster_slot_of_key("fo");

    start(&c, NULL);
    m = write_replicated(&c, "fo", "before");
    r = test_cluster_replica_of(&c, m);
    CHECK(r >= 0);
    TIMED("graceful failover", test_cluster_failover(&c, r) == 0);
    CHECK_EQ_INT(test_cluster_role(&c, r), TEST_CLUSTER_MASTER);
    CHECK_EQ_INT(test_cluster_role(&c, m), TEST_CLUSTER_REPLICA);
    CHECK_EQ_INT(test_cluster_master_of(&c, m), r);
    check_owner_everywhere(&c, slot, r);
    CHECK_STR_EQ(CMD(&c, r, "GET fo"), "$before");
    expect_redirect(&c, m, "MOVED", slot, r, "fo");
    check_state(&c, "ok");
    /* And back: the harness does not care which way. */
    TIMED("failover back", test_cluster_failover(&c, m) == 0);
    CHECK_EQ_INT(test_cluster_master_of_slot(&c, slot), m);
    CHECK(test_cluster_failover(&c, m) == -1); /* a master cannot */
    test_cluster_stop(&c);
}

TEST(t_kill_master) {
    test_cluster c;
    int m, r, p, slot = test_cluster_slot_of_key("km");

    start(&c, NULL);
    m = write_replicated(&c, "km", "kept");
    r = test_cluster_replica_of(&c, m);
    CHECK(r >= 0);
    TIMED("kill master", test_cluster_kill(&c, m) == 0);
    CHECK(!test_cluster_alive(&c, m));
    CHECK_EQ_INT(test_cluster_role(&c, m), TEST_CLUSTER_DOWN);
    CHECK(test_cluster_cmd(&c, m, "PING") == NULL);
    TIMED("promotion", (p = test_cluster_wait_promoted(&c, m)) >= 0);
    CHECK_EQ_INT(p, r);
    CHECK_EQ_INT(test_cluster_role(&c, r), TEST_CLUSTER_MASTER);
    check_owner_everywhere(&c, slot, r);
    CHECK_STR_EQ(CMD(&c, r, "GET km"), "$kept");
    check_state(&c, "ok");

    /* Back from the dead, it learns it was replaced. */
    TIMED("restart old master", test_cluster_restart(&c, m) == 0);
    CHECK_EQ_INT(test_cluster_role(&c, m), TEST_CLUSTER_REPLICA);
    CHECK_EQ_INT(test_cluster_master_of(&c, m), r);
    CHECK(test_cluster_restart(&c, m) == -1); /* it is running */
    test_cluster_stop(&c);
}

TEST(t_kill_replica) {
    test_cluster c;
    char key[64];

    start(&c, NULL);
    TIMED("kill replica", test_cluster_kill(&c, 4) == 0);
    check_state(&c, "ok");
    CHECK_EQ_INT(test_cluster_int(&c, 1, "WAIT 1 100"), 0);
    TIMED("restart replica", test_cluster_restart(&c, 4) == 0);
    CHECK_EQ_INT(test_cluster_master_of(&c, 4), 1);
    CHECK(test_cluster_key_in_slot(8000, "k", key, sizeof key) == 0);
    CHECK_EQ_INT(test_cluster_master_of_slot(&c, 8000), 1);
    CHECK_STR_EQ(CMD(&c, 1, "SET %s 1", key), "+OK");
    CHECK_EQ_INT(test_cluster_int(&c, 1, "WAIT 1 5000"), 1);
    test_cluster_stop(&c);
}

TEST(t_migrate_slot) {
    test_cluster c;
    char key[64], other[64], missing[64];
    int from, to, slot = 1000, i, n;

    start(&c, NULL);
    from = test_cluster_master_of_slot(&c, slot);
    to = (from + 1) % 3;
    /* 250 keys: more than one MIGRATE batch. */
    for (i = 0; i < 250; i++) {
        char prefix[32];

        snprintf(prefix, sizeof prefix, "k%d", i);
        CHECK(test_cluster_key_in_slot(slot, prefix, key, sizeof key) == 0);
        CHECK_STR_EQ(CMD(&c, from, "SET %s v%d", key, i), "+OK");
    }
    CHECK(test_cluster_key_in_slot(slot, "k0", key, sizeof key) == 0);
    CHECK(test_cluster_key_in_slot(slot, "k1", other, sizeof other) == 0);
    CHECK(test_cluster_key_in_slot(slot, "none", missing, sizeof missing) == 0);

    CHECK(test_cluster_migrate_begin(&c, slot, to) == 0);
    /* The source still serves the keys it holds and sends the others on. */
    CHECK_STR_EQ(CMD(&c, from, "GET %s", key), "$v0");
    expect_redirect(&c, from, "ASK", slot, to, missing);
    /* The target takes a key of the slot only after ASKING. */
    expect_redirect(&c, to, "MOVED", slot, from, key);
    CHECK_EQ_INT(test_cluster_master_of_slot(&c, slot), from);

    n = test_cluster_migrate_move_keys(&c, slot, to, 1);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(test_cluster_int(&c, from, "CLUSTER COUNTKEYSINSLOT %d", slot), 249);
    n = test_cluster_migrate_move_keys(&c, slot, to, 0);
    CHECK_EQ_INT(n, 249);
    CHECK_EQ_INT(test_cluster_int(&c, from, "CLUSTER COUNTKEYSINSLOT %d", slot), 0);
    expect_redirect(&c, from, "ASK", slot, to, key);
    CHECK_STR_EQ(CMD(&c, to, "ASKING"), "+OK");
    CHECK_STR_EQ(CMD(&c, to, "GET %s", key), "$v0");

    TIMED("migrate finish", test_cluster_migrate_finish(&c, slot, to) == 0);
    expect_redirect(&c, from, "MOVED", slot, to, key);
    CHECK_STR_EQ(CMD(&c, to, "GET %s", other), "$v1");
    CHECK_EQ_INT(test_cluster_int(&c, to, "CLUSTER COUNTKEYSINSLOT %d", slot), 250);
    CHECK_EQ_INT(test_cluster_master_of_slot(&c, slot), to);
    check_owner_everywhere(&c, slot, to);
    for (i = 0; i < c.count; i++)
        CHECK(strstr(CMD(&c, i, "CLUSTER NODES"), "[") == NULL);

    /* In one go, and back. */
    TIMED("migrate slot", test_cluster_migrate_slot(&c, slot, from) == 0);
    check_owner_everywhere(&c, slot, from);
    CHECK_STR_EQ(CMD(&c, from, "GET %s", other), "$v1");
    CHECK(test_cluster_migrate_slot(&c, slot, from) == 0); /* already there */
    test_cluster_stop(&c);
}

TEST(t_add_node) {
    test_cluster c;
    char value[32];
    int n, r, i, slot = test_cluster_slot_of_key("moving");

    start(&c, NULL);
    CHECK_STR_EQ(CMD(&c, test_cluster_master_of_slot(&c, slot), "SET moving yes"), "+OK");
    TIMED("add node", (n = test_cluster_add_node(&c)) == 6);
    CHECK_EQ_INT(test_cluster_role(&c, n), TEST_CLUSTER_MASTER);
    for (i = 0; i < c.count; i++) {
        CHECK(test_cluster_info(&c, i, "cluster_known_nodes", value, sizeof value) == 0);
        CHECK_STR_EQ(value, "7");
    }
    TIMED("migrate to new node", test_cluster_migrate_slot(&c, slot, n) == 0);
    check_owner_everywhere(&c, slot, n);
    CHECK_STR_EQ(CMD(&c, n, "GET moving"), "$yes");
    CHECK(test_cluster_info(&c, n, "cluster_size", value, sizeof value) == 0);
    CHECK_STR_EQ(value, "4");

    TIMED("add replica", (r = test_cluster_add_replica(&c, n)) == 7);
    CHECK_EQ_INT(test_cluster_master_of(&c, r), n);
    CHECK_EQ_INT(test_cluster_int(&c, n, "WAIT 1 5000"), 1);
    check_state(&c, "ok");
    test_cluster_stop(&c);
    CHECK_EQ_INT(children(), 0);
}

TEST(t_cluster_down) {
    static const int two[] = {0, 1};
    test_cluster c;
    char key[64];

    start(&c, NULL);
    TIMED("kill two masters", test_cluster_kill_nodes(&c, two, 2) == 0);
    TIMED("down", test_cluster_wait_down(&c) == 0);
    check_state(&c, "fail");
    CHECK(test_cluster_key_in_slot(16000, "k", key, sizeof key) == 0);
    CHECK(strncmp(CMD(&c, 2, "GET %s", key), "-CLUSTERDOWN", 12) == 0);

    TIMED("restart two masters", test_cluster_restart_nodes(&c, two, 2) == 0);
    check_state(&c, "ok");
    /* Without a majority of masters nobody could be failed over. */
    CHECK_EQ_INT(test_cluster_role(&c, 0), TEST_CLUSTER_MASTER);
    CHECK_EQ_INT(test_cluster_role(&c, 1), TEST_CLUSTER_MASTER);
    CHECK_EQ_INT(test_cluster_master_of(&c, 3), 0);
    CHECK_EQ_INT(test_cluster_master_of(&c, 4), 1);
    CHECK_STR_EQ(CMD(&c, 2, "GET %s", key), "nil");
    test_cluster_stop(&c);
}

/* Without full coverage the rest of the cluster goes on serving while a
 * master without replicas is down. */
TEST(t_partial_coverage) {
    test_cluster c;
    char key[64];

    start(&c, &(test_cluster_config){.replicas = TEST_CLUSTER_NO_REPLICAS, .partial_coverage = 1});
    CHECK_EQ_INT(c.count, 3);
    CHECK(test_cluster_key_in_slot(8000, "k", key, sizeof key) == 0);
    TIMED("kill master without replica", test_cluster_kill(&c, 0) == 0);
    TIMED("settled without it", test_cluster_wait_settled(&c) == 0);
    check_state(&c, "ok");
    CHECK_STR_EQ(CMD(&c, 1, "SET %s 1", key), "+OK");
    CHECK_EQ_INT(test_cluster_master_of_slot(&c, 0), 0);
    CHECK(test_cluster_wait_promoted(&c, 0) == -1); /* no replica */
    TIMED("restart master with slots", test_cluster_restart(&c, 0) == 0);
    CHECK_EQ_INT(test_cluster_role(&c, 0), TEST_CLUSTER_MASTER);
    CHECK_EQ_INT(test_cluster_master_of_slot(&c, 0), 0);
    test_cluster_stop(&c);
}

TEST(t_password) {
    test_cluster_config cfg = {
        .masters = 3, .requirepass = "s3 cr\"et", .acl_user = "alice on >pw ~* &* +@all"};
    redisContext *raw;
    redisReply *reply;
    test_cluster c;
    int m, slot = test_cluster_slot_of_key("pw");

    start(&c, &cfg);
    raw = redisConnect("127.0.0.1", test_cluster_port(&c, 0));
    CHECK(raw && !raw->err);
    reply = redisCommand(raw, "CLUSTER INFO");
    CHECK(strncmp(reply_text(reply), "-NOAUTH", 7) == 0);
    reply = redisCommand(raw, "AUTH alice pw");
    CHECK_STR_EQ(reply_text(reply), "+OK");
    redisFree(raw);
    /* masterauth: the replicas are in sync. */
    m = write_replicated(&c, "pw", "1");
    /* MIGRATE with AUTH. */
    TIMED("migrate with password", test_cluster_migrate_slot(&c, slot, (m + 1) % 3) == 0);
    CHECK_STR_EQ(CMD(&c, (m + 1) % 3, "GET pw"), "$1");
    test_cluster_stop(&c);
}

/* With tls-replication a replica's ROLE names its master's TLS port: the
 * roles are still told (the lab's cluster faults pick a master's replica
 * this way). */
TEST(t_tls_roles) {
    test_cluster_config cfg = {.masters = 1, .tls_dir = test_tls_certs()};
    test_cluster c;

    CHECK(cfg.tls_dir != NULL);
    start(&c, &cfg);
    CHECK_EQ_INT(test_cluster_master_of(&c, 1), 0);
    CHECK_EQ_INT(test_cluster_replica_of(&c, 0), 1);
    test_cluster_stop(&c);
}

int main(int argc, char **argv) {
    return test_main(argc, argv,
                     (test_case[]){
                         TEST_CASE(t_slot_of_key),
                         TEST_CASE(t_start_stop),
                         TEST_CASE(t_failed_start_cleans_up),
                         TEST_CASE(t_slots_match_shards),
                         TEST_CASE(t_replica_read),
                         TEST_CASE(t_failover),
                         TEST_CASE(t_kill_master),
                         TEST_CASE(t_kill_replica),
                         TEST_CASE(t_migrate_slot),
                         TEST_CASE(t_add_node),
                         TEST_CASE(t_cluster_down),
                         TEST_CASE(t_partial_coverage),
                         TEST_CASE(t_password),
                         TEST_CASE(t_tls_roles),
                         {0},
                     });
}
