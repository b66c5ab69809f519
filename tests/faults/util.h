/*
 * What the fault tests share: a leash client on a libev loop, callback
 * recorders that check "exactly once, never inside the call", and a log
 * capture.
 */
#ifndef LEASH_TESTS_FAULTS_UTIL_H
#define LEASH_TESTS_FAULTS_UTIL_H

#include <stdint.h>

#include <ev.h>
#include <leash/adapters/libev.h>
#include <leash/leash.h>

#include "check.h"
#include "evloop.h"

typedef struct ft_result {
    int calls;     /* must end at 1 */
    int status;    /* status, or lost reason, of the last call */
    int64_t at_ms; /* when the last call came */
    int inside;    /* a call came while ft_in_call was set */
} ft_result;

/* Set around calls into leash: a callback that comes meanwhile is noted. */
extern int ft_in_call;

void ft_acquire_cb(leash_lock *l, int status, void *arg);
void ft_release_cb(leash_lock *l, int status, void *arg);
void ft_lost_cb(leash_lock *l, int reason, void *arg);

/* Options for 127.0.0.1:port with short timeouts and the log captured. */
void ft_options(leash_options *o, int port, int64_t lease_ms);
leash_client *ft_client_opts(struct ev_loop *loop, const leash_options *o);
leash_client *ft_client(struct ev_loop *loop, int port, int64_t lease_ms);
/* Runs the loop until the command connection is ready; fails the test
 * after timeout_ms. */
void ft_wait_connected(struct ev_loop *loop, leash_client *c, int64_t timeout_ms);
/* Runs the loop until r has been called; fails the test after timeout_ms. */
void ft_run_until(struct ev_loop *loop, ft_result *r, int64_t timeout_ms);

/* Acquire / release and wait for the one callback; its status. */
int ft_acquire(struct ev_loop *loop, leash_lock *l, int64_t wait_ms, int64_t timeout_ms);
int ft_release(struct ev_loop *loop, leash_lock *l, int64_t timeout_ms);

/* The captured log (every level). */
void ft_log_cb(int level, const char *msg, void *arg);
int ft_log_contains(const char *needle);
void ft_log_clear(void);

#endif
