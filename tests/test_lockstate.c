/* SPDX-License-Identifier: MIT */
/*
 * leash_lock_state / leash_client_lock_state (leash.h) against real
 * servers: one server, a Redis Cluster (test_lockstate_cluster) and five
 * Redlock servers (test_lockstate_redlock). Each kind held and not, its
 * TTL, fence and hold count, the waiters in order and a semaphore's
 * permits where the topology has the lock family; Redisson's layouts,
 * written as Redisson's scripts leave them; the majority's view of
 * Redlock with a server down and one that disagrees; the errors, and
 * frees from inside the callback.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "faults/proxy.h"
#include "fixture.h"
#include "prim/lock.h"

#define MAXE 8

/* What one callback said, copied out (st is valid during the call only). */
typedef struct got {
    int done, calls, status;
    int in_call; /* 1 while the call that started the read runs */
    int fired_inside;
    leash_state st; /* its scalars; the pointers are not kept */
    char name[64];
    char holder[MAXE][LEASH__STATE_TOKEN_MAX];
    char hmode[MAXE];
    int64_t hcount[MAXE];
    uint64_t hfence[MAXE];
    char waiter[MAXE][LEASH__STATE_TOKEN_MAX];
    char wmode[MAXE];
    int64_t wplace[MAXE];
    /* Frees to make inside the callback. */
    leash_lock *free_lock;
    leash_client *free_client;
} got;

static void on_state(const leash_state *st, int status, void *arg) {
    got *g = arg;
    size_t i;

    g->calls++;
    g->done = 1;
    g->status = status;
    g->fired_inside |= g->in_call;
    if (st != NULL) {
        g->st = *st;
        snprintf(g->name, sizeof(g->name), "%s", st->name);
        for (i = 0; i < st->nholders && i < MAXE; i++) {
            snprintf(g->holder[i], sizeof(g->holder[i]), "%s", st->holders[i].owner);
            g->hmode[i] = st->holders[i].mode;
            g->hcount[i] = st->holders[i].count;
            g->hfence[i] = st->holders[i].fence;
        }
        for (i = 0; i < st->nwaiters && i < MAXE; i++) {
            snprintf(g->waiter[i], sizeof(g->waiter[i]), "%s", st->waiters[i].owner);
            g->wmode[i] = st->waiters[i].mode;
            g->wplace[i] = st->waiters[i].count;
        }
    }
    if (g->free_lock != NULL)
        leash_lock_free(g->free_lock);
    if (g->free_client != NULL)
        leash_client_free(g->free_client);
}

/* Starts a read of name on c (the handle's when l is given). */
static void start_read(leash_client *c, leash_lock *l, const char *name, got *g) {
    int rc;

    g->in_call = 1;
    rc = l != NULL ? leash_lock_state(l, on_state, g)
                   : leash_client_lock_state(c, name, on_state, g);
    g->in_call = 0;
    CHECK_EQ_INT(rc, LEASH_OK);
    CHECK(!g->done); /* never inside the call */
}

/* Reads name on c and waits for the callback: LEASH_OK expected. */
static void read_state(fx_loop *loop, leash_client *c, leash_lock *l, const char *name, got *g) {
    memset(g, 0, sizeof(*g));
    start_read(c, l, name, g);
    CHECK_EQ_INT(fx_run_until_flag(loop, &g->done, 5000 + TEST_SLACK_MS), 0);
    fx_run_nowait(loop);
    CHECK_EQ_INT(g->calls, 1);
    CHECK(!g->fired_inside);
    CHECK_EQ_INT(g->status, LEASH_OK);
}

static const char *token_of(const leash_lock *l) {
    return l->hold.token;
}

/* ---- every topology ---- */

