/* SPDX-License-Identifier: MIT */
/*
 * leash-bench-herd: many waiters on one lock, spread over processes.
 *
 * P processes (forked), each with one leash client and W/P lock handles on
 * ONE lock name, all waiting (LEASH_WAIT_FOREVER) while a gate client in
 * the parent holds the lock. Once every waiter has made its first attempts
 * and gone to sleep (INFO commandstats stops moving), the window opens
 * (snapshot A) and the gate releases. Each waiter that gets the lock holds
 * it --hold ms and releases it, and is then done (it does not queue again),
 * so the waiters go from W down to W - H. The H-th grant closes the window:
 * its holder keeps the lock, and once the server is quiet again snapshot B
 * is taken. H handoffs (gate -> 1st, 1st -> 2nd, ...) are in the window.
 *
 * Per handoff: every Redis command but INFO, and the lock-script calls
 * (EVALSHA/EVAL: acquire attempts and releases). A waiter that polled, or a
 * release that woke every handle, would make these grow with W; leash
 * wakes the head waiter of each process, so they should grow with P only.
 *
 * Also: the longest wait (leash_acquire() call -> acquire callback, among
 * the H waiters that got the lock) and the handoff time (release callback
 * -> next acquire callback), p50 and max, with the p50 in Redis round trips
 * (redis-benchmark -c 1 -P 1 PING, same run).
 *
 * Output: one markdown table and notes. Exit 0 when every configuration ran.
 */
#define _GNU_SOURCE

#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <ev.h>
#include <hiredis/hiredis.h>
#include <leash/adapters/libev.h>
#include <leash/leash.h>

#include "common.h"
#include "redis_server.h"

#define MAX_CONFIGS 8
#define MAX_PROCS 32
#define LOCK_NAME "bench:herd"

/* ---- shared between the parent and the waiter processes ---- */

typedef struct shared {
    _Atomic int ready;     /* processes whose waiters all called leash_acquire */
    _Atomic int finish;    /* the parent took snapshot B: free everything, exit */
    _Atomic int stop;      /* the H-th grant happened */
    _Atomic int errors;    /* unexpected statuses */
    _Atomic int64_t holds; /* grants so far */
    int64_t gate_released; /* gate's release callback (ns) */
    _Atomic uint64_t wakeups, commands_sent;
    int64_t h; /* handoffs; a hold_times per grant follows the struct */
} shared;

typedef struct hold_times {
    int64_t grant_ns; /* acquire callback */
    int64_t asked_ns; /* leash_acquire() call of that waiter */
    int64_t rel_ns;   /* release callback of this hold (0 for the last) */
    int proc;
} hold_times;

static size_t shared_size(int64_t h) {
    return sizeof(shared) + (size_t)h * sizeof(hold_times) + 64;
}

static hold_times *shared_holds(shared *sh) {
    return (hold_times *)((char *)sh + ((sizeof(shared) + 63) & ~(size_t)63));
}

static shared *shared_new(int64_t h) {
    shared *sh = bench_shared_alloc(shared_size(h));
    if (sh != NULL)
        sh->h = h; /* the rest is zero */
    return sh;
}

/* ---- a waiter process ---- */

typedef struct waiter {
    struct proc *proc;
    leash_lock *lock;
    int64_t asked_ns;
    int64_t k; /* hold index once granted, else -1 */
    ev_timer hold;
} waiter;

typedef struct proc {
    int id, n, hold_ms;
    struct ev_loop *loop;
    leash_client *client;
    waiter *w;
    shared *sh;
    ev_timer poll; /* the harness looks at sh->finish */
} proc;

static void on_released(leash_lock *l, int status, void *arg) {
    waiter *w = arg;
    shared *sh = w->proc->sh;

    (void)l;
    if (status != LEASH_OK && !(status == LEASH_ECANCELED && atomic_load(&sh->finish)))
        atomic_fetch_add(&sh->errors, 1);
    else if (status == LEASH_OK)
        shared_holds(sh)[w->k].rel_ns = bench_now_ns();
}

static void on_hold_over(struct ev_loop *loop, ev_timer *t, int revents) {
    waiter *w = (waiter *)((char *)t - offsetof(waiter, hold));

    (void)loop;
    (void)revents;
    if (leash_release(w->lock, on_released, w) != LEASH_OK)
        atomic_fetch_add(&w->proc->sh->errors, 1);
}

