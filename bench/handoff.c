/*
 * leash-bench-handoff: how fast the lock moves from one holder to the next.
 *
 * N contenders (default 2 and 16) share ONE lock name. Each is a leash
 * client of its own (but see -m client) and loops: acquire (LEASH_WAIT_FOREVER), hold for
 * --hold ms (an ev_timer), release. Modes:
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
 * which separates the scripts: the acquire script runs exactly one HGET,
 * the release script none (HEXISTS instead), so HGET counts acquire-script
 * runs. The figure is checked against "lock script calls minus the releases
 * this program issued", and a note says so when they differ.
 *
 * The redis-server is started by tests/support/redis_server.c (no
 * persistence) through bench_start_server() (common.h): pinned to the first
 * allowed CPU, the benchmark to the second; it is stopped by its pid.
 * References, on the same server and CPUs: one round trip with
 * redis-benchmark -c 1 (PING) when it is installed; an uncontended leash
 * acquire; and the floor, the same handoff done with bare hiredis (a script
 * that deletes and publishes, a subscriber that answers with a script that
 * takes the key), rounds a hold time apart.
 *
 * Output: one markdown table on stdout, then notes. Exit 0 when every
 * configuration ran (even if a figure is bad), 1 on a set-up failure.
 */
#define _GNU_SOURCE /* pipe2, getopt_long */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>
#include <hiredis/hiredis.h>
#include <leash/adapters/libev.h>
#include <leash/leash.h>

#include "common.h"
#include "redis_server.h"

#define MAX_CONTENDERS 64
#define MAX_CONFIGS 16

/* ---- INFO commandstats ---- */

enum {
    ST_EVALSHA,
    ST_EVAL,
    ST_SUBSCRIBE,
    ST_UNSUBSCRIBE,
    ST_HGET,    /* once per acquire-script run */
    ST_PTTL,    /* once per busy answer of the acquire script */
    ST_INCR,    /* once per new hold granted */
    ST_HEXISTS, /* release script (and renew script) */
    ST_PUBLISH, /* once per release that deleted the key */
    ST_COUNT
};

static const char *const stat_names[ST_COUNT] = {
    "evalsha", "eval", "subscribe", "unsubscribe", "hget", "pttl", "incr", "hexists", "publish"};

typedef struct cmdstats {
    long long calls[ST_COUNT];
    long long evalsha_usec; /* server time spent in EVALSHA */
} cmdstats;

/* "cmdstat_<name>:calls=N,..." for each counter; 0 when absent. */
static int parse_cmdstats(const char *info, cmdstats *out) {
    char needle[64];
    int i;

    for (i = 0; i < ST_COUNT; i++) {
        const char *p;
        int n = snprintf(needle, sizeof needle, "cmdstat_%s:calls=", stat_names[i]);
        p = strstr(info, needle);
        out->calls[i] = p ? strtoll(p + n, NULL, 10) : 0;
        if (i == ST_EVALSHA) {
            const char *u = p ? strstr(p, ",usec=") : NULL;
            out->evalsha_usec = u ? strtoll(u + 6, NULL, 10) : 0;
        }
    }
    return 0;
}

static int read_cmdstats(redisContext *c, cmdstats *out) {
    redisReply *r;
    int rc = -1;

    if (c == NULL)
        return -1;
    r = redisCommand(c, "INFO commandstats");
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        rc = parse_cmdstats(r->str, out);
    if (r != NULL)
        freeReplyObject(r);
    return rc;
}

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

    int64_t warmup;      /* W: the window opens at hold W */
    int64_t target;      /* W + H: the window closes at this hold */
    int64_t slots;       /* size of the arrays below */
    int snap_a_ok;       /* set by the holder of hold W */
    int snap_b_ok;       /* set by the stopper */
    int64_t snap_b_hold; /* holds started when snapshot B was taken */
    int time_capped;     /* the cap closed the window, not the count */
    cmdstats snap_a, snap_b;
    char first_error[160];

    int64_t *acq_ns; /* [k]: acquire callback of hold k */
    int64_t *rel_ns; /* [k]: release completion callback of hold k */
    int64_t *ask_ns; /* [k]: leash_release() call of hold k */
    int *holder;     /* [k]: contender id of hold k */
} shared;

