/* SPDX-License-Identifier: MIT */
/*
 * The route through Redis Sentinel (DESIGN 9.4): a one-server route
 * (route/single.c) whose node follows the master the sentinels name.
 *
 * Discovery, as Sentinel's client guidelines say: the sentinels are asked
 * in turn, SENTINEL get-master-addr-by-name NAME, on one command
 * connection (the "ask" connection, moved from sentinel to sentinel); the
 * first that answers moves to the front of the list, the node's
 * connections go to the address it gave, and the list is refreshed from
 * SENTINEL sentinels NAME. The node's command connection asks ROLE in its
 * handshake (leash__conn_cfg.require_master): no lock command goes to a
 * server that is not a master; a replica (ROLE, or -READONLY answering a
 * script) or a master that cannot be reached sends the route back to the
 * sentinels, and the sentinel that named it goes to the back of the list:
 * one that names a replica or a dead address (a liar, or one cut off with
 * the old master) is asked last, so every other sentinel is asked before
 * it again.
 *
 * Failovers are followed without polling: one subscriber connection (the
 * "watch" connection, on the front sentinel) listens to +promoted-slave
 * (at the promotion) and +switch-master (at the failover's end), and the
 * node follows the new address at once. Whenever that subscription is (re)made, the sentinels
 * are asked again: a switch made while nobody listened is not missed. A
 * sentinel that refuses the subscription (NOPERM: a Redis 7 ACL user
 * starts with resetchannels) refused our setup: one error line, and the
 * SUBSCRIBE goes again on the same connection after a backoff; no reset,
 * no discovery round (that was polling the sentinels). Meanwhile a
 * failover is followed when the master is lost. An
 * answer to a question asked before a switch was heard is not followed:
 * it may name the old master, still taking writes in a failover of a live
 * master until the sentinels reconfigure it.
 *
 * What the node had in flight is resent or failed as on any reconnect
 * (leash__conn_retarget), and its subscriptions are made again at the new
 * master, where every waiter tries once more (DESIGN 7).
 *
 * The discovery machine (step() is its one dispatch function):
 *
 *   state \ event  NEED         TIMER           ADDR              FAILED            LIST
 *   IDLE           ASK (first)  -               -                 -                 -
 *   ASK            -            question ->     -                 -                 -
 *                               ASKING
 *   ASKING         again        -               front, follow,    next sentinel:    -
 *                                               list -> LISTING   ASK; none left:
 *                                                                 PAUSED
 *   LISTING        again        -               -                 again ? ASK :     merge; again ?
 *                                                                 IDLE              ASK : IDLE
 *   PAUSED         -            ASK (first)     -                 -                 -
 *
 * ASK waits for the timer at once rather than asking inside the event
 * that led there: that event is often a connection's own callback.
 * "first" is the front of the list, once a sentinel whose master failed
 * since the last round went to its back (blame()).
 */
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "base/clock.h"
#include "route/node.h"
#include "route/route.h"
#include "wire/resp.h"

enum {
    S_IDLE,
    S_ASK,
    S_ASKING,
    S_LISTING,
    S_PAUSED
};
enum {
    E_NEED,
    E_TIMER,
    E_ADDR,
    E_FAILED,
    E_LIST
};
static const char *const state_names[] = {"IDLE", "ASK", "ASKING", "LISTING", "PAUSED"};
static const char *const event_names[] = {"NEED", "TIMER", "ADDR", "FAILED", "LIST"};

/* Where a connection goes: its own copy of the connection settings, with
 * an address that changes. Two buffers in turn: the one a socket may
 * still read is never the one rewritten (leash__conn_retarget). */
typedef struct target {
    leash__conn_cfg cfg;
    char host[2][LEASH_NODE_MAX + 1];
    int slot;
} target;

typedef struct sentinel_addr {
    char host[LEASH_NODE_MAX + 1];
    int port;
} sentinel_addr;

