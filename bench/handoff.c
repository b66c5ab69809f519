/* SPDX-License-Identifier: MIT */
/*
 * leash-bench-handoff: how fast the lock moves from one holder to the next.
 *
 * N contenders (default 2 and 16) share ONE lock name. Each is a leash
 * client of its own (but see -m client) and loops: acquire
 * (LEASH_WAIT_FOREVER), hold for --hold ms (an ev_timer), release. Modes:
 *   loop    all contenders in this process, on one libev loop (default);
 *   procs   one forked process per contender, each with its own loop
 *           (default);
 *   client  all contenders as handles of ONE client (-m client or -m all),
 *           which exercises the client's local FIFO of waiters.
 *
 * Handoff latency is the time from a release's completion callback to the
 * acquire callback of the next holder (CLOCK_MONOTONIC; the stamps live in
 * a MAP_SHARED region, so they cross processes). Holds are numbered in the
 * order they start, which is the order Redis granted them, so hold k's
 * release is paired with hold k+1's grant whatever order the two callbacks
 * ran in (a negative sample would mean the next holder heard of the grant
 * before the releaser heard its release answer). The notes also give the
 * time from the leash_release() call, which includes the release's own
 * round trip and never goes negative.
 *
 * A contender that has just released asks again only once another
 * contender holds the lock (it is "kicked" by the next holder), so every
 * handoff goes to a waiter that was queued, never back to the releaser
 * (--barge asks again at once instead, and counts the self-handoffs).
 *
 * Redis commands are counted with INFO commandstats, snapshotted by the
 * holder of hold W (after a warm-up of W holds) and by the holder of hold
 * W + H (or at the time cap). Commands that Lua scripts run are counted too,
 * which tells the scripts' runs apart (common.c knows which script runs
 * what: the acquire script is the only one that calls TIME on every run).
 * The acquire runs are checked against "lock script calls minus the
 * releases this program issued", and a note says so when they differ.
 *
 * The redis-server is started by bench_start_server() (common.h): pinned to
 * the first allowed CPU, the benchmark to the second. The reference, on the
 * same server and CPUs, is one round trip (redis-benchmark -c 1 PING) when
 * redis-benchmark is installed. The same handoff with bare hiredis is
 * leash-bench-floor; one uncontended acquire+release is leash-bench-idle.
 *
 * Redis Cluster (--cluster): the same handoff between 2 contenders
 * (--cluster-contenders) on a Redis Cluster of 3 masters with a replica
 * each (common.h: every node on the server's CPU), once with the pub/sub
 * a cluster client uses by default (LEASH_PUBSUB_AUTO: sharded, SSUBSCRIBE
 * and SPUBLISH at the lock's shard) and once with classic pub/sub
 * (LEASH_PUBSUB_CLASSIC: PUBLISH, which the cluster bus broadcasts to
 * every node). Besides the latencies, the pub/sub messages on the cluster
 * bus per release: CLUSTER INFO's cluster_stats_messages_publish_* and
 * _publishshard_* (sent and received), summed over every node at the same
 * two snapshots as the commands. Every release is contended (the other
 * contender waits), so every release publishes once; a sharded message
 * should cost one bus message per replica of the lock's shard, a classic
 * one a message to each other node. The reference round trip is measured
 * on a master of the cluster too.
 *
 * Redlock (--redlock): the same handoff between 2 contenders
 * (--redlock-contenders) by LEASH_TOPOLOGY_REDLOCK clients over Redlock's 5
 * independent servers (common.h: all on the server's CPU), beside the
 * one-server configuration of the same contenders and mode: p50 (target:
 * under 1 ms) and p99, and the Redis calls per acquisition summed over the
 * five. The reference round trip is measured on one of the five.
 *
 * Output: one markdown table on stdout, then notes. Exit 0 when every
 * configuration ran (even if a figure is bad), 1 on a set-up failure.
 */
#define _GNU_SOURCE /* pipe2, getopt_long */

#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <ev.h>
#include <hiredis/hiredis.h>
#include <leash/adapters/libev.h>
#include <leash/leash.h>

#include "common.h"
#include "redis_server.h"

#define MAX_CONTENDERS 64
#define MAX_CONFIGS 16

/* ---- state shared by all contenders (MAP_SHARED in procs mode) ---- */

typedef struct shared {
    _Atomic int64_t holds;               /* holds started so far; hold k is the (k+1)-th */
    _Atomic int stop;                    /* 1 once the window closed (the stopper wins the CAS) */
    _Atomic int ready;                   /* contender processes connected */
    _Atomic int go;                      /* contenders may start */
    _Atomic int owner;                   /* id of the contender that holds, -1 none */
    _Atomic int overlaps;                /* a grant while another contender held: must stay 0 */
    _Atomic int errors;                  /* unexpected statuses */
    _Atomic int pending[MAX_CONTENDERS]; /* released, waiting for a kick */

    /* leash_stats summed over the clients as they finish. */
    _Atomic uint64_t wakeups, commands_sent, renew_commands, noscript_reloads, disconnects;

    int64_t warmup;         /* W: the window opens at hold W */
    int64_t target;         /* W + H: the window closes at this hold */
    int64_t slots;          /* size of the arrays below */
    int snap_a_ok;          /* set by the holder of hold W */
    int snap_b_ok;          /* set by the stopper */
    bench_bus bus_a, bus_b; /* a cluster's bus at the same two snapshots */
    int64_t snap_b_hold;    /* holds started when snapshot B was taken */
    int time_capped;        /* the cap closed the window, not the count */
    bench_cmdstats snap_a, snap_b;
    char first_error[160];

    int64_t *acq_ns; /* [k]: acquire callback of hold k */
    int64_t *rel_ns; /* [k]: release completion callback of hold k */
    int64_t *ask_ns; /* [k]: leash_release() call of hold k */
    int *holder;     /* [k]: contender id of hold k */
} shared;

static size_t shared_size(int64_t slots) {
    return ((sizeof(shared) + 63) & ~(size_t)63) +
           (size_t)slots * (3 * sizeof(int64_t) + sizeof(int));
}

static shared *shared_new(int64_t slots) {
    size_t head = (sizeof(shared) + 63) & ~(size_t)63;
    char *mem = bench_shared_alloc(shared_size(slots));
    shared *sh;
    int i;

    if (mem == NULL)
        return NULL;
    sh = (shared *)mem;
    sh->slots = slots;
    sh->acq_ns = (int64_t *)(mem + head);
    sh->rel_ns = sh->acq_ns + slots;
    sh->ask_ns = sh->rel_ns + slots;
    sh->holder = (int *)(sh->ask_ns + slots);
    atomic_store(&sh->owner, -1);
    for (i = 0; i < MAX_CONTENDERS; i++)
        atomic_store(&sh->pending[i], 0);
    return sh;
}