static shared *shared_new(int64_t slots) {
    size_t head = (sizeof(shared) + 63) & ~(size_t)63;
    size_t size = head + (size_t)slots * (3 * sizeof(int64_t) + sizeof(int));
    char *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    shared *sh;
    int i;

    if (mem == MAP_FAILED)
        return NULL;
    sh = (shared *)mem; /* mmap gives zeroed pages */
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
    size_t head = (sizeof(shared) + 63) & ~(size_t)63;
    munmap(sh, head + (size_t)sh->slots * (3 * sizeof(int64_t) + sizeof(int)));
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
    redisContext *admin; /* blocking connection for INFO snapshots */
    int owns_client;     /* 0: the handle of a client that cs[0] owns */
    int finished;
} contender;

struct bench {
    int n;
    int mode;
    int barge;
    int hold_ms;
    int port;
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

/* The INFO snapshot that closes the window; only the stopper takes it. */
static void close_window(bench *b, redisContext *admin, int capped) {
    shared *sh = b->sh;

    sh->snap_b_hold = atomic_load(&sh->holds);
    sh->snap_b_ok = read_cmdstats(admin, &sh->snap_b) == 0;
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
        sh->snap_a_ok = read_cmdstats(ct->admin, &sh->snap_a) == 0;
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
static int contender_open(bench *b, contender *ct, int id, struct ev_loop *loop,
                          redisContext *admin, leash_client *share) {
    leash_options o;

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
    leash_options_init(&o);
    o.host = "127.0.0.1";
    o.port = b->port;
    o.log_cb = bench_log_stderr;
    o.log_level = LEASH_LOG_WARN;
    if (leash_client_new(&ct->client, &o) != LEASH_OK)
        return -1;
    if (leash_libev_attach(loop, ct->client) != LEASH_OK) {
        leash_client_free(ct->client);
        return -1;
    }
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

/* Runs loop until every client of cs[from..to) is connected, 5 s at most. */
static int wait_connected(struct ev_loop *loop, contender *cs, int from, int to) {
    int64_t deadline = bench_now_ns() + 5000000000LL;
    int i, all;

    do {
        ev_run(loop, EVRUN_NOWAIT);
        all = 1;
        for (i = from; i < to; i++)
            all = all && leash_client_connected(cs[i].client);
        if (all)
            return 0;
        bench_sleep_ms(1);
    } while (bench_now_ns() < deadline);
    return -1;
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

static int run_loop_mode(bench *b) {
    redisContext *admin = bench_connect(b->port);
    int i, opened = 0, rc = -1;

    b->loop = ev_loop_new(EVFLAG_AUTO);
    if (admin == NULL || b->loop == NULL) {
        fprintf(stderr, "handoff: no loop or no admin connection\n");
        goto out;
    }
    for (i = 0; i < b->n; i++, opened++)
        if (contender_open(b, &b->cs[i], i, b->loop, admin,
                           b->mode == MODE_SHARED && i > 0 ? b->cs[0].client : NULL) != 0) {
            fprintf(stderr, "handoff: client %d could not be set up\n", i);
            goto out;
        }
    if (wait_connected(b->loop, b->cs, 0, b->n) != 0) {
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
    if (admin != NULL)
        redisFree(admin);
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
    redisContext *admin;

    loop = ev_loop_new(EVFLAG_AUTO);
    admin = bench_connect(b->port);
    if (loop == NULL || admin == NULL || contender_open(b, ct, id, loop, admin, NULL) != 0) {
        fprintf(stderr, "handoff: contender %d could not be set up\n", id);
        return 1;
    }
    if (wait_connected(loop, b->cs, id, id + 1) != 0) {
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
    redisFree(admin);
    return 0;
}

static int run_procs_mode(bench *b, test_redis *r) {
    pid_t pids[MAX_CONTENDERS];
    pid_t parent = getpid();
    int i, started = 0, alive, rc = 0;
    int64_t deadline, hard;
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
    fflush(stdout);
    fflush(stderr);
    for (i = 0; i < b->n; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("handoff: fork");
            break;
        }
        if (pid == 0) {
            /* A contender must not outlive the benchmark. */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(1);
            _exit(child_main(b, i));
        }
        pids[i] = pid;
        started++;
    }
    /* Everybody connected, then go. */
    deadline = bench_now_ns() + 10000000000LL;
    while (started == b->n && atomic_load(&sh->ready) < b->n && bench_now_ns() < deadline)
        bench_sleep_ms(1);
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
    /* Wait for the window to close; at the cap, close it from here. */
    hard = 0;
    for (;;) {
        alive = 0;
        for (i = 0; i < started; i++) {
            if (pids[i] > 0 && waitpid(pids[i], NULL, WNOHANG) == pids[i])
                pids[i] = 0;
            if (pids[i] > 0)
                alive++;
        }
        if (alive == 0)
            break;
        if (hard == 0 && bench_now_ns() >= deadline) {
            int zero = 0;
            if (atomic_compare_exchange_strong(&sh->stop, &zero, 1)) {
                redisReply *reply = test_redis_cmd(r, "INFO commandstats");
                sh->snap_b_hold = atomic_load(&sh->holds);
                sh->snap_b_ok = reply && reply->type == REDIS_REPLY_STRING &&
                                parse_cmdstats(reply->str, &sh->snap_b) == 0;
                sh->time_capped = 1;
                if (reply)
                    freeReplyObject(reply);
            }
            for (i = 0; i < b->n; i++)
                kick(b, i);
            hard = bench_now_ns() + 5000000000LL;
        }
        if (hard == 0 && atomic_load(&sh->stop))
            hard = bench_now_ns() + 5000000000LL;
        if (hard != 0 && bench_now_ns() >= hard) {
            fprintf(stderr, "handoff: %d contender(s) did not stop; killing them\n", alive);
            for (i = 0; i < started; i++)
                if (pids[i] > 0) {
                    kill(pids[i], SIGKILL);
                    waitpid(pids[i], NULL, 0);
                    pids[i] = 0;
                }
            rc = -1;
            break;
        }
        bench_sleep_ms(2);
    }
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
    int ok;        /* the configuration ran */
    int64_t count; /* handoff samples */
    double p50_us, p99_us, max_us, min_us;
    double ask_p50_us, ask_p99_us; /* from the leash_release() call instead */
    int64_t acqs;                  /* acquisitions inside the command window */
    int counts_ok;                 /* both snapshots taken */
    cmdstats delta;                /* window deltas */
    int64_t releases;
    int64_t self_handoffs, negatives;
    int overlaps, errors;
    int time_capped;
    uint64_t wakeups, commands_sent, renew_commands, noscript_reloads, disconnects;
    int64_t total_holds;               /* over the whole run, warm-up included */
    int64_t steal_server, steal_bench; /* ms of CPU steal during the run, -1 unknown */
    double evalsha_us;                 /* server time per EVALSHA in the window */
    double seconds;
    char first_error[160];
} result;

/* Nearest rank, in µs. */
static double pct_us(const int64_t *sorted, int64_t n, double p) {
    return (double)bench_pct(sorted, n, p) / 1000.;
}

static void write_samples(const char *dir, const result *res, const int64_t *s, int64_t n) {
    char path[512];
    FILE *f;
    int64_t i;

    snprintf(path, sizeof path, "%s/handoff-%d-%s.txt", dir, res->n, mode_tag(res->mode));
    f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "handoff: cannot write %s\n", path);
        return;
    }
    fprintf(f, "# handoff latency in microseconds, sorted; %d contenders, %s\n", res->n,
            mode_name(res->mode));
    for (i = 0; i < n; i++)
        fprintf(f, "%.1f\n", (double)s[i] / 1000.);
    fclose(f);
}

static void collect(const bench *b, result *res, const char *samples_dir) {
    const shared *sh = b->sh;
    int64_t w = sh->warmup, last, k, n = 0;
    int64_t *s, *a, na = 0;
    int i;

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
        res->p50_us = pct_us(s, n, 0.50);
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
        for (i = 0; i < ST_COUNT; i++)
            res->delta.calls[i] = sh->snap_b.calls[i] - sh->snap_a.calls[i];
        if (res->delta.calls[ST_EVALSHA] > 0)
            res->evalsha_us = (double)(sh->snap_b.evalsha_usec - sh->snap_a.evalsha_usec) /
                              (double)res->delta.calls[ST_EVALSHA];
    }
}

static int run_config(int n, int mode, int64_t handoffs, double cap_s, int hold_ms, int barge,
                      test_redis *r, const int cpus[2], result *res, const char *samples_dir) {
    bench *b = calloc(1, sizeof(*b));
    int64_t warmup = 2 * n < 10 ? 10 : 2 * n;
    redisReply *reply;
    int rc;

    memset(res, 0, sizeof *res);
    res->n = n;
    res->mode = mode;
    if (b == NULL)
        return -1;
    b->n = n;
    b->mode = mode;
    b->barge = barge;
    b->hold_ms = hold_ms;
    b->port = r->port;
    b->cap_s = cap_s;
    snprintf(b->lock_name, sizeof b->lock_name, "bench:handoff:%d:%s", n, mode_tag(mode));
    b->sh = shared_new(warmup + handoffs + 2 * n + 16);
    if (b->sh == NULL) {
        free(b);
        return -1;
    }
    b->sh->warmup = warmup;
    b->sh->target = warmup + handoffs;

    /* A clean server for each configuration. */
    reply = test_redis_cmd(r, "FLUSHALL");
    if (reply)
        freeReplyObject(reply);

    res->steal_server = bench_steal_ms(cpus[0]);
    res->steal_bench = bench_steal_ms(cpus[1]);
    rc = mode == MODE_PROCS ? run_procs_mode(b, r) : run_loop_mode(b);
    if (res->steal_server >= 0)
        res->steal_server = bench_steal_ms(cpus[0]) - res->steal_server;
    if (res->steal_bench >= 0)
        res->steal_bench = bench_steal_ms(cpus[1]) - res->steal_bench;
    if (rc == 0) {
        res->ok = 1;
        collect(b, res, samples_dir);
    }
    shared_free(b->sh);
    free(b);
    return rc;
}

/* ---- reference: one Redis round trip with redis-benchmark ---- */

typedef struct reference {
    int ok;
    double p50_us, p99_us;
    int idle_ok;
    double idle_p50_us, idle_p99_us; /* uncontended leash_acquire -> callback */
    int floor_ok;
    double floor_p50_us, floor_p99_us; /* the same handoff with bare hiredis */
} reference;

/* One PING round trip, p50 and p99, with redis-benchmark. */
static void measure_reference(int port, reference *ref) {
    static const char *const args[] = {"-c",    "1",  "-P",         "1", "-n",
                                       "20000", "-t", "ping_mbulk", NULL};
    bench_rb rb;

    memset(ref, 0, sizeof *ref);
    if (!bench_have_redis_benchmark() || bench_redis_benchmark(port, 60., args, &rb) != 0)
        return;
    ref->ok = 1;
    ref->p50_us = rb.p50_us;
    ref->p99_us = rb.p99_us;
}

/* Uncontended acquires through leash, one at a time: the floor of a
 * handoff is one such acquire (the waiter's attempt after the message). */
#define IDLE_ROUNDS 500

typedef struct idle_run {
    struct ev_loop *loop;
    leash_lock *lock;
    ev_timer gap; /* pause between rounds */
    int gap_ms;
    int64_t started;
    int64_t lat[IDLE_ROUNDS];
    int done, failed;
} idle_run;

static void idle_next(idle_run *ir);

static void idle_released(leash_lock *l, int status, void *arg) {
    idle_run *ir = arg;

    (void)l;
    if (status != LEASH_OK) {
        ir->failed = 1;
        ev_break(ir->loop, EVBREAK_ALL);
        return;
    }
    if (ir->gap_ms == 0) {
        idle_next(ir);
        return;
    }
    ev_now_update(ir->loop);
    ev_timer_set(&ir->gap, (double)ir->gap_ms / 1000., 0.);
    ev_timer_start(ir->loop, &ir->gap);
}

static void idle_gap_over(struct ev_loop *loop, ev_timer *w, int revents) {
    (void)loop;
    (void)revents;
    idle_next((idle_run *)((char *)w - offsetof(idle_run, gap)));
}

static void idle_acquired(leash_lock *l, int status, void *arg) {
    idle_run *ir = arg;

    ir->lat[ir->done] = bench_now_ns() - ir->started;
    if (status != LEASH_OK || leash_release(l, idle_released, ir) != LEASH_OK) {
        ir->failed = 1;
        ev_break(ir->loop, EVBREAK_ALL);
        return;
    }
    ir->done++;
}

static void idle_next(idle_run *ir) {
    if (ir->done == IDLE_ROUNDS) {
        ev_break(ir->loop, EVBREAK_ALL);
        return;
    }
    ir->started = bench_now_ns();
    if (leash_acquire(ir->lock, 0, idle_acquired, ir) != LEASH_OK) {
        ir->failed = 1;
        ev_break(ir->loop, EVBREAK_ALL);
    }
}

static void measure_idle_acquire(int port, int gap_ms, reference *ref) {
    idle_run *ir = calloc(1, sizeof(*ir));
    bench *b = calloc(1, sizeof(*b));
    contender *ct;

    if (ir == NULL || b == NULL)
        goto out;
    b->port = port;
    b->n = 1;
    snprintf(b->lock_name, sizeof b->lock_name, "bench:idle");
    b->sh = shared_new(1);
    ir->loop = ev_loop_new(EVFLAG_AUTO);
    ir->gap_ms = gap_ms;
    ev_timer_init(&ir->gap, idle_gap_over, 0., 0.);
    ct = &b->cs[0];
    if (b->sh == NULL || ir->loop == NULL || contender_open(b, ct, 0, ir->loop, NULL, NULL) != 0)
        goto out;
    if (wait_connected(ir->loop, b->cs, 0, 1) == 0) {
        ir->lock = ct->lock;
        idle_next(ir);
        ev_run(ir->loop, 0);
        if (!ir->failed && ir->done == IDLE_ROUNDS) {
            qsort(ir->lat, IDLE_ROUNDS, sizeof(ir->lat[0]), bench_cmp_i64);
            ref->idle_ok = 1;
            ref->idle_p50_us = pct_us(ir->lat, IDLE_ROUNDS, 0.50);
            ref->idle_p99_us = pct_us(ir->lat, IDLE_ROUNDS, 0.99);
        }
    }
    contender_close(ct);
    ev_run(ir->loop, EVRUN_NOWAIT);
out:
    if (ir != NULL && ir->loop != NULL)
        ev_loop_destroy(ir->loop);
    if (b != NULL && b->sh != NULL)
        shared_free(b->sh);
    free(b);
    free(ir);
}

/*
 * The floor: the same handoff with bare hiredis and no leash, on this loop
 * and these CPUs. A releaser connection runs a script that deletes a key
 * and publishes; a waiter subscribed to the channel answers each message
 * with a script that takes the key. Sample: the releaser's reply -> the
 * waiter's reply. Rounds are the hold time apart, as in the real runs,
 * because a CPU that has idled answers slower than a busy one.
 */
#define FLOOR_ROUNDS 500

static const char floor_release_lua[] = "redis.call('del', KEYS[1])\n"
                                        "redis.call('publish', KEYS[2], 'x')\n"
                                        "return 0\n";
static const char floor_take_lua[] = "if redis.call('exists', KEYS[1]) == 1 then return 0 end\n"
                                     "redis.call('hset', KEYS[1], 'owner', '1')\n"
                                     "redis.call('pexpire', KEYS[1], 30000)\n"
                                     "return 1\n";

typedef struct floor_run {
    struct ev_loop *loop;
    redisAsyncContext *rel, *take, *sub;
    ev_timer pause, guard;
    int hold_ms, done, failed;
    int64_t t_rel;
    int64_t lat[FLOOR_ROUNDS];
} floor_run;

static void floor_pause(floor_run *fr) {
    ev_now_update(fr->loop);
    ev_timer_set(&fr->pause, (double)fr->hold_ms / 1000., 0.);
    ev_timer_start(fr->loop, &fr->pause);
}

static void floor_fail(floor_run *fr) {
    fr->failed = 1;
    ev_break(fr->loop, EVBREAK_ALL);
}

static void floor_on_taken(redisAsyncContext *ac, void *reply, void *arg) {
    floor_run *fr = arg;
    redisReply *r = reply;

    (void)ac;
    if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
        floor_fail(fr);
        return;
    }
    fr->lat[fr->done++] = bench_now_ns() - fr->t_rel;
    if (fr->done == FLOOR_ROUNDS)
        ev_break(fr->loop, EVBREAK_ALL);
    else
        floor_pause(fr);
}

static void floor_on_released(redisAsyncContext *ac, void *reply, void *arg) {
    floor_run *fr = arg;

    (void)ac;
    if (reply == NULL) {
        floor_fail(fr);
        return;
    }
    fr->t_rel = bench_now_ns();
}

static void floor_on_sub(redisAsyncContext *ac, void *reply, void *arg) {
    floor_run *fr = arg;
    redisReply *r = reply;

    (void)ac;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        return;
    if (strcmp(r->element[0]->str, "subscribe") == 0) {
        floor_pause(fr); /* subscribed: the first round starts */
    } else if (strcmp(r->element[0]->str, "message") == 0) {
        if (redisAsyncCommand(fr->take, floor_on_taken, fr, "EVAL %s 1 %s", floor_take_lua,
                              "bench:floor") != REDIS_OK)
            floor_fail(fr);
    }
}

static void floor_on_pause(struct ev_loop *loop, ev_timer *w, int revents) {
    floor_run *fr = (floor_run *)((char *)w - offsetof(floor_run, pause));

    (void)loop;
    (void)revents;
    if (redisAsyncCommand(fr->rel, floor_on_released, fr, "EVAL %s 2 %s %s", floor_release_lua,
                          "bench:floor", "bench:floor:released") != REDIS_OK)
        floor_fail(fr);
}

static void floor_on_guard(struct ev_loop *loop, ev_timer *w, int revents) {
    (void)loop;
    (void)revents;
    floor_fail((floor_run *)((char *)w - offsetof(floor_run, guard)));
}

static redisAsyncContext *floor_connect(floor_run *fr, int port) {
    redisAsyncContext *ac = redisAsyncConnect("127.0.0.1", port);

    if (ac == NULL)
        return NULL;
    if (ac->err || redisLibevAttach(fr->loop, ac) != REDIS_OK) {
        redisAsyncFree(ac);
        return NULL;
    }
    return ac;
}

static void measure_floor(int port, int hold_ms, reference *ref) {
    floor_run *fr = calloc(1, sizeof(*fr));

    if (fr == NULL)
        return;
    fr->hold_ms = hold_ms;
    fr->loop = ev_loop_new(EVFLAG_AUTO);
    if (fr->loop == NULL) {
        free(fr);
        return;
    }
    ev_timer_init(&fr->pause, floor_on_pause, 0., 0.);
    ev_timer_init(&fr->guard, floor_on_guard,
                  10. + (double)FLOOR_ROUNDS * (double)(hold_ms + 5) / 1000., 0.);
    ev_timer_start(fr->loop, &fr->guard);
    fr->rel = floor_connect(fr, port);
    fr->take = floor_connect(fr, port);
    fr->sub = floor_connect(fr, port);
    if (fr->rel && fr->take && fr->sub &&
        redisAsyncCommand(fr->sub, floor_on_sub, fr, "SUBSCRIBE %s", "bench:floor:released") ==
            REDIS_OK)
        ev_run(fr->loop, 0);
    else
        fr->failed = 1;
    ev_timer_stop(fr->loop, &fr->pause);
    ev_timer_stop(fr->loop, &fr->guard);
    if (!fr->failed && fr->done == FLOOR_ROUNDS) {
        qsort(fr->lat, FLOOR_ROUNDS, sizeof(fr->lat[0]), bench_cmp_i64);
        ref->floor_ok = 1;
        ref->floor_p50_us = pct_us(fr->lat, FLOOR_ROUNDS, 0.50);
        ref->floor_p99_us = pct_us(fr->lat, FLOOR_ROUNDS, 0.99);
    }
    /* The callbacks see NULL replies from here on. */
    if (fr->rel)
        redisAsyncFree(fr->rel);
    if (fr->take)
        redisAsyncFree(fr->take);
    if (fr->sub)
        redisAsyncFree(fr->sub);
    ev_loop_destroy(fr->loop);
    free(fr);
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
        const cmdstats *d = &x->delta;
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
        printf("%.2f | %.2f | %.2f (%.2f+%.2f) |\n",
               per_acq(d->calls[ST_EVALSHA] + d->calls[ST_EVAL], x->acqs),
               per_acq(d->calls[ST_HGET], x->acqs),
               per_acq(d->calls[ST_SUBSCRIBE] + d->calls[ST_UNSUBSCRIBE], x->acqs),
               per_acq(d->calls[ST_SUBSCRIBE], x->acqs),
               per_acq(d->calls[ST_UNSUBSCRIBE], x->acqs));
    }
}

