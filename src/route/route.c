/* SPDX-License-Identifier: MIT */
#include "route/route.h"

#include <string.h>

leash__req leash__req_posted;

void leash__route_init_sharded(leash__route *r, int shards) {
    int pubsub = r->cfg->conn->pubsub;

    /* LEASH_PUBSUB_OFF still publishes its releases, as AUTO would: other
     * clients of the same locks may listen. */
    r->sharded = pubsub == LEASH_PUBSUB_SHARDED ||
                 ((pubsub == LEASH_PUBSUB_AUTO || pubsub == LEASH_PUBSUB_OFF) && shards);
    r->polling = pubsub == LEASH_PUBSUB_OFF;
}

void leash__route_polls(leash__route *r) {
    if (r->polling)
        return;
    r->polling = 1;
    leash__route_polling_changed(r);
}

void leash__route_polling_changed(leash__route *r) {
    if (r->hooks != NULL && r->hooks->polling != NULL)
        r->hooks->polling(r->owner);
}

void leash__route_server_ready(leash__route *r, const leash__conn *conn) {
    if (!r->sharded || r->cfg->conn->pubsub == LEASH_PUBSUB_SHARDED ||
        conn->version >= LEASH__VERSION(7, 0, 0))
        return;
    r->sharded = 0;
    leash__log(&r->env->log, LEASH_LOG_INFO,
               "%s: %s: classic pub/sub (sharded pub/sub is Redis 7.0 and later)",
               leash__conn_role_name(conn),
               conn->version != 0 ? "a server before Redis 7.0"
                                  : "the server's version is not known");
}

static int wants_replicas(const leash__route *r, const leash__opdef *op) {
    return r->cfg->wait_replicas > 0 && (op->cls == LEASH__OP_GRANT || op->cls == LEASH__OP_RENEW);
}

void leash__route_prepare_cmd(const leash__route *r, const leash__opdef *op, leash__cmd *cmd) {
    if (wants_replicas(r, op))
        leash__cmd_wait(cmd, r->cfg->wait_replicas, r->cfg->wait_timeout_ms);
}

void leash__route_read(const leash__route *r, const leash__opdef *op, struct redisReply *reply,
                       int status, const leash__reply_info *info, leash__answer *out, size_t n,
                       const char *what) {
    long long acked = info->acked;
    size_t i;

    if (status != LEASH_OK) {
        for (i = 0; i < n; i++) {
            memset(&out[i], 0, sizeof(out[i]));
            out[i].status = status;
        }
        return;
    }
    op->parse(reply, out, n, &r->env->log, what);
    for (i = 0; i < n; i++) {
        out[i].sent_ms = info->written_at;
        out[i].resent = info->rewritten;
    }
    if (!wants_replicas(r, op) || acked >= r->cfg->wait_replicas)
        return;
    for (i = 0; i < n; i++)
        out[i].replicas_short = 1;
    leash__log(&r->env->log, LEASH_LOG_WARN,
               "%s of %s: %lld of %d replicas acknowledged within %lld ms", op->name, what, acked,
               r->cfg->wait_replicas, (long long)r->cfg->wait_timeout_ms);
}