static void shared_free(shared *sh) {
    bench_shared_free(sh, shared_size(sh->slots));
}

static void note_error(shared *sh, const char *what, int status) {
    if (atomic_fetch_add(&sh->errors, 1) == 0)
        snprintf(sh->first_error, sizeof sh->first_error, "%s: %s", what,
                 leash_status_name(status));
}

/* ---- one configuration ---- */

enum {
    MODE_LOOP,  /* one process, one loop, a client per contender */
    MODE_PROCS, /* a process (loop, client) per contender */
    MODE_SHARED /* one process, one loop, ONE client with a handle per contender */
};

static const char *mode_name(int mode) {
    return mode == MODE_LOOP ? "one loop" : mode == MODE_PROCS ? "processes" : "one client";
}

static const char *mode_tag(int mode) {
    return mode == MODE_LOOP ? "loop" : mode == MODE_PROCS ? "procs" : "client";
}

typedef struct bench bench;

enum {
    C_IDLE,
    C_ACQUIRING,
    C_HELD,
    C_RELEASING
};

typedef struct contender {
    int id;
    bench *b;
    struct ev_loop *loop;
    leash_client *client;
    leash_lock *lock;
    ev_timer hold;
    ev_io kick_io; /* procs mode: the read end of this contender's kick pipe */
    int state;
    int64_t hold_index;
    bench_admin *admin; /* blocking connections for INFO snapshots */
    int owns_client;    /* 0: the handle of a client that cs[0] owns */
    int finished;
} contender;

struct bench {
    int n;
    int mode;
    int barge;
    int hold_ms;
    bench_target target;
    char lock_name[64];
    shared *sh;
    contender cs[MAX_CONTENDERS]; /* loop mode: all; procs mode: [id] in its child */
    int kick_r[MAX_CONTENDERS], kick_w[MAX_CONTENDERS];
    struct ev_loop *loop; /* loop mode */
    ev_timer cap_timer, finish_timer;
    double cap_s;
};

static void contender_acquire(contender *ct);
static void stop_everyone(bench *b);

/* The INFO snapshot that opens the window (the holder of hold W takes
 * it). */
static void open_window(bench *b, bench_admin *admin) {
    shared *sh = b->sh;

    sh->snap_a_ok = bench_admin_cmdstats(admin, &sh->snap_a) == 0;
    if (b->target.cluster)
        bench_admin_bus(admin, &sh->bus_a);
}

/* The INFO snapshot that closes the window; only the stopper takes it. */
static void close_window(bench *b, bench_admin *admin, int capped) {
    shared *sh = b->sh;

    sh->snap_b_hold = atomic_load(&sh->holds);
    sh->snap_b_ok = bench_admin_cmdstats(admin, &sh->snap_b) == 0;
    if (b->target.cluster)
        bench_admin_bus(admin, &sh->bus_b);
    sh->time_capped = capped;
}

/* Kicks contender j: it asks for the lock again (or stops, after stop). */
static void kick(bench *b, int j) {
    if (b->mode != MODE_PROCS) {
        contender *ct = &b->cs[j];
        if (!atomic_load(&b->sh->stop) && ct->state == C_IDLE)
            contender_acquire(ct);
    } else {
        ssize_t n = write(b->kick_w[j], "k", 1);
        (void)n; /* a full pipe is a kick already on its way */
    }
}

static void on_hold_over(struct ev_loop *loop, ev_timer *w, int revents);

static void on_acquired(leash_lock *l, int status, void *arg) {
    contender *ct = arg;
    bench *b = ct->b;
    shared *sh = b->sh;
    int64_t t = bench_now_ns(), k;
    int j, expected = -1;

    (void)l;
    if (status != LEASH_OK) {
        ct->state = C_IDLE;
        if (!(status == LEASH_ECANCELED && atomic_load(&sh->stop)))
            note_error(sh, "acquire", status);
        return;
    }
    ct->state = C_HELD;
    if (atomic_load(&sh->stop))
        return; /* the finish frees the client, which releases */
    if (!atomic_compare_exchange_strong(&sh->owner, &expected, ct->id))
        atomic_fetch_add(&sh->overlaps, 1);
    k = atomic_fetch_add(&sh->holds, 1);
    ct->hold_index = k;
    if (k < sh->slots) {
        sh->acq_ns[k] = t;
        sh->holder[k] = ct->id;
    }
    if (k == sh->warmup)
        open_window(b, ct->admin);
    if (k == sh->target) {
        int zero = 0;
        if (atomic_compare_exchange_strong(&sh->stop, &zero, 1)) {
            close_window(b, ct->admin, 0);
            stop_everyone(b);
        }
        return;
    }
    /* The contender that released the previous hold may queue again now. */
    for (j = 0; j < b->n; j++)
        if (j != ct->id && atomic_exchange(&sh->pending[j], 0))
            kick(b, j);
    ev_now_update(ct->loop);
    ev_timer_set(&ct->hold, (double)b->hold_ms / 1000., 0.);
    ev_timer_start(ct->loop, &ct->hold);
}

static void on_released(leash_lock *l, int status, void *arg) {
    contender *ct = arg;
    bench *b = ct->b;
    shared *sh = b->sh;
    int64_t t = bench_now_ns();

    (void)l;
    ct->state = C_IDLE;
    if (status != LEASH_OK) {
        if (!(status == LEASH_ECANCELED && atomic_load(&sh->stop)))
            note_error(sh, "release", status);
    } else if (ct->hold_index < sh->slots) {
        sh->rel_ns[ct->hold_index] = t;
    }
    if (atomic_load(&sh->stop))
        return;
    if (b->barge) {
        contender_acquire(ct);
        return;
    }
    /* Wait for the next holder's kick, unless it already came and went:
     * both sides use seq_cst atomics, so at least one sees the other, and
     * the exchange makes exactly one of them act. */
    atomic_store(&sh->pending[ct->id], 1);
    if (atomic_load(&sh->holds) > ct->hold_index + 1 && atomic_exchange(&sh->pending[ct->id], 0))
        contender_acquire(ct);
}

static void on_hold_over(struct ev_loop *loop, ev_timer *w, int revents) {
    contender *ct = (contender *)((char *)w - offsetof(contender, hold));
    shared *sh = ct->b->sh;
    int rc, me = ct->id;

    (void)loop;
    (void)revents;
    if (atomic_load(&sh->stop))
        return;
    /* Not the owner any more from here: the hold ends locally now, before
     * Redis sees the release. */
    atomic_compare_exchange_strong(&sh->owner, &me, -1);
    if (ct->hold_index < sh->slots)
        sh->ask_ns[ct->hold_index] = bench_now_ns();
    ct->state = C_RELEASING;
    rc = leash_release(ct->lock, on_released, ct);
    if (rc != LEASH_OK) {
        ct->state = C_IDLE;
        note_error(sh, "leash_release", rc);
    }
}