typedef struct sentinel {
    leash__route base;
    leash__route *inner; /* the single route to the master */
    leash__route_cfg inner_cfg;
    leash__node *node; /* the inner route's */
    target master, asked, watched;
    leash__conn ask, watch;
    leash__timer timer;
    leash__timer resub;     /* the next SUBSCRIBE after a refusal */
    int64_t resub_ms;       /* its backoff: 0, or the last wait */
    unsigned watch_refused; /* refusals since the last subscription */
    const char *name;       /* the master's name */
    sentinel_addr *list;
    int nlist;
    int cur; /* the sentinel asked */
    int state;
    int again; /* asked for a new round while one runs */
    /* 0, or how a sentinel of this round refused us (LEASH_EAUTH: the
     * credentials, LEASH_ETLS: the TLS handshake), the last such: what
     * waits on the master fails with it once none named the master. */
    int refused;
    int retargeting;  /* the node's connections drop on our own decision */
    int64_t pause_ms; /* before the next round after a failed one */
    leash__cmd *q;    /* the question out on the ask connection */
    /* Switches heard on the watch connection, and their count when the
     * question out was asked: an answer made before a switch and read
     * after it names the old master, which a failover of a live master
     * leaves taking writes until it is reconfigured. */
    unsigned switches, switches_asked;
    /* The sentinel whose answer the node follows ("" when a switch
     * message named the master), and one whose master failed, to go
     * behind the others when the next round starts (it may be the one
     * asked in this round). */
    sentinel_addr named, blamed;
} sentinel;

static const leash__logger *log_of(const sentinel *s) {
    return &s->base.env->log;
}

static int target_is(const target *t, const char *host, int port) {
    return t->cfg.host != NULL && t->cfg.port == port && strcmp(t->cfg.host, host) == 0;
}

/* Points t at host:port; 1 when that changed something. */
static int target_set(target *t, const char *host, size_t len, int port) {
    char *buf;

    if (len > LEASH_NODE_MAX)
        len = LEASH_NODE_MAX;
    buf = t->host[t->slot ^ 1];
    memcpy(buf, host, len);
    buf[len] = '\0';
    if (target_is(t, buf, port))
        return 0;
    t->slot ^= 1;
    t->cfg.host = buf;
    t->cfg.port = port;
    return 1;
}

static void step(sentinel *s, int ev, const char *host, size_t len, int port, const redisReply *r);

/* ---- the master ---- */

/* The node goes to host:port (its subscriptions with it). */
static void follow(sentinel *s, const char *host, size_t len, int port) {
    if (!target_set(&s->master, host, len, port))
        return;
    leash__log(log_of(s), LEASH_LOG_WARN, "sentinel: master %s is at %s:%d", s->name,
               s->master.cfg.host, port);
    s->retargeting = 1;
    leash__conn_retarget(&s->node->cmd);
    /* LEASH_PUBSUB_OFF: the subscriber connection is never opened. */
    if (!s->base.env->freeing && s->node->sub.cfg->pubsub != LEASH_PUBSUB_OFF)
        leash__conn_retarget(&s->node->sub);
    s->retargeting = 0;
}

/* The master's command connection went down: unreachable, a replica
 * (ROLE, -READONLY), or refused our credentials. Ask again; the sentinel
 * that named it is asked last (blame()). */
static void on_master_down(leash__conn *conn) {
    sentinel *s = conn->owner;

    if (s->retargeting)
        return;
    if (conn->not_master)
        leash__log(log_of(s), LEASH_LOG_WARN,
                   "sentinel: %s:%d is not the master of %s any more: asking the sentinels",
                   s->master.cfg.host, s->master.cfg.port, s->name);
    if (s->named.host[0] != '\0') {
        s->blamed = s->named;
        s->named.host[0] = '\0';
    }
    step(s, E_NEED, NULL, 0, 0, NULL);
}

/* ---- asking ---- */

