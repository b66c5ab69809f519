/* SPDX-License-Identifier: MIT */
#include "route/node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hiredis/hiredis.h>

#include "wire/resp.h"

enum {
    SUB_NONE,    /* not subscribed (or the subscriber connection is down) */
    SUB_PENDING, /* (S)SUBSCRIBE sent, not confirmed */
    SUB_ACTIVE,  /* confirmed: no message can be missed from here on */
    SUB_LEAVING  /* (S)UNSUBSCRIBE sent, not confirmed */
};

typedef struct node_sub {
    leash__strmap_entry e; /* key: the channel, stored after the struct */
    leash__list pending;   /* in the node's pending list while PENDING or LEAVING */
    int state;
    int wanted;
    int telling; /* inside the gone hook: a drop waits until it returns */
} node_sub;

static node_sub *sub_of_pending(leash__list *link) {
    return LEASH__CONTAINER(link, node_sub, pending);
}

static int send_sub(leash__node *n, int on, node_sub *s) {
    const char *verb =
        *n->sharded ? (on ? "SSUBSCRIBE" : "SUNSUBSCRIBE") : (on ? "SUBSCRIBE" : "UNSUBSCRIBE");
    const char *argv[2] = {verb, s->e.key};
    size_t lens[2] = {strlen(verb), s->e.len}, len;
    char *buf = leash__resp_format(&len, 2, argv, lens);
    int rc;

    if (buf == NULL)
        return -1;
    rc = leash__conn_send_raw(&n->sub, buf, len, 1);
    free(buf);
    if (rc == 0)
        leash__list_insert_tail(&n->pending, &s->pending);
    if (rc == 0 && on)
        n->env->stats->subscriptions++;
    return rc;
}

static void drop(leash__node *n, node_sub *s) {
    if (s->telling)
        return;
    leash__list_remove(&s->pending);
    leash__strmap_remove(&n->subs, &s->e);
    free(s);
}

/* Moves s toward what is wanted; frees it once nothing is left to do. */
static void sync_sub(leash__node *n, node_sub *s) {
    if (s->wanted && s->state == SUB_NONE && !n->polling) {
        /* With the subscriber connection down, its on_ready subscribes. */
        if (send_sub(n, 1, s) == 0)
            s->state = SUB_PENDING;
    } else if (!s->wanted && s->state == SUB_ACTIVE) {
        s->state = send_sub(n, 0, s) == 0 ? SUB_LEAVING : SUB_NONE;
    }
    /* PENDING and LEAVING settle when their confirmation arrives. */
    if (!s->wanted && s->state == SUB_NONE)
        drop(n, s);
}

int leash__node_want(leash__node *n, const char *chan, size_t len, int on) {
    node_sub *s = (node_sub *)leash__strmap_find(&n->subs, chan, len);

    if (s == NULL) {
        if (!on)
            return LEASH_OK;
        s = LEASH__STRMAP_OWNER_NEW(node_sub, e, chan, len);
        if (s == NULL)
            return LEASH_ENOMEM;
        leash__list_init(&s->pending);
        if (leash__strmap_insert(&n->subs, &s->e) != 0) {
            free(s);
            return LEASH_ENOMEM;
        }
    }
    s->wanted = on;
    sync_sub(n, s);
    return LEASH_OK;
}

/* The confirmation of s's operation came. */
static void settled(leash__node *n, node_sub *s) {
    leash__list_remove(&s->pending);
    leash__conn_progress(&n->sub, 1);
}

static void on_subscribe(leash__node *n, node_sub *s) {
    if (s->state != SUB_PENDING)
        return;
    settled(n, s);
    s->state = SUB_ACTIVE;
    n->closed_on_subscribe = 0; /* the server does subscribe */
    if (!s->wanted) {
        sync_sub(n, s);
        return;
    }
    n->hooks->confirmed(n->owner, n, s->e.key, s->e.len);
}

static void on_unsubscribe(leash__node *n, node_sub *s) {
    if (s->state == SUB_LEAVING) {
        settled(n, s);
        s->state = SUB_NONE;
        sync_sub(n, s);
    } else if (s->state == SUB_ACTIVE) {
        /* Unasked: the server dropped it (a sharded channel whose slot
         * moved away). Whoever wants it learns it is gone and may take it
         * elsewhere; still wanted here, it is asked for again. */
        s->state = SUB_NONE;
        s->telling = 1;
        n->hooks->gone(n->owner, n, s->e.key, s->e.len);
        if (n->env->freeing)
            return;
        s->telling = 0;
        sync_sub(n, s); /* unwanted meanwhile: dropped now */
    }
}

