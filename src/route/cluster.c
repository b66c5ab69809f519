/* SPDX-License-Identifier: MIT */
/*
 * The route to a Redis Cluster: a command goes to the master of its key's
 * hash slot, as the slot map says.
 *
 * The map comes from CLUSTER SLOTS, asked of a node that answers (a seed
 * at first). It is asked again after a MOVED, when a node's connection
 * drops, when a subscription is refused or dropped by its node, and on a
 * timer while some slot has no known master; never more often than every
 * MAP_MIN_INTERVAL_MS. A map that moved slots moves the work waiting for
 * them: unsent commands and the subscriptions of their channels go to the
 * new owner.
 *
 * Redirects. MOVED: the slot's entry is set to the node named at once, and
 * the command goes there. ASK (a slot being migrated): ASKING and the
 * command go to the node named, once per redirect. After MAX_REDIRECTS
 * in a row a command waits for the next map; never past its deadline. TRYAGAIN,
 * CLUSTERDOWN and MASTERDOWN are the connection's to wait out (transient).
 *
 * Nodes. A node's connections are made when it first has work (a command
 * or a subscription); every node keeps the scripts loaded by its own
 * handshake. A node the map no longer names keeps its connections while
 * it has work, and its requests move on with the next map.
 *
 * Channels are subscribed at the master of their slot (a lock's channel
 * shares its key's slot), with SSUBSCRIBE when the client uses sharded
 * pub/sub: a release then costs one message on one shard. When the slot
 * moves, the old owner drops the subscription (sunsubscribe) or refuses it
 * (MOVED); the route takes it to the new owner, and the wait queue makes
 * every waiter of the channel try once more when it is confirmed there.
 *
 * Polling is per master (docs/how-it-works.md "Waiting without pub/sub"):
 * a lock's release publishes only at its slot's master, so a master that
 * refused a subscription makes the waiters of its own slots poll, and
 * no others (cluster_polls). When a slot changes hands (a map, a MOVED,
 * a failover's new master) or a master refuses, the wait queues are told
 * from the timer, outside the map's walks (repoll), when that changed
 * whether some slot's waiters poll (polled): a channel whose slot
 * went to a master that refused polls from then on, and one whose slot
 * went to a master that subscribes is subscribed there again.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "base/clock.h"
#include "base/list.h"
#include "base/slot.h"
#include "base/strmap.h"
#include "base/timer.h"
#include "route/node.h"
#include "route/route.h"
#include "wire/resp.h"

/* The fewest ms between two asks for the map. */
#define MAP_MIN_INTERVAL_MS 100
/* How soon to ask again while a part of the map is unknown or no node
 * answered. */
#define MAP_RETRY_MS 250
/* Redirects one command follows in a row before it waits for a map. */
#define MAX_REDIRECTS 16
/* Nodes one client keeps, at most (seeds and the ones maps and redirects
 * named): a bound on what a confused or hostile server can make it open. */
#define MAX_NODES 1024
/* Longest host name taken from a map or a redirect. */
#define HOST_MAX 255

typedef struct cnode {
    leash__node node;
    leash__conn_cfg cfg; /* the client's, with this node's address */
    struct cluster *cl;
    char *host; /* owned; NULL for a unix socket seed */
    char *unix_path;
    int port;
    int prepared; /* its connections have their timers */
    int started;  /* its connections were started */
    unsigned index;
    leash__list reqs; /* requests sent to it (queued or on the wire) */
} cnode;

typedef struct cluster {
    leash__route base;
    cnode **nodes;
    unsigned nnodes, cap;
    uint16_t owner[LEASH__SLOTS]; /* node index + 1, 0 = not known */
    int map_known;                /* a map came at least once */
    int asking_map;               /* CLUSTER SLOTS is on the wire */
    unsigned next_seed;           /* where to ask when no node is ready */
    int refused;                  /* the last map source refused us: LEASH_EAUTH, LEASH_ETLS */
    int64_t last_ask;
    int prepared;
    /* A master refused a subscription (some slots' waiters poll); polled:
     * one bit per slot, whether its waiters poll as the wait queues were
     * last told; repoll: they are to be told that it changed for some
     * slots (from the timer, at once). */
    int any_polling;
    int repoll;
    uint8_t polled[LEASH__SLOTS / 8];
    leash__timer timer;  /* the next ask for the map; parked requests' deadlines */
    leash__list parked;  /* requests whose slot has no known master */
    leash__strmap chans; /* channel -> cchan */
} cluster;