static void mutex_free_held_reentrant_and_released(void) {
    fx_world w;
    leash_lock *l;
    got g;

    fx_world_up(&w, 3000, 0);
    l = leash_lock_new(w.c, "st:m");
    CHECK(l != NULL);
    read_state(w.loop, w.c, l, NULL, &g);
    CHECK_EQ_INT(g.st.kind, LEASH_STATE_FREE);
    CHECK_EQ_INT(g.st.held, 0);
    CHECK_EQ_INT(g.st.nholders, 0);
    CHECK_EQ_INT(g.st.ttl_ms, -1);
    CHECK_STR_EQ(g.name, "st:m");
    CHECK_EQ_INT(g.st.servers, FX_COPIES);

    CHECK_EQ_INT(leash_lock_set_reentrant(l, 1), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    read_state(w.loop, w.c, NULL, "st:m", &g);
    CHECK_EQ_INT(g.st.kind, LEASH_STATE_MUTEX);
    CHECK_EQ_INT(g.st.held, 1);
    CHECK_EQ_INT(g.st.nholders, 1);
    CHECK_EQ_INT(g.st.holds, 2);
    CHECK_EQ_INT(g.hcount[0], 2);
    CHECK_EQ_INT(g.hmode[0], 'm');
    CHECK_STR_EQ(g.holder[0], token_of(l));
    CHECK_MSG(g.st.ttl_ms > 0 && g.st.ttl_ms <= 3000, "ttl %lld", (long long)g.st.ttl_ms);
    /* One server: the hold's fence. Redlock: the least it can be, and
     * the handle's lies within. */
    CHECK(g.st.fence <= leash_fence(l) && leash_fence(l) <= g.st.fence_max);
    CHECK(g.hfence[0] == g.st.fence);
#ifndef LEASH_TEST_TOPOLOGY_REDLOCK
    CHECK(g.st.fence == leash_fence(l));
#endif
    CHECK_EQ_INT(g.st.agree, FX_COPIES);
    CHECK_EQ_INT(g.st.nwaiters, 0);
    CHECK_EQ_INT(g.st.subscribers, 0);
    CHECK_EQ_INT(g.st.permits, 0);

    CHECK_EQ_INT(fx_release_sync(w.loop, l, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 5000), LEASH_OK);
    read_state(w.loop, w.c, l, NULL, &g);
    CHECK_EQ_INT(g.st.kind, LEASH_STATE_FREE);
    CHECK_EQ_INT(g.st.held, 0);
    leash_lock_free(l);
    fx_world_down(&w);
}

/* A waiter of another client subscribes to the lock's channel: one
 * subscriber, however many of its handles wait. */
static void mutex_waiters_of_a_process_show_as_one_subscriber(void) {
    fx_world w;
    leash_client *c2;
    leash_lock *l, *a, *b;
    fx_result ra = {0}, rb = {0};
    got g;
    int i;

    fx_world_up(&w, 3000, 0);
    c2 = fx_world_client(&w, 3000);
    fx_wait_connected(w.loop, c2, 5000);
    l = leash_lock_new(w.c, "st:sub");
    a = leash_lock_new(c2, "st:sub");
    b = leash_lock_new(c2, "st:sub");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(a, 20000, fx_acquire_cb, &ra), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(b, 20000, fx_acquire_cb, &rb), LEASH_OK);
    for (i = 0; i < 100; i++) {
        read_state(w.loop, w.c, NULL, "st:sub", &g);
        if (g.st.subscribers >= 1)
            break;
        fx_run_for(w.loop, 20);
    }
    CHECK_EQ_INT(g.st.subscribers, 1);
    CHECK_EQ_INT(g.st.held, 1);
    CHECK_STR_EQ(g.holder[0], token_of(l));
    leash_lock_free(a);
    leash_lock_free(b);
    leash_lock_free(l);
    fx_run_for(w.loop, 50);
    leash_client_free(c2);
    fx_world_down(&w);
}

static void key_of_another_layout_is_not_a_lock(void) {
    fx_world w;
    got g;

    fx_world_up(&w, 3000, 0);
    CHECK(fx_key_cmd(&w, "leash:st:list", "RPUSH %s x", "leash:st:list") > 0);
    read_state(w.loop, w.c, NULL, "st:list", &g);
    CHECK_EQ_INT(g.st.kind, LEASH_STATE_NOT_A_LOCK);
    CHECK_EQ_INT(g.st.held, 0);
    CHECK(fx_key_cmd(&w, "leash:st:str", "SET %s hello", "leash:st:str") > 0);
    read_state(w.loop, w.c, NULL, "st:str", &g);
    CHECK_EQ_INT(g.st.kind, LEASH_STATE_NOT_A_LOCK);
    fx_world_down(&w);
}

