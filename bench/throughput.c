/*
 * leash-bench-throughput: acquire+release cycles per second on distinct keys,
 * one client, with 1, 64 and 1024 operations in flight.
 *
 * Each of W lock handles (W = operations in flight, each its own key) loops:
 * leash_acquire(try once) -> callback -> leash_release() -> callback -> again.
 * After a warm-up, cycles are counted over a window of --seconds.
 *
 * The reference, on the same server and CPUs in the same run, is the
 * server's limit for leash's own scripts: redis-benchmark -P 32 calling the
 * acquire script by EVALSHA on fresh keys (the grant path), then the release
 * script on keys that hold a lock of the token (the release path: delete,
 * tombstone, publish). The SHAs come from SCRIPT LOAD of the sources that
 * the library itself loads (src/scripts.c). A cycle costs the server one of
 * each, so the limit in cycles/s is 1 / (1/acquires per s + 1/releases per s).
 * redis-benchmark draws its keys at random (__rand_int__), so the release
 * keyspace is filled beforehand with --rb-keyspace holds and a few draws hit
 * a key twice (a cheaper "already released" path); INFO commandstats says
 * how many releases took the full path, and the notes give it. The
 * reference runs before and after the leash runs; the limit is their mean.
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

#define MAX_CONFIGS 8
/* 32 hex digits, like leash's owner tokens. */
#define RB_TOKEN "5eed0123456789abcdef0123456789ab"

/* ---- the reference: redis-benchmark on leash's scripts ---- */

typedef struct reference {
    int ok;
    bench_rb acq, rel;
    double limit;         /* cycles per second */
    double full_releases; /* fraction of release calls that took the full path */
    double grants;        /* fraction of acquire calls that granted */
    double server_cpu_per_cycle_us;
    double acq_exec_us, rel_exec_us; /* commandstats usec per EVALSHA of each run */
} reference;

static int run_reference(test_redis *r, redisContext *admin, char sha[][41], int clients,
                         long requests, long keyspace, reference *ref) {
    char n[24], c[16], ks[24];
    bench_cmdstats s0, s1, s2, d;
    double cpu0, cpu1, cpu2;
    long long calls;
    const char *acq[] = {"-c",
                         c,
                         "-P",
                         "32",
                         "-n",
                         n,
                         "-r",
                         "2000000000",
                         "EVALSHA",
                         sha[BENCH_SCRIPT_ACQUIRE],
                         "3",
                         "bench:rb:acq:__rand_int__",
                         "{bench:rb}:fence",
                         "{bench:rb}:rel:0123456789abcdef0123__rand_int__",
                         RB_TOKEN,
                         "30000",
                         "1",
                         NULL};
    const char *rel[] = {"-c",
                         c,
                         "-P",
                         "32",
                         "-n",
                         n,
                         "-r",
                         ks,
                         "EVALSHA",
                         sha[BENCH_SCRIPT_RELEASE],
                         "2",
                         "bench:rb:rel:__rand_int__",
                         "{bench:rb}:rel:0123456789abcdef0123__rand_int__",
                         RB_TOKEN,
                         "0",
                         "{bench:rb}:released",
                         "70000",
                         NULL};
    redisReply *reply;

    memset(ref, 0, sizeof *ref);
    snprintf(n, sizeof n, "%ld", requests);
    snprintf(c, sizeof c, "%d", clients);
    snprintf(ks, sizeof ks, "%ld", keyspace);
    reply = test_redis_cmd(r, "FLUSHALL");
    if (reply)
        freeReplyObject(reply);
    if (bench_populate_holds(admin, "bench:rb:rel:", keyspace, RB_TOKEN, 600000) != 0) {
        fprintf(stderr, "throughput: could not fill the release keyspace\n");
        return -1;
    }
    cpu0 = bench_server_cpu_s(admin);
    if (bench_cmdstats_read(admin, &s0) != 0 ||
        bench_redis_benchmark(r->port, 120., acq, &ref->acq) != 0)
        return -1;
    cpu1 = bench_server_cpu_s(admin);
    if (bench_cmdstats_read(admin, &s1) != 0 ||
        bench_redis_benchmark(r->port, 120., rel, &ref->rel) != 0)
        return -1;
    cpu2 = bench_server_cpu_s(admin);
    if (bench_cmdstats_read(admin, &s2) != 0)
        return -1;
    bench_cmdstats_delta(&s0, &s1, &d);
    calls = bench_cmdstats_calls(&d, "evalsha");
    ref->grants = calls > 0 ? (double)bench_cmdstats_calls(&d, "incr") / (double)calls : 0.;
    ref->acq_exec_us = calls > 0 ? (double)bench_cmdstats_usec(&d, "evalsha") / (double)calls : 0.;
    bench_cmdstats_delta(&s1, &s2, &d);
    calls = bench_cmdstats_calls(&d, "evalsha");
    ref->full_releases =
        calls > 0 ? (double)bench_cmdstats_calls(&d, "publish") / (double)calls : 0.;
    ref->rel_exec_us = calls > 0 ? (double)bench_cmdstats_usec(&d, "evalsha") / (double)calls : 0.;
    if (!(ref->acq.rps > 0.) || !(ref->rel.rps > 0.))
        return -1;
    ref->limit = 1. / (1. / ref->acq.rps + 1. / ref->rel.rps);
    /* Server CPU per acquire + release: each run's CPU over its requests. */
    if (cpu0 >= 0. && cpu2 >= 0.)
        ref->server_cpu_per_cycle_us =
            ((cpu1 - cpu0) / (double)requests + (cpu2 - cpu1) / (double)requests) * 1e6;
    ref->ok = 1;
    reply = test_redis_cmd(r, "FLUSHALL");
    if (reply)
        freeReplyObject(reply);
    return 0;
}

