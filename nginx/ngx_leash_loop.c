/* SPDX-License-Identifier: MIT */
#include "ngx_leash_loop.h"

#include <ngx_event.h>

#include <leash/loop.h>

#include <time.h>

/*
 * Three things about nginx's loop decide the shape of this file:
 *
 * - epoll events are edge-triggered when registered with NGX_CLEAR_EVENT
 *   (what nginx uses for its own sockets). leash's socket reads until a
 *   short read, which drains a stream socket, but a reply callback may free
 *   the socket mid-way; level-triggered registration (flags 0) needs no
 *   such reasoning: whatever is left fires again on the next turn.
 * - A worker that shuts down (reload, QUIT) waits for every timer not
 *   marked cancelable. Every leash timer is cancelable, also with
 *   keep_alive: the core leaves its command timer keep-alive for
 *   command_timeout_ms after the last reply, which would hold an old worker
 *   back by that much. What must keep a worker alive is a request that
 *   waits: the module gives such a request a timer of its own.
 * - ngx_add_timer keeps the old deadline when the new one is within
 *   NGX_TIMER_LAZY_DELAY (300 ms) of it, and counts from ngx_current_msec,
 *   the time the loop last woke. leash's deadlines are exact: a timer is
 *   deleted before it is armed again, and the delay is stretched by how far
 *   the cached time is behind the clock.
 */

typedef struct {
    ngx_log_t *log;
} ngx_leash_loop_t;

typedef struct {
    ngx_event_t ev;
    leash_timer_fn *fn;
    void *arg;
} ngx_leash_timer_t;

typedef struct {
    ngx_connection_t *conn;
    leash_io_fn *fn;
    void *arg;
} ngx_leash_io_t;

static void ngx_leash_timer_fired(ngx_event_t *ev) {
    ngx_leash_timer_t *t = ev->data;

    /* fn may free t. */
    t->fn(t->arg);
}

static void *ngx_leash_timer_new(void *data, leash_timer_fn *fn, void *arg) {
    ngx_leash_loop_t *lp = data;
    ngx_leash_timer_t *t = ngx_calloc(sizeof(*t), lp->log);

    if (t == NULL)
        return NULL;
    t->ev.handler = ngx_leash_timer_fired;
    t->ev.data = t;
    t->ev.log = lp->log;
    t->ev.cancelable = 1;
    t->fn = fn;
    t->arg = arg;
    return t;
}

static void ngx_leash_timer_stop(void *data, void *timer) {
    ngx_leash_timer_t *t = timer;

    if (t->ev.timer_set)
        ngx_del_timer(&t->ev);
    if (t->ev.posted) {
        /* Braces: the macro is several statements. */
        ngx_delete_posted_event(&t->ev);
    }
}

/* How far ngx_current_msec (CLOCK_MONOTONIC when the loop last woke) is
 * behind the clock now; 0 when it is not that clock. */
static ngx_msec_t ngx_leash_lag(void) {
    struct timespec ts;
    ngx_msec_t now, lag;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    now = (ngx_msec_t)ts.tv_sec * 1000 + (ngx_msec_t)(ts.tv_nsec / 1000000);
    lag = now - ngx_current_msec;
    return lag < 1000 ? lag : 0;
}

static void ngx_leash_timer_start(void *data, void *timer, uint64_t delay_ms, int keep_alive) {
    ngx_leash_timer_t *t = timer;
    ngx_msec_t delay;

    (void)keep_alive; /* always cancelable: see the top of this file */
    ngx_leash_timer_stop(data, timer);
    /* leash caps every duration at 10 years; ngx_msec_t is 64 bits here. */
    delay = (ngx_msec_t)delay_ms + ngx_leash_lag();
    ngx_add_timer(&t->ev, delay);
}

static void ngx_leash_timer_free(void *data, void *timer) {
    ngx_leash_timer_stop(data, timer);
    ngx_free(timer);
}

static void ngx_leash_io_ready(ngx_event_t *ev) {
    ngx_connection_t *c = ev->data;
    ngx_leash_io_t *io = c->data;

    /* fn may free io (and give c back): nothing touches either after. */
    io->fn(io->arg, ev->write ? LEASH_IO_WRITE : LEASH_IO_READ);
}

static void *ngx_leash_io_new(void *data, int fd, leash_io_fn *fn, void *arg) {
    ngx_leash_loop_t *lp = data;
    ngx_leash_io_t *io = ngx_calloc(sizeof(*io), lp->log);
    ngx_connection_t *c;

    if (io == NULL)
        return NULL;
    c = ngx_get_connection(fd, lp->log);
    if (c == NULL) {
        ngx_free(io);
        return NULL;
    }
    c->data = io;
    c->read->handler = ngx_leash_io_ready;
    c->write->handler = ngx_leash_io_ready;
    c->read->log = lp->log;
    c->write->log = lp->log;
    io->conn = c;
    io->fn = fn;
    io->arg = arg;
    return io;
}

static void ngx_leash_io_want(ngx_event_t *ev, ngx_int_t event, int want) {
    if (want && !ev->active)
        (void)ngx_add_event(ev, event, 0);
    else if (!want && ev->active)
        (void)ngx_del_event(ev, event, 0);
    if (!want && ev->posted) {
        ngx_delete_posted_event(ev);
    }
}

static void ngx_leash_io_set(void *data, void *watcher, int events) {
    ngx_leash_io_t *io = watcher;

    ngx_leash_io_want(io->conn->read, NGX_READ_EVENT, events & LEASH_IO_READ);
    ngx_leash_io_want(io->conn->write, NGX_WRITE_EVENT, events & LEASH_IO_WRITE);
}

static void ngx_leash_io_free(void *data, void *watcher) {
    ngx_leash_io_t *io = watcher;
    ngx_connection_t *c = io->conn;

    ngx_leash_io_set(data, watcher, 0);
    /* leash closes the fd itself, right after this. fd -1 (set after
     * ngx_free_connection, which still reads it) is how nginx tells an
     * event of this turn for a connection given back: stale. */
    ngx_free_connection(c);
    c->fd = (ngx_socket_t)-1;
    ngx_free(io);
}

static void ngx_leash_cleanup(void *data) {
    ngx_free(data);
}

int ngx_leash_loop_attach(leash_client *c, ngx_log_t *log) {
    ngx_leash_loop_t *lp;
    leash_loop hooks;
    int rc;

    lp = ngx_calloc(sizeof(*lp), log);
    if (lp == NULL)
        return LEASH_ENOMEM;
    lp->log = log;
    leash_loop_init(&hooks);
    hooks.data = lp;
    hooks.timer_new = ngx_leash_timer_new;
    hooks.timer_start = ngx_leash_timer_start;
    hooks.timer_stop = ngx_leash_timer_stop;
    hooks.timer_free = ngx_leash_timer_free;
    hooks.cleanup = ngx_leash_cleanup;
    hooks.io_new = ngx_leash_io_new;
    hooks.io_set = ngx_leash_io_set;
    hooks.io_free = ngx_leash_io_free;
    rc = leash_client_attach_loop(c, &hooks);
    if (rc != LEASH_OK)
        ngx_free(lp);
    return rc;
}
