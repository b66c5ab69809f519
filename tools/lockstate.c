/*
 * One lock's state as one server has it, read (never written) from the
 * layouts of src/dialect: the mutex's string "<token>:<w>:<count>:<fence>"
 * (dialect/leash.c), the lock family's hash (dialect/family.c), and
 * Redisson's RLock hash of "<uuid>:<thread>" -> count. The reads are
 * separate commands, so a state caught while a script ran between them
 * can be a mix of before and after; watch reads again.
 */
#include "cli.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

const char *cli_kind_name(int kind) {
    switch (kind) {
    case CLI_KIND_NONE:
        return "none";
    case CLI_KIND_MUTEX:
        return "mutex";
    case CLI_KIND_FAIR:
        return "fair";
    case CLI_KIND_RW:
        return "rwlock";
    case CLI_KIND_SEMAPHORE:
        return "semaphore";
    case CLI_KIND_FAMILY:
        return "family";
    case CLI_KIND_REDISSON:
        return "redisson";
    default:
        return "other";
    }
}

void cli_lockstate_clear(cli_lockstate *s) {
    free(s->holders);
    free(s->waiters);
    memset(s, 0, sizeof(*s));
}

static redisReply *key1(cli_conn *c, int *node, const char *cmd, const char *key, size_t len) {
    const char *argv[] = {cmd, key};
    size_t lens[] = {strlen(cmd), len};
    return cli_key_cmd(c, node, 2, argv, lens);
}

static int64_t server_ms(cli_conn *c, int node) {
    const char *argv[] = {"TIME"};
    redisReply *r = cli_node_cmd(c, node, 1, argv, NULL);
    int64_t ms = -1;

    if (r == NULL)
        return -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        ms = strtoll(r->element[0]->str, NULL, 10) * 1000 +
             strtoll(r->element[1]->str, NULL, 10) / 1000;
    freeReplyObject(r);
    return ms;
}

static int all_digits(const char *p, size_t n) {
    size_t i;
    if (n == 0)
        return 0;
    for (i = 0; i < n; i++)
        if (!isdigit((unsigned char)p[i]))
            return 0;
    return 1;
}

static cli_holder *add(cli_holder **v, size_t *n) {
    cli_holder *g = realloc(*v, (*n + 1) * sizeof(**v));
    if (g == NULL)
        return NULL;
    *v = g;
    memset(&g[*n], 0, sizeof(**v));
    g[*n].ttl_ms = -1;
    return &g[(*n)++];
}

static void copy_token(cli_holder *h, const char *p, size_t n) {
    if (n >= sizeof(h->token))
        n = sizeof(h->token) - 1;
    memcpy(h->token, p, n);
    h->token[n] = '\0';
}

static int hex_token(const char *p) {
    return p[0] != '\0' && strspn(p, "0123456789abcdef") == strlen(p);
}

/* A waiter the lock is kept for, at place `place`. */
static int add_reserver(cli_lockstate *s, const char *token, int64_t place) {
    cli_holder *h = add(&s->waiters, &s->nwaiters);
    if (h == NULL)
        return 0;
    copy_token(h, token, strlen(token));
    h->mode = 'm';
    h->count = place;
    return 1;
}

/* "<token>:<w>:<count>:<fence>", then ":<token>:<since>" for each
 * starving waiter queued for the grants after this hold, oldest first;
 * count 0: nobody holds it, it is kept for token (README "Fairness"). The
 * waiters it is kept or queued for are its waiters, in order. */
