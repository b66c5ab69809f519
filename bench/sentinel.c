/* SPDX-License-Identifier: MIT */
/*
 * leash-bench-sentinel: what going through Redis Sentinel costs (issue 21).
 *
 * In one run: a redis-server of its own (bench_start_server: pinned to the
 * server's CPU, the program to the other), and a master with two replicas
 * and three sentinels (tests/support/redis_sentinel.c, down-after 2000 ms,
 * every process started from the program's CPU; --no-pin: the lone server
 * is not pinned either, which makes the first two rows alike). Three targets, in rounds
 * that take them in turn so that drift hits all three alike:
 *   one server      LEASH_TOPOLOGY_SINGLE at the lone redis-server;
 *   master direct   LEASH_TOPOLOGY_SINGLE at the master the sentinels name
 *                   (the same server as the next row: what the route costs);
 *   via Sentinel    LEASH_TOPOLOGY_SENTINEL, the sentinels as nodes.
 * Uncontended cycle: one handle per target, leash_acquire (try once) ->
 * callback -> leash_release -> callback, the next from there, timed from
 * the acquire call to the release callback; blocks of 50 cycles take the
 * targets in turn. Handoff: two clients, A holds and B waits
 * (LEASH_WAIT_FOREVER, parked on its subscription); timed from A's
 * leash_release call to B's grant callback.
 *
 * Failover (--failovers N, default 3): a client through Sentinel; the
 * master SIGKILLed; from the kill, the program asks a sentinel every 5 ms
 * which master it names (Sentinel's detection and promotion: t_named) while
 * the client tries a fresh lock once after another (a try that waits in the
 * client's queue goes out when it reaches the new master: t_grant). The
 * table gives both, and leash's part, t_grant - t_named. The old master is
 * then started again (empty), and the next failover waits until the
 * sentinels made it a replica.
 *
 * Output: markdown tables. Exit 0 when everything ran.
 */
#define _GNU_SOURCE

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>
#include <hiredis/hiredis.h>
#include <leash/adapters/libev.h>
#include <leash/leash.h>

#include "common.h"
#include "redis_sentinel.h"
#include "redis_server.h"

#define MAX_SAMPLES 20000
#define MAX_FAILOVERS 10

enum {
    T_SINGLE,
    T_DIRECT,
    T_SENTINEL,
    T_COUNT
};
static const char *const target_names[T_COUNT] = {"one server", "master direct", "via Sentinel"};

typedef struct bench {
    struct ev_loop *loop;
    test_redis single;
    test_sentinel ts;
    const char *nodes[TEST_SENTINEL_MAX_SENTINELS];
    char text[TEST_SENTINEL_MAX_SENTINELS][32];
    int done, status;
    int64_t t0, t1;
} bench;

static void options(bench *b, int target, leash_options *o) {
    leash_options_init(o);
    o->key_prefix = "bench-sentinel:";
    o->command_timeout_ms = 1000;
    o->connect_timeout_ms = 1000;
    o->reconnect_min_ms = 10;
    o->reconnect_max_ms = 200;
    o->host = "127.0.0.1";
    if (target == T_SINGLE) {
        o->port = b->single.port;
    } else if (target == T_DIRECT) {
        o->port = b->ts.data[test_sentinel_master(&b->ts)].port;
    } else {
        o->topology = LEASH_TOPOLOGY_SENTINEL;
        o->nodes = b->nodes;
        o->nodes_count = b->ts.nsentinels;
        o->sentinel_master = TEST_SENTINEL_MASTER;
    }
}

static leash_client *client(bench *b, int target) {
    leash_options o;
    leash_client *c = NULL;
    int64_t until = bench_now_ns() + 5000000000LL;

    options(b, target, &o);
    if (leash_client_new(&c, &o) != LEASH_OK || leash_libev_attach(b->loop, c) != LEASH_OK) {
        fprintf(stderr, "no client for %s\n", target_names[target]);
        exit(1);
    }
    while (!leash_client_connected(c) && bench_now_ns() < until)
        ev_run(b->loop, EVRUN_ONCE);
    return c;
}

static void on_done(leash_lock *l, int status, void *arg) {
    bench *b = arg;
    (void)l;
    b->status = status;
    b->done = 1;
    b->t1 = bench_now_ns();
}

/* Runs the loop until the callback of the request just made. */
static int wait_done(bench *b) {
    while (!b->done)
        ev_run(b->loop, EVRUN_ONCE);
    b->done = 0;
    return b->status;
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, c = *(const int64_t *)y;
    return (a > c) - (a < c);
}

static double pct_us(int64_t *v, int n, double p) {
    qsort(v, (size_t)n, sizeof v[0], cmp_i64);
    return n == 0 ? 0 : (double)v[(int)((n - 1) * p)] / 1000.;
}