static void on_acquired(leash_lock *l, int status, void *arg) {
    waiter *w = arg;
    proc *p = w->proc;
    shared *sh = p->sh;
    int64_t t = bench_now_ns(), k;
    hold_times *ht;

    (void)l;
    if (status != LEASH_OK) {
        if (!(status == LEASH_ECANCELED && atomic_load(&sh->finish)))
            atomic_fetch_add(&sh->errors, 1);
        return;
    }
    k = atomic_fetch_add(&sh->holds, 1);
    if (k >= sh->h)
        return; /* after the window: keep it until the end */
    w->k = k;
    ht = &shared_holds(sh)[k];
    ht->grant_ns = t;
    ht->asked_ns = w->asked_ns;
    ht->proc = p->id;
    if (k == sh->h - 1) {
        atomic_store(&sh->stop, 1); /* the last handoff: hold on */
        return;
    }
    ev_timer_set(&w->hold, (double)p->hold_ms / 1000., 0.);
    ev_timer_start(p->loop, &w->hold);
}

static void on_poll(struct ev_loop *loop, ev_timer *t, int revents) {
    proc *p = (proc *)((char *)t - offsetof(proc, poll));

    (void)revents;
    if (atomic_load(&p->sh->finish))
        ev_break(loop, EVBREAK_ALL);
}

static int proc_main(shared *sh, int id, int n, int hold_ms, int port) {
    proc p;
    leash_stats st;
    int i;

    memset(&p, 0, sizeof p);
    p.id = id;
    p.n = n;
    p.hold_ms = hold_ms;
    p.sh = sh;
    p.loop = ev_loop_new(EVFLAG_AUTO);
    p.w = calloc((size_t)n, sizeof(*p.w));
    if (p.loop == NULL || p.w == NULL || (p.client = bench_client_new(p.loop, port)) == NULL)
        return 1;
    if (bench_wait_connected(p.loop, &p.client, 1, 5000) != 0) {
        fprintf(stderr, "herd: process %d did not connect in 5 s\n", id);
        return 1;
    }
    for (i = 0; i < n; i++) {
        waiter *w = &p.w[i];
        w->proc = &p;
        w->k = -1;
        ev_timer_init(&w->hold, on_hold_over, 0., 0.);
        if ((w->lock = leash_lock_new(p.client, LOCK_NAME)) == NULL)
            return 1;
    }
    for (i = 0; i < n; i++) {
        p.w[i].asked_ns = bench_now_ns();
        if (leash_acquire(p.w[i].lock, LEASH_WAIT_FOREVER, on_acquired, &p.w[i]) != LEASH_OK)
            atomic_fetch_add(&sh->errors, 1);
    }
    atomic_fetch_add(&sh->ready, 1);
    ev_timer_init(&p.poll, on_poll, 0.002, 0.002);
    ev_timer_start(p.loop, &p.poll);
    ev_run(p.loop, 0);
    ev_timer_stop(p.loop, &p.poll);
    for (i = 0; i < n; i++)
        ev_timer_stop(p.loop, &p.w[i].hold);
    leash_client_stats(p.client, &st);
    atomic_fetch_add(&sh->wakeups, st.wakeups);
    atomic_fetch_add(&sh->commands_sent, st.commands_sent);
    leash_client_free(p.client);
    ev_run(p.loop, EVRUN_NOWAIT);
    ev_loop_destroy(p.loop);
    free(p.w);
    return 0;
}

/* ---- the parent ---- */

typedef struct result {
    int procs, waiters, ok;
    int64_t handoffs;
    double total_per, sent_per, lock_per, attempts_per, per_proc;
    double subs_per;
    double longest_wait_ms, handoff_p50_us, handoff_max_us;
    int64_t setup_lock_cmds;
    uint64_t wakeups;
    double seconds;
    int errors;
    bench_steal steal;
} result;

/* Waits until the server's command counts stop moving (3 polls 20 ms
 * apart), at most timeout_ms; the snapshot is left in *out. */
static int wait_quiet(redisContext *admin, int timeout_ms, bench_cmdstats *out) {
    int64_t deadline = bench_now_ns() + (int64_t)timeout_ms * 1000000;
    long long last = -1;
    int same = 0;

    while (bench_now_ns() < deadline) {
        long long total;
        if (bench_cmdstats_read(admin, out) != 0)
            return -1;
        total = bench_cmdstats_total(out);
        same = total == last ? same + 1 : 0;
        if (same >= 3)
            return 0;
        last = total;
        test_sleep_ms(20);
    }
    return -1;
}