/* Redisson's RLock and RReadWriteLock hashes, as its scripts leave them. */
static void redisson_layouts_show_as_what_they_are(void) {
    static const char id[] = "8d4f6a6e-1c1e-4c4b-9d3a-2f0c5b8e9a10";
    char f1[64], f2[64], fw[64];
    fx_world w;
    got g;

    fx_world_up(&w, 3000, 0);
    snprintf(f1, sizeof(f1), "%s:1", id);
    snprintf(f2, sizeof(f2), "%s:2", id);
    snprintf(fw, sizeof(fw), "%s:7:write", id);
    fx_key_cmd(&w, "leash:st:rl", "HSET %s %s 3", "leash:st:rl", f1);
    fx_key_cmd(&w, "leash:st:rl", "PEXPIRE %s 30000", "leash:st:rl");
    read_state(w.loop, w.c, NULL, "st:rl", &g);
    CHECK_EQ_INT(g.st.kind, LEASH_STATE_REDISSON);
    CHECK_EQ_INT(g.st.held, 1);
    CHECK_EQ_INT(g.st.holds, 3);
    CHECK_STR_EQ(g.holder[0], f1);
    CHECK_EQ_INT(g.hmode[0], 'R');
    CHECK(g.st.ttl_ms > 0 && g.st.ttl_ms <= 30000);
    CHECK_EQ_INT(g.st.fence, 0);

    /* Two readers. */
    fx_key_cmd(&w, "leash:st:rrw", "HSET %s mode read %s 2 %s 1", "leash:st:rrw", f1, f2);
    fx_key_cmd(&w, "leash:st:rrw", "PEXPIRE %s 30000", "leash:st:rrw");
    read_state(w.loop, w.c, NULL, "st:rrw", &g);
    CHECK_EQ_INT(g.st.kind, LEASH_STATE_REDISSON_RW);
    CHECK_EQ_INT(g.st.held, 1);
    CHECK_EQ_INT(g.st.nholders, 2);
    CHECK_EQ_INT(g.st.holds, 3);
    CHECK_EQ_INT(g.hmode[0], 'r');
    CHECK_EQ_INT(g.hmode[1], 'r');
    CHECK_EQ_INT(g.st.agree, FX_COPIES);

    /* A writer (with a read hold of its own beside it). */
    fx_key_cmd(&w, "leash:st:rrw", "DEL %s", "leash:st:rrw");
    fx_key_cmd(&w, "leash:st:rrw", "HSET %s mode write %s 1", "leash:st:rrw", fw);
    fx_key_cmd(&w, "leash:st:rrw", "PEXPIRE %s 30000", "leash:st:rrw");
    read_state(w.loop, w.c, NULL, "st:rrw", &g);
    CHECK_EQ_INT(g.st.kind, LEASH_STATE_REDISSON_RW);
    CHECK_EQ_INT(g.st.held, 1);
    CHECK_EQ_INT(g.st.nholders, 1);
    CHECK_EQ_INT(g.hmode[0], 'w');
    CHECK_EQ_INT(g.hcount[0], 1);
    snprintf(fw, sizeof(fw), "%s:7", id);
    CHECK_STR_EQ(g.holder[0], fw);

    /* A hash with a mode that is neither is no lock. */
    fx_key_cmd(&w, "leash:st:rrw", "HSET %s mode other", "leash:st:rrw");
    read_state(w.loop, w.c, NULL, "st:rrw", &g);
    CHECK_EQ_INT(g.st.kind, LEASH_STATE_NOT_A_LOCK);
    fx_world_down(&w);
}

/* ---- the callback: frees inside it, and the errors ---- */

