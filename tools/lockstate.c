/* SPDX-License-Identifier: MIT */
/*
 * One lock's state as one server has it, read (never written): one lock
 * is read by the library's own state script (leash__state_args: TYPE,
 * the value, PTTL, TIME and the subscribers of the lock's channel in one
 * snapshot), the locks of `ls` by pipelined TYPE, PTTL, value and TIME
 * (a state caught while a script ran between them can be a mix of before
 * and after); either way the library's reader makes a state of the
 * replies (leash__state_read, src/dialect/dialect.h): leash's mutex and
 * family layouts, then Redisson's RLock and read-write lock. The layouts
 * are known there alone, and leash_lock_state reads them the same way.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

const char *cli_kind_name(int kind) {
    switch (kind) {
    case LEASH__STATE_NONE:
        return "none";
    case LEASH__STATE_MUTEX:
        return "mutex";
    case LEASH__STATE_FAIR:
        return "fair";
    case LEASH__STATE_RW:
        return "rwlock";
    case LEASH__STATE_SEMAPHORE:
        return "semaphore";
    case LEASH__STATE_FAMILY:
        return "family";
    case LEASH__STATE_REDISSON:
        return "redisson";
    case LEASH__STATE_REDISSON_RW:
        return "redisson-rw";
    default:
        return "other";
    }
}

void cli_lockstate_clear(cli_lockstate *s) {
    free(s->holders);
    free(s->waiters);
    memset(s, 0, sizeof(*s));
}

/* The command that reads the value of a key of TYPE answer t, or NULL:
 * nothing to read (no dialect keeps a lock in such a key). */
static const char *value_cmd(const redisReply *t) {
    return t->type == REDIS_REPLY_STATUS ? leash__state_value_cmd(t->str) : NULL;
}

/* s from the library's reader's state st (whose holders go with it). */
static void take_state(leash__state *st, cli_lockstate *s) {
    s->kind = st->kind;
    s->ttl_ms = st->ttl_ms;
    s->fence = st->fence;
    s->marked = st->marked;
    s->permits = st->permits;
    s->server_ms = st->server_ms;
    s->holders = st->holders;
    s->nholders = st->nholders;
    s->waiters = st->waiters;
    s->nwaiters = st->nwaiters;
    s->subscribers = st->subscribers;
}

/* The lock in what TYPE, the value command and PTTL of a key answered; s
 * has its node and server_ms. 0, or -1 without memory. */
static int read_value(const char *type, const redisReply *v, const redisReply *ttl,
                      cli_lockstate *s) {
    int64_t pttl = ttl != NULL && ttl->type == REDIS_REPLY_INTEGER ? ttl->integer : -1;
    leash__state st;

    if (leash__state_read(type, v, pttl, s->server_ms, &st) != 0)
        return -1;
    take_state(&st, s);
    return 0;
}

/* One script reads the key, its TTL, the server's clock and the
 * subscribers of leash's channel for the lock (the library's read,
 * dialect/state.c). */