typedef struct creq {
    leash__req base;
    leash__list link; /* in its node's reqs, or parked */
    cnode *at;        /* NULL while parked */
    leash__cmd *cmd;  /* ours between sends (LEASH__CMD_KEEP) */
    unsigned slot;
    unsigned redirects;
    int asking; /* sent with ASKING to where an ASK pointed: not the slot's master */
    const leash__opdef *op;
    const char *what;
    leash__done_fn *done; /* NULL: nobody waits */
    void *arg;
    size_t n;
    leash__answer answers[]; /* n of them */
} creq;

typedef struct cchan {
    leash__strmap_entry e; /* key: the channel, stored after the struct */
    unsigned slot;
    cnode *at; /* where it is wanted now; NULL until the slot's master is known */
} cchan;

static void want_map(cluster *cl);
static void place(cluster *cl, creq *q);
static void send_to(cluster *cl, creq *q, cnode *at, int asking);

static const leash__logger *log_of(const cluster *cl) {
    return &cl->base.env->log;
}

static cnode *owner_of(const cluster *cl, unsigned slot) {
    unsigned i = cl->owner[slot % LEASH__SLOTS];
    return i == 0 ? NULL : cl->nodes[i - 1];
}

static cnode *cnode_of(leash__node *n) {
    return LEASH__CONTAINER(n, cnode, node);
}

/* ---- nodes ---- */

static void on_cmd_down(leash__conn *conn);
static void on_cmd_ready(leash__conn *conn);

static const leash__node_hooks node_hooks;

static cnode *find_node(const cluster *cl, const char *host, int port) {
    unsigned i;

    for (i = 0; i < cl->nnodes; i++) {
        const cnode *c = cl->nodes[i];
        if (c->host != NULL && c->port == port && strcmp(c->host, host) == 0)
            return cl->nodes[i];
    }
    return NULL;
}

/* A node at host:port (or unix_path), known or new. NULL without memory or
 * past MAX_NODES. */