static void lock_and_client_freed_inside_the_callback(void) {
    fx_world w;
    leash_client *c2;
    leash_lock *l;
    got g;

    fx_world_up(&w, 3000, 0);
    l = leash_lock_new(w.c, "st:free");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    memset(&g, 0, sizeof(g));
    g.free_lock = l;
    start_read(w.c, l, NULL, &g);
    CHECK_EQ_INT(fx_run_until_flag(w.loop, &g.done, 5000 + TEST_SLACK_MS), 0);
    CHECK_EQ_INT(g.status, LEASH_OK);
    CHECK_EQ_INT(g.st.held, 1);

    /* The client whose read it is, inside its callback. */
    c2 = fx_world_client(&w, 3000);
    fx_wait_connected(w.loop, c2, 5000);
    memset(&g, 0, sizeof(g));
    g.free_client = c2;
    start_read(c2, NULL, "st:free", &g);
    CHECK_EQ_INT(fx_run_until_flag(w.loop, &g.done, 5000 + TEST_SLACK_MS), 0);
    fx_run_for(w.loop, 20);
    CHECK_EQ_INT(g.calls, 1);
    CHECK_EQ_INT(g.status, LEASH_OK);

    /* A handle freed while its read is out: the read goes on. */
    l = leash_lock_new(w.c, "st:free");
    memset(&g, 0, sizeof(g));
    start_read(w.c, l, NULL, &g);
    leash_lock_free(l);
    CHECK_EQ_INT(fx_run_until_flag(w.loop, &g.done, 5000 + TEST_SLACK_MS), 0);
    CHECK_EQ_INT(g.status, LEASH_OK);
    CHECK_STR_EQ(g.name, "st:free");
    fx_world_down(&w);
}

static void on_closed(int status, void *arg) {
    (void)status;
    *(int *)arg = 1;
}

static void refused_calls_and_a_client_freed_before_the_answer(void) {
    int closed = 0;
    fx_world w;
    leash_client *c2;
    leash_lock *l;
    got g;

    fx_world_up(&w, 3000, 0);
    memset(&g, 0, sizeof(g));
    CHECK_EQ_INT(leash_client_lock_state(NULL, "x", on_state, &g), LEASH_EINVAL);
    fx_log_clear();
    CHECK_EQ_INT(leash_client_lock_state(w.c, NULL, on_state, &g), LEASH_EINVAL);
    CHECK(fx_log_contains("leash_lock_state: the name is NULL"));
    CHECK_EQ_INT(leash_client_lock_state(w.c, "x", NULL, &g), LEASH_EINVAL);
    CHECK(fx_log_contains("leash_lock_state: the callback is NULL"));
    CHECK_EQ_INT(leash_client_lock_state(w.c, "", on_state, &g), LEASH_EINVAL);
    CHECK_EQ_INT(leash_lock_state(NULL, on_state, &g), LEASH_EINVAL);
    {
        char *big = malloc(LEASH_NAME_MAX + 2);
        memset(big, 'a', LEASH_NAME_MAX + 1);
        big[LEASH_NAME_MAX + 1] = '\0';
        CHECK_EQ_INT(leash_client_lock_state(w.c, big, on_state, &g), LEASH_EINVAL);
        free(big);
    }

    /* Not attached. */
    {
        leash_options o;
        leash_client *c;
        fx_world_options(&w, &o, 3000);
        CHECK_EQ_INT(leash_client_new(&c, &o), LEASH_OK);
        CHECK_EQ_INT(leash_client_lock_state(c, "x", on_state, &g), LEASH_ELOOP);
        leash_client_free(c);
    }

    /* Closing. */
    c2 = fx_world_client(&w, 3000);
    fx_wait_connected(w.loop, c2, 5000);
    l = leash_lock_new(c2, "st:closing");
    CHECK_EQ_INT(leash_client_close(c2, on_closed, &closed), LEASH_OK);
    CHECK_EQ_INT(leash_client_lock_state(c2, "x", on_state, &g), LEASH_ESTATE);
    CHECK(fx_log_contains("leash_lock_state: the client is closing"));
    CHECK_EQ_INT(leash_lock_state(l, on_state, &g), LEASH_ESTATE);
    CHECK_EQ_INT(fx_run_until_flag(w.loop, &closed, 5000), 0); /* the close frees c2 */
    CHECK_EQ_INT(g.calls, 0);

    /* Freed before the answer: LEASH_ECANCELED, inside leash_client_free. */
    c2 = fx_world_client(&w, 3000);
    fx_wait_connected(w.loop, c2, 5000);
    memset(&g, 0, sizeof(g));
    start_read(c2, NULL, "st:x", &g);
    leash_client_free(c2);
    CHECK_EQ_INT(g.calls, 1);
    CHECK_EQ_INT(g.status, LEASH_ECANCELED);
    fx_world_down(&w);
}

#if defined(LEASH_TEST_ONE_SERVER) || defined(LEASH_TEST_TOPOLOGY_REDLOCK)
/* Starts n reads of name on c at once, behind a trickle, and checks that
 * each ended by its deadline, command_timeout_ms (300) after the call
 * (prim/lockstate.c), + the slack. */
