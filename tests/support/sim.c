/* SPDX-License-Identifier: MIT */
/*
 * The simulated Redis of sim.h. Grown out of fuzz/fuzz_replies.c, without
 * its knowledge of leash's structs: connections are found through the
 * loop's fd watchers (io_new) or, for a bare hiredis context, hiredis's
 * event hooks; roles through the commands sent.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, SOCK_NONBLOCK, MSG_NOSIGNAL */
#endif

#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#include <leash/loop.h>

#include "base/sha1.h"
#include "check.h"

#define SIM_FAIL(...) test_failf_(__FILE__, __LINE__, "sim", __VA_ARGS__)

/* A client that does not settle in this many rounds of sim_run loops. */
#define MAX_ROUNDS 100000
/* Arrays the shadow reader builds; hiredis allocates the announced count
 * up front, and a test's garbage must not exhaust memory. */
#define MAX_ARRAY 65536

/* ---- memory ---- */

/*
 * When the program is linked with failalloc's --wrap options, malloc here
 * would be counted (and failed) as if leash had called it; __real_malloc is
 * libc's. Without --wrap nothing defines the __real_ names and the weak
 * references are NULL.
 */
extern void *__real_calloc(size_t n, size_t size) __attribute__((weak));
extern void *__real_realloc(void *p, size_t size) __attribute__((weak));
extern void __real_free(void *p) __attribute__((weak));

static void *xcalloc(size_t n, size_t size) {
    void *p = __real_calloc ? __real_calloc(n ? n : 1, size ? size : 1)
                            : calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        SIM_FAIL("out of memory");
    return p;
}

static void *xrealloc(void *p, size_t size) {
    void *q = __real_realloc ? __real_realloc(p, size ? size : 1) : realloc(p, size ? size : 1);
    if (q == NULL)
        SIM_FAIL("out of memory");
    return q;
}

static void xfree(void *p) {
    if (__real_free)
        __real_free(p);
    else
        free(p);
}

/* len bytes and a NUL. */
static char *xmemdup(const void *p, size_t len) {
    char *d = xcalloc(1, len + 1);
    if (len)
        memcpy(d, p, len);
    return d;
}

/* p (an array of *cap elements of size bytes) grown to hold at least n;
 * returns where it is now. */
static void *grow(void *p, size_t *cap, size_t n, size_t size) {
    size_t want = *cap ? *cap : 8;

    if (n <= *cap)
        return p;
    while (want < n)
        want *= 2;
    p = xrealloc(p, want * size);
    *cap = want;
    return p;
}

/* A byte string being built (replies of auto mode). */
typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static void buf_add(buf *b, const void *bytes, size_t len) {
    b->p = grow(b->p, &b->cap, b->len + len + 1, 1);
    memcpy(b->p + b->len, bytes, len);
    b->len += len;
    b->p[b->len] = '\0';
}

static void buf_str(buf *b, const char *s) {
    buf_add(b, s, strlen(s));
}

static void buf_int(buf *b, char type, long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%c%lld\r\n", type, v);
    buf_add(b, tmp, (size_t)n);
}

static void buf_bulk(buf *b, const void *bytes, size_t len) {
    buf_int(b, '$', (long long)len);
    buf_add(b, bytes, len);
    buf_add(b, "\r\n", 2);
}

/* ---- the virtual clock (in place of src/base/clock.c) ---- */

static int64_t clock_ms = SIM_START_MS;
/* Sims not freed yet: the clock restarts with the first of a new set, so
 * cases that share a process (check.h's --no-fork) start alike. */
static int live_sims;

int64_t leash__now_ms(void);
int64_t leash__now_ms(void) {
    return clock_ms;
}

/* The stats' clock: the same virtual time. */
int64_t leash__now_us(void);
int64_t leash__now_us(void) {
    return clock_ms * 1000;
}

int64_t sim_now(void) {
    return clock_ms;
}

/* ---- state ---- */

/* One per attached client: the data of its leash_loop. */
typedef struct sim_client {
    sim *s;
    leash_client *client;
    int timers; /* made and not freed */
    struct sim_client *next;
} sim_client;

typedef struct sim_timer {
    sim_client *owner; /* NULL once its client's cleanup ran: a leak */
    leash_timer_fn *fn;
    void *arg;
    int64_t due;
    uint64_t seq; /* start order, for timers due at the same time */
    int active;
    int keep_alive; /* recorded; nothing to keep alive on a virtual loop */
} sim_timer;

/* Server bytes for one read event: one complete reply, or bytes that will
 * never make one. */
typedef struct chunk {
    struct chunk *next;
    size_t len;
    char bytes[];
} chunk;

typedef struct sub {
    char *name;
    size_t len;
    int pattern;
} sub;

/*
 * The client's end of a connection is one of two kinds:
 * - a leash client's socket: the sim_conn is the fd watcher that io_new
 *   answered (watched from io_new to io_free, fd the client's);
 * - a bare hiredis context (sim_attach_context): ac, until hiredis cleans
 *   it up.
 * Either way `reading` and `writing` say what the client waits for.
 */
struct sim_conn {
    sim *s;
    int index;
    const leash_client *owner;
    sim_client *sc;     /* the loop whose io_new made it; NULL for a context,
                           or once that loop's cleanup ran */
    int watched;        /* between io_new and io_free */
    int fd;             /* the client's fd while watched, else -1 */
    leash_io_fn *io_fn; /* the watcher's callback */
    void *io_arg;
    redisAsyncContext *ac; /* NULL once hiredis cleaned it up */
    int peer;              /* the server's end; -1 once closed */
    int reading, writing;  /* what the client waits for */
    int role;
    int closing;  /* sim_close: EOF once the queue is delivered */
    int eof_seen; /* the client was given the EOF */

    /* client -> server */
    redisReader *in;
    sim_cmd *head, *tail; /* pending, oldest first */
    int npending;
    uint64_t received;

    /* server -> client */
    redisReader *shadow; /* finds where replies end, and their shapes */
    int raw;             /* the shadow gave up: bytes pass as they come */
    char *partial;       /* bytes since the last complete reply */
    size_t npartial, partial_cap;
    chunk *out_head, *out_tail;

    /* what the server side confirmed */
    sub *subs;
    size_t nsubs, subs_cap;
};

typedef struct script {
    struct script *next;
    char sha[41];
    char *src;
} script;

/* Copies handed out by sim_cmd_arg, kept until sim_free. */
typedef struct kept {
    struct kept *next;
    char bytes[];
} kept;