static int read_mutex(const redisReply *v, cli_lockstate *s) {
    char buf[4096];
    char *w, *cnt, *fence, *next;
    cli_holder *h;
    int64_t place = 1;

    if (v->type != REDIS_REPLY_STRING || v->len >= sizeof(buf))
        return 0;
    memcpy(buf, v->str, v->len);
    buf[v->len] = '\0';
    if ((w = strchr(buf, ':')) == NULL || (cnt = strchr(w + 1, ':')) == NULL ||
        (fence = strchr(cnt + 1, ':')) == NULL)
        return 0;
    *w++ = *cnt++ = *fence++ = '\0';
    next = strchr(fence, ':');
    if (next != NULL)
        *next++ = '\0';
    if (!hex_token(buf) || (strcmp(w, "0") != 0 && strcmp(w, "1") != 0) ||
        !all_digits(cnt, strlen(cnt)) || !all_digits(fence, strlen(fence)))
        return 0;
    s->marked = w[0] == '1';
    s->kind = CLI_KIND_MUTEX;
    if (strcmp(cnt, "0") == 0) {
        if (!add_reserver(s, buf, place++))
            return 0;
    } else {
        if ((h = add(&s->holders, &s->nholders)) == NULL)
            return 0;
        copy_token(h, buf, strlen(buf));
        h->mode = 'm';
        h->count = strtoll(cnt, NULL, 10);
        h->fence = strtoull(fence, NULL, 10);
        h->ttl_ms = s->ttl_ms;
        s->fence = h->fence;
    }
    while (next != NULL) {
        char *token = next, *since = strchr(next, ':');
        if (since == NULL)
            return 0;
        *since++ = '\0';
        next = strchr(since, ':');
        if (next != NULL)
            *next++ = '\0';
        if (!hex_token(token) || !all_digits(since, strlen(since)) ||
            !add_reserver(s, token, place++))
            return 0;
    }
    return 1;
}

/* Redisson: every field "<uuid>:<digits>", every value an integer. */
static int read_redisson(const redisReply *v, cli_lockstate *s) {
    size_t i;
    if (v->elements == 0)
        return 0;
    for (i = 0; i + 1 < v->elements; i += 2) {
        const redisReply *f = v->element[i], *n = v->element[i + 1];
        const char *colon = f->len ? memchr(f->str, ':', f->len) : NULL;
        size_t id = colon ? (size_t)(colon - f->str) : 0;
        if (colon == NULL || id < 8 || strspn(f->str, "0123456789abcdefABCDEF-") != id ||
            !all_digits(colon + 1, f->len - id - 1) || !all_digits(n->str, n->len))
            return 0;
    }
    for (i = 0; i + 1 < v->elements; i += 2) {
        cli_holder *h = add(&s->holders, &s->nholders);
        if (h == NULL)
            return 0;
        copy_token(h, v->element[i]->str, v->element[i]->len);
        h->mode = 'R';
        h->count = strtoll(v->element[i + 1]->str, NULL, 10);
        h->ttl_ms = s->ttl_ms;
    }
    s->kind = CLI_KIND_REDISSON;
    return 1;
}

static const redisReply *field(const redisReply *v, const char *name, size_t nlen) {
    size_t i;
    for (i = 0; i + 1 < v->elements; i += 2)
        if (v->element[i]->len == nlen && memcmp(v->element[i]->str, name, nlen) == 0)
            return v->element[i + 1];
    return NULL;
}

static int place_cmp(const void *a, const void *b) {
    const cli_holder *x = a, *y = b;
    return (x->count > y->count) - (x->count < y->count);
}

/* The number after the skip-th colon of s, or -1. */
static long long part(const char *s, int skip) {
    while (skip > 0 && s != NULL) {
        s = strchr(s, ':');
        if (s != NULL)
            s++;
        skip--;
    }
    return s != NULL && isdigit((unsigned char)*s) ? strtoll(s, NULL, 10) : -1;
}

/* The family's hash (dialect/family.c): h<token> =
 * "<mode>:<count>:<fence>:<client>:<expiry>" per holder, q<token> =
 * "<mode>:<client>:<expiry>:<place>" per waiter; entries whose lease ran
 * out are left out: they hold nothing, and the next script that meets
 * them drops them. */
