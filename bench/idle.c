/* SPDX-License-Identifier: MIT */
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
 * with the commands leash's dialect builds. Its mean latency per
 * call, acquire + release, is what a cycle would cost with no library at
 * all.
 *
 * The acquire alone is timed too: from the leash_acquire() call to its
 * callback (the grant), p50 and p99.
 *
 * The machine is shared and its speed drifts, so the measurement runs in
 * --rounds rounds, each one reference and one leash run back to back; the
 * table gives every round's ratio and the median.
 *
 * Redlock (--redlock): Redlock's 5 independent redis-servers (common.h:
 * all on the server's CPU, the one core the single server has), and in
 * every round, right after the one-server leash run, the same cycles by a
 * LEASH_TOPOLOGY_REDLOCK client over the five; a table of the two side by
 * side: the acquire's p50 (target: at most 1.5 x the one server's, since
 * the fan-out is parallel) and p99, the cycle, client and server CPU per
 * cycle and Redis calls per cycle (INFO, summed over the servers); each
 * ratio is the median of the rounds' ratios, each taken within its round.
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
/* Redlock's acquire p50, at most this times the one server's. */
#define REDLOCK_ACQUIRE_TARGET 1.5

/* One run of leash cycles on a target. */
typedef struct leash_run {
    int ok;
    int64_t cycles;
    double mean_us, p50_us, p99_us, max_us, client_cpu_us; /* the cycle */
    double acq_p50_us, acq_p99_us, acq_max_us;             /* the acquire: call -> callback */
    double server_cpu_us;                                  /* per cycle, INFO cpu, all servers */
    bench_cmdstats cmds; /* INFO commandstats over the cycles, summed over the servers */
    char error[128];
} leash_run;

