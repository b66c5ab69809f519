/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4 */
#endif

#include "fake_redis.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/sha1.h"
#include "leashscripts.h"

#define MAX_ARGS 512
#define MAX_LOCKS 64
#define MAX_CHANS 64

struct fr_conn {
    fr_conn *next;
    fake_redis *f;
    int fd;
    ev_io rio, wio;
    char *in;
    size_t in_len, in_cap;
    char *out;
    size_t out_len, out_off, out_cap;
    int subscriber;
    int commands;
    int pings;              /* of them PING */
    int muted;              /* answers nothing more, like a frozen server */
    char *chans[MAX_CHANS]; /* binary: a channel may hold a NUL */
    size_t chan_lens[MAX_CHANS];
    int nchans;
};

typedef struct fr_lock {
    char *key;
    char owner[64];
    long long count;
    int64_t expires; /* ms, monotonic; 0 = free */
    unsigned long long fence;
    int waiting; /* someone found it busy: releases and renewals publish */
} fr_lock;

struct fake_redis {
    struct ev_loop *loop;
    int fd, port;
    ev_io accept_io;
    fr_conn *conns;
    fr_hook *hook;
    void *hook_arg;
    fr_lock locks[MAX_LOCKS];
    int nlocks;
    struct {
        char name[24];
        int n;
    } calls[32];
};

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The server's clock as TIME and the scripts read it (real time). */
static int64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- output ---- */

static void on_writable(struct ev_loop *loop, ev_io *w, int revents);

void fr_send(fr_conn *c, const void *buf, size_t len) {
    if (c->fd < 0 || len == 0)
        return;
    if (c->out_len + len > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 4096;
        while (cap < c->out_len + len)
            cap *= 2;
        c->out = realloc(c->out, cap);
        if (c->out == NULL)
            abort();
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, buf, len);
    c->out_len += len;
    ev_io_start(c->f->loop, &c->wio);
}

void fr_send_str(fr_conn *c, const char *s) {
    fr_send(c, s, strlen(s));
}

