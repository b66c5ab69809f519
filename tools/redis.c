/* SPDX-License-Identifier: MIT */
/*
 * The servers of a topology, through hiredis's blocking API: a CLI asks
 * one question at a time and waits for the answer, so an event loop would
 * only add code. A cluster is learnt from CLUSTER SLOTS of a seed and
 * corrected by MOVED answers; a key's slot comes from CLUSTER KEYSLOT, so
 * that the hash function lives in one place (the server).
 */
#include "cli.h"

#include "dialect/dialect.h" /* the Redisson channel, leash's companion names */
#include "wire/conn.h"       /* leash__info_version */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void set_err(cli_conn *c, const char *what, const cli_node *n, const char *why) {
    snprintf(c->err, sizeof(c->err), "%.40s %.300s: %.600s", what, n->label, why);
}

/* Written from u, not n->url, so that gcc -O3 sees no overlap. */
static void label_of(char *label, size_t size, const leash_url *u) {
    if (u->unix_path[0] != '\0')
        snprintf(label, size, "%s", u->unix_path);
    else if (strchr(u->host, ':') != NULL)
        snprintf(label, size, "[%s]:%d", u->host, u->port);
    else
        snprintf(label, size, "%s:%d", u->host, u->port);
}

int cli_node_add(cli_conn *c, const leash_url *u) {
    int i;
    cli_node *n;

    for (i = 0; i < c->nnodes; i++) {
        const leash_url *o = &c->nodes[i].url;
        if (strcmp(o->host, u->host) == 0 && o->port == u->port &&
            strcmp(o->unix_path, u->unix_path) == 0)
            return i;
    }
    if (c->nnodes == CLI_NODES_MAX)
        return -1;
    n = &c->nodes[c->nnodes];
    memset(n, 0, sizeof(*n));
    n->url = *u;
    n->master = 1;
    label_of(n->label, sizeof(n->label), u);
    return c->nnodes++;
}

static void node_drop(cli_node *n) {
    if (n->rc != NULL)
        redisFree(n->rc);
    n->rc = NULL;
}

void cli_node_retarget(cli_node *n, const leash_url *u) {
    node_drop(n);
    n->url = *u;
    n->down = 0;
    label_of(n->label, sizeof(n->label), u);
}

static redisReply *raw_cmd(cli_conn *c, cli_node *n, int argc, const char **argv,
                           const size_t *lens) {
    redisReply *r = redisCommandArgv(n->rc, argc, argv, lens);
    if (r == NULL) {
        set_err(c, "lost the connection to", n, n->rc->errstr);
        node_drop(n);
        n->down = 1;
    }
    return r;
}

int cli_node_pipeline(cli_conn *c, int i, const cli_cmd *cmds, size_t n, redisReply **out) {
    cli_node *nd = &c->nodes[i];
    size_t k, got = 0;
    void *r;

    if (cli_node_open(c, nd) != 0)
        return -1;
    for (k = 0; k < n; k++)
        if (redisAppendCommandArgv(nd->rc, cmds[k].argc, (const char **)cmds[k].argv,
                                   cmds[k].lens) != REDIS_OK)
            break;
    for (; k == n && got < n; got++) {
        if (redisGetReply(nd->rc, &r) != REDIS_OK)
            break;
        out[got] = r;
    }
    if (got == n)
        return 0;
    while (got > 0)
        freeReplyObject(out[--got]);
    set_err(c, "lost the connection to", nd, nd->rc->errstr[0] ? nd->rc->errstr : "out of memory");
    node_drop(nd);
    nd->down = 1;
    return -1;
}