static void contender_acquire(contender *ct) {
    int rc;

    ct->state = C_ACQUIRING;
    rc = leash_acquire(ct->lock, LEASH_WAIT_FOREVER, on_acquired, ct);
    if (rc != LEASH_OK) {
        ct->state = C_IDLE;
        note_error(ct->b->sh, "leash_acquire", rc);
    }
}

/* A contender with a client of its own, or (share != NULL) a handle of
 * another contender's client. */
static int contender_open(bench *b, contender *ct, int id, struct ev_loop *loop, bench_admin *admin,
                          leash_client *share) {
    memset(ct, 0, sizeof *ct);
    ct->id = id;
    ct->b = b;
    ct->loop = loop;
    ct->admin = admin;
    ev_timer_init(&ct->hold, on_hold_over, 0., 0.);
    if (share != NULL) {
        ct->client = share;
        ct->lock = leash_lock_new(share, b->lock_name);
        return ct->lock != NULL ? 0 : -1;
    }
    ct->owns_client = 1;
    if ((ct->client = bench_client_new_at(loop, &b->target)) == NULL)
        return -1;
    ct->lock = leash_lock_new(ct->client, b->lock_name);
    if (ct->lock == NULL) {
        leash_client_free(ct->client);
        return -1;
    }
    return 0;
}

/* Adds the client's counters to the totals and frees it (which releases a
 * hold and cancels a wait); a handle of a shared client is freed alone,
 * before its client (close the contenders in reverse order). */
static void contender_close(contender *ct) {
    shared *sh = ct->b->sh;
    leash_stats st;

    if (ct->finished)
        return;
    ct->finished = 1;
    ev_timer_stop(ct->loop, &ct->hold);
    if (!ct->owns_client) {
        leash_lock_free(ct->lock);
        ct->lock = NULL;
        return;
    }
    leash_client_stats(ct->client, &st);
    atomic_fetch_add(&sh->wakeups, st.wakeups);
    atomic_fetch_add(&sh->commands_sent, st.commands_sent);
    atomic_fetch_add(&sh->renew_commands, st.renew_commands);
    atomic_fetch_add(&sh->noscript_reloads, st.noscript_reloads);
    atomic_fetch_add(&sh->disconnects, st.disconnects);
    leash_client_free(ct->client);
    ct->client = NULL;
}

/* Runs loop until every client of cs[from..to) is connected (for Redlock:
 * to all of its servers), 5 s at most. */
static int wait_connected(struct ev_loop *loop, const bench *b, int from, int to) {
    leash_client *clients[MAX_CONTENDERS];
    int i;

    for (i = from; i < to; i++)
        clients[i - from] = b->cs[i].client;
    return bench_wait_ready(loop, clients, to - from, &b->target, 5000);
}

/* ---- loop mode ---- */

static void on_finish_loop(struct ev_loop *loop, ev_timer *w, int revents) {
    bench *b = (bench *)((char *)w - offsetof(bench, finish_timer));
    int i;

    (void)revents;
    ev_timer_stop(loop, &b->cap_timer);
    for (i = b->n - 1; i >= 0; i--)
        contender_close(&b->cs[i]);
    ev_break(loop, EVBREAK_ALL);
}

static void stop_everyone(bench *b) {
    int j;

    if (b->mode != MODE_PROCS) {
        /* Not from inside a leash callback: on the next loop iteration. */
        ev_timer_set(&b->finish_timer, 0., 0.);
        ev_timer_start(b->loop, &b->finish_timer);
        return;
    }
    for (j = 0; j < b->n; j++)
        kick(b, j);
}

static void on_cap_loop(struct ev_loop *loop, ev_timer *w, int revents) {
    bench *b = (bench *)((char *)w - offsetof(bench, cap_timer));
    int zero = 0;

    (void)loop;
    (void)revents;
    if (atomic_compare_exchange_strong(&b->sh->stop, &zero, 1)) {
        close_window(b, b->cs[0].admin, 1);
        stop_everyone(b);
    }
}

static int run_loop_mode(bench *b, bench_admin *admin) {
    int i, opened = 0, rc = -1;

    b->loop = ev_loop_new(EVFLAG_AUTO);
    if (b->loop == NULL) {
        fprintf(stderr, "handoff: no loop\n");
        goto out;
    }
    for (i = 0; i < b->n; i++, opened++)
        if (contender_open(b, &b->cs[i], i, b->loop, admin,
                           b->mode == MODE_SHARED && i > 0 ? b->cs[0].client : NULL) != 0) {
            fprintf(stderr, "handoff: client %d could not be set up\n", i);
            goto out;
        }
    if (wait_connected(b->loop, b, 0, b->n) != 0) {
        fprintf(stderr, "handoff: clients did not connect in 5 s\n");
        goto out;
    }
    ev_timer_init(&b->finish_timer, on_finish_loop, 0., 0.);
    ev_timer_init(&b->cap_timer, on_cap_loop, b->cap_s, 0.);
    ev_timer_start(b->loop, &b->cap_timer);
    for (i = 0; i < b->n; i++)
        contender_acquire(&b->cs[i]);
    ev_run(b->loop, 0);
    rc = 0;
out:
    for (i = opened - 1; i >= 0; i--)
        contender_close(&b->cs[i]);
    if (b->loop != NULL) {
        ev_run(b->loop, EVRUN_NOWAIT); /* let the closes settle */
        ev_loop_destroy(b->loop);
        b->loop = NULL;
    }
    return rc;
}

/* ---- procs mode ---- */

static void on_kick(struct ev_loop *loop, ev_io *w, int revents) {
    contender *ct = (contender *)((char *)w - offsetof(contender, kick_io));
    bench *b = ct->b;
    char buf[64];

    (void)revents;
    while (read(w->fd, buf, sizeof buf) > 0)
        ;
    if (atomic_load(&b->sh->stop)) {
        ev_io_stop(loop, w);
        contender_close(ct);
        ev_break(loop, EVBREAK_ALL);
        return;
    }
    if (atomic_load(&b->sh->go) && ct->state == C_IDLE)
        contender_acquire(ct);
}

static int child_main(bench *b, int id) {
    contender *ct = &b->cs[id];
    struct ev_loop *loop;
    bench_admin admin;

    loop = ev_loop_new(EVFLAG_AUTO);
    if (loop == NULL || bench_admin_open(&admin, &b->target) != 0 ||
        contender_open(b, ct, id, loop, &admin, NULL) != 0) {
        fprintf(stderr, "handoff: contender %d could not be set up\n", id);
        return 1;
    }
    if (wait_connected(loop, b, id, id + 1) != 0) {
        fprintf(stderr, "handoff: contender %d did not connect in 5 s\n", id);
        return 1;
    }
    ev_io_init(&ct->kick_io, on_kick, b->kick_r[id], EV_READ);
    ev_io_start(loop, &ct->kick_io);
    atomic_fetch_add(&b->sh->ready, 1);
    ev_run(loop, 0);
    contender_close(ct);
    ev_run(loop, EVRUN_NOWAIT);
    ev_loop_destroy(loop);
    bench_admin_close(&admin);
    return 0;
}

