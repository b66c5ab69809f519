/* SPDX-License-Identifier: MIT */
/*
 * `leash ls` and `leash show`: find lock keys (SCAN every server that has
 * keys: the one, each master, each Redlock server) and print their state.
 * With Redlock each name is read on every server, and the holder a
 * majority agrees on is the one that holds it.
 */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct view {
    char *key;
    size_t len;
    int node; /* where ls found it (single, cluster) */
    int n;    /* states: 1, or one per Redlock server */
    cli_lockstate *st;
    int *up; /* st[i] was read */
} view;

typedef struct views {
    view *v;
    size_t n, cap;
    /* The keys seen, by hash: 1 + an index into v, or 0 for a free slot
     * (open addressing, at most half full): a key a Redlock server or a
     * SCAN gives again is found at once, whatever the count. */
    size_t *slots, nslots;
    int failed;
    int scanning; /* the node being scanned */
} views;

/* Frees what v holds; it can be cleared again. */
static void view_clear(view *v) {
    int i;
    for (i = 0; i < v->n; i++)
        cli_lockstate_clear(&v->st[i]);
    free(v->st);
    free(v->up);
    free(v->key);
    v->st = NULL;
    v->up = NULL;
    v->key = NULL;
    v->n = 0;
}

/* Room for v's states: one, or one per Redlock server. */
static int view_alloc(cli_conn *c, view *v) {
    v->n = c->topology == LEASH_TOPOLOGY_REDLOCK ? c->nnodes : 1;
    v->st = calloc((size_t)v->n, sizeof(*v->st));
    v->up = calloc((size_t)v->n, sizeof(*v->up));
    if (v->st == NULL || v->up == NULL) {
        snprintf(c->err, sizeof(c->err), "out of memory");
        free(v->st);
        free(v->up);
        v->st = NULL;
        v->up = NULL;
        v->n = 0; /* nothing to show or clear */
        return -1;
    }
    return 0;
}

/* Reads v's key on its node, or on every Redlock server. 0, or -1 when
 * no server answered. */
static int view_read(cli_conn *c, view *v) {
    int i, any = 0;

    if (view_alloc(c, v) != 0)
        return -1;
    for (i = 0; i < v->n; i++) {
        int node = v->n > 1 ? i : v->node;
        v->up[i] = cli_lock_read(c, &node, v->key, v->len, &v->st[i]) == 0;
        if (!v->up[i])
            snprintf(v->st[i].node, sizeof(v->st[i].node), "%s", c->nodes[node].label);
        any |= v->up[i];
    }
    return any ? 0 : -1;
}

/* The state that stands for v: the one server's, or with Redlock the
 * first that holds what the majority holds (else the first with a lock). */
static const cli_lockstate *view_state(const view *v, const char **majority, int *agree) {
    int i;
    const char *m = NULL;

    *agree = 0;
    if (v->n > 1)
        m = cli_majority(v->st, v->n, agree);
    if (majority)
        *majority = m;
    for (i = 0; i < v->n; i++)
        if (m != NULL && v->st[i].nholders == 1 && strcmp(v->st[i].holders[0].token, m) == 0)
            return &v->st[i];
    for (i = 0; i < v->n; i++)
        if (v->st[i].kind > LEASH__STATE_OTHER)
            return &v->st[i];
    return &v->st[0];
}

/* Redlock: a hold's fence is the largest of those the servers of the
 * first majority to grant gave (route/quorum.c), and which servers those
 * were is the client's to know. Of the servers that agree on holder m,
 * any majority's largest lies between the needed-th smallest (*lo) and
 * the largest (*hi). 0 when there is no majority. */