struct sim {
    char path[108];
    int listen_fd;
    sim_client *clients;
    sim_timer **timers;
    size_t ntimers, timers_cap;
    uint64_t seq;
    int fail_timer_new; /* countdown; 0: off */
    int timer_new_failed;
    sim_conn **conns;
    size_t nconns, conns_cap;
    unsigned auto_on;
    int running; /* inside sim_run: callbacks must not re-enter */
    int debug;
    script *scripts;
    kept *kept;
};

static void need(const void *p, const char *what) {
    if (p == NULL)
        SIM_FAIL("%s is NULL", what);
}

/* ---- tracing (LEASH_SIM_DEBUG) ---- */

static long long rel_ms(void) {
    return (long long)(clock_ms - SIM_START_MS);
}

static void trace_bytes(const sim_conn *c, const char *dir, const char *p, size_t len) {
    size_t i, shown = len < 160 ? len : 160;

    fprintf(stderr, "sim [+%lld ms] conn %d %s ", rel_ms(), c->index, dir);
    for (i = 0; i < shown; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '\r')
            fputs("\\r", stderr);
        else if (ch == '\n')
            fputs("\\n", stderr);
        else if (ch < 32 || ch > 126)
            fprintf(stderr, "\\x%02x", ch);
        else
            fputc(ch, stderr);
    }
    fprintf(stderr, "%s\n", shown < len ? "..." : "");
}

static void debug_log(int level, const char *msg, void *arg) {
    (void)arg;
    fprintf(stderr, "sim [+%lld ms] leash(%d): %s\n", rel_ms(), level, msg);
}

/* ---- the sim ---- */

sim *sim_new(void) {
    static unsigned serial;
    struct sockaddr_un sa;
    sim *s = xcalloc(1, sizeof(*s));
    int n;

    if (live_sims++ == 0)
        clock_ms = SIM_START_MS;
    /* A write to a connection the sim closed must be EPIPE, not death. */
    signal(SIGPIPE, SIG_IGN);
    n = snprintf(s->path, sizeof s->path, "%s/sim-%d-%u.sock", test_tmpdir(), (int)getpid(),
                 serial);
    if (n < 0 || (size_t)n >= sizeof s->path)
        snprintf(s->path, sizeof s->path, "/tmp/leash-sim-%d-%u.sock", (int)getpid(), serial);
    serial++;
    unlink(s->path);
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, s->path, strlen(s->path) + 1);
    s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->listen_fd < 0 || bind(s->listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(s->listen_fd, 1024) != 0)
        SIM_FAIL("cannot listen on %s: %s", s->path, strerror(errno));
    s->auto_on = SIM_AUTO_ALL;
    s->debug = getenv("LEASH_SIM_DEBUG") != NULL;
    return s;
}

/* leash connects to the listening socket and the sim swaps the socket
 * out at once: the accepted ends only need closing. */