static int run_procs_mode(bench *b, bench_admin *admin) {
    pid_t pids[MAX_CONTENDERS];
    int i, started = 0, rc = 0, zero = 0;
    int64_t deadline;
    shared *sh = b->sh;

    for (i = 0; i < b->n; i++) {
        int fds[2];
        if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
            perror("handoff: pipe2");
            b->n = i;
            rc = -1;
            goto close_pipes;
        }
        b->kick_r[i] = fds[0];
        b->kick_w[i] = fds[1];
    }
    for (i = 0; i < b->n; i++) {
        pid_t pid = bench_fork();
        if (pid < 0) {
            perror("handoff: fork");
            break;
        }
        if (pid == 0)
            _exit(child_main(b, i));
        pids[started++] = pid;
    }
    /* Everybody connected, then go. */
    deadline = bench_now_ns() + 10000000000LL;
    while (started == b->n && atomic_load(&sh->ready) < b->n && bench_now_ns() < deadline)
        test_sleep_ms(1);
    if (started == b->n && atomic_load(&sh->ready) == b->n) {
        atomic_store(&sh->go, 1);
        for (i = 0; i < b->n; i++)
            kick(b, i);
        deadline = bench_now_ns() + (int64_t)(b->cap_s * 1e9);
    } else {
        fprintf(stderr, "handoff: contenders did not all start\n");
        rc = -1;
        deadline = bench_now_ns();
    }
    /* The holder of the last hold closes the window; at the cap, this
     * process does. */
    while (!atomic_load(&sh->stop) && bench_now_ns() < deadline &&
           bench_reap_exited(pids, started) > 0)
        test_sleep_ms(2);
    if (bench_now_ns() >= deadline && atomic_compare_exchange_strong(&sh->stop, &zero, 1))
        close_window(b, admin, 1);
    for (i = 0; i < b->n; i++)
        kick(b, i);
    if (bench_reap(pids, started, 5000, "handoff") != 0)
        rc = -1;
close_pipes:
    for (i = 0; i < b->n; i++) {
        close(b->kick_r[i]);
        close(b->kick_w[i]);
    }
    return rc;
}

/* ---- results ---- */

typedef struct result {
    int n;
    int mode;
    bench_target target; /* where it ran */
    bench_bus bus;       /* a cluster's pub/sub messages over the window */
    int ok;              /* the configuration ran */
    int64_t count;       /* handoff samples */
    double p50_us, p99_us, max_us, min_us;
    double p10_us, p90_us;
    double ask_p50_us, ask_p99_us; /* from the leash_release() call instead */
    int64_t acqs;                  /* acquisitions inside the command window */
    int counts_ok;                 /* both snapshots taken */
    bench_script_runs runs;        /* over the window */
    bench_cmdstats cmds;           /* the window's commandstats deltas */
    int64_t releases;
    int64_t self_handoffs, negatives;
    int overlaps, errors;
    int time_capped;
    uint64_t wakeups, commands_sent, renew_commands, noscript_reloads, disconnects;
    int64_t total_holds; /* over the whole run, warm-up included */
    bench_steal steal;
    double seconds;
    char first_error[160];
} result;

/* Nearest rank, in µs. */
static double pct_us(const int64_t *sorted, int64_t n, double p) {
    return (double)bench_pct(sorted, n, p) / 1000.;
}

static void write_samples(const char *dir, const result *res, const int64_t *s, int64_t n) {
    char tag[64], label[96];

    snprintf(tag, sizeof tag, "%d-%s%s", res->n, mode_tag(res->mode),
             res->target.cluster   ? "-cluster"
             : res->target.redlock ? "-redlock"
                                   : "");
    snprintf(label, sizeof label, "%d contenders, %s%s", res->n, mode_name(res->mode),
             res->target.cluster   ? ", Redis Cluster"
             : res->target.redlock ? ", Redlock (5 servers)"
                                   : "");
    bench_write_samples("handoff", dir, tag, label, s, n);
}

static void collect(const bench *b, result *res, const char *samples_dir) {
    const shared *sh = b->sh;
    int64_t w = sh->warmup, last, k, n = 0;
    int64_t *s, *a, na = 0;

    res->overlaps = atomic_load(&sh->overlaps);
    res->errors = atomic_load(&sh->errors);
    snprintf(res->first_error, sizeof res->first_error, "%s", sh->first_error);
    res->time_capped = sh->time_capped;
    res->wakeups = atomic_load(&sh->wakeups);
    res->total_holds = atomic_load(&sh->holds);
    res->commands_sent = atomic_load(&sh->commands_sent);
    res->renew_commands = atomic_load(&sh->renew_commands);
    res->noscript_reloads = atomic_load(&sh->noscript_reloads);
    res->disconnects = atomic_load(&sh->disconnects);

    /* The window: holds W .. last, handoffs W->W+1 .. last-1->last. */
    last = sh->snap_b_hold - 1;
    if (last > sh->slots - 1)
        last = sh->slots - 1;
    if (last <= w)
        return;
    s = malloc(sizeof(*s) * (size_t)(last - w));
    a = malloc(sizeof(*a) * (size_t)(last - w));
    if (s == NULL || a == NULL) {
        free(s);
        free(a);
        return;
    }
    for (k = w; k < last; k++) {
        if (sh->ask_ns[k] != 0 && sh->acq_ns[k + 1] != 0)
            a[na++] = sh->acq_ns[k + 1] - sh->ask_ns[k];
        if (sh->rel_ns[k] == 0 || sh->acq_ns[k + 1] == 0)
            continue;
        s[n] = sh->acq_ns[k + 1] - sh->rel_ns[k];
        if (s[n] < 0)
            res->negatives++;
        if (sh->holder[k + 1] == sh->holder[k])
            res->self_handoffs++;
        n++;
    }
    res->seconds = (double)(sh->acq_ns[last] - sh->acq_ns[w]) / 1e9;
    if (n > 0) {
        qsort(s, (size_t)n, sizeof(*s), bench_cmp_i64);
        res->count = n;
        res->p10_us = pct_us(s, n, 0.10);
        res->p50_us = pct_us(s, n, 0.50);
        res->p90_us = pct_us(s, n, 0.90);
        res->p99_us = pct_us(s, n, 0.99);
        res->max_us = (double)s[n - 1] / 1000.;
        res->min_us = (double)s[0] / 1000.;
        if (samples_dir != NULL)
            write_samples(samples_dir, res, s, n);
    }
    free(s);
    if (na > 0) {
        qsort(a, (size_t)na, sizeof(*a), bench_cmp_i64);
        res->ask_p50_us = pct_us(a, na, 0.50);
        res->ask_p99_us = pct_us(a, na, 0.99);
    }
    free(a);

    if (sh->snap_a_ok && sh->snap_b_ok) {
        res->counts_ok = 1;
        res->acqs = last - w;
        res->releases = last - w; /* releases of holds W .. last-1 */
        bench_cmdstats_delta(&sh->snap_a, &sh->snap_b, &res->cmds);
        bench_script_runs_of(&res->cmds, &res->runs);
    }
    if (b->target.cluster)
        bench_bus_delta(&sh->bus_a, &sh->bus_b, &res->bus);
}