/* ---- leash: W handles cycling ---- */

typedef struct run run;

typedef struct slot {
    run *run;
    leash_lock *lock;
} slot;

enum {
    PH_WARMUP,
    PH_WINDOW,
    PH_DRAIN
};

struct run {
    struct ev_loop *loop;
    leash_client *client;
    redisContext *admin;
    const bench_cpus *cpus;
    slot *slots;
    int n, active, phase;
    double warmup_s, window_s;
    ev_timer phase_timer, guard;
    int64_t cycles;
    int64_t win_cycles0, win_cycles1;
    int64_t t0, t1, cpu0, cpu1;
    double scpu0, scpu1;
    bench_cmdstats cs0, cs1;
    bench_steal steal;
    int errors;
    char first_error[128];
    int timed_out;
};

static void note_error(run *r, const char *what, int status) {
    if (r->errors++ == 0)
        snprintf(r->first_error, sizeof r->first_error, "%s: %s", what, leash_status_name(status));
}

static void on_acquired(leash_lock *l, int status, void *arg);

/* The slot is done: nothing more in flight for it. */
static void slot_stop(slot *s) {
    run *r = s->run;
    if (--r->active == 0)
        ev_break(r->loop, EVBREAK_ALL);
}

static void slot_acquire(slot *s) {
    int rc = leash_acquire(s->lock, 0, on_acquired, s);
    if (rc != LEASH_OK) {
        note_error(s->run, "leash_acquire", rc);
        slot_stop(s);
    }
}

static void on_released(leash_lock *l, int status, void *arg) {
    slot *s = arg;
    run *r = s->run;

    (void)l;
    if (status != LEASH_OK) {
        note_error(r, "release", status);
        slot_stop(s);
        return;
    }
    r->cycles++;
    if (r->phase == PH_DRAIN) {
        slot_stop(s);
        return;
    }
    slot_acquire(s);
}

static void on_acquired(leash_lock *l, int status, void *arg) {
    slot *s = arg;
    run *r = s->run;
    int rc;

    if (status != LEASH_OK) {
        note_error(r, "acquire", status);
        slot_stop(s);
        return;
    }
    rc = leash_release(l, on_released, s);
    if (rc != LEASH_OK) {
        note_error(r, "leash_release", rc);
        slot_stop(s);
    }
}

static void on_phase(struct ev_loop *loop, ev_timer *w, int revents) {
    run *r = (run *)((char *)w - offsetof(run, phase_timer));

    (void)revents;
    if (r->phase == PH_WARMUP) {
        r->phase = PH_WINDOW;
        bench_steal_begin(r->cpus, &r->steal);
        bench_cmdstats_read(r->admin, &r->cs0);
        r->scpu0 = bench_server_cpu_s(r->admin);
        r->win_cycles0 = r->cycles;
        r->cpu0 = bench_cpu_ns();
        r->t0 = bench_now_ns();
        ev_timer_set(w, r->window_s, 0.);
        ev_timer_start(loop, w);
        return;
    }
    r->t1 = bench_now_ns();
    r->cpu1 = bench_cpu_ns();
    r->win_cycles1 = r->cycles;
    r->scpu1 = bench_server_cpu_s(r->admin);
    bench_cmdstats_read(r->admin, &r->cs1);
    bench_steal_end(r->cpus, &r->steal);
    r->phase = PH_DRAIN;
}