static cnode *node_at(cluster *cl, const char *host, int port, const char *unix_path) {
    cnode *c;

    if (host != NULL && (c = find_node(cl, host, port)) != NULL)
        return c;
    if (cl->nnodes == MAX_NODES) {
        leash__log(log_of(cl), LEASH_LOG_ERROR, "cluster: more than %d nodes named: ignored",
                   MAX_NODES);
        return NULL;
    }
    if (cl->nnodes == cl->cap) {
        unsigned cap = cl->cap ? cl->cap * 2 : 8;
        cnode **grown = realloc(cl->nodes, cap * sizeof(*grown));
        if (grown == NULL)
            return NULL;
        cl->nodes = grown;
        cl->cap = cap;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    if ((host != NULL && (c->host = strdup(host)) == NULL) ||
        (unix_path != NULL && (c->unix_path = strdup(unix_path)) == NULL)) {
        free(c->host);
        free(c);
        return NULL;
    }
    c->cl = cl;
    c->port = port;
    c->cfg = *cl->base.cfg->conn;
    c->cfg.host = c->host;
    c->cfg.port = port;
    c->cfg.unix_path = c->unix_path;
    c->cfg.db = 0;
    c->index = cl->nnodes;
    leash__list_init(&c->reqs);
    leash__node_init(&c->node, cl->base.env, &c->cfg, &cl->base.sharded, &node_hooks, cl);
    c->node.cmd.on_down = on_cmd_down;
    c->node.cmd.on_ready = on_cmd_ready;
    cl->nodes[cl->nnodes++] = c;
    return c;
}

/* Makes the node's connections go, the first time it has work. 0, or -1
 * without memory. */
static int start_node(cluster *cl, cnode *c) {
    if (c->started)
        return 0;
    if (!cl->prepared)
        return 0; /* not attached yet: the start starts it */
    if (!c->prepared) {
        if (leash__node_prepare(&c->node) != LEASH_OK) {
            leash__node_unprepare(&c->node);
            return -1;
        }
        c->prepared = 1;
    }
    c->started = 1;
    leash__node_start(&c->node);
    return 0;
}

static void on_cmd_down(leash__conn *conn) {
    cnode *c = cnode_of(conn->owner);

    /* A master that went away may have a promoted replica by now. */
    want_map(c->cl);
}

/* The node's version is known before it answers any lock's command: a
 * cluster of Redis 6 has no sharded pub/sub. */
static void on_cmd_ready(leash__conn *conn) {
    leash__route_server_ready(&cnode_of(conn->owner)->cl->base, conn);
}

/* ---- the map ---- */

static void arm(cluster *cl);

/* "host:port" of a MOVED or ASK into host (HOST_MAX + 1 bytes) and port;
 * an empty host means the node that answered. 0, or -1. */
static int parse_endpoint(const char *s, size_t len, const cnode *from, char *host, int *port) {
    const char *colon = NULL;
    size_t i, hl;
    long p = 0;

    for (i = 0; i < len; i++)
        if (s[i] == ':')
            colon = s + i;
    if (colon == NULL)
        return -1;
    hl = (size_t)(colon - s);
    for (i = (size_t)(colon - s) + 1; i < len; i++) {
        if (s[i] < '0' || s[i] > '9' || p > 65535)
            return -1;
        p = p * 10 + (s[i] - '0');
    }
    if (p < 1 || p > 65535 || hl > HOST_MAX)
        return -1;
    if (hl == 0) {
        if (from->host == NULL)
            return -1;
        snprintf(host, HOST_MAX + 1, "%s", from->host);
    } else {
        memcpy(host, s, hl);
        host[hl] = '\0';
    }
    *port = (int)p;
    return 0;
}

static int cluster_polls(const leash__route *r, unsigned slot);

/* Slots first..last may have changed hands, or their master refused: once
 * a master refused, the waiters of such a slot may poll, or subscribe,
 * from now on. The wait queues are told only when that changed for one
 * of them (a map that moves slots between masters alike, or that comes
 * again unchanged, tells nobody), and from the timer (a walk over them
 * may send attempts, which must not run inside the walks over the map's
 * work). */
static void slots_moved(cluster *cl, unsigned first, unsigned last) {
    unsigned s;
    int changed = 0;

    if (!cl->any_polling)
        return;
    for (s = first; s <= last; s++) {
        uint8_t bit = (uint8_t)(1u << (s % 8));
        int now = cluster_polls(&cl->base, s);
        if (now == !!(cl->polled[s / 8] & bit))
            continue;
        cl->polled[s / 8] ^= bit;
        changed = 1;
    }
    if (!changed)
        return;
    cl->repoll = 1;
    arm(cl);
}

static void rehome_channel(cluster *cl, cchan *ch) {
    cnode *to = owner_of(cl, ch->slot);

    if (to == ch->at)
        return;
    if (ch->at != NULL)
        (void)leash__node_want(&ch->at->node, ch->e.key, ch->e.len, 0);
    ch->at = NULL;
    if (to == NULL || start_node(cl, to) != 0 ||
        leash__node_want(&to->node, ch->e.key, ch->e.len, 1) != LEASH_OK) {
        want_map(cl);
        return;
    }
    ch->at = to;
}

/* Work waiting on the old map goes where the new one says: parked
 * requests, unsent ones at a node that lost their slot, channels. */
static void follow_map(cluster *cl) {
    leash__list parked;
    leash__strmap_entry *e, *next;
    unsigned i;

    leash__list_init(&parked);
    leash__list_splice_tail(&parked, &cl->parked);
    while (!leash__list_empty(&parked)) {
        creq *q = LEASH__CONTAINER(LEASH__LIST_FIRST(&parked), creq, link);
        leash__list_remove(&q->link);
        place(cl, q);
    }
    for (i = 0; i < cl->nnodes; i++) {
        leash__list *n, *nx;
        for (n = cl->nodes[i]->reqs.next; n != &cl->nodes[i]->reqs; n = nx) {
            creq *q = LEASH__CONTAINER(n, creq, link);
            nx = n->next;
            /* A request on the wire hears its answer (a MOVED, say) first. */
            if (q->asking || owner_of(cl, q->slot) == q->at || leash__cmd_take(q->cmd) != 0)
                continue;
            leash__list_remove(&q->link);
            q->at = NULL;
            place(cl, q);
        }
    }
    for (e = leash__strmap_next(&cl->chans, NULL); e != NULL; e = next) {
        next = leash__strmap_next(&cl->chans, e);
        rehome_channel(cl, (cchan *)e);
    }
    slots_moved(cl, 0, LEASH__SLOTS - 1);
}

/* Reads a CLUSTER SLOTS reply into the map: [[start, end, [host, port,
 * ...], replicas...], ...]. Returns the slots it left without a master, or
 * -1 for a reply of another shape. */
static long read_map(cluster *cl, const redisReply *r, const cnode *from) {
    uint16_t owner[LEASH__SLOTS];
    long unknown = LEASH__SLOTS;
    size_t i;
    long s;

    if (r->type != REDIS_REPLY_ARRAY)
        return -1;
    memset(owner, 0, sizeof(owner));
    for (i = 0; i < r->elements; i++) {
        const redisReply *range = r->element[i], *master;
        char host[HOST_MAX + 1];
        cnode *c;
        long long lo, hi;

        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
            range->element[0]->type != REDIS_REPLY_INTEGER ||
            range->element[1]->type != REDIS_REPLY_INTEGER)
            return -1;
        master = range->element[2];
        lo = range->element[0]->integer;
        hi = range->element[1]->integer;
        if (lo < 0 || hi >= LEASH__SLOTS || lo > hi || master->type != REDIS_REPLY_ARRAY ||
            master->elements < 2 || master->element[0]->type != REDIS_REPLY_STRING ||
            master->element[1]->type != REDIS_REPLY_INTEGER || master->element[1]->integer < 1 ||
            master->element[1]->integer > 65535 || master->element[0]->len > HOST_MAX)
            return -1;
        if (master->element[0]->len == 0 || strcmp(master->element[0]->str, "?") == 0) {
            /* The node does not know its own address: the one we asked. */
            if (from->host == NULL)
                continue;
            snprintf(host, sizeof(host), "%s", from->host);
        } else {
            memcpy(host, master->element[0]->str, master->element[0]->len);
            host[master->element[0]->len] = '\0';
        }
        c = node_at(cl, host, (int)master->element[1]->integer, NULL);
        if (c == NULL)
            continue;
        for (s = (long)lo; s <= (long)hi; s++) {
            if (owner[s] == 0)
                unknown--;
            owner[s] = (uint16_t)(c->index + 1);
        }
    }
    memcpy(cl->owner, owner, sizeof(owner));
    return unknown;
}