static int run_config(int n, int mode, int64_t handoffs, double cap_s, int hold_ms, int barge,
                      const bench_target *t, bench_admin *admin, const bench_cpus *cpus,
                      result *res, const char *samples_dir) {
    bench *b = calloc(1, sizeof(*b));
    int64_t warmup = 2 * n < 10 ? 10 : 2 * n;
    int rc;

    memset(res, 0, sizeof *res);
    res->n = n;
    res->mode = mode;
    res->target = *t;
    if (b == NULL)
        return -1;
    b->n = n;
    b->mode = mode;
    b->barge = barge;
    b->hold_ms = hold_ms;
    b->target = *t;
    b->cap_s = cap_s;
    /* The same name, so the same shard, for both kinds of pub/sub. */
    snprintf(b->lock_name, sizeof b->lock_name, "bench:handoff:%d:%s", n, mode_tag(mode));
    b->sh = shared_new(warmup + handoffs + 2 * n + 16);
    if (b->sh == NULL) {
        free(b);
        return -1;
    }
    b->sh->warmup = warmup;
    b->sh->target = warmup + handoffs;

    /* A clean server for each configuration. */
    bench_admin_flushall(admin);

    bench_steal_begin(cpus, &res->steal);
    rc = mode == MODE_PROCS ? run_procs_mode(b, admin) : run_loop_mode(b, admin);
    bench_steal_end(cpus, &res->steal);
    if (rc == 0) {
        res->ok = 1;
        collect(b, res, samples_dir);
    }
    shared_free(b->sh);
    free(b);
    return rc;
}

/* ---- output ---- */

static double per_acq(long long v, int64_t acqs) {
    return acqs > 0 ? (double)v / (double)acqs : 0.;
}

static void print_table(const result *res, int count) {
    int i;

    printf("| contenders | mode | handoffs | p50 µs | p99 µs | max µs | lock cmds/acq "
           "| acquire attempts/acq | sub+unsub/acq |\n");
    printf("|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (i = 0; i < count; i++) {
        const result *x = &res[i];
        const bench_script_runs *d = &x->runs;
        printf("| %d | %s | ", x->n, mode_name(x->mode));
        if (!x->ok || x->count == 0) {
            printf("failed | | | | | | |\n");
            continue;
        }
        printf("%lld%s | %.0f | %.0f | %.0f | ", (long long)x->count, x->time_capped ? "*" : "",
               x->p50_us, x->p99_us, x->max_us);
        if (!x->counts_ok) {
            printf("n/a | n/a | n/a |\n");
            continue;
        }
        printf("%.2f | %.2f | %.2f (%.2f+%.2f) |\n", per_acq(d->scripts, x->acqs),
               per_acq(d->acquires, x->acqs), per_acq(d->subscribes + d->unsubscribes, x->acqs),
               per_acq(d->subscribes, x->acqs), per_acq(d->unsubscribes, x->acqs));
    }
}

/* "2, one loop", "2, one loop, cluster, sharded pub/sub" or "2, one loop,
 * Redlock, 5 servers". */
static const char *config_name(const result *x, char *buf, size_t cap) {
    int other = x->target.cluster || x->target.redlock;
    snprintf(buf, cap, "%d, %s%s%s", x->n, mode_name(x->mode), other ? ", " : "",
             other ? bench_target_name(&x->target) : "");
    return buf;
}

static void print_config_notes(const result *res, int count, const bench_rb *rtt);

static void print_notes(const result *res, int count, const bench_rb *rtt, int hold_ms, int barge) {
    printf("\nEach contender: acquire (LEASH_WAIT_FOREVER), hold %d ms, release; %s.\n", hold_ms,
           barge ? "it asks again right after its release (--barge)"
                 : "after its release it asks again once the next holder has the lock");
    printf("Handoff = release completion callback -> next holder's acquire callback. "
           "Commands are INFO commandstats deltas over the measured window, per acquisition; "
           "acquire attempts = acquire-script runs (the TIME each one runs inside Lua); "
           "sub+unsub = SUBSCRIBE + UNSUBSCRIBE. The same handoff with bare hiredis, the "
           "floor, is leash-bench-floor (its p50 in round trips compares with the one "
           "below); one uncontended cycle is leash-bench-idle.\n");
    if (rtt->ok)
        printf("Reference round trip (redis-benchmark -c 1 -P 1 PING, same server and CPUs): "
               "p50 %.0f µs, p99 %.0f µs.\n",
               rtt->p50_us, rtt->p99_us);
    else
        printf("Reference round trip: redis-benchmark not run or not available.\n");
    print_config_notes(res, count, rtt);
}