static void reads_in_time(fx_loop *loop, leash_client *c, const char *name, got *g, size_t n) {
    int64_t t0 = test_now_ms(), took[8] = {0};
    size_t i, pending = n;

    CHECK(n <= 8);
    memset(g, 0, n * sizeof(*g));
    for (i = 0; i < n; i++)
        start_read(c, NULL, name, &g[i]);
    while (pending > 0 && test_now_ms() - t0 < 300 + 3000) {
        fx_run_for(loop, 1);
        for (pending = 0, i = 0; i < n; i++)
            if (!g[i].done)
                pending++;
            else if (took[i] == 0)
                took[i] = test_now_ms() - t0 + 1; /* + 1: never 0 */
    }
    for (i = 0; i < n; i++)
        CHECK_MSG(g[i].done && took[i] - 1 <= 300 + TEST_SLACK_MS,
                  "read %zu: done %d after %lld ms (status %s)", i, g[i].done,
                  (long long)took[i] - 1, leash_status_name(g[i].status));
}
#endif

#ifdef LEASH_TEST_ONE_SERVER
/* Nothing listens: the read waits for its connection command_timeout_ms,
 * then says LEASH_ECONN. */
static void no_server_completes_econn_after_the_command_timeout(void) {
    fx_loop *loop = fx_loop_new();
    test_redis r;
    leash_client *c;
    int64_t t0;
    int port;
    got g;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    port = r.port;
    test_redis_stop(&r); /* a port nobody listens on now */
    c = fx_fault_client(loop, port, 3000);
    memset(&g, 0, sizeof(g));
    t0 = test_now_ms();
    start_read(c, NULL, "st:none", &g);
    CHECK_EQ_INT(fx_run_until_flag(loop, &g.done, 300 + 2000 + TEST_SLACK_MS), 0);
    CHECK_EQ_INT(g.status, LEASH_ECONN);
    CHECK(test_now_ms() - t0 >= 300);
    leash_client_free(c);
    fx_loop_free(loop);
}

/* Reads that start together on a connection whose answers trickle in
 * (one byte a millisecond: never silent, so never broken for silence)
 * each end by their deadline, command_timeout_ms (300) after they were
 * asked: the first answers, the rest LEASH_ECONN, none later. */
#define SLOW_READS 8
static void reads_end_by_their_deadline_when_answers_trickle(void) {
    fx_loop *loop = fx_loop_new();
    got g[SLOW_READS];
    fault_proxy p;
    test_redis r;
    leash_client *c;
    leash_lock *l;
    int i, ok = 0;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(fp_start(&p, r.port), 0);
    c = fx_fault_client(loop, p.port, 3000);
    fx_wait_connected(loop, c, 5000);
    l = leash_lock_new(c, "st:slow");
    CHECK_EQ_INT(fx_acquire_sync(loop, l, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fp_trickle(&p, FP_ALL, FP_DOWN, 1), 0);
    reads_in_time(loop, c, "st:slow", g, SLOW_READS);
    for (i = 0; i < SLOW_READS; i++) {
        CHECK(g[i].status == LEASH_OK || g[i].status == LEASH_ECONN);
        ok += g[i].status == LEASH_OK;
    }
    CHECK_MSG(ok < SLOW_READS, "every read answered in time: the trickle was not slow enough");
    CHECK_EQ_INT(fp_trickle(&p, FP_ALL, FP_DOWN, 0), 0);
    fx_run_for(loop, 50);
    for (i = 0; i < SLOW_READS; i++)
        CHECK_EQ_INT(g[i].calls, 1);
    leash_lock_free(l);
    leash_client_free(c);
    fx_loop_free(loop);
    fp_stop(&p);
    test_redis_stop(&r);
}
#undef SLOW_READS
#endif

#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
/* One of the five answers a byte a millisecond: reads end by their
 * deadline (command_timeout_ms, 300) with the majority's view of the
 * others, all of them (the trickling server's answers too slow to count). */
#define SLOW_READS 6
static void a_server_that_answers_slowly_holds_no_read_up(void) {
    const char *seeds[FX_REDLOCK_N];
    char text[32];
    got g[SLOW_READS];
    leash_options o;
    fault_proxy p;
    fx_world w;
    leash_client *c;
    leash_lock *l;
    int i;

    fx_world_up(&w, 3000, 0);
    CHECK_EQ_INT(fp_start(&p, w.servers[FX_REDLOCK_N - 1].port), 0);
    fx_world_options(&w, &o, 3000);
    o.command_timeout_ms = 300;
    for (i = 0; i < FX_REDLOCK_N; i++)
        seeds[i] = o.nodes[i];
    snprintf(text, sizeof(text), "127.0.0.1:%d", p.port);
    seeds[FX_REDLOCK_N - 1] = text;
    o.nodes = seeds;
    c = fx_client_opts(w.loop, &o);
    fx_wait_every_server(w.loop, c, FX_REDLOCK_N, 5000);
    l = leash_lock_new(c, "st:slow");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fp_trickle(&p, FP_ALL, FP_DOWN, 1), 0);
    reads_in_time(w.loop, c, "st:slow", g, SLOW_READS);
    for (i = 0; i < SLOW_READS; i++) {
        CHECK_EQ_INT(g[i].status, LEASH_OK);
        CHECK_EQ_INT(g[i].st.held, 1);
        CHECK(g[i].st.agree >= FX_REDLOCK_N / 2 + 1);
    }
    CHECK_EQ_INT(fp_trickle(&p, FP_ALL, FP_DOWN, 0), 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 5000), LEASH_OK);
    leash_lock_free(l);
    leash_client_free(c);
    fp_stop(&p);
    fx_world_down(&w);
}
#endif

