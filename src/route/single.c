/* SPDX-License-Identifier: MIT */
/*
 * The route to one Redis server: every operation goes to its one node, and
 * its answers pass through as they are.
 */
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "route/node.h"
#include "route/route.h"

typedef struct single {
    leash__route base;
    leash__node node;
} single;

typedef struct single_req {
    leash__req base;
    leash__cmd *cmd; /* while in flight */
    const leash__opdef *op;
    const char *what;
    leash__done_fn *done;
    void *arg;
    size_t n;
    leash__answer answers[]; /* n of them */
} single_req;

static void on_reply(void *arg, redisReply *reply, int status, const leash__reply_info *info) {
    single_req *q = arg;
    single *s = (single *)q->base.route;

    q->cmd = NULL;
    leash__route_read(&s->base, q->op, reply, status, info, q->answers, q->n, q->what);
    if (q->answers[0].status == LEASH_OK && q->answers[0].server_ms > 0)
        leash__conn_server_time(&s->node.cmd, q->answers[0].server_ms,
                                info != NULL ? info->written_at : 0);
    q->done(q->arg, q->answers, q->n);
    free(q);
}

static leash__req *single_send(leash__route *r, const leash__send *snd) {
    single *s = (single *)r;
    single_req *q;

    leash__route_prepare_cmd(r, snd->op, snd->cmd);
    if (snd->done == NULL) {
        leash__cmd_orphan(snd->cmd);
        if (snd->send_at != 0)
            leash__conn_send_at(&s->node.cmd, snd->cmd, snd->send_at);
        else
            leash__conn_send(&s->node.cmd, snd->cmd);
        return &leash__req_posted;
    }
    q = malloc(sizeof(*q) + snd->nanswers * sizeof(q->answers[0]));
    if (q == NULL) {
        leash__cmd_free(snd->cmd);
        return NULL;
    }
    q->base.route = r;
    q->cmd = snd->cmd;
    q->op = snd->op;
    q->what = snd->what;
    q->done = snd->done;
    q->arg = snd->arg;
    q->n = snd->nanswers;
    snd->cmd->fn = on_reply;
    snd->cmd->arg = q;
    if (snd->send_at != 0)
        leash__conn_send_at(&s->node.cmd, snd->cmd, snd->send_at);
    else
        leash__conn_send(&s->node.cmd, snd->cmd);
    return &q->base;
}

static int single_cancel(leash__req *req) {
    single_req *q = (single_req *)req;
    int written = 0;

    if (q->cmd != NULL) {
        written = (q->cmd->flags & LEASH__CMD_WRITTEN) != 0;
        leash__cmd_cancel(q->cmd);
    }
    free(q);
    return written;
}

static void single_orphan(leash__req *req) {
    single_req *q = (single_req *)req;

    if (q->cmd != NULL)
        leash__cmd_orphan(q->cmd);
    free(q);
}

static unsigned single_batch_key(const leash__route *r, unsigned slot) {
    (void)r, (void)slot;
    return 0;
}

static int single_want(leash__route *r, const char *chan, size_t len, unsigned slot, int on) {
    (void)slot;
    return leash__node_want(&((single *)r)->node, chan, len, on);
}

static int single_connected(const leash__route *r) {
    return leash__conn_ready(&((const single *)r)->node.cmd);
}

static leash__node *single_node(leash__route *r, unsigned slot) {
    (void)slot;
    return &((single *)r)->node;
}

static int single_prepare(leash__route *r) {
    return leash__node_prepare(&((single *)r)->node);
}

static void single_unprepare(leash__route *r) {
    leash__node_unprepare(&((single *)r)->node);
}

static void single_start(leash__route *r) {
    leash__node_start(&((single *)r)->node);
}

static void single_teardown(leash__route *r) {
    leash__node_teardown(&((single *)r)->node);
}

static void single_destroy(leash__route *r) {
    leash__node_destroy(&((single *)r)->node);
    free(r);
}

static const leash__route_ops single_ops = {
    .send = single_send,
    .cancel = single_cancel,
    .orphan = single_orphan,
    .batch_key = single_batch_key,
    .want = single_want,
    .connected = single_connected,
    .node = single_node,
    .prepare = single_prepare,
    .unprepare = single_unprepare,
    .start = single_start,
    .teardown = single_teardown,
    .destroy = single_destroy,
};

/* Node events pass through to the owner of the channel events. */
static void node_confirmed(void *owner, leash__node *n, const char *chan, size_t len) {
    leash__route *r = owner;
    (void)n;
    r->hooks->confirmed(r->owner, chan, len);
}

static void node_gone(void *owner, leash__node *n, const char *chan, size_t len) {
    leash__route *r = owner;
    (void)n;
    r->hooks->gone(r->owner, chan, len);
}

static void node_message(void *owner, leash__node *n, const char *chan, size_t len, const char *msg,
                         size_t msg_len) {
    leash__route *r = owner;
    (void)n;
    r->hooks->message(r->owner, chan, len, msg, msg_len);
}

/* One server: nowhere else to go; it stays wanted and is asked for again
 * after a reconnect. */
static void node_moved(void *owner, leash__node *n, const char *chan, size_t len) {
    leash__route *r = owner;
    (void)n;
    leash__log(&r->env->log, LEASH_LOG_WARN,
               "a subscription was refused with MOVED: is the server part of a cluster? (set "
               "topology to LEASH_TOPOLOGY_CLUSTER)");
    (void)chan, (void)len;
}

/* The node refused a subscription: it is the only one, so every waiter
 * polls. */
static void node_refused(void *owner, leash__node *n, const char *why) {
    leash__route *r = owner;

    leash__node_say_refused(n, why, "waiters poll instead");
    leash__route_polls(r);
}

static const leash__node_hooks node_hooks = {node_confirmed, node_gone, node_moved, node_message,
                                             node_refused};

leash__route *leash__route_single_new(leash__env *env, const leash__dialect *d,
                                      const leash__route_cfg *cfg) {
    single *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return NULL;
    s->base.ops = &single_ops;
    s->base.env = env;
    s->base.dialect = d;
    s->base.cfg = cfg;
    s->base.orders_queues = 1;
    leash__route_init_sharded(&s->base, 0);
    leash__node_init(&s->node, env, cfg->conn, &s->base.sharded, &node_hooks, s);
    return &s->base;
}