static void print_config_notes(const result *res, int count, const bench_rb *rtt) {
    int i, any_time_cap = 0;
    char name[96];

    printf("\nPer configuration:\n");
    for (i = 0; i < count; i++) {
        const result *x = &res[i];
        const bench_script_runs *d = &x->runs;
        if (!x->ok) {
            printf("- %s: did not run\n", config_name(x, name, sizeof name));
            continue;
        }
        any_time_cap |= x->time_capped;
        printf("- %s: %.1f s", config_name(x, name, sizeof name), x->seconds);
        if (rtt->ok && rtt->p50_us > 0 && x->count > 0)
            printf("; p50 = %.1f round trips", x->p50_us / rtt->p50_us);
        if (x->count > 0)
            printf("; min %.0f µs; from the leash_release() call instead of its callback: "
                   "p50 %.0f µs, p99 %.0f µs",
                   x->min_us, x->ask_p50_us, x->ask_p99_us);
        if (x->counts_ok) {
            double by_sub = per_acq(d->scripts - x->releases, x->acqs);
            double by_lua = per_acq(d->acquires, x->acqs);
            printf("; per acquisition: busy answers %.2f, grants %.2f, releases %.2f, "
                   "publishes %.2f, Redis calls %.2f",
                   per_acq(d->busy, x->acqs), per_acq(d->grants, x->acqs),
                   per_acq(x->releases, x->acqs), per_acq(d->publishes, x->acqs),
                   per_acq(d->total, x->acqs));
            /* Redlock runs every release (and the raise) on several servers. */
            if (!x->target.redlock && (by_sub - by_lua > 0.05 || by_lua - by_sub > 0.05))
                printf("; NOTE acquire attempts by subtraction (lock cmds - releases issued) "
                       "= %.2f, not %.2f",
                       by_sub, by_lua);
        }
        if (x->counts_ok && d->scripts > 0)
            printf("; server time per EVALSHA %.1f µs",
                   (double)d->script_usec / (double)d->scripts);
        if (x->counts_ok && (x->target.cluster || x->target.redlock))
            bench_print_calls(&x->cmds, (double)x->acqs, "; Redis calls per acquisition: ");
        printf("; leash wakeups per hold %.2f", per_acq((long long)x->wakeups, x->total_holds));
        if (x->self_handoffs)
            printf("; %lld handoffs back to the releaser", (long long)x->self_handoffs);
        if (x->negatives)
            printf("; %lld negative samples (grant seen before the release answer)",
                   (long long)x->negatives);
        bench_print_steal(&x->steal);
        if (x->renew_commands)
            printf("; %llu renew commands", (unsigned long long)x->renew_commands);
        if (x->noscript_reloads)
            printf("; %llu NOSCRIPT reloads", (unsigned long long)x->noscript_reloads);
        if (x->disconnects)
            printf("; %llu disconnects", (unsigned long long)x->disconnects);
        if (x->overlaps)
            printf("; **%d OVERLAPPING HOLDS**", x->overlaps);
        if (x->errors)
            printf("; **%d errors** (first: %s)", x->errors, x->first_error);
        printf("\n");
    }
    if (any_time_cap)
        printf("\n\\* stopped by the time cap before the handoff count was reached.\n");
}

/* Bus messages per release, "1.00 / 1.00" (sent / received). */
static void print_bus(long long sent, long long received, int64_t releases) {
    printf("%.2f / %.2f", per_acq(sent, releases), per_acq(received, releases));
}

/* The cluster's configurations, each beside the one-server configuration
 * of the same contenders and mode (if it ran). */
static void print_cluster(const result *single, int nsingle, const result *res, int count) {
    int i, j;

    printf("\n| Redis | contenders | mode | pub/sub | handoffs | p50 µs | p99 µs | max µs "
           "| p50 x one server | publishes/release | PUBLISH bus messages/release, sent / "
           "received | SPUBLISH (publishshard) bus messages/release, sent / received |\n");
    printf("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (i = 0; i < count; i++) {
        const result *x = &res[i], *one = NULL;
        const bench_script_runs *d = &x->runs;

        for (j = 0; j < nsingle; j++)
            if (single[j].n == x->n && single[j].mode == x->mode && single[j].count > 0)
                one = &single[j];
        if (one != NULL && (i == 0 || res[i - 1].n != x->n || res[i - 1].mode != x->mode))
            printf("| one server | %d | %s | classic | %lld%s | %.0f | %.0f | %.0f | 1.00 | %.2f "
                   "| | |\n",
                   one->n, mode_name(one->mode), (long long)one->count, one->time_capped ? "*" : "",
                   one->p50_us, one->p99_us, one->max_us,
                   one->counts_ok ? per_acq(one->runs.publishes, one->releases) : 0.);
        printf("| cluster | %d | %s | %s | ", x->n, mode_name(x->mode),
               x->target.pubsub == LEASH_PUBSUB_CLASSIC ? "classic" : "sharded (default)");
        if (!x->ok || x->count == 0) {
            printf("failed | | | | | | | |\n");
            continue;
        }
        printf("%lld%s | **%.0f** | **%.0f** | %.0f | ", (long long)x->count,
               x->time_capped ? "*" : "", x->p50_us, x->p99_us, x->max_us);
        if (one != NULL && one->p50_us > 0.)
            printf("%.2f", x->p50_us / one->p50_us);
        else
            printf("n/a");
        if (!x->counts_ok || !x->bus.ok) {
            printf(" | n/a | n/a | n/a |\n");
            continue;
        }
        printf(" | %.2f | ", per_acq(d->publishes, x->releases));
        print_bus(x->bus.publish_sent, x->bus.publish_received, x->releases);
        printf(" | ");
        print_bus(x->bus.shard_sent, x->bus.shard_received, x->releases);
        printf(" |\n");
    }
}

static void print_cluster_notes(const result *res, int count, const bench_rb *rtt,
                                const bench_target *t, int intact) {
    printf("\nRedis Cluster: 3 masters with a replica each (tests/support/redis_cluster.c, "
           "cluster-node-timeout 5 s), all six redis-servers on the server's CPU; each "
           "contender's client has the masters as seeds (LEASH_TOPOLOGY_CLUSTER). The lock "
           "lives on one shard (a master and its replica), whose master runs every script. "
           "Pub/sub: sharded is what a cluster client uses by default (LEASH_PUBSUB_AUTO: "
           "SSUBSCRIBE at the lock's master, SPUBLISH in the release script), classic is "
           "LEASH_PUBSUB_CLASSIC (SUBSCRIBE, PUBLISH). Bus messages: CLUSTER INFO "
           "cluster_stats_messages_publish_sent/_received and "
           "cluster_stats_messages_publishshard_sent/_received summed over all %d nodes, "
           "between the same two snapshots as the commands, per release in the window (every "
           "release is contended: the other contender waits, so each publishes once). Target: "
           "a sharded message costs at most one bus message per replica of the owning shard "
           "(here 1); a classic one goes to every other node (here %d).%s\n",
           t->masters + t->replicas, t->masters + t->replicas - 1,
           intact ? "" : " **A node changed its role during the runs (a failover).**");
    if (rtt->ok)
        printf("Reference round trip on a master of the cluster (redis-benchmark -c 1 -P 1 "
               "PING, same CPUs): p50 %.0f µs, p99 %.0f µs.\n",
               rtt->p50_us, rtt->p99_us);
    print_config_notes(res, count, rtt);
}

/* Redlock's configurations, each beside the one-server configuration of
 * the same contenders and mode (if it ran). */