/* ---- the lock family (one server, a cluster) ---- */

#ifndef LEASH_TEST_TOPOLOGY_REDLOCK
/* Waits until name shows n waiters. */
static void wait_waiters(fx_world *w, const char *name, size_t n, got *g) {
    int i;

    for (i = 0; i < 200; i++) {
        read_state(w->loop, w->c, NULL, name, g);
        if (g->st.nwaiters >= n)
            break;
        fx_run_for(w->loop, 10);
    }
    CHECK_EQ_INT(g->st.nwaiters, n);
}

static void fair_lock_shows_its_holder_fence_and_waiters_in_order(void) {
    fx_world w;
    leash_lock *h, *a, *b;
    fx_result ra = {0}, rb = {0};
    got g;

    fx_world_up(&w, 3000, 0);
    h = leash_fair_lock_new(w.c, "st:fair");
    a = leash_fair_lock_new(w.c, "st:fair");
    b = leash_fair_lock_new(w.c, "st:fair");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(a, 20000, fx_acquire_cb, &ra), LEASH_OK);
    wait_waiters(&w, "st:fair", 1, &g);
    CHECK_EQ_INT(leash_acquire(b, 20000, fx_acquire_cb, &rb), LEASH_OK);
    wait_waiters(&w, "st:fair", 2, &g);
    CHECK_EQ_INT(g.st.kind, LEASH_STATE_FAIR);
    CHECK_EQ_INT(g.st.held, 1);
    CHECK_STR_EQ(g.holder[0], token_of(h));
    CHECK_EQ_INT(g.st.fence, leash_fence(h));
    CHECK(g.st.ttl_ms > 0 && g.st.ttl_ms <= 3000);
    CHECK_STR_EQ(g.waiter[0], token_of(a));
    CHECK_STR_EQ(g.waiter[1], token_of(b));
    CHECK(g.wplace[0] < g.wplace[1]);
    CHECK_EQ_INT(g.wmode[0], 'f');
    CHECK_EQ_INT(g.st.subscribers, -1);

    CHECK_EQ_INT(fx_release_sync(w.loop, h, 5000), LEASH_OK);
    fx_run_until(w.loop, &ra, 5000);
    read_state(w.loop, w.c, NULL, "st:fair", &g);
    CHECK_STR_EQ(g.holder[0], token_of(a));
    CHECK_EQ_INT(g.st.nwaiters, 1);
    CHECK_STR_EQ(g.waiter[0], token_of(b));
    leash_lock_free(b);
    leash_lock_free(a);
    leash_lock_free(h);
    fx_world_down(&w);
}