static int read_family(const redisReply *v, cli_lockstate *s) {
    const redisReply *f = field(v, "fence", 5), *p = field(v, "permits", 7);
    int modes[128] = {0};
    size_t i;

    s->fence = strtoull(f->str, NULL, 10);
    s->permits = p ? strtoll(p->str, NULL, 10) : 0;
    for (i = 0; i + 1 < v->elements; i += 2) {
        const redisReply *k = v->element[i], *val = v->element[i + 1];
        const char *tok = k->str + 1;
        size_t tlen = k->len ? k->len - 1 : 0;
        int holder = k->len > 0 && k->str[0] == 'h';
        int64_t exp;
        cli_holder *h;
        char buf[160];

        if (tlen != 32 || (!holder && k->str[0] != 'q') || val->len >= sizeof(buf) || val->len < 2)
            continue;
        memcpy(buf, val->str, val->len);
        buf[val->len] = '\0';
        exp = part(buf, holder ? 4 : 2);
        if (exp <= s->server_ms)
            continue;
        h = holder ? add(&s->holders, &s->nholders) : add(&s->waiters, &s->nwaiters);
        if (h == NULL)
            return -1;
        copy_token(h, tok, tlen);
        h->mode = buf[0];
        h->ttl_ms = exp - s->server_ms;
        modes[(unsigned char)buf[0] & 127] = 1;
        if (holder) {
            long long fence = part(buf, 2);
            h->count = part(buf, 1);
            h->fence = fence > 0 ? (uint64_t)fence : 0;
        } else {
            h->count = part(buf, 3);
        }
    }
    if (s->nwaiters > 1)
        qsort(s->waiters, s->nwaiters, sizeof(*s->waiters), place_cmp);
    s->kind = modes['f']                 ? CLI_KIND_FAIR
              : modes['r'] || modes['w'] ? CLI_KIND_RW
              : modes['s'] || p != NULL  ? CLI_KIND_SEMAPHORE
                                         : CLI_KIND_FAMILY;
    return 0;
}

/* The lock in what TYPE, the value (GET or HGETALL) and PTTL of a key
 * answered; s has its node and server_ms. 0, or -1 without memory. */
static int read_value(const char *type, const redisReply *v, const redisReply *ttl,
                      cli_lockstate *s) {
    if (strcmp(type, "none") == 0)
        return 0;
    s->kind = CLI_KIND_OTHER;
    if (strcmp(type, "string") != 0 && strcmp(type, "hash") != 0)
        return 0;
    s->ttl_ms = ttl->type == REDIS_REPLY_INTEGER && ttl->integer >= 0 ? ttl->integer : -1;
    if (v->type == REDIS_REPLY_NIL) {
        s->kind = CLI_KIND_NONE; /* gone between TYPE and GET */
    } else if (v->type == REDIS_REPLY_STRING) {
        read_mutex(v, s);
    } else if (v->type == REDIS_REPLY_ARRAY) {
        const redisReply *f = field(v, "fence", 5);
        if (f != NULL && f->type == REDIS_REPLY_STRING)
            return read_family(v, s);
        read_redisson(v, s);
    }
    return 0;
}

int cli_lock_read(cli_conn *c, int *node, const char *key, size_t len, cli_lockstate *s) {
    redisReply *t = NULL, *v = NULL, *ttl = NULL;
    int rc = -1;

    memset(s, 0, sizeof(*s));
    s->ttl_ms = -1;
    if ((t = key1(c, node, "TYPE", key, len)) == NULL)
        goto out;
    if (t->type != REDIS_REPLY_STATUS) {
        snprintf(c->err, sizeof(c->err), "TYPE: %s",
                 t->type == REDIS_REPLY_ERROR ? t->str : "unexpected reply");
        goto out;
    }
    snprintf(s->node, sizeof(s->node), "%s", c->nodes[*node].label);
    if (strcmp(t->str, "string") == 0 || strcmp(t->str, "hash") == 0) {
        v = key1(c, node, strcmp(t->str, "string") == 0 ? "GET" : "HGETALL", key, len);
        ttl = v ? key1(c, node, "PTTL", key, len) : NULL;
        if (ttl == NULL || (s->server_ms = server_ms(c, *node)) < 0)
            goto out;
    }
    rc = read_value(t->str, v, ttl, s);
out:
    if (t)
        freeReplyObject(t);
    if (v)
        freeReplyObject(v);
    if (ttl)
        freeReplyObject(ttl);
    return rc;
}

/* The value command for what TYPE answered, or NULL: nothing to read. */
static const char *value_cmd(const redisReply *t) {
    if (t->type != REDIS_REPLY_STATUS)
        return NULL;
    return strcmp(t->str, "string") == 0 ? "GET" : strcmp(t->str, "hash") == 0 ? "HGETALL" : NULL;
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
