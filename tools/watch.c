/* SPDX-License-Identifier: MIT */
/*
 * `leash watch NAME`: what happens to one lock, as it happens.
 *
 * Two sources. The lock's state is read every --interval ms and compared
 * with the last reading: a holder that appears was granted ("acquired"),
 * one whose deadline moved later was renewed, one that is gone was
 * released, or expired when its lease had run out by then; waiters that
 * join or leave a family lock's queue likewise. A mutex's channel
 * (dialect/leash.c: the key's companion "released:<db>") carries its
 * holder's release, renewals and force releases only while someone waits
 * (the holder publishes once a waiter marked the key), so polling is what
 * sees an uncontended lock; the messages that do come are shown when they
 * arrive. A hold that begins and ends between two readings is not seen.
 * The watcher writes nothing: marking the key would make every holder
 * publish, a cost it has no business adding.
 *
 * Through a redis+sentinel:// URL the watch follows a failover: a
 * subscriber on one sentinel hears +promoted-slave or +switch-master and
 * the watch moves to the new master at once (as the library does); a
 * master whose connection breaks (killed, or made a replica: Sentinel then
 * drops its clients) sends it back to the sentinels, asked every reading
 * interval until they name a master that says ROLE master (FOLLOW_MS at
 * most). Either way a "master" event says where it reads from now.
 */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stopping;

/* Through Sentinel: how long a watch that lost its master waits for the
 * sentinels to name one that answers (a failover after a master's death
 * takes Sentinel's down-after-milliseconds and a vote). */
#define FOLLOW_MS 60000
/* ... and how soon it tries again to subscribe on a sentinel, doubling
 * while none lets it (an ACL user without the channels refuses again). */
#define RESUBSCRIBE_MS 1000
#define RESUBSCRIBE_MAX_MS 60000