static void expire_parked(cluster *cl, int64_t now);

static void on_map(void *arg, redisReply *reply, int status, const leash__reply_info *info) {
    cnode *from = arg;
    cluster *cl = from->cl;
    long unknown;

    (void)info;
    cl->asking_map = 0;
    if (status != LEASH_OK) {
        cl->next_seed++;
        /* A refused login or TLS handshake is refused again: what waits
         * for the map fails with it now, as on one server. */
        if (status == LEASH_EAUTH || status == LEASH_ETLS) {
            cl->refused = status;
            expire_parked(cl, INT64_MAX);
            if (cl->base.env->freeing)
                return;
        }
        arm(cl);
        return;
    }
    cl->refused = 0;
    unknown = read_map(cl, reply, from);
    if (unknown < 0) {
        leash__log(log_of(cl), LEASH_LOG_ERROR, "cluster: CLUSTER SLOTS answered %s",
                   reply->type == REDIS_REPLY_ERROR ? reply->str : "a reply of unexpected shape");
        cl->next_seed++;
        arm(cl);
        return;
    }
    cl->map_known = 1;
    if (unknown > 0)
        leash__log(log_of(cl), LEASH_LOG_INFO, "cluster: %ld slots have no master yet", unknown);
    follow_map(cl);
    arm(cl);
}

/* The node to ask for the map: one whose command connection is ready, else
 * the next seed (or known node) in turn. */
static cnode *map_source(cluster *cl) {
    unsigned i;

    for (i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i]->started && leash__conn_ready(&cl->nodes[i]->node.cmd))
            return cl->nodes[i];
    return cl->nnodes ? cl->nodes[cl->next_seed % cl->nnodes] : NULL;
}

static void ask_map(cluster *cl) {
    static const char *const argv[2] = {"CLUSTER", "SLOTS"};
    static const size_t lens[2] = {7, 5};
    cnode *from = map_source(cl);
    leash__cmd *cmd;
    size_t len;
    char *buf;

    if (from == NULL || cl->asking_map)
        return;
    cl->last_ask = leash__now_ms();
    if (start_node(cl, from) != 0)
        return;
    buf = leash__resp_format(&len, 2, argv, lens);
    cmd = buf ? leash__cmd_new(buf, len, NULL, 0,
                               cl->last_ask + cl->base.cfg->conn->command_timeout_ms, on_map, from)
              : NULL;
    if (cmd == NULL)
        return; /* the timer asks again */
    cl->asking_map = 1;
    leash__conn_send(&from->node.cmd, cmd);
}

/* The map is wanted (soon): now, or once MAP_MIN_INTERVAL_MS passed. */
static void want_map(cluster *cl) {
    if (cl->asking_map || !cl->prepared)
        return;
    if (leash__now_ms() - cl->last_ask >= MAP_MIN_INTERVAL_MS)
        ask_map(cl);
    arm(cl);
}

/* Some node with work cannot be reached: its slots may have a new master
 * by now (a failover), which only a new map tells. */
static int work_stuck(const cluster *cl) {
    unsigned i;

    for (i = 0; i < cl->nnodes; i++) {
        const cnode *c = cl->nodes[i];
        if (!c->started)
            continue;
        if ((!leash__list_empty(&c->reqs) && !leash__conn_ready(&c->node.cmd)) ||
            (c->node.subs.count > 0 && !leash__conn_ready(&c->node.sub)))
            return 1;
    }
    return 0;
}