typedef struct round_result {
    leash_run l;  /* one server */
    leash_run rl; /* Redlock (--redlock) */
    /* reference */
    int ref_ok;
    bench_rb acq, rel;
    double full_releases, grants;
    bench_steal steal;
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
    int64_t *lat; /* per cycle: acquire call -> release callback */
    int64_t *acq; /* per cycle: acquire call -> acquire callback */
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
    int64_t now = bench_now_ns();
    int rc;

    ir->acq[ir->done] = now - ir->started;
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

static int run_leash(const bench_target *t, bench_admin *admin, int64_t cycles, leash_run *res) {
    idle_run ir;
    leash_client *client = NULL;
    bench_cmdstats c0, c1;
    int64_t cpu0, sum = 0, i;
    double scpu0, scpu1;
    int rc = -1, counts;

    memset(&ir, 0, sizeof ir);
    ir.want = cycles;
    ir.lat = calloc((size_t)cycles, sizeof(*ir.lat));
    ir.acq = calloc((size_t)cycles, sizeof(*ir.acq));
    ir.loop = ev_loop_new(EVFLAG_AUTO);
    if (ir.lat == NULL || ir.acq == NULL || ir.loop == NULL ||
        (client = bench_client_new_at(ir.loop, t)) == NULL ||
        (ir.lock = leash_lock_new(client, "bench:idle")) == NULL) {
        snprintf(res->error, sizeof res->error, "set-up failed");
        goto out;
    }
    if (bench_wait_ready(ir.loop, &client, 1, t, 5000) != 0) {
        snprintf(res->error, sizeof res->error, "the client did not connect in 5 s");
        goto out;
    }
    /* A few cycles first: the first ones pay for cold caches (and load
     * the scripts on every server). */
    ir.want = cycles < 50 ? cycles : 50;
    cycle_start(&ir);
    ev_run(ir.loop, 0);
    ir.done = 0;
    ir.want = cycles;
    ev_timer_init(&ir.guard, on_guard, 60., 0.);
    ev_timer_start(ir.loop, &ir.guard);
    counts = bench_admin_cmdstats(admin, &c0) == 0;
    scpu0 = bench_admin_cpu_s(admin, 0);
    cpu0 = bench_cpu_ns();
    if (!ir.failed) {
        cycle_start(&ir);
        ev_run(ir.loop, 0);
    }
    res->client_cpu_us = (double)(bench_cpu_ns() - cpu0) / 1e3 / (double)cycles;
    scpu1 = bench_admin_cpu_s(admin, 0);
    counts = counts && bench_admin_cmdstats(admin, &c1) == 0;
    ev_timer_stop(ir.loop, &ir.guard);
    if (ir.failed) {
        snprintf(res->error, sizeof res->error, "%s", ir.error);
        goto out;
    }
    if (scpu0 >= 0. && scpu1 >= 0.)
        res->server_cpu_us = (scpu1 - scpu0) * 1e6 / (double)cycles;
    if (counts)
        bench_cmdstats_delta(&c0, &c1, &res->cmds);
    for (i = 0; i < cycles; i++)
        sum += ir.lat[i];
    qsort(ir.lat, (size_t)cycles, sizeof(*ir.lat), bench_cmp_i64);
    qsort(ir.acq, (size_t)cycles, sizeof(*ir.acq), bench_cmp_i64);
    res->cycles = cycles;
    res->mean_us = (double)sum / (double)cycles / 1e3;
    res->p50_us = (double)bench_pct(ir.lat, cycles, 0.50) / 1e3;
    res->p99_us = (double)bench_pct(ir.lat, cycles, 0.99) / 1e3;
    res->max_us = (double)ir.lat[cycles - 1] / 1e3;
    res->acq_p50_us = (double)bench_pct(ir.acq, cycles, 0.50) / 1e3;
    res->acq_p99_us = (double)bench_pct(ir.acq, cycles, 0.99) / 1e3;
    res->acq_max_us = (double)ir.acq[cycles - 1] / 1e3;
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
    free(ir.acq);
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

/* The median of v[0..n) (sorts v); 0 when n is 0. */
static double median(double *v, int n) {
    if (n <= 0)
        return 0.;
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return v[n / 2];
}

/* sum += d, command by command. */
static void cmdstats_add(bench_cmdstats *sum, const bench_cmdstats *d) {
    int i, j;

    for (i = 0; i < d->n; i++) {
        for (j = 0; j < sum->n && strcmp(sum->cmd[j].name, d->cmd[i].name) != 0; j++)
            ;
        if (j == sum->n) {
            if (sum->n == BENCH_MAX_CMDSTATS)
                continue;
            sum->cmd[sum->n++] = d->cmd[i];
            continue;
        }
        sum->cmd[j].calls += d->cmd[i].calls;
        sum->cmd[j].usec += d->cmd[i].usec;
    }
}

/* The rounds where both runs went through: one server against Redlock. */
static void print_redlock(const round_result *res, int rounds, int intact) {
    double a1[MAX_ROUNDS], a2[MAX_ROUNDS], ar[MAX_ROUNDS], p1[MAX_ROUNDS], p2[MAX_ROUNDS];
    double pr[MAX_ROUNDS], c1[MAX_ROUNDS], c2[MAX_ROUNDS], cr[MAX_ROUNDS], u1[MAX_ROUNDS];
    double u2[MAX_ROUNDS], ur[MAX_ROUNDS], s1[MAX_ROUNDS], s2[MAX_ROUNDS], sr[MAX_ROUNDS];
    double lo, hi, cycles1 = 0., cycles2 = 0., usec1 = 0., usec2 = 0., ev1 = 0., ev2 = 0.;
    bench_cmdstats sum1, sum2;
    bench_script_runs runs1, runs2;
    int i, k = 0;

    memset(&sum1, 0, sizeof sum1);
    memset(&sum2, 0, sizeof sum2);
    for (i = 0; i < rounds; i++) {
        const leash_run *x = &res[i].l, *y = &res[i].rl;
        if (!x->ok || !y->ok || !(x->acq_p50_us > 0.) || !(x->p50_us > 0.))
            continue;
        a1[k] = x->acq_p50_us;
        a2[k] = y->acq_p50_us;
        ar[k] = y->acq_p50_us / x->acq_p50_us;
        p1[k] = x->acq_p99_us;
        p2[k] = y->acq_p99_us;
        pr[k] = x->acq_p99_us > 0. ? y->acq_p99_us / x->acq_p99_us : 0.;
        c1[k] = x->p50_us;
        c2[k] = y->p50_us;
        cr[k] = y->p50_us / x->p50_us;
        u1[k] = x->client_cpu_us;
        u2[k] = y->client_cpu_us;
        ur[k] = x->client_cpu_us > 0. ? y->client_cpu_us / x->client_cpu_us : 0.;
        s1[k] = x->server_cpu_us;
        s2[k] = y->server_cpu_us;
        sr[k] = x->server_cpu_us > 0. ? y->server_cpu_us / x->server_cpu_us : 0.;
        cmdstats_add(&sum1, &x->cmds);
        cmdstats_add(&sum2, &y->cmds);
        cycles1 += (double)x->cycles;
        cycles2 += (double)y->cycles;
        k++;
    }
    printf("\n| Redlock, 5 servers: median of %d rounds | one server | Redlock | x one server "
           "(median of the rounds' ratios) |\n",
           k);
    printf("|---|---:|---:|---:|\n");
    if (k == 0) {
        printf("| failed | | | |\n");
        return;
    }
    {
        double tmp[MAX_ROUNDS];
        memcpy(tmp, ar, sizeof(double) * (size_t)k);
        qsort(tmp, (size_t)k, sizeof tmp[0], cmp_double);
        lo = tmp[0];
        hi = tmp[k - 1];
    }
    printf("| **acquire p50 µs** (leash_acquire() call -> its callback, uncontended) | %.1f "
           "| %.1f | **%.2f** (target: at most %.1f) |\n",
           median(a1, k), median(a2, k), median(ar, k), REDLOCK_ACQUIRE_TARGET);
    printf("| acquire p99 µs | %.1f | %.1f | %.2f |\n", median(p1, k), median(p2, k),
           median(pr, k));
    printf("| acquire + release cycle p50 µs | %.1f | %.1f | %.2f |\n", median(c1, k),
           median(c2, k), median(cr, k));
    printf("| client CPU µs per cycle | %.1f | %.1f | %.2f |\n", median(u1, k), median(u2, k),
           median(ur, k));
    printf("| server CPU µs per cycle (INFO cpu, summed over the servers) | %.1f | %.1f | %.2f "
           "|\n",
           median(s1, k), median(s2, k), median(sr, k));
    printf("| x one server, acquire p50: lowest and highest round | | | %.2f - %.2f |\n", lo, hi);
    bench_script_runs_of(&sum1, &runs1);
    bench_script_runs_of(&sum2, &runs2);
    usec1 = (double)runs1.script_usec;
    usec2 = (double)runs2.script_usec;
    ev1 = (double)runs1.scripts;
    ev2 = (double)runs2.scripts;
    printf("\nRedlock: 5 independent redis-servers (tests/support/redis_server.c, as the "
           "Redlock tests start them), all on the server's CPU, so that the five have the one "
           "core the single server has: their scripts run one after another there, the "
           "fan-out is parallel on the wire only. In each round, right after the one-server "
           "leash run, the same %ld cycles by a client with the five as its nodes "
           "(LEASH_TOPOLOGY_REDLOCK; warm-up 50 cycles, which also loads the scripts on "
           "every server). A new hold's acquire is the acquire script on all five, each "
           "granting the fence the client proposed and writing it as its floor; the grant is "
           "reported once a majority returned one fence (a fence raise follows only where "
           "they differ: route/quorum.c). Redis calls per cycle "
           "(INFO commandstats, summed over the servers, all rounds pooled): one server: ",
           res[0].l.cycles);
    bench_print_calls(&sum1, cycles1, "");
    printf("; Redlock: ");
    bench_print_calls(&sum2, cycles2, "");
    printf(". Server time inside EVALSHA (commandstats) per cycle: one server %.1f µs "
           "(%.1f µs per call), Redlock %.1f µs (%.1f µs per call).%s\n",
           cycles1 > 0. ? usec1 / cycles1 : 0., ev1 > 0. ? usec1 / ev1 : 0.,
           cycles2 > 0. ? usec2 / cycles2 : 0., ev2 > 0. ? usec2 / ev2 : 0.,
           intact ? "" : " **A Redlock server stopped answering during the run.**");
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [options]\n"
            "  -n, --cycles N       leash cycles per round (default 1000)\n"
            "  -R, --rounds N       rounds of reference + leash (default 15)\n"
            "      --rb-requests N  redis-benchmark requests per script per round\n"
            "                       (default 1000)\n"
            "      --redlock        also on Redlock's 5 servers in every round\n"
            "      --no-reference   leash only (for profiling)\n"
            "      --no-pin         do not pin redis-server and the benchmark to CPUs\n",
            argv0);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {{"cycles", required_argument, NULL, 'n'},
                                             {"rounds", required_argument, NULL, 'R'},
                                             {"rb-requests", required_argument, NULL, 'q'},
                                             {"redlock", no_argument, NULL, 'L'},
                                             {"no-pin", no_argument, NULL, 'p'},
                                             {"no-reference", no_argument, NULL, 'r'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int rounds = 15, pin = 1, want_rb = 1, opt, i, failed = 0, nratios = 0, have_rb;
    int redlock = 0, intact = 1;
    long cycles = 1000, rb_requests = 1000;
    double ratios[MAX_ROUNDS], ratios50[MAX_ROUNDS];
    bench_scripts sc;
    round_result res[MAX_ROUNDS];
    bench_cpus cpus;
    bench_target single, rt;
    bench_admin single_admin, rl_admin;
    bench_redlock rl;
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
        case 'L':
            redlock = 1;
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
    bench_target_single(&single, r.port);
    if (bench_admin_open(&single_admin, &single) != 0) {
        fprintf(stderr, "idle: no admin connection\n");
        redisFree(admin);
        test_redis_stop(&r);
        return 1;
    }
    memset(&rl, 0, sizeof rl);
    memset(&rl_admin, 0, sizeof rl_admin);
    if (redlock) {
        fprintf(stderr, "idle: starting the Redlock servers...\n");
        if (bench_start_redlock(&rl, &cpus, &rt) != 0 || bench_admin_open(&rl_admin, &rt) != 0) {
            fprintf(stderr, "idle: no Redlock servers\n");
            bench_stop_redlock(&rl);
            redlock = 0;
            failed = 1;
        }
    }
    have_rb = want_rb && bench_have_redis_benchmark();
    for (i = 0; i < rounds; i++) {
        memset(&res[i], 0, sizeof res[i]);
        fprintf(stderr, "idle: round %d of %d...\n", i + 1, rounds);
        bench_steal_begin(&cpus, &res[i].steal);
        if (have_rb && run_reference(&r, admin, &sc, rb_requests, i, &res[i]) != 0)
            fprintf(stderr, "idle: the reference run of round %d failed\n", i + 1);
        if (run_leash(&single, &single_admin, cycles, &res[i].l) != 0)
            failed = 1;
        if (redlock && run_leash(&rt, &rl_admin, cycles, &res[i].rl) != 0) {
            fprintf(stderr, "idle: the Redlock run of round %d failed: %s\n", i + 1,
                    res[i].rl.error);
            failed = 1;
        }
        bench_steal_end(&cpus, &res[i].steal);
        if (res[i].l.ok && res[i].ref_ok && ref_us(&res[i]) > 0.) {
            ratios[nratios] = res[i].l.mean_us / ref_us(&res[i]);
            ratios50[nratios] = res[i].l.p50_us / (res[i].acq.p50_us + res[i].rel.p50_us);
            nratios++;
        }
    }
    if (redlock) {
        intact = bench_redlock_intact(&rl);
        if (!intact)
            failed = 1;
        bench_admin_close(&rl_admin);
        bench_stop_redlock(&rl);
    }
    bench_admin_close(&single_admin);
    redisFree(admin);
    test_redis_stop(&r);

    printf("### Latency when idle (leash-bench-idle)\n\n");
    if (nratios > 0) {
        double lm[MAX_ROUNDS], rm[MAX_ROUNDS], l50[MAX_ROUNDS], r50[MAX_ROUNDS], l99[MAX_ROUNDS];
        double rr[MAX_ROUNDS], rratio[MAX_ROUNDS], a50[MAX_ROUNDS], a99[MAX_ROUNDS];
        double lsum = 0., rsum = 0., total = 0.;
        int k = 0;

        for (i = 0; i < rounds; i++) {
            const round_result *x = &res[i];
            if (!x->l.ok || !x->ref_ok)
                continue;
            lm[k] = x->l.mean_us;
            rm[k] = ref_us(x);
            l50[k] = x->l.p50_us;
            r50[k] = x->acq.p50_us + x->rel.p50_us;
            l99[k] = x->l.p99_us;
            a50[k] = x->l.acq_p50_us;
            a99[k] = x->l.acq_p99_us;
            rr[k] = 1e6 / x->acq.rps + 1e6 / x->rel.rps;
            rratio[k] = x->l.mean_us / rr[k];
            lsum += x->l.mean_us * (double)x->l.cycles;
            rsum += ref_us(x) * (double)x->l.cycles;
            total += (double)x->l.cycles;
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
        printf("| leash acquire alone (call -> callback), p50 / p99: median of the rounds "
               "| %.1f / %.1f | | |\n",
               median(a50, k), median(a99, k));
    } else {
        printf("| over 0 rounds | failed | | |\n");
        failed = 1;
    }
    printf("\nA cycle: leash_acquire(try once) -> callback -> leash_release() -> callback, "
           "one at a time on one handle, %ld cycles per round after 50 of warm-up; timed from "
           "the acquire call to the release callback (the acquire alone: to its own "
           "callback). Reference: mean latency of "
           "redis-benchmark -c 1 -P 1 calling leash's acquire script (fresh keys) plus its "
           "release script (keys held by the token), %ld requests each, run just before the "
           "leash cycles of the same round. The machine's speed drifts between rounds: the "
           "target figure is the median of the rounds' ratios. redis-benchmark's latency "
           "runs from its write to the reply, leaving out its own turn-around between "
           "requests, which a leash cycle includes; the rate row counts it (1 / requests per "
           "second, from its start to its end).\n",
           cycles, rb_requests);
    if (redlock)
        print_redlock(res, rounds, intact);
    printf("\n");
    for (i = 0; i < rounds; i++) {
        const round_result *x = &res[i];
        printf("- round %d: ", i + 1);
        if (x->l.ok && x->ref_ok)
            printf("x %.2f (mean), x %.2f (p50); ", x->l.mean_us / ref_us(x),
                   x->l.p50_us / (x->acq.p50_us + x->rel.p50_us));
        if (x->l.ok)
            printf("leash mean %.1f, p50 %.1f, p99 %.1f, max %.0f µs, acquire p50 %.1f, p99 "
                   "%.1f µs, client CPU %.1f µs/cycle",
                   x->l.mean_us, x->l.p50_us, x->l.p99_us, x->l.max_us, x->l.acq_p50_us,
                   x->l.acq_p99_us, x->l.client_cpu_us);
        else
            printf("leash failed (%s)", x->l.error);
        if (x->ref_ok)
            printf("; reference mean %.1f + %.1f µs, p50 %.1f + %.1f µs, redis-benchmark CPU "
                   "%.1f + %.1f µs, "
                   "%.1f%% grants, %.1f%% full releases",
                   x->acq.avg_us, x->rel.avg_us, x->acq.p50_us, x->rel.p50_us, x->acq.cpu_us,
                   x->rel.cpu_us, 100. * x->grants, 100. * x->full_releases);
        if (redlock && x->rl.ok)
            printf("; Redlock: acquire p50 %.1f, p99 %.1f, max %.0f µs (x %.2f the one "
                   "server's p50), cycle p50 %.1f µs, client CPU %.1f µs/cycle",
                   x->rl.acq_p50_us, x->rl.acq_p99_us, x->rl.acq_max_us,
                   x->l.ok && x->l.acq_p50_us > 0. ? x->rl.acq_p50_us / x->l.acq_p50_us : 0.,
                   x->rl.p50_us, x->rl.client_cpu_us);
        else if (redlock)
            printf("; Redlock failed (%s)", x->rl.error);
        bench_print_steal(&x->steal);
        printf("\n");
    }
    printf("\n");
    bench_print_cpus(&cpus);
    return failed ? 1 : 0;
}
