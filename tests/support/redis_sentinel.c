/* SPDX-License-Identifier: MIT */
#include "redis_sentinel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define SETTLE_TIMEOUT_MS 20000

static int field_of(const redisReply *r, const char *key, char *out, size_t cap) {
    size_t i;

    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return -1;
    for (i = 0; i + 1 < r->elements; i += 2) {
        if (r->element[i]->type == REDIS_REPLY_STRING && strcmp(r->element[i]->str, key) == 0 &&
            r->element[i + 1]->type == REDIS_REPLY_STRING) {
            snprintf(out, cap, "%s", r->element[i + 1]->str);
            return 0;
        }
    }
    return -1;
}

/* A line "key:value" of an INFO section. */
static int info_has(test_redis *r, const char *section, const char *line) {
    redisReply *rep = test_redis_cmd(r, "INFO %s", section);
    int found = rep != NULL && rep->type == REDIS_REPLY_STRING && strstr(rep->str, line) != NULL;

    freeReplyObject(rep);
    return found;
}

static int role_is(test_redis *r, const char *role) {
    redisReply *rep;
    int yes;

    if (r->pid == 0)
        return 0;
    rep = test_redis_cmd(r, "ROLE");
    yes = rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
          rep->element[0]->type == REDIS_REPLY_STRING && strcmp(rep->element[0]->str, role) == 0;
    freeReplyObject(rep);
    return yes;
}

/* The port a client of the topology uses: the TLS one with tls_dir, the
 * one the sentinels name and replicas report. */
static int client_port(const test_sentinel *t, const test_redis *r) {
    return t->cfg.tls_dir != NULL ? r->tls_port : r->port;
}

/* master: NULL for the first master itself. */
static char *data_extra(const test_sentinel *t, const test_redis *master, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "repl-diskless-sync yes\nrepl-diskless-sync-delay 0\n%s",
                     t->cfg.tls_dir != NULL ? "tls-replication yes\n" : "");

    if (master != NULL)
        n += snprintf(buf + n, cap - (size_t)n, "replicaof %s %d\n", test_redis_host(master),
                      client_port(t, master));
    if (t->cfg.data_user != NULL)
        snprintf(buf + n, cap - (size_t)n, "masteruser %s\nmasterauth %s\n", t->cfg.data_user,
                 t->cfg.data_password);
    return buf;
}

const char *test_sentinel_addr(const test_sentinel *t, int i, char *buf, size_t cap) {
    snprintf(buf, cap, "%s:%d", test_redis_host(&t->sentinel[i]), client_port(t, &t->sentinel[i]));
    return buf;
}

/* Whether every sentinel knows every other sentinel and every replica. */
static int sentinels_settled(test_sentinel *t) {
    int i;

    for (i = 0; i < t->nsentinels; i++) {
        redisReply *r = test_redis_cmd(&t->sentinel[i], "SENTINEL master %s", TEST_SENTINEL_MASTER);
        char others[16] = "", slaves[16] = "";
        int ok = field_of(r, "num-other-sentinels", others, sizeof others) == 0 &&
                 field_of(r, "num-slaves", slaves, sizeof slaves) == 0 &&
                 atoi(others) == t->nsentinels - 1 && atoi(slaves) == t->ndata - 1;

        freeReplyObject(r);
        if (!ok)
            return 0;
    }
    return 1;
}

