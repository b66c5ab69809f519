/* SPDX-License-Identifier: MIT */
/*
 * leash-bench-stats: what the counters cost. Acquire+release cycles per
 * second (try once, distinct keys, --inflight handles cycling as in
 * leash-bench-throughput) without anyone reading the stats, and with a
 * timer that reads them every millisecond: the client's leash_stats and
 * every handle's leash_lock_stats, as a metrics exporter would. The two
 * variants alternate, --rounds times each, in one process on one
 * redis-server, so that both see the same machine. Then the price of one
 * read, in a tight loop.
 *
 * The counting itself is always compiled in (it is a handful of
 * increments on paths that already do a Redis round trip); what a reader
 * could add is cache traffic on the loop's thread, which is what the
 * second variant shows.
 *
 * Output: a markdown table and notes. Exit 0 when everything ran.
 */
#define _GNU_SOURCE

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>
#include <leash/adapters/libev.h>
#include <leash/leash.h>

#include "common.h"
#include "redis_server.h"

#define MAX_ROUNDS 16

typedef struct run run;

typedef struct slot {
    run *run;
    leash_lock *lock;
} slot;

struct run {
    struct ev_loop *loop;
    leash_client *client;
    slot *slots;
    int n, active, draining, counting;
    int64_t cycles;
    ev_timer phase, reader;
    int64_t reads;
    int read_stats; /* 0: the timer only wakes the loop */
    uint64_t sink;  /* keeps the reads from being optimised away */
    int errors;
};

static void stop_slot(run *r) {
    if (--r->active == 0)
        ev_break(r->loop, EVBREAK_ALL);
}

static void on_acquired(leash_lock *l, int status, void *arg);

static void cycle(slot *s) {
    if (s->run->draining || leash_acquire(s->lock, 0, on_acquired, s) != LEASH_OK)
        stop_slot(s->run);
}

static void on_released(leash_lock *l, int status, void *arg) {
    slot *s = arg;

    (void)l;
    if (status != LEASH_OK) {
        s->run->errors++;
        stop_slot(s->run);
        return;
    }
    if (s->run->counting)
        s->run->cycles++;
    cycle(s);
}

static void on_acquired(leash_lock *l, int status, void *arg) {
    slot *s = arg;

    if (status != LEASH_OK || leash_release(l, on_released, s) != LEASH_OK) {
        s->run->errors++;
        stop_slot(s->run);
    }
}

static void on_read(struct ev_loop *loop, ev_timer *t, int revents) {
    run *r = t->data;
    leash_stats st;
    leash_lock_stats ls;
    int i;

    (void)loop;
    (void)revents;
    r->reads++;
    if (!r->read_stats)
        return;
    leash_client_stats(r->client, &st);
    r->sink += st.grants + st.held_now;
    for (i = 0; i < r->n; i++) {
        leash_lock_stats(r->slots[i].lock, &ls);
        r->sink += ls.grants;
    }
}

static void on_phase(struct ev_loop *loop, ev_timer *t, int revents) {
    run *r = t->data;

    (void)loop;
    (void)revents;
    if (!r->counting && !r->draining) {
        r->counting = 1; /* the warm-up is over */
        return;
    }
    r->counting = 0;
    r->draining = 1;
}

enum {
    V_PLAIN,
    V_TIMER,
    V_READ,
    V_COUNT
};

/* One window of `seconds` after a warm-up: cycles per second, or -1.
 * variant: V_PLAIN nothing else on the loop; V_TIMER a 1 ms timer that
 * does nothing (what waking the loop costs); V_READ the timer reads
 * every stats struct. */
static double run_once(int port, int n, double warmup_s, double seconds, int variant,
                       int64_t *reads) {
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    run r;
    int64_t t0, t1;
    int i;
    char name[32];

    memset(&r, 0, sizeof r);
    r.loop = loop;
    r.n = n;
    if ((r.client = bench_client_new(loop, port)) == NULL)
        return -1;
    r.slots = calloc((size_t)n, sizeof(*r.slots));
    for (i = 0; i < n; i++) {
        snprintf(name, sizeof name, "bench:stats:%d", i);
        r.slots[i].run = &r;
        r.slots[i].lock = leash_lock_new(r.client, name);
    }
    if (bench_wait_connected(loop, &r.client, 1, 5000) != 0)
        return -1;

    ev_timer_init(&r.phase, on_phase, warmup_s, seconds);
    r.phase.data = &r;
    ev_timer_start(loop, &r.phase);
    r.read_stats = variant == V_READ;
    if (variant != V_PLAIN) {
        ev_timer_init(&r.reader, on_read, 0.001, 0.001);
        r.reader.data = &r;
        ev_timer_start(loop, &r.reader);
    }
    r.active = n;
    for (i = 0; i < n; i++)
        cycle(&r.slots[i]);
    /* The window: from the warm-up's end to the drain. */
    while (!r.counting && r.active > 0)
        ev_run(loop, EVRUN_ONCE);
    t0 = bench_now_ns();
    while (r.counting && r.active > 0)
        ev_run(loop, EVRUN_ONCE);
    t1 = bench_now_ns();
    if (r.active > 0)
        ev_run(loop, 0);
    ev_timer_stop(loop, &r.phase);
    ev_timer_stop(loop, &r.reader);
    *reads = r.reads;
    leash_client_free(r.client);
    free(r.slots);
    ev_loop_destroy(loop);
    if (r.errors > 0 || t1 <= t0)
        return -1;
    return (double)r.cycles / ((double)(t1 - t0) / 1e9);
}