/* The map is asked for on the timer. */
static int map_wanted(const cluster *cl);

static int map_complete(const cluster *cl) {
    unsigned s;

    if (!cl->map_known)
        return 0;
    for (s = 0; s < LEASH__SLOTS; s++)
        if (cl->owner[s] == 0)
            return 0;
    return 1;
}

/* ---- requests ---- */

/* A request that ends without any answer. */
static const leash__reply_info no_info = {-1, 0, 0};

static void finish(cluster *cl, creq *q, redisReply *reply, int status,
                   const leash__reply_info *info) {
    leash__list_remove(&q->link);
    if (q->cmd != NULL) {
        leash__cmd_free(q->cmd);
        q->cmd = NULL;
    }
    if (q->done == NULL) {
        free(q);
        return;
    }
    leash__route_read(&cl->base, q->op, reply, status, info, q->answers, q->n, q->what);
    if (q->at != NULL && q->answers[0].status == LEASH_OK && q->answers[0].server_ms > 0)
        leash__conn_server_time(&q->at->node.cmd, q->answers[0].server_ms,
                                info != NULL ? info->written_at : 0);
    q->done(q->arg, q->answers, q->n);
    free(q);
}

/* A MOVED or ASK answer: 1 if the request went on (to the node it names,
 * or to wait for the next map), -1 if its deadline passed, 0 for any other
 * error. */
static int redirected(cluster *cl, creq *q, const redisReply *reply) {
    int moved = strncmp(reply->str, "MOVED ", 6) == 0, ask = strncmp(reply->str, "ASK ", 4) == 0;
    const char *p, *space;
    char host[HOST_MAX + 1];
    long slot;
    int port;
    cnode *to;

    if (!moved && !ask)
        return 0;
    p = reply->str + (moved ? 6 : 4);
    slot = strtol(p, NULL, 10);
    space = strchr(p, ' ');
    if (space == NULL || slot < 0 || slot >= LEASH__SLOTS ||
        parse_endpoint(space + 1, reply->len - (size_t)(space + 1 - reply->str), q->at, host,
                       &port) != 0) {
        leash__log(log_of(cl), LEASH_LOG_ERROR, "cluster: a redirect of unexpected shape: %s",
                   reply->str);
        return 0;
    }
    if (q->cmd->deadline != 0 && leash__now_ms() >= q->cmd->deadline) {
        leash__log(log_of(cl), LEASH_LOG_WARN, "%s %s: still redirected (%s) at its deadline",
                   q->op->name, q->what, reply->str);
        return -1;
    }
    to = node_at(cl, host, port, NULL);
    if (to == NULL)
        return 0;
    if (moved) {
        if (cl->owner[slot] != (uint16_t)(to->index + 1)) {
            cl->owner[slot] = (uint16_t)(to->index + 1);
            slots_moved(cl, slot, slot);
        }
        want_map(cl);
    }
    leash__list_remove(&q->link);
    q->at = NULL;
    if (++q->redirects > MAX_REDIRECTS) {
        /* Nodes that keep sending it on (an old and a new master that
         * disagree for a moment, in a failover): it waits for the next
         * map, asked at most every MAP_MIN_INTERVAL_MS, then goes again. */
        q->redirects = 0;
        q->asking = 0;
        leash__list_insert_tail(&cl->parked, &q->link);
        arm(cl);
        return 1;
    }
    send_to(cl, q, to, ask);
    return 1;
}

static void on_reply(void *arg, redisReply *reply, int status, const leash__reply_info *info) {
    creq *q = arg;
    cluster *cl = (cluster *)q->base.route;

    if (status == LEASH_OK && reply->type == REDIS_REPLY_ERROR) {
        switch (redirected(cl, q, reply)) {
        case 1:
            return;
        case -1:
            finish(cl, q, NULL, LEASH_ECONN, info); /* the slot's owner was not reached */
            return;
        }
    }
    finish(cl, q, reply, status, info);
}

/* ASKING, for the command right behind it on the same connection. */
static int send_asking(cnode *at, int64_t deadline) {
    static const char *const argv[1] = {"ASKING"};
    static const size_t lens[1] = {6};
    size_t len;
    char *buf = leash__resp_format(&len, 1, argv, lens);
    leash__cmd *cmd =
        buf ? leash__cmd_new(buf, len, NULL, LEASH__CMD_ORPHAN, deadline, NULL, NULL) : NULL;

    if (cmd == NULL)
        return -1;
    leash__conn_send(&at->node.cmd, cmd);
    return 0;
}