int cli_lock_read(cli_conn *c, int *node, const char *key, size_t len, cli_lockstate *s) {
    const char *argv[LEASH__STATE_ARGS_MAX];
    size_t lens[LEASH__STATE_ARGS_MAX], clen;
    char kind[32], *chan = malloc(2 * len + sizeof(kind) + 3);
    redisReply *r = NULL;
    leash__state st;
    int rc = -1, argc;

    memset(s, 0, sizeof(*s));
    s->ttl_ms = -1;
    s->subscribers = -1;
    if (chan == NULL) {
        snprintf(c->err, sizeof(c->err), "out of memory");
        return -1;
    }
    snprintf(kind, sizeof(kind), "released:%d", c->db);
    clen = cli_companion(chan, key, len, kind);
    argc = leash__state_args(key, len, chan, clen, argv, lens);
    if ((r = cli_key_cmd(c, node, argc, argv, lens)) == NULL)
        goto out;
    snprintf(s->node, sizeof(s->node), "%s", c->nodes[*node].label);
    switch (leash__state_parse(r, &st)) {
    case 0:
        take_state(&st, s);
        rc = 0;
        break;
    case 1:
        snprintf(c->err, sizeof(c->err), "%s: %s", s->node,
                 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply to the state read");
        break;
    default:
        snprintf(c->err, sizeof(c->err), "out of memory");
        break;
    }
out:
    if (r)
        freeReplyObject(r);
    free(chan);
    return rc;
}

/* Whether the pipeline's replies for one key settle it: no error (a
 * redirection, a type that changed under it). */
static int settled(const redisReply *t, const redisReply *ttl, const redisReply *v) {
    if (t->type != REDIS_REPLY_STATUS || ttl->type == REDIS_REPLY_ERROR)
        return 0;
    if (value_cmd(t) == NULL)
        return 1;
    return v != NULL && v->type != REDIS_REPLY_ERROR;
}

int cli_lock_read_many(cli_conn *c, int node, char *const *keys, const size_t *lens, size_t n,
                       cli_lockstate *out, int *up) {
    /* Per key: TYPE and PTTL, then its value; and the server's clock. */
    cli_cmd *cmds = calloc(2 * n + 1, sizeof(*cmds));
    redisReply **r = calloc(2 * n + 1, sizeof(*r)), **val = calloc(n + 1, sizeof(*val));
    size_t i, k, nv = 0, got = 0, vgot = 0; /* replies held */
    int64_t now = -1;
    int rc = -1, at;

    for (i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        out[i].ttl_ms = -1;
        up[i] = 0;
    }
    if (cmds == NULL || r == NULL || val == NULL) {
        snprintf(c->err, sizeof(c->err), "out of memory");
        goto done;
    }
    for (i = 0; i < n; i++) {
        cmds[2 * i] = (cli_cmd){2, {"TYPE", keys[i]}, {4, lens[i]}};
        cmds[2 * i + 1] = (cli_cmd){2, {"PTTL", keys[i]}, {4, lens[i]}};
    }
    cmds[2 * n] = (cli_cmd){1, {"TIME"}, {4}};
    if (cli_node_pipeline(c, node, cmds, 2 * n + 1, r) != 0)
        goto done;
    got = 2 * n + 1;
    if (r[2 * n]->type == REDIS_REPLY_ARRAY && r[2 * n]->elements == 2)
        now = strtoll(r[2 * n]->element[0]->str, NULL, 10) * 1000 +
              strtoll(r[2 * n]->element[1]->str, NULL, 10) / 1000;
    for (i = 0; i < n; i++) {
        const char *cmd = value_cmd(r[2 * i]);
        if (cmd != NULL)
            cmds[nv++] = (cli_cmd){2, {cmd, keys[i]}, {strlen(cmd), lens[i]}};
    }
    if (nv > 0 && cli_node_pipeline(c, node, cmds, nv, val) != 0)
        goto done;
    vgot = nv;
    rc = 0;
    for (i = 0, k = 0; i < n; i++) {
        redisReply *v = value_cmd(r[2 * i]) != NULL ? val[k++] : NULL;
        at = node;
        if (!settled(r[2 * i], r[2 * i + 1], v) || now < 0) {
            up[i] = cli_lock_read(c, &at, keys[i], lens[i], &out[i]) == 0;
            continue;
        }
        snprintf(out[i].node, sizeof(out[i].node), "%s", c->nodes[node].label);
        out[i].server_ms = now;
        up[i] = read_value(r[2 * i]->str, v, r[2 * i + 1], &out[i]) == 0;
    }
done:
    for (i = 0; i < got; i++)
        freeReplyObject(r[i]);
    for (i = 0; i < vgot; i++)
        freeReplyObject(val[i]);
    free(cmds);
    free(r);
    free(val);
    return rc;
}

const char *cli_majority(const cli_lockstate *s, int n, int *agree) {
    int i, j, k;

    *agree = 0;
    for (i = 0; i < n; i++) {
        if (s[i].nholders != 1)
            continue;
        for (k = 0, j = 0; j < n; j++)
            if (s[j].nholders == 1 && strcmp(s[j].holders[0].token, s[i].holders[0].token) == 0)
                k++;
        if (k > *agree)
            *agree = k;
        if (k >= n / 2 + 1)
            return s[i].holders[0].token;
    }
    return NULL;
}