static void majority_fence(const view *v, const char *m, uint64_t *lo, uint64_t *hi) {
    uint64_t f[LEASH_NODES_MAX], t;
    int i, j, k = 0;

    *lo = *hi = 0;
    for (i = 0; m != NULL && i < v->n && k < LEASH_NODES_MAX; i++)
        if (v->st[i].nholders == 1 && strcmp(v->st[i].holders[0].token, m) == 0)
            f[k++] = v->st[i].holders[0].fence;
    if (k < v->n / 2 + 1)
        return;
    for (i = 1; i < k; i++)
        for (j = i; j > 0 && f[j - 1] > f[j]; j--)
            t = f[j], f[j] = f[j - 1], f[j - 1] = t;
    *lo = f[v->n / 2];
    *hi = f[k - 1];
}

static size_t key_hash(const char *key, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    size_t i;
    for (i = 0; i < len; i++)
        h = (h ^ (unsigned char)key[i]) * 1099511628211ull;
    return (size_t)h;
}

/* The slot of key: where it is, or the free one where it goes. */
static size_t *key_slot(const views *vs, const char *key, size_t len) {
    size_t i = key_hash(key, len) & (vs->nslots - 1);
    for (;; i = (i + 1) & (vs->nslots - 1)) {
        const view *v = vs->slots[i] ? &vs->v[vs->slots[i] - 1] : NULL;
        if (v == NULL || (v->len == len && memcmp(v->key, key, len) == 0))
            return &vs->slots[i];
    }
}

/* Keeps the slots at most half full (a power of two). 0, or -1. */
static int slots_grow(views *vs) {
    size_t n = vs->nslots ? vs->nslots * 2 : 1024, i, *old = vs->slots, oldn = vs->nslots;

    if (vs->nslots >= 2 * (vs->n + 1))
        return 0;
    if ((vs->slots = calloc(n, sizeof(*vs->slots))) == NULL) {
        vs->slots = old;
        return -1;
    }
    vs->nslots = n;
    for (i = 0; i < oldn; i++)
        if (old[i])
            *key_slot(vs, vs->v[old[i] - 1].key, vs->v[old[i] - 1].len) = old[i];
    free(old);
    return 0;
}

static void on_key(const char *key, size_t len, void *arg) {
    views *vs = arg;
    size_t *slot;
    view *g;

    if (vs->failed || slots_grow(vs) != 0) {
        vs->failed = 1;
        return;
    }
    slot = key_slot(vs, key, len);
    if (*slot)
        return; /* Redlock: on another server too */
    if (vs->n == vs->cap) {
        size_t cap = vs->cap ? 2 * vs->cap : 256;
        if ((g = realloc(vs->v, cap * sizeof(*g))) == NULL) {
            vs->failed = 1;
            return;
        }
        vs->v = g;
        vs->cap = cap;
    }
    g = &vs->v[vs->n];
    memset(g, 0, sizeof(*g));
    if ((g->key = malloc(len + 1)) == NULL) {
        vs->failed = 1;
        return;
    }
    memcpy(g->key, key, len);
    g->key[len] = '\0';
    g->len = len;
    g->node = vs->scanning;
    vs->n++;
    *slot = vs->n;
}

static int view_cmp(const void *a, const void *b) {
    const view *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int d = memcmp(x->key, y->key, n);
    return d ? d : (x->len > y->len) - (x->len < y->len);
}

static void name_json(FILE *f, const cli_conn *c, const view *v) {
    size_t plen = strlen(c->prefix);
    fputs("{\"name\":", f);
    cli_json_str(f, v->key + plen, v->len - plen);
    fputs(",\"key\":", f);
    cli_json_str(f, v->key, v->len);
}

