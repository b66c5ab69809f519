/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: arbitrary bytes as the server's side of both of a
 * client's connections (command and subscriber), with lock operations in
 * flight and a virtual clock.
 *
 * The client runs on a loop made here (leash/loop.h): timers live in a
 * table and fire when the input moves the virtual clock (this file defines
 * leash__now_ms, in place of src/base/clock.c). leash opens its sockets
 * itself, to a unix socket that listens here and is never served, and asks
 * the loop to watch each: io_new is where the loop learns of a connection,
 * and dup3()s one end of a socketpair over the client's fd (the first
 * write event completes the connect: SO_ERROR reads 0 on the pair); the
 * input writes the server's bytes into the other end. The watcher is
 * called back with what it waits for (io_set) and is ready (poll), as a
 * loop would; io_free is where the client drops a connection. Which of the
 * node's connections a watcher serves is read from the node
 * (leash__sock_fd).
 *
 * Input: byte 0 holds flags (bit 0: answer TIME and SCRIPT LOAD on every
 * new command connection, which brings the client to "ready" at once),
 * then records of an opcode byte and an argument byte:
 *   0 n bytes...  n bytes from the server on the command connection
 *   1 n bytes...  the same on the subscriber connection
 *   2 t           the clock moves t * 4 ms; due timers fire
 *   3 x           a call on handle x & 3: acquire (wait by x >> 4), release,
 *                 cancel, or free it and make a new one
 *   4 x           the server closes the command (x even) or subscriber
 *                 connection
 *   5 x           the client writes what it has queued (read and dropped)
 * At the end the client is freed; every acquire and release callback must
 * have fired exactly once, never inside the call that started it, and no
 * timer or fd watcher may outlive the client (else abort(), which
 * libFuzzer reports). So must the loop rules of leash/loop.h hold: one
 * watcher per fd, no io_set or io_free on a freed watcher, none alive at
 * cleanup.
 *
 * The client cuts replies with hiredis's reply parser (src/wire/sock.c,
 * arrays capped at 4096 elements); no hiredis async context is involved,
 * so no input can trip hiredis's asserts. On the subscriber connection
 * every frame goes to the node (src/route/node.c, on_sub_frame), and an
 * error reply breaks the connection (src/wire/conn.c, on_sock_reply).
 * Bytes go to the client one complete reply per read event. The driver's
 * own parser, which finds where replies end, caps arrays at 65536 (hiredis
 * allocates the announced count up front).
 *
 * FUZZ_DEBUG set in the environment prints leash's log, what the client
 * writes on each connection (a NUL as \0) and the client's stats.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#include <leash/leash.h>
#include <leash/loop.h>

#include "dialect/dialect.h"
#include "prim/core.h"
#include "route/node.h"
#include "wire/sock.h"

#define MAX_ARRAY 65536
#define HANDLES 4
#define IOS 8

/* ---- the virtual clock (replaces src/base/clock.c) ---- */

static int64_t vnow = 1000000;

int64_t leash__now_ms(void);
int64_t leash__now_ms(void) {
    return vnow;
}

/* The stats' clock: the same virtual time. */
int64_t leash__now_us(void);
int64_t leash__now_us(void) {
    return vnow * 1000;
}

/* ---- the loop: timers ---- */

typedef struct ftimer {
    leash_timer_fn *fn;
    void *arg;
    int64_t due;
    int active;
} ftimer;

static ftimer *timers[256];
static int ntimers;

static void *timer_new(void *data, leash_timer_fn *fn, void *arg) {
    ftimer *t;
    (void)data;
    if (ntimers == 256)
        return NULL;
    t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->fn = fn;
    t->arg = arg;
    timers[ntimers++] = t;
    return t;
}

static void timer_start(void *data, void *timer, uint64_t delay_ms, int keep_alive) {
    ftimer *t = timer;
    (void)data, (void)keep_alive;
    t->due = vnow + (int64_t)delay_ms;
    t->active = 1;
}

static void timer_stop(void *data, void *timer) {
    (void)data;
    ((ftimer *)timer)->active = 0;
}

static void timer_free(void *data, void *timer) {
    int i;
    (void)data;
    for (i = 0; i < ntimers; i++)
        if (timers[i] == timer) {
            timers[i] = timers[--ntimers];
            break;
        }
    free(timer);
}