/* Sends q to at (with ASKING before it when asking), not before its
 * send_at. */
static void send_to(cluster *cl, creq *q, cnode *at, int asking) {
    if (start_node(cl, at) != 0 || (asking && send_asking(at, q->cmd->deadline) != 0)) {
        /* No memory: it waits for the next map (or its deadline). */
        q->asking = 0;
        leash__list_insert_tail(&cl->parked, &q->link);
        arm(cl);
        return;
    }
    q->asking = asking;
    q->at = at;
    leash__list_insert_tail(&at->reqs, &q->link);
    if (q->cmd->send_at > leash__now_ms())
        leash__conn_send_at(&at->node.cmd, q->cmd, q->cmd->send_at);
    else
        leash__conn_send(&at->node.cmd, q->cmd);
}

/* Sends q to its slot's master, or parks it until a map names one. */
static void place(cluster *cl, creq *q) {
    cnode *at = owner_of(cl, q->slot);

    q->at = NULL;
    if (at != NULL) {
        send_to(cl, q, at, 0);
        return;
    }
    q->asking = 0;
    leash__list_insert_tail(&cl->parked, &q->link);
    want_map(cl);
    arm(cl);
}

static leash__req *cluster_send(leash__route *r, const leash__send *snd) {
    cluster *cl = (cluster *)r;
    creq *q = calloc(1, sizeof(*q) + snd->nanswers * sizeof(q->answers[0]));

    if (q == NULL) {
        leash__cmd_free(snd->cmd);
        return NULL;
    }
    leash__route_prepare_cmd(r, snd->op, snd->cmd);
    q->base.route = r;
    q->cmd = snd->cmd;
    q->slot = snd->slot % LEASH__SLOTS;
    q->op = snd->op;
    q->what = snd->what;
    q->done = snd->done;
    q->arg = snd->arg;
    q->n = snd->nanswers;
    leash__list_init(&q->link);
    q->cmd->flags |= LEASH__CMD_KEEP;
    if (q->done == NULL)
        q->cmd->flags |= LEASH__CMD_BACKGROUND;
    q->cmd->fn = on_reply;
    q->cmd->arg = q;
    q->cmd->send_at = snd->send_at;
    place(cl, q);
    return q->done ? &q->base : &leash__req_posted;
}

static int cluster_cancel(leash__req *req) {
    creq *q = (creq *)req;
    int written = (q->cmd->flags & LEASH__CMD_WRITTEN) != 0;

    leash__list_remove(&q->link);
    if (q->at != NULL && leash__cmd_take(q->cmd) != 0) {
        /* On the wire: it finishes unheard, and its connection frees it. */
        q->cmd->flags |= LEASH__CMD_ORPHAN;
        q->cmd->flags &= ~(unsigned)LEASH__CMD_RETRY;
    } else {
        leash__cmd_free(q->cmd);
    }
    free(q);
    return written;
}

static void cluster_orphan(leash__req *req) {
    creq *q = (creq *)req;

    /* It goes on (redirects included); nobody hears its answer. */
    q->done = NULL;
    q->cmd->flags |= LEASH__CMD_BACKGROUND;
}

static unsigned cluster_batch_key(const leash__route *r, unsigned slot) {
    (void)r;
    return slot % LEASH__SLOTS;
}

/* ---- channels ---- */

static int cluster_want(leash__route *r, const char *chan, size_t len, unsigned slot, int on) {
    cluster *cl = (cluster *)r;
    cchan *ch = (cchan *)leash__strmap_find(&cl->chans, chan, len);

    if (!on) {
        if (ch == NULL)
            return LEASH_OK;
        if (ch->at != NULL)
            (void)leash__node_want(&ch->at->node, chan, len, 0);
        leash__strmap_remove(&cl->chans, &ch->e);
        free(ch);
        return LEASH_OK;
    }
    if (ch == NULL) {
        ch = LEASH__STRMAP_OWNER_NEW(cchan, e, chan, len);
        if (ch == NULL)
            return LEASH_ENOMEM;
        ch->slot = slot % LEASH__SLOTS;
        if (leash__strmap_insert(&cl->chans, &ch->e) != 0) {
            free(ch);
            return LEASH_ENOMEM;
        }
    }
    if (ch->at == NULL) {
        cnode *to = owner_of(cl, ch->slot);
        if (to == NULL) {
            want_map(cl);
            return LEASH_OK;
        }
        if (start_node(cl, to) != 0 || leash__node_want(&to->node, chan, len, 1) != LEASH_OK) {
            leash__strmap_remove(&cl->chans, &ch->e);
            free(ch);
            return LEASH_ENOMEM;
        }
        ch->at = to;
    }
    return LEASH_OK;
}