static void on_signal(int sig) {
    (void)sig;
    stopping = 1;
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct watcher {
    cli_conn *c;
    const cli_args *a;
    int64_t printed;
    cli_node subs[LEASH_NODES_MAX];
    int nsubs;
    char *chan; /* the lock's channel (NULL: none, a family lock) */
    size_t chan_len;
    redisContext *sentinel; /* through Sentinel: +switch-master, or NULL */
    int64_t sentinel_tried; /* when the last subscription on a sentinel was tried */
    int64_t sentinel_wait;  /* and how long to wait before the next; 0: RESUBSCRIBE_MS */
} watcher;

/* Starts a line (an object, with --json) for event `ev`. */
static void begin(watcher *w, const char *ev, const char *source) {
    char now[40];

    cli_now_text(now, sizeof(now));
    if (w->a->json) {
        printf("{\"time\":\"%s\",\"event\":\"%s\",\"source\":\"%s\",\"lock\":", now, ev, source);
        cli_json_str(stdout, w->a->name, strlen(w->a->name));
    } else {
        printf("%s  %-9s", now, ev);
    }
}

/* SIGPIPE is ignored (main.c), so a reader that went away (`| head -1`)
 * shows as a failed write: that stops the watch, as the signal would. */
static void end(watcher *w) {
    fputs(w->a->json ? "}\n" : "\n", stdout);
    if (fflush(stdout) != 0 || ferror(stdout))
        stopping = 1;
    w->printed++;
}

/* fence_max: a Redlock hold's fence lies in fence..fence_max. */
static void holder_event(watcher *w, const char *ev, const cli_holder *h, uint64_t fence_max,
                         int waiter) {
    char tb[32];

    begin(w, ev, "poll");
    if (w->a->json) {
        fputs(",\"token\":", stdout);
        cli_json_str(stdout, h->token, strlen(h->token));
        if (h->mode != 'm' && h->mode != 'R')
            printf(",\"mode\":\"%c\"", h->mode);
        printf(",\"%s\":%" PRId64, waiter ? "place" : "count", h->count);
        if (h->fence)
            printf(",\"fence\":%" PRIu64, h->fence);
        if (fence_max > h->fence)
            printf(",\"fence_max\":%" PRIu64, fence_max);
        printf(",\"ttl_ms\":%" PRId64, h->ttl_ms);
    } else {
        printf("  %s", h->token);
        if (h->mode != 'm' && h->mode != 'R')
            printf("  %c", h->mode);
        if (!waiter)
            printf("  holds %" PRId64, h->count);
        if (h->fence)
            printf("  fence %" PRIu64, h->fence);
        if (fence_max > h->fence)
            printf("..%" PRIu64, fence_max);
        printf("  ttl %s", cli_ms_text(h->ttl_ms, tb, sizeof(tb)));
    }
    end(w);
}

static const cli_holder *find(const cli_holder *v, size_t n, const char *tok) {
    size_t i;
    for (i = 0; i < n; i++)
        if (strcmp(v[i].token, tok) == 0)
            return &v[i];
    return NULL;
}

/* Compares two readings `elapsed` ms apart and prints what changed. */
static void diff(watcher *w, const cli_lockstate *o, const cli_lockstate *s, int64_t elapsed) {
    size_t i;

    for (i = 0; i < o->nholders; i++) {
        const cli_holder *h = &o->holders[i];
        if (find(s->holders, s->nholders, h->token) == NULL)
            holder_event(w, h->ttl_ms >= 0 && h->ttl_ms <= elapsed ? "expired" : "released", h,
                         o->fence_max, 0);
    }
    for (i = 0; i < o->nwaiters; i++) {
        const cli_holder *h = &o->waiters[i];
        if (find(s->waiters, s->nwaiters, h->token) == NULL &&
            find(s->holders, s->nholders, h->token) == NULL)
            holder_event(w, "left", h, 0, 1);
    }
    for (i = 0; i < s->nwaiters; i++)
        if (find(o->waiters, o->nwaiters, s->waiters[i].token) == NULL)
            holder_event(w, "queued", &s->waiters[i], 0, 1);
    for (i = 0; i < s->nholders; i++) {
        const cli_holder *h = &s->holders[i], *p = find(o->holders, o->nholders, h->token);
        /* A hold is its token (a new one per hold). With Redlock the fence
         * shown is the first agreeing server's, which changes while a
         * release reaches the servers one by one: no new hold. */
        if (p == NULL || (p->fence != h->fence && w->c->topology != LEASH_TOPOLOGY_REDLOCK))
            holder_event(w, "acquired", h, s->fence_max, 0);
        else if (h->count != p->count)
            holder_event(w, "count", h, s->fence_max, 0);
        /* Without a renewal the lease left shrinks by the time that
         * passed; the slack covers PTTL's rounding and the reads. */
        else if (h->ttl_ms >= 0 && p->ttl_ms >= 0 && h->ttl_ms > p->ttl_ms - elapsed + 20)
            holder_event(w, "renewed", h, s->fence_max, 0);
    }
}

static void state_event(watcher *w, const cli_lockstate *s, int agree, int of) {
    char tb[32];
    size_t i;

    begin(w, "state", "poll");
    if (w->a->json) {
        fputc(',', stdout);
        cli_print_state_json(stdout, s);
        if (of > 1)
            printf(",\"agree\":%d,\"of\":%d", agree, of);
    } else {
        printf("  %s", s->kind == LEASH__STATE_NONE ? "free" : cli_kind_name(s->kind));
        for (i = 0; i < s->nholders; i++)
            printf("  holder %s fence %" PRIu64 " ttl %s", s->holders[i].token, s->holders[i].fence,
                   cli_ms_text(s->holders[i].ttl_ms, tb, sizeof(tb)));
        if (s->nwaiters)
            printf("  %zu waiting", s->nwaiters);
        if (of > 1)
            printf("  on %d of %d servers", agree, of);
    }
    end(w);
    w->printed--; /* the opening state is not an event */
}

/* A message on the lock's channel: a release (the holder's token), a
 * renewal ("renewed:<lease>") or a force release ("forced"). */
static void message_event(watcher *w, const cli_node *from, const char *p, size_t len) {
    int renewed = len > 8 && memcmp(p, "renewed:", 8) == 0;
    int forced = len == 6 && memcmp(p, "forced", 6) == 0;
    const char *what = renewed ? "renewed" : forced ? "forced" : "released";

    begin(w, what, "channel");
    if (w->a->json) {
        fputs(",\"server\":", stdout);
        cli_json_str(stdout, from->label, strlen(from->label));
        fputs(",\"message\":", stdout);
        cli_json_str(stdout, p, len);
    } else {
        printf("  message ");
        cli_text_str(stdout, p, len);
        printf(" on %s", from->label);
    }
    end(w);
}

/* As the library's LEASH_PUBSUB_AUTO: sharded in a cluster of Redis 7.0
 * or later (the version INFO server gives; not known: classic). */
static int sharded_on(const cli_conn *c, redisContext *rc) {
    if (c->pubsub != LEASH_PUBSUB_AUTO)
        return c->pubsub == LEASH_PUBSUB_SHARDED;
    return c->topology == LEASH_TOPOLOGY_CLUSTER && cli_server_version(rc) >= 70000;
}

/* Subscribes to chan on the server `at`, on a connection of its own. */
static int subscribe(watcher *w, const cli_node *at, const char *chan, size_t chan_len) {
    cli_conn *c = w->c;
    const char *argv[2] = {"SUBSCRIBE", chan};
    size_t lens[2] = {0, chan_len};
    cli_node *n = &w->subs[w->nsubs];
    redisReply *r = NULL;

    *n = *at;
    n->rc = NULL;
    if (cli_node_open(c, n) == 0) {
        if (sharded_on(c, n->rc))
            argv[0] = "SSUBSCRIBE";
        lens[0] = strlen(argv[0]);
        r = redisCommandArgv(n->rc, 2, argv, lens);
    }
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        /* Without a reply or a context, c->err already says why. */
        if (r != NULL || n->rc != NULL)
            snprintf(c->err, sizeof(c->err), "%s on %.300s: %.600s", argv[0], n->label,
                     r ? r->str : n->rc->errstr);
        if (r)
            freeReplyObject(r);
        if (n->rc)
            redisFree(n->rc);
        return -1;
    }
    freeReplyObject(r);
    w->nsubs++;
    return 0;
}

