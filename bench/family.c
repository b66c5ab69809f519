/* SPDX-License-Identifier: MIT */
/*
 * leash-bench-family: the lock family (fair lock, read-write lock,
 * semaphore) beside the mutex, measured in the same run on the same
 * redis-server (issue 13, "Benchmarks"). Four scenarios:
 *
 * (a) herd: N contenders (default 16) on ONE name, each a leash client of
 *     its own, all on one libev loop, each looping acquire
 *     (LEASH_WAIT_FOREVER) -> release at once in the acquire callback ->
 *     acquire again from the release callback. Once with fair locks, once
 *     with mutexes. Per handoff (a grant that follows a release; the
 *     window is H handoffs after W of warm-up): the commands the clients
 *     sent (leash_stats commands_sent summed over every client), of them
 *     renewals (renew_commands: the fair lock's waiters renew their queue
 *     places), the script runs and publishes Redis counted (INFO
 *     commandstats), leash wakeups; the handoff latency (leash_release()
 *     call -> the next holder's acquire callback) p50 / p99 / max, and the
 *     fair lock's p50 as a multiple of the mutex's; the spread of
 *     acquisitions per contender (min / max over the window) and the
 *     longest wait (leash_acquire() call -> its callback). Every
 *     contender asks again right after its release, so a handoff costs at
 *     least the release and the releaser's new acquire (2 commands); what
 *     is above that is what the waiters spent.
 *
 * (b) many waiters: P processes (forked; default 4) with W/P handles each
 *     on ONE name, all waiting behind a gate that a handle in the parent
 *     holds. Once every waiter has asked and the clients are quiet (they
 *     sent nothing but renewals for 60 ms: settle()), each process notes
 *     its client's leash_stats and the gate releases; every waiter that is
 *     granted releases at once and asks again (it joins the end of the
 *     queue), until H handoffs; the H-th holder keeps the lock, the
 *     clients go quiet again, each process notes its stats again. Commands per handoff
 *     with W = 1000 and W = 10 waiters: for the fair lock they must not
 *     depend on W (the release script hands the lock to the head itself,
 *     no other waiter sends anything). The mutex in the same
 *     configurations for comparison.
 *
 * (c) read-write: (1) one client with R handles (default 1024) cycling
 *     acquire -> release, all in flight at once: read handles of ONE name
 *     against mutex handles of R distinct names (the throughput
 *     benchmark's set-up); cycles/s, the ratio (the mutex runs before and
 *     after the read run, the ratio is against their mean), Redis calls
 *     per cycle, client CPU per cycle. (2) a writer holds, 100 read
 *     handles (over 4 clients) wait; once the clients are quiet the writer
 *     releases: the time from the leash_release() call until the first,
 *     the median and the last reader's acquire callback, over rounds; the
 *     reference is the same round with one mutex waiter behind a mutex
 *     holder (one handoff), measured in the same run.
 *
 * (d) semaphore: 64 contenders (each its own client, one loop) on ONE
 *     semaphore of 16 permits, each looping acquire -> release at once
 *     (--sem-hold MS: after MS ms, a timerfd) -> acquire; against 64
 *     mutex contenders on 16 names (4 per name: 16 holders at most there
 *     too). Cycles/s and the ratio; wake-ups per freed permit (leash_stats
 *     wakeups summed over the clients, per release in the window: the
 *     target is 1); commands and Redis calls per cycle; the wait
 *     (leash_acquire() call -> callback) p50 and p99; the most holders
 *     seen at once (must not pass the permits). With a hold time, where
 *     a cycle's time goes: the hold as it was (acquire callback ->
 *     leash_release() call: what the timer added to MS), the handoff (a
 *     release -> the grant it made room for, the oldest release of that
 *     name not yet followed by a grant), and the CPU of the benchmark
 *     process and of the server (INFO cpu) per cycle: permits / (hold +
 *     handoff) is the rate.
 *
 * Every scenario checks what the kind promises on the holders it sees
 * (one holder of a fair lock or mutex, no more than the permits of a
 * semaphore) and says so when it did not hold. The redis-server is
 * started by bench_start_server() (pinned to one CPU, the benchmark to
 * another); everything is on loopback.
 *
 * Output: markdown tables and notes on stdout. Exit 0 when every scenario
 * ran (even if a figure misses its target), 1 when one failed.
 */
#define _GNU_SOURCE

#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <unistd.h>

#include <ev.h>
#include <hiredis/hiredis.h>
#include <leash/adapters/libev.h>
#include <leash/leash.h>

#include "common.h"
#include "evloop.h" /* test_run_until */
#include "redis_server.h"

enum {
    K_MUTEX,
    K_FAIR,
    K_READ,
    K_WRITE,
    K_SEM
};

static const char *kind_name(int kind) {
    switch (kind) {
    case K_MUTEX:
        return "mutex";
    case K_FAIR:
        return "fair lock";
    case K_READ:
        return "read lock";
    case K_WRITE:
        return "write lock";
    default:
        return "semaphore";
    }
}

/* The options every scenario shares. */
static struct {
    int port;
    int64_t lease_ms; /* leash_lock_set_watchdog of every handle; 0: the client's */
    double cap_s;     /* seconds a measurement may take at most */
    int sem_hold_ms;  /* (d): how long each contender holds (0: it releases at once) */
} G = {0, 2000, 30., 0};

static leash_lock *make_lock(leash_client *c, int kind, const char *name, int permits) {
    leash_lock *l;

    switch (kind) {
    case K_MUTEX:
        l = leash_lock_new(c, name);
        break;
    case K_FAIR:
        l = leash_fair_lock_new(c, name);
        break;
    case K_READ:
        l = leash_read_lock_new(c, name);
        break;
    case K_WRITE:
        l = leash_write_lock_new(c, name);
        break;
    default:
        l = leash_semaphore_new(c, name, permits);
    }
    if (l == NULL)
        fprintf(stderr, "family: no %s handle for %s\n", kind_name(kind), name);
    else if (G.lease_ms > 0 && leash_lock_set_watchdog(l, G.lease_ms, 0) != LEASH_OK)
        fprintf(stderr, "family: leash_lock_set_watchdog(%lld) refused\n", (long long)G.lease_ms);
    return l;
}

static void stats_sum(leash_client *const *c, int n, leash_stats *out) {
    int i;

    memset(out, 0, sizeof *out);
    for (i = 0; i < n; i++) {
        leash_stats st;
        leash_client_stats(c[i], &st);
        out->commands_sent += st.commands_sent;
        out->renew_commands += st.renew_commands;
        out->renewals += st.renewals;
        out->wakeups += st.wakeups;
        out->losts += st.losts;
        out->disconnects += st.disconnects;
        out->noscript_reloads += st.noscript_reloads;
    }
}

static void stats_delta(const leash_stats *a, const leash_stats *b, leash_stats *d) {
    d->commands_sent = b->commands_sent - a->commands_sent;
    d->renew_commands = b->renew_commands - a->renew_commands;
    d->renewals = b->renewals - a->renewals;
    d->wakeups = b->wakeups - a->wakeups;
    d->losts = b->losts - a->losts;
    d->disconnects = b->disconnects - a->disconnects;
    d->noscript_reloads = b->noscript_reloads - a->noscript_reloads;
}

static double per(double v, double n) {
    return n > 0 ? v / n : 0.;
}

/* Script runs (EVALSHA + EVAL), publishes (PUBLISH + SPUBLISH) and every
 * counted call in a commandstats delta. */
typedef struct redis_counts {
    long long scripts, publishes, total;
    long long script_usec; /* server time inside EVALSHA + EVAL */
    bench_cmdstats d;      /* the delta, command by command */
} redis_counts;

static void redis_counts_of(const bench_cmdstats *before, const bench_cmdstats *after,
                            redis_counts *out) {
    bench_cmdstats *d = &out->d;

    bench_cmdstats_delta(before, after, d);
    out->scripts = bench_cmdstats_calls(d, "evalsha") + bench_cmdstats_calls(d, "eval");
    out->publishes = bench_cmdstats_calls(d, "publish") + bench_cmdstats_calls(d, "spublish");
    out->total = bench_cmdstats_total(d);
    out->script_usec = bench_cmdstats_usec(d, "evalsha") + bench_cmdstats_usec(d, "eval");
}

static int by_calls_desc(const void *x, const void *y) {
    const bench_cmdstat *a = x, *b = y;
    return a->calls < b->calls ? 1 : a->calls > b->calls ? -1 : strcmp(a->name, b->name);
}

/* "; Redis calls per <unit>: evalsha 2.00, hget 4.00, ...; server time
 * inside the scripts X µs per <unit>": every command the clients and the
 * scripts ran, per n units. */
static void print_calls(const redis_counts *rc, double n, const char *unit) {
    bench_cmdstats d = rc->d;
    int i, shown = 0;

    if (!(n > 0.))
        return;
    qsort(d.cmd, (size_t)d.n, sizeof d.cmd[0], by_calls_desc);
    printf("; Redis calls per %s %.2f (INFO commandstats, the scripts' inner calls included):",
           unit, (double)rc->total / n);
    for (i = 0; i < d.n; i++) {
        if (!bench_cmdstats_counted(d.cmd[i].name) || (double)d.cmd[i].calls / n < 0.005)
            continue;
        printf("%s %s %.2f", shown++ ? "," : "", d.cmd[i].name, (double)d.cmd[i].calls / n);
    }
    printf("; server time inside the scripts %.1f µs per %s", (double)rc->script_usec / n, unit);
}

/* ---- running one loop ---- */

/* The commands a client sent but its watchdog's renewals: what moves while
 * something other than the lease schedule is going on. */
static uint64_t busy_of(leash_client *c) {
    leash_stats st;
    leash_client_stats(c, &st);
    return st.commands_sent - st.renew_commands;
}

#define SETTLE_LOOK_MS 20
#define SETTLE_TAIL_MS 30

/* Runs loop until the clients c[0..n) sent nothing but renewals for 3
 * looks SETTLE_LOOK_MS apart and then SETTLE_TAIL_MS more (their last
 * commands answered: loopback), at most timeout_ms; then the server's
 * counts in *out. Renewals go on meanwhile (the waiters' places are
 * leases), which is why Redis's own counts cannot say it. */
static int settle(struct ev_loop *loop, leash_client *const *c, int n, redisContext *admin,
                  int64_t timeout_ms, bench_cmdstats *out) {
    int64_t deadline = bench_now_ns() + timeout_ms * 1000000;
    uint64_t last = UINT64_MAX;
    int same = 0, never = 0, i;

    while (bench_now_ns() < deadline) {
        uint64_t busy = 0;
        test_run_until(loop, &never, SETTLE_LOOK_MS);
        for (i = 0; i < n; i++)
            busy += busy_of(c[i]);
        same = busy == last ? same + 1 : 0;
        last = busy;
        if (same >= 3) {
            test_run_until(loop, &never, SETTLE_TAIL_MS);
            return bench_cmdstats_read(admin, out);
        }
    }
    return -1;
}