static void on_guard(struct ev_loop *loop, ev_timer *w, int revents) {
    run *r = (run *)((char *)w - offsetof(run, guard));

    (void)revents;
    r->timed_out = 1;
    ev_break(loop, EVBREAK_ALL);
}

typedef struct result {
    int n, ok;
    int64_t cycles;
    double seconds, rate;
    double client_cpu_us, server_cpu_us, evalsha_per_cycle;
    double exec_us; /* commandstats usec per EVALSHA */
    bench_steal steal;
    int errors;
    char first_error[128];
} result;

static int run_config(int port, int n, double warmup_s, double window_s, const bench_cpus *cpus,
                      redisContext *admin, result *res) {
    run *r = calloc(1, sizeof(*r));
    int i, rc = -1;

    memset(res, 0, sizeof *res);
    res->n = n;
    if (r == NULL)
        return -1;
    r->loop = ev_loop_new(EVFLAG_AUTO);
    r->slots = calloc((size_t)n, sizeof(*r->slots));
    r->admin = admin;
    r->cpus = cpus;
    r->n = n;
    r->warmup_s = warmup_s;
    r->window_s = window_s;
    if (r->loop == NULL || r->slots == NULL ||
        (r->client = bench_client_new(r->loop, port)) == NULL) {
        fprintf(stderr, "throughput: could not set up a client\n");
        goto out;
    }
    for (i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "bench:thr:%d:%d", n, i);
        r->slots[i].run = r;
        r->slots[i].lock = leash_lock_new(r->client, name);
        if (r->slots[i].lock == NULL)
            goto out;
    }
    if (bench_wait_connected(r->loop, &r->client, 1, 5000) != 0) {
        fprintf(stderr, "throughput: the client did not connect in 5 s\n");
        goto out;
    }
    ev_timer_init(&r->phase_timer, on_phase, warmup_s, 0.);
    ev_timer_start(r->loop, &r->phase_timer);
    ev_timer_init(&r->guard, on_guard, warmup_s + window_s + 15., 0.);
    ev_timer_start(r->loop, &r->guard);
    r->active = n;
    for (i = 0; i < n; i++)
        slot_acquire(&r->slots[i]);
    if (r->active > 0)
        ev_run(r->loop, 0);
    ev_timer_stop(r->loop, &r->phase_timer);
    ev_timer_stop(r->loop, &r->guard);
    if (r->t1 == 0 || r->timed_out) {
        fprintf(stderr, "throughput: %d in flight did not finish its window\n", n);
        goto out;
    }
    res->cycles = r->win_cycles1 - r->win_cycles0;
    res->seconds = (double)(r->t1 - r->t0) / 1e9;
    res->rate = (double)res->cycles / res->seconds;
    if (res->cycles > 0) {
        bench_cmdstats d;
        bench_cmdstats_delta(&r->cs0, &r->cs1, &d);
        res->client_cpu_us = (double)(r->cpu1 - r->cpu0) / 1e3 / (double)res->cycles;
        if (r->scpu0 >= 0. && r->scpu1 >= 0.)
            res->server_cpu_us = (r->scpu1 - r->scpu0) * 1e6 / (double)res->cycles;
        res->evalsha_per_cycle =
            (double)(bench_cmdstats_calls(&d, "evalsha") + bench_cmdstats_calls(&d, "eval")) /
            (double)res->cycles;
        if (bench_cmdstats_calls(&d, "evalsha") > 0)
            res->exec_us = (double)bench_cmdstats_usec(&d, "evalsha") /
                           (double)bench_cmdstats_calls(&d, "evalsha");
    }
    res->steal = r->steal;
    res->ok = 1;
    rc = 0;
out:
    res->errors = r->errors;
    snprintf(res->first_error, sizeof res->first_error, "%s", r->first_error);
    if (r->client != NULL)
        leash_client_free(r->client);
    if (r->loop != NULL) {
        ev_run(r->loop, EVRUN_NOWAIT);
        ev_loop_destroy(r->loop);
    }
    free(r->slots);
    free(r);
    return rc;
}

/* ---- output ---- */

