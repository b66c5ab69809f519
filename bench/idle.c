/*
 * leash-bench-idle: latency of one acquire+release at a time.
 *
 * One client, one lock handle, one cycle at a time: leash_acquire(try once)
 * -> callback -> leash_release() -> callback, the next cycle starting from
 * the release callback. A cycle is timed from the leash_acquire() call to
 * the release callback (CLOCK_MONOTONIC).
 *
 * The reference is two sequential Redis round trips of the same work:
 * redis-benchmark -c 1 -P 1 calling leash's own acquire script by EVALSHA on
 * fresh keys (the grant path) and its release script on keys that hold a
 * lock of the token (the full release path, GET and DEL; the keys are made
 * beforehand, and INFO commandstats says how many calls took that path),
 * with the arguments common.c writes as leash does. Its mean latency per
 * call, acquire + release, is what a cycle would cost with no library at
 * all.
 *
 * The machine is shared and its speed drifts, so the measurement runs in
 * --rounds rounds, each one reference and one leash run back to back; the
 * table gives every round's ratio and the median.
 *
 * Output: one markdown table and notes. Exit 0 when everything ran.
 */
#define _GNU_SOURCE

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>
#include <hiredis/hiredis.h>
#include <leash/adapters/libev.h>
#include <leash/leash.h>

#include "common.h"
#include "redis_server.h"

#define MAX_ROUNDS 31
#define RB_TOKEN "1d1e0123456789abcdef0123456789ab"

typedef struct round_result {
    int ok;
    /* leash */
    int64_t cycles;
    double mean_us, p50_us, p99_us, max_us, client_cpu_us;
    /* reference */
    int ref_ok;
    bench_rb acq, rel;
    double full_releases, grants;
    bench_steal steal;
    char error[128];
} round_result;

/* ---- reference ---- */

static int run_reference(test_redis *r, redisContext *admin, const bench_scripts *sc, long requests,
                         int round, round_result *res) {
    char n[24], ks[24], prefix[48], key[64], akey[64];
    long keyspace = requests * 50;
    bench_cmdstats s0, s1, s2, d;
    bench_script_runs runs;
    const char *acq_opts[] = {"-c", "1", "-P", "1", "-n", n, "-r", "2000000000", NULL};
    const char *rel_opts[] = {"-c", "1", "-P", "1", "-n", n, "-r", ks, NULL};
    bench_call acq, rel;

    snprintf(n, sizeof n, "%ld", requests);
    snprintf(ks, sizeof ks, "%ld", keyspace);
    /* Fresh key names per round: the last round's releases emptied its
     * keyspace, and redis-benchmark's random seed (time and pid) can repeat
     * an earlier round's keys. */
    snprintf(akey, sizeof akey, "bench:rb:acq%d:__rand_int__", round);
    snprintf(prefix, sizeof prefix, "bench:rb:rel%d:", round);
    snprintf(key, sizeof key, "%s__rand_int__", prefix);
    if (bench_call_acquire(&acq, sc, akey, RB_TOKEN, 30000) != 0 ||
        bench_call_release(&rel, sc, key, RB_TOKEN, "bench:rb:released") != 0)
        return -1;
    if (bench_populate_holds(admin, prefix, keyspace, RB_TOKEN, 600000) != 0)
        return -1;
    if (bench_cmdstats_read(admin, &s0) != 0 ||
        bench_redis_benchmark_call(r->port, 60., acq_opts, &acq, &res->acq) != 0 ||
        bench_cmdstats_read(admin, &s1) != 0 ||
        bench_redis_benchmark_call(r->port, 60., rel_opts, &rel, &res->rel) != 0 ||
        bench_cmdstats_read(admin, &s2) != 0)
        return -1;
    bench_cmdstats_delta(&s0, &s1, &d);
    bench_script_runs_of(&d, &runs);
    res->grants = runs.scripts > 0 ? (double)runs.grants / (double)runs.scripts : 0.;
    bench_cmdstats_delta(&s1, &s2, &d);
    bench_script_runs_of(&d, &runs);
    res->full_releases = runs.scripts > 0 ? (double)runs.deletes / (double)runs.scripts : 0.;
    res->ref_ok = 1;
    return 0;
}