/* n clients on loop, connected; 0 or -1. */
static int clients_new(struct ev_loop *loop, leash_client **c, int n) {
    int i;

    for (i = 0; i < n; i++)
        if ((c[i] = bench_client_new(loop, G.port)) == NULL) {
            while (i-- > 0)
                leash_client_free(c[i]);
            return -1;
        }
    if (bench_wait_connected(loop, c, n, 5000) != 0) {
        fprintf(stderr, "family: clients did not connect in 5 s\n");
        for (i = 0; i < n; i++)
            leash_client_free(c[i]);
        return -1;
    }
    return 0;
}

static void clients_free(struct ev_loop *loop, leash_client **c, int n) {
    int i;

    for (i = 0; i < n; i++)
        leash_client_free(c[i]);
    ev_run(loop, EVRUN_NOWAIT);
}

/* ==== (a) herd and (d) semaphore: contenders cycling on one loop ==== */

typedef struct cycler cycler;

typedef struct contender {
    cycler *cy;
    int id;
    leash_client *client; /* not owned: cy->clients[] */
    leash_lock *lock;
    int64_t asked_ns;
    int64_t held_ns; /* its acquire callback */
    int64_t grants;  /* in the window */
    int name;        /* index of its name */
    /* (d) with a hold time: the release is due. A timerfd, not an
     * ev_timer: libev waits in epoll_wait, whose timeout is in whole ms
     * and at least 1 ms, so an ev_timer of 1 ms that the loop sleeps on
     * fires 1-2 ms after it was set; a timerfd wakes the loop on time
     * (hrtimer). */
    int hold_fd;
    ev_io hold;
} contender;

struct cycler {
    struct ev_loop *loop;
    redisContext *admin;
    int kind, n, nclients, permits, names;
    leash_client **clients;
    contender *cs;
    int stopping, done;
    /* The window: grants warm .. warm + h (a count, or a time for cycles). */
    int64_t grants, warm, target;
    int64_t by_time_ns; /* cycles: the window closes at this time (0: by count) */
    int64_t window_open_ns, window_close_ns;
    int64_t rel_ns; /* herd: the last leash_release() call */
    int last_holder, self_handoffs;
    int64_t *samples, nsamples, cap_samples;
    int64_t *waits, nwaits, cap_waits; /* leash_acquire() -> callback, in the window */
    int64_t longest_wait_ns;
    int hold_ms;
    int64_t releases_in_window;
    int holders, max_holders, over;
    int *name_holders; /* holders of each name at once */
    int errors;
    char first_error[160];
    leash_stats sa, sb;
    bench_cmdstats ca, cb;
    int64_t cpu_a, cpu_b;
    double server_cpu_a, server_cpu_b; /* INFO cpu, s */
    ev_timer clock;                    /* cycles: closes the window by time */
    /* (d) with a hold time: each name's releases not yet followed by a
     * grant (a ring of n per name), so that a grant is timed from the
     * release that made its room (the oldest one left); and the holds as
     * they were (acquire callback -> leash_release() call). */
    int64_t *freed_ns;
    int *freed_first, *freed_count;
    int64_t *handoffs, nhandoffs;
    int64_t *holds, nholds;
};

static void cy_error(cycler *cy, const char *what, int status) {
    if (cy->errors++ == 0)
        snprintf(cy->first_error, sizeof cy->first_error, "%s: %s", what,
                 leash_status_name(status));
}

static int cy_in_window(const cycler *cy) {
    return cy->window_open_ns != 0 && cy->window_close_ns == 0;
}

static void cy_open(cycler *cy) {
    stats_sum(cy->clients, cy->nclients, &cy->sa);
    bench_cmdstats_read(cy->admin, &cy->ca);
    cy->server_cpu_a = bench_server_cpu_s(cy->admin);
    cy->cpu_a = bench_cpu_ns();
    cy->window_open_ns = bench_now_ns();
}

static void cy_close(cycler *cy) {
    cy->window_close_ns = bench_now_ns();
    cy->cpu_b = bench_cpu_ns();
    stats_sum(cy->clients, cy->nclients, &cy->sb);
    bench_cmdstats_read(cy->admin, &cy->cb);
    cy->server_cpu_b = bench_server_cpu_s(cy->admin);
    cy->done = 1;
}

static void cy_acquired(leash_lock *l, int status, void *arg);
static void cy_give(contender *k);

static void cy_ask(contender *k) {
    int rc;

    k->asked_ns = bench_now_ns();
    rc = leash_acquire(k->lock, LEASH_WAIT_FOREVER, cy_acquired, k);
    if (rc != LEASH_OK)
        cy_error(k->cy, "leash_acquire", rc);
}

static void cy_released(leash_lock *l, int status, void *arg) {
    contender *k = arg;
    cycler *cy = k->cy;

    (void)l;
    if (cy->stopping)
        return;
    if (status != LEASH_OK) {
        cy_error(cy, "release", status);
        return;
    }
    if (cy->done)
        return;
    cy_ask(k);
}

static void cy_acquired(leash_lock *l, int status, void *arg) {
    contender *k = arg;
    cycler *cy = k->cy;
    int64_t now = bench_now_ns(), g;

    (void)l;
    if (cy->stopping)
        return;
    if (status != LEASH_OK) {
        cy_error(cy, "acquire", status);
        return;
    }
    if (++cy->holders > cy->max_holders)
        cy->max_holders = cy->holders;
    if (++cy->name_holders[k->name] > cy->permits)
        cy->over++;
    k->held_ns = now;
    if (cy->freed_ns != NULL && cy->freed_count[k->name] > 0) {
        int j = cy->freed_first[k->name];
        int64_t freed = cy->freed_ns[(int64_t)k->name * cy->n + j];
        cy->freed_first[k->name] = (j + 1) % cy->n;
        cy->freed_count[k->name]--;
        if (cy_in_window(cy) && cy->nhandoffs < cy->cap_waits)
            cy->handoffs[cy->nhandoffs++] = now - freed;
    }
    if (cy->done)
        return; /* after the window: keep it until the end */
    g = cy->grants++;
    if (cy_in_window(cy)) {
        k->grants++;
        if (now - k->asked_ns > cy->longest_wait_ns)
            cy->longest_wait_ns = now - k->asked_ns;
        if (cy->nwaits < cy->cap_waits)
            cy->waits[cy->nwaits++] = now - k->asked_ns;
        if (cy->samples != NULL && cy->nsamples < cy->cap_samples)
            cy->samples[cy->nsamples++] = now - cy->rel_ns;
        if (cy->last_holder == k->id)
            cy->self_handoffs++;
    }
    cy->last_holder = k->id;
    if (cy->by_time_ns == 0) {
        if (g == cy->warm)
            cy_open(cy);
        if (g == cy->target) {
            cy_close(cy);
            return;
        }
    }
    if (cy->hold_ms > 0) {
        struct itimerspec due;
        memset(&due, 0, sizeof due);
        due.it_value.tv_sec = cy->hold_ms / 1000;
        due.it_value.tv_nsec = (long)(cy->hold_ms % 1000) * 1000000L;
        if (timerfd_settime(k->hold_fd, 0, &due, NULL) != 0) {
            cy_error(cy, "timerfd_settime", LEASH_EINVAL);
            return;
        }
        ev_io_start(cy->loop, &k->hold);
        return;
    }
    cy_give(k); /* hold ~0: give it back at once */
}

static void cy_hold_done(struct ev_loop *loop, ev_io *w, int revents) {
    contender *k = w->data;
    uint64_t expirations;

    (void)revents;
    if (read(k->hold_fd, &expirations, sizeof expirations) != (ssize_t)sizeof expirations)
        return; /* not due yet (the timer was set again): wait on */
    ev_io_stop(loop, w);
    if (!k->cy->stopping && !k->cy->done)
        cy_give(k);
}

static void cy_give(contender *k) {
    cycler *cy = k->cy;
    int rc;

    cy->holders--;
    cy->name_holders[k->name]--;
    if (cy_in_window(cy))
        cy->releases_in_window++;
    cy->rel_ns = bench_now_ns();
    if (cy->freed_ns != NULL) {
        int c = cy->freed_count[k->name];
        if (c < cy->n) {
            int j = (cy->freed_first[k->name] + c) % cy->n;
            cy->freed_ns[(int64_t)k->name * cy->n + j] = cy->rel_ns;
            cy->freed_count[k->name] = c + 1;
        }
        if (cy_in_window(cy) && cy->nholds < cy->cap_waits)
            cy->holds[cy->nholds++] = cy->rel_ns - k->held_ns;
    }
    rc = leash_release(k->lock, cy_released, k);
    if (rc != LEASH_OK)
        cy_error(cy, "leash_release", rc);
}

static void cy_clock(struct ev_loop *loop, ev_timer *t, int revents) {
    cycler *cy = t->data;

    (void)loop;
    (void)revents;
    if (cy->window_open_ns == 0) {
        cy_open(cy);
        ev_timer_set(t, (double)cy->by_time_ns / 1e9, 0.);
        ev_timer_start(cy->loop, t);
    } else {
        cy_close(cy);
    }
}

typedef struct cycle_result {
    int ok, kind, n, nclients, permits, names;
    int64_t grants, releases;
    double seconds;
    leash_stats d;
    redis_counts rc;
    double client_cpu_us; /* per grant */
    double server_cpu_us; /* per grant (INFO cpu); -1 unknown */
    int64_t p50_ns, p99_ns, max_ns, nsamples;
    int64_t wait_p50_ns, wait_p99_ns; /* leash_acquire() -> callback, in the window */
    /* With a hold time: the release -> the grant it made room for, and the
     * hold as it was (acquire callback -> leash_release() call). */
    int64_t handoff_p50_ns, handoff_p99_ns, hold_p50_ns, hold_p99_ns;
    int64_t min_grants, max_grants, longest_wait_ns;
    int self_handoffs, max_holders, over, errors;
    char first_error[160];
} cycle_result;

/*
 * n contenders over nclients clients (contender i on client i % nclients)
 * on `names` names ("bench:family:<j>", contender i on name i % names),
 * each looping acquire -> release. By count (warm grants, then h
 * handoffs, latencies kept) when secs == 0, else by time (warm_s, then
 * secs). permits: the holders allowed at once (1 for a lock, N for a
 * semaphore; the check), and the semaphore's permits. hold_ms: how long
 * each holds before it releases (0: at once, inside the acquire callback).
 */