typedef struct gate {
    struct ev_loop *loop;
    int done, status;
    int64_t at;
} gate;

static void gate_acquired(leash_lock *l, int status, void *arg) {
    gate *g = arg;
    (void)l;
    g->done = 1;
    g->status = status;
}

static void gate_released(leash_lock *l, int status, void *arg) {
    gate *g = arg;
    (void)l;
    g->at = bench_now_ns();
    g->done = 1;
    g->status = status;
}

/* Runs the gate's loop until its request completed (5 s at most). */
static int gate_wait(gate *g) {
    int64_t deadline = bench_now_ns() + 5000000000LL;
    while (!g->done && bench_now_ns() < deadline)
        ev_run(g->loop, EVRUN_ONCE);
    return g->done && g->status == LEASH_OK ? 0 : -1;
}

static int run_config(test_redis *r, redisContext *admin, const bench_cpus *cpus, int nprocs,
                      int waiters, int64_t h, int hold_ms, double cap_s, result *res) {
    shared *sh = shared_new(h);
    pid_t pids[MAX_PROCS];
    leash_client *gc = NULL;
    leash_lock *gl = NULL;
    gate g;
    bench_cmdstats a, b, d, setup0;
    int i, started = 0, rc = -1;
    int64_t deadline, t0;
    bench_script_runs runs;

    memset(res, 0, sizeof *res);
    memset(&g, 0, sizeof g);
    res->procs = nprocs;
    res->waiters = waiters;
    if (sh == NULL)
        return -1;
    bench_flushall(r);

    /* The gate takes the lock first. */
    g.loop = ev_loop_new(EVFLAG_AUTO);
    if (g.loop == NULL || (gc = bench_client_new(g.loop, r->port)) == NULL ||
        (gl = leash_lock_new(gc, LOCK_NAME)) == NULL ||
        bench_wait_connected(g.loop, &gc, 1, 5000) != 0 ||
        leash_acquire(gl, 0, gate_acquired, &g) != LEASH_OK || gate_wait(&g) != 0) {
        fprintf(stderr, "herd: the gate could not take the lock\n");
        goto out;
    }
    bench_cmdstats_read(admin, &setup0);

    for (i = 0; i < nprocs; i++) {
        int n = waiters / nprocs + (i < waiters % nprocs ? 1 : 0);
        pid_t pid = bench_fork();
        if (pid < 0) {
            perror("herd: fork");
            break;
        }
        if (pid == 0)
            _exit(proc_main(sh, i, n, hold_ms, r->port));
        pids[started++] = pid;
    }
    deadline = bench_now_ns() + 20000000000LL;
    while (started == nprocs && atomic_load(&sh->ready) < nprocs && bench_now_ns() < deadline)
        test_sleep_ms(5);
    if (started < nprocs || atomic_load(&sh->ready) < nprocs) {
        fprintf(stderr, "herd: the waiter processes did not start\n");
        goto stop;
    }
    /* Every waiter tried and went to sleep: the window opens. */
    if (wait_quiet(admin, 20000, &a) != 0) {
        fprintf(stderr, "herd: the waiters did not settle\n");
        goto stop;
    }
    bench_cmdstats_delta(&setup0, &a, &d);
    bench_script_runs_of(&d, &runs);
    res->setup_lock_cmds = runs.scripts;
    bench_steal_begin(cpus, &res->steal);
    t0 = bench_now_ns();
    g.done = 0;
    if (leash_release(gl, gate_released, &g) != LEASH_OK || gate_wait(&g) != 0) {
        fprintf(stderr, "herd: the gate could not release\n");
        goto stop;
    }
    sh->gate_released = g.at;
    deadline = t0 + (int64_t)(cap_s * 1e9);
    while (!atomic_load(&sh->stop) && bench_now_ns() < deadline)
        test_sleep_ms(2);
    if (!atomic_load(&sh->stop)) {
        fprintf(stderr, "herd: %lld of %lld handoffs in %.0f s\n",
                (long long)atomic_load(&sh->holds), (long long)h, cap_s);
        goto stop;
    }
    res->seconds = (double)(bench_now_ns() - t0) / 1e9;
    if (wait_quiet(admin, 5000, &b) != 0) {
        fprintf(stderr, "herd: the server did not settle after the last handoff\n");
        goto stop;
    }
    bench_steal_end(cpus, &res->steal);
    bench_cmdstats_delta(&a, &b, &d);
    bench_script_runs_of(&d, &runs);
    {
        hold_times *ht = shared_holds(sh);
        int64_t *gaps = calloc((size_t)h, sizeof(*gaps)), k, longest = 0;

        res->handoffs = h;
        res->total_per = (double)runs.total / (double)h;
        res->sent_per = (double)runs.sent / (double)h;
        res->lock_per = (double)runs.scripts / (double)h;
        res->attempts_per = (double)runs.acquires / (double)h;
        res->subs_per = (double)(runs.subscribes + runs.unsubscribes) / (double)h;
        res->per_proc = res->lock_per / (double)nprocs;
        for (k = 0; k < h; k++) {
            int64_t prev = k == 0 ? sh->gate_released : ht[k - 1].rel_ns;
            /* Waiting starts when the lock is first free to take. */
            int64_t from = ht[k].asked_ns > sh->gate_released ? ht[k].asked_ns : sh->gate_released;
            if (ht[k].grant_ns - from > longest)
                longest = ht[k].grant_ns - from;
            if (gaps != NULL)
                gaps[k] = ht[k].grant_ns - prev;
        }
        res->longest_wait_ms = (double)longest / 1e6;
        if (gaps != NULL) {
            qsort(gaps, (size_t)h, sizeof(*gaps), bench_cmp_i64);
            res->handoff_p50_us = (double)bench_pct(gaps, h, 0.5) / 1e3;
            res->handoff_max_us = (double)gaps[h - 1] / 1e3;
            free(gaps);
        }
    }
    res->ok = 1;
    rc = 0;
stop:
    atomic_store(&sh->finish, 1);
    if (bench_reap(pids, started, 10000, "herd") != 0)
        rc = -1;
    res->errors = atomic_load(&sh->errors);
    res->wakeups = atomic_load(&sh->wakeups);
out:
    if (gc != NULL)
        leash_client_free(gc);
    if (g.loop != NULL) {
        ev_run(g.loop, EVRUN_NOWAIT);
        ev_loop_destroy(g.loop);
    }
    bench_shared_free(sh, shared_size(h));
    return rc;
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [options]\n"
            "  -c, --configs LIST  PROCESSESxWAITERS, comma-separated\n"
            "                      (default 4x1000,1x1000,2x1000,8x1000,4x250)\n"
            "  -H, --handoffs N    handoffs measured per configuration (default 200)\n"
            "      --hold MS       hold time of each waiter that gets the lock (default 1)\n"
            "  -T, --time-cap S    seconds per configuration at most (default 30)\n"
            "      --no-pin        do not pin redis-server and the benchmark to CPUs\n",
            argv0);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {{"configs", required_argument, NULL, 'c'},
                                             {"handoffs", required_argument, NULL, 'H'},
                                             {"hold", required_argument, NULL, 'h'},
                                             {"time-cap", required_argument, NULL, 'T'},
                                             {"no-pin", no_argument, NULL, 'p'},
                                             {"help", no_argument, NULL, '?'},
                                             {NULL, 0, NULL, 0}};
    int procs[MAX_CONFIGS], waiters[MAX_CONFIGS], nc = 0, hold_ms = 1, pin = 1, opt, i;
    int failed = 0;
    int64_t h = 200;
    double cap_s = 30., rtt_us = 0.;
    result res[MAX_CONFIGS];
    bench_cpus cpus;
    redisContext *admin;
    test_redis r;

    while ((opt = getopt_long(argc, argv, "c:H:T:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': {
            char *p = optarg, *end;
            nc = 0;
            while (*p && nc < MAX_CONFIGS) {
                long pr = strtol(p, &end, 10), w;
                if (end == p || *end != 'x' || pr < 1 || pr > MAX_PROCS) {
                    fprintf(stderr, "bad configuration list '%s'\n", optarg);
                    return 2;
                }
                p = end + 1;
                w = strtol(p, &end, 10);
                if (end == p || w < pr || w > 100000 || (*end != ',' && *end != '\0')) {
                    fprintf(stderr, "bad configuration list '%s'\n", optarg);
                    return 2;
                }
                procs[nc] = (int)pr;
                waiters[nc++] = (int)w;
                p = *end == ',' ? end + 1 : end;
            }
            break;
        }
        case 'H':
            h = strtoll(optarg, NULL, 10);
            break;
        case 'h':
            hold_ms = atoi(optarg);
            break;
        case 'T':
            cap_s = strtod(optarg, NULL);
            break;
        case 'p':
            pin = 0;
            break;
        default:
            usage(argv[0]);
            return 2;
        }
    }
    if (h < 1 || h > 1000000 || hold_ms < 0 || !(cap_s > 0.)) {
        usage(argv[0]);
        return 2;
    }
    if (nc == 0) {
        static const int dp[] = {4, 1, 2, 8, 4}, dw[] = {1000, 1000, 1000, 1000, 250};
        for (nc = 0; nc < 5; nc++) {
            procs[nc] = dp[nc];
            waiters[nc] = dw[nc];
        }
    }
    for (i = 0; i < nc; i++)
        if (waiters[i] - procs[i] < h) {
            fprintf(stderr, "herd: %dx%d: fewer waiters than handoffs + processes\n", procs[i],
                    waiters[i]);
            return 2;
        }
    signal(SIGPIPE, SIG_IGN);
    if (bench_start_server(&r, NULL, pin, &cpus) != 0) {
        fprintf(stderr, "herd: could not start redis-server\n");
        return 1;
    }
    if ((admin = bench_connect(r.port)) == NULL) {
        test_redis_stop(&r);
        return 1;
    }
    {
        bench_rb rb;
        if (bench_ping_rtt(r.port, &rb) == 0)
            rtt_us = rb.p50_us;
    }
    for (i = 0; i < nc; i++) {
        fprintf(stderr, "herd: %d processes, %d waiters, %lld handoffs...\n", procs[i], waiters[i],
                (long long)h);
        if (run_config(&r, admin, &cpus, procs[i], waiters[i], h, hold_ms, cap_s, &res[i]) != 0)
            failed = 1;
    }
    redisFree(admin);
    test_redis_stop(&r);

    printf("### Herd (leash-bench-herd)\n\n");
    printf("| processes | waiters | handoffs | cmds sent/handoff | incl. inside scripts "
           "| lock-script cmds/handoff | lock cmds/handoff/process | acquire attempts/handoff "
           "| longest wait ms | handoff p50 µs | handoff max µs |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (i = 0; i < nc; i++) {
        const result *x = &res[i];
        if (!x->ok) {
            printf("| %d | %d | failed | | | | | | | | |\n", procs[i], waiters[i]);
            continue;
        }
        printf("| %d | %d | %lld | %.2f | %.2f | %.2f | **%.2f** | %.2f | %.1f | %.0f | %.0f |\n",
               x->procs, x->waiters, (long long)x->handoffs, x->sent_per, x->total_per, x->lock_per,
               x->per_proc, x->attempts_per, x->longest_wait_ms, x->handoff_p50_us,
               x->handoff_max_us);
    }
    printf("\nP processes, each one leash client with waiters/P handles on one lock, all "
           "waiting (LEASH_WAIT_FOREVER) behind a holder in the parent; each waiter that gets "
           "the lock holds it %d ms, releases, and leaves. Commands: INFO commandstats over "
           "the %lld handoffs, after every waiter made its first attempts and slept; sent = "
           "every command a client sent (EVALSHA, SUBSCRIBE, ...), incl. inside scripts adds "
           "the calls leash's Lua scripts make in the server (%s); lock-script cmds = "
           "EVALSHA/EVAL (acquire attempts + releases), attempts = acquire-script runs (the "
           "TIME each one runs). Longest wait: from the first release (or the leash_acquire() "
           "call, if later) to the acquire callback, among the waiters that got the lock. "
           "Handoff: release callback -> next acquire callback.\n",
           hold_ms, (long long)h, bench_script_inner_names());
    if (rtt_us > 0.)
        printf("Reference round trip (redis-benchmark -c 1 -P 1 PING, same run): p50 %.0f µs.\n",
               rtt_us);
    for (i = 0; i < nc; i++) {
        const result *x = &res[i];
        if (!x->ok)
            continue;
        printf("- %dx%d: %.2f s; set-up before the window: %lld lock cmds (%.2f per waiter); "
               "sub+unsub/handoff %.2f; leash wakeups %llu",
               x->procs, x->waiters, x->seconds, (long long)x->setup_lock_cmds,
               (double)x->setup_lock_cmds / (double)x->waiters, x->subs_per,
               (unsigned long long)x->wakeups);
        if (rtt_us > 0.)
            printf("; handoff p50 = %.1f round trips", x->handoff_p50_us / rtt_us);
        bench_print_steal(&x->steal);
        if (x->errors)
            printf("; **%d errors**", x->errors);
        printf("\n");
    }
    printf("\n");
    bench_print_cpus(&cpus);
    return failed ? 1 : 0;
}