static void reap_backlog(sim *s) {
    int fd;
    while ((fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
        close(fd);
}

static void cmd_free(sim_cmd *cmd) {
    int i;
    for (i = 0; i < cmd->argc; i++)
        xfree(cmd->argv[i]);
    xfree(cmd->argv);
    xfree(cmd->argvlen);
    xfree(cmd);
}

static void conn_free(sim_conn *c) {
    sim_cmd *cmd;
    chunk *k;
    size_t i;

    if (c->peer >= 0)
        close(c->peer);
    while ((cmd = c->head) != NULL) {
        c->head = cmd->next_;
        cmd_free(cmd);
    }
    while ((k = c->out_head) != NULL) {
        c->out_head = k->next;
        xfree(k);
    }
    for (i = 0; i < c->nsubs; i++)
        xfree(c->subs[i].name);
    xfree(c->subs);
    xfree(c->partial);
    redisReaderFree(c->in);
    redisReaderFree(c->shadow);
    xfree(c);
}

void sim_free(sim *s) {
    size_t i;

    if (s == NULL)
        return;
    if (s->running)
        SIM_FAIL("sim_free called from inside a callback of sim_run");
    if (s->clients != NULL)
        SIM_FAIL("sim_free: a client attached to the sim was not freed");
    for (i = 0; i < s->nconns; i++) {
        if (s->conns[i]->ac != NULL)
            SIM_FAIL("sim_free: the hiredis context of conn %d was not freed", (int)i);
        if (s->conns[i]->watched)
            SIM_FAIL("sim_free: the fd watcher of conn %d was not freed", (int)i);
    }
    for (i = 0; i < s->nconns; i++)
        conn_free(s->conns[i]);
    xfree(s->conns);
    for (i = 0; i < s->ntimers; i++)
        xfree(s->timers[i]);
    xfree(s->timers);
    while (s->scripts != NULL) {
        script *sc = s->scripts;
        s->scripts = sc->next;
        xfree(sc->src);
        xfree(sc);
    }
    while (s->kept != NULL) {
        kept *k = s->kept;
        s->kept = k->next;
        xfree(k);
    }
    close(s->listen_fd);
    unlink(s->path);
    xfree(s);
    live_sims--;
}

void sim_options(const sim *s, leash_options *o) {
    need(s, "sim");
    need(o, "options");
    leash_options_init(o);
    o->unix_path = s->path;
    o->connect_timeout_ms = 200;
    o->command_timeout_ms = 200;
    o->reconnect_min_ms = 10;
    o->reconnect_max_ms = 40;
    if (s->debug) {
        o->log_cb = debug_log;
        o->log_level = LEASH_LOG_DEBUG;
    }
}

void sim_set_auto(sim *s, unsigned kinds, int on) {
    need(s, "sim");
    if (on)
        s->auto_on |= kinds;
    else
        s->auto_on &= ~kinds;
}

void sim_fail_timer_new(sim *s, int n) {
    need(s, "sim");
    s->fail_timer_new = n > 0 ? n : 0;
    s->timer_new_failed = 0;
}

int sim_timer_new_failed(const sim *s) {
    need(s, "sim");
    return s->timer_new_failed;
}

/* ---- connections: the client's end ---- */

/* The capped constructors of the shadow readers. */
static redisReplyObjectFunctions capped_fns;
#if HIREDIS_MAJOR >= 1
typedef size_t array_count;
#else
typedef int array_count;
#endif
static void *(*hiredis_create_array)(const redisReadTask *, array_count);

static void *capped_array(const redisReadTask *task, array_count elements) {
    if ((long long)elements > MAX_ARRAY)
        return NULL; /* the reader reports "out of memory" */
    return hiredis_create_array(task, elements);
}

static redisReader *reader_new(int capped) {
    redisReader *r = redisReaderCreate();
    if (r == NULL)
        SIM_FAIL("out of memory");
    if (capped) {
        if (hiredis_create_array == NULL) {
            capped_fns = *r->fn;
            hiredis_create_array = capped_fns.createArray;
            capped_fns.createArray = capped_array;
        }
        r->fn = &capped_fns;
    }
    return r;
}

/* fd is a socket the client just connected to the sim's listening socket
 * (a unix socket connects at once, or not at all). A socketpair takes its
 * place: the client keeps its fd number, the connection behind it becomes
 * the sim's, and the sim's end is returned. The pair is nonblocking like
 * the socket it replaces, and close-on-exec (dup3) as leash makes it. */
static int take_over(sim *s, int fd) {
    struct sockaddr_un sa;
    socklen_t len = sizeof sa;
    int sv[2];

    memset(&sa, 0, sizeof sa);
    if (getpeername(fd, (struct sockaddr *)&sa, &len) != 0 || sa.sun_family != AF_UNIX ||
        strncmp(sa.sun_path, s->path, sizeof sa.sun_path) != 0)
        SIM_FAIL("fd %d is not connected to the sim's socket %s: a client on the sim's loop "
                 "must use sim_options' unix_path",
                 fd, s->path);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        SIM_FAIL("socketpair: %s", strerror(errno));
    if (dup3(sv[0], fd, O_CLOEXEC) < 0)
        SIM_FAIL("dup3: %s", strerror(errno));
    close(sv[0]);
    return sv[1];
}

/* A new connection on the client's socket fd. */
static sim_conn *conn_new(sim *s, const leash_client *owner, int fd) {
    sim_conn *c = xcalloc(1, sizeof(*c));

    c->s = s;
    c->owner = owner;
    c->fd = -1;
    c->peer = take_over(s, fd);
    c->in = reader_new(0);
    c->shadow = reader_new(1);
    s->conns = grow(s->conns, &s->conns_cap, s->nconns + 1, sizeof(*s->conns));
    c->index = (int)s->nconns;
    s->conns[s->nconns++] = c;
    if (s->debug)
        fprintf(stderr, "sim [+%lld ms] conn %d opened (fd %d)\n", rel_ms(), c->index, fd);
    return c;
}

/* 1 while the client's end exists: its watcher, or its hiredis context. */
static int client_open(const sim_conn *c) {
    return c->watched || c->ac != NULL;
}

static int client_fd(const sim_conn *c) {
    if (c->watched)
        return c->fd;
    return c->ac != NULL ? c->ac->c.fd : -1;
}

/* The client's socket would take bytes now (or would fail at once: a
 * write event tells it so, as a loop's would). */
static int client_writable(const sim_conn *c) {
    struct pollfd p = {client_fd(c), POLLOUT, 0};

    if (poll(&p, 1, 0) < 0)
        SIM_FAIL("poll: %s", strerror(errno));
    return (p.revents & (POLLOUT | POLLERR | POLLHUP)) != 0;
}

/* Tells the client that what it waits for is ready (LEASH_IO_READ or
 * LEASH_IO_WRITE). It may free its watcher or context, or the whole
 * client, meanwhile: c itself lives on until sim_free. */
static void client_event(sim_conn *c, int events) {
    if (c->watched) {
        c->io_fn(c->io_arg, events);
    } else if (c->ac != NULL) {
        if (events & LEASH_IO_WRITE)
            redisAsyncHandleWrite(c->ac); /* the first one completes the connect */
        else
            redisAsyncHandleRead(c->ac);
    }
}

/* ---- the loop: fd watchers ---- */

/* The watcher io, made by the loop `data`; the test fails if it is not a
 * live one. */
static sim_conn *watcher_of(const sim_client *sc, void *io, const char *hook) {
    size_t i;

    for (i = 0; i < sc->s->nconns; i++) {
        sim_conn *c = sc->s->conns[i];
        if (c != io)
            continue;
        if (c->sc != sc)
            SIM_FAIL("%s: conn %d is not a watcher of this loop", hook, c->index);
        if (!c->watched)
            SIM_FAIL("%s: the watcher of conn %d was freed already", hook, c->index);
        return c;
    }
    SIM_FAIL("%s: %p is not a watcher io_new made", hook, io);
}

/* The client connected fd to the sim's socket (connect() has been called;
 * its end is reported by the first write event, as for a TCP connect). */
static void *hook_io_new(void *data, int fd, leash_io_fn *fn, void *arg) {
    sim_client *sc = data;
    sim *s = sc->s;
    sim_conn *c;
    size_t i;

    if (fn == NULL)
        SIM_FAIL("io_new without a callback");
    for (i = 0; i < s->nconns; i++)
        if (s->conns[i]->watched && s->conns[i]->fd == fd)
            SIM_FAIL("io_new: fd %d is watched already (conn %d)", fd, (int)i);
    c = conn_new(s, sc->client, fd);
    c->sc = sc;
    c->watched = 1;
    c->fd = fd;
    c->io_fn = fn;
    c->io_arg = arg;
    return c;
}

static void hook_io_set(void *data, void *io, int events) {
    sim_conn *c = watcher_of(data, io, "io_set");

    if (events & ~(LEASH_IO_READ | LEASH_IO_WRITE))
        SIM_FAIL("io_set: unknown events %#x on conn %d", (unsigned)events, c->index);
    c->reading = (events & LEASH_IO_READ) != 0;
    c->writing = (events & LEASH_IO_WRITE) != 0;
}

/* The client drops the connection; it closes the fd right after. */
static void hook_io_free(void *data, void *io) {
    sim_conn *c = watcher_of(data, io, "io_free");

    c->watched = 0;
    c->fd = -1;
    c->reading = c->writing = 0;
    if (c->s->debug)
        fprintf(stderr, "sim [+%lld ms] conn %d dropped by the client\n", rel_ms(), c->index);
}

/* ---- bare hiredis contexts: hiredis's event hooks ---- */

static void ev_add_read(void *data) {
    ((sim_conn *)data)->reading = 1;
}

static void ev_del_read(void *data) {
    ((sim_conn *)data)->reading = 0;
}

static void ev_add_write(void *data) {
    ((sim_conn *)data)->writing = 1;
}

static void ev_del_write(void *data) {
    ((sim_conn *)data)->writing = 0;
}

/* hiredis is freeing the context: from here on it must not be touched.
 * (0.14 calls this once; later versions may call it twice.) */
static void ev_cleanup(void *data) {
    sim_conn *c = data;
    c->ac = NULL;
    c->reading = c->writing = 0;
}

const char *sim_unix_path(const sim *s) {
    need(s, "sim");
    return s->path;
}

int sim_attach_context(sim *s, struct redisAsyncContext *ac) {
    sim_conn *c;

    need(s, "sim");
    need(ac, "context");
    if (ac->ev.data != NULL)
        return -1; /* attached elsewhere already */
    c = conn_new(s, NULL, ac->c.fd);
    c->ac = ac;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    ac->ev.data = c;
    return 0;
}

/* ---- the loop: timers ---- */

static void *hook_timer_new(void *data, leash_timer_fn *fn, void *arg) {
    sim_client *sc = data;
    sim *s = sc->s;
    sim_timer *t;

    if (s->fail_timer_new > 0 && --s->fail_timer_new == 0) {
        s->timer_new_failed = 1;
        return NULL;
    }
    t = xcalloc(1, sizeof(*t));
    t->owner = sc;
    t->fn = fn;
    t->arg = arg;
    s->timers = grow(s->timers, &s->timers_cap, s->ntimers + 1, sizeof(*s->timers));
    s->timers[s->ntimers++] = t;
    sc->timers++;
    return t;
}

static void hook_timer_start(void *data, void *timer, uint64_t delay_ms, int keep_alive) {
    sim_client *sc = data;
    sim_timer *t = timer;

    if (delay_ms > (uint64_t)(INT64_MAX - clock_ms))
        delay_ms = (uint64_t)(INT64_MAX - clock_ms);
    t->due = clock_ms + (int64_t)delay_ms;
    t->seq = ++sc->s->seq;
    t->active = 1;
    t->keep_alive = keep_alive;
}

static void hook_timer_stop(void *data, void *timer) {
    (void)data;
    ((sim_timer *)timer)->active = 0;
}

static void hook_timer_free(void *data, void *timer) {
    sim_client *sc = data;
    sim *s = sc->s;
    sim_timer *t = timer;
    size_t i;

    for (i = 0; i < s->ntimers; i++) {
        if (s->timers[i] == t) {
            s->timers[i] = s->timers[--s->ntimers];
            break;
        }
    }
    if (t->owner != NULL)
        t->owner->timers--;
    xfree(t);
}

/* The client is gone: every timer should be too. One that is not stays in
 * the table (sim_timers_alive counts it) with no owner. Every fd watcher
 * must have been freed before (leash/loop.h): the test fails otherwise. */
static void hook_cleanup(void *data) {
    sim_client *sc = data, **pp;
    sim *s = sc->s;
    size_t i;

    for (i = 0; i < s->nconns; i++) {
        sim_conn *c = s->conns[i];
        if (c->sc != sc)
            continue;
        if (c->watched)
            SIM_FAIL("cleanup: the client's loop is released while the fd watcher of conn %d "
                     "lives",
                     c->index);
        c->sc = NULL;
    }

    for (pp = &s->clients; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == sc) {
            *pp = sc->next;
            break;
        }
    }
    for (i = 0; i < s->ntimers; i++)
        if (s->timers[i]->owner == sc)
            s->timers[i]->owner = NULL;
    xfree(sc);
}

int sim_attach(sim *s, leash_client *c) {
    leash_loop hooks;
    sim_client *sc, **pp;
    int rc;

    need(s, "sim");
    sc = xcalloc(1, sizeof(*sc));
    sc->s = s;
    sc->client = c;
    /* Listed first: attaching connects at once, through our hooks. */
    sc->next = s->clients;
    s->clients = sc;
    leash_loop_init(&hooks);
    hooks.data = sc;
    hooks.timer_new = hook_timer_new;
    hooks.timer_start = hook_timer_start;
    hooks.timer_stop = hook_timer_stop;
    hooks.timer_free = hook_timer_free;
    hooks.cleanup = hook_cleanup;
    hooks.io_new = hook_io_new;
    hooks.io_set = hook_io_set;
    hooks.io_free = hook_io_free;
    rc = leash_client_attach_loop(c, &hooks);
    if (rc != LEASH_OK) {
        for (pp = &s->clients; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == sc) {
                *pp = sc->next;
                break;
            }
        }
        xfree(sc);
    }
    return rc;
}