static int run_cycles(redisContext *admin, int kind, int n, int nclients, int names, int permits,
                      int64_t warm, int64_t h, double warm_s, double secs, int hold_ms,
                      cycle_result *res) {
    cycler cy;
    int i, rc = -1;
    int64_t deadline;

    memset(&cy, 0, sizeof cy);
    memset(res, 0, sizeof *res);
    res->kind = kind;
    res->n = n;
    res->nclients = nclients;
    res->permits = permits;
    res->names = names;
    cy.admin = admin;
    cy.kind = kind;
    cy.n = n;
    cy.nclients = nclients;
    cy.permits = kind == K_SEM ? permits : 1;
    cy.names = names;
    cy.last_holder = -1;
    cy.hold_ms = hold_ms;
    cy.cap_waits = 1 << 21;
    cy.waits = calloc((size_t)cy.cap_waits, sizeof *cy.waits);
    cy.loop = ev_loop_new(EVFLAG_AUTO);
    cy.clients = calloc((size_t)nclients, sizeof *cy.clients);
    cy.cs = calloc((size_t)n, sizeof *cy.cs);
    cy.name_holders = calloc((size_t)names, sizeof *cy.name_holders);
    for (i = 0; cy.cs != NULL && i < n; i++)
        cy.cs[i].hold_fd = -1;
    if (hold_ms > 0) {
        cy.freed_ns = calloc((size_t)names * (size_t)n, sizeof *cy.freed_ns);
        cy.freed_first = calloc((size_t)names, sizeof *cy.freed_first);
        cy.freed_count = calloc((size_t)names, sizeof *cy.freed_count);
        cy.handoffs = calloc((size_t)cy.cap_waits, sizeof *cy.handoffs);
        cy.holds = calloc((size_t)cy.cap_waits, sizeof *cy.holds);
        if (cy.freed_ns == NULL || cy.freed_first == NULL || cy.freed_count == NULL ||
            cy.handoffs == NULL || cy.holds == NULL)
            goto out_free;
    }
    if (secs > 0.) {
        cy.by_time_ns = (int64_t)(secs * 1e9);
    } else {
        cy.warm = warm;
        cy.target = warm + h;
        cy.cap_samples = h;
        cy.samples = calloc((size_t)h, sizeof *cy.samples);
    }
    if (cy.loop == NULL || cy.clients == NULL || cy.cs == NULL || cy.name_holders == NULL ||
        cy.waits == NULL || (secs == 0. && cy.samples == NULL) ||
        clients_new(cy.loop, cy.clients, nclients) != 0)
        goto out_free;
    for (i = 0; i < n; i++) {
        char name[64];
        contender *k = &cy.cs[i];
        k->cy = &cy;
        k->id = i;
        k->client = cy.clients[i % nclients];
        k->name = i % names;
        if (hold_ms > 0) {
            k->hold_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
            if (k->hold_fd < 0)
                goto out;
            ev_io_init(&k->hold, cy_hold_done, k->hold_fd, EV_READ);
            k->hold.data = k;
        }
        snprintf(name, sizeof name, "bench:family:%d", k->name);
        if ((k->lock = make_lock(k->client, kind, name, permits)) == NULL)
            goto out;
    }
    if (secs > 0.) {
        ev_timer_init(&cy.clock, cy_clock, warm_s, 0.);
        cy.clock.data = &cy;
        ev_timer_start(cy.loop, &cy.clock);
    }
    for (i = 0; i < n; i++)
        cy_ask(&cy.cs[i]);
    deadline = (int64_t)(G.cap_s * 1000.);
    if (test_run_until(cy.loop, &cy.done, deadline) != 0) {
        fprintf(stderr, "family: %s, %d contenders: %lld grants in %.0f s, the window %s\n",
                kind_name(kind), n, (long long)cy.grants, G.cap_s,
                cy.window_open_ns ? "did not close" : "did not open");
        goto out;
    }
    res->seconds = (double)(cy.window_close_ns - cy.window_open_ns) / 1e9;
    stats_delta(&cy.sa, &cy.sb, &res->d);
    redis_counts_of(&cy.ca, &cy.cb, &res->rc);
    res->releases = cy.releases_in_window;
    res->grants = 0;
    res->min_grants = INT64_MAX;
    for (i = 0; i < n; i++) {
        res->grants += cy.cs[i].grants;
        if (cy.cs[i].grants < res->min_grants)
            res->min_grants = cy.cs[i].grants;
        if (cy.cs[i].grants > res->max_grants)
            res->max_grants = cy.cs[i].grants;
    }
    res->client_cpu_us = per((double)(cy.cpu_b - cy.cpu_a) / 1e3, (double)res->grants);
    res->server_cpu_us = cy.server_cpu_a >= 0. && cy.server_cpu_b >= 0.
                             ? per((cy.server_cpu_b - cy.server_cpu_a) * 1e6, (double)res->grants)
                             : -1.;
    res->longest_wait_ns = cy.longest_wait_ns;
    res->self_handoffs = cy.self_handoffs;
    if (cy.nsamples > 0) {
        qsort(cy.samples, (size_t)cy.nsamples, sizeof *cy.samples, bench_cmp_i64);
        res->nsamples = cy.nsamples;
        res->p50_ns = bench_pct(cy.samples, cy.nsamples, 0.5);
        res->p99_ns = bench_pct(cy.samples, cy.nsamples, 0.99);
        res->max_ns = cy.samples[cy.nsamples - 1];
    }
    if (cy.nwaits > 0) {
        qsort(cy.waits, (size_t)cy.nwaits, sizeof *cy.waits, bench_cmp_i64);
        res->wait_p50_ns = bench_pct(cy.waits, cy.nwaits, 0.5);
        res->wait_p99_ns = bench_pct(cy.waits, cy.nwaits, 0.99);
    }
    if (cy.nhandoffs > 0) {
        qsort(cy.handoffs, (size_t)cy.nhandoffs, sizeof *cy.handoffs, bench_cmp_i64);
        res->handoff_p50_ns = bench_pct(cy.handoffs, cy.nhandoffs, 0.5);
        res->handoff_p99_ns = bench_pct(cy.handoffs, cy.nhandoffs, 0.99);
    }
    if (cy.nholds > 0) {
        qsort(cy.holds, (size_t)cy.nholds, sizeof *cy.holds, bench_cmp_i64);
        res->hold_p50_ns = bench_pct(cy.holds, cy.nholds, 0.5);
        res->hold_p99_ns = bench_pct(cy.holds, cy.nholds, 0.99);
    }
    res->ok = 1;
    rc = 0;
out:
    res->max_holders = cy.max_holders;
    res->over = cy.over;
    res->errors = cy.errors;
    memcpy(res->first_error, cy.first_error, sizeof res->first_error);
    cy.stopping = 1;
    if (secs > 0.)
        ev_timer_stop(cy.loop, &cy.clock);
    for (i = 0; i < n; i++)
        if (cy.cs[i].hold_fd >= 0) {
            ev_io_stop(cy.loop, &cy.cs[i].hold);
            close(cy.cs[i].hold_fd);
        }
    clients_free(cy.loop, cy.clients, nclients);
out_free:
    if (cy.loop != NULL)
        ev_loop_destroy(cy.loop);
    free(cy.clients);
    free(cy.cs);
    free(cy.name_holders);
    free(cy.samples);
    free(cy.waits);
    free(cy.freed_ns);
    free(cy.freed_first);
    free(cy.freed_count);
    free(cy.handoffs);
    free(cy.holds);
    return rc;
}

/* ==== (b) many waiters over processes ==== */

#define MAX_PROCS 16

typedef struct mw_shared {
    _Atomic int ready; /* processes whose waiters all asked */
    _Atomic int snap;  /* 1: note stats A; 2: note stats B; 3: finish */
    _Atomic int acks;  /* processes that did what snap says */
    _Atomic int stop;  /* the last grant happened */
    _Atomic int errors;
    _Atomic int overlaps; /* a grant while another held */
    _Atomic int holder;   /* -1 none */
    _Atomic int64_t grants;
    _Atomic uint64_t sent, renews, wakeups; /* B - A summed over the processes */
    _Atomic uint64_t busy[MAX_PROCS];       /* each process's busy_of(), every poll */
    int64_t h;                              /* grants in the window: 0 .. h */
    int64_t gate_rel_ns;
    char first_error[160];
} mw_shared;

typedef struct mw_times {
    int64_t grant_ns, rel_ns; /* acquire callback; leash_release() call */
} mw_times;

static size_t mw_size(int64_t h) {
    return ((sizeof(mw_shared) + 63) & ~(size_t)63) + (size_t)(h + 1) * sizeof(mw_times);
}

static mw_times *mw_times_of(mw_shared *sh) {
    return (mw_times *)((char *)sh + ((sizeof(mw_shared) + 63) & ~(size_t)63));
}

typedef struct mw_proc mw_proc;

typedef struct mw_waiter {
    mw_proc *p;
    int id;
    leash_lock *lock;
} mw_waiter;

struct mw_proc {
    mw_shared *sh;
    struct ev_loop *loop;
    leash_client *client;
    mw_waiter *w;
    int id, n, done_snap;
    leash_stats a;
    ev_timer poll;
};

static void mw_error(mw_shared *sh, const char *what, int status) {
    if (atomic_fetch_add(&sh->errors, 1) == 0)
        snprintf(sh->first_error, sizeof sh->first_error, "%s: %s", what,
                 leash_status_name(status));
}

static void mw_acquired(leash_lock *l, int status, void *arg);

static void mw_released(leash_lock *l, int status, void *arg) {
    mw_waiter *w = arg;
    mw_shared *sh = w->p->sh;
    int rc;

    (void)l;
    if (atomic_load(&sh->snap) == 3)
        return;
    if (status != LEASH_OK) {
        mw_error(sh, "release", status);
        return;
    }
    if (atomic_load(&sh->stop))
        return;
    rc = leash_acquire(w->lock, LEASH_WAIT_FOREVER, mw_acquired, w);
    if (rc != LEASH_OK)
        mw_error(sh, "leash_acquire", rc);
}

static void mw_acquired(leash_lock *l, int status, void *arg) {
    mw_waiter *w = arg;
    mw_shared *sh = w->p->sh;
    int64_t now = bench_now_ns(), k;
    int expect = -1, rc;

    (void)l;
    if (atomic_load(&sh->snap) == 3)
        return;
    if (status != LEASH_OK) {
        mw_error(sh, "acquire", status);
        return;
    }
    if (!atomic_compare_exchange_strong(&sh->holder, &expect, w->p->id * 100000 + w->id))
        atomic_fetch_add(&sh->overlaps, 1);
    k = atomic_fetch_add(&sh->grants, 1);
    if (k > sh->h)
        return; /* cannot happen: the h-th holder keeps it */
    mw_times_of(sh)[k].grant_ns = now;
    if (k == sh->h) {
        atomic_store(&sh->stop, 1);
        return;
    }
    atomic_store(&sh->holder, -1);
    mw_times_of(sh)[k].rel_ns = bench_now_ns();
    rc = leash_release(w->lock, mw_released, w);
    if (rc != LEASH_OK)
        mw_error(sh, "leash_release", rc);
}

static void mw_poll(struct ev_loop *loop, ev_timer *t, int revents) {
    mw_proc *p = t->data;
    int snap = atomic_load(&p->sh->snap);
    leash_stats b, d;

    (void)revents;
    atomic_store(&p->sh->busy[p->id], busy_of(p->client));
    if (snap == p->done_snap)
        return;
    if (snap == 1) {
        leash_client_stats(p->client, &p->a);
    } else if (snap == 2) {
        leash_client_stats(p->client, &b);
        stats_delta(&p->a, &b, &d);
        atomic_fetch_add(&p->sh->sent, d.commands_sent);
        atomic_fetch_add(&p->sh->renews, d.renew_commands);
        atomic_fetch_add(&p->sh->wakeups, d.wakeups);
    } else if (snap == 3) {
        ev_break(loop, EVBREAK_ALL);
    }
    p->done_snap = snap;
    atomic_fetch_add(&p->sh->acks, 1);
}

