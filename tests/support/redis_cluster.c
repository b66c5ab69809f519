/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* open_memstream */
#endif

#include "redis_cluster.h"

#include "check.h"

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MASTERS 3
#define DEFAULT_NODE_TIMEOUT_MS 500
#define DEFAULT_SETTLE_TIMEOUT_MS 20000
#define POLL_MS 20
#define BUS_PORT_ATTEMPTS 3
#define ADMIN_CONNECT_TIMEOUT_MS 1000
/* Below the 3 s command timeout of test_redis_connect_admin, so that a
 * slow MIGRATE fails as such rather than as a timed-out connection. */
#define MIGRATE_TIMEOUT_MS 2000
#define MIGRATE_BATCH 100

/* ---- small helpers ---- */

static void say(const char *fmt, ...) TEST_PRINTF_(1, 2);

static void say(const char *fmt, ...) {
    va_list ap;

    fputs("test_cluster: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

static int valid_node(const test_cluster *c, int node) {
    return node >= 0 && node < c->count;
}

int test_cluster_alive(const test_cluster *c, int node) {
    return valid_node(c, node) && c->node[node].server.pid > 0;
}

int test_cluster_port(const test_cluster *c, int node) {
    return valid_node(c, node) ? c->node[node].server.port : -1;
}

int test_cluster_node_by_port(const test_cluster *c, int port) {
    int i;

    for (i = 0; i < c->count; i++)
        if (port > 0 && c->node[i].server.port == port)
            return i;
    return -1;
}

/* The node at host:port, port its plain or (with tls-replication, what a
 * replica's ROLE names) its TLS port; -1 if none. Placed nodes may share
 * a port: each has an address of its own. */
static int node_by_addr(const test_cluster *c, const char *host, int port) {
    int i;

    for (i = 0; i < c->count; i++) {
        const test_redis *s = &c->node[i].server;

        if (port > 0 && (s->port == port || s->tls_port == port) &&
            strcmp(test_redis_host(s), host) == 0)
            return i;
    }
    return -1;
}

static int node_by_id(const test_cluster *c, const char *id) {
    int i;

    for (i = 0; i < c->count; i++)
        if (c->node[i].id[0] && strcmp(c->node[i].id, id) == 0)
            return i;
    return -1;
}

static int lowest_live(const test_cluster *c) {
    int i;

    for (i = 0; i < c->count; i++)
        if (test_cluster_alive(c, i))
            return i;
    return -1;
}

/* ---- slots ---- */

/* CRC16-CCITT (XMODEM), the one of the Redis Cluster specification. */
static uint16_t crc16(const unsigned char *p, size_t len) {
    uint16_t crc = 0;
    size_t i;
    int bit;

    for (i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

int test_cluster_slot_of(const void *key, size_t len) {
    const unsigned char *k = key;
    size_t open, close;

    for (open = 0; open < len && k[open] != '{'; open++)
        ;
    for (close = open + 1; close < len && k[close] != '}'; close++)
        ;
    if (close < len && close > open + 1)
        return crc16(k + open + 1, close - open - 1) & (TEST_CLUSTER_SLOTS - 1);
    return crc16(k, len) & (TEST_CLUSTER_SLOTS - 1);
}

int test_cluster_slot_of_key(const char *key) {
    return test_cluster_slot_of(key, strlen(key));
}

int test_cluster_key_in_slot(int slot, const char *prefix, char *out, size_t cap) {
    long n;

    if (slot < 0 || slot >= TEST_CLUSTER_SLOTS || cap == 0)
        return -1;
    /* Decimal tags below 10^6 cover every slot several times over. */
    for (n = 0; n < 10000000L; n++) {
        int len = snprintf(out, cap, "%s{%ld}", prefix, n);

        if (len < 0 || (size_t)len >= cap)
            return -1;
        if (test_cluster_slot_of(out, (size_t)len) == slot)
            return 0;
    }
    return -1;
}

/* ---- admin connections ---- */

/* A command on the node's own cached admin connection (not the one of
 * test_redis_cmd on its server). */
static redisReply *node_request(test_cluster *c, int node, const test_redis_request *rq) {
    if (!valid_node(c, node))
        return NULL;
    return test_redis_send(&c->node[node].server, &c->node[node].admin_, ADMIN_CONNECT_TIMEOUT_MS,
                           rq);
}

redisReply *test_cluster_cmd(test_cluster *c, int node, const char *fmt, ...) {
    test_redis_request rq = {fmt, NULL, 0, NULL, NULL};
    redisReply *reply;
    va_list ap;

    va_start(ap, fmt);
    rq.ap = &ap;
    reply = node_request(c, node, &rq);
    va_end(ap);
    return reply;
}

long long test_cluster_int(test_cluster *c, int node, const char *fmt, ...) {
    test_redis_request rq = {fmt, NULL, 0, NULL, NULL};
    redisReply *reply;
    va_list ap;

    va_start(ap, fmt);
    rq.ap = &ap;
    reply = node_request(c, node, &rq);
    va_end(ap);
    return test_redis_int_reply(reply);
}

/* 0 when the reply is +OK; else -1, with the error said. The reply is
 * freed. */
static int expect_ok(test_cluster *c, int node, redisReply *reply, const char *what) {
    int ok = reply && reply->type == REDIS_REPLY_STATUS && strcmp(reply->str, "OK") == 0;

    if (!ok)
        say("%s on node %d (port %d): %s", what, node, test_cluster_port(c, node),
            !reply                             ? "no reply"
            : reply->type == REDIS_REPLY_ERROR ? reply->str
                                               : "unexpected reply");
    if (reply)
        freeReplyObject(reply);
    return ok ? 0 : -1;
}

/* The value of "name:value" in an INFO-style text, into out. */
static int text_field(const char *text, const char *name, char *out, size_t cap) {
    size_t len = strlen(name), n;
    const char *p = text;

    while ((p = strstr(p, name)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[len] == ':') {
            p += len + 1;
            n = strcspn(p, "\r\n");
            if (n >= cap)
                return -1;
            memcpy(out, p, n);
            out[n] = '\0';
            return 0;
        }
        p += len;
    }
    return -1;
}

static int info_field(test_cluster *c, int node, const char *command, const char *field, char *out,
                      size_t cap) {
    redisReply *reply = test_cluster_cmd(c, node, command);
    int rc = -1;

    if (reply && (reply->type == REDIS_REPLY_STRING))
        rc = text_field(reply->str, field, out, cap);
    if (reply)
        freeReplyObject(reply);
    return rc;
}

int test_cluster_info(test_cluster *c, int node, const char *field, char *out, size_t cap) {
    return info_field(c, node, "CLUSTER INFO", field, out, cap);
}

/* ---- a node's view of the cluster (CLUSTER NODES) ---- */

typedef struct view {
    int listed[TEST_CLUSTER_MAX_NODES];
    int role[TEST_CLUSTER_MAX_NODES];   /* TEST_CLUSTER_MASTER / _REPLICA */
    int master[TEST_CLUSTER_MAX_NODES]; /* -1: none or not one of ours */
    int failing[TEST_CLUSTER_MAX_NODES];
    int slots[TEST_CLUSTER_MAX_NODES]; /* how many it owns */
    /* Entries that are not (yet) one of the harness' nodes: a handshake
     * in progress, or a node without an address. */
    int strangers;
    int16_t owner[TEST_CLUSTER_SLOTS]; /* -1: no owner */
} view;

static int has_flag(const char *flags, const char *flag) {
    size_t len = strlen(flag);
    const char *p = flags;

    for (;;) {
        if (strncmp(p, flag, len) == 0 && (p[len] == ',' || p[len] == '\0'))
            return 1;
        p = strchr(p, ',');
        if (!p)
            return 0;
        p++;
    }
}

static void parse_line(const test_cluster *c, char *line, view *v) {
    char *tok[8], *save = NULL, *slot;
    int i, idx, from, to, s;

    for (i = 0; i < 8; i++) {
        tok[i] = strtok_r(i == 0 ? line : NULL, " ", &save);
        if (!tok[i])
            return;
    }
    idx = node_by_id(c, tok[0]);
    if (idx < 0 || has_flag(tok[2], "handshake") || has_flag(tok[2], "noaddr")) {
        v->strangers++;
        return;
    }
    v->listed[idx] = 1;
    v->role[idx] = has_flag(tok[2], "master") ? TEST_CLUSTER_MASTER : TEST_CLUSTER_REPLICA;
    v->master[idx] = strcmp(tok[3], "-") == 0 ? -1 : node_by_id(c, tok[3]);
    v->failing[idx] = has_flag(tok[2], "fail") || has_flag(tok[2], "fail?");
    while ((slot = strtok_r(NULL, " ", &save)) != NULL) {
        /* "[slot->-id]" and "[slot-<-id]": a migration under way, which
         * leaves the owner as it is. */
        if (slot[0] == '[')
            continue;
        from = to = atoi(slot);
        if (strchr(slot, '-'))
            to = atoi(strchr(slot, '-') + 1);
        for (s = from; s <= to && s >= 0 && s < TEST_CLUSTER_SLOTS; s++) {
            v->owner[s] = (int16_t)idx;
            v->slots[idx]++;
        }
    }
}

static int read_view(test_cluster *c, int node, view *v) {
    redisReply *reply = test_cluster_cmd(c, node, "CLUSTER NODES");
    char *line, *save = NULL;
    int i;

    memset(v, 0, sizeof *v);
    for (i = 0; i < TEST_CLUSTER_MAX_NODES; i++)
        v->master[i] = -1;
    for (i = 0; i < TEST_CLUSTER_SLOTS; i++)
        v->owner[i] = -1;
    if (!reply || (reply->type != REDIS_REPLY_STRING)) {
        if (reply)
            freeReplyObject(reply);
        return -1;
    }
    for (line = strtok_r(reply->str, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        parse_line(c, line, v);
    freeReplyObject(reply);
    return 0;
}

/* ---- waiting for a state ---- */

enum {
    W_STATE_OK = 1 << 0,   /* cluster_state:ok */
    W_STATE_FAIL = 1 << 1, /* cluster_state:fail */
    W_KNOWN = 1 << 2,      /* knows every joined node, no handshakes */
    W_DEAD = 1 << 3,       /* flags every dead node */
    W_LIVE = 1 << 4,       /* flags no live node */
    W_AGREE = 1 << 5,      /* same slot map, roles and masters */
    W_LINKS = 1 << 6,      /* replicas of live masters are in sync */
    W_SETTLED = W_STATE_OK | W_KNOWN | W_DEAD | W_LIVE | W_AGREE | W_LINKS,
};

/* More to wait for, on the view every live node agrees on. */
typedef int (*settled_fn)(const test_cluster *c, const view *agreed, void *arg);

#define WHY_MAX 256

static int joined(const test_cluster *c, int node) {
    return c->node[node].id[0] != '\0';
}

/* 1 when every live node satisfies want; else 0 with the first reason in
 * why. views holds one view per node; views[first live] is the agreed
 * one when W_AGREE held. */
static int check_once(test_cluster *c, int want, view *views, char *why) {
    int i, j, first = lowest_live(c);
    char state[32];

    if (first < 0) {
        snprintf(why, WHY_MAX, "no node is alive");
        return 0;
    }
    for (i = 0; i < c->count; i++) {
        view *v = &views[i];

        if (!test_cluster_alive(c, i))
            continue;
        if (want & (W_STATE_OK | W_STATE_FAIL)) {
            const char *expected = want & W_STATE_OK ? "ok" : "fail";

            if (test_cluster_info(c, i, "cluster_state", state, sizeof state) != 0) {
                snprintf(why, WHY_MAX, "node %d: no CLUSTER INFO", i);
                return 0;
            }
            if (strcmp(state, expected) != 0) {
                snprintf(why, WHY_MAX, "node %d: cluster_state:%s", i, state);
                return 0;
            }
        }
        if (!(want & (W_KNOWN | W_DEAD | W_LIVE | W_AGREE | W_LINKS)))
            continue;
        if (read_view(c, i, v) != 0) {
            snprintf(why, WHY_MAX, "node %d: no CLUSTER NODES", i);
            return 0;
        }
        if ((want & W_KNOWN) && v->strangers) {
            snprintf(why, WHY_MAX, "node %d: %d node(s) in handshake or unknown", i, v->strangers);
            return 0;
        }
        for (j = 0; j < c->count; j++) {
            if (!joined(c, j))
                continue;
            if ((want & W_KNOWN) && !v->listed[j]) {
                snprintf(why, WHY_MAX, "node %d does not know node %d", i, j);
                return 0;
            }
            if ((want & W_DEAD) && !test_cluster_alive(c, j) && !v->failing[j]) {
                snprintf(why, WHY_MAX, "node %d does not flag dead node %d", i, j);
                return 0;
            }
            if ((want & W_LIVE) && test_cluster_alive(c, j) && v->failing[j]) {
                snprintf(why, WHY_MAX, "node %d flags live node %d as failing", i, j);
                return 0;
            }
        }
    }
    if (want & W_AGREE) {
        const view *a = &views[first];

        for (i = first + 1; i < c->count; i++) {
            const view *v = &views[i];

            if (!test_cluster_alive(c, i))
                continue;
            if (memcmp(a->owner, v->owner, sizeof a->owner) != 0) {
                for (j = 0; j < TEST_CLUSTER_SLOTS && a->owner[j] == v->owner[j]; j++)
                    ;
                snprintf(why, WHY_MAX, "slot %d: owner %d for node %d, %d for node %d", j,
                         a->owner[j], first, v->owner[j], i);
                return 0;
            }
            for (j = 0; j < c->count; j++) {
                if (!test_cluster_alive(c, j))
                    continue;
                if (a->role[j] != v->role[j] || a->master[j] != v->master[j]) {
                    snprintf(why, WHY_MAX,
                             "node %d: role %d of %d for node %d, role %d of %d for node %d", j,
                             a->role[j], a->master[j], first, v->role[j], v->master[j], i);
                    return 0;
                }
            }
        }
    }
    if (want & W_LINKS) {
        const view *a = &views[first];

        for (j = 0; j < c->count; j++) {
            char link[32];

            if (!test_cluster_alive(c, j) || a->role[j] != TEST_CLUSTER_REPLICA ||
                !test_cluster_alive(c, a->master[j]))
                continue;
            if (info_field(c, j, "INFO replication", "master_link_status", link, sizeof link) !=
                    0 ||
                strcmp(link, "up") != 0) {
                snprintf(why, WHY_MAX, "replica %d: link to master %d not up", j, a->master[j]);
                return 0;
            }
        }
    }
    return 1;
}

static void remember(test_cluster *c, const view *agreed) {
    int i;

    for (i = 0; i < c->count; i++)
        if (test_cluster_alive(c, i))
            c->master_[i] = agreed->master[i];
}

/* Polls until want and more() hold, or the settle timeout. */
static int wait_for(test_cluster *c, int want, settled_fn more, void *arg, const char *what) {
    int64_t start = test_now_ms(), deadline = start + c->cfg.settle_timeout_ms;
    view *views = calloc((size_t)TEST_CLUSTER_MAX_NODES, sizeof *views);
    char why[WHY_MAX] = "";

    if (!views) {
        say("%s: out of memory", what);
        return -1;
    }
    for (;;) {
        if (check_once(c, want, views, why)) {
            const view *agreed = &views[lowest_live(c)];

            if (!more || more(c, agreed, arg)) {
                if (want & W_AGREE)
                    remember(c, agreed);
                free(views);
                return 0;
            }
            snprintf(why, sizeof why, "%s: not yet", what);
        }
        if (test_now_ms() >= deadline)
            break;
        test_sleep_ms(POLL_MS);
    }
    say("%s: gave up after %lld ms: %s", what, (long long)(test_now_ms() - start), why);
    free(views);
    return -1;
}

int test_cluster_wait_settled(test_cluster *c) {
    return wait_for(c, W_SETTLED, NULL, NULL, "wait_settled");
}

int test_cluster_wait_down(test_cluster *c) {
    return wait_for(c, W_STATE_FAIL | W_DEAD, NULL, NULL, "wait_down");
}

/* ---- starting nodes ---- */

/* Redis 7.0 and later: the bus port is a setting (cluster-port), CLUSTER
 * MEET names it, slots are added by range, and SIGTERM can be told not to
 * wait for replicas. Before, the bus port is port + 10000. */
static int new_cluster(void) {
    return test_redis_version() == 0 || test_redis_version() >= 70000;
}

/* The cluster part of a node's config, for test_redis_config.extra. */
static char *node_config(const test_cluster *c, int bus_port) {
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);

    if (!f)
        return NULL;
    fprintf(f,
            "cluster-enabled yes\n"
            "cluster-config-file nodes.conf\n"
            "cluster-node-timeout %d\n"
            "cluster-require-full-coverage %s\n",
            c->cfg.node_timeout_ms, c->cfg.partial_coverage ? "no" : "yes");
    /* Ports of the ephemeral range may be above 55535, where the default
     * bus port (port + 10000) does not exist. */
    if (new_cluster())
        fprintf(f, "cluster-port %d\n", bus_port);
    /* With the default factor a replica whose master has been down for
     * some 15 s no longer stands for election, and a test that keeps a
     * master down that long would wait for a failover that never comes. */
    fputs("cluster-replica-validity-factor 0\n", f);
    /* The default waits 5 s for more replicas before a full sync. */
    fputs("repl-diskless-sync yes\nrepl-diskless-sync-delay 0\n", f);
    /* A master stopped with SIGTERM would wait up to 10 s for lagging
     * replicas (7.0; before, it did not wait). */
    if (new_cluster())
        fputs("shutdown-on-sigterm now\n", f);
    if (c->cfg.requirepass)
        test_redis_put_config(f, "masterauth", c->cfg.requirepass);
    if (c->cfg.tls_dir)
        fputs("tls-cluster yes\ntls-replication yes\n", f);
    /* A placed node: its peers and clients are told its own address. */
    if (c->cfg.host[c->count])
        fprintf(f, "cluster-announce-ip %s\n", c->cfg.host[c->count]);
    if (c->cfg.extra)
        fprintf(f, "%s\n", c->cfg.extra);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static int read_id(test_cluster *c, int node) {
    redisReply *reply = test_cluster_cmd(c, node, "CLUSTER MYID");
    int ok = reply && reply->type == REDIS_REPLY_STRING && reply->len < 41;

    if (ok)
        memcpy(c->node[node].id, reply->str, (size_t)reply->len + 1);
    else
        say("CLUSTER MYID on node %d: no answer", node);
    if (reply)
        freeReplyObject(reply);
    return ok ? 0 : -1;
}

/* Before 7.0: a free port whose port + 10000, the bus port, is free too;
 * the bus port, or -1. */
static int old_bus_pair(int *port) {
    int i;

    for (i = 0; i < 100; i++) {
        int p = test_redis_free_port();

        if (p > 0 && test_redis_port_is_free(p + 10000)) {
            *port = p;
            return p + 10000;
        }
    }
    return -1;
}

/* Starts node[c->count] and counts it; not joined yet. */
static int start_node(test_cluster *c) {
    test_cluster_node *n = &c->node[c->count];
    int attempt;

    if (c->count >= TEST_CLUSTER_MAX_NODES) {
        say("no room for more than %d nodes", TEST_CLUSTER_MAX_NODES);
        return -1;
    }
    memset(n, 0, sizeof *n);
    /* test_redis_start tries other ports when the server quits, but with
     * the same config: a bus port taken meanwhile needs a new config. */
    for (attempt = 0; attempt < BUS_PORT_ATTEMPTS; attempt++) {
        test_redis_config rc;
        int port = 0, bus = new_cluster() ? test_redis_free_port() : old_bus_pair(&port);
        char *extra = bus > 0 ? node_config(c, bus) : NULL;
        int rc_start;

        if (!extra) {
            say("no bus port or out of memory");
            return -1;
        }
        memset(&rc, 0, sizeof rc);
        rc.port = port;
        rc.requirepass = c->cfg.requirepass;
        rc.acl_user = c->cfg.acl_user;
        rc.extra = extra;
        rc.tls_dir = c->cfg.tls_dir;
        rc.host = c->cfg.host[c->count];
        rc.netns = c->cfg.netns[c->count];
        rc_start = test_redis_start(&n->server, &rc);
        free(extra);
        if (rc_start == 0) {
            n->bus_port = bus;
            c->master_[c->count] = -1;
            c->count++;
            return 0;
        }
    }
    say("node %d did not start", c->count);
    return -1;
}

/* CLUSTER ADDSLOTSRANGE from to (7.0), or ADDSLOTS of each. */
static int add_slots(test_cluster *c, int node, int from, int to) {
    const char **argv;
    size_t *lens;
    char *text;
    test_redis_request rq;
    int i, n = to - from + 1;

    if (new_cluster())
        return expect_ok(c, node,
                         test_cluster_cmd(c, node, "CLUSTER ADDSLOTSRANGE %d %d", from, to),
                         "CLUSTER ADDSLOTSRANGE");
    argv = calloc((size_t)n + 2, sizeof *argv);
    lens = calloc((size_t)n + 2, sizeof *lens);
    text = calloc((size_t)n, 8);
    if (!argv || !lens || !text) {
        free(argv);
        free(lens);
        free(text);
        say("add_slots: out of memory");
        return -1;
    }
    argv[0] = "CLUSTER";
    argv[1] = "ADDSLOTS";
    lens[0] = 7;
    lens[1] = 8;
    for (i = 0; i < n; i++) {
        argv[i + 2] = text + 8 * i;
        lens[i + 2] = (size_t)snprintf(text + 8 * i, 8, "%d", from + i);
    }
    rq.fmt = NULL;
    rq.ap = NULL;
    rq.argc = n + 2;
    rq.argv = argv;
    rq.lens = lens;
    i = expect_ok(c, node, node_request(c, node, &rq), "CLUSTER ADDSLOTS");
    free(argv);
    free(lens);
    free(text);
    return i;
}

static int meet(test_cluster *c, int from, int to) {
    const char *host = test_redis_host(&c->node[to].server);

    if (!new_cluster())
        return expect_ok(
            c, from, test_cluster_cmd(c, from, "CLUSTER MEET %s %d", host, c->node[to].server.port),
            "CLUSTER MEET");
    return expect_ok(c, from,
                     test_cluster_cmd(c, from, "CLUSTER MEET %s %d %d", host,
                                      c->node[to].server.port, c->node[to].bus_port),
                     "CLUSTER MEET");
}

static int replicate(test_cluster *c, int replica, int master) {
    return expect_ok(c, replica,
                     test_cluster_cmd(c, replica, "CLUSTER REPLICATE %s", c->node[master].id),
                     "CLUSTER REPLICATE");
}

static int copy_config(test_cluster *c, const test_cluster_config *cfg) {
    static const test_cluster_config none;
    const char *src[4];
    size_t i;

    if (!cfg)
        cfg = &none;
    c->cfg = *cfg;
    if (c->cfg.masters <= 0)
        c->cfg.masters = DEFAULT_MASTERS;
    if (c->cfg.replicas == 0)
        c->cfg.replicas = 1;
    else if (c->cfg.replicas < 0)
        c->cfg.replicas = 0;
    if (c->cfg.node_timeout_ms <= 0)
        c->cfg.node_timeout_ms = DEFAULT_NODE_TIMEOUT_MS;
    if (c->cfg.settle_timeout_ms <= 0)
        c->cfg.settle_timeout_ms = DEFAULT_SETTLE_TIMEOUT_MS;
    src[0] = cfg->requirepass;
    src[1] = cfg->acl_user;
    src[2] = cfg->extra;
    src[3] = cfg->tls_dir;
    for (i = 0; i < 4; i++) {
        if (src[i] && !(c->strings_[i] = strdup(src[i]))) {
            say("out of memory");
            return -1;
        }
    }
    c->cfg.requirepass = c->strings_[0];
    c->cfg.acl_user = c->strings_[1];
    c->cfg.extra = c->strings_[2];
    c->cfg.tls_dir = c->strings_[3];
    return 0;
}

/* cluster_state:ok says as much only with full coverage required. */
static int covered(const test_cluster *c, const view *agreed, void *arg) {
    int slot;

    (void)c;
    (void)arg;
    for (slot = 0; slot < TEST_CLUSTER_SLOTS; slot++)
        if (agreed->owner[slot] < 0)
            return 0;
    return 1;
}

int test_cluster_start(test_cluster *c, const test_cluster_config *cfg) {
    int64_t start = test_now_ms();
    int i, j, k, masters, total;

    memset(c, 0, sizeof *c);
    if (copy_config(c, cfg) != 0)
        goto fail;
    masters = c->cfg.masters;
    total = masters * (1 + c->cfg.replicas);
    if (total > TEST_CLUSTER_MAX_NODES) {
        say("%d nodes asked for, at most %d", total, TEST_CLUSTER_MAX_NODES);
        goto fail;
    }
    /* Masters first: their 2 s before state ok counts from their start,
     * so it runs while the rest is set up. */
    for (i = 0; i < total; i++) {
        if (start_node(c) != 0 || read_id(c, i) != 0)
            goto fail;
        /* Distinct epochs, as redis-cli gives them: equal ones would be
         * resolved by bumping, one more thing that must settle. */
        if (expect_ok(c, i, test_cluster_cmd(c, i, "CLUSTER SET-CONFIG-EPOCH %d", i + 1),
                      "CLUSTER SET-CONFIG-EPOCH") != 0)
            goto fail;
    }
    for (k = 0; k < masters; k++) {
        int from = k * TEST_CLUSTER_SLOTS / masters;
        int to = (k + 1) * TEST_CLUSTER_SLOTS / masters - 1;

        if (add_slots(c, k, from, to) != 0)
            goto fail;
    }
    /* Every pair meets directly: faster than waiting for gossip to
     * introduce them. */
    for (i = 0; i < total; i++)
        for (j = i + 1; j < total; j++)
            if (meet(c, i, j) != 0)
                goto fail;
    if (wait_for(c, W_KNOWN, NULL, NULL, "start: join") != 0)
        goto fail;
    for (i = masters; i < total; i++) {
        int master = (i - masters) % masters;

        if (replicate(c, i, master) != 0)
            goto fail;
    }
    if (wait_for(c, W_SETTLED, covered, NULL, "start") != 0)
        goto fail;
    return 0;

fail:
    say("start failed after %lld ms", (long long)(test_now_ms() - start));
    test_cluster_stop(c);
    return -1;
}

void test_cluster_stop(test_cluster *c) {
    int i;
    size_t s;

    /* All at once: each exits in its own time, not one after another. */
    for (i = 0; i < TEST_CLUSTER_MAX_NODES; i++) {
        if (c->node[i].server.pid > 0) {
            kill(c->node[i].server.pid, SIGTERM);
            kill(c->node[i].server.pid, SIGCONT);
        }
    }
    for (i = 0; i < TEST_CLUSTER_MAX_NODES; i++) {
        test_redis_close_admin(&c->node[i].admin_);
        test_redis_stop(&c->node[i].server);
    }
    for (s = 0; s < sizeof c->strings_ / sizeof c->strings_[0]; s++)
        free(c->strings_[s]);
    memset(c, 0, sizeof *c);
}

/* ---- introspection ---- */

int test_cluster_role(test_cluster *c, int node) {
    redisReply *reply;
    int role = -1;

    if (!valid_node(c, node))
        return -1;
    if (!test_cluster_alive(c, node))
        return TEST_CLUSTER_DOWN;
    reply = test_cluster_cmd(c, node, "ROLE");
    if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 &&
        reply->element[0]->type == REDIS_REPLY_STRING) {
        if (strcmp(reply->element[0]->str, "master") == 0)
            role = TEST_CLUSTER_MASTER;
        else if (strcmp(reply->element[0]->str, "slave") == 0)
            role = TEST_CLUSTER_REPLICA;
    }
    if (reply)
        freeReplyObject(reply);
    return role;
}

int test_cluster_master_of(test_cluster *c, int replica) {
    redisReply *reply;
    int master = -1;

    reply = test_cluster_cmd(c, replica, "ROLE");
    /* A replica's ROLE: "slave", master ip, master port, state, offset. */
    if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements >= 3 &&
        reply->element[0]->type == REDIS_REPLY_STRING &&
        strcmp(reply->element[0]->str, "slave") == 0 &&
        reply->element[1]->type == REDIS_REPLY_STRING &&
        reply->element[2]->type == REDIS_REPLY_INTEGER)
        master = node_by_addr(c, reply->element[1]->str, (int)reply->element[2]->integer);
    if (reply)
        freeReplyObject(reply);
    return master;
}

int test_cluster_replica_of(test_cluster *c, int master) {
    int i;

    for (i = 0; i < c->count; i++)
        if (i != master && test_cluster_alive(c, i) && test_cluster_master_of(c, i) == master)
            return i;
    return -1;
}

int test_cluster_master_of_slot(test_cluster *c, int slot) {
    int node = lowest_live(c), owner = -1;
    view *v;

    if (slot < 0 || slot >= TEST_CLUSTER_SLOTS || node < 0)
        return -1;
    v = malloc(sizeof *v);
    if (v && read_view(c, node, v) == 0)
        owner = v->owner[slot];
    free(v);
    return owner;
}

/* ---- kill, restart, failover ---- */

int test_cluster_kill_nodes(test_cluster *c, const int *nodes, int n) {
    int i;

    for (i = 0; i < n; i++) {
        if (!test_cluster_alive(c, nodes[i])) {
            say("kill: node %d is not running", nodes[i]);
            return -1;
        }
    }
    for (i = 0; i < n; i++) {
        test_redis_close_admin(&c->node[nodes[i]].admin_);
        test_redis_kill(&c->node[nodes[i]].server);
    }
    return wait_for(c, W_DEAD, NULL, NULL, "kill");
}

int test_cluster_kill(test_cluster *c, int node) {
    return test_cluster_kill_nodes(c, &node, 1);
}

int test_cluster_restart_nodes(test_cluster *c, const int *nodes, int n) {
    int i;

    for (i = 0; i < n; i++) {
        if (!valid_node(c, nodes[i]) || !c->node[nodes[i]].server.dir[0] ||
            test_cluster_alive(c, nodes[i])) {
            say("restart: node %d is not a killed node", nodes[i]);
            return -1;
        }
    }
    for (i = 0; i < n; i++) {
        test_redis_close_admin(&c->node[nodes[i]].admin_);
        if (test_redis_restart(&c->node[nodes[i]].server) != 0) {
            say("restart: node %d did not come up again", nodes[i]);
            return -1;
        }
    }
    return wait_for(c, W_SETTLED, NULL, NULL, "restart");
}

int test_cluster_restart(test_cluster *c, int node) {
    return test_cluster_restart_nodes(c, &node, 1);
}

typedef struct swap {
    int replica;
    int old_master;
} swap;

static int swapped(const test_cluster *c, const view *agreed, void *arg) {
    const swap *s = arg;

    return agreed->role[s->replica] == TEST_CLUSTER_MASTER &&
           (!test_cluster_alive(c, s->old_master) || agreed->master[s->old_master] == s->replica);
}

int test_cluster_failover(test_cluster *c, int replica) {
    swap s;

    s.replica = replica;
    s.old_master = test_cluster_master_of(c, replica);
    if (s.old_master < 0) {
        say("failover: node %d is not a live replica", replica);
        return -1;
    }
    if (expect_ok(c, replica, test_cluster_cmd(c, replica, "CLUSTER FAILOVER"),
                  "CLUSTER FAILOVER") != 0)
        return -1;
    return wait_for(c, W_SETTLED, swapped, &s, "failover");
}

typedef struct promotion {
    int candidates[TEST_CLUSTER_MAX_NODES];
    int n;
    int promoted;
} promotion;

static int promoted(const test_cluster *c, const view *agreed, void *arg) {
    promotion *p = arg;
    int i;

    (void)c;
    for (i = 0; i < p->n; i++) {
        int r = p->candidates[i];

        if (agreed->role[r] == TEST_CLUSTER_MASTER && agreed->slots[r] > 0) {
            p->promoted = r;
            return 1;
        }
    }
    return 0;
}

int test_cluster_wait_promoted(test_cluster *c, int old_master) {
    promotion p;
    int i;

    memset(&p, 0, sizeof p);
    p.promoted = -1;
    for (i = 0; i < c->count; i++)
        if (i != old_master && c->master_[i] == old_master)
            p.candidates[p.n++] = i;
    if (p.n == 0) {
        say("wait_promoted: node %d had no replica", old_master);
        return -1;
    }
    if (wait_for(c, W_SETTLED, promoted, &p, "wait_promoted") != 0)
        return -1;
    return p.promoted;
}

/* ---- resharding ---- */

typedef struct move {
    int slot;
    int to;
} move;

static int moved(const test_cluster *c, const view *agreed, void *arg) {
    const move *m = arg;

    (void)c;
    return agreed->owner[m->slot] == m->to;
}

/* The current owner of slot, checked to be a live master other than to;
 * 0 when to owns it already. */
static int migration_source(test_cluster *c, int slot, int to, int *from, const char *what) {
    if (slot < 0 || slot >= TEST_CLUSTER_SLOTS || !test_cluster_alive(c, to)) {
        say("%s: bad slot %d or target %d", what, slot, to);
        return -1;
    }
    *from = test_cluster_master_of_slot(c, slot);
    if (*from == to)
        return 0;
    if (!test_cluster_alive(c, *from)) {
        say("%s: slot %d has no live owner (%d)", what, slot, *from);
        return -1;
    }
    return 1;
}

int test_cluster_migrate_begin(test_cluster *c, int slot, int to_node) {
    int from, rc = migration_source(c, slot, to_node, &from, "migrate_begin");

    if (rc <= 0)
        return rc;
    /* The target first, as redis-cli does: a key that the source answers
     * with -ASK must find the target already importing. */
    if (expect_ok(
            c, to_node,
            test_cluster_cmd(c, to_node, "CLUSTER SETSLOT %d IMPORTING %s", slot, c->node[from].id),
            "CLUSTER SETSLOT IMPORTING") != 0)
        return -1;
    return expect_ok(
        c, from,
        test_cluster_cmd(c, from, "CLUSTER SETSLOT %d MIGRATING %s", slot, c->node[to_node].id),
        "CLUSTER SETSLOT MIGRATING");
}

/* One MIGRATE of the keys of a GETKEYSINSLOT reply. */
static int migrate_keys(test_cluster *c, int from, int to, const redisReply *keys) {
    size_t fixed = 0, i, argc;
    const char **argv;
    size_t *lens;
    char port[16], timeout[16];
    redisReply *reply;
    test_redis_request rq;
    int rc;

    /* MIGRATE host port "" 0 timeout REPLACE AUTH password KEYS: 10. */
    argc = 10 + keys->elements;
    argv = calloc(argc, sizeof *argv);
    lens = calloc(argc, sizeof *lens);
    if (!argv || !lens) {
        free(argv);
        free(lens);
        say("migrate: out of memory");
        return -1;
    }
    /* With tls-cluster, MIGRATE speaks TLS: to the TLS port. */
    snprintf(port, sizeof port, "%d",
             c->cfg.tls_dir ? c->node[to].server.tls_port : c->node[to].server.port);
    snprintf(timeout, sizeof timeout, "%d", MIGRATE_TIMEOUT_MS);
    argv[fixed++] = "MIGRATE";
    argv[fixed++] = test_redis_host(&c->node[to].server);
    argv[fixed++] = port;
    argv[fixed++] = ""; /* KEYS form: no single key */
    argv[fixed++] = "0";
    argv[fixed++] = timeout;
    /* The target may hold the key already: a test wrote it there with
     * ASKING during the move. The source's copy wins, as with
     * redis-cli --cluster-replace. */
    argv[fixed++] = "REPLACE";
    if (c->cfg.requirepass) {
        argv[fixed++] = "AUTH";
        argv[fixed++] = c->cfg.requirepass;
    }
    argv[fixed++] = "KEYS";
    for (i = 0; i < fixed; i++)
        lens[i] = strlen(argv[i]);
    for (i = 0; i < keys->elements; i++) {
        argv[fixed + i] = keys->element[i]->str;
        lens[fixed + i] = keys->element[i]->len;
    }
    rq.fmt = NULL;
    rq.ap = NULL;
    rq.argc = (int)(fixed + keys->elements);
    rq.argv = argv;
    rq.lens = lens;
    reply = node_request(c, from, &rq);
    free(argv);
    free(lens);
    /* NOKEY: the keys expired or were deleted since GETKEYSINSLOT. */
    if (reply && reply->type == REDIS_REPLY_STATUS && strcmp(reply->str, "NOKEY") == 0) {
        freeReplyObject(reply);
        return 0;
    }
    rc = expect_ok(c, from, reply, "MIGRATE");
    return rc;
}

int test_cluster_migrate_move_keys(test_cluster *c, int slot, int to_node, int max_keys) {
    int from, total = 0, rc = migration_source(c, slot, to_node, &from, "migrate_move_keys");

    if (rc <= 0)
        return rc;
    for (;;) {
        int batch = MIGRATE_BATCH;
        redisReply *keys;
        size_t i;

        if (max_keys > 0 && max_keys - total < batch)
            batch = max_keys - total;
        if (batch <= 0)
            break;
        keys = test_cluster_cmd(c, from, "CLUSTER GETKEYSINSLOT %d %d", slot, batch);
        if (!keys || keys->type != REDIS_REPLY_ARRAY) {
            say("CLUSTER GETKEYSINSLOT on node %d: %s", from,
                keys && keys->type == REDIS_REPLY_ERROR ? keys->str : "no answer");
            if (keys)
                freeReplyObject(keys);
            return -1;
        }
        if (keys->elements == 0) {
            freeReplyObject(keys);
            break;
        }
        for (i = 0; i < keys->elements; i++) {
            if (keys->element[i]->type != REDIS_REPLY_STRING) {
                freeReplyObject(keys);
                say("CLUSTER GETKEYSINSLOT on node %d: not a key", from);
                return -1;
            }
        }
        rc = migrate_keys(c, from, to_node, keys);
        total += (int)keys->elements;
        freeReplyObject(keys);
        if (rc != 0)
            return -1;
    }
    return total;
}

int test_cluster_migrate_finish(test_cluster *c, int slot, int to_node) {
    move m = {slot, to_node};
    int from, i, rc = migration_source(c, slot, to_node, &from, "migrate_finish");

    if (rc < 0)
        return -1;
    if (rc == 0)
        return wait_for(c, W_SETTLED, moved, &m, "migrate_finish");
    /* The source refuses to give up a slot while it holds keys of it. */
    if (test_cluster_migrate_move_keys(c, slot, to_node, 0) < 0)
        return -1;
    /* The target first: it bumps its config epoch on taking the slot, so
     * that its claim wins over the source's in the gossip. */
    if (expect_ok(
            c, to_node,
            test_cluster_cmd(c, to_node, "CLUSTER SETSLOT %d NODE %s", slot, c->node[to_node].id),
            "CLUSTER SETSLOT NODE") != 0)
        return -1;
    if (expect_ok(
            c, from,
            test_cluster_cmd(c, from, "CLUSTER SETSLOT %d NODE %s", slot, c->node[to_node].id),
            "CLUSTER SETSLOT NODE") != 0)
        return -1;
    /* The others would learn it from the gossip; told, they redirect
     * clients correctly at once. */
    for (i = 0; i < c->count; i++) {
        if (i == from || i == to_node || test_cluster_role(c, i) != TEST_CLUSTER_MASTER)
            continue;
        if (expect_ok(
                c, i,
                test_cluster_cmd(c, i, "CLUSTER SETSLOT %d NODE %s", slot, c->node[to_node].id),
                "CLUSTER SETSLOT NODE") != 0)
            return -1;
    }
    return wait_for(c, W_SETTLED, moved, &m, "migrate_finish");
}

int test_cluster_migrate_slot(test_cluster *c, int slot, int to_node) {
    if (test_cluster_migrate_begin(c, slot, to_node) != 0)
        return -1;
    return test_cluster_migrate_finish(c, slot, to_node);
}

/* ---- new nodes ---- */

/* Starts a node and joins it, a master without slots; not settled: a
 * master's state stays fail for its first 2 s, which a future replica
 * need not wait out. */
static int add_joined(test_cluster *c) {
    int node = c->count, peer = lowest_live(c);

    if (peer < 0) {
        say("add_node: no live node to meet");
        return -1;
    }
    if (start_node(c) != 0 || read_id(c, node) != 0 || meet(c, peer, node) != 0 ||
        wait_for(c, W_KNOWN, NULL, NULL, "add_node: join") != 0)
        return -1;
    return node;
}

int test_cluster_add_node(test_cluster *c) {
    int node = add_joined(c);

    if (node < 0 || wait_for(c, W_SETTLED, NULL, NULL, "add_node") != 0)
        return -1;
    return node;
}

typedef struct replication {
    int replica;
    int master;
} replication;

static int replicating(const test_cluster *c, const view *agreed, void *arg) {
    const replication *r = arg;

    (void)c;
    return agreed->master[r->replica] == r->master;
}

int test_cluster_add_replica(test_cluster *c, int master) {
    replication r;

    if (!test_cluster_alive(c, master)) {
        say("add_replica: node %d is not running", master);
        return -1;
    }
    r.master = master;
    r.replica = add_joined(c);
    if (r.replica < 0 || replicate(c, r.replica, master) != 0)
        return -1;
    if (wait_for(c, W_SETTLED, replicating, &r, "add_replica") != 0)
        return -1;
    return r.replica;
}
