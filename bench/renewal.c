/* SPDX-License-Identifier: MIT */
/*
 * leash-bench-renewal: what 100 000 held locks cost under the watchdog.
 *
 * One client takes --locks locks (distinct names, try-once acquires, 1024 in
 * flight) with the watchdog on (lease --lease ms, renewal every lease/3),
 * then holds them all for a window of --window seconds (default: two renew
 * intervals, so every lock renews twice in it) while the loop does nothing
 * but renew. Over the window:
 *   - client CPU (getrusage of this process) per second, as % of one core;
 *   - Redis commands per second spent on renewal (INFO commandstats: the
 *     EVALSHA calls of the renew script, each renewing up to 100 locks, and
 *     the calls the script makes inside the server), and the server's CPU;
 *   - renewals per second (leash_stats).
 * Memory per held lock: the growth of this process's RSS (and of malloc's
 * heap in use, mallinfo2) from before the first handle was made to when
 * every lock is held, divided by the locks. The bench's own array of handle
 * pointers is made before the first measure and is not counted.
 *
 * The reference, same server and CPUs: redis-benchmark -P 32 calling leash's
 * renew script by EVALSHA with a batch of 100 held locks per call (what the
 * watchdog sends), i.e. the server's capacity in lock renewals per second;
 * the table gives the share of it that the watchdog uses.
 *
 * Redis Cluster (--cluster): the same on a Redis Cluster of 3 masters with
 * a replica each (common.h: every node on the server's CPU), after the
 * one-server run, as a second row. The watchdog batches renewals per hash
 * slot there (a script's keys must share one), so the renew commands per
 * second and the locks per command are given too. Each run is a process of
 * its own (forked), so that both measure memory from the same start.
 *
 * Redlock (--redlock): --redlock-locks locks (default 10 000) held by a
 * LEASH_TOPOLOGY_REDLOCK client over Redlock's 5 independent servers
 * (common.h: all on the server's CPU), beside the same number held on the
 * one server (a run of its own, right after the main one): client CPU,
 * renewals, renew commands and server CPU summed over the five, memory.
 *
 * Output: one markdown table and notes. Exit 0 when everything ran and every
 * lock was still held at the end.
 */
#define _GNU_SOURCE

#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ev.h>
#include <hiredis/hiredis.h>
#include <leash/adapters/libev.h>
#include <leash/leash.h>

#include "common.h"
#include "prim/lock.h" /* sizeof(struct leash_lock), for the notes only */
#include "redis_server.h"

#define RB_TOKEN "7e7e0123456789abcdef0123456789ab"

/* ---- the reference: redis-benchmark on the renew script ---- */

typedef struct reference {
    int ok;
    bench_rb rb;
    double capacity; /* lock renewals per second */
    double renewed;  /* fraction of renewals that found the lock held */
    double exec_us;  /* commandstats usec per EVALSHA */
} reference;

static int run_reference(test_redis *r, redisContext *admin, const bench_scripts *sc, long lease_ms,
                         long requests, reference *ref) {
    char keys[BENCH_RENEW_BATCH][40], n[24];
    const char *key_ptrs[BENCH_RENEW_BATCH];
    const char *opts[] = {"-c", "50", "-P", "32", "-n", n, NULL};
    bench_cmdstats s0, s1, d;
    bench_script_runs runs;
    bench_call call;
    int i;

    memset(ref, 0, sizeof *ref);
    snprintf(n, sizeof n, "%ld", requests);
    if (bench_populate_holds(admin, "bench:rb:renew:", BENCH_RENEW_BATCH, RB_TOKEN, 600000) != 0)
        return -1;
    for (i = 0; i < BENCH_RENEW_BATCH; i++) {
        snprintf(keys[i], sizeof keys[i], "bench:rb:renew:%012d", i);
        key_ptrs[i] = keys[i];
    }
    if (bench_call_renew(&call, sc, key_ptrs, BENCH_RENEW_BATCH, RB_TOKEN, lease_ms,
                         "bench:rb:released") != 0)
        return -1;
    if (bench_cmdstats_read(admin, &s0) != 0 ||
        bench_redis_benchmark_call(r->port, 120., opts, &call, &ref->rb) != 0 ||
        bench_cmdstats_read(admin, &s1) != 0)
        return -1;
    bench_cmdstats_delta(&s0, &s1, &d);
    bench_script_runs_of(&d, &runs);
    if (runs.scripts > 0) {
        ref->renewed = (double)runs.renewed / (double)(runs.scripts * BENCH_RENEW_BATCH);
        ref->exec_us = (double)runs.script_usec / (double)runs.scripts;
    }
    ref->capacity = ref->rb.rps * BENCH_RENEW_BATCH;
    ref->ok = ref->capacity > 0.;
    return ref->ok ? 0 : -1;
}