static void print_redlock(const result *single, int nsingle, const result *res, int count) {
    int i, j;

    printf("\n| Redis | contenders | mode | handoffs | p50 µs (target: under 1000) | p99 µs "
           "| max µs | p50 x one server | p99 x one server | Redis calls/acquisition (all "
           "servers) | acquire-script runs/acquisition (all servers) |\n");
    printf("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (i = 0; i < count; i++) {
        const result *x = &res[i], *one = NULL;

        for (j = 0; j < nsingle; j++)
            if (single[j].n == x->n && single[j].mode == x->mode && single[j].count > 0)
                one = &single[j];
        if (one != NULL)
            printf("| one server | %d | %s | %lld%s | %.0f | %.0f | %.0f | 1.00 | 1.00 | %s%.2f "
                   "| %s%.2f |\n",
                   one->n, mode_name(one->mode), (long long)one->count, one->time_capped ? "*" : "",
                   one->p50_us, one->p99_us, one->max_us, one->counts_ok ? "" : "n/a ",
                   one->counts_ok ? per_acq(one->runs.total, one->acqs) : 0.,
                   one->counts_ok ? "" : "n/a ",
                   one->counts_ok ? per_acq(one->runs.acquires, one->acqs) : 0.);
        printf("| Redlock, 5 servers | %d | %s | ", x->n, mode_name(x->mode));
        if (!x->ok || x->count == 0) {
            printf("failed | | | | | | | |\n");
            continue;
        }
        printf("%lld%s | **%.0f** | **%.0f** | %.0f | ", (long long)x->count,
               x->time_capped ? "*" : "", x->p50_us, x->p99_us, x->max_us);
        if (one != NULL && one->p50_us > 0. && one->p99_us > 0.)
            printf("%.2f | %.2f", x->p50_us / one->p50_us, x->p99_us / one->p99_us);
        else
            printf("n/a | n/a");
        if (x->counts_ok)
            printf(" | %.2f | %.2f |\n", per_acq(x->runs.total, x->acqs),
                   per_acq(x->runs.acquires, x->acqs));
        else
            printf(" | n/a | n/a |\n");
    }
}

static void print_redlock_notes(const result *res, int count, const bench_rb *rtt, int intact) {
    int i, any = 0;

    printf("\nRedlock: 5 independent redis-servers (tests/support/redis_server.c, as the "
           "Redlock tests start them), all on the server's CPU, so that the five have the one "
           "core the single server has; each contender's client has the five as its nodes "
           "(LEASH_TOPOLOGY_REDLOCK) and subscribes on each of them. An acquisition: the "
           "acquire script on all five (busy ones too), and a fence raise only on granting "
           "servers whose fences differ; a release: the release script on all five, each of "
           "which publishes "
           "(the waiter passes one message on). Redis calls: INFO commandstats summed over "
           "the five, per acquisition in the window. Target: p50 under 1 ms with 2 "
           "contenders.%s\n",
           intact ? "" : " **A Redlock server stopped answering during the runs.**");
    for (i = 0; i < count; i++)
        if (res[i].ok && res[i].count > 0)
            printf("%s%d, %s: p10 %.0f µs, p90 %.0f µs",
                   any++ ? "; " : "Spread of the handoffs: ", res[i].n, mode_name(res[i].mode),
                   res[i].p10_us, res[i].p90_us);
    if (any)
        printf(".\n");
    if (rtt->ok)
        printf("Reference round trip on one of the five (redis-benchmark -c 1 -P 1 PING, same "
               "CPUs): p50 %.0f µs, p99 %.0f µs.\n",
               rtt->p50_us, rtt->p99_us);
    print_config_notes(res, count, rtt);
}