static sim_timer *earliest(const sim *s) {
    sim_timer *best = NULL;
    size_t i;

    for (i = 0; i < s->ntimers; i++) {
        sim_timer *t = s->timers[i];
        if (t->active &&
            (best == NULL || t->due < best->due || (t->due == best->due && t->seq < best->seq)))
            best = t;
    }
    return best;
}

int64_t sim_next_due(const sim *s) {
    const sim_timer *t;
    need(s, "sim");
    t = earliest(s);
    return t ? t->due : -1;
}

int sim_timers_alive(const sim *s) {
    need(s, "sim");
    return (int)s->ntimers;
}

int sim_client_count(const sim *s) {
    const sim_client *sc;
    int n = 0;

    need(s, "sim");
    for (sc = s->clients; sc != NULL; sc = sc->next)
        n++;
    return n;
}

/* Fires due timers, earliest first. The callback may stop or free any
 * timer, its own included: nothing of t is used after the call. */
static int fire_due(sim *s) {
    int fired = 0;
    sim_timer *t;

    while ((t = earliest(s)) != NULL && t->due <= clock_ms) {
        t->active = 0;
        if (++fired > MAX_ROUNDS)
            SIM_FAIL("timers keep firing at +%lld ms", rel_ms());
        t->fn(t->arg);
    }
    return fired > 0;
}

/* ---- what the server side confirmed ---- */

static sub *sub_find(const sim_conn *c, const char *name, size_t len, int pattern) {
    size_t i;
    for (i = 0; i < c->nsubs; i++)
        if (c->subs[i].pattern == pattern && c->subs[i].len == len &&
            memcmp(c->subs[i].name, name, len) == 0)
            return &c->subs[i];
    return NULL;
}

