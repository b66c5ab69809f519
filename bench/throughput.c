/* SPDX-License-Identifier: MIT */
/*
 * leash-bench-throughput: acquire+release cycles per second on distinct keys,
 * one client, with 1, 64 and 1024 operations in flight; the Redis calls a
 * cycle costs; and Redis memory under a long run.
 *
 * Each of W lock handles (W = operations in flight, each its own key) loops:
 * leash_acquire(try once) -> callback -> leash_release() -> callback -> again.
 * After a warm-up, cycles are counted over a window of --seconds.
 *
 * The reference, on the same server and CPUs in the same run, is the
 * server's limit for leash's own scripts: redis-benchmark -P 32 calling the
 * acquire script by EVALSHA on fresh keys (the grant path), then the release
 * script on keys that hold a lock of the token (the release path: GET and
 * DEL). The SHAs come from SCRIPT LOAD of the sources that the library
 * itself loads (src/dialect/leash.c), the commands as its dialect builds them. A cycle costs
 * the server one of each, so the limit in cycles/s is
 * 1 / (1/acquires per s + 1/releases per s). redis-benchmark draws its keys
 * at random (__rand_int__), so the release keyspace is filled beforehand
 * with --rb-keyspace holds and a few draws hit a key twice (a cheaper
 * "not ours" path); INFO commandstats says how many releases deleted a
 * lock, and the notes give it. The reference runs before and after the
 * leash runs; the limit is their mean.
 *
 * Redis calls per cycle: every command INFO commandstats counted over the
 * window (EVALSHA and the calls its Lua makes: TIME, SET, GET, DEL, ...;
 * not the benchmark's own INFO), divided by the cycles.
 *
 * Memory: one more run at 1024 in flight for --memory-seconds with the
 * client's default lease (30 s), so that anything a cycle left behind would
 * have expired twice over; INFO memory used_memory before the first acquire,
 * every few seconds, and at the end.
 *
 * Redis Cluster (--cluster): the same cycles at 1024 in flight
 * (--cluster-inflight) on a Redis Cluster of 3 masters with a replica each
 * (common.h: every node on the server's CPU), right after the one-server
 * runs, and a table of the two side by side: cycles/s, client CPU per
 * cycle (target: at most 1.2 x the one server's), server CPU per cycle
 * (INFO cpu summed over the masters; the replicas' apart) and Redis calls
 * per cycle (INFO commandstats summed over the masters).
 *
 * Redlock (--redlock): the same cycles at 1024 in flight (--redlock-inflight)
 * by a LEASH_TOPOLOGY_REDLOCK client over Redlock's 5 independent servers
 * (common.h: all on the server's CPU), after the one-server runs, and a
 * table beside the one server's: cycles/s, client CPU per cycle, server CPU
 * per cycle and Redis calls per cycle, both summed over the five.
 *
 * Output: markdown tables and notes. Exit 0 when everything ran.
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
/* Client CPU per cycle on a cluster, at most this times the one server's. */
#define CLUSTER_CPU_TARGET 1.2
#define MAX_MEM_SAMPLES 256
#define RB_TOKEN "5eed0123456789abcdef0123456789ab"
#define RB_CHANNEL "bench:rb:released"
/* The figures the issue gives for the engine before the one-key layout. */
#define OLD_ENGINE_CALLS "12 calls today (redis-py's lock: 4, node-redlock: 6)"

/* ---- the reference: redis-benchmark on leash's scripts ---- */

typedef struct reference {
    int ok;
    bench_rb acq, rel;
    double limit;         /* cycles per second */
    double full_releases; /* fraction of release calls that deleted a lock */
    double grants;        /* fraction of acquire calls that granted */
    double calls_per_cycle;
    double server_cpu_per_cycle_us;
    double acq_exec_us, rel_exec_us; /* commandstats usec per EVALSHA of each run */
} reference;

static double per(long long v, long long n) {
    return n > 0 ? (double)v / (double)n : 0.;
}