/* ns per leash_client_stats + leash_lock_stats pair, in a tight loop. */
static double read_cost_ns(void) {
    leash_options o;
    leash_client *c;
    leash_lock *l;
    leash_stats st;
    leash_lock_stats ls;
    volatile uint64_t sink = 0;
    int64_t t0;
    int i, n = 10000000;

    leash_options_init(&o);
    if (leash_client_new(&c, &o) != LEASH_OK)
        return -1;
    l = leash_lock_new(c, "bench:stats:read");
    t0 = bench_now_ns();
    for (i = 0; i < n; i++) {
        leash_client_stats(c, &st);
        leash_lock_stats(l, &ls);
        sink += st.acquires + ls.acquires;
    }
    t0 = bench_now_ns() - t0;
    leash_client_free(c);
    return sink == UINT64_MAX ? -1 : (double)t0 / n;
}

static double mean(const double *v, int n) {
    double s = 0;
    int i;

    for (i = 0; i < n; i++)
        s += v[i];
    return n > 0 ? s / n : 0;
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [options]\n"
            "  -i, --inflight N   handles cycling at once (default 64)\n"
            "  -s, --seconds S    measured window per run (default 3)\n"
            "  -r, --rounds N     runs of each variant, alternating (default 3, at most %d)\n"
            "      --no-pin       do not pin redis-server and the benchmark to CPUs\n",
            argv0, MAX_ROUNDS);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"inflight", required_argument, NULL, 'i'}, {"seconds", required_argument, NULL, 's'},
        {"rounds", required_argument, NULL, 'r'},   {"no-pin", no_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    int n = 64, rounds = 3, pin = 1, opt, i, v, failed = 0;
    double seconds = 3, cps[V_COUNT][MAX_ROUNDS], avg[V_COUNT];
    int64_t reads[V_COUNT][MAX_ROUNDS];
    test_redis r;
    bench_cpus cpus;

    while ((opt = getopt_long(argc, argv, "i:s:r:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'i':
            n = atoi(optarg);
            break;
        case 's':
            seconds = atof(optarg);
            break;
        case 'r':
            rounds = atoi(optarg);
            break;
        case 'p':
            pin = 0;
            break;
        default:
            usage(argv[0]);
            return opt == 'h' ? 0 : 2;
        }
    }
    if (n < 1 || seconds <= 0 || rounds < 1 || rounds > MAX_ROUNDS) {
        usage(argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (bench_start_server(&r, NULL, pin, &cpus) != 0)
        return 1;

    /* Round robin, so that a neighbour's load falls on every variant. */
    for (i = 0; i < rounds; i++) {
        fprintf(stderr, "stats: round %d of %d...\n", i + 1, rounds);
        for (v = 0; v < V_COUNT; v++) {
            cps[v][i] = run_once(r.port, n, 0.5, seconds, v, &reads[v][i]);
            if (cps[v][i] < 0)
                failed = 1;
        }
    }
    test_redis_stop(&r);
    for (v = 0; v < V_COUNT; v++)
        avg[v] = mean(cps[v], rounds);

    printf("## Counting and reading stats: acquire+release cycles/s, %d in flight\n\n", n);
    bench_print_cpus(&cpus);
    printf("\n| round | no timer | empty 1 ms timer | 1 ms timer reading the stats | wakeups "
           "(read) | read vs empty timer |\n");
    printf("|---:|---:|---:|---:|---:|---:|\n");
    for (i = 0; i < rounds; i++)
        printf("| %d | %.0f | %.0f | %.0f | %lld | %+.1f%% |\n", i + 1, cps[V_PLAIN][i],
               cps[V_TIMER][i], cps[V_READ][i], (long long)reads[V_READ][i],
               100. * (cps[V_READ][i] - cps[V_TIMER][i]) / cps[V_TIMER][i]);
    printf("| mean | %.0f | %.0f | %.0f | | %+.1f%% |\n", avg[V_PLAIN], avg[V_TIMER], avg[V_READ],
           100. * (avg[V_READ] - avg[V_TIMER]) / avg[V_TIMER]);
    printf("\nReading vs no timer at all: %+.1f%%; the empty timer alone: %+.1f%%.\n",
           100. * (avg[V_READ] - avg[V_PLAIN]) / avg[V_PLAIN],
           100. * (avg[V_TIMER] - avg[V_PLAIN]) / avg[V_PLAIN]);
    printf("\nOne read (leash_client_stats + leash_lock_stats, a memcpy each): %.1f ns.\n",
           read_cost_ns());
    printf("A reading reads the client and all %d handles: %d + 1 copies a millisecond.\n", n, n);
    return failed;
}
