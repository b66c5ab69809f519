/* SPDX-License-Identifier: MIT */
/*
 * leash/adapters/libuv.h — run a leash client on a libuv loop.
 *
 *     uv_loop_t *loop = uv_default_loop();
 *     leash_client *c;
 *     leash_client_new(&c, &opts);
 *     leash_libuv_attach(loop, c);      // starts connecting
 *     ... leash_acquire(...) ...
 *     uv_run(loop, UV_RUN_DEFAULT);
 *
 * Header-only, like hiredis's adapters: it compiles against the libuv headers
 * of your program and links nothing into libleash. The Redis sockets are
 * watched by uv_poll_t handles, leash's timers are uv_timer_t handles, of
 * the same loop. Every
 * hook runs on the loop's thread.
 *
 * Keeping the loop alive. A leash timer is uv_unref'ed while the core says
 * that nothing of the user waits on it (a renewal, a reconnect back-off, a
 * lingering subscription) and uv_ref'ed while one does (a waiting acquire, a
 * command in flight), so leash's timers alone never keep uv_run() going. The
 * poll handles do, as with any network client, as long as a connection is
 * open: free the client (or uv_stop) to leave uv_run().
 *
 * Closing. libuv closes a handle in two steps, uv_close() and then its close
 * callback on a later turn of the loop. A timer that the core frees is
 * uv_close'd at once, so it can never fire again, and its memory goes in its
 * close callback. The timers point to nothing of the adapter's state, which
 * is why leash_client_free() may release that state at once, from anywhere,
 * inside a leash callback included, while the handles are still closing.
 * The poll handles close the same way. So after leash_client_free(),
 * let the loop turn once more (uv_run, which returns once they are closed, if
 * nothing else of yours is active) before uv_loop_close(), which otherwise
 * answers UV_EBUSY:
 *
 *     leash_client_free(c);
 *     uv_run(loop, UV_RUN_DEFAULT);   // finishes the closes
 *     uv_loop_close(loop);
 *
 * A program that closes every handle of the loop at exit (uv_walk, then
 * uv_close on each that is not uv_is_closing, as libuv requires) may do so
 * before or after leash_client_free(). Before: the handles it closed are
 * not closed again, and their memory goes once libuv is done with them
 * (on a later turn of the loop, with an idle handle of the adapter that
 * closes itself then). Nothing of leash runs on a handle once the program
 * has closed it: free the client next.
 */
#ifndef LEASH_ADAPTERS_LIBUV_H
#define LEASH_ADAPTERS_LIBUV_H

#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include <leash/leash.h>
#include <leash/loop.h>

typedef struct leash_libuv_timer {
    uv_timer_t handle; /* first member; handle.data points back here */
    leash_timer_fn *fn;
    void *arg;
} leash_libuv_timer;

typedef struct leash_libuv_io {
    uv_poll_t handle; /* first member; handle.data points back here */
    leash_io_fn *fn;
    void *arg;
} leash_libuv_io;

typedef struct leash_libuv {
    uv_loop_t *loop;
} leash_libuv;

static inline void leash_libuv_timer_fired_(uv_timer_t *handle) {
    leash_libuv_timer *t = (leash_libuv_timer *)handle->data;
    /* A one-shot timer is inactive by now; fn may re-arm or free it. Freed,
     * its memory stays until the close callback, but it is not touched. */
    t->fn(t->arg);
}

static inline void leash_libuv_handle_closed_(uv_handle_t *handle) {
    free(handle->data);
}

/* Frees the memory of a handle the program closed itself (uv_walk and
 * uv_close at exit, before leash_client_free): libuv may still hold it until
 * its close callback, which is the program's, has run. An idle handle looks
 * once a turn (idle handles also keep the loop from blocking in poll) and
 * frees it once the loop no longer lists it. */
typedef struct leash_libuv_reaper {
    uv_idle_t handle; /* first member; handle.data points back here */
    uv_handle_t *closed;
    void *mem;
    int found;
} leash_libuv_reaper;

static inline void leash_libuv_spot_(uv_handle_t *handle, void *arg) {
    leash_libuv_reaper *r = (leash_libuv_reaper *)arg;
    if (handle == r->closed)
        r->found = 1;
}

/* Whether the loop still holds r->closed (a handle is listed until its close
 * callback has run). */
static inline int leash_libuv_still_closing_(uv_loop_t *loop, leash_libuv_reaper *r) {
    r->found = 0;
    uv_walk(loop, leash_libuv_spot_, r);
    return r->found;
}

static inline void leash_libuv_reaped_(uv_idle_t *idle) {
    leash_libuv_reaper *r = (leash_libuv_reaper *)idle->data;
    if (leash_libuv_still_closing_(idle->loop, r))
        return;
    free(r->mem);
    uv_close((uv_handle_t *)&r->handle, leash_libuv_handle_closed_);
}

static inline void leash_libuv_reap_(uv_handle_t *closed) {
    leash_libuv_reaper probe, *r;

    probe.closed = closed;
    if (!leash_libuv_still_closing_(closed->loop, &probe)) {
        free(closed->data); /* done: its close callback has run */
        return;
    }
    r = (leash_libuv_reaper *)calloc(1, sizeof(*r));
    /* Without memory for the reaper, the handle's few bytes are left to
     * the process's exit rather than freed under libuv. */
    if (r == NULL || uv_idle_init(closed->loop, &r->handle) != 0) {
        free(r);
        return;
    }
    r->handle.data = r;
    r->closed = closed;
    r->mem = closed->data;
    uv_idle_start(&r->handle, leash_libuv_reaped_);
}