/* ---- main ---- */

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [options]\n"
            "  -c, --contenders LIST  contender counts, comma-separated (default 2,16)\n"
            "  -m, --mode MODE        loop, procs, both (default), client (all contenders\n"
            "                         as handles of one client), or all three\n"
            "  -H, --handoffs N       measured handoffs per configuration\n"
            "                         (default 2000 with 2 contenders, 1000 otherwise)\n"
            "  -T, --time-cap S       seconds per configuration at most (default 20)\n"
            "      --hold MS          hold time (default 5)\n"
            "      --barge            ask again right after each release\n"
            "      --samples DIR      write the sorted samples of each configuration there\n"
            "      --cluster          also on a Redis Cluster (3 masters + 3 replicas), with\n"
            "                         sharded and with classic pub/sub\n"
            "      --cluster-contenders LIST  contender counts there (default 2)\n"
            "      --cluster-handoffs N       measured handoffs there (default 1000)\n"
            "      --redlock          also on Redlock's 5 servers\n"
            "      --redlock-contenders LIST  contender counts there (default 2)\n"
            "      --redlock-handoffs N       measured handoffs there (default 500; the\n"
            "                                 time cap there is at least 40 s)\n"
            "      --no-pin           do not pin redis-server and the benchmark to CPUs\n"
            "      --no-reference     do not run redis-benchmark for the reference\n",
            argv0);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {{"contenders", required_argument, NULL, 'c'},
                                             {"mode", required_argument, NULL, 'm'},
                                             {"handoffs", required_argument, NULL, 'H'},
                                             {"time-cap", required_argument, NULL, 'T'},
                                             {"hold", required_argument, NULL, 'h'},
                                             {"barge", no_argument, NULL, 'b'},
                                             {"samples", required_argument, NULL, 's'},
                                             {"no-pin", no_argument, NULL, 'p'},
                                             {"no-reference", no_argument, NULL, 'r'},
                                             {"cluster", no_argument, NULL, 'C'},
                                             {"cluster-contenders", required_argument, NULL, 'N'},
                                             {"cluster-handoffs", required_argument, NULL, 'K'},
                                             {"redlock", no_argument, NULL, 'L'},
                                             {"redlock-contenders", required_argument, NULL, 'M'},
                                             {"redlock-handoffs", required_argument, NULL, 'J'},
                                             {"help", no_argument, NULL, '?'},
                                             {NULL, 0, NULL, 0}};
    int ns[MAX_CONFIGS], nn = 0, modes = 3, hold_ms = 5, barge = 0, pin = 1, want_ref = 1;
    int cns[MAX_CONFIGS], ncn = 0, cluster = 0, intact = 1, p;
    int lns[MAX_CONFIGS], nln = 0, redlock = 0, rl_intact = 1;
    int64_t handoffs = 0, cluster_handoffs = 1000, redlock_handoffs = 500;
    double cap_s = 20.;
    const char *samples_dir = NULL;
    result results[MAX_CONFIGS * 2], cresults[MAX_CONFIGS * 2 * 2], lresults[MAX_CONFIGS * 3];
    int nres = 0, ncres = 0, nlres = 0, i, m, opt, failed = 0;
    bench_cpus cpus;
    bench_target single, ct, rt;
    bench_admin admin;
    bench_rb rtt, crtt, lrtt;
    test_redis r;

    while ((opt = getopt_long(argc, argv, "c:m:H:T:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            if ((nn = bench_parse_list(optarg, ns, MAX_CONFIGS, 1, MAX_CONTENDERS)) < 0)
                return 2;
            break;
        case 'm':
            if (strcmp(optarg, "loop") == 0)
                modes = 1;
            else if (strcmp(optarg, "procs") == 0)
                modes = 2;
            else if (strcmp(optarg, "both") == 0)
                modes = 3;
            else if (strcmp(optarg, "client") == 0)
                modes = 4;
            else if (strcmp(optarg, "all") == 0)
                modes = 7;
            else {
                usage(argv[0]);
                return 2;
            }
            break;
        case 'H':
            handoffs = strtoll(optarg, NULL, 10);
            if (handoffs < 1 || handoffs > 10000000) {
                usage(argv[0]);
                return 2;
            }
            break;
        case 'T':
            cap_s = strtod(optarg, NULL);
            if (!(cap_s > 0.)) {
                usage(argv[0]);
                return 2;
            }
            break;
        case 'h':
            hold_ms = atoi(optarg);
            if (hold_ms < 0) {
                usage(argv[0]);
                return 2;
            }
            break;
        case 'b':
            barge = 1;
            break;
        case 's':
            samples_dir = optarg;
            break;
        case 'p':
            pin = 0;
            break;
        case 'r':
            want_ref = 0;
            break;
        case 'C':
            cluster = 1;
            break;
        case 'N':
            if ((ncn = bench_parse_list(optarg, cns, MAX_CONFIGS, 1, MAX_CONTENDERS)) < 0)
                return 2;
            break;
        case 'K':
            cluster_handoffs = strtoll(optarg, NULL, 10);
            if (cluster_handoffs < 1 || cluster_handoffs > 10000000) {
                usage(argv[0]);
                return 2;
            }
            break;
        case 'L':
            redlock = 1;
            break;
        case 'M':
            if ((nln = bench_parse_list(optarg, lns, MAX_CONFIGS, 1, MAX_CONTENDERS)) < 0)
                return 2;
            break;
        case 'J':
            redlock_handoffs = strtoll(optarg, NULL, 10);
            if (redlock_handoffs < 1 || redlock_handoffs > 10000000) {
                usage(argv[0]);
                return 2;
            }
            break;
        default:
            usage(argv[0]);
            return 2;
        }
    }
    if (nn == 0) {
        ns[nn++] = 2;
        ns[nn++] = 16;
    }
    if (ncn == 0)
        cns[ncn++] = 2;
    if (nln == 0)
        lns[nln++] = 2;
    signal(SIGPIPE, SIG_IGN);

    if (bench_start_server(&r, NULL, pin, &cpus) != 0) {
        fprintf(stderr, "handoff: could not start redis-server\n");
        return 1;
    }
    bench_target_single(&single, r.port);
    if (bench_admin_open(&admin, &single) != 0) {
        fprintf(stderr, "handoff: no admin connection\n");
        test_redis_stop(&r);
        return 1;
    }
    memset(&rtt, 0, sizeof rtt);
    memset(&crtt, 0, sizeof crtt);
    memset(&lrtt, 0, sizeof lrtt);
    memset(&ct, 0, sizeof ct);
    memset(&rt, 0, sizeof rt);
    if (want_ref)
        bench_ping_rtt(r.port, &rtt);

    for (i = 0; i < nn; i++) {
        for (m = 0; m < 3; m++) {
            int64_t h = handoffs > 0 ? handoffs : ns[i] <= 2 ? 2000 : 1000;
            if (!(modes & (1 << m)))
                continue;
            fprintf(stderr, "handoff: %d contenders, %s, %lld handoffs...\n", ns[i], mode_name(m),
                    (long long)h);
            if (run_config(ns[i], m, h, cap_s, hold_ms, barge, &single, &admin, &cpus,
                           &results[nres], samples_dir) != 0)
                failed = 1;
            nres++;
        }
    }
    bench_admin_close(&admin);
    if (cluster) {
        test_cluster c;

        fprintf(stderr, "handoff: starting a Redis Cluster...\n");
        if (bench_start_cluster(&c, &cpus, &ct) != 0 || bench_admin_open(&admin, &ct) != 0) {
            fprintf(stderr, "handoff: no Redis Cluster\n");
            test_cluster_stop(&c);
            failed = 1;
        } else {
            if (want_ref)
                bench_ping_rtt(ct.port[0], &crtt);
            for (i = 0; i < ncn; i++)
                for (m = 0; m < 3; m++)
                    for (p = 0; p < 2 && (modes & (1 << m)); p++) {
                        ct.pubsub = p == 0 ? LEASH_PUBSUB_AUTO : LEASH_PUBSUB_CLASSIC;
                        fprintf(stderr, "handoff: %d contenders, %s, %s, %lld handoffs...\n",
                                cns[i], mode_name(m), bench_target_name(&ct),
                                (long long)cluster_handoffs);
                        /* The plot shows the cluster's default, sharded pub/sub. */
                        if (run_config(cns[i], m, cluster_handoffs, cap_s, hold_ms, barge, &ct,
                                       &admin, &cpus, &cresults[ncres],
                                       p == 0 ? samples_dir : NULL) != 0)
                            failed = 1;
                        ncres++;
                    }
            intact = bench_cluster_intact(&c, &ct);
            if (!intact)
                failed = 1;
            bench_admin_close(&admin);
            test_cluster_stop(&c);
        }
    }
    if (redlock) {
        bench_redlock rl;

        fprintf(stderr, "handoff: starting the Redlock servers...\n");
        if (bench_start_redlock(&rl, &cpus, &rt) != 0 || bench_admin_open(&admin, &rt) != 0) {
            fprintf(stderr, "handoff: no Redlock servers\n");
            bench_stop_redlock(&rl);
            failed = 1;
        } else {
            if (want_ref)
                bench_ping_rtt(rt.port[0], &lrtt);
            for (i = 0; i < nln; i++)
                for (m = 0; m < 3; m++) {
                    if (!(modes & (1 << m)))
                        continue;
                    fprintf(stderr, "handoff: %d contenders, %s, %s, %lld handoffs...\n", lns[i],
                            mode_name(m), bench_target_name(&rt), (long long)redlock_handoffs);
                    /* A woken Redlock waiter pauses at random before it tries
                     * (route/quorum.c): its handoffs take longer. */
                    if (run_config(lns[i], m, redlock_handoffs, cap_s > 40. ? cap_s : 40., hold_ms,
                                   barge, &rt, &admin, &cpus, &lresults[nlres], samples_dir) != 0)
                        failed = 1;
                    nlres++;
                }
            rl_intact = bench_redlock_intact(&rl);
            if (!rl_intact)
                failed = 1;
            bench_admin_close(&admin);
            bench_stop_redlock(&rl);
        }
    }
    test_redis_stop(&r);

    printf("### Lock handoff (leash-bench-handoff)\n\n");
    print_table(results, nres);
    print_notes(results, nres, &rtt, hold_ms, barge);
    if (cluster) {
        printf("\n#### On a Redis Cluster\n");
        print_cluster(results, nres, cresults, ncres);
        print_cluster_notes(cresults, ncres, &crtt, &ct, intact);
    }
    if (redlock) {
        printf("\n#### On Redlock (5 servers)\n");
        print_redlock(results, nres, lresults, nlres);
        print_redlock_notes(lresults, nlres, &lrtt, rl_intact);
    }
    printf("\n");
    bench_print_cpus(&cpus);
    return failed ? 1 : 0;
}