int cli_node_open(cli_conn *c, cli_node *n) {
    struct timeval tv = {c->timeout_ms / 1000, (c->timeout_ms % 1000) * 1000};
    redisReply *r;
    char db[16];
    const char *argv[3];
    int argc = 0;

    if (n->rc != NULL)
        return 0;
    if (n->down) {
        set_err(c, "no answer earlier from", n, "not tried again");
        return -1;
    }
    if (n->url.unix_path[0] != '\0') {
        n->rc = redisConnectUnixWithTimeout(n->url.unix_path, tv);
    } else if (c->tls) {
        char why[512];
        int fd = cli_tls_prepare(c) == 0
                     ? cli_tls_connect(c, n->url.host, n->url.port, why, sizeof(why))
                     : -1;
        if (fd < 0) {
            set_err(c, "cannot connect to", n, c->tls_ctx != NULL ? why : c->err);
            n->down = 1;
            return -1;
        }
        n->rc = redisConnectFd(fd);
    } else {
        n->rc = redisConnectWithTimeout(n->url.host, n->url.port, tv);
    }
    if (n->rc == NULL || n->rc->err) {
        set_err(c, "cannot connect to", n, n->rc ? n->rc->errstr : "out of memory");
        node_drop(n);
        n->down = 1;
        return -1;
    }
    redisSetTimeout(n->rc, tv);
    if (c->password != NULL) {
        argv[argc++] = "AUTH";
        if (c->username != NULL)
            argv[argc++] = c->username;
        argv[argc++] = c->password;
        r = raw_cmd(c, n, argc, argv, NULL);
        if (r == NULL)
            return -1;
        if (r->type == REDIS_REPLY_ERROR) {
            set_err(c, "AUTH refused by", n, r->str);
            freeReplyObject(r);
            node_drop(n);
            return -1;
        }
        freeReplyObject(r);
    }
    if (c->db != 0) {
        snprintf(db, sizeof(db), "%d", c->db);
        argv[0] = "SELECT";
        argv[1] = db;
        r = raw_cmd(c, n, 2, argv, NULL);
        if (r == NULL)
            return -1;
        if (r->type == REDIS_REPLY_ERROR) {
            set_err(c, "SELECT refused by", n, r->str);
            freeReplyObject(r);
            node_drop(n);
            return -1;
        }
        freeReplyObject(r);
    }
    return 0;
}

redisReply *cli_node_cmd(cli_conn *c, int i, int argc, const char **argv, const size_t *lens) {
    if (cli_node_open(c, &c->nodes[i]) != 0)
        return NULL;
    return raw_cmd(c, &c->nodes[i], argc, argv, lens);
}

/* "host:port" as a server writes it in MOVED and CLUSTER SLOTS (an IPv6
 * address without brackets): the node's index, learnt if new. */
static int node_named(cli_conn *c, const char *host, size_t hlen, long port) {
    leash_url u;

    memset(&u, 0, sizeof(u));
    if (hlen == 0 || hlen > LEASH_URL_HOST_MAX || port < 1 || port > 65535)
        return -1;
    memcpy(u.host, host, hlen);
    u.port = (int)port;
    return cli_node_add(c, &u);
}

static int load_slots(cli_conn *c, int seed) {
    const char *argv[] = {"CLUSTER", "SLOTS"};
    redisReply *r = cli_node_cmd(c, seed, 2, argv, NULL);
    size_t i;
    int n, s;

    if (r == NULL)
        return -1;
    if (r->type != REDIS_REPLY_ARRAY) {
        set_err(c, "CLUSTER SLOTS failed on", &c->nodes[seed],
                r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
        freeReplyObject(r);
        return -1;
    }
    for (n = 0; n < c->nnodes; n++)
        c->nodes[n].master = 0;
    for (i = 0; i < r->elements; i++) {
        redisReply *e = r->element[i], *m;
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3)
            continue;
        m = e->element[2];
        if (m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
            m->element[0]->type != REDIS_REPLY_STRING || m->element[1]->type != REDIS_REPLY_INTEGER)
            continue;
        n = node_named(c, m->element[0]->str, m->element[0]->len, (long)m->element[1]->integer);
        if (n < 0)
            continue;
        c->nodes[n].master = 1;
        for (s = (int)e->element[0]->integer; s <= (int)e->element[1]->integer && s < 16384; s++)
            if (s >= 0)
                c->slot_node[s] = (short)n;
    }
    freeReplyObject(r);
    return 0;
}

int cli_conn_open(cli_conn *c) {
    int i, ok = 0;

    for (i = 0; i < 16384; i++)
        c->slot_node[i] = -1;
    c->nseeds = c->nnodes;
    if (c->topology == LEASH_TOPOLOGY_CLUSTER) {
        for (i = 0; i < c->nseeds && !ok; i++)
            ok = load_slots(c, i) == 0;
        return ok ? 0 : -1;
    }
    for (i = 0; i < c->nnodes; i++) {
        if (cli_node_open(c, &c->nodes[i]) == 0)
            ok++;
        else if (c->topology == LEASH_TOPOLOGY_SINGLE)
            return -1;
    }
    /* Redlock: the servers that answer are shown; none is unreachable. */
    return ok > 0 ? 0 : -1;
}

void cli_conn_close(cli_conn *c) {
    int i;
    for (i = 0; i < c->nnodes; i++)
        node_drop(&c->nodes[i]);
    cli_tls_close(c);
}

void cli_conn_retry(cli_conn *c) {
    int i;
    for (i = 0; i < c->nnodes; i++)
        c->nodes[i].down = 0;
}

int cli_is_master(const cli_conn *c, int i) {
    return c->nodes[i].master;
}