static void view_json(FILE *f, const cli_conn *c, const view *v) {
    uint64_t lo, hi;
    const char *m;
    int agree, i;
    const cli_lockstate *s = view_state(v, &m, &agree);

    name_json(f, c, v);
    if (v->n == 1) {
        fputc(',', f);
        cli_print_state_json(f, s);
        fputs("}", f);
        return;
    }
    fprintf(f, ",\"kind\":\"%s\",\"majority\":{\"holder\":", cli_kind_name(s->kind));
    if (m != NULL)
        cli_json_str(f, m, strlen(m));
    else
        fputs("null", f);
    majority_fence(v, m, &lo, &hi);
    if (m != NULL)
        fprintf(f, ",\"fence\":%" PRIu64 ",\"fence_max\":%" PRIu64, lo, hi);
    fprintf(f, ",\"servers\":%d,\"of\":%d,\"needed\":%d},\"servers\":[", agree, v->n, v->n / 2 + 1);
    for (i = 0; i < v->n; i++) {
        fputs(i ? ",{" : "{", f);
        if (v->up[i]) {
            cli_print_state_json(f, &v->st[i]);
        } else {
            fputs("\"server\":", f);
            cli_json_str(f, v->st[i].node, strlen(v->st[i].node));
            fputs(",\"unreachable\":true", f);
        }
        fputc('}', f);
    }
    fputs("]}", f);
}

/* The HOLDER column: who holds, as briefly as the kind allows. */
static const char *holder_text(const cli_lockstate *s, int full, char *buf, size_t size) {
    char tok[CLI_TOKEN_MAX + 4];

    if (s->nholders == 0)
        return "-";
    switch (s->kind) {
    case LEASH__STATE_RW:
    case LEASH__STATE_REDISSON_RW:
        if (s->holders[0].mode == 'w')
            snprintf(buf, size, "writer %s",
                     cli_token_text(s->holders[0].token, full, tok, sizeof(tok)));
        else
            snprintf(buf, size, "%zu reader%s", s->nholders, s->nholders == 1 ? "" : "s");
        return buf;
    case LEASH__STATE_SEMAPHORE:
        snprintf(buf, size, "%zu/%" PRId64 " permits", s->nholders, s->permits);
        return buf;
    default:
        if (s->nholders > 1) {
            snprintf(buf, size, "%zu holders", s->nholders);
            return buf;
        }
        return cli_token_text(s->holders[0].token, full, buf, size);
    }
}

static void view_line(FILE *f, const cli_conn *c, const view *v, int full) {
    const char *m;
    int agree;
    const cli_lockstate *s = view_state(v, &m, &agree);
    size_t plen = strlen(c->prefix), i;
    int64_t holds = 0, ttl = s->ttl_ms;
    char hb[CLI_TOKEN_MAX + 32], tb[32], fb[24], wb[24];
    uint64_t lo, hi;

    for (i = 0; i < s->nholders; i++) {
        /* Saturated: a key that is no leash's own can name any count. */
        holds = s->holders[i].count > 0 && holds > INT64_MAX - s->holders[i].count
                    ? INT64_MAX
                    : holds + s->holders[i].count;
        if (s->kind >= LEASH__STATE_FAIR && s->kind <= LEASH__STATE_FAMILY &&
            (i == 0 || s->holders[i].ttl_ms > ttl))
            ttl = s->holders[i].ttl_ms;
    }
    if (s->kind >= LEASH__STATE_FAIR && s->kind <= LEASH__STATE_FAMILY && s->nholders == 0)
        ttl = -1;
    majority_fence(v, m, &lo, &hi);
    if (m != NULL && lo != hi)
        snprintf(fb, sizeof(fb), ">=%" PRIu64, lo);
    else
        snprintf(fb, sizeof(fb), "%" PRIu64, m ? lo : s->fence);
    if (s->kind == LEASH__STATE_MUTEX)
        snprintf(wb, sizeof(wb), "%s", s->marked ? "marked" : "-");
    else if (s->kind == LEASH__STATE_REDISSON || s->kind == LEASH__STATE_REDISSON_RW)
        snprintf(wb, sizeof(wb), "-");
    else
        snprintf(wb, sizeof(wb), "%zu", s->nwaiters);
    cli_text_str(f, v->key + plen, v->len - plen);
    fprintf(f, "\t%s\t%s\t%" PRId64 "\t%s\t%s\t%s", cli_kind_name(s->kind),
            holder_text(s, full, hb, sizeof(hb)), holds, cli_ms_text(ttl, tb, sizeof(tb)),
            s->fence ? fb : "-", wb);
    if (v->n > 1)
        fprintf(f, "\t%d/%d%s", agree, v->n, m ? "" : " (no majority)");
    fputc('\n', f);
}

