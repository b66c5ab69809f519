/* SPDX-License-Identifier: MIT */
/*
 * leash/adapters/libevent.h — run a leash client on a libevent 2 event_base.
 *
 *     struct event_base *base = event_base_new();
 *     leash_client *c;
 *     leash_client_new(&c, &opts);
 *     leash_libevent_attach(base, c);   // starts connecting
 *     ... leash_acquire(...) ...
 *     event_base_dispatch(base);
 *
 * Header-only, like hiredis's adapters: it compiles against the libevent
 * headers of your program and links nothing into libleash. The Redis sockets
 * are persistent read/write events, leash's timers one-shot evtimer events,
 * on the same base. Every hook runs on the
 * thread that runs the base.
 *
 * Keeping the loop alive. libevent has no ev_unref or uv_unref: a pending
 * event always counts, and event_base_dispatch() returns only once no event
 * at all is pending. So the keep_alive hint of the core is ignored here, and
 * a leash timer that is armed (a renewal, a reconnect back-off, a lingering
 * subscription) keeps event_base_dispatch() running like any other event.
 * In practice this changes little: as long as a connection to Redis is up,
 * leash keeps a read event pending on it, which holds every loop (libev and
 * libuv too) until the client is freed. The difference shows while Redis is
 * unreachable: with libev or libuv an otherwise idle program returns from its
 * loop during the outage, with libevent it keeps running and reconnects. To
 * leave the loop, free the client (all of its events are then deleted) or call
 * event_base_loopbreak() / event_base_loopexit() as usual.
 *
 * Timer precision. Unless the base was made with EVENT_BASE_FLAG_PRECISE_TIMER
 * (event_config_set_flag), libevent on Linux reads CLOCK_MONOTONIC_COARSE,
 * which moves in ticks of the kernel (1 to 10 ms, per HZ), so its timers fire
 * up to about a tick late (a 7 ms timer fired after up to 15 ms here, 4 ms
 * ticks). leash's safety decisions never trust a timer's timing: every fired
 * timer re-reads CLOCK_MONOTONIC (re-arming if early), and leash_held() turns
 * 0 at the deadline whatever the loop does. But a late timer delays the lost
 * callback and the renewals by as much; the lease's drift margin (1% + 2 ms)
 * covers a tick for leases of a second or more. Ask for
 * EVENT_BASE_FLAG_PRECISE_TIMER when you use shorter leases.
 *
 * Free the client before event_base_free(): the base must outlive it.
 *
 * Link with -levent (or -levent_core), and not with -lev as well: libev's
 * library also exports libevent's function names (its libevent emulation),
 * and whichever of the two the dynamic linker meets first serves both.
 */
#ifndef LEASH_ADAPTERS_LIBEVENT_H
#define LEASH_ADAPTERS_LIBEVENT_H

#include <stdlib.h>

#include <event2/event.h>

#include <leash/leash.h>
#include <leash/loop.h>

typedef struct leash_libevent_timer {
    struct event *event; /* an evtimer of the base; never persistent */
    leash_timer_fn *fn;
    void *arg;
} leash_libevent_timer;

typedef struct leash_libevent_io {
    struct event *event; /* persistent; re-assigned when its events change */
    struct event_base *base;
    evutil_socket_t fd;
    leash_io_fn *fn;
    void *arg;
} leash_libevent_io;

typedef struct leash_libevent {
    struct event_base *base;
} leash_libevent;

static inline void leash_libevent_timer_fired_(evutil_socket_t fd, short what, void *arg) {
    leash_libevent_timer *t = (leash_libevent_timer *)arg;
    (void)fd;
    (void)what;
    /* libevent has already made the one-shot event non-pending, so fn may
     * re-arm or free this timer; nothing of it is touched afterwards. */
    t->fn(t->arg);
}

static inline void *leash_libevent_timer_new_(void *data, leash_timer_fn *fn, void *arg) {
    leash_libevent *a = (leash_libevent *)data;
    leash_libevent_timer *t = (leash_libevent_timer *)calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->event = evtimer_new(a->base, leash_libevent_timer_fired_, t);
    if (t->event == NULL) {
        free(t);
        return NULL;
    }
    t->fn = fn;
    t->arg = arg;
    return t;
}