/* Fires due timers, earliest first, until none is due. */
static void fire_due(void) {
    for (;;) {
        ftimer *best = NULL;
        int i;
        for (i = 0; i < ntimers; i++)
            if (timers[i]->active && timers[i]->due <= vnow &&
                (!best || timers[i]->due < best->due))
                best = timers[i];
        if (best == NULL)
            return;
        best->active = 0;
        best->fn(best->arg);
    }
}

/* ---- the loop: fd watchers ---- */

/* A watcher lives in a static slot: the driver may still look at one the
 * client freed from inside its callback. */
typedef struct fio {
    int used; /* between io_new and io_free */
    int fd;   /* the client's socket; -1 once freed */
    leash_io_fn *fn;
    void *arg;
    int events; /* what the client waits for */
    int peer;   /* our end of the socketpair, until a side takes it */
} fio;

static fio ios[IOS];

/* The server's side of the command (0) and subscriber (1) connection. */
typedef struct side {
    fio *io;             /* the watcher of the client's socket; NULL: none */
    int peer;            /* our end of the socketpair */
    redisReader *shadow; /* finds where replies end */
    int dead;            /* bytes held back for good */
    int unread;          /* bytes or the EOF sent, no read event since */
    char held[8192];     /* bytes since the last complete reply */
    size_t nheld;
} side;

static side sides[2];
static int debug; /* FUZZ_DEBUG is set */

static int claimed(const fio *io) {
    return sides[0].io == io || sides[1].io == io;
}

/* leash connects to a unix socket that listens here and is never
 * served: the connect succeeds at once, and the socket is then replaced.
 * (A unix path also spares the kernel's TCP ports: thousands of
 * connections a second would use them up.) */
static char listen_path[108];
static int listen_fd = -1;

static void *io_new(void *data, int fd, leash_io_fn *fn, void *arg) {
    fio *io = NULL;
    int i, sv[2];

    (void)data;
    for (i = 0; i < IOS; i++) {
        if (ios[i].used && ios[i].fd == fd)
            abort(); /* two watchers for one fd */
        if (io == NULL && !ios[i].used && !claimed(&ios[i]))
            io = &ios[i];
    }
    if (io == NULL || fn == NULL)
        return NULL;
    /* Our socketpair takes the place of the client's socket: it keeps its
     * fd number, the connection behind it becomes ours. */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    if (dup3(sv[0], fd, O_CLOEXEC) < 0)
        abort();
    close(sv[0]);
    io->used = 1;
    io->fd = fd;
    io->fn = fn;
    io->arg = arg;
    io->events = 0;
    io->peer = sv[1];
    return io;
}

static void io_set(void *data, void *watcher, int events) {
    fio *io = watcher;
    (void)data;
    if (!io->used || (events & ~(LEASH_IO_READ | LEASH_IO_WRITE)) != 0)
        abort();
    io->events = events;
}

/* The client drops the connection (and closes the fd right after). */
static void io_free(void *data, void *watcher) {
    fio *io = watcher;
    (void)data;
    if (!io->used)
        abort();
    io->used = 0;
    io->fd = -1;
    io->events = 0;
    if (io->peer >= 0) { /* no side took it */
        close(io->peer);
        io->peer = -1;
    }
}

static void loop_cleanup(void *data) {
    int i;
    (void)data;
    for (i = 0; i < IOS; i++)
        if (ios[i].used)
            abort(); /* a watcher outlived its client */
}

/* Of `wanted`, what the watcher waits for and is ready now, as a loop would
 * see it. */
static int ready(const fio *io, int wanted) {
    struct pollfd p = {io->fd, 0, 0};
    int events = 0;

    wanted &= io->events;
    if (!io->used || wanted == 0)
        return 0;
    if (wanted & LEASH_IO_READ)
        p.events |= POLLIN;
    if (wanted & LEASH_IO_WRITE)
        p.events |= POLLOUT;
    if (poll(&p, 1, 0) <= 0)
        return 0;
    if ((wanted & LEASH_IO_READ) && (p.revents & (POLLIN | POLLHUP | POLLERR)))
        events |= LEASH_IO_READ;
    if ((wanted & LEASH_IO_WRITE) && (p.revents & (POLLOUT | POLLHUP | POLLERR)))
        events |= LEASH_IO_WRITE;
    return events;
}

/* ---- the server's side of a connection ---- */

static redisReplyObjectFunctions capped;
#if HIREDIS_MAJOR >= 1
typedef size_t array_count;
#else
typedef int array_count;
#endif
static void *(*orig_array)(const redisReadTask *, array_count);