static void rw_lock_shows_readers_and_a_queued_writer(void) {
    fx_world w;
    leash_lock *r1, *r2, *wr;
    fx_result rw = {0};
    got g;

    fx_world_up(&w, 3000, 0);
    r1 = leash_read_lock_new(w.c, "st:rw");
    r2 = leash_read_lock_new(w.c, "st:rw");
    wr = leash_write_lock_new(w.c, "st:rw");
    CHECK_EQ_INT(leash_lock_set_reentrant(r1, 1), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r1, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r1, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r2, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(wr, 20000, fx_acquire_cb, &rw), LEASH_OK);
    wait_waiters(&w, "st:rw", 1, &g);
    CHECK_EQ_INT(g.st.kind, LEASH_STATE_RW);
    CHECK_EQ_INT(g.st.held, 1);
    CHECK_EQ_INT(g.st.nholders, 2);
    CHECK_EQ_INT(g.st.holds, 3);
    CHECK_EQ_INT(g.hmode[0], 'r');
    CHECK_EQ_INT(g.hmode[1], 'r');
    CHECK_STR_EQ(g.waiter[0], token_of(wr));
    CHECK_EQ_INT(g.wmode[0], 'w');
    CHECK_EQ_INT(g.wplace[0] > 0, 1);
    leash_lock_free(wr);
    leash_lock_free(r2);
    leash_lock_free(r1);
    fx_world_down(&w);
}

static void semaphore_shows_permits_used_and_free(void) {
    fx_world w;
    leash_lock *p[4];
    fx_result r3 = {0};
    got g;
    int i;

    fx_world_up(&w, 3000, 0);
    for (i = 0; i < 4; i++)
        p[i] = leash_semaphore_new(w.c, "st:sem", 3);
    read_state(w.loop, w.c, p[0], NULL, &g);
    CHECK_EQ_INT(g.st.kind, LEASH_STATE_FREE);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, p[0], 0, 5000), LEASH_OK);
    read_state(w.loop, w.c, p[0], NULL, &g);
    CHECK_EQ_INT(g.st.kind, LEASH_STATE_SEMAPHORE);
    CHECK_EQ_INT(g.st.permits, 3);
    CHECK_EQ_INT(g.st.permits_used, 1);
    CHECK_EQ_INT(g.st.permits_free, 2);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, p[1], 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, p[2], 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(p[3], 20000, fx_acquire_cb, &r3), LEASH_OK);
    wait_waiters(&w, "st:sem", 1, &g);
    CHECK_EQ_INT(g.st.permits_used, 3);
    CHECK_EQ_INT(g.st.permits_free, 0);
    CHECK_EQ_INT(g.st.nholders, 3);
    CHECK_STR_EQ(g.waiter[0], token_of(p[3]));
    CHECK_EQ_INT(g.wmode[0], 's');
    for (i = 3; i >= 0; i--)
        leash_lock_free(p[i]);
    fx_world_down(&w);
}

/* A mutex's starving waiters queue in its key (dialect/leash.c): shown
 * in order, as the key has them. */
static void mutex_queued_waiters_show_in_order(void) {
    static const char a[] = "0123456789abcdef0123456789abcdef",
                      b[] = "fedcba9876543210fedcba9876543210",
                      c[] = "00112233445566778899aabbccddeeff";
    char v[256];
    fx_world w;
    got g;

    fx_world_up(&w, 3000, 0);
    snprintf(v, sizeof(v), "%s:1:1:1700000000000000:%s:1:%s:2", a, b, c);
    fx_key_cmd(&w, "leash:st:q", "SET %s %s PX 20000", "leash:st:q", v);
    read_state(w.loop, w.c, NULL, "st:q", &g);
    CHECK_EQ_INT(g.st.kind, LEASH_STATE_MUTEX);
    CHECK_EQ_INT(g.st.held, 1);
    CHECK_STR_EQ(g.holder[0], a);
    CHECK_EQ_INT(g.st.fence, 1700000000000000ull);
    CHECK_EQ_INT(g.st.nwaiters, 2);
    CHECK_STR_EQ(g.waiter[0], b);
    CHECK_STR_EQ(g.waiter[1], c);
    CHECK_EQ_INT(g.wplace[0], 1);
    CHECK_EQ_INT(g.wplace[1], 2);
    fx_world_down(&w);
}
#endif

/* ---- Redlock: the majority's view ---- */