static int mw_proc_main(mw_shared *sh, int kind, int id, int n) {
    mw_proc p;
    int i;

    memset(&p, 0, sizeof p);
    p.sh = sh;
    p.id = id;
    p.n = n;
    p.loop = ev_loop_new(EVFLAG_AUTO);
    p.w = calloc((size_t)n, sizeof *p.w);
    if (p.loop == NULL || p.w == NULL || (p.client = bench_client_new(p.loop, G.port)) == NULL ||
        bench_wait_connected(p.loop, &p.client, 1, 5000) != 0) {
        fprintf(stderr, "family: waiter process %d could not start\n", id);
        return 1;
    }
    for (i = 0; i < n; i++) {
        p.w[i].p = &p;
        p.w[i].id = i;
        if ((p.w[i].lock = make_lock(p.client, kind, "bench:family:herd", 0)) == NULL)
            return 1;
    }
    for (i = 0; i < n; i++) {
        int rc = leash_acquire(p.w[i].lock, LEASH_WAIT_FOREVER, mw_acquired, &p.w[i]);
        if (rc != LEASH_OK)
            mw_error(sh, "leash_acquire", rc);
    }
    atomic_fetch_add(&sh->ready, 1);
    ev_timer_init(&p.poll, mw_poll, 0.002, 0.002);
    p.poll.data = &p;
    ev_timer_start(p.loop, &p.poll);
    ev_run(p.loop, 0);
    ev_timer_stop(p.loop, &p.poll);
    leash_client_free(p.client);
    ev_run(p.loop, EVRUN_NOWAIT);
    ev_loop_destroy(p.loop);
    free(p.w);
    return 0;
}

typedef struct mw_result {
    int ok, kind, procs, waiters;
    int64_t handoffs;
    double sent_per, renew_per, wakeups_per, scripts_per, publishes_per, calls_per;
    double p50_us, p99_us, max_us, seconds;
    int overlaps, errors;
    char first_error[160];
    redis_counts rc;
    /* The queue parked (every waiter asked, nobody released) for idle_s:
     * renew commands sent, and the place renewals Redis ran (the renew
     * script's runs do not say how many places each renewed: estimated
     * as waiters x idle_s / the renew interval). */
    double idle_s, idle_renews, idle_sent;
} mw_result;

/* --idle: seconds the queue stays parked before the gate releases. */
static double idle_seconds = 2.;
/* --writer-every: the writer among the reading handles, every N ms. */
static int writer_every_default = 50;

/* Waits (sleeping) until every process acknowledged snap, at most 10 s. */
static int mw_snap(mw_shared *sh, int procs, int snap) {
    int64_t deadline = bench_now_ns() + 10000000000LL;

    atomic_store(&sh->acks, 0);
    atomic_store(&sh->snap, snap);
    while (atomic_load(&sh->acks) < procs && bench_now_ns() < deadline)
        test_sleep_ms(1);
    return atomic_load(&sh->acks) < procs ? -1 : 0;
}

/* settle() across the waiter processes: their busy_of() (published every
 * poll) and the gate's client, on the parent's loop; the server's counts
 * in *out. */
static int mw_settle(mw_shared *sh, int procs, struct ev_loop *loop, leash_client *gate,
                     redisContext *admin, int64_t timeout_ms, bench_cmdstats *out) {
    int64_t deadline = bench_now_ns() + timeout_ms * 1000000;
    uint64_t last = UINT64_MAX;
    int same = 0, never = 0, i;

    while (bench_now_ns() < deadline) {
        uint64_t busy = busy_of(gate);
        test_run_until(loop, &never, SETTLE_LOOK_MS);
        for (i = 0; i < procs; i++)
            busy += atomic_load(&sh->busy[i]);
        same = busy == last ? same + 1 : 0;
        last = busy;
        if (same >= 3) {
            test_run_until(loop, &never, SETTLE_TAIL_MS);
            return bench_cmdstats_read(admin, out);
        }
    }
    return -1;
}

typedef struct gate {
    int done, status;
} gate;

static void gate_cb(leash_lock *l, int status, void *arg) {
    gate *g = arg;
    (void)l;
    g->status = status;
    g->done = 1;
}

static int run_many(test_redis *r, redisContext *admin, int kind, int procs, int waiters, int64_t h,
                    mw_result *res) {
    mw_shared *sh = bench_shared_alloc(mw_size(h));
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *gc = NULL;
    leash_lock *gl = NULL;
    leash_stats ga, gb;
    bench_cmdstats a, b;
    redis_counts rcnt;
    pid_t pids[MAX_PROCS];
    gate g = {0, 0};
    int i, started = 0, rc = -1;
    int64_t deadline, t0;

    memset(res, 0, sizeof *res);
    res->kind = kind;
    res->procs = procs;
    res->waiters = waiters;
    if (sh == NULL || loop == NULL)
        goto out;
    sh->h = h;
    atomic_store(&sh->holder, -1);
    bench_flushall(r);
    if (clients_new(loop, &gc, 1) != 0) {
        gc = NULL;
        goto out;
    }
    if ((gl = make_lock(gc, kind, "bench:family:herd", 0)) == NULL ||
        leash_acquire(gl, 0, gate_cb, &g) != LEASH_OK || test_run_until(loop, &g.done, 5000) != 0 ||
        g.status != LEASH_OK) {
        fprintf(stderr, "family: the gate could not take the lock\n");
        goto out;
    }
    for (i = 0; i < procs; i++) {
        int n = waiters / procs + (i < waiters % procs ? 1 : 0);
        pid_t pid = bench_fork();
        if (pid < 0) {
            perror("family: fork");
            break;
        }
        if (pid == 0)
            _exit(mw_proc_main(sh, kind, i, n));
        pids[started++] = pid;
    }
    deadline = bench_now_ns() + 20000000000LL;
    while (started == procs && atomic_load(&sh->ready) < procs && bench_now_ns() < deadline)
        test_sleep_ms(5);
    if (started < procs || atomic_load(&sh->ready) < procs) {
        fprintf(stderr, "family: the waiter processes did not start\n");
        goto stop;
    }
    if (mw_settle(sh, procs, loop, gc, admin, 20000, &a) != 0) {
        fprintf(stderr, "family: the waiters did not settle\n");
        goto stop;
    }
    if (idle_seconds > 0.) {
        int never = 0;
        int64_t i0;
        if (mw_snap(sh, procs, 1) != 0) {
            fprintf(stderr, "family: the waiter processes did not answer\n");
            goto stop;
        }
        i0 = bench_now_ns();
        test_run_until(loop, &never, (int64_t)(idle_seconds * 1000.));
        if (mw_snap(sh, procs, 2) != 0) {
            fprintf(stderr, "family: the waiter processes did not answer\n");
            goto stop;
        }
        res->idle_s = (double)(bench_now_ns() - i0) / 1e9;
        /* The waiters' clients only (the gate's renews its own hold). */
        res->idle_renews = (double)atomic_load(&sh->renews);
        res->idle_sent = (double)atomic_load(&sh->sent);
        atomic_store(&sh->sent, 0);
        atomic_store(&sh->renews, 0);
        atomic_store(&sh->wakeups, 0);
        if (mw_settle(sh, procs, loop, gc, admin, 10000, &a) != 0) {
            fprintf(stderr, "family: the waiters did not settle\n");
            goto stop;
        }
    }
    if (mw_snap(sh, procs, 1) != 0) {
        fprintf(stderr, "family: the waiter processes did not answer\n");
        goto stop;
    }
    bench_cmdstats_read(admin, &a);
    leash_client_stats(gc, &ga);
    g.done = 0;
    t0 = bench_now_ns();
    sh->gate_rel_ns = t0;
    if (leash_release(gl, gate_cb, &g) != LEASH_OK || test_run_until(loop, &g.done, 5000) != 0 ||
        g.status != LEASH_OK) {
        fprintf(stderr, "family: the gate could not release\n");
        goto stop;
    }
    deadline = t0 + (int64_t)(G.cap_s * 1e9);
    while (!atomic_load(&sh->stop) && bench_now_ns() < deadline) {
        int never = 0;
        test_run_until(loop, &never, 2);
    }
    if (!atomic_load(&sh->stop)) {
        fprintf(stderr, "family: %s, %dx%d: %lld of %lld handoffs in %.0f s\n", kind_name(kind),
                procs, waiters, (long long)atomic_load(&sh->grants), (long long)h + 1, G.cap_s);
        goto stop;
    }
    res->seconds = (double)(bench_now_ns() - t0) / 1e9;
    if (mw_settle(sh, procs, loop, gc, admin, 10000, &b) != 0 || mw_snap(sh, procs, 2) != 0) {
        fprintf(stderr, "family: the server did not settle after the last handoff\n");
        goto stop;
    }
    leash_client_stats(gc, &gb);
    redis_counts_of(&a, &b, &rcnt);
    res->rc = rcnt;
    {
        mw_times *t = mw_times_of(sh);
        int64_t *gaps = calloc((size_t)h + 1, sizeof *gaps), k, n = h + 1;
        double hh = (double)n;
        res->handoffs = n;
        res->sent_per = (double)(atomic_load(&sh->sent) + gb.commands_sent - ga.commands_sent) / hh;
        res->renew_per =
            (double)(atomic_load(&sh->renews) + gb.renew_commands - ga.renew_commands) / hh;
        res->wakeups_per = (double)atomic_load(&sh->wakeups) / hh;
        res->scripts_per = (double)rcnt.scripts / hh;
        res->publishes_per = (double)rcnt.publishes / hh;
        res->calls_per = (double)rcnt.total / hh;
        if (gaps != NULL) {
            for (k = 0; k < n; k++)
                gaps[k] = t[k].grant_ns - (k == 0 ? sh->gate_rel_ns : t[k - 1].rel_ns);
            qsort(gaps, (size_t)n, sizeof *gaps, bench_cmp_i64);
            res->p50_us = (double)bench_pct(gaps, n, 0.5) / 1e3;
            res->p99_us = (double)bench_pct(gaps, n, 0.99) / 1e3;
            res->max_us = (double)gaps[n - 1] / 1e3;
            free(gaps);
        }
    }
    res->ok = 1;
    rc = 0;
stop:
    atomic_store(&sh->snap, 3);
    if (bench_reap(pids, started, 10000, "family") != 0)
        rc = -1;
    res->overlaps = atomic_load(&sh->overlaps);
    res->errors = atomic_load(&sh->errors);
    memcpy(res->first_error, sh->first_error, sizeof res->first_error);
out:
    if (gc != NULL)
        leash_client_free(gc);
    if (loop != NULL) {
        ev_run(loop, EVRUN_NOWAIT);
        ev_loop_destroy(loop);
    }
    if (sh != NULL)
        bench_shared_free(sh, mw_size(h));
    return rc;
}