int test_sentinel_start(test_sentinel *t, const test_sentinel_config *cfg) {
    char extra[1024], acl[256];
    test_redis_config rc;
    int64_t until;
    int i;

    memset(t, 0, sizeof *t);
    if (cfg != NULL)
        t->cfg = *cfg;
    if (t->cfg.replicas == 0)
        t->cfg.replicas = 2;
    if (t->cfg.sentinels == 0)
        t->cfg.sentinels = 3;
    if (t->cfg.down_after_ms == 0)
        t->cfg.down_after_ms = 2000;
    if (t->cfg.failover_timeout_ms == 0)
        t->cfg.failover_timeout_ms = 4000;
    if (t->cfg.replicas + 1 > TEST_SENTINEL_MAX_DATA ||
        t->cfg.sentinels > TEST_SENTINEL_MAX_SENTINELS) {
        fprintf(stderr, "test_sentinel_start: too many nodes\n");
        return -1;
    }
    memset(&rc, 0, sizeof rc);
    rc.tls_dir = t->cfg.tls_dir;
    if (t->cfg.data_user != NULL) {
        snprintf(acl, sizeof acl, "%s on >%s ~* &* +@all", t->cfg.data_user, t->cfg.data_password);
        rc.acl_user = acl;
    }
    for (i = 0; i <= t->cfg.replicas; i++) {
        rc.extra = data_extra(t, i == 0 ? NULL : &t->data[0], extra, sizeof extra);
        rc.host = t->cfg.data_host[i];
        rc.netns = t->cfg.data_netns[i];
        if (test_redis_start(&t->data[i], &rc) != 0)
            goto fail;
        t->ndata++;
    }
    for (i = 1; i < t->ndata; i++)
        if (test_sentinel_wait_replica(t, i, SETTLE_TIMEOUT_MS) != 0)
            goto fail;

    memset(&rc, 0, sizeof rc);
    rc.sentinel = 1;
    rc.requirepass = t->cfg.sentinel_password;
    rc.tls_dir = t->cfg.tls_dir;
    for (i = 0; i < t->cfg.sentinels; i++) {
        int n =
            snprintf(extra, sizeof extra,
                     "sentinel monitor %s %s %d %d\n"
                     "sentinel down-after-milliseconds %s %d\n"
                     "sentinel failover-timeout %s %d\n"
                     "sentinel parallel-syncs %s 1\n%s",
                     TEST_SENTINEL_MASTER, test_redis_host(&t->data[0]),
                     client_port(t, &t->data[0]), t->cfg.sentinels / 2 + 1, TEST_SENTINEL_MASTER,
                     t->cfg.down_after_ms, TEST_SENTINEL_MASTER, t->cfg.failover_timeout_ms,
                     TEST_SENTINEL_MASTER, t->cfg.tls_dir != NULL ? "tls-replication yes\n" : "");
        if (t->cfg.data_user != NULL)
            n += snprintf(extra + n, sizeof extra - (size_t)n,
                          "sentinel auth-user %s %s\nsentinel auth-pass %s %s\n",
                          TEST_SENTINEL_MASTER, t->cfg.data_user, TEST_SENTINEL_MASTER,
                          t->cfg.data_password);
        if (t->cfg.sentinel_password != NULL)
            snprintf(extra + n, sizeof extra - (size_t)n, "sentinel sentinel-pass %s\n",
                     t->cfg.sentinel_password);
        rc.extra = extra;
        rc.host = t->cfg.sentinel_host[i];
        rc.netns = t->cfg.sentinel_netns[i];
        if (test_redis_start(&t->sentinel[i], &rc) != 0)
            goto fail;
        t->nsentinels++;
    }
    until = test_now_ms() + SETTLE_TIMEOUT_MS;
    while (!sentinels_settled(t)) {
        if (test_now_ms() > until) {
            fprintf(stderr, "test_sentinel_start: the sentinels did not find each other\n");
            goto fail;
        }
        test_sleep_ms(100);
    }
    return 0;
fail:
    test_sentinel_stop(t);
    return -1;
}

void test_sentinel_stop(test_sentinel *t) {
    int i;

    for (i = 0; i < TEST_SENTINEL_MAX_SENTINELS; i++)
        test_redis_stop(&t->sentinel[i]);
    for (i = 0; i < TEST_SENTINEL_MAX_DATA; i++)
        test_redis_stop(&t->data[i]);
}