#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
static void set_on(test_redis *r, const char *key, const char *value) {
    redisReply *rep = test_redis_cmd(r, "SET %s %s PX 5000", key, value);
    CHECK(rep != NULL && rep->type == REDIS_REPLY_STATUS);
    if (rep != NULL)
        freeReplyObject(rep);
}

/* One server of five down, one holding another owner's key: the four that
 * answer show the holder on three, a majority. Then a second server
 * disagrees: two of five, no majority, not held. */
static void redlock_majority_with_one_server_down_and_one_disagreeing(void) {
    static const char other[] = "0123456789abcdef0123456789abcdef";
    char v[128];
    fx_world w;
    leash_lock *l;
    got g;
    int64_t t0;

    fx_world_up(&w, 5000, 300);
    l = leash_lock_new(w.c, "st:rl");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    fx_run_until_key_exists(&w, "leash:st:rl");
    snprintf(v, sizeof(v), "%s:0:1:42", other);
    set_on(&w.servers[1], "leash:st:rl", v);
    CHECK_EQ_INT(test_redis_kill(&w.servers[4]), 0);
    t0 = test_now_ms();
    read_state(w.loop, w.c, NULL, "st:rl", &g);
    CHECK(test_now_ms() - t0 >= 300 - 5); /* waited for the one down */
    CHECK_EQ_INT(g.st.servers, 5);
    CHECK_EQ_INT(g.st.agree, 3);
    CHECK_EQ_INT(g.st.held, 1);
    CHECK_STR_EQ(g.holder[0], token_of(l));
    CHECK(g.st.fence <= leash_fence(l) && leash_fence(l) <= g.st.fence_max);
    CHECK(g.st.ttl_ms > 0 && g.st.ttl_ms <= 5000);

    set_on(&w.servers[2], "leash:st:rl", v);
    read_state(w.loop, w.c, NULL, "st:rl", &g);
    CHECK_EQ_INT(g.st.held, 0);
    CHECK_EQ_INT(g.st.nholders, 0);
    CHECK_EQ_INT(g.st.agree, 2);
    CHECK_EQ_INT(g.st.ttl_ms, -1);
    CHECK(g.st.fence >= leash_fence(l) || g.st.fence == 42);

    /* Three down: fewer than a majority answer. */
    CHECK_EQ_INT(test_redis_kill(&w.servers[3]), 0);
    CHECK_EQ_INT(test_redis_kill(&w.servers[2]), 0);
    memset(&g, 0, sizeof(g));
    start_read(w.c, NULL, "st:rl", &g);
    CHECK_EQ_INT(fx_run_until_flag(w.loop, &g.done, 3000 + TEST_SLACK_MS), 0);
    CHECK_EQ_INT(g.status, LEASH_ECONN);
    leash_lock_free(l);
    CHECK_EQ_INT(test_redis_restart(&w.servers[2]), 0);
    CHECK_EQ_INT(test_redis_restart(&w.servers[3]), 0);
    CHECK_EQ_INT(test_redis_restart(&w.servers[4]), 0);
    fx_world_down(&w);
}
#endif

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(mutex_free_held_reentrant_and_released),
        TEST_CASE(mutex_waiters_of_a_process_show_as_one_subscriber),
        TEST_CASE(key_of_another_layout_is_not_a_lock),
        TEST_CASE(redisson_layouts_show_as_what_they_are),
        TEST_CASE(lock_and_client_freed_inside_the_callback),
        TEST_CASE(refused_calls_and_a_client_freed_before_the_answer),
#ifdef LEASH_TEST_ONE_SERVER
        TEST_CASE(no_server_completes_econn_after_the_command_timeout),
        TEST_CASE(reads_end_by_their_deadline_when_answers_trickle),
#endif
#ifndef LEASH_TEST_TOPOLOGY_REDLOCK
        TEST_CASE(fair_lock_shows_its_holder_fence_and_waiters_in_order),
        TEST_CASE(rw_lock_shows_readers_and_a_queued_writer),
        TEST_CASE(semaphore_shows_permits_used_and_free),
        TEST_CASE(mutex_queued_waiters_show_in_order),
#endif
#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
        TEST_CASE(a_server_that_answers_slowly_holds_no_read_up),
        TEST_CASE(redlock_majority_with_one_server_down_and_one_disagreeing),
#endif
        {0},
    };
    return fx_main(argc, argv, cases);
}