static void print_table(const result *res, int count, const reference *before,
                        const reference *after, double limit) {
    int i;

    printf("| operations in flight | cycles/s | x redis-benchmark limit | cycles measured "
           "| client CPU µs/cycle | server CPU µs/cycle | server CPU busy | EVALSHA/cycle |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (i = 0; i < count; i++) {
        const result *x = &res[i];
        if (!x->ok) {
            printf("| %d | failed | | | | | | |\n", x->n);
            continue;
        }
        printf("| %d | %.0f | ", x->n, x->rate);
        if (limit > 0.)
            printf("%.2f", x->rate / limit);
        else
            printf("n/a");
        printf(" | %lld | %.1f | %.1f | %.0f%% | %.2f |\n", (long long)x->cycles, x->client_cpu_us,
               x->server_cpu_us, x->rate * x->server_cpu_us / 1e4, x->evalsha_per_cycle);
    }
    if (limit > 0.) {
        double cpu = 0.;
        int k = 0;
        if (before->ok) {
            cpu += before->server_cpu_per_cycle_us;
            k++;
        }
        if (after->ok) {
            cpu += after->server_cpu_per_cycle_us;
            k++;
        }
        printf("| redis-benchmark -P 32 (limit) | %.0f | 1.00 | | | %.1f | %.0f%% | 2.00 |\n",
               limit, k ? cpu / k : 0., k ? limit * cpu / k / 1e4 : 0.);
    }
}

static void print_reference(const char *when, const reference *ref, int clients) {
    if (!ref->ok) {
        printf("- reference %s: did not run\n", when);
        return;
    }
    printf("- reference %s (redis-benchmark -c %d -P 32): acquire script %.0f/s "
           "(%.1f%% grants), release script %.0f/s (%.1f%% full releases: delete, tombstone, "
           "publish) -> %.0f cycles/s; server time inside EVALSHA (commandstats) %.1f µs per "
           "acquire, %.1f µs per release\n",
           when, clients, ref->acq.rps, 100. * ref->grants, ref->rel.rps, 100. * ref->full_releases,
           ref->limit, ref->acq_exec_us, ref->rel_exec_us);
}

