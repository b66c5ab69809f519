/*
 * libFuzzer target: arbitrary bytes as the server's side of both of a
 * client's connections (command and subscriber), with lock operations in
 * flight and a virtual clock.
 *
 * The client runs on a loop made here (leash/loop.h): timers live in a
 * table and fire when the input moves the virtual clock (this file defines
 * leash__now_ms, in place of src/base/clock.c); each hiredis context leash
 * connects gets one end of a socketpair dup2()'ed over its socket, and the
 * input writes the server's bytes into the other end.
 *
 * Input: byte 0 holds flags (bit 0: answer SCRIPT LOAD on every new command
 * connection, which brings the client to "ready" at once), then records of
 * an opcode byte and an argument byte:
 *   0 n bytes...  n bytes from the server on the command connection
 *   1 n bytes...  the same on the subscriber connection
 *   2 t           the clock moves t * 4 ms; due timers fire
 *   3 x           a call on handle x & 3: acquire (wait by x >> 4), release,
 *                 cancel, or free it and make a new one
 *   4 x           the server closes the command (x even) or subscriber
 *                 connection
 *   5 x           the client writes what it has queued (read and dropped)
 * At the end the client is freed; every acquire and release callback must
 * have fired exactly once, never inside the call that started it (else
 * abort(), which libFuzzer reports).
 *
 * hiredis 0.14 asserts on some inputs (see tests/faults/
 * test_hiredis_asserts.c: a reply nobody asked for on a connection not in
 * pub/sub mode; pub/sub arrays of the wrong shape). The core's reply guard
 * (src/guard.c) refuses those while they are parsed, so they are fuzzed
 * like any other input: an abort here is a bug in the guard. Arrays are
 * still
 * capped at 65536 elements for the same reason (hiredis allocates the
 * announced count up front).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <ctype.h>
#include <errno.h>
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

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#include <leash/leash.h>
#include <leash/loop.h>

#include "dialect/dialect.h"
#include "prim/core.h"
#include "route/node.h"

#define MAX_ARRAY 65536
#define HANDLES 4

/* ---- the virtual clock (replaces src/base/clock.c) ---- */

static int64_t vnow = 1000000;

int64_t leash__now_ms(void);
int64_t leash__now_ms(void) {
    return vnow;
}

/* ---- the loop ---- */

typedef struct ftimer {
    leash_timer_fn *fn;
    void *arg;
    int64_t due;
    int active;
} ftimer;

static ftimer *timers[256];
static int ntimers;

static int loop_attach(void *data, struct redisAsyncContext *ac) {
    (void)data, (void)ac;
    return 0; /* no watchers: the driver reads and writes by hand */
}

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

static void loop_cleanup(void *data) {
    (void)data;
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

/* ---- the server's side of a connection ---- */

typedef struct side {
    redisAsyncContext *ac; /* the context this side belongs to */
    int peer;              /* our end of the socketpair */
    redisReader *shadow;   /* finds where replies end, and their shapes */
    int dead;              /* bytes held back for good */
    char held[8192];       /* bytes since the last complete reply */
    size_t nheld;
} side;

static side sides[2];
static redisReplyObjectFunctions capped;
static void *(*orig_array)(const redisReadTask *, int);

static void *capped_array(const redisReadTask *task, int elements) {
    if (elements > MAX_ARRAY)
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
    s->ac = NULL;
    s->dead = 0;
    s->nheld = 0;
}

/* leash connects to a unix socket that listens here and is never
 * served: the connect succeeds at once, and the socket is then replaced.
 * (A unix path also spares the kernel's TCP ports: thousands of
 * connections a second would use them up.) */
static char listen_path[108];
static int listen_fd = -1;

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

/* A new context: our socketpair takes the place of its socket. */
static void side_attach(side *s, redisAsyncContext *ac) {
    int sv[2];
    side_close(s);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    if (dup2(sv[0], ac->c.fd) < 0)
        abort();
    close(sv[0]);
    s->ac = ac;
    s->peer = sv[1];
    s->shadow = redisReaderCreate();
    if (capped.createArray == NULL) {
        capped = *s->shadow->fn;
        orig_array = capped.createArray;
        capped.createArray = capped_array;
    }
    s->shadow->fn = &capped;
}

static void refresh(void);

static void drain(side *s) {
    char buf[65536];
    if (s->ac == NULL)
        return;
    redisAsyncHandleWrite(s->ac); /* may end in a disconnect */
    refresh();
    while (s->peer >= 0 && read(s->peer, buf, sizeof buf) > 0)
        ;
}

/* Hands one complete reply (or bytes that will never make one) to hiredis. */
static void deliver(side *s, const char *bytes, size_t len) {
    if (s->ac == NULL || len == 0)
        return;
    int fd = s->ac->c.fd, avail = 0, tries;

    if (s->peer < 0 || write(s->peer, bytes, len) != (ssize_t)len)
        return;
    /* Loopback TCP usually delivers at once, but not always: hiredis must
     * see exactly this reply, all of it, and nothing after it. */
    for (tries = 0; tries < 1000; tries++) {
        if (ioctl(fd, FIONREAD, &avail) != 0 || (size_t)avail >= len)
            break;
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 1);
    }
    redisAsyncHandleRead(s->ac);
    refresh(); /* hiredis may have freed the context */
}