/* Node events of a channel pass up when they come from where it is wanted. */
static cchan *chan_at(cluster *cl, leash__node *n, const char *chan, size_t len) {
    cchan *ch = (cchan *)leash__strmap_find(&cl->chans, chan, len);
    return ch != NULL && ch->at == cnode_of(n) ? ch : NULL;
}

static void node_confirmed(void *owner, leash__node *n, const char *chan, size_t len) {
    cluster *cl = owner;

    if (chan_at(cl, n, chan, len) != NULL)
        cl->base.hooks->confirmed(cl->base.owner, chan, len);
}

static void node_gone(void *owner, leash__node *n, const char *chan, size_t len) {
    cluster *cl = owner;

    if (chan_at(cl, n, chan, len) == NULL)
        return;
    cl->base.hooks->gone(cl->base.owner, chan, len);
    /* Its node dropped it (a reconnect, or its slot moved away): the map
     * says where it goes now. */
    want_map(cl);
}

static void node_moved(void *owner, leash__node *n, const char *chan, size_t len) {
    cluster *cl = owner;
    cchan *ch = chan_at(cl, n, chan, len);

    if (ch == NULL)
        return;
    (void)leash__node_want(n, chan, len, 0);
    ch->at = NULL;
    want_map(cl);
}

static void node_message(void *owner, leash__node *n, const char *chan, size_t len, const char *msg,
                         size_t msg_len) {
    cluster *cl = owner;
    (void)n;
    cl->base.hooks->message(cl->base.owner, chan, len, msg, msg_len);
}

/* A master refused a subscription: the waiters of its slots poll (they
 * are told from the timer: slots_moved). */
static void node_refused(void *owner, leash__node *n, const char *why) {
    cluster *cl = owner;

    leash__node_say_refused(n, why, "waiters of its slots poll instead");
    cl->any_polling = 1;
    slots_moved(cl, 0, LEASH__SLOTS - 1);
}

/* A lock's release publishes only at its slot's master: its waiters poll
 * when that master refused, and subscribe otherwise (while no master is
 * known, too: the subscription waits for the map, which tells). */
static int cluster_polls(const leash__route *r, unsigned slot) {
    const cnode *c = owner_of((const cluster *)r, slot);

    return c != NULL && c->node.polling;
}

static const leash__node_hooks node_hooks = {node_confirmed, node_gone, node_moved, node_message,
                                             node_refused};

/* ---- the timer: the map, and parked requests' deadlines ---- */

static void expire_parked(cluster *cl, int64_t now) {
    leash__list *n = cl->parked.next;

    while (n != &cl->parked && !cl->base.env->freeing) {
        creq *q = LEASH__CONTAINER(n, creq, link);
        n = n->next;
        if (q->cmd->deadline != 0 && now >= q->cmd->deadline) {
            finish(cl, q, NULL, cl->refused ? cl->refused : LEASH_ECONN, &no_info);
            n = cl->parked.next; /* a callback may have changed the list */
        }
    }
}

static int map_wanted(const cluster *cl) {
    return !cl->asking_map &&
           (!map_complete(cl) || !leash__list_empty(&cl->parked) || work_stuck(cl));
}

static void on_timer(void *arg) {
    cluster *cl = arg;
    int64_t now = leash__now_ms();

    if (cl->repoll) {
        cl->repoll = 0;
        leash__route_polling_changed(&cl->base);
        if (cl->base.env->freeing)
            return;
    }
    expire_parked(cl, now);
    if (cl->base.env->freeing)
        return;
    if (map_wanted(cl) && now - cl->last_ask >= MAP_MIN_INTERVAL_MS)
        ask_map(cl);
    arm(cl);
}

static void arm(cluster *cl) {
    int64_t due = 0;
    leash__list *n;

    if (!cl->prepared || cl->base.env->freeing)
        return;
    if (map_wanted(cl))
        due = cl->last_ask + (map_complete(cl) ? MAP_RETRY_MS : MAP_MIN_INTERVAL_MS);
    if (cl->repoll)
        due = leash__now_ms();
    for (n = cl->parked.next; n != &cl->parked; n = n->next) {
        int64_t d = LEASH__CONTAINER(n, creq, link)->cmd->deadline;
        if (d != 0 && (due == 0 || d < due))
            due = d;
    }
    if (due == 0)
        leash__timer_stop(&cl->timer);
    else
        leash__timer_at(&cl->timer, due, !leash__list_empty(&cl->parked));
}

/* ---- life ---- */