static void print_notes(const result *res, int count, const reference *ref, int hold_ms,
                        int barge) {
    int i, any_time_cap = 0;

    printf("\nEach contender: acquire (LEASH_WAIT_FOREVER), hold %d ms, release; %s.\n", hold_ms,
           barge ? "it asks again right after its release (--barge)"
                 : "after its release it asks again once the next holder has the lock");
    printf("Handoff = release completion callback -> next holder's acquire callback. "
           "Commands are INFO commandstats deltas over the measured window, per acquisition; "
           "acquire attempts = acquire-script runs (their HGET inside Lua); "
           "sub+unsub = SUBSCRIBE + UNSUBSCRIBE.\n");
    if (ref->ok)
        printf("Reference round trip (redis-benchmark -c 1 -P 1 PING, same server and CPUs): "
               "p50 %.0f µs, p99 %.0f µs.\n",
               ref->p50_us, ref->p99_us);
    else
        printf("Reference round trip: redis-benchmark not run or not available.\n");
    if (ref->idle_ok)
        printf("Reference uncontended acquire (leash_acquire try-once -> callback, back to back, "
               "one client): p50 %.0f µs, p99 %.0f µs.\n",
               ref->idle_p50_us, ref->idle_p99_us);
    if (ref->floor_ok)
        printf("Floor: the same handoff with bare hiredis (release script that publishes -> "
               "subscriber -> take script), rounds %d ms apart, one loop: p50 %.0f µs, "
               "p99 %.0f µs.\n",
               hold_ms, ref->floor_p50_us, ref->floor_p99_us);
    printf("\nPer configuration:\n");
    for (i = 0; i < count; i++) {
        const result *x = &res[i];
        const cmdstats *d = &x->delta;
        if (!x->ok) {
            printf("- %d, %s: did not run\n", x->n, mode_name(x->mode));
            continue;
        }
        any_time_cap |= x->time_capped;
        printf("- %d, %s: %.1f s", x->n, mode_name(x->mode), x->seconds);
        if (ref->ok && ref->p50_us > 0 && x->count > 0)
            printf("; p50 = %.1f round trips", x->p50_us / ref->p50_us);
        if (ref->floor_ok && ref->floor_p50_us > 0 && x->count > 0)
            printf("; p50 = %.2f x the floor", x->p50_us / ref->floor_p50_us);
        if (x->count > 0)
            printf("; min %.0f µs; from the leash_release() call instead of its callback: "
                   "p50 %.0f µs, p99 %.0f µs",
                   x->min_us, x->ask_p50_us, x->ask_p99_us);
        if (x->counts_ok) {
            double by_sub =
                per_acq(d->calls[ST_EVALSHA] + d->calls[ST_EVAL] - x->releases, x->acqs);
            double by_lua = per_acq(d->calls[ST_HGET], x->acqs);
            printf("; per acquisition: busy answers %.2f, grants %.2f, releases %.2f, "
                   "publishes %.2f",
                   per_acq(d->calls[ST_PTTL], x->acqs), per_acq(d->calls[ST_INCR], x->acqs),
                   per_acq(x->releases, x->acqs), per_acq(d->calls[ST_PUBLISH], x->acqs));
            if (by_sub - by_lua > 0.05 || by_lua - by_sub > 0.05)
                printf("; NOTE acquire attempts by subtraction (lock cmds - releases issued) "
                       "= %.2f, not %.2f",
                       by_sub, by_lua);
        }
        if (x->counts_ok)
            printf("; server time per EVALSHA %.1f µs", x->evalsha_us);
        printf("; leash wakeups per hold %.2f", per_acq((long long)x->wakeups, x->total_holds));
        if (x->self_handoffs)
            printf("; %lld handoffs back to the releaser", (long long)x->self_handoffs);
        if (x->negatives)
            printf("; %lld negative samples (grant seen before the release answer)",
                   (long long)x->negatives);
        if (x->steal_server > 0 || x->steal_bench > 0)
            printf("; CPU steal %lld ms (server CPU) + %lld ms (benchmark CPU)",
                   (long long)x->steal_server, (long long)x->steal_bench);
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
                                             {"help", no_argument, NULL, '?'},
                                             {NULL, 0, NULL, 0}};
    int ns[MAX_CONFIGS], nn = 0, modes = 3, hold_ms = 5, barge = 0, pin = 1, want_ref = 1;
    int64_t handoffs = 0;
    double cap_s = 20.;
    const char *samples_dir = NULL;
    result results[MAX_CONFIGS * 2];
    int nres = 0, i, m, opt, failed = 0;
    int cpus[2];
    bench_cpus bcpus;
    reference ref;
    test_redis r;

    while ((opt = getopt_long(argc, argv, "c:m:H:T:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': {
            char *s = optarg, *end;
            nn = 0;
            while (*s && nn < MAX_CONFIGS) {
                long v = strtol(s, &end, 10);
                if (end == s || v < 1 || v > MAX_CONTENDERS) {
                    fprintf(stderr, "bad contender count in '%s' (1..%d)\n", optarg,
                            MAX_CONTENDERS);
                    return 2;
                }
                ns[nn++] = (int)v;
                s = *end == ',' ? end + 1 : end;
                if (*end != ',' && *end != '\0') {
                    fprintf(stderr, "bad list '%s'\n", optarg);
                    return 2;
                }
            }
            break;
        }
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
        default:
            usage(argv[0]);
            return 2;
        }
    }
    if (nn == 0) {
        ns[nn++] = 2;
        ns[nn++] = 16;
    }
    if (samples_dir != NULL)
        mkdir(samples_dir, 0755);
    signal(SIGPIPE, SIG_IGN);

    if (bench_start_server(&r, NULL, pin, &bcpus) != 0) {
        fprintf(stderr, "handoff: could not start redis-server\n");
        return 1;
    }
    cpus[0] = bcpus.server;
    cpus[1] = bcpus.client;

    memset(&ref, 0, sizeof ref);
    if (want_ref)
        measure_reference(r.port, &ref);
    measure_idle_acquire(r.port, 0, &ref);
    measure_floor(r.port, hold_ms, &ref);

    for (i = 0; i < nn; i++) {
        for (m = 0; m < 3; m++) {
            int64_t h = handoffs > 0 ? handoffs : ns[i] <= 2 ? 2000 : 1000;
            if (!(modes & (1 << m)))
                continue;
            fprintf(stderr, "handoff: %d contenders, %s, %lld handoffs...\n", ns[i], mode_name(m),
                    (long long)h);
            if (run_config(ns[i], m, h, cap_s, hold_ms, barge, &r, cpus, &results[nres],
                           samples_dir) != 0)
                failed = 1;
            nres++;
        }
    }
    test_redis_stop(&r);

    printf("### Lock handoff (leash-bench-handoff)\n\n");
    print_table(results, nres);
    print_notes(results, nres, &ref, hold_ms, barge);
    printf("\n");
    bench_print_cpus(&bcpus);
    return failed ? 1 : 0;
}