/* ---- leash ---- */

typedef struct run {
    struct ev_loop *loop;
    leash_client *client;
    leash_lock **locks;
    long n, next, held, inflight, max_inflight;
    int errors;
    char first_error[128];
    ev_timer timer;
    int timer_fired;
} run;

static void on_acquired(leash_lock *l, int status, void *arg);

static void fill(run *r) {
    while (r->inflight < r->max_inflight && r->next < r->n) {
        int rc = leash_acquire(r->locks[r->next], 0, on_acquired, r);
        r->next++;
        if (rc != LEASH_OK) {
            if (r->errors++ == 0)
                snprintf(r->first_error, sizeof r->first_error, "leash_acquire: %s",
                         leash_status_name(rc));
            continue;
        }
        r->inflight++;
    }
}

static void on_acquired(leash_lock *l, int status, void *arg) {
    run *r = arg;

    (void)l;
    r->inflight--;
    if (status == LEASH_OK)
        r->held++;
    else if (r->errors++ == 0)
        snprintf(r->first_error, sizeof r->first_error, "acquire: %s", leash_status_name(status));
    fill(r);
    if (r->inflight == 0 && r->next == r->n)
        ev_break(r->loop, EVBREAK_ALL);
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents) {
    run *r = (run *)((char *)w - offsetof(run, timer));

    (void)revents;
    r->timer_fired = 1;
    ev_break(loop, EVBREAK_ALL);
}

/* Runs the loop for s seconds (the watchdog works meanwhile). */
static void run_for(run *r, double s) {
    r->timer_fired = 0;
    ev_timer_set(&r->timer, s, 0.);
    ev_timer_start(r->loop, &r->timer);
    while (!r->timer_fired)
        ev_run(r->loop, 0);
}

typedef struct result {
    int ok;
    long locks, held_end;
    long lease_ms;
    double window_s, acquire_s;
    double cpu_pct, server_cpu_pct, replica_cpu_pct;
    double renewals_per_s, evalsha_per_s, inner_per_s, renew_commands_per_s;
    double renewals_per_lock;
    double rss_per_lock, heap_per_lock;
    uint64_t losts, disconnects;
    bench_steal steal;
    int errors;
    char first_error[128];
} result;

static int64_t heap_in_use(void) {
    struct mallinfo2 mi = mallinfo2();
    return (int64_t)(mi.uordblks + mi.hblkhd);
}