/* Reads what the subscribers have; -1 when one broke. */
static int drain(watcher *w, const struct pollfd *pf) {
    int i;

    for (i = 0; i < w->nsubs; i++) {
        redisContext *rc = w->subs[i].rc;
        void *rep;
        if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        if (redisBufferRead(rc) != REDIS_OK) {
            snprintf(w->c->err, sizeof(w->c->err), "subscriber to %s: %s", w->subs[i].label,
                     rc->errstr);
            return -1;
        }
        while (redisGetReplyFromReader(rc, &rep) == REDIS_OK && rep != NULL) {
            redisReply *r = rep;
            if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                r->element[0]->type == REDIS_REPLY_STRING &&
                r->element[2]->type == REDIS_REPLY_STRING &&
                (strcmp(r->element[0]->str, "message") == 0 ||
                 strcmp(r->element[0]->str, "smessage") == 0))
                message_event(w, &w->subs[i], r->element[2]->str, r->element[2]->len);
            freeReplyObject(r);
        }
    }
    return 0;
}

/* ---- through Sentinel ---- */

static void close_subs(watcher *w) {
    int i;

    for (i = 0; i < w->nsubs; i++)
        redisFree(w->subs[i].rc);
    w->nsubs = 0;
}

/* Subscribes on a sentinel unless it is. A failure is said once, until a
 * subscription succeeds, and the next try waits twice as long (up to
 * RESUBSCRIBE_MAX_MS): what a sentinel refused it refuses again. */
static void watch_sentinels(watcher *w) {
    char err[512];
    int64_t wait = w->sentinel_wait > 0 ? w->sentinel_wait : RESUBSCRIBE_MS;

    if (w->sentinel != NULL || (w->sentinel_tried != 0 && mono_ms() - w->sentinel_tried < wait))
        return;
    w->sentinel_tried = mono_ms();
    w->sentinel = cli_sentinel_subscribe(w->c->sentinel_url, w->c->timeout_ms, err, sizeof(err));
    if (w->sentinel != NULL) {
        w->sentinel_wait = 0;
        return;
    }
    if (w->sentinel_wait == 0)
        fprintf(stderr, "leash: %s (a failover is seen when the master is lost)\n", err);
    w->sentinel_wait = wait * 2 > RESUBSCRIBE_MAX_MS ? RESUBSCRIBE_MAX_MS : wait * 2;
}