static int is_lock(const view *v) {
    int i;
    for (i = 0; i < v->n; i++)
        if (v->up[i] && v->st[i].kind > LEASH__STATE_OTHER)
            return 1;
    return 0;
}

/* The prefix as a SCAN pattern that matches itself only. */
static void glob_escape(char *out, const char *s) {
    for (; *s; s++) {
        if (strchr("*?[]\\", *s) != NULL)
            *out++ = '\\';
        *out++ = *s;
    }
    *out = '\0';
}

/* How many locks `ls` reads in one pipeline per server. */
#define LS_BATCH 1000

/* Reads the states of v[0..n), pipelined per server (cli_lock_read_many):
 * a cluster's keys on the master each was found on, Redlock's on every
 * server. A server that does not answer leaves its states unread: a key
 * read nowhere is not shown (one server, a cluster: named on stderr, and
 * -1), a Redlock server's part shows as unreachable. */
static int views_read(cli_conn *c, view *v, size_t n) {
    char **keys = calloc(n, sizeof(*keys));
    size_t *lens = calloc(n, sizeof(*lens)), *of = calloc(n, sizeof(*of)), i, m;
    cli_lockstate *st = calloc(n, sizeof(*st));
    int *up = calloc(n, sizeof(*up)), node, s, redlock = c->topology == LEASH_TOPOLOGY_REDLOCK;
    int rc = 0;

    if (keys == NULL || lens == NULL || of == NULL || st == NULL || up == NULL) {
        fprintf(stderr, "leash: out of memory\n");
        rc = -1;
        goto out;
    }
    for (i = 0; i < n; i++)
        if (view_alloc(c, &v[i]) != 0)
            rc = -1;
    for (node = 0; node < c->nnodes; node++) {
        for (i = 0, m = 0; i < n; i++) {
            if (v[i].n > 0 && (redlock || v[i].node == node)) {
                keys[m] = v[i].key;
                lens[m] = v[i].len;
                of[m++] = i;
            }
        }
        if (m == 0)
            continue;
        if (cli_lock_read_many(c, node, keys, lens, m, st, up) != 0 && !redlock) {
            fprintf(stderr, "leash: %s\n", c->err);
            rc = -1;
        }
        s = redlock ? node : 0;
        for (i = 0; i < m; i++) {
            view *w = &v[of[i]];
            w->st[s] = st[i]; /* its holders go with it */
            w->up[s] = up[i];
            if (!up[i])
                snprintf(w->st[s].node, sizeof(w->st[s].node), "%s", c->nodes[node].label);
        }
    }
out:
    free(keys);
    free(lens);
    free(of);
    free(st);
    free(up);
    return rc;
}