static void usage(const char *argv0) {
    fprintf(
        stderr,
        "usage: %s [options]\n"
        "  -i, --inflight LIST    operations in flight, comma-separated (default 1,64,1024)\n"
        "  -s, --seconds S        measured window per configuration (default 3)\n"
        "      --warmup S         warm-up before each window (default 0.5)\n"
        "      --rb-requests N    requests per redis-benchmark run (default 100000)\n"
        "      --rb-clients N     redis-benchmark connections (default 50, as redis-benchmark)\n"
        "      --rb-keyspace N    holds made for the release run (default 1000000)\n"
        "      --no-pin           do not pin redis-server and the benchmark to CPUs\n",
        argv0);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {{"inflight", required_argument, NULL, 'i'},
                                             {"seconds", required_argument, NULL, 's'},
                                             {"warmup", required_argument, NULL, 'w'},
                                             {"rb-requests", required_argument, NULL, 'n'},
                                             {"rb-clients", required_argument, NULL, 'c'},
                                             {"rb-keyspace", required_argument, NULL, 'k'},
                                             {"no-pin", no_argument, NULL, 'p'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int ns[MAX_CONFIGS], nn = 0, pin = 1, rb_clients = 50, i, opt, failed = 0;
    long rb_requests = 100000, rb_keyspace = 1000000;
    double window_s = 3., warmup_s = 0.5, limit = 0.;
    char sha[BENCH_SCRIPT_COUNT][41];
    result results[MAX_CONFIGS];
    reference before, after;
    bench_cpus cpus;
    redisContext *admin;
    test_redis r;

    while ((opt = getopt_long(argc, argv, "i:s:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'i': {
            char *p = optarg, *end;
            nn = 0;
            while (*p && nn < MAX_CONFIGS) {
                long v = strtol(p, &end, 10);
                if (end == p || v < 1 || v > 100000 || (*end != ',' && *end != '\0')) {
                    fprintf(stderr, "bad list '%s'\n", optarg);
                    return 2;
                }
                ns[nn++] = (int)v;
                p = *end == ',' ? end + 1 : end;
            }
            break;
        }
        case 's':
            window_s = strtod(optarg, NULL);
            break;
        case 'w':
            warmup_s = strtod(optarg, NULL);
            break;
        case 'n':
            rb_requests = strtol(optarg, NULL, 10);
            break;
        case 'c':
            rb_clients = atoi(optarg);
            break;
        case 'k':
            rb_keyspace = strtol(optarg, NULL, 10);
            break;
        case 'p':
            pin = 0;
            break;
        default:
            usage(argv[0]);
            return 2;
        }
    }
    if (!(window_s > 0.) || warmup_s < 0. || rb_requests < 1000 || rb_clients < 1 ||
        rb_keyspace < 1000) {
        usage(argv[0]);
        return 2;
    }
    if (nn == 0) {
        ns[nn++] = 1;
        ns[nn++] = 64;
        ns[nn++] = 1024;
    }
    signal(SIGPIPE, SIG_IGN);

    if (bench_start_with_scripts("throughput", &r, pin, &cpus, &admin, sha) != 0)
        return 1;

    memset(&before, 0, sizeof before);
    memset(&after, 0, sizeof after);
    if (bench_have_redis_benchmark()) {
        fprintf(stderr, "throughput: reference (redis-benchmark)...\n");
        if (run_reference(&r, admin, sha, rb_clients, rb_requests, rb_keyspace, &before) != 0)
            fprintf(stderr, "throughput: the reference run failed\n");
    }
    for (i = 0; i < nn; i++) {
        fprintf(stderr, "throughput: %d in flight...\n", ns[i]);
        if (run_config(r.port, ns[i], warmup_s, window_s, &cpus, admin, &results[i]) != 0)
            failed = 1;
    }
    if (bench_have_redis_benchmark()) {
        fprintf(stderr, "throughput: reference again (redis-benchmark)...\n");
        if (run_reference(&r, admin, sha, rb_clients, rb_requests, rb_keyspace, &after) != 0)
            fprintf(stderr, "throughput: the second reference run failed\n");
    }
    if (before.ok && after.ok)
        limit = (before.limit + after.limit) / 2.;
    else if (before.ok || after.ok)
        limit = before.ok ? before.limit : after.limit;
    else
        failed = 1;
    redisFree(admin);
    test_redis_stop(&r);

    printf("### Throughput (leash-bench-throughput)\n\n");
    print_table(results, nn, &before, &after, limit);
    printf("\nOne client, W lock handles on W distinct keys, each looping try-once acquire -> "
           "release (W operations in flight); cycles counted over %.1f s after %.1f s of "
           "warm-up. Limit = 1 / (1/acquire rate + 1/release rate) of redis-benchmark -P 32 "
           "calling leash's own scripts by EVALSHA (SHAs from SCRIPT LOAD of src/scripts.c), "
           "mean of a run before and after the leash runs. CPU per cycle: getrusage of this "
           "process and INFO cpu of the server over the window; server CPU busy = cycles/s x "
           "server CPU per cycle (100%% = the server's one thread never idle). The reference's "
           "random keys (a keyspace of %ld holds for the release run) cost the server more per "
           "script than leash's few hot keys, which is why leash can exceed the limit.\n",
           window_s, warmup_s, rb_keyspace);
    print_reference("before", &before, rb_clients);
    print_reference("after", &after, rb_clients);
    for (i = 0; i < nn; i++) {
        const result *x = &results[i];
        printf("- %d in flight: %.2f s; server time inside EVALSHA (commandstats) %.1f µs per call",
               x->n, x->seconds, x->exec_us);
        bench_print_steal(&x->steal);
        if (x->ok && x->steal.wall_ns > 0 && x->steal.server_busy_ms >= 0 &&
            x->steal.client_busy_ms >= 0) {
            /* CPU busy minus what this benchmark and its server used. */
            double wall_ms = (double)x->steal.wall_ns / 1e6;
            double srv =
                100. * (double)x->steal.server_busy_ms / wall_ms - x->rate * x->server_cpu_us / 1e4;
            double cli =
                100. * (double)x->steal.client_busy_ms / wall_ms - x->rate * x->client_cpu_us / 1e4;
            printf("; other processes used about %.0f%% of the server's CPU and %.0f%% of the "
                   "benchmark's",
                   srv > 0. ? srv : 0., cli > 0. ? cli : 0.);
        }
        if (x->errors)
            printf("; **%d errors** (first: %s)", x->errors, x->first_error);
        printf("\n");
    }
    printf("\n");
    bench_print_cpus(&cpus);
    return failed ? 1 : 0;
}