static void on_answer(void *arg, redisReply *r, int status, const leash__reply_info *info);

/* Sends cmd (argv) on the ask connection to sentinel s->cur. */
static int ask(sentinel *s, int argc, const char *const *argv) {
    size_t lens[3], len;
    char *buf;
    int i;
    const leash__conn_cfg *cfg = &s->asked.cfg;

    for (i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    buf = leash__resp_format(&len, argc, argv, lens);
    if (buf == NULL)
        return -1;
    s->q = leash__cmd_new(buf, len, NULL, 0,
                          leash__now_ms() + cfg->connect_timeout_ms + cfg->command_timeout_ms,
                          on_answer, s);
    if (s->q == NULL)
        return -1;
    leash__conn_send(&s->ask, s->q);
    return 0;
}

static void ask_master(sentinel *s) {
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", s->name};
    const sentinel_addr *a = &s->list[s->cur];

    if (target_set(&s->asked, a->host, strlen(a->host), a->port))
        leash__conn_retarget(&s->ask);
    if (s->base.env->freeing)
        return;
    s->switches_asked = s->switches;
    if (ask(s, 3, argv) != 0)
        step(s, E_FAILED, NULL, 0, 0, NULL);
}

static const char *sentinel_label(const sentinel *s) {
    return leash__conn_role_name(&s->ask);
}

static void on_answer(void *arg, redisReply *r, int status, const leash__reply_info *info) {
    sentinel *s = arg;
    (void)info;

    s->q = NULL;
    if (status != LEASH_OK) {
        if (status == LEASH_EAUTH || status == LEASH_ETLS)
            s->refused = status;
        leash__log(log_of(s), LEASH_LOG_WARN, "sentinel: %s: no answer (%s)", sentinel_label(s),
                   leash_strerror(status));
        step(s, E_FAILED, NULL, 0, 0, NULL);
        return;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        if (strncmp(r->str, "NOAUTH", 6) == 0 || strncmp(r->str, "WRONGPASS", 9) == 0 ||
            strncmp(r->str, "NOPERM", 6) == 0)
            s->refused = LEASH_EAUTH;
        leash__log(log_of(s), LEASH_LOG_ERROR, "sentinel: %s refused: %s", sentinel_label(s),
                   r->str);
        step(s, E_FAILED, NULL, 0, 0, NULL);
        return;
    }
    if (s->state == S_LISTING) {
        step(s, E_LIST, NULL, 0, 0, r);
        return;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING) {
        long port = strtol(r->element[1]->str, NULL, 10);
        if (port >= 1 && port <= 65535 && r->element[0]->len > 0) {
            step(s, E_ADDR, r->element[0]->str, r->element[0]->len, (int)port, NULL);
            return;
        }
    }
    leash__log(log_of(s), LEASH_LOG_WARN, "sentinel: %s does not know a master named %s",
               sentinel_label(s), s->name);
    step(s, E_FAILED, NULL, 0, 0, NULL);
}

/* The ask connection dropped (or could not connect) with a question out. */
static void on_ask_down(leash__conn *conn) {
    sentinel *s = conn->owner;

    if (s->q == NULL)
        return;
    leash__cmd_cancel(s->q);
    s->q = NULL;
    step(s, E_FAILED, NULL, 0, 0, NULL);
}

/* The one who answered goes first (the guidelines' order for next time). */
static void to_front(sentinel *s) {
    sentinel_addr a = s->list[s->cur];

    memmove(&s->list[1], &s->list[0], (size_t)s->cur * sizeof(s->list[0]));
    s->list[0] = a;
    s->cur = 0;
}

/* SENTINEL sentinels NAME: an array of flat [key, value, ...] arrays. */
static void merge_list(sentinel *s, const redisReply *r) {
    size_t i, j;

    if (r->type != REDIS_REPLY_ARRAY)
        return;
    for (i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        const char *ip = NULL;
        long port = 0;
        int k, known = 0;

        if (e->type != REDIS_REPLY_ARRAY)
            continue;
        for (j = 0; j + 1 < e->elements; j += 2) {
            if (e->element[j]->type != REDIS_REPLY_STRING ||
                e->element[j + 1]->type != REDIS_REPLY_STRING)
                continue;
            if (strcmp(e->element[j]->str, "ip") == 0)
                ip = e->element[j + 1]->str;
            else if (strcmp(e->element[j]->str, "port") == 0)
                port = strtol(e->element[j + 1]->str, NULL, 10);
        }
        if (ip == NULL || ip[0] == '\0' || strlen(ip) > LEASH_NODE_MAX || port < 1 || port > 65535)
            continue;
        for (k = 0; k < s->nlist; k++)
            known |= s->list[k].port == port && strcmp(s->list[k].host, ip) == 0;
        if (known || s->nlist == LEASH_NODES_MAX)
            continue;
        strcpy(s->list[s->nlist].host, ip);
        s->list[s->nlist].port = (int)port;
        s->nlist++;
        leash__log(log_of(s), LEASH_LOG_INFO, "sentinel: %s:%ld watches %s too", ip, port, s->name);
    }
}

/* ---- the subscription: +switch-master, +promoted-slave ---- */

/* +switch-master comes at the failover's end, once the other replicas
 * were re-pointed (a second or more after the promotion, while a live old
 * master still takes writes); +promoted-slave comes at the promotion: the
 * route follows the first it hears. */
static const char switch_channel[] = "+switch-master";
static const char promoted_channel[] = "+promoted-slave";

/* After a refused SUBSCRIBE, the longest wait before the next (doubling
 * from reconnect_max_ms). */
#define RESUBSCRIBE_MAX_MS 60000

static void subscribe(leash__conn *conn) {
    const char *argv[3] = {"SUBSCRIBE", switch_channel, promoted_channel};
    size_t lens[3] = {9, sizeof(switch_channel) - 1, sizeof(promoted_channel) - 1}, len;
    char *buf = leash__resp_format(&len, 3, argv, lens);

    if (buf == NULL || leash__conn_send_raw(conn, buf, len, 2) != 0)
        leash__conn_reset(conn);
    free(buf);
}

static void on_watch_ready(leash__conn *conn) {
    sentinel *s = conn->owner;

    leash__timer_stop(&s->resub);
    subscribe(conn);
}

static void on_resub_timer(void *arg) {
    sentinel *s = arg;

    if (leash__conn_ready(&s->watch))
        subscribe(&s->watch);
}

/* The sentinel refused the subscription: a setup error (the sentinel
 * user's channels, docs/sentinel.md "Redis Sentinel"), said once until a
 * subscription succeeds. It refuses again if asked at once: the same
 * connection asks again after a backoff. */
static void watch_refused(sentinel *s, leash__conn *conn, const char *err) {
    int64_t max = s->base.cfg->conn->reconnect_max_ms;

    leash__log(log_of(s), s->watch_refused++ == 0 ? LEASH_LOG_ERROR : LEASH_LOG_DEBUG,
               "sentinel: %s refused SUBSCRIBE %s %s: %s: failovers are followed only when the "
               "master is lost%s",
               leash__conn_role_name(conn), switch_channel, promoted_channel, err,
               strncmp(err, "NOPERM", 6) == 0
                   ? " (the sentinel user needs &+switch-master &+promoted-slave)"
                   : "");
    /* One error answers the whole command: nothing more is owed. */
    leash__conn_progress(conn, 2);
    s->resub_ms = s->resub_ms == 0 ? max : s->resub_ms * 2;
    if (s->resub_ms > RESUBSCRIBE_MAX_MS)
        s->resub_ms = RESUBSCRIBE_MAX_MS > max ? RESUBSCRIBE_MAX_MS : max;
    leash__timer_at(&s->resub, leash__now_ms() + s->resub_ms, 0);
}

/* A message's space-separated fields: "name oldip oldport newip newport"
 * (+switch-master), "slave ip:port ip port @ name masterip masterport"
 * (+promoted-slave). The master's name at field name_at, the new master's
 * address at ip_at and ip_at + 1. */
static void on_event(sentinel *s, const char *msg, size_t len, int name_at, int ip_at) {
    const char *f[8];
    size_t flen[8], nlen = strlen(s->name);
    const char *p = msg, *end = msg + len;
    int n = 0;
    char port[8];

    while (p < end && n < 8) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        f[n] = p;
        flen[n] = sp != NULL ? (size_t)(sp - p) : (size_t)(end - p);
        n++;
        p = sp != NULL ? sp + 1 : end;
    }
    if (n <= name_at || n <= ip_at + 1 || flen[name_at] != nlen ||
        memcmp(f[name_at], s->name, nlen) != 0 || flen[ip_at + 1] == 0 ||
        flen[ip_at + 1] >= sizeof(port))
        return;
    memcpy(port, f[ip_at + 1], flen[ip_at + 1]);
    port[flen[ip_at + 1]] = '\0';
    leash__log(log_of(s), LEASH_LOG_WARN, "sentinel: %s %.*s",
               name_at == 0 ? switch_channel : promoted_channel, (int)len, msg);
    if (atoi(port) >= 1 && atoi(port) <= 65535) {
        s->switches++;
        s->named.host[0] = '\0';
        follow(s, f[ip_at], flen[ip_at], atoi(port));
    }
}

