/* SPDX-License-Identifier: MIT */
/*
 * leash-bench-poll: what waiting without pub/sub costs (docs/how-it-works.md "Waiting
 * without pub/sub"), beside waiting with it.
 *
 * Two figures per configuration, each once with pub/sub (LEASH_PUBSUB_AUTO)
 * and once polling (LEASH_PUBSUB_OFF):
 *
 *   handoff  two clients (each standing for a process) on one lock name
 *            take turns: the holder holds for a random time in
 *            [--hold-min, --hold-max] ms (so that a release falls anywhere
 *            in a poller's backoff), releases, and asks again once the
 *            other holds; the other waits meanwhile. Latency: from the
 *            release's completion callback to the waiter's acquire
 *            callback; p50 and p99 of --handoffs samples.
 *   idle     a holder of another client keeps the lock (a fixed lease: it
 *            sends nothing) while --waiters clients wait for it, for
 *            --seconds s after a settling second: the Redis commands the
 *            server ran in that window (INFO commandstats; a script's inner
 *            commands counted apart), per second and waiting client.
 *
 * One server (pinned as bench_start_server pins it), and with --cluster a
 * Redis Cluster of 3 masters and 3 replicas (bench_start_cluster). One libev
 * loop runs every client. Output: a markdown table, then the notes.
 */
#define _GNU_SOURCE /* getopt_long */

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "common.h"
#include "evloop.h"

static int handoffs = 200, hold_min = 10, hold_max = 300, waiters = 4, seconds = 10;

/* ---- handoff ---- */

typedef struct contender {
    leash_lock *l;
    ev_timer hold;
    struct bench_handoff *h;
} contender;

typedef struct bench_handoff {
    struct ev_loop *loop;
    contender c[2];
    int64_t released_at; /* ns, of the last release's completion; 0 none */
    int64_t *samples;
    int n, want, failed;
} bench_handoff;

static void on_acquired(leash_lock *l, int status, void *arg);

static void on_released(leash_lock *l, int status, void *arg) {
    contender *c = arg;
    (void)l;
    if (status != LEASH_OK)
        c->h->failed = 1;
    c->h->released_at = bench_now_ns();
}

static void hold_over(struct ev_loop *loop, ev_timer *w, int revents) {
    contender *c = w->data;
    (void)loop, (void)revents;
    if (leash_release(c->l, on_released, c) != LEASH_OK)
        c->h->failed = 1;
}

static void on_acquired(leash_lock *l, int status, void *arg) {
    contender *c = arg, *other;
    bench_handoff *h = c->h;
    double hold_s;
    (void)l;

    if (status != LEASH_OK) {
        h->failed = 1;
        return;
    }
    if (h->released_at != 0 && h->n < h->want)
        h->samples[h->n++] = bench_now_ns() - h->released_at;
    h->released_at = 0;
    other = c == &h->c[0] ? &h->c[1] : &h->c[0];
    /* The other asks again now that this one holds: every handoff goes to
     * a waiter. */
    if (h->n < h->want && !leash_held(other->l) &&
        leash_acquire(other->l, LEASH_WAIT_FOREVER, on_acquired, other) != LEASH_OK)
        h->failed = 1;
    hold_s = (hold_min + (double)(rand() % (hold_max - hold_min + 1))) / 1000.0;
    ev_timer_set(&c->hold, hold_s, 0.);
    ev_timer_start(h->loop, &c->hold);
}

static int run_handoff(struct ev_loop *loop, const bench_target *t, const char *name, int64_t *p50,
                       int64_t *p99) {
    bench_handoff h;
    leash_client *cl[2];
    int i, rc = 0;
    int64_t deadline;

    memset(&h, 0, sizeof(h));
    h.loop = loop;
    h.want = handoffs;
    h.samples = calloc((size_t)handoffs, sizeof(int64_t));
    for (i = 0; i < 2; i++) {
        cl[i] = bench_client_new_at(loop, t);
        if (cl[i] == NULL)
            return -1;
    }
    if (bench_wait_ready(loop, cl, 2, t, 10000) != 0)
        return -1;
    for (i = 0; i < 2; i++) {
        h.c[i].l = leash_lock_new(cl[i], name);
        h.c[i].h = &h;
        ev_timer_init(&h.c[i].hold, hold_over, 0., 0.);
        h.c[i].hold.data = &h.c[i];
    }
    if (leash_acquire(h.c[0].l, LEASH_WAIT_FOREVER, on_acquired, &h.c[0]) != LEASH_OK)
        return -1;
    deadline = bench_now_ns() + (int64_t)handoffs * (hold_max + 1000) * 1000000;
    while (h.n < h.want && !h.failed && bench_now_ns() < deadline)
        ev_run(loop, EVRUN_ONCE);
    if (h.n < h.want || h.failed) {
        fprintf(stderr, "poll: handoff: %d of %d samples%s\n", h.n, h.want,
                h.failed ? ", a call failed" : "");
        rc = -1;
    } else {
        qsort(h.samples, (size_t)h.n, sizeof(int64_t), bench_cmp_i64);
        *p50 = bench_pct(h.samples, h.n, 0.50);
        *p99 = bench_pct(h.samples, h.n, 0.99);
    }
    for (i = 0; i < 2; i++) {
        ev_timer_stop(loop, &h.c[i].hold);
        leash_lock_free(h.c[i].l);
        leash_client_free(cl[i]);
    }
    free(h.samples);
    return rc;
}

/* ---- idle waiters ---- */

static void on_waited(leash_lock *l, int status, void *arg) {
    (void)l, (void)status, (void)arg; /* cancelled at the end */
}