/* Errors that a later try may not get: the server is loading or busy, a
 * cluster is being repaired. */
static int transient(const char *err) {
    static const char *const kinds[] = {"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN"};
    size_t i;

    for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (strncmp(err, kinds[i], strlen(kinds[i])) == 0)
            return 1;
    return 0;
}

/* The server refuses subscriptions for good (NOPERM, an unknown or renamed
 * command, a proxy without pub/sub): subscribing again would only be
 * refused again, and reconnecting to try would be a loop. The node gives
 * up pub/sub for good (s, the refused one if known, is dropped when
 * unwanted, else kept unsent); its owner says, once, which waiters poll:
 * the route decides where a waiter can still hear a release. */
static void refused(leash__node *n, node_sub *s, const char *why) {
    int first = !n->polling;

    n->polling = 1;
    if (s != NULL) {
        s->state = SUB_NONE;
        sync_sub(n, s);
    }
    if (!first)
        return;
    n->env->stats->servers_polling++;
    n->hooks->refused(n->owner, n, why);
}

void leash__node_say_refused(const leash__node *n, const char *why, const char *effect) {
    leash__log(&n->env->log, LEASH_LOG_WARN,
               "%s: Redis refused a subscription: %s: %s (docs/how-it-works.md \"Waiting without "
               "pub/sub\")",
               leash__conn_role_name(&n->sub), why, effect);
}

/* An error answers the oldest (un)subscribe still unconfirmed. MOVED or
 * ASK: the channel's slot lives elsewhere (the owner takes it there); a
 * transient error (LOADING...) starts the connection over, which subscribes
 * everything again after its backoff; any other (NOPERM, unknown command)
 * is a refusal: the node polls (refused()). */
static void on_sub_error(leash__node *n, const redisReply *err) {
    node_sub *s;

    if (leash__list_empty(&n->pending)) {
        leash__log(&n->env->log, LEASH_LOG_ERROR, "%s: an error nobody asked for: %s: reconnecting",
                   leash__conn_role_name(&n->sub), err->str);
        leash__conn_reset(&n->sub);
        return;
    }
    s = sub_of_pending(LEASH__LIST_FIRST(&n->pending));
    settled(n, s);
    if (transient(err->str)) {
        leash__log(&n->env->log, LEASH_LOG_ERROR,
                   "%s: Redis refused a subscription: %s: reconnecting",
                   leash__conn_role_name(&n->sub), err->str);
        leash__conn_reset(&n->sub);
        return;
    }
    if (strncmp(err->str, "MOVED ", 6) != 0 && strncmp(err->str, "ASK ", 4) != 0) {
        refused(n, s, err->str);
        return;
    }
    if (s->state == SUB_LEAVING) {
        s->state = SUB_NONE;
        sync_sub(n, s);
        return;
    }
    s->state = SUB_NONE;
    n->hooks->moved(n->owner, n, s->e.key, s->e.len);
}

static int is_kind(const redisReply *kind, const char *classic) {
    /* Sharded frames are the classic ones with an "s" in front. */
    return strcasecmp(kind->str, classic) == 0 || ((kind->str[0] == 's' || kind->str[0] == 'S') &&
                                                   strcasecmp(kind->str + 1, classic) == 0);
}

/* A frame on the subscriber connection: [kind, channel, payload] or an
 * error. Anything else a server sends there is ignored. */
static void on_sub_frame(leash__conn *conn, redisReply *reply) {
    leash__node *n = conn->owner;
    redisReply *kind, *chan;
    node_sub *s;

    n->sub_heard = 1;
    if (reply->type == REDIS_REPLY_ERROR) {
        on_sub_error(n, reply);
        return;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_STRING)
        return;
    kind = reply->element[0];
    chan = reply->element[1];
    if (is_kind(kind, "message")) {
        leash__conn_progress(conn, 0);
        if (reply->element[2]->type == REDIS_REPLY_STRING)
            n->hooks->message(n->owner, n, chan->str, chan->len, reply->element[2]->str,
                              reply->element[2]->len);
        return;
    }
    s = (node_sub *)leash__strmap_find(&n->subs, chan->str, chan->len);
    if (s == NULL)
        return;
    if (is_kind(kind, "subscribe"))
        on_subscribe(n, s);
    else if (is_kind(kind, "unsubscribe"))
        on_unsubscribe(n, s);
}

