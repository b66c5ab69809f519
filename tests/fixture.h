/*
 * What the leash integration tests share: a client on a real libev loop
 * against a test_redis, callback recorders, and a log capture.
 */
#ifndef LEASH_TESTS_FIXTURE_H
#define LEASH_TESTS_FIXTURE_H

#include <ev.h>
#include <leash/adapters/libev.h>
#include <leash/leash.h>

#include "check.h"
#include "evloop.h"
#include "redis_server.h"

/* One callback's outcome. */
typedef struct fx_result {
    int done;         /* set on the first call */
    int calls;        /* how many times it was called (must end at 1) */
    int status;       /* status (or lost reason) of the last call */
    int64_t at_ms;    /* test_now_ms() of the last call */
    leash_lock *lock; /* the handle it was called with */
} fx_result;

void fx_acquire_cb(leash_lock *l, int status, void *arg);
void fx_release_cb(leash_lock *l, int status, void *arg);
void fx_lost_cb(leash_lock *l, int reason, void *arg);

/* Options pointing at r, with the log captured and the given lease. */
void fx_options(leash_options *o, const test_redis *r, int64_t lease_ms);
/* A client attached to loop; fails the test on error. */
leash_client *fx_client_opts(struct ev_loop *loop, const leash_options *o);
leash_client *fx_client(struct ev_loop *loop, const test_redis *r, int64_t lease_ms);
/* Runs the loop until the client's command connection is ready. */
void fx_wait_connected(struct ev_loop *loop, leash_client *c, int64_t timeout_ms);

/* Acquire and wait: the status, with the callback checked to fire once. */
int fx_acquire_sync(struct ev_loop *loop, leash_lock *l, int64_t wait_ms, int64_t timeout_ms);
int fx_release_sync(struct ev_loop *loop, leash_lock *l, int64_t timeout_ms);
/* Runs the loop until r->done, failing the test after timeout_ms. */
void fx_run_until(struct ev_loop *loop, fx_result *r, int64_t timeout_ms);

/* The captured log: 1 if a line contains `needle`. */
int fx_log_contains(const char *needle);
void fx_log_clear(void);
void fx_log_cb(int level, const char *msg, void *arg);

/* Hold count that Redis has for the lock key (HLEN), -1 if no key. */
long long fx_redis_exists(test_redis *r, const char *key);

#endif