/* ---- leash, one cycle at a time ---- */

typedef struct idle_run {
    struct ev_loop *loop;
    leash_lock *lock;
    ev_timer guard;
    int64_t started;
    int64_t *lat;
    int64_t done, want;
    int failed;
    char error[128];
} idle_run;

static void cycle_start(idle_run *ir);

static void fail(idle_run *ir, const char *what, int status) {
    if (!ir->failed)
        snprintf(ir->error, sizeof ir->error, "%s: %s", what, leash_status_name(status));
    ir->failed = 1;
    ev_break(ir->loop, EVBREAK_ALL);
}

static void on_released(leash_lock *l, int status, void *arg) {
    idle_run *ir = arg;

    (void)l;
    if (status != LEASH_OK) {
        fail(ir, "release", status);
        return;
    }
    ir->lat[ir->done++] = bench_now_ns() - ir->started;
    if (ir->done == ir->want)
        ev_break(ir->loop, EVBREAK_ALL);
    else
        cycle_start(ir);
}

static void on_acquired(leash_lock *l, int status, void *arg) {
    idle_run *ir = arg;
    int rc;

    if (status != LEASH_OK) {
        fail(ir, "acquire", status);
        return;
    }
    if ((rc = leash_release(l, on_released, ir)) != LEASH_OK)
        fail(ir, "leash_release", rc);
}

static void cycle_start(idle_run *ir) {
    int rc;

    ir->started = bench_now_ns();
    if ((rc = leash_acquire(ir->lock, 0, on_acquired, ir)) != LEASH_OK)
        fail(ir, "leash_acquire", rc);
}

static void on_guard(struct ev_loop *loop, ev_timer *w, int revents) {
    idle_run *ir = (idle_run *)((char *)w - offsetof(idle_run, guard));

    (void)loop;
    (void)revents;
    if (!ir->failed)
        snprintf(ir->error, sizeof ir->error, "time cap reached");
    ir->failed = 1;
    ev_break(ir->loop, EVBREAK_ALL);
}

static int run_leash(int port, int64_t cycles, round_result *res) {
    idle_run ir;
    leash_client *client = NULL;
    int64_t cpu0, sum = 0, i;
    int rc = -1;

    memset(&ir, 0, sizeof ir);
    ir.want = cycles;
    ir.lat = calloc((size_t)cycles, sizeof(*ir.lat));
    ir.loop = ev_loop_new(EVFLAG_AUTO);
    if (ir.lat == NULL || ir.loop == NULL || (client = bench_client_new(ir.loop, port)) == NULL ||
        (ir.lock = leash_lock_new(client, "bench:idle")) == NULL) {
        snprintf(res->error, sizeof res->error, "set-up failed");
        goto out;
    }
    if (bench_wait_connected(ir.loop, &client, 1, 5000) != 0) {
        snprintf(res->error, sizeof res->error, "the client did not connect in 5 s");
        goto out;
    }
    /* A few cycles first: the first ones pay for cold caches. */
    ir.want = cycles < 50 ? cycles : 50;
    cycle_start(&ir);
    ev_run(ir.loop, 0);
    ir.done = 0;
    ir.want = cycles;
    ev_timer_init(&ir.guard, on_guard, 60., 0.);
    ev_timer_start(ir.loop, &ir.guard);
    cpu0 = bench_cpu_ns();
    if (!ir.failed) {
        cycle_start(&ir);
        ev_run(ir.loop, 0);
    }
    ev_timer_stop(ir.loop, &ir.guard);
    if (ir.failed) {
        snprintf(res->error, sizeof res->error, "%s", ir.error);
        goto out;
    }
    res->client_cpu_us = (double)(bench_cpu_ns() - cpu0) / 1e3 / (double)cycles;
    for (i = 0; i < cycles; i++)
        sum += ir.lat[i];
    qsort(ir.lat, (size_t)cycles, sizeof(*ir.lat), bench_cmp_i64);
    res->cycles = cycles;
    res->mean_us = (double)sum / (double)cycles / 1e3;
    res->p50_us = (double)bench_pct(ir.lat, cycles, 0.50) / 1e3;
    res->p99_us = (double)bench_pct(ir.lat, cycles, 0.99) / 1e3;
    res->max_us = (double)ir.lat[cycles - 1] / 1e3;
    res->ok = 1;
    rc = 0;
out:
    if (client != NULL)
        leash_client_free(client);
    if (ir.loop != NULL) {
        ev_run(ir.loop, EVRUN_NOWAIT);
        ev_loop_destroy(ir.loop);
    }
    free(ir.lat);
    return rc;
}