/* "MOVED 3999 127.0.0.1:6381" / "ASK ...": the node named, or -1. */
static int redirect_node(cli_conn *c, const char *msg) {
    const char *addr = strchr(msg, ' '), *colon;
    if (addr == NULL || (addr = strchr(addr + 1, ' ')) == NULL)
        return -1;
    addr++;
    colon = strrchr(addr, ':');
    if (colon == NULL)
        return -1;
    return node_named(c, addr, (size_t)(colon - addr), strtol(colon + 1, NULL, 10));
}

redisReply *cli_key_cmd(cli_conn *c, int *node, int argc, const char **argv, const size_t *lens) {
    int hops;
    redisReply *r = NULL;

    for (hops = 0; hops <= CLI_REDIRECTS_MAX; hops++) {
        int to;
        r = cli_node_cmd(c, *node, argc, argv, lens);
        if (r == NULL || c->topology != LEASH_TOPOLOGY_CLUSTER || r->type != REDIS_REPLY_ERROR)
            return r;
        if (strncmp(r->str, "MOVED ", 6) == 0) {
            to = redirect_node(c, r->str);
            if (to < 0)
                return r;
            c->nodes[to].master = 1;
            c->slot_node[strtol(r->str + 6, NULL, 10) & 16383] = (short)to;
            *node = to;
        } else if (strncmp(r->str, "ASK ", 4) == 0) {
            const char *asking[] = {"ASKING"};
            redisReply *a;
            to = redirect_node(c, r->str);
            if (to < 0)
                return r;
            freeReplyObject(r);
            a = cli_node_cmd(c, to, 1, asking, NULL);
            if (a == NULL)
                return NULL;
            freeReplyObject(a);
            return cli_node_cmd(c, to, argc, argv, lens);
        } else {
            return r;
        }
        freeReplyObject(r);
    }
    snprintf(c->err, sizeof(c->err), "more than %d redirections", CLI_REDIRECTS_MAX);
    return NULL;
}

int cli_key_node(cli_conn *c, const char *key, size_t len, int *node) {
    const char *argv[] = {"CLUSTER", "KEYSLOT", key};
    size_t lens[] = {7, 7, len};
    redisReply *r;
    int i;

    if (c->topology != LEASH_TOPOLOGY_CLUSTER)
        return 0;
    for (i = 0; i < c->nnodes; i++) {
        r = cli_node_cmd(c, i, 3, argv, lens);
        if (r == NULL)
            continue;
        if (r->type == REDIS_REPLY_INTEGER && r->integer >= 0 && r->integer < 16384 &&
            c->slot_node[r->integer] >= 0) {
            *node = c->slot_node[r->integer];
        } else {
            /* A slot nobody serves (yet): ask this node; MOVED corrects. */
            *node = i;
        }
        freeReplyObject(r);
        return 0;
    }
    return -1;
}

int cli_scan(cli_conn *c, int i, const char *pattern,
             void (*fn)(const char *key, size_t len, void *arg), void *arg) {
    char cursor[32] = "0";
    const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "500"};
    redisReply *r;
    size_t k;

    do {
        r = cli_node_cmd(c, i, 6, argv, NULL);
        if (r == NULL)
            return -1;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
            set_err(c, "SCAN failed on", &c->nodes[i],
                    r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            freeReplyObject(r);
            return -1;
        }
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (k = 0; k < r->element[1]->elements; k++) {
            redisReply *e = r->element[1]->element[k];
            if (e->type == REDIS_REPLY_STRING && memchr(e->str, '\0', e->len) == NULL)
                fn(e->str, e->len, arg);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

int cli_server_version(redisContext *rc) {
    redisReply *r = redisCommand(rc, "INFO server");
    int v = r != NULL && r->type == REDIS_REPLY_STRING ? leash__info_version(r->str) : 0;

    if (r != NULL)
        freeReplyObject(r);
    return v;
}

char *cli_redisson_channel(const cli_conn *c, const char *name, size_t *len) {
    leash__names n;
    leash__logger quiet = {0};
    char *chan;

    *len = 0;
    if (leash__dialect_redisson.names(&n, &quiet, c->prefix, name, c->db) != LEASH_OK)
        return NULL;
    if ((chan = malloc(n.channel_len + 1)) != NULL) {
        memcpy(chan, n.channel, n.channel_len + 1);
        *len = n.channel_len;
    }
    leash__names_clear(&n);
    return chan;
}

size_t cli_companion(char *out, const char *key, size_t len, const char *kind) {
    size_t klen = strlen(kind);

    leash__companion(out, key, len, kind, klen);
    return leash__companion_len(key, len, klen);
}
