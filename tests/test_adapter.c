/* SPDX-License-Identifier: MIT */
/* What every loop adapter promises (include/leash/loop.h), built once per
 * loop: a second attach is refused, the loop is left clean after a free,
 * and leash's own timers keep the loop running only where the loop can say
 * otherwise (libev, libuv: never by themselves; libevent: no unref). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

/* The loop's own blocking run, as a program calls it: returns when the loop
 * has nothing left that keeps it alive. */
static void run_loop_like_a_program(fx_loop *loop) {
#if defined(LEASH_TEST_LOOP_LIBEVENT)
    event_base_dispatch(loop);
#elif defined(LEASH_TEST_LOOP_LIBUV)
    uv_run(loop, UV_RUN_DEFAULT);
#else
    ev_run(loop, 0);
#endif
}

TEST(second_attach_is_refused_and_the_first_keeps_working) {
    test_redis r;
    fx_loop *loop, *other;
    leash_client *c;
    leash_lock *l;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    loop = fx_loop_new();
    other = fx_loop_new();
    c = fx_client(loop, &r, 5000);
    CHECK_EQ_INT(fx_attach(loop, c), LEASH_ESTATE);
    CHECK_EQ_INT(fx_attach(other, c), LEASH_ESTATE);
    CHECK_EQ_INT(fx_attach(loop, NULL), LEASH_EINVAL);
#if !defined(LEASH_TEST_LOOP_LIBEV)
    /* (leash_libev_attach does not look at its loop argument.) */
    CHECK_EQ_INT(fx_attach(NULL, c), LEASH_EINVAL);
#endif
    fx_wait_connected(loop, c, 5000);
    l = leash_lock_new(c, "attach");
    CHECK_EQ_INT(fx_acquire_sync(loop, l, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(loop, l, 5000), LEASH_OK);
    leash_client_free(c);
    fx_loop_free(other); /* the refused attaches left nothing in it */
    fx_loop_free(loop);
    test_redis_stop(&r);
}

TEST(client_never_attached_is_freed_without_a_loop) {
    test_redis r;
    leash_options o;
    leash_client *c = NULL;

    memset(&r, 0, sizeof(r));
    r.port = 1;
    fx_options(&o, &r, 5000);
    CHECK_EQ_INT(leash_client_new(&c, &o), LEASH_OK);
    leash_client_free(c);
}

/* Held locks (renewal timers), a lingering subscription, a waiter: all of
 * it torn down by one free, and the loop returns by itself. */
TEST(freed_client_leaves_nothing_that_keeps_the_loop) {
    test_redis r;
    fx_loop *loop;
    leash_client *c, *holder_client;
    leash_lock *held, *holder, *waiter;
    fx_result got = {0};
    int64_t t0;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    loop = fx_loop_new();
    c = fx_client(loop, &r, 300);
    holder_client = fx_client(loop, &r, 300);
    held = leash_lock_new(c, "kept-1");
    holder = leash_lock_new(holder_client, "kept-2");
    waiter = leash_lock_new(c, "kept-2");
    CHECK_EQ_INT(fx_acquire_sync(loop, held, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(waiter, 5000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_for(loop, 200);
    leash_client_free(holder_client);
    leash_client_free(c);
    CHECK_EQ_INT(got.calls, 1);
    CHECK_EQ_INT(got.status, LEASH_ECANCELED);
    t0 = test_now_ms();
    run_loop_like_a_program(loop);
    CHECK_MSG(test_now_ms() - t0 < 1000, "the loop ran %lld ms after the free",
              (long long)(test_now_ms() - t0));
    fx_loop_free(loop);
    test_redis_stop(&r);
}

#if defined(LEASH_TEST_LOOP_LIBEVENT)
static void give_up(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    event_base_loopbreak(arg);
}
#endif

/* Redis is gone: the client only waits for its next reconnect attempt, on
 * its own timers. */
TEST(reconnect_timers_alone_keep_the_loop_only_on_libevent) {
    test_redis r;
    fx_loop *loop;
    leash_client *c;
    int64_t t0, ran;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    loop = fx_loop_new();
    c = fx_client(loop, &r, 5000);
    fx_wait_connected(loop, c, 5000);
    CHECK_EQ_INT(test_redis_kill(&r), 0);
    while (leash_client_connected(c))
        fx_run_for(loop, 5);
    fx_run_for(loop, 100);
    t0 = test_now_ms();
#if defined(LEASH_TEST_LOOP_LIBEVENT)
    {
        /* No unref in libevent: the back-off timer keeps dispatch going, and
         * the client keeps trying, until the program breaks the loop. */
        struct event *stop = evtimer_new(loop, give_up, loop);
        struct timeval tv = {0, 500 * 1000};

        fx_log_clear();
        evtimer_add(stop, &tv);
        run_loop_like_a_program(loop);
        event_free(stop);
        ran = test_now_ms() - t0;
        CHECK_MSG(ran >= 490, "dispatch returned after %lld ms", (long long)ran);
        CHECK(fx_log_contains("connect failed") || fx_log_contains("cannot connect"));
    }
#else
    /* ev_unref / uv_unref: between attempts nothing keeps the loop. */
    run_loop_like_a_program(loop);
    ran = test_now_ms() - t0;
    CHECK_MSG(ran < 1000, "the loop ran %lld ms on leash's timers alone", (long long)ran);
#endif
    CHECK(!leash_client_connected(c));
    /* The client did not give up: Redis back, it reconnects. */
    CHECK_EQ_INT(test_redis_restart(&r), 0);
    fx_wait_connected(loop, c, 5000);
    leash_client_free(c);
    fx_loop_free(loop);
    test_redis_stop(&r);
}

#if defined(LEASH_TEST_LOOP_LIBUV)
/* What libuv programs do at exit: close every handle that is not closing
 * already (the fixture's own deadline timer excepted: fx_loop_free closes
 * it). */
static void close_one(uv_handle_t *h, void *loop) {
    if (h != ((uv_loop_t *)loop)->data && !uv_is_closing(h))
        uv_close(h, NULL);
}

static void close_every_handle(fx_loop *loop) {
    uv_walk(loop, close_one, loop);
}
#elif defined(LEASH_TEST_LOOP_LIBEVENT)
/* libevent's form: delete every event of the base, collected first (none
 * may be deleted inside event_base_foreach_event). */
typedef struct {
    struct event *ev[64];
    int n;
} event_list;

static int collect_event(const struct event_base *base, const struct event *ev, void *arg) {
    event_list *l = arg;

    (void)base;
    CHECK(l->n < 64);
    l->ev[l->n++] = (struct event *)ev;
    return 0;
}

static void close_every_handle(fx_loop *base) {
    event_list l = {.n = 0};

    event_base_foreach_event(base, collect_event, &l);
    for (int i = 0; i < l.n; i++)
        event_del(l.ev[i]);
}
#endif

#if defined(LEASH_TEST_LOOP_LIBUV) || defined(LEASH_TEST_LOOP_LIBEVENT)
/* A client with everything a libuv handle can be open for: held locks
 * (renewal timers), a waiter (its subscriber connection), the command
 * connection. */
static leash_client *busy_client(fx_loop *loop, test_redis *r, leash_client **holder_client,
                                 fx_result *got) {
    leash_client *c = fx_client(loop, r, 300);
    leash_lock *held = leash_lock_new(c, "walk-1");
    leash_lock *holder, *waiter;

    *holder_client = fx_client(loop, r, 300);
    holder = leash_lock_new(*holder_client, "walk-2");
    waiter = leash_lock_new(c, "walk-2");
    CHECK_EQ_INT(fx_acquire_sync(loop, held, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(waiter, 5000, fx_acquire_cb, got), LEASH_OK);
    fx_run_for(loop, 200);
    return c;
}

/* Issue 32 item 21: the libuv adapter closed its handles again at the free,
 * and libuv aborted (uv_close: Assertion '!uv__is_closing(handle)'). Each
 * order: the walk, then the free before the loop turns (libuv: handles still
 * closing) or after (closed); the free, then the walk. The sanitizer build
 * checks that the handles' memory goes. (libev cannot list its watchers.) */
TEST(closing_every_handle_of_the_loop_and_freeing_work_in_either_order) {
    test_redis r;
    fx_loop *loop;
    leash_client *c, *holder_client;
    fx_result got = {0};
    int order;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    for (order = 0; order < 3; order++) {
        memset(&got, 0, sizeof got);
        loop = fx_loop_new();
        c = busy_client(loop, &r, &holder_client, &got);
        if (order == 0) { /* walk, free, run */
            close_every_handle(loop);
            leash_client_free(holder_client);
            leash_client_free(c);
            run_loop_like_a_program(loop);
        } else if (order == 1) { /* walk, run, free */
            close_every_handle(loop);
            run_loop_like_a_program(loop);
            leash_client_free(holder_client);
            leash_client_free(c);
        } else { /* free, walk, run */
            leash_client_free(holder_client);
            leash_client_free(c);
            close_every_handle(loop);
            run_loop_like_a_program(loop);
        }
        CHECK_EQ_INT(got.calls, 1);
        CHECK_EQ_INT(got.status, LEASH_ECANCELED);
        fx_loop_free(loop); /* fails if a handle is left */
    }
    test_redis_stop(&r);
}
#endif

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE_T(second_attach_is_refused_and_the_first_keeps_working, 30),
        TEST_CASE_T(client_never_attached_is_freed_without_a_loop, 10),
        TEST_CASE_T(freed_client_leaves_nothing_that_keeps_the_loop, 30),
        TEST_CASE_T(reconnect_timers_alone_keep_the_loop_only_on_libevent, 30),
#if defined(LEASH_TEST_LOOP_LIBUV) || defined(LEASH_TEST_LOOP_LIBEVENT)
        TEST_CASE_T(closing_every_handle_of_the_loop_and_freeing_work_in_either_order, 60),
#endif
        {0},
    };
    printf("loop: %s\n", fx_loop_name());
    return test_main(argc, argv, cases);
}