/* n uncontended cycles on every target into out[target] (ns each), in
 * blocks of BLOCK taking the targets in turn: drift hits all alike. */
#define BLOCK 50
static void cycles(bench *b, int n, int64_t (*out)[MAX_SAMPLES], int at) {
    leash_client *c[T_COUNT];
    leash_lock *l[T_COUNT];
    int t, i, k;

    for (t = 0; t < T_COUNT; t++) {
        c[t] = client(b, t);
        l[t] = leash_lock_new(c[t], "cycle");
    }
    for (k = 0; k < n; k += BLOCK) {
        for (t = 0; t < T_COUNT; t++) {
            for (i = k; i < n && i < k + BLOCK; i++) {
                int64_t t0 = bench_now_ns();
                if (leash_acquire(l[t], 0, on_done, b) != LEASH_OK || wait_done(b) != LEASH_OK ||
                    leash_release(l[t], on_done, b) != LEASH_OK || wait_done(b) != LEASH_OK) {
                    fprintf(stderr, "a cycle failed on %s\n", target_names[t]);
                    exit(1);
                }
                out[t][at + i] = b->t1 - t0;
            }
        }
    }
    for (t = 0; t < T_COUNT; t++) {
        leash_lock_free(l[t]);
        leash_client_free(c[t]);
    }
}

/* n handoffs from one client to another on target into out (ns each). */
static void handoffs(bench *b, int target, int n, int64_t *out) {
    leash_client *ca = client(b, target), *cb = client(b, target);
    leash_lock *a = leash_lock_new(ca, "handoff"), *w = leash_lock_new(cb, "handoff");
    leash_lock *holder = a, *waiter = w, *t;
    bench hb; /* the waiter's callback */
    int i;

    memset(&hb, 0, sizeof hb);
    hb.loop = b->loop;
    if (leash_acquire(holder, 0, on_done, b) != LEASH_OK || wait_done(b) != LEASH_OK)
        exit(1);
    for (i = 0; i < n; i++) {
        int64_t t0, until = bench_now_ns() + 20000000; /* 20 ms: parked on its subscription */
        if (leash_acquire(waiter, LEASH_WAIT_FOREVER, on_done, &hb) != LEASH_OK)
            exit(1);
        while (bench_now_ns() < until)
            ev_run(b->loop, EVRUN_NOWAIT);
        t0 = bench_now_ns();
        if (leash_release(holder, NULL, NULL) != LEASH_OK || wait_done(&hb) != LEASH_OK) {
            fprintf(stderr, "a handoff failed on %s\n", target_names[target]);
            exit(1);
        }
        out[i] = hb.t1 - t0;
        t = holder, holder = waiter, waiter = t;
    }
    (void)leash_release(holder, NULL, NULL);
    ev_run(b->loop, EVRUN_NOWAIT);
    leash_lock_free(a);
    leash_lock_free(w);
    leash_client_free(ca);
    leash_client_free(cb);
}

typedef struct failover {
    double named_ms, granted_ms;
} failover;

