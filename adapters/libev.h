/* SPDX-License-Identifier: MIT */
/*
 * leash/adapters/libev.h — run a leash client on a libev loop.
 *
 *     struct ev_loop *loop = EV_DEFAULT;
 *     leash_client *c;
 *     leash_client_new(&c, &opts);
 *     leash_libev_attach(loop, c);      // starts connecting
 *     ... leash_acquire(...) ...
 *     ev_run(loop, 0);
 *
 * Header-only, so it compiles with your own libev settings (EV_MULTIPLICITY).
 * The Redis sockets are ev_io watchers, leash's timers ev_timer watchers of
 * the same loop. The timers do not keep the loop alive by themselves
 * (ev_unref) except while a waiting acquire needs them; the sockets do, as
 * with any network client: free the client (or ev_break) to leave ev_run.
 * Free the client before ev_loop_destroy(): its watchers are stopped then.
 */
#ifndef LEASH_ADAPTERS_LIBEV_H
#define LEASH_ADAPTERS_LIBEV_H

#include <stdlib.h>

#include <ev.h>

#include <leash/leash.h>
#include <leash/loop.h>

typedef struct leash_libev_timer {
    ev_timer watcher; /* first member: the callback casts back */
    struct ev_loop *loop;
    leash_timer_fn *fn;
    void *arg;
    int unref; /* 1 while started with keep_alive = 0 */
} leash_libev_timer;

typedef struct leash_libev_io {
    ev_io watcher; /* first member: the callback casts back */
    struct ev_loop *loop;
    leash_io_fn *fn;
    void *arg;
} leash_libev_io;

typedef struct leash_libev {
    struct ev_loop *loop;
} leash_libev;

static inline void leash_libev_timer_fired_(EV_P_ ev_timer *w, int revents) {
    leash_libev_timer *t = (leash_libev_timer *)w;
    (void)revents;
    /* The one-shot watcher is already stopped: give back the reference it
     * did not hold. */
    if (t->unref) {
        t->unref = 0;
        ev_ref(EV_A);
    }
    t->fn(t->arg);
}

static inline void *leash_libev_timer_new_(void *data, leash_timer_fn *fn, void *arg) {
    leash_libev *a = (leash_libev *)data;
    leash_libev_timer *t = (leash_libev_timer *)calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    ev_timer_init(&t->watcher, leash_libev_timer_fired_, 0., 0.);
    t->loop = a->loop;
    t->fn = fn;
    t->arg = arg;
    return t;
}

static inline void leash_libev_timer_stop_(void *data, void *timer) {
    leash_libev_timer *t = (leash_libev_timer *)timer;
#if EV_MULTIPLICITY
    struct ev_loop *loop = t->loop;
#endif
    (void)data;
    if (t->unref) {
        t->unref = 0;
        ev_ref(EV_A);
    }
    ev_timer_stop(EV_A_ & t->watcher);
}

static inline void leash_libev_timer_start_(void *data, void *timer, uint64_t delay_ms,
                                            int keep_alive) {
    leash_libev_timer *t = (leash_libev_timer *)timer;
#if EV_MULTIPLICITY
    struct ev_loop *loop = t->loop;
#endif
    leash_libev_timer_stop_(data, timer);
    ev_timer_set(&t->watcher, (ev_tstamp)delay_ms / 1000., 0.);
    ev_timer_start(EV_A_ & t->watcher);
    if (!keep_alive) {
        t->unref = 1;
        ev_unref(EV_A);
    }
}

static inline void leash_libev_timer_free_(void *data, void *timer) {
    leash_libev_timer_stop_(data, timer);
    free(timer);
}

static inline void leash_libev_cleanup_(void *data) {
    free(data);
}

static inline void leash_libev_io_fired_(EV_P_ ev_io *w, int revents) {
    leash_libev_io *io = (leash_libev_io *)w;
#if EV_MULTIPLICITY
    (void)loop;
#endif
    io->fn(io->arg,
           ((revents & EV_READ) ? LEASH_IO_READ : 0) | ((revents & EV_WRITE) ? LEASH_IO_WRITE : 0));
}

static inline void *leash_libev_io_new_(void *data, int fd, leash_io_fn *fn, void *arg) {
    leash_libev *a = (leash_libev *)data;
    leash_libev_io *io = (leash_libev_io *)calloc(1, sizeof(*io));
    if (io == NULL)
        return NULL;
    ev_io_init(&io->watcher, leash_libev_io_fired_, fd, 0);
    io->loop = a->loop;
    io->fn = fn;
    io->arg = arg;
    return io;
}

static inline void leash_libev_io_set_(void *data, void *watcher, int events) {
    leash_libev_io *io = (leash_libev_io *)watcher;
#if EV_MULTIPLICITY
    struct ev_loop *loop = io->loop;
#endif
    (void)data;
    ev_io_stop(EV_A_ & io->watcher);
    if (events == 0)
        return;
    ev_io_set(&io->watcher, io->watcher.fd,
              ((events & LEASH_IO_READ) ? EV_READ : 0) |
                  ((events & LEASH_IO_WRITE) ? EV_WRITE : 0));
    ev_io_start(EV_A_ & io->watcher);
}

static inline void leash_libev_io_free_(void *data, void *watcher) {
    leash_libev_io_set_(data, watcher, 0);
    free(watcher);
}

/*
 * Binds client c to a libev loop and starts connecting.
 * Returns LEASH_OK, LEASH_EINVAL (NULL loop or client), LEASH_ESTATE (already
 * attached), or LEASH_ENOMEM.
 */
static inline int leash_libev_attach(EV_P_ leash_client *c) {
    leash_libev *a;
    leash_loop hooks;
    int rc;

#if EV_MULTIPLICITY
    if (loop == NULL)
        return LEASH_EINVAL;
#endif
    if (c == NULL)
        return LEASH_EINVAL;
    a = (leash_libev *)calloc(1, sizeof(*a));
    if (a == NULL)
        return LEASH_ENOMEM;
#if EV_MULTIPLICITY
    a->loop = loop;
#else
    a->loop = NULL;
#endif
    leash_loop_init(&hooks);
    hooks.data = a;
    hooks.timer_new = leash_libev_timer_new_;
    hooks.timer_start = leash_libev_timer_start_;
    hooks.timer_stop = leash_libev_timer_stop_;
    hooks.timer_free = leash_libev_timer_free_;
    hooks.cleanup = leash_libev_cleanup_;
    hooks.io_new = leash_libev_io_new_;
    hooks.io_set = leash_libev_io_set_;
    hooks.io_free = leash_libev_io_free_;
    rc = leash_client_attach_loop(c, &hooks);
    if (rc != LEASH_OK)
        free(a);
    return rc;
}

#endif /* LEASH_ADAPTERS_LIBEV_H */
