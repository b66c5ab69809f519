/* SPDX-License-Identifier: MIT */
/*
 * A node: one Redis server as the routes see it, with a command connection
 * (pipelined scripts) and a subscriber connection, and the channels
 * subscribed on it.
 *
 * Subscriptions: the owner says which channels it wants (leash__node_want);
 * the node moves each channel's subscription toward that, one SUBSCRIBE or
 * UNSUBSCRIBE at a time (SSUBSCRIBE/SUNSUBSCRIBE for sharded pub/sub; a
 * subscribe never goes out while an unsubscribe of the same channel is
 * unconfirmed, so every confirmation names its request), subscribes
 * everything again after a reconnect, and tells the owner: confirmed, gone,
 * moved, message.
 */
#ifndef LEASH_ROUTE_NODE_H
#define LEASH_ROUTE_NODE_H

#include <stddef.h>

#include "base/env.h"
#include "base/list.h"
#include "base/strmap.h"
#include "wire/conn.h"

typedef struct leash__node leash__node;

/* Closes in a row of the subscriber connection, each right after a
 * SUBSCRIBE on a connection whose handshake succeeded, that make a refusal
 * (docs/how-it-works.md "Waiting without pub/sub"). */
#define LEASH__SUB_CLOSES_REFUSED 3

/* gone runs in a walk over the subscriptions: it may give up the channel
 * it is told about, no other. moved: the node refused to subscribe chan
 * (MOVED, ASK: its slot lives elsewhere); it is no longer subscribed here,
 * though still wanted. refused: the server refused a subscription for
 * good (NOPERM, an unknown command; why says which): the node subscribes
 * nothing from now on (n->polling), and the owner decides which waiters
 * poll (a cluster: those of this master's slots; otherwise all of them)
 * and says so, once, with leash__node_say_refused. A server or proxy that closes the
 * connection instead of answering (twemproxy) is refused too, after
 * LEASH__SUB_CLOSES_REFUSED such closes in a row (node.c). */
typedef struct leash__node_hooks {
    void (*confirmed)(void *owner, leash__node *n, const char *chan, size_t len);
    void (*gone)(void *owner, leash__node *n, const char *chan, size_t len);
    void (*moved)(void *owner, leash__node *n, const char *chan, size_t len);
    void (*message)(void *owner, leash__node *n, const char *chan, size_t len, const char *msg,
                    size_t msg_len);
    void (*refused)(void *owner, leash__node *n, const char *why);
} leash__node_hooks;

struct leash__node {
    leash__env *env;
    leash__conn cmd, sub;
    leash__strmap subs;  /* channel -> its subscription on this node */
    leash__list pending; /* subscriptions whose (un)subscribe is unconfirmed, in order */
    const int *sharded;  /* while set: SSUBSCRIBE/SUNSUBSCRIBE (the route's choice) */
    /* No subscriptions (waiters poll): LEASH_PUBSUB_OFF, or the server
     * refused one; the subscriber connection is then not opened, or left
     * idle. */
    int polling;
    /* A proxy that refuses pub/sub by closing the connection (twemproxy):
     * closes in a row of the subscriber connection that each came after a
     * handshake that succeeded, with a SUBSCRIBE written and nothing heard
     * since (node.c, closed_on_subscribe); and whether anything was heard
     * on the connection since it became ready. */
    unsigned closed_on_subscribe;
    int sub_heard;
    const leash__node_hooks *hooks;
    void *owner;
};

void leash__node_init(leash__node *n, leash__env *env, const leash__conn_cfg *cfg,
                      const int *sharded, const leash__node_hooks *hooks, void *owner);
/* Makes its timers (the env is attached). LEASH_OK / LEASH_ENOMEM. */
int leash__node_prepare(leash__node *n);
/* Gives them back (a failed attach). */
void leash__node_unprepare(leash__node *n);
void leash__node_start(leash__node *n);
/* At client free: connections torn down (see leash__conn_teardown). */
void leash__node_teardown(leash__node *n);
/* Frees what the node holds (after the teardown). */
void leash__node_destroy(leash__node *n);

/* The one warning of a refusal (the refused hook's): why the server
 * refused, and what becomes of the waiters (effect, e.g. "waiters poll
 * instead"). */
void leash__node_say_refused(const leash__node *n, const char *why, const char *effect);

/* Wants chan subscribed (on) or not. LEASH_OK, or LEASH_ENOMEM when a new
 * subscription could not even be recorded. */
int leash__node_want(leash__node *n, const char *chan, size_t len, int on);

#endif
