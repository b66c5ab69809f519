/* SPDX-License-Identifier: MIT */
/*
 * The maintenance job: every worker of every server tries it now and then
 * (try-once, no waiting), and the lock "maintenance" lets exactly one run it.
 * A run is a few steps on timers, longer than the lease: the watchdog keeps
 * the lock while the run goes on. The lost callback stops the run between two
 * steps, and each step looks at leash_held() before it writes.
 *
 * Every write of a run (start, each step, end) goes through one script that
 * carries the run's fence: Redis appends it to the list {shop:maint}:log, or,
 * when the fence is older than the newest it has seen, to
 * {shop:maint}:rejected instead. An entry reads "<kind> <fence> <pid> <step>".
 * Read in order, the log shows whether two runs ever overlapped.
 */
#define _GNU_SOURCE

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "server.h"

static const char record_script[] = "local f = tonumber(ARGV[2]) "
                                    "local entry = table.concat(ARGV, ' ') "
                                    "if f < tonumber(redis.call('get', KEYS[2]) or '0') then "
                                    "  redis.call('rpush', KEYS[3], entry) return 0 end "
                                    "redis.call('set', KEYS[2], ARGV[2]) "
                                    "redis.call('rpush', KEYS[1], entry) "
                                    "return 1";

struct maintenance {
    struct ev_loop *loop;
    const server_config *cfg;
    leash_lock *lock;
    ev_timer every; /* the next try */
    ev_timer step;  /* the next step of a run */
    int trying;     /* an acquire is pending */
    int running;    /* a run holds the lock */
    int steps_done;
    uint64_t fence; /* of the current run */
};

typedef void record_done_fn(maintenance *m, int ok);

typedef struct record_req {
    maintenance *m;
    record_done_fn *done;
} record_req;

static void on_recorded(redisAsyncContext *ac, void *r, void *arg) {
    record_req *req = arg;
    redisReply *reply = r;
    int ok = reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;

    (void)ac;
    if (reply == NULL) {
        free(req); /* the connection went away (or the worker is stopping) */
        return;
    }
    if (!ok)
        say("maintenance: a write of run %" PRIu64 " was refused: %s", req->m->fence,
            reply->type == REDIS_REPLY_ERROR ? reply->str : "stale fence");
    if (req->done)
        req->done(req->m, ok);
    free(req);
}

/* Appends "<kind> <fence> <pid> <step>" to the log, fenced. */
static void record(maintenance *m, const char *kind, record_done_fn *done) {
    redisAsyncContext *redis = worker_redis();
    record_req *req = malloc(sizeof(*req));
    char fence[24], pid[16], step[16];

    if (req == NULL || redis == NULL) {
        free(req);
        if (done)
            done(m, 0);
        return;
    }
    req->m = m;
    req->done = done;
    snprintf(fence, sizeof(fence), "%" PRIu64, m->fence);
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    snprintf(step, sizeof(step), "%d", m->steps_done);
    if (redisAsyncCommand(redis, on_recorded, req,
                          "EVAL %s 3 {shop:maint}:log {shop:maint}:fence {shop:maint}:rejected "
                          "%s %s %s %s",
                          record_script, kind, fence, pid, step) != REDIS_OK) {
        free(req);
        if (done)
            done(m, 0);
    }
}

static void on_released(leash_lock *l, int status, void *arg) {
    (void)l, (void)arg;
    if (status != LEASH_OK)
        say("maintenance: release: %s", leash_strerror(status));
}

/* Only once "end" is in the log is the lock given back: a release that
 * overtook it would let the next run log its start first. */
static void on_end_recorded(maintenance *m, int ok) {
    say("maintenance: run %" PRIu64 " done%s", m->fence, ok ? "" : " (end not recorded)");
    m->running = 0;
    if (leash_held(m->lock))
        leash_release(m->lock, on_released, NULL);
}

static void on_step(EV_P_ ev_timer *t, int revents) {
    maintenance *m = t->data;

    (void)revents;
    if (!m->running)
        return;
    if (!leash_held(m->lock))
        return; /* the lease is over: the lost callback ends the run */
    m->steps_done++;
    if (m->steps_done < m->cfg->job_steps) {
        record(m, "step", NULL);
        ev_timer_set(&m->step, (double)m->cfg->step_ms / 1000., 0.);
        ev_timer_start(EV_A_ & m->step);
    } else {
        record(m, "end", on_end_recorded);
    }
}

static void on_lost(leash_lock *l, int reason, void *arg) {
    maintenance *m = arg;

    (void)l;
    if (!m->running)
        return;
    /* Stop writing now: someone else may hold the lock already. */
    m->running = 0;
    ev_timer_stop(m->loop, &m->step);
    say("maintenance: run %" PRIu64 " lost its lock (%s) after step %d: stopped", m->fence,
        leash_lost_reason_name(reason), m->steps_done);
    record(m, "lost", NULL); /* refused if a newer run has started */
}

static void on_acquired(leash_lock *l, int status, void *arg) {
    maintenance *m = arg;

    m->trying = 0;
    if (status != LEASH_OK) {
        if (status != LEASH_EBUSY && status != LEASH_ECANCELED)
            say("maintenance: acquire: %s", leash_strerror(status));
        return; /* EBUSY: another worker runs it */
    }
    m->running = 1;
    m->steps_done = 0;
    m->fence = leash_fence(l);
    say("maintenance: run %" PRIu64 " starts", m->fence);
    record(m, "start", NULL);
    ev_timer_set(&m->step, (double)m->cfg->step_ms / 1000., 0.);
    ev_timer_start(m->loop, &m->step);
}

static void on_every(EV_P_ ev_timer *t, int revents) {
    maintenance *m = t->data;

    (void)revents;
#if EV_MULTIPLICITY
    (void)loop;
#endif
    if (m->trying || m->running || leash_held(m->lock) || worker_redis() == NULL)
        return;
    if (leash_acquire(m->lock, 0, on_acquired, m) == LEASH_OK)
        m->trying = 1;
}

maintenance *maintenance_start(struct ev_loop *loop, leash_client *c, const server_config *cfg) {
    maintenance *m = calloc(1, sizeof(*m));
    double every;

    if (m == NULL)
        return NULL;
    m->loop = loop;
    m->cfg = cfg;
    m->lock = leash_lock_new(c, "maintenance");
    if (m->lock == NULL) {
        free(m);
        return NULL;
    }
    leash_on_lost(m->lock, on_lost, m);
    every = (double)cfg->job_every_ms / 1000.;
    ev_timer_init(&m->every, on_every, every, every);
    m->every.data = m;
    ev_timer_start(loop, &m->every);
    ev_init(&m->step, on_step);
    m->step.data = m;
    return m;
}

leash_lock *maintenance_lock(const maintenance *m) {
    return m ? m->lock : NULL;
}

void maintenance_stop(maintenance *m) {
    if (m == NULL)
        return;
    ev_timer_stop(m->loop, &m->every);
    ev_timer_stop(m->loop, &m->step);
    m->running = 0;
    leash_lock_free(m->lock); /* releases a held lock; a pending try completes ECANCELED */
    free(m);
}