int test_sentinel_named_by(test_sentinel *t, int s) {
    redisReply *r;
    int i, port = -1;
    char host[64] = "";

    if (t->sentinel[s].pid == 0)
        return -1;
    r = test_redis_cmd(&t->sentinel[s], "SENTINEL get-master-addr-by-name %s",
                       TEST_SENTINEL_MASTER);
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING) {
        snprintf(host, sizeof host, "%s", r->element[0]->str);
        port = atoi(r->element[1]->str);
    }
    freeReplyObject(r);
    for (i = 0; i < t->ndata; i++)
        if (client_port(t, &t->data[i]) == port && strcmp(test_redis_host(&t->data[i]), host) == 0)
            return i;
    return -1;
}

int test_sentinel_master(test_sentinel *t) {
    int s, m;

    for (s = 0; s < t->nsentinels; s++)
        if ((m = test_sentinel_named_by(t, s)) >= 0)
            return m;
    return -1;
}

int test_sentinel_new_master(test_sentinel *t, int not_index) {
    int s, m = -1;

    for (s = 0; s < t->nsentinels; s++) {
        int n;
        if (t->sentinel[s].pid == 0)
            continue;
        n = test_sentinel_named_by(t, s);
        if (n < 0 || (m >= 0 && n != m))
            return -1;
        m = n;
    }
    return m >= 0 && m != not_index && role_is(&t->data[m], "master") ? m : -1;
}

int test_sentinel_wait_master(test_sentinel *t, int not_index, int timeout_ms) {
    int64_t until = test_now_ms() + timeout_ms;
    int m;

    while ((m = test_sentinel_new_master(t, not_index)) < 0) {
        if (test_now_ms() > until) {
            fprintf(stderr, "test_sentinel_wait_master: no new master within %d ms\n", timeout_ms);
            return -1;
        }
        test_sleep_ms(50);
    }
    return m;
}

int test_sentinel_failover(test_sentinel *t, int timeout_ms) {
    int old = test_sentinel_master(t), s, m;
    int64_t until = test_now_ms() + timeout_ms;

    /* A sentinel refuses while an earlier failover is still under way
     * (-INPROG), and one it accepted can still end without a promotion
     * (no replica good enough yet): ask again until one happens. */
    while (test_now_ms() <= until) {
        int64_t wait_until = test_now_ms() + 5000;
        for (s = 0; s < t->nsentinels; s++) {
            if (t->sentinel[s].pid != 0) {
                freeReplyObject(
                    test_redis_cmd(&t->sentinel[s], "SENTINEL FAILOVER %s", TEST_SENTINEL_MASTER));
                break;
            }
        }
        while (test_now_ms() <= wait_until) {
            if ((m = test_sentinel_new_master(t, old)) >= 0)
                return m;
            test_sleep_ms(50);
        }
    }
    fprintf(stderr, "test_sentinel_failover: no failover within %d ms\n", timeout_ms);
    return -1;
}

int test_sentinel_is_replica(test_sentinel *t, int i) {
    char line[32], host_line[80];
    int m = t->nsentinels > 0 ? test_sentinel_master(t) : 0; /* at the start: data[0] */

    /* Of the master the sentinels name: a data node restarted from its
     * config comes back a replica of the first master, which may be a
     * replica itself by now. */
    if (m < 0 || m == i)
        return 0;
    snprintf(line, sizeof line, "master_port:%d\r", client_port(t, &t->data[m]));
    snprintf(host_line, sizeof host_line, "master_host:%s\r", test_redis_host(&t->data[m]));
    return role_is(&t->data[i], "slave") &&
           info_has(&t->data[i], "replication", "master_link_status:up") &&
           info_has(&t->data[i], "replication", line) &&
           info_has(&t->data[i], "replication", host_line);
}

int test_sentinel_wait_replica(test_sentinel *t, int i, int timeout_ms) {
    int64_t until = test_now_ms() + timeout_ms;

    while (!test_sentinel_is_replica(t, i)) {
        if (test_now_ms() > until) {
            fprintf(stderr, "test_sentinel_wait_replica: data[%d] not in sync within %d ms\n", i,
                    timeout_ms);
            return -1;
        }
        test_sleep_ms(50);
    }
    return 0;
}
