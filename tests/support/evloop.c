/* SPDX-License-Identifier: MIT */
#include "evloop.h"

#include "check.h"

/* The timer only has to wake ev_run up; the caller checks the clock. */
static void on_deadline(struct ev_loop *loop, ev_timer *w, int revents) {
    (void)loop;
    (void)w;
    (void)revents;
}

int test_run_until(struct ev_loop *loop, const int *flag, int64_t timeout_ms) {
    int64_t deadline = test_now_ms() + timeout_ms;
    int64_t left;
    ev_timer timer;

    ev_init(&timer, on_deadline);
    while (!*flag) {
        left = deadline - test_now_ms();
        if (left <= 0)
            break;
        if (!ev_is_active(&timer)) {
            /* The loop's cached time may be old if nobody ran it for a
             * while; a timer from it would fire early. */
            ev_now_update(loop);
            ev_timer_set(&timer, (double)left / 1000.0, 0.0);
            ev_timer_start(loop, &timer);
        }
        ev_run(loop, EVRUN_ONCE);
    }
    ev_timer_stop(loop, &timer);
    return *flag ? 0 : -1;
}

void test_run_for(struct ev_loop *loop, int64_t ms) {
    static const int never = 0;

    test_run_until(loop, &never, ms);
}
