/* SPDX-License-Identifier: MIT */
/*
 * The route: the one place that decides where a command goes. Every
 * primitive sends through it, and subscribes through it:
 *
 *   send(key's slot, an operation of the dialect, its command, done)
 *   want(channel, on/off)  ->  confirmed / gone / message, per channel
 *
 * Behind it: one server (route/single.c), the master that Redis Sentinel
 * names (route/sentinel.c), the master of the slot in a Redis Cluster
 * (route/cluster.c), or every server of a Redlock quorum (route/quorum.c),
 * whose answers the route combines by the operation's class (dialect.h)
 * into one answer per lock. A primitive never learns which it talks to.
 *
 * Completions: done fires exactly once per request, from the loop, never
 * inside leash__route_send, with n answers (a renew batch: one per lock;
 * a read, LEASH__OP_READ: one per server, n of them for a quorum, each
 * answer's state owned by done, so a read is never cancelled or
 * orphaned).
 * An answer's status is LEASH_OK when the server(s) answered (its kind says
 * what), else why not (LEASH_ECONN, LEASH_EREDIS, LEASH_EPROTO, LEASH_EAUTH,
 * LEASH_ECANCELED at teardown).
 */
#ifndef LEASH_ROUTE_ROUTE_H
#define LEASH_ROUTE_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "base/env.h"
#include "dialect/dialect.h"
#include "wire/conn.h"
#include "wire/sock.h"

typedef struct leash__route leash__route;
typedef struct leash__req leash__req;

/* What every route's request starts with. */
struct leash__req {
    leash__route *route;
};

typedef void leash__done_fn(void *arg, const leash__answer *answers, size_t n);

/* Events of the channels the owner wants. */
typedef struct leash__sub_hooks {
    /* The channel's subscription is (again) confirmed: from now on no
     * message on it can be missed. */
    void (*confirmed)(void *owner, const char *chan, size_t len);
    /* It is gone (the subscriber connection dropped, the slot moved):
     * messages may be missed until it is confirmed again. */
    void (*gone)(void *owner, const char *chan, size_t len);
    void (*message)(void *owner, const char *chan, size_t len, const char *msg, size_t msg_len);
    /* Which channels poll may have changed (a server refused a
     * subscription, a slot moved to another node): the owner asks
     * leash__route_polls_at for each of its channels. One that polls now
     * gives its subscription up and counts as confirmed; one that may
     * subscribe again (its slot moved to a node that subscribes) wants it
     * again and waits for its confirmation. */
    void (*polling)(void *owner);
} leash__sub_hooks;

/* One operation to send. */
typedef struct leash__send {
    unsigned slot;          /* of the key(s) it touches */
    const leash__opdef *op; /* how to read (and combine) its answers */
    leash__cmd *cmd;        /* built by the route's dialect; the route owns it now */
    size_t nanswers;        /* 1, or the locks of a renew batch */
    int64_t send_at;        /* 0 = now, else not before this monotonic time */
    /* The lock, and for an acquire of a new hold its attempt's token (NULL
     * for an extra hold, whose token is the hold's): a quorum's own
     * follow-ups (the fence raise, giving back a failed attempt). */
    const leash__names *names;
    const char *token;
    int64_t lease_ms;
    /* A multi-lock's one script (dialect/multi.h), which takes the locks
     * group[0..ngroup) (names is group[0]) with one fence per server: a
     * quorum raises the fence floors of them all, and gives a decision
     * that is no grant back by group_tokens[k] for group[k] (token NULL:
     * the tokens are several), on the servers that granted or did not
     * answer. NULL/0 for one lock. Alive until done (the tokens: copied). */
    const leash__names *const *group;
    const char *const *group_tokens;
    size_t ngroup;
    /* A renewal that spreads (Redlock: dialect.h, leash__renew_item): the
     * same renewal without spreading, which the route resends to servers
     * that failed the first; the route owns it. NULL elsewhere (a quorum
     * resends a copy of cmd). A resend is written later than commands sent
     * meanwhile (a release), so it must not be able to write a hold. */
    leash__cmd *again;
    const char *what;     /* names the lock in log lines; alive until done */
    leash__done_fn *done; /* NULL: nobody waits (a release in the background) */
    void *arg;
} leash__send;