static void send_fmt(fr_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void send_fmt(fr_conn *c, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        fr_send(c, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void send_bulk(fr_conn *c, const char *s, size_t len) {
    send_fmt(c, "$%zu\r\n", len);
    fr_send(c, s, len);
    fr_send(c, "\r\n", 2);
}

static void on_writable(struct ev_loop *loop, ev_io *w, int revents) {
    fr_conn *c = w->data;
    (void)revents;
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            fr_close(c);
            return;
        }
        c->out_off += (size_t)n;
    }
    c->out_off = c->out_len = 0;
    ev_io_stop(loop, &c->wio);
}

/* ---- connections ---- */

void fr_close(fr_conn *c) {
    fake_redis *f = c->f;
    fr_conn **pp = &f->conns;
    int i;

    while (*pp && *pp != c)
        pp = &(*pp)->next;
    if (*pp)
        *pp = c->next;
    ev_io_stop(f->loop, &c->rio);
    ev_io_stop(f->loop, &c->wio);
    if (c->fd >= 0)
        close(c->fd);
    for (i = 0; i < c->nchans; i++)
        free(c->chans[i]);
    free(c->in);
    free(c->out);
    free(c);
}

void fr_close_all(fake_redis *f) {
    while (f->conns)
        fr_close(f->conns);
}

int fr_conn_count(const fake_redis *f) {
    const fr_conn *c;
    int n = 0;
    for (c = f->conns; c; c = c->next)
        n++;
    return n;
}

fr_conn *fr_conn_at(fake_redis *f, int n) {
    /* The list is newest first. */
    int count = fr_conn_count(f), i;
    fr_conn *c = f->conns;
    if (n < 0 || n >= count)
        return NULL;
    for (i = 0; i < count - 1 - n; i++)
        c = c->next;
    return c;
}

void fr_mute(fr_conn *c) {
    c->muted = 1;
}

int fr_is_subscriber(const fr_conn *c) {
    return c->subscriber;
}

int fr_conn_commands(const fr_conn *c) {
    return c->commands;
}

int fr_conn_commands_but_ping(const fr_conn *c) {
    return c->commands - c->pings;
}

/* ---- the emulated Redis ---- */

static void count_call(fake_redis *f, const char *name, size_t len) {
    int i;
    for (i = 0; i < 32 && f->calls[i].name[0]; i++)
        if (strlen(f->calls[i].name) == len && strncasecmp(f->calls[i].name, name, len) == 0) {
            f->calls[i].n++;
            return;
        }
    if (i < 32 && len < sizeof f->calls[i].name) {
        memcpy(f->calls[i].name, name, len);
        f->calls[i].name[len] = '\0';
        f->calls[i].n = 1;
    }
}

int fr_calls(const fake_redis *f, const char *name) {
    int i;
    for (i = 0; i < 32 && f->calls[i].name[0]; i++)
        if (strcasecmp(f->calls[i].name, name) == 0)
            return f->calls[i].n;
    return 0;
}

int fr_script_of(int argc, const char **argv, const size_t *lens) {
    return leash_script_of(argc, argv, lens);
}

static fr_lock *find_lock(fake_redis *f, const char *key, int create) {
    int i;
    for (i = 0; i < f->nlocks; i++)
        if (strcmp(f->locks[i].key, key) == 0)
            return &f->locks[i];
    if (!create || f->nlocks == MAX_LOCKS)
        return NULL;
    memset(&f->locks[f->nlocks], 0, sizeof f->locks[0]);
    f->locks[f->nlocks].key = strdup(key);
    return &f->locks[f->nlocks++];
}

void fr_reset_locks(fake_redis *f) {
    int i;
    for (i = 0; i < f->nlocks; i++)
        free(f->locks[i].key);
    f->nlocks = 0;
}

void fr_publish_len(fake_redis *f, const char *channel, size_t len, const char *msg) {
    fr_conn *c;
    int i;
    for (c = f->conns; c; c = c->next)
        for (i = 0; i < c->nchans; i++)
            if (c->chan_lens[i] == len && memcmp(c->chans[i], channel, len) == 0) {
                fr_send_str(c, "*3\r\n$7\r\nmessage\r\n");
                send_bulk(c, channel, len);
                send_bulk(c, msg, strlen(msg));
            }
}

void fr_publish(fake_redis *f, const char *channel, const char *msg) {
    fr_publish_len(f, channel, strlen(channel), msg);
}

/* KEYS lock; ARGV token, lease, count, mark, not_after. */
static void run_acquire(fake_redis *f, fr_conn *c, const char **keys, const char **args) {
    int64_t now = mono_ms(), server_ms = wall_us() / 1000;
    long long n = atoll(args[2]), not_after = atoll(args[4]);
    int mark = strcmp(args[3], "1") == 0;
    fr_lock *k = find_lock(f, keys[0], 1);

    if (k == NULL) {
        fr_send_str(c, "-ERR fake redis: too many locks\r\n");
        return;
    }
    if (not_after > 0 && server_ms >= not_after) {
        send_fmt(c, "*4\r\n:0\r\n:-3\r\n:0\r\n:%lld\r\n", (long long)server_ms);
        return;
    }
    if (k->expires > now && strcmp(k->owner, args[0]) == 0) {
        if (n > k->count)
            k->count = n;
        k->expires = now + atoll(args[1]);
    } else if (n > 1) {
        send_fmt(c, "*4\r\n:0\r\n:-4\r\n:0\r\n:%lld\r\n", (long long)server_ms);
        return;
    } else if (k->expires > now) {
        if (mark)
            k->waiting = 1;
        send_fmt(c, "*4\r\n:0\r\n:%lld\r\n:0\r\n:%lld\r\n", (long long)(k->expires - now),
                 (long long)server_ms);
        return;
    } else {
        k->fence = (unsigned long long)wall_us();
        k->waiting = 0;
        k->count = 1;
        k->expires = now + atoll(args[1]);
        snprintf(k->owner, sizeof k->owner, "%s", args[0]);
    }
    send_fmt(c, "*4\r\n:1\r\n:%llu\r\n:%lld\r\n:%lld\r\n", k->fence, k->count,
             (long long)server_ms);
}

/* KEYS lock; ARGV token, count_after, channel, publish, valid_until. */
static void run_release(fake_redis *f, fr_conn *c, const char **keys, const char **args,
                        const size_t *lens) {
    fr_lock *k = find_lock(f, keys[0], 0);
    long long left = atoll(args[1]), valid_until = atoll(args[4]);

    if (k == NULL || k->expires <= mono_ms() || strcmp(k->owner, args[0]) != 0) {
        if (valid_until == 0)
            fr_send_str(c, ":-1\r\n");
        else
            fr_send_str(c, wall_us() / 1000 < valid_until ? ":0\r\n" : ":-2\r\n");
        return;
    }
    if (left > 0) {
        k->count = left;
        send_fmt(c, ":%lld\r\n", left);
        return;
    }
    k->expires = 0;
    k->owner[0] = '\0';
    if (k->waiting)
        fr_publish_len(f, args[2], lens[2], args[0]);
    fr_send_str(c, ":0\r\n");
}

/* KEYS lock1..N; ARGV token, lease, channel per lock, then publish. */
static void run_renew(fake_redis *f, fr_conn *c, int nkeys, const char **keys, const char **args,
                      const size_t *lens) {
    int64_t now = mono_ms();
    char msg[40];
    int i;
    send_fmt(c, "*%d\r\n", nkeys);
    for (i = 0; i < nkeys; i++) {
        fr_lock *k = find_lock(f, keys[i], 0);
        if (k != NULL && k->expires > now && strcmp(k->owner, args[3 * i]) == 0) {
            k->expires = now + atoll(args[3 * i + 1]);
            if (k->waiting) {
                snprintf(msg, sizeof msg, "renewed:%s", args[3 * i + 1]);
                fr_publish_len(f, args[3 * i + 2], lens[3 * i + 2], msg);
            }
            fr_send_str(c, ":1\r\n");
        } else {
            fr_send_str(c, ":0\r\n");
        }
    }
}

/* KEYS lock; ARGV channel, publish. */
static void run_force(fake_redis *f, fr_conn *c, const char **keys, const char **args,
                      const size_t *lens) {
    fr_lock *k = find_lock(f, keys[0], 0);

    if (k == NULL || k->expires <= mono_ms()) {
        fr_send_str(c, ":0\r\n");
        return;
    }
    k->expires = 0;
    k->owner[0] = '\0';
    fr_publish_len(f, args[0], lens[0], "forced");
    fr_send_str(c, ":1\r\n");
}

static void run_script(fake_redis *f, fr_conn *c, int script, int argc, const char **argv,
                       const size_t *lens) {
    int nkeys = argc > 2 ? atoi(argv[2]) : -1;
    const char **keys = argv + 3, **args = argv + 3 + nkeys;
    const size_t *arg_lens = lens + 3 + nkeys;
    int nargs = argc - 3 - nkeys;

    if (nkeys < 0 || nargs < 0) {
        fr_send_str(c, "-ERR fake redis: bad script call\r\n");
        return;
    }
    if (script == FR_ACQUIRE && nkeys == 1 && nargs == 5)
        run_acquire(f, c, keys, args);
    else if (script == FR_RELEASE && nkeys == 1 && nargs == 5)
        run_release(f, c, keys, args, arg_lens);
    else if (script == FR_RENEW && nargs == 3 * nkeys + 1)
        run_renew(f, c, nkeys, keys, args, arg_lens);
    else if (script == FR_FORCE && nkeys == 1 && nargs == 2)
        run_force(f, c, keys, args, arg_lens);
    else
        fr_send_str(c, "-ERR fake redis: bad script call\r\n");
}

static void subscribe(fr_conn *c, int argc, const char **argv, const size_t *lens, int on) {
    int i, j;
    for (i = 1; i < argc; i++) {
        for (j = 0; j < c->nchans; j++)
            if (c->chan_lens[j] == lens[i] && memcmp(c->chans[j], argv[i], lens[i]) == 0)
                break;
        if (on && j == c->nchans && c->nchans < MAX_CHANS) {
            c->chans[c->nchans] = malloc(lens[i] + 1);
            if (c->chans[c->nchans] == NULL)
                abort();
            memcpy(c->chans[c->nchans], argv[i], lens[i] + 1);
            c->chan_lens[c->nchans++] = lens[i];
        } else if (!on && j < c->nchans) {
            free(c->chans[j]);
            c->nchans--;
            c->chans[j] = c->chans[c->nchans];
            c->chan_lens[j] = c->chan_lens[c->nchans];
        }
        send_fmt(c, "*3\r\n$%zu\r\n%s\r\n", strlen(on ? "subscribe" : "unsubscribe"),
                 on ? "subscribe" : "unsubscribe");
        send_bulk(c, argv[i], lens[i]);
        send_fmt(c, ":%d\r\n", c->nchans);
    }
}

static void behave(fake_redis *f, fr_conn *c, int argc, const char **argv, const size_t *lens) {
    const char *cmd = argv[0];
    int script;

    if (strcasecmp(cmd, "PING") == 0) {
        fr_send_str(c, "+PONG\r\n");
    } else if (strcasecmp(cmd, "AUTH") == 0 || strcasecmp(cmd, "SELECT") == 0 ||
               strcasecmp(cmd, "CLIENT") == 0) {
        fr_send_str(c, "+OK\r\n");
    } else if (strcasecmp(cmd, "SCRIPT") == 0 && argc == 3 && strcasecmp(argv[1], "LOAD") == 0) {
        char sha[41];
        leash__sha1_hex(argv[2], lens[2], sha);
        send_bulk(c, sha, 40);
    } else if (strcasecmp(cmd, "TIME") == 0) {
        char sec[24], usec[16];
        int64_t us = wall_us();
        snprintf(sec, sizeof sec, "%lld", (long long)(us / 1000000));
        snprintf(usec, sizeof usec, "%lld", (long long)(us % 1000000));
        fr_send_str(c, "*2\r\n");
        send_bulk(c, sec, strlen(sec));
        send_bulk(c, usec, strlen(usec));
    } else if (strcasecmp(cmd, "SUBSCRIBE") == 0) {
        c->subscriber = 1;
        subscribe(c, argc, argv, lens, 1);
    } else if (strcasecmp(cmd, "UNSUBSCRIBE") == 0) {
        subscribe(c, argc, argv, lens, 0);
    } else if (strcasecmp(cmd, "PUBLISH") == 0 && argc == 3) {
        fr_publish_len(f, argv[1], lens[1], argv[2]);
        fr_send_str(c, ":1\r\n");
    } else if ((script = fr_script_of(argc, argv, lens)) != FR_NOT_A_SCRIPT) {
        run_script(f, c, script, argc, argv, lens);
    } else if (strcasecmp(cmd, "EVALSHA") == 0) {
        fr_send_str(c, "-NOSCRIPT No matching script. Please use EVAL.\r\n");
    } else {
        fr_send_str(c, "-ERR fake redis: unknown command\r\n");
    }
}

/* ---- input: RESP arrays of bulk strings ---- */

/* Parses one command at in[0..len); returns bytes used, 0 if incomplete,
 * -1 on a protocol error. argv point into a copy owned by *store. */
static long parse_command(const char *in, size_t len, int *argc, const char **argv, size_t *lens,
                          char **store) {
    const char *p = in, *end = in + len, *nl;
    long n, i, l;
    char *copy, *q;

    if (len == 0)
        return 0;
    if (*p != '*')
        return -1;
    nl = memchr(p, '\n', (size_t)(end - p));
    if (nl == NULL)
        return 0;
    n = strtol(p + 1, NULL, 10);
    if (n <= 0 || n > MAX_ARGS)
        return -1;
    p = nl + 1;
    copy = malloc(len + 1);
    if (copy == NULL)
        return -1;
    q = copy;
    for (i = 0; i < n; i++) {
        if (p >= end || *p != '$') {
            free(copy);
            return p >= end ? 0 : -1;
        }
        nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL) {
            free(copy);
            return 0;
        }
        l = strtol(p + 1, NULL, 10);
        if (l < 0) {
            free(copy);
            return -1;
        }
        p = nl + 1;
        if (end - p < l + 2) {
            free(copy);
            return 0;
        }
        memcpy(q, p, (size_t)l);
        q[l] = '\0';
        argv[i] = q;
        lens[i] = (size_t)l;
        q += l + 1;
        p += l + 2;
    }
    *argc = (int)n;
    *store = copy;
    return (long)(p - in);
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents) {
    fr_conn *c = w->data;
    fake_redis *f = c->f;
    ssize_t n;
    (void)loop, (void)revents;

    if (c->in_cap - c->in_len < 65536) {
        c->in_cap = c->in_cap ? c->in_cap * 2 : 131072;
        c->in = realloc(c->in, c->in_cap);
        if (c->in == NULL)
            abort();
    }
    n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        fr_close(c);
        return;
    }
    c->in_len += (size_t)n;
    for (;;) {
        static const char *argv[MAX_ARGS];
        static size_t lens[MAX_ARGS];
        int argc = 0, fd = c->fd;
        char *store = NULL;
        long used = parse_command(c->in, c->in_len, &argc, argv, lens, &store);
        fr_conn *it;

        if (used == 0)
            return;
        if (used < 0) {
            fr_close(c);
            return;
        }
        memmove(c->in, c->in + used, c->in_len - (size_t)used);
        c->in_len -= (size_t)used;
        count_call(f, argv[0], lens[0]);
        c->commands++;
        if (strcasecmp(argv[0], "PING") == 0)
            c->pings++;
        if (c->muted) {
            free(store);
            continue;
        }
        if (strcasecmp(argv[0], "SUBSCRIBE") == 0)
            c->subscriber = 1;
        if (f->hook == NULL || !f->hook(f, c, argc, argv, lens, f->hook_arg))
            behave(f, c, argc, argv, lens);
        free(store);
        /* The hook may have closed c. */
        for (it = f->conns; it && it != c; it = it->next)
            ;
        if (it == NULL || c->fd != fd)
            return;
    }
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents) {
    fake_redis *f = w->data;
    (void)revents;
    for (;;) {
        int fd = accept4(f->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
        fr_conn *c, **pp;
        if (fd < 0)
            return;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c = calloc(1, sizeof *c);
        if (c == NULL) {
            close(fd);
            continue;
        }
        c->f = f;
        c->fd = fd;
        ev_io_init(&c->rio, on_readable, fd, EV_READ);
        c->rio.data = c;
        ev_io_init(&c->wio, on_writable, fd, EV_WRITE);
        c->wio.data = c;
        ev_io_start(loop, &c->rio);
        /* Newest first. */
        pp = &f->conns;
        c->next = *pp;
        *pp = c;
    }
}

fake_redis *fr_start(struct ev_loop *loop) {
    fake_redis *f = calloc(1, sizeof *f);
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int one = 1;

    if (f == NULL)
        return NULL;
    f->loop = loop;
    f->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    setsockopt(f->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (f->fd < 0 || bind(f->fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(f->fd, 64) != 0 || getsockname(f->fd, (struct sockaddr *)&sa, &len) != 0) {
        if (f->fd >= 0)
            close(f->fd);
        free(f);
        return NULL;
    }
    f->port = ntohs(sa.sin_port);
    ev_io_init(&f->accept_io, on_accept, f->fd, EV_READ);
    f->accept_io.data = f;
    ev_io_start(loop, &f->accept_io);
    return f;
}

void fr_stop(fake_redis *f) {
    if (f == NULL)
        return;
    fr_close_all(f);
    ev_io_stop(f->loop, &f->accept_io);
    close(f->fd);
    fr_reset_locks(f);
    free(f);
}

int fr_port(const fake_redis *f) {
    return f->port;
}

void fr_set_hook(fake_redis *f, fr_hook *hook, void *arg) {
    f->hook = hook;
    f->hook_arg = arg;
}