static void sub_set(sim_conn *c, const char *name, size_t len, int pattern, int on) {
    sub *e = sub_find(c, name, len, pattern);

    if (on && e == NULL) {
        c->subs = grow(c->subs, &c->subs_cap, c->nsubs + 1, sizeof(*c->subs));
        e = &c->subs[c->nsubs++];
        e->name = xmemdup(name, len);
        e->len = len;
        e->pattern = pattern;
    } else if (!on && e != NULL) {
        xfree(e->name);
        /* Kept in order: UNSUBSCRIBE without arguments confirms in the
         * order of subscription. */
        memmove(e, e + 1, (size_t)(c->subs + c->nsubs - (e + 1)) * sizeof(*e));
        c->nsubs--;
    }
}

/* A subscribe-family confirmation on its way to the client changes what
 * the server has it subscribed to, whoever wrote the frame. */
static void note_frame(sim_conn *c, const redisReply *r) {
    const char *kind;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return;
    kind = r->element[0]->str;
    if (strcasecmp(kind, "subscribe") == 0 || strcasecmp(kind, "ssubscribe") == 0)
        sub_set(c, r->element[1]->str, r->element[1]->len, 0, 1);
    else if (strcasecmp(kind, "psubscribe") == 0)
        sub_set(c, r->element[1]->str, r->element[1]->len, 1, 1);
    else if (strcasecmp(kind, "unsubscribe") == 0 || strcasecmp(kind, "sunsubscribe") == 0)
        sub_set(c, r->element[1]->str, r->element[1]->len, 0, 0);
    else if (strcasecmp(kind, "punsubscribe") == 0)
        sub_set(c, r->element[1]->str, r->element[1]->len, 1, 0);
}

/* ---- server -> client ---- */

static void push_chunk(sim_conn *c, const char *bytes, size_t len) {
    chunk *k;

    if (len == 0)
        return;
    k = xcalloc(1, sizeof(*k) + len);
    k->len = len;
    memcpy(k->bytes, bytes, len);
    if (c->out_tail)
        c->out_tail->next = k;
    else
        c->out_head = k;
    c->out_tail = k;
}

/* Server bytes, cut into complete replies at the moment they are queued:
 * that is when the server's own state (subscriptions) changes. */
static void queue_bytes(sim_conn *c, const char *bytes, size_t len) {
    redisReader *r = c->shadow;

    if (len == 0)
        return;
    if (c->raw) {
        push_chunk(c, bytes, len);
        return;
    }
    c->partial = grow(c->partial, &c->partial_cap, c->npartial + len, 1);
    memcpy(c->partial + c->npartial, bytes, len);
    c->npartial += len;
    if (redisReaderFeed(r, bytes, len) != REDIS_OK)
        SIM_FAIL("out of memory");
    for (;;) {
        void *reply = NULL;
        size_t end;

        if (redisReaderGetReply(r, &reply) != REDIS_OK) {
            /* Not RESP (or an absurd array): the client's parser (hiredis's
             * reader) fails on these bytes too, so it gets all of them, and
             * all that follow, as is. */
            c->raw = 1;
            push_chunk(c, c->partial, c->npartial);
            c->npartial = 0;
            return;
        }
        if (reply == NULL)
            return;
        /* What the reader has not parsed yet is the tail of partial. */
        end = c->npartial - (r->len - r->pos);
        note_frame(c, reply);
        freeReplyObject(reply);
        push_chunk(c, c->partial, end);
        memmove(c->partial, c->partial + end, c->npartial - end);
        c->npartial -= end;
    }
}

/* Bytes waiting on the client's socket. */
static int client_avail(const sim_conn *c) {
    int avail = 0;

    if (ioctl(client_fd(c), FIONREAD, &avail) != 0)
        return 0;
    return avail;
}

/* Read events while bytes wait on the client's socket and it waits for
 * them. A read event must take some of them (else it would never end). */
static void client_reads(sim_conn *c) {
    int avail;

    while (client_open(c) && c->reading && (avail = client_avail(c)) > 0) {
        client_event(c, LEASH_IO_READ); /* may free the watcher, or the client */
        if (client_open(c) && c->reading && client_avail(c) >= avail)
            SIM_FAIL("conn %d: a read event took none of the %d bytes waiting", c->index, avail);
    }
}

/* One read event's worth: the oldest queued chunk, when the client reads. */
static int deliver(sim_conn *c) {
    chunk *k = c->out_head;
    size_t off = 0;

    if (k == NULL || !client_open(c) || !c->reading || c->peer < 0)
        return 0;
    c->out_head = k->next;
    if (c->out_head == NULL)
        c->out_tail = NULL;
    if (c->s->debug)
        trace_bytes(c, "->", k->bytes, k->len);
    while (off < k->len && client_open(c) && c->reading) {
        ssize_t n = send(c->peer, k->bytes + off, k->len - off, MSG_NOSIGNAL);
        if (n > 0)
            off += (size_t)n;
        else if (n < 0 && errno != EAGAIN && errno != EINTR)
            break; /* the client end is gone */
        /* A reply larger than the socket buffer goes in parts: the client
         * reads what is there, which makes room for the rest. */
        client_reads(c);
    }
    client_reads(c);
    xfree(k);
    return 1;
}

static int conn_read(sim_conn *c);

/* After sim_close: EOF once every queued byte went out. */
static int deliver_eof(sim_conn *c) {
    int progress = 0;

    if (c->closing && c->peer >= 0 && (c->out_head == NULL || !client_open(c))) {
        /* What the client wrote up to the close still arrived. */
        conn_read(c);
    }
    if (c->closing && c->peer >= 0 && (c->out_head == NULL || !client_open(c))) {
        close(c->peer);
        c->peer = -1;
        progress = 1;
    }
    if (c->peer < 0 && client_open(c) && c->reading && !c->eof_seen) {
        c->eof_seen = 1;
        client_event(c, LEASH_IO_READ); /* reads the EOF */
        progress = 1;
    }
    return progress;
}

/* ---- client -> server ---- */

static int cmd_is(const sim_cmd *cmd, const char *name) {
    return cmd != NULL && cmd->argc > 0 && strcasecmp(cmd->argv[0], name) == 0;
}

static void remember_script(sim *s, const char *src, size_t len) {
    script *sc;
    char sha[41];

    leash__sha1_hex(src, len, sha);
    for (sc = s->scripts; sc != NULL; sc = sc->next)
        if (strcmp(sc->sha, sha) == 0)
            return;
    sc = xcalloc(1, sizeof(*sc));
    memcpy(sc->sha, sha, sizeof sha);
    sc->src = xmemdup(src, len);
    sc->next = s->scripts;
    s->scripts = sc;
}