static inline void leash_libevent_timer_start_(void *data, void *timer, uint64_t delay_ms,
                                               int keep_alive) {
    leash_libevent_timer *t = (leash_libevent_timer *)timer;
    struct timeval tv;
    (void)data;
    (void)keep_alive; /* no unref in libevent: see the top of this file */
    tv.tv_sec = (time_t)(delay_ms / 1000);
    tv.tv_usec = (long)((delay_ms % 1000) * 1000);
    /* Adding a pending event moves it to the new time. */
    evtimer_add(t->event, &tv);
}

static inline void leash_libevent_timer_stop_(void *data, void *timer) {
    leash_libevent_timer *t = (leash_libevent_timer *)timer;
    (void)data;
    evtimer_del(t->event);
}

static inline void leash_libevent_timer_free_(void *data, void *timer) {
    leash_libevent_timer *t = (leash_libevent_timer *)timer;
    (void)data;
    event_free(t->event); /* deletes it first if pending */
    free(t);
}

static inline void leash_libevent_cleanup_(void *data) {
    free(data);
}

static inline void leash_libevent_io_fired_(evutil_socket_t fd, short what, void *arg) {
    leash_libevent_io *io = (leash_libevent_io *)arg;
    (void)fd;
    io->fn(io->arg,
           ((what & EV_READ) ? LEASH_IO_READ : 0) | ((what & EV_WRITE) ? LEASH_IO_WRITE : 0));
}

static inline void *leash_libevent_io_new_(void *data, int fd, leash_io_fn *fn, void *arg) {
    leash_libevent *a = (leash_libevent *)data;
    leash_libevent_io *io = (leash_libevent_io *)calloc(1, sizeof(*io));
    if (io == NULL)
        return NULL;
    io->event = event_new(a->base, fd, EV_PERSIST, leash_libevent_io_fired_, io);
    if (io->event == NULL) {
        free(io);
        return NULL;
    }
    io->base = a->base;
    io->fd = fd;
    io->fn = fn;
    io->arg = arg;
    return io;
}

static inline void leash_libevent_io_set_(void *data, void *watcher, int events) {
    leash_libevent_io *io = (leash_libevent_io *)watcher;
    short what = (short)(((events & LEASH_IO_READ) ? EV_READ : 0) |
                         ((events & LEASH_IO_WRITE) ? EV_WRITE : 0));
    (void)data;
    event_del(io->event);
    if (what == 0)
        return;
    /* A non-pending event may be assigned new events. */
    event_assign(io->event, io->base, io->fd, (short)(what | EV_PERSIST), leash_libevent_io_fired_,
                 io);
    event_add(io->event, NULL);
}

static inline void leash_libevent_io_free_(void *data, void *watcher) {
    leash_libevent_io *io = (leash_libevent_io *)watcher;
    (void)data;
    event_free(io->event); /* deletes it first if pending */
    free(io);
}

/*
 * Binds client c to a libevent event_base and starts connecting.
 * Returns LEASH_OK, LEASH_EINVAL (NULL base or client), LEASH_ESTATE
 * (already attached, or being freed), or LEASH_ENOMEM. On an error nothing
 * was added to the base.
 */
static inline int leash_libevent_attach(struct event_base *base, leash_client *c) {
    leash_libevent *a;
    leash_loop hooks;
    int rc;

    if (base == NULL || c == NULL)
        return LEASH_EINVAL;
    a = (leash_libevent *)calloc(1, sizeof(*a));
    if (a == NULL)
        return LEASH_ENOMEM;
    a->base = base;
    leash_loop_init(&hooks);
    hooks.data = a;
    hooks.timer_new = leash_libevent_timer_new_;
    hooks.timer_start = leash_libevent_timer_start_;
    hooks.timer_stop = leash_libevent_timer_stop_;
    hooks.timer_free = leash_libevent_timer_free_;
    hooks.cleanup = leash_libevent_cleanup_;
    hooks.io_new = leash_libevent_io_new_;
    hooks.io_set = leash_libevent_io_set_;
    hooks.io_free = leash_libevent_io_free_;
    rc = leash_client_attach_loop(c, &hooks);
    if (rc != LEASH_OK)
        free(a);
    return rc;
}

#endif /* LEASH_ADAPTERS_LIBEVENT_H */