typedef struct leash__route_ops {
    leash__req *(*send)(leash__route *r, const leash__send *s);
    int (*cancel)(leash__req *req);
    void (*orphan)(leash__req *req);
    unsigned (*batch_key)(const leash__route *r, unsigned slot);
    int (*want)(leash__route *r, const char *chan, size_t len, unsigned slot, int on);
    /* Whether a waiter of a channel in slot polls now, beside r->polling
     * (a cluster: the slot's master refused a subscription). NULL: only
     * r->polling says. */
    int (*polls)(const leash__route *r, unsigned slot);
    int (*connected)(const leash__route *r);
    /* The node that serves slot (a quorum: its first), for tests and tools. */
    struct leash__node *(*node)(leash__route *r, unsigned slot);
    int (*prepare)(leash__route *r);    /* makes its timers: LEASH_OK / LEASH_ENOMEM */
    void (*unprepare)(leash__route *r); /* gives them back (a failed attach) */
    void (*start)(leash__route *r);
    void (*teardown)(leash__route *r);
    void (*destroy)(leash__route *r);
} leash__route_ops;

/* The route's part of the client's configuration (options.h): how the
 * client wants its commands sent; alive as long as the route. */
typedef struct leash__route_cfg {
    /* The part below: connections' credentials, timeouts, scripts, the
     * pub/sub asked for; host/port/unix_path name the one server of a
     * single route. */
    const leash__conn_cfg *conn;
    /* A cluster's seed nodes. */
    const leash__sock_addr *seeds;
    int nseeds;
    /* A grant and a renewal count once this many replicas acknowledged
     * them (WAIT after the script); 0 = off. */
    int wait_replicas;
    int64_t wait_timeout_ms;
    /* Sentinel: seeds are the sentinels, asked for the master of this
     * name with their own credentials (NULL: none). */
    const char *sentinel_master;
    const char *sentinel_username, *sentinel_password;
} leash__route_cfg;

struct leash__route {
    const leash__route_ops *ops;
    leash__env *env;
    const leash__dialect *dialect;
    const leash__route_cfg *cfg;
    /* SSUBSCRIBE/SPUBLISH now: the one place this state lives. Set from
     * cfg->conn->pubsub when the route is made (leash__route_init_sharded),
     * until a server without sharded pub/sub turns LEASH_PUBSUB_AUTO to
     * classic (leash__route_server_ready). Lock names and nodes read it
     * through a pointer. */
    int sharded;
    /* What the route can do, for the layers above to ask rather than
     * derive from the topology. One server orders the lock family's
     * queues (a quorum of servers cannot: no lock family on it). */
    int orders_queues;
    /* Grants read and raise a fence floor per lock (a quorum: a fence
     * then grows across servers). */
    int fenced;
    /* Every attempt of an acquire needs a token of its own (a quorum
     * gives a failed attempt back on every server, which must not meet a
     * later attempt's grant). */
    int fresh_tokens;
    /* A woken waiter whose last attempt met a split vote tries after a
     * random pause of up to this (ms): the waiters of several clients,
     * woken by one release, then do not split a quorum's vote again and
     * again. 0: at once. */
    int64_t wake_jitter_ms;
    /* A renewal too few replicas acknowledged does not count, and is
     * tried again until the hold's deadline (Sentinel: a failover under
     * way), rather than losing the hold at once (LEASH_LOST_REPLICAS). */
    int retry_unreplicated;
    /* Every waiter polls instead of subscribing (docs/how-it-works.md
     * "Waiting without pub/sub"): from the start with LEASH_PUBSUB_OFF, or,
     * for the client's life, once no release can be heard any more (one
     * server or Sentinel: the server refused a subscription; Redlock: any
     * of its servers did: route/quorum.c). A cluster polls per slot
     * instead (ops->polls): leash__route_polls_at says. */
    int polling;
    const leash__sub_hooks *hooks;
    void *owner;
};

/* A command connection of r became ready (conn->version is known, or 0
 * when the server did not say): a server before 7.0 has no sharded pub/sub,
 * and LEASH_PUBSUB_AUTO turns to classic pub/sub for the whole client (a
 * cluster's nodes run one version, or are being upgraded to a newer one). */
void leash__route_server_ready(leash__route *r, const leash__conn *conn);

/* Every waiter of r polls from now on (its node, or one of a quorum's
 * servers, refused a subscription: NOPERM, an unknown command, a proxy's
 * refusal); the owner of the channel events is told once. */
void leash__route_polls(leash__route *r);

/* Which channels poll may have changed without r->polling (a cluster): the
 * owner of the channel events is told (its polling hook). */
void leash__route_polling_changed(leash__route *r);

/* Whether a waiter of a channel in slot polls now. The one place that
 * says it: the wait queues (hold/waitq.c) and the attempts' mark
 * (prim/mutex.c) ask here. */
static inline int leash__route_polls_at(const leash__route *r, unsigned slot) {
    return r->polling || (r->ops->polls != NULL && r->ops->polls(r, slot));
}