static void received(sim_conn *c, const redisReply *r) {
    sim_cmd *cmd;
    size_t i;

    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0)
        SIM_FAIL("conn %d: the client sent a reply of type %d, not a command", c->index, r->type);
    cmd = xcalloc(1, sizeof(*cmd));
    cmd->conn = c;
    cmd->argc = (int)r->elements;
    cmd->argv = xcalloc(r->elements, sizeof(*cmd->argv));
    cmd->argvlen = xcalloc(r->elements, sizeof(*cmd->argvlen));
    for (i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_STRING)
            SIM_FAIL("conn %d: argument %zu of a command is not a bulk string", c->index, i);
        cmd->argv[i] = xmemdup(e->str, e->len);
        cmd->argvlen[i] = e->len;
    }
    c->received++;
    if (cmd_is(cmd, "SUBSCRIBE") || cmd_is(cmd, "SSUBSCRIBE") || cmd_is(cmd, "PSUBSCRIBE"))
        c->role = SIM_ROLE_SUB;
    else if ((cmd_is(cmd, "EVAL") || cmd_is(cmd, "EVALSHA") || cmd_is(cmd, "SCRIPT")) &&
             c->role != SIM_ROLE_SUB)
        c->role = SIM_ROLE_CMD;
    if (cmd->argc == 3 && cmd_is(cmd, "SCRIPT") && strcasecmp(cmd->argv[1], "LOAD") == 0)
        remember_script(c->s, cmd->argv[2], cmd->argvlen[2]);
    else if (cmd->argc >= 2 && cmd_is(cmd, "EVAL"))
        remember_script(c->s, cmd->argv[1], cmd->argvlen[1]);
    if (c->s->debug) {
        buf line = {NULL, 0, 0};
        for (i = 0; i < r->elements; i++) {
            if (i)
                buf_str(&line, " ");
            buf_add(&line, cmd->argv[i], cmd->argvlen[i] < 48 ? cmd->argvlen[i] : 48);
        }
        trace_bytes(c, "<-", line.p, line.len);
        xfree(line.p);
    }
    if (c->tail)
        c->tail->next_ = cmd;
    else
        c->head = cmd;
    c->tail = cmd;
    c->npending++;
}

/* Reads what the client wrote, into commands. */
static int conn_read(sim_conn *c) {
    char bytes[16384];
    int progress = 0;

    while (c->peer >= 0) {
        ssize_t n = read(c->peer, bytes, sizeof bytes);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            /* The client closed its end (after freeing its watcher or
             * context): nothing more will be read or delivered here. */
            if (n == 0 && c->watched)
                SIM_FAIL("conn %d: the client closed fd %d before freeing its watcher", c->index,
                         c->fd);
            close(c->peer);
            c->peer = -1;
            progress = 1;
            break;
        }
        progress = 1;
        if (redisReaderFeed(c->in, bytes, (size_t)n) != REDIS_OK)
            SIM_FAIL("out of memory");
        for (;;) {
            void *r = NULL;
            if (redisReaderGetReply(c->in, &r) != REDIS_OK)
                SIM_FAIL("conn %d: the client wrote bytes that are not RESP: %s", c->index,
                         c->in->errstr);
            if (r == NULL)
                break;
            received(c, r);
            freeReplyObject(r);
        }
    }
    return progress;
}

static sim_cmd *pop(sim_conn *c) {
    sim_cmd *cmd = c->head;

    c->head = cmd->next_;
    if (c->head == NULL)
        c->tail = NULL;
    c->npending--;
    return cmd;
}

/* ---- auto mode ---- */

static unsigned auto_kind(const sim_cmd *cmd) {
    if (cmd_is(cmd, "AUTH") && (cmd->argc == 2 || cmd->argc == 3))
        return SIM_AUTO_AUTH;
    if (cmd_is(cmd, "SELECT") && cmd->argc == 2)
        return SIM_AUTO_SELECT;
    if (cmd_is(cmd, "PING") && cmd->argc <= 2)
        return SIM_AUTO_PING;
    if (cmd_is(cmd, "TIME") && cmd->argc == 1)
        return SIM_AUTO_TIME;
    if (cmd_is(cmd, "INFO") && cmd->argc == 2 && strcasecmp(cmd->argv[1], "memory") == 0)
        return SIM_AUTO_INFO_MEMORY;
    if (cmd_is(cmd, "INFO") && cmd->argc <= 2)
        return SIM_AUTO_INFO;
    if (cmd_is(cmd, "SCRIPT") && cmd->argc == 3 && strcasecmp(cmd->argv[1], "LOAD") == 0)
        return SIM_AUTO_SCRIPT_LOAD;
    if (cmd_is(cmd, "SUBSCRIBE") && cmd->argc >= 2)
        return SIM_AUTO_SUBSCRIBE;
    if (cmd_is(cmd, "UNSUBSCRIBE"))
        return SIM_AUTO_UNSUBSCRIBE;
    return 0;
}

static void queue_buf(sim_conn *c, buf *b) {
    queue_bytes(c, b->p, b->len);
    b->len = 0;
}

/* ["subscribe"|"unsubscribe", channel, count after it], queued at once so
 * that the next frame's count sees it. */
static void confirm(sim_conn *c, const char *kind, const char *name, size_t len) {
    buf b = {NULL, 0, 0};
    int subscribed = sub_find(c, name, len, 0) != NULL;
    long long count = (long long)c->nsubs;

    if (kind[0] == 's' && !subscribed)
        count++;
    else if (kind[0] == 'u' && subscribed)
        count--;
    buf_str(&b, "*3\r\n");
    buf_bulk(&b, kind, strlen(kind));
    buf_bulk(&b, name, len);
    buf_int(&b, ':', count);
    queue_buf(c, &b);
    xfree(b.p);
}