/* Reads and subscribes at u from now on. 0, or -1 with c->err. */
static int move_to(watcher *w, const leash_url *u, const char *why) {
    cli_conn *c = w->c;
    cli_node *n = &c->nodes[0];

    close_subs(w);
    cli_node_retarget(n, u);
    if (cli_node_open(c, n) != 0 || (w->chan != NULL && subscribe(w, n, w->chan, w->chan_len) != 0))
        return -1;
    begin(w, "master", "sentinel");
    if (w->a->json) {
        fputs(",\"address\":", stdout);
        cli_json_str(stdout, n->label, strlen(n->label));
        fputs(",\"why\":", stdout);
        cli_json_str(stdout, why, strlen(why));
    } else {
        printf("  now at %s (%s)", n->label, why);
    }
    end(w);
    return 0;
}

/* The master was lost: the sentinels are asked every interval until they
 * name one that answers, FOLLOW_MS at most. 0, or -1 with c->err. */
static int follow_master(watcher *w) {
    cli_conn *c = w->c;
    int64_t until = mono_ms() + FOLLOW_MS;
    char lost[sizeof(c->err)], err[512];
    leash_url u;

    snprintf(lost, sizeof(lost), "%s", c->err);
    close_subs(w);
    while (!stopping) {
        if (cli_sentinel_master(c->sentinel_url, c->timeout_ms, &u, err, sizeof(err)) == 0 &&
            move_to(w, &u, "the master was lost: asked the sentinels") == 0)
            return 0;
        if (mono_ms() >= until) {
            snprintf(c->err, sizeof(c->err),
                     "%.400s; the sentinels named no master that answers within %d s: %.400s", lost,
                     FOLLOW_MS / 1000, err);
            return -1;
        }
        /* Not more often than every 100 ms: each try is a connection. */
        poll(NULL, 0, w->a->interval_ms < 100 ? 100 : (int)w->a->interval_ms);
    }
    return -1;
}

/* What the sentinel said: +promoted-slave or +switch-master about this
 * master moves the watch there. 0; -1 when the subscriber broke
 * (subscribed again later); -2 when the watch found no master to move to. */
static int drain_sentinel(watcher *w) {
    void *rep;
    leash_url u;
    int moved = 0;

    if (redisBufferRead(w->sentinel) != REDIS_OK) {
        fprintf(stderr, "leash: the subscriber on a sentinel: %s\n", w->sentinel->errstr);
        redisFree(w->sentinel);
        w->sentinel = NULL;
        return -1;
    }
    while (redisGetReplyFromReader(w->sentinel, &rep) == REDIS_OK && rep != NULL) {
        if (cli_sentinel_switched(w->c->sentinel_url, rep, &u) &&
            (strcmp(u.host, w->c->nodes[0].url.host) != 0 || u.port != w->c->nodes[0].url.port))
            moved = 1;
        freeReplyObject(rep);
    }
    if (moved && move_to(w, &u, "a sentinel said so") != 0 && follow_master(w) != 0)
        return -2;
    return 0;
}

static int watch_loop(watcher *w, const cli_lockstate *first) {
    const cli_args *a = w->a;
    cli_lockstate last = *first, now;
    int64_t last_at = mono_ms(), until = a->seconds ? last_at + a->seconds * 1000 : 0;
    struct pollfd pf[LEASH_NODES_MAX + 1];
    int i, rc = CLI_OK, agree, of, last_agree = -1, nfds;

    while (!stopping && (a->events == 0 || w->printed < a->events)) {
        int64_t t = mono_ms(), wait = last_at + a->interval_ms - t;
        if (until && t >= until)
            break;
        if (wait > 0) {
            for (i = 0; i < w->nsubs; i++) {
                pf[i].fd = w->subs[i].rc->fd;
                pf[i].events = POLLIN;
                pf[i].revents = 0;
            }
            nfds = w->nsubs;
            if (w->sentinel != NULL) {
                pf[nfds].fd = w->sentinel->fd;
                pf[nfds].events = POLLIN;
                pf[nfds++].revents = 0;
            }
            if (poll(pf, (nfds_t)nfds, (int)wait) < 0 && errno != EINTR)
                break;
            if (w->sentinel != NULL && (pf[nfds - 1].revents & (POLLIN | POLLHUP | POLLERR))) {
                if (drain_sentinel(w) == -2) {
                    rc = stopping ? CLI_OK : CLI_UNREACHABLE;
                    break;
                }
                continue; /* the subscribers may have changed */
            }
            if (drain(w, pf) != 0) {
                if (w->c->sentinel_url != NULL && follow_master(w) == 0)
                    continue;
                rc = stopping ? CLI_OK : CLI_UNREACHABLE;
                break;
            }
            continue;
        }
        cli_conn_retry(w->c);
        if (w->c->sentinel_url != NULL)
            watch_sentinels(w);
        if (cli_read_one(w->c, a->name, &now, &agree, &of) == CLI_UNREACHABLE) {
            if (w->c->sentinel_url != NULL && follow_master(w) == 0)
                continue;
            rc = stopping ? CLI_OK : CLI_UNREACHABLE;
            break;
        }
        diff(w, &last, &now, t - last_at);
        if (of > 1 && agree != last_agree && last_agree >= 0) {
            begin(w, "agree", "poll");
            if (a->json)
                printf(",\"agree\":%d,\"of\":%d", agree, of);
            else
                printf("  %d of %d servers hold it alike", agree, of);
            end(w);
        }
        last_agree = agree;
        cli_lockstate_clear(&last);
        last = now;
        last_at = t;
    }
    cli_lockstate_clear(&last);
    if (rc == CLI_UNREACHABLE)
        fprintf(stderr, "leash: %s\n", w->c->err);
    return rc;
}

