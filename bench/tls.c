/* SPDX-License-Identifier: MIT */
/*
 * leash-bench-tls: TLS against plain TCP, on one redis-server in the same
 * run (it serves both: its plain port and its TLS port, with certificates
 * made by scripts/make-certs; the client verifies the server's).
 *
 * Four figures, each for a plain client and a TLS client of the same
 * options, in alternating rounds (the machine's speed drifts):
 *   - one acquire+release at a time: the cycle from the leash_acquire()
 *     call to the release callback, mean over --cycles cycles (target:
 *     TLS at most 1.2 x plain);
 *   - cycles/s with 1024 acquire+release in flight on distinct keys, over
 *     --seconds (target: TLS at least 0.7 x plain);
 *   - client CPU per cycle in that window (getrusage of this process);
 *   - reconnect + handshake: CLIENT KILL of the client's connections on
 *     the server, until the command connection is ready again (reconnect
 *     backoff 1 ms; TCP connect, the TLS handshake, AUTH-less handshake:
 *     TIME and SCRIPT LOADs), median of --kills.
 *
 * 100 000 held locks renewing over TLS: --held N holds N locks on a TLS
 * client for --held-seconds and reports the client CPU share and the
 * renew commands per second (leash-bench-renewal gives the plain figure).
 *
 * Output: a markdown table. Exit 0 when everything ran.
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
#include "redis_server.h"

#define MAX_ROUNDS 15
#define MAX_KILLS 200

typedef struct settings {
    int rounds, cycles, inflight, kills, held;
    double seconds, held_seconds;
} settings;

typedef struct run {
    struct ev_loop *loop;
    leash_client *c;
    leash_lock **locks;
    int n;
    int64_t cycles, want;
    int64_t started_ns, total_ns;
    int stop;
    int active; /* cycles going on */
} run;

static void on_released(leash_lock *l, int status, void *arg);

static void on_acquired(leash_lock *l, int status, void *arg) {
    run *r = arg;

    if (status != LEASH_OK || leash_release(l, on_released, r) != LEASH_OK) {
        fprintf(stderr, "leash-bench-tls: acquire: %s\n", leash_strerror(status));
        r->stop = 1;
        r->active--;
        ev_break(r->loop, EVBREAK_ALL);
    }
}

static void on_released(leash_lock *l, int status, void *arg) {
    run *r = arg;

    if (status != LEASH_OK) {
        fprintf(stderr, "leash-bench-tls: release: %s\n", leash_strerror(status));
        r->stop = 1;
    }
    r->cycles++;
    if (r->n == 1)
        r->total_ns += bench_now_ns() - r->started_ns;
    if (r->stop || (r->want > 0 && r->cycles >= r->want)) {
        r->active--;
        ev_break(r->loop, EVBREAK_ALL);
        return;
    }
    r->started_ns = bench_now_ns();
    if (leash_acquire(l, 0, on_acquired, r) != LEASH_OK) {
        r->stop = 1;
        r->active--;
        ev_break(r->loop, EVBREAK_ALL);
    }
}

static void on_stop(struct ev_loop *loop, ev_timer *t, int revents) {
    run *r = t->data;

    (void)revents;
    r->stop = 1;
    ev_break(loop, EVBREAK_ALL);
}

static void options(leash_options *o, const test_redis *srv, int tls) {
    leash_options_init(o);
    o->host = "127.0.0.1";
    o->port = tls ? srv->tls_port : srv->port;
    o->tls = tls;
    o->tls_ca_file = test_tls_file(0, "ca.pem");
    o->reconnect_min_ms = 1;
    o->reconnect_max_ms = 100;
    o->lease_ms = 30000;
}

static leash_client *client(struct ev_loop *loop, const test_redis *srv, int tls) {
    leash_options o;
    leash_client *c = NULL;

    options(&o, srv, tls);
    if (leash_client_new(&c, &o) != LEASH_OK || leash_libev_attach(loop, c) != LEASH_OK) {
        fprintf(stderr, "leash-bench-tls: no client\n");
        exit(1);
    }
    bench_wait_connected(loop, &c, 1, 5000);
    return c;
}

static int make_locks(run *r, int n, const char *prefix) {
    char name[64];
    int i;

    r->locks = calloc((size_t)n, sizeof(*r->locks));
    r->n = n;
    for (i = 0; r->locks != NULL && i < n; i++) {
        snprintf(name, sizeof name, "%s-%d", prefix, i);
        if ((r->locks[i] = leash_lock_new(r->c, name)) == NULL)
            return -1;
    }
    return r->locks != NULL ? 0 : -1;
}

static void free_locks(run *r) {
    int i;

    for (i = 0; i < r->n; i++)
        leash_lock_free(r->locks[i]);
    free(r->locks);
    r->locks = NULL;
}