static int run_leash(const bench_target *t, bench_admin *admin, const bench_cpus *cpus, long n,
                     long lease_ms, double window_s, result *res) {
    run r;
    leash_stats st0, st1;
    bench_cmdstats c0, c1, d;
    bench_script_runs runs;
    int64_t rss0, rss1, heap0, heap1, t0, t1, cpu0, cpu1;
    double scpu0, scpu1, rcpu0, rcpu1;
    long i;
    int rc = -1;

    memset(&r, 0, sizeof r);
    memset(res, 0, sizeof *res);
    res->locks = n;
    res->lease_ms = lease_ms;
    r.n = n;
    r.max_inflight = 1024;
    r.loop = ev_loop_new(EVFLAG_AUTO);
    r.locks = calloc((size_t)n, sizeof(*r.locks));
    if (r.loop == NULL || r.locks == NULL || (r.client = bench_client_new_at(r.loop, t)) == NULL)
        goto out;
    ev_timer_init(&r.timer, on_timer, 0., 0.);
    if (bench_wait_ready(r.loop, &r.client, 1, t, 5000) != 0) {
        fprintf(stderr, "renewal: the client did not connect in 5 s\n");
        goto out;
    }
    memset(r.locks, 0, (size_t)n * sizeof(*r.locks)); /* resident before the first measure */
    run_for(&r, 0.1);
    rss0 = bench_rss_bytes();
    heap0 = heap_in_use();

    t0 = bench_now_ns();
    for (i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "bench:renew:%ld", i);
        r.locks[i] = leash_lock_new(r.client, name);
        if (r.locks[i] == NULL ||
            (lease_ms != 30000 && leash_lock_set_watchdog(r.locks[i], lease_ms, 0) != LEASH_OK)) {
            fprintf(stderr, "renewal: could not make lock %ld\n", i);
            goto out;
        }
    }
    fill(&r);
    if (r.inflight > 0)
        ev_run(r.loop, 0);
    res->acquire_s = (double)(bench_now_ns() - t0) / 1e9;
    if (r.held != n) {
        fprintf(stderr, "renewal: %ld of %ld locks held (%s)\n", r.held, n, r.first_error);
        goto out;
    }
    run_for(&r, 0.2); /* let the last replies and buffers settle */
    rss1 = bench_rss_bytes();
    heap1 = heap_in_use();
    res->rss_per_lock = rss0 >= 0 && rss1 >= 0 ? (double)(rss1 - rss0) / (double)n : -1.;
    res->heap_per_lock = (double)(heap1 - heap0) / (double)n;

    /* The window: nothing but the watchdog. */
    bench_steal_begin(cpus, &res->steal);
    leash_client_stats(r.client, &st0);
    bench_admin_cmdstats(admin, &c0);
    scpu0 = bench_admin_cpu_s(admin, 0);
    rcpu0 = bench_admin_cpu_s(admin, 1);
    cpu0 = bench_cpu_ns();
    t0 = bench_now_ns();
    run_for(&r, window_s);
    t1 = bench_now_ns();
    cpu1 = bench_cpu_ns();
    scpu1 = bench_admin_cpu_s(admin, 0);
    rcpu1 = bench_admin_cpu_s(admin, 1);
    bench_admin_cmdstats(admin, &c1);
    leash_client_stats(r.client, &st1);
    bench_steal_end(cpus, &res->steal);

    res->window_s = (double)(t1 - t0) / 1e9;
    res->cpu_pct = (double)(cpu1 - cpu0) / 1e9 / res->window_s * 100.;
    if (scpu0 >= 0. && scpu1 >= 0.)
        res->server_cpu_pct = (scpu1 - scpu0) / res->window_s * 100.;
    if (rcpu0 >= 0. && rcpu1 >= 0.)
        res->replica_cpu_pct = (rcpu1 - rcpu0) / res->window_s * 100.;
    bench_cmdstats_delta(&c0, &c1, &d);
    bench_script_runs_of(&d, &runs);
    res->evalsha_per_s = (double)runs.scripts / res->window_s;
    res->inner_per_s = (double)runs.inner / res->window_s;
    res->renewals_per_s = (double)(st1.renewals - st0.renewals) / res->window_s;
    res->renewals_per_lock = (double)(st1.renewals - st0.renewals) / (double)n;
    res->renew_commands_per_s = (double)(st1.renew_commands - st0.renew_commands) / res->window_s;
    res->losts = st1.losts;
    res->disconnects = st1.disconnects;
    for (i = 0; i < n; i++)
        res->held_end += leash_held(r.locks[i]);
    res->ok = res->held_end == n && st1.losts == 0;
    rc = res->ok ? 0 : -1;
out:
    res->errors = r.errors;
    snprintf(res->first_error, sizeof res->first_error, "%s", r.first_error);
    if (r.client != NULL)
        leash_client_free(r.client); /* releases every lock, best-effort */
    if (r.loop != NULL) {
        ev_run(r.loop, EVRUN_NOWAIT);
        ev_loop_destroy(r.loop);
    }
    free(r.locks);
    return rc;
}

/* run_leash in a process of its own (forked), so that its memory figures
 * start from this process's state, whatever ran before. */