/* The channel a lock's releases are announced on, as the library names it:
 * leash's companion, or Redisson's redisson_lock__channel:{key}. Its
 * length, or 0 without memory (*chan is then NULL). */
static size_t channel_of(const cli_conn *c, int kind, const char *name, const char *key,
                         size_t key_len, char **chan) {
    size_t len = 0;
    char what[32];

    if (kind == LEASH__STATE_REDISSON) {
        *chan = cli_redisson_channel(c, name, &len);
        return len;
    }
    snprintf(what, sizeof(what), "released:%d", c->db);
    if ((*chan = malloc(2 * key_len + strlen(what) + 3)) == NULL)
        return 0;
    return cli_companion(*chan, key, key_len, what);
}

int cli_watch(cli_conn *c, const cli_args *a) {
    watcher w;
    cli_lockstate first;
    struct sigaction sa;
    size_t plen = strlen(c->prefix), nlen = strlen(a->name), chan_len;
    char *key = malloc(plen + nlen + 1), *chan = NULL;
    int agree, of, node = 0, i, rc;

    memset(&w, 0, sizeof(w));
    w.c = c;
    w.a = a;
    if (key == NULL)
        return CLI_UNREACHABLE;
    memcpy(key, c->prefix, plen);
    memcpy(key + plen, a->name, nlen + 1);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    rc = cli_read_one(c, a->name, &first, &agree, &of);
    if (rc == CLI_UNREACHABLE) {
        free(key);
        return rc;
    }
    /* Every server that may publish: the key's master, or each Redlock
     * server. A family lock has no channel of its own to listen to. */
    if (first.kind != LEASH__STATE_FAIR && first.kind != LEASH__STATE_RW &&
        first.kind != LEASH__STATE_SEMAPHORE && first.kind != LEASH__STATE_FAMILY) {
        if ((chan_len = channel_of(c, first.kind, a->name, key, plen + nlen, &chan)) == 0) {
            snprintf(c->err, sizeof(c->err), "out of memory");
        } else if (c->topology == LEASH_TOPOLOGY_REDLOCK) {
            for (i = 0; i < c->nnodes; i++)
                if (subscribe(&w, &c->nodes[i], chan, chan_len) != 0)
                    fprintf(stderr, "leash: %s (watching the others)\n", c->err);
        }
        if (chan_len == 0 || (c->topology != LEASH_TOPOLOGY_REDLOCK &&
                              (cli_key_node(c, key, plen + nlen, &node) != 0 ||
                               subscribe(&w, &c->nodes[node], chan, chan_len) != 0))) {
            fprintf(stderr, "leash: %s\n", c->err);
            cli_lockstate_clear(&first);
            free(chan);
            free(key);
            return CLI_UNREACHABLE;
        }
        w.chan = chan;
        w.chan_len = chan_len;
    }
    free(key);
    if (c->sentinel_url != NULL)
        watch_sentinels(&w);
    state_event(&w, &first, agree, of);
    rc = watch_loop(&w, &first);
    close_subs(&w);
    if (w.sentinel != NULL)
        redisFree(w.sentinel);
    free(w.chan);
    return rc;
}