/* Closes a handle of the adapter, unless the program closed it already
 * (closing twice is an assertion in libuv). */
static inline void leash_libuv_close_(uv_handle_t *handle) {
    if (uv_is_closing(handle))
        leash_libuv_reap_(handle);
    else
        uv_close(handle, leash_libuv_handle_closed_);
}

static inline void *leash_libuv_timer_new_(void *data, leash_timer_fn *fn, void *arg) {
    leash_libuv *a = (leash_libuv *)data;
    leash_libuv_timer *t = (leash_libuv_timer *)calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    if (uv_timer_init(a->loop, &t->handle) != 0) {
        free(t); /* a handle whose init failed is not in the loop */
        return NULL;
    }
    t->handle.data = t;
    t->fn = fn;
    t->arg = arg;
    return t;
}

static inline void leash_libuv_timer_start_(void *data, void *timer, uint64_t delay_ms,
                                            int keep_alive) {
    leash_libuv_timer *t = (leash_libuv_timer *)timer;
    (void)data;
    if (uv_is_closing((uv_handle_t *)&t->handle))
        return; /* the program closed it: see "Closing" above */
    /* Starting an active timer moves it to the new time. */
    uv_timer_start(&t->handle, leash_libuv_timer_fired_, delay_ms, 0);
    if (keep_alive)
        uv_ref((uv_handle_t *)&t->handle);
    else
        uv_unref((uv_handle_t *)&t->handle);
}

static inline void leash_libuv_timer_stop_(void *data, void *timer) {
    leash_libuv_timer *t = (leash_libuv_timer *)timer;
    (void)data;
    uv_timer_stop(&t->handle);
}

static inline void leash_libuv_timer_free_(void *data, void *timer) {
    leash_libuv_timer *t = (leash_libuv_timer *)timer;
    (void)data;
    /* Stops it now; the memory goes in the close callback. */
    leash_libuv_close_((uv_handle_t *)&t->handle);
}

static inline void leash_libuv_io_fired_(uv_poll_t *handle, int status, int events) {
    leash_libuv_io *io = (leash_libuv_io *)handle->data;
    /* An error (status < 0): let the core read and write, and so meet it. */
    if (status < 0)
        events = UV_READABLE | UV_WRITABLE;
    io->fn(io->arg, ((events & UV_READABLE) ? LEASH_IO_READ : 0) |
                        ((events & UV_WRITABLE) ? LEASH_IO_WRITE : 0));
}

static inline void *leash_libuv_io_new_(void *data, int fd, leash_io_fn *fn, void *arg) {
    leash_libuv *a = (leash_libuv *)data;
    leash_libuv_io *io = (leash_libuv_io *)calloc(1, sizeof(*io));
    if (io == NULL)
        return NULL;
    if (uv_poll_init(a->loop, &io->handle, fd) != 0) {
        free(io); /* a handle whose init failed is not in the loop */
        return NULL;
    }
    io->handle.data = io;
    io->fn = fn;
    io->arg = arg;
    return io;
}

static inline void leash_libuv_io_set_(void *data, void *watcher, int events) {
    leash_libuv_io *io = (leash_libuv_io *)watcher;
    (void)data;
    if (uv_is_closing((uv_handle_t *)&io->handle))
        return; /* the program closed it; uv_poll_start would assert */
    if (events == 0)
        uv_poll_stop(&io->handle);
    else
        uv_poll_start(&io->handle,
                      ((events & LEASH_IO_READ) ? UV_READABLE : 0) |
                          ((events & LEASH_IO_WRITE) ? UV_WRITABLE : 0),
                      leash_libuv_io_fired_);
}

static inline void leash_libuv_io_free_(void *data, void *watcher) {
    leash_libuv_io *io = (leash_libuv_io *)watcher;
    (void)data;
    /* Stops it now (before the core closes the fd); the memory goes in the
     * close callback. */
    leash_libuv_close_((uv_handle_t *)&io->handle);
}

static inline void leash_libuv_cleanup_(void *data) {
    /* Safe while timers are still closing: they do not point here. */
    free(data);
}

/*
 * Binds client c to a libuv loop and starts connecting.
 * Returns LEASH_OK, LEASH_EINVAL (NULL loop or client), LEASH_ESTATE
 * (already attached, or being freed), or LEASH_ENOMEM. On an error no
 * handle was added to the loop.
 */
static inline int leash_libuv_attach(uv_loop_t *loop, leash_client *c) {
    leash_libuv *a;
    leash_loop hooks;
    int rc;

    if (loop == NULL || c == NULL)
        return LEASH_EINVAL;
    a = (leash_libuv *)calloc(1, sizeof(*a));
    if (a == NULL)
        return LEASH_ENOMEM;
    a->loop = loop;
    leash_loop_init(&hooks);
    hooks.data = a;
    hooks.timer_new = leash_libuv_timer_new_;
    hooks.timer_start = leash_libuv_timer_start_;
    hooks.timer_stop = leash_libuv_timer_stop_;
    hooks.timer_free = leash_libuv_timer_free_;
    hooks.cleanup = leash_libuv_cleanup_;
    hooks.io_new = leash_libuv_io_new_;
    hooks.io_set = leash_libuv_io_set_;
    hooks.io_free = leash_libuv_io_free_;
    rc = leash_client_attach_loop(c, &hooks);
    if (rc != LEASH_OK)
        free(a);
    return rc;
}

#endif /* LEASH_ADAPTERS_LIBUV_H */