/* Mean µs of one cycle at a time over `cycles`. */
static double one_at_a_time(struct ev_loop *loop, leash_client *c, int cycles, int tls) {
    run r = {loop, c, NULL, 0, 0, cycles, 0, 0, 0, 1};

    if (make_locks(&r, 1, tls ? "tls-one" : "plain-one") != 0)
        exit(1);
    r.started_ns = bench_now_ns();
    if (leash_acquire(r.locks[0], 0, on_acquired, &r) != LEASH_OK)
        exit(1);
    while (r.active > 0)
        ev_run(loop, EVRUN_ONCE);
    free_locks(&r);
    return r.stop ? -1 : r.total_ns / 1e3 / (double)r.cycles;
}

/* Cycles/s and client CPU µs per cycle with `inflight` in flight. */
static double in_flight(struct ev_loop *loop, leash_client *c, int inflight, double seconds,
                        int tls, double *cpu_us) {
    run r = {loop, c, NULL, 0, 0, 0, 0, 0, 0, 0};
    ev_timer stop;
    int64_t t0, cpu0, counted;
    int i;

    if (make_locks(&r, inflight, tls ? "tls-many" : "plain-many") != 0)
        exit(1);
    ev_timer_init(&stop, on_stop, seconds, 0);
    stop.data = &r;
    ev_timer_start(loop, &stop);
    t0 = bench_now_ns();
    cpu0 = bench_cpu_ns();
    for (i = 0; i < inflight; i++, r.active++)
        if (leash_acquire(r.locks[i], 0, on_acquired, &r) != LEASH_OK)
            exit(1);
    while (!r.stop)
        ev_run(loop, EVRUN_ONCE);
    counted = r.cycles;
    *cpu_us = (bench_cpu_ns() - cpu0) / 1e3 / (double)counted;
    t0 = bench_now_ns() - t0;
    ev_timer_stop(loop, &stop);
    /* What is still in flight completes (and starts no more) before the
     * locks go. */
    while (r.active > 0)
        ev_run(loop, EVRUN_ONCE);
    free_locks(&r);
    return (double)counted / (t0 / 1e9);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ms from CLIENT KILL to ready again, median of `kills`. */
static double reconnect_ms(struct ev_loop *loop, leash_client *c, test_redis *srv, int kills) {
    double v[MAX_KILLS];
    int i, n = 0;

    for (i = 0; i < kills && i < MAX_KILLS; i++) {
        int64_t t0 = bench_now_ns(), deadline = t0 + 5000000000LL;
        int seen_down = 0;
        redisReply *reply = test_redis_cmd(srv, "CLIENT KILL TYPE normal SKIPME yes");

        if (reply != NULL)
            freeReplyObject(reply);
        while (bench_now_ns() < deadline) {
            ev_run(loop, EVRUN_ONCE);
            if (!leash_client_connected(c))
                seen_down = 1;
            else if (seen_down)
                break;
        }
        if (seen_down && leash_client_connected(c))
            v[n++] = (bench_now_ns() - t0) / 1e6;
        test_sleep_ms(5);
    }
    return n ? median(v, n) : -1;
}

static void on_held(leash_lock *l, int status, void *arg) {
    int *left = arg;

    (void)l;
    if (status != LEASH_OK)
        fprintf(stderr, "leash-bench-tls: held acquire: %s\n", leash_strerror(status));
    --*left;
}

/* N held locks on a TLS client for `seconds`: client CPU share, renew
 * commands per second (INFO commandstats). */
static void held_locks(struct ev_loop *loop, test_redis *srv, int n, double seconds) {
    leash_client *c = client(loop, srv, 1);
    run r = {loop, c, NULL, 0, 0, 0, 0, 0, 0, 0};
    ev_timer stop;
    int left = n, i;
    int64_t t0, cpu0;
    long long calls0;
    leash_stats st;

    if (make_locks(&r, n, "held") != 0)
        exit(1);
    for (i = 0; i < n; i++)
        if (leash_acquire(r.locks[i], 0, on_held, &left) != LEASH_OK)
            exit(1);
    while (left > 0)
        ev_run(loop, EVRUN_ONCE);
    leash_client_stats(c, &st);
    calls0 = (long long)st.renew_commands;
    ev_timer_init(&stop, on_stop, seconds, 0);
    stop.data = &r;
    ev_timer_start(loop, &stop);
    t0 = bench_now_ns();
    cpu0 = bench_cpu_ns();
    ev_run(loop, 0);
    cpu0 = bench_cpu_ns() - cpu0;
    t0 = bench_now_ns() - t0;
    leash_client_stats(c, &st);
    printf("| %d held locks renewing over TLS (lease 30 s, renewed every 10 s), %.0f s | client "
           "CPU %.2f %% of one core, %.1f renew commands/s",
           n, seconds, 100.0 * (double)cpu0 / (double)t0,
           ((long long)st.renew_commands - calls0) / seconds);
    printf(", %llu renewals, %llu failed; every lock still held: %s |\n",
           (unsigned long long)st.renewals, (unsigned long long)st.renewals_failed,
           st.held_now == (uint64_t)n ? "yes" : "NO");
    free_locks(&r);
    leash_client_free(c);
}

int main(int argc, char **argv) {
    settings s = {5, 2000, 1024, 30, 0, 2.0, 35.0};
    double one[2][MAX_ROUNDS], many[2][MAX_ROUNDS], cpu[2][MAX_ROUNDS], rec[2];
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    test_redis_config cfg = {0};
    test_redis srv;
    bench_cpus cpus;
    int opt, round, tls;

    while ((opt = getopt(argc, argv, "r:c:i:s:k:H:S:")) != -1) {
        switch (opt) {
        case 'r':
            s.rounds = atoi(optarg);
            break;
        case 'c':
            s.cycles = atoi(optarg);
            break;
        case 'i':
            s.inflight = atoi(optarg);
            break;
        case 's':
            s.seconds = atof(optarg);
            break;
        case 'k':
            s.kills = atoi(optarg);
            break;
        case 'H':
            s.held = atoi(optarg);
            break;
        case 'S':
            s.held_seconds = atof(optarg);
            break;
        default:
            fprintf(stderr, "usage: leash-bench-tls [-r rounds] [-c cycles] [-i inflight] "
                            "[-s seconds] [-k kills] [-H held -S seconds]\n");
            return 2;
        }
    }
    if (s.rounds < 1 || s.rounds > MAX_ROUNDS || s.cycles < 1 || s.inflight < 1) {
        fprintf(stderr, "leash-bench-tls: rounds 1..%d, cycles and inflight >= 1\n", MAX_ROUNDS);
        return 2;
    }
    cfg.tls_dir = test_tls_certs();
    if (loop == NULL || cfg.tls_dir == NULL || bench_start_server(&srv, &cfg, 1, &cpus) != 0)
        return 1;
    printf("### TLS against plain TCP (leash-bench-tls)\n\n");
    bench_print_cpus(&cpus);
    if (s.held > 0) {
        printf("| what | figure |\n|---|---|\n");
        held_locks(loop, &srv, s.held, s.held_seconds);
        test_redis_stop(&srv);
        return 0;
    }
    for (round = 0; round < s.rounds; round++) {
        for (tls = 0; tls < 2; tls++) {
            /* Plain first in even rounds, TLS first in odd ones. */
            int mode = (round % 2) ? !tls : tls;
            leash_client *c = client(loop, &srv, mode);
            one[mode][round] = one_at_a_time(loop, c, s.cycles, mode);
            many[mode][round] = in_flight(loop, c, s.inflight, s.seconds, mode, &cpu[mode][round]);
            leash_client_free(c);
            bench_flushall(&srv);
        }
        fprintf(stderr, "round %d: one %.1f / %.1f us, many %.0f / %.0f per s\n", round + 1,
                one[0][round], one[1][round], many[0][round], many[1][round]);
    }
    for (tls = 0; tls < 2; tls++) {
        leash_client *c = client(loop, &srv, tls);
        rec[tls] = reconnect_ms(loop, c, &srv, s.kills);
        leash_client_free(c);
    }
    {
        double r1[MAX_ROUNDS], r2[MAX_ROUNDS], r3[MAX_ROUNDS];
        for (round = 0; round < s.rounds; round++) {
            r1[round] = one[1][round] / one[0][round];
            r2[round] = many[1][round] / many[0][round];
            r3[round] = cpu[1][round] / cpu[0][round];
        }
        printf("\n| what | plain TCP | TLS | TLS / plain (median of %d rounds) | target |\n",
               s.rounds);
        printf("|---|---|---|---|---|\n");
        printf("| one acquire+release at a time, µs per cycle | %.1f | %.1f | %.2f | at most "
               "1.2 |\n",
               median(one[0], s.rounds), median(one[1], s.rounds), median(r1, s.rounds));
        printf("| %d acquire+release in flight, cycles/s | %.0f | %.0f | %.2f | at least 0.7 |\n",
               s.inflight, median(many[0], s.rounds), median(many[1], s.rounds),
               median(r2, s.rounds));
        printf("| client CPU per cycle at %d in flight, µs | %.2f | %.2f | %.2f | - |\n",
               s.inflight, median(cpu[0], s.rounds), median(cpu[1], s.rounds),
               median(r3, s.rounds));
        printf("| reconnect + handshake (CLIENT KILL -> ready), ms, median of %d | %.2f | %.2f | "
               "%.2f | - |\n",
               s.kills, rec[0], rec[1], rec[1] / rec[0]);
    }
    test_redis_stop(&srv);
    ev_loop_destroy(loop);
    return 0;
}
