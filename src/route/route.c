#include "route/route.h"

#include <string.h>

leash__req leash__req_posted;

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
    for (i = 0; i < n; i++)
        out[i].sent_ms = info->written_at;
    if (!wants_replicas(r, op) || acked >= r->cfg->wait_replicas)
        return;
    for (i = 0; i < n; i++)
        out[i].replicas_short = 1;
    leash__log(&r->env->log, LEASH_LOG_WARN,
               "%s of %s: %lld of %d replicas acknowledged within %lld ms", op->name, what, acked,
               r->cfg->wait_replicas, (long long)r->cfg->wait_timeout_ms);
}