static int run_forked(const bench_target *t, const bench_cpus *cpus, long n, long lease_ms,
                      double window_s, result *res) {
    result *shared = bench_shared_alloc(sizeof *shared);
    int status = 0, rc = -1;
    pid_t pid;

    memset(res, 0, sizeof *res);
    res->locks = n;
    res->lease_ms = lease_ms;
    if (shared == NULL)
        return -1;
    pid = bench_fork();
    if (pid == 0) {
        bench_admin admin;
        int child_rc = -1;
        if (bench_admin_open(&admin, t) == 0) {
            child_rc = run_leash(t, &admin, cpus, n, lease_ms, window_s, shared);
            bench_admin_close(&admin);
        } else {
            fprintf(stderr, "renewal: no admin connection\n");
        }
        fflush(stdout);
        fflush(stderr);
        _exit(child_rc == 0 ? 0 : 1);
    }
    if (pid > 0) {
        while (waitpid(pid, &status, 0) < 0)
            ;
        *res = *shared;
        rc = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
    } else {
        perror("renewal: fork");
    }
    bench_shared_free(shared, sizeof *shared);
    return rc;
}

static void print_row(const char *where, const result *res, const result *one,
                      const reference *ref) {
    long n = res->locks, lease_ms = res->lease_ms;

    if (!(res->window_s > 0.)) {
        printf("| %s | %ld | %g s | failed | | | | | | | | | | |\n", where, n,
               (double)lease_ms / 1000.);
        return;
    }
    printf("| %s | %ld | %g s / %g s | %.1f | **%.2f** | ", where, n, (double)lease_ms / 1000.,
           (double)(lease_ms / 3) / 1000., res->window_s, res->cpu_pct);
    if (one != NULL && one->cpu_pct > 0.)
        printf("%.2f", res->cpu_pct / one->cpu_pct);
    else
        printf("1.00");
    printf(" | %.0f | **%.0f** | %.1f | %.0f | %.1f", res->renewals_per_s,
           res->renew_commands_per_s,
           res->evalsha_per_s > 0. ? res->renewals_per_s / res->evalsha_per_s : 0.,
           res->inner_per_s, res->server_cpu_pct);
    if (res->replica_cpu_pct > 0.)
        printf(" (+ %.1f replicas)", res->replica_cpu_pct);
    printf(" | ");
    if (ref != NULL && ref->ok)
        printf("%.1f%% | ", 100. * res->renewals_per_s / ref->capacity);
    else
        printf("n/a | ");
    printf("%.0f B | **%.0f B** |\n", res->rss_per_lock, res->heap_per_lock);
}