/* For the routes' constructors: r->polling, and r->sharded as the client asked
 * (cfg->conn->pubsub): LEASH_PUBSUB_SHARDED always, LEASH_PUBSUB_AUTO and
 * _OFF (its releases still publish) on a route with shards (a cluster,
 * where a classic message goes to every node), LEASH_PUBSUB_CLASSIC never. */
void leash__route_init_sharded(leash__route *r, int shards);

/* What a send with done NULL returns: there is nothing to cancel. */
extern leash__req leash__req_posted;

/*
 * Sends s->cmd. Returns the request (for leash__req_cancel), or
 * &leash__req_posted when done is NULL, or NULL without memory: then the
 * command was freed and done never fires.
 */
static inline leash__req *leash__route_send(leash__route *r, const leash__send *s) {
    leash__req *req = r->ops->send(r, s);
    leash_stats *st = r->env->stats;

    /* Counted here, once per request whatever the topology makes of it
     * (a Redlock request goes to every server). */
    if (req != NULL) {
        switch (s->op->cls) {
        case LEASH__OP_GRANT:
            st->acquire_commands++;
            break;
        case LEASH__OP_RELEASE:
            st->release_commands++;
            break;
        case LEASH__OP_RENEW:
            st->renew_commands++;
            break;
        default:
            st->other_commands++;
            break;
        }
    }
    return req;
}

/* The owner stops waiting for req: done will not fire; an unsent command
 * is dropped, a sent one finishes unheard. Returns 1 if some copy of the
 * command was written (it may have run), else 0; a quorum's grant also
 * counts a copy that answered as written, unless it said it wrote
 * nothing (busy, late, gone): its decision, which would give back what
 * servers granted, never comes. */
static inline int leash__req_cancel(leash__req *req) {
    return req->route->ops->cancel(req);
}

/* The owner stops waiting for req, but its command still goes out (a
 * release of a handle that is freed): done will not fire. */
static inline void leash__req_orphan(leash__req *req) {
    req->route->ops->orphan(req);
}

/* Renewals of locks whose keys give the same batch key may go in one
 * script call (a cluster: only keys of one slot). */
static inline unsigned leash__route_batch_key(const leash__route *r, unsigned slot) {
    return r->ops->batch_key(r, slot);
}

/* The owner wants channel chan (of a key in slot) subscribed, or not.
 * LEASH_OK, or LEASH_ENOMEM (a new subscription could not be recorded). */
static inline int leash__route_want(leash__route *r, const char *chan, size_t len, unsigned slot,
                                    int on) {
    return r->ops->want(r, chan, len, slot, on);
}

/* 1 while commands go out at once (a connection is ready). */
static inline int leash__route_connected(const leash__route *r) {
    return r->ops->connected(r);
}

/* Installs the owner of the channel events (before anything is wanted). */
static inline void leash__route_set_hooks(leash__route *r, const leash__sub_hooks *hooks,
                                          void *owner) {
    r->hooks = hooks;
    r->owner = owner;
}

/* For the routes: a command of op goes out with WAIT behind it when the
 * client asks for replicas and op is a grant or a renewal. */
void leash__route_prepare_cmd(const leash__route *r, const leash__opdef *op, leash__cmd *cmd);

/* For the routes: the answers of one server to a command of op: its reply
 * parsed (status LEASH_OK), or status in every answer; a grant or renewal
 * that too few replicas acknowledged (acked) is marked replicas_short. */
void leash__route_read(const leash__route *r, const leash__opdef *op, struct redisReply *reply,
                       int status, const leash__reply_info *info, leash__answer *out, size_t n,
                       const char *what);

/* One server: the client's own host/port or unix socket. Owns copies of
 * nothing: cfg must outlive the route. NULL without memory. */
leash__route *leash__route_single_new(leash__env *env, const leash__dialect *d,
                                      const leash__route_cfg *cfg);
/* N independent servers, cfg->seeds (route/quorum.c: Redlock). NULL
 * without memory. */
leash__route *leash__route_quorum_new(leash__env *env, const leash__dialect *d,
                                      const leash__route_cfg *cfg);
/* The master that the sentinels cfg->seeds name cfg->sentinel_master
 * (route/sentinel.c). NULL without memory. */
leash__route *leash__route_sentinel_new(leash__env *env, const leash__dialect *d,
                                        const leash__route_cfg *cfg);
/* A Redis Cluster found from cfg->seeds (route/cluster.c). NULL without
 * memory. */
leash__route *leash__route_cluster_new(leash__env *env, const leash__dialect *d,
                                       const leash__route_cfg *cfg);

#endif