/* ---- output ---- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double ref_us(const round_result *x) {
    return x->acq.avg_us + x->rel.avg_us;
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [options]\n"
            "  -n, --cycles N       leash cycles per round (default 1000)\n"
            "  -R, --rounds N       rounds of reference + leash (default 15)\n"
            "      --rb-requests N  redis-benchmark requests per script per round\n"
            "                       (default 1000)\n"
            "      --no-reference   leash only (for profiling)\n"
            "      --no-pin         do not pin redis-server and the benchmark to CPUs\n",
            argv0);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {{"cycles", required_argument, NULL, 'n'},
                                             {"rounds", required_argument, NULL, 'R'},
                                             {"rb-requests", required_argument, NULL, 'q'},
                                             {"no-pin", no_argument, NULL, 'p'},
                                             {"no-reference", no_argument, NULL, 'r'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int rounds = 15, pin = 1, want_rb = 1, opt, i, failed = 0, nratios = 0, have_rb;
    long cycles = 1000, rb_requests = 1000;
    double ratios[MAX_ROUNDS], ratios50[MAX_ROUNDS];
    bench_scripts sc;
    round_result res[MAX_ROUNDS];
    bench_cpus cpus;
    redisContext *admin;
    test_redis r;

    while ((opt = getopt_long(argc, argv, "n:R:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            cycles = strtol(optarg, NULL, 10);
            break;
        case 'R':
            rounds = atoi(optarg);
            break;
        case 'q':
            rb_requests = strtol(optarg, NULL, 10);
            break;
        case 'p':
            pin = 0;
            break;
        case 'r':
            want_rb = 0;
            break;
        default:
            usage(argv[0]);
            return 2;
        }
    }
    if (cycles < 100 || cycles > 10000000 || rounds < 1 || rounds > MAX_ROUNDS ||
        rb_requests < 100 || rb_requests > 1000000) {
        usage(argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (bench_start_with_scripts("idle", &r, pin, &cpus, &admin, &sc) != 0)
        return 1;
    have_rb = want_rb && bench_have_redis_benchmark();
    for (i = 0; i < rounds; i++) {
        memset(&res[i], 0, sizeof res[i]);
        fprintf(stderr, "idle: round %d of %d...\n", i + 1, rounds);
        bench_steal_begin(&cpus, &res[i].steal);
        if (have_rb && run_reference(&r, admin, &sc, rb_requests, i, &res[i]) != 0)
            fprintf(stderr, "idle: the reference run of round %d failed\n", i + 1);
        if (run_leash(r.port, cycles, &res[i]) != 0)
            failed = 1;
        bench_steal_end(&cpus, &res[i].steal);
        if (res[i].ok && res[i].ref_ok && ref_us(&res[i]) > 0.) {
            ratios[nratios] = res[i].mean_us / ref_us(&res[i]);
            ratios50[nratios] = res[i].p50_us / (res[i].acq.p50_us + res[i].rel.p50_us);
            nratios++;
        }
    }
    redisFree(admin);
    test_redis_stop(&r);

    printf("### Latency when idle (leash-bench-idle)\n\n");
    if (nratios > 0) {
        double lm[MAX_ROUNDS], rm[MAX_ROUNDS], l50[MAX_ROUNDS], r50[MAX_ROUNDS], l99[MAX_ROUNDS];
        double rr[MAX_ROUNDS], rratio[MAX_ROUNDS];
        double lsum = 0., rsum = 0., total = 0.;
        int k = 0;

        for (i = 0; i < rounds; i++) {
            const round_result *x = &res[i];
            if (!x->ok || !x->ref_ok)
                continue;
            lm[k] = x->mean_us;
            rm[k] = ref_us(x);
            l50[k] = x->p50_us;
            r50[k] = x->acq.p50_us + x->rel.p50_us;
            l99[k] = x->p99_us;
            rr[k] = 1e6 / x->acq.rps + 1e6 / x->rel.rps;
            rratio[k] = x->mean_us / rr[k];
            lsum += x->mean_us * (double)x->cycles;
            rsum += ref_us(x) * (double)x->cycles;
            total += (double)x->cycles;
            k++;
        }
        qsort(ratios, (size_t)k, sizeof ratios[0], cmp_double);
        qsort(ratios50, (size_t)k, sizeof ratios50[0], cmp_double);
        qsort(lm, (size_t)k, sizeof lm[0], cmp_double);
        qsort(rm, (size_t)k, sizeof rm[0], cmp_double);
        qsort(l50, (size_t)k, sizeof l50[0], cmp_double);
        qsort(r50, (size_t)k, sizeof r50[0], cmp_double);
        qsort(l99, (size_t)k, sizeof l99[0], cmp_double);
        qsort(rr, (size_t)k, sizeof rr[0], cmp_double);
        qsort(rratio, (size_t)k, sizeof rratio[0], cmp_double);
        printf("| over %d rounds | leash µs/cycle | redis-benchmark acquire + release µs "
               "| x reference |\n",
               k);
        printf("|---|---:|---:|---:|\n");
        printf("| **mean: median of the rounds** | %.1f | %.1f | **%.2f** |\n", lm[k / 2],
               rm[k / 2], ratios[k / 2]);
        printf("| p50: median of the rounds | %.1f | %.1f | %.2f |\n", l50[k / 2], r50[k / 2],
               ratios50[k / 2]);
        printf("| mean: all rounds pooled | %.1f | %.1f | %.2f |\n", lsum / total, rsum / total,
               lsum / rsum);
        printf("| x reference (mean), lowest and highest round | | | %.2f - %.2f |\n", ratios[0],
               ratios[k - 1]);
        printf("| mean, reference from redis-benchmark's rate: median of the rounds | %.1f "
               "| %.1f | %.2f |\n",
               lm[k / 2], rr[k / 2], rratio[k / 2]);
        printf("| leash p99: median of the rounds | %.1f | | |\n", l99[k / 2]);
    } else {
        printf("| over 0 rounds | failed | | |\n");
        failed = 1;
    }
    printf("\nA cycle: leash_acquire(try once) -> callback -> leash_release() -> callback, "
           "one at a time on one handle, %ld cycles per round after 50 of warm-up; timed from "
           "the acquire call to the release callback. Reference: mean latency of "
           "redis-benchmark -c 1 -P 1 calling leash's acquire script (fresh keys) plus its "
           "release script (keys held by the token), %ld requests each, run just before the "
           "leash cycles of the same round. The machine's speed drifts between rounds: the "
           "target figure is the median of the rounds' ratios. redis-benchmark's latency "
           "runs from its write to the reply, leaving out its own turn-around between "
           "requests, which a leash cycle includes; the rate row counts it (1 / requests per "
           "second, from its start to its end).\n",
           cycles, rb_requests);
    for (i = 0; i < rounds; i++) {
        const round_result *x = &res[i];
        printf("- round %d: ", i + 1);
        if (x->ok && x->ref_ok)
            printf("x %.2f (mean), x %.2f (p50); ", x->mean_us / ref_us(x),
                   x->p50_us / (x->acq.p50_us + x->rel.p50_us));
        if (x->ok)
            printf("leash mean %.1f, p50 %.1f, p99 %.1f, max %.0f µs, client CPU %.1f µs/cycle",
                   x->mean_us, x->p50_us, x->p99_us, x->max_us, x->client_cpu_us);
        else
            printf("leash failed (%s)", x->error);
        if (x->ref_ok)
            printf("; reference mean %.1f + %.1f µs, p50 %.1f + %.1f µs, redis-benchmark CPU "
                   "%.1f + %.1f µs, "
                   "%.1f%% grants, %.1f%% full releases",
                   x->acq.avg_us, x->rel.avg_us, x->acq.p50_us, x->rel.p50_us, x->acq.cpu_us,
                   x->rel.cpu_us, 100. * x->grants, 100. * x->full_releases);
        bench_print_steal(&x->steal);
        printf("\n");
    }
    printf("\n");
    bench_print_cpus(&cpus);
    return failed ? 1 : 0;
}