static void on_sub_ready(leash__conn *conn) {
    leash__node *n = conn->owner;
    leash__strmap_entry *e, *next;

    n->sub_heard = 0;
    for (e = leash__strmap_next(&n->subs, NULL); e != NULL; e = next) {
        next = leash__strmap_next(&n->subs, e);
        sync_sub(n, (node_sub *)e);
    }
}

/* A proxy without pub/sub may refuse SUBSCRIBE by closing the connection
 * (twemproxy does so for any command it does not support) rather than with
 * an error: the connection comes back (its handshake succeeds, so its
 * backoff starts over), subscribes, and is closed again, forever. Such a
 * close is told from a network's or a server's by where it falls: the
 * server or the network closed the connection (not a timeout of ours)
 * after its handshake succeeded and a SUBSCRIBE was written, and nothing
 * came on it since, not even a confirmation. A healthy server confirms a
 * SUBSCRIBE within a round trip, so a restart, a CLIENT KILL or a cut
 * link seldom falls there, and hardly ever LEASH__SUB_CLOSES_REFUSED times
 * in a row: that many are a refusal (refused()); any confirmation starts
 * the count over. A break of ours (no reply within command_timeout_ms) is
 * not counted: a server that is slow to answer is not refusing. */
static void closed_on_subscribe(leash__node *n, int subscribing) {
    char why[96];

    if (!subscribing || !n->sub.peer_closed || n->sub_heard || n->polling)
        return;
    if (++n->closed_on_subscribe < LEASH__SUB_CLOSES_REFUSED)
        return;
    snprintf(why, sizeof(why), "the connection was closed right after SUBSCRIBE, %d times in a row",
             LEASH__SUB_CLOSES_REFUSED);
    refused(n, NULL, why);
}

static void on_sub_down(leash__conn *conn) {
    leash__node *n = conn->owner;
    leash__strmap_entry *e, *next;
    int subscribing = 0;

    /* Every subscription died with the connection. */
    for (e = leash__strmap_next(&n->subs, NULL); e != NULL; e = next) {
        node_sub *s = (node_sub *)e;
        int was_active = s->state == SUB_ACTIVE;
        next = leash__strmap_next(&n->subs, e);
        subscribing |= s->state == SUB_PENDING;
        leash__list_remove(&s->pending);
        s->state = SUB_NONE;
        if (!s->wanted) {
            drop(n, s);
            continue;
        }
        if (was_active) {
            n->hooks->gone(n->owner, n, s->e.key, s->e.len);
            if (n->env->freeing)
                return;
        }
    }
    closed_on_subscribe(n, subscribing);
}

void leash__node_init(leash__node *n, leash__env *env, const leash__conn_cfg *cfg,
                      const int *sharded, const leash__node_hooks *hooks, void *owner) {
    memset(n, 0, sizeof(*n));
    n->env = env;
    n->sharded = sharded;
    n->polling = cfg->pubsub == LEASH_PUBSUB_OFF;
    leash__list_init(&n->pending);
    n->hooks = hooks;
    n->owner = owner;
    leash__conn_init(&n->cmd, env, cfg, LEASH__CONN_CMD);
    leash__conn_init(&n->sub, env, cfg, LEASH__CONN_SUB);
    n->cmd.owner = n;
    n->sub.owner = n;
    n->sub.on_ready = on_sub_ready;
    n->sub.on_down = on_sub_down;
    n->sub.on_frame = on_sub_frame;
}

int leash__node_prepare(leash__node *n) {
    if (leash__conn_prepare(&n->cmd) != LEASH_OK || leash__conn_prepare(&n->sub) != LEASH_OK)
        return LEASH_ENOMEM;
    return LEASH_OK;
}

void leash__node_unprepare(leash__node *n) {
    leash__timer_clear(&n->cmd.timer);
    leash__timer_clear(&n->sub.timer);
}

void leash__node_start(leash__node *n) {
    leash__conn_start(&n->cmd);
    /* LEASH_PUBSUB_OFF: a server or proxy that refuses pub/sub may refuse
     * the connection's first SUBSCRIBE by closing it; none is opened. */
    if (n->polling)
        n->env->stats->servers_polling++;
    else
        leash__conn_start(&n->sub);
}

void leash__node_teardown(leash__node *n) {
    leash__conn_teardown(&n->cmd);
    leash__conn_teardown(&n->sub);
}

void leash__node_destroy(leash__node *n) {
    leash__strmap_entry *e, *next;

    for (e = leash__strmap_next(&n->subs, NULL); e != NULL; e = next) {
        next = leash__strmap_next(&n->subs, e);
        free(e);
    }
    leash__strmap_free(&n->subs);
    leash__node_unprepare(n);
}
