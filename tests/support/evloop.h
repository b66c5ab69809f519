/* SPDX-License-Identifier: MIT */
/*
 * Driving a libev loop from a test until something happened.
 *
 *     int done = 0;
 *     leash_lock_acquire(lock, on_acquired, &done);   (sets done)
 *     CHECK(test_run_until(loop, &done, 2000) == 0);
 */
#ifndef LEASH_TESTS_EVLOOP_H
#define LEASH_TESTS_EVLOOP_H

#include <stdint.h>

#include <ev.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Runs the loop one iteration at a time until *flag is non-zero or
 * timeout_ms have passed (CLOCK_MONOTONIC). Returns 0 when the flag was
 * set, -1 on timeout. Never blocks past the timeout, even on a loop with
 * no other watchers. */
int test_run_until(struct ev_loop *loop, const int *flag, int64_t timeout_ms);

/* Runs the loop for ms milliseconds. */
void test_run_for(struct ev_loop *loop, int64_t ms);

#ifdef __cplusplus
}
#endif

#endif