/* One failover: kill, then poll the sentinels and try a lock. */
static int one_failover(bench *b, int k, failover *f) {
    leash_client *c = client(b, T_SENTINEL);
    char name[32];
    leash_lock *l;
    int m = test_sentinel_master(&b->ts), pending = 0, granted = 0;
    int64_t killed, named = 0, next_poll = 0, until;

    snprintf(name, sizeof name, "failover-%d", k);
    l = leash_lock_new(c, name);
    if (m < 0 || test_redis_kill(&b->ts.data[m]) != 0)
        return -1;
    killed = bench_now_ns();
    until = killed + 30000000000LL;
    while ((!named || !granted) && bench_now_ns() < until) {
        if (!pending && !granted) {
            if (leash_acquire(l, 0, on_done, b) == LEASH_OK)
                pending = 1;
        }
        ev_run(b->loop, EVRUN_NOWAIT);
        if (b->done) {
            b->done = 0;
            pending = 0;
            if (b->status == LEASH_OK) {
                granted = 1;
                f->granted_ms = (double)(b->t1 - killed) / 1e6;
            }
        }
        if (!named && bench_now_ns() >= next_poll) {
            int n = test_sentinel_new_master(&b->ts, m);
            if (n >= 0) {
                named = bench_now_ns();
                f->named_ms = (double)(named - killed) / 1e6;
            }
            next_poll = bench_now_ns() + 5000000;
        }
        test_sleep_ms(1);
    }
    if (granted)
        (void)leash_release(l, NULL, NULL);
    ev_run(b->loop, EVRUN_NOWAIT);
    leash_lock_free(l);
    leash_client_free(c);
    /* The old master back, empty, made a replica by the sentinels. */
    if (test_redis_restart(&b->ts.data[m]) != 0 ||
        test_sentinel_wait_replica(&b->ts, m, 30000) != 0)
        return -1;
    return named && granted ? 0 : -1;
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {{"cycles", required_argument, NULL, 'n'},
                                             {"rounds", required_argument, NULL, 'R'},
                                             {"failovers", required_argument, NULL, 'f'},
                                             {"no-pin", no_argument, NULL, 'p'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    static int64_t cyc[T_COUNT][MAX_SAMPLES], hand[T_COUNT][MAX_SAMPLES];
    int n = 1000, rounds = 5, nfail = 3, pin = 1, opt, r, t, i, ncyc = 0, nhand = 0;
    failover fo[MAX_FAILOVERS];
    bench_cpus cpus;
    bench b;

    while ((opt = getopt_long(argc, argv, "n:R:f:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            n = atoi(optarg);
            break;
        case 'R':
            rounds = atoi(optarg);
            break;
        case 'f':
            nfail = atoi(optarg);
            break;
        case 'p':
            pin = 0;
            break;
        default:
            fprintf(stderr,
                    "usage: %s [--cycles N] [--rounds R] [--failovers F] [--no-pin]\n"
                    "  N cycles and N / 10 handoffs per target and round; F (0..%d) failovers\n",
                    argv[0], MAX_FAILOVERS);
            return 2;
        }
    }
    if (n < 10 || rounds < 1 || (long)n * rounds > MAX_SAMPLES || nfail < 0 ||
        nfail > MAX_FAILOVERS) {
        fprintf(stderr, "%s: bad --cycles, --rounds or --failovers\n", argv[0]);
        return 2;
    }
    memset(&b, 0, sizeof b);
    b.loop = ev_loop_new(EVFLAG_AUTO);
    if (test_sentinel_start(&b.ts, NULL) != 0 ||
        bench_start_server(&b.single, NULL, pin, &cpus) != 0)
        return 1;
    for (i = 0; i < b.ts.nsentinels; i++)
        b.nodes[i] = test_sentinel_addr(&b.ts, i, b.text[i], sizeof b.text[i]);

    for (r = 0; r < rounds; r++) {
        cycles(&b, n, cyc, ncyc);
        for (t = 0; t < T_COUNT; t++)
            handoffs(&b, t, n / 10, &hand[t][nhand]);
        ncyc += n;
        nhand += n / 10;
    }
    printf("leash-bench-sentinel: %d rounds of %d cycles and %d handoffs per target\n", rounds, n,
           n / 10);
    bench_print_cpus(&cpus);
    printf("(the master, its replicas and sentinels are not pinned)\n\n");
    printf("| target | cycle p50 us | cycle p99 us | handoff p50 us | handoff p99 us |\n");
    printf("|---|---|---|---|---|\n");
    {
        double c50[T_COUNT], h50[T_COUNT];
        for (t = 0; t < T_COUNT; t++) {
            double c99, h99;
            c50[t] = pct_us(cyc[t], ncyc, 0.5);
            c99 = pct_us(cyc[t], ncyc, 0.99);
            h50[t] = pct_us(hand[t], nhand, 0.5);
            h99 = pct_us(hand[t], nhand, 0.99);
            printf("| %s | %.1f | %.1f | %.1f | %.1f |\n", target_names[t], c50[t], c99, h50[t],
                   h99);
        }
        printf("\nvia Sentinel / master direct: cycle p50 %.3f x, handoff p50 %.3f x "
               "(target 1.05 x); via Sentinel / one server: %.3f x, %.3f x\n",
               c50[T_SENTINEL] / c50[T_DIRECT], h50[T_SENTINEL] / h50[T_DIRECT],
               c50[T_SENTINEL] / c50[T_SINGLE], h50[T_SENTINEL] / h50[T_SINGLE]);
    }

    i = 0;
    if (nfail > 0) {
        printf("\n| failover | sentinels name the new master, ms after the kill | first grant "
               "there, ms | leash's part, ms |\n|---|---|---|---|\n");
        for (i = 0; i < nfail; i++) {
            if (one_failover(&b, i, &fo[i]) != 0) {
                fprintf(stderr, "failover %d did not complete\n", i + 1);
                break;
            }
            printf("| %d | %.0f | %.0f | %.0f |\n", i + 1, fo[i].named_ms, fo[i].granted_ms,
                   fo[i].granted_ms - fo[i].named_ms);
            fflush(stdout);
        }
        printf("\n(down-after-milliseconds 2000; a sentinel polled every 5 ms; the client tries "
               "a lock once after another)\n");
    }
    test_sentinel_stop(&b.ts);
    test_redis_stop(&b.single);
    ev_loop_destroy(b.loop);
    return i < nfail ? 1 : 0;
}