static int cluster_connected(const leash__route *r) {
    const cluster *cl = (const cluster *)r;
    unsigned i;

    if (!map_complete(cl))
        return 0;
    for (i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i]->started && leash__conn_ready(&cl->nodes[i]->node.cmd))
            return 1;
    return 0;
}

static leash__node *cluster_node(leash__route *r, unsigned slot) {
    cnode *c = owner_of((cluster *)r, slot);
    return c ? &c->node : NULL;
}

static int cluster_prepare(leash__route *r) {
    cluster *cl = (cluster *)r;

    if (leash__timer_create(&cl->timer) != LEASH_OK)
        return LEASH_ENOMEM;
    cl->prepared = 1;
    return LEASH_OK;
}

static void cluster_unprepare(leash__route *r) {
    cluster *cl = (cluster *)r;
    unsigned i;

    cl->prepared = 0;
    leash__timer_clear(&cl->timer);
    for (i = 0; i < cl->nnodes; i++) {
        leash__node_unprepare(&cl->nodes[i]->node);
        cl->nodes[i]->prepared = 0;
    }
}

static void cluster_start(leash__route *r) {
    cluster *cl = (cluster *)r;
    unsigned i;

    /* Work issued before the attach waits in the nodes' queues. */
    for (i = 0; i < cl->nnodes; i++)
        if (!leash__list_empty(&cl->nodes[i]->reqs))
            (void)start_node(cl, cl->nodes[i]);
    ask_map(cl);
    arm(cl);
}

static void cluster_teardown(leash__route *r) {
    cluster *cl = (cluster *)r;
    unsigned i;

    leash__timer_clear(&cl->timer);
    cl->prepared = 0;
    while (!leash__list_empty(&cl->parked))
        finish(cl, LEASH__CONTAINER(LEASH__LIST_FIRST(&cl->parked), creq, link), NULL,
               LEASH_ECANCELED, &no_info);
    for (i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i]->started)
            leash__node_teardown(&cl->nodes[i]->node);
}

static void cluster_destroy(leash__route *r) {
    cluster *cl = (cluster *)r;
    leash__strmap_entry *e, *next;
    unsigned i;

    for (e = leash__strmap_next(&cl->chans, NULL); e != NULL; e = next) {
        next = leash__strmap_next(&cl->chans, e);
        free(e);
    }
    leash__strmap_free(&cl->chans);
    for (i = 0; i < cl->nnodes; i++) {
        cnode *c = cl->nodes[i];
        /* Requests still listed are ones a never-attached client queued. */
        while (!leash__list_empty(&c->reqs)) {
            creq *q = LEASH__CONTAINER(LEASH__LIST_FIRST(&c->reqs), creq, link);
            leash__list_remove(&q->link);
            free(q);
        }
        leash__node_destroy(&c->node);
        free(c->host);
        free(c->unix_path);
        free(c);
    }
    while (!leash__list_empty(&cl->parked)) {
        creq *q = LEASH__CONTAINER(LEASH__LIST_FIRST(&cl->parked), creq, link);
        leash__list_remove(&q->link);
        leash__cmd_free(q->cmd);
        free(q);
    }
    free(cl->nodes);
    leash__timer_clear(&cl->timer);
    free(cl);
}

static const leash__route_ops cluster_ops = {
    .send = cluster_send,
    .cancel = cluster_cancel,
    .orphan = cluster_orphan,
    .batch_key = cluster_batch_key,
    .want = cluster_want,
    .polls = cluster_polls,
    .connected = cluster_connected,
    .node = cluster_node,
    .prepare = cluster_prepare,
    .unprepare = cluster_unprepare,
    .start = cluster_start,
    .teardown = cluster_teardown,
    .destroy = cluster_destroy,
};

leash__route *leash__route_cluster_new(leash__env *env, const leash__dialect *d,
                                       const leash__route_cfg *cfg) {
    cluster *cl = calloc(1, sizeof(*cl));
    int i;

    if (cl == NULL)
        return NULL;
    cl->base.ops = &cluster_ops;
    cl->base.env = env;
    cl->base.dialect = d;
    cl->base.cfg = cfg;
    cl->base.orders_queues = 1;
    leash__route_init_sharded(&cl->base, 1);
    leash__list_init(&cl->parked);
    leash__timer_init(&cl->timer, env, on_timer, cl);
    for (i = 0; i < cfg->nseeds; i++) {
        if (node_at(cl, cfg->seeds[i].host, cfg->seeds[i].port, cfg->seeds[i].unix_path) == NULL) {
            cluster_destroy(&cl->base);
            return NULL;
        }
    }
    return &cl->base;
}