/* ==== (c1) read throughput: R handles of one client in flight ==== */

typedef struct tp tp;

typedef struct tp_handle {
    tp *t;
    leash_lock *lock;
} tp_handle;

#define TP_MAX_WRITES 4096

struct tp {
    struct ev_loop *loop;
    int stopping, errors;
    int64_t cycles;
    char first_error[160];
    /* A writer among the readers (writer_every_ms of run_tp). */
    leash_lock *writer;
    ev_timer wtimer;
    int wbusy, nw;
    int64_t wasked, wfrom;
    int64_t wait_ns[TP_MAX_WRITES]; /* of the writes asked after wfrom */
};

static void tp_w_released(leash_lock *l, int status, void *arg) {
    tp *t = arg;

    (void)l;
    if (t->stopping)
        return;
    if (status != LEASH_OK && t->errors++ == 0)
        snprintf(t->first_error, sizeof t->first_error, "writer release: %s",
                 leash_status_name(status));
    t->wbusy = 0;
}

static void tp_w_acquired(leash_lock *l, int status, void *arg) {
    tp *t = arg;

    if (t->stopping)
        return;
    if (status != LEASH_OK) {
        if (t->errors++ == 0)
            snprintf(t->first_error, sizeof t->first_error, "writer acquire: %s",
                     leash_status_name(status));
        return;
    }
    if (t->wfrom != 0 && t->wasked >= t->wfrom && t->nw < TP_MAX_WRITES)
        t->wait_ns[t->nw++] = bench_now_ns() - t->wasked;
    if (leash_release(l, tp_w_released, t) != LEASH_OK && t->errors++ == 0)
        snprintf(t->first_error, sizeof t->first_error, "writer leash_release refused");
}

static void tp_w_tick(struct ev_loop *loop, ev_timer *w, int revents) {
    tp *t = w->data;

    (void)loop;
    (void)revents;
    if (t->wbusy || t->stopping)
        return;
    t->wbusy = 1;
    t->wasked = bench_now_ns();
    if (leash_acquire(t->writer, LEASH_WAIT_FOREVER, tp_w_acquired, t) != LEASH_OK &&
        t->errors++ == 0)
        snprintf(t->first_error, sizeof t->first_error, "writer leash_acquire refused");
}

static void tp_acquired(leash_lock *l, int status, void *arg);

static void tp_ask(tp_handle *x) {
    int rc = leash_acquire(x->lock, LEASH_WAIT_FOREVER, tp_acquired, x);
    if (rc != LEASH_OK && x->t->errors++ == 0)
        snprintf(x->t->first_error, sizeof x->t->first_error, "leash_acquire: %s",
                 leash_status_name(rc));
}

static void tp_released(leash_lock *l, int status, void *arg) {
    tp_handle *x = arg;

    (void)l;
    if (x->t->stopping)
        return;
    if (status != LEASH_OK) {
        if (x->t->errors++ == 0)
            snprintf(x->t->first_error, sizeof x->t->first_error, "release: %s",
                     leash_status_name(status));
        return;
    }
    x->t->cycles++;
    tp_ask(x);
}

static void tp_acquired(leash_lock *l, int status, void *arg) {
    tp_handle *x = arg;
    int rc;

    (void)l;
    if (x->t->stopping)
        return;
    if (status != LEASH_OK) {
        if (x->t->errors++ == 0)
            snprintf(x->t->first_error, sizeof x->t->first_error, "acquire: %s",
                     leash_status_name(status));
        return;
    }
    rc = leash_release(x->lock, tp_released, x);
    if (rc != LEASH_OK && x->t->errors++ == 0)
        snprintf(x->t->first_error, sizeof x->t->first_error, "leash_release: %s",
                 leash_status_name(rc));
}

typedef struct tp_result {
    int ok, kind, inflight;
    int writer_every_ms; /* 0: no writer */
    int writes;          /* writer acquisitions asked in the window and granted */
    double wait_p50_us, wait_max_us;
    double pending_ms; /* the writer's acquire still waiting at the end, for so long */
    int64_t cycles;
    double seconds, rate, calls_per, scripts_per, client_cpu_us, server_cpu_us;
    int errors;
    char first_error[160];
    redis_counts rc;
} tp_result;

/* writer_every_ms > 0 (read handles only): a write handle in a client of
 * its own asks every writer_every_ms (when it is not asking already) and
 * releases at once; its waits. */
static int run_tp(redisContext *admin, int kind, int inflight, double warm_s, double secs,
                  int writer_every_ms, tp_result *res) {
    tp t;
    tp_handle *xs = calloc((size_t)inflight, sizeof *xs);
    leash_client *c[2] = {NULL, NULL};
    int nclients = writer_every_ms > 0 ? 2 : 1;
    bench_cmdstats a, b;
    redis_counts rcnt;
    int i, rc = -1, never = 0;
    int64_t c0, t0, cpu0;
    double scpu0, scpu1;

    memset(&t, 0, sizeof t);
    memset(res, 0, sizeof *res);
    res->kind = kind;
    res->inflight = inflight;
    res->writer_every_ms = writer_every_ms;
    t.loop = ev_loop_new(EVFLAG_AUTO);
    if (xs == NULL || t.loop == NULL || clients_new(t.loop, c, nclients) != 0) {
        c[0] = NULL;
        goto out;
    }
    for (i = 0; i < inflight; i++) {
        char name[64];
        xs[i].t = &t;
        if (kind == K_MUTEX)
            snprintf(name, sizeof name, "bench:family:tp:%d", i);
        else
            snprintf(name, sizeof name, "bench:family:tp");
        if ((xs[i].lock = make_lock(c[0], kind, name, 0)) == NULL)
            goto out;
    }
    if (writer_every_ms > 0) {
        if ((t.writer = make_lock(c[1], K_WRITE, "bench:family:tp", 0)) == NULL)
            goto out;
        ev_timer_init(&t.wtimer, tp_w_tick, (double)writer_every_ms / 1000.,
                      (double)writer_every_ms / 1000.);
        t.wtimer.data = &t;
        ev_timer_start(t.loop, &t.wtimer);
    }
    for (i = 0; i < inflight; i++)
        tp_ask(&xs[i]);
    test_run_until(t.loop, &never, (int64_t)(warm_s * 1000.));
    t.wfrom = bench_now_ns();
    bench_cmdstats_read(admin, &a);
    scpu0 = bench_server_cpu_s(admin);
    cpu0 = bench_cpu_ns();
    c0 = t.cycles;
    t0 = bench_now_ns();
    test_run_until(t.loop, &never, (int64_t)(secs * 1000.));
    res->cycles = t.cycles - c0;
    res->seconds = (double)(bench_now_ns() - t0) / 1e9;
    res->client_cpu_us = per((double)(bench_cpu_ns() - cpu0) / 1e3, (double)res->cycles);
    scpu1 = bench_server_cpu_s(admin);
    bench_cmdstats_read(admin, &b);
    redis_counts_of(&a, &b, &rcnt);
    res->rc = rcnt;
    res->rate = per((double)res->cycles, res->seconds);
    res->calls_per = per((double)rcnt.total, (double)res->cycles);
    res->scripts_per = per((double)rcnt.scripts, (double)res->cycles);
    res->server_cpu_us =
        scpu0 >= 0. && scpu1 >= 0. ? per((scpu1 - scpu0) * 1e6, (double)res->cycles) : 0.;
    if (writer_every_ms > 0) {
        res->writes = t.nw;
        if (t.wbusy)
            res->pending_ms = (double)(bench_now_ns() - t.wasked) / 1e6;
        if (t.nw > 0) {
            qsort(t.wait_ns, (size_t)t.nw, sizeof t.wait_ns[0], bench_cmp_i64);
            res->wait_p50_us = (double)bench_pct(t.wait_ns, t.nw, 0.5) / 1e3;
            res->wait_max_us = (double)t.wait_ns[t.nw - 1] / 1e3;
        }
    }
    res->ok = t.errors == 0 && res->cycles > 0 && (writer_every_ms == 0 || t.nw > 0);
    rc = res->ok ? 0 : -1;
out:
    res->errors = t.errors;
    memcpy(res->first_error, t.first_error, sizeof res->first_error);
    t.stopping = 1;
    if (writer_every_ms > 0)
        ev_timer_stop(t.loop, &t.wtimer);
    if (c[0] != NULL)
        clients_free(t.loop, c, nclients);
    if (t.loop != NULL)
        ev_loop_destroy(t.loop);
    free(xs);
    return rc;
}

/* ==== (c2) a write release, then every waiting reader in ==== */

typedef struct wr {
    int n, granted, released, errors;
    int64_t rel_ns;
    int64_t *at; /* grant times of this round */
    char first_error[160];
} wr;

static void wr_error(wr *w, const char *what, int status) {
    if (w->errors++ == 0)
        snprintf(w->first_error, sizeof w->first_error, "%s: %s", what, leash_status_name(status));
}

static void wr_acquired(leash_lock *l, int status, void *arg) {
    wr *w = arg;
    (void)l;
    if (status != LEASH_OK) {
        wr_error(w, "reader acquire", status);
        return;
    }
    w->at[w->granted++] = bench_now_ns() - w->rel_ns;
}

static void wr_released(leash_lock *l, int status, void *arg) {
    wr *w = arg;
    (void)l;
    if (status != LEASH_OK)
        wr_error(w, "reader release", status);
    w->released++;
}

typedef struct wr_result {
    int ok, kind, readers, rounds;
    double first_us, median_us, all_us, all_max_us; /* medians over the rounds; max of all */
    double sent_per_round, wakeups_per_round;
    int errors;
    char first_error[160];
    redis_counts rc; /* the last round, from the release to the last grant */
} wr_result;

