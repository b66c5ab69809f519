/* SPDX-License-Identifier: MIT */
/*
 * leash/loop.h — what an event-loop adapter implements.
 *
 * The core of leash never includes an event library. An adapter (see
 * leash/adapters/libev.h) starts from leash_loop_init(), fills in its hooks
 * and hands the struct to leash_client_attach_loop(). The core then asks the
 * loop for exactly two things: watching the sockets of its connections to
 * Redis (fd watchers), and one-shot timers.
 *
 * Rules for adapter writers:
 * - Allocate everything first, call leash_client_attach_loop() last; if it
 *   fails, free what you allocated (the core calls no hook then).
 * - Every hook is called on the loop's thread, never from a signal handler.
 * - timer_start re-arms a timer that is already running; timer_stop and
 *   timer_free are safe on a stopped timer; a timer may be stopped or freed
 *   from inside its own callback.
 * - keep_alive = 0 means the timer must not keep the loop running on its own
 *   (ev_unref for libev, uv_unref for libuv). The core passes 1 only while a
 *   user's request waits on that timer.
 * - io_set replaces the events a watcher waits for (0 stops it); a watcher
 *   that waits keeps the loop running, like any socket of the program. It
 *   may be called, and io_free too, from inside the watcher's own callback.
 *   The core frees a watcher before it closes the fd, and never makes two
 *   watchers for one fd.
 * - cleanup(data) runs once, when the client is freed, after every timer and
 *   watcher was freed; it releases the adapter's own state.
 */
#ifndef LEASH_LOOP_H
#define LEASH_LOOP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <leash/leash.h>

#ifdef __cplusplus
extern "C" {
#endif

struct redisAsyncContext;

typedef void leash_timer_fn(void *arg);

/* Events of an fd watcher (leash_loop.io_set, leash_io_fn). */
#define LEASH_IO_READ 1
#define LEASH_IO_WRITE 2
/* events: what is ready, LEASH_IO_READ and/or LEASH_IO_WRITE. */
typedef void leash_io_fn(void *arg, int events);

typedef struct leash_loop {
    size_t struct_size; /* set by leash_loop_init(); leave it alone */
    void *data;         /* the adapter's state; first argument of every hook */

    /* Not used since 0.2 (the core reads and writes its sockets itself,
     * through the fd watchers below); may be left NULL. */
    int (*attach)(void *data, struct redisAsyncContext *ac);

    /* A new stopped one-shot timer that calls fn(arg); NULL without memory. */
    void *(*timer_new)(void *data, leash_timer_fn *fn, void *arg);
    /* Start (or re-arm) to fire once after delay_ms milliseconds. */
    void (*timer_start)(void *data, void *timer, uint64_t delay_ms, int keep_alive);
    void (*timer_stop)(void *data, void *timer);
    void (*timer_free)(void *data, void *timer);

    /* The client is gone: release `data`. */
    void (*cleanup)(void *data);

    /* A new stopped watcher of fd that calls fn(arg, events) when an event
     * it waits for is ready; NULL without memory. */
    void *(*io_new)(void *data, int fd, leash_io_fn *fn, void *arg);
    /* Wait for `events` (LEASH_IO_READ | LEASH_IO_WRITE) from now on; 0
     * stops the watcher. */
    void (*io_set)(void *data, void *io, int events);
    void (*io_free)(void *data, void *io);
} leash_loop;

/* Zeroes *loop and records the size of the struct this adapter was compiled
 * with (hooks are added at the end in later versions; see "Structs that
 * grow" in leash/leash.h): an adapter built against this header keeps
 * working with a newer library, which sees which hooks it has. */
static inline void leash_loop_init(leash_loop *loop) {
    memset(loop, 0, sizeof(*loop));
    loop->struct_size = sizeof(*loop);
}

/*
 * Binds a client to a loop and starts connecting. The hooks are copied;
 * all but attach are required.
 * Every timer the client will ever arm is made here (timer_new), and each
 * lock handle's when it is made, so that arming one never allocates.
 * Errors: LEASH_EINVAL (NULL argument, a struct not made by
 * leash_loop_init, a missing hook, or a hook this version does not know
 * set), LEASH_ESTATE (the
 * client is already attached, or being freed), LEASH_ENOMEM (a timer_new
 * answered NULL). On an error the timers made were freed again
 * (timer_free), nothing else was called, and the adapter keeps ownership
 * of loop->data.
 */
LEASH_EXPORT int leash_client_attach_loop(leash_client *c, const leash_loop *loop);

#ifdef __cplusplus
}
#endif

#endif /* LEASH_LOOP_H */
