/* SPDX-License-Identifier: MIT */
/*
 * prefork-server: what the master (main.c), the worker (worker.c) and the
 * maintenance job (maintenance.c) share.
 */
#ifndef PREFORK_SERVER_H
#define PREFORK_SERVER_H

#include <stdint.h>

#include <hiredis/adapters/libev.h> /* the workers' own Redis connection */
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <leash/adapters/libev.h> /* <ev.h>, <leash/leash.h> */

#include "prometheus.h" /* metrics/: GET /metrics */

typedef struct server_config {
    const char *redis_host;
    int redis_port;
    int port;             /* 0: any free port (printed on stdout) */
    int workers;          /* processes sharing the listening socket */
    int64_t lease_ms;     /* leash lease of every lock (the watchdog renews it) */
    int64_t wait_ms;      /* default wait for an order's lock (?wait_ms= overrides) */
    int64_t pay_ms;       /* how long the pretend payment provider takes */
    int64_t job_every_ms; /* how often each worker tries the maintenance job */
    int job_steps;        /* steps of one maintenance run */
    int64_t step_ms;      /* duration of one step */
} server_config;

/* Runs one worker on its own libev loop until SIGTERM; the exit status. */
int worker_main(int listen_fd, const server_config *cfg);

/* The worker's connection to Redis for the application's own data (orders,
 * the maintenance log), or NULL while it is down. Not leash's connections. */
redisAsyncContext *worker_redis(void);

/* "[worker 1234] ..." on stderr. */
void say(const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* The periodic maintenance job: in exactly one worker at a time across every
 * server that shares the Redis. */
typedef struct maintenance maintenance;
maintenance *maintenance_start(struct ev_loop *loop, leash_client *c, const server_config *cfg);
/* The job's lock handle, for GET /locks. */
leash_lock *maintenance_lock(const maintenance *m);
/* Stops the job where it is; its lock is released (best-effort). */
void maintenance_stop(maintenance *m);

#endif