static double median_d(double *v, int n) {
    int i, j;
    for (i = 1; i < n; i++)
        for (j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return n > 0 ? v[n / 2] : 0.;
}

/*
 * rounds x: a holder (write lock, or a mutex) holds; `readers` handles
 * (read locks, or mutexes: then 1) over nclients clients ask
 * (LEASH_WAIT_FOREVER); once the clients are quiet, the holder releases; the time
 * from the leash_release() call to each waiter's acquire callback.
 */
static int run_wr(redisContext *admin, int kind, int readers, int nclients, int rounds,
                  wr_result *res) {
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *c[1 + 64];
    leash_lock *holder = NULL, **rl = calloc((size_t)readers, sizeof *rl);
    double *first = calloc((size_t)rounds, sizeof(double));
    double *mid = calloc((size_t)rounds, sizeof(double));
    double *all = calloc((size_t)rounds, sizeof(double));
    int64_t *at = calloc((size_t)readers, sizeof *at);
    wr w;
    gate g;
    int i, r, rc = -1, have_clients = 0;
    uint64_t sent = 0, wakeups = 0;

    memset(&w, 0, sizeof w);
    memset(res, 0, sizeof *res);
    res->kind = kind;
    res->readers = readers;
    w.n = readers;
    w.at = at;
    if (nclients > 64)
        nclients = 64;
    if (loop == NULL || rl == NULL || first == NULL || mid == NULL || all == NULL || at == NULL ||
        clients_new(loop, c, 1 + nclients) != 0)
        goto out;
    have_clients = 1;
    if ((holder = make_lock(c[0], kind == K_READ ? K_WRITE : kind, "bench:family:wr", 0)) == NULL)
        goto out;
    for (i = 0; i < readers; i++)
        if ((rl[i] = make_lock(c[1 + i % nclients], kind, "bench:family:wr", 0)) == NULL)
            goto out;
    for (r = 0; r < rounds; r++) {
        bench_cmdstats snap;
        leash_stats sa, sb, d;
        memset(&g, 0, sizeof g);
        if (leash_acquire(holder, LEASH_WAIT_FOREVER, gate_cb, &g) != LEASH_OK ||
            test_run_until(loop, &g.done, 5000) != 0 || g.status != LEASH_OK) {
            fprintf(stderr, "family: the %s holder could not take the lock\n", kind_name(kind));
            goto out;
        }
        w.granted = w.released = 0;
        w.rel_ns = 0;
        for (i = 0; i < readers; i++)
            if ((rc = leash_acquire(rl[i], LEASH_WAIT_FOREVER, wr_acquired, &w)) != LEASH_OK) {
                wr_error(&w, "leash_acquire", rc);
                rc = -1;
                goto out;
            }
        rc = -1;
        if (settle(loop, c, 1 + nclients, admin, 10000, &snap) != 0 || w.granted != 0) {
            fprintf(stderr, "family: the waiters did not settle (%d granted early)\n", w.granted);
            goto out;
        }
        stats_sum(c, 1 + nclients, &sa);
        g.done = 0;
        w.rel_ns = bench_now_ns();
        if (leash_release(holder, gate_cb, &g) != LEASH_OK) {
            fprintf(stderr, "family: the holder could not release\n");
            goto out;
        }
        {
            int64_t until = bench_now_ns() + (int64_t)(G.cap_s * 1e9);
            while (w.granted < readers && bench_now_ns() < until && w.errors == 0) {
                int never = 0;
                test_run_until(loop, &never, 5);
            }
        }
        stats_sum(c, 1 + nclients, &sb);
        stats_delta(&sa, &sb, &d);
        {
            bench_cmdstats after;
            if (bench_cmdstats_read(admin, &after) == 0)
                redis_counts_of(&snap, &after, &res->rc);
        }
        sent += d.commands_sent;
        wakeups += d.wakeups;
        if (w.granted < readers) {
            fprintf(stderr, "family: round %d: %d of %d waiters got the %s in %.0f s\n", r,
                    w.granted, readers, kind_name(kind), G.cap_s);
            goto out;
        }
        /* at[] is in grant order: the first, the median and the last. */
        first[r] = (double)at[0] / 1e3;
        mid[r] = (double)at[readers / 2] / 1e3;
        all[r] = (double)at[readers - 1] / 1e3;
        if (all[r] > res->all_max_us)
            res->all_max_us = all[r];
        for (i = 0; i < readers; i++)
            if (leash_release(rl[i], wr_released, &w) != LEASH_OK)
                wr_error(&w, "leash_release", LEASH_ESTATE);
        if (test_run_until(loop, &g.done, 5000) != 0 || g.status != LEASH_OK)
            wr_error(&w, "holder release", g.status);
        {
            int64_t until = bench_now_ns() + 5000000000LL;
            while (w.released < readers && bench_now_ns() < until) {
                int never = 0;
                test_run_until(loop, &never, 5);
            }
        }
        if (w.errors)
            goto out;
    }
    res->rounds = rounds;
    res->first_us = median_d(first, rounds);
    res->median_us = median_d(mid, rounds);
    res->all_us = median_d(all, rounds);
    res->sent_per_round = (double)sent / rounds;
    res->wakeups_per_round = (double)wakeups / rounds;
    res->ok = 1;
    rc = 0;
out:
    res->errors = w.errors;
    memcpy(res->first_error, w.first_error, sizeof res->first_error);
    if (have_clients)
        clients_free(loop, c, 1 + nclients);
    if (loop != NULL)
        ev_loop_destroy(loop);
    free(rl);
    free(first);
    free(mid);
    free(all);
    free(at);
    return rc;
}

/* ==== main ==== */

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [options]\n"
            "  -s, --scenarios LIST  of a (herd), b (many waiters), c (read-write),\n"
            "                        d (semaphore); default abcd\n"
            "  -n, --contenders N    herd contenders, each its own client (default 16)\n"
            "  -H, --handoffs N      herd handoffs measured (default 2000; 200 of warm-up)\n"
            "      --waiters LIST    many waiters: waiter counts (default 1000,10)\n"
            "      --procs N         many waiters: processes (default 4)\n"
            "      --many-handoffs N many waiters: handoffs measured (default 1000)\n"
            "      --idle S          many waiters: seconds parked before (default 2; 0: none)\n"
            "      --inflight N      read-write: handles in flight (default 1024)\n"
            "      --writer-every MS read-write: a writer among the readers every MS ms\n"
            "                        (default 50; 0: no such run)\n"
            "      --readers N       read-write: waiting readers (default 100)\n"
            "      --rounds N        read-write: write releases measured (default 20)\n"
            "      --permits N       semaphore permits (default 16)\n"
            "      --sem-contenders N  semaphore contenders, each its own client (default 64)\n"
            "      --sem-hold MS     semaphore: how long each holds (default 0: releases at\n"
            "                        once; at most 10000)\n"
            "  -t, --seconds S       window of the cycles/s runs (default 3)\n"
            "      --lease MS        lease of every handle (default 2000; 0: the client's)\n"
            "  -T, --time-cap S      seconds a measurement may take at most (default 30)\n"
            "      --no-pin          do not pin redis-server and the benchmark to CPUs\n",
            argv0);
}