static void *capped_array(const redisReadTask *task, array_count elements) {
    if ((long long)elements > MAX_ARRAY)
        return NULL; /* the reader reports "out of memory" */
    return orig_array(task, elements);
}

static void side_close(side *s) {
    if (s->peer >= 0)
        close(s->peer);
    if (s->shadow)
        redisReaderFree(s->shadow);
    s->peer = -1;
    s->shadow = NULL;
    s->io = NULL;
    s->dead = 0;
    s->unread = 0;
    s->nheld = 0;
}

/* 1 while the client watches this side's socket. */
static int side_live(const side *s) {
    return s->io != NULL && s->io->used;
}

static void unlink_listen_path(void) {
    unlink(listen_path);
}

static void listen_once(void) {
    struct sockaddr_un sa;
    if (listen_fd >= 0)
        return;
    atexit(unlink_listen_path);
    snprintf(listen_path, sizeof listen_path, "/tmp/leash-fuzz-%d.sock", (int)getpid());
    unlink(listen_path);
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, listen_path, strlen(listen_path) + 1);
    listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(listen_fd, 1024) != 0)
        abort();
}

/* Connections nobody serves: taken off the backlog and closed. */
static void reap_backlog(void) {
    int fd;
    while ((fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
        close(fd);
}

/* A new watcher of the client: side s serves it from now on. */
static void side_attach(side *s, fio *io) {
    side_close(s);
    s->io = io;
    s->peer = io->peer;
    io->peer = -1;
    s->shadow = redisReaderCreate();
    if (s->shadow == NULL)
        abort();
    if (capped.createArray == NULL) {
        capped = *s->shadow->fn;
        orig_array = capped.createArray;
        capped.createArray = capped_array;
    }
    s->shadow->fn = &capped;
}

static void refresh(void);

/* The client hears of what is ready on its socket. Only this driver sends
 * it bytes (or the EOF): nothing can be readable unless it did. */
static void pump(side *s) {
    int events;
    if (!side_live(s) ||
        (events = ready(s->io, LEASH_IO_WRITE | (s->unread ? LEASH_IO_READ : 0))) == 0)
        return;
    if (events & LEASH_IO_READ)
        s->unread = 0;             /* the client reads until the socket is empty */
    s->io->fn(s->io->arg, events); /* may free the watcher, or the client */
    refresh();
}

/* The client writes what it has queued; the server drops it unread. */
static void drain(side *s) {
    char buf[65536];
    ssize_t n;
    pump(s);
    while (s->peer >= 0 && (n = read(s->peer, buf, sizeof buf)) > 0) {
        ssize_t i;
        if (!debug)
            continue;
        fprintf(stderr, "client -> %s: ", s == &sides[0] ? "cmd" : "sub");
        for (i = 0; i < n; i++) {
            if (buf[i] == '\0')
                fputs("\\0", stderr); /* channel names hold one */
            else
                fputc(buf[i], stderr);
        }
        fputc('\n', stderr);
    }
}

/* Hands one complete reply (or bytes that will never make one) to the
 * client, in one read event. */
static void deliver(side *s, const char *bytes, size_t len) {
    int avail = 0, tries;
    ssize_t n;

    if (!side_live(s) || len == 0 || s->peer < 0)
        return;
    n = write(s->peer, bytes, len);
    if (n > 0)
        s->unread = 1;
    if (n != (ssize_t)len)
        return;
    /* A socketpair delivers at once; the client must see exactly this
     * reply, all of it, and nothing after it. */
    for (tries = 0; tries < 1000; tries++) {
        if (ioctl(s->io->fd, FIONREAD, &avail) != 0 || (size_t)avail >= len)
            break;
        struct pollfd p = {s->io->fd, POLLIN, 0};
        poll(&p, 1, 1);
    }
    pump(s);
}

/* The server sends bytes on side s: one reply at a time. */
static void server_sends(side *s, const char *bytes, size_t len) {
    size_t i;
    void *reply;
    fio *io;

    if (!side_live(s) || s->dead)
        return;
    for (i = 0; i < len; i++) {
        if (s->nheld == sizeof s->held) {
            s->dead = 1; /* one reply that long: hold it back */
            return;
        }
        s->held[s->nheld++] = bytes[i];
        reply = NULL;
        redisReaderFeed(s->shadow, bytes + i, 1);
        if (redisReaderGetReply(s->shadow, &reply) != REDIS_OK) {
            if (strstr(s->shadow->errstr, "Out of memory") != NULL) {
                s->dead = 1; /* a huge array: hold it back for good */
                return;
            }
            /* A protocol error: the client's parser sees the same bytes,
             * fails at the same place, and drops the connection. */
            s->dead = 1;
            deliver(s, s->held, s->nheld);
            return;
        }
        if (reply == NULL)
            continue;
        freeReplyObject(reply);
        io = s->io;
        deliver(s, s->held, s->nheld);
        s->nheld = 0;
        if (s->io != io || !side_live(s) || s->dead)
            return;
        fire_due();
        refresh();
        if (s->io != io || !side_live(s))
            return;
    }
}

/* ---- the client ---- */

static leash_client *client;
static leash_lock *handles[HANDLES];
static int in_call;
static int auto_handshake;

typedef struct expect {
    int acq, rel; /* callbacks still due */
} expect;
static expect ex[HANDLES];

static void on_acquired(leash_lock *l, int status, void *arg) {
    expect *e = arg;
    (void)l, (void)status;
    if (in_call || e->acq <= 0)
        abort();
    e->acq--;
}

static void on_released(leash_lock *l, int status, void *arg) {
    expect *e = arg;
    (void)l, (void)status;
    if (in_call || e->rel <= 0)
        abort();
    e->rel--;
}

static void on_lost(leash_lock *l, int reason, void *arg) {
    (void)arg, (void)reason;
    if (leash_held(l))
        abort();
}

/* The command and subscriber connections of the client's one node. */
static void client_conns(leash__conn *conns[2]) {
    leash__route *route = leash__client_core(client)->route;
    leash__node *n = route->ops->node(route, 0);
    conns[0] = &n->cmd;
    conns[1] = &n->sub;
}

/* Forgets the sides whose watcher the client freed (it dropped the
 * connection). */
static void refresh(void) {
    int i;
    for (i = 0; i < 2; i++)
        if (sides[i].io != NULL && !sides[i].io->used)
            side_close(&sides[i]);
}

static void debug_log(int level, const char *msg, void *arg) {
    (void)arg;
    fprintf(stderr, "leash[%d] %s\n", level, msg);
}

static void handshake(side *s) {
    const leash__dialect *d = &leash__dialect_leash;
    char buf[64];
    int i;
    /* TIME first (its answer here: an error, which leash takes in its
     * stride), then one SHA1 per SCRIPT LOAD. */
    server_sends(s, "-ERR no clock here\r\n", 20);
    for (i = 0; i < d->nscripts; i++) {
        snprintf(buf, sizeof buf, "$40\r\n%s\r\n", d->scripts[i]->sha);
        server_sends(s, buf, strlen(buf));
    }
}

/* New watchers (first connects, reconnects) get their side: which of the
 * node's connections a watcher serves is read from the node. */
static void track(void) {
    leash__conn *conns[2];
    int i, j, fd;
    refresh();
    client_conns(conns);
    for (i = 0; i < 2; i++) {
        fio *io = NULL;
        if (conns[i]->sock == NULL || (fd = leash__sock_fd(conns[i]->sock)) < 0)
            continue;
        for (j = 0; j < IOS; j++)
            if (ios[j].used && ios[j].fd == fd)
                io = &ios[j];
        if (io == NULL)
            abort(); /* a socket nobody watches */
        if (io == sides[i].io)
            continue;
        side_attach(&sides[i], io);
        pump(&sides[i]); /* the first write event completes the connect */
        if (i == 0 && auto_handshake && sides[i].io == io && side_live(&sides[i]))
            handshake(&sides[i]);
    }
}

static void settle(void) {
    int i;
    reap_backlog();
    for (i = 0; i < 4; i++) {
        fire_due();
        track();
        drain(&sides[0]);
        drain(&sides[1]);
    }
}

static void user_call(int x) {
    int h = x & 3, what = (x >> 2) & 3;
    static const int64_t waits[4] = {0, 50, 2000, LEASH_WAIT_FOREVER};
    leash_lock *l = handles[h];
    int rc;

    in_call = 1;
    switch (what) {
    case 0:
        rc = leash_acquire(l, waits[(x >> 4) & 3], on_acquired, &ex[h]);
        if (rc == LEASH_OK)
            ex[h].acq++;
        break;
    case 1:
        rc = leash_release(l, on_released, &ex[h]);
        if (rc == LEASH_OK)
            ex[h].rel++;
        break;
    case 2:
        if (x & 0x40) {
            rc = leash_force_release(l, on_released, &ex[h]);
            if (rc == LEASH_OK)
                ex[h].rel++;
        } else {
            leash_cancel(l);
        }
        break;
    case 3:
        /* Pending callbacks fire (ECANCELED) inside the free: allowed. */
        in_call = 0;
        leash_lock_free(l);
        if (ex[h].acq || ex[h].rel)
            abort();
        handles[h] = leash_lock_new(client, h & 1 ? "b" : "a");
        leash_on_lost(handles[h], on_lost, NULL);
        break;
    }
    in_call = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    leash_options o;
    leash_loop hooks;
    size_t pos = 1;
    int i;

    if (size < 1)
        return 0;
    auto_handshake = data[0] & 1;
    sides[0].peer = sides[1].peer = -1;
    for (i = 0; i < IOS; i++)
        ios[i].peer = ios[i].fd = -1;
    listen_once();
    leash_options_init(&o);
    /* The socket is replaced before it is used. */
    o.unix_path = listen_path;
    o.lease_ms = 300;
    o.command_timeout_ms = 200;
    o.connect_timeout_ms = 200;
    o.reconnect_min_ms = 10;
    o.reconnect_max_ms = 40;
    debug = getenv("FUZZ_DEBUG") != NULL;
    if (debug) {
        o.log_cb = debug_log;
        o.log_level = LEASH_LOG_DEBUG;
    }
    if (leash_client_new(&client, &o) != LEASH_OK)
        abort();
    leash_loop_init(&hooks);
    hooks.timer_new = timer_new;
    hooks.timer_start = timer_start;
    hooks.timer_stop = timer_stop;
    hooks.timer_free = timer_free;
    hooks.cleanup = loop_cleanup;
    hooks.io_new = io_new;
    hooks.io_set = io_set;
    hooks.io_free = io_free;
    if (leash_client_attach_loop(client, &hooks) != LEASH_OK)
        abort();
    for (i = 0; i < HANDLES; i++) {
        handles[i] = leash_lock_new(client, i & 1 ? "b" : "a");
        leash_on_lost(handles[i], on_lost, NULL);
        memset(&ex[i], 0, sizeof ex[i]);
    }
    /* Operations in flight from the start: a holder-to-be and a waiter on
     * "a", a try-once and a bounded wait on "b". */
    user_call(0 | (0 << 4));
    user_call(2 | (3 << 4));
    user_call(1 | (0 << 4));
    user_call(3 | (2 << 4));
    settle();

    while (pos + 2 <= size) {
        int op = data[pos] & 7, arg = data[pos + 1];
        pos += 2;
        switch (op) {
        case 0:
        case 1: {
            size_t n = (size_t)arg;
            if (n > size - pos)
                n = size - pos;
            server_sends(&sides[op], (const char *)data + pos, n);
            pos += n;
            break;
        }
        case 2:
            vnow += arg * 4;
            break;
        case 3:
            user_call(arg);
            break;
        case 4:
            if (sides[arg & 1].peer >= 0) {
                close(sides[arg & 1].peer);
                sides[arg & 1].peer = -1;
                sides[arg & 1].unread = 1;
                pump(&sides[arg & 1]); /* the EOF */
            }
            break;
        default:
            drain(&sides[arg & 1]);
            break;
        }
        settle();
    }

    if (debug) {
        leash_stats st;
        leash_client_stats(client, &st);
        fprintf(stderr,
                "connects %llu sub_connects %llu sent %llu renewals %llu wakeups %llu losts "
                "%llu held %d %d %d %d\n",
                (unsigned long long)st.connects, (unsigned long long)st.sub_connects,
                (unsigned long long)st.commands_sent, (unsigned long long)st.renewals,
                (unsigned long long)st.wakeups, (unsigned long long)st.losts,
                leash_held(handles[0]), leash_held(handles[1]), leash_held(handles[2]),
                leash_held(handles[3]));
    }
    leash_client_free(client);
    client = NULL;
    for (i = 0; i < HANDLES; i++)
        if (ex[i].acq || ex[i].rel)
            abort(); /* a callback never fired */
    side_close(&sides[0]);
    side_close(&sides[1]);
    reap_backlog();
    if (ntimers != 0)
        abort(); /* a timer outlived its client */
    for (i = 0; i < IOS; i++)
        if (ios[i].used || ios[i].peer >= 0)
            abort(); /* a watcher outlived its client */
    return 0;
}