/* The server sends bytes on side s: one reply at a time. */
static void server_sends(side *s, const char *bytes, size_t len) {
    size_t i;
    void *reply;
    redisAsyncContext *ac;

    if (s->ac == NULL || s->dead)
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
            /* A protocol error: hiredis sees the same bytes, fails at the
             * same place, and drops the connection. */
            s->dead = 1;
            deliver(s, s->held, s->nheld);
            return;
        }
        if (reply == NULL)
            continue;
        freeReplyObject(reply);
        ac = s->ac;
        deliver(s, s->held, s->nheld);
        s->nheld = 0;
        if (s->ac != ac || s->dead)
            return;
        fire_due();
        refresh();
        if (s->ac != ac)
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

/* Forgets contexts that hiredis freed (leash dropped its pointer). */
static void refresh(void) {
    leash__conn *conns[2];
    int i;
    client_conns(conns);
    for (i = 0; i < 2; i++)
        if (sides[i].ac != NULL && conns[i]->ac != sides[i].ac)
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

/* New contexts (first connects, reconnects) get their socketpair. */
static void track(void) {
    leash__conn *conns[2];
    int i;
    refresh();
    client_conns(conns);
    for (i = 0; i < 2; i++) {
        redisAsyncContext *ac = conns[i]->ac;
        if (ac == NULL || ac == sides[i].ac)
            continue;
        side_attach(&sides[i], ac);
        drain(&sides[i]); /* the first write completes the connect */
        if (i == 0 && auto_handshake && sides[i].ac == ac)
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
    listen_once();
    leash_options_init(&o);
    /* The socket is replaced before it is used. */
    o.unix_path = listen_path;
    o.lease_ms = 300;
    o.command_timeout_ms = 200;
    o.connect_timeout_ms = 200;
    o.reconnect_min_ms = 10;
    o.reconnect_max_ms = 40;
    if (getenv("FUZZ_DEBUG")) {
        o.log_cb = debug_log;
        o.log_level = LEASH_LOG_DEBUG;
    }
    if (leash_client_new(&client, &o) != LEASH_OK)
        abort();
    leash_loop_init(&hooks);
    hooks.attach = loop_attach;
    hooks.timer_new = timer_new;
    hooks.timer_start = timer_start;
    hooks.timer_stop = timer_stop;
    hooks.timer_free = timer_free;
    hooks.cleanup = loop_cleanup;
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
                if (sides[arg & 1].ac) {
                    redisAsyncHandleRead(sides[arg & 1].ac); /* EOF */
                    refresh();
                }
            }
            break;
        default:
            drain(&sides[arg & 1]);
            break;
        }
        settle();
    }

    if (getenv("FUZZ_DEBUG")) {
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
    return 0;
}