static void print_error_note(const char *what, int errors, const char *first) {
    if (errors)
        printf("- **%s: %d errors** (first: %s)\n", what, errors, first);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {{"scenarios", required_argument, NULL, 's'},
                                             {"contenders", required_argument, NULL, 'n'},
                                             {"handoffs", required_argument, NULL, 'H'},
                                             {"waiters", required_argument, NULL, 'w'},
                                             {"procs", required_argument, NULL, 'P'},
                                             {"many-handoffs", required_argument, NULL, 'M'},
                                             {"inflight", required_argument, NULL, 'i'},
                                             {"idle", required_argument, NULL, 'I'},
                                             {"writer-every", required_argument, NULL, 'W'},
                                             {"readers", required_argument, NULL, 'r'},
                                             {"rounds", required_argument, NULL, 'R'},
                                             {"permits", required_argument, NULL, 'k'},
                                             {"sem-contenders", required_argument, NULL, 'S'},
                                             {"sem-hold", required_argument, NULL, 'h'},
                                             {"seconds", required_argument, NULL, 't'},
                                             {"lease", required_argument, NULL, 'l'},
                                             {"time-cap", required_argument, NULL, 'T'},
                                             {"no-pin", no_argument, NULL, 'p'},
                                             {"help", no_argument, NULL, '?'},
                                             {NULL, 0, NULL, 0}};
    const char *scen = "abcd";
    int contenders = 16, procs = 4, inflight = 1024, readers = 100, rounds = 20, permits = 16;
    int sem_contenders = 64, pin = 1, opt, i, failed = 0, nw = 2;
    int waiters[8] = {1000, 10};
    int64_t handoffs = 2000, many_h = 1000;
    double secs = 3., rtt_us = 0.;
    bench_cpus cpus;
    redisContext *admin;
    test_redis r;
    bench_steal steal;

    while ((opt = getopt_long(argc, argv, "s:n:H:t:T:", longopts, NULL)) != -1) {
        switch (opt) {
        case 's':
            scen = optarg;
            break;
        case 'n':
            contenders = atoi(optarg);
            break;
        case 'H':
            handoffs = strtoll(optarg, NULL, 10);
            break;
        case 'w':
            if ((nw = bench_parse_list(optarg, waiters, 8, 1, 100000)) < 1)
                return 2;
            break;
        case 'P':
            procs = atoi(optarg);
            break;
        case 'M':
            many_h = strtoll(optarg, NULL, 10);
            break;
        case 'i':
            inflight = atoi(optarg);
            break;
        case 'I':
            idle_seconds = strtod(optarg, NULL);
            break;
        case 'W':
            writer_every_default = atoi(optarg);
            break;
        case 'r':
            readers = atoi(optarg);
            break;
        case 'R':
            rounds = atoi(optarg);
            break;
        case 'k':
            permits = atoi(optarg);
            break;
        case 'S':
            sem_contenders = atoi(optarg);
            break;
        case 'h':
            G.sem_hold_ms = atoi(optarg);
            break;
        case 't':
            secs = strtod(optarg, NULL);
            break;
        case 'l':
            G.lease_ms = strtoll(optarg, NULL, 10);
            break;
        case 'T':
            G.cap_s = strtod(optarg, NULL);
            break;
        case 'p':
            pin = 0;
            break;
        default:
            usage(argv[0]);
            return 2;
        }
    }
    if (contenders < 2 || contenders > 1000 || handoffs < 10 || handoffs > 10000000 || procs < 1 ||
        procs > MAX_PROCS || many_h < 1 || inflight < 1 || inflight > 100000 || readers < 1 ||
        readers > 100000 || rounds < 1 || rounds > 10000 || permits < 1 ||
        permits > LEASH_PERMITS_MAX || sem_contenders < 1 || sem_contenders > 1000 ||
        !(secs > 0.) || !(G.cap_s > 0.) || G.lease_ms < 0 || idle_seconds < 0. ||
        writer_every_default < 0 || idle_seconds > 600. || G.sem_hold_ms < 0 ||
        G.sem_hold_ms > 10000) {
        usage(argv[0]);
        return 2;
    }
    for (i = 0; i < nw; i++)
        if (waiters[i] < procs) {
            fprintf(stderr, "family: %d waiters over %d processes: fewer than one each\n",
                    waiters[i], procs);
            return 2;
        }
    signal(SIGPIPE, SIG_IGN);
    if (bench_start_server(&r, NULL, pin, &cpus) != 0) {
        fprintf(stderr, "family: could not start redis-server\n");
        return 1;
    }
    G.port = r.port;
    if ((admin = bench_connect(r.port)) == NULL) {
        test_redis_stop(&r);
        return 1;
    }
    {
        bench_rb rb;
        if (bench_ping_rtt(r.port, &rb) == 0)
            rtt_us = rb.p50_us;
    }

    printf("### Lock family (leash-bench-family)\n\n");
    printf("Fair lock, read-write lock and semaphore beside the mutex, each measured in the "
           "same run on the same redis-server; the ratios (x mutex) are what to compare "
           "between runs. Every handle's lease: ");
    if (G.lease_ms > 0)
        printf("%lld ms (leash_lock_set_watchdog; renewed every %lld ms).\n", (long long)G.lease_ms,
               (long long)G.lease_ms / 3);
    else
        printf("the client's default (30 s).\n");
    if (rtt_us > 0.)
        printf("Reference round trip (redis-benchmark -c 1 -P 1 PING, same server and CPUs): "
               "p50 %.0f µs.\n",
               rtt_us);
    printf("\n");

    /* ---- (a) ---- */
    if (strchr(scen, 'a') != NULL) {
        cycle_result res[2];
        int kinds[2] = {K_MUTEX, K_FAIR}, k;
        bench_steal_begin(&cpus, &steal);
        for (k = 0; k < 2; k++) {
            fprintf(stderr, "family: herd, %s, %d contenders...\n", kind_name(kinds[k]),
                    contenders);
            bench_flushall(&r);
            if (run_cycles(admin, kinds[k], contenders, contenders, 1, 1, 200, handoffs, 0., 0., 0,
                           &res[k]) != 0)
                failed = 1;
        }
        bench_steal_end(&cpus, &steal);
        printf("#### Herd: %d contenders on one name\n\n", contenders);
        printf("| lock | handoffs | client cmds/handoff | of them renewals | Redis script runs/"
               "handoff | publishes/handoff | leash wakeups/handoff | handoff p50 µs | p99 µs "
               "| max µs | p50 x mutex (target: at most 0.6) | acquisitions per contender "
               "min / max | longest wait ms |\n");
        printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (k = 0; k < 2; k++) {
            const cycle_result *x = &res[k];
            double hh = (double)x->nsamples;
            if (!x->ok) {
                printf("| %s | failed | | | | | | | | | | | |\n", kind_name(kinds[k]));
                continue;
            }
            printf("| %s | %lld | **%.2f** | %.3f | %.2f | %.2f | %.2f | **%.0f** | %.0f | %.0f "
                   "| %s%.2f%s | %lld / %lld | %.1f |\n",
                   kind_name(kinds[k]), (long long)x->nsamples, per((double)x->d.commands_sent, hh),
                   per((double)x->d.renew_commands, hh), per((double)x->rc.scripts, hh),
                   per((double)x->rc.publishes, hh), per((double)x->d.wakeups, hh),
                   (double)x->p50_ns / 1e3, (double)x->p99_ns / 1e3, (double)x->max_ns / 1e3,
                   k ? "**" : "",
                   res[0].ok && res[0].p50_ns > 0 ? (double)x->p50_ns / (double)res[0].p50_ns : 0.,
                   k ? "**" : "", (long long)x->min_grants, (long long)x->max_grants,
                   (double)x->longest_wait_ns / 1e6);
        }
        printf("\nEach contender its own leash client, all on one libev loop; each loops "
               "leash_acquire(LEASH_WAIT_FOREVER) -> leash_release() inside the acquire "
               "callback (hold ~0) -> leash_acquire() again from the release callback. "
               "Handoffs: the grants after %d of warm-up; handoff = leash_release() call -> "
               "the next holder's acquire callback. Client commands: leash_stats "
               "commands_sent summed over the clients; every handoff includes the release and "
               "the releaser's new acquire (2 commands), what is above is the waiters'. "
               "Renewals: renew_commands (the fair lock's queue places are leases that the "
               "waiters renew, batched). Script runs and publishes: INFO commandstats "
               "(EVALSHA + EVAL, PUBLISH + SPUBLISH). Longest wait: leash_acquire() call -> "
               "its callback, in the window.\n",
               200);
        for (k = 0; k < 2; k++) {
            const cycle_result *x = &res[k];
            if (!x->ok)
                continue;
            printf("- %s: %.2f s; the same contender twice in a row %d times", kind_name(kinds[k]),
                   x->seconds, x->self_handoffs);
            print_calls(&x->rc, (double)x->nsamples, "handoff");
            if (x->over)
                printf(" (**%d grants while another held**)", x->over);
            if (x->d.losts || x->d.disconnects)
                printf("; **losts %llu, disconnects %llu**", (unsigned long long)x->d.losts,
                       (unsigned long long)x->d.disconnects);
            printf("\n");
        }
        for (k = 0; k < 2; k++)
            print_error_note(kind_name(kinds[k]), res[k].errors, res[k].first_error);
        printf("- during these runs");
        bench_print_steal(&steal);
        printf("\n\n");
    }

    /* ---- (b) ---- */
    if (strchr(scen, 'b') != NULL) {
        mw_result res[2][8];
        int kinds[2] = {K_FAIR, K_MUTEX}, k;
        bench_steal_begin(&cpus, &steal);
        for (k = 0; k < 2; k++)
            for (i = 0; i < nw; i++) {
                fprintf(stderr, "family: %s, %d waiters over %d processes, %lld handoffs...\n",
                        kind_name(kinds[k]), waiters[i], procs, (long long)many_h);
                if (run_many(&r, admin, kinds[k], procs, waiters[i], many_h, &res[k][i]) != 0)
                    failed = 1;
            }
        bench_steal_end(&cpus, &steal);
        printf("#### Many waiters over %d processes\n\n", procs);
        printf("| lock | waiters | handoffs | client cmds/handoff | of them renewals | x with %d "
               "waiters | Redis script runs/handoff | publishes/handoff | Redis calls/handoff "
               "| leash wakeups/handoff | handoff p50 µs | p99 µs | max µs |\n",
               waiters[nw - 1]);
        printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (k = 0; k < 2; k++)
            for (i = 0; i < nw; i++) {
                const mw_result *x = &res[k][i], *base = &res[k][nw - 1];
                if (!x->ok) {
                    printf("| %s | %d | failed | | | | | | | | | | |\n", kind_name(kinds[k]),
                           waiters[i]);
                    continue;
                }
                printf("| %s | %d | %lld | **%.2f** | %.3f | %s%.2f%s | %.2f | %.2f | %.2f | "
                       "%.2f | %.0f | %.0f | %.0f |\n",
                       kind_name(kinds[k]), x->waiters, (long long)x->handoffs, x->sent_per,
                       x->renew_per, k == 0 ? "**" : "",
                       base->ok && base->sent_per > 0. ? x->sent_per / base->sent_per : 0.,
                       k == 0 ? "**" : "", x->scripts_per, x->publishes_per, x->calls_per,
                       x->wakeups_per, x->p50_us, x->p99_us, x->max_us);
            }
        if (idle_seconds > 0.) {
            double interval_s = (G.lease_ms > 0 ? (double)G.lease_ms / 3. : 10000.) / 1000.;
            printf("\n| lock | waiters | parked s | client cmds/s | of them renew cmds/s | places "
                   "per renew cmd (estimate) |\n");
            printf("|---|---:|---:|---:|---:|---:|\n");
            for (k = 0; k < 2; k++)
                for (i = 0; i < nw; i++) {
                    const mw_result *x = &res[k][i];
                    double places = (double)x->waiters * x->idle_s / interval_s;
                    if (!x->ok)
                        continue;
                    printf("| %s | %d | %.2f | %.1f | %.1f | ", kind_name(kinds[k]), x->waiters,
                           x->idle_s, per(x->idle_sent, x->idle_s), per(x->idle_renews, x->idle_s));
                    if (k == 0 && x->idle_renews > 0.)
                        printf("%.1f |\n", places / x->idle_renews);
                    else
                        printf(" |\n");
                }
        }
        printf("\nP processes (forked), each one leash client with waiters/P handles on one "
               "name, all waiting (LEASH_WAIT_FOREVER) behind a holder in the parent. Window: "
               "from the holder's release (once every waiter asked and the clients sent "
               "nothing but renewals for 60 ms) to "
               "the %lld-th grant after it; each waiter that is granted releases at once and "
               "asks again (the end of the queue), so every handoff includes a release and a "
               "new acquire (2 commands); the last holder keeps the lock. Client commands: "
               "leash_stats commands_sent of every client (the parent's too), from before the "
               "first release to after the clients were quiet again, per handoff; the fair lock's "
               "must not grow with the waiters (target: x 1.00). Handoff: leash_release() call "
               "-> the next holder's acquire callback (CLOCK_MONOTONIC across processes). "
               "Parked: before the window, the queue stays as it is for %.1f s (every waiter "
               "asked, nobody releases): the commands the waiters' clients send meanwhile "
               "(the holder's are not counted) are their place renewals (a fair lock's place is a "
               "lease); places per renew "
               "command = waiters x parked s / the renew interval (%.3f s) / renew commands, "
               "at most 100 (the watchdog's batch).\n",
               (long long)many_h, idle_seconds,
               (G.lease_ms > 0 ? (double)G.lease_ms / 3. : 10000.) / 1000.);
        for (k = 0; k < 2; k++)
            for (i = 0; i < nw; i++) {
                const mw_result *x = &res[k][i];
                char what[64];
                if (x->ok) {
                    printf("- %s, %d waiters: %.2f s%s", kind_name(kinds[k]), waiters[i],
                           x->seconds, x->overlaps ? "; **grants while another held**" : "");
                    print_calls(&x->rc, (double)x->handoffs, "handoff");
                    printf("\n");
                }
                snprintf(what, sizeof what, "%s, %d waiters", kind_name(kinds[k]), waiters[i]);
                print_error_note(what, x->errors, x->first_error);
            }
        printf("- during these runs");
        bench_print_steal(&steal);
        printf("\n\n");
    }

    /* ---- (c) ---- */
    if (strchr(scen, 'c') != NULL) {
        tp_result m1, rd, m2, rw;
        wr_result wres, mres;
        double mref = 0.;
        bench_steal_begin(&cpus, &steal);
        fprintf(stderr, "family: read-write, %d in flight...\n", inflight);
        bench_flushall(&r);
        if (run_tp(admin, K_MUTEX, inflight, 0.5, secs, 0, &m1) != 0)
            failed = 1;
        bench_flushall(&r);
        if (run_tp(admin, K_READ, inflight, 0.5, secs, 0, &rd) != 0)
            failed = 1;
        bench_flushall(&r);
        if (run_tp(admin, K_MUTEX, inflight, 0.5, secs, 0, &m2) != 0)
            failed = 1;
        memset(&rw, 0, sizeof rw);
        if (writer_every_default > 0) {
            bench_flushall(&r);
            if (run_tp(admin, K_READ, inflight, 0.5, secs, writer_every_default, &rw) != 0)
                failed = 1;
        }
        bench_steal_end(&cpus, &steal);
        mref = m1.ok && m2.ok ? (m1.rate + m2.rate) / 2. : m1.ok ? m1.rate : m2.rate;
        printf("#### Read-write lock: %d read handles in flight\n\n", inflight);
        printf("| lock | names | in flight | cycles/s | x mutex (target: at least 0.8) | Redis "
               "script runs/cycle | Redis calls/cycle | client CPU µs/cycle | server CPU "
               "µs/cycle |\n");
        printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        {
            const tp_result *rows[4] = {&m1, &rd, &m2, &rw};
            const char *labels[4] = {"mutex (before)", "read lock", "mutex (after)",
                                     "read lock, a writer among the readers"};
            int k;
            for (k = 0; k < (writer_every_default > 0 ? 4 : 3); k++) {
                const tp_result *x = rows[k];
                if (!x->ok) {
                    printf("| %s | | %d | failed | | | | | |\n", labels[k], inflight);
                    continue;
                }
                printf("| %s | %d | %d | %.0f | %s%.2f%s | %.2f | %.2f | %.1f | %.1f |\n",
                       labels[k], k % 2 ? 1 : inflight, inflight, x->rate, k == 1 ? "**" : "",
                       mref > 0. ? x->rate / mref : 0., k == 1 ? "**" : "", x->scripts_per,
                       x->calls_per, x->client_cpu_us, x->server_cpu_us);
            }
        }
        printf("\nOne client, %d handles each looping leash_acquire(LEASH_WAIT_FOREVER) -> "
               "callback -> leash_release() -> callback -> again: read handles of ONE name, "
               "or mutex handles of %d distinct names (leash-bench-throughput's set-up); "
               "cycles counted over %.1f s after 0.5 s of warm-up. x mutex: against the mean "
               "of the mutex runs before and after. Redis calls: INFO commandstats, the "
               "scripts' inner calls included; server CPU: INFO cpu.\n",
               inflight, inflight, secs);
        if (writer_every_default > 0 && rw.writes > 0)
            printf("- a writer among the readers (a write handle in a client of its own asks "
                   "every %d ms, LEASH_WAIT_FOREVER, and releases at once; writers must not "
                   "starve): %d writes in the window, wait (leash_acquire() call -> callback) "
                   "p50 %.0f µs, max %.0f µs",
                   writer_every_default, rw.writes, rw.wait_p50_us, rw.wait_max_us);
        if (writer_every_default > 0 && rw.writes > 0)
            printf(rw.pending_ms > 0. ? "; at the end, one asked %.0f ms before was still "
                                        "waiting\n"
                                      : "; none waiting at the end\n",
                   rw.pending_ms);
        if (writer_every_default > 0 && rw.pending_ms > 1000.)
            printf("- **the writer's last acquire was still waiting at the end, for %.0f ms**\n",
                   rw.pending_ms);
        {
            const tp_result *rows[3] = {&m1, &rd, &m2};
            const char *labels[3] = {"mutex (before)", "read lock", "mutex (after)"};
            int k;
            for (k = 0; k < 3; k++)
                if (rows[k]->ok) {
                    printf("- %s: %.2f s, %lld cycles", labels[k], rows[k]->seconds,
                           (long long)rows[k]->cycles);
                    print_calls(&rows[k]->rc, (double)rows[k]->cycles, "cycle");
                    printf("\n");
                }
        }
        print_error_note("mutex (before)", m1.errors, m1.first_error);
        print_error_note("read lock", rd.errors, rd.first_error);
        print_error_note("mutex (after)", m2.errors, m2.first_error);
        print_error_note("read lock with a writer", rw.errors, rw.first_error);
        printf("- during these runs");
        bench_print_steal(&steal);
        printf("\n\n");

        fprintf(stderr, "family: write release -> %d readers, %d rounds...\n", readers, rounds);
        bench_steal_begin(&cpus, &steal);
        bench_flushall(&r);
        if (run_wr(admin, K_READ, readers, 4, rounds, &wres) != 0)
            failed = 1;
        bench_flushall(&r);
        if (run_wr(admin, K_MUTEX, 1, 1, rounds, &mres) != 0)
            failed = 1;
        bench_steal_end(&cpus, &steal);
        printf("| waiters | rounds | first in µs | median in µs | **all in µs** | all in, worst "
               "round µs | x one mutex handoff | client cmds per release | leash wakeups per "
               "release |\n");
        printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        if (wres.ok)
            printf("| %d readers behind a writer | %d | %.0f | %.0f | **%.0f** | %.0f | %.2f | "
                   "%.2f | %.2f |\n",
                   readers, wres.rounds, wres.first_us, wres.median_us, wres.all_us,
                   wres.all_max_us, mres.ok && mres.all_us > 0. ? wres.all_us / mres.all_us : 0.,
                   wres.sent_per_round, wres.wakeups_per_round);
        else
            printf("| %d readers behind a writer | failed | | | | | | | |\n", readers);
        if (mres.ok)
            printf("| 1 mutex waiter behind a mutex holder | %d | %.0f | %.0f | %.0f | %.0f | "
                   "1.00 | %.2f | %.2f |\n",
                   mres.rounds, mres.first_us, mres.median_us, mres.all_us, mres.all_max_us,
                   mres.sent_per_round, mres.wakeups_per_round);
        else
            printf("| 1 mutex waiter behind a mutex holder | failed | | | | | | | |\n");
        printf("\nA writer (its own client) holds the write lock; %d read handles of the same "
               "name, over 4 clients, ask (LEASH_WAIT_FOREVER); once the clients sent nothing "
               "but renewals for 60 ms the writer "
               "releases. From its leash_release() call to the acquire callback of the first, "
               "the median and the last reader (\"all in\"); medians over %d rounds, and the "
               "worst round. Reference: the same round with a mutex and one waiter (a single "
               "handoff), in the same run. Client commands and wakeups: leash_stats of every "
               "client, from the release to the last grant (the writer's release included).\n",
               readers, rounds);
        if (wres.ok) {
            printf("- %d readers, the last round", readers);
            print_calls(&wres.rc, 1., "release");
            printf("\n");
        }
        if (mres.ok) {
            printf("- 1 mutex waiter, the last round");
            print_calls(&mres.rc, 1., "release");
            printf("\n");
        }
        print_error_note("readers", wres.errors, wres.first_error);
        print_error_note("mutex waiter", mres.errors, mres.first_error);
        printf("- during these runs");
        bench_print_steal(&steal);
        printf("\n\n");
    }

    /* ---- (d) ---- */
    if (strchr(scen, 'd') != NULL) {
        cycle_result res[2];
        int k;
        bench_steal_begin(&cpus, &steal);
        fprintf(stderr, "family: semaphore, %d permits, %d contenders...\n", permits,
                sem_contenders);
        bench_flushall(&r);
        if (run_cycles(admin, K_MUTEX, sem_contenders, sem_contenders, permits, 1, 0, 0, 0.5, secs,
                       G.sem_hold_ms, &res[0]) != 0)
            failed = 1;
        bench_flushall(&r);
        if (run_cycles(admin, K_SEM, sem_contenders, sem_contenders, 1, permits, 0, 0, 0.5, secs,
                       G.sem_hold_ms, &res[1]) != 0)
            failed = 1;
        bench_steal_end(&cpus, &steal);
        printf("#### Semaphore: %d permits, %d contenders, hold %d ms\n\n", permits, sem_contenders,
               G.sem_hold_ms);
        printf("| lock | names | holders at most | contenders | cycles/s | x mutex | leash "
               "wakeups per freed permit (target: 1) | client cmds/cycle | of them renewals | "
               "Redis script runs/cycle | publishes/cycle | Redis calls/cycle | wait p50 / p99 "
               "ms | acquisitions per contender min / max |\n");
        printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (k = 0; k < 2; k++) {
            const cycle_result *x = &res[k];
            double g = (double)x->grants, rate = per(g, x->seconds);
            double mrate = res[0].ok ? per((double)res[0].grants, res[0].seconds) : 0.;
            if (!x->ok) {
                printf("| %s | | | %d | failed | | | | | | | | | |\n", k ? "semaphore" : "mutex",
                       sem_contenders);
                continue;
            }
            printf("| %s | %d | %d | %d | %.0f | %s%.2f%s | **%.2f** | %.2f | %.3f | %.2f | %.2f "
                   "| **%.2f** | %.2f / %.2f | %lld / %lld |\n",
                   k ? "semaphore" : "mutex", k ? 1 : permits, permits, sem_contenders, rate,
                   k ? "**" : "", mrate > 0. ? rate / mrate : 0., k ? "**" : "",
                   per((double)x->d.wakeups, (double)x->releases),
                   per((double)x->d.commands_sent, g), per((double)x->d.renew_commands, g),
                   per((double)x->rc.scripts, g), per((double)x->rc.publishes, g),
                   per((double)x->rc.total, g), (double)x->wait_p50_ns / 1e6,
                   (double)x->wait_p99_ns / 1e6, (long long)x->min_grants,
                   (long long)x->max_grants);
        }
        printf("\nEach contender its own leash client, all on one libev loop, looping "
               "leash_acquire(LEASH_WAIT_FOREVER) -> hold %d ms (0: leash_release() inside the "
               "acquire callback; else a timerfd) -> leash_release() -> leash_acquire() from "
               "the release callback: ONE semaphore of %d "
               "permits, or mutexes on %d names (%d contenders each: %d holders at most "
               "there too). Cycles over %.1f s after 0.5 s of warm-up; a cycle is one permit "
               "given. Wake-ups per freed "
               "permit: leash_stats wakeups summed over the clients, per release in the "
               "window (each release frees one permit; more than 1 means waiters woken for "
               "nothing). Redis calls: INFO commandstats, the scripts' inner calls included. "
               "Wait: leash_acquire() call -> its callback, every grant in the window. "
               "Hold as it was: acquire callback -> leash_release() call; handoff: a "
               "leash_release() call -> the grant it made room for (the oldest release of that "
               "name not yet followed by a grant); CPU: the benchmark process (every client) "
               "and the server (INFO cpu), per cycle.\n",
               G.sem_hold_ms, permits, permits, sem_contenders / permits, permits, secs);
        for (k = 0; k < 2; k++)
            if (res[k].ok) {
                printf("- %s: %.2f s, %lld cycles", k ? "semaphore" : "mutex", res[k].seconds,
                       (long long)res[k].grants);
                print_calls(&res[k].rc, (double)res[k].grants, "cycle");
                if (G.sem_hold_ms > 0)
                    printf("; hold as it was p50 %.0f / p99 %.0f µs, handoff p50 %.0f / p99 %.0f "
                           "µs; CPU per cycle: client %.1f µs, server %.1f µs",
                           (double)res[k].hold_p50_ns / 1e3, (double)res[k].hold_p99_ns / 1e3,
                           (double)res[k].handoff_p50_ns / 1e3, (double)res[k].handoff_p99_ns / 1e3,
                           res[k].client_cpu_us, res[k].server_cpu_us);
                printf("\n");
            }
        for (k = 0; k < 2; k++)
            if (res[k].over)
                printf("- **%s: %d grants beyond what it allows at once**\n",
                       k ? "semaphore" : "mutex", res[k].over);
        print_error_note("mutex", res[0].errors, res[0].first_error);
        print_error_note("semaphore", res[1].errors, res[1].first_error);
        printf("- during these runs");
        bench_print_steal(&steal);
        printf("\n\n");
    }

    redisFree(admin);
    test_redis_stop(&r);
    bench_print_cpus(&cpus);
    return failed ? 1 : 0;
}