static int run_reference(test_redis *r, redisContext *admin, const bench_scripts *sc, int clients,
                         long requests, long keyspace, reference *ref) {
    char n[24], c[16], ks[24];
    bench_cmdstats s0, s1, s2, d;
    bench_script_runs acq_runs, rel_runs;
    double cpu0, cpu1, cpu2;
    const char *acq_opts[] = {"-c", c, "-P", "32", "-n", n, "-r", "2000000000", NULL};
    const char *rel_opts[] = {"-c", c, "-P", "32", "-n", n, "-r", ks, NULL};
    bench_call acq, rel;

    memset(ref, 0, sizeof *ref);
    snprintf(n, sizeof n, "%ld", requests);
    snprintf(c, sizeof c, "%d", clients);
    snprintf(ks, sizeof ks, "%ld", keyspace);
    if (bench_call_acquire(&acq, sc, "bench:rb:acq:__rand_int__", RB_TOKEN, 30000) != 0 ||
        bench_call_release(&rel, sc, "bench:rb:rel:__rand_int__", RB_TOKEN, RB_CHANNEL) != 0)
        return -1;
    bench_flushall(r);
    if (bench_populate_holds(admin, "bench:rb:rel:", keyspace, RB_TOKEN, 600000) != 0) {
        fprintf(stderr, "throughput: could not fill the release keyspace\n");
        return -1;
    }
    cpu0 = bench_server_cpu_s(admin);
    if (bench_cmdstats_read(admin, &s0) != 0 ||
        bench_redis_benchmark_call(r->port, 120., acq_opts, &acq, &ref->acq) != 0)
        return -1;
    cpu1 = bench_server_cpu_s(admin);
    if (bench_cmdstats_read(admin, &s1) != 0 ||
        bench_redis_benchmark_call(r->port, 120., rel_opts, &rel, &ref->rel) != 0)
        return -1;
    cpu2 = bench_server_cpu_s(admin);
    if (bench_cmdstats_read(admin, &s2) != 0)
        return -1;
    bench_cmdstats_delta(&s0, &s1, &d);
    bench_script_runs_of(&d, &acq_runs);
    bench_cmdstats_delta(&s1, &s2, &d);
    bench_script_runs_of(&d, &rel_runs);
    ref->grants = per(acq_runs.grants, acq_runs.scripts);
    ref->acq_exec_us = per(acq_runs.script_usec, acq_runs.scripts);
    ref->full_releases = per(rel_runs.deletes, rel_runs.scripts);
    ref->rel_exec_us = per(rel_runs.script_usec, rel_runs.scripts);
    /* One acquire and one release request make a cycle. */
    ref->calls_per_cycle = per(acq_runs.total + rel_runs.total, requests);
    if (!(ref->acq.rps > 0.) || !(ref->rel.rps > 0.))
        return -1;
    ref->limit = 1. / (1. / ref->acq.rps + 1. / ref->rel.rps);
    /* Server CPU per acquire + release: each run's CPU over its requests. */
    if (cpu0 >= 0. && cpu2 >= 0.)
        ref->server_cpu_per_cycle_us =
            ((cpu1 - cpu0) / (double)requests + (cpu2 - cpu1) / (double)requests) * 1e6;
    ref->ok = 1;
    bench_flushall(r);
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

/* used_memory and keys at one moment of the memory run. */
typedef struct mem_sample {
    double at_s; /* since the first acquire */
    long long used, keys;
} mem_sample;

struct run {
    struct ev_loop *loop;
    leash_client *client;
    bench_admin *admin;
    const bench_cpus *cpus;
    slot *slots;
    int n, active, phase;
    double warmup_s, window_s;
    ev_timer phase_timer, guard;
    int64_t cycles;
    int64_t win_cycles0, win_cycles1;
    int64_t t0, t1, cpu0, cpu1;
    double scpu0, scpu1, rcpu0, rcpu1; /* the masters', the replicas' */
    bench_cmdstats cs0, cs1;
    bench_steal steal;
    int errors;
    char first_error[128];
    int timed_out;
    /* memory run: interval 0 = no samples */
    double mem_interval_s;
    ev_timer mem_timer;
    int64_t started;
    mem_sample mem[MAX_MEM_SAMPLES];
    int nmem;
};

static void note_error(run *r, const char *what, int status) {
    if (r->errors++ == 0)
        snprintf(r->first_error, sizeof r->first_error, "%s: %s", what, leash_status_name(status));
}

static void sample_memory(run *r) {
    mem_sample *m;

    if (r->nmem == MAX_MEM_SAMPLES)
        return;
    m = &r->mem[r->nmem++];
    m->at_s = (double)(bench_now_ns() - r->started) / 1e9;
    m->used = bench_admin_used_memory(r->admin);
    m->keys = bench_admin_db_keys(r->admin);
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

static void on_mem_timer(struct ev_loop *loop, ev_timer *w, int revents) {
    run *r = (run *)((char *)w - offsetof(run, mem_timer));

    (void)loop;
    (void)revents;
    /* The window's end takes its own sample; one just before it would
     * only repeat it. */
    if (r->phase == PH_WINDOW &&
        (double)(bench_now_ns() - r->t0) / 1e9 < r->window_s - r->mem_interval_s / 2.)
        sample_memory(r);
}

static void on_phase(struct ev_loop *loop, ev_timer *w, int revents) {
    run *r = (run *)((char *)w - offsetof(run, phase_timer));

    (void)revents;
    if (r->phase == PH_WARMUP) {
        r->phase = PH_WINDOW;
        bench_steal_begin(r->cpus, &r->steal);
        bench_admin_cmdstats(r->admin, &r->cs0);
        r->scpu0 = bench_admin_cpu_s(r->admin, 0);
        r->rcpu0 = bench_admin_cpu_s(r->admin, 1);
        r->win_cycles0 = r->cycles;
        r->cpu0 = bench_cpu_ns();
        r->t0 = bench_now_ns();
        ev_timer_set(w, r->window_s, 0.);
        ev_timer_start(loop, w);
        if (r->mem_interval_s > 0.) {
            ev_timer_set(&r->mem_timer, r->mem_interval_s, r->mem_interval_s);
            ev_timer_start(loop, &r->mem_timer);
        }
        return;
    }
    r->t1 = bench_now_ns();
    r->cpu1 = bench_cpu_ns();
    r->win_cycles1 = r->cycles;
    r->scpu1 = bench_admin_cpu_s(r->admin, 0);
    r->rcpu1 = bench_admin_cpu_s(r->admin, 1);
    bench_admin_cmdstats(r->admin, &r->cs1);
    bench_steal_end(r->cpus, &r->steal);
    if (r->mem_interval_s > 0.) {
        ev_timer_stop(loop, &r->mem_timer);
        sample_memory(r);
    }
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
    double client_cpu_us, server_cpu_us, evalsha_per_cycle, calls_per_cycle;
    double replica_cpu_us; /* INFO cpu of the replicas, summed */
    uint64_t disconnects;  /* leash_stats over the whole run */
    double exec_us;        /* commandstats usec per EVALSHA */
    bench_cmdstats cmds;   /* the window's deltas */
    mem_sample *mem;       /* the memory run's samples (malloc'ed), or NULL */
    int nmem;
    bench_steal steal;
    int errors;
    char first_error[128];
} result;

static int run_config(const bench_target *t, int n, double warmup_s, double window_s,
                      double mem_interval_s, const bench_cpus *cpus, bench_admin *admin,
                      result *res) {
    run *r = calloc(1, sizeof(*r));
    leash_stats st;
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
    r->mem_interval_s = mem_interval_s;
    if (r->loop == NULL || r->slots == NULL ||
        (r->client = bench_client_new_at(r->loop, t)) == NULL) {
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
    if (bench_wait_ready(r->loop, &r->client, 1, t, 5000) != 0) {
        fprintf(stderr, "throughput: the client did not connect in 5 s\n");
        goto out;
    }
    ev_timer_init(&r->phase_timer, on_phase, warmup_s, 0.);
    ev_timer_start(r->loop, &r->phase_timer);
    ev_timer_init(&r->guard, on_guard, warmup_s + window_s + 15., 0.);
    ev_timer_start(r->loop, &r->guard);
    ev_timer_init(&r->mem_timer, on_mem_timer, 0., 0.);
    r->started = bench_now_ns();
    if (mem_interval_s > 0.)
        sample_memory(r); /* the start: nothing held yet */
    r->active = n;
    for (i = 0; i < n; i++)
        slot_acquire(&r->slots[i]);
    if (r->active > 0)
        ev_run(r->loop, 0);
    ev_timer_stop(r->loop, &r->phase_timer);
    ev_timer_stop(r->loop, &r->guard);
    ev_timer_stop(r->loop, &r->mem_timer);
    if (r->t1 == 0 || r->timed_out) {
        fprintf(stderr, "throughput: %d in flight did not finish its window\n", n);
        goto out;
    }
    res->cycles = r->win_cycles1 - r->win_cycles0;
    res->seconds = (double)(r->t1 - r->t0) / 1e9;
    res->rate = (double)res->cycles / res->seconds;
    if (res->cycles > 0) {
        bench_script_runs runs;
        bench_cmdstats_delta(&r->cs0, &r->cs1, &res->cmds);
        bench_script_runs_of(&res->cmds, &runs);
        res->client_cpu_us = (double)(r->cpu1 - r->cpu0) / 1e3 / (double)res->cycles;
        if (r->scpu0 >= 0. && r->scpu1 >= 0.)
            res->server_cpu_us = (r->scpu1 - r->scpu0) * 1e6 / (double)res->cycles;
        if (r->rcpu0 >= 0. && r->rcpu1 >= 0.)
            res->replica_cpu_us = (r->rcpu1 - r->rcpu0) * 1e6 / (double)res->cycles;
        res->evalsha_per_cycle = per(runs.scripts, res->cycles);
        res->calls_per_cycle = per(runs.total, res->cycles);
        res->exec_us = per(runs.script_usec, runs.scripts);
    }
    if (r->nmem > 0 && (res->mem = malloc(sizeof(*res->mem) * (size_t)r->nmem)) != NULL) {
        memcpy(res->mem, r->mem, sizeof(*res->mem) * (size_t)r->nmem);
        res->nmem = r->nmem;
    }
    res->steal = r->steal;
    res->ok = 1;
    rc = 0;
out:
    res->errors = r->errors;
    snprintf(res->first_error, sizeof res->first_error, "%s", r->first_error);
    if (r->client != NULL) {
        leash_client_stats(r->client, &st);
        res->disconnects = st.disconnects;
        leash_client_free(r->client);
    }
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
           "| client CPU µs/cycle | server CPU µs/cycle | server CPU busy | EVALSHA/cycle "
           "| Redis calls/cycle |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (i = 0; i < count; i++) {
        const result *x = &res[i];
        if (!x->ok) {
            printf("| %d | failed | | | | | | | |\n", x->n);
            continue;
        }
        printf("| %d | %.0f | ", x->n, x->rate);
        if (limit > 0.)
            printf("%.2f", x->rate / limit);
        else
            printf("n/a");
        printf(" | %lld | %.1f | %.1f | %.0f%% | %.2f | **%.2f** |\n", (long long)x->cycles,
               x->client_cpu_us, x->server_cpu_us, x->rate * x->server_cpu_us / 1e4,
               x->evalsha_per_cycle, x->calls_per_cycle);
    }
    if (limit > 0.) {
        double cpu = 0., calls = 0.;
        int k = 0;
        if (before->ok) {
            cpu += before->server_cpu_per_cycle_us;
            calls += before->calls_per_cycle;
            k++;
        }
        if (after->ok) {
            cpu += after->server_cpu_per_cycle_us;
            calls += after->calls_per_cycle;
            k++;
        }
        printf("| redis-benchmark -P 32 (limit) | %.0f | 1.00 | | | %.1f | %.0f%% | 2.00 | %.2f "
               "|\n",
               limit, k ? cpu / k : 0., k ? limit * cpu / k / 1e4 : 0., k ? calls / k : 0.);
    }
}

static void print_memory(const result *x, double lease_s) {
    long long max = 0, kmax = 0, peak_in = -1, peak_after = -1;
    const mem_sample *first = &x->mem[0], *last = &x->mem[x->nmem - 1];
    int i;

    for (i = 0; i < x->nmem; i++) {
        const mem_sample *m = &x->mem[i];
        long long *peak = m->at_s < lease_s ? &peak_in : &peak_after;
        if (m->used > max)
            max = m->used;
        if (m->keys > kmax)
            kmax = m->keys;
        if (m->used > *peak)
            *peak = m->used;
    }
    printf("\n| Redis used_memory, %d in flight for %.0f s | start | max | end "
           "| growth (end - start) | peak after the first lease - peak during it "
           "| keys start / max / end |\n",
           x->n, x->seconds);
    printf("|---|---:|---:|---:|---:|---:|---:|\n");
    printf("| leash (target: under 64 MiB, and flat once the TTLs turn over) | %.2f MiB "
           "| **%.2f MiB** | %.2f MiB | **%+.1f KiB** | ",
           (double)first->used / 1048576., (double)max / 1048576., (double)last->used / 1048576.,
           (double)(last->used - first->used) / 1024.);
    /* Single samples swing with the keys in flight at that instant (0 to
     * W of them); the peaks of the two halves do not, so they show a trend. */
    if (peak_in >= 0 && peak_after >= 0)
        printf("**%+.1f KiB**", (double)(peak_after - peak_in) / 1024.);
    else
        printf("n/a (the run is shorter than a lease)");
    printf(" | %lld / %lld / %lld |\n", first->keys, kmax, last->keys);
    printf("\nSamples (s: used_memory in bytes, keys):");
    for (i = 0; i < x->nmem; i++)
        printf("%s %.0f: %lld, %lld", i ? ";" : "", x->mem[i].at_s, x->mem[i].used, x->mem[i].keys);
    printf(".\n");
}

static void print_reference(const char *when, const reference *ref, int clients) {
    if (!ref->ok) {
        printf("- reference %s: did not run\n", when);
        return;
    }
    printf("- reference %s (redis-benchmark -c %d -P 32): acquire script %.0f/s "
           "(%.1f%% grants), release script %.0f/s (%.1f%% full releases: GET, DEL) -> %.0f "
           "cycles/s; %.2f Redis calls per acquire + release; server time inside EVALSHA "
           "(commandstats) %.1f µs per acquire, %.1f µs per release\n",
           when, clients, ref->acq.rps, 100. * ref->grants, ref->rel.rps, 100. * ref->full_releases,
           ref->limit, ref->calls_per_cycle, ref->acq_exec_us, ref->rel_exec_us);
}

static void print_run_notes(const char *what, const result *x) {
    printf("- %s: %.2f s", what, x->seconds);
    if (!x->ok) {
        printf("; failed");
    } else {
        printf(", %lld cycles (%.0f/s)", (long long)x->cycles, x->rate);
        bench_print_calls(&x->cmds, (double)x->cycles, "; Redis calls per cycle: ");
        printf("; server time inside EVALSHA (commandstats) %.1f µs per call", x->exec_us);
        bench_print_steal(&x->steal);
        if (x->steal.wall_ns > 0 && x->steal.server_busy_ms >= 0 && x->steal.client_busy_ms >= 0) {
            /* CPU busy minus what this benchmark and its server used. */
            double wall_ms = (double)x->steal.wall_ns / 1e6;
            double srv = 100. * (double)x->steal.server_busy_ms / wall_ms -
                         x->rate * (x->server_cpu_us + x->replica_cpu_us) / 1e4;
            double cli =
                100. * (double)x->steal.client_busy_ms / wall_ms - x->rate * x->client_cpu_us / 1e4;
            printf("; other processes used about %.0f%% of the server's CPU and %.0f%% of the "
                   "benchmark's",
                   srv > 0. ? srv : 0., cli > 0. ? cli : 0.);
        }
    }
    if (x->errors)
        printf("; **%d errors** (first: %s)", x->errors, x->first_error);
    printf("\n");
}

/* One server against the cluster at each count of the cluster's list. */
static void print_cluster(const result *single, const result *clustered, int count) {
    int i;

    printf("\n| %s | operations in flight | cycles/s | x one server | client CPU µs/cycle "
           "| x one server (target: at most %.1f) | server CPU µs/cycle (masters) "
           "| replicas' CPU µs/cycle | Redis calls/cycle (masters) |\n",
           "Redis Cluster, 3 masters + 3 replicas", CLUSTER_CPU_TARGET);
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (i = 0; i < count; i++) {
        const result *a = &single[i], *b = &clustered[i];
        if (!a->ok || a->cycles == 0) {
            printf("| one server | %d | failed | | | | | | |\n", a->n);
        } else {
            printf("| one server | %d | %.0f | 1.00 | %.2f | 1.00 | %.1f | | %.2f |\n", a->n,
                   a->rate, a->client_cpu_us, a->server_cpu_us, a->calls_per_cycle);
        }
        if (!b->ok || b->cycles == 0) {
            printf("| cluster | %d | failed | | | | | | |\n", b->n);
            continue;
        }
        printf("| cluster | %d | %.0f | ", b->n, b->rate);
        if (a->ok && a->rate > 0.)
            printf("%.2f", b->rate / a->rate);
        else
            printf("n/a");
        printf(" | %.2f | ", b->client_cpu_us);
        if (a->ok && a->client_cpu_us > 0.)
            printf("**%.2f**", b->client_cpu_us / a->client_cpu_us);
        else
            printf("n/a");
        printf(" | %.1f | %.1f | %.2f |\n", b->server_cpu_us, b->replica_cpu_us,
               b->calls_per_cycle);
    }
}

/* One server against Redlock at each count of the Redlock list. */
static void print_redlock(const result *single, const result *rl, int count) {
    int i;

    printf("\n| Redlock, 5 servers | operations in flight | cycles/s | x one server "
           "| client CPU µs/cycle | x one server | server CPU µs/cycle (all servers) "
           "| x one server | Redis calls/cycle (all servers) |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (i = 0; i < count; i++) {
        const result *a = &single[i], *b = &rl[i];
        int base = a->ok && a->cycles > 0;
        if (!base)
            printf("| one server | %d | failed | | | | | | |\n", a->n);
        else
            printf("| one server | %d | %.0f | 1.00 | %.2f | 1.00 | %.1f | 1.00 | %.2f |\n", a->n,
                   a->rate, a->client_cpu_us, a->server_cpu_us, a->calls_per_cycle);
        if (!b->ok || b->cycles == 0) {
            printf("| Redlock | %d | failed | | | | | | |\n", b->n);
            continue;
        }
        printf("| Redlock | %d | **%.0f** | ", b->n, b->rate);
        if (base && a->rate > 0.)
            printf("**%.2f**", b->rate / a->rate);
        else
            printf("n/a");
        printf(" | **%.2f** | ", b->client_cpu_us);
        if (base && a->client_cpu_us > 0.)
            printf("**%.2f**", b->client_cpu_us / a->client_cpu_us);
        else
            printf("n/a");
        printf(" | %.1f | ", b->server_cpu_us);
        if (base && a->server_cpu_us > 0.)
            printf("%.2f", b->server_cpu_us / a->server_cpu_us);
        else
            printf("n/a");
        printf(" | %.2f |\n", b->calls_per_cycle);
    }
}

/* The one-server run each run elsewhere at ns_other[i] compares with: the
 * run of the main table at the same count, or one of its own. 0, or -1
 * when one of its own failed. */
static int baselines(const bench_target *single, bench_admin *admin, const bench_cpus *cpus,
                     const int *ns, const result *results, int nn, const int *ns_other, int nother,
                     double warmup_s, double window_s, result *out) {
    int i, j, rc = 0;

    for (i = 0; i < nother; i++) {
        for (j = 0; j < nn && ns[j] != ns_other[i]; j++)
            ;
        if (j < nn) {
            out[i] = results[j];
            out[i].mem = NULL;
            continue;
        }
        fprintf(stderr, "throughput: %d in flight, one server...\n", ns_other[i]);
        if (run_config(single, ns_other[i], warmup_s, window_s, 0., cpus, admin, &out[i]) != 0)
            rc = -1;
    }
    return rc;
}

static void usage(const char *argv0) {
    fprintf(
        stderr,
        "usage: %s [options]\n"
        "  -i, --inflight LIST    operations in flight, comma-separated (default 1,64,1024)\n"
        "  -s, --seconds S        measured window per configuration (default 3)\n"
        "      --warmup S         warm-up before each window (default 0.5)\n"
        "      --memory-seconds S the memory run at 1024 in flight (default 60; 0: none)\n"
        "      --rb-requests N    requests per redis-benchmark run (default 100000)\n"
        "      --rb-clients N     redis-benchmark connections (default 50, as redis-benchmark)\n"
        "      --rb-keyspace N    holds made for the release run (default 1000000)\n"
        "      --cluster          also on a Redis Cluster (3 masters + 3 replicas)\n"
        "      --cluster-inflight LIST  operations in flight there (default 1024)\n"
        "      --redlock          also on Redlock's 5 servers\n"
        "      --redlock-inflight LIST  operations in flight there (default 1024)\n"
        "      --no-pin           do not pin redis-server and the benchmark to CPUs\n",
        argv0);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {{"inflight", required_argument, NULL, 'i'},
                                             {"seconds", required_argument, NULL, 's'},
                                             {"warmup", required_argument, NULL, 'w'},
                                             {"memory-seconds", required_argument, NULL, 'M'},
                                             {"rb-requests", required_argument, NULL, 'n'},
                                             {"rb-clients", required_argument, NULL, 'c'},
                                             {"rb-keyspace", required_argument, NULL, 'k'},
                                             {"cluster", no_argument, NULL, 'C'},
                                             {"cluster-inflight", required_argument, NULL, 'I'},
                                             {"redlock", no_argument, NULL, 'L'},
                                             {"redlock-inflight", required_argument, NULL, 'J'},
                                             {"no-pin", no_argument, NULL, 'p'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int ns[MAX_CONFIGS], nn = 0, pin = 1, rb_clients = 50, i, opt, failed = 0;
    int cns[MAX_CONFIGS], ncn = 0, cluster = 0, intact = 1;
    int lns[MAX_CONFIGS], nln = 0, redlock = 0, rl_intact = 1;
    long rb_requests = 100000, rb_keyspace = 1000000;
    double window_s = 3., warmup_s = 0.5, mem_s = 60., mem_interval_s, lease_s, limit = 0.;
    double edge = 0.; /* the largest edge effect on calls per cycle, and its W */
    int edge_n = 0;
    bench_scripts sc;
    result results[MAX_CONFIGS], mem, csingle[MAX_CONFIGS], cresults[MAX_CONFIGS];
    result lsingle[MAX_CONFIGS], lresults[MAX_CONFIGS];
    reference before, after;
    leash_options defaults;
    bench_cpus cpus;
    redisContext *admin;
    bench_admin single_admin;
    bench_target single;
    test_redis r;

    while ((opt = getopt_long(argc, argv, "i:s:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'i':
            if ((nn = bench_parse_list(optarg, ns, MAX_CONFIGS, 1, 100000)) < 0)
                return 2;
            break;
        case 's':
            window_s = strtod(optarg, NULL);
            break;
        case 'w':
            warmup_s = strtod(optarg, NULL);
            break;
        case 'M':
            mem_s = strtod(optarg, NULL);
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
        case 'C':
            cluster = 1;
            break;
        case 'I':
            if ((ncn = bench_parse_list(optarg, cns, MAX_CONFIGS, 1, 100000)) < 0)
                return 2;
            break;
        case 'L':
            redlock = 1;
            break;
        case 'J':
            if ((nln = bench_parse_list(optarg, lns, MAX_CONFIGS, 1, 100000)) < 0)
                return 2;
            break;
        case 'p':
            pin = 0;
            break;
        default:
            usage(argv[0]);
            return 2;
        }
    }
    if (!(window_s > 0.) || warmup_s < 0. || !(mem_s >= 0.) || mem_s > 3600. ||
        rb_requests < 1000 || rb_clients < 1 || rb_keyspace < 1000) {
        usage(argv[0]);
        return 2;
    }
    if (nn == 0) {
        ns[nn++] = 1;
        ns[nn++] = 64;
        ns[nn++] = 1024;
    }
    if (ncn == 0)
        cns[ncn++] = 1024;
    if (nln == 0)
        lns[nln++] = 1024;
    /* Every 5 s, more often in a short run, and never more samples than
     * the run keeps. */
    mem_interval_s = mem_s >= 20. ? 5. : mem_s / 4.;
    if (mem_s / mem_interval_s > MAX_MEM_SAMPLES - 4)
        mem_interval_s = mem_s / (MAX_MEM_SAMPLES - 4);
    leash_options_init(&defaults);
    lease_s = (double)defaults.lease_ms / 1000.;
    signal(SIGPIPE, SIG_IGN);

    if (bench_start_with_scripts("throughput", &r, pin, &cpus, &admin, &sc) != 0)
        return 1;
    bench_target_single(&single, r.port);
    if (bench_admin_open(&single_admin, &single) != 0) {
        fprintf(stderr, "throughput: no admin connection\n");
        redisFree(admin);
        test_redis_stop(&r);
        return 1;
    }

    memset(&before, 0, sizeof before);
    memset(&after, 0, sizeof after);
    memset(&mem, 0, sizeof mem);
    if (bench_have_redis_benchmark()) {
        fprintf(stderr, "throughput: reference (redis-benchmark)...\n");
        if (run_reference(&r, admin, &sc, rb_clients, rb_requests, rb_keyspace, &before) != 0)
            fprintf(stderr, "throughput: the reference run failed\n");
    }
    for (i = 0; i < nn; i++) {
        fprintf(stderr, "throughput: %d in flight...\n", ns[i]);
        if (run_config(&single, ns[i], warmup_s, window_s, 0., &cpus, &single_admin, &results[i]) !=
            0)
            failed = 1;
    }
    if (cluster) {
        test_cluster c;
        bench_target ct;
        bench_admin cadm;

        if (baselines(&single, &single_admin, &cpus, ns, results, nn, cns, ncn, warmup_s, window_s,
                      csingle) != 0)
            failed = 1;
        fprintf(stderr, "throughput: starting a Redis Cluster...\n");
        if (bench_start_cluster(&c, &cpus, &ct) != 0 || bench_admin_open(&cadm, &ct) != 0) {
            fprintf(stderr, "throughput: no Redis Cluster\n");
            test_cluster_stop(&c);
            for (i = 0; i < ncn; i++) {
                memset(&cresults[i], 0, sizeof cresults[i]);
                cresults[i].n = cns[i];
            }
            failed = 1;
        } else {
            for (i = 0; i < ncn; i++) {
                fprintf(stderr, "throughput: %d in flight, cluster...\n", cns[i]);
                /* The warm-up also opens the connections to every master. */
                if (run_config(&ct, cns[i], warmup_s > 1. ? warmup_s : 1., window_s, 0., &cpus,
                               &cadm, &cresults[i]) != 0)
                    failed = 1;
            }
            intact = bench_cluster_intact(&c, &ct);
            if (!intact)
                failed = 1;
            bench_admin_close(&cadm);
            test_cluster_stop(&c);
        }
    }
    if (redlock) {
        bench_redlock rl;
        bench_target rt;
        bench_admin radm;

        if (baselines(&single, &single_admin, &cpus, ns, results, nn, lns, nln, warmup_s, window_s,
                      lsingle) != 0)
            failed = 1;
        fprintf(stderr, "throughput: starting the Redlock servers...\n");
        if (bench_start_redlock(&rl, &cpus, &rt) != 0 || bench_admin_open(&radm, &rt) != 0) {
            fprintf(stderr, "throughput: no Redlock servers\n");
            bench_stop_redlock(&rl);
            for (i = 0; i < nln; i++) {
                memset(&lresults[i], 0, sizeof lresults[i]);
                lresults[i].n = lns[i];
            }
            failed = 1;
        } else {
            for (i = 0; i < nln; i++) {
                fprintf(stderr, "throughput: %d in flight, Redlock...\n", lns[i]);
                /* The warm-up also loads the scripts on every server. */
                if (run_config(&rt, lns[i], warmup_s > 1. ? warmup_s : 1., window_s, 0., &cpus,
                               &radm, &lresults[i]) != 0)
                    failed = 1;
            }
            rl_intact = bench_redlock_intact(&rl);
            if (!rl_intact)
                failed = 1;
            bench_admin_close(&radm);
            bench_stop_redlock(&rl);
        }
    }
    if (mem_s > 0.) {
        fprintf(stderr, "throughput: memory, 1024 in flight for %.0f s...\n", mem_s);
        bench_flushall(&r);
        if (run_config(&single, 1024, 0., mem_s, mem_interval_s, &cpus, &single_admin, &mem) != 0 ||
            mem.nmem < 2)
            failed = 1;
    }
    if (bench_have_redis_benchmark()) {
        fprintf(stderr, "throughput: reference again (redis-benchmark)...\n");
        if (run_reference(&r, admin, &sc, rb_clients, rb_requests, rb_keyspace, &after) != 0)
            fprintf(stderr, "throughput: the second reference run failed\n");
    }
    if (before.ok && after.ok)
        limit = (before.limit + after.limit) / 2.;
    else if (before.ok || after.ok)
        limit = before.ok ? before.limit : after.limit;
    else
        failed = 1;
    redisFree(admin);
    bench_admin_close(&single_admin);
    test_redis_stop(&r);

    printf("### Throughput (leash-bench-throughput)\n\n");
    print_table(results, nn, &before, &after, limit);
    if (cluster)
        print_cluster(csingle, cresults, ncn);
    if (redlock)
        print_redlock(lsingle, lresults, nln);
    if (mem.ok && mem.nmem >= 2)
        print_memory(&mem, lease_s);
    printf("\nOne client, W lock handles on W distinct keys, each looping try-once acquire -> "
           "release (W operations in flight); cycles counted over %.1f s after %.1f s of "
           "warm-up. Limit = 1 / (1/acquire rate + 1/release rate) of redis-benchmark -P 32 "
           "calling leash's own scripts by EVALSHA (SHAs from SCRIPT LOAD of src/dialect/leash.c), "
           "mean of a run before and after the leash runs. CPU per cycle: getrusage of this "
           "process and INFO cpu of the server over the window; server CPU busy = cycles/s x "
           "server CPU per cycle (100%% = the server's one thread never idle). The reference's "
           "random keys (a keyspace of %ld holds for the release run) cost the server more per "
           "script than leash's few hot keys, which is why leash can exceed the limit.\n",
           window_s, warmup_s, rb_keyspace);
    for (i = 0; i < nn; i++)
        if (results[i].ok && results[i].cycles > 0 &&
            6. * results[i].n / (double)results[i].cycles > edge) {
            edge = 6. * results[i].n / (double)results[i].cycles;
            edge_n = results[i].n;
        }
    printf("Redis calls per cycle: every command of INFO commandstats over the window but "
           "the benchmark's own INFO, i.e. EVALSHA and the calls its Lua makes (%s), divided "
           "by the cycles; target: at most 6 per uncontended acquire+release. The W cycles "
           "in flight at either edge of the window have run some commands on one side of the "
           "snapshot and end on the other, so a figure can be off by about 6 W / cycles "
           "measured (%.2f at %d in flight). The engine "
           "before the one-key layout, as the issue gives it (not measured here): "
           "\"" OLD_ENGINE_CALLS "\".\n",
           bench_script_inner_names(), edge, edge_n);
    if (mem.ok && mem.nmem >= 2)
        printf("Memory: a separate run of 1024 handles cycling as above for %.0f s with the "
               "client's default lease (%.0f s), started on an empty server; INFO memory "
               "used_memory (and INFO keyspace) before the first acquire, every %.0f s, and at "
               "the end of the window (before the last releases drained). A released lock "
               "leaves no key, and one that outlived its holder expires with its lease, so "
               "the keys stay at most the operations in flight; a sample moves with the keys "
               "in flight at its instant, so flatness compares the peak of the samples after "
               "the first %.0f s lease with the peak of those during it.\n",
               mem.seconds, lease_s, mem_interval_s, lease_s);
    print_reference("before", &before, rb_clients);
    print_reference("after", &after, rb_clients);
    for (i = 0; i < nn; i++) {
        char what[64];
        snprintf(what, sizeof what, "%d in flight", results[i].n);
        print_run_notes(what, &results[i]);
    }
    if (mem_s > 0.)
        print_run_notes("memory run, 1024 in flight", &mem);
    if (cluster) {
        for (i = 0; i < ncn; i++) {
            char what[64];
            snprintf(what, sizeof what, "cluster, %d in flight", cresults[i].n);
            print_run_notes(what, &cresults[i]);
            if (cresults[i].disconnects)
                printf("  (**%llu disconnects**)\n", (unsigned long long)cresults[i].disconnects);
        }
        printf("\nRedis Cluster: 3 masters with a replica each (tests/support/redis_cluster.c, "
               "cluster-node-timeout 5 s), all six redis-servers on the server's CPU, so that "
               "the cluster has the one core the single server has; one leash client with "
               "the masters as seeds (LEASH_TOPOLOGY_CLUSTER), the same W handles on W distinct "
               "keys, which spread over the three masters; its run follows the one-server runs "
               "(warm-up %.1f s, which also connects to every master). Server CPU: INFO cpu "
               "summed over the masters; the replicas, which apply what their masters send "
               "them, apart. Redis calls: INFO commandstats summed over the masters.%s\n",
               warmup_s > 1. ? warmup_s : 1.,
               intact ? "" : " **A node changed its role during the run (a failover).**");
    }
    if (redlock) {
        for (i = 0; i < nln; i++) {
            char what[64];
            snprintf(what, sizeof what, "Redlock, %d in flight", lresults[i].n);
            print_run_notes(what, &lresults[i]);
            if (lresults[i].disconnects)
                printf("  (**%llu disconnects**)\n", (unsigned long long)lresults[i].disconnects);
        }
        printf("\nRedlock: 5 independent redis-servers (tests/support/redis_server.c, as the "
               "Redlock tests start them), all on the server's CPU, so that the five have the "
               "one core the single server has; one leash client with the five as its nodes "
               "(LEASH_TOPOLOGY_REDLOCK), the same W handles on W distinct keys, each acquire "
               "sent to all five (a fence raise follows only where their fences differ), each "
               "release to all five; its run follows the one-server runs (warm-up %.1f s, "
               "which also loads the scripts on every server). Server CPU and Redis calls: "
               "INFO summed over the five; the one-server row is the run of the main table "
               "at the same count.%s\n",
               warmup_s > 1. ? warmup_s : 1.,
               rl_intact ? "" : " **A Redlock server stopped answering during the run.**");
    }
    printf("\n");
    bench_print_cpus(&cpus);
    free(mem.mem);
    for (i = 0; i < nn; i++)
        free(results[i].mem);
    return failed ? 1 : 0;
}