int cli_ls(cli_conn *c, const cli_args *a) {
    views vs = {0};
    char *pattern, *table = NULL;
    size_t table_len = 0;
    FILE *out = NULL;
    size_t i, b, shown = 0;
    int rc = CLI_OK, n;

    pattern = malloc(2 * strlen(c->prefix) + strlen(a->pattern) + 1);
    if (pattern == NULL)
        return CLI_UNREACHABLE;
    glob_escape(pattern, c->prefix);
    strcat(pattern, a->pattern);
    /* A server that cannot be read is named on stderr, and what the others
     * hold is still listed: the exit status says the list is partial.
     * (Redlock shows an unreachable server in each lock's AGREE.) */
    for (n = 0; n < c->nnodes; n++) {
        if (!cli_is_master(c, n))
            continue;
        vs.scanning = n;
        if (cli_scan(c, n, pattern, on_key, &vs) != 0 && c->topology != LEASH_TOPOLOGY_REDLOCK) {
            fprintf(stderr, "leash: %s (its locks are not listed)\n", c->err);
            rc = CLI_UNREACHABLE;
        }
    }
    free(pattern);
    if (vs.n > 1)
        qsort(vs.v, vs.n, sizeof(*vs.v), view_cmp);
    /* The states are read a batch at a time, in the order shown, and
     * freed once printed: memory grows with the names, not their states. */
    if (vs.failed) {
        fprintf(stderr, "leash: out of memory\n");
        rc = CLI_UNREACHABLE;
    } else if (!a->json && (out = open_memstream(&table, &table_len)) == NULL) {
        rc = CLI_UNREACHABLE;
    } else {
        if (a->json)
            fputc('[', stdout);
        else
            fprintf(out, "NAME\tKIND\tHOLDER\tHOLDS\tTTL\tFENCE\tWAITING%s\n",
                    c->topology == LEASH_TOPOLOGY_REDLOCK ? "\tAGREE" : "");
        for (b = 0; b < vs.n; b += LS_BATCH) {
            size_t nb = vs.n - b < LS_BATCH ? vs.n - b : LS_BATCH;
            if (views_read(c, &vs.v[b], nb) != 0)
                rc = CLI_UNREACHABLE;
            for (i = b; i < b + nb; i++) {
                if (is_lock(&vs.v[i])) {
                    if (a->json) {
                        if (shown)
                            fputc(',', stdout);
                        view_json(stdout, c, &vs.v[i]);
                    } else {
                        view_line(out, c, &vs.v[i], a->full);
                    }
                    shown++;
                }
                view_clear(&vs.v[i]);
            }
        }
        if (a->json) {
            fputs("]\n", stdout);
        } else {
            fclose(out);
            if (shown)
                cli_print_table(stdout, table, table_len);
            free(table);
        }
        if (rc == CLI_OK)
            rc = shown ? CLI_OK : CLI_NOT_FOUND;
    }
    for (i = 0; i < vs.n; i++)
        view_clear(&vs.v[i]);
    free(vs.v);
    free(vs.slots);
    return rc;
}

static void show_state(FILE *f, const cli_lockstate *s) {
    char tb[32];
    size_t i;

    fprintf(f, "server    %s\n", s->node);
    if (s->kind <= LEASH__STATE_OTHER) {
        fprintf(f, "state     %s\n", s->kind == LEASH__STATE_NONE ? "free (no key)" : "not a lock");
        return;
    }
    fprintf(f, "kind      %s\n", cli_kind_name(s->kind));
    fprintf(f, "ttl       %s\n", cli_ms_text(s->ttl_ms, tb, sizeof(tb)));
    if (s->fence)
        fprintf(f, "fence     %" PRIu64 "%s\n", s->fence,
                s->kind == LEASH__STATE_MUTEX ? "" : " (the last one given)");
    if (s->kind == LEASH__STATE_SEMAPHORE)
        fprintf(f, "permits   %zu of %" PRId64 " in use\n", s->nholders, s->permits);
    if (s->kind == LEASH__STATE_MUTEX)
        fprintf(f, "marked    %s\n",
                s->marked ? "yes (someone found it busy: its release and renewals publish)"
                          : "no (nobody waited)");
    if (s->kind == LEASH__STATE_REDISSON_RW)
        fprintf(f, "mode      %s\n", cli_rw_mode(s));
    fprintf(f, "holders   %zu\n", s->nholders);
    for (i = 0; i < s->nholders; i++) {
        const cli_holder *h = &s->holders[i];
        fprintf(f, "  %s", h->token);
        if (h->mode != 'm' && h->mode != 'R')
            fprintf(f, "  %c", h->mode);
        fprintf(f, "  holds %" PRId64, h->count);
        if (h->fence)
            fprintf(f, "  fence %" PRIu64, h->fence);
        fprintf(f, "  ttl %s\n", cli_ms_text(h->ttl_ms, tb, sizeof(tb)));
    }
    if (s->kind == LEASH__STATE_REDISSON || s->kind == LEASH__STATE_REDISSON_RW)
        return;
    /* A mutex queues only its starving waiters in Redis; the others wait
     * on its channel, and each waiting process is one subscriber there. */
    fprintf(f, "waiters   %zu%s\n", s->nwaiters,
            s->kind == LEASH__STATE_MUTEX ? " queued (waited LEASH_STARVE_MS)" : "");
    for (i = 0; i < s->nwaiters; i++)
        fprintf(f, "  %zu. %s  %c  place ttl %s\n", i + 1, s->waiters[i].token, s->waiters[i].mode,
                cli_ms_text(s->waiters[i].ttl_ms, tb, sizeof(tb)));
    if (s->kind == LEASH__STATE_MUTEX && s->subscribers >= 0)
        fprintf(f,
                "waiting   %" PRId64 " subscribed to its channel (processes that wait, at most)\n",
                s->subscribers);
}