static void on_watch_frame(leash__conn *conn, redisReply *r) {
    sentinel *s = conn->owner;
    const redisReply *chan;

    if (r->type == REDIS_REPLY_ERROR) {
        watch_refused(s, conn, r->str);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return;
    chan = r->element[1];
    if (strcmp(r->element[0]->str, "subscribe") == 0) {
        leash__conn_progress(conn, 1);
        /* From here on no switch is missed: ask about any before it. */
        if (r->element[2]->type == REDIS_REPLY_INTEGER && r->element[2]->integer == 2) {
            if (s->watch_refused)
                leash__log(log_of(s), LEASH_LOG_INFO, "sentinel: %s: SUBSCRIBE %s %s accepted now",
                           leash__conn_role_name(conn), switch_channel, promoted_channel);
            s->watch_refused = 0;
            s->resub_ms = 0;
            step(s, E_NEED, NULL, 0, 0, NULL);
        }
    } else if (strcmp(r->element[0]->str, "message") == 0 &&
               r->element[2]->type == REDIS_REPLY_STRING) {
        leash__conn_progress(conn, 0);
        if (strcmp(chan->str, switch_channel) == 0)
            on_event(s, r->element[2]->str, r->element[2]->len, 0, 3);
        else if (strcmp(chan->str, promoted_channel) == 0)
            on_event(s, r->element[2]->str, r->element[2]->len, 5, 2);
    }
}

static void on_watch_down(leash__conn *conn) {
    sentinel *s = conn->owner;

    /* Deaf until it is back, maybe on another sentinel (which subscribes
     * at once). */
    leash__timer_stop(&s->resub);
    step(s, E_NEED, NULL, 0, 0, NULL);
}

/* ---- the discovery machine ---- */

/* Every change of state of the discovery machine, and the event of step()
 * that made it: at debug level a line, as the locks' (prim/holding.c). */
static void set_state(sentinel *s, int to, int ev) {
    int64_t now = leash__now_ms();

    if (to != s->state && leash__log_on(log_of(s), LEASH_LOG_DEBUG))
        leash__log(log_of(s), LEASH_LOG_DEBUG, "STATE: %s => %s (%s) sentinel route of master %s",
                   state_names[s->state], state_names[to], event_names[ev], s->name);
    s->state = to;
    if (to == S_ASK)
        leash__timer_at(&s->timer, now, 0);
    else if (to == S_PAUSED)
        leash__timer_at(&s->timer, now + s->pause_ms, 0);
}

/* A sentinel that named a master which failed (not a master, or not
 * reached) goes behind the others: the next rounds ask them first. One
 * that stays wrong (a liar, or one cut off with a live old master) would
 * otherwise answer first for ever and the others would never be asked. */
static void blame(sentinel *s) {
    sentinel_addr a = s->blamed;
    int i;

    s->blamed.host[0] = '\0';
    for (i = 0; i < s->nlist; i++)
        if (s->list[i].port == a.port && strcmp(s->list[i].host, a.host) == 0)
            break;
    if (i >= s->nlist - 1)
        return;
    memmove(&s->list[i], &s->list[i + 1], (size_t)(s->nlist - 1 - i) * sizeof(s->list[0]));
    s->list[s->nlist - 1] = a;
    leash__log(log_of(s), LEASH_LOG_INFO,
               "sentinel: %s:%d named a master of %s that failed: asked after the others now",
               a.host, a.port, s->name);
}

/* The next round: ASK the first sentinel. */
static void new_round(sentinel *s, int ev) {
    if (s->blamed.host[0] != '\0')
        blame(s);
    s->cur = 0;
    s->again = 0;
    s->refused = 0;
    set_state(s, S_ASK, ev);
}

static void step(sentinel *s, int ev, const char *host, size_t len, int port, const redisReply *r) {
    switch (s->state) {
    case S_IDLE:
        if (ev == E_NEED)
            new_round(s, ev);
        break;
    case S_ASK:
        if (ev == E_TIMER) {
            set_state(s, S_ASKING, ev);
            ask_master(s);
        }
        break;
    case S_ASKING:
        if (ev == E_NEED) {
            s->again = 1;
        } else if (ev == E_ADDR) {
            const char *argv[3] = {"SENTINEL", "sentinels", s->name};
            s->pause_ms = s->base.cfg->conn->reconnect_min_ms;
            to_front(s);
            if (target_set(&s->watched, s->list[0].host, strlen(s->list[0].host), s->list[0].port))
                leash__conn_retarget(&s->watch);
            if (s->base.env->freeing)
                return;
            if (s->switches == s->switches_asked) {
                s->named = s->list[0];
                follow(s, host, len, port);
            } else
                leash__log(log_of(s), LEASH_LOG_WARN,
                           "sentinel: %s answered %.*s:%d, asked before the switch to %s:%d: "
                           "ignored",
                           sentinel_label(s), (int)len, host, port, s->master.cfg.host,
                           s->master.cfg.port);
            if (s->base.env->freeing)
                return;
            set_state(s, S_LISTING, ev);
            if (ask(s, 3, argv) != 0)
                step(s, E_FAILED, NULL, 0, 0, NULL);
        } else if (ev == E_FAILED) {
            if (++s->cur < s->nlist) {
                set_state(s, S_ASK, ev);
                break;
            }
            leash__log(log_of(s), LEASH_LOG_ERROR,
                       "sentinel: none of %d sentinels named the master %s%s", s->nlist, s->name,
                       s->refused == LEASH_EAUTH
                           ? " (credentials refused: sentinel_username, sentinel_password)"
                       : s->refused == LEASH_ETLS ? " (TLS refused: tls_ca_file, tls_server_name)"
                                                  : "");
            if (s->refused)
                leash__conn_fail_unsent(&s->node->cmd, s->refused);
            if (s->base.env->freeing)
                return;
            s->pause_ms *= 2;
            if (s->pause_ms > s->base.cfg->conn->reconnect_max_ms)
                s->pause_ms = s->base.cfg->conn->reconnect_max_ms;
            set_state(s, S_PAUSED, ev);
        }
        break;
    case S_LISTING:
        if (ev == E_NEED) {
            s->again = 1;
        } else if (ev == E_LIST || ev == E_FAILED) {
            if (ev == E_LIST)
                merge_list(s, r);
            if (s->again)
                new_round(s, ev);
            else
                set_state(s, S_IDLE, ev);
        }
        break;
    case S_PAUSED:
        if (ev == E_TIMER)
            new_round(s, ev);
        break;
    }
}

static void on_timer(void *arg) {
    step(arg, E_TIMER, NULL, 0, 0, NULL);
}

/* ---- the route: the single route's, plus the sentinels ---- */

static leash__req *sentinel_send(leash__route *r, const leash__send *snd) {
    leash__route *in = ((sentinel *)r)->inner;
    return in->ops->send(in, snd);
}

static int sentinel_cancel(leash__req *req) {
    return leash__req_cancel(req);
}

static void sentinel_orphan(leash__req *req) {
    leash__req_orphan(req);
}

static unsigned sentinel_batch_key(const leash__route *r, unsigned slot) {
    return leash__route_batch_key(((const sentinel *)r)->inner, slot);
}

static int sentinel_want(leash__route *r, const char *chan, size_t len, unsigned slot, int on) {
    return leash__route_want(((sentinel *)r)->inner, chan, len, slot, on);
}

static int sentinel_connected(const leash__route *r) {
    return leash__route_connected(((const sentinel *)r)->inner);
}

static leash__node *sentinel_node(leash__route *r, unsigned slot) {
    (void)slot;
    return ((sentinel *)r)->node;
}

/* The route's own timers (its connections' and the discovery's). */
static void clear_timers(sentinel *s) {
    leash__timer_clear(&s->timer);
    leash__timer_clear(&s->resub);
    leash__timer_clear(&s->ask.timer);
    leash__timer_clear(&s->watch.timer);
}

static void sentinel_unprepare(leash__route *r) {
    sentinel *s = (sentinel *)r;

    s->inner->ops->unprepare(s->inner);
    clear_timers(s);
}

static int sentinel_prepare(leash__route *r) {
    sentinel *s = (sentinel *)r;

    if (s->inner->ops->prepare(s->inner) != LEASH_OK || leash__timer_create(&s->timer) != 0 ||
        leash__timer_create(&s->resub) != 0 || leash__conn_prepare(&s->ask) != LEASH_OK ||
        leash__conn_prepare(&s->watch) != LEASH_OK)
        return LEASH_ENOMEM;
    return LEASH_OK;
}

static void sentinel_start(leash__route *r) {
    sentinel *s = (sentinel *)r;

    /* No address yet: the node's connections wait for the first answer. */
    s->inner->ops->start(s->inner);
    step(s, E_NEED, NULL, 0, 0, NULL);
}

static void sentinel_teardown(leash__route *r) {
    sentinel *s = (sentinel *)r;

    leash__timer_clear(&s->timer);
    leash__timer_clear(&s->resub);
    if (s->q != NULL) {
        leash__cmd_cancel(s->q);
        s->q = NULL;
    }
    leash__conn_teardown(&s->ask);
    leash__conn_teardown(&s->watch);
    s->inner->ops->teardown(s->inner);
}

static void sentinel_destroy(leash__route *r) {
    sentinel *s = (sentinel *)r;

    s->inner->ops->destroy(s->inner);
    clear_timers(s);
    free(s->list);
    free(s);
}

static const leash__route_ops sentinel_ops = {
    .send = sentinel_send,
    .cancel = sentinel_cancel,
    .orphan = sentinel_orphan,
    .batch_key = sentinel_batch_key,
    .want = sentinel_want,
    .connected = sentinel_connected,
    .node = sentinel_node,
    .prepare = sentinel_prepare,
    .unprepare = sentinel_unprepare,
    .start = sentinel_start,
    .teardown = sentinel_teardown,
    .destroy = sentinel_destroy,
};

/* The inner route's channel events are ours to pass on. */
static void fwd_confirmed(void *owner, const char *chan, size_t len) {
    leash__route *r = owner;
    r->hooks->confirmed(r->owner, chan, len);
}

static void fwd_gone(void *owner, const char *chan, size_t len) {
    leash__route *r = owner;
    r->hooks->gone(r->owner, chan, len);
}

static void fwd_message(void *owner, const char *chan, size_t len, const char *msg,
                        size_t msg_len) {
    leash__route *r = owner;
    r->hooks->message(r->owner, chan, len, msg, msg_len);
}

static void fwd_polling(void *owner) {
    leash__route_polls(owner);
}

static const leash__sub_hooks fwd_hooks = {fwd_confirmed, fwd_gone, fwd_message, fwd_polling};

leash__route *leash__route_sentinel_new(leash__env *env, const leash__dialect *d,
                                        const leash__route_cfg *cfg) {
    sentinel *s = calloc(1, sizeof(*s));
    int i;

    if (s == NULL)
        return NULL;
    s->list = calloc((size_t)LEASH_NODES_MAX, sizeof(*s->list));
    if (s->list == NULL) {
        free(s);
        return NULL;
    }
    s->base.ops = &sentinel_ops;
    s->base.env = env;
    s->base.dialect = d;
    s->base.cfg = cfg;
    s->base.retry_unreplicated = 1;
    s->base.orders_queues = 1;
    leash__route_init_sharded(&s->base, 0);
    s->name = cfg->sentinel_master;
    for (i = 0; i < cfg->nseeds; i++) {
        size_t len = strlen(cfg->seeds[i].host);
        memcpy(s->list[i].host, cfg->seeds[i].host,
               len + 1 < sizeof(s->list[i].host) ? len + 1 : 1);
        s->list[i].port = cfg->seeds[i].port;
    }
    s->nlist = cfg->nseeds;
    s->pause_ms = cfg->conn->reconnect_min_ms;

    /* The data nodes: the client's settings, at the master's address,
     * which must say it is a master. */
    s->master.cfg = *cfg->conn;
    s->master.cfg.host = NULL;
    s->master.cfg.unix_path = NULL;
    s->master.cfg.require_master = 1;
    /* The sentinels: their own credentials, nothing else to set up. */
    s->asked.cfg = *cfg->conn;
    s->asked.cfg.host = NULL;
    s->asked.cfg.unix_path = NULL;
    s->asked.cfg.username = cfg->sentinel_username;
    s->asked.cfg.password = cfg->sentinel_password;
    s->asked.cfg.db = 0;
    s->asked.cfg.scripts = NULL;
    s->asked.cfg.nscripts = 0;
    s->asked.cfg.sentinel = 1;
    s->watched.cfg = s->asked.cfg;

    s->inner_cfg = *cfg;
    s->inner_cfg.conn = &s->master.cfg;
    s->inner = leash__route_single_new(env, d, &s->inner_cfg);
    if (s->inner == NULL) {
        free(s->list);
        free(s);
        return NULL;
    }
    leash__route_set_hooks(s->inner, &fwd_hooks, &s->base);
    s->node = s->inner->ops->node(s->inner, 0);
    /* The master's subscriptions go by this route's pub/sub, which its
     * locks' messages read: one state for both. */
    s->node->sharded = &s->base.sharded;
    s->node->cmd.owner = s;
    s->node->cmd.on_down = on_master_down;

    leash__conn_init(&s->ask, env, &s->asked.cfg, LEASH__CONN_CMD);
    s->ask.owner = s;
    s->ask.on_down = on_ask_down;
    leash__conn_init(&s->watch, env, &s->watched.cfg, LEASH__CONN_SUB);
    s->watch.owner = s;
    s->watch.on_ready = on_watch_ready;
    s->watch.on_down = on_watch_down;
    s->watch.on_frame = on_watch_frame;
    leash__timer_init(&s->timer, env, on_timer, s);
    leash__timer_init(&s->resub, env, on_resub_timer, s);
    return &s->base;
}