static void answer(sim_conn *c, const sim_cmd *cmd, unsigned kind) {
    buf b = {NULL, 0, 0};
    char tmp[64];
    int i;

    if (c->nsubs > 0 && !(kind & (SIM_AUTO_PING | SIM_AUTO_SUBSCRIBE | SIM_AUTO_UNSUBSCRIBE))) {
        /* What Redis 7 answers in RESP2 pub/sub mode. */
        buf_str(&b, "-ERR Can't execute '");
        for (i = 0; cmd->argv[0][i] != '\0'; i++) {
            char ch = cmd->argv[0][i];
            if (ch >= 'A' && ch <= 'Z')
                ch = (char)(ch - 'A' + 'a');
            buf_add(&b, &ch, 1);
        }
        buf_str(&b, "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are "
                    "allowed in this context\r\n");
        queue_buf(c, &b);
        xfree(b.p);
        return;
    }
    switch (kind) {
    case SIM_AUTO_AUTH:
    case SIM_AUTO_SELECT:
        buf_str(&b, "+OK\r\n");
        break;
    case SIM_AUTO_PING:
        if (c->nsubs > 0) {
            buf_str(&b, "*2\r\n$4\r\npong\r\n");
            buf_bulk(&b, cmd->argc == 2 ? cmd->argv[1] : "", cmd->argc == 2 ? cmd->argvlen[1] : 0);
        } else if (cmd->argc == 2) {
            buf_bulk(&b, cmd->argv[1], cmd->argvlen[1]);
        } else {
            buf_str(&b, "+PONG\r\n");
        }
        break;
    case SIM_AUTO_TIME: {
        int64_t us = SIM_WALL_S * 1000000 + clock_ms * 1000;
        int n;
        buf_str(&b, "*2\r\n");
        n = snprintf(tmp, sizeof tmp, "%lld", (long long)(us / 1000000));
        buf_bulk(&b, tmp, (size_t)n);
        n = snprintf(tmp, sizeof tmp, "%lld", (long long)(us % 1000000));
        buf_bulk(&b, tmp, (size_t)n);
        break;
    }
    case SIM_AUTO_INFO:
        buf_bulk(&b, "# Server\r\nredis_version:" SIM_REDIS_VERSION "\r\n",
                 sizeof("# Server\r\nredis_version:" SIM_REDIS_VERSION "\r\n") - 1);
        break;
    case SIM_AUTO_INFO_MEMORY: {
        static const char mem[] = "# Memory\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n";
        buf_bulk(&b, mem, sizeof(mem) - 1);
        break;
    }
    case SIM_AUTO_SCRIPT_LOAD:
        leash__sha1_hex(cmd->argv[2], cmd->argvlen[2], tmp);
        buf_bulk(&b, tmp, 40);
        break;
    case SIM_AUTO_SUBSCRIBE:
        for (i = 1; i < cmd->argc; i++)
            confirm(c, "subscribe", cmd->argv[i], cmd->argvlen[i]);
        break;
    case SIM_AUTO_UNSUBSCRIBE:
        if (cmd->argc > 1) {
            for (i = 1; i < cmd->argc; i++)
                confirm(c, "unsubscribe", cmd->argv[i], cmd->argvlen[i]);
        } else {
            size_t k, nchan = 0;
            for (k = 0; k < c->nsubs; k++)
                nchan += !c->subs[k].pattern;
            if (nchan == 0)
                buf_str(&b, "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
            /* Every confirmation removes the oldest channel left. */
            while (nchan-- > 0) {
                for (k = 0; c->subs[k].pattern; k++)
                    ;
                {
                    char *name = xmemdup(c->subs[k].name, c->subs[k].len);
                    confirm(c, "unsubscribe", name, c->subs[k].len);
                    xfree(name);
                }
            }
        }
        break;
    default:
        break;
    }
    queue_buf(c, &b);
    xfree(b.p);
}

/* Answers the oldest pending command if auto mode (or force) covers it. */
static int answer_auto(sim_conn *c, int force) {
    unsigned kind;

    if (c->head == NULL || !sim_conn_live(c))
        return 0;
    kind = auto_kind(c->head);
    if (kind == 0 || (!force && !(c->s->auto_on & kind)))
        return 0;
    answer(c, c->head, kind);
    cmd_free(pop(c));
    return 1;
}

/* ---- running ---- */

static int one_round(sim *s) {
    int progress;
    size_t i;

    reap_backlog(s);
    progress = fire_due(s);
    /* By index: callbacks may attach new connections meanwhile. */
    for (i = 0; i < s->nconns; i++) {
        sim_conn *c = s->conns[i];
        if (client_open(c) && c->writing && client_writable(c)) {
            client_event(c, LEASH_IO_WRITE); /* the first one completes the connect */
            progress = 1;
        }
        progress |= conn_read(c);
        while (answer_auto(c, 0))
            progress = 1;
        progress |= deliver(c);
        progress |= deliver_eof(c);
    }
    return progress;
}

void sim_run(sim *s) {
    int rounds = 0;

    need(s, "sim");
    if (s->running)
        SIM_FAIL("sim_run, sim_advance or sim_wait_cmd called from inside a callback");
    s->running = 1;
    while (one_round(s))
        if (++rounds > MAX_ROUNDS)
            SIM_FAIL("the client does not settle at +%lld ms", rel_ms());
    s->running = 0;
}

void sim_advance(sim *s, int64_t ms) {
    int64_t target, next;

    need(s, "sim");
    if (ms < 0)
        SIM_FAIL("sim_advance by %lld ms: time only moves forward", (long long)ms);
    target = clock_ms + ms;
    sim_run(s);
    /* sim_run leaves no timer due, so each stop is later than the last. */
    while ((next = sim_next_due(s)) >= 0 && next <= target) {
        clock_ms = next;
        sim_run(s);
    }
    clock_ms = target;
    sim_run(s);
}

/* ---- connections ---- */

int sim_conn_count(const sim *s) {
    need(s, "sim");
    return (int)s->nconns;
}

sim_conn *sim_conn_at(const sim *s, int i) {
    need(s, "sim");
    return i >= 0 && (size_t)i < s->nconns ? s->conns[i] : NULL;
}

int sim_conn_live(const sim_conn *c) {
    need(c, "connection");
    return client_open(c) && c->peer >= 0 && !c->closing;
}

sim_conn *sim_conn_find(const sim *s, const leash_client *client, int role) {
    size_t i;

    need(s, "sim");
    for (i = s->nconns; i-- > 0;) {
        sim_conn *c = s->conns[i];
        if (sim_conn_live(c) && (role == SIM_ROLE_ANY || c->role == role) &&
            (client == NULL || c->owner == client))
            return c;
    }
    return NULL;
}

sim_conn *sim_cmd_conn(const sim *s) {
    return sim_conn_find(s, NULL, SIM_ROLE_CMD);
}

sim_conn *sim_sub_conn(const sim *s) {
    return sim_conn_find(s, NULL, SIM_ROLE_SUB);
}

int sim_conn_index(const sim_conn *c) {
    need(c, "connection");
    return c->index;
}

int sim_conn_role(const sim_conn *c) {
    need(c, "connection");
    return c->role;
}

const leash_client *sim_conn_client(const sim_conn *c) {
    need(c, "connection");
    return c->owner;
}

uint64_t sim_conn_received(const sim_conn *c) {
    need(c, "connection");
    return c->received;
}

int sim_conn_pending(const sim_conn *c) {
    need(c, "connection");
    return c->npending;
}

sim_cmd *sim_conn_cmd(const sim_conn *c, int i) {
    sim_cmd *cmd;

    need(c, "connection");
    for (cmd = c->head; cmd != NULL && i > 0; cmd = cmd->next_)
        i--;
    return i == 0 ? cmd : NULL;
}

int sim_conn_subscriptions(const sim_conn *c) {
    need(c, "connection");
    return (int)c->nsubs;
}

const char *sim_conn_subscription(const sim_conn *c, int i, size_t *len, int *pattern) {
    need(c, "connection");
    if (i < 0 || (size_t)i >= c->nsubs)
        return NULL;
    if (len != NULL)
        *len = c->subs[i].len;
    if (pattern != NULL)
        *pattern = c->subs[i].pattern;
    return c->subs[i].name;
}

int sim_conn_subscribed(const sim_conn *c, const char *channel, size_t len) {
    need(c, "connection");
    return sub_find(c, channel, len, 0) != NULL;
}

int sim_reply_len(sim_conn *c, const void *resp, size_t len) {
    need(c, "connection");
    if (c->head == NULL || !sim_conn_live(c))
        return -1;
    queue_bytes(c, resp, len);
    cmd_free(pop(c));
    return 0;
}

int sim_reply(sim_conn *c, const char *resp) {
    need(resp, "reply");
    return sim_reply_len(c, resp, strlen(resp));
}

int sim_replyf(sim_conn *c, const char *fmt, ...) {
    va_list ap;
    char *p;
    int n, rc;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        SIM_FAIL("sim_replyf: bad format");
    p = xcalloc(1, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    rc = sim_reply_len(c, p, (size_t)n);
    xfree(p);
    return rc;
}

int sim_reply_auto(sim_conn *c) {
    need(c, "connection");
    return answer_auto(c, 1) ? 0 : -1;
}

int sim_push_len(sim_conn *c, const void *resp, size_t len) {
    need(c, "connection");
    if (!sim_conn_live(c))
        return -1;
    queue_bytes(c, resp, len);
    return 0;
}

int sim_push(sim_conn *c, const char *resp) {
    need(resp, "bytes");
    return sim_push_len(c, resp, strlen(resp));
}

int sim_publish(sim *s, const char *channel, size_t channel_len, const char *msg, size_t msg_len) {
    buf b = {NULL, 0, 0};
    size_t i;
    int n = 0;

    need(s, "sim");
    buf_str(&b, "*3\r\n$7\r\nmessage\r\n");
    buf_bulk(&b, channel, channel_len);
    buf_bulk(&b, msg, msg_len);
    for (i = 0; i < s->nconns; i++) {
        sim_conn *c = s->conns[i];
        if (sim_conn_live(c) && sub_find(c, channel, channel_len, 0) != NULL) {
            queue_bytes(c, b.p, b.len);
            n++;
        }
    }
    xfree(b.p);
    return n;
}

void sim_close(sim_conn *c) {
    need(c, "connection");
    if (c->closing || c->peer < 0)
        return;
    c->closing = 1;
    /* Half a reply the test queued still goes out before the EOF. */
    push_chunk(c, c->partial, c->npartial);
    c->npartial = 0;
    if (c->s->debug)
        fprintf(stderr, "sim [+%lld ms] conn %d closed by the server\n", rel_ms(), c->index);
}

int sim_drop_pending(sim_conn *c) {
    int n = 0;

    need(c, "connection");
    while (c->head != NULL) {
        cmd_free(pop(c));
        n++;
    }
    return n;
}

/* ---- commands ---- */

static sim_cmd *find_pending(const sim *s, int role, const char *name) {
    size_t i;
    sim_cmd *cmd;

    for (i = s->nconns; i-- > 0;) {
        const sim_conn *c = s->conns[i];
        if (!sim_conn_live(c) || (role != SIM_ROLE_ANY && c->role != role))
            continue;
        for (cmd = c->head; cmd != NULL; cmd = cmd->next_)
            if (cmd_is(cmd, name))
                return cmd;
    }
    return NULL;
}

static const char *role_name(int role) {
    switch (role) {
    case SIM_ROLE_CMD:
        return "command";
    case SIM_ROLE_SUB:
        return "subscriber";
    case SIM_ROLE_NONE:
        return "role-less";
    default:
        return "any";
    }
}

sim_cmd *sim_wait_cmd_at_(sim *s, int role, const char *name, int64_t max_ms, const char *file,
                          int line) {
    int64_t start = clock_ms, next;
    sim_cmd *cmd;

    need(s, "sim");
    need(name, "command name");
    for (;;) {
        sim_run(s);
        if ((cmd = find_pending(s, role, name)) != NULL)
            return cmd;
        next = sim_next_due(s);
        if (next < 0 || next > start + max_ms)
            test_failf_(file, line, "sim_wait_cmd",
                        "no %s pending on a %s connection after %lld ms", name, role_name(role),
                        (long long)(clock_ms - start));
        clock_ms = next;
    }
}

int sim_cmd_is(const sim_cmd *cmd, const char *name) {
    return name != NULL && cmd_is(cmd, name);
}

const char *sim_cmd_arg(const sim_cmd *cmd, int i) {
    sim *s;
    kept *k;

    need(cmd, "command");
    if (i < 0 || i >= cmd->argc)
        return NULL;
    s = cmd->conn->s;
    k = xcalloc(1, sizeof(*k) + cmd->argvlen[i] + 1);
    memcpy(k->bytes, cmd->argv[i], cmd->argvlen[i]);
    k->next = s->kept;
    s->kept = k;
    return k->bytes;
}

const char *sim_cmd_sha(const sim_cmd *cmd) {
    need(cmd, "command");
    return cmd_is(cmd, "EVALSHA") && cmd->argc >= 2 ? sim_cmd_arg(cmd, 1) : NULL;
}

const char *sim_script_source(const sim *s, const char *sha) {
    const script *sc;

    need(s, "sim");
    if (sha == NULL)
        return NULL;
    for (sc = s->scripts; sc != NULL; sc = sc->next)
        if (strcasecmp(sc->sha, sha) == 0)
            return sc->src;
    return NULL;
}