/* Reads lock `name` into *v (cleared by the caller). An exit code. */
static int read_named(cli_conn *c, const char *name, view *v) {
    size_t plen = strlen(c->prefix), nlen = strlen(name);

    memset(v, 0, sizeof(*v));
    if ((v->key = malloc(plen + nlen + 1)) == NULL)
        return CLI_UNREACHABLE;
    memcpy(v->key, c->prefix, plen);
    memcpy(v->key + plen, name, nlen + 1);
    v->len = plen + nlen;
    if (cli_key_node(c, v->key, v->len, &v->node) != 0 || view_read(c, v) != 0) {
        fprintf(stderr, "leash: %s\n", c->err);
        return CLI_UNREACHABLE;
    }
    return is_lock(v) ? CLI_OK : CLI_NOT_FOUND;
}

int cli_show(cli_conn *c, const cli_args *a) {
    uint64_t lo, hi;
    view v;
    int rc = read_named(c, a->name, &v), i, agree;
    const char *m;

    if (rc == CLI_UNREACHABLE) {
        view_clear(&v);
        return rc;
    }
    if (a->json) {
        view_json(stdout, c, &v);
        fputc('\n', stdout);
    } else {
        printf("name      ");
        cli_text_str(stdout, a->name, strlen(a->name));
        printf("\nkey       ");
        cli_text_str(stdout, v.key, v.len);
        fputc('\n', stdout);
        for (i = 0; i < v.n; i++) {
            if (v.up[i])
                show_state(stdout, &v.st[i]);
            else
                printf("server    %s\nstate     unreachable\n", v.st[i].node);
        }
        if (v.n > 1) {
            view_state(&v, &m, &agree);
            majority_fence(&v, m, &lo, &hi);
            if (m != NULL)
                printf("majority  %s on %d of %d servers (%d needed): held, fence %" PRIu64
                       "..%" PRIu64 "\n",
                       m, agree, v.n, v.n / 2 + 1, lo, hi);
            else
                printf("majority  none (%d of %d agree at most, %d needed): not held\n", agree, v.n,
                       v.n / 2 + 1);
        }
    }
    view_clear(&v);
    return rc;
}

/* For watch and release: the state of `name` (a copy the caller clears);
 * with Redlock, the state standing for the majority. An exit code. */
int cli_read_one(cli_conn *c, const char *name, cli_lockstate *out, int *agree, int *of) {
    view v;
    int rc = read_named(c, name, &v), i;
    const cli_lockstate *s;
    const char *m;

    memset(out, 0, sizeof(*out));
    if (rc != CLI_UNREACHABLE) {
        s = view_state(&v, &m, agree);
        *of = v.n;
        uint64_t lo, hi;
        majority_fence(&v, m, &lo, &hi);
        for (i = 0; i < v.n; i++) {
            if (&v.st[i] == s) {
                *out = v.st[i];
                memset(&v.st[i], 0, sizeof(v.st[i]));
                if (m != NULL) {
                    out->fence = out->holders[0].fence = lo;
                    out->fence_max = hi;
                } else if (v.n > 1) {
                    out->nholders = 0; /* a minority holds nothing */
                }
            }
        }
    }
    view_clear(&v);
    return rc;
}