static int run_idle(struct ev_loop *loop, const bench_target *t, const char *name, double *per_s,
                    double *scripts_per_s) {
    bench_admin a;
    bench_cmdstats before, after, d;
    leash_client *cl[1 + 64] = {NULL};
    leash_lock *l[1 + 64] = {NULL};
    int i, n = 1 + waiters, done = 0;

    if (bench_admin_open(&a, t) != 0)
        return -1;
    for (i = 0; i < n; i++)
        if ((cl[i] = bench_client_new_at(loop, t)) == NULL)
            return -1;
    if (bench_wait_ready(loop, cl, n, t, 10000) != 0)
        return -1;
    for (i = 0; i < n; i++)
        l[i] = leash_lock_new(cl[i], name);
    leash_lock_set_fixed_lease(l[0], 600000);
    leash_acquire(l[0], 0, on_waited, &done);
    test_run_for(loop, 200);
    if (!leash_held(l[0]))
        return -1;
    for (i = 1; i < n; i++)
        leash_acquire(l[i], LEASH_WAIT_FOREVER, on_waited, NULL);
    test_run_for(loop, 1000);
    bench_admin_cmdstats(&a, &before);
    test_run_for(loop, (int64_t)seconds * 1000);
    bench_admin_cmdstats(&a, &after);
    bench_cmdstats_delta(&before, &after, &d);
    *per_s = (double)bench_cmdstats_total(&d) / seconds / waiters;
    *scripts_per_s =
        (double)(bench_cmdstats_calls(&d, "evalsha") + bench_cmdstats_calls(&d, "eval")) / seconds /
        waiters;
    for (i = 0; i < n; i++) {
        leash_lock_free(l[i]);
        leash_client_free(cl[i]);
    }
    test_run_for(loop, 100);
    bench_admin_close(&a);
    return 0;
}

/* ---- the table ---- */

static void run_target(struct ev_loop *loop, bench_target *t, const char *where) {
    static const int modes[2] = {LEASH_PUBSUB_AUTO, LEASH_PUBSUB_OFF};
    static const char *const mode_names[2] = {"pub/sub", "polling"};
    int m;

    for (m = 0; m < 2; m++) {
        int64_t p50 = 0, p99 = 0;
        double per_s = 0, scripts_per_s = 0;
        char name[64];

        t->pubsub = modes[m];
        snprintf(name, sizeof(name), "bench-poll-%d", m);
        if (run_handoff(loop, t, name, &p50, &p99) != 0 ||
            run_idle(loop, t, name, &per_s, &scripts_per_s) != 0) {
            printf("| %s | %s | failed | | | |\n", where, mode_names[m]);
            continue;
        }
        printf("| %s | %s | %.0f | %.0f | %.2f | %.2f |\n", where, mode_names[m], p50 / 1e3,
               p99 / 1e3, per_s, scripts_per_s);
        fflush(stdout);
    }
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"handoffs", required_argument, NULL, 'n'},
        {"hold-min", required_argument, NULL, 'a'},
        {"hold-max", required_argument, NULL, 'b'},
        {"waiters", required_argument, NULL, 'w'},
        {"seconds", required_argument, NULL, 's'},
        {"cluster", no_argument, NULL, 'C'},
        {NULL, 0, NULL, 0},
    };
    struct ev_loop *loop = ev_default_loop(0);
    test_redis r;
    test_cluster cl;
    bench_cpus cpus;
    bench_target t;
    int opt, cluster = 0;

    while ((opt = getopt_long(argc, argv, "n:w:s:C", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            handoffs = atoi(optarg);
            break;
        case 'a':
            hold_min = atoi(optarg);
            break;
        case 'b':
            hold_max = atoi(optarg);
            break;
        case 'w':
            waiters = atoi(optarg);
            break;
        case 's':
            seconds = atoi(optarg);
            break;
        case 'C':
            cluster = 1;
            break;
        default:
            fprintf(stderr,
                    "usage: %s [--handoffs N] [--hold-min MS] [--hold-max MS] "
                    "[--waiters N] [--seconds S] [--cluster]\n",
                    argv[0]);
            return 2;
        }
    }
    if (handoffs < 10 || hold_min < 0 || hold_max < hold_min || waiters < 1 || waiters > 64 ||
        seconds < 1) {
        fprintf(stderr, "poll: bad numbers\n");
        return 2;
    }
    srand(1);
    memset(&r, 0, sizeof(r));
    if (bench_start_server(&r, NULL, 1, &cpus) != 0)
        return 1;
    bench_print_cpus(&cpus);
    printf("\nHandoff between 2 clients (holds of %d..%d ms, %d handoffs); Redis commands per "
           "second per waiting client (%d waiters, %d s, the holder silent). Backoff: "
           "LEASH_POLL_MIN_MS %d .. LEASH_POLL_MAX_MS %d.\n\n",
           hold_min, hold_max, handoffs, waiters, seconds, LEASH_POLL_MIN_MS, LEASH_POLL_MAX_MS);
    printf("| where | waiting | handoff p50 µs | handoff p99 µs | commands/s per waiter | "
           "scripts/s per waiter |\n|---|---|---|---|---|---|\n");
    bench_target_single(&t, r.port);
    run_target(loop, &t, "one server");
    test_redis_stop(&r);
    if (cluster) {
        memset(&cl, 0, sizeof(cl));
        if (bench_start_cluster(&cl, &cpus, &t) != 0)
            return 1;
        run_target(loop, &t, "cluster (3+3)");
        test_cluster_stop(&cl);
    }
    return 0;
}