static void print_run_notes(const char *where, const result *res) {
    long n = res->locks;

    printf("- %s: %ld locks acquired in %.1f s; renewals per lock in the window %.2f; renew "
           "EVALSHA %.1f/s (commandstats) for %.1f renew commands/s sent (leash_stats); locks "
           "still held at the end %ld of %ld; lost %llu",
           where, n, res->acquire_s, res->renewals_per_lock, res->evalsha_per_s,
           res->renew_commands_per_s, res->held_end, n, (unsigned long long)res->losts);
    if (res->disconnects)
        printf("; **%llu disconnects**", (unsigned long long)res->disconnects);
    bench_print_steal(&res->steal);
    if (res->errors)
        printf("; **%d errors** (first: %s)", res->errors, res->first_error);
    printf("\n");
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [options]\n"
            "  -n, --locks N       held locks (default 100000)\n"
            "  -l, --lease MS      watchdog lease (default 30000; renewal every lease/3)\n"
            "  -w, --window S      measured window (default: two renew intervals)\n"
            "      --rb-requests N redis-benchmark calls of the renew script (default 5000)\n"
            "      --cluster       also on a Redis Cluster (3 masters + 3 replicas)\n"
            "      --redlock       also on Redlock's 5 servers (and the same locks on one)\n"
            "      --redlock-locks N  held locks there (default 10000)\n"
            "      --no-pin        do not pin redis-server and the benchmark to CPUs\n",
            argv0);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"locks", required_argument, NULL, 'n'},  {"lease", required_argument, NULL, 'l'},
        {"window", required_argument, NULL, 'w'}, {"rb-requests", required_argument, NULL, 'q'},
        {"cluster", no_argument, NULL, 'C'},      {"no-pin", no_argument, NULL, 'p'},
        {"redlock", no_argument, NULL, 'L'},      {"redlock-locks", required_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    long n = 100000, lease_ms = 30000, rb_requests = 5000, rl_n = 10000;
    double window_s = 0.;
    int pin = 1, opt, failed = 0, cluster = 0, intact = 1, redlock = 0, rl_intact = 1;
    bench_scripts sc;
    reference ref;
    result res, cres, lone, lres;
    bench_cpus cpus;
    bench_target single, ct, rt;
    redisContext *admin;
    test_redis r;

    while ((opt = getopt_long(argc, argv, "n:l:w:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            n = strtol(optarg, NULL, 10);
            break;
        case 'l':
            lease_ms = strtol(optarg, NULL, 10);
            break;
        case 'w':
            window_s = strtod(optarg, NULL);
            break;
        case 'q':
            rb_requests = strtol(optarg, NULL, 10);
            break;
        case 'C':
            cluster = 1;
            break;
        case 'L':
            redlock = 1;
            break;
        case 'N':
            rl_n = strtol(optarg, NULL, 10);
            break;
        case 'p':
            pin = 0;
            break;
        default:
            usage(argv[0]);
            return 2;
        }
    }
    if (n < 1 || n > 10000000 || rl_n < 1 || rl_n > 10000000 || lease_ms < 30 || window_s < 0. ||
        rb_requests < 100) {
        usage(argv[0]);
        return 2;
    }
    if (window_s == 0.)
        window_s = 2. * (double)(lease_ms / 3) / 1000.;
    signal(SIGPIPE, SIG_IGN);
    if (bench_start_with_scripts("renewal", &r, pin, &cpus, &admin, &sc) != 0)
        return 1;
    bench_target_single(&single, r.port);
    memset(&ref, 0, sizeof ref);
    memset(&cres, 0, sizeof cres);
    memset(&lone, 0, sizeof lone);
    memset(&lres, 0, sizeof lres);
    if (bench_have_redis_benchmark()) {
        fprintf(stderr, "renewal: reference (redis-benchmark)...\n");
        if (run_reference(&r, admin, &sc, lease_ms, rb_requests, &ref) != 0)
            fprintf(stderr, "renewal: the reference run failed\n");
    }
    fprintf(stderr, "renewal: %ld locks, lease %ld ms, window %.1f s...\n", n, lease_ms, window_s);
    if (run_forked(&single, &cpus, n, lease_ms, window_s, &res) != 0)
        failed = 1;
    if (redlock) {
        /* The one-server figures Redlock's compare with, at the same count:
         * a clean server first (the last run's releases are best-effort). */
        bench_flushall(&r);
        fprintf(stderr, "renewal: %ld locks on one server (for Redlock's row)...\n", rl_n);
        if (run_forked(&single, &cpus, rl_n, lease_ms, window_s, &lone) != 0)
            failed = 1;
    }
    redisFree(admin);
    test_redis_stop(&r);
    if (cluster) {
        test_cluster c;

        fprintf(stderr, "renewal: starting a Redis Cluster...\n");
        if (bench_start_cluster(&c, &cpus, &ct) != 0) {
            test_cluster_stop(&c);
            cres.locks = n;
            cres.lease_ms = lease_ms;
            failed = 1;
        } else {
            fprintf(stderr, "renewal: %ld locks on the cluster...\n", n);
            if (run_forked(&ct, &cpus, n, lease_ms, window_s, &cres) != 0)
                failed = 1;
            intact = bench_cluster_intact(&c, &ct);
            if (!intact)
                failed = 1;
            test_cluster_stop(&c);
        }
    }

    if (redlock) {
        bench_redlock rl;

        fprintf(stderr, "renewal: starting the Redlock servers...\n");
        if (bench_start_redlock(&rl, &cpus, &rt) != 0) {
            lres.locks = rl_n;
            lres.lease_ms = lease_ms;
            failed = 1;
        } else {
            fprintf(stderr, "renewal: %ld locks on Redlock...\n", rl_n);
            if (run_forked(&rt, &cpus, rl_n, lease_ms, window_s, &lres) != 0)
                failed = 1;
            rl_intact = bench_redlock_intact(&rl);
            if (!rl_intact)
                failed = 1;
            bench_stop_redlock(&rl);
        }
    }

    printf("### Renewal at scale (leash-bench-renewal)\n\n");
    printf("| Redis | held locks | lease / renew interval | window s | client CPU %% of one core "
           "| x one server | renewals/s | renew commands/s | locks per renew command "
           "| calls inside the scripts/s | server CPU %% | share of the server's renew capacity "
           "| RSS per lock | heap per lock |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    print_row("one server", &res, NULL, &ref);
    if (cluster)
        print_row("cluster", &cres, &res, NULL);
    printf("\nOne client holds every lock with the watchdog on; the window starts once all are "
           "held and lasts two renew intervals, so every lock renews about twice in it. "
           "Client CPU: getrusage of the process over the window. Renew commands: EVALSHA "
           "of the renew script in INFO commandstats over the window (up to 100 locks per "
           "call; inside it, GET and PEXPIRE per lock, and PUBLISH only for a lock someone "
           "waits for). Memory: RSS and malloc heap "
           "growth from before the first handle to all locks held, per lock, each run in a "
           "process of its own; a held lock is "
           "its handle (sizeof(struct leash_lock) = %zu B), one allocation for its key names "
           "and a libev timer of the adapter (%zu B), plus malloc's overhead and libev's "
           "timer heap.\n",
           sizeof(struct leash_lock), sizeof(leash_libev_timer));
    if (ref.ok)
        printf("Reference: redis-benchmark -c 50 -P 32 calling the renew script with %d held "
               "locks per call: %.0f calls/s = %.0f lock renewals/s (%.0f%% found held; %.1f µs "
               "of server time per call); redis-benchmark CPU %.1f µs per call.\n",
               BENCH_RENEW_BATCH, ref.rb.rps, ref.capacity, 100. * ref.renewed, ref.exec_us,
               ref.rb.cpu_us);
    if (cluster)
        printf("Redis Cluster: 3 masters with a replica each (tests/support/redis_cluster.c, "
               "cluster-node-timeout 5 s), all six redis-servers on the server's CPU; the "
               "client has the masters as seeds (LEASH_TOPOLOGY_CLUSTER) and the same lock "
               "names, which spread over the 16384 hash slots; the watchdog batches renewals "
               "per slot (a script's keys must share one). Server CPU and commands: INFO "
               "summed over the masters, the replicas' CPU in brackets. No redis-benchmark "
               "reference on the cluster: the one-server row of the same run is the "
               "cluster's.%s\n",
               intact ? "" : " **A node changed its role during the run (a failover).**");
    print_run_notes("one server", &res);
    if (cluster)
        print_run_notes("cluster", &cres);
    if (redlock) {
        printf("\n| Redlock, 5 servers | held locks | lease / renew interval | window s "
               "| client CPU %% of one core | x one server | renewals/s | renew commands/s "
               "| locks per renew command | calls inside the scripts/s | server CPU %% "
               "| share of the server's renew capacity | RSS per lock | heap per lock |\n");
        printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        print_row("one server", &lone, NULL, &ref);
        print_row("Redlock", &lres, &lone, NULL);
        printf("\nRedlock: 5 independent redis-servers (tests/support/redis_server.c, as the "
               "Redlock tests start them), all on the server's CPU; the client has the five "
               "as its nodes (LEASH_TOPOLOGY_REDLOCK) and holds %ld locks (each on a majority "
               "at least: an acquire goes to all five), every renewal going to all five; the "
               "one-server row holds the same %ld locks on the single server, in a run of its "
               "own right after the main one, so that the ratio compares like with like. "
               "Renew commands/s: leash_stats; locks per renew command: renewals / EVALSHA "
               "of the renew script, summed over the five (INFO commandstats); server CPU: "
               "INFO cpu summed over the five.%s\n",
               rl_n, rl_n,
               rl_intact ? "" : " **A Redlock server stopped answering during the run.**");
        if (lone.renew_commands_per_s > 0. && lres.renew_commands_per_s > 0.)
            printf("Renew EVALSHA run (INFO commandstats, all servers) per renew command sent "
                   "(leash_stats): one server %.2f, Redlock %.2f (each of its renew commands "
                   "goes to the %d servers).\n",
                   lone.evalsha_per_s / lone.renew_commands_per_s,
                   lres.evalsha_per_s / lres.renew_commands_per_s, BENCH_REDLOCK_N);
        print_run_notes("one server, Redlock's count", &lone);
        print_run_notes("Redlock", &lres);
    }
    printf("\n");
    bench_print_cpus(&cpus);
    return failed ? 1 : 0;
}
